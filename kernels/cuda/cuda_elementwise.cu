/*
 * kernels/cuda/cuda_elementwise.cu — the CUDA backend's elementwise slots: axpy, scale, mix,
 * bias add and bias gradient, ReLU and tanh, global average pooling, and the SGD step.
 *
 * Each elementwise op is a functor with `one(i)` (element i) and `four(i4)` (elements 4 i4 ..
 * 4 i4 + 3 through float4 loads); map_run launches k_map over n elements, a grid-stride
 * loop, using `four` when every pointer is 16-byte aligned (views into the flat parameter
 * buffer may not be) and `one` for the tail.
 */
#include "cuda_internal.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

/* ---- float4 helpers ---- */

static __device__ __forceinline__ float4 ld4(const float *p, size_t i4)
{
    return reinterpret_cast<const float4 *>(p)[i4];
}
static __device__ __forceinline__ void st4(float *p, size_t i4, float4 v)
{
    reinterpret_cast<float4 *>(p)[i4] = v;
}

/* ---- the generic grid-stride map ---- */

template <typename Op> static __global__ void k_map(size_t n, int vec, Op op)
{
    size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t done = 0;
    if (vec) {
        size_t n4 = n / 4;
        for (size_t i4 = tid; i4 < n4; i4 += stride) op.four(i4);
        done = n4 * 4;
    }
    for (size_t i = done + tid; i < n; i += stride) op.one(i);
}

template <typename Op> static int map_run(hs_kernels_t *k, size_t n, int vec, const Op &op)
{
    hs_kcuda_t *c = hs_kcuda(k);
    k_map<Op>
        <<<hs_kcuda_blocks(c, vec ? (n + 3) / 4 : n), HS_KCUDA_THREADS, 0, c->stream>>>(n, vec, op);
    HS_KCUDA_LAUNCHED("k_map");
    return 0;
}

/* ---- functors ---- */

struct axpy_op {
    float a;
    const float *x;
    float *y;
    __device__ void one(size_t i) const
    {
        y[i] += a * x[i];
    }
    __device__ void four(size_t i) const
    {
        float4 xv = ld4(x, i), yv = ld4(y, i);
        yv.x += a * xv.x;
        yv.y += a * xv.y;
        yv.z += a * xv.z;
        yv.w += a * xv.w;
        st4(y, i, yv);
    }
};

struct scale_op {
    float a;
    float *x;
    __device__ void one(size_t i) const
    {
        x[i] *= a;
    }
    __device__ void four(size_t i) const
    {
        float4 v = ld4(x, i);
        v.x *= a;
        v.y *= a;
        v.z *= a;
        v.w *= a;
        st4(x, i, v);
    }
};

struct mix_op {
    float a, b;
    const float *x;
    float *y;
    __device__ void one(size_t i) const
    {
        y[i] = a * x[i] + b * y[i];
    }
    __device__ void four(size_t i) const
    {
        float4 xv = ld4(x, i), yv = ld4(y, i);
        yv.x = a * xv.x + b * yv.x;
        yv.y = a * xv.y + b * yv.y;
        yv.z = a * xv.z + b * yv.z;
        yv.w = a * xv.w + b * yv.w;
        st4(y, i, yv);
    }
};

/* The per-element rules, as functor types (resolved at compile time in device code). */
struct relu_f {
    __device__ float operator()(float v) const
    {
        return v > 0.0f ? v : 0.0f;
    }
};
struct tanh_f {
    __device__ float operator()(float v) const
    {
        return tanhf(v);
    }
};
struct relu_grad_f { /* y the forward output */
    __device__ float operator()(float y, float dy) const
    {
        return y > 0.0f ? dy : 0.0f;
    }
};
struct tanh_grad_f {
    __device__ float operator()(float y, float dy) const
    {
        return dy * (1.0f - y * y);
    }
};

/* y = F(x) (in place allowed). */
template <typename F> struct unary_op {
    const float *x;
    float *y;
    __device__ void one(size_t i) const
    {
        y[i] = F()(x[i]);
    }
    __device__ void four(size_t i) const
    {
        F f;
        float4 v = ld4(x, i);
        v.x = f(v.x);
        v.y = f(v.y);
        v.z = f(v.z);
        v.w = f(v.w);
        st4(y, i, v);
    }
};

/* dx = G(y, dy) (in place dx == dy allowed). */
template <typename G> struct backward_op {
    const float *y, *dy;
    float *dx;
    __device__ void one(size_t i) const
    {
        dx[i] = G()(y[i], dy[i]);
    }
    __device__ void four(size_t i) const
    {
        G g;
        float4 yv = ld4(y, i), d = ld4(dy, i);
        d.x = g(yv.x, d.x);
        d.y = g(yv.y, d.y);
        d.z = g(yv.z, d.z);
        d.w = g(yv.w, d.w);
        st4(dx, i, d);
    }
};

/* PyTorch's SGD: g = grad + wd param; vel = m vel + g; step = nesterov ? g + m vel : vel
 * (step = g without momentum); param -= lr step. */
struct sgd_op {
    float lr, momentum, wd;
    int nesterov;
    float *param;
    const float *grad;
    float *vel; /* NULL when momentum == 0 (then it is neither read nor written) */
    __device__ __forceinline__ void step1(float &p, float g, float &v) const
    {
        g += wd * p;
        float s = g;
        if (momentum != 0.0f) {
            v = momentum * v + g;
            s = nesterov ? g + momentum * v : v;
        }
        p -= lr * s;
    }
    __device__ void one(size_t i) const
    {
        float p = param[i], v = vel ? vel[i] : 0.0f;
        step1(p, grad[i], v);
        param[i] = p;
        if (vel) vel[i] = v;
    }
    __device__ void four(size_t i) const
    {
        float4 p = ld4(param, i), g = ld4(grad, i);
        float4 v = vel ? ld4(vel, i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        step1(p.x, g.x, v.x);
        step1(p.y, g.y, v.y);
        step1(p.z, g.z, v.z);
        step1(p.w, g.w, v.w);
        st4(param, i, p);
        if (vel) st4(vel, i, v);
    }
};

/* ---- argument checks ---- */

#define HS_NEED(cond, ...)                                                                         \
    do {                                                                                           \
        if (!(cond)) return HS_ERR(-EINVAL, __VA_ARGS__);                                          \
    } while (0)

/* ---- vector slots ---- */

int hs_kcuda_axpy(hs_kernels_t *k, size_t n, float a, const float *x, float *y)
{
    if (n == 0) return 0;
    HS_NEED(x && y, "cuda axpy: NULL vector");
    HS_TRY(hs_kcuda_enter(k));
    return map_run(k, n, hs_kcuda_aligned4(x, y), axpy_op{a, x, y});
}

int hs_kcuda_scale(hs_kernels_t *k, size_t n, float a, float *x)
{
    if (n == 0) return 0;
    HS_NEED(x, "cuda scale: NULL vector");
    HS_TRY(hs_kcuda_enter(k));
    return map_run(k, n, hs_kcuda_aligned4(x), scale_op{a, x});
}

int hs_kcuda_mix(hs_kernels_t *k, size_t n, float a, const float *x, float b, float *y)
{
    if (n == 0) return 0;
    HS_NEED(x && y, "cuda mix: NULL vector");
    HS_TRY(hs_kcuda_enter(k));
    return map_run(k, n, hs_kcuda_aligned4(x, y), mix_op{a, b, x, y});
}

int hs_kcuda_relu_fwd(hs_kernels_t *k, size_t n, const float *x, float *y)
{
    if (n == 0) return 0;
    HS_NEED(x && y, "cuda relu_fwd: NULL tensor");
    HS_TRY(hs_kcuda_enter(k));
    return map_run(k, n, hs_kcuda_aligned4(x, y), unary_op<relu_f>{x, y});
}

int hs_kcuda_relu_bwd(hs_kernels_t *k, size_t n, const float *y, const float *dy, float *dx)
{
    if (n == 0) return 0;
    HS_NEED(y && dy && dx, "cuda relu_bwd: NULL tensor");
    HS_TRY(hs_kcuda_enter(k));
    return map_run(k, n, hs_kcuda_aligned4(y, dy, dx), backward_op<relu_grad_f>{y, dy, dx});
}

int hs_kcuda_tanh_fwd(hs_kernels_t *k, size_t n, const float *x, float *y)
{
    if (n == 0) return 0;
    HS_NEED(x && y, "cuda tanh_fwd: NULL tensor");
    HS_TRY(hs_kcuda_enter(k));
    return map_run(k, n, hs_kcuda_aligned4(x, y), unary_op<tanh_f>{x, y});
}

int hs_kcuda_tanh_bwd(hs_kernels_t *k, size_t n, const float *y, const float *dy, float *dx)
{
    if (n == 0) return 0;
    HS_NEED(y && dy && dx, "cuda tanh_bwd: NULL tensor");
    HS_TRY(hs_kcuda_enter(k));
    return map_run(k, n, hs_kcuda_aligned4(y, dy, dx), backward_op<tanh_grad_f>{y, dy, dx});
}

int hs_kcuda_sgd_step(hs_kernels_t *k, size_t n, float lr, float momentum, float wd, int nesterov,
                      float *param, const float *grad, float *vel)
{
    if (n == 0) return 0;
    HS_NEED(param && grad, "cuda sgd_step: NULL parameter or gradient vector");
    HS_NEED(vel || momentum == 0.0f, "cuda sgd_step: momentum %g needs a velocity vector",
            (double)momentum);
    HS_TRY(hs_kcuda_enter(k));
    if (momentum == 0.0f) vel = NULL; /* as the CPU backend: no momentum leaves vel alone */
    int vec = hs_kcuda_aligned4(param, grad, vel);
    return map_run(k, n, vec, sgd_op{lr, momentum, wd, nesterov ? 1 : 0, param, grad, vel});
}

/* ---- bias ---- */

/* y (B, N) += bias (N): blockIdx.x covers columns, blockIdx.y (strided) rows. */
static __global__ void k_add_bias(int B, int N, const float *bias, float *y)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= N) return;
    float b = bias[j];
    for (int r = blockIdx.y; r < B; r += gridDim.y) y[(size_t)r * N + j] += b;
}

int hs_kcuda_add_bias(hs_kernels_t *k, int B, int N, const float *bias, float *y)
{
    HS_NEED(B >= 0 && N >= 0, "cuda add_bias: negative size B=%d N=%d", B, N);
    if (B == 0 || N == 0) return 0;
    HS_NEED(bias && y, "cuda add_bias: NULL tensor");
    HS_TRY(hs_kcuda_enter(k));
    hs_kcuda_t *c = hs_kcuda(k);
    dim3 grid((N + HS_KCUDA_THREADS - 1) / HS_KCUDA_THREADS, HS_MIN(B, 65535));
    k_add_bias<<<grid, HS_KCUDA_THREADS, 0, c->stream>>>(B, N, bias, y);
    HS_KCUDA_LAUNCHED("k_add_bias");
    return 0;
}

/* db (N) (+)= column sums of dy (B, N). Block (32, 8): threadIdx.x picks the column, the 8 rows
 * of threads split the rows; a shared-memory tree adds the 8 partial sums. */
#define BG_X 32
#define BG_Y 8
static __global__ void k_bias_grad(int B, int N, const float *dy, float *db, int accumulate)
{
    __shared__ float part[BG_Y][BG_X + 1];
    int j = blockIdx.x * BG_X + threadIdx.x;
    float s = 0.0f;
    if (j < N)
        for (int r = threadIdx.y; r < B; r += BG_Y) s += dy[(size_t)r * N + j];
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && j < N) {
        float t = 0.0f;
        for (int r = 0; r < BG_Y; r++) t += part[r][threadIdx.x];
        db[j] = accumulate ? db[j] + t : t;
    }
}

int hs_kcuda_bias_grad(hs_kernels_t *k, int B, int N, const float *dy, float *db, int accumulate)
{
    HS_NEED(B >= 0 && N >= 0, "cuda bias_grad: negative size B=%d N=%d", B, N);
    if (N == 0) return 0;
    HS_NEED(db && (dy || B == 0), "cuda bias_grad: NULL tensor");
    HS_TRY(hs_kcuda_enter(k));
    hs_kcuda_t *c = hs_kcuda(k);
    k_bias_grad<<<(N + BG_X - 1) / BG_X, dim3(BG_X, BG_Y), 0, c->stream>>>(B, N, dy, db,
                                                                           accumulate ? 1 : 0);
    HS_KCUDA_LAUNCHED("k_bias_grad");
    return 0;
}

/* ---- global average pooling ---- */

/* y (rows) = mean of each row of x (rows, HW): one warp per row. */
static __global__ void k_avgpool_fwd(size_t rows, int HW, const float *x, float *y)
{
    const int warps_per_block = HS_KCUDA_THREADS / 32;
    size_t warp = (size_t)blockIdx.x * warps_per_block + (threadIdx.x >> 5);
    size_t nwarps = (size_t)gridDim.x * warps_per_block;
    int lane = threadIdx.x & 31;
    float inv = 1.0f / (float)HW;
    for (size_t r = warp; r < rows; r += nwarps) {
        const float *xr = x + r * HW;
        float s = 0.0f;
        for (int t = lane; t < HW; t += 32) s += xr[t];
        s = hs_kcuda_warp_sum(s);
        if (lane == 0) y[r] = s * inv;
    }
}

int hs_kcuda_avgpool_global_fwd(hs_kernels_t *k, int B, int C, int HW, const float *x, float *y)
{
    HS_NEED(B >= 0 && C >= 0 && HW > 0, "cuda avgpool_global_fwd: bad size B=%d C=%d HW=%d", B, C,
            HW);
    size_t rows = (size_t)B * C;
    if (rows == 0) return 0;
    HS_NEED(x && y, "cuda avgpool_global_fwd: NULL tensor");
    HS_TRY(hs_kcuda_enter(k));
    hs_kcuda_t *c = hs_kcuda(k);
    k_avgpool_fwd<<<hs_kcuda_blocks(c, rows * 32), HS_KCUDA_THREADS, 0, c->stream>>>(rows, HW, x,
                                                                                     y);
    HS_KCUDA_LAUNCHED("k_avgpool_fwd");
    return 0;
}

/* dx (rows, HW) = dy (rows) / HW. */
struct avgpool_bwd_op {
    unsigned long long HW;
    float inv;
    const float *dy;
    float *dx;
    __device__ void one(size_t i) const
    {
        dx[i] = dy[i / HW] * inv;
    }
    __device__ void four(size_t i4) const
    {
        size_t i = i4 * 4;
        st4(dx, i4,
            make_float4(dy[i / HW] * inv, dy[(i + 1) / HW] * inv, dy[(i + 2) / HW] * inv,
                        dy[(i + 3) / HW] * inv));
    }
};

int hs_kcuda_avgpool_global_bwd(hs_kernels_t *k, int B, int C, int HW, const float *dy, float *dx)
{
    HS_NEED(B >= 0 && C >= 0 && HW > 0, "cuda avgpool_global_bwd: bad size B=%d C=%d HW=%d", B, C,
            HW);
    size_t n = (size_t)B * C * HW;
    if (n == 0) return 0;
    HS_NEED(dy && dx, "cuda avgpool_global_bwd: NULL tensor");
    HS_TRY(hs_kcuda_enter(k));
    return map_run(k, n, hs_kcuda_aligned4(dx),
                   avgpool_bwd_op{(unsigned long long)HW, 1.0f / (float)HW, dy, dx});
}

/* ---- operands in the products' precision ---- */

static __global__ void k_round(size_t n, int fp16, const float *x, float *y)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = fp16 ? __half2float(__float2half_rn(x[i]))
                    : __bfloat162float(__float2bfloat16_rn(x[i]));
}

int hs_kcuda_round(hs_kcuda_t *c, hs_precision_t p, size_t n, const float *x, float *y)
{
    if (p != HS_PREC_BF16 && p != HS_PREC_FP16)
        return HS_ERR(-EINVAL, "cuda round: precision %d is not bf16 or fp16", (int)p);
    if (n == 0) return 0;
    k_round<<<hs_kcuda_blocks(c, n), HS_KCUDA_THREADS, 0, c->stream>>>(n, p == HS_PREC_FP16, x, y);
    HS_KCUDA_LAUNCHED("k_round");
    return 0;
}
