/*
 * kernels/cuda/cuda_backend.cu — the CUDA kernel backend's context and ops table: opening a
 * GPU (stream, cuBLAS and cuDNN handles bound to it, pinned result buffer), memory slots,
 * gemm through cuBLAS, and the error messages every CUDA, cuBLAS and cuDNN failure gets.
 * The other slots live in cuda_elementwise.cu, cuda_reduce.cu and cuda_conv.cu.
 */
#include "cuda_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- errors ---- */

/* Length of the function name at the start of `call` ("cudaMalloc(&p, n)" -> 10). */
static int call_name_len(const char *call)
{
    const char *paren = strchr(call, '(');
    return paren ? (int)(paren - call) : (int)strlen(call);
}

int hs_kcuda_cuda_error(cudaError_t e, const char *call, const char *file, int line)
{
    int code = (e == cudaErrorMemoryAllocation) ? -ENOMEM : -EIO;
    cudaGetLastError(); /* reset a non-sticky error so later launch checks do not see it */
    return hs_error_set(code, file, line, "%.*s failed: %s (%s)", call_name_len(call), call,
                        cudaGetErrorString(e), cudaGetErrorName(e));
}

int hs_kcuda_cublas_error(cublasStatus_t s, const char *call, const char *file, int line)
{
    int code = (s == CUBLAS_STATUS_ALLOC_FAILED)    ? -ENOMEM
               : (s == CUBLAS_STATUS_INVALID_VALUE) ? -EINVAL
                                                    : -EIO;
    return hs_error_set(code, file, line, "%.*s failed: %s (%s)", call_name_len(call), call,
                        cublasGetStatusString(s), cublasGetStatusName(s));
}

int hs_kcuda_cudnn_error(cudnnStatus_t s, const char *call, const char *file, int line)
{
    int code = (s == CUDNN_STATUS_ALLOC_FAILED) ? -ENOMEM
               : (s == CUDNN_STATUS_BAD_PARAM)  ? -EINVAL
                                                : -EIO;
    return hs_error_set(code, file, line, "%.*s failed: %s", call_name_len(call), call,
                        cudnnGetErrorString(s));
}

/* ---- context ---- */

int hs_kcuda_enter(hs_kernels_t *k)
{
    hs_kcuda_t *c = hs_kcuda(k);
    int cur = -1;
    HS_KCUDA_CHECK(cudaGetDevice(&cur));
    if (cur != c->device) HS_KCUDA_CHECK(cudaSetDevice(c->device));
    return 0;
}

int hs_kcuda_scratch(hs_kcuda_t *c, size_t bytes, void **out)
{
    if (bytes > c->scratch_bytes) {
        /* Kernels queued earlier may still read the old buffer. */
        HS_KCUDA_CHECK(cudaStreamSynchronize(c->stream));
        if (c->scratch) HS_KCUDA_CHECK(cudaFree(c->scratch));
        c->scratch = NULL;
        c->scratch_bytes = 0;
        size_t want = bytes < ((size_t)1 << 16) ? ((size_t)1 << 16) : bytes;
        HS_KCUDA_CHECK(cudaMalloc(&c->scratch, want));
        c->scratch_bytes = want;
    }
    *out = c->scratch;
    return 0;
}

int hs_kcuda_fetch_result(hs_kcuda_t *c)
{
    HS_KCUDA_CHECK(cudaMemcpyAsync(c->result_host, c->result_dev, sizeof(*c->result_host),
                                   cudaMemcpyDeviceToHost, c->stream));
    HS_KCUDA_CHECK(cudaStreamSynchronize(c->stream));
    return 0;
}

/* Release everything in c that was created (safe on a partly opened context). Errors are
 * ignored: this runs at close or on a failed open, when nothing more can be done. */
static void kcuda_destroy(hs_kcuda_t *c)
{
    if (!c) return;
    if (c->stream) cudaStreamSynchronize(c->stream);
    hs_kcuda_conv_plans_destroy(c);
    if (c->scratch) cudaFree(c->scratch);
    if (c->partials) cudaFree(c->partials);
    if (c->result_dev) cudaFree(c->result_dev);
    if (c->result_host) cudaFreeHost(c->result_host);
    if (c->cudnn) cudnnDestroy(c->cudnn);
    if (c->cublas) cublasDestroy(c->cublas);
    if (c->stream) cudaStreamDestroy(c->stream);
    cudaGetLastError(); /* do not leave a failure behind for the next caller */
    free(c);
}

/* Create the stream, handles and buffers of an empty context on c->device. */
static int kcuda_init(hs_kcuda_t *c)
{
    HS_KCUDA_CHECK(cudaSetDevice(c->device));
    HS_KCUDA_CHECK(cudaDeviceGetAttribute(&c->sm_count, cudaDevAttrMultiProcessorCount, c->device));
    if (c->sm_count < 1) c->sm_count = 1;
    /* Non-blocking: no implicit ordering with the legacy default stream of other contexts. */
    HS_KCUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    HS_TRY(hs_kcublas_load());
    HS_KCUBLAS_CHECK(cublasCreate(&c->cublas));
    HS_KCUBLAS_CHECK(cublasSetStream(c->cublas, c->stream));
    /* Plain FP32 (no TF32 tensor cores) so results match the CPU backend. */
    HS_KCUBLAS_CHECK(cublasSetMathMode(c->cublas, CUBLAS_DEFAULT_MATH));
    HS_KCUDNN_CHECK(cudnnCreate(&c->cudnn));
    HS_KCUDNN_CHECK(cudnnSetStream(c->cudnn, c->stream));
    HS_KCUDA_CHECK(cudaMallocHost((void **)&c->result_host, sizeof(*c->result_host)));
    HS_KCUDA_CHECK(cudaMalloc((void **)&c->result_dev, sizeof(*c->result_dev)));
    HS_KCUDA_CHECK(cudaMalloc((void **)&c->partials, HS_KCUDA_MAX_PARTIALS * sizeof(double)));
    return 0;
}

/* ---- memory ---- */

static int kcuda_alloc(hs_kernels_t *k, size_t bytes, void **out)
{
    if (!out) return HS_ERR(-EINVAL, "cuda alloc: out is NULL");
    *out = NULL;
    if (bytes == 0) return 0;
    HS_TRY(hs_kcuda_enter(k));
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return HS_ERR(e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO,
                      "cudaMalloc of %zu bytes on CUDA device %d failed: %s (%s)", bytes,
                      hs_kcuda(k)->device, cudaGetErrorString(e), cudaGetErrorName(e));
    }
    *out = p;
    return 0;
}

static void kcuda_free(hs_kernels_t *k, void *p)
{
    if (!p) return;
    if (hs_kcuda_enter(k) < 0) return;
    /* cudaFree waits for the device; a failure here (a fault earlier) has been reported by
     * the call that caused it. */
    if (cudaFree(p) != cudaSuccess) cudaGetLastError();
}

/* Page-locked host memory: the staging buffers' copies run at the bus's speed and can be
 * asynchronous. The host and the device must agree on the sharing of a pinned buffer: the
 * backend's stream orders every copy. */
static int kcuda_host_alloc(hs_kernels_t *k, size_t bytes, void **out)
{
    *out = NULL;
    if (bytes == 0) return 0;
    HS_TRY(hs_kcuda_enter(k));
    void *p = NULL;
    cudaError_t e = cudaMallocHost(&p, bytes);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return HS_ERR(e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO,
                      "cudaMallocHost of %zu bytes failed: %s (%s)", bytes, cudaGetErrorString(e),
                      cudaGetErrorName(e));
    }
    *out = p;
    return 0;
}

static void kcuda_host_free(hs_kernels_t *k, void *p)
{
    if (!p || hs_kcuda_enter(k) < 0) return;
    if (cudaFreeHost(p) != cudaSuccess) cudaGetLastError();
}

/* CUDA IPC: a device allocation shared with another process of the host (the same GPU, or
 * one it has peer access to). The handle carries cudaIpcMemHandle_t and the device. */
#define KCUDA_IPC_MAGIC 0x49445543u /* "CUDI" */
typedef struct kcuda_ipc {
    uint32_t magic;
    int32_t device;
    cudaIpcMemHandle_t h;
} kcuda_ipc_t;
static_assert(sizeof(kcuda_ipc_t) <= HS_IPC_HANDLE_BYTES, "the CUDA IPC handle fits");

static int kcuda_ipc_handle(hs_kernels_t *k, const void *p, hs_ipc_handle_t *h)
{
    if (!p || !h) return HS_ERR(-EINVAL, "cuda ipc_handle: NULL argument");
    HS_TRY(hs_kcuda_enter(k));
    kcuda_ipc_t e;
    memset(&e, 0, sizeof e);
    e.magic = KCUDA_IPC_MAGIC;
    e.device = hs_kcuda(k)->device;
    HS_KCUDA_CHECK(cudaIpcGetMemHandle(&e.h, const_cast<void *>(p)));
    memset(h, 0, sizeof *h);
    memcpy(h->b, &e, sizeof e);
    return 0;
}

static int kcuda_ipc_open(hs_kernels_t *k, const hs_ipc_handle_t *h, void **p, size_t *bytes)
{
    if (!h || !p) return HS_ERR(-EINVAL, "cuda ipc_open: NULL argument");
    *p = NULL;
    kcuda_ipc_t e;
    memcpy(&e, h->b, sizeof e);
    if (e.magic != KCUDA_IPC_MAGIC) return HS_ERR(-EINVAL, "cuda ipc_open: not a CUDA handle");
    HS_TRY(hs_kcuda_enter(k));
    void *m = NULL;
    cudaError_t err = cudaIpcOpenMemHandle(&m, e.h, cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess) {
        cudaGetLastError();
        return HS_ERR(-ENOENT,
                      "cuda ipc_open: cudaIpcOpenMemHandle (device %d's memory) failed: %s",
                      e.device, cudaGetErrorString(err));
    }
    if (bytes) *bytes = 0; /* not known: the runtime API has no range query */
    *p = m;
    return 0;
}

static void kcuda_ipc_close(hs_kernels_t *k, void *p)
{
    if (!p || hs_kcuda_enter(k) < 0) return;
    if (cudaIpcCloseMemHandle(p) != cudaSuccess) cudaGetLastError();
}

static int kcuda_to_device(hs_kernels_t *k, void *dst_dev, const void *src_host, size_t bytes)
{
    if (bytes == 0) return 0;
    if (!dst_dev || !src_host) return HS_ERR(-EINVAL, "cuda to_device: NULL pointer");
    HS_TRY(hs_kcuda_enter(k));
    hs_kcuda_t *c = hs_kcuda(k);
    /* On the stream, so it is ordered after queued kernels; then wait, so the caller may
     * reuse src_host at once. */
    HS_KCUDA_CHECK(cudaMemcpyAsync(dst_dev, src_host, bytes, cudaMemcpyHostToDevice, c->stream));
    HS_KCUDA_CHECK(cudaStreamSynchronize(c->stream));
    return 0;
}

static int kcuda_to_host(hs_kernels_t *k, void *dst_host, const void *src_dev, size_t bytes)
{
    if (bytes == 0) return 0;
    if (!dst_host || !src_dev) return HS_ERR(-EINVAL, "cuda to_host: NULL pointer");
    HS_TRY(hs_kcuda_enter(k));
    hs_kcuda_t *c = hs_kcuda(k);
    HS_KCUDA_CHECK(cudaMemcpyAsync(dst_host, src_dev, bytes, cudaMemcpyDeviceToHost, c->stream));
    HS_KCUDA_CHECK(cudaStreamSynchronize(c->stream));
    return 0;
}

static int kcuda_copy(hs_kernels_t *k, void *dst_dev, const void *src_dev, size_t bytes)
{
    if (bytes == 0 || dst_dev == src_dev) return 0;
    if (!dst_dev || !src_dev) return HS_ERR(-EINVAL, "cuda copy: NULL pointer");
    HS_TRY(hs_kcuda_enter(k));
    HS_KCUDA_CHECK(
        cudaMemcpyAsync(dst_dev, src_dev, bytes, cudaMemcpyDeviceToDevice, hs_kcuda(k)->stream));
    return 0;
}

static int kcuda_zero(hs_kernels_t *k, void *dst_dev, size_t bytes)
{
    if (bytes == 0) return 0;
    if (!dst_dev) return HS_ERR(-EINVAL, "cuda zero: NULL pointer");
    HS_TRY(hs_kcuda_enter(k));
    HS_KCUDA_CHECK(cudaMemsetAsync(dst_dev, 0, bytes, hs_kcuda(k)->stream));
    return 0;
}

static int kcuda_sync(hs_kernels_t *k)
{
    HS_TRY(hs_kcuda_enter(k));
    HS_KCUDA_CHECK(cudaStreamSynchronize(hs_kcuda(k)->stream));
    return 0;
}

/* ---- gemm ---- */

/* C (M, N) = beta C with row stride ldc (gemm with K = 0; beta = 0 writes zeros, even over
 * NaN, as BLAS does). */
static __global__ void k_scale_rows(int M, int N, float beta, float *C, int ldc)
{
    size_t total = (size_t)M * N;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        float *c = C + (i / N) * ldc + i % N;
        *c = beta == 0.0f ? 0.0f : beta * *c;
    }
}

/* Row-major C (M, N) = alpha op(A) op(B) + beta C. cuBLAS is column-major, and a row-major
 * matrix read column-major is its transpose, so compute C^T = op(B)^T op(A)^T: cuBLAS gets
 * (B, A) in that order with sizes (N, M, K), and the same transpose flags. */
static int kcuda_gemm(hs_kernels_t *k, int trans_a, int trans_b, int M, int N, int K, float alpha,
                      const float *A, int lda, const float *B, int ldb, float beta, float *C,
                      int ldc)
{
    if (M < 0 || N < 0 || K < 0)
        return HS_ERR(-EINVAL, "cuda gemm: negative size M=%d N=%d K=%d", M, N, K);
    if (M == 0 || N == 0) return 0;
    int a_cols = trans_a ? M : K, b_cols = trans_b ? K : N;
    if (lda < HS_MAX(1, a_cols) || ldb < HS_MAX(1, b_cols) || ldc < N)
        return HS_ERR(-EINVAL,
                      "cuda gemm: row stride too small (lda=%d needs >= %d, ldb=%d needs >= %d, "
                      "ldc=%d needs >= %d)",
                      lda, a_cols, ldb, b_cols, ldc, N);
    if (!C || (K > 0 && (!A || !B))) return HS_ERR(-EINVAL, "cuda gemm: NULL matrix");
    HS_TRY(hs_kcuda_enter(k));
    hs_kcuda_t *c = hs_kcuda(k);
    if (K == 0) { /* no product: C = beta C (cuBLAS does not promise this for k = 0) */
        if (beta == 1.0f) return 0;
        k_scale_rows<<<hs_kcuda_blocks(c, (size_t)M * N), HS_KCUDA_THREADS, 0, c->stream>>>(
            M, N, beta, C, ldc);
        HS_KCUDA_LAUNCHED("k_scale_rows");
        return 0;
    }
    cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (k->precision == HS_PREC_FP32 && !k->tf32) {
        HS_KCUBLAS_CHECK(
            cublasSgemm(c->cublas, op_b, op_a, N, M, K, &alpha, B, ldb, A, lda, &beta, C, ldc));
        return 0;
    }
    /* operands in the products' precision (hearsay/kernels.h), on tensor cores */
    cublasComputeType_t ct = k->precision == HS_PREC_BF16   ? CUBLAS_COMPUTE_32F_FAST_16BF
                             : k->precision == HS_PREC_FP16 ? CUBLAS_COMPUTE_32F_FAST_16F
                                                            : CUBLAS_COMPUTE_32F_FAST_TF32;
    HS_KCUBLAS_CHECK(hs_kcublas_sgemm_fast(c->cublas, op_b, op_a, N, M, K, &alpha, B, ldb, A, lda,
                                           &beta, C, ldc, ct));
    return 0;
}

/* ---- the table ---- */

static const hs_kernel_ops_t hs_kcuda_ops = {
    .size = sizeof(hs_kernel_ops_t),
    .name = "cuda",
    .device = HS_DEV_CUDA,
    .alloc = kcuda_alloc,
    .free = kcuda_free,
    .to_device = kcuda_to_device,
    .to_host = kcuda_to_host,
    .copy = kcuda_copy,
    .zero = kcuda_zero,
    .sync = kcuda_sync,
    .gemm = kcuda_gemm,
    .axpy = hs_kcuda_axpy,
    .scale = hs_kcuda_scale,
    .mix = hs_kcuda_mix,
    .add_bias = hs_kcuda_add_bias,
    .bias_grad = hs_kcuda_bias_grad,
    .relu_fwd = hs_kcuda_relu_fwd,
    .relu_bwd = hs_kcuda_relu_bwd,
    .tanh_fwd = hs_kcuda_tanh_fwd,
    .tanh_bwd = hs_kcuda_tanh_bwd,
    .softmax_xent = hs_kcuda_softmax_xent,
    .conv2d_workspace = hs_kcuda_conv2d_workspace,
    .conv2d_fwd = hs_kcuda_conv2d_fwd,
    .conv2d_bwd = hs_kcuda_conv2d_bwd,
    .maxpool_fwd = hs_kcuda_maxpool_fwd,
    .maxpool_bwd = hs_kcuda_maxpool_bwd,
    .avgpool_global_fwd = hs_kcuda_avgpool_global_fwd,
    .avgpool_global_bwd = hs_kcuda_avgpool_global_bwd,
    .batchnorm_fwd_train = hs_kcuda_batchnorm_fwd_train,
    .batchnorm_fwd_eval = hs_kcuda_batchnorm_fwd_eval,
    .batchnorm_bwd = hs_kcuda_batchnorm_bwd,
    .sgd_step = hs_kcuda_sgd_step,
    .sum = hs_kcuda_sum,
    .dot = hs_kcuda_dot,
    .nrm2 = hs_kcuda_nrm2,
    .host_alloc = kcuda_host_alloc,
    .host_free = kcuda_host_free,
    .ipc_handle = kcuda_ipc_handle,
    .ipc_open = kcuda_ipc_open,
    .ipc_close = kcuda_ipc_close,
    .compress = hs_kcuda_compress,
    .decompress = hs_kcuda_decompress,
};

/* ---- opening and closing ---- */

int hs_kernels_cuda_device_count(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* clear it: "no driver" is an answer here, not a fault */
        return 0;
    }
    return n;
}

int hs_kernels_cuda_probe(int *count)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return HS_ERR(-ENODEV,
                      "no usable CUDA device: cudaGetDeviceCount failed: %s (%s); is the NVIDIA "
                      "driver loaded and a GPU visible (nvidia-smi, CUDA_VISIBLE_DEVICES)?",
                      cudaGetErrorString(e), cudaGetErrorName(e));
    }
    if (n <= 0)
        return HS_ERR(-ENODEV, "no CUDA device visible (check nvidia-smi and "
                               "CUDA_VISIBLE_DEVICES)");
    *count = n;
    return 0;
}

int hs_kernels_cuda_open(hs_kernels_t *k, int device_index)
{
    if (!k) return HS_ERR(-EINVAL, "hs_kernels_cuda_open: k is NULL");
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return HS_ERR(-ENODEV,
                      "no usable CUDA device: cudaGetDeviceCount failed: %s (%s); is the NVIDIA "
                      "driver loaded and a GPU visible (nvidia-smi, CUDA_VISIBLE_DEVICES)?",
                      cudaGetErrorString(e), cudaGetErrorName(e));
    }
    if (count <= 0)
        return HS_ERR(-ENODEV, "no CUDA device visible (check nvidia-smi and "
                               "CUDA_VISIBLE_DEVICES)");
    if (device_index < 0 || device_index >= count)
        return HS_ERR(-ENODEV,
                      "CUDA device %d requested but %d device%s visible (cuda:0 to "
                      "cuda:%d)",
                      device_index, count, count == 1 ? " is" : "s are", count - 1);

    hs_kcuda_t *c = (hs_kcuda_t *)hs_calloc(1, sizeof(*c), "CUDA backend state");
    if (!c) return -ENOMEM;
    c->device = device_index;
    int rc = kcuda_init(c);
    if (rc < 0) {
        hs_error_prefix("opening CUDA device %d", device_index);
        kcuda_destroy(c);
        return rc;
    }
    k->impl = c;
    k->ops = &hs_kcuda_ops;
    k->device = HS_DEV_CUDA;
    k->device_index = device_index;
    return 0;
}

void hs_kernels_cuda_close(hs_kernels_t *k)
{
    if (!k || !k->impl) return;
    hs_kcuda_t *c = hs_kcuda(k);
    cudaSetDevice(c->device);
    kcuda_destroy(c);
    k->impl = NULL;
}
