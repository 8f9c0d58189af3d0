/*
 * runtime/heartbeat.h — failure detection by heartbeats, with suspicion and fencing
 * (docs/failure-model.md).
 *
 * Every rank runs one service (hearsay/exec.h) that sends a small heartbeat to every other
 * rank each period (--fail-timeout / 8, at most 0.5 s) and receives theirs. A SIGSTOPped
 * process stops every thread, its heartbeat service too; a rank that is merely blocked in a
 * wait (for a frozen peer, say) keeps heartbeating. So the waits for peers' messages
 * (--comm-timeout) no longer decide that a peer failed on their own: a peer is
 *   - alive      while its heartbeats come,
 *   - suspected  after --fail-timeout / 2 without one,
 *   - fenced     after --fail-timeout without one: it is out of the job for good. Its later
 *                messages are refused (push-sum: their weight is counted as refused, never
 *                mixed), every heartbeat tells it so (the fenced set rides on each), and the
 *                fence spreads to the ranks that had not seen it yet.
 * A rank that was stopped longer than --fail-timeout knows it on waking (its own last
 * heartbeat is that old) and fences itself before it sends anything: the training loop ends
 * it with status HS_EXIT_FENCED and a message naming it. A rank stopped for less carries on;
 * while its own heartbeat service lags it judges nobody (its peers' silence is its own).
 * The last heartbeat of a rank that finishes says goodbye: a finished rank is never fenced.
 * In virtual time no process can be stopped (a pause there is a slow rank, which would
 * heartbeat): every rank is alive, with no messages, until one is excluded (hs_hb_fence).
 */
#ifndef HEARSAY_RUNTIME_HEARTBEAT_H
#define HEARSAY_RUNTIME_HEARTBEAT_H

#include "hearsay/exec.h"

#include <stddef.h>

#define HS_EXIT_FENCED 71 /* a fenced rank's exit status (an injected crash: 70) */

/* hs_hb_state / hs_dist_t.peer_hb */
#define HS_HB_OFF     (-1) /* no heartbeats (one rank, virtual time, --fail-timeout 0) */
#define HS_HB_ALIVE   0
#define HS_HB_SUSPECT 1 /* silent for more than half the fail timeout */
#define HS_HB_FENCED  2 /* out of the job (for the own rank: this rank was fenced) */

typedef struct hs_hb hs_hb_t;

/* Start the heartbeats of `rank` (x's transport; size > 1, fail_s > 0). Virtual time (every
 * rank in this process): vblocked and vblocked_at (size each, shared by the ranks; vblocked
 * -1 where none; NULL: no blocked waits known) stand for the heartbeats' blocked field. */
int hs_hb_start(hs_hb_t **out, hs_exec_t *x, int rank, int size, double fail_s, int *vblocked,
                double *vblocked_at);
/* This rank waits for `peer` alone past a bound (called by each slice of such a wait; -1: for
 * several ranks, which names none): its next heartbeats say so while it is noted again within a
 * fail timeout. Thread-safe. */
void hs_hb_note_wait(hs_hb_t *hb, int peer);
/* This rank was stopped for `secs` (virtual time: an injected freeze, just thawed): longer
 * than the fail timeout, it is fenced (the others took it for frozen), and every rank is told.
 * The wall clock sees it by itself (its own heartbeats' age). */
void hs_hb_stopped(hs_hb_t *hb, double secs);
/* The rank `peer` is blocked on (its heartbeats say it waits for it past a bound), or -1. */
int hs_hb_blocked_on(hs_hb_t *hb, int peer);
/* The state of `peer` (the own rank: HS_HB_FENCED once this rank knows it was fenced).
 * Thread-safe. NULL: HS_HB_OFF. */
int hs_hb_state(hs_hb_t *hb, int peer);
/* Exclude `peer` (a live rank this one gave up waiting for: slow past every bound): fence it
 * here, and let the others know (the wall clock: the next heartbeats carry the fenced set;
 * virtual time: a notice to every rank), so that it is told and stops, and its later
 * messages are refused everywhere. Thread-safe. */
int hs_hb_fence(hs_hb_t *hb, int peer, const char *why);
/* The reason `peer` (or this rank) was fenced, "" when it was not. Thread-safe. */
void hs_hb_why(hs_hb_t *hb, int peer, char *buf, size_t len);
/* The fences this rank has not reported yet: the first such peer (marked reported), or -1. */
int hs_hb_next_fenced(hs_hb_t *hb);
/* Say goodbye (a last heartbeat to every rank, not waited for) and stop; *hb = NULL. */
void hs_hb_stop(hs_hb_t **hb);

#endif
