/*
 * optim/neighbor_xchg.c — the synchronous neighbour exchange shared by D-PSGD, CHOCO-SGD and
 * the compressed push-sum (optim/neighbor_xchg.h).
 */
#include "optim/neighbor_xchg.h"
#include "hearsay/common.h"

#include <stdlib.h>
#include <string.h>

int hs_nx_init(hs_nx_t *x, hs_dist_t *d, const char *name, int maxdeg, size_t cap, const int *to,
               const int *from)
{
    *x = (hs_nx_t){.d = d, .name = name, .maxdeg = maxdeg, .cap = cap, .to = to, .from = from};
    x->sreq = hs_calloc((size_t)maxdeg, sizeof *x->sreq, "send requests");
    x->rreq = hs_calloc((size_t)maxdeg, sizeof *x->rreq, "receive requests");
    x->rbuf = hs_calloc((size_t)maxdeg, sizeof *x->rbuf, "receive buffers");
    if (!x->sreq || !x->rreq || !x->rbuf) return -ENOMEM;
    for (int i = 0; i < maxdeg; i++)
        if (!(x->rbuf[i] = hs_malloc(cap, "neighbour buffer"))) return -ENOMEM;
    return 0;
}

void hs_nx_finalize(hs_nx_t *x)
{
    for (int i = 0; i < x->maxdeg; i++) {
        if (x->sreq && x->sreq[i]) hs_transport_req_free(x->d->t, &x->sreq[i]);
        if (x->rreq && x->rreq[i]) hs_transport_req_free(x->d->t, &x->rreq[i]);
        if (x->rbuf) free(x->rbuf[i]);
    }
    free(x->sreq);
    free(x->rreq);
    free(x->rbuf);
    x->sreq = x->rreq = NULL;
    x->rbuf = NULL;
    x->nsend = 0;
}

/* Wait for every request in reqs (bounded); a failure is an error naming the peer. Received
 * messages go to fn once all of them are in, in slot order (never arrival order: the sums the
 * handlers make are then the same whatever the timing). */
typedef struct nx_wait {
    hs_nx_t *x;
    long t;
    int recv;
    hs_tstatus_t *sts;
    unsigned char *got;
} nx_wait_t;

/* A request of wait_all ended: a failed one reports its peer and ends the wait. */
static int nx_done(void *ctx, int idx, int rc, const hs_tstatus_t *st)
{
    nx_wait_t *w = ctx;
    if (rc < 0) {
        hs_dist_peer_failed(w->x->d, (w->recv ? w->x->from : w->x->to)[idx], w->t, hs_last_error());
        return rc;
    }
    if (w->recv) w->sts[idx] = *st, w->got[idx] = 1;
    return 0;
}

static int wait_all(hs_nx_t *x, hs_treq_t **reqs, int n, long t, int recv, hs_nx_recv_fn fn,
                    void *ctx)
{
    hs_dist_t *d = x->d;
    hs_tstatus_t sts_stack[64], *sts = sts_stack; /* (n) the status of each received slot */
    unsigned char got_stack[64], *got = got_stack;
    if (recv && n > 64) {
        sts = hs_malloc((size_t)n * sizeof *sts, "receive statuses");
        got = hs_malloc((size_t)n, "receive flags");
        if (!sts || !got) {
            if (sts != sts_stack) free(sts);
            if (got != got_stack) free(got);
            return -ENOMEM;
        }
    }
    if (recv) memset(got, 0, (size_t)n);
    nx_wait_t w = {.x = x, .t = t, .recv = recv, .sts = sts, .got = got};
    /* a neighbour that heartbeats is waited for (bounded), a fenced one ends the round */
    int rc = hs_dist_wait_peers(d, reqs, recv ? x->from : x->to, n, d->o->comm_timeout_s, 0,
                                nx_done, &w);
    if (rc < 0) hs_error_prefix("%s round %ld, %s", x->name, t, recv ? "receive" : "send");
    for (int i = 0; rc == 0 && recv && i < n; i++) {
        if (!got[i]) continue;
        if ((rc = fn(ctx, i, x->rbuf[i], &sts[i], t)) < 0) break;
        d->st.bytes_recv += sts[i].len;
        d->st.msgs_applied++;
    }
    if (sts != sts_stack) free(sts);
    if (got != got_stack) free(got);
    return rc;
}

int hs_nx_wait_sends(hs_nx_t *x, long t)
{
    hs_dist_t *d = x->d;
    double t0 = hs_exec_now(d->x);
    HS_TRY(wait_all(x, x->sreq, x->nsend, t, 0, NULL, NULL));
    d->st.wait_s += hs_exec_now(d->x) - t0;
    return 0;
}

int hs_nx_post_recvs(hs_nx_t *x, int cnt, int tag)
{
    for (int i = 0; i < cnt; i++)
        HS_TRY(hs_transport_irecv(x->d->t, x->from[i], tag, x->rbuf[i], x->cap, &x->rreq[i]));
    return 0;
}

int hs_nx_send(hs_nx_t *x, int slot, int tag, const void *buf, size_t len)
{
    HS_TRY(hs_transport_isend(x->d->t, x->to[slot], tag, buf, len, &x->sreq[slot]));
    x->d->st.bytes_sent += len;
    x->nsend = HS_MAX(x->nsend, slot + 1);
    return 0;
}

int hs_nx_wait_recvs(hs_nx_t *x, int cnt, long t, hs_nx_recv_fn fn, void *ctx)
{
    hs_dist_t *d = x->d;
    double t0 = hs_exec_now(d->x), c0 = d->st.comm_s;
    HS_TRY(wait_all(x, x->rreq, cnt, t, 1, fn, ctx));
    d->st.wait_s += hs_exec_now(d->x) - t0 - (d->st.comm_s - c0);
    return 0;
}

int hs_nx_drain(hs_nx_t *x)
{
    hs_dist_t *d = x->d;
    double t0 = hs_exec_now(d->x);
    int rc = wait_all(x, x->sreq, x->nsend, d->iter, 0, NULL, NULL);
    x->nsend = 0;
    d->st.wait_s += hs_exec_now(d->x) - t0;
    return rc;
}

int hs_nx_check_round(const hs_nx_t *x, const hs_ps_hdr_v1_t *h, const hs_tstatus_t *st, long t)
{
    if (h->iteration != t)
        return HS_ERR(-EPROTO, "%s: rank %d got round %lld from rank %d in round %ld", x->name,
                      x->d->rank, (long long)h->iteration, st->source, t);
    return 0;
}

int hs_nx_check_compressed(const hs_nx_t *x, const hs_ps_hdr_v1_t *h, const hs_tstatus_t *st,
                           size_t n, long t, int weighted)
{
    if (st->len < sizeof *h || h->magic != HS_PS_MAGIC || h->version != HS_PS_VERSION ||
        h->kind != HS_PS_COMPRESSED || h->sender != st->source || h->length != n ||
        h->extra != st->len - sizeof *h || (weighted && !(h->weight >= 0)))
        return HS_ERR(-EPROTO,
                      "%s: rank %d got a malformed message of %zu bytes from rank %d (do all "
                      "ranks run the same --model and --compress?)",
                      x->name, x->d->rank, st->len, st->source);
    return hs_nx_check_round(x, h, st, t);
}

void hs_nx_wait_free(hs_dist_t *d, hs_treq_t **reqs, int n)
{
    for (int i = 0; i < n; i++) {
        hs_exec_wait1(d->x, &reqs[i], d->o->comm_timeout_s, 0, NULL);
        if (reqs[i]) hs_transport_req_free(d->t, &reqs[i]);
    }
}

void hs_nx_free_reqs(hs_dist_t *d, hs_treq_t **reqs, int n)
{
    for (int i = 0; i < n; i++)
        if (reqs[i]) hs_transport_req_free(d->t, &reqs[i]);
}
