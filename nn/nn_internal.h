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
} hs_layer_type_t;

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
    const float *x_rt; /* input of the current step */
    float *y_rt;       /* output of the current step */
    float *dy_rt;      /* d loss / d output of the current step (may be NULL before layer 0) */
} hs_layer_t;

/* Parse `spec` for data (in_c, in_h, in_w) with `classes` classes into a freshly allocated
 * layer list with shapes, init kinds and parameter offsets filled in. */
int hs_nn_plan(const char *spec, int in_c, int in_h, int in_w, int classes, hs_layer_t **layers,
               int *n_layers, size_t *n_params);

/* The parameter views of a planned layer list (allocated; *n_views set). */
int hs_nn_views(const hs_layer_t *layers, int n_layers, hs_param_view_t **views, int *n_views);

/* Fill host buffer p (n_params floats) with the initial parameters for `seed` under `scheme`. */
void hs_nn_init_host(const hs_layer_t *layers, int n_layers, uint64_t seed,
                     hs_init_scheme_t scheme, float *p);

/* Workspace bytes the layer's conv calls need at batch B (0 for other layers). */
size_t hs_nn_layer_workspace(hs_kernels_t *k, const hs_layer_t *L, int B);

/* Forward of one layer at batch B: reads L->x_rt, writes L->y_rt. */
int hs_nn_layer_fwd(hs_kernels_t *k, hs_layer_t *L, int B, const float *params, void *ws,
                    size_t ws_bytes);
/* Backward of one layer at batch B: reads L->dy_rt, overwrites the layer's gradient range in
 * `grads` and writes dx (B, in_n) (NULL: not needed; blocks need a buffer there). */
int hs_nn_layer_bwd(hs_kernels_t *k, hs_layer_t *L, int B, const float *params, float *grads,
                    float *dx, void *ws, size_t ws_bytes);

#endif
