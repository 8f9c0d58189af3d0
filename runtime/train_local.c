/* runtime/train_local.c — `hearsay train` on one worker: the loop, progress, CSVs, summary. */
#include "hearsay/train.h"

#include "hearsay/common.h"
#include "hearsay/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FILE *open_out(const char *dir, const char *name, int *rc)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) *rc = HS_ERR(-errno, "cannot write %s: %s", path, strerror(errno));
    return f;
}

static void json_num(FILE *f, const char *key, double v, int last)
{
    fprintf(f, "  \"%s\": ", key);
    hs_json_number(f, v);
    fprintf(f, "%s\n", last ? "" : ",");
}

static void json_str(FILE *f, const char *key, const char *v)
{
    fprintf(f, "  \"%s\": ", key);
    hs_json_string(f, v);
    fprintf(f, ",\n");
}

static int write_summary(const hs_train_opts_t *o, const hs_train_result_t *r)
{
    int rc = 0;
    FILE *f = open_out(o->out_dir, "summary.json", &rc);
    if (!f) return rc;
    fprintf(f, "{\n");
    json_str(f, "algo", "local");
    fprintf(f, "  \"ranks\": 1,\n");
    json_str(f, "model", o->model);
    json_str(f, "data", o->data);
    fprintf(f, "  \"num_params\": %zu,\n", r->num_params);
    fprintf(f, "  \"iterations\": %ld,\n", r->iterations);
    json_num(f, "epochs", r->epochs, 0);
    json_num(f, "wall_s", r->wall_s, 0);
    json_num(f, "samples_per_s", r->samples_per_s, 0);
    json_num(f, "final_train_loss", r->final_train_loss, 0);
    json_num(f, "final_test_loss", r->final_test_loss, 0);
    json_num(f, "final_test_acc", r->final_test_acc, 0);
    json_num(f, "bayes_acc", r->bayes_acc, 0);
    json_num(f, "target_loss", o->target_loss > 0 ? o->target_loss : NAN, 0);
    json_num(f, "target_acc", o->target_acc > 0 ? o->target_acc : NAN, 0);
    json_num(f, "time_to_target_s", r->time_to_target_s, o->config_json == NULL);
    if (o->config_json) fprintf(f, "  \"config\": %s\n", o->config_json);
    fprintf(f, "}\n");
    if (fclose(f) != 0) return HS_ERR(-EIO, "writing %s/summary.json failed", o->out_dir);
    return 0;
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

int hs_train_local(const hs_train_opts_t *o, hs_train_result_t *res)
{
    hs_worker_t *w = NULL;
    FILE *csv = NULL, *evcsv = NULL;
    int rc;
    hs_train_result_t r = {.time_to_target_s = NAN,
                           .final_test_loss = NAN,
                           .final_test_acc = NAN,
                           .final_train_loss = NAN};

    if ((rc = hs_worker_open(&w, o, 0, 1)) < 0) return rc;
    hs_model_t *m = hs_worker_model(w);
    r.num_params = hs_model_num_params(m);
    r.bayes_acc = hs_worker_test_set(w)->bayes_acc;
    long ipe = hs_worker_iters_per_epoch(w);
    long total = (long)o->epochs * ipe;
    if (o->max_iters > 0 && o->max_iters < total) total = o->max_iters;
    long eval_period = o->eval_every > 0 ? (long)llround(o->eval_every * (double)ipe) : 0;
    if (o->eval_every > 0 && eval_period < 1) eval_period = 1;

    if (o->out_dir) {
        if ((rc = hs_mkdir_p(o->out_dir)) < 0) goto out;
        if (!(csv = open_out(o->out_dir, "train.csv", &rc))) goto out;
        if (!(evcsv = open_out(o->out_dir, "eval.csv", &rc))) goto out;
        fprintf(csv, "iteration,epoch,wall_s,train_loss,train_acc,lr,compute_s\n");
        fprintf(evcsv, "iteration,epoch,wall_s,test_loss,test_acc\n");
    }
    if (!o->quiet) {
        const hs_dataset_t *tr = hs_worker_train_set(w), *te = hs_worker_test_set(w);
        printf("hearsay train: %s on %s (%lld train / %lld test samples, %d classes", o->model,
               o->data, (long long)tr->n, (long long)te->n, tr->classes);
        if (isfinite(r.bayes_acc)) printf(", Bayes accuracy %.2f%%", 100 * r.bayes_acc);
        printf(")\n  %zu parameters, batch %d, %ld iterations/epoch, %ld iterations, device %s\n",
               r.num_params, o->batch, ipe, total, o->device);
        fflush(stdout);
    }

    double t0 = hs_now(), last_print = t0;
    double epoch_loss = 0;
    long epoch_batches = 0, samples = 0;
    for (long it = 0; it < total; it++) {
        double loss, ts = hs_now();
        int correct, n;
        double lr = hs_worker_lr(w);
        if ((rc = hs_worker_grad(w, &loss, &correct, &n)) < 0) goto out;
        if (!isfinite(loss)) {
            rc = HS_ERR(-ERANGE,
                        "training diverged: loss is %g at iteration %ld (lr %g); "
                        "try a smaller --lr",
                        loss, it, lr);
            goto out;
        }
        if ((rc = hs_worker_apply(w)) < 0) goto out;
        double now = hs_now();
        samples += n;
        epoch_loss += loss;
        epoch_batches++;
        if (csv)
            fprintf(csv, "%ld,%.6f,%.6f,%.6g,%.6g,%.6g,%.6g\n", it + 1,
                    (double)(it + 1) / (double)ipe, now - t0, loss, (double)correct / n, lr,
                    now - ts);
        int end_of_epoch = (it + 1) % ipe == 0;
        int last = it + 1 == total;
        if (end_of_epoch || last) {
            r.final_train_loss = epoch_loss / (double)epoch_batches;
            epoch_loss = 0;
            epoch_batches = 0;
        }
        if ((eval_period > 0 && (it + 1) % eval_period == 0) || last) {
            double tl, ta;
            if ((rc = hs_worker_evaluate(w, NULL, &tl, &ta)) < 0) goto out;
            double te = hs_now() - t0;
            r.final_test_loss = tl;
            r.final_test_acc = ta;
            if (evcsv) {
                fprintf(evcsv, "%ld,%.6f,%.6f,%.6g,%.6g\n", it + 1, (double)(it + 1) / ipe, te, tl,
                        ta);
                fflush(evcsv);
            }
            int hit = (o->target_loss > 0 && tl <= o->target_loss) ||
                      (o->target_acc > 0 && ta >= o->target_acc);
            if (hit && !isfinite(r.time_to_target_s)) r.time_to_target_s = te;
            if (!o->quiet) {
                printf("  eval  epoch %6.2f  iter %7ld  test loss %.4f  test acc %6.2f%%\n",
                       (double)(it + 1) / ipe, it + 1, tl, 100 * ta);
                fflush(stdout);
            }
        }
        now = hs_now();
        if (!o->quiet &&
            ((o->progress_s > 0 && now - last_print >= o->progress_s) || end_of_epoch || last)) {
            double el = now - t0, rate = samples / el;
            char eta[32];
            fmt_eta(el / (double)(it + 1) * (double)(total - it - 1), eta, sizeof eta);
            printf("epoch %6.2f/%d  iter %7ld/%ld  loss %.4f  lr %.4g  %8.0f samples/s  ETA %s\n",
                   (double)(it + 1) / ipe, o->epochs, it + 1, total, loss, lr, rate, eta);
            fflush(stdout);
            last_print = now;
        }
    }
    r.iterations = total;
    r.epochs = (double)total / (double)ipe;
    r.wall_s = hs_now() - t0;
    r.samples_per_s = samples / r.wall_s;
    if (!o->quiet) {
        printf("done: %ld iterations in %.1f s (%.0f samples/s): test loss %.4f, test accuracy "
               "%.2f%%",
               r.iterations, r.wall_s, r.samples_per_s, r.final_test_loss, 100 * r.final_test_acc);
        if (isfinite(r.bayes_acc)) printf(" (Bayes %.2f%%)", 100 * r.bayes_acc);
        printf("\n");
    }
    if (o->out_dir && (rc = write_summary(o, &r)) < 0) goto out;
    rc = 0;
out:
    if (csv && fclose(csv) != 0 && rc == 0) rc = HS_ERR(-EIO, "writing train.csv failed");
    if (evcsv && fclose(evcsv) != 0 && rc == 0) rc = HS_ERR(-EIO, "writing eval.csv failed");
    hs_worker_close(&w);
    if (rc == 0 && res) *res = r;
    return rc;
}
