/*
 * runtime/sim/measure.c — what a simulated run measures and writes besides the ranks' own
 * files: the consensus distance of every iteration (hs_exec_t.observe: consensus.csv, and
 * consensus_rate / consensus_exact_after added to summary.json), DIR/sim.json (what the run
 * cost on the host) and --sim-compute bench's step. See sim_impl.h.
 */
#include "runtime/sim/sim_impl.h"

#include "hearsay/common.h"
#include "hearsay/file.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int live_ranks(const sim_world_t *w)
{
    return w->live;
}

/* Close the pending iteration i into a row: sqrt(mean_i ||z_i||^2 - ||mean z||^2). */
static int cons_close(sim_world_t *w, int i)
{
    sim_cons_t *c = &w->cons[i];
    double m2 = 0;
    for (size_t e = 0; e < w->nparams; e++) {
        double m = c->sum[e] / c->count;
        m2 += m * m;
    }
    double d2 = c->norm2 / c->count - m2;
    if (w->nrows == w->caprows) {
        long nc = w->caprows ? 2 * w->caprows : 1024;
        sim_cons_row_t *nr = realloc(w->rows, (size_t)nc * sizeof *nr);
        if (!nr) return HS_ERR(-ENOMEM, "out of memory for consensus rows");
        w->rows = nr;
        w->caprows = nc;
    }
    w->rows[w->nrows++] = (sim_cons_row_t){
        .iter = c->iter, .ranks = c->count, .t = c->t_max, .dist = sqrt(d2 > 0 ? d2 : 0)};
    free(c->sum);
    w->cons[i] = w->cons[--w->ncons];
    return 0;
}

/* sum += z; returns ||z||^2. Blocks of 8 independent lanes, which GCC vectorises at -O2
 * (one double accumulator is a serial dependency chain: it took 30 % of a run's time), built
 * for AVX2 as well where the compiler can (the kernels' HS_KCPU_SIMD does the same). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) &&       \
    __GNUC__ >= 12
__attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
static double
cons_add(size_t n, const float *restrict z, double *restrict sum)
{
    double acc[8] = {0};
    size_t e = 0;
    for (; e + 8 <= n; e += 8)
        for (int j = 0; j < 8; j++) {
            double v = z[e + j];
            sum[e + j] += v;
            acc[j] += v * v;
        }
    double tail = 0;
    for (; e < n; e++) {
        sum[e] += z[e];
        tail += (double)z[e] * z[e];
    }
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

void hs_sim_observe(hs_exec_t *x, long iter, const float *z, size_t n)
{
    sim_world_t *w = ((sim_x_t *)x->impl)->w;
    if (w->cons_rc < 0) return;
    w->nparams = n;
    int i;
    for (i = 0; i < w->ncons; i++)
        if (w->cons[i].iter == iter) break;
    if (i == w->ncons) {
        if (w->ncons == w->capcons) {
            int nc = w->capcons ? 2 * w->capcons : 16;
            sim_cons_t *ncs = realloc(w->cons, (size_t)nc * sizeof *ncs);
            if (!ncs) {
                w->cons_rc = HS_ERR(-ENOMEM, "out of memory for consensus sums");
                return;
            }
            w->cons = ncs;
            w->capcons = nc;
        }
        w->cons[i] = (sim_cons_t){.iter = iter, .sum = calloc(n, sizeof(double))};
        if (!w->cons[i].sum) {
            w->cons_rc = HS_ERR(-ENOMEM, "out of memory for consensus sums");
            return;
        }
        w->ncons++;
    }
    sim_cons_t *c = &w->cons[i];
    c->norm2 += cons_add(n, z, c->sum);
    c->count++;
    if (w->now > c->t_max) c->t_max = w->now;
    if (c->count >= live_ranks(w)) {
        int rc = cons_close(w, i);
        if (rc < 0) w->cons_rc = rc;
    }
}

static int cmp_row(const void *a, const void *b)
{
    const sim_cons_row_t *x = a, *y = b;
    return (x->iter > y->iter) - (x->iter < y->iter);
}

/* Finite-time averaging (exp1peer at n = 2^k averages exactly in k steps, the complete graph
 * in one): the first row whose distance is at the float floor (1e-5 of the first row's or
 * less) reached in one step from at least 1e3 times as far, and stays there; -1 when none.
 * A geometric contraction at rate r gets there in steps of r, never 1e-3 at once. */
static long exact_after(const sim_world_t *w)
{
    double floor_d = 1e-5 * w->rows[0].dist;
    for (long i = 1; i < w->nrows; i++) {
        if (!(w->rows[i].dist <= floor_d)) continue;
        if (!(w->rows[i].dist <= 1e-3 * w->rows[i - 1].dist)) return -1;
        for (long j = i + 1; j < w->nrows; j++)
            if (!(w->rows[j].dist <= floor_d)) return -1;
        return w->rows[i].iter;
    }
    return -1;
}

/* consensus.csv, and "consensus_rate" and "consensus_exact_after" added to summary.json: the
 * geometric-mean contraction per iteration over the second half of the rows whose distance
 * is above 1e-6 of the first (the asymptotic rate, the one |lambda2| predicts), or, when the
 * ranks average exactly in finitely many iterations (exact_after), a rate of 0 and that
 * iteration (null otherwise). */
int hs_sim_write_consensus(sim_world_t *w)
{
    while (w->ncons > 0) HS_TRY(cons_close(w, w->ncons - 1)); /* incomplete: crashed ranks */
    qsort(w->rows, (size_t)w->nrows, sizeof *w->rows, cmp_row);
    const char *dir = w->o->out_dir;
    double rate = NAN;
    long exact = w->nrows > 1 && w->rows[0].dist > 0 ? exact_after(w) : -1;
    if (exact >= 0) {
        rate = 0;
    } else if (w->nrows > 1 && w->rows[0].dist > 0) {
        /* the asymptotic rate: over the second half of the rows above the float floor (the
         * first half is the transient of the faster modes) */
        long last = 0;
        for (long i = 1; i < w->nrows; i++)
            if (w->rows[i].dist > 1e-6 * w->rows[0].dist) last = i;
        long first = last / 2;
        if (last > first && w->rows[first].dist > 0)
            rate = pow(w->rows[last].dist / w->rows[first].dist,
                       1.0 / (double)(w->rows[last].iter - w->rows[first].iter));
    }
    if (!dir) return 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/consensus.csv", dir);
    FILE *f = NULL;
    HS_TRY(hs_file_create(&f, path, 0));
    fprintf(f, "iteration,virtual_s,ranks,consensus_distance\n");
    for (long i = 0; i < w->nrows; i++)
        fprintf(f, "%ld,%.9g,%d,%.9g\n", w->rows[i].iter, w->rows[i].t, w->rows[i].ranks,
                w->rows[i].dist);
    if (fclose(f) != 0) return HS_ERR(-EIO, "writing %s failed", path);
    /* summary.json (rank 0 wrote it): one more key before its closing brace */
    snprintf(path, sizeof path, "%s/summary.json", dir);
    if (access(path, F_OK) != 0) return 0; /* rank 0 failed before writing it: its error says why */
    HS_TRY(hs_file_reopen(&f, path, "r+b"));
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return HS_ERR(-EIO, "%s: cannot seek", path);
    }
    long end = ftell(f), pos = end;
    int ch = 0;
    while (pos > 0) {
        fseek(f, --pos, SEEK_SET);
        if ((ch = fgetc(f)) == '}') break;
    }
    if (ch != '}') {
        fclose(f);
        return HS_ERR(-EPROTO, "%s: no closing brace", path);
    }
    long cut = pos; /* drop the newline before the brace */
    while (cut > 0) {
        fseek(f, cut - 1, SEEK_SET);
        if (fgetc(f) != '\n') break;
        cut--;
    }
    fseek(f, cut, SEEK_SET);
    if (isfinite(rate))
        fprintf(f, ",\n  \"consensus_rate\": %.9g", rate);
    else
        fprintf(f, ",\n  \"consensus_rate\": null");
    if (exact >= 0)
        fprintf(f, ",\n  \"consensus_exact_after\": %ld\n}\n", exact);
    else
        fprintf(f, ",\n  \"consensus_exact_after\": null\n}\n");
    long now = ftell(f);
    int rc = fclose(f);
    if (rc == 0 && now < end && truncate(path, now) != 0) rc = -1;
    return rc == 0 ? 0 : HS_ERR(-EIO, "writing %s failed", path);
}

/* DIR/sim.json: what the run cost on the host (kept out of summary.json, which two runs of
 * one seed write byte for byte the same). */
int hs_sim_write_stats(const hs_train_opts_t *o, const hs_sim_stats_t *s)
{
    if (!o->quiet) {
        printf("hearsay sim: %.2f s on the host, %ld steps (%.0f steps/s, %d thread%s)",
               s->host_wall_s, s->steps, s->steps_per_s, s->threads, s->threads > 1 ? "s" : "");
        if (isfinite(s->overhead)) printf("; the simulator's own share %.0f %%", 100 * s->overhead);
        printf("\n");
        fflush(stdout);
    }
    if (!o->out_dir) return 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/sim.json", o->out_dir);
    FILE *f = NULL;
    HS_TRY(hs_file_create(&f, path, 0));
    fprintf(f,
            "{\n  \"sim_threads\": %d,\n  \"host_wall_s\": %.6f,\n  \"host_cpu_s\": %.6f,\n"
            "  \"worker_s\": %.6f,\n  \"local_s\": %.6f,\n  \"steps\": %ld,\n"
            "  \"steps_per_s\": %.3f,\n  \"peak_rss_mib\": %.1f,\n"
            "  \"payload_scale\": %.9g,\n  \"wire_bytes\": %.0f,\n",
            s->threads, s->host_wall_s, s->host_cpu_s, s->worker_s, s->local_s, s->steps,
            s->steps_per_s, s->peak_rss_mib, s->payload_scale, s->wire_bytes);
    if (isfinite(s->overhead))
        fprintf(f, "  \"overhead\": %.6f\n}\n", s->overhead);
    else
        fprintf(f, "  \"overhead\": null\n}\n");
    return fclose(f) == 0 ? 0 : HS_ERR(-EIO, "writing %s failed", path);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* --sim-compute bench: the median of 15 timed steps (gradient and local step) of this model
 * on rank 0's shard, after 3 untimed ones, like `hearsay bench step`. */
int hs_sim_bench_step(const hs_train_opts_t *o, int n, double *step_s)
{
    hs_worker_t *wk = NULL;
    HS_TRY(hs_worker_open(&wk, o, 0, n));
    double t[15];
    int rc = 0;
    for (int i = 0; i < 18 && rc == 0; i++) {
        double t0 = hs_now();
        rc = hs_worker_grad(wk, NULL, NULL, NULL);
        if (rc == 0) rc = hs_worker_apply(wk);
        if (i >= 3) t[i - 3] = hs_now() - t0;
    }
    hs_worker_close(&wk);
    HS_TRY(rc);
    qsort(t, 15, sizeof *t, cmp_d);
    *step_s = t[7];
    return 0;
}
