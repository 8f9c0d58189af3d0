/*
 * optim/center.h — the sharded center variable of EASGD: one-sided float atomics into the
 * owners' windows where the provider has them, else message-passing owners.
 *
 * The center x~ (n floats) is split into m contiguous shards, shard s = [n s / m, n (s+1) / m),
 * owned by rank owners[s] (by default every rank owns one shard). Each owner runs a service
 * (hearsay/exec.h) that keeps receives posted (HS_ANY_SOURCE, tag CENTER_TAG_REQ) and answers:
 *   READ   -> a copy of its shard (tag CENTER_TAG_REP);
 *   ADD    -> shard += the elastic difference, under the shard's lock: one owner applies every
 *             add, so concurrent adds are never lost or torn;
 *   FIN    -> "I have finished and sent you k adds": once every live rank has finished and
 *             all its adds are applied, the final shard goes back to each of them.
 * It answers while the owner's main thread computes, sleeps (a straggler) or waits, so no
 * worker ever waits for another worker's computation. The owner's own client reads and adds
 * under the same lock without messages. A shard whose owner died (its liveness check fails)
 * is marked unavailable: reads leave the caller's slice untouched and adds skip it.
 *
 * One client per hs_center_t (the rank's main thread); the service is internal.
 *
 * The RMA path (chosen at open when the provider has float SUM atomics, e.g. tcp;ofi_rxm):
 * every rank registers its shard as a memory window (collectively, at open); a read is a get
 * of every shard, an add is a float atomic add into every owner's window, the owner's own
 * shard included (the provider applies remote atomics from its progress thread, so the owner
 * must not add with a plain store). A get is not atomic as a whole: a read may see another
 * rank's add on part of a shard only (each float is whole). At the end each rank completes
 * its atomics (completion = applied at the target) and then sends FIN as on the service path;
 * the owner's thread then only handles FINs and the final replies (docs/algorithms.md).
 */
#ifndef HEARSAY_OPTIM_CENTER_H
#define HEARSAY_OPTIM_CENTER_H

#include "hearsay/exec.h"

#include <stddef.h>
#include <stdint.h>

/* The center's message tags: offsets from the tag base given to hs_center_open. */
enum { CENTER_TAG_REQ = 0, CENTER_TAG_REP = 1 };

typedef struct hs_center hs_center_t;
struct hs_dist; /* hearsay/algo.h */

/* Traffic and waiting the client accumulated (the caller reads and zeroes it). */
typedef struct hs_center_stats {
    uint64_t bytes_sent, bytes_recv;
    double wait_s;
    long msgs; /* shards received */
} hs_center_stats_t;

/* Parse a rank list ("0", "0,2-3", "all"; NULL or "" = all) of a job of `size` ranks into a
 * sorted list without duplicates: *out (caller frees) with *n entries. Ranks are digits only;
 * -EINVAL quotes the spec and names the bad part. size <= 0: the job size is unknown (flag
 * checks at start): only the grammar is checked and no list is made (out and n may be NULL). */
int hs_center_parse_owners(const char *spec, int size, int **out, int *n);

/* Open the center of this rank over x's transport. owners: n_owners ranks (NULL = every rank, in
 * order); init: (n) host floats, the initial center (only the own shard is read); timeout_s bounds
 * every wait for an owner. path: "auto", "rma" or "service" (NULL or "": $HS_CENTER_PATH,
 * else auto). "auto" and "rma" are collective (every rank creates the window and probes one
 * atomic add; start-up only): auto uses RMA when the provider has float atomics, else the
 * service; "rma" fails without them. "service" is not collective. Starts the service
 * when this rank owns a shard. Its messages use tags tag_base + CENTER_TAG_* (the EASGD
 * algorithm's hs_dist_tag(d, 0)). */
int hs_center_open(hs_center_t **out, hs_exec_t *x, size_t n, const float *init, const int *owners,
                   int n_owners, double timeout_s, const char *path, uint32_t tag_base);
/* Send this rank's replies and adds as fp16 (bf16 = 0) or bf16 (service path only: -EINVAL on
 * the one-sided path). Received messages are decoded by their own flag. */
int hs_center_set_half(hs_center_t *c, int bf16);
/* Wait on owners and workers by the heartbeats of d (hs_dist_wait_peers): one that heartbeats
 * (or is only suspected) is waited for past timeout_s, bounded; a fenced one is given up at
 * once, and its later messages (adds, reads, FIN) are refused by the service. Call right
 * after hs_center_open, with heartbeats only (hs_dist_heartbeats). */
void hs_center_heartbeats(hs_center_t *c, struct hs_dist *d);
/* Messages of fenced ranks the service refused. */
long hs_center_refused(hs_center_t *c);
/* The path in use: "rma" or "service". */
const char *hs_center_path(const hs_center_t *c);
/* Stop the service and free everything; *c = NULL. Call after hs_center_finish (or
 * when the run failed). Never blocks on peers. */
void hs_center_close(hs_center_t **c);

/* Read every available shard into dst (n host floats); slices of unavailable shards are left
 * as they are. Blocks (bounded) for the owners' replies only. Returns the number of shards
 * that became unavailable during this call (>= 0), or a negative error. */
int hs_center_read(hs_center_t *c, float *dst);
/* Send diff (n host floats) to be added to every available shard; returns once the adds are
 * posted (own shard: applied). The previous adds' sends are completed first. Returns the
 * number of shards found unavailable (>= 0), or a negative error. */
int hs_center_add(hs_center_t *c, const float *diff);
/* End of the run: tell every owner this rank is done, receive the final shards into dst
 * (n floats; unavailable shards untouched), and keep serving until every live rank has its
 * final copy of this rank's shard. Ranks that exit without finishing are detected by the
 * transport's liveness check; a rank silent for timeout_s is given up. Returns the number of
 * unavailable shards (>= 0) or a negative error. */
int hs_center_finish(hs_center_t *c, float *dst, double timeout_s);

int hs_center_num_shards(const hs_center_t *c);
/* Shard s: owner rank, offset and length in floats. */
void hs_center_shard(const hs_center_t *c, int s, int *owner, size_t *off, size_t *len);
/* 1 when shard s can no longer be reached (its owner died). */
int hs_center_shard_lost(const hs_center_t *c, int s);
/* 1 when rank r is known to have died (seen by this client or the service). */
int hs_center_rank_dead(hs_center_t *c, int r);
/* The shard this rank owns (-1: none). */
int hs_center_own_shard(const hs_center_t *c);
/* Adds applied to the own shard so far (local and remote); -1 on the RMA path (not counted). */
long hs_center_adds_applied(hs_center_t *c);
hs_center_stats_t *hs_center_stats(hs_center_t *c);

/* Checkpoint the own shard: size in bytes, copy out / in (under the lock). */
/* A replacement of rank r joined (runtime/rejoin.h): the shards r owns are back, the adds
 * sent to them are counted from 0 (the new owner's counts). */
int hs_center_rejoined(hs_center_t *c, int r);
/* This rank is a replacement: its own shard starts from x (n floats, host: the donor's model;
 * the shard of the crashed process is gone). */
int hs_center_adopt(hs_center_t *c, const float *x);
size_t hs_center_state_bytes(const hs_center_t *c);
int hs_center_state_save(hs_center_t *c, void *buf);
int hs_center_state_load(hs_center_t *c, const void *buf);

#endif
