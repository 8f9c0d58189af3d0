/*
 * optim/dist_stage.c — staging between the kernels' memory and the host (hearsay/algo.h,
 * hs_stage_t): images of device memory in host memory and device views of host data. Where the
 * kernels' memory is the host's, nothing is copied or allocated.
 */
#include "config.h"

#include "hearsay/algo.h"
#include "hearsay/common.h"

#include <errno.h>
#include <string.h>

static int host_is_device(const hs_kernels_t *k)
{
    return hs_kernels_is_host(k);
}

int hs_stage_image(hs_stage_t *s, hs_kernels_t *k, float *dev, size_t n, const char *what)
{
    return hs_stage_image_in(s, k, dev, n, NULL, what);
}

int hs_stage_image_in(hs_stage_t *s, hs_kernels_t *k, float *dev, size_t n, float *host,
                      const char *what)
{
    if (!s || !k) return HS_ERR(-EINVAL, "stage image: NULL stage or kernels");
    memset(s, 0, sizeof *s);
    if (!dev && n)
        return HS_ERR(-EINVAL, "stage image of %s: NULL device memory", what ? what : "a buffer");
    s->k = k;
    s->dev = dev;
    s->n = n;
    s->copies = !host_is_device(k);
    if (!s->copies) {
        s->host = dev;
        return 0;
    }
    if (host) {
        s->host = host;
        return 0;
    }
    void *h = NULL;
    HS_TRY(hs_kernels_host_alloc(k, n * sizeof(float), &h, what));
    s->host = h;
    s->own_host = 1;
    return 0;
}

int hs_stage_buffer(hs_stage_t *s, hs_kernels_t *k, size_t n, const char *what)
{
    if (!s || !k) return HS_ERR(-EINVAL, "stage buffer: NULL stage or kernels");
    memset(s, 0, sizeof *s);
    void *p = NULL;
    int rc = k->ops->alloc(k, n * sizeof(float), &p);
    if (rc == 0 && p) rc = k->ops->zero(k, p, n * sizeof(float));
    if (rc < 0) {
        if (p) k->ops->free(k, p);
        hs_error_prefix("%s (%zu floats of device memory)", what ? what : "staging buffer", n);
        return rc;
    }
    if ((rc = hs_stage_image(s, k, p, n, what)) < 0) {
        k->ops->free(k, p);
        return rc;
    }
    s->own_dev = 1;
    if (s->copies && s->host) memset(s->host, 0, n * sizeof(float));
    return 0;
}

int hs_stage_view_open(hs_stage_t *s, hs_kernels_t *k, size_t n, const char *what)
{
    if (!s || !k) return HS_ERR(-EINVAL, "stage view: NULL stage or kernels");
    memset(s, 0, sizeof *s);
    s->k = k;
    s->n = n;
    s->copies = !host_is_device(k);
    if (!s->copies || n == 0) return 0;
    void *p = NULL;
    int rc = k->ops->alloc(k, n * sizeof(float), &p);
    if (rc < 0) {
        hs_error_prefix("%s (%zu floats of device memory)", what ? what : "staging view", n);
        return rc;
    }
    s->scratch = p;
    return 0;
}

int hs_stage_pull_range(hs_stage_t *s, size_t lo, size_t n)
{
    if (lo > s->n || n > s->n - lo)
        return HS_ERR(-EINVAL, "stage: floats [%zu, %zu) are outside its %zu", lo, lo + n, s->n);
    if (!s->copies || !s->dev || n == 0) return 0;
    return s->k->ops->to_host(s->k, s->host + lo, s->dev + lo, n * sizeof(float));
}

int hs_stage_push_range(hs_stage_t *s, size_t lo, size_t n)
{
    if (lo > s->n || n > s->n - lo)
        return HS_ERR(-EINVAL, "stage: floats [%zu, %zu) are outside its %zu", lo, lo + n, s->n);
    if (!s->copies || !s->dev || n == 0) return 0;
    return s->k->ops->to_device(s->k, s->dev + lo, s->host + lo, n * sizeof(float));
}

int hs_stage_pull(hs_stage_t *s)
{
    return hs_stage_pull_range(s, 0, s->n);
}

int hs_stage_push(hs_stage_t *s)
{
    return hs_stage_push_range(s, 0, s->n);
}

int hs_stage_view(hs_stage_t *s, const float *host, size_t n, const float **dev)
{
    if (n > s->n) return HS_ERR(-EINVAL, "stage view: %zu floats, the stage holds %zu", n, s->n);
    if (!s->copies) {
        *dev = host;
        return 0;
    }
    HS_TRY(s->k->ops->to_device(s->k, s->scratch, host, n * sizeof(float)));
    *dev = s->scratch;
    return 0;
}

void hs_stage_close(hs_stage_t *s)
{
    if (!s) return;
    if (s->own_host) hs_kernels_host_free(s->k, s->host);
    if (s->scratch) s->k->ops->free(s->k, s->scratch);
    if (s->own_dev) s->k->ops->free(s->k, s->dev);
    memset(s, 0, sizeof *s);
}
