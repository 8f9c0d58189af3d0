/*
 * runtime/sim.c — the virtual-time simulator (hearsay/sim.h): a discrete-event scheduler, the
 * virtual execution environment (hearsay/exec.h) and the simulated transport
 * (hs_transport_ops_t), for N ranks in one process.
 *
 * Threads and the baton. Each rank's training loop and each service it starts is a POSIX
 * thread, but only the holder of the baton runs: a thread runs until it blocks (a wait, a
 * sleep, a service wait, a barrier, a join) or ends, then picks the next thread itself and
 * hands the baton to it (pick_next, hand_to). The choice is deterministic: the ready thread
 * that became ready first (a first-in first-out queue); when none is ready, the clock jumps to
 * the earliest event (a message delivery or a deadline), the events due then are applied in
 * (time, sequence) order and wake the threads they concern. Nothing depends on the host's
 * scheduling, so a run with a fixed compute model repeats bit for bit. The one exception to
 * "only the holder runs": gradients (vx_local) run off the baton, side by side, in a way that
 * changes no event's order.
 *
 * Messages. A send copies its payload at once; the send completes when the message is
 * delivered, at the time the link model gives (hearsay/shaping.h: store and forward at the
 * link's bandwidth, plus latency and seeded jitter, never reordering a link; ideal without
 * --link). Delivery matches the destination's posted receives in posting order (source or
 * HS_ANY_SOURCE, tag), else joins its unexpected queue, which later receives search first.
 * A rank that crashed is dead: what it sent before is still delivered, what is sent to it is
 * dropped, a send posted to it fails, and a receive naming it fails with -ECONNRESET once
 * nothing from it is left in flight.
 */
#include "hearsay/sim.h"

#include "hearsay/algo.h"
#include "hearsay/allreduce.h"
#include "hearsay/bootstrap.h"
#include "hearsay/common.h"
#include "hearsay/env.h"
#include "hearsay/exec.h"
#include "hearsay/file.h"
#include "hearsay/nn.h"
#include "hearsay/shaping.h"
#include "hearsay/topology.h"
#include "hearsay/train.h"
#include "hearsay/transport.h"
#include "runtime/exec_svc.h" /* hs_svc_handle */

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

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
    int depth;      /* > 0: in the simulator's code (accounting: sim_in, sim_out) */
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
    size_t cap;           /* bytes data[] can hold (messages are recycled: msg_get) */
    int reclaimed;        /* taken back by its sender (unsent): never delivered */
    struct hs_treq *sreq; /* its send request, completed when it is delivered (NULL: none) */
    struct sim_msg *next; /* unexpected queue; the NICs' flows (fair sharing), in send order */
    int active;           /* fair sharing: the first of its (src, dst) pair in the NICs */
    double rem, rate;     /* ... its bytes not yet through the NICs, and its rate now */
    int kind;             /* MSG_DATA, or a rendezvous's control message (--sim-proto) */
    int ord;              /* fair sharing: its place among the active flows (flows_share) */
    int rndv;             /* MSG_DATA: it goes by a rendezvous (moves on the read request) */
    struct sim_msg *ref;  /* a control message: its data message; a rendezvous's data
                           * message: its control message, parked until the data is in */
    unsigned char data[];
} sim_msg_t;

struct hs_treq {
    int send; /* 1: a send, 0: a receive */
    int peer; /* destination, or source (HS_ANY_SOURCE) */
    uint32_t tag;
    void *buf;
    size_t cap;
    int done, err;
    hs_tstatus_t st;
    struct hs_treq *next, *prev;   /* posted receives (rk->posted, rk->posted_tail) */
    sim_rank_t *rk;                /* a receive's rank */
    struct hs_treq *cprev, *cnext; /* completed receives not yet taken (rk->completed) */
    int on_completed;
    struct sim_msg *msg;  /* a send: its message while in flight */
    int inplace;          /* a receive without a buffer (services): it keeps the message */
    hs_service_t *svc;    /* a pure service's receive: handled when it completes (svc_inline) */
    int slot;             /* ... its slot */
    struct sim_msg *held; /* an in-place receive, completed: its message (data: held->data) */
};

struct sim_rank {
    int rank;
    int dead;
    int busy; /* its main thread runs local work off the baton (vx_local; w->mu) */
    hs_transport_t *t;
    hs_exec_t *x;
    hs_boot_t *boot;
    hs_shaper_t *shaper;
    struct hs_treq *posted, *posted_tail; /* posted receives, in order */
    struct hs_treq *completed;            /* completed receives nobody has taken yet (see leave) */
    sim_msg_t *unexpected;                /* arrived, not yet received, in order */
    sim_msg_t **unexp_tail;  /* ... the link to its end (rank 0's holds every rank's end-of-run
                              * results for a moment: a walk to the end was O(N^2)) */
    sim_msg_t *dead_letters; /* arrived after it left or died: its senders' (unsent) */
    int left;                /* hs_transport_leave: receives nothing any more */
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
    int n;
    double now;
    uint64_t seq;
    double fixed_s; /* compute model: > 0 fixed, < 0 measured */
    int charge_all; /* measured-all: every stretch of the workers' code costs its CPU time */
    sem_t sched;
    sim_thread_t *current;
    int mains_left;                        /* ranks whose training loop has not ended */
    int live;                              /* ranks not dead */
    sim_thread_t *ready_head, *ready_tail; /* ready threads, in the order they became ready */
    sim_thread_t **th;
    int nth, cap;
    /* The blocked threads with a deadline, by (wake_at, idx): advance finds the next
     * deadline and the threads due in O(log threads), not by a scan of every thread. A
     * thread is in it exactly while it is blocked with a finite deadline (dl_set, dl_del). */
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
    int end_rc;       /* why the run ended early (pick_next), with its message */
    int first_failed; /* the first rank whose loop failed (not an injected crash); -1: none */
    int pin_cpu;      /* par == 1: the CPU every simulated thread runs on (-1: not pinned) */
    char end_msg[256];
    sim_msg_t *pool;          /* freed messages kept for reuse (msg_get/msg_put) */
    struct hs_treq *req_pool; /* freed requests kept for reuse (req_get, req_release) */
    sim_msg_t *ctrl_pool;     /* freed control messages (ctrl_get, ctrl_put) */
    size_t pool_bytes;
    /* Accounting: wall seconds spent in the workers' own code (training loop, algorithms,
     * handlers, gradients) as opposed to the simulator's (scheduling, thread switches, the
     * simulated transport, the consensus measurement), on the monotonic clock (a thread's CPU
     * clock is a system call, 1.7 us here: reading it at every entry into the simulator cost
     * a tenth of a run). local_s: gradients (under mu when run off the baton). */
    double worker_s, local_s;
    long steps;
};

/* --- the scheduler -------------------------------------------------------------------- */

static int dl_before(const sim_thread_t *a, const sim_thread_t *b)
{
    return a->wake_at < b->wake_at || (a->wake_at == b->wake_at && a->idx < b->idx);
}

static void dl_place(sim_world_t *w, int i, sim_thread_t *t)
{
    w->dl[i] = t;
    t->hpos = i;
}

static void dl_up(sim_world_t *w, int i)
{
    sim_thread_t *t = w->dl[i];
    while (i > 0 && dl_before(t, w->dl[(i - 1) / 2])) {
        dl_place(w, i, w->dl[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    dl_place(w, i, t);
}

static void dl_down(sim_world_t *w, int i)
{
    sim_thread_t *t = w->dl[i];
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        const sim_thread_t *best = t;
        if (l < w->ndl && dl_before(w->dl[l], best)) m = l, best = w->dl[l];
        if (r < w->ndl && dl_before(w->dl[r], best)) m = r;
        if (m == i) break;
        dl_place(w, i, w->dl[m]);
        i = m;
    }
    dl_place(w, i, t);
}

/* t leaves the deadline heap (if there). */
static void dl_del(sim_world_t *w, sim_thread_t *t)
{
    int i = t->hpos;
    if (i < 0) return;
    t->hpos = -1;
    sim_thread_t *last = w->dl[--w->ndl];
    if (i == w->ndl) return;
    dl_place(w, i, last);
    dl_up(w, i);
    dl_down(w, last->hpos);
}

/* t has just blocked until t->wake_at: into the deadline heap when that is finite (room for
 * every thread is kept: spawn). */
static void dl_set(sim_world_t *w, sim_thread_t *t)
{
    dl_del(w, t);
    if (!(t->wake_at < INFINITY)) return;
    dl_place(w, w->ndl++, t);
    dl_up(w, t->hpos);
}

static void make_ready(sim_thread_t *t)
{
    if (t->state == T_BLOCKED || t->state == T_NEW) {
        sim_world_t *w = t->w;
        dl_del(w, t);
        t->state = T_READY;
        t->next_ready = NULL;
        if (w->ready_tail)
            w->ready_tail->next_ready = t;
        else
            w->ready_head = t;
        w->ready_tail = t;
    }
}

/* Wake every blocked thread of rank rk (something it may wait for happened); a sleeping
 * thread waits for its deadline only. */
static void wake_rank(sim_rank_t *rk)
{
    for (sim_thread_t *t = rk->threads; t; t = t->next_in_rank)
        if (t->state == T_BLOCKED && !t->sleeping) make_ready(t);
}

static void wake_all(sim_world_t *w)
{
    for (int i = 0; i < w->nth; i++)
        if (w->th[i]->state == T_BLOCKED && !w->th[i]->sleeping) make_ready(w->th[i]);
}

static int advance(sim_world_t *w);

/* The baton holder picks the thread to run next: the first still ready (a crash ends some),
 * else the clock moves to the next event. NULL when the run is over (every rank's training
 * loop ended) or when nothing can ever happen again (w->end_rc and end_msg say so). */
static sim_thread_t *pick_next(sim_world_t *w)
{
    for (;;) {
        if (w->mains_left <= 0) return NULL;
        while (w->ready_head) {
            sim_thread_t *t = w->ready_head;
            w->ready_head = t->next_ready;
            if (!w->ready_head) w->ready_tail = NULL;
            if (t->state == T_READY) return t;
        }
        if (advance(w)) {
            w->end_rc = -EDEADLK;
            snprintf(w->end_msg, sizeof w->end_msg,
                     "sim: deadlock at virtual time %.6f s: %d rank(s) wait for something that "
                     "will never happen",
                     w->now, w->mains_left);
            return NULL;
        }
    }
}

/* Hand the baton to t (NULL: back to hs_sim_run, the run is over). The threads hand it to
 * each other directly: one switch per hand-over, not two through a scheduler thread. */
static void hand_to(sim_world_t *w, sim_thread_t *t)
{
    if (!t) {
        w->current = NULL;
        sem_post(&w->sched);
        return;
    }
    if (w->par > 1) { /* its rank's local work must end first */
        pthread_mutex_lock(&w->mu);
        while (t->rk->busy) pthread_cond_wait(&w->cv, &w->mu);
        pthread_mutex_unlock(&w->mu);
    }
    w->current = t;
    t->state = T_RUNNING;
    t->wake_at = INFINITY;
    sem_post(&t->go);
}

/* The running thread `me` (already marked blocked) gives up the baton until its turn. */
static void yield_baton(sim_world_t *w, sim_thread_t *me)
{
    sim_thread_t *next = pick_next(w);
    if (next == me) { /* its own deadline came first: it goes on */
        me->state = T_RUNNING;
        me->wake_at = INFINITY;
        return;
    }
    hand_to(w, next);
    sem_wait(&me->go);
}

/* The running thread blocks until woken or until `deadline` (virtual seconds); with
 * `sleeping`, until the deadline only. */
static void block_for(sim_world_t *w, double deadline, int sleeping)
{
    sim_thread_t *t = w->current;
    t->state = T_BLOCKED;
    t->sleeping = sleeping;
    t->wake_at = deadline;
    dl_set(w, t);
    yield_baton(w, t);
    t->sleeping = 0;
}

static void block_until(sim_world_t *w, double deadline)
{
    block_for(w, deadline, 0);
}

static sim_thread_t *current_of(sim_world_t *w)
{
    return w->current;
}

static void sim_in(sim_world_t *w);
static void sim_back(sim_world_t *w);
static void sim_out(sim_world_t *w);

static void *trampoline(void *arg)
{
    sim_thread_t *t = arg;
    sem_wait(&t->go);
    /* a rank's main thread starts in the workers' code; a service's in the simulator's */
    t->depth = t == t->rk->main ? 0 : 1;
    t->left_at = hs_now();
    if (t->w->charge_all) t->cpu_at = hs_thread_cpu_s();
    t->fn(t->arg);
    if (t == t->rk->main) sim_in(t->w);
    t->state = T_DONE;
    t->exited = 1;
    if (t == t->rk->main) t->w->mains_left--;
    wake_rank(t->rk); /* a joiner may wait for this thread */
    hand_to(t->w, pick_next(t->w));
    return NULL;
}

static int spawn(sim_world_t *w, sim_rank_t *rk, void *(*fn)(void *), void *arg, sim_thread_t **out)
{
    sim_thread_t *t = hs_calloc(1, sizeof *t, "simulated thread");
    if (!t) return -ENOMEM;
    t->w = w;
    t->rk = rk;
    t->fn = fn;
    t->arg = arg;
    t->state = T_NEW;
    t->wake_at = INFINITY;
    t->hpos = -1;
    sem_init(&t->go, 0, 0);
    if (w->nth == w->cap) {
        int nc = w->cap ? 2 * w->cap : 64;
        sim_thread_t **nt = realloc(w->th, (size_t)nc * sizeof *nt);
        if (!nt) {
            free(t);
            return HS_ERR(-ENOMEM, "out of memory for simulated threads");
        }
        w->th = nt;
        sim_thread_t **nd = realloc(w->dl, (size_t)nc * sizeof *nd);
        if (!nd) {
            free(t);
            return HS_ERR(-ENOMEM, "out of memory for simulated threads");
        }
        w->dl = nd;
        sim_thread_t **ne = realloc(w->due, (size_t)nc * sizeof *ne);
        if (!ne) {
            free(t);
            return HS_ERR(-ENOMEM, "out of memory for simulated threads");
        }
        w->due = ne;
        w->cap = nc;
    }
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, w->stack_bytes);
    if (w->pin_cpu >= 0) { /* one host thread: every hand-over stays on one core */
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(w->pin_cpu, &one);
        pthread_attr_setaffinity_np(&at, sizeof one, &one);
    }
    int rc = pthread_create(&t->th, &at, trampoline, t);
    pthread_attr_destroy(&at);
    if (rc != 0) {
        free(t);
        return HS_ERR(-rc, "cannot start a simulated thread (%d so far): %s", w->nth, strerror(rc));
    }
    t->idx = w->nth;
    w->th[w->nth++] = t;
    t->next_in_rank = rk->threads;
    rk->threads = t;
    make_ready(t);
    if (out) *out = t;
    return 0;
}

/* --- messages ------------------------------------------------------------------------- */

/* Messages are recycled: a model-sized message is above malloc's mmap threshold, and a fresh
 * mapping per send cost a page fault per 4 KiB (a quarter of a 64-rank run's time). */
#define POOL_MAX_BYTES ((size_t)256 << 20)

static sim_msg_t *msg_get(sim_world_t *w, size_t len)
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
static sim_msg_t *ctrl_get(sim_world_t *w)
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

static void ctrl_put(sim_world_t *w, sim_msg_t *c)
{
    c->next = w->ctrl_pool;
    w->ctrl_pool = c;
}

/* At the end of a run: m, still in flight, and the partner a rendezvous parks beside it (the
 * data beside its request to send or read request, the control message beside the data). */
static void msg_free_flight(sim_msg_t *m)
{
    if (m->kind == MSG_RTS || m->kind == MSG_RREQ)
        free(m->ref);
    else if (m->kind == MSG_DATA && m->rndv)
        free(m->ref);
    free(m);
}

static void msg_put(sim_world_t *w, sim_msg_t *m)
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
static struct hs_treq *req_get(sim_world_t *w)
{
    struct hs_treq *r = w->req_pool;
    if (!r) return hs_calloc(1, sizeof *r, "sim request");
    w->req_pool = r->next;
    memset(r, 0, sizeof *r);
    return r;
}

static void req_put(sim_world_t *w, struct hs_treq *r)
{
    r->next = w->req_pool;
    w->req_pool = r;
}

static int msg_before(const sim_msg_t *a, const sim_msg_t *b)
{
    return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

/* Room for extra more messages in flight. */
static int heap_reserve(sim_world_t *w, int extra)
{
    if (w->nheap + extra > w->capheap) {
        int nc = w->capheap ? 2 * w->capheap : 256;
        while (nc < w->nheap + extra) nc *= 2;
        sim_msg_t **nh = realloc(w->heap, (size_t)nc * sizeof *nh);
        if (!nh) return HS_ERR(-ENOMEM, "out of memory for messages in flight");
        w->heap = nh;
        if (w->nic_fair) { /* (flows_share's scratch: every message in flight may be a flow) */
            sim_msg_t **a = realloc(w->by_src, (size_t)nc * sizeof *a);
            if (!a) return HS_ERR(-ENOMEM, "out of memory for messages in flight");
            w->by_src = a;
            sim_msg_t **b = realloc(w->by_dst, (size_t)nc * sizeof *b);
            if (!b) return HS_ERR(-ENOMEM, "out of memory for messages in flight");
            w->by_dst = b;
            double *c = realloc(w->check_rate, (size_t)nc * sizeof *c);
            if (!c) return HS_ERR(-ENOMEM, "out of memory for messages in flight");
            w->check_rate = c;
        }
        w->capheap = nc;
    }
    return 0;
}

/* Push m (the heap always keeps room for the messages in the NICs: flows_settle pushes them
 * without failing). */
static int heap_push(sim_world_t *w, sim_msg_t *m)
{
    HS_TRY(heap_reserve(w, 1 + w->nflows));
    int i = w->nheap++;
    w->heap[i] = m;
    while (i > 0 && msg_before(w->heap[i], w->heap[(i - 1) / 2])) {
        sim_msg_t *tmp = w->heap[i];
        w->heap[i] = w->heap[(i - 1) / 2];
        w->heap[(i - 1) / 2] = tmp;
        i = (i - 1) / 2;
    }
    return 0;
}

static sim_msg_t *heap_pop(sim_world_t *w)
{
    sim_msg_t *top = w->heap[0];
    w->heap[0] = w->heap[--w->nheap];
    for (int i = 0;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < w->nheap && msg_before(w->heap[l], w->heap[m])) m = l;
        if (r < w->nheap && msg_before(w->heap[r], w->heap[m])) m = r;
        if (m == i) break;
        sim_msg_t *tmp = w->heap[i];
        w->heap[i] = w->heap[m];
        w->heap[m] = tmp;
        i = m;
    }
    return top;
}

static int matches(const struct hs_treq *r, const sim_msg_t *m)
{
    return r->tag == m->tag && (r->peer == HS_ANY_SOURCE || r->peer == m->src);
}

/* Complete receive r with a message of len bytes from src (data: copied into its buffer;
 * NULL: an in-place receive that has just been given the message). */
static void complete_recv_from(struct hs_treq *r, int src, uint32_t tag, const void *data,
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
static int complete_recv(struct hs_treq *r, sim_msg_t *m)
{
    if (r->inplace && m->len <= r->cap) {
        r->held = m;
        complete_recv_from(r, m->src, m->tag, NULL, m->len);
        return 1;
    }
    complete_recv_from(r, m->src, m->tag, m->data, m->len);
    return 0;
}

static void svc_inline(sim_world_t *w, struct hs_treq *r, const void *data);

static void unpost(sim_rank_t *rk, struct hs_treq *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else if (rk->posted == r)
        rk->posted = r->next;
    else
        return; /* not posted */
    if (r->next)
        r->next->prev = r->prev;
    else
        rk->posted_tail = r->prev;
    r->next = r->prev = NULL;
}

/* The first posted receive of rank d that matches (src, tag), taken off the posted list;
 * NULL when none. */
static struct hs_treq *take_posted(sim_rank_t *d, int src, uint32_t tag)
{
    for (struct hs_treq *r = d->posted; r; r = r->next) {
        if (r->tag != tag || (r->peer != HS_ANY_SOURCE && r->peer != src)) continue;
        unpost(d, r);
        return r;
    }
    return NULL;
}

static void off_completed(struct hs_treq *r)
{
    if (!r->on_completed) return;
    if (r->cprev)
        r->cprev->cnext = r->cnext;
    else
        r->rk->completed = r->cnext;
    if (r->cnext) r->cnext->cprev = r->cprev;
    r->on_completed = 0;
}

static void append(sim_msg_t **list, sim_msg_t *m)
{
    while (*list) list = &(*list)->next;
    m->next = NULL;
    *list = m;
}

/* m joins the end of rk's unexpected queue. */
static void unexp_push(sim_rank_t *rk, sim_msg_t *m)
{
    m->next = NULL;
    *rk->unexp_tail = m;
    rk->unexp_tail = &m->next;
}

/* The message *pp (pp: a link of rk's unexpected queue) leaves the queue. */
static void unexp_take(sim_rank_t *rk, sim_msg_t **pp)
{
    *pp = (*pp)->next;
    if (!*pp) rk->unexp_tail = pp;
}

/* A message reaches its destination (the clock is at m->at). */
/* A message has left its sender's side (delivered, or taken back): its send completes. */
static void complete_send(sim_world_t *w, sim_msg_t *m)
{
    if (!m->sreq) return;
    m->sreq->done = 1;
    m->sreq->msg = NULL;
    m->sreq = NULL;
    wake_rank(&w->rk[m->src]);
}

static void flows_enter(sim_world_t *w, sim_msg_t *m);
static void deliver(sim_world_t *w, sim_msg_t *m);

/* A control message of a rendezvous (--sim-proto rndv=BYTES) is through (the clock is at
 * c->at). As libfabric's ofi_rxm over tcp: the sender's request to send (RTS) reaches the
 * receiver, which asks for the data with a read request; that goes back on the receiver's
 * own byte stream to the sender, behind what the receiver is sending it already; when it
 * reaches the sender the data follows on the sender's stream, and once the data is in, the
 * receiver's closing message (DONE) goes back the same way as the read request; the send
 * completes when it arrives. The heap's room is unchanged (c leaves it, c or the data enters
 * the NICs). */
static void rndv_step(sim_world_t *w, sim_msg_t *c)
{
    sim_msg_t *m = c->ref;
    if (c->kind == MSG_DONE) {
        if (c->sreq) {
            c->sreq->done = 1;
            c->sreq->msg = NULL;
            wake_rank(&w->rk[c->dst]);
        }
        ctrl_put(w, c);
        return;
    }
    if (m->reclaimed) { /* its sender took it back (unsent): the send has completed */
        w->in_flight[m->src]--;
        msg_put(w, m);
        ctrl_put(w, c);
        return;
    }
    sim_rank_t *d = &w->rk[m->dst];
    if (c->kind == MSG_RTS && (d->dead || d->left)) { /* nobody will read it: it goes where a
                                                       * message to the gone rank goes */
        ctrl_put(w, c);
        m->rndv = 0;
        m->ref = NULL;
        deliver(w, m);
        return;
    }
    c->seq = ++w->seq;
    if (c->kind == MSG_RTS) { /* the receiver's read request, on its stream to the sender */
        c->kind = MSG_RREQ;
        c->src = m->dst;
        c->dst = m->src;
        flows_enter(w, c);
        return;
    }
    c->kind = MSG_DONE; /* (parked until the data is in) */
    flows_enter(w, m);
}

static void deliver(sim_world_t *w, sim_msg_t *m)
{
    if (m->kind != MSG_DATA) {
        rndv_step(w, m);
        return;
    }
    sim_rank_t *d = &w->rk[m->dst];
    w->in_flight[m->src]--;
    if (m->rndv) { /* the data is in: the closing message goes back, and completes the send */
        sim_msg_t *c = m->ref;
        m->rndv = 0;
        m->ref = NULL;
        if (m->reclaimed || d->dead || d->left) {
            ctrl_put(w, c);
        } else {
            c->src = m->dst;
            c->dst = m->src;
            c->seq = ++w->seq;
            c->ref = NULL;
            c->sreq = m->sreq;
            if (c->sreq) c->sreq->msg = c;
            m->sreq = NULL;
            flows_enter(w, c);
        }
    }
    complete_send(w, m);
    if (m->reclaimed) {
        msg_put(w, m);
        return;
    }
    if (d->dead || d->left) { /* its sender may take it back (unsent) */
        append(&d->dead_letters, m);
        return;
    }
    struct hs_treq *r = take_posted(d, m->src, m->tag);
    if (r) {
        if (!complete_recv(r, m)) msg_put(w, m);
        if (r->svc)
            svc_inline(w, r, NULL);
        else
            wake_rank(d);
        return;
    }
    unexp_push(d, m);
    wake_rank(d);
}

/* --- the simulated transport ------------------------------------------------------------ */

static sim_rank_t *rank_of(hs_transport_t *t)
{
    return t->impl;
}

static sim_world_t *world_of(sim_rank_t *rk);

/* --- the NICs shared fairly (--sim-nic with --sim-nic-share fair, the default) ------------
 * A message between two hosts is a flow through the sending host's NIC (tx) and the receiving
 * host's (rx). The flows of different rank pairs share each NIC as TCP connections share a
 * bottleneck: max-min fair rates (below), recomputed whenever a flow starts or ends; the
 * messages of one pair (one connection, one byte stream) go one after the other. When a
 * message's last byte is through, the link model (--link) takes it from there; without one it
 * is delivered then. */

static int host_of(const sim_world_t *w, int rank)
{
    return rank / w->rph;
}

/* The bytes a message takes on the network: its own, or under --sim-payload those the
 * payload model's message would have. A message of the algorithm (its tag range) keeps its
 * header (payload_hdr bytes) and its body grows by payload_scale; a header alone (a request,
 * a notice) stays as it is. The all-reduce module's messages are bodies only. The loop's
 * model snapshots (evaluation, end of run: a frame, z and a trailer) carry the payload's z in
 * place of the proxy's; its other messages stay as they are. A rank's message to itself
 * crosses no network. */
static size_t wire_len(const sim_world_t *w, int src, int dst, uint32_t tag, size_t len)
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

static size_t wire_of(const sim_msg_t *m)
{
    return m->wire ? m->wire : m->len;
}

/* Every active flow's bytes left, brought to the time now. */
static void flows_progress(sim_world_t *w)
{
    double dt = w->now - w->flows_t;
    if (dt > 0)
        for (sim_msg_t *m = w->flows; m; m = m->next)
            if (m->active) {
                m->rem -= m->rate * dt;
                if (m->rem < 0) m->rem = 0;
            }
    w->flows_t = w->now;
}

/* Max-min fair rates by progressive filling: of the NICs (tx, then rx, by host) that still
 * carry flows without a rate, the one whose rate left divided by those flows is the smallest
 * (the first such, on a tie) gives each of them that share, which is taken from the other NIC
 * each of them crosses; until every flow has its rate. */
/* With TCP's acknowledgements (--sim-proto acks), a flow at rate r also takes a * r of the
 * reverse direction (the receiving host's transmit side, the sending host's receive side), a
 * = w->ack_share: progressive filling with those weights (a side's flows without a rate grow
 * together, a side is full when its rate left equals (flows + a x reverse flows) x r). */
/* The flows of side (rx, h) to give a rate when it is the bottleneck, in the flows' order: the
 * flows whose data crosses it, and with acknowledgements (a > 0) those whose acknowledgements
 * do (a flow is between two hosts: no flow is in both). Merged by position in the flows' list
 * (each group is in that order). */
static void share_side(sim_world_t *w, int brx, int bh, double best, double a)
{
    sim_msg_t **x = brx ? w->by_dst + w->dst_at[bh] : w->by_src + w->src_at[bh];
    sim_msg_t **y = brx ? w->by_src + w->src_at[bh] : w->by_dst + w->dst_at[bh];
    int nx = brx ? w->dst_at[bh + 1] - w->dst_at[bh] : w->src_at[bh + 1] - w->src_at[bh];
    int ny =
        a > 0 ? (brx ? w->src_at[bh + 1] - w->src_at[bh] : w->dst_at[bh + 1] - w->dst_at[bh]) : 0;
    for (int i = 0, j = 0; i < nx || j < ny;) {
        sim_msg_t *m = j >= ny || (i < nx && x[i]->ord < y[j]->ord) ? x[i++] : y[j++];
        if (m->rate >= 0) continue;
        int hs = host_of(w, m->src), hd = host_of(w, m->dst);
        m->rate = best;
        w->nic_tx[hs] = HS_MAX(w->nic_tx[hs] - best, 0.0);
        w->nic_rx[hd] = HS_MAX(w->nic_rx[hd] - best, 0.0);
        w->nic_ntx[hs]--;
        w->nic_nrx[hd]--;
        if (a > 0) {
            w->nic_tx[hd] = HS_MAX(w->nic_tx[hd] - a * best, 0.0);
            w->nic_rx[hs] = HS_MAX(w->nic_rx[hs] - a * best, 0.0);
            w->nic_atx[hd]--;
            w->nic_arx[hs]--;
        }
    }
}

/* HS_TEST_SIM_FAIR_CHECK (tests): the rates flows_share gave, against the reference
 * progressive filling that scans every flow for every side it gives out (the simulator's
 * before issue 29), on scratch copies of the sides; a rate that differs in a bit is counted
 * (w->fair_mismatches) and fails the run. */
static void flows_share_check(sim_world_t *w)
{
    int nh = (w->n + w->rph - 1) / w->rph;
    double a = w->ack_share, *tx = w->nic_tx, *rx = w->nic_rx; /* (restored below) */
    int *ntx = w->nic_ntx, *nrx = w->nic_nrx, *atx = w->nic_atx, *arx = w->nic_arx;
    int nf = 0;
    for (sim_msg_t *m = w->flows; m; m = m->next)
        if (m->active) w->check_rate[nf++] = m->rate;
    for (int h = 0; h < nh; h++) {
        tx[h] = rx[h] = w->nic_Bps;
        ntx[h] = nrx[h] = atx[h] = arx[h] = 0;
    }
    for (sim_msg_t *m = w->flows; m; m = m->next)
        if (m->active) {
            m->rate = -1;
            ntx[host_of(w, m->src)]++;
            nrx[host_of(w, m->dst)]++;
            if (a > 0) {
                atx[host_of(w, m->dst)]++;
                arx[host_of(w, m->src)]++;
            }
        }
    for (;;) {
        double best = INFINITY;
        int bh = -1, brx = 0;
        for (int h = 0; h < nh; h++) {
            double k = ntx[h] + a * atx[h];
            if (ntx[h] + atx[h] > 0 && tx[h] / k < best) best = tx[h] / k, bh = h, brx = 0;
        }
        for (int h = 0; h < nh; h++) {
            double k = nrx[h] + a * arx[h];
            if (nrx[h] + arx[h] > 0 && rx[h] / k < best) best = rx[h] / k, bh = h, brx = 1;
        }
        if (bh < 0) break;
        for (sim_msg_t *m = w->flows; m; m = m->next) {
            int hs = host_of(w, m->src), hd = host_of(w, m->dst);
            if (!m->active || m->rate >= 0) continue;
            if ((brx ? hd : hs) != bh && !(a > 0 && (brx ? hs : hd) == bh)) continue;
            m->rate = best;
            tx[hs] = HS_MAX(tx[hs] - best, 0.0);
            rx[hd] = HS_MAX(rx[hd] - best, 0.0);
            ntx[hs]--;
            nrx[hd]--;
            if (a > 0) {
                tx[hd] = HS_MAX(tx[hd] - a * best, 0.0);
                rx[hs] = HS_MAX(rx[hs] - a * best, 0.0);
                atx[hd]--;
                arx[hs]--;
            }
        }
    }
    nf = 0;
    for (sim_msg_t *m = w->flows; m; m = m->next)
        if (m->active) {
            if (memcmp(&m->rate, &w->check_rate[nf], sizeof m->rate) != 0) w->fair_mismatches++;
            m->rate = w->check_rate[nf++]; /* (flows_share's stands) */
        }
}

/* The same progressive filling as a scan of every flow for every side given out would do, in
 * the same order and with the same arithmetic (every rate and every bytes-left bit for bit):
 * but each round looks only at the sides that still have flows without a rate and at the
 * flows of the side it gives out, so a recomputation costs O(flows + sides^2), not O(flows x
 * sides) (the complete graph on 64 hosts: 4,032 flows through 128 sides). */
static void flows_share(sim_world_t *w)
{
    int nh = (w->n + w->rph - 1) / w->rph;
    double a = w->ack_share;
    for (int h = 0; h < nh; h++) {
        w->nic_tx[h] = w->nic_rx[h] = w->nic_Bps;
        w->nic_ntx[h] = w->nic_nrx[h] = w->nic_atx[h] = w->nic_arx[h] = 0;
    }
    int nf = 0;
    for (sim_msg_t *m = w->flows; m; m = m->next)
        if (m->active) {
            m->rate = -1;
            m->ord = nf++;
            w->nic_ntx[host_of(w, m->src)]++;
            w->nic_nrx[host_of(w, m->dst)]++;
            if (a > 0) {
                w->nic_atx[host_of(w, m->dst)]++;
                w->nic_arx[host_of(w, m->src)]++;
            }
        }
    /* the active flows by sending host and by receiving host, each in the flows' order */
    w->src_at[0] = w->dst_at[0] = 0;
    for (int h = 0; h < nh; h++) {
        w->src_at[h + 1] = w->src_at[h] + w->nic_ntx[h];
        w->dst_at[h + 1] = w->dst_at[h] + w->nic_nrx[h];
    }
    for (sim_msg_t *m = w->flows; m; m = m->next)
        if (m->active) {
            int hs = host_of(w, m->src), hd = host_of(w, m->dst);
            w->by_src[w->src_at[hs]++] = m;
            w->by_dst[w->dst_at[hd]++] = m;
        }
    for (int h = nh; h > 0; h--) { /* (back to the groups' starts) */
        w->src_at[h] = w->src_at[h - 1];
        w->dst_at[h] = w->dst_at[h - 1];
    }
    w->src_at[0] = w->dst_at[0] = 0;
    /* the sides with flows, in the order the scan below would meet them: (rx, host) */
    int ns = 0;
    for (int h = 0; h < nh; h++)
        if (w->nic_ntx[h] + w->nic_atx[h] > 0) w->sides[ns++] = h;
    for (int h = 0; h < nh; h++)
        if (w->nic_nrx[h] + w->nic_arx[h] > 0) w->sides[ns++] = nh + h;
    for (;;) {
        double best = INFINITY;
        int bh = -1, brx = 0, live = 0;
        for (int i = 0; i < ns; i++) {
            int sd = w->sides[i], rx = sd >= nh, h = rx ? sd - nh : sd;
            int cnt = rx ? w->nic_nrx[h] + w->nic_arx[h] : w->nic_ntx[h] + w->nic_atx[h];
            if (cnt <= 0) continue; /* (done: dropped from the list) */
            w->sides[live++] = sd;
            double k = rx ? w->nic_nrx[h] + a * w->nic_arx[h] : w->nic_ntx[h] + a * w->nic_atx[h];
            double c = rx ? w->nic_rx[h] : w->nic_tx[h];
            if (c / k < best) {
                best = c / k;
                bh = h;
                brx = rx;
            }
        }
        ns = live;
        if (bh < 0) break;
        share_side(w, brx, bh, best, a);
    }
    if (w->fair_check) flows_share_check(w);
}

/* 1 when an active flow is through: its last byte, to a billionth of the message, or so
 * little left that the clock cannot move by its time (a few bytes late in a long run: now +
 * rem / rate == now, where waiting for them would never end). */
static int flow_through(const sim_world_t *w, const sim_msg_t *m)
{
    return m->rem <= 1e-9 * (double)wire_of(m) ||
           (m->rate > 0 && w->now + m->rem / m->rate <= w->now);
}

/* After flows_progress: hand the flows that are through (flow_through) to the link model,
 * start the next message of their pair, share the NICs anew and find when the next flow will
 * be through. The heap has room (flows_add). */
static void flows_settle(sim_world_t *w)
{
    for (int done = 1; done;) {
        done = 0;
        sim_msg_t **pp = &w->flows, *prev = NULL;
        while (*pp) {
            sim_msg_t *m = *pp;
            if (!m->active || !flow_through(w, m)) {
                prev = m;
                pp = &m->next;
                continue;
            }
            *pp = m->next;
            w->nflows--;
            if (w->flows_tail == m) w->flows_tail = prev;
            for (sim_msg_t *q = m->next; q; q = q->next)
                if (q->src == m->src && q->dst == m->dst) {
                    q->active = 1;
                    break;
                }
            double at = w->now;
            if (w->rk[m->src].shaper)
                at = hs_shaper_release(w->rk[m->src].shaper, m->dst, wire_of(m), at);
            m->at = at < w->now ? w->now : at;
            m->next = NULL;
            (void)heap_push(w, m); /* cannot fail: room kept */
            done = 1;
        }
    }
    flows_share(w);
    w->flows_next = INFINITY;
    for (sim_msg_t *m = w->flows; m; m = m->next)
        if (m->active && m->rate > 0 && w->now + m->rem / m->rate < w->flows_next)
            w->flows_next = w->now + m->rem / m->rate;
}

/* A message enters the NICs now (its fields set; the heap has room for it). */
static void flows_enter(sim_world_t *w, sim_msg_t *m)
{
    flows_progress(w);
    m->active = 1;
    for (sim_msg_t *q = w->flows; q && m->active; q = q->next)
        if (q->src == m->src && q->dst == m->dst) m->active = 0;
    m->rem = (double)wire_of(m);
    m->rate = 0;
    m->next = NULL;
    if (w->flows_tail)
        w->flows_tail->next = m;
    else
        w->flows = m;
    w->flows_tail = m;
    w->nflows++;
    flows_settle(w);
}

/* A message enters the NICs now (its fields set, in_flight counted). */
static int flows_add(sim_world_t *w, sim_msg_t *m)
{
    HS_TRY(heap_reserve(w, w->nflows + 1));
    flows_enter(w, m);
    return 0;
}

/* When a message of len bytes sent now from src reaches dst: the sending host's NIC
 * serialises it (inter-host only, --sim-nic), the link carries it (--link: bandwidth,
 * latency, jitter), the receiving host's NIC takes it in, shared with the host's other
 * arrivals (cut through: an idle NIC adds nothing to the last byte's arrival). */
static double deliver_time(sim_world_t *w, int src, int dst, size_t len)
{
    double t = w->now;
    int hs = src / w->rph, hd = dst / w->rph, nic = w->nic_Bps > 0 && hs != hd;
    if (nic) {
        double tx = HS_MAX(t, w->nic_tx[hs]) + (double)len / w->nic_Bps;
        w->nic_tx[hs] = tx;
        t = tx;
    }
    if (w->rk[src].shaper) t = hs_shaper_release(w->rk[src].shaper, dst, len, t);
    if (nic) { /* the receiving NIC takes the bytes in as they arrive (cut through): done
                * when the last has arrived, or len / nic after it is free again */
        double rx = HS_MAX(t, w->nic_rx[hd] + (double)len / w->nic_Bps);
        w->nic_rx[hd] = rx;
        t = rx;
    }
    return t < w->now ? w->now : t;
}

/* The observers' channel (evaluation snapshots to rank 0, unless --sim-eval-traffic): the
 * message is in the destination's posted receive or unexpected queue at once, outside the
 * NICs, the links and the event queue, and nobody is woken: it takes no virtual time, no
 * bandwidth and no event, so the run's every event and iterate are those of a run without it.
 * The destination finds it when it next looks (a test, a wait's poll). */
static int observer_send(sim_world_t *w, int src, sim_rank_t *d, const void *buf, size_t len)
{
    struct hs_treq *pr = take_posted(d, src, HS_TAG_EVAL);
    if (pr && !pr->inplace && !pr->svc) {
        complete_recv_from(pr, src, HS_TAG_EVAL, buf, len);
        return 0;
    }
    sim_msg_t *m = msg_get(w, len);
    if (!m) return HS_ERR(-ENOMEM, "sim: out of memory for a %zu-byte message", len);
    size_t mcap = m->cap;
    *m = (sim_msg_t){
        .src = src, .dst = d->rank, .tag = HS_TAG_EVAL, .len = len, .at = w->now, .cap = mcap};
    if (len) memcpy(m->data, buf, len);
    if (pr && complete_recv(pr, m)) return 0; /* an in-place receive keeps m */
    if (pr) {
        msg_put(w, m);
        return 0;
    }
    unexp_push(d, m);
    return 0;
}

static int st_isend(hs_transport_t *t, int peer, uint32_t tag, const void *buf, size_t len,
                    hs_treq_t **req)
{
    sim_rank_t *rk = rank_of(t);
    sim_world_t *w = world_of(rk);
    struct hs_treq *r = req_get(w);
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
            req_put(w, r);
            return rc;
        }
        *req = r;
        return 0;
    }
    /* A message due now (an ideal link), with nothing of this sender in flight that it could
     * overtake, and a receive posted for it: delivered at once, one copy from the sender's
     * buffer (the receiver's threads are woken as a delivery from the event queue would). */
    int fair = w->nic_fair && w->nic_Bps > 0 && host_of(w, rk->rank) != host_of(w, peer);
    size_t wire = wire_len(w, rk->rank, peer, tag, len);
    if (peer != rk->rank) w->wire_bytes += (double)wire;
    double at = fair ? INFINITY : deliver_time(w, rk->rank, peer, wire);
    if (at <= w->now && w->in_flight[rk->rank] == 0) {
        struct hs_treq *pr = take_posted(&w->rk[peer], rk->rank, tag);
        if (pr && pr->svc && len <= pr->cap) { /* a pure service: it reads the sender's
                                                * buffer itself, no copy at all */
            complete_recv_from(pr, rk->rank, tag, NULL, len);
            svc_inline(w, pr, len ? buf : NULL);
            *req = r;
            return 0;
        }
        if (pr && pr->inplace && len <= pr->cap) { /* the one copy goes into a message */
            sim_msg_t *m = msg_get(w, len);
            if (!m) {
                req_put(w, r);
                return HS_ERR(-ENOMEM, "sim: out of memory for a %zu-byte message", len);
            }
            size_t mcap = m->cap;
            *m = (sim_msg_t){
                .src = rk->rank, .dst = peer, .tag = tag, .len = len, .at = w->now, .cap = mcap};
            if (len) memcpy(m->data, buf, len);
            complete_recv(pr, m);
            wake_rank(&w->rk[peer]);
            *req = r;
            return 0;
        }
        if (pr) {
            complete_recv_from(pr, rk->rank, tag, buf, len);
            if (pr->svc) /* too long for a pure service's slot: it latches the error */
                svc_inline(w, pr, NULL);
            else
                wake_rank(&w->rk[peer]);
            *req = r;
            return 0;
        }
    }
    sim_msg_t *m = msg_get(w, len);
    if (!m) {
        req_put(w, r);
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
    if (fair) { /* through the NICs, shared fairly: the send completes on delivery, or by a
                 * rendezvous (--sim-proto rndv=BYTES) when its closing message is back */
        r->done = 0;
        r->msg = m;
        m->sreq = r;
        sim_msg_t *c = NULL;
        if (w->rndv_bytes > 0 && wire > (size_t)w->rndv_bytes) {
            c = ctrl_get(w);
            if (!c) {
                msg_put(w, m);
                req_put(w, r);
                return HS_ERR(-ENOMEM, "sim: out of memory for a control message");
            }
            size_t ccap = c->cap;
            *c = (sim_msg_t){.src = rk->rank,
                             .dst = peer,
                             .tag = tag,
                             .len = SIM_CTRL_BYTES,
                             .at = INFINITY,
                             .seq = ++w->seq,
                             .cap = ccap,
                             .kind = MSG_RTS,
                             .ref = m};
            m->rndv = 1;
            m->ref = c;
        }
        int rc = flows_add(w, c ? c : m);
        if (rc < 0) {
            if (c) ctrl_put(w, c);
            msg_put(w, m);
            req_put(w, r);
            return rc;
        }
        w->in_flight[rk->rank]++;
        *req = r;
        return 0;
    }
    w->in_flight[rk->rank]++;
    int rc = heap_push(w, m);
    if (rc < 0) {
        msg_put(w, m);
        req_put(w, r);
        return rc;
    }
    if (at > w->now) { /* the send completes when its last byte has arrived (a shaped hsshm
                        * send completes when its last chunk is in the receiver's ring) */
        r->done = 0;
        r->msg = m;
        m->sreq = r;
    }
    *req = r;
    return 0;
}

/* Post a receive of rank rk: into buf (cap bytes), or, buf NULL, in place (it keeps the
 * message, at most cap bytes: the simulator's services). */
/* Post receive r of rank rk (peer, tag, buf, cap set): it takes the first unexpected message
 * that matches (returns 1: complete already), else it goes at the end of the posted list. */
static int post_req(sim_rank_t *rk, struct hs_treq *r)
{
    for (sim_msg_t **pp = &rk->unexpected; *pp; pp = &(*pp)->next) {
        sim_msg_t *m = *pp;
        if (!matches(r, m)) continue;
        unexp_take(rk, pp);
        if (!complete_recv(r, m)) msg_put(world_of(rk), m);
        return 1;
    }
    r->prev = rk->posted_tail;
    if (rk->posted_tail)
        rk->posted_tail->next = r;
    else
        rk->posted = r;
    rk->posted_tail = r;
    return 0;
}

/* Post a receive of rank rk: into buf (cap bytes), or, buf NULL, in place (it keeps the
 * message, at most cap bytes: the simulator's services; svc: a pure service's, handled at
 * once when it completes). */
static int post_recv(sim_rank_t *rk, int peer, uint32_t tag, void *buf, size_t cap,
                     hs_service_t *svc, int slot, hs_treq_t **req)
{
    struct hs_treq *r = req_get(world_of(rk));
    if (!r) return -ENOMEM;
    r->peer = peer;
    r->tag = tag;
    r->buf = buf;
    r->inplace = !buf;
    r->cap = cap;
    r->rk = rk;
    r->svc = svc;
    r->slot = slot;
    *req = r;
    if (post_req(rk, r) && svc) svc_inline(world_of(rk), r, NULL);
    return 0;
}

static int st_irecv(hs_transport_t *t, int peer, uint32_t tag, void *buf, size_t cap,
                    hs_treq_t **req)
{
    static unsigned char none[1]; /* a zero-byte receive without a buffer is not in place */
    return post_recv(rank_of(t), peer, tag, buf ? buf : none, cap, NULL, 0, req);
}

/* A receive that names a dead rank with nothing of it left in flight fails. */
static void check_dead_source(sim_world_t *w, sim_rank_t *rk, struct hs_treq *r)
{
    if (r->done || r->send || r->peer == HS_ANY_SOURCE) return;
    if (!w->rk[r->peer].dead || w->in_flight[r->peer] > 0) return;
    unpost(rk, r);
    r->done = 1;
    r->err = HS_ERR(-ECONNRESET, "sim: rank %d has exited (receive, tag %#x)", r->peer, r->tag);
}

static void req_release(hs_treq_t **req)
{
    if ((*req)->msg) (*req)->msg->sreq = NULL; /* a send freed in flight: the message goes on */
    if ((*req)->held) msg_put(world_of((*req)->rk), (*req)->held);
    off_completed(*req);
    req_put(world_of((*req)->rk), *req);
    *req = NULL;
}

/* Take a finished request: its status, its error, freed. */
static int take(hs_treq_t **req, hs_tstatus_t *st)
{
    struct hs_treq *r = *req;
    int err = r->err;
    if (st) *st = r->st;
    req_release(req);
    return err;
}

static int st_test(hs_transport_t *t, hs_treq_t **req, int *done, hs_tstatus_t *st)
{
    sim_rank_t *rk = rank_of(t);
    check_dead_source(world_of(rk), rk, *req);
    *done = (*req)->done;
    if (!*done) return 0;
    return take(req, st);
}

static int poll_any(sim_world_t *w, sim_rank_t *rk, hs_treq_t **reqs, int n, int *idx,
                    hs_tstatus_t *st, int *active)
{
    *active = 0;
    for (int i = 0; i < n; i++) {
        if (!reqs[i]) continue;
        (*active)++;
        check_dead_source(w, rk, reqs[i]);
        if (reqs[i]->done) {
            *idx = i;
            return 1;
        }
    }
    return 0;
}

/* The running thread waits in virtual time for one of reqs (no idle hook: the transport's
 * own waits, e.g. inside the all-reduce). */
static int wait_reqs(sim_world_t *w, sim_rank_t *rk, hs_treq_t **reqs, int n, double timeout_s,
                     int (*idle)(void *), void *idle_ctx, int *idx, hs_tstatus_t *st, int keep)
{
    *idx = -1;
    double deadline = w->now + (timeout_s > 0 ? timeout_s : 0);
    double next_idle = w->now + IDLE_SLICE_S;
    for (;;) {
        int active;
        if (poll_any(w, rk, reqs, n, idx, st, &active)) {
            if (!keep || reqs[*idx]->err) return take(&reqs[*idx], st);
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
            if (w->charge_all) sim_out(w);
            int irc = idle(idle_ctx);
            if (w->charge_all) sim_in(w);
            HS_TRY(irc);
            continue;
        }
        block_until(w, idle ? HS_MIN(deadline, next_idle) : deadline);
    }
}

static int st_waitany(hs_transport_t *t, hs_treq_t **reqs, int n, double timeout_s, int *index,
                      hs_tstatus_t *st)
{
    sim_rank_t *rk = rank_of(t);
    return wait_reqs(world_of(rk), rk, reqs, n, timeout_s, NULL, NULL, index, st, 0);
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
        if ((peer != HS_ANY_SOURCE && m->src != peer) || (!any_tag && m->tag != tag)) continue;
        *found = 1;
        if (st) *st = (hs_tstatus_t){.source = m->src, .tag = m->tag, .len = m->len};
        break;
    }
    return 0;
}

static void st_req_free(hs_transport_t *t, hs_treq_t **req)
{
    if (!req || !*req) return;
    if (!(*req)->done && !(*req)->send) unpost(rank_of(t), *req);
    req_release(req);
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
    complete_send(w, m);
    return 1;
}

static int st_unsent(hs_transport_t *t, int peer, uint32_t tag, hs_transport_msg_fn cb, void *ctx)
{
    sim_rank_t *rk = rank_of(t);
    sim_world_t *w = world_of(rk);
    sim_rank_t *p = &w->rk[peer];
    if (!p->dead && !p->left) return -EBUSY;
    int n = 0;
    /* in the event queue, then still in the NICs (fair sharing); complete_send links nothing */
    for (int i = 0; i < w->nheap; i++) n += reclaim(w, w->heap[i], rk->rank, peer, tag, cb, ctx);
    for (sim_msg_t *m = w->flows; m; m = m->next) n += reclaim(w, m, rk->rank, peer, tag, cb, ctx);
    for (sim_msg_t **pp = &p->dead_letters; *pp;) {
        sim_msg_t *m = *pp;
        if (m->src != rk->rank || m->tag != tag) {
            pp = &m->next;
            continue;
        }
        cb(ctx, peer, m->data, m->len, m->len);
        *pp = m->next;
        msg_put(w, m);
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
    for (sim_msg_t **pp = &rk->unexpected; *pp;) {
        sim_msg_t *m = *pp;
        if (m->tag != tag) {
            pp = &m->next;
            continue;
        }
        cb(ctx, m->src, m->data, m->len, m->len);
        unexp_take(rk, pp);
        msg_put(world_of(rk), m);
        n++;
    }
    wake_all(world_of(rk)); /* senders waiting on it see it left */
    return n;
}

static int st_peer_gone(hs_transport_t *t, int peer)
{
    return world_of(rank_of(t))->rk[peer].dead;
}

static int world_barrier(sim_world_t *w)
{
    uint64_t gen = w->barrier_gen;
    w->barrier_count++;
    for (;;) {
        if (w->barrier_gen != gen) return 0;
        if (w->barrier_count >= w->live) {
            w->barrier_count = 0;
            w->barrier_gen++;
            wake_all(w);
            return 0;
        }
        block_until(w, INFINITY);
    }
}

static int st_barrier(hs_transport_t *t)
{
    return world_barrier(world_of(rank_of(t)));
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

/* --- accounting: the workers' code and the simulator's ----------------------------------- */

/* The running thread enters the simulator's code (from the workers'). With measured-all
 * compute, the thread CPU time it spent in the workers' code since it last left the simulator
 * (the mixing, the optimizer step, an evaluation, a service's handler: all but the gradient,
 * which vx_local times) passes on its virtual clock now, before the call it enters takes
 * effect: a send goes out once the work before it is done. Not while it holds a service lock
 * (the one thread that runs at a time is what keeps that section atomic here): the time is
 * paid at its first entry after the lock. */
static void sim_in(sim_world_t *w)
{
    sim_thread_t *t = w->current;
    if (!t || t->depth++ != 0) return;
    w->worker_s += hs_now() - t->left_at;
    if (!w->charge_all || t->uncounted > 0) return; /* (an observer's: nobody pays it) */
    t->owed += hs_thread_cpu_s() - t->cpu_at;
    if (t->locks > 0 || !(t->owed > 0)) return;
    double until = w->now + t->owed;
    t->owed = 0;
    while (w->now < until) block_for(w, until, 1);
}

/* The running thread comes back into the simulator from a pure service's handler that it ran
 * for another rank, inside a delivery (svc_inline): the handler takes no virtual time (it runs
 * at the delivery's time), and what it cost is nobody's to pay. */
static void sim_back(sim_world_t *w)
{
    sim_thread_t *t = w->current;
    if (t && t->depth++ == 0) w->worker_s += hs_now() - t->left_at;
}

/* ... and goes back to the workers' code. */
static void sim_out(sim_world_t *w)
{
    sim_thread_t *t = w->current;
    if (t && --t->depth == 0) {
        t->left_at = hs_now();
        if (w->charge_all) t->cpu_at = hs_thread_cpu_s();
    }
}

#define SIM_CALL(w, type, call)                                                                    \
    do {                                                                                           \
        sim_world_t *w_ = (w);                                                                     \
        sim_in(w_);                                                                                \
        type r_ = call;                                                                            \
        sim_out(w_);                                                                               \
        return r_;                                                                                 \
    } while (0)
#define SIM_CALL_VOID(w, call)                                                                     \
    do {                                                                                           \
        sim_world_t *w_ = (w);                                                                     \
        sim_in(w_);                                                                                \
        call;                                                                                      \
        sim_out(w_);                                                                               \
    } while (0)
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
    SIM_CALL_VOID(TW(t), st_req_free(t, req));
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

static const hs_transport_ops_t sim_transport_ops = {
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

/* --- the virtual execution environment --------------------------------------------------- */

typedef struct sim_x {
    sim_world_t *w;
    sim_rank_t *rk;
} sim_x_t;

static sim_world_t *world_of(sim_rank_t *rk)
{
    return ((sim_x_t *)rk->x->impl)->w;
}

static double vx_now(hs_exec_t *x)
{
    return ((sim_x_t *)x->impl)->w->now;
}

static int vx_sleep(hs_exec_t *x, double s)
{
    sim_world_t *w = ((sim_x_t *)x->impl)->w;
    double until = w->now + s;
    while (w->now < until) block_for(w, until, 1);
    return 0;
}

static int vx_wait(hs_exec_t *x, hs_treq_t **reqs, int n, double timeout_s, unsigned flags,
                   int *idx, hs_tstatus_t *st)
{
    sim_x_t *v = x->impl;
    int owner = current_of(v->w) == v->rk->main;
    int use_idle = x->idle && owner && !(flags & HS_WAIT_NO_IDLE);
    return wait_reqs(v->w, v->rk, reqs, n, timeout_s, use_idle ? x->idle : NULL, x->idle_ctx, idx,
                     st, 0);
}

static int vx_alive(hs_exec_t *x, int peer, double probe_s)
{
    (void)probe_s;
    sim_x_t *v = x->impl;
    return !v->w->rk[peer].dead;
}

static int vx_barrier(hs_exec_t *x)
{
    return world_barrier(((sim_x_t *)x->impl)->w);
}

static double vx_compute(hs_exec_t *x, double cpu_s, double wall_s)
{
    (void)wall_s;
    sim_world_t *w = ((sim_x_t *)x->impl)->w;
    double d = w->fixed_s > 0 ? w->fixed_s : cpu_s;
    vx_sleep(x, d);
    return d;
}

/* Local work in parallel (--sim-threads > 1, fixed or bench compute). The rank's main
 * thread blocks (sleeping) until the step's end, now + the fixed duration, hands the baton on
 * and runs fn while other threads go on exactly as if fn had already run: fn touches only
 * this rank's own model, data and kernels, and before the baton goes to another thread of
 * this rank, fn has finished (hand_to waits for it). So the order of every event, and every
 * result, is the same as with one thread. A measured step runs alone: its CPU time must not
 * be stretched by a neighbour's on the same core or memory bus. */
static int vx_local(hs_exec_t *x, int (*fn)(void *ctx), void *ctx, double *counted)
{
    sim_x_t *v = x->impl;
    sim_world_t *w = v->w;
    double start = w->now;
    w->steps++;
    /* (measured: the step's own CPU time, undisturbed by a neighbour's; one at a time) */
    if (w->par <= 1 || !(w->fixed_s > 0)) {
        double c0 = hs_thread_cpu_s(), t0 = hs_now();
        int rc = fn(ctx);
        double wall = hs_now() - t0;
        w->worker_s += wall;
        w->local_s += wall;
        *counted = vx_compute(x, hs_thread_cpu_s() - c0, 0);
        return rc;
    }
    sim_thread_t *t = current_of(w);
    sim_rank_t *rk = v->rk;
    double until = start + w->fixed_s;
    t->state = T_BLOCKED;
    t->sleeping = 1;
    t->wake_at = until;
    dl_set(w, t);
    pthread_mutex_lock(&w->mu);
    rk->busy = 1;
    pthread_mutex_unlock(&w->mu);
    sim_thread_t *next = pick_next(w);
    int inline_fn = !next || next->rk == rk; /* itself or its own service runs next */
    if (!inline_fn) hand_to(w, next);        /* the baton goes on meanwhile */
    if (!inline_fn) sem_wait(&w->slots);
    double t0 = hs_now();
    int rc = fn(ctx);
    double wall = hs_now() - t0;
    if (!inline_fn) sem_post(&w->slots);
    pthread_mutex_lock(&w->mu);
    w->local_s += wall;
    rk->busy = 0;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    if (next == t) { /* its own deadline came first */
        t->state = T_RUNNING;
        t->wake_at = INFINITY;
    } else {
        if (inline_fn) hand_to(w, next);
        sem_wait(&t->go); /* its turn again, at `until` */
    }
    t->sleeping = 0;
    while (w->now < until) block_for(w, until, 1);
    *counted = until - start;
    return rc;
}

/* Local work with marks (the gradient with --bucket-mb's notifications): fn runs at once, on
 * the baton (as a measured step does), then its duration D (the compute model's: fixed, or
 * fn's CPU time) passes in pieces, mark i running at start + frac[i] D, so what a mark starts
 * (a bucket's reduction on a service) overlaps the rest of the step in virtual time. */
static int vx_local_marks(hs_exec_t *x, int (*fn)(void *ctx), void *ctx, const double *frac, int n,
                          int (*mark)(void *mctx, int i), void *mctx, double *counted)
{
    sim_world_t *w = ((sim_x_t *)x->impl)->w;
    double start = w->now;
    w->steps++;
    double c0 = hs_thread_cpu_s(), t0 = hs_now();
    int rc = fn(ctx);
    double wall = hs_now() - t0, cpu = hs_thread_cpu_s() - c0;
    w->worker_s += wall;
    w->local_s += wall;
    double dur = w->fixed_s > 0 ? w->fixed_s : cpu;
    for (int i = 0; i < n && rc == 0; i++) {
        double at = start + HS_MIN(HS_MAX(frac[i], 0.0), 1.0) * dur;
        if (at > w->now) vx_sleep(x, at - w->now);
        rc = mark(mctx, i);
    }
    if (start + dur > w->now) vx_sleep(x, start + dur - w->now);
    *counted = dur;
    return rc;
}

/* An observer's stretch (hs_exec_uncounted, the workers' code of the owner thread): with
 * measured-all, what it costs is paid by nobody; what the thread owed before it still is. */
static void vx_uncounted(hs_exec_t *x, int begin)
{
    sim_world_t *w = ((sim_x_t *)x->impl)->w;
    sim_thread_t *t = current_of(w);
    if (!t) return;
    int outside = t->depth == 0; /* (the idle hook runs inside the simulator) */
    if (begin) {
        if (w->charge_all && outside && t->uncounted == 0) t->owed += hs_thread_cpu_s() - t->cpu_at;
        t->uncounted++;
    } else if (t->uncounted > 0 && --t->uncounted == 0 && w->charge_all && outside) {
        t->cpu_at = hs_thread_cpu_s();
    }
}

static void vx_crash(hs_exec_t *x, int status)
{
    sim_x_t *v = x->impl;
    sim_world_t *w = v->w;
    sim_rank_t *rk = v->rk;
    rk->dead = 1;
    w->live--;
    w->mains_left--;
    rk->rc = -status;
    snprintf(rk->msg, sizeof rk->msg, "injected crash (status %d)", status);
    /* its threads never run again; its queues are dropped */
    for (sim_thread_t *t = rk->threads; t; t = t->next_in_rank) {
        dl_del(w, t);
        t->state = T_DONE;
    }
    while (rk->unexpected) { /* its senders may take these back (unsent) */
        sim_msg_t *m = rk->unexpected;
        unexp_take(rk, &rk->unexpected);
        append(&rk->dead_letters, m);
    }
    rk->posted = rk->posted_tail = NULL;
    rk->completed = NULL;
    wake_all(w); /* peers waiting on it find it dead */
    sim_thread_t *me = current_of(w);
    hand_to(w, pick_next(w));
    for (;;) sem_wait(&me->go); /* never scheduled again */
}

/* Services: one simulated thread each. Their receives are in place (no buffer per slot): a
 * message stays in the simulator's recycled buffer, on_msg reads it there, and it goes back
 * to the pool, so a rank holds no n_slots x slot_bytes of receive buffers and the one copy per
 * message lands in memory that is still in cache. */
struct hs_service {
    hs_exec_t *x;
    hs_service_desc_t d;
    int *src;        /* (n_slots) */
    uint32_t *tag;   /* (n_slots) */
    hs_treq_t **req; /* (n_slots) posted receives (NULL: not posted) */
    sim_thread_t *thr;
    int stop;
    uint64_t handled;
    int rc;
    char msg[HS_ERRMSG_MAX];
};

static int live_ranks(const sim_world_t *w)
{
    return w->live;
}

/* Close the pending iteration i into a row: sqrt(mean_i ||z_i||^2 - ||mean z||^2). */
static int cons_close(sim_world_t *w, int i)
{
    sim_cons_t *c = &w->cons[i];
    double m2 = 0;
    for (size_t e = 0; e < w->nparams; e++) {
        double m = c->sum[e] / c->count;
        m2 += m * m;
    }
    double d2 = c->norm2 / c->count - m2;
    if (w->nrows == w->caprows) {
        long nc = w->caprows ? 2 * w->caprows : 1024;
        sim_cons_row_t *nr = realloc(w->rows, (size_t)nc * sizeof *nr);
        if (!nr) return HS_ERR(-ENOMEM, "out of memory for consensus rows");
        w->rows = nr;
        w->caprows = nc;
    }
    w->rows[w->nrows++] = (sim_cons_row_t){
        .iter = c->iter, .ranks = c->count, .t = c->t_max, .dist = sqrt(d2 > 0 ? d2 : 0)};
    free(c->sum);
    w->cons[i] = w->cons[--w->ncons];
    return 0;
}

/* sum += z; returns ||z||^2. Blocks of 8 independent lanes, which GCC vectorises at -O2
 * (one double accumulator is a serial dependency chain: it took 30 % of a run's time), built
 * for AVX2 as well where the compiler can (the kernels' HS_KCPU_SIMD does the same). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) &&       \
    __GNUC__ >= 12
__attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
static double
cons_add(size_t n, const float *restrict z, double *restrict sum)
{
    double acc[8] = {0};
    size_t e = 0;
    for (; e + 8 <= n; e += 8)
        for (int j = 0; j < 8; j++) {
            double v = z[e + j];
            sum[e + j] += v;
            acc[j] += v * v;
        }
    double tail = 0;
    for (; e < n; e++) {
        sum[e] += z[e];
        tail += (double)z[e] * z[e];
    }
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

static void vx_observe(hs_exec_t *x, long iter, const float *z, size_t n)
{
    sim_world_t *w = ((sim_x_t *)x->impl)->w;
    if (w->cons_rc < 0) return;
    w->nparams = n;
    int i;
    for (i = 0; i < w->ncons; i++)
        if (w->cons[i].iter == iter) break;
    if (i == w->ncons) {
        if (w->ncons == w->capcons) {
            int nc = w->capcons ? 2 * w->capcons : 16;
            sim_cons_t *ncs = realloc(w->cons, (size_t)nc * sizeof *ncs);
            if (!ncs) {
                w->cons_rc = HS_ERR(-ENOMEM, "out of memory for consensus sums");
                return;
            }
            w->cons = ncs;
            w->capcons = nc;
        }
        w->cons[i] = (sim_cons_t){.iter = iter, .sum = calloc(n, sizeof(double))};
        if (!w->cons[i].sum) {
            w->cons_rc = HS_ERR(-ENOMEM, "out of memory for consensus sums");
            return;
        }
        w->ncons++;
    }
    sim_cons_t *c = &w->cons[i];
    c->norm2 += cons_add(n, z, c->sum);
    c->count++;
    if (w->now > c->t_max) c->t_max = w->now;
    if (c->count >= live_ranks(w)) {
        int rc = cons_close(w, i);
        if (rc < 0) w->cons_rc = rc;
    }
}

static int cmp_row(const void *a, const void *b)
{
    const sim_cons_row_t *x = a, *y = b;
    return (x->iter > y->iter) - (x->iter < y->iter);
}

/* Finite-time averaging (exp1peer at n = 2^k averages exactly in k steps, the complete graph
 * in one): the first row whose distance is at the float floor (1e-5 of the first row's or
 * less) reached in one step from at least 1e3 times as far, and stays there; -1 when none.
 * A geometric contraction at rate r gets there in steps of r, never 1e-3 at once. */
static long exact_after(const sim_world_t *w)
{
    double floor_d = 1e-5 * w->rows[0].dist;
    for (long i = 1; i < w->nrows; i++) {
        if (!(w->rows[i].dist <= floor_d)) continue;
        if (!(w->rows[i].dist <= 1e-3 * w->rows[i - 1].dist)) return -1;
        for (long j = i + 1; j < w->nrows; j++)
            if (!(w->rows[j].dist <= floor_d)) return -1;
        return w->rows[i].iter;
    }
    return -1;
}

/* consensus.csv, and "consensus_rate" and "consensus_exact_after" added to summary.json: the
 * geometric-mean contraction per iteration over the second half of the rows whose distance
 * is above 1e-6 of the first (the asymptotic rate, the one |lambda2| predicts), or, when the
 * ranks average exactly in finitely many iterations (exact_after), a rate of 0 and that
 * iteration (null otherwise). */
static int write_consensus(sim_world_t *w)
{
    while (w->ncons > 0) HS_TRY(cons_close(w, w->ncons - 1)); /* incomplete: crashed ranks */
    qsort(w->rows, (size_t)w->nrows, sizeof *w->rows, cmp_row);
    const char *dir = w->o->out_dir;
    double rate = NAN;
    long exact = w->nrows > 1 && w->rows[0].dist > 0 ? exact_after(w) : -1;
    if (exact >= 0) {
        rate = 0;
    } else if (w->nrows > 1 && w->rows[0].dist > 0) {
        /* the asymptotic rate: over the second half of the rows above the float floor (the
         * first half is the transient of the faster modes) */
        long last = 0;
        for (long i = 1; i < w->nrows; i++)
            if (w->rows[i].dist > 1e-6 * w->rows[0].dist) last = i;
        long first = last / 2;
        if (last > first && w->rows[first].dist > 0)
            rate = pow(w->rows[last].dist / w->rows[first].dist,
                       1.0 / (double)(w->rows[last].iter - w->rows[first].iter));
    }
    if (!dir) return 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/consensus.csv", dir);
    FILE *f = NULL;
    HS_TRY(hs_file_create(&f, path, 0));
    fprintf(f, "iteration,virtual_s,ranks,consensus_distance\n");
    for (long i = 0; i < w->nrows; i++)
        fprintf(f, "%ld,%.9g,%d,%.9g\n", w->rows[i].iter, w->rows[i].t, w->rows[i].ranks,
                w->rows[i].dist);
    if (fclose(f) != 0) return HS_ERR(-EIO, "writing %s failed", path);
    /* summary.json (rank 0 wrote it): one more key before its closing brace */
    snprintf(path, sizeof path, "%s/summary.json", dir);
    if (access(path, F_OK) != 0) return 0; /* rank 0 failed before writing it: its error says why */
    HS_TRY(hs_file_reopen(&f, path, "r+b"));
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return HS_ERR(-EIO, "%s: cannot seek", path);
    }
    long end = ftell(f), pos = end;
    int ch = 0;
    while (pos > 0) {
        fseek(f, --pos, SEEK_SET);
        if ((ch = fgetc(f)) == '}') break;
    }
    if (ch != '}') {
        fclose(f);
        return HS_ERR(-EPROTO, "%s: no closing brace", path);
    }
    long cut = pos; /* drop the newline before the brace */
    while (cut > 0) {
        fseek(f, cut - 1, SEEK_SET);
        if (fgetc(f) != '\n') break;
        cut--;
    }
    fseek(f, cut, SEEK_SET);
    if (isfinite(rate))
        fprintf(f, ",\n  \"consensus_rate\": %.9g", rate);
    else
        fprintf(f, ",\n  \"consensus_rate\": null");
    if (exact >= 0)
        fprintf(f, ",\n  \"consensus_exact_after\": %ld\n}\n", exact);
    else
        fprintf(f, ",\n  \"consensus_exact_after\": null\n}\n");
    long now = ftell(f);
    int rc = fclose(f);
    if (rc == 0 && now < end && truncate(path, now) != 0) rc = -1;
    return rc == 0 ? 0 : HS_ERR(-EIO, "writing %s failed", path);
}

/* A pure service (HS_SVC_PURE, no on_tick) has no thread: its handler runs when a message
 * reaches one of its receives, on the thread that delivers it (no thread switch). */
static int svc_is_inline(const hs_service_t *s)
{
    return (s->d.flags & HS_SVC_PURE) && !s->d.on_tick;
}

static int svc_post(hs_service_t *s, int i)
{
    sim_x_t *v = s->x->impl;
    return post_recv(v->rk, s->src[i], s->tag[i], NULL, s->d.slot_bytes,
                     svc_is_inline(s) ? s : NULL, i, &s->req[i]);
}

static void svc_latch(hs_service_t *s, int rc)
{
    if (rc < 0 && !s->rc) {
        s->rc = rc;
        snprintf(s->msg, sizeof s->msg, "%s", hs_last_error());
    }
}

/* A pure service's receive r has completed: its handler runs now, then r is posted again
 * (and handles, one after the other, the unexpected messages that match it). data: the
 * message's bytes when r holds none (the sender's buffer, during its isend). */
static void svc_inline(sim_world_t *w, struct hs_treq *r, const void *data)
{
    hs_service_t *s = r->svc;
    sim_rank_t *rk = r->rk;
    /* its rank's local work must end first, as for a thread of its own (unless the rank's
     * own thread delivers: between marking itself busy and starting that work, vx_local) */
    if (w->par > 1 && !(w->current && w->current->rk == rk)) {
        pthread_mutex_lock(&w->mu);
        while (rk->busy) pthread_cond_wait(&w->cv, &w->mu);
        pthread_mutex_unlock(&w->mu);
    }
    do {
        off_completed(r);
        if (r->err) { /* a message too long for the slot: latched, the slot stays */
            svc_latch(s, r->err);
        } else {
            hs_tstatus_t st = r->st;
            sim_out(w);
            int hr = hs_svc_handle_inline(s->x, &s->d, r->slot, r->held ? r->held->data : data,
                                          &st); /* on_msg (--trace: an apply span) */
            sim_back(w);
            svc_latch(s, hr);
        }
        data = NULL;
        if (r->held) msg_put(w, r->held);
        r->held = NULL;
        r->done = 0;
        r->err = 0;
        r->st = (hs_tstatus_t){0};
        s->handled++;
    } while (post_req(rk, r));
    wake_rank(rk); /* hs_svc_wait */
}

static void *svc_main(void *arg)
{
    hs_service_t *s = arg;
    sim_x_t *v = s->x->impl;
    int n = s->d.n_slots;
    while (!s->stop) {
        int idx = -1;
        hs_tstatus_t st;
        /* keep: the completed receive stays (with its message) until on_msg has run */
        int rc = wait_reqs(v->w, v->rk, s->req, n, IDLE_SLICE_S, NULL, NULL, &idx, &st, 1);
        if (s->stop) break;
        if (rc == 0 && idx >= 0) {
            struct hs_treq *r = s->req[idx];
            sim_out(v->w);
            int hr = hs_svc_handle(s->x, &s->d, idx, r->held ? r->held->data : NULL,
                                   &st); /* on_msg (--trace: an apply span) */
            sim_in(v->w);
            req_release(&s->req[idx]);
            svc_latch(s, hr);
            s->handled++;
            wake_rank(v->rk); /* hs_svc_wait */
            hr = svc_post(s, idx);
            if (hr < 0 && !s->rc) s->rc = hr;
        } else if (rc == 0 && idx < 0) { /* every slot gone: nothing more can come */
            block_until(v->w, v->w->now + IDLE_SLICE_S);
        }
        if (s->d.on_tick) {
            sim_out(v->w);
            int tr = s->d.on_tick(s->d.ctx);
            sim_in(v->w);
            if (tr < 0 && !s->rc) {
                s->rc = tr;
                snprintf(s->msg, sizeof s->msg, "%s", hs_last_error());
            }
        }
    }
    return NULL;
}

static void vx_svc_free(hs_service_t *s)
{
    for (int i = 0; s->req && i < s->d.n_slots; i++)
        if (s->req[i]) st_req_free(s->x->t, &s->req[i]);
    free(s->req);
    free(s->src);
    free(s->tag);
    free(s);
}

static int vx_svc_start(hs_exec_t *x, const hs_service_desc_t *desc, hs_service_t **out)
{
    *out = NULL;
    sim_x_t *v = x->impl;
    if (desc->n_slots < 1 || !desc->on_msg)
        return HS_ERR(-EINVAL, "%s: a service needs receives and a handler", desc->name);
    hs_service_t *s = hs_calloc(1, sizeof *s, "service");
    if (!s) return -ENOMEM;
    s->x = x;
    s->d = *desc;
    int rc = -ENOMEM;
    size_t n = (size_t)desc->n_slots;
    s->src = hs_malloc(n * sizeof *s->src, "service sources");
    s->tag = hs_malloc(n * sizeof *s->tag, "service tags");
    s->req = hs_calloc(n, sizeof *s->req, "service receives");
    if (!s->src || !s->tag || !s->req) goto fail;
    memcpy(s->src, desc->src, n * sizeof *s->src);
    memcpy(s->tag, desc->tag, n * sizeof *s->tag);
    for (int i = 0; i < desc->n_slots; i++)
        if ((rc = svc_post(s, i)) < 0) goto fail;
    if (!svc_is_inline(s) && (rc = spawn(v->w, v->rk, svc_main, s, &s->thr)) < 0) goto fail;
    *out = s;
    return 0;
fail:
    vx_svc_free(s);
    return rc;
}

static void vx_svc_lock(hs_service_t *s)
{
    sim_thread_t *t = ((sim_x_t *)s->x->impl)->w->current; /* one thread runs at a time: */
    if (t) t->locks++;                                     /* counted for measured-all */
}

static void vx_svc_unlock(hs_service_t *s)
{
    sim_thread_t *t = ((sim_x_t *)s->x->impl)->w->current;
    if (t && t->locks > 0) t->locks--;
}

static void vx_svc_wait(hs_service_t *s, double timeout_s)
{
    sim_x_t *v = s->x->impl;
    uint64_t h = s->handled;
    double until = v->w->now + timeout_s;
    while (s->handled == h && v->w->now < until) block_until(v->w, until);
}

static int vx_svc_error(hs_service_t *s)
{
    return s->rc ? HS_ERR(s->rc, "%s: %s", s->d.name, s->msg) : 0;
}

static void vx_svc_stop(hs_service_t **sp)
{
    hs_service_t *s = *sp;
    sim_x_t *v = s->x->impl;
    s->stop = 1;
    if (s->thr) {
        make_ready(s->thr);
        while (s->thr->state != T_DONE) block_until(v->w, INFINITY); /* join */
    }
    vx_svc_free(s);
    *sp = NULL;
}

#define XW(x) (((sim_x_t *)(x)->impl)->w)

static int ax_sleep(hs_exec_t *x, double s)
{
    SIM_CALL(XW(x), int, vx_sleep(x, s));
}

static int ax_wait(hs_exec_t *x, hs_treq_t **reqs, int n, double timeout_s, unsigned flags,
                   int *idx, hs_tstatus_t *st)
{
    SIM_CALL(XW(x), int, vx_wait(x, reqs, n, timeout_s, flags, idx, st));
}

static int ax_barrier(hs_exec_t *x)
{
    SIM_CALL(XW(x), int, vx_barrier(x));
}

static double ax_compute(hs_exec_t *x, double cpu_s, double wall_s)
{
    SIM_CALL(XW(x), double, vx_compute(x, cpu_s, wall_s));
}

static int ax_local(hs_exec_t *x, int (*fn)(void *ctx), void *ctx, double *counted)
{
    SIM_CALL(XW(x), int, vx_local(x, fn, ctx, counted));
}

static void ax_crash(hs_exec_t *x, int status)
{
    sim_in(XW(x));
    vx_crash(x, status);
}

static void ax_observe(hs_exec_t *x, long iter, const float *z, size_t n)
{
    SIM_CALL_VOID(XW(x), vx_observe(x, iter, z, n));
}

static int ax_svc_start(hs_exec_t *x, const hs_service_desc_t *desc, hs_service_t **out)
{
    SIM_CALL(XW(x), int, vx_svc_start(x, desc, out));
}

static void ax_svc_wait(hs_service_t *s, double timeout_s)
{
    SIM_CALL_VOID(XW(s->x), vx_svc_wait(s, timeout_s));
}

static void ax_svc_stop(hs_service_t **sp)
{
    SIM_CALL_VOID(XW((*sp)->x), vx_svc_stop(sp));
}

static void vx_destroy(hs_exec_t *x)
{
    free(x->impl);
    free(x);
}

static const hs_exec_ops_t sim_exec_ops = {
    .size = sizeof(hs_exec_ops_t),
    .name = "virtual",
    .now = vx_now,
    .sleep = ax_sleep,
    .wait = ax_wait,
    .alive = vx_alive,
    .barrier = ax_barrier,
    .compute = ax_compute,
    .local = ax_local,
    .crash = ax_crash,
    .observe = ax_observe,
    .svc_start = ax_svc_start,
    .svc_lock = vx_svc_lock,
    .svc_unlock = vx_svc_unlock,
    .svc_wait = ax_svc_wait,
    .svc_error = vx_svc_error,
    .svc_stop = ax_svc_stop,
    .destroy = vx_destroy,
    .uncounted = vx_uncounted,
    .local_marks = vx_local_marks,
};

/* --- the run ---------------------------------------------------------------------------- */

int hs_sim_compute_parse(const char *spec, double *fixed_s)
{
    if (!spec || !*spec) spec = "fixed:10";
    if (!strcmp(spec, "measured")) {
        *fixed_s = -1;
        return 0;
    }
    if (!strcmp(spec, "measured-all")) {
        *fixed_s = -2;
        return 0;
    }
    if (!strcmp(spec, "bench")) {
        *fixed_s = 0; /* measured once at the start of the run */
        return 0;
    }
    if (!strncmp(spec, "fixed:", 6)) {
        double ms;
        if (hs_parse_double(spec + 6, 1e-6, 1e9, "--sim-compute fixed:MS", &ms) < 0) return -EINVAL;
        *fixed_s = ms / 1000.0;
        return 0;
    }
    return HS_ERR(-EINVAL,
                  "--sim-compute '%s': expected fixed:MS (milliseconds per step), bench, "
                  "measured or measured-all",
                  spec);
}

int hs_sim_nic_share_parse(const char *share, int *fair)
{
    if (!share || !strcmp(share, "fair"))
        *fair = 1;
    else if (!strcmp(share, "fifo"))
        *fair = 0;
    else
        return HS_ERR(-EINVAL, "--sim-nic-share '%s': expected fair or fifo", share);
    return 0;
}

int hs_sim_proto_parse(const char *spec, long *rndv_bytes, int *acks)
{
    *rndv_bytes = 0;
    *acks = 0;
    if (!spec) return 0;
    if (!*spec)
        return HS_ERR(-EINVAL, "--sim-proto: expected a comma list of rxm, rndv=BYTES and acks");
    const char *p = spec;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char item[64];
        if (n == 0 || n >= sizeof item)
            return HS_ERR(-EINVAL,
                          "--sim-proto '%s': an empty or too long item (expected rxm, "
                          "rndv=BYTES or acks)",
                          spec);
        memcpy(item, p, n);
        item[n] = 0;
        if (!strcmp(item, "rxm")) { /* libfabric ofi_rxm over tcp, its defaults */
            *rndv_bytes = 131072;   /* FI_OFI_RXM_SAR_LIMIT */
            *acks = 1;
        } else if (!strcmp(item, "acks")) {
            *acks = 1;
        } else if (!strncmp(item, "rndv=", 5)) {
            if (hs_parse_long(item + 5, 1, (long)1 << 40, "--sim-proto rndv=BYTES", rndv_bytes) < 0)
                return -EINVAL;
        } else {
            return HS_ERR(-EINVAL,
                          "--sim-proto '%s': unknown item '%s' (expected rxm, "
                          "rndv=BYTES or acks)",
                          spec, item);
        }
        p += n;
        if (*p == ',') {
            p++;
            if (!*p) return HS_ERR(-EINVAL, "--sim-proto '%s': a trailing comma", spec);
        }
    }
    return 0;
}

/* Models of other frameworks that --sim-payload names: torchvision's ImageNet models
 * (parameter counts of torchvision.models.NAME(), counted again from their definitions). */
static const struct {
    const char *name;
    double params;
} payload_models[] = {
    {"resnet18", 11689512},
    {"resnet50", 25557032},
    {"resnet101", 44549160},
    {"vgg16", 138357544},
};

int hs_sim_payload_parse(const char *spec, int in_c, int in_h, int in_w, int classes,
                         double *params)
{
    *params = 0;
    if (!spec || !*spec)
        return HS_ERR(-EINVAL, "--sim-payload: expected a model (resnet50, a --model spec) or "
                               "bytes:N");
    for (size_t i = 0; i < HS_ARRAY_LEN(payload_models); i++)
        if (!strcmp(spec, payload_models[i].name)) {
            *params = payload_models[i].params;
            return 0;
        }
    int bytes = !strncmp(spec, "bytes:", 6), count = !strncmp(spec, "params:", 7);
    if (bytes || count) {
        const char *v = spec + (bytes ? 6 : 7);
        char *end = NULL;
        errno = 0;
        double x = strtod(v, &end);
        double mult = 1;
        if (end && end != v && *end && !end[1]) {
            const char *suf = "KMG";
            const char *at = strchr(suf, *end);
            if (at) {
                for (long k = 0; k <= at - suf; k++) mult *= 1024;
                end++;
            }
        }
        if (!end || end == v || *end || errno || !(x * mult >= 1) || !(x * mult <= 1e13))
            return HS_ERR(-EINVAL,
                          "--sim-payload %s: expected %s with a count from 1 to 1e13 (K, M, G: "
                          "powers of 1024)",
                          spec, bytes ? "bytes:N" : "params:N");
        x *= mult;
        if (bytes && fmod(x, 4) != 0)
            return HS_ERR(-EINVAL,
                          "--sim-payload %s: %.0f bytes is not a whole number of floats (4 bytes "
                          "each)",
                          spec, x);
        if (fmod(x, 1) != 0) return HS_ERR(-EINVAL, "--sim-payload %s: not a whole number", spec);
        *params = bytes ? x / 4 : x;
        return 0;
    }
    if (in_c <= 0) return 0; /* a --model spec, checked once the data's shape is known */
    size_t np = 0;
    if (hs_model_parse_spec(spec, in_c, in_h, in_w, classes, &np) < 0) {
        hs_error_prefix("--sim-payload %s (a --model spec, or one of resnet18, resnet50, "
                        "resnet101, vgg16, bytes:N, params:N)",
                        spec);
        return -EINVAL;
    }
    *params = (double)np;
    return 0;
}

int hs_sim_nic_parse(const char *rate, double *Bps)
{
    char spec[128];
    hs_shape_t *ns = NULL;
    if (!rate || strlen(rate) > 64)
        return HS_ERR(-EINVAL, "--sim-nic: expected a rate such as 10Gbit or 100MB");
    snprintf(spec, sizeof spec, "bw=%s", rate);
    int rc = hs_shape_parse(spec, &ns);
    if (rc == 0) {
        hs_link_shape_t l;
        hs_shape_link(ns, 0, 1, NULL, NULL, &l);
        *Bps = l.bw_Bps;
        if (!(*Bps > 0)) rc = HS_ERR(-EINVAL, "--sim-nic %s: the rate must be > 0", rate);
    } else {
        hs_error_prefix("--sim-nic %s", rate);
    }
    hs_shape_free(&ns);
    return rc;
}

/* DIR/sim.json: what the run cost on the host (kept out of summary.json, which two runs of
 * one seed write byte for byte the same). */
/* --sim-payload: every message of the algorithm carries the payload model's body in place
 * of the proxy's (--model): bodies grow by payload / proxy parameters. */
static int payload_setup(sim_world_t *w, const char *spec, const hs_dataset_t *data)
{
    double pp = 0;
    size_t np = 0;
    HS_TRY(hs_sim_payload_parse(spec, data->c, data->h, data->w, data->classes, &pp));
    if (hs_model_parse_spec(w->o->model, data->c, data->h, data->w, data->classes, &np) < 0 ||
        np == 0)
        return HS_ERR(-EINVAL, "--sim-payload: the --model %s has no parameters to scale",
                      w->o->model);
    const hs_algo_ops_t *ops = hs_algo_find(w->o->algo);
    w->payload_scale = pp / (double)np;
    w->payload_z = np * sizeof(float);
    w->payload_hdr = ops ? ops->msg_header : 0;
    if (!w->o->quiet) {
        printf("hearsay sim: --sim-payload %s: messages carry %.0f parameters (%.1f MB of "
               "floats) where --model %s has %zu: bodies x %.6g on the network, gradients and "
               "memory the proxy's\n",
               spec, pp, 4e-6 * pp, w->o->model, np, w->payload_scale);
        if (np % (size_t)w->n)
            printf("hearsay sim: --sim-payload: note: --model %s has %zu parameters, not a "
                   "multiple of -n %d, so a ring all-reduce's chunks differ by a float, which "
                   "the payload makes %.0f: its time is up to %.2f %% high (a --model with a "
                   "multiple of %d parameters is exact)\n",
                   w->o->model, np, w->n, w->payload_scale,
                   100.0 * ((double)((np + (size_t)w->n - 1) / (size_t)w->n) * w->n / np - 1),
                   w->n);
        fflush(stdout);
    }
    return 0;
}

static int write_stats(const hs_train_opts_t *o, const hs_sim_stats_t *s)
{
    if (!o->quiet) {
        printf("hearsay sim: %.2f s on the host, %ld steps (%.0f steps/s, %d thread%s)",
               s->host_wall_s, s->steps, s->steps_per_s, s->threads, s->threads > 1 ? "s" : "");
        if (isfinite(s->overhead)) printf("; the simulator's own share %.0f %%", 100 * s->overhead);
        printf("\n");
        fflush(stdout);
    }
    if (!o->out_dir) return 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/sim.json", o->out_dir);
    FILE *f = NULL;
    HS_TRY(hs_file_create(&f, path, 0));
    fprintf(f,
            "{\n  \"sim_threads\": %d,\n  \"host_wall_s\": %.6f,\n  \"host_cpu_s\": %.6f,\n"
            "  \"worker_s\": %.6f,\n  \"local_s\": %.6f,\n  \"steps\": %ld,\n"
            "  \"steps_per_s\": %.3f,\n  \"peak_rss_mib\": %.1f,\n"
            "  \"payload_scale\": %.9g,\n  \"wire_bytes\": %.0f,\n",
            s->threads, s->host_wall_s, s->host_cpu_s, s->worker_s, s->local_s, s->steps,
            s->steps_per_s, s->peak_rss_mib, s->payload_scale, s->wire_bytes);
    if (isfinite(s->overhead))
        fprintf(f, "  \"overhead\": %.6f\n}\n", s->overhead);
    else
        fprintf(f, "  \"overhead\": null\n}\n");
    return fclose(f) == 0 ? 0 : HS_ERR(-EIO, "writing %s failed", path);
}

/* Every simulated rank keeps its files open (rank-R.csv, rank-R-eval.csv, its trajectory):
 * with --out, the limit on open files goes up to what n ranks need, the soft limit within the
 * hard one, the hard one too where the process may (CAP_SYS_RESOURCE); else a warning says
 * what to raise (16,384 ranks need 33,000 and more, past the usual 20,000). */
static void raise_file_limit(const hs_train_opts_t *o, int n)
{
    struct rlimit rl;
    if (!o->out_dir || getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
    rlim_t need = 3 * (rlim_t)n + 256;
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need) return;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need) {
        struct rlimit up = {.rlim_cur = need, .rlim_max = need};
        if (setrlimit(RLIMIT_NOFILE, &up) == 0) return;
    }
    rlim_t want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need ? need : rl.rlim_max;
    if (want > rl.rlim_cur) {
        rl.rlim_cur = want;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (want < need)
        HS_WARN("hearsay sim -n %d: %llu open files allowed (ulimit -Hn), and the ranks' files "
                "may need up to %llu",
                n, (unsigned long long)want, (unsigned long long)need);
}

static double peak_rss_mib(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (double)ru.ru_maxrss / 1024.0 : NAN;
}

static double process_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* --sim-compute bench: the median of 15 timed steps (gradient and local step) of this model
 * on rank 0's shard, after 3 untimed ones, like `hearsay bench step`. */
static int bench_step(const hs_train_opts_t *o, int n, double *step_s)
{
    hs_worker_t *wk = NULL;
    HS_TRY(hs_worker_open(&wk, o, 0, n));
    double t[15];
    int rc = 0;
    for (int i = 0; i < 18 && rc == 0; i++) {
        double t0 = hs_now();
        rc = hs_worker_grad(wk, NULL, NULL, NULL);
        if (rc == 0) rc = hs_worker_apply(wk);
        if (i >= 3) t[i - 3] = hs_now() - t0;
    }
    hs_worker_close(&wk);
    HS_TRY(rc);
    qsort(t, 15, sizeof *t, cmp_d);
    *step_s = t[7];
    return 0;
}

/* Worker threads for local work: --sim-threads, else the cores this process may use. */
static int sim_threads(const hs_sim_opts_t *so)
{
    int p = so->threads;
    if (p <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        p = c > 0 ? (int)c : 1;
    }
    return HS_MAX(1, HS_MIN(p, so->n));
}

static void *rank_main(void *arg)
{
    sim_rank_t *rk = arg;
    sim_world_t *w = ((sim_x_t *)rk->x->impl)->w;
    int rc = hs_train_in(w->o, rk->boot, rk->x, &rk->res);
    if (rc < 0) {
        rk->rc = rc;
        snprintf(rk->msg, sizeof rk->msg, "%s", hs_last_error());
        /* said at once, as its process would: its peers' warnings that follow ("exited")
         * are its consequences, and the run's error names the first rank that failed */
        fprintf(stderr, "hearsay sim: rank %d failed at virtual time %.6f s: %s\n", rk->rank,
                w->now, rk->msg);
        if (w->first_failed < 0) w->first_failed = rk->rank;
        /* a rank that fails stops, as its process would: its peers see it dead */
        rk->dead = 1;
        w->live--;
        wake_all(w);
    }
    return NULL;
}

static int rank_open(sim_world_t *w, sim_rank_t *rk, const hs_sim_opts_t *so, const hs_shape_t *sh,
                     const char *const *hosts)
{
    HS_TRY(hs_boot_init_fixed(&rk->boot, rk->rank, w->n, so->ranks_per_host));
    hs_transport_t *t = hs_calloc(1, sizeof *t, "sim transport");
    hs_exec_t *x = hs_calloc(1, sizeof *x, "virtual execution environment");
    sim_x_t *v = hs_calloc(1, sizeof *v, "virtual execution environment");
    if (!t || !x || !v) {
        free(t);
        free(x);
        free(v);
        return -ENOMEM;
    }
    hs_transport_opts_default(&t->opts);
    t->opts.provider = NULL;
    t->opts.shaping = NULL;
    t->ops = &sim_transport_ops;
    t->rank = rk->rank;
    t->size = w->n;
    t->impl = rk;
    v->w = w;
    v->rk = rk;
    x->ops = &sim_exec_ops;
    x->t = t;
    x->rank = rk->rank;
    x->size = w->n;
    x->impl = v;
    rk->t = t;
    rk->x = x;
    if (sh && hs_shape_nrules(sh) > 0)
        HS_TRY(hs_shaper_create(sh, rk->rank, w->n, hosts, w->o->seed, &rk->shaper));
    return 0;
}

/* Advance to the next event: deliver what is due, wake what is due. 0, or 1 when nothing will
 * ever happen again. */
static int cmp_idx(const void *a, const void *b)
{
    const sim_thread_t *x = *(sim_thread_t *const *)a, *y = *(sim_thread_t *const *)b;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

static int advance(sim_world_t *w)
{
    double next = INFINITY;
    if (w->nheap > 0) next = w->heap[0]->at;
    if (w->flows_next < next) next = w->flows_next;
    if (w->ndl > 0 && w->dl[0]->wake_at < next) next = w->dl[0]->wake_at;
    if (!isfinite(next)) return 1;
    if (next > w->now) w->now = next;
    if (w->flows && w->flows_next <= w->now) { /* first the flows now through the NICs */
        flows_progress(w);
        flows_settle(w);
    }
    while (w->nheap > 0 && w->heap[0]->at <= w->now) deliver(w, heap_pop(w));
    /* the threads whose deadline has come, in the order they were started (as a scan of
     * every thread would wake them) */
    int due = 0;
    while (w->ndl > 0 && w->dl[0]->wake_at <= w->now) {
        w->due[due++] = w->dl[0];
        dl_del(w, w->dl[0]);
    }
    if (due > 1) qsort(w->due, (size_t)due, sizeof *w->due, cmp_idx);
    for (int i = 0; i < due; i++) make_ready(w->due[i]);
    return 0;
}

/* Start the first thread and wait until the run is over: the threads pass the baton among
 * themselves (hand_to) and give it back at the end. */
static int run_all(sim_world_t *w)
{
    hand_to(w, pick_next(w));
    sem_wait(&w->sched);
    return w->end_rc < 0 ? HS_ERR(w->end_rc, "%s", w->end_msg) : 0;
}

int hs_sim_run(const hs_train_opts_t *o, const hs_sim_opts_t *so, hs_train_result_t *res)
{
    if (so->n < 1 || so->n > (1 << 16))
        return HS_ERR(-EINVAL, "hearsay sim -n %d: expected 1 to 65536 ranks", so->n);
    /* the data is loaded once and shared read-only by every simulated worker */
    hs_train_opts_t oo = *o;
    /* one BLAS thread per gradient unless told otherwise: ranks' gradients run side by side
     * (--sim-threads), and a measured step is the CPU time of the thread that ran it */
    if (oo.threads == 0) oo.threads = 1;
    hs_dataset_t train = {0}, test = {0};
    double fixed_s;
    HS_TRY(hs_sim_compute_parse(so->compute, &fixed_s));
    if (hs_data_load(o->data, o->seed, &train, &test) < 0) {
        hs_error_prefix("--data %s", o->data);
        return -EINVAL;
    }
    oo.shared_train = &train;
    oo.shared_test = &test;
    /* Tables every rank would build the same, built once: every rank's shard (one shuffle of
     * the data, not one per rank), the host map and the graph (built by the first rank that
     * needs it). If the shards cannot be made here, each rank makes its own and says why. */
    hs_train_shared_t shared = {0};
    hs_shard_t *shards = hs_calloc((size_t)so->n, sizeof *shards, "shards");
    int *host_map = hs_malloc((size_t)so->n * sizeof *host_map, "host map");
    if (shards && so->n >= 1 && hs_shard_all(&train, o->shard, so->n, o->seed, shards) == 0) {
        shared.shards = shards;
        shared.shard_ranks = so->n;
    }
    if (host_map) {
        int r_ph = so->ranks_per_host > 0 ? so->ranks_per_host : so->n;
        for (int r = 0; r < so->n; r++) host_map[r] = r / r_ph;
        shared.host_of = host_map;
        shared.host_ranks = so->n;
    }
    oo.shared = &shared;
    o = &oo;
    if (fixed_s == 0) {
        int brc = bench_step(o, so->n, &fixed_s);
        if (brc < 0) {
            if (shared.shards) hs_shards_free(shards, so->n);
            free(shards);
            free(host_map);
            hs_dataset_free(&train);
            hs_dataset_free(&test);
            hs_error_prefix("--sim-compute bench");
            return brc;
        }
        if (!o->quiet) {
            printf("hearsay sim: --sim-compute bench: a step of %s takes %.3f ms here (median "
                   "of 15)\n",
                   o->model, 1e3 * fixed_s);
            fflush(stdout);
        }
    }
    sim_world_t w = {.o = o, .n = so->n, .first_failed = -1, .flows_next = INFINITY};
    w.fixed_s = fixed_s;
    w.charge_all = fixed_s < -1.5;
    w.stack_bytes = (size_t)((so->stack_mib > 0 ? so->stack_mib : 2.0) * 1048576.0);
    sem_init(&w.sched, 0, 0);
    w.par = sim_threads(so);
    /* One host thread: the simulated threads hand the baton to each other on one CPU (the
     * one this run started on, so within any affinity the user set): a wake-up on the same
     * core is cheaper than across cores (64 x mlp:64-256-256-10: 1,710 worker-steps/s against
     * 1,550, the simulator's share of the run 24-25 % against 28-29 %). */
    w.pin_cpu = -1;
    if (w.par == 1) {
        int cpu = sched_getcpu();
        if (cpu >= 0) w.pin_cpu = cpu;
    }
    sem_init(&w.slots, 0, (unsigned)w.par);
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    hs_shape_t *sh = NULL;
    char **hosts = NULL;
    int rc = 0;
    w.rk = hs_calloc((size_t)w.n, sizeof *w.rk, "simulated ranks");
    w.in_flight = hs_calloc((size_t)w.n, sizeof *w.in_flight, "messages in flight");
    hosts = hs_calloc((size_t)w.n, sizeof *hosts, "host names");
    if (!w.rk || !w.in_flight || !hosts) rc = -ENOMEM;
    if (rc == 0 && o->link && *o->link) rc = hs_shape_parse(o->link, &sh);
    int rph = so->ranks_per_host > 0 ? so->ranks_per_host : w.n;
    w.rph = rph;
    int nhosts = (w.n + rph - 1) / rph;
    w.nic_tx = hs_calloc((size_t)nhosts, sizeof *w.nic_tx, "NIC state");
    w.nic_rx = hs_calloc((size_t)nhosts, sizeof *w.nic_rx, "NIC state");
    w.nic_ntx = hs_calloc((size_t)nhosts, sizeof *w.nic_ntx, "NIC state");
    w.nic_nrx = hs_calloc((size_t)nhosts, sizeof *w.nic_nrx, "NIC state");
    w.nic_atx = hs_calloc((size_t)nhosts, sizeof *w.nic_atx, "NIC state");
    w.nic_arx = hs_calloc((size_t)nhosts, sizeof *w.nic_arx, "NIC state");
    w.src_at = hs_calloc((size_t)nhosts + 1, sizeof *w.src_at, "NIC state");
    w.dst_at = hs_calloc((size_t)nhosts + 1, sizeof *w.dst_at, "NIC state");
    w.sides = hs_calloc(2 * (size_t)nhosts, sizeof *w.sides, "NIC state");
    if (!w.nic_tx || !w.nic_rx || !w.nic_ntx || !w.nic_nrx || !w.nic_atx || !w.nic_arx ||
        !w.src_at || !w.dst_at || !w.sides)
        rc = -ENOMEM;
    if (rc == 0 && so->nic && *so->nic) rc = hs_sim_nic_parse(so->nic, &w.nic_Bps);
    if (rc == 0) rc = hs_sim_nic_share_parse(so->nic_share, &w.nic_fair);
    w.fair_check = hs_env_flag("HS_TEST_SIM_FAIR_CHECK");
    if (rc == 0 && so->payload) rc = payload_setup(&w, so->payload, &train);
    if (rc == 0) raise_file_limit(o, w.n);
    int acks = 0;
    if (rc == 0) rc = hs_sim_proto_parse(so->proto, &w.rndv_bytes, &acks);
    if (rc == 0 && so->proto && !(w.nic_Bps > 0 && w.nic_fair))
        rc = HS_ERR(-EINVAL,
                    "--sim-proto %s: needs --sim-nic RATE with --sim-nic-share fair "
                    "(it acts on the transfers through the NICs)",
                    so->proto);
    /* TCP's delayed acknowledgements (RFC 1122 4.2.3.2, RFC 5681 4.2): one per two full-sized
     * segments, a 66-byte frame (14 Ethernet + 20 IP + 32 TCP with timestamps) for two
     * 1514-byte frames of data; the NIC's rate counts payload, so in time an acknowledgement
     * takes 66 / (2 x 1514) of the data it acknowledges. */
    if (acks) w.ack_share = 66.0 / (2.0 * 1514.0);
    for (int r = 0; r < w.n && rc == 0; r++) {
        if (!(hosts[r] = malloc(32))) {
            rc = -ENOMEM;
            break;
        }
        snprintf(hosts[r], 32, "host%d", r / rph);
    }
    for (int r = 0; r < w.n && rc == 0; r++) {
        w.rk[r].rank = r;
        w.rk[r].unexp_tail = &w.rk[r].unexpected;
        rc = rank_open(&w, &w.rk[r], so, sh, (const char *const *)hosts);
    }
    w.mains_left = w.n;
    w.live = w.n;
    for (int r = 0; r < w.n && rc == 0; r++)
        rc = spawn(&w, &w.rk[r], rank_main, &w.rk[r], &w.rk[r].main);
    double host0 = hs_now(), cpu0 = process_cpu_s();
    if (rc == 0) rc = run_all(&w);
    double host_wall = hs_now() - host0, host_cpu = process_cpu_s() - cpu0;
    if (rc == 0) rc = w.cons_rc;
    if (rc == 0 && w.fair_mismatches > 0)
        rc = HS_ERR(-EPROTO,
                    "sim: HS_TEST_SIM_FAIR_CHECK: %ld fair-share rates differ from the "
                    "reference scan's",
                    w.fair_mismatches);
    if (rc == 0 && w.rk[0].rc == 0) rc = write_consensus(&w);
    if (rc == 0 && w.first_failed >= 0) {
        int r = w.first_failed;
        rc = HS_ERR(w.rk[r].rc, "rank %d (the first to fail): %s", r, w.rk[r].msg);
    }
    if (rc == 0) {
        for (int r = 0; r < w.n; r++) {
            if (w.rk[r].rc < 0) {
                /* an injected crash is the run's business (the survivors report it); any
                 * other failure of a rank fails the run */
                if (strstr(w.rk[r].msg, "injected crash")) continue;
                rc = HS_ERR(w.rk[r].rc, "rank %d: %s", r, w.rk[r].msg);
                break;
            }
        }
    }
    if (rc == 0 && res) *res = w.rk[0].res;
    if (rc == 0) {
        /* one thread: the run's wall time is the workers' code or the simulator's */
        hs_sim_stats_t stats = {.threads = w.par,
                                .host_wall_s = host_wall,
                                .host_cpu_s = host_cpu,
                                .worker_s = w.worker_s,
                                .local_s = w.local_s,
                                .overhead =
                                    w.par == 1 && host_wall > 0 ? 1 - w.worker_s / host_wall : NAN,
                                .steps = w.steps,
                                .steps_per_s = host_wall > 0 ? (double)w.steps / host_wall : NAN,
                                .peak_rss_mib = peak_rss_mib(),
                                .payload_scale = w.payload_scale,
                                .wire_bytes = w.wire_bytes};
        if (so->stats) *so->stats = stats;
        rc = write_stats(o, &stats);
    }
    /* Threads that returned are joined and freed; those of crashed ranks stay parked on their
     * semaphore for the life of the process (their records too). */
    for (int i = 0; i < w.nth; i++) {
        if (!w.th[i]->exited) continue;
        pthread_join(w.th[i]->th, NULL);
        sem_destroy(&w.th[i]->go);
        free(w.th[i]);
    }
    for (int r = 0; r < w.n && w.rk; r++) {
        hs_shaper_free(&w.rk[r].shaper);
        hs_boot_finalize(&w.rk[r].boot);
        if (w.rk[r].x) w.rk[r].x->ops->destroy(w.rk[r].x);
        free(w.rk[r].t);
        while (w.rk[r].unexpected) {
            sim_msg_t *m = w.rk[r].unexpected;
            w.rk[r].unexpected = m->next;
            free(m);
        }
        while (w.rk[r].dead_letters) {
            sim_msg_t *m = w.rk[r].dead_letters;
            w.rk[r].dead_letters = m->next;
            free(m);
        }
    }
    for (int i = 0; i < w.ncons; i++) free(w.cons[i].sum);
    free(w.cons);
    free(w.rows);
    for (int i = 0; i < w.nheap; i++) msg_free_flight(w.heap[i]);
    while (w.flows) {
        sim_msg_t *m = w.flows;
        w.flows = m->next;
        msg_free_flight(m);
    }
    while (w.ctrl_pool) {
        sim_msg_t *c = w.ctrl_pool;
        w.ctrl_pool = c->next;
        free(c);
    }
    while (w.pool) {
        sim_msg_t *m = w.pool;
        w.pool = m->next;
        free(m);
    }
    while (w.req_pool) {
        struct hs_treq *r = w.req_pool;
        w.req_pool = r->next;
        free(r);
    }
    free(w.heap);
    for (int r = 0; hosts && r < w.n; r++) free(hosts[r]);
    free(hosts);
    hs_shape_free(&sh);
    hs_topo_destroy(&shared.topo);
    if (shared.shards) hs_shards_free(shards, so->n);
    free(shards);
    free(host_map);
    hs_dataset_free(&train);
    hs_dataset_free(&test);
    free(w.in_flight);
    free(w.nic_tx);
    free(w.nic_rx);
    free(w.nic_ntx);
    free(w.nic_nrx);
    free(w.nic_atx);
    free(w.nic_arx);
    free(w.src_at);
    free(w.dst_at);
    free(w.sides);
    free(w.by_src);
    free(w.by_dst);
    free(w.check_rate);
    free(w.rk);
    free(w.th);
    free(w.dl);
    free(w.due);
    sem_destroy(&w.slots);
    sem_destroy(&w.sched);
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    return rc;
}
