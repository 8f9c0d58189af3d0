/*
 * gossip/shm.c — "hsshm", Hearsay's own shared-memory transport backend for ranks that share
 * a host. The layout is in gossip/shm_wire.h: each rank owns a segment with one inbound
 * single-producer single-consumer ring per sender; a send copies its chunks into the
 * receiver's ring (and is complete once the last one is there: an eager protocol, so a
 * receiver that is busy computing never stalls its senders until the ring is full); the
 * receiver copies them out into the posted receive, or into an unexpected-message buffer
 * when none is posted yet, so nothing that arrives early is ever lost.
 *
 * Why a backend of our own: libfabric 1.17's shm provider (Debian 12) loses messages that
 * arrive before their receive is posted, and its two-copy path without CMA crawls when
 * ranks outnumber cores. Here both copies overlap (sender and receiver copy different
 * chunks at once) and a waiting rank sleeps on a futex, never spinning.
 *
 * Waiting: every thread of a rank that blocks waits on the rank's own doorbell (a futex
 * word in its segment); see shm_wire.h for who rings it. Link shaping delays the chunks of a
 * shaped link until their release time, exactly as the libfabric backend does.
 * Windows: put and get copy straight between the processes (process_vm_writev / readv, one
 * copy); there are no remote atomics (-ENOSYS: the EASGD center then uses its service
 * thread).
 *
 * Locking: one mutex (shm_t.lock) guards the queues and requests; the rings themselves are
 * lock-free between processes.
 */
#include "gossip/shm_wire.h"
#include "gossip/transport_impl.h"
#include "hearsay/common.h"
#include "hearsay/shaping.h"
#include "hearsay/transport.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_CHUNK (256u << 10) /* measured: 256 KiB chunks keep both copies in cache */
/* Messages from 1 MiB on go by address (one copy, by the receiver) when ranks outnumber
 * cores. Measured (docs/benchmarks.md): the eager path's two copies overlap on two cores and
 * stream 5.2 GB/s at 16 MiB where process_vm_readv copies 2.8-3.4 GB/s, but they cost more
 * CPU in all: 4 ranks on 2 cores ran a gossip exchange 11-15 % faster by address. */
#define DEFAULT_RDV       (1u << 20)
#define RING_MAX          (4u << 20)
#define RING_MIN          (256u << 10)
#define RING_BUDGET       (2ull << 30) /* all rings of all ranks together, at most */
#define LIVENESS_PERIOD_S 0.2
#define BLOCK_MAX_S       0.1
#define SEG_HDR_BYTES     256u
#define RING_HDR_BYTES    sizeof(hs_shm_ring_hdr_t)
_Static_assert(sizeof(hs_shm_seg_hdr_t) <= SEG_HDR_BYTES, "segment header");
_Static_assert(sizeof(hs_shm_ring_hdr_t) % HS_SHM_ALIGN == 0, "ring header");

enum req_kind { REQ_SEND, REQ_RECV, REQ_RMA };

struct hs_treq {
    enum req_kind kind;
    int ctrl, any_tag;
    int peer;     /* destination / source (-1: any, until the first record) / target */
    uint32_t tag; /* user tag (any-tag receives learn it from the first record) */
    char *buf;
    size_t cap;   /* receive capacity / send length */
    size_t len;   /* message length (receives: from the first record) */
    size_t done;  /* bytes written into the ring (sends) or received */
    int bound;    /* receives: the source's message in progress lands here */
    int complete; /* 1 once done or failed */
    int err;
    char *errmsg;
    int orphan;    /* freed by the user while bound / queued: completes silently */
    char *own;     /* sends freed mid-message: our copy of the rest of the buffer */
    double *rel;   /* shaped sends: release time of each chunk */
    size_t nchunk; /* shaped sends: chunks, chunk size */
    size_t csize;
    unsigned seq;
    int rdv;                     /* send by RTS: the receiver copies from buf itself */
    struct hs_treq *prev, *next; /* posted receives / a peer's send queue */
};

/* A message that arrived before its receive (whole or in part). */
typedef struct ux {
    int src, ctrl;
    uint32_t tag;
    size_t len, got;
    char *buf;
    struct ux *prev, *next;
} ux_t;

typedef struct peer {
    hs_shm_addr_v1_t addr;
    hs_shm_seg_hdr_t *seg; /* its segment, mapped (NULL for self) */
    size_t seg_bytes;
    hs_shm_ring_hdr_t *out; /* my ring in its segment (I produce) */
    char *out_data;
    hs_shm_ring_hdr_t *in; /* its ring in my segment (I consume) */
    char *in_data;
    struct hs_treq sendq; /* sentinel: sends to this peer, FIFO */
    struct hs_treq rdvq;  /* sentinel: RTS sends written, waiting for the peer to copy them */
    uint64_t rdv_acked;   /* RTS sends of ours the peer finished (mirrors out->rdv_done) */
    unsigned seq_out;
    /* the message from this peer in progress: a bound receive, an unexpected buffer or
     * neither (the rest is dropped: the receive was freed or too small) */
    struct hs_treq *cur_req;
    ux_t *cur_ux;
    double last_alive;
    int dead;
} peer_t;

typedef struct shm {
    hs_transport_t *t;
    char name[HS_SHM_NAME_MAX];
    hs_shm_seg_hdr_t *seg; /* mine */
    size_t seg_bytes, ring_bytes, chunk;
    size_t rdv_bytes; /* messages at least this long go by RTS where possible (0: never) */
    int unlinked;
    peer_t *peers;         /* (size) */
    struct hs_treq posted; /* sentinel: posted receives, in posting order */
    ux_t uxq;              /* sentinel: unexpected messages, in arrival order */
    hs_shape_t *shape;
    hs_shaper_t *shaper;
    pthread_mutex_t lock;
    pthread_t thread;
    int thread_on;
    _Atomic int stop;
    unsigned win_seq;
    uint64_t probe_word; /* HS_SHM_PROBE_MAGIC: peers read it to check process_vm_readv */
    int peer_read_ok;    /* 1: every peer's probe word could be read */
} shm_t;

struct hs_twin {
    size_t len;
    hs_shm_win_v1_t *remote; /* (size) */
};

/* --- small helpers ---------------------------------------------------------------------- */

static size_t align_up(size_t n, size_t a)
{
    return (n + a - 1) / a * a;
}

static hs_shm_ring_hdr_t *ring_of(hs_shm_seg_hdr_t *seg, size_t ring_bytes, int sender)
{
    return (hs_shm_ring_hdr_t *)((char *)seg + SEG_HDR_BYTES +
                                 (size_t)sender * (RING_HDR_BYTES + ring_bytes));
}

static long futex(_Atomic uint32_t *w, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, (uint32_t *)w, op, val, ts, NULL, 0);
}

/* Tell the owner of seg there is news; wake its sleepers if it has any. */
static void ring_bell(hs_shm_seg_hdr_t *seg)
{
    atomic_fetch_add(&seg->doorbell, 1);
    if (atomic_load(&seg->sleepers) > 0) futex(&seg->doorbell, FUTEX_WAKE, INT_MAX, NULL);
}

/* Sleep on my doorbell until it moves from `seen` or until `until` (hs_now() time). */
static void sleep_bell(shm_t *s, uint32_t seen, double until)
{
    double dt = until - hs_now();
    if (dt <= 0) return;
    struct timespec ts = {.tv_sec = (time_t)dt, .tv_nsec = (long)((dt - (double)(time_t)dt) * 1e9)};
    atomic_fetch_add(&s->seg->sleepers, 1);
    if (atomic_load(&s->seg->doorbell) == seen) futex(&s->seg->doorbell, FUTEX_WAIT, seen, &ts);
    atomic_fetch_sub(&s->seg->sleepers, 1);
}

static void req_fail_locked(shm_t *s, struct hs_treq *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void req_fail_locked(shm_t *s, struct hs_treq *r, int code, const char *fmt, ...)
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

static void list_unlink(struct hs_treq *r)
{
    if (!r->prev) return;
    r->prev->next = r->next;
    r->next->prev = r->prev;
    r->prev = r->next = NULL;
}

static void list_append(struct hs_treq *head, struct hs_treq *r)
{
    r->prev = head->prev;
    r->next = head;
    head->prev->next = r;
    head->prev = r;
}

static void req_destroy(struct hs_treq *r)
{
    free(r->errmsg);
    free(r->own);
    free(r->rel);
    free(r);
}

/* A new unexpected message of len bytes (nothing arrived yet) at the end of the queue, or
 * NULL when out of memory. */
static ux_t *ux_new_locked(shm_t *s, int src, int ctrl, uint32_t tag, size_t len)
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

static void ux_unlink_free(ux_t *u)
{
    u->prev->next = u->next;
    u->next->prev = u->prev;
    free(u->buf);
    free(u);
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
static int push_peer_locked(shm_t *s, int p, double now, double *next_release)
{
    peer_t *pe = &s->peers[p];
    hs_shm_ring_hdr_t *ring = pe->out;
    int moved = 0;
    /* RTS sends the peer has copied (in the order they were written) are complete. */
    uint64_t acked = atomic_load_explicit(&ring->rdv_done, memory_order_acquire);
    while (pe->rdv_acked < acked && pe->rdvq.next != &pe->rdvq) {
        struct hs_treq *r = pe->rdvq.next;
        list_unlink(r);
        pe->rdv_acked++;
        moved = 1;
        if (r->orphan)
            req_destroy(r);
        else
            r->complete = 1;
    }
    while (pe->dead && pe->rdvq.next != &pe->rdvq) {
        struct hs_treq *r = pe->rdvq.next;
        list_unlink(r);
        req_fail_locked(s, r, -ECONNRESET,
                        "rank %d: send of %zu bytes to rank %d (tag %u): rank %d (pid %u) exited "
                        "before reading it",
                        s->t->rank, r->cap, p, r->tag, p, pe->addr.pid);
        if (r->orphan) req_destroy(r);
        moved = 1;
    }
    while (pe->sendq.next != &pe->sendq) {
        struct hs_treq *r = pe->sendq.next;
        if (pe->dead) {
            req_fail_locked(
                s, r, -ECONNRESET,
                "rank %d: send of %zu bytes to rank %d (tag %u): rank %d (pid %u) has exited",
                s->t->rank, r->cap, p, r->tag, p, pe->addr.pid);
            list_unlink(r);
            if (r->orphan) req_destroy(r);
            moved = 1;
            continue;
        }
        if (r->rdv) { /* one RTS record: the address; the peer copies the data itself */
            size_t need = HS_SHM_REC_HDR + HS_SHM_ALIGN;
            uint64_t tail;
            size_t pos;
            if (!reserve_locked(s, pe, need, &tail, &pos)) return moved;
            hs_shm_rec_t *rec = (hs_shm_rec_t *)(pe->out_data + pos);
            rec->kind = HS_SHM_REC_RTS;
            rec->tag = r->tag;
            rec->msg_len = r->cap;
            rec->off = 0;
            rec->len = sizeof(uint64_t);
            rec->seq = r->seq;
            uint64_t addr = (uint64_t)(uintptr_t)r->buf;
            memcpy((char *)rec + HS_SHM_REC_HDR, &addr, sizeof addr);
            atomic_store_explicit(&ring->tail, tail + need, memory_order_release);
            ring_bell(pe->seg);
            r->done = r->cap;
            list_unlink(r);
            list_append(&pe->rdvq, r);
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
            size_t need = HS_SHM_REC_HDR + align_up(n, HS_SHM_ALIGN);
            uint64_t tail;
            size_t pos;
            if (!reserve_locked(s, pe, need, &tail, &pos)) return moved;
            hs_shm_rec_t *rec = (hs_shm_rec_t *)(pe->out_data + pos);
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
            ring_bell(pe->seg);
        } while (r->done < r->cap);
        list_unlink(r);
        if (r->orphan)
            req_destroy(r);
        else
            r->complete = 1;
    }
    return moved;
}

/* --- progress: the receiving side -------------------------------------------------------- */

static int matches(const struct hs_treq *r, int src, int ctrl, uint32_t tag)
{
    return r->ctrl == ctrl && (r->peer < 0 || r->peer == src) && (r->any_tag || r->tag == tag);
}

/* Fail receive r, bound to a message (r->peer, r->tag, r->len) longer than its buffer. */
static void fail_too_big_locked(shm_t *s, struct hs_treq *r)
{
    req_fail_locked(s, r, -EMSGSIZE,
                    "rank %d: a message of %zu bytes from rank %d (tag %u) is larger than the "
                    "receive buffer of %zu bytes",
                    s->t->rank, r->len, r->peer, r->tag, r->cap);
}

static void bind_recv_locked(shm_t *s, struct hs_treq *r, int src, uint32_t tag, size_t len)
{
    peer_t *pe = &s->peers[src];
    list_unlink(r);
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
static void take_rts_locked(shm_t *s, int p, const hs_shm_rec_t *rec)
{
    peer_t *pe = &s->peers[p];
    uint64_t addr;
    memcpy(&addr, (const char *)rec + HS_SHM_REC_HDR, sizeof addr);
    size_t len = (size_t)rec->msg_len;
    char *dst = pe->cur_req ? pe->cur_req->buf : pe->cur_ux ? pe->cur_ux->buf : NULL;
    int rc = dst && len ? cma_read((pid_t)pe->addr.pid, addr, dst, len) : 0;
    if (pe->cur_req) {
        struct hs_treq *r = pe->cur_req;
        pe->cur_req = NULL;
        r->bound = 0;
        if (rc < 0) {
            req_fail_locked(s, r, rc == -ESRCH ? -ECONNRESET : rc,
                            "rank %d: receive from rank %d (tag %u): reading its %zu bytes "
                            "(process_vm_readv) failed: %s",
                            s->t->rank, p, r->tag, len, strerror(-rc));
        } else {
            r->done = len;
            if (r->orphan)
                req_destroy(r);
            else
                r->complete = 1;
        }
    } else if (pe->cur_ux) {
        ux_t *u = pe->cur_ux;
        pe->cur_ux = NULL;
        if (rc < 0) { /* the sender is gone or broken: its message is lost, say so */
            HS_WARN("rank %d: dropped a message of %zu bytes from rank %d (tag %u): reading it "
                    "failed: %s",
                    s->t->rank, len, p, u->tag, strerror(-rc));
            ux_unlink_free(u);
        } else {
            u->got = len;
        }
    }
    atomic_fetch_add(&pe->in->rdv_done, 1);
    ring_bell(pe->seg);
}

/* Consume the records of peer p's ring. Returns 1 when something moved. */
static int pull_peer_locked(shm_t *s, int p)
{
    peer_t *pe = &s->peers[p];
    hs_shm_ring_hdr_t *ring = pe->in;
    const size_t cap = s->ring_bytes;
    uint64_t head = atomic_load_explicit(&ring->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&ring->tail, memory_order_acquire);
    if (head == tail) return 0;
    while (head != tail) {
        size_t pos = (size_t)(head % cap);
        const hs_shm_rec_t *rec = (const hs_shm_rec_t *)(pe->in_data + pos);
        if ((rec->kind & 0xFF) == HS_SHM_REC_PAD) {
            head += cap - pos;
            continue;
        }
        int ctrl = !!(rec->kind & HS_SHM_REC_CTRL);
        size_t n = rec->len, off = (size_t)rec->off, len = (size_t)rec->msg_len;
        if (off == 0) { /* first record: match it */
            pe->cur_req = NULL;
            pe->cur_ux = NULL;
            struct hs_treq *r = s->posted.next;
            while (r != &s->posted && !matches(r, p, ctrl, rec->tag)) r = r->next;
            if (r != &s->posted) {
                bind_recv_locked(s, r, p, rec->tag, len);
            } else {
                ux_t *u = ux_new_locked(s, p, ctrl, rec->tag, len);
                if (!u) return -1; /* try again later; the ring keeps the data */
                pe->cur_ux = u;
            }
        }
        const char *data = (const char *)rec + HS_SHM_REC_HDR;
        if ((rec->kind & 0xFF) == HS_SHM_REC_RTS) {
            take_rts_locked(s, p, rec);
        } else if (pe->cur_req) {
            struct hs_treq *r = pe->cur_req;
            if (n) memcpy(r->buf + off, data, n);
            r->done += n;
            if (r->done >= r->len) {
                pe->cur_req = NULL;
                r->bound = 0;
                if (r->orphan)
                    req_destroy(r);
                else
                    r->complete = 1;
            }
        } else if (pe->cur_ux) {
            if (n) memcpy(pe->cur_ux->buf + off, data, n);
            pe->cur_ux->got += n;
            if (pe->cur_ux->got >= pe->cur_ux->len) pe->cur_ux = NULL;
        }
        head += HS_SHM_REC_HDR + align_up(n, HS_SHM_ALIGN);
        /* seq_cst: pairs with the producer's store of producer_waiting then load of head */
        atomic_store(&ring->head, head);
        if (atomic_load(&ring->producer_waiting) && atomic_exchange(&ring->producer_waiting, 0))
            ring_bell(pe->seg);
        tail = atomic_load_explicit(&ring->tail, memory_order_acquire);
    }
    return 1;
}

/* One pass over every peer. Returns > 0 when something moved, 0 when not. */
static int progress_locked(shm_t *s, double *next_release)
{
    double now = hs_now();
    *next_release = now + 3600;
    int moved = 0;
    for (int p = 0; p < s->t->size; p++) {
        if (p == s->t->rank || !s->peers[p].seg) continue;
        if (pull_peer_locked(s, p) > 0) moved = 1;
        if (push_peer_locked(s, p, now, next_release) > 0) moved = 1;
    }
    if (!s->unlinked && atomic_load(&s->seg->mapped) >= (uint32_t)(s->t->size - 1)) {
        shm_unlink(s->name); /* every peer has it: the name is no longer needed */
        s->unlinked = 1;
    }
    /* Another thread of this rank may be waiting on something this pass completed. */
    if (moved && atomic_load(&s->seg->sleepers) > 0) ring_bell(s->seg);
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
    progress_locked(s, &nr);
    for (int i = 0; i < n; i++) {
        struct hs_treq *r = reqs[i];
        if (!r || r->complete) continue;
        if (r->kind == REQ_SEND) continue; /* failed by push_peer_locked */
        if (r->peer >= 0 && s->peers[r->peer].dead) {
            if (r->bound) s->peers[r->peer].cur_req = NULL;
            list_unlink(r);
            req_fail_locked(s, r, -ECONNRESET,
                            "rank %d: %s from rank %d (tag %u, %zu of %zu bytes received): "
                            "rank %d (pid %u) has exited",
                            s->t->rank, kind_name(r), r->peer, r->tag, r->done,
                            r->bound ? r->len : (size_t)0, r->peer, s->peers[r->peer].addr.pid);
        } else if (r->peer < 0) {
            int dead = 0;
            for (int p = 0; p < s->t->size; p++) dead += s->peers[p].dead;
            if (dead >= s->t->size - 1) {
                list_unlink(r);
                req_fail_locked(s, r, -ECONNRESET,
                                "rank %d: every other rank has exited while receiving from any "
                                "rank (tag %u)",
                                s->t->rank, r->tag);
            }
        }
    }
    return 1;
}

/* --- set-up ------------------------------------------------------------------------------ */

static void *progress_thread(void *arg)
{
    shm_t *s = arg;
    while (!atomic_load(&s->stop)) {
        uint32_t seen = atomic_load(&s->seg->doorbell);
        double nr;
        pthread_mutex_lock(&s->lock);
        int moved = progress_locked(s, &nr);
        pthread_mutex_unlock(&s->lock);
        if (!moved) sleep_bell(s, seen, HS_MIN(nr, hs_now() + BLOCK_MAX_S));
    }
    return NULL;
}

static int shm_create(hs_transport_t *t, const hs_transport_opts_t *o, int all_local)
{
    if (!all_local && t->size > 1)
        return HS_ERR(-EINVAL,
                      "rank %d: provider hsshm (shared memory) needs every rank on one host; "
                      "these ranks span several hosts: use --provider tcp (or auto)",
                      t->rank);
    shm_t *s = hs_calloc(1, sizeof *s, "shared-memory transport");
    if (!s) return -ENOMEM;
    t->impl = s;
    s->t = t;
    pthread_mutex_init(&s->lock, NULL);
    s->posted.next = s->posted.prev = &s->posted;
    s->uxq.next = s->uxq.prev = &s->uxq;
    int n = t->size;
    uint64_t per = n > 1 ? RING_BUDGET / ((uint64_t)n * (uint64_t)(n - 1)) : RING_MAX;
    size_t ring = (size_t)HS_MIN((uint64_t)RING_MAX, HS_MAX((uint64_t)RING_MIN, per));
    const char *v = getenv("HS_SHM_RING_BYTES");
    if (v && *v) {
        long b;
        HS_TRY(hs_parse_long(v, 65536, 1L << 30, "HS_SHM_RING_BYTES", &b));
        ring = (size_t)b;
    }
    s->ring_bytes = align_up(ring, HS_SHM_ALIGN);
    s->chunk = o->chunk_bytes ? o->chunk_bytes : DEFAULT_CHUNK;
    /* A record must fit in a quarter of the ring so that sender and receiver overlap. */
    s->chunk = HS_MIN(s->chunk, s->ring_bytes / 4 - HS_SHM_REC_HDR);
    s->chunk = s->chunk / HS_SHM_ALIGN * HS_SHM_ALIGN;
    s->peers = hs_calloc((size_t)n, sizeof *s->peers, "shared-memory peers");
    if (!s->peers) return -ENOMEM;
    for (int p = 0; p < n; p++) {
        peer_t *pe = &s->peers[p];
        pe->sendq.next = pe->sendq.prev = &pe->sendq;
        pe->rdvq.next = pe->rdvq.prev = &pe->rdvq;
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    s->rdv_bytes = cores > 0 && n > cores ? DEFAULT_RDV : 0;
    if ((v = getenv("HS_SHM_RDV_BYTES")) && *v) {
        long b;
        HS_TRY(hs_parse_long(v, 0, 1L << 40, "HS_SHM_RDV_BYTES (0: never)", &b));
        s->rdv_bytes = (size_t)b;
    }
    HS_TRY(hs_shape_parse(o->shaping, &s->shape));

    uint64_t rnd = ((uint64_t)getpid() << 32) ^ (uint64_t)(hs_now() * 1e9);
    int fd = -1;
    for (int attempt = 0; attempt < 8 && fd < 0; attempt++) {
        rnd = rnd * 6364136223846793005ull + 1442695040888963407ull;
        snprintf(s->name, sizeof s->name, "/hearsay-%u-%d-%08x", (unsigned)getpid(), t->rank,
                 (unsigned)(rnd >> 32));
        fd = shm_open(s->name, O_RDWR | O_CREAT | O_EXCL, 0600);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0)
        return HS_ERR(-errno, "rank %d: shm_open(%s) failed: %s (is /dev/shm mounted?)", t->rank,
                      s->name, strerror(errno));
    s->seg_bytes = SEG_HDR_BYTES + (size_t)n * (RING_HDR_BYTES + s->ring_bytes);
    if (ftruncate(fd, (off_t)s->seg_bytes) < 0) {
        int e = errno;
        close(fd);
        shm_unlink(s->name);
        return HS_ERR(-e, "rank %d: sizing shared-memory segment %s to %zu bytes: %s", t->rank,
                      s->name, s->seg_bytes, strerror(e));
    }
    void *m = mmap(NULL, s->seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (m == MAP_FAILED) {
        shm_unlink(s->name);
        return HS_ERR(-e, "rank %d: mmap of shared-memory segment %s (%zu bytes): %s", t->rank,
                      s->name, s->seg_bytes, strerror(e));
    }
    s->seg = m;
    s->seg->magic = HS_SHM_SEG_MAGIC;
    s->seg->version = HS_SHM_WIRE_VERSION;
    s->seg->owner = (uint32_t)t->rank;
    s->seg->size = (uint32_t)n;
    s->seg->ring_bytes = s->ring_bytes;
    s->seg->seg_bytes = s->seg_bytes;
    /* Let peers read and write windows with process_vm_readv/writev where Yama restricts
     * ptrace to descendants (no effect elsewhere). */
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    HS_DEBUG("rank %d: shared-memory transport, segment %s, %zu-byte rings, %zu-byte chunks",
             t->rank, s->name, s->ring_bytes, s->chunk);
    return 0;
}

static int shm_address(hs_transport_t *t, void *buf, size_t *len)
{
    shm_t *s = t->impl;
    hs_shm_addr_v1_t a;
    memset(&a, 0, sizeof a);
    a.magic = HS_SHM_ADDR_MAGIC;
    a.version = HS_SHM_WIRE_VERSION;
    a.rank = (uint32_t)t->rank;
    a.pid = (uint32_t)getpid();
    struct stat ns;
    if (stat("/proc/self/ns/pid", &ns) == 0) a.pidns = (uint64_t)ns.st_ino;
    a.ring_bytes = s->ring_bytes;
    s->probe_word = HS_SHM_PROBE_MAGIC;
    a.probe = (uint64_t)(uintptr_t)&s->probe_word;
    gethostname(a.host, sizeof a.host - 1);
    snprintf(a.name, sizeof a.name, "%s", s->name);
    memcpy(buf, &a, sizeof a);
    *len = sizeof a;
    return 0;
}

static int shm_connect(hs_transport_t *t, const void *all, size_t stride)
{
    shm_t *s = t->impl;
    if (stride < sizeof(hs_shm_addr_v1_t))
        return HS_ERR(-EINVAL, "transport connect: address stride %zu < blob size %zu", stride,
                      sizeof(hs_shm_addr_v1_t));
    const hs_shm_addr_v1_t *me =
        (const hs_shm_addr_v1_t *)((const char *)all + (size_t)t->rank * stride);
    for (int r = 0; r < t->size; r++) {
        peer_t *pe = &s->peers[r];
        memcpy(&pe->addr, (const char *)all + (size_t)r * stride, sizeof pe->addr);
        hs_shm_addr_v1_t *a = &pe->addr;
        a->host[HS_SHM_HOST_MAX - 1] = a->name[HS_SHM_NAME_MAX - 1] = '\0';
        if (a->magic != HS_SHM_ADDR_MAGIC)
            return HS_ERR(-EPROTO,
                          "rank %d: the address of rank %d is not a shared-memory (hsshm) "
                          "address: every rank must use the same --provider",
                          t->rank, r);
        if (a->version != HS_SHM_WIRE_VERSION || a->rank != (uint32_t)r)
            return HS_ERR(-EPROTO,
                          "rank %d: rank %d's shared-memory address has version %u and rank %u "
                          "(expected version %u, rank %d): mixed Hearsay builds?",
                          t->rank, r, a->version, a->rank, HS_SHM_WIRE_VERSION, r);
        if (strcmp(a->host, me->host) || a->pidns != me->pidns)
            return HS_ERR(-EINVAL,
                          "rank %d: rank %d runs on host %s%s, not on %s: provider hsshm needs "
                          "every rank on one host; use --provider tcp",
                          t->rank, r, a->host,
                          a->pidns != me->pidns ? " (another pid namespace)" : "", me->host);
    }
    for (int r = 0; r < t->size; r++) {
        if (r == t->rank) continue;
        peer_t *pe = &s->peers[r];
        int fd = shm_open(pe->addr.name, O_RDWR, 0);
        if (fd < 0)
            return HS_ERR(-errno, "rank %d: opening rank %d's shared-memory segment %s: %s",
                          t->rank, r, pe->addr.name, strerror(errno));
        struct stat st;
        size_t want = SEG_HDR_BYTES + (size_t)t->size * (RING_HDR_BYTES + pe->addr.ring_bytes);
        if (fstat(fd, &st) < 0 || (size_t)st.st_size != want) {
            close(fd);
            return HS_ERR(-EPROTO,
                          "rank %d: rank %d's shared-memory segment %s has %lld bytes, expected "
                          "%zu",
                          t->rank, r, pe->addr.name, (long long)st.st_size, want);
        }
        void *m = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        int e = errno;
        close(fd);
        if (m == MAP_FAILED)
            return HS_ERR(-e, "rank %d: mapping rank %d's shared-memory segment %s: %s", t->rank, r,
                          pe->addr.name, strerror(e));
        pe->seg = m;
        pe->seg_bytes = want;
        if (pe->seg->magic != HS_SHM_SEG_MAGIC || pe->seg->owner != (uint32_t)r ||
            pe->seg->size != (uint32_t)t->size || pe->seg->ring_bytes != pe->addr.ring_bytes)
            return HS_ERR(-EPROTO,
                          "rank %d: rank %d's shared-memory segment %s does not hold the "
                          "header it announced (owner %u, %u ranks)",
                          t->rank, r, pe->addr.name, pe->seg->owner, pe->seg->size);
        if (pe->addr.ring_bytes != s->ring_bytes)
            return HS_ERR(-EINVAL,
                          "rank %d: rank %d uses %llu-byte rings, this rank %zu: set "
                          "HS_SHM_RING_BYTES alike on every rank",
                          t->rank, r, (unsigned long long)pe->addr.ring_bytes, s->ring_bytes);
        pe->out = ring_of(pe->seg, s->ring_bytes, t->rank);
        pe->out_data = (char *)pe->out + RING_HDR_BYTES;
        pe->in = ring_of(s->seg, s->ring_bytes, r);
        pe->in_data = (char *)pe->in + RING_HDR_BYTES;
        atomic_fetch_add(&pe->seg->mapped, 1);
    }
    /* Direct reads (process_vm_readv) need ptrace rights over the peers; find out now. */
    s->peer_read_ok = 1;
    for (int r = 0; r < t->size; r++) {
        if (r == t->rank) continue;
        uint64_t w = 0;
        struct iovec lo = {&w, sizeof w},
                     re = {(void *)(uintptr_t)s->peers[r].addr.probe, sizeof w};
        if (process_vm_readv((pid_t)s->peers[r].addr.pid, &lo, 1, &re, 1, 0) != (ssize_t)sizeof w ||
            w != HS_SHM_PROBE_MAGIC) {
            HS_DEBUG("rank %d: cannot read rank %d's memory (%s): direct collectives off", t->rank,
                     r, strerror(errno));
            s->peer_read_ok = 0;
            break;
        }
    }
    /* Senders may hand this rank large messages by address (RTS) only if it can read them. */
    atomic_store(&s->seg->reader_ok, s->peer_read_ok ? 1u : 2u);
    const char **hosts = hs_calloc((size_t)t->size, sizeof *hosts, "host names");
    if (!hosts) return -ENOMEM;
    for (int r = 0; r < t->size; r++) hosts[r] = s->peers[r].addr.host;
    int rc = hs_shaper_create(s->shape, t->rank, t->size, hosts, t->opts.seed, &s->shaper);
    free(hosts);
    HS_TRY(rc);
    if (t->opts.progress_thread) {
        if (pthread_create(&s->thread, NULL, progress_thread, s))
            return HS_ERR(-EAGAIN, "rank %d: cannot start the progress thread", t->rank);
        s->thread_on = 1;
    }
    return 0;
}

static void shm_close(hs_transport_t *t)
{
    shm_t *s = t->impl;
    if (!s) return;
    if (s->thread_on) {
        atomic_store(&s->stop, 1);
        ring_bell(s->seg);
        pthread_join(s->thread, NULL);
    }
    if (s->peers) {
        for (int p = 0; p < t->size; p++) {
            peer_t *pe = &s->peers[p];
            while (pe->sendq.next != &pe->sendq) {
                struct hs_treq *r = pe->sendq.next;
                list_unlink(r);
                if (r->orphan) req_destroy(r);
            }
            while (pe->rdvq.next != &pe->rdvq) {
                struct hs_treq *r = pe->rdvq.next;
                list_unlink(r);
                if (r->orphan) req_destroy(r);
            }
            if (pe->seg) munmap(pe->seg, pe->seg_bytes);
        }
        free(s->peers);
    }
    while (s->uxq.next != &s->uxq) ux_unlink_free(s->uxq.next);
    while (s->posted.next != &s->posted) list_unlink(s->posted.next);
    if (s->seg) {
        munmap(s->seg, s->seg_bytes);
        if (!s->unlinked) shm_unlink(s->name);
    }
    hs_shaper_free(&s->shaper);
    hs_shape_free(&s->shape);
    pthread_mutex_destroy(&s->lock);
    free(s);
    t->impl = NULL;
}

/* --- messages ---------------------------------------------------------------------------- */

static struct hs_treq *req_new(enum req_kind kind, int peer, uint32_t tag)
{
    struct hs_treq *r = hs_calloc(1, sizeof *r, "transport request");
    if (!r) return NULL;
    r->kind = kind;
    r->peer = peer;
    r->tag = tag;
    return r;
}

/* A send to this rank: straight into a matching posted receive, else kept as unexpected.
 * The send completes at once. */
static int deliver_self_locked(shm_t *s, struct hs_treq *r)
{
    int me = s->t->rank;
    struct hs_treq *q = s->posted.next;
    while (q != &s->posted && !matches(q, me, r->ctrl, r->tag)) q = q->next;
    if (q != &s->posted) {
        list_unlink(q);
        q->peer = me;
        q->tag = r->tag;
        q->len = r->cap;
        if (r->cap > q->cap) {
            req_fail_locked(s, q, -EMSGSIZE,
                            "rank %d: a message of %zu bytes from itself (tag %u) is larger "
                            "than the receive buffer of %zu bytes",
                            me, r->cap, r->tag, q->cap);
        } else {
            if (r->cap) memcpy(q->buf, r->buf, r->cap);
            q->done = r->cap;
            q->complete = 1;
        }
    } else {
        ux_t *u = ux_new_locked(s, me, r->ctrl, r->tag, r->cap);
        if (!u)
            return HS_ERR(-ENOMEM, "out of memory for a message of %zu bytes to itself", r->cap);
        if (r->cap) memcpy(u->buf, r->buf, r->cap);
        u->got = r->cap;
    }
    r->done = r->cap;
    r->complete = 1;
    if (atomic_load(&s->seg->sleepers) > 0) ring_bell(s->seg);
    return 0;
}

static int isend_any(hs_transport_t *t, int ctrl, int peer, uint32_t tag, const void *buf,
                     size_t len, hs_treq_t **req)
{
    shm_t *s = t->impl;
    struct hs_treq *r = req_new(REQ_SEND, peer, tag);
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
            req_destroy(r);
            return rc;
        }
        *req = r;
        return 0;
    }
    peer_t *pe = &s->peers[peer];
    r->seq = pe->seq_out++;
    if (hs_shaper_active(s->shaper, peer)) {
        r->csize = hs_shaper_chunk(s->shaper, peer, s->chunk) / HS_SHM_ALIGN * HS_SHM_ALIGN;
        if (!r->csize) r->csize = HS_SHM_ALIGN;
        r->nchunk = len ? (len + r->csize - 1) / r->csize : 1;
        r->rel = malloc(r->nchunk * sizeof *r->rel);
        if (!r->rel) {
            pthread_mutex_unlock(&s->lock);
            req_destroy(r);
            return HS_ERR(-ENOMEM, "out of memory for the shaping times of a send");
        }
        double now = hs_now();
        for (size_t k = 0; k < r->nchunk; k++)
            r->rel[k] =
                hs_shaper_release(s->shaper, peer, HS_MIN(r->csize, len - k * r->csize), now);
    }
    /* Large unshaped messages go by address when the receiver can read this process. */
    r->rdv = !ctrl && !r->rel && s->rdv_bytes && len >= s->rdv_bytes &&
             atomic_load(&pe->seg->reader_ok) == 1;
    list_append(&pe->sendq, r);
    double nr = hs_now() + 3600;
    push_peer_locked(s, peer, hs_now(), &nr);
    pthread_mutex_unlock(&s->lock);
    if (r->rel && s->thread_on) ring_bell(s->seg); /* the thread re-plans its sleep */
    *req = r;
    return 0;
}

static int irecv_any(hs_transport_t *t, int ctrl, int peer, uint32_t tag, int any_tag, void *buf,
                     size_t cap, hs_treq_t **req)
{
    shm_t *s = t->impl;
    struct hs_treq *r = req_new(REQ_RECV, peer, tag);
    if (!r) return -ENOMEM;
    r->ctrl = ctrl;
    r->any_tag = any_tag;
    r->buf = buf;
    r->cap = cap;
    pthread_mutex_lock(&s->lock);
    double nr;
    progress_locked(s, &nr);
    /* An unexpected message that matches is the oldest one: take it. */
    ux_t *u = s->uxq.next;
    while (u != &s->uxq && !matches(r, u->src, u->ctrl, u->tag)) u = u->next;
    if (u != &s->uxq) {
        peer_t *pe = &s->peers[u->src];
        r->peer = u->src;
        r->tag = u->tag;
        r->len = u->len;
        if (u->len > cap) {
            fail_too_big_locked(s, r);
            if (pe->cur_ux == u) pe->cur_ux = NULL; /* the rest of it is dropped */
        } else {
            if (u->got) memcpy(buf, u->buf, u->got);
            r->done = u->got;
            if (pe->cur_ux == u) { /* still arriving: the rest lands in buf */
                pe->cur_ux = NULL;
                pe->cur_req = r;
                r->bound = 1;
            } else {
                r->complete = 1;
            }
        }
        ux_unlink_free(u);
    } else {
        list_append(&s->posted, r);
    }
    pthread_mutex_unlock(&s->lock);
    *req = r;
    return 0;
}

static int shm_isend(hs_transport_t *t, int peer, uint32_t tag, const void *buf, size_t len,
                     hs_treq_t **req)
{
    return isend_any(t, 0, peer, tag, buf, len, req);
}

static int shm_irecv(hs_transport_t *t, int peer, uint32_t tag, void *buf, size_t cap,
                     hs_treq_t **req)
{
    return irecv_any(t, 0, peer, tag, 0, buf, cap, req);
}

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
    req_destroy(r);
    *req = NULL;
    return rc;
}

static int shm_test(hs_transport_t *t, hs_treq_t **req, int *done, hs_tstatus_t *st)
{
    shm_t *s = t->impl;
    double nr;
    pthread_mutex_lock(&s->lock);
    progress_locked(s, &nr);
    int rc = 0;
    *done = 0;
    if ((*req)->complete) {
        *done = 1;
        rc = finish_locked(req, st);
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static int shm_progress(hs_transport_t *t)
{
    shm_t *s = t->impl;
    double nr;
    pthread_mutex_lock(&s->lock);
    int moved = progress_locked(s, &nr);
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

static int shm_waitany(hs_transport_t *t, hs_treq_t **reqs, int n, double timeout_s, int *index,
                       hs_tstatus_t *st)
{
    shm_t *s = t->impl;
    double start = hs_now(), deadline = start + timeout_s;
    *index = -1;
    for (;;) {
        uint32_t seen = atomic_load(&s->seg->doorbell);
        double nr;
        pthread_mutex_lock(&s->lock);
        progress_locked(s, &nr);
        int active = 0;
        for (int i = 0; i < n; i++) {
            if (!reqs[i]) continue;
            active++;
            if (reqs[i]->complete) {
                *index = i;
                int rc = finish_locked(&reqs[i], st);
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
        sleep_bell(s, seen, HS_MIN(HS_MIN(deadline, now + LIVENESS_PERIOD_S), nr));
    }
}

static int shm_probe(hs_transport_t *t, int peer, uint32_t tag, int any_tag, int *found,
                     hs_tstatus_t *st)
{
    shm_t *s = t->impl;
    double nr;
    *found = 0;
    pthread_mutex_lock(&s->lock);
    progress_locked(s, &nr);
    for (ux_t *u = s->uxq.next; u != &s->uxq; u = u->next) {
        if (u->ctrl || (peer >= 0 && u->src != peer) || (!any_tag && u->tag != tag)) continue;
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

static void shm_req_free(hs_transport_t *t, hs_treq_t **req)
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
        if (shm_waitany(t, &w, 1, t->opts.timeout_s, &(int){0}, NULL) < 0 && w) {
            pthread_mutex_lock(&s->lock);
            if (w->complete) {
                req_destroy(w);
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
        req_destroy(r);
    } else if (r->kind == REQ_SEND && r->prev && r->done > 0) {
        /* Mid-message: the receiver expects the rest, and the caller's buffer may go away. */
        size_t rest = r->cap - r->done;
        r->own = malloc(rest ? rest : 1);
        if (r->own) {
            memcpy(r->own, r->buf + r->done, rest);
            r->len = rest; /* push_peer_locked reads own[done - (cap - len)] */
            r->orphan = 1;
        } else { /* cannot keep it: the receiver will time out on this message */
            list_unlink(r);
            req_destroy(r);
        }
    } else if (r->kind == REQ_SEND) {
        list_unlink(r);
        req_destroy(r);
    } else if (r->bound) {
        s->peers[r->peer].cur_req = NULL; /* the rest of its message is dropped */
        req_destroy(r);
    } else {
        list_unlink(r);
        req_destroy(r);
    }
    pthread_mutex_unlock(&s->lock);
}

static int ctrl_isend(hs_transport_t *t, int peer, uint32_t tag, const void *buf, size_t len,
                      hs_treq_t **req)
{
    return isend_any(t, 1, peer, tag, buf, len, req);
}

static int ctrl_irecv(hs_transport_t *t, int peer, uint32_t tag, void *buf, size_t cap,
                      hs_treq_t **req)
{
    return irecv_any(t, 1, peer, tag, 0, buf, cap, req);
}

static int shm_barrier(hs_transport_t *t)
{
    return hs_transport_ctrl_barrier(t, HS_SHM_CTRL_BARRIER, ctrl_isend, ctrl_irecv);
}

/* --- windows: one copy between the processes ----------------------------------------------- */

static int shm_win_create(hs_transport_t *t, void *buf, size_t len, hs_twin_t **win)
{
    shm_t *s = t->impl;
    int n = t->size;
    struct hs_twin *w = hs_calloc(1, sizeof *w, "window");
    if (!w) return -ENOMEM;
    w->len = len;
    w->remote = hs_calloc((size_t)n, sizeof *w->remote, "window descriptors");
    hs_treq_t **rq = hs_calloc(2 * (size_t)n, sizeof *rq, "window exchange");
    if (!w->remote || !rq) {
        free(w->remote);
        free(w);
        free(rq);
        return -ENOMEM;
    }
    hs_shm_win_v1_t mine = {HS_SHM_WIN_MAGIC, HS_SHM_WIRE_VERSION, (uint64_t)(uintptr_t)buf, len};
    w->remote[t->rank] = mine;
    uint32_t tag = HS_SHM_CTRL_WIN | ((s->win_seq++ & 0xFFFFu) << 8);
    int rc = 0;
    for (int p = 0; p < n && rc == 0; p++) {
        if (p == t->rank) continue;
        rc = irecv_any(t, 1, p, tag, 0, &w->remote[p], sizeof w->remote[p], &rq[2 * p]);
        if (rc == 0) rc = isend_any(t, 1, p, tag, &mine, sizeof mine, &rq[2 * p + 1]);
    }
    for (int left = 2 * (n - 1); rc == 0 && left > 0; left--) {
        int idx;
        rc = shm_waitany(t, rq, 2 * n, t->opts.timeout_s, &idx, NULL);
    }
    for (int i = 0; i < 2 * n; i++)
        if (rq[i]) shm_req_free(t, &rq[i]);
    free(rq);
    for (int p = 0; p < n && rc == 0; p++)
        if (w->remote[p].magic != HS_SHM_WIN_MAGIC || w->remote[p].version != HS_SHM_WIRE_VERSION)
            rc = HS_ERR(-EPROTO, "rank %d: rank %d sent a malformed window descriptor", t->rank, p);
    if (rc < 0) {
        free(w->remote);
        free(w);
        hs_error_prefix("creating a window");
        return rc;
    }
    *win = w;
    return 0;
}

static void shm_win_free(hs_transport_t *t, hs_twin_t **win)
{
    (void)t;
    if (!win || !*win) return;
    free((*win)->remote);
    HS_FREE(*win);
}

static int rma(hs_transport_t *t, hs_twin_t *w, int target, size_t offset, void *buf, size_t len,
               int write, hs_treq_t **req)
{
    shm_t *s = t->impl;
    const hs_shm_win_v1_t *d = &w->remote[target];
    if (offset > d->len || len > d->len - offset)
        return HS_ERR(-EINVAL,
                      "rank %d: %s of %zu bytes at offset %zu is outside rank %d's window of "
                      "%llu bytes",
                      t->rank, write ? "put" : "get", len, offset, target,
                      (unsigned long long)d->len);
    struct hs_treq *r = req_new(REQ_RMA, target, 0);
    if (!r) return -ENOMEM;
    r->cap = r->len = len;
    r->complete = 1;
    if (target == t->rank) {
        char *base = (char *)(uintptr_t)d->base + offset;
        if (len) memmove(write ? base : (char *)buf, write ? buf : base, len);
    } else if (len) {
        struct iovec lo = {buf, len}, re = {(void *)(uintptr_t)(d->base + offset), len};
        pid_t pid = (pid_t)s->peers[target].addr.pid;
        ssize_t got = write ? process_vm_writev(pid, &lo, 1, &re, 1, 0)
                            : process_vm_readv(pid, &lo, 1, &re, 1, 0);
        if (got != (ssize_t)len) {
            int e = got < 0 ? errno : EIO;
            req_destroy(r);
            return HS_ERR(-e, "rank %d: %s of %zu bytes %s rank %d's window (pid %d) failed: %s%s",
                          t->rank, write ? "process_vm_writev" : "process_vm_readv", len,
                          write ? "into" : "from", target, (int)pid, strerror(e),
                          e == EPERM ? " (ptrace restrictions; use --provider tcp)" : "");
        }
    }
    *req = r;
    return 0;
}

static int shm_put(hs_transport_t *t, hs_twin_t *w, int target, size_t offset, const void *buf,
                   size_t len, hs_treq_t **req)
{
    return rma(t, w, target, offset, (void *)buf, len, 1, req);
}

static int shm_get(hs_transport_t *t, hs_twin_t *w, int target, size_t offset, void *buf,
                   size_t len, hs_treq_t **req)
{
    return rma(t, w, target, offset, buf, len, 0, req);
}

static int shm_atomic_add(hs_transport_t *t, hs_twin_t *w, int target, size_t offset,
                          const void *buf, size_t n, int dtype, hs_treq_t **req)
{
    (void)w, (void)target, (void)offset, (void)buf, (void)n, (void)dtype, (void)req;
    return HS_ERR(-ENOSYS,
                  "rank %d: the shared-memory transport (hsshm) has no remote atomics "
                  "(use the service path, or --provider tcp)",
                  t->rank);
}

static int shm_peer_read_ok(const hs_transport_t *t)
{
    const shm_t *s = t->impl;
    return s->peer_read_ok;
}

static int shm_peer_read(hs_transport_t *t, int peer, uint64_t remote, void *local, size_t len)
{
    shm_t *s = t->impl;
    if (!len) return 0;
    if (peer == t->rank) {
        memmove(local, (const void *)(uintptr_t)remote, len);
        return 0;
    }
    struct iovec lo = {local, len}, re = {(void *)(uintptr_t)remote, len};
    pid_t pid = (pid_t)s->peers[peer].addr.pid;
    ssize_t got = process_vm_readv(pid, &lo, 1, &re, 1, 0);
    if (got == (ssize_t)len) return 0;
    int e = got < 0 ? errno : EIO;
    if (e == ESRCH || hs_pid_gone((unsigned)pid))
        return HS_ERR(-ECONNRESET,
                      "rank %d: direct read of %zu bytes from rank %d: rank %d (pid %d) has "
                      "exited",
                      t->rank, len, peer, peer, (int)pid);
    return HS_ERR(-e, "rank %d: process_vm_readv of %zu bytes from rank %d (pid %d) failed: %s",
                  t->rank, len, peer, (int)pid, got < 0 ? strerror(e) : "short read");
}

static const char *shm_provider(const hs_transport_t *t)
{
    (void)t;
    return "hsshm";
}

const hs_transport_ops_t hs_shm_ops = {
    .size = sizeof(hs_transport_ops_t),
    .name = "hsshm",
    .create = shm_create,
    .address = shm_address,
    .connect = shm_connect,
    .close = shm_close,
    .isend = shm_isend,
    .irecv = shm_irecv,
    .test = shm_test,
    .waitany = shm_waitany,
    .progress = shm_progress,
    .probe = shm_probe,
    .req_free = shm_req_free,
    .barrier = shm_barrier,
    .win_create = shm_win_create,
    .win_free = shm_win_free,
    .put = shm_put,
    .get = shm_get,
    .atomic_add = shm_atomic_add,
    .provider = shm_provider,
    .peer_read_ok = shm_peer_read_ok,
    .peer_read = shm_peer_read,
};
