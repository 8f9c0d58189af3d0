/*
 * kernels/cuda/cuda_reduce.cu — the CUDA backend's reductions (sum, dot, nrm2, accumulated in
 * double) and the softmax + cross-entropy loss.
 *
 * Reductions run in two passes with a fixed launch shape, so a result does not depend on
 * timing: pass 1 has each block add a grid-stride share into one partial (c->partials), pass 2
 * (one block) adds the partials into c->result_dev, which is then copied to pinned host memory.
 */
#include "cuda_internal.h"

#include <math.h>

enum { RED_SUM = 0, RED_DOT = 1, RED_SUMSQ = 2 };

template <int KIND> static __device__ __forceinline__ double red_term(float x, float y)
{
    if (KIND == RED_SUM) return (double)x;
    if (KIND == RED_DOT) return (double)x * (double)y;
    return (double)x * (double)x;
}

/* partials[blockIdx.x] = this block's share of the reduction of x (and y) over n elements. */
template <int KIND>
static __global__ void k_reduce_partial(size_t n, int vec, const float *x, const float *y,
                                        double *partials)
{
    size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    double acc = 0.0;
    size_t done = 0;
    if (vec) {
        size_t n4 = n / 4;
        const float4 *x4 = reinterpret_cast<const float4 *>(x);
        const float4 *y4 = reinterpret_cast<const float4 *>(KIND == RED_DOT ? y : x);
        for (size_t i = tid; i < n4; i += stride) {
            float4 a = x4[i], b = y4[i];
            acc += red_term<KIND>(a.x, b.x) + red_term<KIND>(a.y, b.y) + red_term<KIND>(a.z, b.z) +
                   red_term<KIND>(a.w, b.w);
        }
        done = n4 * 4;
    }
    for (size_t i = done + tid; i < n; i += stride)
        acc += red_term<KIND>(x[i], KIND == RED_DOT ? y[i] : 0.0f);
    acc = hs_kcuda_block_sum(acc);
    if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

/* out->value = sum of partials (G); one block. */
static __global__ void k_reduce_final(int G, const double *partials, hs_kcuda_result_t *out)
{
    double acc = 0.0;
    for (int i = threadIdx.x; i < G; i += blockDim.x) acc += partials[i];
    acc = hs_kcuda_block_sum(acc);
    if (threadIdx.x == 0) {
        out->value = acc;
        out->correct = 0;
        out->bad_labels = 0;
    }
}

template <int KIND>
static int reduce_run(hs_kernels_t *k, const char *what, size_t n, const float *x, const float *y,
                      double *out_host)
{
    if (!out_host) return HS_ERR(-EINVAL, "cuda %s: out_host is NULL", what);
    if (n > 0 && (!x || (KIND == RED_DOT && !y)))
        return HS_ERR(-EINVAL, "cuda %s: NULL vector", what);
    *out_host = 0.0;
    if (n == 0) return 0;
    HS_TRY(hs_kcuda_enter(k));
    hs_kcuda_t *c = hs_kcuda(k);
    int vec = hs_kcuda_aligned4(x, KIND == RED_DOT ? y : NULL);
    unsigned G = hs_kcuda_blocks(c, vec ? (n + 3) / 4 : n);
    if (G > HS_KCUDA_MAX_PARTIALS) G = HS_KCUDA_MAX_PARTIALS;
    k_reduce_partial<KIND><<<G, HS_KCUDA_THREADS, 0, c->stream>>>(n, vec, x, y, c->partials);
    HS_KCUDA_LAUNCHED("k_reduce_partial");
    k_reduce_final<<<1, HS_KCUDA_THREADS, 0, c->stream>>>((int)G, c->partials, c->result_dev);
    HS_KCUDA_LAUNCHED("k_reduce_final");
    HS_TRY(hs_kcuda_fetch_result(c));
    *out_host = c->result_host->value;
    return 0;
}

int hs_kcuda_sum(hs_kernels_t *k, size_t n, const float *x, double *out_host)
{
    return reduce_run<RED_SUM>(k, "sum", n, x, NULL, out_host);
}

int hs_kcuda_dot(hs_kernels_t *k, size_t n, const float *x, const float *y, double *out_host)
{
    return reduce_run<RED_DOT>(k, "dot", n, x, y, out_host);
}

int hs_kcuda_nrm2(hs_kernels_t *k, size_t n, const float *x, double *out_host)
{
    HS_TRY(reduce_run<RED_SUMSQ>(k, "nrm2", n, x, NULL, out_host));
    *out_host = sqrt(*out_host);
    return 0;
}

/* ---- softmax + cross-entropy ---- */

/* Per-row results of the softmax kernel, in the scratch buffer. */
#define XENT_CORRECT 1
#define XENT_BAD     2

/* Block-wide (max, first index of the max); thread 0 gets the answer. */
static __device__ void block_argmax(float &m, int &idx)
{
    __shared__ float sm[32];
    __shared__ int si[32];
    for (int off = 16; off > 0; off >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, off);
        int i2 = __shfl_xor_sync(0xffffffffu, idx, off);
        if (m2 > m || (m2 == m && i2 < idx)) m = m2, idx = i2;
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
    __syncthreads();
    if (lane == 0) sm[warp] = m, si[warp] = idx;
    __syncthreads();
    if (warp == 0) {
        m = lane < nwarps ? sm[lane] : -INFINITY;
        idx = lane < nwarps ? si[lane] : 0x7fffffff;
        for (int off = 16; off > 0; off >>= 1) {
            float m2 = __shfl_xor_sync(0xffffffffu, m, off);
            int i2 = __shfl_xor_sync(0xffffffffu, idx, off);
            if (m2 > m || (m2 == m && i2 < idx)) m = m2, idx = i2;
        }
    }
}

/* One block per row (grid-stride over rows) of logits (B, C): the stable softmax
 * p = exp(x - max) / sum, probs and dlogits = (p - onehot) / B where asked, and per row the
 * loss log(sum) - (x[label] - max) and whether the argmax (first on ties) is the label.
 * probs or dlogits may be the logits buffer itself (each thread rewrites only what it read). */
static __global__ void k_softmax_xent(int B, int C, const float *logits, const int32_t *labels,
                                      float *probs, float *dlogits, float inv_B, double *row_loss,
                                      int *row_info)
{
    __shared__ float s_max, s_xl;
    __shared__ double s_sum;
    __shared__ int s_arg;
    for (int r = blockIdx.x; r < B; r += gridDim.x) {
        const float *x = logits + (size_t)r * C;
        float m = -INFINITY;
        int am = 0x7fffffff;
        for (int j = threadIdx.x; j < C; j += blockDim.x)
            if (x[j] > m) m = x[j], am = j; /* j grows: the first max of this thread wins */
        block_argmax(m, am);
        if (threadIdx.x == 0) s_max = m, s_arg = am;
        __syncthreads();
        m = s_max;
        double s = 0.0; /* in double, as the CPU backend */
        for (int j = threadIdx.x; j < C; j += blockDim.x) s += (double)expf(x[j] - m);
        s = hs_kcuda_block_sum(s);
        int label = labels[r];
        int bad = label < 0 || label >= C;
        if (threadIdx.x == 0) {
            s_sum = s;
            /* read before the writes below: dlogits (or probs) may be the logits themselves */
            s_xl = bad ? 0.0f : x[label];
        }
        __syncthreads();
        s = s_sum;
        if (probs || dlogits) {
            float inv_s = (float)(1.0 / s);
            for (int j = threadIdx.x; j < C; j += blockDim.x) {
                float p = expf(x[j] - m) * inv_s;
                if (probs) probs[(size_t)r * C + j] = p;
                if (dlogits) dlogits[(size_t)r * C + j] = (p - (j == label ? 1.0f : 0.0f)) * inv_B;
            }
        }
        if (threadIdx.x == 0) {
            row_loss[r] = bad ? 0.0 : log(s) - ((double)s_xl - (double)m);
            row_info[r] = bad ? XENT_BAD : (s_arg == label ? XENT_CORRECT : 0);
        }
        __syncthreads(); /* s_max / s_sum are rewritten for the next row */
    }
}

/* out = (total loss, correct rows, bad labels) over B rows; one block. */
static __global__ void k_xent_final(int B, const double *row_loss, const int *row_info,
                                    hs_kcuda_result_t *out)
{
    double loss = 0.0;
    int correct = 0, bad = 0;
    for (int r = threadIdx.x; r < B; r += blockDim.x) {
        loss += row_loss[r];
        correct += (row_info[r] & XENT_CORRECT) ? 1 : 0;
        bad += (row_info[r] & XENT_BAD) ? 1 : 0;
    }
    loss = hs_kcuda_block_sum(loss);
    correct = hs_kcuda_block_sum(correct);
    bad = hs_kcuda_block_sum(bad);
    if (threadIdx.x == 0) {
        out->value = loss;
        out->correct = correct;
        out->bad_labels = bad;
    }
}

int hs_kcuda_softmax_xent(hs_kernels_t *k, int B, int C, const float *logits, const int32_t *labels,
                          float *probs, float *dlogits, double *loss_host, int *correct_host)
{
    if (B < 0 || C <= 0) return HS_ERR(-EINVAL, "cuda softmax_xent: bad size B=%d C=%d", B, C);
    if (B == 0) {
        if (loss_host) *loss_host = 0.0;
        if (correct_host) *correct_host = 0;
        return 0;
    }
    if (!logits || !labels) return HS_ERR(-EINVAL, "cuda softmax_xent: NULL logits or labels");
    HS_TRY(hs_kcuda_enter(k));
    hs_kcuda_t *c = hs_kcuda(k);
    void *scratch;
    HS_TRY(hs_kcuda_scratch(c, (size_t)B * (sizeof(double) + sizeof(int)), &scratch));
    double *row_loss = (double *)scratch;  // (B)
    int *row_info = (int *)(row_loss + B); // (B)
    int threads = C <= 32 ? 32 : C <= 64 ? 64 : C <= 128 ? 128 : HS_KCUDA_THREADS;
    unsigned blocks = (unsigned)HS_MIN(B, c->sm_count * 32);
    k_softmax_xent<<<blocks, threads, 0, c->stream>>>(B, C, logits, labels, probs, dlogits,
                                                      1.0f / (float)B, row_loss, row_info);
    HS_KCUDA_LAUNCHED("k_softmax_xent");
    if (!loss_host && !correct_host) return 0;
    k_xent_final<<<1, HS_KCUDA_THREADS, 0, c->stream>>>(B, row_loss, row_info, c->result_dev);
    HS_KCUDA_LAUNCHED("k_xent_final");
    HS_TRY(hs_kcuda_fetch_result(c));
    const hs_kcuda_result_t *res = c->result_host;
    if (res->bad_labels > 0)
        return HS_ERR(-EINVAL,
                      "cuda softmax_xent: %d of %d labels are outside [0, %d) (their rows were "
                      "left out of the loss)",
                      res->bad_labels, B, C);
    if (loss_host) *loss_host = res->value / B;
    if (correct_host) *correct_host = res->correct;
    return 0;
}
