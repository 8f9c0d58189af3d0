/* bench/bench_sim.c — `hearsay bench sim`: what the virtual-time simulator costs on this host.
 *
 * Two measurements, each a `hearsay sim` child process (its peak memory is the child's own,
 * from wait4), once per host thread count (--sim-threads):
 *   scale     N workers of SGP on exp1peer with a small model (default 1,024 x logreg:64-10,
 *             200 iterations): host seconds, worker-steps per second, peak resident memory;
 *   overhead  a mid-sized model (default 64 x mlp:64-256-256-10, 200 iterations): the
 *             simulator's own share of the run (DIR/sim.json "overhead": scheduling, thread
 *             switches, the simulated transport, the consensus measurement; everything that is
 *             not the workers' own code) and worker-steps per second.
 * The files of every thread count are compared byte for byte with those of the first: a
 * simulation's results do not depend on how many host threads ran it.
 * --curve N1,N2,..: the scale run at each N instead (one host thread): how host time and
 * memory grow with N (linear: worker-steps per second and memory per worker flat). */
#include "bench/bench_launch.h"
#include "bench/bench_util.h"
#include "hearsay/common.h"
#include "hearsay/options.h"
#include "hearsay/file.h"
#include "tools/commands.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const hs_option_t sim_options[] = {
    {.name = "scale-n",
     .type = HS_OPT_INT,
     .def = "1024",
     .range = "[0, 65536]",
     .group = "Benchmark",
     .help = "workers of the scale run (0: skip it)"},
    {.name = "scale-model",
     .type = HS_OPT_STRING,
     .def = "logreg:64-10",
     .metavar = "SPEC",
     .help = "model of the scale run (its input size sets the data's dim)"},
    {.name = "overhead-n",
     .type = HS_OPT_INT,
     .def = "64",
     .range = "[0, 65536]",
     .help = "workers of the overhead run (0: skip it)"},
    {.name = "overhead-model",
     .type = HS_OPT_STRING,
     .def = "mlp:64-256-256-10",
     .metavar = "SPEC",
     .help = "model of the overhead run"},
    {.name = "iters",
     .type = HS_OPT_INT,
     .def = "200",
     .range = "[1, 1000000]",
     .help = "iterations per worker"},
    {.name = "curve",
     .type = HS_OPT_STRING,
     .def = "",
     .metavar = "LIST",
     .help = "the cost curve instead: the scale run at each N of LIST (e.g. "
             "64,256,1024,4096,16384), one host thread (the first of --threads); host seconds, "
             "peak memory per worker, worker-steps per second (runs without --out: 2 open "
             "files per rank would bound N)"},
    {.name = "threads",
     .type = HS_OPT_STRING,
     .def = "1,2",
     .metavar = "LIST",
     .help = "host thread counts to run each measurement with (--sim-threads)"},
    {.name = "limit",
     .type = HS_OPT_DOUBLE,
     .def = "600",
     .range = "[1, 86400]",
     .help = "seconds one run may take before it is stopped"},
    {.name = "json",
     .type = HS_OPT_BOOL,
     .def = "false",
     .help = "one JSON object per measurement"},
};

static const hs_cfg_spec_t sim_spec = {
    .usage = "hearsay bench sim [OPTIONS]",
    .summary = "The virtual-time simulator's cost on this host: N workers of SGP on exp1peer\n"
               "(batch 32, gauss data of the model's input size) for --iters iterations, run by\n"
               "`hearsay sim` once per host thread count. Reports host seconds, worker-steps per\n"
               "second, peak resident memory and the simulator's own share of the CPU (what is\n"
               "not the workers' code: scheduling, switches, simulated transport, consensus),\n"
               "and checks that every thread count gives byte-identical files.",
    .options = sim_options,
    .n_options = HS_ARRAY_LEN(sim_options),
};

typedef struct sim_meas {
    double host_s, cpu_s, worker_s, overhead, steps_per_s, rss_mib;
    long steps;
} sim_meas_t;

/* A number from DIR/sim.json ("key": value); NAN when absent or null. */
static double json_num(const char *text, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(text, pat);
    if (!p) return NAN;
    p += strlen(pat);
    char *end;
    double v = strtod(p, &end);
    return end == p ? NAN : v;
}

/* A file the benchmark's own runs wrote (a regular file of at most 1 GiB), or NULL. */
static char *slurp(const char *path)
{
    char *buf = NULL;
    if (hs_file_read_all(path, "result file", 1LL << 30, &buf, NULL) < 0) return NULL;
    return buf;
}

/* Run `hearsay sim` with n workers of model into dir; fill *m. */
/* Run `hearsay sim` with n workers of model into dir; fill *m. files = 0: without --out (no
 * per-rank files, which need 2 open files per rank: 16,384 ranks pass the usual limit of
 * 20,000); the figures then come from its last line (stdout, kept in dir/stdout.txt) and
 * its CPU time from wait4. */
static int run_sim_files(const char *self, int n, const char *model, int iters, int threads,
                         const char *dir, double limit_s, int files, sim_meas_t *m)
{
    long in = 0;
    const char *colon = strchr(model, ':');
    if (colon) in = strtol(colon + 1, NULL, 10);
    if (in < 1)
        return HS_ERR(-EINVAL,
                      "model '%s': expected logreg:IN-.. or mlp:IN-.. (the input size "
                      "sets the data)",
                      model);
    char ns[32], it[32], th[32], data[128];
    snprintf(ns, sizeof ns, "%d", n);
    snprintf(it, sizeof it, "%d", iters);
    snprintf(th, sizeof th, "%d", threads);
    /* 32 samples per worker and iteration; a shard of at least one epoch's worth */
    long train = HS_MAX(2000L, 32L * n * 4);
    snprintf(data, sizeof data, "gauss:dim=%ld,train=%ld,test=1000", in, train);
    char *argv[] = {
        (char *)self,  "sim", "-n",           ns,         "--sim-threads", th,
        "--algo",      "sgp", "--graph",      "exp1peer", "--model",       (char *)model,
        "--data",      data,  "--batch",      "32",       "--epochs",      "100000",
        "--max-iters", it,    "--eval-every", "0",        "--quiet",       "--out",
        (char *)dir,   NULL};
    char outpath[4200];
    snprintf(outpath, sizeof outpath, "%s/stdout.txt", dir);
    if (!files) argv[HS_ARRAY_LEN(argv) - 4] = NULL; /* (no --quiet --out DIR) */
    pid_t pid = fork();
    if (pid < 0) return HS_ERR(-errno, "fork: %s", strerror(errno));
    if (pid == 0) {
        if (!files) {
            FILE *o = fopen(outpath, "w");
            if (!o || dup2(fileno(o), 1) < 0) _exit(126);
        }
        execv(self, argv);
        _exit(127);
    }
    double t0 = hs_now();
    int st = 0;
    struct rusage ru;
    for (;;) {
        pid_t r = wait4(pid, &st, WNOHANG, &ru);
        if (r == pid) break;
        if (r < 0) return HS_ERR(-errno, "wait4: %s", strerror(errno));
        if (hs_now() - t0 > limit_s) {
            kill(pid, SIGKILL);
            wait4(pid, &st, 0, &ru);
            return HS_ERR(-ETIMEDOUT, "hearsay sim -n %d (%s) ran past --limit %.0f s", n, model,
                          limit_s);
        }
        usleep(20000);
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return HS_ERR(-EIO, "hearsay sim -n %d (%s) failed (status %d)", n, model,
                      WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    m->rss_mib = (double)ru.ru_maxrss / 1024.0;
    if (!files) { /* "hearsay sim: W s on the host, S steps (R steps/s, ..." */
        char *text = slurp(outpath);
        const char *p = text ? strstr(text, "hearsay sim: ") : NULL;
        while (p && strstr(p + 1, "hearsay sim: ")) p = strstr(p + 1, "hearsay sim: ");
        if (!p || sscanf(p, "hearsay sim: %lf s on the host, %ld steps (%lf", &m->host_s, &m->steps,
                         &m->steps_per_s) != 3) {
            free(text);
            return HS_ERR(-EIO, "%s: no 'hearsay sim: ... s on the host' line", outpath);
        }
        free(text);
        m->cpu_s = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
                   (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
        m->worker_s = m->overhead = NAN;
        return 0;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/sim.json", dir);
    char *text = slurp(path);
    if (!text) return HS_ERR(-EIO, "%s: cannot read it", path);
    m->host_s = json_num(text, "host_wall_s");
    m->cpu_s = json_num(text, "host_cpu_s");
    m->worker_s = json_num(text, "worker_s");
    m->overhead = json_num(text, "overhead");
    m->steps_per_s = json_num(text, "steps_per_s");
    m->steps = (long)json_num(text, "steps");
    free(text);
    return 0;
}

static int run_sim(const char *self, int n, const char *model, int iters, int threads,
                   const char *dir, double limit_s, sim_meas_t *m)
{
    return run_sim_files(self, n, model, iters, threads, dir, limit_s, 1, m);
}

/* Drop the line that names the output directory (summary.json's "out"), in place. */
static void drop_out_line(char *text)
{
    char *p = strstr(text, "\"out\":");
    if (!p) return;
    char *start = p, *end = strchr(p, '\n');
    while (start > text && start[-1] != '\n') start--;
    if (end)
        memmove(start, end + 1, strlen(end + 1) + 1);
    else
        *start = 0;
}

/* 1 when file `name` is byte-identical in directories a and b (the directory's own name
 * aside). */
static int same_file(const char *a, const char *b, const char *name)
{
    char pa[4200], pb[4200];
    snprintf(pa, sizeof pa, "%s/%s", a, name);
    snprintf(pb, sizeof pb, "%s/%s", b, name);
    char *x = slurp(pa), *y = slurp(pb);
    if (x) drop_out_line(x);
    if (y) drop_out_line(y);
    int same = x && y && !strcmp(x, y);
    free(x);
    free(y);
    return same;
}

static void rm_dir(const char *dir)
{
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "hearsay bench sim: could not remove %s\n", dir);
}

static int measure(const char *what, const char *self, int n, const char *model, int iters,
                   const int *threads, int nt, double limit_s, int json)
{
    char first[4096] = "";
    for (int i = 0; i < nt; i++) {
        char tmpl[] = "/tmp/hearsay-bench-sim-XXXXXX";
        if (!mkdtemp(tmpl)) return HS_ERR(-errno, "mkdtemp: %s", strerror(errno));
        sim_meas_t m = {0};
        int rc = run_sim(self, n, model, iters, threads[i], tmpl, limit_s, &m);
        if (rc < 0) {
            rm_dir(tmpl);
            if (first[0]) rm_dir(first);
            return rc;
        }
        const char *same = "-";
        if (i == 0) {
            snprintf(first, sizeof first, "%s", tmpl);
        } else {
            int ok = same_file(first, tmpl, "summary.json") &&
                     same_file(first, tmpl, "consensus.csv") &&
                     same_file(first, tmpl, "rank-0.csv") && same_file(first, tmpl, "eval.csv");
            same = ok ? "yes" : "NO";
            rm_dir(tmpl);
        }
        char ov[32], ovj[32];
        snprintf(ov, sizeof ov, isfinite(m.overhead) ? "%5.1f %%" : "    -  ", 100 * m.overhead);
        snprintf(ovj, sizeof ovj, isfinite(m.overhead) ? "%.4f" : "null", m.overhead);
        if (json)
            printf("{\"bench\": \"sim\", \"measure\": \"%s\", \"algo\": \"sgp\", \"graph\": "
                   "\"exp1peer\", \"model\": \"%s\", \"n\": %d, \"iters\": %d, \"sim_threads\": "
                   "%d, \"host_s\": %.3f, \"host_cpu_s\": %.3f, \"worker_s\": %.3f, "
                   "\"overhead\": %s, \"steps\": %ld, \"steps_per_s\": %.1f, \"peak_rss_mib\": "
                   "%.0f, \"same_as_first\": %s}\n",
                   what, model, n, iters, threads[i], m.host_s, m.cpu_s, m.worker_s, ovj, m.steps,
                   m.steps_per_s, m.rss_mib,
                   i == 0 ? "null" : (!strcmp(same, "yes") ? "true" : "false"));
        else
            printf("%-8s %-18s N %5d  %4d it  threads %d  host %7.2f s (CPU %6.2f s)  %6.0f "
                   "steps/s  peak %5.0f MiB  simulator %s  same files: %s\n",
                   what, model, n, iters, threads[i], m.host_s, m.cpu_s, m.steps_per_s, m.rss_mib,
                   ov, same);
        fflush(stdout);
    }
    if (first[0]) rm_dir(first);
    return 0;
}

/* The cost curve: the scale run at each N of ns (host thread count `threads`). */
static int curve(const char *self, const int *ns, int nn, const char *model, int iters, int threads,
                 double limit_s, int json)
{
    double first = NAN;
    if (!json)
        printf("# curve: %s, SGP on exp1peer, %d iterations, %d host thread%s, no --out (CPU "
               "s: the whole process's)\n"
               "#      N   host s    CPU s  peak MiB  KiB/worker  worker-steps/s  vs first\n",
               model, iters, threads, threads > 1 ? "s" : "");
    for (int i = 0; i < nn; i++) {
        char tmpl[] = "/tmp/hearsay-bench-sim-XXXXXX";
        if (!mkdtemp(tmpl)) return HS_ERR(-errno, "mkdtemp: %s", strerror(errno));
        sim_meas_t m = {0};
        int rc = run_sim_files(self, ns[i], model, iters, threads, tmpl, limit_s, 0, &m);
        rm_dir(tmpl);
        if (rc < 0) return rc;
        if (i == 0) first = m.steps_per_s;
        double per = m.rss_mib * 1024.0 / ns[i], rel = m.steps_per_s / first;
        if (json)
            printf("{\"bench\": \"sim\", \"measure\": \"curve\", \"algo\": \"sgp\", "
                   "\"graph\": \"exp1peer\", \"model\": \"%s\", \"n\": %d, \"iters\": %d, "
                   "\"sim_threads\": %d, \"host_s\": %.3f, \"host_cpu_s\": %.3f, \"steps\": %ld, "
                   "\"steps_per_s\": %.1f, \"peak_rss_mib\": %.0f, \"kib_per_worker\": %.1f, "
                   "\"vs_first\": %.3f}\n",
                   model, ns[i], iters, threads, m.host_s, m.cpu_s, m.steps, m.steps_per_s,
                   m.rss_mib, per, rel);
        else
            printf("  %6d  %7.2f  %7.2f  %8.0f  %10.1f  %14.0f  %8.2f\n", ns[i], m.host_s, m.cpu_s,
                   m.rss_mib, per, m.steps_per_s, rel);
        fflush(stdout);
    }
    return 0;
}

int hs_bench_sim(int argc, char **argv)
{
    hs_cfg_t *cfg = NULL;
    if (hs_cfg_create(&cfg, &sim_spec) < 0) {
        fprintf(stderr, "hearsay bench sim: %s\n", hs_last_error());
        return 1;
    }
    int rc = hs_cfg_parse_args(cfg, argc, argv);
    if (rc == HS_CFG_HELP) {
        hs_cfg_print_help(cfg, stdout);
        hs_cfg_free(&cfg);
        return 0;
    }
    int threads[HS_BL_MAX_LIST], nt = 0, ns[HS_BL_MAX_LIST], nn = 0;
    if (rc == 0)
        rc = hs_bl_parse_ints(hs_cfg_str(cfg, "threads"), "--threads", 1, 1024, threads, &nt);
    const char *cv = hs_cfg_str(cfg, "curve");
    if (rc == 0 && cv && *cv) rc = hs_bl_parse_ints(cv, "--curve", 2, 65536, ns, &nn);
    if (rc < 0) {
        fprintf(stderr, "hearsay bench sim: %s\n", hs_last_error());
        hs_cfg_free(&cfg);
        return 2;
    }
    char self[4096];
    int status = 0;
    if (hs_bl_self(self, sizeof self) < 0) {
        fprintf(stderr, "hearsay bench sim: %s\n", hs_last_error());
        hs_cfg_free(&cfg);
        return 1;
    }
    int iters = (int)hs_cfg_int(cfg, "iters"), json = hs_cfg_bool(cfg, "json");
    double limit = hs_cfg_double(cfg, "limit");
    int sn = (int)hs_cfg_int(cfg, "scale-n"), on = (int)hs_cfg_int(cfg, "overhead-n");
    double load[1] = {NAN};
    if (getloadavg(load, 1) < 1) load[0] = NAN;
    if (!json)
        printf("# hearsay bench sim: SGP on exp1peer, batch 32; OPENBLAS_CORETYPE %s (core %s); "
               "%ld online CPUs, load average %.2f at the start\n"
               "# simulator: the share of the run's wall time outside the workers' code (one "
               "host thread only); a loaded host inflates it (thread hand-overs wait for a "
               "CPU)\n",
               hs_bench_coretype_env(), hs_bench_blas_core(), sysconf(_SC_NPROCESSORS_ONLN),
               load[0]);
    if (nn > 0) {
        if (curve(self, ns, nn, hs_cfg_str(cfg, "scale-model"), iters, threads[0], limit, json) <
            0) {
            fprintf(stderr, "hearsay bench sim: %s\n", hs_last_error());
            status = 1;
        }
        sn = on = 0;
    }
    if (sn > 0 && measure("scale", self, sn, hs_cfg_str(cfg, "scale-model"), iters, threads, nt,
                          limit, json) < 0) {
        fprintf(stderr, "hearsay bench sim: %s\n", hs_last_error());
        status = 1;
    }
    if (status == 0 && on > 0 &&
        measure("overhead", self, on, hs_cfg_str(cfg, "overhead-model"), iters, threads, nt, limit,
                json) < 0) {
        fprintf(stderr, "hearsay bench sim: %s\n", hs_last_error());
        status = 1;
    }
    hs_cfg_free(&cfg);
    return status;
}
