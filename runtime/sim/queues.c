/*
 * runtime/sim/queues.c — the simulated transport's messages and requests: their pools, the
 * match of a message to a posted receive, each rank's posted, unexpected and completed
 * queues, and a message's delivery (the scheduler's w->deliver). See sim_impl.h.
 */
#include "runtime/sim/sim_impl.h"

#include "gossip/transport_impl.h" /* hs_tag_match */
#include "hearsay/common.h"

#include <stdlib.h>
#include <string.h>

/* --- messages ------------------------------------------------------------------------- */

/* Messages are recycled: a model-sized message is above malloc's mmap threshold, and a fresh
 * mapping per send cost a page fault per 4 KiB (a quarter of a 64-rank run's time). */
#define POOL_MAX_BYTES ((size_t)256 << 20)

sim_msg_t *hs_sim_msg_get(sim_world_t *w, size_t len)
{
    int looked = 0;
    for (sim_msg_t **pp = &w->pool; *pp && looked < 8; pp = &(*pp)->next, looked++) {
        sim_msg_t *m = *pp;
        if (m->cap < len) continue;
        *pp = m->next;
        w->pool_bytes -= m->cap;
        return m;
    }
    size_t cap = len ? len : 1;
    sim_msg_t *m = malloc(sizeof *m + cap);
    if (m) m->cap = cap;
    return m;
}

/* A rendezvous's control message (--sim-proto): from a pool of their own, so that they
 * neither take a model-sized buffer from the messages' pool nor fill its head. */
sim_msg_t *hs_sim_ctrl_get(sim_world_t *w)
{
    sim_msg_t *c = w->ctrl_pool;
    if (c) {
        w->ctrl_pool = c->next;
        return c;
    }
    c = malloc(sizeof *c + 1);
    if (c) c->cap = 1;
    return c;
}

void hs_sim_ctrl_put(sim_world_t *w, sim_msg_t *c)
{
    c->next = w->ctrl_pool;
    w->ctrl_pool = c;
}

/* At the end of a run: m, still in flight, and the partner a rendezvous parks beside it (the
 * data beside its request to send or read request, the control message beside the data). */
void hs_sim_msg_free_flight(sim_msg_t *m)
{
    if (m->kind == MSG_RTS || m->kind == MSG_RREQ)
        free(m->ref);
    else if (m->kind == MSG_DATA && m->rndv)
        free(m->ref);
    free(m);
}

void hs_sim_msg_put(sim_world_t *w, sim_msg_t *m)
{
    if (w->pool_bytes + m->cap > POOL_MAX_BYTES) {
        free(m);
        return;
    }
    m->next = w->pool;
    w->pool = m;
    w->pool_bytes += m->cap;
}

/* A zeroed request (recycled: a calloc and a free per message were a tenth of the
 * transport's time). */
struct hs_treq *hs_sim_req_get(sim_world_t *w)
{
    struct hs_treq *r = w->req_pool;
    if (!r) return hs_calloc(1, sizeof *r, "sim request");
    w->req_pool = r->next;
    memset(r, 0, sizeof *r);
    return r;
}

void hs_sim_req_put(sim_world_t *w, struct hs_treq *r)
{
    r->next = w->req_pool;
    w->req_pool = r;
}

static int matches(const struct hs_treq *r, const sim_msg_t *m)
{
    return hs_tag_match(r->peer, r->tag, 0, m->src, m->tag);
}

/* Complete receive r with a message of len bytes from src (data: copied into its buffer;
 * NULL: an in-place receive that has just been given the message). */
void hs_sim_complete_recv_from(struct hs_treq *r, int src, uint32_t tag, const void *data,
                               size_t len)
{
    if (len > r->cap) {
        r->err = HS_ERR(-EMSGSIZE,
                        "sim: message of %zu bytes from rank %d (tag %#x) for a %zu-byte "
                        "receive",
                        len, src, tag, r->cap);
    } else if (len && data) {
        memcpy(r->buf, data, len);
    }
    r->st = (hs_tstatus_t){.source = src, .tag = tag, .len = len};
    r->done = 1;
    if (r->rk && !r->on_completed) { /* until taken: leave hands it back if never taken */
        r->cprev = NULL;
        r->cnext = r->rk->completed;
        if (r->cnext) r->cnext->cprev = r;
        r->rk->completed = r;
        r->on_completed = 1;
    }
}

/* Complete receive r with message m: copied into its buffer (the caller recycles m), or, an
 * in-place receive, r keeps m (returns 1: the caller must not recycle it). */
int hs_sim_complete_recv(struct hs_treq *r, sim_msg_t *m)
{
    if (r->inplace && m->len <= r->cap) {
        r->held = m;
        hs_sim_complete_recv_from(r, m->src, m->tag, NULL, m->len);
        return 1;
    }
    hs_sim_complete_recv_from(r, m->src, m->tag, m->data, m->len);
    return 0;
}

/* --- posted receives: a chain per source ----------------------------------------------- */

static uint32_t chain_hash(int peer)
{
    uint32_t h = (uint32_t)peer; /* (murmur3's finalizer: exp1peer's peers r + 2^k differ in
                                  * high bits only, which a plain mask would not see) */
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    return h ^ (h >> 16);
}

/* The slot of peer (>= 0) in a table of cap slots: its chain's, or the empty one it would
 * take. */
static sim_post_chain_t *chain_slot(sim_post_chain_t *tab, int cap, int peer)
{
    uint32_t mask = (uint32_t)cap - 1;
    for (uint32_t i = chain_hash(peer) & mask;; i = (i + 1) & mask)
        if (tab[i].peer == peer || tab[i].peer == -2) return &tab[i];
}

/* rk's chain of receives posted for peer (HS_ANY_SOURCE: the any-source chain); NULL when it
 * has none (add: made; NULL then only when out of memory). */
static sim_post_chain_t *chain_of(sim_rank_t *rk, int peer, int add)
{
    if (peer < 0) return &rk->any;
    sim_post_chain_t *c = rk->chains_cap ? chain_slot(rk->chains, rk->chains_cap, peer) : NULL;
    if (c && c->peer == peer) return c;
    if (!add) return NULL;
    if (2 * (rk->chains_n + 1) > rk->chains_cap) { /* at most half full */
        int nc = rk->chains_cap ? 2 * rk->chains_cap : 16;
        sim_post_chain_t *t = hs_malloc((size_t)nc * sizeof *t, "posted receives' table");
        if (!t) return NULL;
        for (int i = 0; i < nc; i++) t[i] = (sim_post_chain_t){.peer = -2};
        for (int i = 0; i < rk->chains_cap; i++)
            if (rk->chains[i].peer >= 0) *chain_slot(t, nc, rk->chains[i].peer) = rk->chains[i];
        free(rk->chains);
        rk->chains = t;
        rk->chains_cap = nc;
    }
    c = chain_slot(rk->chains, rk->chains_cap, peer);
    *c = (sim_post_chain_t){.peer = peer};
    rk->chains_n++;
    return c;
}

void hs_sim_unpost(sim_rank_t *rk, struct hs_treq *r)
{
    if (!r->posted) return;
    sim_post_chain_t *c = chain_of(rk, r->peer, 0);
    if (r->prev)
        r->prev->next = r->next;
    else
        c->head = r->next;
    if (r->next)
        r->next->prev = r->prev;
    else
        c->tail = r->prev;
    r->next = r->prev = NULL;
    r->posted = 0;
}

/* Every posted receive of rk is dropped (a crash). */
void hs_sim_unpost_all(sim_rank_t *rk)
{
    for (int i = -1; i < rk->chains_cap; i++) {
        sim_post_chain_t *c = i < 0 ? &rk->any : &rk->chains[i];
        while (c->head) hs_sim_unpost(rk, c->head);
    }
}

/* The first posted receive of rank d that matches (src, tag), in posting order, taken off
 * its chain; NULL when none. Only src's chain and the any-source chain can hold it. */
struct hs_treq *hs_sim_take_posted(sim_rank_t *d, int src, uint32_t tag)
{
    struct hs_treq *best = NULL;
    sim_post_chain_t *c = chain_of(d, src, 0);
    for (struct hs_treq *r = c ? c->head : NULL; r; r = r->next)
        if (hs_tag_match(r->peer, r->tag, 0, src, tag)) {
            best = r;
            break;
        }
    for (struct hs_treq *r = d->any.head; r && !(best && r->pseq > best->pseq); r = r->next)
        if (hs_tag_match(r->peer, r->tag, 0, src, tag)) {
            best = r;
            break;
        }
    if (best) hs_sim_unpost(d, best);
    return best;
}

void hs_sim_off_completed(struct hs_treq *r)
{
    if (!r->on_completed) return;
    if (r->cprev)
        r->cprev->cnext = r->cnext;
    else
        r->rk->completed = r->cnext;
    if (r->cnext) r->cnext->cprev = r->cprev;
    r->on_completed = 0;
}

void hs_sim_append(sim_msg_t **list, sim_msg_t *m)
{
    while (*list) list = &(*list)->next;
    m->next = NULL;
    *list = m;
}

/* m joins the end of rk's unexpected queue, and of its source's chain (a receive naming its
 * source looks there only: rank 0's end-of-run gather posts N receives against up to N
 * results queued, a walk of the queue each was O(N^2)). */
void hs_sim_unexp_push(sim_rank_t *rk, sim_msg_t *m)
{
    m->next = NULL;
    m->uprev = rk->unexp_last;
    if (rk->unexp_last)
        rk->unexp_last->next = m;
    else
        rk->unexpected = m;
    rk->unexp_last = m;
    m->indexed = 0;
    m->snext = m->sprev = NULL;
    if (rk->unexp_flat) return;
    sim_post_chain_t *c = chain_of(rk, m->src, 1);
    if (!c) { /* out of memory: from now on, receives search the whole queue */
        rk->unexp_flat = 1;
        return;
    }
    m->sprev = c->utail;
    if (c->utail)
        c->utail->snext = m;
    else
        c->uhead = m;
    c->utail = m;
    m->indexed = 1;
}

/* m leaves rk's unexpected queue (and its source's chain). */
void hs_sim_unexp_remove(sim_rank_t *rk, sim_msg_t *m)
{
    if (m->uprev)
        m->uprev->next = m->next;
    else
        rk->unexpected = m->next;
    if (m->next)
        m->next->uprev = m->uprev;
    else
        rk->unexp_last = m->uprev;
    if (m->indexed) {
        sim_post_chain_t *c = chain_of(rk, m->src, 0);
        if (m->sprev)
            m->sprev->snext = m->snext;
        else
            c->uhead = m->snext;
        if (m->snext)
            m->snext->sprev = m->sprev;
        else
            c->utail = m->sprev;
        m->indexed = 0;
    }
    m->next = m->uprev = m->snext = m->sprev = NULL;
}

/* A message has left its sender's side (delivered, or taken back): its send completes. */
void hs_sim_complete_send(sim_world_t *w, sim_msg_t *m)
{
    if (!m->sreq) return;
    m->sreq->done = 1;
    m->sreq->msg = NULL;
    m->sreq = NULL;
    hs_sim_wake_rank(&w->rk[m->src]);
}

/* A message reaches its destination (the clock is at m->at; the scheduler's w->deliver): the
 * network model sees it first (a protocol's own message, or the data of a rendezvous). */
void hs_sim_deliver(sim_world_t *w, sim_msg_t *m)
{
    if (w->net->ops->arrived && w->net->ops->arrived(w->net, m)) return;
    sim_rank_t *d = &w->rk[m->dst];
    w->in_flight[m->src]--;
    hs_sim_complete_send(w, m);
    if (m->reclaimed) {
        hs_sim_msg_put(w, m);
        return;
    }
    if (d->dead || d->left) { /* its sender may take it back (unsent) */
        hs_sim_append(&d->dead_letters, m);
        return;
    }
    if (d->frozen_until > w->now) { /* frozen: it waits, matched when the rank thaws */
        hs_sim_unexp_push(d, m);
        return;
    }
    struct hs_treq *r = hs_sim_take_posted(d, m->src, m->tag);
    if (r) {
        if (!hs_sim_complete_recv(r, m)) hs_sim_msg_put(w, m);
        if (r->svc)
            hs_sim_svc_inline(w, r, NULL);
        else
            hs_sim_wake_rank(d);
        return;
    }
    hs_sim_unexp_push(d, m);
    hs_sim_wake_rank(d);
}

/* A frozen rank thaws: what reached it meanwhile goes to its posted receives now, in the order
 * it arrived (a pure service's handler runs; the threads waiting are woken). */
void hs_sim_thaw(sim_world_t *w, sim_rank_t *d)
{
    d->frozen_until = d->frozen_since = 0;
    hs_sim_rndv_release(w, d); /* (its read requests go out now) */
    for (int again = 1; again;) {
        again = 0;
        for (sim_msg_t *m = d->unexpected; m; m = m->next) {
            struct hs_treq *r = hs_sim_take_posted(d, m->src, m->tag);
            if (!r) continue;
            hs_sim_unexp_remove(d, m);
            if (!hs_sim_complete_recv(r, m)) hs_sim_msg_put(w, m);
            if (r->svc) hs_sim_svc_inline(w, r, NULL); /* (it may take more of the queue) */
            again = 1;
            break;
        }
    }
    hs_sim_wake_rank(d);
}

/* Post a receive of rank rk: into buf (cap bytes), or, buf NULL, in place (it keeps the
 * message, at most cap bytes: the simulator's services). */
/* Post receive r of rank rk (peer, tag, buf, cap set): it takes the first unexpected message
 * that matches (returns 1: complete already), else it goes at the end of its source's chain
 * (0; -ENOMEM when that chain cannot be made: never for a receive posted before). */
int hs_sim_post_req(sim_rank_t *rk, struct hs_treq *r)
{
    /* the oldest that matches: of its source's chain (every message is on one unless the
     * table could not grow), else of the whole queue */
    sim_post_chain_t *uc = r->peer >= 0 && !rk->unexp_flat ? chain_of(rk, r->peer, 0) : NULL;
    int whole = r->peer < 0 || rk->unexp_flat;
    for (sim_msg_t *m = whole ? rk->unexpected
                        : uc  ? uc->uhead
                              : NULL;
         m; m = whole ? m->next : m->snext) {
        if (!matches(r, m)) continue;
        hs_sim_unexp_remove(rk, m);
        if (!hs_sim_complete_recv(r, m)) hs_sim_msg_put(world_of(rk), m);
        return 1;
    }
    sim_post_chain_t *c = chain_of(rk, r->peer, 1);
    if (!c) return -ENOMEM;
    r->pseq = rk->post_seq++;
    r->posted = 1;
    r->next = NULL;
    r->prev = c->tail;
    if (c->tail)
        c->tail->next = r;
    else
        c->head = r;
    c->tail = r;
    return 0;
}

/* Post a receive of rank rk: into buf (cap bytes), or, buf NULL, in place (it keeps the
 * message, at most cap bytes: the simulator's services; svc: a pure service's, handled at
 * once when it completes). */
int hs_sim_post_recv(sim_rank_t *rk, int peer, uint32_t tag, void *buf, size_t cap,
                     hs_service_t *svc, int slot, hs_treq_t **req)
{
    struct hs_treq *r = hs_sim_req_get(world_of(rk));
    if (!r) return -ENOMEM;
    r->peer = peer;
    r->tag = tag;
    r->buf = buf;
    r->inplace = !buf;
    r->cap = cap;
    r->rk = rk;
    r->svc = svc;
    r->slot = slot;
    int rc = hs_sim_post_req(rk, r);
    if (rc < 0) {
        hs_sim_req_put(world_of(rk), r);
        return rc;
    }
    *req = r;
    if (rc > 0 && svc) hs_sim_svc_inline(world_of(rk), r, NULL);
    return 0;
}

/* A receive that names a dead rank with nothing of it left in flight fails. */
void hs_sim_check_dead_source(sim_world_t *w, sim_rank_t *rk, struct hs_treq *r)
{
    if (r->done || r->send || r->peer == HS_ANY_SOURCE) return;
    if (!w->rk[r->peer].dead || w->in_flight[r->peer] > 0) return;
    hs_sim_unpost(rk, r);
    r->done = 1;
    r->err = HS_ERR(-ECONNRESET, "sim: rank %d has exited (receive, tag %#x)", r->peer, r->tag);
}

void hs_sim_req_release(hs_treq_t **req)
{
    if ((*req)->msg) (*req)->msg->sreq = NULL; /* a send freed in flight: the message goes on */
    if ((*req)->held) hs_sim_msg_put(world_of((*req)->rk), (*req)->held);
    hs_sim_off_completed(*req);
    hs_sim_req_put(world_of((*req)->rk), *req);
    *req = NULL;
}

/* Take a finished request: its status, its error, freed. */
int hs_sim_take(hs_treq_t **req, hs_tstatus_t *st)
{
    struct hs_treq *r = *req;
    int err = r->err;
    if (st) *st = r->st;
    hs_sim_req_release(req);
    return err;
}
