/* runtime/report.c — what a training run shows and writes (runtime/report.h). */
#include "runtime/report.h"

#include "hearsay/common.h"
#include "hearsay/file.h"
#include "hearsay/json.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_RECORDS 8 /* files an algorithm records into */

typedef struct record_file {
    char name[64];
    FILE *f;
} record_file_t;

struct hs_report {
    const hs_train_opts_t *o;
    int rank, size;
    long ipe, total, start;
    FILE *csv, *rev, *evcsv;
    record_file_t rec[MAX_RECORDS];
    double last_print; /* training clock of the last progress line */
};

static FILE *open_out(const char *dir, const char *name, int *rc)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = NULL;
    *rc = hs_file_create(&f, path, 0); /* never through what was planted at path */
    return f;
}

/* A replacement's rank-R.csv and rank-R-eval.csv go on from its first process's rows (which
 * that process flushed when it crashed): opened for appending, no header again. */
static FILE *open_more(const char *dir, const char *name, int *rc)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = NULL;
    *rc = hs_file_reopen(&f, path, "a");
    if (*rc == -ENOENT) { /* (nothing to go on from) */
        hs_error_clear();
        *rc = hs_file_create(&f, path, 0);
    }
    return f;
}

int hs_report_open(hs_report_t **out, const hs_train_opts_t *o, int rank, int size, long ipe,
                   int append)
{
    *out = NULL;
    hs_report_t *r = hs_calloc(1, sizeof *r, "report");
    if (!r) return -ENOMEM;
    r->o = o;
    r->rank = rank;
    r->size = size;
    r->ipe = ipe;
    *out = r;
    if (!o->out_dir) return 0;
    int rc = 0;
    char name[64];
    HS_TRY(hs_mkdir_p(o->out_dir));
    if (append) {
        snprintf(name, sizeof name, "rank-%d.csv", rank);
        if (!(r->csv = open_more(o->out_dir, name, &rc))) return rc;
        snprintf(name, sizeof name, "rank-%d-eval.csv", rank);
        if (!(r->rev = open_more(o->out_dir, name, &rc))) return rc;
        return 0;
    }
    snprintf(name, sizeof name, "rank-%d.csv", rank);
    if (!(r->csv = open_out(o->out_dir, name, &rc))) return rc;
    snprintf(name, sizeof name, "rank-%d-eval.csv", rank);
    if (!(r->rev = open_out(o->out_dir, name, &rc))) return rc;
    fprintf(r->csv, "iteration,wall_s,epoch,train_loss,lr,compute_s,comm_s,wait_s,straggle_s,"
                    "bytes_sent,bytes_recv,ps_weight,msgs_applied,staleness_mean,train_acc\n");
    fprintf(r->rev, "iteration,epoch,clock_s,test_loss,test_acc,ps_weight\n");
    if (rank == 0) {
        if (!(r->evcsv = open_out(o->out_dir, "eval.csv", &rc))) return rc;
        fprintf(r->evcsv,
                "iteration,epoch,clock_s,ranks,avg_test_loss,avg_test_acc,consensus,"
                "consensus_rel,rank_loss_mean,rank_loss_min,rank_loss_max,rank_acc_mean\n");
    }
    return 0;
}

void hs_report_close(hs_report_t **rp)
{
    hs_report_t *r = rp ? *rp : NULL;
    if (!r) return;
    if (r->csv) fclose(r->csv);
    if (r->rev) fclose(r->rev);
    if (r->evcsv) fclose(r->evcsv);
    for (int i = 0; i < MAX_RECORDS; i++)
        if (r->rec[i].f) fclose(r->rec[i].f);
    free(r);
    *rp = NULL;
}

FILE *hs_report_avg_csv(hs_report_t *r)
{
    return r->evcsv;
}

void hs_report_avg_row(FILE *f, const hs_avg_eval_t *a, long ipe)
{
    if (!f) return;
    fprintf(f, "%ld,%.6f,%.6f,%d,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g\n", a->iteration,
            (double)a->iteration / (double)ipe, a->clock_s, a->ranks, a->test_loss, a->test_acc,
            a->consensus, a->consensus_rel, a->rank_loss_mean, a->rank_loss_min, a->rank_loss_max,
            a->rank_acc_mean);
    fflush(f);
}

static void fmt_eta(double s, char *buf, size_t n)
{
    if (!isfinite(s) || s < 0)
        snprintf(buf, n, "?");
    else if (s < 100)
        snprintf(buf, n, "%.0fs", s);
    else if (s < 6000)
        snprintf(buf, n, "%.0fm%02.0fs", floor(s / 60), fmod(s, 60));
    else
        snprintf(buf, n, "%.1fh", s / 3600);
}

void hs_report_banner(hs_report_t *r, const hs_report_start_t *s)
{
    r->total = s->total;
    r->start = s->start;
    if (r->o->quiet || r->rank != 0) return;
    const hs_train_opts_t *o = r->o;
    printf("hearsay train: --algo %s on %d rank%s%s%s, %s on %s (%ld train / %ld test samples, "
           "%d classes",
           s->algo, s->ranks, s->ranks > 1 ? "s" : "", s->graph ? ", graph " : "",
           s->graph ? s->graph : "", o->model, o->data, s->train_n, s->test_n, s->classes);
    if (isfinite(s->bayes_acc)) printf(", Bayes accuracy %.2f%%", 100 * s->bayes_acc);
    printf(")\n  %zu parameters, batch %d per rank, %ld iterations/epoch, %ld iterations, "
           "device %s%s%s%s%s%s\n",
           s->num_params, o->batch, s->ipe, s->total, o->device,
           o->precision && strcmp(o->precision, "fp32") ? ", products in " : "",
           o->precision && strcmp(o->precision, "fp32") ? o->precision : "",
           o->tf32 ? ", products in tf32" : "", s->transport ? ", transport " : "",
           s->transport ? s->transport : "");
    if (s->start > 0)
        printf("  resumed from %s at iteration %ld (epoch %.2f)\n", o->resume, s->start,
               (double)s->start / (double)s->ipe);
    fflush(stdout);
}

int hs_report_iteration(hs_report_t *r, const hs_report_iter_t *it)
{
    const hs_dist_stats_t *st = it->st;
    long done = it->done, ipe = r->ipe;
    if (r->csv)
        fprintf(r->csv,
                "%ld,%.6f,%.6f,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%llu,%llu,%.12g,%ld,%.4g,%.6g\n", done,
                it->clock_s, (double)done / (double)ipe, it->loss, it->lr, it->compute_s,
                st->comm_s, st->wait_s, it->straggle_s, (unsigned long long)st->bytes_sent,
                (unsigned long long)st->bytes_recv, it->w, st->msgs_applied,
                st->msgs_applied ? st->staleness_sum / (double)st->msgs_applied : NAN, it->acc);
    const hs_train_opts_t *o = r->o;
    if (o->quiet || r->rank != 0) return 0;
    double el = it->clock_s;
    if (!((o->progress_s > 0 && el - r->last_print >= o->progress_s) || done % ipe == 0 ||
          done == r->total))
        return 0;
    long ran = done - r->start;
    char eta[32];
    fmt_eta(el / (double)ran * (double)(r->total - done), eta, sizeof eta);
    printf("epoch %6.2f/%d  iter %7ld/%ld  loss %.4f  lr %.4g  ", (double)done / (double)ipe,
           o->epochs, done, r->total, it->loss, it->lr);
    if (r->size > 1)
        printf("w %.4f  %6.0f it/s  wait %2.0f%%  ", it->w, (double)ran / el,
               el > 0 ? 100 * it->wait_total_s / el : 0);
    else
        printf("%8.0f samples/s  ", (double)ran * o->batch / el);
    printf("ETA %s\n", eta);
    fflush(stdout);
    r->last_print = el;
    return 0;
}

int hs_report_eval(hs_report_t *r, long done, double clock_s, double loss, double acc, double w)
{
    double ep = (double)done / (double)r->ipe;
    if (r->rev) {
        fprintf(r->rev, "%ld,%.6f,%.6f,%.6g,%.6g,%.10g\n", done, ep, clock_s, loss, acc, w);
        fflush(r->rev);
    }
    if (!r->o->quiet && r->rank == 0 && done < r->total) {
        printf("  eval  epoch %6.2f  iter %7ld  %stest loss %.4f  test acc %6.2f%%\n", ep, done,
               r->size > 1 ? "rank 0 " : "", loss, 100 * acc);
        fflush(stdout);
    }
    return 0;
}

int hs_report_record(hs_report_t *r, const char *file, const char *header, const char *line)
{
    if (!file) {
        if (!r->o->quiet) {
            printf("rank %d: %s\n", r->rank, line);
            fflush(stdout);
        }
        return 0;
    }
    if (!r->o->out_dir) return 0;
    record_file_t *rf = NULL;
    for (int i = 0; i < MAX_RECORDS && !rf; i++)
        if (r->rec[i].f && !strcmp(r->rec[i].name, file)) rf = &r->rec[i];
    if (!rf) {
        for (int i = 0; i < MAX_RECORDS && !rf; i++)
            if (!r->rec[i].f) rf = &r->rec[i];
        if (!rf) return HS_ERR(-ENOSPC, "more than %d record files ('%s')", MAX_RECORDS, file);
        if (strchr(file, '/') || strlen(file) >= sizeof rf->name)
            return HS_ERR(-EINVAL, "record file name '%s' is not a short name", file);
        char name[96];
        int rc = 0;
        snprintf(name, sizeof name, "rank-%d-%s", r->rank, file);
        if (!(rf->f = open_out(r->o->out_dir, name, &rc))) return rc;
        snprintf(rf->name, sizeof rf->name, "%s", file);
        if (header) fprintf(rf->f, "%s\n", header);
    }
    fprintf(rf->f, "%s\n", line);
    if (fflush(rf->f) != 0)
        return HS_ERR(-EIO, "writing %s/rank-%d-%s failed", r->o->out_dir, r->rank, file);
    return 0;
}

int hs_report_dump(hs_report_t *r, const char *what, const float *z, size_t n)
{
    if (!r->o->out_dir) return 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/rank-%d.%s.f32", r->o->out_dir, r->rank, what);
    return hs_file_write(path, z, n * sizeof(float), 0);
}

int hs_report_trajectory(hs_report_t *r, int first, const float *z, size_t n)
{
    if (!r->o->out_dir) return 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/rank-%d.traj.f32", r->o->out_dir, r->rank);
    FILE *f = NULL;
    HS_TRY(first ? hs_file_create(&f, path, 0) : hs_file_reopen(&f, path, "ab"));
    size_t got = fwrite(z, sizeof(float), n, f);
    if (fclose(f) != 0 || got != n) return HS_ERR(-EIO, "writing %s failed", path);
    return 0;
}

int hs_report_crash(hs_report_t *r, const hs_report_crash_t *c)
{
    if (!r || !r->o->out_dir) return 0;
    if (r->csv) {
        fprintf(r->csv, "%ld,%.6f,%.6f,nan,nan,0,0,0,0,0,0,%.17g,0,nan,nan\n", c->done, c->clock_s,
                (double)c->done / (double)r->ipe, c->lost);
        fflush(r->csv);
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/rank-%d-lost.json", r->o->out_dir, r->rank);
    hs_wfile_t w;
    HS_TRY(hs_wfile_open(&w, path, 0));
    FILE *f = w.f;
    fprintf(f, "{\"rank\": %d, \"iteration\": %ld, \"ps_weight_lost\": %.17g, \"received_from\": [",
            r->rank, c->done, c->lost);
    for (int j = 0; j < c->size; j++) fprintf(f, "%s%.17g", j ? ", " : "", c->recv_from[j]);
    fprintf(f, "]}\n");
    return hs_wfile_commit(&w);
}

int hs_report_diverged(hs_report_t *r, long done, double loss, double w)
{
    if (!r || !r->o->out_dir) return 0;
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/rank-%d-diverged.json", r->o->out_dir, r->rank);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return HS_ERR(-errno, "cannot write %s: %s", tmp, strerror(errno));
    fprintf(f, "{\"rank\": %d, \"iteration\": %ld, \"loss\": \"%g\", \"ps_weight\": %.9g}\n",
            r->rank, done, loss, isfinite(w) ? w : -1.0);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        int err = errno;
        unlink(tmp);
        return HS_ERR(-err, "writing %s failed: %s", path, strerror(err));
    }
    return 0;
}

/* Rank q's divergence (DIR/rank-q-diverged.json): 1 with the iteration, the loss's text and
 * the weight then (-1: unknown), 0 when it has none. */
static int diverged_of(const hs_report_t *r, int q, long *iter, char *loss, size_t cap, double *w)
{
    char path[4096], buf[512];
    snprintf(path, sizeof path, "%s/rank-%d-diverged.json", r->o->out_dir, q);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *it = strstr(buf, "\"iteration\": "), *ls = strstr(buf, "\"loss\": \""),
               *pw = strstr(buf, "\"ps_weight\": ");
    *iter = it ? strtol(it + 13, NULL, 10) : -1;
    *w = pw ? strtod(pw + 13, NULL) : -1;
    snprintf(loss, cap, "%s", "nan");
    if (ls) {
        ls += 9;
        size_t l = strcspn(ls, "\"");
        if (l < cap) {
            memcpy(loss, ls, l);
            loss[l] = '\0';
        }
    }
    return 1;
}

/* summary.json's health: failed (a NaN or infinite loss or parameters anywhere: a diverged
 * rank, an averaged model or a rank's model that evaluates to NaN), warn (a push-sum weight
 * outside [1e-2, 1e2], a failed rank), or ok; one reason per finding. */
typedef struct health {
    int level; /* 0 ok, 1 warn, 2 failed */
    char **why;
    int n;
} health_t;

static void health_add(health_t *h, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void health_add(health_t *h, int level, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (level > h->level) h->level = level;
    char **nw = realloc(h->why, (size_t)(h->n + 1) * sizeof *nw);
    if (!nw) return;
    h->why = nw;
    if ((h->why[h->n] = strdup(buf))) h->n++;
}

static void health_check(const hs_report_t *r, const hs_report_final_t *fi, health_t *h)
{
    const hs_avg_eval_t *avg = fi->avg;
    for (int q = 0; q < r->size; q++) {
        const hs_rank_final_t *a = &fi->all[q];
        long it;
        double w;
        char loss[64];
        if (!a->present && r->o->out_dir && diverged_of(r, q, &it, loss, sizeof loss, &w)) {
            if (w >= 0)
                health_add(h, 2,
                           "rank %d diverged at iteration %ld: loss %s (push-sum weight %.3g)", q,
                           it, loss, w);
            else
                health_add(h, 2, "rank %d diverged at iteration %ld: loss %s", q, it, loss);
            continue;
        }
        if (fi->failed_at[q] >= 0) {
            health_add(h, 1, "rank %d failed at/after iteration %ld", q, fi->failed_at[q]);
            continue;
        }
        if (!a->present) continue;
        if (!isfinite(a->test_loss) || !isfinite(a->train_loss))
            health_add(h, 2,
                       "rank %d ends with a NaN or infinite loss (test %g, training %g): NaN/Inf "
                       "parameters",
                       q, a->test_loss, a->train_loss);
        if (a->w_out_iter >= 0)
            health_add(h, 1,
                       "rank %d: push-sum weight %.3g at iteration %.0f left [1e-2, 1e2]: messages "
                       "from later rounds mixed (asynchronous or bounded delay) or a starved "
                       "in-peer",
                       q, a->w_out_w, a->w_out_iter);
        else if (a->w_min < 1e-2 || a->w_max > 1e2) /* (a rank of an older build) */
            health_add(h, 1, "rank %d: push-sum weight in [%.3g, %.3g], outside [1e-2, 1e2]", q,
                       a->w_min, a->w_max);
    }
    if (fi->avg_nonfinite >= 0)
        health_add(h, 2, "the averaged model's test loss is NaN or infinite at iteration %ld",
                   fi->avg_nonfinite);
    if (!isfinite(avg->test_loss) || !isfinite(avg->consensus))
        health_add(h, 2,
                   "the averaged model ends with test loss %g and consensus distance %g: NaN/Inf "
                   "parameters",
                   avg->test_loss, avg->consensus);
}

static void health_free(health_t *h)
{
    for (int i = 0; i < h->n; i++) free(h->why[i]);
    free(h->why);
}

static const char *health_word(const health_t *h)
{
    return h->level == 2 ? "failed" : h->level == 1 ? "warn" : "ok";
}

/* The weight rank q took with it when it crashed or was fenced (DIR/rank-q-lost.json: key
 * ps_weight_lost), or the weight of the fenced ranks' messages it refused
 * (DIR/rank-q-refused.json: key ps_weight_refused), or NAN. */
static double weight_of(const hs_report_t *r, int q, const char *file, const char *key)
{
    char path[4096], buf[512], kq[64];
    snprintf(path, sizeof path, "%s/rank-%d-%s", r->o->out_dir, q, file);
    snprintf(kq, sizeof kq, "\"%s\":", key);
    FILE *f = NULL;
    if (hs_file_fopen_read(&f, path, "lost-weight record", 1 << 20) < 0) {
        hs_error_clear();
        return NAN;
    }
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *k = strstr(buf, kq);
    char *end = NULL;
    double v = k ? strtod(k + strlen(kq), &end) : NAN;
    return k && end != k + strlen(kq) && isfinite(v) ? v : NAN;
}

static double lost_of(const hs_report_t *r, int q)
{
    return weight_of(r, q, "lost.json", "ps_weight_lost");
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile (0..1) of a signed staleness histogram (bin b: staleness b - HS_STALE_OFF),
 * NAN when it is empty. */
static double hist_quantile(const double *hist, double q)
{
    double total = 0, cum = 0;
    for (int b = 0; b < HS_STALE_BINS; b++) total += hist[b];
    if (!(total > 0)) return NAN;
    for (int b = 0; b < HS_STALE_BINS; b++) {
        cum += hist[b];
        if (cum >= q * total) return b - HS_STALE_OFF;
    }
    return HS_STALE_BINS - 1 - HS_STALE_OFF;
}

static void json_str(FILE *f, const char *key, const char *v)
{
    fprintf(f, "  \"%s\": ", key);
    hs_json_string(f, v);
    fprintf(f, ",\n");
}

static void json_num(FILE *f, const char *key, double v)
{
    fprintf(f, "  \"%s\": ", key);
    hs_json_number(f, v);
    fprintf(f, ",\n");
}

static int write_summary(hs_report_t *r, const hs_report_final_t *fi, const hs_train_result_t *res,
                         const double *lost, const health_t *hl)
{
    const unsigned char *rejoined = fi->rejoined;
    const hs_train_opts_t *o = r->o;
    const hs_avg_eval_t *avg = fi->avg;
    int rc = 0;
    FILE *f = open_out(o->out_dir, "summary.json", &rc);
    if (!f) return rc;
    fprintf(f, "{\n");
    json_str(f, "algo", fi->algo);
    fprintf(f, "  \"ranks\": %d,\n", r->size);
    json_str(f, "clock", fi->clock ? fi->clock : "wall");
    /* health: ok | warn | failed, and why (docs/algorithms.md, "Health") */
    json_str(f, "health", health_word(hl));
    fprintf(f, "  \"health_reasons\": [");
    for (int i = 0; i < hl->n; i++) {
        fprintf(f, "%s", i ? ", " : "");
        hs_json_string(f, hl->why[i]);
    }
    fprintf(f, "],\n");
    json_str(f, "graph", fi->graph ? fi->graph : "");
    json_str(f, "transport", fi->transport ? fi->transport : "");
    fprintf(f, "  \"transports\": {\"intra_host\": ");
    if (fi->transport_intra)
        hs_json_string(f, fi->transport_intra);
    else
        fprintf(f, "null");
    fprintf(f, ", \"inter_host\": ");
    if (fi->transport_inter)
        hs_json_string(f, fi->transport_inter);
    else
        fprintf(f, "null");
    fprintf(f, "},\n");
    fprintf(f, "  \"progress_thread\": %s,\n", fi->progress_thread ? "true" : "false");
    fprintf(f, "  \"tau\": %d,\n", fi->tau);
    json_str(f, "model", o->model);
    json_str(f, "data", o->data);
    /* mixed precision: the products' precision, and loss scaling's skipped steps (every rank's
     * sum) and final scales */
    json_str(f, "precision", o->precision ? o->precision : "fp32");
    /* what the messages carry: float32, or the compressor the algorithm chose (--compress, or
     * the products' precision where the algorithm allows) */
    json_str(f, "messages", fi->messages ? fi->messages : "float32");
    fprintf(f, "  \"tf32\": %s,\n", o->tf32 ? "true" : "false");
    {
        double skips = 0, smin = INFINITY, smax = -INFINITY;
        for (int q = 0; q < r->size; q++) {
            const hs_rank_final_t *a = &fi->all[q];
            if (!a->present) continue;
            skips += a->scale_skips;
            if (a->loss_scale < smin) smin = a->loss_scale;
            if (a->loss_scale > smax) smax = a->loss_scale;
        }
        json_str(f, "loss_scale", o->loss_scale ? o->loss_scale : "auto");
        json_num(f, "loss_scale_skipped_steps", skips);
        json_num(f, "loss_scale_final_min", isfinite(smin) ? smin : NAN);
        json_num(f, "loss_scale_final_max", isfinite(smax) ? smax : NAN);
    }
    fprintf(f, "  \"num_params\": %zu,\n", fi->num_params);
    fprintf(f, "  \"iterations\": %ld,\n", fi->iterations);
    json_num(f, "epochs", (double)fi->iterations / (double)r->ipe);
    json_num(f, "wall_s", fi->wall_s);
    json_num(f, "samples_per_s", fi->samples_per_s);
    json_num(f, "final_test_loss", avg->test_loss);
    json_num(f, "final_test_acc", avg->test_acc);
    json_num(f, "final_train_loss", res->final_train_loss);
    json_num(f, "rank_test_loss_mean", avg->rank_loss_mean);
    json_num(f, "rank_test_acc_mean", avg->rank_acc_mean);
    json_num(f, "bayes_acc", fi->bayes_acc);
    json_num(f, "target_loss", o->target_loss > 0 ? o->target_loss : NAN);
    json_num(f, "target_acc", o->target_acc > 0 ? o->target_acc : NAN);
    /* two times to target: the averaged model's on the common clock (what eval.csv, the
     * study tables and hearsay report use), and the median of the ranks' own models, each on
     * its own training clock (docs/algorithms.md, "Files") */
    json_num(f, "time_to_target_avg_s", res->time_to_target_avg_s);
    json_str(f, "time_to_target_clock",
             "eval.csv clock_s: the latest training clock among the ranks at the evaluation");
    json_num(f, "time_to_target_s", res->time_to_target_s);
    json_num(f, "time_budget_s", fi->time_budget_s > 0 ? fi->time_budget_s : NAN);
    /* the variant of the algorithm that ran (sgp/osgp: delay_bound, sgp_step, delay_mode) */
    if (fi->algo_json) fputs(fi->algo_json, f);
    /* health over every rank that finished: the weight's range, the staleness of every applied
     * message (one histogram for the job), the iterations each trained */
    double wmin = INFINITY, wmax = -INFINITY, smin = INFINITY, smax = -INFINITY;
    double hist[HS_STALE_BINS] = {0};
    double imin = INFINITY, imax = -INFINITY;
    for (int q = 0; q < r->size; q++) {
        const hs_rank_final_t *a = &fi->all[q];
        if (!a->present) continue;
        if (a->w_min < wmin) wmin = a->w_min;
        if (a->w_max > wmax) wmax = a->w_max;
        if (a->stale_max > smax) smax = a->stale_max;
        if (a->stale_min < smin) smin = a->stale_min;
        if (a->iters < imin) imin = a->iters;
        if (a->iters > imax) imax = a->iters;
        for (int b = 0; b < HS_STALE_BINS; b++) hist[b] += a->stale_hist[b];
    }
    fprintf(f, "  \"ps_weight_min\": ");
    hs_json_number(f, isfinite(wmin) ? wmin : NAN);
    fprintf(f, ",\n  \"ps_weight_max\": ");
    hs_json_number(f, isfinite(wmax) ? wmax : NAN);
    fprintf(f, ",\n");
    /* signed: negative = a message of the sender's later round (from the receiver's future) */
    json_num(f, "staleness_min", isfinite(smin) ? smin : NAN);
    json_num(f, "staleness_p1", hist_quantile(hist, 0.01));
    json_num(f, "staleness_p50", hist_quantile(hist, 0.5));
    json_num(f, "staleness_p99", hist_quantile(hist, 0.99));
    json_num(f, "staleness_max", isfinite(smax) ? smax : NAN);
    json_num(f, "iterations_min", isfinite(imin) ? imin : NAN);
    json_num(f, "iterations_max", isfinite(imax) ? imax : NAN);
    fprintf(f, "  \"ps_weight_sum\": %.15g,\n", res->ps_weight_sum);
    fprintf(f, "  \"ps_weight_lost\": %.15g,\n", res->ps_weight_lost);
    /* of it, the messages of fenced ranks refused by the others; and what a failed rank that
     * wrote nothing down (frozen for good, killed) held, by conservation: N - sum - lost */
    fprintf(f, "  \"ps_weight_refused\": %.15g,\n", res->ps_weight_refused);
    fprintf(f, "  \"ps_weight_unreported\": %.15g,\n", res->ps_weight_unreported);
    json_num(f, "consensus_distance", avg->consensus);
    json_num(f, "consensus_distance_rel", avg->consensus_rel);
    fprintf(f, "  \"failed_ranks\": [");
    int first = 1;
    for (int q = 0; q < r->size; q++) {
        if (fi->failed_at[q] < 0) continue;
        fprintf(f,
                "%s\n    {\"rank\": %d, \"after_iteration\": %ld, \"message\": \"rank %d failed "
                "at/after iteration %ld\"}",
                first ? "" : ",", q, fi->failed_at[q], q, fi->failed_at[q]);
        first = 0;
    }
    fprintf(f, "%s],\n", first ? "" : "\n  ");
    fprintf(f, "  \"per_rank\": [");
    for (int q = 0; q < r->size; q++) {
        const hs_rank_final_t *a = &fi->all[q];
        const struct {
            const char *k;
            double v;
        } kv[] = {{"test_loss", a->test_loss},
                  {"test_acc", a->test_acc},
                  {"time_to_target_s", a->ttt_s},
                  {"train_loss", a->train_loss},
                  {"clock_s", a->clock_s},
                  {"compute_s", a->compute_s},
                  {"comm_s", a->comm_s},
                  {"wait_s", a->wait_s},
                  {"straggle_s", a->straggle_s},
                  {"eval_s", a->present ? a->eval_s : NAN},
                  {"wall_s", a->present ? a->wall_s : NAN},
                  {"msgs_applied", a->msgs},
                  {"bytes_sent", a->present ? a->bytes_sent : NAN},
                  {"bytes_recv", a->present ? a->bytes_recv : NAN},
                  {"iterations", a->present ? a->iters : NAN},
                  {"msgs_per_iter", a->present && a->iters > 0 ? a->msgs / a->iters : NAN},
                  {"alone_s", a->present ? a->alone_s : NAN},
                  {"ps_weight_min", a->present ? a->w_min : NAN},
                  {"ps_weight_max", a->present ? a->w_max : NAN},
                  {"staleness_min", a->present && isfinite(a->stale_min) ? a->stale_min : NAN},
                  {"staleness_p1", hist_quantile(a->stale_hist, 0.01)},
                  {"staleness_p50", hist_quantile(a->stale_hist, 0.5)},
                  {"staleness_p99", hist_quantile(a->stale_hist, 0.99)},
                  {"staleness_max", a->present && isfinite(a->stale_max) ? a->stale_max : NAN},
                  {"loss_scale_skipped_steps", a->present ? a->scale_skips : NAN},
                  {"loss_scale_final", a->present ? a->loss_scale : NAN}};
        fprintf(f, "%s\n    {\"rank\": %d, \"finished\": %s, ", q ? "," : "", q,
                a->present ? "true" : "false");
        if (rejoined && rejoined[q]) fprintf(f, "\"rejoined\": true, ");
        fprintf(f, "\"ps_weight\": ");
        hs_json_number(f, a->present ? a->weight : NAN);
        if (isfinite(lost[q])) fprintf(f, ", \"ps_weight_lost\": %.15g", lost[q]);
        for (size_t i = 0; i < HS_ARRAY_LEN(kv); i++) {
            fprintf(f, ", \"%s\": ", kv[i].k);
            hs_json_number(f, kv[i].v);
        }
        fprintf(f, "}");
    }
    fprintf(f, "\n  ]%s\n", o->config_json ? "," : "");
    if (o->config_json) fprintf(f, "  \"config\": %s\n", o->config_json);
    fprintf(f, "}\n");
    if (fclose(f) != 0) return HS_ERR(-EIO, "writing %s/summary.json failed", o->out_dir);
    return 0;
}

int hs_report_finish(hs_report_t *r, const hs_report_final_t *fi, hs_train_result_t *res)
{
    const hs_avg_eval_t *avg = fi->avg;
    int n = r->size;
    double *tt = hs_calloc((size_t)n, sizeof *tt, "times to target");
    double *lq = hs_calloc((size_t)n, sizeof *lq, "weights lost");
    if (!tt || !lq) {
        free(tt);
        free(lq);
        return -ENOMEM;
    }
    double wsum = 0, tls = 0, lost = 0, refused = 0;
    int nt = 0, nfailed = 0, silent = 0;
    for (int q = 0; q < n; q++) {
        const hs_rank_final_t *a = &fi->all[q];
        /* a rank that crashed by injection wrote down the weight it took */
        int back = fi->rejoined && fi->rejoined[q]; /* (its first process crashed) */
        lq[q] = (!a->present || back) && r->o->out_dir ? lost_of(r, q) : NAN;
        if (isfinite(lq[q])) lost += lq[q];
        silent += !a->present && fi->failed_at[q] >= 0 && !isfinite(lq[q]);
        double rf = a->present && r->o->out_dir
                        ? weight_of(r, q, "refused.json", "ps_weight_refused")
                        : NAN;
        if (isfinite(rf)) refused += rf;
        tt[q] = a->present && isfinite(a->ttt_s) ? a->ttt_s : INFINITY;
        if (a->present) {
            wsum += a->weight;
            tls += a->train_loss;
            nt++;
        }
        nfailed += fi->failed_at[q] >= 0;
    }
    qsort(tt, (size_t)n, sizeof *tt, cmp_double);
    double med = n % 2 ? tt[n / 2] : 0.5 * (tt[n / 2 - 1] + tt[n / 2]);
    free(tt);
    res->time_to_target_s = isfinite(med) ? med : NAN;
    res->time_to_target_avg_s = fi->ttt_avg_s;
    res->final_test_loss = avg->test_loss;
    res->final_test_acc = avg->test_acc;
    res->final_train_loss = nt ? tls / nt : NAN;
    res->ps_weight_sum = wsum;
    res->ps_weight_lost = lost + refused;
    res->ps_weight_refused = refused;
    res->ps_weight_unreported = silent ? (double)n - wsum - lost - refused : 0.0;
    res->consensus_distance = avg->consensus;
    res->n_failed = nfailed;
    hs_report_avg_row(r->evcsv, avg, r->ipe);
    health_t hl = {0};
    health_check(r, fi, &hl);
    int rc = r->o->out_dir ? write_summary(r, fi, res, lq, &hl) : 0;
    free(lq);
    if (hl.level > 0) /* (each event said so when it happened; this is the run's verdict) */
        fprintf(stderr, "hearsay: health %s: %s%s\n", health_word(&hl), hl.n ? hl.why[0] : "",
                hl.n > 1 ? " (and more: summary.json health_reasons)" : "");
    res->health = hl.level;
    health_free(&hl);
    HS_TRY(rc);
    if (!r->o->quiet) {
        /* --algo local: the workers never talked, so their average is no model anyone
         * trained: say so (issue 30) */
        const int alone = r->o->algo && !strcmp(r->o->algo, "local");
        if (n > 1)
            printf("done: %ld iterations on %d ranks in %.1f s: %s test loss %.4f, "
                   "accuracy %.2f%%, consensus distance %.3g, sum of weights %.9g\n",
                   fi->iterations, n, fi->wall_s,
                   alone ? "average of the independently trained workers' models (--algo local)"
                         : "averaged model",
                   avg->test_loss, 100 * avg->test_acc, avg->consensus, wsum);
        if (n > 1 && lost > 0)
            printf("crashed ranks took weight %.9g with them (sum with the survivors' %.9g)\n",
                   lost, wsum + lost);
        else {
            printf("done: %ld iterations in %.1f s (%.0f samples/s): test loss %.4f, test "
                   "accuracy %.2f%%",
                   fi->iterations, fi->wall_s, fi->samples_per_s, avg->test_loss,
                   100 * avg->test_acc);
            if (isfinite(fi->bayes_acc)) printf(" (Bayes %.2f%%)", 100 * fi->bayes_acc);
            printf("\n");
        }
        for (int q = 0; q < n; q++)
            if (fi->failed_at[q] >= 0)
                printf("rank %d failed at/after iteration %ld\n", q, fi->failed_at[q]);
        fflush(stdout);
    }
    return 0;
}
