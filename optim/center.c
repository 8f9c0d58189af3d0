/*
 * optim/center.c — the sharded EASGD center variable (optim/center.h): owners' service
 * threads answering READ / ADD / FIN requests, and the client side every rank uses; or, where
 * the provider has float atomics, gets and atomic adds on the owners' windows (the service
 * thread then only handles FIN).
 *
 * Consistency: every change to a shard happens under its owner's lock (the service thread for
 * remote adds, the owner's main thread for its own), so an add is applied exactly once and
 * whole. FIN carries the number of adds its sender posted to this owner; the owner declares
 * the shard final when every live rank's FIN is in and that many adds from it were applied
 * (a FIN may overtake an add when several receives are posted), then sends the final shard
 * to every finished rank. Its own finish call returns only after those replies completed, so
 * an owner never leaves while a live rank still needs its shard.
 * RMA path: a rank sends FIN only after each of its atomics completed; an atomic's completion
 * is the target's acknowledgement that it was applied (ofi_rxm answers every atomic), and the
 * FIN follows on the same ordered connection anyway, so FIN announces 0 adds still to come.
 */
#include "optim/center.h"

#include "hearsay/algo.h"
#include "hearsay/common.h"
#include "optim/elastic_wire.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SVC_POLL_S 0.1 /* the service thread re-checks its stop flag this often */
#define HDR        sizeof(hs_el_hdr_v1_t)

struct hs_center {
    hs_transport_t *t;
    int rank, size;
    size_t n;
    double timeout_s;
    int m;          /* shards */
    int *owner;     /* (m) */
    size_t *off;    /* (m + 1) */
    int own;        /* own shard or -1 */
    int rma;        /* 1: one-sided path (window + float atomics), 0: service-thread path */
    hs_twin_t *win; /* rma: this rank's window = its shard (0 bytes when it owns none) */

    /* client (main thread only) */
    unsigned char **abuf, **rbuf, **qbuf; /* (m) add payloads, replies, small requests */
    hs_treq_t **areq, **rreq, **qreq;     /* (m) */
    long *adds_sent;                      /* (m) */
    char *lost;                           /* (m) */
    hs_center_stats_t st;
    int (*idle)(void *ctx); /* called while finish waits (hs_center_set_idle) */
    void *idle_ctx;

    /* shared with the service thread, under mu */
    pthread_mutex_t mu;
    float *shard;       /* (len of own shard) */
    long applied;       /* adds applied to the own shard */
    long *applied_from; /* (size) */
    long *fin_adds;     /* (size) -1: no FIN yet, else adds that rank posted here */
    char *answered;     /* (size) final shard sent */
    char *dead;         /* (size) */
    int final;
    int stop;
    int svc_rc;
    char svc_msg[HS_ERRMSG_MAX];

    /* service thread */
    pthread_t thr;
    int thr_on;
    int nslots;
    hs_treq_t **sreq;     /* (nslots) */
    unsigned char **sbuf; /* (nslots) */
    unsigned char **obuf; /* (size) reply buffers, allocated on first use */
    hs_treq_t **oreq;     /* (size) */
};

static size_t shard_len(const hs_center_t *c, int s)
{
    return c->off[s + 1] - c->off[s];
}

int hs_center_parse_owners(const char *spec, int size, int **out, int *n)
{
    *out = NULL;
    *n = 0;
    char *mark = hs_calloc((size_t)size, 1, "owner set");
    if (!mark) return -ENOMEM;
    int rc = 0;
    if (!spec || !*spec || !strcmp(spec, "all")) {
        memset(mark, 1, (size_t)size);
    } else {
        const char *p = spec;
        while (*p && rc == 0) {
            char *end;
            long a = strtol(p, &end, 10), b = a;
            if (end == p) {
                rc = HS_ERR(-EINVAL, "--centers '%s': expected a rank at '%s'", spec, p);
                break;
            }
            p = end;
            if (*p == '-') {
                b = strtol(p + 1, &end, 10);
                if (end == p + 1) {
                    rc = HS_ERR(-EINVAL, "--centers '%s': expected a rank after '-'", spec);
                    break;
                }
                p = end;
            }
            if (a < 0 || b < a || b >= size) {
                rc = HS_ERR(-EINVAL, "--centers '%s': range %ld-%ld is not within ranks 0-%d", spec,
                            a, b, size - 1);
                break;
            }
            for (long r = a; r <= b; r++) mark[r] = 1;
            if (*p == ',')
                p++;
            else if (*p)
                rc = HS_ERR(-EINVAL, "--centers '%s': unexpected '%s'", spec, p);
        }
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

/* --- service thread -------------------------------------------------------------------- */

static void svc_fail(hs_center_t *c, int rc)
{
    pthread_mutex_lock(&c->mu);
    if (!c->svc_rc) {
        c->svc_rc = rc;
        snprintf(c->svc_msg, sizeof c->svc_msg, "%s", hs_last_error());
    }
    pthread_mutex_unlock(&c->mu);
}

/* Send the own shard to `dst` (kind DATA or FINAL) from its reply buffer. */
static int svc_reply(hs_center_t *c, int dst, hs_el_kind_t kind)
{
    size_t len = shard_len(c, c->own), bytes = HDR + len * sizeof(float);
    if (c->oreq[dst]) { /* the previous reply to dst: it has been received, so this is quick */
        int rc = hs_transport_wait(c->t, &c->oreq[dst], c->timeout_s, NULL);
        if (c->oreq[dst]) hs_transport_req_free(c->t, &c->oreq[dst]);
        if (rc < 0) {
            pthread_mutex_lock(&c->mu);
            c->dead[dst] = rc == -ECONNRESET;
            pthread_mutex_unlock(&c->mu);
            return 0; /* its reader is gone or stuck: not this service's failure */
        }
    }
    if (!c->obuf[dst] && !(c->obuf[dst] = hs_malloc(bytes, "center reply"))) return -ENOMEM;
    hs_el_hdr_v1_t *h = (hs_el_hdr_v1_t *)c->obuf[dst];
    pthread_mutex_lock(&c->mu);
    hs_el_hdr_init(h, kind, c->rank, c->own, len, (uint64_t)c->applied);
    memcpy(c->obuf[dst] + HDR, c->shard, len * sizeof(float));
    pthread_mutex_unlock(&c->mu);
    int rc = hs_transport_isend(c->t, dst, HS_TAG_CENTER_REP, c->obuf[dst], bytes, &c->oreq[dst]);
    if (rc < 0) {
        c->oreq[dst] = NULL;
        pthread_mutex_lock(&c->mu);
        c->dead[dst] = 1;
        pthread_mutex_unlock(&c->mu);
    }
    return 0;
}

/* Every live rank finished and its adds are applied: the shard is final; answer the FINs. */
static int svc_maybe_final(hs_center_t *c)
{
    pthread_mutex_lock(&c->mu);
    if (!c->final) {
        int all = 1;
        for (int r = 0; r < c->size && all; r++)
            if (!c->dead[r] && (c->fin_adds[r] < 0 || c->applied_from[r] < c->fin_adds[r])) all = 0;
        c->final = all;
    }
    int final = c->final;
    pthread_mutex_unlock(&c->mu);
    if (!final) return 0;
    for (int r = 0; r < c->size; r++) {
        if (r == c->rank) continue;
        pthread_mutex_lock(&c->mu);
        int due = c->fin_adds[r] >= 0 && !c->answered[r] && !c->dead[r];
        pthread_mutex_unlock(&c->mu);
        if (!due) continue;
        HS_TRY(svc_reply(c, r, HS_EL_FINAL));
        pthread_mutex_lock(&c->mu);
        c->answered[r] = 1;
        pthread_mutex_unlock(&c->mu);
    }
    return 0;
}

static int svc_handle(hs_center_t *c, const unsigned char *buf, const hs_tstatus_t *st)
{
    const hs_el_hdr_v1_t *h = (const hs_el_hdr_v1_t *)buf;
    HS_TRY(hs_el_hdr_check(h, st->len, st->source));
    int src = st->source;
    if (h->shard != c->own)
        return HS_ERR(-EPROTO, "center: rank %d sent a request for shard %d to the owner of %d",
                      src, h->shard, c->own);
    switch (h->kind) {
    case HS_EL_READ:
        return svc_reply(c, src, HS_EL_DATA);
    case HS_EL_ADD: {
        size_t len = shard_len(c, c->own);
        if (h->count != len)
            return HS_ERR(-EPROTO, "center: rank %d added %llu floats to a shard of %zu", src,
                          (unsigned long long)h->count, len);
        const float *v = (const float *)(buf + HDR);
        pthread_mutex_lock(&c->mu);
        for (size_t i = 0; i < len; i++) c->shard[i] += v[i];
        c->applied++;
        c->applied_from[src]++;
        pthread_mutex_unlock(&c->mu);
        return 0;
    }
    case HS_EL_FIN:
        pthread_mutex_lock(&c->mu);
        c->fin_adds[src] = (long)h->seq;
        c->dead[src] = 0; /* it finished after all */
        c->answered[src] = 0;
        pthread_mutex_unlock(&c->mu);
        return 0;
    default:
        return HS_ERR(-EPROTO, "center: unexpected message kind %u from rank %d", h->kind, src);
    }
}

static void *svc_main(void *arg)
{
    hs_center_t *c = arg;
    size_t cap = HDR + shard_len(c, c->own) * sizeof(float);
    for (;;) {
        pthread_mutex_lock(&c->mu);
        int stop = c->stop;
        pthread_mutex_unlock(&c->mu);
        if (stop) break;
        int active = 0;
        for (int i = 0; i < c->nslots; i++) active += c->sreq[i] != NULL;
        int idx = -1, rc = -ETIMEDOUT;
        hs_tstatus_t st;
        if (active)
            rc = hs_transport_waitany(c->t, c->sreq, c->nslots, SVC_POLL_S, &idx, &st);
        else
            hs_sleep(SVC_POLL_S); /* every other rank has exited */
        if (rc == 0 && idx >= 0) {
            int hr = svc_handle(c, c->sbuf[idx], &st);
            if (hr < 0) svc_fail(c, hr);
            hr = hs_transport_irecv(c->t, HS_ANY_SOURCE, HS_TAG_CENTER_REQ, c->sbuf[idx], cap,
                                    &c->sreq[idx]);
            if (hr < 0) svc_fail(c, hr);
        } else if (rc < 0 && rc != -ETIMEDOUT && idx < 0) {
            svc_fail(c, rc);
            hs_sleep(SVC_POLL_S);
        }
        int fr = svc_maybe_final(c);
        if (fr < 0) svc_fail(c, fr);
    }
    return NULL;
}

/* --- client ---------------------------------------------------------------------------- */

static void mark_lost(hs_center_t *c, int s, const char *why)
{
    if (c->lost[s]) return;
    c->lost[s] = 1;
    int o = c->owner[s];
    pthread_mutex_lock(&c->mu);
    c->dead[o] = 1;
    pthread_mutex_unlock(&c->mu);
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
    double t0 = hs_now();
    int rc = hs_transport_wait(c->t, req, c->timeout_s, NULL);
    c->st.wait_s += hs_now() - t0;
    if (rc < 0) mark_lost(c, s, hs_last_error());
}

static int post_request(hs_center_t *c, int s, hs_el_kind_t kind, uint64_t seq)
{
    size_t len = shard_len(c, s);
    finish_send(c, s, &c->qreq[s]);
    if (c->lost[s]) return 0;
    int rc = hs_transport_irecv(c->t, c->owner[s], HS_TAG_CENTER_REP, c->rbuf[s],
                                HDR + len * sizeof(float), &c->rreq[s]);
    if (rc < 0) return rc;
    hs_el_hdr_init((hs_el_hdr_v1_t *)c->qbuf[s], kind, c->rank, s, 0, seq);
    rc = hs_transport_isend(c->t, c->owner[s], HS_TAG_CENTER_REQ, c->qbuf[s], HDR, &c->qreq[s]);
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
    if (h->kind != kind || h->shard != s || h->count != len)
        return HS_ERR(-EPROTO,
                      "center: rank %d answered kind %u for shard %d (%llu floats), "
                      "expected kind %u for shard %d (%zu)",
                      c->owner[s], h->kind, h->shard, (unsigned long long)h->count, kind, s, len);
    memcpy(dst + c->off[s], c->rbuf[s] + HDR, len * sizeof(float));
    c->st.bytes_recv += st->len;
    c->st.msgs++;
    return 0;
}

/* Wait for the posted replies (bounded per wait by `limit`); returns shards lost. */
static int collect(hs_center_t *c, float *dst, hs_el_kind_t kind, double limit)
{
    int lost = 0;
    double t0 = hs_now();
    for (;;) {
        int left = 0;
        for (int s = 0; s < c->m; s++) left += c->rreq[s] != NULL;
        if (!left) break;
        int idx = -1;
        hs_tstatus_t st;
        int rc = hs_transport_waitany(c->t, c->rreq, c->m, limit, &idx, &st);
        if (rc == -ETIMEDOUT && idx < 0) {
            for (int s = 0; s < c->m; s++)
                if (c->rreq[s]) {
                    char why[128];
                    snprintf(why, sizeof why, "no answer within %.1f s", limit);
                    mark_lost(c, s, why);
                    lost++;
                }
            break;
        }
        if (rc < 0 && idx >= 0) {
            mark_lost(c, idx, hs_last_error());
            lost++;
            continue;
        }
        if (rc < 0) return rc;
        if (idx >= 0) HS_TRY(take_reply(c, idx, &st, kind, dst));
    }
    c->st.wait_s += hs_now() - t0;
    return lost;
}

/* One-sided read: a get of every available shard (the own one too, so that it is ordered
 * with the provider's atomics like any other access), each into its reply buffer and copied
 * to dst only when it completed. */
static int read_rma(hs_center_t *c, float *dst)
{
    double t0 = hs_now();
    for (int s = 0; s < c->m; s++) {
        if (c->lost[s]) continue;
        int rc = hs_transport_get(c->t, c->win, c->owner[s], 0, c->rbuf[s],
                                  shard_len(c, s) * sizeof(float), &c->rreq[s]);
        if (rc < 0) {
            c->rreq[s] = NULL;
            mark_lost(c, s, hs_last_error());
        }
    }
    for (;;) {
        int left = 0;
        for (int s = 0; s < c->m; s++) left += c->rreq[s] != NULL;
        if (!left) break;
        int idx = -1;
        hs_tstatus_t st;
        int rc = hs_transport_waitany(c->t, c->rreq, c->m, c->timeout_s, &idx, &st);
        if (rc == -ETIMEDOUT && idx < 0) {
            for (int s = 0; s < c->m; s++)
                if (c->rreq[s]) {
                    char why[128];
                    snprintf(why, sizeof why, "get not complete within %.1f s", c->timeout_s);
                    mark_lost(c, s, why);
                }
            break;
        }
        if (rc < 0 && idx >= 0) {
            mark_lost(c, idx, hs_last_error());
            continue;
        }
        if (rc < 0) return rc;
        if (idx < 0) continue;
        size_t len = shard_len(c, idx);
        memcpy(dst + c->off[idx], c->rbuf[idx], len * sizeof(float));
        c->st.bytes_recv += len * sizeof(float);
        c->st.msgs++;
    }
    c->st.wait_s += hs_now() - t0;
    return 0;
}

/* One-sided add: one float atomic add per shard (the transport chunks it to the provider's
 * atomic size), the own shard included: the provider applies remote atomics from its progress
 * thread, so a plain += by this thread could interleave with one of them and lose it. The
 * previous add of a shard completes first (its buffer is reused). */
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
        c->st.bytes_sent += len * sizeof(float);
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
        pthread_mutex_lock(&c->mu);
        memcpy(dst + c->off[c->own], c->shard, shard_len(c, c->own) * sizeof(float));
        pthread_mutex_unlock(&c->mu);
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
            pthread_mutex_lock(&c->mu);
            for (size_t i = 0; i < len; i++) c->shard[i] += v[i];
            c->applied++;
            c->applied_from[c->rank]++;
            pthread_mutex_unlock(&c->mu);
            c->adds_sent[s]++;
            continue;
        }
        finish_send(c, s, &c->areq[s]);
        if (c->lost[s]) continue;
        hs_el_hdr_init((hs_el_hdr_v1_t *)c->abuf[s], HS_EL_ADD, c->rank, s, len, 0);
        memcpy(c->abuf[s] + HDR, v, len * sizeof(float));
        size_t bytes = HDR + len * sizeof(float);
        int rc = hs_transport_isend(c->t, c->owner[s], HS_TAG_CENTER_REQ, c->abuf[s], bytes,
                                    &c->areq[s]);
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

/* 0 when `peer` has exited (the transport's liveness check on a receive nobody satisfies). */
static int probe_alive(hs_center_t *c, int peer)
{
    char dummy[8];
    hs_treq_t *req = NULL;
    if (hs_transport_irecv(c->t, peer, HS_TAG_PING, dummy, sizeof dummy, &req) < 0) return 1;
    /* a short wait is enough: the transport's liveness check runs on its first pass */
    int rc = hs_transport_wait(c->t, &req, 0.02, NULL);
    if (req) hs_transport_req_free(c->t, &req);
    return rc != -ECONNRESET;
}

/* The service has sent the final shard to every live rank (1), or not yet (0). */
static int served_all(hs_center_t *c, long *progress)
{
    int done = 1;
    long p = 0;
    pthread_mutex_lock(&c->mu);
    if (c->svc_rc) {
        pthread_mutex_unlock(&c->mu);
        return -1;
    }
    if (!c->final) done = 0;
    for (int r = 0; r < c->size; r++) {
        if (r == c->rank) continue;
        p += c->fin_adds[r] >= 0;
        p += c->answered[r] + c->dead[r];
        if (!c->dead[r] && (!c->answered[r] || c->oreq[r])) done = 0;
    }
    pthread_mutex_unlock(&c->mu);
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
        pthread_mutex_lock(&c->mu);
        c->fin_adds[c->rank] = c->rma ? 0 : c->adds_sent[c->own];
        pthread_mutex_unlock(&c->mu);
    }
    for (int s = 0; s < c->m; s++) {
        if (c->lost[s] || s == c->own) continue;
        HS_TRY(post_request(c, s, HS_EL_FIN, c->rma ? 0 : (uint64_t)c->adds_sent[s]));
    }
    double t0 = hs_now(), last = t0, next_probe = t0 + 0.5;
    long prev = -1;
    int own_copied = c->own < 0;
    for (;;) {
        long progress = 0;
        int left = 0;
        for (int s = 0; s < c->m; s++) left += c->rreq[s] != NULL;
        if (left) { /* one short wait for whatever final shard comes */
            int idx = -1;
            hs_tstatus_t st;
            int rc = hs_transport_waitany(c->t, c->rreq, c->m, 0.1, &idx, &st);
            if (rc < 0 && rc != -ETIMEDOUT && idx >= 0)
                mark_lost(c, idx, hs_last_error());
            else if (rc < 0 && rc != -ETIMEDOUT)
                return rc;
            else if (rc == 0 && idx >= 0)
                HS_TRY(take_reply(c, idx, &st, HS_EL_FINAL, dst));
        }
        if (c->idle) HS_TRY(c->idle(c->idle_ctx));
        for (int s = 0; s < c->m; s++) progress += 2 * (c->rreq[s] == NULL);
        int served = 1;
        if (c->own >= 0) {
            /* reap the service's completed final replies */
            for (int r = 0; r < c->size; r++) {
                pthread_mutex_lock(&c->mu);
                int ans = c->answered[r];
                pthread_mutex_unlock(&c->mu);
                if (ans && c->oreq[r]) {
                    int done = 0;
                    pthread_mutex_lock(&c->mu);
                    int trc = c->oreq[r] ? hs_transport_test(c->t, &c->oreq[r], &done, NULL) : 0;
                    if (trc < 0) c->dead[r] = 1, c->oreq[r] = NULL;
                    pthread_mutex_unlock(&c->mu);
                }
            }
            served = served_all(c, &progress);
            if (served < 0) {
                pthread_mutex_lock(&c->mu);
                int rc = c->svc_rc;
                char msg[HS_ERRMSG_MAX];
                snprintf(msg, sizeof msg, "%s", c->svc_msg);
                pthread_mutex_unlock(&c->mu);
                return HS_ERR(rc, "rank %d: center service: %s", c->rank, msg);
            }
            pthread_mutex_lock(&c->mu);
            int final = c->final;
            pthread_mutex_unlock(&c->mu);
            if (final && !own_copied) {
                pthread_mutex_lock(&c->mu);
                memcpy(dst + c->off[c->own], c->shard, shard_len(c, c->own) * sizeof(float));
                pthread_mutex_unlock(&c->mu);
                own_copied = 1;
            }
        }
        if (!left && served && own_copied) break;
        if (!left) hs_sleep(0.05);
        double now = hs_now();
        if (progress != prev) prev = progress, last = now;
        int silent = now - last >= timeout_s;
        if (c->own >= 0 && (now >= next_probe || silent)) {
            next_probe = now + 0.5;
            for (int r = 0; r < c->size; r++) {
                if (r == c->rank) continue;
                pthread_mutex_lock(&c->mu);
                int waiting = !c->dead[r] && c->fin_adds[r] < 0;
                pthread_mutex_unlock(&c->mu);
                if (!waiting) continue;
                if (silent || !probe_alive(c, r)) {
                    HS_WARN("rank %d: rank %d %s before finishing with center shard %d", c->rank, r,
                            silent ? "went silent" : "exited", c->own);
                    pthread_mutex_lock(&c->mu);
                    c->dead[r] = 1;
                    pthread_mutex_unlock(&c->mu);
                }
            }
        }
        if (silent && left) {
            for (int s = 0; s < c->m; s++)
                if (c->rreq[s]) mark_lost(c, s, "no final shard before the drain timeout");
        }
        if (silent && c->own >= 0 && now - last >= 2 * timeout_s)
            return HS_ERR(-ETIMEDOUT,
                          "rank %d: center shard %d: final replies not complete "
                          "after %.1f s",
                          c->rank, c->own, 2 * timeout_s);
    }
    int lost = 0;
    for (int s = 0; s < c->m; s++) lost += c->lost[s];
    return lost;
}

/* --- set-up and accessors -------------------------------------------------------------- */

void hs_center_close(hs_center_t **cp)
{
    hs_center_t *c = cp ? *cp : NULL;
    if (!c) return;
    if (c->thr_on) {
        pthread_mutex_lock(&c->mu);
        c->stop = 1;
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->thr, NULL);
    }
    for (int i = 0; i < c->nslots && c->sreq; i++) {
        if (c->sreq[i]) hs_transport_req_free(c->t, &c->sreq[i]);
        free(c->sbuf[i]);
    }
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
    free(c->sreq);
    free(c->sbuf);
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
    free(c->owner);
    free(c->off);
    pthread_mutex_destroy(&c->mu);
    free(c);
    *cp = NULL;
}

/* Choose the path (c->rma): "service", or "rma" / "auto" which create the window (collective)
 * and probe a 1-float atomic add of 0 into the first owner's shard. -ENOSYS (no RMA or no
 * float atomics: a property of the provider, so every rank decides alike) falls back to the
 * service thread under "auto" and is an error under "rma". */
static int choose_path(hs_center_t *c, const char *path)
{
    if (!path || !*path) path = getenv("HS_CENTER_PATH");
    if (!path || !*path) path = "auto";
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
        if (rc == 0) rc = hs_transport_wait(c->t, &req, c->timeout_s, NULL);
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

int hs_center_open(hs_center_t **out, hs_transport_t *t, size_t n, const float *init,
                   const int *owners, int n_owners, double timeout_s, const char *path)
{
    *out = NULL;
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
    pthread_mutex_init(&c->mu, NULL);
    c->t = t;
    c->rank = rank;
    c->size = size;
    c->n = n;
    c->m = m;
    c->own = -1;
    c->timeout_s = timeout_s;
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
        /* the RMA path's service thread only ever receives FIN requests (header only) */
        size_t len = shard_len(c, c->own), cap = HDR + (c->rma ? 0 : len * sizeof(float));
        /* Two receives per rank (a read or FIN and an add may be in flight from each), at
         * least 4 and at most 64. */
        c->nslots = HS_MIN(64, HS_MAX(4, 2 * size));
        c->sreq = hs_calloc((size_t)c->nslots, sizeof *c->sreq, "service receives");
        c->sbuf = hs_calloc((size_t)c->nslots, sizeof *c->sbuf, "service buffers");
        if (!c->sreq || !c->sbuf) goto fail;
        for (int i = 0; i < c->nslots; i++) {
            rc = -ENOMEM;
            if (!(c->sbuf[i] = hs_malloc(cap, "service buffer"))) goto fail;
            if ((rc = hs_transport_irecv(t, HS_ANY_SOURCE, HS_TAG_CENTER_REQ, c->sbuf[i], cap,
                                         &c->sreq[i])) < 0)
                goto fail;
        }
        if ((rc = pthread_create(&c->thr, NULL, svc_main, c)) != 0) {
            rc = HS_ERR(-rc, "cannot start the center service thread: %s", strerror(rc));
            goto fail;
        }
        c->thr_on = 1;
    }
    *out = c;
    return 0;
fail:
    hs_center_close(&c);
    return rc;
}

void hs_center_set_idle(hs_center_t *c, int (*idle)(void *ctx), void *ctx)
{
    c->idle = idle;
    c->idle_ctx = ctx;
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

int hs_center_rank_dead(const hs_center_t *c, int r)
{
    hs_center_t *mc = (hs_center_t *)c;
    pthread_mutex_lock(&mc->mu);
    int d = c->dead[r];
    pthread_mutex_unlock(&mc->mu);
    return d;
}

int hs_center_own_shard(const hs_center_t *c)
{
    return c->own;
}

const char *hs_center_path(const hs_center_t *c)
{
    return c->rma ? "rma" : "service";
}

long hs_center_adds_applied(hs_center_t *c)
{
    if (c->rma) return -1; /* remote atomics land without the owner knowing */
    pthread_mutex_lock(&c->mu);
    long a = c->applied;
    pthread_mutex_unlock(&c->mu);
    return a;
}

hs_center_stats_t *hs_center_stats(hs_center_t *c)
{
    return &c->st;
}

size_t hs_center_state_bytes(const hs_center_t *c)
{
    return c->own >= 0 ? shard_len(c, c->own) * sizeof(float) : 0;
}

int hs_center_state_save(hs_center_t *c, void *buf)
{
    if (c->own < 0) return 0;
    pthread_mutex_lock(&c->mu);
    memcpy(buf, c->shard, hs_center_state_bytes(c));
    pthread_mutex_unlock(&c->mu);
    return 0;
}

int hs_center_state_load(hs_center_t *c, const void *buf)
{
    if (c->own < 0) return 0;
    pthread_mutex_lock(&c->mu);
    memcpy(c->shard, buf, hs_center_state_bytes(c));
    pthread_mutex_unlock(&c->mu);
    return 0;
}
