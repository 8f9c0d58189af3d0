/*
 * runtime/sim/sched.c — the simulator's scheduler: virtual time, the baton (one simulated
 * thread runs at a time) and the ready queue, the deadline heap, the event heap (messages in
 * flight by delivery time), the barrier of the live ranks, and the accounting of the workers'
 * code against the simulator's. It knows threads, ranks' thread lists and messages as events;
 * what an event does it leaves to the world's callbacks: w->deliver (the transport) and w->net
 * (the network model's contract, sim_impl.h). See sim_impl.h for the whole.
 */
#include "runtime/sim/sim_impl.h"

#include "hearsay/common.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
void hs_sim_dl_del(sim_world_t *w, sim_thread_t *t)
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
void hs_sim_dl_set(sim_world_t *w, sim_thread_t *t)
{
    hs_sim_dl_del(w, t);
    if (!(t->wake_at < INFINITY)) return;
    dl_place(w, w->ndl++, t);
    dl_up(w, t->hpos);
}

void hs_sim_make_ready(sim_thread_t *t)
{
    if (t->state == T_BLOCKED || t->state == T_NEW) {
        sim_world_t *w = t->w;
        hs_sim_dl_del(w, t);
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
void hs_sim_wake_rank(sim_rank_t *rk)
{
    for (sim_thread_t *t = rk->threads; t; t = t->next_in_rank)
        if (t->state == T_BLOCKED && !t->sleeping) hs_sim_make_ready(t);
}

void hs_sim_wake_all(sim_world_t *w)
{
    for (int i = 0; i < w->nth; i++)
        if (w->th[i]->state == T_BLOCKED && !w->th[i]->sleeping) hs_sim_make_ready(w->th[i]);
}

static int advance(sim_world_t *w);

/* Nothing is left to happen but ranks frozen for good (--straggler freeze:...:for=forever)
 * whose loop has not ended: each is ended as its process would be by `hearsay run`, killed
 * (status 71; its peers see it dead). 1 when it ended one. */
int hs_sim_end_frozen(sim_world_t *w)
{
    int running = 0, frozen = 0;
    for (int r = 0; r < w->n; r++) {
        sim_rank_t *rk = &w->rk[r];
        if (rk->dead || !rk->main || rk->main->state == T_DONE) continue;
        if (isinf(rk->frozen_until))
            frozen++;
        else
            running++;
    }
    if (!frozen || running) return 0;
    double next = w->net->ops->next_event(w->net);
    if (w->ndl > 0 && w->dl[0]->wake_at < next) next = w->dl[0]->wake_at;
    if (isfinite(next)) return 0; /* (something else is still to come) */
    for (int r = 0; r < w->n; r++) {
        sim_rank_t *rk = &w->rk[r];
        if (rk->dead || !rk->main || rk->main->state == T_DONE || !isinf(rk->frozen_until))
            continue;
        hs_sim_kill_frozen(w, rk);
    }
    return 1;
}

/* The baton holder picks the thread to run next: the first still ready (a crash ends some),
 * else the clock moves to the next event. NULL when the run is over (every rank's training
 * loop ended) or when nothing can ever happen again (w->end_rc and end_msg say so). */
sim_thread_t *hs_sim_pick_next(sim_world_t *w)
{
    for (;;) {
        if (w->mains_left <= 0) return NULL;
        while (w->ready_head) {
            sim_thread_t *t = w->ready_head;
            w->ready_head = t->next_ready;
            if (!w->ready_head) w->ready_tail = NULL;
            if (t->state != T_READY) continue;
            if (t->rk->frozen_until > w->now) { /* frozen (--straggler freeze): not before */
                t->state = T_BLOCKED;
                t->wake_at = t->rk->frozen_until;
                if (isfinite(t->wake_at)) hs_sim_dl_set(w, t);
                continue;
            }
            return t;
        }
        if (w->nheap == 0 && hs_sim_end_frozen(w)) continue; /* (the rest froze for good) */
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
void hs_sim_hand_to(sim_world_t *w, sim_thread_t *t)
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
    sim_thread_t *next = hs_sim_pick_next(w);
    if (next == me) { /* its own deadline came first: it goes on */
        me->state = T_RUNNING;
        me->wake_at = INFINITY;
        return;
    }
    hs_sim_hand_to(w, next);
    sem_wait(&me->go);
}

/* The running thread blocks until woken or until `deadline` (virtual seconds); with
 * `sleeping`, until the deadline only. */
void hs_sim_block_for(sim_world_t *w, double deadline, int sleeping)
{
    sim_thread_t *t = w->current;
    t->state = T_BLOCKED;
    t->sleeping = sleeping;
    t->wake_at = deadline;
    hs_sim_dl_set(w, t);
    yield_baton(w, t);
    t->sleeping = 0;
}

void hs_sim_block_until(sim_world_t *w, double deadline)
{
    hs_sim_block_for(w, deadline, 0);
}

sim_thread_t *hs_sim_current(sim_world_t *w)
{
    return w->current;
}

static void *trampoline(void *arg)
{
    sim_thread_t *t = arg;
    sem_wait(&t->go);
    /* a rank's main thread starts in the workers' code; a service's in the simulator's */
    t->depth = t == t->rk->main ? 0 : 1;
    t->left_at = hs_now();
    if (t->w->charge_all) t->cpu_at = hs_thread_cpu_s();
    t->fn(t->arg);
    if (t == t->rk->main) hs_sim_in(t->w);
    t->state = T_DONE;
    t->exited = 1;
    if (t == t->rk->main) t->w->mains_left--;
    hs_sim_wake_rank(t->rk); /* a joiner may wait for this thread */
    hs_sim_hand_to(t->w, hs_sim_pick_next(t->w));
    return NULL;
}

int hs_sim_spawn(sim_world_t *w, sim_rank_t *rk, void *(*fn)(void *), void *arg, sim_thread_t **out)
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
    hs_sim_make_ready(t);
    if (out) *out = t;
    return 0;
}

static int msg_before(const sim_msg_t *a, const sim_msg_t *b)
{
    return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

/* Room for extra more messages in flight. */
int hs_sim_event_reserve(sim_world_t *w, int extra)
{
    if (w->nheap + extra > w->capheap) {
        int nc = w->capheap ? 2 * w->capheap : 256;
        while (nc < w->nheap + extra) nc *= 2;
        sim_msg_t **nh = realloc(w->heap, (size_t)nc * sizeof *nh);
        if (!nh) return HS_ERR(-ENOMEM, "out of memory for messages in flight");
        w->heap = nh;
        if (w->net->ops->reserve) HS_TRY(w->net->ops->reserve(w->net, nc)); /* its scratch */
        w->capheap = nc;
    }
    return 0;
}

/* Push m (the heap always keeps room for the messages the network model carries: it pushes
 * them without failing, e.g. flows_settle). */
int hs_sim_event_push(sim_world_t *w, sim_msg_t *m)
{
    HS_TRY(hs_sim_event_reserve(w, 1 + w->nflows));
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

int hs_sim_barrier(sim_world_t *w)
{
    uint64_t gen = w->barrier_gen;
    w->barrier_count++;
    for (;;) {
        if (w->barrier_gen != gen) return 0;
        if (w->barrier_count >= w->live) {
            w->barrier_count = 0;
            w->barrier_gen++;
            hs_sim_wake_all(w);
            return 0;
        }
        hs_sim_block_until(w, INFINITY);
    }
}

/* --- accounting: the workers' code and the simulator's ----------------------------------- */

/* The running thread enters the simulator's code (from the workers'). With measured-all
 * compute, the thread CPU time it spent in the workers' code since it last left the simulator
 * (the mixing, the optimizer step, an evaluation, a service's handler: all but the gradient,
 * which vx_local times) passes on its virtual clock now, before the call it enters takes
 * effect: a send goes out once the work before it is done. Not while it holds a service lock
 * (the one thread that runs at a time is what keeps that section atomic here): the time is
 * paid at its first entry after the lock. */
void hs_sim_in(sim_world_t *w)
{
    sim_thread_t *t = w->current;
    if (!t || t->depth++ != 0) return;
    w->worker_s += hs_now() - t->left_at;
    if (!w->charge_all || t->uncounted > 0) return; /* (an observer's: nobody pays it) */
    t->owed += hs_thread_cpu_s() - t->cpu_at;
    if (t->locks > 0 || !(t->owed > 0)) return;
    double until = w->now + t->owed;
    t->owed = 0;
    while (w->now < until) hs_sim_block_for(w, until, 1);
}

/* The running thread comes back into the simulator from a pure service's handler that it ran
 * for another rank, inside a delivery (hs_sim_svc_inline): the handler takes no virtual time (it
 * runs at the delivery's time), and what it cost is nobody's to pay. */
void hs_sim_back(sim_world_t *w)
{
    sim_thread_t *t = w->current;
    if (t && t->depth++ == 0) w->worker_s += hs_now() - t->left_at;
}

/* ... and goes back to the workers' code. */
void hs_sim_out(sim_world_t *w)
{
    sim_thread_t *t = w->current;
    if (t && --t->depth == 0) {
        t->left_at = hs_now();
        if (w->charge_all) t->cpu_at = hs_thread_cpu_s();
    }
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
    double net_next = w->net->ops->next_event(w->net);
    if (net_next < next) next = net_next;
    if (w->ndl > 0 && w->dl[0]->wake_at < next) next = w->dl[0]->wake_at;
    if (!isfinite(next)) return 1;
    if (next > w->now) w->now = next;
    if (net_next <= w->now) w->net->ops->advance(w->net); /* first what is through the network */
    while (w->nheap > 0 && w->heap[0]->at <= w->now) w->deliver(w, heap_pop(w));
    /* the threads whose deadline has come, in the order they were started (as a scan of
     * every thread would wake them) */
    int due = 0;
    while (w->ndl > 0 && w->dl[0]->wake_at <= w->now) {
        w->due[due++] = w->dl[0];
        hs_sim_dl_del(w, w->dl[0]);
    }
    if (due > 1) qsort(w->due, (size_t)due, sizeof *w->due, cmp_idx);
    for (int i = 0; i < due; i++) hs_sim_make_ready(w->due[i]);
    return 0;
}

/* Start the first thread and wait until the run is over: the threads pass the baton among
 * themselves (hs_sim_hand_to) and give it back at the end. */
int hs_sim_run_all(sim_world_t *w)
{
    hs_sim_hand_to(w, hs_sim_pick_next(w));
    sem_wait(&w->sched);
    return w->end_rc < 0 ? HS_ERR(w->end_rc, "%s", w->end_msg) : 0;
}
