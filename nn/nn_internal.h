/*
 * nn/nn_internal.h — the layer list shared by the spec parser (nn/spec.c), the layer kernels
 * (nn/layers.c) and the model (nn/model.c). Not installed.
 *
 * Shapes are per sample: a layer maps (in_c, in_h, in_w) to (out_c, out_h, out_w); flat
 * tensors have h = w = 1. Offsets are in floats into the model's flat parameter/gradient
 * buffers.
 */
#ifndef HEARSAY_NN_INTERNAL_H
#define HEARSAY_NN_INTERNAL_H

#include "hearsay/nn.h"

typedef enum hs_layer_type {
    HS_LAYER_FC,
    HS_LAYER_CONV,
    HS_LAYER_MAXPOOL,
    HS_LAYER_RELU,
    HS_LAYER_TANH,
    HS_LAYER_FLATTEN,
    HS_LAYER_GAP,
    HS_LAYER_BLOCK,
    HS_LAYER_BN,       /* batch normalisation of the channels (or features) of its input */
    HS_LAYER_RESBLOCK, /* basic block with batch norm (He et al. 2016, CIFAR option A) */
} hs_layer_type_t;

/* How a forward pass treats batch normalisation. */
enum {
    HS_FWD_EVAL = 0,  /* running statistics */
    HS_FWD_TRAIN = 1, /* batch statistics, running statistics updated */
    HS_FWD_BATCH = 2, /* batch statistics, running statistics left alone (gradient checks) */
};
#define HS_BN_MOMENTUM 0.1f /* PyTorch's defaults */
#define HS_BN_EPS      1e-5f

enum { HS_INIT_XAVIER = 0, HS_INIT_HE = 1, HS_INIT_ZERO = 2 };

/* Offsets of a Fixup block's scalars, after its conv weights. */
enum { HS_FIX_B1A = 0, HS_FIX_B1B, HS_FIX_B2A, HS_FIX_B2B, HS_FIX_SCALE, HS_FIX_NSCALARS };

typedef struct hs_layer {
    hs_layer_type_t type;
    char name[24]; /* "fc1", "conv2", "block5", ... */
    int in_c, in_h, in_w, in_n;
    int out_c, out_h, out_w, out_n;

    /* hyper-parameters */
    int ksize, stride, pad; /* conv (ksize = R = S), maxpool (window), block (stride) */
    int has_bias;           /* fc, conv */
    int has_proj;           /* block: 1x1 projection shortcut */
    int init;               /* HS_INIT_* for fc / conv weights */

    /* parameter views */
    size_t p_off, p_len; /* the layer's whole range */
    size_t w_off, b_off; /* fc / conv weight and bias; block: conv1 weight */
    size_t w2_off;       /* block: conv2 weight */
    size_t wp_off;       /* block: projection weight */
    size_t s_off;        /* block: HS_FIX_NSCALARS scalars */
    size_t bn1_off;      /* bn: gamma (C) then beta (C); resblock: bn1's, after conv1 */
    size_t bn2_off;      /* resblock: bn2's gamma and beta, after conv2 */
    size_t st_off;       /* bn: running mean (C), running var (C) in the model's state buffer;
                          * resblock: bn1's mean and var, then bn2's (K each) */
    int bn_c, bn_hw;     /* bn: channels and positions per channel (flat input: in_n, 1) */

    /* runtime (device buffers for max_batch rows; NULL when the layer aliases its input) */
    int alias;         /* output and its gradient are the input's (flatten, in-place activation) */
    float *y, *dy;     /* (B, out_n) output and d loss / d output */
    int32_t *amax;     /* maxpool: (B, out_n) argmax */
    float *xb;         /* block: (B, in_n) x + b1a */
    float *h1;         /* block: (B, out_n) relu(conv1(xb) + b1b) */
    float *hb;         /* block: (B, out_n) h1 + b2a */
    float *h2;         /* block: (B, out_n) conv2(hb); reused as d br / d h2 in backward */
    float *dmid;       /* block: (B, out_n) gradient through the branch */
    float *dtmp;       /* block with projection: (B, in_n) projection input gradient */
    float *sm, *si;    /* bn, resblock bn1: (C) saved batch mean and 1 / sqrt(var + eps) */
    float *sm2, *si2;  /* resblock bn2: (K) */
    float *c1, *a1;    /* resblock: (B, out_n) conv1 output, relu(bn1(c1)) */
    float *c2;         /* resblock: (B, out_n) conv2 output; reused for d a1 in backward */
    float *pw;         /* resblock with a shortcut: (K, C) constant 1x1 selection weights
                        * (option A: stride-2 subsampling, channels zero-padded) */
    const float *x_rt; /* input of the current step */
    float *y_rt;       /* output of the current step */
    float *dy_rt;      /* d loss / d output of the current step (may be NULL before layer 0) */
} hs_layer_t;

/* Parse `spec` for data (in_c, in_h, in_w) with `classes` classes into a freshly allocated
 * layer list with shapes, init kinds and parameter offsets filled in. */
int hs_nn_plan(const char *spec, int in_c, int in_h, int in_w, int classes, hs_layer_t **layers,
               int *n_layers, size_t *n_params, size_t *n_state);

/* The parameter views of a planned layer list (allocated; *n_views set). */
int hs_nn_views(const hs_layer_t *layers, int n_layers, hs_param_view_t **views, int *n_views);

/* Fill host buffer p (n_params floats) with the initial parameters for `seed` under `scheme`,
 * and st (n_state floats; may be NULL) with the initial running statistics (means 0, vars 1). */
void hs_nn_init_host(const hs_layer_t *layers, int n_layers, uint64_t seed, hs_init_scheme_t scheme,
                     float *p, float *st);

/* Workspace bytes the layer's conv calls need at batch B (0 for other layers). */
size_t hs_nn_layer_workspace(hs_kernels_t *k, const hs_layer_t *L, int B);

/* Forward of one layer at batch B: reads L->x_rt, writes L->y_rt; `mode` (HS_FWD_*) and the
 * model's running statistics `state` (device) for batch-norm layers. */
int hs_nn_layer_fwd(hs_kernels_t *k, hs_layer_t *L, int B, const float *params, float *state,
                    int mode, void *ws, size_t ws_bytes);
/* Backward of one layer at batch B: reads L->dy_rt, overwrites the layer's gradient range in
 * `grads` and writes dx (B, in_n) (NULL: not needed; blocks need a buffer there). */
int hs_nn_layer_bwd(hs_kernels_t *k, hs_layer_t *L, int B, const float *params, float *grads,
                    float *dx, void *ws, size_t ws_bytes);

#endif
