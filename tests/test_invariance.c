/*
 * tests/test_invariance.c — synchronous means timing-independent (issue 25, docs/algorithms.md
 * "Which algorithms are timing-independent").
 *
 * In `hearsay sim` with fixed step times, the parameter trajectories (--dump-trajectory: every
 * rank's parameters after every iteration) of the synchronous algorithms are bit-identical
 * between a clean run and a run with a x4 straggler, random pauses on every rank, a jittered
 * shaped link, hosts sharing NICs and periodic evaluation: every one of these changes when
 * messages arrive, none may change what is mixed or in which order. And across the real and
 * virtual line: 4 real processes of synchronous SGP end with the same parameters bit for bit
 * with and without a straggler, and as the same run in `hearsay sim`.
 *
 * Each case would fail on a mixing that depends on arrival: SGP mixing a later round's share
 * early (the build before this test: 0.356 from consensus under one x4 straggler where the clean
 * run is exact), or a neighbour exchange summing in arrival order (CHOCO-SGD's s_i).
 */
#include "hearsay/common.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/runlib.h"

#define RANKS 8
#define BASE                                                                                       \
    "--model mlp:16-32-4 --data gauss:dim=16,classes=4,train=4000,test=200 --batch 16 --lr 0.1 "   \
    "--max-iters 24 --seed 3 -q --dump-trajectory --threads 1"
/* Everything that moves arrival times: a x4 straggler, random pauses on every rank, a jittered
 * 100 Mbit link with latency, two ranks per host behind a shared 1 Gbit NIC, evaluations. */
#define PERTURB                                                                                    \
    "--straggler slow:1:x4 --straggler pause:all:p=0.2:exp=5ms "                                   \
    "--link latency=1ms,jitter=500us,bw=100Mbit --eval-every 0.25"

/* Every rank's trajectory in dirs a and b: the same bytes (and not empty). */
static void same_trajectories(const char *a, const char *b, int ranks, const char *what)
{
    for (int r = 0; r < ranks; r++) {
        char name[64];
        snprintf(name, sizeof name, "rank-%d.traj.f32", r);
        size_t na = 0, nb = 0;
        float *x = tr_read_f32(a, name, &na), *y = tr_read_f32(b, name, &nb);
        ck_assert_msg(x && y, "%s: rank %d has no trajectory (%s, %s)", what, r, a, b);
        ck_assert_msg(na == nb, "%s: rank %d: %zu values against %zu", what, r, na, nb);
        size_t first = na;
        for (size_t i = 0; i < na && first == na; i++)
            if (memcmp(&x[i], &y[i], sizeof *x)) first = i;
        ck_assert_msg(first == na, "%s: rank %d differs first at value %zu (%.9g against %.9g)",
                      what, r, first, first < na ? x[first] : 0.0, first < na ? y[first] : 0.0);
        free(x);
        free(y);
    }
}

static void sim_case(const char *algo)
{
    char a[4096], b[4096], name[80], args[1024], clean[64], what[160];
    snprintf(name, sizeof name, "%.*s", (int)strcspn(algo, " "), algo);
    snprintf(clean, sizeof clean, "%s-clean", name);
    snprintf(what, sizeof what, "hearsay sim --algo %s, clean against perturbed", algo);
    tr_workdir_path(a, sizeof a, clean);
    snprintf(clean, sizeof clean, "%s-perturbed", name);
    tr_workdir_path(b, sizeof b, clean);
    snprintf(args, sizeof args, "--algo %s " BASE " --eval-every 0", algo);
    int st = tr_sim_job(a, "-n 8 --ranks-per-host 2 --sim-nic 1Gbit", args, 120);
    if (st != 0) tr_show_log(a);
    ck_assert_msg(st == 0, "%s: the clean run failed", algo);
    snprintf(args, sizeof args, "--algo %s " BASE " " PERTURB, algo);
    st = tr_sim_job(b, "-n 8 --ranks-per-host 2 --sim-nic 1Gbit", args, 120);
    if (st != 0) tr_show_log(b);
    ck_assert_msg(st == 0, "%s: the perturbed run failed", algo);
    /* the perturbation did act: the perturbed run took longer in virtual time */
    double wa = tr_summary_num(a, "wall_s"), wb = tr_summary_num(b, "wall_s");
    ck_assert_msg(wb > 2 * wa, "%s: virtual time %g s clean, %g s perturbed", algo, wa, wb);
    same_trajectories(a, b, RANKS, what);
}

START_TEST(test_sim_sgp)
{
    sim_case("sgp");
}
END_TEST

START_TEST(test_sim_osgp_exact)
{
    sim_case("osgp --tau 2 --delay-mode exact");
}
END_TEST

START_TEST(test_sim_dpsgd)
{
    sim_case("dpsgd");
}
END_TEST

START_TEST(test_sim_allreduce)
{
    sim_case("allreduce");
}
END_TEST

START_TEST(test_sim_localsgd)
{
    sim_case("localsgd --period 3");
}
END_TEST

START_TEST(test_sim_choco)
{
    sim_case("choco --compress topk:25%");
}
END_TEST

START_TEST(test_sim_qsgp)
{
    sim_case("qsgp --compress topk:25%");
}
END_TEST

/* Evaluation alone changes no iterate (an observer): SGP with and without --eval-every. */
START_TEST(test_sim_eval_observer)
{
    char a[4096], b[4096];
    tr_workdir_path(a, sizeof a, "eval-none");
    tr_workdir_path(b, sizeof b, "eval-often");
    ck_assert_int_eq(
        tr_sim_job(a, "-n 8", "--algo osgp --delay-mode exact " BASE " --eval-every 0", 120), 0);
    ck_assert_int_eq(
        tr_sim_job(b, "-n 8", "--algo osgp --delay-mode exact " BASE " --eval-every 0.1", 120), 0);
    same_trajectories(a, b, RANKS, "osgp exact with and without evaluations");
}
END_TEST

/* 4 real processes of synchronous SGP: the same trajectories bit for bit with and without a
 * x4 straggler and pauses, and as the same run in hearsay sim. */
START_TEST(test_real_sgp)
{
    const char *real =
        "--algo sgp --model mlp:16-32-4 --data gauss:dim=16,classes=4,train=4000,test=200 "
        "--batch 16 --lr 0.1 --max-iters 40 --seed 3 -q --dump-trajectory --threads 1 "
        "--eval-every 0";
    char a[4096], b[4096], s[4096], args[1024];
    tr_workdir_path(a, sizeof a, "real-clean");
    tr_workdir_path(b, sizeof b, "real-straggler");
    tr_workdir_path(s, sizeof s, "real-as-sim");
    int st = tr_train_job(4, "", a, real, 120, NULL);
    if (st != 0) tr_show_log(a);
    ck_assert_int_eq(st, 0);
    snprintf(args, sizeof args, "%s --straggler slow:1:x4 --straggler pause:all:p=0.2:fixed=3ms",
             real);
    st = tr_train_job(4, "", b, args, 120, NULL);
    if (st != 0) tr_show_log(b);
    ck_assert_int_eq(st, 0);
    st = tr_sim_job(s, "-n 4", real, 120);
    if (st != 0) tr_show_log(s);
    ck_assert_int_eq(st, 0);
    same_trajectories(a, b, 4, "4 real ranks of sgp, clean against a x4 straggler and pauses");
    same_trajectories(a, s, 4, "4 real ranks of sgp against the same run in hearsay sim");
}
END_TEST

/* Under a Dirichlet label skew some shards hold fewer samples than a batch: every rank still
 * runs the same iterations (the build before issue 25 derived a small shard's count from its
 * clipped batch, so one rank of 64 ran 800 iterations to the others' 112, alone). */
START_TEST(test_noniid_same_iterations)
{
    char d[4096];
    tr_workdir_path(d, sizeof d, "noniid");
    int st = tr_sim_job(d, "-n 64",
                        "--algo sgp --model logreg:64-10 "
                        "--data gauss:dim=64,classes=10,train=32000,test=200,sep=5 "
                        "--shard dirichlet:0.1 --batch 64 --epochs 2 --seed 1 --threads 1 "
                        "--eval-every 0 -q",
                        120);
    if (st != 0) tr_show_log(d);
    ck_assert_int_eq(st, 0);
    double lo = tr_summary_num(d, "iterations_min"), hi = tr_summary_num(d, "iterations_max");
    ck_assert_msg(lo == 14 && hi == 14, "iterations %g .. %g, expected 14 on every rank", lo, hi);
    ck_assert_msg(tr_summary_num(d, "ps_weight_min") == 1 &&
                      tr_summary_num(d, "ps_weight_max") == 1,
                  "push-sum weights %g .. %g", tr_summary_num(d, "ps_weight_min"),
                  tr_summary_num(d, "ps_weight_max"));
}
END_TEST

/* Exact OSGP with checkpoints: a checkpoint's cut mixes every round before it, and the rounds
 * after it must not wait for shares already mixed (the first version of exact mode waited for
 * them until --comm-timeout declared healthy peers failed). */
START_TEST(test_osgp_exact_checkpoints)
{
    char d[4096];
    tr_workdir_path(d, sizeof d, "osgp-ckpt");
    int st = tr_sim_job(d, "-n 4",
                        "--algo osgp --tau 2 --delay-mode exact --model mlp:16-32-4 "
                        "--data gauss:dim=16,classes=4,train=4000,test=200 --batch 16 "
                        "--epochs 2 --checkpoint-every 0.5 --threads 1 --eval-every 0 -q",
                        120);
    if (st != 0) tr_show_log(d);
    ck_assert_int_eq(st, 0);
    /* 124 steps of the default 10 ms: no wait anywhere */
    double wall = tr_summary_num(d, "wall_s"), sum = tr_summary_num(d, "ps_weight_sum");
    ck_assert_msg(wall < 1.3, "virtual wall time %g s for 124 steps of 10 ms", wall);
    ck_assert_msg(fabs(sum - 4) < 1e-9, "push-sum weights sum to %.12g", sum);
    ck_assert_msg(tr_summary_has(d, "\"health\": \"ok\""), "health not ok");
}
END_TEST

int main(void)
{
    const char *why = tr_require(NULL, NULL);
    if (tr_workdir_init("invariance") < 0) return 1;
    Suite *s = suite_create("invariance");
    TCase *tc = tcase_create("invariance");
    tcase_set_timeout(tc, 300);
    TR_ADD_TEST(tc, test_sim_sgp, why);
    TR_ADD_TEST(tc, test_sim_osgp_exact, why);
    TR_ADD_TEST(tc, test_sim_dpsgd, why);
    TR_ADD_TEST(tc, test_sim_allreduce, why);
    TR_ADD_TEST(tc, test_sim_localsgd, why);
    TR_ADD_TEST(tc, test_sim_choco, why);
    TR_ADD_TEST(tc, test_sim_qsgp, why);
    TR_ADD_TEST(tc, test_sim_eval_observer, why);
    TR_ADD_TEST(tc, test_real_sgp, why);
    TR_ADD_TEST(tc, test_noniid_same_iterations, why);
    TR_ADD_TEST(tc, test_osgp_exact_checkpoints, why);
    suite_add_tcase(s, tc);
    return tr_run_suite(s);
}
