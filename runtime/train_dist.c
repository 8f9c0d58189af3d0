/*
 * runtime/train_dist.c — one rank of `hearsay train --algo A`: the distributed training loop.
 *
 * Set-up: straggler injector, worker (its shard; every rank runs the same iterations), the
 * transport (provider, link shaping, progress thread), the topology, the algorithm
 * (hearsay/algo.h); one start-up barrier so every rank's clock starts together. Then per
 * iteration: injected crash check, gradient, injected sleep (never a busy wait), the
 * algorithm's step, per-rank CSV row; at evaluation points a local drain, an evaluation of
 * this rank's z and a snapshot to rank 0 (runtime/dist_eval.c). No barrier during training.
 * End: the algorithm's final drain, a last evaluation, the final gather on rank 0 and
 * summary.json. Files: DIR/rank-R.csv, DIR/rank-R-eval.csv (every rank), DIR/eval.csv and
 * DIR/summary.json (rank 0).
 */
#include "runtime/dist.h"

#include "hearsay/bootstrap.h"
#include "hearsay/checkpoint.h"
#include "hearsay/common.h"
#include "hearsay/json.h"
#include "hearsay/shaping.h"
#include "hearsay/straggler.h"
#include "optim/ps_wire.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Exit status of a rank that crashes by injection (--straggler crash): EX_SOFTWARE. */
#define HS_EXIT_CRASH 70

typedef struct run {
    const hs_train_opts_t *o;
    const hs_algo_ops_t *ops;
    hs_algo_t *algo;
    hs_dist_t d;
    hs_straggler_t *strag;
    hs_transport_t *t;
    hs_topo_t *topo;
    hs_worker_t *w;
    hs_evalc_t *ec;
    FILE *csv, *rev, *evcsv;
    unsigned char *esbuf;
    hs_treq_t *esreq;
    float *zh; /* (n) host copy of z */
    double t0, eval_s;
    double ttt; /* own time to target (training clock), NAN */
    hs_rank_final_t tot;
    long start;      /* first iteration of this run (a resumed run: the checkpoint's) */
    hs_boot_t *boot; /* kept for the checkpoint barrier */
    int *host_of;    /* (size) for hs_dist_t.host_of */
} run_t;

static double clock_of(const run_t *R)
{
    return hs_now() - R->t0 - R->eval_s;
}

static FILE *open_out(const char *dir, const char *name, int *rc)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) *rc = HS_ERR(-errno, "cannot write %s: %s", path, strerror(errno));
    return f;
}

int hs_train_dist_check(const hs_train_opts_t *o, int ranks)
{
    const hs_algo_ops_t *ops = hs_algo_find(o->algo);
    if (!ops)
        return HS_ERR(-EINVAL, "--algo '%s': unknown algorithm (known: %s)", o->algo ? o->algo : "",
                      hs_algo_names());
    if (o->tau < 1) return HS_ERR(-EINVAL, "--tau must be at least 1 (got %d)", o->tau);
    for (size_t i = 0; i < o->n_stragglers; i++)
        HS_TRY(hs_straggler_check(o->stragglers[i], ranks));
    if (o->link && *o->link) {
        hs_shape_t *s = NULL;
        int rc = hs_shape_parse(o->link, &s);
        hs_shape_free(&s);
        if (rc < 0) {
            hs_error_prefix("--link");
            return rc;
        }
    }
    if (!(o->comm_timeout_s > 0) || !(o->drain_timeout_s > 0))
        return HS_ERR(-EINVAL, "--comm-timeout and --drain-timeout must be > 0");
    if (!(o->checkpoint_every >= 0))
        return HS_ERR(-EINVAL, "--checkpoint-every must be >= 0 (got %g)", o->checkpoint_every);
    if (o->checkpoint_every > 0 && !o->out_dir)
        return HS_ERR(-EINVAL, "--checkpoint-every needs --out DIR (checkpoints go to DIR/ckpt)");
    if ((ops->flags & HS_ALGO_GRAPH) && ranks > 1) {
        hs_topo_opts_t to = {.mixing = (ops->flags & HS_ALGO_UNDIRECTED) ? HS_TOPO_MIX_METROPOLIS
                                                                         : HS_TOPO_MIX_AUTO};
        hs_topo_t *tp = NULL;
        int rc = hs_topo_create(&tp, o->graph, ranks, o->seed, &to);
        if (rc == 0 && (ops->flags & HS_ALGO_UNDIRECTED) && !hs_topo_undirected(tp))
            rc = HS_ERR(-EINVAL,
                        "--algo %s needs an undirected graph, and --graph %s is directed (try "
                        "biring, torus, hypercube, complete)",
                        ops->name, o->graph);
        hs_topo_destroy(&tp);
        if (rc < 0) {
            hs_error_prefix("--graph %s", o->graph);
            return rc;
        }
    }
    return 0;
}

static int write_f32(const char *dir, int rank, const char *what, const float *z, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/rank-%d.%s.f32", dir, rank, what);
    FILE *f = fopen(path, "wb");
    if (!f) return HS_ERR(-errno, "cannot write %s: %s", path, strerror(errno));
    size_t got = fwrite(z, sizeof(float), n, f);
    if (fclose(f) != 0 || got != n) return HS_ERR(-EIO, "writing %s failed", path);
    return 0;
}

/* Copy the model's parameters (z) to R->zh. */
static int pull_z(run_t *R)
{
    hs_kernels_t *k = R->d.k;
    return k->ops->to_host(k, R->zh, hs_model_params(hs_worker_model(R->w)),
                           R->d.n * sizeof(float));
}

static int hit_target(const hs_train_opts_t *o, double loss, double acc)
{
    return (o->target_loss > 0 && loss <= o->target_loss) ||
           (o->target_acc > 0 && acc >= o->target_acc);
}

/* An evaluation point after iteration `it` (1-based count of iterations done). */
static int evaluate_point(run_t *R, long done)
{
    const hs_train_opts_t *o = R->o;
    double te0 = hs_now(), clk = clock_of(R);
    HS_TRY(R->ops->drain(R->algo, 0));
    double tl, ta;
    HS_TRY(hs_worker_evaluate(R->w, NULL, &tl, &ta));
    if (hit_target(o, tl, ta) && !isfinite(R->ttt)) R->ttt = clk;
    if (R->rev) {
        fprintf(R->rev, "%ld,%.6f,%.6f,%.6g,%.6g,%.10g\n", done,
                (double)done / (double)hs_worker_iters_per_epoch(R->w), clk, tl, ta,
                R->ops->weight(R->algo));
        fflush(R->rev);
    }
    if (R->d.size > 1) {
        HS_TRY(pull_z(R));
        if (R->d.rank == 0)
            HS_TRY(hs_evalc_add(R->ec, 0, done, R->zh, tl, ta, clk));
        else
            HS_TRY(hs_eval_send(&R->d, R->esbuf, &R->esreq, done, R->zh, tl, ta, clk));
    }
    if (!o->quiet && R->d.rank == 0) {
        printf("  eval  epoch %6.2f  iter %7ld  rank 0 test loss %.4f  test acc %6.2f%%\n",
               (double)done / (double)hs_worker_iters_per_epoch(R->w), done, tl, 100 * ta);
        fflush(stdout);
    }
    R->eval_s += hs_now() - te0;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void json_str(FILE *f, const char *key, const char *v, const char *end)
{
    fprintf(f, "  \"%s\": ", key);
    hs_json_string(f, v);
    fprintf(f, "%s\n", end);
}

static void json_num(FILE *f, const char *key, double v)
{
    fprintf(f, "  \"%s\": ", key);
    hs_json_number(f, v);
    fprintf(f, ",\n");
}

static int write_summary(run_t *R, const hs_rank_final_t *all, const hs_avg_eval_t *avg,
                         double wall, hs_train_result_t *res)
{
    const hs_train_opts_t *o = R->o;
    hs_dist_t *d = &R->d;
    double *tt = hs_calloc((size_t)d->size, sizeof *tt, "times to target");
    if (!tt) return -ENOMEM;
    double wsum = 0, tls = 0;
    int nt = 0, nfailed = 0;
    for (int r = 0; r < d->size; r++) {
        tt[r] = all[r].present && isfinite(all[r].ttt_s) ? all[r].ttt_s : INFINITY;
        if (all[r].present) {
            wsum += all[r].weight;
            tls += all[r].train_loss;
            nt++;
        }
        nfailed += hs_dist_peer_dead(d, r);
    }
    qsort(tt, (size_t)d->size, sizeof *tt, cmp_double);
    double med = d->size % 2 ? tt[d->size / 2] : 0.5 * (tt[d->size / 2 - 1] + tt[d->size / 2]);
    free(tt);
    res->time_to_target_s = isfinite(med) ? med : NAN;
    res->final_test_loss = avg->test_loss;
    res->final_test_acc = avg->test_acc;
    res->final_train_loss = nt ? tls / nt : NAN;
    res->ps_weight_sum = wsum;
    res->consensus_distance = avg->consensus;
    res->n_failed = nfailed;
    if (!o->out_dir) return 0;
    int rc = 0;
    FILE *f = open_out(o->out_dir, "summary.json", &rc);
    if (!f) return rc;
    fprintf(f, "{\n");
    json_str(f, "algo", R->ops->name, ",");
    fprintf(f, "  \"ranks\": %d,\n", d->size);
    json_str(f, "graph", R->topo ? hs_topo_spec(R->topo) : "", ",");
    json_str(f, "transport", R->t ? hs_transport_provider(R->t) : "", ",");
    fprintf(f, "  \"tau\": %d,\n", !strcmp(R->ops->name, "osgp") ? o->tau : 1);
    json_str(f, "model", o->model, ",");
    json_str(f, "data", o->data, ",");
    fprintf(f, "  \"num_params\": %zu,\n", d->n);
    fprintf(f, "  \"iterations\": %ld,\n", d->total_iters);
    json_num(f, "epochs", (double)d->total_iters / (double)hs_worker_iters_per_epoch(R->w));
    json_num(f, "wall_s", wall);
    json_num(f, "final_test_loss", avg->test_loss);
    json_num(f, "final_test_acc", avg->test_acc);
    json_num(f, "final_train_loss", res->final_train_loss);
    json_num(f, "rank_test_loss_mean", avg->rank_loss_mean);
    json_num(f, "rank_test_acc_mean", avg->rank_acc_mean);
    json_num(f, "bayes_acc", hs_worker_test_set(R->w)->bayes_acc);
    json_num(f, "target_loss", o->target_loss > 0 ? o->target_loss : NAN);
    json_num(f, "target_acc", o->target_acc > 0 ? o->target_acc : NAN);
    json_num(f, "time_to_target_s", res->time_to_target_s);
    fprintf(f, "  \"ps_weight_sum\": %.15g,\n", wsum);
    json_num(f, "consensus_distance", avg->consensus);
    json_num(f, "consensus_distance_rel", avg->consensus_rel);
    fprintf(f, "  \"failed_ranks\": [");
    int first = 1;
    for (int r = 0; r < d->size; r++) {
        if (!hs_dist_peer_dead(d, r)) continue;
        fprintf(f,
                "%s\n    {\"rank\": %d, \"after_iteration\": %ld, \"message\": \"rank %d failed "
                "at/after iteration %ld\"}",
                first ? "" : ",", r, d->failed_at[r], r, d->failed_at[r]);
        first = 0;
    }
    fprintf(f, "%s],\n", first ? "" : "\n  ");
    fprintf(f, "  \"per_rank\": [");
    for (int r = 0; r < d->size; r++) {
        const hs_rank_final_t *a = &all[r];
        fprintf(f, "%s\n    {\"rank\": %d, \"finished\": %s, \"ps_weight\": ", r ? "," : "", r,
                a->present ? "true" : "false");
        hs_json_number(f, a->present ? a->weight : NAN);
        fprintf(f, ", \"test_loss\": ");
        hs_json_number(f, a->test_loss);
        fprintf(f, ", \"test_acc\": ");
        hs_json_number(f, a->test_acc);
        fprintf(f, ", \"time_to_target_s\": ");
        hs_json_number(f, a->ttt_s);
        fprintf(f, ", \"train_loss\": ");
        hs_json_number(f, a->train_loss);
        fprintf(f, ", \"clock_s\": ");
        hs_json_number(f, a->clock_s);
        fprintf(f, ", \"compute_s\": ");
        hs_json_number(f, a->compute_s);
        fprintf(f, ", \"comm_s\": ");
        hs_json_number(f, a->comm_s);
        fprintf(f, ", \"wait_s\": ");
        hs_json_number(f, a->wait_s);
        fprintf(f, ", \"straggle_s\": ");
        hs_json_number(f, a->straggle_s);
        fprintf(f, ", \"msgs_applied\": ");
        hs_json_number(f, a->msgs);
        fprintf(f, "}");
    }
    fprintf(f, "\n  ]%s\n", o->config_json ? "," : "");
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
    else
        snprintf(buf, n, "%.0fm%02.0fs", floor(s / 60), fmod(s, 60));
}

/* hs_dist_t.idle on rank 0: take the evaluation snapshots that have arrived. */
static int evalc_idle(void *ec)
{
    return hs_evalc_poll(ec);
}

/* Start-up only: one byte each way between every pair of ranks, so that every connection
 * exists before training. tcp;ofi_rxm connects lazily and serves a connection request only
 * while its target makes progress: without this, the first message to each peer waited
 * behind its handshake for up to seconds (seen: thousands of -FI_EAGAIN retries, and a
 * drain that took a live sender for dead). Bounded by the communication timeout. */
#define WIREUP_MAX_RANKS 256
static int wireup(hs_transport_t *t, int rank, int size, double timeout_s)
{
    if (size < 2 || size > WIREUP_MAX_RANKS) return 0;
    int n = 2 * (size - 1), rc = 0, done = 0;
    hs_treq_t **rq = hs_calloc((size_t)n, sizeof *rq, "wire-up requests");
    char *in = hs_calloc((size_t)size, 1, "wire-up buffers"), out = 1;
    if (!rq || !in) {
        free(rq);
        free(in);
        return -ENOMEM;
    }
    for (int j = 0, k = 0; j < size && rc == 0; j++)
        if (j != rank) rc = hs_transport_irecv(t, j, HS_TAG_WIREUP, &in[j], 1, &rq[k++]);
    for (int j = 0, k = size - 1; j < size && rc == 0; j++)
        if (j != rank) rc = hs_transport_isend(t, j, HS_TAG_WIREUP, &out, 1, &rq[k++]);
    double deadline = hs_now() + timeout_s;
    while (rc == 0 && done < n) {
        int idx = -1;
        rc = hs_transport_waitany(t, rq, n, HS_MAX(0.001, deadline - hs_now()), &idx, NULL);
        if (rc == 0 && idx >= 0) done++;
    }
    if (rc < 0) hs_error_prefix("rank %d: connecting to every rank at start-up", rank);
    for (int i = 0; i < n; i++)
        if (rq[i]) hs_transport_req_free(t, &rq[i]);
    free(rq);
    free(in);
    return rc;
}

static int open_files(run_t *R)
{
    const hs_train_opts_t *o = R->o;
    int rc = 0;
    char name[64];
    if (!o->out_dir) return 0;
    HS_TRY(hs_mkdir_p(o->out_dir));
    snprintf(name, sizeof name, "rank-%d.csv", R->d.rank);
    if (!(R->csv = open_out(o->out_dir, name, &rc))) return rc;
    snprintf(name, sizeof name, "rank-%d-eval.csv", R->d.rank);
    if (!(R->rev = open_out(o->out_dir, name, &rc))) return rc;
    fprintf(R->csv, "iteration,wall_s,epoch,train_loss,lr,compute_s,comm_s,wait_s,straggle_s,"
                    "bytes_sent,bytes_recv,ps_weight,msgs_applied,staleness_mean\n");
    fprintf(R->rev, "iteration,epoch,clock_s,test_loss,test_acc,ps_weight\n");
    if (R->d.rank == 0 && !(R->evcsv = open_out(o->out_dir, "eval.csv", &rc))) return rc;
    return 0;
}

static void close_run(run_t *R)
{
    if (R->ops && R->algo) R->ops->finalize(&R->algo);
    hs_evalc_close(&R->ec);
    if (R->esreq) hs_transport_req_free(R->t, &R->esreq);
    free(R->esbuf);
    free(R->zh);
    free(R->host_of);
    if (R->csv) fclose(R->csv);
    if (R->rev) fclose(R->rev);
    if (R->evcsv) fclose(R->evcsv);
    hs_topo_destroy(&R->topo);
    hs_transport_close(&R->t);
    hs_worker_close(&R->w);
    hs_straggler_free(&R->strag);
    free(R->d.failed_at);
}

static int setup(run_t *R, hs_boot_t *boot)
{
    const hs_train_opts_t *o = R->o;
    int rank = hs_boot_rank(boot), size = hs_boot_size(boot);
    R->ops = hs_algo_find(o->algo);
    HS_TRY(hs_train_dist_check(o, size));
    HS_TRY(hs_straggler_create(&R->strag, o->stragglers, o->n_stragglers, o->seed, rank, size));
    HS_TRY(hs_worker_open(&R->w, o, rank, size));
    HS_TRY(hs_worker_perturb(R->w, o->init_spread, o->seed, rank));
    hs_dist_t *d = &R->d;
    d->o = o;
    d->worker = R->w;
    d->k = hs_worker_kernels(R->w);
    d->rank = rank;
    d->size = size;
    d->n = hs_model_num_params(hs_worker_model(R->w));
    long ipe = hs_worker_iters_per_epoch(R->w);
    d->total_iters = (long)o->epochs * ipe;
    if (o->max_iters > 0 && o->max_iters < d->total_iters) d->total_iters = o->max_iters;
    if (!(d->failed_at = hs_malloc((size_t)size * sizeof(long), "failure table"))) return -ENOMEM;
    for (int r = 0; r < size; r++) d->failed_at[r] = -1;
    if (!(R->zh = hs_malloc(d->n * sizeof(float), "host copy of z"))) return -ENOMEM;

    hs_transport_opts_t to;
    HS_TRY(hs_transport_opts_default(&to));
    if (o->provider && *o->provider && strcmp(o->provider, "auto")) to.provider = o->provider;
    if (o->link && *o->link) to.shaping = o->link;
    to.progress_thread = o->progress_thread;
    to.timeout_s = o->comm_timeout_s;
    to.seed = o->seed;
    if (!(R->host_of = hs_malloc((size_t)size * sizeof(int), "host map"))) return -ENOMEM;
    for (int r = 0; r < size; r++) R->host_of[r] = hs_boot_host_of(boot, r);
    d->host_of = R->host_of;
    d->n_hosts = hs_boot_num_hosts(boot);
    HS_TRY(hs_transport_open(&R->t, boot, &to));
    d->t = R->t;
    if ((R->ops->flags & HS_ALGO_COMM) && size > 1)
        HS_TRY(wireup(R->t, rank, size, o->comm_timeout_s));
    /* Start-up only (before any receive is posted): every rank's clock starts together. */
    HS_TRY(hs_boot_barrier(boot));
    if ((R->ops->flags & HS_ALGO_GRAPH) && size > 1) {
        hs_topo_opts_t tpo = {.mixing = (R->ops->flags & HS_ALGO_UNDIRECTED)
                                            ? HS_TOPO_MIX_METROPOLIS
                                            : HS_TOPO_MIX_AUTO};
        HS_TRY(hs_topo_create(&R->topo, o->graph, size, o->seed, &tpo));
        d->topo = R->topo;
    } else if ((R->ops->flags & HS_ALGO_GRAPH) && size == 1) {
        R->ops = &hs_algo_local_ops; /* a one-rank job has nobody to gossip with */
    }
    HS_TRY(open_files(R));
    if (size > 1) {
        if (!(R->esbuf = hs_malloc(sizeof(hs_ps_hdr_v1_t) + d->n * sizeof(float), "eval buffer")))
            return -ENOMEM;
        if (rank == 0) {
            HS_TRY(hs_evalc_open(&R->ec, d, R->evcsv));
            d->idle = evalc_idle;
            d->idle_ctx = R->ec;
        }
    }
    if (o->dump_params && o->out_dir) {
        HS_TRY(pull_z(R));
        HS_TRY(write_f32(o->out_dir, rank, "init", R->zh, d->n));
    }
    HS_TRY(R->ops->init(&R->algo, d));
    if (o->resume && *o->resume) {
        HS_TRY(hs_ckpt_load_run(o->resume, rank, size, R->w, R->ops, R->algo, &R->start));
        d->start_iter = R->start;
        if (R->start > d->total_iters)
            return HS_ERR(-EINVAL,
                          "--resume %s: the checkpoint is at iteration %ld, past the end of this "
                          "run (%ld iterations)",
                          o->resume, R->start, d->total_iters);
        /* Start-up only: every rank has restored its state (EASGD: its center shard) before
         * any rank's first step can reach it. */
        HS_TRY(hs_boot_barrier(boot));
    }
    return 0;
}

/* A checkpoint after `done` iterations, then DIR/ckpt/rank-R.bin. Every rank takes it at the
 * same iteration. A push-sum algorithm first receives every message of the iterations before
 * the cut (bounded by the drain timeout) and waits for every rank to have saved before going
 * on, so the checkpoints hold all the mass exactly once (the sum of the weights is N); the
 * others drain as before an evaluation. */
static int checkpoint_point(run_t *R, long done)
{
    double t0 = hs_now();
    if (R->ops->flags & HS_ALGO_PUSHSUM) {
        R->d.drain_until = done;
        int rc = R->ops->drain(R->algo, 1);
        R->d.drain_until = 0;
        HS_TRY(rc);
    } else {
        HS_TRY(R->ops->drain(R->algo, 0));
    }
    int rc = hs_ckpt_save_run(R->o->out_dir, R->d.rank, R->d.size, done, R->w, R->ops, R->algo);
    /* A push-sum cut also needs that no rank sends a message of round `done` before every rank
     * has saved (a slower rank would fold it into its checkpoint, and the resumed sender would
     * send it again): the one barrier of a run, and only with --checkpoint-every. */
    if (rc == 0 && (R->ops->flags & HS_ALGO_PUSHSUM)) {
        rc = hs_boot_barrier(R->boot);
        if (rc < 0) hs_error_prefix("rank %d: checkpoint at iteration %ld", R->d.rank, done);
    }
    R->eval_s += hs_now() - t0;
    return rc;
}

int hs_train_dist(const hs_train_opts_t *o, hs_boot_t *boot, hs_train_result_t *res)
{
    run_t R = {.o = o, .ttt = NAN, .boot = boot};
    hs_train_result_t r = {.time_to_target_s = NAN,
                           .final_test_loss = NAN,
                           .final_test_acc = NAN,
                           .final_train_loss = NAN};
    hs_dist_t *d = &R.d;
    int rc = setup(&R, boot);
    if (rc < 0) goto out;
    long ipe = hs_worker_iters_per_epoch(R.w), T = d->total_iters;
    long eval_period = o->eval_every > 0 ? (long)llround(o->eval_every * (double)ipe) : 0;
    if (o->eval_every > 0 && eval_period < 1) eval_period = 1;
    long ckpt_period =
        o->checkpoint_every > 0 ? HS_MAX(1L, (long)llround(o->checkpoint_every * (double)ipe)) : 0;
    r.num_params = d->n;
    r.ranks = d->size;
    r.bayes_acc = hs_worker_test_set(R.w)->bayes_acc;
    if (!o->quiet && d->rank == 0) {
        const hs_dataset_t *tr = hs_worker_train_set(R.w);
        printf("hearsay train: --algo %s on %d rank%s%s%s, %s on %s (%lld train samples)\n",
               R.ops->name, d->size, d->size > 1 ? "s" : "", R.topo ? ", graph " : "",
               R.topo ? hs_topo_spec(R.topo) : "", o->model, o->data, (long long)tr->n);
        printf("  %zu parameters, batch %d per rank, %ld iterations/epoch, %ld iterations, "
               "transport %s\n",
               d->n, o->batch, ipe, T, hs_transport_provider(R.t));
        if (R.start > 0)
            printf("  resumed from %s at iteration %ld (epoch %.2f)\n", o->resume, R.start,
                   (double)R.start / (double)ipe);
        fflush(stdout);
    }
    R.t0 = hs_now();
    double last_print = R.t0, epoch_loss = 0;
    long epoch_batches = 0;
    for (long it = R.start; it < T; it++) {
        if (hs_straggler_crash(R.strag, it)) {
            fprintf(stderr,
                    "rank %d: injected crash at iteration %ld (--straggler crash): exiting with "
                    "status %d\n",
                    d->rank, it, HS_EXIT_CRASH);
            fflush(NULL);
            /* Abrupt and honest: no drain, no goodbye, and a failure status, so the launcher
             * reports it (`hearsay run --keep-going` lets the survivors run on). */
            _exit(HS_EXIT_CRASH);
        }
        double loss, ts = hs_now(), lr = hs_worker_lr(R.w);
        if ((rc = hs_worker_grad(R.w, &loss, NULL, NULL)) < 0) goto out;
        if (!isfinite(loss)) {
            rc = HS_ERR(-ERANGE, "rank %d: training diverged: loss is %g at iteration %ld (lr %g)",
                        d->rank, loss, it, lr);
            goto out;
        }
        double compute = hs_now() - ts;
        double delay = hs_straggler_delay(R.strag, it, compute);
        if (delay > 0) hs_sleep(delay);
        double ta = hs_now(), c0 = d->st.comm_s + d->st.wait_s;
        if ((rc = R.ops->step(R.algo, it)) < 0) goto out;
        double step_s = hs_now() - ta;
        double other = step_s - (d->st.comm_s + d->st.wait_s - c0);
        compute += other > 0 ? other : 0; /* the local optimizer step */
        R.tot.compute_s += compute;
        R.tot.comm_s += d->st.comm_s;
        R.tot.wait_s += d->st.wait_s;
        R.tot.straggle_s += delay;
        R.tot.msgs += (double)d->st.msgs_applied;
        epoch_loss += loss;
        epoch_batches++;
        long done = it + 1;
        if (done % ipe == 0 || done == T) {
            R.tot.train_loss = epoch_loss / (double)epoch_batches;
            epoch_loss = 0;
            epoch_batches = 0;
        }
        double w = R.ops->weight(R.algo);
        if (R.csv)
            fprintf(R.csv, "%ld,%.6f,%.6f,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%llu,%llu,%.12g,%ld,%.4g\n",
                    done, clock_of(&R), (double)done / (double)ipe, loss, lr, compute, d->st.comm_s,
                    d->st.wait_s, delay, (unsigned long long)d->st.bytes_sent,
                    (unsigned long long)d->st.bytes_recv, w, d->st.msgs_applied,
                    d->st.msgs_applied ? d->st.staleness_sum / (double)d->st.msgs_applied : NAN);
        /* (an evaluation's drain is counted in the next row) */
        memset(&d->st, 0, sizeof d->st);
        if (eval_period > 0 && done % eval_period == 0 && done < T &&
            (rc = evaluate_point(&R, done)) < 0)
            goto out;
        if (ckpt_period > 0 && done % ckpt_period == 0 && done < T &&
            (rc = checkpoint_point(&R, done)) < 0)
            goto out;
        if (R.ec) {
            double te0 = hs_now();
            if ((rc = hs_evalc_poll(R.ec)) < 0) goto out;
            R.eval_s += hs_now() - te0;
        }
        double now = hs_now();
        if (!o->quiet && d->rank == 0 &&
            ((o->progress_s > 0 && now - last_print >= o->progress_s) || done % ipe == 0 ||
             done == T)) {
            double el = clock_of(&R);
            char eta[32];
            fmt_eta(el / (double)(done - R.start) * (double)(T - done), eta, sizeof eta);
            printf("epoch %6.2f/%d  iter %7ld/%ld  loss %.4f  lr %.4g  w %.4f  %6.0f it/s  "
                   "wait %2.0f%%  ETA %s\n",
                   (double)done / (double)ipe, o->epochs, done, T, loss, lr, w,
                   (double)(done - R.start) / el, el > 0 ? 100 * R.tot.wait_s / el : 0, eta);
            fflush(stdout);
            last_print = now;
        }
    }
    double train_end = clock_of(&R);
    /* End of the run: nothing in flight, nothing lost. */
    memset(&d->st, 0, sizeof d->st);
    if ((rc = R.ops->drain(R.algo, 1)) < 0) goto out;
    R.tot.wait_s += d->st.wait_s;
    R.tot.comm_s += d->st.comm_s;
    R.tot.msgs += (double)d->st.msgs_applied;
    double tl, tacc;
    if ((rc = hs_worker_evaluate(R.w, NULL, &tl, &tacc)) < 0) goto out;
    if (hit_target(o, tl, tacc) && !isfinite(R.ttt)) R.ttt = train_end;
    if ((rc = pull_z(&R)) < 0) goto out;
    if (o->dump_params && o->out_dir &&
        (rc = write_f32(o->out_dir, d->rank, "final", R.zh, d->n)) < 0)
        goto out;
    if (R.rev)
        fprintf(R.rev, "%ld,%.6f,%.6f,%.6g,%.6g,%.10g\n", T, (double)T / (double)ipe, train_end, tl,
                tacc, R.ops->weight(R.algo));
    R.tot.weight = R.ops->weight(R.algo);
    R.tot.test_loss = tl;
    R.tot.test_acc = tacc;
    R.tot.ttt_s = R.ttt;
    R.tot.clock_s = train_end;
    if (R.ec && (rc = hs_evalc_finish(
                     R.ec, eval_period > 0 ? (T - 1) / eval_period - R.start / eval_period : 0,
                     o->drain_timeout_s)) < 0)
        goto out;
    hs_rank_final_t *all = hs_calloc((size_t)d->size, sizeof *all, "per-rank results");
    if (!all) {
        rc = -ENOMEM;
        goto out;
    }
    hs_avg_eval_t avg = {0};
    if (d->size > 1) {
        rc = hs_final_gather(d, R.zh, &R.tot, all, &avg);
    } else {
        all[0] = R.tot;
        all[0].present = 1;
        avg = (hs_avg_eval_t){.iteration = T,
                              .ranks = 1,
                              .test_loss = tl,
                              .test_acc = tacc,
                              .rank_loss_mean = tl,
                              .rank_acc_mean = tacc};
    }
    double wall = hs_now() - R.t0;
    if (rc == 0 && d->rank == 0) {
        if (R.evcsv) {
            fprintf(R.evcsv, "%ld,%.6f,%.6f,%d,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g\n", T,
                    (double)T / (double)ipe, avg.clock_s, avg.ranks, avg.test_loss, avg.test_acc,
                    avg.consensus, avg.consensus_rel, avg.rank_loss_mean, avg.rank_loss_min,
                    avg.rank_loss_max, avg.rank_acc_mean);
        }
        rc = write_summary(&R, all, &avg, wall, &r);
        if (rc == 0 && !o->quiet) {
            printf("done: %ld iterations on %d ranks in %.1f s: averaged model test loss %.4f, "
                   "accuracy %.2f%%, consensus distance %.3g, sum of weights %.9g\n",
                   T, d->size, wall, avg.test_loss, 100 * avg.test_acc, avg.consensus,
                   r.ps_weight_sum);
            for (int q = 0; q < d->size; q++)
                if (hs_dist_peer_dead(d, q))
                    printf("rank %d failed at/after iteration %ld\n", q, d->failed_at[q]);
            fflush(stdout);
        }
    } else if (rc == 0) {
        r.final_test_loss = tl;
        r.final_test_acc = tacc;
        r.ps_weight_sum = R.tot.weight;
        r.time_to_target_s = R.ttt;
    }
    free(all);
    r.iterations = T;
    r.epochs = (double)T / (double)ipe;
    r.wall_s = wall;
    r.samples_per_s = (double)(T - R.start) * o->batch * d->size / wall;
out:
    close_run(&R);
    if (rc == 0 && res) *res = r;
    return rc;
}
