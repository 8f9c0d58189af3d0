/*
 * tests/test_sim_scale.c — what `hearsay sim` costs as the job grows (issue 29): the fair NICs'
 * sharing gives the rates of the reference scan bit for bit (HS_TEST_SIM_FAIR_CHECK recomputes
 * every sharing the old way and fails the run at the first rate that differs) and a dense
 * graph is cheap; a simulated worker's memory does not grow with the number of workers (per-rank
 * tables sized by degree, the data, the shards, the host map and the graph shared).
 */
#include "hearsay/common.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/runlib.h"

#define TASK                                                                                       \
    "--model logreg:64-10 --data gauss:dim=64,train=8192,test=200 --batch 32 --threads 1 "         \
    "--eval-every 0 -q"

/* A number from DIR/sim.json; NAN when absent. */
static double sim_num(const char *dir, const char *key)
{
    char path[4200], pat[128];
    snprintf(path, sizeof path, "%s/sim.json", dir);
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    size_t n = 0;
    char *text = tr_slurp(path, &n);
    if (!text) return NAN;
    const char *p = strstr(text, pat);
    double v = p ? strtod(p + strlen(pat), NULL) : NAN;
    free(text);
    return v;
}

static void job(const char *name, const char *sim, const char *args, double limit_s)
{
    char dir[4096];
    tr_workdir_path(dir, sizeof dir, name);
    int st = tr_sim_job(dir, sim, args, limit_s);
    if (st) tr_show_log(dir);
    ck_assert_msg(st == 0, "%s: %s", name, tr_status_text(st));
}

/* Every sharing of the fair NICs checked against the reference scan, on graphs and protocols
 * that load them differently: the complete graph with one rank per host (every flow shares
 * both its sides with many), two ranks per host with TCP's acknowledgements and rendezvous
 * (weighted sides, control messages), exp1peer with a crash and a straggler, the all-reduce. */
START_TEST(test_fair_reference)
{
    ck_assert_int_eq(setenv("HS_TEST_SIM_FAIR_CHECK", "1", 1), 0);
    job("fair_complete", "-n 16 --ranks-per-host 1 --sim-nic 100Mbit",
        TASK " --algo sgp --graph complete --max-iters 6", 120);
    job("fair_acks", "-n 12 --ranks-per-host 2 --sim-nic 100Mbit --sim-proto acks,rndv=1000",
        TASK " --algo dpsgd --graph complete --max-iters 6 --straggler slow:5:x3", 120);
    job("fair_crash", "-n 16 --ranks-per-host 4 --sim-nic 1Gbit",
        TASK " --algo sgp --graph exp1peer --max-iters 20 --straggler crash:3,9:iter=8 "
             "--straggler slow:5:x2",
        120);
    job("fair_allreduce", "-n 12 --ranks-per-host 3 --sim-nic 1Gbit --sim-proto rxm",
        TASK " --algo allreduce --max-iters 6", 120);
    unsetenv("HS_TEST_SIM_FAIR_CHECK");
}
END_TEST

/* The complete graph on 64 hosts behind fair 1 Gbit NICs, 4 iterations: 4,032 flows at once.
 * Sharing by a scan of every flow for every side took 31 s of CPU here (52.7 s of a loaded
 * host's wall time); now ~5 s. Bounded by CPU time (what a loaded host does not inflate). */
START_TEST(test_dense_fair)
{
    char dir[4096];
    tr_workdir_path(dir, sizeof dir, "dense");
    job("dense", "-n 64 --ranks-per-host 1 --sim-nic 1Gbit --sim-threads 1",
        "--model mlp:64-256-10 --data gauss:dim=64,train=16384,test=200 --batch 32 --threads 1 "
        "--eval-every 0 -q --algo sgp --graph complete --max-iters 4",
        240);
    double cpu = sim_num(dir, "host_cpu_s");
    printf("complete graph, 64 hosts, fair NICs, 4 iterations: %.2f s of CPU\n", cpu);
    ck_assert_msg(cpu < 20, "%.2f s of CPU (the reference scan took 31 s)", cpu);
}
END_TEST

/* Memory per simulated worker does not grow with N: 64, 256 and 1,024 workers of SGP on exp1peer
 * (whose period and peers grow as log2 N). What each worker adds (the peak's growth per added
 * worker) is the same from 256 to 1,024 as from 64 to 256, within 25 %, and under 1 MiB.
 * Before, tables of the whole job in every rank (the graph, 26 SGP tables, hostnames, the
 * end-of-run results) made it 1.28 MiB per worker from 256 to 1,024 and growing; now ~360 KiB
 * (of which ~190 KiB is each simulated thread's stack and the thread-local storage of the
 * libraries linked in: OpenBLAS 60 KiB, cuBLAS(Lt) 104 KiB in a CUDA build). */
START_TEST(test_memory_per_worker)
{
    double mib[3];
    int ns[3] = {64, 256, 1024};
    for (int i = 0; i < 3; i++) {
        char name[64], dir[4096], sim[128], args[512];
        snprintf(name, sizeof name, "mem_%d", ns[i]);
        tr_workdir_path(dir, sizeof dir, name);
        snprintf(sim, sizeof sim, "-n %d --sim-threads 1", ns[i]);
        snprintf(args, sizeof args,
                 "--model logreg:64-10 --data gauss:dim=64,train=%d,test=200 --batch 32 "
                 "--threads 1 --eval-every 0 -q --algo sgp --graph exp1peer --max-iters 8",
                 128 * ns[i]);
        job(name, sim, args, 240);
        mib[i] = sim_num(dir, "peak_rss_mib");
        ck_assert_msg(isfinite(mib[i]), "no peak_rss_mib in %s/sim.json", dir);
    }
    double lo = 1024 * (mib[1] - mib[0]) / (ns[1] - ns[0]),
           hi = 1024 * (mib[2] - mib[1]) / (ns[2] - ns[1]);
    printf("peak %.0f / %.0f / %.0f MiB at 64 / 256 / 1,024 workers: %.0f KiB per added worker "
           "from 64 to 256, %.0f from 256 to 1,024\n",
           mib[0], mib[1], mib[2], lo, hi);
    ck_assert_msg(hi < 1.25 * lo, "%.0f KiB per worker from 256 to 1,024, %.0f from 64 to 256", hi,
                  lo);
    ck_assert_msg(hi < 1024, "%.0f KiB per worker from 256 to 1,024", hi);
}
END_TEST

int main(void)
{
    const char *why = tr_require(NULL, NULL);
    if (tr_workdir_init("sim_scale") < 0) return 1;
    Suite *s = suite_create("sim_scale");
    TCase *tc = tcase_create("sim_scale");
    tcase_set_timeout(tc, 600);
    /* (the cost figures are the simulator's, not those of an instrumented build) */
    const char *cost_why = why;
#if defined(__SANITIZE_ADDRESS__)
    if (!cost_why)
        cost_why = "a sanitizer build: its memory and CPU figures are not the simulator's";
#endif
    TR_ADD_TEST(tc, test_fair_reference, why);
    TR_ADD_TEST(tc, test_dense_fair, cost_why);
    TR_ADD_TEST(tc, test_memory_per_worker, cost_why);
    suite_add_tcase(s, tc);
    return tr_run_suite(s);
}
