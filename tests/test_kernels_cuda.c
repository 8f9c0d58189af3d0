/* tests/test_kernels_cuda.c — the CUDA kernel backend against the CPU backend: every slot runs
 * on the same random inputs on both, and the results must agree within a tolerance (tighter
 * for elementwise kernels, looser for gemm and convolution, whose summation orders differ).
 *
 * Without a usable GPU (hs_kernels_open(HS_DEV_CUDA) gives -ENODEV) it prints
 * "SKIP: no CUDA device: <message>" and exits 77, automake's SKIP.
 * HS_TEST_CUDA_AS_CPU=1 runs the same comparisons with a second CPU backend in place of the GPU:
 * a self-check of this harness on machines without a GPU (the backend tests need a GPU). */
#include "config.h"

#include "hearsay/common.h"
#include "hearsay/compress.h"
#include "hearsay/kernels.h"
#include "hearsay/rng.h"

#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static hs_kernels_t *cpu, *gpu;
static int gpu_is_cpu; /* HS_TEST_CUDA_AS_CPU harness self-check */

static int open_gpu(hs_kernels_t **k)
{
    return gpu_is_cpu ? hs_kernels_open(k, HS_DEV_CPU, 0, 1)
                      : hs_kernels_open(k, HS_DEV_CUDA, 0, 0);
}

static void setup(void)
{
    ck_assert_int_eq(hs_kernels_open(&cpu, HS_DEV_CPU, 0, 1), 0);
    int rc = open_gpu(&gpu);
    ck_assert_msg(rc == 0, "opening the CUDA backend: %s", hs_last_error());
}

static void teardown(void)
{
    hs_kernels_close(&gpu);
    hs_kernels_close(&cpu);
}

/* ---- paired tensors: the same data on the CPU backend (c) and the GPU (g) ---- */

typedef struct pair {
    size_t n;   /* floats */
    float *c;   /* CPU backend memory (host) */
    float *g;   /* GPU memory */
    float *got; /* host copy of g, filled by pair_fetch */
} pair_t;

static void *gpu_alloc(size_t bytes)
{
    void *p = NULL;
    ck_assert_msg(gpu->ops->alloc(gpu, bytes, &p) == 0, "gpu alloc: %s", hs_last_error());
    return p;
}

static void *cpu_alloc(size_t bytes)
{
    void *p = NULL;
    ck_assert_int_eq(cpu->ops->alloc(cpu, bytes, &p), 0);
    return p;
}

/* A pair of n floats, uniform in [lo, hi) (the same values on both sides). */
static pair_t pair_new(hs_rng_t *r, size_t n, float lo, float hi)
{
    pair_t t = {n, cpu_alloc(n * sizeof(float)), gpu_alloc(n * sizeof(float)), NULL};
    t.got = malloc(n * sizeof(float) + 1);
    ck_assert_ptr_nonnull(t.got);
    for (size_t i = 0; i < n; i++) t.c[i] = lo + (hi - lo) * (float)hs_rng_uniform(r);
    ck_assert_int_eq(gpu->ops->to_device(gpu, t.g, t.c, n * sizeof(float)), 0);
    return t;
}

static void pair_free(pair_t *t)
{
    cpu->ops->free(cpu, t->c);
    gpu->ops->free(gpu, t->g);
    free(t->got);
    memset(t, 0, sizeof(*t));
}

static void pair_fetch(pair_t *t)
{
    ck_assert_msg(gpu->ops->to_host(gpu, t->got, t->g, t->n * sizeof(float)) == 0, "to_host: %s",
                  hs_last_error());
}

/* The GPU result agrees with the CPU one: |g - c| <= atol + rtol |c| for every element. */
static void pair_check(pair_t *t, double rtol, double atol, const char *what)
{
    pair_fetch(t);
    size_t bad = 0, first = 0;
    double worst = 0.0;
    for (size_t i = 0; i < t->n; i++) {
        double c = t->c[i], g = t->got[i], err = fabs(g - c);
        if (!(err <= atol + rtol * fabs(c))) {
            if (!bad) first = i;
            bad++;
        }
        if (err > worst || isnan(err)) worst = err;
    }
    ck_assert_msg(bad == 0,
                  "%s: %zu of %zu elements differ; first at %zu: gpu %.9g cpu %.9g (worst "
                  "abs error %.3g)",
                  what, bad, t->n, first, (double)t->got[first], (double)t->c[first], worst);
}

/* Same element values on both sides again (after a slot changed one of them). */
static void pair_sync_from_cpu(pair_t *t)
{
    ck_assert_int_eq(gpu->ops->to_device(gpu, t->g, t->c, t->n * sizeof(float)), 0);
}

static int32_t *labels_pair(hs_rng_t *r, int B, int C, int32_t **g)
{
    int32_t *c = cpu_alloc((size_t)B * sizeof(int32_t));
    for (int i = 0; i < B; i++) c[i] = (int32_t)hs_rng_below(r, (uint64_t)C);
    *g = gpu_alloc((size_t)B * sizeof(int32_t));
    ck_assert_int_eq(gpu->ops->to_device(gpu, *g, c, (size_t)B * sizeof(int32_t)), 0);
    return c;
}

#define BOTH(call_c, call_g)                                                                       \
    do {                                                                                           \
        int rc_c_ = (call_c);                                                                      \
        ck_assert_msg(rc_c_ == 0, "cpu: %s: %s", #call_c, hs_last_error());                        \
        int rc_g_ = (call_g);                                                                      \
        ck_assert_msg(rc_g_ == 0, "gpu: %s: %s", #call_g, hs_last_error());                        \
    } while (0)

#define ELEM_RTOL 1e-5
#define ELEM_ATOL 1e-6

/* ---- table and memory ---- */

START_TEST(test_table_and_memory)
{
    const hs_kernel_ops_t *o = gpu->ops;
    ck_assert_uint_eq(o->size, sizeof(hs_kernel_ops_t));
    if (!gpu_is_cpu) {
        ck_assert_str_eq(o->name, "cuda");
        ck_assert_int_eq(o->device, HS_DEV_CUDA);
        ck_assert_int_eq(gpu->device, HS_DEV_CUDA);
        ck_assert_int_gt(hs_kernels_cuda_device_count(), 0);
        ck_assert_int_eq(hs_cuda_available(), 1);
    }
    const char *base = (const char *)o;
    /* every slot on CUDA; the CPU (the harness self-check) leaves the optional ones, from
     * host_alloc on, empty */
    size_t end = gpu_is_cpu ? offsetof(hs_kernel_ops_t, host_alloc) : sizeof(*o);
    for (size_t off = offsetof(hs_kernel_ops_t, alloc); off + sizeof(void (*)(void)) <= end;
         off += sizeof(void (*)(void))) {
        void (*fp)(void);
        memcpy(&fp, base + off, sizeof(fp));
        ck_assert_msg(fp != NULL, "ops slot at offset %zu is NULL", off);
    }
    void *p = (void *)0x1;
    ck_assert_int_eq(o->alloc(gpu, 0, &p), 0);
    ck_assert_ptr_null(p);
    o->free(gpu, NULL);
    enum { N = 1001 };
    float h[N], back[N];
    for (int i = 0; i < N; i++) h[i] = (float)i * 0.25f - 7.0f;
    float *a = gpu_alloc(sizeof(h)), *b = gpu_alloc(sizeof(h));
    ck_assert_int_eq(o->to_device(gpu, a, h, sizeof(h)), 0);
    ck_assert_int_eq(o->copy(gpu, b, a, sizeof(h)), 0);
    ck_assert_int_eq(o->zero(gpu, b + 3, 10 * sizeof(float)), 0);
    ck_assert_int_eq(o->sync(gpu), 0);
    ck_assert_int_eq(o->to_host(gpu, back, b, sizeof(h)), 0);
    for (int i = 0; i < N; i++) ck_assert(back[i] == ((i >= 3 && i < 13) ? 0.0f : h[i]));
    hs_error_clear();
    ck_assert_int_eq(o->copy(gpu, NULL, a, 4), -EINVAL);
    ck_assert_int_eq(o->to_host(gpu, NULL, a, 4), -EINVAL);
    o->free(gpu, a);
    o->free(gpu, b);
    /* An impossible allocation fails with a message, not a crash. */
    if (!gpu_is_cpu) {
        hs_error_clear();
        int rc = o->alloc(gpu, (size_t)1 << 60, &p);
        ck_assert_int_lt(rc, 0);
        ck_assert_ptr_null(p);
        ck_assert_ptr_nonnull(strstr(hs_last_error(), "cudaMalloc"));
        /* ... and leaves the context usable */
        a = gpu_alloc(16);
        ck_assert_int_eq(o->zero(gpu, a, 16), 0);
        ck_assert_int_eq(o->sync(gpu), 0);
        o->free(gpu, a);
    }
}
END_TEST

/* ---- gemm ---- */

static void gemm_case(hs_rng_t *r, int ta, int tb, int M, int N, int K, int pad, float alpha,
                      float beta)
{
    int arows = ta ? K : M, acols = ta ? M : K, brows = tb ? N : K, bcols = tb ? K : N;
    int lda = acols + pad, ldb = bcols + 2 * pad, ldc = N + pad;
    pair_t A = pair_new(r, (size_t)arows * lda, -1, 1);
    pair_t B = pair_new(r, (size_t)brows * ldb, -1, 1);
    pair_t C = pair_new(r, (size_t)M * ldc, -1, 1);
    BOTH(cpu->ops->gemm(cpu, ta, tb, M, N, K, alpha, A.c, lda, B.c, ldb, beta, C.c, ldc),
         gpu->ops->gemm(gpu, ta, tb, M, N, K, alpha, A.g, lda, B.g, ldb, beta, C.g, ldc));
    char what[96];
    snprintf(what, sizeof(what), "gemm ta=%d tb=%d M=%d N=%d K=%d", ta, tb, M, N, K);
    pair_check(&C, 1e-4, 1e-5 * sqrt((double)K + 1), what); /* padding columns must match too */
    pair_free(&A);
    pair_free(&B);
    pair_free(&C);
}

START_TEST(test_gemm)
{
    hs_rng_t r;
    hs_rng_seed(&r, 11, 0);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            gemm_case(&r, ta, tb, 37, 29, 53, 3, 0.7f, -0.3f);
            gemm_case(&r, ta, tb, 1, 17, 5, 0, 1.0f, 0.0f);
        }
    gemm_case(&r, 0, 0, 128, 96, 300, 0, 1.0f, 1.0f);
    gemm_case(&r, 1, 0, 64, 200, 128, 5, -2.0f, 0.5f);
    gemm_case(&r, 0, 0, 6, 4, 0, 1, 1.0f, 0.5f); /* K = 0: C = beta C */
    gemm_case(&r, 1, 1, 6, 4, 0, 1, 1.0f, 0.0f);
    hs_error_clear();
    float *C = gpu_alloc(64 * sizeof(float));
    ck_assert_int_eq(gpu->ops->gemm(gpu, 0, 0, 2, 3, 1, 1.0f, C, 1, C, 3, 0.0f, C, 2), -EINVAL);
    ck_assert_str_ne(hs_last_error(), "");
    ck_assert_int_eq(gpu->ops->gemm(gpu, 0, 0, -1, 3, 1, 1.0f, C, 1, C, 3, 0.0f, C, 3), -EINVAL);
    gpu->ops->free(gpu, C);
}
END_TEST

/* ---- vector and elementwise ---- */

/* n values at offset `off` floats into their buffers (off = 1 breaks 16-byte alignment). */
static void vector_ops_case(hs_rng_t *r, size_t n, size_t off)
{
    pair_t x = pair_new(r, n + off, -2, 2), y = pair_new(r, n + off, -2, 2);
    BOTH(cpu->ops->axpy(cpu, n, 0.37f, x.c + off, y.c + off),
         gpu->ops->axpy(gpu, n, 0.37f, x.g + off, y.g + off));
    pair_check(&y, ELEM_RTOL, ELEM_ATOL, "axpy");
    BOTH(cpu->ops->scale(cpu, n, -1.7f, y.c + off), gpu->ops->scale(gpu, n, -1.7f, y.g + off));
    pair_check(&y, ELEM_RTOL, ELEM_ATOL, "scale");
    BOTH(cpu->ops->mix(cpu, n, 0.25f, x.c + off, 0.75f, y.c + off),
         gpu->ops->mix(gpu, n, 0.25f, x.g + off, 0.75f, y.g + off));
    pair_check(&y, ELEM_RTOL, ELEM_ATOL, "mix");
    pair_check(&x, 0, 0, "mix leaves x alone");
    /* activations, out of place then in place */
    BOTH(cpu->ops->relu_fwd(cpu, n, x.c + off, y.c + off),
         gpu->ops->relu_fwd(gpu, n, x.g + off, y.g + off));
    pair_check(&y, 0, 0, "relu_fwd");
    pair_t dy = pair_new(r, n + off, -1, 1);
    BOTH(cpu->ops->relu_bwd(cpu, n, y.c + off, dy.c + off, x.c + off),
         gpu->ops->relu_bwd(gpu, n, y.g + off, dy.g + off, x.g + off));
    pair_check(&x, 0, 0, "relu_bwd");
    BOTH(cpu->ops->tanh_fwd(cpu, n, dy.c + off, dy.c + off),
         gpu->ops->tanh_fwd(gpu, n, dy.g + off, dy.g + off));
    pair_check(&dy, 2e-6, 1e-6, "tanh_fwd in place");
    pair_sync_from_cpu(&dy);
    BOTH(cpu->ops->tanh_bwd(cpu, n, dy.c + off, y.c + off, y.c + off),
         gpu->ops->tanh_bwd(gpu, n, dy.g + off, y.g + off, y.g + off));
    pair_check(&y, ELEM_RTOL, ELEM_ATOL, "tanh_bwd in place");
    pair_free(&x);
    pair_free(&y);
    pair_free(&dy);
}

START_TEST(test_vector_ops)
{
    hs_rng_t r;
    hs_rng_seed(&r, 12, 0);
    vector_ops_case(&r, 1000003, 0); /* float4 path plus a 3-element tail */
    vector_ops_case(&r, 4099, 1);    /* unaligned: the scalar path */
    vector_ops_case(&r, 3, 0);
    /* n = 0 is a no-op, NULL with n > 0 an error */
    ck_assert_int_eq(gpu->ops->axpy(gpu, 0, 1.0f, NULL, NULL), 0);
    ck_assert_int_eq(gpu->ops->axpy(gpu, 5, 1.0f, NULL, NULL), -EINVAL);
}
END_TEST

START_TEST(test_bias)
{
    hs_rng_t r;
    hs_rng_seed(&r, 13, 0);
    const int shapes[][2] = {{67, 10}, {3, 1000}, {1, 1}, {300, 33}};
    for (size_t s = 0; s < HS_ARRAY_LEN(shapes); s++) {
        int B = shapes[s][0], N = shapes[s][1];
        pair_t y = pair_new(&r, (size_t)B * N, -1, 1), b = pair_new(&r, (size_t)N, -1, 1);
        BOTH(cpu->ops->add_bias(cpu, B, N, b.c, y.c), gpu->ops->add_bias(gpu, B, N, b.g, y.g));
        pair_check(&y, ELEM_RTOL, ELEM_ATOL, "add_bias");
        for (int acc = 0; acc < 2; acc++) {
            BOTH(cpu->ops->bias_grad(cpu, B, N, y.c, b.c, acc),
                 gpu->ops->bias_grad(gpu, B, N, y.g, b.g, acc));
            pair_check(&b, 1e-5, 1e-6 * B, acc ? "bias_grad accumulate" : "bias_grad");
        }
        pair_free(&y);
        pair_free(&b);
    }
}
END_TEST

/* ---- loss ---- */

static void xent_case(hs_rng_t *r, int B, int C, float scale)
{
    pair_t x = pair_new(r, (size_t)B * C, -scale, scale);
    pair_t p = pair_new(r, (size_t)B * C, 0, 1), g = pair_new(r, (size_t)B * C, 0, 1);
    int32_t *lab_g, *lab_c = labels_pair(r, B, C, &lab_g);
    double loss_c = -1, loss_g = -2;
    int corr_c = -1, corr_g = -2;
    BOTH(cpu->ops->softmax_xent(cpu, B, C, x.c, lab_c, p.c, g.c, &loss_c, &corr_c),
         gpu->ops->softmax_xent(gpu, B, C, x.g, lab_g, p.g, g.g, &loss_g, &corr_g));
    pair_check(&p, 1e-5, 1e-7, "softmax probs");
    pair_check(&g, 1e-4, 1e-7, "softmax dlogits");
    ck_assert_msg(fabs(loss_c - loss_g) <= 1e-5 * (1 + fabs(loss_c)), "loss gpu %.9g cpu %.9g",
                  loss_g, loss_c);
    ck_assert_int_eq(corr_c, corr_g);
    ck_assert(loss_c > 0);
    /* probs and correct may be NULL; only the loss is asked for */
    loss_g = -3;
    ck_assert_int_eq(gpu->ops->softmax_xent(gpu, B, C, x.g, lab_g, NULL, g.g, &loss_g, NULL), 0);
    ck_assert(fabs(loss_c - loss_g) <= 1e-5 * (1 + fabs(loss_c)));
    pair_check(&g, 1e-4, 1e-7, "softmax dlogits without probs");
    /* in place: dlogits written over the logits */
    double lc2 = -1, lg2 = -2;
    BOTH(cpu->ops->softmax_xent(cpu, B, C, x.c, lab_c, NULL, x.c, &lc2, NULL),
         gpu->ops->softmax_xent(gpu, B, C, x.g, lab_g, NULL, x.g, &lg2, NULL));
    pair_check(&x, 1e-4, 1e-7, "softmax dlogits in place");
    ck_assert(fabs(lc2 - loss_c) <= 1e-6 * (1 + fabs(loss_c)));
    ck_assert(fabs(lg2 - loss_c) <= 1e-5 * (1 + fabs(loss_c)));
    /* a label outside [0, C) is an error */
    int32_t badl = C;
    ck_assert_int_eq(gpu->ops->to_device(gpu, lab_g, &badl, sizeof(badl)), 0);
    hs_error_clear();
    ck_assert_int_eq(gpu->ops->softmax_xent(gpu, B, C, x.g, lab_g, NULL, NULL, &loss_g, &corr_g),
                     -EINVAL);
    ck_assert_str_ne(hs_last_error(), "");
    cpu->ops->free(cpu, lab_c);
    gpu->ops->free(gpu, lab_g);
    pair_free(&x);
    pair_free(&p);
    pair_free(&g);
}

START_TEST(test_softmax_xent)
{
    hs_rng_t r;
    hs_rng_seed(&r, 14, 0);
    xent_case(&r, 67, 10, 3.0f);
    xent_case(&r, 5, 1000, 4.0f); /* more classes than threads per block */
    xent_case(&r, 256, 2, 1.0f);
    xent_case(&r, 3, 7, 80.0f); /* large logits: needs the max shift to stay finite */
    /* a batch where the argmax is mostly the label: counts must match exactly */
    const int B = 64, C = 10;
    pair_t x = pair_new(&r, (size_t)B * C, -1, 1);
    int32_t *lab_g, *lab_c = labels_pair(&r, B, C, &lab_g);
    for (int i = 0; i < B; i++)
        if (i % 4) x.c[(size_t)i * C + lab_c[i]] += 3.0f;
    pair_sync_from_cpu(&x);
    double lc, lg;
    int cc, cg;
    BOTH(cpu->ops->softmax_xent(cpu, B, C, x.c, lab_c, NULL, NULL, &lc, &cc),
         gpu->ops->softmax_xent(gpu, B, C, x.g, lab_g, NULL, NULL, &lg, &cg));
    ck_assert_int_eq(cc, cg);
    ck_assert_int_ge(cg, 48);
    ck_assert(fabs(lc - lg) <= 1e-5 * (1 + fabs(lc)));
    cpu->ops->free(cpu, lab_c);
    gpu->ops->free(gpu, lab_g);
    pair_free(&x);
}
END_TEST

/* ---- convolution and pooling ---- */

static void conv_case(hs_rng_t *r, int B, int C, int H, int W, int K, int R, int S, int pad,
                      int stride)
{
    hs_conv2d_desc_t d = {
        .B = B, .C = C, .H = H, .W = W, .K = K, .R = R, .S = S, .pad = pad, .stride = stride};
    d.P = (H + 2 * pad - R) / stride + 1;
    d.Q = (W + 2 * pad - S) / stride + 1;
    char what[160];
    snprintf(what, sizeof(what), "conv B=%d C=%d H=%d W=%d K=%d R=%d S=%d pad=%d stride=%d", B, C,
             H, W, K, R, S, pad, stride);
    size_t xn = (size_t)B * C * H * W, wn = (size_t)K * C * R * S, yn = (size_t)B * K * d.P * d.Q;
    pair_t x = pair_new(r, xn, -1, 1), w = pair_new(r, wn, -1, 1),
           b = pair_new(r, (size_t)K, -1, 1);
    pair_t y = pair_new(r, yn, -1, 1), dy = pair_new(r, yn, -1, 1), dx = pair_new(r, xn, -1, 1);
    pair_t dw = pair_new(r, wn, -1, 1), db = pair_new(r, (size_t)K, -1, 1); /* accumulated into */
    size_t wsc = cpu->ops->conv2d_workspace(cpu, &d), wsg = gpu->ops->conv2d_workspace(gpu, &d);
    void *bufc = cpu_alloc(wsc), *bufg = gpu_alloc(wsg);
    /* Forward reduces C R S terms, backward-filter B P Q: tolerances grow with the count. */
    double fwd_atol = 2e-5 * sqrt((double)C * R * S), dw_atol = 2e-5 * sqrt((double)B * d.P * d.Q);
    BOTH(cpu->ops->conv2d_fwd(cpu, &d, x.c, w.c, b.c, y.c, bufc, wsc),
         gpu->ops->conv2d_fwd(gpu, &d, x.g, w.g, b.g, y.g, bufg, wsg));
    pair_check(&y, 1e-3, fwd_atol, what);
    BOTH(cpu->ops->conv2d_fwd(cpu, &d, x.c, w.c, NULL, y.c, bufc, wsc),
         gpu->ops->conv2d_fwd(gpu, &d, x.g, w.g, NULL, y.g, bufg, wsg));
    pair_check(&y, 1e-3, fwd_atol, "conv forward without bias");
    BOTH(cpu->ops->conv2d_bwd(cpu, &d, x.c, w.c, dy.c, dx.c, dw.c, db.c, bufc, wsc),
         gpu->ops->conv2d_bwd(gpu, &d, x.g, w.g, dy.g, dx.g, dw.g, db.g, bufg, wsg));
    pair_check(&dx, 1e-3, 2e-5 * sqrt((double)K * R * S), "conv backward dx");
    pair_check(&dw, 1e-3, dw_atol, "conv backward dw (accumulated)");
    pair_check(&db, 1e-4, dw_atol, "conv backward dbias (accumulated)");
    /* dx and dbias may be skipped; dw keeps accumulating */
    BOTH(cpu->ops->conv2d_bwd(cpu, &d, x.c, w.c, dy.c, NULL, dw.c, NULL, bufc, wsc),
         gpu->ops->conv2d_bwd(gpu, &d, x.g, w.g, dy.g, NULL, dw.g, NULL, bufg, wsg));
    pair_check(&dw, 1e-3, 2 * dw_atol, "conv backward dw, second batch");
    /* Without a workspace the GPU falls back to algorithms that need none. */
    if (!gpu_is_cpu) {
        ck_assert_int_eq(gpu->ops->conv2d_fwd(gpu, &d, x.g, w.g, b.g, y.g, NULL, 0), 0);
        ck_assert_int_eq(cpu->ops->conv2d_fwd(cpu, &d, x.c, w.c, b.c, y.c, bufc, wsc), 0);
        pair_check(&y, 1e-3, fwd_atol, "conv forward without workspace");
        ck_assert_int_eq(gpu->ops->conv2d_bwd(gpu, &d, x.g, w.g, dy.g, dx.g, NULL, NULL, NULL, 0),
                         0);
        pair_check(&dx, 1e-3, 2e-5 * sqrt((double)K * R * S), "conv dx without workspace");
    }
    cpu->ops->free(cpu, bufc);
    gpu->ops->free(gpu, bufg);
    pair_t *all[] = {&x, &w, &b, &y, &dy, &dx, &dw, &db};
    for (size_t i = 0; i < HS_ARRAY_LEN(all); i++) pair_free(all[i]);
}

START_TEST(test_conv2d)
{
    hs_rng_t r;
    hs_rng_seed(&r, 15, 0);
    conv_case(&r, 2, 3, 9, 11, 4, 3, 3, 1, 1);
    conv_case(&r, 3, 5, 12, 10, 6, 5, 3, 2, 2); /* R != S, pad 2, stride 2 */
    conv_case(&r, 2, 8, 7, 7, 16, 1, 1, 0, 1);  /* 1x1 */
    conv_case(&r, 4, 16, 16, 16, 32, 3, 3, 1, 2);
    conv_case(&r, 1, 1, 5, 5, 1, 5, 5, 0, 3);    /* filter as large as the input */
    conv_case(&r, 8, 3, 32, 32, 16, 3, 3, 1, 1); /* a CIFAR-like first layer */
    /* a descriptor whose output size is wrong is refused */
    hs_conv2d_desc_t bad = {.B = 1,
                            .C = 1,
                            .H = 5,
                            .W = 5,
                            .K = 1,
                            .R = 3,
                            .S = 3,
                            .pad = 0,
                            .stride = 1,
                            .P = 4,
                            .Q = 3};
    float *t = gpu_alloc(64 * sizeof(float));
    hs_error_clear();
    ck_assert_int_eq(gpu->ops->conv2d_fwd(gpu, &bad, t, t, NULL, t, NULL, 0), -EINVAL);
    ck_assert_str_ne(hs_last_error(), "");
    gpu->ops->free(gpu, t);
}
END_TEST

/* Mixed precision (hearsay/kernels.h): the products in bf16, fp16 and TF32 on the GPU (cuBLAS's
 * FAST compute types, cuDNN's TF32 algorithms over rounded operands) against the CPU's
 * emulation of the same arithmetic: the same rounded operands, summed in another order. TF32
 * on the GPU rounds ties away from zero (cvt.rna), the emulation to even: a tie is rare in
 * random data and moves a product by 2^-11 of one term, inside the tolerances. */
START_TEST(test_precision_products)
{
    const struct {
        hs_precision_t p;
        int tf32;
    } cases[] = {{HS_PREC_BF16, 0}, {HS_PREC_FP16, 0}, {HS_PREC_FP32, 1}};
    for (size_t i = 0; i < HS_ARRAY_LEN(cases); i++) {
        ck_assert_int_eq(hs_kernels_set_precision(cpu, cases[i].p, cases[i].tf32), 0);
        ck_assert_int_eq(hs_kernels_set_precision(gpu, cases[i].p, cases[i].tf32), 0);
        hs_rng_t r;
        hs_rng_seed(&r, 27, i);
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) gemm_case(&r, ta, tb, 37, 29, 53, 3, 0.7f, -0.3f);
        gemm_case(&r, 0, 0, 128, 96, 300, 0, 1.0f, 1.0f);
        conv_case(&r, 2, 3, 9, 11, 4, 3, 3, 1, 1);
        conv_case(&r, 3, 5, 12, 10, 6, 5, 3, 2, 2);
        conv_case(&r, 4, 16, 16, 16, 32, 3, 3, 1, 2);
    }
}
END_TEST

/* The compression slots (kernels/cuda/cuda_compress.cu) against the CPU's (optim/compress.c's
 * formats): fp16, bf16, none and random-k byte for byte (the same bit manipulation, the same
 * hash stream), int8 with the same scales and every value within one step (the host's
 * x * inv + u is fused on AVX2 machines and not on others), and the decoders (every kind's
 * layout: random-k's is top-k's) within the elementwise tolerance, overwriting and adding. */
START_TEST(test_compression_slots)
{
    if (!HS_KOP_HAS(gpu, compress) || !HS_KOP_HAS(gpu, decompress)) {
        ck_abort_msg("the backend has no compression slots");
        return;
    }
    const size_t n = 10007;
    const struct {
        int kind, stochastic;
    } kinds[] = {{HS_COMPRESS_NONE, 0}, {HS_COMPRESS_FP16, 0}, {HS_COMPRESS_BF16, 0},
                 {HS_COMPRESS_INT8, 0}, {HS_COMPRESS_INT8, 1}, {HS_COMPRESS_RANDK, 0}};
    hs_rng_t r;
    hs_rng_seed(&r, 31, 0);
    pair_t x = pair_new(&r, n, -3.0f, 3.0f);
    /* the edges of fp16 and bf16 (not under int8, which refuses a non-finite value) */
    float *special = malloc(n * sizeof(float));
    memcpy(special, x.c, n * sizeof(float));
    const float edges[] = {0.0f,     -0.0f, 1e-7f,  -3e-6f,  6.1e-5f,  65504.0f,  65519.0f,
                           65520.0f, -1e6f, 1e-40f, 3.0e38f, INFINITY, -INFINITY, NAN};
    for (size_t i = 0; i < HS_ARRAY_LEN(edges); i++) special[17 * i + 3] = edges[i];
    float *gspecial = gpu_alloc(n * sizeof(float));
    ck_assert_int_eq(gpu->ops->to_device(gpu, gspecial, special, n * sizeof(float)), 0);
    for (size_t ki = 0; ki < HS_ARRAY_LEN(kinds); ki++) {
        const int kind = kinds[ki].kind;
        const int dense_half = kind == HS_COMPRESS_FP16 || kind == HS_COMPRESS_BF16;
        hs_kcompress_t p = {.kind = kind,
                            .stochastic = kinds[ki].stochastic,
                            .chunk = 100,
                            .key = 0x1234567u + (uint32_t)ki,
                            .n = n,
                            .k = kind == HS_COMPRESS_RANDK ? n / 30 : n};
        const size_t nch = (n + p.chunk - 1) / p.chunk;
        p.bytes = kind == HS_COMPRESS_NONE   ? 4 * n
                  : dense_half               ? 2 * n
                  : kind == HS_COMPRESS_INT8 ? n + 4 * nch
                                             : 4 + 8 * p.k;
        const float *xc = dense_half ? special : x.c;
        const float *xg = dense_half ? gspecial : x.g;
        unsigned char *bc = malloc(p.bytes), *bg = malloc(p.bytes), *dg = gpu_alloc(p.bytes);
        size_t nc = 0, ng = 0;
        BOTH(cpu->ops->compress(cpu, &p, xc, bc, &nc), gpu->ops->compress(gpu, &p, xg, dg, &ng));
        ck_assert_uint_eq(nc, ng);
        ck_assert_int_eq(gpu->ops->to_host(gpu, bg, dg, ng), 0);
        if (kind == HS_COMPRESS_INT8) {
            ck_assert_msg(memcmp(bc, bg, 4 * nch) == 0, "int8 (stochastic %d): scales differ",
                          p.stochastic);
            size_t off = 0;
            for (size_t i = 0; i < n; i++) {
                int a = (int8_t)bc[4 * nch + i], b = (int8_t)bg[4 * nch + i];
                ck_assert_msg(abs(a - b) <= 1, "int8 (stochastic %d) at %zu: cpu %d gpu %d",
                              p.stochastic, i, a, b);
                off += a != b;
            }
            ck_assert_msg(off <= n / 100, "int8: %zu of %zu values one step off", off, n);
        } else {
            size_t first = 0;
            while (first < nc && bc[first] == bg[first]) first++;
            ck_assert_msg(first == nc, "kind %d: bytes differ from byte %zu of %zu", kind, first,
                          nc);
        }
        /* decode the CPU's bytes on both: overwrite, then y = y + 0.37 * Q */
        ck_assert_int_eq(gpu->ops->to_device(gpu, dg, bc, nc), 0);
        for (int add = 0; add < 2; add++) {
            pair_t y = pair_new(&r, n, -1.0f, 1.0f);
            BOTH(cpu->ops->decompress(cpu, &p, bc, nc, 0.37f, add, y.c),
                 gpu->ops->decompress(gpu, &p, dg, nc, 0.37f, add, y.g));
            pair_fetch(&y);
            for (size_t i = 0; i < n; i++) {
                float c = y.c[i], g = y.got[i];
                int same = isnan(c)   ? isnan(g)
                           : isinf(c) ? g == c
                                      : fabsf(g - c) <= 1e-6f + 1e-5f * fabsf(c);
                ck_assert_msg(same, "kind %d add %d at %zu: gpu %.9g cpu %.9g", kind, add, i,
                              (double)g, (double)c);
            }
            pair_free(&y);
        }
        free(bc);
        free(bg);
        gpu->ops->free(gpu, dg);
    }
    /* top-k is not a slot kind: it selects on the host */
    hs_kcompress_t t = {.kind = HS_COMPRESS_TOPK, .n = n, .k = 10, .bytes = 84};
    unsigned char *dt = gpu_alloc(84);
    size_t nt = 0;
    ck_assert_int_eq(gpu->ops->compress(gpu, &t, x.g, dt, &nt), -ENOTSUP);
    gpu->ops->free(gpu, dt);
    gpu->ops->free(gpu, gspecial);
    free(special);
    pair_free(&x);
}
END_TEST

static void pool_case(hs_rng_t *r, int B, int C, int H, int W, int size, int stride)
{
    hs_pool2d_desc_t d = {.B = B, .C = C, .H = H, .W = W, .size = size, .stride = stride};
    d.P = (H - size) / stride + 1;
    d.Q = (W - size) / stride + 1;
    size_t xn = (size_t)B * C * H * W, yn = (size_t)B * C * d.P * d.Q;
    pair_t x = pair_new(r, xn, -1, 1), y = pair_new(r, yn, 0, 1), dy = pair_new(r, yn, -1, 1);
    pair_t dx = pair_new(r, xn, 5, 6);
    int32_t *am_c = cpu_alloc(yn * sizeof(int32_t)), *am_g = gpu_alloc(yn * sizeof(int32_t));
    int32_t *am_got = malloc(yn * sizeof(int32_t));
    ck_assert_ptr_nonnull(am_got);
    BOTH(cpu->ops->maxpool_fwd(cpu, &d, x.c, y.c, am_c),
         gpu->ops->maxpool_fwd(gpu, &d, x.g, y.g, am_g));
    pair_check(&y, 0, 0, "maxpool forward");
    ck_assert_int_eq(gpu->ops->to_host(gpu, am_got, am_g, yn * sizeof(int32_t)), 0);
    for (size_t i = 0; i < yn; i++) ck_assert_int_eq(am_got[i], am_c[i]);
    BOTH(cpu->ops->maxpool_bwd(cpu, &d, x.c, y.c, am_c, dy.c, dx.c),
         gpu->ops->maxpool_bwd(gpu, &d, x.g, y.g, am_g, dy.g, dx.g));
    pair_check(&dx, 1e-6, 1e-7, "maxpool backward");
    /* without argmax (cuDNN-style): the same gradient */
    ck_assert_int_eq(gpu->ops->zero(gpu, dx.g, xn * sizeof(float)), 0);
    ck_assert_int_eq(gpu->ops->maxpool_fwd(gpu, &d, x.g, y.g, NULL), 0);
    pair_check(&y, 0, 0, "maxpool forward without argmax");
    ck_assert_int_eq(gpu->ops->maxpool_bwd(gpu, &d, x.g, y.g, NULL, dy.g, dx.g), 0);
    pair_check(&dx, 1e-6, 1e-7, "maxpool backward without argmax");
    cpu->ops->free(cpu, am_c);
    gpu->ops->free(gpu, am_g);
    free(am_got);
    pair_free(&x);
    pair_free(&y);
    pair_free(&dy);
    pair_free(&dx);
}

START_TEST(test_pooling)
{
    hs_rng_t r;
    hs_rng_seed(&r, 16, 0);
    pool_case(&r, 2, 3, 8, 8, 2, 2);
    pool_case(&r, 2, 3, 9, 7, 3, 2); /* overlapping windows, leftover rows */
    pool_case(&r, 1, 2, 5, 5, 3, 1);
    pool_case(&r, 4, 16, 32, 32, 2, 2);
    pool_case(&r, 1, 1, 4, 4, 4, 1); /* one window */
    /* global average pooling */
    const int shapes[][3] = {{3, 5, 49}, {2, 4, 1}, {8, 64, 64}, {1, 3, 1000}};
    for (size_t s = 0; s < HS_ARRAY_LEN(shapes); s++) {
        int B = shapes[s][0], C = shapes[s][1], HW = shapes[s][2];
        pair_t x = pair_new(&r, (size_t)B * C * HW, -1, 1), y = pair_new(&r, (size_t)B * C, 0, 1);
        BOTH(cpu->ops->avgpool_global_fwd(cpu, B, C, HW, x.c, y.c),
             gpu->ops->avgpool_global_fwd(gpu, B, C, HW, x.g, y.g));
        pair_check(&y, 1e-5, 1e-6, "avgpool_global_fwd");
        BOTH(cpu->ops->avgpool_global_bwd(cpu, B, C, HW, y.c, x.c),
             gpu->ops->avgpool_global_bwd(gpu, B, C, HW, y.g, x.g));
        pair_check(&x, 1e-5, 1e-7, "avgpool_global_bwd");
        pair_free(&x);
        pair_free(&y);
    }
}
END_TEST

/* ---- batch normalisation (cuDNN against the CPU loops) ---- */

START_TEST(test_batchnorm)
{
    hs_rng_t r;
    hs_rng_seed(&r, 17, 0);
    const int shapes[][3] = {{4, 3, 25}, {8, 16, 64}, {16, 10, 1}, {2, 5, 1024}};
    for (size_t s = 0; s < HS_ARRAY_LEN(shapes); s++) {
        int B = shapes[s][0], C = shapes[s][1], HW = shapes[s][2];
        size_t n = (size_t)B * C * HW;
        pair_t x = pair_new(&r, n, -2, 3), y = pair_new(&r, n, 0, 1), dy = pair_new(&r, n, -1, 1);
        pair_t dx = pair_new(&r, n, 0, 1), g = pair_new(&r, C, 0.5, 1.5),
               b = pair_new(&r, C, -1, 1);
        pair_t sm = pair_new(&r, C, 0, 1), si = pair_new(&r, C, 0, 1);
        pair_t rm = pair_new(&r, C, -0.5, 0.5), rv = pair_new(&r, C, 0.5, 2);
        pair_t dg = pair_new(&r, C, 0, 1), db = pair_new(&r, C, 0, 1);
        BOTH(cpu->ops->batchnorm_fwd_train(cpu, B, C, HW, x.c, g.c, b.c, y.c, sm.c, si.c, rm.c,
                                           rv.c, 0.1f, 1e-5f),
             gpu->ops->batchnorm_fwd_train(gpu, B, C, HW, x.g, g.g, b.g, y.g, sm.g, si.g, rm.g,
                                           rv.g, 0.1f, 1e-5f));
        pair_check(&y, 1e-4, 1e-5, "batchnorm_fwd_train y");
        pair_check(&sm, 1e-4, 1e-5, "batchnorm_fwd_train saved mean");
        pair_check(&si, 1e-4, 1e-5, "batchnorm_fwd_train saved inverse std");
        pair_check(&rm, 1e-4, 1e-5, "batchnorm_fwd_train running mean");
        pair_check(&rv, 1e-4, 1e-5, "batchnorm_fwd_train running variance (unbiased)");
        BOTH(cpu->ops->batchnorm_bwd(cpu, B, C, HW, x.c, dy.c, g.c, sm.c, si.c, 1e-5f, dx.c, dg.c,
                                     db.c),
             gpu->ops->batchnorm_bwd(gpu, B, C, HW, x.g, dy.g, g.g, sm.g, si.g, 1e-5f, dx.g, dg.g,
                                     db.g));
        pair_check(&dx, 1e-3, 1e-5, "batchnorm_bwd dx");
        pair_check(&dg, 1e-3, 1e-4, "batchnorm_bwd dgamma");
        pair_check(&db, 1e-3, 1e-4, "batchnorm_bwd dbeta");
        BOTH(cpu->ops->batchnorm_fwd_eval(cpu, B, C, HW, x.c, g.c, b.c, rm.c, rv.c, 1e-5f, y.c),
             gpu->ops->batchnorm_fwd_eval(gpu, B, C, HW, x.g, g.g, b.g, rm.g, rv.g, 1e-5f, y.g));
        pair_check(&y, 1e-4, 1e-5, "batchnorm_fwd_eval");
        pair_t *all[] = {&x, &y, &dy, &dx, &g, &b, &sm, &si, &rm, &rv, &dg, &db};
        for (size_t i = 0; i < HS_ARRAY_LEN(all); i++) pair_free(all[i]);
    }
}
END_TEST

/* ---- optimizer ---- */

START_TEST(test_sgd_step)
{
    hs_rng_t r;
    hs_rng_seed(&r, 17, 0);
    const size_t n = 100003;
    const struct {
        float lr, momentum, wd;
        int nesterov;
        size_t off;
    } cases[] = {
        {0.1f, 0.0f, 0.0f, 0, 0},  {0.05f, 0.0f, 5e-4f, 0, 1}, {0.1f, 0.9f, 0.0f, 0, 0},
        {0.1f, 0.9f, 5e-4f, 1, 0}, {0.01f, 0.5f, 1e-2f, 1, 3},
    };
    for (size_t c = 0; c < HS_ARRAY_LEN(cases); c++) {
        pair_t p = pair_new(&r, n + cases[c].off, -1, 1), g = pair_new(&r, n + cases[c].off, -1, 1);
        pair_t v = pair_new(&r, n + cases[c].off, -0.1f, 0.1f);
        size_t o = cases[c].off;
        int has_vel = cases[c].momentum != 0.0f;
        for (int step = 0; step < 3; step++) {
            BOTH(cpu->ops->sgd_step(cpu, n, cases[c].lr, cases[c].momentum, cases[c].wd,
                                    cases[c].nesterov, p.c + o, g.c + o, has_vel ? v.c + o : NULL),
                 gpu->ops->sgd_step(gpu, n, cases[c].lr, cases[c].momentum, cases[c].wd,
                                    cases[c].nesterov, p.g + o, g.g + o, has_vel ? v.g + o : NULL));
        }
        pair_check(&p, 1e-5, 1e-6, "sgd param");
        pair_check(&v, 1e-5, 1e-6, "sgd velocity");
        pair_check(&g, 0, 0, "sgd leaves grad alone");
        pair_free(&p);
        pair_free(&g);
        pair_free(&v);
    }
    float *t = gpu_alloc(16);
    ck_assert_int_eq(gpu->ops->sgd_step(gpu, 4, 0.1f, 0.9f, 0.0f, 0, t, t, NULL), -EINVAL);
    gpu->ops->free(gpu, t);
}
END_TEST

/* ---- reductions ---- */

START_TEST(test_reductions)
{
    hs_rng_t r;
    hs_rng_seed(&r, 18, 0);
    const size_t sizes[] = {1, 5, 4099, 1000003};
    for (size_t s = 0; s < HS_ARRAY_LEN(sizes); s++)
        for (size_t off = 0; off < 2; off++) {
            size_t n = sizes[s];
            pair_t x = pair_new(&r, n + off, -1, 1), y = pair_new(&r, n + off, -1, 1);
            double abs_sum = 0;
            for (size_t i = 0; i < n; i++) abs_sum += fabs(x.c[off + i]);
            double c1, g1, c2, g2, c3, g3;
            BOTH(cpu->ops->sum(cpu, n, x.c + off, &c1), gpu->ops->sum(gpu, n, x.g + off, &g1));
            BOTH(cpu->ops->dot(cpu, n, x.c + off, y.c + off, &c2),
                 gpu->ops->dot(gpu, n, x.g + off, y.g + off, &g2));
            BOTH(cpu->ops->nrm2(cpu, n, x.c + off, &c3), gpu->ops->nrm2(gpu, n, x.g + off, &g3));
            /* Both accumulate in double: only the summation order differs (error <= n eps). */
            ck_assert_msg(fabs(c1 - g1) <= 1e-10 * abs_sum + 1e-12,
                          "sum n=%zu: gpu %.17g cpu %.17g", n, g1, c1);
            ck_assert_msg(fabs(c2 - g2) <= 1e-10 * abs_sum + 1e-12,
                          "dot n=%zu: gpu %.17g cpu %.17g", n, g2, c2);
            ck_assert_msg(fabs(c3 - g3) <= 1e-10 * c3 + 1e-12, "nrm2 n=%zu: gpu %.17g cpu %.17g", n,
                          g3, c3);
            pair_free(&x);
            pair_free(&y);
        }
    double out = -1;
    ck_assert_int_eq(gpu->ops->sum(gpu, 0, NULL, &out), 0);
    ck_assert(out == 0.0);
}
END_TEST

/* Two contexts on one GPU work independently (each has its own stream and handles). */
START_TEST(test_two_contexts)
{
    hs_kernels_t *g2 = NULL;
    ck_assert_int_eq(open_gpu(&g2), 0);
    hs_rng_t r;
    hs_rng_seed(&r, 19, 0);
    pair_t x = pair_new(&r, 777, -1, 1);
    float *b = NULL;
    ck_assert_int_eq(g2->ops->alloc(g2, 777 * sizeof(float), (void **)&b), 0);
    ck_assert_int_eq(g2->ops->to_device(g2, b, x.c, 777 * sizeof(float)), 0);
    ck_assert_int_eq(g2->ops->scale(g2, 777, 2.0f, b), 0);
    ck_assert_int_eq(gpu->ops->scale(gpu, 777, 4.0f, x.g), 0);
    double s2 = 0, s1 = 0;
    ck_assert_int_eq(g2->ops->sum(g2, 777, b, &s2), 0);
    ck_assert_int_eq(gpu->ops->sum(gpu, 777, x.g, &s1), 0);
    ck_assert(2.0 * s2 == s1); /* powers of two: exact */
    ck_assert(s1 != 0.0);
    g2->ops->free(g2, b);
    hs_kernels_close(&g2);
    ck_assert_ptr_null(g2);
    pair_free(&x);
}
END_TEST

/* 1 when a library whose path contains `name` is mapped into this process. */
static int mapped(const char *name)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return -1;
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) found = strstr(line, name) != NULL;
    fclose(f);
    return found;
}

/* cuBLAS is loaded when a GPU is opened, not at start (kernels/cuda/cuda_cublas.cu): its and
 * cuBLASLt's thread-local storage would otherwise be set up in every thread of every process.
 * Checked without a GPU: not mapped at start, mapped after hs_kernels_cuda_libs_load. */
static int check_cublas_on_demand(void)
{
    if (mapped("libcublas") != 0) {
        fprintf(stderr, "FAIL: libcublas is mapped at start (it must be loaded on demand)\n");
        return 1;
    }
    if (hs_kernels_cuda_libs_load() != 0) {
        fprintf(stderr, "FAIL: loading cuBLAS: %s\n", hs_last_error());
        return 1;
    }
    if (mapped("libcublas.so") != 1 || mapped("libcublasLt.so") != 1) {
        fprintf(stderr, "FAIL: cuBLAS is not mapped after hs_kernels_cuda_libs_load\n");
        return 1;
    }
    if (hs_kernels_cuda_libs_load() != 0) { /* once: a second call finds it loaded */
        fprintf(stderr, "FAIL: loading cuBLAS a second time: %s\n", hs_last_error());
        return 1;
    }
    printf("ok: cuBLAS loaded on demand (not mapped at start)\n");
    return 0;
}

int main(void)
{
    if (check_cublas_on_demand()) return 1;
    const char *as_cpu = getenv("HS_TEST_CUDA_AS_CPU");
    gpu_is_cpu = as_cpu && strcmp(as_cpu, "1") == 0;
    if (!gpu_is_cpu) {
        hs_kernels_t *probe = NULL;
        int rc = hs_kernels_open(&probe, HS_DEV_CUDA, 0, 0);
        if (rc == -ENODEV || rc == -ENOSYS) {
            printf("SKIP: no CUDA device: %s\n", hs_last_error());
            return 77;
        }
        if (rc < 0) {
            fprintf(stderr, "opening the CUDA backend failed: %s\n", hs_last_error());
            return 1;
        }
        hs_kernels_close(&probe);
    }
    Suite *s = suite_create("kernels_cuda");
    TCase *tc = tcase_create("cuda_vs_cpu");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_table_and_memory);
    tcase_add_test(tc, test_gemm);
    tcase_add_test(tc, test_vector_ops);
    tcase_add_test(tc, test_bias);
    tcase_add_test(tc, test_softmax_xent);
    tcase_add_test(tc, test_conv2d);
    tcase_add_test(tc, test_pooling);
    tcase_add_test(tc, test_batchnorm);
    tcase_add_test(tc, test_sgd_step);
    tcase_add_test(tc, test_reductions);
    tcase_add_test(tc, test_two_contexts);
    tcase_add_test(tc, test_precision_products);
    tcase_add_test(tc, test_compression_slots);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    /* A CUDA context does not survive fork(): run the tests in this process. */
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
