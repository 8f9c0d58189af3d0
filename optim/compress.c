/*
 * optim/compress.c — the compressors of hearsay/compress.h: fp16, bf16, int8 with a scale per
 * chunk, top-k and random-k. Host memory, one core, vectorised: the elementwise loops run in
 * fixed blocks of 16 (which GCC vectorises at -O2) and are compiled for AVX2 and the baseline
 * (target_clones, as in kernels/cpu); fp16 uses the F16C conversions where the CPU has them.
 *
 * Top-k does not sort: a seeded random sample of the magnitudes (as Deep Gradient Compression,
 * Lin et al. 2018, section 3, estimates its threshold) brackets the k-th largest between two
 * thresholds; one vectorised pass counts the entries above the bracket and collects the few
 * inside it, the exact k-th magnitude is selected among those few, and a second vectorised
 * pass emits the entries (AVX2: a lane permutation packs the kept ones). Exactly k entries go
 * out (ties in index order), or every nonzero entry when there are fewer than k.
 */
#include "hearsay/compress.h"
#include "hearsay/common.h"
#include "optim/compress_bits.h"

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
#define CQ_SAMPLE_MIN    4096u /* top-k: sampled magnitudes, at least */
#define CQ_SAMPLE_MAX    8192u /* and at most */

struct hs_compressor {
    hs_compress_spec_t s;
    size_t n, k, max_bytes;
    uint64_t seed, round; /* the random stream: (seed, round, index) */
    int f16c;             /* the CPU converts fp16 in hardware */
    uint32_t *mag, *tmp;  /* (n) top-k: the band's magnitudes (abs bits), scratch */
    int avx2;             /* the CPU has AVX2 */
    uint32_t *sample;     /* (sample_n) top-k sampled magnitudes (abs bits); none: exact */
    size_t sample_n;
    uint32_t *lut; /* (256 x 8) top-k: the lanes of each 8-bit mask, packed */
    /* hs_compressor_bind: the backend, room for one compressed vector on it (NULL on the
     * CPU), a host image of x where the backend's slot does not take this kind */
    hs_kernels_t *kb;
    void *dbuf;
    float *ximg;
    int on_dev;
    const unsigned char *last; /* the CPU: the last hs_compress_dev output, and its size */
    size_t last_bytes;
    int has_last;
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

/* The key of this call of the stream: a different 32-bit key per (seed, round). */
static uint32_t cq_key(hs_compressor_t *c)
{
    uint64_t r = c->round++;
    uint64_t z = c->seed + 0x9e3779b97f4a7c15ull * (r + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t)(z ^ (z >> 31));
}

/* ---- fp16 ------------------------------------------------------------------------------- */

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
    for (; i < n; i++) y[i] = hs_cq_f2h(x[i]);
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
    for (; i < n; i++) y[i] = add ? y[i] + alpha * hs_cq_h2f(x[i]) : hs_cq_h2f(x[i]);
}
#endif

/* 1 when this CPU converts fp16 in hardware (F16C, with AVX2 for the 8-wide loops). */
static int cpu_f16c(void)
{
#if CQ_X86
    /* ranks of hearsay sim call it from several threads: the same answer, stored atomically */
    static int f = -1;
    int v = __atomic_load_n(&f, __ATOMIC_RELAXED);
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx2");
        __atomic_store_n(&f, v, __ATOMIC_RELAXED);
    }
    return v;
#else
    return 0;
#endif
}

static void fp16_enc(const hs_compressor_t *c, const float *x, uint16_t *y, size_t n)
{
#if CQ_X86
    if (c->f16c) {
        fp16_enc_f16c(x, y, n);
        return;
    }
#endif
    (void)c;
    for (size_t i = 0; i < n; i++) y[i] = hs_cq_f2h(x[i]);
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
    for (size_t i = 0; i < n; i++) y[i] = add ? y[i] + alpha * hs_cq_h2f(x[i]) : hs_cq_h2f(x[i]);
}

/* ---- bf16 ------------------------------------------------------------------------------- */

CQ_SIMD static void bf16_enc(const float *restrict x, uint16_t *restrict y, size_t n)
{
    const uint32_t *u = (const uint32_t *)x;
    CQ_FOR(i, n, y[i] = hs_cq_bf16(u[i]));
}

CQ_SIMD static void bf16_dec(const uint16_t *restrict x, float *restrict y, size_t n)
{
    uint32_t *u = (uint32_t *)y;
    CQ_FOR(i, n, u[i] = (uint32_t)x[i] << 16);
}

CQ_SIMD static void bf16_dec_add(const uint16_t *restrict x, float *restrict y, size_t n,
                                 float alpha)
{
    CQ_FOR(i, n, y[i] += alpha * hs_cq_u2f((uint32_t)x[i] << 16));
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
    for (uint32_t l = 0; l < 16; l++) st[l] = hs_cq_lane_seed(base, l, key);
    size_t b = 0;
    for (; b + 16 <= n; b += 16)
        for (uint32_t l = 0; l < 16; l++) {
            uint32_t v = hs_cq_xorshift(st[l]);
            st[l] = v;
            float u = hs_cq_unit(v);
            q[b + l] = (int8_t)((int)(x[b + l] * inv + u + 128.0f) - 128);
        }
    for (uint32_t l = 0; b < n; b++, l++) {
        uint32_t v = hs_cq_xorshift(st[l]);
        float u = hs_cq_unit(v);
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

static int int8_enc(const hs_kcompress_t *p, const float *x, unsigned char *out)
{
    const size_t n = p->n, C = p->chunk, nch = (n + C - 1) / C;
    float *scales = (float *)out;
    int8_t *q = (int8_t *)(out + nch * 4);
    for (size_t ch = 0; ch < nch; ch++) {
        size_t off = ch * C, len = HS_MIN(C, n - off);
        uint32_t mb = absmax_bits(x + off, len);
        if (mb >= 0x7f800000u) return HS_ERR(-ERANGE, "a non-finite value near element %zu", off);
        float amax = hs_cq_u2f(mb);
        float scale = amax / 127.0f;
        float inv = amax > 0 ? 127.0f / amax : 0.0f;
        if (!(inv < INFINITY)) inv = 0, scale = 0; /* subnormal maximum: send zeros */
        scales[ch] = scale;
        if (p->stochastic)
            int8_stoch(x + off, q + off, len, inv, p->key, (uint32_t)off);
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
        st = hs_cq_hash(st + (uint32_t)hi);
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

/* The r-th smallest t (0-based, r < m) of v[0..m), and how many of them are > t and == t:
 * bucket selection, for the band of top-k. Each level spreads [min, max] over 1024 buckets by
 * a shift (monotone, so the buckets are ordered), counts them, and keeps only the bucket
 * holding rank r (copied into tmp, then back and forth with v); every level takes 10 bits off
 * the range, so at most 4 levels, whatever the distribution. v and tmp (m) are overwritten. */
static uint32_t bucket_select(uint32_t *v, uint32_t *tmp, size_t m, size_t r, size_t *gt,
                              size_t *eq)
{
    size_t above = 0;
    while (m > 64) {
        uint32_t mn = UINT32_MAX, mx = 0;
        for (size_t i = 0; i < m; i++) mn = HS_MIN(mn, v[i]), mx = HS_MAX(mx, v[i]);
        if (mn == mx) {
            *gt = above, *eq = m;
            return mn;
        }
        unsigned s = 0;
        while (((uint64_t)(mx - mn) >> s) >= 1024) s++;
        uint32_t cnt[1024] = {0};
        for (size_t i = 0; i < m; i++) cnt[(v[i] - mn) >> s]++;
        size_t below = 0;
        uint32_t b = 0;
        while (below + cnt[b] <= r) below += cnt[b++];
        above += m - below - cnt[b];
        size_t w = 0;
        for (size_t i = 0; i < m; i++)
            if ((v[i] - mn) >> s == b) tmp[w++] = v[i];
        uint32_t *sw = v;
        v = tmp, tmp = sw;
        m = w, r -= below;
    }
    uint32_t t = select_u32(v, m, r);
    size_t g = 0, e = 0;
    for (size_t i = 0; i < m; i++) g += v[i] > t, e += v[i] == t;
    *gt = above + g, *eq = e;
    return t;
}

/* Top-k in two streaming passes, no sort. A seeded sample of the magnitudes brackets the k-th
 * largest between two thresholds lo < hi (4 standard deviations of the sample's count either
 * side); pass 1 counts the entries >= hi (vectorised) and collects the few in the band
 * [lo, hi); the exact k-th magnitude T is then selected within the band alone; pass 2 emits
 * every entry > T, and entries == T in index order until exactly k are out (a vectorised
 * compaction). When the sample missed (the band does not hold the k-th), pass 1 runs again on
 * the side that holds it, so exactly min(k, nonzero entries) go out whatever the data. */

/* Pass 1: returns the count of entries with abs bits >= hi; the magnitudes of those in
 * [lo, hi) (1 <= lo <= hi <= 2^31) go to bmag, their count to *nb. */
static size_t band_pass_c(const float *restrict x, size_t n, uint32_t lo, uint32_t hi,
                          uint32_t *restrict bmag, size_t *nb)
{
    const uint32_t *u = (const uint32_t *)x;
    size_t above = 0, m = 0, b = 0;
    for (; b + 16 <= n; b += 16) {
        uint32_t any = 0;
        for (size_t i = b; i < b + 16; i++) {
            uint32_t a = u[i] & 0x7fffffffu;
            above += a >= hi;
            any |= a >= lo && a < hi;
        }
        if (!any) continue;
        for (size_t i = b; i < b + 16; i++) {
            uint32_t a = u[i] & 0x7fffffffu;
            if (a >= lo && a < hi) bmag[m++] = a;
        }
    }
    for (size_t i = b; i < n; i++) {
        uint32_t a = u[i] & 0x7fffffffu;
        above += a >= hi;
        if (a >= lo && a < hi) bmag[m++] = a;
    }
    *nb = m;
    return above;
}

/* Pass 2: in index order, the entries with abs bits > t, and of the nties entries == t the
 * first ties (all of them when ties >= nties): indices to idx, values to val; returns the
 * count. */
static size_t emit_c(const float *restrict x, size_t n, uint32_t t, size_t ties, size_t nties,
                     uint32_t *restrict idx, float *restrict val)
{
    const uint32_t *u = (const uint32_t *)x;
    const int all = ties >= nties;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t a = u[i] & 0x7fffffffu;
        if (a > t || (a == t && (all || (ties && ties--)))) idx[m] = (uint32_t)i, val[m++] = x[i];
    }
    return m;
}

#if CQ_X86
__attribute__((target("avx2"))) static size_t band_pass_avx2(const float *restrict x, size_t n,
                                                             uint32_t lo, uint32_t hi,
                                                             uint32_t *restrict bmag, size_t *nb)
{
    const __m256i absm = _mm256_set1_epi32(0x7fffffff);
    /* a >= t as a > t - 1, signed: a < 2^31 and t - 1 in [0, 2^31) */
    const __m256i lov = _mm256_set1_epi32((int)(lo - 1)), hiv = _mm256_set1_epi32((int)(hi - 1));
    __m256i cnt = _mm256_setzero_si256(); /* per lane: minus the count >= hi */
    size_t m = 0, b = 0;
    for (; b + 16 <= n; b += 16) {
        __m256i a0 = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + b)), absm);
        __m256i a1 = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + b + 8)), absm);
        __m256i h0 = _mm256_cmpgt_epi32(a0, hiv), h1 = _mm256_cmpgt_epi32(a1, hiv);
        cnt = _mm256_add_epi32(cnt, _mm256_add_epi32(h0, h1));
        __m256i l0 = _mm256_andnot_si256(h0, _mm256_cmpgt_epi32(a0, lov));
        __m256i l1 = _mm256_andnot_si256(h1, _mm256_cmpgt_epi32(a1, lov));
        unsigned mask = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(l0)) |
                        (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(l1)) << 8;
        while (mask) {
            unsigned j = (unsigned)__builtin_ctz(mask);
            mask &= mask - 1;
            bmag[m++] = ((const uint32_t *)x)[b + j] & 0x7fffffffu;
        }
    }
    /* lane counts: n / 8 < 2^31 each (n < 2^32) */
    uint32_t lanes[8];
    _mm256_storeu_si256((__m256i *)lanes, cnt);
    size_t above = 0;
    for (int l = 0; l < 8; l++) above += (uint32_t)-lanes[l];
    size_t r = 0;
    above += band_pass_c(x + b, n - b, lo, hi, bmag + m, &r);
    *nb = m + r;
    return above;
}

/* emit_c with AVX2, for cap entries at most: 8 floats at a time, the kept lanes packed by a
 * permutation from lut (256 x 8 lane numbers) and stored 8 wide. A block of 16 with nothing to
 * keep costs two compares; a block holding a tie while only some ties go out is done lane by
 * lane. The wide stores run while 16 entries are left, so nothing is written past cap. */
__attribute__((target("avx2"))) static size_t emit_avx2(const float *restrict x, size_t n,
                                                        uint32_t t, size_t ties, size_t nties,
                                                        size_t cap, const uint32_t *lut,
                                                        uint32_t *restrict idx, float *restrict val)
{
    const __m256i absm = _mm256_set1_epi32(0x7fffffff);
    const int all = ties >= nties; /* every tie goes out: keep a >= t */
    const __m256i gtv = _mm256_set1_epi32((int)(all ? t - 1 : t)), eqv = _mm256_set1_epi32((int)t);
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const uint32_t *u = (const uint32_t *)x;
    size_t m = 0, b = 0;
    for (; b + 16 <= n && m + 16 <= cap; b += 16) {
        __m256 x0 = _mm256_loadu_ps(x + b), x1 = _mm256_loadu_ps(x + b + 8);
        __m256i a0 = _mm256_and_si256(_mm256_castps_si256(x0), absm);
        __m256i a1 = _mm256_and_si256(_mm256_castps_si256(x1), absm);
        unsigned k0 =
            (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(a0, gtv)));
        unsigned k1 =
            (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(a1, gtv)));
        if (!all && ties) {
            unsigned e =
                (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(a0, eqv))) |
                (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(a1, eqv))) << 8;
            if (e) {
                for (size_t i = b; i < b + 16; i++) {
                    uint32_t a = u[i] & 0x7fffffffu;
                    if (a > t || (a == t && ties && ties--)) idx[m] = (uint32_t)i, val[m++] = x[i];
                }
                continue;
            }
        }
        if (!(k0 | k1)) continue;
        __m256i base = _mm256_add_epi32(_mm256_set1_epi32((int)b), iota);
        __m256i p0 = _mm256_loadu_si256((const __m256i *)(lut + 8 * k0));
        _mm256_storeu_si256((__m256i *)(idx + m), _mm256_permutevar8x32_epi32(base, p0));
        _mm256_storeu_ps(val + m, _mm256_permutevar8x32_ps(x0, p0));
        m += (size_t)__builtin_popcount(k0);
        __m256i p1 = _mm256_loadu_si256((const __m256i *)(lut + 8 * k1));
        base = _mm256_add_epi32(base, _mm256_set1_epi32(8));
        _mm256_storeu_si256((__m256i *)(idx + m), _mm256_permutevar8x32_epi32(base, p1));
        _mm256_storeu_ps(val + m, _mm256_permutevar8x32_ps(x1, p1));
        m += (size_t)__builtin_popcount(k1);
    }
    for (size_t i = b; i < n; i++) {
        uint32_t a = u[i] & 0x7fffffffu;
        if (a > t || (a == t && (all || (ties && ties--)))) idx[m] = (uint32_t)i, val[m++] = x[i];
    }
    return m;
}
#endif

static size_t band_pass(const hs_compressor_t *c, const float *x, uint32_t lo, uint32_t hi,
                        size_t *nb)
{
#if CQ_X86
    if (c->avx2) return band_pass_avx2(x, c->n, lo, hi, c->mag, nb);
#endif
    return band_pass_c(x, c->n, lo, hi, c->mag, nb);
}

static int topk_enc(hs_compressor_t *c, const float *x, unsigned char *out, size_t *bytes)
{
    const size_t n = c->n, k = c->k;
    const uint32_t *u = (const uint32_t *)x;
    uint32_t lo = 1, hi = 0x80000000u; /* the band: every nonzero entry */
    if (c->sample_n && k < n) {
        uint32_t key = cq_key(c);
        const size_t m = c->sample_n;
        for (size_t i = 0; i < m; i++) {
            uint32_t h = hs_cq_hash((uint32_t)i * 0x9e3779b9u ^ key);
            c->sample[i] = u[(size_t)(((uint64_t)h * n) >> 32)] & 0x7fffffffu;
        }
        /* the sample's count above the k-th: binomial, mean m k / n; 4 sigma + 1 either side */
        double p = (double)k / (double)n, mean = (double)m * p;
        double w = 4.0 * sqrt(mean * (1.0 - p)) + 1.0;
        double jhi = floor(mean - w), jlo = ceil(mean + w); /* ranks from the largest */
        /* lo: the jlo-th largest (1 when jlo > m), which leaves the jlo largest at the end;
         * hi: the jhi-th largest among those (2^31, above every magnitude, when jhi < 1) */
        size_t top = 0;
        if (jlo <= (double)m) {
            top = m - (size_t)jlo;
            lo = HS_MAX(1u, select_u32(c->sample, m, top));
        }
        if (jhi >= 1) {
            size_t cnt = m - top;
            hi = HS_MAX(1u, select_u32(c->sample + top, cnt, cnt - (size_t)jhi));
        }
        if (lo > hi) lo = hi;
    }
    size_t nb = 0, above = band_pass(c, x, lo, hi, &nb);
    if (above > k) { /* the k-th is >= hi: the band becomes [hi, 2^31) */
        lo = hi, hi = 0x80000000u;
        above = band_pass(c, x, lo, hi, &nb);
    } else if (above + nb < k && lo > 1) { /* the k-th is < lo: the band becomes [1, lo) */
        hi = lo, lo = 1;
        above = band_pass(c, x, lo, hi, &nb);
    }
    /* the exact k-th magnitude t within the band; of the nties entries == t, ties go out */
    size_t r = k - above, out_m = k, ties, nties = 0;
    uint32_t t;
    if (r == 0) { /* exactly the entries >= hi (hi < 2^31: above >= k >= 1) */
        t = hi, ties = nties = SIZE_MAX;
    } else if (r >= nb) { /* the whole band: fewer than k nonzero entries when r > nb */
        t = lo, ties = nties = SIZE_MAX, out_m = above + nb;
    } else {
        size_t gt = 0;
        t = bucket_select(c->mag, c->tmp, nb, nb - r, &gt, &nties);
        ties = r - gt;
    }
    /* pass 2: straight into the message */
    uint32_t *oi = (uint32_t *)(out + 4);
    float *ov = (float *)(out + 4 + 4 * out_m);
    size_t w;
#if CQ_X86
    if (c->avx2)
        w = emit_avx2(x, n, t, ties, nties, out_m, c->lut, oi, ov);
    else
#endif
        w = emit_c(x, n, t, ties, nties, oi, ov);
    if (w != out_m)
        return HS_ERR(-EIO, "%s: top-k selected %zu entries, expected %zu (internal error)",
                      c->s.text, w, out_m);
    uint32_t m32 = (uint32_t)w;
    memcpy(out, &m32, 4);
    *bytes = 4 + 8 * w;
    return 0;
}

static void randk_enc(const hs_kcompress_t *p, const float *x, unsigned char *out, size_t *bytes)
{
    const size_t n = p->n, k = p->k;
    uint32_t key = p->key;
    uint32_t k32 = (uint32_t)k;
    memcpy(out, &k32, 4);
    uint32_t *oi = (uint32_t *)(out + 4);
    float *ov = (float *)(out + 4 + 4 * k);
    /* stratum j = [j n / k, (j + 1) n / k): one index in each, distinct and increasing */
    for (size_t j = 0; j < k; j++) {
        size_t i = hs_cq_randk_index(j, n, k, key);
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
#endif
    c->f16c = cpu_f16c();
    if (s.kind == HS_COMPRESS_TOPK) {
        /* small vectors: the exact band (every nonzero); else n / 512 samples in [4096, 8192] */
        c->sample_n =
            n <= 4 * CQ_SAMPLE_MIN ? 0 : HS_MIN(CQ_SAMPLE_MAX, HS_MAX(CQ_SAMPLE_MIN, n / 512));
        c->mag = hs_malloc(n * sizeof *c->mag, "top-k magnitudes");
        c->tmp = hs_malloc(n * sizeof *c->tmp, "top-k scratch");
        c->sample = hs_malloc(HS_MAX(c->sample_n, (size_t)1) * sizeof *c->sample, "top-k sample");
        c->lut = hs_malloc(256 * 8 * sizeof *c->lut, "top-k lanes");
        if (!c->mag || !c->tmp || !c->sample || !c->lut) {
            hs_compressor_destroy(&c);
            return -ENOMEM;
        }
        for (unsigned mask = 0; mask < 256; mask++) {
            unsigned w = 0;
            for (unsigned l = 0; l < 8; l++)
                if (mask >> l & 1) c->lut[8 * mask + w++] = l;
            while (w < 8) c->lut[8 * mask + w++] = 0;
        }
    }
    *out = c;
    return 0;
}

void hs_compressor_destroy(hs_compressor_t **c)
{
    if (!c || !*c) return;
    if ((*c)->kb) {
        (*c)->kb->ops->free((*c)->kb, (*c)->dbuf);
        hs_kernels_host_free((*c)->kb, (*c)->ximg);
    }
    free((*c)->lut);
    free((*c)->mag);
    free((*c)->tmp);
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

/* The slots' view of c (a decoder's: no key). */
static hs_kcompress_t kview(const hs_compressor_t *c)
{
    return (hs_kcompress_t){.kind = (int)c->s.kind,
                            .stochastic = c->s.stochastic,
                            .chunk = c->s.chunk,
                            .n = c->n,
                            .k = c->k,
                            .bytes = c->max_bytes};
}

/* The slots' view of c, with this call's key of its stream where the kind takes one. */
static hs_kcompress_t kparams(hs_compressor_t *c)
{
    hs_kcompress_t p = kview(c);
    if ((c->s.kind == HS_COMPRESS_INT8 && c->s.stochastic) || c->s.kind == HS_COMPRESS_RANDK)
        p.key = cq_key(c);
    return p;
}

int hs_compress_format(const hs_kcompress_t *p, const float *x, void *out, size_t *bytes)
{
    const size_t n = p->n;
    hs_compressor_t h = {.f16c = cpu_f16c()};
    switch ((hs_compress_kind_t)p->kind) {
    case HS_COMPRESS_NONE:
        memcpy(out, x, n * 4);
        break;
    case HS_COMPRESS_FP16:
        fp16_enc(&h, x, (uint16_t *)out, n);
        break;
    case HS_COMPRESS_BF16:
        bf16_enc(x, (uint16_t *)out, n);
        break;
    case HS_COMPRESS_INT8:
        HS_TRY(int8_enc(p, x, (unsigned char *)out));
        break;
    case HS_COMPRESS_RANDK:
        randk_enc(p, x, (unsigned char *)out, bytes);
        return 0;
    case HS_COMPRESS_TOPK:
        return HS_ERR(-ENOTSUP, "top-k is not a compression slot's kind (it selects on the host)");
    default:
        return HS_ERR(-EINVAL, "compressor kind %d", p->kind);
    }
    *bytes = p->bytes;
    return 0;
}

int hs_compress(hs_compressor_t *c, const float *x, void *out, size_t *bytes)
{
    if (c->s.kind == HS_COMPRESS_TOPK) return topk_enc(c, x, (unsigned char *)out, bytes);
    hs_kcompress_t p = kparams(c);
    int rc = hs_compress_format(&p, x, out, bytes);
    if (rc < 0) hs_error_prefix("--compress %s", c->s.text);
    return rc;
}

int hs_decompress_format(const hs_kcompress_t *p, const void *in_, size_t bytes, float alpha,
                         int add, float *y)
{
    const unsigned char *in = in_;
    const size_t n = p->n;
    switch ((hs_compress_kind_t)p->kind) {
    case HS_COMPRESS_NONE: {
        const float *x = (const float *)in;
        if (!add)
            memcpy(y, x, n * 4);
        else
            f32_axpy(x, y, n, alpha);
        return 0;
    }
    case HS_COMPRESS_FP16: {
        hs_compressor_t h = {.f16c = cpu_f16c()};
        fp16_dec(&h, (const uint16_t *)in, y, n, alpha, add);
        return 0;
    }
    case HS_COMPRESS_BF16:
        if (add)
            bf16_dec_add((const uint16_t *)in, y, n, alpha);
        else
            bf16_dec((const uint16_t *)in, y, n);
        return 0;
    case HS_COMPRESS_INT8: {
        const size_t C = p->chunk, nch = (n + C - 1) / C;
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
        size_t m = bytes >= 4 ? (bytes - 4) / 8 : 0;
        const uint32_t *idx = (const uint32_t *)(in + 4);
        const float *val = (const float *)(in + 4 + 4 * m);
        if (!add) {
            memset(y, 0, n * 4);
            for (size_t i = 0; i < m; i++) y[idx[i]] = val[i];
        } else
            for (size_t i = 0; i < m; i++) y[idx[i]] += alpha * val[i];
        return 0;
    }
    }
    return HS_ERR(-EINVAL, "compressor kind %d", p->kind);
}

/* The checks of a received vector's bytes: its length, and a sparse one's entries. */
static int dec_check(const hs_compressor_t *c, const void *in, size_t bytes)
{
    if (c->s.kind != HS_COMPRESS_TOPK && c->s.kind != HS_COMPRESS_RANDK) {
        if (bytes != c->max_bytes)
            return HS_ERR(-EPROTO, "%s: %zu bytes for %zu floats (expected %zu)", c->s.text, bytes,
                          c->n, c->max_bytes);
        return 0;
    }
    uint32_t m = 0;
    return sparse_check(c, in, bytes, &m);
}

static int dec(const hs_compressor_t *c, const void *in, size_t bytes, float alpha, int add,
               float *y)
{
    HS_TRY(dec_check(c, in, bytes));
    hs_kcompress_t p = kview(c);
    return hs_decompress_format(&p, in, bytes, alpha, add, y);
}

void hs_half_encode(int bf16, const float *x, uint16_t *y, size_t n)
{
    if (bf16) {
        bf16_enc(x, y, n);
        return;
    }
    hs_compressor_t c = {.f16c = cpu_f16c()};
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
    hs_compressor_t c = {.f16c = cpu_f16c()};
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

const char *hs_compress_or_precision(const char *given, const hs_kernels_t *k)
{
    if (given && *given) return given;
    if (k && k->precision == HS_PREC_BF16) return "bf16";
    if (k && k->precision == HS_PREC_FP16) return "fp16";
    return "none";
}

/* ---- vectors in device memory ------------------------------------------------------------ */

int hs_compressor_bind(hs_compressor_t *c, hs_kernels_t *k)
{
    if (c->kb)
        return HS_ERR(-EINVAL, "--compress %s: the compressor is bound to a backend already",
                      c->s.text);
    if (!k || hs_kernels_is_host(k)) return 0; /* host memory: hs_compress as it is */
    if (!HS_KOP_HAS(k, decompress))
        return HS_ERR(-ENOSYS, "--compress %s: the %s backend has no decompress slot", c->s.text,
                      k->ops->name);
    c->on_dev = c->s.kind != HS_COMPRESS_TOPK && HS_KOP_HAS(k, compress);
    int rc = k->ops->alloc(k, c->max_bytes, &c->dbuf);
    if (rc == 0 && !c->on_dev)
        rc = hs_kernels_host_alloc(k, c->n * sizeof(float), (void **)&c->ximg,
                                   "a compressor's host image");
    if (rc < 0) {
        k->ops->free(k, c->dbuf);
        c->dbuf = NULL;
        hs_error_prefix("--compress %s: binding to the %s backend", c->s.text, k->ops->name);
        return rc;
    }
    c->kb = k;
    return 0;
}

int hs_compressor_on_device(const hs_compressor_t *c)
{
    return c->kb && c->on_dev;
}

int hs_compress_dev(hs_compressor_t *c, const float *x, void *out, size_t *bytes)
{
    hs_kernels_t *k = c->kb;
    if (!k) {
        HS_TRY(hs_compress(c, x, out, bytes));
        c->last = out;
        c->last_bytes = *bytes;
        c->has_last = 1;
        return 0;
    }
    if (!c->on_dev) { /* top-k: select on the host, then the bytes to the device */
        HS_TRY(k->ops->to_host(k, c->ximg, x, c->n * sizeof(float)));
        HS_TRY(hs_compress(c, c->ximg, out, bytes));
        HS_TRY(k->ops->to_device(k, c->dbuf, out, *bytes));
        c->last_bytes = *bytes;
        c->has_last = 1;
        return 0;
    }
    hs_kcompress_t p = kparams(c);
    int rc = k->ops->compress(k, &p, x, c->dbuf, bytes);
    if (rc == 0) rc = k->ops->to_host(k, out, c->dbuf, *bytes);
    if (rc == 0 && c->s.kind == HS_COMPRESS_INT8) { /* a device's slot leaves the check here */
        const size_t nch = (c->n + c->s.chunk - 1) / c->s.chunk;
        const float *scales = out;
        for (size_t ch = 0; ch < nch; ch++)
            if (!isfinite(scales[ch])) {
                rc = HS_ERR(-ERANGE, "a non-finite value in elements [%zu, %zu)", ch * c->s.chunk,
                            HS_MIN(c->n, (ch + 1) * c->s.chunk));
                break;
            }
    }
    if (rc < 0) {
        hs_error_prefix("--compress %s", c->s.text);
        return rc;
    }
    c->last_bytes = *bytes;
    c->has_last = 1;
    return 0;
}

int hs_decompress_add_dev(hs_compressor_t *c, const void *in, size_t bytes, float alpha, float *y)
{
    hs_kernels_t *k = c->kb;
    if (!in) {
        if (!c->has_last)
            return HS_ERR(-EINVAL, "--compress %s: nothing compressed yet", c->s.text);
        if (!k) return hs_decompress_add(c, c->last, c->last_bytes, alpha, y);
        bytes = c->last_bytes;
    } else {
        HS_TRY(dec_check(c, in, bytes));
        if (!k) return hs_decompress_add(c, in, bytes, alpha, y);
        HS_TRY(k->ops->to_device(k, c->dbuf, in, bytes));
    }
    hs_kcompress_t p = kview(c);
    return k->ops->decompress(k, &p, c->dbuf, bytes, alpha, 1, y);
}
