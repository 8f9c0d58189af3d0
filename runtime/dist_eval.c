/*
 * runtime/dist_eval.c — the averaged model and the consensus distance without a barrier, and
 * the end-of-run collective.
 *
 * At each evaluation point every rank evaluates its own z on the test set (locally) and pushes
 * a snapshot of z (with its own loss, accuracy and training clock) to rank 0 on HS_TAG_EVAL,
 * then goes on training. Rank 0 keeps two receives posted for them, and between its own
 * iterations takes what arrived and sums it per evaluation point: sum_i z_i in double, and
 * sum_i ||z_i||^2. When every live rank's snapshot of a point is in, it evaluates
 * mean z = sum / n on the test set and the consensus distance
 *     sqrt(mean_i ||z_i - mean z||^2) = sqrt(mean_i ||z_i||^2 - ||mean z||^2),
 * writes a row of eval.csv and frees the point. Nobody waits for anybody during training;
 * a slow rank only delays when a row is written. At the end (after every rank's final drain)
 * a final gather to rank 0 is allowed: results, z and failure reports.
 */
#include "runtime/dist.h"
#include "runtime/report.h"

#include "hearsay/common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define EV_SLOTS    2
#define FINAL_CAP_S 3600.0 /* bound on waiting for a live rank's end-of-run message */

typedef struct ev_round {
    long iter;
    int count;
    double *sum; /* (n) */
    double norm2, loss_sum, loss_min, loss_max, acc_sum, clock_max;
} ev_round_t;

struct hs_evalc {
    hs_dist_t *d;
    FILE *csv;
    long ipe; /* iterations per epoch (the epoch column) */
    size_t msg_bytes;
    hs_treq_t *req[EV_SLOTS];
    unsigned char *buf[EV_SLOTS];
    ev_round_t *r;
    int nr, cap;
    long *got;   /* (size) snapshots received per rank */
    long *from;  /* (size) a rank takes part in the rounds of iterations > from (rejoined: its
                  * first iteration; NULL: every rank in every round) */
    long closed; /* the last round evaluated (-1: none): a later snapshot of it (a rank that
                  * rejoined while the others were past it) is not a round again */
    double target_loss, target_acc, ttt; /* the averaged model's first time at the target */
    long nonfinite;                      /* its first round with a NaN/Inf loss (-1: none) */
    float *zbar;                         /* (n) */
};

int hs_dist_eval_host(hs_dist_t *d, const float *zh, double *loss, double *acc)
{
    hs_stage_t v; /* zh where the kernels read it (zh itself on the CPU) */
    const float *dev = NULL;
    int rc = hs_stage_view_open(&v, d->k, d->n, "model to evaluate");
    if (rc == 0) rc = hs_stage_view(&v, zh, d->n, &dev);
    if (rc == 0) rc = hs_dist_evaluate(d, dev, loss, acc);
    hs_stage_close(&v);
    return rc;
}

static double dot_d(const float *z, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)z[i] * (double)z[i];
    return s;
}

/* mean z of `count` snapshots summed in `sum` into zbar; returns ||mean||^2. */
static double mean_of(const double *sum, int count, float *zbar, size_t n)
{
    double m2 = 0;
    for (size_t i = 0; i < n; i++) {
        double m = sum[i] / count;
        zbar[i] = (float)m;
        m2 += m * m;
    }
    return m2;
}

static int flush_rounds(hs_evalc_t *ec);

/* The ranks that send a snapshot for the round of iteration `iter`: the live ones, less a
 * rank that rejoined after it. */
static int live_ranks(const hs_evalc_t *ec, long iter)
{
    const hs_dist_t *d = ec->d;
    int c = 0;
    for (int r = 0; r < d->size; r++)
        c += !hs_dist_peer_dead(d, r) && !(ec->from && iter <= ec->from[r]);
    return c;
}

int hs_evalc_rejoined(hs_evalc_t *ec, int rank, long first_iter, long period)
{
    hs_dist_t *d = ec->d;
    if (rank <= 0 || rank >= d->size) return 0;
    if (!ec->from) {
        if (!(ec->from = hs_malloc((size_t)d->size * sizeof *ec->from, "rejoined ranks")))
            return -ENOMEM;
        for (int r = 0; r < d->size; r++) ec->from[r] = -1;
    }
    ec->from[rank] = first_iter;
    /* its snapshots: as if every round up to its first iteration had been sent */
    if (period > 0) ec->got[rank] = first_iter / period;
    return flush_rounds(ec);
}

static int round_done(hs_evalc_t *ec, int i)
{
    hs_dist_t *d = ec->d;
    ev_round_t *r = &ec->r[i];
    hs_avg_eval_t a = {.iteration = r->iter, .ranks = r->count, .clock_s = r->clock_max};
    if (r->iter > ec->closed) ec->closed = r->iter;
    double m2 = mean_of(r->sum, r->count, ec->zbar, d->n);
    HS_TRY(hs_dist_eval_host(d, ec->zbar, &a.test_loss, &a.test_acc));
    double c2 = r->norm2 / r->count - m2;
    a.consensus = sqrt(c2 > 0 ? c2 : 0);
    a.consensus_rel = m2 > 0 ? a.consensus / sqrt(m2) : NAN;
    a.rank_loss_mean = r->loss_sum / r->count;
    a.rank_loss_min = r->loss_min;
    a.rank_loss_max = r->loss_max;
    a.rank_acc_mean = r->acc_sum / r->count;
    hs_report_avg_row(ec->csv, &a, ec->ipe);
    if (!isfinite(a.test_loss) && ec->nonfinite < 0) {
        ec->nonfinite = a.iteration;
        HS_WARN("rank 0: the averaged model's test loss is %g at iteration %ld: a rank's "
                "parameters are NaN or infinite (it diverged; summary.json health: failed)",
                a.test_loss, a.iteration);
    }
    if (isnan(ec->ttt) && ((ec->target_loss > 0 && a.test_loss <= ec->target_loss) ||
                           (ec->target_acc > 0 && a.test_acc >= ec->target_acc)))
        ec->ttt = a.clock_s;
    free(r->sum);
    ec->r[i] = ec->r[--ec->nr];
    return 0;
}

/* The pending round of the lowest iteration (-1: none). */
static int first_round(const hs_evalc_t *ec)
{
    int first = -1;
    for (int i = 0; i < ec->nr; i++)
        if (first < 0 || ec->r[i].iter < ec->r[first].iter) first = i;
    return first;
}

/* Evaluate the complete rounds in iteration order: a round whose last snapshot came first
 * (snapshots of different ranks arrive in any order, and two receives are posted) waits for
 * the rounds before it, so that eval.csv's rows are in iteration order. */
static int flush_rounds(hs_evalc_t *ec)
{
    int i;
    while ((i = first_round(ec)) >= 0 && ec->r[i].count >= live_ranks(ec, ec->r[i].iter))
        HS_TRY(round_done(ec, i));
    return 0;
}

int hs_evalc_add(hs_evalc_t *ec, int sender, long iter, const float *z, double loss, double acc,
                 double clock_s)
{
    hs_dist_t *d = ec->d;
    int i;
    if (iter <= ec->closed) { /* (a rank that rejoined while the others were past it) */
        if (sender >= 0 && sender < d->size) ec->got[sender]++;
        return flush_rounds(ec);
    }
    for (i = 0; i < ec->nr; i++)
        if (ec->r[i].iter == iter) break;
    if (i == ec->nr) {
        if (ec->nr == ec->cap) {
            int nc = ec->cap ? 2 * ec->cap : 4;
            ev_round_t *nrd = realloc(ec->r, (size_t)nc * sizeof *nrd);
            if (!nrd) return HS_ERR(-ENOMEM, "out of memory for evaluation rounds");
            ec->r = nrd;
            ec->cap = nc;
        }
        ev_round_t *r = &ec->r[ec->nr];
        *r = (ev_round_t){.iter = iter, .loss_min = INFINITY, .loss_max = -INFINITY};
        if (!(r->sum = hs_calloc(d->n, sizeof(double), "evaluation sum"))) return -ENOMEM;
        ec->nr++;
    }
    ev_round_t *r = &ec->r[i];
    for (size_t e = 0; e < d->n; e++) r->sum[e] += z[e];
    r->norm2 += dot_d(z, d->n);
    r->count++;
    r->loss_sum += loss;
    r->acc_sum += acc;
    if (loss < r->loss_min) r->loss_min = loss;
    if (loss > r->loss_max) r->loss_max = loss;
    if (clock_s > r->clock_max) r->clock_max = clock_s;
    if (sender >= 0 && sender < d->size) ec->got[sender]++;
    return flush_rounds(ec);
}

static int take(hs_evalc_t *ec, int slot, const hs_tstatus_t *st)
{
    hs_dist_t *d = ec->d;
    hs_dist_frame_t frame, *h = &frame;
    HS_TRY(hs_dist_frame_read(ec->buf[slot], st->len, HS_DIST_MSG_EVAL, st->source, d->n, h));
    hs_trace_apply_begin(d->x->trace, d->rank, ec->buf[slot], st); /* --trace: its arrow */
    HS_TRY(hs_evalc_add(ec, st->source, (long)h->iteration,
                        (const float *)(ec->buf[slot] + HS_DIST_FRAME_BYTES), h->aux[HS_AUX_LOSS],
                        h->aux[HS_AUX_ACC], h->aux[HS_AUX_CLOCK]));
    hs_trace_end(d->x->trace, HS_TR_APPLY);
    return hs_transport_irecv(d->t, HS_ANY_SOURCE, HS_TAG_EVAL, ec->buf[slot], ec->msg_bytes,
                              &ec->req[slot]);
}

int hs_evalc_poll(hs_evalc_t *ec)
{
    for (int s = 0; s < EV_SLOTS; s++) {
        if (!ec->req[s]) continue;
        int done = 0;
        hs_tstatus_t st;
        int rc = hs_transport_test(ec->d->t, &ec->req[s], &done, &st);
        if (rc < 0) continue; /* every other rank gone: the slot is not reposted */
        if (done) HS_TRY(take(ec, s, &st));
    }
    return 0;
}

int hs_evalc_finish(hs_evalc_t *ec, long rounds, double timeout_s)
{
    hs_dist_t *d = ec->d;
    double last_progress = hs_exec_now(d->x), next_probe = last_progress + 0.5;
    for (;;) {
        int missing = 0;
        for (int r = 1; r < d->size; r++)
            if (!hs_dist_peer_dead(d, r) && ec->got[r] < rounds) missing++;
        if (!missing) break;
        int idx = -1;
        hs_tstatus_t st;
        /* (not the idle hook: it is this collector's own poll) */
        int rc = hs_exec_wait(d->x, ec->req, EV_SLOTS, 0.25, HS_WAIT_NO_IDLE, &idx, &st);
        if (rc == 0 && idx >= 0) {
            HS_TRY(take(ec, idx, &st));
            last_progress = hs_exec_now(d->x);
            continue;
        }
        if (rc < 0 && rc != -ETIMEDOUT) break; /* nobody left to send */
        double now = hs_exec_now(d->x);
        if (now >= next_probe) {
            next_probe = now + 0.5;
            const hs_dist_late_t l = {.probe = 1, .probe_s = 0.3}; /* (a probe only) */
            for (int r = 1; r < d->size; r++)
                if (!hs_dist_peer_dead(d, r) && ec->got[r] < rounds &&
                    hs_dist_late_peer(d, r, &l) == HS_LATE_EXITED)
                    hs_dist_peer_failed(d, r, 0, "exited before sending its evaluations");
        }
        if (now - last_progress > timeout_s) break;
    }
    /* what is left is incomplete: evaluate it with the snapshots that arrived, in order */
    int first;
    while ((first = first_round(ec)) >= 0) HS_TRY(round_done(ec, first));
    return 0;
}

void hs_evalc_close(hs_evalc_t **ecp)
{
    hs_evalc_t *ec = ecp ? *ecp : NULL;
    if (!ec) return;
    for (int s = 0; s < EV_SLOTS; s++) {
        if (ec->req[s]) hs_transport_req_free(ec->d->t, &ec->req[s]);
        free(ec->buf[s]);
    }
    for (int i = 0; i < ec->nr; i++) free(ec->r[i].sum);
    free(ec->r);
    free(ec->got);
    free(ec->from);
    free(ec->zbar);
    free(ec);
    *ecp = NULL;
}

double hs_evalc_ttt(const hs_evalc_t *ec)
{
    return ec ? ec->ttt : NAN;
}

long hs_evalc_nonfinite(const hs_evalc_t *ec)
{
    return ec ? ec->nonfinite : -1;
}

int hs_evalc_open(hs_evalc_t **out, hs_dist_t *d, FILE *csv, long ipe, double target_loss,
                  double target_acc)
{
    hs_evalc_t *ec = hs_calloc(1, sizeof *ec, "evaluation collector");
    if (!ec) return -ENOMEM;
    ec->target_loss = target_loss;
    ec->target_acc = target_acc;
    ec->ttt = NAN;
    ec->nonfinite = -1;
    ec->d = d;
    ec->csv = csv;
    ec->ipe = ipe;
    ec->msg_bytes = HS_DIST_FRAME_BYTES + d->n * sizeof(float);
    ec->got = hs_calloc((size_t)d->size, sizeof *ec->got, "evaluation counts");
    ec->closed = -1;
    ec->zbar = hs_malloc(d->n * sizeof(float), "mean model");
    int rc = -ENOMEM;
    if (!ec->got || !ec->zbar) goto fail;
    for (int s = 0; s < EV_SLOTS && d->size > 1; s++) {
        if (!(ec->buf[s] = hs_malloc(ec->msg_bytes, "evaluation buffer"))) goto fail;
        if ((rc = hs_transport_irecv(d->t, HS_ANY_SOURCE, HS_TAG_EVAL, ec->buf[s], ec->msg_bytes,
                                     &ec->req[s])) < 0)
            goto fail;
    }
    *out = ec;
    return 0;
fail:
    hs_evalc_close(&ec);
    return rc;
}

/* Wait for one request, bounded, while its peer lives (same-host liveness). */
static int wait_peer(hs_dist_t *d, hs_treq_t **req, int peer, hs_tstatus_t *st)
{
    double start = hs_exec_now(d->x);
    for (;;) {
        int rc = hs_exec_wait1(d->x, req, 1.0, HS_WAIT_NO_IDLE, st);
        if (rc != -ETIMEDOUT) return rc;
        if (!hs_dist_probe_alive(d, peer)) return HS_ERR(-ECONNRESET, "rank %d has exited", peer);
        if (hs_exec_now(d->x) - start > FINAL_CAP_S)
            return HS_ERR(-ETIMEDOUT, "no end-of-run message from rank %d after %.0f s", peer,
                          FINAL_CAP_S);
    }
}

int hs_eval_send(hs_dist_t *d, unsigned char *buf, hs_treq_t **req, long iter, const float *z,
                 double loss, double acc, double clock_s)
{
    if (*req) {
        int rc = wait_peer(d, req, 0, NULL);
        if (*req) hs_transport_req_free(d->t, req);
        if (rc < 0) return rc;
    }
    hs_dist_frame_t frame = {.iteration = iter, .weight = 1.0}, *h = &frame;
    h->aux[HS_AUX_LOSS] = loss;
    h->aux[HS_AUX_ACC] = acc;
    h->aux[HS_AUX_CLOCK] = clock_s;
    hs_dist_frame_write(buf, HS_DIST_MSG_EVAL, d->rank, d->n, h);
    memcpy(buf + HS_DIST_FRAME_BYTES, z, d->n * sizeof(float));
    return hs_transport_isend(d->t, 0, HS_TAG_EVAL, buf, HS_DIST_FRAME_BYTES + d->n * sizeof(float),
                              req);
}

int hs_final_gather(hs_dist_t *d, const float *z, const hs_rank_final_t *mine, hs_rank_final_t *all,
                    hs_avg_eval_t *avg)
{
    /* the trailing int64 and double arrays start 8-byte aligned: after an odd number of
     * floats, 4 bytes of padding (UBSan: misaligned store with a 650-parameter model) */
    size_t zpad = (d->n * sizeof(float)) % 8 ? 8 - (d->n * sizeof(float)) % 8 : 0;
    size_t extra = zpad + (size_t)d->size * sizeof(int64_t) +
                   (HS_HEALTH_DOUBLES + HS_TIME_DOUBLES) * sizeof(double);
    size_t bytes = HS_DIST_FRAME_BYTES + d->n * sizeof(float) + extra;
    unsigned char *buf = hs_calloc(1, bytes, "end-of-run message");
    if (!buf) return -ENOMEM;
    hs_dist_frame_t frame = {0}, *h = &frame; /* the header, written and read through optim/ */
    int64_t *fa = (int64_t *)(buf + HS_DIST_FRAME_BYTES + d->n * sizeof(float) + zpad);
    double *hl = (double *)(fa + d->size); /* (HS_HEALTH_DOUBLES) */
    double *tm = hl + HS_HEALTH_DOUBLES;   /* (HS_TIME_DOUBLES) */
    int rc = 0;
    if (d->rank != 0) {
        h->iteration = d->total_iters;
        h->weight = mine->weight;
        h->extra = (uint32_t)extra;
        h->aux[HS_AUX_NORM2] = dot_d(z, d->n);
        h->aux[HS_AUX_LOSS] = mine->test_loss;
        h->aux[HS_AUX_ACC] = mine->test_acc;
        h->aux[HS_AUX_CLOCK] = mine->clock_s;
        h->aux[HS_AUX_TTT] = mine->ttt_s;
        h->aux[HS_AUX_TRAIN] = mine->train_loss;
        h->aux[HS_AUX_COMP] = mine->compute_s;
        h->aux[HS_AUX_COMM] = mine->comm_s;
        h->aux[HS_AUX_WAIT] = mine->wait_s;
        h->aux[HS_AUX_STRAG] = mine->straggle_s;
        h->aux[HS_AUX_MSGS] = mine->msgs;
        hs_dist_frame_write(buf, HS_DIST_MSG_FINAL, d->rank, d->n, h);
        memcpy(buf + HS_DIST_FRAME_BYTES, z, d->n * sizeof(float));
        for (int r = 0; r < d->size; r++) fa[r] = hs_run_failed_at(d, r);
        hl[0] = mine->w_min;
        hl[1] = mine->w_max;
        hl[2] = mine->iters;
        hl[3] = mine->alone_s;
        hl[4] = mine->stale_max;
        hl[5] = mine->bytes_sent;
        hl[6] = mine->bytes_recv;
        hl[7] = mine->stale_min;
        memcpy(hl + 8, mine->stale_hist, sizeof mine->stale_hist);
        tm[0] = mine->eval_s;
        tm[1] = mine->wall_s;
        tm[2] = mine->w_out_iter;
        tm[3] = mine->w_out_w;
        tm[4] = mine->scale_skips;
        tm[5] = mine->loss_scale;
        /* The ack from rank 0 says it has our results: exiting earlier could fail its
         * receive (a peer that exits is declared dead), so every rank stays until then. */
        hs_treq_t *req = NULL, *ack = NULL;
        char one[8];
        rc = hs_transport_irecv(d->t, 0, HS_TAG_ACK, one, sizeof one, &ack);
        if (rc == 0) rc = hs_transport_isend(d->t, 0, HS_TAG_FINAL, buf, bytes, &req);
        if (rc == 0) rc = wait_peer(d, &req, 0, NULL);
        if (rc == 0) rc = wait_peer(d, &ack, 0, NULL);
        if (req) hs_transport_req_free(d->t, &req);
        if (ack) hs_transport_req_free(d->t, &ack);
        if (rc < 0) hs_error_prefix("sending the end-of-run results to rank 0");
        free(buf);
        return rc;
    }
    hs_treq_t **acks = NULL;
    double *sum = hs_calloc(d->n, sizeof(double), "final sum");
    float *zbar = hs_malloc(d->n * sizeof(float), "final mean");
    if (!sum || !zbar) {
        rc = -ENOMEM;
        goto out;
    }
    double norm2 = dot_d(z, d->n);
    int count = 1;
    for (size_t e = 0; e < d->n; e++) sum[e] = z[e];
    all[0] = *mine;
    all[0].present = 1;
    acks = hs_calloc((size_t)d->size, sizeof *acks, "acks");
    static const char ackmsg[8] = "done";
    if (!acks) {
        rc = -ENOMEM;
        goto out;
    }
    for (int r = 1; r < d->size; r++) {
        all[r] = (hs_rank_final_t){
            .test_loss = NAN, .test_acc = NAN, .ttt_s = NAN, .dist = NAN, .w_out_iter = -1};
        if (hs_dist_peer_dead(d, r)) continue;
        hs_treq_t *req = NULL;
        hs_tstatus_t st;
        if ((rc = hs_transport_irecv(d->t, r, HS_TAG_FINAL, buf, bytes, &req)) < 0) goto out;
        rc = wait_peer(d, &req, r, &st);
        if (req) hs_transport_req_free(d->t, &req);
        if (rc < 0) {
            hs_dist_peer_failed(d, r, 0, hs_last_error());
            rc = 0;
            continue;
        }
        if ((rc = hs_dist_frame_read(buf, st.len, HS_DIST_MSG_FINAL, r, d->n, h)) < 0) goto out;
        if (h->extra != extra) {
            rc = HS_ERR(-EPROTO, "end-of-run results of rank %d: %u trailing bytes, expected %zu",
                        r, h->extra, extra);
            goto out;
        }
        if (hs_transport_isend(d->t, r, HS_TAG_ACK, ackmsg, sizeof ackmsg, &acks[r]) < 0)
            acks[r] = NULL;
        hs_rank_final_t *f = &all[r];
        f->present = 1;
        f->weight = h->weight;
        f->test_loss = h->aux[HS_AUX_LOSS];
        f->test_acc = h->aux[HS_AUX_ACC];
        f->clock_s = h->aux[HS_AUX_CLOCK];
        f->ttt_s = h->aux[HS_AUX_TTT];
        f->train_loss = h->aux[HS_AUX_TRAIN];
        f->compute_s = h->aux[HS_AUX_COMP];
        f->comm_s = h->aux[HS_AUX_COMM];
        f->wait_s = h->aux[HS_AUX_WAIT];
        f->straggle_s = h->aux[HS_AUX_STRAG];
        f->msgs = h->aux[HS_AUX_MSGS];
        f->w_min = hl[0];
        f->w_max = hl[1];
        f->iters = hl[2];
        f->alone_s = hl[3];
        f->stale_max = hl[4];
        f->bytes_sent = hl[5];
        f->bytes_recv = hl[6];
        f->stale_min = hl[7];
        memcpy(f->stale_hist, hl + 8, sizeof f->stale_hist);
        f->eval_s = tm[0];
        f->wall_s = tm[1];
        f->w_out_iter = tm[2];
        f->w_out_w = tm[3];
        f->scale_skips = tm[4];
        f->loss_scale = tm[5];
        const float *zr = (const float *)(buf + HS_DIST_FRAME_BYTES);
        for (size_t e = 0; e < d->n; e++) sum[e] += zr[e];
        norm2 += h->aux[HS_AUX_NORM2];
        count++;
        for (int q = 0; q < d->size; q++)
            if (fa[q] >= 0) hs_dist_peer_failed(d, q, (long)fa[q], "reported by another rank");
    }
    double m2 = mean_of(sum, count, zbar, d->n);
    *avg = (hs_avg_eval_t){.iteration = d->total_iters, .ranks = count};
    if ((rc = hs_dist_eval_host(d, zbar, &avg->test_loss, &avg->test_acc)) < 0) goto out;
    double c2 = norm2 / count - m2;
    avg->consensus = sqrt(c2 > 0 ? c2 : 0);
    avg->consensus_rel = m2 > 0 ? avg->consensus / sqrt(m2) : NAN;
    double ls = 0, lmin = INFINITY, lmax = -INFINITY, as = 0;
    for (int r = 0; r < d->size; r++) {
        if (!all[r].present) continue;
        ls += all[r].test_loss;
        as += all[r].test_acc;
        if (all[r].test_loss < lmin) lmin = all[r].test_loss;
        if (all[r].test_loss > lmax) lmax = all[r].test_loss;
        if (all[r].clock_s > avg->clock_s) avg->clock_s = all[r].clock_s;
    }
    avg->rank_loss_mean = ls / count;
    avg->rank_loss_min = lmin;
    avg->rank_loss_max = lmax;
    avg->rank_acc_mean = as / count;
    /* rank 0's own distance to the mean (the others' need their z, which was not kept) */
    double d0 = 0;
    for (size_t e = 0; e < d->n; e++) {
        double v = (double)z[e] - sum[e] / count;
        d0 += v * v;
    }
    all[0].dist = sqrt(d0);
out:
    for (int r = 1; acks && r < d->size; r++) { /* acks delivered before rank 0 leaves */
        if (acks[r] && wait_peer(d, &acks[r], r, NULL) < 0) hs_error_clear();
        if (acks[r]) hs_transport_req_free(d->t, &acks[r]);
    }
    free(acks);
    free(sum);
    free(zbar);
    free(buf);
    return rc;
}
