/*
 * hearsay/exec.h — the execution environment: the one interface through which the training
 * loop and the algorithms read the clock, sleep, wait for transport requests, ask whether a
 * peer still runs, meet at a barrier, and run services.
 *
 * Everything in optim/ and runtime/ that blocks, sleeps, reads the clock or serves messages
 * goes through an hs_exec_t; nothing there calls pthread_*, nanosleep, clock_gettime or
 * hs_transport_wait* itself. Today's implementation (runtime/exec_threads.c: the wall clock,
 * one thread per service) is hs_exec_threads_create(); a second one (virtual time, one
 * process for N workers) implements the same table, and the algorithms run unchanged on it.
 *
 * A **service** is a handler called for every message that arrives on a set of receives the
 * service keeps posted (a source and a tag per slot; HS_ANY_SOURCE allowed). It replaces the
 * hand-written receiver threads: SGP's gossip receiver, leader-SGD's loss and snapshot
 * service, the EASGD center owner. The contract:
 *   - on_msg(ctx, slot, buf, st) runs for each completed receive, one at a time, NOT holding
 *     the service lock (take it with hs_svc_lock around the state it shares with the caller);
 *     the receive is reposted after on_msg returns (same source, tag and buffer).
 *   - on_tick(ctx), when set, runs after every message and at least every ~0.1 s.
 *   - A negative return of on_msg or on_tick, or a transport failure, is latched: the first
 *     error and its message are kept (hs_svc_error returns it, with hs_last_error() set to
 *     the message), and the service goes on serving. A receive slot that fails because its
 *     peer exited is not reposted (no error: liveness is reported elsewhere).
 *   - hs_svc_wait(s, timeout), called with the lock held, releases it until on_msg has
 *     handled at least one more message or the timeout passed, then takes it again.
 *   - hs_svc_stop stops serving, cancels the posted receives and frees the service; it never
 *     blocks on peers. NULL is fine everywhere (lock/unlock/wait are then no-ops).
 *   - flags HS_SVC_PURE: on_msg only updates state it shares with its caller under the lock
 *     (no transport calls, no waits, no clock); without on_tick, an environment may then run
 *     it on the thread that completes the receive, when the message arrives (the simulator
 *     does: no thread switch per message). The threaded environment ignores the flag.
 */
#ifndef HEARSAY_EXEC_H
#define HEARSAY_EXEC_H

#include "hearsay/trace.h"
#include "hearsay/transport.h"

#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hs_exec hs_exec_t;
typedef struct hs_service hs_service_t;

/* hs_exec_wait flags */
#define HS_WAIT_NO_IDLE 0x1u /* do not call the idle hook while waiting */

/* A service (see above). The slot tables are copied at start. */
typedef struct hs_service_desc {
    const char *name;    /* for messages: "gossip receiver", "center service" */
    int n_slots;         /* receives kept posted (>= 1) */
    size_t slot_bytes;   /* capacity of each receive buffer */
    const int *src;      /* (n_slots) source rank of each receive, or HS_ANY_SOURCE */
    const uint32_t *tag; /* (n_slots) tag of each receive */
    int (*on_msg)(void *ctx, int slot, const void *buf, const hs_tstatus_t *st);
    int (*on_tick)(void *ctx); /* NULL: none */
    void *ctx;
    unsigned flags; /* HS_SVC_PURE (above) */
} hs_service_desc_t;

#define HS_SVC_PURE 0x1u

/* hs_exec_ops_t.caps: what an environment is, for the code that must act on it (never by its
 * name). The threaded wall-clock environment has none; the simulator's (hearsay sim) all. */
/* its clock is virtual, not the wall clock: reports and traces say so */
#define HS_EXEC_VIRTUAL_CLOCK 0x1u
/* every rank of the job runs in this process: no process of its own to freeze or to watch with
 * heartbeats; the caller merges the ranks' trace parts after the run */
#define HS_EXEC_ONE_PROCESS 0x2u
/* it watches every rank at no cost (observe, uncounted, the transport's observers' channel):
 * evaluations may be observers that change no event of the run */
#define HS_EXEC_OBSERVERS 0x4u

typedef struct hs_exec_ops {
    size_t size;      /* sizeof(hs_exec_ops_t) of the build that filled it */
    const char *name; /* "threads", "virtual": for messages only (what it is: caps) */
    /* Seconds on this environment's clock (monotonic; the origin is arbitrary). */
    double (*now)(hs_exec_t *x);
    /* Let `seconds` pass on this clock without using the CPU (straggler emulation, back-off).
     * Services keep serving meanwhile. */
    int (*sleep)(hs_exec_t *x, double seconds);
    /* Wait until one of n transport requests (NULL entries ignored) completes, at most
     * timeout_s (0: poll once). The semantics of hs_transport_waitany: 0 with *idx >= 0 (that
     * request completed and was freed; *st filled) or *idx = -1 when every entry is NULL;
     * -ETIMEDOUT with *idx = -1; a negative error with *idx >= 0 (that request failed, freed)
     * or *idx = -1 (the transport failed). Unless flags has HS_WAIT_NO_IDLE, the idle hook
     * runs at least every ~0.1 s while the owner thread waits (never on a service's behalf). */
    int (*wait)(hs_exec_t *x, hs_treq_t **reqs, int n, double timeout_s, unsigned flags, int *idx,
                hs_tstatus_t *st);
    /* 1 when `peer` still runs (or cannot be known: remote peers), 0 when it has exited.
     * Takes at most probe_s; probe_s <= 0: no waiting, what the transport can tell at once
     * (it looks at a same-host peer's process at most every 0.2 s): cheap enough to ask
     * before every send. */
    int (*alive)(hs_exec_t *x, int peer, double probe_s);
    /* Every rank of the job enters before any returns (start-up, checkpoints; never on the
     * training path). */
    int (*barrier)(hs_exec_t *x);
    /* A piece of computation has just run: it took cpu_s seconds of this thread's CPU and
     * wall_s seconds on the wall clock. Returns the seconds it counts for on this clock: the
     * wall clock has already moved (wall_s); a virtual clock moves by its compute model's
     * duration now (the straggler's delay is added by the caller with sleep). */
    double (*compute)(hs_exec_t *x, double cpu_s, double wall_s);
    /* An injected crash: this rank ends now with `status`, abruptly (no drain, no goodbye);
     * never returns. Wall clock: the process exits; virtual time: the rank's threads stop and
     * its peers see it dead. */
    void (*crash)(hs_exec_t *x, int status);
    /* Optional (NULL: nothing): the rank's model after `iter` iterations, z (host, n floats).
     * The simulator, which holds every rank, measures the exact consensus distance with it. */
    void (*observe)(hs_exec_t *x, long iter, const float *z, size_t n);
    /* Start a service; *out gets it. */
    int (*svc_start)(hs_exec_t *x, const hs_service_desc_t *desc, hs_service_t **out);
    void (*svc_lock)(hs_service_t *s);
    void (*svc_unlock)(hs_service_t *s);
    /* Lock held: release it until one more message was handled or timeout_s passed. */
    void (*svc_wait)(hs_service_t *s, double timeout_s);
    /* The first error latched (0: none); hs_last_error() gets its message. */
    int (*svc_error)(hs_service_t *s);
    /* Stop and free; *s = NULL. Never blocks on peers. */
    void (*svc_stop)(hs_service_t **s);
    /* Free the environment (after every service stopped). */
    void (*destroy)(hs_exec_t *x);
    /* Optional (NULL: fn runs at once, then compute for its CPU and wall time): run fn(ctx),
     * a piece of computation that reads and writes only this rank's own state (its model,
     * data, kernels; never the transport, a service's state or the clock), and move the clock
     * as compute does for it; *counted gets the seconds it counts for. Returns fn's result.
     * The virtual environment may run several ranks' fn at the same time. */
    int (*local)(hs_exec_t *x, int (*fn)(void *ctx), void *ctx, double *counted);
    /* Optional (NULL: nothing; the wall clock cannot stop): begin (1) and end (0) a stretch of
     * the owner thread's code that is an observer of the run (hearsay sim's evaluation, unless
     * --sim-eval-traffic): the CPU time it takes is charged to no clock. Nests. */
    void (*uncounted)(hs_exec_t *x, int begin);
    /* Optional (NULL: the wall clock, where the computation calls back as it goes): run fn(ctx)
     * like `local` (not side by side with other ranks), then let its counted time D pass in
     * pieces: for i = 0 .. n-1 (frac ascending in [0, 1]), the clock moves to start + frac[i] D
     * and mark(mctx, i) runs on the owner thread (it may post sends; services serve
     * meanwhile); then to start + D. Gradient-ready notifications in virtual time. */
    int (*local_marks)(hs_exec_t *x, int (*fn)(void *ctx), void *ctx, const double *frac, int n,
                       int (*mark)(void *mctx, int i), void *mctx, double *counted);
    /* HS_EXEC_* (above); read through hs_exec_caps. */
    unsigned caps;
    /* Optional (NULL: the wall clock, where the loop stops the process itself): an injected
     * freeze (--straggler freeze) of this rank for `seconds` (INFINITY: for good), as a
     * SIGSTOP of its process would be: its threads and services do not run, what reaches it
     * waits, its peers see it silent. Returns when it thaws (never, for good: the rank is
     * ended once nothing else runs). */
    int (*freeze)(hs_exec_t *x, double seconds);
    /* Optional (NULL: 0): for how long `peer` has been frozen (0: it runs). */
    double (*frozen_for)(hs_exec_t *x, int peer);
    /* Optional (NULL: -1): the lowest rank above `after` that is frozen now, -1 when none. */
    int (*frozen_next)(hs_exec_t *x, int after);
} hs_exec_ops_t;

/* The part every implementation shares. */
struct hs_exec {
    const hs_exec_ops_t *ops;
    hs_transport_t *t; /* NULL: a job without communication */
    int rank, size;
    /* Called while the owner waits (hs_exec_set_idle). */
    int (*idle)(void *ctx);
    void *idle_ctx;
    void *impl;
    /* --trace: the rank's tracer (NULL: none); waits record "wait" spans. */
    hs_trace_t *trace;
    /* 0: the rank's first process; n > 0: its n-th replacement, which joins a running job
     * (runtime/rejoin.h). Set by the environment. */
    int incarnation;
    /* Set by the loop before an injected crash (hs_exec_crash): >= 0, a replacement starts
     * that many seconds later (environments that can: the simulator's); < 0 none. */
    double rejoin_s;
    /* ... and this clock's time then, and the iteration it crashed at (a replacement reports
     * how long the rank was down) */
    double crashed_at;
    long crashed_iter;
};

/* The threaded, wall-clock environment over t (NULL for a one-rank job without a
 * transport), with the job's bootstrap for barriers (NULL: barriers use the transport). The
 * calling thread becomes the owner (the one whose waits call the idle hook). */
struct hs_boot;
int hs_exec_threads_create(hs_exec_t **out, hs_transport_t *t, struct hs_boot *boot);
/* Free the environment; *x = NULL. Safe on NULL. */
void hs_exec_destroy(hs_exec_t **x);

/* The idle hook: the training loop's own receivers (rank 0 collects evaluation snapshots
 * there). NULL: nothing. */
static inline void hs_exec_set_idle(hs_exec_t *x, int (*idle)(void *ctx), void *ctx)
{
    x->idle = idle;
    x->idle_ctx = ctx;
}

/* The environment's HS_EXEC_* capabilities (0 from a build before they existed). */
static inline unsigned hs_exec_caps(const hs_exec_t *x)
{
    return x->ops->size >= offsetof(hs_exec_ops_t, caps) + sizeof x->ops->caps ? x->ops->caps : 0;
}

static inline double hs_exec_now(hs_exec_t *x)
{
    return x->ops->now(x);
}

static inline int hs_exec_sleep(hs_exec_t *x, double seconds)
{
    return seconds > 0 ? x->ops->sleep(x, seconds) : 0;
}

static inline int hs_exec_wait(hs_exec_t *x, hs_treq_t **reqs, int n, double timeout_s,
                               unsigned flags, int *idx, hs_tstatus_t *st)
{
    if (__builtin_expect(x->trace != NULL, 0) && timeout_s > 0) { /* polls are no waits */
        hs_trace_begin(x->trace, HS_TR_WAIT, 0);
        int rc = x->ops->wait(x, reqs, n, timeout_s, flags, idx, st);
        hs_trace_end(x->trace, HS_TR_WAIT);
        return rc;
    }
    return x->ops->wait(x, reqs, n, timeout_s, flags, idx, st);
}

/* One request: 0 when it completed (freed, *req = NULL); -ETIMEDOUT keeps it; an error
 * frees it. */
static inline int hs_exec_wait1(hs_exec_t *x, hs_treq_t **req, double timeout_s, unsigned flags,
                                hs_tstatus_t *st)
{
    int idx = -1;
    if (!*req) return 0;
    return hs_exec_wait(x, req, 1, timeout_s, flags, &idx, st);
}

static inline int hs_exec_alive(hs_exec_t *x, int peer, double probe_s)
{
    return x->ops->alive(x, peer, probe_s);
}

static inline double hs_exec_frozen_for(hs_exec_t *x, int peer)
{
    return x->ops->size >= offsetof(hs_exec_ops_t, frozen_for) + sizeof x->ops->frozen_for &&
                   x->ops->frozen_for
               ? x->ops->frozen_for(x, peer)
               : 0.0;
}

static inline int hs_exec_frozen_next(hs_exec_t *x, int after)
{
    return x->ops->size >= offsetof(hs_exec_ops_t, frozen_next) + sizeof x->ops->frozen_next &&
                   x->ops->frozen_next
               ? x->ops->frozen_next(x, after)
               : -1;
}

static inline int hs_exec_barrier(hs_exec_t *x)
{
    return x->ops->barrier(x);
}

static inline double hs_exec_compute(hs_exec_t *x, double cpu_s, double wall_s)
{
    return x->ops->compute(x, cpu_s, wall_s);
}

/* Run local computation fn(ctx) and count it on this clock (the `local` slot). */
int hs_exec_local(hs_exec_t *x, int (*fn)(void *ctx), void *ctx, double *counted);

/* 1 when the environment times notifications within a computation itself (local_marks). */
static inline int hs_exec_has_local_marks(const hs_exec_t *x)
{
    return x->ops->size >= offsetof(hs_exec_ops_t, local_marks) + sizeof x->ops->local_marks &&
           x->ops->local_marks;
}

/* The local_marks slot (see there); -ENOSYS without it. */
static inline int hs_exec_local_marks(hs_exec_t *x, int (*fn)(void *ctx), void *ctx,
                                      const double *frac, int n, int (*mark)(void *mctx, int i),
                                      void *mctx, double *counted)
{
    if (!hs_exec_has_local_marks(x)) return -ENOSYS;
    return x->ops->local_marks(x, fn, ctx, frac, n, mark, mctx, counted);
}

/* Begin (1) or end (0) a stretch that no clock pays for (the `uncounted` slot; no-op without). */
static inline void hs_exec_uncounted(hs_exec_t *x, int begin)
{
    if (x->ops->size >= offsetof(hs_exec_ops_t, uncounted) + sizeof x->ops->uncounted &&
        x->ops->uncounted)
        x->ops->uncounted(x, begin);
}

__attribute__((noreturn)) static inline void hs_exec_crash(hs_exec_t *x, int status)
{
    x->ops->crash(x, status);
    __builtin_unreachable();
}

static inline int hs_idle(hs_exec_t *x)
{
    return x->idle ? x->idle(x->idle_ctx) : 0;
}

static inline int hs_svc_start(hs_exec_t *x, const hs_service_desc_t *desc, hs_service_t **out)
{
    return x->ops->svc_start(x, desc, out);
}

/* The service functions take the environment that started the service (NULL service: no-op). */
static inline void hs_svc_lock(hs_exec_t *x, hs_service_t *s)
{
    if (s) x->ops->svc_lock(s);
}

static inline void hs_svc_unlock(hs_exec_t *x, hs_service_t *s)
{
    if (s) x->ops->svc_unlock(s);
}

static inline void hs_svc_wait(hs_exec_t *x, hs_service_t *s, double timeout_s)
{
    if (!s) return;
    hs_trace_begin(x->trace, HS_TR_SVC_WAIT, 0);
    x->ops->svc_wait(s, timeout_s);
    hs_trace_end(x->trace, HS_TR_SVC_WAIT);
}

static inline int hs_svc_error(hs_exec_t *x, hs_service_t *s)
{
    return s ? x->ops->svc_error(s) : 0;
}

static inline void hs_svc_stop(hs_exec_t *x, hs_service_t **s)
{
    if (s && *s) x->ops->svc_stop(s);
}

/* A short lock, for the few fields an owner shares with the threads of its services when the
 * service lock is too wide (leader-SGD's snapshot: picking, pinning and unpinning a buffer).
 * It is held for a handful of loads and stores only -- never across a wait, a transport call,
 * a copy or anything else that may block -- so a thread that finds it taken spins, giving up
 * the CPU between tries, until its holder lets go a few instructions later: in the threaded
 * environment (holders may be preempted, then run again) and in virtual time (no rank
 * switches while it is held: a switch happens only in the calls above) alike. A zeroed
 * hs_spinlock_t is unlocked; there is nothing to destroy. It is here so that optim/ blocks
 * through the environment only (no pthread_* there). */
typedef struct hs_spinlock {
    unsigned char held;
} hs_spinlock_t;

static inline void hs_spin_lock(hs_spinlock_t *l)
{
    while (__atomic_test_and_set(&l->held, __ATOMIC_ACQUIRE))
        while (__atomic_load_n(&l->held, __ATOMIC_RELAXED)) sched_yield();
}

static inline void hs_spin_unlock(hs_spinlock_t *l)
{
    __atomic_clear(&l->held, __ATOMIC_RELEASE);
}

#ifdef __cplusplus
}
#endif
#endif
