/*
 * runtime/dist.h — internals shared by the training loop (train.c) and its evaluation side
 * (dist_eval.c): the averaged model and consensus distance are computed on
 * rank 0 from z snapshots the ranks push to it, without any barrier.
 */
#ifndef HEARSAY_RUNTIME_DIST_H
#define HEARSAY_RUNTIME_DIST_H

#include "hearsay/algo.h"

#include <stdio.h>

typedef struct hs_evalc hs_evalc_t;

struct hs_train_opts;
/* The algorithm's options from hearsay train's (runtime/train_check.c). */
void hs_train_algo_opts(const struct hs_train_opts *o, hs_algo_opts_t *ao);

/* One rank's end-of-run figures (rank 0 gathers everyone's). */
typedef struct hs_rank_final {
    int present;   /* 1: this rank's results arrived */
    double weight; /* push-sum weight */
    double test_loss, test_acc, ttt_s, train_loss, clock_s;
    double compute_s, comm_s, wait_s, straggle_s, msgs;
    /* evaluations and checkpoints (the final evaluation included), and this rank's run from
     * the start to its final evaluation: compute_s + comm_s + wait_s + straggle_s + eval_s */
    double eval_s, wall_s;
    /* the push-sum weight first outside [1e-2, 1e2]: after that many iterations (-1: never),
     * and its value then */
    double w_out_iter, w_out_w;
    double dist; /* ||z_i - mean z|| (rank 0 computes it when z_i arrives) */
    /* health (docs/algorithms.md, "Health"): the push-sum weight's range over the run (after
     * every round and at the end), iterations trained (the last one's number + 1), time of the
     * iterations in which nothing was applied, and the staleness of every applied message */
    double w_min, w_max, iters, alone_s;
    double stale_min, stale_max;      /* signed; +INFINITY, -INFINITY: no message */
    double stale_hist[HS_STALE_BINS]; /* hs_dist_stats_t.stale_hist summed (bin - HS_STALE_OFF) */
    /* bytes_sent / bytes_recv over the run, the final drain's included (rank-R.csv's rows
     * end before it) */
    double bytes_sent, bytes_recv;
    /* loss scaling (mixed precision): steps skipped for an inf/nan gradient, the scale at the
     * end (1: off) */
    double scale_skips, loss_scale;
} hs_rank_final_t;

/* aux[] slots of the EVAL and FINAL messages (hs_dist_frame_t.aux, hearsay/algo.h). */
enum hs_ps_aux {
    HS_AUX_NORM2 = 0, /* ||z||^2 (double accumulation) */
    HS_AUX_LOSS = 1,  /* the sender's own test loss at this point */
    HS_AUX_ACC = 2,   /* its test accuracy */
    HS_AUX_CLOCK = 3, /* its training clock (s) */
    HS_AUX_TTT = 4,   /* FINAL: its time to target (NaN: not reached) */
    HS_AUX_TRAIN = 5, /* FINAL: its mean training loss over the last epoch */
    HS_AUX_COMP = 6,  /* FINAL: total compute seconds */
    HS_AUX_COMM = 7,  /* FINAL: total communication seconds */
    HS_AUX_WAIT = 8,  /* FINAL: total waiting seconds */
    HS_AUX_STRAG = 9, /* FINAL: total injected straggler seconds */
    HS_AUX_MSGS = 10, /* FINAL: messages applied */
};

/* The values of hs_rank_final_t's health that travel in the FINAL message (after the failure
 * reports): w_min, w_max, iters, alone_s, stale_max, bytes_sent, bytes_recv, stale_min, stale_hist.
 */
#define HS_HEALTH_DOUBLES (8 + HS_STALE_BINS)
/* ... and after them: eval_s, wall_s, w_out_iter, w_out_w, scale_skips, loss_scale. */
#define HS_TIME_DOUBLES 6

/* The averaged model and consensus distance at one evaluation point. */
typedef struct hs_avg_eval {
    long iteration;
    int ranks;                  /* snapshots averaged */
    double clock_s;             /* the latest training clock among them */
    double test_loss, test_acc; /* of mean z */
    double consensus;           /* sqrt(mean_i ||z_i - mean z||^2) */
    double consensus_rel;       /* consensus / ||mean z|| */
    double rank_loss_mean, rank_loss_min, rank_loss_max, rank_acc_mean;
} hs_avg_eval_t;

/* Rank 0: collect EVAL snapshots. `csv` (may be NULL) gets one row per completed round, in
 * iteration order; ipe: iterations per epoch; target_loss / target_acc (<= 0: none): the
 * averaged model's first round meeting either is kept (hs_evalc_ttt). */
int hs_evalc_open(hs_evalc_t **out, hs_dist_t *d, FILE *csv, long ipe, double target_loss,
                  double target_acc);
/* The clock_s of the first round whose averaged model met the target; NAN: none yet. */
double hs_evalc_ttt(const hs_evalc_t *ec);
/* The first round whose averaged model's test loss was NaN or infinite (-1: none). */
long hs_evalc_nonfinite(const hs_evalc_t *ec);
void hs_evalc_close(hs_evalc_t **ec);
/* Add a snapshot: z (n floats, host) with the sender's figures (iteration, own test loss and
 * accuracy, training clock). Rank 0 adds its own this way. */
int hs_evalc_add(hs_evalc_t *ec, int sender, long iter, const float *z, double loss, double acc,
                 double clock_s);
/* Non-blocking: take what arrived, repost, evaluate the rounds every live rank completed. */
int hs_evalc_poll(hs_evalc_t *ec);
/* Rank `rank` rejoined (runtime/rejoin.h) with its first iteration first_iter: it takes part
 * in the rounds after it only, and counts as having sent those up to it (period: iterations
 * between rounds). */
int hs_evalc_rejoined(hs_evalc_t *ec, int rank, long first_iter, long period);
/* End of the run: wait (bounded) for the snapshots still due from live ranks (`rounds`
 * evaluation points each), then evaluate the incomplete rounds with what arrived. */
int hs_evalc_finish(hs_evalc_t *ec, long rounds, double timeout_s);

/* Every rank but 0: send z (host, n floats) to rank 0 as an EVAL snapshot. `buf` is a
 * msg-sized buffer reused across calls; *req the previous send (completed here first). */
int hs_eval_send(hs_dist_t *d, unsigned char *buf, hs_treq_t **req, long iter, const float *z,
                 double loss, double acc, double clock_s);

/* End-of-run collective (after the final drain). Ranks != 0 send their results and z to rank
 * 0 and wait for the send; rank 0 receives from every rank not known dead (bounded; a rank
 * that does not answer is marked failed), merges the failure reports, fills all[size] and
 * *avg (the averaged model evaluated on the test set, consensus distance). */
int hs_final_gather(hs_dist_t *d, const float *z, const hs_rank_final_t *mine, hs_rank_final_t *all,
                    hs_avg_eval_t *avg);

/* Evaluate parameters given in host memory (n floats) with the worker. */
int hs_dist_eval_host(hs_dist_t *d, const float *zh, double *loss, double *acc);

/* The loop's failure table (runtime/train.c): -1 alive, else the iteration at/after which
 * rank r failed. */
long hs_run_failed_at(const hs_dist_t *d, int r);

#endif
