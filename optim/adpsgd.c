/*
 * optim/adpsgd.c — AD-PSGD, asynchronous decentralized parallel SGD (Lian, Zhang, Zhang, Liu,
 * ICML 2018): pairwise averaging with a random neighbour, atomic per pair, no barrier.
 *
 * The paper's update (its Algorithm 1), for the worker i whose gradient g(x^_i) is ready (x^_i
 * a possibly stale read of x_i taken when the gradient computation started, j a random
 * neighbour):
 *     x_i, x_j <- (x_i + x_j) / 2          atomically for the pair
 *     x_i      <- x_i - lr u(g(x^_i))      then the local optimizer's step (momentum local)
 * The paper avoids deadlock with a bipartite split, and so does the SGP reference code that
 * ships an AD-PSGD (facebookresearch/stochastic_gradient_push: even ranks passive, odd ranks
 * active, a blocking send then receive on the active side, a pending receive on the passive
 * side). Here: the graph (--graph, undirected; default `bipartite`, the reference's) must be
 * bipartite, its 2-colouring (breadth-first from rank 0 = passive) splits the ranks; every edge
 * joins an active and a passive rank.
 *   - An active rank i, in round t (its gradient was taken at the x_i it left in the
 *     parameters at the end of round t-1): draws a neighbour j of iteration t uniformly among
 *     those not known dead (seeded by --seed, the rank and t), sends x_i to j and waits for j's
 *     reply x_j, sets x_i <- (x_i + x_j) / 2, then takes its local step on x_i, where the next
 *     gradient is taken. It is the only writer of x_i, so nothing changes x_i between its send
 *     and the reply.
 *   - A passive rank j keeps a service (hearsay/exec.h) that answers every request at once, its
 *     own computation notwithstanding: under the service lock it copies x_j into the reply and
 *     sets x_j <- (x_i + x_j) / 2, then sends the reply. Its main thread takes its local steps
 *     on x_j under the same lock and copies x_j into the parameters (the point of its next
 *     gradient, the paper's stale x^), so averages that land while it computes are kept and
 *     its (stale) gradient is applied to the averaged model, as in the paper.
 * Both sides compute 0.5 x_i + 0.5 x_j in the same float operations, so the pair holds the same
 * bits afterwards. Two actives never pick each other (no edge joins them), and a passive serves
 * one request at a time, so a third rank picking either side of a pair only queues.
 *
 * Pairings are recorded: every exchange is a line of the active's DIR/rank-R-adpsgd.csv
 * (iteration, active, passive, passive_steps = local steps the passive had taken into x_j,
 * passive_seq = the exchange's number at the passive), enough to replay the run (the
 * reference test does).
 *
 * Failures: a neighbour known dead is not drawn; one that dies while an active waits for its
 * reply (liveness probe every 0.5 s, or a failed send or receive) is reported and the round
 * goes on without an average (the pair's average is then applied on the passive's side only,
 * if it got that far). At the end of the run every active sends FIN to its passive
 * neighbours, and a passive keeps serving until every live active neighbour has finished.
 */
#include "hearsay/algo.h"
#include "hearsay/common.h"
#include "hearsay/rng.h"
#include "optim/neighbor_xchg.h"
#include "optim/ps_wire.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RX_SLOTS   2           /* receives kept posted per active neighbour (request, FIN) */
#define PROBE_S    0.5         /* liveness probe of a silent partner */
#define STREAM     0xAD5617EDu /* partner draws: hs_rng_seed(seed ^ STREAM, rank, t) */
#define STALE_KEEP 64          /* staleness values kept between two steps (the rest: the last) */

/* Message tags (offsets in the algorithm's range, hs_dist_tag). */
enum {
    ADPSGD_TAG_REQ = 0, /* active -> passive: x_i (or the end of its run) */
    ADPSGD_TAG_REP = 1, /* passive -> active: x_j before the average */
};

struct hs_algo {
    hs_dist_t *d;
    size_t n, msg_bytes;
    int passive;           /* this rank's side */
    int maxdeg;            /* largest degree over the period */
    int *peers;            /* (maxdeg) neighbours of an iteration */
    unsigned char *nbr;    /* (size) 1: a neighbour in some iteration */
    float *x;              /* (n, host) the model x_i (the service's, under its lock) */
    hs_stage_t xs;         /* x on the device for the local step; x is its image */
    unsigned char *sbuf;   /* header + x_i: active request (or FIN) */
    unsigned char *rbuf;   /* header + x_j: active's reply buffer */
    unsigned char **reply; /* (size) passive: header + x_j per active (service) */
    hs_treq_t **reply_req; /* (size) passive: the reply in flight to each active */
    hs_service_t *svc;
    /* passive: the receives of an active neighbour's replacement (the service's own for the
     * crashed process failed and are not posted again): one small service each, same handler
     * and lock (NULL: none) */
    hs_service_t **rsvc; /* (size) */
    /* under the service lock */
    long steps;             /* local steps taken into x */
    long served;            /* exchanges served (passive) */
    long refused;           /* requests of fenced ranks refused (passive) */
    long msgs, bytes_in;    /* not yet counted in d->st */
    long stale[STALE_KEEP]; /* their staleness (the passive's steps - the active's round) */
    uint64_t bytes_out;
    unsigned char *fin; /* (size) FIN received from an active */
    long *last;         /* (size) iterations a partner had done when last heard from */
    long exchanges;     /* active: averages done (checkpoint state) */
};

static void lock(hs_algo_t *a)
{
    hs_svc_lock(a->d->x, a->svc);
}

static void unlock(hs_algo_t *a)
{
    hs_svc_unlock(a->d->x, a->svc);
}

/* x <- 0.5 x + 0.5 y (both sides of a pair run this very expression: the same bits). */
static void half(float *x, const float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = 0.5f * x[i] + 0.5f * y[i];
}

/* d->params <- x (call with the lock held on a passive). */
static int publish(hs_algo_t *a)
{
    hs_dist_t *d = a->d;
    return d->k->ops->to_device(d->k, d->params, a->x, a->n * sizeof(float));
}

/* The local optimizer's step with this round's gradient, on x. */
static int local_step(hs_algo_t *a)
{
    hs_dist_t *d = a->d;
    HS_TRY(hs_stage_push(&a->xs));
    HS_TRY(hs_dist_apply_to(d, hs_stage_dev(&a->xs)));
    return hs_stage_pull(&a->xs);
}

/* --- the passive side: a service answering requests -------------------------------------- */

static int pas_msg(void *ctx, int slot, const void *buf, const hs_tstatus_t *st)
{
    hs_algo_t *a = ctx;
    hs_dist_t *d = a->d;
    (void)slot;
    const hs_ps_hdr_v1_t *h = buf;
    int src = st->source;
    if (st->len >= sizeof *h && h->magic == HS_PS_MAGIC && h->kind == HS_PS_PAIR_FIN) {
        HS_TRY(hs_ps_hdr_check(h, st->len, HS_PS_PAIR_FIN, src, 0));
        lock(a);
        a->fin[src] = 1;
        unlock(a);
        return 0;
    }
    HS_TRY(hs_ps_hdr_check(h, st->len, HS_PS_PAIR_REQ, src, a->n));
    if (src < 0 || src >= d->size || !a->nbr[src])
        return HS_ERR(-EPROTO, "AD-PSGD: a request from rank %d, not a neighbour", src);
    if (hs_dist_peer_hb(d, src) == 2) { /* fenced: out of the job, its model is not mixed in */
        lock(a);
        a->refused++;
        unlock(a);
        return 0;
    }
    if (a->reply_req[src]) { /* the previous reply to src: it was received, so this is quick */
        int rc =
            hs_exec_wait1(d->x, &a->reply_req[src], d->o->comm_timeout_s, HS_WAIT_NO_IDLE, NULL);
        if (a->reply_req[src]) hs_transport_req_free(d->t, &a->reply_req[src]);
        /* its reader is gone: it will not wait for this one either (unless this request is
         * its replacement's, which runs: runtime/rejoin.h) */
        if (rc < 0 && !hs_exec_alive(d->x, src, 0)) return 0;
    }
    hs_ps_hdr_v1_t *r = (hs_ps_hdr_v1_t *)a->reply[src];
    float *xr = (float *)(r + 1);
    const float *xi = (const float *)(h + 1);
    lock(a);
    a->last[src] = h->iteration + 1;
    a->stale[a->msgs < STALE_KEEP ? a->msgs : STALE_KEEP - 1] = a->steps - h->iteration;
    hs_ps_hdr_init(r, HS_PS_PAIR_REP, d->rank, a->steps, 1.0, a->n);
    r->aux[0] = (double)a->served++;
    memcpy(xr, a->x, a->n * sizeof(float));
    half(a->x, xi, a->n);
    a->msgs++;
    a->bytes_in += (long)st->len;
    a->bytes_out += a->msg_bytes;
    unlock(a);
    int rc = hs_transport_isend(d->t, src, hs_dist_tag(d, ADPSGD_TAG_REP), r, a->msg_bytes,
                                &a->reply_req[src]);
    if (rc < 0) a->reply_req[src] = NULL; /* the active is gone; it averages nothing */
    return 0;
}

/* --- the active side --------------------------------------------------------------------- */

/* Wait for the reply of `p` to round t's request (and the request's completion). 1: the reply
 * is in rbuf; 0: p failed (reported). */
static int await_reply(hs_algo_t *a, int p, long t, hs_treq_t **reqs)
{
    hs_dist_t *d = a->d;
    double t0 = hs_exec_now(d->x);
    int got = 0;
    while (reqs[0] || reqs[1]) {
        int idx = -1;
        hs_tstatus_t st;
        int rc = hs_exec_wait(d->x, reqs, 2, PROBE_S, 0, &idx, &st);
        char why[160];
        if (rc == -ETIMEDOUT) {
            /* a partner that heartbeats (or is only suspected) is waited for past the comm
             * timeout (bounded: hs_dist_keep_waiting); a fenced one is given up at once */
            double q = hs_exec_now(d->x) - t0, lim = d->o->comm_timeout_s;
            int fenced = hs_dist_peer_hb(d, p) == 2;
            if (hs_exec_alive(d->x, p, 0) && !fenced &&
                (q < lim || hs_dist_keep_waiting(d, p, q, lim)))
                continue;
            snprintf(why, sizeof why,
                     "%s while rank %d waited for its half of the average of "
                     "round %ld",
                     fenced ? "fenced (no heartbeat for more than --fail-timeout)"
                     : hs_exec_alive(d->x, p, 0) ? "no answer"
                                                 : "exited",
                     d->rank, t);
        } else if (rc < 0) {
            snprintf(why, sizeof why, "%s", hs_last_error());
        } else {
            if (idx == 1) {
                const hs_ps_hdr_v1_t *h = (const hs_ps_hdr_v1_t *)a->rbuf;
                int bad = hs_ps_hdr_check(h, st.len, HS_PS_PAIR_REP, p, a->n);
                if (bad < 0) {
                    if (reqs[0]) hs_transport_req_free(d->t, &reqs[0]);
                    return bad;
                }
                d->st.bytes_recv += st.len;
                got = 1;
            }
            continue;
        }
        hs_nx_free_reqs(d, reqs, 2);
        hs_dist_peer_failed(d, p, a->last[p], why);
        return 0;
    }
    return got;
}

/* One pairwise average of round t with a random live neighbour (before the local step). */
static int active_round(hs_algo_t *a, long t)
{
    hs_dist_t *d = a->d;
    int cnt = 0, live = 0;
    HS_TRY(hs_topo_out_peers(d->topo, t, d->rank, a->peers, NULL, a->maxdeg, &cnt, NULL));
    for (int i = 0; i < cnt; i++)
        if (!hs_dist_peer_dead(d, a->peers[i])) a->peers[live++] = a->peers[i];
    if (!live) return 0;
    hs_rng_t rng;
    hs_rng_seed(&rng, d->o->seed ^ STREAM, ((uint64_t)(uint32_t)d->rank << 40) ^ (uint64_t)t);
    int p = a->peers[hs_rng_below(&rng, (uint64_t)live)];
    if (!hs_exec_alive(d->x, p, 0)) {
        char why[96];
        snprintf(why, sizeof why, "exited (seen before round %ld's average)", t);
        hs_dist_peer_failed(d, p, a->last[p], why);
        return 0;
    }
    double t0 = hs_exec_now(d->x);
    hs_treq_t *reqs[2] = {NULL, NULL}; /* the request, the reply */
    hs_ps_hdr_v1_t *h = (hs_ps_hdr_v1_t *)a->sbuf;
    hs_ps_hdr_init(h, HS_PS_PAIR_REQ, d->rank, t, 1.0, a->n);
    memcpy(h + 1, a->x, a->n * sizeof(float));
    int rc = hs_transport_irecv(d->t, p, hs_dist_tag(d, ADPSGD_TAG_REP), a->rbuf, a->msg_bytes,
                                &reqs[1]);
    if (rc == 0)
        rc = hs_transport_isend(d->t, p, hs_dist_tag(d, ADPSGD_TAG_REQ), a->sbuf, a->msg_bytes,
                                &reqs[0]);
    if (rc < 0) {
        hs_nx_free_reqs(d, reqs, 2);
        hs_dist_peer_failed(d, p, a->last[p], hs_last_error());
        return 0;
    }
    d->st.bytes_sent += a->msg_bytes;
    d->st.comm_s += hs_exec_now(d->x) - t0;
    t0 = hs_exec_now(d->x);
    int got = await_reply(a, p, t, reqs);
    d->st.wait_s += hs_exec_now(d->x) - t0;
    if (got < 0) return got;
    if (!got) return 0;
    const hs_ps_hdr_v1_t *r = (const hs_ps_hdr_v1_t *)a->rbuf;
    half(a->x, (const float *)(r + 1), a->n);
    a->last[p] = r->iteration;
    a->exchanges++;
    /* staleness: the partner's local steps behind this rank's (t done before this round) */
    hs_dist_staleness(d, t - r->iteration);
    char line[160];
    snprintf(line, sizeof line, "%ld,%d,%d,%lld,%.0f", t, d->rank, p, (long long)r->iteration,
             r->aux[0]);
    return hs_dist_record(d, "adpsgd.csv", "iteration,active,passive,passive_steps,passive_seq",
                          line);
}

/* The service's averages since the last call, into this iteration's counters (lock held). */
static void take_counts(hs_algo_t *a)
{
    hs_dist_t *d = a->d;
    for (long i = 0; i < a->msgs; i++)
        hs_dist_staleness(d, a->stale[i < STALE_KEEP ? i : STALE_KEEP - 1]);
    d->st.bytes_recv += (uint64_t)a->bytes_in;
    d->st.bytes_sent += a->bytes_out;
    a->msgs = a->bytes_in = 0;
    a->bytes_out = 0;
}

static int adpsgd_step(hs_algo_t *a, long t)
{
    hs_dist_t *d = a->d;
    /* an active averages first, then applies its gradient to the average (the paper's
     * Algorithm 1: steps 3 and 4); it is the only writer of its x */
    if (!a->passive) HS_TRY(active_round(a, t));
    /* a passive's step and the copy of x into the parameters are one critical section: the
     * next gradient is taken at x right after this step, whatever is averaged in later */
    lock(a);
    int rc = local_step(a);
    if (rc == 0) a->steps++;
    if (rc == 0) rc = publish(a);
    take_counts(a);
    unlock(a);
    HS_TRY(rc);
    for (int j = 0; a->rsvc && j < d->size; j++) HS_TRY(hs_svc_error(d->x, a->rsvc[j]));
    return hs_svc_error(d->x, a->svc);
}

/* The end of an active's run: FIN to every passive neighbour still alive. */
static int send_fins(hs_algo_t *a)
{
    hs_dist_t *d = a->d;
    hs_ps_hdr_v1_t *h = (hs_ps_hdr_v1_t *)a->sbuf;
    hs_ps_hdr_init(h, HS_PS_PAIR_FIN, d->rank, d->iter, 1.0, 0);
    int nreq = 0;
    hs_treq_t *reqs[64] = {NULL};
    for (int j = 0; j < d->size; j++) {
        if (!a->nbr[j] || hs_dist_peer_dead(d, j)) continue;
        if (nreq == 64) { /* wait for this batch before the next */
            hs_nx_wait_free(d, reqs, nreq);
            nreq = 0;
        }
        if (hs_transport_isend(d->t, j, hs_dist_tag(d, ADPSGD_TAG_REQ), h, sizeof *h, &reqs[nreq]) <
            0)
            reqs[nreq] = NULL; /* it is gone: nobody waits for this FIN */
        else
            nreq++;
    }
    hs_nx_wait_free(d, reqs, nreq);
    return 0;
}

/* The end of a passive's run: serve until every live active neighbour has finished. */
static int await_fins(hs_algo_t *a)
{
    hs_dist_t *d = a->d;
    double last_progress = hs_exec_now(d->x), next_probe = last_progress + PROBE_S;
    long served_prev = -1;
    for (;;) {
        int missing = 0;
        lock(a);
        for (int j = 0; j < d->size; j++)
            if (a->nbr[j] && !a->fin[j] && !hs_dist_peer_dead(d, j)) missing++;
        if (missing) hs_svc_wait(d->x, a->svc, 0.1);
        long served = a->served;
        unlock(a);
        if (!missing) return 0;
        HS_TRY(hs_svc_error(d->x, a->svc));
        HS_TRY(hs_dist_idle(d));
        double now = hs_exec_now(d->x);
        if (served != served_prev) last_progress = now, served_prev = served;
        int silent = now - last_progress >= d->o->drain_timeout_s;
        if (!silent && now < next_probe) continue;
        next_probe = now + PROBE_S;
        for (int j = 0; j < d->size; j++) {
            lock(a);
            int waiting = a->nbr[j] && !a->fin[j];
            long last = a->last[j];
            unlock(a);
            if (!waiting || hs_dist_peer_dead(d, j)) continue;
            /* a neighbour that heartbeats is a straggler, waited for (bounded); a frozen one
             * is waited for until it is fenced (then hs_dist_peer_dead) */
            hs_dist_late_t l = {.quiet = now - last_progress,
                                .limit = d->o->drain_timeout_s,
                                .silent = silent,
                                .heartbeats = 1,
                                .probe = 1,
                                .probe_s = 0.3};
            int v = hs_dist_late_peer(d, j, &l);
            if (v == HS_LATE_SILENT)
                hs_dist_peer_failed(d, j, last, "silent at the end of the run (AD-PSGD)");
            else if (v == HS_LATE_EXITED)
                hs_dist_peer_failed(d, j, last, "exited before the end of its run (AD-PSGD)");
        }
    }
}

static int adpsgd_drain(hs_algo_t *a, int final)
{
    hs_dist_t *d = a->d;
    double t0 = hs_exec_now(d->x);
    if (final) HS_TRY(a->passive ? await_fins(a) : send_fins(a));
    d->st.wait_s += hs_exec_now(d->x) - t0;
    lock(a);
    long refused = a->refused;
    unlock(a);
    if (final && refused)
        HS_WARN("rank %d: AD-PSGD refused %ld request(s) of fenced ranks (never averaged in)",
                d->rank, refused);
    HS_TRY(hs_svc_error(d->x, a->svc));
    lock(a);
    int rc = publish(a);
    take_counts(a);
    unlock(a);
    return rc;
}

/* The passive side's service: RX_SLOTS receives per active neighbour (started again when an
 * active neighbour's replacement joins: the receives of the rank that crashed are gone). */
static int pas_start(hs_algo_t *a)
{
    hs_dist_t *d = a->d;
    int nsrc = 0;
    for (int j = 0; j < d->size; j++) nsrc += a->nbr[j];
    if (!nsrc) return 0;
    int *src = hs_malloc((size_t)nsrc * RX_SLOTS * sizeof *src, "receive sources");
    uint32_t *tag = hs_malloc((size_t)nsrc * RX_SLOTS * sizeof *tag, "receive tags");
    int rc = -ENOMEM;
    if (src && tag) {
        for (int j = 0, i = 0; j < d->size; j++)
            for (int k = 0; a->nbr[j] && k < RX_SLOTS; k++, i++)
                src[i] = j, tag[i] = hs_dist_tag(d, ADPSGD_TAG_REQ);
        hs_service_desc_t sd = {.name = "AD-PSGD passive service",
                                .n_slots = nsrc * RX_SLOTS,
                                .slot_bytes = a->msg_bytes,
                                .src = src,
                                .tag = tag,
                                .on_msg = pas_msg,
                                .ctx = a};
        rc = hs_svc_start(d->x, &sd, &a->svc);
    }
    free(src);
    free(tag);
    return rc;
}

/* An active neighbour's replacement: RX_SLOTS receives of its requests, in a service of their
 * own (stopping and starting the main one would drop a request it has received and not yet
 * answered, and its active would wait for the reply in vain). */
static int pas_start_for(hs_algo_t *a, int peer)
{
    hs_dist_t *d = a->d;
    int src[RX_SLOTS];
    uint32_t tag[RX_SLOTS];
    for (int k = 0; k < RX_SLOTS; k++) src[k] = peer, tag[k] = hs_dist_tag(d, ADPSGD_TAG_REQ);
    hs_service_desc_t sd = {.name = "AD-PSGD passive service (a replacement's requests)",
                            .n_slots = RX_SLOTS,
                            .slot_bytes = a->msg_bytes,
                            .src = src,
                            .tag = tag,
                            .on_msg = pas_msg,
                            .ctx = a};
    if (!a->rsvc && !(a->rsvc = hs_calloc((size_t)d->size, sizeof *a->rsvc, "services")))
        return -ENOMEM;
    hs_svc_stop(d->x, &a->rsvc[peer]); /* (a second replacement: the first one's) */
    return hs_svc_start(d->x, &sd, &a->rsvc[peer]);
}

/* A replacement joins (hs_algo_ops_t.rejoin). The donor hands its model over as it is (AD-PSGD
 * keeps no weight: every pair holds equal models after an average); the replacement starts
 * its own counters; a passive neighbour serves the new process from now on. */
static int adpsgd_rejoin(hs_algo_t *a, int peer, long iter, int role)
{
    hs_dist_t *d = a->d;
    if (role == HS_REJOIN_ADOPT) {
        lock(a);
        a->steps = iter;
        a->served = a->exchanges = 0;
        unlock(a);
        return 0;
    }
    if (role != HS_REJOIN_PEER || peer < 0 || peer >= d->size || !a->nbr[peer]) return 0;
    a->last[peer] = iter;
    if (!a->passive) return 0;
    lock(a);
    a->fin[peer] = 0;
    unlock(a);
    return pas_start_for(a, peer); /* (a reply still meant for the crashed one: pas_msg settles
                                    * it, bounded, before the next reply to this rank) */
}

static void adpsgd_finalize(hs_algo_t **ap)
{
    hs_algo_t *a = ap ? *ap : NULL;
    if (!a) return;
    hs_dist_t *d = a->d;
    hs_svc_stop(d->x, &a->svc);
    for (int j = 0; a->rsvc && j < d->size; j++) hs_svc_stop(d->x, &a->rsvc[j]);
    free(a->rsvc);
    for (int j = 0; j < d->size; j++) {
        if (a->reply_req && a->reply_req[j]) hs_transport_req_free(d->t, &a->reply_req[j]);
        if (a->reply) free(a->reply[j]);
    }
    free(a->reply_req);
    free(a->reply);
    free(a->fin);
    free(a->last);
    free(a->nbr);
    free(a->peers);
    free(a->sbuf);
    free(a->rbuf);
    hs_stage_close(&a->xs);
    free(a);
    *ap = NULL;
}

static int adpsgd_init(hs_algo_t **out, hs_dist_t *d)
{
    *out = NULL;
    if (!d->topo) return HS_ERR(-EINVAL, "AD-PSGD needs a graph (--graph)");
    if (!hs_topo_undirected(d->topo))
        return HS_ERR(-EINVAL,
                      "--algo adpsgd needs an undirected graph, and --graph %s is directed",
                      hs_topo_spec(d->topo));
    hs_algo_t *a = hs_calloc(1, sizeof *a, "AD-PSGD state");
    if (!a) return -ENOMEM;
    a->d = d;
    a->n = d->n;
    a->msg_bytes = sizeof(hs_ps_hdr_v1_t) + a->n * sizeof(float);
    a->maxdeg = HS_MAX(1, hs_topo_max_out_degree(d->topo));
    int rc = -ENOMEM, *colour = NULL;
    size_t ns = (size_t)d->size;
    a->peers = hs_calloc((size_t)a->maxdeg, sizeof *a->peers, "neighbours");
    a->nbr = hs_calloc(ns, 1, "neighbour set");
    a->fin = hs_calloc(ns, 1, "finished actives");
    a->last = hs_calloc(ns, sizeof *a->last, "last heard");
    a->reply = hs_calloc(ns, sizeof *a->reply, "reply buffers");
    a->reply_req = hs_calloc(ns, sizeof *a->reply_req, "reply requests");
    a->sbuf = hs_malloc(a->msg_bytes, "request buffer");
    a->rbuf = hs_malloc(a->msg_bytes, "reply buffer");
    colour = hs_malloc(ns * sizeof *colour, "sides");
    if (!a->peers || !a->nbr || !a->fin || !a->last || !a->reply || !a->reply_req || !a->sbuf ||
        !a->rbuf || !colour)
        goto fail;
    if ((rc = hs_stage_buffer(&a->xs, d->k, a->n, "model")) < 0) goto fail;
    a->x = hs_stage_host(&a->xs);
    if ((rc = hs_topo_sides(d->topo, colour)) < 0) {
        hs_error_prefix("--algo adpsgd pairs an active with a passive rank (Lian et al. 2018): "
                        "its --graph must be bipartite");
        goto fail;
    }
    a->passive = colour[d->rank] == 0;
    for (long t = 0; t < hs_topo_period(d->topo) && rc == 0; t++) {
        int c = 0;
        rc = hs_topo_out_peers(d->topo, t, d->rank, a->peers, NULL, a->maxdeg, &c, NULL);
        for (int i = 0; i < c; i++) a->nbr[a->peers[i]] = 1;
    }
    if (rc < 0) goto fail;
    if ((rc = d->k->ops->to_host(d->k, a->x, d->params, a->n * sizeof(float))) < 0) goto fail;
    if (a->passive) { /* the service: RX_SLOTS receives per active neighbour */
        rc = -ENOMEM;
        for (int j = 0; j < d->size; j++)
            if (a->nbr[j] && !(a->reply[j] = hs_malloc(a->msg_bytes, "reply"))) goto fail;
        if ((rc = pas_start(a)) < 0) goto fail;
    }
    free(colour);
    *out = a;
    return 0;
fail:
    free(colour);
    adpsgd_finalize(&a);
    return rc;
}

/* Checkpoint state: the exchange counters; loading it also takes the restored parameters as
 * the model x (the worker restores them before). */
static size_t adpsgd_state_bytes(const hs_algo_t *a)
{
    (void)a;
    return 3 * sizeof(int64_t);
}

static int adpsgd_state_save(hs_algo_t *a, void *buf)
{
    lock(a);
    int64_t v[3] = {a->steps, a->served, a->exchanges};
    unlock(a);
    memcpy(buf, v, sizeof v);
    return 0;
}

static int adpsgd_state_load(hs_algo_t *a, const void *buf)
{
    hs_dist_t *d = a->d;
    int64_t v[3];
    memcpy(v, buf, sizeof v);
    if (v[0] < 0 || v[1] < 0 || v[2] < 0)
        return HS_ERR(-EINVAL, "checkpoint: negative AD-PSGD counters");
    lock(a);
    a->steps = v[0];
    a->served = v[1];
    a->exchanges = v[2];
    int rc = d->k->ops->to_host(d->k, a->x, d->params, a->n * sizeof(float));
    unlock(a);
    return rc;
}

const hs_algo_ops_t hs_algo_adpsgd_ops = {
    .size = sizeof(hs_algo_ops_t),
    .name = "adpsgd",
    .help = "AD-PSGD: asynchronous pairwise averaging with a random neighbour (bipartite graph)",
    .flags = HS_ALGO_GRAPH | HS_ALGO_UNDIRECTED | HS_ALGO_BIPARTITE | HS_ALGO_COMM |
             HS_ALGO_TOLERANT | HS_ALGO_BUDGET,
    .default_graph = "bipartite",
    .init = adpsgd_init,
    .step = adpsgd_step,
    .drain = adpsgd_drain,
    .finalize = adpsgd_finalize,
    .state_bytes = adpsgd_state_bytes,
    .state_save = adpsgd_state_save,
    .state_load = adpsgd_state_load,
    .msg_header = sizeof(hs_ps_hdr_v1_t), /* its wire header (--sim-payload) */
    .rejoin = adpsgd_rejoin,
};
