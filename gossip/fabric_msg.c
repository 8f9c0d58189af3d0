/*
 * gossip/fabric_msg.c — tagged messages over libfabric: chunking and pipelining, the pending
 * queue (shaped sends and -FI_EAGAIN retries), completion handling, waits that block on the
 * CQ's wait object, peer liveness, probe, barrier and the optional progress thread.
 */
#include "gossip/fabric.h"
#include "gossip/transport_impl.h"
#include "hearsay/common.h"

#include <poll.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define LIVENESS_PERIOD_S 0.2  /* how often a waiter checks that its peers are alive */
#define BLOCK_MAX_S       0.25 /* longest single block before re-checking everything */

/* --- requests ------------------------------------------------------------------------- */

hs_treq_t *hs_fab_req_new(fab_t *f, enum fab_req_kind kind, int peer, uint32_t tag)
{
    hs_treq_t *r = hs_calloc(1, sizeof *r, "transport request");
    if (!r) return NULL;
    r->kind = kind;
    r->peer = peer;
    r->tag = tag;
    r->op0.req = r;
    r->start = hs_now();
    r->next_live = &f->live;
    r->prev_live = f->live.prev_live;
    f->live.prev_live->next_live = r;
    f->live.prev_live = r;
    return r;
}

void hs_fab_req_release_locked(fab_t *f, hs_treq_t *r)
{
    (void)f;
    r->prev_live->next_live = r->next_live;
    r->next_live->prev_live = r->prev_live;
    free(r->ops);
    free(r->errmsg);
    free(r);
}

static fab_op_t *req_op(hs_treq_t *r, unsigned k)
{
    return k == 0 ? &r->op0 : &r->ops[k - 1];
}

static void unqueue(fab_op_t *op)
{
    if (!op->queued) return;
    op->prev->next = op->next;
    op->next->prev = op->prev;
    op->queued = 0;
}

void hs_fab_req_fail_locked(fab_t *f, hs_treq_t *r, int code, const char *fmt, ...)
{
    if (r->complete) return;
    char buf[HS_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    r->errmsg = strdup(buf);
    r->err = code < 0 ? code : -EIO;
    r->complete = 1;
    unsigned n = r->ops ? r->nchunks : 1;
    for (unsigned k = 0; k < n; k++) unqueue(req_op(r, k));
    pthread_cond_broadcast(&f->cond);
}

/* The user no longer wants r: free it now, or cancel its posted ops and free it when the
 * provider hands the last one back. */
static void req_drop_locked(fab_t *f, hs_treq_t *r)
{
    unsigned n = r->ops ? r->nchunks : 1;
    for (unsigned k = 0; k < n; k++) unqueue(req_op(r, k));
    if (r->outstanding == 0) {
        hs_fab_req_release_locked(f, r);
        return;
    }
    r->orphan = 1;
    for (unsigned k = 0; k < n; k++) {
        fab_op_t *op = req_op(r, k);
        if (op->posted) fi_cancel(&f->ep->fid, &op->fctx);
    }
}

static const char *op_call(const fab_op_t *op)
{
    switch (op->kind) {
    case OP_SEND:
        return op->data ? "fi_tsenddata" : "fi_tsend";
    case OP_RECV:
        return "fi_trecv";
    case OP_WRITE:
        return "fi_write";
    case OP_READ:
        return "fi_read";
    case OP_ATOMIC:
        return "fi_atomic";
    case OP_PEEK:
        return "fi_trecvmsg(FI_PEEK)";
    }
    return "?";
}

static void describe(const fab_t *f, const hs_treq_t *r, char *buf, size_t len)
{
    const char *what = r->kind == REQ_SEND   ? "send to"
                       : r->kind == REQ_RECV ? "receive from"
                                             : "RMA on";
    if (r->peer < 0)
        snprintf(buf, len, "%s any rank (tag %u)", what, r->tag);
    else
        snprintf(buf, len, "%s rank %d on %s (tag %u, %u of %u chunks done, %zu bytes)", what,
                 r->peer, hs_fab_host_of(f, r->peer), r->tag, r->chunks_done,
                 r->nchunks ? r->nchunks : 1, r->len);
}

/* --- posting --------------------------------------------------------------------------- */

static int post_op_locked(fab_t *f, fab_op_t *op)
{
    ssize_t ret;
    int is_tx = op->kind != OP_RECV;
    if (is_tx && f->tx_max > 0 && f->tx_posted >= f->tx_max) return -FI_EAGAIN;
    switch (op->kind) {
    case OP_SEND:
        if (op->data)
            ret = fi_tsenddata(f->ep, op->buf, op->len, NULL, op->data, f->addrs[op->peer], op->tag,
                               &op->fctx);
        else
            ret = fi_tsend(f->ep, op->buf, op->len, NULL, f->addrs[op->peer], op->tag, &op->fctx);
        break;
    case OP_RECV:
        ret =
            fi_trecv(f->ep, op->buf, op->len, NULL, FI_ADDR_UNSPEC, op->tag, op->ignore, &op->fctx);
        break;
    default:
        ret = hs_fab_post_rma_locked(f, op);
        break;
    }
    if (ret == 0) {
        op->posted = 1;
        op->req->outstanding++;
        f->tx_posted += is_tx;
    }
    HS_DEBUG("rank %d: post %s peer %d tag %016llx ignore %016llx len %zu -> %d", f->t->rank,
             op_call(op), op->peer, (unsigned long long)op->tag, (unsigned long long)op->ignore,
             op->len, (int)ret);
    return (int)ret;
}

void hs_fab_enqueue_locked(fab_t *f, fab_op_t *op)
{
    fab_op_t *p = f->pend.prev;
    while (p != &f->pend && p->release > op->release) p = p->prev;
    op->prev = p;
    op->next = p->next;
    p->next->prev = op;
    p->next = op;
    op->queued = 1;
}

/* Post every queued op whose release time has come, in order, until the provider pushes
 * back (-FI_EAGAIN: retried after the next CQ drain). */
static void post_due_locked(fab_t *f)
{
    if (f->pend.next == &f->pend) return;
    double now = hs_now();
    if (now < f->retry_at) return; /* held back after -FI_EAGAIN */
    unsigned pass = ++f->post_pass;
    int again = 0;
    /* A send the provider pushes back (-FI_EAGAIN: a connection still being set up, a full
     * queue) holds back only the later sends to the same peer, which keep their order; the
     * others go. Then the whole queue waits retry_backoff before the next try, so a waiter
     * sleeps instead of spinning on -FI_EAGAIN (which starved the very peers whose progress
     * would clear it). */
    for (fab_op_t *op = f->pend.next, *next; op != &f->pend; op = next) {
        next = op->next;
        if (op->release > now) break;
        if (op->peer >= 0 && f->blocked_pass[op->peer] == pass) continue;
        int ret = post_op_locked(f, op);
        if (ret == -FI_EAGAIN) {
            again = 1;
            if (op->peer < 0) break;
            f->blocked_pass[op->peer] = pass;
            continue;
        }
        unqueue(op);
        if (ret) {
            char d[256];
            describe(f, op->req, d, sizeof d);
            hs_fab_req_fail_locked(f, op->req, ret > -256 ? ret : -EIO,
                                   "rank %d: %s (%s) failed: %s (libfabric provider %s)",
                                   f->t->rank, op_call(op), d, fi_strerror(-ret), f->prov);
        }
    }
    if (again) {
        f->retry_at = now + f->retry_backoff;
        f->retry_backoff = HS_MIN(2 * f->retry_backoff, 5e-3);
    } else {
        f->retry_backoff = 100e-6;
    }
}

/* --- completions ----------------------------------------------------------------------- */

typedef struct peek {
    fab_op_t op; /* first */
    int done, found, abandoned;
    uint64_t tag, data, flags;
    size_t len;
} peek_t;

static void first_chunk_arrived(fab_t *f, hs_treq_t *r, const struct fi_cq_tagged_entry *e)
{
    unsigned n = hs_fab_tag_chunk(e->tag), seq = hs_fab_tag_seq(e->tag);
    int src = hs_fab_tag_src(e->tag);
    r->peer = src;
    r->tag = (uint32_t)(e->tag & HS_FAB_TAG_USER_MASK);
    r->len = e->len;
    r->chunks_done = 1;
    r->nchunks = n ? n : 1;
    if (r->nchunks == 1) return;
    size_t l0 = e->len;
    size_t total_hint = (e->flags & FI_REMOTE_CQ_DATA) ? (size_t)e->data : 0;
    if (l0 == 0 || (size_t)(n - 1) * l0 >= r->cap || total_hint > r->cap) {
        hs_fab_req_fail_locked(f, r, -EMSGSIZE,
                               "rank %d: message from rank %d (tag %u) has %u chunks of %zu "
                               "bytes%s, more than the %zu-byte receive buffer",
                               f->t->rank, src, r->tag, n, l0, total_hint ? "" : " (or more)",
                               r->cap);
        return;
    }
    r->ops = hs_calloc(n - 1, sizeof *r->ops, "receive chunks");
    if (!r->ops) {
        hs_fab_req_fail_locked(f, r, -ENOMEM, "rank %d: no memory for %u receive chunks",
                               f->t->rank, n);
        return;
    }
    int ctrl = !!(e->tag & HS_FAB_TAG_CTRL);
    for (unsigned k = 1; k < n; k++) {
        fab_op_t *op = &r->ops[k - 1];
        size_t off = (size_t)k * l0;
        op->req = r;
        op->kind = OP_RECV;
        op->peer = src;
        op->chunk = k;
        op->tag = hs_fab_tag(ctrl, 0, src, k, seq, r->tag);
        op->buf = r->buf + off;
        op->len = HS_MIN(l0, r->cap - off);
        hs_fab_enqueue_locked(f, op);
    }
}

/* A peer's FIN has arrived, after everything it sent before (ofi_rxm keeps a connection's
 * messages in order): a FINACK tells it so. Sent by the transport itself (an orphan request,
 * freed when done). */
static void fin_answer_locked(fab_t *f, int src)
{
    if (src < 0 || src >= f->t->size || src == f->t->rank) return;
    hs_treq_t *r = hs_fab_req_new(f, REQ_SEND, src, HS_FAB_CTRL_FINACK);
    if (!r) return;
    if (f->sent_to) f->sent_to[src] = 1; /* this rank's own close makes sure it arrived */
    r->ctrl = 1;
    r->orphan = 1;
    r->nchunks = 1;
    fab_op_t *op = &r->op0;
    op->req = r;
    op->kind = OP_SEND;
    op->peer = src;
    op->buf = f->fin_buf;
    op->len = 0;
    op->tag = hs_fab_tag(1, 1, f->t->rank, 1, f->seq_to[src]++, HS_FAB_CTRL_FINACK);
    hs_fab_enqueue_locked(f, op);
}

/* One completion; returns 1 when it completed a request. */
static int on_completion(fab_t *f, const struct fi_cq_tagged_entry *e)
{
    fab_op_t *op = e->op_context;
    if (!op) return 0;
    if (op->kind == OP_PEEK) {
        peek_t *pk = (peek_t *)op;
        if (pk->abandoned) {
            free(pk);
            return 0;
        }
        pk->done = pk->found = 1;
        pk->tag = e->tag;
        pk->len = e->len;
        pk->data = e->data;
        pk->flags = e->flags;
        return 0;
    }
    hs_treq_t *r = op->req;
    HS_DEBUG("rank %d: done %s peer %d tag %016llx len %zu", f->t->rank, op_call(op), op->peer,
             (unsigned long long)e->tag, e->len);
    op->posted = 0;
    r->outstanding--;
    f->tx_posted -= op->kind != OP_RECV;
    if (r == f->fin_rx) { /* a peer closes: answer, and wait for the next */
        int src = hs_fab_tag_src(e->tag);
        if (src >= 0 && src < f->t->size) f->fin_from[src] = 1;
        fin_answer_locked(f, src);
        hs_fab_enqueue_locked(f, op);
        return 0;
    }
    if (r->orphan) {
        if (!r->outstanding) hs_fab_req_release_locked(f, r);
        return 0;
    }
    if (r->complete) return 0;
    if (op->kind == OP_RECV && op->chunk == 0) {
        first_chunk_arrived(f, r, e);
    } else {
        r->len += op->kind == OP_RECV ? e->len : op->len;
        r->chunks_done++;
    }
    if (!r->complete && r->chunks_done >= r->nchunks) r->complete = 1;
    return r->complete;
}

static int on_error(fab_t *f, const struct fi_cq_err_entry *ee)
{
    fab_op_t *op = ee->op_context;
    if (!op) return 0;
    if (op->kind == OP_PEEK) {
        peek_t *pk = (peek_t *)op;
        if (pk->abandoned)
            free(pk);
        else
            pk->done = 1; /* FI_ENOMSG: nothing there */
        return 0;
    }
    hs_treq_t *r = op->req;
    op->posted = 0;
    r->outstanding--;
    f->tx_posted -= op->kind != OP_RECV;
    if (r == f->fin_rx) return 0; /* cancelled at the close (or failed: peers' flushes time out) */
    if (r->orphan) {
        if (!r->outstanding) hs_fab_req_release_locked(f, r);
        return 0;
    }
    int err = ee->err < 0 ? -ee->err : ee->err; /* some providers store it negated */
    if (r->complete || err == FI_ECANCELED) return 0;
    char perr[256] = "";
    fi_cq_strerror(f->cq, ee->prov_errno, ee->err_data, perr, sizeof perr);
    char d[256];
    describe(f, r, d, sizeof d);
    int code = err == FI_ETRUNC ? -EMSGSIZE : (err > 0 && err < 256 ? -err : -EIO);
    hs_fab_req_fail_locked(f, r, code, "rank %d: %s (%s) failed: %s%s (libfabric provider %s: %s)",
                           f->t->rank, op_call(op), d, fi_strerror(err),
                           err == FI_ETRUNC ? " — message larger than the receive buffer" : "",
                           f->prov, perr);
    return 1;
}

static void wake_thread(fab_t *f);

int hs_fab_progress_locked(fab_t *f)
{
    int completed = 0;
    post_due_locked(f);
    for (;;) {
        struct fi_cq_tagged_entry e[16];
        ssize_t n = fi_cq_read(f->cq, e, HS_ARRAY_LEN(e));
        if (n > 0) {
            for (ssize_t i = 0; i < n; i++) completed += on_completion(f, &e[i]);
            continue;
        }
        if (n == -FI_EAGAIN) break;
        if (n == -FI_EAVAIL) {
            struct fi_cq_err_entry ee;
            memset(&ee, 0, sizeof ee);
            if (fi_cq_readerr(f->cq, &ee, 0) > 0) completed += on_error(f, &ee);
            continue;
        }
        return hs_fab_err(f, (int)n, "fi_cq_read", -1, NULL);
    }
    post_due_locked(f);
    if (completed) {
        pthread_cond_broadcast(&f->cond);
        if (f->poller) wake_thread(f);
    }
    return completed;
}

/* --- blocking without spinning ----------------------------------------------------------- */

/* Block (lock released) until the CQ may have something, a completion made by another thread,
 * the wake fd, or `until`. One thread at a time polls the CQ's wait fd and the wake fd (the
 * "poller"); any other waiter sleeps on `cond`, which every completion broadcasts, and takes
 * over polling when the poller leaves. A thread that completes requests while a poller is
 * blocked writes the wake fd, so no waiter sleeps past a completion it is waiting for.
 * Without a CQ wait fd (shm), the poller sleeps with a doubling backoff (50 us .. 2 ms). */
static void block_locked(fab_t *f, double until, double *backoff)
{
    double now = hs_now();
    if (until <= now) return;
    if (f->poller) {
        double sec;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        sec = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec + (until - now);
        ts.tv_sec = (time_t)sec;
        ts.tv_nsec = (long)((sec - (double)ts.tv_sec) * 1e9);
        pthread_cond_timedwait(&f->cond, &f->lock, &ts);
        return;
    }
    double dt = until - now;
    int have_cq_fd = 0;
    if (f->wait_fd >= 0) {
        struct fid *fids[1] = {&f->cq->fid};
        int ret = fi_trywait(f->fabric, fids, 1);
        if (ret == -FI_EAGAIN) return; /* completions pending: progress again */
        have_cq_fd = ret == 0;
    }
    if (!have_cq_fd) {
        dt = HS_MIN(*backoff, dt);
        *backoff = HS_MIN(*backoff * 2, 2e-3);
    }
    struct pollfd p[2] = {{.fd = f->wake_fd, .events = POLLIN},
                          {.fd = f->wait_fd, .events = POLLIN}};
    struct timespec ts = {.tv_sec = (time_t)dt, .tv_nsec = (long)((dt - (double)(time_t)dt) * 1e9)};
    f->poller = 1;
    pthread_mutex_unlock(&f->lock);
    ppoll(p, have_cq_fd ? 2 : 1, &ts, NULL);
    pthread_mutex_lock(&f->lock);
    f->poller = 0;
    if (p[0].revents & POLLIN) {
        uint64_t v;
        if (read(f->wake_fd, &v, sizeof v) < 0) { /* already drained */
        }
    }
    pthread_cond_broadcast(&f->cond); /* a waiter may take over polling */
}

static void wake_thread(fab_t *f)
{
    if (f->wake_fd < 0) return;
    uint64_t one = 1;
    if (write(f->wake_fd, &one, sizeof one) < 0) { /* counter full: already awake */
    }
}

void hs_fab_wake_thread(fab_t *f)
{
    wake_thread(f);
}

/* Next time a queued op becomes due (or `until` when sooner). */
static double next_timer(const fab_t *f, double until)
{
    if (f->pend.next == &f->pend) return until;
    double r = HS_MAX(f->pend.next->release, f->retry_at); /* held-back ops wait for retry_at */
    return r < until ? r : until;
}

static void *progress_thread(void *arg)
{
    fab_t *f = arg;
    double backoff = 50e-6;
    pthread_mutex_lock(&f->lock);
    while (!f->stop) {
        int n = hs_fab_progress_locked(f);
        if (n < 0) HS_WARN("progress thread: %s", hs_last_error());
        if (n > 0) backoff = 50e-6;
        if (f->stop) break;
        block_locked(f, next_timer(f, hs_now() + BLOCK_MAX_S), &backoff);
    }
    pthread_mutex_unlock(&f->lock);
    return NULL;
}

int hs_fab_start_thread(fab_t *f)
{
    f->stop = 0;
    int rc = pthread_create(&f->thread, NULL, progress_thread, f);
    if (rc) return HS_ERR(-rc, "progress thread: pthread_create failed: %s", strerror(rc));
    f->thread_on = 1;
    return 0;
}

void hs_fab_stop_thread(fab_t *f)
{
    if (f->thread_on) {
        pthread_mutex_lock(&f->lock);
        f->stop = 1;
        pthread_cond_broadcast(&f->cond);
        pthread_mutex_unlock(&f->lock);
        wake_thread(f);
        pthread_join(f->thread, NULL);
        f->thread_on = 0;
    }
}

/* --- liveness -------------------------------------------------------------------------- */

/* 1 when peer is known to have exited: same host and pid namespace, and its pid is gone or a
 * zombie. Remote peers are judged by their connections (CQ errors) and by timeouts. */
static int peer_dead(fab_t *f, int peer)
{
    const hs_fab_addr_v1_t *me = &f->peers[f->t->rank], *p = &f->peers[peer];
    if (peer == f->t->rank || strcmp(me->host, p->host) || !me->pidns || me->pidns != p->pidns ||
        p->pid == me->pid)
        return 0;
    return hs_pid_gone(p->pid);
}

int hs_fab_peer_gone(hs_transport_t *t, int peer)
{
    fab_t *f = t->impl;
    const hs_fab_addr_v1_t *me = &f->peers[t->rank], *p = &f->peers[peer];
    if (strcmp(me->host, p->host) || !me->pidns || me->pidns != p->pidns)
        return HS_ERR(-ENOSYS, "rank %d: rank %d runs on another host (%s)", t->rank, peer,
                      p->host);
    return peer_dead(f, peer);
}

static void check_liveness_locked(fab_t *f, hs_treq_t **reqs, int n, double now)
{
    int drained = 0;
    for (int i = 0; i < n; i++) {
        hs_treq_t *r = reqs[i];
        if (!r || r->complete) continue;
        int lo = r->peer, hi = r->peer, dead = 0;
        if (r->peer < 0) lo = 0, hi = f->t->size - 1;
        for (int p = lo; p <= hi; p++) {
            if (p == f->t->rank) continue;
            if (now - f->last_alive[p] < LIVENESS_PERIOD_S) continue;
            if (peer_dead(f, p)) {
                /* What it sent before it exited may be here already, unmatched in the
                 * provider (eager messages its close flushed, hs_fab_flush): take that first.
                 * A message's first chunk posts the receives of the others, whose
                 * completions the next pass reads. */
                if (!drained) {
                    drained = 1;
                    for (int k = 0; k < 3; k++) hs_fab_progress_locked(f);
                }
                if (r->complete) break;
                dead++;
                if (r->peer >= 0) {
                    char d[256];
                    describe(f, r, d, sizeof d);
                    hs_fab_req_fail_locked(f, r, -ECONNRESET,
                                           "rank %d: peer rank %d (pid %u on %s) has exited "
                                           "during %s",
                                           f->t->rank, p, f->peers[p].pid, f->peers[p].host, d);
                }
            } else {
                f->last_alive[p] = now;
            }
        }
        if (r->peer < 0 && dead > 0 && dead >= f->t->size - 1)
            hs_fab_req_fail_locked(f, r, -ECONNRESET,
                                   "rank %d: every other rank has exited while receiving from "
                                   "any rank (tag %u)",
                                   f->t->rank, r->tag);
    }
}

/* --- entry points ---------------------------------------------------------------------- */

static int finish_locked(fab_t *f, hs_treq_t **req, hs_tstatus_t *st)
{
    hs_treq_t *r = *req;
    if (st) {
        st->source = r->peer;
        st->tag = r->tag;
        st->len = r->len;
    }
    int rc = 0;
    if (r->err) rc = HS_ERR(r->err, "%s", r->errmsg ? r->errmsg : "transport request failed");
    req_drop_locked(f, r);
    *req = NULL;
    return rc;
}

int hs_fab_isend_any(hs_transport_t *t, int ctrl, int peer, uint32_t tag, const void *buf,
                     size_t len, hs_treq_t **req)
{
    fab_t *f = t->impl;
    pthread_mutex_lock(&f->lock);
    hs_treq_t *r = hs_fab_req_new(f, REQ_SEND, peer, tag);
    if (!r) {
        pthread_mutex_unlock(&f->lock);
        return -ENOMEM;
    }
    r->ctrl = ctrl;
    r->buf = (char *)buf;
    r->cap = len;
    int shaped = hs_shaper_active(f->shaper, peer);
    size_t c = shaped ? hs_shaper_chunk(f->shaper, peer, f->chunk) : f->chunk;
    size_t n = len ? (len + c - 1) / c : 1;
    if (n > HS_FAB_MAX_CHUNKS) {
        c = (len + HS_FAB_MAX_CHUNKS - 1) / HS_FAB_MAX_CHUNKS;
        n = (len + c - 1) / c;
    }
    if (n > 1) {
        r->ops = hs_calloc(n - 1, sizeof *r->ops, "send chunks");
        if (!r->ops) {
            hs_fab_req_release_locked(f, r);
            pthread_mutex_unlock(&f->lock);
            return -ENOMEM;
        }
    }
    r->nchunks = (unsigned)n;
    if (f->sent_to && !ctrl) f->sent_to[peer] = 1; /* the close flushes messages, not control */
    unsigned seq = f->seq_to[peer]++;
    double now = hs_now(), first_release = 0;
    for (unsigned k = 0; k < n; k++) {
        fab_op_t *op = req_op(r, k);
        size_t off = (size_t)k * c;
        op->req = r;
        op->kind = OP_SEND;
        op->peer = peer;
        op->chunk = k;
        op->buf = (char *)buf + off;
        op->len = HS_MIN(c, len - off);
        op->tag = hs_fab_tag(ctrl, k == 0, t->rank, k == 0 ? (unsigned)n : k, seq, tag);
        op->data = (k == 0 && n > 1 && f->use_cq_data) ? (uint64_t)len : 0;
        op->release = shaped ? hs_shaper_release(f->shaper, peer, op->len, now) : 0;
        if (k == 0) first_release = op->release;
        hs_fab_enqueue_locked(f, op);
    }
    post_due_locked(f);
    *req = r;
    pthread_mutex_unlock(&f->lock);
    if (shaped && first_release > now) wake_thread(f);
    return 0;
}

int hs_fab_irecv_any(hs_transport_t *t, int ctrl, int peer, uint32_t tag, int any_tag, void *buf,
                     size_t cap, hs_treq_t **req)
{
    fab_t *f = t->impl;
    pthread_mutex_lock(&f->lock);
    hs_treq_t *r = hs_fab_req_new(f, REQ_RECV, peer, tag);
    if (!r) {
        pthread_mutex_unlock(&f->lock);
        return -ENOMEM;
    }
    r->ctrl = ctrl;
    r->buf = buf;
    r->cap = cap;
    r->nchunks = 1;
    fab_op_t *op = &r->op0;
    op->kind = OP_RECV;
    op->peer = peer;
    op->tag = hs_fab_tag(ctrl, 1, peer >= 0 ? peer : 0, 0, 0, tag);
    op->ignore = HS_FAB_TAG_CHUNK_MASK | HS_FAB_TAG_SEQ_MASK |
                 (peer < 0 ? HS_FAB_TAG_SRC_MASK : 0) | (any_tag ? HS_FAB_TAG_USER_MASK : 0);
    op->buf = buf;
    op->len = cap;
    hs_fab_enqueue_locked(f, op);
    post_due_locked(f);
    *req = r;
    pthread_mutex_unlock(&f->lock);
    return 0;
}

int hs_fab_isend(hs_transport_t *t, int peer, uint32_t tag, const void *buf, size_t len,
                 hs_treq_t **req)
{
    return hs_fab_isend_any(t, 0, peer, tag, buf, len, req);
}

int hs_fab_irecv(hs_transport_t *t, int peer, uint32_t tag, void *buf, size_t cap, hs_treq_t **req)
{
    return hs_fab_irecv_any(t, 0, peer, tag, 0, buf, cap, req);
}

int hs_fab_test(hs_transport_t *t, hs_treq_t **req, int *done, hs_tstatus_t *st)
{
    fab_t *f = t->impl;
    pthread_mutex_lock(&f->lock);
    int rc = hs_fab_progress_locked(f);
    *done = 0;
    if (rc >= 0) {
        rc = 0;
        if ((*req)->complete) {
            *done = 1;
            rc = finish_locked(f, req, st);
        }
    }
    pthread_mutex_unlock(&f->lock);
    return rc;
}

int hs_fab_progress(hs_transport_t *t)
{
    fab_t *f = t->impl;
    pthread_mutex_lock(&f->lock);
    int rc = hs_fab_progress_locked(f);
    pthread_mutex_unlock(&f->lock);
    return rc;
}

static int timeout_error(fab_t *f, hs_treq_t **reqs, int n, double waited)
{
    char msg[HS_ERRMSG_MAX] = "";
    size_t used = 0;
    int shown = 0;
    for (int i = 0; i < n && shown < 3; i++) {
        if (!reqs[i]) continue;
        char d[256];
        describe(f, reqs[i], d, sizeof d);
        used += (size_t)snprintf(msg + used, sizeof msg - HS_MIN(used, sizeof msg - 1), "%s%s",
                                 shown ? "; " : "", d);
        shown++;
    }
    return HS_ERR(-ETIMEDOUT,
                  "rank %d: %s not complete after %.1f s (peer slow, hung or dead; raise "
                  "HS_TIMEOUT if it is just slow)",
                  f->t->rank, msg, waited);
}

int hs_fab_waitany(hs_transport_t *t, hs_treq_t **reqs, int n, double timeout_s, int *index,
                   hs_tstatus_t *st)
{
    fab_t *f = t->impl;
    double start = hs_now(), deadline = start + timeout_s, backoff = 50e-6;
    *index = -1;
    pthread_mutex_lock(&f->lock);
    for (;;) {
        int rc = hs_fab_progress_locked(f);
        if (rc < 0) {
            pthread_mutex_unlock(&f->lock);
            return rc;
        }
        if (rc > 0) backoff = 50e-6;
        int active = 0;
        for (int i = 0; i < n; i++) {
            if (!reqs[i]) continue;
            active++;
            if (reqs[i]->complete) {
                *index = i;
                rc = finish_locked(f, &reqs[i], st);
                pthread_mutex_unlock(&f->lock);
                return rc;
            }
        }
        double now = hs_now();
        if (!active || timeout_s <= 0) break;
        check_liveness_locked(f, reqs, n, now);
        int failed = 0;
        for (int i = 0; i < n; i++) failed |= reqs[i] && reqs[i]->complete;
        if (failed) continue;
        if (now >= deadline) {
            rc = timeout_error(f, reqs, n, now - start);
            pthread_mutex_unlock(&f->lock);
            return rc;
        }
        double until = next_timer(f, HS_MIN(deadline, now + BLOCK_MAX_S));
        if (f->thread_on) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            double dt = until - now, sec = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec + dt;
            ts.tv_sec = (time_t)sec;
            ts.tv_nsec = (long)((sec - (double)ts.tv_sec) * 1e9);
            pthread_cond_timedwait(&f->cond, &f->lock, &ts);
        } else {
            block_locked(f, until, &backoff);
        }
    }
    pthread_mutex_unlock(&f->lock);
    return 0;
}

int hs_fab_probe(hs_transport_t *t, int peer, uint32_t tag, int any_tag, int *found,
                 hs_tstatus_t *st)
{
    fab_t *f = t->impl;
    *found = 0;
    /* libfabric 1.17's shm loses the message a FI_PEEK looked at: no probe there. */
    if (!strcmp(f->prov, "shm"))
        return HS_ERR(-ENOSYS,
                      "rank %d: libfabric provider shm cannot probe safely (FI_PEEK loses "
                      "messages in this version); pre-post receives from HS_ANY_SOURCE and poll "
                      "them with hs_transport_waitany(timeout 0)",
                      t->rank);
    peek_t *pk = hs_calloc(1, sizeof *pk, "probe");
    if (!pk) return -ENOMEM;
    pk->op.kind = OP_PEEK;
    struct fi_msg_tagged m;
    memset(&m, 0, sizeof m);
    m.addr = FI_ADDR_UNSPEC;
    m.tag = hs_fab_tag(0, 1, peer >= 0 ? peer : 0, 0, 0, tag);
    m.ignore = HS_FAB_TAG_CHUNK_MASK | HS_FAB_TAG_SEQ_MASK | (peer < 0 ? HS_FAB_TAG_SRC_MASK : 0) |
               (any_tag ? HS_FAB_TAG_USER_MASK : 0);
    m.context = &pk->op.fctx;
    pthread_mutex_lock(&f->lock);
    int rc = hs_fab_progress_locked(f);
    if (rc < 0) goto out_free;
    ssize_t ret = fi_trecvmsg(f->ep, &m, FI_PEEK | FI_COMPLETION);
    if (ret == -FI_ENOSYS || ret == -FI_EOPNOTSUPP) {
        rc = HS_ERR(-ENOSYS, "rank %d: libfabric provider %s cannot probe (FI_PEEK)", t->rank,
                    f->prov);
        goto out_free;
    }
    if (ret) {
        rc = hs_fab_err(f, (int)ret, "fi_trecvmsg(FI_PEEK)", peer, NULL);
        goto out_free;
    }
    /* Providers answer a peek at once (from their unexpected queue); allow a few drains. */
    for (int i = 0; i < 64 && !pk->done; i++) {
        rc = hs_fab_progress_locked(f);
        if (rc < 0) break;
    }
    rc = rc < 0 ? rc : 0;
    if (!pk->done) {
        pk->abandoned = 1; /* freed when the provider finally answers */
        pthread_mutex_unlock(&f->lock);
        return rc;
    }
    if (pk->found) {
        *found = 1;
        if (st) {
            st->source = hs_fab_tag_src(pk->tag);
            st->tag = (uint32_t)(pk->tag & HS_FAB_TAG_USER_MASK);
            unsigned nch = hs_fab_tag_chunk(pk->tag);
            st->len = (pk->flags & FI_REMOTE_CQ_DATA) ? (size_t)pk->data
                      : nch > 1                       ? (size_t)nch * pk->len /* bound */
                                                      : pk->len;
        }
    }
out_free:
    free(pk);
    pthread_mutex_unlock(&f->lock);
    return rc;
}

void hs_fab_req_free(hs_transport_t *t, hs_treq_t **req)
{
    fab_t *f = t->impl;
    pthread_mutex_lock(&f->lock);
    req_drop_locked(f, *req);
    *req = NULL;
    pthread_mutex_unlock(&f->lock);
}

static int ctrl_isend(hs_transport_t *t, int peer, uint32_t tag, const void *buf, size_t len,
                      hs_treq_t **req)
{
    return hs_fab_isend_any(t, 1, peer, tag, buf, len, req);
}

static int ctrl_irecv(hs_transport_t *t, int peer, uint32_t tag, void *buf, size_t cap,
                      hs_treq_t **req)
{
    return hs_fab_irecv_any(t, 1, peer, tag, 0, buf, cap, req);
}

int hs_fab_barrier(hs_transport_t *t)
{
    return hs_transport_ctrl_barrier(t, HS_FAB_CTRL_BARRIER, ctrl_isend, ctrl_irecv);
}

/* --- the close's flush --------------------------------------------------------------------- */

/* ofi_rxm completes a send once the provider has it (eager, up to FI_OFI_RXM_EAGER_LIMIT: a
 * whole chunk over tcp, hs_fab_rxm_eager_default), not once the peer has: a process that closed
 * its endpoint or exited right after would lose what was still in its buffers, and a socket
 * closed with unread data is reset, dropping what it had queued. So every rank keeps a receive
 * of FINs posted, answered by the progress path, and the close waits for the answers. */
int hs_fab_fin_start(fab_t *f)
{
    if (!strstr(f->prov, "ofi_rxm")) return 0;
    if (!(f->sent_to = hs_calloc((size_t)f->t->size, 1, "flush table")) ||
        !(f->fin_from = hs_calloc((size_t)f->t->size, 1, "flush table")))
        return -ENOMEM;
    return hs_fab_irecv_any(f->t, 1, -1, HS_FAB_CTRL_FIN, 0, f->fin_buf, sizeof f->fin_buf,
                            &f->fin_rx);
}

int hs_fab_flush(fab_t *f, double timeout_s)
{
    hs_transport_t *t = f->t;
    int n = t->size, want = 0;
    hs_treq_t **rq = calloc(2 * (size_t)n, sizeof *rq);
    if (!rq) return 0;
    char sink[8];
    for (int p = 0; p < n; p++) {
        pthread_mutex_lock(&f->lock);
        int sent = f->sent_to[p] && p != t->rank;
        pthread_mutex_unlock(&f->lock);
        if (!sent) continue;
        if (hs_fab_irecv_any(t, 1, p, HS_FAB_CTRL_FINACK, 0, sink, sizeof sink, &rq[2 * p]) < 0)
            continue;
        if (hs_fab_isend_any(t, 1, p, HS_FAB_CTRL_FIN, f->fin_buf, 0, &rq[2 * p + 1]) < 0) {
            hs_fab_req_free(t, &rq[2 * p]);
            continue;
        }
        want++;
    }
    /* A FINACK ends the wait for that rank; so does the rank gone (exited: the liveness
     * check; closed: the FIN fails), and its own FIN: a rank that closes takes nothing more
     * (and two ranks closing at once, each past the other's last progress, would otherwise
     * wait for answers that never come). A FIN that went is not waited for by itself. */
    double deadline = hs_now() + timeout_s;
    int late = 0;
    while (want > 0) {
        double now = hs_now();
        if (now >= deadline) {
            for (int p = 0; p < n; p++) late += rq[2 * p] != NULL;
            break;
        }
        for (int p = 0; p < n; p++) {
            if (!rq[2 * p]) continue;
            pthread_mutex_lock(&f->lock);
            int closing = f->fin_from[p];
            pthread_mutex_unlock(&f->lock);
            if (!closing) continue;
            hs_fab_req_free(t, &rq[2 * p]);
            if (rq[2 * p + 1]) hs_fab_req_free(t, &rq[2 * p + 1]);
            want--;
        }
        if (want == 0) break;
        int idx = -1;
        int rc = hs_fab_waitany(t, rq, 2 * n, HS_MIN(0.05, deadline - now), &idx, NULL);
        if (idx < 0) {
            if (rc == -ETIMEDOUT) continue; /* (a slice: look at the FINs that came) */
            for (int p = 0; p < n; p++) late += rq[2 * p] != NULL; /* the CQ failed */
            break;
        }
        int p = idx / 2;
        if (idx % 2 == 0 || rc < 0) { /* acknowledged, or this peer cannot be reached */
            if (rq[2 * p]) hs_fab_req_free(t, &rq[2 * p]);
            if (rq[2 * p + 1]) hs_fab_req_free(t, &rq[2 * p + 1]);
            want--;
        }
    }
    for (int i = 0; i < 2 * n; i++)
        if (rq[i]) hs_fab_req_free(t, &rq[i]);
    free(rq);
    return late;
}
