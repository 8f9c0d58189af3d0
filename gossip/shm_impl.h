/*
 * gossip/shm_impl.h — private state of "hsshm", the shared-memory transport backend, and the
 * functions its files share: shm.c (set-up, connect, teardown, the ops table),
 * shm_progress.c (the progress pass over the rings, doorbells, liveness, test and waits),
 * shm_msg.c (requests, tagged messages, the unexpected queue, probes, the RTS by-address path,
 * barrier) and shm_rma.c (windows and direct reads). The wire layout is in gossip/shm_wire.h.
 *
 * Locking: one mutex (shm_t.lock) guards the queues and requests; the rings themselves are
 * lock-free between processes. Functions named *_locked expect it held.
 */
#ifndef HEARSAY_GOSSIP_SHM_IMPL_H
#define HEARSAY_GOSSIP_SHM_IMPL_H

#include "gossip/shm_wire.h"
#include "gossip/transport_impl.h"
#include "hearsay/shaping.h"
#include "hearsay/transport.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* --- state ------------------------------------------------------------------------------- */

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
    int rdv;                       /* send by RTS: the receiver copies from buf itself */
    struct shbuf *snap;            /* sends from a mappable buffer: go as one SNAP record */
    int view;                      /* receives: a view (irecv_view): buf is where the bytes are */
    struct pmap *map;              /* views of a SNAP: the mapping they read (a hold on it) */
    uint64_t rdv_idx;              /* views of a SNAP: its index among the peer's RTS/SNAPs */
    struct hs_treq *hprev, *hnext; /* views holding a SNAP: shm_t.held */
    uint64_t first_pos;          /* eager sends with done > 0: ring position of the first record */
    int reset;                   /* a replacement's RESET record (its address in buf) */
    struct hs_treq *prev, *next; /* posted receives / a peer's send queue */
};

/* A buffer of this rank that receivers can map (hs_transport_buf_alloc): a memfd. */
typedef struct shbuf {
    char *base;
    size_t len, map_len;
    int fd;
    uint64_t id;
    struct shbuf *next;
} shbuf_t;

/* A peer's mappable buffer, mapped here (read-only) for SNAP records. */
typedef struct pmap {
    int peer;
    uint64_t id;
    const char *base;
    size_t len;
    int holds;   /* views reading it */
    double used; /* last use (eviction) */
    struct pmap *next;
} pmap_t;

/* A peer's mappable buffer mapped here read-write (peer_map), counted. */
typedef struct wmap {
    int peer;
    uint64_t id;
    char *base;
    size_t len;
    int refs;
    struct wmap *next;
} wmap_t;

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
    uint64_t rdv_taken;   /* RTS/SNAP records of its this rank took (in ring order) */
    uint64_t rdv_told;    /* of those, how many it acknowledged (in->rdv_done) */
    unsigned seq_out;
    /* the message from this peer in progress: a bound receive, an unexpected buffer or
     * neither (the rest is dropped: the receive was freed or too small) */
    struct hs_treq *cur_req;
    ux_t *cur_ux;
    double last_alive;
    int dead;
    int eager_only; /* this rank is a replacement: no RTS or SNAP to this peer (shm_wire.h) */
    /* the peer's previous process's segment (a replacement took its place: shm_wire.h), kept
     * for hs_shm_unsent, and my ring in it */
    hs_shm_seg_hdr_t *old_seg;
    size_t old_bytes;
    hs_shm_ring_hdr_t *old_out;
    char *old_out_data;
    int corrupt; /* it wrote a record that cannot be (pull_peer_locked): not read any more */
} peer_t;

typedef struct shm {
    hs_transport_t *t;
    char name[HS_SHM_NAME_MAX];
    hs_shm_seg_hdr_t *seg; /* mine */
    size_t seg_bytes, ring_bytes, chunk;
    size_t rdv_bytes; /* messages at least this long go by RTS where possible (0: never) */
    int unlinked;
    int seg_fd;            /* my segment's descriptor, kept open: a replacement opens it by /proc */
    int incarnation;       /* > 0: this process replaces a crashed one in a running job */
    hs_shm_addr_v1_t me;   /* my address (a replacement's RESET records carry it) */
    peer_t *peers;         /* (size) */
    struct hs_treq posted; /* sentinel: posted receives, in posting order */
    struct hs_treq doneq;  /* sentinel: receives completed and not yet reported (leave) */
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
    int left;            /* hs_shm_leave ran: nothing more is taken from the rings */
    shbuf_t *bufs;       /* mappable buffers of this rank */
    uint64_t buf_seq;
    pmap_t *maps; /* peers' buffers mapped here */
    int nmaps, map_warned;
    struct hs_treq held; /* sentinel (hprev/hnext): views holding an unacknowledged SNAP */
    wmap_t *wmaps;       /* peers' buffers mapped read-write (peer_map) */
} shm_t;

/* --- small helpers ----------------------------------------------------------------------- */

static inline size_t hs_shm_align_up(size_t n, size_t a)
{
    return (n + a - 1) / a * a;
}

static inline void hs_shm_list_unlink(struct hs_treq *r)
{
    if (!r->prev) return;
    r->prev->next = r->next;
    r->next->prev = r->prev;
    r->prev = r->next = NULL;
}

static inline void hs_shm_list_append(struct hs_treq *head, struct hs_treq *r)
{
    r->prev = head->prev;
    r->next = head;
    head->prev->next = r;
    head->prev = r;
}

static inline int hs_shm_matches(const struct hs_treq *r, int src, int ctrl, uint32_t tag)
{
    return r->ctrl == ctrl && hs_tag_match(r->peer, r->tag, r->any_tag, src, tag);
}

/* A receive completed with its data: it waits in doneq until a test or wait reports it
 * (hs_shm_leave hands back what is still there). */
static inline void hs_shm_recv_done_locked(struct hs_treq *doneq, struct hs_treq *r)
{
    r->complete = 1;
    hs_shm_list_append(doneq, r);
}

/* --- shm.c ------------------------------------------------------------------------------ */

/* Peer p's replacement wrote a RESET record carrying its address a: drop what the crashed
 * process left half-written, fail the sends still queued for it, keep its segment for unsent,
 * and map the replacement's (shm_wire.h, version 5). */
int hs_shm_reattach_locked(shm_t *s, int p, const hs_shm_addr_v1_t *a);

/* --- shm_progress.c ---------------------------------------------------------------------- */

/* Tell the owner of seg there is news; wake its sleepers if it has any. */
void hs_shm_ring_bell(hs_shm_seg_hdr_t *seg);
/* Sleep on my doorbell until it moves from `seen` or until `until` (hs_now() time). */
void hs_shm_sleep_bell(shm_t *s, uint32_t seen, double until);
/* Write as many records of the sends queued to peer p as its ring and the shaper allow.
 * Returns 1 when something moved. Sets *next_release to the earliest pending release. */
int hs_shm_push_peer_locked(shm_t *s, int p, double now, double *next_release);
/* One pass over every peer. Returns > 0 when something moved, 0 when not. */
int hs_shm_progress_locked(shm_t *s, double *next_release);
/* The progress thread (opts.progress_thread): arg is the shm_t; runs until s->stop. */
void *hs_shm_progress_thread(void *arg);
int hs_shm_test(hs_transport_t *t, hs_treq_t **req, int *done, hs_tstatus_t *st);
int hs_shm_progress(hs_transport_t *t);
int hs_shm_waitany(hs_transport_t *t, hs_treq_t **reqs, int n, double timeout_s, int *index,
                   hs_tstatus_t *st);
/* Wait like waitany for one request, but leave it allocated when it completes (views):
 * *index 0 once complete. */
int hs_shm_wait_keep(hs_transport_t *t, hs_treq_t **req, double timeout_s, int *index);
/* For a peer that exited or left: hand back what it never began to take (transport.h). */
int hs_shm_unsent(hs_transport_t *t, int peer, uint32_t tag, hs_transport_msg_fn cb, void *ctx);
/* This rank is about to exit: take what arrived, stop receiving, hand back (transport.h). */
int hs_shm_leave(hs_transport_t *t, uint32_t tag, hs_transport_msg_fn cb, void *ctx);
int hs_shm_revoke(hs_transport_t *t, int peer, uint32_t tag, hs_transport_msg_fn cb, void *ctx);
/* 1 when peer's process has exited (transport.h). */
int hs_shm_peer_gone(hs_transport_t *t, int peer);

/* --- shm_msg.c --------------------------------------------------------------------------- */

struct hs_treq *hs_shm_req_new(enum req_kind kind, int peer, uint32_t tag);
void hs_shm_req_destroy(struct hs_treq *r);
/* Record a failure in a request (message formatted like HS_ERR) and complete it. */
void hs_shm_req_fail_locked(shm_t *s, struct hs_treq *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A new unexpected message of len bytes (nothing arrived yet) at the end of the queue, or
 * NULL when out of memory. */
ux_t *hs_shm_ux_new_locked(shm_t *s, int src, int ctrl, uint32_t tag, size_t len);
void hs_shm_ux_unlink_free(ux_t *u);
/* Bind posted receive r to the message (src, tag, len) whose first record has arrived. */
void hs_shm_bind_recv_locked(shm_t *s, struct hs_treq *r, int src, uint32_t tag, size_t len);
/* An RTS record from peer p has been matched (pe->cur_req or pe->cur_ux, or neither when the
 * message is dropped): copy the message from the sender, then tell it so. */
void hs_shm_take_rts_locked(shm_t *s, int p, const hs_shm_rec_t *rec);
/* Non-blocking send / receive of user (ctrl 0) or the transport's own (ctrl 1) messages. */
int hs_shm_isend_any(hs_transport_t *t, int ctrl, int peer, uint32_t tag, const void *buf,
                     size_t len, hs_treq_t **req);
int hs_shm_irecv_any(hs_transport_t *t, int ctrl, int peer, uint32_t tag, int any_tag, void *buf,
                     size_t cap, hs_treq_t **req);
/* The receive behind both: view 1 posts a view receive (buf NULL; the bytes stay where they
 * arrive, or in a buffer of its own). */
int hs_shm_irecv_common(hs_transport_t *t, int ctrl, int peer, uint32_t tag, int any_tag, void *buf,
                        size_t cap, int view, hs_treq_t **req);
int hs_shm_isend(hs_transport_t *t, int peer, uint32_t tag, const void *buf, size_t len,
                 hs_treq_t **req);
int hs_shm_irecv(hs_transport_t *t, int peer, uint32_t tag, void *buf, size_t cap, hs_treq_t **req);
int hs_shm_probe(hs_transport_t *t, int peer, uint32_t tag, int any_tag, int *found,
                 hs_tstatus_t *st);
void hs_shm_req_free(hs_transport_t *t, hs_treq_t **req);
int hs_shm_barrier(hs_transport_t *t);

/* --- shm_view.c: mappable buffers and view receives ----------------------------------- */

int hs_shm_buf_alloc(hs_transport_t *t, size_t len, void **buf);
void hs_shm_buf_free(hs_transport_t *t, void *buf);
/* The mappable buffer holding [buf, buf + len), or NULL. */
shbuf_t *hs_shm_buf_find_locked(shm_t *s, const void *buf, size_t len);
int hs_shm_irecv_view(hs_transport_t *t, int peer, uint32_t tag, size_t cap, hs_treq_t **req);
int hs_shm_view_wait(hs_transport_t *t, hs_treq_t *req, double timeout_s, int *done,
                     const void **data, hs_tstatus_t *st);
void hs_shm_view_release(hs_transport_t *t, hs_treq_t **req);
/* Peer p's buffer named by a SNAP record, mapped here (cached), or NULL when it cannot be
 * mapped (the caller copies with process_vm_readv instead). */
pmap_t *hs_shm_map_get_locked(shm_t *s, int p, const hs_shm_snap_t *sn);
/* Acknowledge to peer p every RTS/SNAP taken from it that no view holds any more (in ring
 * order: up to the oldest held one). */
void hs_shm_rdv_ack_locked(shm_t *s, int p);
/* Shared buffers (peer_map): a handle for part of a buffer of this rank, a peer's mapped. */
int hs_shm_buf_handle(hs_transport_t *t, const void *buf, size_t len, hs_tbuf_handle_t *h);
int hs_shm_peer_map(hs_transport_t *t, int peer, const hs_tbuf_handle_t *h, void **ptr);
void hs_shm_peer_unmap(hs_transport_t *t, int peer, void *ptr);
/* Teardown: unmap the peers' buffers, free this rank's. */
void hs_shm_views_close(shm_t *s);

/* --- shm_rma.c --------------------------------------------------------------------------- */

int hs_shm_win_create(hs_transport_t *t, void *buf, size_t len, hs_twin_t **win);
void hs_shm_win_free(hs_transport_t *t, hs_twin_t **win);
int hs_shm_put(hs_transport_t *t, hs_twin_t *w, int target, size_t offset, const void *buf,
               size_t len, hs_treq_t **req);
int hs_shm_get(hs_transport_t *t, hs_twin_t *w, int target, size_t offset, void *buf, size_t len,
               hs_treq_t **req);
int hs_shm_atomic_add(hs_transport_t *t, hs_twin_t *w, int target, size_t offset, const void *buf,
                      size_t n, int dtype, hs_treq_t **req);
int hs_shm_peer_read_ok(const hs_transport_t *t);
int hs_shm_peer_read(hs_transport_t *t, int peer, uint64_t remote, void *local, size_t len);

#endif
