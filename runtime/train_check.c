/*
 * runtime/train_check.c — the flag checks of `hearsay train` that need no job: every option is
 * validated at start, whatever the rank count (a one-rank run of a gossip algorithm never builds
 * its graph, yet `--graph donut` is still an error). hearsay train calls hs_train_dist_check once
 * before joining the job (ranks 0: size unknown) and once after (the job size), and exits 2 on
 * an error; hs_train calls it again for callers of the library.
 *
 * Everything here is a parse or a stat: the data spec gives the sample shape without loading,
 * the model spec is planned against it, graph files are read and built on their own n, the
 * checkpoint files of --resume must exist, a libfabric provider must be on this machine.
 */
#include "runtime/dist.h"

#include "hearsay/checkpoint.h"
#include "hearsay/common.h"
#include "hearsay/compress.h"
#include "hearsay/data.h"
#include "hearsay/kernels.h"
#include "hearsay/nn.h"
#include "hearsay/optim.h"
#include "hearsay/shaping.h"
#include "hearsay/straggler.h"
#include "hearsay/topology.h"
#include "hearsay/train.h"
#include "hearsay/transport.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void hs_train_algo_opts(const hs_train_opts_t *o, hs_algo_opts_t *ao)
{
    *ao = (hs_algo_opts_t){.seed = o->seed,
                           .nesterov = o->nesterov,
                           .momentum = o->momentum,
                           .comm_timeout_s = o->comm_timeout_s,
                           .drain_timeout_s = o->drain_timeout_s,
                           .fail_timeout_s = o->fail_timeout_s};
    /* (the ranks named are checked by hs_train_dist_check) */
    ao->rejoin = hs_straggler_any_rejoin(o->stragglers, o->n_stragglers, 0, NULL) > 0;
}

/* rc < 0: prefix the message with the flag and its value. */
static int flag_err(int rc, const char *flag, const char *value)
{
    if (rc < 0) hs_error_prefix("%s %s", flag, value ? value : "");
    return rc;
}

/* --data, --model (against the data's shape), --shard. */
static int check_model_data(const hs_train_opts_t *o)
{
    hs_data_spec_t ds;
    HS_TRY(flag_err(hs_data_spec_parse(o->data, &ds), "--data", o->data));
    int c, h, w, classes;
    HS_TRY(flag_err(hs_data_spec_probe(&ds, &c, &h, &w, &classes), "--data", o->data));
    HS_TRY(flag_err(hs_model_parse_spec(o->model, c, h, w, classes, NULL), "--model", o->model));
    hs_init_scheme_t scheme;
    if (o->init) HS_TRY(flag_err(hs_init_parse(o->init, &scheme), "--init", o->init));
    HS_TRY(flag_err(hs_shard_spec_check(o->shard), "--shard", o->shard));
    return 0;
}

/* --lr-schedule, --warmup, --device, --precision, --tf32, --loss-scale. */
static int check_optimizer(const hs_train_opts_t *o)
{
    hs_lr_schedule_t s;
    HS_TRY(flag_err(hs_lr_parse(o->lr_schedule, o->epochs, &s), "--lr-schedule", o->lr_schedule));
    const char *warmup = o->warmup ? o->warmup : "0";
    HS_TRY(flag_err(hs_lr_set_warmup(&s, warmup), "--warmup", warmup));
    /* a CUDA device is looked for now: no usable one fails at once, with the driver's reason */
    HS_TRY(flag_err(hs_device_select(o->device, 0, NULL, NULL), "--device", o->device));
    /* --precision, --tf32, --loss-scale */
    hs_precision_t prec = HS_PREC_FP32;
    if (o->precision)
        HS_TRY(flag_err(hs_precision_parse(o->precision, &prec), "--precision", o->precision));
    if (o->tf32 && prec != HS_PREC_FP32)
        return HS_ERR(-EINVAL,
                      "--tf32 applies to --precision fp32 only (%s products already round "
                      "their operands past TF32's)",
                      hs_precision_name(prec));
    int dyn;
    float fixed;
    HS_TRY(hs_loss_scale_parse(o->loss_scale, prec, &dyn, &fixed));
    return 0;
}

/* --graph: built for the job when it has peers and the algorithm uses it (its direction
 * checked), else checked without a size. */
static int check_graph(const hs_train_opts_t *o, const hs_algo_ops_t *ops, int ranks)
{
    if (!o->graph) return 0;
    int rc;
    if ((ops->flags & HS_ALGO_GRAPH) && ranks > 1) {
        /* its direction first (Metropolis weights of a directed graph fail without naming
         * the algorithm that needs them) */
        hs_topo_opts_t to = {.mixing = HS_TOPO_MIX_AUTO};
        hs_topo_t *tp = NULL;
        rc = hs_topo_create(&tp, o->graph, ranks, o->seed, &to);
        if (rc == 0 && (ops->flags & HS_ALGO_UNDIRECTED) && !hs_topo_undirected(tp))
            rc = HS_ERR(-EINVAL,
                        "--algo %s needs an undirected graph, and --graph %s is directed (try "
                        "biring, torus, hypercube, complete)",
                        ops->name, o->graph);
        if (rc == 0 && (ops->flags & HS_ALGO_UNDIRECTED)) {
            hs_topo_destroy(&tp);
            to.mixing = HS_TOPO_MIX_METROPOLIS;
            rc = hs_topo_create(&tp, o->graph, ranks, o->seed, &to);
        }
        if (rc == 0 && (ops->flags & HS_ALGO_BIPARTITE)) {
            int *side = hs_malloc((size_t)ranks * sizeof *side, "sides");
            rc = side ? hs_topo_sides(tp, side) : -ENOMEM;
            if (rc == -EINVAL)
                hs_error_prefix("--algo %s pairs ranks of two sides and needs a bipartite graph",
                                ops->name);
            free(side);
        }
        hs_topo_destroy(&tp);
    } else {
        rc = hs_topo_check(o->graph);
    }
    return flag_err(rc, "--graph", o->graph);
}

/* --resume DIR: DIR/ckpt readable before the job is known; a complete checkpoint set for the
 * job's ranks once it is (hs_ckpt_set_find: refused with the ranks and iterations found). */
static int check_resume(const hs_train_opts_t *o, int ranks)
{
    if (!o->resume || !*o->resume) return 0;
    if (ranks > 0) {
        long it = 0;
        int rc = hs_ckpt_set_check(o->resume, ranks, &it);
        if (rc < 0) hs_error_prefix("--resume %s", o->resume);
        return rc;
    }
    char path[4096];
    int len = snprintf(path, sizeof path, "%s/ckpt", o->resume);
    if (len < 0 || (size_t)len >= sizeof path)
        return HS_ERR(-ENAMETOOLONG, "--resume %s: path too long", o->resume);
    if (access(path, R_OK | X_OK) != 0) {
        int e = errno;
        return HS_ERR(-e, "--resume %s: cannot read the checkpoint directory %s: %s", o->resume,
                      path, strerror(e));
    }
    return 0;
}

/* The algorithms whose flags include `flag`, "a b c". */
static const char *algos_with(unsigned flag, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; hs_algo_at(i) && len < n; i++)
        if (hs_algo_at(i)->flags & flag)
            len +=
                (size_t)snprintf(buf + len, n - len, "%s%s", len ? " " : "", hs_algo_at(i)->name);
    return buf;
}

/* --time-budget, for the algorithms that have one. */
static int check_bounds(const hs_train_opts_t *o, const hs_algo_ops_t *ops)
{
    char names[256];
    if (!(o->time_budget_s >= 0) || !isfinite(o->time_budget_s))
        return HS_ERR(-EINVAL, "--time-budget %g: give seconds >= 0", o->time_budget_s);
    if (o->time_budget_s > 0 && !(ops->flags & HS_ALGO_BUDGET))
        return HS_ERR(-EINVAL,
                      "--time-budget applies to --algo %s (--algo %s needs every rank to run the "
                      "same iterations)",
                      algos_with(HS_ALGO_BUDGET, names, sizeof names), ops->name);
    if (o->time_budget_s > 0 && o->checkpoint_every > 0)
        return HS_ERR(-EINVAL, "--time-budget and --checkpoint-every: every rank checkpoints at "
                               "the same iteration, which a time budget cannot promise; give one");
    return 0;
}

int hs_train_dist_check(const hs_train_opts_t *o, int ranks)
{
    const hs_algo_ops_t *ops = hs_algo_find(o->algo);
    if (!ops)
        return HS_ERR(-EINVAL, "--algo '%s': unknown algorithm (known: %s)", o->algo ? o->algo : "",
                      hs_algo_names());
    HS_TRY(check_bounds(o, ops));
    HS_TRY(hs_straggler_check_list(o->stragglers, o->n_stragglers, ranks));
    if (o->link && *o->link) {
        hs_shape_t *s = NULL;
        int rc = hs_shape_parse(o->link, &s);
        hs_shape_free(&s);
        if (rc < 0) {
            hs_error_prefix("--link");
            return rc;
        }
    }
    if (!(o->comm_timeout_s > 0) || !(o->drain_timeout_s > 0))
        return HS_ERR(-EINVAL, "--comm-timeout and --drain-timeout must be > 0");
    if (!(o->fail_timeout_s >= 0) || o->fail_timeout_s > 86400)
        return HS_ERR(-EINVAL, "--fail-timeout must be in [0, 86400] (0: no heartbeats)");
    int who = -1, rejoin = hs_straggler_any_rejoin(o->stragglers, o->n_stragglers, ranks, &who);
    if (rejoin < 0) return rejoin;
    if (rejoin && !ops->rejoin)
        return HS_ERR(-EINVAL,
                      "--straggler crash:%d:...:rejoin=D: --algo %s cannot take a replacement "
                      "(sgp, adpsgd, easgd, eamsgd and lsgd can)",
                      who, ops->name);
    if (rejoin && who == 0)
        return HS_ERR(-EINVAL,
                      "--straggler crash:0:...:rejoin=D: rank 0 cannot be replaced (it holds "
                      "the job's evaluations and summary); replace another rank");
    if (rejoin && o->checkpoint_every > 0)
        return HS_ERR(-EINVAL,
                      "--straggler crash:%d:...:rejoin=D and --checkpoint-every: a "
                      "checkpoint set needs every rank's part; not with a replacement",
                      who);
    if (!(o->checkpoint_every >= 0))
        return HS_ERR(-EINVAL, "--checkpoint-every must be >= 0 (got %g)", o->checkpoint_every);
    if (o->checkpoint_every > 0 && !o->out_dir)
        return HS_ERR(-EINVAL, "--checkpoint-every needs --out DIR (checkpoints go to DIR/ckpt)");
    HS_TRY(check_model_data(o));
    HS_TRY(check_optimizer(o));
    HS_TRY(check_graph(o, ops, ranks));
    /* the algorithm's own options: each known to it and of the right type and range, then
     * its own check */
    hs_cfg_spec_t spec;
    hs_cfg_t *acfg = NULL;
    HS_TRY(hs_algo_cfg_create(&acfg, &spec, ops, o->algo_opts, o->n_algo_opts));
    if (ops->check) {
        hs_algo_opts_t ao;
        hs_train_algo_opts(o, &ao);
        int rc = ops->check(&ao, acfg, ranks);
        if (rc < 0) {
            hs_cfg_free(&acfg);
            return rc;
        }
    }
    hs_cfg_free(&acfg);
    HS_TRY(flag_err(hs_transport_check_provider(o->provider), "--provider", o->provider));
    HS_TRY(check_resume(o, ranks));
    return 0;
}
