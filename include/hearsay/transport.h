/*
 * hearsay/transport.h — point-to-point messages and one-sided memory windows between ranks.
 *
 * A transport is an ops table (hs_transport_ops_t, one per backend, with its capability flags)
 * plus a context (hs_transport_t); backends are found by name in a registry
 * (hs_transport_lookup, gossip/transport_registry.c). Two backends of their own: libfabric
 * ("fabric": FI_EP_RDM endpoints, tagged messages, RMA and atomics, the provider chosen at run
 * time) and Hearsay's own shared memory ("hsshm": per-pair rings in POSIX shared memory, for
 * ranks on one host; RMA by process_vm_readv/writev, no atomics), and "hybrid", the two per
 * pair of ranks. "auto" picks hsshm when every rank shares a host.
 *
 * Model:
 *  - Tagged, non-blocking sends and receives. A receive names a source rank or
 *    HS_ANY_SOURCE and a user tag (0 .. HS_TAG_MAX). Messages from one sender to one
 *    receiver with the same tag are matched in the order they were sent.
 *  - Large messages are split into chunks (opts.chunk_bytes) that are pipelined.
 *  - No barrier on the data path: a worker tests or waits on its own requests, and
 *    hs_transport_progress() drains whatever completed without blocking.
 *  - Waiting never spins: it blocks on the completion queue's wait object (or sleeps with
 *    a short backoff where a provider has none), bounded by a timeout, and checks that the
 *    peers it waits for are still alive.
 *  - Memory windows: every rank registers a buffer (collectively); any rank can then write,
 *    read or (where the provider can) atomically add into any rank's window.
 *  - Link shaping (added latency, jitter, bandwidth cap) can be applied to the links of this
 *    rank on the sending side: see hearsay/shaping.h and docs/transport.md.
 *
 * Requests (hs_treq_t) are owned by the transport: a completed request is released by the
 * hs_transport_test/wait/waitany call that reports it (which sets the caller's pointer to
 * NULL); hs_transport_req_free releases one that is no longer wanted. A send's buffer must
 * stay untouched, and a receive's buffer must stay valid, until the request completes.
 *
 * Thread safety: all calls on one transport may come from several threads (one lock).
 */
#ifndef HEARSAY_TRANSPORT_H
#define HEARSAY_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct hs_boot;

/* Receive from whichever rank sends first. */
#define HS_ANY_SOURCE (-1)
/* User tags are 0 .. HS_TAG_MAX (24 bits); the high bits of the wire tag are reserved. */
#define HS_TAG_MAX 0xFFFFFFu
/* The most bytes of a local address blob (hs_transport_address). */
#define HS_TRANSPORT_ADDR_MAX 512

typedef struct hs_transport hs_transport_t;
typedef struct hs_treq hs_treq_t;
typedef struct hs_twin hs_twin_t;
typedef struct hs_tview hs_tview_t;

/* A buffer of hs_transport_buf_alloc (or part of one) as a same-host peer can map it
 * (hs_transport_buf_handle, hs_transport_peer_map): opaque, fixed size, safe to send. */
typedef struct hs_tbuf_handle {
    uint64_t w[6];
} hs_tbuf_handle_t;

typedef struct hs_transport_opts {
    const char *provider; /* "auto" (NULL): hsshm when all ranks share a host, tcp when
                             every host holds one rank, else per pair (hsshm within a host,
                             tcp across: "hybrid"); hsshm (our shared memory), "hsshm+P"
                             (per pair, libfabric P across hosts), or a libfabric provider for
                             every pair: shm, tcp, sockets, udp, verbs, efa, any fi_info name */
    const char *shaping;  /* link shaping spec (NULL or "" = none), see hearsay/shaping.h */
    size_t chunk_bytes;   /* messages larger than this are split (0 = default 1 MiB) */
    int progress_thread;  /* 1: a thread drives progress (blocking on the CQ's wait object) */
    double timeout_s;     /* bound on every wait (0 = 60 s); a timed-out wait names the peer */
    uint64_t seed;        /* seeds the shaping jitter */
    int incarnation;      /* 0: a rank's first process; K > 0: its K-th replacement, which
                             joins a running job (crash:...:rejoin=D, runtime/rejoin.h): the
                             address exchange is the job's start-up replayed (only this rank
                             is new), and the peers learn its address in band (hsshm only;
                             the other backends refuse it) */
} hs_transport_opts_t;

/* What a completed request reports. */
typedef struct hs_tstatus {
    int source;   /* sending rank (receives), destination (sends), target (RMA) */
    uint32_t tag; /* user tag */
    size_t len;   /* bytes received (receives) or sent */
} hs_tstatus_t;

/* Fill `o` with the defaults, then apply the environment knobs HS_PROVIDER, HS_SHAPING,
 * HS_CHUNK_BYTES, HS_PROGRESS_THREAD and HS_TIMEOUT where set. Returns 0 or -EINVAL naming
 * the bad variable. */
int hs_transport_opts_default(hs_transport_opts_t *o);

/* What hs_transport_unsent and hs_transport_leave hand back: one message of `len` bytes
 * whose first `got` bytes are in buf (got < len: only a prefix arrived), sent to (unsent) or
 * received from (leave) rank `peer`. Called with the transport's lock held: it must not call
 * the transport. */
typedef void (*hs_transport_msg_fn)(void *ctx, int peer, const void *buf, size_t got, size_t len);

/*
 * The backend contract. Every slot receives the transport context; the generic layer has
 * already checked arguments (peer ranks in range, tags <= HS_TAG_MAX, non-NULL pointers).
 * Slots return 0 or a negative errno code after HS_ERR. Unimplemented slots return -ENOSYS.
 */
typedef struct hs_transport_ops {
    size_t size;      /* sizeof(hs_transport_ops_t) of the build that filled it */
    const char *name; /* backend name, "fabric" */
    /* Open a local endpoint for (rank, size); must not contact peers. all_local picks the
     * provider under "auto". Sets t->impl. */
    int (*create)(hs_transport_t *t, const hs_transport_opts_t *o, int all_local);
    /* Copy this endpoint's address blob (<= HS_TRANSPORT_ADDR_MAX bytes) into buf; *len gets
     * its size. Never blocks. */
    int (*address)(hs_transport_t *t, void *buf, size_t *len);
    /* Insert every rank's blob (size blobs of `stride` bytes, in rank order). After this the
     * transport can talk to every rank. Never blocks on peers. */
    int (*connect)(hs_transport_t *t, const void *all, size_t stride);
    /* Free everything; pending requests are dropped. Must not block on peers. */
    void (*close)(hs_transport_t *t);
    /* Start sending len bytes to peer; never blocks (shaped or queued sends are posted
     * later by progress). */
    int (*isend)(hs_transport_t *t, int peer, uint32_t tag, const void *buf, size_t len,
                 hs_treq_t **req);
    /* Post a receive of up to cap bytes from peer (or HS_ANY_SOURCE); never blocks. */
    int (*irecv)(hs_transport_t *t, int peer, uint32_t tag, void *buf, size_t cap, hs_treq_t **req);
    /* Make progress without blocking, then report whether req completed (*done). On
     * completion fills *st (may be NULL), frees the request and NULLs *req. A request that
     * failed returns its error (and is freed). */
    int (*test)(hs_transport_t *t, hs_treq_t **req, int *done, hs_tstatus_t *st);
    /* Like test over n requests (NULL entries ignored): *index is the first completed one or
     * -1. With timeout_s > 0 it blocks (on the wait object, never spinning) until one
     * completes or returns -ETIMEDOUT naming the peers waited for; timeout_s == 0 polls. */
    int (*waitany)(hs_transport_t *t, hs_treq_t **reqs, int n, double timeout_s, int *index,
                   hs_tstatus_t *st);
    /* Drain completions and post due shaped sends; never blocks. Returns the number of
     * requests that completed (>= 0) or an error. */
    int (*progress)(hs_transport_t *t);
    /* Without blocking, report whether a message from peer (or HS_ANY_SOURCE) with tag
     * (or any tag when any_tag) has arrived and is not yet received: *found, and *st with its
     * source, tag and length (exact where the provider returns CQ data on a peek, else an
     * upper bound: chunks x chunk size). -ENOSYS where the provider cannot peek safely
     * (shm in libfabric 1.17): pre-post HS_ANY_SOURCE receives and waitany(timeout 0). */
    int (*probe)(hs_transport_t *t, int peer, uint32_t tag, int any_tag, int *found,
                 hs_tstatus_t *st);
    /* Cancel and free an incomplete request (completed ones are just freed). */
    void (*req_free)(hs_transport_t *t, hs_treq_t **req);
    /* Collective: returns once every rank has entered (bounded by opts.timeout_s). */
    int (*barrier)(hs_transport_t *t);
    /* Collective: register buf (len bytes) as window on every rank; exchanges keys. */
    int (*win_create)(hs_transport_t *t, void *buf, size_t len, hs_twin_t **win);
    /* Collective-free release of a window (call after every rank stopped using it). */
    void (*win_free)(hs_transport_t *t, hs_twin_t **win);
    /* One-sided write (put) or read (get) of len bytes between local buf and target's
     * window at byte offset; non-blocking, completes through the request. */
    int (*put)(hs_transport_t *t, hs_twin_t *w, int target, size_t offset, const void *buf,
               size_t len, hs_treq_t **req);
    int (*get)(hs_transport_t *t, hs_twin_t *w, int target, size_t offset, void *buf, size_t len,
               hs_treq_t **req);
    /* Atomic element-wise add of n floats (dtype 4) or doubles (dtype 8) into the target's
     * window at offset. -ENOSYS when the provider has no such atomic (callers then fall
     * back to messages and a service thread). */
    int (*atomic_add)(hs_transport_t *t, hs_twin_t *w, int target, size_t offset, const void *buf,
                      size_t n, int dtype, hs_treq_t **req);
    /* Name of the provider in use ("hsshm", or libfabric's "shm", "tcp;ofi_rxm", ...). */
    const char *(*provider)(const hs_transport_t *t);
    /* Same-host direct reads (hsshm): 1 when peer_read works with every peer (checked when
     * connecting), else 0. */
    int (*peer_read_ok)(const hs_transport_t *t);
    /* Copy len bytes at address `remote` of rank peer's memory into local: one copy, no
     * action from the peer, synchronous. The caller makes sure the peer leaves those bytes
     * alone meanwhile (collectives announce their buffers in messages). */
    int (*peer_read)(hs_transport_t *t, int peer, uint64_t remote, void *local, size_t len);
    /* Optional (NULL: -ENOSYS; libfabric cannot know). For a peer that has exited or left
     * (see leave): hand every message with user tag `tag` that this rank sent it and that it
     * never began to take (eager messages wholly in its ring) to cb, then forget them (a
     * second call does not report them again). A send it never began to take and that is
     * not wholly written fails with -ECONNRESET instead, and one it began to take completes
     * (the peer counted it: see leave); by-address (RTS) sends stay the caller's requests
     * until read and fail the same way. Returns how many messages it handed back, or
     * -EBUSY while the peer still runs and has not left (it may still take them). */
    int (*unsent)(hs_transport_t *t, int peer, uint32_t tag, hs_transport_msg_fn cb, void *ctx);
    /* Optional (NULL: -ENOSYS). This rank is about to exit (an injected crash): take
     * whatever has reached it, then stop receiving for good, and hand every message with
     * user tag `tag` that arrived in whole or in part and that no test or wait reported to cb
     * (its completed receives fail with -ECANCELED, so nothing is delivered twice). Peers'
     * sends to it fail from then on, and what they wrote afterwards is theirs to take back
     * with unsent. Sending still works. Returns how many messages it handed back. */
    int (*leave)(hs_transport_t *t, uint32_t tag, hs_transport_msg_fn cb, void *ctx);
    /* Optional (NULL: -ENOSYS). 1 when peer's process has exited (same host and pid
     * namespace: gone or a zombie), 0 while it runs, -ENOSYS when this cannot be known (another
     * host). Never blocks (one look at /proc), no rate limit: cheap enough before a send. */
    int (*peer_gone)(hs_transport_t *t, int peer);
    /* Optional (NULL: the generic layer mallocs). len bytes of memory a same-host receiver
     * can map (hsshm: a memfd): a send from it goes as one record naming the buffer, and a
     * view receive (irecv_view) reads the bytes where they lie, no copy. *buf is 64-byte
     * aligned, zero-filled. */
    int (*buf_alloc)(hs_transport_t *t, size_t len, void **buf);
    /* Free a buffer of buf_alloc (its sends complete first: the caller's business). */
    void (*buf_free)(hs_transport_t *t, void *buf);
    /* Optional (NULL: the generic layer receives into a buffer of its own, one copy). Post a
     * receive of at most cap bytes whose bytes the backend keeps where they are: a sender's
     * buf_alloc buffer mapped here (no copy; the send completes only at view_release), else a
     * buffer of the backend's. Never blocks. Completes only through view_wait. */
    int (*irecv_view)(hs_transport_t *t, int peer, uint32_t tag, size_t cap, hs_treq_t **req);
    /* Wait up to timeout_s (0: poll once) for a view receive: *done = 1 with *data (valid
     * until view_release) and *st; the request stays allocated. -ETIMEDOUT as waitany. */
    int (*view_wait)(hs_transport_t *t, hs_treq_t *req, double timeout_s, int *done,
                     const void **data, hs_tstatus_t *st);
    /* Free a view receive, complete or not; a mapped sender's buffer is handed back (its send
     * completes, in the order the sender sent). *req = NULL. */
    void (*view_release)(hs_transport_t *t, hs_treq_t **req);
    /* Optional (NULL: -ENOSYS): shared buffers between same-host ranks (the direct all-reduce).
     * Describe [buf, buf + len), which must lie in one buffer of this rank's buf_alloc, in *h
     * (-ENOENT when it does not), for a peer's peer_map. */
    int (*buf_handle)(hs_transport_t *t, const void *buf, size_t len, hs_tbuf_handle_t *h);
    /* Map the bytes peer's handle h describes here, readable and writable (hsshm: its memfd,
     * populated): *ptr is its first byte. Mappings are counted: each successful call is
     * matched by one peer_unmap of the same pointer. Errors name the peer. */
    int (*peer_map)(hs_transport_t *t, int peer, const hs_tbuf_handle_t *h, void **ptr);
    void (*peer_unmap)(hs_transport_t *t, int peer, void *ptr);
    /* Optional (NULL: 0). 1 when this rank's link to peer is shaped (latency, jitter or a
     * bandwidth cap; peer < 0: any of its links), else 0. Shortcuts that move bytes without
     * messages (the all-reduce's mapped and direct paths) give way where this is 1. */
    int (*shaped)(const hs_transport_t *t, int peer);
    /* What the backend can do: HS_TCAP_* flags (the registry's claims, docs/transport.md's
     * table). A claimed capability works; an unclaimed one is refused with -ENOSYS and a
     * message (tests/test_conformance.c holds every backend to this). */
    uint32_t caps;
    /* Optional (NULL: caps). What this open transport can do, a subset of caps where it
     * depends on the provider in use (libfabric's shm cannot probe, tcp has float atomics). */
    uint32_t (*caps_of)(const hs_transport_t *t);
    /* Optional (NULL: hs_transport_provider). The provider carrying this job's same-host
     * (same_host 1) or other-host (0) pairs (the per-pair backend: "hsshm", "tcp;ofi_rxm"). */
    const char *(*pair_provider)(const hs_transport_t *t, int same_host);
    /* Optional (NULL: -ENOSYS). Peer is out of the job (fenced: frozen, not known to have
     * exited) and may still run, or wake and run again: take back every message with user tag
     * `tag` that this rank sent it and that it has not begun to take, atomically against its
     * own taking (hsshm: a record is either claimed by the receiver or taken back by the
     * sender, never both). Eager messages wholly in its ring go to cb (their sends had
     * completed) and are forgotten; by-address sends and queued or half-written sends fail
     * with -ECANCELED (the caller keeps what it sent). A message the peer had begun to take
     * stays its own: its send completes when the peer finishes it (fails if it exits first).
     * Returns how many messages it handed to cb. */
    int (*revoke)(hs_transport_t *t, int peer, uint32_t tag, hs_transport_msg_fn cb, void *ctx);
} hs_transport_ops_t;

/* Capability flags (hs_transport_ops_t.caps, hs_transport_caps). */
#define HS_TCAP_TAGGED       (1u << 0)  /* tagged sends and receives from a named rank */
#define HS_TCAP_ANY_SOURCE   (1u << 1)  /* receives from HS_ANY_SOURCE */
#define HS_TCAP_PROBE        (1u << 2)  /* hs_transport_probe */
#define HS_TCAP_LIVENESS     (1u << 3)  /* hs_transport_peer_gone answers for same-host peers */
#define HS_TCAP_PEER_MAP     (1u << 4)  /* views in place: buf_handle / peer_map (same host) */
#define HS_TCAP_WINDOWS      (1u << 5)  /* memory windows: win_create, put, get */
#define HS_TCAP_ATOMIC_FLOAT (1u << 6)  /* atomic_add_float / _double into windows */
#define HS_TCAP_PEER_READ    (1u << 7)  /* hs_transport_peer_read (same host) */
#define HS_TCAP_UNSENT       (1u << 8)  /* hs_transport_unsent and hs_transport_leave */
#define HS_TCAP_MEM_HOST     (1u << 9)  /* buffers in host memory */
#define HS_TCAP_MEM_DEVICE   (1u << 10) /* buffers in accelerator memory */
#define HS_TCAP_EARLY_SMALL                                                                        \
    (1u << 11) /* a small message that arrives before its receive is posted is matched (the        \
                * all-reduce pads tiny chunks to 4104 bytes where this is not claimed: libfabric   \
                * 1.17's shm loses them) */
#define HS_TCAP_COUNT 12

/* A registry entry: one per backend, listed in gossip/transport_registry.c's table. --provider
 * names reach a backend through it (hs_transport_lookup); the generic layer never names one. */
typedef struct hs_transport_entry {
    const char *name; /* the registry name: hsshm, hybrid, fabric */
    const hs_transport_ops_t *ops;
    const char *takes; /* the --provider names it takes: "hybrid, hsshm+P" */
    const char *help;  /* one line for `hearsay train --help` */
    /* Optional (NULL: the name only). 1 when the backend takes --provider p besides its name
     * (hybrid: hsshm+P; fabric: any libfabric provider name). */
    int (*claims)(const char *p);
    /* Optional. Check --provider p before any job exists (fabric: libfabric has it here). */
    int (*check)(const char *p);
    /* Optional: a backend built of two others per pair of ranks (hybrid). parts names the
     * backend of same-host pairs (local) and of other-host pairs (remote) for --provider p;
     * create_hosts opens it with their entries, the host of every rank (host_of) and remote's
     * provider name. */
    int (*parts)(const char *p, char *local, char *remote, size_t cap);
    int (*create_hosts)(hs_transport_t *t, const hs_transport_opts_t *o, const int *host_of,
                        const struct hs_transport_entry *local,
                        const struct hs_transport_entry *remote, const char *remote_provider);
} hs_transport_entry_t;

/* The registry: entry i (NULL past the last), the entry that takes --provider name (NULL for
 * auto, which the generic layer resolves, and for names no backend takes), and the --provider
 * names the registered transports take ("auto, hsshm, hybrid, hsshm+P, tcp, shm, ..."). */
const hs_transport_entry_t *hs_transport_registry_at(int i);
const hs_transport_entry_t *hs_transport_lookup(const char *name);
const char *hs_transport_names(void);
/* What this transport can do (HS_TCAP_*), and the flags as words ("tagged any-source ..."),
 * as docs/transport.md's table writes them; 0 or -ENAMETOOLONG. */
uint32_t hs_transport_caps(const hs_transport_t *t);
int hs_transport_caps_str(uint32_t caps, char *buf, size_t cap);

/* The context every backend shares; backends keep their own state in impl. */
struct hs_transport {
    const hs_transport_ops_t *ops;
    int rank, size;
    hs_transport_opts_t opts; /* copies of the strings live in the backend */
    void *impl;
};

/* The libfabric backend. */
extern const hs_transport_ops_t hs_fabric_ops;
/* The shared-memory backend (gossip/shm*.c). */
extern const hs_transport_ops_t hs_shm_ops;

/* Check a --provider name before any job exists: auto and hsshm, or a libfabric provider this
 * machine has with reliable tagged endpoints. 0 or an error naming it. */
int hs_transport_check_provider(const char *name);

/* Phase 1 of opening by hand: a local endpoint for (rank, size). all_local: 1 when every
 * rank runs on this host (decides "auto"). opts NULL = hs_transport_opts_default. */
int hs_transport_create(hs_transport_t **out, int rank, int size, int all_local,
                        const hs_transport_opts_t *opts);
/* Phase 1 with the host of every rank known (host_of[r]: rank r's host index, as
 * hs_boot_host_of): "auto" then picks the backend per pair of ranks: hsshm within a host,
 * libfabric's tcp across hosts ("hybrid"), when the job spans hosts and a host holds several
 * ranks. "hsshm+P" forces that with libfabric provider P across hosts. */
int hs_transport_create_hosts(hs_transport_t **out, int rank, int size, const int *host_of,
                              const hs_transport_opts_t *opts);
/* This endpoint's address blob: buf must hold HS_TRANSPORT_ADDR_MAX bytes; *len its size. */
int hs_transport_address(hs_transport_t *t, void *buf, size_t *len);
/* Phase 2: every rank's blob, `stride` bytes apart, in rank order (stride >= each blob). */
int hs_transport_connect(hs_transport_t *t, const void *all, size_t stride);
/* Both phases with the address exchange through the bootstrap (hs_boot_allgather). */
int hs_transport_open(hs_transport_t **out, struct hs_boot *boot, const hs_transport_opts_t *opts);
/* Close and free; *t = NULL. Safe on NULL. */
void hs_transport_close(hs_transport_t **t);

int hs_transport_rank(const hs_transport_t *t);
int hs_transport_size(const hs_transport_t *t);
/* libfabric provider name in use ("hsshm+tcp;ofi_rxm" for the per-pair backend). */
const char *hs_transport_provider(const hs_transport_t *t);
/* The backend carrying this job's same-host (same_host 1) or other-host (0) pairs: "hsshm",
 * or a libfabric provider such as "tcp;ofi_rxm". */
const char *hs_transport_pair_provider(const hs_transport_t *t, int same_host);

/* Non-blocking tagged send / receive (see the ops contract). */
int hs_transport_isend(hs_transport_t *t, int peer, uint32_t tag, const void *buf, size_t len,
                       hs_treq_t **req);
int hs_transport_irecv(hs_transport_t *t, int peer, uint32_t tag, void *buf, size_t cap,
                       hs_treq_t **req);
/* Non-blocking completion check; on completion frees *req and sets it to NULL. */
int hs_transport_test(hs_transport_t *t, hs_treq_t **req, int *done, hs_tstatus_t *st);
/* Block (without spinning) until *req completes; timeout_s <= 0 uses opts.timeout_s.
 * -ETIMEDOUT (request kept) names the peer; a dead peer is reported as -ECONNRESET. */
int hs_transport_wait(hs_transport_t *t, hs_treq_t **req, double timeout_s, hs_tstatus_t *st);
/* Block until one of n requests completes (*index), freeing it; timeout as above;
 * timeout_s == 0 polls once (*index = -1 when none). */
int hs_transport_waitany(hs_transport_t *t, hs_treq_t **reqs, int n, double timeout_s, int *index,
                         hs_tstatus_t *st);
/* Drive progress without blocking; returns completions seen (>= 0) or an error. */
int hs_transport_progress(hs_transport_t *t);
/* Has a message from peer (or HS_ANY_SOURCE) with tag (any tag when any_tag) arrived?
 * Non-blocking; *st gets its source, tag and length. */
int hs_transport_probe(hs_transport_t *t, int peer, uint32_t tag, int any_tag, int *found,
                       hs_tstatus_t *st);
/* Cancel (if incomplete) and free a request; *req = NULL. */
void hs_transport_req_free(hs_transport_t *t, hs_treq_t **req);
/* Blocking send / receive helpers (isend/irecv + wait with opts.timeout_s). */
int hs_transport_send(hs_transport_t *t, int peer, uint32_t tag, const void *buf, size_t len);
int hs_transport_recv(hs_transport_t *t, int peer, uint32_t tag, void *buf, size_t cap,
                      hs_tstatus_t *st);
/* Barrier over the transport (start-up, shutdown, tests; never on the training path). */
int hs_transport_barrier(hs_transport_t *t);

/* Direct reads of a same-host peer's memory (see the ops contract): 1 when every peer can
 * be read this way (hsshm where the kernel allows process_vm_readv), else 0. */
int hs_transport_peer_read_ok(const hs_transport_t *t);
/* 1 when the backend has direct reads at all (the same on every rank of a job, unlike
 * hs_transport_peer_read_ok, which depends on what this rank was allowed). */
int hs_transport_has_peer_read(const hs_transport_t *t);
/* -ENOSYS where unsupported; errors name the peer (a dead one: -ECONNRESET). */
int hs_transport_peer_read(hs_transport_t *t, int peer, uint64_t remote, void *local, size_t len);
/* 1 when this rank's link to peer is shaped (hearsay/shaping.h; peer < 0: any of its links),
 * else 0 (also where the backend cannot say). Link shaping applies to messages and one-sided
 * puts and gets; the same-host shortcuts (peer_read, peer_map) bypass it, so collectives that
 * use them must take messages instead where a link is shaped (gossip/allreduce.c). */
int hs_transport_shaped(const hs_transport_t *t, int peer);

/* Push-sum bookkeeping after a peer's death (see the ops table): the messages with `tag`
 * this rank sent to `peer`, which has exited or left, and that it never began to take, handed
 * to cb once each. The count, -EBUSY while the peer runs, -ENOSYS where the backend cannot
 * know (libfabric: what was sent is the receiver's once the send completed). */
int hs_transport_unsent(hs_transport_t *t, int peer, uint32_t tag, hs_transport_msg_fn cb,
                        void *ctx);
/* 1 when peer's process has exited, 0 while it runs, -ENOSYS when the backend cannot know
 * (another host); never blocks (see the ops table). */
int hs_transport_peer_gone(hs_transport_t *t, int peer);
/* This rank is about to exit: stop receiving and hand what arrived with `tag` and was not
 * delivered to cb (see the ops table). The count, or -ENOSYS (libfabric). */
int hs_transport_leave(hs_transport_t *t, uint32_t tag, hs_transport_msg_fn cb, void *ctx);
/* Take back what peer has not begun to take of this rank's messages with `tag`, while it may
 * still run (see hs_transport_ops_t.revoke). -ENOSYS where the backend cannot (libfabric). */
int hs_transport_revoke(hs_transport_t *t, int peer, uint32_t tag, hs_transport_msg_fn cb,
                        void *ctx);

/* Zero-copy exchange on one host (hsshm; every backend takes the calls, see the ops table).
 * A sender that writes its message straight into a buffer of hs_transport_buf_alloc and sends
 * it from there makes no copy; a receiver that posts hs_transport_irecv_view reads a mapped
 * sender's bytes in place (hs_tview_data) and releases them with hs_transport_view_release,
 * which is also what completes the sender's send. Elsewhere the buffer is plain memory and the
 * view owns a copy: same results, one copy more. */
int hs_transport_buf_alloc(hs_transport_t *t, size_t len, void **buf);
/* Free a buffer of hs_transport_buf_alloc (no send from it in flight); *buf = NULL. */
void hs_transport_buf_free(hs_transport_t *t, void **buf);
/* Post a view receive of at most cap bytes from peer (not HS_ANY_SOURCE) with tag. */
int hs_transport_irecv_view(hs_transport_t *t, int peer, uint32_t tag, size_t cap,
                            hs_tview_t **view);
/* Wait for it: timeout_s > 0 blocks up to that long (-ETIMEDOUT naming the peer), 0 polls,
 * < 0 uses opts.timeout_s. *done = 1 once its bytes are readable (hs_tview_data). A failed
 * receive returns its error; the view must still be released. */
int hs_transport_view_wait(hs_transport_t *t, hs_tview_t *view, double timeout_s, int *done);
/* The bytes of a completed view (read-only, valid until it is released), their length and
 * source. */
const void *hs_tview_data(const hs_tview_t *view);
size_t hs_tview_len(const hs_tview_t *view);
int hs_tview_source(const hs_tview_t *view);
/* Release a view (complete or not; an incomplete one is cancelled); *view = NULL. */
void hs_transport_view_release(hs_transport_t *t, hs_tview_t **view);

/* Shared buffers on one host (hsshm; -ENOSYS elsewhere, where callers copy instead): a rank
 * describes part of a buffer of hs_transport_buf_alloc in a handle (-ENOENT when [buf,
 * buf + len) is not in one), sends it to a peer on the same host, and the peer maps those
 * bytes read-write with hs_transport_peer_map: both then load and store the same memory, and
 * ordering is theirs to arrange (atomics in such memory work across the processes, futexes
 * too). Each successful peer_map is undone by one hs_transport_peer_unmap of its pointer
 * (mappings of one buffer are shared and counted); mappings left at close are dropped. */
int hs_transport_has_peer_map(const hs_transport_t *t);
int hs_transport_buf_handle(hs_transport_t *t, const void *buf, size_t len, hs_tbuf_handle_t *h);
int hs_transport_peer_map(hs_transport_t *t, int peer, const hs_tbuf_handle_t *h, void **ptr);
void hs_transport_peer_unmap(hs_transport_t *t, int peer, void **ptr);

/*
 * Memory of any kind (gossip/transport_mem.c; issue 27): a buffer handed to the transport is
 * registered once for its lifetime with the kernels whose memory it is, as libfabric's
 * fi_mr_regattr takes an FI_HMEM_CUDA buffer and NCCL's regMr a device one. A registration
 * knows its memory kind: host memory (k NULL or a CPU backend) or device memory (CUDA, the
 * emulated device). Device memory goes to and from the wire through staging buffers of the
 * kernels' host memory (page-locked on CUDA; four of them, HS_TMR_CHUNK bytes each, set up at
 * registration), in chunks, so that the copy of one chunk overlaps the wire of the one before;
 * no host code reads the device memory (under AddressSanitizer the emulated device's poison
 * would report it). A backend claiming HS_TCAP_MEM_DEVICE would take the device pointers as
 * they are (none does yet: hsshm's CUDA IPC waits for a GPU).
 *
 * The wire is the same whatever the kinds on either side: len bytes go as ceil(len /
 * HS_TMR_CHUNK) messages (one, empty, for len 0) with the same tag, in order, so a device
 * buffer on one rank exchanges with a host buffer on another. The receiver names the exact
 * length; a chunk of another length fails with -EPROTO. Both calls block (bounded by the
 * transport's timeout: a wait that passes it fails with -ETIMEDOUT naming the peer) and take a
 * named peer. Plain isend/irecv refuse device memory of the emulated device (-EFAULT, naming
 * this API), where a real device would fault.
 */
typedef struct hs_tmr hs_tmr_t;
struct hs_kernels;
#define HS_TMR_CHUNK ((size_t)1 << 20)
enum { HS_TMEM_HOST = 0, HS_TMEM_DEVICE = 1 };
/* Register [buf, buf + len) as memory of k (NULL: host memory); `what` names it in errors. */
int hs_transport_mr_reg(hs_transport_t *t, struct hs_kernels *k, void *buf, size_t len,
                        const char *what, hs_tmr_t **mr);
/* Free a registration (no send or receive of it in progress); *mr = NULL. Safe on NULL. A
 * registration carries one transfer at a time (it keeps its staging buffers and the peers'
 * mappings): threads that move the same buffer at once each register it. */
void hs_transport_mr_dereg(hs_transport_t *t, hs_tmr_t **mr);
/* HS_TMEM_HOST or HS_TMEM_DEVICE. */
int hs_transport_mr_kind(const hs_tmr_t *mr);
/* Send bytes [off, off + len) of a registered buffer to peer with tag, or receive exactly len
 * bytes from peer into them; both return when the bytes are out of (in) the buffer. */
int hs_transport_send_mr(hs_transport_t *t, int peer, uint32_t tag, hs_tmr_t *mr, size_t off,
                         size_t len);
int hs_transport_recv_mr(hs_transport_t *t, int peer, uint32_t tag, hs_tmr_t *mr, size_t off,
                         size_t len);

/* Collective: expose buf[0..len) on every rank as a window. */
int hs_transport_win_create(hs_transport_t *t, void *buf, size_t len, hs_twin_t **win);
void hs_transport_win_free(hs_transport_t *t, hs_twin_t **win);
int hs_transport_put(hs_transport_t *t, hs_twin_t *w, int target, size_t offset, const void *buf,
                     size_t len, hs_treq_t **req);
int hs_transport_get(hs_transport_t *t, hs_twin_t *w, int target, size_t offset, void *buf,
                     size_t len, hs_treq_t **req);
/* Atomic add of n floats into target's window (offset in bytes, 4-aligned); -ENOSYS when
 * the provider has no float atomics. The _double variant adds doubles. */
int hs_transport_atomic_add_float(hs_transport_t *t, hs_twin_t *w, int target, size_t offset,
                                  const float *buf, size_t n, hs_treq_t **req);
int hs_transport_atomic_add_double(hs_transport_t *t, hs_twin_t *w, int target, size_t offset,
                                   const double *buf, size_t n, hs_treq_t **req);

#ifdef __cplusplus
}
#endif
#endif
