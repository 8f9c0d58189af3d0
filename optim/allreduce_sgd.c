/*
 * optim/allreduce_sgd.c — synchronous data-parallel SGD: the flat gradient is averaged over
 * every rank by a ring all-reduce (hearsay/allreduce.h) each step, then every rank takes the
 * same local step, so all replicas stay identical (same initialisation, same averaged
 * gradient, same deterministic schedule). The all-reduce is a collective: a straggler or a
 * paused rank stalls everyone, and a dead rank stops the run with an error naming it within
 * the all-reduce's bounded waits.
 */
#include "hearsay/algo.h"
#include "hearsay/allreduce.h"
#include "hearsay/common.h"

#include <stdlib.h>

struct hs_algo {
    hs_dist_t *d;
    hs_allreduce_t *ar;
    float *host; /* (n) host staging for non-CPU backends */
};

static int ar_step(hs_algo_t *a, long t)
{
    hs_dist_t *d = a->d;
    hs_kernels_t *k = d->k;
    float *g = d->grads;
    if (!a->ar) return hs_dist_apply(d, 1.0); /* one worker: its gradient is the average */
    double t0 = hs_exec_now(d->x);
    float *buf = g;
    if (a->host) {
        HS_TRY(k->ops->to_host(k, a->host, g, d->n * sizeof(float)));
        buf = a->host;
    }
    int rc = hs_allreduce_run(a->ar, buf);
    if (rc < 0) {
        hs_error_prefix("all-reduce SGD, iteration %ld", t);
        return rc;
    }
    if (a->host) HS_TRY(k->ops->to_device(k, g, a->host, d->n * sizeof(float)));
    /* A ring all-reduce moves 2 (n-1)/n of the buffer in and out of every rank. */
    uint64_t bytes = (uint64_t)(2.0 * (d->size - 1) / d->size * (double)(d->n * sizeof(float)));
    d->st.bytes_sent += bytes;
    d->st.bytes_recv += bytes;
    d->st.comm_s += hs_exec_now(d->x) - t0;
    return hs_dist_apply(d, 1.0);
}

static int ar_drain(hs_algo_t *a, int final)
{
    (void)a;
    (void) final;
    return 0;
}

static void ar_finalize(hs_algo_t **ap)
{
    hs_algo_t *a = ap ? *ap : NULL;
    if (!a) return;
    hs_allreduce_destroy(&a->ar);
    free(a->host);
    free(a);
    *ap = NULL;
}

static int ar_init(hs_algo_t **out, hs_dist_t *d)
{
    *out = NULL;
    hs_algo_t *a = hs_calloc(1, sizeof *a, "all-reduce SGD state");
    if (!a) return -ENOMEM;
    a->d = d;
    hs_allreduce_opts_t ao;
    int rc = hs_allreduce_opts_default(&ao);
    if (rc < 0) goto fail;
    ao.average = 1;
    ao.timeout_s = d->o->comm_timeout_s;
    /* a job of one rank opens no transport: nothing to reduce */
    if (d->t && d->size > 1 && (rc = hs_allreduce_create(&a->ar, d->t, d->n, &ao)) < 0) goto fail;
    if (d->k->device != HS_DEV_CPU && !(a->host = hs_malloc(d->n * sizeof(float), "gradient"))) {
        rc = -ENOMEM;
        goto fail;
    }
    *out = a;
    return 0;
fail:
    ar_finalize(&a);
    return rc;
}

const hs_algo_ops_t hs_algo_allreduce_ops = {
    .size = sizeof(hs_algo_ops_t),
    .name = "allreduce",
    .help = "synchronous SGD: gradients averaged by a ring or direct all-reduce",
    .flags = HS_ALGO_COMM,
    .init = ar_init,
    .step = ar_step,
    .drain = ar_drain,
    .finalize = ar_finalize,
};
