/*
 * optim/center_client.c — the EASGD center's client side (optim/center.h), used by every
 * rank: reads and adds by messages to the owners' services, or by gets and float atomic adds
 * into their windows (the RMA path), and the end-of-run FIN / final-shard exchange.
 */
#include "optim/center_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void mark_lost(hs_center_t *c, int s, const char *why)
{
    if (c->lost[s]) return;
    c->lost[s] = 1;
    int o = c->owner[s];
    center_lock(c);
    c->dead[o] = 1;
    center_unlock(c);
    HS_WARN("rank %d: center shard %d (rank %d, floats %zu..%zu) is unavailable: %s; training "
            "goes on without it",
            c->rank, s, o, c->off[s], c->off[s + 1], why);
    if (c->rreq[s]) hs_transport_req_free(c->t, &c->rreq[s]);
    if (c->qreq[s]) hs_transport_req_free(c->t, &c->qreq[s]);
    if (c->areq[s]) hs_transport_req_free(c->t, &c->areq[s]);
}

/* Complete one send request of shard s (bounded); a failure loses the shard. */
static void finish_send(hs_center_t *c, int s, hs_treq_t **req)
{
    if (!*req) return;
    double t0 = hs_exec_now(c->x);
    int rc = c->d ? hs_dist_wait_one(c->d, req, c->owner[s], c->timeout_s, 0, NULL)
                  : hs_exec_wait1(c->x, req, c->timeout_s, 0, NULL);
    c->st.wait_s += hs_exec_now(c->x) - t0;
    if (rc < 0) mark_lost(c, s, hs_last_error());
}

static int post_request(hs_center_t *c, int s, hs_el_kind_t kind, uint64_t seq)
{
    size_t len = shard_len(c, s);
    finish_send(c, s, &c->qreq[s]);
    if (c->lost[s]) return 0;
    int rc = hs_transport_irecv(c->t, c->owner[s], c->tag_rep, c->rbuf[s],
                                HDR + len * sizeof(float), &c->rreq[s]);
    if (rc < 0) return rc;
    hs_el_hdr_init((hs_el_hdr_v1_t *)c->qbuf[s], kind, c->rank, s, 0, seq);
    ((hs_el_hdr_v1_t *)c->qbuf[s])->pad = (uint64_t)c->inc;
    rc = hs_transport_isend(c->t, c->owner[s], c->tag_req, c->qbuf[s], HDR, &c->qreq[s]);
    if (rc < 0) {
        c->qreq[s] = NULL;
        mark_lost(c, s, hs_last_error());
        return 0;
    }
    c->st.bytes_sent += HDR;
    return 0;
}

/* Copy a received shard into dst after checking it is what was asked. */
static int take_reply(hs_center_t *c, int s, const hs_tstatus_t *st, hs_el_kind_t kind, float *dst)
{
    const hs_el_hdr_v1_t *h = (const hs_el_hdr_v1_t *)c->rbuf[s];
    HS_TRY(hs_el_hdr_check(h, st->len, c->owner[s]));
    size_t len = shard_len(c, s);
    const unsigned half = h->kind & HS_EL_HALF_MASK;
    if ((h->kind & ~HS_EL_HALF_MASK) != kind || h->shard != s || h->count != len)
        return HS_ERR(-EPROTO,
                      "center: rank %d answered kind %u for shard %d (%llu floats), "
                      "expected kind %u for shard %d (%zu)",
                      c->owner[s], h->kind, h->shard, (unsigned long long)h->count, kind, s, len);
    if (half)
        hs_half_decode(half == HS_EL_BF16, (const uint16_t *)(c->rbuf[s] + HDR), dst + c->off[s],
                       len, 1.0f, 0);
    else
        memcpy(dst + c->off[s], c->rbuf[s] + HDR, len * sizeof(float));
    c->st.bytes_recv += st->len;
    c->st.msgs++;
    return 0;
}

typedef struct collect_wait {
    hs_center_t *c;
    float *dst;
    hs_el_kind_t kind; /* of the replies */
    int get;           /* 1: the requests are read_rma's gets */
    int lost;
} collect_wait_t;

/* A reply (or get) of shard idx ended: a failed one loses the shard. */
static int collect_done(void *ctx, int idx, int rc, const hs_tstatus_t *st)
{
    collect_wait_t *w = ctx;
    hs_center_t *c = w->c;
    if (rc < 0) {
        mark_lost(c, idx, hs_last_error());
        w->lost++;
        return 0;
    }
    if (w->get) {
        size_t len = shard_len(c, idx);
        memcpy(w->dst + c->off[idx], c->rbuf[idx], len * sizeof(float));
        if (c->owner[idx] != c->rank) c->st.bytes_recv += len * sizeof(float); /* not to self */
        c->st.msgs++;
        return 0;
    }
    hs_trace_apply_begin(c->x->trace, c->x->rank, c->rbuf[idx], st); /* --trace */
    HS_TRY(take_reply(c, idx, st, w->kind, w->dst));
    hs_trace_end(c->x->trace, HS_TR_APPLY);
    return 0;
}

/* Wait for the posted replies or gets (bounded per wait by `limit`); the shards still pending
 * when a wait times out are lost (`what` names the wait); returns shards lost. */
static int collect_wait(hs_center_t *c, collect_wait_t *w, double limit, const char *what)
{
    int rc;
    for (;;) {
        if (!c->d) {
            rc = hs_dist_wait_reqs(c->x, c->rreq, c->m, limit, 0, collect_done, w);
            break;
        }
        /* heartbeats: an owner that heartbeats is waited for (bounded), a fenced one loses
         * its shard at once while the wait for the others goes on */
        rc = hs_dist_wait_peers(c->d, c->rreq, c->owner, c->m, limit, 0, collect_done, w);
        if (rc != -ETIMEDOUT) break;
        int fenced = 0;
        for (int s = 0; s < c->m; s++)
            if (c->rreq[s] && hs_dist_peer_hb(c->d, c->owner[s]) == 2) {
                mark_lost(c, s, hs_last_error());
                w->lost++;
                fenced++;
            }
        if (!fenced) break;
    }
    if (rc == -ETIMEDOUT) {
        for (int s = 0; s < c->m; s++)
            if (c->rreq[s]) {
                char why[128];
                snprintf(why, sizeof why, "%s within %.1f s", what, limit);
                mark_lost(c, s, why);
                w->lost++;
            }
        rc = 0;
    }
    return rc < 0 ? rc : w->lost;
}

/* Wait for the posted replies (bounded per wait by `limit`); returns shards lost. */
static int collect(hs_center_t *c, float *dst, hs_el_kind_t kind, double limit)
{
    double t0 = hs_exec_now(c->x);
    collect_wait_t w = {.c = c, .dst = dst, .kind = kind};
    int rc = collect_wait(c, &w, limit, "no answer");
    if (rc < 0) return rc;
    c->st.wait_s += hs_exec_now(c->x) - t0;
    return rc;
}

/* One-sided read: a get of every available shard (the own one too, so that it is ordered
 * with the provider's atomics like any other access), each into its reply buffer and copied
 * to dst only when it completed. The own shard's get is not counted in bytes_recv: it
 * crosses no link (as on the service path, where the own shard is read without a message). */
static int read_rma(hs_center_t *c, float *dst)
{
    double t0 = hs_exec_now(c->x);
    for (int s = 0; s < c->m; s++) {
        if (c->lost[s]) continue;
        int rc = hs_transport_get(c->t, c->win, c->owner[s], 0, c->rbuf[s],
                                  shard_len(c, s) * sizeof(float), &c->rreq[s]);
        if (rc < 0) {
            c->rreq[s] = NULL;
            mark_lost(c, s, hs_last_error());
        }
    }
    collect_wait_t w = {.c = c, .dst = dst, .get = 1};
    int rc = collect_wait(c, &w, c->timeout_s, "get not complete");
    if (rc < 0) return rc;
    c->st.wait_s += hs_exec_now(c->x) - t0;
    return 0;
}

/* One-sided add: one float atomic add per shard (the transport chunks it to the provider's
 * atomic size), the own shard included: the provider applies remote atomics from its progress
 * thread, so a plain += by this thread could interleave with one of them and lose it. The
 * previous add of a shard completes first (its buffer is reused). The own shard's add is not
 * counted in bytes_sent: it goes to this rank itself and crosses no link. */
static void add_rma(hs_center_t *c, const float *diff)
{
    for (int s = 0; s < c->m; s++) {
        size_t len = shard_len(c, s);
        finish_send(c, s, &c->areq[s]);
        if (c->lost[s]) continue;
        memcpy(c->abuf[s], diff + c->off[s], len * sizeof(float));
        int rc = hs_transport_atomic_add_float(c->t, c->win, c->owner[s], 0,
                                               (const float *)c->abuf[s], len, &c->areq[s]);
        if (rc < 0) {
            c->areq[s] = NULL;
            mark_lost(c, s, hs_last_error());
            continue;
        }
        c->adds_sent[s]++;
        if (c->owner[s] != c->rank) c->st.bytes_sent += len * sizeof(float); /* not to self */
    }
}

int hs_center_read(hs_center_t *c, float *dst)
{
    int lost0 = 0;
    for (int s = 0; s < c->m; s++) lost0 += c->lost[s];
    if (c->rma) {
        HS_TRY(read_rma(c, dst));
        int lost1 = 0;
        for (int s = 0; s < c->m; s++) lost1 += c->lost[s];
        return lost1 - lost0;
    }
    for (int s = 0; s < c->m; s++) {
        if (c->lost[s] || s == c->own) continue;
        HS_TRY(post_request(c, s, HS_EL_READ, 0));
    }
    if (c->own >= 0) {
        center_lock(c);
        memcpy(dst + c->off[c->own], c->shard, shard_len(c, c->own) * sizeof(float));
        center_unlock(c);
    }
    HS_TRY(collect(c, dst, HS_EL_DATA, c->timeout_s));
    int lost1 = 0;
    for (int s = 0; s < c->m; s++) lost1 += c->lost[s];
    return lost1 - lost0;
}

int hs_center_add(hs_center_t *c, const float *diff)
{
    int lost0 = 0;
    for (int s = 0; s < c->m; s++) lost0 += c->lost[s];
    for (int s = 0; s < c->m && !c->rma; s++) {
        size_t len = shard_len(c, s);
        const float *v = diff + c->off[s];
        if (s == c->own) {
            center_lock(c);
            for (size_t i = 0; i < len; i++) c->shard[i] += v[i];
            c->applied++;
            c->applied_from[c->rank]++;
            center_unlock(c);
            c->adds_sent[s]++;
            continue;
        }
        finish_send(c, s, &c->areq[s]);
        if (c->lost[s]) continue;
        hs_el_hdr_v1_t *ah = (hs_el_hdr_v1_t *)c->abuf[s];
        hs_el_hdr_init(ah, HS_EL_ADD, c->rank, s, len, 0);
        ah->pad = (uint64_t)c->inc;
        size_t bytes = HDR + len * (c->half ? 2 : sizeof(float));
        if (c->half) {
            ah->kind |= (uint16_t)c->half;
            hs_half_encode(c->half == HS_EL_BF16, v, (uint16_t *)(c->abuf[s] + HDR), len);
        } else
            memcpy(c->abuf[s] + HDR, v, len * sizeof(float));
        int rc = hs_transport_isend(c->t, c->owner[s], c->tag_req, c->abuf[s], bytes, &c->areq[s]);
        if (rc < 0) {
            c->areq[s] = NULL;
            mark_lost(c, s, hs_last_error());
            continue;
        }
        c->adds_sent[s]++;
        c->st.bytes_sent += bytes;
    }
    if (c->rma) add_rma(c, diff);
    int lost1 = 0;
    for (int s = 0; s < c->m; s++) lost1 += c->lost[s];
    return lost1 - lost0;
}

/* The service has sent the final shard to every live rank (1), or not yet (0). */
static int served_all(hs_center_t *c, long *progress)
{
    int done = 1;
    long p = 0;
    center_lock(c);
    if (!c->final) done = 0;
    for (int r = 0; r < c->size; r++) {
        if (r == c->rank) continue;
        p += c->fin_adds[r] >= 0;
        p += c->answered[r] + c->dead[r];
        if (!c->dead[r] && (!c->answered[r] || c->oreq[r])) done = 0;
    }
    center_unlock(c);
    *progress += p;
    return done;
}

int hs_center_finish(hs_center_t *c, float *dst, double timeout_s)
{
    for (int s = 0; s < c->m; s++) {
        finish_send(c, s, &c->areq[s]);
        finish_send(c, s, &c->qreq[s]);
    }
    /* RMA: every atomic of this rank has completed above (its completion is the target's
     * acknowledgement that it was applied), so FIN announces 0 adds still to come. */
    if (c->own >= 0) {
        center_lock(c);
        c->fin_adds[c->rank] = c->rma ? 0 : c->adds_sent[c->own];
        center_unlock(c);
    }
    for (int s = 0; s < c->m; s++) {
        if (c->lost[s] || s == c->own) continue;
        HS_TRY(post_request(c, s, HS_EL_FIN, c->rma ? 0 : (uint64_t)c->adds_sent[s]));
    }
    double t0 = hs_exec_now(c->x), last = t0, next_probe = t0 + 0.5;
    long prev = -1;
    int own_copied = c->own < 0;
    for (;;) {
        long progress = 0;
        int left = 0;
        for (int s = 0; s < c->m; s++) left += c->rreq[s] != NULL;
        if (left) { /* one short wait for whatever final shard comes */
            int idx = -1;
            hs_tstatus_t st;
            int rc = hs_exec_wait(c->x, c->rreq, c->m, 0.1, HS_WAIT_NO_IDLE, &idx, &st);
            if (rc < 0 && rc != -ETIMEDOUT && idx >= 0)
                mark_lost(c, idx, hs_last_error());
            else if (rc < 0 && rc != -ETIMEDOUT)
                return rc;
            else if (rc == 0 && idx >= 0)
                HS_TRY(take_reply(c, idx, &st, HS_EL_FINAL, dst));
        }
        HS_TRY(hs_idle(c->x));
        for (int s = 0; s < c->m; s++) progress += 2 * (c->rreq[s] == NULL);
        int served = 1;
        if (c->own >= 0) {
            /* reap the service's completed final replies */
            for (int r = 0; r < c->size; r++) {
                center_lock(c);
                int ans = c->answered[r];
                center_unlock(c);
                if (ans && c->oreq[r]) {
                    int done = 0;
                    center_lock(c);
                    int trc = c->oreq[r] ? hs_transport_test(c->t, &c->oreq[r], &done, NULL) : 0;
                    if (trc < 0) c->dead[r] = 1, c->oreq[r] = NULL;
                    center_unlock(c);
                }
            }
            int rc = hs_svc_error(c->x, c->svc);
            if (rc < 0) {
                hs_error_prefix("rank %d", c->rank);
                return rc;
            }
            served = served_all(c, &progress);
            center_lock(c);
            int final = c->final;
            center_unlock(c);
            if (final && !own_copied) {
                center_lock(c);
                memcpy(dst + c->off[c->own], c->shard, shard_len(c, c->own) * sizeof(float));
                center_unlock(c);
                own_copied = 1;
            }
        }
        if (!left && served && own_copied) break;
        if (!left) HS_TRY(hs_exec_sleep(c->x, 0.05));
        double now = hs_exec_now(c->x);
        if (progress != prev) prev = progress, last = now;
        int silent = now - last >= timeout_s;
        if (c->own >= 0 && (now >= next_probe || silent)) {
            next_probe = now + 0.5;
            for (int r = 0; r < c->size; r++) {
                if (r == c->rank) continue;
                center_lock(c);
                int waiting = !c->dead[r] && c->fin_adds[r] < 0;
                center_unlock(c);
                if (!waiting) continue;
                /* heartbeats: a worker that heartbeats is waited for past the drain timeout
                 * (bounded); a frozen one until it is fenced */
                int gone = silent;
                if (c->d)
                    gone = hs_dist_peer_hb(c->d, r) == 2 ||
                           (silent && !hs_dist_keep_waiting(c->d, r, now - last, timeout_s));
                if (gone || !hs_exec_alive(c->x, r, 0.02)) {
                    HS_WARN("rank %d: rank %d %s before finishing with center shard %d", c->rank, r,
                            c->d && hs_dist_peer_hb(c->d, r) == 2 ? "was fenced"
                            : gone                                ? "went silent"
                                                                  : "exited",
                            c->own);
                    center_lock(c);
                    c->dead[r] = 1;
                    center_unlock(c);
                }
            }
        }
        for (int s = 0; left && s < c->m; s++) {
            if (!c->rreq[s]) continue;
            int give_up = silent;
            if (c->d) /* (heartbeats: as the workers above) */
                give_up =
                    hs_dist_peer_hb(c->d, c->owner[s]) == 2 ||
                    (silent && !hs_dist_keep_waiting(c->d, c->owner[s], now - last, timeout_s));
            if (give_up) mark_lost(c, s, "no final shard before the drain timeout");
        }
        double bound = 2 * timeout_s + (c->d ? 3 * c->d->o->fail_timeout_s : 0);
        if (silent && c->own >= 0 && now - last >= bound)
            return HS_ERR(-ETIMEDOUT,
                          "rank %d: center shard %d: final replies not complete "
                          "after %.1f s",
                          c->rank, c->own, bound);
    }
    int lost = 0;
    for (int s = 0; s < c->m; s++) lost += c->lost[s];
    return lost;
}
