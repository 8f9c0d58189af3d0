/*
 * runtime/sim/sim_impl.h — private state of the virtual-time simulator (hearsay/sim.h) and the
 * functions its files share. One job a file:
 *
 *   sched.c      the scheduler: virtual time, the baton and the ready queue, the deadline heap,
 *                the event heap (messages by delivery time), the accounting of the workers'
 *                code against the simulator's; it reaches the rest only through the world's
 *                callbacks (w->deliver, w->net's contract), never by name
 *   exec.c       the virtual execution environment (hs_exec_t "virtual": vx_*, ax_*) and the
 *                services (svc_*)
 *   transport.c  the simulated transport's operations (hs_transport_ops_t: st_*, a_*)
 *   queues.c     messages and requests (the pools), matching, the posted and unexpected
 *                queues, a delivery
 *   net_ideal.c, net_links.c, net_fifo.c, net_fair.c
 *                the network models behind one contract (sim_net_ops_t, below): ideal, the
 *                --link shaper, the NICs first-in first-out, the NICs shared max-min fairly
 *   net_rndv.c   the rendezvous protocol (--sim-proto rndv=BYTES), a decorator over a model
 *   measure.c    the consensus measurement (consensus.csv), sim.json, the bench step
 *   run.c        hs_sim_run: the world's set-up and teardown; the option parsers
 *
 * Threads and the baton. Each rank's training loop and each service it starts is a POSIX
 * thread, but only the holder of the baton runs: a thread runs until it blocks (a wait, a
 * sleep, a service wait, a barrier, a join) or ends, then picks the next thread itself and
 * hands the baton to it (pick_next, hand_to). The choice is deterministic: the ready thread
 * that became ready first (a first-in first-out queue); when none is ready, the clock jumps to
 * the earliest event (a message delivery, a network model's next event or a deadline), the
 * events due then are applied in (time, sequence) order and wake the threads they concern.
 * Nothing depends on the host's scheduling, so a run with a fixed compute model repeats bit
 * for bit. The one exception to "only the holder runs": gradients (vx_local) run off the
 * baton, side by side, in a way that changes no event's order.
 *
 * Messages. A send copies its payload at once; the send completes when the message is
 * delivered, at the time the network model gives (ideal; the links of hearsay/shaping.h:
 * store and forward at the link's bandwidth, plus latency and seeded jitter, never reordering
 * a link; the NICs, --sim-nic). Delivery matches the destination's posted receives in posting
 * order (source or HS_ANY_SOURCE, tag), else joins its unexpected queue, which later receives
 * search first. A rank that crashed is dead: what it sent before is still delivered, what is
 * sent to it is dropped, a send posted to it fails, and a receive naming it fails with
 * -ECONNRESET once nothing from it is left in flight.
 */
#ifndef HEARSAY_RUNTIME_SIM_IMPL_H
#define HEARSAY_RUNTIME_SIM_IMPL_H

#include "hearsay/bootstrap.h"
#include "hearsay/common.h"
#include "hearsay/exec.h"
#include "hearsay/shaping.h"
#include "hearsay/sim.h"
#include "hearsay/train.h"
#include "hearsay/transport.h"

#include <math.h>
#include <pthread.h>
#include <semaphore.h>
#include <stddef.h>
#include <stdint.h>

#define IDLE_SLICE_S 0.1 /* the owner's waits call the idle hook this often (virtual s) */
/* The bytes of a rendezvous's control message (--sim-proto rndv=BYTES) through the NICs: about
 * ofi_rxm's packet header with a buffer descriptor (~100 bytes); at 100 Mbit/s it takes 10 us,
 * so its exact size hardly matters. */
#define SIM_CTRL_BYTES 128

typedef struct sim_world sim_world_t;
typedef struct sim_rank sim_rank_t;
typedef struct sim_thread sim_thread_t;

enum { T_NEW, T_READY, T_RUNNING, T_BLOCKED, T_DONE };

struct sim_thread {
    sim_world_t *w;
    sim_rank_t *rk;
    pthread_t th;
    sem_t go;
    int state;
    int exited;     /* its function returned (the thread can be joined) */
    int sleeping;   /* blocked in a sleep: only its deadline wakes it */
    int depth;      /* > 0: in the simulator's code (accounting: hs_sim_in, hs_sim_out) */
    double left_at; /* when it last went back to the workers' code (hs_now) */
    double cpu_at;  /* measured-all: its CPU clock then (hs_thread_cpu_s) */
    double owed;    /* ... CPU seconds of the workers' code not yet paid in virtual time */
    int locks;      /* service locks it holds (hs_svc_lock): it pays nothing meanwhile */
    int uncounted;  /* > 0: in an observer's stretch (hs_exec_uncounted): it pays nothing */
    double wake_at; /* while blocked: the deadline (INFINITY: none) */
    int idx;        /* its place in w->th (the order it was started in) */
    int hpos;       /* its place in the deadline heap w->dl (-1: not there) */
    void *(*fn)(void *);
    void *arg;
    sim_thread_t *next_ready; /* the ready queue */
    sim_thread_t *next_in_rank;
};

/* What a message in the NICs is: the workers' own (MSG_DATA), or one of the transport's
 * control messages of a rendezvous (--sim-proto rndv=BYTES): the sender's request to send
 * (MSG_RTS), the receiver's read request (MSG_RREQ) and its closing message (MSG_DONE). */
enum { MSG_DATA, MSG_RTS, MSG_RREQ, MSG_DONE };

/* A message in flight or waiting unexpected. */
typedef struct sim_msg {
    int src, dst;
    uint32_t tag;
    size_t len;
    size_t wire; /* bytes the network model carries (--sim-payload; 0: len) */
    double at;   /* delivery time */
    uint64_t seq;
    size_t cap;            /* bytes data[] can hold (messages are recycled: hs_sim_msg_get) */
    int reclaimed;         /* taken back by its sender (unsent): never delivered */
    struct hs_treq *sreq;  /* its send request, completed when it is delivered (NULL: none) */
    struct sim_msg *next;  /* unexpected queue; the NICs' flows (fair sharing), in send order */
    int active;            /* fair sharing: the first of its (src, dst) pair in the NICs */
    double rem, rate;      /* ... its bytes not yet through the NICs, and its rate now */
    int kind;              /* MSG_DATA, or a rendezvous's control message (--sim-proto) */
    int ord;               /* fair sharing: its place among the active flows (flows_share) */
    int rndv;              /* MSG_DATA: it goes by a rendezvous (moves on the read request) */
    int indexed;           /* unexpected: on its source's chain (snext, sprev) */
    struct sim_msg *ref;   /* a control message: its data message; a rendezvous's data
                            * message: its control message, parked until the data is in */
    struct sim_msg *uprev; /* unexpected: the one before it in its rank's queue */
    struct sim_msg *snext, *sprev; /* ... its source's chain of them (indexed) */
    unsigned char data[];          /* (received in place: aligned as malloc's, see below) */
} sim_msg_t;
/* A message is received in place (services read their headers from data[]): data[] must be
 * aligned for any wire header (an int after the last pointer made it 4 mod 8: UBSan). */
_Static_assert(offsetof(sim_msg_t, data) % 8 == 0, "sim_msg_t.data must be 8-byte aligned");

struct hs_treq {
    int send; /* 1: a send, 0: a receive */
    int peer; /* destination, or source (HS_ANY_SOURCE) */
    uint32_t tag;
    void *buf;
    size_t cap;
    int done, err;
    hs_tstatus_t st;
    struct hs_treq *next, *prev;   /* posted receives of its source (a sim_post_chain_t) */
    uint64_t pseq;                 /* ... its place in its rank's posting order */
    int posted;                    /* on a posted chain */
    sim_rank_t *rk;                /* a receive's rank */
    struct hs_treq *cprev, *cnext; /* completed receives not yet taken (rk->completed) */
    int on_completed;
    struct sim_msg *msg; /* a send: its message while in flight */
    int inplace;         /* a receive without a buffer (services): it keeps the message */
    hs_service_t *svc; /* a pure service's receive: handled when it completes (hs_sim_svc_inline) */
    int slot;          /* ... its slot */
    struct sim_msg *held; /* an in-place receive, completed: its message (data: held->data) */
};

/* A rank's posted receives from one source (peer: -2 an empty slot of the table), and its
 * unexpected messages from that source, in arrival order. */
typedef struct sim_post_chain {
    int peer;
    struct hs_treq *head, *tail;
    struct sim_msg *uhead, *utail;
} sim_post_chain_t;

struct sim_rank {
    int rank;
    int dead;
    int busy; /* its main thread runs local work off the baton (vx_local; w->mu) */
    hs_transport_t *t;
    hs_exec_t *x;
    hs_boot_t *boot;
    hs_shaper_t *shaper;
    /* Posted receives, one chain per source in posting order (post_seq numbers them across
     * chains): a message from src is matched against src's chain and the any-source chain
     * only, not against every receive of the rank (a walk of all of them was a growing share
     * of a step: SGP keeps 8 per peer, 2 log2 N peers on exp1peer). chains: open addressing
     * by source, chains_cap a power of two (0: none yet), sized by the sources it posts for. */
    sim_post_chain_t *chains;
    int chains_cap, chains_n;
    sim_post_chain_t any; /* HS_ANY_SOURCE's */
    uint64_t post_seq;
    struct hs_treq *completed; /* completed receives nobody has taken yet (see leave) */
    sim_msg_t *unexpected;     /* arrived, not yet received, in order (next, uprev) */
    sim_msg_t *unexp_last;     /* ... its last (rank 0's holds every rank's end-of-run
                                * results for a moment: a walk to the end was O(N^2)) */
    int unexp_flat; /* the chains above could not be grown: receives search the whole queue */
    sim_msg_t *dead_letters; /* arrived after it left or died: its senders' (unsent) */
    int left;                /* hs_transport_leave: receives nothing any more */
    double rejoin_at;        /* a replacement's start after a crash (crash:...:rejoin=D) */
    /* --straggler freeze: frozen from frozen_since until frozen_until (INFINITY: for good);
     * meanwhile its threads are not scheduled and what reaches it waits unmatched (0, 0: it
     * runs) */
    double frozen_since, frozen_until;
    /* --sim-proto rndv: requests to send that reached it frozen (a stopped process asks for
     * no data): their read requests go out when it thaws or ends (hs_sim_rndv_release) */
    struct sim_msg *rts_held, *rts_held_tail;
    sim_thread_t *main;
    sim_thread_t *threads; /* this rank's threads (next_in_rank) */
    hs_train_result_t res;
    int rc;
    char msg[HS_ERRMSG_MAX];
};

/* The consensus of one iteration, summed as the ranks report it (hs_exec_t.observe). */
typedef struct sim_cons {
    long iter;
    int count;
    double t_max, norm2;
    double *sum; /* (n) */
} sim_cons_t;

/* A finished row of consensus.csv. */
typedef struct sim_cons_row {
    long iter;
    int ranks;
    double t, dist;
} sim_cons_row_t;

struct sim_world {
    const hs_train_opts_t *o;
    sim_cons_t *cons; /* pending iterations */
    int ncons, capcons;
    sim_cons_row_t *rows;
    long nrows, caprows;
    size_t nparams;
    int cons_rc;
    int rph;                 /* ranks per host */
    double nic_Bps;          /* each host's NIC (0: none) */
    double *nic_tx, *nic_rx; /* (hosts) FIFO: when each NIC is free again; fair: scratch */
    int nic_fair;            /* the NICs share their rate among the flows through them */
    int *nic_ntx, *nic_nrx;  /* fair: scratch (hosts) */
    int *nic_atx, *nic_arx;  /* ... flows whose TCP acknowledgements cross each side */
    /* fair: flows_share's scratch. by_src / by_dst (capheap): the active flows grouped by
     * their sending / receiving host, each group in the flows' order, from offsets src_at /
     * dst_at (hosts + 1); sides (2 hosts): the NIC sides that still have flows without a
     * rate, transmit sides then receive sides, by host (the order a scan of every side
     * would see them in). */
    sim_msg_t **by_src, **by_dst;
    int *src_at, *dst_at, *sides;
    int fair_check;       /* HS_TEST_SIM_FAIR_CHECK: flows_share_check after every sharing */
    double *check_rate;   /* ... (capheap) its scratch */
    long fair_mismatches; /* ... rates that differed (the run fails) */
    long rndv_bytes;      /* --sim-proto: messages above this go by a rendezvous (0: none) */
    double ack_share;     /* ... acknowledgement frames per data byte, in time (0: none) */
    double payload_scale; /* --sim-payload: wire bytes per byte of a message's body (0: off) */
    size_t payload_hdr;   /* ... the running algorithm's header (hs_algo_ops_t.msg_header) */
    size_t payload_z;     /* ... the proxy's parameters in bytes */
    double wire_bytes;    /* bytes of every message between ranks, as carried */
    sim_msg_t *flows, *flows_tail; /* fair: messages in the NICs, in send order */
    int nflows;                    /* ... how many (the heap keeps room for them all) */
    double flows_t;                /* ... their rem is as of this time */
    double flows_next;             /* ... when the next of them is through (INFINITY: none) */
    /* The network model (the contract below) and the transport's delivery: the scheduler's
     * callbacks. nflows: the messages the model carries (the event heap keeps room for them). */
    struct sim_net *net;
    void (*deliver)(sim_world_t *w, sim_msg_t *m);
    int n;
    double now;
    uint64_t seq;
    double fixed_s; /* compute model: > 0 fixed, < 0 measured */
    int charge_all; /* measured-all: every stretch of the workers' code costs its CPU time */
    sem_t sched;
    sim_thread_t *current;
    int mains_left;                        /* ranks whose training loop has not ended */
    void *(*rejoin_main)(void *);          /* a replacement's thread (crash:...:rejoin=D) */
    int nfrozen;                           /* ranks frozen now (--straggler freeze) */
    int live;                              /* ranks not dead */
    sim_thread_t *ready_head, *ready_tail; /* ready threads, in the order they became ready */
    sim_thread_t **th;
    int nth, cap;
    /* The blocked threads with a deadline, by (wake_at, idx): advance finds the next
     * deadline and the threads due in O(log threads), not by a scan of every thread. A
     * thread is in it exactly while it is blocked with a finite deadline (hs_sim_dl_set,
     * hs_sim_dl_del). */
    sim_thread_t **dl;
    int ndl;
    sim_thread_t **due; /* (cap) advance's scratch: the threads due */
    sim_rank_t *rk;
    sim_msg_t **heap; /* messages in flight, by (at, seq) */
    int nheap, capheap;
    long *in_flight; /* (n) messages in flight from each rank */
    int barrier_count;
    uint64_t barrier_gen;
    size_t stack_bytes;
    /* Parallel local work (vx_local): at most `par` ranks' gradients run at once, off the
     * baton; mu guards the busy flags and local_s. */
    int par;
    sem_t slots;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int end_rc;       /* why the run ended early (hs_sim_pick_next), with its message */
    int first_failed; /* the first rank whose loop failed (not an injected crash); -1: none */
    int pin_cpu;      /* par == 1: the CPU every simulated thread runs on (-1: not pinned) */
    char end_msg[256];
    sim_msg_t *pool; /* freed messages kept for reuse (hs_sim_msg_get/hs_sim_msg_put) */
    struct hs_treq
        *req_pool;        /* freed requests kept for reuse (hs_sim_req_get, hs_sim_req_release) */
    sim_msg_t *ctrl_pool; /* freed control messages (hs_sim_ctrl_get, hs_sim_ctrl_put) */
    size_t pool_bytes;
    /* Accounting: wall seconds spent in the workers' own code (training loop, algorithms,
     * handlers, gradients) as opposed to the simulator's (scheduling, thread switches, the
     * simulated transport, the consensus measurement), on the monotonic clock (a thread's CPU
     * clock is a system call, 1.7 us here: reading it at every entry into the simulator cost
     * a tenth of a run). local_s: gradients (under mu when run off the baton). */
    double worker_s, local_s;
    long steps;
};

/* --- the network models: one contract ----------------------------------------------------
 * A model says when a message sent now arrives, or carries it itself. The transport asks
 * arrival() once per message, right before sending it (a model's state may move on: a NIC's
 * queue); a finite answer fixes the message's fate (the transport delivers it at once, or it
 * goes into the event heap at that time); INFINITY: the model carries it (carry), and when its
 * last byte is through puts it into the event heap itself (hs_sim_event_push). The scheduler
 * asks next_event() for the model's next own event and, the clock there, calls advance().
 * A decorator (the rendezvous) wraps another model (inner) and may have messages of its own
 * on the way: arrived() sees every message that leaves the event heap before the transport
 * delivers it, and returns 1 for one it consumed. */
typedef struct sim_net sim_net_t;

typedef struct sim_net_ops {
    const char *name;
    /* when a message of len bytes from src to dst, sent now, arrives (>= now), or INFINITY */
    double (*arrival)(sim_net_t *net, int src, int dst, size_t len);
    /* m (its fields set, m->at INFINITY) enters the model now; fails only when the event heap
     * must grow (its room: every message in flight or carried, hs_sim_event_reserve) */
    int (*carry)(sim_net_t *net, sim_msg_t *m);
    /* when the model's next event is (INFINITY: none) */
    double (*next_event)(const sim_net_t *net);
    /* the clock is at next_event(): what is through goes into the event heap */
    void (*advance)(sim_net_t *net);
    /* m leaves the event heap (the clock at m->at): 1 when it was the model's own */
    int (*arrived)(sim_net_t *net, sim_msg_t *m);
    /* the event heap grows to cap messages: the model's scratch with it (NULL: none) */
    int (*reserve)(sim_net_t *net, int cap);
    /* fn on each message the model carries, in the order they entered; the sum of fn's */
    int (*each)(sim_net_t *net, int (*fn)(sim_world_t *w, sim_msg_t *m, void *ctx), void *ctx);
} sim_net_ops_t;

struct sim_net {
    const sim_net_ops_t *ops;
    sim_world_t *w;
    sim_net_t *inner; /* a decorator's model (NULL: none) */
};

/* The bytes a message takes on the network (--sim-payload: the payload model's; transport.c),
 * and those of a message in flight. */
size_t hs_sim_wire_len(const sim_world_t *w, int src, int dst, uint32_t tag, size_t len);
static inline size_t hs_sim_wire_of(const sim_msg_t *m)
{
    return m->wire ? m->wire : m->len;
}

extern const sim_net_ops_t hs_sim_net_ideal; /* net_ideal.c: no network */
extern const sim_net_ops_t hs_sim_net_links; /* net_links.c: the --link shaper */
extern const sim_net_ops_t hs_sim_net_fifo;  /* net_fifo.c: --sim-nic-share fifo */
extern const sim_net_ops_t hs_sim_net_fair;  /* net_fair.c: --sim-nic-share fair */
extern const sim_net_ops_t hs_sim_net_rndv;  /* net_rndv.c: --sim-proto rndv=BYTES (inner) */
/* Rank d thawed or ended: the requests to send it held while frozen take their next step
 * (net_rndv.c; a no-op when it holds none). */
void hs_sim_rndv_release(sim_world_t *w, sim_rank_t *d);

/* A carrying model's answer to next_event when it carries nothing. */
static inline double hs_sim_net_none(const sim_net_t *net)
{
    (void)net;
    return INFINITY;
}

/* --- shared between the files -------------------------------------------------------------- */

/* A rank's virtual execution environment (hs_exec_t.impl). */
typedef struct sim_x {
    sim_world_t *w;
    sim_rank_t *rk;
} sim_x_t;

static inline sim_world_t *world_of(sim_rank_t *rk)
{
    return ((sim_x_t *)rk->x->impl)->w;
}

/* sched.c */
void hs_sim_dl_del(sim_world_t *w, sim_thread_t *t);
void hs_sim_dl_set(sim_world_t *w, sim_thread_t *t);
void hs_sim_make_ready(sim_thread_t *t);
void hs_sim_wake_rank(sim_rank_t *rk);
void hs_sim_wake_all(sim_world_t *w);
sim_thread_t *hs_sim_pick_next(sim_world_t *w);
void hs_sim_hand_to(sim_world_t *w, sim_thread_t *t);
void hs_sim_block_for(sim_world_t *w, double deadline, int sleeping);
void hs_sim_block_until(sim_world_t *w, double deadline);
sim_thread_t *hs_sim_current(sim_world_t *w);
int hs_sim_spawn(sim_world_t *w, sim_rank_t *rk, void *(*fn)(void *), void *arg,
                 sim_thread_t **out);
int hs_sim_event_reserve(sim_world_t *w, int extra);
int hs_sim_event_push(sim_world_t *w, sim_msg_t *m);
int hs_sim_barrier(sim_world_t *w);
void hs_sim_in(sim_world_t *w);
void hs_sim_back(sim_world_t *w);
void hs_sim_out(sim_world_t *w);
int hs_sim_run_all(sim_world_t *w);

/* queues.c */
sim_msg_t *hs_sim_msg_get(sim_world_t *w, size_t len);
void hs_sim_msg_put(sim_world_t *w, sim_msg_t *m);
sim_msg_t *hs_sim_ctrl_get(sim_world_t *w);
void hs_sim_ctrl_put(sim_world_t *w, sim_msg_t *c);
void hs_sim_msg_free_flight(sim_msg_t *m);
struct hs_treq *hs_sim_req_get(sim_world_t *w);
void hs_sim_req_put(sim_world_t *w, struct hs_treq *r);
void hs_sim_complete_recv_from(struct hs_treq *r, int src, uint32_t tag, const void *data,
                               size_t len);
int hs_sim_complete_recv(struct hs_treq *r, sim_msg_t *m);
void hs_sim_unpost(sim_rank_t *rk, struct hs_treq *r);
void hs_sim_unpost_all(sim_rank_t *rk);
struct hs_treq *hs_sim_take_posted(sim_rank_t *d, int src, uint32_t tag);
void hs_sim_off_completed(struct hs_treq *r);
void hs_sim_append(sim_msg_t **list, sim_msg_t *m);
void hs_sim_unexp_push(sim_rank_t *rk, sim_msg_t *m);
void hs_sim_unexp_remove(sim_rank_t *rk, sim_msg_t *m);
void hs_sim_complete_send(sim_world_t *w, sim_msg_t *m);
void hs_sim_deliver(sim_world_t *w, sim_msg_t *m);
/* A frozen rank thaws (--straggler freeze): what reached it meanwhile is matched now. */
void hs_sim_thaw(sim_world_t *w, sim_rank_t *d);
/* Only ranks frozen for good are left: end them (status 71); 1 when it did. */
int hs_sim_end_frozen(sim_world_t *w);
/* End rank rk, frozen for good, as a kill would (exec.c). */
void hs_sim_kill_frozen(sim_world_t *w, sim_rank_t *rk);
int hs_sim_post_req(sim_rank_t *rk, struct hs_treq *r);
int hs_sim_post_recv(sim_rank_t *rk, int peer, uint32_t tag, void *buf, size_t cap,
                     hs_service_t *svc, int slot, hs_treq_t **req);
void hs_sim_check_dead_source(sim_world_t *w, sim_rank_t *rk, struct hs_treq *r);
void hs_sim_req_release(hs_treq_t **req);
int hs_sim_take(hs_treq_t **req, hs_tstatus_t *st);

/* transport.c */
extern const hs_transport_ops_t hs_sim_transport_ops;
int hs_sim_wait_reqs(sim_world_t *w, sim_rank_t *rk, hs_treq_t **reqs, int n, double timeout_s,
                     int (*idle)(void *), void *idle_ctx, int *idx, hs_tstatus_t *st, int keep);
void hs_sim_st_req_free(hs_transport_t *t, hs_treq_t **req);

/* exec.c */
extern const hs_exec_ops_t hs_sim_exec_ops;
void hs_sim_svc_inline(sim_world_t *w, struct hs_treq *r, const void *data);

/* measure.c */
void hs_sim_observe(hs_exec_t *x, long iter, const float *z, size_t n);
int hs_sim_write_consensus(sim_world_t *w);
int hs_sim_write_stats(const hs_train_opts_t *o, const hs_sim_stats_t *s);
int hs_sim_bench_step(const hs_train_opts_t *o, int n, double *step_s);

/* The transport's and the execution environment's entry points: the workers' code enters the
 * simulator's (accounting: hs_sim_in, hs_sim_out). */
#define SIM_CALL(w, type, call)                                                                    \
    do {                                                                                           \
        sim_world_t *w_ = (w);                                                                     \
        hs_sim_in(w_);                                                                             \
        type r_ = call;                                                                            \
        hs_sim_out(w_);                                                                            \
        return r_;                                                                                 \
    } while (0)
#define SIM_CALL_VOID(w, call)                                                                     \
    do {                                                                                           \
        sim_world_t *w_ = (w);                                                                     \
        hs_sim_in(w_);                                                                             \
        call;                                                                                      \
        hs_sim_out(w_);                                                                            \
    } while (0)

#endif
