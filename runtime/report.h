/*
 * runtime/report.h — everything a training run shows a person, in one place, for one worker
 * or many: the start banner, the progress line and its ETA, the evaluation lines, the files
 * of DIR (--out): rank-R.csv (one row per iteration), rank-R-eval.csv (this rank's
 * evaluations), eval.csv (rank 0: the averaged model), summary.json (rank 0), the files the
 * algorithm records through hs_dist_record (rank-R-easgd.txt, rank-R-leader.csv), and the
 * parameter dumps (rank-R.init.f32, rank-R.final.f32). The training loop (runtime/train.c)
 * calls it; nothing else writes a run's files.
 */
#ifndef HEARSAY_RUNTIME_REPORT_H
#define HEARSAY_RUNTIME_REPORT_H

#include "hearsay/train.h"
#include "runtime/dist.h"

#include <stdio.h>

typedef struct hs_report hs_report_t;

/* What the banner says about the run. */
typedef struct hs_report_start {
    const char *algo, *graph, *transport;
    int ranks;
    size_t num_params;
    long train_n, test_n, ipe, total, start; /* start > 0: resumed */
    int classes;
    double bayes_acc;
} hs_report_start_t;

/* One iteration's row. */
typedef struct hs_report_iter {
    long done; /* iterations done (1-based) */
    double clock_s, loss, acc, lr, compute_s, straggle_s, w;
    const hs_dist_stats_t *st;
    double wait_total_s; /* waiting so far (the progress line's wait %) */
} hs_report_iter_t;

/* End-of-run figures for summary.json (rank 0). */
typedef struct hs_report_final {
    const char *algo, *graph, *transport;
    /* backend of same-host and of other-host pairs (NULL: the job has no such pair) */
    const char *transport_intra, *transport_inter;
    const char *clock;    /* "wall" or "virtual" (hearsay sim): the unit of every time */
    const char *messages; /* what the algorithm's messages carry (hs_dist_t.msg_compress) */
    int tau, progress_thread;
    size_t num_params;
    long iterations;
    double time_budget_s;  /* --time-budget (0: none) */
    const char *algo_json; /* the algorithm's own members (hs_algo_ops_t.summary; NULL) */
    double wall_s, samples_per_s, bayes_acc;
    double ttt_avg_s;   /* the averaged model's time to target (eval.csv's clock_s), NAN */
    long avg_nonfinite; /* the first evaluation of the averaged model with a NaN/Inf loss, -1 */
    const hs_rank_final_t *all; /* (ranks) */
    const hs_avg_eval_t *avg;
    const long *failed_at; /* (ranks) -1 alive */
    /* (ranks) replacements that rejoined (runtime/rejoin.h): a rank's first process wrote
     * down the weight it took (counted as lost), its replacement finished; NULL: none */
    const unsigned char *rejoined;
} hs_report_final_t;

/* An injected crash: what the rank takes with it. */
typedef struct hs_report_crash {
    long done;               /* iterations completed */
    double clock_s;          /* training clock */
    double lost;             /* push-sum weight it takes with it */
    const double *recv_from; /* (size) weight received from each rank over the run */
    int size;
} hs_report_crash_t;

/* Open the files of this rank (none without o->out_dir; DIR is created). append: a replacement
 * (runtime/rejoin.h, never rank 0): its rows follow its first process's. */
int hs_report_open(hs_report_t **out, const hs_train_opts_t *o, int rank, int size, long ipe,
                   int append);
void hs_report_close(hs_report_t **r);
/* eval.csv (rank 0), for the averaged-model collector; NULL elsewhere or without --out. */
FILE *hs_report_avg_csv(hs_report_t *r);
/* One row of eval.csv. */
void hs_report_avg_row(FILE *f, const hs_avg_eval_t *a, long ipe);

/* Rank 0, unless --quiet: what runs. */
void hs_report_banner(hs_report_t *r, const hs_report_start_t *s);
/* The iteration's CSV row; on rank 0 the progress line when due (every --progress seconds,
 * at the end of each epoch and at the last iteration). */
int hs_report_iteration(hs_report_t *r, const hs_report_iter_t *it);
/* An evaluation of this rank's model after `done` iterations: rank-R-eval.csv, and the
 * console line on rank 0. */
int hs_report_eval(hs_report_t *r, long done, double clock_s, double loss, double acc, double w);
/* hs_dist_record: file NULL = a console line (unless --quiet); else a line of
 * DIR/rank-R-<file> (its header first). */
int hs_report_record(hs_report_t *r, const char *file, const char *header, const char *line);
/* DIR/rank-R.<what>.f32: n raw floats. */
int hs_report_dump(hs_report_t *r, const char *what, const float *z, size_t n);
/* --dump-trajectory: append z (n floats) to DIR/rank-R.traj.f32 (first: start the file). */
int hs_report_trajectory(hs_report_t *r, int first, const float *z, size_t n);
/* An injected crash (the process exits next): a last row of rank-R.csv whose ps_weight is the
 * weight taken (train_loss nan), and DIR/rank-R-lost.json (written whole: a temporary file,
 * then rename), which rank 0 reads for summary.json. Nothing without --out. */
int hs_report_crash(hs_report_t *r, const hs_report_crash_t *c);
/* Training diverged here (a NaN or infinite loss) after `done` iterations:
 * DIR/rank-R-diverged.json (written whole), which rank 0 reads for summary.json's health.
 * Nothing without --out. */
int hs_report_diverged(hs_report_t *r, long done, double loss, double w);
/* Rank 0: the final row of eval.csv, summary.json, the closing lines; fills *res from the
 * job's figures. */
int hs_report_finish(hs_report_t *r, const hs_report_final_t *f, hs_train_result_t *res);

#endif
