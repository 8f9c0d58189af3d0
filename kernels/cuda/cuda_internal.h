/*
 * kernels/cuda/cuda_internal.h — private to the CUDA backend (C++ / nvcc only): the state
 * behind hs_kernels_t.impl, the error-check macros that turn CUDA, cuBLAS and cuDNN failures
 * into HS_ERR messages, launch-size helpers, and the slots implemented in each .cu file that
 * cuda_backend.cu puts in the ops table.
 *
 * Threading: one hs_kernels_t is used by one host thread at a time. Every slot first makes the
 * context's GPU current (hs_kcuda_enter), so contexts on different GPUs can share a thread.
 */
#ifndef HEARSAY_KERNELS_CUDA_INTERNAL_H
#define HEARSAY_KERNELS_CUDA_INTERNAL_H

#include "config.h"

#include "hearsay/common.h"
#include "hearsay/kernels.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define HS_KCUDA_HIDDEN __attribute__((visibility("hidden")))
#else
#define HS_KCUDA_HIDDEN
#endif

/* ---- cuBLAS, loaded on demand (cuda_cublas.cu) ---- */
/* dlopen libcublas once; 0, or an HS_ERR naming the library and dlerror's reason. */
HS_KCUDA_HIDDEN int hs_kcublas_load(void);
HS_KCUDA_HIDDEN cublasStatus_t hs_kcublas_create(cublasHandle_t *h);
HS_KCUDA_HIDDEN cublasStatus_t hs_kcublas_destroy(cublasHandle_t h);
HS_KCUDA_HIDDEN cublasStatus_t hs_kcublas_set_stream(cublasHandle_t h, cudaStream_t s);
HS_KCUDA_HIDDEN cublasStatus_t hs_kcublas_set_math_mode(cublasHandle_t h, cublasMath_t m);
HS_KCUDA_HIDDEN cublasStatus_t hs_kcublas_sgemm(cublasHandle_t h, cublasOperation_t ta,
                                                cublasOperation_t tb, int m, int n, int k,
                                                const float *alpha, const float *a, int lda,
                                                const float *b, int ldb, const float *beta,
                                                float *c, int ldc);
/* The same product (fp32 in and out) with a compute type that lets cuBLAS round the operands
 * for tensor cores (CUBLAS_COMPUTE_32F_FAST_16BF / _16F / _TF32: hs_kernels_t.precision). */
HS_KCUDA_HIDDEN cublasStatus_t hs_kcublas_sgemm_fast(cublasHandle_t h, cublasOperation_t ta,
                                                     cublasOperation_t tb, int m, int n, int k,
                                                     const float *alpha, const float *a, int lda,
                                                     const float *b, int ldb, const float *beta,
                                                     float *c, int ldc,
                                                     cublasComputeType_t compute);
HS_KCUDA_HIDDEN const char *hs_kcublas_status_name(cublasStatus_t s);
HS_KCUDA_HIDDEN const char *hs_kcublas_status_string(cublasStatus_t s);
/* The backend's code keeps cuBLAS's names; these send them through the loaded library. */
#undef cublasCreate
#undef cublasDestroy
#undef cublasSetStream
#undef cublasSgemm
#define cublasCreate          hs_kcublas_create
#define cublasDestroy         hs_kcublas_destroy
#define cublasSetStream       hs_kcublas_set_stream
#define cublasSetMathMode     hs_kcublas_set_math_mode
#define cublasSgemm           hs_kcublas_sgemm
#define cublasGetStatusName   hs_kcublas_status_name
#define cublasGetStatusString hs_kcublas_status_string

/* Threads per block of the elementwise and reduction kernels. */
#define HS_KCUDA_THREADS 256
/* Most blocks a reduction's first pass uses (its partial sums live in hs_kcuda_t.partials). */
#define HS_KCUDA_MAX_PARTIALS 1024
/* Convolution geometries whose cuDNN descriptors and algorithm lists are kept. */
#define HS_KCUDA_CONV_PLANS 16
/* Largest cuDNN workspace conv2d_workspace asks for; algorithms needing more are passed over. */
#define HS_KCUDA_CONV_WS_CAP ((size_t)256 << 20)

/* Results of a reduction or of softmax_xent, copied to pinned host memory in one transfer. */
typedef struct hs_kcuda_result {
    double value;   /* sum / dot / sum of squares / total loss */
    int correct;    /* softmax_xent: rows whose argmax is the label */
    int bad_labels; /* softmax_xent: rows whose label is outside [0, C) */
} hs_kcuda_result_t;

/* One convolution geometry: cuDNN descriptors and the usable algorithms, best first (the
 * cuDNN heuristics' order), each with its workspace size. */
typedef struct hs_kcuda_conv_plan {
    int valid;
    hs_conv2d_desc_t d;
    cudnnTensorDescriptor_t x, y, bias; /* (B, C, H, W), (B, K, P, Q), (1, K, 1, 1) */
    cudnnFilterDescriptor_t w;          /* (K, C, R, S) */
    cudnnConvolutionDescriptor_t conv;
    int n_fwd, n_bwd_data, n_bwd_filter;
    cudnnConvolutionFwdAlgo_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    size_t fwd_ws[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    cudnnConvolutionBwdDataAlgo_t bwd_data[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    size_t bwd_data_ws[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    cudnnConvolutionBwdFilterAlgo_t bwd_filter[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    size_t bwd_filter_ws[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    size_t ws_bytes; /* what conv2d_workspace reports: enough for the preferred algorithms */
    int tensor_math; /* TF32 tensor-core algorithms allowed (hs_kernels_t.precision, .tf32) */
} hs_kcuda_conv_plan_t;

/* The CUDA backend's state (hs_kernels_t.impl). */
typedef struct hs_kcuda {
    int device;                     /* CUDA ordinal */
    int sm_count;                   /* multiprocessors, to size grid-stride launches */
    cudaStream_t stream;            /* every kernel, copy and library call of this context */
    cublasHandle_t cublas;          /* bound to stream */
    cudnnHandle_t cudnn;            /* bound to stream */
    hs_kcuda_result_t *result_host; /* pinned: scalar results land here */
    hs_kcuda_result_t *result_dev;  /* device twin of result_host */
    double *partials;               /* (HS_KCUDA_MAX_PARTIALS) per-block partial sums */
    void *scratch;                  /* grows on demand: softmax per-row results, maxpool argmax */
    size_t scratch_bytes;
    hs_kcuda_conv_plan_t plans[HS_KCUDA_CONV_PLANS];
    int next_plan; /* round-robin replacement when all plans are taken */
} hs_kcuda_t;

/* ---- errors (cuda_backend.cu) ---- */
/* Record "CALL failed: <library message> (<name>)" and return a negative code (-ENOMEM for
 * allocation failures, else -EIO). `call` may be the whole call text; only the function name
 * (up to the first '(') is reported. */
HS_KCUDA_HIDDEN int hs_kcuda_cuda_error(cudaError_t e, const char *call, const char *file,
                                        int line);
HS_KCUDA_HIDDEN int hs_kcuda_cublas_error(cublasStatus_t s, const char *call, const char *file,
                                          int line);
HS_KCUDA_HIDDEN int hs_kcuda_cudnn_error(cudnnStatus_t s, const char *call, const char *file,
                                         int line);

#define HS_KCUDA_CHECK(call)                                                                       \
    do {                                                                                           \
        cudaError_t hs_e_ = (call);                                                                \
        if (hs_e_ != cudaSuccess) return hs_kcuda_cuda_error(hs_e_, #call, __FILE__, __LINE__);    \
    } while (0)
#define HS_KCUBLAS_CHECK(call)                                                                     \
    do {                                                                                           \
        cublasStatus_t hs_s_ = (call);                                                             \
        if (hs_s_ != CUBLAS_STATUS_SUCCESS)                                                        \
            return hs_kcuda_cublas_error(hs_s_, #call, __FILE__, __LINE__);                        \
    } while (0)
#define HS_KCUDNN_CHECK(call)                                                                      \
    do {                                                                                           \
        cudnnStatus_t hs_s_ = (call);                                                              \
        if (hs_s_ != CUDNN_STATUS_SUCCESS)                                                         \
            return hs_kcuda_cudnn_error(hs_s_, #call, __FILE__, __LINE__);                         \
    } while (0)
/* After a <<<...>>> launch: report a bad configuration or an earlier asynchronous fault. */
#define HS_KCUDA_LAUNCHED(name)                                                                    \
    do {                                                                                           \
        cudaError_t hs_e_ = cudaGetLastError();                                                    \
        if (hs_e_ != cudaSuccess)                                                                  \
            return hs_kcuda_cuda_error(hs_e_, "launching " name, __FILE__, __LINE__);              \
    } while (0)

/* ---- context helpers (cuda_backend.cu) ---- */
/* Make k's GPU current on this thread; returns 0 or an error. */
HS_KCUDA_HIDDEN int hs_kcuda_enter(hs_kernels_t *k);
/* Ensure the scratch buffer holds `bytes` (waits for the stream before replacing it). */
HS_KCUDA_HIDDEN int hs_kcuda_scratch(hs_kcuda_t *c, size_t bytes, void **out);
/* Copy c->result_dev to c->result_host and wait for the stream. */
HS_KCUDA_HIDDEN int hs_kcuda_fetch_result(hs_kcuda_t *c);

static inline hs_kcuda_t *hs_kcuda(hs_kernels_t *k)
{
    return (hs_kcuda_t *)k->impl;
}

/* Blocks for a grid-stride loop over `work` items: enough to fill the GPU, no more. */
static inline unsigned hs_kcuda_blocks(const hs_kcuda_t *c, size_t work)
{
    size_t b = (work + HS_KCUDA_THREADS - 1) / HS_KCUDA_THREADS;
    size_t cap = (size_t)c->sm_count * 16;
    if (b > cap) b = cap;
    return b ? (unsigned)b : 1u;
}

/* 1 when every pointer is 16-byte aligned (float4 loads allowed). NULL counts as aligned. */
static inline int hs_kcuda_aligned4(const void *a, const void *b = NULL, const void *c = NULL)
{
    return (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) & 15u) == 0;
}

/* ---- device-side reduction helpers ---- */
/* Sum of v over the 32 lanes of a warp (every lane gets the total). */
template <typename T> static __device__ __forceinline__ T hs_kcuda_warp_sum(T v)
{
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

/* Sum of v over a block of blockDim.x threads (a multiple of 32, at most 1024); thread 0 gets
 * the total (the others get partial values). Every thread of the block must call it. */
template <typename T> static __device__ __forceinline__ T hs_kcuda_block_sum(T v)
{
    __shared__ T hs_warp_sums[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = hs_kcuda_warp_sum(v);
    __syncthreads(); /* hs_warp_sums may still be read by a previous call */
    if (lane == 0) hs_warp_sums[warp] = v;
    __syncthreads();
    int nwarps = (blockDim.x + 31) >> 5;
    v = (threadIdx.x < (unsigned)nwarps) ? hs_warp_sums[threadIdx.x] : T(0);
    if (warp == 0) v = hs_kcuda_warp_sum(v);
    return v;
}

/* ---- slots implemented outside cuda_backend.cu ---- */
/* cuda_elementwise.cu */
HS_KCUDA_HIDDEN int hs_kcuda_axpy(hs_kernels_t *k, size_t n, float a, const float *x, float *y);
HS_KCUDA_HIDDEN int hs_kcuda_scale(hs_kernels_t *k, size_t n, float a, float *x);
HS_KCUDA_HIDDEN int hs_kcuda_mix(hs_kernels_t *k, size_t n, float a, const float *x, float b,
                                 float *y);
HS_KCUDA_HIDDEN int hs_kcuda_add_bias(hs_kernels_t *k, int B, int N, const float *bias, float *y);
HS_KCUDA_HIDDEN int hs_kcuda_bias_grad(hs_kernels_t *k, int B, int N, const float *dy, float *db,
                                       int accumulate);
HS_KCUDA_HIDDEN int hs_kcuda_relu_fwd(hs_kernels_t *k, size_t n, const float *x, float *y);
HS_KCUDA_HIDDEN int hs_kcuda_relu_bwd(hs_kernels_t *k, size_t n, const float *y, const float *dy,
                                      float *dx);
HS_KCUDA_HIDDEN int hs_kcuda_tanh_fwd(hs_kernels_t *k, size_t n, const float *x, float *y);
HS_KCUDA_HIDDEN int hs_kcuda_tanh_bwd(hs_kernels_t *k, size_t n, const float *y, const float *dy,
                                      float *dx);
HS_KCUDA_HIDDEN int hs_kcuda_avgpool_global_fwd(hs_kernels_t *k, int B, int C, int HW,
                                                const float *x, float *y);
HS_KCUDA_HIDDEN int hs_kcuda_avgpool_global_bwd(hs_kernels_t *k, int B, int C, int HW,
                                                const float *dy, float *dx);
HS_KCUDA_HIDDEN int hs_kcuda_sgd_step(hs_kernels_t *k, size_t n, float lr, float momentum, float wd,
                                      int nesterov, float *param, const float *grad, float *vel);
/* cuda_reduce.cu */
HS_KCUDA_HIDDEN int hs_kcuda_sum(hs_kernels_t *k, size_t n, const float *x, double *out_host);
HS_KCUDA_HIDDEN int hs_kcuda_dot(hs_kernels_t *k, size_t n, const float *x, const float *y,
                                 double *out_host);
HS_KCUDA_HIDDEN int hs_kcuda_nrm2(hs_kernels_t *k, size_t n, const float *x, double *out_host);
HS_KCUDA_HIDDEN int hs_kcuda_softmax_xent(hs_kernels_t *k, int B, int C, const float *logits,
                                          const int32_t *labels, float *probs, float *dlogits,
                                          double *loss_host, int *correct_host);
/* cuda_conv.cu */
HS_KCUDA_HIDDEN size_t hs_kcuda_conv2d_workspace(hs_kernels_t *k, const hs_conv2d_desc_t *d);
HS_KCUDA_HIDDEN int hs_kcuda_conv2d_fwd(hs_kernels_t *k, const hs_conv2d_desc_t *d, const float *x,
                                        const float *w, const float *bias, float *y, void *ws,
                                        size_t ws_bytes);
HS_KCUDA_HIDDEN int hs_kcuda_conv2d_bwd(hs_kernels_t *k, const hs_conv2d_desc_t *d, const float *x,
                                        const float *w, const float *dy, float *dx, float *dw,
                                        float *dbias, void *ws, size_t ws_bytes);
HS_KCUDA_HIDDEN int hs_kcuda_maxpool_fwd(hs_kernels_t *k, const hs_pool2d_desc_t *d, const float *x,
                                         float *y, int32_t *argmax);
HS_KCUDA_HIDDEN int hs_kcuda_maxpool_bwd(hs_kernels_t *k, const hs_pool2d_desc_t *d, const float *x,
                                         const float *y, const int32_t *argmax, const float *dy,
                                         float *dx);
/* cuda_bn.cu: cuDNN's spatial batch normalisation */
HS_KCUDA_HIDDEN int hs_kcuda_batchnorm_fwd_train(hs_kernels_t *k, int B, int C, int HW,
                                                 const float *x, const float *gamma,
                                                 const float *beta, float *y, float *save_mean,
                                                 float *save_invstd, float *running_mean,
                                                 float *running_var, float momentum, float eps);
HS_KCUDA_HIDDEN int hs_kcuda_batchnorm_fwd_eval(hs_kernels_t *k, int B, int C, int HW,
                                                const float *x, const float *gamma,
                                                const float *beta, const float *running_mean,
                                                const float *running_var, float eps, float *y);
HS_KCUDA_HIDDEN int hs_kcuda_batchnorm_bwd(hs_kernels_t *k, int B, int C, int HW, const float *x,
                                           const float *dy, const float *gamma,
                                           const float *save_mean, const float *save_invstd,
                                           float eps, float *dx, float *dgamma, float *dbeta);
/* Release the cuDNN descriptors of every cached plan (at close). */
HS_KCUDA_HIDDEN void hs_kcuda_conv_plans_destroy(hs_kcuda_t *c);
/* y (n) = x rounded to bf16 or fp16 (nearest even; kept as floats) on c's stream; the
 * convolutions' operands in the products' precision (hearsay/kernels.h). */
/* ---- compression (cuda_compress.cu): the compress and decompress slots ---- */
HS_KCUDA_HIDDEN int hs_kcuda_compress(hs_kernels_t *k, const hs_kcompress_t *p, const float *x,
                                      void *out, size_t *bytes);
HS_KCUDA_HIDDEN int hs_kcuda_decompress(hs_kernels_t *k, const hs_kcompress_t *p, const void *in,
                                        size_t bytes, float alpha, int add, float *y);

HS_KCUDA_HIDDEN int hs_kcuda_round(hs_kcuda_t *c, hs_precision_t p, size_t n, const float *x,
                                   float *y);

#endif
