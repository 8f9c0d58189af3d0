/*
 * nn/layers.c — forward and backward of each layer type, through the kernel ops table.
 *
 * Conventions: x (B, in_n) is L->x_rt, y (B, out_n) is L->y_rt, dy (B, out_n) is L->dy_rt;
 * backward overwrites the layer's whole gradient range and writes dx (B, in_n) unless dx is
 * NULL. fc weights are (OUT, IN) as in PyTorch: y = x W^T + b.
 */
#include "nn/nn_internal.h"

#include "hearsay/common.h"

#include <string.h>

static hs_conv2d_desc_t conv_desc(int B, int C, int H, int W, int K, int R, int pad, int stride)
{
    hs_conv2d_desc_t d = {.B = B, .C = C, .H = H, .W = W, .K = K, .R = R, .S = R};
    d.pad = pad;
    d.stride = stride;
    d.P = (H + 2 * pad - R) / stride + 1;
    d.Q = (W + 2 * pad - R) / stride + 1;
    return d;
}

static hs_conv2d_desc_t layer_conv(const hs_layer_t *L, int B)
{
    return conv_desc(B, L->in_c, L->in_h, L->in_w, L->out_c, L->ksize, L->pad, L->stride);
}

/* Block convs: 1 = first branch conv, 2 = second, 3 = projection. */
static hs_conv2d_desc_t block_conv(const hs_layer_t *L, int B, int which)
{
    if (which == 1) return conv_desc(B, L->in_c, L->in_h, L->in_w, L->out_c, 3, 1, L->stride);
    if (which == 2) return conv_desc(B, L->out_c, L->out_h, L->out_w, L->out_c, 3, 1, 1);
    return conv_desc(B, L->in_c, L->in_h, L->in_w, L->out_c, 1, 0, L->stride);
}

static hs_pool2d_desc_t pool_desc(const hs_layer_t *L, int B)
{
    hs_pool2d_desc_t d = {.B = B, .C = L->in_c, .H = L->in_h, .W = L->in_w};
    d.size = L->ksize;
    d.stride = L->stride;
    d.P = L->out_h;
    d.Q = L->out_w;
    return d;
}

size_t hs_nn_layer_workspace(hs_kernels_t *k, const hs_layer_t *L, int B)
{
    if (L->type == HS_LAYER_CONV) {
        hs_conv2d_desc_t d = layer_conv(L, B);
        return k->ops->conv2d_workspace(k, &d);
    }
    if (L->type == HS_LAYER_BLOCK || L->type == HS_LAYER_RESBLOCK) {
        size_t ws = 0;
        for (int which = 1; which <= (L->has_proj ? 3 : 2); which++) {
            hs_conv2d_desc_t d = block_conv(L, B, which);
            ws = HS_MAX(ws, k->ops->conv2d_workspace(k, &d));
        }
        return ws;
    }
    return 0;
}

/* y = x * s for a device scalar s (n values): a (n, 1) x (1, 1) gemm keeps s on the device. */
static int scalar_mul(hs_kernels_t *k, int n, const float *x, const float *s, float beta, float *y)
{
    return k->ops->gemm(k, 0, 0, n, 1, 1, 1.0f, x, 1, s, 1, beta, y, 1);
}

/* Fixup basic block forward (see nn.h). */
static int block_fwd(hs_kernels_t *k, hs_layer_t *L, int B, const float *p, void *ws,
                     size_t ws_bytes)
{
    const hs_kernel_ops_t *o = k->ops;
    const float *s = p + L->s_off;
    int rin = B * L->in_n, rout = B * L->out_n;
    hs_conv2d_desc_t d1 = block_conv(L, B, 1), d2 = block_conv(L, B, 2);
    /* (B, C, H, W) xb = x + b1a */
    HS_TRY(o->copy(k, L->xb, L->x_rt, (size_t)rin * sizeof(float)));
    HS_TRY(o->add_bias(k, rin, 1, s + HS_FIX_B1A, L->xb));
    /* (B, K, P, Q) h1 = relu(conv1(xb) + b1b); hb = h1 + b2a */
    HS_TRY(o->conv2d_fwd(k, &d1, L->xb, p + L->w_off, NULL, L->h1, ws, ws_bytes));
    HS_TRY(o->add_bias(k, rout, 1, s + HS_FIX_B1B, L->h1));
    HS_TRY(o->relu_fwd(k, (size_t)rout, L->h1, L->h1));
    HS_TRY(o->copy(k, L->hb, L->h1, (size_t)rout * sizeof(float)));
    HS_TRY(o->add_bias(k, rout, 1, s + HS_FIX_B2A, L->hb));
    /* (B, K, P, Q) h2 = conv2(hb) */
    HS_TRY(o->conv2d_fwd(k, &d2, L->hb, p + L->w2_off, NULL, L->h2, ws, ws_bytes));
    /* y = relu(shortcut + scale * h2 + b2b) */
    if (L->has_proj) {
        hs_conv2d_desc_t dp = block_conv(L, B, 3);
        HS_TRY(o->conv2d_fwd(k, &dp, L->xb, p + L->wp_off, NULL, L->y_rt, ws, ws_bytes));
    } else {
        HS_TRY(o->copy(k, L->y_rt, L->x_rt, (size_t)rout * sizeof(float)));
    }
    HS_TRY(scalar_mul(k, rout, L->h2, s + HS_FIX_SCALE, 1.0f, L->y_rt));
    HS_TRY(o->add_bias(k, rout, 1, s + HS_FIX_B2B, L->y_rt));
    return o->relu_fwd(k, (size_t)rout, L->y_rt, L->y_rt);
}

static int block_bwd(hs_kernels_t *k, hs_layer_t *L, int B, const float *p, float *g, float *dx,
                     void *ws, size_t ws_bytes)
{
    const hs_kernel_ops_t *o = k->ops;
    const float *s = p + L->s_off;
    float *gs = g + L->s_off;
    int rin = B * L->in_n, rout = B * L->out_n;
    hs_conv2d_desc_t d1 = block_conv(L, B, 1), d2 = block_conv(L, B, 2);
    float *dy = L->dy_rt;
    HS_TRY(o->zero(k, g + L->p_off, L->p_len * sizeof(float)));
    /* dy := d loss / d(pre-relu sum), in place */
    HS_TRY(o->relu_bwd(k, (size_t)rout, L->y_rt, dy, dy));
    HS_TRY(o->bias_grad(k, rout, 1, dy, gs + HS_FIX_B2B, 0));
    /* d scale = <h2, dy>; then h2 := d h2 = scale * dy */
    HS_TRY(o->gemm(k, 1, 0, 1, 1, rout, 1.0f, L->h2, 1, dy, 1, 0.0f, gs + HS_FIX_SCALE, 1));
    HS_TRY(scalar_mul(k, rout, dy, s + HS_FIX_SCALE, 0.0f, L->h2));
    /* through conv2: dmid = d hb, and d b2a */
    HS_TRY(o->conv2d_bwd(k, &d2, L->hb, p + L->w2_off, L->h2, L->dmid, g + L->w2_off, NULL, ws,
                         ws_bytes));
    HS_TRY(o->bias_grad(k, rout, 1, L->dmid, gs + HS_FIX_B2A, 0));
    /* through relu: dmid = d (conv1 out + b1b), and d b1b */
    HS_TRY(o->relu_bwd(k, (size_t)rout, L->h1, L->dmid, L->dmid));
    HS_TRY(o->bias_grad(k, rout, 1, L->dmid, gs + HS_FIX_B1B, 0));
    /* through conv1 into dx (never NULL for a block: b1a's gradient needs it; model.c passes
     * scratch when the caller wants no input gradient) */
    HS_TRY(
        o->conv2d_bwd(k, &d1, L->xb, p + L->w_off, L->dmid, dx, g + L->w_off, NULL, ws, ws_bytes));
    if (L->has_proj) {
        /* the projection also reads xb: dx += proj^T dy, then d b1a = sum dx */
        hs_conv2d_desc_t dp = block_conv(L, B, 3);
        HS_TRY(o->conv2d_bwd(k, &dp, L->xb, p + L->wp_off, dy, L->dtmp, g + L->wp_off, NULL, ws,
                             ws_bytes));
        HS_TRY(o->axpy(k, (size_t)rin, 1.0f, L->dtmp, dx));
        return o->bias_grad(k, rin, 1, dx, gs + HS_FIX_B1A, 0);
    }
    /* identity shortcut: b1a only feeds the branch; then dx += dy */
    HS_TRY(o->bias_grad(k, rin, 1, dx, gs + HS_FIX_B1A, 0));
    return o->axpy(k, (size_t)rin, 1.0f, dy, dx);
}

/* Batch norm of x (B, C, HW) into y with gamma/beta at p + off, running statistics at st (mean
 * C, then var C; NULL with HS_FWD_BATCH), saved statistics sm, si (C). */
static int bn_fwd(hs_kernels_t *k, int mode, int B, int C, int HW, const float *x, const float *p,
                  size_t off, float *st, float *sm, float *si, float *y)
{
    const float *g = p + off, *b = p + off + C;
    if (mode == HS_FWD_EVAL)
        return k->ops->batchnorm_fwd_eval(k, B, C, HW, x, g, b, st, st + C, HS_BN_EPS, y);
    float *rm = mode == HS_FWD_TRAIN ? st : NULL, *rv = mode == HS_FWD_TRAIN ? st + C : NULL;
    return k->ops->batchnorm_fwd_train(k, B, C, HW, x, g, b, y, sm, si, rm, rv, HS_BN_MOMENTUM,
                                       HS_BN_EPS);
}

/* Basic block with batch norm forward (nn/spec.c, add_resblock). */
static int resblock_fwd(hs_kernels_t *k, hs_layer_t *L, int B, const float *p, float *st, int mode,
                        void *ws, size_t ws_bytes)
{
    const hs_kernel_ops_t *o = k->ops;
    const int K = L->out_c, PQ = L->out_h * L->out_w;
    const size_t rout = (size_t)B * L->out_n;
    hs_conv2d_desc_t d1 = block_conv(L, B, 1), d2 = block_conv(L, B, 2);
    float *st1 = st ? st + L->st_off : NULL, *st2 = st ? st + L->st_off + 2 * (size_t)K : NULL;
    /* (B, K, P, Q) c1 = conv1(x); a1 = relu(bn1(c1)) */
    HS_TRY(o->conv2d_fwd(k, &d1, L->x_rt, p + L->w_off, NULL, L->c1, ws, ws_bytes));
    HS_TRY(bn_fwd(k, mode, B, K, PQ, L->c1, p, L->bn1_off, st1, L->sm, L->si, L->a1));
    HS_TRY(o->relu_fwd(k, rout, L->a1, L->a1));
    /* c2 = conv2(a1); y = relu(bn2(c2) + shortcut(x)) */
    HS_TRY(o->conv2d_fwd(k, &d2, L->a1, p + L->w2_off, NULL, L->c2, ws, ws_bytes));
    HS_TRY(bn_fwd(k, mode, B, K, PQ, L->c2, p, L->bn2_off, st2, L->sm2, L->si2, L->y_rt));
    if (L->has_proj) {
        /* option A: a 1x1 stride-S conv with constant 0/1 weights picks x[:, :, ::S, ::S]
         * into the middle channels; dtmp holds it */
        hs_conv2d_desc_t dp = block_conv(L, B, 3);
        HS_TRY(o->conv2d_fwd(k, &dp, L->x_rt, L->pw, NULL, L->dtmp, ws, ws_bytes));
        HS_TRY(o->axpy(k, rout, 1.0f, L->dtmp, L->y_rt));
    } else {
        HS_TRY(o->axpy(k, rout, 1.0f, L->x_rt, L->y_rt));
    }
    return o->relu_fwd(k, rout, L->y_rt, L->y_rt);
}

static int resblock_bwd(hs_kernels_t *k, hs_layer_t *L, int B, const float *p, float *g, float *dx,
                        void *ws, size_t ws_bytes)
{
    const hs_kernel_ops_t *o = k->ops;
    const int K = L->out_c, PQ = L->out_h * L->out_w;
    const size_t rout = (size_t)B * L->out_n;
    hs_conv2d_desc_t d1 = block_conv(L, B, 1), d2 = block_conv(L, B, 2);
    float *dz = L->dy_rt;
    HS_TRY(o->zero(k, g + L->p_off, L->p_len * sizeof(float)));
    /* dz = d loss / d(bn2 out + shortcut), in place */
    HS_TRY(o->relu_bwd(k, rout, L->y_rt, dz, dz));
    /* through bn2 into dmid = d c2 */
    HS_TRY(o->batchnorm_bwd(k, B, K, PQ, L->c2, dz, p + L->bn2_off, L->sm2, L->si2, HS_BN_EPS,
                            L->dmid, g + L->bn2_off, g + L->bn2_off + K));
    /* through conv2 into c2 := d a1 (c2 is no longer needed), then relu and bn1 into dmid */
    HS_TRY(o->conv2d_bwd(k, &d2, L->a1, p + L->w2_off, L->dmid, L->c2, g + L->w2_off, NULL, ws,
                         ws_bytes));
    HS_TRY(o->relu_bwd(k, rout, L->a1, L->c2, L->c2));
    HS_TRY(o->batchnorm_bwd(k, B, K, PQ, L->c1, L->c2, p + L->bn1_off, L->sm, L->si, HS_BN_EPS,
                            L->dmid, g + L->bn1_off, g + L->bn1_off + K));
    /* through conv1 into dx, then the shortcut's share */
    HS_TRY(o->conv2d_bwd(k, &d1, L->x_rt, p + L->w_off, L->dmid, dx, g + L->w_off, NULL, ws,
                         ws_bytes));
    if (!dx) return 0;
    if (L->has_proj) {
        hs_conv2d_desc_t dp = block_conv(L, B, 3);
        const size_t rin = (size_t)B * L->in_n;
        /* the selection weights are constant: dx only (dw NULL skips its im2col and gemm) */
        HS_TRY(o->conv2d_bwd(k, &dp, L->x_rt, L->pw, dz, L->dtmp, NULL, NULL, ws, ws_bytes));
        return o->axpy(k, rin, 1.0f, L->dtmp, dx);
    }
    return o->axpy(k, rout, 1.0f, dz, dx);
}

int hs_nn_layer_fwd(hs_kernels_t *k, hs_layer_t *L, int B, const float *p, float *st, int mode,
                    void *ws, size_t ws_bytes)
{
    const hs_kernel_ops_t *o = k->ops;
    size_t n = (size_t)B * L->out_n;
    switch (L->type) {
    case HS_LAYER_FC:
        /* (B, OUT) y = x (B, IN) W^T (IN, OUT) + b */
        HS_TRY(o->gemm(k, 0, 1, B, L->out_n, L->in_n, 1.0f, L->x_rt, L->in_n, p + L->w_off, L->in_n,
                       0.0f, L->y_rt, L->out_n));
        return o->add_bias(k, B, L->out_n, p + L->b_off, L->y_rt);
    case HS_LAYER_CONV: {
        hs_conv2d_desc_t d = layer_conv(L, B);
        return o->conv2d_fwd(k, &d, L->x_rt, p + L->w_off, L->has_bias ? p + L->b_off : NULL,
                             L->y_rt, ws, ws_bytes);
    }
    case HS_LAYER_MAXPOOL: {
        hs_pool2d_desc_t d = pool_desc(L, B);
        return o->maxpool_fwd(k, &d, L->x_rt, L->y_rt, L->amax);
    }
    case HS_LAYER_RELU:
        return o->relu_fwd(k, n, L->x_rt, L->y_rt);
    case HS_LAYER_TANH:
        return o->tanh_fwd(k, n, L->x_rt, L->y_rt);
    case HS_LAYER_FLATTEN:
        return 0; /* y aliases x */
    case HS_LAYER_GAP:
        return o->avgpool_global_fwd(k, B, L->in_c, L->in_h * L->in_w, L->x_rt, L->y_rt);
    case HS_LAYER_BLOCK:
        return block_fwd(k, L, B, p, ws, ws_bytes);
    case HS_LAYER_BN:
        return bn_fwd(k, mode, B, L->bn_c, L->bn_hw, L->x_rt, p, L->bn1_off,
                      st ? st + L->st_off : NULL, L->sm, L->si, L->y_rt);
    case HS_LAYER_RESBLOCK:
        return resblock_fwd(k, L, B, p, st, mode, ws, ws_bytes);
    }
    return HS_ERR(-EINVAL, "layer %s: unknown type %d", L->name, (int)L->type);
}

int hs_nn_layer_bwd(hs_kernels_t *k, hs_layer_t *L, int B, const float *p, float *g, float *dx,
                    void *ws, size_t ws_bytes)
{
    const hs_kernel_ops_t *o = k->ops;
    size_t n = (size_t)B * L->out_n;
    switch (L->type) {
    case HS_LAYER_FC:
        /* (OUT, IN) dW = dy^T (OUT, B) x (B, IN); db = column sums of dy */
        HS_TRY(o->gemm(k, 1, 0, L->out_n, L->in_n, B, 1.0f, L->dy_rt, L->out_n, L->x_rt, L->in_n,
                       0.0f, g + L->w_off, L->in_n));
        HS_TRY(o->bias_grad(k, B, L->out_n, L->dy_rt, g + L->b_off, 0));
        /* (B, IN) dx = dy (B, OUT) W (OUT, IN) */
        if (dx)
            HS_TRY(o->gemm(k, 0, 0, B, L->in_n, L->out_n, 1.0f, L->dy_rt, L->out_n, p + L->w_off,
                           L->in_n, 0.0f, dx, L->in_n));
        return 0;
    case HS_LAYER_CONV: {
        hs_conv2d_desc_t d = layer_conv(L, B);
        HS_TRY(o->zero(k, g + L->p_off, L->p_len * sizeof(float)));
        return o->conv2d_bwd(k, &d, L->x_rt, p + L->w_off, L->dy_rt, dx, g + L->w_off,
                             L->has_bias ? g + L->b_off : NULL, ws, ws_bytes);
    }
    case HS_LAYER_MAXPOOL: {
        if (!dx) return 0;
        hs_pool2d_desc_t d = pool_desc(L, B);
        return o->maxpool_bwd(k, &d, L->x_rt, L->y_rt, L->amax, L->dy_rt, dx);
    }
    case HS_LAYER_RELU:
        return dx ? o->relu_bwd(k, n, L->y_rt, L->dy_rt, dx) : 0;
    case HS_LAYER_TANH:
        return dx ? o->tanh_bwd(k, n, L->y_rt, L->dy_rt, dx) : 0;
    case HS_LAYER_FLATTEN:
        return 0; /* dy aliases dx */
    case HS_LAYER_GAP:
        return dx ? o->avgpool_global_bwd(k, B, L->in_c, L->in_h * L->in_w, L->dy_rt, dx) : 0;
    case HS_LAYER_BLOCK:
        return block_bwd(k, L, B, p, g, dx, ws, ws_bytes);
    case HS_LAYER_BN: {
        /* dx is needed as scratch when the caller wants none (bn never comes first) */
        const int C = L->bn_c;
        if (!dx) return HS_ERR(-EINVAL, "layer %s: batch norm backward needs dx", L->name);
        return o->batchnorm_bwd(k, B, C, L->bn_hw, L->x_rt, L->dy_rt, p + L->bn1_off, L->sm, L->si,
                                HS_BN_EPS, dx, g + L->bn1_off, g + L->bn1_off + C);
    }
    case HS_LAYER_RESBLOCK:
        return resblock_bwd(k, L, B, p, g, dx, ws, ws_bytes);
    }
    return HS_ERR(-EINVAL, "layer %s: unknown type %d", L->name, (int)L->type);
}
