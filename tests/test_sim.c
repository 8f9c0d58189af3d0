/*
 * tests/test_sim.c — `hearsay sim` (runtime/sim/): the algorithms unchanged on a virtual
 * clock. Deterministic (two runs give byte-identical files), lockstep SGP is synchronous
 * push-sum (pure averaging contracts at the |lambda2| hearsay topo predicts; exp1peer averages
 * exactly in log2 n steps), stragglers and crashes act on virtual time, every algorithm runs,
 * bad input is rejected with exit status 2 and a message naming it.
 */
#include "hearsay/common.h"
#include "hearsay/topology.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/runlib.h"

#define AVG_TASK                                                                                   \
    "--algo sgp --model logreg:16-4 --data gauss:dim=16,classes=4,train=64000,test=100 "           \
    "--batch 10 --epochs 20 --lr 0 --momentum 0 --init-spread 1 --delay-bound 0 --eval-every 0 -q"
#define TASK                                                                                       \
    "--model mlp:16-32-4 --data gauss:dim=16,classes=4,train=4000,test=500 --batch 32 "            \
    "--threads 1 --eval-every 0.5 -q"

static int sim_job(const char *dir, const char *simargs, const char *args, double limit_s)
{
    return tr_sim_job(dir, simargs, args, limit_s);
}

static unsigned char *slurp(const char *path, size_t *n)
{
    return (unsigned char *)tr_slurp(path, n);
}

/* 1 when DIR_A/NAME and DIR_B/NAME hold the same bytes. */
/* Remove from buf (*n bytes) every line that contains needle. */
static void drop_lines(unsigned char *buf, size_t *n, const char *needle)
{
    size_t r = 0, w = 0, nl = strlen(needle);
    while (r < *n) {
        size_t e = r;
        while (e < *n && buf[e] != '\n') e++;
        if (e < *n) e++; /* the newline too */
        int hit = 0;
        for (size_t i = r; i + nl <= e && !hit; i++) hit = !memcmp(buf + i, needle, nl);
        if (!hit) {
            memmove(buf + w, buf + r, e - r);
            w += e - r;
        }
        r = e;
    }
    *n = w;
}

/* Files a and b of `name` are the same, byte for byte, but for the line that records
 * --sim-threads in the configuration (config.ini, summary.json's "config"): the one option
 * these comparisons change. */
static int same_file(const char *a, const char *b, const char *name)
{
    char pa[4200], pb[4200];
    snprintf(pa, sizeof pa, "%s/%s", a, name);
    snprintf(pb, sizeof pb, "%s/%s", b, name);
    size_t na = 0, nb = 0;
    unsigned char *x = slurp(pa, &na), *y = slurp(pb, &nb);
    if (x) drop_lines(x, &na, "sim-threads");
    if (y) drop_lines(y, &nb, "sim-threads");
    int same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

/* Two runs with a fixed compute model (a straggler and random pauses included), the first on
 * one host thread, the second computing gradients on two side by side (--sim-threads): every
 * file byte for byte the same. The second run goes to the same directory (moved away in
 * between), so even the configuration in summary.json matches. */
/* Run `sim` (+ args) on 1 host thread into b, then on 2 into a: every one of files must be the
 * same byte for byte (what: the case, in the message). */
static void threads_agree(const char *a, const char *b, const char *sim, const char *args,
                          const char *const *files, size_t nfiles, const char *what)
{
    char spec[512];
    snprintf(spec, sizeof spec, "%s --sim-threads 1", sim);
    ck_assert_int_eq(sim_job(a, spec, args, 60), 0);
    tr_rm_rf(b);
    ck_assert_int_eq(rename(a, b), 0);
    snprintf(spec, sizeof spec, "%s --sim-threads 2", sim);
    ck_assert_int_eq(sim_job(a, spec, args, 60), 0);
    for (size_t i = 0; i < nfiles; i++)
        ck_assert_msg(same_file(a, b, files[i]), "%s: %s differs between 1 and 2 host threads",
                      what, files[i]);
}

START_TEST(test_deterministic)
{
    char a[4096], b[4096];
    tr_workdir_path(a, sizeof a, "det");
    tr_workdir_path(b, sizeof b, "det_first");
    const char *args = TASK " --algo sgp --epochs 2 --straggler slow:1:x3 "
                            "--straggler pause:all:p=0.05:fixed=20ms --link latency=1ms,bw=1Gbit";
    const char *files[] = {"summary.json", "eval.csv",   "consensus.csv",  "rank-0.csv",
                           "rank-3.csv",   "rank-5.csv", "rank-1-eval.csv"};
    threads_agree(a, b, "-n 6 --sim-compute fixed:5", args, files, HS_ARRAY_LEN(files),
                  "ideal links");
    ck_assert(tr_summary_has(a, "\"clock\": \"virtual\""));
    ck_assert(tr_summary_has(a, "\"transport\": \"sim\""));
    /* 2 epochs of 20 iterations at 5 ms, the straggler x3 and the pauses: more than 0.2 s of
     * virtual time, all of it in the files */
    double wall = tr_summary_num(a, "wall_s");
    ck_assert_msg(wall > 0.2 && wall < 10, "virtual wall %g s", wall);
    /* sim.json: what each run cost on the host, every rank's 40 gradients counted; the
     * simulator's share of the run is known with one host thread only */
    for (int k = 0; k < 2; k++) {
        char sj[4200];
        snprintf(sj, sizeof sj, "%s/sim.json", k == 0 ? b : a);
        size_t len = 0;
        char *text = (char *)slurp(sj, &len);
        ck_assert_msg(text != NULL, "%s missing", sj);
        ck_assert_msg(strstr(text, k == 0 ? "\"sim_threads\": 1," : "\"sim_threads\": 2,"),
                      "sim.json: %s", text);
        ck_assert_msg(strstr(text, "\"steps\": 240,") != NULL, "sim.json: %s", text);
        const char *ov = strstr(text, "\"overhead\": ");
        ck_assert(ov != NULL);
        if (k == 0) {
            double o = strtod(ov + 12, NULL);
            ck_assert_msg(o > 0 && o < 1, "overhead %g", o);
        } else {
            ck_assert_msg(!strncmp(ov + 12, "null", 4), "sim.json: %s", text);
        }
        free(text);
    }
    /* the same with three hosts behind NICs shared fairly (flows start and end at every
     * message: the rates are recomputed then, in a fixed order) */
    threads_agree(a, b, "-n 6 --ranks-per-host 2 --sim-nic 100Mbit --sim-compute fixed:5", args,
                  files, HS_ARRAY_LEN(files), "--sim-nic");
    /* and with the transport's protocol (--sim-proto: every message of 2.9 kB by a
     * rendezvous, its control messages in the NICs' flows, TCP's acknowledgements) */
    threads_agree(a, b,
                  "-n 6 --ranks-per-host 2 --sim-nic 100Mbit --sim-compute fixed:5 "
                  "--sim-proto rndv=1000,acks",
                  args, files, HS_ARRAY_LEN(files), "--sim-proto");
}
END_TEST

static double lambda2_of(const char *graph, int n)
{
    hs_topo_t *t = NULL;
    hs_topo_opts_t to = {.mixing = HS_TOPO_MIX_AUTO};
    ck_assert_int_eq(hs_topo_create(&t, graph, n, 1, &to), 0);
    hs_topo_analysis_opts_t ao;
    hs_topo_analysis_defaults(&ao);
    ao.skip_sim = 1;
    hs_topo_report_t rep;
    ck_assert_int_eq(hs_topo_analyze(t, &ao, &rep), 0);
    hs_topo_destroy(&t);
    return rep.lambda2;
}

/* Pure averaging in lockstep (--delay-bound 0, equal fixed steps, ideal links) is synchronous
 * push-sum: the consensus distance contracts at |lambda2| per iteration, within 1 %. */
static void rate_job(const char *graph, int n, int iters)
{
    char dir[4096], args[1024], name[64], sa[32];
    snprintf(name, sizeof name, "rate_%s_%d", graph, n);
    tr_workdir_path(dir, sizeof dir, name);
    snprintf(args, sizeof args, AVG_TASK " --graph %s --max-iters %d", graph, iters);
    snprintf(sa, sizeof sa, "-n %d", n);
    int st = sim_job(dir, sa, args, 120);
    if (st != 0) tr_show_log(dir);
    ck_assert_int_eq(st, 0);
    double rate = tr_summary_num(dir, "consensus_rate"), l2 = lambda2_of(graph, n);
    ck_assert_msg(isnan(tr_summary_num(dir, "consensus_exact_after")),
                  "%s n=%d: a geometric contraction taken for finite-time averaging", graph, n);
    ck_assert_msg(fabs(rate - l2) <= 0.01 * l2, "%s n=%d: consensus rate %.6f, |lambda2| %.6f",
                  graph, n, rate, l2);
}

START_TEST(test_rate_n16)
{
    rate_job("ring", 16, 300);
    rate_job("biring", 16, 300);
    rate_job("torus", 16, 100);
    rate_job("exp", 16, 100);
}
END_TEST

START_TEST(test_rate_n64)
{
    rate_job("ring", 64, 400);
    rate_job("biring", 64, 400);
    rate_job("torus", 64, 150);
    rate_job("exp", 64, 100);
}
END_TEST

/* The consensus distance at iteration `it` from DIR/consensus.csv (NAN when absent). */
static double consensus_at(const char *dir, long it)
{
    char path[4200], line[256];
    snprintf(path, sizeof path, "%s/consensus.csv", dir);
    FILE *f = fopen(path, "r");
    if (!f) return NAN;
    double v = NAN;
    while (fgets(line, sizeof line, f)) {
        long i;
        double t, d;
        int r;
        if (sscanf(line, "%ld,%lf,%d,%lf", &i, &t, &r, &d) == 4 && i == it) v = d;
    }
    fclose(f);
    return v;
}

/* exp1peer (one peer 2^(t mod log2 n) away) averages exactly in log2 n iterations. */
START_TEST(test_exp1peer_exact)
{
    const int ns[] = {16, 64};
    for (int k = 0; k < 2; k++) {
        int n = ns[k], lg = n == 16 ? 4 : 6;
        char dir[4096], args[1024], name[64], sa[32];
        snprintf(name, sizeof name, "exact_%d", n);
        tr_workdir_path(dir, sizeof dir, name);
        snprintf(args, sizeof args, AVG_TASK " --graph exp1peer --max-iters 10");
        snprintf(sa, sizeof sa, "-n %d", n);
        ck_assert_int_eq(sim_job(dir, sa, args, 120), 0);
        double c0 = consensus_at(dir, 0), before = consensus_at(dir, lg - 1),
               at = consensus_at(dir, lg);
        ck_assert_msg(c0 > 0.1 && before > 1e-2 * c0 && at <= 1e-6 * c0,
                      "n=%d: consensus %g at 0, %g at %d, %g at %d", n, c0, before, lg - 1, at, lg);
        /* said as such in summary.json: exact after log2 n iterations, no contraction rate
         * (the geometric fit over the iterations before gave 0.60-0.65) */
        double ea = tr_summary_num(dir, "consensus_exact_after"),
               rate = tr_summary_num(dir, "consensus_rate");
        ck_assert_msg(ea == lg && rate == 0, "n=%d: consensus_exact_after %g, consensus_rate %g", n,
                      ea, rate);
    }
}
END_TEST

/* Stragglers act on virtual time: all-reduce SGD waits for a x4 straggler at every step (its
 * run is 4x as long, exactly, with fixed steps); asynchronous SGP (--delay-bound none) reaches
 * the target as soon as without it; the faithful default (the SGP paper's delay bound 0: round
 * t's messages are mixed in round t) waits for the straggler's messages and loses most of
 * that robustness (seen: x3.4 here), the trade-off docs/algorithms.md describes. */
START_TEST(test_straggler_virtual)
{
    char d1[4096], d4[4096], s1[4096], s4[4096], f4[4096];
    tr_workdir_path(d1, sizeof d1, "ar_x1");
    tr_workdir_path(d4, sizeof d4, "ar_x4");
    tr_workdir_path(s1, sizeof s1, "sgp_x1");
    tr_workdir_path(s4, sizeof s4, "sgp_x4");
    tr_workdir_path(f4, sizeof f4, "sgp_faithful_x4");
    const char *base = TASK " --epochs 2 --target-loss 0.5";
    char args[1024];
    snprintf(args, sizeof args, "%s --algo allreduce", base);
    ck_assert_int_eq(sim_job(d1, "-n 8", args, 60), 0);
    snprintf(args, sizeof args, "%s --algo allreduce --straggler slow:1:x4", base);
    ck_assert_int_eq(sim_job(d4, "-n 8", args, 60), 0);
    snprintf(args, sizeof args, "%s --algo sgp", base);
    ck_assert_int_eq(sim_job(s1, "-n 8", args, 60), 0);
    snprintf(args, sizeof args, "%s --algo sgp --delay-bound none --straggler slow:1:x4", base);
    ck_assert_int_eq(sim_job(s4, "-n 8", args, 60), 0);
    snprintf(args, sizeof args, "%s --algo sgp --straggler slow:1:x4", base);
    ck_assert_int_eq(sim_job(f4, "-n 8", args, 60), 0);
    double w1 = tr_summary_num(d1, "wall_s"), w4 = tr_summary_num(d4, "wall_s");
    ck_assert_msg(fabs(w4 / w1 - 4.0) < 0.01, "all-reduce x4 / x1 virtual time %g / %g", w4, w1);
    double t1 = tr_summary_num(s1, "time_to_target_s"), t4 = tr_summary_num(s4, "time_to_target_s");
    ck_assert_msg(isfinite(t1) && isfinite(t4) && t4 <= 1.3 * t1,
                  "asynchronous SGP time to target x1 %g s, x4 %g s", t1, t4);
    double tf = tr_summary_num(f4, "time_to_target_s");
    ck_assert_msg(isfinite(tf) && tf > 2 * t1 && tf < 4.5 * t1,
                  "faithful SGP time to target x1 %g s, x4 %g s", t1, tf);
    /* the faithful default keeps every weight healthy and never mixes a stale message */
    ck_assert_msg(tr_summary_num(f4, "ps_weight_min") >= 1e-2 &&
                      tr_summary_num(f4, "ps_weight_max") <= 1e2,
                  "weights [%g, %g]", tr_summary_num(f4, "ps_weight_min"),
                  tr_summary_num(f4, "ps_weight_max"));
    ck_assert_msg(tr_summary_num(f4, "staleness_max") == 0, "staleness max %g",
                  tr_summary_num(f4, "staleness_max"));
}
END_TEST

/* The end of a run with a fixed iteration budget: ranks that finish keep receiving and answer
 * every message of a rank still training, so the straggler never trains alone. Asynchronous
 * SGP with a x4 straggler: the others finish at a quarter of its time; after that the straggler
 * applies a message (an answer) at every iteration, its weight stays near 1 (without the
 * answers it halves each round: 1e-6 was seen), and no weight is lost. */
START_TEST(test_end_answers)
{
    char dir[4096];
    tr_workdir_path(dir, sizeof dir, "end_answers");
    int st = sim_job(dir, "-n 4 --sim-compute fixed:5",
                     TASK " --algo sgp --epochs 4 --delay-bound none --sgp-step z "
                          "--straggler slow:1:x4",
                     60);
    if (st) tr_show_log(dir);
    ck_assert_int_eq(st, 0);
    double ws = tr_summary_num(dir, "ps_weight_sum");
    ck_assert_msg(fabs(ws - 4.0) < 1e-9, "sum of weights %.12g", ws);
    double c0 = tr_summary_rank_num(dir, 0, "clock_s"), c1 = tr_summary_rank_num(dir, 1, "clock_s");
    ck_assert_msg(c1 > 3 * c0, "the straggler ended at %g s, rank 0 at %g s", c1, c0);
    double wmin = tr_summary_rank_num(dir, 1, "ps_weight_min");
    ck_assert_msg(wmin >= 0.5, "the straggler's weight fell to %g", wmin);
    /* after the others ended, it applied something at every iteration */
    char path[4200], line[512];
    snprintf(path, sizeof path, "%s/rank-1.csv", dir);
    FILE *f = fopen(path, "r");
    ck_assert(f);
    int late = 0, lonely = 0;
    while (fgets(line, sizeof line, f)) {
        long it;
        double clk, v[11];
        if (sscanf(line, "%ld,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf", &it, &clk, &v[0],
                   &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10]) != 13)
            continue;
        if (clk <= c0 + 0.05) continue;
        late++;
        lonely += v[10] == 0; /* msgs_applied */
    }
    fclose(f);
    ck_assert_msg(late > 50 && lonely == 0, "%d of the straggler's %d late iterations were alone",
                  lonely, late);
}
END_TEST

/* --time-budget: every rank stops at the same virtual time, whatever its iteration; the
 * summary has each rank's iterations. Asynchronous, the x4 straggler does a quarter of the
 * others' iterations; nothing sent is lost. */
START_TEST(test_time_budget)
{
    char dir[4096];
    tr_workdir_path(dir, sizeof dir, "budget");
    int st = sim_job(dir, "-n 4 --sim-compute fixed:5",
                     TASK " --algo sgp --epochs 50 --delay-bound none --time-budget 0.5 "
                          "--straggler slow:1:x4",
                     60);
    if (st) tr_show_log(dir);
    ck_assert_int_eq(st, 0);
    ck_assert_msg(fabs(tr_summary_num(dir, "time_budget_s") - 0.5) < 1e-12, "time_budget_s");
    for (int r = 0; r < 4; r++) {
        /* the first iteration boundary at or after 0.5 s: within one step (x4: 20 ms) */
        double c = tr_summary_rank_num(dir, r, "clock_s");
        ck_assert_msg(c >= 0.5 - 1e-9 && c <= 0.5 + 0.021, "rank %d stopped at %g s", r, c);
    }
    double i0 = tr_summary_rank_num(dir, 0, "iterations"),
           i1 = tr_summary_rank_num(dir, 1, "iterations");
    ck_assert_msg(i0 >= 90 && i0 <= 102 && i1 >= 22 && i1 <= 26, "iterations %g and %g", i0, i1);
    ck_assert(tr_summary_num(dir, "iterations_max") == i0);
    ck_assert(tr_summary_num(dir, "iterations_min") == i1);
    double ws = tr_summary_num(dir, "ps_weight_sum");
    ck_assert_msg(fabs(ws - 4.0) < 1e-9, "sum of weights %.12g", ws);
    /* the faithful default stops as well: its ranks wait for the straggler's rounds, and the
     * last rounds it never sends are announced (DONE), not waited for until a timeout */
    st = sim_job(dir, "-n 4 --sim-compute fixed:5",
                 TASK " --algo sgp --epochs 50 --time-budget 0.5 --straggler slow:1:x4", 60);
    if (st) tr_show_log(dir);
    ck_assert_int_eq(st, 0);
    ck_assert(tr_summary_has(dir, "\"failed_ranks\": []"));
    ck_assert_msg(tr_summary_num(dir, "wall_s") < 0.6, "virtual wall %g s",
                  tr_summary_num(dir, "wall_s"));
}
END_TEST

/* Weight health: beside a x100 straggler, asynchronous ranks run tens of rounds ahead of what
 * they receive (the straggler's shares come late, and it hoards the mass it is sent) and the
 * others' weights fall below 1e-3 (3.8e-4 here): each such rank warns once ("left [1e-2,
 * 1e2]"), and summary.json says how far they fell, with health "warn" and a reason naming the
 * rank and the iteration. The faithful default waits for round t's messages: every weight
 * stays 1. (A send completes when its message arrives, so link latency alone no longer lets
 * a rank run ahead: SGP waits for round t - 1's sends before sending round t.) */
START_TEST(test_weight_health)
{
    char dir[4096], log[4200];
    tr_workdir_path(dir, sizeof dir, "health_async");
#define HEALTH_TASK                                                                                \
    "--model mlp:16-32-4 --data gauss:dim=16,classes=4,train=4000,test=500 --batch 32 "            \
    "--threads 1 --epochs 2 --algo sgp"
    const char *args = HEALTH_TASK " --link latency=20ms";
    char a[1024];
    snprintf(a, sizeof a, "%s --straggler slow:1:x100 --delay-bound none --sgp-step z",
             HEALTH_TASK);
    int st = sim_job(dir, "-n 4 --sim-compute fixed:1", a, 60);
    if (st) tr_show_log(dir);
    ck_assert_int_eq(st, 0);
    ck_assert_msg(tr_summary_num(dir, "ps_weight_min") < 1e-3, "weights fell to %g only",
                  tr_summary_num(dir, "ps_weight_min"));
    ck_assert(tr_summary_num(dir, "staleness_p99") >= 10);
    snprintf(log, sizeof log, "%s.log", dir);
    size_t n = 0;
    unsigned char *text = slurp(log, &n);
    ck_assert(text);
    int warnings = 0, per_rank[4] = {0};
    for (const char *p = (const char *)text; (p = strstr(p, "left [1e-2, 1e2]")); p++) {
        const char *line = p;
        while (line > (const char *)text && line[-1] != '\n') line--;
        if (!strncmp(line, "hearsay: health ", 16)) continue; /* the run's verdict, at the end */
        warnings++;
        const char *r = strstr(line, "rank ");
        int rank = r && r < p ? atoi(r + 5) : -1;
        ck_assert_msg(rank >= 0 && rank < 4, "a weight warning names no rank");
        per_rank[rank]++;
    }
    free(text);
    ck_assert_msg(warnings >= 1, "no weight warning");
    for (int r = 0; r < 4; r++)
        ck_assert_msg(per_rank[r] <= 1, "rank %d warned %d times", r, per_rank[r]);
    ck_assert(tr_summary_has(dir, "\"health\": \"warn\""));
    ck_assert(tr_summary_has(dir, "left [1e-2, 1e2]: messages from later rounds mixed"));
    ck_assert(tr_summary_has(dir, "\"delay_bound\": \"none\""));
    ck_assert(tr_summary_has(dir, "\"sgp_step\": \"z\""));
    tr_workdir_path(dir, sizeof dir, "health_faithful");
    st = sim_job(dir, "-n 4 --sim-compute fixed:1", args, 60);
    if (st) tr_show_log(dir);
    ck_assert_int_eq(st, 0);
    ck_assert(tr_summary_num(dir, "ps_weight_min") == 1 &&
              tr_summary_num(dir, "ps_weight_max") == 1);
    ck_assert(tr_summary_num(dir, "staleness_max") == 0);
    snprintf(log, sizeof log, "%s.log", dir);
    ck_assert(!tr_file_has(log, "left [1e-2, 1e2]"));
    ck_assert(tr_summary_has(dir, "\"health\": \"ok\""));
    ck_assert(tr_summary_has(dir, "\"health_reasons\": [],"));
    /* the variant that ran is in the summary: the papers' bounds (SGP 0, OSGP tau) */
    ck_assert(tr_summary_has(dir, "\"delay_bound\": 0,"));
    ck_assert(tr_summary_has(dir, "\"sgp_step\": \"x\""));
    tr_workdir_path(dir, sizeof dir, "health_osgp");
    snprintf(a, sizeof a, "%s --algo osgp --tau 3", args);
    ck_assert_int_eq(sim_job(dir, "-n 4 --sim-compute fixed:1", a, 60), 0);
    ck_assert(tr_summary_has(dir, "\"delay_bound\": 3,"));
    ck_assert_msg(tr_summary_num(dir, "staleness_max") <= 3, "OSGP tau 3: staleness %g",
                  tr_summary_num(dir, "staleness_max"));
}
END_TEST

/* 1 when DIR/eval.csv has rows and their iterations rise strictly. */
static int eval_in_order(const char *dir)
{
    char path[4200], line[512];
    snprintf(path, sizeof path, "%s/eval.csv", dir);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    long prev = -1, rows = 0;
    int ok = fgets(line, sizeof line, f) != NULL; /* the header */
    while (ok && fgets(line, sizeof line, f)) {
        long it = strtol(line, NULL, 10);
        if (it <= prev) ok = 0;
        prev = it;
        rows++;
    }
    fclose(f);
    return ok && rows > 1;
}

/* Evaluation is an observer in virtual time: with a straggler, a jittered link and every rank
 * behind its own NIC, --eval-every changes no parameter of any rank at any iteration
 * (--dump-trajectory) and no byte of any rank-R.csv (every time column); its snapshots cost
 * what they would on a cluster only with --sim-eval-traffic. eval.csv is in iteration order. */
START_TEST(test_eval_observer)
{
    static const char *const algos[] = {"dpsgd", "allreduce"};
    const char *sim = "-n 6 --ranks-per-host 1 --sim-nic 100Mbit --sim-compute fixed:5";
    for (size_t k = 0; k < HS_ARRAY_LEN(algos); k++) {
        char a[4096], b[4096], c[4096], args[1024], name[64];
        snprintf(name, sizeof name, "observer_%s_none", algos[k]);
        tr_workdir_path(a, sizeof a, name);
        snprintf(name, sizeof name, "observer_%s_eval", algos[k]);
        tr_workdir_path(b, sizeof b, name);
        snprintf(name, sizeof name, "observer_%s_paid", algos[k]);
        tr_workdir_path(c, sizeof c, name);
#define OBS_TASK                                                                                   \
    "--model mlp:16-32-4 --data gauss:dim=16,classes=4,train=4000,test=500 --batch 32 "            \
    "--threads 1 --epochs 2 -q --dump-trajectory --straggler slow:1:x3 "                           \
    "--link latency=1ms,jitter=0.5ms"
        snprintf(args, sizeof args, OBS_TASK " --algo %s --eval-every 0", algos[k]);
        ck_assert_int_eq(sim_job(a, sim, args, 60), 0);
        snprintf(args, sizeof args, OBS_TASK " --algo %s --eval-every 0.125", algos[k]);
        ck_assert_int_eq(sim_job(b, sim, args, 60), 0);
        snprintf(args, sizeof args, OBS_TASK " --algo %s --eval-every 0.125 --sim-eval-traffic",
                 algos[k]);
        ck_assert_int_eq(sim_job(c, sim, args, 60), 0);
        for (int r = 0; r < 6; r++) {
            char f[64];
            snprintf(f, sizeof f, "rank-%d.traj.f32", r);
            ck_assert_msg(same_file(a, b, f), "%s: --eval-every changed rank %d's iterates",
                          algos[k], r);
            snprintf(f, sizeof f, "rank-%d.csv", r);
            ck_assert_msg(same_file(a, b, f), "%s: --eval-every changed rank %d's rank-%d.csv",
                          algos[k], r, r);
        }
        ck_assert(tr_summary_num(a, "wall_s") == tr_summary_num(b, "wall_s"));
        /* every rank's time columns add up to its wall_s, the evaluations' cost paid or not */
        char why[512];
        ck_assert_msg(tr_time_adds_up(b, 6, why, sizeof why) == 0, "%s: %s", algos[k], why);
        ck_assert_msg(tr_time_adds_up(c, 6, why, sizeof why) == 0, "%s: %s", algos[k], why);
        ck_assert_msg(eval_in_order(b), "%s: eval.csv out of iteration order", algos[k]);
        ck_assert_msg(eval_in_order(c), "%s: eval.csv out of iteration order", algos[k]);
        /* paid for: the snapshots cross the NICs, the ranks drain and wait for their sends */
        int differ = 0;
        for (int r = 0; r < 6; r++) {
            char f[64];
            snprintf(f, sizeof f, "rank-%d.csv", r);
            differ += !same_file(a, c, f);
        }
        ck_assert_msg(differ > 0, "%s: --sim-eval-traffic changed no time", algos[k]);
    }
}
END_TEST

/* The clock_s of the first row of DIR/eval.csv whose averaged model's test loss is at most
 * target (NAN: none). */
static double eval_first_at(const char *dir, double target)
{
    char path[4200], line[512];
    snprintf(path, sizeof path, "%s/eval.csv", dir);
    FILE *f = fopen(path, "r");
    if (!f) return NAN;
    double t = NAN;
    if (fgets(line, sizeof line, f))
        while (isnan(t) && fgets(line, sizeof line, f)) {
            long it, ranks;
            double ep, clk, loss;
            if (sscanf(line, "%ld,%lf,%lf,%ld,%lf", &it, &ep, &clk, &ranks, &loss) == 5 &&
                loss <= target)
                t = clk;
        }
    fclose(f);
    return t;
}

/* One time to target per question, the clock named: summary.json's time_to_target_avg_s is
 * the averaged model's (eval.csv's first row at the target, at its clock_s, the latest of the
 * ranks' clocks), time_to_target_s the median of the ranks' own models on their own clocks.
 * With a x4 straggler and asynchronous SGP they differ: the fast ranks' own models get there
 * on their clocks long before the average of all, the straggler's included, does. */
START_TEST(test_ttt_avg)
{
    char dir[4096], args[1024];
    tr_workdir_path(dir, sizeof dir, "ttt_avg");
    snprintf(args, sizeof args,
             "%s --epochs 2 --target-loss 0.5 --algo sgp --delay-bound none --straggler "
             "slow:1:x4 --eval-every 0.125",
             TASK);
    ck_assert_int_eq(sim_job(dir, "-n 8", args, 60), 0);
    double avg = tr_summary_num(dir, "time_to_target_avg_s"),
           med = tr_summary_num(dir, "time_to_target_s"), row = eval_first_at(dir, 0.5);
    ck_assert_msg(isfinite(avg) && fabs(avg - row) <= 1e-6,
                  "time_to_target_avg_s %g, eval.csv's first row at the target %g", avg, row);
    ck_assert(tr_summary_has(dir, "\"time_to_target_clock\": \"eval.csv clock_s"));
    ck_assert_msg(isfinite(med) && med < avg, "rank median %g, averaged model %g", med, avg);
}
END_TEST

/* A diverged run is FAILED: asynchronous SGP with the step on x beside a x100 straggler (rank
 * 0, which survives), lr 2: the others' weights fall below 1e-2 (each warns once, naming its
 * iteration), their loss turns NaN and they stop; rank 0's summary.json says "failed" with a
 * reason per diverged rank, and the run's exit status is not 0. */
START_TEST(test_health_failed)
{
    char dir[4096];
    tr_workdir_path(dir, sizeof dir, "health_failed");
    int st =
        sim_job(dir, "-n 4 --sim-compute fixed:1",
                HEALTH_TASK " --straggler slow:0:x100 --delay-bound none --sgp-step x --lr 2", 60);
    ck_assert_int_ne(st, 0);
    ck_assert_msg(tr_summary_has(dir, "\"health\": \"failed\""), "no failed health");
    ck_assert(tr_summary_has(dir, "\"rank 1 diverged at iteration "));
    ck_assert(tr_log_has(dir, "rank 1: push-sum weight "));
    ck_assert(tr_log_has(dir, "training diverged: loss is"));
    ck_assert(tr_log_has(dir, "hearsay: health failed: rank "));
}
END_TEST

/* A crashed rank: the survivors of a tolerant algorithm finish and report it, and no push-sum
 * mass is lost. */
START_TEST(test_crash)
{
    char dir[4096];
    tr_workdir_path(dir, sizeof dir, "crash");
    ck_assert_int_eq(
        sim_job(dir, "-n 6", TASK " --algo sgp --epochs 2 --straggler crash:2:iter=10", 60), 0);
    ck_assert(tr_summary_has(dir, "\"rank\": 2, \"after_iteration\""));
    ck_assert(tr_summary_num(dir, "final_test_loss") < 0.5);
    /* a failed peer: health warn, the reason naming it */
    ck_assert(tr_summary_has(dir, "\"health\": \"warn\""));
    ck_assert(tr_summary_has(dir, "\"rank 2 failed at/after iteration "));
    /* push-sum mass: the survivors' weights plus what the crashed rank took with it (the
     * simulated transport hands back what it never took: unsent, leave) */
    double ws = tr_summary_num(dir, "ps_weight_sum"), lost = tr_summary_num(dir, "ps_weight_lost");
    ck_assert_msg(fabs(ws + lost - 6.0) < 1e-9, "survivors %.12g + lost %.12g, not 6", ws, lost);
    ck_assert(lost > 0);
}
END_TEST

/* Every algorithm runs unchanged in virtual time and learns the task. */
START_TEST(test_every_algorithm)
{
    const char *algos[] = {"local", "sgp", "osgp", "dpsgd", "allreduce", "easgd", "eamsgd", "lsgd"};
    for (size_t i = 0; i < HS_ARRAY_LEN(algos); i++) {
        char dir[4096], args[1024], name[64];
        snprintf(name, sizeof name, "algo_%s", algos[i]);
        tr_workdir_path(dir, sizeof dir, name);
        snprintf(args, sizeof args, TASK " --algo %s --epochs 2%s", algos[i],
                 !strcmp(algos[i], "eamsgd") ? " --momentum 0.9" : "");
        int st = sim_job(dir, "-n 4", args, 60);
        if (st) tr_show_log(dir);
        ck_assert_msg(st == 0, "%s: %s", algos[i], tr_status_text(st));
        double loss = tr_summary_num(dir, "final_test_loss");
        ck_assert_msg(loss < 0.5, "%s: final test loss %g", algos[i], loss);
    }
}
END_TEST

/* Hosts and their NICs: traffic inside a host never touches the NIC (the same run, to the
 * bit, with and without --sim-nic), traffic between hosts is serialised through it. */
START_TEST(test_nic)
{
    char a[4096], b[4096], c[4096];
    tr_workdir_path(a, sizeof a, "nic_none");
    tr_workdir_path(b, sizeof b, "nic_onehost");
    tr_workdir_path(c, sizeof c, "nic_twohosts");
    const char *args = "--algo allreduce --model mlp:64-256-10 "
                       "--data gauss:dim=64,classes=10,train=4000,test=100 --epochs 1 "
                       "--max-iters 10 --eval-every 0 -q";
    ck_assert_int_eq(sim_job(a, "-n 8 --sim-compute fixed:0.01", args, 60), 0);
    ck_assert_int_eq(
        sim_job(b, "-n 8 --sim-compute fixed:0.01 --ranks-per-host 8 --sim-nic 100Mbit", args, 60),
        0);
    ck_assert_int_eq(
        sim_job(c, "-n 8 --sim-compute fixed:0.01 --ranks-per-host 4 --sim-nic 100Mbit", args, 60),
        0);
    double wa = tr_summary_num(a, "wall_s"), wb = tr_summary_num(b, "wall_s"),
           wc = tr_summary_num(c, "wall_s");
    ck_assert_msg(wa == wb, "one host: %g s with a NIC, %g s without", wb, wa);
    /* 10 all-reduces of 78 KB on a ring that crosses the hosts twice, through two NICs at
     * 12.5 MB/s each time: tens of milliseconds, where ideal links take 10 x 10 us */
    ck_assert_msg(wc > 0.03 && wc > 100 * wa, "two hosts behind 100 Mbit NICs: %g s, ideal: %g s",
                  wc, wa);
}
END_TEST

/* A send completes when its message has arrived, so asynchronous SGP (which waits for round
 * t - 1's sends before sending round t) goes at the link's pace, as a real run does; and a
 * message between two hosts crosses the receiving NIC cut through: one message time, not two.
 * 2 ranks, mlp:64-128-64-10 (69,032-byte messages: 5.52 ms at 100 Mbit/s), 0.1 ms steps. */
START_TEST(test_link_pace)
{
    const char *args = "--model mlp:64-128-64-10 --data gauss:dim=64,classes=10,train=4000 "
                       "--epochs 1 --max-iters 40 --eval-every 0 -q";
    const char *cases[][2] = {
        {"--link bw=100Mbit", "--algo sgp --delay-bound none"},
        {"--ranks-per-host 1 --sim-nic 100Mbit", "--algo sgp --delay-bound none"},
        {"--ranks-per-host 1 --sim-nic 100Mbit", "--algo allreduce"},
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(cases); i++) {
        char dir[4096], sim[256], all[512];
        tr_workdir_path(dir, sizeof dir, "pace");
        snprintf(sim, sizeof sim, "-n 2 --sim-compute fixed:0.1 %s", cases[i][0]);
        snprintf(all, sizeof all, "%s %s", cases[i][1], args);
        ck_assert_int_eq(sim_job(dir, sim, all, 60), 0);
        double ms = 1e3 * tr_summary_num(dir, "wall_s") / tr_summary_num(dir, "iterations");
        ck_assert_msg(ms > 5.4 && ms < 6.5, "%s %s: %g ms per iteration, the link takes 5.52",
                      cases[i][0], cases[i][1], ms);
    }
}
END_TEST

/* The ts (microseconds) of the first span NAME of rank PID whose arguments are KEY PEER and
 * more than 1,000 bytes, in the --trace file TEXT (one event a line); -1 when there is none. */
/* The start (us) of the k-th (from 0) complete span `name` of rank pid with args key = peer and
 * more than 1,000 bytes (a model, not a control message), or -1. */
static double trace_nth(const char *text, const char *name, int pid, const char *key, int peer,
                        int k)
{
    char pfx[64], nm[64], arg[64];
    snprintf(pfx, sizeof pfx, "{\"ph\":\"X\",\"pid\":%d,", pid);
    snprintf(nm, sizeof nm, "\"name\":\"%s\"", name);
    snprintf(arg, sizeof arg, "\"args\":{\"%s\":%d,\"bytes\":", key, peer);
    for (const char *l = text; l && *l;) {
        const char *end = strchr(l, '\n');
        size_t len = end ? (size_t)(end - l) : strlen(l);
        char line[512];
        if (len < sizeof line && !strncmp(l, pfx, strlen(pfx))) {
            memcpy(line, l, len);
            line[len] = 0;
            const char *a = strstr(line, arg), *t = strstr(line, "\"ts\":");
            if (strstr(line, nm) && a && t && atol(a + strlen(arg)) > 1000 && k-- == 0)
                return atof(t + 5);
        }
        l = end ? end + 1 : NULL;
    }
    return -1;
}

static double trace_first(const char *text, const char *name, int pid, const char *key, int peer)
{
    return trace_nth(text, name, pid, key, peer, 0);
}

/* Two messages through one NIC at the same time: 3 ranks, one per host, each sending its
 * model to both others at the same virtual time (SGP on the exponential graph: out-peers
 * i + 1 and i + 2). Every NIC then carries two flows out and two in. Shared fairly, each gets
 * half the rate, so both of rank 0's arrivals land 2 n / nic after they were sent (n =
 * 69,032 bytes, 100 Mbit/s: 11,045.12 us); served one after the other (fifo), the first lands
 * at n / nic (5,522.56 us) and the second at 2 n / nic. */
START_TEST(test_nic_share)
{
    const char *args = "--algo sgp --graph exp --model mlp:64-128-64-10 "
                       "--data gauss:dim=64,classes=10,train=4000 --epochs 1 --max-iters 2 "
                       "--eval-every 0 -q";
    const double n = 69032, nic = 100e6 / 8;
    for (int fair = 1; fair >= 0; fair--) {
        char dir[4096], sim[256], all[8192], trace[4200];
        tr_workdir_path(dir, sizeof dir, fair ? "nic_fair" : "nic_fifo");
        snprintf(trace, sizeof trace, "%s.json", dir);
        snprintf(sim, sizeof sim,
                 "-n 3 --ranks-per-host 1 --sim-nic 100Mbit --sim-nic-share %s "
                 "--sim-compute fixed:1",
                 fair ? "fair" : "fifo");
        snprintf(all, sizeof all, "%s --trace %s", args, trace);
        int st = sim_job(dir, sim, all, 60);
        if (st) tr_show_log(dir);
        ck_assert_int_eq(st, 0);
        size_t len = 0;
        char *text = (char *)slurp(trace, &len);
        ck_assert(text);
        double s1 = trace_first(text, "send", 1, "to", 0),
               s2 = trace_first(text, "send", 2, "to", 0);
        double a1 = trace_first(text, "apply", 0, "from", 1);
        double a2 = trace_first(text, "apply", 0, "from", 2);
        free(text);
        ck_assert_msg(s1 >= 0 && s2 >= 0 && a1 >= 0 && a2 >= 0, "%s: spans missing", trace);
        ck_assert_msg(fabs(s1 - s2) < 1e-3, "the ranks sent at %.3f and %.3f us", s1, s2);
        double d1 = a1 - s1, d2 = a2 - s2, one = 1e6 * n / nic;
        if (fair) {
            ck_assert_msg(fabs(d1 - 2 * one) < 2e-3 && fabs(d2 - 2 * one) < 2e-3,
                          "fair: arrivals after %.3f and %.3f us, expected %.3f", d1, d2, 2 * one);
        } else {
            ck_assert_msg(fabs(d1 - one) < 2e-3 && fabs(d2 - 2 * one) < 2e-3,
                          "fifo: arrivals after %.3f and %.3f us, expected %.3f and %.3f", d1, d2,
                          one, 2 * one);
        }
    }
}
END_TEST

/* A long run through the fair NICs: 300 s steps put the clock near 12,000 s, where a few bytes
 * left of a small message take less time than the clock can resolve (now + rem / rate ==
 * now). The NICs used to wait for them forever (the Ethernet study's SGP at 1 Gbit/s hung at
 * 3 s); the run must end, within the job's limit. */
START_TEST(test_nic_long_run)
{
    char dir[4096];
    tr_workdir_path(dir, sizeof dir, "nic_long");
    int st = sim_job(dir, "-n 4 --ranks-per-host 2 --sim-nic 1Gbit --sim-compute fixed:300000",
                     "--algo sgp --model mlp:16-32-4 --data gauss:dim=16,classes=4,train=4000,"
                     "test=100 --batch 32 --max-iters 40 --eval-every 0.1 -q --link "
                     "0-2:latency=1ms;0-3:latency=1ms;1-2:latency=1ms;1-3:latency=1ms",
                     30);
    if (st) tr_show_log(dir);
    ck_assert_int_eq(st, 0);
}
END_TEST

/* The transport's protocol (--sim-proto) to the nanosecond: 2 ranks on 2 hosts behind 100
 * Mbit/s NICs send each other a message of n = 69,032 bytes at the same virtual time (SGP on
 * 2 ranks, --delay-bound 0: each waits for the other's). By a rendezvous (rndv=1000, below
 * n) the data moves after the request to send and the read request, 128 bytes each, one
 * after the other: (2 x 128 + n) / nic. TCP's acknowledgements (acks) of the data coming in
 * take a = 66 / (2 x 1514) of each NIC's transmit side, so every transfer runs at nic /
 * (1 + a): n (1 + a) / nic, and (2 x 128 + n)(1 + a) / nic with both. */
START_TEST(test_proto)
{
    const char *args = "--algo sgp --delay-bound 0 --model mlp:64-128-64-10 "
                       "--data gauss:dim=64,classes=10,train=4000 --epochs 1 --max-iters 2 "
                       "--eval-every 0 -q";
    const double n = 69032, nic = 100e6 / 8, c = 128, a = 66.0 / (2 * 1514);
    const struct {
        const char *proto;
        double bytes;
    } cases[] = {
        {"", n},
        {"--sim-proto rndv=1000", 2 * c + n},
        {"--sim-proto acks", n * (1 + a)},
        {"--sim-proto rndv=1000,acks", (2 * c + n) * (1 + a)},
        {"--sim-proto rndv=100000", n}, /* above the message: sent eagerly */
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(cases); i++) {
        char dir[4096], sim[256], all[8192], trace[4200];
        tr_workdir_path(dir, sizeof dir, "proto");
        snprintf(trace, sizeof trace, "%s.json", dir);
        snprintf(sim, sizeof sim,
                 "-n 2 --ranks-per-host 1 --sim-nic 100Mbit %s --sim-compute fixed:1",
                 cases[i].proto);
        snprintf(all, sizeof all, "%s --trace %s", args, trace);
        int st = sim_job(dir, sim, all, 60);
        if (st) tr_show_log(dir);
        ck_assert_int_eq(st, 0);
        size_t len = 0;
        char *text = (char *)slurp(trace, &len);
        ck_assert(text);
        double s1 = trace_first(text, "send", 1, "to", 0);
        double a1 = trace_first(text, "apply", 0, "from", 1);
        free(text);
        ck_assert_msg(s1 >= 0 && a1 >= 0, "%s: spans missing", trace);
        double want = 1e6 * cases[i].bytes / nic;
        ck_assert_msg(fabs(a1 - s1 - want) < 2e-3, "'%s': the message took %.3f us, expected %.3f",
                      cases[i].proto, a1 - s1, want);
    }
}
END_TEST

/* --sim-proto rndv with a frozen receiver (--straggler freeze: SIGSTOP): a stopped process runs
 * no progress engine, so the request to send that reaches it is answered only when it thaws;
 * the read request (c = 128 bytes) and the data (n) follow then. 2 ranks on 2 hosts, 100 Mbit/s,
 * asynchronous SGP in lockstep, rank 1 frozen for 1 s from iteration 5: rank 0's message of
 * that round, sent as rank 1 froze, is applied 1 s + (c + n) / nic after it was sent. Before,
 * the frozen rank read it at once and applied it at the thaw, 1 s after. */
START_TEST(test_proto_frozen)
{
    const char *args = "--algo sgp --delay-bound none --model mlp:64-128-64-10 "
                       "--data gauss:dim=64,classes=10,train=4000 --epochs 1 --max-iters 12 "
                       "--eval-every 0 -q --straggler freeze:1:at=5:for=1s";
    const double n = 69032, nic = 100e6 / 8, c = 128;
    char dir[4096], all[8192], trace[4200];
    tr_workdir_path(dir, sizeof dir, "proto_frozen");
    snprintf(trace, sizeof trace, "%s.json", dir);
    snprintf(all, sizeof all, "%s --trace %s", args, trace);
    int st = sim_job(dir,
                     "-n 2 --ranks-per-host 1 --sim-nic 100Mbit --sim-proto rndv=1000 "
                     "--sim-compute fixed:100000",
                     all, 60);
    if (st) tr_show_log(dir);
    ck_assert_int_eq(st, 0);
    size_t len = 0;
    char *text = (char *)slurp(trace, &len);
    ck_assert(text);
    double s5 = trace_nth(text, "send", 0, "to", 1, 4);
    double a5 = trace_nth(text, "apply", 1, "from", 0, 4);
    free(text);
    ck_assert_msg(s5 >= 0 && a5 >= 0, "%s: spans missing", trace);
    double want = 1e6 + 1e6 * (c + n) / nic;
    ck_assert_msg(fabs(a5 - s5 - want) < 1.0,
                  "the message to the frozen rank was applied %.3f us after it was sent, expected "
                  "%.3f (the thaw, then the read request and the data)",
                  a5 - s5, want);
}
END_TEST

/* --sim-compute measured-all: every stretch of the workers' code costs its thread CPU time,
 * paid at the next call into the simulator (not while a service lock is held, not for a pure
 * service's handler run inside a delivery). The algorithms with services (AD-PSGD's passive
 * side, SGP's pure receiver, leader-SGD's service) and the all-reduce run to the end through
 * the NICs and the rendezvous, and rank 0's clock is charged far more compute than 1 us steps
 * give it. */
START_TEST(test_measured_all)
{
    const char *algos[] = {"--algo sgp", "--algo allreduce", "--algo sgp --delay-bound none",
                           "--algo adpsgd", "--algo lsgd"};
    for (size_t i = 0; i < HS_ARRAY_LEN(algos); i++) {
        char dir[4096], all[1024];
        snprintf(all, sizeof all, TASK " %s --epochs 1", algos[i]);
        tr_workdir_path(dir, sizeof dir, "mall_fixed");
        const char *net = "-n 4 --ranks-per-host 2 --sim-nic 100Mbit --sim-proto rndv=1000,acks";
        char sim[256];
        snprintf(sim, sizeof sim, "%s --sim-compute fixed:0.001", net);
        ck_assert_int_eq(sim_job(dir, sim, all, 60), 0);
        double fixed = tr_summary_rank_num(dir, 0, "compute_s");
        tr_workdir_path(dir, sizeof dir, "mall");
        snprintf(sim, sizeof sim, "%s --sim-compute measured-all", net);
        int st = sim_job(dir, sim, all, 60);
        if (st) tr_show_log(dir);
        ck_assert_int_eq(st, 0);
        /* the compute the clock was charged: the thread CPU time of rank 0's code, far above
         * the 1 us steps (the run's wall time need not grow: with 100 Mbit NICs the messages
         * dominate and a lockstep rank's compute overlaps its in-peers' transfers; measured
         * 0.01294 s against 0.01302 s once, hence no comparison of wall times) */
        double comp = tr_summary_rank_num(dir, 0, "compute_s");
        ck_assert_msg(comp > 3 * fixed,
                      "%s: rank 0 computed %g s virtual with measured-all, %g s with 1 us steps",
                      algos[i], comp, fixed);
    }
}
END_TEST

static void rejected(const char *simargs, const char *needle)
{
    ck_assert_msg(tr_sim_rejected(simargs, TASK, 2, needle), "'%s' (see stderr)", simargs);
}

START_TEST(test_bad_input)
{
    rejected("-n 0", "-n");
    rejected("", "-n N");
    rejected("-n 4 --sim-compute fast", "--sim-compute 'fast'");
    rejected("-n 4 --sim-compute measured-al", "--sim-compute 'measured-al'");
    rejected("-n 4 --sim-compute fixed:-3", "--sim-compute fixed:MS");
    rejected("-n 4 --ranks-per-host -1", "--ranks-per-host");
    rejected("-n 4 --sim-payload resnet51", "--sim-payload resnet51");
    rejected("-n 4 --sim-payload bytes:6", "not a whole number of floats");
    rejected("-n 4 --sim-payload bytes:0", "--sim-payload bytes:0");
    rejected("-n 4 --sim-threads 2000", "--sim-threads");
    rejected("-n 4 --algo sgp --graph donut", "donut");
    rejected("-n 4 --sim-nic 10Gbt", "--sim-nic 10Gbt");
    rejected("-n 4 --sim-nic 1Gbit --sim-nic-share lifo", "--sim-nic-share: 'lifo'");
    rejected("-n 4 --sim-nic 1Gbit --sim-proto rxm,tls", "unknown item 'tls'");
    rejected("-n 4 --sim-nic 1Gbit --sim-proto rndv=big", "--sim-proto rndv=BYTES");
    rejected("-n 4 --sim-nic 1Gbit --sim-proto rndv=0", "--sim-proto rndv=BYTES");
    rejected("-n 4 --sim-nic 1Gbit --sim-proto acks,", "trailing comma");
    rejected("-n 4 --sim-nic 1Gbit --sim-proto acks,,rxm", "empty or too long item");
    rejected("-n 4 --sim-proto rxm", "--sim-proto rxm: needs --sim-nic");
    rejected("-n 4 --sim-nic 1Gbit --sim-nic-share fifo --sim-proto rxm", "needs --sim-nic");
    rejected("-n 4 --algo dpsgd --delay-bound 2", "--delay-bound applies to --algo sgp osgp");
    rejected("-n 4 --algo allreduce --time-budget 5", "--time-budget applies to --algo");
    rejected("-n 4 --algo sgp --delay-bound soon", "--delay-bound");
}
END_TEST

int main(void)
{
    const char *why = tr_require(NULL, NULL);
    if (tr_workdir_init("sim") < 0) return 1;
    Suite *s = suite_create("sim");
    TCase *tc = tcase_create("sim");
    tcase_set_timeout(tc, 240);
    TR_ADD_TEST(tc, test_deterministic, why);
    TR_ADD_TEST(tc, test_rate_n16, why);
    TR_ADD_TEST(tc, test_rate_n64, why);
    TR_ADD_TEST(tc, test_exp1peer_exact, why);
    TR_ADD_TEST(tc, test_straggler_virtual, why);
    TR_ADD_TEST(tc, test_end_answers, why);
    TR_ADD_TEST(tc, test_weight_health, why);
    TR_ADD_TEST(tc, test_time_budget, why);
    TR_ADD_TEST(tc, test_eval_observer, why);
    TR_ADD_TEST(tc, test_ttt_avg, why);
    TR_ADD_TEST(tc, test_health_failed, why);
    TR_ADD_TEST(tc, test_crash, why);
    TR_ADD_TEST(tc, test_every_algorithm, why);
    TR_ADD_TEST(tc, test_nic, why);
    TR_ADD_TEST(tc, test_link_pace, why);
    TR_ADD_TEST(tc, test_nic_share, why);
    TR_ADD_TEST(tc, test_nic_long_run, why);
    TR_ADD_TEST(tc, test_proto, why);
    TR_ADD_TEST(tc, test_proto_frozen, why);
    TR_ADD_TEST(tc, test_measured_all, why);
    TR_ADD_TEST(tc, test_bad_input, why);
    suite_add_tcase(s, tc);
    return tr_run_suite(s);
}
