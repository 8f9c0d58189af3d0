/* util/rng.c — xoshiro256** with splitmix64 seeding; normal, exponential, gamma draws. */
#include "hearsay/rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

void hs_rng_seed(hs_rng_t *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ (0xD1B54A32D192ED03ull * (stream + 1));
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
    r->have_spare = 0;
    r->spare = 0.0;
}

uint64_t hs_rng_u64(hs_rng_t *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double hs_rng_uniform(hs_rng_t *r)
{
    return (double)(hs_rng_u64(r) >> 11) * 0x1.0p-53;
}

uint64_t hs_rng_below(hs_rng_t *r, uint64_t n)
{
    if (n <= 1) return 0;
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t v;
    do v = hs_rng_u64(r);
    while (v >= limit);
    return v % n;
}

double hs_rng_normal(hs_rng_t *r)
{
    if (r->have_spare) {
        r->have_spare = 0;
        return r->spare;
    }
    double u, v, s;
    do {
        u = 2.0 * hs_rng_uniform(r) - 1.0;
        v = 2.0 * hs_rng_uniform(r) - 1.0;
        s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    double m = sqrt(-2.0 * log(s) / s);
    r->spare = v * m;
    r->have_spare = 1;
    return u * m;
}

double hs_rng_exponential(hs_rng_t *r, double mean)
{
    return -mean * log1p(-hs_rng_uniform(r));
}

double hs_rng_gamma(hs_rng_t *r, double shape)
{
    if (shape < 1.0) {
        /* Boost: Gamma(a) = Gamma(a + 1) * U^(1/a). */
        double u = hs_rng_uniform(r);
        return hs_rng_gamma(r, shape + 1.0) * pow(u > 0 ? u : 1e-300, 1.0 / shape);
    }
    double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x = hs_rng_normal(r), v = 1.0 + c * x;
        if (v <= 0) continue;
        v = v * v * v;
        double u = hs_rng_uniform(r);
        if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
        if (log(u) < 0.5 * x * x + d * (1.0 - v + log(v))) return d * v;
    }
}

void hs_rng_shuffle_int(hs_rng_t *r, int *a, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)hs_rng_below(r, i);
        int t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}
