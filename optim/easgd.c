/*
 * optim/easgd.c — asynchronous EASGD and EAMSGD (Zhang, Choromanska, LeCun, NIPS 2015).
 *
 * Every worker i runs local steps on its own x_i (EAMSGD: Nesterov momentum, local, never
 * exchanged). Every tau steps (--tau, default 1) it meets the center x~ alone (in the paper's
 * order: easgd_step):
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
#include "hearsay/compress.h"
#include "optim/center.h"
#include "optim/elastic_wire.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct hs_algo {
    hs_dist_t *d;
    int tau;
    int eamsgd; /* Algorithm 2's order (the exchange before the gradient), else Algorithm 1's */
    double alpha;
    hs_center_t *c;
    float *x;      /* (n) host copy of x_i */
    float *ct;     /* (n) host: the center read, then the elastic difference */
    int *reported; /* (shards) lost shards already reported */
};

static float *params(hs_algo_t *a)
{
    return a->d->params;
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
    double comm = hs_exec_now(a->d->x) - t0 - cs->wait_s;
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
    double t0 = hs_exec_now(d->x);
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

/* The paper's order. EASGD (Algorithm 1): when tau divides t, the elastic exchange at x, the
 * point where this iteration's gradient was taken, then the gradient step from the moved x_i:
 * x_i <- x - alpha (x - x~) - lr g(x). EAMSGD (Algorithm 2): the exchange opens iteration t
 * (tau divides t), before its gradient, which is then taken at the moved x_i: here it closes
 * iteration t - 1 (at t = 0 the paper's exchange is a no-op: x_i = x~). */
static int easgd_step(hs_algo_t *a, long t)
{
    if (!a->eamsgd && t % a->tau == 0) HS_TRY(exchange(a, t));
    HS_TRY(hs_dist_apply(a->d, 1.0));
    if (a->eamsgd && (t + 1) % a->tau == 0) return exchange(a, t);
    return 0;
}

static int easgd_drain(hs_algo_t *a, int final)
{
    if (!final) return 0; /* the loop evaluates this worker's x_i */
    hs_dist_t *d = a->d;
    hs_kernels_t *k = d->k;
    double t0 = hs_exec_now(d->x);
    double wl = NAN, wa = NAN;
    HS_TRY(hs_dist_evaluate(d, NULL, &wl, &wa));
    HS_TRY(k->ops->to_host(k, a->x, params(a), d->n * sizeof(float)));
    int lost = hs_center_finish(a->c, a->x, d->o->drain_timeout_s);
    if (lost < 0) {
        hs_error_prefix("EASGD end of run, fetching the final center");
        return lost;
    }
    report_lost(a, d->total_iters);
    if (hs_center_refused(a->c))
        HS_WARN("rank %d: EASGD center refused %ld message(s) of fenced ranks (never applied)",
                d->rank, hs_center_refused(a->c));
    for (int r = 0; r < d->size; r++)
        if (r != d->rank && hs_center_rank_dead(a->c, r) && !hs_dist_peer_dead(d, r))
            hs_dist_peer_failed(d, r, 0, "exited before finishing with the center");
    HS_TRY(k->ops->to_device(k, params(a), a->x, d->n * sizeof(float)));
    account(a, t0);
    /* what the run's files show: a console line and DIR/rank-R-easgd.txt */
    char line[512];
    snprintf(line, sizeof line,
             "EASGD worker x_%d test loss %.4f acc %.2f%%; reporting the center (%d of %d "
             "shards lost)",
             d->rank, wl, 100 * wa, lost, hs_center_num_shards(a->c));
    HS_TRY(hs_dist_record(d, NULL, NULL, line));
    snprintf(line, sizeof line,
             "worker_test_loss %.9g\nworker_test_acc %.9g\nalpha %.9g\ntau %d\n"
             "shards %d\nshards_lost %d\nown_shard %d\nadds_applied %ld\ncenter_path %s",
             wl, wa, a->alpha, a->tau, hs_center_num_shards(a->c), lost, hs_center_own_shard(a->c),
             hs_center_adds_applied(a->c), hs_center_path(a->c));
    return hs_dist_record(d, "easgd.txt", NULL, line);
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

static int easgd_open(hs_algo_t **out, hs_dist_t *d, int momentum)
{
    *out = NULL;
    const hs_algo_opts_t *o = d->o;
    if (momentum && !(o->nesterov && o->momentum > 0))
        return HS_ERR(-EINVAL, "--algo eamsgd needs Nesterov momentum on the local steps "
                               "(--momentum > 0 and --nesterov)");
    const int tau = (int)hs_dist_opt_int(d, "tau");
    if (tau < 1) return HS_ERR(-EINVAL, "--tau must be at least 1 (got %d)", tau);
    double alpha =
        hs_dist_opt_double(d, "alpha") > 0 ? hs_dist_opt_double(d, "alpha") : 0.9 / d->size;
    if (!(alpha > 0 && alpha < 1))
        return HS_ERR(-EINVAL, "--alpha %g: the moving rate must be in (0, 1)", alpha);
    hs_algo_t *a = hs_calloc(1, sizeof *a, "EASGD state");
    if (!a) return -ENOMEM;
    a->d = d;
    a->tau = tau;
    a->eamsgd = momentum;
    a->alpha = alpha;
    int *owners = NULL, nown = 0,
        rc = hs_center_parse_owners(hs_dist_opt_str(d, "centers"), d->size, &owners, &nown);
    if (rc < 0) goto fail;
    rc = -ENOMEM;
    a->x = hs_malloc(d->n * sizeof(float), "EASGD x");
    a->ct = hs_malloc(d->n * sizeof(float), "EASGD center copy");
    a->reported = hs_calloc((size_t)nown, sizeof *a->reported, "lost shards");
    if (!a->x || !a->ct || !a->reported) goto fail;
    if ((rc = d->k->ops->to_host(d->k, a->x, params(a), d->n * sizeof(float))) < 0) goto fail;
    /* --compress fp16|bf16: center reads and elastic adds travel in half precision, on the
     * service path (the one-sided path adds float32 atomically) */
    /* the flag wins; left at its default, $HS_CENTER_PATH (or auto) decides */
    const char *path =
        hs_dist_opt_given(d, "center-path") ? hs_dist_opt_str(d, "center-path") : NULL;
    /* --compress, else the products' precision (bf16 / fp16 messages) unless the one-sided path
     * (float32 atomics) was asked for, else none */
    const char *given = hs_dist_opt_given(d, "compress") ? hs_dist_opt_str(d, "compress") : NULL;
    if (!given && path && !strcmp(path, "rma")) given = "none";
    hs_compress_spec_t cs;
    if ((rc = hs_compress_parse(hs_compress_or_precision(given, d->k), &cs)) < 0) goto fail;
    const int half = cs.kind == HS_COMPRESS_FP16 || cs.kind == HS_COMPRESS_BF16;
    if (half) hs_dist_set_messages(d, cs.text);
    if (half && d->rank == 0) {
        char line[160];
        snprintf(line, sizeof line, "%s: center reads and elastic adds in %s%s",
                 a->eamsgd ? "eamsgd" : "easgd", cs.text,
                 given ? "" : " (the products' precision; --compress none: float32)");
        if ((rc = hs_dist_record(d, NULL, NULL, line)) < 0) goto fail;
    }
    if (half && path && !strcmp(path, "rma")) {
        rc = HS_ERR(-EINVAL,
                    "--compress %s with --center-path rma: the one-sided path adds "
                    "float32 atomically; use --center-path service (or auto)",
                    cs.text);
        goto fail;
    }
    if (half) path = "service";
    if ((rc = hs_center_open(&a->c, d->x, d->n, a->x, owners, nown, o->comm_timeout_s, path,
                             hs_dist_tag(d, 0))) < 0)
        goto fail;
    if (half && (rc = hs_center_set_half(a->c, cs.kind == HS_COMPRESS_BF16)) < 0) goto fail;
    if (hs_dist_heartbeats(d)) hs_center_heartbeats(a->c, d);
    free(owners);
    *out = a;
    return 0;
fail:
    free(owners);
    easgd_finalize(&a);
    return rc;
}

/* The options checked before the job starts: the center owners (against the job size when
 * known), the moving rate, EAMSGD's momentum. */
static int easgd_check_opts(const hs_algo_opts_t *o, const hs_cfg_t *cfg, int ranks, int momentum)
{
    const double alpha = hs_cfg_double(cfg, "alpha");
    const char *center_path =
        hs_cfg_source(cfg, "center-path") != HS_CFG_DEFAULT ? hs_cfg_str(cfg, "center-path") : NULL;
    if (momentum && !(o->nesterov && o->momentum > 0))
        return HS_ERR(-EINVAL, "--algo eamsgd needs Nesterov momentum on the local steps "
                               "(--momentum > 0 and --nesterov)");
    if (alpha > 0 && !(alpha < 1))
        return HS_ERR(-EINVAL, "--alpha %g: the moving rate must be in (0, 1)", alpha);
    hs_compress_spec_t cs;
    HS_TRY(hs_compress_parse(hs_cfg_str(cfg, "compress"), &cs));
    if (cs.kind != HS_COMPRESS_NONE && cs.kind != HS_COMPRESS_FP16 && cs.kind != HS_COMPRESS_BF16)
        return HS_ERR(-EINVAL,
                      "--compress %s: --algo %s takes fp16 or bf16 only (its center reads and "
                      "elastic adds have no error feedback, so only a rounding this small is safe)",
                      cs.text, momentum ? "eamsgd" : "easgd");
    if ((cs.kind == HS_COMPRESS_FP16 || cs.kind == HS_COMPRESS_BF16) && center_path &&
        !strcmp(center_path, "rma"))
        return HS_ERR(-EINVAL,
                      "--compress %s with --center-path rma: the one-sided path adds "
                      "float32 atomically; use --center-path service (or auto)",
                      cs.text);
    int *owners = NULL, n = 0;
    int rc = hs_center_parse_owners(hs_cfg_str(cfg, "centers"), ranks, &owners, &n);
    free(owners);
    return rc;
}

static int easgd_check(const hs_algo_opts_t *o, const hs_cfg_t *cfg, int ranks)
{
    return easgd_check_opts(o, cfg, ranks, 0);
}

static int eamsgd_check(const hs_algo_opts_t *o, const hs_cfg_t *cfg, int ranks)
{
    return easgd_check_opts(o, cfg, ranks, 1);
}

static int easgd_init(hs_algo_t **out, hs_dist_t *d)
{
    return easgd_open(out, d, 0);
}

static int eamsgd_init(hs_algo_t **out, hs_dist_t *d)
{
    return easgd_open(out, d, 1);
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

/* A replacement joins (hs_algo_ops_t.rejoin): it takes the donor's model as its x_i and as its
 * own center shard (the crashed owner's shard is gone; the center is near the workers'
 * models, and the elastic force pulls it back); the others take its shard back and count
 * their adds to it from 0. */
static int easgd_rejoin(hs_algo_t *a, int peer, long iter, int role)
{
    hs_dist_t *d = a->d;
    (void)iter;
    if (role == HS_REJOIN_ADOPT) {
        HS_TRY(d->k->ops->to_host(d->k, a->x, params(a), d->n * sizeof(float)));
        return hs_center_adopt(a->c, a->x);
    }
    if (role != HS_REJOIN_PEER) return 0;
    HS_TRY(hs_center_rejoined(a->c, peer));
    for (int s = 0; s < hs_center_num_shards(a->c); s++) {
        int owner = -1;
        hs_center_shard(a->c, s, &owner, NULL, NULL);
        if (owner == peer) a->reported[s] = 0;
    }
    return 0;
}

/* The options of easgd and eamsgd. */
static const hs_option_t easgd_options[] = {
    {.name = "tau",
     .type = HS_OPT_INT,
     .def = "1",
     .range = "[1, 64]",
     .metavar = "K",
     .help = "communication period in local steps (default 1)"},
    {.name = "alpha",
     .type = HS_OPT_DOUBLE,
     .def = "0",
     .range = "[0, 1)",
     .help = "elastic moving rate (0: 0.9 / ranks)"},
    {.name = "centers",
     .type = HS_OPT_STRING,
     .def = "all",
     .metavar = "RANKS",
     .help = "ranks holding the center shards (all, R, R1,R2, A-B)"},
    {.name = "center-path",
     .type = HS_OPT_ENUM,
     .def = "auto",
     .choices = "auto|rma|service",
     .help = "reach the center by one-sided atomics (rma), by the owners' service threads "
             "(service), or rma where the provider has float atomics (auto)"},
    {.name = "compress",
     .type = HS_OPT_STRING,
     .def = "none",
     .metavar = "SPEC",
     .help = "compress what is sent: none, fp16, bf16"},
};

/* Their services answer while the main thread waits: without the transport's progress thread
 * a completion reaped by one thread does not wake the other (20x slower, measured). */
const hs_algo_ops_t hs_algo_easgd_ops = {
    .size = sizeof(hs_algo_ops_t),
    .name = "easgd",
    .help = "elastic averaging SGD: every --tau steps, an elastic pull toward a sharded center",
    .flags = HS_ALGO_COMM | HS_ALGO_PROGRESS | HS_ALGO_TOLERANT | HS_ALGO_OWN_STATE,
    .options = easgd_options,
    .n_options = HS_ARRAY_LEN(easgd_options),
    .init = easgd_init,
    .step = easgd_step,
    .drain = easgd_drain,
    .finalize = easgd_finalize,
    .state_bytes = easgd_state_bytes,
    .state_save = easgd_state_save,
    .state_load = easgd_state_load,
    .check = easgd_check,
    .rejoin = easgd_rejoin,
    .msg_header = sizeof(hs_el_hdr_v1_t), /* its wire header (--sim-payload) */
};

const hs_algo_ops_t hs_algo_eamsgd_ops = {
    .size = sizeof(hs_algo_ops_t),
    .name = "eamsgd",
    .help = "EASGD with Nesterov momentum on the local steps",
    .flags =
        HS_ALGO_COMM | HS_ALGO_PROGRESS | HS_ALGO_TOLERANT | HS_ALGO_NESTEROV | HS_ALGO_OWN_STATE,
    .options = easgd_options,
    .n_options = HS_ARRAY_LEN(easgd_options),
    .init = eamsgd_init,
    .step = easgd_step,
    .drain = easgd_drain,
    .finalize = easgd_finalize,
    .state_bytes = easgd_state_bytes,
    .state_save = easgd_state_save,
    .state_load = easgd_state_load,
    .check = eamsgd_check,
    .rejoin = easgd_rejoin,
    .msg_header = sizeof(hs_el_hdr_v1_t), /* its wire header (--sim-payload) */
};
