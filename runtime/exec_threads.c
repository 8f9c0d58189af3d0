/*
 * runtime/exec_threads.c — the threaded, wall-clock execution environment (hearsay/exec.h).
 *
 * The clock is hs_now() (CLOCK_MONOTONIC), sleeping is hs_sleep(), a wait is the transport's
 * waitany in slices of at most IDLE_SLICE_S with the idle hook between them (on the owner
 * thread only), liveness is a receive on HS_TAG_PING that nobody sends (the transport's
 * liveness check fails it when the peer has exited), and a barrier is the bootstrap's. A
 * service is one thread: it keeps its receives posted, calls the handler for each message,
 * latches the first error, and stops when told (it re-checks every SVC_POLL_S).
 */
#include "hearsay/exec.h"
#include "runtime/exec_svc.h"

#include "hearsay/algo.h"
#include "hearsay/bootstrap.h"
#include "hearsay/common.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define IDLE_SLICE_S 0.1 /* the owner's waits call the idle hook at least this often */
#define SVC_POLL_S   0.1 /* a service re-checks its stop flag this often */
/* ... and this often whether the peer of a slot that failed (it exited) runs again: a
 * replacement of a crashed rank joined (crash:...:rejoin=D), and its messages are taken */
#define SVC_REVIVE_S 0.5

typedef struct threads {
    hs_boot_t *boot;
    pthread_t owner;
} threads_t;

struct hs_service {
    hs_exec_t *x;
    hs_service_desc_t d;
    hs_svc_slots_t sl;
    pthread_t thr;
    int thr_on;
    pthread_mutex_t mu; /* the service lock (hs_svc_lock) */
    pthread_cond_t cv;  /* broadcast after each handled message */
    int stop;
    int rc;
    char msg[HS_ERRMSG_MAX];
    double revive_at; /* the next look at the peers of failed slots (svc_main) */
};

static double th_now(hs_exec_t *x)
{
    (void)x;
    return hs_now();
}

static int th_sleep(hs_exec_t *x, double s)
{
    (void)x;
    hs_sleep(s);
    return 0;
}

static int th_wait(hs_exec_t *x, hs_treq_t **reqs, int n, double timeout_s, unsigned flags,
                   int *idx, hs_tstatus_t *st)
{
    threads_t *th = x->impl;
    int idle = x->idle && !(flags & HS_WAIT_NO_IDLE) && pthread_equal(pthread_self(), th->owner);
    *idx = -1;
    if (!x->t) return -ENOTCONN;
    if (!idle || timeout_s <= IDLE_SLICE_S)
        return hs_transport_waitany(x->t, reqs, n, timeout_s, idx, st);
    double deadline = hs_now() + timeout_s;
    for (;;) {
        double remain = deadline - hs_now();
        int rc = hs_transport_waitany(x->t, reqs, n, remain > IDLE_SLICE_S ? IDLE_SLICE_S : remain,
                                      idx, st);
        if (rc != -ETIMEDOUT || remain <= IDLE_SLICE_S) return rc;
        HS_TRY(x->idle(x->idle_ctx));
    }
}

static int th_alive(hs_exec_t *x, int peer, double probe_s)
{
    char dummy[8];
    hs_treq_t *req = NULL;
    if (!x->t) return 1;
    if (probe_s <= 0) { /* no waiting: the transport's own look at the process, where it can */
        int gone = hs_transport_peer_gone(x->t, peer);
        if (gone >= 0) return !gone;
    }
    if (hs_transport_irecv(x->t, peer, HS_TAG_PING, dummy, sizeof dummy, &req) < 0) return 1;
    /* else one pass of the transport's liveness check, no sleep (a wait of 0 would only poll,
     * without that check) */
    int idx = -1;
    int rc = hs_transport_waitany(x->t, &req, 1, probe_s > 0 ? probe_s : 1e-9, &idx, NULL);
    if (req) hs_transport_req_free(x->t, &req);
    return rc != -ECONNRESET;
}

static int th_barrier(hs_exec_t *x)
{
    threads_t *th = x->impl;
    if (th->boot) return hs_boot_barrier(th->boot);
    return x->t ? hs_transport_barrier(x->t) : 0;
}

static double th_compute(hs_exec_t *x, double cpu_s, double wall_s)
{
    (void)x;
    (void)cpu_s;
    return wall_s;
}

static void th_crash(hs_exec_t *x, int status)
{
    (void)x;
    fflush(NULL);
    _exit(status);
}

/* --- services --------------------------------------------------------------------------- */

static void svc_latch(hs_service_t *s, int rc)
{
    pthread_mutex_lock(&s->mu);
    if (!s->rc) {
        s->rc = rc;
        snprintf(s->msg, sizeof s->msg, "%s", hs_last_error());
    }
    pthread_mutex_unlock(&s->mu);
}

static void *svc_main(void *arg)
{
    hs_service_t *s = arg;
    hs_transport_t *t = s->x->t;
    int n = s->d.n_slots;
    hs_trace_thread(s->x->trace, s->d.name); /* --trace: this thread's track */
    for (;;) {
        pthread_mutex_lock(&s->mu);
        int stop = s->stop;
        pthread_mutex_unlock(&s->mu);
        if (stop) break;
        int active = 0;
        for (int i = 0; i < n; i++) active += s->sl.req[i] != NULL;
        int idx = -1, rc = -ETIMEDOUT;
        hs_tstatus_t st;
        if (active) {
            hs_trace_begin(s->x->trace, HS_TR_RECV, 0); /* --trace: waiting for a message */
            rc = hs_transport_waitany(t, s->sl.req, n, SVC_POLL_S, &idx, &st);
            hs_trace_end(s->x->trace, HS_TR_RECV);
        } else
            hs_sleep(SVC_POLL_S); /* every peer has exited: nothing more can come */
        if (rc == 0 && idx >= 0) {
            int hr = hs_svc_handle(s->x, &s->d, idx, s->sl.buf[idx], &st);
            if (hr < 0) svc_latch(s, hr);
            pthread_mutex_lock(&s->mu);
            pthread_cond_broadcast(&s->cv);
            pthread_mutex_unlock(&s->mu);
            if ((hr = hs_svc_slots_post(&s->sl, t, idx)) < 0) svc_latch(s, hr);
        } else if (rc < 0 && rc != -ETIMEDOUT && idx < 0) { /* the transport itself failed */
            svc_latch(s, rc);
            hs_sleep(SVC_POLL_S);
        } /* a failed slot (its peer exited) is not reposted, unless its peer runs again */
        double now = hs_now();
        if (now >= s->revive_at) { /* (a replacement took its place: runtime/rejoin.h) */
            s->revive_at = now + SVC_REVIVE_S;
            for (int i = 0; i < n; i++)
                if (!s->sl.req[i] && s->sl.src[i] >= 0 &&
                    hs_transport_peer_gone(t, s->sl.src[i]) == 0) {
                    int pr = hs_svc_slots_post(&s->sl, t, i);
                    if (pr < 0) svc_latch(s, pr);
                }
        }
        if (s->d.on_tick) {
            int tr = s->d.on_tick(s->d.ctx);
            if (tr < 0) svc_latch(s, tr);
        }
    }
    return NULL;
}

static void th_svc_stop(hs_service_t **sp)
{
    hs_service_t *s = *sp;
    if (!s) return;
    if (s->thr_on) {
        pthread_mutex_lock(&s->mu);
        s->stop = 1;
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thr, NULL);
    }
    hs_svc_slots_close(&s->sl, s->x->t);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
    *sp = NULL;
}

static int th_svc_start(hs_exec_t *x, const hs_service_desc_t *desc, hs_service_t **out)
{
    *out = NULL;
    if (!x->t) return HS_ERR(-ENOTCONN, "%s: no transport", desc->name);
    if (desc->n_slots < 1 || !desc->on_msg)
        return HS_ERR(-EINVAL, "%s: a service needs receives and a handler", desc->name);
    hs_service_t *s = hs_calloc(1, sizeof *s, "service");
    if (!s) return -ENOMEM;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->x = x;
    s->d = *desc;
    int rc = hs_svc_slots_open(&s->sl, x->t, desc);
    if (rc < 0) goto fail;
    if ((rc = pthread_create(&s->thr, NULL, svc_main, s)) != 0) {
        rc = HS_ERR(-rc, "cannot start the %s thread: %s", desc->name, strerror(rc));
        goto fail;
    }
    s->thr_on = 1;
    *out = s;
    return 0;
fail:
    th_svc_stop(&s);
    return rc;
}

static void th_svc_lock(hs_service_t *s)
{
    pthread_mutex_lock(&s->mu);
}

static void th_svc_unlock(hs_service_t *s)
{
    pthread_mutex_unlock(&s->mu);
}

static void th_svc_wait(hs_service_t *s, double timeout_s)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long ns = (long)(timeout_s * 1e9);
    ts.tv_sec += ns / 1000000000L;
    ts.tv_nsec += ns % 1000000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&s->cv, &s->mu, &ts);
}

static int th_svc_error(hs_service_t *s)
{
    pthread_mutex_lock(&s->mu);
    int rc = s->rc;
    char msg[HS_ERRMSG_MAX];
    snprintf(msg, sizeof msg, "%s", s->msg);
    pthread_mutex_unlock(&s->mu);
    return rc ? HS_ERR(rc, "%s: %s", s->d.name, msg) : 0;
}

static void th_destroy(hs_exec_t *x)
{
    free(x->impl);
    free(x);
}

static const hs_exec_ops_t threads_ops = {
    .size = sizeof(hs_exec_ops_t),
    .name = "threads",
    .now = th_now,
    .sleep = th_sleep,
    .wait = th_wait,
    .alive = th_alive,
    .barrier = th_barrier,
    .compute = th_compute,
    .crash = th_crash,
    .svc_start = th_svc_start,
    .svc_lock = th_svc_lock,
    .svc_unlock = th_svc_unlock,
    .svc_wait = th_svc_wait,
    .svc_error = th_svc_error,
    .svc_stop = th_svc_stop,
    .destroy = th_destroy,
};

int hs_exec_threads_create(hs_exec_t **out, hs_transport_t *t, hs_boot_t *boot)
{
    *out = NULL;
    hs_exec_t *x = hs_calloc(1, sizeof *x, "execution environment");
    threads_t *th = hs_calloc(1, sizeof *th, "execution environment");
    if (!x || !th) {
        free(x);
        free(th);
        return -ENOMEM;
    }
    th->boot = boot;
    th->owner = pthread_self();
    x->ops = &threads_ops;
    x->t = t;
    x->rank = t ? hs_transport_rank(t) : boot ? hs_boot_rank(boot) : 0;
    x->size = t ? hs_transport_size(t) : boot ? hs_boot_size(boot) : 1;
    x->impl = th;
    *out = x;
    return 0;
}

void hs_exec_destroy(hs_exec_t **x)
{
    if (!x || !*x) return;
    (*x)->ops->destroy(*x);
    *x = NULL;
}

int hs_exec_local(hs_exec_t *x, int (*fn)(void *ctx), void *ctx, double *counted)
{
    if (x->ops->size >= offsetof(hs_exec_ops_t, local) + sizeof x->ops->local && x->ops->local)
        return x->ops->local(x, fn, ctx, counted);
    double w0 = hs_now(), c0 = hs_thread_cpu_s();
    int rc = fn(ctx);
    *counted = x->ops->compute(x, hs_thread_cpu_s() - c0, hs_now() - w0);
    return rc;
}
