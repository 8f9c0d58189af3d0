/*
 * kernels/cpu/cpu_internal.h — private to the CPU backend: the slots implemented in
 * cpu_conv.c (convolution, pooling) that cpu_ops.c puts in the ops table, and the loop
 * helper that keeps elementwise kernels vectorized at -O2.
 */
#ifndef HEARSAY_KERNELS_CPU_INTERNAL_H
#define HEARSAY_KERNELS_CPU_INTERNAL_H

#include "hearsay/kernels.h"

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define HS_KCPU_HIDDEN __attribute__((visibility("hidden")))
#else
#define HS_KCPU_HIDDEN
#endif

/* Hot elementwise loops are compiled three times, for AVX-512, AVX2 and the baseline (SSE2), and
 * the loader picks one per machine (GCC ifunc): a one-pass loop over a few MB runs ~1.4x faster
 * with 256-bit vectors than with SSE2, and batch norm's backward sums ~2x faster again with the
 * AVX-512 clone (ResNet-20's one-thread step on an AVX-512 EPYC: 245-249 -> 235-239 ms, 2026-11-29;
 * the reductions then sum in other lanes, so models with batch norm end in other last bits there).
 * ("arch=haswell" would not do: it tests the CPU model, so a Skylake or later server would get
 * the baseline; x86-64-v3 is AVX2 + FMA, x86-64-v4 adds AVX-512 F/BW/CD/DQ/VL, both known to
 * GCC 12 and later.) */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#if __GNUC__ >= 12
#define HS_KCPU_SIMD __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define HS_KCPU_SIMD __attribute__((target_clones("avx2", "default")))
#endif
#else
#define HS_KCPU_SIMD
#endif

/* Runs the statement(s) `...` for `i` in [0, n): blocks of 16 in a fixed-count inner loop
 * (which GCC's -O2 "very cheap" cost model vectorizes, unlike a loop of unknown count), then
 * the tail. The body must only touch index i of each array. */
#define HS_KCPU_FOR(i, n, ...)                                                                     \
    do {                                                                                           \
        size_t hs_n_ = (n), hs_b_ = 0;                                                             \
        for (; hs_b_ + 16 <= hs_n_; hs_b_ += 16)                                                   \
            for (size_t i = hs_b_; i < hs_b_ + 16; i++) {                                          \
                __VA_ARGS__;                                                                       \
            }                                                                                      \
        for (size_t i = hs_b_; i < hs_n_; i++) {                                                   \
            __VA_ARGS__;                                                                           \
        }                                                                                          \
    } while (0)

/* The CPU backend's ops table (the emulated device, kernels/emu.c, wraps its slots). */
HS_KCPU_HIDDEN const hs_kernel_ops_t *hs_kcpu_ops(void);

/* ---- worker threads (cpu_pool.c) ---- */

typedef struct hs_kcpu_pool hs_kcpu_pool_t;
/* One share of a parallel task: share t of T (t = 0 runs on the caller). */
typedef void (*hs_kcpu_task_fn)(void *arg, int t, int T);

/* threads - 1 workers; *out = NULL (no pool, nothing to free) when threads <= 1. */
HS_KCPU_HIDDEN int hs_kcpu_pool_create(hs_kcpu_pool_t **out, int threads);
HS_KCPU_HIDDEN void hs_kcpu_pool_free(hs_kcpu_pool_t **pool);
/* Threads a parallel section of k uses (1 without a pool). */
HS_KCPU_HIDDEN int hs_kcpu_threads(hs_kernels_t *k);
/* fn(arg, t, T) for every t in [0, T) at once, OpenBLAS single-threaded meanwhile; returns T.
 * T is 1 (fn(arg, 0, 1) on the caller) without a pool or while another thread's section
 * holds it. */
HS_KCPU_HIDDEN int hs_kcpu_parallel(hs_kernels_t *k, hs_kcpu_task_fn fn, void *arg);
/* [lo, hi) = share t of T of the range [0, n): contiguous, sizes differing by at most 1. */
HS_KCPU_HIDDEN void hs_kcpu_share(size_t n, int t, int T, size_t *lo, size_t *hi);

/* gemm without argument checks, for callers inside the backend that built valid shapes. */
HS_KCPU_HIDDEN void hs_kcpu_sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha,
                                  const float *A, int lda, const float *B, int ldb, float beta,
                                  float *C, int ldc);

/* ---- direct 3x3 convolution, stride 1, padding 1 (cpu_direct.c) ---- */

/* The register tile's vectors of 8 outputs on this CPU; 0: no direct kernel here. */
HS_KCPU_HIDDEN int hs_kcpu_direct3_nv(void);
/* Whether a convolution of Ci to Ko channels on H x W planes can run direct. */
HS_KCPU_HIDDEN int hs_kcpu_direct3_fits(int Ci, int Ko, int H, int W);
/* The padded copy of one image (Ci, H + 2, W + 2) that hs_kcpu_direct3_image needs, floats. */
HS_KCPU_HIDDEN size_t hs_kcpu_direct3_pad_floats(int Ci, int H, int W);
/* wt = w (K, C, 3, 3) laid out for the kernel (K C 9 floats); flip: the filters of dx = the
 * convolution of dy with w flipped and C, K swapped (out channels C, in channels K). */
HS_KCPU_HIDDEN void hs_kcpu_direct3_pack_w(const float *w, int K, int C, int flip, float *wt);
/* y (Ko, H, W) = the convolution of x (Ci, H, W) with wt (hs_kcpu_direct3_pack_w), through the
 * scratch xpad (hs_kcpu_direct3_pad_floats); only when hs_kcpu_direct3_fits. */
HS_KCPU_HIDDEN void hs_kcpu_direct3_image(int Ci, int Ko, int H, int W, const float *x,
                                          const float *wt, float *xpad, float *y);

/* Whether dw of a 3x3 stride-1 pad-1 convolution of C to K channels can run direct. */
HS_KCPU_HIDDEN int hs_kcpu_direct3_dw_fits(int C, int K, int H, int W);
/* xpad (C, H + 2, W + 2) = x (C, H, W) with a border of zeros. */
HS_KCPU_HIDDEN void hs_kcpu_direct3_pad(int C, int H, int W, const float *x, float *xpad);
/* dw (K, C, 3, 3) += the weight gradient of G images: xpad (G, C, H + 2, W + 2) padded inputs,
 * dy (G, K, H, W); only when hs_kcpu_direct3_dw_fits. */
HS_KCPU_HIDDEN void hs_kcpu_direct3_dw(int C, int K, int H, int W, int G, const float *xpad,
                                       const float *dy, float *dw);

HS_KCPU_HIDDEN size_t hs_kcpu_conv2d_workspace(hs_kernels_t *k, const hs_conv2d_desc_t *d);
HS_KCPU_HIDDEN int hs_kcpu_conv2d_fwd(hs_kernels_t *k, const hs_conv2d_desc_t *d, const float *x,
                                      const float *w, const float *bias, float *y, void *ws,
                                      size_t ws_bytes);
HS_KCPU_HIDDEN int hs_kcpu_conv2d_bwd(hs_kernels_t *k, const hs_conv2d_desc_t *d, const float *x,
                                      const float *w, const float *dy, float *dx, float *dw,
                                      float *dbias, void *ws, size_t ws_bytes);
HS_KCPU_HIDDEN int hs_kcpu_maxpool_fwd(hs_kernels_t *k, const hs_pool2d_desc_t *d, const float *x,
                                       float *y, int32_t *argmax);
HS_KCPU_HIDDEN int hs_kcpu_maxpool_bwd(hs_kernels_t *k, const hs_pool2d_desc_t *d, const float *x,
                                       const float *y, const int32_t *argmax, const float *dy,
                                       float *dx);
HS_KCPU_HIDDEN int hs_kcpu_batchnorm_fwd_train(hs_kernels_t *k, int B, int C, int HW,
                                               const float *x, const float *gamma,
                                               const float *beta, float *y, float *save_mean,
                                               float *save_invstd, float *running_mean,
                                               float *running_var, float momentum, float eps);
HS_KCPU_HIDDEN int hs_kcpu_batchnorm_fwd_eval(hs_kernels_t *k, int B, int C, int HW, const float *x,
                                              const float *gamma, const float *beta,
                                              const float *running_mean, const float *running_var,
                                              float eps, float *y);
HS_KCPU_HIDDEN int hs_kcpu_batchnorm_bwd(hs_kernels_t *k, int B, int C, int HW, const float *x,
                                         const float *dy, const float *gamma,
                                         const float *save_mean, const float *save_invstd,
                                         float eps, float *dx, float *dgamma, float *dbeta);
HS_KCPU_HIDDEN int hs_kcpu_avgpool_global_fwd(hs_kernels_t *k, int B, int C, int HW, const float *x,
                                              float *y);
HS_KCPU_HIDDEN int hs_kcpu_avgpool_global_bwd(hs_kernels_t *k, int B, int C, int HW,
                                              const float *dy, float *dx);

#endif
