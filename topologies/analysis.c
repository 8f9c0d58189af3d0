/*
 * topologies/analysis.c — what a topology costs and how fast it mixes: degrees, diameter,
 * spectral gap of the mixing matrices (LAPACKE), the predicted iterations to consensus, and
 * a simulated push-sum averaging run that measures the actual contraction.
 *
 * For a schedule of period T the spectral figures use the product P = W_{T-1} ... W_0:
 * lambda2 = |lambda_2(P)|, per-iteration gap 1 - lambda2^(1/T). The random schedule is
 * analysed over a window of ceil(log2 n) drawn steps.
 */
#include "topologies/topo_internal.h"

#include "hearsay/common.h"
#include "hearsay/rng.h"

#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SPECTRAL_MAX_N  2048
#define DIAMETER_MAX_N  8192
#define SIM_WORK_BUDGET 3e8 /* edge x dimension updates per simulation */

void hs_topo_analysis_defaults(hs_topo_analysis_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->target = 1e-6;
    o->sim_max_iters = 20000;
    o->sim_dim = 4;
    o->sim_seed = 1;
}

static int window_of(const hs_topo_t *topo)
{
    return topo->period ? topo->period : HS_MAX(1, topo_ceil_log2(topo->n));
}

static void degrees(const hs_topo_t *topo, const topo_step_t *st, hs_topo_report_t *r, int first)
{
    for (int i = 0; i < topo->n; i++) {
        double o = st->out_ptr[i + 1] - st->out_ptr[i], in = st->in_ptr[i + 1] - st->in_ptr[i];
        if (first && i == 0) {
            r->out_deg_min = r->out_deg_max = o;
            r->in_deg_min = r->in_deg_max = in;
        }
        r->out_deg_min = HS_MIN(r->out_deg_min, o);
        r->out_deg_max = HS_MAX(r->out_deg_max, o);
        r->in_deg_min = HS_MIN(r->in_deg_min, in);
        r->in_deg_max = HS_MAX(r->in_deg_max, in);
        r->out_deg_mean += o;
        r->in_deg_mean += in;
    }
}

/* Hop diameter of the union graph of the window: every rank's reach set (a bitset of the
 * sources heard from) grows one hop per round until everyone has heard from everyone. */
static int union_diameter(const hs_topo_t *topo, topo_step_t *const *steps, int nsteps)
{
    int n = topo->n;
    size_t words = ((size_t)n + 63) / 64;
    uint64_t *cur = calloc((size_t)n * words, sizeof(uint64_t));
    uint64_t *next = calloc((size_t)n * words, sizeof(uint64_t));
    int result = -1;
    if (!cur || !next) goto out;
    for (int i = 0; i < n; i++) cur[(size_t)i * words + i / 64] |= 1ull << (i % 64);
    for (int round = 0; round <= n; round++) {
        int full = 1;
        for (int i = 0; i < n && full; i++)
            for (size_t w = 0; w < words && full; w++) {
                uint64_t want = (w + 1 < words || n % 64 == 0) ? ~0ull : (1ull << (n % 64)) - 1;
                full = cur[(size_t)i * words + w] == want;
            }
        if (full) {
            result = round;
            break;
        }
        memcpy(next, cur, (size_t)n * words * sizeof(uint64_t));
        for (int s = 0; s < nsteps; s++)
            for (int i = 0; i < n; i++)
                for (int k = steps[s]->out_ptr[i]; k < steps[s]->out_ptr[i + 1]; k++) {
                    uint64_t *dst = next + (size_t)steps[s]->out_idx[k] * words;
                    const uint64_t *src = cur + (size_t)i * words;
                    for (size_t w = 0; w < words; w++) dst[w] |= src[w];
                }
        uint64_t *t = cur;
        cur = next;
        next = t;
    }
out:
    free(cur);
    free(next);
    return result;
}

/* |lambda_2| of P = W_{T-1} ... W_0 (row-major P[j][c]). */
static int spectral(const hs_topo_t *topo, topo_step_t *const *steps, int nsteps, double *lambda2)
{
    int n = topo->n, rc = 0;
    size_t nn = (size_t)n * n;
    double *P = calloc(nn, sizeof(double)), *Q = calloc(nn, sizeof(double));
    double *wr = malloc(sizeof(double) * (size_t)n), *wi = malloc(sizeof(double) * (size_t)n);
    if (!P || !Q || !wr || !wi) {
        rc = HS_ERR(-ENOMEM, "out of memory for the %d x %d mixing product", n, n);
        goto out;
    }
    for (int i = 0; i < n; i++) P[(size_t)i * n + i] = 1.0;
    for (int s = 0; s < nsteps; s++) {
        const topo_step_t *st = steps[s];
        for (int j = 0; j < n; j++) { /* row j of W P */
            double *q = Q + (size_t)j * n;
            const double *pj = P + (size_t)j * n;
            for (int c = 0; c < n; c++) q[c] = st->self_w[j] * pj[c];
            for (int k = st->in_ptr[j]; k < st->in_ptr[j + 1]; k++) {
                const double *pi = P + (size_t)st->in_idx[k] * n;
                double w = st->in_w[k];
                for (int c = 0; c < n; c++) q[c] += w * pi[c];
            }
        }
        double *t = P;
        P = Q;
        Q = t;
    }
    int symmetric = 1;
    for (int i = 0; i < n && symmetric; i++)
        for (int j = i + 1; j < n && symmetric; j++)
            symmetric = fabs(P[(size_t)i * n + j] - P[(size_t)j * n + i]) <= 1e-14;
    lapack_int info;
    if (symmetric) {
        info = LAPACKE_dsyev(LAPACK_COL_MAJOR, 'N', 'U', n, P, n, wr);
        for (int i = 0; i < n; i++) wi[i] = 0;
    } else {
        info = LAPACKE_dgeev(LAPACK_COL_MAJOR, 'N', 'N', n, P, n, wr, wi, NULL, 1, NULL, 1);
    }
    if (info != 0) {
        rc = HS_ERR(-EIO, "topology '%s': LAPACKE_%s failed (info %d)", topo->spec,
                    symmetric ? "dsyev" : "dgeev", (int)info);
        goto out;
    }
    /* the largest modulus is 1 (stochastic); lambda_2 is the second largest */
    double first = -1, second = 0;
    for (int i = 0; i < n; i++) {
        double m = hypot(wr[i], wi[i]);
        if (m > first) {
            second = first;
            first = m;
        } else if (m > second) {
            second = m;
        }
    }
    /* a product that averages exactly leaves only round-off (about n x 1e-16) */
    *lambda2 = second < 1e-12 ? 0.0 : second;
out:
    free(P);
    free(Q);
    free(wr);
    free(wi);
    return rc;
}

/* max_i ||x_i / w_i - mean|| */
static double consensus_error(const double *x, const double *w, const double *mean, int n, int d)
{
    double worst = 0;
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int c = 0; c < d; c++) {
            double e = x[(size_t)i * d + c] / w[i] - mean[c];
            s += e * e;
        }
        worst = HS_MAX(worst, s);
    }
    return sqrt(worst);
}

/* Simulated push-sum averaging on random vectors: measured iterations to the target and the
 * fitted per-iteration contraction. */
static int simulate(const hs_topo_t *topo, const hs_topo_analysis_opts_t *o, double mean_edges,
                    hs_topo_report_t *rep)
{
    int n = topo->n, d = o->sim_dim > 0 ? o->sim_dim : 4, rc = 0;
    double *x = malloc(sizeof(double) * (size_t)n * d),
           *nx = malloc(sizeof(double) * (size_t)n * d);
    double *w = malloc(sizeof(double) * (size_t)n), *nw = malloc(sizeof(double) * (size_t)n);
    double *mean = calloc((size_t)d, sizeof(double));
    long cap = o->sim_max_iters > 0 ? o->sim_max_iters : 20000;
    long budget = (long)(SIM_WORK_BUDGET / ((mean_edges + n) * (d + 1)));
    cap = HS_MAX(1, HS_MIN(cap, budget));
    /* the fit uses iterations after the error fell below sqrt(target) */
    double *logs = malloc(sizeof(double) * (size_t)(cap + 1));
    if (!x || !nx || !w || !nw || !mean || !logs) {
        rc = HS_ERR(-ENOMEM, "out of memory for the push-sum simulation");
        goto out;
    }
    hs_rng_t r;
    hs_rng_seed(&r, o->sim_seed, 0x73696d);
    for (int i = 0; i < n; i++) {
        w[i] = 1.0;
        for (int c = 0; c < d; c++) {
            x[(size_t)i * d + c] = hs_rng_normal(&r);
            mean[c] += x[(size_t)i * d + c] / n;
        }
    }
    double e0 = consensus_error(x, w, mean, n, d), rel = 1.0;
    double stop = o->target * 1e-3;
    long t = 0, reached = -1, fit_from = -1;
    logs[0] = 0;
    while (t < cap && rel > stop && rel > 1e-15) {
        topo_step_t scratch = {0};
        const topo_step_t *st = topo_get_step(topo, t, &scratch);
        if (!st) {
            rc = -ENOMEM;
            goto out;
        }
        for (int i = 0; i < n; i++) {
            double a = st->self_w[i];
            nw[i] = a * w[i];
            for (int c = 0; c < d; c++) nx[(size_t)i * d + c] = a * x[(size_t)i * d + c];
        }
        for (int i = 0; i < n; i++)
            for (int k = st->out_ptr[i]; k < st->out_ptr[i + 1]; k++) {
                int j = st->out_idx[k];
                double a = st->out_w[k];
                nw[j] += a * w[i];
                for (int c = 0; c < d; c++) nx[(size_t)j * d + c] += a * x[(size_t)i * d + c];
            }
        topo_step_free(&scratch);
        double *tp = x;
        x = nx;
        nx = tp;
        tp = w;
        w = nw;
        nw = tp;
        t++;
        rel = consensus_error(x, w, mean, n, d) / e0;
        logs[t] = log(HS_MAX(rel, 1e-300));
        if (reached < 0 && rel <= o->target) reached = t;
        if (fit_from < 0 && rel <= sqrt(o->target)) fit_from = t;
    }
    /* least-squares slope of log(rel) over [fit_from, t]; whole run when that is too short */
    if (fit_from < 0 || t - fit_from < 3) fit_from = 0;
    double sx = 0, sy = 0, sxx = 0, sxy = 0, m = (double)(t - fit_from + 1);
    for (long k = fit_from; k <= t; k++) {
        sx += (double)k;
        sy += logs[k];
        sxx += (double)k * k;
        sxy += (double)k * logs[k];
    }
    double slope = t > fit_from ? (m * sxy - sx * sy) / (m * sxx - sx * sx) : 0.0;
    rep->measured_rate = exp(HS_MIN(slope, 0.0));
    if (reached >= 0) {
        rep->measured_iters = (double)reached;
        rep->measured_extrapolated = 0;
    } else if (slope < 0) {
        rep->measured_iters = (double)t + ceil((log(o->target) - log(rel)) / slope);
        rep->measured_extrapolated = 1;
    } else {
        rep->measured_iters = INFINITY;
        rep->measured_extrapolated = 1;
    }
out:
    free(x);
    free(nx);
    free(w);
    free(nw);
    free(mean);
    free(logs);
    return rc;
}

int hs_topo_analyze(const hs_topo_t *topo, const hs_topo_analysis_opts_t *opts,
                    hs_topo_report_t *rep)
{
    hs_topo_analysis_opts_t o;
    if (opts)
        o = *opts;
    else
        hs_topo_analysis_defaults(&o);
    if (!(o.target > 0 && o.target < 1))
        return HS_ERR(-EINVAL, "consensus target %g must be in (0, 1)", o.target);
    memset(rep, 0, sizeof *rep);
    int n = topo->n, W = window_of(topo), rc = 0;
    rep->n = n;
    rep->period = topo->period;
    rep->window = W;
    rep->undirected = topo->undirected;
    rep->doubly_stochastic = topo->doubly;
    rep->diameter = -1;
    rep->lambda2 = rep->gap_step = rep->predicted_iters = NAN;
    rep->measured_rate = rep->measured_iters = NAN;
    topo_step_t *scratch = hs_calloc((size_t)W, sizeof *scratch, "analysis steps");
    topo_step_t **steps = hs_calloc((size_t)W, sizeof *steps, "analysis steps");
    if (!scratch || !steps) {
        rc = -ENOMEM;
        goto out;
    }
    double edges = 0;
    for (int s = 0; s < W; s++) {
        steps[s] = (topo_step_t *)topo_get_step(topo, s, &scratch[s]);
        if (!steps[s]) {
            rc = -ENOMEM;
            goto out;
        }
        degrees(topo, steps[s], rep, s == 0);
        edges += (double)steps[s]->n_edges;
    }
    rep->out_deg_mean /= (double)n * W;
    rep->in_deg_mean /= (double)n * W;
    rep->msgs_per_iter = edges / W / n;
    rep->bytes_per_iter = rep->msgs_per_iter * (4.0 * (double)o.model_params + 8.0);
    if (n <= DIAMETER_MAX_N) rep->diameter = union_diameter(topo, steps, W);
    if (!o.skip_spectral && n <= SPECTRAL_MAX_N) {
        if ((rc = spectral(topo, steps, W, &rep->lambda2)) < 0) goto out;
        rep->gap_step = 1.0 - pow(rep->lambda2, 1.0 / W);
        /* at least one period: a product that averages exactly still takes W steps */
        double periods = rep->lambda2 > 1e-300 ? log(o.target) / log(rep->lambda2) : 1.0;
        if (rep->lambda2 >= 1.0 - 1e-15) periods = INFINITY;
        rep->predicted_iters = ceil(W * HS_MAX(1.0, periods));
    }
    if (!o.skip_sim) rc = simulate(topo, &o, edges / W, rep);
out:
    for (int s = 0; scratch && s < W; s++) topo_step_free(&scratch[s]);
    free(scratch);
    free(steps);
    return rc;
}
