/*
 * tests/test_scale.c — jobs of many ranks on one host: SGP on 16 and on 32 ranks and the
 * all-reduce on 32 (`hearsay run -n N -- hearsay train`, hsshm, a small model, 64
 * iterations). Every rank finishes, nothing fails, the push-sum weights sum to N, and the
 * averaged model learns (SGP with so many ranks per core mixes slowly: ~0.6 after 64 rounds,
 * chance is 1.39; the all-reduce ~0.007); each job is bounded (60 s) and its duration printed. On 2
 * cores: ~3 s for 16 ranks, ~6 s for 32.
 */
#include "hearsay/common.h"

#include <check.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>

#include "tests/runlib.h"

#define LIMIT_S 60

/* `hearsay run -n n -- hearsay train --algo algo ...` with 2 epochs of 32 iterations; the
 * averaged model's test loss must end below max_loss. */
static void scale_job(int n, const char *algo, double max_loss)
{
    char dir[PATH_MAX], args[512];
    snprintf(dir, sizeof dir, "%s_%d", algo, n);
    char path[PATH_MAX];
    tr_workdir_path(path, sizeof path, dir);
    snprintf(args, sizeof args,
             "--algo %s --model mlp:16-32-4 --data gauss:dim=16,classes=4,train=%d,test=500 "
             "--batch 16 --epochs 2 --threads 1 --quiet --comm-timeout 20 --drain-timeout 10",
             algo, 512 * n);
    double el = 0;
    int st = tr_train_job(n, NULL, path, args, LIMIT_S, &el);
    printf("%s on %d ranks: %s in %.1f s\n", algo, n, tr_status_text(st), el);
    fflush(stdout);
    if (st != 0) tr_show_log(path);
    ck_assert_msg(st == 0, "%s on %d ranks: %s", algo, n, tr_status_text(st));
    ck_assert_int_eq((long)tr_summary_num(path, "ranks"), n);
    ck_assert_int_eq((long)tr_summary_num(path, "iterations"), 64);
    for (int r = 0; r < n; r++)
        ck_assert_msg(tr_summary_rank_num(path, r, "finished") == 1, "rank %d did not finish", r);
    ck_assert_msg(tr_summary_has(path, "\"failed_ranks\": []"), "a rank failed");
    double w = tr_summary_num(path, "ps_weight_sum"),
           loss = tr_summary_num(path, "final_test_loss");
    ck_assert_msg(fabs(w - n) < 1e-6, "sum of weights %.12g, not %d", w, n);
    ck_assert_msg(loss < max_loss, "averaged model's test loss %g (chance: 1.39)", loss);
}

START_TEST(test_sgp_16)
{
    scale_job(16, "sgp", 1.0); /* 64 asynchronous rounds over 16 ranks: ~0.6 */
}
END_TEST

START_TEST(test_sgp_32)
{
    scale_job(32, "sgp", 1.0); /* ~0.5 */
}
END_TEST

START_TEST(test_allreduce_32)
{
    scale_job(32, "allreduce", 0.1); /* ~0.007 */
}
END_TEST

int main(void)
{
    if (tr_workdir_init("scale") < 0) return 1;
    Suite *s = suite_create("scale");
    const char *why = tr_require(NULL);
    TCase *tc = tcase_create("ranks");
    tcase_set_timeout(tc, LIMIT_S + 30);
    TR_ADD_TEST(tc, test_sgp_16, why);
    TR_ADD_TEST(tc, test_sgp_32, why);
    TR_ADD_TEST(tc, test_allreduce_32, why);
    suite_add_tcase(s, tc);
    return tr_run_suite(s);
}
