/*
 * tests/test_choco.c — CHOCO-SGD (optim/choco.c) in virtual time (`hearsay sim`, so the
 * timings are deterministic on a loaded machine): uncompressed with gamma 1 it is D-PSGD;
 * compressed (int8, top-1 %, fp16) it reaches D-PSGD's target sooner over a 100 Mbit link; the
 * bytes each rank sends per iteration are the wire formula's; compressors given to algorithms
 * that cannot use them and bad specs are refused with a message naming them. EF-SGD
 * (all-reduce SGD with --compress) too, the compressed push-sum (qsgp) conserves the mass, and
 * EASGD and leader-SGD with fp16/bf16 transfers.
 */
#include "hearsay/common.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/runlib.h"

/* 85002 parameters (340 KB as float32): 27 ms a message at 100 Mbit against 5 ms of compute */
#define TASK                                                                                       \
    "--model mlp:64-256-256-10 --data gauss:dim=64,classes=10,train=20000,test=1000 "              \
    "--batch 128 --epochs 2 --eval-every 0.25 --target-loss 0.3 --threads 1 -q "                   \
    "--sim-compute fixed:5 --link bw=100Mbit"
#define N_PARAMS 85002

/* `hearsay sim -n 4 TASK ARGS --out DIR`: the status. */
static int sim_job(const char *dir, const char *args, double limit_s)
{
    return tr_sim_job(dir, "-n 4 " TASK, args, limit_s);
}

static void run_ok(const char *dir, const char *args)
{
    int st = sim_job(dir, args, 120);
    ck_assert_msg(st == 0, "'%s': %s (see %s.log)", args, tr_status_text(st), dir);
}

/* Sum of column `col` (0-based) of DIR/rank-0.csv over its rows, and the row count. */
static double csv_sum(const char *dir, int col, long *rows)
{
    char path[4200], line[4096];
    snprintf(path, sizeof path, "%s/rank-0.csv", dir);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "no %s", path);
    double sum = 0;
    *rows = 0;
    ck_assert(fgets(line, sizeof line, f) != NULL); /* header */
    while (fgets(line, sizeof line, f)) {
        char *p = line;
        for (int c = 0; c < col && p; c++) p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL;
        ck_assert(p != NULL);
        sum += strtod(p, NULL);
        (*rows)++;
    }
    fclose(f);
    return sum;
}

START_TEST(test_choco_none_is_dpsgd)
{
    char a[4096], b[4096];
    tr_workdir_path(a, sizeof a, "dpsgd");
    tr_workdir_path(b, sizeof b, "choco-none");
    run_ok(a, "--algo dpsgd");
    run_ok(b, "--algo choco --compress none --consensus-step 1");
    double la = tr_summary_num(a, "final_test_loss"), lb = tr_summary_num(b, "final_test_loss");
    ck_assert_msg(fabs(la - lb) <= 1e-3 * la, "D-PSGD %g vs CHOCO without compression %g", la, lb);
    double ca = tr_summary_num(a, "consensus_distance"),
           cb = tr_summary_num(b, "consensus_distance");
    ck_assert_msg(fabs(ca - cb) <= 0.02 * ca + 1e-6, "consensus %g vs %g", ca, cb);
}
END_TEST

START_TEST(test_choco_compressed_sooner)
{
    char base[4096];
    tr_workdir_path(base, sizeof base, "base");
    run_ok(base, "--algo dpsgd");
    double t0 = tr_summary_num(base, "time_to_target_s");
    double l0 = tr_summary_num(base, "final_test_loss");
    ck_assert_msg(isfinite(t0), "D-PSGD did not reach the target");
    struct {
        const char *spec;
        double speedup; /* at least */
        double bytes;   /* per message */
    } c[] = {
        {"int8", 2.0, 128 + N_PARAMS + 4.0 * ((N_PARAMS + 511) / 512)},
        {"topk:1%", 2.0, 128 + 4 + 8.0 * 851},
        {"fp16", 1.5, 128 + 2.0 * N_PARAMS},
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(c); i++) {
        char dir[4096], args[256];
        snprintf(dir, sizeof dir, "%s-%zu", base, i);
        snprintf(args, sizeof args, "--algo choco --compress %s", c[i].spec);
        run_ok(dir, args);
        double t = tr_summary_num(dir, "time_to_target_s");
        double l = tr_summary_num(dir, "final_test_loss");
        ck_assert_msg(isfinite(t) && t * c[i].speedup <= t0,
                      "%s: time to target %g s, D-PSGD %g s (want %gx sooner)", c[i].spec, t, t0,
                      c[i].speedup);
        ck_assert_msg(l <= l0 + 0.05, "%s: final test loss %g, D-PSGD %g", c[i].spec, l, l0);
        /* biring: 2 messages per iteration of exactly the wire formula's size */
        long rows = 0;
        double sent = csv_sum(dir, 9, &rows);
        ck_assert_msg(rows > 0 && fabs(sent / rows - 2 * c[i].bytes) < 0.5,
                      "%s: %g bytes sent per iteration, expected %g", c[i].spec, sent / rows,
                      2 * c[i].bytes);
    }
}
END_TEST

/* EF-SGD: all-reduce SGD with compressed, error-corrected gradients (all-gathered) keeps the
 * replicas identical and reaches the target sooner at 100 Mbit. */
START_TEST(test_efsgd)
{
    char base[4096], dir[4096];
    tr_workdir_path(base, sizeof base, "ar");
    tr_workdir_path(dir, sizeof dir, "ar-int8");
    run_ok(base, "--algo allreduce");
    run_ok(dir, "--algo allreduce --compress int8");
    double t0 = tr_summary_num(base, "time_to_target_s"),
           t = tr_summary_num(dir, "time_to_target_s");
    ck_assert_msg(isfinite(t) && 2 * t <= t0, "EF-SGD int8: %g s to target, all-reduce %g s", t,
                  t0);
    ck_assert(tr_summary_num(dir, "consensus_distance") == 0);
    ck_assert(tr_summary_num(dir, "final_test_loss") <=
              tr_summary_num(base, "final_test_loss") + 0.02);
    /* 3 peers, one compressed message each */
    long rows = 0;
    double sent = csv_sum(dir, 9, &rows);
    double want = 3 * (128 + N_PARAMS + 4.0 * ((N_PARAMS + 511) / 512));
    ck_assert_msg(fabs(sent / rows - want) < 0.5, "%g bytes per iteration, expected %g",
                  sent / rows, want);
}
END_TEST

/* EF-SGD in buckets (--bucket-mb 0.1: fc2+fc3, then fc1): each bucket compressed on its own and
 * sent from the gradient-ready notification while backward goes on (in virtual time at the
 * moment its layers' backward ends): the replicas stay identical, every bucket's message goes
 * to every peer each round, the target is reached, and a round ends sooner than the flat
 * exchange's (its first bucket's transfer overlaps the rest of backward). */
START_TEST(test_efsgd_buckets)
{
    char flat[4096], dir[4096];
    tr_workdir_path(flat, sizeof flat, "ef-flat");
    tr_workdir_path(dir, sizeof dir, "ef-buckets");
    run_ok(flat, "--algo allreduce --compress int8 --bucket-mb 0");
    run_ok(dir, "--algo allreduce --compress int8 --bucket-mb 0.1");
    ck_assert(tr_summary_num(dir, "consensus_distance") == 0);
    ck_assert(isfinite(tr_summary_num(dir, "time_to_target_s")));
    ck_assert(tr_summary_num(dir, "final_test_loss") <=
              tr_summary_num(flat, "final_test_loss") + 0.02);
    /* 3 peers, two messages each: int8 of each part with its own scales per 512 floats */
    const double n0 = 256 * 256 + 256 + 256 * 10 + 10, n1 = 64 * 256 + 256;
    long rows = 0, frows = 0;
    double sent = csv_sum(dir, 9, &rows);
    (void)csv_sum(flat, 9, &frows);
    double want = 3 * (2 * 128 + N_PARAMS + 4.0 * (ceil(n0 / 512) + ceil(n1 / 512)));
    ck_assert_msg(fabs(sent / rows - want) < 0.5, "%g bytes per iteration, expected %g",
                  sent / rows, want);
    ck_assert_int_eq(rows, frows);
    /* the run's virtual duration: shorter with the overlap (measured 0.904 s against 0.953 s:
     * the first bucket's transfer starts while fc1's backward still runs) */
    double tb = tr_summary_num(dir, "wall_s"), tf = tr_summary_num(flat, "wall_s");
    ck_assert_msg(tb < tf, "EF-SGD in buckets ran %g s of virtual time, the flat exchange %g s", tb,
                  tf);
}
END_TEST

/* EASGD with --compress bf16 / fp16: center reads and elastic adds in half precision (the
 * service path): half the bytes per iteration, the same accuracy, sooner at 100 Mbit. */
START_TEST(test_easgd_half)
{
    char base[4096];
    tr_workdir_path(base, sizeof base, "easgd");
    run_ok(base, "--algo easgd");
    double t0 = tr_summary_num(base, "time_to_target_s"),
           l0 = tr_summary_num(base, "final_test_loss");
    long rows0 = 0;
    double sent0 = csv_sum(base, 9, &rows0) / rows0;
    const char *specs[] = {"bf16", "fp16"};
    for (size_t i = 0; i < HS_ARRAY_LEN(specs); i++) {
        char dir[4096], args[128];
        snprintf(dir, sizeof dir, "%s-%s", base, specs[i]);
        snprintf(args, sizeof args, "--algo easgd --compress %s", specs[i]);
        run_ok(dir, args);
        double t = tr_summary_num(dir, "time_to_target_s"),
               l = tr_summary_num(dir, "final_test_loss");
        ck_assert_msg(isfinite(t) && t * 1.2 <= t0, "%s: %g s to target, float32 %g s", specs[i], t,
                      t0);
        ck_assert_msg(fabs(l - l0) <= 0.01, "%s: final loss %g, float32 %g", specs[i], l, l0);
        long rows = 0;
        double sent = csv_sum(dir, 9, &rows) / rows;
        /* rank 0 adds to the 3 shards it does not own: half the payload, the same headers */
        ck_assert_msg(sent > 0.49 * sent0 && sent < 0.51 * sent0,
                      "%s: %g bytes per iteration, float32 %g", specs[i], sent, sent0);
    }
}
END_TEST

/* Leader-SGD with --compress bf16: every fetched snapshot is 64 + 2 n bytes (float32: 64 + 4 n)
 * and the run ends near the float32 run. Rank 0's bytes received also hold the 64-byte loss
 * messages and snapshot requests its service receives (at most 3 + 3 a round): what is left
 * after the fetched snapshots is a multiple of 64 below that bound, which the other width
 * (n or 2 n bytes per snapshot away) could not be. */
START_TEST(test_lsgd_half)
{
    char base[4096], dir[4096];
    tr_workdir_path(base, sizeof base, "lsgd");
    tr_workdir_path(dir, sizeof dir, "lsgd-bf16");
    run_ok(base, "--algo lsgd");
    run_ok(dir, "--algo lsgd --compress bf16");
    const char *dirs[] = {base, dir};
    const double want[] = {64 + 4.0 * N_PARAMS, 64 + 2.0 * N_PARAMS};
    for (int i = 0; i < 2; i++) {
        long rows = 0;
        double recv = csv_sum(dirs[i], 10, &rows), msgs = csv_sum(dirs[i], 12, &rows);
        double small = recv - msgs * want[i];
        ck_assert_msg(msgs > 0 && small >= 0 && small <= 64.0 * 6 * (double)(rows + 2) &&
                          fmod(small, 64) == 0,
                      "%s: %g bytes received with %g snapshots of %g bytes: %g left, not "
                      "64-byte messages",
                      dirs[i], recv, msgs, want[i], small);
    }
    double l0 = tr_summary_num(base, "final_test_loss"), l = tr_summary_num(dir, "final_test_loss");
    ck_assert_msg(fabs(l - l0) <= 0.02, "bf16: final loss %g, float32 %g", l, l0);
    ck_assert(isfinite(tr_summary_num(dir, "time_to_target_s")));
}
END_TEST

/* Compressed push-sum (qsgp) as pure gossip averaging (--lr 0, spread initial models) over a
 * directed ring: the weights sum to 4 and the weighted mean of the final z_i is the initial
 * mean (the compression moves no mass), for int8 and top-1 %; and the models agree. */
START_TEST(test_qsgp_conserves_mass)
{
    const char *specs[] = {"int8", "topk:1%"};
    const double agree[] = {1e-3, 0.5}; /* final spread / initial spread, at most */
    /* mass error / max |z|, at most 1e-6 for both (seen 4.5e-8 = 1.2e-8 of max |z| for both:
     * the numerators and their mixing are double, so what is left is the rounding of the final
     * z_i to float; with float numerators top-1 % drifted by 1.4e-6 to 5.8e-6) */
    const double mass_tol[] = {1e-6, 1e-6};
    for (size_t si = 0; si < HS_ARRAY_LEN(specs); si++) {
        char dir[4096], args[512];
        tr_workdir_path(dir, sizeof dir, si ? "qsgp-topk" : "qsgp-int8");
        tr_rm_rf(dir);
        snprintf(args, sizeof args,
                 "%s sim -n 4 --sim-compute fixed:5 --algo qsgp --graph ring --compress %s "
                 "--model mlp:16-32-4 --data gauss:dim=16,classes=4,train=8000,test=100 "
                 "--batch 10 --epochs 1 --lr 0 --momentum 0 --init-spread 1 --dump-params "
                 "--eval-every 0 -q --out %s",
                 tr_hearsay(), specs[si], dir);
        tr_args_t a;
        tr_args_init(&a);
        tr_args_split(&a, args);
        char log[4200];
        snprintf(log, sizeof log, "%s.log", dir);
        tr_opts_t o = {.log = log};
        int st = tr_cmd(TR_ARGV(&a), &o, 60, NULL);
        tr_args_free(&a);
        ck_assert_msg(st == 0, "%s: %s", specs[si], tr_status_text(st));
        size_t n = 0;
        float *z0[4], *z1[4];
        double w[4], wsum = 0;
        for (int r = 0; r < 4; r++) {
            char name[64];
            size_t m = 0;
            snprintf(name, sizeof name, "rank-%d.init.f32", r);
            z0[r] = tr_read_f32(dir, name, &m);
            ck_assert_msg(z0[r] && m > 0 && (r == 0 || m == n), "%s", name);
            n = m;
            snprintf(name, sizeof name, "rank-%d.final.f32", r);
            z1[r] = tr_read_f32(dir, name, &m);
            ck_assert_msg(z1[r] && m == n, "%s", name);
            w[r] = tr_summary_rank_num(dir, r, "ps_weight");
            wsum += w[r];
        }
        ck_assert_msg(fabs(wsum - 4) < 1e-9, "%s: sum of weights %.15g", specs[si], wsum);
        double mass_err = 0, zmax = 0, s0 = 0, s1 = 0;
        for (size_t i = 0; i < n; i++) {
            double m0 = 0, m1 = 0;
            for (int r = 0; r < 4; r++) m0 += z0[r][i] / 4.0, m1 += w[r] * z1[r][i] / wsum;
            mass_err = fmax(mass_err, fabs(m1 - m0));
            for (int r = 0; r < 4; r++) {
                zmax = fmax(zmax, fabs(z0[r][i]));
                s0 += (z0[r][i] - m0) * (z0[r][i] - m0);
                s1 += (z1[r][i] - m1) * (z1[r][i] - m1);
            }
        }
        fprintf(stderr, "qsgp %s: mass error %.3g (max |z| %.3g), spread %.3g -> %.3g\n", specs[si],
                mass_err, zmax, sqrt(s0), sqrt(s1));
        ck_assert_msg(mass_err <= mass_tol[si] * zmax, "%s: weighted mean moved by %g", specs[si],
                      mass_err);
        ck_assert_msg(sqrt(s1) <= agree[si] * sqrt(s0), "%s: spread %g -> %g", specs[si], sqrt(s0),
                      sqrt(s1));
        for (int r = 0; r < 4; r++) free(z0[r]), free(z1[r]);
    }
}
END_TEST

static void rejected(const char *args, int status, const char *needle)
{
    ck_assert_msg(tr_sim_rejected("-n 4 " TASK, args, status, needle), "'%s' (see stderr)", args);
}

START_TEST(test_choco_bad_input)
{
    rejected("--algo dpsgd --compress int8", 2, "--algo dpsgd cannot use a compressor");
    rejected("--algo sgp --compress fp16", 2, "use --algo qsgp");
    rejected("--algo qsgp --graph exp1peer --compress int8", 0, "needs a static graph");
    rejected("--algo choco --compress zip", 2, "unknown compressor 'zip'");
    rejected("--algo choco --compress topk:0", 2, "k must be at least 1");
    rejected("--algo choco --compress randk:-5", 2, "k must be at least 1");
    rejected("--algo choco --compress topk:90000", 0, "larger than the model (85002 parameters)");
    rejected("--algo choco --graph ring", 2, "undirected");
    rejected("--algo easgd --compress int8", 2, "takes fp16 or bf16 only");
    rejected("--algo easgd --compress fp16 --center-path rma", 2, "adds float32 atomically");
    rejected("--algo lsgd --compress topk:1%", 2, "takes fp16 or bf16 only");
    rejected("--algo choco --consensus-step 1.5", 2, "consensus-step");
}
END_TEST

int main(void)
{
    const char *why = tr_require(NULL, NULL);
    if (tr_workdir_init("choco") < 0) return 1;
    Suite *s = suite_create("choco");
    TCase *tc = tcase_create("choco");
    tcase_set_timeout(tc, 300);
    TR_ADD_TEST(tc, test_choco_none_is_dpsgd, why);
    TR_ADD_TEST(tc, test_choco_compressed_sooner, why);
    TR_ADD_TEST(tc, test_efsgd, why);
    TR_ADD_TEST(tc, test_efsgd_buckets, why);
    TR_ADD_TEST(tc, test_qsgp_conserves_mass, why);
    TR_ADD_TEST(tc, test_easgd_half, why);
    TR_ADD_TEST(tc, test_lsgd_half, why);
    TR_ADD_TEST(tc, test_choco_bad_input, why);
    suite_add_tcase(s, tc);
    return tr_run_suite(s);
}
