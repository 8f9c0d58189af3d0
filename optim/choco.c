/*
 * optim/choco.c — CHOCO-SGD (Koloskova, Stich, Jaggi, ICML 2019, Algorithm 2): D-PSGD with
 * compressed communication, on a static undirected graph with Metropolis weights W.
 *
 * Every worker i keeps its model x_i and public copies x^_j of itself and its neighbours, the
 * copies every holder of them agrees on because they only ever change by the compressed
 * messages everybody receives. Round t:
 *
 *     x_i <- x_i - lr g_i                           (the local step, hs_dist_apply)
 *     q_i  = Q(x_i - x^_i)                          (compressed: what the copies miss)
 *     send q_i to every neighbour, receive q_j
 *     x^_j <- x^_j + q_j   for j in N(i) and i      (every holder of a copy)
 *     x_i <- x_i + gamma sum_j W_ij (x^_j - x^_i)   (the consensus step, gamma = --consensus-step)
 *
 * Since the rows of W sum to 1, sum_j W_ij (x^_j - x^_i) = s_i - x^_i with s_i = sum_j W_ij x^_j
 * (the self term included), so a worker keeps two vectors, x^_i and s_i, instead of one copy
 * per neighbour: s_i += W_ij q_j for every message (a rewrite of the paper's update that
 * saves the per-neighbour copies). Both start at 0. What Q drops now is in x_i - x^_i and is sent
 * later: that is the error feedback that lets biased compressors (top-k) converge. The weights must
 * not change between rounds (s_i sums them over time), so time-varying graphs are refused.
 *
 * Messages: hs_ps_hdr_v1_t of kind HS_PS_COMPRESSED (length = n, extra = the compressed bytes)
 * then the compressed q_i, on tag CHOCO_TAG_NEIGHBOR, one per neighbour and round; a neighbour
 * cannot be more than one round ahead (it needs this rank's round-t message to finish round t), as
 * in D-PSGD. A failed neighbour stops the run with an error naming it.
 *
 * x_i, x^_i and s_i live where the model does (the kernels' memory): the vector arithmetic runs
 * as kernel ops and the compressors are bound to the device (hs_compress_dev), so on a GPU only
 * the compressed bytes cross to the host (top-k, which selects on the host, also copies x_i -
 * x^_i there).
 */
#include "hearsay/algo.h"
#include "hearsay/common.h"
#include "hearsay/compress.h"
#include "optim/neighbor_xchg.h"
#include "optim/ps_wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Message tags (offsets in the algorithm's range, hs_dist_tag). */
enum { CHOCO_TAG_NEIGHBOR = 0 }; /* neighbour exchange of q_i */

/* The consensus step size when --consensus-step is 0: with (nearly) exact compressors CHOCO
 * with gamma = 1 is D-PSGD; a sparsifier sends 1-10 % of the entries per round and needs a
 * smaller step (measured: docs/algorithms.md, "CHOCO-SGD"). */
#define CHOCO_GAMMA_DENSE  1.0
#define CHOCO_GAMMA_SPARSE 0.05

struct hs_algo {
    hs_dist_t *d;
    size_t n, max_bytes, msg_cap;
    double gamma, self_w;
    int maxdeg, cnt;
    int *peers;          /* (maxdeg) */
    double *wts;         /* (maxdeg) Metropolis weights W_ij */
    hs_compressor_t *q;  /* compresses x_i - x^_i */
    hs_compressor_t *dq; /* decompresses the neighbours' q_j (same spec and n) */
    float *xhat;         /* (n, device) x^_i, the public copy of this worker's model */
    float *s;            /* (n, device) s_i = sum_j W_ij x^_j over j in N(i) and i */
    float *diff;         /* (n, device) x_i - x^_i, then s_i - x^_i */
    unsigned char *sbuf; /* header + q_i, shared by every neighbour's send */
    hs_nx_t nx;          /* receive buffers (header + q_j) and requests, per neighbour */
};

/* A neighbour's q_j of round t: checked, then folded into s as it arrives. */
static int on_recv(void *ctx, int slot, const unsigned char *msg, const hs_tstatus_t *st, long t)
{
    hs_algo_t *a = ctx;
    hs_dist_t *d = a->d;
    const hs_ps_hdr_v1_t *h = (const hs_ps_hdr_v1_t *)msg;
    HS_TRY(hs_nx_check_compressed(&a->nx, h, st, a->n, t, 0));
    double t0 = hs_exec_now(d->x);
    hs_trace_apply_begin(d->x->trace, d->rank, msg, st); /* --trace */
    int rc = hs_decompress_add_dev(a->dq, msg + sizeof *h, h->extra, (float)a->wts[slot], a->s);
    hs_trace_end(d->x->trace, HS_TR_APPLY);
    if (rc < 0) {
        hs_error_prefix("CHOCO-SGD: message from rank %d", st->source);
        return rc;
    }
    d->st.comm_s += hs_exec_now(d->x) - t0;
    return 0;
}

/* (n, device) out = x - y */
static int sub_dev(hs_kernels_t *k, size_t n, float *out, const float *x, const float *y)
{
    HS_TRY(k->ops->copy(k, out, x, n * sizeof(float)));
    return k->ops->axpy(k, n, -1.0f, y, out);
}

static int choco_step(hs_algo_t *a, long t)
{
    hs_dist_t *d = a->d;
    hs_kernels_t *k = d->k;
    float *x = d->params;
    HS_TRY(hs_dist_apply(d, 1.0));

    /* the previous round's sends must be done before the buffer is overwritten */
    HS_TRY(hs_nx_wait_sends(&a->nx, t - 1));

    double t0 = hs_exec_now(d->x);
    HS_TRY(hs_nx_post_recvs(&a->nx, a->cnt, hs_dist_tag(d, CHOCO_TAG_NEIGHBOR)));
    hs_ps_hdr_v1_t *h = (hs_ps_hdr_v1_t *)a->sbuf;
    unsigned char *q = a->sbuf + sizeof *h;
    size_t qbytes = 0;
    HS_TRY(sub_dev(k, a->n, a->diff, x, a->xhat));
    HS_TRY(hs_compress_dev(a->q, a->diff, q, &qbytes));
    hs_ps_hdr_init(h, HS_PS_COMPRESSED, d->rank, t, 1.0, a->n);
    h->extra = (uint32_t)qbytes;
    for (int i = 0; i < a->cnt; i++)
        HS_TRY(
            hs_nx_send(&a->nx, i, hs_dist_tag(d, CHOCO_TAG_NEIGHBOR), a->sbuf, sizeof *h + qbytes));
    /* this worker's own copy, and its term in s, while the messages travel (the compressed
     * q_i is still where the vectors are) */
    HS_TRY(hs_decompress_add_dev(a->q, NULL, 0, 1.0f, a->xhat));
    HS_TRY(hs_decompress_add_dev(a->q, NULL, 0, (float)a->self_w, a->s));
    d->st.comm_s += hs_exec_now(d->x) - t0;

    HS_TRY(hs_nx_wait_recvs(&a->nx, a->cnt, t, on_recv, a));

    /* the consensus step: x += gamma (s - xhat) */
    t0 = hs_exec_now(d->x);
    HS_TRY(sub_dev(k, a->n, a->diff, a->s, a->xhat));
    HS_TRY(k->ops->axpy(k, a->n, (float)a->gamma, a->diff, x));
    d->st.comm_s += hs_exec_now(d->x) - t0;
    return 0;
}

static int choco_drain(hs_algo_t *a, int final)
{
    (void) final;
    return hs_nx_drain(&a->nx);
}

static void choco_finalize(hs_algo_t **ap)
{
    hs_algo_t *a = ap ? *ap : NULL;
    if (!a) return;
    hs_nx_finalize(&a->nx);
    free(a->sbuf);
    free(a->peers);
    free(a->wts);
    if (a->d) {
        hs_kernels_t *k = a->d->k;
        k->ops->free(k, a->xhat);
        k->ops->free(k, a->s);
        k->ops->free(k, a->diff);
    }
    hs_compressor_destroy(&a->q);
    hs_compressor_destroy(&a->dq);
    free(a);
    *ap = NULL;
}

/* gamma: the flag, or the compressor's default. */
static double choco_gamma(const hs_dist_t *d, const hs_compress_spec_t *s)
{
    if (hs_dist_opt_double(d, "consensus-step") > 0) return hs_dist_opt_double(d, "consensus-step");
    return s->kind == HS_COMPRESS_TOPK || s->kind == HS_COMPRESS_RANDK ? CHOCO_GAMMA_SPARSE
                                                                       : CHOCO_GAMMA_DENSE;
}

static int choco_init(hs_algo_t **out, hs_dist_t *d)
{
    *out = NULL;
    if (!d->topo) return HS_ERR(-EINVAL, "CHOCO-SGD needs a graph (--graph)");
    if (!hs_topo_undirected(d->topo))
        return HS_ERR(-EINVAL,
                      "--algo choco needs an undirected graph, and --graph %s is directed "
                      "(try biring, torus, hypercube or complete)",
                      hs_topo_spec(d->topo));
    if (hs_topo_period(d->topo) != 1)
        return HS_ERR(-EINVAL,
                      "--algo choco needs a static graph (its running sum of the neighbours' "
                      "copies assumes fixed weights), and --graph %s changes every round",
                      hs_topo_spec(d->topo));
    hs_algo_t *a = hs_calloc(1, sizeof *a, "CHOCO-SGD state");
    if (!a) return -ENOMEM;
    a->d = d;
    a->n = d->n;
    a->maxdeg = HS_MAX(1, hs_topo_max_out_degree(d->topo));
    /* --compress, else the products' precision (bf16 / fp16 messages), else none */
    const char *spec = hs_compress_or_precision(
        hs_dist_opt_given(d, "compress") ? hs_dist_opt_str(d, "compress") : NULL, d->k);
    /* the seed of the rounding / sampling stream: per rank, fixed (runs repeat) */
    uint64_t seed = 0x43484f43ull ^ ((uint64_t)d->rank * 0x9e3779b97f4a7c15ull);
    int rc = hs_compressor_create(&a->q, spec, a->n, seed);
    if (rc < 0 || (rc = hs_compressor_create(&a->dq, spec, a->n, seed)) < 0 ||
        (rc = hs_compressor_bind(a->q, d->k)) < 0 || (rc = hs_compressor_bind(a->dq, d->k)) < 0) {
        hs_error_prefix("--algo choco");
        goto fail;
    }
    a->gamma = choco_gamma(d, hs_compressor_spec(a->q));
    hs_dist_set_messages(d, hs_compressor_spec(a->q)->text);
    a->max_bytes = hs_compressor_max_bytes(a->q);
    if (a->max_bytes > UINT32_MAX) {
        rc = HS_ERR(-EINVAL,
                    "%s: %zu bytes of compressed model do not fit a message header's "
                    "32-bit length (use a smaller --model or a stronger --compress)",
                    "--algo choco", a->max_bytes);
        goto fail;
    }
    a->msg_cap = sizeof(hs_ps_hdr_v1_t) + a->max_bytes;
    rc = -ENOMEM;
    a->peers = hs_calloc((size_t)a->maxdeg, sizeof *a->peers, "neighbours");
    a->wts = hs_calloc((size_t)a->maxdeg, sizeof *a->wts, "weights");
    a->sbuf = hs_malloc(a->msg_cap, "send buffer");
    if (!a->peers || !a->wts || !a->sbuf) goto fail;
    /* x^_i, s_i (both from 0) and the difference, where the model is */
    hs_kernels_t *k = d->k;
    const size_t nb = a->n * sizeof(float);
    if ((rc = k->ops->alloc(k, nb, (void **)&a->xhat)) < 0 ||
        (rc = k->ops->alloc(k, nb, (void **)&a->s)) < 0 ||
        (rc = k->ops->alloc(k, nb, (void **)&a->diff)) < 0 ||
        (rc = k->ops->zero(k, a->xhat, nb)) < 0 || (rc = k->ops->zero(k, a->s, nb)) < 0) {
        hs_error_prefix("--algo choco: the public copies");
        goto fail;
    }
    if ((rc = hs_nx_init(&a->nx, d, "CHOCO-SGD", a->maxdeg, a->msg_cap, a->peers, a->peers)) < 0)
        goto fail;
    if ((rc = hs_topo_out_peers(d->topo, 0, d->rank, a->peers, a->wts, a->maxdeg, &a->cnt,
                                &a->self_w)) < 0)
        goto fail;
    if (d->rank == 0) {
        char line[256];
        snprintf(line, sizeof line,
                 "choco: --compress %s, consensus step %g, %zu of %zu bytes per message",
                 hs_compressor_spec(a->q)->text, a->gamma, a->msg_cap, a->n * sizeof(float));
        hs_dist_record(d, NULL, NULL, line);
    }
    *out = a;
    return 0;
fail:
    choco_finalize(&a);
    return rc;
}

static int choco_check(const hs_algo_opts_t *o, const hs_cfg_t *cfg, int ranks)
{
    (void)o;
    (void)ranks;
    hs_compress_spec_t s;
    HS_TRY(hs_compress_parse(hs_cfg_str(cfg, "compress"), &s));
    const double g = hs_cfg_double(cfg, "consensus-step");
    if (g < 0 || g > 1)
        return HS_ERR(-EINVAL, "--consensus-step must be in (0, 1] (0: the default), got %g", g);
    return 0;
}

static const hs_option_t choco_options[] = {
    HS_COMPRESS_OPTION_ALL,
    {.name = "consensus-step",
     .type = HS_OPT_DOUBLE,
     .def = "0",
     .range = "[0, 1]",
     .metavar = "GAMMA",
     .help = "consensus step size gamma (0: 1 for fp16/bf16/int8/none, 0.05 for topk/randk)"},
};

/* Checkpoint state: x^_i and s_i (2 n floats). */
static size_t choco_state_bytes(const hs_algo_t *a)
{
    return 2 * a->n * sizeof(float);
}

static int choco_state_save(hs_algo_t *a, void *buf)
{
    hs_kernels_t *k = a->d->k;
    const size_t nb = a->n * sizeof(float);
    HS_TRY(k->ops->to_host(k, buf, a->xhat, nb));
    return k->ops->to_host(k, (char *)buf + nb, a->s, nb);
}

static int choco_state_load(hs_algo_t *a, const void *buf)
{
    hs_kernels_t *k = a->d->k;
    const size_t nb = a->n * sizeof(float);
    HS_TRY(k->ops->to_device(k, a->xhat, buf, nb));
    return k->ops->to_device(k, a->s, (const char *)buf + nb, nb);
}

const hs_algo_ops_t hs_algo_choco_ops = {
    .size = sizeof(hs_algo_ops_t),
    .name = "choco",
    .help = "CHOCO-SGD: D-PSGD with compressed messages (--compress) and public copies",
    .flags = HS_ALGO_GRAPH | HS_ALGO_UNDIRECTED | HS_ALGO_COMM,
    .default_graph = "biring",
    .options = choco_options,
    .n_options = HS_ARRAY_LEN(choco_options),
    .init = choco_init,
    .step = choco_step,
    .drain = choco_drain,
    .finalize = choco_finalize,
    .state_bytes = choco_state_bytes,
    .state_save = choco_state_save,
    .state_load = choco_state_load,
    .check = choco_check,
    .msg_header = sizeof(hs_ps_hdr_v1_t), /* its wire header (--sim-payload) */
};
