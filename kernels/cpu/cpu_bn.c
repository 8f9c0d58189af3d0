/*
 * kernels/cpu/cpu_bn.c — batch normalisation on the CPU: per-channel statistics of x (B, C, HW)
 * over its B samples and HW positions (PyTorch's BatchNorm1d with HW = 1, BatchNorm2d): each
 * plane of HW values summed in float lanes, the planes added in double; the running
 * statistics updated as PyTorch does. The channels are split among the handle's threads.
 */
#include "kernels/cpu/cpu_internal.h"

#include "hearsay/common.h"

#include <math.h>

/* Below this many values a call runs on the caller alone (waking a worker costs more). */
#define BN_PARALLEL_MIN 32768

static int bn_check(const char *what, int B, int C, int HW, const void *a, const void *b,
                    const void *c, float eps)
{
    if (B < 1 || C < 1 || HW < 1)
        return HS_ERR(-EINVAL, "%s: bad shape B=%d C=%d HW=%d", what, B, C, HW);
    if (!a || !b || !c) return HS_ERR(-EINVAL, "%s: NULL tensor", what);
    if (!(eps > 0)) return HS_ERR(-EINVAL, "%s: eps %g must be > 0", what, (double)eps);
    return 0;
}

/* Plane loops (HW values of one sample and channel), float partial sums in 16 lanes; the
 * callers add the planes in double. */
HS_KCPU_SIMD static float sum_loop(size_t n, const float *restrict x)
{
    float acc[16] = {0}, t = 0.0f;
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (size_t j = 0; j < 16; j++) acc[j] += x[i + j];
    for (; i < n; i++) t += x[i];
    for (int j = 0; j < 16; j++) t += acc[j];
    return t;
}

/* sum (x - m)^2 */
HS_KCPU_SIMD static float sqdev_loop(size_t n, const float *restrict x, float m)
{
    float acc[16] = {0}, t = 0.0f;
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (size_t j = 0; j < 16; j++) {
            float e = x[i + j] - m;
            acc[j] += e * e;
        }
    for (; i < n; i++) t += (x[i] - m) * (x[i] - m);
    for (int j = 0; j < 16; j++) t += acc[j];
    return t;
}

/* y = (x - m) sc + bc: (x - mean) first, since x sc + (beta - mean sc) cancels when
 * |mean| >> std */
HS_KCPU_SIMD static void affine_loop(size_t n, const float *restrict x, float m, float sc, float bc,
                                     float *restrict y)
{
    HS_KCPU_FOR(i, n, y[i] = (x[i] - m) * sc + bc);
}

/* *sdy += sum dy, *sdyx += sum dy (x - m) */
HS_KCPU_SIMD static void bwd_sums_loop(size_t n, const float *restrict x, const float *restrict dy,
                                       float m, double *sdy, double *sdyx)
{
    float a[16] = {0}, b[16] = {0}, ta = 0.0f, tb = 0.0f;
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (size_t j = 0; j < 16; j++) {
            a[j] += dy[i + j];
            b[j] += dy[i + j] * (x[i + j] - m);
        }
    for (; i < n; i++) {
        ta += dy[i];
        tb += dy[i] * (x[i] - m);
    }
    for (int j = 0; j < 16; j++) {
        ta += a[j];
        tb += b[j];
    }
    *sdy += ta;
    *sdyx += tb;
}

/* dx = g (dy - mdy - (x - m) invstd mdx) */
HS_KCPU_SIMD static void bwd_dx_loop(size_t n, const float *restrict x, const float *restrict dy,
                                     float m, float invstd, float g, float mdy, float mdx,
                                     float *restrict dx)
{
    HS_KCPU_FOR(i, n, dx[i] = g * (dy[i] - mdy - (x[i] - m) * invstd * mdx));
}

/* One batch-norm call, its channels split among the handle's threads. */
typedef struct {
    int B, C, HW;
    const float *x, *dy, *gamma, *beta; // x, dy (B, C, HW); gamma, beta (C)
    float *y;                           // y or dx (B, C, HW)
    float *mean, *invstd;               // saved statistics (C)
    float *running_mean, *running_var;  // (C) or NULL
    float *dgamma, *dbeta;              // (C)
    float momentum, eps;
} bn_task_t;

static void bn_fwd_share(void *arg, int t, int T)
{
    const bn_task_t *a = arg;
    const int B = a->B, C = a->C;
    const size_t HW = (size_t)a->HW, n = (size_t)B * HW;
    size_t c0, c1;
    hs_kcpu_share((size_t)C, t, T, &c0, &c1);
    for (size_t c = c0; c < c1; c++) {
        double s = 0;
        for (int b = 0; b < B; b++) s += sum_loop(HW, a->x + ((size_t)b * C + c) * HW);
        const double mean = s / (double)n;
        const float mf = (float)mean;
        double v = 0;
        for (int b = 0; b < B; b++) v += sqdev_loop(HW, a->x + ((size_t)b * C + c) * HW, mf);
        /* the float mean is off the exact one by d: sum (x - mf)^2 = v_exact + n d^2 */
        const double d = mean - (double)mf;
        v = v - (double)n * d * d;
        if (v < 0) v = 0;
        const double var = v / (double)n;
        const float invstd = (float)(1.0 / sqrt(var + (double)a->eps));
        a->mean[c] = mf;
        a->invstd[c] = invstd;
        if (a->running_mean && a->running_var) {
            const float mo = a->momentum;
            a->running_mean[c] = (1.0f - mo) * a->running_mean[c] + mo * mf;
            a->running_var[c] = (1.0f - mo) * a->running_var[c] + mo * (float)(v / (double)(n - 1));
        }
        const float sc = a->gamma[c] * invstd, bc = a->beta[c];
        for (int b = 0; b < B; b++) {
            const size_t off = ((size_t)b * C + c) * HW;
            affine_loop(HW, a->x + off, mf, sc, bc, a->y + off);
        }
    }
}

int hs_kcpu_batchnorm_fwd_train(hs_kernels_t *k, int B, int C, int HW, const float *x,
                                const float *gamma, const float *beta, float *y, float *save_mean,
                                float *save_invstd, float *running_mean, float *running_var,
                                float momentum, float eps)
{
    HS_TRY(bn_check("batchnorm_fwd_train", B, C, HW, x, y, gamma, eps));
    if (!beta || !save_mean || !save_invstd)
        return HS_ERR(-EINVAL, "batchnorm_fwd_train: NULL tensor");
    const size_t n = (size_t)B * HW;
    if (n < 2)
        return HS_ERR(-EINVAL,
                      "batchnorm_fwd_train: one value per channel (B=%d, HW=%d): the batch "
                      "statistics need at least 2",
                      B, HW);
    bn_task_t a = {.B = B,
                   .C = C,
                   .HW = HW,
                   .x = x,
                   .gamma = gamma,
                   .beta = beta,
                   .y = y,
                   .mean = save_mean,
                   .invstd = save_invstd,
                   .running_mean = running_mean,
                   .running_var = running_var,
                   .momentum = momentum,
                   .eps = eps};
    if (C > 1 && (size_t)C * n >= BN_PARALLEL_MIN)
        hs_kcpu_parallel(k, bn_fwd_share, &a);
    else
        bn_fwd_share(&a, 0, 1);
    return 0;
}

int hs_kcpu_batchnorm_fwd_eval(hs_kernels_t *k, int B, int C, int HW, const float *x,
                               const float *gamma, const float *beta, const float *running_mean,
                               const float *running_var, float eps, float *y)
{
    HS_TRY(bn_check("batchnorm_fwd_eval", B, C, HW, x, y, gamma, eps));
    if (!beta || !running_mean || !running_var)
        return HS_ERR(-EINVAL, "batchnorm_fwd_eval: NULL tensor");
    for (int c = 0; c < C; c++) {
        const float sc = gamma[c] / sqrtf(running_var[c] + eps), mf = running_mean[c], bc = beta[c];
        for (int b = 0; b < B; b++) {
            const float *xp = x + ((size_t)b * C + c) * HW;
            float *yp = y + ((size_t)b * C + c) * HW;
            for (int i = 0; i < HW; i++) yp[i] = (xp[i] - mf) * sc + bc;
        }
    }
    return 0;
}

static void bn_bwd_share(void *arg, int t, int T)
{
    const bn_task_t *a = arg;
    const int B = a->B, C = a->C;
    const size_t HW = (size_t)a->HW;
    const double n = (double)B * a->HW;
    size_t c0, c1;
    hs_kcpu_share((size_t)C, t, T, &c0, &c1);
    for (size_t c = c0; c < c1; c++) {
        const float mean = a->mean[c], invstd = a->invstd[c];
        double sdy = 0, sdyx = 0; /* sum dy, sum dy (x - mean) */
        for (int b = 0; b < B; b++) {
            const size_t off = ((size_t)b * C + c) * HW;
            bwd_sums_loop(HW, a->x + off, a->dy + off, mean, &sdy, &sdyx);
        }
        const double sdyxh = sdyx * invstd; /* sum dy xhat */
        a->dgamma[c] = (float)sdyxh;
        a->dbeta[c] = (float)sdy;
        /* dx = gamma invstd (dy - mean(dy) - xhat mean(dy xhat)) */
        const float g = a->gamma[c] * invstd, mdy = (float)(sdy / n), mdx = (float)(sdyxh / n);
        for (int b = 0; b < B; b++) {
            const size_t off = ((size_t)b * C + c) * HW;
            bwd_dx_loop(HW, a->x + off, a->dy + off, mean, invstd, g, mdy, mdx, a->y + off);
        }
    }
}

int hs_kcpu_batchnorm_bwd(hs_kernels_t *k, int B, int C, int HW, const float *x, const float *dy,
                          const float *gamma, const float *save_mean, const float *save_invstd,
                          float eps, float *dx, float *dgamma, float *dbeta)
{
    HS_TRY(bn_check("batchnorm_bwd", B, C, HW, x, dy, gamma, eps));
    if (!save_mean || !save_invstd || !dx || !dgamma || !dbeta)
        return HS_ERR(-EINVAL, "batchnorm_bwd: NULL tensor");
    bn_task_t a = {.B = B,
                   .C = C,
                   .HW = HW,
                   .x = x,
                   .dy = dy,
                   .gamma = gamma,
                   .y = dx,
                   .mean = (float *)save_mean,
                   .invstd = (float *)save_invstd,
                   .dgamma = dgamma,
                   .dbeta = dbeta};
    if (C > 1 && (size_t)C * B * HW >= BN_PARALLEL_MIN)
        hs_kcpu_parallel(k, bn_bwd_share, &a);
    else
        bn_bwd_share(&a, 0, 1);
    return 0;
}
