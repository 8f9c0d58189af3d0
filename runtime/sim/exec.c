/*
 * runtime/sim/exec.c — the virtual execution environment (hs_exec_t "virtual",
 * hearsay/exec.h): virtual time, sleeps and waits that block in it (the scheduler), the
 * compute model and the local work off the baton, a crash, and the services (svc_*), one
 * simulated thread each or none (a pure service's handler runs at the delivery). The ax_*
 * entry points account the time as the simulator's (hs_sim_in, hs_sim_out). See sim_impl.h.
 */
#include "runtime/sim/sim_impl.h"

#include "hearsay/common.h"
#include "runtime/exec_svc.h" /* hs_svc_handle */

#include <math.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double vx_now(hs_exec_t *x)
{
    return ((sim_x_t *)x->impl)->w->now;
}

static int vx_sleep(hs_exec_t *x, double s)
{
    sim_world_t *w = ((sim_x_t *)x->impl)->w;
    double until = w->now + s;
    while (w->now < until) hs_sim_block_for(w, until, 1);
    return 0;
}

static int vx_wait(hs_exec_t *x, hs_treq_t **reqs, int n, double timeout_s, unsigned flags,
                   int *idx, hs_tstatus_t *st)
{
    sim_x_t *v = x->impl;
    int owner = hs_sim_current(v->w) == v->rk->main;
    int use_idle = x->idle && owner && !(flags & HS_WAIT_NO_IDLE);
    return hs_sim_wait_reqs(v->w, v->rk, reqs, n, timeout_s, use_idle ? x->idle : NULL, x->idle_ctx,
                            idx, st, 0);
}

static int vx_alive(hs_exec_t *x, int peer, double probe_s)
{
    (void)probe_s;
    sim_x_t *v = x->impl;
    return !v->w->rk[peer].dead;
}

static int vx_barrier(hs_exec_t *x)
{
    return hs_sim_barrier(((sim_x_t *)x->impl)->w);
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
 * this rank, fn has finished (hs_sim_hand_to waits for it). So the order of every event, and every
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
    sim_thread_t *t = hs_sim_current(w);
    sim_rank_t *rk = v->rk;
    double until = start + w->fixed_s;
    t->state = T_BLOCKED;
    t->sleeping = 1;
    t->wake_at = until;
    hs_sim_dl_set(w, t);
    pthread_mutex_lock(&w->mu);
    rk->busy = 1;
    pthread_mutex_unlock(&w->mu);
    sim_thread_t *next = hs_sim_pick_next(w);
    int inline_fn = !next || next->rk == rk; /* itself or its own service runs next */
    if (!inline_fn) hs_sim_hand_to(w, next); /* the baton goes on meanwhile */
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
        if (inline_fn) hs_sim_hand_to(w, next);
        sem_wait(&t->go); /* its turn again, at `until` */
    }
    t->sleeping = 0;
    while (w->now < until) hs_sim_block_for(w, until, 1);
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
    sim_thread_t *t = hs_sim_current(w);
    if (!t) return;
    int outside = t->depth == 0; /* (the idle hook runs inside the simulator) */
    if (begin) {
        if (w->charge_all && outside && t->uncounted == 0) t->owed += hs_thread_cpu_s() - t->cpu_at;
        t->uncounted++;
    } else if (t->uncounted > 0 && --t->uncounted == 0 && w->charge_all && outside) {
        t->cpu_at = hs_thread_cpu_s();
    }
}

/* Rank rk ends abruptly (a crash, a fence, a kill): dead for its peers, its threads never run
 * again, its queues dropped. */
static void end_rank(sim_world_t *w, sim_rank_t *rk, int status, const char *what)
{
    rk->dead = 1;
    hs_sim_rndv_release(w, rk); /* (what it held frozen goes where a gone rank's messages go) */
    w->live--;
    w->mains_left--;
    rk->rc = -status;
    snprintf(rk->msg, sizeof rk->msg, "injected crash (status %d)%s", status, what);
    for (sim_thread_t *t = rk->threads; t; t = t->next_in_rank) {
        hs_sim_dl_del(w, t);
        t->state = T_DONE;
    }
    while (rk->unexpected) { /* its senders may take these back (unsent) */
        sim_msg_t *m = rk->unexpected;
        hs_sim_unexp_remove(rk, m);
        hs_sim_append(&rk->dead_letters, m);
    }
    hs_sim_unpost_all(rk);
    rk->completed = NULL;
}

void hs_sim_kill_frozen(sim_world_t *w, sim_rank_t *rk)
{
    fprintf(stderr,
            "hearsay sim: rank %d frozen for good (--straggler freeze) since virtual time %.6f s, "
            "and nothing else left to run at %.6f s: killed (status %d)\n",
            rk->rank, rk->frozen_since, w->now, 71);
    w->nfrozen--;
    end_rank(w, rk, 71, ": frozen for good, killed");
    hs_sim_wake_all(w);
}

/* --straggler freeze: the rank's threads stop for `secs` (INFINITY: for good; hs_sim_pick_next
 * does not run them), what reaches it waits unmatched (hs_sim_deliver), and its peers see it
 * frozen (vx_frozen_for): a SIGSTOP of its process. */
static int vx_freeze(hs_exec_t *x, double secs)
{
    sim_x_t *v = x->impl;
    sim_world_t *w = v->w;
    sim_rank_t *rk = v->rk;
    rk->frozen_since = w->now;
    rk->frozen_until = w->now + secs;
    w->nfrozen++;
    while (w->now < rk->frozen_until) hs_sim_block_for(w, rk->frozen_until, 1);
    w->nfrozen--;
    hs_sim_thaw(w, rk);
    return 0;
}

static int vx_frozen_next(hs_exec_t *x, int after)
{
    sim_world_t *w = ((sim_x_t *)x->impl)->w;
    if (!w->nfrozen) return -1;
    for (int r = after + 1; r < w->n; r++)
        if (w->rk[r].frozen_until > w->now && !w->rk[r].dead) return r;
    return -1;
}

static double vx_frozen_for(hs_exec_t *x, int peer)
{
    sim_world_t *w = ((sim_x_t *)x->impl)->w;
    const sim_rank_t *p = &w->rk[peer];
    return p->frozen_until > w->now ? w->now - p->frozen_since : 0.0;
}

static void vx_crash(hs_exec_t *x, int status)
{
    sim_x_t *v = x->impl;
    sim_world_t *w = v->w;
    sim_rank_t *rk = v->rk;
    end_rank(w, rk, status, "");
    /* crash:...:rejoin=D: a replacement (a thread of its own, the rank's main from now on)
     * starts D later; the rank stays dead until then */
    if (x->rejoin_s >= 0 && w->rejoin_main) {
        sim_thread_t *nt = NULL;
        rk->rejoin_at = w->now + x->rejoin_s;
        if (hs_sim_spawn(w, rk, w->rejoin_main, rk, &nt) == 0) {
            rk->main = nt;
            w->mains_left++;
        } else {
            fprintf(stderr, "hearsay sim: rank %d: no replacement: %s\n", rk->rank,
                    hs_last_error());
        }
    }
    hs_sim_wake_all(w); /* peers waiting on it find it dead */
    sim_thread_t *me = hs_sim_current(w);
    hs_sim_hand_to(w, hs_sim_pick_next(w));
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

/* A pure service (HS_SVC_PURE, no on_tick) has no thread: its handler runs when a message
 * reaches one of its receives, on the thread that delivers it (no thread switch). */
static int svc_is_inline(const hs_service_t *s)
{
    return (s->d.flags & HS_SVC_PURE) && !s->d.on_tick;
}

static int svc_post(hs_service_t *s, int i)
{
    sim_x_t *v = s->x->impl;
    return hs_sim_post_recv(v->rk, s->src[i], s->tag[i], NULL, s->d.slot_bytes,
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
void hs_sim_svc_inline(sim_world_t *w, struct hs_treq *r, const void *data)
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
        hs_sim_off_completed(r);
        if (r->err) { /* a message too long for the slot: latched, the slot stays */
            svc_latch(s, r->err);
        } else {
            hs_tstatus_t st = r->st;
            hs_sim_out(w);
            int hr = hs_svc_handle_inline(s->x, &s->d, r->slot, r->held ? r->held->data : data,
                                          &st); /* on_msg (--trace: an apply span) */
            hs_sim_back(w);
            svc_latch(s, hr);
        }
        data = NULL;
        if (r->held) hs_sim_msg_put(w, r->held);
        r->held = NULL;
        r->done = 0;
        r->err = 0;
        r->st = (hs_tstatus_t){0};
        s->handled++;
    } while (hs_sim_post_req(rk, r) > 0); /* (a repost: its chain exists, it cannot fail) */
    hs_sim_wake_rank(rk);                 /* hs_svc_wait */
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
        int rc = hs_sim_wait_reqs(v->w, v->rk, s->req, n, IDLE_SLICE_S, NULL, NULL, &idx, &st, 1);
        if (s->stop) break;
        if (rc == 0 && idx >= 0) {
            struct hs_treq *r = s->req[idx];
            hs_sim_out(v->w);
            int hr = hs_svc_handle(s->x, &s->d, idx, r->held ? r->held->data : NULL,
                                   &st); /* on_msg (--trace: an apply span) */
            hs_sim_in(v->w);
            hs_sim_req_release(&s->req[idx]);
            svc_latch(s, hr);
            s->handled++;
            hs_sim_wake_rank(v->rk); /* hs_svc_wait */
            hr = svc_post(s, idx);
            if (hr < 0 && !s->rc) s->rc = hr;
        } else if (rc == 0 && idx < 0) { /* every slot gone: nothing more can come */
            hs_sim_block_until(v->w, v->w->now + IDLE_SLICE_S);
        }
        if (s->d.on_tick) {
            hs_sim_out(v->w);
            int tr = s->d.on_tick(s->d.ctx);
            hs_sim_in(v->w);
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
        if (s->req[i]) hs_sim_st_req_free(s->x->t, &s->req[i]);
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
    if (!svc_is_inline(s) && (rc = hs_sim_spawn(v->w, v->rk, svc_main, s, &s->thr)) < 0) goto fail;
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
    while (s->handled == h && v->w->now < until) hs_sim_block_until(v->w, until);
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
        hs_sim_make_ready(s->thr);
        while (s->thr->state != T_DONE) hs_sim_block_until(v->w, INFINITY); /* join */
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
    hs_sim_in(XW(x));
    vx_crash(x, status);
}

static int ax_freeze(hs_exec_t *x, double secs)
{
    SIM_CALL(XW(x), int, vx_freeze(x, secs));
}

static void ax_observe(hs_exec_t *x, long iter, const float *z, size_t n)
{
    SIM_CALL_VOID(XW(x), hs_sim_observe(x, iter, z, n));
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

const hs_exec_ops_t hs_sim_exec_ops = {
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
    .freeze = ax_freeze,
    .frozen_for = vx_frozen_for,
    .frozen_next = vx_frozen_next,
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
    .caps = HS_EXEC_VIRTUAL_CLOCK | HS_EXEC_ONE_PROCESS | HS_EXEC_OBSERVERS,
};
