/*
 * data/synthetic.c — seeded synthetic datasets with a known Bayes accuracy:
 * a Gaussian mixture (nearest-mean Bayes classifier) and a random teacher MLP.
 *
 * Random streams (hs_rng_seed(seed, stream)): class means / teacher weights, training set,
 * test set, Monte-Carlo and calibration draws each have their own stream, so changing the
 * size of one set does not change the other.
 */
#include "hearsay/common.h"
#include "hearsay/data.h"
#include "hearsay/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
    STREAM_MODEL = 101,
    STREAM_TRAIN = 102,
    STREAM_TEST = 103,
    STREAM_MC = 104,
    STREAM_CALIB = 105,
    STREAM_NOISE_OFFSET = 1000
};

/* ---- Gaussian mixture -------------------------------------------------------------------- */

void hs_gauss_defaults(hs_gauss_opts_t *o)
{
    o->dim = 784;
    o->classes = 10;
    o->n_train = 20000;
    o->n_test = 2000;
    o->sep = 6.0;
    o->noise = 1.0;
    o->seed = 0;
    o->bayes_samples = 1000000;
}

static double norm_cdf(double x)
{
    return 0.5 * erfc(-x / sqrt(2.0));
}

static double gauss_integrand(double z, double a, int k)
{
    const double phi = exp(-0.5 * z * z) / sqrt(2.0 * M_PI);
    return phi * pow(norm_cdf(z + a), k - 1);
}

double hs_gauss_bayes_orthogonal(int classes, double sep, double noise)
{
    if (classes < 2 || !(sep >= 0) || !(noise > 0)) return NAN;
    const double a = sep / (sqrt(2.0) * noise);
    if (classes == 2) return norm_cdf(sep / (2.0 * noise));
    /* Composite Simpson on [-12, 12]: phi is below 1e-31 outside, the integrand is smooth. */
    const int panels = 24000; /* even */
    const double lo = -12.0, hi = 12.0, h = (hi - lo) / panels;
    double s = gauss_integrand(lo, a, classes) + gauss_integrand(hi, a, classes);
    for (int i = 1; i < panels; i++)
        s += (i & 1 ? 4.0 : 2.0) * gauss_integrand(lo + i * h, a, classes);
    return s * h / 3.0;
}

int hs_gauss_nearest_mean(const float *means, int classes, int dim, const float *x)
{
    int best = 0;
    double best_d = INFINITY;
    for (int k = 0; k < classes; k++) {
        const float *m = means + (size_t)k * dim;
        double d = 0;
        for (int j = 0; j < dim; j++) {
            double t = (double)x[j] - m[j];
            d += t * t;
        }
        if (d < best_d) {
            best_d = d;
            best = k;
        }
    }
    return best;
}

/* Modified Gram-Schmidt on the rows of v (rows, dim), in place, done twice for stability.
 * Rows whose remaining norm is below tol * their original norm are dropped; returns the
 * number of orthonormal rows kept (packed at the front). */
static int orthonormalize(double *v, int rows, int dim, double tol)
{
    int r = 0;
    for (int i = 0; i < rows; i++) {
        double *vi = v + (size_t)i * dim;
        double n0 = 0;
        for (int j = 0; j < dim; j++) n0 += vi[j] * vi[j];
        n0 = sqrt(n0);
        for (int pass = 0; pass < 2; pass++)
            for (int q = 0; q < r; q++) {
                const double *bq = v + (size_t)q * dim;
                double dot = 0;
                for (int j = 0; j < dim; j++) dot += vi[j] * bq[j];
                for (int j = 0; j < dim; j++) vi[j] -= dot * bq[j];
            }
        double n1 = 0;
        for (int j = 0; j < dim; j++) n1 += vi[j] * vi[j];
        n1 = sqrt(n1);
        if (!(n1 > tol * n0) || n1 == 0) continue;
        double *dst = v + (size_t)r * dim;
        for (int j = 0; j < dim; j++) dst[j] = vi[j] / n1;
        r++;
    }
    return r;
}

double hs_gauss_bayes_mc(const float *means, int classes, int dim, double noise, int64_t samples,
                         uint64_t seed)
{
    if (classes < 2 || dim < 1 || !(noise > 0) || samples < 1) {
        HS_ERR(-EINVAL,
               "gauss Bayes estimate: bad arguments (classes %d, dim %d, noise %g, "
               "samples %lld)",
               classes, dim, noise, (long long)samples);
        return -1;
    }
    const int rows = classes - 1;
    double *basis = hs_malloc((size_t)rows * dim * sizeof(double), "Bayes basis");
    double *coord = hs_calloc((size_t)classes * rows, sizeof(double), "Bayes coordinates");
    double *z = hs_malloc((size_t)(rows > 0 ? rows : 1) * sizeof(double), "Bayes sample");
    double acc = -1;
    if (!basis || !coord || !z) goto done;
    /* Differences mu_k - mu_0 span the only directions where noise can change the winner. */
    for (int k = 1; k < classes; k++)
        for (int j = 0; j < dim; j++)
            basis[(size_t)(k - 1) * dim + j] =
                (double)means[(size_t)k * dim + j] - (double)means[j];
    int r = orthonormalize(basis, rows, dim, 1e-9);
    for (int k = 1; k < classes; k++) // (K, r) coordinates of mu_k - mu_0; row 0 stays 0
        for (int q = 0; q < r; q++) {
            double dot = 0;
            for (int j = 0; j < dim; j++)
                dot += ((double)means[(size_t)k * dim + j] - means[j]) * basis[(size_t)q * dim + j];
            coord[(size_t)k * rows + q] = dot;
        }
    hs_rng_t rng;
    hs_rng_seed(&rng, seed, STREAM_MC);
    int64_t correct = 0;
    for (int64_t s = 0; s < samples; s++) {
        int c = (int)hs_rng_below(&rng, (uint64_t)classes);
        for (int q = 0; q < r; q++)
            z[q] = coord[(size_t)c * rows + q] + noise * hs_rng_normal(&rng);
        int best = 0;
        double best_d = INFINITY;
        for (int k = 0; k < classes; k++) {
            double d = 0;
            for (int q = 0; q < r; q++) {
                double t = z[q] - coord[(size_t)k * rows + q];
                d += t * t;
            }
            if (d < best_d) {
                best_d = d;
                best = k;
            }
        }
        correct += (best == c);
    }
    acc = (double)correct / (double)samples;
done:
    free(basis);
    free(coord);
    free(z);
    return acc;
}

/* Class means (K, D): orthonormal directions scaled by sep/sqrt(2) when K <= D, else i.i.d.
 * Gaussian points rescaled to an average pairwise distance of sep. */
static int gauss_means(const hs_gauss_opts_t *o, float *means)
{
    const int K = o->classes, D = o->dim;
    double *v = hs_malloc((size_t)K * D * sizeof(double), "gauss means");
    if (!v) return -ENOMEM;
    hs_rng_t rng;
    hs_rng_seed(&rng, o->seed, STREAM_MODEL);
    if (K <= D) {
        int r = 0;
        /* Gaussian vectors are independent with probability 1; redraw in the null event. */
        for (int attempt = 0; attempt < 8 && r < K; attempt++) {
            for (size_t i = 0; i < (size_t)K * D; i++) v[i] = hs_rng_normal(&rng);
            r = orthonormalize(v, K, D, 1e-6);
        }
        if (r < K) {
            free(v);
            return HS_ERR(-EIO, "gauss: could not draw %d independent mean directions", K);
        }
        const double scale = o->sep / sqrt(2.0);
        for (size_t i = 0; i < (size_t)K * D; i++) means[i] = (float)(scale * v[i]);
    } else {
        for (size_t i = 0; i < (size_t)K * D; i++) v[i] = hs_rng_normal(&rng);
        double total = 0;
        for (int a = 0; a < K; a++)
            for (int b = a + 1; b < K; b++) {
                double d = 0;
                for (int j = 0; j < D; j++) {
                    double t = v[(size_t)a * D + j] - v[(size_t)b * D + j];
                    d += t * t;
                }
                total += sqrt(d);
            }
        const double avg = total / (0.5 * K * (K - 1));
        const double scale = avg > 0 ? o->sep / avg : 0.0;
        for (size_t i = 0; i < (size_t)K * D; i++) means[i] = (float)(scale * v[i]);
    }
    free(v);
    return 0;
}

static void gauss_fill(const hs_gauss_opts_t *o, const float *means, uint64_t stream,
                       hs_dataset_t *ds)
{
    hs_rng_t rng;
    hs_rng_seed(&rng, o->seed, stream);
    const int D = o->dim;
    for (int64_t i = 0; i < ds->n; i++) {
        int c = (int)hs_rng_below(&rng, (uint64_t)o->classes);
        ds->y[i] = c;
        float *xi = ds->x + i * D; // (D)
        const float *m = means + (size_t)c * D;
        for (int j = 0; j < D; j++) xi[j] = m[j] + (float)(o->noise * hs_rng_normal(&rng));
    }
}

int hs_data_gauss(const hs_gauss_opts_t *o, hs_dataset_t *train, hs_dataset_t *test,
                  float *means_out)
{
    memset(train, 0, sizeof(*train));
    memset(test, 0, sizeof(*test));
    if (o->dim < 1 || o->classes < 2 || o->n_train < 1 || o->n_test < 1)
        return HS_ERR(-EINVAL,
                      "gauss: need dim >= 1, classes >= 2, train >= 1, test >= 1 "
                      "(got dim %d, classes %d, train %lld, test %lld)",
                      o->dim, o->classes, (long long)o->n_train, (long long)o->n_test);
    if (!(o->sep > 0) || !isfinite(o->sep) || !(o->noise > 0) || !isfinite(o->noise))
        return HS_ERR(-EINVAL,
                      "gauss: sep and noise must be finite and > 0 (got sep %g, "
                      "noise %g)",
                      o->sep, o->noise);
    if (o->classes > o->dim && o->bayes_samples < 1)
        return HS_ERR(-EINVAL,
                      "gauss: %d classes in %d dimensions need Monte-Carlo samples "
                      "(mc >= 1)",
                      o->classes, o->dim);
    int rc = 0;
    float *means = hs_malloc((size_t)o->classes * o->dim * sizeof(float), "gauss means");
    if (!means) return -ENOMEM;
    if ((rc = gauss_means(o, means)) < 0) goto fail;
    double bayes;
    if (o->classes <= o->dim) {
        bayes = hs_gauss_bayes_orthogonal(o->classes, o->sep, o->noise);
    } else {
        bayes = hs_gauss_bayes_mc(means, o->classes, o->dim, o->noise, o->bayes_samples, o->seed);
        if (bayes < 0) {
            rc = -ENOMEM;
            goto fail;
        }
    }
    if ((rc = hs_dataset_alloc(train, "gauss-train", o->n_train, 1, 1, o->dim, o->classes)) < 0)
        goto fail;
    if ((rc = hs_dataset_alloc(test, "gauss-test", o->n_test, 1, 1, o->dim, o->classes)) < 0)
        goto fail;
    gauss_fill(o, means, STREAM_TRAIN, train);
    gauss_fill(o, means, STREAM_TEST, test);
    train->bayes_acc = bayes;
    test->bayes_acc = bayes;
    if (means_out) memcpy(means_out, means, (size_t)o->classes * o->dim * sizeof(float));
    free(means);
    return 0;
fail:
    free(means);
    hs_dataset_free(train);
    hs_dataset_free(test);
    return rc;
}

/* ---- teacher network --------------------------------------------------------------------- */

void hs_teacher_defaults(hs_teacher_opts_t *o)
{
    o->dim = 784;
    o->hidden = 64;
    o->classes = 10;
    o->n_train = 20000;
    o->n_test = 2000;
    o->label_noise = 0.0;
    o->seed = 0;
}

typedef struct teacher {
    int D, H, K;
    double *w1; // (H, D)
    double *w2; // (K, H)
    double *b2; // (K)
    double *h;  // (H) scratch
} teacher_t;

/* logits (K) of input x (D). */
static void teacher_logits(teacher_t *t, const float *x, double *logits)
{
    for (int u = 0; u < t->H; u++) {
        const double *w = t->w1 + (size_t)u * t->D;
        double s0 = 0, s1 = 0, s2 = 0, s3 = 0; /* four chains: the loop is latency-bound */
        int j = 0;
        for (; j + 4 <= t->D; j += 4) {
            s0 += w[j] * x[j];
            s1 += w[j + 1] * x[j + 1];
            s2 += w[j + 2] * x[j + 2];
            s3 += w[j + 3] * x[j + 3];
        }
        for (; j < t->D; j++) s0 += w[j] * x[j];
        t->h[u] = tanh((s0 + s1) + (s2 + s3));
    }
    for (int k = 0; k < t->K; k++) {
        const double *w = t->w2 + (size_t)k * t->H;
        double s = t->b2[k];
        for (int u = 0; u < t->H; u++) s += w[u] * t->h[u];
        logits[k] = s;
    }
}

static int argmax(const double *v, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

/* Inputs and label noise use separate streams, so the inputs do not depend on the noise. */
static void teacher_fill(const hs_teacher_opts_t *o, teacher_t *t, double *logits, uint64_t stream,
                         hs_dataset_t *ds)
{
    hs_rng_t rng, flip;
    hs_rng_seed(&rng, o->seed, stream);
    hs_rng_seed(&flip, o->seed, stream + STREAM_NOISE_OFFSET);
    for (int64_t i = 0; i < ds->n; i++) {
        float *xi = ds->x + i * ds->dim; // (D)
        for (int j = 0; j < o->dim; j++) xi[j] = (float)hs_rng_normal(&rng);
        teacher_logits(t, xi, logits);
        int y = argmax(logits, o->classes);
        double u = hs_rng_uniform(&flip);
        int shift = 1 + (int)hs_rng_below(&flip, (uint64_t)o->classes - 1);
        if (u < o->label_noise) y = (y + shift) % o->classes;
        ds->y[i] = y;
    }
}

int hs_data_teacher(const hs_teacher_opts_t *o, hs_dataset_t *train, hs_dataset_t *test)
{
    memset(train, 0, sizeof(*train));
    memset(test, 0, sizeof(*test));
    if (o->dim < 1 || o->hidden < 1 || o->classes < 2 || o->n_train < 1 || o->n_test < 1)
        return HS_ERR(-EINVAL,
                      "teacher: need dim, hidden, train, test >= 1 and classes >= 2 "
                      "(got dim %d, hidden %d, classes %d, train %lld, test %lld)",
                      o->dim, o->hidden, o->classes, (long long)o->n_train, (long long)o->n_test);
    const double max_noise = (double)(o->classes - 1) / o->classes;
    if (!(o->label_noise >= 0) || !(o->label_noise < max_noise))
        return HS_ERR(-EINVAL, "teacher: label noise %g must be in [0, %g) for %d classes",
                      o->label_noise, max_noise, o->classes);
    teacher_t t = {.D = o->dim, .H = o->hidden, .K = o->classes};
    int rc = -ENOMEM;
    const int calib = 4096;
    t.w1 = hs_malloc((size_t)t.H * t.D * sizeof(double), "teacher weights");
    t.w2 = hs_malloc((size_t)t.K * t.H * sizeof(double), "teacher weights");
    t.b2 = hs_calloc((size_t)t.K, sizeof(double), "teacher biases");
    t.h = hs_malloc((size_t)t.H * sizeof(double), "teacher hidden");
    double *logits = hs_malloc((size_t)t.K * sizeof(double), "teacher logits");
    double *mean = hs_calloc((size_t)t.K, sizeof(double), "teacher logits");
    float *x = hs_malloc((size_t)t.D * sizeof(float), "teacher input");
    if (!t.w1 || !t.w2 || !t.b2 || !t.h || !logits || !mean || !x) goto done;

    hs_rng_t rng;
    hs_rng_seed(&rng, o->seed, STREAM_MODEL);
    const double s1 = 1.0 / sqrt((double)t.D), s2 = 1.0 / sqrt((double)t.H);
    for (size_t i = 0; i < (size_t)t.H * t.D; i++) t.w1[i] = s1 * hs_rng_normal(&rng);
    for (size_t i = 0; i < (size_t)t.K * t.H; i++) t.w2[i] = s2 * hs_rng_normal(&rng);
    /* Centre each logit over a calibration sample so no class dominates. */
    hs_rng_seed(&rng, o->seed, STREAM_CALIB);
    for (int s = 0; s < calib; s++) {
        for (int j = 0; j < t.D; j++) x[j] = (float)hs_rng_normal(&rng);
        teacher_logits(&t, x, logits);
        for (int k = 0; k < t.K; k++) mean[k] += logits[k] / calib;
    }
    for (int k = 0; k < t.K; k++) t.b2[k] = -mean[k];

    if ((rc = hs_dataset_alloc(train, "teacher-train", o->n_train, 1, 1, o->dim, o->classes)) < 0)
        goto done;
    if ((rc = hs_dataset_alloc(test, "teacher-test", o->n_test, 1, 1, o->dim, o->classes)) < 0)
        goto done;
    teacher_fill(o, &t, logits, STREAM_TRAIN, train);
    teacher_fill(o, &t, logits, STREAM_TEST, test);
    train->bayes_acc = test->bayes_acc = 1.0 - o->label_noise;
    rc = 0;
done:
    free(t.w1);
    free(t.w2);
    free(t.b2);
    free(t.h);
    free(logits);
    free(mean);
    free(x);
    if (rc < 0) {
        hs_dataset_free(train);
        hs_dataset_free(test);
    }
    return rc;
}
