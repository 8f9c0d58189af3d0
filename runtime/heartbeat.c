/*
 * runtime/heartbeat.c — heartbeats, suspicion and fencing (runtime/heartbeat.h).
 *
 * Wire (tag HS_TAG_HEARTBEAT): a fixed header, then one byte per rank of the job: 1 where the
 * sender has fenced that rank. Version 1. The header's `blocked` (once a pad: 0 from builds
 * before it) is 1 + the rank the sender is blocked on, waiting past its bound (0: none).
 */
#include "runtime/heartbeat.h"

#include "hearsay/algo.h"
#include "hearsay/common.h"
#include "hearsay/env.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HB_MAGIC   0x48534842u /* "HSHB" */
#define HB_VERSION 1u
#define HB_BYE     0x1u /* flags: the sender finished its run (never fence it) */
#define WHY_MAX    160

typedef struct hb_wire_v1 {
    uint32_t magic, version;
    int32_t rank, size;
    uint32_t flags, blocked;
    uint64_t seq;
    /* then uint8_t fenced[size] */
} hb_wire_v1_t;

struct hs_hb {
    hs_exec_t *x;
    hs_transport_t *t;
    hs_service_t *svc;
    int rank, size;
    double fail_s, period_s;
    size_t bytes;       /* one heartbeat */
    size_t stride;      /* bytes rounded up to 16: buffers of consecutive heartbeats stay aligned */
    double *last;       /* (size) when each rank's last heartbeat came (svc lock) */
    unsigned char *st;  /* (size) HS_HB_ALIVE / HS_HB_FENCED (svc lock) */
    unsigned char *bye; /* (size) the rank finished */
    unsigned char *reported;
    char (*why)[WHY_MAX];
    hs_treq_t **req;       /* (size) the heartbeat in flight to each rank */
    unsigned char *obuf;   /* (size * stride) */
    double last_sent;      /* when this rank last sent its heartbeats (< 0: not yet) */
    double last_tick;      /* when the service last ran on_tick */
    double self_fenced_at; /* when this rank learnt it was fenced (< 0: not) */
    /* tests only (HS_TEST_FENCE_DEAF_RANK): this rank learns of its fence deaf_s late */
    double deaf_s, deaf_until; /* deaf_until: when it will (< 0: not fenced yet) */
    char deaf_why[WHY_MAX];
    uint64_t seq;
    int *src;
    uint32_t *tag;
    /* Blocked waits (hs_hb_note_wait): the rank this one waits for past a bound, and since
     * when (it counts while noted again within a fail timeout); each peer's, from its heartbeats
     * (wall clock) or from the process's table (virtual time: every rank in this process) */
    int blocked_on;
    double blocked_at;
    int *peer_blocked;   /* (size) wall clock: 1 + the rank each peer said it waits for */
    int *vblocked;       /* (size) virtual time: the shared table (hs_hb_start) */
    double *vblocked_at; /* (size) */
    /* Virtual time (HS_EXEC_VIRTUAL_CLOCK): no process can be stopped there, so no periodic
     * heartbeats: every rank is alive until one is excluded (hs_hb_fence), which sends a
     * notice (this wire, its fenced set) to every other rank. The per-rank tables are made at
     * the first fence (a simulated job of N ranks holds none of N x N bytes without one). */
    int virt;
};

/* The per-rank tables of the fence states and of the heartbeats (or notices) sent: made at
 * the start on the wall clock, at the first fence in virtual time. Each one missing is made
 * (hs_hb_stop frees what was); 0 or -ENOMEM. */
static int fence_tables(hs_hb_t *hb)
{
    size_t n = (size_t)hb->size;
    if (!hb->st) hb->st = hs_calloc(n, 1, "fence states");
    if (!hb->bye) hb->bye = hs_calloc(n, 1, "goodbyes");
    if (!hb->reported) hb->reported = hs_calloc(n, 1, "fences reported");
    if (!hb->why) hb->why = hs_calloc(n, sizeof *hb->why, "fence reasons");
    if (!hb->req) hb->req = hs_calloc(n, sizeof *hb->req, "heartbeat sends");
    if (!hb->obuf) hb->obuf = hs_calloc(n, hb->stride, "heartbeat buffers");
    return hb->st && hb->bye && hb->reported && hb->why && hb->req && hb->obuf ? 0 : -ENOMEM;
}

static void lock(hs_hb_t *hb)
{
    hs_svc_lock(hb->x, hb->svc);
}

static void unlock(hs_hb_t *hb)
{
    hs_svc_unlock(hb->x, hb->svc);
}

/* Fence q (lock held). */
static void fence_locked(hs_hb_t *hb, int q, const char *why)
{
    if (hb->st[q] == HS_HB_FENCED) return;
    if (q == hb->rank && hb->deaf_s > 0) { /* (tests) it carries on, sending, for deaf_s */
        double now = hs_exec_now(hb->x);
        if (hb->deaf_until < 0) {
            hb->deaf_until = now + hb->deaf_s;
            snprintf(hb->deaf_why, WHY_MAX, "%s", why);
            fprintf(stderr,
                    "rank %d: fenced, and learns it %.3g s late (HS_TEST_FENCE_DEAF_RANK): %s\n",
                    hb->rank, hb->deaf_s, why);
        }
        if (now < hb->deaf_until) return;
        why = hb->deaf_why;
    }
    hb->st[q] = HS_HB_FENCED;
    snprintf(hb->why[q], WHY_MAX, "%s", why);
    /* (virtual time: a notice's handler may run on the sender's thread, which must not read
     * this rank's clock; the time is used only by the wall clock's service) */
    if (q == hb->rank) hb->self_fenced_at = hb->virt ? 0 : hs_exec_now(hb->x);
}

static int hb_msg(void *ctx, int slot, const void *buf, const hs_tstatus_t *st)
{
    hs_hb_t *hb = ctx;
    (void)slot;
    const hb_wire_v1_t *h = buf;
    int src = st->source;
    if (st->len != hb->bytes || h->magic != HB_MAGIC || h->version != HB_VERSION ||
        h->rank != src || h->size != hb->size)
        return HS_ERR(-EPROTO, "rank %d: a malformed heartbeat from rank %d (%zu bytes)", hb->rank,
                      src, st->len);
    const unsigned char *f = (const unsigned char *)(h + 1);
    char why[WHY_MAX];
    lock(hb);
    if (hb->virt && fence_tables(hb) < 0) {
        unlock(hb);
        return HS_ERR(-ENOMEM, "rank %d: no memory for the fence tables", hb->rank);
    }
    if (hb->st[src] != HS_HB_FENCED) { /* a fenced rank's heartbeats are refused */
        if (hb->last) hb->last[src] = hs_exec_now(hb->x);
        if (hb->peer_blocked)
            hb->peer_blocked[src] = h->blocked <= (uint32_t)hb->size ? (int)h->blocked : 0;
        if (h->flags & HB_BYE) hb->bye[src] = 1;
        for (int q = 0; q < hb->size; q++) {
            if (!f[q] || q == src || hb->st[q] == HS_HB_FENCED) continue;
            if (q == hb->rank)
                snprintf(why, sizeof why,
                         hb->virt ? "fenced by rank %d, which gave up waiting for this rank "
                                    "(slow past every bound)"
                                  : "fenced by rank %d, which had no heartbeat from this rank "
                                    "for more than --fail-timeout %.3g s, or gave up waiting "
                                    "for it",
                         src, hb->fail_s);
            else
                snprintf(why, sizeof why,
                         "fenced by rank %d (no heartbeat for more than %.3g s, or excluded: "
                         "given up waiting for past every bound)",
                         src, hb->fail_s);
            fence_locked(hb, q, why);
        }
    }
    unlock(hb);
    return 0;
}

/* 1 + the rank this one is blocked on now (noted within a fail timeout), else 0 (lock held). */
static uint32_t blocked_now(const hs_hb_t *hb)
{
    /* (noted by each 0.25 s slice of the wait: a fail timeout without one, it has ended) */
    if (hb->blocked_on < 0 || hs_exec_now(hb->x) - hb->blocked_at > hb->fail_s) return 0;
    return (uint32_t)hb->blocked_on + 1;
}

/* One heartbeat to each other rank whose previous one has left (flags: HB_BYE or 0). */
static void send_all(hs_hb_t *hb, unsigned flags)
{
    hb->seq++;
    for (int p = 0; p < hb->size; p++) {
        if (p == hb->rank) continue;
        if (hb->req[p]) {
            int done = 0;
            if (hs_transport_test(hb->t, &hb->req[p], &done, NULL) < 0) {
                hs_error_clear();
                hs_transport_req_free(hb->t, &hb->req[p]);
            } else if (!done) {
                continue; /* a stopped rank's queue: one heartbeat in flight is enough */
            }
        }
        hb_wire_v1_t *h = (hb_wire_v1_t *)(hb->obuf + (size_t)p * hb->stride);
        *h = (hb_wire_v1_t){.magic = HB_MAGIC,
                            .version = HB_VERSION,
                            .rank = hb->rank,
                            .size = hb->size,
                            .flags = flags,
                            .blocked = blocked_now(hb),
                            .seq = hb->seq};
        unsigned char *f = (unsigned char *)(h + 1);
        for (int q = 0; q < hb->size; q++) f[q] = hb->st[q] == HS_HB_FENCED;
        if (hs_transport_isend(hb->t, p, HS_TAG_HEARTBEAT, h, hb->bytes, &hb->req[p]) < 0) {
            hs_error_clear(); /* an exited peer: liveness is reported elsewhere */
            hb->req[p] = NULL;
        }
    }
}

static int hb_tick(void *ctx)
{
    hs_hb_t *hb = ctx;
    double now = hs_exec_now(hb->x);
    lock(hb);
    if (hb->self_fenced_at >= 0) {
        /* the training loop ends a fenced rank at its next step or wait; should it be stuck
         * in a call that never comes back, the heartbeat service does (bounded) */
        double since = now - hb->self_fenced_at;
        if (since > hb->fail_s + 5.0) {
            fprintf(stderr,
                    "rank %d: fenced (%s); the training loop did not stop within %.1f s: "
                    "exiting with status %d\n",
                    hb->rank, hb->why[hb->rank], since, HS_EXIT_FENCED);
            fflush(NULL);
            _exit(HS_EXIT_FENCED);
        }
        unlock(hb);
        return 0;
    }
    if (hb->deaf_until >= 0 && now >= hb->deaf_until) { /* (tests) learns it now */
        fence_locked(hb, hb->rank, hb->deaf_why);
        unlock(hb);
        return 0;
    }
    if (hb->last_sent >= 0 && now - hb->last_sent > hb->fail_s) {
        char why[WHY_MAX];
        snprintf(why, sizeof why,
                 "this rank was stopped for %.1f s (no heartbeat sent), more than --fail-timeout "
                 "%.3g s: the others have fenced it",
                 now - hb->last_sent, hb->fail_s);
        fence_locked(hb, hb->rank, why);
        unlock(hb);
        return 0;
    }
    /* this service lagged (the process was stopped, or starved of CPU): the peers' silence
     * over that time is not theirs */
    if (now - hb->last_tick > hb->period_s)
        for (int p = 0; p < hb->size; p++)
            if (hb->st[p] != HS_HB_FENCED && hb->last[p] < now - (now - hb->last_tick))
                hb->last[p] += now - hb->last_tick - hb->period_s;
    hb->last_tick = now;
    if (hb->last_sent < 0 || now - hb->last_sent >= hb->period_s) {
        send_all(hb, 0);
        hb->last_sent = now;
    }
    for (int p = 0; p < hb->size; p++) {
        if (p == hb->rank || hb->bye[p] || hb->st[p] == HS_HB_FENCED) continue;
        double silent = now - hb->last[p];
        if (silent > hb->fail_s) {
            char why[WHY_MAX];
            snprintf(why, sizeof why,
                     "frozen: no heartbeat for %.1f s (--fail-timeout %.3g s), fenced", silent,
                     hb->fail_s);
            fence_locked(hb, p, why);
        }
    }
    unlock(hb);
    return 0;
}

int hs_hb_start(hs_hb_t **out, hs_exec_t *x, int rank, int size, double fail_s, int *vblocked,
                double *vblocked_at)
{
    *out = NULL;
    if (!x || !x->t || size < 2 || !(fail_s > 0))
        return HS_ERR(-EINVAL, "heartbeats need a transport, 2 ranks and --fail-timeout > 0");
    hs_hb_t *hb = hs_calloc(1, sizeof *hb, "heartbeats");
    if (!hb) return -ENOMEM;
    hb->x = x;
    hb->t = x->t;
    hb->rank = rank;
    hb->size = size;
    hb->fail_s = fail_s;
    hb->period_s = HS_MIN(0.5, fail_s / 8);
    hb->bytes = sizeof(hb_wire_v1_t) + (size_t)size;
    hb->stride = (hb->bytes + 15) & ~(size_t)15;
    hb->last_sent = -1;
    hb->self_fenced_at = -1;
    hb->blocked_on = -1;
    hb->vblocked = vblocked;
    hb->vblocked_at = vblocked_at;
    hb->deaf_until = -1;
    long deaf = -1;
    if (hs_env_long("HS_TEST_FENCE_DEAF_RANK", &deaf) < 0 ||
        (deaf == rank && hs_env_double("HS_TEST_FENCE_DEAF_S", &hb->deaf_s) < 0)) {
        HS_FREE(hb);
        return -EINVAL;
    }
    if (deaf != rank) hb->deaf_s = 0;
    if (hs_exec_caps(x) & HS_EXEC_VIRTUAL_CLOCK) { /* fence notices only: one receive */
        static const int any = HS_ANY_SOURCE;
        static const uint32_t tag = HS_TAG_HEARTBEAT;
        hb->virt = 1;
        hb->deaf_s = 0; /* (the test hook is the wall clock's) */
        hs_service_desc_t vd = {.name = "fence notices",
                                .n_slots = 1,
                                .slot_bytes = hb->bytes,
                                .src = &any,
                                .tag = &tag,
                                .on_msg = hb_msg,
                                .ctx = hb,
                                .flags = HS_SVC_PURE};
        int rc = hs_svc_start(x, &vd, &hb->svc);
        if (rc < 0) {
            hs_hb_stop(&hb);
            return rc;
        }
        *out = hb;
        return 0;
    }
    hb->last = hs_calloc((size_t)size, sizeof *hb->last, "heartbeat times");
    hb->peer_blocked = hs_calloc((size_t)size, sizeof *hb->peer_blocked, "blocked peers");
    hb->src = hs_calloc((size_t)size, sizeof *hb->src, "heartbeat sources");
    hb->tag = hs_calloc((size_t)size, sizeof *hb->tag, "heartbeat tags");
    if (fence_tables(hb) < 0 || !hb->last || !hb->src || !hb->tag || !hb->peer_blocked) {
        hs_hb_stop(&hb);
        return -ENOMEM;
    }
    double now = hs_exec_now(x);
    hb->last_tick = now;
    int n = 0;
    for (int p = 0; p < size; p++) {
        hb->last[p] = now;
        if (p != rank) hb->src[n] = p, hb->tag[n++] = HS_TAG_HEARTBEAT;
    }
    hs_service_desc_t sd = {.name = "heartbeats",
                            .n_slots = n,
                            .slot_bytes = hb->bytes,
                            .src = hb->src,
                            .tag = hb->tag,
                            .on_msg = hb_msg,
                            .on_tick = hb_tick,
                            .ctx = hb};
    int rc = hs_svc_start(x, &sd, &hb->svc);
    if (rc < 0) {
        hs_hb_stop(&hb);
        return rc;
    }
    *out = hb;
    return 0;
}

int hs_hb_state(hs_hb_t *hb, int peer)
{
    if (!hb || peer < 0 || peer >= hb->size) return HS_HB_OFF;
    lock(hb);
    if (hb->virt) { /* alive until excluded, or frozen (--straggler freeze) as long as this */
        int v = hb->st ? hb->st[peer] : HS_HB_ALIVE;
        unlock(hb);
        if (v == HS_HB_ALIVE && peer != hb->rank) {
            double fz = hs_exec_frozen_for(hb->x, peer);
            if (fz > hb->fail_s)
                v = HS_HB_FENCED; /* (it fences itself, and says so, when it thaws) */
            else if (fz > hb->fail_s / 2)
                v = HS_HB_SUSPECT;
        }
        return v;
    }
    double now = hs_exec_now(hb->x);
    int s = hb->st[peer];
    if (peer == hb->rank) {
        /* the loop asks before it sends: a stop longer than the fail timeout is seen here
         * first when the service has not run since */
        if (s != HS_HB_FENCED && hb->last_sent >= 0 && now - hb->last_sent > hb->fail_s) {
            char why[WHY_MAX];
            snprintf(why, sizeof why,
                     "this rank was stopped for %.1f s (no heartbeat sent), more than "
                     "--fail-timeout %.3g s: the others have fenced it",
                     now - hb->last_sent, hb->fail_s);
            fence_locked(hb, peer, why);
            s = hb->st[peer]; /* (HS_TEST_FENCE_DEAF_RANK: not yet) */
        }
    } else if (s != HS_HB_FENCED && !hb->bye[peer] && now - hb->last_tick < 2 * hb->period_s &&
               now - hb->last[peer] > hb->fail_s / 2) {
        s = HS_HB_SUSPECT; /* (judged only while this rank's own service keeps time) */
    }
    unlock(hb);
    return s;
}

int hs_hb_fence(hs_hb_t *hb, int peer, const char *why)
{
    if (!hb || peer < 0 || peer >= hb->size || peer == hb->rank) return 0;
    lock(hb);
    int rc = hb->virt ? fence_tables(hb) : 0;
    if (rc == 0 && hb->st[peer] != HS_HB_FENCED) {
        fence_locked(hb, peer, why);
        /* a heartbeat (virtual time: a notice) to every rank now, not at the next period: a
         * rank that did not give up on the peer itself keeps sending it push-sum shares until
         * it knows, and a training step is much shorter than a period (measured: 4 ranks of
         * sgp, a rank excluded after a 12 s pause; one that learnt it from the next
         * heartbeats sent it half its weight every other step for 70 steps, and the
         * survivors' weights fell to 0.005 of 4, the loss to 6e29) */
        send_all(hb, 0);
    }
    unlock(hb);
    return rc < 0 ? HS_ERR(rc, "rank %d: no memory for the fence tables", hb->rank) : 0;
}

void hs_hb_why(hs_hb_t *hb, int peer, char *buf, size_t len)
{
    if (!len) return;
    buf[0] = '\0';
    if (!hb || peer < 0 || peer >= hb->size) return;
    lock(hb);
    if (hb->st && hb->st[peer] == HS_HB_FENCED) snprintf(buf, len, "%s", hb->why[peer]);
    unlock(hb);
}

int hs_hb_next_fenced(hs_hb_t *hb)
{
    if (!hb) return -1;
    int q = -1;
    /* virtual time: a rank frozen (--straggler freeze) longer than the fail timeout is fenced
     * by every rank, as the heartbeats' silence would on the wall clock */
    for (int p = -1; hb->virt && (p = hs_exec_frozen_next(hb->x, p)) >= 0;) {
        double fz = hs_exec_frozen_for(hb->x, p);
        if (p == hb->rank || !(fz > hb->fail_s)) continue;
        char why[WHY_MAX];
        snprintf(why, sizeof why, "frozen: no heartbeat for %.1f s (--fail-timeout %.3g s), fenced",
                 fz, hb->fail_s);
        lock(hb);
        if (fence_tables(hb) == 0) fence_locked(hb, p, why);
        unlock(hb);
    }
    lock(hb);
    for (int p = 0; p < hb->size && q < 0 && hb->st; p++)
        if (p != hb->rank && hb->st[p] == HS_HB_FENCED && !hb->reported[p]) {
            hb->reported[p] = 1;
            q = p;
        }
    unlock(hb);
    return q;
}

void hs_hb_stopped(hs_hb_t *hb, double secs)
{
    if (!hb || !(secs > hb->fail_s)) return;
    char why[WHY_MAX];
    snprintf(why, sizeof why,
             "this rank was stopped for %.1f s, more than --fail-timeout %.3g s: the others have "
             "fenced it",
             secs, hb->fail_s);
    lock(hb);
    if (fence_tables(hb) == 0 && hb->st[hb->rank] != HS_HB_FENCED) {
        fence_locked(hb, hb->rank, why);
        send_all(hb, 0); /* (virtual time: every rank knows it now, and refuses it) */
    }
    unlock(hb);
}

void hs_hb_note_wait(hs_hb_t *hb, int peer)
{
    if (!hb || peer >= hb->size || peer == hb->rank) return;
    if (peer < 0) peer = -1; /* (several, or none) */
    double now = hs_exec_now(hb->x);
    if (hb->virt) { /* (the process's table: one rank runs at a time) */
        if (hb->vblocked) hb->vblocked[hb->rank] = peer, hb->vblocked_at[hb->rank] = now;
        return;
    }
    lock(hb);
    hb->blocked_on = peer;
    hb->blocked_at = now;
    unlock(hb);
}

int hs_hb_blocked_on(hs_hb_t *hb, int peer)
{
    if (!hb || peer < 0 || peer >= hb->size || peer == hb->rank) return -1;
    if (hb->virt) {
        if (!hb->vblocked || hb->vblocked[peer] < 0) return -1;
        /* (noted by each of its waits' slices, every 0.25 s at most) */
        return hs_exec_now(hb->x) - hb->vblocked_at[peer] <= 0.5 ? hb->vblocked[peer] : -1;
    }
    lock(hb);
    int b = hb->peer_blocked ? hb->peer_blocked[peer] - 1 : -1;
    unlock(hb);
    return b;
}

void hs_hb_stop(hs_hb_t **hbp)
{
    if (!hbp || !*hbp) return;
    hs_hb_t *hb = *hbp;
    /* (called on the way out of a failed run too: the goodbye's own errors are cleared, the
     * run's error message is kept for main to print) */
    char saved[HS_ERRMSG_MAX];
    snprintf(saved, sizeof saved, "%s", hs_last_error());
    if (hb->svc) {
        lock(hb);
        int fenced = hb->self_fenced_at >= 0;
        unlock(hb);
        hs_svc_stop(hb->x, &hb->svc);
        if (!fenced && !hb->virt) { /* (bounded: a stopped rank never takes it) */
            send_all(hb, HB_BYE);
            double until = hs_exec_now(hb->x) + 0.25;
            for (int p = 0; p < hb->size; p++) {
                int done = 0;
                while (hb->req[p] && hs_transport_test(hb->t, &hb->req[p], &done, NULL) == 0 &&
                       !done && hs_exec_now(hb->x) < until)
                    hs_exec_sleep(hb->x, 0.002);
                hs_error_clear();
            }
        }
    }
    if (hb->req)
        for (int p = 0; p < hb->size; p++)
            if (hb->req[p]) hs_transport_req_free(hb->t, &hb->req[p]);
    free(hb->last);
    free(hb->peer_blocked);
    free(hb->st);
    free(hb->bye);
    free(hb->reported);
    free(hb->why);
    free(hb->req);
    free(hb->obuf);
    free(hb->src);
    free(hb->tag);
    HS_FREE(*hbp);
    if (saved[0]) hs_error_set(-EIO, __FILE__, __LINE__, "%s", saved);
}
