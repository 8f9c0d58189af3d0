/* tests/test_compress.c — the compressors of hearsay/compress.h: round trips within each one's
 * error bound (fp16 bit for bit against the compiler's _Float16 where it has one), int8's
 * stochastic rounding unbiased, top-k's selection the exact k largest, random-k one index per
 * stratum, decompress_add, the wire size formulas, and the rejected specs and messages; and the
 * device path (hs_compress_dev on the emulated device) bit for bit against the host's. */
#include "hearsay/common.h"
#include "hearsay/compress.h"
#include "hearsay/kernels.h"

#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Gaussian-ish test data (sum of uniforms), magnitudes spread over a few decades. */
static float *data(size_t n, uint64_t seed)
{
    float *x = malloc(n * sizeof *x);
    ck_assert_ptr_nonnull(x);
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        double v = 0;
        for (int j = 0; j < 4; j++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            v += (double)(s >> 11) * 0x1p-53 - 0.5;
        }
        x[i] = (float)(v * (i % 7 == 0 ? 10.0 : 0.1));
    }
    return x;
}

static hs_compressor_t *make(const char *spec, size_t n, uint64_t seed)
{
    hs_compressor_t *c = NULL;
    int rc = hs_compressor_create(&c, spec, n, seed);
    ck_assert_msg(rc == 0, "create %s n=%zu: %s", spec, n, hs_last_error());
    return c;
}

/* Compress and decompress x into y; returns the bytes used. */
static size_t round_trip(hs_compressor_t *c, const float *x, float *y, size_t n)
{
    unsigned char *w = malloc(hs_compressor_max_bytes(c));
    size_t bytes = 0;
    ck_assert_int_eq(hs_compress(c, x, w, &bytes), 0);
    ck_assert_uint_le(bytes, hs_compressor_max_bytes(c));
    int rc = hs_decompress(c, w, bytes, y);
    ck_assert_msg(rc == 0, "%s", hs_last_error());
    /* decompress_add: y2 = 1 + 0.5 Q */
    float *y2 = malloc(n * sizeof *y2);
    for (size_t i = 0; i < n; i++) y2[i] = 1.0f;
    ck_assert_int_eq(hs_decompress_add(c, w, bytes, 0.5f, y2), 0);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(!isfinite(y[i])
                          ? (isnan(y[i]) ? isnan(y2[i]) : y2[i] == y[i])
                          : fabsf(y2[i] - (1.0f + 0.5f * y[i])) <= 1e-6f * (1 + fabsf(y[i])),
                      "decompress_add at %zu: %g vs %g", i, y2[i], 1.0f + 0.5f * y[i]);
    free(y2);
    free(w);
    return bytes;
}

static const size_t sizes[] = {1, 15, 16, 17, 1000, 100003};

START_TEST(test_none_fp16_bf16)
{
    for (size_t si = 0; si < HS_ARRAY_LEN(sizes); si++) {
        size_t n = sizes[si];
        float *x = data(n, 1), *y = malloc(n * sizeof *y);
        hs_compressor_t *c = make("none", n, 1);
        ck_assert_uint_eq(round_trip(c, x, y, n), 4 * n);
        ck_assert(!memcmp(x, y, n * 4));
        hs_compressor_destroy(&c);
        ck_assert_ptr_null(c);

        c = make("fp16", n, 1);
        ck_assert_uint_eq(round_trip(c, x, y, n), 2 * n);
        for (size_t i = 0; i < n; i++) {
#if defined(__FLT16_MAX__)
            ck_assert_msg(y[i] == (float)(_Float16)x[i], "fp16 at %zu: %a -> %a, expected %a", i,
                          x[i], y[i], (float)(_Float16)x[i]);
#endif
            ck_assert_msg(fabsf(y[i] - x[i]) <= fabsf(x[i]) * 0x1p-11f + 0x1p-25f,
                          "fp16 error at %zu", i);
        }
        hs_compressor_destroy(&c);

        c = make("bf16", n, 1);
        ck_assert_uint_eq(round_trip(c, x, y, n), 2 * n);
        for (size_t i = 0; i < n; i++)
            ck_assert_msg(fabsf(y[i] - x[i]) <= fabsf(x[i]) * 0x1p-8f, "bf16 error at %zu: %a %a",
                          i, x[i], y[i]);
        hs_compressor_destroy(&c);
        free(x);
        free(y);
    }
    /* edge values: fp16 overflow is inf, subnormals round, NaN stays NaN */
    float e[17] = {65504.0f, 65520.0f, 1e6f,  -1e6f, 6e-8f, 1e-9f, 0.0f,    -0.0f,    NAN,
                   INFINITY, 3.0f,     -2.5f, 1e-5f, 0.1f,  1.0f,  2049.0f, -65504.0f};
    float y[17];
    hs_compressor_t *c = make("fp16", 17, 1);
    round_trip(c, e, y, 17);
    ck_assert(y[0] == 65504.0f && isinf(y[1]) && isinf(y[2]) && isinf(y[3]) && y[3] < 0);
    ck_assert(isnan(y[8]) && isinf(y[9]) && y[10] == 3.0f && y[11] == -2.5f);
    ck_assert(y[15] == 2048.0f); /* 2049 is a tie between 2048 and 2050: to even */
    hs_compressor_destroy(&c);
    c = make("bf16", 17, 1);
    round_trip(c, e, y, 17);
    ck_assert(isnan(y[8]) && isinf(y[9]) && y[10] == 3.0f && y[6] == 0.0f);
    hs_compressor_destroy(&c);
}
END_TEST

/* |x - y| <= bound * max|x| of the chunk, per chunk of C. */
static void check_int8(const float *x, const float *y, size_t n, size_t C, double bound,
                       const char *what)
{
    for (size_t off = 0; off < n; off += C) {
        size_t len = HS_MIN(C, n - off);
        float amax = 0;
        for (size_t i = 0; i < len; i++) amax = fmaxf(amax, fabsf(x[off + i]));
        float scale = amax / 127.0f;
        for (size_t i = 0; i < len; i++)
            ck_assert_msg(fabsf(y[off + i] - x[off + i]) <= bound * scale + 1e-7f * amax,
                          "%s at %zu: %g vs %g (scale %g)", what, off + i, x[off + i], y[off + i],
                          scale);
    }
}

START_TEST(test_int8)
{
    for (size_t si = 0; si < HS_ARRAY_LEN(sizes); si++) {
        size_t n = sizes[si];
        float *x = data(n, 2), *y = malloc(n * sizeof *y);
        hs_compressor_t *c = make("int8", n, 3);
        size_t nch = (n + 511) / 512;
        ck_assert_uint_eq(round_trip(c, x, y, n), n + 4 * nch);
        check_int8(x, y, n, 512, 0.5, "int8 nearest");
        hs_compressor_destroy(&c);
        c = make("int8:stochastic:chunk=64", n, 3);
        ck_assert_uint_eq(round_trip(c, x, y, n), n + 4 * ((n + 63) / 64));
        check_int8(x, y, n, 64, 1.0, "int8 stochastic");
        hs_compressor_destroy(&c);
        free(x);
        free(y);
    }
    /* stochastic rounding is unbiased: the mean of R draws is within 5 sigma of x */
    const size_t n = 256, R = 2000;
    float *x = data(n, 4), *y = malloc(n * sizeof *y);
    double *sum = calloc(n, sizeof *sum);
    hs_compressor_t *c = make("int8:stochastic:chunk=256", n, 5);
    for (size_t r = 0; r < R; r++) {
        round_trip(c, x, y, n);
        for (size_t i = 0; i < n; i++) sum[i] += y[i];
    }
    float amax = 0;
    for (size_t i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
    double scale = amax / 127.0, sigma = 0.5 * scale / sqrt((double)R);
    double worst = 0;
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs(sum[i] / R - x[i]) / sigma);
    ck_assert_msg(worst < 5, "stochastic rounding biased: %g sigma", worst);
    /* nearest rounding of the same x is biased: its error does not shrink with R */
    hs_compressor_destroy(&c);
    /* an all-zero chunk decodes to zeros; a non-finite value is an error naming it */
    memset(x, 0, n * sizeof *x);
    c = make("int8", n, 5);
    round_trip(c, x, y, n);
    for (size_t i = 0; i < n; i++) ck_assert(y[i] == 0);
    x[7] = NAN;
    unsigned char w[2048];
    size_t bytes;
    ck_assert_int_eq(hs_compress(c, x, w, &bytes), -ERANGE);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "non-finite"));
    hs_compressor_destroy(&c);
    free(sum);
    free(x);
    free(y);
}
END_TEST

static int cmp_abs_desc(const void *a, const void *b)
{
    float x = fabsf(*(const float *)a), y = fabsf(*(const float *)b);
    return (x < y) - (x > y);
}

START_TEST(test_topk)
{
    const char *specs[] = {"topk:1%", "topk:10%", "topk:100", "topk:0.1%"};
    const size_t ns[] = {1000003, 5000, 170, 200000};
    for (size_t si = 0; si < HS_ARRAY_LEN(specs); si++) {
        size_t n = ns[si];
        float *x = data(n, 6 + si), *y = malloc(n * sizeof *y), *s = malloc(n * sizeof *s);
        hs_compressor_t *c = make(specs[si], n, 7);
        size_t k = hs_compressor_k(c);
        for (int rep = 0; rep < 3; rep++) {
            size_t bytes = round_trip(c, x, y, n);
            ck_assert_msg(bytes == 4 + 8 * k, "%s n=%zu: %zu bytes, expected k = %zu entries",
                          specs[si], n, bytes, k);
            /* sent entries are exact; the sent set is the k largest magnitudes */
            size_t nz = 0;
            float min_sent = INFINITY, max_unsent = 0;
            for (size_t i = 0; i < n; i++) {
                if (y[i] != 0) {
                    ck_assert(y[i] == x[i]);
                    nz++;
                    min_sent = fminf(min_sent, fabsf(x[i]));
                } else
                    max_unsent = fmaxf(max_unsent, fabsf(x[i]));
            }
            ck_assert_uint_eq(nz, k);
            ck_assert_msg(min_sent >= max_unsent, "%s: sent %g < unsent %g", specs[si], min_sent,
                          max_unsent);
            memcpy(s, x, n * sizeof *s);
            qsort(s, n, sizeof *s, cmp_abs_desc);
            ck_assert(fabsf(s[k - 1]) == min_sent);
        }
        hs_compressor_destroy(&c);
        free(x);
        free(y);
        free(s);
    }
}
END_TEST

/* Top-k on data built to defeat the sample: ties across the threshold (only some of them go
 * out, the first in index order), a plateau that makes both sampled thresholds equal (the
 * second pass over the band), fewer nonzero entries than k (all of them go out), all zeros.
 * Checks on the C path and, where the CPU has it, the AVX2 path alike (one runs). */
static void check_topk_case(const char *what, const char *spec, const float *x, size_t n)
{
    hs_compressor_t *c = make(spec, n, 3);
    size_t k = hs_compressor_k(c), nnz = 0;
    for (size_t i = 0; i < n; i++) nnz += x[i] != 0;
    size_t want = nnz < k ? nnz : k;
    float *y = malloc(n * sizeof *y);
    size_t bytes = round_trip(c, x, y, n);
    ck_assert_msg(bytes == 4 + 8 * want, "%s: %zu bytes, expected %zu entries", what, bytes, want);
    float min_sent = INFINITY, max_unsent = 0;
    size_t sent = 0;
    for (size_t i = 0; i < n; i++) {
        if (y[i] != 0) {
            ck_assert_msg(y[i] == x[i], "%s: entry %zu sent as %g, is %g", what, i, y[i], x[i]);
            sent++;
            min_sent = fminf(min_sent, fabsf(x[i]));
        } else
            max_unsent = fmaxf(max_unsent, fabsf(x[i]));
    }
    ck_assert_msg(sent == want, "%s: %zu entries sent, expected %zu", what, sent, want);
    if (sent && sent < n)
        ck_assert_msg(min_sent >= max_unsent, "%s: sent %g < unsent %g", what, min_sent,
                      max_unsent);
    /* ties at the threshold: the sent ones come first in index order */
    int unsent_tie = 0;
    for (size_t i = 0; i < n && sent; i++)
        if (fabsf(x[i]) == min_sent) {
            if (y[i] == 0)
                unsent_tie = 1;
            else
                ck_assert_msg(!unsent_tie, "%s: tie at %zu sent after an unsent one", what, i);
        }
    hs_compressor_destroy(&c);
    free(y);
}

START_TEST(test_topk_adversarial)
{
    const size_t n = 1000003;
    float *x = malloc(n * sizeof *x);
    /* seven magnitudes, each 1/7 of the entries: 10 % cuts through one of them */
    for (size_t i = 0; i < n; i++) x[i] = (float)(i % 7) * (i % 2 ? 0.25f : -0.25f);
    check_topk_case("ties", "topk:10%", x, n);
    check_topk_case("ties 1%", "topk:1%", x, n);
    /* a plateau of 1.0 with k / 2 entries of 2.0: the sample's two thresholds are both 1 */
    for (size_t i = 0; i < n; i++) x[i] = 1.0f;
    for (size_t j = 0; j < n / 200; j++) x[(j * 7919) % n] = -2.0f;
    check_topk_case("plateau", "topk:1%", x, n);
    /* the k-th below the sample's lower threshold: k / 2 large entries, the rest tiny and rare */
    memset(x, 0, n * sizeof *x);
    for (size_t j = 0; j < n / 200; j++) x[(j * 104729) % n] = 3.0f + (float)j;
    for (size_t j = 0; j < n / 150; j++) x[(j * 7 + 3) % n] += 1e-3f * (float)(j % 13 + 1);
    check_topk_case("rare", "topk:1%", x, n);
    /* fewer nonzero entries than k; none at all */
    memset(x, 0, n * sizeof *x);
    for (size_t j = 0; j < 30; j++) x[j * 33331] = (float)j - 14.5f;
    check_topk_case("sparse", "topk:1%", x, n);
    memset(x, 0, n * sizeof *x);
    check_topk_case("zeros", "topk:1%", x, n);
    /* small vectors (the exact band): every k from 1 to n */
    for (size_t i = 0; i < 40; i++) x[i] = (float)((i * 17) % 11) - 5.0f;
    for (int kk = 1; kk <= 40; kk++) {
        char spec[32];
        snprintf(spec, sizeof spec, "topk:%d", kk);
        check_topk_case(spec, spec, x, 40);
    }
    free(x);
}
END_TEST

START_TEST(test_randk)
{
    const size_t n = 100003;
    float *x = data(n, 9), *y = malloc(n * sizeof *y), *prev = calloc(n, sizeof *prev);
    hs_compressor_t *c = make("randk:1%", n, 11);
    size_t k = hs_compressor_k(c);
    ck_assert_uint_eq(k, 1001);
    int differs = 0;
    for (int rep = 0; rep < 3; rep++) {
        ck_assert_uint_eq(round_trip(c, x, y, n), 4 + 8 * k);
        size_t nz = 0, stratum_hits = 0;
        for (size_t j = 0; j < k; j++) {
            size_t lo = j * n / k, hi = (j + 1) * n / k, hit = 0;
            for (size_t i = lo; i < hi; i++) hit += y[i] != 0;
            stratum_hits += hit == 1;
        }
        for (size_t i = 0; i < n; i++) {
            if (y[i] != 0) ck_assert(y[i] == x[i]), nz++;
            if ((y[i] != 0) != (prev[i] != 0)) differs = 1;
        }
        ck_assert_uint_eq(nz, k);
        ck_assert_uint_eq(stratum_hits, k);
        memcpy(prev, y, n * sizeof *y);
    }
    ck_assert_msg(differs, "random-k chose the same indices every round");
    /* the same seed chooses the same indices */
    hs_compressor_t *c2 = make("randk:1%", n, 11);
    float *y2 = malloc(n * sizeof *y2);
    hs_compressor_destroy(&c);
    c = make("randk:1%", n, 11);
    round_trip(c, x, y, n);
    round_trip(c2, x, y2, n);
    ck_assert(!memcmp(y, y2, n * sizeof *y));
    /* a malformed message is refused: index out of range, then out of order */
    unsigned char *w = malloc(hs_compressor_max_bytes(c));
    size_t bytes;
    ck_assert_int_eq(hs_compress(c, x, w, &bytes), 0);
    uint32_t bad = (uint32_t)n;
    memcpy(w + 4 + 4 * 5, &bad, 4);
    ck_assert_int_eq(hs_decompress(c, w, bytes, y), -EPROTO);
    bad = 0;
    memcpy(w + 4 + 4 * 5, &bad, 4);
    ck_assert_int_eq(hs_decompress(c, w, bytes, y), -EPROTO);
    ck_assert_int_eq(hs_decompress(c, w, bytes - 1, y), -EPROTO);
    free(w);
    hs_compressor_destroy(&c);
    hs_compressor_destroy(&c2);
    free(x);
    free(y);
    free(y2);
    free(prev);
}
END_TEST

START_TEST(test_specs)
{
    hs_compress_spec_t s;
    ck_assert_int_eq(hs_compress_parse(NULL, &s), 0);
    ck_assert_int_eq(s.kind, HS_COMPRESS_NONE);
    ck_assert_int_eq(hs_compress_parse("int8:stochastic:chunk=128", &s), 0);
    ck_assert(s.kind == HS_COMPRESS_INT8 && s.stochastic && s.chunk == 128);
    ck_assert(hs_compress_unbiased(&s));
    ck_assert_int_eq(hs_compress_parse("topk:0.5%", &s), 0);
    ck_assert(s.kind == HS_COMPRESS_TOPK && fabs(s.k_frac - 0.005) < 1e-15);
    ck_assert(!hs_compress_unbiased(&s));
    /* bytes on the wire (docs/algorithms.md) */
    ck_assert_uint_eq(hs_compress_max_bytes(&s, 1000), 4 + 8 * 5);
    ck_assert_int_eq(hs_compress_parse("int8", &s), 0);
    ck_assert_uint_eq(hs_compress_max_bytes(&s, 1025), 1025 + 4 * 3);
    ck_assert_int_eq(hs_compress_parse("bf16", &s), 0);
    ck_assert_uint_eq(hs_compress_max_bytes(&s, 1025), 2050);

    struct {
        const char *spec, *says;
    } bad[] = {
        {"zip", "unknown compressor 'zip'"},
        {"topk", "give k"},
        {"topk:0", "at least 1"},
        {"topk:-3", "at least 1"},
        {"randk:0%", "percentage"},
        {"randk:150%", "percentage"},
        {"topk:abc", "not a count"},
        {"int8:fast", "unknown int8 option 'fast'"},
        {"int8:chunk=3", "chunk"},
        {"fp16:x", "no options"},
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(bad); i++) {
        ck_assert_int_eq(hs_compress_parse(bad[i].spec, &s), -EINVAL);
        ck_assert_msg(strstr(hs_last_error(), bad[i].says), "%s: '%s' lacks '%s'", bad[i].spec,
                      hs_last_error(), bad[i].says);
    }
    /* k above the model size, or rounding to 0 parameters */
    hs_compressor_t *c = NULL;
    ck_assert_int_eq(hs_compressor_create(&c, "topk:101", 100, 1), -EINVAL);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "larger than the model (100 parameters)"));
    ck_assert_ptr_null(c);
    ck_assert_int_eq(hs_compressor_create(&c, "randk:100", 100, 1), 0);
    ck_assert_uint_eq(hs_compressor_k(c), 100);
    hs_compressor_destroy(&c);
}
END_TEST

/* Bound to the emulated device (its memory poisoned for the host under --sanitize): every kind
 * gives the bytes hs_compress gives for the same values, the same stream call after call, and
 * decompress_add on the device gives hs_decompress_add's vector, bit for bit; a message the host
 * would refuse is refused before it reaches the device; the CPU backend binds to nothing. */
START_TEST(test_on_device)
{
    static const char *const specs[] = {
        "none", "fp16", "bf16", "int8", "int8:stochastic:chunk=100", "topk:5%", "randk:3%"};
    const size_t n = 5003; /* odd: the vector loops' tails */
    hs_kernels_t *k = NULL, *cpu = NULL;
    ck_assert_int_eq(hs_kernels_open(&k, HS_DEV_EMU, 0, 1), 0);
    ck_assert_int_eq(hs_kernels_open(&cpu, HS_DEV_CPU, 0, 1), 0);
    float *x = data(n, 11), *y = malloc(n * sizeof *y), *yd = malloc(n * sizeof *yd);
    float *dx = NULL, *dy = NULL;
    ck_assert_int_eq(k->ops->alloc(k, n * sizeof(float), (void **)&dx), 0);
    ck_assert_int_eq(k->ops->alloc(k, n * sizeof(float), (void **)&dy), 0);
    ck_assert_int_eq(k->ops->to_device(k, dx, x, n * sizeof(float)), 0);
    for (size_t si = 0; si < sizeof specs / sizeof specs[0]; si++) {
        const char *spec = specs[si];
        hs_compressor_t *h = make(spec, n, 7), *d = make(spec, n, 7), *r = make(spec, n, 7);
        ck_assert_int_eq(hs_compressor_bind(d, k), 0);
        ck_assert_int_eq(hs_compressor_bind(r, k), 0);
        ck_assert_int_eq(hs_compressor_bind(d, k), -EINVAL); /* once */
        int topk = strncmp(spec, "topk", 4) == 0;
        ck_assert_int_eq(hs_compressor_on_device(d), !topk);
        size_t mb = hs_compressor_max_bytes(h);
        unsigned char *wh = malloc(mb), *wd = malloc(mb);
        for (int call = 0; call < 3; call++) { /* the stream moves on alike */
            size_t bh = 0, bd = 0;
            ck_assert_int_eq(hs_compress(h, x, wh, &bh), 0);
            int rc = hs_compress_dev(d, dx, wd, &bd);
            ck_assert_msg(rc == 0, "%s: %s", spec, hs_last_error());
            ck_assert_uint_eq(bh, bd);
            ck_assert_msg(memcmp(wh, wd, bh) == 0, "%s call %d: device bytes differ", spec, call);
            /* y = 0.25 + 0.5 Q(x), on the host and on the device (the bytes left there) */
            for (size_t i = 0; i < n; i++) y[i] = 0.25f;
            ck_assert_int_eq(hs_decompress_add(h, wh, bh, 0.5f, y), 0);
            for (size_t i = 0; i < n; i++) yd[i] = 0.25f;
            ck_assert_int_eq(k->ops->to_device(k, dy, yd, n * sizeof(float)), 0);
            ck_assert_int_eq(hs_decompress_add_dev(d, NULL, 0, 0.5f, dy), 0);
            ck_assert_int_eq(k->ops->to_host(k, yd, dy, n * sizeof(float)), 0);
            ck_assert_msg(memcmp(y, yd, n * sizeof(float)) == 0, "%s: decoded on the device", spec);
            /* a message: from the host to the receiver's device */
            for (size_t i = 0; i < n; i++) yd[i] = 0.25f;
            ck_assert_int_eq(k->ops->to_device(k, dy, yd, n * sizeof(float)), 0);
            ck_assert_int_eq(hs_decompress_add_dev(r, wh, bh, 0.5f, dy), 0);
            ck_assert_int_eq(k->ops->to_host(k, yd, dy, n * sizeof(float)), 0);
            ck_assert_msg(memcmp(y, yd, n * sizeof(float)) == 0, "%s: a message", spec);
            /* a short message is refused on the host, the vector untouched */
            ck_assert_int_eq(hs_decompress_add_dev(r, wh, bh - 1, 0.5f, dy), -EPROTO);
            ck_assert_int_eq(k->ops->to_host(k, yd, dy, n * sizeof(float)), 0);
            ck_assert_int_eq(memcmp(y, yd, n * sizeof(float)), 0);
        }
        /* a host pointer where the device's vector goes: the emulated device faults */
        if (!topk) {
            size_t bd = 0;
            ck_assert_int_eq(hs_compress_dev(d, x, wd, &bd), -EFAULT);
        }
        free(wh);
        free(wd);
        hs_compressor_destroy(&h);
        hs_compressor_destroy(&d);
        hs_compressor_destroy(&r);
    }
    /* int8 on a non-finite value: -ERANGE from the device path too */
    hs_compressor_t *d = make("int8", n, 1);
    ck_assert_int_eq(hs_compressor_bind(d, k), 0);
    float inf = INFINITY;
    ck_assert_int_eq(k->ops->to_device(k, dx + 4000, &inf, sizeof inf), 0);
    unsigned char *w = malloc(hs_compressor_max_bytes(d));
    size_t bd = 0;
    ck_assert_int_eq(hs_compress_dev(d, dx, w, &bd), -ERANGE);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "non-finite"));
    hs_compressor_destroy(&d);
    free(w);
    /* the CPU: no binding, host vectors */
    d = make("fp16", n, 1);
    w = malloc(hs_compressor_max_bytes(d));
    ck_assert_int_eq(hs_compressor_bind(d, cpu), 0);
    ck_assert_int_eq(hs_compressor_on_device(d), 0);
    ck_assert_int_eq(hs_decompress_add_dev(d, NULL, 0, 1.0f, y), -EINVAL); /* nothing yet */
    ck_assert_int_eq(hs_compress_dev(d, x, w, &bd), 0);
    ck_assert_int_eq(hs_decompress_add_dev(d, NULL, 0, 1.0f, y), 0);
    hs_compressor_destroy(&d);
    free(w);
    k->ops->free(k, dx);
    k->ops->free(k, dy);
    free(x);
    free(y);
    free(yd);
    hs_kernels_close(&k);
    hs_kernels_close(&cpu);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("compress");
    TCase *tc = tcase_create("compressors");
    /* A hang guard, not a speed test: the case takes about 14 s of CPU on the 2-core machine
     * (most of it the page faults of the 1M-entry vectors) and took over 60 s beside 8
     * CPU-bound processes and the suite's other job (scripts/test-load.sh): 300 s is that
     * measurement with a margin of 2-3. */
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_none_fp16_bf16);
    tcase_add_test(tc, test_int8);
    tcase_add_test(tc, test_topk);
    tcase_add_test(tc, test_topk_adversarial);
    tcase_add_test(tc, test_randk);
    tcase_add_test(tc, test_specs);
    tcase_add_test(tc, test_on_device);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
