/*
 * hearsay/train.h — one worker's training state and the single-worker training run.
 *
 * An hs_worker_t holds everything one replica needs: the kernel backend, its shard of the
 * training set and a batch iterator, the model (ONE flat parameter and gradient buffer), the
 * local optimizer and the learning-rate schedule, and device buffers for one batch. The
 * distributed algorithms use the same worker: hs_worker_grad() computes a gradient on the next
 * batch, the algorithm communicates, hs_worker_apply() takes the local step.
 *
 * hs_train() is `hearsay train`, for one worker or one rank of a job (hearsay run, mpirun,
 * Slurm): one loop (runtime/train.c) around an algorithm (hearsay/algo.h; one worker runs
 * "local"), per-rank metrics (DIR/rank-R.csv), evaluation of every worker and of the averaged
 * model, straggler and fault injection, checkpoints, and on rank 0 the progress line,
 * DIR/eval.csv and DIR/summary.json (runtime/report.c). See docs/algorithms.md.
 */
#ifndef HEARSAY_TRAIN_H
#define HEARSAY_TRAIN_H

#include "hearsay/data.h"
#include "hearsay/kernels.h"
#include "hearsay/nn.h"
#include "hearsay/optim.h"

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hs_train_opts {
    const char *model;       /* model spec ("mlp:784-1024-1024-10") */
    const char *init;        /* initialisation scheme: "torch" (NULL too), "he", "xavier" */
    const char *data;        /* data spec ("gauss", "mnist:DIR", ...) */
    const char *shard;       /* shard spec ("iid", "dirichlet:0.5") */
    const char *device;      /* "cpu", "cuda", "cuda:N" */
    int threads;             /* CPU BLAS threads; 0 = library default */
    int epochs;              /* >= 1 */
    long max_iters;          /* stop after this many iterations (0 = no limit) */
    int batch;               /* per-worker batch size */
    double lr;               /* base learning rate */
    double momentum;         /* [0, 1) */
    double weight_decay;     /* >= 0 */
    int nesterov;            /* Nesterov momentum */
    const char *lr_schedule; /* "constant", "step:...", "cosine[...]" */
    const char *warmup;      /* "0", "5", "500it" */
    uint64_t seed;           /* data order, initialisation, synthetic data */
    double eval_every;       /* epochs between evaluations (fractional allowed; 0 = end only) */
    int sim_eval_traffic;    /* hearsay sim: evaluations cost virtual time and bandwidth (0: they
                              * are observers, free; docs/simulation.md) */
    double target_loss;      /* test loss to reach (<= 0: none) */
    double target_acc;       /* test accuracy in [0, 1] to reach (<= 0: none) */
    const char *out_dir;     /* NULL: no files */
    double progress_s;       /* seconds between progress lines (0: every epoch only) */
    int quiet;               /* no progress lines */
    const char *config_json; /* resolved configuration embedded in summary.json (may be NULL) */

    /* Algorithms and their jobs. */
    const char *algo;              /* "local", "sgp", "osgp", "dpsgd", "allreduce", ... */
    const char *graph;             /* topology spec for the gossip algorithms */
    double time_budget_s;          /* > 0: every rank stops training at this time (wall or
                                    * virtual, from the start) or at its last iteration */
    const char *const *stragglers; /* --straggler specs (n_stragglers of them) */
    size_t n_stragglers;
    const char *link;       /* link shaping spec (NULL: none), hearsay/shaping.h */
    const char *provider;   /* libfabric provider ("auto" or NULL: automatic) */
    int progress_thread;    /* transport progress thread (on for the algorithms that need
                             * one: HS_ALGO_PROGRESS) */
    double comm_timeout_s;  /* bound on every wait for a peer (> 0) */
    double drain_timeout_s; /* bound on the end-of-run drain (> 0) */
    double fail_timeout_s;  /* heartbeats: a rank silent this long is fenced (0: off; s) */
    double init_spread;     /* add N(0, init_spread) noise per rank to the initial
                               parameters (gossip-averaging studies and tests) */
    int dump_params;        /* write DIR/rank-R.init.f32 and DIR/rank-R.final.f32 */
    int dump_trajectory;    /* write DIR/rank-R.traj.f32: the parameters after every iteration */
    const char *trace;      /* --trace FILE: the timeline (hearsay/trace.h; NULL: none); rank 0
                             * merges the parts, except under hs_sim_run, whose caller merges
                             * them (hs_trace_merge_run) */
    /* The algorithm's own options (hs_algo_ops_t.options), "name=value" each (n_algo_opts of
     * them; NULL: its defaults). A name the algorithm does not declare, or a bad value, is
     * -EINVAL naming it. */
    const char *const *algo_opts;
    size_t n_algo_opts;
    /* Checkpoints (hearsay/checkpoint.h). */
    double checkpoint_every; /* epochs between checkpoints to out_dir/ckpt (0: none) */
    /* Data already loaded from o->data, shared read-only by the workers of this process (the
     * simulator loads it once for every rank); NULL: each worker loads its own. */
    const hs_dataset_t *shared_train, *shared_test;
    /* Tables every rank of this process would build the same (the simulator's N ranks), built
     * once and shared read-only; NULL: each rank builds its own (hs_train_shared_t). */
    struct hs_train_shared *shared;
    const char *resume; /* directory of a run whose newest complete ckpt set to resume (NULL) */
    /* Mixed precision (hearsay/kernels.h hs_precision_t; docs/algorithms.md "Mixed
     * precision"): the products' precision "fp32" (NULL too), "bf16" or "fp16"; tf32 lets fp32
     * products use TF32; loss_scale "auto" (NULL too: dynamic for fp16, none otherwise),
     * "dynamic[:S]" (PyTorch GradScaler's rule: from S, 2^16 by default, halved and the step
     * skipped on an inf/nan gradient, doubled after 2000 good steps) or a fixed power of two S
     * ("1": none). */
    const char *precision;
    int tf32;
    const char *loss_scale;
    int keep_last; /* --last-batch keep: each pass over a shard ends with its partial
                    * batch (PyTorch's DataLoader default) and an epoch is ceil(train
                    * samples / ranks / batch) iterations; 0 (drop, the default): the
                    * partial batch is dropped and an epoch is the floor */
} hs_train_opts_t;

/* What the ranks of one process share (hs_train_opts_t.shared; the simulator fills it): so
 * that a simulated rank's memory is its own state, not tables of the whole job. */
typedef struct hs_train_shared {
    const hs_shard_t *shards; /* (shard_ranks) every rank's shard of shared_train, or NULL */
    int shard_ranks;
    const int *host_of; /* (ranks) each rank's host (hs_dist_t.host_of), or NULL */
    int host_ranks;
    /* The graph, built by the first rank that needs it (the simulator runs one rank at a
     * time), with the mixing it was built with; its owner (the simulator) destroys it. */
    struct hs_topo *topo;
    int topo_mixing;
    int checked; /* a rank passed hs_train_dist_check (a failing check runs on every rank) */
    /* Virtual time: the rank each rank waits for past a bound (-1: none) and when it said so
     * (the heartbeats' `blocked`, runtime/heartbeat.h): made by the first rank that needs them,
     * freed by their owner (the simulator). */
    int *blocked_on;
    double *blocked_at;
} hs_train_shared_t;

/* The defaults of `hearsay train` (the synthetic Gaussian-mixture task and the MLP). */
void hs_train_opts_defaults(hs_train_opts_t *o);

typedef struct hs_train_result {
    long iterations;
    double epochs;           /* epochs completed (fractional when max_iters cut the run) */
    double wall_s;           /* whole run, set-up excluded */
    double samples_per_s;    /* training samples per second */
    double final_train_loss; /* mean over the last epoch's batches */
    double final_test_loss;
    double final_test_acc;
    double bayes_acc;            /* of the data set, NAN when unknown */
    double time_to_target_s;     /* the ranks' median of their own model's first evaluation
                                  * meeting the target, each on its own training clock; NAN when
                                  * not reached (half the ranks or more) */
    double time_to_target_avg_s; /* the averaged model's first evaluation meeting the target
                                  * (eval.csv, in iteration order), at that row's clock_s: the
                                  * latest training clock among the ranks; NAN when not */
    size_t num_params;
    /* Distributed runs (rank 0 has the job-wide figures; other ranks their own). */
    int ranks;
    double ps_weight_sum;        /* sum of the push-sum weights of the ranks that finished */
    double ps_weight_lost;       /* push-sum weight taken by ranks that crashed by injection or
                                  * were fenced (their DIR/rank-R-lost.json; 0 without), plus
                                  * ps_weight_refused */
    double ps_weight_refused;    /* weight of fenced ranks' messages the others refused */
    double ps_weight_unreported; /* N - sum - lost when a failed rank wrote nothing down (one
                                  * frozen for good): what it held, by conservation; else 0 */
    double consensus_distance;   /* RMS over ranks of ||z_i - mean z|| at the end */
    int n_failed;                /* ranks reported failed */
    int health;                  /* summary.json's health: 0 ok, 1 warn, 2 failed */
} hs_train_result_t;

typedef struct hs_worker hs_worker_t;

/* Build a worker for rank `rank` of `ranks` (the data is loaded and sharded; every rank
 * computes the same partition from the seed). Errors name the option at fault. */
int hs_worker_open(hs_worker_t **out, const hs_train_opts_t *o, int rank, int ranks);
/* The same on a host where this rank is local rank `local_rank` (--device cuda takes
 * local_rank modulo the visible devices; hs_worker_open passes rank). */
int hs_worker_open_local(hs_worker_t **out, const hs_train_opts_t *o, int rank, int ranks,
                         int local_rank);
void hs_worker_close(hs_worker_t **w);

/* Gradient on the next batch (a new epoch starts when the shard is exhausted): afterwards
 * hs_model_grads(model) holds it. *loss is the batch's mean loss, *correct its correct count,
 * *n its size (any may be NULL). */
int hs_worker_grad(hs_worker_t *w, double *loss, int *correct, int *n);
/* The learning rate of the current iteration (a pure function of the iteration). */
double hs_worker_lr(const hs_worker_t *w);
/* The local optimizer step on the worker's parameters with the current lr; advances the
 * iteration counter. */
int hs_worker_apply(hs_worker_t *w);
/* hs_worker_apply with the learning rate of this iteration multiplied by lr_scale (> 0). */
int hs_worker_apply_scaled(hs_worker_t *w, double lr_scale);
/* The same step applied to another parameter buffer (device, num_params floats) with the
 * model's gradient: SGP steps on its numerator x while the model holds z = x / w. Advances
 * the iteration counter. */
int hs_worker_apply_to(hs_worker_t *w, float *params);
/* Add N(0, sigma^2) noise, seeded by (seed, rank), to the model's parameters. */
int hs_worker_perturb(hs_worker_t *w, double sigma, uint64_t seed, int rank);
/* Evaluate parameters `params` (device, num_params floats; NULL = the worker's own) on the
 * whole test set: mean loss and accuracy. */
int hs_worker_evaluate(hs_worker_t *w, const float *params, double *loss, double *acc);

hs_model_t *hs_worker_model(hs_worker_t *w);
hs_kernels_t *hs_worker_kernels(hs_worker_t *w);
long hs_worker_iteration(const hs_worker_t *w);
/* Mean loss of the batch of the last hs_worker_grad (NAN before the first): leader-SGD's
 * recent-loss average. */
double hs_worker_last_loss(const hs_worker_t *w);
/* The worker's local optimizer (its velocity is checkpoint state: hs_sgd_velocity). */
hs_sgd_t *hs_worker_optimizer(hs_worker_t *w);
/* hs_train_opts_t.loss_scale for products in precision prec: *dynamic (1: dynamic scaling)
 * and the (initial) scale in *scale (1: none). -EINVAL naming the choices. */
int hs_loss_scale_parse(const char *s, hs_precision_t prec, int *dynamic, float *scale);
/* Dynamic loss scaling's account (hs_train_opts_t.loss_scale): the steps it skipped for an
 * inf/nan gradient, and the scale now (1 when off). */
long hs_worker_scale_skips(const hs_worker_t *w);
float hs_worker_loss_scale(const hs_worker_t *w);
/* Dynamic scaling's good steps since its last change (checkpoints keep them with the scale),
 * or -1 where this run's scaling is not dynamic. */
long hs_worker_scale_good(const hs_worker_t *w);
/* A resume: the dynamic loss scale and its good steps as a checkpoint kept them. Nothing
 * changes where this run's scaling is not dynamic (a fixed scale is this run's own choice);
 * -EINVAL for a scale that is not a power of two. */
int hs_worker_scale_restore(hs_worker_t *w, float scale, long good);
/* Position the worker as if `iteration` iterations had been taken from the start: the
 * iteration counter (hence the lr), the schedule epoch and the batch iterator's pass and
 * position (the data order is a pure function of seed, rank and iteration). Parameters and
 * velocity are not touched. -EINVAL for a negative iteration. */
int hs_worker_seek(hs_worker_t *w, long iteration);
/* Epochs done so far, fractional (iteration / iterations per epoch). Iterations per epoch
 * come from a global quantity, floor(train samples / ranks / batch) (at least 1), so every
 * rank runs the same number of iterations even when shards differ in size. */
double hs_worker_epoch(const hs_worker_t *w);
long hs_worker_iters_per_epoch(const hs_worker_t *w);
const hs_dataset_t *hs_worker_train_set(const hs_worker_t *w);
const hs_dataset_t *hs_worker_test_set(const hs_worker_t *w);

/* Create a directory and its parents (mkdir -p); errors name the path. */
int hs_mkdir_p(const char *path);

struct hs_boot;
/* Run this rank of a training job joined through `boot` (hearsay/bootstrap.h; a job of one
 * rank without a launcher is one worker) with algorithm o->algo. Returns 0 when this rank
 * finished (peers that failed are reported in summary.json, not as an error, under the
 * algorithms that tolerate them), or a negative code with a message (a failed peer under
 * all-reduce SGD or D-PSGD, a timeout, a bad option). */
int hs_train(const hs_train_opts_t *o, struct hs_boot *boot, hs_train_result_t *res);
struct hs_exec;
/* hs_train in a given execution environment (hearsay/exec.h) and its transport (x->t), which
 * the run uses and does not close: the virtual-time simulator runs every rank this way. */
int hs_train_in(const hs_train_opts_t *o, struct hs_boot *boot, struct hs_exec *x,
                hs_train_result_t *res);

/* Check every option before the job starts, whatever the rank count (runtime/train_check.c):
 * algo name, straggler specs (against `ranks` when > 0), link shaping, data, model
 * (against the data's shape), shard, lr schedule, warm-up, device, graph (built for `ranks`
 * > 1 when the algorithm uses it, else checked without a size: grammar, numbers, files), the
 * algorithm's own options (o->algo_opts against its table, then hs_algo_ops_t.check), provider,
 * --resume's checkpoints. ranks 0: the job size is not known yet. -EINVAL (or the file's error)
 * naming the flag. */
int hs_train_dist_check(const hs_train_opts_t *o, int ranks);

#ifdef __cplusplus
}
#endif
#endif
