/*
 * gossip/shm_msg.c — tagged messages over hsshm: requests, sends (eager, shaped, or by
 * address: the RTS path the receiver copies with process_vm_readv), sends to this rank
 * itself, receives and the unexpected-message queue, probes, freeing requests mid-message,
 * and the barrier over CTRL messages.
 */
#include "gossip/shm_impl.h"
#include "gossip/transport_impl.h"
#include "hearsay/common.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

/* --- requests and the unexpected queue --------------------------------------------------- */

void hs_shm_req_fail_locked(shm_t *s, struct hs_treq *r, int code, const char *fmt, ...)
{
    (void)s;
    if (r->complete) return;
    char msg[HS_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    free(r->errmsg);
    r->errmsg = strdup(msg);
    r->err = code;
    r->complete = 1;
}

void hs_shm_req_destroy(struct hs_treq *r)
{
    free(r->errmsg);
    free(r->own);
    free(r->rel);
    free(r);
}

/* A new unexpected message of len bytes (nothing arrived yet) at the end of the queue, or
 * NULL when out of memory. */
ux_t *hs_shm_ux_new_locked(shm_t *s, int src, int ctrl, uint32_t tag, size_t len)
{
    ux_t *u = calloc(1, sizeof *u);
    char *b = len ? malloc(len) : NULL;
    if (!u || (len && !b)) {
        free(u);
        free(b);
        return NULL;
    }
    *u = (ux_t){.src = src, .ctrl = ctrl, .tag = tag, .len = len, .buf = b};
    u->prev = s->uxq.prev;
    u->next = &s->uxq;
    s->uxq.prev->next = u;
    s->uxq.prev = u;
    return u;
}

void hs_shm_ux_unlink_free(ux_t *u)
{
    u->prev->next = u->next;
    u->next->prev = u->prev;
    free(u->buf);
    free(u);
}

/* --- records matched by the progress pass, the RTS path ---------------------------------- */

/* Fail receive r, bound to a message (r->peer, r->tag, r->len) longer than its buffer. */
static void fail_too_big_locked(shm_t *s, struct hs_treq *r)
{
    hs_shm_req_fail_locked(
        s, r, -EMSGSIZE,
        "rank %d: a message of %zu bytes from rank %d (tag %u) is larger than the "
        "receive buffer of %zu bytes",
        s->t->rank, r->len, r->peer, r->tag, r->cap);
}

void hs_shm_bind_recv_locked(shm_t *s, struct hs_treq *r, int src, uint32_t tag, size_t len)
{
    peer_t *pe = &s->peers[src];
    hs_shm_list_unlink(r);
    r->peer = src;
    r->tag = tag;
    r->len = len;
    if (len > r->cap) {
        fail_too_big_locked(s, r);
        return;
    }
    r->bound = 1;
    pe->cur_req = r;
}

/* Copy len bytes at addr in process pid into dst (process_vm_readv, looping over partial
 * reads). 0 or -errno. */
static int cma_read(pid_t pid, uint64_t addr, void *dst, size_t len)
{
    size_t got = 0;
    while (got < len) {
        struct iovec lo = {(char *)dst + got, len - got};
        struct iovec re = {(void *)(uintptr_t)(addr + got), len - got};
        ssize_t n = process_vm_readv(pid, &lo, 1, &re, 1, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return n < 0 ? -errno : -EIO;
        got += (size_t)n;
    }
    return 0;
}

/* An RTS record from peer p has been matched (pe->cur_req or pe->cur_ux, or neither when the
 * message is dropped): copy the message from the sender, then tell it so. */
void hs_shm_take_rts_locked(shm_t *s, int p, const hs_shm_rec_t *rec)
{
    peer_t *pe = &s->peers[p];
    int snap = (rec->kind & 0xFF) == HS_SHM_REC_SNAP;
    hs_shm_snap_t sn;
    memset(&sn, 0, sizeof sn);
    uint64_t addr;
    if (snap) {
        memcpy(&sn, (const char *)rec + HS_SHM_REC_HDR, sizeof sn);
        addr = sn.addr;
    } else {
        memcpy(&addr, (const char *)rec + HS_SHM_REC_HDR, sizeof addr);
    }
    size_t len = (size_t)rec->msg_len;
    /* A SNAP: the sender's buffer mapped here, where it can be (else process_vm_readv). */
    pmap_t *m = NULL;
    if (snap && len && (pe->cur_req || pe->cur_ux) && sn.off <= sn.map_len &&
        len <= sn.map_len - sn.off)
        m = hs_shm_map_get_locked(s, p, &sn);
    const char *src = m ? m->base + sn.off : NULL;
    struct hs_treq *vr = pe->cur_req && pe->cur_req->view ? pe->cur_req : NULL;
    int rc = 0;
    if (vr && src) { /* a view reads it in place, and holds it until released */
        vr->buf = (char *)src;
        vr->map = m;
        m->holds++;
        vr->rdv_idx = pe->rdv_taken;
        vr->hprev = s->held.hprev;
        vr->hnext = &s->held;
        s->held.hprev->hnext = vr;
        s->held.hprev = vr;
    } else if (vr && len) { /* a view of a message it cannot map: a copy of its own */
        vr->own = malloc(len);
        vr->buf = vr->own;
        rc = vr->own ? cma_read((pid_t)pe->addr.pid, addr, vr->own, len) : -ENOMEM;
    } else {
        char *dst = pe->cur_req ? pe->cur_req->buf : pe->cur_ux ? pe->cur_ux->buf : NULL;
        if (dst && len && src)
            memcpy(dst, src, len);
        else if (dst && len)
            rc = cma_read((pid_t)pe->addr.pid, addr, dst, len);
    }
    if (pe->cur_req) {
        struct hs_treq *r = pe->cur_req;
        pe->cur_req = NULL;
        r->bound = 0;
        if (rc < 0) {
            hs_shm_req_fail_locked(s, r, rc == -ESRCH ? -ECONNRESET : rc,
                                   "rank %d: receive from rank %d (tag %u): reading its %zu bytes "
                                   "(process_vm_readv) failed: %s",
                                   s->t->rank, p, r->tag, len, strerror(-rc));
        } else {
            r->done = len;
            if (r->orphan)
                hs_shm_req_destroy(r);
            else
                hs_shm_recv_done_locked(&s->doneq, r);
        }
    } else if (pe->cur_ux) {
        ux_t *u = pe->cur_ux;
        pe->cur_ux = NULL;
        if (rc < 0) { /* the sender is gone or broken: its message is lost, say so */
            HS_WARN("rank %d: dropped a message of %zu bytes from rank %d (tag %u): reading it "
                    "failed: %s",
                    s->t->rank, len, p, u->tag, strerror(-rc));
            hs_shm_ux_unlink_free(u);
        } else {
            u->got = len;
        }
    }
    pe->rdv_taken++;
    hs_shm_rdv_ack_locked(s, p); /* (a view's hold keeps it and what follows unacknowledged) */
}

struct hs_treq *hs_shm_req_new(enum req_kind kind, int peer, uint32_t tag)
{
    struct hs_treq *r = hs_calloc(1, sizeof *r, "transport request");
    if (!r) return NULL;
    r->kind = kind;
    r->peer = peer;
    r->tag = tag;
    return r;
}

/* --- sends and receives ------------------------------------------------------------------ */

/* A send to this rank: straight into a matching posted receive, else kept as unexpected.
 * The send completes at once. */
static int deliver_self_locked(shm_t *s, struct hs_treq *r)
{
    int me = s->t->rank;
    struct hs_treq *q = s->posted.next;
    while (q != &s->posted && !hs_shm_matches(q, me, r->ctrl, r->tag)) q = q->next;
    if (q != &s->posted) {
        hs_shm_list_unlink(q);
        q->peer = me;
        q->tag = r->tag;
        q->len = r->cap;
        if (r->cap > q->cap) {
            hs_shm_req_fail_locked(s, q, -EMSGSIZE,
                                   "rank %d: a message of %zu bytes from itself (tag %u) is larger "
                                   "than the receive buffer of %zu bytes",
                                   me, r->cap, r->tag, q->cap);
        } else {
            if (r->cap) memcpy(q->buf, r->buf, r->cap);
            q->done = r->cap;
            hs_shm_recv_done_locked(&s->doneq, q);
        }
    } else {
        ux_t *u = hs_shm_ux_new_locked(s, me, r->ctrl, r->tag, r->cap);
        if (!u)
            return HS_ERR(-ENOMEM, "out of memory for a message of %zu bytes to itself", r->cap);
        if (r->cap) memcpy(u->buf, r->buf, r->cap);
        u->got = r->cap;
    }
    r->done = r->cap;
    r->complete = 1;
    if (atomic_load(&s->seg->sleepers) > 0) hs_shm_ring_bell(s->seg);
    return 0;
}

int hs_shm_isend_any(hs_transport_t *t, int ctrl, int peer, uint32_t tag, const void *buf,
                     size_t len, hs_treq_t **req)
{
    shm_t *s = t->impl;
    struct hs_treq *r = hs_shm_req_new(REQ_SEND, peer, tag);
    if (!r) return -ENOMEM;
    r->ctrl = ctrl;
    r->buf = (char *)buf;
    r->cap = len;
    r->len = len;
    pthread_mutex_lock(&s->lock);
    if (peer == t->rank) {
        int rc = deliver_self_locked(s, r);
        pthread_mutex_unlock(&s->lock);
        if (rc < 0) {
            hs_shm_req_destroy(r);
            return rc;
        }
        *req = r;
        return 0;
    }
    peer_t *pe = &s->peers[peer];
    if (!pe->seg) { /* this replacement found its process exited (shm_wire.h, version 5) */
        hs_shm_req_fail_locked(s, r, -ECONNRESET,
                               "rank %d: send to rank %d (tag %u): rank %d (pid %u) has exited",
                               t->rank, peer, tag, peer, pe->addr.pid);
        pthread_mutex_unlock(&s->lock);
        *req = r;
        return 0;
    }
    r->seq = pe->seq_out++;
    if (hs_shaper_active(s->shaper, peer)) {
        r->csize = hs_shaper_chunk(s->shaper, peer, s->chunk) / HS_SHM_ALIGN * HS_SHM_ALIGN;
        if (!r->csize) r->csize = HS_SHM_ALIGN;
        r->nchunk = len ? (len + r->csize - 1) / r->csize : 1;
        r->rel = malloc(r->nchunk * sizeof *r->rel);
        if (!r->rel) {
            pthread_mutex_unlock(&s->lock);
            hs_shm_req_destroy(r);
            return HS_ERR(-ENOMEM, "out of memory for the shaping times of a send");
        }
        double now = hs_now();
        for (size_t k = 0; k < r->nchunk; k++)
            r->rel[k] =
                hs_shaper_release(s->shaper, peer, HS_MIN(r->csize, len - k * r->csize), now);
    }
    /* Large unshaped messages go by address when the receiver can read this process. */
    r->rdv = !ctrl && !r->rel && s->rdv_bytes && len >= s->rdv_bytes && !pe->eager_only &&
             atomic_load(&pe->seg->reader_ok) == 1;
    /* From a mappable buffer: one SNAP record, the receiver reads the bytes in place. */
    if (!ctrl && !r->rel && len && !pe->eager_only && atomic_load(&pe->seg->reader_ok) == 1 &&
        (r->snap = hs_shm_buf_find_locked(s, buf, len)) != NULL)
        r->rdv = 1;
    hs_shm_list_append(&pe->sendq, r);
    double nr = hs_now() + 3600;
    hs_shm_push_peer_locked(s, peer, hs_now(), &nr);
    pthread_mutex_unlock(&s->lock);
    /* A shaped send waits for its release time: whoever sleeps on this rank's doorbell (the
     * progress thread, or another thread of this rank blocked in a wait, e.g. a service's
     * receive) re-plans its sleep, else the chunks wait for the next pass (up to 0.2 s). */
    if (r->rel && (s->thread_on || atomic_load(&s->seg->sleepers) > 0)) hs_shm_ring_bell(s->seg);
    *req = r;
    return 0;
}

int hs_shm_irecv_any(hs_transport_t *t, int ctrl, int peer, uint32_t tag, int any_tag, void *buf,
                     size_t cap, hs_treq_t **req)
{
    return hs_shm_irecv_common(t, ctrl, peer, tag, any_tag, buf, cap, 0, req);
}

int hs_shm_irecv_common(hs_transport_t *t, int ctrl, int peer, uint32_t tag, int any_tag, void *buf,
                        size_t cap, int view, hs_treq_t **req)
{
    shm_t *s = t->impl;
    struct hs_treq *r = hs_shm_req_new(REQ_RECV, peer, tag);
    if (!r) return -ENOMEM;
    r->view = view;
    r->ctrl = ctrl;
    r->any_tag = any_tag;
    r->buf = buf;
    r->cap = cap;
    pthread_mutex_lock(&s->lock);
    double nr;
    hs_shm_progress_locked(s, &nr);
    /* An unexpected message that matches is the oldest one: take it. */
    ux_t *u = s->uxq.next;
    while (u != &s->uxq && !hs_shm_matches(r, u->src, u->ctrl, u->tag)) u = u->next;
    if (u != &s->uxq) {
        peer_t *pe = &s->peers[u->src];
        r->peer = u->src;
        r->tag = u->tag;
        r->len = u->len;
        if (u->len > cap) {
            fail_too_big_locked(s, r);
            if (pe->cur_ux == u) pe->cur_ux = NULL; /* the rest of it is dropped */
        } else {
            if (view) { /* the unexpected buffer becomes the view's: no copy */
                r->own = u->buf;
                r->buf = r->own;
                u->buf = NULL;
            } else if (u->got) {
                memcpy(buf, u->buf, u->got);
            }
            r->done = u->got;
            if (pe->cur_ux == u) { /* still arriving: the rest lands in buf */
                pe->cur_ux = NULL;
                pe->cur_req = r;
                r->bound = 1;
            } else {
                hs_shm_recv_done_locked(&s->doneq, r);
            }
        }
        hs_shm_ux_unlink_free(u);
    } else {
        hs_shm_list_append(&s->posted, r);
    }
    pthread_mutex_unlock(&s->lock);
    *req = r;
    return 0;
}

int hs_shm_isend(hs_transport_t *t, int peer, uint32_t tag, const void *buf, size_t len,
                 hs_treq_t **req)
{
    return hs_shm_isend_any(t, 0, peer, tag, buf, len, req);
}

int hs_shm_irecv(hs_transport_t *t, int peer, uint32_t tag, void *buf, size_t cap, hs_treq_t **req)
{
    return hs_shm_irecv_any(t, 0, peer, tag, 0, buf, cap, req);
}

/* --- probes, freeing requests, the barrier ----------------------------------------------- */

int hs_shm_probe(hs_transport_t *t, int peer, uint32_t tag, int any_tag, int *found,
                 hs_tstatus_t *st)
{
    shm_t *s = t->impl;
    double nr;
    *found = 0;
    pthread_mutex_lock(&s->lock);
    hs_shm_progress_locked(s, &nr);
    for (ux_t *u = s->uxq.next; u != &s->uxq; u = u->next) {
        if (u->ctrl || !hs_tag_match(peer, tag, any_tag, u->src, u->tag)) continue;
        *found = 1;
        if (st) {
            st->source = u->src;
            st->tag = u->tag;
            st->len = u->len;
        }
        break;
    }
    pthread_mutex_unlock(&s->lock);
    return 0;
}

void hs_shm_req_free(hs_transport_t *t, hs_treq_t **req)
{
    shm_t *s = t->impl;
    struct hs_treq *r = *req;
    *req = NULL;
    if (!r) return;
    pthread_mutex_lock(&s->lock);
    if (!r->complete && r->kind == REQ_SEND && r->rdv && r->done > 0) {
        /* Its address is out: the receiver copies from the caller's buffer when it reaches
         * the record. Wait for that (bounded), so the buffer is free on return. */
        pthread_mutex_unlock(&s->lock);
        hs_treq_t *w = r;
        if (hs_shm_waitany(t, &w, 1, t->opts.timeout_s, &(int){0}, NULL) < 0 && w) {
            pthread_mutex_lock(&s->lock);
            if (w->complete) {
                hs_shm_req_destroy(w);
            } else {
                w->orphan = 1; /* freed when the peer acknowledges it or is found dead */
                HS_WARN("rank %d: freed a send of %zu bytes to rank %d that it has not read "
                        "yet (%s); its buffer must stay valid",
                        t->rank, w->cap, w->peer, hs_last_error());
            }
            pthread_mutex_unlock(&s->lock);
        }
        return;
    }
    if (r->complete) {
        hs_shm_list_unlink(r); /* a receive waiting in doneq */
        hs_shm_req_destroy(r);
    } else if (r->kind == REQ_SEND && r->prev && r->done > 0) {
        /* Mid-message: the receiver expects the rest, and the caller's buffer may go away. */
        size_t rest = r->cap - r->done;
        r->own = malloc(rest ? rest : 1);
        if (r->own) {
            memcpy(r->own, r->buf + r->done, rest);
            r->len = rest; /* hs_shm_push_peer_locked reads own[done - (cap - len)] */
            r->orphan = 1;
        } else { /* cannot keep it: the receiver will time out on this message */
            hs_shm_list_unlink(r);
            hs_shm_req_destroy(r);
        }
    } else if (r->kind == REQ_SEND) {
        hs_shm_list_unlink(r);
        hs_shm_req_destroy(r);
    } else if (r->bound) {
        s->peers[r->peer].cur_req = NULL; /* the rest of its message is dropped */
        hs_shm_req_destroy(r);
    } else {
        hs_shm_list_unlink(r);
        hs_shm_req_destroy(r);
    }
    pthread_mutex_unlock(&s->lock);
}

static int ctrl_isend(hs_transport_t *t, int peer, uint32_t tag, const void *buf, size_t len,
                      hs_treq_t **req)
{
    return hs_shm_isend_any(t, 1, peer, tag, buf, len, req);
}

static int ctrl_irecv(hs_transport_t *t, int peer, uint32_t tag, void *buf, size_t cap,
                      hs_treq_t **req)
{
    return hs_shm_irecv_any(t, 1, peer, tag, 0, buf, cap, req);
}

int hs_shm_barrier(hs_transport_t *t)
{
    return hs_transport_ctrl_barrier(t, HS_SHM_CTRL_BARRIER, ctrl_isend, ctrl_irecv);
}
