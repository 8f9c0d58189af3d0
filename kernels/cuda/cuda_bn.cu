/*
 * kernels/cuda/cuda_bn.cu — batch normalisation through cuDNN (CUDNN_BATCHNORM_SPATIAL: one
 * mean and variance per channel over B and HW; x is described as (B, C, HW, 1) NCHW). Same
 * contract as the CPU kernels (include/hearsay/kernels.h): cuDNN's saved inverse standard
 * deviation is 1 / sqrt(var + eps), and its running variance is updated with the unbiased
 * variance, as PyTorch's.
 */
#include "cuda_internal.h"

#include "hearsay/common.h"

/* The tensor descriptors of one call: x/y (B, C, HW, 1) and the per-channel (1, C, 1, 1). */
typedef struct bn_desc {
    cudnnTensorDescriptor_t x, c;
} bn_desc_t;

static void bn_desc_free(bn_desc_t *d)
{
    if (d->x) cudnnDestroyTensorDescriptor(d->x);
    if (d->c) cudnnDestroyTensorDescriptor(d->c);
    d->x = d->c = NULL;
}

static int bn_desc_make(bn_desc_t *d, int B, int C, int HW)
{
    d->x = d->c = NULL;
    HS_KCUDNN_CHECK(cudnnCreateTensorDescriptor(&d->x));
    HS_KCUDNN_CHECK(cudnnCreateTensorDescriptor(&d->c));
    HS_KCUDNN_CHECK(
        cudnnSetTensor4dDescriptor(d->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, B, C, HW, 1));
    HS_KCUDNN_CHECK(cudnnDeriveBNTensorDescriptor(d->c, d->x, CUDNN_BATCHNORM_SPATIAL));
    return 0;
}

static int bn_check(const char *what, int B, int C, int HW, const void *a, const void *b,
                    const void *c, float eps)
{
    if (B < 1 || C < 1 || HW < 1)
        return HS_ERR(-EINVAL, "cuda %s: bad shape B=%d C=%d HW=%d", what, B, C, HW);
    if (!a || !b || !c) return HS_ERR(-EINVAL, "cuda %s: NULL tensor", what);
    if (!(eps >= (float)CUDNN_BN_MIN_EPSILON))
        return HS_ERR(-EINVAL, "cuda %s: eps %g below cuDNN's minimum %g", what, (double)eps,
                      (double)CUDNN_BN_MIN_EPSILON);
    return 0;
}

int hs_kcuda_batchnorm_fwd_train(hs_kernels_t *k, int B, int C, int HW, const float *x,
                                 const float *gamma, const float *beta, float *y, float *save_mean,
                                 float *save_invstd, float *running_mean, float *running_var,
                                 float momentum, float eps)
{
    HS_TRY(bn_check("batchnorm_fwd_train", B, C, HW, x, y, gamma, eps));
    if (!beta || !save_mean || !save_invstd)
        return HS_ERR(-EINVAL, "cuda batchnorm_fwd_train: NULL tensor");
    if ((size_t)B * HW < 2)
        return HS_ERR(-EINVAL, "cuda batchnorm_fwd_train: one value per channel (B=%d, HW=%d)", B,
                      HW);
    HS_TRY(hs_kcuda_enter(k));
    hs_kcuda_t *c = hs_kcuda(k);
    bn_desc_t d;
    int rc = bn_desc_make(&d, B, C, HW);
    if (rc == 0) {
        const float one = 1.0f, zero = 0.0f;
        cudnnStatus_t s = cudnnBatchNormalizationForwardTraining(
            c->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, d.x, x, d.x, y, d.c, gamma, beta,
            (double)momentum, running_mean, running_var, (double)eps, save_mean, save_invstd);
        if (s != CUDNN_STATUS_SUCCESS)
            rc = hs_kcuda_cudnn_error(s, "cudnnBatchNormalizationForwardTraining", __FILE__,
                                      __LINE__);
    }
    bn_desc_free(&d);
    return rc;
}

int hs_kcuda_batchnorm_fwd_eval(hs_kernels_t *k, int B, int C, int HW, const float *x,
                                const float *gamma, const float *beta, const float *running_mean,
                                const float *running_var, float eps, float *y)
{
    HS_TRY(bn_check("batchnorm_fwd_eval", B, C, HW, x, y, gamma, eps));
    if (!beta || !running_mean || !running_var)
        return HS_ERR(-EINVAL, "cuda batchnorm_fwd_eval: NULL tensor");
    HS_TRY(hs_kcuda_enter(k));
    hs_kcuda_t *c = hs_kcuda(k);
    bn_desc_t d;
    int rc = bn_desc_make(&d, B, C, HW);
    if (rc == 0) {
        const float one = 1.0f, zero = 0.0f;
        cudnnStatus_t s = cudnnBatchNormalizationForwardInference(
            c->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, d.x, x, d.x, y, d.c, gamma, beta,
            running_mean, running_var, (double)eps);
        if (s != CUDNN_STATUS_SUCCESS)
            rc = hs_kcuda_cudnn_error(s, "cudnnBatchNormalizationForwardInference", __FILE__,
                                      __LINE__);
    }
    bn_desc_free(&d);
    return rc;
}

int hs_kcuda_batchnorm_bwd(hs_kernels_t *k, int B, int C, int HW, const float *x, const float *dy,
                           const float *gamma, const float *save_mean, const float *save_invstd,
                           float eps, float *dx, float *dgamma, float *dbeta)
{
    HS_TRY(bn_check("batchnorm_bwd", B, C, HW, x, dy, gamma, eps));
    if (!save_mean || !save_invstd || !dx || !dgamma || !dbeta)
        return HS_ERR(-EINVAL, "cuda batchnorm_bwd: NULL tensor");
    HS_TRY(hs_kcuda_enter(k));
    hs_kcuda_t *c = hs_kcuda(k);
    bn_desc_t d;
    int rc = bn_desc_make(&d, B, C, HW);
    if (rc == 0) {
        const float one = 1.0f, zero = 0.0f;
        cudnnStatus_t s = cudnnBatchNormalizationBackward(
            c->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, d.x, x, d.x, dy, d.x, dx,
            d.c, gamma, dgamma, dbeta, (double)eps, save_mean, save_invstd);
        if (s != CUDNN_STATUS_SUCCESS)
            rc = hs_kcuda_cudnn_error(s, "cudnnBatchNormalizationBackward", __FILE__, __LINE__);
    }
    bn_desc_free(&d);
    return rc;
}
