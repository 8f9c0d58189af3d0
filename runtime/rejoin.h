/*
 * runtime/rejoin.h — a replacement of a crashed rank joins the running job
 * (--straggler crash:RANKS:iter=N:rejoin=D; docs/failure-model.md, "A rank that rejoins").
 *
 * The protocol, at iteration boundaries of the training loops (no barrier, no pause of the
 * others):
 *   0. the replacement R first tells every live rank that it restarted (a HELLO notice): from
 *      then until it has joined, every rank takes R for dead (hs_rejoin_restarting), so that
 *      none waits for a message of the process that crashed (a restart quicker than the
 *      liveness checks would otherwise leave the others waiting for it, and it for them);
 *   1. the replacement R (hs_exec_t.incarnation > 0) builds its worker and algorithm as any
 *      rank does, skips the start-up barrier, and asks a live rank, a graph neighbour first
 *      (the donor), for its state: a REQ notice;
 *   2. the donor, at the top of its next iteration K, lets the algorithm split what must not
 *      be copied (push-sum: it halves its weight and hands the half over, so the mass stays
 *      N), and sends its state (hearsay/checkpoint.h: parameters, velocity, running
 *      statistics, the algorithm's state) with K;
 *   3. R loads it, starts its loop at K, and tells every other live rank (a JOINED notice
 *      with K); each forgets R's failure at its next iteration boundary and lets its
 *      algorithm take R back from there (hs_algo_ops_t.rejoin).
 * Every rank of a job with a replacement keeps one pure service that receives the notices
 * (any source, tag HS_TAG_REJOIN); the state goes on HS_TAG_REJOIN_ST, straight to R.
 */
#ifndef HEARSAY_RUNTIME_REJOIN_H
#define HEARSAY_RUNTIME_REJOIN_H

#include "hearsay/exec.h"

enum { HS_RJ_REQ = 1, HS_RJ_JOINED = 2, HS_RJ_HELLO = 3 };

typedef struct hs_rejoin hs_rejoin_t;

typedef struct hs_rejoin_ev {
    int kind;  /* HS_RJ_* */
    int rank;  /* who sent it: the replacement */
    long iter; /* JOINED: its first iteration; REQ: its incarnation */
} hs_rejoin_ev_t;

/* Start this rank's notice service. */
int hs_rejoin_start(hs_rejoin_t **out, hs_exec_t *x, int rank, int size);
/* The oldest notice not taken yet into *ev: 1; 0 when there is none; < 0: the service's
 * error (a malformed notice). */
int hs_rejoin_next(hs_rejoin_t *rj, hs_rejoin_ev_t *ev);
/* 1 while `peer` has restarted (its HELLO came) and not yet joined here (hs_rejoin_joined). */
int hs_rejoin_restarting(hs_rejoin_t *rj, int peer);
/* `peer` has joined here (its JOINED notice was acted on). */
void hs_rejoin_joined(hs_rejoin_t *rj, int peer);
/* Send a notice to peer and wait for it to leave (bounded by timeout_s). */
int hs_rejoin_notify(hs_rejoin_t *rj, int peer, int kind, long iter, double timeout_s);
/* Stop the service (NULL and *rj == NULL are fine). */
void hs_rejoin_stop(hs_rejoin_t **rj);

#endif
