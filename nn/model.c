/*
 * nn/model.c — a model: its planned layers, the flat parameter and gradient buffers, the
 * preallocated activations, and the train / evaluate steps.
 */
#include "nn/nn_internal.h"

#include "hearsay/common.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct hs_model {
    hs_kernels_t *k;
    char *spec;
    int in_c, in_h, in_w, in_n, classes, max_batch;
    hs_layer_t *layers;
    int n_layers;
    size_t n_params;
    float *params; /* (n_params) device */
    float *grads;  /* (n_params) device: grads_own, or the caller's (hs_model_use_grads) */
    float *grads_own;
    size_t n_state;
    float *state;         /* (n_state) device: running statistics of the batch-norm layers */
    int eval_batch_stats; /* evaluate / forward with batch statistics (gradient checks) */
    void *ws;             /* conv workspace shared by all layers */
    size_t ws_bytes;
    float *dx_scratch; /* (max_batch, in_n of the first real layer) when that layer is a block */
    hs_param_view_t *views;
    int n_views;
    hs_init_scheme_t init;      /* the scheme hs_model_init_params uses */
    hs_grad_ready_fn grad_hook; /* hs_model_set_grad_hook (NULL: none) */
    void *grad_hook_ctx;
    float loss_scale; /* hs_model_set_loss_scale (1: none) */
};

int hs_model_parse_spec(const char *spec, int in_c, int in_h, int in_w, int classes,
                        size_t *num_params)
{
    hs_layer_t *layers = NULL;
    int n = 0;
    size_t np = 0;
    HS_TRY(hs_nn_plan(spec, in_c, in_h, in_w, classes, &layers, &n, &np, NULL));
    free(layers);
    if (num_params) *num_params = np;
    return 0;
}

static int dev_alloc(hs_model_t *m, size_t count, size_t elem, void **out, const char *what)
{
    int rc = m->k->ops->alloc(m->k, count * elem, out);
    if (rc < 0)
        hs_error_prefix("model '%s': allocating %s (%zu bytes)", m->spec, what, count * elem);
    return rc;
}

#define DEV_ALLOC(m, count, elem, ptr, what)                                                       \
    dev_alloc((m), (count), (elem), (void **)&(ptr), (what))

/* Activations and scratch of layer i for max_batch rows. */
static int alloc_layer(hs_model_t *m, int i)
{
    hs_layer_t *L = &m->layers[i];
    size_t in = (size_t)m->max_batch * L->in_n, out = (size_t)m->max_batch * L->out_n;
    int prev_linear =
        i > 0 && (m->layers[i - 1].type == HS_LAYER_FC || m->layers[i - 1].type == HS_LAYER_CONV ||
                  m->layers[i - 1].type == HS_LAYER_BN);
    /* fc, conv and bn backward read only their input, so an activation after them can
     * overwrite their output (and its gradient) in place. */
    L->alias = L->type == HS_LAYER_FLATTEN ||
               ((L->type == HS_LAYER_RELU || L->type == HS_LAYER_TANH) && prev_linear);
    if (L->alias) return 0;
    HS_TRY(DEV_ALLOC(m, out, sizeof(float), L->y, "activations"));
    HS_TRY(DEV_ALLOC(m, out, sizeof(float), L->dy, "activation gradients"));
    if (L->type == HS_LAYER_MAXPOOL) HS_TRY(DEV_ALLOC(m, out, sizeof(int32_t), L->amax, "argmax"));
    if (L->type == HS_LAYER_BN || L->type == HS_LAYER_RESBLOCK) {
        size_t C = L->type == HS_LAYER_BN ? (size_t)L->bn_c : (size_t)L->out_c;
        HS_TRY(DEV_ALLOC(m, C, sizeof(float), L->sm, "batch statistics"));
        HS_TRY(DEV_ALLOC(m, C, sizeof(float), L->si, "batch statistics"));
    }
    if (L->type == HS_LAYER_RESBLOCK) {
        size_t K = (size_t)L->out_c, C = (size_t)L->in_c;
        HS_TRY(DEV_ALLOC(m, K, sizeof(float), L->sm2, "batch statistics"));
        HS_TRY(DEV_ALLOC(m, K, sizeof(float), L->si2, "batch statistics"));
        HS_TRY(DEV_ALLOC(m, out, sizeof(float), L->c1, "block activations"));
        HS_TRY(DEV_ALLOC(m, out, sizeof(float), L->a1, "block activations"));
        HS_TRY(DEV_ALLOC(m, out, sizeof(float), L->c2, "block activations"));
        HS_TRY(DEV_ALLOC(m, out, sizeof(float), L->dmid, "block gradients"));
        if (L->has_proj) {
            /* option A shortcut: weight (K, C) = 1 where k = c + (K - C) / 2 */
            HS_TRY(DEV_ALLOC(
                m, (size_t)m->max_batch * L->in_n > out ? (size_t)m->max_batch * L->in_n : out,
                sizeof(float), L->dtmp, "block shortcut"));
            HS_TRY(DEV_ALLOC(m, K * C, sizeof(float), L->pw, "block shortcut weights"));
            float *w = hs_calloc(K * C, sizeof(float), "block shortcut weights");
            if (!w) return -ENOMEM;
            for (size_t c = 0; c < C; c++) w[(c + (K - C) / 2) * C + c] = 1.0f;
            int rc = m->k->ops->to_device(m->k, L->pw, w, K * C * sizeof(float));
            free(w);
            HS_TRY(rc);
        }
    }
    if (L->type == HS_LAYER_BLOCK) {
        HS_TRY(DEV_ALLOC(m, in, sizeof(float), L->xb, "block input"));
        HS_TRY(DEV_ALLOC(m, out, sizeof(float), L->h1, "block activations"));
        HS_TRY(DEV_ALLOC(m, out, sizeof(float), L->hb, "block activations"));
        HS_TRY(DEV_ALLOC(m, out, sizeof(float), L->h2, "block activations"));
        HS_TRY(DEV_ALLOC(m, out, sizeof(float), L->dmid, "block gradients"));
        if (L->has_proj) HS_TRY(DEV_ALLOC(m, in, sizeof(float), L->dtmp, "block gradients"));
    }
    return 0;
}

static void free_layer(hs_kernels_t *k, hs_layer_t *L)
{
    float *bufs[] = {L->y,  L->dy, L->xb,  L->h1,  L->hb, L->h2, L->dmid, L->dtmp,
                     L->sm, L->si, L->sm2, L->si2, L->c1, L->a1, L->c2,   L->pw};
    for (size_t i = 0; i < HS_ARRAY_LEN(bufs); i++) k->ops->free(k, bufs[i]);
    k->ops->free(k, L->amax);
}

void hs_model_free(hs_model_t **mp)
{
    if (!mp || !*mp) return;
    hs_model_t *m = *mp;
    hs_kernels_t *k = m->k;
    for (int i = 0; i < m->n_layers && m->layers; i++) free_layer(k, &m->layers[i]);
    k->ops->free(k, m->params);
    k->ops->free(k, m->grads_own ? m->grads_own : m->grads);
    k->ops->free(k, m->state);
    k->ops->free(k, m->ws);
    k->ops->free(k, m->dx_scratch);
    free(m->layers);
    free(m->views);
    free(m->spec);
    free(m);
    *mp = NULL;
}

int hs_model_create(hs_model_t **out, hs_kernels_t *k, const char *spec, int in_c, int in_h,
                    int in_w, int classes, int max_batch, uint64_t seed)
{
    *out = NULL;
    if (!k || !k->ops) return HS_ERR(-EINVAL, "model '%s': no kernel backend", spec ? spec : "");
    hs_model_t *m = hs_calloc(1, sizeof(*m), "model");
    if (!m) return -ENOMEM;
    m->loss_scale = 1.0f;
    m->k = k;
    int rc = hs_nn_plan(spec, in_c, in_h, in_w, classes, &m->layers, &m->n_layers, &m->n_params,
                        &m->n_state);
    if (rc < 0) goto fail;
    m->spec = strdup(spec);
    if (!m->spec) {
        rc = HS_ERR(-ENOMEM, "out of memory copying spec '%s'", spec);
        goto fail;
    }
    m->in_c = in_c;
    m->in_h = in_h;
    m->in_w = in_w;
    m->in_n = in_c * in_h * in_w;
    m->classes = classes;
    m->max_batch = max_batch;
    int widest = m->in_n;
    for (int i = 0; i < m->n_layers; i++) widest = HS_MAX(widest, m->layers[i].out_n);
    if (max_batch < 1 || (long long)max_batch * widest > INT_MAX) {
        rc = HS_ERR(-EINVAL, "model '%s': max batch %d outside 1..%d (widest layer %d values)",
                    spec, max_batch, INT_MAX / widest, widest);
        goto fail;
    }
    if ((rc = DEV_ALLOC(m, m->n_params, sizeof(float), m->params, "parameters")) < 0) goto fail;
    if ((rc = DEV_ALLOC(m, m->n_params, sizeof(float), m->grads, "gradients")) < 0) goto fail;
    if ((rc = k->ops->zero(k, m->grads, m->n_params * sizeof(float))) < 0) goto fail;
    if (m->n_state &&
        (rc = DEV_ALLOC(m, m->n_state, sizeof(float), m->state, "running statistics")) < 0)
        goto fail;
    for (int i = 0; i < m->n_layers; i++) {
        if ((rc = alloc_layer(m, i)) < 0) goto fail;
        m->ws_bytes = HS_MAX(m->ws_bytes, hs_nn_layer_workspace(k, &m->layers[i], max_batch));
    }
    if ((rc = DEV_ALLOC(m, m->ws_bytes, 1, m->ws, "conv workspace")) < 0) goto fail;
    /* A block always writes its input gradient (its b1a gradient needs it): give the first
     * real layer scratch when it is a block whose input is the model's input. */
    for (int i = 0; i < m->n_layers; i++) {
        if (m->layers[i].type == HS_LAYER_FLATTEN) continue;
        if (m->layers[i].type == HS_LAYER_BLOCK &&
            (rc = DEV_ALLOC(m, (size_t)max_batch * m->in_n, sizeof(float), m->dx_scratch,
                            "input gradient scratch")) < 0)
            goto fail;
        break;
    }
    if ((rc = hs_nn_views(m->layers, m->n_layers, &m->views, &m->n_views)) < 0) goto fail;
    if ((rc = hs_model_init_params(m, seed)) < 0) goto fail;
    *out = m;
    return 0;
fail:
    hs_model_free(&m);
    return rc;
}

size_t hs_model_num_params(const hs_model_t *m)
{
    return m->n_params;
}

float *hs_model_params(hs_model_t *m)
{
    return m->params;
}

float *hs_model_grads(hs_model_t *m)
{
    return m->grads;
}

int hs_model_use_grads(hs_model_t *m, float *g)
{
    if (!m) return HS_ERR(-EINVAL, "hs_model_use_grads: NULL model");
    if (!g) {
        if (!m->grads_own) return 0;
        memcpy(m->grads_own, m->grads, m->n_params * sizeof(float));
        m->grads = m->grads_own;
        m->grads_own = NULL;
        return 0;
    }
    if (m->k->device != HS_DEV_CPU)
        return HS_ERR(-EINVAL, "model '%s': gradients in caller memory need the CPU kernels",
                      m->spec);
    memcpy(g, m->grads, m->n_params * sizeof(float));
    if (!m->grads_own) m->grads_own = m->grads;
    m->grads = g;
    return 0;
}

int hs_model_num_views(const hs_model_t *m)
{
    return m->n_views;
}

const hs_param_view_t *hs_model_view(const hs_model_t *m, int i)
{
    return i >= 0 && i < m->n_views ? &m->views[i] : NULL;
}

const char *hs_model_spec(const hs_model_t *m)
{
    return m->spec;
}

hs_kernels_t *hs_model_kernels(const hs_model_t *m)
{
    return m->k;
}

int hs_model_max_batch(const hs_model_t *m)
{
    return m->max_batch;
}

int hs_model_classes(const hs_model_t *m)
{
    return m->classes;
}

int hs_model_input_size(const hs_model_t *m)
{
    return m->in_n;
}

int hs_model_init_params(hs_model_t *m, uint64_t seed)
{
    if (m->n_params == 0) return 0;
    float *host = hs_malloc((m->n_params + m->n_state) * sizeof(float), "initial parameters");
    if (!host) return -ENOMEM;
    hs_nn_init_host(m->layers, m->n_layers, seed, m->init, host, host + m->n_params);
    int rc = m->k->ops->to_device(m->k, m->params, host, m->n_params * sizeof(float));
    if (rc == 0 && m->n_state)
        rc = m->k->ops->to_device(m->k, m->state, host + m->n_params, m->n_state * sizeof(float));
    free(host);
    return rc;
}

size_t hs_model_num_state(const hs_model_t *m)
{
    return m->n_state;
}

float *hs_model_state(hs_model_t *m)
{
    return m->state;
}

void hs_model_set_eval_batch_stats(hs_model_t *m, int on)
{
    m->eval_batch_stats = on;
}

int hs_model_set_init(hs_model_t *m, hs_init_scheme_t scheme, uint64_t seed)
{
    m->init = scheme;
    return hs_model_init_params(m, seed);
}

hs_init_scheme_t hs_model_init_scheme(const hs_model_t *m)
{
    return m->init;
}

static int check_batch(const hs_model_t *m, const float *x, int B)
{
    if (B < 1 || B > m->max_batch)
        return HS_ERR(-EINVAL, "model '%s': batch of %d rows outside 1..%d (max batch)", m->spec, B,
                      m->max_batch);
    if (!x) return HS_ERR(-EINVAL, "model '%s': no input batch", m->spec);
    return 0;
}

static int forward(hs_model_t *m, const float *x, int B, int mode)
{
    const float *in = x;
    for (int i = 0; i < m->n_layers; i++) {
        hs_layer_t *L = &m->layers[i];
        L->x_rt = in;
        L->y_rt = L->alias ? (float *)in : L->y;
        int rc = hs_nn_layer_fwd(m->k, L, B, m->params, m->state, mode, m->ws, m->ws_bytes);
        if (rc < 0) {
            hs_error_prefix("model '%s', layer %s forward", m->spec, L->name);
            return rc;
        }
        in = L->y_rt;
    }
    return 0;
}

int hs_model_forward(hs_model_t *m, const float *x, int B, const float **logits)
{
    HS_TRY(check_batch(m, x, B));
    HS_TRY(forward(m, x, B, m->eval_batch_stats ? HS_FWD_BATCH : HS_FWD_EVAL));
    *logits = m->layers[m->n_layers - 1].y_rt;
    return 0;
}

int hs_model_loss_grad(hs_model_t *m, const float *x, const int32_t *labels, int B, double *loss,
                       int *correct, float *dx)
{
    HS_TRY(check_batch(m, x, B));
    if (!labels) return HS_ERR(-EINVAL, "model '%s': no labels", m->spec);
    HS_TRY(forward(m, x, B, HS_FWD_TRAIN));
    /* where each layer's output gradient lives this step */
    for (int i = 0; i < m->n_layers; i++) {
        hs_layer_t *L = &m->layers[i];
        L->dy_rt = !L->alias ? L->dy : i == 0 ? dx : m->layers[i - 1].dy_rt;
    }
    hs_layer_t *last = &m->layers[m->n_layers - 1];
    double l = 0;
    int rc = m->k->ops->softmax_xent(m->k, B, m->classes, last->y_rt, labels, NULL, last->dy_rt, &l,
                                     correct);
    if (rc < 0) {
        hs_error_prefix("model '%s': loss", m->spec);
        return rc;
    }
    if (loss) *loss = l;
    const float S = m->loss_scale;
    if (S != 1.0f) /* backward carries S times the loss's gradient; each layer's is unscaled */
        HS_TRY(m->k->ops->scale(m->k, (size_t)B * m->classes, S, last->dy_rt));
    for (int i = m->n_layers - 1; i >= 0; i--) {
        hs_layer_t *L = &m->layers[i];
        float *dxi = i == 0 ? dx : m->layers[i - 1].dy_rt;
        if (!dxi && L->type == HS_LAYER_BLOCK) dxi = m->dx_scratch;
        rc = hs_nn_layer_bwd(m->k, L, B, m->params, m->grads, dxi, m->ws, m->ws_bytes);
        if (rc == 0 && S != 1.0f && L->p_len > 0)
            rc = m->k->ops->scale(m->k, L->p_len, 1.0f / S, m->grads + L->p_off);
        if (rc < 0) {
            hs_error_prefix("model '%s', layer %s backward", m->spec, L->name);
            return rc;
        }
        if (m->grad_hook && L->p_len > 0 &&
            (rc = m->grad_hook(m->grad_hook_ctx, L->p_off, L->p_off + L->p_len)) < 0) {
            hs_error_prefix("model '%s', after layer %s backward", m->spec, L->name);
            return rc;
        }
    }
    if (dx && S != 1.0f) HS_TRY(m->k->ops->scale(m->k, (size_t)B * m->in_n, 1.0f / S, dx));
    return 0;
}

int hs_model_set_loss_scale(hs_model_t *m, float scale)
{
    int e;
    if (!(scale > 0) || !isfinite(scale) || frexpf(scale, &e) != 0.5f)
        return HS_ERR(-EINVAL, "model '%s': loss scale %g is not a finite power of two > 0",
                      m->spec, (double)scale);
    m->loss_scale = scale;
    return 0;
}

float hs_model_loss_scale(const hs_model_t *m)
{
    return m->loss_scale;
}

void hs_model_set_grad_hook(hs_model_t *m, hs_grad_ready_fn fn, void *ctx)
{
    m->grad_hook = fn;
    m->grad_hook_ctx = fn ? ctx : NULL;
}

/* Forward FLOPs of layer L at batch B: its matrix products (2 M N K each), or one operation per
 * output value for a layer without (activations, pooling, normalisation). */
static double layer_fwd_flops(const hs_layer_t *L, int B)
{
    double pos = (double)B * L->out_h * L->out_w, k2 = (double)L->ksize * L->ksize;
    switch (L->type) {
    case HS_LAYER_FC:
        return 2.0 * B * L->out_n * L->in_n;
    case HS_LAYER_CONV:
        return 2.0 * pos * L->out_c * L->in_c * k2;
    case HS_LAYER_BLOCK:
    case HS_LAYER_RESBLOCK:
        return 2.0 * pos * L->out_c *
               (L->in_c * 9.0 + L->out_c * 9.0 +
                (L->type == HS_LAYER_BLOCK && L->has_proj ? L->in_c : 0));
    default:
        return (double)B * L->out_n;
    }
}

int hs_model_grad_layers(const hs_model_t *m, int B, hs_grad_layer_t *out, int max)
{
    double fwd = 0, bwd = 0;
    for (int i = 0; i < m->n_layers; i++) fwd += layer_fwd_flops(&m->layers[i], B);
    double total = 3.0 * fwd; /* the backward pass: two products per forward one */
    int n = 0;
    for (int i = 0; i < m->n_layers; i++) n += m->layers[i].p_len > 0;
    int j = n;
    for (int i = m->n_layers - 1; i >= 0; i--) { /* backward order */
        const hs_layer_t *L = &m->layers[i];
        bwd += 2.0 * layer_fwd_flops(L, B);
        if (L->p_len == 0) continue;
        j--;
        if (j < max && out) {
            out[j].lo = L->p_off;
            out[j].hi = L->p_off + L->p_len;
            out[j].ready = total > 0 ? (fwd + bwd) / total : 1.0;
        }
    }
    return n;
}

int hs_model_train_step(hs_model_t *m, const float *x, const int32_t *labels, int B, double *loss,
                        int *correct)
{
    return hs_model_loss_grad(m, x, labels, B, loss, correct, NULL);
}

int hs_model_evaluate(hs_model_t *m, const float *x, const int32_t *labels, int B, double *loss,
                      int *correct)
{
    HS_TRY(check_batch(m, x, B));
    if (!labels) return HS_ERR(-EINVAL, "model '%s': no labels", m->spec);
    HS_TRY(forward(m, x, B, m->eval_batch_stats ? HS_FWD_BATCH : HS_FWD_EVAL));
    double l = 0;
    int rc = m->k->ops->softmax_xent(m->k, B, m->classes, m->layers[m->n_layers - 1].y_rt, labels,
                                     NULL, NULL, &l, correct);
    if (rc < 0) {
        hs_error_prefix("model '%s': loss", m->spec);
        return rc;
    }
    if (loss) *loss = l;
    return 0;
}

/* "1,863,690" */
static const char *thousands(size_t v, char *buf, size_t len)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof(tmp), "%zu", v), j = 0;
    for (int i = 0; i < n && j + 2 < (int)len; i++) {
        if (i > 0 && (n - i) % 3 == 0) buf[j++] = ',';
        buf[j++] = tmp[i];
    }
    buf[j] = '\0';
    return buf;
}

static int gemm_add(hs_gemm_shape_t *out, int max, int n, const char *layer, const char *part,
                    long M, long N, long K)
{
    if (n < max) {
        hs_gemm_shape_t *g = &out[n];
        snprintf(g->name, sizeof g->name, "%s%s%s", layer, part[0] ? "." : "", part);
        g->M = M, g->N = N, g->K = K;
    }
    return n + 1;
}

int hs_model_gemms(const hs_model_t *m, int B, hs_gemm_shape_t *out, int max)
{
    int n = 0;
    for (int i = 0; i < m->n_layers; i++) {
        const hs_layer_t *L = &m->layers[i];
        long pos = (long)B * L->out_h * L->out_w, k2 = (long)L->ksize * L->ksize;
        switch (L->type) {
        case HS_LAYER_FC:
            n = gemm_add(out, max, n, L->name, "", B, L->out_n, L->in_n);
            break;
        case HS_LAYER_CONV:
            n = gemm_add(out, max, n, L->name, "", pos, L->out_c, L->in_c * k2);
            break;
        case HS_LAYER_BLOCK:
        case HS_LAYER_RESBLOCK:
            /* two 3x3 convolutions; a Fixup block's 1x1 projection where the shape changes (a
             * batch-norm block's shortcut there pads with zeros: option A, no product) */
            n = gemm_add(out, max, n, L->name, "conv1", pos, L->out_c, L->in_c * 9L);
            n = gemm_add(out, max, n, L->name, "conv2", pos, L->out_c, L->out_c * 9L);
            if (L->type == HS_LAYER_BLOCK && L->has_proj)
                n = gemm_add(out, max, n, L->name, "proj", pos, L->out_c, L->in_c);
            break;
        default:
            break;
        }
    }
    return n;
}

void hs_model_print(const hs_model_t *m, FILE *f)
{
    char num[32], shape[48];
    fprintf(f, "model '%s': input %dx%dx%d, %d classes, %s parameters (%.2f MiB), max batch %d\n",
            m->spec, m->in_c, m->in_h, m->in_w, m->classes, thousands(m->n_params, num, 32),
            m->n_params * 4.0 / (1 << 20), m->max_batch);
    fprintf(f, "  %3s  %-10s %-16s %12s\n", "#", "layer", "output", "params");
    for (int i = 0; i < m->n_layers; i++) {
        const hs_layer_t *L = &m->layers[i];
        if (L->out_h == 1 && L->out_w == 1)
            snprintf(shape, sizeof(shape), "%d", L->out_c);
        else
            snprintf(shape, sizeof(shape), "%dx%dx%d", L->out_c, L->out_h, L->out_w);
        char name[48];
        if (L->type == HS_LAYER_BLOCK)
            snprintf(name, sizeof(name), "%s%s", L->name, L->has_proj ? "*" : "");
        else
            snprintf(name, sizeof(name), "%s", L->name);
        fprintf(f, "  %3d  %-10s %-16s %12s\n", i, name, shape, thousands(L->p_len, num, 32));
    }
    fprintf(f, "  %3s  %-10s %-16s %12s\n", "", "total", "",
            thousands(m->n_params, num, sizeof(num)));
    int blocks = 0;
    for (int i = 0; i < m->n_layers; i++) blocks += m->layers[i].type == HS_LAYER_BLOCK;
    if (blocks)
        fprintf(f, "  blockN: Fixup basic block (two 3x3 convs, 4 scalar biases, a multiplier); "
                   "*: with a 1x1 projection shortcut\n");
}
