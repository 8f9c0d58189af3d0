/*
 * kernels/cpu/cpu_pool.c — the CPU backend's worker threads: hs_kcpu_parallel(k, fn, arg)
 * runs fn(arg, t, T) for t = 0 .. T-1 at once, t = 0 on the caller, and returns when all
 * have returned. T is the handle's thread count; with one thread there is no pool and fn
 * runs inline.
 *
 * Convolution splits its batch this way, batch norm its channels, gemm its rows or columns,
 * each share calling OpenBLAS, which a handle with a pool sets to one thread (cpu_ops.c): a
 * gemm of one image is too small for OpenBLAS to split well, two callers of a multi-threaded
 * OpenBLAS queue on its one lock, and its idle threads spin beside ours. A worker spins for a
 * few microseconds after each task, since the next one usually follows at once, then
 * sleeps on a condition variable, so an idle handle costs no CPU.
 *
 * Should two threads call kernels on one handle at once, the second finds the pool busy and
 * runs its whole task itself (hs_kcpu_parallel returns the shares it ran).
 */
#include "kernels/cpu/cpu_internal.h"

#include "hearsay/common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Spin iterations before sleeping (a pause each: about 10-40 us in all). */
#define POOL_SPIN 1000

struct hs_kcpu_pool {
    int T;               /* threads, the caller included */
    pthread_t *tid;      /* T - 1 workers */
    int started;         /* workers created */
    pthread_mutex_t mu;  /* guards the sleeps on wake and done */
    pthread_cond_t wake; /* gen moved on */
    pthread_cond_t done; /* pending reached 0 */
    hs_kcpu_task_fn fn;  /* the current task, published by gen */
    void *arg;
    int stop;           /* workers exit at the next gen */
    atomic_uint gen;    /* task generation: workers run one task per increment */
    atomic_int pending; /* workers still running the current task */
    atomic_flag busy;   /* a parallel section is running */
};

typedef struct {
    hs_kcpu_pool_t *pool;
    int t;
} pool_worker_t;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *pool_worker(void *p)
{
    hs_kcpu_pool_t *pool = ((pool_worker_t *)p)->pool;
    const int t = ((pool_worker_t *)p)->t;
    free(p);
    unsigned seen = 0;
    for (;;) {
        unsigned g = atomic_load_explicit(&pool->gen, memory_order_acquire);
        for (int i = 0; g == seen && i < POOL_SPIN; i++) {
            cpu_relax();
            g = atomic_load_explicit(&pool->gen, memory_order_acquire);
        }
        if (g == seen) {
            pthread_mutex_lock(&pool->mu);
            while ((g = atomic_load_explicit(&pool->gen, memory_order_acquire)) == seen)
                pthread_cond_wait(&pool->wake, &pool->mu);
            pthread_mutex_unlock(&pool->mu);
        }
        seen = g;
        if (pool->stop) return NULL;
        pool->fn(pool->arg, t, pool->T);
        if (atomic_fetch_sub_explicit(&pool->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&pool->mu);
            pthread_cond_signal(&pool->done);
            pthread_mutex_unlock(&pool->mu);
        }
    }
}

static void pool_release(hs_kcpu_pool_t *pool)
{
    if (pool->started) {
        pthread_mutex_lock(&pool->mu);
        pool->stop = 1;
        atomic_fetch_add_explicit(&pool->gen, 1, memory_order_release);
        pthread_cond_broadcast(&pool->wake);
        pthread_mutex_unlock(&pool->mu);
        for (int i = 0; i < pool->started; i++) pthread_join(pool->tid[i], NULL);
    }
    pthread_cond_destroy(&pool->done);
    pthread_cond_destroy(&pool->wake);
    pthread_mutex_destroy(&pool->mu);
    free(pool->tid);
    free(pool);
}

int hs_kcpu_pool_create(hs_kcpu_pool_t **out, int threads)
{
    *out = NULL;
    if (threads <= 1) return 0;
    hs_kcpu_pool_t *pool = hs_calloc(1, sizeof *pool, "cpu thread pool");
    if (!pool) return -ENOMEM;
    pool->T = threads;
    atomic_init(&pool->gen, 0);
    atomic_init(&pool->pending, 0);
    atomic_flag_clear(&pool->busy);
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pthread_cond_init(&pool->done, NULL);
    pool->tid = hs_calloc((size_t)threads - 1, sizeof *pool->tid, "cpu thread pool");
    if (!pool->tid) {
        pool_release(pool);
        return -ENOMEM;
    }
    for (int t = 1; t < threads; t++) {
        pool_worker_t *w = malloc(sizeof *w);
        int rc = w ? 0 : ENOMEM;
        if (w) {
            w->pool = pool;
            w->t = t;
            rc = pthread_create(&pool->tid[t - 1], NULL, pool_worker, w);
            if (rc) free(w);
        }
        if (rc) {
            pool_release(pool);
            return HS_ERR(-rc, "cpu thread pool: cannot start worker %d of %d: %s", t, threads - 1,
                          strerror(rc));
        }
        pool->started++;
    }
    *out = pool;
    return 0;
}

void hs_kcpu_pool_free(hs_kcpu_pool_t **pp)
{
    if (!pp || !*pp) return;
    pool_release(*pp);
    *pp = NULL;
}

int hs_kcpu_threads(hs_kernels_t *k)
{
    hs_kcpu_pool_t *pool = k ? k->impl : NULL;
    return pool ? pool->T : 1;
}

int hs_kcpu_parallel(hs_kernels_t *k, hs_kcpu_task_fn fn, void *arg)
{
    hs_kcpu_pool_t *pool = k ? k->impl : NULL;
    if (!pool || atomic_flag_test_and_set_explicit(&pool->busy, memory_order_acquire)) {
        fn(arg, 0, 1);
        return 1;
    }
    pool->fn = fn;
    pool->arg = arg;
    atomic_store_explicit(&pool->pending, pool->T - 1, memory_order_relaxed);
    pthread_mutex_lock(&pool->mu);
    atomic_fetch_add_explicit(&pool->gen, 1, memory_order_release);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mu);
    fn(arg, 0, pool->T);
    for (int i = 0; i < POOL_SPIN; i++) {
        if (atomic_load_explicit(&pool->pending, memory_order_acquire) == 0) break;
        cpu_relax();
    }
    if (atomic_load_explicit(&pool->pending, memory_order_acquire) != 0) {
        pthread_mutex_lock(&pool->mu);
        while (atomic_load_explicit(&pool->pending, memory_order_acquire) != 0)
            pthread_cond_wait(&pool->done, &pool->mu);
        pthread_mutex_unlock(&pool->mu);
    }
    atomic_flag_clear_explicit(&pool->busy, memory_order_release);
    return pool->T;
}

void hs_kcpu_share(size_t n, int t, int T, size_t *lo, size_t *hi)
{
    /* contiguous shares, the first n % T one longer */
    size_t q = n / (size_t)T, r = n % (size_t)T, tt = (size_t)t;
    *lo = tt * q + (tt < r ? tt : r);
    *hi = *lo + q + (tt < r ? 1 : 0);
}
