/*
 * gossip/allreduce_hier.c — the hierarchical all-reduce (issue 26, item 3), as NCCL and
 * Horovod reduce across hosts: with H hosts of R ranks each (o->host_of), the buffer is cut in
 * R shards, and rank j of each host (its place among its host's ranks, in rank order):
 *
 *   1. reduce-scatter within the host: sends shard k to the host's rank k and sums the R
 *      contributions to shard j in the host's rank order (fixed: no dependence on timing);
 *   2. all-reduces shard j across the hosts: the pipelined ring (hs_allreduce_create_group)
 *      of the H ranks in place j, in host order;
 *   3. all-gather within the host: sends its shard to the host's other ranks and receives
 *      theirs.
 *
 * Each host's link then carries R x 2 (H - 1) / H x m / R = 2 (H - 1) / H x m bytes each way
 * (a flat ring of the HR ranks, consecutive by host, crosses each host's link with
 * 2 (HR - 1) / HR x m), and the R shards cross in R streams at once. Steps 1 and 3 move
 * (R - 1) / R x m per rank within the host (shared memory in a real job: hsshm under the
 * hybrid transport). The messages are the transport's, so --link shaping and the simulator's
 * NICs see every byte.
 */
#include "gossip/allreduce_hier.h"

#include "hearsay/common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct hs_ar_hier {
    hs_transport_t *t;
    size_t n;
    int P, H, R;       /* ranks, hosts, ranks per host */
    int me;            /* my place on my host (0..R-1) */
    int *local;        /* (R) my host's ranks, ascending */
    size_t *sh;        /* (R + 1) shard k: floats [sh[k], sh[k + 1]) */
    hs_allreduce_t *x; /* the ring of shard me across the hosts */
    float *tmp;        /* (R - 1, max shard) the other ranks' contributions to my shard */
    float *acc;        /* (max shard) their sum */
    hs_treq_t **reqs;  /* (2 (R - 1)) */
    int *peer;         /* (2 (R - 1)) each request's peer (for the error message) */
    uint32_t tag0;     /* first of the intra-host tags; tag_span2 of them */
    uint32_t tag_span2;
    double timeout_s;
    int (*patience)(void *ctx, double waited, double timeout_s); /* (hs_allreduce_opts_t) */
    void *patience_ctx;
    uint64_t ops;
};

int hs_ar_hier_fits(const int *host_of, int P)
{
    if (!host_of || P < 4) return 0;
    int H = 0;
    for (int r = 0; r < P; r++) {
        if (host_of[r] < 0) return 0;
        if (host_of[r] + 1 > H) H = host_of[r] + 1;
    }
    if (H < 2 || P % H) return 0;
    int *cnt = calloc((size_t)H, sizeof *cnt);
    if (!cnt) return 0;
    for (int r = 0; r < P; r++) cnt[host_of[r]]++;
    int ok = 1;
    for (int h = 0; h < H; h++) ok &= cnt[h] == P / H;
    free(cnt);
    return ok && P / H > 1;
}

void hs_ar_hier_destroy(hs_ar_hier_t **hp)
{
    if (!hp || !*hp) return;
    hs_ar_hier_t *h = *hp;
    for (int i = 0; h->reqs && i < 2 * (h->R - 1); i++)
        if (h->reqs[i]) hs_transport_req_free(h->t, &h->reqs[i]);
    hs_allreduce_destroy(&h->x);
    free(h->local);
    free(h->sh);
    free(h->tmp);
    free(h->acc);
    free(h->reqs);
    free(h->peer);
    free(h);
    *hp = NULL;
}

int hs_ar_hier_create(hs_ar_hier_t **out, hs_transport_t *t, size_t n, const hs_allreduce_opts_t *o)
{
    *out = NULL;
    int P = hs_transport_size(t), rank = hs_transport_rank(t);
    if (!hs_ar_hier_fits(o->host_of, P))
        return HS_ERR(-EINVAL, "all-reduce: the hierarchical plan needs several hosts of as "
                               "many ranks each");
    hs_ar_hier_t *h = hs_calloc(1, sizeof *h, "hierarchical all-reduce");
    if (!h) return -ENOMEM;
    h->t = t;
    h->n = n;
    h->P = P;
    for (int r = 0; r < P; r++)
        if (o->host_of[r] + 1 > h->H) h->H = o->host_of[r] + 1;
    h->R = P / h->H;
    int R = h->R, H = h->H, mine = o->host_of[rank];
    h->local = hs_calloc((size_t)R, sizeof *h->local, "hierarchical all-reduce");
    h->sh = hs_calloc((size_t)R + 1, sizeof *h->sh, "hierarchical all-reduce");
    int *cross = hs_calloc((size_t)H, sizeof *cross, "hierarchical all-reduce");
    int *place = hs_calloc((size_t)H, sizeof *place, "hierarchical all-reduce");
    h->reqs = hs_calloc(2 * (size_t)(R - 1), sizeof *h->reqs, "hierarchical all-reduce");
    h->peer = hs_calloc(2 * (size_t)(R - 1), sizeof *h->peer, "hierarchical all-reduce");
    int rc = 0;
    if (!h->local || !h->sh || !cross || !place || !h->reqs || !h->peer) rc = -ENOMEM;
    /* My host's ranks in rank order, my place among them; the rank in that place on each
     * host (hosts in index order): the ring across the hosts. */
    h->me = -1;
    for (int r = 0, k = 0; rc == 0 && r < P; r++)
        if (o->host_of[r] == mine) {
            if (r == rank) h->me = k;
            h->local[k++] = r;
        }
    for (int r = 0; rc == 0 && r < P; r++) {
        int hh = o->host_of[r];
        if (place[hh]++ == h->me) cross[hh] = r;
    }
    size_t q = n / (size_t)R, rem = n % (size_t)R, maxs = q + (rem > 0);
    for (int k = 0; rc == 0 && k < R; k++) h->sh[k + 1] = h->sh[k] + q + ((size_t)k < rem);
    if (rc == 0 && R > 1) {
        h->tmp = hs_malloc((size_t)(R - 1) * maxs * sizeof(float) + 1, "hierarchical all-reduce");
        h->acc = hs_malloc(maxs * sizeof(float) + 1, "hierarchical all-reduce");
        if (!h->tmp || !h->acc) rc = -ENOMEM;
    }
    /* Tags: the first half of the range for the ring across hosts, the second for the
     * exchanges within a host (two per operation). */
    uint32_t base = o->tag_base ? o->tag_base : HS_ALLREDUCE_TAG_BASE;
    uint32_t span = o->tag_span ? o->tag_span : HS_ALLREDUCE_TAG_SPAN;
    h->tag0 = base + span / 2;
    h->tag_span2 = (span / 2) & ~1u;
    h->timeout_s = o->timeout_s > 0 ? o->timeout_s : t->opts.timeout_s;
    if (h->timeout_s <= 0) h->timeout_s = 60;
    h->patience = o->patience;
    h->patience_ctx = o->patience_ctx;
    if (rc == 0) {
        hs_allreduce_opts_t xo = *o;
        xo.host_of = NULL;
        xo.path = HS_AR_PATH_RING;
        xo.average = 0;
        xo.tag_base = base;
        xo.tag_span = span / 2;
        rc = hs_allreduce_create_group(&h->x, t, h->sh[h->me + 1] - h->sh[h->me], &xo, cross, H);
    }
    free(cross);
    free(place);
    if (rc < 0) {
        hs_ar_hier_destroy(&h);
        return rc;
    }
    *out = h;
    return 0;
}

/* hs_transport_waitany on the plan's requests; with a patience callback (a frozen rank
 * makes everyone wait until it wakes or is fenced) in slices of 0.25 s, as long as it says. */
static int waitany(hs_ar_hier_t *h, int n, int *i, hs_tstatus_t *st)
{
    if (!h->patience) return hs_transport_waitany(h->t, h->reqs, n, h->timeout_s, i, st);
    double t0 = hs_now();
    for (;;) {
        *i = -1;
        int rc = hs_transport_waitany(h->t, h->reqs, n, 0.25, i, st);
        if ((rc != -ETIMEDOUT && rc != 0) || *i >= 0) return rc;
        if (h->patience(h->patience_ctx, hs_now() - t0, h->timeout_s) <= 0)
            return rc < 0 ? rc : HS_ERR(-ETIMEDOUT, "no progress in %.1f s", hs_now() - t0);
        hs_error_clear();
    }
}

/* Wait for the nreq requests of phase `what` (every one, within the timeout); on an error the
 * rest are freed. */
static int wait_all(hs_ar_hier_t *h, int nreq, uint64_t op, const char *what)
{
    int rc = 0;
    for (int left = nreq; left > 0 && rc == 0;) {
        int i = -1;
        hs_tstatus_t st = {0};
        rc = waitany(h, nreq, &i, &st);
        if (rc == 0 && i < 0) rc = HS_ERR(-ETIMEDOUT, "no progress in %.1f s", h->timeout_s);
        if (rc < 0) {
            int p = i >= 0 ? h->peer[i] : -1;
            for (int j = 0; j < nreq && p < 0; j++)
                if (h->reqs[j]) p = h->peer[j];
            hs_error_prefix("hierarchical all-reduce #%llu, %s within the host (rank %d)",
                            (unsigned long long)op, what, p);
            break;
        }
        if (h->reqs[i]) hs_transport_req_free(h->t, &h->reqs[i]);
        left--;
    }
    for (int j = 0; j < nreq; j++)
        if (h->reqs[j]) hs_transport_req_free(h->t, &h->reqs[j]);
    return rc;
}

int hs_ar_hier_run(hs_ar_hier_t *h, float *buf, int average)
{
    uint64_t op = h->ops++;
    if (h->n == 0) return 0;
    int R = h->R, me = h->me;
    size_t lo = h->sh[me], len = h->sh[me + 1] - lo, maxs = h->sh[1] - h->sh[0];
    uint32_t tag_rs = h->tag0 + (uint32_t)((2 * op) % h->tag_span2), tag_ag = tag_rs + 1;
    double t0 = hs_now(), t1, t2; /* each phase's time: HEARSAY_LOG=debug */
    /* 1. reduce-scatter within the host */
    int nreq = 0, rc = 0;
    for (int k = 0, slot = 0; k < R && rc == 0; k++) {
        if (k == me) continue;
        size_t klen = h->sh[k + 1] - h->sh[k];
        if (len) {
            h->peer[nreq] = h->local[k];
            rc = hs_transport_irecv(h->t, h->local[k], tag_rs, h->tmp + (size_t)slot * maxs,
                                    len * sizeof(float), &h->reqs[nreq]);
            if (rc == 0) nreq++;
        }
        slot++;
        if (rc == 0 && klen) {
            h->peer[nreq] = h->local[k];
            rc = hs_transport_isend(h->t, h->local[k], tag_rs, buf + h->sh[k], klen * sizeof(float),
                                    &h->reqs[nreq]);
            if (rc == 0) nreq++;
        }
    }
    if (rc < 0)
        hs_error_prefix("hierarchical all-reduce #%llu, reduce-scatter within the host",
                        (unsigned long long)op);
    int wrc = wait_all(h, nreq, op, "reduce-scatter");
    if (rc == 0) rc = wrc;
    if (rc < 0) return rc;
    if (len) { /* the host's sum of my shard, in the host's rank order */
        for (int k = 0, slot = 0; k < R; k++) {
            const float *c = k == me ? buf + lo : h->tmp + (size_t)slot++ * maxs;
            if (k == 0)
                memcpy(h->acc, c, len * sizeof(float));
            else
                for (size_t i = 0; i < len; i++) h->acc[i] += c[i];
        }
        memcpy(buf + lo, h->acc, len * sizeof(float));
    }
    /* 2. my shard across the hosts */
    t1 = hs_now();
    rc = hs_allreduce_run_avg(h->x, buf + lo, 0);
    t2 = hs_now();
    if (rc < 0) {
        hs_error_prefix("hierarchical all-reduce #%llu, shard %d across the %d hosts",
                        (unsigned long long)op, me, h->H);
        return rc;
    }
    if (average) {
        float inv = 1.0f / (float)h->P;
        for (size_t i = 0; i < len; i++) buf[lo + i] *= inv;
    }
    /* 3. all-gather within the host */
    nreq = 0;
    for (int k = 0; k < R && rc == 0; k++) {
        if (k == me) continue;
        size_t klen = h->sh[k + 1] - h->sh[k];
        if (klen) {
            h->peer[nreq] = h->local[k];
            rc = hs_transport_irecv(h->t, h->local[k], tag_ag, buf + h->sh[k], klen * sizeof(float),
                                    &h->reqs[nreq]);
            if (rc == 0) nreq++;
        }
        if (rc == 0 && len) {
            h->peer[nreq] = h->local[k];
            rc = hs_transport_isend(h->t, h->local[k], tag_ag, buf + lo, len * sizeof(float),
                                    &h->reqs[nreq]);
            if (rc == 0) nreq++;
        }
    }
    if (rc < 0)
        hs_error_prefix("hierarchical all-reduce #%llu, all-gather within the host",
                        (unsigned long long)op);
    wrc = wait_all(h, nreq, op, "all-gather");
    HS_DEBUG("hierarchical all-reduce #%llu (rank %d): reduce-scatter within the host %.1f ms, "
             "shard %d across the %d hosts %.1f ms, all-gather %.1f ms",
             (unsigned long long)op, hs_transport_rank(h->t), 1e3 * (t1 - t0), me, h->H,
             1e3 * (t2 - t1), 1e3 * (hs_now() - t2));
    return rc < 0 ? rc : wrc;
}
