/* tests/test_optim.c — SGD (momentum, Nesterov, weight decay) against a scalar reference and on
 * a least-squares problem with a closed-form solution; learning-rate schedules against their
 * closed forms. SGD runs on every backend this build and machine offer (CPU, and CUDA when a
 * GPU is present). */
#include "hearsay/common.h"
#include "hearsay/kernels.h"
#include "hearsay/optim.h"
#include "optim/ps_wire.h"
#include "hearsay/rng.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- learning-rate schedules ------------------------------------------------------------- */

static hs_lr_schedule_t sched(const char *spec, double run_epochs, const char *warmup)
{
    hs_lr_schedule_t s;
    int rc = hs_lr_parse(spec, run_epochs, &s);
    ck_assert_msg(rc == 0, "parse '%s': %s", spec, hs_last_error());
    if (warmup) {
        rc = hs_lr_set_warmup(&s, warmup);
        ck_assert_msg(rc == 0, "warmup '%s': %s", warmup, hs_last_error());
    }
    return s;
}

#define ASSERT_NEAR(a, b, tol)                                                                     \
    do {                                                                                           \
        double a_ = (a), b_ = (b);                                                                 \
        ck_assert_msg(fabs(a_ - b_) <= (tol), "%s = %.17g, expected %.17g", #a, a_, b_);           \
    } while (0)

START_TEST(test_lr_constant)
{
    hs_lr_schedule_t s = sched("constant", 0, NULL);
    ck_assert(hs_lr_at(&s, 0, 100, 0.1) == 0.1);
    ck_assert(hs_lr_at(&s, 123456, 100, 0.1) == 0.1);
    ck_assert(hs_lr_at(&s, -5, 0, 0.3) == 0.3); /* clamped inputs */
}
END_TEST

START_TEST(test_lr_step)
{
    const double b = 0.4;
    hs_lr_schedule_t s = sched("step:30,60,80:0.1", 90, NULL);
    ck_assert_int_eq(s.n_milestones, 3);
    const long ipe = 100;
    struct {
        long it;
        double lr;
    } pts[] = {{0, b},           {2999, b},        {3000, b * 0.1},   {5999, b * 0.1},
               {6000, b * 0.01}, {7999, b * 0.01}, {8000, b * 0.001}, {1000000, b * 0.001}};
    for (size_t i = 0; i < HS_ARRAY_LEN(pts); i++)
        ASSERT_NEAR(hs_lr_at(&s, pts[i].it, ipe, b), pts[i].lr, 1e-15);
    /* Fractional epochs and the default gamma 0.1; 0.3 * 10 iterations lands exactly on 3. */
    s = sched("step:0.3,1.5", 0, NULL);
    ck_assert(s.gamma == 0.1);
    ASSERT_NEAR(hs_lr_at(&s, 2, 10, 1.0), 1.0, 0);
    ASSERT_NEAR(hs_lr_at(&s, 3, 10, 1.0), 0.1, 1e-15);
    ASSERT_NEAR(hs_lr_at(&s, 14, 10, 1.0), 0.1, 1e-15);
    ASSERT_NEAR(hs_lr_at(&s, 15, 10, 1.0), 0.01, 1e-15);
    /* Milestones in iterations ignore the epoch length. */
    s = sched("step:100it,250it:0.5", 0, NULL);
    for (long ipe2 = 1; ipe2 < 1000; ipe2 *= 7) {
        ASSERT_NEAR(hs_lr_at(&s, 99, ipe2, 1.0), 1.0, 0);
        ASSERT_NEAR(hs_lr_at(&s, 100, ipe2, 1.0), 0.5, 0);
        ASSERT_NEAR(hs_lr_at(&s, 250, ipe2, 1.0), 0.25, 0);
    }
}
END_TEST

static double cosine_ref(double t, double T, double base, double fin)
{
    if (t >= T) return fin;
    return fin + (base - fin) * 0.5 * (1.0 + cos(M_PI * t / T));
}

START_TEST(test_lr_cosine)
{
    const double b = 0.1, f = 0.001;
    hs_lr_schedule_t s = sched("cosine:10:0.001", 0, NULL);
    const long ipe = 50;                                        /* 10 epochs = 500 iterations */
    ASSERT_NEAR(hs_lr_at(&s, 0, ipe, b), b, 1e-15);             /* start */
    ASSERT_NEAR(hs_lr_at(&s, 250, ipe, b), (b + f) / 2, 1e-15); /* middle */
    ASSERT_NEAR(hs_lr_at(&s, 125, ipe, b),                      /* quarter */
                f + (b - f) * (1 + sqrt(0.5)) / 2, 1e-15);
    ASSERT_NEAR(hs_lr_at(&s, 500, ipe, b), f, 1e-15); /* end */
    ASSERT_NEAR(hs_lr_at(&s, 900, ipe, b), f, 0);     /* after */
    for (long it = 0; it < 600; it += 37)
        ASSERT_NEAR(hs_lr_at(&s, it, ipe, b), cosine_ref(it / 50.0, 10, b, f), 1e-15);
    /* Monotone decreasing. */
    for (long it = 1; it <= 500; it++)
        ck_assert(hs_lr_at(&s, it, ipe, b) <= hs_lr_at(&s, it - 1, ipe, b));
    /* Length from the run, final lr 0 by default. */
    s = sched("cosine", 20, NULL);
    ASSERT_NEAR(hs_lr_at(&s, 10 * 7, 7, 1.0), 0.5, 1e-15);
    ASSERT_NEAR(hs_lr_at(&s, 20 * 7, 7, 1.0), 0.0, 1e-15);
    /* Length in iterations. */
    s = sched("cosine:1000it", 0, NULL);
    ASSERT_NEAR(hs_lr_at(&s, 500, 3, 2.0), 1.0, 1e-15);
    ASSERT_NEAR(hs_lr_at(&s, 1000, 99, 2.0), 0.0, 1e-15);
}
END_TEST

START_TEST(test_lr_warmup)
{
    /* 5-epoch warm-up into a 90-epoch cosine, 10 iterations per epoch: W = 50 iterations. */
    const double b = 0.8;
    hs_lr_schedule_t s = sched("cosine:90", 0, "5");
    const long ipe = 10, W = 50;
    double target = cosine_ref(5, 90, b, 0);
    for (long i = 0; i < W; i++)
        ASSERT_NEAR(hs_lr_at(&s, i, ipe, b), target * (double)(i + 1) / (W + 1), 1e-15);
    /* Linear: constant increments, and the step into the main schedule is one more of them. */
    double inc = hs_lr_at(&s, 1, ipe, b) - hs_lr_at(&s, 0, ipe, b);
    ck_assert(inc > 0);
    for (long i = 1; i <= W; i++)
        ASSERT_NEAR(hs_lr_at(&s, i, ipe, b) - hs_lr_at(&s, i - 1, ipe, b), inc, 1e-14);
    ASSERT_NEAR(hs_lr_at(&s, W, ipe, b), target, 1e-15);
    ck_assert(hs_lr_at(&s, 0, ipe, b) > 0); /* no step with lr 0 */
    /* After the warm-up: the main schedule, unchanged. */
    for (long i = W; i < 900; i += 13)
        ASSERT_NEAR(hs_lr_at(&s, i, ipe, b), cosine_ref(i / 10.0, 90, b, 0), 1e-15);

    /* Warm-up into a step schedule, in iterations; "0" removes it. */
    s = sched("step:30,60:0.1", 0, "200it");
    ASSERT_NEAR(hs_lr_at(&s, 0, 100, 1.0), 1.0 / 201, 1e-15);
    ASSERT_NEAR(hs_lr_at(&s, 199, 100, 1.0), 200.0 / 201, 1e-15);
    ASSERT_NEAR(hs_lr_at(&s, 200, 100, 1.0), 1.0, 0);
    ASSERT_NEAR(hs_lr_at(&s, 3000, 100, 1.0), 0.1, 1e-15);
    ck_assert_int_eq(hs_lr_set_warmup(&s, "0"), 0);
    ASSERT_NEAR(hs_lr_at(&s, 0, 100, 1.0), 1.0, 0);
    /* Fractional warm-up: 0.5 epoch of 7 iterations = 3.5 iterations. */
    s = sched("constant", 0, "0.5");
    ASSERT_NEAR(hs_lr_at(&s, 3, 7, 1.0), 4.0 / 4.5, 1e-15);
    ASSERT_NEAR(hs_lr_at(&s, 4, 7, 1.0), 1.0, 0);
}
END_TEST

/* Issue 17 item 8: the push-sum header check is overflow-safe whatever n the caller gives:
 * 128 + n * 4 + extra wrapped for n = 2^62 (to 128: a bare header passed) and for n = 2^64 - 1
 * with extra = 4. */
START_TEST(test_ps_hdr_check_overflow)
{
    hs_ps_hdr_v1_t h;
    hs_ps_hdr_init(&h, HS_PS_GOSSIP, 1, 7, 0.5, 4);
    ck_assert_int_eq(hs_ps_hdr_check(&h, 128 + 16, HS_PS_GOSSIP, 1, 4), 0);
    h.extra = 24;
    ck_assert_int_eq(hs_ps_hdr_check(&h, 128 + 16 + 24, HS_PS_GOSSIP, 1, 4), 0);
    ck_assert_int_eq(hs_ps_hdr_check(&h, 128 + 16, HS_PS_GOSSIP, 1, 4), -EPROTO);
    ck_assert_int_eq(hs_ps_hdr_check(&h, 128 + 16 + 24, HS_PS_EVAL, 1, 4), -EPROTO);
    ck_assert_int_eq(hs_ps_hdr_check(&h, 100, HS_PS_GOSSIP, 1, 4), -EPROTO);
    static const struct {
        uint64_t n;
        uint32_t extra;
        size_t bytes;
    } bad[] = {
        {1ull << 62, 0, 128},
        {(1ull << 62) + 1, 0, 132},
        {1ull << 63, 0, 128},
        {UINT64_MAX, 4, 128},
        {UINT64_MAX, 0, 124},
        {(UINT64_MAX >> 2) + 1, 0, 128},
        {UINT64_MAX >> 2, 0xFFFFFFFFu, 128 + 0xFFFFFFFFull - 4},
        {(UINT64_MAX >> 2) - 1, 8, SIZE_MAX},
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(bad); i++) {
        h.length = bad[i].n;
        h.extra = bad[i].extra;
        hs_error_clear();
        ck_assert_msg(hs_ps_hdr_check(&h, bad[i].bytes, HS_PS_GOSSIP, 1, (size_t)bad[i].n) ==
                          -EPROTO,
                      "n %llu extra %u in %zu bytes accepted", (unsigned long long)bad[i].n,
                      bad[i].extra, bad[i].bytes);
        ck_assert_ptr_nonnull(strstr(hs_last_error(), "rank 1"));
    }
}
END_TEST

START_TEST(test_lr_parse_errors)
{
    static const struct {
        const char *spec, *expect;
    } bad[] = {
        {"", "empty"},
        {"stp:30", "unknown kind 'stp'"},
        {"step", "step:M1,M2"},
        {"step:", "milestones"},
        {"step:30,20", "increase"},
        {"step:30,abc:0.1", "'abc'"},
        {"step:30,,60", "milestone ''"},
        {"step:30:0", "gamma '0'"},
        {"step:30:x", "gamma 'x'"},
        {"step:30:0.1:9", "step:M1,M2"},
        {"step:10,20it", "mix"},
        {"cosine:0", "length '0'"},
        {"cosine:-1", "length '-1'"},
        {"cosine:10:-0.1", "final lr '-0.1'"},
        {"cosine", "needs a length"},
        {"cosine:1:2:3", "cosine[:LENGTH"},
        {"constant:5", "no parameters"},
        /* issue 17 item 2: every number range-checked (a gamma of 1e300 made the lr infinite
         * after two milestones, a final lr of 1e300 likewise) */
        {"step:30:1e300", "gamma '1e300'"},
        {"step:30:101", "gamma '101'"},
        {"step:30:nan", "gamma 'nan'"},
        {"step:30:1e400", "gamma '1e400'"},
        {"step:1e400", "milestone '1e400'"},
        {"step:1e13", "milestone '1e13'"},
        {"step:30,inf", "milestone 'inf'"},
        {"cosine:10:1e300", "final lr '1e300'"},
        {"cosine:10:nan", "final lr 'nan'"},
        {"cosine:1e13", "length '1e13'"},
        {"cosine:nan", "length 'nan'"},
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(bad); i++) {
        hs_lr_schedule_t s;
        hs_error_clear();
        ck_assert_int_eq(hs_lr_parse(bad[i].spec, 0, &s), -EINVAL);
        const char *e = hs_last_error();
        ck_assert_msg(strstr(e, bad[i].expect), "'%s': error '%s' lacks '%s'", bad[i].spec, e,
                      bad[i].expect);
        if (*bad[i].spec) {
            char quoted[64];
            snprintf(quoted, sizeof quoted, "'%s'", bad[i].spec);
            ck_assert_msg(strstr(e, quoted), "error '%s' does not quote the spec", e);
        }
    }
    hs_lr_schedule_t s = sched("constant", 0, NULL);
    const char *bad_w[] = {"abc", "-1", "5x", "", "nan", "1e999", "1e13", "1e13it", "infit"};
    for (size_t i = 0; i < HS_ARRAY_LEN(bad_w); i++) {
        ck_assert_int_eq(hs_lr_set_warmup(&s, bad_w[i]), -EINVAL);
        ck_assert_ptr_nonnull(strstr(hs_last_error(), "warm-up"));
    }
}
END_TEST

START_TEST(test_lr_format_round_trip)
{
    const char *specs[] = {"constant",
                           "step:30,60,80:0.1",
                           "step:0.5,1.25it:0.5",
                           "step:100it,250it:0.3",
                           "cosine:90:0.001",
                           "cosine:5000it:0",
                           "cosine"};
    const char *want[] = {
        "constant",        "step:30,60,80:0.1", NULL,         "step:100it,250it:0.3",
        "cosine:90:0.001", "cosine:5000it:0",   "cosine:45:0"};
    for (size_t i = 0; i < HS_ARRAY_LEN(specs); i++) {
        hs_lr_schedule_t a, b;
        int rc = hs_lr_parse(specs[i], 45, &a);
        if (!want[i]) { /* mixed units are refused */
            ck_assert_int_eq(rc, -EINVAL);
            continue;
        }
        ck_assert_int_eq(rc, 0);
        char buf[HS_LR_SPEC_MAX];
        hs_lr_format(&a, buf, sizeof buf);
        ck_assert_str_eq(buf, want[i]);
        ck_assert_int_eq(hs_lr_parse(buf, 0, &b), 0);
        for (long it = 0; it < 10000; it += 97)
            ck_assert(hs_lr_at(&a, it, 50, 0.1) == hs_lr_at(&b, it, 50, 0.1));
    }
    char buf[32];
    hs_lr_format_span((hs_lr_span_t){.value = 0.1, .iters = 0}, buf, sizeof buf);
    ck_assert_str_eq(buf, "0.1");
    hs_lr_format_span((hs_lr_span_t){.value = 500, .iters = 1}, buf, sizeof buf);
    ck_assert_str_eq(buf, "500it");
}
END_TEST

/* ---- SGD ----------------------------------------------------------------------------------- */

static hs_device_t dev_of(int i)
{
    return i == 0 ? HS_DEV_CPU : HS_DEV_CUDA;
}

/* Open backend `i` (0 CPU, 1 CUDA); NULL when CUDA is not usable here. */
static hs_kernels_t *open_backend(int i)
{
    if (dev_of(i) == HS_DEV_CUDA && !hs_cuda_available()) return NULL;
    hs_kernels_t *k = NULL;
    int rc = hs_kernels_open(&k, dev_of(i), 0, 1);
    ck_assert_msg(rc == 0, "open %s: %s", i ? "cuda" : "cpu", hs_last_error());
    return k;
}

static float *dev_from(hs_kernels_t *k, const float *host, size_t n)
{
    void *p = NULL;
    ck_assert_int_eq(k->ops->alloc(k, n * sizeof(float), &p), 0);
    ck_assert_int_eq(k->ops->to_device(k, p, host, n * sizeof(float)), 0);
    return p;
}

/* PyTorch's SGD, one parameter at a time, in double. */
static void sgd_ref(size_t n, double lr, double mom, double wd, int nesterov, double *p,
                    const float *g, double *v)
{
    for (size_t i = 0; i < n; i++) {
        double gi = g[i] + wd * p[i];
        v[i] = mom * v[i] + gi;
        double step = mom == 0 ? gi : nesterov ? gi + mom * v[i] : v[i];
        p[i] -= lr * step;
    }
}

START_TEST(test_sgd_matches_reference)
{
    const hs_sgd_config_t cfgs[] = {
        {.momentum = 0, .weight_decay = 0, .nesterov = 0},
        {.momentum = 0, .weight_decay = 0.01f, .nesterov = 0},
        {.momentum = 0.9f, .weight_decay = 0, .nesterov = 0},
        {.momentum = 0.9f, .weight_decay = 1e-2f, .nesterov = 1},
        {.momentum = 0.5f, .weight_decay = 1e-3f, .nesterov = 0},
    };
    const size_t n = 1003; /* odd: exercises vector tails */
    const float lrs[] = {0.1f, 0.05f, 0.2f, 0.01f, 0.1f, 0.3f};
    for (int b = 0; b < 2; b++) {
        hs_kernels_t *k = open_backend(b);
        if (!k) continue;
        for (size_t c = 0; c < HS_ARRAY_LEN(cfgs); c++) {
            hs_rng_t r;
            hs_rng_seed(&r, 42, c);
            float *p0 = malloc(n * sizeof(float)), *g = malloc(n * sizeof(float));
            float *got = malloc(n * sizeof(float));
            double *pref = calloc(n, sizeof(double)), *vref = calloc(n, sizeof(double));
            for (size_t i = 0; i < n; i++) pref[i] = p0[i] = (float)hs_rng_normal(&r);
            float *dp = dev_from(k, p0, n), *dg = dev_from(k, p0, n);
            hs_sgd_t *opt = NULL;
            ck_assert_int_eq(hs_sgd_open(&opt, k, n, &cfgs[c]), 0);
            for (size_t step = 0; step < HS_ARRAY_LEN(lrs); step++) {
                for (size_t i = 0; i < n; i++) g[i] = (float)hs_rng_normal(&r);
                ck_assert_int_eq(k->ops->to_device(k, dg, g, n * sizeof(float)), 0);
                ck_assert_int_eq(hs_sgd_step(opt, dp, dg, lrs[step]), 0);
                sgd_ref(n, lrs[step], cfgs[c].momentum, cfgs[c].weight_decay, cfgs[c].nesterov,
                        pref, g, vref);
            }
            ck_assert_int_eq(k->ops->to_host(k, got, dp, n * sizeof(float)), 0);
            for (size_t i = 0; i < n; i++)
                ck_assert_msg(fabs(got[i] - pref[i]) <= 1e-5 * (1 + fabs(pref[i])),
                              "backend %d config %zu: param[%zu] = %.9g, reference %.9g", b, c, i,
                              (double)got[i], pref[i]);
            /* The velocity is the checkpointable state: it matches the reference too. */
            size_t nv = 99;
            float *vel = hs_sgd_velocity(opt, &nv);
            if (cfgs[c].momentum == 0) {
                ck_assert_ptr_null(vel);
                ck_assert_uint_eq(nv, 0);
            } else {
                ck_assert_uint_eq(nv, n);
                ck_assert_int_eq(k->ops->to_host(k, got, vel, n * sizeof(float)), 0);
                for (size_t i = 0; i < n; i++)
                    ck_assert(fabs(got[i] - vref[i]) <= 1e-5 * (1 + fabs(vref[i])));
                ck_assert_int_eq(hs_sgd_reset(opt), 0);
                ck_assert_int_eq(k->ops->to_host(k, got, vel, n * sizeof(float)), 0);
                for (size_t i = 0; i < n; i++) ck_assert(got[i] == 0.0f);
            }
            ck_assert(hs_sgd_config(opt)->momentum == cfgs[c].momentum);
            hs_sgd_close(&opt);
            ck_assert_ptr_null(opt);
            k->ops->free(k, dp);
            k->ops->free(k, dg);
            free(p0), free(g), free(got), free(pref), free(vref);
        }
        hs_kernels_close(&k);
    }
}
END_TEST

START_TEST(test_sgd_rejects_bad_config)
{
    hs_kernels_t *k = open_backend(0);
    hs_sgd_t *opt = (hs_sgd_t *)1;
    const struct {
        hs_sgd_config_t c;
        const char *expect;
    } bad[] = {
        {{.momentum = 1.0f}, "momentum 1"},
        {{.momentum = -0.1f}, "momentum -0.1"},
        {{.momentum = NAN}, "momentum"},
        {{.weight_decay = -1e-4f}, "weight decay"},
        {{.weight_decay = INFINITY}, "weight decay"},
        {{.momentum = 0, .nesterov = 1}, "Nesterov"},
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(bad); i++) {
        ck_assert_int_eq(hs_sgd_open(&opt, k, 10, &bad[i].c), -EINVAL);
        ck_assert_ptr_null(opt);
        ck_assert_msg(strstr(hs_last_error(), bad[i].expect), "'%s' lacks '%s'", hs_last_error(),
                      bad[i].expect);
    }
    hs_sgd_config_t ok = {.momentum = 0.9f};
    ck_assert_int_eq(hs_sgd_open(&opt, k, 4, &ok), 0);
    float p[4] = {0}, g[4] = {1, 1, 1, 1};
    float *dp = dev_from(k, p, 4), *dg = dev_from(k, g, 4);
    ck_assert_int_eq(hs_sgd_step(opt, dp, dg, -0.1f), -EINVAL);
    ck_assert_int_eq(hs_sgd_step(opt, dp, dg, NAN), -EINVAL);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "learning rate"));
    /* A refused step leaves the parameters alone. */
    ck_assert_int_eq(k->ops->to_host(k, p, dp, sizeof p), 0);
    ck_assert(p[0] == 0.0f);
    k->ops->free(k, dp);
    k->ops->free(k, dg);
    hs_sgd_close(&opt);
    hs_sgd_close(&opt); /* twice is harmless */
    hs_kernels_close(&k);
}
END_TEST

/* Solve the d x d system M x = y in place by Gaussian elimination with partial pivoting. */
static void solve(int d, double *M, double *y)
{
    for (int c = 0; c < d; c++) {
        int piv = c;
        for (int r = c + 1; r < d; r++)
            if (fabs(M[r * d + c]) > fabs(M[piv * d + c])) piv = r;
        for (int j = 0; j < d; j++) {
            double t = M[c * d + j];
            M[c * d + j] = M[piv * d + j];
            M[piv * d + j] = t;
        }
        double t = y[c];
        y[c] = y[piv];
        y[piv] = t;
        for (int r = c + 1; r < d; r++) {
            double f = M[r * d + c] / M[c * d + c];
            for (int j = c; j < d; j++) M[r * d + j] -= f * M[c * d + j];
            y[r] -= f * y[c];
        }
    }
    for (int c = d - 1; c >= 0; c--) {
        for (int j = c + 1; j < d; j++) y[c] -= M[c * d + j] * y[j];
        y[c] /= M[c * d + c];
    }
}

/* f(x) = 0.5 ||A x - b||^2 (+ wd/2 ||x||^2 through the optimizer's weight decay): SGD with
 * momentum reaches the closed-form minimiser (A^T A + wd I)^-1 A^T b. */
static void run_least_squares(hs_kernels_t *k, const hs_sgd_config_t *cfg, int steps)
{
    enum { M = 24, D = 6 };
    double A[M * D], bv[M], AtA[D * D], x_star[D];
    hs_rng_t r;
    hs_rng_seed(&r, 7, 0);
    for (int i = 0; i < M * D; i++) A[i] = hs_rng_normal(&r);
    for (int i = 0; i < M; i++) bv[i] = hs_rng_normal(&r);
    for (int i = 0; i < D; i++) {
        x_star[i] = 0;
        for (int m = 0; m < M; m++) x_star[i] += A[m * D + i] * bv[m];
        for (int j = 0; j < D; j++) {
            double s = 0;
            for (int m = 0; m < M; m++) s += A[m * D + i] * A[m * D + j];
            AtA[i * D + j] = s + (i == j ? cfg->weight_decay : 0);
        }
    }
    /* Largest eigenvalue of A^T A by power iteration: lr = 1 / L is stable with momentum. */
    double v[D], L = 0;
    for (int i = 0; i < D; i++) v[i] = 1;
    for (int it = 0; it < 200; it++) {
        double w[D], nrm = 0;
        for (int i = 0; i < D; i++) {
            w[i] = 0;
            for (int j = 0; j < D; j++) w[i] += AtA[i * D + j] * v[j];
            nrm += w[i] * w[i];
        }
        L = sqrt(nrm);
        for (int i = 0; i < D; i++) v[i] = w[i] / L;
    }
    double Mtmp[D * D];
    memcpy(Mtmp, AtA, sizeof Mtmp);
    solve(D, Mtmp, x_star);

    float x[D] = {0}, g[D];
    float *dx = dev_from(k, x, D), *dg = dev_from(k, x, D);
    hs_sgd_t *opt = NULL;
    ck_assert_int_eq(hs_sgd_open(&opt, k, D, cfg), 0);
    for (int s = 0; s < steps; s++) {
        ck_assert_int_eq(k->ops->to_host(k, x, dx, sizeof x), 0);
        for (int i = 0; i < D; i++) { /* g = A^T (A x - b), without the weight decay */
            double gi = 0;
            for (int m = 0; m < M; m++) {
                double res = -bv[m];
                for (int j = 0; j < D; j++) res += A[m * D + j] * x[j];
                gi += A[m * D + i] * res;
            }
            g[i] = (float)gi;
        }
        ck_assert_int_eq(k->ops->to_device(k, dg, g, sizeof g), 0);
        ck_assert_int_eq(hs_sgd_step(opt, dx, dg, (float)(1.0 / L)), 0);
    }
    ck_assert_int_eq(k->ops->to_host(k, x, dx, sizeof x), 0);
    double err = 0, nrm = 0;
    for (int i = 0; i < D; i++) {
        err += (x[i] - x_star[i]) * (x[i] - x_star[i]);
        nrm += x_star[i] * x_star[i];
    }
    ck_assert_msg(sqrt(err) <= 1e-4 * (1 + sqrt(nrm)),
                  "momentum %g nesterov %d wd %g: |x - x*| = %g (|x*| = %g)", (double)cfg->momentum,
                  cfg->nesterov, (double)cfg->weight_decay, sqrt(err), sqrt(nrm));
    hs_sgd_close(&opt);
    k->ops->free(k, dx);
    k->ops->free(k, dg);
}

START_TEST(test_sgd_least_squares)
{
    const hs_sgd_config_t cfgs[] = {
        {.momentum = 0},
        {.momentum = 0.9f},
        {.momentum = 0.9f, .nesterov = 1},
        {.momentum = 0.5f, .weight_decay = 2.0f, .nesterov = 1},
    };
    for (int b = 0; b < 2; b++) {
        hs_kernels_t *k = open_backend(b);
        if (!k) continue;
        for (size_t c = 0; c < HS_ARRAY_LEN(cfgs); c++) run_least_squares(k, &cfgs[c], 1500);
        hs_kernels_close(&k);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("optim");
    TCase *tc = tcase_create("schedules");
    tcase_add_test(tc, test_lr_constant);
    tcase_add_test(tc, test_lr_step);
    tcase_add_test(tc, test_lr_cosine);
    tcase_add_test(tc, test_lr_warmup);
    tcase_add_test(tc, test_lr_parse_errors);
    tcase_add_test(tc, test_lr_format_round_trip);
    suite_add_tcase(s, tc);
    TCase *ts = tcase_create("sgd");
    tcase_add_test(ts, test_sgd_matches_reference);
    tcase_add_test(ts, test_sgd_rejects_bad_config);
    tcase_add_test(ts, test_sgd_least_squares);
    suite_add_tcase(s, ts);
    TCase *tw = tcase_create("wire");
    tcase_add_test(tw, test_ps_hdr_check_overflow);
    suite_add_tcase(s, tw);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
