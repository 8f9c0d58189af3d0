/*
 * hearsay/kernels.h — numeric kernels behind one ops table per device.
 *
 * Letters used in shape comments: B batch, C channels (or classes), H/W height/width,
 * K output channels, R/S filter height/width, M/N/K gemm sizes, n vector length.
 * All tensors are float32, row-major, NCHW for images. Pointers marked "device" live in the
 * backend's memory (host memory for CPU, GPU memory for CUDA, host memory the host may not
 * touch for the emulated device) and come from ops->alloc. Code that is not a kernel reads or
 * writes device memory only through to_host/to_device, whatever the device: `k->device !=
 * HS_DEV_CPU` means "stage through host buffers".
 *
 * Callers hold an hs_kernels_t (opened with hs_kernels_open) and call through k->ops:
 *     k->ops->axpy(k, n, 0.5f, x, y);
 * Every slot returns 0 or a negative errno-style code with a message (hs_last_error()).
 * Kernels are asynchronous on CUDA (one stream per hs_kernels_t): results written to host
 * pointers (float *out_host etc.) are available when the call returns; device results are
 * ordered on the stream and visible to later calls. sync() waits for all of them.
 * Without CUDA in the build, hs_kernels_open(HS_DEV_CUDA) fails with -ENOSYS and a message;
 * callers never #ifdef.
 */
#ifndef HEARSAY_KERNELS_H
#define HEARSAY_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* HS_DEV_EMU, the emulated device (`--device emu`, kernels/emu.c): host memory that only the
 * backend's slots may touch (poisoned for the host under AddressSanitizer), the CPU's math; a
 * device that is not the host, for testing the GPU data path without a GPU. */
typedef enum hs_device { HS_DEV_CPU = 0, HS_DEV_CUDA = 1, HS_DEV_EMU = 2 } hs_device_t;

typedef struct hs_kernels hs_kernels_t;

/* The precision of the matrix products (gemm, conv2d_fwd/bwd): their operands are rounded to it
 * (nearest even; fp16 with its range: past 65504 is inf, below 2^-24 is 0), the products are
 * summed and stored in fp32. Everything else (activations, gradients, batch norm, the loss, the
 * weights and optimizer state) stays fp32. This is what tensor cores compute: on CUDA, cuBLAS's
 * FAST_16BF / FAST_16F / FAST_TF32 compute types and cuDNN on TF32 tensor cores over operands
 * rounded to bf16 or fp16 (TF32 holds every bf16 and fp16 value, so that rounding is exact); on
 * the CPU and the emulated device an emulation (rounded copies, then the fp32 product), slower
 * than fp32, for tests and parity studies. hs_kernels_set_precision; docs/algorithms.md
 * "Mixed precision". */
typedef enum hs_precision { HS_PREC_FP32 = 0, HS_PREC_BF16 = 1, HS_PREC_FP16 = 2 } hs_precision_t;

/* A device allocation as another process of this host can map it (ipc_handle; CUDA IPC's
 * cudaIpcMemHandle_t, or the emulated device's memfd): opaque, fixed size, safe to send. */
#define HS_IPC_HANDLE_BYTES 96
typedef struct hs_ipc_handle {
    unsigned char b[HS_IPC_HANDLE_BYTES];
} hs_ipc_handle_t;

/* A compressor as the compression slots see it (hearsay/compress.h's formats; optim/compress.c
 * fills it for each call): kind is an hs_compress_kind_t, key this call's key of the
 * compressor's random stream (int8 stochastic rounding, random-k's choices). */
typedef struct hs_kcompress {
    int kind;
    int stochastic; /* int8: stochastic rounding */
    uint32_t chunk; /* int8: floats per scale */
    uint32_t key;   /* the stream's key of this call */
    size_t n, k;    /* floats; entries kept (random-k; n for the dense kinds) */
    size_t bytes;   /* the compressed size (the largest, for the sparse kinds) */
} hs_kcompress_t;

/* 2-D convolution geometry (cross-correlation, as in cuDNN and PyTorch). */
typedef struct hs_conv2d_desc {
    int B, C, H, W;  /* input (B, C, H, W) */
    int K, R, S;     /* filters (K, C, R, S); bias (K) */
    int pad, stride; /* same for both spatial axes */
    int P, Q;        /* output (B, K, P, Q): P = (H + 2 pad - R) / stride + 1, likewise Q */
} hs_conv2d_desc_t;

/* 2-D max-pool geometry: window `size`, step `stride`, no padding. */
typedef struct hs_pool2d_desc {
    int B, C, H, W; /* input (B, C, H, W) */
    int size, stride;
    int P, Q; /* output (B, C, P, Q): P = (H - size) / stride + 1 */
} hs_pool2d_desc_t;

typedef struct hs_kernel_ops {
    size_t size;      /* sizeof(hs_kernel_ops_t), for versioning */
    const char *name; /* "cpu", "cuda", "emu" */
    hs_device_t device;

    /* ---- memory ---- */
    /* Allocate `bytes` of device memory (64-byte aligned on CPU); *out = NULL when bytes = 0. */
    int (*alloc)(hs_kernels_t *k, size_t bytes, void **out);
    /* Free device memory from alloc (NULL is fine). */
    void (*free)(hs_kernels_t *k, void *p);
    /* Copies. Host pointers are ordinary memory; to_host/from_host are synchronous. */
    int (*to_device)(hs_kernels_t *k, void *dst_dev, const void *src_host, size_t bytes);
    int (*to_host)(hs_kernels_t *k, void *dst_host, const void *src_dev, size_t bytes);
    int (*copy)(hs_kernels_t *k, void *dst_dev, const void *src_dev, size_t bytes);
    int (*zero)(hs_kernels_t *k, void *dst_dev, size_t bytes);
    /* Wait until every queued kernel has finished. */
    int (*sync)(hs_kernels_t *k);

    /* ---- BLAS-like ---- */
    /* C (M, N) = alpha * op(A) op(B) + beta * C, row-major; op(A) is (M, K), op(B) is (K, N).
     * A is (M, K) or, with trans_a, (K, M); lda/ldb/ldc are row strides. */
    int (*gemm)(hs_kernels_t *k, int trans_a, int trans_b, int M, int N, int K, float alpha,
                const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);
    /* y (n) += a * x (n) */
    int (*axpy)(hs_kernels_t *k, size_t n, float a, const float *x, float *y);
    /* x (n) *= a */
    int (*scale)(hs_kernels_t *k, size_t n, float a, float *x);
    /* y (n) = a * x + b * y   (fused gossip mix; x and y may not overlap) */
    int (*mix)(hs_kernels_t *k, size_t n, float a, const float *x, float b, float *y);
    /* y (B, N) += bias (N) broadcast over rows */
    int (*add_bias)(hs_kernels_t *k, int B, int N, const float *bias, float *y);
    /* db (N) (+)= sum over rows of dy (B, N); accumulate when `accumulate`, else overwrite */
    int (*bias_grad)(hs_kernels_t *k, int B, int N, const float *dy, float *db, int accumulate);

    /* ---- activations (n elements; may run in place: y == x, dx == dy) ---- */
    int (*relu_fwd)(hs_kernels_t *k, size_t n, const float *x, float *y);
    /* dx = dy * (y > 0), y the forward output */
    int (*relu_bwd)(hs_kernels_t *k, size_t n, const float *y, const float *dy, float *dx);
    int (*tanh_fwd)(hs_kernels_t *k, size_t n, const float *x, float *y);
    /* dx = dy * (1 - y^2), y the forward output */
    int (*tanh_bwd)(hs_kernels_t *k, size_t n, const float *y, const float *dy, float *dx);

    /* ---- loss ---- */
    /* Softmax + cross-entropy over logits (B, C) with labels (B) in [0, C).
     * Writes probs (B, C) (may be NULL), dlogits (B, C) = (probs - onehot) / B (may be NULL),
     * *loss_host = mean loss over the batch, *correct_host = number of rows whose argmax equals
     * the label (may be NULL). labels are host or device int32 as the backend needs: device. */
    int (*softmax_xent)(hs_kernels_t *k, int B, int C, const float *logits, const int32_t *labels,
                        float *probs, float *dlogits, double *loss_host, int *correct_host);

    /* ---- convolution and pooling ---- */
    /* Bytes of scratch the conv calls need for this geometry (im2col buffer on CPU, cuDNN
     * workspace on CUDA); the caller allocates it with alloc and passes it in. */
    size_t (*conv2d_workspace)(hs_kernels_t *k, const hs_conv2d_desc_t *d);
    /* y (B, K, P, Q) = conv(x (B, C, H, W), w (K, C, R, S)) + bias (K) (bias may be NULL) */
    int (*conv2d_fwd)(hs_kernels_t *k, const hs_conv2d_desc_t *d, const float *x, const float *w,
                      const float *bias, float *y, void *ws, size_t ws_bytes);
    /* From dy (B, K, P, Q): dx (B, C, H, W) (overwritten; may be NULL to skip),
     * dw (K, C, R, S) and dbias (K) (accumulated, so several batches can add up; dbias may be
     * NULL). */
    int (*conv2d_bwd)(hs_kernels_t *k, const hs_conv2d_desc_t *d, const float *x, const float *w,
                      const float *dy, float *dx, float *dw, float *dbias, void *ws,
                      size_t ws_bytes);
    /* y (B, C, P, Q) = max over windows of x; argmax (B, C, P, Q) stores the flat input index
     * of each maximum (int32, device) for the backward pass (CUDA may ignore it: may be NULL). */
    int (*maxpool_fwd)(hs_kernels_t *k, const hs_pool2d_desc_t *d, const float *x, float *y,
                       int32_t *argmax);
    /* dx (B, C, H, W) = scatter of dy to the maxima (overwritten). x, y are the forward input
     * and output (cuDNN needs them). */
    int (*maxpool_bwd)(hs_kernels_t *k, const hs_pool2d_desc_t *d, const float *x, const float *y,
                       const int32_t *argmax, const float *dy, float *dx);

    /* Global average pooling: y (B, C) = mean over the HW positions of x (B, C, HW). */
    int (*avgpool_global_fwd)(hs_kernels_t *k, int B, int C, int HW, const float *x, float *y);
    /* dx (B, C, HW) = dy (B, C) / HW broadcast (overwritten). */
    int (*avgpool_global_bwd)(hs_kernels_t *k, int B, int C, int HW, const float *dy, float *dx);

    /* ---- batch normalisation (PyTorch's BatchNorm1d/2d; statistics per channel over the B
     * samples and HW positions of x (B, C, HW); a flat (B, C) tensor is HW = 1) ---- */
    /* Training: mean and biased variance of each channel; y (B, C, HW) = (x - mean) * invstd *
     * gamma + beta with invstd = 1 / sqrt(var + eps); save_mean, save_invstd (C) keep them for
     * the backward. running_mean, running_var (C) (both NULL: not updated) become
     * (1 - momentum) * running + momentum * stat, the variance unbiased (n / (n - 1), n = B HW)
     * as PyTorch and cuDNN do. Needs B HW >= 2; eps >= 1e-5 (cuDNN's minimum). */
    int (*batchnorm_fwd_train)(hs_kernels_t *k, int B, int C, int HW, const float *x,
                               const float *gamma, const float *beta, float *y, float *save_mean,
                               float *save_invstd, float *running_mean, float *running_var,
                               float momentum, float eps);
    /* Evaluation: y = (x - running_mean) / sqrt(running_var + eps) * gamma + beta. */
    int (*batchnorm_fwd_eval)(hs_kernels_t *k, int B, int C, int HW, const float *x,
                              const float *gamma, const float *beta, const float *running_mean,
                              const float *running_var, float eps, float *y);
    /* Backward of the training forward (x, gamma and its saved statistics): dx (B, C, HW),
     * dgamma and dbeta (C), all overwritten. */
    int (*batchnorm_bwd)(hs_kernels_t *k, int B, int C, int HW, const float *x, const float *dy,
                         const float *gamma, const float *save_mean, const float *save_invstd,
                         float eps, float *dx, float *dgamma, float *dbeta);

    /* ---- optimizer ---- */
    /* One SGD step over n parameters, PyTorch's convention:
     *   g = grad + wd * param;  vel = momentum * vel + g;
     *   step = nesterov ? g + momentum * vel : vel;  param -= lr * step.
     * With momentum == 0, vel may be NULL and step = g. */
    int (*sgd_step)(hs_kernels_t *k, size_t n, float lr, float momentum, float wd, int nesterov,
                    float *param, const float *grad, float *vel);

    /* ---- reductions (results to host, accumulated in double) ---- */
    int (*sum)(hs_kernels_t *k, size_t n, const float *x, double *out_host);
    int (*dot)(hs_kernels_t *k, size_t n, const float *x, const float *y, double *out_host);
    int (*nrm2)(hs_kernels_t *k, size_t n, const float *x, double *out_host);

    /* ---- host memory for staging (optional; read through hs_kernels_host_alloc) ---- */
    /* `bytes` of host memory the device copies to and from at full speed (CUDA: page-locked,
     * cudaMallocHost), 64-byte aligned; *out = NULL when bytes = 0. NULL slots: ordinary
     * memory (the host and the emulated device). */
    int (*host_alloc)(hs_kernels_t *k, size_t bytes, void **out);
    void (*host_free)(hs_kernels_t *k, void *p);

    /* ---- device memory shared between processes of one host (optional: CUDA IPC) ---- */
    /* Describe the allocation that starts at p (from alloc) in *h for another process's
     * ipc_open. -ENOSYS with the reason where it cannot be shared (the emulated device
     * shares allocations of HS_EMU_IPC_MIN bytes and more). */
    int (*ipc_handle)(hs_kernels_t *k, const void *p, hs_ipc_handle_t *h);
    /* Map another process's allocation here: *p is its first byte, device memory this
     * backend's slots take (copy from and to it); *bytes (may be NULL) its size, 0 where the
     * backend cannot tell (CUDA). A handle of
     * this very process, another backend or another host fails (-EINVAL, -ENOENT). */
    int (*ipc_open)(hs_kernels_t *k, const hs_ipc_handle_t *h, void **p, size_t *bytes);
    /* Unmap what ipc_open mapped (never free it). */
    void (*ipc_close)(hs_kernels_t *k, void *p);

    /* ---- compression (optional; the formats of hearsay/compress.h, bit for bit on the CPU
     * and the emulated device; through hs_compress_dev, never called directly) ---- */
    /* out (device, c->bytes) = x (device, c->n floats) compressed, *bytes its size: none,
     * fp16, bf16, int8 and random-k; -ENOTSUP for top-k (its selection runs on the host). A
     * non-finite value under int8 gives a non-finite scale (the CPU's slot: -ERANGE). */
    int (*compress)(hs_kernels_t *k, const hs_kcompress_t *c, const float *x, void *out,
                    size_t *bytes);
    /* y (device, c->n) = (add: y + alpha *) the vector that `bytes` bytes at in (device) stand
     * for, any kind; the bytes are valid (checked by the caller while they were on the host). */
    int (*decompress)(hs_kernels_t *k, const hs_kcompress_t *c, const void *in, size_t bytes,
                      float alpha, int add, float *y);
} hs_kernel_ops_t;

struct hs_kernels {
    const hs_kernel_ops_t *ops;
    hs_device_t device;
    int device_index; /* GPU ordinal for CUDA; 0 on CPU */
    int threads;      /* CPU threads used by BLAS and loops (1 = single-threaded) */
    void *impl;       /* backend state (cuBLAS/cuDNN handles, stream, ...) */
    /* The products' precision (hs_kernels_set_precision; read by the backends' gemm and conv
     * slots), and TF32 for fp32 products (an explicit choice: off by default). */
    hs_precision_t precision;
    int tf32;
    /* Host scratch of the CPU slots' rounded operands (kernels.c; freed at close). */
    float *round_buf;
    size_t round_floats;
};

/* 1 when k's ops table is large enough to hold `slot` (a table of an older build may end
 * before the optional slots) and fills it. */
#define HS_KOP_HAS(k, slot)                                                                        \
    ((k)->ops->size >= offsetof(hs_kernel_ops_t, slot) + sizeof((k)->ops->slot) &&                 \
     (k)->ops->slot != NULL)

/* 1 when k's device memory is the host's own (the CPU backend): the host may read and write it,
 * and staging through host memory is nothing to do. 0 for CUDA and the emulated device. */
int hs_kernels_is_host(const hs_kernels_t *k);

/* Host memory for staging copies through the backend's host_alloc slot (page-locked on CUDA),
 * or ordinary 64-byte aligned memory where the backend has none; `what` names it in the
 * -ENOMEM message. Free with hs_kernels_host_free (NULL is fine). */
int hs_kernels_host_alloc(hs_kernels_t *k, size_t bytes, void **out, const char *what);
void hs_kernels_host_free(hs_kernels_t *k, void *p);

/* The precision of k's matrix products (hs_precision_t): fp32 (the default), bf16 or fp16, and
 * tf32 (0 or 1) to let fp32 products round their operands to TF32 (10-bit mantissas; only with
 * fp32). Set it right after hs_kernels_open, before any workspace size is asked (CUDA's
 * convolutions take their rounded operands' room from conv2d_workspace). -EINVAL for a bad
 * value or tf32 with bf16/fp16. */
int hs_kernels_set_precision(hs_kernels_t *k, hs_precision_t p, int tf32);
/* "fp32", "bf16", "fp16" (and NULL for an unknown value). */
const char *hs_precision_name(hs_precision_t p);
/* Parse "fp32" / "bf16" / "fp16"; -EINVAL naming the choices. */
int hs_precision_parse(const char *s, hs_precision_t *p);
/* x rounded to precision p (nearest even; fp16: inf past its range, 0 or a subnormal below it),
 * or to TF32 when p is fp32 and tf32 is set; x itself for plain fp32. */
float hs_round_to_precision(float x, hs_precision_t p, int tf32);
/* Rounded copies for the CPU slots: operand i (src[i], n[i] floats; src[i] NULL: none) rounded
 * as k's precision says, into k's host scratch (grown to hold all of them), *out[i] the copy;
 * where k's products are plain fp32, out[i] = src[i] and nothing is copied. */
int hs_kernels_round_operands(hs_kernels_t *k, int count, const float *const *src, const size_t *n,
                              const float **out);

/* Open a kernel backend. `threads` (CPU) sets the BLAS thread count (0 = library default).
 * CUDA: -ENOSYS when built without CUDA, -ENODEV when no GPU is visible, with a message. */
int hs_kernels_open(hs_kernels_t **out, hs_device_t dev, int device_index, int threads);
void hs_kernels_close(hs_kernels_t **k);
/* Parse "cpu" / "emu" / "cuda" / "cuda:N" ("cuda" gives index 0; hs_device_select picks one). */
int hs_device_parse(const char *s, hs_device_t *dev, int *index);
/* The device a worker uses (docs/launch.md, "GPUs"): cpu; cuda:N pins device N; cuda takes
 * local_rank modulo the number of visible devices (CUDA_VISIBLE_DEVICES), so the ranks of a
 * host spread over its GPUs. A CUDA spec is checked against the devices now: -ENOSYS in a build
 * without CUDA, -ENODEV with the driver's reason when none is usable, or when N is not visible.
 * dev and index may be NULL (a check only). */
int hs_device_select(const char *s, int local_rank, hs_device_t *dev, int *index);
/* 1 when a CUDA device can be used by this build (built with CUDA and a GPU present). */
int hs_cuda_available(void);

/* Backend constructors (used by hs_kernels_open; the CUDA one returns -ENOSYS without CUDA). */
int hs_kernels_cpu_open(hs_kernels_t *k, int threads);
void hs_kernels_cpu_close(hs_kernels_t *k);
/* The emulated device (kernels/emu.c): the CPU backend's math behind checked, poisoned device
 * memory. hs_kernels_emu_is_device: 1 when p lies in memory from its alloc (any handle's);
 * hs_kernels_emu_poisons: 1 in a build with AddressSanitizer, where host access to that memory
 * is reported. */
int hs_kernels_emu_open(hs_kernels_t *k, int threads);
void hs_kernels_emu_close(hs_kernels_t *k);
int hs_kernels_emu_is_device(const void *p);
/* Emulated device allocations of at least this many bytes live in a memfd that another process
 * of the host can map (ipc_handle / ipc_open: CUDA IPC's stand-in). */
#define HS_EMU_IPC_MIN ((size_t)64 << 10)
int hs_kernels_emu_poisons(void);
int hs_kernels_cuda_open(hs_kernels_t *k, int device_index);
void hs_kernels_cuda_close(hs_kernels_t *k);
int hs_kernels_cuda_device_count(void);
/* The visible CUDA devices (>= 1) in *count, or -ENODEV with the driver's reason
 * (cudaGetDeviceCount's error) / -ENOSYS without CUDA. */
int hs_kernels_cuda_probe(int *count);
/* Load the libraries the CUDA backend opens on demand rather than at start (cuBLAS, whose
 * thread-local storage would otherwise be set up in every thread: kernels/cuda/cuda_cublas.cu).
 * Opening a CUDA device does it; 0, or the reason (-ENOSYS without CUDA). No GPU needed. */
int hs_kernels_cuda_libs_load(void);

#ifdef __cplusplus
}
#endif
#endif
