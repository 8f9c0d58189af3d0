/* optim/sgd.c — SGD with momentum, Nesterov and weight decay over one flat parameter buffer.
 * The arithmetic is the backend's sgd_step kernel; this file owns the velocity buffer. */
#include "hearsay/common.h"
#include "hearsay/optim.h"

#include <math.h>
#include <stdlib.h>

struct hs_sgd {
    hs_kernels_t *k;
    size_t n;
    hs_sgd_config_t cfg;
    float *vel; /* (n) device; NULL when momentum == 0 */
};

static int check_config(const hs_sgd_config_t *c)
{
    if (!(c->momentum >= 0.0f && c->momentum < 1.0f))
        return HS_ERR(-EINVAL, "sgd: momentum %g is out of range [0, 1)", (double)c->momentum);
    if (!(c->weight_decay >= 0.0f) || !isfinite(c->weight_decay))
        return HS_ERR(-EINVAL, "sgd: weight decay %g must be finite and >= 0",
                      (double)c->weight_decay);
    if (c->nesterov && c->momentum == 0.0f)
        return HS_ERR(-EINVAL, "sgd: Nesterov momentum needs momentum > 0");
    return 0;
}

int hs_sgd_open(hs_sgd_t **out, hs_kernels_t *k, size_t n, const hs_sgd_config_t *cfg)
{
    *out = NULL;
    if (!k || !k->ops || !cfg) return HS_ERR(-EINVAL, "sgd: missing kernels or configuration");
    HS_TRY(check_config(cfg));
    hs_sgd_t *o = hs_calloc(1, sizeof *o, "the SGD optimizer");
    if (!o) return -ENOMEM;
    o->k = k;
    o->n = n;
    o->cfg = *cfg;
    o->cfg.nesterov = cfg->nesterov ? 1 : 0;
    if (cfg->momentum > 0.0f && n > 0) {
        void *p = NULL;
        int rc = k->ops->alloc(k, n * sizeof(float), &p);
        if (rc < 0) {
            hs_error_prefix("sgd: velocity of %zu floats", n);
            free(o);
            return rc;
        }
        o->vel = p;
        rc = k->ops->zero(k, o->vel, n * sizeof(float));
        if (rc < 0) {
            hs_sgd_close(&o);
            return rc;
        }
    }
    *out = o;
    return 0;
}

void hs_sgd_close(hs_sgd_t **opt)
{
    if (!opt || !*opt) return;
    hs_sgd_t *o = *opt;
    if (o->vel) o->k->ops->free(o->k, o->vel);
    free(o);
    *opt = NULL;
}

int hs_sgd_step(hs_sgd_t *opt, float *params, const float *grads, float lr)
{
    if (!(lr >= 0.0f) || !isfinite(lr))
        return HS_ERR(-EINVAL, "sgd: learning rate %g must be finite and >= 0", (double)lr);
    if (opt->n == 0) return 0;
    return opt->k->ops->sgd_step(opt->k, opt->n, lr, opt->cfg.momentum, opt->cfg.weight_decay,
                                 opt->cfg.nesterov, params, grads, opt->vel);
}

int hs_sgd_reset(hs_sgd_t *opt)
{
    if (!opt->vel) return 0;
    return opt->k->ops->zero(opt->k, opt->vel, opt->n * sizeof(float));
}

float *hs_sgd_velocity(const hs_sgd_t *opt, size_t *n)
{
    if (n) *n = opt->vel ? opt->n : 0;
    return opt->vel;
}

const hs_sgd_config_t *hs_sgd_config(const hs_sgd_t *opt)
{
    return &opt->cfg;
}
