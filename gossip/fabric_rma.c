/*
 * gossip/fabric_rma.c — memory windows over libfabric: registration (fi_mr_reg with remote
 * read/write), key exchange over CTRL messages, one-sided fi_write / fi_read in chunks, and
 * float/double atomic add (fi_atomic FI_SUM) where the provider has it.
 */
#include "gossip/fabric.h"
#include "hearsay/common.h"

#include <rdma/fi_atomic.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct hs_twin {
    struct fid_mr *mr;
    char *buf;
    size_t len;
    unsigned id;
    hs_fab_win_v1_t *remote; /* (size) every rank's descriptor */
};

void hs_fab_query_atomics(fab_t *f)
{
    static const enum fi_datatype dt[2] = {FI_FLOAT, FI_DOUBLE};
    for (int i = 0; i < 2; i++) {
        struct fi_atomic_attr attr;
        size_t count = 0;
        f->atomic_ok[i] = fi_query_atomic(f->domain, dt[i], FI_SUM, &attr, 0) == 0 &&
                          fi_atomicvalid(f->ep, dt[i], FI_SUM, &count) == 0 && count > 0;
    }
}

int hs_fab_post_rma_locked(fab_t *f, fab_op_t *op)
{
    fi_addr_t a = f->addrs[op->peer];
    switch (op->kind) {
    case OP_WRITE:
        return (int)fi_write(f->ep, op->buf, op->len, NULL, a, op->raddr, op->rkey, &op->fctx);
    case OP_READ:
        return (int)fi_read(f->ep, op->buf, op->len, NULL, a, op->raddr, op->rkey, &op->fctx);
    case OP_ATOMIC:
        return (int)fi_atomic(f->ep, op->buf, op->len / (size_t)op->dtype, NULL, a, op->raddr,
                              op->rkey, op->dtype == 4 ? FI_FLOAT : FI_DOUBLE, FI_SUM, &op->fctx);
    default:
        return -FI_EINVAL;
    }
}

int hs_fab_win_create(hs_transport_t *t, void *buf, size_t len, hs_twin_t **win)
{
    fab_t *f = t->impl;
    *win = NULL;
    if (!(f->info->caps & FI_RMA))
        return HS_ERR(-ENOSYS, "rank %d: libfabric provider %s has no RMA (memory windows)",
                      t->rank, f->prov);
    hs_twin_t *w = hs_calloc(1, sizeof *w, "window");
    if (!w) return -ENOMEM;
    w->remote = hs_calloc((size_t)t->size, sizeof *w->remote, "window descriptors");
    hs_treq_t **rq = hs_calloc(2 * (size_t)t->size, sizeof *rq, "window exchange");
    int rc = 0;
    if (!w->remote || !rq) {
        rc = -ENOMEM;
        goto fail;
    }
    w->buf = buf;
    w->len = len;
    pthread_mutex_lock(&f->lock);
    w->id = f->win_seq++;
    uint64_t want_key = f->next_key++;
    pthread_mutex_unlock(&f->lock);
    hs_fab_win_v1_t mine = {.magic = HS_FAB_WIN_MAGIC, .version = HS_FAB_WIRE_VERSION};
    if (len > 0) {
        int ret =
            fi_mr_reg(f->domain, buf, len, FI_REMOTE_WRITE | FI_REMOTE_READ | FI_WRITE | FI_READ, 0,
                      want_key, 0, &w->mr, NULL);
        if (ret) {
            char what[64];
            snprintf(what, sizeof what, "(window of %zu bytes)", len);
            rc = hs_fab_err(f, ret, "fi_mr_reg", -1, what);
            goto fail;
        }
        mine.base = f->mr_virt ? (uint64_t)(uintptr_t)buf : 0;
        mine.len = len;
        mine.key = fi_mr_key(w->mr);
    }
    w->remote[t->rank] = mine;
    /* Everyone sends its descriptor to everyone (start-up only: n^2 small messages). */
    uint32_t tag = HS_FAB_CTRL_WIN | ((w->id & 0xFFFFu) << 8);
    for (int p = 0; p < t->size && rc == 0; p++) {
        if (p == t->rank) continue;
        rc = hs_fab_irecv_any(t, 1, p, tag, 0, &w->remote[p], sizeof w->remote[p], &rq[2 * p]);
        if (rc == 0) rc = hs_fab_isend_any(t, 1, p, tag, &mine, sizeof mine, &rq[2 * p + 1]);
    }
    for (int left = 2 * (t->size - 1); rc == 0 && left > 0; left--) {
        int idx;
        rc = hs_fab_waitany(t, rq, 2 * t->size, t->opts.timeout_s, &idx, NULL);
    }
    for (int i = 0; i < 2 * t->size; i++)
        if (rq[i]) hs_fab_req_free(t, &rq[i]);
    if (rc < 0) {
        hs_error_prefix("creating memory window %u", w->id);
        goto fail;
    }
    for (int p = 0; p < t->size; p++) {
        if (w->remote[p].magic != HS_FAB_WIN_MAGIC || w->remote[p].version != HS_FAB_WIRE_VERSION) {
            rc = HS_ERR(-EPROTO, "rank %d: window %u descriptor from rank %d is malformed", t->rank,
                        w->id, p);
            goto fail;
        }
    }
    free(rq);
    *win = w;
    return 0;
fail:
    free(rq);
    hs_fab_win_free(t, &w);
    return rc;
}

void hs_fab_win_free(hs_transport_t *t, hs_twin_t **win)
{
    (void)t;
    if (!win || !*win) return;
    if ((*win)->mr) fi_close(&(*win)->mr->fid);
    free((*win)->remote);
    HS_FREE(*win);
}

/* Queue len bytes of RMA between buf and target's window at offset, in chunks. */
static int rma(hs_transport_t *t, hs_twin_t *w, enum fab_op_kind kind, int target, size_t offset,
               char *buf, size_t len, int dtype, hs_treq_t **req)
{
    fab_t *f = t->impl;
    const hs_fab_win_v1_t *d = &w->remote[target];
    if (offset > d->len || len > d->len - offset)
        return HS_ERR(-EINVAL,
                      "rank %d: %s of %zu bytes at offset %zu is past the end of rank %d's "
                      "window %u (%llu bytes)",
                      t->rank,
                      kind == OP_WRITE  ? "put"
                      : kind == OP_READ ? "get"
                                        : "atomic add",
                      len, offset, target, w->id, (unsigned long long)d->len);
    /* A shaped link paces one-sided bytes as it paces messages (chunks of ~2 ms of its
     * bandwidth, each released at the link model's time). A get's bytes travel from the
     * target, whose shaper this rank cannot drive: they are charged to this rank's link to
     * the target (the same link for every symmetric rule: '*', A-B, a host). */
    int shaped = target != t->rank && hs_shaper_active(f->shaper, target);
    size_t c = shaped ? hs_shaper_chunk(f->shaper, target, f->chunk) : f->chunk;
    if (kind == OP_ATOMIC) {
        size_t count = 0;
        if (fi_atomicvalid(f->ep, dtype == 4 ? FI_FLOAT : FI_DOUBLE, FI_SUM, &count) || !count)
            count = 1;
        c = HS_MIN(c, count * (size_t)dtype);
        c -= c % (size_t)dtype;
        if (!c) c = (size_t)dtype;
    }
    size_t n = len ? (len + c - 1) / c : 1;
    pthread_mutex_lock(&f->lock);
    hs_treq_t *r = hs_fab_req_new(f, REQ_RMA, target, 0);
    if (!r) goto nomem;
    if (n > 1 && !(r->ops = hs_calloc(n - 1, sizeof *r->ops, "RMA chunks"))) {
        hs_fab_req_release_locked(f, r);
        goto nomem;
    }
    r->buf = buf;
    r->cap = len;
    r->nchunks = (unsigned)n;
    double now = hs_now(), first_release = 0;
    for (size_t k = 0; k < n; k++) {
        fab_op_t *op = k == 0 ? &r->op0 : &r->ops[k - 1];
        size_t off = k * c;
        op->req = r;
        op->kind = kind;
        op->peer = target;
        op->chunk = (unsigned)k;
        op->buf = buf + off;
        op->len = HS_MIN(c, len - off);
        op->raddr = d->base + offset + off;
        op->rkey = d->key;
        op->dtype = dtype;
        op->release = shaped ? hs_shaper_release(f->shaper, target, op->len, now) : 0;
        if (k == 0) first_release = op->release;
        hs_fab_enqueue_locked(f, op);
    }
    hs_fab_progress_locked(f);
    *req = r;
    pthread_mutex_unlock(&f->lock);
    if (shaped && first_release > now) hs_fab_wake_thread(f);
    return 0;
nomem:
    pthread_mutex_unlock(&f->lock);
    return -ENOMEM;
}

int hs_fab_put(hs_transport_t *t, hs_twin_t *w, int target, size_t offset, const void *buf,
               size_t len, hs_treq_t **req)
{
    return rma(t, w, OP_WRITE, target, offset, (char *)buf, len, 0, req);
}

int hs_fab_get(hs_transport_t *t, hs_twin_t *w, int target, size_t offset, void *buf, size_t len,
               hs_treq_t **req)
{
    return rma(t, w, OP_READ, target, offset, buf, len, 0, req);
}

int hs_fab_atomic_add(hs_transport_t *t, hs_twin_t *w, int target, size_t offset, const void *buf,
                      size_t n, int dtype, hs_treq_t **req)
{
    fab_t *f = t->impl;
    if (dtype != 4 && dtype != 8)
        return HS_ERR(-EINVAL, "atomic add: element size %d (expected 4 or 8)", dtype);
    if (!(f->info->caps & FI_ATOMIC) || !f->atomic_ok[dtype == 8])
        return HS_ERR(-ENOSYS,
                      "rank %d: libfabric provider %s has no %s atomic add (fall back to "
                      "messages)",
                      t->rank, f->prov, dtype == 4 ? "float" : "double");
    if (offset % (size_t)dtype)
        return HS_ERR(-EINVAL, "atomic add: offset %zu is not a multiple of %d", offset, dtype);
    return rma(t, w, OP_ATOMIC, target, offset, (char *)buf, n * (size_t)dtype, dtype, req);
}
