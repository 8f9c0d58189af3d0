/*
 * optim/lsgd.c — leader-SGD (Teng et al., NeurIPS 2019), with local (group) and global
 * leaders, without a barrier.
 *
 * Each worker keeps the mean of its last k batch losses (--leader-window). Every tau steps
 * (--tau, default 1) it
 *   1. publishes a snapshot of its parameters (triple-buffered: hs_snapshot_t) that its
 *      service (hearsay/exec.h) serves to whoever asks;
 *   2. sends (recent loss, rank, version = iteration) to every other live rank (fire and
 *      forget; a send still in flight from the previous round is skipped, never waited for);
 *   3. elects, from what it has heard (hs_lsgd_elect: lowest loss, stale entries aged out),
 *      the global leader and the leader of its group (--groups G: contiguous groups);
 *   4. fetches each leader's snapshot (a request answered by the leader's service,
 *      even while the leader computes or sleeps; the service copies a buffer the publisher
 *      does not touch while it is read) and checks it: an even version, and the checksum in
 *      the message;
 *   5. adds the pulls to its gradient before the local step:
 *          x <- x - lr (g + lambda_g (x - x_global) + lambda_l (x - x_local)),
 *      lambda_l = --pull-local (only with more than one group), lambda_g = --pull-global.
 *      A worker that is its own leader pulls nothing toward itself.
 * A leader whose fetch fails (it exited) is reported failed and the next best is elected; a
 * silent one ages out of the table. At the end every worker announces that it is done and
 * keeps serving its snapshot until every live rank is done, so no fetch finds it gone.
 * Each communication round is recorded (hs_dist_record): with --out DIR the reporting code
 * writes DIR/rank-R-leader.csv, one row per round. Bytes: loss messages and snapshot requests
 * as sent, fetched snapshots as received, and what the service sends (snapshot replies) and
 * receives (loss messages, requests), moved from its atomic counters into the iteration's.
 */
#include "optim/lsgd.h"

#include "hearsay/algo.h"
#include "hearsay/common.h"
#include "hearsay/compress.h"
#include "optim/elastic_wire.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HDR       sizeof(hs_el_hdr_v1_t)
#define AGE_S     1.0 /* an entry not refreshed for this long (and 10 tau iterations) is stale */
#define LOSS_RING 4   /* loss messages in flight per peer */
#define STUCK_S   0.5 /* a loss send in flight this long gets a liveness check of its peer */

/* Message tags (offsets in the algorithm's range, hs_dist_tag). */
enum {
    LSGD_TAG_LOSS = 0, /* (recent loss, rank, version) gossip */
    LSGD_TAG_REQ = 1,  /* request of a leader's published snapshot */
    LSGD_TAG_SNAP = 2, /* a versioned, checksummed snapshot */
};

/* --- the transport-free pieces (optim/lsgd.h) ------------------------------------------ */

void hs_lsgd_note(hs_lsgd_entry_t *tab, int r, double loss, long version, double now, long my_iter)
{
    hs_lsgd_entry_t *e = &tab[r];
    if (e->valid && version < e->version) return;
    e->loss = loss;
    e->version = version;
    e->seen_s = now;
    e->seen_iter = my_iter;
    e->valid = 1;
}

int hs_lsgd_elect(const hs_lsgd_entry_t *tab, const char *dead, int lo, int hi, int self,
                  double now, double age_s, long my_iter, long age_iters)
{
    int best = -1;
    for (int r = lo; r < hi; r++) {
        const hs_lsgd_entry_t *e = &tab[r];
        if (!e->valid || !isfinite(e->loss)) continue;
        if (r != self && dead && dead[r]) continue;
        if (r != self && now - e->seen_s > age_s && my_iter - e->seen_iter > age_iters) continue;
        if (best < 0 || e->loss < tab[best].loss) best = r;
    }
    return best;
}

void hs_lsgd_group(int rank, int size, int groups, int *lo, int *hi)
{
    if (groups < 1) groups = 1;
    if (groups > size) groups = size;
    long g = (long)rank * groups / size;
    int a = 0;
    while ((long)a * groups / size < g) a++;
    int b = a;
    while (b < size && (long)b * groups / size == g) b++;
    *lo = a;
    *hi = b;
}

int hs_snapshot_init(hs_snapshot_t *s, size_t n)
{
    memset(s, 0, sizeof *s);
    s->n = n;
    s->cur = -1;
    for (int b = 0; b < HS_SNAPSHOT_BUFS; b++)
        if (!(s->buf[b].data = hs_calloc(n ? n : 1, sizeof(float), "snapshot"))) {
            for (int j = 0; j < b; j++) HS_FREE(s->buf[j].data);
            return -ENOMEM;
        }
    return 0;
}

void hs_snapshot_free(hs_snapshot_t *s)
{
    if (!s->buf[0].data) return;
    for (int b = 0; b < HS_SNAPSHOT_BUFS; b++) HS_FREE(s->buf[b].data);
}

int hs_snapshot_publish(hs_snapshot_t *s, const float *src, long iter, double loss)
{
    /* a buffer no reader holds and that is not current (the one after the current first) */
    hs_spin_lock(&s->mu);
    int w = -1;
    for (int j = 1; j <= HS_SNAPSHOT_BUFS && w < 0; j++) {
        int b = (s->cur + j + HS_SNAPSHOT_BUFS) % HS_SNAPSHOT_BUFS;
        if (b != s->cur && s->buf[b].readers == 0) w = b;
    }
    if (w < 0) s->skipped++;
    hs_spin_unlock(&s->mu);
    if (w < 0) return -EBUSY;
    /* readers only take the current buffer, so nobody reads w while it is written */
    hs_snapshot_buf_t *b = &s->buf[w];
    memcpy(b->data, src, s->n * sizeof(float));
    b->iter = iter;
    b->loss = loss;
    b->check = hs_el_checksum(src, s->n);
    hs_spin_lock(&s->mu);
    s->version += 2;
    b->version = s->version;
    s->cur = w;
    hs_spin_unlock(&s->mu);
    return 0;
}

int hs_snapshot_read(hs_snapshot_t *s, float *dst, uint64_t *version, long *iter, double *loss,
                     uint64_t *check)
{
    hs_spin_lock(&s->mu);
    int r = s->cur;
    if (r < 0) {
        hs_spin_unlock(&s->mu);
        return -EAGAIN;
    }
    hs_snapshot_buf_t *b = &s->buf[r];
    b->readers++; /* the publisher leaves this buffer alone until we let go of it */
    uint64_t v = b->version, c = b->check;
    long it = b->iter;
    double l = b->loss;
    hs_spin_unlock(&s->mu);
    if (s->test_during_read) s->test_during_read(s->test_ctx);
    memcpy(dst, b->data, s->n * sizeof(float));
    hs_spin_lock(&s->mu);
    b->readers--;
    hs_spin_unlock(&s->mu);
    if (hs_el_checksum(dst, s->n) != c)
        return HS_ERR(-EPROTO, "snapshot version %llu fails its checksum after the copy",
                      (unsigned long long)v);
    *version = v;
    *iter = it;
    *loss = l;
    *check = c;
    return 0;
}

/* --- the algorithm --------------------------------------------------------------------- */

struct hs_algo {
    hs_dist_t *d;
    int tau, k;
    double lam_local, lam_global;
    int groups, glo, ghi;
    double *win; /* (k) last batch losses */
    int win_n, win_pos;
    float *xh;     /* (n) host staging of x for publishing */
    hs_stage_t xl; /* a leader's snapshot where the kernels read it */
    hs_snapshot_t snap;
    long fetched;

    /* the service (loss messages, snapshot requests); its lock guards tab, dead, my_iter */
    hs_service_t *svc;
    hs_lsgd_entry_t *tab; /* (size) */
    char *dead;           /* (size) */
    long my_iter;
    int nl, nr;           /* loss slots, snapshot-request slots */
    unsigned char **obuf; /* (size) snapshot replies, allocated on first request */
    hs_treq_t **oreq;     /* (size) */
    unsigned char *lbuf;  /* (size * LOSS_RING) loss message headers */
    hs_treq_t **lreq;     /* (size * LOSS_RING) */
    double *lsent;        /* (size * LOSS_RING) when each was posted */
    unsigned char *fbuf;  /* header + n floats: a fetched snapshot */
    /* --compress fp16|bf16: snapshots travel in half precision */
    unsigned half;       /* 0, HS_EL_FP16 or HS_EL_BF16 */
    float *sscratch;     /* (n) the service's float copy of the snapshot (half only) */
    float *fl;           /* (n) a fetched half snapshot, decoded (half only) */
    const float *fsnap;  /* (n) the last fetched snapshot as floats (fbuf + HDR or fl) */
    unsigned char *qbuf; /* a snapshot request */
    hs_treq_t *freq, *qreq;
    /* bytes the service thread sent (snapshot replies) and received (loss messages, snapshot
     * requests) since the training thread last moved them into d->st (svc_account) */
    _Atomic uint64_t svc_sent, svc_recv;
    _Atomic long refused; /* loss messages of fenced ranks refused (never a leader) */
};

static void lock(hs_algo_t *a)
{
    hs_svc_lock(a->d->x, a->svc);
}

static void unlock(hs_algo_t *a)
{
    hs_svc_unlock(a->d->x, a->svc);
}

/* FNV-1a 64 over n 16-bit values: the checksum of a half-precision snapshot on the wire. */
static uint64_t half_checksum(const uint16_t *v, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= v[i];
        h *= 1099511628211ull;
    }
    return h;
}

static int serve_snapshot(hs_algo_t *a, int dst)
{
    hs_dist_t *d = a->d;
    size_t bytes = HDR + d->n * sizeof(float);
    if (a->oreq[dst]) {
        int rc = hs_exec_wait1(d->x, &a->oreq[dst], d->o->comm_timeout_s, HS_WAIT_NO_IDLE, NULL);
        if (a->oreq[dst]) hs_transport_req_free(d->t, &a->oreq[dst]);
        if (rc < 0) return 0; /* that reader is gone; not this service's failure */
    }
    if (!a->obuf[dst] && !(a->obuf[dst] = hs_malloc(bytes, "snapshot reply"))) return -ENOMEM;
    hs_el_hdr_v1_t *h = (hs_el_hdr_v1_t *)a->obuf[dst];
    uint64_t ver = 0, check = 0;
    long it = -1;
    double loss = NAN;
    float *sdst = a->half ? a->sscratch : (float *)(a->obuf[dst] + HDR);
    int rc = hs_snapshot_read(&a->snap, sdst, &ver, &it, &loss, &check);
    if (rc < 0 && rc != -EAGAIN) {
        hs_error_prefix("rank %d", d->rank);
        return rc;
    }
    size_t count = rc == 0 ? d->n : 0; /* -EAGAIN: nothing published yet */
    hs_el_hdr_init(h, HS_EL_SNAP, d->rank, 0, count, ver);
    h->iteration = it;
    h->value = loss;
    h->check = check;
    size_t width = sizeof(float);
    if (a->half && count) { /* the copy is whole (its float checksum held): encode, re-check */
        uint16_t *hv = (uint16_t *)(a->obuf[dst] + HDR);
        hs_half_encode(a->half == HS_EL_BF16, a->sscratch, hv, count);
        h->kind |= (uint16_t)a->half;
        h->check = half_checksum(hv, count);
        width = 2;
    }
    rc = hs_transport_isend(d->t, dst, hs_dist_tag(d, LSGD_TAG_SNAP), a->obuf[dst],
                            HDR + count * width, &a->oreq[dst]);
    if (rc < 0)
        a->oreq[dst] = NULL;
    else
        atomic_fetch_add_explicit(&a->svc_sent, HDR + count * width, memory_order_relaxed);
    return 0;
}

static int svc_handle(void *ctx, int idx, const void *buf, const hs_tstatus_t *st)
{
    hs_algo_t *a = ctx;
    const hs_el_hdr_v1_t *h = (const hs_el_hdr_v1_t *)buf;
    HS_TRY(hs_el_hdr_check(h, st->len, st->source));
    atomic_fetch_add_explicit(&a->svc_recv, st->len, memory_order_relaxed);
    if (idx < a->nl) {
        if (h->kind != HS_EL_LOSS)
            return HS_ERR(-EPROTO, "leader-SGD: kind %u on the loss tag from rank %d", h->kind,
                          st->source);
        if (hs_dist_peer_hb(a->d, st->source) == 2) { /* fenced: never a leader */
            atomic_fetch_add_explicit(&a->refused, 1, memory_order_relaxed);
            return 0;
        }
        lock(a);
        hs_lsgd_note(a->tab, st->source, h->value, (long)h->seq, hs_exec_now(a->d->x), a->my_iter);
        if (h->shard == 1) a->tab[st->source].done = 1;
        unlock(a);
        return 0;
    }
    if (h->kind != HS_EL_SNAPREQ)
        return HS_ERR(-EPROTO, "leader-SGD: kind %u on the request tag from rank %d", h->kind,
                      st->source);
    return serve_snapshot(a, st->source);
}

/* Move the service thread's byte counts into this iteration's (or drain's) stats. */
static void svc_account(hs_algo_t *a)
{
    a->d->st.bytes_sent += atomic_exchange_explicit(&a->svc_sent, 0, memory_order_relaxed);
    a->d->st.bytes_recv += atomic_exchange_explicit(&a->svc_recv, 0, memory_order_relaxed);
}

static int check_service(hs_algo_t *a)
{
    int rc = hs_svc_error(a->d->x, a->svc);
    if (rc < 0) hs_error_prefix("rank %d: leader-SGD", a->d->rank);
    return rc;
}

/* Mark rank r failed (seen by a send or fetch to it) and drop what is still queued for it, so
 * that the transport does not keep retrying a connection to a rank that has exited. */
static void peer_gone(hs_algo_t *a, int r, const char *why)
{
    hs_dist_t *d = a->d;
    lock(a);
    long last = a->tab[r].valid ? a->tab[r].version : -1;
    a->dead[r] = 1;
    unlock(a);
    for (int j = 0; j < LOSS_RING; j++) {
        hs_treq_t **q = &a->lreq[(size_t)r * LOSS_RING + (size_t)j];
        if (*q) hs_transport_req_free(d->t, q);
    }
    if (!hs_dist_peer_dead(d, r)) hs_dist_peer_failed(d, r, last + 1, why);
}

/* Reap the completed loss sends to r; returns a free slot, -1 when all LOSS_RING are in
 * flight, -2 when r turned out to be dead (reported, its sends dropped). A send in flight for
 * longer than STUCK_S is waited on briefly, which runs the transport's liveness check of r. */
static int loss_slot(hs_algo_t *a, int r, int must)
{
    hs_dist_t *d = a->d;
    int free_slot = -1, oldest = -1;
    double now = hs_exec_now(d->x);
    for (int j = 0; j < LOSS_RING; j++) {
        size_t i = (size_t)r * LOSS_RING + (size_t)j;
        if (a->lreq[i]) {
            int fin = 0;
            int rc = hs_transport_test(d->t, &a->lreq[i], &fin, NULL);
            if (rc == -ECONNRESET) {
                char why[HS_ERRMSG_MAX + 32];
                snprintf(why, sizeof why, "sending its loss: %s", hs_last_error());
                peer_gone(a, r, why);
                return -2;
            }
            if (rc < 0 && a->lreq[i]) hs_transport_req_free(d->t, &a->lreq[i]);
        }
        if (!a->lreq[i]) {
            if (free_slot < 0) free_slot = j;
        } else if (oldest < 0 || a->lsent[i] < a->lsent[(size_t)r * LOSS_RING + (size_t)oldest]) {
            oldest = j;
        }
    }
    if (oldest < 0 ||
        (free_slot >= 0 && now - a->lsent[(size_t)r * LOSS_RING + (size_t)oldest] < STUCK_S))
        return free_slot;
    /* the oldest send is slow (or the ring is full and this message must go): wait on it,
     * bounded, with the transport's liveness check of r */
    size_t i = (size_t)r * LOSS_RING + (size_t)oldest;
    double t0 = hs_exec_now(d->x);
    int rc = hs_exec_wait1(d->x, &a->lreq[i], must ? d->o->comm_timeout_s : 0.01, 0, NULL);
    d->st.wait_s += hs_exec_now(d->x) - t0;
    if (rc == -ECONNRESET) {
        char why[HS_ERRMSG_MAX + 32];
        snprintf(why, sizeof why, "sending its loss: %s", hs_last_error());
        peer_gone(a, r, why);
        return -2;
    }
    if (rc < 0 && rc != -ETIMEDOUT && a->lreq[i]) hs_transport_req_free(d->t, &a->lreq[i]);
    if (!a->lreq[i]) return oldest;
    return free_slot;
}

/* Send (loss, version, done) to every live rank, from a ring of LOSS_RING buffers per peer:
 * fire and forget, a message is skipped only when LOSS_RING earlier ones to that peer are
 * still in flight (never for done = 1, which waits, bounded, for a slot). */
static void send_loss(hs_algo_t *a, double loss, long version, int done)
{
    hs_dist_t *d = a->d;
    for (int r = 0; r < d->size; r++) {
        if (r == d->rank) continue;
        lock(a);
        int dead = a->dead[r];
        unlock(a);
        if (dead || hs_dist_peer_dead(d, r)) {
            for (int j = 0; j < LOSS_RING; j++) {
                hs_treq_t **q = &a->lreq[(size_t)r * LOSS_RING + (size_t)j];
                if (*q) hs_transport_req_free(d->t, q);
            }
            continue;
        }
        int j = loss_slot(a, r, done);
        if (j < 0) continue;
        size_t i = (size_t)r * LOSS_RING + (size_t)j;
        hs_el_hdr_v1_t *h = (hs_el_hdr_v1_t *)(a->lbuf + i * HDR);
        hs_el_hdr_init(h, HS_EL_LOSS, d->rank, done, 0, (uint64_t)(version < 0 ? 0 : version));
        h->value = loss;
        h->iteration = version;
        if (hs_transport_isend(d->t, r, hs_dist_tag(d, LSGD_TAG_LOSS), h, HDR, &a->lreq[i]) < 0) {
            a->lreq[i] = NULL;
            continue;
        }
        a->lsent[i] = hs_exec_now(d->x);
        d->st.bytes_sent += HDR;
    }
}

/* Fetch leader L's snapshot into a->fbuf: 1 fetched, 0 nothing published yet, -1 the leader
 * failed (reported), < -1 an error. */
static int fetch(hs_algo_t *a, int L, long t)
{
    hs_dist_t *d = a->d;
    size_t cap = HDR + d->n * sizeof(float);
    double t0 = hs_exec_now(d->x);
    if (a->qreq) { /* the previous request has been answered, so its send is done */
        hs_exec_wait1(d->x, &a->qreq, d->o->comm_timeout_s, 0, NULL);
        if (a->qreq) hs_transport_req_free(d->t, &a->qreq);
    }
    HS_TRY(hs_transport_irecv(d->t, L, hs_dist_tag(d, LSGD_TAG_SNAP), a->fbuf, cap, &a->freq));
    hs_el_hdr_init((hs_el_hdr_v1_t *)a->qbuf, HS_EL_SNAPREQ, d->rank, 0, 0, 0);
    int rc = hs_transport_isend(d->t, L, hs_dist_tag(d, LSGD_TAG_REQ), a->qbuf, HDR, &a->qreq);
    if (rc < 0)
        a->qreq = NULL;
    else
        d->st.bytes_sent += HDR;
    hs_tstatus_t st;
    /* a leader that heartbeats (or is only suspected) is waited for past the comm timeout,
     * bounded; a fenced one is given up at once (then elected no more) */
    if (rc == 0) rc = hs_dist_wait_one(d, &a->freq, L, d->o->comm_timeout_s, 0, &st);
    d->st.wait_s += hs_exec_now(d->x) - t0;
    if (rc < 0) {
        if (a->freq) hs_transport_req_free(d->t, &a->freq);
        if (a->qreq) hs_transport_req_free(d->t, &a->qreq);
        char why[HS_ERRMSG_MAX + 64];
        snprintf(why, sizeof why, "fetching its leader snapshot: %s", hs_last_error());
        peer_gone(a, L, why);
        return -1;
    }
    const hs_el_hdr_v1_t *h = (const hs_el_hdr_v1_t *)a->fbuf;
    HS_TRY(hs_el_hdr_check(h, st.len, L));
    const unsigned half = h->kind & HS_EL_HALF_MASK;
    if ((h->kind & ~HS_EL_HALF_MASK) != HS_EL_SNAP)
        return HS_ERR(-EPROTO, "leader-SGD: rank %d answered kind %u, not a snapshot", L, h->kind);
    d->st.bytes_recv += st.len;
    if (h->count == 0) return 0;
    if (h->count != d->n || (h->seq & 1) || h->seq == 0)
        return HS_ERR(-EPROTO, "leader-SGD: snapshot of rank %d: %llu floats, version %llu", L,
                      (unsigned long long)h->count, (unsigned long long)h->seq);
    if (half && !a->fl && !(a->fl = hs_malloc(d->n * sizeof(float), "decoded snapshot")))
        return -ENOMEM;
    if (half ? half_checksum((const uint16_t *)(a->fbuf + HDR), d->n) != h->check
             : hs_el_checksum((const float *)(a->fbuf + HDR), d->n) != h->check)
        return HS_ERR(-EPROTO,
                      "leader-SGD: snapshot of rank %d (version %llu) fails its "
                      "checksum: torn or corrupted",
                      L, (unsigned long long)h->seq);
    if (half)
        hs_half_decode(half == HS_EL_BF16, (const uint16_t *)(a->fbuf + HDR), a->fl, d->n, 1.0f, 0);
    a->fsnap = half ? a->fl : (const float *)(a->fbuf + HDR);
    d->st.msgs_applied++;
    d->st.staleness_sum += (double)(t - h->iteration);
    a->fetched++;
    return 1;
}

/* g += lam (x - x_L) with x_L the fetched snapshot. */
static int add_pull(hs_algo_t *a, double lam)
{
    hs_dist_t *d = a->d;
    hs_kernels_t *k = d->k;
    const float *xl = NULL;
    HS_TRY(hs_stage_view(&a->xl, a->fsnap, d->n, &xl));
    HS_TRY(k->ops->axpy(k, d->n, (float)lam, d->params, d->grads));
    return k->ops->axpy(k, d->n, (float)-lam, xl, d->grads);
}

static int elect(hs_algo_t *a, int lo, int hi, long t)
{
    lock(a);
    int L = hs_lsgd_elect(a->tab, a->dead, lo, hi, a->d->rank, hs_exec_now(a->d->x), AGE_S, t,
                          10L * a->tau);
    unlock(a);
    return L;
}

static int comm_round(hs_algo_t *a, long t, double recent)
{
    hs_dist_t *d = a->d;
    hs_kernels_t *k = d->k;
    double t0 = hs_exec_now(d->x), w0 = d->st.wait_s;
    HS_TRY(check_service(a));
    HS_TRY(k->ops->to_host(k, a->xh, d->params, d->n * sizeof(float)));
    (void)hs_snapshot_publish(&a->snap, a->xh, t, recent); /* one reader: never skipped */
    lock(a);
    a->my_iter = t;
    hs_lsgd_note(a->tab, d->rank, recent, t, hs_exec_now(d->x), t);
    for (int r = 0; r < d->size; r++) a->dead[r] |= hs_dist_peer_dead(d, r);
    unlock(a);
    send_loss(a, recent, t, 0);

    int lead[2] = {-1, -1};
    double lam[2] = {a->lam_global, a->groups > 1 ? a->lam_local : 0};
    int tries = 0, got0 = 0;
    for (int which = 0; which < 2; which++) {
        if (lam[which] <= 0) continue;
        int lo = which == 0 ? 0 : a->glo, hi = which == 0 ? d->size : a->ghi;
        for (;;) {
            int L = elect(a, lo, hi, t);
            lead[which] = L;
            if (L < 0 || L == d->rank) break;
            if (which == 1 && L == lead[0]) { /* same rank: one fetch, both pulls */
                if (got0 == 1) HS_TRY(add_pull(a, lam[1]));
                break;
            }
            int got = fetch(a, L, t);
            if (got < -1) return got;
            if (which == 0) got0 = got;
            if (got == 1) HS_TRY(add_pull(a, lam[which]));
            if (got >= 0 || ++tries > 3) break; /* -1: that leader failed, elect again */
        }
    }
    lock(a);
    double gl = lead[0] >= 0 ? a->tab[lead[0]].loss : NAN;
    double ll = lead[1] >= 0 ? a->tab[lead[1]].loss : NAN;
    unlock(a);
    char row[256];
    snprintf(row, sizeof row, "%ld,%.9g,%d,%.9g,%d,%.9g,%ld", t + 1, recent, lead[0], gl, lead[1],
             ll, a->fetched);
    HS_TRY(hs_dist_record(d, "leader.csv",
                          "iteration,recent_loss,global_leader,global_leader_loss,local_leader,"
                          "local_leader_loss,snapshots_fetched",
                          row));
    double comm = hs_exec_now(d->x) - t0 - (d->st.wait_s - w0);
    d->st.comm_s += comm > 0 ? comm : 0;
    return 0;
}

static int lsgd_step(hs_algo_t *a, long t)
{
    double l = a->d->loss;
    if (isfinite(l)) {
        a->win[a->win_pos] = l;
        a->win_pos = (a->win_pos + 1) % a->k;
        if (a->win_n < a->k) a->win_n++;
    }
    if ((t + 1) % a->tau == 0 && a->win_n > 0) {
        double s = 0;
        for (int i = 0; i < a->win_n; i++) s += a->win[i];
        HS_TRY(comm_round(a, t, s / a->win_n));
    }
    svc_account(a);
    return hs_dist_apply(a->d, 1.0);
}

/* End of the run: say "done" to every rank, then keep serving until every live rank is
 * done (bounded by --drain-timeout of silence; exited ranks are noticed by a probe). */
static int lsgd_drain(hs_algo_t *a, int final)
{
    svc_account(a);
    if (!final) return 0;
    hs_dist_t *d = a->d;
    long refused = atomic_load_explicit(&a->refused, memory_order_relaxed);
    if (refused)
        HS_WARN("rank %d: leader-SGD refused %ld loss message(s) of fenced ranks (never a leader)",
                d->rank, refused);
    double t0 = hs_exec_now(d->x);
    double s = 0;
    for (int i = 0; i < a->win_n; i++) s += a->win[i];
    send_loss(a, a->win_n ? s / a->win_n : NAN, d->total_iters, 1);
    double last = t0, next_probe = t0 + 0.5;
    int prev = -1;
    for (;;) {
        HS_TRY(check_service(a));
        HS_TRY(hs_dist_idle(d)); /* rank 0: evaluation snapshots others may wait on */
        int waiting = 0, doneN = 0;
        lock(a);
        for (int r = 0; r < d->size; r++) {
            if (r == d->rank) continue;
            if (a->tab[r].done)
                doneN++;
            else if (!a->dead[r] && !hs_dist_peer_dead(d, r))
                waiting++;
        }
        unlock(a);
        if (!waiting) break;
        double now = hs_exec_now(d->x);
        if (doneN != prev) prev = doneN, last = now;
        int silent = now - last >= d->o->drain_timeout_s;
        if (now >= next_probe || silent) {
            next_probe = now + 0.5;
            for (int r = 0; r < d->size; r++) {
                lock(a);
                /* probe only ranks not heard from for a second */
                int w = r != d->rank && !a->tab[r].done && !a->dead[r] &&
                        (!a->tab[r].valid || now - a->tab[r].seen_s > 1.0);
                unlock(a);
                if (!w || hs_dist_peer_dead(d, r)) continue;
                /* a rank that heartbeats is a straggler (bounded); a frozen one is waited
                 * for until it is fenced (then hs_dist_peer_dead) */
                hs_dist_late_t l = {.quiet = now - last,
                                    .limit = d->o->drain_timeout_s,
                                    .silent = silent,
                                    .heartbeats = 1,
                                    .probe = 1,
                                    .probe_s = 0.02};
                int v = hs_dist_late_peer(d, r, &l);
                if (v != HS_LATE_WAIT)
                    peer_gone(a, r,
                              v == HS_LATE_SILENT ? "silent at the end of the run"
                                                  : "exited before the end of the run");
            }
        }
        HS_TRY(hs_exec_sleep(d->x, 0.02));
    }
    /* our own snapshot replies and loss messages leave before the endpoint closes */
    for (size_t i = 0; i < (size_t)d->size * LOSS_RING; i++) {
        int r = (int)(i / LOSS_RING);
        lock(a);
        int dead = a->dead[r];
        unlock(a);
        if (a->lreq[i] && !dead && !hs_dist_peer_dead(d, r))
            hs_exec_wait1(d->x, &a->lreq[i], 1.0, 0, NULL);
        if (a->lreq[i]) hs_transport_req_free(d->t, &a->lreq[i]);
    }
    d->st.wait_s += hs_exec_now(d->x) - t0;
    svc_account(a);
    return 0;
}

static void lsgd_finalize(hs_algo_t **ap)
{
    hs_algo_t *a = ap ? *ap : NULL;
    if (!a) return;
    hs_dist_t *d = a->d;
    hs_svc_stop(d->x, &a->svc);
    for (int r = 0; r < d->size; r++) {
        if (a->oreq && a->oreq[r]) hs_transport_req_free(d->t, &a->oreq[r]);
        if (a->obuf) free(a->obuf[r]);
    }
    for (size_t i = 0; a->lreq && i < (size_t)d->size * LOSS_RING; i++)
        if (a->lreq[i]) hs_transport_req_free(d->t, &a->lreq[i]);
    if (a->freq) hs_transport_req_free(d->t, &a->freq);
    if (a->qreq) hs_transport_req_free(d->t, &a->qreq);
    free(a->oreq);
    free(a->obuf);
    free(a->lreq);
    free(a->lbuf);
    free(a->lsent);
    free(a->fbuf);
    free(a->sscratch);
    free(a->fl);
    free(a->qbuf);
    free(a->win);
    free(a->xh);
    free(a->tab);
    free(a->dead);
    hs_stage_close(&a->xl);
    hs_snapshot_free(&a->snap);
    free(a);
    *ap = NULL;
}

/* The options, before the job starts (ranks 0: the job size is not known yet) and at init. */
static int lsgd_check(const hs_algo_opts_t *o, const hs_cfg_t *cfg, int ranks)
{
    (void)o;
    const long tau = hs_cfg_int(cfg, "tau"), window = hs_cfg_int(cfg, "leader-window");
    const long groups = hs_cfg_int(cfg, "groups");
    const double pl = hs_cfg_double(cfg, "pull-local"), pg = hs_cfg_double(cfg, "pull-global");
    if (tau < 1) return HS_ERR(-EINVAL, "--tau must be at least 1 (got %ld)", tau);
    if (window < 1) return HS_ERR(-EINVAL, "--leader-window must be at least 1 (got %ld)", window);
    if (!(pl >= 0) || !(pg >= 0))
        return HS_ERR(-EINVAL, "--pull-local %g / --pull-global %g must be >= 0", pl, pg);
    if (ranks > 0 && groups > ranks)
        return HS_ERR(-EINVAL, "--groups %ld: more groups than the %d ranks", groups, ranks);
    hs_compress_spec_t cs;
    HS_TRY(hs_compress_parse(hs_cfg_str(cfg, "compress"), &cs));
    if (cs.kind != HS_COMPRESS_NONE && cs.kind != HS_COMPRESS_FP16 && cs.kind != HS_COMPRESS_BF16)
        return HS_ERR(-EINVAL,
                      "--compress %s: --algo lsgd takes fp16 or bf16 only (its snapshots are "
                      "pulled toward as they are, with no error feedback)",
                      cs.text);
    return 0;
}

static int lsgd_init(hs_algo_t **out, hs_dist_t *d)
{
    *out = NULL;
    HS_TRY(lsgd_check(d->o, d->cfg, d->size));
    const int groups = (int)hs_dist_opt_int(d, "groups");
    hs_algo_t *a = hs_calloc(1, sizeof *a, "leader-SGD state");
    if (!a) return -ENOMEM;
    a->d = d;
    atomic_init(&a->svc_sent, 0);
    atomic_init(&a->svc_recv, 0);
    a->tau = (int)hs_dist_opt_int(d, "tau");
    a->k = (int)hs_dist_opt_int(d, "leader-window");
    a->lam_local = hs_dist_opt_double(d, "pull-local");
    a->lam_global = hs_dist_opt_double(d, "pull-global");
    a->groups = groups > 0 ? groups : 1;
    hs_lsgd_group(d->rank, d->size, a->groups, &a->glo, &a->ghi);
    if (groups == 0 && d->host_of && d->n_hosts > 1) {
        /* Default: one group per host, the ranks around this one on the same host (launchers
         * place ranks by blocks, so a host's ranks are contiguous). */
        int h = d->host_of[d->rank];
        a->glo = a->ghi = d->rank;
        while (a->glo > 0 && d->host_of[a->glo - 1] == h) a->glo--;
        while (a->ghi < d->size && d->host_of[a->ghi] == h) a->ghi++;
        a->groups = d->n_hosts;
    }
    size_t us = (size_t)d->size;
    int rc = -ENOMEM;
    a->nl = HS_MIN(64, HS_MAX(4, 2 * d->size));
    a->nr = HS_MIN(32, HS_MAX(2, d->size));
    int ns = a->nl + a->nr;
    a->win = hs_calloc((size_t)a->k, sizeof *a->win, "loss window");
    a->xh = hs_malloc(d->n * sizeof(float), "snapshot staging");
    a->tab = hs_calloc(us, sizeof *a->tab, "loss table");
    a->dead = hs_calloc(us, 1, "dead ranks");
    a->oreq = hs_calloc(us, sizeof *a->oreq, "snapshot replies");
    a->obuf = hs_calloc(us, sizeof *a->obuf, "snapshot reply buffers");
    a->lreq = hs_calloc(us * LOSS_RING, sizeof *a->lreq, "loss sends");
    a->lbuf = hs_calloc(us * LOSS_RING, HDR, "loss messages");
    a->lsent = hs_calloc(us * LOSS_RING, sizeof *a->lsent, "loss send times");
    a->fbuf = hs_malloc(HDR + d->n * sizeof(float), "fetched snapshot");
    a->qbuf = hs_malloc(HDR, "snapshot request");
    {
        hs_compress_spec_t cs;
        /* --compress, else the products' precision (bf16 / fp16 snapshots), else none */
        const char *spec = hs_compress_or_precision(
            hs_dist_opt_given(d, "compress") ? hs_dist_opt_str(d, "compress") : NULL, d->k);
        if ((rc = hs_compress_parse(spec, &cs)) < 0) goto fail;
        if (cs.kind == HS_COMPRESS_FP16 || cs.kind == HS_COMPRESS_BF16) {
            a->half = cs.kind == HS_COMPRESS_BF16 ? HS_EL_BF16 : HS_EL_FP16;
            hs_dist_set_messages(d, cs.text);
            if (d->rank == 0) {
                char line[160];
                snprintf(line, sizeof line, "lsgd: leader snapshots in %s%s", cs.text,
                         hs_dist_opt_given(d, "compress")
                             ? ""
                             : " (the products' precision; --compress none: float32)");
                if ((rc = hs_dist_record(d, NULL, NULL, line)) < 0) goto fail;
            }
            if (!(a->sscratch = hs_malloc(d->n * sizeof(float), "snapshot copy"))) {
                rc = -ENOMEM;
                goto fail;
            }
        }
    }
    rc = -ENOMEM;
    if (!a->win || !a->xh || !a->tab || !a->dead || !a->oreq || !a->obuf || !a->lreq || !a->lbuf ||
        !a->lsent || !a->fbuf || !a->qbuf)
        goto fail;
    if ((rc = hs_snapshot_init(&a->snap, d->n)) < 0) goto fail;
    if ((rc = hs_stage_view_open(&a->xl, d->k, d->n, "leader's snapshot")) < 0) goto fail;
    int src[96];
    uint32_t tag[96];
    for (int i = 0; i < ns; i++)
        src[i] = HS_ANY_SOURCE,
        tag[i] = i < a->nl ? hs_dist_tag(d, LSGD_TAG_LOSS) : hs_dist_tag(d, LSGD_TAG_REQ);
    hs_service_desc_t sd = {.name = "leader-SGD service",
                            .n_slots = ns,
                            .slot_bytes = HDR,
                            .src = src,
                            .tag = tag,
                            .on_msg = svc_handle,
                            .ctx = a};
    if ((rc = hs_svc_start(d->x, &sd, &a->svc)) < 0) goto fail;
    *out = a;
    return 0;
fail:
    lsgd_finalize(&a);
    return rc;
}

/* Checkpoint state beyond the worker's: the loss window (count, position, k losses). */
static size_t lsgd_state_bytes(const hs_algo_t *a)
{
    return (size_t)(a->k + 2) * sizeof(double);
}

static int lsgd_state_save(hs_algo_t *a, void *buf)
{
    double *v = buf;
    v[0] = a->win_n;
    v[1] = a->win_pos;
    memcpy(v + 2, a->win, (size_t)a->k * sizeof(double));
    return 0;
}

static int lsgd_state_load(hs_algo_t *a, const void *buf)
{
    const double *v = buf;
    if (!(v[0] >= 0 && v[0] <= a->k && v[1] >= 0 && v[1] < a->k))
        return HS_ERR(-EINVAL, "checkpoint: leader-SGD loss window (%g, %g) does not fit k = %d",
                      v[0], v[1], a->k);
    a->win_n = (int)v[0];
    a->win_pos = (int)v[1];
    memcpy(a->win, v + 2, (size_t)a->k * sizeof(double));
    return 0;
}

/* A replacement joins (hs_algo_ops_t.rejoin): it takes the donor's model and starts its own
 * loss window; every other rank forgets the crashed process (its loss entry, its "dead"
 * mark), so that the replacement can be elected from its first
 * loss message on. */
static int lsgd_rejoin(hs_algo_t *a, int peer, long iter, int role)
{
    hs_dist_t *d = a->d;
    (void)iter;
    if (role == HS_REJOIN_ADOPT) {
        a->win_n = a->win_pos = 0;
        return 0;
    }
    if (role != HS_REJOIN_PEER || peer < 0 || peer >= d->size || peer == d->rank) return 0;
    lock(a);
    a->dead[peer] = 0;
    a->tab[peer] = (hs_lsgd_entry_t){0};
    unlock(a);
    return 0; /* (a snapshot reply still meant for it: the service settles it, bounded) */
}

static const hs_option_t lsgd_options[] = {
    {.name = "tau",
     .type = HS_OPT_INT,
     .def = "1",
     .range = "[1, 64]",
     .metavar = "K",
     .help = "communication period in local steps (default 1)"},
    {.name = "pull-local",
     .type = HS_OPT_DOUBLE,
     .def = "0.1",
     .range = "[0, 100]",
     .help = "pull toward the leader of the worker's group (several groups or hosts)"},
    {.name = "pull-global",
     .type = HS_OPT_DOUBLE,
     .def = "0.1",
     .range = "[0, 100]",
     .help = "pull toward the global leader"},
    {.name = "groups",
     .type = HS_OPT_INT,
     .def = "0",
     .range = "[0, 4096]",
     .help = "contiguous groups of ranks with a local leader each (0: one per host)"},
    {.name = "leader-window",
     .type = HS_OPT_INT,
     .def = "10",
     .range = "[1, 100000]",
     .metavar = "K",
     .help = "the leader has the lowest mean loss over its last K batches"},
    {.name = "compress",
     .type = HS_OPT_STRING,
     .def = "none",
     .metavar = "SPEC",
     .help = "compress what is sent: none, fp16, bf16"},
};

const hs_algo_ops_t hs_algo_lsgd_ops = {
    .size = sizeof(hs_algo_ops_t),
    .name = "lsgd",
    .help = "leader-SGD: pulls toward the global and the group's lowest-loss worker",
    .flags = HS_ALGO_COMM | HS_ALGO_PROGRESS | HS_ALGO_TOLERANT,
    .options = lsgd_options,
    .n_options = HS_ARRAY_LEN(lsgd_options),
    .init = lsgd_init,
    .step = lsgd_step,
    .drain = lsgd_drain,
    .finalize = lsgd_finalize,
    .state_bytes = lsgd_state_bytes,
    .state_save = lsgd_state_save,
    .state_load = lsgd_state_load,
    .rejoin = lsgd_rejoin,
    .check = lsgd_check,
    .msg_header = sizeof(hs_el_hdr_v1_t), /* its wire header (--sim-payload) */
};
