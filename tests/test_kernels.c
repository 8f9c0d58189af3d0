/* tests/test_kernels.c — the CPU kernel backend against naive reference loops written here,
 * and the backend selector (device parsing, CUDA absent). */
#include "config.h"

#include "hearsay/common.h"
#include "hearsay/kernels.h"
#include "hearsay/rng.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef HS_HAVE_CUDA
#define HS_HAVE_CUDA 0
#endif

static hs_kernels_t *kern;

static void setup(void)
{
    ck_assert_int_eq(hs_kernels_open(&kern, HS_DEV_CPU, 0, 1), 0);
    ck_assert_ptr_nonnull(kern);
}

/* The same kernels on a handle with 3 threads: batches of 1 and 2 leave threads idle. */
static void setup_threads(void)
{
    ck_assert_int_eq(hs_kernels_open(&kern, HS_DEV_CPU, 0, 3), 0);
    ck_assert_int_eq(kern->threads, 3);
}

static void teardown(void)
{
    hs_kernels_close(&kern);
    ck_assert_ptr_null(kern);
}

static float *vec(size_t n)
{
    void *p = NULL;
    ck_assert_int_eq(kern->ops->alloc(kern, n * sizeof(float), &p), 0);
    return p;
}

static void fill(hs_rng_t *r, float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = (float)(2.0 * hs_rng_uniform(r) - 1.0);
}

#define CLOSE(a, b, tol)                                                                           \
    do {                                                                                           \
        double a_ = (a), b_ = (b);                                                                 \
        ck_assert_msg(fabs(a_ - b_) <= (tol) * (1.0 + fabs(b_)), "%s = %.9g, expected %.9g", #a,   \
                      a_, b_);                                                                     \
    } while (0)

/* ---- backend selection ---- */

START_TEST(test_ops_table_complete)
{
    const hs_kernel_ops_t *o = kern->ops;
    ck_assert_uint_eq(o->size, sizeof(hs_kernel_ops_t));
    ck_assert_str_eq(o->name, "cpu");
    ck_assert_int_eq(o->device, HS_DEV_CPU);
    ck_assert_int_eq(kern->device, HS_DEV_CPU);
    ck_assert_int_eq(kern->threads, 1);
    /* Every slot after the header up to the optional ones (host_alloc on: staging memory and
     * IPC, which the CPU has no use for) is a function pointer and must be set. */
    const char *base = (const char *)o;
    size_t first = offsetof(hs_kernel_ops_t, alloc);
    ck_assert(o->host_alloc == NULL && o->ipc_handle == NULL); /* the host's memory is the host's */
    for (size_t off = first; off + sizeof(void (*)(void)) <= offsetof(hs_kernel_ops_t, host_alloc);
         off += sizeof(void (*)(void))) {
        void (*fp)(void);
        memcpy(&fp, base + off, sizeof(fp));
        ck_assert_msg(fp != NULL, "ops slot at offset %zu is NULL", off);
    }
}
END_TEST

START_TEST(test_device_parse)
{
    hs_device_t d;
    int idx = -1;
    ck_assert_int_eq(hs_device_parse("cpu", &d, &idx), 0);
    ck_assert_int_eq(d, HS_DEV_CPU);
    ck_assert_int_eq(idx, 0);
    ck_assert_int_eq(hs_device_parse("cuda", &d, &idx), 0);
    ck_assert_int_eq(d, HS_DEV_CUDA);
    ck_assert_int_eq(idx, 0);
    ck_assert_int_eq(hs_device_parse("cuda:3", &d, &idx), 0);
    ck_assert_int_eq(d, HS_DEV_CUDA);
    ck_assert_int_eq(idx, 3);
    const char *bad[] = {"gpu", "cuda:", "cuda:x", "cuda:-1", "cuda:+1", "cuda:1x", "", "cpu0"};
    for (size_t i = 0; i < HS_ARRAY_LEN(bad); i++) {
        hs_error_clear();
        ck_assert_int_eq(hs_device_parse(bad[i], &d, &idx), -EINVAL);
        ck_assert_msg(strstr(hs_last_error(), bad[i]) != NULL, "message '%s' does not name '%s'",
                      hs_last_error(), bad[i]);
    }
    ck_assert_int_eq(hs_device_parse(NULL, &d, &idx), -EINVAL);

    /* hs_device_select (issue 30): cuda takes the local rank modulo the visible devices,
     * cuda:N pins N; without a usable device it fails with the driver's reason */
    ck_assert_int_eq(hs_device_select("cpu", 5, &d, &idx), 0);
    ck_assert(d == HS_DEV_CPU && idx == 0);
    int count = hs_kernels_cuda_device_count();
    if (count > 0) {
        for (int lr = 0; lr < 2 * count + 1; lr++) {
            ck_assert_int_eq(hs_device_select("cuda", lr, &d, &idx), 0);
            ck_assert(d == HS_DEV_CUDA && idx == lr % count);
        }
        ck_assert_int_eq(hs_device_select("cuda:0", 3, &d, &idx), 0);
        ck_assert_int_eq(idx, 0);
        char spec[32];
        snprintf(spec, sizeof spec, "cuda:%d", count);
        ck_assert_int_eq(hs_device_select(spec, 0, &d, &idx), -ENODEV);
        ck_assert_msg(strstr(hs_last_error(), "visible (cuda:0 to cuda:"), "%s", hs_last_error());
    } else {
        int rc = hs_device_select("cuda", 0, &d, &idx);
        ck_assert_msg(rc == -ENODEV || rc == -ENOSYS, "rc %d", rc);
        ck_assert_msg(strstr(hs_last_error(), rc == -ENOSYS ? "built without CUDA" : "CUDA device"),
                      "%s", hs_last_error());
        ck_assert_int_eq(hs_device_select("cuda:1", 0, NULL, NULL), rc);
    }
}
END_TEST

START_TEST(test_open_errors)
{
    hs_kernels_t *k = (hs_kernels_t *)0x1;
    if (!HS_HAVE_CUDA) {
        hs_error_clear();
        ck_assert_int_eq(hs_kernels_open(&k, HS_DEV_CUDA, 0, 0), -ENOSYS);
        ck_assert_ptr_null(k);
        ck_assert_ptr_nonnull(strstr(hs_last_error(), "without CUDA"));
        ck_assert_ptr_nonnull(strstr(hs_last_error(), "--with-cuda"));
        ck_assert_int_eq(hs_cuda_available(), 0);
    }
    ck_assert_int_eq(hs_kernels_open(&k, HS_DEV_CPU, 0, -2), -EINVAL);
    ck_assert_int_eq(hs_kernels_open(&k, HS_DEV_CPU, 1, 1), -EINVAL);
    ck_assert_int_eq(hs_kernels_open(&k, (hs_device_t)7, 0, 1), -EINVAL);
    hs_kernels_close(NULL); /* harmless */
}
END_TEST

START_TEST(test_memory)
{
    void *p = (void *)0x1;
    ck_assert_int_eq(kern->ops->alloc(kern, 0, &p), 0);
    ck_assert_ptr_null(p);
    float *a = vec(37), *b = vec(37);
    ck_assert_uint_eq((uintptr_t)a % 64, 0);
    ck_assert_uint_eq((uintptr_t)b % 64, 0);
    float h[37], back[37];
    for (int i = 0; i < 37; i++) h[i] = (float)i * 0.5f;
    ck_assert_int_eq(kern->ops->to_device(kern, a, h, sizeof(h)), 0);
    ck_assert_int_eq(kern->ops->copy(kern, b, a, sizeof(h)), 0);
    ck_assert_int_eq(kern->ops->to_host(kern, back, b, sizeof(h)), 0);
    ck_assert_int_eq(memcmp(h, back, sizeof(h)), 0);
    ck_assert_int_eq(kern->ops->zero(kern, b, 10 * sizeof(float)), 0);
    for (int i = 0; i < 37; i++) ck_assert(b[i] == (i < 10 ? 0.0f : h[i]));
    ck_assert_int_eq(kern->ops->sync(kern), 0);
    ck_assert_int_eq(kern->ops->copy(kern, NULL, a, 4), -EINVAL);
    kern->ops->free(kern, a);
    kern->ops->free(kern, b);
    kern->ops->free(kern, NULL);
}
END_TEST

/* ---- BLAS-like ---- */

START_TEST(test_gemm_all_transposes)
{
    hs_rng_t r;
    hs_rng_seed(&r, 1, 0);
    /* with threads, also gemms large enough to be split: by rows (M >= N), by columns */
    const int shapes[3][3] = {{7, 9, 5}, {150, 37, 60}, {37, 150, 60}};
    const int n_shapes = kern->threads > 1 ? 3 : 1;
    for (int sh = 0; sh < n_shapes; sh++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                const int M = shapes[sh][0], N = shapes[sh][1], K = shapes[sh][2];
                const int arows = ta ? K : M, acols = ta ? M : K;
                const int brows = tb ? N : K, bcols = tb ? K : N;
                const int lda = acols + 3, ldb = bcols + 2, ldc = N + 4;
                float *A = vec((size_t)arows * lda), *B = vec((size_t)brows * ldb);
                float *C = vec((size_t)M * ldc), *C0 = vec((size_t)M * ldc);
                fill(&r, A, (size_t)arows * lda);
                fill(&r, B, (size_t)brows * ldb);
                fill(&r, C0, (size_t)M * ldc);
                memcpy(C, C0, (size_t)M * ldc * sizeof(float));
                const float alpha = 0.7f, beta = -0.3f;
                ck_assert_int_eq(
                    kern->ops->gemm(kern, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc), 0);
                for (int i = 0; i < M; i++) {
                    for (int j = 0; j < N; j++) {
                        double s = 0;
                        for (int l = 0; l < K; l++) {
                            double a = ta ? A[l * lda + i] : A[i * lda + l];
                            double b = tb ? B[j * ldb + l] : B[l * ldb + j];
                            s += a * b;
                        }
                        CLOSE(C[i * ldc + j], alpha * s + beta * C0[i * ldc + j], 1e-5);
                    }
                    for (int j = N; j < ldc; j++) ck_assert(C[i * ldc + j] == C0[i * ldc + j]);
                }
                /* beta = 0 overwrites C, even NaN */
                for (int i = 0; i < M * ldc; i++) C[i] = NAN;
                ck_assert_int_eq(
                    kern->ops->gemm(kern, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc), 0);
                for (int i = 0; i < M; i++)
                    for (int j = 0; j < N; j++) ck_assert(!isnan(C[i * ldc + j]));
                kern->ops->free(kern, A);
                kern->ops->free(kern, B);
                kern->ops->free(kern, C);
                kern->ops->free(kern, C0);
            }
}
END_TEST

START_TEST(test_gemm_edge_cases)
{
    float C[6] = {1, 2, 3, 4, 5, 6}, A[1] = {0}, B[1] = {0};
    /* K = 0: C = beta C */
    ck_assert_int_eq(kern->ops->gemm(kern, 0, 0, 2, 3, 0, 1.0f, A, 1, B, 3, 2.0f, C, 3), 0);
    for (int i = 0; i < 6; i++) ck_assert(C[i] == 2.0f * (float)(i + 1));
    hs_error_clear();
    ck_assert_int_eq(kern->ops->gemm(kern, 0, 0, 2, 3, 4, 1.0f, A, 3, B, 3, 0.0f, C, 3), -EINVAL);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "lda=3"));
    ck_assert_int_eq(kern->ops->gemm(kern, 0, 1, 2, 3, 4, 1.0f, A, 4, B, 3, 0.0f, C, 3), -EINVAL);
    ck_assert_int_eq(kern->ops->gemm(kern, 0, 0, 2, 3, 1, 1.0f, A, 1, B, 3, 0.0f, C, 2), -EINVAL);
    ck_assert_int_eq(kern->ops->gemm(kern, 0, 0, -1, 3, 1, 1.0f, A, 1, B, 3, 0.0f, C, 3), -EINVAL);
}
END_TEST

START_TEST(test_axpy_scale_mix)
{
    hs_rng_t r;
    hs_rng_seed(&r, 2, 0);
    const size_t n = kern->threads > 1 ? 200037 : 1037; /* long enough to be split */
    float *x = vec(n), *y = vec(n), *y0 = vec(n);
    fill(&r, x, n);
    fill(&r, y0, n);
    memcpy(y, y0, n * sizeof(float));
    ck_assert_int_eq(kern->ops->axpy(kern, n, 0.25f, x, y), 0);
    for (size_t i = 0; i < n; i++) CLOSE(y[i], y0[i] + 0.25 * x[i], 1e-6);
    memcpy(y, y0, n * sizeof(float));
    ck_assert_int_eq(kern->ops->axpy(kern, n, -1.5f, y, y), 0); /* aliased: y += a y */
    for (size_t i = 0; i < n; i++) CLOSE(y[i], -0.5 * y0[i], 1e-6);
    memcpy(y, y0, n * sizeof(float));
    ck_assert_int_eq(kern->ops->scale(kern, n, 3.0f, y), 0);
    for (size_t i = 0; i < n; i++) CLOSE(y[i], 3.0 * y0[i], 1e-6);
    memcpy(y, y0, n * sizeof(float));
    ck_assert_int_eq(kern->ops->mix(kern, n, 0.3f, x, 0.7f, y), 0);
    for (size_t i = 0; i < n; i++) CLOSE(y[i], 0.3 * x[i] + 0.7 * y0[i], 1e-6);
    ck_assert_int_eq(kern->ops->mix(kern, n - 1, 0.5f, y, 0.5f, y + 1), -EINVAL);
    ck_assert_int_eq(kern->ops->axpy(kern, 0, 1.0f, NULL, NULL), 0);
    kern->ops->free(kern, x);
    kern->ops->free(kern, y);
    kern->ops->free(kern, y0);
}
END_TEST

START_TEST(test_bias)
{
    hs_rng_t r;
    hs_rng_seed(&r, 3, 0);
    const int B = 5, N = 37;
    float y[5 * 37], y0[5 * 37], bias[37], db[37];
    fill(&r, y0, (size_t)B * N);
    fill(&r, bias, N);
    memcpy(y, y0, sizeof(y));
    ck_assert_int_eq(kern->ops->add_bias(kern, B, N, bias, y), 0);
    for (int i = 0; i < B; i++)
        for (int j = 0; j < N; j++) CLOSE(y[i * N + j], y0[i * N + j] + bias[j], 1e-6);
    for (int j = 0; j < N; j++) db[j] = 100.0f;
    ck_assert_int_eq(kern->ops->bias_grad(kern, B, N, y0, db, 0), 0); /* overwrite */
    for (int j = 0; j < N; j++) {
        double s = 0;
        for (int i = 0; i < B; i++) s += y0[i * N + j];
        CLOSE(db[j], s, 1e-5);
    }
    ck_assert_int_eq(kern->ops->bias_grad(kern, B, N, y0, db, 1), 0); /* accumulate */
    for (int j = 0; j < N; j++) {
        double s = 0;
        for (int i = 0; i < B; i++) s += y0[i * N + j];
        CLOSE(db[j], 2 * s, 1e-5);
    }
}
END_TEST

/* ---- activations ---- */

START_TEST(test_activations)
{
    hs_rng_t r;
    hs_rng_seed(&r, 4, 0);
    const size_t n = kern->threads > 1 ? 200003 : 1003; /* long enough to be split */
    float *x = vec(n), *y = vec(n), *dy = vec(n), *dx = vec(n), *t = vec(n);
    fill(&r, x, n);
    fill(&r, dy, n);
    for (size_t i = 0; i < n; i++) x[i] *= 3.0f;
    ck_assert_int_eq(kern->ops->relu_fwd(kern, n, x, y), 0);
    for (size_t i = 0; i < n; i++) ck_assert(y[i] == (x[i] > 0 ? x[i] : 0.0f));
    memcpy(t, x, n * sizeof(float));
    ck_assert_int_eq(kern->ops->relu_fwd(kern, n, t, t), 0); /* in place */
    ck_assert_int_eq(memcmp(t, y, n * sizeof(float)), 0);
    ck_assert_int_eq(kern->ops->relu_bwd(kern, n, y, dy, dx), 0);
    for (size_t i = 0; i < n; i++) ck_assert(dx[i] == (y[i] > 0 ? dy[i] : 0.0f));
    memcpy(t, dy, n * sizeof(float));
    ck_assert_int_eq(kern->ops->relu_bwd(kern, n, y, t, t), 0);
    ck_assert_int_eq(memcmp(t, dx, n * sizeof(float)), 0);

    ck_assert_int_eq(kern->ops->tanh_fwd(kern, n, x, y), 0);
    for (size_t i = 0; i < n; i++) CLOSE(y[i], tanh(x[i]), 1e-6);
    memcpy(t, x, n * sizeof(float));
    ck_assert_int_eq(kern->ops->tanh_fwd(kern, n, t, t), 0);
    ck_assert_int_eq(memcmp(t, y, n * sizeof(float)), 0);
    ck_assert_int_eq(kern->ops->tanh_bwd(kern, n, y, dy, dx), 0);
    for (size_t i = 0; i < n; i++) CLOSE(dx[i], dy[i] * (1.0 - (double)y[i] * y[i]), 1e-6);
    memcpy(t, dy, n * sizeof(float));
    ck_assert_int_eq(kern->ops->tanh_bwd(kern, n, y, t, t), 0);
    for (size_t i = 0; i < n; i++) CLOSE(t[i], dx[i], 1e-7);
    float *all[] = {x, y, dy, dx, t};
    for (size_t i = 0; i < HS_ARRAY_LEN(all); i++) kern->ops->free(kern, all[i]);
}
END_TEST

/* ---- loss ---- */

static void xent_reference(int B, int C, const float *logits, const int32_t *labels, double *probs,
                           double *loss, int *correct)
{
    *loss = 0;
    *correct = 0;
    for (int i = 0; i < B; i++) {
        const float *x = logits + i * C;
        double mx = x[0];
        int am = 0;
        for (int j = 0; j < C; j++)
            if (x[j] > mx) {
                mx = x[j];
                am = j;
            }
        double s = 0;
        for (int j = 0; j < C; j++) s += exp((double)x[j] - mx);
        for (int j = 0; j < C; j++) probs[i * C + j] = exp((double)x[j] - mx) / s;
        *loss += -(((double)x[labels[i]] - mx) - log(s));
        *correct += am == labels[i];
    }
    *loss /= B;
}

START_TEST(test_softmax_xent)
{
    hs_rng_t r;
    hs_rng_seed(&r, 5, 0);
    enum { B = 6, C = 7 };
    float logits[B * C], probs[B * C], dl[B * C], dl2[B * C];
    int32_t labels[B] = {0, 3, 6, 2, 2, 4};
    double pref[B * C], lref, loss = -1, loss2 = -1;
    int cref, correct = -1;
    fill(&r, logits, B * C);
    for (int i = 0; i < B * C; i++) logits[i] *= 4.0f;
    /* Rows 3 and 4 (label 2) tie at columns 2 and 4: the argmax is the lowest index, 2. */
    for (int i = 3; i <= 4; i++) {
        for (int j = 0; j < C; j++) logits[i * C + j] = -1.0f;
        logits[i * C + 2] = logits[i * C + 4] = 2.0f;
    }
    xent_reference(B, C, logits, labels, pref, &lref, &cref);
    /* Both tie rows (label 2) count; the independent scan below checks the other rows. */
    ck_assert_int_eq(
        kern->ops->softmax_xent(kern, B, C, logits, labels, probs, dl, &loss, &correct), 0);
    CLOSE(loss, lref, 1e-6);
    ck_assert_int_eq(correct, cref);
    int manual = 0;
    for (int i = 0; i < B; i++) {
        double gsum = 0;
        for (int j = 0; j < C; j++) {
            CLOSE(probs[i * C + j], pref[i * C + j], 1e-6);
            double g = (pref[i * C + j] - (j == labels[i])) / B;
            CLOSE(dl[i * C + j], g, 1e-6);
            gsum += dl[i * C + j];
        }
        ck_assert(fabs(gsum) < 1e-6);
        int am = 0;
        for (int j = 1; j < C; j++)
            if (logits[i * C + j] > logits[i * C + am]) am = j;
        manual += am == labels[i];
    }
    ck_assert_int_eq(correct, manual);
    ck_assert_int_ge(correct, 2);
    /* Without probs (and without correct), dlogits is the same. */
    ck_assert_int_eq(kern->ops->softmax_xent(kern, B, C, logits, labels, NULL, dl2, &loss2, NULL),
                     0);
    CLOSE(loss2, loss, 1e-12);
    for (int i = 0; i < B * C; i++) CLOSE(dl2[i], dl[i], 1e-6);
    /* In place: dlogits over the logits themselves. */
    float inplace[B * C];
    memcpy(inplace, logits, sizeof(inplace));
    ck_assert_int_eq(
        kern->ops->softmax_xent(kern, B, C, inplace, labels, NULL, inplace, &loss2, NULL), 0);
    CLOSE(loss2, loss, 1e-12);
    for (int i = 0; i < B * C; i++) CLOSE(inplace[i], dl[i], 1e-6);
    /* Loss alone. */
    ck_assert_int_eq(
        kern->ops->softmax_xent(kern, B, C, logits, labels, NULL, NULL, &loss2, &correct), 0);
    CLOSE(loss2, loss, 1e-12);
    /* Bad label. */
    labels[1] = C;
    hs_error_clear();
    ck_assert_int_eq(kern->ops->softmax_xent(kern, B, C, logits, labels, probs, dl, &loss, NULL),
                     -EINVAL);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "label 7"));
}
END_TEST

START_TEST(test_softmax_xent_huge_logits)
{
    enum { B = 2, C = 4 };
    float logits[B * C] = {1e4f, 0.0f, -1e4f, 1e4f - 2.0f, -1e4f, -1e4f + 1.0f, -1e4f, -1e4f};
    int32_t labels[B] = {3, 0};
    float probs[B * C], dl[B * C];
    double loss, pref[B * C], lref;
    int correct, cref;
    ck_assert_int_eq(
        kern->ops->softmax_xent(kern, B, C, logits, labels, probs, dl, &loss, &correct), 0);
    xent_reference(B, C, logits, labels, pref, &lref, &cref);
    ck_assert(isfinite(loss));
    /* Closed forms: row 0 (max 1e4, label 3 two below it): log(1 + e^-2) + 2; row 1 (max at
     * column 1, label 0 one below it, two more at -1): log(1 + 3 e^-1) + 1. */
    const double l0 = log(1.0 + exp(-2.0)) + 2.0, l1 = log(1.0 + 3.0 * exp(-1.0)) + 1.0;
    CLOSE(loss, (l0 + l1) / 2, 1e-6);
    CLOSE(loss, lref, 1e-6);
    ck_assert_int_eq(correct, 0);
    for (int i = 0; i < B * C; i++) {
        ck_assert(isfinite(probs[i]) && isfinite(dl[i]));
        CLOSE(probs[i], pref[i], 1e-6);
    }
}
END_TEST

/* ---- convolution ---- */

static void conv_desc(hs_conv2d_desc_t *d, int B, int C, int H, int W, int K, int R, int S, int pad,
                      int stride)
{
    *d = (hs_conv2d_desc_t){
        .B = B, .C = C, .H = H, .W = W, .K = K, .R = R, .S = S, .pad = pad, .stride = stride};
    d->P = (H + 2 * pad - R) / stride + 1;
    d->Q = (W + 2 * pad - S) / stride + 1;
}

/* Direct convolution forward (7 loops over b, k, p, q, c, r, s), and its adjoints by scatter. */
static void conv_reference(const hs_conv2d_desc_t *d, const float *x, const float *w,
                           const float *bias, const float *dy, double *y, double *dx, double *dw,
                           double *db)
{
    const int C = d->C, H = d->H, W = d->W, K = d->K, R = d->R, S = d->S, P = d->P, Q = d->Q;
    memset(dx, 0, sizeof(double) * d->B * C * H * W);
    memset(dw, 0, sizeof(double) * K * C * R * S);
    memset(db, 0, sizeof(double) * K);
    for (int b = 0; b < d->B; b++)
        for (int k = 0; k < K; k++)
            for (int p = 0; p < P; p++)
                for (int q = 0; q < Q; q++) {
                    double s_ = bias ? bias[k] : 0.0;
                    double g = dy[((b * K + k) * P + p) * Q + q];
                    db[k] += g;
                    for (int c = 0; c < C; c++)
                        for (int r = 0; r < R; r++)
                            for (int s = 0; s < S; s++) {
                                int ih = p * d->stride - d->pad + r;
                                int iw = q * d->stride - d->pad + s;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                size_t xi = ((size_t)(b * C + c) * H + ih) * W + iw;
                                size_t wi = ((size_t)(k * C + c) * R + r) * S + s;
                                s_ += (double)x[xi] * w[wi];
                                dx[xi] += g * w[wi];
                                dw[wi] += g * x[xi];
                            }
                    y[((b * K + k) * P + p) * Q + q] = s_;
                }
}

static void check_conv(const hs_conv2d_desc_t *d, int use_bias)
{
    hs_rng_t r;
    hs_rng_seed(&r, 6, (uint64_t)(d->R * 100 + d->pad * 10 + d->stride));
    const size_t nx = (size_t)d->B * d->C * d->H * d->W, nw = (size_t)d->K * d->C * d->R * d->S;
    const size_t ny = (size_t)d->B * d->K * d->P * d->Q;
    float *x = vec(nx), *w = vec(nw), *bias = vec(d->K), *y = vec(ny), *dy = vec(ny);
    float *dx = vec(nx), *dw = vec(nw), *db = vec(d->K);
    double *yr = malloc(ny * sizeof(double)), *dxr = malloc(nx * sizeof(double));
    double *dwr = malloc(nw * sizeof(double)), *dbr = malloc(d->K * sizeof(double));
    fill(&r, x, nx);
    fill(&r, w, nw);
    fill(&r, bias, d->K);
    fill(&r, dy, ny);
    size_t wsb = kern->ops->conv2d_workspace(kern, d);
    void *ws = NULL;
    ck_assert_int_eq(kern->ops->alloc(kern, wsb, &ws), 0);
    conv_reference(d, x, w, use_bias ? bias : NULL, dy, yr, dxr, dwr, dbr);

    ck_assert_int_eq(kern->ops->conv2d_fwd(kern, d, x, w, use_bias ? bias : NULL, y, ws, wsb), 0);
    for (size_t i = 0; i < ny; i++) CLOSE(y[i], yr[i], 1e-5);

    for (size_t i = 0; i < nx; i++) dx[i] = 123.0f; /* dx is overwritten */
    for (size_t i = 0; i < nw; i++) dw[i] = 0.5f;   /* dw, dbias accumulate */
    for (int i = 0; i < d->K; i++) db[i] = -2.0f;
    ck_assert_int_eq(kern->ops->conv2d_bwd(kern, d, x, w, dy, dx, dw, db, ws, wsb), 0);
    for (size_t i = 0; i < nx; i++) CLOSE(dx[i], dxr[i], 1e-5);
    for (size_t i = 0; i < nw; i++) CLOSE(dw[i], 0.5 + dwr[i], 1e-5);
    for (int i = 0; i < d->K; i++) CLOSE(db[i], -2.0 + dbr[i], 1e-5);
    /* A second call adds the same again; dx may be skipped. */
    ck_assert_int_eq(kern->ops->conv2d_bwd(kern, d, x, w, dy, NULL, dw, db, ws, wsb), 0);
    for (size_t i = 0; i < nw; i++) CLOSE(dw[i], 0.5 + 2 * dwr[i], 1e-5);
    for (int i = 0; i < d->K; i++) CLOSE(db[i], -2.0 + 2 * dbr[i], 1e-5);

    free(yr);
    free(dxr);
    free(dwr);
    free(dbr);
    float *all[] = {x, w, bias, y, dy, dx, dw, db};
    for (size_t i = 0; i < HS_ARRAY_LEN(all); i++) kern->ops->free(kern, all[i]);
    kern->ops->free(kern, ws);
}

START_TEST(test_conv2d_geometries)
{
    hs_conv2d_desc_t d;
    conv_desc(&d, 2, 3, 7, 6, 4, 3, 3, 1, 1); /* "same" 3x3 */
    check_conv(&d, 1);
    conv_desc(&d, 2, 3, 9, 8, 5, 3, 3, 0, 2); /* valid, stride 2 */
    check_conv(&d, 1);
    conv_desc(&d, 1, 2, 11, 13, 3, 3, 3, 1, 2); /* stride 2 with wide rows (Q = 7) */
    check_conv(&d, 1);
    conv_desc(&d, 1, 2, 6, 7, 3, 2, 4, 2, 3); /* non-square filter, pad 2, stride 3 */
    check_conv(&d, 0);
    conv_desc(&d, 7, 3, 8, 8, 5, 3, 3, 1, 1); /* 7 images: shares of 3, 2, 2 on 3 threads */
    check_conv(&d, 1);
    conv_desc(&d, 3, 8, 6, 5, 4, 3, 3, 1, 1); /* C >= 8: dw and dx from one im2col of dy */
    check_conv(&d, 1);
    conv_desc(&d, 2, 9, 7, 6, 3, 3, 3, 0, 1); /* valid, C >= 8: dx through col2im */
    check_conv(&d, 0);
    conv_desc(&d, 2, 4, 5, 5, 3, 1, 1, 0, 1); /* pointwise: no workspace on one thread */
    if (kern->threads == 1) ck_assert_uint_eq(kern->ops->conv2d_workspace(kern, &d), 0);
    check_conv(&d, 1);
    conv_desc(&d, 2, 4, 5, 6, 3, 1, 1, 0, 2); /* 1x1 stride 2 */
    check_conv(&d, 1);
    conv_desc(&d, 1, 1, 3, 3, 2, 3, 3, 3, 1); /* padding wider than the image in places */
    check_conv(&d, 1);
    /* 3x3 stride 1 pad 1 with W % 8 == 0 and channels in fours: the direct kernel
     * (cpu_direct.c) where the CPU has one, for y and dx */
    conv_desc(&d, 3, 8, 8, 16, 4, 3, 3, 1, 1); /* C >= 8: dw from the columns of dy */
    check_conv(&d, 1);
    conv_desc(&d, 2, 4, 4, 8, 12, 3, 3, 1, 1); /* C < 8: dw from the columns of x */
    check_conv(&d, 0);
    conv_desc(&d, 5, 3, 8, 8, 8, 3, 3, 1, 1); /* C = 3: y direct, dx through the gemm */
    check_conv(&d, 1);
    conv_desc(&d, 2, 16, 8, 24, 16, 3, 3, 1, 1); /* 3 vectors a row, 24 in all */
    check_conv(&d, 0);
    conv_desc(&d, 2, 4, 3, 16, 8, 3, 3, 1, 1); /* 6 vectors: direct only with tiles of 2 */
    check_conv(&d, 1);
    /* W = 8 with AVX-512: two rows a 512-bit vector, masked loads of the unpadded image; 6 row
     * pairs (a tile of 4, then 2) and 2 (one tile of 2) */
    conv_desc(&d, 2, 8, 12, 8, 4, 3, 3, 1, 1);
    check_conv(&d, 1);
    conv_desc(&d, 3, 12, 4, 8, 8, 3, 3, 1, 1);
    check_conv(&d, 0);
    /* y and dw direct for C <= 4, stride 1, S = 3 or 5, Q >= 8 (fwdk_image, dwk_image):
     * vectors of 8 along q, the last one overlapping, tiles of 3 (y) or 2 (dw) output
     * channels and the rest one by one */
    conv_desc(&d, 2, 1, 28, 28, 6, 5, 5, 2, 1); /* LeNet-5's first conv: Q = 28 */
    check_conv(&d, 1);
    conv_desc(&d, 3, 2, 7, 11, 5, 3, 3, 0, 1); /* valid 3x3, Q = 9, K = 5 */
    check_conv(&d, 0);
    conv_desc(&d, 2, 3, 6, 8, 3, 5, 5, 2, 1); /* 5x5 same, Q = 8: one vector */
    check_conv(&d, 1);
    conv_desc(&d, 2, 4, 5, 10, 2, 3, 5, 1, 1); /* 3x5 filter, Q = 8 */
    check_conv(&d, 1);
    conv_desc(&d, 1, 3, 9, 22, 4, 3, 3, 0, 1); /* Q = 20: 3 vectors a row, K = 4 */
    check_conv(&d, 1);
    conv_desc(&d, 2, 5, 6, 12, 4, 3, 3, 1, 1); /* C = 5: y and dw through the gemm */
    check_conv(&d, 1);
    conv_desc(&d, 2, 2, 6, 7, 3, 5, 5, 1, 1); /* Q = 5 < 8: y and dw through the gemm */
    check_conv(&d, 0);
    conv_desc(&d, 2, 6, 14, 14, 16, 5, 5, 0, 1); /* LeNet-5's second conv: col2im rows of 10 */
    check_conv(&d, 1);
}
END_TEST

START_TEST(test_conv2d_finite_differences)
{
    /* L = sum(y * g) is linear in x and w, so central differences are exact up to rounding. */
    hs_conv2d_desc_t d;
    conv_desc(&d, 2, 2, 5, 5, 3, 3, 3, 1, 2);
    hs_rng_t r;
    hs_rng_seed(&r, 7, 0);
    const size_t nx = 2 * 2 * 25, nw = 3 * 2 * 9, ny = (size_t)2 * 3 * d.P * d.Q;
    float *x = vec(nx), *w = vec(nw), *b = vec(3), *y = vec(ny), *g = vec(ny);
    float *dx = vec(nx), *dw = vec(nw), *db = vec(3);
    fill(&r, x, nx);
    fill(&r, w, nw);
    fill(&r, b, 3);
    fill(&r, g, ny);
    size_t wsb = kern->ops->conv2d_workspace(kern, &d);
    void *ws;
    ck_assert_int_eq(kern->ops->alloc(kern, wsb, &ws), 0);
    memset(dw, 0, nw * sizeof(float));
    memset(db, 0, 3 * sizeof(float));
    ck_assert_int_eq(kern->ops->conv2d_bwd(kern, &d, x, w, g, dx, dw, db, ws, wsb), 0);
#define LOSS(out)                                                                                  \
    do {                                                                                           \
        ck_assert_int_eq(kern->ops->conv2d_fwd(kern, &d, x, w, b, y, ws, wsb), 0);                 \
        double dot_;                                                                               \
        ck_assert_int_eq(kern->ops->dot(kern, ny, y, g, &dot_), 0);                                \
        (out) = dot_;                                                                              \
    } while (0)
    const float eps = 0.25f;
    float *params[] = {x, w, b}, *grads[] = {dx, dw, db};
    size_t sizes[] = {nx, nw, 3};
    for (int t = 0; t < 3; t++)
        for (size_t i = 0; i < sizes[t]; i += (t == 2 ? 1 : 7)) {
            float keep = params[t][i];
            double lp, lm;
            params[t][i] = keep + eps;
            LOSS(lp);
            params[t][i] = keep - eps;
            LOSS(lm);
            params[t][i] = keep;
            CLOSE(grads[t][i], (lp - lm) / (2 * eps), 1e-4);
        }
#undef LOSS
    /* Too small a workspace is refused. */
    ck_assert_int_eq(kern->ops->conv2d_fwd(kern, &d, x, w, b, y, ws, wsb - 4), -EINVAL);
    d.P++;
    ck_assert_int_eq(kern->ops->conv2d_fwd(kern, &d, x, w, b, y, ws, wsb), -EINVAL);
    float *all[] = {x, w, b, y, g, dx, dw, db};
    for (size_t i = 0; i < HS_ARRAY_LEN(all); i++) kern->ops->free(kern, all[i]);
    kern->ops->free(kern, ws);
}
END_TEST

/* ---- pooling ---- */

static void check_maxpool(int B, int C, int H, int W, int size, int stride)
{
    hs_pool2d_desc_t d = {.B = B, .C = C, .H = H, .W = W, .size = size, .stride = stride};
    d.P = (H - size) / stride + 1;
    d.Q = (W - size) / stride + 1;
    hs_rng_t r;
    hs_rng_seed(&r, 8, (uint64_t)(size * 10 + stride));
    const size_t nx = (size_t)B * C * H * W, ny = (size_t)B * C * d.P * d.Q;
    float *x = vec(nx), *y = vec(ny), *dy = vec(ny), *dx = vec(nx), *dx2 = vec(nx);
    double *dxr = calloc(nx, sizeof(double));
    int32_t *am = malloc(ny * sizeof(int32_t));
    fill(&r, x, nx);
    fill(&r, dy, ny);
    x[1] = x[0] = 5.0f; /* a tie in the first window: the first index wins */
    ck_assert_int_eq(kern->ops->maxpool_fwd(kern, &d, x, y, am), 0);
    for (int pl = 0; pl < B * C; pl++)
        for (int p = 0; p < d.P; p++)
            for (int q = 0; q < d.Q; q++) {
                size_t o = ((size_t)pl * d.P + p) * d.Q + q;
                int best = -1;
                for (int i = 0; i < size; i++)
                    for (int j = 0; j < size; j++) {
                        int idx = pl * H * W + (p * stride + i) * W + q * stride + j;
                        if (best < 0 || x[idx] > x[best]) best = idx;
                    }
                ck_assert(y[o] == x[best]);
                ck_assert_int_eq(am[o], best);
                dxr[best] += dy[o];
            }
    ck_assert_int_eq(am[0], 0);
    for (size_t i = 0; i < nx; i++) dx[i] = dx2[i] = 7.0f;
    ck_assert_int_eq(kern->ops->maxpool_bwd(kern, &d, x, y, am, dy, dx), 0);
    ck_assert_int_eq(kern->ops->maxpool_bwd(kern, &d, x, y, NULL, dy, dx2), 0);
    for (size_t i = 0; i < nx; i++) {
        CLOSE(dx[i], dxr[i], 1e-6);
        CLOSE(dx2[i], dxr[i], 1e-6);
    }
    /* Forward without argmax gives the same y. */
    float *y2 = vec(ny);
    ck_assert_int_eq(kern->ops->maxpool_fwd(kern, &d, x, y2, NULL), 0);
    ck_assert_int_eq(memcmp(y, y2, ny * sizeof(float)), 0);
    free(dxr);
    free(am);
    float *all[] = {x, y, dy, dx, dx2, y2};
    for (size_t i = 0; i < HS_ARRAY_LEN(all); i++) kern->ops->free(kern, all[i]);
}

START_TEST(test_maxpool)
{
    check_maxpool(2, 3, 8, 8, 2, 2);
    check_maxpool(2, 3, 7, 9, 2, 2); /* the 2x2 path with an unused last row and column */
    check_maxpool(2, 3, 7, 8, 3, 2); /* overlapping windows, ragged edge */
    check_maxpool(1, 2, 5, 5, 3, 1);
    hs_pool2d_desc_t d = {.B = 1, .C = 1, .H = 4, .W = 4, .size = 2, .stride = 2, .P = 3, .Q = 2};
    float x[16] = {0}, y[9];
    ck_assert_int_eq(kern->ops->maxpool_fwd(kern, &d, x, y, NULL), -EINVAL);
}
END_TEST

START_TEST(test_avgpool_global)
{
    hs_rng_t r;
    hs_rng_seed(&r, 9, 0);
    enum { B = 3, C = 5, HW = 49 };
    float x[B * C * HW], y[B * C], dy[B * C], dx[B * C * HW];
    fill(&r, x, B * C * HW);
    fill(&r, dy, B * C);
    ck_assert_int_eq(kern->ops->avgpool_global_fwd(kern, B, C, HW, x, y), 0);
    for (int i = 0; i < B * C; i++) {
        double s = 0;
        for (int j = 0; j < HW; j++) s += x[i * HW + j];
        CLOSE(y[i], s / HW, 1e-6);
    }
    ck_assert_int_eq(kern->ops->avgpool_global_bwd(kern, B, C, HW, dy, dx), 0);
    for (int i = 0; i < B * C; i++)
        for (int j = 0; j < HW; j++) CLOSE(dx[i * HW + j], dy[i] / (double)HW, 1e-6);
}
END_TEST

/* ---- optimizer ---- */

/* ---- batch norm ---- */

/* Batch norm of x (B, C, HW) in double: y, the saved mean and 1/std, the running statistics
 * after one update from rm = 0.5, rv = 2; then dx, dgamma, dbeta for dy. */
static void bn_reference(int B, int C, int HW, const float *x, const float *gamma,
                         const float *beta, const float *dy, float mom, float eps, double *y,
                         double *mean, double *invstd, double *rm, double *rv, double *dx,
                         double *dgamma, double *dbeta)
{
    const double n = (double)B * HW;
    for (int c = 0; c < C; c++) {
        double s = 0, v = 0, sdy = 0, sdyxh = 0;
        for (int b = 0; b < B; b++)
            for (int i = 0; i < HW; i++) s += x[((size_t)b * C + c) * HW + i];
        const double m = s / n;
        for (int b = 0; b < B; b++)
            for (int i = 0; i < HW; i++) {
                double e = x[((size_t)b * C + c) * HW + i] - m;
                v += e * e;
            }
        const double is = 1.0 / sqrt(v / n + eps);
        mean[c] = m;
        invstd[c] = is;
        rm[c] = (1 - mom) * 0.5 + mom * m;
        rv[c] = (1 - mom) * 2.0 + mom * v / (n - 1);
        for (int b = 0; b < B; b++)
            for (int i = 0; i < HW; i++) {
                size_t j = ((size_t)b * C + c) * HW + i;
                double xh = (x[j] - m) * is;
                y[j] = xh * gamma[c] + beta[c];
                sdy += dy[j];
                sdyxh += dy[j] * xh;
            }
        dgamma[c] = sdyxh;
        dbeta[c] = sdy;
        for (int b = 0; b < B; b++)
            for (int i = 0; i < HW; i++) {
                size_t j = ((size_t)b * C + c) * HW + i;
                double xh = (x[j] - m) * is;
                dx[j] = gamma[c] * is * (dy[j] - sdy / n - xh * sdyxh / n);
            }
    }
}

static void check_batchnorm(int B, int C, int HW, float shift)
{
    hs_rng_t r;
    hs_rng_seed(&r, 8, (uint64_t)(B * 10000 + C * 100 + HW));
    const size_t n = (size_t)B * C * HW;
    float *x = vec(n), *dy = vec(n), *y = vec(n), *dx = vec(n), *g = vec(C), *be = vec(C);
    float *sm = vec(C), *si = vec(C), *rm = vec(C), *rv = vec(C), *dg = vec(C), *db = vec(C);
    fill(&r, x, n);
    fill(&r, dy, n);
    fill(&r, g, C);
    fill(&r, be, C);
    for (size_t i = 0; i < n; i++) x[i] += shift; /* a mean far from 0 */
    for (int c = 0; c < C; c++) rm[c] = 0.5f, rv[c] = 2.0f;
    double *yr = malloc(n * sizeof(double)), *dxr = malloc(n * sizeof(double));
    double *st = malloc(6 * (size_t)C * sizeof(double));
    double *mr = st, *isr = st + C, *rmr = st + 2 * C, *rvr = st + 3 * C, *dgr = st + 4 * C,
           *dbr = st + 5 * C;
    const float mom = 0.1f, eps = 1e-5f;
    bn_reference(B, C, HW, x, g, be, dy, mom, eps, yr, mr, isr, rmr, rvr, dxr, dgr, dbr);
    ck_assert_int_eq(
        kern->ops->batchnorm_fwd_train(kern, B, C, HW, x, g, be, y, sm, si, rm, rv, mom, eps), 0);
    for (size_t i = 0; i < n; i++) CLOSE(y[i], yr[i], 1e-4);
    for (int c = 0; c < C; c++) {
        CLOSE(sm[c], mr[c], 1e-6);
        CLOSE(si[c], isr[c], 1e-4);
        CLOSE(rm[c], rmr[c], 1e-6);
        CLOSE(rv[c], rvr[c], 1e-4);
    }
    ck_assert_int_eq(kern->ops->batchnorm_bwd(kern, B, C, HW, x, dy, g, sm, si, eps, dx, dg, db),
                     0);
    for (size_t i = 0; i < n; i++) CLOSE(dx[i], dxr[i], 1e-3);
    for (int c = 0; c < C; c++) {
        CLOSE(dg[c], dgr[c], 1e-3);
        CLOSE(db[c], dbr[c], 1e-4);
    }
    free(yr);
    free(dxr);
    free(st);
    float *all[] = {x, dy, y, dx, g, be, sm, si, rm, rv, dg, db};
    for (size_t i = 0; i < HS_ARRAY_LEN(all); i++) kern->ops->free(kern, all[i]);
}

START_TEST(test_batchnorm)
{
    check_batchnorm(4, 3, 5, 0.0f);     /* small: one thread runs it */
    check_batchnorm(6, 7, 1000, 0.0f);  /* split over the threads, odd channel count */
    check_batchnorm(3, 5, 4096, 30.0f); /* long planes, |mean| >> std */
    check_batchnorm(64, 4, 1, 0.0f);    /* BatchNorm1d: planes of one value */
}
END_TEST

START_TEST(test_sgd_step)
{
    struct {
        float lr, momentum, wd;
        int nesterov;
    } cfg[] = {{0.1f, 0.0f, 0.0f, 0},   {0.1f, 0.0f, 1e-2f, 0},  {0.05f, 0.9f, 0.0f, 0},
               {0.05f, 0.9f, 5e-4f, 0}, {0.05f, 0.9f, 5e-4f, 1}, {0.2f, 0.5f, 0.0f, 1}};
    hs_rng_t r;
    hs_rng_seed(&r, 10, 0);
    const size_t n = 53;
    float *p = vec(n), *g = vec(n), *v = vec(n);
    double pr[53], vr[53];
    for (size_t c = 0; c < HS_ARRAY_LEN(cfg); c++) {
        fill(&r, p, n);
        memset(v, 0, n * sizeof(float));
        for (size_t i = 0; i < n; i++) {
            pr[i] = p[i];
            vr[i] = 0;
        }
        for (int step = 0; step < 4; step++) {
            fill(&r, g, n);
            float *vel = cfg[c].momentum != 0 ? v : NULL;
            ck_assert_int_eq(kern->ops->sgd_step(kern, n, cfg[c].lr, cfg[c].momentum, cfg[c].wd,
                                                 cfg[c].nesterov, p, g, vel),
                             0);
            for (size_t i = 0; i < n; i++) {
                double gg = g[i] + (double)cfg[c].wd * pr[i], st = gg;
                if (cfg[c].momentum != 0) {
                    vr[i] = cfg[c].momentum * vr[i] + gg;
                    st = cfg[c].nesterov ? gg + cfg[c].momentum * vr[i] : vr[i];
                }
                pr[i] -= cfg[c].lr * st;
            }
            for (size_t i = 0; i < n; i++) {
                CLOSE(p[i], pr[i], 1e-5);
                if (cfg[c].momentum != 0) CLOSE(v[i], vr[i], 1e-5);
            }
        }
    }
    ck_assert_int_eq(kern->ops->sgd_step(kern, n, 0.1f, 0.9f, 0.0f, 0, p, g, NULL), -EINVAL);
    kern->ops->free(kern, p);
    kern->ops->free(kern, g);
    kern->ops->free(kern, v);
}
END_TEST

/* ---- reductions ---- */

START_TEST(test_reductions)
{
    hs_rng_t r;
    hs_rng_seed(&r, 11, 0);
    const size_t n = 100003;
    float *x = vec(n), *y = vec(n);
    fill(&r, x, n);
    fill(&r, y, n);
    double s = 0, d = 0, q = 0, out;
    for (size_t i = 0; i < n; i++) {
        s += x[i];
        d += (double)x[i] * y[i];
        q += (double)x[i] * x[i];
    }
    ck_assert_int_eq(kern->ops->sum(kern, n, x, &out), 0);
    CLOSE(out, s, 1e-10);
    ck_assert_int_eq(kern->ops->dot(kern, n, x, y, &out), 0);
    CLOSE(out, d, 1e-10);
    ck_assert_int_eq(kern->ops->nrm2(kern, n, x, &out), 0);
    CLOSE(out, sqrt(q), 1e-10);
    /* Accumulated in double: a float running sum of 2^20 copies of 0.1f is off by ~1e-3. */
    const size_t m = (size_t)1 << 20;
    float *z = vec(m);
    for (size_t i = 0; i < m; i++) z[i] = 0.1f;
    ck_assert_int_eq(kern->ops->sum(kern, m, z, &out), 0);
    CLOSE(out, (double)m * (double)0.1f, 1e-12);
    ck_assert_int_eq(kern->ops->sum(kern, 0, NULL, &out), 0);
    ck_assert(out == 0.0);
    kern->ops->free(kern, x);
    kern->ops->free(kern, y);
    kern->ops->free(kern, z);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kernels");
    TCase *sel = tcase_create("select");
    tcase_add_test(sel, test_device_parse);
    tcase_add_test(sel, test_open_errors);
    suite_add_tcase(s, sel);
    TCase *tc = tcase_create("cpu");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_ops_table_complete);
    tcase_add_test(tc, test_memory);
    tcase_add_test(tc, test_gemm_all_transposes);
    tcase_add_test(tc, test_gemm_edge_cases);
    tcase_add_test(tc, test_axpy_scale_mix);
    tcase_add_test(tc, test_bias);
    tcase_add_test(tc, test_activations);
    tcase_add_test(tc, test_softmax_xent);
    tcase_add_test(tc, test_softmax_xent_huge_logits);
    tcase_add_test(tc, test_conv2d_geometries);
    tcase_add_test(tc, test_conv2d_finite_differences);
    tcase_add_test(tc, test_maxpool);
    tcase_add_test(tc, test_avgpool_global);
    tcase_add_test(tc, test_batchnorm);
    tcase_add_test(tc, test_sgd_step);
    tcase_add_test(tc, test_reductions);
    suite_add_tcase(s, tc);
    TCase *mt = tcase_create("cpu-3-threads");
    tcase_add_checked_fixture(mt, setup_threads, teardown);
    tcase_add_test(mt, test_conv2d_geometries);
    tcase_add_test(mt, test_conv2d_finite_differences);
    tcase_add_test(mt, test_batchnorm);
    tcase_add_test(mt, test_gemm_all_transposes);
    tcase_add_test(mt, test_axpy_scale_mix);
    tcase_add_test(mt, test_activations);
    suite_add_tcase(s, mt);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
