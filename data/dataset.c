/* data/dataset.c — the dataset container: allocation, label checks, per-channel statistics. */
#include "hearsay/common.h"
#include "hearsay/data.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hs_dataset_alloc(hs_dataset_t *ds, const char *name, int64_t n, int c, int h, int w,
                     int classes)
{
    memset(ds, 0, sizeof(*ds));
    ds->bayes_acc = NAN;
    if (n < 1 || c < 1 || h < 1 || w < 1 || classes < 1)
        return HS_ERR(-EINVAL,
                      "dataset %s: bad shape: %lld samples of %dx%dx%d with %d classes (all "
                      "must be >= 1)",
                      name ? name : "?", (long long)n, c, h, w, classes);
    int64_t dim = (int64_t)c * h * w;
    if (dim > (int64_t)1 << 30 || n > ((int64_t)1 << 40) / dim)
        return HS_ERR(-EINVAL, "dataset %s: %lld samples of %lld features is too large",
                      name ? name : "?", (long long)n, (long long)dim);
    snprintf(ds->name, sizeof(ds->name), "%s", name ? name : "");
    ds->x = hs_malloc((size_t)n * (size_t)dim * sizeof(float), "dataset features");
    ds->y = hs_calloc((size_t)n, sizeof(int32_t), "dataset labels");
    if (!ds->x || !ds->y) {
        hs_dataset_free(ds);
        return -ENOMEM;
    }
    ds->n = n;
    ds->c = c;
    ds->h = h;
    ds->w = w;
    ds->dim = dim;
    ds->classes = classes;
    return 0;
}

void hs_dataset_free(hs_dataset_t *ds)
{
    if (!ds) return;
    free(ds->x);
    free(ds->y);
    memset(ds, 0, sizeof(*ds));
    ds->bayes_acc = NAN;
}

int hs_dataset_truncate(hs_dataset_t *ds, int64_t n)
{
    if (n < 1 || n > ds->n)
        return HS_ERR(-EINVAL, "dataset %s: cannot keep %lld samples: it has %lld", ds->name,
                      (long long)n, (long long)ds->n);
    ds->n = n;
    return 0;
}

int hs_dataset_check_labels(const hs_dataset_t *ds)
{
    for (int64_t i = 0; i < ds->n; i++)
        if (ds->y[i] < 0 || ds->y[i] >= ds->classes)
            return HS_ERR(-EINVAL, "dataset %s: sample %lld has label %d, outside [0, %d)",
                          ds->name, (long long)i, (int)ds->y[i], ds->classes);
    return 0;
}

void hs_dataset_class_counts(const hs_dataset_t *ds, int64_t *counts)
{
    for (int k = 0; k < ds->classes; k++) counts[k] = 0;
    for (int64_t i = 0; i < ds->n; i++)
        if (ds->y[i] >= 0 && ds->y[i] < ds->classes) counts[ds->y[i]]++;
}

int hs_dataset_standardize(hs_dataset_t *ds, const double *mean, const double *std)
{
    for (int ch = 0; ch < ds->c; ch++)
        if (!(std[ch] > 0) || !isfinite(mean[ch]))
            return HS_ERR(-EINVAL, "dataset %s: channel %d: bad statistics mean %g std %g",
                          ds->name, ch, mean[ch], std[ch]);
    const int64_t plane = (int64_t)ds->h * ds->w;
    for (int64_t i = 0; i < ds->n; i++) {
        float *xi = ds->x + i * ds->dim; // (C, H, W) one sample
        for (int ch = 0; ch < ds->c; ch++) {
            const float m = (float)mean[ch], inv = (float)(1.0 / std[ch]);
            float *p = xi + ch * plane;
            for (int64_t j = 0; j < plane; j++) p[j] = (p[j] - m) * inv;
        }
    }
    return 0;
}

void hs_dataset_channel_stats(const hs_dataset_t *ds, double *mean, double *std)
{
    const int64_t plane = (int64_t)ds->h * ds->w;
    for (int ch = 0; ch < ds->c; ch++) {
        double s = 0, s2 = 0;
        for (int64_t i = 0; i < ds->n; i++) {
            const float *p = ds->x + i * ds->dim + ch * plane;
            double ps = 0, ps2 = 0; /* per-sample partial sums keep the rounding small */
            for (int64_t j = 0; j < plane; j++) {
                ps += p[j];
                ps2 += (double)p[j] * p[j];
            }
            s += ps;
            s2 += ps2;
        }
        double cnt = (double)ds->n * (double)plane;
        double m = cnt > 0 ? s / cnt : 0.0;
        double var = cnt > 0 ? s2 / cnt - m * m : 0.0;
        mean[ch] = m;
        std[ch] = sqrt(var > 0 ? var : 0.0);
    }
}
