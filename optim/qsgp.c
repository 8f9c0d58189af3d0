/*
 * optim/qsgp.c — compressed push-sum SGD on a static directed graph (`--algo qsgp
 * --compress SPEC`): Stochastic Gradient Push whose model shares travel compressed, with public
 * copies as in CHOCO-SGD, in the quantised push-sum form of Taheri, Mokhtari, Hassani and
 * Pedarsani (ICML 2020, "Quantized decentralized stochastic learning over directed graphs").
 *
 * Column-stochastic mixing P (uniform: p = 1 / (out-degree + 1)). Worker i keeps the numerator
 * x_i, the push-sum weight y_i (a double, never compressed: it travels exactly in the header)
 * and the public copy x^_i of its numerator, which its out-peers track too. Round t, with the
 * gradient g_i taken at z_i = x_i / y_i:
 *
 *     x_i <- x_i - lr g_i                  (the local optimizer's step on x, as --sgp-step x)
 *     q_i  = Q(x_i - x^_i)                 sent with the weight share p_ji y_i to each out-peer j
 *     x^_i <- x^_i + q_i                   (and every out-peer's copy of it)
 *     x_i <- x_i + gamma (sum_j p_ij x^_j - x^_i)  (j over the in-peers and i itself)
 *     y_i <- sum_j p_ij y_j                (exact)
 *     z_i  = x_i / y_i                     (where the next gradient is taken)
 *
 * Mass: sum_i x_i is unchanged by a round whatever Q does, because the columns of P sum to 1
 * (sum_i (sum_j p_ij x^_j - x^_i) = 0), and sum_i y_i = n; so the compression moves no mass,
 * it only delays it (what Q drops stays in x_i - x^_i and is sent later: error feedback). With
 * Q exact and gamma = 1, x^_i = x_i after the send and the round is plain push-sum x <- P x.
 * gamma (--consensus-step, CHOCO-SGD's consensus step size; the paper's update is gamma = 1)
 * defaults as for choco: 1 for fp16/bf16/int8, 0.05 for the sparsifiers, whose public copies
 * lag far behind the models (gamma = 1 with top-1 % diverged here: consensus distance 72).
 * Unlike optim/choco.c, which keeps one running sum of the copies, every worker keeps one
 * copy x^_j per in-peer, updated by the very float operations its owner applies to its own
 * (bit for bit the same), so the float rounding of the copies moves no mass either: with a
 * running sum the weighted mean drifted by 2e-5 of max |z| in 200 rounds. The numerators x_i
 * and the mixing sums are double: in float, rounding x_i + gamma s_i every round (large
 * steps with top-k, whose copies lag) drifted the weighted mean by 1.4e-6 to 5.8e-6; in double
 * the increments sum to zero up to 1e-16 of |x^|, and the test sees 4.5e-8 (the rounding of
 * the final z_i to float). The local step runs on a float image of x_i and x_i moves by its
 * exact change. The graph must be static: every out-peer must apply every q_i to its copy, and
 * Taheri et al.'s proof is for one fixed column-stochastic matrix; a time-varying graph such
 * as exp1peer is refused with that reason (--graph exp has all of its edges every round).
 * Synchronous rounds (each worker waits for its in-peers' round t, like --delay-bound 0,
 * through optim/neighbor_xchg.c); a failed peer stops the run with an error naming it. On a
 * device that is not the host, z_i is staged through a host image and the local step runs on a
 * device image of the float numerator (the compressors and x_i live on the host).
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
enum { QSGP_TAG_GOSSIP = 0 }; /* compressed push-sum shares */

struct hs_algo {
    hs_dist_t *d;
    size_t n, cap;
    int nout, nin, maxdeg;
    int *out, *in;        /* (maxdeg) out-peers, in-peers */
    double *pout, *pin;   /* (maxdeg) p_ji (share to out-peer j), p_ij (from in-peer j) */
    double self_p;        /* p_ii */
    double y, y_next;     /* push-sum weight; the next one as shares arrive */
    double gamma;         /* consensus step size */
    hs_compressor_t *c;   /* compresses x_i - x^_i */
    hs_compressor_t *dc;  /* decompresses the in-peers' q_j */
    double *x, *s;        /* (n) numerator (double: its sum over workers is the mass), scratch */
    float *xhat;          /* (n) public copy */
    hs_stage_t zs;        /* the host image of z */
    hs_stage_t xfs;       /* (n) the numerator in float for the local step: on the device, and
                           * its image */
    float **xin;          /* (maxdeg) (n) the in-peers' public copies x^_j */
    unsigned char **sbuf; /* (maxdeg) header + q_i per out-peer (the weight share differs) */
    hs_nx_t nx;           /* receive buffers (header + q_j) and requests; to = out, from = in */
};

/* An in-peer's q_j and weight share of round t: checked, then added to its copy x^_j. */
static int on_recv(void *ctx, int slot, const unsigned char *msg, const hs_tstatus_t *st, long t)
{
    hs_algo_t *a = ctx;
    hs_dist_t *d = a->d;
    const hs_ps_hdr_v1_t *h = (const hs_ps_hdr_v1_t *)msg;
    HS_TRY(hs_nx_check_compressed(&a->nx, h, st, a->n, t, 1));
    double t0 = hs_exec_now(d->x);
    hs_trace_apply_begin(d->x->trace, d->rank, msg, st); /* --trace */
    int rc = hs_decompress_add(a->dc, msg + sizeof *h, h->extra, 1.0f, a->xin[slot]);
    hs_trace_end(d->x->trace, HS_TR_APPLY);
    if (rc < 0) {
        hs_error_prefix("compressed push-sum: message from rank %d", st->source);
        return rc;
    }
    a->y_next += h->weight;
    d->st.comm_s += hs_exec_now(d->x) - t0;
    return 0;
}

static int qsgp_step(hs_algo_t *a, long t)
{
    hs_dist_t *d = a->d;
    const size_t n = a->n;
    double *restrict x = a->x, *restrict s = a->s;
    /* z where the host can write it: the model's image */
    float *restrict xh = a->xhat, *restrict xf = hs_stage_host(&a->xfs),
                    *restrict z = hs_stage_host(&a->zs);
    /* the local step on the float numerator; x moves by exactly the float step's change */
    for (size_t i = 0; i < n; i++) xf[i] = (float)x[i];
    HS_TRY(hs_stage_push(&a->xfs));
    HS_TRY(hs_dist_apply_to(d, hs_stage_dev(&a->xfs)));
    HS_TRY(hs_stage_pull(&a->xfs));
    for (size_t i = 0; i < n; i++) x[i] += (double)xf[i] - (double)(float)x[i];

    HS_TRY(hs_nx_wait_sends(&a->nx, t - 1));

    double t0 = hs_exec_now(d->x);
    HS_TRY(hs_nx_post_recvs(&a->nx, a->nin, hs_dist_tag(d, QSGP_TAG_GOSSIP)));
    /* q = Q(x - x^), into the first send buffer (z is free until the end of the round) */
    for (size_t i = 0; i < n; i++) z[i] = (float)(x[i] - (double)xh[i]);
    unsigned char *q0 = a->sbuf[0] + sizeof(hs_ps_hdr_v1_t);
    size_t qbytes = 0;
    HS_TRY(hs_compress(a->c, z, q0, &qbytes));
    for (int i = 0; i < a->nout; i++) {
        hs_ps_hdr_v1_t *h = (hs_ps_hdr_v1_t *)a->sbuf[i];
        hs_ps_hdr_init(h, HS_PS_COMPRESSED, d->rank, t, a->pout[i] * a->y, n);
        h->extra = (uint32_t)qbytes;
        if (i) memcpy(a->sbuf[i] + sizeof *h, q0, qbytes);
        HS_TRY(
            hs_nx_send(&a->nx, i, hs_dist_tag(d, QSGP_TAG_GOSSIP), a->sbuf[i], sizeof *h + qbytes));
    }
    HS_TRY(hs_decompress_add(a->c, q0, qbytes, 1.0f, xh));
    a->y_next = a->self_p * a->y;
    d->st.comm_s += hs_exec_now(d->x) - t0;

    HS_TRY(hs_nx_wait_recvs(&a->nx, a->nin, t, on_recv, a));

    t0 = hs_exec_now(d->x);
    a->y = a->y_next;
    const double inv = 1.0 / a->y, g = a->gamma;
    /* s = sum_j p_ij x^_j - x^_i (j over the in-peers and i), in double: the increments
     * gamma s_i sum to zero over the workers up to double rounding (1e-16 of |x^|), where float
     * sums left the mass drifting by 1e-6 of max |z| in 200 top-k rounds */
    const double ps = a->self_p - 1.0;
    for (size_t i = 0; i < n; i++) s[i] = ps * (double)xh[i];
    for (int j = 0; j < a->nin; j++) {
        const double p = a->pin[j];
        const float *restrict xj = a->xin[j];
        for (size_t i = 0; i < n; i++) s[i] += p * (double)xj[i];
    }
    for (size_t i = 0; i < n; i++) {
        x[i] += g * s[i];
        z[i] = (float)(x[i] * inv);
    }
    HS_TRY(hs_stage_push(&a->zs));
    d->st.comm_s += hs_exec_now(d->x) - t0;
    return 0;
}

static int qsgp_drain(hs_algo_t *a, int final)
{
    (void) final;
    return hs_nx_drain(&a->nx);
}

static void qsgp_finalize(hs_algo_t **ap)
{
    hs_algo_t *a = ap ? *ap : NULL;
    if (!a) return;
    hs_nx_finalize(&a->nx);
    for (int i = 0; i < a->maxdeg; i++) {
        if (a->sbuf) free(a->sbuf[i]);
        if (a->xin) free(a->xin[i]);
    }
    free(a->sbuf);
    free(a->xin);
    free(a->out);
    free(a->in);
    free(a->pout);
    free(a->pin);
    free(a->x);
    free(a->xhat);
    free(a->s);
    hs_stage_close(&a->zs);
    hs_stage_close(&a->xfs);
    hs_compressor_destroy(&a->c);
    hs_compressor_destroy(&a->dc);
    free(a);
    *ap = NULL;
}

static int qsgp_init(hs_algo_t **out, hs_dist_t *d)
{
    *out = NULL;
    if (!d->topo) return HS_ERR(-EINVAL, "--algo qsgp needs a graph (--graph)");
    if (hs_topo_period(d->topo) != 1)
        return HS_ERR(-EINVAL,
                      "--algo qsgp needs a static graph, and --graph %s changes every round: "
                      "every out-peer must apply every compressed update q_i to its copy of this "
                      "worker's public model (a peer that receives only some rounds' q_i holds a "
                      "wrong copy, and the mass is no longer conserved), and the convergence "
                      "proof of quantised push-sum (Taheri et al., ICML 2020) is for one fixed "
                      "column-stochastic mixing matrix; use --graph ring, exp or biring (exp "
                      "sends to all of exp1peer's peers every round), or --algo sgp",
                      hs_topo_spec(d->topo));
    hs_algo_t *a = hs_calloc(1, sizeof *a, "compressed push-sum state");
    if (!a) return -ENOMEM;
    a->d = d;
    a->n = d->n;
    a->y = 1.0;
    a->maxdeg = HS_MAX(1, HS_MAX(hs_topo_max_out_degree(d->topo), hs_topo_max_in_degree(d->topo)));
    /* --compress, else the products' precision (bf16 / fp16 messages), else none */
    const char *spec = hs_compress_or_precision(
        hs_dist_opt_given(d, "compress") ? hs_dist_opt_str(d, "compress") : NULL, d->k);
    uint64_t seed = 0x51534750ull ^ ((uint64_t)d->rank * 0x9e3779b97f4a7c15ull);
    int rc = hs_compressor_create(&a->c, spec, a->n, seed);
    if (rc < 0 || (rc = hs_compressor_create(&a->dc, spec, a->n, seed)) < 0) {
        hs_error_prefix("--algo qsgp");
        goto fail;
    }
    hs_dist_set_messages(d, hs_compressor_spec(a->c)->text);
    a->cap = sizeof(hs_ps_hdr_v1_t) + hs_compressor_max_bytes(a->c);
    if (hs_compressor_max_bytes(a->c) > UINT32_MAX) {
        rc = HS_ERR(-EINVAL,
                    "--algo qsgp: %zu bytes of compressed model do not fit a message "
                    "header's 32-bit length",
                    hs_compressor_max_bytes(a->c));
        goto fail;
    }
    hs_compress_kind_t kind = hs_compressor_spec(a->c)->kind;
    const double gamma = hs_dist_opt_double(d, "consensus-step");
    a->gamma = gamma > 0                                               ? gamma
               : kind == HS_COMPRESS_TOPK || kind == HS_COMPRESS_RANDK ? 0.05
                                                                       : 1.0;
    rc = -ENOMEM;
    const size_t m = (size_t)a->maxdeg;
    a->out = hs_calloc(m, sizeof *a->out, "out-peers");
    a->in = hs_calloc(m, sizeof *a->in, "in-peers");
    a->pout = hs_calloc(m, sizeof *a->pout, "weights");
    a->pin = hs_calloc(m, sizeof *a->pin, "weights");
    a->sbuf = hs_calloc(m, sizeof *a->sbuf, "send buffers");
    a->x = hs_malloc(a->n * sizeof *a->x, "numerator");
    a->xhat = hs_calloc(a->n, sizeof *a->xhat, "public copy");
    a->s = hs_calloc(a->n, sizeof *a->s, "scratch");
    a->xin = hs_calloc(m, sizeof *a->xin, "in-peers' copies");
    if (!a->out || !a->in || !a->pout || !a->pin || !a->sbuf || !a->x || !a->xhat || !a->s ||
        !a->xin)
        goto fail;
    /* the compressors and the double numerator live on the host: the model is staged through
     * its image, and the local step runs on the device side of xf */
    if ((rc = hs_stage_image(&a->zs, d->k, d->params, a->n, "model")) < 0 ||
        (rc = hs_stage_buffer(&a->xfs, d->k, a->n, "float numerator")) < 0)
        goto fail;
    rc = -ENOMEM;
    for (size_t i = 0; i < m; i++)
        if (!(a->sbuf[i] = hs_malloc(a->cap, "send buffer")) ||
            !(a->xin[i] = hs_calloc(a->n, sizeof(float), "in-peer's copy")))
            goto fail;
    if ((rc = hs_nx_init(&a->nx, d, "compressed push-sum", a->maxdeg, a->cap, a->out, a->in)) < 0)
        goto fail;
    rc = -ENOMEM;
    if ((rc = hs_topo_out_peers(d->topo, 0, d->rank, a->out, a->pout, a->maxdeg, &a->nout,
                                &a->self_p)) < 0 ||
        (rc = hs_topo_in_peers(d->topo, 0, d->rank, a->in, a->pin, a->maxdeg, &a->nin)) < 0)
        goto fail;
    rc = -ENOMEM;
    if (a->nout < 1) {
        rc = HS_ERR(-EINVAL, "--algo qsgp: rank %d has no out-peer in --graph %s", d->rank,
                    hs_topo_spec(d->topo));
        goto fail;
    }
    if ((rc = hs_stage_pull(&a->zs)) < 0) goto fail;
    const float *z0 = hs_stage_host(&a->zs);
    for (size_t i = 0; i < a->n; i++) a->x[i] = z0[i]; /* y = 1: x = z */
    if (d->rank == 0) {
        char line[256];
        snprintf(line, sizeof line,
                 "qsgp: compressed push-sum, --compress %s, consensus step %g, %zu of %zu bytes "
                 "per message",
                 hs_compressor_spec(a->c)->text, a->gamma, a->cap, a->n * sizeof(float));
        hs_dist_record(d, NULL, NULL, line);
    }
    *out = a;
    return 0;
fail:
    qsgp_finalize(&a);
    return rc;
}

static double qsgp_weight(const hs_algo_t *a)
{
    return a->y;
}

/* Checkpoint state: y, x (n doubles), then x^_i and the maxdeg in-peers' copies (n floats). */
static size_t qsgp_state_bytes(const hs_algo_t *a)
{
    return sizeof(double) * (1 + a->n) + (1 + (size_t)a->maxdeg) * a->n * sizeof(float);
}

static int qsgp_state_save(hs_algo_t *a, void *buf)
{
    unsigned char *p = buf;
    const size_t b = a->n * sizeof(float), bx = a->n * sizeof(double);
    memcpy(p, &a->y, sizeof a->y);
    p += sizeof a->y;
    memcpy(p, a->x, bx);
    p += bx;
    memcpy(p, a->xhat, b);
    for (int j = 0; j < a->maxdeg; j++) memcpy(p + (1 + (size_t)j) * b, a->xin[j], b);
    return 0;
}

static int qsgp_state_load(hs_algo_t *a, const void *buf)
{
    const unsigned char *p = buf;
    const size_t b = a->n * sizeof(float), bx = a->n * sizeof(double);
    memcpy(&a->y, p, sizeof a->y);
    p += sizeof a->y;
    memcpy(a->x, p, bx);
    p += bx;
    memcpy(a->xhat, p, b);
    for (int j = 0; j < a->maxdeg; j++) memcpy(a->xin[j], p + (1 + (size_t)j) * b, b);
    return 0;
}

/* --compress parses (before the job starts). */
static int qsgp_check(const hs_algo_opts_t *o, const hs_cfg_t *cfg, int ranks)
{
    (void)o;
    (void)ranks;
    hs_compress_spec_t s;
    return hs_compress_parse(hs_cfg_str(cfg, "compress"), &s);
}

static const hs_option_t qsgp_options[] = {
    HS_COMPRESS_OPTION_ALL,
    {.name = "consensus-step",
     .type = HS_OPT_DOUBLE,
     .def = "0",
     .range = "[0, 1]",
     .metavar = "GAMMA",
     .help = "consensus step size gamma (0: 1 for fp16/bf16/int8/none, 0.05 for topk/randk)"},
};

const hs_algo_ops_t hs_algo_qsgp_ops = {
    .size = sizeof(hs_algo_ops_t),
    .name = "qsgp",
    .help = "compressed push-sum SGD (--compress) on a static directed graph, exact weights",
    .flags = HS_ALGO_GRAPH | HS_ALGO_COMM,
    .default_graph = "ring",
    .options = qsgp_options,
    .n_options = HS_ARRAY_LEN(qsgp_options),
    .check = qsgp_check,
    .init = qsgp_init,
    .step = qsgp_step,
    .drain = qsgp_drain,
    .finalize = qsgp_finalize,
    .weight = qsgp_weight,
    .state_bytes = qsgp_state_bytes,
    .state_save = qsgp_state_save,
    .state_load = qsgp_state_load,
    .msg_header = sizeof(hs_ps_hdr_v1_t), /* its wire header (--sim-payload) */
};
