/*
 * optim/neighbor_xchg.h — the synchronous neighbour exchange of D-PSGD (optim/dpsgd.c),
 * CHOCO-SGD (optim/choco.c) and the compressed push-sum (optim/qsgp.c), private to optim/.
 *
 * A round: wait for the previous round's sends (their buffer is about to be overwritten), post
 * one receive per in-peer, send to every out-peer, wait for every receive of round t, handing
 * each message to the algorithm as it arrives. Messages from one peer arrive in order on one
 * tag and a peer cannot be more than one round ahead (it needs this worker's round-t message to
 * finish round t), so the receive posted per peer and round matches that round. A failed peer
 * is reported (hs_dist_peer_failed) and stops the run with an error naming the round. Time
 * spent waiting goes to d->st.wait_s (less what the handler adds to d->st.comm_s); received
 * bytes and applied messages to d->st.bytes_recv and msgs_applied, sent bytes to bytes_sent.
 */
#ifndef HS_OPTIM_NEIGHBOR_XCHG_H
#define HS_OPTIM_NEIGHBOR_XCHG_H

#include "hearsay/algo.h"
#include "optim/ps_wire.h"

/* A received message of round t in receive slot `slot` (from peer from[slot]): check it and
 * fold it in; < 0 stops the wait with that error. */
typedef int (*hs_nx_recv_fn)(void *ctx, int slot, const unsigned char *msg, const hs_tstatus_t *st,
                             long t);

typedef struct hs_nx {
    hs_dist_t *d;
    const char *name;         /* the algorithm, in messages ("D-PSGD") */
    int maxdeg;               /* slots, each way */
    int nsend;                /* sends of the last round not yet waited for */
    size_t cap;               /* bytes of one receive buffer */
    const int *to, *from;     /* (maxdeg) the peer of each send / receive slot (the caller's) */
    unsigned char **rbuf;     /* (maxdeg) (cap) receive buffers */
    hs_treq_t **sreq, **rreq; /* (maxdeg) */
} hs_nx_t;

/* Allocate maxdeg receive buffers of cap bytes and the requests; to and from are the caller's
 * peer arrays (the same one for an undirected graph), read at every send / wait. On failure
 * hs_nx_finalize frees what was allocated. */
int hs_nx_init(hs_nx_t *x, hs_dist_t *d, const char *name, int maxdeg, size_t cap, const int *to,
               const int *from);
/* Free pending requests, buffers and arrays (safe on a zeroed or half-built hs_nx_t). */
void hs_nx_finalize(hs_nx_t *x);

/* Wait for the previous round's (t) sends. */
int hs_nx_wait_sends(hs_nx_t *x, long t);
/* Post a receive into rbuf[i] from from[i] for i < cnt. */
int hs_nx_post_recvs(hs_nx_t *x, int cnt, int tag);
/* Send len bytes of buf to to[slot] (buf must stay untouched until hs_nx_wait_sends). */
int hs_nx_send(hs_nx_t *x, int slot, int tag, const void *buf, size_t len);
/* Wait for the cnt receives of round t, calling fn on each message as it arrives. */
int hs_nx_wait_recvs(hs_nx_t *x, int cnt, long t, hs_nx_recv_fn fn, void *ctx);
/* The end of a run: wait for the last sends (the algorithm's drain). */
int hs_nx_drain(hs_nx_t *x);

/* A message of round t: an error naming both rounds when it is of another one. */
int hs_nx_check_round(const hs_nx_t *x, const hs_ps_hdr_v1_t *h, const hs_tstatus_t *st, long t);
/* A compressed message (HS_PS_COMPRESSED: header, then h->extra compressed bytes of an n-float
 * vector) of round t; weighted: the push-sum weight must be >= 0. */
int hs_nx_check_compressed(const hs_nx_t *x, const hs_ps_hdr_v1_t *h, const hs_tstatus_t *st,
                           size_t n, long t, int weighted);

/* Wait for each of reqs[0..n) (bounded by --comm-timeout, errors ignored) and free it. */
void hs_nx_wait_free(hs_dist_t *d, hs_treq_t **reqs, int n);
/* Free the requests of reqs[0..n) that are not NULL (and set them to NULL). */
void hs_nx_free_reqs(hs_dist_t *d, hs_treq_t **reqs, int n);

#endif
