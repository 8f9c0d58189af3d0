/*
 * gossip/hybrid.c — "hybrid": the transport chosen per pair of ranks, as NCCL chooses per
 * peer. Ranks on this host talk over hsshm, ranks on other hosts over a libfabric provider
 * (tcp;ofi_rxm unless told otherwise), in one job, behind the same ops table.
 *
 * A hybrid context holds two sub-transports, the registry entries the generic layer hands
 * create_hosts (hybrid: hsshm and libfabric tcp; hsshm+P: P), opened and driven through their
 * ops tables (HS_OP, gossip/transport_util.c), never through gossip/transport.c:
 *   - shm: hsshm among the ranks of this host (local numbering 0..lsize-1, mapped to global
 *     ranks here); absent when this host holds one rank;
 *   - fab: a libfabric endpoint for every rank of the job (global numbering), used for the
 *     peers on other hosts and for the hybrid's collectives (barrier, window keys).
 * Each request wraps the sub-request(s) it posted. Sends and directed receives go to the
 * peer's backend. A receive from any source is posted on both backends into private buffers;
 * the first message delivered wins and is copied out; the other sub-request is never
 * cancelled (a cancel races with a completion by another thread) but adopted as an "orphan",
 * and whatever it receives later joins a stash that later receives and probes search first.
 * So no message is lost, at the price of one copy for receives from any source.
 *
 * Waiting: a set of requests on one backend blocks in that backend's waitany; a mixed set
 * blocks in libfabric's (on its CQ's wait fd) for slices of 0.1..2 ms and polls hsshm between
 * them, never spinning. Liveness: local peers are looked at every 0.2 s (hsshm's peer_gone),
 * remote ones fail through libfabric's CQ errors and the timeout, as in the fabric backend.
 * Shaping: the spec (global ranks) goes to the libfabric side as is; for hsshm each local link
 * is resolved to its parameters and rewritten in local numbering.
 * Windows: created on both backends; put/get go to the peer's. No atomics (hsshm has none, and
 * every rank must decide alike whether to use them): -ENOSYS, callers fall back to messages.
 */
#include "gossip/transport_impl.h"
#include "hearsay/common.h"
#include "hearsay/shaping.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HYB_ADDR_MAGIC   0x59485348u /* "HSHY" */
#define HYB_WIRE_VERSION 1u
#define HYB_SLOT         HS_TRANSPORT_ADDR_MAX
#define SLICE_MIN        100e-6
#define SLICE_MAX        2e-3
#define LIVE_PERIOD      0.2

enum { SUB_SHM = 0, SUB_FAB = 1 };
enum { K_SHM = 0, K_FAB = 1, K_ANY, K_STASH };

typedef struct stash {
    struct stash *next;
    int src; /* global rank */
    uint32_t tag;
    size_t len;
    void *buf;
} stash_t;

typedef struct orphan {
    struct orphan *next;
    int sub;
    uint32_t tag;
    size_t cap; /* of buf, the receive's capacity */
    hs_treq_t *req;
    void *buf;
} orphan_t;

struct hs_treq {
    struct hs_treq *prev_live, *next_live;
    int kind, send, peer;
    uint32_t tag;
    hs_treq_t *sub[2];
    int done[2];
    hs_tstatus_t st[2]; /* sub statuses, sources already global */
    void *buf, *pbuf[2];
    size_t cap;
};

struct hs_twin {
    hs_twin_t *w[2];
};

typedef struct hyb {
    hs_transport_t *t;
    hs_transport_t *sub[2]; /* SUB_SHM (NULL when alone on this host), SUB_FAB */
    int *host_of;           /* (size) host index of every rank */
    int *lrank;             /* (size) local rank on this host, or -1 */
    int *grank;             /* (lsize) global rank of each local rank */
    int lsize;
    char prov[96];
    pthread_mutex_t lock; /* stash, orphans, live list */
    stash_t *stash, **stash_tail;
    orphan_t *orphans;
    int norphans[2];
    int orphans_max[2]; /* high-water marks (hs_hybrid_orphans, the debug line at close) */
    long reclaimed;     /* receives from any source served by an orphan instead of a post */
    struct hs_treq live;
} hyb_t;

static int sub_of(const hyb_t *h, int peer)
{
    return h->lrank[peer] >= 0 && h->sub[SUB_SHM] ? SUB_SHM : SUB_FAB;
}

static int sub_peer(const hyb_t *h, int sub, int peer)
{
    return sub == SUB_SHM && peer >= 0 ? h->lrank[peer] : peer;
}

static void to_global(const hyb_t *h, int sub, hs_tstatus_t *st)
{
    if (sub == SUB_SHM && st->source >= 0 && st->source < h->lsize)
        st->source = h->grank[st->source];
}

/* --- requests ---------------------------------------------------------------------------- */

static struct hs_treq *req_new(hyb_t *h, int kind, int send, int peer, uint32_t tag)
{
    struct hs_treq *r = hs_calloc(1, sizeof *r, "hybrid request");
    if (!r) return NULL;
    r->kind = kind;
    r->send = send;
    r->peer = peer;
    r->tag = tag;
    pthread_mutex_lock(&h->lock);
    r->next_live = h->live.next_live;
    r->prev_live = &h->live;
    h->live.next_live->prev_live = r;
    h->live.next_live = r;
    pthread_mutex_unlock(&h->lock);
    return r;
}

/* Unlink and free the wrapper (its sub-requests must be gone or handed over already). */
static void req_destroy(hyb_t *h, struct hs_treq *r)
{
    pthread_mutex_lock(&h->lock);
    r->prev_live->next_live = r->next_live;
    r->next_live->prev_live = r->prev_live;
    pthread_mutex_unlock(&h->lock);
    free(r->pbuf[0]);
    free(r->pbuf[1]);
    free(r);
}

/* Hand r's incomplete receive on side `sub` (posted into its private buffer) to the orphan
 * list; r no longer holds it (locked). */
static void adopt_locked(hyb_t *h, struct hs_treq *r, int sub)
{
    hs_treq_t *req = r->sub[sub];
    void *buf = r->pbuf[sub];
    r->sub[sub] = NULL;
    r->pbuf[sub] = NULL;
    orphan_t *o = malloc(sizeof *o);
    if (!o) { /* cannot keep it: cancel instead (the only place a message may be lost) */
        hs_op_req_free(h->sub[sub], &req);
        free(buf);
        return;
    }
    o->next = h->orphans;
    o->sub = sub;
    o->tag = r->tag;
    o->cap = r->cap;
    o->req = req;
    o->buf = buf;
    h->orphans = o;
    if (++h->norphans[sub] > h->orphans_max[sub]) h->orphans_max[sub] = h->norphans[sub];
}

/* An orphan on side `sub` that a new receive from any source with this tag and capacity can
 * take over as its own posted receive (same tag, a buffer at least cap bytes): its receive and
 * buffer move into *req and *buf. 1 when one was found. Locked.
 *
 * Without this, every receive from any source that completed on one side left its other side
 * posted for good: a service that reposts its receives (the EASGD center) added one posted
 * receive per message it took, so the backends' posted lists and the orphan list scanned on
 * every poll grew with the run (docs/transport.md, "Receives from any source"). */
static int reclaim_locked(hyb_t *h, int sub, uint32_t tag, size_t cap, hs_treq_t **req, void **buf)
{
    for (orphan_t **p = &h->orphans; *p; p = &(*p)->next) {
        orphan_t *o = *p;
        if (o->sub != sub || o->tag != tag || o->cap < cap) continue;
        *p = o->next;
        h->norphans[sub]--;
        h->reclaimed++;
        *req = o->req;
        *buf = o->buf;
        free(o);
        return 1;
    }
    return 0;
}

static void stash_push_locked(hyb_t *h, int src, uint32_t tag, size_t len, void *buf)
{
    stash_t *s = malloc(sizeof *s);
    if (!s) {
        HS_WARN("rank %d: hybrid transport: out of memory keeping a %zu-byte message from rank "
                "%d (tag %u): dropped",
                h->t->rank, len, src, tag);
        free(buf);
        return;
    }
    s->next = NULL;
    s->src = src;
    s->tag = tag;
    s->len = len;
    s->buf = buf;
    *h->stash_tail = s;
    h->stash_tail = &s->next;
}

/* Test the orphans; what they received joins the stash. Locked. */
static void poll_orphans_locked(hyb_t *h)
{
    for (orphan_t **p = &h->orphans; *p;) {
        orphan_t *o = *p;
        int done = 0;
        hs_tstatus_t st;
        int rc = HS_OP(h->sub[o->sub], test, &o->req, &done, &st);
        if (rc < 0 || done) {
            if (rc == 0) {
                to_global(h, o->sub, &st);
                stash_push_locked(h, st.source, st.tag, st.len, o->buf);
            } else {
                free(o->buf);
            }
            *p = o->next;
            h->norphans[o->sub]--;
            free(o);
            continue;
        }
        p = &o->next;
    }
}

/* First stashed message from src (or any) with tag (or any tag); unlinked. Locked. */
static stash_t *stash_take_locked(hyb_t *h, int src, uint32_t tag, int any_tag, int peek)
{
    stash_t **pp = &h->stash, *prev = NULL;
    for (; *pp; prev = *pp, pp = &(*pp)->next) {
        stash_t *s = *pp;
        if ((src != HS_ANY_SOURCE && s->src != src) || (!any_tag && s->tag != tag)) continue;
        if (peek) return s;
        *pp = s->next;
        if (h->stash_tail == &s->next) h->stash_tail = prev ? &prev->next : &h->stash;
        return s;
    }
    return NULL;
}

/* Deliver stashed message s into r's buffer; frees s. */
static int deliver_stash(hyb_t *h, struct hs_treq *r, stash_t *s, hs_tstatus_t *st)
{
    int rc = 0;
    if (s->len > r->cap)
        rc = HS_ERR(-EMSGSIZE,
                    "rank %d: a message of %zu bytes from rank %d (tag %u) is larger than the "
                    "receive buffer of %zu bytes",
                    h->t->rank, s->len, s->src, s->tag, r->cap);
    else if (s->len)
        memcpy(r->buf, s->buf, s->len);
    if (st) *st = (hs_tstatus_t){.source = s->src, .tag = s->tag, .len = s->len};
    free(s->buf);
    free(s);
    return rc;
}

/* Look at r without freeing it: *done with *st when it completed. Sub-requests that
 * completed are recorded in r (done/st) and are gone. An error leaves r without sub-requests
 * the caller must keep (the failed one is freed; the other of an ANY receive is adopted). */
static int req_poll(hyb_t *h, struct hs_treq *r, int *done, hs_tstatus_t *st)
{
    *done = 0;
    if (r->kind == K_STASH) {
        *done = 1;
        *st = r->st[0];
        return 0;
    }
    for (int k = 0; k < 2; k++) {
        if (!r->sub[k] || r->done[k]) continue;
        int d = 0;
        hs_tstatus_t s = {0};
        int rc = HS_OP(h->sub[k], test, &r->sub[k], &d, &s);
        if (rc < 0) {
            r->sub[k] = NULL;
            if (r->kind == K_ANY && r->sub[1 - k]) {
                pthread_mutex_lock(&h->lock);
                adopt_locked(h, r, 1 - k);
                pthread_mutex_unlock(&h->lock);
            }
            return rc;
        }
        if (d) {
            to_global(h, k, &s);
            r->done[k] = 1;
            r->st[k] = s;
            r->sub[k] = NULL;
        }
    }
    if (r->kind != K_ANY) {
        int k = r->kind;
        if (r->done[k]) {
            *done = 1;
            *st = r->st[k];
            return 0;
        }
        if (r->send || !h->norphans[k]) return 0;
        /* An orphan may have taken this receive's message: look in the stash. */
        pthread_mutex_lock(&h->lock);
        poll_orphans_locked(h);
        stash_t *s = stash_take_locked(h, r->peer, r->tag, 0, 0);
        pthread_mutex_unlock(&h->lock);
        if (!s) return 0;
        /* The stash served it; the posted receive writes into the caller's buffer, so it
         * cannot be adopted: cancel it (rare: only when a receive from any source with the
         * same tag left an orphan behind). */
        hs_op_req_free(h->sub[k], &r->sub[k]);
        *done = 1;
        return deliver_stash(h, r, s, st);
    }
    /* Receive from any source. */
    int k = r->done[SUB_SHM] ? SUB_SHM : r->done[SUB_FAB] ? SUB_FAB : -1;
    stash_t *s = NULL;
    pthread_mutex_lock(&h->lock);
    if (k < 0) {
        poll_orphans_locked(h);
        s = stash_take_locked(h, HS_ANY_SOURCE, r->tag, 0, 0);
        if (!s) {
            pthread_mutex_unlock(&h->lock);
            return 0;
        }
    }
    for (int o = 0; o < 2; o++) {
        if (o == k) continue;
        if (r->done[o]) { /* both arrived: the second one waits in the stash */
            stash_push_locked(h, r->st[o].source, r->st[o].tag, r->st[o].len, r->pbuf[o]);
            r->pbuf[o] = NULL;
        } else if (r->sub[o]) {
            adopt_locked(h, r, o);
        }
    }
    pthread_mutex_unlock(&h->lock);
    *done = 1;
    if (s) return deliver_stash(h, r, s, st);
    *st = r->st[k];
    if (st->len > r->cap)
        return HS_ERR(-EMSGSIZE,
                      "rank %d: a message of %zu bytes from rank %d is larger than the "
                      "receive buffer of %zu bytes",
                      h->t->rank, st->len, st->source, r->cap);
    if (st->len) memcpy(r->buf, r->pbuf[k], st->len);
    return 0;
}

/* --- ops: messages ----------------------------------------------------------------------- */

static int hyb_isend(hs_transport_t *t, int peer, uint32_t tag, const void *buf, size_t len,
                     hs_treq_t **req)
{
    hyb_t *h = t->impl;
    int k = sub_of(h, peer);
    struct hs_treq *r = req_new(h, k, 1, peer, tag);
    if (!r) return -ENOMEM;
    int rc = HS_OP(h->sub[k], isend, sub_peer(h, k, peer), tag, buf, len, &r->sub[k]);
    if (rc < 0) {
        req_destroy(h, r);
        return rc;
    }
    *req = r;
    return 0;
}

static int hyb_irecv(hs_transport_t *t, int peer, uint32_t tag, void *buf, size_t cap,
                     hs_treq_t **req)
{
    hyb_t *h = t->impl;
    pthread_mutex_lock(&h->lock);
    poll_orphans_locked(h);
    stash_t *s = stash_take_locked(h, peer, tag, 0, 0);
    pthread_mutex_unlock(&h->lock);
    int kind = s                                          ? K_STASH
               : peer == HS_ANY_SOURCE && h->sub[SUB_SHM] ? K_ANY
               : peer == HS_ANY_SOURCE                    ? K_FAB
                                                          : sub_of(h, peer);
    struct hs_treq *r = req_new(h, kind, 0, peer, tag);
    if (!r) {
        if (s) {
            pthread_mutex_lock(&h->lock);
            stash_push_locked(h, s->src, s->tag, s->len, s->buf);
            pthread_mutex_unlock(&h->lock);
            free(s);
        }
        return -ENOMEM;
    }
    r->buf = buf;
    r->cap = cap;
    int rc = 0;
    if (s) {
        rc = deliver_stash(h, r, s, &r->st[0]);
    } else if (kind == K_ANY) {
        /* Each side: an orphan left by an earlier receive with this tag, else a new post. */
        for (int k = 0; k < 2 && rc == 0; k++) {
            pthread_mutex_lock(&h->lock);
            int got = reclaim_locked(h, k, tag, cap, &r->sub[k], &r->pbuf[k]);
            pthread_mutex_unlock(&h->lock);
            if (got) continue;
            r->pbuf[k] = hs_malloc(cap ? cap : 1, "receive-from-any buffer");
            rc = r->pbuf[k]
                     ? HS_OP(h->sub[k], irecv, HS_ANY_SOURCE, tag, r->pbuf[k], cap, &r->sub[k])
                     : -ENOMEM;
        }
        if (rc < 0 && r->sub[SUB_SHM]) { /* may be a reclaimed one: it stays an orphan */
            pthread_mutex_lock(&h->lock);
            adopt_locked(h, r, SUB_SHM);
            pthread_mutex_unlock(&h->lock);
        }
    } else {
        rc = HS_OP(h->sub[kind], irecv, sub_peer(h, kind, peer), tag, buf, cap, &r->sub[kind]);
    }
    if (rc < 0) {
        req_destroy(h, r);
        return rc;
    }
    *req = r;
    return 0;
}

static int hyb_test(hs_transport_t *t, hs_treq_t **req, int *done, hs_tstatus_t *st)
{
    hyb_t *h = t->impl;
    hs_tstatus_t s;
    int rc = req_poll(h, *req, done, &s);
    if (rc < 0 || *done) {
        if (rc == 0 && st) *st = s;
        struct hs_treq *r = *req;
        for (int k = 0; k < 2; k++)
            if (r->sub[k]) hs_op_req_free(h->sub[k], &r->sub[k]);
        req_destroy(h, r);
        *req = NULL;
    }
    return rc;
}

static int hyb_progress(hs_transport_t *t)
{
    hyb_t *h = t->impl;
    int n = 0;
    for (int k = 0; k < 2; k++) {
        if (!h->sub[k]) continue;
        int rc = h->sub[k]->ops->progress(h->sub[k]);
        if (rc < 0) return rc;
        n += rc;
    }
    pthread_mutex_lock(&h->lock);
    poll_orphans_locked(h);
    pthread_mutex_unlock(&h->lock);
    return n;
}

/* Finish request i of a waitany (completed or failed). */
static int finish(hyb_t *h, hs_treq_t **reqs, int i, int rc, hs_tstatus_t *s, int *index,
                  hs_tstatus_t *st)
{
    struct hs_treq *r = reqs[i];
    for (int k = 0; k < 2; k++)
        if (r->sub[k]) hs_op_req_free(h->sub[k], &r->sub[k]);
    req_destroy(h, r);
    reqs[i] = NULL;
    *index = i;
    if (rc == 0 && st) *st = *s;
    return rc;
}

static int hyb_waitany(hs_transport_t *t, hs_treq_t **reqs, int n, double timeout_s, int *index,
                       hs_tstatus_t *st)
{
    hyb_t *h = t->impl;
    *index = -1;
    /* One backend, nothing recorded yet, no orphan that could take a message: block there. */
    int only = -1, mixed = 0;
    for (int i = 0; i < n && !mixed; i++) {
        struct hs_treq *r = reqs[i];
        if (!r) continue;
        if (r->kind > K_FAB || r->done[r->kind] || (!r->send && h->norphans[r->kind]) ||
            (only >= 0 && only != r->kind))
            mixed = 1;
        only = r->kind;
    }
    if (only < 0) return 0;
    if (!mixed && timeout_s > 0) {
        hs_treq_t **subs = hs_calloc((size_t)n, sizeof *subs, "request list");
        if (!subs) return -ENOMEM;
        for (int i = 0; i < n; i++) subs[i] = reqs[i] ? reqs[i]->sub[only] : NULL;
        int idx = -1;
        hs_tstatus_t s = {0};
        int rc = HS_OP(h->sub[only], waitany, subs, n, timeout_s, &idx, &s);
        int hit = -1;
        for (int i = 0; i < n; i++)
            if (reqs[i] && reqs[i]->sub[only] && !subs[i]) hit = i; /* freed by the backend */
        free(subs);
        if (hit >= 0) {
            reqs[hit]->sub[only] = NULL;
            to_global(h, only, &s);
            return finish(h, reqs, hit, rc, &s, index, st);
        }
        return rc;
    }
    double t0 = hs_now(), next_live = t0 + LIVE_PERIOD, slice = SLICE_MIN;
    hs_treq_t **subs = hs_calloc((size_t)n, sizeof *subs, "request list");
    if (!subs) return -ENOMEM;
    int rc = 0;
    for (;;) {
        for (int i = 0; i < n; i++) {
            if (!reqs[i]) continue;
            int d = 0;
            hs_tstatus_t s = {0};
            rc = req_poll(h, reqs[i], &d, &s);
            if (rc < 0 || d) {
                free(subs);
                return finish(h, reqs, i, rc, &s, index, st);
            }
        }
        double now = hs_now();
        if (timeout_s <= 0) break;
        if (now - t0 >= timeout_s) {
            char who[256] = "";
            size_t w = 0;
            for (int i = 0; i < n && w + 40 < sizeof who; i++) {
                const struct hs_treq *r = reqs[i];
                if (!r) continue;
                char peer[16] = "any rank";
                if (r->peer >= 0) snprintf(peer, sizeof peer, "rank %d", r->peer);
                w += (size_t)snprintf(who + w, sizeof who - w, "%s %s %s (tag %u)", w ? "," : "",
                                      r->send ? "send to" : "receive from", peer, r->tag);
            }
            rc = HS_ERR(-ETIMEDOUT, "rank %d: hybrid transport: no request completed in %.1f s:%s",
                        t->rank, timeout_s, who);
            break;
        }
        if (now >= next_live) { /* local peers: has one exited? */
            next_live = now + LIVE_PERIOD;
            for (int i = 0; i < n; i++) {
                struct hs_treq *r = reqs[i];
                if (!r || r->peer < 0 || r->kind != K_SHM) continue;
                if (HS_OP(h->sub[SUB_SHM], peer_gone, h->lrank[r->peer]) == 1) {
                    rc = HS_ERR(-ECONNRESET,
                                "rank %d: peer rank %d (same host) has exited during %s rank %d "
                                "(tag %u)",
                                t->rank, r->peer, r->send ? "send to" : "receive from", r->peer,
                                r->tag);
                    free(subs);
                    return finish(h, reqs, i, rc, NULL, index, st);
                }
            }
        }
        /* Block in one backend for a slice: libfabric's wait fd when it has requests here. */
        int k = -1;
        for (int i = 0; i < n; i++) {
            struct hs_treq *r = reqs[i];
            subs[i] = NULL;
            if (!r) continue;
            if (r->sub[SUB_FAB] && !r->done[SUB_FAB]) k = SUB_FAB;
            if (r->sub[SUB_SHM] && !r->done[SUB_SHM] && k < 0) k = SUB_SHM;
        }
        double sl = HS_MIN(slice, timeout_s - (hs_now() - t0));
        if (k >= 0 && sl > 0) {
            for (int i = 0; i < n; i++)
                subs[i] = reqs[i] && !reqs[i]->done[k] ? reqs[i]->sub[k] : NULL;
            int idx = -1;
            hs_tstatus_t s = {0};
            int wr = HS_OP(h->sub[k], waitany, subs, n, sl, &idx, &s);
            for (int i = 0; i < n; i++) {
                struct hs_treq *r = reqs[i];
                if (!r || !r->sub[k] || r->done[k] || subs[i]) continue;
                r->sub[k] = NULL; /* completed or failed in the backend */
                if (wr < 0 && wr != -ETIMEDOUT) {
                    if (r->kind == K_ANY && r->sub[1 - k]) {
                        pthread_mutex_lock(&h->lock);
                        adopt_locked(h, r, 1 - k);
                        pthread_mutex_unlock(&h->lock);
                    }
                    free(subs);
                    return finish(h, reqs, i, wr, NULL, index, st);
                }
                to_global(h, k, &s);
                r->done[k] = 1;
                r->st[k] = s;
            }
            if (wr < 0 && wr != -ETIMEDOUT) {
                free(subs);
                return wr;
            }
            if (wr == -ETIMEDOUT) hs_error_clear(); /* a slice, not the caller's timeout */
        } else if (sl > 0) {
            struct timespec ts = {0, (long)(sl * 1e9)};
            nanosleep(&ts, NULL);
        }
        slice = HS_MIN(slice * 2, SLICE_MAX);
    }
    free(subs);
    return rc;
}

static int hyb_probe(hs_transport_t *t, int peer, uint32_t tag, int any_tag, int *found,
                     hs_tstatus_t *st)
{
    hyb_t *h = t->impl;
    *found = 0;
    pthread_mutex_lock(&h->lock);
    poll_orphans_locked(h);
    stash_t *s = stash_take_locked(h, peer, tag, any_tag, 1);
    if (s) {
        *found = 1;
        if (st) *st = (hs_tstatus_t){.source = s->src, .tag = s->tag, .len = s->len};
    }
    pthread_mutex_unlock(&h->lock);
    if (s) return 0;
    for (int k = 0; k < 2 && !*found; k++) {
        if (!h->sub[k] || (peer != HS_ANY_SOURCE && sub_of(h, peer) != k)) continue;
        hs_tstatus_t x = {0};
        int rc = HS_OP(h->sub[k], probe, sub_peer(h, k, peer), tag, any_tag, found, &x);
        if (rc < 0) return rc;
        to_global(h, k, &x);
        if (*found && st) *st = x;
    }
    return 0;
}

static void hyb_req_free(hs_transport_t *t, hs_treq_t **req)
{
    hyb_t *h = t->impl;
    struct hs_treq *r = *req;
    pthread_mutex_lock(&h->lock);
    for (int k = 0; k < 2; k++) {
        if (!r->sub[k]) continue;
        if (r->kind == K_ANY) /* private buffer: keep receiving, nothing is lost */
            adopt_locked(h, r, k);
    }
    pthread_mutex_unlock(&h->lock);
    for (int k = 0; k < 2; k++)
        if (r->sub[k]) hs_op_req_free(h->sub[k], &r->sub[k]);
    req_destroy(h, r);
    *req = NULL;
}

static int hyb_barrier(hs_transport_t *t)
{
    hyb_t *h = t->impl;
    return h->sub[SUB_FAB]->ops->barrier(h->sub[SUB_FAB]);
}

/* --- ops: windows ------------------------------------------------------------------------ */

static int hyb_win_create(hs_transport_t *t, void *buf, size_t len, hs_twin_t **win)
{
    hyb_t *h = t->impl;
    struct hs_twin *w = hs_calloc(1, sizeof *w, "hybrid window");
    if (!w) return -ENOMEM;
    int rc = 0;
    for (int k = 0; k < 2 && rc == 0; k++) {
        if (!h->sub[k]) continue;
        rc = HS_OP(h->sub[k], win_create, buf, len, &w->w[k]);
        if (rc < 0)
            hs_error_prefix("rank %d: hybrid transport: window on the %s side", t->rank,
                            k == SUB_SHM ? "hsshm (same-host)" : "libfabric (other-host)");
    }
    if (rc < 0) {
        for (int k = 0; k < 2; k++)
            if (w->w[k]) hs_op_win_free(h->sub[k], &w->w[k]);
        free(w);
        return rc;
    }
    *win = w;
    return 0;
}

static void hyb_win_free(hs_transport_t *t, hs_twin_t **win)
{
    hyb_t *h = t->impl;
    for (int k = 0; k < 2; k++)
        if ((*win)->w[k]) hs_op_win_free(h->sub[k], &(*win)->w[k]);
    free(*win);
    *win = NULL;
}

static int hyb_rma(hs_transport_t *t, hs_twin_t *w, int target, size_t offset, void *buf,
                   size_t len, hs_treq_t **req, int put)
{
    hyb_t *h = t->impl;
    int k = sub_of(h, target);
    if (!w->w[k])
        return HS_ERR(-EINVAL,
                      "rank %d: hybrid transport: %s to rank %d: the window has no %s "
                      "side",
                      t->rank, put ? "put" : "get", target, k == SUB_SHM ? "hsshm" : "libfabric");
    struct hs_treq *r = req_new(h, k, 1, target, 0);
    if (!r) return -ENOMEM;
    int p = sub_peer(h, k, target);
    int rc = put ? HS_OP(h->sub[k], put, w->w[k], p, offset, buf, len, &r->sub[k])
                 : HS_OP(h->sub[k], get, w->w[k], p, offset, buf, len, &r->sub[k]);
    if (rc < 0) {
        req_destroy(h, r);
        return rc;
    }
    *req = r;
    return 0;
}

static int hyb_put(hs_transport_t *t, hs_twin_t *w, int target, size_t offset, const void *buf,
                   size_t len, hs_treq_t **req)
{
    return hyb_rma(t, w, target, offset, (void *)buf, len, req, 1);
}

static int hyb_get(hs_transport_t *t, hs_twin_t *w, int target, size_t offset, void *buf,
                   size_t len, hs_treq_t **req)
{
    return hyb_rma(t, w, target, offset, buf, len, req, 0);
}

static int hyb_atomic_add(hs_transport_t *t, hs_twin_t *w, int target, size_t offset,
                          const void *buf, size_t n, int dtype, hs_treq_t **req)
{
    (void)w, (void)offset, (void)buf, (void)n, (void)dtype, (void)req;
    return HS_ERR(-ENOSYS,
                  "rank %d: hybrid transport: no remote atomics (hsshm has none, so no rank uses "
                  "them; atomic add to rank %d refused)",
                  t->rank, target);
}

/* --- ops: liveness and the rest ---------------------------------------------------------- */

static int hyb_peer_gone(hs_transport_t *t, int peer)
{
    hyb_t *h = t->impl;
    int k = sub_of(h, peer);
    return HS_OP(h->sub[k], peer_gone, sub_peer(h, k, peer));
}

static int hyb_shaped(const hs_transport_t *t, int peer)
{
    const hyb_t *h = t->impl;
    if (peer >= 0) {
        int k = sub_of(h, peer);
        return hs_op_shaped(h->sub[k], sub_peer(h, k, peer));
    }
    return (h->sub[SUB_SHM] && hs_op_shaped(h->sub[SUB_SHM], -1)) ||
           hs_op_shaped(h->sub[SUB_FAB], -1);
}

static int hyb_unsent(hs_transport_t *t, int peer, uint32_t tag, hs_transport_msg_fn cb, void *ctx)
{
    (void)tag, (void)cb, (void)ctx;
    return HS_ERR(-ENOSYS,
                  "rank %d: hybrid transport: unsent (rank %d) is not available in a job across "
                  "hosts (libfabric cannot take sent messages back)",
                  t->rank, peer);
}

static int hyb_leave(hs_transport_t *t, uint32_t tag, hs_transport_msg_fn cb, void *ctx)
{
    (void)tag, (void)cb, (void)ctx;
    return HS_ERR(-ENOSYS,
                  "rank %d: hybrid transport: leave is not available in a job across hosts "
                  "(libfabric cannot take sent messages back)",
                  t->rank);
}

static const char *hyb_provider(const hs_transport_t *t)
{
    const hyb_t *h = t->impl;
    return h ? h->prov : "hybrid";
}

/* --- set-up ------------------------------------------------------------------------------ */

/* The shaping spec of the local links in local numbering (NULL: none). */
static int local_shaping(hyb_t *h, const char *spec, char **out)
{
    *out = NULL;
    hs_shape_t *sh = NULL;
    HS_TRY(hs_shape_parse(spec, &sh));
    if (!sh || hs_shape_nrules(sh) == 0) {
        hs_shape_free(&sh);
        return 0;
    }
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    size_t cap = (size_t)h->lsize * (size_t)h->lsize * 96 + 1, w = 0;
    char *s = hs_malloc(cap, "shaping spec");
    if (!s) {
        hs_shape_free(&sh);
        return -ENOMEM;
    }
    s[0] = '\0';
    for (int i = 0; i < h->lsize; i++)
        for (int j = 0; j < h->lsize; j++) {
            if (i == j) continue;
            hs_link_shape_t l;
            hs_shape_link(sh, h->grank[i], h->grank[j], host, host, &l);
            if (l.latency_s <= 0 && l.jitter_s <= 0 && l.bw_Bps <= 0) continue;
            w += (size_t)snprintf(s + w, cap - w, "%s%d>%d:latency=%.9gs,jitter=%.9gs",
                                  w ? ";" : "", i, j, l.latency_s, l.jitter_s);
            if (l.bw_Bps > 0) w += (size_t)snprintf(s + w, cap - w, ",bw=%.17gB", l.bw_Bps);
        }
    hs_shape_free(&sh);
    if (w == 0) {
        free(s);
        return 0;
    }
    *out = s;
    return 0;
}

/* The registry entry's parts: "hybrid" is hsshm+tcp; "hsshm+P" is hsshm within a host and
 * libfabric provider P across. */
static int hyb_parts(const char *p, char *local, char *remote, size_t cap)
{
    const char *inter = !strcmp(p, "hybrid") ? "tcp" : !strncmp(p, "hsshm+", 6) ? p + 6 : NULL;
    if (!inter || !*inter || !strncmp(inter, "hsshm", 5) || !strcmp(inter, "auto"))
        return HS_ERR(-EINVAL,
                      "transport: provider '%s': after 'hsshm+' name the libfabric provider for "
                      "ranks on other hosts (e.g. hsshm+tcp, hsshm+verbs)",
                      p);
    if (strlen(inter) >= cap) return HS_ERR(-ENAMETOOLONG, "provider name '%s'", inter);
    snprintf(local, cap, "hsshm");
    snprintf(remote, cap, "%s", inter);
    return 0;
}

static int hyb_claims(const char *p)
{
    return !strncmp(p, "hsshm+", 6);
}

/* Opens `local` (hsshm) among the ranks of this host and `remote` (libfabric provider inter)
 * for every rank, through their ops tables: the entries come from the registry (the generic
 * layer looks them up), so nothing here names another backend's internals. */
static int hyb_create_hosts(hs_transport_t *t, const hs_transport_opts_t *o, const int *host_of,
                            const hs_transport_entry_t *local, const hs_transport_entry_t *remote,
                            const char *inter)
{
    hyb_t *h = hs_calloc(1, sizeof *h, "hybrid transport");
    if (!h) return -ENOMEM;
    t->impl = h;
    h->t = t;
    pthread_mutex_init(&h->lock, NULL);
    h->stash_tail = &h->stash;
    h->live.next_live = h->live.prev_live = &h->live;
    int n = t->size;
    h->host_of = hs_calloc((size_t)n, sizeof *h->host_of, "host table");
    h->lrank = hs_calloc((size_t)n, sizeof *h->lrank, "host table");
    h->grank = hs_calloc((size_t)n, sizeof *h->grank, "host table");
    if (!h->host_of || !h->lrank || !h->grank) return -ENOMEM;
    for (int r = 0; r < n; r++) {
        h->host_of[r] = host_of[r];
        h->lrank[r] = -1;
        if (host_of[r] == host_of[t->rank]) {
            h->grank[h->lsize] = r;
            h->lrank[r] = h->lsize++;
        }
    }
    hs_transport_opts_t so = *o;
    so.provider = inter;
    hs_fab_rxm_eager_default(inter, o->chunk_bytes);
    int rc = hs_transport_ctx_create(&h->sub[SUB_FAB], remote->ops, t->rank, n, 0, &so);
    if (rc < 0) {
        hs_error_prefix("rank %d: hybrid transport: libfabric (%s) for the other hosts", t->rank,
                        inter);
        return rc;
    }
    if (h->lsize > 1) {
        char *spec = NULL;
        HS_TRY(local_shaping(h, o->shaping, &spec));
        so.provider = local->name;
        so.shaping = spec;
        rc = hs_transport_ctx_create(&h->sub[SUB_SHM], local->ops, h->lrank[t->rank], h->lsize, 1,
                                     &so);
        free(spec);
        if (rc < 0) {
            hs_error_prefix("rank %d: hybrid transport: hsshm for the %d ranks of this host",
                            t->rank, h->lsize);
            return rc;
        }
    }
    snprintf(h->prov, sizeof h->prov, "hsshm+%s", hs_op_provider(h->sub[SUB_FAB]));
    HS_DEBUG("rank %d: hybrid transport: %d ranks on this host over hsshm, the others over %s",
             t->rank, h->lsize, hs_op_provider(h->sub[SUB_FAB]));
    return 0;
}

void hs_hybrid_orphans(hs_transport_t *t, int now[2], int max[2])
{
    hyb_t *h = t->impl;
    pthread_mutex_lock(&h->lock);
    for (int k = 0; k < 2; k++) {
        if (now) now[k] = h->norphans[k];
        if (max) max[k] = h->orphans_max[k];
    }
    pthread_mutex_unlock(&h->lock);
}

static const char *hyb_pair_provider(const hs_transport_t *t, int same_host)
{
    const hyb_t *h = t->impl;
    return same_host ? "hsshm" : hs_op_provider(h->sub[SUB_FAB]);
}

/* What both sides offer of the claims (libfabric's shm cannot probe). */
static uint32_t hyb_caps_of(const hs_transport_t *t)
{
    const hyb_t *h = t->impl;
    if (!h || !h->sub[SUB_FAB]) return ~0u;
    return hs_op_caps(h->sub[SUB_FAB]) & (h->sub[SUB_SHM] ? hs_op_caps(h->sub[SUB_SHM]) : ~0u);
}

typedef struct {
    uint32_t magic, version, shm_len, fab_len;
} hyb_addr_hdr_t;

/* Length of blob b without its trailing zero bytes (they are restored at connect). */
static size_t trimmed(const unsigned char *b, size_t len)
{
    while (len && !b[len - 1]) len--;
    return len;
}

static int hyb_address(hs_transport_t *t, void *buf, size_t *len)
{
    hyb_t *h = t->impl;
    unsigned char shm[HS_TRANSPORT_ADDR_MAX], fab[HS_TRANSPORT_ADDR_MAX];
    size_t sl = 0, fl = 0;
    memset(shm, 0, sizeof shm);
    memset(fab, 0, sizeof fab);
    if (h->sub[SUB_SHM]) HS_TRY(HS_OP(h->sub[SUB_SHM], address, shm, &sl));
    HS_TRY(HS_OP(h->sub[SUB_FAB], address, fab, &fl));
    sl = trimmed(shm, sl);
    fl = trimmed(fab, fl);
    hyb_addr_hdr_t a = {HYB_ADDR_MAGIC, HYB_WIRE_VERSION, (uint32_t)sl, (uint32_t)fl};
    if (sizeof a + sl + fl > HS_TRANSPORT_ADDR_MAX)
        return HS_ERR(-E2BIG,
                      "rank %d: hybrid transport: the hsshm (%zu bytes) and libfabric (%zu bytes) "
                      "addresses do not fit in one %d-byte address",
                      t->rank, sl, fl, HS_TRANSPORT_ADDR_MAX);
    memcpy(buf, &a, sizeof a);
    memcpy((char *)buf + sizeof a, shm, sl);
    memcpy((char *)buf + sizeof a + sl, fab, fl);
    *len = sizeof a + sl + fl;
    return 0;
}

static int hyb_connect(hs_transport_t *t, const void *all, size_t stride)
{
    hyb_t *h = t->impl;
    int n = t->size;
    char *fab = hs_calloc((size_t)n, HYB_SLOT, "libfabric addresses");
    char *shm = hs_calloc((size_t)h->lsize, HYB_SLOT, "hsshm addresses");
    int rc = fab && shm ? 0 : -ENOMEM;
    for (int r = 0; r < n && rc == 0; r++) {
        const char *b = (const char *)all + (size_t)r * stride;
        hyb_addr_hdr_t a;
        memcpy(&a, b, sizeof a);
        if (a.magic != HYB_ADDR_MAGIC || a.version != HYB_WIRE_VERSION ||
            sizeof a + a.shm_len + a.fab_len > stride || a.shm_len > HYB_SLOT ||
            a.fab_len > HYB_SLOT) {
            rc = HS_ERR(-EPROTO,
                        "rank %d: the address of rank %d is not a hybrid (hsshm+libfabric) "
                        "address: every rank must use the same --provider",
                        t->rank, r);
            break;
        }
        if (h->lrank[r] >= 0 && h->sub[SUB_SHM]) {
            if (!a.shm_len) {
                rc = HS_ERR(-EPROTO,
                            "rank %d: rank %d shares this host but offers no hsshm address "
                            "(do the ranks disagree on the host names? see HS_HOSTNAME)",
                            t->rank, r);
                break;
            }
            memcpy(shm + (size_t)h->lrank[r] * HYB_SLOT, b + sizeof a, a.shm_len);
        }
        memcpy(fab + (size_t)r * HYB_SLOT, b + sizeof a + a.shm_len, a.fab_len);
    }
    if (rc == 0) {
        rc = HS_OP(h->sub[SUB_FAB], connect, fab, HYB_SLOT);
        if (rc < 0) hs_error_prefix("rank %d: hybrid transport: connecting libfabric", t->rank);
    }
    if (rc == 0 && h->sub[SUB_SHM]) {
        rc = HS_OP(h->sub[SUB_SHM], connect, shm, HYB_SLOT);
        if (rc < 0) hs_error_prefix("rank %d: hybrid transport: connecting hsshm", t->rank);
    }
    free(fab);
    free(shm);
    return rc;
}

static void hyb_close(hs_transport_t *t)
{
    hyb_t *h = t->impl;
    if (!h) return;
    HS_DEBUG("rank %d: hybrid transport: at most %d hsshm and %d libfabric receives from any "
             "source kept as orphans; %ld taken over by later receives",
             t->rank, h->orphans_max[SUB_SHM], h->orphans_max[SUB_FAB], h->reclaimed);
    while (h->orphans) {
        orphan_t *o = h->orphans;
        h->orphans = o->next;
        hs_op_req_free(h->sub[o->sub], &o->req);
        free(o->buf);
        free(o);
    }
    while (h->stash) {
        stash_t *s = h->stash;
        h->stash = s->next;
        free(s->buf);
        free(s);
    }
    /* Pending requests are dropped with their backends. */
    while (h->live.next_live != &h->live) {
        struct hs_treq *r = h->live.next_live;
        r->next_live->prev_live = r->prev_live;
        r->prev_live->next_live = r->next_live;
        free(r->pbuf[0]);
        free(r->pbuf[1]);
        free(r);
    }
    hs_transport_ctx_close(&h->sub[SUB_SHM]);
    hs_transport_ctx_close(&h->sub[SUB_FAB]);
    free(h->host_of);
    free(h->lrank);
    free(h->grank);
    pthread_mutex_destroy(&h->lock);
    free(h);
    t->impl = NULL;
}

static int hyb_create(hs_transport_t *t, const hs_transport_opts_t *o, int all_local)
{
    (void)o, (void)all_local;
    return HS_ERR(-EINVAL,
                  "rank %d: the hybrid transport needs the host of every rank "
                  "(hs_transport_open or hs_transport_create_hosts)",
                  t->rank);
}

static const hs_transport_ops_t hs_hybrid_ops = {
    .size = sizeof(hs_transport_ops_t),
    .name = "hybrid",
    .create = hyb_create,
    .address = hyb_address,
    .connect = hyb_connect,
    .close = hyb_close,
    .isend = hyb_isend,
    .irecv = hyb_irecv,
    .test = hyb_test,
    .waitany = hyb_waitany,
    .progress = hyb_progress,
    .probe = hyb_probe,
    .req_free = hyb_req_free,
    .barrier = hyb_barrier,
    .win_create = hyb_win_create,
    .win_free = hyb_win_free,
    .put = hyb_put,
    .get = hyb_get,
    .atomic_add = hyb_atomic_add,
    .provider = hyb_provider,
    .unsent = hyb_unsent,
    .leave = hyb_leave,
    .peer_gone = hyb_peer_gone,
    .shaped = hyb_shaped,
    .caps = HS_TCAP_TAGGED | HS_TCAP_ANY_SOURCE | HS_TCAP_PROBE | HS_TCAP_LIVENESS |
            HS_TCAP_WINDOWS | HS_TCAP_MEM_HOST,
    .caps_of = hyb_caps_of,
    .pair_provider = hyb_pair_provider,
};

const hs_transport_entry_t hs_hybrid_entry = {
    .name = "hybrid",
    .ops = &hs_hybrid_ops,
    .takes = "hybrid, hsshm+P",
    .help = "per pair of ranks: hsshm within a host, libfabric P across (hybrid: tcp)",
    .claims = hyb_claims,
    .parts = hyb_parts,
    .create_hosts = hyb_create_hosts,
};
