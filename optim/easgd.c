/*
 * optim/easgd.c — asynchronous EASGD and EAMSGD (Zhang, Choromanska, LeCun, NIPS 2015).
 *
 * Every worker i runs local steps on its own x_i (EAMSGD: Nesterov momentum, local, never
 * exchanged). Every tau steps (--tau, default 1) it meets the center x~ alone:
 *     x~ <- read from the center owners (optim/center.c)
 *     diff = alpha (x_i - x~);   x_i <- x_i - diff;   x~ <- x~ + diff (float atomic adds into the
 *     owners' windows where the provider has them, else sent to the owners' service threads,
 *     which apply it under their shard lock; HS_CENTER_PATH forces either)
 * with alpha = --alpha, default 0.9 / p (beta = 0.9 in the paper). No barrier: a worker waits
 * only for its gets and atomics or for the owners' service threads, which answer while their
 * own worker computes or sleeps. The center starts at every owner's initial parameters (all ranks
 * initialise from the same seed).
 *
 * Evaluation points evaluate each worker's x_i. The end of the run: each worker evaluates its
 * own x_i (logged), tells every owner it is done, receives the final center (once every live
 * worker's adds are in) and puts it in the model's parameters: the center is the model EASGD
 * reports (summary.json final_test_loss; every rank then holds the same center).
 * A dead owner (crash) makes its shard unavailable: the survivors skip it (no elastic force on
 * that slice) and, at the end, keep their own x_i on it; the owner is reported failed.
 */
#include "hearsay/algo.h"
#include "hearsay/common.h"
#include "optim/center.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct hs_algo {
    hs_dist_t *d;
    int tau;
    double alpha;
    hs_center_t *c;
    float *x;      /* (n) host copy of x_i */
    float *ct;     /* (n) host: the center read, then the elastic difference */
    int *reported; /* (shards) lost shards already reported */
};

static float *params(hs_algo_t *a)
{
    return hs_model_params(hs_worker_model(a->d->worker));
}

/* Move the center's counters into the iteration's stats; wall time outside waits is comm. */
static void account(hs_algo_t *a, double t0)
{
    hs_center_stats_t *cs = hs_center_stats(a->c);
    hs_dist_stats_t *st = &a->d->st;
    st->bytes_sent += cs->bytes_sent;
    st->bytes_recv += cs->bytes_recv;
    st->wait_s += cs->wait_s;
    st->msgs_applied += cs->msgs;
    double comm = hs_now() - t0 - cs->wait_s;
    st->comm_s += comm > 0 ? comm : 0;
    memset(cs, 0, sizeof *cs);
}

static void report_lost(hs_algo_t *a, long t)
{
    for (int s = 0; s < hs_center_num_shards(a->c); s++) {
        if (!hs_center_shard_lost(a->c, s) || a->reported[s]) continue;
        int o;
        hs_center_shard(a->c, s, &o, NULL, NULL);
        char why[96];
        snprintf(why, sizeof why, "owner of center shard %d unreachable", s);
        hs_dist_peer_failed(a->d, o, t, why);
        a->reported[s] = 1;
    }
}

/* The elastic exchange with the center (round t). */
static int exchange(hs_algo_t *a, long t)
{
    hs_dist_t *d = a->d;
    hs_kernels_t *k = d->k;
    size_t n = d->n;
    double t0 = hs_now();
    HS_TRY(k->ops->to_host(k, a->x, params(a), n * sizeof(float)));
    memcpy(a->ct, a->x, n * sizeof(float)); /* lost shards read as x_i: no force there */
    int rc = hs_center_read(a->c, a->ct);
    if (rc < 0) {
        hs_error_prefix("EASGD round %ld, reading the center", t);
        return rc;
    }
    float al = (float)a->alpha;
    for (size_t i = 0; i < n; i++) {
        float diff = al * (a->x[i] - a->ct[i]);
        a->x[i] -= diff;
        a->ct[i] = diff;
    }
    HS_TRY(k->ops->to_device(k, params(a), a->x, n * sizeof(float)));
    if ((rc = hs_center_add(a->c, a->ct)) < 0) {
        hs_error_prefix("EASGD round %ld, adding to the center", t);
        return rc;
    }
    report_lost(a, t);
    account(a, t0);
    return 0;
}

static int easgd_step(hs_algo_t *a, long t)
{
    HS_TRY(hs_worker_apply(a->d->worker));
    if ((t + 1) % a->tau == 0) return exchange(a, t);
    return 0;
}

static int easgd_drain(hs_algo_t *a, int final)
{
    if (!final) return 0; /* the loop evaluates this worker's x_i */
    hs_dist_t *d = a->d;
    hs_kernels_t *k = d->k;
    double t0 = hs_now();
    double wl = NAN, wa = NAN;
    HS_TRY(hs_worker_evaluate(d->worker, NULL, &wl, &wa));
    HS_TRY(k->ops->to_host(k, a->x, params(a), d->n * sizeof(float)));
    int lost = hs_center_finish(a->c, a->x, d->o->drain_timeout_s);
    if (lost < 0) {
        hs_error_prefix("EASGD end of run, fetching the final center");
        return lost;
    }
    report_lost(a, d->total_iters);
    for (int r = 0; r < d->size; r++)
        if (r != d->rank && hs_center_rank_dead(a->c, r) && !hs_dist_peer_dead(d, r))
            hs_dist_peer_failed(d, r, 0, "exited before finishing with the center");
    HS_TRY(k->ops->to_device(k, params(a), a->x, d->n * sizeof(float)));
    account(a, t0);
    if (!d->o->quiet)
        printf("rank %d: EASGD worker x_%d test loss %.4f acc %.2f%%; reporting the center "
               "(%d of %d shards lost)\n",
               d->rank, d->rank, wl, 100 * wa, lost, hs_center_num_shards(a->c));
    if (d->o->out_dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/rank-%d-easgd.txt", d->o->out_dir, d->rank);
        FILE *f = fopen(path, "w");
        if (!f) return HS_ERR(-errno, "cannot write %s: %s", path, strerror(errno));
        fprintf(f,
                "worker_test_loss %.9g\nworker_test_acc %.9g\nalpha %.9g\ntau %d\n"
                "shards %d\nshards_lost %d\nown_shard %d\nadds_applied %ld\ncenter_path %s\n",
                wl, wa, a->alpha, a->tau, hs_center_num_shards(a->c), lost,
                hs_center_own_shard(a->c), hs_center_adds_applied(a->c), hs_center_path(a->c));
        if (fclose(f) != 0) return HS_ERR(-EIO, "writing %s failed", path);
    }
    return 0;
}

static void easgd_finalize(hs_algo_t **ap)
{
    hs_algo_t *a = ap ? *ap : NULL;
    if (!a) return;
    hs_center_close(&a->c);
    free(a->x);
    free(a->ct);
    free(a->reported);
    free(a);
    *ap = NULL;
}

/* hs_center_finish's idle hook: the training loop's hs_dist_idle. */
static int easgd_idle(void *dist)
{
    return hs_dist_idle(dist);
}

static int easgd_open(hs_algo_t **out, hs_dist_t *d, int momentum)
{
    *out = NULL;
    const hs_train_opts_t *o = d->o;
    if (momentum && !(o->nesterov && o->momentum > 0))
        return HS_ERR(-EINVAL, "--algo eamsgd needs Nesterov momentum on the local steps "
                               "(--momentum > 0 and --nesterov)");
    if (o->tau < 1) return HS_ERR(-EINVAL, "--tau must be at least 1 (got %d)", o->tau);
    double alpha = o->alpha > 0 ? o->alpha : 0.9 / d->size;
    if (!(alpha > 0 && alpha < 1))
        return HS_ERR(-EINVAL, "--alpha %g: the moving rate must be in (0, 1)", alpha);
    hs_algo_t *a = hs_calloc(1, sizeof *a, "EASGD state");
    if (!a) return -ENOMEM;
    a->d = d;
    a->tau = o->tau;
    a->alpha = alpha;
    int *owners = NULL, nown = 0, rc = hs_center_parse_owners(o->centers, d->size, &owners, &nown);
    if (rc < 0) goto fail;
    rc = -ENOMEM;
    a->x = hs_malloc(d->n * sizeof(float), "EASGD x");
    a->ct = hs_malloc(d->n * sizeof(float), "EASGD center copy");
    a->reported = hs_calloc((size_t)nown, sizeof *a->reported, "lost shards");
    if (!a->x || !a->ct || !a->reported) goto fail;
    if ((rc = d->k->ops->to_host(d->k, a->x, params(a), d->n * sizeof(float))) < 0) goto fail;
    if ((rc = hs_center_open(&a->c, d->t, d->n, a->x, owners, nown, o->comm_timeout_s,
                             o->center_path)) < 0)
        goto fail;
    free(owners);
    hs_center_set_idle(a->c, easgd_idle, d);
    *out = a;
    return 0;
fail:
    free(owners);
    easgd_finalize(&a);
    return rc;
}

static int easgd_init(hs_algo_t **out, hs_dist_t *d)
{
    return easgd_open(out, d, 0);
}

static int eamsgd_init(hs_algo_t **out, hs_dist_t *d)
{
    return easgd_open(out, d, 1);
}

static double easgd_weight(const hs_algo_t *a)
{
    (void)a;
    return 1.0;
}

/* Checkpoint state beyond the worker's: this rank's center shard. */
static size_t easgd_state_bytes(const hs_algo_t *a)
{
    return hs_center_state_bytes(a->c);
}

static int easgd_state_save(hs_algo_t *a, void *buf)
{
    return hs_center_state_save(a->c, buf);
}

static int easgd_state_load(hs_algo_t *a, const void *buf)
{
    return hs_center_state_load(a->c, buf);
}

#define EASGD_OPS(NAME, INIT)                                                                      \
    {                                                                                              \
        .size = sizeof(hs_algo_ops_t), .name = NAME, .flags = HS_ALGO_COMM, .init = INIT,          \
        .step = easgd_step, .drain = easgd_drain, .finalize = easgd_finalize,                      \
        .weight = easgd_weight, .state_bytes = easgd_state_bytes, .state_save = easgd_state_save,  \
        .state_load = easgd_state_load,                                                            \
    }

const hs_algo_ops_t hs_algo_easgd_ops = EASGD_OPS("easgd", easgd_init);
const hs_algo_ops_t hs_algo_eamsgd_ops = EASGD_OPS("eamsgd", eamsgd_init);
