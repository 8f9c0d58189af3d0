/* bench/bench_util.h — small helpers shared by the benchmarks: medians, the BLAS environment. */
#ifndef HEARSAY_BENCH_UTIL_H
#define HEARSAY_BENCH_UTIL_H

#include <stddef.h>

/* Median of n values (sorts `v` in place); NAN when n == 0. */
double hs_bench_median(double *v, size_t n);
/* OPENBLAS_CORETYPE from the environment, or "auto" when unset or empty. */
const char *hs_bench_coretype_env(void);
/* The kernel core OpenBLAS actually selected ("Haswell", "SkylakeX", ...). */
const char *hs_bench_blas_core(void);

#endif
