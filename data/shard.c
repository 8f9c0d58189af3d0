/*
 * data/shard.c — per-worker shards: IID (seeded permutation, near-equal parts) and non-IID
 * label skew (per-class Dirichlet proportions over workers). A shard is a sorted list of
 * indices into the dataset; the partition depends only on (labels, W, alpha, min, seed), so
 * every rank computes the same one without talking.
 */
#include "hearsay/common.h"
#include "hearsay/data.h"
#include "hearsay/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { STREAM_IID = 201, STREAM_DIRICHLET = 202 };

static void shuffle_i64(hs_rng_t *r, int64_t *a, int64_t n)
{
    for (int64_t i = n; i > 1; i--) {
        int64_t j = (int64_t)hs_rng_below(r, (uint64_t)i);
        int64_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

void hs_shard_free(hs_shard_t *shard)
{
    if (!shard) return;
    HS_FREE(shard->idx);
    shard->n = 0;
}

void hs_shards_free(hs_shard_t *shards, int workers)
{
    if (!shards) return;
    for (int w = 0; w < workers; w++) hs_shard_free(&shards[w]);
}

/* Allocate every shard's index list from its size; on failure free them all. */
static int shards_alloc(hs_shard_t *shards, int workers, const int64_t *sizes)
{
    for (int w = 0; w < workers; w++) {
        shards[w].n = sizes[w];
        shards[w].idx =
            hs_malloc((size_t)(sizes[w] > 0 ? sizes[w] : 1) * sizeof(int64_t), "shard indices");
        if (!shards[w].idx) {
            hs_shards_free(shards, workers);
            return -ENOMEM;
        }
    }
    return 0;
}

int hs_shard_iid(int64_t n, int workers, uint64_t seed, hs_shard_t *shards)
{
    if (workers < 1 || n < workers)
        return HS_ERR(-EINVAL, "iid shards: cannot split %lld samples over %d workers",
                      (long long)n, workers);
    for (int w = 0; w < workers; w++) shards[w] = (hs_shard_t){0};
    int64_t *perm = hs_malloc((size_t)n * sizeof(int64_t), "shard permutation");
    int64_t *sizes = hs_malloc((size_t)workers * sizeof(int64_t), "shard sizes");
    int rc = -ENOMEM;
    if (!perm || !sizes) goto done;
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    hs_rng_t rng;
    hs_rng_seed(&rng, seed, STREAM_IID);
    shuffle_i64(&rng, perm, n);
    /* Worker w takes positions [w n / W, (w + 1) n / W): sizes differ by at most one. */
    for (int w = 0; w < workers; w++)
        sizes[w] = (int64_t)(w + 1) * n / workers - (int64_t)w * n / workers;
    if ((rc = shards_alloc(shards, workers, sizes)) < 0) goto done;
    for (int w = 0; w < workers; w++) {
        memcpy(shards[w].idx, perm + (int64_t)w * n / workers, (size_t)sizes[w] * sizeof(int64_t));
        qsort(shards[w].idx, (size_t)sizes[w], sizeof(int64_t), cmp_i64);
    }
    rc = 0;
done:
    free(perm);
    free(sizes);
    return rc;
}

/* Rank `rank`'s part of hs_shard_iid only: the same permutation, one slice sorted (a
 * simulator holding N ranks calls this N times: sorting every shard each time was
 * O(N n log n) in all). */
static int shard_iid_one(int64_t n, int workers, int rank, uint64_t seed, hs_shard_t *out)
{
    if (workers < 1 || n < workers)
        return HS_ERR(-EINVAL, "iid shards: cannot split %lld samples over %d workers",
                      (long long)n, workers);
    int64_t *perm = hs_malloc((size_t)n * sizeof(int64_t), "shard permutation");
    if (!perm) return -ENOMEM;
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    hs_rng_t rng;
    hs_rng_seed(&rng, seed, STREAM_IID);
    shuffle_i64(&rng, perm, n);
    int64_t lo = (int64_t)rank * n / workers, size = (int64_t)(rank + 1) * n / workers - lo;
    int rc = shards_alloc(out, 1, &size);
    if (rc == 0) {
        memcpy(out->idx, perm + lo, (size_t)size * sizeof(int64_t));
        qsort(out->idx, (size_t)size, sizeof(int64_t), cmp_i64);
    }
    free(perm);
    return rc;
}

int hs_shard_dirichlet(const int32_t *labels, int64_t n, int classes, int workers, double alpha,
                       int64_t min_per_worker, uint64_t seed, hs_shard_t *shards)
{
    if (workers < 1 || classes < 1 || n < 1)
        return HS_ERR(-EINVAL,
                      "dirichlet shards: bad sizes (%lld samples, %d classes, %d "
                      "workers)",
                      (long long)n, classes, workers);
    if (!(alpha > 0)) return HS_ERR(-EINVAL, "dirichlet shards: alpha must be > 0 (got %g)", alpha);
    if (min_per_worker < 0 || (min_per_worker > 0 && n / workers < min_per_worker))
        return HS_ERR(-EINVAL,
                      "dirichlet shards: %lld samples cannot give each of %d workers at least "
                      "%lld",
                      (long long)n, workers, (long long)min_per_worker);
    for (int w = 0; w < workers; w++) shards[w] = (hs_shard_t){0};
    for (int64_t i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= classes)
            return HS_ERR(-EINVAL, "dirichlet shards: sample %lld has label %d, outside [0, %d)",
                          (long long)i, (int)labels[i], classes);

    const size_t KW = (size_t)classes * workers;
    int64_t *count = hs_calloc(KW, sizeof(int64_t), "dirichlet counts");                // (K, W)
    int64_t *total = hs_calloc((size_t)workers, sizeof(int64_t), "dirichlet sizes");    // (W)
    int64_t *cstart = hs_calloc((size_t)classes + 1, sizeof(int64_t), "class offsets"); // (K+1)
    int64_t *byclass = hs_malloc((size_t)n * sizeof(int64_t), "class lists");           // (N)
    double *p = hs_malloc((size_t)workers * sizeof(double), "dirichlet proportions");   // (W)
    int64_t *fill = hs_calloc((size_t)workers, sizeof(int64_t), "shard fill");          // (W)
    int rc = -ENOMEM;
    if (!count || !total || !cstart || !byclass || !p || !fill) goto done;

    /* Samples grouped by class (ascending index), then each class shuffled. */
    for (int64_t i = 0; i < n; i++) cstart[labels[i] + 1]++;
    for (int k = 0; k < classes; k++) cstart[k + 1] += cstart[k];
    {
        int64_t *cursor = hs_calloc((size_t)classes, sizeof(int64_t), "class cursor");
        if (!cursor) goto done;
        for (int64_t i = 0; i < n; i++) {
            int k = labels[i];
            byclass[cstart[k] + cursor[k]++] = i;
        }
        free(cursor);
    }
    hs_rng_t rng;
    hs_rng_seed(&rng, seed, STREAM_DIRICHLET);
    for (int k = 0; k < classes; k++) {
        const int64_t nk = cstart[k + 1] - cstart[k];
        shuffle_i64(&rng, byclass + cstart[k], nk);
        /* Proportions ~ Dir(alpha) by normalised Gamma(alpha) draws; alpha = inf is uniform. */
        double sum = 0;
        for (int w = 0; w < workers; w++) {
            p[w] = isinf(alpha) ? 1.0 : hs_rng_gamma(&rng, alpha);
            sum += p[w];
        }
        if (!(sum > 0) || !isfinite(sum)) {
            /* Every draw underflowed (tiny alpha): the alpha -> 0 limit, one worker. */
            int w0 = (int)hs_rng_below(&rng, (uint64_t)workers);
            for (int w = 0; w < workers; w++) p[w] = (w == w0);
            sum = 1;
        }
        /* Cumulative rounding: counts add up to nk exactly. */
        double cum = 0;
        int64_t prev = 0;
        for (int w = 0; w < workers; w++) {
            cum += p[w] / sum;
            int64_t cut = w == workers - 1 ? nk : (int64_t)floor(cum * (double)nk + 0.5);
            if (cut > nk) cut = nk;
            if (cut < prev) cut = prev;
            count[(size_t)k * workers + w] = cut - prev;
            total[w] += cut - prev;
            prev = cut;
        }
    }
    /* Every worker gets at least min_per_worker: move samples one at a time from the largest
     * shard (its most abundant class). n >= W * min guarantees a donor above the minimum. */
    for (int w = 0; w < workers; w++) {
        while (total[w] < min_per_worker) {
            int d = -1;
            for (int v = 0; v < workers; v++)
                if (v != w && (d < 0 || total[v] > total[d])) d = v;
            if (d < 0 || total[d] <= min_per_worker) {
                rc = HS_ERR(-EINVAL, "dirichlet shards: cannot give worker %d %lld samples", w,
                            (long long)min_per_worker);
                goto done;
            }
            int c = 0;
            for (int k = 1; k < classes; k++)
                if (count[(size_t)k * workers + d] > count[(size_t)c * workers + d]) c = k;
            count[(size_t)c * workers + d]--;
            count[(size_t)c * workers + w]++;
            total[d]--;
            total[w]++;
        }
    }
    if ((rc = shards_alloc(shards, workers, total)) < 0) goto done;
    for (int k = 0; k < classes; k++) {
        int64_t at = cstart[k];
        for (int w = 0; w < workers; w++) {
            const int64_t c = count[(size_t)k * workers + w];
            memcpy(shards[w].idx + fill[w], byclass + at, (size_t)c * sizeof(int64_t));
            fill[w] += c;
            at += c;
        }
    }
    for (int w = 0; w < workers; w++)
        qsort(shards[w].idx, (size_t)shards[w].n, sizeof(int64_t), cmp_i64);
    rc = 0;
done:
    free(count);
    free(total);
    free(cstart);
    free(byclass);
    free(p);
    free(fill);
    return rc;
}

/* ---- the --shard spec ---------------------------------------------------------------------- */

const char *hs_shard_spec_help(void)
{
    return "shard spec (how the training set is split over workers):\n"
           "  iid                      a seeded random split into near-equal parts\n"
           "  dirichlet:ALPHA[,min=M]  label skew: per class, proportions over workers ~\n"
           "                           Dirichlet(ALPHA) (0.1 = strongly skewed, 100 = near\n"
           "                           IID, inf = equal proportions); every worker gets at\n"
           "                           least M samples (default min(10, N/(2W)), at least 1)";
}

typedef struct shard_spec {
    int dirichlet;
    double alpha;
    int64_t min; /* -1: default */
} shard_spec_t;

static int shard_spec_parse(const char *spec, shard_spec_t *out)
{
    out->dirichlet = 0;
    out->alpha = 0;
    out->min = -1;
    if (!spec || strcmp(spec, "iid") == 0) return 0;
    if (strncmp(spec, "dirichlet:", 10) != 0)
        return HS_ERR(-EINVAL, "shard spec '%s': unknown kind (expected iid or dirichlet:ALPHA)",
                      spec);
    char buf[256];
    if (strlen(spec + 10) >= sizeof(buf)) return HS_ERR(-EINVAL, "shard spec '%s': too long", spec);
    snprintf(buf, sizeof(buf), "%s", spec + 10);
    char *comma = strchr(buf, ',');
    if (comma) *comma = '\0';
    out->dirichlet = 1;
    if (strcmp(buf, "inf") == 0) {
        out->alpha = INFINITY;
    } else {
        int rc = hs_parse_double(buf, 1e-6, 1e12, "dirichlet alpha (shard spec)", &out->alpha);
        if (rc < 0) return rc;
        if (!(out->alpha > 0)) return HS_ERR(-EINVAL, "shard spec '%s': alpha must be > 0", spec);
    }
    if (comma) {
        const char *opt = comma + 1;
        if (strncmp(opt, "min=", 4) != 0)
            return HS_ERR(-EINVAL, "shard spec '%s': unknown option '%s' (expected min=M)", spec,
                          opt);
        long m;
        HS_TRY(hs_parse_long(opt + 4, 0, 1L << 40, "min= (shard spec)", &m));
        out->min = m;
    }
    return 0;
}

int hs_shard_spec_check(const char *spec)
{
    shard_spec_t s;
    return shard_spec_parse(spec, &s);
}

int hs_shard_for_rank(const hs_dataset_t *ds, const char *spec, int workers, int rank,
                      uint64_t seed, hs_shard_t *out)
{
    *out = (hs_shard_t){0};
    shard_spec_t s;
    HS_TRY(shard_spec_parse(spec, &s));
    if (workers < 1 || rank < 0 || rank >= workers)
        return HS_ERR(-EINVAL, "shard: rank %d out of range for %d workers", rank, workers);
    int rc;
    if (!s.dirichlet) {
        rc = shard_iid_one(ds->n, workers, rank, seed, out);
        if (rc < 0) hs_error_prefix("sharding %s over %d workers", ds->name, workers);
        return rc;
    }
    hs_shard_t *all = hs_calloc((size_t)workers, sizeof(hs_shard_t), "shards");
    if (!all) return -ENOMEM;
    rc = hs_shard_all(ds, spec, workers, seed, all);
    if (rc == 0) {
        *out = all[rank];
        all[rank] = (hs_shard_t){0};
        hs_shards_free(all, workers);
    }
    free(all);
    return rc;
}

int hs_shard_all(const hs_dataset_t *ds, const char *spec, int workers, uint64_t seed,
                 hs_shard_t *all)
{
    shard_spec_t s;
    HS_TRY(shard_spec_parse(spec, &s));
    if (workers < 1) return HS_ERR(-EINVAL, "shard: %d workers", workers);
    int rc;
    if (s.dirichlet) {
        int64_t min = s.min;
        if (min < 0) {
            min = HS_MIN((int64_t)10, ds->n / (2 * (int64_t)workers));
            if (min < 1) min = 1;
        }
        rc = hs_shard_dirichlet(ds->y, ds->n, ds->classes, workers, s.alpha, min, seed, all);
    } else {
        rc = hs_shard_iid(ds->n, workers, seed, all);
    }
    if (rc < 0) {
        hs_shards_free(all, workers);
        hs_error_prefix("sharding %s over %d workers", ds->name, workers);
    }
    return rc;
}
