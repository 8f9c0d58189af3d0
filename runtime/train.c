/*
 * runtime/train.c — `hearsay train`: the one training loop, for one worker or one rank of a
 * job (hearsay run, mpirun, Slurm), around an algorithm (hearsay/algo.h; one worker runs
 * "local").
 *
 * Set-up: straggler injector, worker (its shard; every rank runs the same iterations), the
 * transport when there are peers (provider, link shaping, progress thread), the execution
 * environment (hearsay/exec.h: every clock read, sleep, wait and service goes through it), the
 * topology, the algorithm; one start-up barrier so every rank's clock starts together. Then
 * per iteration: injected crash check, gradient, injected sleep (never a busy wait), the
 * algorithm's step, the iteration's row; at evaluation points a local drain, an evaluation of
 * this rank's z and a snapshot to rank 0 (runtime/dist_eval.c); at checkpoint points a cut
 * (runtime/checkpoint.c). No barrier during training. End: the algorithm's final drain, a last
 * evaluation, the final gather on rank 0 and summary.json. Everything shown or written goes
 * through runtime/report.c.
 *
 * This file is the algorithms' other side: it fills hs_dist_t (buffers, the local step, the
 * evaluation, the failure table, the record slot) from the worker and the options.
 */
#include "runtime/dist.h"
#include "runtime/report.h"

#include "hearsay/bootstrap.h"
#include "hearsay/checkpoint.h"
#include "hearsay/common.h"
#include "hearsay/env.h"
#include "hearsay/file.h"
#include "hearsay/shaping.h"
#include "hearsay/straggler.h"
#include "hearsay/trace.h"

#include "runtime/heartbeat.h"
#include "runtime/rejoin.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* Exit status of a rank that crashes by injection (--straggler crash): EX_SOFTWARE. */
#define HS_EXIT_CRASH 70

/* Checkpoint sets waiting for their parts, at most (the oldest is given up past it). */
#define CKPT_PENDING 8

typedef struct run {
    const hs_train_opts_t *o;
    const hs_algo_ops_t *ops;
    hs_algo_t *algo;
    hs_algo_opts_t ao;
    hs_cfg_spec_t acfg_spec; /* (storage of acfg's spec) */
    hs_cfg_t *acfg;          /* the algorithm's own options, resolved (d.cfg) */
    hs_dist_t d;
    hs_exec_t *x;
    int own_x; /* x and t were made here (else the caller's: hs_train_in) */
    hs_straggler_t *strag;
    hs_transport_t *t;
    hs_topo_t *topo;
    hs_worker_t *w;
    hs_evalc_t *ec;
    hs_report_t *rep;
    unsigned char *esbuf;
    hs_treq_t *esreq;
    float *zh;     /* (n) host copy of z */
    hs_stage_t zs; /* z where the host reads it: the parameters themselves on the CPU, else zh */
    double t0, eval_s;
    double row_clock; /* the training clock at the last row of rank-R.csv */
    double ttt;       /* own time to target (training clock), NAN */
    double ttt_avg;   /* one worker: its model's (the averaged model), the same */
    hs_rank_final_t tot;
    long start;   /* first iteration of this run (a resumed run: the checkpoint's) */
    long ipe;     /* iterations per epoch */
    int *host_of; /* (size) for hs_dist_t.host_of (o->shared's when borrowed) */
    int host_of_borrowed, topo_borrowed; /* from o->shared: not freed here */
    long *failed_at; /* (size) -1 alive, else the iteration at/after which the rank failed */
    long done;       /* iterations done (the last one's number + 1) */
    long ckpt_pending[CKPT_PENDING]; /* rank 0: sets whose manifest waits for their parts, */
    int n_pending;                   /* oldest first */
    int warned_w;   /* the weight left [1e-2, 1e2] once: said so (tot.w_out_iter) */
    hs_trace_t *tr; /* --trace (NULL: none) */
    hs_hb_t *hb;    /* heartbeats (NULL: none; runtime/heartbeat.h) */
    int virtual_hb; /* hb is virtual time's (runtime/heartbeat.h, d_peer_hb) */
    /* Evaluation is an observer (hearsay sim without --sim-eval-traffic): no drain before it,
     * no virtual time or bandwidth for it (docs/simulation.md, "Evaluation") */
    int observer;
    /* Gradient-ready notifications (hs_dist_t.on_grads): the model's layers with parameters,
     * the subscriber, and in virtual time the moments (fractions of the step, backward order) */
    hs_grad_layer_t *glayers; /* (d.n_glayers) */
    size_t *glayer_off;       /* (d.n_glayers + 1) */
    double *gmark_frac;       /* (d.n_glayers) */
    hs_grads_ready_fn grads_fn;
    void *grads_fctx;
    /* A replacement may join (crash:...:rejoin=D; runtime/rejoin.h): the notices, and on rank
     * 0 which ranks rejoined (for the summary's mass account) */
    hs_rejoin_t *rj;
    unsigned char *rejoined; /* (size) replacements that joined (rank 0: for the summary) */
    unsigned char *replaced; /* (size) ranks a crash spec replaces */
    long eval_period;        /* iterations between evaluations (0: none) */
    double clock_at_start;   /* a replacement: the donor's training clock at its first step */
} run_t;

/* The push-sum weight's healthy range: outside it the progress line warns (once). */
#define W_WARN_LO 1e-2
#define W_WARN_HI 1e2

/* --- hs_dist_t's loop side ------------------------------------------------------------- */

static int d_apply(void *ctx, double lr_scale, float *dst)
{
    run_t *R = ctx;
    hs_trace_begin(R->tr, HS_TR_LOCAL_STEP, 0);
    int rc = dst               ? hs_worker_apply_to(R->w, dst)
             : lr_scale == 1.0 ? hs_worker_apply(R->w)
                               : hs_worker_apply_scaled(R->w, lr_scale);
    hs_trace_end(R->tr, HS_TR_LOCAL_STEP);
    return rc;
}

static int d_use_grads(void *ctx, float *g)
{
    run_t *R = ctx;
    hs_model_t *m = hs_worker_model(R->w);
    HS_TRY(hs_model_use_grads(m, g));
    R->d.grads = hs_model_grads(m);
    return 0;
}

/* The model's hook (wall clock): [lo, hi) is one layer's range; tell the subscriber which. */
static int model_grad_hook(void *ctx, size_t lo, size_t hi)
{
    run_t *R = ctx;
    (void)hi;
    int a = 0, b = R->d.n_glayers; /* the layer whose range starts at lo */
    while (b - a > 1) {
        int mid = (a + b) / 2;
        if (R->glayer_off[mid] <= lo)
            a = mid;
        else
            b = mid;
    }
    return R->grads_fn ? R->grads_fn(R->grads_fctx, a, a + 1) : 0;
}

/* Virtual time (the environment's local_marks): mark i is backward's i-th layer. */
static int grad_mark(void *ctx, int i)
{
    run_t *R = ctx;
    int l = R->d.n_glayers - 1 - i;
    return R->grads_fn ? R->grads_fn(R->grads_fctx, l, l + 1) : 0;
}

static int d_on_grads(void *ctx, hs_grads_ready_fn fn, void *fctx)
{
    run_t *R = ctx;
    R->grads_fn = fn;
    R->grads_fctx = fn ? fctx : NULL;
    /* with the wall clock backward calls it; an environment with local_marks times it */
    if (!hs_exec_has_local_marks(R->x))
        hs_model_set_grad_hook(hs_worker_model(R->w), fn ? model_grad_hook : NULL, R);
    return 0;
}

/* The gradient-layer table of hs_dist_t (and the marks' moments for virtual time). */
static int grad_layers_setup(run_t *R)
{
    hs_model_t *m = hs_worker_model(R->w);
    int n = hs_model_grad_layers(m, hs_model_max_batch(m), NULL, 0);
    R->glayers = hs_calloc((size_t)HS_MAX(n, 1), sizeof *R->glayers, "gradient layers");
    R->glayer_off = hs_calloc((size_t)n + 1, sizeof *R->glayer_off, "gradient layers");
    R->gmark_frac = hs_calloc((size_t)HS_MAX(n, 1), sizeof *R->gmark_frac, "gradient layers");
    if (!R->glayers || !R->glayer_off || !R->gmark_frac) return -ENOMEM;
    hs_model_grad_layers(m, hs_model_max_batch(m), R->glayers, n);
    for (int i = 0; i < n; i++) {
        R->glayer_off[i] = R->glayers[i].lo;
        R->gmark_frac[i] = R->glayers[n - 1 - i].ready;
    }
    R->glayer_off[n] = hs_model_num_params(m);
    R->d.n_glayers = n;
    R->d.glayer_off = R->glayer_off;
    return 0;
}

static int d_evaluate(void *ctx, const float *params, double *loss, double *acc)
{
    run_t *R = ctx;
    return hs_worker_evaluate(R->w, params, loss, acc);
}

/* The iteration at/after which rank peer failed; -1: alive (no table yet: nobody failed). */
static long failed_of(const run_t *R, int peer)
{
    return R->failed_at && peer >= 0 && peer < R->d.size ? R->failed_at[peer] : -1;
}

/* The failure table, allocated at the first failure (a rank of a run without failures holds
 * no table of the whole job); NULL when out of memory. */
static long *failure_table(run_t *R)
{
    if (!R->failed_at &&
        (R->failed_at = hs_malloc((size_t)R->d.size * sizeof(long), "failure table")))
        for (int r = 0; r < R->d.size; r++) R->failed_at[r] = -1;
    return R->failed_at;
}

static void d_peer_failed(void *ctx, int peer, long iter, const char *why)
{
    run_t *R = ctx;
    hs_dist_t *d = &R->d;
    if (peer < 0 || peer >= d->size || peer == d->rank) return;
    if (iter < 0) iter = 0;
    /* A replaced rank (crash:...:rejoin=D) that runs: what failed concerned the process that
     * crashed. Before its replacement joined, it counts as failed until then (not fenced: the
     * replacement is not the one given up on); after, it is stale. */
    int stale = R->replaced && R->replaced[peer] && hs_exec_alive(R->x, peer, 0);
    if (stale && R->rejoined[peer]) return;
    if (!failure_table(R)) { /* (a failure is still known to the algorithm that saw it) */
        HS_WARN("rank %d: no memory to record that peer rank %d failed", d->rank, peer);
        return;
    }
    if (R->failed_at[peer] < 0) {
        d->failures++;
        /* The words match what happens next: tolerant algorithms go on, the others stop. */
        if (R->ops->flags & HS_ALGO_TOLERANT)
            HS_WARN("rank %d: peer rank %d failed at/after iteration %ld (%s); continuing "
                    "without it",
                    d->rank, peer, iter, why ? why : "no reason given");
        else
            HS_WARN("rank %d: peer rank %d failed at/after iteration %ld (%s); --algo %s cannot "
                    "go on without it and stops",
                    d->rank, peer, iter, why ? why : "no reason given", R->ops->name);
    }
    if (iter > R->failed_at[peer]) R->failed_at[peer] = iter;
    /* Given up on while it still runs (slow past every bound, or declared failed by a peer
     * that did): it is excluded, so fenced, everywhere: told, it stops, and its later
     * messages are refused, so that every rank agrees on who is in the job (without that,
     * push-sum weights fall to 0 on the ranks that still count on it: docs/failure-model.md) */
    if (R->hb && !stale && hs_hb_state(R->hb, peer) != HS_HB_FENCED &&
        hs_exec_alive(R->x, peer, 0)) {
        char fw[160];
        snprintf(fw, sizeof fw, "excluded by rank %d: %s", d->rank, why ? why : "failed");
        if (hs_hb_fence(R->hb, peer, fw) < 0) hs_error_clear();
    }
}

static int d_peer_dead(void *ctx, int peer)
{
    run_t *R = ctx;
    if (peer < 0 || peer >= R->d.size) return 0;
    return failed_of(R, peer) >= 0 ||
           (peer != R->d.rank && hs_hb_state(R->hb, peer) == HS_HB_FENCED) ||
           (R->rj && hs_rejoin_restarting(R->rj, peer)); /* (its process crashed) */
}

/* In virtual time no process can be stopped (a pause, `once:` or `pause:`, is a slow rank, and
 * a slow rank heartbeats): the heartbeats' verdict is known without their messages. Every rank
 * still running is alive, so the waits follow the rule of the wall clock (keep waiting for a
 * live peer up to the bound + 3 fail timeouts) rather than give a slow peer up at the bound
 * (docs/failure-model.md); a rank that has exited is left to the exit checks (-1). */
static int d_peer_hb(void *ctx, int peer)
{
    run_t *R = ctx;
    int s = hs_hb_state(R->hb, peer);
    if (s == HS_HB_ALIVE && R->virtual_hb && peer != R->d.rank && !hs_exec_alive(R->x, peer, 0))
        return HS_HB_OFF;
    return s;
}

static void d_note_wait(void *ctx, int peer)
{
    run_t *R = ctx;
    hs_hb_note_wait(R->hb, peer);
}

static int d_peer_blocked(void *ctx, int peer)
{
    run_t *R = ctx;
    return hs_hb_blocked_on(R->hb, peer);
}

static int d_record(void *ctx, const char *file, const char *header, const char *line)
{
    run_t *R = ctx;
    return hs_report_record(R->rep, file, header, line);
}

long hs_run_failed_at(const hs_dist_t *d, int r)
{
    const run_t *R = d->ctx;
    return failed_of(R, r);
}

/* (The flag checks, hs_train_dist_check, are in runtime/train_check.c.) */

/* --- the loop -------------------------------------------------------------------------- */

static double clock_of(run_t *R)
{
    return hs_exec_now(R->x) - R->t0 - R->eval_s;
}

/* Copy the model's parameters (z) to R->zh. */
static int pull_z(run_t *R)
{
    hs_kernels_t *k = R->d.k;
    return k->ops->to_host(k, R->zh, R->d.params, R->d.n * sizeof(float));
}

static int hit_target(const hs_train_opts_t *o, double loss, double acc)
{
    return (o->target_loss > 0 && loss <= o->target_loss) ||
           (o->target_acc > 0 && acc >= o->target_acc);
}

/* An evaluation point after `done` iterations. */
static int evaluate_point_(run_t *R, long done);
static int evaluate_point(run_t *R, long done)
{
    if (R->observer) hs_exec_uncounted(R->x, 1);
    int rc = evaluate_point_(R, done);
    if (R->observer) hs_exec_uncounted(R->x, 0);
    return rc;
}

static int evaluate_point_(run_t *R, long done)
{
    const hs_train_opts_t *o = R->o;
    double te0 = hs_exec_now(R->x), clk = clock_of(R);
    hs_trace_begin(R->tr, HS_TR_EVAL, done); /* (an error ends the run: the merge closes it) */
    /* An observer evaluates the model as the step left it: a drain would wait for this rank's
     * sends (time) and apply what has arrived earlier than the algorithm would (iterates). */
    if (!R->observer) {
        double c0 = R->d.st.comm_s, w0 = R->d.st.wait_s;
        HS_TRY(R->ops->drain(R->algo, 0));
        R->d.st.comm_s = c0; /* (its time is the evaluation's, eval_s) */
        R->d.st.wait_s = w0;
    }
    double tl, ta;
    HS_TRY(hs_worker_evaluate(R->w, NULL, &tl, &ta));
    if (hit_target(o, tl, ta) && !isfinite(R->ttt)) R->ttt = clk;
    HS_TRY(hs_report_eval(R->rep, done, clk, tl, ta, hs_algo_weight(R->ops, R->algo)));
    if (R->d.size > 1) {
        HS_TRY(pull_z(R));
        if (R->d.rank == 0)
            HS_TRY(hs_evalc_add(R->ec, 0, done, R->zh, tl, ta, clk));
        else
            HS_TRY(hs_eval_send(&R->d, R->esbuf, &R->esreq, done, R->zh, tl, ta, clk));
    } else {
        hs_avg_eval_t a = {.iteration = done,
                           .ranks = 1,
                           .clock_s = clk,
                           .test_loss = tl,
                           .test_acc = ta,
                           .rank_loss_mean = tl,
                           .rank_loss_min = tl,
                           .rank_loss_max = tl,
                           .rank_acc_mean = ta};
        hs_report_avg_row(hs_report_avg_csv(R->rep), &a, R->ipe);
        if (hit_target(o, tl, ta) && !isfinite(R->ttt_avg)) R->ttt_avg = clk;
    }
    R->eval_s += hs_exec_now(R->x) - te0;
    hs_trace_end(R->tr, HS_TR_EVAL);
    return 0;
}

/* Rank 0: take the evaluation snapshots that have arrived (an observer's stretch). */
static int evalc_poll(run_t *R)
{
    if (R->observer) hs_exec_uncounted(R->x, 1);
    int rc = hs_evalc_poll(R->ec);
    if (R->observer) hs_exec_uncounted(R->x, 0);
    return rc;
}

/* This rank was fenced (runtime/heartbeat.h): an error that ends what it waits for. */
static int fenced_err(run_t *R)
{
    if (hs_hb_state(R->hb, R->d.rank) != HS_HB_FENCED) return 0;
    char why[200];
    hs_hb_why(R->hb, R->d.rank, why, sizeof why);
    return HS_ERR(-ESHUTDOWN, "rank %d: fenced (%s)", R->d.rank, why);
}

/* hs_exec_t's idle hook: a fenced rank stops waiting; rank 0 serves the evaluation. */
static int loop_idle(void *ctx)
{
    run_t *R = ctx;
    HS_TRY(fenced_err(R));
    return R->ec ? evalc_poll(ctx) : 0;
}

/* Start-up only: one byte each way between every pair of ranks, so that every connection
 * exists before training. tcp;ofi_rxm connects lazily and serves a connection request only
 * while its target makes progress: without this, the first message to each peer waited
 * behind its handshake for up to seconds (seen: thousands of -FI_EAGAIN retries, and a
 * drain that took a live sender for dead). Bounded by the communication timeout. */
#define WIREUP_MAX_RANKS 256
static int wireup(hs_exec_t *x, hs_transport_t *t, int rank, int size, double timeout_s)
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
    double deadline = hs_exec_now(x) + timeout_s;
    while (rc == 0 && done < n) {
        int idx = -1;
        rc = hs_exec_wait(x, rq, n, HS_MAX(0.001, deadline - hs_exec_now(x)), HS_WAIT_NO_IDLE, &idx,
                          NULL);
        if (rc == 0 && idx >= 0) done++;
    }
    if (rc < 0) hs_error_prefix("rank %d: connecting to every rank at start-up", rank);
    for (int i = 0; i < n; i++)
        if (rq[i]) hs_transport_req_free(t, &rq[i]);
    free(rq);
    free(in);
    return rc;
}

static void close_run(run_t *R)
{
    if (R->ops && R->algo) R->ops->finalize(&R->algo);
    hs_hb_stop(&R->hb); /* (a goodbye: a finished rank is never fenced) */
    hs_rejoin_stop(&R->rj);
    free(R->rejoined);
    free(R->replaced);
    /* (after the services, which record too; the simulator's environment outlives the run) */
    if (R->x) R->x->trace = NULL;
    hs_trace_close(&R->tr);
    hs_evalc_close(&R->ec);
    if (R->esreq) hs_transport_req_free(R->t, &R->esreq);
    free(R->esbuf);
    hs_stage_close(&R->zs);
    free(R->zh);
    if (!R->host_of_borrowed) free(R->host_of);
    if (R->w) hs_model_set_grad_hook(hs_worker_model(R->w), NULL, NULL);
    free(R->glayers);
    free(R->glayer_off);
    free(R->gmark_frac);
    hs_report_close(&R->rep);
    if (!R->topo_borrowed) hs_topo_destroy(&R->topo);
    if (R->own_x) {
        hs_exec_destroy(&R->x);
        hs_transport_close(&R->t);
    }
    hs_worker_close(&R->w);
    hs_straggler_free(&R->strag);
    free(R->failed_at);
    hs_cfg_free(&R->acfg);
}

/* 1 when `ops` declares the option `name`. */
static int algo_declares(const hs_algo_ops_t *ops, const char *name)
{
    for (size_t i = 0; ops->options && i < ops->n_options; i++)
        if (!strcmp(ops->options[i].name, name)) return 1;
    return 0;
}

static void algo_opts(run_t *R)
{
    hs_train_algo_opts(R->o, &R->ao);
}

/* --- a replacement that joins the running job (runtime/rejoin.h) -------------------------- */

/* This rank's state with the donor's training clock at iteration it after it: what a
 * replacement starts from. *buf is allocated. */
static int rejoin_state(run_t *R, long it, unsigned char **buf, size_t *len)
{
    size_t n = hs_ckpt_snapshot_bytes(R->w, R->ops, R->algo);
    *len = n + sizeof(double);
    if (!(*buf = hs_malloc(*len, "state for a replacement"))) return -ENOMEM;
    double clock = hs_exec_now(R->x) - R->t0;
    memcpy(*buf + n, &clock, sizeof clock);
    return hs_ckpt_snapshot(R->w, R->ops, R->algo, it, *buf, n);
}

/* Rank p's replacement asks for this rank's state, at the top of iteration it. */
static int rejoin_donate(run_t *R, int p, long it)
{
    hs_dist_t *d = &R->d;
    unsigned char *buf = NULL;
    size_t len = 0;
    HS_TRY(R->ops->rejoin(R->algo, p, it, HS_REJOIN_DONOR));
    int rc = rejoin_state(R, it, &buf, &len);
    hs_treq_t *req = NULL;
    if (rc == 0) rc = hs_transport_isend(d->t, p, HS_TAG_REJOIN_ST, buf, len, &req);
    if (rc == 0) rc = hs_exec_wait1(R->x, &req, R->o->comm_timeout_s, HS_WAIT_NO_IDLE, NULL);
    if (req) hs_transport_req_free(d->t, &req);
    free(buf);
    if (rc < 0) { /* it gave up waiting: what was split off for it comes back */
        HS_WARN("rank %d: the state for rank %d's replacement did not leave (%s); kept here",
                d->rank, p, hs_last_error());
        hs_error_clear();
        HS_TRY(R->ops->rejoin(R->algo, p, it, HS_REJOIN_UNDO));
    } else if (!R->o->quiet) {
        fprintf(stderr, "rank %d: handed its state at iteration %ld to rank %d's replacement\n",
                d->rank, it, p);
    }
    return 0;
}

/* Rank p is back from iteration first: its failure is forgotten, and the algorithm takes it
 * back (from its own next round). */
static int rejoin_admit(run_t *R, int p, long first)
{
    hs_dist_t *d = &R->d;
    if (p < 0 || p >= d->size || p == d->rank) return 0;
    if (R->failed_at) R->failed_at[p] = -1;
    hs_rejoin_joined(R->rj, p);
    d->rejoins++;
    HS_TRY(R->ops->rejoin(R->algo, p, first, HS_REJOIN_PEER));
    if (R->ec) HS_TRY(hs_evalc_rejoined(R->ec, p, first, R->eval_period));
    if (R->rejoined) R->rejoined[p] = 1;
    return 0;
}

/* The notices that came since the last look: answered at an iteration boundary (it: the
 * iteration about to start). */
static int rejoin_poll(run_t *R, long it)
{
    hs_rejoin_ev_t ev;
    int got;
    while ((got = hs_rejoin_next(R->rj, &ev)) != 0) {
        HS_TRY(got);
        if (ev.kind == HS_RJ_REQ)
            HS_TRY(rejoin_donate(R, ev.rank, it));
        else
            HS_TRY(rejoin_admit(R, ev.rank, ev.iter));
    }
    return 0;
}

/* The candidates for the donor, in order: this rank's out-peers of iteration 0 in the graph
 * (its neighbours), then every other rank from rank + 1 on. */
static int donor_order(run_t *R, int *order)
{
    hs_dist_t *d = &R->d;
    int n = 0, cnt = 0, cap = R->topo ? HS_MAX(1, hs_topo_max_out_degree(R->topo)) : 1;
    double self = 0;
    if (R->topo) {
        int *pe = hs_malloc((size_t)cap * sizeof *pe, "neighbours");
        double *pw = hs_malloc((size_t)cap * sizeof *pw, "weights");
        int rc =
            pe && pw ? hs_topo_out_peers(R->topo, 0, d->rank, pe, pw, cap, &cnt, &self) : -ENOMEM;
        for (int i = 0; i < cnt && rc == 0; i++)
            if (pe[i] != d->rank) order[n++] = pe[i];
        free(pe);
        free(pw);
        HS_TRY(rc);
    }
    for (int k = 1; k < d->size; k++) {
        int p = (d->rank + k) % d->size, seen = 0;
        for (int i = 0; i < n && !seen; i++) seen = order[i] == p;
        if (!seen) order[n++] = p;
    }
    return n;
}

/* This rank is a replacement (hs_exec_t.incarnation > 0): take a live rank's state (a graph
 * neighbour first), start at its iteration, tell every other rank. A replacement that finds
 * nobody to join (every rank finished) ends as the crashed rank it replaces. */
static int rejoin_join(run_t *R)
{
    hs_dist_t *d = &R->d;
    const hs_train_opts_t *o = R->o;
    double t0 = hs_exec_now(R->x);
    size_t n = hs_ckpt_snapshot_bytes(R->w, R->ops, R->algo), len = n + sizeof(double);
    unsigned char *buf = hs_malloc(len, "state from the donor");
    int *order = hs_malloc((size_t)d->size * sizeof *order, "donors");
    int rc = buf && order ? donor_order(R, order) : -ENOMEM, donor = -1;
    /* first, every live rank stops waiting for the process that crashed */
    for (int p = 0; p < d->size && rc > 0; p++)
        if (p != d->rank && hs_exec_alive(R->x, p, 0) &&
            hs_rejoin_notify(R->rj, p, HS_RJ_HELLO, R->x->incarnation, o->comm_timeout_s) < 0)
            hs_error_clear();
    for (int k = 0; rc > 0 && k < rc && donor < 0; k++) {
        int p = order[k];
        if (!hs_exec_alive(R->x, p, 0)) continue;
        hs_treq_t *req = NULL;
        hs_tstatus_t st = {0};
        if (hs_transport_irecv(d->t, p, HS_TAG_REJOIN_ST, buf, len, &req) < 0 ||
            hs_rejoin_notify(R->rj, p, HS_RJ_REQ, R->x->incarnation, o->comm_timeout_s) < 0 ||
            hs_exec_wait1(R->x, &req, o->comm_timeout_s, HS_WAIT_NO_IDLE, &st) < 0 ||
            st.len != len) {
            if (req) hs_transport_req_free(d->t, &req);
            hs_error_clear();
            continue;
        }
        donor = p;
    }
    free(order);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    if (donor < 0) {
        free(buf);
        fprintf(stderr,
                "rank %d: the replacement found no rank to take a state from (every "
                "rank had finished?): it ends as the crashed rank\n",
                d->rank);
        R->x->rejoin_s = -1;
        hs_exec_crash(R->x, HS_EXIT_CRASH); /* (a crashed rank's status) */
    }
    memcpy(&R->clock_at_start, buf + n, sizeof R->clock_at_start);
    rc = hs_ckpt_adopt(buf, n, R->w, R->ops, R->algo, d->total_iters, &R->start);
    free(buf);
    if (rc < 0) {
        hs_error_prefix("rank %d: the state from rank %d", d->rank, donor);
        return rc;
    }
    d->start_iter = R->start;
    HS_TRY(R->ops->rejoin(R->algo, donor, R->start, HS_REJOIN_ADOPT));
    for (int p = 0; p < d->size; p++)
        if (p != d->rank && hs_exec_alive(R->x, p, 0) &&
            hs_rejoin_notify(R->rj, p, HS_RJ_JOINED, R->start, o->comm_timeout_s) < 0) {
            HS_WARN("rank %d: rank %d was not told of the replacement: %s", d->rank, p,
                    hs_last_error());
            hs_error_clear();
        }
    double now = hs_exec_now(R->x), down = now - R->x->crashed_at;
    if (!o->quiet)
        fprintf(stderr,
                "rank %d: a replacement joined at iteration %ld with rank %d's state, %.3f s "
                "after the crash at iteration %ld (%.3f s to take the state)\n",
                d->rank, R->start, donor, down, R->x->crashed_iter, now - t0);
    if (o->out_dir) { /* DIR/rank-R-rejoin.json: what a study reads */
        char path[4096], js[512];
        snprintf(path, sizeof path, "%s/rank-%d-rejoin.json", o->out_dir, d->rank);
        int len = snprintf(js, sizeof js,
                           "{\"rank\": %d, \"incarnation\": %d, \"donor\": %d, "
                           "\"crash_iteration\": %ld, \"iteration\": %ld, \"crash_clock_s\": "
                           "%.9g, \"join_clock_s\": %.9g, \"down_s\": %.9g, \"clock\": \"%s\"}\n",
                           d->rank, R->x->incarnation, donor, R->x->crashed_iter, R->start,
                           R->x->crashed_at, now, down,
                           hs_exec_caps(R->x) & HS_EXEC_VIRTUAL_CLOCK ? "virtual" : "wall");
        HS_TRY(hs_file_write(path, js, (size_t)len, 0));
    }
    return 0;
}

/* Real processes: is this process a replacement for a crashed rank (HS_INCARNATION, set by
 * `hearsay run` for a rank that exited HS_EXIT_REJOIN)? Then it waits until D after the crash
 * (HS_CRASHED_AT: when the launcher saw the exit), as the simulator starts a replacement D
 * after the crash, before it opens its transport: *inc its incarnation, *crashed_at then. */
static int replacement_start(run_t *R, int rank, int *inc, double *crashed_at)
{
    long k = 0;
    double at = 0;
    HS_TRY(hs_env_long("HS_INCARNATION", &k));
    if (k <= 0) return 0;
    long it = hs_straggler_crash_iter(R->strag);
    double d = it >= 0 ? hs_straggler_rejoin(R->strag, it) : -1;
    if (d < 0)
        return HS_ERR(-EINVAL,
                      "rank %d: HS_INCARNATION=%ld says this process replaces a crashed one, but "
                      "--straggler gives rank %d no crash:%d:iter=N:rejoin=D",
                      rank, k, rank, rank);
    int rc = hs_env_double("HS_CRASHED_AT", &at);
    HS_TRY(rc);
    if (rc == 0) at = hs_now();
    double wait = at + d - hs_now();
    if (!R->o->quiet)
        fprintf(stderr,
                "rank %d: replacement %ld of the process that crashed at iteration %ld: it joins "
                "%.3g s after the crash (in %.3f s)\n",
                rank, k, it, d, HS_MAX(0.0, wait));
    if (wait > 0) hs_sleep(wait);
    *inc = (int)k;
    *crashed_at = at;
    return 0;
}

static int setup(run_t *R, hs_boot_t *boot, hs_exec_t *given)
{
    const hs_train_opts_t *o = R->o;
    int rank = hs_boot_rank(boot), size = hs_boot_size(boot);
    R->ops = hs_algo_find(o->algo);
    if (!(o->shared && o->shared->checked)) { /* (the same for every rank of a process) */
        HS_TRY(hs_train_dist_check(o, size));
        if (o->shared) o->shared->checked = 1;
    }
    if (o->trace) HS_TRY(hs_trace_check_path(o->trace)); /* before anything starts */
    /* a one-rank job has nobody to talk to: every algorithm is then plain SGD (all-reduce and
     * local SGD exactly; a gossip graph, an EASGD center, a leader are not built) */
    if ((R->ops->flags & HS_ALGO_COMM) && size == 1) R->ops = &hs_algo_local_ops;
    HS_TRY(hs_straggler_create(&R->strag, o->stragglers, o->n_stragglers, o->seed, rank, size));
    HS_TRY(hs_worker_open_local(&R->w, o, rank, size, hs_boot_local_rank(boot)));
    HS_TRY(hs_worker_perturb(R->w, o->init_spread, o->seed, rank));
    algo_opts(R);
    /* the options of the algorithm asked for (a one-rank job runs local with none) */
    HS_TRY(hs_algo_cfg_create(&R->acfg, &R->acfg_spec, hs_algo_find(o->algo), o->algo_opts,
                              o->n_algo_opts));
    hs_dist_t *d = &R->d;
    hs_model_t *m = hs_worker_model(R->w);
    d->o = &R->ao;
    d->cfg = R->acfg;
    d->k = hs_worker_kernels(R->w);
    d->rank = rank;
    d->size = size;
    d->n = hs_model_num_params(m);
    d->params = hs_model_params(m);
    d->grads = hs_model_grads(m);
    d->loss = NAN;
    d->ctx = R;
    d->apply = d_apply;
    d->use_grads = d_use_grads;
    d->on_grads = d_on_grads;
    HS_TRY(grad_layers_setup(R));
    d->evaluate = d_evaluate;
    d->peer_failed = d_peer_failed;
    d->peer_dead = d_peer_dead;
    d->peer_hb = d_peer_hb;
    d->note_wait = d_note_wait;
    d->peer_blocked = d_peer_blocked;
    d->record = d_record;
    R->ipe = hs_worker_iters_per_epoch(R->w);
    d->total_iters = (long)o->epochs * R->ipe;
    if (o->max_iters > 0 && o->max_iters < d->total_iters) d->total_iters = o->max_iters;
    /* (R->failed_at: allocated at the first failure, failure_table) */
    if (!(R->zh = hs_malloc(d->n * sizeof(float), "host copy of z"))) return -ENOMEM;
    HS_TRY(hs_stage_image_in(&R->zs, d->k, d->params, d->n, R->zh, "model"));
    if (o->shared && o->shared->host_of && o->shared->host_ranks == size) {
        R->host_of = (int *)o->shared->host_of;
        R->host_of_borrowed = 1;
    } else {
        if (!(R->host_of = hs_malloc((size_t)size * sizeof(int), "host map"))) return -ENOMEM;
        for (int r = 0; r < size; r++) R->host_of[r] = hs_boot_host_of(boot, r);
    }
    d->host_of = R->host_of;
    d->n_hosts = hs_boot_num_hosts(boot);
    d->tag_base = HS_TAG_ALGO_BASE; /* the one algorithm that runs takes the whole range */

    int inc = 0; /* > 0: this process replaces a crashed one (hearsay run, real processes) */
    double crashed_at = 0;
    if (!given && size > 1) HS_TRY(replacement_start(R, rank, &inc, &crashed_at));
    if (given) { /* the caller's environment and transport (the simulator's) */
        R->x = given;
        R->t = given->t;
    } else if (size > 1) { /* one worker alone needs no transport */
        hs_transport_opts_t to;
        HS_TRY(hs_transport_opts_default(&to));
        if (o->provider && *o->provider && strcmp(o->provider, "auto")) to.provider = o->provider;
        if (o->link && *o->link) to.shaping = o->link;
        to.progress_thread = o->progress_thread;
        to.timeout_s = o->comm_timeout_s;
        /* the transport's own waits (a blocking send, freeing a send whose buffer a peer may
         * still read) must not give a frozen peer up before the heartbeats fence it: with
         * heartbeats, their bound is the comm timeout plus the fail timeout (the algorithms'
         * waits pass their own bound and consult the heartbeats) */
        if (o->fail_timeout_s > 0) to.timeout_s = o->comm_timeout_s + o->fail_timeout_s;
        to.seed = o->seed;
        to.incarnation = inc;
        HS_TRY(hs_transport_open(&R->t, boot, &to));
    }
    if (!given) {
        R->own_x = 1;
        HS_TRY(hs_exec_threads_create(&R->x, R->t, boot));
        R->x->incarnation = inc;
        R->x->crashed_at = crashed_at;
        R->x->crashed_iter = inc ? hs_straggler_crash_iter(R->strag) : 0;
    }
    d->t = R->t;
    d->x = R->x;
    R->observer = (hs_exec_caps(R->x) & HS_EXEC_OBSERVERS) && !o->sim_eval_traffic;
    if (o->trace) {
        HS_TRY(hs_trace_open(&R->tr, o->trace, R->x, rank, size));
        R->x->trace = R->tr;
        hs_trace_thread(R->tr, "training loop");
    }
    /* (not in virtual time: the simulated transport has no connections to make, and its
     * messages would only take virtual time before the clocks start) */
    if ((R->ops->flags & HS_ALGO_COMM) && size > 1 &&
        !(hs_exec_caps(R->x) & HS_EXEC_VIRTUAL_CLOCK) &&
        !R->x->incarnation) /* (a replacement: the others are past it) */
        HS_TRY(wireup(R->x, R->t, rank, size,
                      o->comm_timeout_s + (given ? 0 : o->fail_timeout_s))); /* (as to.timeout_s) */
    /* Start-up only (before any receive is posted): every rank's clock starts together (a
     * replacement joins a job that started long ago: runtime/rejoin.h) */
    if (size > 1 && !R->x->incarnation) HS_TRY(hs_exec_barrier(R->x));
    HS_TRY(hs_boot_trace_align(boot, R->tr)); /* --trace: every rank's clock against rank 0's */
    if ((R->ops->flags & HS_ALGO_GRAPH) && size > 1) {
        hs_topo_opts_t tpo = {.mixing = (R->ops->flags & HS_ALGO_UNDIRECTED)
                                            ? HS_TOPO_MIX_METROPOLIS
                                            : HS_TOPO_MIX_AUTO};
        hs_train_shared_t *sh = o->shared;
        if (sh && sh->topo && sh->topo_mixing == (int)tpo.mixing && hs_topo_n(sh->topo) == size &&
            !strcmp(hs_topo_spec(sh->topo), o->graph)) {
            R->topo = sh->topo; /* (read-only: every query takes a const topology) */
            R->topo_borrowed = 1;
        } else {
            HS_TRY(hs_topo_create(&R->topo, o->graph, size, o->seed, &tpo));
            if (sh && !sh->topo) { /* the first rank's: the others share it */
                sh->topo = R->topo;
                sh->topo_mixing = (int)tpo.mixing;
                R->topo_borrowed = 1;
            }
        }
        d->topo = R->topo;
    }
    HS_TRY(hs_report_open(&R->rep, o, rank, size, R->ipe, R->x->incarnation > 0 && rank > 0));
    if (size > 1) {
        if (!(R->esbuf = hs_malloc(HS_DIST_FRAME_BYTES + d->n * sizeof(float), "eval buffer")))
            return -ENOMEM;
        if (rank == 0)
            HS_TRY(hs_evalc_open(&R->ec, d, hs_report_avg_csv(R->rep), R->ipe, o->target_loss,
                                 o->target_acc));
        /* heartbeats (wall clock), or their verdict without messages (virtual time, where
         * no process is ever stopped: d_peer_hb) */
        R->virtual_hb = (hs_exec_caps(R->x) & HS_EXEC_VIRTUAL_CLOCK) != 0;
        if (o->fail_timeout_s > 0 &&
            (R->virtual_hb || !(hs_exec_caps(R->x) & HS_EXEC_ONE_PROCESS))) {
            int *vb = NULL;
            double *vba = NULL;
            hs_train_shared_t *sh = o->shared;
            if (R->virtual_hb && sh) { /* (every rank of the job in this process) */
                if (!sh->blocked_on) {
                    sh->blocked_on = hs_malloc((size_t)size * sizeof(int), "blocked waits");
                    sh->blocked_at = hs_calloc((size_t)size, sizeof(double), "blocked waits");
                    if (!sh->blocked_on || !sh->blocked_at) return -ENOMEM;
                    for (int r = 0; r < size; r++) sh->blocked_on[r] = -1;
                }
                vb = sh->blocked_on;
                vba = sh->blocked_at;
            }
            HS_TRY(hs_hb_start(&R->hb, R->x, rank, size, o->fail_timeout_s, vb, vba));
        }
        if (R->ec || R->hb) hs_exec_set_idle(R->x, loop_idle, R);
        int who = -1, any = hs_straggler_any_rejoin(o->stragglers, o->n_stragglers, size, &who);
        if (any < 0) return any;
        if (any && !(hs_exec_caps(R->x) & HS_EXEC_VIRTUAL_CLOCK)) {
            /* real processes: `hearsay run` starts the replacement, hsshm takes it in */
            const char *prov = hs_transport_provider(R->t);
            if (!hs_env_flag("HS_RESPAWN"))
                return HS_ERR(-ENOTSUP,
                              "--straggler crash:%d:...:rejoin=D: with real processes a "
                              "replacement is started by `hearsay run` only (not by mpirun, "
                              "Slurm or hearsay run --rendezvous-only); or run it in virtual "
                              "time with hearsay sim (docs/failure-model.md)",
                              who);
            if (!prov || strcmp(prov, "hsshm"))
                return HS_ERR(-ENOTSUP,
                              "--straggler crash:%d:...:rejoin=D: with real processes a "
                              "replacement joins over --provider hsshm only (every rank on one "
                              "host); this job uses %s (docs/failure-model.md)",
                              who, prov ? prov : "no transport");
        }
        if (any) {
            HS_TRY(hs_rejoin_start(&R->rj, R->x, rank, size));
            R->rejoined = hs_calloc((size_t)size, 1, "rejoined ranks");
            R->replaced = hs_calloc((size_t)size, 1, "replaced ranks");
            if (!R->rejoined || !R->replaced) return -ENOMEM;
            for (int r = 0; r < size; r++)
                R->replaced[r] = hs_straggler_replaced(o->stragglers, o->n_stragglers, size, r) > 0;
        }
    }
    if (o->dump_params) {
        HS_TRY(pull_z(R));
        HS_TRY(hs_report_dump(R->rep, "init", R->zh, d->n));
    }
    HS_TRY(R->ops->init(&R->algo, d));
    if (R->x->incarnation > 0 && size > 1) return rejoin_join(R);
    if (o->resume && *o->resume) {
        int rc = hs_ckpt_load_run(o->resume, rank, size, R->w, R->ops, R->algo, d->total_iters,
                                  &R->start);
        if (rc < 0) {
            hs_error_prefix("--resume %s", o->resume);
            return rc;
        }
        d->start_iter = R->start;
        /* Start-up only: every rank has restored its state (EASGD: its center shard) before
         * any rank's first step can reach it. */
        if (size > 1) HS_TRY(hs_exec_barrier(R->x));
    }
    return 0;
}

/* Rank 0, phase 2 of the sets that took no barrier: the newest pending set whose parts are all
 * in place (each renamed there after its fsync; the manifest's commit syncs the directory) is
 * committed, and it and the older pending ones are done with. No-op while each pending set
 * lacks a part (a slower rank; a rank that failed before writing it: never). */
static int ckpt_try_commit(run_t *R)
{
    for (int i = R->n_pending - 1; i >= 0; i--) {
        long it = R->ckpt_pending[i];
        int whole = 1;
        for (int r = 0; r < R->d.size && whole; r++) {
            char path[4096];
            HS_TRY(hs_ckpt_part_path(path, sizeof path, R->o->out_dir, r, it));
            whole = access(path, F_OK) == 0;
        }
        if (!whole) continue;
        int left = R->n_pending - i - 1;
        memmove(R->ckpt_pending, R->ckpt_pending + i + 1, (size_t)left * sizeof(long));
        R->n_pending = left;
        int rc = hs_ckpt_set_commit(R->o->out_dir, R->d.size, it);
        if (rc < 0) hs_error_prefix("rank 0: checkpoint at iteration %ld", it);
        return rc;
    }
    return 0;
}

/* A checkpoint after `done` iterations: DIR/ckpt/rank-R.it-DONE.bin on every rank, then (rank
 * 0, after a barrier) DIR/ckpt/set-DONE.manifest. Every rank takes it at the same iteration. A
 * push-sum algorithm first receives every message of the iterations before the cut (bounded by the
 * drain timeout) and waits for every rank to have saved before going on, so the checkpoints hold
 * all the mass exactly once (the sum of the weights is N); the others drain as before an
 * evaluation. */
static int checkpoint_point(run_t *R, long done)
{
    double t0 = hs_exec_now(R->x);
    hs_trace_begin(R->tr, HS_TR_CHECKPOINT, done);
    double c0 = R->d.st.comm_s, w0 = R->d.st.wait_s; /* (the cut's time is eval_s) */
    if (R->ops->flags & HS_ALGO_PUSHSUM) {
        R->d.drain_until = done;
        int rc = R->ops->drain(R->algo, 1);
        R->d.drain_until = 0;
        HS_TRY(rc);
    } else {
        HS_TRY(R->ops->drain(R->algo, 0));
    }
    /* Phase 1: this rank's part, synced (hs_ckpt_write). */
    int rc = hs_ckpt_save_run(R->o->out_dir, R->d.rank, R->d.size, done, R->w, R->ops, R->algo);
    int all = 1;
    for (int r = 0; r < R->d.size && R->failed_at; r++) all = all && R->failed_at[r] < 0;
    if (rc == 0 && (R->ops->flags & HS_ALGO_PUSHSUM)) {
        /* A push-sum cut also needs that no rank sends a message of round `done` before every
         * rank has saved (a slower rank would fold it into its checkpoint, and the resumed
         * sender would send it again): a barrier, the one of such a run. Past it every part is
         * durable, and rank 0 commits the set at once (phase 2). A job with a failed rank
         * cannot complete a set: its parts are written, no manifest. */
        if (R->d.size > 1 && (rc = hs_exec_barrier(R->x)) < 0)
            hs_error_prefix("rank %d: checkpoint at iteration %ld", R->d.rank, done);
        if (rc == 0 && all && R->d.rank == 0) {
            rc = hs_ckpt_set_commit(R->o->out_dir, R->d.size, done);
            if (rc < 0) hs_error_prefix("rank 0: checkpoint at iteration %ld", done);
        }
    } else if (rc == 0 && R->d.rank == 0) {
        /* The others take no barrier (a tolerant one would stop at a rank that failed since):
         * rank 0 commits the set once every rank's part is there (ckpt_try_commit: checked
         * after each iteration and after the final gather; a rank that failed after writing
         * its part leaves a complete set). */
        if (R->n_pending == CKPT_PENDING) {
            memmove(R->ckpt_pending, R->ckpt_pending + 1, (CKPT_PENDING - 1) * sizeof(long));
            R->n_pending--;
        }
        R->ckpt_pending[R->n_pending++] = done;
        rc = ckpt_try_commit(R);
    }
    R->d.st.comm_s = c0;
    R->d.st.wait_s = w0;
    R->eval_s += hs_exec_now(R->x) - t0;
    hs_trace_end(R->tr, HS_TR_CHECKPOINT);
    return rc;
}

/* Hand the model after `done` iterations to the environment when it watches (hearsay sim),
 * and to DIR/rank-R.traj.f32 with --dump-trajectory. */
static int observe(run_t *R, long done)
{
    int traj = R->o->dump_trajectory;
    if (!R->x->ops->observe && !traj) return 0;
    HS_TRY(hs_stage_pull(&R->zs)); /* on the CPU, z is host memory already: no copy */
    const float *z = hs_stage_host(&R->zs);
    if (R->x->ops->observe) R->x->ops->observe(R->x, done, z, R->d.n);
    /* --dump-trajectory: the parameters at the start and after every iteration */
    if (traj) HS_TRY(hs_report_trajectory(R->rep, done == R->start, z, R->d.n));
    return 0;
}

/* The injected crash at the start of iteration `it`: no drain, no goodbye, and a failure
 * status, so the launcher reports it (`hearsay run --keep-going` lets the survivors run on).
 * A push-sum algorithm first settles its own sends and stops receiving (hs_algo_ops_t.crash),
 * and the weight the rank takes with it is written down (a last row of rank-R.csv and
 * DIR/rank-R-lost.json, which rank 0 adds to summary.json as ps_weight_lost). */
static void crash_now(run_t *R, long it) __attribute__((noreturn));
static void crash_now(run_t *R, long it)
{
    hs_dist_t *d = &R->d;
    /* wall clock: _exit (with rejoin=D, 72 asks hearsay run for a replacement); virtual time:
     * the rank ends, and the simulator starts its replacement */
    int real = !(hs_exec_caps(R->x) & HS_EXEC_VIRTUAL_CLOCK);
    double rejoin_s = hs_straggler_rejoin(R->strag, it);
    int status = real && rejoin_s >= 0 ? HS_EXIT_REJOIN : HS_EXIT_CRASH;
    fprintf(stderr,
            "rank %d: injected crash at iteration %ld (--straggler crash): exiting with status "
            "%d\n",
            d->rank, it, status);
    fflush(NULL);
    double lost = 0, *from = calloc((size_t)d->size, sizeof *from);
    if (R->ops->crash && R->algo && d->t && from) {
        if (R->ops->crash(R->algo, &lost, from) < 0)
            fprintf(stderr, "rank %d: settling before the crash: %s\n", d->rank, hs_last_error());
        hs_report_crash_t c = {
            .done = it, .clock_s = clock_of(R), .lost = lost, .recv_from = from, .size = d->size};
        if (hs_report_crash(R->rep, &c) < 0)
            fprintf(stderr, "rank %d: recording the crash: %s\n", d->rank, hs_last_error());
    }
    free(from);
    fflush(NULL);
    R->x->rejoin_s = rejoin_s;
    R->x->crashed_at = hs_exec_now(R->x);
    R->x->crashed_iter = it;
    hs_exec_crash(R->x, status);
}

/* A fenced rank (runtime/heartbeat.h) ends like an injected crash, with its own status and
 * message: its sends settled, nothing more received, the weight it takes written down
 * (DIR/rank-R-lost.json), so that the survivors' weights + the lost = N. */
static void fence_exit(run_t *R) __attribute__((noreturn));
static void fence_exit(run_t *R)
{
    hs_dist_t *d = &R->d;
    char why[200];
    hs_hb_why(R->hb, d->rank, why, sizeof why);
    fprintf(stderr,
            "rank %d: fenced at iteration %ld (%s): its messages are refused; exiting with "
            "status %d\n",
            d->rank, R->done, why, HS_EXIT_FENCED);
    fflush(NULL);
    double lost = 0, *from = calloc((size_t)d->size, sizeof *from);
    if (R->ops->crash && R->algo && d->t && from) {
        if (R->ops->crash(R->algo, &lost, from) < 0)
            fprintf(stderr, "rank %d: settling before the exit: %s\n", d->rank, hs_last_error());
        hs_report_crash_t c = {.done = R->done,
                               .clock_s = clock_of(R),
                               .lost = lost,
                               .recv_from = from,
                               .size = d->size};
        if (hs_report_crash(R->rep, &c) < 0)
            fprintf(stderr, "rank %d: recording the fence: %s\n", d->rank, hs_last_error());
    }
    free(from);
    fflush(NULL);
    R->x->rejoin_s = -1;
    hs_exec_crash(R->x, HS_EXIT_FENCED);
}

/* The injected freeze (--straggler freeze): the whole process stops (SIGSTOP, every thread),
 * and a helper process sends SIGCONT after `secs` (INFINITY: never). Wall clock only. */
static int freeze_now(run_t *R, long it, double secs)
{
    int virt = (hs_exec_caps(R->x) & HS_EXEC_ONE_PROCESS) != 0;
    if (virt && !R->x->ops->freeze)
        return HS_ERR(-ENOTSUP, "--straggler freeze: this environment cannot freeze a rank");
    if (isinf(secs))
        fprintf(stderr,
                "rank %d: injected freeze at iteration %ld, for good (--straggler freeze)\n",
                R->d.rank, it);
    else
        fprintf(stderr,
                "rank %d: injected freeze at iteration %ld for %.3g s (--straggler freeze)\n",
                R->d.rank, it, secs);
    fflush(NULL);
    if (virt) { /* the simulator stops the rank's threads (hearsay/exec.h) */
        HS_TRY(R->x->ops->freeze(R->x, secs));
        hs_hb_stopped(R->hb, secs); /* (longer than the fail timeout: fenced, told) */
        return 0;
    }
    pid_t me = getpid();
    if (!isinf(secs)) {
        pid_t c = fork();
        if (c < 0) return HS_ERR(-errno, "--straggler freeze: fork: %s", strerror(errno));
        if (c == 0) { /* the helper: async-signal-safe calls only */
            struct timespec ts = {.tv_sec = (time_t)secs,
                                  .tv_nsec = (long)((secs - (double)(time_t)secs) * 1e9)};
            while (nanosleep(&ts, &ts) != 0) {
            }
            kill(me, SIGCONT);
            _exit(0);
        }
    }
    raise(SIGSTOP);
    return 0;
}

/* Health figures of one iteration (or of the final drain): the weight's range, the staleness
 * of what was applied, the time alone; the warning once when the weight leaves its range. */
static void account_health(run_t *R, double w, double span_s)
{
    hs_dist_t *d = &R->d;
    hs_rank_final_t *h = &R->tot;
    if (w < h->w_min) h->w_min = w;
    if (w > h->w_max) h->w_max = w;
    if (d->st.stale_n > 0) {
        for (int b = 0; b < HS_STALE_BINS; b++) h->stale_hist[b] += d->st.stale_hist[b];
        if ((double)d->st.stale_max > h->stale_max) h->stale_max = (double)d->st.stale_max;
        if ((double)d->st.stale_min < h->stale_min) h->stale_min = (double)d->st.stale_min;
    }
    if (d->st.msgs_applied == 0 && (R->ops->flags & HS_ALGO_COMM) && d->size > 1)
        h->alone_s += span_s;
    if (!R->warned_w && !(w >= W_WARN_LO && w <= W_WARN_HI)) {
        R->warned_w = 1;
        h->w_out_iter = (double)(d->iter + 1);
        h->w_out_w = w;
        HS_WARN("rank %d: push-sum weight %.3g at iteration %ld left [1e-2, 1e2]: messages from "
                "later rounds mixed (asynchronous or bounded delay) or a starved in-peer (try "
                "--delay-bound 0; docs/algorithms.md, \"Health\")",
                d->rank, w, d->iter + 1);
    }
}

/* The gradient: local work (hs_exec_local), which the simulator may run beside other ranks'. */
typedef struct grad_job {
    hs_worker_t *w;
    double loss;
    int correct, nb;
} grad_job_t;

static int grad_fn(void *ctx)
{
    grad_job_t *g = ctx;
    return hs_worker_grad(g->w, &g->loss, &g->correct, &g->nb);
}

/* One iteration (t): crash check, gradient, injected sleep, the algorithm's step, its row. */
static int iteration(run_t *R, long it, double *loss_out)
{
    hs_dist_t *d = &R->d;
    if (!R->x->incarnation && hs_straggler_crash(R->strag, it)) crash_now(R, it);
    if (R->rj) HS_TRY(rejoin_poll(R, it));
    double frz = hs_straggler_freeze(R->strag, it);
    if (frz > 0) HS_TRY(freeze_now(R, it, frz));
    if (R->hb) { /* fenced here or fenced others: before anything is sent */
        if (hs_hb_state(R->hb, d->rank) == HS_HB_FENCED) fence_exit(R);
        for (int q; (q = hs_hb_next_fenced(R->hb)) >= 0;) {
            char why[200];
            hs_hb_why(R->hb, q, why, sizeof why);
            d_peer_failed(R, q, it, why);
        }
    }
    hs_trace_begin(R->tr, HS_TR_ITERATION, it);
    double ts = hs_exec_now(R->x), lr = hs_worker_lr(R->w), counted;
    /* the gradient's time on this environment's clock (virtual time: its compute model) */
    grad_job_t g = {.w = R->w};
    hs_trace_begin(R->tr, HS_TR_COMPUTE, 0);
    if (R->grads_fn && hs_exec_has_local_marks(R->x)) /* virtual time: notified on its clock */
        HS_TRY(hs_exec_local_marks(R->x, grad_fn, &g, R->gmark_frac, R->d.n_glayers, grad_mark, R,
                                   &counted));
    else
        HS_TRY(hs_exec_local(R->x, grad_fn, &g, &counted));
    hs_trace_end(R->tr, HS_TR_COMPUTE);
    double loss = g.loss;
    int correct = g.correct, nb = g.nb;
    if (!isfinite(loss)) {
        /* push-sum with the step on x moves z by lr / w: say so when w has fallen */
        double w = hs_algo_weight(R->ops, R->algo), wmin = R->tot.w_min;
        /* for rank 0's summary (health: failed), before this rank stops */
        if (hs_report_diverged(R->rep, it, loss, w) < 0) hs_error_clear();
        /* the algorithm's own advice (push-sum with the step on x: w has fallen) */
        char hint[512];
        if (R->ops->diverged_hint && R->ops->diverged_hint(R->algo, d, wmin, hint, sizeof hint))
            return HS_ERR(-ERANGE,
                          "rank %d: training diverged: loss is %g at iteration %ld (lr %g%s",
                          d->rank, loss, it, lr, hint);
        return HS_ERR(-ERANGE,
                      "rank %d: training diverged: loss is %g at iteration %ld (lr %g); try a "
                      "smaller --lr",
                      d->rank, loss, it, lr);
    }
    d->iter = it;
    d->loss = loss;
    double grad_s = hs_exec_now(R->x) - ts;
    double delay = hs_straggler_delay(R->strag, it, grad_s);
    if (delay > 0) {
        hs_trace_begin(R->tr, HS_TR_STRAGGLER, 0);
        HS_TRY(hs_exec_sleep(R->x, delay));
        hs_trace_end(R->tr, HS_TR_STRAGGLER);
    }
    hs_trace_begin(R->tr, HS_TR_STEP, 0);
    HS_TRY(R->ops->step(R->algo, it));
    hs_trace_end(R->tr, HS_TR_STEP);
    /* Every second of the training clock is in one column of one row: compute is what the
     * others leave since the last row (the gradient, the local optimizer step, the loop's own
     * work between iterations), so each row's columns add up to its clock's step and the
     * columns' sums to the clock. Communication counted while another thread waited or
     * computed (a service) may overlap: the overlap comes off wait, then comm. */
    double clk = clock_of(R);
    double compute = (clk - R->row_clock) - d->st.comm_s - d->st.wait_s - delay;
    if (compute < 0) {
        double over = -compute, cut = HS_MIN(over, d->st.wait_s);
        d->st.wait_s -= cut;
        d->st.comm_s -= HS_MIN(over - cut, d->st.comm_s);
        compute = 0;
    }
    R->row_clock = clk;
    R->tot.compute_s += compute;
    R->tot.comm_s += d->st.comm_s;
    R->tot.wait_s += d->st.wait_s;
    R->tot.straggle_s += delay;
    R->tot.msgs += (double)d->st.msgs_applied;
    R->tot.bytes_sent += (double)d->st.bytes_sent;
    R->tot.bytes_recv += (double)d->st.bytes_recv;
    double w = hs_algo_weight(R->ops, R->algo);
    account_health(R, w, hs_exec_now(R->x) - ts);
    hs_report_iter_t row = {.done = it + 1,
                            .clock_s = clk,
                            .loss = loss,
                            .acc = nb ? (double)correct / nb : NAN,
                            .lr = lr,
                            .compute_s = compute,
                            .straggle_s = delay,
                            .w = w,
                            .st = &d->st,
                            .wait_total_s = R->tot.wait_s};
    HS_TRY(hs_report_iteration(R->rep, &row));
    HS_TRY(observe(R, it + 1));
    /* (an evaluation's drain: its messages and bytes are counted in the next row, its time is
     * the evaluation's) */
    memset(&d->st, 0, sizeof d->st);
    *loss_out = loss;
    hs_trace_end(R->tr, HS_TR_ITERATION);
    return 0;
}

/* Rank 0, before the summary: a rank that sent no results and still runs (same host) may be
 * writing down the weight it takes (crash_now): let it exit first (bounded), so that its
 * DIR/rank-R-lost.json is complete when the summary reads it. */
/* The backend of the job's same-host (same 1) or other-host pairs; NULL when it has none. */
static const char *pair_transport(const run_t *R, int size, int same)
{
    if (!R->t || size < 2) return NULL;
    /* (in O(size): other-host pairs when the ranks are on several hosts; same-host pairs when
     * some host has two ranks) */
    int found = 0;
    if (!same) {
        for (int a = 1; a < size && !found; a++) found = R->host_of[a] != R->host_of[0];
    } else {
        int nh = 0;
        for (int a = 0; a < size; a++) nh = HS_MAX(nh, R->host_of[a] + 1);
        unsigned char *seen = hs_calloc((size_t)nh, 1, "hosts seen");
        if (!seen) return NULL;
        for (int a = 0; a < size && !found; a++) {
            found = seen[R->host_of[a]];
            seen[R->host_of[a]] = 1;
        }
        free(seen);
    }
    return found ? hs_transport_pair_provider(R->t, same) : NULL;
}

static void await_failed_exit(run_t *R, const hs_rank_final_t *all)
{
    if (!R->t || !R->o->out_dir) return;
    double t0 = hs_exec_now(R->x);
    for (int q = 0; q < R->d.size; q++) {
        if (q == R->d.rank || all[q].present || failed_of(R, q) < 0) continue;
        /* a fenced rank may be frozen still: it writes its record when it wakes (bounded by
         * --drain-timeout; one that wakes later leaves ps_weight_unreported instead) */
        double until =
            t0 + (hs_hb_state(R->hb, q) == HS_HB_FENCED ? HS_MAX(3.0, R->o->drain_timeout_s) : 3.0);
        while (hs_transport_peer_gone(R->t, q) == 0 && hs_exec_now(R->x) < until)
            hs_exec_sleep(R->x, 0.01);
    }
}

/* End of the run: the final drain and evaluation, the gather on rank 0, the summary. */
static int finish(run_t *R, hs_train_result_t *r, long eval_period)
{
    const hs_train_opts_t *o = R->o;
    hs_dist_t *d = &R->d;
    long T = R->done;
    double td = hs_exec_now(R->x), train_end = td - R->t0 - R->eval_s;
    R->tot.compute_s += train_end - R->row_clock; /* (the loop's own work after the last row) */
    memset(&d->st, 0, sizeof d->st);
    if (R->rj) HS_TRY(rejoin_poll(R, T)); /* (a replacement that came late: it starts at T) */
    HS_TRY(R->ops->drain(R->algo, 1));    /* nothing in flight, nothing lost */
    double te = hs_exec_now(R->x), drain_s = te - td;
    /* the drain's time: its communication, and waiting for the rest */
    R->tot.comm_s += HS_MIN(d->st.comm_s, drain_s);
    R->tot.wait_s += drain_s - HS_MIN(d->st.comm_s, drain_s);
    R->tot.msgs += (double)d->st.msgs_applied;
    R->tot.bytes_sent += (double)d->st.bytes_sent; /* the final drain's, in no row */
    R->tot.bytes_recv += (double)d->st.bytes_recv;
    double tl, tacc, w = hs_algo_weight(R->ops, R->algo);
    account_health(R, w, 0);
    R->tot.iters = (double)T;
    if (R->observer) hs_exec_uncounted(R->x, 1);
    int erc = hs_worker_evaluate(R->w, NULL, &tl, &tacc);
    if (R->observer) hs_exec_uncounted(R->x, 0);
    HS_TRY(erc);
    /* this rank's run: its time columns add up to it (the final gather's waits are not in it) */
    double tw = hs_exec_now(R->x);
    R->tot.eval_s = R->eval_s + (tw - te);
    R->tot.wall_s = tw - R->t0;
    if (hit_target(o, tl, tacc) && !isfinite(R->ttt)) R->ttt = train_end;
    HS_TRY(pull_z(R));
    if (o->dump_params) HS_TRY(hs_report_dump(R->rep, "final", R->zh, d->n));
    HS_TRY(hs_report_eval(R->rep, T, train_end, tl, tacc, w));
    R->tot.weight = w;
    R->tot.test_loss = tl;
    R->tot.test_acc = tacc;
    R->tot.ttt_s = R->ttt;
    R->tot.clock_s = train_end;
    R->tot.scale_skips = (double)hs_worker_scale_skips(R->w);
    R->tot.loss_scale = (double)hs_worker_loss_scale(R->w);
    /* (under --time-budget every rank evaluated at its own points: the rounds are what came) */
    long rounds = eval_period > 0 && !(o->time_budget_s > 0)
                      ? (T - 1) / eval_period - R->start / eval_period
                      : 0;
    /* An observer's snapshots are all in by the time their senders' results are (they were
     * sent first, and cost nothing): collected after the gather, so that waiting for them
     * delays no acknowledgement and no rank's end. */
    if (R->ec && !R->observer) HS_TRY(hs_evalc_finish(R->ec, rounds, o->drain_timeout_s));
    /* (every rank's results: rank 0 gathers them; the others hold their own) */
    hs_rank_final_t *all =
        hs_calloc(d->rank == 0 ? (size_t)d->size : 1, sizeof *all, "per-rank results");
    if (!all) return -ENOMEM;
    hs_avg_eval_t avg = {0};
    int rc = 0;
    if (R->rj && (rc = rejoin_poll(R, T)) < 0) {
        free(all);
        return rc;
    }
    if (d->size > 1) {
        rc = hs_final_gather(d, R->zh, &R->tot, all, &avg);
        /* every rank that is still there has ended its loop, its parts written */
        if (rc == 0 && R->n_pending) rc = ckpt_try_commit(R);
    } else {
        all[0] = R->tot;
        all[0].present = 1;
        avg = (hs_avg_eval_t){.iteration = T,
                              .ranks = 1,
                              .clock_s = train_end,
                              .test_loss = tl,
                              .test_acc = tacc,
                              .rank_loss_mean = tl,
                              .rank_loss_min = tl,
                              .rank_loss_max = tl,
                              .rank_acc_mean = tacc};
    }
    double wall = hs_exec_now(R->x) - R->t0, trained = 0;
    if (rc == 0 && R->ec && R->observer) {
        hs_exec_uncounted(R->x, 1);
        rc = hs_evalc_finish(R->ec, rounds, o->drain_timeout_s);
        hs_exec_uncounted(R->x, 0);
    }
    for (int q = 0; q < d->size && d->rank == 0; q++)
        if (all[q].present) trained += all[q].iters - (double)R->start;
    r->iterations = T;
    r->epochs = (double)T / (double)R->ipe;
    r->wall_s = wall;
    r->samples_per_s =
        (d->rank == 0 ? trained : (double)(T - R->start) * d->size) * o->batch / wall;
    /* the averaged model's first evaluation at the target (eval.csv's rows in iteration
     * order, the final one included), at its clock_s */
    double ttt_avg = R->ec ? hs_evalc_ttt(R->ec) : R->ttt_avg;
    if (!isfinite(ttt_avg) && hit_target(o, avg.test_loss, avg.test_acc)) ttt_avg = avg.clock_s;
    if (rc == 0 && d->rank == 0 && !failure_table(R)) rc = -ENOMEM; /* (the summary's) */
    char *algo_json = NULL; /* the algorithm's own summary members */
    size_t algo_json_len = 0;
    if (rc == 0 && d->rank == 0 && R->ops->summary) {
        FILE *af = open_memstream(&algo_json, &algo_json_len);
        if (!af) rc = HS_ERR(-ENOMEM, "the algorithm's summary");
        if (af && (rc = R->ops->summary(R->acfg, af)) < 0) hs_error_prefix("summary.json");
        if (af) fclose(af);
    }
    if (rc == 0 && d->rank == 0) {
        await_failed_exit(R, all);
        hs_report_final_t fi = {
            .algo = R->ops->name,
            .clock = hs_exec_caps(R->x) & HS_EXEC_VIRTUAL_CLOCK ? "virtual" : "wall",
            .messages = d->msg_compress[0] ? d->msg_compress : "float32",
            .graph = R->topo ? hs_topo_spec(R->topo) : NULL,
            .transport = R->t ? hs_transport_provider(R->t) : NULL,
            .transport_intra = pair_transport(R, d->size, 1),
            .transport_inter = pair_transport(R, d->size, 0),
            .tau = algo_declares(R->ops, "tau") ? (int)hs_cfg_int(R->acfg, "tau") : 1,
            .progress_thread = R->t ? o->progress_thread : 0,
            .num_params = d->n,
            .iterations = T,
            .time_budget_s = o->time_budget_s,
            .algo_json = algo_json,
            .wall_s = wall,
            .ttt_avg_s = ttt_avg,
            .avg_nonfinite = R->ec ? hs_evalc_nonfinite(R->ec) : -1,
            .samples_per_s = r->samples_per_s,
            .bayes_acc = r->bayes_acc,
            .all = all,
            .avg = &avg,
            .failed_at = R->failed_at,
            .rejoined = R->rejoined};
        rc = hs_report_finish(R->rep, &fi, r);
        free(algo_json);
        algo_json = NULL;
    } else if (rc == 0) {
        r->final_test_loss = tl;
        r->final_test_acc = tacc;
        r->ps_weight_sum = w;
        r->time_to_target_s = R->ttt;
    }
    free(algo_json);
    free(all);
    return rc;
}

/* --trace, at the end of a run that succeeded: stop the algorithm's services (they record
 * too), write this rank's part, and on rank 0 of a real job merge every rank's part into
 * FILE (the simulator's caller merges after the run: its ranks share this process). */
static int trace_end(run_t *R)
{
    if (!R->tr) return 0;
    if (R->ops && R->algo) R->ops->finalize(&R->algo);
    /* The heartbeat service records its sends too: it stops (with its goodbye: the results are
     * in, nobody waits on this rank any more) before the trace it writes into is freed. It
     * used to run on, and its next heartbeat wrote into the freed trace (seen: "malloc():
     * unsorted double linked list corrupted", a SIGSEGV in hs_trace_thr_ev, during rank 0's
     * merge of a 4-rank --trace run on 2 emulated hosts). */
    hs_hb_stop(&R->hb);
    R->x->trace = NULL;
    HS_TRY(hs_trace_write_part(R->tr));
    hs_trace_close(&R->tr);
    if (R->d.rank != 0 || (hs_exec_caps(R->x) & HS_EXEC_ONE_PROCESS)) return 0;
    unsigned char *skip = hs_calloc((size_t)R->d.size, 1, "trace merge");
    if (!skip) return -ENOMEM;
    for (int q = 0; q < R->d.size; q++) skip[q] = failed_of(R, q) >= 0;
    int rc = hs_trace_merge_run(R->o->trace, R->d.size, skip, R->o->drain_timeout_s);
    free(skip);
    return rc;
}

int hs_train(const hs_train_opts_t *o, hs_boot_t *boot, hs_train_result_t *res)
{
    return hs_train_in(o, boot, NULL, res);
}

int hs_train_in(const hs_train_opts_t *o, hs_boot_t *boot, hs_exec_t *x, hs_train_result_t *res)
{
    run_t R = {.o = o, .ttt = NAN, .ttt_avg = NAN};
    hs_train_result_t r = {.time_to_target_s = NAN,
                           .time_to_target_avg_s = NAN,
                           .final_test_loss = NAN,
                           .final_test_acc = NAN,
                           .final_train_loss = NAN};
    hs_dist_t *d = &R.d;
    int rc = setup(&R, boot, x);
    if (rc < 0) goto out;
    long ipe = R.ipe, T = d->total_iters;
    long eval_period = o->eval_every > 0 ? (long)llround(o->eval_every * (double)ipe) : 0;
    if (o->eval_every > 0 && eval_period < 1) eval_period = 1;
    long ckpt_period =
        o->checkpoint_every > 0 ? HS_MAX(1L, (long)llround(o->checkpoint_every * (double)ipe)) : 0;
    r.num_params = d->n;
    r.ranks = d->size;
    const hs_dataset_t *tr = hs_worker_train_set(R.w), *te = hs_worker_test_set(R.w);
    r.bayes_acc = te->bayes_acc;
    hs_report_start_t banner = {.algo = R.ops->name,
                                .graph = R.topo ? hs_topo_spec(R.topo) : NULL,
                                .transport = R.t ? hs_transport_provider(R.t) : NULL,
                                .ranks = d->size,
                                .num_params = d->n,
                                .train_n = (long)tr->n,
                                .test_n = (long)te->n,
                                .ipe = ipe,
                                .total = T,
                                .start = R.start,
                                .classes = tr->classes,
                                .bayes_acc = r.bayes_acc};
    hs_report_banner(R.rep, &banner);
    if ((rc = observe(&R, R.start)) < 0) goto out;
    R.t0 = hs_exec_now(R.x) - R.clock_at_start; /* (a replacement: the job's clock) */
    R.row_clock = R.clock_at_start;
    R.eval_period = eval_period;
    R.done = R.start;
    R.tot.w_min = INFINITY;
    R.tot.w_max = -INFINITY;
    R.tot.stale_max = -INFINITY;
    R.tot.stale_min = INFINITY;
    R.tot.w_out_iter = -1;
    double epoch_loss = 0;
    long epoch_batches = 0;
    for (long it = R.start; it < T; it++) {
        /* --time-budget: every rank stops at the same time from the start, wherever it is */
        if (o->time_budget_s > 0 && hs_exec_now(R.x) - R.t0 >= o->time_budget_s) {
            if (epoch_batches) R.tot.train_loss = epoch_loss / (double)epoch_batches;
            break;
        }
        double loss = 0;
        if ((rc = iteration(&R, it, &loss)) < 0) goto out;
        epoch_loss += loss;
        epoch_batches++;
        long done = it + 1;
        R.done = done;
        if (done % ipe == 0 || done == T) {
            R.tot.train_loss = epoch_loss / (double)epoch_batches;
            epoch_loss = 0;
            epoch_batches = 0;
        }
        if (eval_period > 0 && done % eval_period == 0 && done < T &&
            (rc = evaluate_point(&R, done)) < 0)
            goto out;
        if (ckpt_period > 0 && done % ckpt_period == 0 && done < T &&
            (rc = checkpoint_point(&R, done)) < 0)
            goto out;
        if (R.n_pending && (rc = ckpt_try_commit(&R)) < 0) goto out;
        if (R.ec) {
            double te0 = hs_exec_now(R.x);
            if ((rc = evalc_poll(&R)) < 0) goto out;
            R.eval_s += hs_exec_now(R.x) - te0;
        }
    }
    hs_trace_begin(R.tr, HS_TR_FINISH, R.done);
    rc = finish(&R, &r, eval_period);
    hs_trace_end(R.tr, HS_TR_FINISH);
    if (rc == 0) rc = trace_end(&R);
out:
    if (rc < 0 && R.hb && hs_hb_state(R.hb, R.d.rank) == HS_HB_FENCED) fence_exit(&R);
    close_run(&R);
    if (rc == 0 && res) *res = r;
    return rc;
}
