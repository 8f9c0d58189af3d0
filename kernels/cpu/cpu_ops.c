/*
 * kernels/cpu/cpu_ops.c — the CPU kernel backend: host memory, OpenBLAS gemm, fused
 * elementwise kernels, softmax cross-entropy, the SGD step and double-accumulated
 * reductions, gathered with cpu_conv.c's convolution and pooling into one ops table.
 *
 * Elementwise loops are one pass over memory and vectorized (see HS_KCPU_FOR). With more than
 * one thread, relu and axpy over long vectors and large gemms are split over the handle's
 * worker threads (cpu_pool.c), OpenBLAS running on one thread in each. Nothing here
 * allocates memory except alloc itself.
 */
#include "kernels/cpu/cpu_internal.h"

#include "hearsay/common.h"
#include "hearsay/compress.h"
#include "hearsay/kernels.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- memory ---- */

static int cpu_alloc(hs_kernels_t *k, size_t bytes, void **out)
{
    if (!out) return HS_ERR(-EINVAL, "cpu alloc: out is NULL");
    *out = NULL;
    if (bytes == 0) return 0;
    /* Round up so vector loops over the last block never straddle the allocation's end. */
    size_t rounded = (bytes + 63) & ~(size_t)63;
    if (rounded < bytes) return HS_ERR(-ENOMEM, "cpu alloc: %zu bytes is too large", bytes);
    void *p = NULL;
    int rc = posix_memalign(&p, 64, rounded);
    if (rc != 0 || !p)
        return HS_ERR(-ENOMEM, "cpu alloc: out of memory allocating %zu bytes", bytes);
    *out = p;
    return 0;
}

static void cpu_free(hs_kernels_t *k, void *p)
{
    free(p);
}

static int check_copy(const char *what, const void *dst, const void *src, size_t bytes)
{
    if (bytes && (!dst || !src))
        return HS_ERR(-EINVAL, "cpu %s: NULL %s pointer for %zu bytes", what,
                      dst ? "source" : "destination", bytes);
    return 0;
}

static int cpu_to_device(hs_kernels_t *k, void *dst_dev, const void *src_host, size_t bytes)
{
    HS_TRY(check_copy("to_device", dst_dev, src_host, bytes));
    if (bytes && dst_dev != src_host) memmove(dst_dev, src_host, bytes);
    return 0;
}

static int cpu_to_host(hs_kernels_t *k, void *dst_host, const void *src_dev, size_t bytes)
{
    HS_TRY(check_copy("to_host", dst_host, src_dev, bytes));
    if (bytes && dst_host != src_dev) memmove(dst_host, src_dev, bytes);
    return 0;
}

static int cpu_copy(hs_kernels_t *k, void *dst_dev, const void *src_dev, size_t bytes)
{
    HS_TRY(check_copy("copy", dst_dev, src_dev, bytes));
    if (bytes && dst_dev != src_dev) memmove(dst_dev, src_dev, bytes);
    return 0;
}

static int cpu_zero(hs_kernels_t *k, void *dst_dev, size_t bytes)
{
    if (bytes && !dst_dev) return HS_ERR(-EINVAL, "cpu zero: NULL pointer for %zu bytes", bytes);
    if (bytes) memset(dst_dev, 0, bytes);
    return 0;
}

static int cpu_sync(hs_kernels_t *k)
{
    return 0; /* every CPU kernel has finished when it returns */
}

/* ---- BLAS-like ---- */

void hs_kcpu_sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                   int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (M == 0 || N == 0) return;
    if (K == 0 || alpha == 0.0f) {
        /* C = beta C; with beta == 0, C is overwritten (BLAS convention: NaNs in C vanish). */
        for (int i = 0; i < M; i++) {
            float *restrict c = C + (size_t)i * ldc;
            if (beta == 0.0f)
                memset(c, 0, (size_t)N * sizeof(float));
            else if (beta != 1.0f)
                HS_KCPU_FOR(j, (size_t)N, c[j] *= beta);
        }
        return;
    }
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* A gemm of at least this many multiply-adds is split over the worker threads (OpenBLAS's
 * own threshold for using its threads: 4 x 65536). */
#define GEMM_PARALLEL_MIN 262144.0

typedef struct {
    int trans_a, trans_b, M, N, K;
    float alpha;
    const float *A;
    int lda;
    const float *B;
    int ldb;
    float beta;
    float *C;
    int ldc;
} gemm_task_t;

/* Share t of C: a block of its rows when M >= N, else of its columns (in 16s: whole lines). */
static void gemm_share(void *arg, int t, int T)
{
    const gemm_task_t *g = arg;
    size_t lo, hi;
    if (g->M >= g->N) {
        hs_kcpu_share((size_t)g->M, t, T, &lo, &hi);
        if (lo == hi) return;
        const float *A = g->trans_a ? g->A + lo : g->A + lo * (size_t)g->lda;
        hs_kcpu_sgemm(g->trans_a, g->trans_b, (int)(hi - lo), g->N, g->K, g->alpha, A, g->lda, g->B,
                      g->ldb, g->beta, g->C + lo * (size_t)g->ldc, g->ldc);
    } else {
        hs_kcpu_share(((size_t)g->N + 15) / 16, t, T, &lo, &hi);
        lo = HS_MIN(lo * 16, (size_t)g->N);
        hi = HS_MIN(hi * 16, (size_t)g->N);
        if (lo == hi) return;
        const float *B = g->trans_b ? g->B + lo * (size_t)g->ldb : g->B + lo;
        hs_kcpu_sgemm(g->trans_a, g->trans_b, g->M, (int)(hi - lo), g->K, g->alpha, g->A, g->lda, B,
                      g->ldb, g->beta, g->C + lo, g->ldc);
    }
}

static int cpu_gemm(hs_kernels_t *k, int trans_a, int trans_b, int M, int N, int K, float alpha,
                    const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (M < 0 || N < 0 || K < 0)
        return HS_ERR(-EINVAL, "gemm: negative size M=%d N=%d K=%d", M, N, K);
    int a_cols = trans_a ? M : K, b_cols = trans_b ? K : N;
    if (lda < HS_MAX(1, a_cols))
        return HS_ERR(-EINVAL, "gemm: lda=%d is less than the %d columns of A (trans_a=%d)", lda,
                      a_cols, trans_a);
    if (ldb < HS_MAX(1, b_cols))
        return HS_ERR(-EINVAL, "gemm: ldb=%d is less than the %d columns of B (trans_b=%d)", ldb,
                      b_cols, trans_b);
    if (ldc < HS_MAX(1, N))
        return HS_ERR(-EINVAL, "gemm: ldc=%d is less than the %d columns of C", ldc, N);
    if (M && N && (!C || (K && (!A || !B))))
        return HS_ERR(-EINVAL, "gemm: NULL matrix for M=%d N=%d K=%d", M, N, K);
    if (M && N && K) { /* operands in the products' precision (hearsay/kernels.h) */
        int a_rows = trans_a ? K : M, b_rows = trans_b ? N : K;
        const float *src[2] = {A, B}, *rounded[2];
        size_t len[2] = {(size_t)(a_rows - 1) * lda + a_cols, (size_t)(b_rows - 1) * ldb + b_cols};
        HS_TRY(hs_kernels_round_operands(k, 2, src, len, rounded));
        A = rounded[0];
        B = rounded[1];
    }
    if (hs_kcpu_threads(k) > 1 && (double)M * N * K >= GEMM_PARALLEL_MIN) {
        gemm_task_t g = {trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc};
        hs_kcpu_parallel(k, gemm_share, &g);
        return 0;
    }
    hs_kcpu_sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return 0;
}

/* Loops live in functions with restrict parameters: GCC ignores restrict on local pointer
 * variables, and then cannot vectorize a loop that reads and writes memory. */
HS_KCPU_SIMD static void add_loop(size_t n, const float *restrict x, float *restrict y)
{
    HS_KCPU_FOR(i, n, y[i] += x[i]);
}

HS_KCPU_SIMD static void scale_loop(size_t n, float a, float *restrict x)
{
    HS_KCPU_FOR(i, n, x[i] *= a);
}

HS_KCPU_SIMD static void mix_loop(size_t n, float a, const float *restrict x, float b,
                                  float *restrict y)
{
    HS_KCPU_FOR(i, n, y[i] = a * x[i] + b * y[i]);
}

HS_KCPU_SIMD static void relu_loop(size_t n, const float *restrict x, float *restrict y)
{
    HS_KCPU_FOR(i, n, float t = x[i]; y[i] = t > 0.0f ? t : 0.0f);
}

HS_KCPU_SIMD static void relu_loop_inplace(size_t n, float *restrict y)
{
    HS_KCPU_FOR(i, n, float t = y[i]; y[i] = t > 0.0f ? t : 0.0f);
}

HS_KCPU_SIMD static void relu_bwd_loop(size_t n, const float *restrict y, const float *restrict dy,
                                       float *restrict dx)
{
    HS_KCPU_FOR(i, n, float d = dy[i]; dx[i] = y[i] > 0.0f ? d : 0.0f);
}

HS_KCPU_SIMD static void relu_bwd_loop_inplace(size_t n, const float *restrict y, float *restrict g)
{
    HS_KCPU_FOR(i, n, g[i] = y[i] > 0.0f ? g[i] : 0.0f);
}

HS_KCPU_SIMD static void tanh_bwd_loop(size_t n, const float *restrict y, const float *restrict dy,
                                       float *restrict dx)
{
    HS_KCPU_FOR(i, n, float t = y[i]; dx[i] = dy[i] * (1.0f - t * t));
}

HS_KCPU_SIMD static void tanh_bwd_loop_inplace(size_t n, const float *restrict y, float *restrict g)
{
    HS_KCPU_FOR(i, n, float t = y[i]; g[i] *= 1.0f - t * t);
}

/* ---- elementwise passes split over the worker threads ---- */

/* Below this many values a pass runs on the caller alone (waking a worker costs more). */
#define EW_PARALLEL_MIN 65536

typedef enum { EW_RELU, EW_RELU_BWD, EW_AXPY } ew_op_t;

typedef struct {
    ew_op_t op;
    size_t n;
    float a;
    const float *x, *y; /* relu: x; relu_bwd: y (the output), x = dy; axpy: x */
    float *out;         /* relu: y; relu_bwd: dx; axpy: y */
} ew_task_t;

static void ew_range(const ew_task_t *e, size_t lo, size_t hi)
{
    size_t n = hi - lo;
    float *out = e->out + lo;
    switch (e->op) {
    case EW_RELU:
        if (e->x == e->out)
            relu_loop_inplace(n, out);
        else
            relu_loop(n, e->x + lo, out);
        break;
    case EW_RELU_BWD:
        if (e->x == e->out)
            relu_bwd_loop_inplace(n, e->y + lo, out);
        else
            relu_bwd_loop(n, e->y + lo, e->x + lo, out);
        break;
    case EW_AXPY: {
        /* OpenBLAS's saxpy (AVX-512 where present) measured ~1.2-1.5x faster than our loop on
         * 1.9M floats; it takes int lengths, so long vectors go in chunks. */
        const size_t chunk = (size_t)1 << 30;
        for (size_t off = 0; off < n; off += chunk)
            cblas_saxpy((int)HS_MIN(chunk, n - off), e->a, e->x + lo + off, 1, out + off, 1);
        break;
    }
    }
}

static void ew_share(void *arg, int t, int T)
{
    const ew_task_t *e = arg;
    /* shares in whole 64-byte lines, so threads never write the same line */
    size_t lines = (e->n + 15) / 16, lo, hi;
    hs_kcpu_share(lines, t, T, &lo, &hi);
    lo = HS_MIN(lo * 16, e->n);
    hi = HS_MIN(hi * 16, e->n);
    if (lo < hi) ew_range(e, lo, hi);
}

static void ew_run(hs_kernels_t *k, const ew_task_t *e)
{
    if (e->n >= EW_PARALLEL_MIN && hs_kcpu_threads(k) > 1)
        hs_kcpu_parallel(k, ew_share, (void *)e);
    else
        ew_range(e, 0, e->n);
}

static int cpu_axpy(hs_kernels_t *k, size_t n, float a, const float *x, float *y)
{
    if (n && (!x || !y)) return HS_ERR(-EINVAL, "axpy: NULL vector of length %zu", n);
    if (x == y) {
        scale_loop(n, 1.0f + a, y); /* y += a y */
        return 0;
    }
    ew_run(k, &(ew_task_t){.op = EW_AXPY, .n = n, .a = a, .x = x, .out = y});
    return 0;
}

static int cpu_scale(hs_kernels_t *k, size_t n, float a, float *x)
{
    if (n && !x) return HS_ERR(-EINVAL, "scale: NULL vector of length %zu", n);
    scale_loop(n, a, x);
    return 0;
}

static int cpu_mix(hs_kernels_t *k, size_t n, float a, const float *x, float b, float *y)
{
    if (n && (!x || !y)) return HS_ERR(-EINVAL, "mix: NULL vector of length %zu", n);
    uintptr_t xa = (uintptr_t)x, ya = (uintptr_t)y, len = n * sizeof(float);
    if (n && xa < ya + len && ya < xa + len)
        return HS_ERR(-EINVAL, "mix: x and y overlap (length %zu)", n);
    mix_loop(n, a, x, b, y);
    return 0;
}

static int check_rows(const char *what, int B, int N, const void *p, const void *q)
{
    if (B < 0 || N < 0) return HS_ERR(-EINVAL, "%s: negative size B=%d N=%d", what, B, N);
    if (B && N && (!p || !q)) return HS_ERR(-EINVAL, "%s: NULL tensor for B=%d N=%d", what, B, N);
    return 0;
}

static int cpu_add_bias(hs_kernels_t *k, int B, int N, const float *bias, float *y)
{
    HS_TRY(check_rows("add_bias", B, N, bias, y));
    for (int r = 0; r < B; r++) add_loop((size_t)N, bias, y + (size_t)r * N);
    return 0;
}

static int cpu_bias_grad(hs_kernels_t *k, int B, int N, const float *dy, float *db, int accumulate)
{
    HS_TRY(check_rows("bias_grad", B, N, dy, db));
    if (N && !db) return HS_ERR(-EINVAL, "bias_grad: NULL db for N=%d", N);
    if (!accumulate) memset(db, 0, (size_t)N * sizeof(float));
    for (int r = 0; r < B; r++) add_loop((size_t)N, dy + (size_t)r * N, db);
    return 0;
}

/* ---- activations (in place allowed: exactly y == x, dx == dy) ---- */

static int check_act(const char *what, size_t n, const void *a, const void *b, const void *c)
{
    if (n && (!a || !b || !c)) return HS_ERR(-EINVAL, "%s: NULL tensor of length %zu", what, n);
    return 0;
}

static int cpu_relu_fwd(hs_kernels_t *k, size_t n, const float *x, float *y)
{
    HS_TRY(check_act("relu_fwd", n, x, y, y));
    ew_run(k, &(ew_task_t){.op = EW_RELU, .n = n, .x = x, .out = y});
    return 0;
}

static int cpu_relu_bwd(hs_kernels_t *k, size_t n, const float *y, const float *dy, float *dx)
{
    HS_TRY(check_act("relu_bwd", n, y, dy, dx));
    ew_run(k, &(ew_task_t){.op = EW_RELU_BWD, .n = n, .x = dy, .y = y, .out = dx});
    return 0;
}

static int cpu_tanh_fwd(hs_kernels_t *k, size_t n, const float *x, float *y)
{
    HS_TRY(check_act("tanh_fwd", n, x, y, y));
    for (size_t i = 0; i < n; i++) y[i] = tanhf(x[i]); /* safe in place: reads x[i] first */
    return 0;
}

static int cpu_tanh_bwd(hs_kernels_t *k, size_t n, const float *y, const float *dy, float *dx)
{
    HS_TRY(check_act("tanh_bwd", n, y, dy, dx));
    if (dx == dy)
        tanh_bwd_loop_inplace(n, y, dx);
    else
        tanh_bwd_loop(n, y, dy, dx);
    return 0;
}

/* ---- loss ---- */

static int cpu_softmax_xent(hs_kernels_t *k, int B, int C, const float *logits,
                            const int32_t *labels, float *probs, float *dlogits, double *loss_host,
                            int *correct_host)
{
    if (B < 0 || C <= 0) return HS_ERR(-EINVAL, "softmax_xent: bad size B=%d C=%d", B, C);
    if (B && (!logits || !labels))
        return HS_ERR(-EINVAL, "softmax_xent: NULL logits or labels for B=%d", B);
    const float inv_b = B ? 1.0f / (float)B : 0.0f;
    double loss = 0.0;
    int correct = 0;
    for (int r = 0; r < B; r++) {
        const float *x = logits + (size_t)r * C; // (C) logits of row r
        const int32_t lab = labels[r];
        if (lab < 0 || lab >= C)
            return HS_ERR(-EINVAL, "softmax_xent: label %d of row %d is outside [0, %d)", (int)lab,
                          r, C);
        float mx = x[0];
        int am = 0;
        for (int j = 1; j < C; j++)
            if (x[j] > mx) { /* strict: ties go to the lowest index */
                mx = x[j];
                am = j;
            }
        correct += (am == lab);
        const float xl = x[lab]; /* read before e may overwrite x (dlogits == logits) */
        float *p = probs ? probs + (size_t)r * C : NULL;     // (C)
        float *g = dlogits ? dlogits + (size_t)r * C : NULL; // (C)
        float *e = p ? p : g; /* where exp(x - max) is kept, if anywhere */
        double sum = 0.0;
        if (e) {
            for (int j = 0; j < C; j++) {
                float v = expf(x[j] - mx);
                e[j] = v;
                sum += v;
            }
        } else {
            for (int j = 0; j < C; j++) sum += expf(x[j] - mx);
        }
        /* -log softmax(x)[lab] = log(sum exp(x - max)) - (x[lab] - max) */
        loss += log(sum) - ((double)xl - (double)mx);
        const float inv = (float)(1.0 / sum);
        if (p) {
            for (int j = 0; j < C; j++) p[j] *= inv;
            if (g)
                for (int j = 0; j < C; j++) g[j] = p[j] * inv_b;
        } else if (g) {
            const float s = inv * inv_b;
            for (int j = 0; j < C; j++) g[j] *= s;
        }
        if (g) g[lab] -= inv_b;
    }
    if (loss_host) *loss_host = B ? loss / B : 0.0;
    if (correct_host) *correct_host = correct;
    return 0;
}

/* ---- optimizer ---- */

/* param -= lr (grad + wd param) */
HS_KCPU_SIMD static void sgd_plain_loop(size_t n, float nlr, float wd, float *restrict p,
                                        const float *restrict gr)
{
    if (wd == 0.0f)
        HS_KCPU_FOR(i, n, p[i] += nlr * gr[i]);
    else
        HS_KCPU_FOR(i, n, float g = gr[i] + wd * p[i]; p[i] += nlr * g);
}

/* PyTorch's momentum / Nesterov step, one pass over param, grad and vel. */
HS_KCPU_SIMD static void sgd_momentum_loop(size_t n, float nlr, float m, float wd, int nesterov,
                                           float *restrict p, const float *restrict gr,
                                           float *restrict v)
{
    if (nesterov)
        HS_KCPU_FOR(i, n, float g = gr[i] + wd * p[i]; float u = m * v[i] + g; v[i] = u;
                    p[i] += nlr * (g + m * u));
    else
        HS_KCPU_FOR(i, n, float g = gr[i] + wd * p[i]; float u = m * v[i] + g; v[i] = u;
                    p[i] += nlr * u);
}

static int cpu_sgd_step(hs_kernels_t *k, size_t n, float lr, float momentum, float wd, int nesterov,
                        float *param, const float *grad, float *vel)
{
    if (n && (!param || !grad)) return HS_ERR(-EINVAL, "sgd_step: NULL param or grad (n=%zu)", n);
    if (momentum != 0.0f && n && !vel)
        return HS_ERR(-EINVAL, "sgd_step: momentum %g needs a velocity buffer", (double)momentum);
    if (momentum == 0.0f)
        sgd_plain_loop(n, -lr, wd, param, grad);
    else
        sgd_momentum_loop(n, -lr, momentum, wd, nesterov, param, grad, vel);
    return 0;
}

/* ---- reductions: 16 independent double accumulators (vectorizable, and more accurate
 * than one running sum) ---- */

HS_KCPU_SIMD static double sum_loop(size_t n, const float *restrict x)
{
    double acc[16] = {0};
    size_t b = 0;
    for (; b + 16 <= n; b += 16)
        for (size_t j = 0; j < 16; j++) acc[j] += x[b + j];
    double t = 0.0;
    for (; b < n; b++) t += x[b];
    for (int j = 0; j < 16; j++) t += acc[j];
    return t;
}

HS_KCPU_SIMD static double dot_loop(size_t n, const float *restrict x, const float *restrict y)
{
    double acc[16] = {0};
    size_t b = 0;
    for (; b + 16 <= n; b += 16)
        for (size_t j = 0; j < 16; j++) acc[j] += (double)x[b + j] * y[b + j];
    double t = 0.0;
    for (; b < n; b++) t += (double)x[b] * y[b];
    for (int j = 0; j < 16; j++) t += acc[j];
    return t;
}

static int cpu_sum(hs_kernels_t *k, size_t n, const float *x, double *out_host)
{
    if (!out_host || (n && !x)) return HS_ERR(-EINVAL, "sum: NULL vector or result (n=%zu)", n);
    *out_host = sum_loop(n, x);
    return 0;
}

static int cpu_dot(hs_kernels_t *k, size_t n, const float *x, const float *y, double *out_host)
{
    if (!out_host || (n && (!x || !y)))
        return HS_ERR(-EINVAL, "dot: NULL vector or result (n=%zu)", n);
    *out_host = dot_loop(n, x, y);
    return 0;
}

static int cpu_nrm2(hs_kernels_t *k, size_t n, const float *x, double *out_host)
{
    if (!out_host || (n && !x)) return HS_ERR(-EINVAL, "nrm2: NULL vector or result (n=%zu)", n);
    *out_host = sqrt(dot_loop(n, x, x));
    return 0;
}

/* ---- compression: optim/compress.c's formats on host memory ---- */

static int cpu_compress(hs_kernels_t *k, const hs_kcompress_t *c, const float *x, void *out,
                        size_t *bytes)
{
    (void)k;
    if (!c || !bytes || (c->n && (!x || !out)))
        return HS_ERR(-EINVAL, "compress: NULL argument (n=%zu)", c ? c->n : 0);
    return hs_compress_format(c, x, out, bytes);
}

static int cpu_decompress(hs_kernels_t *k, const hs_kcompress_t *c, const void *in, size_t bytes,
                          float alpha, int add, float *y)
{
    (void)k;
    if (!c || (c->n && (!in || !y)))
        return HS_ERR(-EINVAL, "decompress: NULL argument (n=%zu)", c ? c->n : 0);
    return hs_decompress_format(c, in, bytes, alpha, add, y);
}

/* ---- the table ---- */

static const hs_kernel_ops_t cpu_ops = {
    .size = sizeof(hs_kernel_ops_t),
    .name = "cpu",
    .device = HS_DEV_CPU,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .to_device = cpu_to_device,
    .to_host = cpu_to_host,
    .copy = cpu_copy,
    .zero = cpu_zero,
    .sync = cpu_sync,
    .gemm = cpu_gemm,
    .axpy = cpu_axpy,
    .scale = cpu_scale,
    .mix = cpu_mix,
    .add_bias = cpu_add_bias,
    .bias_grad = cpu_bias_grad,
    .relu_fwd = cpu_relu_fwd,
    .relu_bwd = cpu_relu_bwd,
    .tanh_fwd = cpu_tanh_fwd,
    .tanh_bwd = cpu_tanh_bwd,
    .softmax_xent = cpu_softmax_xent,
    .conv2d_workspace = hs_kcpu_conv2d_workspace,
    .conv2d_fwd = hs_kcpu_conv2d_fwd,
    .conv2d_bwd = hs_kcpu_conv2d_bwd,
    .maxpool_fwd = hs_kcpu_maxpool_fwd,
    .maxpool_bwd = hs_kcpu_maxpool_bwd,
    .avgpool_global_fwd = hs_kcpu_avgpool_global_fwd,
    .avgpool_global_bwd = hs_kcpu_avgpool_global_bwd,
    .batchnorm_fwd_train = hs_kcpu_batchnorm_fwd_train,
    .batchnorm_fwd_eval = hs_kcpu_batchnorm_fwd_eval,
    .batchnorm_bwd = hs_kcpu_batchnorm_bwd,
    .sgd_step = cpu_sgd_step,
    .sum = cpu_sum,
    .dot = cpu_dot,
    .nrm2 = cpu_nrm2,
    .compress = cpu_compress,
    .decompress = cpu_decompress,
};

const hs_kernel_ops_t *hs_kcpu_ops(void)
{
    return &cpu_ops;
}

int hs_kernels_cpu_open(hs_kernels_t *k, int threads)
{
    if (!k) return HS_ERR(-EINVAL, "hs_kernels_cpu_open: k is NULL");
    if (threads < 0) return HS_ERR(-EINVAL, "cpu kernels: thread count %d is negative", threads);
    /* OpenBLAS keeps one process-wide thread count: the last backend opened sets it. With
     * more than one thread the handle's own workers split the work (gemm too) and OpenBLAS
     * runs on one: its idle threads would otherwise spin and yield beside the workers. */
    if (threads > 0) openblas_set_num_threads(threads);
    k->ops = &cpu_ops;
    k->device = HS_DEV_CPU;
    k->device_index = 0;
    k->threads = threads > 0 ? threads : openblas_get_num_threads();
    k->impl = NULL;
    /* k->impl: the worker threads of parallel sections (none with one thread) */
    hs_kcpu_pool_t *pool = NULL;
    HS_TRY(hs_kcpu_pool_create(&pool, k->threads));
    k->impl = pool;
    if (pool) openblas_set_num_threads(1);
    return 0;
}

void hs_kernels_cpu_close(hs_kernels_t *k)
{
    if (!k) return;
    hs_kcpu_pool_t *pool = k->impl;
    hs_kcpu_pool_free(&pool);
    k->ops = NULL;
    k->impl = NULL;
}
