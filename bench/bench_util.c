/* bench/bench_util.c — medians and the BLAS environment for benchmark reports. */
#include "bench/bench_util.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double hs_bench_median(double *v, size_t n)
{
    if (n == 0) return NAN;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

const char *hs_bench_coretype_env(void)
{
    const char *c = getenv("OPENBLAS_CORETYPE");
    return c && *c ? c : "auto";
}

const char *hs_bench_blas_core(void)
{
    const char *c = openblas_get_corename();
    return c ? c : "unknown";
}
