/*
 * kernels/cpu/cpu_bn.c — batch normalisation on the CPU: per-channel statistics of x (B, C, HW)
 * over its B samples and HW positions (PyTorch's BatchNorm1d with HW = 1, BatchNorm2d), in
 * double for the sums, the running statistics updated as PyTorch does.
 */
#include "kernels/cpu/cpu_internal.h"

#include "hearsay/common.h"

#include <math.h>

static int bn_check(const char *what, int B, int C, int HW, const void *a, const void *b,
                    const void *c, float eps)
{
    if (B < 1 || C < 1 || HW < 1)
        return HS_ERR(-EINVAL, "%s: bad shape B=%d C=%d HW=%d", what, B, C, HW);
    if (!a || !b || !c) return HS_ERR(-EINVAL, "%s: NULL tensor", what);
    if (!(eps > 0)) return HS_ERR(-EINVAL, "%s: eps %g must be > 0", what, (double)eps);
    return 0;
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
    for (int c = 0; c < C; c++) {
        double s = 0;
        for (int b = 0; b < B; b++) {
            const float *xp = x + ((size_t)b * C + c) * HW; // (HW)
            float t = 0;
            for (int i = 0; i < HW; i++) t += xp[i];
            s += t;
        }
        const double mean = s / (double)n;
        double v = 0;
        for (int b = 0; b < B; b++) {
            const float *xp = x + ((size_t)b * C + c) * HW;
            for (int i = 0; i < HW; i++) v += ((double)xp[i] - mean) * ((double)xp[i] - mean);
        }
        const double var = v / (double)n;
        const float invstd = (float)(1.0 / sqrt(var + (double)eps));
        save_mean[c] = (float)mean;
        save_invstd[c] = invstd;
        if (running_mean && running_var) {
            running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * (float)mean;
            running_var[c] =
                (1.0f - momentum) * running_var[c] + momentum * (float)(v / (double)(n - 1));
        }
        /* (x - mean) first: x * sc + (beta - mean * sc) cancels when |mean| >> std */
        const float sc = gamma[c] * invstd, mf = (float)mean, bc = beta[c];
        for (int b = 0; b < B; b++) {
            const float *xp = x + ((size_t)b * C + c) * HW;
            float *yp = y + ((size_t)b * C + c) * HW;
            for (int i = 0; i < HW; i++) yp[i] = (xp[i] - mf) * sc + bc;
        }
    }
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

int hs_kcpu_batchnorm_bwd(hs_kernels_t *k, int B, int C, int HW, const float *x, const float *dy,
                          const float *gamma, const float *save_mean, const float *save_invstd,
                          float eps, float *dx, float *dgamma, float *dbeta)
{
    HS_TRY(bn_check("batchnorm_bwd", B, C, HW, x, dy, gamma, eps));
    if (!save_mean || !save_invstd || !dx || !dgamma || !dbeta)
        return HS_ERR(-EINVAL, "batchnorm_bwd: NULL tensor");
    const double n = (double)B * HW;
    for (int c = 0; c < C; c++) {
        const float mean = save_mean[c], invstd = save_invstd[c];
        double sdy = 0, sdyxh = 0; /* sum dy, sum dy * xhat */
        for (int b = 0; b < B; b++) {
            const float *xp = x + ((size_t)b * C + c) * HW;
            const float *gp = dy + ((size_t)b * C + c) * HW;
            for (int i = 0; i < HW; i++) {
                sdy += gp[i];
                sdyxh += (double)gp[i] * ((xp[i] - mean) * invstd);
            }
        }
        dgamma[c] = (float)sdyxh;
        dbeta[c] = (float)sdy;
        /* dx = gamma invstd (dy - mean(dy) - xhat mean(dy xhat)) */
        const float g = gamma[c] * invstd, mdy = (float)(sdy / n), mdx = (float)(sdyxh / n);
        for (int b = 0; b < B; b++) {
            const float *xp = x + ((size_t)b * C + c) * HW;
            const float *gp = dy + ((size_t)b * C + c) * HW;
            float *dp = dx + ((size_t)b * C + c) * HW;
            for (int i = 0; i < HW; i++) dp[i] = g * (gp[i] - mdy - (xp[i] - mean) * invstd * mdx);
        }
    }
    return 0;
}
