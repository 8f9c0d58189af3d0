/*
 * tests/test_sgp.c — multi-process tests of the distributed training loop: `hearsay run -n N --
 * hearsay train --algo A` ($HS_BIN) on a tiny synthetic task, asserting on summary.json, the
 * per-rank CSVs and exit statuses. Every job runs under `timeout` (bounded) in its own
 * directory under $TMPDIR.
 */
#include "hearsay/common.h"

#include <check.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_bin[PATH_MAX];

#define TASK                                                                                       \
    "--model mlp:16-32-4 --data gauss:dim=16,classes=4,train=2000,test=500 --batch 32 "            \
    "--threads 1 --quiet --comm-timeout 10 --drain-timeout 5"

/* Run `hearsay run -n n -- hearsay train ARGS --out DIR` bounded by limit_s; returns the exit
 * status (124 on timeout) and the elapsed seconds in *el. */
static int run_job(int n, const char *dir, const char *args, double limit_s, double *el)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "rm -rf '%s' && timeout -k 2 %.0f '%s' run -n %d -- '%s' train %s --out '%s' "
             ">'%s.log' 2>&1",
             dir, limit_s, g_bin, n, g_bin, args, dir, dir);
    double t0 = hs_now();
    int st = system(cmd);
    if (el) *el = hs_now() - t0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* The number after "key": in DIR/summary.json (NAN when absent or null). */
static double summary_num(const char *dir, const char *key)
{
    char path[PATH_MAX], pat[128], buf[65536];
    snprintf(path, sizeof path, "%s/summary.json", dir);
    FILE *f = fopen(path, "r");
    if (!f) return NAN;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(buf, pat);
    if (!p) return NAN;
    p += strlen(pat);
    if (!strncmp(p, "null", 4)) return NAN;
    return strtod(p, NULL);
}

static int summary_has(const char *dir, const char *text)
{
    char cmd[PATH_MAX + 256];
    snprintf(cmd, sizeof cmd, "grep -q '%s' '%s/summary.json'", text, dir);
    return system(cmd) == 0;
}

static void tmpdir(char *out, size_t n, const char *name)
{
    const char *t = getenv("TMPDIR");
    snprintf(out, n, "%s/hs_test_sgp_%d_%s", t ? t : "/tmp", (int)getpid(), name);
}

static void show_log(const char *dir)
{
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "tail -n 20 '%s.log' >&2", dir);
    if (system(cmd)) { /* nothing to show */
    }
}

/* Every algorithm reaches a target test loss on the synthetic task. */
static void reaches_target(const char *algo, const char *extra)
{
    char dir[PATH_MAX], args[1024];
    tmpdir(dir, sizeof dir, algo);
    snprintf(args, sizeof args, "%s --algo %s %s --epochs 4 --lr 0.05 --target-loss 0.2", TASK,
             algo, extra);
    double el;
    int st = run_job(4, dir, args, 90, &el);
    if (st) show_log(dir);
    ck_assert_int_eq(st, 0);
    double loss = summary_num(dir, "final_test_loss");
    ck_assert_msg(loss < 0.2, "%s: final test loss %g", algo, loss);
    ck_assert_msg(isfinite(summary_num(dir, "time_to_target_s")), "%s: target never reached", algo);
    ck_assert_int_eq((int)summary_num(dir, "ranks"), 4);
}

START_TEST(test_allreduce_target)
{
    reaches_target("allreduce", "");
}
END_TEST

START_TEST(test_dpsgd_target)
{
    reaches_target("dpsgd", "--graph biring");
}
END_TEST

START_TEST(test_sgp_target)
{
    reaches_target("sgp", "");
}
END_TEST

START_TEST(test_osgp_target)
{
    reaches_target("osgp", "--tau 3");
}
END_TEST

/* Push-sum weight is conserved: sum over ranks = N at the end, with random stragglers. */
START_TEST(test_sgp_weight_sum)
{
    char dir[PATH_MAX];
    tmpdir(dir, sizeof dir, "wsum");
    int st = run_job(4, dir,
                     TASK " --algo sgp --epochs 2 --straggler pause:all:p=0.2:exp=2ms "
                          "--straggler slow:1:x3",
                     90, NULL);
    if (st) show_log(dir);
    ck_assert_int_eq(st, 0);
    double w = summary_num(dir, "ps_weight_sum");
    ck_assert_msg(fabs(w - 4.0) < 1e-6, "sum of push-sum weights %.12g, expected 4", w);
    ck_assert(summary_has(dir, "\"failed_ranks\": \\[\\]"));
}
END_TEST

/* A bad straggler spec is rejected at flag parsing with exit status 2. */
START_TEST(test_bad_straggler_spec)
{
    char dir[PATH_MAX];
    tmpdir(dir, sizeof dir, "badspec");
    int st = run_job(2, dir, TASK " --algo sgp --straggler pause:1:p=1.5:fixed=1s", 30, NULL);
    ck_assert_int_ne(st, 0);
}
END_TEST

/* D-PSGD refuses a directed graph. */
START_TEST(test_dpsgd_directed)
{
    char dir[PATH_MAX];
    tmpdir(dir, sizeof dir, "dpsgd_dir");
    int st = run_job(4, dir, TASK " --algo dpsgd --graph ring", 30, NULL); /* directed on 4 */
    ck_assert_int_ne(st, 0);
}
END_TEST

/* A crashed rank under all-reduce SGD stops the run with an error within 10 s. */
START_TEST(test_allreduce_crash)
{
    char dir[PATH_MAX];
    tmpdir(dir, sizeof dir, "ar_crash");
    double el;
    int st =
        run_job(4, dir, TASK " --algo allreduce --epochs 50 --straggler crash:2:iter=20", 40, &el);
    ck_assert_int_ne(st, 0);
    ck_assert_int_ne(st, 124);
    ck_assert_msg(el < 10.0 + 3.0, "the run took %.1f s to stop", el);
}
END_TEST

/* A crashed rank under SGP: the others finish and report it. */
START_TEST(test_sgp_crash)
{
    char dir[PATH_MAX];
    tmpdir(dir, sizeof dir, "sgp_crash");
    int st = run_job(4, dir, TASK " --algo sgp --epochs 3 --straggler crash:2:iter=20", 60, NULL);
    if (st) show_log(dir);
    ck_assert_int_eq(st, 0);
    ck_assert(summary_has(dir, "rank 2 failed at/after iteration"));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("sgp");
    TCase *tc = tcase_create("multiprocess");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_bad_straggler_spec);
    tcase_add_test(tc, test_dpsgd_directed);
    tcase_add_test(tc, test_allreduce_target);
    tcase_add_test(tc, test_dpsgd_target);
    tcase_add_test(tc, test_allreduce_crash);
    tcase_add_test(tc, test_sgp_target);
    tcase_add_test(tc, test_osgp_target);
    tcase_add_test(tc, test_sgp_weight_sum);
    tcase_add_test(tc, test_sgp_crash);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    const char *b = getenv("HS_BIN");
    if (!b || access(b, X_OK) != 0) {
        printf("test_sgp: skipped (HS_BIN does not name the built hearsay)\n");
        return 77;
    }
    snprintf(g_bin, sizeof g_bin, "%s", b);
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
