/*
 * tests/test_reference.c — reference equivalence: every distributed algorithm follows an
 * independent reference of its paper's equations, iteration by iteration.
 *
 * Each case runs `hearsay sim` in lockstep (fixed 10 ms steps, so the run is deterministic)
 * on a convex task (logistic regression on a small gauss mixture; momentum 0.9 and weight decay
 * 5e-4 as the defaults are) for 50 iterations on 4 and on 8 workers, with --dump-params (the
 * initial parameters) and --dump-trajectory (every rank's parameters after every iteration).
 * tests/ref_algos.py (plain NumPy, run with /usr/bin/python3; it shares no code with optim/)
 * rebuilds the data, the shards and the data order from the documented generators, runs the
 * algorithm in float64 and fails when any rank's parameters leave it by more than 1e-5
 * relative (infinity norm) at any iteration. The figures go to this test's log.
 *   - sgp: --sgp-step x --delay-bound 0 over exp1peer (the paper's synchronous SGP);
 *   - osgp --tau 2 --delay-bound 2 with 15 ms links: every message is mixed exactly 2 rounds
 *     after it was sent (it arrives 2.5 steps later), which the reference mirrors;
 *   - dpsgd (biring, Metropolis weights), allreduce, easgd (tau 1, alpha 0.9 / n: every
 *     worker meets the same center; Algorithm 1's order), eamsgd (Nesterov, tau 2; Algorithm
 *     2's), localsgd --period 5;
 *   - adpsgd over the bipartite graph, given the pairings the run logged
 *     (DIR/rank-R-adpsgd.csv): the reference replays them; every active averaged every round,
 *     and on 8 ranks two actives picked one passive in the same round (seen: 51 times in 200
 *     exchanges; 19 in 100 on 4 ranks), so pairs that meet a third rank are covered.
 * Skipped (its SKIP line) without /usr/bin/python3 and NumPy. Also: AD-PSGD under --time-budget
 * with a x4 straggler ends every rank together at different iteration counts.
 */
#include "hearsay/common.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/runlib.h"

#define PYTHON "/usr/bin/python3"
#define TASK                                                                                       \
    "--model logreg:8-3 --data gauss:dim=8,classes=3,train=512,test=100 --batch 8 --epochs 8 "     \
    "--max-iters 50 --eval-every 0 -q --dump-params --dump-trajectory"

static char g_script[4096];

typedef struct ref_case {
    const char *algo;
    const char *flags;   /* the algorithm's own flags, explicit (no default is relied on) */
    const char *refargs; /* extra arguments of the reference */
} ref_case_t;

static const ref_case_t cases[] = {
    {"sgp", "--graph exp1peer --sgp-step x --delay-bound 0", ""},
    {"osgp", "--graph exp1peer --sgp-step x --tau 2 --delay-bound 2 --link latency=15ms",
     "--delay 2"},
    {"dpsgd", "--graph biring", ""},
    {"allreduce", "", ""},
    {"easgd", "--tau 1 --alpha 0", ""}, /* the paper's Algorithm 1 (the reference's default) */
    {"eamsgd", "--tau 2 --alpha 0 --nesterov", ""},
    {"localsgd", "--period 5", ""},
    {"adpsgd", "--graph bipartite", ""},
};

/* Print FILE (the reference's verdict) to this test's log. */
static void show(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) fputs(line, stdout);
    fclose(f);
    fflush(stdout);
}

static void check_case(const ref_case_t *c, int n)
{
    char dir[4096], name[64], log[4200], rlog[4200];
    snprintf(name, sizeof name, "%s_%d", c->algo, n);
    tr_workdir_path(dir, sizeof dir, name);
    snprintf(log, sizeof log, "%s.log", dir);
    snprintf(rlog, sizeof rlog, "%s.ref.log", dir);
    tr_rm_rf(dir);
    tr_args_t a;
    tr_args_init(&a);
    tr_args_add(&a, tr_hearsay());
    tr_args_add(&a, "sim");
    tr_args_add(&a, "-n");
    tr_args_addf(&a, "%d", n);
    tr_args_split(&a, "--sim-compute fixed:10 --algo");
    tr_args_add(&a, c->algo);
    tr_args_split(&a, TASK);
    tr_args_split(&a, c->flags);
    tr_args_add(&a, "--out");
    tr_args_add(&a, dir);
    tr_opts_t o = {.log = log};
    int st = tr_cmd(TR_ARGV(&a), &o, 60, NULL);
    tr_args_free(&a);
    if (st != 0) tr_show_log(dir);
    ck_assert_msg(st == 0, "%s n=%d: hearsay sim: %s", c->algo, n, tr_status_text(st));

    tr_args_init(&a);
    tr_args_add(&a, PYTHON);
    tr_args_add(&a, g_script);
    tr_args_add(&a, dir);
    tr_args_add(&a, c->algo);
    tr_args_split(&a, c->refargs);
    tr_args_split(&a, "--tol 1e-5");
    tr_opts_t ro = {.log = rlog};
    st = tr_cmd(TR_ARGV(&a), &ro, 60, NULL);
    tr_args_free(&a);
    show(rlog);
    ck_assert_msg(st == 0, "%s n=%d: the trajectory leaves the reference (%s; see %s)", c->algo, n,
                  tr_status_text(st), rlog);
}

/* AD-PSGD's pairings (DIR/rank-R-adpsgd.csv of every active rank): how many exchanges met
 * another one at the same passive rank in the same round (a third rank picking one side of a
 * pair), and how many exchanges in all. */
static int pair_collisions(const char *dir, int n, int *total)
{
    static int count[64][64]; /* [round][passive] */
    memset(count, 0, sizeof count);
    int coll = 0;
    *total = 0;
    for (int r = 0; r < n; r++) {
        char path[4200], line[256];
        snprintf(path, sizeof path, "%s/rank-%d-adpsgd.csv", dir, r);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        while (fgets(line, sizeof line, f)) {
            long t, ps, pq;
            int a, p;
            if (sscanf(line, "%ld,%d,%d,%ld,%ld", &t, &a, &p, &ps, &pq) != 5) continue;
            ck_assert_msg(a == r && p >= 0 && p < n && p % 2 == 0, "%s: bad pairing %s", path,
                          line);
            (*total)++;
            if (t >= 0 && t < 64 && count[t][p]++ == 1) coll++;
        }
        fclose(f);
    }
    return coll;
}

START_TEST(test_reference)
{
    const ref_case_t *c = &cases[_i / 2];
    int n = _i % 2 ? 8 : 4;
    check_case(c, n);
    if (strcmp(c->algo, "adpsgd") != 0) return;
    /* every active rank averaged every round (nobody dead), and on 8 ranks two actives often
     * picked one passive at once: the case of a third rank meeting a pair was exercised */
    char dir[4096], name[64];
    snprintf(name, sizeof name, "%s_%d", c->algo, n);
    tr_workdir_path(dir, sizeof dir, name);
    int total = 0, coll = pair_collisions(dir, n, &total);
    printf("adpsgd n=%d: %d pairwise averages, %d rounds where two actives picked one passive\n", n,
           total, coll);
    ck_assert_int_eq(total, 50 * n / 2);
    if (n == 8) ck_assert_int_gt(coll, 0);
}
END_TEST

/* AD-PSGD under --time-budget in virtual time, with rank 1 (active) slowed x4: ranks stop at
 * different iterations and still end together (a passive serves until every active's FIN);
 * the straggler is averaged with less often and holds nobody back. */
START_TEST(test_adpsgd_budget)
{
    char dir[4096], log[4200];
    tr_workdir_path(dir, sizeof dir, "adpsgd_budget");
    snprintf(log, sizeof log, "%s.log", dir);
    tr_rm_rf(dir);
    tr_args_t a;
    tr_args_init(&a);
    tr_args_add(&a, tr_hearsay());
    tr_args_split(&a, "sim -n 8 --sim-compute fixed:10 --algo adpsgd --model mlp:16-32-4 "
                      "--data gauss:dim=16,classes=4,train=4000,test=500 --batch 32 --epochs 4 "
                      "--eval-every 0 -q --time-budget 0.5 --straggler slow:1:x4 --out");
    tr_args_add(&a, dir);
    tr_opts_t o = {.log = log};
    int st = tr_cmd(TR_ARGV(&a), &o, 60, NULL);
    tr_args_free(&a);
    if (st != 0) tr_show_log(dir);
    ck_assert_msg(st == 0, "%s", tr_status_text(st));
    double slow = tr_summary_rank_num(dir, 1, "iterations");
    for (int r = 0; r < 8; r++) {
        double it = tr_summary_rank_num(dir, r, "iterations");
        ck_assert_msg(tr_summary_rank_num(dir, r, "finished") == 1, "rank %d did not finish", r);
        if (r != 1)
            ck_assert_msg(it >= 3 * slow, "rank %d: %g iterations, the straggler %g", r, it, slow);
    }
    ck_assert_msg(slow >= 5, "the straggler did %g iterations", slow);
    ck_assert(tr_summary_num(dir, "final_test_loss") < 0.5);
    printf("adpsgd --time-budget 0.5 with a x4 straggler: it did %g iterations, the others 50\n",
           slow);
}
END_TEST

/* NULL when /usr/bin/python3 with NumPy and the reference script are here, else why not. */
static const char *need_python(void)
{
    static char why[4200];
    const char *src = getenv("HS_SRCDIR");
    snprintf(g_script, sizeof g_script, "%s/tests/ref_algos.py", src && *src ? src : ".");
    FILE *f = fopen(g_script, "r");
    if (!f) {
        snprintf(why, sizeof why, "%s not found (set HS_SRCDIR to the source tree)", g_script);
        return why;
    }
    fclose(f);
    const char *argv[] = {PYTHON, "-c", "import numpy", NULL};
    tr_opts_t o = {0};
    if (tr_cmd(argv, &o, 30, NULL) != 0) return PYTHON " with NumPy is not available";
    return NULL;
}

int main(void)
{
    const char *why = tr_require(NULL, NULL);
    if (!why) why = need_python();
    if (tr_workdir_init("reference") < 0) return 1;
    Suite *s = suite_create("reference");
    TCase *tc = tcase_create("reference");
    tcase_set_timeout(tc, 120);
    if (why)
        tr_skip("test_reference", "%s", why);
    else
        tcase_add_loop_test(tc, test_reference, 0, 2 * (int)HS_ARRAY_LEN(cases));
    suite_add_tcase(s, tc);
    TCase *tb = tcase_create("adpsgd");
    tcase_set_timeout(tb, 60);
    TR_ADD_TEST(tb, test_adpsgd_budget, tr_require(NULL, NULL));
    suite_add_tcase(s, tb);
    return tr_run_suite(s);
}
