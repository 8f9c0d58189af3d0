/*
 * optim/sgp.c — Stochastic Gradient Push (PushSum, Assran et al. 2019) and overlap SGP.
 *
 * Push-sum state: the weight w (double, starts at 1) and the numerator x = w z. This file
 * keeps (z, w) rather than (x, w): the model's parameter buffer holds z, the point where the
 * gradient is computed, and x is implicit. Round t (docs/algorithms.md has the equations):
 *   1. the local step on x, as in the paper: the optimizer runs on z with lr / w, so x moves by
 *      lr times the update (momentum local, never gossiped, never scaled by w); --sgp-step z
 *      steps z instead (x moves by w times the step), a robustness option;
 *   2. wait until the sends of round t - tau have completed (their snapshot buffers are
 *      reused): SGP has tau = 1, OSGP --tau K lets K rounds travel behind the computation;
 *   3. for each out-peer j of iteration t: a snapshot of its own (never a buffer that is
 *      accumulated into) holding the weight share s_j = p_j w and z (the x share is s_j z),
 *      posted; keep p_self w (plus the shares of peers known dead);
 *   4. the delay bound D (--delay-bound; sgp 0, osgp tau, none: asynchronous): wait until every
 *      live in-peer's messages of rounds <= t - D are in (bound_staleness);
 *   5. add what has arrived: x += sum_m s_m z_m, w += sum_m s_m, i.e.
 *      z <- (w_kept z + sum_m s_m z_m) / (w_kept + sum_m s_m); the model's parameters are z.
 * Keeping z and only ever forming weighted means is the same push-sum without a float x that
 * could underflow when w drifts. A service (hearsay/exec.h) keeps receives posted per in-peer
 * and out-peer (SGP_TAG_GOSSIP) and folds every message into a running weighted mean as soon as
 * it arrives, so a sleeping or paused worker still receives and its senders never stall on it;
 * step 5 swaps that accumulator out under the service lock. Only step 4 waits for peers'
 * computation, for in-peers only.
 *
 * The end of the run (sgp_finish): DONE to the out-peers (how many messages each got), then
 * every GOSSIP that arrives is answered (REPLY) until the in-peers are done (FIN to each) and
 * the out-peers' answers are in: nothing is lost, and a rank still training is never alone.
 *
 * Failures (docs/algorithms.md, "Failures"): before each round every out-peer is asked after
 * (hs_exec_alive without waiting); a dead one gets no more shares, its share of each round
 * stays here, and what was sent to it and never taken comes back: failed sends return their
 * share, and the messages still in its ring are taken back with hs_transport_unsent (hsshm;
 * libfabric cannot know: those are the mass in flight). A rank that crashes by injection
 * settles its sends, stops receiving (hs_transport_leave) and reports the weight it takes
 * with it (sgp_crash), so that survivors + lost = N.
 */
#include "hearsay/algo.h"
#include "hearsay/common.h"
#include "optim/ps_wire.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* --delay-bound: none (asynchronous), or the algorithm's own default (sgp: 0, osgp: tau). */
#define HS_DELAY_NONE (-1L)
#define HS_DELAY_AUTO (-2L)

/* --delay-mode: how a bound D >= 0 is kept. */
typedef enum hs_delay_mode {
    HS_DELAY_MODE_AUTO = 0, /* the algorithm's own: sgp exact, osgp bounded */
    HS_DELAY_MODE_EXACT,    /* round t mixes exactly its in-peers' round t - D messages, in source
                             * order: a fixed delay, iterates independent of timing */
    HS_DELAY_MODE_BOUNDED,  /* round t mixes every message that has arrived, rounds <= t - D
                             * waited for: a bounded delay (later rounds may be mixed early) */
} hs_delay_mode_t;

#define RX_SLOTS 8 /* receives kept posted per in-peer */

/* Message tags (offsets in the algorithm's range, hs_dist_tag). */
enum { SGP_TAG_GOSSIP = 0 }; /* push-sum shares (x, w) and the notices */
/* aux[] slot of every SGP message: the sender's incarnation (hs_exec_t.incarnation: 0, or a
 * replacement's number), so that a replacement's messages are counted apart from those of the
 * process it replaces (the end-of-run counts start again with it) */
#define SGP_AUX_INC 10

/* A GOSSIP share held until its round is mixed (a bound D >= 0): the sender's round, the
 * source, the order it arrived in, its weight share and a copy of its z. */
typedef struct sgp_msg {
    long round;
    int src;
    long seq;
    double w;
    uint64_t bytes;
    float *z; /* (n) host */
} sgp_msg_t;

/* A send to a peer declared failed that it had begun to take (hs_transport_revoke could not
 * take it back): its share is the peer's now. Kept, with its buffer, until it completes, fails
 * (the share comes back) or the run ends. */
typedef struct sgp_parked {
    hs_treq_t *req;
    unsigned char *buf; /* hs_transport_buf_alloc (rounds) or malloc (answers) */
    int mapped;         /* buf is the transport's */
    int peer;
    double share;
} sgp_parked_t;

typedef struct sgp_round {
    long iter; /* -1: free */
    int n;
    int *peer;           /* (maxdeg) */
    hs_treq_t **req;     /* (maxdeg) */
    unsigned char **buf; /* (maxdeg) header + z (n floats) per message */
    double *share;       /* (maxdeg) weight share sent to each peer */
} sgp_round_t;

struct hs_algo {
    hs_dist_t *d;
    int tau;
    size_t n, msg_bytes;
    double w;        /* push-sum weight */
    hs_stage_t view; /* a host vector where the kernels read it */
    int maxdeg;
    int *peers;          /* (maxdeg) */
    double *wts;         /* (maxdeg) */
    sgp_round_t *rounds; /* (tau) */

    /* the receiving service and what it shares with the main thread (under its lock) */
    hs_service_t *svc;
    float *acc[2];   /* (n) host: weighted mean of the z received since the last fold */
    double acc_w[2]; /* their total weight share */
    int cur;         /* the thread folds into acc[cur] */
    long acc_msgs;
    uint64_t acc_bytes;
    long *recv_from; /* (peers) messages received per source */
    long *last_iter; /* (peers) last iteration received from each source (-1) */
    long *want;      /* (peers) messages each in-peer sent up to round stale_next - 1 */
    long stale_next; /* next round whose in-peers are added to want (--delay-bound) */
    double *recv_w;  /* (peers) weight received from each source (service lock) */
    long *acc_it[2]; /* sender iterations of the messages in acc[i] (staleness) */
    size_t acc_nit[2], acc_cap[2];
    long bound; /* the delay bound in force (HS_DELAY_NONE: none) */
    int exact;  /* --delay-mode exact: round t mixes exactly round t - bound's messages */
    int step_x; /* --sgp-step x: the local step on x (moves z by the step / w) */
    /* With a bound (held mode), GOSSIP shares are copied here as they arrive and mixed in
     * (round, source) order, never in arrival order, and never before their round (service
     * lock). Without one (asynchronous), they are folded into acc[] as they arrive. */
    sgp_msg_t *held; /* (cap_held) */
    size_t nheld, cap_held;
    float **pool; /* (cap_pool) free z copies */
    size_t npool, cap_pool;
    long held_seq;
    long mixed_upto; /* every round <= this one has been mixed (held mode) */
    long trained;    /* rounds trained (the next round's number) */

    /* the end of the run (sgp_finish; the counters under the service lock) */
    unsigned char *in_set, *out_set; /* (peers) ranks that may send here / that we send to */
    int lingering;                   /* training is over: every GOSSIP is answered */
    long *owe;                       /* (peers) GOSSIP received since the last answer */
    long *reply_recv;                /* (peers) REPLY messages received from each */
    long *done_cnt;                  /* (peers) -1, or the GOSSIP count of its DONE */
    long *fin_cnt;                   /* (peers) -1, or the REPLY count of its FIN */
    long *replies_sent;              /* (peers) */
    unsigned char *fin_sent;         /* (peers) */
    hs_treq_t **done_req, **fin_req, **rep_req; /* (peers) sends in flight */
    hs_ps_hdr_v1_t *done_hdr, *fin_hdr;         /* (peers) */
    unsigned char **rep_buf;                    /* (peers) REPLY snapshots, made when needed */
    double *rep_share;                          /* (peers) the weight of the REPLY in flight */

    /* failed peers: the account of what was sent to each (main thread) */
    long *sent_n;              /* (peers) messages posted */
    double *sent_w;            /* (peers) their weight */
    double *returned_w;        /* (peers) weight of failed sends, kept here */
    long *taken_n;             /* (peers) messages taken back from its ring (unsent) */
    double *taken_w;           /* (peers) their weight */
    unsigned char *gone;       /* (peers) GONE_* */
    int cb_rc;                 /* the first error of a transport callback */
    double held_w, *held_from; /* sgp_crash: what hs_transport_leave handed back, per source */
    /* fenced peers (runtime/heartbeat.h): their messages after the fence, refused (service) */
    long refused_n;
    double refused_w;

    /* The peers: the ranks that send here or that this rank sends to in some iteration of a
     * period (every other rank for an aperiodic schedule), ascending. Every per-peer table
     * above ("(peers)") has np + 1 entries: one per peer, in this order, and a last one that
     * stands for any other rank and keeps its initial value (nothing is ever received from
     * or sent to such a rank); a rank's tables are sized by its degree, not by the job. */
    int np;
    int *pr; /* (np) */
    /* sends to failed peers that they had begun to take (see sgp_parked_t) */
    sgp_parked_t *parked;
    int nparked, cap_parked;
    int no_revoke; /* the transport cannot take sends back from a live peer (libfabric) */
    /* The survivors' graph (set_components): each live rank's strongly connected component,
     * made when a failure is first known (d->failures moves); NULL: every rank in one. */
    int *comp;
    long comp_gen;  /* d->failures when comp was made */
    int comp_split; /* this rank's component is not every live rank */
    /* Replacements (runtime/rejoin.h): this process's incarnation; per peer, the newest
     * incarnation heard from (service lock), its first round (it takes part from there on:
     * no share of an earlier round goes to it, none of its is waited for), and the messages
     * and answers sent to it before it came back (the end-of-run counts are the new
     * process's) */
    int inc;
    int *peer_inc;   /* (peers) */
    long *admit;     /* (peers) */
    long *sent_base; /* (peers) */
    long *rep_base;  /* (peers) */
};

/* The slot of rank j in the per-peer tables (np: not a peer). */
static int ps(const hs_algo_t *a, int j)
{
    int lo = 0, hi = a->np;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (a->pr[mid] < j)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < a->np && a->pr[lo] == j ? lo : a->np;
}

/* A message header of this rank, with its incarnation (SGP_AUX_INC). */
static void sgp_hdr(const hs_algo_t *a, hs_ps_hdr_v1_t *h, hs_ps_kind_t kind, long iter, double w,
                    size_t n)
{
    hs_ps_hdr_init(h, kind, a->d->rank, iter, w, n);
    h->aux[SGP_AUX_INC] = a->inc;
}

/* What was sent to a dead peer and never taken (gone[]). */
enum { GONE_NO = 0, GONE_PENDING, GONE_DONE, GONE_UNKNOWN };

static double elapsed(hs_algo_t *a, double t0)
{
    return hs_exec_now(a->d->x) - t0;
}

static float *model_z(hs_algo_t *a)
{
    return a->d->params;
}

static void lock(hs_algo_t *a)
{
    hs_svc_lock(a->d->x, a->svc);
}

static void unlock(hs_algo_t *a)
{
    hs_svc_unlock(a->d->x, a->svc);
}

/* z <- (w z + s v) / (w + s) and w <- w + s, v a host vector of n floats (the mean of the
 * received z's, or a returned snapshot). */
static int absorb(hs_algo_t *a, const float *v, double s)
{
    if (!(s > 0)) return 0;
    hs_kernels_t *k = a->d->k;
    double c = s / (a->w + s);
    a->w += s;
    HS_TRY(hs_stage_view(&a->view, v, a->n, &v));
    return k->ops->mix(k, a->n, (float)c, v, (float)(1.0 - c), model_z(a));
}

/* --- the receiving service ------------------------------------------------------------ */

/* Keep a copy of a GOSSIP share until its round is mixed (service lock held). */
static int hold(hs_algo_t *a, const hs_ps_hdr_v1_t *h, const float *zm, int src, size_t len)
{
    if (a->nheld == a->cap_held) {
        size_t cap = a->cap_held ? 2 * a->cap_held : 16;
        sgp_msg_t *m = realloc(a->held, cap * sizeof *m);
        if (!m) return HS_ERR(-ENOMEM, "out of memory holding %zu messages", cap);
        a->held = m;
        a->cap_held = cap;
    }
    float *z = a->npool ? a->pool[--a->npool] : malloc(a->n * sizeof(float));
    if (!z) return HS_ERR(-ENOMEM, "out of memory holding a message of %zu floats", a->n);
    memcpy(z, zm, a->n * sizeof(float));
    a->held[a->nheld++] = (sgp_msg_t){.round = h->iteration,
                                      .src = src,
                                      .seq = a->held_seq++,
                                      .w = h->weight,
                                      .bytes = len,
                                      .z = z};
    return 0;
}

/* Return a held copy's buffer to the pool (service lock held). */
static void unhold(hs_algo_t *a, float *z)
{
    if (a->npool == a->cap_pool) {
        size_t cap = a->cap_pool ? 2 * a->cap_pool : 16;
        float **p = realloc(a->pool, cap * sizeof *p);
        if (!p) {
            free(z);
            return;
        }
        a->pool = p;
        a->cap_pool = cap;
    }
    a->pool[a->npool++] = z;
}

/* (round, source, arrival) order: the order held messages are mixed in. */
static int msg_order(const void *pa, const void *pb)
{
    const sgp_msg_t *x = pa, *y = pb;
    if (x->round != y->round) return x->round < y->round ? -1 : 1;
    if (x->src != y->src) return x->src < y->src ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* Fold one message into the running weighted mean (the service calls this for each): a
 * GOSSIP share or a REPLY; DONE and FIN only update the end-of-run counters. */
/* The sender's incarnation (aux[SGP_AUX_INC]) is a process count: 0 <= inc < 1e6. */
static int inc_check(const hs_ps_hdr_v1_t *h, int src)
{
    double inc = h->aux[SGP_AUX_INC];
    if (!(inc >= 0 && inc < 1e6))
        return HS_ERR(-EPROTO, "message from rank %d names incarnation %g", src, inc);
    return 0;
}

/* The sender's incarnation, under the algorithm's lock (the one the message's handling takes
 * anyway): a newer process starts src's counts again; 1 when the message is an older one's (in
 * flight when it crashed: still mixed, never counted), else 0. */
static int incarnation_locked(hs_algo_t *a, int src, const hs_ps_hdr_v1_t *h)
{
    int inc = (int)h->aux[SGP_AUX_INC], k = ps(a, src);
    if (__builtin_expect(inc > a->peer_inc[k], 0)) {
        a->peer_inc[k] = inc;
        a->recv_from[k] = a->reply_recv[k] = a->owe[k] = 0;
        a->done_cnt[k] = a->fin_cnt[k] = a->last_iter[k] = -1;
    }
    return inc < a->peer_inc[k];
}

static int rx_apply(void *ctx, int slot, const void *buf, const hs_tstatus_t *st)
{
    hs_algo_t *a = ctx;
    (void)slot;
    const hs_ps_hdr_v1_t *h = (const hs_ps_hdr_v1_t *)buf;
    int src = st->source;
    unsigned kind = st->len >= sizeof *h ? h->kind : HS_PS_GOSSIP;
    if (hs_dist_peer_hb(a->d, src) == 2) { /* fenced: refused, its weight counted as lost */
        if (kind != HS_PS_DONE && kind != HS_PS_FIN && st->len >= sizeof *h &&
            hs_ps_hdr_check(h, st->len, kind == HS_PS_REPLY ? HS_PS_REPLY : HS_PS_GOSSIP, src,
                            a->n) == 0 &&
            h->weight >= 0 && isfinite(h->weight)) {
            lock(a);
            a->refused_n++;
            a->refused_w += h->weight;
            unlock(a);
        }
        hs_error_clear();
        return 0;
    }
    if (kind == HS_PS_DONE || kind == HS_PS_FIN) {
        HS_TRY(hs_ps_hdr_check(h, st->len, (hs_ps_kind_t)kind, src, 0));
        HS_TRY(inc_check(h, src));
        if (!(h->aux[0] >= 0 && h->aux[0] < 1e15))
            return HS_ERR(-EPROTO, "end-of-run notice from rank %d counts %g messages", src,
                          h->aux[0]);
        lock(a);
        if (!incarnation_locked(a, src, h)) { /* (an older process's counts are not its) */
            if (kind == HS_PS_DONE)
                a->done_cnt[ps(a, src)] = (long)h->aux[0];
            else
                a->fin_cnt[ps(a, src)] = (long)h->aux[0];
        }
        unlock(a);
        return 0;
    }
    if (kind != HS_PS_REPLY) kind = HS_PS_GOSSIP;
    HS_TRY(hs_ps_hdr_check(h, st->len, (hs_ps_kind_t)kind, src, a->n));
    HS_TRY(inc_check(h, src));
    if (!(h->weight >= 0 && isfinite(h->weight)))
        return HS_ERR(-EPROTO, "message from rank %d carries weight %g", src, h->weight);
    const float *zm = (const float *)((const unsigned char *)buf + sizeof *h);
    lock(a);
    int old = incarnation_locked(a, src, h);
    if (kind == HS_PS_GOSSIP && a->bound >= 0) { /* held mode: a copy, mixed in its round */
        int rc = hold(a, h, zm, src, st->len);
        if (rc == 0 && old) {
            a->recv_w[ps(a, src)] += h->weight;
        } else if (rc == 0) {
            a->recv_w[ps(a, src)] += h->weight;
            a->recv_from[ps(a, src)]++;
            if (a->lingering) a->owe[ps(a, src)]++;
            if (h->iteration > a->last_iter[ps(a, src)]) a->last_iter[ps(a, src)] = h->iteration;
        }
        unlock(a);
        return rc;
    }
    int c = a->cur;
    if (a->acc_nit[c] == a->acc_cap[c]) {
        size_t cap = a->acc_cap[c] ? 2 * a->acc_cap[c] : 64;
        long *its = realloc(a->acc_it[c], cap * sizeof *its);
        if (!its) {
            unlock(a);
            return HS_ERR(-ENOMEM, "out of memory for the staleness of %zu messages", cap);
        }
        a->acc_it[c] = its;
        a->acc_cap[c] = cap;
    }
    a->acc_it[c][a->acc_nit[c]++] = h->iteration;
    float *acc = a->acc[c];
    double total = a->acc_w[c] + h->weight;
    if (total > 0) { /* running weighted mean: acc += (s / total) (z_m - acc) */
        float cw = (float)(h->weight / total);
        for (size_t i = 0; i < a->n; i++) acc[i] += cw * (zm[i] - acc[i]);
    }
    a->acc_w[c] = total;
    a->acc_msgs++;
    a->acc_bytes += st->len;
    a->recv_w[ps(a, src)] += h->weight;
    if (old) {
        /* (mixed, not counted) */
    } else if (kind == HS_PS_REPLY) {
        a->reply_recv[ps(a, src)]++;
    } else {
        a->recv_from[ps(a, src)]++;
        if (a->lingering) a->owe[ps(a, src)]++;
        if (h->iteration > a->last_iter[ps(a, src)]) a->last_iter[ps(a, src)] = h->iteration;
    }
    unlock(a);
    return 0;
}

/* --- main-thread pieces ---------------------------------------------------------------- */

/* Mix the held shares of rounds <= upto into (z, w), in (round, source) order, one at a time
 * (z <- (w z + s z_m) / (w + s)): the result depends on which messages are mixed, never on
 * when they arrived. Counted in the stats (signed staleness: my round - the sender's). */
static int mix_held(hs_algo_t *a, long upto)
{
    hs_dist_t *d = a->d;
    size_t k = 0, keep = 0;
    sgp_msg_t *take = NULL;
    if (upto > a->mixed_upto) a->mixed_upto = upto;
    lock(a);
    for (size_t i = 0; i < a->nheld; i++) k += a->held[i].round <= upto;
    if (k && !(take = malloc(k * sizeof *take))) {
        unlock(a);
        return HS_ERR(-ENOMEM, "out of memory mixing %zu messages", k);
    }
    /* the messages of rounds <= upto out, the others stay held in arrival order */
    for (size_t i = 0, j = 0; i < a->nheld; i++) {
        if (a->held[i].round <= upto)
            take[j++] = a->held[i];
        else
            a->held[keep++] = a->held[i];
    }
    a->nheld = keep;
    unlock(a);
    if (!k) return 0;
    qsort(take, k, sizeof *take, msg_order);
    int rc = 0;
    long now_it = d->iter; /* the round just taken */
    for (size_t i = 0; i < k; i++) {
        if (rc == 0) rc = absorb(a, take[i].z, take[i].w);
        hs_dist_staleness(d, now_it - take[i].round);
        d->st.bytes_recv += take[i].bytes;
    }
    lock(a);
    for (size_t i = 0; i < k; i++) unhold(a, take[i].z);
    unlock(a);
    free(take);
    return rc;
}

/* Add what the receiver has into (z, w): the held shares of rounds <= upto (held mode), and
 * everything folded into the running mean (asynchronous shares, answers at the end of the
 * run); count it in the stats. */
static int fold(hs_algo_t *a, long upto)
{
    hs_dist_t *d = a->d;
    double t0 = hs_exec_now(d->x);
    int rc = hs_svc_error(d->x, a->svc);
    if (rc < 0) {
        hs_error_prefix("rank %d", d->rank);
        return rc;
    }
    if ((rc = mix_held(a, upto)) < 0) return rc;
    lock(a);
    int mine = a->cur;
    long msgs = a->acc_msgs;
    double wsum = a->acc_w[mine];
    uint64_t bytes = a->acc_bytes;
    if (msgs) {
        a->cur ^= 1;
        a->acc_msgs = 0;
        a->acc_bytes = 0;
    }
    unlock(a);
    if (!msgs) {
        d->st.comm_s += elapsed(a, t0);
        return 0;
    }
    rc = absorb(a, a->acc[mine], wsum);
    memset(a->acc[mine], 0, a->n * sizeof(float));
    a->acc_w[mine] = 0;
    long now_it = d->iter; /* the round just taken */
    for (size_t i = 0; i < a->acc_nit[mine]; i++) hs_dist_staleness(d, now_it - a->acc_it[mine][i]);
    a->acc_nit[mine] = 0; /* (the service writes the other list until the next swap) */
    d->st.bytes_recv += bytes;
    d->st.comm_s += elapsed(a, t0);
    return rc;
}

/* hs_transport_unsent hands back a share of ours that a dead peer never took: keep it. */
static void take_back(void *ctx, int peer, const void *buf, size_t got, size_t len)
{
    hs_algo_t *a = ctx;
    const hs_ps_hdr_v1_t *h = buf;
    if (a->cb_rc < 0) return;
    if (got == len && len >= sizeof *h && (h->kind == HS_PS_DONE || h->kind == HS_PS_FIN))
        return; /* an end-of-run notice: no weight */
    hs_ps_kind_t kind = len >= sizeof *h && h->kind == HS_PS_REPLY ? HS_PS_REPLY : HS_PS_GOSSIP;
    int rc = got == len ? hs_ps_hdr_check(h, len, kind, a->d->rank, a->n)
                        : HS_ERR(-EPROTO, "%zu of %zu bytes", got, len);
    if (rc == 0 && !(h->weight >= 0 && isfinite(h->weight)))
        rc = HS_ERR(-EPROTO, "weight %g", h->weight);
    if (rc < 0) {
        hs_error_prefix("rank %d: a message taken back from rank %d is not a share of ours",
                        a->d->rank, peer);
        a->cb_rc = rc;
        return;
    }
    if ((rc = absorb(a, (const float *)(h + 1), h->weight)) < 0) {
        a->cb_rc = rc;
        return;
    }
    a->taken_n[ps(a, peer)]++;
    a->taken_w[ps(a, peer)] += h->weight;
}

/* Peer p was declared failed but may still run (fenced: frozen, or declared by a timeout): take
 * back every share it has not begun to take (hsshm; the sends by address fail, and come back
 * through their requests). Nothing where the transport cannot (a->no_revoke). */
static int revoke(hs_algo_t *a, int p)
{
    hs_dist_t *d = a->d;
    if (a->no_revoke) return 0;
    long n0 = a->taken_n[ps(a, p)];
    double w0 = a->taken_w[ps(a, p)];
    a->cb_rc = 0;
    int rc = hs_transport_revoke(d->t, p, hs_dist_tag(d, SGP_TAG_GOSSIP), take_back, a);
    if (rc == -ENOSYS) {
        hs_error_clear();
        a->no_revoke = 1;
        return 0;
    }
    if (rc < 0) return rc;
    if (a->cb_rc < 0) return a->cb_rc;
    if (a->taken_n[ps(a, p)] > n0) {
        char line[200];
        snprintf(line, sizeof line,
                 "took back %ld share(s) of weight %.9g sent to rank %d (failed, still running), "
                 "which had not begun to take them",
                 a->taken_n[ps(a, p)] - n0, a->taken_w[ps(a, p)] - w0, p);
        HS_TRY(hs_dist_record(d, NULL, NULL, line));
    }
    return 0;
}

/* Keep a send that a failed peer had begun to take (its share is the peer's): the request and
 * its buffer, until it settles (settle_parked). */
static int park(hs_algo_t *a, hs_treq_t **req, unsigned char **buf, int mapped, int peer,
                double share)
{
    if (a->nparked == a->cap_parked) {
        int cap = a->cap_parked ? 2 * a->cap_parked : 8;
        sgp_parked_t *p = realloc(a->parked, (size_t)cap * sizeof *p);
        if (!p) return HS_ERR(-ENOMEM, "out of memory keeping %d sends", cap);
        a->parked = p;
        a->cap_parked = cap;
    }
    a->parked[a->nparked++] =
        (sgp_parked_t){.req = *req, .buf = *buf, .mapped = mapped, .peer = peer, .share = share};
    *req = NULL;
    *buf = NULL;
    return 0;
}

/* Parked sends that completed (the peer's) or failed (the share comes back here); wait up to
 * wait_s for the rest while their peers run. */
static int settle_parked(hs_algo_t *a, double wait_s)
{
    hs_dist_t *d = a->d;
    double until = hs_exec_now(d->x) + wait_s;
    for (;;) {
        int left = 0;
        for (int i = 0; i < a->nparked; i++) {
            sgp_parked_t *pk = &a->parked[i];
            if (!pk->req) continue;
            int done = 0;
            if (hs_transport_test(d->t, &pk->req, &done, NULL) < 0) {
                hs_error_clear();
                pk->req = NULL;
                HS_TRY(absorb(a, (const float *)(pk->buf + sizeof(hs_ps_hdr_v1_t)), pk->share));
                a->returned_w[ps(a, pk->peer)] += pk->share;
            } else if (!done) {
                left += hs_exec_alive(d->x, pk->peer, 0) != 0;
                continue;
            }
            if (pk->mapped)
                hs_transport_buf_free(d->t, (void **)&pk->buf);
            else
                HS_FREE(pk->buf);
        }
        if (!left || hs_exec_now(d->x) >= until) return 0;
        HS_TRY(hs_dist_idle(d));
        hs_exec_sleep(d->x, 0.01);
    }
}

/* Peer p is dead: take back the shares it never took (once; again later while the transport
 * says it may still take them). */
static int reclaim(hs_algo_t *a, int p)
{
    hs_dist_t *d = a->d;
    if (a->gone[ps(a, p)] == GONE_DONE || a->gone[ps(a, p)] == GONE_UNKNOWN) return 0;
    if (!a->sent_n[ps(a, p)] && !a->replies_sent[ps(a, p)]) {
        a->gone[ps(a, p)] = GONE_DONE;
        return 0;
    }
    long n0 = a->taken_n[ps(a, p)];
    double w0 = a->taken_w[ps(a, p)];
    a->cb_rc = 0;
    int rc = hs_transport_unsent(d->t, p, hs_dist_tag(d, SGP_TAG_GOSSIP), take_back, a);
    if (rc == -EBUSY) {
        /* not gone yet (fenced, or reported failed by a timeout): it may still take what it
         * has not begun to take; take that back now, atomically against its taking */
        hs_error_clear();
        a->gone[ps(a, p)] = GONE_PENDING;
        return hs_dist_peer_dead(d, p) ? revoke(a, p) : 0; /* (settle asks after live ones) */
    }
    a->gone[ps(a, p)] = rc == -ENOSYS ? GONE_UNKNOWN : GONE_DONE;
    if (rc == -ENOSYS) return 0;
    if (rc < 0) return rc;
    if (a->cb_rc < 0) return a->cb_rc;
    if (a->taken_n[ps(a, p)] > n0) {
        char line[200];
        snprintf(line, sizeof line,
                 "took back %ld share(s) of weight %.9g sent to rank %d, which never received "
                 "them",
                 a->taken_n[ps(a, p)] - n0, a->taken_w[ps(a, p)] - w0, p);
        HS_TRY(hs_dist_record(d, NULL, NULL, line));
    }
    return 0;
}

/* Peer p is gone: report it and take back what it never took. */
static int peer_gone(hs_algo_t *a, int p, const char *why)
{
    long last;
    lock(a);
    last = a->last_iter[ps(a, p)];
    unlock(a);
    hs_dist_peer_failed(a->d, p, last + 1, why);
    return reclaim(a, p);
}

/* Before sending round t to p: 1 when p is dead (known, or seen now without waiting), with
 * what it never took taken back; 0 when it runs. */
static int out_peer_dead(hs_algo_t *a, int p, long t, int *dead)
{
    hs_dist_t *d = a->d;
    *dead = hs_dist_peer_dead(d, p);
    if (!*dead) {
        if (hs_exec_alive(d->x, p, 0)) return 0;
        *dead = 1;
        char why[96];
        snprintf(why, sizeof why, "exited (seen before sending round %ld)", t);
        return peer_gone(a, p, why);
    }
    return reclaim(a, p);
}

/* A send of round r to r->peer[i] failed or timed out: its share stays here, so no mass is
 * lost on this side, and the peer is reported. */
static int keep_failed_share(hs_algo_t *a, sgp_round_t *r, int i, const char *why)
{
    HS_TRY(absorb(a, (const float *)(r->buf[i] + sizeof(hs_ps_hdr_v1_t)), r->share[i]));
    a->returned_w[ps(a, r->peer[i])] += r->share[i];
    return peer_gone(a, r->peer[i], why);
}

typedef struct round_wait {
    hs_algo_t *a;
    sgp_round_t *r;
} round_wait_t;

/* A send of wait_round ended: a failed one's share stays here. */
static int round_done(void *ctx, int idx, int rc, const hs_tstatus_t *st)
{
    (void)st;
    round_wait_t *w = ctx;
    return rc < 0 ? keep_failed_share(w->a, w->r, idx, hs_last_error()) : 0;
}

/* Wait until every send of round r has completed (bounded by the comm timeout, longer while
 * a peer still heartbeats). */
static int wait_round(hs_algo_t *a, sgp_round_t *r)
{
    hs_dist_t *d = a->d;
    if (r->iter < 0) return 0;
    double t0 = hs_exec_now(d->x);
    round_wait_t w = {a, r};
    int rc = hs_dist_wait_sends(d, r->req, r->peer, r->n, d->o->comm_timeout_s, round_done, &w);
    if (rc == -ETIMEDOUT) {
        char why[160];
        snprintf(why, sizeof why, "send of round %ld not complete after %.1f s", r->iter,
                 HS_MAX(d->o->comm_timeout_s, elapsed(a, t0)));
        /* declared failed; while it may still run, take back what it has not begun to
         * take (its sends fail below, their shares stay here); what it had begun to take
         * is its own (parked) */
        for (int i = 0; i < r->n; i++)
            if (r->req[i]) HS_TRY(peer_gone(a, r->peer[i], why));
        for (int i = 0; i < r->n; i++) {
            if (!r->req[i]) continue;
            int done = 0;
            if (a->no_revoke) { /* the transport cannot say: the old rule */
                hs_transport_req_free(d->t, &r->req[i]);
                HS_TRY(keep_failed_share(a, r, i, why));
            } else if (hs_transport_test(d->t, &r->req[i], &done, NULL) < 0) {
                HS_TRY(keep_failed_share(a, r, i, hs_last_error()));
            } else if (!done) {
                HS_TRY(park(a, &r->req[i], &r->buf[i], 1, r->peer[i], r->share[i]));
                HS_TRY(hs_transport_buf_alloc(d->t, a->msg_bytes, (void **)&r->buf[i]));
            }
        }
    } else if (rc < 0) {
        return rc;
    }
    r->iter = -1;
    d->st.wait_s += elapsed(a, t0);
    return 0;
}

/* The verdict on in-peer `peer` that a wait for a round's messages, begun at t0, is stuck on
 * (hs_dist_late_peer): silent past the communication timeout unless its heartbeats vouch for
 * it; a liveness probe every 0.25 s (*next_probe) so that a dead peer is not waited for until
 * the timeout. */
static int round_late(hs_dist_t *d, int peer, double now, double t0, double *next_probe)
{
    hs_dist_late_t l = {.quiet = now - t0,
                        .limit = d->o->comm_timeout_s,
                        .silent = now - t0 > d->o->comm_timeout_s,
                        .heartbeats = 1,
                        .probe = now >= *next_probe,
                        .probe_s = 0};
    int v = hs_dist_late_peer(d, peer, &l);
    if (v != HS_LATE_SILENT && l.probe) *next_probe = now + 0.25;
    return v;
}

/* --delay-bound D: before mixing round t, wait until every live in-peer's messages of
 * rounds <= t - D have arrived (D = 0: round t's own, the paper's synchronous SGP) (bounded by the
 * communication timeout; a peer that stays silent that long is reported failed). Only neighbours
 * are waited for, never the job. */
static int bound_staleness(hs_algo_t *a, long t)
{
    hs_dist_t *d = a->d;
    long upto = t - a->bound;
    if (a->bound < 0 || upto < d->start_iter) return 0;
    if (a->stale_next < d->start_iter) a->stale_next = d->start_iter;
    int cap = HS_MAX(1, hs_topo_max_in_degree(d->topo));
    int in[cap > 64 ? 64 : cap], *inp = in, c = 0;
    if (cap > 64 && !(inp = hs_malloc((size_t)cap * sizeof *inp, "in-peers"))) return -ENOMEM;
    int rc = 0;
    for (; a->stale_next <= upto && rc == 0; a->stale_next++) {
        rc = hs_topo_in_peers(d->topo, a->stale_next, d->rank, inp, NULL, cap, &c);
        for (int i = 0; i < c && rc == 0; i++) a->want[ps(a, inp[i])]++;
    }
    if (inp != in) free(inp);
    if (rc < 0) return rc;
    double t0 = hs_exec_now(d->x), next_probe = t0 + 0.25;
    for (;;) {
        int late = -1;
        lock(a);
        for (int k = 0; k < a->np && late < 0; k++) { /* (a DONE says how many will ever come) */
            int j = a->pr[k];
            if (j != d->rank && !hs_dist_peer_dead(d, j) &&
                a->recv_from[ps(a, j)] < a->want[ps(a, j)] &&
                !(a->done_cnt[ps(a, j)] >= 0 && a->recv_from[ps(a, j)] >= a->done_cnt[ps(a, j)]))
                late = j;
        }
        if (late >= 0) hs_svc_wait(d->x, a->svc, 0.05);
        long last = late >= 0 ? a->last_iter[ps(a, late)] : 0;
        unlock(a);
        if (late < 0) break;
        HS_TRY(hs_dist_idle(d));
        double now = hs_exec_now(d->x);
        char why[160];
        /* a dead in-peer is not waited for until the timeout: probes every 0.25 s */
        int v = round_late(d, late, now, t0, &next_probe);
        if (v == HS_LATE_SILENT) {
            snprintf(why, sizeof why, "no message of round <= %ld after %.1f s (--delay-bound %ld)",
                     upto, d->o->comm_timeout_s, a->bound);
            hs_dist_peer_failed(d, late, last + 1, why);
        } else if (v == HS_LATE_EXITED) {
            snprintf(why, sizeof why, "exited (seen while waiting for its round %ld)", upto);
            HS_TRY(peer_gone(a, late, why));
        }
    }
    d->st.wait_s += elapsed(a, t0);
    return 0;
}

/* 1 when a share of round r from src is held (service lock held). */
static int have_msg(const hs_algo_t *a, int src, long r)
{
    for (size_t i = 0; i < a->nheld; i++)
        if (a->held[i].src == src && a->held[i].round == r) return 1;
    return 0;
}

/* --delay-mode exact: wait until the share of every live in-peer of each round in [from, upto]
 * is held (a peer that announced its end, DONE, is waited for only up to what it sent), with
 * the same bounds as bound_staleness: the comm timeout, liveness probes every 0.25 s. The
 * look is per (source, round), so a message of a later round never stands in for a missing
 * one. */
static int wait_exact(hs_algo_t *a, long from, long upto)
{
    hs_dist_t *d = a->d;
    if (from < d->start_iter) from = d->start_iter;
    if (upto < from) return 0;
    int cap = HS_MAX(1, hs_topo_max_in_degree(d->topo)), rc = 0;
    int *in = hs_malloc((size_t)cap * sizeof *in, "in-peers");
    if (!in) return -ENOMEM;
    double t0 = hs_exec_now(d->x), next_probe = t0 + 0.25;
    for (long r = from; r <= upto && rc == 0; r++) {
        int c = 0;
        if ((rc = hs_topo_in_peers(d->topo, r, d->rank, in, NULL, cap, &c)) < 0) break;
        for (int i = 0; i < c && rc == 0; i++) {
            int j = in[i];
            if (j == d->rank || r < a->admit[ps(a, j)]) continue;
            for (;;) {
                lock(a);
                int late = !hs_dist_peer_dead(d, j) && !have_msg(a, j, r) &&
                           !(a->done_cnt[ps(a, j)] >= 0 &&
                             a->recv_from[ps(a, j)] >= a->done_cnt[ps(a, j)]);
                if (late) hs_svc_wait(d->x, a->svc, 0.05);
                long last = a->last_iter[ps(a, j)];
                unlock(a);
                if (!late) break;
                if ((rc = hs_svc_error(d->x, a->svc)) < 0 || (rc = hs_dist_idle(d)) < 0) break;
                double now = hs_exec_now(d->x);
                char why[160];
                int v = round_late(d, j, now, t0, &next_probe);
                if (v == HS_LATE_SILENT) {
                    snprintf(why, sizeof why,
                             "no message of round %ld after %.1f s (--delay-mode exact)", r,
                             d->o->comm_timeout_s);
                    hs_dist_peer_failed(d, j, last + 1, why);
                } else if (v == HS_LATE_EXITED) {
                    snprintf(why, sizeof why, "exited (seen while waiting for its round %ld)", r);
                    if ((rc = peer_gone(a, j, why)) < 0) break;
                }
            }
        }
    }
    free(in);
    d->st.wait_s += elapsed(a, t0);
    return rc;
}

/* Failures can split the survivors' graph (the union of a period's edges between live ranks):
 * 4 ranks on exp1peer without ranks 2 and 3 leave rank 0 with no live in-peer, and a rank
 * that keeps sending shares out while none comes in drains its weight to 0 (then z / w is
 * NaN). Push-sum conserves mass inside any set of ranks that sends only among itself, so
 * each rank sends weight only to the ranks of its own strongly connected component of the
 * survivors' graph; to the others it still sends its round's message (the synchronous
 * protocol waits for it), with weight 0. Each component is then a push-sum of its own: no
 * weight drains, the sum over the ranks stays N. Made again whenever d->failures moves
 * (Tarjan's algorithm, iterative, over the live ranks; an aperiodic schedule is left as one
 * component: its edges change every iteration). */
static int set_components(hs_algo_t *a)
{
    hs_dist_t *d = a->d;
    a->comp_gen = d->failures;
    int n = d->size, per = hs_topo_period(d->topo), deg = HS_MAX(1, a->maxdeg);
    if (per <= 0 || !d->failures) return 0;
    size_t ne = (size_t)n * (size_t)per * (size_t)deg;
    int *off = hs_calloc((size_t)n + 1, sizeof *off, "graph offsets");
    int *adj = hs_malloc(ne * sizeof *adj, "graph edges");
    int *idx = hs_malloc((size_t)n * sizeof *idx, "tarjan index");
    int *low = hs_malloc((size_t)n * sizeof *low, "tarjan low");
    int *stk = hs_malloc((size_t)n * sizeof *stk, "tarjan stack");
    int *cs = hs_malloc((size_t)n * sizeof *cs, "tarjan call stack");
    int *ce = hs_malloc((size_t)n * sizeof *ce, "tarjan edge cursor");
    unsigned char *on = hs_calloc((size_t)n, 1, "tarjan on stack");
    int *pe = hs_malloc((size_t)deg * sizeof *pe, "peers");
    double *pw = hs_malloc((size_t)deg * sizeof *pw, "weights");
    if (!a->comp) a->comp = hs_malloc((size_t)n * sizeof *a->comp, "components");
    int rc = -ENOMEM;
    if (!off || !adj || !idx || !low || !stk || !cs || !ce || !on || !pe || !pw || !a->comp)
        goto out;
    size_t m = 0;
    for (int u = 0; u < n; u++) {
        off[u] = (int)m;
        if (u != d->rank && hs_dist_peer_dead(d, u)) continue;
        for (int t = 0; t < per; t++) {
            int cnt = 0;
            double self = 0;
            if ((rc = hs_topo_out_peers(d->topo, t, u, pe, pw, deg, &cnt, &self)) < 0) goto out;
            for (int i = 0; i < cnt; i++)
                if (pe[i] == d->rank || !hs_dist_peer_dead(d, pe[i])) adj[m++] = pe[i];
        }
    }
    off[n] = (int)m;
    for (int u = 0; u < n; u++) idx[u] = -1, a->comp[u] = -1;
    int next = 0, sp = 0, nc = 0;
    for (int r = 0; r < n; r++) {
        if (idx[r] >= 0 || (r != d->rank && hs_dist_peer_dead(d, r))) continue;
        int top = 0;
        cs[top] = r, ce[top] = off[r];
        idx[r] = low[r] = next++, stk[sp++] = r, on[r] = 1;
        while (top >= 0) {
            int u = cs[top];
            if (ce[top] < off[u + 1]) {
                int v = adj[ce[top]++];
                if (idx[v] < 0) {
                    idx[v] = low[v] = next++, stk[sp++] = v, on[v] = 1;
                    top++, cs[top] = v, ce[top] = off[v];
                } else if (on[v]) {
                    low[u] = HS_MIN(low[u], idx[v]);
                }
                continue;
            }
            if (low[u] == idx[u]) { /* u roots a component */
                int v;
                do {
                    v = stk[--sp];
                    on[v] = 0;
                    a->comp[v] = nc;
                } while (v != u);
                nc++;
            }
            if (--top >= 0) low[cs[top]] = HS_MIN(low[cs[top]], low[u]);
        }
    }
    int mine = 0, live = 0;
    for (int u = 0; u < n; u++) {
        live += a->comp[u] >= 0;
        mine += a->comp[u] == a->comp[d->rank];
    }
    int split = mine < live;
    if (split && !a->comp_split)
        HS_WARN("rank %d: without the failed ranks the graph is no longer strongly connected "
                "(%d components; this rank's has %d of the %d live ranks): weight goes only to "
                "ranks of the same component (the others get their messages with weight 0), "
                "so that none drains to 0; each component averages on its own",
                d->rank, nc, mine, live);
    a->comp_split = split;
    rc = 0;
out:
    free(off);
    free(adj);
    free(idx);
    free(low);
    free(stk);
    free(cs);
    free(ce);
    free(on);
    free(pe);
    free(pw);
    if (rc == -ENOMEM) hs_error_prefix("rank %d: the survivors' graph", d->rank);
    return rc;
}

static int sgp_step(hs_algo_t *a, long t)
{
    hs_dist_t *d = a->d;
    hs_kernels_t *k = d->k;
    /* 1. the local step, taken on z (x moves by w times it); --sgp-step x: on x as in the
     * paper, x -= lr * update, i.e. z moves by the update / w */
    HS_TRY(hs_dist_apply(d, a->step_x ? 1.0 / a->w : 1.0));
    a->trained = t + 1;

    /* 2. the snapshot buffers of this slot must be free */
    sgp_round_t *r = &a->rounds[t % a->tau];
    HS_TRY(wait_round(a, r));

    /* 3. shares to the out-peers of iteration t */
    double t0 = hs_exec_now(d->x);
    int cnt = 0;
    double self = 0;
    HS_TRY(hs_topo_out_peers(d->topo, t, d->rank, a->peers, a->wts, a->maxdeg, &cnt, &self));
    r->n = 0;
    r->iter = t;
    for (int i = 0; i < cnt; i++) {
        int p = a->peers[i], dead = 0;
        HS_TRY(out_peer_dead(a, p, t, &dead));
        if (!dead && t < a->admit[ps(a, p)]) dead = 1; /* a replacement, from a later round */
        if (dead) {                                    /* keep the dead peer's share */
            self += a->wts[i];
            a->wts[i] = -1;
        }
    }
    if (d->failures != a->comp_gen) HS_TRY(set_components(a));
    for (int i = 0; i < cnt; i++) {
        int p = a->peers[i];
        double s = a->wts[i];
        if (s < 0) continue;                                   /* (dead: kept above) */
        if (a->comp_split && a->comp[p] != a->comp[d->rank]) { /* another component: weight 0 */
            self += s;
            s = 0;
        }
        int m = r->n;
        hs_ps_hdr_v1_t *h = (hs_ps_hdr_v1_t *)r->buf[m];
        float *pz = (float *)(r->buf[m] + sizeof *h);
        if (m == 0)
            HS_TRY(k->ops->to_host(k, pz, model_z(a), a->n * sizeof(float)));
        else
            memcpy(pz, r->buf[0] + sizeof *h, a->n * sizeof(float));
        sgp_hdr(a, h, HS_PS_GOSSIP, t, s * a->w, a->n);
        r->peer[m] = p;
        r->share[m] = s * a->w;
        r->n++;
        int rc = hs_transport_isend(d->t, p, hs_dist_tag(d, SGP_TAG_GOSSIP), r->buf[m],
                                    a->msg_bytes, &r->req[m]);
        if (rc < 0) { /* could not even post: keep the share */
            r->req[m] = NULL;
            HS_TRY(keep_failed_share(a, r, m, hs_last_error()));
            continue;
        }
        d->st.bytes_sent += a->msg_bytes;
        a->sent_n[ps(a, p)]++;
        a->sent_w[ps(a, p)] += r->share[m];
    }
    /* 4. keep p_self (z is unchanged by keeping a share: only w scales) */
    a->w *= self;
    d->st.comm_s += elapsed(a, t0);
    /* 5. exact: round t - D's shares, all of them; bounded: what has arrived of rounds <= t, at
     * least every share of rounds <= t - D (never a later round's); none: what has arrived */
    if (a->exact) {
        long r = t - a->bound;
        /* a round mixed already (at a checkpoint's cut) or before the start: nothing to wait for */
        if (r <= a->mixed_upto) return fold(a, a->mixed_upto);
        HS_TRY(wait_exact(a, r, r));
        return fold(a, r);
    }
    HS_TRY(bound_staleness(a, t));
    return fold(a, a->bound >= 0 ? t : LONG_MAX);
}

/* End of the run: what was sent to each failed peer and what came back, DIR/rank-R-ps-failed.csv
 * (the in-flight account: sent - returned - taken back = what the peer received, or what
 * was lost on the way where the transport cannot say). */
static int record_failed(hs_algo_t *a)
{
    hs_dist_t *d = a->d;
    if (a->nparked) { /* (not waited for: a frozen peer finishes them when it wakes, from
                       * buffers it has mapped, or never: then they are in what it held) */
        HS_TRY(settle_parked(a, 0));
        double pw = 0;
        int pn = 0;
        for (int i = 0; i < a->nparked; i++)
            if (a->parked[i].req) pn++, pw += a->parked[i].share;
        if (pn) {
            char line[200];
            snprintf(line, sizeof line,
                     "%d share(s) of weight %.9g that failed ranks had begun to take are still "
                     "in flight at the end of the run (theirs)",
                     pn, pw);
            HS_TRY(hs_dist_record(d, NULL, NULL, line));
        }
    }
    lock(a);
    long rn = a->refused_n;
    double rw = a->refused_w;
    unlock(a);
    if (rn) { /* read by rank 0 into summary.json (ps_weight_refused) */
        char line[160];
        snprintf(line, sizeof line, "{\"refused_msgs\": %ld, \"ps_weight_refused\": %.17g}", rn,
                 rw);
        HS_TRY(hs_dist_record(d, "refused.json", NULL, line));
    }
    static const char *how[] = {"no", "pending", "done", "unsupported"};
    for (int j = 0; j < d->size; j++) {
        if (j == d->rank || !hs_dist_peer_dead(d, j)) continue;
        char line[256];
        snprintf(line, sizeof line, "%d,%ld,%.17g,%.17g,%ld,%.17g,%s", j, a->sent_n[ps(a, j)],
                 a->sent_w[ps(a, j)], a->returned_w[ps(a, j)], a->taken_n[ps(a, j)],
                 a->taken_w[ps(a, j)], how[a->gone[ps(a, j)]]);
        HS_TRY(hs_dist_record(d, "ps-failed.csv",
                              "peer,msgs_sent,weight_sent,weight_returned,msgs_taken_back,"
                              "weight_taken_back,take_back",
                              line));
    }
    return 0;
}

/* After the drain: out-peers that died or left since they were last asked after. */
static int settle(hs_algo_t *a)
{
    hs_dist_t *d = a->d;
    int rc = 0;
    /* Out-peers that died or left since they were last asked after: take back what they never
     * took (a rank that crashed by injection took what had reached it when it left; unsent
     * says -EBUSY for one that still runs). One that exited having taken everything may just
     * have finished first: not a failure. */
    for (int k = 0; k < a->np && rc == 0; k++) {
        int j = a->pr[k];
        if (j == d->rank || (!a->sent_n[ps(a, j)] && !a->replies_sent[ps(a, j)]) ||
            a->gone[ps(a, j)] == GONE_DONE || a->gone[ps(a, j)] == GONE_UNKNOWN)
            continue;
        if (hs_dist_peer_dead(d, j)) {
            rc = reclaim(a, j);
        } else {
            long n0 = a->taken_n[ps(a, j)];
            if ((rc = reclaim(a, j)) == 0 && a->taken_n[ps(a, j)] > n0) {
                char why[96];
                snprintf(why, sizeof why, "exited without taking %ld of our shares",
                         a->taken_n[ps(a, j)] - n0);
                lock(a);
                long last = a->last_iter[ps(a, j)];
                unlock(a);
                hs_dist_peer_failed(d, j, last + 1, why);
            }
        }
    }
    return rc;
}

/* Wait (bounded by the comm timeout, longer while p still heartbeats) for one send of ours to
 * peer p; -ETIMEDOUT leaves it in *req, another error frees it. */
static int wait_send(hs_algo_t *a, int p, hs_treq_t **req)
{
    hs_dist_t *d = a->d;
    double t0 = hs_exec_now(d->x);
    int rc = hs_dist_wait_sends(d, req, &p, 1, d->o->comm_timeout_s, NULL, NULL);
    d->st.wait_s += elapsed(a, t0);
    return rc;
}

/* The REPLY in flight to p is done: a failed one's share stays here. */
static int settle_reply(hs_algo_t *a, int p)
{
    hs_dist_t *d = a->d;
    int k = ps(a, p);
    if (!a->rep_req[k]) return 0;
    if (wait_send(a, p, &a->rep_req[k]) == 0) return 0;
    if (a->rep_req[k]) { /* timed out: while p may still run, take back what it has not begun
                            to take; what it had begun to take is its own */
        char why[160];
        snprintf(why, sizeof why, "answer after the end of training not delivered (%s)",
                 hs_last_error());
        hs_error_clear();
        HS_TRY(peer_gone(a, p, why));
        int done = 0;
        if (a->no_revoke) {
            hs_transport_req_free(d->t, &a->rep_req[k]);
        } else if (hs_transport_test(d->t, &a->rep_req[k], &done, NULL) == 0) {
            if (!done) HS_TRY(park(a, &a->rep_req[k], &a->rep_buf[k], 0, p, a->rep_share[k]));
            return 0;
        }
    }
    HS_TRY(absorb(a, (const float *)(a->rep_buf[k] + sizeof(hs_ps_hdr_v1_t)), a->rep_share[k]));
    a->returned_w[k] += a->rep_share[k];
    char why[160];
    snprintf(why, sizeof why, "answer after the end of training not delivered (%s)",
             hs_last_error());
    return peer_gone(a, p, why);
}

/* Answer every source whose GOSSIP was folded since the last answer (after the end of
 * training): (z, w) is split evenly between this rank and them, a column-stochastic mix like
 * any round's, so a rank still training keeps receiving what it gives. */
static int answer(hs_algo_t *a)
{
    hs_dist_t *d = a->d;
    int k = 0;
    /* every previous answer delivered first (a failed one's share comes back here, which moves
     * z: every share below is then sent from one z). All of them, not only those to sources
     * owed now: the receiver can mark a source owed between that check and the sends below,
     * and a send to it would then reuse a buffer and a request still in flight. */
    for (int k = 0; k < a->np; k++) HS_TRY(settle_reply(a, a->pr[k]));
    lock(a);
    for (int q = 0; q < a->np; q++) {
        int j = a->pr[q];
        if (a->owe[ps(a, j)] && hs_dist_peer_dead(d, j)) a->owe[ps(a, j)] = 0;
        k += a->owe[ps(a, j)] > 0;
    }
    unlock(a);
    if (!k) return 0;
    double t0 = hs_exec_now(d->x), share = a->w / (k + 1), sent = 0;
    const float *host = NULL;
    int rc = 0;
    for (int q = 0; q < a->np && rc == 0; q++) {
        int j = a->pr[q];
        lock(a);
        long owed = a->owe[ps(a, j)], it = a->last_iter[ps(a, j)];
        a->owe[ps(a, j)] = 0;
        unlock(a);
        if (!owed || hs_dist_peer_dead(d, j)) continue;
        if (!a->rep_buf[ps(a, j)] &&
            !(a->rep_buf[ps(a, j)] = hs_malloc(a->msg_bytes, "answer snapshot"))) {
            rc = -ENOMEM;
            break;
        }
        hs_ps_hdr_v1_t *h = (hs_ps_hdr_v1_t *)a->rep_buf[ps(a, j)];
        float *pz = (float *)(a->rep_buf[ps(a, j)] + sizeof *h);
        if (host)
            memcpy(pz, host, a->n * sizeof(float));
        else if ((rc = d->k->ops->to_host(d->k, pz, model_z(a), a->n * sizeof(float))) < 0)
            break;
        host = pz;
        sgp_hdr(a, h, HS_PS_REPLY, it, share, a->n);
        if (hs_transport_isend(d->t, j, hs_dist_tag(d, SGP_TAG_GOSSIP), a->rep_buf[ps(a, j)],
                               a->msg_bytes, &a->rep_req[ps(a, j)]) < 0) {
            /* nothing left: its share stays (what it never took is taken back at the end) */
            a->rep_req[ps(a, j)] = NULL;
            hs_dist_peer_failed(d, j, it + 1, hs_last_error());
            continue;
        }
        a->rep_share[ps(a, j)] = share;
        a->replies_sent[ps(a, j)]++;
        a->sent_w[ps(a, j)] += share;
        sent += share;
        d->st.bytes_sent += a->msg_bytes;
    }
    a->w -= sent; /* (z is unchanged by keeping a share: only w scales) */
    d->st.comm_s += elapsed(a, t0);
    return rc;
}

/* An end-of-run notice (DONE or FIN, no payload) to p; a failed one reports p. */
static int notify(hs_algo_t *a, int p, hs_ps_kind_t kind, long count, hs_ps_hdr_v1_t *h,
                  hs_treq_t **req)
{
    hs_dist_t *d = a->d;
    sgp_hdr(a, h, kind, a->trained, 0, 0);
    h->aux[0] = (double)count;
    if (hs_transport_isend(d->t, p, hs_dist_tag(d, SGP_TAG_GOSSIP), h, sizeof *h, req) < 0) {
        *req = NULL;
        return peer_gone(a, p, hs_last_error());
    }
    d->st.bytes_sent += sizeof *h;
    return 0;
}

/* The end of the run. Training is over here, not necessarily elsewhere: this rank tells each
 * out-peer how many GOSSIP messages it sent it (DONE), then keeps receiving and answers every
 * GOSSIP that arrives with a REPLY (answer()), so a rank still training never trains alone.
 * An in-peer whose DONE and every message are in gets a FIN (how many REPLY it was sent); the
 * rank ends when every live in-peer has its FIN and every live out-peer's FIN and REPLY
 * messages are in. Nothing sent is lost; every rank may have trained a different number of
 * rounds (--time-budget). A silent peer is declared failed as in the drain (liveness probes,
 * --drain-timeout of silence). */
static int sgp_finish(hs_algo_t *a)
{
    hs_dist_t *d = a->d;
    int rc = 0;
    for (int i = 0; i < a->tau; i++) HS_TRY(wait_round(a, &a->rounds[i]));
    double t0 = hs_exec_now(d->x);
    lock(a);
    a->lingering = 1;
    unlock(a);
    for (int k = 0; k < a->np && rc == 0; k++) {
        int j = a->pr[k];
        if (j != d->rank && a->out_set[ps(a, j)] && !hs_dist_peer_dead(d, j))
            rc = notify(a, j, HS_PS_DONE, a->sent_n[k] - a->sent_base[k], &a->done_hdr[k],
                        &a->done_req[k]);
    }
    long total_prev = -1;
    double last_progress = t0, next_probe = t0 + 0.5;
    while (rc == 0) {
        if ((rc = fold(a, LONG_MAX)) < 0 || (rc = answer(a)) < 0) break;
        int waiting = 0, ready = 0;
        long total = 0;
        lock(a);
        for (int k = 0; k < a->np; k++) {
            int j = a->pr[k];
            total += a->recv_from[ps(a, j)] + a->reply_recv[ps(a, j)] +
                     (a->done_cnt[ps(a, j)] >= 0) + (a->fin_cnt[ps(a, j)] >= 0);
            if (j == d->rank || hs_dist_peer_dead(d, j)) continue;
            if (a->in_set[ps(a, j)] && !a->fin_sent[ps(a, j)]) {
                if (a->done_cnt[ps(a, j)] >= 0 && a->recv_from[ps(a, j)] >= a->done_cnt[ps(a, j)] &&
                    !a->owe[ps(a, j)])
                    ready++;
                else
                    waiting++;
            }
            if (a->out_set[ps(a, j)] &&
                (a->fin_cnt[ps(a, j)] < 0 || a->reply_recv[ps(a, j)] < a->fin_cnt[ps(a, j)]))
                waiting++;
        }
        if (waiting && !ready && !a->acc_msgs && !a->nheld) hs_svc_wait(d->x, a->svc, 0.1);
        unlock(a);
        for (int k = 0; k < a->np && ready && rc == 0; k++) {
            int j = a->pr[k];
            if (j == d->rank || !a->in_set[ps(a, j)] || a->fin_sent[ps(a, j)] ||
                hs_dist_peer_dead(d, j))
                continue;
            lock(a);
            int ok = a->done_cnt[ps(a, j)] >= 0 &&
                     a->recv_from[ps(a, j)] >= a->done_cnt[ps(a, j)] && !a->owe[ps(a, j)];
            unlock(a);
            if (!ok) continue;
            if ((rc = settle_reply(a, j)) == 0 && !hs_dist_peer_dead(d, j))
                rc = notify(a, j, HS_PS_FIN, a->replies_sent[ps(a, j)] - a->rep_base[ps(a, j)],
                            &a->fin_hdr[ps(a, j)], &a->fin_req[ps(a, j)]);
            a->fin_sent[ps(a, j)] = 1;
        }
        if (rc < 0 || (!waiting && !ready)) break;
        if (ready) continue;
        if ((rc = hs_dist_idle(d)) < 0) break;
        double now = hs_exec_now(d->x);
        if (total != total_prev) last_progress = now, total_prev = total;
        int silent = now - last_progress >= d->o->drain_timeout_s, probe = now >= next_probe;
        if (!silent && !probe) continue;
        if (probe) next_probe = now + 0.5;
        for (int k = 0; k < a->np; k++) {
            int j = a->pr[k];
            if (j == d->rank || hs_dist_peer_dead(d, j)) continue;
            lock(a);
            int in_wait = a->in_set[ps(a, j)] && !a->fin_sent[ps(a, j)];
            int out_wait = a->out_set[ps(a, j)] && (a->fin_cnt[ps(a, j)] < 0 ||
                                                    a->reply_recv[ps(a, j)] < a->fin_cnt[ps(a, j)]);
            long got = a->recv_from[ps(a, j)], last = a->last_iter[ps(a, j)],
                 want = a->done_cnt[ps(a, j)];
            unlock(a);
            if (!in_wait && !out_wait) continue;
            char why[200];
            hs_dist_late_t l = {.quiet = now - last_progress,
                                .limit = d->o->drain_timeout_s,
                                .silent = silent,
                                .heartbeats = 1,
                                .probe = 1,
                                .probe_s = 0.3};
            int v = hs_dist_late_peer(d, j, &l);
            if (v == HS_LATE_SILENT) {
                snprintf(why, sizeof why,
                         "%ld messages arrived (%ld announced), then %.1f s of silence at the end "
                         "of the run",
                         got, want, d->o->drain_timeout_s);
                hs_dist_peer_failed(d, j, last + 1, why);
            } else if (v == HS_LATE_EXITED) {
                snprintf(why, sizeof why, "exited at the end of the run after sending %ld messages",
                         got);
                hs_dist_peer_failed(d, j, last + 1, why);
            }
        }
    }
    /* own answers and notices delivered (a failed answer's share stays here) */
    for (int k = 0; k < a->np && rc == 0; k++) {
        int j = a->pr[k];
        rc = settle_reply(a, j);
        if (a->done_req[k] && wait_send(a, j, &a->done_req[k]) < 0) hs_error_clear();
        if (a->fin_req[k] && wait_send(a, j, &a->fin_req[k]) < 0) hs_error_clear();
        if (a->done_req[k]) hs_transport_req_free(d->t, &a->done_req[k]); /* (no weight) */
        if (a->fin_req[k]) hs_transport_req_free(d->t, &a->fin_req[k]);
    }
    if (rc == 0) rc = settle(a);
    if (rc == 0) rc = record_failed(a);
    d->st.wait_s += elapsed(a, t0);
    if (rc < 0) return rc;
    return fold(a, LONG_MAX);
}

static int sgp_drain(hs_algo_t *a, int final)
{
    hs_dist_t *d = a->d;
    /* Before an evaluation, with a bound (held mode): nothing. Evaluation observes; mixing
     * early would make the iterates depend on where evaluations fall. */
    if (!final && a->bound >= 0) return 0;
    if (final && d->drain_until <= 0) {
        /* exact: every round up to the last trained is in and mixed, in (round, source) order,
         * before the end-of-run exchange (OSGP's last D rounds included), so nothing in flight
         * is left to arrive in an order that timing decides */
        if (a->exact) {
            HS_TRY(wait_exact(a, a->mixed_upto + 1, a->trained - 1));
            HS_TRY(fold(a, LONG_MAX));
        }
        return sgp_finish(a);
    }
    for (int i = 0; i < a->tau; i++) HS_TRY(wait_round(a, &a->rounds[i]));
    if (!final) return fold(a, LONG_MAX);
    double t0 = hs_exec_now(d->x);
    /* how many messages the schedule says each in-peer sends here over the run */
    int cap = HS_MAX(1, hs_topo_max_in_degree(d->topo)), rc = 0;
    long *want = hs_calloc((size_t)a->np + 1, sizeof *want, "expected messages"); /* (peers) */
    int *in = hs_malloc((size_t)cap * sizeof *in, "in-peers");
    if (!want || !in) {
        free(want);
        free(in);
        return -ENOMEM;
    }
    long until = d->drain_until > 0 ? d->drain_until : d->total_iters;
    for (long t = d->start_iter; t < until && rc == 0; t++) {
        int c = 0;
        rc = hs_topo_in_peers(d->topo, t, d->rank, in, NULL, cap, &c);
        for (int i = 0; i < c && rc == 0; i++) want[ps(a, in[i])]++;
    }
    free(in);
    /* wait while the missing peers live and make progress (bounded by drain_timeout_s of
     * silence; same-host peers that exited are noticed by a liveness probe) */
    long total_prev = -1;
    double last_progress = t0, next_probe = t0 + 0.5;
    while (rc == 0) {
        int missing = 0;
        long total = 0;
        lock(a);
        for (int k = 0; k < a->np; k++) {
            int j = a->pr[k];
            total += a->recv_from[k];
            if (j != d->rank && !hs_dist_peer_dead(d, j) && a->recv_from[k] < want[k]) missing++;
        }
        if (missing) hs_svc_wait(d->x, a->svc, 0.1);
        unlock(a);
        if (!missing) break;
        if ((rc = hs_dist_idle(d)) < 0) break;
        double now = hs_exec_now(d->x);
        if (total != total_prev) last_progress = now, total_prev = total;
        int silent = now - last_progress >= d->o->drain_timeout_s, probe = now >= next_probe;
        if (!silent && !probe) continue;
        if (probe) next_probe = now + 0.5;
        for (int k = 0; k < a->np; k++) {
            int j = a->pr[k];
            if (j == d->rank || hs_dist_peer_dead(d, j)) continue;
            lock(a);
            long got = a->recv_from[k], last = a->last_iter[k];
            unlock(a);
            if (got >= want[k]) continue;
            char why[200];
            hs_dist_late_t l = {.quiet = now - last_progress,
                                .limit = d->o->drain_timeout_s,
                                .silent = silent,
                                .heartbeats = 1,
                                .probe = 1,
                                .probe_s = 0.3};
            int v = hs_dist_late_peer(d, j, &l);
            if (v == HS_LATE_SILENT) {
                snprintf(
                    why, sizeof why,
                    "%ld of %ld messages arrived, then %.1f s of silence at the end of the run",
                    got, want[k], d->o->drain_timeout_s);
                hs_dist_peer_failed(d, j, last + 1, why);
            } else if (v == HS_LATE_EXITED) {
                snprintf(why, sizeof why, "exited after sending %ld of %ld messages", got, want[k]);
                hs_dist_peer_failed(d, j, last + 1, why);
            }
        }
    }
    free(want);
    if (rc == 0) rc = settle(a);
    d->st.wait_s += elapsed(a, t0);
    if (rc < 0) return rc;
    return fold(a, until - 1);
}

static void sgp_finalize(hs_algo_t **ap)
{
    hs_algo_t *a = ap ? *ap : NULL;
    if (!a) return;
    hs_dist_t *d = a->d;
    hs_svc_stop(d->x, &a->svc);
    for (int r = 0; r < a->tau && a->rounds; r++) {
        sgp_round_t *rd = &a->rounds[r];
        for (int i = 0; i < a->maxdeg; i++) {
            if (rd->req && rd->req[i]) hs_transport_req_free(d->t, &rd->req[i]);
            if (rd->buf) hs_transport_buf_free(d->t, (void **)&rd->buf[i]);
        }
        free(rd->peer);
        free(rd->req);
        free(rd->buf);
        free(rd->share);
    }
    free(a->rounds);
    /* parked sends still in flight to a failed rank stay (the transport drops them when it
     * closes, and a rank that may wake reads their buffers meanwhile) */
    free(a->parked);
    for (int k = 0; k <= a->np && a->rep_req; k++) {
        if (a->rep_req[k]) hs_transport_req_free(d->t, &a->rep_req[k]);
        if (a->done_req[k]) hs_transport_req_free(d->t, &a->done_req[k]);
        if (a->fin_req[k]) hs_transport_req_free(d->t, &a->fin_req[k]);
        if (a->rep_buf) free(a->rep_buf[k]);
    }
    free(a->rep_req);
    free(a->done_req);
    free(a->fin_req);
    free(a->rep_buf);
    free(a->rep_share);
    free(a->done_hdr);
    free(a->fin_hdr);
    free(a->in_set);
    free(a->out_set);
    free(a->owe);
    free(a->reply_recv);
    free(a->done_cnt);
    free(a->fin_cnt);
    free(a->replies_sent);
    free(a->fin_sent);
    free(a->peer_inc);
    free(a->admit);
    free(a->sent_base);
    free(a->rep_base);
    for (size_t i = 0; i < a->nheld; i++) free(a->held[i].z);
    for (size_t i = 0; i < a->npool; i++) free(a->pool[i]);
    free(a->held);
    free(a->pool);
    free(a->acc_it[0]);
    free(a->acc_it[1]);
    free(a->acc[0]);
    free(a->acc[1]);
    free(a->recv_from);
    free(a->want);
    free(a->last_iter);
    free(a->recv_w);
    free(a->sent_n);
    free(a->sent_w);
    free(a->returned_w);
    free(a->taken_n);
    free(a->taken_w);
    free(a->gone);
    free(a->held_from);
    free(a->pr);
    free(a->comp);
    free(a->peers);
    free(a->wts);
    hs_stage_close(&a->view);
    free(a);
    *ap = NULL;
}

static int cmp_int(const void *x, const void *y)
{
    int a = *(const int *)x, b = *(const int *)y;
    return (a > b) - (a < b);
}

/* a->pr, a->np: the ranks this rank receives from or sends to in some iteration of a period
 * of the graph (every other rank for an aperiodic schedule), ascending; a->peers and a->wts
 * (maxdeg) serve as scratch. */
static int peer_set(hs_algo_t *a)
{
    hs_dist_t *d = a->d;
    int period = hs_topo_period(d->topo), cap = HS_MAX(1, hs_topo_max_in_degree(d->topo));
    size_t room = period > 0 ? (size_t)period * (size_t)(cap + a->maxdeg) : (size_t)d->size;
    int *in = hs_malloc((size_t)cap * sizeof *in, "in-peers");
    a->pr = hs_malloc((room ? room : 1) * sizeof *a->pr, "peers");
    if (!in || !a->pr) {
        free(in);
        return -ENOMEM;
    }
    int n = 0, rc = 0;
    if (period == 0) {
        for (int j = 0; j < d->size; j++)
            if (j != d->rank) a->pr[n++] = j;
    }
    for (long t = 0; t < period && rc == 0; t++) {
        int c = 0;
        double self = 0;
        if ((rc = hs_topo_in_peers(d->topo, t, d->rank, in, NULL, cap, &c)) < 0) break;
        for (int i = 0; i < c; i++) a->pr[n++] = in[i];
        if ((rc = hs_topo_out_peers(d->topo, t, d->rank, a->peers, a->wts, a->maxdeg, &c, &self)) <
            0)
            break;
        for (int i = 0; i < c; i++) a->pr[n++] = a->peers[i];
    }
    free(in);
    if (rc < 0) return rc;
    qsort(a->pr, (size_t)n, sizeof *a->pr, cmp_int);
    int m = 0;
    for (int i = 0; i < n; i++)
        if (a->pr[i] != d->rank && (m == 0 || a->pr[m - 1] != a->pr[i])) a->pr[m++] = a->pr[i];
    a->np = m;
    return 0;
}

/* --delay-bound as given: D >= 0, HS_DELAY_NONE or HS_DELAY_AUTO (--max-staleness S > 0 is
 * the deprecated spelling of --delay-bound S). -EINVAL naming the flag. */
static int delay_given(const hs_cfg_t *cfg, long *bound)
{
    const char *db = hs_cfg_str(cfg, "delay-bound");
    *bound = HS_DELAY_AUTO;
    if (db && !strcmp(db, "none")) {
        *bound = HS_DELAY_NONE;
    } else if (db && strcmp(db, "auto")) {
        if (hs_parse_long(db, 0, 1000000, "--delay-bound", bound) < 0) {
            char why[256];
            snprintf(why, sizeof why, "%s", hs_last_error());
            return HS_ERR(-EINVAL, "%s (or none, auto)", why);
        }
    }
    if (hs_cfg_int(cfg, "max-staleness") > 0) {
        if (hs_cfg_source(cfg, "delay-bound") != HS_CFG_DEFAULT)
            return HS_ERR(-EINVAL, "--max-staleness and --delay-bound say the same thing: give "
                                   "one (--max-staleness is deprecated)");
        *bound = hs_cfg_int(cfg, "max-staleness");
    }
    return 0;
}

/* The delay bound and mode in force for sgp (osgp 0) or osgp (1): --delay-bound, or the
 * paper's (OSGP: tau; SGP: 0); --delay-mode, or the algorithm's own (sgp exact: the paper's
 * synchronous Algorithm 1; osgp bounded: Algorithm 2's delays of at most tau rounds), AUTO
 * without a bound (asynchronous). */
static int delay_in_force(const hs_cfg_t *cfg, int osgp, long *bound, hs_delay_mode_t *mode)
{
    HS_TRY(delay_given(cfg, bound));
    if (*bound == HS_DELAY_AUTO) *bound = osgp ? hs_cfg_int(cfg, "tau") : 0;
    const char *dm = hs_cfg_str(cfg, "delay-mode");
    *mode = *bound < 0               ? HS_DELAY_MODE_AUTO
            : !strcmp(dm, "exact")   ? HS_DELAY_MODE_EXACT
            : !strcmp(dm, "bounded") ? HS_DELAY_MODE_BOUNDED
            : osgp                   ? HS_DELAY_MODE_BOUNDED
                                     : HS_DELAY_MODE_EXACT;
    return 0;
}

static int sgp_open(hs_algo_t **out, hs_dist_t *d, int tau, long bound, hs_delay_mode_t mode)
{
    *out = NULL;
    if (!d->topo) return HS_ERR(-EINVAL, "SGP needs a graph (--graph)");
    if (tau < 1) return HS_ERR(-EINVAL, "--tau must be at least 1 (got %d)", tau);
    int step_x = !strcmp(hs_dist_opt_str(d, "sgp-step"), "x");
    if (hs_dist_opt_int(d, "max-staleness") > 0 && d->rank == 0)
        HS_WARN("--max-staleness S is deprecated: use --delay-bound S");
    if (step_x && bound < 0 && d->rank == 0)
        HS_WARN("the step on x (--sgp-step x, the default) with --delay-bound none: under "
                "unbounded delays a rank's w can drift toward 0 and its step lr / w diverge "
                "(--sgp-step z is the robust choice there)");
    hs_algo_t *a = hs_calloc(1, sizeof *a, "SGP state");
    if (!a) return -ENOMEM;
    a->d = d;
    a->tau = tau;
    a->bound = bound;
    a->exact = bound >= 0 && mode == HS_DELAY_MODE_EXACT;
    a->step_x = step_x;
    a->mixed_upto = d->start_iter - 1;
    a->trained = d->start_iter;
    a->n = d->n;
    a->w = 1.0;
    a->msg_bytes = sizeof(hs_ps_hdr_v1_t) + a->n * sizeof(float);
    a->maxdeg = HS_MAX(1, hs_topo_max_out_degree(d->topo));
    int rc = hs_stage_view_open(&a->view, d->k, a->n, "push-sum message");
    if (rc < 0) goto fail;
    rc = -ENOMEM;
    a->peers = hs_calloc((size_t)a->maxdeg, sizeof *a->peers, "peers");
    a->wts = hs_calloc((size_t)a->maxdeg, sizeof *a->wts, "weights");
    a->rounds = hs_calloc((size_t)tau, sizeof *a->rounds, "send rounds");
    a->acc[0] = hs_calloc(a->n, sizeof(float), "receive accumulator");
    a->acc[1] = hs_calloc(a->n, sizeof(float), "receive accumulator");
    if (!a->peers || !a->wts || (rc = peer_set(a)) < 0) goto fail;
    rc = -ENOMEM;
    size_t ns = (size_t)a->np + 1; /* (the per-peer tables: one more for any other rank) */
    a->recv_from = hs_calloc(ns, sizeof *a->recv_from, "receive counts");
    a->last_iter = hs_calloc(ns, sizeof *a->last_iter, "last iterations");
    a->want = hs_calloc(ns, sizeof *a->want, "expected messages");
    a->stale_next = -1;
    a->recv_w = hs_calloc(ns, sizeof *a->recv_w, "received weights");
    a->sent_n = hs_calloc(ns, sizeof *a->sent_n, "sent counts");
    a->sent_w = hs_calloc(ns, sizeof *a->sent_w, "sent weights");
    a->returned_w = hs_calloc(ns, sizeof *a->returned_w, "returned weights");
    a->taken_n = hs_calloc(ns, sizeof *a->taken_n, "taken-back counts");
    a->taken_w = hs_calloc(ns, sizeof *a->taken_w, "taken-back weights");
    a->gone = hs_calloc(ns, sizeof *a->gone, "failed peers");
    a->held_from = hs_calloc(ns, sizeof *a->held_from, "held weights");
    a->inc = d->x ? d->x->incarnation : 0;
    a->peer_inc = hs_calloc(ns, sizeof *a->peer_inc, "incarnations");
    a->admit = hs_calloc(ns, sizeof *a->admit, "first rounds");
    a->sent_base = hs_calloc(ns, sizeof *a->sent_base, "sent before");
    a->rep_base = hs_calloc(ns, sizeof *a->rep_base, "answered before");
    if (!a->peer_inc || !a->admit || !a->sent_base || !a->rep_base) goto fail;
    if (!a->peers || !a->wts || !a->rounds || !a->acc[0] || !a->acc[1] || !a->recv_from ||
        !a->last_iter || !a->want || !a->recv_w || !a->sent_n || !a->sent_w || !a->returned_w ||
        !a->taken_n || !a->taken_w || !a->gone || !a->held_from)
        goto fail;
    a->in_set = hs_calloc(ns, 1, "in-peer set");
    a->out_set = hs_calloc(ns, 1, "out-peer set");
    a->owe = hs_calloc(ns, sizeof *a->owe, "answers owed");
    a->reply_recv = hs_calloc(ns, sizeof *a->reply_recv, "answers received");
    a->done_cnt = hs_calloc(ns, sizeof *a->done_cnt, "announced counts");
    a->fin_cnt = hs_calloc(ns, sizeof *a->fin_cnt, "announced answers");
    a->replies_sent = hs_calloc(ns, sizeof *a->replies_sent, "answers sent");
    a->fin_sent = hs_calloc(ns, 1, "FIN sent");
    a->done_req = hs_calloc(ns, sizeof *a->done_req, "DONE requests");
    a->fin_req = hs_calloc(ns, sizeof *a->fin_req, "FIN requests");
    a->rep_req = hs_calloc(ns, sizeof *a->rep_req, "answer requests");
    a->done_hdr = hs_calloc(ns, sizeof *a->done_hdr, "DONE headers");
    a->fin_hdr = hs_calloc(ns, sizeof *a->fin_hdr, "FIN headers");
    a->rep_buf = hs_calloc(ns, sizeof *a->rep_buf, "answer buffers");
    a->rep_share = hs_calloc(ns, sizeof *a->rep_share, "answer shares");
    if (!a->in_set || !a->out_set || !a->owe || !a->reply_recv || !a->done_cnt || !a->fin_cnt ||
        !a->replies_sent || !a->fin_sent || !a->done_req || !a->fin_req || !a->rep_req ||
        !a->done_hdr || !a->fin_hdr || !a->rep_buf || !a->rep_share)
        goto fail;
    for (int k = 0; k <= a->np; k++) a->last_iter[k] = -1, a->done_cnt[k] = -1, a->fin_cnt[k] = -1;
    for (int r = 0; r < tau; r++) {
        sgp_round_t *rd = &a->rounds[r];
        rd->iter = -1;
        rd->peer = hs_calloc((size_t)a->maxdeg, sizeof *rd->peer, "round peers");
        rd->req = hs_calloc((size_t)a->maxdeg, sizeof *rd->req, "round requests");
        rd->buf = hs_calloc((size_t)a->maxdeg, sizeof *rd->buf, "round buffers");
        rd->share = hs_calloc((size_t)a->maxdeg, sizeof *rd->share, "round shares");
        if (!rd->peer || !rd->req || !rd->buf || !rd->share) goto fail;
        /* Snapshots in memory a same-host receiver maps (hsshm): each is written once, by
         * to_host, and the receiver copies it once straight from there (no ring). */
        for (int i = 0; i < a->maxdeg; i++)
            if (hs_transport_buf_alloc(d->t, a->msg_bytes, (void **)&rd->buf[i]) < 0) goto fail;
    }
    /* Receives are posted per peer (every rank that sends here or that this rank sends to in
     * some iteration of a period, the latter for the answers at the end of the run; all ranks
     * for an aperiodic schedule), RX_SLOTS each, and reposted at once. */
    int period = hs_topo_period(d->topo), cap = HS_MAX(1, hs_topo_max_in_degree(d->topo));
    int *in = hs_malloc((size_t)cap * sizeof *in, "in-peers");
    if (!in) goto fail;
    int nsrc = 0;
    rc = 0;
    for (long t = 0; t < (period > 0 ? period : 1); t++) {
        int c = 0;
        double self = 0;
        if (period == 0) {
            for (int j = 0; j < d->size; j++)
                a->in_set[ps(a, j)] = a->out_set[ps(a, j)] = j != d->rank;
            break;
        }
        if ((rc = hs_topo_in_peers(d->topo, t, d->rank, in, NULL, cap, &c)) < 0) break;
        for (int i = 0; i < c; i++) a->in_set[ps(a, in[i])] = 1;
        if ((rc = hs_topo_out_peers(d->topo, t, d->rank, a->peers, a->wts, a->maxdeg, &c, &self)) <
            0)
            break;
        for (int i = 0; i < c; i++) a->out_set[ps(a, a->peers[i])] = 1;
    }
    free(in);
    a->in_set[ps(a, d->rank)] = a->out_set[ps(a, d->rank)] = 0;
    for (int k = 0; k < a->np; k++) nsrc += a->in_set[k] || a->out_set[k];
    hs_service_desc_t sd = {.name = "gossip receiver",
                            .n_slots = HS_MAX(1, nsrc * RX_SLOTS),
                            .slot_bytes = a->msg_bytes,
                            .on_msg = rx_apply,
                            .ctx = a,
                            .flags = HS_SVC_PURE};
    int *src = hs_malloc((size_t)sd.n_slots * sizeof *src, "receive sources");
    uint32_t *tag = hs_malloc((size_t)sd.n_slots * sizeof *tag, "receive tags");
    if (rc == 0 && (!src || !tag)) rc = -ENOMEM;
    for (int q = 0, i = 0; q < a->np && rc == 0; q++)
        for (int k = 0; (a->in_set[q] || a->out_set[q]) && k < RX_SLOTS; k++, i++)
            src[i] = a->pr[q], tag[i] = hs_dist_tag(d, SGP_TAG_GOSSIP);
    sd.src = src;
    sd.tag = tag;
    if (rc == 0 && nsrc > 0) rc = hs_svc_start(d->x, &sd, &a->svc);
    free(src);
    free(tag);
    if (rc < 0) goto fail;
    *out = a;
    return 0;
fail:
    sgp_finalize(&a);
    return rc;
}

static int sgp_init(hs_algo_t **out, hs_dist_t *d)
{
    long bound;
    hs_delay_mode_t mode;
    HS_TRY(delay_in_force(d->cfg, 0, &bound, &mode));
    return sgp_open(out, d, 1, bound, mode);
}

static int osgp_init(hs_algo_t **out, hs_dist_t *d)
{
    long bound;
    hs_delay_mode_t mode;
    HS_TRY(delay_in_force(d->cfg, 1, &bound, &mode));
    return sgp_open(out, d, (int)hs_dist_opt_int(d, "tau"), bound, mode);
}

/* --delay-bound, --delay-mode (and the deprecated --max-staleness) before the job starts. */
static int sgp_check(const hs_algo_opts_t *o, const hs_cfg_t *cfg, int ranks)
{
    (void)ranks;
    long bound;
    HS_TRY(delay_given(cfg, &bound));
    if (!strcmp(hs_cfg_str(cfg, "delay-mode"), "exact") && bound == HS_DELAY_NONE)
        return HS_ERR(-EINVAL, "--delay-mode exact needs a delay bound D >= 0 (round t mixes "
                               "round t - D's messages): --delay-bound none is asynchronous");
    hs_delay_mode_t mode;
    HS_TRY(delay_in_force(cfg, 0, &bound, &mode));
    if (o->rejoin && mode != HS_DELAY_MODE_EXACT)
        return HS_ERR(-EINVAL, "a replacement (--straggler crash:...:rejoin=D) joins sgp with "
                               "--delay-mode exact only (sgp's default), not with this "
                               "--delay-bound / --delay-mode");
    return 0;
}

/* summary.json: the variant of SGP that ran (docs/algorithms.md). */
static int sgp_summary_of(const hs_cfg_t *cfg, int osgp, FILE *f)
{
    long bound;
    hs_delay_mode_t mode;
    HS_TRY(delay_in_force(cfg, osgp, &bound, &mode));
    if (bound >= 0)
        fprintf(f, "  \"delay_bound\": %ld,\n", bound);
    else
        fprintf(f, "  \"delay_bound\": \"none\",\n");
    fprintf(f, "  \"sgp_step\": \"%s\",\n", hs_cfg_str(cfg, "sgp-step"));
    fprintf(f, "  \"delay_mode\": \"%s\",\n",
            mode == HS_DELAY_MODE_EXACT     ? "exact"
            : mode == HS_DELAY_MODE_BOUNDED ? "bounded"
                                            : "none");
    return 0;
}

static int sgp_summary(const hs_cfg_t *cfg, FILE *f)
{
    return sgp_summary_of(cfg, 0, f);
}

static int osgp_summary(const hs_cfg_t *cfg, FILE *f)
{
    return sgp_summary_of(cfg, 1, f);
}

/* The step on x moves z by lr / w: say so when w has fallen. */
static int sgp_diverged_hint(const hs_algo_t *a, const hs_dist_t *d, double w_min, char *buf,
                             size_t len)
{
    (void)d;
    if (!a || !a->step_x || !(w_min < 0.1)) return 0;
    snprintf(buf, len,
             "; its push-sum weight fell to %.3g, w %.3g now, and the step on x moves z by lr / "
             "w): bound delays tighter (--delay-bound 0..2), or take the step on z (--sgp-step "
             "z), or a smaller --lr",
             w_min, a->w);
    return 1;
}

/* The options of sgp (and osgp: with tau). */
#define SGP_OPTIONS                                                                                \
    {.name = "delay-bound",                                                                        \
     .type = HS_OPT_STRING,                                                                        \
     .def = "auto",                                                                                \
     .metavar = "D",                                                                               \
     .help = "before mixing round t, wait (bounded by --comm-timeout) for every message the "      \
             "in-peers sent up to round t-D; 0: round t's own (the SGP paper), none: never wait "  \
             "(asynchronous); auto: sgp 0, osgp --tau (the papers' bounded delays)"},              \
        {.name = "delay-mode",                                                                     \
         .type = HS_OPT_ENUM,                                                                      \
         .def = "auto",                                                                            \
         .choices = "auto|exact|bounded",                                                          \
         .help = "with a delay bound D: exact mixes in round t exactly the in-peers' messages of " \
                 "round t-D, in source order (a fixed delay: the iterates do not depend on "       \
                 "timing; later rounds are held until their turn); bounded mixes whatever has "    \
                 "arrived, waiting for rounds <= t-D (delays of at most D); auto: sgp exact (the " \
                 "SGP paper's Algorithm 1), osgp bounded"},                                        \
        {.name = "max-staleness",                                                                  \
         .type = HS_OPT_INT,                                                                       \
         .def = "0",                                                                               \
         .range = "[0, 1000000]",                                                                  \
         .metavar = "S",                                                                           \
         .help = "deprecated: --delay-bound S (S > 0)"},                                           \
    {                                                                                              \
        .name = "sgp-step", .type = HS_OPT_ENUM, .def = "x", .choices = "x|z",                     \
        .help = "take the local step on x as in the SGP paper (the default: z moves by the step "  \
                "/ w) or on z (z moves by the step whatever w is: a robustness option for "        \
                "--delay-bound none, where w may drift toward 0 and lr / w diverge)"               \
    }

static const hs_option_t sgp_options[] = {SGP_OPTIONS};

static const hs_option_t osgp_options[] = {
    SGP_OPTIONS,
    {.name = "tau",
     .type = HS_OPT_INT,
     .def = "2",
     .range = "[1, 64]",
     .metavar = "K",
     .help = "send rounds that may be in flight while computing (default 2; sgp is tau 1)"},
};

static double sgp_weight(const hs_algo_t *a)
{
    return a->w;
}

/* Checkpoint state beyond the worker's (which saves z and the velocity): the weight. */
static size_t sgp_state_bytes(const hs_algo_t *a)
{
    (void)a;
    return sizeof(double);
}

static int sgp_state_save(hs_algo_t *a, void *buf)
{
    memcpy(buf, &a->w, sizeof a->w);
    return 0;
}

static int sgp_state_load(hs_algo_t *a, const void *buf)
{
    memcpy(&a->w, buf, sizeof a->w);
    if (!(a->w > 0) || !isfinite(a->w))
        return HS_ERR(-EINVAL, "checkpoint: push-sum weight %g is not positive", a->w);
    return 0;
}

/* A replacement joins (hs_algo_ops_t.rejoin; runtime/rejoin.h). Push-sum mass stays N: the
 * donor hands over half its weight with its z (the replacement's z / w is the donor's), and
 * the rank that crashed took its own weight with it (counted as lost). The synchronous
 * protocol (--delay-mode exact) goes on for everyone: a peer admits the replacement from its
 * first round K; a peer already past K sends it the rounds [K, its own) as messages of weight
 * 0 (its waits for them end, nothing moves), and mixes the replacement's shares of those
 * rounds when they come (a late message of a round already mixed goes into the next). */
static int sgp_rejoin(hs_algo_t *a, int peer, long iter, int role)
{
    hs_dist_t *d = a->d;
    if (!a->exact)
        return HS_ERR(-ENOTSUP, "a replacement (crash:...:rejoin=D) joins sgp with --delay-mode "
                                "exact only (the default of sgp)");
    if (role == HS_REJOIN_DONOR || role == HS_REJOIN_UNDO) {
        /* (the state saved next holds the half handed over; undone: it is back, exactly) */
        a->w *= role == HS_REJOIN_DONOR ? 0.5 : 2.0;
        return 0;
    }
    if (role == HS_REJOIN_ADOPT) {
        a->trained = iter;
        a->mixed_upto = iter - 1;
        return 0;
    }
    int k = ps(a, peer);
    if (k == a->np) return 0;
    /* what reached the crashed process after its crash comes back first (it never took it) */
    a->cb_rc = 0;
    int rc = hs_transport_unsent(d->t, peer, hs_dist_tag(d, SGP_TAG_GOSSIP), take_back, a);
    if (rc == -EBUSY || rc == -ENOSYS) {
        hs_error_clear();
        rc = 0;
    }
    HS_TRY(rc);
    HS_TRY(a->cb_rc);
    a->gone[k] = GONE_NO;
    a->sent_base[k] = a->sent_n[k];
    a->rep_base[k] = a->replies_sent[k];
    a->fin_sent[k] = 0;
    a->admit[k] = iter;
    a->comp_gen = -1; /* (the survivors' graph again) */
    /* the rounds [iter, trained) it waits for from this rank: weight 0 */
    int cnt = 0;
    double self = 0;
    unsigned char *buf = NULL;
    for (long r = iter; r < a->trained && rc == 0; r++) {
        if ((rc = hs_topo_out_peers(d->topo, r, d->rank, a->peers, a->wts, a->maxdeg, &cnt,
                                    &self)) < 0)
            break;
        int to = 0;
        for (int i = 0; i < cnt; i++) to |= a->peers[i] == peer;
        if (!to) continue;
        if (!buf) {
            if (!(buf = hs_malloc(a->msg_bytes, "catch-up message"))) return -ENOMEM;
            rc = d->k->ops->to_host(d->k, buf + sizeof(hs_ps_hdr_v1_t), model_z(a),
                                    a->n * sizeof(float));
        }
        hs_ps_hdr_v1_t *h = (hs_ps_hdr_v1_t *)buf;
        sgp_hdr(a, h, HS_PS_GOSSIP, r, 0.0, a->n);
        hs_treq_t *req = NULL;
        if (rc == 0)
            rc = hs_transport_isend(d->t, peer, hs_dist_tag(d, SGP_TAG_GOSSIP), buf, a->msg_bytes,
                                    &req);
        if (rc == 0) rc = hs_exec_wait1(d->x, &req, d->o->comm_timeout_s, HS_WAIT_NO_IDLE, NULL);
        if (req) hs_transport_req_free(d->t, &req);
        if (rc == 0) {
            a->sent_n[k]++;
            d->st.bytes_sent += a->msg_bytes;
        }
    }
    free(buf);
    return rc;
}

/* hs_transport_leave hands back a message that reached this rank and was not folded. */
static void held(void *ctx, int peer, const void *buf, size_t got, size_t len)
{
    hs_algo_t *a = ctx;
    const hs_ps_hdr_v1_t *h = buf;
    /* The weight is in the header, which arrives first: a message with its header here is
     * this rank's (the sender completes it); one without cannot be counted by anyone. */
    if (peer < 0 || peer >= a->d->size || got < sizeof *h ||
        hs_ps_hdr_check(h, len, h->kind == HS_PS_REPLY ? HS_PS_REPLY : HS_PS_GOSSIP, peer, a->n) <
            0 ||
        !(h->weight >= 0 && isfinite(h->weight)))
        return;
    a->held_w += h->weight;
    a->held_from[ps(a, peer)] += h->weight;
}

/* The injected crash (hs_algo_ops_t.crash): settle own sends, stop receiving, and the weight
 * this rank takes with it. */
static int sgp_crash(hs_algo_t *a, double *lost, double *recv_from)
{
    hs_dist_t *d = a->d;
    int rc = 0;
    /* Fenced (not crashed): the others refuse what they take of ours from now on, and may
     * never take the rest (they stopped receiving from this rank): take back every share
     * they have not begun to take, so that it is counted here, as lost, exactly once. */
    if (hs_dist_peer_hb(d, d->rank) == 2)
        for (int k = 0; k < a->np && rc == 0; k++) rc = revoke(a, a->pr[k]);
    /* Own shares in flight: written whole into the receivers' rings (eager) or read by them
     * (by address: a dead process cannot be read), else failed and kept here. */
    for (int i = 0; i < a->tau && rc == 0; i++) rc = wait_round(a, &a->rounds[i]);
    a->held_w = 0;
    memset(a->held_from, 0, ((size_t)a->np + 1) * sizeof *a->held_from);
    int n = hs_transport_leave(d->t, hs_dist_tag(d, SGP_TAG_GOSSIP), held, a);
    if (n < 0 && n != -ENOSYS && rc == 0) rc = n;
    hs_svc_stop(d->x, &a->svc); /* its handler has folded what it took; nothing more comes */
    double kept = 0;            /* shares held for their round (the service has stopped) */
    for (size_t i = 0; i < a->nheld; i++) kept += a->held[i].w;
    *lost = a->w + a->acc_w[0] + a->acc_w[1] + a->held_w + kept;
    for (int k = 0; k < a->np; k++) recv_from[a->pr[k]] = a->recv_w[k] + a->held_from[k];
    return rc;
}

const hs_algo_ops_t hs_algo_sgp_ops = {
    .size = sizeof(hs_algo_ops_t),
    .name = "sgp",
    .help = "Stochastic Gradient Push (push-sum gossip, directed graphs)",
    .flags = HS_ALGO_GRAPH | HS_ALGO_PUSHSUM | HS_ALGO_COMM | HS_ALGO_TOLERANT | HS_ALGO_BUDGET,
    .options = sgp_options,
    .n_options = HS_ARRAY_LEN(sgp_options),
    .init = sgp_init,
    .step = sgp_step,
    .drain = sgp_drain,
    .finalize = sgp_finalize,
    .weight = sgp_weight,
    .state_bytes = sgp_state_bytes,
    .state_save = sgp_state_save,
    .state_load = sgp_state_load,
    .crash = sgp_crash,
    .rejoin = sgp_rejoin,
    .check = sgp_check,
    .summary = sgp_summary,
    .diverged_hint = sgp_diverged_hint,
    .msg_header = sizeof(hs_ps_hdr_v1_t), /* its wire header (--sim-payload) */
};

const hs_algo_ops_t hs_algo_osgp_ops = {
    .size = sizeof(hs_algo_ops_t),
    .name = "osgp",
    .help = "overlap SGP: --tau rounds of gossip in flight behind the computation",
    .flags = HS_ALGO_GRAPH | HS_ALGO_PUSHSUM | HS_ALGO_COMM | HS_ALGO_TOLERANT | HS_ALGO_BUDGET,
    .options = osgp_options,
    .n_options = HS_ARRAY_LEN(osgp_options),
    .init = osgp_init,
    .step = sgp_step,
    .drain = sgp_drain,
    .finalize = sgp_finalize,
    .weight = sgp_weight,
    .state_bytes = sgp_state_bytes,
    .state_save = sgp_state_save,
    .state_load = sgp_state_load,
    .crash = sgp_crash,
    .check = sgp_check,
    .summary = osgp_summary,
    .diverged_hint = sgp_diverged_hint,
    .msg_header = sizeof(hs_ps_hdr_v1_t), /* its wire header (--sim-payload) */
};
