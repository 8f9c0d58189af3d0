/*
 * hearsay/nn.h — layers, models and the softmax cross-entropy loss.
 *
 * A model is a list of layers built from a short spec string. Its parameters live in ONE flat
 * contiguous device buffer (hs_model_params) and its gradients in another of the same length
 * (hs_model_grads); each layer holds views (offset, shape) into both, listed by hs_model_view.
 * Mixing, sending, averaging and checkpointing a model are therefore single operations over one
 * vector. All compute goes through the kernel ops table (k->ops), so the same model runs on CPU
 * or CUDA; every batch pointer below is a device pointer of that backend. Activations and
 * workspaces are allocated once at creation for `max_batch` rows: a training step allocates
 * nothing.
 *
 * Specs (the data shape C x H x W and the class count are given at creation and must agree):
 *   logreg:IN-OUT          softmax regression: fc(OUT); IN = C*H*W, OUT = classes
 *   mlp:IN-H1-...-Hn-OUT   fc(H1)-relu-...-fc(Hn)-relu-fc(OUT); at least one hidden size
 *   lenet5                 conv5x5(6)-relu-maxpool2-conv5x5(16)-relu-maxpool2-flatten-
 *                          fc120-relu-fc84-relu-fc(classes); the first conv pads by 2 when the
 *                          input is smaller than 32x32 (1x28x28 MNIST), else 0 (3x32x32 CIFAR)
 *   resnet20               the standard CIFAR ResNet-20 with batch norm (He et al. 2016):
 *                          conv3x3(16, no bias)-bn-relu, 3 stages of 3 resK blocks (16, 32, 64
 *                          channels, stride 2 at the start of stages 2 and 3), gap, fc(classes);
 *                          269,722 parameters for 3x32x32 and 10 classes
 *   resnet20-fixup         CIFAR ResNet-20 without normalization, the Fixup way (below)
 *   seq:L-L-...            any list of layers: fcN, convK[kR][sS][pP] (K filters RxR, stride S,
 *                          pad P; defaults k3 s1 p0), maxpoolN[sS] (stride defaults to N),
 *                          relu, tanh, flatten, gap (global average pool), bn (batch norm of
 *                          the conv's channels or the fc's features; must directly follow a
 *                          conv or fc, and not be last), blockK[sS] (a Fixup basic block),
 *                          resK[sS] (a basic block with batch norm: relu(bn(conv3x3(relu(bn(
 *                          conv3x3/S(x))))) + shortcut), the shortcut x or, when the stride or
 *                          width changes, x subsampled by S with its channels zero-padded
 *                          evenly to K: "option A"); the last layer must output `classes`
 *                          values
 * Bounds, checked where the spec is parsed: every size 1 .. 2^24 (padding 0 .. 2^24), at most
 * 2^24 values per sample after any layer, at most 2^31 - 1 parameters in all (products are
 * checked before they could wrap).
 *
 * resnet20-fixup (Zhang, Dauphin, Ma, "Fixup initialization", ICLR 2019):
 * conv3x3(16)+bias-relu, then 3 stages of 3 basic blocks with 16, 32, 64 channels (stride 2 at
 * the start of stages 2 and 3), global average pool, fc(classes). A basic block with input x
 * computes, with scalar parameters b1a b1b b2a b2b (biases) and s (multiplier):
 *     h   = relu(conv3x3(x + b1a) + b1b)
 *     br  = s * conv3x3(h + b2a) + b2b
 *     out = relu(br + shortcut),  shortcut = x, or conv1x1/stride2(x + b1a) (projection, no
 *                                 bias) when the stride or channel count changes.
 * Branch convs carry no bias. Initialisation: the first conv of each branch is He-normal scaled
 * by L^(-1/(2m-2)) = L^(-1/2) (L residual branches, m = 2 convs per branch), the second conv
 * of each branch is zero, projections and the stem conv are He-normal, scalar biases 0 and the
 * multiplier 1, and the classifier (fc) is zero-initialised. So the network starts as the
 * identity along each residual path, which is what lets it train without normalization.
 *
 * Initialisation elsewhere (hs_init_scheme_t, `--init`; a Fixup network keeps its own):
 *   torch (default)  PyTorch 1.13's defaults for nn.Linear and nn.Conv2d: weights
 *                    kaiming_uniform_(a = sqrt(5)) = U(-1/sqrt(fan_in), 1/sqrt(fan_in)), biases
 *                    U(-1/sqrt(fan_in), 1/sqrt(fan_in)); fan_in = IN (fc) or C*R*S (conv)
 *   he               fc and conv weights followed by relu He-normal (std sqrt(2 / fan_in)),
 *                    others Xavier-uniform (a = sqrt(6 / (fan_in + fan_out))), biases zero
 *   xavier           every fc and conv weight Xavier-uniform, biases zero
 * Layer i draws from hs_rng stream (seed, i + 1), so the same seed gives the same parameters bit
 * for bit.
 *
 * Inputs x are (B, C*H*W) float rows (NCHW per sample), labels (B) int32 in [0, classes), both
 * device pointers; 1 <= B <= max_batch. Weight layouts follow PyTorch: fc weight (OUT, IN),
 * conv weight (K, C, R, S).
 */
#ifndef HEARSAY_NN_H
#define HEARSAY_NN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hearsay/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hs_model hs_model_t;

/* How fc and conv parameters are initialised (see above). */
typedef enum hs_init_scheme {
    HS_INIT_SCHEME_TORCH = 0,
    HS_INIT_SCHEME_HE = 1,
    HS_INIT_SCHEME_XAVIER = 2,
} hs_init_scheme_t;

/* "torch", "he", "xavier" -> *out; -EINVAL naming the value and the choices. */
int hs_init_parse(const char *s, hs_init_scheme_t *out);
const char *hs_init_name(hs_init_scheme_t scheme);

/* One named parameter tensor: floats [offset, offset + count) of the flat parameter buffer
 * (and of the gradient buffer). Views are listed in layer order, contiguous, and cover the
 * buffer exactly. */
typedef struct hs_param_view {
    char name[40]; /* "fc1.w", "conv1.b", "block4.conv2.w", "block4.scale", ... */
    size_t offset; /* in floats */
    size_t count;
    int ndim;     /* 1..4 */
    int shape[4]; /* fc weight (OUT, IN), conv weight (K, C, R, S), bias (N), scalar (1) */
    int layer;    /* index of the owning layer (as printed by hs_model_print) */
} hs_param_view_t;

/* Check `spec` against the data shape (in_c x in_h x in_w inputs, `classes` labels) without
 * allocating anything; on success *num_params (may be NULL) receives the parameter count.
 * -EINVAL with a message naming the spec (and the data shape when they disagree). */
/* Usage text of --model (`hearsay train --help-models`): every model, the seq: grammar and
 * examples, the data shapes each takes (several lines, ending in a newline). */
const char *hs_model_spec_help(void);
int hs_model_parse_spec(const char *spec, int in_c, int in_h, int in_w, int classes,
                        size_t *num_params);

/* Build the model of `spec` on backend `k` (not owned; must outlive the model), allocate the
 * flat parameter and gradient buffers and activations for up to `max_batch` rows, and
 * initialise the parameters from `seed` with the torch scheme (see hs_model_init_params). */
int hs_model_create(hs_model_t **out, hs_kernels_t *k, const char *spec, int in_c, int in_h,
                    int in_w, int classes, int max_batch, uint64_t seed);
/* Free everything and set *m to NULL (NULL is fine). */
void hs_model_free(hs_model_t **m);

/* Number of parameters (length of the flat parameter and gradient buffers). */
size_t hs_model_num_params(const hs_model_t *m);
/* The flat parameter buffer (device, num_params floats). */
float *hs_model_params(hs_model_t *m);
/* The flat gradient buffer (device, num_params floats); after a train step it holds
 * d(mean loss over the batch) / d(params). */
float *hs_model_grads(hs_model_t *m);
/* Keep the gradient in caller memory from now on (CPU kernels only: host memory of
 * num_params floats that outlives its use, such as a buffer of hs_transport_buf_alloc that
 * an all-reduce shares with the peers); its current values are copied in. g NULL: back to the
 * model's own buffer (values copied back). The caller frees g after that. */
int hs_model_use_grads(hs_model_t *m, float *g);
/* Parameter views: their number, and view i (NULL when out of range). */
int hs_model_num_views(const hs_model_t *m);
const hs_param_view_t *hs_model_view(const hs_model_t *m, int i);

const char *hs_model_spec(const hs_model_t *m);
hs_kernels_t *hs_model_kernels(const hs_model_t *m);
int hs_model_max_batch(const hs_model_t *m);
int hs_model_classes(const hs_model_t *m);
/* Input values per sample: C*H*W. */
int hs_model_input_size(const hs_model_t *m);

/* Re-initialise every parameter from `seed` under the model's scheme (torch unless
 * hs_model_set_init chose another; deterministic: same seed, same bits). */
int hs_model_init_params(hs_model_t *m, uint64_t seed);
/* Running statistics of the batch-norm layers (mean then variance per layer, in layer order;
 * PyTorch's running_mean / running_var buffers): their count (0 without bn) and the device
 * buffer. A training step (hs_model_train_step, hs_model_loss_grad) normalises with the batch's
 * statistics and updates these (momentum 0.1, unbiased variance); hs_model_evaluate and
 * hs_model_forward normalise with them, as PyTorch's eval(). hs_model_init_params resets them
 * (means 0, variances 1). They are not parameters: no gradient, no weight decay. */
size_t hs_model_num_state(const hs_model_t *m);
float *hs_model_state(hs_model_t *m);
/* on = 1: hs_model_evaluate / hs_model_forward use the batch's own statistics and leave the
 * running ones alone (PyTorch's train() without an update; gradient checks). */
void hs_model_set_eval_batch_stats(hs_model_t *m, int on);
/* Choose the initialisation scheme and re-initialise every parameter from `seed`. */
int hs_model_set_init(hs_model_t *m, hs_init_scheme_t scheme, uint64_t seed);
hs_init_scheme_t hs_model_init_scheme(const hs_model_t *m);

/* One training step's gradient: forward x (B, C*H*W), softmax cross-entropy against labels (B),
 * backward. Afterwards grads = d(mean loss)/d(params) (every gradient is overwritten, no
 * zeroing needed), *loss = mean loss, *correct = rows whose argmax is the label (either may be
 * NULL). The parameters are not changed: the optimizer applies the step. */
int hs_model_train_step(hs_model_t *m, const float *x, const int32_t *labels, int B, double *loss,
                        int *correct);
/* Same as hs_model_train_step, and also dx (B, C*H*W) = d(mean loss)/d(x) when dx != NULL
 * (device; used by gradient checks). */
int hs_model_loss_grad(hs_model_t *m, const float *x, const int32_t *labels, int B, double *loss,
                       int *correct, float *dx);
/* Loss scaling (mixed precision in fp16: hs_precision_t, runtime/worker.c's dynamic scaler):
 * backward starts from `scale` times the loss's gradient, so that small gradients survive the
 * products' fp16 operands, and each layer's parameter gradient is divided by it again right
 * after the layer's backward (before the gradient-ready hook), as is dx: what the step leaves
 * is the true gradient, or inf/nan where a scaled value overflowed. A power of two (exact);
 * 1 (the default) turns it off. -EINVAL otherwise. */
int hs_model_set_loss_scale(hs_model_t *m, float scale);
float hs_model_loss_scale(const hs_model_t *m);
/* Called during backward (hs_model_train_step, hs_model_loss_grad) right after a layer with
 * parameters has written its gradient: floats [lo, hi) of the gradient buffer are final for
 * this step. Layers come last to first, so [lo, num_params) is final too. A negative return
 * stops the step with that error. */
typedef int (*hs_grad_ready_fn)(void *ctx, size_t lo, size_t hi);
/* Set (fn NULL: clear) the model's gradient-ready hook; runs on the thread of the step. */
void hs_model_set_grad_hook(hs_model_t *m, hs_grad_ready_fn fn, void *ctx);

/* A layer with parameters, for overlapping communication with backward: its gradient range
 * and the fraction of a training step's FLOPs (forward + backward, estimated from the matrix
 * products; backward = 2x forward per layer) done when backward has written it. */
typedef struct hs_grad_layer {
    size_t lo, hi; /* floats [lo, hi) of the gradient buffer */
    double ready;  /* (0, 1] */
} hs_grad_layer_t;
/* The layers with parameters at batch B, in layer order (ascending lo, contiguous, covering
 * the buffer): writes up to `max` into `out` (NULL with max 0 to count); returns their number. */
int hs_model_grad_layers(const hs_model_t *m, int B, hs_grad_layer_t *out, int max);

/* Forward only: mean loss and correct count of x (B, C*H*W) against labels (B). */
int hs_model_evaluate(hs_model_t *m, const float *x, const int32_t *labels, int B, double *loss,
                      int *correct);
/* Forward only: *logits points at the model's (B, classes) output (device, valid until the
 * next call on this model). */
int hs_model_forward(hs_model_t *m, const float *x, int B, const float **logits);

/* Print a table of layers (output shape, parameter count) and the total to `f`. */
void hs_model_print(const hs_model_t *m, FILE *f);

/* One matrix product of the forward pass: an fc layer (M = batch, N = outputs, K = inputs) or
 * a convolution as its implicit GEMM (M = batch x output positions, N = output channels,
 * K = input channels x kernel area); 2 M N K floating-point operations. The backward pass makes
 * two products of the same size per layer (data and weight gradients). */
typedef struct hs_gemm_shape {
    char name[32]; /* "fc1", "conv2", "block4.conv1", "block7.proj" */
    long M, N, K;
} hs_gemm_shape_t;

/* The forward pass's matrix products at batch B, in order: writes up to `max` into `out` (NULL
 * with max 0 to count) and returns how many the model has. */
int hs_model_gemms(const hs_model_t *m, int B, hs_gemm_shape_t *out, int max);

#ifdef __cplusplus
}
#endif
#endif
