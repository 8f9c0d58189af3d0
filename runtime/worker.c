/* runtime/worker.c — one replica's training state: data shard, model, optimizer, schedule. */
#include "hearsay/train.h"

#include "hearsay/common.h"
#include "hearsay/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct hs_worker {
    hs_kernels_t *k;
    hs_dataset_t train, test;
    int data_borrowed; /* train and test are o->shared_*'s buffers: not freed here */
    hs_shard_t shard;
    hs_batcher_t batches;
    hs_model_t *model;
    hs_sgd_t *opt;
    hs_lr_schedule_t sched;
    double base_lr;
    int batch;
    long iter;
    long iters_per_epoch; /* global: floor (ceiling with keep_last) of train samples / ranks /
                           * batch, at least 1 */
    int64_t epoch;        /* schedule epoch the batch iterator is in (iter / iters_per_epoch) */
    int64_t pass;         /* passes started over the shard (seeds the shuffle) */
    int dim;
    float *x_host;    /* (B, D) staging */
    int32_t *y_host;  /* (B) */
    float *x_dev;     /* (B, D) device */
    int32_t *y_dev;   /* (B) device */
    float *saved_dev; /* (num_params) device scratch for evaluating other parameters */
    double last_loss; /* mean loss of the last hs_worker_grad batch (NAN before) */
    /* dynamic loss scaling (hs_train_opts_t.loss_scale): on, the scale (the model's), good
     * steps since the last change, steps skipped, and skipped in a row */
    int dyn_scale;
    float scale;
    long scale_good, scale_skips, scale_run;
};

/* PyTorch's GradScaler defaults (torch.cuda.amp, 1.13). */
#define SCALE_INIT     65536.0f
#define SCALE_INTERVAL 2000
#define SCALE_MIN      0x1p-64f /* halving stops here (the step is still skipped) */
#define SCALE_MAX      0x1p64f

void hs_train_opts_defaults(hs_train_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->model = "mlp:784-1024-1024-10";
    o->init = "torch";
    o->data = "gauss";
    o->shard = "iid";
    o->device = "cpu";
    o->threads = 0;
    o->epochs = 3;
    o->batch = 128;
    o->lr = 0.05;
    o->momentum = 0.9;
    o->weight_decay = 5e-4;
    o->lr_schedule = "constant";
    o->warmup = "0";
    o->seed = 1;
    o->eval_every = 1.0;
    o->progress_s = 2.0;
    o->precision = "fp32";
    o->loss_scale = "auto";
    /* the algorithm's own options: its table's defaults (hs_algo_ops_t.options) */
}

int hs_mkdir_p(const char *path)
{
    char buf[4096];
    if (!path || !*path) return HS_ERR(-EINVAL, "empty directory name");
    if (strlen(path) >= sizeof buf) return HS_ERR(-ENAMETOOLONG, "path too long: %s", path);
    strcpy(buf, path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return HS_ERR(-errno, "cannot create directory %s: %s", buf, strerror(errno));
            struct stat st;
            if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
                return HS_ERR(-ENOTDIR, "%s exists and is not a directory", buf);
            *p = c;
            if (c == '\0') break;
        }
    }
    return 0;
}

void hs_worker_close(hs_worker_t **wp)
{
    hs_worker_t *w = wp ? *wp : NULL;
    if (!w) return;
    if (w->k) {
        w->k->ops->free(w->k, w->x_dev);
        w->k->ops->free(w->k, w->y_dev);
        w->k->ops->free(w->k, w->saved_dev);
    }
    free(w->x_host);
    free(w->y_host);
    hs_sgd_close(&w->opt);
    hs_model_free(&w->model);
    hs_batcher_free(&w->batches);
    hs_shard_free(&w->shard);
    if (!w->data_borrowed) {
        hs_dataset_free(&w->train);
        hs_dataset_free(&w->test);
    }
    hs_kernels_close(&w->k);
    free(w);
    *wp = NULL;
}

int hs_worker_open(hs_worker_t **out, const hs_train_opts_t *o, int rank, int ranks)
{
    return hs_worker_open_local(out, o, rank, ranks, rank);
}

int hs_worker_open_local(hs_worker_t **out, const hs_train_opts_t *o, int rank, int ranks,
                         int local_rank)
{
    int rc;
    *out = NULL;
    if (o->batch < 1) return HS_ERR(-EINVAL, "--batch must be at least 1 (got %d)", o->batch);
    if (o->epochs < 1) return HS_ERR(-EINVAL, "--epochs must be at least 1 (got %d)", o->epochs);
    if (!(o->lr >= 0) || !isfinite(o->lr))
        return HS_ERR(-EINVAL, "--lr must be a finite number >= 0 (got %g)", o->lr);
    hs_worker_t *w = hs_calloc(1, sizeof *w, "worker");
    if (!w) return -ENOMEM;
    w->last_loss = NAN;

    hs_device_t dev;
    int dev_index;
    if ((rc = hs_device_select(o->device, local_rank, &dev, &dev_index)) < 0) goto fail;
    if ((rc = hs_kernels_open(&w->k, dev, dev_index, o->threads)) < 0) goto fail;
    hs_precision_t prec = HS_PREC_FP32;
    if (o->precision && (rc = hs_precision_parse(o->precision, &prec)) < 0) {
        hs_error_prefix("--precision");
        goto fail;
    }
    if ((rc = hs_kernels_set_precision(w->k, prec, o->tf32 ? 1 : 0)) < 0) {
        hs_error_prefix("--precision %s%s", hs_precision_name(prec), o->tf32 ? " --tf32" : "");
        goto fail;
    }
    if ((rc = hs_loss_scale_parse(o->loss_scale, prec, &w->dyn_scale, &w->scale)) < 0) goto fail;

    if (o->shared_train && o->shared_test) {
        w->train = *o->shared_train;
        w->test = *o->shared_test;
        w->data_borrowed = 1;
    } else if ((rc = hs_data_load(o->data, o->seed, &w->train, &w->test)) < 0) {
        hs_error_prefix("--data %s", o->data);
        goto fail;
    }
    if (w->data_borrowed && o->shared && o->shared->shards && o->shared->shard_ranks == ranks) {
        /* computed once for every rank of this process (the simulator): a copy of this
         * rank's (hs_shard_all gives each rank what hs_shard_for_rank would) */
        const hs_shard_t *mine = &o->shared->shards[rank];
        w->shard.n = mine->n;
        w->shard.idx =
            hs_malloc((size_t)(mine->n > 0 ? mine->n : 1) * sizeof(int64_t), "shard indices");
        if (!w->shard.idx) {
            rc = -ENOMEM;
            goto fail;
        }
        if (mine->n > 0) memcpy(w->shard.idx, mine->idx, (size_t)mine->n * sizeof(int64_t));
    } else if ((rc = hs_shard_for_rank(&w->train, o->shard, ranks, rank, o->seed, &w->shard)) < 0) {
        hs_error_prefix("--shard %s", o->shard);
        goto fail;
    }
    if (w->shard.n < 1) {
        rc = HS_ERR(-EINVAL, "rank %d's shard of %s is empty (%d ranks for %lld samples)", rank,
                    w->train.name, ranks, (long long)w->train.n);
        goto fail;
    }
    int batch = o->batch;
    if (batch > w->shard.n) batch = (int)w->shard.n;
    w->batch = batch;
    if ((rc = hs_batcher_init(&w->batches, &w->train, &w->shard, batch,
                              HS_BATCH_SHUFFLE | (o->keep_last ? 0 : HS_BATCH_DROP_LAST), o->seed,
                              rank)) < 0)
        goto fail;
    hs_batcher_start_epoch(&w->batches, 0);
    /* Every rank derives the same count from global quantities (shards may differ by a
     * sample, or much more under non-IID sharding): all ranks run the same iterations. The
     * batch asked for, not this rank's (clipped to a small shard): with the clipped one a rank
     * holding 10 samples of a Dirichlet split ran 7x the iterations of the others, alone at
     * the end of every synchronous algorithm (issue 25). With the last partial batch kept, the
     * count is the ceiling (one worker: a pass per epoch, PyTorch's
     * DataLoader(drop_last=False)). */
    w->iters_per_epoch = o->keep_last ? (long)((w->train.n / ranks + o->batch - 1) / o->batch)
                                      : (long)(w->train.n / ranks / o->batch);
    if (w->iters_per_epoch < 1) w->iters_per_epoch = 1;

    if ((rc = hs_model_create(&w->model, w->k, o->model, w->train.c, w->train.h, w->train.w,
                              w->train.classes, batch, o->seed)) < 0) {
        hs_error_prefix("--model %s", o->model);
        goto fail;
    }
    if ((rc = hs_model_set_loss_scale(w->model, w->scale)) < 0) goto fail;
    hs_init_scheme_t scheme = HS_INIT_SCHEME_TORCH;
    if (o->init && ((rc = hs_init_parse(o->init, &scheme)) < 0 ||
                    (scheme != HS_INIT_SCHEME_TORCH &&
                     (rc = hs_model_set_init(w->model, scheme, o->seed)) < 0))) {
        hs_error_prefix("--init %s", o->init);
        goto fail;
    }
    hs_sgd_config_t sc = {.momentum = (float)o->momentum,
                          .weight_decay = (float)o->weight_decay,
                          .nesterov = o->nesterov};
    if ((rc = hs_sgd_open(&w->opt, w->k, hs_model_num_params(w->model), &sc)) < 0) goto fail;
    if ((rc = hs_lr_parse(o->lr_schedule, o->epochs, &w->sched)) < 0) goto fail;
    if ((rc = hs_lr_set_warmup(&w->sched, o->warmup ? o->warmup : "0")) < 0) goto fail;
    w->base_lr = o->lr;

    w->dim = (int)w->train.dim;
    size_t xb = (size_t)batch * (size_t)w->dim * sizeof(float);
    w->x_host = hs_malloc(xb, "batch features");
    w->y_host = hs_malloc((size_t)batch * sizeof(int32_t), "batch labels");
    if (!w->x_host || !w->y_host) {
        rc = -ENOMEM;
        goto fail;
    }
    if ((rc = w->k->ops->alloc(w->k, xb, (void **)&w->x_dev)) < 0) goto fail;
    if ((rc = w->k->ops->alloc(w->k, (size_t)batch * sizeof(int32_t), (void **)&w->y_dev)) < 0)
        goto fail;
    *out = w;
    return 0;
fail:
    hs_worker_close(&w);
    return rc;
}

int hs_worker_grad(hs_worker_t *w, double *loss, int *correct, int *n)
{
    int64_t want = w->iter / w->iters_per_epoch;
    if (want != w->epoch) { /* a schedule epoch starts: a fresh shuffled pass */
        w->epoch = want;
        hs_batcher_start_epoch(&w->batches, ++w->pass);
    }
    int got = hs_batcher_next(&w->batches, w->x_host, w->y_host, NULL);
    if (got == 0) { /* the shard ran out inside a schedule epoch (a small shard) */
        hs_batcher_start_epoch(&w->batches, ++w->pass);
        got = hs_batcher_next(&w->batches, w->x_host, w->y_host, NULL);
        if (got <= 0) return HS_ERR(-EIO, "batch iterator returned no batch at epoch start");
    }
    if (got < 0) return got;
    hs_kernels_t *k = w->k;
    HS_TRY(k->ops->to_device(k, w->x_dev, w->x_host, (size_t)got * (size_t)w->dim * sizeof(float)));
    HS_TRY(k->ops->to_device(k, w->y_dev, w->y_host, (size_t)got * sizeof(int32_t)));
    double l = NAN;
    HS_TRY(hs_model_train_step(w->model, w->x_dev, w->y_dev, got, &l, correct));
    w->last_loss = l;
    if (loss) *loss = l;
    if (n) *n = got;
    return 0;
}

double hs_worker_lr(const hs_worker_t *w)
{
    return hs_lr_at(&w->sched, w->iter, w->iters_per_epoch, w->base_lr);
}

int hs_loss_scale_parse(const char *s, hs_precision_t prec, int *dynamic, float *scale)
{
    *dynamic = 0;
    *scale = 1.0f;
    if (!s || strcmp(s, "auto") == 0) {
        *dynamic = prec == HS_PREC_FP16;
        if (*dynamic) *scale = SCALE_INIT;
        return 0;
    }
    const char *num = s;
    if (strncmp(s, "dynamic", 7) == 0 && (s[7] == '\0' || s[7] == ':')) {
        *dynamic = 1;
        *scale = SCALE_INIT;
        if (s[7] == '\0') return 0;
        num = s + 8;
    }
    char *end = NULL;
    double v = strtod(num, &end);
    int e;
    if (end == num || *end || !(v > 0) || !isfinite(v) || v > SCALE_MAX || v < SCALE_MIN ||
        frexp(v, &e) != 0.5)
        return HS_ERR(-EINVAL,
                      "--loss-scale '%s': expected auto, dynamic[:S] or S, with S a power of "
                      "two in [2^-64, 2^64] (1: none)",
                      s);
    *scale = (float)v;
    return 0;
}

/* Dynamic loss scaling, before the step (on the gradient about to be applied: after an
 * all-reduce, the average, so every rank skips together): *skip when it is not finite, and
 * the scale moves as GradScaler's does. */
static int scale_check(hs_worker_t *w, int *skip)
{
    *skip = 0;
    if (!w->dyn_scale) return 0;
    double sum = 0;
    HS_TRY(w->k->ops->sum(w->k, hs_model_num_params(w->model), hs_model_grads(w->model), &sum));
    float next = w->scale;
    if (!isfinite(sum)) {
        *skip = 1;
        w->scale_skips++;
        w->scale_good = 0;
        if (++w->scale_run == 100)
            HS_WARN("loss scaling skipped 100 steps in a row (scale now %g): the gradient is not "
                    "finite at any scale; the model itself may have diverged",
                    (double)w->scale);
        if (next > SCALE_MIN) next *= 0.5f;
    } else {
        w->scale_run = 0;
        if (++w->scale_good >= SCALE_INTERVAL) {
            w->scale_good = 0;
            if (next < SCALE_MAX) next *= 2.0f;
        }
    }
    if (next != w->scale) {
        HS_TRY(hs_model_set_loss_scale(w->model, next));
        w->scale = next;
    }
    return 0;
}

/* The local step on params with this iteration's rate times lr_scale (unless loss scaling
 * skips it); the iteration advances either way. */
static int apply(hs_worker_t *w, float *params, double lr_scale)
{
    int skip;
    HS_TRY(scale_check(w, &skip));
    if (!skip) {
        float lr = (float)(hs_worker_lr(w) * lr_scale);
        HS_TRY(hs_sgd_step(w->opt, params, hs_model_grads(w->model), lr));
    }
    w->iter++;
    return 0;
}

int hs_worker_apply(hs_worker_t *w)
{
    return apply(w, hs_model_params(w->model), 1.0);
}

int hs_worker_apply_scaled(hs_worker_t *w, double lr_scale)
{
    if (!(lr_scale > 0) || !isfinite(lr_scale))
        return HS_ERR(-EINVAL, "learning-rate scale %g is not a finite number > 0", lr_scale);
    return apply(w, hs_model_params(w->model), lr_scale);
}

int hs_worker_apply_to(hs_worker_t *w, float *params)
{
    return apply(w, params, 1.0);
}

long hs_worker_scale_skips(const hs_worker_t *w)
{
    return w->scale_skips;
}

float hs_worker_loss_scale(const hs_worker_t *w)
{
    return w->scale;
}

long hs_worker_scale_good(const hs_worker_t *w)
{
    return w->dyn_scale ? w->scale_good : -1;
}

int hs_worker_scale_restore(hs_worker_t *w, float scale, long good)
{
    if (!w->dyn_scale) return 0;
    if (!(scale >= SCALE_MIN && scale <= SCALE_MAX) || good < 0 || good >= SCALE_INTERVAL)
        return HS_ERR(-EINVAL, "loss scale %g after %ld good steps: not a dynamic scale's state",
                      (double)scale, good);
    HS_TRY(hs_model_set_loss_scale(w->model, scale));
    w->scale = scale;
    w->scale_good = good;
    return 0;
}

int hs_worker_perturb(hs_worker_t *w, double sigma, uint64_t seed, int rank)
{
    if (!(sigma >= 0) || !isfinite(sigma))
        return HS_ERR(-EINVAL, "initial spread must be a finite number >= 0 (got %g)", sigma);
    if (sigma == 0) return 0;
    size_t np = hs_model_num_params(w->model);
    float *h = hs_malloc(np * sizeof(float), "parameter perturbation");
    if (!h) return -ENOMEM;
    hs_kernels_t *k = w->k;
    int rc = k->ops->to_host(k, h, hs_model_params(w->model), np * sizeof(float));
    if (rc == 0) {
        hs_rng_t r;
        hs_rng_seed(&r, seed ^ 0x5eed5eedULL, 1000003ULL + (uint64_t)rank);
        for (size_t i = 0; i < np; i++) h[i] += (float)(sigma * hs_rng_normal(&r));
        rc = k->ops->to_device(k, hs_model_params(w->model), h, np * sizeof(float));
    }
    free(h);
    return rc;
}

int hs_worker_evaluate(hs_worker_t *w, const float *params, double *loss, double *acc)
{
    hs_kernels_t *k = w->k;
    size_t np = hs_model_num_params(w->model);
    float *own = hs_model_params(w->model);
    int swapped = 0, rc = 0;
    if (params && params != own) {
        if (!w->saved_dev) HS_TRY(k->ops->alloc(k, np * sizeof(float), (void **)&w->saved_dev));
        HS_TRY(k->ops->copy(k, w->saved_dev, own, np * sizeof(float)));
        HS_TRY(k->ops->copy(k, own, params, np * sizeof(float)));
        swapped = 1;
    }
    hs_batcher_t eb;
    if ((rc = hs_batcher_init_eval(&eb, &w->test, w->batch)) < 0) goto out;
    double total_loss = 0;
    long total_correct = 0, total = 0;
    int got;
    while ((got = hs_batcher_next(&eb, w->x_host, w->y_host, NULL)) > 0) {
        double l;
        int c;
        if ((rc = k->ops->to_device(k, w->x_dev, w->x_host,
                                    (size_t)got * (size_t)w->dim * sizeof(float))) < 0 ||
            (rc = k->ops->to_device(k, w->y_dev, w->y_host, (size_t)got * sizeof(int32_t))) < 0 ||
            (rc = hs_model_evaluate(w->model, w->x_dev, w->y_dev, got, &l, &c)) < 0)
            break;
        total_loss += l * got;
        total_correct += c;
        total += got;
    }
    hs_batcher_free(&eb);
    if (rc == 0 && got < 0) rc = got;
    if (rc == 0 && total == 0) rc = HS_ERR(-EINVAL, "the test set is empty");
    if (rc == 0) {
        if (loss) *loss = total_loss / (double)total;
        if (acc) *acc = (double)total_correct / (double)total;
    }
out:
    if (swapped) {
        int rc2 = k->ops->copy(k, own, w->saved_dev, np * sizeof(float));
        if (rc == 0) rc = rc2;
    }
    return rc;
}

hs_model_t *hs_worker_model(hs_worker_t *w)
{
    return w->model;
}
hs_kernels_t *hs_worker_kernels(hs_worker_t *w)
{
    return w->k;
}
long hs_worker_iteration(const hs_worker_t *w)
{
    return w->iter;
}
double hs_worker_epoch(const hs_worker_t *w)
{
    return (double)w->iter / (double)(w->iters_per_epoch > 0 ? w->iters_per_epoch : 1);
}
long hs_worker_iters_per_epoch(const hs_worker_t *w)
{
    return w->iters_per_epoch;
}
const hs_dataset_t *hs_worker_train_set(const hs_worker_t *w)
{
    return &w->train;
}
const hs_dataset_t *hs_worker_test_set(const hs_worker_t *w)
{
    return &w->test;
}

double hs_worker_last_loss(const hs_worker_t *w)
{
    return w->last_loss;
}

hs_sgd_t *hs_worker_optimizer(hs_worker_t *w)
{
    return w->opt;
}

int hs_worker_seek(hs_worker_t *w, long iteration)
{
    if (iteration < 0) return HS_ERR(-EINVAL, "cannot seek to iteration %ld", iteration);
    /* Where hs_worker_grad's positioning stands after `iteration` batches, in closed form (O(1)
     * in the iteration): schedule epoch e starts a fresh pass (epoch 0: pass 0), and a pass
     * holds k = n / B batches (the last partial one dropped; ceil(n / B) when kept), so
     * epoch e uses ceil(ipe / k) passes and its j-th batch is batch j % k of its pass j / k.
     * The pass numbers stay below `iteration` (ceil(ipe / k) <= ipe): no overflow. */
    hs_batcher_t *b = &w->batches;
    int64_t ipe = w->iters_per_epoch, k = hs_batcher_batches_per_epoch(b);
    if (k < 1) return HS_ERR(-EINVAL, "cannot seek: the shard holds no whole batch");
    w->epoch = 0;
    w->pass = 0;
    int64_t pos = 0;
    if (iteration > 0) {
        int64_t last = iteration - 1, e = last / ipe, j = last % ipe;
        w->epoch = e;
        w->pass = e * ((ipe + k - 1) / k) + j / k;
        pos = HS_MIN((j % k + 1) * (int64_t)b->batch, b->n);
    }
    hs_batcher_start_epoch(b, w->pass);
    b->pos = pos;
    w->iter = iteration;
    w->last_loss = NAN;
    return 0;
}
