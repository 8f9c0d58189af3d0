/*
 * optim/localsgd.c — local SGD / periodic averaging (Stich 2019; Lin et al. 2020, "Don't use
 * large mini-batches, use local SGD"): every rank takes H = --period local steps on its own
 * model, then the models are replaced by their exact average, an all-reduce of the flat
 * parameter buffer (hearsay/allreduce.h, the same collective all-reduce SGD uses on the
 * gradient):
 *     x_i <- x_i - lr g_i(x_i)                       every iteration t
 *     x_i <- (1/n) sum_j x_j     after iteration t when (t + 1) mod H == 0
 * The momentum buffers stay local (never averaged), as in the papers' experiments. With the
 * same initialisation on every rank and H = 1 without momentum this is all-reduce SGD on the
 * parameters. If the run's last iteration is not a multiple of H, the end of the run averages
 * once more, so every rank ends with the same model. The average is a collective: a straggler
 * stalls everyone once every H steps, and a dead rank stops the run with an error naming it
 * (as all-reduce SGD).
 */
#include "hearsay/algo.h"
#include "hearsay/allreduce.h"
#include "hearsay/common.h"

#include <stdlib.h>

struct hs_algo {
    hs_dist_t *d;
    hs_allreduce_t *ar;
    hs_stage_t xs;   /* the host image of the parameters */
    long last_avg;   /* iterations done when the models were last averaged (-1: never) */
    long iters_done; /* iterations done (the last step's t + 1) */
    long period;     /* --period H */
};

/* x_i <- the average of every rank's x (a collective). */
static int average(hs_algo_t *a, long t)
{
    hs_dist_t *d = a->d;
    double t0 = hs_exec_now(d->x);
    HS_TRY(hs_stage_pull(&a->xs));
    int rc = hs_allreduce_run(a->ar, hs_stage_host(&a->xs));
    if (rc < 0) {
        hs_error_prefix("local SGD, iteration %ld", t);
        return hs_dist_name_fenced(d, rc);
    }
    HS_TRY(hs_stage_push(&a->xs));
    uint64_t bytes = (uint64_t)(2.0 * (d->size - 1) / d->size * (double)(d->n * sizeof(float)));
    d->st.bytes_sent += bytes;
    d->st.bytes_recv += bytes;
    for (int r = 1; r < d->size; r++) hs_dist_staleness(d, 0); /* every rank's x, in step */
    d->st.comm_s += hs_exec_now(d->x) - t0;
    a->last_avg = t + 1;
    return 0;
}

static int loc_step(hs_algo_t *a, long t)
{
    hs_dist_t *d = a->d;
    HS_TRY(hs_dist_apply(d, 1.0));
    a->iters_done = t + 1;
    if (a->ar && (t + 1) % a->period == 0) return average(a, t);
    return 0;
}

/* Before an evaluation: nothing in flight. At the end: one more average if the last
 * iterations were local. */
static int loc_drain(hs_algo_t *a, int final)
{
    if (!final || !a->ar || a->iters_done == 0 || a->last_avg == a->iters_done) return 0;
    return average(a, a->iters_done - 1);
}

static void loc_finalize(hs_algo_t **ap)
{
    hs_algo_t *a = ap ? *ap : NULL;
    if (!a) return;
    hs_allreduce_destroy(&a->ar);
    hs_stage_close(&a->xs);
    free(a);
    *ap = NULL;
}

static int loc_init(hs_algo_t **out, hs_dist_t *d)
{
    *out = NULL;
    const long period = hs_dist_opt_int(d, "period");
    if (period < 1) return HS_ERR(-EINVAL, "--period must be at least 1 (got %ld)", period);
    hs_algo_t *a = hs_calloc(1, sizeof *a, "local SGD state");
    if (!a) return -ENOMEM;
    a->d = d;
    a->period = period;
    a->last_avg = -1;
    if (d->size == 1 || !d->t) { /* one worker: its own average */
        *out = a;
        return 0;
    }
    hs_allreduce_opts_t ao;
    int rc = hs_allreduce_opts_default(&ao);
    if (rc < 0) goto fail;
    ao.average = 1;
    ao.timeout_s = d->o->comm_timeout_s;
    ao.host_of = d->host_of;     /* ranks on several hosts: the hierarchical all-reduce */
    if (hs_dist_heartbeats(d)) { /* a frozen rank makes everyone wait until it is fenced */
        ao.patience = hs_dist_collective_patience;
        ao.patience_ctx = d;
    }
    if ((rc = hs_allreduce_create(&a->ar, d->t, d->n, &ao)) < 0) goto fail;
    if ((rc = hs_stage_image(&a->xs, d->k, d->params, d->n, "parameters")) < 0) goto fail;
    *out = a;
    return 0;
fail:
    loc_finalize(&a);
    return rc;
}

static int loc_check(const hs_algo_opts_t *o, const hs_cfg_t *cfg, int ranks)
{
    (void)o;
    (void)ranks;
    if (hs_cfg_int(cfg, "period") < 1)
        return HS_ERR(-EINVAL, "--period %ld: local SGD averages every H >= 1 local steps",
                      hs_cfg_int(cfg, "period"));
    return 0;
}

static const hs_option_t loc_options[] = {
    {.name = "period",
     .type = HS_OPT_INT,
     .def = "4",
     .range = "[1, 1000000]",
     .metavar = "H",
     .help = "local steps between two exact averages of the models"},
};

const hs_algo_ops_t hs_algo_localsgd_ops = {
    .size = sizeof(hs_algo_ops_t),
    .name = "localsgd",
    .help = "local SGD: --period H local steps, then an exact average (all-reduce) of the models",
    .flags = HS_ALGO_COMM,
    .options = loc_options,
    .n_options = HS_ARRAY_LEN(loc_options),
    .init = loc_init,
    .step = loc_step,
    .drain = loc_drain,
    .finalize = loc_finalize,
    .check = loc_check,
};
