/*
 * hearsay/algo.h — the distributed algorithms behind `hearsay train --algo A`, as an ops table.
 *
 * The training loop (runtime/train_dist.c) owns everything an algorithm shares with the others:
 * the worker (data, model, local optimizer, schedule), the transport, the topology, straggler
 * and fault injection, metrics, evaluation and the summary. An algorithm only decides how the
 * gradient of iteration t becomes a step and what is exchanged:
 *
 *     init(&a, d)                       once, after the worker and transport exist
 *     for t in 0 .. T-1:
 *         hs_worker_grad(...)           gradient at the model's parameters
 *         (straggler sleep)
 *         step(a, t)                    local step + communication of round t; afterwards the
 *                                       model's parameters hold the point of the next gradient
 *         at evaluation points: drain(a, 0), then the loop evaluates the model's parameters
 *     drain(a, 1)                       end of the run: nothing in flight, nothing lost
 *     finalize(&a)
 *
 * Algorithms never block on the whole job unless they are synchronous by definition
 * (all-reduce SGD). They account their time and traffic in d->st (per iteration), report a
 * peer they found dead with hs_dist_peer_failed(), and never exit the process.
 * EASGD and leader-SGD plug in here too, with the same flags, metrics and injection.
 */
#ifndef HEARSAY_ALGO_H
#define HEARSAY_ALGO_H

#include "hearsay/kernels.h"
#include "hearsay/topology.h"
#include "hearsay/train.h"
#include "hearsay/transport.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* User tags of the training messages (hearsay/transport.h tags; the all-reduce uses its own). */
#define HS_TAG_GOSSIP   0x47000u /* SGP / OSGP push-sum shares (x, w) */
#define HS_TAG_NEIGHBOR 0x47001u /* D-PSGD neighbour exchange */
#define HS_TAG_EVAL     0x47002u /* z snapshots for the averaged model (to rank 0) */
#define HS_TAG_FINAL    0x47003u /* end-of-run results and final z (to rank 0) */
#define HS_TAG_PING     0x47004u /* never sent: a receive on it probes a peer's liveness */
#define HS_TAG_ACK      0x47005u /* rank 0 -> r: your end-of-run results are in, you may exit */
#define HS_TAG_WIREUP   0x47006u /* start-up: one byte each way between every pair of ranks */
/* EASGD center service and leader-SGD (optim/center.c, optim/lsgd.c) */
#define HS_TAG_CENTER_REQ 0x47010u /* worker -> center owner: read / add / finish a shard */
#define HS_TAG_CENTER_REP 0x47011u /* center owner -> worker: shard contents */
#define HS_TAG_LSGD_LOSS  0x47012u /* leader-SGD: (recent loss, rank, version) gossip */
#define HS_TAG_LSGD_REQ   0x47013u /* leader-SGD: request of a leader's published snapshot */
#define HS_TAG_LSGD_SNAP  0x47014u /* leader-SGD: a versioned, checksummed snapshot */

/* Per-iteration counters an algorithm adds to (the loop writes them to rank-R.csv and zeroes
 * them before each iteration). */
typedef struct hs_dist_stats {
    double comm_s;        /* packing, posting, applying messages, collectives */
    double wait_s;        /* blocked on peers (send completions, neighbours, drains) */
    uint64_t bytes_sent;  /* payload + headers posted */
    uint64_t bytes_recv;  /* payload + headers applied */
    long msgs_applied;    /* messages added into the local state */
    double staleness_sum; /* sum over applied messages of (my iteration - sender's) */
} hs_dist_stats_t;

/* What the loop gives an algorithm. */
typedef struct hs_dist {
    const hs_train_opts_t *o;
    hs_worker_t *worker;
    hs_kernels_t *k;
    hs_transport_t *t;
    hs_topo_t *topo; /* NULL for algorithms without a graph */
    int rank, size;
    long total_iters;   /* iterations every rank runs */
    long start_iter;    /* first iteration of this run (> 0 after --resume) */
    const int *host_of; /* (size) host index of each rank (0..n_hosts-1); NULL: one host */
    int n_hosts;
    long drain_until; /* drain(a, 1) waits for the messages of iterations [start_iter,
                       * drain_until); 0 = total_iters (the end of the run). A checkpoint of a
                       * push-sum algorithm sets it so that nothing is in flight at the cut. */
    size_t n;         /* parameters */
    long *failed_at;  /* (size) -1 alive, else the iteration at/after which the rank failed */
    hs_dist_stats_t st;
    /* While an algorithm waits for peers it calls hs_dist_idle() at least every ~0.1 s, so
     * the loop's own receivers keep flowing: rank 0 collects the other ranks' evaluation
     * snapshots there, and a rank whose snapshot send waits on rank 0 would otherwise hold
     * back its gossip (a cycle only a timeout broke). NULL: nothing to do. */
    int (*idle)(void *ctx);
    void *idle_ctx;
} hs_dist_t;

static inline int hs_dist_idle(hs_dist_t *d)
{
    return d->idle ? d->idle(d->idle_ctx) : 0;
}

typedef struct hs_algo hs_algo_t;

/* Algorithm flags. */
#define HS_ALGO_GRAPH      0x1u /* uses --graph */
#define HS_ALGO_UNDIRECTED 0x2u /* needs an undirected graph (Metropolis weights) */
#define HS_ALGO_PUSHSUM    0x4u /* keeps a push-sum weight; tolerates failed peers */
#define HS_ALGO_COMM       0x8u /* communicates (everything but "local") */

typedef struct hs_algo_ops {
    size_t size;      /* sizeof(hs_algo_ops_t) of the build that filled it */
    const char *name; /* "sgp", ... */
    unsigned flags;
    /* Build the algorithm's state for d (which outlives it). May use the transport for
     * non-blocking set-up only (no barrier). */
    int (*init)(hs_algo_t **out, hs_dist_t *d);
    /* Round t: the model's gradient buffer holds the gradient of iteration t at the model's
     * parameters. Take the local step (hs_worker_apply / hs_worker_apply_to, which advance
     * the worker's iteration), communicate, and leave in the model's parameters the point
     * where the next gradient is computed. */
    int (*step)(hs_algo_t *a, long t);
    /* final == 0 (before an evaluation): complete own sends, apply what has arrived, without
     * waiting for peers' computation. final == 1 (end of the run, after the last step): also
     * wait (bounded by o->drain_timeout_s) for every message the schedule says was sent here,
     * skipping failed peers. Afterwards the model's parameters hold the model to evaluate. */
    int (*drain)(hs_algo_t *a, int final);
    /* Free everything; *a = NULL (NULL is fine). Never blocks on peers. */
    void (*finalize)(hs_algo_t **a);
    /* Push-sum weight (1 for algorithms without one). */
    double (*weight)(const hs_algo_t *a);
    /* Checkpoint state beyond the worker's (parameters, velocity): its size in bytes, and a
     * copy out / in. NULL slots: no extra state. */
    size_t (*state_bytes)(const hs_algo_t *a);
    int (*state_save)(hs_algo_t *a, void *buf);
    int (*state_load)(hs_algo_t *a, const void *buf);
} hs_algo_ops_t;

extern const hs_algo_ops_t hs_algo_local_ops;     /* independent workers, no communication */
extern const hs_algo_ops_t hs_algo_sgp_ops;       /* Stochastic Gradient Push, tau = 1 */
extern const hs_algo_ops_t hs_algo_osgp_ops;      /* overlap SGP, tau = o->tau */
extern const hs_algo_ops_t hs_algo_dpsgd_ops;     /* D-PSGD, Metropolis neighbour averaging */
extern const hs_algo_ops_t hs_algo_allreduce_ops; /* synchronous SGD, ring all-reduce */
extern const hs_algo_ops_t hs_algo_easgd_ops;     /* elastic averaging SGD (asynchronous) */
extern const hs_algo_ops_t hs_algo_eamsgd_ops;    /* EASGD with Nesterov momentum locally */
extern const hs_algo_ops_t hs_algo_lsgd_ops;      /* leader-SGD (local and global leaders) */

/* The ops table of `name`, or NULL. */
const hs_algo_ops_t *hs_algo_find(const char *name);
/* "local|sgp|osgp|dpsgd|allreduce". */
const char *hs_algo_names(void);

/* Record that `peer` failed at/after iteration `iter` (the iteration after the last message
 * seen from it; of several reports the largest, the most precise, is kept). */
void hs_dist_peer_failed(hs_dist_t *d, int peer, long iter, const char *why);
/* 1 when `peer` is known to have failed. */
int hs_dist_peer_dead(const hs_dist_t *d, int peer);
/* Ask the transport whether `peer` still runs (a receive on HS_TAG_PING, which nobody sends,
 * waited on for ~0.3 s: the transport's liveness check fails it when the peer has exited).
 * 1: alive or unknown (remote peers), 0: gone. */
int hs_dist_probe_alive(hs_dist_t *d, int peer);

#ifdef __cplusplus
}
#endif
#endif
