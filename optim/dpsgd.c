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
#include "optim/neighbor_xchg.h"
#include "optim/ps_wire.h"

#include <stdlib.h>
#include <string.h>

/* Message tags (offsets in the algorithm's range, hs_dist_tag). */
enum { DPSGD_TAG_NEIGHBOR = 0 }; /* neighbour exchange */

struct hs_algo {
    hs_dist_t *d;
    size_t n, msg_bytes;
    int maxdeg;
    int *peers;          /* (maxdeg) */
    double *wts;         /* (maxdeg) Metropolis weights W_ij */
    unsigned char *sbuf; /* header + x (host), shared by every neighbour's send */
    hs_nx_t nx;          /* receive buffers (header + x_j) and requests, per neighbour */
    hs_stage_t view;     /* a neighbour's x_j where the kernels read it */
};

/* A neighbour's x_j of round t: check its header (it is averaged in after the last one). */
static int on_recv(void *ctx, int slot, const unsigned char *msg, const hs_tstatus_t *st, long t)
{
    hs_algo_t *a = ctx;
    (void)slot;
    const hs_ps_hdr_v1_t *h = (const hs_ps_hdr_v1_t *)msg;
    HS_TRY(hs_ps_hdr_check(h, st->len, HS_PS_NEIGHBOR, st->source, a->n));
    return hs_nx_check_round(&a->nx, h, st, t);
}

static int dpsgd_step(hs_algo_t *a, long t)
{
    hs_dist_t *d = a->d;
    hs_kernels_t *k = d->k;
    float *x = d->params;
    HS_TRY(hs_dist_apply(d, 1.0));

    /* the previous round's sends must be done before the snapshot is overwritten */
    HS_TRY(hs_nx_wait_sends(&a->nx, t - 1));

    double t0 = hs_exec_now(d->x);
    int cnt = 0;
    double self = 0;
    HS_TRY(hs_topo_out_peers(d->topo, t, d->rank, a->peers, a->wts, a->maxdeg, &cnt, &self));
    HS_TRY(hs_nx_post_recvs(&a->nx, cnt, hs_dist_tag(d, DPSGD_TAG_NEIGHBOR)));
    hs_ps_hdr_v1_t *h = (hs_ps_hdr_v1_t *)a->sbuf;
    hs_ps_hdr_init(h, HS_PS_NEIGHBOR, d->rank, t, 1.0, a->n);
    HS_TRY(k->ops->to_host(k, a->sbuf + sizeof *h, x, a->n * sizeof(float)));
    for (int i = 0; i < cnt; i++)
        HS_TRY(hs_nx_send(&a->nx, i, hs_dist_tag(d, DPSGD_TAG_NEIGHBOR), a->sbuf, a->msg_bytes));
    d->st.comm_s += hs_exec_now(d->x) - t0;

    HS_TRY(hs_nx_wait_recvs(&a->nx, cnt, t, on_recv, a));

    t0 = hs_exec_now(d->x);
    HS_TRY(k->ops->scale(k, a->n, (float)self, x));
    for (int i = 0; i < cnt; i++) {
        const float *xj = (const float *)(a->nx.rbuf[i] + sizeof(hs_ps_hdr_v1_t));
        HS_TRY(hs_stage_view(&a->view, xj, a->n, &xj));
        hs_trace_apply_msg(d->x->trace, d->rank, a->peers[i], hs_dist_tag(d, DPSGD_TAG_NEIGHBOR),
                           a->nx.rbuf[i], a->msg_bytes); /* --trace */
        HS_TRY(k->ops->axpy(k, a->n, (float)a->wts[i], xj, x));
        hs_trace_end(d->x->trace, HS_TR_APPLY);
    }
    d->st.comm_s += hs_exec_now(d->x) - t0;
    return 0;
}

static int dpsgd_drain(hs_algo_t *a, int final)
{
    (void) final;
    return hs_nx_drain(&a->nx);
}

static void dpsgd_finalize(hs_algo_t **ap)
{
    hs_algo_t *a = ap ? *ap : NULL;
    if (!a) return;
    hs_nx_finalize(&a->nx);
    free(a->sbuf);
    free(a->peers);
    free(a->wts);
    hs_stage_close(&a->view);
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
    a->maxdeg = HS_MAX(1, hs_topo_max_out_degree(d->topo));
    int rc = -ENOMEM;
    a->peers = hs_calloc((size_t)a->maxdeg, sizeof *a->peers, "neighbours");
    a->wts = hs_calloc((size_t)a->maxdeg, sizeof *a->wts, "weights");
    a->sbuf = hs_malloc(a->msg_bytes, "send snapshot");
    if (!a->peers || !a->wts || !a->sbuf) goto fail;
    if ((rc = hs_nx_init(&a->nx, d, "D-PSGD", a->maxdeg, a->msg_bytes, a->peers, a->peers)) < 0)
        goto fail;
    if ((rc = hs_stage_view_open(&a->view, d->k, a->n, "D-PSGD neighbour's model")) < 0) goto fail;
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
    .msg_header = sizeof(hs_ps_hdr_v1_t), /* its wire header (--sim-payload) */
};
