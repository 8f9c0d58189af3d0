/*
 * optim/dpsgd.c — D-PSGD (Lian et al. 2017): symmetric neighbour averaging with
 * Metropolis–Hastings weights over an undirected graph (static or time-varying).
 *
 * Round t (adapt, then combine): the local step on x (the model's own parameters), then x is
 * sent to every neighbour of iteration t and x <- W_ii x + sum_j W_ij x_j once every
 * neighbour's x of the same round has arrived. A worker waits for its neighbours only (never
 * the whole job), which keeps neighbourhoods in step. Messages from one neighbour arrive in
 * order on one tag, and a neighbour cannot be more than one round ahead (it needs this
 * rank's round-t message to finish round t), so a receive posted per neighbour and round
 * always matches that round. A failed neighbour stops the run with an error: D-PSGD has no
 * push-sum weight to absorb a lost share (docs/algorithms.md, "Failures").
 */
#include "hearsay/algo.h"
#include "hearsay/common.h"
#include "optim/ps_wire.h"

#include <stdlib.h>
#include <string.h>

struct hs_algo {
    hs_dist_t *d;
    size_t n, msg_bytes;
    int on_host, maxdeg;
    int *peers;           /* (maxdeg) */
    double *wts;          /* (maxdeg) Metropolis weights W_ij */
    unsigned char *sbuf;  /* header + x (host), shared by every neighbour's send */
    unsigned char **rbuf; /* (maxdeg) header + x_j */
    hs_treq_t **sreq;     /* (maxdeg) */
    hs_treq_t **rreq;     /* (maxdeg) */
    int nsend;
    float *scratch; /* (n) device staging (non-CPU backends) */
};

/* Wait for every request in reqs (bounded); a failure is an error naming the peer. */
static int wait_all(hs_algo_t *a, hs_treq_t **reqs, int n, long t, const char *what)
{
    hs_dist_t *d = a->d;
    for (;;) {
        int left = 0;
        for (int i = 0; i < n; i++) left += reqs[i] != NULL;
        if (!left) return 0;
        int idx = -1;
        hs_tstatus_t st;
        int rc = hs_exec_wait(d->x, reqs, n, d->o->comm_timeout_s, 0, &idx, &st);
        if (rc < 0) {
            if (idx >= 0) hs_dist_peer_failed(d, a->peers[idx], t, hs_last_error());
            hs_error_prefix("D-PSGD round %ld, %s", t, what);
            return rc;
        }
        if (what[0] == 'r' && idx >= 0) { /* a receive: check the header */
            const hs_ps_hdr_v1_t *h = (const hs_ps_hdr_v1_t *)a->rbuf[idx];
            HS_TRY(hs_ps_hdr_check(h, st.len, HS_PS_NEIGHBOR, st.source, a->n));
            if (h->iteration != t)
                return HS_ERR(-EPROTO, "D-PSGD: rank %d got round %lld from rank %d in round %ld",
                              d->rank, (long long)h->iteration, st.source, t);
            d->st.bytes_recv += st.len;
            d->st.msgs_applied++;
        }
    }
}

static int dpsgd_step(hs_algo_t *a, long t)
{
    hs_dist_t *d = a->d;
    hs_kernels_t *k = d->k;
    float *x = d->params;
    HS_TRY(hs_dist_apply(d, 1.0));

    double t0 = hs_exec_now(d->x);
    /* the previous round's sends must be done before the snapshot is overwritten */
    HS_TRY(wait_all(a, a->sreq, a->nsend, t - 1, "send"));
    d->st.wait_s += hs_exec_now(d->x) - t0;

    t0 = hs_exec_now(d->x);
    int cnt = 0;
    double self = 0;
    HS_TRY(hs_topo_out_peers(d->topo, t, d->rank, a->peers, a->wts, a->maxdeg, &cnt, &self));
    for (int i = 0; i < cnt; i++) {
        HS_TRY(hs_transport_irecv(d->t, a->peers[i], HS_TAG_NEIGHBOR, a->rbuf[i], a->msg_bytes,
                                  &a->rreq[i]));
    }
    hs_ps_hdr_v1_t *h = (hs_ps_hdr_v1_t *)a->sbuf;
    hs_ps_hdr_init(h, HS_PS_NEIGHBOR, d->rank, t, 1.0, a->n);
    HS_TRY(k->ops->to_host(k, a->sbuf + sizeof *h, x, a->n * sizeof(float)));
    for (int i = 0; i < cnt; i++) {
        HS_TRY(hs_transport_isend(d->t, a->peers[i], HS_TAG_NEIGHBOR, a->sbuf, a->msg_bytes,
                                  &a->sreq[i]));
        d->st.bytes_sent += a->msg_bytes;
    }
    a->nsend = cnt;
    d->st.comm_s += hs_exec_now(d->x) - t0;

    t0 = hs_exec_now(d->x);
    HS_TRY(wait_all(a, a->rreq, cnt, t, "receive"));
    d->st.wait_s += hs_exec_now(d->x) - t0;

    t0 = hs_exec_now(d->x);
    HS_TRY(k->ops->scale(k, a->n, (float)self, x));
    for (int i = 0; i < cnt; i++) {
        const float *xj = (const float *)(a->rbuf[i] + sizeof(hs_ps_hdr_v1_t));
        if (!a->on_host) {
            HS_TRY(k->ops->to_device(k, a->scratch, xj, a->n * sizeof(float)));
            xj = a->scratch;
        }
        hs_trace_apply_msg(d->x->trace, d->rank, a->peers[i], HS_TAG_NEIGHBOR, a->rbuf[i],
                           a->msg_bytes); /* --trace */
        HS_TRY(k->ops->axpy(k, a->n, (float)a->wts[i], xj, x));
        hs_trace_end(d->x->trace, HS_TR_APPLY);
    }
    d->st.comm_s += hs_exec_now(d->x) - t0;
    return 0;
}

static int dpsgd_drain(hs_algo_t *a, int final)
{
    (void) final;
    hs_dist_t *d = a->d;
    double t0 = hs_exec_now(d->x);
    int rc = wait_all(a, a->sreq, a->nsend, d->iter, "send");
    a->nsend = 0;
    d->st.wait_s += hs_exec_now(d->x) - t0;
    return rc;
}

static void dpsgd_finalize(hs_algo_t **ap)
{
    hs_algo_t *a = ap ? *ap : NULL;
    if (!a) return;
    hs_dist_t *d = a->d;
    for (int i = 0; i < a->maxdeg; i++) {
        if (a->sreq && a->sreq[i]) hs_transport_req_free(d->t, &a->sreq[i]);
        if (a->rreq && a->rreq[i]) hs_transport_req_free(d->t, &a->rreq[i]);
        if (a->rbuf) free(a->rbuf[i]);
    }
    free(a->sreq);
    free(a->rreq);
    free(a->rbuf);
    free(a->sbuf);
    free(a->peers);
    free(a->wts);
    if (a->scratch) d->k->ops->free(d->k, a->scratch);
    free(a);
    *ap = NULL;
}

static int dpsgd_init(hs_algo_t **out, hs_dist_t *d)
{
    *out = NULL;
    if (!d->topo) return HS_ERR(-EINVAL, "D-PSGD needs a graph (--graph)");
    if (!hs_topo_undirected(d->topo))
        return HS_ERR(-EINVAL,
                      "--algo dpsgd needs an undirected graph, and --graph %s is directed "
                      "(try biring, torus, hypercube, complete or exp)",
                      hs_topo_spec(d->topo));
    hs_algo_t *a = hs_calloc(1, sizeof *a, "D-PSGD state");
    if (!a) return -ENOMEM;
    a->d = d;
    a->n = d->n;
    a->msg_bytes = sizeof(hs_ps_hdr_v1_t) + a->n * sizeof(float);
    a->on_host = d->k->device == HS_DEV_CPU;
    a->maxdeg = HS_MAX(1, hs_topo_max_out_degree(d->topo));
    int rc = -ENOMEM;
    a->peers = hs_calloc((size_t)a->maxdeg, sizeof *a->peers, "neighbours");
    a->wts = hs_calloc((size_t)a->maxdeg, sizeof *a->wts, "weights");
    a->sreq = hs_calloc((size_t)a->maxdeg, sizeof *a->sreq, "send requests");
    a->rreq = hs_calloc((size_t)a->maxdeg, sizeof *a->rreq, "receive requests");
    a->rbuf = hs_calloc((size_t)a->maxdeg, sizeof *a->rbuf, "receive buffers");
    a->sbuf = hs_malloc(a->msg_bytes, "send snapshot");
    if (!a->peers || !a->wts || !a->sreq || !a->rreq || !a->rbuf || !a->sbuf) goto fail;
    for (int i = 0; i < a->maxdeg; i++)
        if (!(a->rbuf[i] = hs_malloc(a->msg_bytes, "neighbour buffer"))) goto fail;
    if (!a->on_host &&
        (rc = d->k->ops->alloc(d->k, a->n * sizeof(float), (void **)&a->scratch)) < 0)
        goto fail;
    *out = a;
    return 0;
fail:
    dpsgd_finalize(&a);
    return rc;
}

const hs_algo_ops_t hs_algo_dpsgd_ops = {
    .size = sizeof(hs_algo_ops_t),
    .name = "dpsgd",
    .help = "D-PSGD: Metropolis neighbour averaging on an undirected graph",
    .flags = HS_ALGO_GRAPH | HS_ALGO_UNDIRECTED | HS_ALGO_COMM,
    .default_graph = "biring",
    .init = dpsgd_init,
    .step = dpsgd_step,
    .drain = dpsgd_drain,
    .finalize = dpsgd_finalize,
};
