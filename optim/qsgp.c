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
 * running sum the weighted mean drifted by 2e-5 of max |z| in 200 rounds. The graph must be
 * static (the out-peers keep the copies). Synchronous rounds (each worker waits for its in-peers'
 * round t, like
 * --delay-bound 0); a failed peer stops the run with an error naming it.
 */
#include "hearsay/algo.h"
#include "hearsay/common.h"
#include "hearsay/compress.h"
#include "optim/ps_wire.h"

#include <stdlib.h>
#include <string.h>

struct hs_algo {
    hs_dist_t *d;
    size_t n, cap;
    int nout, nin, maxdeg;
    int *out, *in;        /* (maxdeg) out-peers, in-peers */
    double *pout, *pin;   /* (maxdeg) p_ji (share to out-peer j), p_ij (from in-peer j) */
    double self_p;        /* p_ii */
    double y, y_next;     /* push-sum weight; the next one as shares arrive */
    float gamma;          /* consensus step size */
    hs_compressor_t *c;   /* compresses x_i - x^_i */
    hs_compressor_t *dc;  /* decompresses the in-peers' q_j */
    float *x, *xhat, *s;  /* (n) numerator, public copy, (n) scratch */
    float **xin;          /* (maxdeg) (n) the in-peers' public copies x^_j */
    unsigned char **sbuf; /* (maxdeg) header + q_i per out-peer (the weight share differs) */
    unsigned char **rbuf; /* (maxdeg) header + q_j */
    hs_treq_t **sreq, **rreq;
    int nsend;
};

static int wait_all(hs_algo_t *a, hs_treq_t **reqs, int n, long t, int recv)
{
    hs_dist_t *d = a->d;
    for (;;) {
        int left = 0;
        for (int i = 0; i < n; i++) left += reqs[i] != NULL;
        if (!left) return 0;
        int idx = -1;
        hs_tstatus_t st;
        int rc = hs_exec_wait(d->x, reqs, n, d->o->comm_timeout_s, 0, &idx, &st);
        if (rc < 0) {
            if (idx >= 0) hs_dist_peer_failed(d, (recv ? a->in : a->out)[idx], t, hs_last_error());
            hs_error_prefix("compressed push-sum round %ld, %s", t, recv ? "receive" : "send");
            return rc;
        }
        if (!recv || idx < 0) continue;
        const hs_ps_hdr_v1_t *h = (const hs_ps_hdr_v1_t *)a->rbuf[idx];
        if (st.len < sizeof *h || h->magic != HS_PS_MAGIC || h->version != HS_PS_VERSION ||
            h->kind != HS_PS_COMPRESSED || h->sender != st.source || h->length != a->n ||
            h->extra != st.len - sizeof *h || !(h->weight >= 0))
            return HS_ERR(-EPROTO,
                          "compressed push-sum: rank %d got a malformed message of %zu bytes "
                          "from rank %d (do all ranks run the same --model and --compress?)",
                          d->rank, st.len, st.source);
        if (h->iteration != t)
            return HS_ERR(-EPROTO,
                          "compressed push-sum: rank %d got round %lld from rank %d in "
                          "round %ld",
                          d->rank, (long long)h->iteration, st.source, t);
        double t0 = hs_exec_now(d->x);
        hs_trace_apply_begin(d->x->trace, d->rank, a->rbuf[idx], &st); /* --trace */
        rc = hs_decompress_add(a->dc, a->rbuf[idx] + sizeof *h, h->extra, 1.0f, a->xin[idx]);
        hs_trace_end(d->x->trace, HS_TR_APPLY);
        if (rc < 0) {
            hs_error_prefix("compressed push-sum: message from rank %d", st.source);
            return rc;
        }
        a->y_next += h->weight;
        d->st.comm_s += hs_exec_now(d->x) - t0;
        d->st.bytes_recv += st.len;
        d->st.msgs_applied++;
    }
}

static int qsgp_step(hs_algo_t *a, long t)
{
    hs_dist_t *d = a->d;
    const size_t n = a->n;
    float *restrict x = a->x, *restrict xh = a->xhat, *restrict s = a->s, *restrict z = d->params;
    HS_TRY(hs_dist_apply_to(d, x));

    double t0 = hs_exec_now(d->x);
    HS_TRY(wait_all(a, a->sreq, a->nsend, t - 1, 0));
    d->st.wait_s += hs_exec_now(d->x) - t0;

    t0 = hs_exec_now(d->x);
    for (int i = 0; i < a->nin; i++)
        HS_TRY(hs_transport_irecv(d->t, a->in[i], HS_TAG_GOSSIP, a->rbuf[i], a->cap, &a->rreq[i]));
    /* q = Q(x - x^), into the first send buffer (z is free until the end of the round) */
    for (size_t i = 0; i < n; i++) z[i] = x[i] - xh[i];
    unsigned char *q0 = a->sbuf[0] + sizeof(hs_ps_hdr_v1_t);
    size_t qbytes = 0;
    HS_TRY(hs_compress(a->c, z, q0, &qbytes));
    for (int i = 0; i < a->nout; i++) {
        hs_ps_hdr_v1_t *h = (hs_ps_hdr_v1_t *)a->sbuf[i];
        hs_ps_hdr_init(h, HS_PS_COMPRESSED, d->rank, t, a->pout[i] * a->y, n);
        h->extra = (uint32_t)qbytes;
        if (i) memcpy(a->sbuf[i] + sizeof *h, q0, qbytes);
        HS_TRY(hs_transport_isend(d->t, a->out[i], HS_TAG_GOSSIP, a->sbuf[i], sizeof *h + qbytes,
                                  &a->sreq[i]));
        d->st.bytes_sent += sizeof *h + qbytes;
    }
    a->nsend = a->nout;
    HS_TRY(hs_decompress_add(a->c, q0, qbytes, 1.0f, xh));
    a->y_next = a->self_p * a->y;
    d->st.comm_s += hs_exec_now(d->x) - t0;

    t0 = hs_exec_now(d->x);
    double c0 = d->st.comm_s;
    HS_TRY(wait_all(a, a->rreq, a->nin, t, 1));
    d->st.wait_s += hs_exec_now(d->x) - t0 - (d->st.comm_s - c0);

    t0 = hs_exec_now(d->x);
    a->y = a->y_next;
    const float inv = (float)(1.0 / a->y);
    /* s = sum_j p_ij x^_j - x^_i (j over the in-peers and i) */
    const float ps = (float)(a->self_p - 1.0);
    for (size_t i = 0; i < n; i++) s[i] = ps * xh[i];
    for (int j = 0; j < a->nin; j++) {
        const float p = (float)a->pin[j], *restrict xj = a->xin[j];
        for (size_t i = 0; i < n; i++) s[i] += p * xj[i];
    }
    size_t b = 0;
    for (; b + 16 <= n; b += 16)
        for (size_t i = b; i < b + 16; i++) {
            x[i] += a->gamma * s[i];
            z[i] = x[i] * inv;
        }
    for (; b < n; b++) {
        x[b] += a->gamma * s[b];
        z[b] = x[b] * inv;
    }
    d->st.comm_s += hs_exec_now(d->x) - t0;
    return 0;
}

static int qsgp_drain(hs_algo_t *a, int final)
{
    (void) final;
    hs_dist_t *d = a->d;
    double t0 = hs_exec_now(d->x);
    int rc = wait_all(a, a->sreq, a->nsend, d->iter, 0);
    a->nsend = 0;
    d->st.wait_s += hs_exec_now(d->x) - t0;
    return rc;
}

static void qsgp_finalize(hs_algo_t **ap)
{
    hs_algo_t *a = ap ? *ap : NULL;
    if (!a) return;
    hs_dist_t *d = a->d;
    for (int i = 0; i < a->maxdeg; i++) {
        if (a->sreq && a->sreq[i]) hs_transport_req_free(d->t, &a->sreq[i]);
        if (a->rreq && a->rreq[i]) hs_transport_req_free(d->t, &a->rreq[i]);
        if (a->rbuf) free(a->rbuf[i]);
        if (a->sbuf) free(a->sbuf[i]);
        if (a->xin) free(a->xin[i]);
    }
    free(a->sreq);
    free(a->rreq);
    free(a->rbuf);
    free(a->sbuf);
    free(a->xin);
    free(a->out);
    free(a->in);
    free(a->pout);
    free(a->pin);
    free(a->x);
    free(a->xhat);
    free(a->s);
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
                      "--algo qsgp needs a static graph (the out-peers keep a copy of this "
                      "worker's model, and the running sum of copies assumes fixed weights), and "
                      "--graph %s changes every round (try ring, exp or biring)",
                      hs_topo_spec(d->topo));
    if (d->k->device != HS_DEV_CPU)
        return HS_ERR(-EINVAL, "--algo qsgp runs on --device cpu only (the compressors work on "
                               "host memory)");
    hs_algo_t *a = hs_calloc(1, sizeof *a, "compressed push-sum state");
    if (!a) return -ENOMEM;
    a->d = d;
    a->n = d->n;
    a->y = 1.0;
    a->maxdeg = HS_MAX(1, HS_MAX(hs_topo_max_out_degree(d->topo), hs_topo_max_in_degree(d->topo)));
    const char *spec = d->o->compress ? d->o->compress : "none";
    uint64_t seed = 0x51534750ull ^ ((uint64_t)d->rank * 0x9e3779b97f4a7c15ull);
    int rc = hs_compressor_create(&a->c, spec, a->n, seed);
    if (rc < 0 || (rc = hs_compressor_create(&a->dc, spec, a->n, seed)) < 0) {
        hs_error_prefix("--algo qsgp");
        goto fail;
    }
    a->cap = sizeof(hs_ps_hdr_v1_t) + hs_compressor_max_bytes(a->c);
    if (hs_compressor_max_bytes(a->c) > UINT32_MAX) {
        rc = HS_ERR(-EINVAL,
                    "--algo qsgp: %zu bytes of compressed model do not fit a message "
                    "header's 32-bit length",
                    hs_compressor_max_bytes(a->c));
        goto fail;
    }
    hs_compress_kind_t kind = hs_compressor_spec(a->c)->kind;
    a->gamma = d->o->consensus_step > 0                                ? (float)d->o->consensus_step
               : kind == HS_COMPRESS_TOPK || kind == HS_COMPRESS_RANDK ? 0.05f
                                                                       : 1.0f;
    rc = -ENOMEM;
    const size_t m = (size_t)a->maxdeg;
    a->out = hs_calloc(m, sizeof *a->out, "out-peers");
    a->in = hs_calloc(m, sizeof *a->in, "in-peers");
    a->pout = hs_calloc(m, sizeof *a->pout, "weights");
    a->pin = hs_calloc(m, sizeof *a->pin, "weights");
    a->sreq = hs_calloc(m, sizeof *a->sreq, "send requests");
    a->rreq = hs_calloc(m, sizeof *a->rreq, "receive requests");
    a->sbuf = hs_calloc(m, sizeof *a->sbuf, "send buffers");
    a->rbuf = hs_calloc(m, sizeof *a->rbuf, "receive buffers");
    a->x = hs_malloc(a->n * sizeof *a->x, "numerator");
    a->xhat = hs_calloc(a->n, sizeof *a->xhat, "public copy");
    a->s = hs_calloc(a->n, sizeof *a->s, "scratch");
    a->xin = hs_calloc(m, sizeof *a->xin, "in-peers' copies");
    if (!a->out || !a->in || !a->pout || !a->pin || !a->sreq || !a->rreq || !a->sbuf || !a->rbuf ||
        !a->x || !a->xhat || !a->s || !a->xin)
        goto fail;
    for (size_t i = 0; i < m; i++)
        if (!(a->sbuf[i] = hs_malloc(a->cap, "send buffer")) ||
            !(a->rbuf[i] = hs_malloc(a->cap, "receive buffer")) ||
            !(a->xin[i] = hs_calloc(a->n, sizeof(float), "in-peer's copy")))
            goto fail;
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
    memcpy(a->x, d->params, a->n * sizeof *a->x); /* y = 1: x = z */
    if (d->rank == 0) {
        char line[256];
        snprintf(line, sizeof line,
                 "qsgp: compressed push-sum, --compress %s, consensus step %g, %zu of %zu bytes "
                 "per message",
                 hs_compressor_spec(a->c)->text, (double)a->gamma, a->cap, a->n * sizeof(float));
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

/* Checkpoint state: y, then x, x^_i and the maxdeg in-peers' copies. */
static size_t qsgp_state_bytes(const hs_algo_t *a)
{
    return sizeof(double) + (2 + (size_t)a->maxdeg) * a->n * sizeof(float);
}

static int qsgp_state_save(hs_algo_t *a, void *buf)
{
    unsigned char *p = buf;
    const size_t b = a->n * sizeof(float);
    memcpy(p, &a->y, sizeof a->y);
    memcpy(p + sizeof a->y, a->x, b);
    memcpy(p + sizeof a->y + b, a->xhat, b);
    for (int j = 0; j < a->maxdeg; j++) memcpy(p + sizeof a->y + (2 + (size_t)j) * b, a->xin[j], b);
    return 0;
}

static int qsgp_state_load(hs_algo_t *a, const void *buf)
{
    const unsigned char *p = buf;
    const size_t b = a->n * sizeof(float);
    memcpy(&a->y, p, sizeof a->y);
    memcpy(a->x, p + sizeof a->y, b);
    memcpy(a->xhat, p + sizeof a->y + b, b);
    for (int j = 0; j < a->maxdeg; j++) memcpy(a->xin[j], p + sizeof a->y + (2 + (size_t)j) * b, b);
    return 0;
}

const hs_algo_ops_t hs_algo_qsgp_ops = {
    .size = sizeof(hs_algo_ops_t),
    .name = "qsgp",
    .help = "compressed push-sum SGD (--compress) on a static directed graph, exact weights",
    .flags = HS_ALGO_GRAPH | HS_ALGO_COMM | HS_ALGO_COMPRESS,
    .default_graph = "ring",
    .init = qsgp_init,
    .step = qsgp_step,
    .drain = qsgp_drain,
    .finalize = qsgp_finalize,
    .weight = qsgp_weight,
    .state_bytes = qsgp_state_bytes,
    .state_save = qsgp_state_save,
    .state_load = qsgp_state_load,
};
