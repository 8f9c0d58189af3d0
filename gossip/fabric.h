/*
 * gossip/fabric.h — private state of the libfabric transport backend, shared by fabric.c
 * (set-up, provider selection, addresses), fabric_msg.c (tagged messages, progress, waits,
 * progress thread) and fabric_rma.c (memory windows, put/get, atomics).
 *
 * Locking: one mutex (fab_t.lock) guards the endpoint, the CQ, the pending queue and every
 * request. Public entry points take it; functions named *_locked expect it held.
 */
#ifndef HEARSAY_GOSSIP_FABRIC_H
#define HEARSAY_GOSSIP_FABRIC_H

#include "gossip/fabric_wire.h"
#include "hearsay/shaping.h"
#include "hearsay/transport.h"

#include <pthread.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

enum fab_op_kind { OP_SEND, OP_RECV, OP_WRITE, OP_READ, OP_ATOMIC, OP_PEEK };
enum fab_req_kind { REQ_SEND, REQ_RECV, REQ_RMA };

typedef struct fab_op {
    struct fi_context2 fctx;    /* first: libfabric hands it back as op_context */
    struct hs_treq *req;        /* NULL for a peek */
    struct fab_op *prev, *next; /* pending queue links while not yet posted */
    enum fab_op_kind kind;
    int peer;
    unsigned chunk;
    uint64_t tag, ignore; /* wire tag (and ignore mask for receives) */
    uint64_t data;        /* remote CQ data (total length) for FIRST chunks, 0 = none */
    char *buf;
    size_t len;
    double release; /* hs_now() time before which a shaped send is not posted */
    int queued;     /* 1 while in the pending queue */
    int posted;     /* 1 while the provider owns it */
    /* RMA */
    uint64_t raddr, rkey;
    int dtype; /* 4 float, 8 double (atomics) */
} fab_op_t;

struct hs_treq {
    enum fab_req_kind kind;
    int ctrl;     /* transport-internal message */
    int peer;     /* destination / source (-1: any, until chunk 0 arrives) / target */
    uint32_t tag; /* user tag (receives of any tag: learned from chunk 0) */
    char *buf;
    size_t cap;                                 /* receive capacity / send length */
    size_t len;                                 /* bytes transferred so far */
    unsigned nchunks, chunks_done, outstanding; /* outstanding: ops the provider owns */
    int complete;                               /* 1 once every chunk is done (or failed) */
    int err;                                    /* negative code when failed */
    int orphan;                                 /* freed by the user while ops were outstanding */
    char *errmsg;                               /* message of a failure (owned) */
    fab_op_t op0;                               /* chunk 0 */
    fab_op_t *ops; /* chunks 1..nchunks-1 (index k-1), NULL for single-chunk */
    double start;
    struct hs_treq *prev_live, *next_live;
};

typedef struct fab {
    hs_transport_t *t;
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_cq *cq;
    struct fid_ep *ep;
    int wait_fd; /* CQ wait fd, -1 when the provider has none (then: sleep with backoff) */
    int wake_fd; /* eventfd that wakes the thread blocked in poll (completion elsewhere, new
                  * timer, stop); always open */
    int poller;  /* a thread is blocked polling wait_fd / wake_fd; others wait on `cond` */
    char prov[HS_FAB_PROV_MAX];
    size_t chunk;
    int use_cq_data;
    int connected;
    fi_addr_t *addrs;        /* (size) */
    hs_fab_addr_v1_t *peers; /* (size) address blobs, for host / pid / messages */
    unsigned *seq_to;        /* (size) per destination message counters */
    double *last_alive;      /* (size) time of the last liveness check of each peer */
    hs_shape_t *shape;
    hs_shaper_t *shaper;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* broadcast on every completion (progress thread mode) */
    pthread_t thread;
    int thread_on, stop;
    fab_op_t pend;          /* pending queue head (sentinel), sorted by release time */
    unsigned post_pass;     /* counter of post_due passes */
    unsigned *blocked_pass; /* (size) pass in which a send to that peer got -FI_EAGAIN */
    double retry_at;        /* ops held back by -FI_EAGAIN are retried from this time on */
    double retry_backoff;   /* next hold-back (100 us doubling to 5 ms; reset on success) */
    struct hs_treq live;    /* sentinel of the list of live requests */
    uint64_t next_key;
    int mr_virt, mr_prov_key;
    int atomic_ok[2]; /* [0] float sum, [1] double sum */
    unsigned win_seq;
    int tx_posted, tx_max; /* sends/RMA the provider owns, and the cap (HS_FAB_TX_INFLIGHT) */
    /* The close's flush (ofi_rxm providers, whose sends complete once buffered): the peers
     * sent to, and the standing receive of their FINs (answered in the progress path). */
    unsigned char *sent_to;  /* (size) 1 once a message went to that rank; NULL: no flush */
    unsigned char *fin_from; /* (size) 1 once that rank's FIN came: it is closing */
    struct hs_treq *fin_rx;
    char fin_buf[8];
} fab_t;

/* fabric.c */
/* 0 when libfabric has provider `name` (tcp, verbs, ... as --provider takes them) with the
 * endpoints this backend needs; else an error naming it (the registry entry's check). */
int hs_fab_provider_check(const char *name);
int hs_fab_err(const fab_t *f, int ret, const char *call, int peer, const char *what);
const char *hs_fab_host_of(const fab_t *f, int rank);

/* fabric_msg.c */
hs_treq_t *hs_fab_req_new(fab_t *f, enum fab_req_kind kind, int peer, uint32_t tag);
void hs_fab_req_release_locked(fab_t *f, hs_treq_t *r);
void hs_fab_enqueue_locked(fab_t *f, fab_op_t *op);
int hs_fab_progress_locked(fab_t *f);
/* Wake the progress thread (a shaped op was queued whose release time it must plan for). */
void hs_fab_wake_thread(fab_t *f);
int hs_fab_start_thread(fab_t *f);
void hs_fab_stop_thread(fab_t *f);
int hs_fab_isend_any(hs_transport_t *t, int ctrl, int peer, uint32_t tag, const void *buf,
                     size_t len, hs_treq_t **req);
int hs_fab_irecv_any(hs_transport_t *t, int ctrl, int peer, uint32_t tag, int any_tag, void *buf,
                     size_t cap, hs_treq_t **req);
int hs_fab_isend(hs_transport_t *t, int peer, uint32_t tag, const void *buf, size_t len,
                 hs_treq_t **req);
int hs_fab_irecv(hs_transport_t *t, int peer, uint32_t tag, void *buf, size_t cap, hs_treq_t **req);
int hs_fab_test(hs_transport_t *t, hs_treq_t **req, int *done, hs_tstatus_t *st);
int hs_fab_waitany(hs_transport_t *t, hs_treq_t **reqs, int n, double timeout_s, int *index,
                   hs_tstatus_t *st);
int hs_fab_progress(hs_transport_t *t);
int hs_fab_probe(hs_transport_t *t, int peer, uint32_t tag, int any_tag, int *found,
                 hs_tstatus_t *st);
void hs_fab_req_free(hs_transport_t *t, hs_treq_t **req);
int hs_fab_barrier(hs_transport_t *t);
/* The close's flush: post the standing FIN receive (at connect), and wait (at most
 * timeout_s) until every rank this one sent to has confirmed the arrival of all of it, has
 * exited or has closed. Returns how many did neither in time. */
int hs_fab_fin_start(fab_t *f);
int hs_fab_flush(fab_t *f, double timeout_s);
/* 1 when a same-host peer's process has exited, 0 while it runs, -ENOSYS on another host. */
int hs_fab_peer_gone(hs_transport_t *t, int peer);
/* Record a failure in a request (message formatted like HS_ERR) and complete it. */
void hs_fab_req_fail_locked(fab_t *f, hs_treq_t *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* fabric_rma.c */
int hs_fab_win_create(hs_transport_t *t, void *buf, size_t len, hs_twin_t **win);
void hs_fab_win_free(hs_transport_t *t, hs_twin_t **win);
int hs_fab_put(hs_transport_t *t, hs_twin_t *w, int target, size_t offset, const void *buf,
               size_t len, hs_treq_t **req);
int hs_fab_get(hs_transport_t *t, hs_twin_t *w, int target, size_t offset, void *buf, size_t len,
               hs_treq_t **req);
int hs_fab_atomic_add(hs_transport_t *t, hs_twin_t *w, int target, size_t offset, const void *buf,
                      size_t n, int dtype, hs_treq_t **req);
void hs_fab_query_atomics(fab_t *f);
int hs_fab_post_rma_locked(fab_t *f, fab_op_t *op);

#endif
