/*
 * optim/center_impl.h — private to the EASGD center (optim/center.c: set-up and the owner's
 * service; optim/center_client.c: the client every rank uses, by messages or by RMA).
 */
#ifndef HEARSAY_OPTIM_CENTER_IMPL_H
#define HEARSAY_OPTIM_CENTER_IMPL_H

#include "hearsay/algo.h"
#include "hearsay/common.h"
#include "hearsay/compress.h"
#include "optim/center.h"
#include "optim/elastic_wire.h"

#include <stdatomic.h>

#define HDR sizeof(hs_el_hdr_v1_t)

struct hs_center {
    hs_exec_t *x;
    hs_transport_t *t;
    int rank, size;
    size_t n;
    double timeout_s;
    hs_dist_t *d;              /* heartbeats (hs_center_heartbeats; NULL: none) */
    uint32_t tag_req, tag_rep; /* tag_base + CENTER_TAG_REQ, + CENTER_TAG_REP */
    int m;                     /* shards */
    int *owner;                /* (m) */
    size_t *off;               /* (m + 1) */
    int own;                   /* own shard or -1 */
    int rma;        /* 1: one-sided path (window + float atomics), 0: service-thread path */
    unsigned half;  /* 0, HS_EL_FP16 or HS_EL_BF16: what this rank's replies and adds carry */
    hs_twin_t *win; /* rma: this rank's window = its shard (0 bytes when it owns none) */

    /* client (main thread only) */
    unsigned char **abuf, **rbuf, **qbuf; /* (m) add payloads, replies, small requests */
    hs_treq_t **areq, **rreq, **qreq;     /* (m) */
    long *adds_sent;                      /* (m) */
    char *lost;                           /* (m) */
    hs_center_stats_t st;

    /* shared with the service, under its lock (center_lock) */
    float *shard;       /* (len of own shard) */
    long applied;       /* adds applied to the own shard */
    long *applied_from; /* (size) */
    long *fin_adds;     /* (size) -1: no FIN yet, else adds that rank posted here */
    char *answered;     /* (size) final shard sent */
    char *dead;         /* (size) */
    long refused;       /* messages of fenced ranks refused (their adds never applied) */
    /* replacements (runtime/rejoin.h): every request carries its sender's incarnation (the
     * header's pad); the newest heard from each rank (a newer one's counts start again; an
     * older one's adds are applied, never counted, its FIN ignored) */
    int inc;     /* this process's */
    int *inc_of; /* (size) */
    int final;

    /* the owner's service (NULL when this rank owns no shard) */
    hs_service_t *svc;
    unsigned char **obuf; /* (size) reply buffers, allocated on first use */
    hs_treq_t **oreq;     /* (size) */
    /* bytes the service sent (replies) and received (requests, adds, FINs) since the client
     * last read its stats (hs_center_stats moves them into st) */
    _Atomic uint64_t svc_sent, svc_recv;
};

static inline size_t shard_len(const hs_center_t *c, int s)
{
    return c->off[s + 1] - c->off[s];
}

/* The service lock (no-op when this rank runs no service: nothing runs beside its client). */
static inline void center_lock(hs_center_t *c)
{
    hs_svc_lock(c->x, c->svc);
}

static inline void center_unlock(hs_center_t *c)
{
    hs_svc_unlock(c->x, c->svc);
}

#endif
