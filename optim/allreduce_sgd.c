/*
 * optim/allreduce_sgd.c — synchronous data-parallel SGD: the flat gradient is averaged over
 * every rank by a ring all-reduce (hearsay/allreduce.h) each step, then every rank takes the
 * same local step, so all replicas stay identical (same initialisation, same averaged
 * gradient, same deterministic schedule). The all-reduce is a collective: a straggler or a
 * paused rank stalls everyone, and a dead rank stops the run with an error naming it within
 * the all-reduce's bounded waits. With --compress the gradients are exchanged compressed with
 * error feedback instead (EF-SGD, optim/efsgd.c).
 *
 * Where the transport shares buffers between same-host ranks (hsshm), the gradient lives in
 * memory of hs_transport_buf_alloc (hs_dist_use_grads; with non-CPU kernels the host staging
 * buffer does), like NCCL's registered buffers or MPI_Alloc_mem: the peers map it, and the
 * all-reduce reads and writes it in place (its mapped path, gossip/allreduce.c).
 */
#include "hearsay/algo.h"
#include "hearsay/allreduce.h"
#include "hearsay/common.h"
#include "hearsay/compress.h"
#include "optim/efsgd.h"

#include <stdlib.h>

struct hs_algo {
    hs_dist_t *d;
    hs_allreduce_t *ar;
    float *host;     /* (n) host staging for non-CPU backends */
    int host_shared; /* host is memory of hs_transport_buf_alloc */
    float *shared;   /* (n) the gradient moved into hs_transport_buf_alloc memory, or NULL */
    efsgd_t *ef;     /* --compress: EF-SGD instead of the all-reduce */
};

static int ar_step(hs_algo_t *a, long t)
{
    hs_dist_t *d = a->d;
    hs_kernels_t *k = d->k;
    float *g = d->grads;
    if (a->ef) {
        HS_TRY(efsgd_exchange(a->ef, t));
        return hs_dist_apply(d, 1.0);
    }
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
    (void) final;
    return a->ef ? efsgd_drain(a->ef) : 0;
}

static void ar_finalize(hs_algo_t **ap)
{
    hs_algo_t *a = ap ? *ap : NULL;
    if (!a) return;
    hs_allreduce_destroy(&a->ar);
    efsgd_destroy(&a->ef);
    if (a->shared) {
        (void)hs_dist_use_grads(a->d, NULL); /* the model's own buffer again */
        hs_transport_buf_free(a->d->t, (void **)&a->shared);
    }
    if (a->host_shared)
        hs_transport_buf_free(a->d->t, (void **)&a->host);
    else
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
    int rc;
    hs_compress_spec_t cs;
    if ((rc = hs_compress_parse(d->o->compress, &cs)) < 0) goto fail;
    if (cs.kind != HS_COMPRESS_NONE && d->t && d->size > 1) { /* one worker: nothing to send */
        if ((rc = efsgd_create(&a->ef, d)) < 0) goto fail;
        *out = a;
        return 0;
    }
    hs_allreduce_opts_t ao;
    rc = hs_allreduce_opts_default(&ao);
    if (rc < 0) goto fail;
    ao.average = 1;
    ao.timeout_s = d->o->comm_timeout_s;
    /* a job of one rank opens no transport: nothing to reduce */
    if (d->t && d->size > 1 && (rc = hs_allreduce_create(&a->ar, d->t, d->n, &ao)) < 0) goto fail;
    /* The buffer the all-reduce runs on in shared memory where the transport has it. */
    int share = a->ar && hs_transport_has_peer_map(d->t);
    void *g = NULL;
    if (share && hs_transport_buf_alloc(d->t, d->n * sizeof(float), &g) < 0) {
        HS_DEBUG("all-reduce SGD: no shared gradient buffer (%s): the all-reduce copies",
                 hs_last_error());
        g = NULL;
    }
    if (g && d->k->device == HS_DEV_CPU) {
        if (hs_dist_use_grads(d, g) == 0) {
            a->shared = g;
        } else {
            HS_DEBUG("all-reduce SGD: the gradient stays where it is (%s)", hs_last_error());
            hs_transport_buf_free(d->t, &g);
        }
    } else if (g) {
        a->host = g;
        a->host_shared = 1;
    }
    if (d->k->device != HS_DEV_CPU && !a->host &&
        !(a->host = hs_malloc(d->n * sizeof(float), "gradient"))) {
        rc = -ENOMEM;
        goto fail;
    }
    *out = a;
    return 0;
fail:
    ar_finalize(&a);
    return rc;
}

/* Checkpoint state: EF-SGD's error memory (none without --compress). */
static size_t ar_state_bytes(const hs_algo_t *a)
{
    return a->ef ? efsgd_state_bytes(a->ef) : 0;
}

static int ar_state_save(hs_algo_t *a, void *buf)
{
    return a->ef ? efsgd_state_save(a->ef, buf) : 0;
}

static int ar_state_load(hs_algo_t *a, const void *buf)
{
    return a->ef ? efsgd_state_load(a->ef, buf) : 0;
}

const hs_algo_ops_t hs_algo_allreduce_ops = {
    .size = sizeof(hs_algo_ops_t),
    .name = "allreduce",
    .help = "synchronous SGD: gradients averaged by a ring or direct all-reduce",
    .flags = HS_ALGO_COMM | HS_ALGO_COMPRESS,
    .init = ar_init,
    .step = ar_step,
    .drain = ar_drain,
    .finalize = ar_finalize,
    .state_bytes = ar_state_bytes,
    .state_save = ar_state_save,
    .state_load = ar_state_load,
};
