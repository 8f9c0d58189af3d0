/*
 * kernels/cuda/cuda_conv.cu — the CUDA backend's convolution (cuDNN) and max pooling (own
 * kernels).
 *
 * Convolution: each geometry gets a plan (cuDNN descriptors plus the algorithms cuDNN's
 * heuristics rank for forward, backward-data and backward-filter, each with its workspace
 * size), kept in a small cache in the context. Math is plain FP32 (CUDNN_FMA_MATH, no TF32),
 * so results match the CPU backend within rounding, unless the products' precision says
 * otherwise (hearsay/kernels.h): with tf32, TF32 tensor-core algorithms are allowed; with bf16
 * or fp16, the operands are first rounded to it (k_round, into the context's scratch) and
 * the TF32 algorithms run on them, exactly, since TF32 holds every bf16 and fp16 value.
 * A call uses the best-ranked algorithm whose workspace fits in what the caller passed;
 * conv2d_workspace reports the size the preferred algorithms need (at most
 * HS_KCUDA_CONV_WS_CAP), and every direction also has an algorithm that needs none.
 *
 * Max pooling: forward writes y and, when asked, argmax (flat index into x); backward gathers:
 * each input element adds dy of the windows whose argmax it is (no atomics, deterministic).
 */
#include "cuda_internal.h"

#include <string.h>

/* ---- convolution plans ---- */

static int conv_check(const hs_conv2d_desc_t *d)
{
    if (!d) return HS_ERR(-EINVAL, "cuda conv2d: descriptor is NULL");
    if (d->B <= 0 || d->C <= 0 || d->H <= 0 || d->W <= 0 || d->K <= 0 || d->R <= 0 || d->S <= 0 ||
        d->pad < 0 || d->stride <= 0)
        return HS_ERR(-EINVAL,
                      "cuda conv2d: bad geometry B=%d C=%d H=%d W=%d K=%d R=%d S=%d pad=%d "
                      "stride=%d",
                      d->B, d->C, d->H, d->W, d->K, d->R, d->S, d->pad, d->stride);
    int P = (d->H + 2 * d->pad - d->R) / d->stride + 1;
    int Q = (d->W + 2 * d->pad - d->S) / d->stride + 1;
    if (d->H + 2 * d->pad < d->R || d->W + 2 * d->pad < d->S || d->P != P || d->Q != Q)
        return HS_ERR(-EINVAL,
                      "cuda conv2d: output %dx%d does not match input %dx%d, filter %dx%d, "
                      "pad %d, stride %d (expected %dx%d)",
                      d->P, d->Q, d->H, d->W, d->R, d->S, d->pad, d->stride, P, Q);
    return 0;
}

static int same_geometry(const hs_conv2d_desc_t *a, const hs_conv2d_desc_t *b)
{
    return a->B == b->B && a->C == b->C && a->H == b->H && a->W == b->W && a->K == b->K &&
           a->R == b->R && a->S == b->S && a->pad == b->pad && a->stride == b->stride;
}

static void plan_release(hs_kcuda_conv_plan_t *p)
{
    if (p->x) cudnnDestroyTensorDescriptor(p->x);
    if (p->y) cudnnDestroyTensorDescriptor(p->y);
    if (p->bias) cudnnDestroyTensorDescriptor(p->bias);
    if (p->w) cudnnDestroyFilterDescriptor(p->w);
    if (p->conv) cudnnDestroyConvolutionDescriptor(p->conv);
    memset(p, 0, sizeof(*p));
}

void hs_kcuda_conv_plans_destroy(hs_kcuda_t *c)
{
    for (int i = 0; i < HS_KCUDA_CONV_PLANS; i++) plan_release(&c->plans[i]);
}

/* Without tensor math, TF32 tensor-core algorithms are passed over: they round inputs to
 * 10-bit mantissas. With it, only those that convert to fp16 (which would round bf16 operands
 * once more and cut their range) are. */
static int usable(cudnnMathType_t m, int tensor_math)
{
    if (tensor_math) return m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    return m == CUDNN_DEFAULT_MATH || m == CUDNN_FMA_MATH;
}

/* k's convolutions may use TF32 tensor cores: tf32 asked, or operands rounded to bf16/fp16. */
static int wants_tensor_math(const hs_kernels_t *k)
{
    return k->tf32 || k->precision != HS_PREC_FP32;
}

/* Fill the descriptors of p for geometry d and rank the algorithms. */
static int plan_build(hs_kcuda_t *c, hs_kcuda_conv_plan_t *p, const hs_conv2d_desc_t *d,
                      int tensor_math)
{
    p->d = *d;
    p->tensor_math = tensor_math;
    HS_KCUDNN_CHECK(cudnnCreateTensorDescriptor(&p->x));
    HS_KCUDNN_CHECK(cudnnCreateTensorDescriptor(&p->y));
    HS_KCUDNN_CHECK(cudnnCreateTensorDescriptor(&p->bias));
    HS_KCUDNN_CHECK(cudnnCreateFilterDescriptor(&p->w));
    HS_KCUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p->conv));
    HS_KCUDNN_CHECK(cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, d->B,
                                               d->C, d->H, d->W));
    HS_KCUDNN_CHECK(cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, d->B,
                                               d->K, d->P, d->Q));
    HS_KCUDNN_CHECK(
        cudnnSetTensor4dDescriptor(p->bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, d->K, 1, 1));
    HS_KCUDNN_CHECK(cudnnSetFilter4dDescriptor(p->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, d->K,
                                               d->C, d->R, d->S));
    HS_KCUDNN_CHECK(cudnnSetConvolution2dDescriptor(p->conv, d->pad, d->pad, d->stride, d->stride,
                                                    1, 1, CUDNN_CROSS_CORRELATION,
                                                    CUDNN_DATA_FLOAT));
    HS_KCUDNN_CHECK(
        cudnnSetConvolutionMathType(p->conv, tensor_math ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
    int n, on, oc, oh, ow;
    HS_KCUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(p->conv, p->x, p->w, &on, &oc, &oh, &ow));
    if (on != d->B || oc != d->K || oh != d->P || ow != d->Q)
        return HS_ERR(-EINVAL,
                      "cuda conv2d: cuDNN computes output (%d, %d, %d, %d), the "
                      "descriptor says (%d, %d, %d, %d)",
                      on, oc, oh, ow, d->B, d->K, d->P, d->Q);

    cudnnHandle_t h = c->cudnn;
    size_t ws = 0;
    size_t want_fwd = 0, want_data = 0, want_filter = 0;

    cudnnConvolutionFwdAlgoPerf_t fperf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    HS_KCUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(
        h, p->x, p->w, p->conv, p->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, fperf));
    p->n_fwd = 0;
    for (int i = 0; i < n; i++) {
        if (fperf[i].status != CUDNN_STATUS_SUCCESS || !usable(fperf[i].mathType, tensor_math))
            continue;
        if (cudnnGetConvolutionForwardWorkspaceSize(h, p->x, p->w, p->conv, p->y, fperf[i].algo,
                                                    &ws) != CUDNN_STATUS_SUCCESS)
            continue;
        p->fwd[p->n_fwd] = fperf[i].algo;
        p->fwd_ws[p->n_fwd++] = ws;
    }
    cudnnConvolutionBwdDataAlgoPerf_t dperf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    HS_KCUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        h, p->w, p->y, p->conv, p->x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, dperf));
    p->n_bwd_data = 0;
    for (int i = 0; i < n; i++) {
        if (dperf[i].status != CUDNN_STATUS_SUCCESS || !usable(dperf[i].mathType, tensor_math))
            continue;
        if (cudnnGetConvolutionBackwardDataWorkspaceSize(
                h, p->w, p->y, p->conv, p->x, dperf[i].algo, &ws) != CUDNN_STATUS_SUCCESS)
            continue;
        p->bwd_data[p->n_bwd_data] = dperf[i].algo;
        p->bwd_data_ws[p->n_bwd_data++] = ws;
    }
    cudnnConvolutionBwdFilterAlgoPerf_t wperf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    HS_KCUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        h, p->x, p->y, p->conv, p->w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, wperf));
    p->n_bwd_filter = 0;
    for (int i = 0; i < n; i++) {
        if (wperf[i].status != CUDNN_STATUS_SUCCESS || !usable(wperf[i].mathType, tensor_math))
            continue;
        if (cudnnGetConvolutionBackwardFilterWorkspaceSize(
                h, p->x, p->y, p->conv, p->w, wperf[i].algo, &ws) != CUDNN_STATUS_SUCCESS)
            continue;
        p->bwd_filter[p->n_bwd_filter] = wperf[i].algo;
        p->bwd_filter_ws[p->n_bwd_filter++] = ws;
    }
    if (p->n_fwd == 0 || p->n_bwd_data == 0 || p->n_bwd_filter == 0)
        return HS_ERR(-ENOTSUP,
                      "cuda conv2d: cuDNN offers no FP32 algorithm for B=%d C=%d H=%d W=%d K=%d "
                      "R=%d S=%d pad=%d stride=%d (forward %d, backward data %d, backward "
                      "filter %d)",
                      d->B, d->C, d->H, d->W, d->K, d->R, d->S, d->pad, d->stride, p->n_fwd,
                      p->n_bwd_data, p->n_bwd_filter);
    /* The preferred algorithm of each direction: the best-ranked one under the cap. */
    for (int i = 0; i < p->n_fwd; i++)
        if (p->fwd_ws[i] <= HS_KCUDA_CONV_WS_CAP) {
            want_fwd = p->fwd_ws[i];
            break;
        }
    for (int i = 0; i < p->n_bwd_data; i++)
        if (p->bwd_data_ws[i] <= HS_KCUDA_CONV_WS_CAP) {
            want_data = p->bwd_data_ws[i];
            break;
        }
    for (int i = 0; i < p->n_bwd_filter; i++)
        if (p->bwd_filter_ws[i] <= HS_KCUDA_CONV_WS_CAP) {
            want_filter = p->bwd_filter_ws[i];
            break;
        }
    p->ws_bytes = HS_MAX(want_fwd, HS_MAX(want_data, want_filter));
    p->valid = 1;
    return 0;
}

/* The cached plan for d (and k's math), built on first use. */
static int plan_get(hs_kernels_t *k, const hs_conv2d_desc_t *d, hs_kcuda_conv_plan_t **out)
{
    hs_kcuda_t *c = hs_kcuda(k);
    int tm = wants_tensor_math(k);
    for (int i = 0; i < HS_KCUDA_CONV_PLANS; i++)
        if (c->plans[i].valid && same_geometry(&c->plans[i].d, d) &&
            c->plans[i].tensor_math == tm) {
            *out = &c->plans[i];
            return 0;
        }
    hs_kcuda_conv_plan_t *p = NULL;
    for (int i = 0; i < HS_KCUDA_CONV_PLANS && !p; i++)
        if (!c->plans[i].valid) p = &c->plans[i];
    if (!p) {
        p = &c->plans[c->next_plan];
        c->next_plan = (c->next_plan + 1) % HS_KCUDA_CONV_PLANS;
    }
    plan_release(p);
    int rc = plan_build(c, p, d, tm);
    if (rc < 0) {
        plan_release(p);
        return rc;
    }
    *out = p;
    return 0;
}

/* n floats rounded up to a multiple of 64 (256-byte aligned parts of the scratch). */
static size_t round_up(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

/* Index of the best-ranked algorithm among n whose workspace fits in `have` bytes, or -1. */
static int pick(int n, const size_t *need, void *ws, size_t have)
{
    if (!ws) have = 0;
    for (int i = 0; i < n; i++)
        if (need[i] <= have) return i;
    return -1;
}

static int no_algorithm(const char *what, const hs_kcuda_conv_plan_t *p, size_t have)
{
    return HS_ERR(-EINVAL,
                  "cuda conv2d %s: no cuDNN algorithm fits the %zu-byte workspace (conv2d_"
                  "workspace asks for %zu)",
                  what, have, p->ws_bytes);
}

size_t hs_kcuda_conv2d_workspace(hs_kernels_t *k, const hs_conv2d_desc_t *d)
{
    if (conv_check(d) < 0 || hs_kcuda_enter(k) < 0) return 0;
    hs_kcuda_conv_plan_t *p;
    if (plan_get(k, d, &p) < 0) return 0; /* the conv call will report it again */
    return p->ws_bytes;
}

int hs_kcuda_conv2d_fwd(hs_kernels_t *k, const hs_conv2d_desc_t *d, const float *x, const float *w,
                        const float *bias, float *y, void *ws, size_t ws_bytes)
{
    HS_TRY(conv_check(d));
    if (!x || !w || !y) return HS_ERR(-EINVAL, "cuda conv2d_fwd: NULL tensor");
    HS_TRY(hs_kcuda_enter(k));
    hs_kcuda_t *c = hs_kcuda(k);
    hs_kcuda_conv_plan_t *p;
    HS_TRY(plan_get(k, d, &p));
    int a = pick(p->n_fwd, p->fwd_ws, ws, ws_bytes);
    if (a < 0) return no_algorithm("forward", p, ws_bytes);
    if (k->precision != HS_PREC_FP32) { /* operands in the products' precision */
        size_t nx = (size_t)d->B * d->C * d->H * d->W, nw = (size_t)d->K * d->C * d->R * d->S;
        float *r;
        HS_TRY(hs_kcuda_scratch(c, (round_up(nx) + nw) * sizeof(float), (void **)&r));
        HS_TRY(hs_kcuda_round(c, k->precision, nx, x, r));
        HS_TRY(hs_kcuda_round(c, k->precision, nw, w, r + round_up(nx)));
        x = r;
        w = r + round_up(nx);
    }
    const float one = 1.0f, zero = 0.0f;
    HS_KCUDNN_CHECK(cudnnConvolutionForward(c->cudnn, &one, p->x, x, p->w, w, p->conv, p->fwd[a],
                                            ws, p->fwd_ws[a], &zero, p->y, y));
    if (bias) HS_KCUDNN_CHECK(cudnnAddTensor(c->cudnn, &one, p->bias, bias, &one, p->y, y));
    return 0;
}

int hs_kcuda_conv2d_bwd(hs_kernels_t *k, const hs_conv2d_desc_t *d, const float *x, const float *w,
                        const float *dy, float *dx, float *dw, float *dbias, void *ws,
                        size_t ws_bytes)
{
    HS_TRY(conv_check(d));
    if (!dy || (dx && !w) || (dw && !x)) return HS_ERR(-EINVAL, "cuda conv2d_bwd: NULL tensor");
    HS_TRY(hs_kcuda_enter(k));
    hs_kcuda_t *c = hs_kcuda(k);
    hs_kcuda_conv_plan_t *p;
    HS_TRY(plan_get(k, d, &p));
    const float one = 1.0f, zero = 0.0f;
    if (k->precision != HS_PREC_FP32) { /* operands in the products' precision */
        size_t ny = (size_t)d->B * d->K * d->P * d->Q, nx = (size_t)d->B * d->C * d->H * d->W;
        size_t nw = (size_t)d->K * d->C * d->R * d->S;
        float *r;
        HS_TRY(
            hs_kcuda_scratch(c, (round_up(ny) + round_up(nx) + nw) * sizeof(float), (void **)&r));
        HS_TRY(hs_kcuda_round(c, k->precision, ny, dy, r));
        dy = r;
        if (dw) HS_TRY(hs_kcuda_round(c, k->precision, nx, x, r + round_up(ny)));
        if (dw) x = r + round_up(ny);
        if (dx) HS_TRY(hs_kcuda_round(c, k->precision, nw, w, r + round_up(ny) + round_up(nx)));
        if (dx) w = r + round_up(ny) + round_up(nx);
    }
    if (dx) {
        int a = pick(p->n_bwd_data, p->bwd_data_ws, ws, ws_bytes);
        if (a < 0) return no_algorithm("backward data", p, ws_bytes);
        HS_KCUDNN_CHECK(cudnnConvolutionBackwardData(c->cudnn, &one, p->w, w, p->y, dy, p->conv,
                                                     p->bwd_data[a], ws, p->bwd_data_ws[a], &zero,
                                                     p->x, dx));
    }
    if (dw) { /* beta = 1: accumulate into dw */
        int a = pick(p->n_bwd_filter, p->bwd_filter_ws, ws, ws_bytes);
        if (a < 0) return no_algorithm("backward filter", p, ws_bytes);
        HS_KCUDNN_CHECK(cudnnConvolutionBackwardFilter(c->cudnn, &one, p->x, x, p->y, dy, p->conv,
                                                       p->bwd_filter[a], ws, p->bwd_filter_ws[a],
                                                       &one, p->w, dw));
    }
    if (dbias)
        HS_KCUDNN_CHECK(
            cudnnConvolutionBackwardBias(c->cudnn, &one, p->y, dy, &one, p->bias, dbias));
    return 0;
}

/* ---- max pooling ---- */

static int pool_check(const hs_pool2d_desc_t *d)
{
    if (!d) return HS_ERR(-EINVAL, "cuda maxpool: descriptor is NULL");
    if (d->B <= 0 || d->C <= 0 || d->H <= 0 || d->W <= 0 || d->size <= 0 || d->stride <= 0 ||
        d->size > d->H || d->size > d->W)
        return HS_ERR(-EINVAL, "cuda maxpool: bad geometry B=%d C=%d H=%d W=%d size=%d stride=%d",
                      d->B, d->C, d->H, d->W, d->size, d->stride);
    int P = (d->H - d->size) / d->stride + 1, Q = (d->W - d->size) / d->stride + 1;
    if (d->P != P || d->Q != Q)
        return HS_ERR(-EINVAL,
                      "cuda maxpool: output %dx%d does not match input %dx%d, window %d, "
                      "stride %d (expected %dx%d)",
                      d->P, d->Q, d->H, d->W, d->size, d->stride, P, Q);
    if ((double)d->B * d->C * d->H * d->W > 2147483647.0)
        return HS_ERR(-EINVAL,
                      "cuda maxpool: input of %d x %d x %d x %d elements is too large "
                      "for int32 argmax indices",
                      d->B, d->C, d->H, d->W);
    return 0;
}

/* y (B, C, P, Q) = window maxima of x (B, C, H, W); argmax (same shape, may be NULL) = flat
 * index into x of each maximum (the first in row-major window order on ties). y may be NULL. */
static __global__ void k_maxpool_fwd(hs_pool2d_desc_t d, const float *x, float *y, int32_t *argmax)
{
    size_t total = (size_t)d.B * d.C * d.P * d.Q;
    for (size_t o = (size_t)blockIdx.x * blockDim.x + threadIdx.x; o < total;
         o += (size_t)gridDim.x * blockDim.x) {
        int q = (int)(o % d.Q);
        int p = (int)((o / d.Q) % d.P);
        size_t plane = o / ((size_t)d.P * d.Q); /* b * C + c */
        size_t base = plane * d.H * d.W;
        int h0 = p * d.stride, w0 = q * d.stride;
        size_t best = base + (size_t)h0 * d.W + w0;
        float m = x[best];
        for (int i = 0; i < d.size; i++)
            for (int j = 0; j < d.size; j++) {
                size_t at = base + (size_t)(h0 + i) * d.W + (w0 + j);
                float v = x[at];
                if (v > m) m = v, best = at;
            }
        if (y) y[o] = m;
        if (argmax) argmax[o] = (int32_t)best;
    }
}

/* dx (B, C, H, W) = sum of dy over the windows whose argmax is this element (overwrites). */
static __global__ void k_maxpool_bwd(hs_pool2d_desc_t d, const int32_t *argmax, const float *dy,
                                     float *dx)
{
    size_t total = (size_t)d.B * d.C * d.H * d.W;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        int w = (int)(i % d.W);
        int h = (int)((i / d.W) % d.H);
        size_t plane = i / ((size_t)d.H * d.W);
        /* windows p with p * stride <= h < p * stride + size */
        int p_lo = h - d.size + 1 <= 0 ? 0 : (h - d.size + d.stride) / d.stride;
        int q_lo = w - d.size + 1 <= 0 ? 0 : (w - d.size + d.stride) / d.stride;
        int p_hi = HS_MIN(h / d.stride, d.P - 1), q_hi = HS_MIN(w / d.stride, d.Q - 1);
        float g = 0.0f;
        for (int p = p_lo; p <= p_hi; p++)
            for (int q = q_lo; q <= q_hi; q++) {
                size_t o = (plane * d.P + p) * d.Q + q;
                if ((size_t)argmax[o] == i) g += dy[o];
            }
        dx[i] = g;
    }
}

int hs_kcuda_maxpool_fwd(hs_kernels_t *k, const hs_pool2d_desc_t *d, const float *x, float *y,
                         int32_t *argmax)
{
    HS_TRY(pool_check(d));
    if (!x || !y) return HS_ERR(-EINVAL, "cuda maxpool_fwd: NULL tensor");
    HS_TRY(hs_kcuda_enter(k));
    hs_kcuda_t *c = hs_kcuda(k);
    size_t outs = (size_t)d->B * d->C * d->P * d->Q;
    k_maxpool_fwd<<<hs_kcuda_blocks(c, outs), HS_KCUDA_THREADS, 0, c->stream>>>(*d, x, y, argmax);
    HS_KCUDA_LAUNCHED("k_maxpool_fwd");
    return 0;
}

int hs_kcuda_maxpool_bwd(hs_kernels_t *k, const hs_pool2d_desc_t *d, const float *x, const float *y,
                         const int32_t *argmax, const float *dy, float *dx)
{
    HS_TRY(pool_check(d));
    if (!dy || !dx || (!argmax && !x))
        return HS_ERR(-EINVAL, "cuda maxpool_bwd: NULL tensor (x is needed without argmax)");
    HS_TRY(hs_kcuda_enter(k));
    hs_kcuda_t *c = hs_kcuda(k);
    size_t outs = (size_t)d->B * d->C * d->P * d->Q;
    size_t ins = (size_t)d->B * d->C * d->H * d->W;
    if (!argmax) { /* recompute the maxima's positions from x */
        void *scratch;
        HS_TRY(hs_kcuda_scratch(c, outs * sizeof(int32_t), &scratch));
        k_maxpool_fwd<<<hs_kcuda_blocks(c, outs), HS_KCUDA_THREADS, 0, c->stream>>>(
            *d, x, NULL, (int32_t *)scratch);
        HS_KCUDA_LAUNCHED("k_maxpool_fwd");
        argmax = (const int32_t *)scratch;
    }
    k_maxpool_bwd<<<hs_kcuda_blocks(c, ins), HS_KCUDA_THREADS, 0, c->stream>>>(*d, argmax, dy, dx);
    HS_KCUDA_LAUNCHED("k_maxpool_bwd");
    return 0;
}
