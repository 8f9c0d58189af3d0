/*
 * hearsay/straggler.h — seeded, per-rank straggler and fault injection (--straggler SPEC).
 *
 * An hs_straggler_t is built on every rank from the same list of spec strings (the repeatable
 * --straggler flag), the run's --seed, and the rank's place in the job. Each rank computes its
 * own draws without communication. Every draw depends only on (seed, spec index, rank,
 * iteration) — never on call order or on how many times a function was called — so a run
 * repeats exactly and the functions below are pure and thread-safe.
 *
 * Spec grammar (the full text, with examples, is hs_straggler_help(); see docs/stragglers.md):
 *   slow:RANKS:xK                 fixed slowdown: compute time x K (K >= 1)
 *   pause:RANKS:p=P:DIST[:max=D]  each iteration, with probability P, a pause drawn from DIST:
 *                                 fixed=D | exp=D (mean) | lognormal=MU,SIGMA (of ln seconds)
 *                                 | lognormal=median=D,sigma=S | lognormal=mean=D,sigma=S
 *   once:RANKS:iter=N:D           a one-off pause of D at iteration N
 *   hetero:LO-HI                  every rank draws a fixed slowdown uniformly in [LO, HI]
 *   crash:RANKS:iter=N            the rank crashes (its process exits abruptly) at iteration N
 *   freeze:RANKS:at=N:for=D|forever  the rank's whole process stops at iteration N (SIGSTOP)
 *   RANKS: all | R | R1,R2 | A-B, combined ("0,2-5").  D: a duration, 200ms, 1.5s, 2m, 500us;
 *   a bare number is seconds.
 *
 * Use in a training loop (iterations counted from 0):
 *     double t0 = hs_now();  ...compute iteration it...;  double c = hs_now() - t0;
 *     if (hs_straggler_crash(s, it)) _exit(...);          // main/loop only, never the library
 *     hs_sleep(hs_straggler_delay(s, it, c));
 * A slowdown xK is emulated by sleeping (K-1) x the measured compute time, never by burning
 * CPU (DESIGN.md: waiting never spins on a shared core).
 */
#ifndef HEARSAY_STRAGGLER_H
#define HEARSAY_STRAGGLER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hs_straggler hs_straggler_t;

/* Build the injector of rank `rank` (0 <= rank < ranks) from `n` spec strings (`specs` may be
 * NULL when n == 0: an injector that never delays). Every spec is validated against the job
 * size; a bad one gives -EINVAL with a message that quotes the spec and names the bad token
 * ("--straggler 'pause:1:p=1.5:fixed=1s': 'p=1.5': the probability must be in [0, 1]").
 * Returns 0 or a negative errno code; *out is NULL on failure. */
int hs_straggler_create(hs_straggler_t **out, const char *const *specs, size_t n, uint64_t seed,
                        int rank, int ranks);

/* Free the injector and null the handle (NULL or *s == NULL is fine). */
void hs_straggler_free(hs_straggler_t **s);

/* Validate one spec without building an injector (for flag parsing). With ranks > 0 every
 * rank named must be < ranks; with ranks <= 0 the job size is unknown and not checked.
 * Returns 0 or -EINVAL with the same message as hs_straggler_create. */
int hs_straggler_check(const char *spec, int ranks);
/* Validate a list of specs (hs_straggler_check on each) and, with ranks > 0, that the
 * slowdowns of no rank multiply past the largest factor (1e6; a hetero range counts with its
 * HI). Returns 0 or -EINVAL with the message hs_straggler_create would give. */
int hs_straggler_check_list(const char *const *specs, size_t n, int ranks);

/* The extra seconds this rank must be delayed after computing iteration `iter` (>= 0) for
 * `compute_s` seconds: (K-1) * compute_s, where K is the product of every slowdown that applies
 * to this rank (slow, hetero), plus every pause drawn for this iteration (pause, once).
 * The pause part alone is hs_straggler_delay(s, iter, 0). Pure: equal arguments give equal
 * results, in any order. Never negative. */
double hs_straggler_delay(const hs_straggler_t *s, long iter, double compute_s);

/* 1 when this rank must crash at iteration `iter` (exactly the N of a crash spec naming this
 * rank), else 0. The caller (the training loop, not the library) then exits the process
 * abruptly, without draining or saying goodbye, to simulate a node failure. */
int hs_straggler_crash(const hs_straggler_t *s, long iter);

/* The seconds this rank's whole process freezes at the start of iteration `iter` (a freeze
 * spec naming this rank and that iteration): 0 none, INFINITY for good. The loop stops the
 * process (SIGSTOP, with a helper that sends SIGCONT after the duration); the simulator stops
 * the rank and its services in virtual time. */
double hs_straggler_freeze(const hs_straggler_t *s, long iter);

/* The crash at iteration `iter` is followed by a replacement (crash:RANKS:iter=N:rejoin=D):
 * D in seconds (>= 0), else -1 (no crash there, or no replacement). */
double hs_straggler_rejoin(const hs_straggler_t *s, long iter);

/* 1 when a spec of the list asks for a replacement of a crashed rank (rejoin=D), *rank (NULL:
 * not asked) the lowest rank replaced in a job of `ranks`; 0 when none; -EINVAL on a bad spec
 * (ranks <= 0: the ranks are not checked, *rank stays -1). */
int hs_straggler_any_rejoin(const char *const *specs, size_t n, int ranks, int *rank);

/* 1 when rank `rank` of a job of `ranks` is replaced after a crash (a crash spec with rejoin=D
 * names it), 0 when not, -EINVAL on a bad spec. */
int hs_straggler_replaced(const char *const *specs, size_t n, int ranks, int rank);

/* The first iteration at which this rank crashes, or -1 when it never does. */
long hs_straggler_crash_iter(const hs_straggler_t *s);

/* The fixed slowdown factor K of this rank (product of slow and hetero; 1 when none). */
double hs_straggler_slowdown(const hs_straggler_t *s);

/* 1 when any spec applies to this rank (it may be delayed or crash), else 0. */
int hs_straggler_active(const hs_straggler_t *s);

/* One line for logs, e.g. "rank 3: slowdown x4; pause p=0.1 exp(mean 0.2s); crash at iter 50"
 * or "rank 0: none". Writes at most len bytes (NUL-terminated, truncated if needed) and returns
 * the length the full line needs, like snprintf. */
int hs_straggler_describe(const hs_straggler_t *s, char *buf, size_t len);

/* The grammar as a usage text (several lines, ending in a newline), for `hearsay train --help`
 * and the README. A static string. */
const char *hs_straggler_help(void);

#ifdef __cplusplus
}
#endif
#endif
