/*
 * hearsay/trace.h — the timeline (`--trace FILE`): what every rank and every thread did and
 * when, as Chrome trace-event JSON that Perfetto (ui.perfetto.dev) and chrome://tracing open.
 *
 * One tracer per rank (hs_trace_t). Each thread that records gets its own buffer of
 * fixed-size binary events the first time it records (no lock on the hot path afterwards):
 * a begin or an end with a name from a fixed list (hs_trace_name_t), the time on the rank's
 * execution environment's clock (hearsay/exec.h: the wall clock, or `hearsay sim`'s virtual
 * clock) in ns, and for messages the peer, the size and a flow id. Nothing is formatted during
 * the run: at the end each rank writes its events to FILE.rankR (a binary part, magic and
 * version first), and rank 0 (or `hearsay trace merge`) turns every part into one JSON file:
 * pid = rank, tid = thread, complete events ("ph":"X"), and flow arrows ("ph":"s"/"f") from
 * each message's send to the span that applies it.
 *
 * Flow ids need no wire bytes: sender and receiver hash the same things (source, destination,
 * tag, length and 96 bytes sampled from the payload); the merge pairs the sends and applies of
 * one id in time order and drops the ends that have no partner (a message never applied).
 *
 * Disabled (no --trace) costs one predictable branch per site: a NULL tracer, or for the
 * transport's entry points a thread-local pointer that is NULL.
 *
 * Threads: a tracer is closed after every thread that recorded into it has stopped (the
 * training loop closes it after the algorithm's services).
 */
#ifndef HEARSAY_TRACE_H
#define HEARSAY_TRACE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct hs_exec;
struct hs_tstatus;
typedef struct hs_trace hs_trace_t;
typedef struct hs_trace_thr hs_trace_thr_t;

/* What a span is (the names written to the JSON: hs_trace_name). */
typedef enum hs_trace_name {
    HS_TR_ITERATION = 0, /* one iteration of the training loop */
    HS_TR_COMPUTE,       /* the gradient (forward and backward) */
    HS_TR_STRAGGLER,     /* an injected straggler sleep (--straggler) */
    HS_TR_STEP,          /* the algorithm's step: communication and the local step */
    HS_TR_LOCAL_STEP,    /* the local optimizer step (hs_dist_apply) */
    HS_TR_SEND,          /* posting a message (hs_transport_isend); a flow starts here */
    HS_TR_APPLY,         /* handling a received message; a flow ends here */
    HS_TR_WAIT,          /* waiting for transport requests (hs_exec_wait) */
    HS_TR_SVC_WAIT,      /* waiting for a service to handle a message (hs_svc_wait) */
    HS_TR_RECV,          /* a service thread waiting for its next message */
    HS_TR_EVAL,          /* an evaluation point (drain, test set, snapshot to rank 0) */
    HS_TR_CHECKPOINT,    /* a checkpoint (drain, save, barrier) */
    HS_TR_FINISH,        /* the end of the run: final drain, evaluation, gather */
    HS_TR_N_NAMES
} hs_trace_name_t;

/* The span's name in the JSON ("compute", "local step", ...). */
const char *hs_trace_name(int name);

/* A tracer for `rank` of `size` ranks writing FILE.rankR for `path`, on x's clock (the tracer
 * reads x->ops->now). Checks that the part and the merged file can be written (an error
 * naming the path otherwise); nothing is left behind by the check. */
int hs_trace_open(hs_trace_t **out, const char *path, struct hs_exec *x, int rank, int size);
/* How hs_trace_align reaches the other ranks, given by its caller (util/ calls nothing above
 * it: the job's bootstrap, hs_boot_trace_align in hearsay/bootstrap.h). barrier: every rank
 * enters before any returns; allgather: every rank's `len` bytes into `all` (size * len bytes,
 * in rank order). Each returns 0 or a negative error. */
typedef struct hs_trace_sync {
    int (*barrier)(void *ctx);
    int (*allgather)(void *ctx, const void *mine, size_t len, void *all);
    void *ctx;
} hs_trace_sync_t;
/* Clock alignment at start-up, a collective of every rank: each rank's offset to rank 0's
 * clock is measured through sync (a barrier, then every rank's clock read gathered). sync
 * NULL: nothing to measure (ranks that share a host share CLOCK_MONOTONIC: offset 0), as in
 * virtual time. */
int hs_trace_align(hs_trace_t *tr, const hs_trace_sync_t *sync);
/* Write this rank's part (FILE.rankR; atomically: a temporary file renamed). */
int hs_trace_write_part(hs_trace_t *tr);
/* Close and free; *tr = NULL. Safe on NULL. */
void hs_trace_close(hs_trace_t **tr);

/* Check that `path` can be written (a directory that exists, not a directory itself, write
 * permission), creating nothing that stays. 0 or an error naming the path. */
int hs_trace_check_path(const char *path);
/* The part file name of rank r for path (buf of cap bytes). */
void hs_trace_part_name(char *buf, size_t cap, const char *path, int r);
/* Merge the parts `in` (n of them) into the JSON file `out`. Each part is read whole; the
 * flows are paired across parts. *dropped (may be NULL) gets the flow ends left unpaired. */
int hs_trace_merge(const char *out, const char *const *in, int n, long *dropped);
/* Rank 0's end-of-run merge of FILE.rank0 .. FILE.rank(size-1) into FILE: waits for the
 * parts (at most timeout_s; ranks with skip[r] set are not waited for), merges what it
 * finds, and removes the parts when every rank's was merged (else keeps them and warns, so
 * `hearsay trace merge` can be run by hand). */
int hs_trace_merge_run(const char *path, int size, const unsigned char *skip, double timeout_s);

/* --- recording --------------------------------------------------------------------------- */

/* The slow paths (only ever called with tracing on). */
void hs_trace_ev(hs_trace_t *tr, int ph, int name, int peer, uint64_t flow, int64_t arg);
void hs_trace_thr_ev(hs_trace_thr_t *th, int ph, int name, int peer, uint64_t flow, int64_t arg);
/* The flow id of a message (the same on both ends). */
uint64_t hs_trace_flow_id(int src, int dst, uint32_t tag, const void *buf, size_t len);
/* This thread's buffer when it records for some tracer, else NULL (the transport's hook). */
hs_trace_thr_t *hs_trace_self(void);
/* Name the calling thread (its track in the timeline) and make it record for tr. */
void hs_trace_thread(hs_trace_t *tr, const char *name);
/* A track of tr named `name` that no thread owns (created on first use), for work that runs
 * on whichever thread is at hand: the simulator runs a pure service's handler on the thread
 * that delivers its message, often another rank's. One writer at a time (the caller's
 * business: the simulator's baton); the calling thread's own buffer is left as it was. */
hs_trace_thr_t *hs_trace_track(hs_trace_t *tr, const char *name);

/* A span of `name` (begin ... end, properly nested per thread). */
static inline void hs_trace_begin(hs_trace_t *tr, int name, int64_t arg)
{
    if (__builtin_expect(tr != NULL, 0)) hs_trace_ev(tr, 'B', name, -1, 0, arg);
}

static inline void hs_trace_end(hs_trace_t *tr, int name)
{
    if (__builtin_expect(tr != NULL, 0)) hs_trace_ev(tr, 'E', name, -1, 0, 0);
}

/* An "apply" span for a received message: begin with its flow end (buf, st: the message as
 * received, before it is touched), ... hs_trace_end(tr, HS_TR_APPLY). */
void hs_trace_apply_begin(hs_trace_t *tr, int me, const void *buf, const struct hs_tstatus *st);
/* The same for a message of len bytes from src with tag, when no status is at hand. */
void hs_trace_apply_msg(hs_trace_t *tr, int me, int src, uint32_t tag, const void *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
