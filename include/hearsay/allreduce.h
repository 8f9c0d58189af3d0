/*
 * hearsay/allreduce.h — all-reduce of a flat float buffer over the transport (a ring, or
 * direct reads of the peers' buffers on one host).
 *
 * The synchronous baseline (all-reduce SGD) averages its flat gradient every step with a
 * ring all-reduce: a reduce-scatter followed by an all-gather, 2(n-1) steps that each move
 * one segment (N/n elements) to the right neighbour. Every segment is cut into chunks that
 * are pipelined across steps: chunk k of step s+1 leaves as soon as chunk k of step s has
 * arrived and been added, receives are posted ahead, and sends go straight from the user's
 * buffer (no copy). Reduce-scatter receives land in scratch slots and are added in place;
 * all-gather receives land directly in the user's buffer.
 *
 * On one host with the shared-memory transport (hsshm) the default is one of two direct
 * paths instead, both with a small control block per rank in shared memory that every peer
 * maps (set up once per plan with two small message exchanges; then counters and futex
 * waits, no messages):
 *  - mapped, when every rank's buffer lies in memory of hs_transport_buf_alloc (as all-reduce
 *    SGD allocates its gradients, like NCCL's registered buffers or MPI_Alloc_mem): the peers
 *    map each other's buffers, and each rank sums its own segment straight from every buffer
 *    and writes the sum into every buffer (non-temporal stores), a cache-sized chunk at a
 *    time: each rank reads its buffer's worth and writes its buffer's worth, the least memory
 *    traffic an all-reduce can make, no system call on the way. Two waits per operation:
 *    every peer has entered, every peer has written its segment here.
 *  - direct, otherwise: each rank sums its own segment by reading the others' straight from
 *    their memory (hs_transport_peer_read: one copy, in cache-sized chunks), waits until
 *    every rank is done, copies the other finished segments straight into its buffer, and
 *    waits until nobody reads any more.
 * Each segment is summed by one rank, in rank order: every rank ends with bit-identical
 * values. Neither needs a descheduled peer to run for a copy to happen, which matters when
 * ranks outnumber cores. Which one runs is decided per operation from what every rank
 * published when it entered, so the ranks always agree. HS_AR_PATH=direct (or a transport
 * that reads peers but shares no buffers) runs the direct path with small all-to-all message
 * exchanges in place of the control blocks (three per operation).
 *
 * A plan (hs_allreduce_t) is made once per buffer length and reused on the hot path: it
 * holds the scratch slots and the request tables, so a call allocates nothing in this
 * module. Tags are taken from a reserved range (opts.tag_base .. tag_base + tag_span) and
 * advance with an operation counter, so back-to-back calls never mix; other traffic on the
 * same transport must stay out of that range. Every rank must call with the same length
 * and in the same order (it is a collective).
 *
 * Waiting blocks in the transport (hs_transport_waitany: the CQ's wait object, never a
 * spin), bounded by opts.timeout_s: a dead or hung neighbour gives an error naming the
 * peer, the step and the chunk within that bound, and the call cancels its requests. The
 * direct paths poll their counters briefly (64 polls) and then sleep on a futex, bounded the
 * same way: a rank that exited is named at once, a late one after the timeout, and a rank
 * that gives up tells the others (they stop waiting for it and never write into its buffer
 * again, except a chunk already being written). After a failure on a path with control blocks
 * the plan only returns errors: make a new one.
 */
#ifndef HEARSAY_ALLREDUCE_H
#define HEARSAY_ALLREDUCE_H

#include "hearsay/transport.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The default tag range: the top 1/16 of the user tag space. */
#define HS_ALLREDUCE_TAG_BASE 0xF00000u
#define HS_ALLREDUCE_TAG_SPAN 0x100000u

typedef struct hs_allreduce hs_allreduce_t;

typedef struct hs_allreduce_opts {
    size_t chunk_bytes; /* pipeline chunk (0 = default 1 MiB; HS_AR_CHUNK_BYTES overrides) */
    int depth;          /* receives outstanding at most (0 = default: all of a call's, posted
                           when it starts; scratch then holds (n-1)/n of the buffer) */
    double timeout_s;   /* bound on every wait (0 = the transport's opts.timeout_s) */
    uint32_t tag_base;  /* first tag of the reserved range (0 = HS_ALLREDUCE_TAG_BASE) */
    uint32_t tag_span;  /* tags in the range (0 = HS_ALLREDUCE_TAG_SPAN) */
    int average;        /* 1: divide the sum by the number of ranks */
    int path;           /* HS_AR_PATH_AUTO (on one host mapped where every rank's buffer is
                           shared memory, else direct where the transport can read peers'
                           memory: hsshm, else the ring), _RING (one flat ring), _DIRECT,
                           _MAPPED or _HIER (hierarchical across hosts, see host_of);
                           HS_AR_PATH=auto|ring|direct|mapped|hier */
    const int *host_of; /* (ranks) the host of each rank, NULL: one host. Ranks on several
                           hosts, as many on each: the hierarchical all-reduce (_HIER)
                           reduce-scatters within each host, all-reduces each shard across the
                           hosts (a ring of the ranks with the same place on their hosts), and
                           gathers within the host: each host's link carries 2 (H - 1) / H of
                           the buffer where a flat ring of the H x R ranks carries
                           2 (HR - 1) / HR. Must outlive the plan. */
    /* Optional (NULL: every wait ends at timeout_s): asked while a wait goes on, every 0.25 s,
     * with the time waited without progress and timeout_s: 1 keeps waiting (past timeout_s
     * too: the ranks are only slow, a frozen one makes everyone wait until it wakes), 0 ends
     * the wait with -ETIMEDOUT (a rank is out of the job: the caller names it). */
    int (*patience)(void *ctx, double waited, double timeout_s);
    void *patience_ctx;
} hs_allreduce_opts_t;

enum {
    HS_AR_PATH_AUTO = 0,
    HS_AR_PATH_RING = 1,
    HS_AR_PATH_DIRECT = 2,
    HS_AR_PATH_MAPPED = 3,
    HS_AR_PATH_HIER = 4
};

/* Fill `o` with the defaults (sum, default chunk, depth and timeout, default tag range),
 * then apply HS_AR_CHUNK_BYTES, HS_AR_DEPTH and HS_AR_PATH from the environment where set. Returns
 * 0 or -EINVAL naming the bad variable. */
int hs_allreduce_opts_default(hs_allreduce_opts_t *o);

/* Make a plan for all-reducing buffers of n floats over transport t (which must outlive the
 * plan). opts NULL = hs_allreduce_opts_default. Checks the options (tag range inside
 * 0..HS_TAG_MAX) and allocates the scratch slots. Not collective: talks to nobody. */
int hs_allreduce_create(hs_allreduce_t **out, hs_transport_t *t, size_t n,
                        const hs_allreduce_opts_t *opts);
/* A plan over some of the transport's ranks only: members[0..n_members) are transport ranks
 * (distinct, this rank among them), the ring in that order; the pipelined ring path (the
 * others need every rank). Other ranks may run other groups' plans at the same time on the
 * same tags: a pair of ranks belongs to one group. */
int hs_allreduce_create_group(hs_allreduce_t **out, hs_transport_t *t, size_t n,
                              const hs_allreduce_opts_t *opts, const int *members, int n_members);
/* Free a plan and null the handle (NULL is fine). */
void hs_allreduce_destroy(hs_allreduce_t **ar);

/* Collective: replace buf[0..n) on every rank by the element-wise sum over ranks (divided
 * by the number of ranks when the plan's opts.average is set). One rank: no-op (or nothing
 * to divide). Returns 0, or a negative code with a message naming the peer, the step and
 * the chunk (-ETIMEDOUT after opts.timeout_s without progress, -ECONNRESET when a
 * neighbour has exited); after an error buf holds partial sums. */
// (n) buf
int hs_allreduce_run(hs_allreduce_t *ar, float *buf);
/* Like hs_allreduce_run, overriding the plan's average flag for this call. */
// (n) buf
int hs_allreduce_run_avg(hs_allreduce_t *ar, float *buf, int average);

/* Length (floats) the plan was made for, and operations run so far (also failed ones). */
size_t hs_allreduce_len(const hs_allreduce_t *ar);
uint64_t hs_allreduce_count(const hs_allreduce_t *ar);

/* One-shot convenience: make a plan, run it once, free it. Back-to-back calls are safe
 * (each call consumes exactly its own messages: same-tag messages match in order), but
 * the hot path should keep a plan. */
// (n) buf
int hs_allreduce_sum(hs_transport_t *t, float *buf, size_t n, const hs_allreduce_opts_t *o);

#ifdef __cplusplus
}
#endif
#endif
