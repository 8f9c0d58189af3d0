/*
 * runtime/rejoin.c — the notices of a replacement that joins a running job (runtime/rejoin.h):
 * one pure service per rank queues them; the training loop takes them at its iteration
 * boundaries (runtime/train.c).
 */
#include "runtime/rejoin.h"

#include "hearsay/algo.h"
#include "hearsay/common.h"
#include "hearsay/transport.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define RJ_MAGIC   0x4e494f4au /* "JOIN" */
#define RJ_VERSION 1u
#define RJ_SLOTS   2

typedef struct {
    uint32_t magic, version;
    int32_t kind, rank;
    int64_t iter;
} rj_wire_v1_t;

struct hs_rejoin {
    hs_exec_t *x;
    int rank, size;
    hs_service_t *svc;
    hs_rejoin_ev_t *q;         /* (cap) received, not yet taken: [head, n) */
    unsigned char *restarting; /* (size) HELLO came, not joined yet */
    size_t head, n, cap;
};

static int rj_msg(void *ctx, int slot, const void *buf, const hs_tstatus_t *st)
{
    hs_rejoin_t *rj = ctx;
    (void)slot;
    const rj_wire_v1_t *m = buf;
    if (st->len != sizeof *m || m->magic != RJ_MAGIC || m->version != RJ_VERSION ||
        m->rank != st->source || m->rank < 0 || m->rank >= rj->size || m->kind < HS_RJ_REQ ||
        m->kind > HS_RJ_HELLO || m->iter < 0)
        return HS_ERR(-EPROTO, "rank %d: a malformed rejoin notice from rank %d (%zu bytes)",
                      rj->rank, st->source, st->len);
    int rc = 0;
    hs_svc_lock(rj->x, rj->svc);
    if (m->kind == HS_RJ_HELLO) {
        rj->restarting[m->rank] = 1;
        goto out;
    }
    if (rj->n == rj->cap) {
        if (rj->head > 0) {
            memmove(rj->q, rj->q + rj->head, (rj->n - rj->head) * sizeof *rj->q);
            rj->n -= rj->head;
            rj->head = 0;
        }
        if (rj->n == rj->cap) {
            size_t cap = rj->cap ? 2 * rj->cap : 8;
            hs_rejoin_ev_t *q = realloc(rj->q, cap * sizeof *q);
            if (!q) {
                rc = HS_ERR(-ENOMEM, "rank %d: no memory for rejoin notices", rj->rank);
                goto out;
            }
            rj->q = q;
            rj->cap = cap;
        }
    }
    rj->q[rj->n++] = (hs_rejoin_ev_t){.kind = m->kind, .rank = m->rank, .iter = (long)m->iter};
out:
    hs_svc_unlock(rj->x, rj->svc);
    return rc;
}

int hs_rejoin_start(hs_rejoin_t **out, hs_exec_t *x, int rank, int size)
{
    *out = NULL;
    if (!x || !x->t || size < 2) return HS_ERR(-EINVAL, "rejoin notices need a transport");
    hs_rejoin_t *rj = hs_calloc(1, sizeof *rj, "rejoin notices");
    if (!rj) return -ENOMEM;
    rj->x = x;
    rj->rank = rank;
    rj->size = size;
    if (!(rj->restarting = hs_calloc((size_t)size, 1, "restarted ranks"))) {
        free(rj);
        return -ENOMEM;
    }
    static const int src[RJ_SLOTS] = {HS_ANY_SOURCE, HS_ANY_SOURCE};
    static const uint32_t tag[RJ_SLOTS] = {HS_TAG_REJOIN, HS_TAG_REJOIN};
    hs_service_desc_t sd = {.name = "rejoin notices",
                            .n_slots = RJ_SLOTS,
                            .slot_bytes = sizeof(rj_wire_v1_t),
                            .src = src,
                            .tag = tag,
                            .on_msg = rj_msg,
                            .ctx = rj,
                            .flags = HS_SVC_PURE};
    int rc = hs_svc_start(x, &sd, &rj->svc);
    if (rc < 0) {
        free(rj->restarting);
        free(rj);
        return rc;
    }
    *out = rj;
    return 0;
}

int hs_rejoin_next(hs_rejoin_t *rj, hs_rejoin_ev_t *ev)
{
    if (!rj) return 0;
    HS_TRY(hs_svc_error(rj->x, rj->svc)); /* (a malformed notice) */
    hs_svc_lock(rj->x, rj->svc);
    int got = rj->head < rj->n;
    if (got) *ev = rj->q[rj->head++];
    if (rj->head == rj->n) rj->head = rj->n = 0;
    hs_svc_unlock(rj->x, rj->svc);
    return got;
}

int hs_rejoin_restarting(hs_rejoin_t *rj, int peer)
{
    if (!rj || peer < 0 || peer >= rj->size) return 0;
    hs_svc_lock(rj->x, rj->svc);
    int v = rj->restarting[peer];
    hs_svc_unlock(rj->x, rj->svc);
    return v;
}

void hs_rejoin_joined(hs_rejoin_t *rj, int peer)
{
    if (!rj || peer < 0 || peer >= rj->size) return;
    hs_svc_lock(rj->x, rj->svc);
    rj->restarting[peer] = 0;
    hs_svc_unlock(rj->x, rj->svc);
}

int hs_rejoin_notify(hs_rejoin_t *rj, int peer, int kind, long iter, double timeout_s)
{
    rj_wire_v1_t m = {
        .magic = RJ_MAGIC, .version = RJ_VERSION, .kind = kind, .rank = rj->rank, .iter = iter};
    hs_treq_t *req = NULL;
    HS_TRY(hs_transport_isend(rj->x->t, peer, HS_TAG_REJOIN, &m, sizeof m, &req));
    int rc = hs_exec_wait1(rj->x, &req, timeout_s, HS_WAIT_NO_IDLE, NULL);
    if (rc == -ETIMEDOUT) {
        hs_transport_req_free(rj->x->t, &req);
        return HS_ERR(-ETIMEDOUT, "a rejoin notice to rank %d did not leave in %.1f s", peer,
                      timeout_s);
    }
    return rc;
}

void hs_rejoin_stop(hs_rejoin_t **rj)
{
    if (!rj || !*rj) return;
    hs_svc_stop((*rj)->x, &(*rj)->svc);
    free((*rj)->q);
    free((*rj)->restarting);
    free(*rj);
    *rj = NULL;
}
