/*
 * kernels/kernels.c — backend selection: opens the CPU, emulated-device or CUDA kernel table behind
 * hs_kernels_t, parses device names, and reports whether CUDA can be used.
 *
 * Letters used in shape comments throughout kernels/:
 *   B  batch size
 *   C  input channels (images) or classes (logits)
 *   H  input height            W  input width
 *   K  output channels (filters); in gemm, the inner (reduction) dimension
 *   R  filter height           S  filter width
 *   P  output height           Q  output width
 *   M  gemm rows of op(A) and C
 *   N  gemm columns of op(B) and C; in add_bias/bias_grad, the row length
 *   n  vector length (elementwise kernels, reductions, optimizer)
 * Tensors are float32, row-major, NCHW for images.
 */
#include "config.h"

#include "hearsay/common.h"
#include "hearsay/compress.h"
#include "hearsay/kernels.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#ifndef HS_HAVE_CUDA
#define HS_HAVE_CUDA 0
#endif

#define HS_NO_CUDA_MSG "this hearsay was built without CUDA (reconfigure with --with-cuda)"

int hs_kernels_open(hs_kernels_t **out, hs_device_t dev, int device_index, int threads)
{
    if (!out) return HS_ERR(-EINVAL, "hs_kernels_open: out is NULL");
    *out = NULL;
    if (threads < 0)
        return HS_ERR(-EINVAL, "hs_kernels_open: thread count %d is negative", threads);
    if (device_index < 0)
        return HS_ERR(-EINVAL, "hs_kernels_open: device index %d is negative", device_index);
    if (dev != HS_DEV_CPU && dev != HS_DEV_CUDA && dev != HS_DEV_EMU)
        return HS_ERR(-EINVAL, "hs_kernels_open: unknown device kind %d", (int)dev);
    if (dev != HS_DEV_CUDA && device_index != 0)
        return HS_ERR(-EINVAL, "hs_kernels_open: the %s has no device index (got %d)",
                      dev == HS_DEV_CPU ? "CPU" : "emulated device", device_index);
#if !HS_HAVE_CUDA
    if (dev == HS_DEV_CUDA) return HS_ERR(-ENOSYS, HS_NO_CUDA_MSG);
#endif

    hs_kernels_t *k = hs_calloc(1, sizeof(*k), "kernel backend handle");
    if (!k) return -ENOMEM;
    k->device = dev;
    k->device_index = device_index;
    k->threads = threads;
    int rc;
    if (dev == HS_DEV_CPU) {
        rc = hs_kernels_cpu_open(k, threads);
    } else if (dev == HS_DEV_EMU) {
        rc = hs_kernels_emu_open(k, threads);
    } else {
#if HS_HAVE_CUDA
        rc = hs_kernels_cuda_open(k, device_index);
#else
        rc = HS_ERR(-ENOSYS, HS_NO_CUDA_MSG);
#endif
    }
    if (rc < 0) {
        free(k);
        return rc;
    }
    *out = k;
    return 0;
}

int hs_kernels_host_alloc(hs_kernels_t *k, size_t bytes, void **out, const char *what)
{
    if (!out) return HS_ERR(-EINVAL, "host alloc: out is NULL");
    *out = NULL;
    if (bytes == 0) return 0;
    if (k && HS_KOP_HAS(k, host_alloc)) {
        int rc = k->ops->host_alloc(k, bytes, out);
        if (rc < 0)
            hs_error_prefix("%s (%zu bytes of staging memory)", what ? what : "buffer", bytes);
        return rc;
    }
    void *p = NULL;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, rounded) != 0)
        return HS_ERR(-ENOMEM, "out of memory: %zu bytes for %s", bytes, what ? what : "buffer");
    *out = p;
    return 0;
}

int hs_kernels_is_host(const hs_kernels_t *k)
{
    return k && k->device == HS_DEV_CPU;
}

void hs_kernels_host_free(hs_kernels_t *k, void *p)
{
    if (!p) return;
    if (k && HS_KOP_HAS(k, host_free))
        k->ops->host_free(k, p);
    else
        free(p);
}

int hs_kernels_set_precision(hs_kernels_t *k, hs_precision_t p, int tf32)
{
    if (!k) return HS_ERR(-EINVAL, "set precision: no kernel backend");
    if (!hs_precision_name(p))
        return HS_ERR(-EINVAL, "set precision: unknown precision %d", (int)p);
    if (tf32 != 0 && tf32 != 1) return HS_ERR(-EINVAL, "set precision: tf32 must be 0 or 1");
    if (tf32 && p != HS_PREC_FP32)
        return HS_ERR(-EINVAL,
                      "TF32 applies to fp32 products only (the precision is %s, whose operands "
                      "TF32 already holds exactly)",
                      hs_precision_name(p));
    k->precision = p;
    k->tf32 = tf32;
    return 0;
}

const char *hs_precision_name(hs_precision_t p)
{
    switch (p) {
    case HS_PREC_FP32:
        return "fp32";
    case HS_PREC_BF16:
        return "bf16";
    case HS_PREC_FP16:
        return "fp16";
    }
    return NULL;
}

int hs_precision_parse(const char *s, hs_precision_t *p)
{
    static const hs_precision_t all[] = {HS_PREC_FP32, HS_PREC_BF16, HS_PREC_FP16};
    for (size_t i = 0; s && i < sizeof all / sizeof all[0]; i++)
        if (strcmp(s, hs_precision_name(all[i])) == 0) {
            *p = all[i];
            return 0;
        }
    return HS_ERR(-EINVAL, "unknown precision '%s' (expected fp32, bf16 or fp16)",
                  s ? s : "(null)");
}

static inline uint32_t prec_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float prec_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Keep the top 32 - drop bits of a finite float's pattern, nearest even (a carry into the
 * exponent is the right result, up to inf). */
static inline float prec_keep(float x, int drop)
{
    uint32_t u = prec_bits(x);
    if ((u & 0x7f800000u) == 0x7f800000u) return x; /* inf, nan */
    uint32_t half = (1u << (drop - 1)) - 1u, lsb = (u >> drop) & 1u;
    u = (u + half + lsb) & ~((1u << drop) - 1u);
    return prec_float(u);
}

/* IEEE half's values: 10-bit mantissas from 2^-14 up, inf from 65520 (the tie above 65504
 * rounds to even, which is 2^16), below 2^-14 multiples of 2^-24 (subnormals). */
static inline float prec_fp16(float x)
{
    uint32_t u = prec_bits(x), sign = u & 0x80000000u, a = u ^ sign;
    if (a >= 0x7f800000u) return x;                              /* inf, nan */
    if (a >= 0x477ff000u) return prec_float(sign | 0x7f800000u); /* >= 65520: inf */
    if (a < 0x38800000u) {                                       /* below 2^-14 */
        float t = prec_float(a) + 0.5f; /* the ulp of [0.5, 1) is 2^-24: nearest even */
        return prec_float(sign | prec_bits(t - 0.5f));
    }
    return prec_keep(x, 13);
}

float hs_round_to_precision(float x, hs_precision_t p, int tf32)
{
    switch (p) {
    case HS_PREC_BF16:
        return prec_keep(x, 16);
    case HS_PREC_FP16:
        return prec_fp16(x);
    default:
        return tf32 ? prec_keep(x, 13) : x;
    }
}

/* bf16 and fp16 through the compressors' vectorised encoders (optim/compress.c: F16C for
 * fp16 where the CPU has it), in blocks; the same values as hs_round_to_precision
 * (tests/test_precision.c checks both against each other). */
static void round_into(hs_precision_t p, int tf32, const float *restrict x, float *restrict y,
                       size_t n)
{
    if (p == HS_PREC_BF16 || p == HS_PREC_FP16) {
        uint16_t h[1024];
        for (size_t i = 0; i < n; i += 1024) {
            size_t m = n - i < 1024 ? n - i : 1024;
            hs_half_encode(p == HS_PREC_BF16, x + i, h, m);
            hs_half_decode(p == HS_PREC_BF16, h, y + i, m, 1.0f, 0);
        }
        return;
    }
    for (size_t i = 0; i < n; i++) y[i] = tf32 ? prec_keep(x[i], 13) : x[i];
}

int hs_kernels_round_operands(hs_kernels_t *k, int count, const float *const *src, const size_t *n,
                              const float **out)
{
    int plain = k->precision == HS_PREC_FP32 && !k->tf32;
    size_t total = 0;
    for (int i = 0; i < count; i++) {
        out[i] = src[i];
        if (src[i]) total += (n[i] + 15) & ~(size_t)15; /* each copy 64-byte aligned */
    }
    if (plain || total == 0) return 0;
    if (total > k->round_floats) {
        float *b = NULL;
        if (posix_memalign((void **)&b, 64, total * sizeof(float)) != 0)
            return HS_ERR(-ENOMEM, "out of memory: %zu bytes for %s operands",
                          total * sizeof(float), hs_precision_name(k->precision));
        free(k->round_buf);
        k->round_buf = b;
        k->round_floats = total;
    }
    size_t at = 0;
    for (int i = 0; i < count; i++) {
        if (!src[i]) continue;
        round_into(k->precision, k->tf32, src[i], k->round_buf + at, n[i]);
        out[i] = k->round_buf + at;
        at += (n[i] + 15) & ~(size_t)15;
    }
    return 0;
}

void hs_kernels_close(hs_kernels_t **kp)
{
    if (!kp || !*kp) return;
    hs_kernels_t *k = *kp;
    free(k->round_buf);
    if (k->device == HS_DEV_CPU) {
        hs_kernels_cpu_close(k);
    } else if (k->device == HS_DEV_EMU) {
        hs_kernels_emu_close(k);
    } else {
#if HS_HAVE_CUDA
        hs_kernels_cuda_close(k);
#endif
    }
    free(k);
    *kp = NULL;
}

int hs_device_parse(const char *s, hs_device_t *dev, int *index)
{
    if (!s) return HS_ERR(-EINVAL, "device name is missing (expected cpu, emu, cuda or cuda:N)");
    hs_device_t d;
    long idx = 0;
    if (strcmp(s, "cpu") == 0) {
        d = HS_DEV_CPU;
    } else if (strcmp(s, "emu") == 0) {
        d = HS_DEV_EMU;
    } else if (strcmp(s, "cuda") == 0) {
        d = HS_DEV_CUDA;
    } else if (strncmp(s, "cuda:", 5) == 0) {
        d = HS_DEV_CUDA;
        /* Digits only: no sign, no spaces (hs_parse_long would accept "+1" or " 1"). */
        const char *num = s + 5;
        if (*num == '\0' || strspn(num, "0123456789") != strlen(num) || strlen(num) > 6)
            return HS_ERR(-EINVAL, "bad device '%s': expected cpu, cuda or cuda:N with N >= 0", s);
        idx = strtol(num, NULL, 10);
    } else {
        return HS_ERR(-EINVAL, "bad device '%s': expected cpu, emu, cuda or cuda:N", s);
    }
    if (dev) *dev = d;
    if (index) *index = (int)idx;
    return 0;
}

int hs_device_select(const char *s, int local_rank, hs_device_t *dev, int *index)
{
    hs_device_t d;
    int idx, count = 0;
    HS_TRY(hs_device_parse(s, &d, &idx));
    if (d == HS_DEV_CUDA) {
#if HS_HAVE_CUDA
        HS_TRY(hs_kernels_cuda_probe(&count));
#else
        return HS_ERR(-ENOSYS, HS_NO_CUDA_MSG);
#endif
        if (strcmp(s, "cuda") == 0) {
            idx = (local_rank < 0 ? 0 : local_rank) % count;
        } else if (idx >= count) {
            return HS_ERR(-ENODEV, "--device %s: %d CUDA device%s visible (cuda:0 to cuda:%d)", s,
                          count, count == 1 ? " is" : "s are", count - 1);
        }
    }
    if (dev) *dev = d;
    if (index) *index = idx;
    return 0;
}

int hs_cuda_available(void)
{
#if HS_HAVE_CUDA
    return hs_kernels_cuda_device_count() > 0;
#else
    return 0;
#endif
}
