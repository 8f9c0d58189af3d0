/*
 * optim/compress.c — the compressors of hearsay/compress.h: fp16, bf16, int8 with a scale per
 * chunk, top-k and random-k. Host memory, one core, vectorised: the elementwise loops run in
 * fixed blocks of 16 (which GCC vectorises at -O2) and are compiled for AVX2 and the baseline
 * (target_clones, as in kernels/cpu); fp16 uses the F16C conversions where the CPU has them.
 *
 * Top-k does not sort: it estimates the magnitude threshold of the k-th largest entry from a
 * seeded random sample of the vector (Deep Gradient Compression, Lin et al. 2018, section 3),
 * collects the entries above a slightly lower threshold in one streaming pass (blocks of 16
 * with no candidate are skipped after one vector compare), and keeps the exact k largest of
 * those candidates. When the sample overestimated the threshold fewer than k entries are
 * sent (m <= k is on the wire); the error-feedback algorithms carry what was not sent.
 */
#include "hearsay/compress.h"
#include "hearsay/common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define CQ_X86 1
#else
#define CQ_X86 0
#endif

#if CQ_X86 && defined(__linux__)
#if __GNUC__ >= 12
#define CQ_SIMD __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define CQ_SIMD __attribute__((target_clones("avx2", "default")))
#endif
#else
#define CQ_SIMD
#endif

/* i in [0, n): blocks of 16 (vectorised at -O2), then the tail. Touch only index i. */
#define CQ_FOR(i, n, ...)                                                                          \
    do {                                                                                           \
        size_t cq_n_ = (n), cq_b_ = 0;                                                             \
        for (; cq_b_ + 16 <= cq_n_; cq_b_ += 16)                                                   \
            for (size_t i = cq_b_; i < cq_b_ + 16; i++) {                                          \
                __VA_ARGS__;                                                                       \
            }                                                                                      \
        for (size_t i = cq_b_; i < cq_n_; i++) {                                                   \
            __VA_ARGS__;                                                                           \
        }                                                                                          \
    } while (0)

#define CQ_DEFAULT_CHUNK 512u
#define CQ_SAMPLE_MIN    4096u /* top-k: sampled magnitudes (and at least 100 n / k) */

struct hs_compressor {
    hs_compress_spec_t s;
    size_t n, k, max_bytes;
    uint64_t seed, round; /* the random stream: (seed, round, index) */
    int f16c;             /* the CPU converts fp16 in hardware */
    uint32_t *cand;       /* (n) top-k candidates */
    float *val;           /* (n) their values */
    uint32_t *mag;        /* (n) their magnitudes (abs bits) */
    int avx2;             /* the CPU has AVX2 */
    uint32_t *sample;     /* (sample_n) top-k sampled magnitudes (abs bits) */
    size_t sample_n;
};

/* ---- spec ------------------------------------------------------------------------------- */

const char *hs_compress_help(void)
{
    return "none | fp16 | bf16 | int8[:nearest|:stochastic][:chunk=C] (default nearest, C 512) |"
           " topk:K | randk:K (K a count or a percentage of the model, e.g. topk:1%)";
}

static int parse_k(const char *arg, const char *spec, hs_compress_spec_t *s)
{
    if (!arg || !*arg)
        return HS_ERR(-EINVAL, "--compress %s: give k (a count or a percentage, e.g. %s:1%%)", spec,
                      spec);
    size_t len = strlen(arg);
    char *end = NULL;
    if (arg[len - 1] == '%') {
        double p = strtod(arg, &end);
        if (end != arg + len - 1 || !(p > 0) || p > 100)
            return HS_ERR(
                -EINVAL, "--compress %s: k must be a percentage in (0, 100] or a count >= 1", spec);
        s->k_frac = p / 100.0;
        return 0;
    }
    if (arg[0] == '-') return HS_ERR(-EINVAL, "--compress %s: k must be at least 1", spec);
    unsigned long long v = strtoull(arg, &end, 10);
    if (*end || end == arg)
        return HS_ERR(-EINVAL, "--compress %s: k '%s' is not a count or a percentage", spec, arg);
    if (v == 0) return HS_ERR(-EINVAL, "--compress %s: k must be at least 1", spec);
    s->k_abs = v;
    return 0;
}

int hs_compress_parse(const char *spec, hs_compress_spec_t *s)
{
    *s = (hs_compress_spec_t){.kind = HS_COMPRESS_NONE, .chunk = CQ_DEFAULT_CHUNK};
    if (!spec || !*spec || !strcmp(spec, "none")) {
        snprintf(s->text, sizeof s->text, "none");
        return 0;
    }
    if (strlen(spec) >= sizeof s->text)
        return HS_ERR(-EINVAL, "--compress %.40s...: too long", spec);
    snprintf(s->text, sizeof s->text, "%s", spec);
    char buf[64];
    snprintf(buf, sizeof buf, "%s", spec);
    char *arg = strchr(buf, ':');
    if (arg) *arg++ = 0;
    if (!strcmp(buf, "fp16") || !strcmp(buf, "bf16")) {
        s->kind = buf[0] == 'f' ? HS_COMPRESS_FP16 : HS_COMPRESS_BF16;
        if (arg) return HS_ERR(-EINVAL, "--compress %s: %s takes no options", spec, buf);
        return 0;
    }
    if (!strcmp(buf, "int8")) {
        s->kind = HS_COMPRESS_INT8;
        for (char *tok = arg ? strtok(arg, ":") : NULL; tok; tok = strtok(NULL, ":")) {
            if (!strcmp(tok, "nearest"))
                s->stochastic = 0;
            else if (!strcmp(tok, "stochastic"))
                s->stochastic = 1;
            else if (!strncmp(tok, "chunk=", 6)) {
                long c;
                if (hs_parse_long(tok + 6, 16, 1 << 24, "int8 chunk=C", &c) < 0) {
                    hs_error_prefix("--compress %s", spec);
                    return -EINVAL;
                }
                s->chunk = (uint32_t)c;
            } else
                return HS_ERR(-EINVAL,
                              "--compress %s: unknown int8 option '%s' (nearest, stochastic, "
                              "chunk=C)",
                              spec, tok);
        }
        return 0;
    }
    if (!strcmp(buf, "topk") || !strcmp(buf, "randk")) {
        s->kind = buf[0] == 't' ? HS_COMPRESS_TOPK : HS_COMPRESS_RANDK;
        return parse_k(arg, buf, s);
    }
    return HS_ERR(-EINVAL, "unknown compressor '%s' in --compress %s (known: %s)", buf, spec,
                  hs_compress_help());
}

int hs_compress_k(const hs_compress_spec_t *s, size_t n, size_t *k)
{
    if (s->kind != HS_COMPRESS_TOPK && s->kind != HS_COMPRESS_RANDK) {
        *k = n;
        return 0;
    }
    double kk = s->k_frac > 0 ? ceil(s->k_frac * (double)n) : (double)s->k_abs;
    if (kk < 1)
        return HS_ERR(-EINVAL, "--compress %s: k is %.0f for a model of %zu parameters", s->text,
                      kk, n);
    if (kk > (double)n)
        return HS_ERR(-EINVAL, "--compress %s: k = %.0f is larger than the model (%zu parameters)",
                      s->text, kk, n);
    if (kk > 4294967295.0)
        return HS_ERR(-EINVAL, "--compress %s: k = %.0f does not fit 32-bit indices", s->text, kk);
    *k = (size_t)kk;
    return 0;
}

size_t hs_compress_max_bytes(const hs_compress_spec_t *s, size_t n)
{
    size_t k = n;
    switch (s->kind) {
    case HS_COMPRESS_NONE:
        return n * 4;
    case HS_COMPRESS_FP16:
    case HS_COMPRESS_BF16:
        return n * 2;
    case HS_COMPRESS_INT8:
        return (n + s->chunk - 1) / s->chunk * 4 + n;
    case HS_COMPRESS_TOPK:
    case HS_COMPRESS_RANDK:
        if (hs_compress_k(s, n, &k) < 0) k = n;
        return 4 + 8 * k;
    }
    return n * 4;
}

int hs_compress_unbiased(const hs_compress_spec_t *s)
{
    return s->kind == HS_COMPRESS_NONE || (s->kind == HS_COMPRESS_INT8 && s->stochastic);
}

int hs_compress_check_algo(const char *spec, const char *algo, int takes)
{
    hs_compress_spec_t s;
    HS_TRY(hs_compress_parse(spec, &s));
    if (s.kind == HS_COMPRESS_NONE || takes) return 0;
    static const struct {
        const char *algo, *why;
    } reasons[] = {
        {"local", "it does not communicate"},
        {"dpsgd",
         "it averages the neighbours' models as received, so every compression error would "
         "stay in the models with nothing to correct it (use --algo choco: D-PSGD with public "
         "copies and error feedback, Koloskova et al. 2019)"},
        {"sgp", "its shares are mixed as received, so rounding them would break the "
                "conservation of mass; use --algo qsgp (compressed push-sum with public copies and "
                "an exact weight, on a static graph)"},
        {"osgp", "its shares are mixed as received, so rounding them would break the "
                 "conservation of mass; use --algo qsgp (compressed push-sum with public copies "
                 "and an exact weight, on a static graph)"},
    };
    const char *why = "it has no error feedback for what a compressor drops (use choco, qsgp "
                      "or allreduce)";
    for (size_t i = 0; i < HS_ARRAY_LEN(reasons); i++)
        if (!strcmp(reasons[i].algo, algo)) why = reasons[i].why;
    return HS_ERR(-EINVAL, "--compress %s: --algo %s cannot use a compressor: %s", s.text, algo,
                  why);
}

/* ---- random stream ---------------------------------------------------------------------- */

/* A counter-based hash (lowbias32): 32-bit multiplies and shifts, which vectorise. */
static inline uint32_t cq_hash(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

/* The key of this call of the stream: a different 32-bit key per (seed, round). */
static uint32_t cq_key(hs_compressor_t *c)
{
    uint64_t r = c->round++;
    uint64_t z = c->seed + 0x9e3779b97f4a7c15ull * (r + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t)(z ^ (z >> 31));
}

static inline uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- fp16 ------------------------------------------------------------------------------- */

/* float -> half, round to nearest even (F. Giesen's float_to_half_fast3_rtne). */
static inline uint16_t f2h(float f)
{
    uint32_t x = f2u(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    uint16_t o;
    if (x >= 0x47800000u) /* >= 65536: inf, or NaN */
        o = x > 0x7f800000u ? 0x7e00u : 0x7c00u;
    else if (x < 0x38800000u) /* a half subnormal or zero: let the FPU round */
        o = (uint16_t)(f2u(u2f(x) + 0.5f) - 0x3f000000u);
    else {
        uint32_t odd = (x >> 13) & 1u;
        x += 0xc8000fffu + odd; /* rebias the exponent, round */
        o = (uint16_t)(x >> 13);
    }
    return (uint16_t)(o | sign);
}

/* half -> float (exact). */
static inline float h2f(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return u2f(sign | 0x7f800000u | (m << 13));
    if (e == 0) return u2f(sign | f2u((float)m * 0x1p-24f));
    return u2f(sign | ((e + 112u) << 23) | (m << 13));
}

#if CQ_X86
__attribute__((target("avx2,f16c"))) static void fp16_enc_f16c(const float *x, uint16_t *y,
                                                               size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i a = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
        __m128i b = _mm256_cvtps_ph(_mm256_loadu_ps(x + i + 8), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128((__m128i *)(y + i), a);
        _mm_storeu_si128((__m128i *)(y + i + 8), b);
    }
    for (; i < n; i++) y[i] = f2h(x[i]);
}

__attribute__((target("avx2,f16c"))) static void fp16_dec_f16c(const uint16_t *x, float *y,
                                                               size_t n, float alpha, int add)
{
    size_t i = 0;
    __m256 va = _mm256_set1_ps(alpha);
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i)));
        if (add) v = _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(va, v));
        _mm256_storeu_ps(y + i, v);
    }
    for (; i < n; i++) y[i] = add ? y[i] + alpha * h2f(x[i]) : h2f(x[i]);
}
#endif

static void fp16_enc(const hs_compressor_t *c, const float *x, uint16_t *y, size_t n)
{
#if CQ_X86
    if (c->f16c) {
        fp16_enc_f16c(x, y, n);
        return;
    }
#endif
    (void)c;
    for (size_t i = 0; i < n; i++) y[i] = f2h(x[i]);
}

static void fp16_dec(const hs_compressor_t *c, const uint16_t *x, float *y, size_t n, float alpha,
                     int add)
{
#if CQ_X86
    if (c->f16c) {
        fp16_dec_f16c(x, y, n, alpha, add);
        return;
    }
#endif
    (void)c;
    for (size_t i = 0; i < n; i++) y[i] = add ? y[i] + alpha * h2f(x[i]) : h2f(x[i]);
}

/* ---- bf16 ------------------------------------------------------------------------------- */

CQ_SIMD static void bf16_enc(const float *restrict x, uint16_t *restrict y, size_t n)
{
    const uint32_t *u = (const uint32_t *)x;
    CQ_FOR(i, n, {
        uint32_t v = u[i];
        uint32_t r = (v + 0x7fffu + ((v >> 16) & 1u)) >> 16;
        /* a NaN stays a (quiet) NaN instead of rounding into inf */
        y[i] = (uint16_t)((v & 0x7fffffffu) > 0x7f800000u ? ((v >> 16) | 0x40u) : r);
    });
}

CQ_SIMD static void bf16_dec(const uint16_t *restrict x, float *restrict y, size_t n)
{
    uint32_t *u = (uint32_t *)y;
    CQ_FOR(i, n, u[i] = (uint32_t)x[i] << 16);
}

CQ_SIMD static void bf16_dec_add(const uint16_t *restrict x, float *restrict y, size_t n,
                                 float alpha)
{
    CQ_FOR(i, n, y[i] += alpha * u2f((uint32_t)x[i] << 16));
}

/* ---- int8 ------------------------------------------------------------------------------- */

/* Largest |x| of a chunk as float bits (for finite floats the order of the abs bits is the
 * order of the magnitudes; an unsigned max reduction vectorises). */
CQ_SIMD static uint32_t absmax_bits(const float *restrict x, size_t n)
{
    const uint32_t *u = (const uint32_t *)x;
    uint32_t m = 0;
    CQ_FOR(i, n, {
        uint32_t a = u[i] & 0x7fffffffu;
        m = a > m ? a : m;
    });
    return m;
}

CQ_SIMD static void int8_nearest(const float *restrict x, int8_t *restrict q, size_t n, float inv)
{
    /* x * inv in [-127, 127]; + 128.5 is positive, so truncation rounds (half up) */
    CQ_FOR(i, n, q[i] = (int8_t)((int)(x[i] * inv + 128.5f) - 128));
}

CQ_SIMD static void int8_stoch(const float *restrict x, int8_t *restrict q, size_t n, float inv,
                               uint32_t key, uint32_t base)
{
    /* floor(x * inv + u), u uniform in [0, 1): unbiased. u comes from 16 xorshift32 streams
     * (one per lane of a block of 16, seeded from the call's key and the chunk's offset), which
     * vectorise without 32-bit multiplies. */
    uint32_t st[16];
    for (uint32_t l = 0; l < 16; l++) st[l] = cq_hash((base + l) * 0x9e3779b9u ^ key) | 1u;
    size_t b = 0;
    for (; b + 16 <= n; b += 16)
        for (uint32_t l = 0; l < 16; l++) {
            uint32_t v = st[l];
            v ^= v << 13;
            v ^= v >> 17;
            v ^= v << 5;
            st[l] = v;
            float u = (float)(int32_t)(v >> 8) * 0x1p-24f;
            q[b + l] = (int8_t)((int)(x[b + l] * inv + u + 128.0f) - 128);
        }
    for (uint32_t l = 0; b < n; b++, l++) {
        uint32_t v = st[l];
        v ^= v << 13;
        v ^= v >> 17;
        v ^= v << 5;
        float u = (float)(int32_t)(v >> 8) * 0x1p-24f;
        q[b] = (int8_t)((int)(x[b] * inv + u + 128.0f) - 128);
    }
}

CQ_SIMD static void f32_axpy(const float *restrict x, float *restrict y, size_t n, float alpha)
{
    CQ_FOR(i, n, y[i] += alpha * x[i]);
}

CQ_SIMD static void int8_dec(const int8_t *restrict q, float *restrict y, size_t n, float scale)
{
    CQ_FOR(i, n, y[i] = (float)q[i] * scale);
}

CQ_SIMD static void int8_dec_add(const int8_t *restrict q, float *restrict y, size_t n, float scale)
{
    CQ_FOR(i, n, y[i] += (float)q[i] * scale);
}

static int int8_enc(hs_compressor_t *c, const float *x, unsigned char *out)
{
    const size_t n = c->n, C = c->s.chunk, nch = (n + C - 1) / C;
    float *scales = (float *)out;
    int8_t *q = (int8_t *)(out + nch * 4);
    uint32_t key = c->s.stochastic ? cq_key(c) : 0;
    for (size_t ch = 0; ch < nch; ch++) {
        size_t off = ch * C, len = HS_MIN(C, n - off);
        uint32_t mb = absmax_bits(x + off, len);
        if (mb >= 0x7f800000u)
            return HS_ERR(-ERANGE, "--compress %s: a non-finite value near element %zu", c->s.text,
                          off);
        float amax = u2f(mb);
        float scale = amax / 127.0f;
        float inv = amax > 0 ? 127.0f / amax : 0.0f;
        if (!(inv < INFINITY)) inv = 0, scale = 0; /* subnormal maximum: send zeros */
        scales[ch] = scale;
        if (c->s.stochastic)
            int8_stoch(x + off, q + off, len, inv, key, (uint32_t)off);
        else
            int8_nearest(x + off, q + off, len, inv);
    }
    return 0;
}

/* ---- sparse ----------------------------------------------------------------------------- */

/* The r-th smallest (0-based, r < m) of v[0..m) (reorders v): quickselect with a three-way
 * partition and a hashed pivot. */
static uint32_t select_u32(uint32_t *v, size_t m, size_t r)
{
    size_t lo = 0, hi = m; /* [lo, hi) holds the answer */
    uint32_t st = 0x2545f491u;
    while (hi - lo > 1) {
        st = cq_hash(st + (uint32_t)hi);
        uint32_t p = v[lo + st % (hi - lo)];
        size_t lt = lo, i = lo, gt = hi; /* [lo, lt) < p, [lt, i) == p, [gt, hi) > p */
        while (i < gt) {
            uint32_t t = v[i];
            if (t < p) {
                v[i++] = v[lt];
                v[lt++] = t;
            } else if (t > p) {
                v[i] = v[--gt];
                v[gt] = t;
            } else
                i++;
        }
        if (r < lt)
            hi = lt;
        else if (r >= gt)
            lo = gt;
        else
            return p;
    }
    return v[lo];
}

/* Indices i of x with abs bits >= t (t >= 1) into idx and their values into val (in order);
 * returns their count. One streaming pass: a block of 16 without a candidate costs one vector
 * compare; with one, its candidates are read off the compare's bit mask. */
static size_t collect_above_c(const float *restrict x, size_t n, uint32_t t, uint32_t *restrict idx,
                              float *restrict val)
{
    const uint32_t *u = (const uint32_t *)x;
    size_t m = 0, b = 0;
    for (; b + 16 <= n; b += 16) {
        uint32_t any = 0;
        for (size_t i = b; i < b + 16; i++) any |= (u[i] & 0x7fffffffu) >= t;
        if (!any) continue;
        for (size_t i = b; i < b + 16; i++)
            if ((u[i] & 0x7fffffffu) >= t) idx[m] = (uint32_t)i, val[m++] = x[i];
    }
    for (size_t i = b; i < n; i++)
        if ((u[i] & 0x7fffffffu) >= t) idx[m] = (uint32_t)i, val[m++] = x[i];
    return m;
}

#if CQ_X86
__attribute__((target("avx2"))) static size_t collect_above_avx2(const float *restrict x, size_t n,
                                                                 uint32_t t, uint32_t *restrict idx,
                                                                 float *restrict val)
{
    const __m256i absm = _mm256_set1_epi32(0x7fffffff);
    const __m256i tv = _mm256_set1_epi32((int)(t - 1)); /* both sides in [0, 2^31): signed */
    size_t m = 0, b = 0;
    for (; b + 16 <= n; b += 16) {
        __m256i a0 = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + b)), absm);
        __m256i a1 = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + b + 8)), absm);
        unsigned mask =
            (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(a0, tv))) |
            (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(a1, tv))) << 8;
        while (mask) {
            unsigned j = (unsigned)__builtin_ctz(mask);
            mask &= mask - 1;
            idx[m] = (uint32_t)(b + j);
            val[m++] = x[b + j];
        }
    }
    size_t r = collect_above_c(x + b, n - b, t, idx + m, val + m); /* the tail (< 16) */
    for (size_t i = 0; i < r; i++) idx[m + i] += (uint32_t)b;
    return m + r;
}
#endif

static int topk_enc(hs_compressor_t *c, const float *x, unsigned char *out, size_t *bytes)
{
    const size_t n = c->n, k = c->k;
    const uint32_t *u = (const uint32_t *)x;
    uint32_t thr;
    if (k == n) {
        thr = 0;
    } else if (c->sample_n >= n) { /* small vector: the exact threshold */
        for (size_t i = 0; i < n; i++) c->sample[i] = u[i] & 0x7fffffffu;
        thr = select_u32(c->sample, n, n - k);
    } else {
        uint32_t key = cq_key(c);
        size_t m = c->sample_n;
        for (size_t i = 0; i < m; i++)
            c->sample[i] = u[cq_hash((uint32_t)i * 0x9e3779b9u ^ key) % n] & 0x7fffffffu;
        /* aim at 1.3 k candidates, so that the exact trim below usually has k to keep */
        double want = HS_MIN((double)n, 1.3 * (double)k + 8);
        size_t above = (size_t)ceil((double)m * want / (double)n);
        above = HS_MAX((size_t)1, HS_MIN(above, m));
        thr = select_u32(c->sample, m, m - above);
    }
    if (thr == 0) thr = 1; /* never send zeros */
    uint32_t *cand = c->cand;
    float *val = c->val;
#if CQ_X86
    size_t m =
        c->avx2 ? collect_above_avx2(x, n, thr, cand, val) : collect_above_c(x, n, thr, cand, val);
#else
    size_t m = collect_above_c(x, n, thr, cand, val);
#endif
    if (m > k) { /* keep the k largest: threshold among the candidates, ties in index order */
        const uint32_t *vu = (const uint32_t *)val;
        uint32_t *mag = c->mag;
        for (size_t i = 0; i < m; i++) mag[i] = vu[i] & 0x7fffffffu;
        uint32_t t2 = select_u32(mag, m, m - k);
        size_t above = 0;
        for (size_t i = 0; i < m; i++) above += (vu[i] & 0x7fffffffu) > t2;
        size_t ties = k - above, w = 0;
        for (size_t i = 0; i < m; i++) {
            uint32_t a = vu[i] & 0x7fffffffu;
            if (a > t2 || (a == t2 && ties && ties--)) cand[w] = cand[i], val[w++] = val[i];
        }
        m = w;
    }
    uint32_t m32 = (uint32_t)m;
    memcpy(out, &m32, 4);
    memcpy(out + 4, cand, m * 4);
    memcpy(out + 4 + 4 * m, val, m * 4);
    *bytes = 4 + 8 * m;
    return 0;
}

static void randk_enc(hs_compressor_t *c, const float *x, unsigned char *out, size_t *bytes)
{
    const size_t n = c->n, k = c->k;
    uint32_t key = cq_key(c);
    uint32_t k32 = (uint32_t)k;
    memcpy(out, &k32, 4);
    uint32_t *oi = (uint32_t *)(out + 4);
    float *ov = (float *)(out + 4 + 4 * k);
    /* stratum j = [j n / k, (j + 1) n / k): one index in each, distinct and increasing */
    for (size_t j = 0; j < k; j++) {
        size_t lo = (size_t)((unsigned __int128)j * n / k);
        size_t hi = (size_t)((unsigned __int128)(j + 1) * n / k);
        size_t i = lo + cq_hash((uint32_t)j * 0x9e3779b9u ^ key) % (hi - lo);
        oi[j] = (uint32_t)i;
        ov[j] = x[i];
    }
    *bytes = 4 + 8 * k;
}

static int sparse_check(const hs_compressor_t *c, const unsigned char *in, size_t bytes,
                        uint32_t *m)
{
    if (bytes < 4) return HS_ERR(-EPROTO, "%s: %zu bytes, no count", c->s.text, bytes);
    memcpy(m, in, 4);
    if (*m > c->k || bytes != 4 + 8 * (size_t)*m)
        return HS_ERR(-EPROTO, "%s: %u entries in %zu bytes (k = %zu)", c->s.text, *m, bytes, c->k);
    const uint32_t *idx = (const uint32_t *)(in + 4);
    for (uint32_t i = 0; i < *m; i++)
        if (idx[i] >= c->n || (i && idx[i] <= idx[i - 1]))
            return HS_ERR(-EPROTO, "%s: index %u at entry %u is out of order or range", c->s.text,
                          idx[i], i);
    return 0;
}

/* ---- the object ------------------------------------------------------------------------- */

int hs_compressor_create(hs_compressor_t **out, const char *spec, size_t n, uint64_t seed)
{
    *out = NULL;
    hs_compress_spec_t s;
    HS_TRY(hs_compress_parse(spec, &s));
    if (n == 0) return HS_ERR(-EINVAL, "--compress %s: an empty vector", s.text);
    if (n > UINT32_MAX && (s.kind == HS_COMPRESS_TOPK || s.kind == HS_COMPRESS_RANDK))
        return HS_ERR(-EINVAL, "--compress %s: %zu floats do not fit 32-bit indices", s.text, n);
    size_t k;
    HS_TRY(hs_compress_k(&s, n, &k));
    hs_compressor_t *c = hs_calloc(1, sizeof *c, "compressor");
    if (!c) return -ENOMEM;
    c->s = s;
    c->n = n;
    c->k = k;
    c->seed = seed;
    c->max_bytes = hs_compress_max_bytes(&s, n);
#if CQ_X86
    __builtin_cpu_init();
    c->avx2 = __builtin_cpu_supports("avx2");
    c->f16c = __builtin_cpu_supports("f16c") && c->avx2;
#endif
    if (s.kind == HS_COMPRESS_TOPK) {
        size_t want = HS_MAX((size_t)CQ_SAMPLE_MIN, (size_t)(100.0 * (double)n / (double)k));
        c->sample_n = HS_MIN(n, want);
        c->cand = hs_malloc(n * sizeof *c->cand, "top-k candidates");
        c->mag = hs_malloc(n * sizeof *c->mag, "top-k magnitudes");
        c->val = hs_malloc(n * sizeof *c->val, "top-k values");
        c->sample = hs_malloc(HS_MAX(c->sample_n, (size_t)1) * sizeof *c->sample, "top-k sample");
        if (!c->cand || !c->mag || !c->val || !c->sample) {
            hs_compressor_destroy(&c);
            return -ENOMEM;
        }
    }
    *out = c;
    return 0;
}

void hs_compressor_destroy(hs_compressor_t **c)
{
    if (!c || !*c) return;
    free((*c)->cand);
    free((*c)->mag);
    free((*c)->val);
    free((*c)->sample);
    free(*c);
    *c = NULL;
}

const hs_compress_spec_t *hs_compressor_spec(const hs_compressor_t *c)
{
    return &c->s;
}

size_t hs_compressor_max_bytes(const hs_compressor_t *c)
{
    return c->max_bytes;
}

size_t hs_compressor_k(const hs_compressor_t *c)
{
    return c->k;
}

int hs_compress(hs_compressor_t *c, const float *x, void *out, size_t *bytes)
{
    const size_t n = c->n;
    switch (c->s.kind) {
    case HS_COMPRESS_NONE:
        memcpy(out, x, n * 4);
        break;
    case HS_COMPRESS_FP16:
        fp16_enc(c, x, (uint16_t *)out, n);
        break;
    case HS_COMPRESS_BF16:
        bf16_enc(x, (uint16_t *)out, n);
        break;
    case HS_COMPRESS_INT8:
        HS_TRY(int8_enc(c, x, (unsigned char *)out));
        break;
    case HS_COMPRESS_TOPK:
        return topk_enc(c, x, (unsigned char *)out, bytes);
    case HS_COMPRESS_RANDK:
        randk_enc(c, x, (unsigned char *)out, bytes);
        return 0;
    }
    *bytes = c->max_bytes;
    return 0;
}

static int dec(const hs_compressor_t *c, const void *in_, size_t bytes, float alpha, int add,
               float *y)
{
    const unsigned char *in = in_;
    const size_t n = c->n;
    if (c->s.kind != HS_COMPRESS_TOPK && c->s.kind != HS_COMPRESS_RANDK && bytes != c->max_bytes)
        return HS_ERR(-EPROTO, "%s: %zu bytes for %zu floats (expected %zu)", c->s.text, bytes, n,
                      c->max_bytes);
    switch (c->s.kind) {
    case HS_COMPRESS_NONE: {
        const float *x = (const float *)in;
        if (!add)
            memcpy(y, x, n * 4);
        else
            f32_axpy(x, y, n, alpha);
        return 0;
    }
    case HS_COMPRESS_FP16:
        fp16_dec(c, (const uint16_t *)in, y, n, alpha, add);
        return 0;
    case HS_COMPRESS_BF16:
        if (add)
            bf16_dec_add((const uint16_t *)in, y, n, alpha);
        else
            bf16_dec((const uint16_t *)in, y, n);
        return 0;
    case HS_COMPRESS_INT8: {
        const size_t C = c->s.chunk, nch = (n + C - 1) / C;
        const float *scales = (const float *)in;
        const int8_t *q = (const int8_t *)(in + nch * 4);
        for (size_t ch = 0; ch < nch; ch++) {
            size_t off = ch * C, len = HS_MIN(C, n - off);
            if (add)
                int8_dec_add(q + off, y + off, len, alpha * scales[ch]);
            else
                int8_dec(q + off, y + off, len, scales[ch]);
        }
        return 0;
    }
    case HS_COMPRESS_TOPK:
    case HS_COMPRESS_RANDK: {
        uint32_t m = 0;
        HS_TRY(sparse_check(c, in, bytes, &m));
        const uint32_t *idx = (const uint32_t *)(in + 4);
        const float *val = (const float *)(in + 4 + 4 * (size_t)m);
        if (!add) {
            memset(y, 0, n * 4);
            for (uint32_t i = 0; i < m; i++) y[idx[i]] = val[i];
        } else
            for (uint32_t i = 0; i < m; i++) y[idx[i]] += alpha * val[i];
        return 0;
    }
    }
    return HS_ERR(-EINVAL, "compressor kind %d", (int)c->s.kind);
}

void hs_half_encode(int bf16, const float *x, uint16_t *y, size_t n)
{
    if (bf16) {
        bf16_enc(x, y, n);
        return;
    }
    hs_compressor_t c = {.f16c = 0};
#if CQ_X86
    c.f16c = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx2");
#endif
    fp16_enc(&c, x, y, n);
}

void hs_half_decode(int bf16, const uint16_t *x, float *y, size_t n, float alpha, int add)
{
    if (bf16) {
        if (add)
            bf16_dec_add(x, y, n, alpha);
        else
            bf16_dec(x, y, n);
        return;
    }
    hs_compressor_t c = {.f16c = 0};
#if CQ_X86
    c.f16c = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx2");
#endif
    fp16_dec(&c, x, y, n, alpha, add);
}

int hs_decompress(const hs_compressor_t *c, const void *in, size_t bytes, float *y)
{
    return dec(c, in, bytes, 1.0f, 0, y);
}

int hs_decompress_add(const hs_compressor_t *c, const void *in, size_t bytes, float alpha, float *y)
{
    return dec(c, in, bytes, alpha, 1, y);
}
