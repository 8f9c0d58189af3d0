/*
 * optim/efsgd.c — error-feedback SGD (EF-SGD, Karimireddy, Rebjock, Stich, Jaggi, ICML 2019,
 * Algorithm 2) for all-reduce SGD with `--compress SPEC`.
 *
 * Every rank i, round t (g_i its gradient, e_i its error memory, 0 at the start):
 *
 *     p_i = g_i + e_i           the gradient corrected by what earlier rounds dropped
 *     D_i = C(p_i)              compressed, sent to every other rank
 *     e_i = p_i - D_i           kept for the next round
 *     g   = (1/N) sum_j D_j     the same on every rank (summed in rank order)
 *
 * and then the local optimizer's step with g (learning rate, momentum, weight decay as in
 * uncompressed all-reduce SGD), so the replicas stay identical. The paper compresses
 * p = lr g + e; here e is kept in gradient units because the learning rate is applied after
 * the exchange (the same update for a constant learning rate; with a schedule e carries
 * gradients of the earlier rate).
 *
 * The ring all-reduce cannot add compressed vectors, so the compressed D_i are all-gathered:
 * every rank sends its D_i to every other rank (N - 1 messages of the compressed size, against
 * 2 (N - 1) / N of the float32 gradient for the ring). Fine for the few ranks of a slow-link
 * study; with many ranks the ring wins unless the compression ratio beats N / 2. The gradient,
 * p_i and e_i stay where the model is (the kernels' memory) and the compressors are bound to it
 * (hs_compress_dev): on a GPU only the compressed bytes cross to the host.
 *
 * Buckets (--bucket-mb, as the all-reduce's): the gradient is cut into the same buckets of whole
 * layers, last first, and each bucket is a part exchanged on its own (its own compressor, tag
 * and messages). Where the loop offers gradient-ready notifications, a bucket is compressed and
 * its messages are sent from the notification, on the training thread, while backward goes on
 * with the earlier layers; step() then waits for the others' parts and sums them. One part (a
 * model under one bucket, --bucket-mb 0, or no notifications to hook) is the exchange above,
 * bit for bit. With several, each part is compressed alone (top-k keeps k per part), so the
 * trajectory differs from the flat exchange's, as DDP's bucketed compression hooks do.
 */
#include "optim/efsgd.h"

#include "hearsay/common.h"
#include "hearsay/compress.h"
#include "optim/ps_wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One part of the gradient, exchanged as a unit: all of it, or a bucket. */
typedef struct ef_part {
    size_t lo, len, cap;  /* floats [lo, lo + len); bytes of a message */
    int la;               /* its first gradient layer (buckets) */
    uint32_t tag;         /* its messages' tag (hs_dist_tag offset EFSGD_TAG_GATHER + index) */
    hs_compressor_t *c;   /* compresses p_i */
    hs_compressor_t *dc;  /* decompresses the others' D_j */
    unsigned char *sbuf;  /* header + D_i */
    unsigned char **rbuf; /* (size) header + D_j */
    hs_treq_t **sreq;     /* (size) */
    hs_treq_t **rreq;     /* (size) */
    long posted;          /* the round whose messages it posted last (-1: none) */
} ef_part_t;

struct efsgd {
    hs_dist_t *d;
    size_t n;
    float *e;      /* (n, device) error memory */
    float *p;      /* (n, device) p_i */
    int *ranks;    /* (size) 0, 1, ..: the peer of each request slot */
    int np;        /* parts */
    ef_part_t *pt; /* (np), in backward order: part 0 holds the last layers */
    int hooked;    /* parts are posted from the gradient-ready notifications */
    int next;      /* hook: the next part to post this round */
    int lowest;    /* hook: the lowest gradient layer final so far */
    long round;    /* the round the next exchange is (the notifications' round) */
    int synced;    /* 1 once an exchange ended well: round is the next one for sure */
};

typedef struct ef_wait {
    efsgd_t *e;
    const ef_part_t *pt;
    long t;
    int recv, bad; /* bad: a received message failed its checks */
} ef_wait_t;

/* A request of wait_all ended: a failed one reports its peer; a received one is checked. */
static int ef_done(void *ctx, int idx, int rc, const hs_tstatus_t *st)
{
    ef_wait_t *w = ctx;
    efsgd_t *e = w->e;
    hs_dist_t *d = e->d;
    if (rc < 0) {
        hs_dist_peer_failed(d, idx, w->t, hs_last_error());
        return rc;
    }
    if (!w->recv) return 0;
    w->bad = 1;
    const hs_ps_hdr_v1_t *h = (const hs_ps_hdr_v1_t *)w->pt->rbuf[idx];
    if (st->len < sizeof *h || h->magic != HS_PS_MAGIC || h->version != HS_PS_VERSION ||
        h->kind != HS_PS_COMPRESSED || h->sender != st->source || h->length != w->pt->len ||
        h->extra != st->len - sizeof *h)
        return HS_ERR(-EPROTO,
                      "EF-SGD: rank %d got a malformed message of %zu bytes from rank %d "
                      "(do all ranks run the same --model, --compress and --bucket-mb?)",
                      d->rank, st->len, st->source);
    if (h->iteration != w->t)
        return HS_ERR(-EPROTO, "EF-SGD: rank %d got round %lld from rank %d in round %ld", d->rank,
                      (long long)h->iteration, st->source, w->t);
    w->bad = 0;
    d->st.bytes_recv += st->len;
    d->st.msgs_applied++;
    return 0;
}

/* Wait for every request of one part (bounded; heartbeat-aware: a frozen peer is waited for
 * until it wakes or is fenced); a failure is an error naming the peer (ranks index). */
static int wait_all(efsgd_t *e, const ef_part_t *pt, hs_treq_t **reqs, long t, int recv)
{
    hs_dist_t *d = e->d;
    ef_wait_t w = {.e = e, .pt = pt, .t = t, .recv = recv};
    int rc = hs_dist_wait_peers(d, reqs, e->ranks, d->size, d->o->comm_timeout_s, 0, ef_done, &w);
    if (rc < 0 && !w.bad) {
        if (e->np > 1)
            hs_error_prefix("EF-SGD round %ld, bucket %d, %s", t, (int)(pt - e->pt),
                            recv ? "receive" : "send");
        else
            hs_error_prefix("EF-SGD round %ld, %s", t, recv ? "receive" : "send");
    }
    return rc;
}

/* From a notification (inside backward): 1 when every send of pt's last round has completed,
 * 0 while one is still under way (the part is then posted in step, which waits); polled, never
 * waiting, nor running the loop's idle hook. A failed send is reported with its peer. */
static int sends_done(efsgd_t *e, ef_part_t *pt)
{
    hs_dist_t *d = e->d;
    for (;;) {
        int idx = -1;
        hs_tstatus_t st;
        int rc = hs_exec_wait(d->x, pt->sreq, d->size, 0, HS_WAIT_NO_IDLE, &idx, &st);
        if (rc == -ETIMEDOUT) return 0;
        if (rc < 0 && idx >= 0) {
            hs_dist_peer_failed(d, idx, pt->posted, hs_last_error());
            return rc;
        }
        if (rc < 0) return rc;
        if (idx < 0) return 1; /* none left */
    }
}

/* Round t, part pt: post the receives, compress p = g + e over the part, send D_i to every
 * other rank, keep e = p - D_i. Its sends of the round before must be done first (the buffer).
 * from_hook: called from a notification, inside backward. */
static int part_post(efsgd_t *e, ef_part_t *pt, long t, int from_hook)
{
    hs_dist_t *d = e->d;
    if (pt->posted == t)
        return HS_ERR(-EPROTO, "EF-SGD: bucket %d posted twice in round %ld", (int)(pt - e->pt), t);
    double t0 = hs_exec_now(d->x);
    HS_TRY(wait_all(e, pt, pt->sreq, t - 1, 0));
    d->st.wait_s += hs_exec_now(d->x) - t0;

    t0 = hs_exec_now(d->x);
    const uint32_t tag = hs_dist_tag(d, pt->tag);
    for (int j = 0; j < d->size; j++)
        if (j != d->rank)
            HS_TRY(hs_transport_irecv(d->t, j, tag, pt->rbuf[j], pt->cap, &pt->rreq[j]));
    hs_kernels_t *k = d->k;
    const float *g = d->grads + pt->lo;
    float *p = e->p + pt->lo, *er = e->e + pt->lo;
    HS_TRY(k->ops->copy(k, p, g, pt->len * sizeof(float))); /* p = g + e */
    HS_TRY(k->ops->axpy(k, pt->len, 1.0f, er, p));
    hs_ps_hdr_v1_t *h = (hs_ps_hdr_v1_t *)pt->sbuf;
    unsigned char *q = pt->sbuf + sizeof *h;
    size_t qbytes = 0;
    HS_TRY(hs_compress_dev(pt->c, p, q, &qbytes));
    hs_ps_hdr_init(h, HS_PS_COMPRESSED, d->rank, t, 1.0, pt->len);
    h->extra = (uint32_t)qbytes;
    for (int j = 0; j < d->size; j++) {
        if (j == d->rank) continue;
        HS_TRY(hs_transport_isend(d->t, j, tag, pt->sbuf, sizeof *h + qbytes, &pt->sreq[j]));
        d->st.bytes_sent += sizeof *h + qbytes;
    }
    /* e = p - C(p) (C(p) still where the vectors are) */
    HS_TRY(k->ops->copy(k, er, p, pt->len * sizeof(float)));
    HS_TRY(hs_decompress_add_dev(pt->c, NULL, 0, -1.0f, er));
    pt->posted = t;
    /* from a notification its time is backward's: the loop counts it as compute already */
    if (!from_hook) d->st.comm_s += hs_exec_now(d->x) - t0;
    return 0;
}

/* Round t, part pt: wait for the others' D_j, then g = (1/N) sum_j D_j over the part, in rank
 * order on every rank (the replicas stay bit-identical). */
static int part_finish(efsgd_t *e, ef_part_t *pt, long t)
{
    hs_dist_t *d = e->d;
    double t0 = hs_exec_now(d->x);
    HS_TRY(wait_all(e, pt, pt->rreq, t, 1));
    d->st.wait_s += hs_exec_now(d->x) - t0;

    t0 = hs_exec_now(d->x);
    hs_kernels_t *k = d->k;
    float *g = d->grads + pt->lo;
    HS_TRY(k->ops->zero(k, g, pt->len * sizeof(float)));
    const float inv = 1.0f / (float)d->size;
    for (int j = 0; j < d->size; j++) {
        /* this rank's D_i: the compressor's own bytes, still where the vectors are */
        int rc;
        if (j == d->rank) {
            rc = hs_decompress_add_dev(pt->c, NULL, 0, inv, g);
        } else {
            const hs_ps_hdr_v1_t *hj = (const hs_ps_hdr_v1_t *)pt->rbuf[j];
            rc = hs_decompress_add_dev(pt->dc, pt->rbuf[j] + sizeof *hj, hj->extra, inv, g);
        }
        if (rc < 0) {
            hs_error_prefix("EF-SGD: message from rank %d", j);
            return rc;
        }
    }
    d->st.comm_s += hs_exec_now(d->x) - t0;
    return 0;
}

/* hs_grads_ready_fn: layers [la, lb) are final; a bucket goes once its first layer is. */
static int ef_grads_ready(void *fctx, int la, int lb)
{
    efsgd_t *e = fctx;
    (void)lb;
    if (la < e->lowest) e->lowest = la;
    /* before the first exchange the round is not known for sure: step posts everything */
    while (e->synced && e->next < e->np && e->pt[e->next].la >= e->lowest) {
        ef_part_t *pt = &e->pt[e->next++];
        int rc = sends_done(e, pt);
        if (rc == 1) rc = part_post(e, pt, e->round, 1);
        if (rc < 0) {
            hs_error_prefix("EF-SGD round %ld, bucket %d", e->round, (int)(pt - e->pt));
            return rc;
        }
    }
    return 0;
}

int efsgd_exchange(efsgd_t *e, long t)
{
    hs_dist_t *d = e->d;
    int rc = 0;
    /* the notifications posted parts for e->round: it must be this one */
    for (int b = 0; b < e->np && rc == 0; b++)
        if (e->pt[b].posted == e->round && e->round != t)
            rc = HS_ERR(-EPROTO,
                        "EF-SGD: bucket %d was sent for round %ld during the backward of round %ld",
                        b, e->round, t);
    for (int b = 0; b < e->np && rc == 0; b++)
        if (e->pt[b].posted != t) rc = part_post(e, &e->pt[b], t, 0);
    for (int b = 0; b < e->np && rc == 0; b++) rc = part_finish(e, &e->pt[b], t);
    e->next = 0;
    e->lowest = d->n_glayers;
    e->round = t + 1;
    e->synced = rc == 0;
    return rc;
}

int efsgd_drain(efsgd_t *e)
{
    hs_dist_t *d = e->d;
    double t0 = hs_exec_now(d->x);
    int rc = 0;
    for (int b = 0; b < e->np && rc == 0; b++)
        rc = wait_all(e, &e->pt[b], e->pt[b].sreq, d->iter, 0);
    d->st.wait_s += hs_exec_now(d->x) - t0;
    return rc;
}

static void part_free(hs_dist_t *d, ef_part_t *pt)
{
    for (int i = 0; i < d->size; i++) {
        if (pt->sreq && pt->sreq[i]) hs_transport_req_free(d->t, &pt->sreq[i]);
        if (pt->rreq && pt->rreq[i]) hs_transport_req_free(d->t, &pt->rreq[i]);
        if (pt->rbuf) free(pt->rbuf[i]);
    }
    free(pt->sreq);
    free(pt->rreq);
    free(pt->rbuf);
    free(pt->sbuf);
    hs_compressor_destroy(&pt->c);
    hs_compressor_destroy(&pt->dc);
}

void efsgd_destroy(efsgd_t **ep)
{
    efsgd_t *e = ep ? *ep : NULL;
    if (!e) return;
    hs_dist_t *d = e->d;
    if (e->hooked) (void)hs_dist_on_grads(d, NULL, NULL);
    for (int b = 0; e->pt && b < e->np; b++) part_free(d, &e->pt[b]);
    free(e->pt);
    free(e->ranks);
    d->k->ops->free(d->k, e->e);
    d->k->ops->free(d->k, e->p);
    free(e);
    *ep = NULL;
}

/* Part b: floats [lo, lo + len), its compressors (seeded per rank and part: part 0 as the flat
 * exchange), buffers and requests. */
static int part_init(efsgd_t *e, int b, size_t lo, size_t len, const char *spec, uint64_t seed)
{
    hs_dist_t *d = e->d;
    ef_part_t *pt = &e->pt[b];
    pt->lo = lo;
    pt->len = len;
    pt->posted = -1;
    pt->tag = EFSGD_TAG_GATHER + (uint32_t)b;
    uint64_t s = seed ^ ((uint64_t)b * 0xbf58476d1ce4e5b9ull);
    int rc = hs_compressor_create(&pt->c, spec, len, s);
    if (rc < 0 || (rc = hs_compressor_create(&pt->dc, spec, len, s)) < 0 ||
        (rc = hs_compressor_bind(pt->c, d->k)) < 0 || (rc = hs_compressor_bind(pt->dc, d->k)) < 0) {
        hs_error_prefix("--algo allreduce");
        return rc;
    }
    if (hs_compressor_max_bytes(pt->c) > UINT32_MAX)
        return HS_ERR(-EINVAL,
                      "--algo allreduce --compress: %zu bytes of compressed gradient do "
                      "not fit a message header's 32-bit length",
                      hs_compressor_max_bytes(pt->c));
    pt->cap = sizeof(hs_ps_hdr_v1_t) + hs_compressor_max_bytes(pt->c);
    const size_t N = (size_t)d->size;
    pt->sreq = hs_calloc(N, sizeof *pt->sreq, "send requests");
    pt->rreq = hs_calloc(N, sizeof *pt->rreq, "receive requests");
    pt->rbuf = hs_calloc(N, sizeof *pt->rbuf, "receive buffers");
    pt->sbuf = hs_malloc(pt->cap, "send buffer");
    if (!pt->sreq || !pt->rreq || !pt->rbuf || !pt->sbuf) return -ENOMEM;
    for (int j = 0; j < d->size; j++)
        if (j != d->rank && !(pt->rbuf[j] = hs_malloc(pt->cap, "gradient buffer"))) return -ENOMEM;
    return 0;
}

/* The buckets: whole layers, last first, each closed at cap_bytes (as all-reduce SGD's), at most
 * EFSGD_MAX_PARTS (the algorithm's tag range: the cap doubles until they fit). Their first
 * layers in la[], their float ranges in lo[] / len[]; *np = 1 when one part holds it all. */
static int plan_parts(const hs_dist_t *d, double cap_bytes, int *la, size_t *lo, size_t *len,
                      int *np)
{
    const int L = d->n_glayers;
    *np = 1;
    la[0] = 0, lo[0] = 0, len[0] = d->n;
    if (!(cap_bytes > 0) || L < 2 || !d->glayer_off) return 0;
    for (;;) {
        int n = 0, end = L;
        double acc = 0;
        for (int l = L - 1; l >= 0 && n <= EFSGD_MAX_PARTS; l--) {
            acc += (double)(d->glayer_off[l + 1] - d->glayer_off[l]) * sizeof(float);
            if (acc >= cap_bytes || l == 0) {
                if (n < EFSGD_MAX_PARTS) {
                    la[n] = l;
                    lo[n] = d->glayer_off[l];
                    len[n] = d->glayer_off[end] - lo[n];
                }
                n++;
                end = l;
                acc = 0;
            }
        }
        if (n <= EFSGD_MAX_PARTS) {
            *np = n;
            return 0;
        }
        cap_bytes *= 2;
    }
}

int efsgd_create(efsgd_t **out, hs_dist_t *d, double bucket_bytes)
{
    *out = NULL;
    efsgd_t *e = hs_calloc(1, sizeof *e, "EF-SGD state");
    if (!e) return -ENOMEM;
    e->d = d;
    e->n = d->n;
    e->lowest = d->n_glayers;
    uint64_t seed = 0x45465347ull ^ ((uint64_t)d->rank * 0x9e3779b97f4a7c15ull);
    const char *spec = hs_dist_opt_str(d, "compress");
    int la[EFSGD_MAX_PARTS], rc;
    size_t lo[EFSGD_MAX_PARTS], len[EFSGD_MAX_PARTS];
    if ((rc = plan_parts(d, bucket_bytes, la, lo, len, &e->np)) < 0) goto fail;
    rc = -ENOMEM;
    e->pt = hs_calloc((size_t)e->np, sizeof *e->pt, "EF-SGD parts");
    e->ranks = hs_malloc((size_t)d->size * sizeof *e->ranks, "ranks");
    if (!e->pt || !e->ranks) goto fail;
    /* the error memory (from 0) and p, where the gradient is */
    hs_kernels_t *k = d->k;
    if ((rc = k->ops->alloc(k, e->n * sizeof(float), (void **)&e->e)) < 0 ||
        (rc = k->ops->alloc(k, e->n * sizeof(float), (void **)&e->p)) < 0 ||
        (rc = k->ops->zero(k, e->e, e->n * sizeof(float))) < 0) {
        hs_error_prefix("EF-SGD: the error memory");
        goto fail;
    }
    for (int j = 0; j < d->size; j++) e->ranks[j] = j;
    for (int b = 0; b < e->np; b++) {
        if ((rc = part_init(e, b, lo[b], len[b], spec, seed)) < 0) goto fail;
        e->pt[b].la = la[b];
    }
    if (e->np > 1) {
        rc = hs_dist_on_grads(d, ef_grads_ready, e);
        if (rc == 0)
            e->hooked = 1;
        else if (rc != -ENOSYS)
            goto fail;
    }
    hs_dist_set_messages(d, hs_compressor_spec(e->pt[0].c)->text);
    if (d->rank == 0) {
        char line[256];
        size_t cap = 0;
        for (int b = 0; b < e->np; b++) cap += e->pt[b].cap;
        snprintf(line, sizeof line,
                 "allreduce: EF-SGD, --compress %s, all-gather of %zu of %zu bytes per rank and "
                 "round in %d part%s%s",
                 hs_compressor_spec(e->pt[0].c)->text, cap, e->n * sizeof(float), e->np,
                 e->np > 1 ? "s" : "", e->np > 1 && e->hooked ? ", sent during backward" : "");
        hs_dist_record(d, NULL, NULL, line);
    }
    *out = e;
    return 0;
fail:
    efsgd_destroy(&e);
    return rc;
}

size_t efsgd_state_bytes(const efsgd_t *e)
{
    return e->n * sizeof(float);
}

int efsgd_state_save(const efsgd_t *e, void *buf)
{
    return e->d->k->ops->to_host(e->d->k, buf, e->e, e->n * sizeof(float));
}

int efsgd_state_load(efsgd_t *e, const void *buf)
{
    return e->d->k->ops->to_device(e->d->k, e->e, buf, e->n * sizeof(float));
}
