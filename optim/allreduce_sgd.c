/*
 * optim/allreduce_sgd.c — synchronous data-parallel SGD: the flat gradient is averaged over
 * every rank by a ring all-reduce (hearsay/allreduce.h) each step, then every rank takes the
 * same local step, so all replicas stay identical (same initialisation, same averaged
 * gradient, same deterministic schedule). The all-reduce is a collective: a straggler or a
 * paused rank stalls everyone, and a dead rank stops the run with an error naming it within
 * the all-reduce's bounded waits. With --compress the gradients are exchanged compressed with
 * error feedback instead (EF-SGD, optim/efsgd.c).
 *
 * Where the transport shares buffers between same-host ranks (hsshm), the gradient lives in
 * memory of hs_transport_buf_alloc (hs_dist_use_grads; with non-CPU kernels the host staging
 * buffer does), like NCCL's registered buffers or MPI_Alloc_mem: the peers map it, and the
 * all-reduce reads and writes it in place (its mapped path, gossip/allreduce.c).
 *
 * Buckets (--bucket-mb MB > 0; docs/algorithms.md, "All-reduce SGD"; with --compress EF-SGD
 * takes the same buckets, optim/efsgd.c): as PyTorch
 * DDP, the gradient is cut into buckets of consecutive layers, the last layers first, each
 * about MB MiB (a layer is never split), and each bucket is all-reduced as soon as backward
 * has written its layers, while backward goes on with the earlier ones. The loop tells when
 * (hs_dist_on_grads); the training thread then sends its own rank a small message
 * (tag AR_TAG_BUCKET), and a service (hearsay/exec.h) runs the buckets' all-reduces in bucket
 * order, one plan each with its own tag range, so every rank reduces the same buckets in the
 * same order. step() waits (hs_svc_wait, bounded) until every bucket is reduced. Each element
 * is summed in an order that depends only on its bucket and the path, never on timing: runs
 * repeat bit for bit, and the result equals the flat reduction's up to float rounding (the
 * ring's segments start at other ranks; the mapped path's sums are in rank order). On a
 * device each bucket goes through its part of the gradient's host image (hs_stage_*_range).
 */
#include "hearsay/algo.h"
#include "hearsay/allreduce.h"
#include "hearsay/common.h"
#include "hearsay/compress.h"
#include "optim/efsgd.h"
#include "optim/ps_wire.h"

#include <stdlib.h>

/* Message tags (offsets in the algorithm's range, hs_dist_tag; optim/efsgd.h has the other). */
enum { AR_TAG_BUCKET = 0 }; /* a rank to its own service: a bucket of the gradient is ready */

typedef struct ar_bucket {
    int la, lb;     /* gradient layers [la, lb) (hs_dist_t.glayer_off) */
    size_t lo, len; /* floats [lo, lo + len) of the gradient */
    hs_allreduce_t *ar;
    hs_treq_t *kick; /* the message to our own service that announced it (freed in step) */
} ar_bucket_t;

struct hs_algo {
    hs_dist_t *d;
    hs_allreduce_t *ar;
    hs_stage_t gs; /* the gradient's host image (the gradient itself on the CPU) */
    void *gbuf;    /* memory of hs_transport_buf_alloc peers map: the image, if it is one */
    float *shared; /* (n) the gradient moved into hs_transport_buf_alloc memory, or NULL */
    efsgd_t *ef;   /* --compress: EF-SGD instead of the all-reduce */
    /* --bucket-mb: buckets in backward order (bucket 0 holds the last layers) */
    ar_bucket_t *bk;
    int nb;
    hs_service_t *svc; /* runs the buckets' all-reduces */
    int next;          /* training thread: the next bucket to announce */
    int lowest;        /* training thread: the lowest gradient layer final so far */
    /* under the service lock */
    int ready, done;   /* buckets announced, reduced (this iteration) */
    int failed;        /* the first all-reduce error (0: none) */
    double svc_comm_s; /* the service's all-reduce time this iteration */
    int32_t kick_msg;
    int32_t kick_buf;
};

/* Announce buckets [a->next, upto) to our own service (training thread). */
static int bk_announce(hs_algo_t *a, int upto)
{
    hs_dist_t *d = a->d;
    if (upto <= a->next) return 0;
    hs_svc_lock(d->x, a->svc);
    a->ready = upto;
    hs_svc_unlock(d->x, a->svc);
    int rc = 0;
    for (; a->next < upto; a->next++) { /* one message per bucket, freed in step */
        ar_bucket_t *b = &a->bk[a->next];
        if (!b->kick && rc == 0)
            rc = hs_transport_isend(d->t, d->rank, hs_dist_tag(d, AR_TAG_BUCKET), &a->kick_msg,
                                    sizeof a->kick_msg, &b->kick);
    }
    return rc;
}

/* hs_grads_ready_fn: layers [la, lb) are final; a bucket is ready once its first layer is. */
static int bk_grads_ready(void *fctx, int la, int lb)
{
    hs_algo_t *a = fctx;
    (void)lb;
    if (la < a->lowest) a->lowest = la;
    int upto = a->next;
    while (upto < a->nb && a->bk[upto].la >= a->lowest) upto++;
    return bk_announce(a, upto);
}

/* The service: reduce every announced bucket, in order (a message may find them done). */
static int bk_on_msg(void *ctx, int slot, const void *buf, const hs_tstatus_t *st)
{
    hs_algo_t *a = ctx;
    hs_dist_t *d = a->d;
    (void)slot, (void)buf, (void)st;
    for (;;) {
        hs_svc_lock(d->x, a->svc);
        int b = a->done < a->ready && !a->failed ? a->done : -1;
        hs_svc_unlock(d->x, a->svc);
        if (b < 0) return 0;
        double t0 = hs_exec_now(d->x);
        /* the bucket's image (the gradient itself on the CPU): to the host, reduced, back */
        const size_t lo = a->bk[b].lo, len = a->bk[b].len;
        int rc = hs_stage_pull_range(&a->gs, lo, len);
        if (rc == 0) rc = hs_allreduce_run(a->bk[b].ar, hs_stage_host(&a->gs) + lo);
        if (rc == 0) rc = hs_stage_push_range(&a->gs, lo, len);
        double dt = hs_exec_now(d->x) - t0;
        if (rc < 0) hs_error_prefix("all-reduce SGD, iteration %ld, bucket %d", d->iter + 1, b);
        hs_svc_lock(d->x, a->svc);
        if (rc < 0)
            a->failed = rc;
        else
            a->done++;
        a->svc_comm_s += dt;
        hs_svc_unlock(d->x, a->svc);
        if (rc < 0) return rc;
    }
}

/* Round t with buckets: announce what backward did not, wait until every bucket is reduced
 * (bounded: no bucket finished within the comm timeout), free the announcements. */
static int bk_step(hs_algo_t *a, long t)
{
    hs_dist_t *d = a->d;
    int rc = bk_announce(a, a->nb); /* no notifications offered: all at once, after backward */
    double t0 = hs_exec_now(d->x), last = t0, tmo = d->o->comm_timeout_s;
    hs_svc_lock(d->x, a->svc);
    int seen = a->done;
    while (rc == 0 && a->done < a->nb && !a->failed) {
        double now = hs_exec_now(d->x);
        if (a->done > seen) seen = a->done, last = now;
        int late = now - last > tmo;
        /* with heartbeats: a frozen rank is waited for until it wakes or is fenced */
        if (hs_dist_heartbeats(d)) late = !hs_dist_collective_patience(d, now - last, tmo);
        if (late) {
            rc = HS_ERR(-ETIMEDOUT,
                        "all-reduce SGD, iteration %ld: bucket %d of %d not reduced within %g s", t,
                        a->done, a->nb, tmo);
            break;
        }
        hs_svc_wait(d->x, a->svc, 0.1);
    }
    if (rc == 0 && a->failed) rc = a->failed;
    double comm = a->svc_comm_s;
    a->svc_comm_s = 0;
    a->ready = a->done = 0;
    hs_svc_unlock(d->x, a->svc);
    if (rc == 0 && (rc = hs_svc_error(d->x, a->svc)) < 0)
        hs_error_prefix("all-reduce SGD, iteration %ld", t);
    double waited = hs_exec_now(d->x) - t0;
    for (int b = 0; b < a->nb; b++) {
        hs_tstatus_t st;
        int r = hs_exec_wait1(d->x, &a->bk[b].kick, tmo, HS_WAIT_NO_IDLE, &st);
        if (r < 0 && rc == 0) rc = r;
    }
    a->next = 0;
    a->lowest = d->n_glayers;
    if (rc < 0) return hs_dist_name_fenced(d, rc);
    /* A ring all-reduce moves 2 (n-1)/n of the buffer in and out of every rank. */
    uint64_t bytes = (uint64_t)(2.0 * (d->size - 1) / d->size * (double)(d->n * sizeof(float)));
    d->st.bytes_sent += bytes;
    d->st.bytes_recv += bytes;
    /* the service's reductions overlapped backward; what step waited for is the rest */
    d->st.comm_s += comm;
    d->st.wait_s += HS_MAX(0.0, waited - comm);
    return hs_dist_apply(d, 1.0);
}

/* Cut the gradient into buckets of about cap_bytes (whole layers, the last first), make a
 * plan per bucket with its own share of the tag range, and start the service. */
static int bk_init(hs_algo_t *a, const hs_allreduce_opts_t *base, double cap_bytes)
{
    hs_dist_t *d = a->d;
    int L = d->n_glayers;
    if (L < 1) return 0;
    a->bk = hs_calloc((size_t)L, sizeof *a->bk, "all-reduce buckets");
    if (!a->bk) return -ENOMEM;
    int end = L;
    double acc = 0;
    for (int l = L - 1; l >= 0; l--) {
        acc += (double)(d->glayer_off[l + 1] - d->glayer_off[l]) * sizeof(float);
        if (acc >= cap_bytes || l == 0) {
            ar_bucket_t *b = &a->bk[a->nb++];
            b->la = l;
            b->lb = end;
            b->lo = d->glayer_off[l];
            b->len = d->glayer_off[end] - b->lo;
            end = l;
            acc = 0;
        }
    }
    if (a->nb < 2) { /* one bucket is ready only when backward ends: the flat reduction */
        HS_FREE(a->bk);
        a->nb = 0;
        return 0;
    }
    uint32_t span = HS_ALLREDUCE_TAG_SPAN / (uint32_t)a->nb;
    for (int i = 0; i < a->nb; i++) {
        hs_allreduce_opts_t o = *base;
        o.tag_base = HS_ALLREDUCE_TAG_BASE + (uint32_t)i * span;
        o.tag_span = span;
        HS_TRY(hs_allreduce_create(&a->bk[i].ar, d->t, a->bk[i].len, &o));
    }
    a->lowest = L;
    int src = d->rank;
    uint32_t tag = hs_dist_tag(d, AR_TAG_BUCKET);
    hs_service_desc_t sd = {.name = "all-reduce buckets",
                            .n_slots = 1,
                            .slot_bytes = sizeof a->kick_buf,
                            .src = &src,
                            .tag = &tag,
                            .on_msg = bk_on_msg,
                            .ctx = a};
    HS_TRY(hs_svc_start(d->x, &sd, &a->svc));
    int rc = hs_dist_on_grads(d, bk_grads_ready, a);
    if (rc == -ENOSYS)
        HS_DEBUG("all-reduce SGD: no gradient-ready notifications: buckets reduced after backward");
    else if (rc < 0)
        return rc;
    if (d->rank == 0)
        HS_DEBUG("all-reduce SGD: %d buckets of about %.3g MiB over %d layers", a->nb,
                 cap_bytes / (1 << 20), L);
    return 0;
}

static int ar_step(hs_algo_t *a, long t)
{
    hs_dist_t *d = a->d;
    if (a->ef) {
        HS_TRY(efsgd_exchange(a->ef, t));
        return hs_dist_apply(d, 1.0);
    }
    if (a->nb) return bk_step(a, t);
    if (!a->ar) return hs_dist_apply(d, 1.0); /* one worker: its gradient is the average */
    double t0 = hs_exec_now(d->x);
    HS_TRY(hs_stage_pull(&a->gs));
    int rc = hs_allreduce_run(a->ar, hs_stage_host(&a->gs));
    if (rc < 0) {
        hs_error_prefix("all-reduce SGD, iteration %ld", t);
        return hs_dist_name_fenced(d, rc);
    }
    HS_TRY(hs_stage_push(&a->gs));
    /* A ring all-reduce moves 2 (n-1)/n of the buffer in and out of every rank. */
    uint64_t bytes = (uint64_t)(2.0 * (d->size - 1) / d->size * (double)(d->n * sizeof(float)));
    d->st.bytes_sent += bytes;
    d->st.bytes_recv += bytes;
    d->st.comm_s += hs_exec_now(d->x) - t0;
    return hs_dist_apply(d, 1.0);
}

/* --bucket-mb: not negative (0: one reduction after backward). */
static int ar_check(const hs_algo_opts_t *o, const hs_cfg_t *cfg, int ranks)
{
    (void)o;
    (void)ranks;
    const double mb = hs_cfg_double(cfg, "bucket-mb");
    if (!(mb >= 0))
        return HS_ERR(-EINVAL, "--bucket-mb %g: expected a size in MiB >= 0 (0: no buckets)", mb);
    hs_compress_spec_t cs;
    return hs_compress_parse(hs_cfg_str(cfg, "compress"), &cs);
}

static int ar_drain(hs_algo_t *a, int final)
{
    (void) final;
    return a->ef ? efsgd_drain(a->ef) : 0;
}

static void ar_finalize(hs_algo_t **ap)
{
    hs_algo_t *a = ap ? *ap : NULL;
    if (!a) return;
    if (a->bk) {
        (void)hs_dist_on_grads(a->d, NULL, NULL);
        hs_svc_stop(a->d->x, &a->svc);
        for (int i = 0; i < a->nb; i++) {
            if (a->bk[i].kick) hs_transport_req_free(a->d->t, &a->bk[i].kick);
            hs_allreduce_destroy(&a->bk[i].ar);
        }
        free(a->bk);
    }
    hs_allreduce_destroy(&a->ar);
    efsgd_destroy(&a->ef);
    if (a->shared) {
        (void)hs_dist_use_grads(a->d, NULL); /* the model's own buffer again */
        hs_transport_buf_free(a->d->t, (void **)&a->shared);
    }
    hs_stage_close(&a->gs);
    if (a->gbuf) hs_transport_buf_free(a->d->t, &a->gbuf);
    free(a);
    *ap = NULL;
}

static int ar_init(hs_algo_t **out, hs_dist_t *d)
{
    *out = NULL;
    hs_algo_t *a = hs_calloc(1, sizeof *a, "all-reduce SGD state");
    if (!a) return -ENOMEM;
    a->d = d;
    int rc;
    hs_compress_spec_t cs;
    if ((rc = hs_compress_parse(hs_dist_opt_str(d, "compress"), &cs)) < 0) goto fail;
    if (cs.kind != HS_COMPRESS_NONE && d->t && d->size > 1) { /* one worker: nothing to send */
        const double mb = hs_dist_opt_double(d, "bucket-mb");
        if ((rc = efsgd_create(&a->ef, d, mb * (1 << 20))) < 0) goto fail;
        *out = a;
        return 0;
    }
    hs_allreduce_opts_t ao;
    rc = hs_allreduce_opts_default(&ao);
    if (rc < 0) goto fail;
    ao.average = 1;
    ao.timeout_s = d->o->comm_timeout_s;
    ao.host_of = d->host_of;     /* ranks on several hosts: the hierarchical all-reduce */
    if (hs_dist_heartbeats(d)) { /* a frozen rank makes everyone wait until it is fenced */
        ao.patience = hs_dist_collective_patience;
        ao.patience_ctx = d;
    }
    /* a job of one rank opens no transport: nothing to reduce */
    if (d->t && d->size > 1 && (rc = hs_allreduce_create(&a->ar, d->t, d->n, &ao)) < 0) goto fail;
    /* The buffer the all-reduce runs on in shared memory where the transport has it. */
    int share = a->ar && hs_transport_has_peer_map(d->t);
    void *g = NULL;
    if (share && hs_transport_buf_alloc(d->t, d->n * sizeof(float), &g) < 0) {
        HS_DEBUG("all-reduce SGD: no shared gradient buffer (%s): the all-reduce copies",
                 hs_last_error());
        g = NULL;
    }
    /* The gradient moves there where the loop can keep it in host memory (CPU kernels);
     * elsewhere the shared buffer is its image. */
    if (g && hs_dist_use_grads(d, g) == 0) {
        a->shared = g;
        g = NULL;
    } else if (g) {
        HS_DEBUG("all-reduce SGD: the gradient stays where it is (%s)", hs_last_error());
    }
    if ((rc = hs_stage_image_in(&a->gs, d->k, d->grads, d->n, g, "gradient")) < 0) {
        if (g) hs_transport_buf_free(d->t, &g);
        goto fail;
    }
    if (g && hs_stage_host(&a->gs) == g)
        a->gbuf = g;
    else if (g)
        hs_transport_buf_free(d->t, &g);
    /* Buckets reduced during backward, each staged through its part of the image on a device
     * (the service's copies queue behind the backward kernels that wrote it) */
    const double bucket_mb = hs_dist_opt_double(d, "bucket-mb");
    if (a->ar && bucket_mb > 0) {
        if ((rc = bk_init(a, &ao, bucket_mb * (1 << 20))) < 0) goto fail;
        if (a->nb) hs_allreduce_destroy(&a->ar);
    }
    *out = a;
    return 0;
fail:
    ar_finalize(&a);
    return rc;
}

/* Checkpoint state: EF-SGD's error memory (none without --compress). */
static size_t ar_state_bytes(const hs_algo_t *a)
{
    return a->ef ? efsgd_state_bytes(a->ef) : 0;
}

static int ar_state_save(hs_algo_t *a, void *buf)
{
    return a->ef ? efsgd_state_save(a->ef, buf) : 0;
}

static int ar_state_load(hs_algo_t *a, const void *buf)
{
    return a->ef ? efsgd_state_load(a->ef, buf) : 0;
}

static const hs_option_t ar_options[] = {
    HS_COMPRESS_OPTION_ALL,
    {.name = "bucket-mb",
     .type = HS_OPT_DOUBLE,
     .def = "25",
     .range = "[0, 1048576]",
     .metavar = "MB",
     .help = "reduce the gradient in buckets of about MB MiB (consecutive layers, last first) "
             "while backward still runs, as PyTorch DDP (with --compress: EF-SGD compresses and "
             "sends each bucket on its own); 0: one reduction after backward"},
};

const hs_algo_ops_t hs_algo_allreduce_ops = {
    .size = sizeof(hs_algo_ops_t),
    .name = "allreduce",
    .help = "synchronous SGD: gradients averaged by a ring or direct all-reduce",
    .flags = HS_ALGO_COMM,
    .options = ar_options,
    .n_options = HS_ARRAY_LEN(ar_options),
    .init = ar_init,
    .step = ar_step,
    .drain = ar_drain,
    .finalize = ar_finalize,
    .state_bytes = ar_state_bytes,
    .state_save = ar_state_save,
    .state_load = ar_state_load,
    .check = ar_check,
    .msg_header = sizeof(hs_ps_hdr_v1_t), /* its wire header (--sim-payload) */
};
