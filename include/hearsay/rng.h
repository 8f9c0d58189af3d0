/*
 * hearsay/rng.h — seeded pseudo-random numbers (xoshiro256** seeded by splitmix64).
 *
 * Every random choice in Hearsay (data order, initialisation, straggler draws, random graphs)
 * draws from an hs_rng_t seeded from --seed, so a run can be repeated. Streams for different
 * purposes or ranks are derived with hs_rng_seed(&r, seed, stream) so they do not overlap.
 */
#ifndef HEARSAY_RNG_H
#define HEARSAY_RNG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hs_rng {
    uint64_t s[4];
    int have_spare; /* Box–Muller keeps its second normal */
    double spare;
} hs_rng_t;

/* Seed from (seed, stream): equal pairs give equal sequences, different streams differ. */
void hs_rng_seed(hs_rng_t *r, uint64_t seed, uint64_t stream);
uint64_t hs_rng_u64(hs_rng_t *r);
/* Uniform in [0, 1). */
double hs_rng_uniform(hs_rng_t *r);
/* Uniform integer in [0, n), n > 0, without modulo bias. */
uint64_t hs_rng_below(hs_rng_t *r, uint64_t n);
/* Standard normal N(0, 1). */
double hs_rng_normal(hs_rng_t *r);
/* Exponential with the given mean (> 0). */
double hs_rng_exponential(hs_rng_t *r, double mean);
/* Gamma(shape, 1), shape > 0 (Marsaglia–Tsang); used for Dirichlet draws. */
double hs_rng_gamma(hs_rng_t *r, double shape);
/* Fisher–Yates shuffle of n ints in place. */
void hs_rng_shuffle_int(hs_rng_t *r, int *a, size_t n);

#ifdef __cplusplus
}
#endif
#endif
