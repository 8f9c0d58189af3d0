/*
 * nn/spec.c — model spec strings to layer lists: parsing, shape inference, parameter layout,
 * parameter views and seeded initialisation (host side; nothing here touches a device).
 */
#include "nn/nn_internal.h"

#include "hearsay/common.h"
#include "hearsay/rng.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VALID_FORMS                                                                                \
    "valid forms: logreg:IN-OUT, mlp:IN-H1-...-OUT, lenet5, resnet20, resnet20-fixup, "            \
    "seq:LAYER-LAYER-... (layers: fcN, convK[kR][sS][pP], maxpoolN[sS], relu, tanh, flatten, "     \
    "gap, bn, blockK[sS], resK[sS])"

/* Largest size accepted anywhere in a spec, and per-sample tensor size. */
#define MAX_SIZE (1 << 24)
/* Most parameters a model may have (8 GiB of floats per buffer): every count, offset and fan-in
 * derived from them then fits an int, and products of sizes are checked before they can wrap. */
#define MAX_PARAMS ((size_t)INT_MAX)
#define MAX_COLS   ((size_t)1 << 26) /* a convolution's C R R P Q per sample */

/* a * b, or SIZE_MAX when it would not fit. */
static size_t sat_mul(size_t a, size_t b)
{
    size_t r;
    return __builtin_mul_overflow(a, b, &r) ? SIZE_MAX : r;
}

typedef struct plan {
    const char *spec;
    int data_c, data_h, data_w, classes;
    hs_layer_t *L;
    int n, cap;
    int c, h, w, flat; /* current per-sample shape; flat after fc / flatten / gap */
    size_t np;
    size_t nst; /* running statistics (batch norm) */
    int count[HS_LAYER_RESBLOCK + 1];
    const char *token; /* the spec token being added, for messages */
    int token_len;
} plan_t;

static const char *const type_names[] = {
    [HS_LAYER_FC] = "fc",        [HS_LAYER_CONV] = "conv",   [HS_LAYER_MAXPOOL] = "maxpool",
    [HS_LAYER_RELU] = "relu",    [HS_LAYER_TANH] = "tanh",   [HS_LAYER_FLATTEN] = "flatten",
    [HS_LAYER_GAP] = "gap",      [HS_LAYER_BLOCK] = "block", [HS_LAYER_BN] = "bn",
    [HS_LAYER_RESBLOCK] = "res",
};

static int shape_err(plan_t *p, const char *fmt, const char *what)
{
    return HS_ERR(-EINVAL,
                  "spec '%s' does not fit the data (%dx%dx%d, %d classes): layer %d '%.*s' %s %s",
                  p->spec, p->data_c, p->data_h, p->data_w, p->classes, p->n + 1, p->token_len,
                  p->token, fmt, what);
}

static hs_layer_t *push(plan_t *p, hs_layer_type_t type)
{
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 16;
        hs_layer_t *L = realloc(p->L, (size_t)cap * sizeof(*L));
        if (!L) {
            HS_ERR(-ENOMEM, "out of memory planning spec '%s'", p->spec);
            return NULL;
        }
        p->L = L;
        p->cap = cap;
    }
    hs_layer_t *L = &p->L[p->n];
    memset(L, 0, sizeof(*L));
    L->type = type;
    snprintf(L->name, sizeof(L->name), "%s%d", type_names[type], ++p->count[type]);
    L->in_c = p->c;
    L->in_h = p->h;
    L->in_w = p->w;
    L->in_n = p->c * p->h * p->w;
    L->p_off = p->np;
    return L;
}

/* Finish layer: set its output shape, check sizes, advance the plan. */
static int commit(plan_t *p, hs_layer_t *L, int c, int h, int w, size_t params)
{
    if (c < 1 || h < 1 || w < 1) return shape_err(p, "leaves an empty output", "");
    if (sat_mul(sat_mul((size_t)c, (size_t)h), (size_t)w) > MAX_SIZE)
        return shape_err(p, "output is too large", "(over 2^24 values per sample)");
    if (params > MAX_PARAMS || p->np + params > MAX_PARAMS)
        return HS_ERR(-EINVAL,
                      "spec '%s': layer %d '%.*s' has too many parameters (the model would pass "
                      "2^31 - 1)",
                      p->spec, p->n + 1, p->token_len, p->token);
    L->out_c = c;
    L->out_h = h;
    L->out_w = w;
    L->out_n = c * h * w;
    L->p_len = params;
    p->np += params;
    p->c = c;
    p->h = h;
    p->w = w;
    p->n++;
    return 0;
}

static int need_image(plan_t *p)
{
    if (p->flat) return shape_err(p, "needs an image input (C, H, W) but gets a flat vector", "");
    return 0;
}

static int add_fc(plan_t *p, int out, int init)
{
    hs_layer_t *L = push(p, HS_LAYER_FC);
    if (!L) return -ENOMEM;
    L->has_bias = 1;
    L->init = init;
    size_t weights = sat_mul((size_t)out, (size_t)L->in_n);
    L->w_off = p->np;
    L->b_off = p->np + weights;
    p->flat = 1;
    return commit(p, L, out, 1, 1, weights > MAX_PARAMS ? SIZE_MAX : weights + (size_t)out);
}

static int add_conv(plan_t *p, int K, int R, int stride, int pad, int bias)
{
    HS_TRY(need_image(p));
    hs_layer_t *L = push(p, HS_LAYER_CONV);
    if (!L) return -ENOMEM;
    char what[96];
    if (pad >= R) { /* (outputs that would see only zeros; and a pad of 631 is a typo) */
        snprintf(what, sizeof(what), "(pad %d, kernel %d)", pad, R);
        return shape_err(p, "has a padding not smaller than its kernel", what);
    }
    if (p->h + 2 * pad < R || p->w + 2 * pad < R) {
        snprintf(what, sizeof(what), "(%dx%d with pad %d)", p->h, p->w, pad);
        return shape_err(p, "has a kernel larger than its input", what);
    }
    L->ksize = R;
    L->stride = stride;
    L->pad = pad;
    L->has_bias = bias;
    L->init = HS_INIT_XAVIER;
    size_t weights = sat_mul(sat_mul(sat_mul((size_t)K, (size_t)p->c), (size_t)R), (size_t)R);
    L->w_off = p->np;
    L->b_off = p->np + weights;
    int P = (p->h + 2 * pad - R) / stride + 1, Q = (p->w + 2 * pad - R) / stride + 1;
    /* the CPU path's column matrix of one image: C R R x P Q (a 447-wide kernel on a 40x40
     * image would take 47 G floats) */
    size_t cols = sat_mul(sat_mul(sat_mul((size_t)p->c, (size_t)R), (size_t)R),
                          sat_mul((size_t)HS_MAX(P, 1), (size_t)HS_MAX(Q, 1)));
    if (cols > MAX_COLS) {
        snprintf(what, sizeof(what), "(%zu values per sample, over 2^26)", cols);
        return shape_err(p, "needs a column matrix too large", what);
    }
    return commit(p, L, K, P, Q,
                  weights > MAX_PARAMS ? SIZE_MAX : weights + (bias ? (size_t)K : 0));
}

static int add_pool(plan_t *p, int size, int stride)
{
    HS_TRY(need_image(p));
    hs_layer_t *L = push(p, HS_LAYER_MAXPOOL);
    if (!L) return -ENOMEM;
    if (p->h < size || p->w < size) {
        char what[64];
        snprintf(what, sizeof(what), "(%dx%d)", p->h, p->w);
        return shape_err(p, "has a window larger than its input", what);
    }
    L->ksize = size;
    L->stride = stride;
    return commit(p, L, p->c, (p->h - size) / stride + 1, (p->w - size) / stride + 1, 0);
}

static int add_simple(plan_t *p, hs_layer_type_t type)
{
    if (type == HS_LAYER_GAP) HS_TRY(need_image(p));
    hs_layer_t *L = push(p, type);
    if (!L) return -ENOMEM;
    if (type == HS_LAYER_FLATTEN || type == HS_LAYER_GAP) {
        p->flat = 1;
        if (type == HS_LAYER_GAP) return commit(p, L, p->c, 1, 1, 0);
        return commit(p, L, p->c * p->h * p->w, 1, 1, 0);
    }
    return commit(p, L, p->c, p->h, p->w, 0);
}

static int add_block(plan_t *p, int K, int stride)
{
    HS_TRY(need_image(p));
    hs_layer_t *L = push(p, HS_LAYER_BLOCK);
    if (!L) return -ENOMEM;
    int C = p->c;
    L->ksize = 3;
    L->stride = stride;
    L->pad = 1;
    L->has_proj = stride != 1 || C != K;
    /* K, C <= 2^24: these products fit a size_t; commit bounds their sum. */
    L->w_off = p->np;
    L->w2_off = L->w_off + (size_t)K * C * 9;
    L->wp_off = L->w2_off + (size_t)K * K * 9;
    L->s_off = L->wp_off + (L->has_proj ? (size_t)K * C : 0);
    size_t params = L->s_off + HS_FIX_NSCALARS - p->np;
    int P = (p->h - 1) / stride + 1, Q = (p->w - 1) / stride + 1;
    return commit(p, L, K, P, Q, params);
}

/* Batch normalisation of the previous layer's output: per channel of an image, per feature of
 * a flat vector. It must directly follow a conv or fc layer (where PyTorch's models put it,
 * before the activation); checked here and, for the last layer, in hs_nn_plan. */
static int add_bn(plan_t *p)
{
    const hs_layer_t *prev = p->n > 0 ? &p->L[p->n - 1] : NULL;
    if (!prev || (prev->type != HS_LAYER_CONV && prev->type != HS_LAYER_FC))
        return HS_ERR(-EINVAL,
                      "spec '%s': layer %d '%.*s' must directly follow a conv or fc layer (it "
                      "normalises their outputs, before the activation), not %s",
                      p->spec, p->n + 1, p->token_len, p->token,
                      prev ? type_names[prev->type] : "the input");
    hs_layer_t *L = push(p, HS_LAYER_BN);
    if (!L) return -ENOMEM;
    L->bn_c = p->flat ? p->c * p->h * p->w : p->c;
    L->bn_hw = p->flat ? 1 : p->h * p->w;
    L->bn1_off = p->np;
    L->st_off = p->nst;
    p->nst += 2 * (size_t)L->bn_c;
    return commit(p, L, p->c, p->h, p->w, 2 * (size_t)L->bn_c);
}

/* Basic block with batch norm: relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)), convs 3x3
 * without bias, the first with the stride; shortcut x, or (stride or width change) option A of
 * He et al. 2016: x subsampled by the stride, its channels zero-padded evenly to K. */
static int add_resblock(plan_t *p, int K, int stride)
{
    HS_TRY(need_image(p));
    hs_layer_t *L = push(p, HS_LAYER_RESBLOCK);
    if (!L) return -ENOMEM;
    int C = p->c;
    if (K < C || (K - C) % 2)
        return shape_err(p, "cannot pad its shortcut evenly",
                         "(res blocks keep or widen the channels by an even number)");
    L->ksize = 3;
    L->stride = stride;
    L->pad = 1;
    L->has_proj = stride != 1 || C != K;
    L->w_off = p->np;
    L->bn1_off = L->w_off + (size_t)K * C * 9;
    L->w2_off = L->bn1_off + 2 * (size_t)K;
    L->bn2_off = L->w2_off + (size_t)K * K * 9;
    size_t params = L->bn2_off + 2 * (size_t)K - p->np;
    L->st_off = p->nst;
    p->nst += 4 * (size_t)K;
    int P = (p->h - 1) / stride + 1, Q = (p->w - 1) / stride + 1;
    return commit(p, L, K, P, Q, params);
}

/* Parse a positive integer of `len` characters at s; -1 when malformed or too large. */
static int parse_size(const char *s, int len)
{
    if (len <= 0 || len > 8) return -1;
    long v = 0;
    for (int i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v >= 1 && v <= MAX_SIZE ? (int)v : -1;
}

static int size_err(plan_t *p, const char *tok, int len, const char *form)
{
    return HS_ERR(-EINVAL,
                  "bad size '%.*s' in spec '%s': expected a positive integer (at most %d); "
                  "form %s",
                  len, tok, p->spec, MAX_SIZE, form);
}

/* Add the layer of one seq token (`len` characters at tok): a bare name (relu, tanh, flatten,
 * gap) or a head with a size and optional letter-size suffixes (conv6k5p2, maxpool2s1). */
static int seq_layer(plan_t *p, const char *tok, int len)
{
    p->token = tok;
    p->token_len = len;
    static const struct {
        const char *name;
        hs_layer_type_t type;
    } simple[] = {{"relu", HS_LAYER_RELU},
                  {"tanh", HS_LAYER_TANH},
                  {"flatten", HS_LAYER_FLATTEN},
                  {"gap", HS_LAYER_GAP}};
    for (size_t i = 0; i < HS_ARRAY_LEN(simple); i++)
        if ((int)strlen(simple[i].name) == len && !strncmp(tok, simple[i].name, len))
            return add_simple(p, simple[i].type);
    if (len == 2 && !strncmp(tok, "bn", 2)) return add_bn(p);

    static const char *const heads[] = {"fc", "conv", "maxpool", "block", "res"};
    static const char *const forms[] = {"fcN", "convK[kR][sS][pP]", "maxpoolN[sS]", "blockK[sS]",
                                        "resK[sS]"};
    static const char *const suffixes[] = {"", "ksp", "s", "s", "s"};
    for (int h = 0; h < 5; h++) {
        int hl = (int)strlen(heads[h]);
        if (len <= hl || strncmp(tok, heads[h], hl) || tok[hl] < '0' || tok[hl] > '9') continue;
        /* the main number, then letter-number pairs from the allowed suffix letters */
        int vals[4] = {0, 0, 0, 0}; /* main, k, s, p */
        int seen[4] = {1, 0, 0, 0};
        int i = hl, slot = 0;
        for (;;) {
            int j = i;
            while (j < len && tok[j] >= '0' && tok[j] <= '9') j++;
            int v = parse_size(tok + i, j - i);
            if (slot == 3 && j - i == 1 && tok[i] == '0') v = 0; /* p0 is fine */
            if (v < 0) goto bad;
            vals[slot] = v;
            i = j;
            if (i >= len) break;
            const char *letter = strchr("ksp", tok[i]);
            if (!letter || !strchr(suffixes[h], tok[i])) goto bad;
            slot = 1 + (int)(letter - "ksp");
            if (seen[slot]) goto bad;
            seen[slot] = 1;
            i++;
        }
        switch (h) {
        case 0:
            return add_fc(p, vals[0], HS_INIT_XAVIER);
        case 1:
            return add_conv(p, vals[0], seen[1] ? vals[1] : 3, seen[2] ? vals[2] : 1,
                            seen[3] ? vals[3] : 0, 1);
        case 2:
            return add_pool(p, vals[0], seen[2] ? vals[2] : vals[0]);
        case 3:
            return add_block(p, vals[0], seen[2] ? vals[2] : 1);
        default:
            return add_resblock(p, vals[0], seen[2] ? vals[2] : 1);
        }
    bad:
        return HS_ERR(-EINVAL, "bad layer '%.*s' in spec '%s': expected %s with positive sizes; %s",
                      len, tok, p->spec, forms[h], VALID_FORMS);
    }
    return HS_ERR(-EINVAL, "unknown layer '%.*s' in spec '%s'; %s", len, tok, p->spec, VALID_FORMS);
}

/* logreg:IN-OUT and mlp:IN-H1-...-OUT */
static int plan_dense(plan_t *p, const char *args, int mlp)
{
    const char *form = mlp ? "mlp:IN-H1-...-OUT" : "logreg:IN-OUT";
    int sizes[64], n = 0;
    const char *s = args;
    for (;;) {
        const char *e = strchr(s, '-');
        int len = e ? (int)(e - s) : (int)strlen(s);
        if (n == (int)HS_ARRAY_LEN(sizes))
            return HS_ERR(-EINVAL, "spec '%s' has too many sizes (at most %d)", p->spec, n);
        sizes[n] = parse_size(s, len);
        if (sizes[n] < 0) return size_err(p, s, len, form);
        n++;
        if (!e) break;
        s = e + 1;
    }
    if (mlp ? n < 3 : n != 2)
        return HS_ERR(-EINVAL, "spec '%s' has %d size%s: expected %s", p->spec, n,
                      n == 1 ? "" : "s",
                      mlp ? "IN, at least one hidden size, and OUT (mlp:IN-H1-...-OUT)"
                          : "exactly IN and OUT (logreg:IN-OUT)");
    long in = (long)p->data_c * p->data_h * p->data_w;
    if (sizes[0] != in || sizes[n - 1] != p->classes)
        return HS_ERR(-EINVAL,
                      "spec '%s' does not fit the data: it takes %d inputs and %d classes, the "
                      "data has %dx%dx%d = %ld inputs and %d classes",
                      p->spec, sizes[0], sizes[n - 1], p->data_c, p->data_h, p->data_w, in,
                      p->classes);
    for (int i = 1; i < n; i++) {
        p->token = p->spec;
        p->token_len = (int)strlen(p->spec);
        HS_TRY(add_fc(p, sizes[i], i < n - 1 ? HS_INIT_HE : HS_INIT_XAVIER));
        if (i < n - 1) HS_TRY(add_simple(p, HS_LAYER_RELU));
    }
    return 0;
}

static int plan_lenet5(plan_t *p)
{
    p->token = "lenet5";
    p->token_len = 6;
    int pad = (p->h < 32 || p->w < 32) ? 2 : 0;
    HS_TRY(add_conv(p, 6, 5, 1, pad, 1));
    HS_TRY(add_simple(p, HS_LAYER_RELU));
    HS_TRY(add_pool(p, 2, 2));
    HS_TRY(add_conv(p, 16, 5, 1, 0, 1));
    HS_TRY(add_simple(p, HS_LAYER_RELU));
    HS_TRY(add_pool(p, 2, 2));
    HS_TRY(add_simple(p, HS_LAYER_FLATTEN));
    HS_TRY(add_fc(p, 120, HS_INIT_HE));
    HS_TRY(add_simple(p, HS_LAYER_RELU));
    HS_TRY(add_fc(p, 84, HS_INIT_HE));
    HS_TRY(add_simple(p, HS_LAYER_RELU));
    return add_fc(p, p->classes, HS_INIT_XAVIER);
}

/* CIFAR ResNet-20 (He et al. 2016): conv3x3(16)-bn-relu, 3 stages of 3 basic blocks with batch
 * norm (16, 32, 64 channels, stride 2 at the start of stages 2 and 3, option A shortcuts),
 * global average pool, fc. 0.27 M parameters. */
static int plan_resnet20(plan_t *p)
{
    p->token = "resnet20";
    p->token_len = 8;
    HS_TRY(add_conv(p, 16, 3, 1, 1, 0));
    HS_TRY(add_bn(p));
    HS_TRY(add_simple(p, HS_LAYER_RELU));
    static const int widths[3] = {16, 32, 64};
    for (int s = 0; s < 3; s++)
        for (int b = 0; b < 3; b++) HS_TRY(add_resblock(p, widths[s], s > 0 && b == 0 ? 2 : 1));
    HS_TRY(add_simple(p, HS_LAYER_GAP));
    return add_fc(p, p->classes, HS_INIT_XAVIER);
}

static int plan_resnet20_fixup(plan_t *p)
{
    p->token = "resnet20-fixup";
    p->token_len = 14;
    HS_TRY(add_conv(p, 16, 3, 1, 1, 1));
    HS_TRY(add_simple(p, HS_LAYER_RELU));
    static const int widths[3] = {16, 32, 64};
    for (int s = 0; s < 3; s++)
        for (int b = 0; b < 3; b++) HS_TRY(add_block(p, widths[s], s > 0 && b == 0 ? 2 : 1));
    HS_TRY(add_simple(p, HS_LAYER_GAP));
    return add_fc(p, p->classes, HS_INIT_ZERO);
}

const char *hs_model_spec_help(void)
{
    return "Models (--model SPEC); the data's sample shape C x H x W and class count K are\n"
           "given by --data, and the model must fit them (checked before anything runs):\n"
           "\n"
           "  logreg:IN-K            softmax regression: one fc layer; IN = C*H*W\n"
           "                           logreg:784-10 (gauss, mnist)   logreg:3072-10 (cifar10)\n"
           "  mlp:IN-H1-...-Hn-K     fc(H1)-relu-...-fc(Hn)-relu-fc(K); at least one hidden size\n"
           "                           mlp:784-1024-1024-10 (the default, on gauss)\n"
           "                           mlp:64-128-10 (digits:size=8)\n"
           "  lenet5                 conv5x5(6)-relu-maxpool2-conv5x5(16)-relu-maxpool2-fc120-\n"
           "                         relu-fc84-relu-fc(K); takes images: 1x28x28 (mnist, digits;\n"
           "                         the first conv pads by 2) or 3x32x32 (cifar10), not the flat\n"
           "                         1x1xDIM vectors of gauss and teacher\n"
           "  resnet20               the CIFAR ResNet-20 with batch norm (He et al. 2016), "
           "269,722\n"
           "                         parameters on 3x32x32 with 10 classes\n"
           "  resnet20-fixup         ResNet-20 without normalisation, Fixup-initialised (Zhang et\n"
           "                         al. 2019)\n"
           "  seq:L-L-...            any list of layers, each one of\n"
           "      fcN                a fully connected layer of N outputs (flattens an image)\n"
           "      convK[kR][sS][pP]  K filters RxR, stride S, padding P (defaults k3 s1 p0)\n"
           "      maxpoolN[sS]       NxN max pooling, stride S (default N)\n"
           "      relu, tanh         activations\n"
           "      flatten            C x H x W to a vector\n"
           "      gap                global average pooling (C x H x W to C)\n"
           "      bn                 batch norm of the previous conv's channels or fc's features\n"
           "                         (directly after a conv or fc, never last)\n"
           "      resK[sS]           a basic residual block with batch norm, K channels, stride S\n"
           "      blockK[sS]         a Fixup basic block (no normalisation)\n"
           "    the last layer must output K values. Examples:\n"
           "      seq:fc256-relu-fc10                             an MLP on any flat data\n"
           "      seq:conv16k5p2-relu-maxpool2-conv32k5-relu-maxpool2-fc10     on 1x28x28\n"
           "      seq:conv32-bn-relu-maxpool2-conv64-bn-relu-gap-fc10          on 3x32x32\n"
           "      seq:conv16p1-relu-res16-res32s2-res64s2-gap-fc10  a small ResNet\n"
           "\n"
           "Bounds: every size 1 .. 2^24, at most 2^24 values per sample after any layer, at\n"
           "most 2^31 - 1 parameters. Initialisation: --init torch (default), he or xavier.\n"
           "Sample shapes of the data specs: gauss and teacher 1x1xDIM, mnist 1x28x28, digits\n"
           "1x28x28 (1x8x8 with size=8), cifar10 3x32x32, npy the arrays' (N, ...) shape.\n"
           "Try one without training: hearsay train --model SPEC --data SPEC --max-iters 1.\n";
}

/* A named image model that does not fit the data: say what input it takes (issue 30: "layer 3
 * 'lenet5' has a window larger than its input (1x784)" left a newcomer guessing). */
static int image_model_err(const char *spec, int c, int h, int w)
{
    char why[HS_ERRMSG_MAX];
    snprintf(why, sizeof why, "%s", hs_last_error());
    const char *takes = !strcmp(spec, "lenet5")
                            ? "1x28x28 (mnist, digits) or 3x32x32 (cifar10) images, at least 12x12"
                            : "3x32x32 images (cifar10), or 1x28x28 (mnist, digits)";
    if (h == 1 || w == 1)
        return HS_ERR(-EINVAL,
                      "model '%s' takes %s, and the data's samples are flat vectors (%dx%dx%d: "
                      "gauss and teacher give 1x1xDIM): use --data mnist:DIR, cifar10:DIR, digits "
                      "or npy:DIR with arrays of shape (N, C, H, W), or an mlp for flat data",
                      spec, takes, c, h, w);
    return HS_ERR(-EINVAL, "model '%s' takes %s; the data's samples are %dx%dx%d: %s", spec, takes,
                  c, h, w, why);
}

int hs_nn_plan(const char *spec, int in_c, int in_h, int in_w, int classes, hs_layer_t **layers,
               int *n_layers, size_t *n_params, size_t *n_state)
{
    if (!spec || !*spec) return HS_ERR(-EINVAL, "empty model spec; " VALID_FORMS);
    if (in_c < 1 || in_h < 1 || in_w < 1 || classes < 2 || (long)in_c * in_h * in_w > MAX_SIZE)
        return HS_ERR(-EINVAL,
                      "model spec '%s': bad data shape %dx%dx%d with %d classes (need positive "
                      "sizes, at most 2^24 inputs, at least 2 classes)",
                      spec, in_c, in_h, in_w, classes);
    plan_t p = {.spec = spec,
                .data_c = in_c,
                .data_h = in_h,
                .data_w = in_w,
                .classes = classes,
                .c = in_c,
                .h = in_h,
                .w = in_w};
    int rc;
    const char *colon = strchr(spec, ':');
    size_t nlen = colon ? (size_t)(colon - spec) : strlen(spec);
    const char *args = colon ? colon + 1 : NULL;
    if (nlen == 6 && !strncmp(spec, "logreg", 6) && args) {
        rc = plan_dense(&p, args, 0);
    } else if (nlen == 3 && !strncmp(spec, "mlp", 3) && args) {
        rc = plan_dense(&p, args, 1);
    } else if (!strcmp(spec, "lenet5") || !strcmp(spec, "resnet20") ||
               !strcmp(spec, "resnet20-fixup")) {
        rc = !strcmp(spec, "lenet5")     ? plan_lenet5(&p)
             : !strcmp(spec, "resnet20") ? plan_resnet20(&p)
                                         : plan_resnet20_fixup(&p);
        if (rc < 0) rc = image_model_err(spec, in_c, in_h, in_w);
    } else if (nlen == 3 && !strncmp(spec, "seq", 3) && args) {
        rc = 0;
        const char *s = args;
        for (;;) {
            const char *e = strchr(s, '-');
            int len = e ? (int)(e - s) : (int)strlen(s);
            rc = seq_layer(&p, s, len);
            if (rc < 0 || !e) break;
            s = e + 1;
        }
    } else if (args && ((nlen == 6 && !strncmp(spec, "lenet5", 6)) ||
                        (nlen == 8 && !strncmp(spec, "resnet20", 8)) ||
                        (nlen == 14 && !strncmp(spec, "resnet20-fixup", 14)))) {
        rc = HS_ERR(-EINVAL,
                    "spec '%s': %.*s takes no sizes (the data shape and class count set them); "
                    "write just '%.*s'",
                    spec, (int)nlen, spec, (int)nlen, spec);
    } else {
        rc = HS_ERR(-EINVAL, "unknown model '%.*s' in spec '%s'; " VALID_FORMS, (int)nlen, spec,
                    spec);
    }
    if (rc == 0 && p.n == 0) rc = HS_ERR(-EINVAL, "spec '%s' has no layers", spec);
    if (rc == 0 && p.L[p.n - 1].type == HS_LAYER_BN)
        rc = HS_ERR(-EINVAL,
                    "spec '%s': layer %d 'bn' is the last layer: a model ends with its logits "
                    "(put bn before the activation of a hidden layer)",
                    spec, p.n);
    if (rc == 0 && (p.L[p.n - 1].out_n != classes))
        rc = HS_ERR(-EINVAL,
                    "spec '%s' does not fit the data (%dx%dx%d, %d classes): the model ends with "
                    "%d outputs, not %d",
                    spec, in_c, in_h, in_w, classes, p.L[p.n - 1].out_n, classes);
    if (rc < 0) {
        free(p.L);
        return rc;
    }
    /* He init for fc / conv feeding a relu (through a bn or not); Xavier otherwise (ZERO
     * stays). */
    for (int i = 0; i < p.n; i++) {
        hs_layer_t *L = &p.L[i];
        int j = i + 1 < p.n && p.L[i + 1].type == HS_LAYER_BN ? i + 2 : i + 1;
        if ((L->type == HS_LAYER_FC || L->type == HS_LAYER_CONV) && L->init != HS_INIT_ZERO)
            L->init = (j < p.n && p.L[j].type == HS_LAYER_RELU) ? HS_INIT_HE : HS_INIT_XAVIER;
    }
    *layers = p.L;
    *n_layers = p.n;
    *n_params = p.np;
    if (n_state) *n_state = p.nst;
    return 0;
}

static void view(hs_param_view_t *v, const hs_layer_t *L, int layer, const char *what, size_t off,
                 int ndim, int d0, int d1, int d2, int d3)
{
    snprintf(v->name, sizeof(v->name), "%s.%s", L->name, what);
    v->offset = off;
    v->ndim = ndim;
    v->shape[0] = d0;
    v->shape[1] = d1;
    v->shape[2] = d2;
    v->shape[3] = d3;
    v->count = 1;
    for (int i = 0; i < ndim; i++) v->count *= (size_t)v->shape[i];
    v->layer = layer;
}

int hs_nn_views(const hs_layer_t *layers, int n_layers, hs_param_view_t **views, int *n_views)
{
    int n = 0;
    for (int i = 0; i < n_layers; i++) n += 8;
    hs_param_view_t *v = hs_calloc((size_t)n + 1, sizeof(*v), "parameter views");
    if (!v) return -ENOMEM;
    n = 0;
    static const char *const scal[HS_FIX_NSCALARS] = {"b1a", "b1b", "b2a", "b2b", "scale"};
    for (int i = 0; i < n_layers; i++) {
        const hs_layer_t *L = &layers[i];
        int C = L->in_c, K = L->out_c, R = L->ksize;
        switch (L->type) {
        case HS_LAYER_FC:
            view(&v[n++], L, i, "w", L->w_off, 2, L->out_n, L->in_n, 1, 1);
            view(&v[n++], L, i, "b", L->b_off, 1, L->out_n, 1, 1, 1);
            break;
        case HS_LAYER_CONV:
            view(&v[n++], L, i, "w", L->w_off, 4, K, C, R, R);
            if (L->has_bias) view(&v[n++], L, i, "b", L->b_off, 1, K, 1, 1, 1);
            break;
        case HS_LAYER_BN:
            view(&v[n++], L, i, "g", L->bn1_off, 1, L->bn_c, 1, 1, 1);
            view(&v[n++], L, i, "b", L->bn1_off + L->bn_c, 1, L->bn_c, 1, 1, 1);
            break;
        case HS_LAYER_RESBLOCK:
            view(&v[n++], L, i, "conv1.w", L->w_off, 4, K, C, 3, 3);
            view(&v[n++], L, i, "bn1.g", L->bn1_off, 1, K, 1, 1, 1);
            view(&v[n++], L, i, "bn1.b", L->bn1_off + K, 1, K, 1, 1, 1);
            view(&v[n++], L, i, "conv2.w", L->w2_off, 4, K, K, 3, 3);
            view(&v[n++], L, i, "bn2.g", L->bn2_off, 1, K, 1, 1, 1);
            view(&v[n++], L, i, "bn2.b", L->bn2_off + K, 1, K, 1, 1, 1);
            break;
        case HS_LAYER_BLOCK:
            view(&v[n++], L, i, "conv1.w", L->w_off, 4, K, C, 3, 3);
            view(&v[n++], L, i, "conv2.w", L->w2_off, 4, K, K, 3, 3);
            if (L->has_proj) view(&v[n++], L, i, "proj.w", L->wp_off, 4, K, C, 1, 1);
            for (int j = 0; j < HS_FIX_NSCALARS; j++)
                view(&v[n++], L, i, scal[j], L->s_off + j, 1, 1, 1, 1, 1);
            break;
        default:
            break;
        }
    }
    *views = v;
    *n_views = n;
    return 0;
}

static void fill_normal(hs_rng_t *r, float *p, size_t n, double std)
{
    for (size_t i = 0; i < n; i++) p[i] = (float)(std * hs_rng_normal(r));
}

static void fill_uniform(hs_rng_t *r, float *p, size_t n, double bound)
{
    for (size_t i = 0; i < n; i++) p[i] = (float)(bound * (2.0 * hs_rng_uniform(r) - 1.0));
}

/* Weights (n) of a fc / conv layer whose own kind is `kind` (HS_INIT_*) under `scheme`. */
static void fill_weights(hs_rng_t *r, float *p, size_t n, int kind, hs_init_scheme_t scheme,
                         int fan_in, int fan_out)
{
    if (kind == HS_INIT_ZERO) {
        memset(p, 0, n * sizeof(float));
    } else if (scheme == HS_INIT_SCHEME_TORCH) {
        /* kaiming_uniform_(a = sqrt(5)): gain sqrt(2 / (1 + 5)), bound gain * sqrt(3 / fan_in) */
        fill_uniform(r, p, n, 1.0 / sqrt((double)fan_in));
    } else if (scheme == HS_INIT_SCHEME_HE && kind == HS_INIT_HE) {
        fill_normal(r, p, n, sqrt(2.0 / fan_in));
    } else {
        fill_uniform(r, p, n, sqrt(6.0 / (fan_in + fan_out)));
    }
}

/* Biases (n) of a fc / conv layer: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) under torch (drawn after
 * the weights from the same stream, as PyTorch's reset_parameters does), else zero. */
static void fill_bias(hs_rng_t *r, float *p, size_t n, int kind, hs_init_scheme_t scheme,
                      int fan_in)
{
    if (kind != HS_INIT_ZERO && scheme == HS_INIT_SCHEME_TORCH)
        fill_uniform(r, p, n, 1.0 / sqrt((double)fan_in));
    else
        memset(p, 0, n * sizeof(float));
}

void hs_nn_init_host(const hs_layer_t *layers, int n_layers, uint64_t seed, hs_init_scheme_t scheme,
                     float *p, float *st)
{
    int n_blocks = 0;
    for (int i = 0; i < n_layers; i++) n_blocks += layers[i].type == HS_LAYER_BLOCK;
    /* Fixup: branch scale L^(-1/(2m-2)) with m = 2 layers per branch */
    double fixup = n_blocks > 0 ? 1.0 / sqrt((double)n_blocks) : 1.0;
    for (int i = 0; i < n_layers; i++) {
        const hs_layer_t *L = &layers[i];
        hs_rng_t r;
        hs_rng_seed(&r, seed, (uint64_t)i + 1);
        int C = L->in_c, K = L->out_c, R = L->ksize;
        /* A Fixup network keeps its own initialisation whatever the scheme. */
        hs_init_scheme_t sc = n_blocks > 0 ? HS_INIT_SCHEME_HE : scheme;
        switch (L->type) {
        case HS_LAYER_FC:
            fill_weights(&r, p + L->w_off, (size_t)L->out_n * L->in_n, L->init, sc, L->in_n,
                         L->out_n);
            fill_bias(&r, p + L->b_off, (size_t)L->out_n, L->init, sc, L->in_n);
            break;
        case HS_LAYER_CONV:
            fill_weights(&r, p + L->w_off, (size_t)K * C * R * R, L->init, sc, C * R * R,
                         K * R * R);
            if (L->has_bias) fill_bias(&r, p + L->b_off, (size_t)K, L->init, sc, C * R * R);
            break;
        case HS_LAYER_BN: /* gamma 1, beta 0; running mean 0, var 1 */
            for (int c = 0; c < L->bn_c; c++) {
                p[L->bn1_off + c] = 1.0f;
                p[L->bn1_off + L->bn_c + c] = 0.0f;
                if (st) {
                    st[L->st_off + c] = 0.0f;
                    st[L->st_off + L->bn_c + c] = 1.0f;
                }
            }
            break;
        case HS_LAYER_RESBLOCK:
            fill_weights(&r, p + L->w_off, (size_t)K * C * 9, HS_INIT_HE, sc, C * 9, K * 9);
            fill_weights(&r, p + L->w2_off, (size_t)K * K * 9, HS_INIT_HE, sc, K * 9, K * 9);
            for (int c = 0; c < K; c++) {
                p[L->bn1_off + c] = p[L->bn2_off + c] = 1.0f;
                p[L->bn1_off + K + c] = p[L->bn2_off + K + c] = 0.0f;
                if (st)
                    for (int j = 0; j < 2; j++) {
                        st[L->st_off + 2 * (size_t)j * K + c] = 0.0f;
                        st[L->st_off + (2 * (size_t)j + 1) * K + c] = 1.0f;
                    }
            }
            break;
        case HS_LAYER_BLOCK:
            fill_normal(&r, p + L->w_off, (size_t)K * C * 9, sqrt(2.0 / (C * 9)) * fixup);
            memset(p + L->w2_off, 0, (size_t)K * K * 9 * sizeof(float));
            if (L->has_proj) fill_normal(&r, p + L->wp_off, (size_t)K * C, sqrt(2.0 / C));
            for (int j = 0; j < HS_FIX_NSCALARS; j++)
                p[L->s_off + j] = j == HS_FIX_SCALE ? 1.0f : 0.0f;
            break;
        default:
            break;
        }
    }
}

int hs_init_parse(const char *s, hs_init_scheme_t *out)
{
    static const char *const names[] = {[HS_INIT_SCHEME_TORCH] = "torch",
                                        [HS_INIT_SCHEME_HE] = "he",
                                        [HS_INIT_SCHEME_XAVIER] = "xavier"};
    for (size_t i = 0; s && i < HS_ARRAY_LEN(names); i++)
        if (strcmp(s, names[i]) == 0) {
            *out = (hs_init_scheme_t)i;
            return 0;
        }
    return HS_ERR(-EINVAL, "unknown initialisation '%s': expected torch, he or xavier", s ? s : "");
}

const char *hs_init_name(hs_init_scheme_t scheme)
{
    return scheme == HS_INIT_SCHEME_HE       ? "he"
           : scheme == HS_INIT_SCHEME_XAVIER ? "xavier"
                                             : "torch";
}
