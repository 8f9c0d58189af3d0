/*
 * optim/center.c — the sharded EASGD center variable (optim/center.h), owner side: set-up,
 * the path choice, and each owner's service (hearsay/exec.h) answering READ / ADD / FIN
 * requests. The client side every rank uses is optim/center_client.c.
 *
 * Consistency: every change to a shard happens under its owner's service lock (the service
 * for remote adds, the owner's main thread for its own), so an add is applied exactly once and
 * whole. FIN carries the number of adds its sender posted to this owner; the owner declares
 * the shard final when every live rank's FIN is in and that many adds from it were applied
 * (a FIN may overtake an add when several receives are posted), then sends the final shard
 * to every finished rank. Its own finish call returns only after those replies completed, so
 * an owner never leaves while a live rank still needs its shard.
 * RMA path: a rank sends FIN only after each of its atomics completed; an atomic's completion
 * is the target's acknowledgement that it was applied (ofi_rxm answers every atomic), and the
 * FIN follows on the same ordered connection anyway, so FIN announces 0 adds still to come.
 */
#include "optim/center_impl.h"

#include "hearsay/env.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The largest job size a rank list is checked against when the size is unknown. */
#define OWNERS_MAX_RANK (INT_MAX - 1)

/* A rank: digits only (no sign, no blanks), at most `hi`. Returns the characters read, 0 when
 * there is no valid rank at p. */
static size_t owner_rank(const char *p, long hi, long *out)
{
    size_t k = 0;
    long v = 0;
    while (isdigit((unsigned char)p[k])) {
        if (v > (hi - (p[k] - '0')) / 10) return 0; /* past hi (or an overflow) */
        v = v * 10 + (p[k] - '0');
        k++;
    }
    *out = v;
    return k;
}

int hs_center_parse_owners(const char *spec, int size, int **out, int *n)
{
    if (out) *out = NULL;
    if (n) *n = 0;
    const int check = size <= 0; /* the grammar only: no job yet */
    char *mark = check ? NULL : hs_calloc((size_t)size, 1, "owner set");
    if (!check && !mark) return -ENOMEM;
    int rc = 0;
    if (!spec || !*spec || !strcmp(spec, "all")) {
        if (mark) memset(mark, 1, (size_t)size);
    } else {
        const char *p = spec;
        for (;;) {
            const char *item = p, *comma = strchr(p, ',');
            int len = comma ? (int)(comma - p) : (int)strlen(p);
            long a, b;
            size_t k = len > 0 ? owner_rank(p, OWNERS_MAX_RANK, &a) : 0;
            if (len == 0) {
                rc = HS_ERR(-EINVAL, "--centers '%s': empty entry in the rank list", spec);
                break;
            }
            b = a;
            if (k > 0 && p[k] == '-') {
                size_t k2 = owner_rank(p + k + 1, OWNERS_MAX_RANK, &b);
                k = k2 > 0 ? k + 1 + k2 : 0;
            }
            if (k == 0 || (int)k != len || b < a) {
                rc = HS_ERR(-EINVAL,
                            "--centers '%s': '%.*s' is not a rank or a range A-B (digits, "
                            "0 <= A <= B)",
                            spec, len, item);
                break;
            }
            if (!check && b >= size) {
                rc = HS_ERR(-EINVAL, "--centers '%s': '%.*s' is not within ranks 0-%d", spec, len,
                            item, size - 1);
                break;
            }
            if (mark)
                for (long r = a; r <= b; r++) mark[r] = 1;
            if (!comma) break;
            p = comma + 1;
        }
    }
    if (check || rc < 0) {
        free(mark);
        return rc;
    }
    int cnt = 0;
    for (int r = 0; r < size; r++) cnt += mark[r];
    if (rc == 0 && cnt == 0) rc = HS_ERR(-EINVAL, "--centers '%s' names no rank", spec);
    if (rc == 0 && !(*out = hs_malloc((size_t)cnt * sizeof **out, "owners"))) rc = -ENOMEM;
    if (rc == 0) {
        for (int r = 0, i = 0; r < size; r++)
            if (mark[r]) (*out)[i++] = r;
        *n = cnt;
    }
    free(mark);
    return rc;
}

/* --- the owner's service ----------------------------------------------------------------- */

/* Send the own shard to `dst` (kind DATA or FINAL) from its reply buffer. */
static int svc_reply(hs_center_t *c, int dst, hs_el_kind_t kind)
{
    size_t len = shard_len(c, c->own);
    size_t bytes = HDR + len * (c->half ? 2 : sizeof(float));
    if (c->oreq[dst]) { /* the previous reply to dst: it has been received, so this is quick */
        int rc = hs_exec_wait1(c->x, &c->oreq[dst], c->timeout_s, HS_WAIT_NO_IDLE, NULL);
        if (c->oreq[dst]) hs_transport_req_free(c->t, &c->oreq[dst]);
        if (rc < 0) {
            center_lock(c);
            c->dead[dst] = rc == -ECONNRESET;
            center_unlock(c);
            return 0; /* its reader is gone or stuck: not this service's failure */
        }
    }
    if (!c->obuf[dst] && !(c->obuf[dst] = hs_malloc(HDR + len * sizeof(float), "center reply")))
        return -ENOMEM;
    hs_el_hdr_v1_t *h = (hs_el_hdr_v1_t *)c->obuf[dst];
    center_lock(c);
    hs_el_hdr_init(h, kind, c->rank, c->own, len, (uint64_t)c->applied);
    if (c->half) {
        h->kind |= (uint16_t)c->half;
        hs_half_encode(c->half == HS_EL_BF16, c->shard, (uint16_t *)(c->obuf[dst] + HDR), len);
    } else
        memcpy(c->obuf[dst] + HDR, c->shard, len * sizeof(float));
    center_unlock(c);
    int rc = hs_transport_isend(c->t, dst, c->tag_rep, c->obuf[dst], bytes, &c->oreq[dst]);
    if (rc < 0) {
        c->oreq[dst] = NULL;
        center_lock(c);
        c->dead[dst] = 1;
        center_unlock(c);
    } else {
        atomic_fetch_add_explicit(&c->svc_sent, bytes, memory_order_relaxed);
    }
    return 0;
}

/* Every live rank finished and its adds are applied: the shard is final; answer the FINs. */
static int svc_maybe_final(void *ctx)
{
    hs_center_t *c = ctx;
    center_lock(c);
    if (!c->final) {
        int all = 1;
        for (int r = 0; r < c->size && all; r++)
            if (!c->dead[r] && (c->fin_adds[r] < 0 || c->applied_from[r] < c->fin_adds[r])) all = 0;
        c->final = all;
    }
    int final = c->final;
    center_unlock(c);
    if (!final) return 0;
    for (int r = 0; r < c->size; r++) {
        if (r == c->rank) continue;
        center_lock(c);
        int due = c->fin_adds[r] >= 0 && !c->answered[r] && !c->dead[r];
        center_unlock(c);
        if (!due) continue;
        HS_TRY(svc_reply(c, r, HS_EL_FINAL));
        center_lock(c);
        c->answered[r] = 1;
        center_unlock(c);
    }
    return 0;
}

static int svc_handle(void *ctx, int slot, const void *buf, const hs_tstatus_t *st)
{
    hs_center_t *c = ctx;
    (void)slot;
    const hs_el_hdr_v1_t *h = (const hs_el_hdr_v1_t *)buf;
    HS_TRY(hs_el_hdr_check(h, st->len, st->source));
    atomic_fetch_add_explicit(&c->svc_recv, st->len, memory_order_relaxed);
    int src = st->source;
    /* its sender's incarnation (a replacement's counts start again) */
    int old = 0;
    if (h->pad >= 1u << 20)
        return HS_ERR(-EPROTO, "center: rank %d names incarnation %llu", src,
                      (unsigned long long)h->pad);
    center_lock(c);
    if ((int)h->pad > c->inc_of[src]) {
        c->inc_of[src] = (int)h->pad;
        c->applied_from[src] = 0;
        c->fin_adds[src] = -1;
        c->answered[src] = 0;
        c->dead[src] = 0;
    }
    old = (int)h->pad < c->inc_of[src];
    center_unlock(c);
    if (c->d && hs_dist_peer_hb(c->d, src) == 2) { /* fenced: out of the job */
        center_lock(c);
        c->refused++;
        c->dead[src] = 1;
        center_unlock(c);
        return 0;
    }
    if (h->shard != c->own)
        return HS_ERR(-EPROTO, "center: rank %d sent a request for shard %d to the owner of %d",
                      src, h->shard, c->own);
    const unsigned half = h->kind & HS_EL_HALF_MASK;
    switch (h->kind & ~HS_EL_HALF_MASK) {
    case HS_EL_READ:
        return svc_reply(c, src, HS_EL_DATA);
    case HS_EL_ADD: {
        size_t len = shard_len(c, c->own);
        if (h->count != len)
            return HS_ERR(-EPROTO, "center: rank %d added %llu floats to a shard of %zu", src,
                          (unsigned long long)h->count, len);
        const float *v = (const float *)((const unsigned char *)buf + HDR);
        center_lock(c);
        if (half)
            hs_half_decode(half == HS_EL_BF16, (const uint16_t *)v, c->shard, len, 1.0f, 1);
        else
            for (size_t i = 0; i < len; i++) c->shard[i] += v[i];
        c->applied++;
        if (!old) c->applied_from[src]++;
        center_unlock(c);
        return 0;
    }
    case HS_EL_FIN:
        if (old) return 0;
        center_lock(c);
        c->fin_adds[src] = (long)h->seq;
        c->dead[src] = 0; /* it finished after all */
        c->answered[src] = 0;
        center_unlock(c);
        return 0;
    default:
        return HS_ERR(-EPROTO, "center: unexpected message kind %u from rank %d", h->kind, src);
    }
}

/* --- set-up and accessors -------------------------------------------------------------- */

void hs_center_close(hs_center_t **cp)
{
    hs_center_t *c = cp ? *cp : NULL;
    if (!c) return;
    hs_svc_stop(c->x, &c->svc);
    for (int r = 0; r < c->size && c->oreq; r++) {
        if (c->oreq[r]) hs_transport_req_free(c->t, &c->oreq[r]);
        free(c->obuf[r]);
    }
    for (int s = 0; s < c->m && c->rreq; s++) {
        if (c->rreq[s]) hs_transport_req_free(c->t, &c->rreq[s]);
        if (c->qreq[s]) hs_transport_req_free(c->t, &c->qreq[s]);
        if (c->areq[s]) hs_transport_req_free(c->t, &c->areq[s]);
        free(c->abuf[s]);
        free(c->rbuf[s]);
        free(c->qbuf[s]);
    }
    if (c->win) hs_transport_win_free(c->t, &c->win);
    free(c->oreq);
    free(c->obuf);
    free(c->abuf);
    free(c->rbuf);
    free(c->qbuf);
    free(c->areq);
    free(c->rreq);
    free(c->qreq);
    free(c->adds_sent);
    free(c->lost);
    free(c->shard);
    free(c->applied_from);
    free(c->fin_adds);
    free(c->answered);
    free(c->dead);
    free(c->inc_of);
    free(c->owner);
    free(c->off);
    free(c);
    *cp = NULL;
}

/* Choose the path (c->rma): "service", or "rma" / "auto" which create the window (collective)
 * and probe a 1-float atomic add of 0 into the first owner's shard. -ENOSYS (no RMA or no
 * float atomics: a property of the provider, so every rank decides alike) falls back to the
 * service thread under "auto" and is an error under "rma". */
static int choose_path(hs_center_t *c, const char *path)
{
    if (!path || !*path) path = hs_env_str("HS_CENTER_PATH"); /* default "auto" */
    int force = !strcmp(path, "rma");
    if (!strcmp(path, "service")) return 0;
    if (!force && strcmp(path, "auto"))
        return HS_ERR(-EINVAL,
                      "center path '%s' (--center-path / HS_CENTER_PATH): expected "
                      "auto, rma or service",
                      path);
    size_t bytes = c->own >= 0 ? shard_len(c, c->own) * sizeof(float) : 0;
    int rc = hs_transport_win_create(c->t, c->own >= 0 ? (void *)c->shard : NULL, bytes, &c->win);
    if (rc == 0) {
        static const float zero = 0.0f;
        hs_treq_t *req = NULL;
        rc = hs_transport_atomic_add_float(c->t, c->win, c->owner[0], 0, &zero, 1, &req);
        if (rc == 0) rc = hs_exec_wait1(c->x, &req, c->timeout_s, HS_WAIT_NO_IDLE, NULL);
        if (req) hs_transport_req_free(c->t, &req);
    }
    if (rc == 0) {
        c->rma = 1;
        return 0;
    }
    if (c->win) hs_transport_win_free(c->t, &c->win);
    if (rc != -ENOSYS || force) {
        hs_error_prefix("rank %d: center path %s", c->rank, path);
        return rc;
    }
    return 0; /* auto without float atomics: the service thread */
}

int hs_center_open(hs_center_t **out, hs_exec_t *x, size_t n, const float *init, const int *owners,
                   int n_owners, double timeout_s, const char *path, uint32_t tag_base)
{
    *out = NULL;
    hs_transport_t *t = x->t;
    if (!t) return HS_ERR(-ENOTCONN, "center: no transport");
    int size = hs_transport_size(t), rank = hs_transport_rank(t);
    int m = owners ? n_owners : size;
    if (m < 1 || m > size)
        return HS_ERR(-EINVAL, "center: %d owners for a job of %d ranks", m, size);
    if ((size_t)m > n)
        return HS_ERR(-EINVAL, "center: %d shards for only %zu parameters (use fewer --centers)", m,
                      n);
    if (!(timeout_s > 0)) return HS_ERR(-EINVAL, "center: timeout %g must be > 0", timeout_s);
    hs_center_t *c = hs_calloc(1, sizeof *c, "center");
    if (!c) return -ENOMEM;
    atomic_init(&c->svc_sent, 0);
    atomic_init(&c->svc_recv, 0);
    c->x = x;
    c->t = t;
    c->rank = rank;
    c->size = size;
    c->n = n;
    c->m = m;
    c->own = -1;
    c->timeout_s = timeout_s;
    c->tag_req = tag_base + CENTER_TAG_REQ;
    c->tag_rep = tag_base + CENTER_TAG_REP;
    int rc = -ENOMEM;
    size_t um = (size_t)m, us = (size_t)size;
    c->owner = hs_calloc(um, sizeof *c->owner, "owners");
    c->off = hs_calloc(um + 1, sizeof *c->off, "shard offsets");
    c->abuf = hs_calloc(um, sizeof *c->abuf, "add buffers");
    c->rbuf = hs_calloc(um, sizeof *c->rbuf, "reply buffers");
    c->qbuf = hs_calloc(um, sizeof *c->qbuf, "request buffers");
    c->areq = hs_calloc(um, sizeof *c->areq, "add requests");
    c->rreq = hs_calloc(um, sizeof *c->rreq, "reply requests");
    c->qreq = hs_calloc(um, sizeof *c->qreq, "request requests");
    c->adds_sent = hs_calloc(um, sizeof *c->adds_sent, "add counts");
    c->lost = hs_calloc(um, 1, "lost shards");
    c->applied_from = hs_calloc(us, sizeof *c->applied_from, "applied counts");
    c->fin_adds = hs_calloc(us, sizeof *c->fin_adds, "fin counts");
    c->answered = hs_calloc(us, 1, "answered");
    c->dead = hs_calloc(us, 1, "dead ranks");
    c->oreq = hs_calloc(us, sizeof *c->oreq, "service replies");
    c->obuf = hs_calloc(us, sizeof *c->obuf, "service reply buffers");
    c->inc_of = hs_calloc(us, sizeof *c->inc_of, "incarnations");
    c->inc = x->incarnation;
    if (!c->inc_of) goto fail;
    if (!c->owner || !c->off || !c->abuf || !c->rbuf || !c->qbuf || !c->areq || !c->rreq ||
        !c->qreq || !c->adds_sent || !c->lost || !c->applied_from || !c->fin_adds || !c->answered ||
        !c->dead || !c->oreq || !c->obuf)
        goto fail;
    for (int r = 0; r < size; r++) c->fin_adds[r] = -1;
    for (int s = 0; s < m; s++) {
        c->owner[s] = owners ? owners[s] : s;
        if (c->owner[s] < 0 || c->owner[s] >= size || (s > 0 && c->owner[s] <= c->owner[s - 1])) {
            rc = HS_ERR(-EINVAL, "center: owners must be increasing ranks < %d", size);
            goto fail;
        }
        if (c->owner[s] == rank) c->own = s;
        c->off[s] = n * (size_t)s / um;
    }
    c->off[m] = n;
    for (int s = 0; s < m; s++) {
        size_t len = shard_len(c, s);
        if (!(c->qbuf[s] = hs_malloc(HDR, "center request"))) goto fail;
        if (!(c->abuf[s] = hs_malloc(HDR + len * sizeof(float), "center add")) ||
            !(c->rbuf[s] = hs_malloc(HDR + len * sizeof(float), "center reply")))
            goto fail;
    }
    if (c->own >= 0) {
        size_t len = shard_len(c, c->own);
        if (!(c->shard = hs_malloc(len * sizeof(float), "center shard"))) goto fail;
        memcpy(c->shard, init + c->off[c->own], len * sizeof(float));
    }
    if ((rc = choose_path(c, path)) < 0) goto fail;
    if (c->own >= 0) {
        /* the RMA path's service only ever receives FIN requests (header only); two receives
         * per rank (a read or FIN and an add may be in flight from each), 4 to 64 */
        size_t len = shard_len(c, c->own);
        int ns = HS_MIN(64, HS_MAX(4, 2 * size));
        int src[64];
        uint32_t tag[64];
        for (int i = 0; i < ns; i++) src[i] = HS_ANY_SOURCE, tag[i] = c->tag_req;
        hs_service_desc_t sd = {.name = "center service",
                                .n_slots = ns,
                                .slot_bytes = HDR + (c->rma ? 0 : len * sizeof(float)),
                                .src = src,
                                .tag = tag,
                                .on_msg = svc_handle,
                                .on_tick = svc_maybe_final,
                                .ctx = c};
        if ((rc = hs_svc_start(x, &sd, &c->svc)) < 0) goto fail;
    }
    *out = c;
    return 0;
fail:
    hs_center_close(&c);
    return rc;
}

int hs_center_num_shards(const hs_center_t *c)
{
    return c->m;
}

void hs_center_shard(const hs_center_t *c, int s, int *owner, size_t *off, size_t *len)
{
    if (owner) *owner = c->owner[s];
    if (off) *off = c->off[s];
    if (len) *len = shard_len(c, s);
}

int hs_center_shard_lost(const hs_center_t *c, int s)
{
    return c->lost[s];
}

int hs_center_rank_dead(hs_center_t *c, int r)
{
    center_lock(c);
    int d = c->dead[r];
    center_unlock(c);
    return d;
}

int hs_center_own_shard(const hs_center_t *c)
{
    return c->own;
}

void hs_center_heartbeats(hs_center_t *c, hs_dist_t *d)
{
    c->d = d;
}

long hs_center_refused(hs_center_t *c)
{
    if (!c->svc) return 0;
    center_lock(c);
    long n = c->refused;
    center_unlock(c);
    return n;
}

int hs_center_set_half(hs_center_t *c, int bf16)
{
    if (c->rma)
        return HS_ERR(-EINVAL, "the center's one-sided path adds float32 atomically: "
                               "fp16/bf16 transfers need --center-path service");
    c->half = bf16 ? HS_EL_BF16 : HS_EL_FP16;
    return 0;
}

const char *hs_center_path(const hs_center_t *c)
{
    return c->rma ? "rma" : "service";
}

long hs_center_adds_applied(hs_center_t *c)
{
    if (c->rma) return -1; /* remote atomics land without the owner knowing */
    center_lock(c);
    long a = c->applied;
    center_unlock(c);
    return a;
}

hs_center_stats_t *hs_center_stats(hs_center_t *c)
{
    c->st.bytes_sent += atomic_exchange_explicit(&c->svc_sent, 0, memory_order_relaxed);
    c->st.bytes_recv += atomic_exchange_explicit(&c->svc_recv, 0, memory_order_relaxed);
    return &c->st;
}

size_t hs_center_state_bytes(const hs_center_t *c)
{
    return c->own >= 0 ? shard_len(c, c->own) * sizeof(float) : 0;
}

int hs_center_state_save(hs_center_t *c, void *buf)
{
    if (c->own < 0) return 0;
    center_lock(c);
    memcpy(buf, c->shard, hs_center_state_bytes(c));
    center_unlock(c);
    return 0;
}

int hs_center_rejoined(hs_center_t *c, int r)
{
    for (int s = 0; s < c->m; s++) {
        if (c->owner[s] != r) continue;
        /* its shard is back (the replacement's); requests still meant for the crashed owner
         * are dropped, and the adds are counted for the new one */
        if (c->areq[s]) hs_transport_req_free(c->t, &c->areq[s]);
        if (c->qreq[s]) hs_transport_req_free(c->t, &c->qreq[s]);
        if (c->rreq[s]) hs_transport_req_free(c->t, &c->rreq[s]);
        c->lost[s] = 0;
        c->adds_sent[s] = 0;
    }
    center_lock(c);
    c->dead[r] = 0;
    center_unlock(c);
    return 0;
}

int hs_center_adopt(hs_center_t *c, const float *x)
{
    if (c->own < 0) return 0;
    center_lock(c);
    memcpy(c->shard, x + c->off[c->own], shard_len(c, c->own) * sizeof(float));
    center_unlock(c);
    return 0;
}

int hs_center_state_load(hs_center_t *c, const void *buf)
{
    if (c->own < 0) return 0;
    center_lock(c);
    memcpy(c->shard, buf, hs_center_state_bytes(c));
    center_unlock(c);
    return 0;
}
