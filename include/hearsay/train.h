/*
 * hearsay/train.h — one worker's training state and the single-worker training run.
 *
 * An hs_worker_t holds everything one replica needs: the kernel backend, its shard of the
 * training set and a batch iterator, the model (ONE flat parameter and gradient buffer), the
 * local optimizer and the learning-rate schedule, and device buffers for one batch. The
 * distributed algorithms use the same worker: hs_worker_grad() computes a gradient on the next
 * batch, the algorithm communicates, hs_worker_apply() takes the local step.
 *
 * hs_train_local() is `hearsay train` on one worker: epochs of steps, periodic evaluation on
 * the test set, a progress line, and (with out_dir) a per-iteration CSV, an evaluation CSV and
 * summary.json.
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
    double target_loss;      /* test loss to reach (<= 0: none) */
    double target_acc;       /* test accuracy in [0, 1] to reach (<= 0: none) */
    const char *out_dir;     /* NULL: no files */
    double progress_s;       /* seconds between progress lines (0: every epoch only) */
    int quiet;               /* no progress lines */
    const char *config_json; /* resolved configuration embedded in summary.json (may be NULL) */
} hs_train_opts_t;

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
    double bayes_acc;        /* of the data set, NAN when unknown */
    double time_to_target_s; /* first evaluation meeting the target; NAN when not reached */
    size_t num_params;
} hs_train_result_t;

typedef struct hs_worker hs_worker_t;

/* Build a worker for rank `rank` of `ranks` (the data is loaded and sharded; every rank
 * computes the same partition from the seed). Errors name the option at fault. */
int hs_worker_open(hs_worker_t **out, const hs_train_opts_t *o, int rank, int ranks);
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
/* Evaluate parameters `params` (device, num_params floats; NULL = the worker's own) on the
 * whole test set: mean loss and accuracy. */
int hs_worker_evaluate(hs_worker_t *w, const float *params, double *loss, double *acc);

hs_model_t *hs_worker_model(hs_worker_t *w);
hs_kernels_t *hs_worker_kernels(hs_worker_t *w);
long hs_worker_iteration(const hs_worker_t *w);
/* Epochs done so far, fractional (iteration / iterations per epoch). */
double hs_worker_epoch(const hs_worker_t *w);
long hs_worker_iters_per_epoch(const hs_worker_t *w);
const hs_dataset_t *hs_worker_train_set(const hs_worker_t *w);
const hs_dataset_t *hs_worker_test_set(const hs_worker_t *w);

/* Create a directory and its parents (mkdir -p); errors name the path. */
int hs_mkdir_p(const char *path);

/* Train one worker as `hearsay train` does; fills *res (may be NULL). */
int hs_train_local(const hs_train_opts_t *o, hs_train_result_t *res);

#ifdef __cplusplus
}
#endif
#endif
