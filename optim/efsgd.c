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
 * study; with many ranks the ring wins unless the compression ratio beats N / 2. The
 * compressors work on host memory: a device gradient is staged through a host image.
 */
#include "optim/efsgd.h"

#include "hearsay/common.h"
#include "hearsay/compress.h"
#include "optim/ps_wire.h"

#include <stdlib.h>
#include <string.h>

struct efsgd {
    hs_dist_t *d;
    size_t n, cap;
    hs_compressor_t *c;   /* compresses p_i */
    hs_compressor_t *dc;  /* decompresses the others' D_j */
    float *e;             /* (n) error memory */
    float *p;             /* (n) p_i */
    hs_stage_t gs;        /* the host image of the gradient */
    unsigned char *sbuf;  /* header + D_i */
    unsigned char **rbuf; /* (size) header + D_j */
    hs_treq_t **sreq;     /* (size) */
    hs_treq_t **rreq;     /* (size) */
    int *ranks;           /* (size) 0, 1, ..: the peer of each request slot */
    int nsend;
};

typedef struct ef_wait {
    efsgd_t *e;
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
    const hs_ps_hdr_v1_t *h = (const hs_ps_hdr_v1_t *)e->rbuf[idx];
    if (st->len < sizeof *h || h->magic != HS_PS_MAGIC || h->version != HS_PS_VERSION ||
        h->kind != HS_PS_COMPRESSED || h->sender != st->source || h->length != e->n ||
        h->extra != st->len - sizeof *h)
        return HS_ERR(-EPROTO,
                      "EF-SGD: rank %d got a malformed message of %zu bytes from rank %d "
                      "(do all ranks run the same --model and --compress?)",
                      d->rank, st->len, st->source);
    if (h->iteration != w->t)
        return HS_ERR(-EPROTO, "EF-SGD: rank %d got round %lld from rank %d in round %ld", d->rank,
                      (long long)h->iteration, st->source, w->t);
    w->bad = 0;
    d->st.bytes_recv += st->len;
    d->st.msgs_applied++;
    return 0;
}

/* Wait for every request (bounded; heartbeat-aware: a frozen peer is waited for until it
 * wakes or is fenced); a failure is an error naming the peer (ranks index). */
static int wait_all(efsgd_t *e, hs_treq_t **reqs, long t, int recv)
{
    hs_dist_t *d = e->d;
    ef_wait_t w = {.e = e, .t = t, .recv = recv};
    int rc = hs_dist_wait_peers(d, reqs, e->ranks, d->size, d->o->comm_timeout_s, 0, ef_done, &w);
    if (rc < 0 && !w.bad) hs_error_prefix("EF-SGD round %ld, %s", t, recv ? "receive" : "send");
    return rc;
}

int efsgd_exchange(efsgd_t *e, long t)
{
    hs_dist_t *d = e->d;
    const size_t n = e->n;
    /* g: the gradient where the host can read and write it (its image) */
    float *g = hs_stage_host(&e->gs);
    double t0 = hs_exec_now(d->x);
    HS_TRY(wait_all(e, e->sreq, t - 1, 0));
    d->st.wait_s += hs_exec_now(d->x) - t0;

    t0 = hs_exec_now(d->x);
    for (int j = 0; j < d->size; j++)
        if (j != d->rank)
            HS_TRY(hs_transport_irecv(d->t, j, hs_dist_tag(d, EFSGD_TAG_GATHER), e->rbuf[j], e->cap,
                                      &e->rreq[j]));
    HS_TRY(hs_stage_pull(&e->gs));
    for (size_t i = 0; i < n; i++) e->p[i] = g[i] + e->e[i];
    hs_ps_hdr_v1_t *h = (hs_ps_hdr_v1_t *)e->sbuf;
    unsigned char *q = e->sbuf + sizeof *h;
    size_t qbytes = 0;
    HS_TRY(hs_compress(e->c, e->p, q, &qbytes));
    hs_ps_hdr_init(h, HS_PS_COMPRESSED, d->rank, t, 1.0, n);
    h->extra = (uint32_t)qbytes;
    for (int j = 0; j < d->size; j++) {
        if (j == d->rank) continue;
        HS_TRY(hs_transport_isend(d->t, j, hs_dist_tag(d, EFSGD_TAG_GATHER), e->sbuf,
                                  sizeof *h + qbytes, &e->sreq[j]));
        d->st.bytes_sent += sizeof *h + qbytes;
    }
    e->nsend = d->size - 1;
    /* e = p - C(p) */
    memcpy(e->e, e->p, n * sizeof(float));
    HS_TRY(hs_decompress_add(e->c, q, qbytes, -1.0f, e->e));
    d->st.comm_s += hs_exec_now(d->x) - t0;

    t0 = hs_exec_now(d->x);
    HS_TRY(wait_all(e, e->rreq, t, 1));
    d->st.wait_s += hs_exec_now(d->x) - t0;

    /* g = (1/N) sum_j D_j, in rank order on every rank: the replicas stay bit-identical */
    t0 = hs_exec_now(d->x);
    memset(g, 0, n * sizeof(float));
    const float inv = 1.0f / (float)d->size;
    for (int j = 0; j < d->size; j++) {
        const unsigned char *m = j == d->rank ? e->sbuf : e->rbuf[j];
        const hs_ps_hdr_v1_t *hj = (const hs_ps_hdr_v1_t *)m;
        int rc = hs_decompress_add(e->dc, m + sizeof *hj, hj->extra, inv, g);
        if (rc < 0) {
            hs_error_prefix("EF-SGD: message from rank %d", j);
            return rc;
        }
    }
    HS_TRY(hs_stage_push(&e->gs));
    d->st.comm_s += hs_exec_now(d->x) - t0;
    return 0;
}

int efsgd_drain(efsgd_t *e)
{
    hs_dist_t *d = e->d;
    double t0 = hs_exec_now(d->x);
    int rc = wait_all(e, e->sreq, d->iter, 0);
    d->st.wait_s += hs_exec_now(d->x) - t0;
    return rc;
}

void efsgd_destroy(efsgd_t **ep)
{
    efsgd_t *e = ep ? *ep : NULL;
    if (!e) return;
    hs_dist_t *d = e->d;
    for (int i = 0; i < d->size; i++) {
        if (e->sreq && e->sreq[i]) hs_transport_req_free(d->t, &e->sreq[i]);
        if (e->rreq && e->rreq[i]) hs_transport_req_free(d->t, &e->rreq[i]);
        if (e->rbuf) free(e->rbuf[i]);
    }
    free(e->sreq);
    free(e->rreq);
    free(e->ranks);
    free(e->rbuf);
    free(e->sbuf);
    free(e->e);
    free(e->p);
    hs_stage_close(&e->gs);
    hs_compressor_destroy(&e->c);
    hs_compressor_destroy(&e->dc);
    free(e);
    *ep = NULL;
}

int efsgd_create(efsgd_t **out, hs_dist_t *d)
{
    *out = NULL;
    efsgd_t *e = hs_calloc(1, sizeof *e, "EF-SGD state");
    if (!e) return -ENOMEM;
    e->d = d;
    e->n = d->n;
    uint64_t seed = 0x45465347ull ^ ((uint64_t)d->rank * 0x9e3779b97f4a7c15ull);
    const char *spec = hs_dist_opt_str(d, "compress");
    int rc = hs_compressor_create(&e->c, spec, e->n, seed);
    if (rc < 0 || (rc = hs_compressor_create(&e->dc, spec, e->n, seed)) < 0) {
        hs_error_prefix("--algo allreduce");
        goto fail;
    }
    e->cap = sizeof(hs_ps_hdr_v1_t) + hs_compressor_max_bytes(e->c);
    if (hs_compressor_max_bytes(e->c) > UINT32_MAX) {
        rc = HS_ERR(-EINVAL,
                    "--algo allreduce --compress: %zu bytes of compressed gradient do "
                    "not fit a message header's 32-bit length",
                    hs_compressor_max_bytes(e->c));
        goto fail;
    }
    rc = -ENOMEM;
    const size_t N = (size_t)d->size;
    e->sreq = hs_calloc(N, sizeof *e->sreq, "send requests");
    e->rreq = hs_calloc(N, sizeof *e->rreq, "receive requests");
    e->rbuf = hs_calloc(N, sizeof *e->rbuf, "receive buffers");
    e->ranks = hs_malloc(N * sizeof *e->ranks, "ranks");
    e->sbuf = hs_malloc(e->cap, "send buffer");
    e->e = hs_calloc(e->n, sizeof *e->e, "error memory");
    e->p = hs_malloc(e->n * sizeof *e->p, "corrected gradient");
    /* the compressors work on host memory: the gradient is staged through its image */
    if (hs_stage_image(&e->gs, d->k, d->grads, e->n, "gradient") < 0) goto fail;
    if (!e->sreq || !e->rreq || !e->rbuf || !e->ranks || !e->sbuf || !e->e || !e->p) goto fail;
    for (int j = 0; j < d->size; j++) e->ranks[j] = j;
    for (int j = 0; j < d->size; j++)
        if (j != d->rank && !(e->rbuf[j] = hs_malloc(e->cap, "gradient buffer"))) goto fail;
    if (d->rank == 0) {
        char line[256];
        snprintf(line, sizeof line,
                 "allreduce: EF-SGD, --compress %s, all-gather of %zu of %zu bytes per message",
                 hs_compressor_spec(e->c)->text, e->cap, e->n * sizeof(float));
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
    memcpy(buf, e->e, e->n * sizeof(float));
    return 0;
}

int efsgd_state_load(efsgd_t *e, const void *buf)
{
    memcpy(e->e, buf, e->n * sizeof(float));
    return 0;
}
