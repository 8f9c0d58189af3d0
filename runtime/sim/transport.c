/*
 * runtime/sim/transport.c — the simulated transport (hs_transport_ops_t "sim"): a send asks
 * the network model when it arrives (sim_impl.h's contract), receives post into queues.c's
 * queues, waits block in virtual time (the scheduler); the a_* entry points account the time
 * as the simulator's (hs_sim_in, hs_sim_out).
 */
#include "runtime/sim/sim_impl.h"

#include "gossip/transport_impl.h" /* hs_tag_match */
#include "hearsay/algo.h"          /* HS_TAG_EVAL */
#include "hearsay/allreduce.h"     /* HS_ALLREDUCE_TAG_BASE */
#include "hearsay/common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static sim_rank_t *rank_of(hs_transport_t *t)
{
    return t->impl;
}

/* The observers' channel (evaluation snapshots to rank 0, unless --sim-eval-traffic): the
 * message is in the destination's posted receive or unexpected queue at once, outside the
 * NICs, the links and the event queue, and nobody is woken: it takes no virtual time, no
 * bandwidth and no event, so the run's every event and iterate are those of a run without it.
 * The destination finds it when it next looks (a test, a wait's poll). */
static int observer_send(sim_world_t *w, int src, sim_rank_t *d, const void *buf, size_t len)
{
    struct hs_treq *pr = hs_sim_take_posted(d, src, HS_TAG_EVAL);
    if (pr && !pr->inplace && !pr->svc) {
        hs_sim_complete_recv_from(pr, src, HS_TAG_EVAL, buf, len);
        return 0;
    }
    sim_msg_t *m = hs_sim_msg_get(w, len);
    if (!m) return HS_ERR(-ENOMEM, "sim: out of memory for a %zu-byte message", len);
    size_t mcap = m->cap;
    *m = (sim_msg_t){
        .src = src, .dst = d->rank, .tag = HS_TAG_EVAL, .len = len, .at = w->now, .cap = mcap};
    if (len) memcpy(m->data, buf, len);
    if (pr && hs_sim_complete_recv(pr, m)) return 0; /* an in-place receive keeps m */
    if (pr) {
        hs_sim_msg_put(w, m);
        return 0;
    }
    hs_sim_unexp_push(d, m);
    return 0;
}

/* The bytes a message takes on the network: its own, or under --sim-payload those the
 * payload model's message would have. A message of the algorithm (its tag range) keeps its
 * header (payload_hdr bytes) and its body grows by payload_scale; a header alone (a request,
 * a notice) stays as it is. The all-reduce module's messages are bodies only. The loop's model
 * snapshots (evaluation, end of run: a frame, z and a trailer) carry the payload's z in place
 * of the proxy's; its other messages stay as they are. A rank's message to itself crosses no
 * network. */
size_t hs_sim_wire_len(const sim_world_t *w, int src, int dst, uint32_t tag, size_t len)
{
    if (w->payload_scale <= 0 || src == dst) return len;
    size_t hdr;
    if (tag >= HS_TAG_ALGO_BASE && tag < HS_TAG_ALGO_BASE + HS_DIST_TAGS)
        hdr = w->payload_hdr;
    else if (tag >= HS_ALLREDUCE_TAG_BASE && tag - HS_ALLREDUCE_TAG_BASE < HS_ALLREDUCE_TAG_SPAN)
        hdr = 0;
    else if ((tag == HS_TAG_EVAL || tag == HS_TAG_FINAL) && len >= w->payload_z)
        return len - w->payload_z + (size_t)llround((double)w->payload_z * w->payload_scale);
    else
        return len;
    if (len <= hdr) return len;
    return hdr + (size_t)llround((double)(len - hdr) * w->payload_scale);
}

static int st_isend(hs_transport_t *t, int peer, uint32_t tag, const void *buf, size_t len,
                    hs_treq_t **req)
{
    sim_rank_t *rk = rank_of(t);
    sim_world_t *w = world_of(rk);
    struct hs_treq *r = hs_sim_req_get(w);
    if (!r) return -ENOMEM;
    r->send = 1;
    r->rk = rk;
    r->peer = peer;
    r->tag = tag;
    r->st = (hs_tstatus_t){.source = peer, .tag = tag, .len = len};
    r->done = 1;
    if (w->rk[peer].dead || w->rk[peer].left) {
        r->err = HS_ERR(-ECONNRESET, "sim: rank %d has exited (send of %zu bytes, tag %#x)", peer,
                        len, tag);
        *req = r;
        return 0;
    }
    if (tag == HS_TAG_EVAL && !w->o->sim_eval_traffic) {
        int rc = observer_send(w, rk->rank, &w->rk[peer], buf, len);
        if (rc < 0) {
            hs_sim_req_put(w, r);
            return rc;
        }
        *req = r;
        return 0;
    }
    /* A message due now (an ideal link), with nothing of this sender in flight that it could
     * overtake, and a receive posted for it: delivered at once, one copy from the sender's
     * buffer (the receiver's threads are woken as a delivery from the event queue would). */
    size_t wire = hs_sim_wire_len(w, rk->rank, peer, tag, len);
    if (peer != rk->rank) w->wire_bytes += (double)wire;
    double at = w->net->ops->arrival(w->net, rk->rank, peer, wire); /* INFINITY: it carries it */
    if (at <= w->now && w->in_flight[rk->rank] == 0) {
        struct hs_treq *pr = hs_sim_take_posted(&w->rk[peer], rk->rank, tag);
        if (pr && pr->svc && len <= pr->cap) { /* a pure service: it reads the sender's
                                                * buffer itself, no copy at all */
            hs_sim_complete_recv_from(pr, rk->rank, tag, NULL, len);
            hs_sim_svc_inline(w, pr, len ? buf : NULL);
            *req = r;
            return 0;
        }
        if (pr && pr->inplace && len <= pr->cap) { /* the one copy goes into a message */
            sim_msg_t *m = hs_sim_msg_get(w, len);
            if (!m) {
                hs_sim_req_put(w, r);
                return HS_ERR(-ENOMEM, "sim: out of memory for a %zu-byte message", len);
            }
            size_t mcap = m->cap;
            *m = (sim_msg_t){
                .src = rk->rank, .dst = peer, .tag = tag, .len = len, .at = w->now, .cap = mcap};
            if (len) memcpy(m->data, buf, len);
            hs_sim_complete_recv(pr, m);
            hs_sim_wake_rank(&w->rk[peer]);
            *req = r;
            return 0;
        }
        if (pr) {
            hs_sim_complete_recv_from(pr, rk->rank, tag, buf, len);
            if (pr->svc) /* too long for a pure service's slot: it latches the error */
                hs_sim_svc_inline(w, pr, NULL);
            else
                hs_sim_wake_rank(&w->rk[peer]);
            *req = r;
            return 0;
        }
    }
    sim_msg_t *m = hs_sim_msg_get(w, len);
    if (!m) {
        hs_sim_req_put(w, r);
        return HS_ERR(-ENOMEM, "sim: out of memory for a %zu-byte message", len);
    }
    m->src = rk->rank;
    m->reclaimed = 0;
    m->sreq = NULL;
    m->dst = peer;
    m->tag = tag;
    m->len = len;
    m->wire = wire;
    if (len) memcpy(m->data, buf, len);
    m->at = at;
    m->seq = ++w->seq;
    m->kind = MSG_DATA;
    m->rndv = 0;
    m->ref = NULL;
    if (at > w->now) { /* the send completes when its last byte has arrived (a shaped hsshm
                        * send completes when its last chunk is in the receiver's ring); one the
                        * model carries, on delivery, or by a rendezvous (--sim-proto
                        * rndv=BYTES) when its closing message is back */
        r->done = 0;
        r->msg = m;
        m->sreq = r;
    }
    int rc = at < INFINITY ? hs_sim_event_push(w, m) : w->net->ops->carry(w->net, m);
    if (rc < 0) {
        hs_sim_msg_put(w, m);
        hs_sim_req_put(w, r);
        return rc;
    }
    w->in_flight[rk->rank]++;
    *req = r;
    return 0;
}

static int st_irecv(hs_transport_t *t, int peer, uint32_t tag, void *buf, size_t cap,
                    hs_treq_t **req)
{
    static unsigned char none[1]; /* a zero-byte receive without a buffer is not in place */
    return hs_sim_post_recv(rank_of(t), peer, tag, buf ? buf : none, cap, NULL, 0, req);
}

static int st_test(hs_transport_t *t, hs_treq_t **req, int *done, hs_tstatus_t *st)
{
    sim_rank_t *rk = rank_of(t);
    hs_sim_check_dead_source(world_of(rk), rk, *req);
    *done = (*req)->done;
    if (!*done) return 0;
    return hs_sim_take(req, st);
}

static int poll_any(sim_world_t *w, sim_rank_t *rk, hs_treq_t **reqs, int n, int *idx,
                    hs_tstatus_t *st, int *active)
{
    *active = 0;
    for (int i = 0; i < n; i++) {
        if (!reqs[i]) continue;
        (*active)++;
        hs_sim_check_dead_source(w, rk, reqs[i]);
        if (reqs[i]->done) {
            *idx = i;
            return 1;
        }
    }
    return 0;
}

/* The running thread waits in virtual time for one of reqs (no idle hook: the transport's
 * own waits, e.g. inside the all-reduce). */
int hs_sim_wait_reqs(sim_world_t *w, sim_rank_t *rk, hs_treq_t **reqs, int n, double timeout_s,
                     int (*idle)(void *), void *idle_ctx, int *idx, hs_tstatus_t *st, int keep)
{
    *idx = -1;
    double deadline = w->now + (timeout_s > 0 ? timeout_s : 0);
    double next_idle = w->now + IDLE_SLICE_S;
    for (;;) {
        int active;
        if (poll_any(w, rk, reqs, n, idx, st, &active)) {
            if (!keep || reqs[*idx]->err) return hs_sim_take(&reqs[*idx], st);
            *st = reqs[*idx]->st; /* keep: the caller frees it */
            return 0;
        }
        if (!active) return 0;
        if (w->now >= deadline) {
            *idx = -1;
            return HS_ERR(-ETIMEDOUT,
                          "sim: rank %d: no completion of %d requests within %.3g s "
                          "(virtual)",
                          rk->rank, active, timeout_s);
        }
        if (idle && w->now >= next_idle) {
            next_idle = w->now + IDLE_SLICE_S;
            /* the owner's idle hook (rank 0 takes evaluation snapshots and evaluates): workers'
             * code, whose CPU time measured-all counts */
            if (w->charge_all) hs_sim_out(w);
            int irc = idle(idle_ctx);
            if (w->charge_all) hs_sim_in(w);
            HS_TRY(irc);
            continue;
        }
        hs_sim_block_until(w, idle ? HS_MIN(deadline, next_idle) : deadline);
    }
}

static int st_waitany(hs_transport_t *t, hs_treq_t **reqs, int n, double timeout_s, int *index,
                      hs_tstatus_t *st)
{
    sim_rank_t *rk = rank_of(t);
    return hs_sim_wait_reqs(world_of(rk), rk, reqs, n, timeout_s, NULL, NULL, index, st, 0);
}

static int st_progress(hs_transport_t *t)
{
    (void)t;
    return 0;
}

static int st_probe(hs_transport_t *t, int peer, uint32_t tag, int any_tag, int *found,
                    hs_tstatus_t *st)
{
    sim_rank_t *rk = rank_of(t);
    *found = 0;
    for (sim_msg_t *m = rk->unexpected; m; m = m->next) {
        if (!hs_tag_match(peer, tag, any_tag, m->src, m->tag)) continue;
        *found = 1;
        if (st) *st = (hs_tstatus_t){.source = m->src, .tag = m->tag, .len = m->len};
        break;
    }
    return 0;
}

void hs_sim_st_req_free(hs_transport_t *t, hs_treq_t **req)
{
    if (!req || !*req) return;
    if (!(*req)->done && !(*req)->send) hs_sim_unpost(rank_of(t), *req);
    hs_sim_req_release(req);
}

/* Every live rank enters before any leaves (a rank that dies meanwhile is not waited for). */
/* A sender takes back what a peer that died or left never took: messages still in flight to
 * it, and those that reached it afterwards (its dead letters). */
/* m, in flight from src to peer with tag and not taken back yet, goes back through cb (its
 * share returns that way: the send itself succeeds). 1 if it did. */
static int reclaim(sim_world_t *w, sim_msg_t *m, int src, int peer, uint32_t tag,
                   hs_transport_msg_fn cb, void *ctx)
{
    if (m->kind == MSG_DONE) return 0;   /* its data is in already */
    if (m->kind != MSG_DATA) m = m->ref; /* a rendezvous's data, still with its sender */
    if (m->reclaimed || m->src != src || m->dst != peer || m->tag != tag) return 0;
    cb(ctx, peer, m->data, m->len, m->len);
    m->reclaimed = 1;
    hs_sim_complete_send(w, m);
    return 1;
}

typedef struct reclaim_ctx {
    int src, peer;
    uint32_t tag;
    hs_transport_msg_fn cb;
    void *ctx;
} reclaim_ctx_t;

/* reclaim, for each message the network model carries (sim_net_ops_t.each) */
static int reclaim_carried(sim_world_t *w, sim_msg_t *m, void *arg)
{
    reclaim_ctx_t *c = arg;
    return reclaim(w, m, c->src, c->peer, c->tag, c->cb, c->ctx);
}

static int st_unsent(hs_transport_t *t, int peer, uint32_t tag, hs_transport_msg_fn cb, void *ctx)
{
    sim_rank_t *rk = rank_of(t);
    sim_world_t *w = world_of(rk);
    sim_rank_t *p = &w->rk[peer];
    /* a replacement runs (crash:...:rejoin=D): what is in flight is its; what reached the
     * rank it replaces after its crash (its dead letters) is still the senders' */
    int alive = !p->dead && !p->left;
    if (alive && !p->dead_letters) return -EBUSY;
    int n = 0;
    /* in the event queue, then still in the network model (the NICs, fair sharing);
     * hs_sim_complete_send links nothing */
    for (int i = 0; i < w->nheap && !alive; i++)
        n += reclaim(w, w->heap[i], rk->rank, peer, tag, cb, ctx);
    reclaim_ctx_t rc = {.src = rk->rank, .peer = peer, .tag = tag, .cb = cb, .ctx = ctx};
    if (!alive && w->net->ops->each) n += w->net->ops->each(w->net, reclaim_carried, &rc);
    for (sim_msg_t **pp = &p->dead_letters; *pp;) {
        sim_msg_t *m = *pp;
        if (m->src != rk->rank || m->tag != tag) {
            pp = &m->next;
            continue;
        }
        cb(ctx, peer, m->data, m->len, m->len);
        *pp = m->next;
        hs_sim_msg_put(w, m);
        n++;
    }
    return n;
}

/* This rank is about to end: what reached it and nobody took goes back through cb, its
 * completed receives fail, and it receives nothing any more. */
static int st_leave(hs_transport_t *t, uint32_t tag, hs_transport_msg_fn cb, void *ctx)
{
    sim_rank_t *rk = rank_of(t);
    int n = 0;
    rk->left = 1;
    for (struct hs_treq *r = rk->completed; r; r = r->cnext) {
        if (r->send || r->tag != tag || r->err) continue;
        cb(ctx, r->st.source, r->held ? r->held->data : r->buf, r->st.len, r->st.len);
        r->err = HS_ERR(-ECANCELED, "sim: rank %d left", rk->rank);
        n++;
    }
    for (sim_msg_t *m = rk->unexpected, *nx; m; m = nx) {
        nx = m->next;
        if (m->tag != tag) continue;
        cb(ctx, m->src, m->data, m->len, m->len);
        hs_sim_unexp_remove(rk, m);
        hs_sim_msg_put(world_of(rk), m);
        n++;
    }
    hs_sim_wake_all(world_of(rk)); /* senders waiting on it see it left */
    return n;
}

static int st_peer_gone(hs_transport_t *t, int peer)
{
    return world_of(rank_of(t))->rk[peer].dead;
}

static int st_barrier(hs_transport_t *t)
{
    return hs_sim_barrier(world_of(rank_of(t)));
}

static const char *st_provider(const hs_transport_t *t)
{
    (void)t;
    return "sim";
}

static int st_no(hs_transport_t *t)
{
    (void)t;
    return HS_ERR(-ENOSYS, "sim: no RMA windows in the simulated transport");
}

static int st_win_create(hs_transport_t *t, void *buf, size_t len, hs_twin_t **win)
{
    (void)buf;
    (void)len;
    *win = NULL;
    return st_no(t);
}

static int st_peer_read_ok(const hs_transport_t *t)
{
    (void)t;
    return 0;
}

static void st_close(hs_transport_t *t)
{
    (void)t; /* the world owns the rank's queues */
}

#define TW(t) world_of(rank_of(t))

static int a_isend(hs_transport_t *t, int peer, uint32_t tag, const void *buf, size_t len,
                   hs_treq_t **req)
{
    SIM_CALL(TW(t), int, st_isend(t, peer, tag, buf, len, req));
}

static int a_irecv(hs_transport_t *t, int peer, uint32_t tag, void *buf, size_t cap,
                   hs_treq_t **req)
{
    SIM_CALL(TW(t), int, st_irecv(t, peer, tag, buf, cap, req));
}

static int a_test(hs_transport_t *t, hs_treq_t **req, int *done, hs_tstatus_t *st)
{
    SIM_CALL(TW(t), int, st_test(t, req, done, st));
}

static int a_waitany(hs_transport_t *t, hs_treq_t **reqs, int n, double timeout_s, int *index,
                     hs_tstatus_t *st)
{
    SIM_CALL(TW(t), int, st_waitany(t, reqs, n, timeout_s, index, st));
}

static int a_progress(hs_transport_t *t)
{
    SIM_CALL(TW(t), int, st_progress(t));
}

static int a_probe(hs_transport_t *t, int peer, uint32_t tag, int any_tag, int *found,
                   hs_tstatus_t *st)
{
    SIM_CALL(TW(t), int, st_probe(t, peer, tag, any_tag, found, st));
}

static void a_req_free(hs_transport_t *t, hs_treq_t **req)
{
    SIM_CALL_VOID(TW(t), hs_sim_st_req_free(t, req));
}

static int a_barrier(hs_transport_t *t)
{
    SIM_CALL(TW(t), int, st_barrier(t));
}

static int a_unsent(hs_transport_t *t, int peer, uint32_t tag, hs_transport_msg_fn cb, void *ctx)
{
    SIM_CALL(TW(t), int, st_unsent(t, peer, tag, cb, ctx));
}

static int a_leave(hs_transport_t *t, uint32_t tag, hs_transport_msg_fn cb, void *ctx)
{
    SIM_CALL(TW(t), int, st_leave(t, tag, cb, ctx));
}

const hs_transport_ops_t hs_sim_transport_ops = {
    .size = sizeof(hs_transport_ops_t),
    .name = "sim",
    .close = st_close,
    .isend = a_isend,
    .irecv = a_irecv,
    .test = a_test,
    .waitany = a_waitany,
    .progress = a_progress,
    .probe = a_probe,
    .req_free = a_req_free,
    .barrier = a_barrier,
    .win_create = st_win_create,
    .provider = st_provider,
    .peer_read_ok = st_peer_read_ok,
    .unsent = a_unsent,
    .leave = a_leave,
    .peer_gone = st_peer_gone,
    .caps = HS_TCAP_TAGGED | HS_TCAP_ANY_SOURCE | HS_TCAP_PROBE | HS_TCAP_LIVENESS |
            HS_TCAP_UNSENT | HS_TCAP_MEM_HOST | HS_TCAP_EARLY_SMALL,
};
