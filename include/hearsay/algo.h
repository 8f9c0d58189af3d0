/*
 * hearsay/algo.h — the distributed algorithms behind `hearsay train --algo A`, as an ops table,
 * and the narrow environment an algorithm gets (hs_dist_t).
 *
 * The training loop (runtime/train.c) owns everything an algorithm shares with the others:
 * the worker (data, model, local optimizer, schedule), the transport, the topology, straggler
 * and fault injection, metrics, reporting, evaluation and the summary. An algorithm only
 * decides how the gradient of iteration t becomes a step and what is exchanged:
 *
 *     init(&a, d)                       once, after the transport and topology exist
 *     for t in start .. T-1:
 *         (the loop) gradient at d->params into d->grads; injected sleep
 *         step(a, t)                    local step (hs_dist_apply) + communication of round t;
 *                                       afterwards d->params holds the next gradient's point
 *         at evaluation points: drain(a, 0), then the loop evaluates d->params
 *     drain(a, 1)                       end of the run: nothing in flight, nothing lost
 *     finalize(&a)
 *
 * What an algorithm may use is in hs_dist_t and nothing else: the parameter and gradient
 * buffers, the local optimizer's step (hs_dist_apply, hs_dist_apply_to), the iteration and the
 * last training loss, the generic options (hs_algo_opts_t) and its own (hs_dist_opt_*), the
 * transport, the topology, and the
 * execution environment (hearsay/exec.h) for every clock read, sleep, wait and service.
 * Algorithms never block on the whole job unless they are synchronous by definition
 * (all-reduce SGD). They account their time and traffic in d->st (per iteration), report a
 * peer they found dead with hs_dist_peer_failed(), report what the run's files should hold
 * with hs_dist_record(), and never exit the process. See docs/algorithms.md, "Adding an
 * algorithm".
 */
#ifndef HEARSAY_ALGO_H
#define HEARSAY_ALGO_H

#include "hearsay/exec.h"
#include "hearsay/kernels.h"
#include "hearsay/options.h"
#include "hearsay/topology.h"
#include "hearsay/transport.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The loop's own messages (hearsay/transport.h user tags; runtime/ and gossip/ use them). */
#define HS_TAG_EVAL      0x47002u /* z snapshots for the averaged model (to rank 0) */
#define HS_TAG_FINAL     0x47003u /* end-of-run results and final z (to rank 0) */
#define HS_TAG_PING      0x47004u /* never sent: a receive on it probes a peer's liveness */
#define HS_TAG_ACK       0x47005u /* rank 0 -> r: your end-of-run results are in, you may exit */
#define HS_TAG_WIREUP    0x47006u /* start-up: one byte each way between every pair of ranks */
#define HS_TAG_HEARTBEAT 0x47009u /* failure detection (runtime/heartbeat.h) */
#define HS_TAG_REJOIN    0x4700Au /* a replacement joins (runtime/rejoin.h): its notices */
#define HS_TAG_REJOIN_ST 0x4700Bu /* ... and the state a donor hands it */

/* An algorithm's own messages: tags hs_dist_tag(d, k), k = 0 .. HS_DIST_TAGS - 1, which the
 * algorithm numbers privately (an enum of offsets in its .c). The loop gives the running
 * algorithm the range [d->tag_base, d->tag_base + HS_DIST_TAGS), by default HS_TAG_ALGO_BASE:
 * clear of the loop's tags above and of the all-reduce module's range (HS_ALLREDUCE_TAG_BASE,
 * the top 1/16 of the 24-bit user tags, HS_TAG_MAX). Parts of one algorithm (the all-reduce
 * and its compressed gather, optim/efsgd.h) share its range and split the offsets. */
#define HS_TAG_ALGO_BASE 0x47100u
#define HS_DIST_TAGS     64u

/* The loop's own messages (HS_TAG_EVAL: a rank's model snapshot for rank 0's averaged-model
 * evaluation; HS_TAG_FINAL: its end-of-run results) travel in the frame of every training
 * message: optim/'s wire header, private there, of HS_DIST_FRAME_BYTES bytes, then `n` floats,
 * then `extra` bytes. The loop fills and reads the header's fields through these two calls. */
#define HS_DIST_FRAME_BYTES 128
#define HS_DIST_FRAME_AUX   11 /* kind-specific doubles (the loop numbers them) */
typedef enum hs_dist_msg { HS_DIST_MSG_EVAL = 3, HS_DIST_MSG_FINAL = 4 } hs_dist_msg_t;
typedef struct hs_dist_frame {
    long iteration;                /* the sender's iteration */
    double weight;                 /* the push-sum weight travelling with the floats */
    uint32_t extra;                /* bytes after the floats */
    double aux[HS_DIST_FRAME_AUX]; /* kind-specific values */
} hs_dist_frame_t;
/* Write the header of a `kind` message from `sender` with n floats into buf (at least
 * HS_DIST_FRAME_BYTES bytes). */
void hs_dist_frame_write(void *buf, hs_dist_msg_t kind, int sender, size_t n,
                         const hs_dist_frame_t *f);
/* Check a received message of `bytes` bytes from `source` (magic, version, kind, sender, n
 * floats, the byte count) and read its header into *f: 0, or -EPROTO with a message naming
 * what is wrong. */
int hs_dist_frame_read(const void *buf, size_t bytes, hs_dist_msg_t kind, int source, size_t n,
                       hs_dist_frame_t *f);

/* Bins of the per-message staleness histogram (hs_dist_stats_t.stale_hist): bin b counts
 * staleness b - HS_STALE_OFF, so -HS_STALE_OFF (a message HS_STALE_OFF or more rounds from the
 * sender's future: the first bin counts those) up to HS_STALE_BINS - HS_STALE_OFF - 1 (the last
 * bin counts that and more). */
#define HS_STALE_BINS 256
#define HS_STALE_OFF  64

/* Per-iteration counters an algorithm adds to (the loop writes them to rank-R.csv and zeroes
 * them before each iteration). */
typedef struct hs_dist_stats {
    double comm_s;        /* packing, posting, applying messages, collectives */
    double wait_s;        /* blocked on peers (send completions, neighbours, drains) */
    uint64_t bytes_sent;  /* payload + headers posted */
    uint64_t bytes_recv;  /* payload + headers applied */
    long msgs_applied;    /* messages added into the local state */
    double staleness_sum; /* sum over applied messages of (my iteration - sender's) */
    /* per applied message, its signed staleness s = my iteration - the sender's (negative: a
     * message of the sender's later round, i.e. from my future): a histogram (bin
     * s + HS_STALE_OFF, clamped to the first and last bins), the smallest and the largest
     * (both meaningful only when stale_n > 0); hs_dist_staleness() fills all */
    uint32_t stale_hist[HS_STALE_BINS];
    long stale_n, stale_min, stale_max;
} hs_dist_stats_t;

/* The generic options every algorithm may read (flags of `hearsay train`). An algorithm's own
 * options are in its table (hs_algo_ops_t.options) and reach it through hs_dist_opt_*(). */
typedef struct hs_algo_opts {
    uint64_t seed;          /* --seed (adpsgd draws its partners from it) */
    int nesterov;           /* the local optimizer uses Nesterov momentum (eamsgd checks) */
    double momentum;        /* the local optimizer's momentum */
    double comm_timeout_s;  /* bound on every wait for a peer (> 0) */
    double drain_timeout_s; /* bound on the end-of-run drain (> 0) */
    double fail_timeout_s;  /* heartbeats: a peer silent this long is fenced (0: off) */
    int rejoin;             /* a replacement of a crashed rank may join (hs_algo_ops_t.rejoin) */
} hs_algo_opts_t;

/* Gradient layers [a, b) of the current iteration are final (d->glayer_off gives their
 * ranges). Called on the thread that computes the gradient, while it computes: keep it short
 * (hand the work to a service); a negative return stops the gradient with that error. */
typedef int (*hs_grads_ready_fn)(void *fctx, int a, int b);

/* What the loop gives an algorithm. */
typedef struct hs_dist {
    const hs_algo_opts_t *o;
    const hs_cfg_t *cfg; /* the algorithm's own options, resolved (hs_dist_opt_*) */
    hs_kernels_t *k;
    hs_exec_t *x;      /* clock, sleep, waits, liveness, services (hearsay/exec.h) */
    hs_transport_t *t; /* NULL in a one-rank job */
    hs_topo_t *topo;   /* NULL for algorithms without a graph */
    int rank, size;
    size_t n;           /* parameters */
    float *params;      /* (n, device) the model's parameters: where the next gradient is taken */
    float *grads;       /* (n, device) the gradient of the current iteration */
    long iter;          /* the current iteration (the round step() takes; the last one in drain) */
    double loss;        /* mean loss of the current iteration's batch (NAN before the first) */
    long total_iters;   /* iterations every rank runs */
    long start_iter;    /* first iteration of this run (> 0 after --resume) */
    const int *host_of; /* (size) host index of each rank (0..n_hosts-1); NULL: one host */
    int n_hosts;
    uint32_t tag_base; /* first tag of the algorithm's range (hs_dist_tag; 0: HS_TAG_ALGO_BASE) */
    long drain_until;  /* drain(a, 1) waits for the messages of iterations [start_iter,
                        * drain_until); 0 = total_iters (the end of the run). A checkpoint of a
                        * push-sum algorithm sets it so that nothing is in flight at the cut. */
    hs_dist_stats_t st;
    /* The loop's side (runtime/train.c), through the wrappers below. */
    void *ctx;
    int (*apply)(void *ctx, double lr_scale, float *dst);
    int (*evaluate)(void *ctx, const float *params, double *loss, double *acc);
    void (*peer_failed)(void *ctx, int peer, long iter, const char *why);
    int (*peer_dead)(void *ctx, int peer);
    int (*peer_hb)(void *ctx, int peer); /* NULL: no heartbeats (hs_dist_peer_hb) */
    int (*record)(void *ctx, const char *file, const char *header, const char *line);
    /* The gradient's layers (those with parameters), in layer order: layer i's gradient is
     * floats [glayer_off[i], glayer_off[i + 1]) of d->grads (glayer_off[0] = 0,
     * glayer_off[n_glayers] = n). Backward produces them from the last to the first. */
    int n_glayers;
    const size_t *glayer_off; /* (n_glayers + 1) */
    /* Optional (NULL: not offered): call fn(fctx, a, b) whenever gradient layers [a, b) become
     * final during the gradient computation, every iteration, in backward order, covering
     * every layer once (fn NULL: unsubscribe). With the wall clock it runs inside backward; in
     * virtual time at the moment the compute model says the layers' backward ends. */
    int (*on_grads)(void *ctx, hs_grads_ready_fn fn, void *fctx);
    /* Optional (NULL: not offered): keep the gradient in g (host memory of n floats, CPU
     * kernels), or back in the model's own buffer (g NULL); d->grads follows. */
    int (*use_grads)(void *ctx, float *g);
    /* Peers known to have failed so far (the loop counts hs_dist_peer_failed's new ones): an
     * algorithm that derives something from the set of live ranks redoes it when this moves. */
    long failures;
    /* Ranks that came back so far (runtime/rejoin.h: a replacement of a crashed rank joined):
     * each is alive again, its failure forgotten; the set of live ranks moved as with
     * failures. */
    long rejoins;
    /* Optional (NULL: none): this rank waits for `peer` past a bound (its heartbeats say so);
     * the rank `peer` is itself blocked on (-1: none known). hs_dist_keep_waiting uses them. */
    void (*note_wait)(void *ctx, int peer);
    int (*peer_blocked)(void *ctx, int peer);
    /* What the algorithm's messages carry, for summary.json ("messages"): the compressor it
     * chose (a hearsay/compress.h spec: "bf16", "int8", ..), set in init by the algorithms that
     * compress; "" (the default): the model's float32 values as they are. */
    char msg_compress[64];
} hs_dist_t;

/* The local optimizer's step with d->grads and this iteration's learning rate times lr_scale
 * (> 0), on d->params. Advances the worker's iteration (once per round). */
static inline int hs_dist_apply(hs_dist_t *d, double lr_scale)
{
    return d->apply(d->ctx, lr_scale, NULL);
}

/* The same step on another parameter buffer (device, n floats). */
static inline int hs_dist_apply_to(hs_dist_t *d, float *dst)
{
    return d->apply(d->ctx, 1.0, dst);
}

/* Keep the gradient in g from now on (host memory of n floats that the caller frees after a
 * call with g NULL, which moves it back; CPU kernels): all-reduce SGD puts it in memory of
 * hs_transport_buf_alloc, which its peers map. -ENOSYS where the loop does not offer it. */
static inline int hs_dist_use_grads(hs_dist_t *d, float *g)
{
    return d->use_grads ? d->use_grads(d->ctx, g) : -ENOSYS;
}

/* Subscribe fn to the gradient-ready notifications (hs_grads_ready_fn; NULL: unsubscribe).
 * -ENOSYS where the loop does not offer them: the gradient is then complete only at step(). */
static inline int hs_dist_on_grads(hs_dist_t *d, hs_grads_ready_fn fn, void *fctx)
{
    return d->on_grads ? d->on_grads(d->ctx, fn, fctx) : -ENOSYS;
}

/*
 * Staging between the kernels' memory and the host (optim/dist_stage.c): the one place that
 * knows whether they differ, so that no algorithm branches on the device. Messages, the
 * compressors and the all-reduce work on host memory; the model and its gradient live in the
 * kernels' memory (the host for the CPU, the GPU for CUDA, memory the host may not touch for the
 * emulated device). Three uses, all free of copies where the device is the host:
 *   - an image: host memory standing for n floats of device memory. hs_stage_host() is where
 *     the host reads and writes them; hs_stage_pull copies the device's values into it and
 *     hs_stage_push copies it back. On the host the image *is* the device memory: pull and
 *     push do nothing, and writes through hs_stage_host() land at once.
 *   - a buffer (hs_stage_buffer): new device memory with its image, one allocation on the host.
 *   - a view: device memory holding host data for a kernel to read (a received message folded
 *     into the model): hs_stage_view returns a device pointer to a copy of `host`, or `host`
 *     itself on the host. The copy is valid until the next hs_stage_view of the same stage.
 * Host images are the backend's staging memory (page-locked on CUDA: hs_kernels_host_alloc).
 */
typedef struct hs_stage {
    hs_kernels_t *k;
    float *dev;     /* the device memory an image stands for (NULL: a view only) */
    float *host;    /* the image: dev itself where the device is the host */
    float *scratch; /* a view's device memory (NULL where the device is the host) */
    size_t n;       /* floats */
    int copies;     /* 1: the device is not the host, pull/push/view copy */
    int own_host;   /* 1: host was allocated here (close frees it) */
    int own_dev;    /* 1: dev was allocated here (hs_stage_buffer) */
} hs_stage_t;

/* An image of dev (n floats of k's memory); `what` names it in errors. *s is zeroed first, so a
 * stage that failed to open can be closed. */
int hs_stage_image(hs_stage_t *s, hs_kernels_t *k, float *dev, size_t n, const char *what);
/* The same with the image in the caller's host memory `host` (n floats, kept by the caller)
 * where one is needed: memory of hs_transport_buf_alloc that peers map. Where the device is the
 * host the image is dev, and host goes unused (hs_stage_host tells). */
int hs_stage_image_in(hs_stage_t *s, hs_kernels_t *k, float *dev, size_t n, float *host,
                      const char *what);
/* A new buffer of n floats of device memory (zeroed) with its image: a kernel's input or output
 * (the local step on a copy of the model) that the host fills and reads. On the host the two
 * are one allocation. hs_stage_dev gives the device side. */
int hs_stage_buffer(hs_stage_t *s, hs_kernels_t *k, size_t n, const char *what);
/* A view of up to n floats of host data. */
int hs_stage_view_open(hs_stage_t *s, hs_kernels_t *k, size_t n, const char *what);
/* Image: host <- device; device <- host. */
int hs_stage_pull(hs_stage_t *s);
int hs_stage_push(hs_stage_t *s);
/* The same for floats [lo, lo + n) only (a bucket of the gradient). */
int hs_stage_pull_range(hs_stage_t *s, size_t lo, size_t n);
int hs_stage_push_range(hs_stage_t *s, size_t lo, size_t n);
/* View: a device pointer to the first n (<= the stage's) floats of `host`, in *dev. */
int hs_stage_view(hs_stage_t *s, const float *host, size_t n, const float **dev);
/* Free what the stage allocated; *s is zeroed. Safe on a zeroed stage. */
void hs_stage_close(hs_stage_t *s);
/* The image's host memory (n floats). */
static inline float *hs_stage_host(const hs_stage_t *s)
{
    return s->host;
}
/* The image's device memory (n floats). */
static inline float *hs_stage_dev(const hs_stage_t *s)
{
    return s->dev;
}
/* 1 when pull, push and view copy (the device is not the host): what runs on the image does
 * not run on the device memory itself. */
static inline int hs_stage_copies(const hs_stage_t *s)
{
    return s->copies;
}

/* Evaluate parameters (device, n floats; NULL = d->params) on the test set. */
static inline int hs_dist_evaluate(hs_dist_t *d, const float *params, double *loss, double *acc)
{
    return d->evaluate(d->ctx, params, loss, acc);
}

/* Record that `peer` failed at/after iteration `iter` (the iteration after the last message
 * seen from it; of several reports the largest, the most precise, is kept). */
static inline void hs_dist_peer_failed(hs_dist_t *d, int peer, long iter, const char *why)
{
    d->peer_failed(d->ctx, peer, iter, why);
}

/* 1 when `peer` is known to have failed. */
static inline int hs_dist_peer_dead(const hs_dist_t *d, int peer)
{
    return d->peer_dead(d->ctx, peer);
}

/* What the heartbeats say of `peer` (runtime/heartbeat.h): 0 alive, 1 suspected (silent for
 * half the fail timeout), 2 fenced (out of the job: refuse its messages; for the own rank:
 * this rank was fenced and must stop), -1 no heartbeats. */
static inline int hs_dist_peer_hb(const hs_dist_t *d, int peer)
{
    return d->peer_hb ? d->peer_hb(d->ctx, peer) : -1;
}

/* A wait for `peer` has lasted `waited` s, past its bound `limit`: 1 while the heartbeats have
 * not fenced the peer (alive: it is blocked, not frozen; suspected: the fence, or its next
 * heartbeat, decides within half a fail timeout): keep waiting, up to limit + 3 fail timeouts,
 * and up to limit + 6 while the peer says it is itself blocked on another rank (the ranks that
 * wait for that one give it up at their own limit + 3, and the peer then goes on: a rank only
 * blocked behind a slow one is not given up with it); 0 when it may be declared failed
 * (fenced, or no heartbeats). */
static inline int hs_dist_keep_waiting(const hs_dist_t *d, int peer, double waited, double limit)
{
    int hb = hs_dist_peer_hb(d, peer);
    if (!(hb == 0 || hb == 1)) return 0;
    double f = d->o->fail_timeout_s;
    if (waited < limit + 3 * f) return 1;
    int b = d->peer_blocked ? d->peer_blocked(d->ctx, peer) : -1;
    return b >= 0 && b != d->rank && waited < limit + 6 * f;
}

/* This rank waits past a bound for `peer` alone (-1: for several, or none): its heartbeats say
 * so (hs_dist_keep_waiting of the ranks that wait for this one). */
static inline void hs_dist_note_wait(const hs_dist_t *d, int peer)
{
    if (d->note_wait) d->note_wait(d->ctx, peer);
}

/* The algorithm's k-th message tag (k < HS_DIST_TAGS). */
static inline uint32_t hs_dist_tag(const hs_dist_t *d, unsigned k)
{
    return (d->tag_base ? d->tag_base : HS_TAG_ALGO_BASE) + k;
}

/* Hand the reporting code a line for this rank's file `file` (a short name: "leader" becomes
 * DIR/rank-R-leader.csv, "easgd.txt" DIR/rank-R-easgd.txt); `header` is written once, before
 * the first line (NULL: none). Nothing is written without --out. */
static inline int hs_dist_record(hs_dist_t *d, const char *file, const char *header,
                                 const char *line)
{
    return d->record ? d->record(d->ctx, file, header, line) : 0;
}

/* Count one applied message of signed staleness s (my iteration - the sender's; negative for
 * a message from the sender's later round) in d->st. */
static inline void hs_dist_staleness(hs_dist_t *d, long s)
{
    d->st.msgs_applied++;
    if (d->st.stale_n == 0 || s < d->st.stale_min) d->st.stale_min = s;
    if (d->st.stale_n++ == 0 || s > d->st.stale_max) d->st.stale_max = s;
    d->st.staleness_sum += (double)s;
    long b = s + HS_STALE_OFF;
    d->st.stale_hist[b < 0 ? 0 : b < HS_STALE_BINS ? b : HS_STALE_BINS - 1]++;
}

/* The loop's idle hook, for waits that do not go through hs_exec_wait. */
static inline int hs_dist_idle(hs_dist_t *d)
{
    return hs_idle(d->x);
}

/* 1 when `peer` still runs (or cannot be known), 0 when it has exited (~0.3 s at most). */
static inline int hs_dist_probe_alive(hs_dist_t *d, int peer)
{
    return hs_exec_alive(d->x, peer, 0.3);
}

/* The algorithm's own options (hs_algo_ops_t.options), resolved for this run: the table's
 * defaults, then the values the run was given (hs_train_opts_t.algo_opts). Asking for a name
 * the algorithm does not declare is a programming error (logged; 0 / NULL). */
static inline long hs_dist_opt_int(const hs_dist_t *d, const char *name)
{
    return hs_cfg_int(d->cfg, name);
}
static inline double hs_dist_opt_double(const hs_dist_t *d, const char *name)
{
    return hs_cfg_double(d->cfg, name);
}
static inline int hs_dist_opt_bool(const hs_dist_t *d, const char *name)
{
    return hs_cfg_bool(d->cfg, name);
}
static inline const char *hs_dist_opt_str(const hs_dist_t *d, const char *name)
{
    return hs_cfg_str(d->cfg, name);
}
/* 1 when the run gave the option a value (0: the table's default is in force). */
static inline int hs_dist_opt_given(const hs_dist_t *d, const char *name)
{
    return hs_cfg_source(d->cfg, name) != HS_CFG_DEFAULT;
}

/* Say what the algorithm's messages carry (hs_dist_t.msg_compress: a compressor's spec; cut to
 * fit, as every spec does). */
static inline void hs_dist_set_messages(hs_dist_t *d, const char *spec)
{
    size_t n = strlen(spec);
    if (n >= sizeof d->msg_compress) n = sizeof d->msg_compress - 1;
    memcpy(d->msg_compress, spec, n);
    d->msg_compress[n] = '\0';
}

/* --- Waiting for peers (optim/dist_wait.c): every wait of an algorithm on its peers --------
 *
 * A request that ends goes to fn(ctx, idx, rc, st): completed (rc 0, its status in *st), or
 * failed (rc < 0, freed: reqs[idx] is NULL, st NULL); fn's negative return ends the wait with
 * it. fn NULL: a failed request ends the wait with its error. A wait that ends with no
 * request named (the bound passed: -ETIMEDOUT, the requests left pending; the transport
 * failed) returns its error. Nothing is accounted: the caller adds its time to d->st.wait_s. */
typedef int (*hs_dist_req_fn)(void *ctx, int idx, int rc, const hs_tstatus_t *st);

/* Wait until every request of reqs[0..n) has ended (NULL slots are done), each single wait
 * bounded by `limit` s (flags as hs_exec_wait's). */
int hs_dist_wait_reqs(hs_exec_t *x, hs_treq_t **reqs, int n, double limit, unsigned flags,
                      hs_dist_req_fn fn, void *ctx);

/* The same for requests on peers[0..n) under one bound, `limit` s for the whole wait: when it
 * passes with requests pending, the wait goes on 0.25 s at a time while hs_dist_keep_waiting
 * says so for one of their peers (it heartbeats: blocked, not frozen). */
int hs_dist_wait_sends(hs_dist_t *d, hs_treq_t **reqs, const int *peers, int n, double limit,
                       hs_dist_req_fn fn, void *ctx);

/* hs_dist_wait_reqs on requests to or from peers[0..n), heartbeat-aware: each single wait
 * bounded by `limit` s from the last progress; with heartbeats a pending peer found fenced
 * ends the wait at once (-ETIMEDOUT, the message names the rank) and past the bound the wait
 * goes on 0.25 s at a time while hs_dist_keep_waiting vouches for a pending peer. Without
 * heartbeats (virtual time, --fail-timeout 0): exactly hs_dist_wait_reqs. */
int hs_dist_wait_peers(hs_dist_t *d, hs_treq_t **reqs, const int *peers, int n, double limit,
                       unsigned flags, hs_dist_req_fn fn, void *ctx);

/* hs_exec_wait1 on a request to or from `peer`, the same way (0: completed, its status in *st
 * when st is not NULL; -ETIMEDOUT keeps the request; an error frees it). */
int hs_dist_wait_one(hs_dist_t *d, hs_treq_t **req, int peer, double limit, unsigned flags,
                     hs_tstatus_t *st);

/* The lowest rank other than this one that the heartbeats have fenced, or -1. */
int hs_dist_fenced_peer(const hs_dist_t *d);

/* For a wait on the whole job (a collective) that has lasted `waited` s past its bound `limit`:
 * 1 while no rank is fenced and waited < limit + 3 fail timeouts (a frozen rank makes everyone
 * wait, until it wakes or is fenced), 0 without heartbeats. */
int hs_dist_patient_all(const hs_dist_t *d, double waited, double limit);

/* 1 when this run has heartbeats (--fail-timeout > 0, more than one rank; in virtual time their
 * verdict without messages: every running rank is alive, as no process can be stopped). */
int hs_dist_heartbeats(const hs_dist_t *d);

/* A patience callback for a collective's waits (hs_allreduce_opts_t.patience, ctx = d): 0 as
 * soon as a rank is fenced; past the bound, hs_dist_patient_all. */
int hs_dist_collective_patience(void *ctx, double waited, double limit);

/* rc < 0 with a rank fenced: the error message is prefixed with the fenced rank (the reason a
 * synchronous algorithm stops). Returns rc. */
int hs_dist_name_fenced(const hs_dist_t *d, int rc);

/* A wait stuck on a peer: what the site knows of it now. */
typedef struct hs_dist_late {
    double quiet;   /* s the wait has gone without progress */
    double limit;   /* its bound */
    int silent;     /* quiet has passed the bound (the site's own comparison) */
    int heartbeats; /* 1: a silent peer that hs_dist_keep_waiting vouches for is waited for */
    int probe;      /* 1: probe the liveness of a peer not found silent */
    double probe_s; /* the probe's own bound (hs_exec_alive; hs_dist_probe_alive: 0.3) */
} hs_dist_late_t;

#define HS_LATE_WAIT   0 /* keep waiting */
#define HS_LATE_SILENT 1 /* silent past the bound: report it failed (hs_dist_peer_failed) */
#define HS_LATE_EXITED 2 /* the probe found it gone */
int hs_dist_late_peer(hs_dist_t *d, int peer, const hs_dist_late_t *l);

typedef struct hs_algo hs_algo_t;

/* Algorithm flags. */
#define HS_ALGO_GRAPH      0x1u  /* uses --graph */
#define HS_ALGO_UNDIRECTED 0x2u  /* needs an undirected graph (Metropolis weights) */
#define HS_ALGO_PUSHSUM    0x4u  /* keeps a push-sum weight; tolerates failed peers */
#define HS_ALGO_COMM       0x8u  /* communicates (everything but "local") */
#define HS_ALGO_NESTEROV   0x20u /* its local steps use Nesterov momentum (turned on) */
#define HS_ALGO_PROGRESS   0x40u /* needs the transport's progress thread (turned on) */
#define HS_ALGO_TOLERANT   0x80u /* survives failed peers (reports them, finishes) */
#define HS_ALGO_BUDGET                                                                             \
    0x200u                       /* ends at --time-budget: its ranks may stop at different         \
                                  * iterations (local, sgp, osgp) */
#define HS_ALGO_BIPARTITE 0x800u /* needs a bipartite graph (active and passive sides) */
/* its checkpoint state belongs to its rank (EASGD: its center shard): a replacement does not
 * take a donor's (runtime/rejoin.h) */
#define HS_ALGO_OWN_STATE 0x1000u

typedef struct hs_algo_ops {
    size_t size;      /* sizeof(hs_algo_ops_t) of the build that filled it */
    const char *name; /* "sgp", ... */
    const char *help; /* one line for --help */
    unsigned flags;
    /* Its default for the generic --graph (NULL: the global default), applied by `hearsay
     * train` where the user gave no value. */
    const char *default_graph;
    /* Its own options (hearsay/options.h: name, type, default, range or choices, help; .group
     * is ignored): `hearsay train` and `hearsay sim` offer the union of every registered
     * algorithm's options (--help, --config, validation, config.ini, summary.json's
     * "config"); a run reads the values through hs_dist_opt_*(d, name). Several algorithms
     * may declare the same name with the same type, range and choices, each with its own
     * default and help. NULL / 0: none. */
    const hs_option_t *options;
    size_t n_options;
    /* Build the algorithm's state for d (which outlives it). May use the transport for
     * non-blocking set-up only (no barrier). */
    int (*init)(hs_algo_t **out, hs_dist_t *d);
    /* Round t: d->grads holds the gradient of iteration t at d->params. Take the local step
     * (hs_dist_apply / hs_dist_apply_to, once), communicate, and leave in d->params the point
     * where the next gradient is computed. */
    int (*step)(hs_algo_t *a, long t);
    /* final == 0 (before an evaluation): complete own sends, apply what has arrived, without
     * waiting for peers' computation. final == 1 (end of the run, after the last step): also
     * wait (bounded by o->drain_timeout_s) for every message the schedule says was sent here,
     * skipping failed peers. Afterwards d->params holds the model to evaluate. */
    int (*drain)(hs_algo_t *a, int final);
    /* Free everything; *a = NULL (NULL is fine). Never blocks on peers. */
    void (*finalize)(hs_algo_t **a);
    /* Push-sum weight (NULL: 1). */
    double (*weight)(const hs_algo_t *a);
    /* Checkpoint state beyond the worker's (parameters, velocity): its size in bytes, and a
     * copy out / in. NULL slots: no extra state. */
    size_t (*state_bytes)(const hs_algo_t *a);
    int (*state_save)(hs_algo_t *a, void *buf);
    int (*state_load)(hs_algo_t *a, const void *buf);
    /* An injected crash ends this rank's process right after this call (no drain, no
     * goodbye). Push-sum algorithms settle their own sends (bounded by the comm timeout),
     * stop receiving (hs_transport_leave) and say in *lost the weight the rank takes with
     * it: its own plus every share it received and has not folded; recv_from (size doubles)
     * gets the weight received from each rank over the run (for the in-flight account of
     * transports that cannot give back what a dead rank never took). NULL slot: nothing to
     * account (*lost stays 0). */
    int (*crash)(hs_algo_t *a, double *lost, double *recv_from);
    /* Check the algorithm's own options (cfg: its table, resolved; the type and range are
     * checked already) before the job starts (hearsay train exits 2 on an error): ranks > 0
     * is the job size, 0 when not known yet. -EINVAL naming the flag. NULL: nothing beyond
     * the generic checks. */
    int (*check)(const hs_algo_opts_t *o, const hs_cfg_t *cfg, int ranks);
    /* Optional: members of summary.json that say which variant ran (`  "key": value,\n`
     * lines, each ending in a comma), from its resolved options. */
    int (*summary)(const hs_cfg_t *cfg, FILE *f);
    /* Optional: training diverged (a non-finite loss) on this rank, whose push-sum weight
     * fell as low as w_min over the run: write into buf the end of the error message after
     * "(lr X", e.g. "); try a smaller --lr" with the algorithm's own advice, and return 1;
     * 0 for the generic message. */
    int (*diverged_hint)(const hs_algo_t *a, const hs_dist_t *d, double w_min, char *buf,
                         size_t len);
    /* Bytes at the head of each of its messages that do not grow with the model (its wire
     * header): `hearsay sim --sim-payload` gives the rest of a message the payload model's
     * size and leaves a message of at most this many bytes (a header alone: a request, a
     * notice) as it is. 0: every byte grows with the model. */
    size_t msg_header;
    /* Optional: a replacement of a crashed rank may join a running job (crash:...:rejoin=D,
     * runtime/rejoin.h); NULL: refused before the job starts. Called at an iteration boundary
     * of the main thread, with `role`:
     *   HS_REJOIN_DONOR: `peer` asks for this rank's state, which the loop takes right after
     *     (state_save and the worker's): split what must not be copied (push-sum: the weight
     *     is halved, and the state saved holds the half handed over);
     *   HS_REJOIN_ADOPT: this rank is the replacement; its state was just loaded from the
     *     donor `peer` (state_load), its first iteration is `iter`: undo what was the donor's
     *     own (counters);
     *   HS_REJOIN_PEER: `peer` is back and takes part from its iteration `iter` on (every
     *     other rank, in its own time): the loop has forgotten its failure already;
     *   HS_REJOIN_UNDO: the state did not reach `peer` after HS_REJOIN_DONOR (it gave up
     *     waiting): take back what was split off for it. */
    int (*rejoin)(hs_algo_t *a, int peer, long iter, int role);
} hs_algo_ops_t;

enum { HS_REJOIN_DONOR = 1, HS_REJOIN_ADOPT, HS_REJOIN_PEER, HS_REJOIN_UNDO };

extern const hs_algo_ops_t hs_algo_local_ops;     /* independent workers, no communication */
extern const hs_algo_ops_t hs_algo_sgp_ops;       /* Stochastic Gradient Push, tau = 1 */
extern const hs_algo_ops_t hs_algo_osgp_ops;      /* overlap SGP, tau = o->tau */
extern const hs_algo_ops_t hs_algo_dpsgd_ops;     /* D-PSGD, Metropolis neighbour averaging */
extern const hs_algo_ops_t hs_algo_allreduce_ops; /* synchronous SGD, ring all-reduce */
extern const hs_algo_ops_t hs_algo_easgd_ops;     /* elastic averaging SGD (asynchronous) */
extern const hs_algo_ops_t hs_algo_eamsgd_ops;    /* EASGD with Nesterov momentum locally */
extern const hs_algo_ops_t hs_algo_lsgd_ops;      /* leader-SGD (local and global leaders) */
extern const hs_algo_ops_t hs_algo_localsgd_ops;  /* local SGD: H local steps, then an average */
extern const hs_algo_ops_t hs_algo_adpsgd_ops;    /* AD-PSGD: asynchronous pairwise averaging */
extern const hs_algo_ops_t hs_algo_choco_ops;     /* CHOCO-SGD: compressed D-PSGD */
extern const hs_algo_ops_t hs_algo_qsgp_ops;      /* compressed push-sum SGD, static graph */

/* The ops table of `name`, or NULL. */
const hs_algo_ops_t *hs_algo_find(const char *name);
/* "local|sgp|osgp|dpsgd|allreduce|...", every registered name. */
const char *hs_algo_names(void);
/* The i-th registered algorithm (NULL past the end). */
const hs_algo_ops_t *hs_algo_at(int i);
/* Add an algorithm to the registry (before the command line is parsed: `hearsay train` offers
 * the options of the algorithms registered when it starts). Checks the table: its size, a
 * unique name, init/step/drain/finalize present, the option table (valid names and defaults,
 * and a name another algorithm declares must have the same type, range and choices). 0, or
 * -EINVAL / -ENOSPC with a message. The table must outlive the process's use of it. */
int hs_algo_register(const hs_algo_ops_t *ops);
/* The resolved options of one run of `ops`: its table's defaults, then each "name=value" of
 * kv (n of them; '-' and '_' alike), checked by type and range. spec is storage (filled here)
 * that must outlive *out; free with hs_cfg_free. -EINVAL naming the algorithm and the option
 * (unknown to the algorithm, or a bad value). */
int hs_algo_cfg_create(hs_cfg_t **out, hs_cfg_spec_t *spec, const hs_algo_ops_t *ops,
                       const char *const *kv, size_t n);
/* The push-sum weight of a (1 without one). */
static inline double hs_algo_weight(const hs_algo_ops_t *ops, const hs_algo_t *a)
{
    return ops->weight && a ? ops->weight(a) : 1.0;
}

#ifdef __cplusplus
}
#endif
#endif
