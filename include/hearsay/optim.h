/*
 * hearsay/optim.h — the local optimizer (SGD with momentum, Nesterov, weight decay) and
 * learning-rate schedules.
 *
 * The optimizer works on ONE flat parameter buffer and ONE flat gradient buffer of n floats
 * (see DESIGN.md), both device memory of the kernel backend it was opened with. The update
 * itself is the backend's sgd_step kernel (PyTorch's convention):
 *     g = grad + wd * param;  vel = momentum * vel + g;
 *     step = nesterov ? g + momentum * vel : vel;  param -= lr * step.
 * The optimizer owns the velocity buffer (n floats, device, zeroed at open). It is local
 * state: never gossiped, never scaled by push-sum weights; checkpoints save and restore it
 * through hs_sgd_velocity().
 *
 * A learning-rate schedule is a plain value (hs_lr_schedule_t, no pointers, copyable) and
 * hs_lr_at() is a pure function of (iteration, iterations per epoch, base lr): every rank
 * computes the same lr without talking. Schedules are parsed from the strings users type:
 *     constant                      lr = base
 *     step:30,60,80[:GAMMA]         lr = base * GAMMA^(number of milestones passed); GAMMA 0.1
 *     cosine[:LENGTH[:FINAL]]       lr = FINAL + (base - FINAL) (1 + cos(pi t / LENGTH)) / 2
 *                                   for t < LENGTH, FINAL after; LENGTH defaults to the run's
 *                                   length, FINAL (an absolute lr) to 0
 * plus an optional linear warm-up (--warmup W) composable with any of them.
 * Lengths and milestones are in epochs (fractional allowed: "0.5"), or in iterations with an
 * "it" suffix ("500it"); an "ep" suffix is accepted for epochs. Time runs in iterations:
 * t = iteration / iterations_per_epoch epochs, so fractional epochs count. Ranges: spans
 * 0 .. 1e12, GAMMA in (0, 100], FINAL in [0, 100]; anything else is refused at parse time.
 */
#ifndef HEARSAY_OPTIM_H
#define HEARSAY_OPTIM_H

#include "hearsay/kernels.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------ */
/* SGD                                                                                         */

typedef struct hs_sgd_config {
    float momentum;     /* in [0, 1); 0 = plain SGD (no velocity buffer) */
    float weight_decay; /* >= 0; L2 penalty added to the gradient */
    int nesterov;       /* 1 = Nesterov momentum (needs momentum > 0) */
} hs_sgd_config_t;

typedef struct hs_sgd hs_sgd_t;

/* Open an optimizer for n parameters on backend k (k must outlive it). Allocates and zeroes
 * the velocity (n floats, device) when momentum > 0. -EINVAL for a bad configuration
 * (momentum outside [0, 1), negative or non-finite weight decay, Nesterov without momentum). */
int hs_sgd_open(hs_sgd_t **out, hs_kernels_t *k, size_t n, const hs_sgd_config_t *cfg);
/* Free the velocity and the optimizer; *opt becomes NULL (NULL is fine). */
void hs_sgd_close(hs_sgd_t **opt);

/* One step: params (n) -= lr * step(grads (n), velocity), all device buffers of the
 * optimizer's backend. lr must be finite and >= 0. */
int hs_sgd_step(hs_sgd_t *opt, float *params, const float *grads, float lr);

/* Zero the velocity (e.g. after loading parameters that have no saved velocity). */
int hs_sgd_reset(hs_sgd_t *opt);

/* The optimizer's state for checkpoints: the velocity buffer (device memory, n floats; NULL
 * when momentum == 0) and its length in floats in *n (may be NULL). Read or overwrite it with
 * the backend's to_host / to_device. */
float *hs_sgd_velocity(const hs_sgd_t *opt, size_t *n);
/* The configuration the optimizer was opened with. */
const hs_sgd_config_t *hs_sgd_config(const hs_sgd_t *opt);

/* ------------------------------------------------------------------------------------------ */
/* Learning-rate schedules                                                                     */

#define HS_LR_MAX_MILESTONES 32
#define HS_LR_SPEC_MAX       1024 /* enough for hs_lr_format of any schedule */

typedef enum hs_lr_kind { HS_LR_CONSTANT = 0, HS_LR_STEP = 1, HS_LR_COSINE = 2 } hs_lr_kind_t;

/* A length or a point in time: `value` epochs, or `value` iterations when `iters`. */
typedef struct hs_lr_span {
    double value;
    int iters;
} hs_lr_span_t;

typedef struct hs_lr_schedule {
    hs_lr_kind_t kind;
    /* step */
    int n_milestones;
    hs_lr_span_t milestones[HS_LR_MAX_MILESTONES]; /* increasing */
    double gamma;                                  /* factor at each milestone */
    /* cosine */
    hs_lr_span_t length; /* > 0 */
    double final_lr;     /* absolute lr reached at `length`, >= 0 */
    /* warm-up (any kind): value 0 = none */
    hs_lr_span_t warmup;
} hs_lr_schedule_t;

/* Parse a schedule ("constant", "step:30,60,80:0.1", "cosine", "cosine:90:0.001",
 * "cosine:5000it"). run_epochs is the run's length, used by cosine when the spec gives none
 * (pass <= 0 when unknown: cosine then needs an explicit length). The warm-up is set to none.
 * -EINVAL with a message quoting the spec and what was expected. */
int hs_lr_parse(const char *spec, double run_epochs, hs_lr_schedule_t *out);

/* Set the linear warm-up from text: "5" or "5ep" (epochs), "500it" (iterations), "0" (none).
 * During warm-up the lr rises linearly, lr(i) = target * (i + 1) / (W + 1) for iterations
 * i < W (W the warm-up length in iterations), target = the main schedule's lr at W, so the
 * first step never uses lr 0 and the ramp meets the main schedule continuously. */
int hs_lr_set_warmup(hs_lr_schedule_t *s, const char *spec);

/* The learning rate at `iteration` (0-based, counted over the whole run) given
 * iters_per_epoch (values < 1 count as 1) and the base lr. Pure and deterministic. */
double hs_lr_at(const hs_lr_schedule_t *s, long iteration, long iters_per_epoch, double base_lr);

/* Write the schedule back as text that hs_lr_parse accepts ("step:30,60,80:0.1"; the warm-up
 * is not included: see hs_lr_format_span). Returns the length, like snprintf. */
int hs_lr_format(const hs_lr_schedule_t *s, char *buf, size_t len);
/* Write a span as "5" (epochs) or "500it". Returns the length, like snprintf. */
int hs_lr_format_span(hs_lr_span_t span, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
