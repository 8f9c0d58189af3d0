/*
 * tests/test_precision.c — mixed precision (issue 27 item 3; docs/algorithms.md "Mixed
 * precision"): the products' operands rounded to bf16 or fp16, loss scaling, and training with
 * them.
 *
 * - The rounding (hs_round_to_precision) at its edges (ties to even, fp16's largest value and
 *   its overflow, subnormals, TF32), and against the compressors' independent fp16/bf16
 *   encoders (F16C where the CPU has it) on 200,000 values over 60 binades, bit for bit.
 * - The CPU's and the emulated device's gemm and convolutions in bf16/fp16: the fp32 product
 *   of the rounded operands, bit for bit (every transpose, strides past the columns, the
 *   convolution's forward, dx, dw and dbias), and not the fp32 result.
 * - Loss scaling: a power of two leaves fp32 and bf16 gradients unchanged to the bit; in fp16 it
 *   is what keeps small gradients (operands below 2^-14 lose bits, below 2^-25 vanish).
 * - Dynamic scaling in a job: from 2^40, the first steps overflow and are skipped (the
 *   parameters do not move) until the scale fits; under all-reduce every rank skips the same
 *   steps and the replicas stay identical.
 * - `--precision`, `--tf32`, `--loss-scale` refuse bad values, naming them.
 */
#include "config.h"

#include "hearsay/common.h"
#include "hearsay/compress.h"
#include "hearsay/data.h"
#include "hearsay/kernels.h"
#include "hearsay/nn.h"
#include "hearsay/rng.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/runlib.h"

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

#define SAME_BITS(got, want, what)                                                                 \
    do {                                                                                           \
        float g_ = (got), w_ = (want);                                                             \
        ck_assert_msg(bits(g_) == bits(w_), "%s: %.9g (0x%08x), expected %.9g (0x%08x)", what,     \
                      (double)g_, bits(g_), (double)w_, bits(w_));                                 \
    } while (0)

/* ---- the rounding ---- */

START_TEST(test_round_edges)
{
    const hs_precision_t B = HS_PREC_BF16, H = HS_PREC_FP16, F = HS_PREC_FP32;
    struct {
        hs_precision_t p;
        int tf32;
        float x, want;
        const char *what;
    } c[] = {
        {B, 0, 1.0f, 1.0f, "bf16 1"},
        {B, 0, 1.0f + 0x1p-8f, 1.0f, "bf16 tie below an even mantissa stays"},
        {B, 0, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-6f, "bf16 tie above an odd mantissa rounds up"},
        {B, 0, 1.0f + 0x1p-8f + 0x1p-20f, 1.0f + 0x1p-7f, "bf16 past the tie rounds up"},
        {B, 0, 0x1.fep127f, 0x1.fep127f, "bf16 keeps fp32's range"},
        {B, 0, 0x1.fffffep127f, INFINITY, "bf16: FLT_MAX rounds up to inf"},
        {B, 0, 0x1.0101p-100f, 0x1.02p-100f, "bf16 small values keep 8 bits"},
        {H, 0, 65504.0f, 65504.0f, "fp16's largest value"},
        {H, 0, 65519.0f, 65504.0f, "below the tie rounds down to 65504"},
        {H, 0, 65520.0f, INFINITY, "the tie above 65504 rounds to even: inf"},
        {H, 0, -70000.0f, -INFINITY, "past the range: -inf"},
        {H, 0, 1.0f + 0x1p-11f, 1.0f, "fp16 tie to even (down)"},
        {H, 0, 1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-9f, "fp16 tie to even (up)"},
        {H, 0, 0x1p-14f, 0x1p-14f, "fp16's smallest normal"},
        {H, 0, 0x1p-14f + 0x1p-30f, 0x1p-14f, "near the smallest normal"},
        {H, 0, 0x1p-24f, 0x1p-24f, "fp16's smallest subnormal"},
        {H, 0, 0x1p-25f, 0.0f, "half of it: the tie goes to 0 (even)"},
        {H, 0, 3 * 0x1p-25f, 0x1p-23f, "1.5 subnormal quanta: the tie goes to 2"},
        {H, 0, -0x1p-26f, -0.0f, "a quarter quantum: -0"},
        {H, 0, 1e-5f, 168 * 0x1p-24f, "a subnormal keeps 2^-24 steps"},
        {F, 0, 1.0f + 0x1p-20f, 1.0f + 0x1p-20f, "plain fp32: unchanged"},
        {F, 1, 1.0f + 0x1p-11f, 1.0f, "tf32 keeps 10 mantissa bits"},
        {F, 1, 0x1.0011p66f, 0x1p66f, "tf32 keeps fp32's range"},
        {F, 1, 0x1.0031p-90f, 0x1.004p-90f, "tf32 past the tie rounds up"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        SAME_BITS(hs_round_to_precision(c[i].x, c[i].p, c[i].tf32), c[i].want, c[i].what);
    ck_assert(isnan(hs_round_to_precision(NAN, H, 0)) && isnan(hs_round_to_precision(NAN, B, 0)));
    SAME_BITS(hs_round_to_precision(INFINITY, H, 0), INFINITY, "inf stays inf");

    /* against the compressors' encoders (optim/compress.c: F16C or its own code), 60 binades */
    hs_rng_t r;
    hs_rng_seed(&r, 27, 3);
    enum { N = 200000 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    uint16_t *h = malloc(N * sizeof *h);
    ck_assert(x && y && h);
    for (int i = 0; i < N; i++) {
        double m = 1.0 + hs_rng_uniform(&r), e = floor(hs_rng_uniform(&r) * 60.0) - 40.0;
        x[i] = (float)((hs_rng_uniform(&r) < 0.5 ? -1 : 1) * ldexp(m, (int)e));
    }
    for (int bf = 0; bf <= 1; bf++) {
        hs_half_encode(bf, x, h, N);
        hs_half_decode(bf, h, y, N, 1.0f, 0);
        for (int i = 0; i < N; i++)
            if (bits(hs_round_to_precision(x[i], bf ? B : H, 0)) != bits(y[i]))
                ck_abort_msg("%s of %.9g: %.9g here, %.9g from the compressor's encoder",
                             bf ? "bf16" : "fp16", (double)x[i],
                             (double)hs_round_to_precision(x[i], bf ? B : H, 0), (double)y[i]);
    }
    free(x);
    free(y);
    free(h);
}
END_TEST

START_TEST(test_precision_api)
{
    hs_precision_t p;
    ck_assert_int_eq(hs_precision_parse("bf16", &p), 0);
    ck_assert_int_eq(p, HS_PREC_BF16);
    ck_assert_int_eq(hs_precision_parse("fp16", &p), 0);
    ck_assert_int_eq(p, HS_PREC_FP16);
    ck_assert_int_eq(hs_precision_parse("fp8", &p), -EINVAL);
    ck_assert_msg(strstr(hs_last_error(), "'fp8'") && strstr(hs_last_error(), "bf16"), "%s",
                  hs_last_error());
    hs_kernels_t *k = NULL;
    ck_assert_int_eq(hs_kernels_open(&k, HS_DEV_CPU, 0, 1), 0);
    ck_assert_int_eq(k->precision, HS_PREC_FP32); /* the default */
    ck_assert_int_eq(k->tf32, 0);
    ck_assert_int_eq(hs_kernels_set_precision(k, HS_PREC_BF16, 1), -EINVAL);
    ck_assert_msg(strstr(hs_last_error(), "TF32"), "%s", hs_last_error());
    ck_assert_int_eq(hs_kernels_set_precision(k, (hs_precision_t)7, 0), -EINVAL);
    ck_assert_int_eq(hs_kernels_set_precision(k, HS_PREC_FP32, 1), 0);
    ck_assert_int_eq(hs_kernels_set_precision(k, HS_PREC_FP16, 0), 0);
    ck_assert_int_eq(k->precision, HS_PREC_FP16);
    hs_kernels_close(&k);
}
END_TEST

/* ---- the products ---- */

static float *dev_from(hs_kernels_t *k, const float *h, size_t n)
{
    void *p = NULL;
    ck_assert_int_eq(k->ops->alloc(k, n * sizeof(float), &p), 0);
    ck_assert_int_eq(k->ops->to_device(k, p, h, n * sizeof(float)), 0);
    return p;
}

static void to_host(hs_kernels_t *k, float *h, const float *d, size_t n)
{
    ck_assert_int_eq(k->ops->to_host(k, h, d, n * sizeof(float)), 0);
}

static float *rounded(const float *x, size_t n, hs_precision_t p)
{
    float *y = malloc(n * sizeof *y);
    ck_assert_ptr_nonnull(y);
    for (size_t i = 0; i < n; i++) y[i] = hs_round_to_precision(x[i], p, 0);
    return y;
}

/* Values in [-1, 1) scaled by 2^-scale_exp, with full fp32 mantissas. */
static float *randv(hs_rng_t *r, size_t n, int scale_exp)
{
    float *x = malloc(n * sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (size_t i = 0; i < n; i++) x[i] = (float)ldexp(2.0 * hs_rng_uniform(r) - 1.0, -scale_exp);
    return x;
}

/* gemm in precision p on a backend (cpu or emu) against the plain fp32 gemm of the rounded
 * operands on the CPU: the same bits; and different from the fp32 product of the originals. */
static void check_gemm(hs_device_t dev, hs_precision_t p, int ta, int tb)
{
    const int M = 13, N = 21, K = 37, lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 2, ldc = N + 1;
    const size_t na = (size_t)(ta ? K : M) * lda, nb = (size_t)(tb ? N : K) * ldb,
                 nc = (size_t)M * ldc;
    hs_rng_t r;
    hs_rng_seed(&r, 7, (uint64_t)(ta * 2 + tb));
    float *A = randv(&r, na, 0), *Bm = randv(&r, nb, 3), *C0 = randv(&r, nc, 0);
    float *Ar = rounded(A, na, p), *Br = rounded(Bm, nb, p);
    float *want = malloc(nc * sizeof *want), *plain = malloc(nc * sizeof *plain),
          *got = malloc(nc * sizeof *got);
    ck_assert(want && plain && got);

    hs_kernels_t *cpu = NULL, *k = NULL;
    ck_assert_int_eq(hs_kernels_open(&cpu, HS_DEV_CPU, 0, 1), 0);
    memcpy(want, C0, nc * sizeof *want);
    ck_assert_int_eq(cpu->ops->gemm(cpu, ta, tb, M, N, K, 0.75f, Ar, lda, Br, ldb, 0.5f, want, ldc),
                     0);
    memcpy(plain, C0, nc * sizeof *plain);
    ck_assert_int_eq(cpu->ops->gemm(cpu, ta, tb, M, N, K, 0.75f, A, lda, Bm, ldb, 0.5f, plain, ldc),
                     0);

    ck_assert_int_eq(hs_kernels_open(&k, dev, 0, 1), 0);
    ck_assert_int_eq(hs_kernels_set_precision(k, p, 0), 0);
    float *dA = dev_from(k, A, na), *dB = dev_from(k, Bm, nb), *dC = dev_from(k, C0, nc);
    ck_assert_int_eq(k->ops->gemm(k, ta, tb, M, N, K, 0.75f, dA, lda, dB, ldb, 0.5f, dC, ldc), 0);
    to_host(k, got, dC, nc);
    int differs = 0;
    for (size_t i = 0; i < nc; i++) {
        if (bits(got[i]) != bits(want[i]))
            ck_abort_msg("%s gemm on %s (ta %d tb %d): C[%zu] = %.9g, the rounded operands' "
                         "product is %.9g",
                         hs_precision_name(p), k->ops->name, ta, tb, i, (double)got[i],
                         (double)want[i]);
        differs += bits(got[i]) != bits(plain[i]);
    }
    ck_assert_msg(differs > (int)nc / 2, "%s gemm: only %d of %zu values differ from fp32's",
                  hs_precision_name(p), differs, nc);
    k->ops->free(k, dA);
    k->ops->free(k, dB);
    k->ops->free(k, dC);
    hs_kernels_close(&k);
    hs_kernels_close(&cpu);
    free(A);
    free(Bm);
    free(C0);
    free(Ar);
    free(Br);
    free(want);
    free(plain);
    free(got);
}

static const hs_device_t devs[] = {HS_DEV_CPU, HS_DEV_EMU};
static const hs_precision_t precs[] = {HS_PREC_BF16, HS_PREC_FP16};

/* _i: device (2) x precision (2) */
START_TEST(test_gemm_rounds_operands)
{
    for (int t = 0; t < 4; t++) check_gemm(devs[_i / 2], precs[_i % 2], t / 2, t % 2);
}
END_TEST

/* conv2d forward and backward in precision p: the fp32 convolution of the rounded operands. */
START_TEST(test_conv_rounds_operands)
{
    const hs_device_t dev = devs[_i / 2];
    const hs_precision_t p = precs[_i % 2];
    /* a 3x3 stride-1 layer (the direct kernels) and a 5x5 strided one (im2col) */
    const hs_conv2d_desc_t geo[] = {
        {.B = 2,
         .C = 4,
         .H = 8,
         .W = 8,
         .K = 8,
         .R = 3,
         .S = 3,
         .pad = 1,
         .stride = 1,
         .P = 8,
         .Q = 8},
        {.B = 3,
         .C = 3,
         .H = 11,
         .W = 9,
         .K = 5,
         .R = 5,
         .S = 5,
         .pad = 2,
         .stride = 2,
         .P = 6,
         .Q = 5},
    };
    for (size_t g = 0; g < sizeof geo / sizeof geo[0]; g++) {
        const hs_conv2d_desc_t *d = &geo[g];
        const size_t nx = (size_t)d->B * d->C * d->H * d->W, nw = (size_t)d->K * d->C * d->R * d->S,
                     ny = (size_t)d->B * d->K * d->P * d->Q;
        hs_rng_t r;
        hs_rng_seed(&r, 11, g);
        float *x = randv(&r, nx, 0), *w = randv(&r, nw, 2), *b = randv(&r, d->K, 0),
              *dy = randv(&r, ny, 6);
        float *xr = rounded(x, nx, p), *wr = rounded(w, nw, p), *dyr = rounded(dy, ny, p);
        hs_kernels_t *cpu = NULL, *k = NULL;
        ck_assert_int_eq(hs_kernels_open(&cpu, HS_DEV_CPU, 0, 1), 0);
        ck_assert_int_eq(hs_kernels_open(&k, dev, 0, 1), 0);
        ck_assert_int_eq(hs_kernels_set_precision(k, p, 0), 0);
        /* the reference: fp32 on the rounded operands (CPU) */
        size_t wsb = cpu->ops->conv2d_workspace(cpu, d);
        void *ws = wsb ? malloc(wsb) : NULL;
        float *y_ref = malloc(ny * 4), *dx_ref = malloc(nx * 4), *dw_ref = calloc(nw, 4),
              *db_ref = calloc(d->K, 4);
        ck_assert_int_eq(cpu->ops->conv2d_fwd(cpu, d, xr, wr, b, y_ref, ws, wsb), 0);
        ck_assert_int_eq(cpu->ops->conv2d_bwd(cpu, d, xr, wr, dyr, dx_ref, dw_ref, db_ref, ws, wsb),
                         0);
        free(ws);
        /* the backend in precision p */
        size_t kwsb = k->ops->conv2d_workspace(k, d);
        void *kws = NULL;
        if (kwsb) ck_assert_int_eq(k->ops->alloc(k, kwsb, &kws), 0);
        float *dx_ = dev_from(k, x, nx), *dw_ = dev_from(k, w, nw), *db_ = dev_from(k, b, d->K),
              *ddy = dev_from(k, dy, ny), *dyo = NULL, *ddx = NULL, *ddw = NULL, *ddb = NULL;
        ck_assert_int_eq(k->ops->alloc(k, ny * 4, (void **)&dyo), 0);
        ck_assert_int_eq(k->ops->alloc(k, nx * 4, (void **)&ddx), 0);
        ck_assert_int_eq(k->ops->alloc(k, nw * 4, (void **)&ddw), 0);
        ck_assert_int_eq(k->ops->alloc(k, d->K * 4, (void **)&ddb), 0);
        ck_assert_int_eq(k->ops->zero(k, ddw, nw * 4), 0);
        ck_assert_int_eq(k->ops->zero(k, ddb, d->K * 4), 0);
        ck_assert_int_eq(k->ops->conv2d_fwd(k, d, dx_, dw_, db_, dyo, kws, kwsb), 0);
        ck_assert_int_eq(k->ops->conv2d_bwd(k, d, dx_, dw_, ddy, ddx, ddw, ddb, kws, kwsb), 0);
        struct {
            const char *name;
            const float *dev, *ref;
            size_t n;
        } out[] = {{"y", dyo, y_ref, ny},
                   {"dx", ddx, dx_ref, nx},
                   {"dw", ddw, dw_ref, nw},
                   {"dbias", ddb, db_ref, (size_t)d->K}};
        for (size_t o = 0; o < sizeof out / sizeof out[0]; o++) {
            float *h = malloc(out[o].n * 4);
            to_host(k, h, out[o].dev, out[o].n);
            for (size_t i = 0; i < out[o].n; i++)
                if (bits(h[i]) != bits(out[o].ref[i]))
                    ck_abort_msg("%s conv %zu on %s: %s[%zu] = %.9g, the rounded operands give "
                                 "%.9g",
                                 hs_precision_name(p), g, k->ops->name, out[o].name, i,
                                 (double)h[i], (double)out[o].ref[i]);
            free(h);
        }
        /* and the rounding happened: the forward differs from plain fp32's */
        float *y32 = malloc(ny * 4), *yh = malloc(ny * 4);
        void *ws2 = wsb ? malloc(wsb) : NULL;
        ck_assert_int_eq(cpu->ops->conv2d_fwd(cpu, d, x, w, b, y32, ws2, wsb), 0);
        to_host(k, yh, dyo, ny);
        size_t differs = 0;
        for (size_t i = 0; i < ny; i++) differs += bits(y32[i]) != bits(yh[i]);
        ck_assert_msg(differs > ny / 2, "%s conv: only %zu of %zu outputs differ from fp32's",
                      hs_precision_name(p), differs, ny);
        free(ws2);
        free(y32);
        free(yh);
        float *bufs[] = {dx_, dw_, db_, ddy, dyo, ddx, ddw, ddb};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) k->ops->free(k, bufs[i]);
        if (kws) k->ops->free(k, kws);
        hs_kernels_close(&k);
        hs_kernels_close(&cpu);
        float *hb[] = {x, w, b, dy, xr, wr, dyr, y_ref, dx_ref, dw_ref, db_ref};
        for (size_t i = 0; i < sizeof hb / sizeof hb[0]; i++) free(hb[i]);
    }
}
END_TEST

/* ---- loss scaling ---- */

#define MLP "mlp:64-64-64-64-64-64-64-64-64-64-64-64-64-64-10"

/* The gradient of one batch of a model in precision p with loss scale S, into g (host). */
static double grads_at(hs_precision_t p, float S, float data_scale, float *g, size_t *np)
{
    hs_kernels_t *k = NULL;
    hs_model_t *m = NULL;
    enum { B = 256, D = 64 };
    ck_assert_int_eq(hs_kernels_open(&k, HS_DEV_CPU, 0, 1), 0);
    ck_assert_int_eq(hs_kernels_set_precision(k, p, 0), 0);
    ck_assert_int_eq(hs_model_create(&m, k, MLP, 1, 1, D, 10, B, 5), 0);
    ck_assert_int_eq(hs_model_set_loss_scale(m, S), 0);
    ck_assert(hs_model_loss_scale(m) == S);
    hs_rng_t r;
    hs_rng_seed(&r, 99, 0);
    float x[B * D];
    int32_t y[B];
    for (int i = 0; i < B * D; i++) x[i] = data_scale * (float)hs_rng_normal(&r);
    for (int i = 0; i < B; i++) y[i] = (int32_t)(hs_rng_below(&r, 10));
    double loss = 0;
    ck_assert_int_eq(hs_model_train_step(m, x, y, B, &loss, NULL), 0);
    *np = hs_model_num_params(m);
    if (g) memcpy(g, hs_model_grads(m), *np * sizeof(float));
    hs_model_free(&m);
    hs_kernels_close(&k);
    return loss;
}

START_TEST(test_loss_scale_exact)
{
    size_t np = 0;
    grads_at(HS_PREC_FP32, 1.0f, 1.0f, NULL, &np);
    float *a = malloc(np * 4), *b = malloc(np * 4);
    ck_assert(a && b);
    const hs_precision_t ps[] = {HS_PREC_FP32, HS_PREC_BF16};
    for (int i = 0; i < 2; i++) {
        double la = grads_at(ps[i], 1.0f, 1.0f, a, &np);
        double lb = grads_at(ps[i], 1024.0f, 1.0f, b, &np);
        ck_assert(la == lb);
        ck_assert_msg(memcmp(a, b, np * 4) == 0,
                      "%s: a loss scale of 1024 changed the gradient (it must be exact)",
                      hs_precision_name(ps[i]));
    }
    /* bad scales */
    hs_kernels_t *k = NULL;
    hs_model_t *m = NULL;
    ck_assert_int_eq(hs_kernels_open(&k, HS_DEV_CPU, 0, 1), 0);
    ck_assert_int_eq(hs_model_create(&m, k, MLP, 1, 1, 64, 10, 4, 5), 0);
    ck_assert_int_eq(hs_model_set_loss_scale(m, 3.0f), -EINVAL);
    ck_assert_int_eq(hs_model_set_loss_scale(m, 0.0f), -EINVAL);
    ck_assert_int_eq(hs_model_set_loss_scale(m, INFINITY), -EINVAL);
    ck_assert_int_eq(hs_model_set_loss_scale(m, 0.25f), 0);
    hs_model_free(&m);
    hs_kernels_close(&k);
    free(a);
    free(b);
}
END_TEST

/* Relative error of g against the reference r, and how many of r's nonzero entries g has
 * as exactly zero. */
static double rel_err(const float *g, const float *r, size_t n, size_t *lost)
{
    double e = 0, t = 0;
    *lost = 0;
    for (size_t i = 0; i < n; i++) {
        e += ((double)g[i] - r[i]) * ((double)g[i] - r[i]);
        t += (double)r[i] * r[i];
        *lost += r[i] != 0 && g[i] == 0;
    }
    return sqrt(e / t);
}

START_TEST(test_fp16_needs_scaling)
{
    /* 15 layers at batch 256: the loss's gradient (about 2^-11 an entry) shrinks about 2.5x
     * through every layer on its way back, below fp16's subnormals (2^-24) in the first one:
     * unscaled, most of its weight gradient is lost (measured: 3,392 of 4,096 entries zero,
     * relative error 1.02); scaled by 2^16 it is kept (none lost, relative error 0.0043,
     * what fp16's rounding of x and dy costs) */
    size_t np = 0;
    grads_at(HS_PREC_FP32, 1.0f, 1.0f, NULL, &np);
    float *ref = malloc(np * 4), *none = malloc(np * 4), *scaled = malloc(np * 4);
    ck_assert(ref && none && scaled);
    grads_at(HS_PREC_FP32, 1.0f, 1.0f, ref, &np);
    grads_at(HS_PREC_FP16, 1.0f, 1.0f, none, &np);
    grads_at(HS_PREC_FP16, 65536.0f, 1.0f, scaled, &np);
    /* the first layer's weights (64 x 64, first in the buffer): the smallest gradients */
    const size_t n1 = 64 * 64;
    size_t lost_none, lost_scaled;
    double e_none = rel_err(none, ref, n1, &lost_none);
    double e_scaled = rel_err(scaled, ref, n1, &lost_scaled);
    double big = 0;
    for (size_t i = 0; i < n1; i++) big = fmax(big, fabs(ref[i]));
    fprintf(stderr, "first layer: largest gradient %.3g\n", big);
    fprintf(stderr,
            "fp16 gradient against fp32's: relative error %.3g unscaled (%zu entries lost), "
            "%.3g with 2^16 (%zu lost)\n",
            e_none, lost_none, e_scaled, lost_scaled);
    ck_assert_msg(e_scaled < 0.01, "scaled fp16 gradient: relative error %g", e_scaled);
    ck_assert_msg(e_none > 5 * e_scaled && lost_none > 10 * (lost_scaled + 1),
                  "unscaled fp16 should lose small gradients: error %g (scaled %g), %zu lost "
                  "(scaled %zu)",
                  e_none, e_scaled, lost_none, lost_scaled);
    free(ref);
    free(none);
    free(scaled);
}
END_TEST

/* ---- in jobs ---- */

static const char *why;

#define JOB                                                                                        \
    "--model lenet5 --data digits --batch 32 --lr 0.05 --threads 1 -q --eval-every 0 "             \
    "--dump-trajectory --seed 4 "

/* All-reduce on 4 simulated ranks in fp16 with dynamic scaling from 2^40: the first steps
 * overflow; every rank skips the same ones (the replicas stay identical), the parameters do
 * not move in them, and the scale ends where it fits. */
START_TEST(test_dynamic_scaling_job)
{
    char dir[4096];
    tr_workdir_path(dir, sizeof dir, "allreduce-fp16");
    int st = tr_sim_job(dir, "-n 4",
                        "--algo allreduce " JOB
                        "--max-iters 30 --precision fp16 --loss-scale dynamic:1099511627776",
                        300);
    if (st != 0) tr_show_log(dir);
    ck_assert_int_eq(st, 0);
    double skips = tr_summary_num(dir, "loss_scale_skipped_steps");
    double s0 = tr_summary_rank_num(dir, 0, "loss_scale_skipped_steps");
    ck_assert_msg(s0 >= 5 && s0 < 30, "rank 0 skipped %g steps", s0);
    ck_assert_msg(skips == 4 * s0, "every rank skips the same steps: %g in all, rank 0 %g", skips,
                  s0);
    double fin = tr_summary_rank_num(dir, 0, "loss_scale_final");
    ck_assert_msg(fin == ldexp(1.0, 40 - (int)s0), "final scale %g after %g skips from 2^40", fin,
                  s0);
    /* the trajectories (the initial parameters, then after each of the 30 iterations):
     * identical on every rank, and the first s0 iterations moved nothing */
    size_t n0 = 0;
    float *t0 = tr_read_f32(dir, "rank-0.traj.f32", &n0);
    ck_assert_ptr_nonnull(t0);
    size_t np = n0 / 31;
    ck_assert_int_eq(n0 % 31, 0);
    for (int r = 1; r < 4; r++) {
        char name[64];
        size_t n = 0;
        snprintf(name, sizeof name, "rank-%d.traj.f32", r);
        float *t = tr_read_f32(dir, name, &n);
        ck_assert_msg(t && n == n0 && memcmp(t, t0, n0 * 4) == 0,
                      "rank %d's trajectory differs from rank 0's", r);
        free(t);
    }
    ck_assert_msg(memcmp(t0, t0 + np * (size_t)s0, np * 4) == 0,
                  "the parameters moved during the skipped steps");
    ck_assert_msg(memcmp(t0, t0 + np * ((size_t)s0 + 1), np * 4) != 0,
                  "the first step after the skips did not move the parameters");
    free(t0);
}
END_TEST

/* SGP on 4 simulated ranks with bf16 products, LeNet-5 on the digits: it trains (the loss
 * falls as fp32's does) and takes no loss scaling; the emulated device gives the same bits. */
START_TEST(test_sgp_bf16_job)
{
    char a[4096], b[4096], c[4096];
    tr_workdir_path(a, sizeof a, "sgp-fp32");
    tr_workdir_path(b, sizeof b, "sgp-bf16");
    tr_workdir_path(c, sizeof c, "sgp-bf16-emu");
    ck_assert_int_eq(tr_sim_job(a, "-n 4", "--algo sgp " JOB "--epochs 8", 300), 0);
    ck_assert_int_eq(tr_sim_job(b, "-n 4", "--algo sgp " JOB "--epochs 8 --precision bf16", 300),
                     0);
    ck_assert_int_eq(
        tr_sim_job(c, "-n 4", "--algo sgp " JOB "--epochs 8 --precision bf16 --device emu", 300),
        0);
    double l32 = tr_summary_num(a, "final_test_loss"), l16 = tr_summary_num(b, "final_test_loss");
    double a32 = tr_summary_num(a, "final_test_acc"), a16 = tr_summary_num(b, "final_test_acc");
    fprintf(stderr, "sgp lenet5 digits: fp32 loss %.4f acc %.4f, bf16 loss %.4f acc %.4f\n", l32,
            a32, l16, a16);
    ck_assert_msg(a16 > 0.8 && fabs(a16 - a32) < 0.05, "bf16 accuracy %g against fp32's %g", a16,
                  a32);
    ck_assert(tr_summary_num(b, "loss_scale_skipped_steps") == 0);
    ck_assert(tr_summary_num(b, "loss_scale_final_max") == 1);
    ck_assert(tr_summary_has(b, "\"precision\": \"bf16\""));
    for (int r = 0; r < 4; r++) {
        char name[64];
        size_t nb = 0, nc = 0;
        snprintf(name, sizeof name, "rank-%d.traj.f32", r);
        float *x = tr_read_f32(b, name, &nb), *y = tr_read_f32(c, name, &nc);
        ck_assert_msg(x && y && nb == nc && memcmp(x, y, nb * 4) == 0,
                      "rank %d: bf16 on the emulated device differs from the CPU", r);
        free(x);
        free(y);
    }
}
END_TEST

/* Messages in the compute precision where the algorithm allows (issue 27 item 3): with
 * --precision bf16 / fp16 and no --compress, CHOCO, qsgp, EASGD and leader-SGD send in that
 * precision, --compress none keeps float32, an explicit compressor wins, and all-reduce SGD keeps
 * its float32 ring (no EF-SGD). Read from the lines rank 0 prints at the start and from
 * summary.json's "messages". */
START_TEST(test_messages_in_precision)
{
    const struct {
        const char *args, *needle;
        int has;
        const char *messages; /* summary.json's "messages" */
    } cases[] = {
        {"--algo choco --precision bf16", "choco: --compress bf16,", 1, "bf16"},
        {"--algo choco --precision fp16", "choco: --compress fp16,", 1, "fp16"},
        {"--algo choco --precision bf16 --compress none", "choco: --compress none,", 1, "none"},
        {"--algo choco --precision bf16 --compress int8", "choco: --compress int8,", 1, "int8"},
        {"--algo choco", "choco: --compress none,", 1, "none"},
        {"--algo qsgp --graph exp --precision bf16", "qsgp: compressed push-sum, --compress bf16,",
         1, "bf16"},
        {"--algo easgd --tau 2 --precision fp16", "easgd: center reads and elastic adds in fp16", 1,
         "fp16"},
        {"--algo easgd --tau 2 --precision fp16 --compress none", "center reads and elastic adds",
         0, "float32"},
        {"--algo lsgd --tau 2 --precision bf16", "lsgd: leader snapshots in bf16", 1, "bf16"},
        {"--algo allreduce --precision bf16", "EF-SGD", 0, "float32"},
        {"--algo sgp --precision bf16", "--compress", 0, "float32"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dir[4096], log[4200], args[512];
        tr_workdir_path(dir, sizeof dir, "msgprec");
        snprintf(args, sizeof args,
                 "%s --model lenet5 --data digits --batch 32 --lr 0.05 --threads 1 "
                 "--eval-every 0 --max-iters 2",
                 cases[i].args);
        int st = tr_sim_job(dir, "-n 4", args, 120);
        snprintf(log, sizeof log, "%s.log", dir);
        ck_assert_msg(st == 0, "'%s': %s", cases[i].args, tr_status_text(st));
        ck_assert_msg(tr_file_has(log, cases[i].needle) == cases[i].has, "'%s': '%s' %s the log",
                      cases[i].args, cases[i].needle, cases[i].has ? "missing from" : "in");
        char want[96];
        snprintf(want, sizeof want, "\"messages\": \"%s\"", cases[i].messages);
        ck_assert_msg(tr_summary_has(dir, want), "'%s': summary.json has no %s", cases[i].args,
                      want);
    }
}
END_TEST

START_TEST(test_flags_refused)
{
    const struct {
        const char *args, *needle;
    } bad[] = {
        {"--precision fp8", "--precision"},
        {"--precision bf16 --tf32", "--tf32 applies to --precision fp32 only"},
        {"--loss-scale 3", "--loss-scale '3'"},
        {"--loss-scale dynamic:0", "--loss-scale 'dynamic:0'"},
        {"--loss-scale dynamic:", "--loss-scale 'dynamic:'"},
        {"--loss-scale huge", "power of"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char args[512];
        snprintf(args, sizeof args, "--algo allreduce --max-iters 2 -q %s", bad[i].args);
        ck_assert_msg(tr_sim_rejected("-n 2", args, 2, bad[i].needle), "%s: not refused with '%s'",
                      bad[i].args, bad[i].needle);
    }
}
END_TEST

int main(void)
{
    why = tr_require(NULL, NULL);
    hs_dataset_t tr, te;
    static char nodigits[600];
    if (!why && hs_data_load("digits", 1, &tr, &te) < 0) {
        snprintf(nodigits, sizeof nodigits,
                 "--data digits is not available (%s; apt-get install python3-sklearn)",
                 hs_last_error());
        why = nodigits;
    } else if (!why) {
        hs_dataset_free(&tr);
        hs_dataset_free(&te);
    }
    if (tr_workdir_init("precision") < 0) return 1;
    Suite *s = suite_create("precision");
    TCase *tc = tcase_create("precision");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_round_edges);
    tcase_add_test(tc, test_precision_api);
    tcase_add_loop_test(tc, test_gemm_rounds_operands, 0, 4);
    tcase_add_loop_test(tc, test_conv_rounds_operands, 0, 4);
    tcase_add_test(tc, test_loss_scale_exact);
    tcase_add_test(tc, test_fp16_needs_scaling);
    TR_ADD_TEST(tc, test_dynamic_scaling_job, why);
    TR_ADD_TEST(tc, test_sgp_bf16_job, why);
    TR_ADD_TEST(tc, test_messages_in_precision, why);
    TR_ADD_TEST(tc, test_flags_refused, why);
    suite_add_tcase(s, tc);
    return tr_run_suite(s);
}
