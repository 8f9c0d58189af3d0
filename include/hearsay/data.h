/*
 * hearsay/data.h — datasets, readers, per-worker sharding and batching (host memory only).
 *
 * A dataset is n samples of C*H*W float32 features, row-major (n, C*H*W), and int32 labels in
 * [0, classes). Datasets are read-only once loaded: many workers in one process share one
 * dataset and each keeps only its shard (a list of indices) and a batch iterator that copies
 * samples into caller-provided host buffers; the trainer copies those to the device.
 *
 * Sources:
 *   - gauss:    Gaussian mixture with a known Bayes accuracy (hs_data_gauss).
 *   - teacher:  labels from a fixed random teacher MLP (hs_data_teacher).
 *   - mnist:    idx files (hs_data_mnist), plain or gzip-compressed.
 *   - cifar10:  the binary version, data_batch_1..5.bin and test_batch.bin (hs_data_cifar10),
 *               plain or gzip-compressed.
 *   - digits:   scikit-learn's 8x8 handwritten digits CSV (hs_digits_read), native or 28x28.
 *   - npy:      NumPy's .npy files x_train, y_train, x_test, y_test (hs_data_npy).
 * hs_data_load() builds any of them from a --data spec string (see hs_data_spec_help()).
 *
 * Letters in shape comments: N samples, D = C*H*W features, K classes, B batch, W workers.
 */
#ifndef HEARSAY_DATA_H
#define HEARSAY_DATA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HS_DATA_NAME_MAX 64

typedef struct hs_dataset {
    char name[HS_DATA_NAME_MAX]; /* "gauss", "teacher", "mnist", "cifar10" (+ "-train"/"-test") */
    int64_t n;                   /* number of samples N */
    int c, h, w;                 /* feature shape; D = c*h*w (synthetic sets use 1 x 1 x D) */
    int64_t dim;                 /* D */
    int classes;                 /* K; every label is in [0, K) */
    double bayes_acc;            /* accuracy of the Bayes classifier, NAN when unknown */
    float *x;                    /* (N, D) features, row-major */
    int32_t *y;                  /* (N) labels */
} hs_dataset_t;

/* ---- datasets ---------------------------------------------------------------------------- */

/* Allocate an (n, c*h*w) dataset with uninitialised features and zero labels; bayes_acc = NAN.
 * Returns 0, -EINVAL on bad sizes, or -ENOMEM. On failure *ds is left empty (safe to free). */
int hs_dataset_alloc(hs_dataset_t *ds, const char *name, int64_t n, int c, int h, int w,
                     int classes);
/* Release the buffers and zero the struct; safe on a zeroed or already freed dataset. */
void hs_dataset_free(hs_dataset_t *ds);
/* Keep only the first n samples (n <= ds->n; the buffers are not shrunk). */
int hs_dataset_truncate(hs_dataset_t *ds, int64_t n);
/* Check that every label is in [0, classes): 0 or -EINVAL naming the first bad sample. */
int hs_dataset_check_labels(const hs_dataset_t *ds);
/* Per-sample class histogram: counts[k] = number of samples with label k. counts: (K). */
void hs_dataset_class_counts(const hs_dataset_t *ds, int64_t *counts);

/* Per-channel standardisation x = (x - mean[c]) / std[c] over every pixel of channel c.
 * mean, std: (C); std > 0. */
int hs_dataset_standardize(hs_dataset_t *ds, const double *mean, const double *std);
/* Per-channel mean and (population) standard deviation over all samples. mean, std: (C). */
void hs_dataset_channel_stats(const hs_dataset_t *ds, double *mean, double *std);

/* ---- synthetic datasets ------------------------------------------------------------------ */

/*
 * Gaussian mixture. K classes with equal priors; class k has mean mu_k and covariance
 * noise^2 I in D dimensions. When K <= D the means are sep/sqrt(2) times K random orthonormal
 * directions (Gram-Schmidt on Gaussian vectors), so EVERY pair of means is exactly `sep` apart.
 * The Bayes classifier is then the nearest mean, and its accuracy is the 1-D integral
 *     P = integral phi(z) Phi(z + a)^(K-1) dz,   a = sep / (sqrt(2) noise),
 * computed by composite Simpson on [-12, 12] with 24000 panels (error < 1e-9); for K = 2
 * this equals the closed form Phi(sep / (2 noise)). When K > D the means are i.i.d. Gaussian,
 * scaled so the average pairwise distance is `sep`, and the Bayes accuracy is a Monte-Carlo
 * estimate (hs_gauss_bayes_mc) with bayes_samples draws (default 10^6: standard error
 * sqrt(P(1-P)/10^6) <= 5e-4, about 1.4e-4 at P = 0.98), seeded from the dataset seed.
 * The defaults (D = 784, K = 10, 20000 train, 2000 test, sep = 6, noise = 1) give a Bayes
 * accuracy of 0.98994, and the Bayes classifier is linear, so an MLP such as
 * mlp:784-1024-1024-10 can come within a point of it (measured: the nearest estimated mean
 * scores 0.9900 on the test set, softmax regression by SGD at lr 1e-3 0.9890 after 5 epochs;
 * at lr 1e-2 it overfits the 774 noise directions and stalls at 0.974).
 */
typedef struct hs_gauss_opts {
    int dim;               /* D */
    int classes;           /* K >= 2 */
    int64_t n_train;       /* samples in the training set */
    int64_t n_test;        /* samples in the test set */
    double sep;            /* distance between class means (> 0) */
    double noise;          /* per-coordinate standard deviation sigma (> 0) */
    uint64_t seed;         /* means, train and test samples all follow it */
    int64_t bayes_samples; /* Monte-Carlo draws when K > D */
} hs_gauss_opts_t;

/* Fill *o with the defaults above (seed 0). */
void hs_gauss_defaults(hs_gauss_opts_t *o);
/* Generate train and test sets (each with bayes_acc set); labels are balanced in expectation
 * (drawn uniformly). means: (K, D) receives the class means, or NULL. Same opts, same data. */
int hs_data_gauss(const hs_gauss_opts_t *o, hs_dataset_t *train, hs_dataset_t *test, float *means);
/* Bayes accuracy of equal-prior classes with means (K, D) orthonormal-scaled as above:
 * the integral for pairwise distance sep and per-coordinate noise sigma. */
double hs_gauss_bayes_orthogonal(int classes, double sep, double noise);
/* Monte-Carlo Bayes accuracy for arbitrary means (K, D) and covariance noise^2 I: draws a
 * class uniformly and noise only in the span of the mean differences (the rest cannot change
 * the nearest mean), `samples` times, seeded. Returns the accuracy, or -1 on bad arguments or
 * allocation failure (message recorded). */
double hs_gauss_bayes_mc(const float *means, int classes, int dim, double noise, int64_t samples,
                         uint64_t seed);
/* Label of the nearest mean to x (D); means (K, D). Ties go to the lowest class. */
int hs_gauss_nearest_mean(const float *means, int classes, int dim, const float *x);

/*
 * Teacher network. Inputs x ~ N(0, I_D); a fixed random teacher MLP D -> hidden -> K with tanh
 * (weights N(0, 1/fan_in), output biases chosen to centre each logit over a 4096-sample
 * calibration set, so classes are roughly balanced) labels each x by the argmax of its logits.
 * With label_noise p, each label is replaced with probability p by a uniformly drawn DIFFERENT
 * class; the Bayes classifier is still the teacher (p < (K-1)/K), so bayes_acc = 1 - p.
 */
typedef struct hs_teacher_opts {
    int dim;            /* D */
    int hidden;         /* width of the teacher's hidden layer */
    int classes;        /* K >= 2 */
    int64_t n_train;    /* samples in the training set */
    int64_t n_test;     /* samples in the test set */
    double label_noise; /* p in [0, (K-1)/K) */
    uint64_t seed;
} hs_teacher_opts_t;

/* Defaults: D = 784, hidden = 64, K = 10, 20000 train, 2000 test, no label noise, seed 0. */
void hs_teacher_defaults(hs_teacher_opts_t *o);
/* Generate train and test sets labelled by the teacher. Same opts, same data. */
int hs_data_teacher(const hs_teacher_opts_t *o, hs_dataset_t *train, hs_dataset_t *test);

/* ---- file readers ------------------------------------------------------------------------ */

/* How pixels are scaled after dividing by 255. */
enum hs_data_norm {
    HS_NORM_KNOWN = 0, /* per-channel standardisation with the published dataset mean/std */
    HS_NORM_TRAIN = 1, /* per-channel standardisation with the mean/std of the training set */
    HS_NORM_NONE = 2,  /* pixels in [0, 1] */
};
/* Published per-channel statistics of the pixels in [0, 1] (training sets). */
extern const double hs_mnist_mean[1], hs_mnist_std[1];
extern const double hs_cifar10_mean[3], hs_cifar10_std[3];

/* Normalise a train/test pair of pixels in [0, 1] per channel: with the published statistics
 * known_mean/known_std (C), with the train set's own statistics, or not at all. */
int hs_data_normalize(enum hs_data_norm norm, const double *known_mean, const double *known_std,
                      hs_dataset_t *train, hs_dataset_t *test);

/* Read one MNIST idx pair (idx3 images, idx1 labels) into *out as 1x28x28 pixels in [0, 1]
 * (no standardisation). Errors, each with a message naming the file and the problem:
 * -ENOENT missing file (FILE.gz is read when FILE is missing); -EINVAL bad content (also a
 * truncated or corrupt gzip file, by its magic, inflated with zlib) (wrong magic, wrong dimensions,
 * truncated, trailing bytes, image/label count mismatch, label > 9); -EIO read failure. Reads only
 * within the file's size. */
int hs_mnist_read(const char *images_path, const char *labels_path, hs_dataset_t *out);
/* Read DIR/train-images-idx3-ubyte, DIR/train-labels-idx1-ubyte, DIR/t10k-images-idx3-ubyte
 * and DIR/t10k-labels-idx1-ubyte, then normalise both sets with `norm` (train statistics for
 * HS_NORM_TRAIN). */
int hs_data_mnist(const char *dir, enum hs_data_norm norm, hs_dataset_t *train, hs_dataset_t *test);

/* Read CIFAR-10 binary files (records of 1 label byte + 3072 pixel bytes, R then G then B
 * planes of 32x32) into *out as 3x32x32 pixels in [0, 1], in file order. Each file must
 * hold a whole, non-zero number of records; labels must be 0..9. paths: (nfiles). Error
 * codes as hs_mnist_read (a size that is not a multiple of 3073 bytes is -EINVAL). */
int hs_cifar10_read(const char *const *paths, int nfiles, hs_dataset_t *out);
/* Read DIR/data_batch_1.bin .. data_batch_5.bin and DIR/test_batch.bin (or the same under
 * DIR/cifar-10-batches-bin/), then normalise with `norm`. */
int hs_data_cifar10(const char *dir, enum hs_data_norm norm, hs_dataset_t *train,
                    hs_dataset_t *test);

/* scikit-learn's digits (data/digits.c): the places Debian's python3-sklearn puts digits.csv.gz
 * (NULL-terminated), and the first that exists into path (-ENOENT naming the path and the
 * package when none does). */
extern const char *const hs_digits_default_paths[];
int hs_digits_find(char *path, size_t size);
/* Read sklearn's digits.csv(.gz) (lines of 64 pixel counts 0..16 and a label 0..9) into a train
 * and a test set of 1 x size x size pixels in [0, 1]: size 8 native, 28 upscaled bilinearly
 * (half-pixel centres, as PyTorch's F.interpolate(mode="bilinear", align_corners=False)).
 * Fixed split: sample i (file order) is test when i % 5 == 4 (1,797 -> 1,438 train, 359 test).
 * Not the expected CSV: -EINVAL naming the file, line and field. */
int hs_digits_read(const char *path, int size, hs_dataset_t *train, hs_dataset_t *test);

/* NumPy's .npy format (data/npy.c), as np.save writes it: version 1.0, 2.0 or 3.0. */
#define HS_NPY_MAX_NDIM 8
typedef struct hs_npy_header {
    char descr[16];    /* "<f4", "|u1", "<i8", ... */
    char kind;         /* 'f' float, 'i' signed, 'u' unsigned integer, 'b' bool */
    int itemsize;      /* bytes per element */
    int fortran_order; /* 1: column-major (refused for more than one dimension) */
    int ndim;          /* 0 .. HS_NPY_MAX_NDIM */
    int64_t shape[HS_NPY_MAX_NDIM];
    int64_t count;      /* elements: the product of the shape */
    size_t data_offset; /* bytes before the data */
} hs_npy_header_t;

/* Parse and check the header of a .npy file whose first `avail` bytes are buf and whose whole
 * length is file_len: the magic, the version, the header dict (exactly descr, fortran_order and
 * shape), a supported little-endian dtype, C order, and file_len = header + count * itemsize.
 * 0, or -EINVAL with a message naming path and what is wrong (a .npz archive, a structured or
 * big-endian dtype, a Fortran-ordered array, a truncated file, trailing bytes, ...). */
int hs_npy_parse_header(const char *path, const uint8_t *buf, size_t avail, size_t file_len,
                        hs_npy_header_t *h);
/* Read features x_path and labels y_path into *out. x: float32, float64 or uint8 (divided by
 * 255), shape (N, D) -> 1x1xD, (N, H, W) -> 1xHxW or (N, C, H, W), every value finite; y: any
 * integer dtype, shape (N), labels in [0, classes) (classes 0: out->classes = the largest label
 * + 1). Errors as hs_mnist_read, each naming the file and the problem. */
int hs_npy_read(const char *x_path, const char *y_path, int classes, hs_dataset_t *out);
/* Read DIR/x_train.npy, y_train.npy, x_test.npy and y_test.npy (plain or .gz), the same sample
 * shape in both sets; classes 0: the largest label of either set + 1 (at least 2). */
int hs_data_npy(const char *dir, int classes, hs_dataset_t *train, hs_dataset_t *test);
/* The sample shape and class count hs_data_npy would give, reading only the headers of the
 * x files (and the labels, when classes is 0). */
int hs_npy_probe(const char *dir, int classes, int *c, int *h, int *w, int *classes_out);

/* ---- the --data spec ----------------------------------------------------------------------- */

/*
 * Spec grammar: KIND[:ARGS], ARGS a comma-separated list of key=value.
 *   gauss                                   defaults (see hs_gauss_opts_t)
 *   gauss:dim=784,classes=10,train=20000,test=2000,sep=6,noise=1,seed=S,mc=1000000
 *   teacher:dim=784,hidden=64,classes=10,train=20000,test=2000,noise=0,seed=S
 *   mnist:DIR[,norm=known|train|none][,train=N][,test=N]
 *   cifar10:DIR[,norm=known|train|none][,train=N][,test=N]
 *   digits[:PATH][,size=28|8][,norm=train|none][,train=N][,test=N]
 *   npy:DIR[,classes=K][,norm=none|train][,train=N][,test=N]
 * For mnist/cifar10 the directory is the first item (or dir=DIR), for digits the file (or
 * path=PATH; default: the first of hs_digits_default_paths that exists; norm defaults to train);
 * for npy the directory of x_train.npy, y_train.npy, x_test.npy, y_test.npy (norm defaults to
 * none: the arrays as they are; classes defaults to the largest label + 1);
 * train=/test= keep only the first N samples. seed= fixes the data seed; otherwise the seed given
 * to hs_data_load is used. Unknown kinds and keys, repeated keys and bad values are rejected with a
 * message naming them.
 */
enum hs_data_kind {
    HS_DATA_GAUSS = 0,
    HS_DATA_TEACHER,
    HS_DATA_MNIST,
    HS_DATA_CIFAR10,
    HS_DATA_DIGITS,
    HS_DATA_NPY
};

typedef struct hs_data_spec {
    enum hs_data_kind kind;
    hs_gauss_opts_t gauss;     /* when kind == HS_DATA_GAUSS */
    hs_teacher_opts_t teacher; /* when kind == HS_DATA_TEACHER */
    char dir[1024];            /* mnist / cifar10 / npy directory; digits file ("" = default) */
    int size;                  /* digits: 28 (upscaled, default) or 8 (native) */
    int classes;               /* npy: classes=K (0: from the labels) */
    enum hs_data_norm norm;
    int64_t n_train, n_test; /* mnist / cifar10 / digits / npy: keep the first N (0 = all) */
    int has_seed;            /* seed= given: it overrides the caller's seed */
    uint64_t seed;
} hs_data_spec_t;

/* Usage text for --data (several lines, no trailing newline). */
const char *hs_data_spec_help(void);
/* Parse a spec string into *out without loading anything. 0 or -EINVAL naming the problem. */
int hs_data_spec_parse(const char *spec, hs_data_spec_t *out);
/* The sample shape (c x h x w) and class count the parsed spec loads, known without loading:
 * the synthetic sets' dim and classes (1 x 1 x dim), MNIST 1 x 28 x 28, CIFAR-10 3 x 32 x 32 and
 * digits 1 x size x size, with 10 classes. For checking a model spec against the data at start.
 * npy: only the files know (c = h = w = 0, classes = classes= or 0): use hs_data_spec_probe. */
void hs_data_spec_shape(const hs_data_spec_t *spec, int *c, int *h, int *w, int *classes);
/* hs_data_spec_shape, and for npy the shape read from the files' headers (hs_npy_probe):
 * 0, or an error naming the file. */
int hs_data_spec_probe(const hs_data_spec_t *spec, int *c, int *h, int *w, int *classes);
/* Build the train and test sets of a parsed spec; seed is used unless the spec has seed=. */
int hs_data_spec_load(const hs_data_spec_t *spec, uint64_t seed, hs_dataset_t *train,
                      hs_dataset_t *test);
/* hs_data_spec_parse + hs_data_spec_load. */
int hs_data_load(const char *spec, uint64_t seed, hs_dataset_t *train, hs_dataset_t *test);

/* ---- sharding ------------------------------------------------------------------------------ */

/* One worker's shard: indices into a dataset (no copy of the data), ascending. */
typedef struct hs_shard {
    int64_t n;
    int64_t *idx; /* (n) */
} hs_shard_t;

/* IID split of n samples over `workers`: a seeded permutation cut into near-equal parts
 * (sizes differ by at most 1); every sample is in exactly one shard. shards: (W), filled. */
int hs_shard_iid(int64_t n, int workers, uint64_t seed, hs_shard_t *shards);
/* Non-IID label skew: for each class k, proportions over workers ~ Dirichlet(alpha) (gamma
 * draws), the class's samples (shuffled) split by those proportions; then every worker with
 * fewer than min_per_worker samples takes samples, one at a time, from the largest shard.
 * Every sample lands in exactly one shard. Small alpha: few classes per worker; alpha -> inf:
 * IID-like. labels: (N) in [0, classes). shards: (W), filled. Needs N >= W * min_per_worker. */
int hs_shard_dirichlet(const int32_t *labels, int64_t n, int classes, int workers, double alpha,
                       int64_t min_per_worker, uint64_t seed, hs_shard_t *shards);
/* Free every shard's indices; shards: (W). */
void hs_shards_free(hs_shard_t *shards, int workers);
void hs_shard_free(hs_shard_t *shard);

/* Shard spec for --shard: "iid", "dirichlet:ALPHA" or "dirichlet:ALPHA,min=M" (min defaults
 * to min(10, N / (2 W)), at least 1). */
const char *hs_shard_spec_help(void);
/* Validate a shard spec without data: 0 or -EINVAL naming the bad part. */
int hs_shard_spec_check(const char *spec);
/* Compute the whole partition of ds for `workers` from (spec, seed) — identical on every rank —
 * and keep only rank's shard in *out. */
int hs_shard_for_rank(const hs_dataset_t *ds, const char *spec, int workers, int rank,
                      uint64_t seed, hs_shard_t *out);
/* Every worker's shard of `spec` (shards: workers entries, each the shard hs_shard_for_rank
 * gives that rank): one pass for a process that holds every rank (the simulator), where N
 * calls of hs_shard_for_rank would each shuffle the whole dataset. Free with hs_shards_free. */
int hs_shard_all(const hs_dataset_t *ds, const char *spec, int workers, uint64_t seed,
                 hs_shard_t *shards);

/* ---- batching ------------------------------------------------------------------------------ */

enum hs_batch_flags {
    HS_BATCH_SHUFFLE = 1,   /* a fresh permutation per epoch from (seed, rank, epoch) */
    HS_BATCH_DROP_LAST = 2, /* drop the last partial batch (else it is returned, smaller) */
};

/*
 * Batch iterator over a shard (or the whole dataset). Each epoch visits every sample of the
 * shard exactly once. With HS_BATCH_SHUFFLE the order of epoch e is a pure function of
 * (seed, rank, e): repeatable, independent of earlier epochs, different across epochs and
 * ranks. Last partial batch: kept (a smaller batch) unless HS_BATCH_DROP_LAST, which drops
 * the n % B samples that come last in that epoch's order (different ones each epoch when
 * shuffled). Without HS_BATCH_SHUFFLE the order is the shard's order (sequential evaluation).
 */
typedef struct hs_batcher {
    const hs_dataset_t *ds;
    int64_t n;            /* samples per epoch (shard size) */
    const int64_t *index; /* (n) shard indices, or NULL for 0..n-1 */
    int64_t *order;       /* (n) this epoch's positions into index */
    int batch;            /* B */
    int flags;
    uint64_t seed;
    int rank;
    int64_t epoch;
    int64_t pos; /* next position in order */
} hs_batcher_t;

/* Start an iterator on shard (NULL: the whole dataset) with batch size B, positioned at the
 * start of epoch 0. The shard must outlive the iterator. -EINVAL when B < 1, or with
 * HS_BATCH_DROP_LAST when the shard has fewer than B samples (no batch at all). */
int hs_batcher_init(hs_batcher_t *b, const hs_dataset_t *ds, const hs_shard_t *shard, int batch,
                    int flags, uint64_t seed, int rank);
/* Sequential evaluation iterator over all of ds, keeping the last partial batch. */
int hs_batcher_init_eval(hs_batcher_t *b, const hs_dataset_t *ds, int batch);
/* Position at the start of epoch `epoch` (>= 0), computing that epoch's order. */
void hs_batcher_start_epoch(hs_batcher_t *b, int64_t epoch);
/* Copy the next batch into x (B, D) and y (B); returns the number of samples written
 * (B, or fewer for a kept last batch), or 0 at the end of the epoch. idx (B), when not NULL,
 * receives the dataset index of each sample. */
int hs_batcher_next(hs_batcher_t *b, float *x, int32_t *y, int64_t *idx);
/* Batches per epoch under the last-batch policy. */
int64_t hs_batcher_batches_per_epoch(const hs_batcher_t *b);
void hs_batcher_free(hs_batcher_t *b);

#ifdef __cplusplus
}
#endif
#endif
