/*
 * optim/dist_wait.c — the two waits every algorithm (and the loop's evaluation collector)
 * makes on its peers, written once (hearsay/algo.h, "Waiting for peers"):
 *
 *   hs_dist_wait_reqs   wait on a set of requests until all have ended, each wait bounded;
 *   hs_dist_wait_sends  the same under one bound for the whole wait, prolonged while the
 *                       heartbeats vouch for a peer a request is still pending on;
 *   hs_dist_late_peer   the verdict on a peer a wait is stuck on: keep waiting, silent past
 *                       the bound (unless the heartbeats vouch for it), or exited (a probe).
 */
#include "hearsay/algo.h"
#include "hearsay/common.h"

/* Wait until every request of reqs[0..n) is NULL. bound > 0: each single wait gets `limit` s;
 * else `limit` bounds the whole wait, prolonged by 0.25 s at a time while hs_dist_keep_waiting
 * says so for one of the peers whose requests are pending. */
static int wait_core(hs_exec_t *x, const hs_dist_t *d, const int *peers, hs_treq_t **reqs, int n,
                     double limit, unsigned flags, hs_dist_req_fn fn, void *ctx, int each)
{
    double t0 = each ? 0 : hs_exec_now(x);
    for (;;) {
        int left = 0;
        for (int i = 0; i < n; i++) left += reqs[i] != NULL;
        if (!left) return 0;
        int idx = -1, rc;
        hs_tstatus_t st;
        if (each) {
            rc = hs_exec_wait(x, reqs, n, limit, flags, &idx, &st);
        } else {
            double remain = limit - (hs_exec_now(x) - t0);
            /* (the wait serves the loop's idle hook meanwhile) */
            rc = remain > 0 ? hs_exec_wait(x, reqs, n, remain, flags, &idx, &st) : -ETIMEDOUT;
        }
        if (rc == -ETIMEDOUT && idx < 0) {
            if (each) return rc;
            /* a peer that still heartbeats is blocked, not frozen: wait on (bounded) */
            int patient = 0;
            for (int i = 0; i < n; i++)
                patient |= reqs[i] && hs_dist_keep_waiting(d, peers[i], hs_exec_now(x) - t0, limit);
            if (!patient) return rc;
            hs_error_clear();
            limit = hs_exec_now(x) - t0 + 0.25;
            continue;
        }
        if (rc < 0 && idx < 0) return rc;
        if (idx < 0) continue;
        if (!fn) {
            if (rc < 0) return rc;
            continue;
        }
        int frc = fn(ctx, idx, rc, rc < 0 ? NULL : &st);
        if (frc < 0) return frc;
    }
}

int hs_dist_wait_reqs(hs_exec_t *x, hs_treq_t **reqs, int n, double limit, unsigned flags,
                      hs_dist_req_fn fn, void *ctx)
{
    return wait_core(x, NULL, NULL, reqs, n, limit, flags, fn, ctx, 1);
}

int hs_dist_wait_sends(hs_dist_t *d, hs_treq_t **reqs, const int *peers, int n, double limit,
                       hs_dist_req_fn fn, void *ctx)
{
    return wait_core(d->x, d, peers, reqs, n, limit, 0, fn, ctx, 0);
}

int hs_dist_late_peer(hs_dist_t *d, int peer, const hs_dist_late_t *l)
{
    if (l->silent && (!l->heartbeats || !hs_dist_keep_waiting(d, peer, l->quiet, l->limit)))
        return HS_LATE_SILENT;
    if (l->probe && !hs_exec_alive(d->x, peer, l->probe_s)) return HS_LATE_EXITED;
    return HS_LATE_WAIT;
}
