/* tests/test_straggler.c — the --straggler grammar, rank sets, units and the seeded draws. */
#include "hearsay/common.h"
#include "hearsay/straggler.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Build rank `rank` of `ranks` from one spec; fails the test when it is rejected. */
static hs_straggler_t *make1(const char *spec, uint64_t seed, int rank, int ranks)
{
    hs_straggler_t *s = NULL;
    int rc = hs_straggler_create(&s, &spec, 1, seed, rank, ranks);
    ck_assert_msg(rc == 0, "'%s' rejected: %s", spec, hs_last_error());
    ck_assert_ptr_nonnull(s);
    return s;
}

START_TEST(test_grammar_accepted)
{
    static const char *const good[] = {
        "slow:3:x4",
        "slow:0,2-3:x2",
        "slow:all:x1.5",
        "slow:7:x1",
        "pause:1:p=0.05:fixed=200ms",
        "pause:all:p=1:exp=200ms",
        "pause:0-7:p=0:exp=1",
        "pause:2:p=0.1:lognormal=-1.6,0.5",
        "pause:2:p=0.1:lognormal=median=200ms,sigma=0.5",
        "pause:2:p=0.1:lognormal=mean=0.3s,sigma=1:max=5s",
        "pause:2:p=0.1:lognormal=median=200ms,0.5",
        "once:1:iter=100:2s",
        "once:1,3:iter=0:500us",
        "once:1:iter=5:1m",
        "once:1:iter=5:3",
        "hetero:1-3",
        "hetero:1.5-1.5",
        "crash:2:iter=500",
        "crash:0-1:iter=0",
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(good); i++) {
        ck_assert_msg(hs_straggler_check(good[i], 8) == 0, "'%s': %s", good[i], hs_last_error());
        ck_assert_msg(hs_straggler_check(good[i], 0) == 0, "'%s': %s", good[i], hs_last_error());
    }
    /* Several specs together. */
    hs_straggler_t *s = NULL;
    ck_assert_int_eq(hs_straggler_create(&s, good, HS_ARRAY_LEN(good), 1, 3, 8), 0);
    hs_straggler_free(&s);
    ck_assert_ptr_null(s);
    hs_straggler_free(&s); /* freeing NULL is fine */
}
END_TEST

START_TEST(test_grammar_rejected_names_bad_part)
{
    static const struct {
        const char *spec;
        int ranks;
        const char *shows; /* the message must contain this (the bad part) */
    } cases[] = {
        {"pause:1:p=1.5:fixed=1s", 8, "'p=1.5': the probability must be in [0, 1]"},
        {"pause:1:p=-0.1:fixed=1s", 8, "'p=-0.1'"},
        {"pause:1:q=0.1:fixed=1s", 8, "'q=0.1'"},
        {"pause:1:p=0.1:gauss=1s", 8, "'gauss=1s'"},
        {"pause:1:p=0.1:exp=0", 8, "'exp=0'"},
        {"pause:1:p=0.1:exp=-2s", 8, "'exp=-2s'"},
        {"pause:1:p=0.1:fixed=200xs", 8, "unknown unit 'xs'"},
        {"pause:1:p=0.1:fixed=abc", 8, "'fixed=abc'"},
        {"pause:1:p=0.1:lognormal=1", 8, "'lognormal=1'"},
        {"pause:1:p=0.1:lognormal=median=0,sigma=1", 8, "'lognormal=median=0,sigma=1'"},
        {"pause:1:p=0.1:lognormal=median=1s,sigma=-1", 8, "sigma '-1'"},
        {"pause:1:p=0.1:fixed=1s:cap=2s", 8, "'cap=2s'"},
        {"pause:1:p=0.1:fixed=1s:max=2s:more", 8, "'more': unexpected extra field"},
        {"pause:1:p=0.1", 8, "missing fields: expected pause:RANKS:p=P:DIST"},
        {"slow:3:4", 8, "'4': expected a slowdown factor xK"},
        {"slow:3:x0.5", 8, "'x0.5': the slowdown factor must be in [1"},
        {"slow:3:xfast", 8, "'xfast'"},
        {"slow:3", 8, "missing fields: expected slow:RANKS:xK"},
        {"slow:3:x2:x3", 8, "'x3': unexpected extra field"},
        {"slow:9:x2", 8, "'9': rank 9 is out of range for a job of 8 ranks (0-7)"},
        {"slow:0,2-8:x2", 8, "'2-8': rank 8 is out of range for a job of 8 ranks"},
        {"slow:1:x2", 1, "rank 1 is out of range for a job of 1 rank (0-0)"},
        {"slow:5-2:x2", 8, "'5-2': empty rank range"},
        {"slow:a:x2", 8, "'a': not a rank"},
        {"slow:-1:x2", 8, "'-1': not a rank range"},
        {"slow:1,,2:x2", 8, "'1,,2': empty entry"},
        {"slow::x2", 8, "empty rank list"},
        {"slowdown:3:x2", 8, "'slowdown': unknown kind"},
        {"", 8, "empty spec"},
        {"once:1:iter=-3:2s", 8, "'iter=-3'"},
        {"once:1:it=3:2s", 8, "'it=3'"},
        {"once:1:iter=3:2parsecs", 8, "unknown unit 'parsecs'"},
        {"hetero:3-1", 8, "'3-1': the range must satisfy"},
        {"hetero:0.5-2", 8, "'0.5-2'"},
        {"hetero:2", 8, "'2': expected a range LO-HI"},
        {"crash:1:iter=x", 8, "'iter=x'"},
        {"crash:4:iter=10", 4, "rank 4 is out of range for a job of 4 ranks"},
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(cases); i++) {
        hs_error_clear();
        int rc = hs_straggler_check(cases[i].spec, cases[i].ranks);
        ck_assert_msg(rc == -EINVAL, "'%s' accepted", cases[i].spec);
        const char *msg = hs_last_error();
        ck_assert_msg(strstr(msg, cases[i].shows) != NULL, "'%s': message '%s' lacks '%s'",
                      cases[i].spec, msg, cases[i].shows);
        /* The whole spec is quoted after the flag's name. */
        char quoted[600];
        snprintf(quoted, sizeof quoted, "--straggler '%s'", cases[i].spec);
        ck_assert_msg(strstr(msg, quoted) != NULL, "message '%s' does not quote the spec", msg);
        /* create rejects it the same way, leaving *out NULL. */
        if (cases[i].ranks > 0) {
            hs_straggler_t *s = (hs_straggler_t *)&rc; /* not NULL: create must clear it */
            const char *spec = cases[i].spec;
            ck_assert_int_eq(hs_straggler_create(&s, &spec, 1, 1, 0, cases[i].ranks), -EINVAL);
            ck_assert_ptr_null(s);
            ck_assert_ptr_nonnull(strstr(hs_last_error(), cases[i].shows));
        }
    }
    /* The job size is only checked when known. */
    ck_assert_int_eq(hs_straggler_check("slow:100:x2", 0), 0);
    /* A bad spec among good ones is named. */
    const char *specs[] = {"slow:1:x2", "pause:1:p=2:fixed=1s"};
    hs_straggler_t *s = NULL;
    ck_assert_int_eq(hs_straggler_create(&s, specs, 2, 1, 0, 4), -EINVAL);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "'pause:1:p=2:fixed=1s'"));
    /* Bad (rank, ranks) pairs. */
    ck_assert_int_eq(hs_straggler_create(&s, specs, 1, 1, 4, 4), -EINVAL);
    ck_assert_int_eq(hs_straggler_create(&s, specs, 1, 1, 0, 0), -EINVAL);
    ck_assert_int_eq(hs_straggler_create(&s, NULL, 1, 1, 0, 4), -EINVAL);
}
END_TEST

START_TEST(test_rank_sets)
{
    /* Expected membership written out by hand for 8 ranks. */
    static const struct {
        const char *spec;
        int member[8];
    } cases[] = {
        {"slow:3:x2", {0, 0, 0, 1, 0, 0, 0, 0}},       {"slow:0,2-3:x2", {1, 0, 1, 1, 0, 0, 0, 0}},
        {"slow:all:x2", {1, 1, 1, 1, 1, 1, 1, 1}},     {"slow:0-7:x2", {1, 1, 1, 1, 1, 1, 1, 1}},
        {"slow:6,1,4-5:x2", {0, 1, 0, 0, 1, 1, 1, 0}}, {"slow:2-2,7:x2", {0, 0, 1, 0, 0, 0, 0, 1}},
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(cases); i++)
        for (int r = 0; r < 8; r++) {
            hs_straggler_t *s = make1(cases[i].spec, 5, r, 8);
            double want = cases[i].member[r] ? 2.0 : 1.0;
            ck_assert_msg(hs_straggler_slowdown(s) == want, "'%s' rank %d: slowdown %g",
                          cases[i].spec, r, hs_straggler_slowdown(s));
            ck_assert_int_eq(hs_straggler_active(s), cases[i].member[r]);
            hs_straggler_free(&s);
        }
}
END_TEST

START_TEST(test_units)
{
    static const struct {
        const char *d;
        double seconds;
    } cases[] = {{"500us", 500e-6}, {"200ms", 0.2}, {"1.5s", 1.5},  {"2m", 120.0},
                 {"3", 3.0},        {"0", 0.0},     {"1e-3s", 1e-3}};
    for (size_t i = 0; i < HS_ARRAY_LEN(cases); i++) {
        char spec[64];
        snprintf(spec, sizeof spec, "once:0:iter=7:%s", cases[i].d);
        hs_straggler_t *s = make1(spec, 1, 0, 2);
        double got = hs_straggler_delay(s, 7, 0.0);
        ck_assert_msg(fabs(got - cases[i].seconds) <= 1e-12 * HS_MAX(1.0, cases[i].seconds),
                      "%s: %g s", cases[i].d, got);
        hs_straggler_free(&s);
        /* The same units in a fixed pause. */
        snprintf(spec, sizeof spec, "pause:0:p=1:fixed=%s", cases[i].d);
        s = make1(spec, 1, 0, 2);
        ck_assert(fabs(hs_straggler_delay(s, 3, 0.0) - cases[i].seconds) <=
                  1e-12 * HS_MAX(1.0, cases[i].seconds));
        hs_straggler_free(&s);
    }
}
END_TEST

/* Issue 17 item 2: every number of a spec is range-checked where it is parsed: overflowing,
 * not-a-number, infinite and huge values are refused naming the field, and slowdowns that
 * multiply past the largest factor are refused for the rank they reach. */
START_TEST(test_numbers_out_of_range)
{
    static const struct {
        const char *spec, *shows;
    } cases[] = {
        {"slow:3:x1e400", "'x1e400'"},
        {"slow:3:xnan", "'xnan'"},
        {"slow:3:xinf", "'xinf'"},
        {"slow:3:x1e7", "'x1e7': the slowdown factor must be in [1"},
        {"slow:99999999999:x2", "'99999999999': not a rank"},
        {"slow:2147483648:x2", "'2147483648': not a rank"},
        {"slow:0-99999999999999999999:x2", "not a rank range"},
        {"pause:1:p=nan:fixed=1s", "'p=nan'"},
        {"pause:1:p=1e400:fixed=1s", "'p=1e400'"},
        {"pause:1:p=0.1:fixed=1e400s", "'fixed=1e400s'"},
        {"pause:1:p=0.1:fixed=inf", "'fixed=inf'"},
        {"pause:1:p=0.1:fixed=nan", "'fixed=nan'"},
        {"pause:1:p=0.1:fixed=2e6", "'fixed=2e6': duration above"},
        {"pause:1:p=0.1:exp=1e300m", "'exp=1e300m': duration above"},
        {"pause:1:p=0.1:lognormal=nan,1", "mu 'nan'"},
        {"pause:1:p=0.1:lognormal=1e400,1", "mu '1e400'"},
        {"pause:1:p=0.1:lognormal=0,1e400", "sigma '1e400'"},
        {"pause:1:p=0.1:lognormal=0,inf", "sigma 'inf'"},
        {"pause:1:p=0.1:fixed=1s:max=1e400s", "'max=1e400s'"},
        {"once:1:iter=99999999999999999999:1s", "'iter=99999999999999999999'"},
        {"once:1:iter=3:1e7", "'1e7': duration above"},
        {"crash:1:iter=1e3", "'iter=1e3'"},
        {"hetero:1-1e400", "'1-1e400'"},
        {"hetero:nan-2", "'nan-2'"},
        {"hetero:1-inf", "'1-inf'"},
        {"hetero:1-2e6", "'1-2e6': the range must satisfy"},
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(cases); i++) {
        hs_error_clear();
        ck_assert_msg(hs_straggler_check(cases[i].spec, 8) == -EINVAL, "'%s' accepted",
                      cases[i].spec);
        ck_assert_msg(strstr(hs_last_error(), cases[i].shows) != NULL,
                      "'%s': message '%s' lacks '%s'", cases[i].spec, hs_last_error(),
                      cases[i].shows);
    }
    /* Slowdowns multiply: a rank they take past 1e6 is refused, the others are not. */
    const char *specs[] = {"slow:all:x1000", "slow:1:x1000", "hetero:2-2"};
    hs_straggler_t *s = NULL;
    ck_assert_int_eq(hs_straggler_create(&s, specs, 3, 1, 1, 4), -EINVAL);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(hs_last_error(), "rank 1") && strstr(hs_last_error(), "multiply"), "%s",
                  hs_last_error());
    ck_assert_int_eq(hs_straggler_create(&s, specs, 3, 1, 0, 4), 0);
    ck_assert(hs_straggler_slowdown(s) == 2000.0);
    hs_straggler_free(&s);
    /* The list check finds it at start, for the job size it is given. */
    ck_assert_int_eq(hs_straggler_check_list(specs, 3, 4), -EINVAL);
    ck_assert_msg(strstr(hs_last_error(), "rank 1") && strstr(hs_last_error(), "multiply"), "%s",
                  hs_last_error());
    ck_assert_int_eq(hs_straggler_check_list(specs, 2, 4), 0); /* x1e6 exactly is fine */
    ck_assert_int_eq(hs_straggler_check_list(specs, 3, 0), 0); /* job size unknown */
    const char *one_bad[] = {"slow:1:x2", "pause:1:p=2:fixed=1s"};
    ck_assert_int_eq(hs_straggler_check_list(one_bad, 2, 0), -EINVAL);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "'pause:1:p=2:fixed=1s'"));
}
END_TEST

START_TEST(test_slowdown_math)
{
    hs_straggler_t *s = make1("slow:1:x4", 1, 1, 4);
    ck_assert(hs_straggler_slowdown(s) == 4.0);
    ck_assert(fabs(hs_straggler_delay(s, 0, 0.25) - 0.75) < 1e-15);
    ck_assert(fabs(hs_straggler_delay(s, 99, 0.1) - 0.3) < 1e-15);
    ck_assert(hs_straggler_delay(s, 5, 0.0) == 0.0);
    hs_straggler_free(&s);
    /* Slowdowns multiply; pauses add on top. */
    const char *specs[] = {"slow:all:x2", "slow:1:x3", "once:1:iter=4:1s"};
    ck_assert_int_eq(hs_straggler_create(&s, specs, 3, 1, 1, 4), 0);
    ck_assert(hs_straggler_slowdown(s) == 6.0);
    ck_assert(fabs(hs_straggler_delay(s, 3, 0.5) - 2.5) < 1e-15);
    ck_assert(fabs(hs_straggler_delay(s, 4, 0.5) - 3.5) < 1e-15);
    hs_straggler_free(&s);
    /* x1 and the ranks not named are not delayed at all. */
    s = make1("slow:1:x1", 1, 1, 4);
    ck_assert(hs_straggler_delay(s, 0, 1.0) == 0.0);
    hs_straggler_free(&s);
    s = make1("slow:1:x8", 1, 2, 4);
    ck_assert(hs_straggler_delay(s, 0, 1.0) == 0.0);
    hs_straggler_free(&s);
    ck_assert(hs_straggler_delay(NULL, 0, 1.0) == 0.0);
    ck_assert(hs_straggler_slowdown(NULL) == 1.0);
}
END_TEST

START_TEST(test_determinism_and_call_order)
{
    const char *specs[] = {"pause:all:p=0.3:exp=100ms", "hetero:1-2",
                           "pause:1:p=0.5:lognormal=median=50ms,sigma=1"};
    enum { N = 400 };
    hs_straggler_t *a = NULL, *b = NULL, *c = NULL;
    ck_assert_int_eq(hs_straggler_create(&a, specs, 3, 42, 1, 4), 0);
    ck_assert_int_eq(hs_straggler_create(&b, specs, 3, 42, 1, 4), 0);
    ck_assert_int_eq(hs_straggler_create(&c, specs, 3, 43, 1, 4), 0);
    double fwd[N], rev[N];
    for (long it = 0; it < N; it++) fwd[it] = hs_straggler_delay(a, it, 0.01);
    /* Backwards, interleaved with extra calls, on another instance. */
    for (long it = N - 1; it >= 0; it--) {
        (void)hs_straggler_delay(b, (it * 7) % N, 0.02);
        rev[it] = hs_straggler_delay(b, it, 0.01);
    }
    int differ_seed = 0, pauses = 0;
    for (long it = 0; it < N; it++) {
        ck_assert_msg(fwd[it] == rev[it], "iter %ld: %g vs %g", it, fwd[it], rev[it]);
        ck_assert(fwd[it] == hs_straggler_delay(a, it, 0.01)); /* repeat on a */
        differ_seed += fwd[it] != hs_straggler_delay(c, it, 0.01);
        pauses += fwd[it] > (hs_straggler_slowdown(a) - 1) * 0.01 + 1e-12;
    }
    ck_assert(hs_straggler_slowdown(a) == hs_straggler_slowdown(b));
    ck_assert(hs_straggler_slowdown(a) != hs_straggler_slowdown(c));
    ck_assert_int_gt(pauses, N / 3);
    ck_assert_int_gt(differ_seed, N / 3);
    hs_straggler_free(&a);
    hs_straggler_free(&b);
    hs_straggler_free(&c);

    /* Draws of one spec do not depend on the other specs in the list (only on its index):
     * adding a spec after it leaves its pauses unchanged. Ranks draw independently. */
    const char *one[] = {"pause:all:p=0.5:fixed=1s"};
    const char *two[] = {"pause:all:p=0.5:fixed=1s", "crash:3:iter=1"};
    hs_straggler_t *x = NULL, *y = NULL, *z = NULL;
    ck_assert_int_eq(hs_straggler_create(&x, one, 1, 9, 0, 4), 0);
    ck_assert_int_eq(hs_straggler_create(&y, two, 2, 9, 0, 4), 0);
    ck_assert_int_eq(hs_straggler_create(&z, one, 1, 9, 1, 4), 0);
    int same_rank = 0;
    for (long it = 0; it < N; it++) {
        ck_assert(hs_straggler_delay(x, it, 0) == hs_straggler_delay(y, it, 0));
        same_rank += hs_straggler_delay(x, it, 0) == hs_straggler_delay(z, it, 0);
    }
    ck_assert_int_lt(same_rank, N * 3 / 4); /* ~N/2 expected when independent */
    hs_straggler_free(&x);
    hs_straggler_free(&y);
    hs_straggler_free(&z);
}
END_TEST

START_TEST(test_pause_probability)
{
    enum { N = 40000 };
    static const double ps[] = {0.0, 0.02, 0.2, 0.7, 1.0};
    for (size_t k = 0; k < HS_ARRAY_LEN(ps); k++) {
        char spec[64];
        snprintf(spec, sizeof spec, "pause:2:p=%g:fixed=10ms", ps[k]);
        hs_straggler_t *s = make1(spec, 77, 2, 3);
        int hits = 0;
        for (long it = 0; it < N; it++) {
            double d = hs_straggler_delay(s, it, 0.0);
            ck_assert(d == 0.0 || fabs(d - 0.01) < 1e-15);
            hits += d > 0;
        }
        /* Binomial: 5 standard deviations. */
        double sd = sqrt(ps[k] * (1 - ps[k]) / N);
        ck_assert_msg(fabs((double)hits / N - ps[k]) <= 5 * sd + 1e-12, "p=%g: %d / %d", ps[k],
                      hits, N);
        hs_straggler_free(&s);
    }
}
END_TEST

/* Mean, mean of logs and fraction below `below` of n pauses (p = 1). */
static void moments(const char *spec, int n, double below, double *mean, double *logmean,
                    double *logsd, double *frac_below, double *maxv)
{
    hs_straggler_t *s = make1(spec, 2024, 0, 1);
    double sum = 0, ls = 0, ls2 = 0, mx = 0;
    int nb = 0;
    for (long it = 0; it < n; it++) {
        double d = hs_straggler_delay(s, it, 0.0);
        ck_assert(d > 0);
        sum += d;
        ls += log(d);
        ls2 += log(d) * log(d);
        nb += d < below;
        mx = HS_MAX(mx, d);
    }
    *mean = sum / n;
    *logmean = ls / n;
    *logsd = sqrt(ls2 / n - *logmean * *logmean);
    *frac_below = (double)nb / n;
    *maxv = mx;
    hs_straggler_free(&s);
}

START_TEST(test_pause_distributions)
{
    enum { N = 40000 };
    double mean, lm, lsd, fb, mx;
    /* Exponential, mean 0.2 s: sd of the sample mean 0.2/sqrt(N) = 0.001; median 0.2 ln 2. */
    moments("pause:0:p=1:exp=200ms", N, 0.2 * log(2.0), &mean, &lm, &lsd, &fb, &mx);
    ck_assert_msg(fabs(mean - 0.2) < 0.006, "exp mean %g", mean);
    ck_assert_msg(fabs(fb - 0.5) < 0.015, "exp median fraction %g", fb);
    /* Log-normal by (mu, sigma) of ln seconds. */
    moments("pause:0:p=1:lognormal=-1.6,0.5", N, exp(-1.6), &mean, &lm, &lsd, &fb, &mx);
    ck_assert_msg(fabs(lm + 1.6) < 0.015, "lognormal mu %g", lm);
    ck_assert_msg(fabs(lsd - 0.5) < 0.015, "lognormal sigma %g", lsd);
    ck_assert_msg(fabs(mean - exp(-1.6 + 0.125)) < 0.005, "lognormal mean %g", mean);
    /* By median: half below 200 ms. */
    moments("pause:0:p=1:lognormal=median=200ms,sigma=0.5", N, 0.2, &mean, &lm, &lsd, &fb, &mx);
    ck_assert_msg(fabs(fb - 0.5) < 0.015, "lognormal median fraction %g", fb);
    ck_assert(fabs(lm - log(0.2)) < 0.015);
    ck_assert(fabs(mean - 0.2 * exp(0.125)) < 0.004);
    /* By mean. */
    moments("pause:0:p=1:lognormal=mean=300ms,sigma=0.8", N, 1e9, &mean, &lm, &lsd, &fb, &mx);
    ck_assert_msg(fabs(mean - 0.3) < 0.01, "lognormal by mean: %g", mean);
    ck_assert(fabs(lsd - 0.8) < 0.02);
    /* A cap: never above it, and it binds (P(d > 1 s) for median 0.2, sigma 1 is ~5 %). */
    moments("pause:0:p=1:lognormal=median=200ms,sigma=1:max=1s", N, 1.0 - 1e-12, &mean, &lm, &lsd,
            &fb, &mx);
    ck_assert(mx == 1.0);
    ck_assert_msg(fabs((1 - fb) - 0.0538) < 0.006, "capped fraction %g", 1 - fb);
}
END_TEST

START_TEST(test_once_fires_once)
{
    hs_straggler_t *s = make1("once:1:iter=100:2s", 3, 1, 4);
    int fired = 0;
    for (long it = 0; it < 1000; it++) {
        double d = hs_straggler_delay(s, it, 0.05);
        if (d > 0) {
            ck_assert_int_eq(it, 100);
            ck_assert(d == 2.0);
            fired++;
        }
    }
    ck_assert_int_eq(fired, 1);
    hs_straggler_free(&s);
    /* Not on other ranks. */
    s = make1("once:1:iter=100:2s", 3, 0, 4);
    ck_assert(hs_straggler_delay(s, 100, 0.05) == 0.0);
    ck_assert_int_eq(hs_straggler_active(s), 0);
    hs_straggler_free(&s);
}
END_TEST

START_TEST(test_hetero)
{
    enum { R = 64 };
    double f[R], sum = 0;
    for (int r = 0; r < R; r++) {
        hs_straggler_t *s = make1("hetero:1-3", 11, r, R);
        f[r] = hs_straggler_slowdown(s);
        ck_assert(f[r] >= 1.0 && f[r] <= 3.0);
        /* Fixed per rank: the same at every iteration and in another creation. */
        ck_assert(fabs(hs_straggler_delay(s, 0, 1.0) - (f[r] - 1)) < 1e-15);
        ck_assert(fabs(hs_straggler_delay(s, 12345, 1.0) - (f[r] - 1)) < 1e-15);
        hs_straggler_t *t = make1("hetero:1-3", 11, r, R);
        ck_assert(hs_straggler_slowdown(t) == f[r]);
        hs_straggler_free(&t);
        hs_straggler_free(&s);
        sum += f[r];
    }
    int distinct = 0;
    for (int i = 0; i < R; i++) {
        int dup = 0;
        for (int j = 0; j < i; j++) dup |= f[j] == f[i];
        distinct += !dup;
    }
    ck_assert_int_eq(distinct, R);
    /* Uniform on [1, 3]: mean 2, sd of the mean sqrt(1/3)/8 ~ 0.072. */
    ck_assert_msg(fabs(sum / R - 2.0) < 0.3, "hetero mean %g", sum / R);
    /* A degenerate range gives exactly LO. */
    hs_straggler_t *s = make1("hetero:2.5-2.5", 11, 0, 2);
    ck_assert(hs_straggler_slowdown(s) == 2.5);
    hs_straggler_free(&s);
}
END_TEST

START_TEST(test_crash)
{
    for (int r = 0; r < 4; r++) {
        hs_straggler_t *s = make1("crash:2:iter=50", 1, r, 4);
        for (long it = 0; it < 200; it++)
            ck_assert_int_eq(hs_straggler_crash(s, it), r == 2 && it == 50);
        ck_assert_int_eq(hs_straggler_crash_iter(s), r == 2 ? 50 : -1);
        ck_assert(hs_straggler_delay(s, 50, 0.1) == 0.0); /* a crash is not a delay */
        hs_straggler_free(&s);
    }
    /* Two crash specs: the earlier one is the crash iteration. */
    const char *specs[] = {"crash:1:iter=80", "crash:0-1:iter=30"};
    hs_straggler_t *s = NULL;
    ck_assert_int_eq(hs_straggler_create(&s, specs, 2, 1, 1, 2), 0);
    ck_assert_int_eq(hs_straggler_crash_iter(s), 30);
    ck_assert_int_eq(hs_straggler_crash(s, 30), 1);
    hs_straggler_free(&s);
    ck_assert_int_eq(hs_straggler_crash(NULL, 0), 0);
}
END_TEST

START_TEST(test_describe_and_help)
{
    const char *specs[] = {"slow:3:x4", "pause:3:p=0.1:exp=200ms", "crash:3:iter=50"};
    hs_straggler_t *s = NULL;
    ck_assert_int_eq(hs_straggler_create(&s, specs, 3, 1, 3, 4), 0);
    char line[256];
    int n = hs_straggler_describe(s, line, sizeof line);
    ck_assert_int_eq(n, (int)strlen(line));
    ck_assert_ptr_nonnull(strstr(line, "rank 3"));
    ck_assert_ptr_nonnull(strstr(line, "slowdown x4"));
    ck_assert_ptr_nonnull(strstr(line, "p=0.1"));
    ck_assert_ptr_nonnull(strstr(line, "exp(mean 0.2s)"));
    ck_assert_ptr_nonnull(strstr(line, "crash at iter 50"));
    /* Truncation keeps a NUL and reports the full length. */
    char small[10];
    ck_assert_int_eq(hs_straggler_describe(s, small, sizeof small), n);
    ck_assert_int_eq((int)strlen(small), 9);
    ck_assert(strncmp(small, line, 9) == 0);
    hs_straggler_free(&s);
    ck_assert_int_eq(hs_straggler_create(&s, specs, 3, 1, 0, 4), 0);
    hs_straggler_describe(s, line, sizeof line);
    ck_assert_str_eq(line, "rank 0: none");
    hs_straggler_free(&s);

    const char *help = hs_straggler_help();
    static const char *const kinds[] = {
        "slow:", "pause:", "once:", "hetero:", "crash:", "lognormal=median", "RANKS", "ms"};
    for (size_t i = 0; i < HS_ARRAY_LEN(kinds); i++) ck_assert_ptr_nonnull(strstr(help, kinds[i]));
    ck_assert(help[strlen(help) - 1] == '\n');
}
END_TEST

static Suite *straggler_suite(void)
{
    Suite *s = suite_create("straggler");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_grammar_accepted);
    tcase_add_test(tc, test_grammar_rejected_names_bad_part);
    tcase_add_test(tc, test_rank_sets);
    tcase_add_test(tc, test_units);
    tcase_add_test(tc, test_numbers_out_of_range);
    tcase_add_test(tc, test_slowdown_math);
    tcase_add_test(tc, test_determinism_and_call_order);
    tcase_add_test(tc, test_pause_probability);
    tcase_add_test(tc, test_pause_distributions);
    tcase_add_test(tc, test_once_fires_once);
    tcase_add_test(tc, test_hetero);
    tcase_add_test(tc, test_crash);
    tcase_add_test(tc, test_describe_and_help);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(straggler_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
