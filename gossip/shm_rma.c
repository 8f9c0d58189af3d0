/*
 * gossip/shm_rma.c — one-sided access over hsshm: memory windows (descriptors exchanged over
 * CTRL messages; put and get copy straight between the processes with process_vm_writev /
 * readv, no remote atomics) and direct reads of a peer's buffer (hs_transport_peer_read).
 */
#include "gossip/shm_impl.h"
#include "gossip/transport_impl.h"
#include "hearsay/common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

struct hs_twin {
    size_t len;
    hs_shm_win_v1_t *remote; /* (size) */
};

/* --- windows: one copy between the processes ----------------------------------------------- */

int hs_shm_win_create(hs_transport_t *t, void *buf, size_t len, hs_twin_t **win)
{
    shm_t *s = t->impl;
    int n = t->size;
    /* (the job's ranks created their windows together at start-up, long before) */
    if (s->incarnation > 0)
        return HS_ERR(-ENOSYS,
                      "rank %d: a replacement cannot create a window: creating one is collective, "
                      "and the job's other ranks are past it",
                      t->rank);
    struct hs_twin *w = hs_calloc(1, sizeof *w, "window");
    if (!w) return -ENOMEM;
    w->len = len;
    w->remote = hs_calloc((size_t)n, sizeof *w->remote, "window descriptors");
    hs_treq_t **rq = hs_calloc(2 * (size_t)n, sizeof *rq, "window exchange");
    if (!w->remote || !rq) {
        free(w->remote);
        free(w);
        free(rq);
        return -ENOMEM;
    }
    hs_shm_win_v1_t mine = {HS_SHM_WIN_MAGIC, HS_SHM_WIRE_VERSION, (uint64_t)(uintptr_t)buf, len};
    w->remote[t->rank] = mine;
    uint32_t tag = HS_SHM_CTRL_WIN | ((s->win_seq++ & 0xFFFFu) << 8);
    int rc = 0;
    for (int p = 0; p < n && rc == 0; p++) {
        if (p == t->rank) continue;
        rc = hs_shm_irecv_any(t, 1, p, tag, 0, &w->remote[p], sizeof w->remote[p], &rq[2 * p]);
        if (rc == 0) rc = hs_shm_isend_any(t, 1, p, tag, &mine, sizeof mine, &rq[2 * p + 1]);
    }
    for (int left = 2 * (n - 1); rc == 0 && left > 0; left--) {
        int idx;
        rc = hs_shm_waitany(t, rq, 2 * n, t->opts.timeout_s, &idx, NULL);
    }
    for (int i = 0; i < 2 * n; i++)
        if (rq[i]) hs_shm_req_free(t, &rq[i]);
    free(rq);
    for (int p = 0; p < n && rc == 0; p++)
        if (w->remote[p].magic != HS_SHM_WIN_MAGIC || w->remote[p].version != HS_SHM_WIRE_VERSION)
            rc = HS_ERR(-EPROTO, "rank %d: rank %d sent a malformed window descriptor", t->rank, p);
    if (rc < 0) {
        free(w->remote);
        free(w);
        hs_error_prefix("creating a window");
        return rc;
    }
    *win = w;
    return 0;
}

void hs_shm_win_free(hs_transport_t *t, hs_twin_t **win)
{
    (void)t;
    if (!win || !*win) return;
    free((*win)->remote);
    HS_FREE(*win);
}

static int rma(hs_transport_t *t, hs_twin_t *w, int target, size_t offset, void *buf, size_t len,
               int write, hs_treq_t **req)
{
    shm_t *s = t->impl;
    const hs_shm_win_v1_t *d = &w->remote[target];
    if (offset > d->len || len > d->len - offset)
        return HS_ERR(-EINVAL,
                      "rank %d: %s of %zu bytes at offset %zu is outside rank %d's window of "
                      "%llu bytes",
                      t->rank, write ? "put" : "get", len, offset, target,
                      (unsigned long long)d->len);
    if (target != t->rank && len && hs_shaper_active(s->shaper, target)) {
        /* A shaped link paces one-sided bytes too: the copy waits for the release time the
         * link model gives them (a get's bytes are charged to this rank's link to the target,
         * the same link for every symmetric rule). The copy is synchronous here, so the call
         * sleeps until then (no RMA user on hsshm is latency-critical: EASGD's center needs
         * remote atomics, which hsshm lacks, and takes messages). */
        pthread_mutex_lock(&s->lock);
        double rel = hs_shaper_release(s->shaper, target, len, hs_now());
        pthread_mutex_unlock(&s->lock);
        for (double now = hs_now(); now < rel; now = hs_now()) {
            double d = rel - now;
            struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
            nanosleep(&ts, NULL);
        }
    }
    struct hs_treq *r = hs_shm_req_new(REQ_RMA, target, 0);
    if (!r) return -ENOMEM;
    r->cap = r->len = len;
    r->complete = 1;
    if (target == t->rank) {
        char *base = (char *)(uintptr_t)d->base + offset;
        if (len) memmove(write ? base : (char *)buf, write ? buf : base, len);
    } else if (len) {
        struct iovec lo = {buf, len}, re = {(void *)(uintptr_t)(d->base + offset), len};
        pid_t pid = (pid_t)s->peers[target].addr.pid;
        ssize_t got = write ? process_vm_writev(pid, &lo, 1, &re, 1, 0)
                            : process_vm_readv(pid, &lo, 1, &re, 1, 0);
        if (got != (ssize_t)len) {
            int e = got < 0 ? errno : EIO;
            hs_shm_req_destroy(r);
            return HS_ERR(-e, "rank %d: %s of %zu bytes %s rank %d's window (pid %d) failed: %s%s",
                          t->rank, write ? "process_vm_writev" : "process_vm_readv", len,
                          write ? "into" : "from", target, (int)pid, strerror(e),
                          e == EPERM ? " (ptrace restrictions; use --provider tcp)" : "");
        }
    }
    *req = r;
    return 0;
}

int hs_shm_put(hs_transport_t *t, hs_twin_t *w, int target, size_t offset, const void *buf,
               size_t len, hs_treq_t **req)
{
    return rma(t, w, target, offset, (void *)buf, len, 1, req);
}

int hs_shm_get(hs_transport_t *t, hs_twin_t *w, int target, size_t offset, void *buf, size_t len,
               hs_treq_t **req)
{
    return rma(t, w, target, offset, buf, len, 0, req);
}

int hs_shm_atomic_add(hs_transport_t *t, hs_twin_t *w, int target, size_t offset, const void *buf,
                      size_t n, int dtype, hs_treq_t **req)
{
    (void)w, (void)target, (void)offset, (void)buf, (void)n, (void)dtype, (void)req;
    return HS_ERR(-ENOSYS,
                  "rank %d: the shared-memory transport (hsshm) has no remote atomics "
                  "(use the service path, or --provider tcp)",
                  t->rank);
}

/* --- direct reads ------------------------------------------------------------------------ */

int hs_shm_peer_read_ok(const hs_transport_t *t)
{
    const shm_t *s = t->impl;
    return s->peer_read_ok;
}

int hs_shm_peer_read(hs_transport_t *t, int peer, uint64_t remote, void *local, size_t len)
{
    shm_t *s = t->impl;
    if (!len) return 0;
    if (peer == t->rank) {
        memmove(local, (const void *)(uintptr_t)remote, len);
        return 0;
    }
    struct iovec lo = {local, len}, re = {(void *)(uintptr_t)remote, len};
    pid_t pid = (pid_t)s->peers[peer].addr.pid;
    ssize_t got = process_vm_readv(pid, &lo, 1, &re, 1, 0);
    if (got == (ssize_t)len) return 0;
    int e = got < 0 ? errno : EIO;
    if (e == ESRCH || hs_pid_gone((unsigned)pid))
        return HS_ERR(-ECONNRESET,
                      "rank %d: direct read of %zu bytes from rank %d: rank %d (pid %d) has "
                      "exited",
                      t->rank, len, peer, peer, (int)pid);
    return HS_ERR(-e, "rank %d: process_vm_readv of %zu bytes from rank %d (pid %d) failed: %s",
                  t->rank, len, peer, (int)pid, got < 0 ? strerror(e) : "short read");
}
