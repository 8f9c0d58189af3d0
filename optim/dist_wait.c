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

#include <string.h>

/* The lowest-numbered peer of peers[0..n) with a request pending that the heartbeats have
 * fenced, or -1. */
static int fenced_among(const hs_dist_t *d, const int *peers, hs_treq_t **reqs, int n)
{
    int q = -1;
    for (int i = 0; i < n; i++)
        if (reqs[i] && hs_dist_peer_hb(d, peers[i]) == 2 && (q < 0 || peers[i] < q)) q = peers[i];
    return q;
}

/* Wait until every request of reqs[0..n) is NULL. each: every single wait gets `limit` s
 * (with heartbeats: from the last progress), else `limit` bounds the whole wait.
 * With heartbeats (d and peers given, hs_dist_peer_hb >= 0) the wait is cut in slices of at
 * most HB_SLICE s: a pending peer found fenced ends it at once (-ETIMEDOUT naming the rank),
 * and past the bound it goes on while hs_dist_keep_waiting vouches for one of the pending
 * peers (it heartbeats: blocked, not frozen). Without heartbeats (the simulator,
 * --fail-timeout 0) it makes exactly the waits it made before there were heartbeats. */
#define HB_SLICE 0.25
/* A bound closer than this counts as reached: in virtual time a wait of less than the clock's
 * resolution at its value (now + 1e-12 == now at now = 60 s) would not move the clock, and
 * the loop would wait on the same instant for ever. */
#define BOUND_EPS 1e-9
static int wait_core(hs_exec_t *x, const hs_dist_t *d, const int *peers, hs_treq_t **reqs, int n,
                     double limit, unsigned flags, hs_dist_req_fn fn, void *ctx, int each)
{
    int hb = d && peers && hs_dist_peer_hb(d, d->rank) >= 0;
    double t0 = hs_exec_now(x), bound = limit; /* bound: prolonged past limit */
    for (;;) {
        int left = 0;
        for (int i = 0; i < n; i++) left += reqs[i] != NULL;
        if (!left) return 0;
        int idx = -1, rc;
        hs_tstatus_t st;
        double remain = bound - (hs_exec_now(x) - t0);
        if (hb) {
            /* (the wait serves the loop's idle hook meanwhile) */
            double w = HS_MIN(remain, HB_SLICE);
            rc = w > BOUND_EPS ? hs_exec_wait(x, reqs, n, w, flags, &idx, &st) : -ETIMEDOUT;
        } else if (each) {
            rc = hs_exec_wait(x, reqs, n, limit, flags, &idx, &st);
        } else {
            rc = remain > BOUND_EPS ? hs_exec_wait(x, reqs, n, remain, flags, &idx, &st)
                                    : -ETIMEDOUT;
        }
        if (rc == -ETIMEDOUT && idx < 0) {
            if (!hb) {
                if (each) return rc;
                /* (no heartbeats: hs_dist_keep_waiting says 0) */
                int patient = 0;
                for (int i = 0; i < n && d; i++)
                    patient |=
                        reqs[i] && hs_dist_keep_waiting(d, peers[i], hs_exec_now(x) - t0, limit);
                if (!patient) return rc;
                hs_error_clear();
                bound = hs_exec_now(x) - t0 + HB_SLICE;
                continue;
            }
            double waited = hs_exec_now(x) - t0;
            int q = fenced_among(d, peers, reqs, n);
            if (q >= 0)
                return HS_ERR(-ETIMEDOUT,
                              "rank %d was fenced (no heartbeat for more than --fail-timeout "
                              "%.3g s: frozen or cut off), after waiting %.1f s for it",
                              q, d->o->fail_timeout_s, waited);
            hs_error_clear();
            if (waited < bound - BOUND_EPS) continue; /* a slice ended, not the wait */
            /* a peer that still heartbeats is blocked, not frozen: wait on (bounded); this
             * rank is blocked on that peer, when it is the only one pending */
            int one = -1, many = 0;
            for (int i = 0; i < n; i++)
                if (reqs[i] && one < 0)
                    one = peers[i];
                else if (reqs[i] && peers[i] != one)
                    many = 1;
            hs_dist_note_wait(d, many ? -1 : one);
            int patient = 0;
            for (int i = 0; i < n; i++)
                patient |= reqs[i] && hs_dist_keep_waiting(d, peers[i], waited, limit);
            if (!patient)
                return HS_ERR(-ETIMEDOUT,
                              "no progress in %.1f s (the bound %.3g s, prolonged while the "
                              "peers heartbeat, by up to 3 x --fail-timeout)",
                              waited, limit);
            bound = waited + HB_SLICE;
            continue;
        }
        if (rc < 0 && idx < 0) return rc;
        if (idx < 0) continue;
        if (each && hb) t0 = hs_exec_now(x), bound = limit; /* progress: the bound anew */
        if (!fn) {
            if (rc < 0) return rc;
            continue;
        }
        int frc = fn(ctx, idx, rc, rc < 0 ? NULL : &st);
        if (frc < 0) return frc;
    }
}

typedef struct wait1 {
    hs_tstatus_t *st;
} wait1_t;

static int wait1_done(void *ctx, int idx, int rc, const hs_tstatus_t *st)
{
    wait1_t *w = ctx;
    (void)idx;
    if (rc < 0) return rc;
    *w->st = *st;
    return 0;
}

int hs_dist_wait_reqs(hs_exec_t *x, hs_treq_t **reqs, int n, double limit, unsigned flags,
                      hs_dist_req_fn fn, void *ctx)
{
    return wait_core(x, NULL, NULL, reqs, n, limit, flags, fn, ctx, 1);
}

int hs_dist_wait_peers(hs_dist_t *d, hs_treq_t **reqs, const int *peers, int n, double limit,
                       unsigned flags, hs_dist_req_fn fn, void *ctx)
{
    return wait_core(d->x, d, peers, reqs, n, limit, flags, fn, ctx, 1);
}

int hs_dist_wait_sends(hs_dist_t *d, hs_treq_t **reqs, const int *peers, int n, double limit,
                       hs_dist_req_fn fn, void *ctx)
{
    return wait_core(d->x, d, peers, reqs, n, limit, 0, fn, ctx, 0);
}

int hs_dist_fenced_peer(const hs_dist_t *d)
{
    for (int q = 0; q < d->size; q++)
        if (q != d->rank && hs_dist_peer_hb(d, q) == 2) return q;
    return -1;
}

int hs_dist_patient_all(const hs_dist_t *d, double waited, double limit)
{
    if (hs_dist_peer_hb(d, d->rank) < 0 || hs_dist_fenced_peer(d) >= 0) return 0;
    return waited < limit + 3 * d->o->fail_timeout_s;
}

int hs_dist_wait_one(hs_dist_t *d, hs_treq_t **req, int peer, double limit, unsigned flags,
                     hs_tstatus_t *st)
{
    if (!*req) return 0;
    hs_tstatus_t tmp;
    wait1_t w = {.st = st ? st : &tmp};
    return wait_core(d->x, d, &peer, req, 1, limit, flags, wait1_done, &w, 1);
}

int hs_dist_late_peer(hs_dist_t *d, int peer, const hs_dist_late_t *l)
{
    if (l->silent && l->heartbeats) hs_dist_note_wait(d, peer); /* (the one it waits for) */
    if (l->silent && (!l->heartbeats || !hs_dist_keep_waiting(d, peer, l->quiet, l->limit)))
        return HS_LATE_SILENT;
    if (l->probe && !hs_exec_alive(d->x, peer, l->probe_s)) return HS_LATE_EXITED;
    return HS_LATE_WAIT;
}

int hs_dist_heartbeats(const hs_dist_t *d)
{
    /* (as the training loop decides: runtime/train.c, on the wall clock their messages, in
     * virtual time their verdict: this rank's own state is then not -1) */
    return d->o->fail_timeout_s > 0 && d->size > 1 && hs_dist_peer_hb(d, d->rank) >= 0;
}

int hs_dist_collective_patience(void *ctx, double waited, double limit)
{
    const hs_dist_t *d = ctx;
    if (hs_dist_fenced_peer(d) >= 0) return 0;
    return waited < limit || hs_dist_patient_all(d, waited, limit);
}

int hs_dist_name_fenced(const hs_dist_t *d, int rc)
{
    int q = rc < 0 ? hs_dist_fenced_peer(d) : -1;
    if (q >= 0)
        hs_error_prefix("rank %d was fenced (no heartbeat for more than --fail-timeout %.3g s: "
                        "frozen or cut off) and this synchronous algorithm cannot go on without "
                        "it",
                        q, d->o->fail_timeout_s);
    return rc;
}
