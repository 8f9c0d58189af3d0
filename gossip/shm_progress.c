/*
 * gossip/shm_progress.c — the progress engine of hsshm: doorbells (futex words), the pass
 * over every peer's rings (writing queued sends into the receivers' rings, consuming the
 * records of this rank's own), peer liveness, the progress thread, and test / waitany.
 */
#include "gossip/shm_impl.h"
#include "gossip/transport_impl.h"
#include "hearsay/common.h"

#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define LIVENESS_PERIOD_S 0.2
#define BLOCK_MAX_S       0.1

/* --- doorbells --------------------------------------------------------------------------- */

static long futex(_Atomic uint32_t *w, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, (uint32_t *)w, op, val, ts, NULL, 0);
}

/* Tell the owner of seg there is news; wake its sleepers if it has any. */
void hs_shm_ring_bell(hs_shm_seg_hdr_t *seg)
{
    atomic_fetch_add(&seg->doorbell, 1);
    if (atomic_load(&seg->sleepers) > 0) futex(&seg->doorbell, FUTEX_WAKE, INT_MAX, NULL);
}

/* Sleep on my doorbell until it moves from `seen` or until `until` (hs_now() time). */
void hs_shm_sleep_bell(shm_t *s, uint32_t seen, double until)
{
    double dt = until - hs_now();
    if (dt <= 0) return;
    struct timespec ts = {.tv_sec = (time_t)dt, .tv_nsec = (long)((dt - (double)(time_t)dt) * 1e9)};
    atomic_fetch_add(&s->seg->sleepers, 1);
    if (atomic_load(&s->seg->doorbell) == seen) futex(&s->seg->doorbell, FUTEX_WAIT, seen, &ts);
    atomic_fetch_sub(&s->seg->sleepers, 1);
}

static const char *kind_name(const struct hs_treq *r)
{
    return r->kind == REQ_SEND ? "send" : r->kind == REQ_RECV ? "receive" : "one-sided access";
}

/* --- progress: the sending side ---------------------------------------------------------- */

/* Make room for a record of `need` bytes in my ring at peer pe: 1 with *tail (where the
 * record's end is counted from) and *pos (its offset in the data), after a PAD record when
 * it would not fit before the end; 0 when the ring is full (the consumer will ring). */
static int reserve_locked(shm_t *s, peer_t *pe, size_t need, uint64_t *tail, size_t *pos)
{
    hs_shm_ring_hdr_t *ring = pe->out;
    const size_t cap = s->ring_bytes;
    uint64_t t = atomic_load_explicit(&ring->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&ring->head, memory_order_acquire);
    size_t p = (size_t)(t % cap), to_end = cap - p;
    size_t want = need <= to_end ? need : to_end + need;
    if (cap - (size_t)(t - head) < want) {
        /* Full: ask the consumer for a bell, then look once more. */
        atomic_store(&ring->producer_waiting, 1);
        head = atomic_load(&ring->head);
        if (cap - (size_t)(t - head) < want) return 0;
        atomic_store(&ring->producer_waiting, 0);
    }
    if (need > to_end) {
        hs_shm_rec_t *pad = (hs_shm_rec_t *)(pe->out_data + p);
        pad->kind = HS_SHM_REC_PAD;
        pad->len = 0;
        t += to_end;
        p = 0;
    }
    *tail = t;
    *pos = p;
    return 1;
}

/* Write as many records of the sends queued to peer p as its ring and the shaper allow.
 * Returns 1 when something moved. Sets *next_release to the earliest pending release. */
int hs_shm_push_peer_locked(shm_t *s, int p, double now, double *next_release)
{
    peer_t *pe = &s->peers[p];
    hs_shm_ring_hdr_t *ring = pe->out;
    int moved = 0;
    /* (`left` first: the peer acknowledges everything it took before it sets it, so once it
     * is seen, the count below is final and no send it read is failed) */
    int left = atomic_load_explicit(&pe->seg->left, memory_order_acquire) != 0;
    /* RTS sends the peer has copied (in the order they were written) are complete. */
    uint64_t acked = atomic_load_explicit(&ring->rdv_done, memory_order_acquire);
    while (pe->rdv_acked < acked && pe->rdvq.next != &pe->rdvq) {
        struct hs_treq *r = pe->rdvq.next;
        hs_shm_list_unlink(r);
        pe->rdv_acked++;
        moved = 1;
        if (r->orphan)
            hs_shm_req_destroy(r);
        else
            r->complete = 1;
    }
    /* A peer that left (about to exit) takes nothing more: treated as dead by the sends. */
    const char *gone = left ? "has left the job" : "has exited";
    while ((pe->dead || left) && pe->rdvq.next != &pe->rdvq) {
        struct hs_treq *r = pe->rdvq.next;
        hs_shm_list_unlink(r);
        hs_shm_req_fail_locked(s, r, -ECONNRESET,
                               "rank %d: send of %zu bytes to rank %d (tag %u): rank %d (pid %u) "
                               "%s before reading it",
                               s->t->rank, r->cap, p, r->tag, p, pe->addr.pid, gone);
        if (r->orphan) hs_shm_req_destroy(r);
        moved = 1;
    }
    while (pe->sendq.next != &pe->sendq) {
        struct hs_treq *r = pe->sendq.next;
        if (pe->dead || left) {
            hs_shm_list_unlink(r);
            uint64_t head = atomic_load_explicit(&ring->head, memory_order_acquire);
            if (left && !r->rdv && r->done > 0 && head > r->first_pos) {
                /* It began to take this message before leaving and counted it (leave):
                 * delivered as far as this rank is concerned. */
                if (r->orphan)
                    hs_shm_req_destroy(r);
                else
                    r->complete = 1;
            } else {
                hs_shm_req_fail_locked(
                    s, r, -ECONNRESET,
                    "rank %d: send of %zu bytes to rank %d (tag %u): rank %d (pid %u) %s",
                    s->t->rank, r->cap, p, r->tag, p, pe->addr.pid, gone);
                if (r->orphan) hs_shm_req_destroy(r);
            }
            moved = 1;
            continue;
        }
        if (r->reset) { /* a replacement's first record in this ring: its address */
            size_t need = HS_SHM_REC_HDR + hs_shm_align_up(r->cap, HS_SHM_ALIGN);
            uint64_t tail;
            size_t pos;
            if (!reserve_locked(s, pe, need, &tail, &pos)) return moved;
            hs_shm_rec_t *rec = (hs_shm_rec_t *)(pe->out_data + pos);
            rec->kind = HS_SHM_REC_RESET | HS_SHM_REC_CTRL;
            rec->tag = 0;
            rec->msg_len = r->cap;
            rec->off = 0;
            rec->len = (uint32_t)r->cap;
            rec->seq = r->seq;
            memcpy((char *)rec + HS_SHM_REC_HDR, r->buf, r->cap);
            atomic_store_explicit(&ring->tail, tail + need, memory_order_release);
            hs_shm_ring_bell(pe->seg);
            hs_shm_list_unlink(r);
            hs_shm_req_destroy(r); /* (an orphan: nobody waits for it) */
            moved = 1;
            continue;
        }
        if (r->rdv) { /* one RTS record: the address; the peer copies the data itself (a
                         SNAP: or maps the buffer and reads it in place) */
            _Static_assert(sizeof(hs_shm_snap_t) <= HS_SHM_ALIGN, "SNAP payload");
            size_t need = HS_SHM_REC_HDR + HS_SHM_ALIGN;
            uint64_t tail;
            size_t pos;
            if (!reserve_locked(s, pe, need, &tail, &pos)) return moved;
            hs_shm_rec_t *rec = (hs_shm_rec_t *)(pe->out_data + pos);
            rec->kind = r->snap ? HS_SHM_REC_SNAP : HS_SHM_REC_RTS;
            rec->tag = r->tag;
            rec->msg_len = r->cap;
            rec->off = 0;
            rec->len = r->snap ? (uint32_t)sizeof(hs_shm_snap_t) : (uint32_t)sizeof(uint64_t);
            rec->seq = r->seq;
            uint64_t addr = (uint64_t)(uintptr_t)r->buf;
            if (r->snap) {
                hs_shm_snap_t sn = {.addr = addr,
                                    .id = r->snap->id,
                                    .map_len = r->snap->map_len,
                                    .off = (uint64_t)(r->buf - r->snap->base),
                                    .fd = (uint32_t)r->snap->fd};
                memcpy((char *)rec + HS_SHM_REC_HDR, &sn, sizeof sn);
            } else {
                memcpy((char *)rec + HS_SHM_REC_HDR, &addr, sizeof addr);
            }
            atomic_store_explicit(&ring->tail, tail + need, memory_order_release);
            hs_shm_ring_bell(pe->seg);
            r->done = r->cap;
            hs_shm_list_unlink(r);
            hs_shm_list_append(&pe->rdvq, r);
            moved = 1;
            continue;
        }
        do {
            size_t k = r->csize ? r->done / r->csize : 0;
            if (r->rel && k < r->nchunk && r->rel[k] > now) {
                if (r->rel[k] < *next_release) *next_release = r->rel[k];
                return moved;
            }
            size_t n = HS_MIN(r->csize ? r->csize : s->chunk, r->cap - r->done);
            size_t need = HS_SHM_REC_HDR + hs_shm_align_up(n, HS_SHM_ALIGN);
            uint64_t tail;
            size_t pos;
            if (!reserve_locked(s, pe, need, &tail, &pos)) return moved;
            hs_shm_rec_t *rec = (hs_shm_rec_t *)(pe->out_data + pos);
            if (r->done == 0) r->first_pos = tail;
            rec->kind = HS_SHM_REC_DATA | (r->ctrl ? HS_SHM_REC_CTRL : 0);
            rec->tag = r->tag;
            rec->msg_len = r->cap;
            rec->off = r->done;
            rec->len = (uint32_t)n;
            rec->seq = r->seq;
            if (n) {
                /* r->own (a send freed mid-message) holds bytes [cap - len, cap) */
                const char *from =
                    r->own ? r->own + (r->done - (r->cap - r->len)) : r->buf + r->done;
                memcpy((char *)rec + HS_SHM_REC_HDR, from, n);
            }
            atomic_store_explicit(&ring->tail, tail + need, memory_order_release);
            r->done += n;
            moved = 1;
            hs_shm_ring_bell(pe->seg);
        } while (r->done < r->cap);
        hs_shm_list_unlink(r);
        if (r->orphan)
            hs_shm_req_destroy(r);
        else
            r->complete = 1;
    }
    return moved;
}

/* --- progress: the receiving side -------------------------------------------------------- */

/* Consume the records of peer p's ring. Returns 1 when something moved. */
/* A record that cannot be what a peer of this job writes (out of its ring, past its
 * message, a length that changed mid-message): the peer is taken for dead, so that every
 * request naming it fails, and nothing of its ring is read any more. */
static int corrupt_peer_locked(shm_t *s, int p, const char *why, uint64_t a, uint64_t b)
{
    peer_t *pe = &s->peers[p];
    HS_WARN("hsshm: rank %d: a corrupt record from rank %d (%s: %llu, %llu): rank %d is taken "
            "for dead",
            s->t->rank, p, why, (unsigned long long)a, (unsigned long long)b, p);
    pe->dead = 1;
    pe->cur_req = NULL;
    pe->cur_ux = NULL;
    return 0;
}

#define SHM_MSG_MAX (1ULL << 36) /* no message of a job is this large (64 GiB) */

/* Claim the message that starts at rec (wire version 4): 1 when it is this rank's to take, 0
 * when its sender took it back (TAKEN). */
static int claim_rec(const hs_shm_rec_t *rec)
{
    uint32_t *k = (uint32_t *)&rec->kind; /* (shared memory: the sender swaps it too) */
    uint32_t cur = __atomic_load_n(k, __ATOMIC_ACQUIRE);
    while (!(cur & HS_SHM_REC_CLAIMED)) {
        if ((cur & 0xFF) == HS_SHM_REC_TAKEN) return 0;
        if (__atomic_compare_exchange_n(k, &cur, cur | HS_SHM_REC_CLAIMED, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
            return 1;
    }
    return 1;
}

/* The consumer freed room in pe's ring: ring its producer's bell if it waits for room. (seq_cst:
 * pairs with the producer's store of producer_waiting then load of head.) A peer without a
 * segment here (it had exited when this replacement joined) has nobody to wake. */
static void wake_producer(peer_t *pe)
{
    if (atomic_load(&pe->in->producer_waiting) && atomic_exchange(&pe->in->producer_waiting, 0) &&
        pe->seg)
        hs_shm_ring_bell(pe->seg);
}

static int pull_peer_locked(shm_t *s, int p)
{
    peer_t *pe = &s->peers[p];
    hs_shm_ring_hdr_t *ring = pe->in;
    const size_t cap = s->ring_bytes;
    if (s->left) return 0; /* this rank left the job: nothing more is taken */
    if (pe->dead && pe->corrupt) return 0;
    uint64_t head = atomic_load_explicit(&ring->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&ring->tail, memory_order_acquire);
    if (head == tail) return 0;
    while (head != tail) {
        size_t pos = (size_t)(head % cap);
        const hs_shm_rec_t *rec = (const hs_shm_rec_t *)(pe->in_data + pos);
        /* (one atomic look: the sender may swap it to TAKEN meanwhile, see claim_rec) */
        uint32_t kword = __atomic_load_n((const uint32_t *)&rec->kind, __ATOMIC_ACQUIRE);
        if ((kword & 0xFF) == HS_SHM_REC_PAD) {
            head += cap - pos;
            continue;
        }
        int ctrl = !!(kword & HS_SHM_REC_CTRL);
        size_t n = rec->len, off = (size_t)rec->off, len = (size_t)rec->msg_len;
        /* every length checked before it is used, none multiplied or added unchecked */
        if (pos > cap - HS_SHM_REC_HDR || n > cap - pos - HS_SHM_REC_HDR) {
            pe->corrupt = 1;
            return corrupt_peer_locked(s, p, "record past the ring: position, length", pos, n);
        }
        unsigned kind = kword & 0xFF;
        if (kind == HS_SHM_REC_RESET) { /* its replacement took the ring over (version 5) */
            hs_shm_addr_v1_t a;
            if (off != 0 || n < sizeof a) {
                pe->corrupt = 1;
                return corrupt_peer_locked(s, p, "reset record: offset, payload", off, n);
            }
            memcpy(&a, (const char *)rec + HS_SHM_REC_HDR, sizeof a);
            head += HS_SHM_REC_HDR + hs_shm_align_up(n, HS_SHM_ALIGN);
            atomic_store(&ring->head, head);
            if (hs_shm_reattach_locked(s, p, &a) < 0) {
                HS_WARN("hsshm: %s: rank %d is taken for dead", hs_last_error(), p);
                pe->corrupt = 1;
                return corrupt_peer_locked(s, p, "reset record: pid, descriptor", a.pid, a.seg_fd);
            }
            wake_producer(pe);
            tail = atomic_load_explicit(&ring->tail, memory_order_acquire);
            continue;
        }
        if (kind == HS_SHM_REC_TAKEN) { /* taken back by its sender (revoke): skipped */
            if (off == 0) pe->cur_req = NULL, pe->cur_ux = NULL; /* (the rest is dropped) */
            head += HS_SHM_REC_HDR + hs_shm_align_up(n, HS_SHM_ALIGN);
            atomic_store(&ring->head, head);
            wake_producer(pe);
            tail = atomic_load_explicit(&ring->tail, memory_order_acquire);
            continue;
        }
        int by_addr = kind == HS_SHM_REC_RTS || kind == HS_SHM_REC_SNAP;
        if ((off == 0 || by_addr) && !claim_rec(rec)) { /* its sender took it back just now */
            head += HS_SHM_REC_HDR + hs_shm_align_up(n, HS_SHM_ALIGN);
            atomic_store(&ring->head, head);
            wake_producer(pe);
            tail = atomic_load_explicit(&ring->tail, memory_order_acquire);
            continue;
        }
        if (by_addr && (off != 0 ||
                        n < (kind == HS_SHM_REC_SNAP ? sizeof(hs_shm_snap_t) : sizeof(uint64_t)))) {
            pe->corrupt = 1;
            return corrupt_peer_locked(s, p, "by-address record: offset, payload", off, n);
        }
        if (!by_addr && (rec->msg_len > SHM_MSG_MAX || off > len || n > len - off)) {
            pe->corrupt = 1;
            return corrupt_peer_locked(s, p, "data past its message: offset + length, message",
                                       rec->off + (uint64_t)n, rec->msg_len);
        }
        if (off != 0 &&
            ((pe->cur_req && pe->cur_req->len != len) || (pe->cur_ux && pe->cur_ux->len != len))) {
            pe->corrupt = 1;
            return corrupt_peer_locked(s, p, "message length changed: was, now",
                                       pe->cur_req ? pe->cur_req->len : pe->cur_ux->len, len);
        }
        if (off == 0) { /* first record: match it */
            pe->cur_req = NULL;
            pe->cur_ux = NULL;
            struct hs_treq *r = s->posted.next;
            while (r != &s->posted && !hs_shm_matches(r, p, ctrl, rec->tag)) r = r->next;
            if (r != &s->posted) {
                hs_shm_bind_recv_locked(s, r, p, rec->tag, len);
            } else {
                ux_t *u = hs_shm_ux_new_locked(s, p, ctrl, rec->tag, len);
                if (!u) return -1; /* try again later; the ring keeps the data */
                pe->cur_ux = u;
            }
        }
        const char *data = (const char *)rec + HS_SHM_REC_HDR;
        if (off == 0 && !by_addr && pe->cur_req && pe->cur_req->view && !pe->cur_req->buf &&
            len) { /* a view of an eager message: a buffer of its own */
            struct hs_treq *r = pe->cur_req;
            if (!(r->own = malloc(len))) {
                pe->cur_req = NULL; /* the rest is dropped */
                r->bound = 0;
                hs_shm_req_fail_locked(s, r, -ENOMEM,
                                       "rank %d: out of memory for a message of %zu bytes from "
                                       "rank %d",
                                       s->t->rank, len, p);
            }
            r->buf = r->own;
        }
        if (by_addr) {
            hs_shm_take_rts_locked(s, p, rec);
        } else if (pe->cur_req) {
            struct hs_treq *r = pe->cur_req;
            if (n) memcpy(r->buf + off, data, n);
            r->done += n;
            if (r->done >= r->len) {
                pe->cur_req = NULL;
                r->bound = 0;
                if (r->orphan)
                    hs_shm_req_destroy(r);
                else
                    hs_shm_recv_done_locked(&s->doneq, r);
            }
        } else if (pe->cur_ux) {
            if (n) memcpy(pe->cur_ux->buf + off, data, n);
            pe->cur_ux->got += n;
            if (pe->cur_ux->got >= pe->cur_ux->len) pe->cur_ux = NULL;
        }
        head += HS_SHM_REC_HDR + hs_shm_align_up(n, HS_SHM_ALIGN);
        /* seq_cst: pairs with the producer's store of producer_waiting then load of head */
        atomic_store(&ring->head, head);
        wake_producer(pe);
        tail = atomic_load_explicit(&ring->tail, memory_order_acquire);
    }
    return 1;
}

/* --- progress: one pass ------------------------------------------------------------------ */

/* One pass over every peer. Returns > 0 when something moved, 0 when not. */
int hs_shm_progress_locked(shm_t *s, double *next_release)
{
    double now = hs_now();
    *next_release = now + 3600;
    int moved = 0;
    for (int p = 0; p < s->t->size; p++) {
        /* (a peer whose process had exited when this replacement joined has no segment here
         * until its own replacement's RESET arrives in its ring) */
        if (p == s->t->rank || !s->peers[p].in) continue;
        if (pull_peer_locked(s, p) > 0) moved = 1;
        if (s->peers[p].seg && hs_shm_push_peer_locked(s, p, now, next_release) > 0) moved = 1;
    }
    if (!s->unlinked && atomic_load(&s->seg->mapped) >= (uint32_t)(s->t->size - 1)) {
        shm_unlink(s->name); /* every peer has it: the name is no longer needed */
        s->unlinked = 1;
    }
    /* Another thread of this rank may be waiting on something this pass completed. */
    if (moved && atomic_load(&s->seg->sleepers) > 0) hs_shm_ring_bell(s->seg);
    return moved;
}

/* --- liveness ---------------------------------------------------------------------------- */

/* Mark the peers the requests wait for that exited (each checked at most every
 * LIVENESS_PERIOD_S) and fail the requests that wait on a dead peer. Returns 1 when it
 * changed something (the caller looks at the requests again), else 0. */
static int check_liveness_locked(shm_t *s, struct hs_treq **reqs, int n, double now)
{
    int newly = 0;
    for (int i = 0; i < n; i++) {
        struct hs_treq *r = reqs[i];
        if (!r || r->complete) continue;
        int lo = r->peer, hi = r->peer;
        if (r->peer < 0) lo = 0, hi = s->t->size - 1;
        for (int p = lo; p <= hi; p++) {
            peer_t *pe = &s->peers[p];
            if (p == s->t->rank || pe->dead || now - pe->last_alive < LIVENESS_PERIOD_S) continue;
            pe->last_alive = now;
            if (hs_pid_gone(pe->addr.pid)) pe->dead = newly = 1;
        }
    }
    /* A peer found dead earlier (by another wait, e.g. a receive from any rank) must fail the
     * requests that name it too, not only those of the wait that found it. */
    int waits_on_dead = 0;
    for (int i = 0; i < n && !newly && !waits_on_dead; i++)
        waits_on_dead = reqs[i] && !reqs[i]->complete && reqs[i]->peer >= 0 &&
                        reqs[i]->peer != s->t->rank && s->peers[reqs[i]->peer].dead;
    if (!newly && !waits_on_dead) return 0;
    /* Whatever a dead peer wrote before it exited is in its ring: take it first. */
    double nr;
    hs_shm_progress_locked(s, &nr);
    for (int i = 0; i < n; i++) {
        struct hs_treq *r = reqs[i];
        if (!r || r->complete) continue;
        if (r->kind == REQ_SEND) continue; /* failed by hs_shm_push_peer_locked */
        if (r->peer >= 0 && s->peers[r->peer].dead) {
            if (r->bound) s->peers[r->peer].cur_req = NULL;
            hs_shm_list_unlink(r);
            hs_shm_req_fail_locked(s, r, -ECONNRESET,
                                   "rank %d: %s from rank %d (tag %u, %zu of %zu bytes received): "
                                   "rank %d (pid %u) has exited",
                                   s->t->rank, kind_name(r), r->peer, r->tag, r->done,
                                   r->bound ? r->len : (size_t)0, r->peer,
                                   s->peers[r->peer].addr.pid);
        } else if (r->peer < 0) {
            int dead = 0;
            for (int p = 0; p < s->t->size; p++) dead += s->peers[p].dead;
            if (dead >= s->t->size - 1) {
                hs_shm_list_unlink(r);
                hs_shm_req_fail_locked(
                    s, r, -ECONNRESET,
                    "rank %d: every other rank has exited while receiving from any "
                    "rank (tag %u)",
                    s->t->rank, r->tag);
            }
        }
    }
    return 1;
}

/* --- the progress thread ----------------------------------------------------------------- */

void *hs_shm_progress_thread(void *arg)
{
    shm_t *s = arg;
    while (!atomic_load(&s->stop)) {
        uint32_t seen = atomic_load(&s->seg->doorbell);
        double nr;
        pthread_mutex_lock(&s->lock);
        int moved = hs_shm_progress_locked(s, &nr);
        pthread_mutex_unlock(&s->lock);
        if (!moved) hs_shm_sleep_bell(s, seen, HS_MIN(nr, hs_now() + BLOCK_MAX_S));
    }
    return NULL;
}

/* --- test and waits ---------------------------------------------------------------------- */

static int finish_locked(struct hs_treq **req, hs_tstatus_t *st)
{
    struct hs_treq *r = *req;
    if (st) {
        st->source = r->peer;
        st->tag = r->tag;
        st->len = r->kind == REQ_SEND ? r->cap : r->len;
    }
    int rc = 0;
    if (r->err) rc = HS_ERR(r->err, "%s", r->errmsg ? r->errmsg : "transport request failed");
    hs_shm_list_unlink(r); /* a receive waiting in doneq */
    hs_shm_req_destroy(r);
    *req = NULL;
    return rc;
}

int hs_shm_test(hs_transport_t *t, hs_treq_t **req, int *done, hs_tstatus_t *st)
{
    shm_t *s = t->impl;
    double nr;
    pthread_mutex_lock(&s->lock);
    hs_shm_progress_locked(s, &nr);
    int rc = 0;
    *done = 0;
    if ((*req)->complete) {
        *done = 1;
        rc = finish_locked(req, st);
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int hs_shm_progress(hs_transport_t *t)
{
    shm_t *s = t->impl;
    double nr;
    pthread_mutex_lock(&s->lock);
    int moved = hs_shm_progress_locked(s, &nr);
    pthread_mutex_unlock(&s->lock);
    return moved;
}

static void describe(const struct hs_treq *r, char *out, size_t n)
{
    if (r->kind == REQ_SEND && r->rdv && r->done)
        snprintf(out, n, "send of %zu bytes to rank %d (tag %u, waiting for it to read them)",
                 r->cap, r->peer, r->tag);
    else if (r->kind == REQ_SEND)
        snprintf(out, n, "send of %zu bytes to rank %d (tag %u, %zu bytes in its ring)", r->cap,
                 r->peer, r->tag, r->done);
    else if (r->peer < 0)
        snprintf(out, n, "receive from any rank (tag %u)", r->tag);
    else
        snprintf(out, n, "receive from rank %d (tag %u, %zu bytes so far)", r->peer, r->tag,
                 r->done);
}

static int waitany_core(hs_transport_t *t, hs_treq_t **reqs, int n, double timeout_s, int *index,
                        hs_tstatus_t *st, int keep);

int hs_shm_waitany(hs_transport_t *t, hs_treq_t **reqs, int n, double timeout_s, int *index,
                   hs_tstatus_t *st)
{
    return waitany_core(t, reqs, n, timeout_s, index, st, 0);
}

int hs_shm_wait_keep(hs_transport_t *t, hs_treq_t **req, double timeout_s, int *index)
{
    return waitany_core(t, req, 1, timeout_s, index, NULL, 1);
}

/* keep: a completed request stays allocated (views), else it is finished (freed). */
static int waitany_core(hs_transport_t *t, hs_treq_t **reqs, int n, double timeout_s, int *index,
                        hs_tstatus_t *st, int keep)
{
    shm_t *s = t->impl;
    double start = hs_now(), deadline = start + timeout_s;
    *index = -1;
    for (;;) {
        uint32_t seen = atomic_load(&s->seg->doorbell);
        double nr;
        pthread_mutex_lock(&s->lock);
        hs_shm_progress_locked(s, &nr);
        int active = 0;
        for (int i = 0; i < n; i++) {
            if (!reqs[i]) continue;
            active++;
            if (reqs[i]->complete) {
                *index = i;
                int rc = keep ? 0 : finish_locked(&reqs[i], st);
                pthread_mutex_unlock(&s->lock);
                return rc;
            }
        }
        double now = hs_now();
        if (!active || timeout_s <= 0) {
            pthread_mutex_unlock(&s->lock);
            return 0;
        }
        if (check_liveness_locked(s, reqs, n, now)) {
            pthread_mutex_unlock(&s->lock);
            continue;
        }
        if (now >= deadline) {
            char msg[HS_ERRMSG_MAX] = "";
            size_t used = 0;
            for (int i = 0, shown = 0; i < n && shown < 3; i++) {
                if (!reqs[i]) continue;
                char d[256];
                describe(reqs[i], d, sizeof d);
                used += (size_t)snprintf(msg + used, sizeof msg - HS_MIN(used, sizeof msg - 1),
                                         "%s%s", shown++ ? "; " : "", d);
            }
            pthread_mutex_unlock(&s->lock);
            return HS_ERR(-ETIMEDOUT,
                          "rank %d: %s not complete after %.1f s (peer slow, hung or dead; raise "
                          "HS_TIMEOUT if it is just slow)",
                          t->rank, msg, now - start);
        }
        pthread_mutex_unlock(&s->lock);
        hs_shm_sleep_bell(s, seen, HS_MIN(HS_MIN(deadline, now + LIVENESS_PERIOD_S), nr));
    }
}

/* --- after a departure: unsent and leave ------------------------------------------------- */

static hs_shm_rec_t *rec_at(peer_t *pe, size_t cap, uint64_t pos)
{
    return (hs_shm_rec_t *)(pe->out_data + (size_t)(pos % cap));
}

/* The ring bytes a record takes (PAD records: to the end of the ring). */
static uint64_t rec_span(const hs_shm_rec_t *rec, size_t cap, uint64_t pos)
{
    if ((rec->kind & 0xFF) == HS_SHM_REC_PAD) return cap - (size_t)(pos % cap);
    return HS_SHM_REC_HDR + hs_shm_align_up(rec->len, HS_SHM_ALIGN);
}

/* Hand the eager messages of tag wholly in my ring at pe (pe->out: the ring's head and tail,
 * pe->out_data) that its consumer never began to take to cb, and mark them TAKEN. Returns how
 * many, or an error. */
static int take_back_locked(shm_t *s, peer_t *pe, int peer, uint32_t tag, hs_transport_msg_fn cb,
                            void *ctx)
{
    const size_t cap = s->ring_bytes;
    uint64_t pos = atomic_load(&pe->out->head);
    uint64_t tail = atomic_load_explicit(&pe->out->tail, memory_order_relaxed); /* ours */
    int n = 0, rc = 0;
    while (pos < tail) {
        hs_shm_rec_t *rec = rec_at(pe, cap, pos);
        if ((rec->kind & 0xFF) != HS_SHM_REC_DATA || (rec->kind & HS_SHM_REC_CTRL) ||
            rec->tag != tag || rec->off != 0) {
            pos += rec_span(rec, cap, pos); /* PAD, TAKEN, RTS, another tag, or the rest of a
                                               message it began to take */
            continue;
        }
        /* A message it never began to take starts here: its records follow, only PADs
         * between them. */
        size_t len = (size_t)rec->msg_len, have = 0;
        int nrec = 0, whole = 0;
        uint64_t q = pos;
        while (q < tail && !whole) {
            hs_shm_rec_t *x = rec_at(pe, cap, q);
            if ((x->kind & 0xFF) != HS_SHM_REC_PAD) {
                have += x->len;
                nrec++;
                whole = have >= len;
            }
            q += rec_span(x, cap, q);
        }
        if (!whole) break; /* being written when it went: that send fails and keeps its share */
        char *tmp = NULL;
        const char *data = (const char *)rec + HS_SHM_REC_HDR;
        if (nrec > 1) {
            if (!(tmp = malloc(len))) {
                rc = HS_ERR(-ENOMEM, "out of memory for a message of %zu bytes", len);
                break;
            }
            for (uint64_t m = pos; m < q; m += rec_span(rec_at(pe, cap, m), cap, m)) {
                const hs_shm_rec_t *x = rec_at(pe, cap, m);
                if ((x->kind & 0xFF) == HS_SHM_REC_PAD) continue;
                if (x->off + x->len <= len)
                    memcpy(tmp + x->off, (const char *)x + HS_SHM_REC_HDR, x->len);
            }
            data = tmp;
        }
        cb(ctx, peer, data, len, len);
        free(tmp);
        for (uint64_t m = pos; m < q;) {
            hs_shm_rec_t *x = rec_at(pe, cap, m);
            uint64_t span = rec_span(x, cap, m);
            if ((x->kind & 0xFF) != HS_SHM_REC_PAD) x->kind = HS_SHM_REC_TAKEN;
            m += span;
        }
        n++;
        pos = q;
    }
    return rc < 0 ? rc : n;
}

int hs_shm_unsent(hs_transport_t *t, int peer, uint32_t tag, hs_transport_msg_fn cb, void *ctx)
{
    shm_t *s = t->impl;
    peer_t *pe = &s->peers[peer];
    if (!pe->seg && !pe->old_seg) return 0;
    pthread_mutex_lock(&s->lock);
    if (pe->old_seg) {
        /* A replacement took its place: what was sent to the crashed process and never taken
         * lies in its segment, the senders' still (a view of that ring) */
        peer_t v = {.out = pe->old_out, .out_data = pe->old_out_data};
        int got = take_back_locked(s, &v, peer, tag, cb, ctx);
        pthread_mutex_unlock(&s->lock);
        return got;
    }
    int left = atomic_load(&pe->seg->left) != 0;
    if (!pe->dead && !left && hs_pid_gone(pe->addr.pid)) pe->dead = 1;
    if (!pe->dead && !left) {
        pthread_mutex_unlock(&s->lock);
        return HS_ERR(-EBUSY,
                      "rank %d: rank %d (pid %u) still runs: what is in its ring may still be "
                      "taken",
                      t->rank, peer, pe->addr.pid);
    }
    /* Settle the queued sends first (they fail, or complete when it began to take them), so
     * that no message in the ring grows any more. */
    double nr = hs_now() + 3600;
    hs_shm_push_peer_locked(s, peer, hs_now(), &nr);
    int n = take_back_locked(s, pe, peer, tag, cb, ctx);
    pthread_mutex_unlock(&s->lock);
    return n;
}

/* The send request of ours to pe whose message has sequence number seq, in q (NULL: none). */
static struct hs_treq *find_seq(struct hs_treq *q, unsigned seq)
{
    for (struct hs_treq *r = q->next; r != q; r = r->next)
        if (r->seq == seq) return r;
    return NULL;
}

static void fail_revoked_locked(shm_t *s, struct hs_treq *r, int peer)
{
    hs_shm_list_unlink(r);
    hs_shm_req_fail_locked(s, r, -ECANCELED,
                           "rank %d: send of %zu bytes to rank %d (tag %u) taken back: rank %d "
                           "was fenced before it took it",
                           s->t->rank, r->cap, peer, r->tag, peer);
    if (r->orphan) hs_shm_req_destroy(r);
}

int hs_shm_revoke(hs_transport_t *t, int peer, uint32_t tag, hs_transport_msg_fn cb, void *ctx)
{
    shm_t *s = t->impl;
    peer_t *pe = &s->peers[peer];
    if (!pe->seg) return 0;
    pthread_mutex_lock(&s->lock);
    /* acknowledgements first (what it finished is complete, not taken back) */
    double nr = hs_now() + 3600;
    hs_shm_push_peer_locked(s, peer, hs_now(), &nr);
    const size_t cap = s->ring_bytes;
    uint64_t pos = atomic_load(&pe->out->head);
    uint64_t tail = atomic_load_explicit(&pe->out->tail, memory_order_relaxed); /* ours */
    int n = 0, rc = 0;
    while (pos < tail && rc == 0) {
        hs_shm_rec_t *rec = rec_at(pe, cap, pos);
        uint32_t *kp = &rec->kind, k = __atomic_load_n(kp, __ATOMIC_ACQUIRE);
        unsigned kind = k & 0xFF;
        uint64_t span = rec_span(rec, cap, pos);
        int by_addr = kind == HS_SHM_REC_RTS || kind == HS_SHM_REC_SNAP;
        if ((k & (HS_SHM_REC_CTRL | HS_SHM_REC_CLAIMED)) || rec->tag != tag ||
            (!by_addr && (kind != HS_SHM_REC_DATA || rec->off != 0))) {
            pos += span; /* PAD, TAKEN, claimed, another tag or the transport's own */
            continue;
        }
        /* a message it has not begun to take starts here: its records, only PADs between */
        size_t len = (size_t)rec->msg_len, have = 0;
        int whole = by_addr;
        uint64_t q = pos + span;
        if (!by_addr) {
            have = rec->len;
            whole = have >= len;
            while (q < tail && !whole) {
                hs_shm_rec_t *x = rec_at(pe, cap, q);
                if ((x->kind & 0xFF) != HS_SHM_REC_PAD) {
                    have += x->len;
                    whole = have >= len;
                }
                q += rec_span(x, cap, q);
            }
        }
        /* the data of a whole eager message, before it is given up */
        char *tmp = NULL;
        if (!by_addr && whole && len > rec->len) {
            if (!(tmp = malloc(len))) {
                rc = HS_ERR(-ENOMEM, "out of memory for a message of %zu bytes", len);
                break;
            }
            for (uint64_t m = pos; m < q; m += rec_span(rec_at(pe, cap, m), cap, m)) {
                const hs_shm_rec_t *x = rec_at(pe, cap, m);
                if ((x->kind & 0xFF) == HS_SHM_REC_PAD) continue;
                if (x->off + x->len <= len)
                    memcpy(tmp + x->off, (const char *)x + HS_SHM_REC_HDR, x->len);
            }
        }
        if (!__atomic_compare_exchange_n(kp, &k, HS_SHM_REC_TAKEN, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE)) {
            free(tmp); /* it claimed the message just now: its own */
            pos = q;
            continue;
        }
        for (uint64_t m = pos + span; m < q; m += rec_span(rec_at(pe, cap, m), cap, m)) {
            hs_shm_rec_t *x = rec_at(pe, cap, m);
            if ((x->kind & 0xFF) != HS_SHM_REC_PAD)
                __atomic_store_n(&x->kind, HS_SHM_REC_TAKEN, __ATOMIC_RELEASE);
        }
        struct hs_treq *r = by_addr ? find_seq(&pe->rdvq, rec->seq) : NULL;
        if (by_addr) {
            if (r) fail_revoked_locked(s, r, peer);
        } else if (whole) {
            cb(ctx, peer, tmp ? tmp : (const char *)rec + HS_SHM_REC_HDR, len, len);
            n++;
        } else if ((r = find_seq(&pe->sendq, rec->seq)) != NULL) {
            fail_revoked_locked(s, r, peer); /* half written: the rest is not sent */
        }
        free(tmp);
        pos = q;
    }
    /* sends not written at all yet */
    for (struct hs_treq *r = pe->sendq.next, *next; rc == 0 && r != &pe->sendq; r = next) {
        next = r->next;
        if (!r->ctrl && r->tag == tag && r->done == 0) fail_revoked_locked(s, r, peer);
    }
    pthread_mutex_unlock(&s->lock);
    hs_shm_ring_bell(s->seg); /* waiters look at their failed sends */
    return rc < 0 ? rc : n;
}

int hs_shm_leave(hs_transport_t *t, uint32_t tag, hs_transport_msg_fn cb, void *ctx)
{
    shm_t *s = t->impl;
    pthread_mutex_lock(&s->lock);
    if (!s->left) {
        /* Take what has arrived; what comes later stays in the rings, the senders' to take
         * back (a record that cannot be taken for lack of memory stays there too). */
        for (int p = 0; p < t->size; p++)
            if (p != t->rank && s->peers[p].seg) pull_peer_locked(s, p);
        atomic_store(&s->seg->left, 1);
        s->left = 1;
    }
    int n = 0;
    /* completed receives nobody was told about */
    for (struct hs_treq *r = s->doneq.next, *next; r != &s->doneq; r = next) {
        next = r->next;
        if (r->ctrl || r->tag != tag) continue;
        cb(ctx, r->peer, r->buf, r->len, r->len);
        hs_shm_list_unlink(r);
        r->complete = 0;
        hs_shm_req_fail_locked(s, r, -ECANCELED,
                               "rank %d: receive from rank %d (tag %u): handed back when leaving",
                               t->rank, r->peer, r->tag);
        n++;
    }
    /* messages that had begun to arrive into a posted receive */
    for (int p = 0; p < t->size; p++) {
        peer_t *pe = &s->peers[p];
        struct hs_treq *r = pe->cur_req;
        if (!r || r->ctrl || r->tag != tag) continue;
        pe->cur_req = NULL;
        r->bound = 0;
        if (r->orphan) { /* its receive was freed: the message was being dropped */
            hs_shm_req_destroy(r);
            continue;
        }
        cb(ctx, p, r->buf, r->done, r->len);
        hs_shm_req_fail_locked(s, r, -ECANCELED,
                               "rank %d: receive from rank %d (tag %u): handed back when leaving "
                               "(%zu of %zu bytes had arrived)",
                               t->rank, p, r->tag, r->done, r->len);
        n++;
    }
    /* unexpected messages, whole or in part */
    for (ux_t *u = s->uxq.next, *next; u != &s->uxq; u = next) {
        next = u->next;
        if (u->ctrl || u->tag != tag) continue;
        cb(ctx, u->src, u->buf, u->got, u->len);
        if (s->peers[u->src].cur_ux == u) s->peers[u->src].cur_ux = NULL;
        hs_shm_ux_unlink_free(u);
        n++;
    }
    pthread_mutex_unlock(&s->lock);
    hs_shm_ring_bell(s->seg); /* waiters look at their failed receives */
    return n;
}

int hs_shm_peer_gone(hs_transport_t *t, int peer)
{
    shm_t *s = t->impl;
    peer_t *pe = &s->peers[peer];
    pthread_mutex_lock(&s->lock);
    int dead = pe->dead;
    pthread_mutex_unlock(&s->lock);
    if (dead) return 1;
    return pe->addr.pid != (uint32_t)getpid() && hs_pid_gone(pe->addr.pid);
}
