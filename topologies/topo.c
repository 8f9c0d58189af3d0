/*
 * topologies/topo.c — the topology object: spec parsing, schedules (static, periodic,
 * seq:..., random), mixing weights, invariant checks and the per-iteration peer queries.
 */
#include "topologies/topo_internal.h"

#include "hearsay/common.h"
#include "hearsay/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TOPO_STOCHASTIC_TOL 1e-12

int topo_edges_add(topo_edges_t *e, int src, int dst, double w)
{
    if (e->len == e->cap) {
        long cap = e->cap ? 2 * e->cap : 64;
        int *s = realloc(e->src, (size_t)cap * sizeof(int));
        if (s) e->src = s;
        int *d = s ? realloc(e->dst, (size_t)cap * sizeof(int)) : NULL;
        if (d) e->dst = d;
        double *ww = d ? realloc(e->w, (size_t)cap * sizeof(double)) : NULL;
        if (!ww) return HS_ERR(-ENOMEM, "out of memory for %ld edges", cap);
        e->w = ww;
        e->cap = cap;
    }
    e->src[e->len] = src;
    e->dst[e->len] = dst;
    e->w[e->len] = w;
    e->len++;
    return 0;
}

static void topo_edges_free(topo_edges_t *e)
{
    HS_FREE(e->src);
    HS_FREE(e->dst);
    HS_FREE(e->w);
    e->len = e->cap = 0;
}

static void topo_gen_free(topo_gen_t *g)
{
    for (int s = 0; s < g->nsteps; s++) topo_edges_free(&g->steps[s]);
    HS_FREE(g->steps);
    HS_FREE(g->self_w);
    g->nsteps = 0;
}

void topo_step_free(topo_step_t *st)
{
    HS_FREE(st->out_ptr);
    HS_FREE(st->out_idx);
    HS_FREE(st->out_w);
    HS_FREE(st->in_ptr);
    HS_FREE(st->in_idx);
    HS_FREE(st->in_w);
    HS_FREE(st->self_w);
}

/* Sort edges by (src, dst) with a counting sort on dst then src (stable), dropping self
 * loops and duplicates. */
static int edges_normalize(topo_edges_t *e, int n)
{
    long m = e->len;
    int *cnt = hs_calloc((size_t)n + 1, sizeof(int), "edge sort");
    long *order = hs_malloc(sizeof(long) * (size_t)(m ? m : 1), "edge sort");
    long *tmp = hs_malloc(sizeof(long) * (size_t)(m ? m : 1), "edge sort");
    int *s2 = hs_malloc(sizeof(int) * (size_t)(m ? m : 1), "edge sort");
    int *d2 = hs_malloc(sizeof(int) * (size_t)(m ? m : 1), "edge sort");
    double *w2 = hs_malloc(sizeof(double) * (size_t)(m ? m : 1), "edge sort");
    int rc = 0;
    if (!cnt || !order || !tmp || !s2 || !d2 || !w2) {
        rc = -ENOMEM;
        goto out;
    }
    for (long k = 0; k < m; k++) order[k] = k;
    for (int pass = 0; pass < 2; pass++) {
        const int *key = pass == 0 ? e->dst : e->src;
        memset(cnt, 0, sizeof(int) * ((size_t)n + 1));
        for (long k = 0; k < m; k++) cnt[key[k] + 1]++;
        for (int v = 0; v < n; v++) cnt[v + 1] += cnt[v];
        for (long k = 0; k < m; k++) tmp[cnt[key[order[k]]]++] = order[k];
        memcpy(order, tmp, sizeof(long) * (size_t)m);
    }
    long len = 0;
    for (long k = 0; k < m; k++) {
        long o = order[k];
        if (e->src[o] == e->dst[o]) continue;
        if (len && s2[len - 1] == e->src[o] && d2[len - 1] == e->dst[o]) continue;
        s2[len] = e->src[o];
        d2[len] = e->dst[o];
        w2[len] = e->w[o];
        len++;
    }
    memcpy(e->src, s2, sizeof(int) * (size_t)len);
    memcpy(e->dst, d2, sizeof(int) * (size_t)len);
    memcpy(e->w, w2, sizeof(double) * (size_t)len);
    e->len = len;
out:
    free(cnt);
    free(order);
    free(tmp);
    free(s2);
    free(d2);
    free(w2);
    return rc;
}

/* Build the compressed rows of one step from edges (sorted, duplicates and self loops must be
 * absent: callers dedupe). Weights are filled later. */
static int topo_step_build(topo_step_t *st, int n, const topo_edges_t *e)
{
    memset(st, 0, sizeof *st);
    st->n = n;
    st->n_edges = e->len;
    size_t m = (size_t)(e->len ? e->len : 1);
    st->out_ptr = hs_calloc((size_t)n + 1, sizeof(int), "topology rows");
    st->in_ptr = hs_calloc((size_t)n + 1, sizeof(int), "topology rows");
    st->out_idx = hs_malloc(m * sizeof(int), "topology edges");
    st->in_idx = hs_malloc(m * sizeof(int), "topology edges");
    st->out_w = hs_malloc(m * sizeof(double), "topology weights");
    st->in_w = hs_malloc(m * sizeof(double), "topology weights");
    st->self_w = hs_malloc((size_t)n * sizeof(double), "topology weights");
    if (!st->out_ptr || !st->in_ptr || !st->out_idx || !st->in_idx || !st->out_w || !st->in_w ||
        !st->self_w) {
        topo_step_free(st);
        return -ENOMEM;
    }
    /* edges arrive sorted by (src, dst): out rows are a copy, in rows a counting pass */
    for (long k = 0; k < e->len; k++) {
        st->out_ptr[e->src[k] + 1]++;
        st->in_ptr[e->dst[k] + 1]++;
        st->out_idx[k] = e->dst[k];
        st->out_w[k] = e->w[k];
    }
    for (int i = 0; i < n; i++) {
        st->out_ptr[i + 1] += st->out_ptr[i];
        st->in_ptr[i + 1] += st->in_ptr[i];
        st->self_w[i] = NAN;
    }
    int *fill = hs_malloc((size_t)n * sizeof(int), "topology rows");
    if (!fill) {
        topo_step_free(st);
        return -ENOMEM;
    }
    memcpy(fill, st->in_ptr, (size_t)n * sizeof(int));
    for (long k = 0; k < e->len; k++) st->in_idx[fill[e->dst[k]]++] = e->src[k];
    free(fill);
    return 0;
}

/* Position of j in i's sorted out-row, or -1. */
static long out_find(const topo_step_t *st, int i, int j)
{
    int lo = st->out_ptr[i], hi = st->out_ptr[i + 1];
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (st->out_idx[mid] < j)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < st->out_ptr[i + 1] && st->out_idx[lo] == j ? lo : -1;
}

/* Fill in_w from out_w (after the out weights are set). */
static void topo_step_sync_in(topo_step_t *st)
{
    for (int j = 0; j < st->n; j++)
        for (int k = st->in_ptr[j]; k < st->in_ptr[j + 1]; k++)
            st->in_w[k] = st->out_w[out_find(st, st->in_idx[k], j)];
}

static int step_symmetric(const topo_step_t *st)
{
    for (int i = 0; i < st->n; i++)
        for (int k = st->out_ptr[i]; k < st->out_ptr[i + 1]; k++)
            if (out_find(st, st->out_idx[k], i) < 0) return 0;
    return 1;
}

/* Give a step its weights; `file_self` holds explicit self weights (NaN: 1 - sum). */
static int step_weigh(const char *spec, topo_step_t *st, int s, hs_topo_mixing_t mix,
                      const double *file_self)
{
    int n = st->n;
    if (mix == HS_TOPO_MIX_METROPOLIS && !step_symmetric(st))
        return HS_ERR(-EINVAL,
                      "graph '%s': Metropolis-Hastings weights need an undirected graph, but "
                      "step %d is directed",
                      spec, s);
    for (int i = 0; i < n; i++) {
        int d = st->out_ptr[i + 1] - st->out_ptr[i];
        double sum = 0;
        for (int k = st->out_ptr[i]; k < st->out_ptr[i + 1]; k++) {
            int j = st->out_idx[k];
            if (mix == HS_TOPO_MIX_UNIFORM) {
                st->out_w[k] = 1.0 / (d + 1);
            } else if (mix == HS_TOPO_MIX_METROPOLIS) {
                int dj = st->out_ptr[j + 1] - st->out_ptr[j];
                st->out_w[k] = 1.0 / (1 + HS_MAX(d, dj));
            } else if (!(st->out_w[k] > 0 && st->out_w[k] <= 1)) {
                return HS_ERR(-EINVAL,
                              "graph '%s': weight of edge %d -> %d is %g (must be in (0, 1])", spec,
                              i, j, st->out_w[k]);
            }
            sum += st->out_w[k];
        }
        if (mix == HS_TOPO_MIX_UNIFORM)
            st->self_w[i] = 1.0 / (d + 1);
        else if (mix == HS_TOPO_MIX_FILE && file_self && !isnan(file_self[i]))
            st->self_w[i] = file_self[i];
        else
            st->self_w[i] = 1.0 - sum;
        if (st->self_w[i] < -TOPO_STOCHASTIC_TOL || st->self_w[i] > 1 + TOPO_STOCHASTIC_TOL)
            return HS_ERR(-EINVAL,
                          "graph '%s': rank %d keeps weight %g (out-weights sum to %.15g); it "
                          "must be in [0, 1]",
                          spec, i, st->self_w[i], sum);
        if (st->self_w[i] < 0) st->self_w[i] = 0;
        if (fabs(st->self_w[i] + sum - 1.0) > TOPO_STOCHASTIC_TOL)
            return HS_ERR(-EINVAL,
                          "graph '%s': column %d of the mixing matrix sums to %.15g, not 1 (kept "
                          "%.15g + sent %.15g)",
                          spec, i, st->self_w[i] + sum, st->self_w[i], sum);
    }
    topo_step_sync_in(st);
    return 0;
}

static int step_doubly(const topo_step_t *st)
{
    for (int j = 0; j < st->n; j++) {
        double sum = st->self_w[j];
        for (int k = st->in_ptr[j]; k < st->in_ptr[j + 1]; k++) sum += st->in_w[k];
        if (fabs(sum - 1.0) > TOPO_STOCHASTIC_TOL) return 0;
    }
    return 1;
}

/* Breadth-first search over the union of the steps, forward or backward; returns the number
 * of ranks reached from rank 0 and the first unreached one in *missing. */
static int union_reach(const topo_step_t *steps, int nsteps, int n, int backward, int *missing)
{
    unsigned char *seen = calloc((size_t)n, 1);
    int *queue = malloc(sizeof(int) * (size_t)n);
    if (!seen || !queue) {
        free(seen);
        free(queue);
        return HS_ERR(-ENOMEM, "out of memory checking connectivity");
    }
    int head = 0, tail = 0;
    queue[tail++] = 0;
    seen[0] = 1;
    while (head < tail) {
        int u = queue[head++];
        for (int s = 0; s < nsteps; s++) {
            const int *ptr = backward ? steps[s].in_ptr : steps[s].out_ptr;
            const int *idx = backward ? steps[s].in_idx : steps[s].out_idx;
            for (int k = ptr[u]; k < ptr[u + 1]; k++)
                if (!seen[idx[k]]) {
                    seen[idx[k]] = 1;
                    queue[tail++] = idx[k];
                }
        }
    }
    *missing = -1;
    for (int i = 0; i < n && *missing < 0; i++)
        if (!seen[i]) *missing = i;
    free(seen);
    free(queue);
    return tail;
}

/* Split "name:args" into a lower-case name and the argument text (NULL when absent). */
static int split_spec(const char *spec, char *name, size_t cap, const char **args)
{
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    if (len == 0) return HS_ERR(-EINVAL, "empty graph spec '%s'", spec);
    if (len >= cap) return HS_ERR(-EINVAL, "graph spec '%s': name too long", spec);
    for (size_t i = 0; i < len; i++)
        name[i] = (char)(spec[i] | ((spec[i] >= 'A' && spec[i] <= 'Z') ? 0x20 : 0));
    name[len] = '\0';
    *args = colon ? colon + 1 : NULL;
    if (*args && !**args) *args = NULL;
    /* aliases */
    if (!strcmp(name, "exponential")) strcpy(name, "exp");
    if (!strcmp(name, "exp1") || !strcmp(name, "exp-1peer")) strcpy(name, "exp1peer");
    if (!strcmp(name, "cube")) strcpy(name, "hypercube");
    if (!strcmp(name, "full") || !strcmp(name, "clique")) strcpy(name, "complete");
    if (!strcmp(name, "hierarchical")) strcpy(name, "hier");
    if (!strcmp(name, "smallworld")) strcpy(name, "ws");
    return 0;
}

/* Generate all the steps of `spec` (seq: members in order) into g. */
static int gen_spec(const char *spec, int n, uint64_t seed, const hs_topo_opts_t *opts,
                    topo_gen_t *g, int *expect_deg, int *undirected)
{
    char name[32];
    const char *args;
    HS_TRY(split_spec(spec, name, sizeof name, &args));
    if (strcmp(name, "seq")) {
        HS_TRY(topo_generate(spec, name, args, n, seed, opts, g));
        *expect_deg = g->expect_deg;
        *undirected = g->undirected;
        return 0;
    }
    if (!args) return HS_ERR(-EINVAL, "graph '%s': give the members, e.g. seq:ring+exp", spec);
    char buf[512];
    if (strlen(args) >= sizeof buf) return HS_ERR(-EINVAL, "graph spec '%s' is too long", spec);
    strcpy(buf, args);
    int member = 0;
    *expect_deg = -2; /* unset */
    *undirected = 1;
    for (char *save = NULL, *tok = strtok_r(buf, "+", &save); tok;
         tok = strtok_r(NULL, "+", &save), member++) {
        char mname[32];
        const char *margs;
        HS_TRY(split_spec(tok, mname, sizeof mname, &margs));
        if (!strcmp(mname, "seq") || !strcmp(mname, "random"))
            return HS_ERR(-EINVAL, "graph '%s': member '%s' cannot be part of a seq", spec, tok);
        topo_gen_t m = {0};
        int rc = topo_generate(tok, mname, margs, n, seed + (uint64_t)member, opts, &m);
        if (rc == 0 && m.has_weights) {
            rc = HS_ERR(-EINVAL, "graph '%s': weighted files cannot be part of a seq", spec);
        }
        if (rc < 0) {
            topo_gen_free(&m);
            hs_error_prefix("in '%s'", spec);
            return rc;
        }
        if (m.file_n) g->file_n = m.file_n;
        *expect_deg = *expect_deg == -2 || *expect_deg == m.expect_deg ? m.expect_deg : -1;
        *undirected &= m.undirected;
        if (m.nsteps == 0) { /* hs_topo_check: arguments only */
            topo_gen_free(&m);
            continue;
        }
        topo_edges_t *all = realloc(g->steps, sizeof *all * (size_t)(g->nsteps + m.nsteps));
        if (!all) {
            topo_gen_free(&m);
            return HS_ERR(-ENOMEM, "out of memory for '%s'", spec);
        }
        g->steps = all;
        memcpy(&g->steps[g->nsteps], m.steps, sizeof *all * (size_t)m.nsteps);
        g->nsteps += m.nsteps;
        free(m.steps);
        free(m.self_w);
    }
    if (member == 0) return HS_ERR(-EINVAL, "graph '%s': no members", spec);
    return 0;
}

/* The random schedule: rank's k out-peers at iteration t, distinct, ascending. */
static void random_out(const hs_topo_t *topo, long t, int rank, int *peers)
{
    hs_rng_t r;
    int n = topo->n, k = topo->random_k;
    hs_rng_seed(&r, topo->seed ^ 0x72616e646f6dull, (uint64_t)t * (uint64_t)n + (uint64_t)rank);
    for (int c = 0; c < k;) {
        int p = (int)hs_rng_below(&r, (uint64_t)(n - 1));
        if (p >= rank) p++;
        int dup = 0;
        for (int l = 0; l < c && !dup; l++) dup = peers[l] == p;
        if (!dup) peers[c++] = p;
    }
    for (int a = 1; a < k; a++) /* insertion sort: k is small */
        for (int b = a; b > 0 && peers[b - 1] > peers[b]; b--) {
            int x = peers[b];
            peers[b] = peers[b - 1];
            peers[b - 1] = x;
        }
}

const topo_step_t *topo_get_step(const hs_topo_t *topo, long t, topo_step_t *scratch)
{
    if (topo->period > 0) return &topo->steps[t % topo->period];
    int n = topo->n, k = topo->random_k;
    topo_edges_t e = {0};
    int *peers = hs_malloc(sizeof(int) * (size_t)k, "random peers");
    int rc = peers ? 0 : -ENOMEM;
    for (int i = 0; i < n && rc == 0; i++) {
        random_out(topo, t, i, peers);
        for (int c = 0; c < k && rc == 0; c++) rc = topo_edges_add(&e, i, peers[c], NAN);
    }
    free(peers);
    if (rc == 0) rc = topo_step_build(scratch, n, &e);
    topo_edges_free(&e);
    if (rc == 0) rc = step_weigh(topo->spec, scratch, 0, HS_TOPO_MIX_UNIFORM, NULL);
    return rc == 0 ? scratch : NULL;
}

/* random[:K]: K in [1, n - 1] (n unknown, TOPO_CHECK_N: any n up to TOPO_MAX_N). */
static int random_k(const char *spec, const char *args, int n, long *k)
{
    *k = 1;
    if (n >= 0 && n < 2)
        return HS_ERR(-EINVAL, "graph '%s' needs at least 2 ranks (n = %d)", spec, n);
    if (args) HS_TRY(hs_parse_long(args, 1, (n < 0 ? TOPO_MAX_N : n) - 1, spec, k));
    return 0;
}

static int create_random(hs_topo_t *t, const char *args)
{
    long k;
    HS_TRY(random_k(t->spec, args, t->n, &k));
    if (t->mixing != HS_TOPO_MIX_AUTO && t->mixing != HS_TOPO_MIX_UNIFORM)
        return HS_ERR(-EINVAL, "graph '%s': the random schedule is directed; only uniform mixing",
                      t->spec);
    t->random_k = (int)k;
    t->mixing = HS_TOPO_MIX_UNIFORM;
    t->period = 0;
    t->max_out = (int)k;
    t->max_in = t->n - 1;
    t->undirected = 0;
    t->doubly = 0;
    return 0;
}

int hs_topo_create(hs_topo_t **out, const char *spec, int n, uint64_t seed,
                   const hs_topo_opts_t *opts)
{
    *out = NULL;
    if (!spec) return HS_ERR(-EINVAL, "no graph spec given");
    if (n < 0 || n > TOPO_MAX_N)
        return HS_ERR(-EINVAL, "graph '%s': n = %d is out of range [2, %d]", spec, n, TOPO_MAX_N);
    hs_topo_t *t = hs_calloc(1, sizeof *t, "topology");
    if (!t) return -ENOMEM;
    topo_gen_t g = {0};
    int rc = 0;
    if (strlen(spec) >= sizeof t->spec) {
        rc = HS_ERR(-EINVAL, "graph spec '%.40s...' is too long", spec);
        goto fail;
    }
    strcpy(t->spec, spec);
    t->n = n;
    t->seed = seed;
    t->mixing = opts ? opts->mixing : HS_TOPO_MIX_AUTO;
    char name[32];
    const char *args;
    if ((rc = split_spec(spec, name, sizeof name, &args)) < 0) goto fail;
    if (n == 0 && strcmp(name, "file")) {
        rc = HS_ERR(-EINVAL, "graph '%s': give the number of ranks (n = 0)", spec);
        goto fail;
    }
    if (!strcmp(name, "random")) {
        if ((rc = create_random(t, args)) < 0) goto fail;
        *out = t;
        return 0;
    }
    int expect_deg = -1, promised_undirected = 0;
    if ((rc = gen_spec(spec, n, seed, opts, &g, &expect_deg, &promised_undirected)) < 0) goto fail;
    if (n == 0) t->n = n = g.file_n;
    if (t->mixing == HS_TOPO_MIX_AUTO)
        t->mixing = g.has_weights ? HS_TOPO_MIX_FILE : HS_TOPO_MIX_UNIFORM;
    if (t->mixing == HS_TOPO_MIX_FILE && !g.has_weights) {
        rc = HS_ERR(-EINVAL, "graph '%s': file mixing asked for, but the graph has no weights",
                    spec);
        goto fail;
    }
    t->period = g.nsteps;
    t->steps = hs_calloc((size_t)g.nsteps, sizeof *t->steps, "topology steps");
    if (!t->steps) {
        rc = -ENOMEM;
        goto fail;
    }
    t->undirected = t->doubly = 1;
    for (int s = 0; s < g.nsteps; s++) {
        if ((rc = edges_normalize(&g.steps[s], n)) < 0) goto fail;
        if ((rc = topo_step_build(&t->steps[s], n, &g.steps[s])) < 0) goto fail;
        topo_step_t *st = &t->steps[s];
        for (int i = 0; i < n; i++) {
            int dout = st->out_ptr[i + 1] - st->out_ptr[i], din = st->in_ptr[i + 1] - st->in_ptr[i];
            t->max_out = HS_MAX(t->max_out, dout);
            t->max_in = HS_MAX(t->max_in, din);
            if (expect_deg >= 0 && dout != expect_deg) {
                rc =
                    HS_ERR(-EINVAL, "graph '%s': rank %d has out-degree %d at step %d, expected %d",
                           spec, i, dout, s, expect_deg);
                goto fail;
            }
        }
        int sym = step_symmetric(st);
        if (promised_undirected && !sym) {
            rc = HS_ERR(-EINVAL, "graph '%s': step %d should be undirected but is not", spec, s);
            goto fail;
        }
        t->undirected &= sym;
        if ((rc = step_weigh(spec, st, s, t->mixing, g.self_w)) < 0) goto fail;
        t->doubly &= step_doubly(st);
    }
    if (t->mixing == HS_TOPO_MIX_METROPOLIS && !t->doubly) {
        rc = HS_ERR(-EINVAL, "graph '%s': Metropolis weights are not doubly stochastic", spec);
        goto fail;
    }
    int missing = -1;
    for (int dir = 0; dir < 2; dir++) {
        int reached = union_reach(t->steps, t->period, n, dir, &missing);
        if (reached < 0) {
            rc = reached;
            goto fail;
        }
        if (reached < n) {
            rc = HS_ERR(-EINVAL,
                        "graph '%s' on %d ranks is not strongly connected over one period: rank %d "
                        "%s rank 0",
                        spec, n, missing, dir ? "cannot reach" : "cannot be reached from");
            goto fail;
        }
    }
    topo_gen_free(&g);
    *out = t;
    return 0;
fail:
    topo_gen_free(&g);
    hs_topo_destroy(&t);
    return rc;
}

void hs_topo_destroy(hs_topo_t **topo)
{
    if (!topo || !*topo) return;
    for (int s = 0; s < (*topo)->period; s++) topo_step_free(&(*topo)->steps[s]);
    free((*topo)->steps);
    HS_FREE(*topo);
}

int hs_topo_n(const hs_topo_t *topo)
{
    return topo->n;
}
int hs_topo_period(const hs_topo_t *topo)
{
    return topo->period;
}
const char *hs_topo_spec(const hs_topo_t *topo)
{
    return topo->spec;
}
int hs_topo_undirected(const hs_topo_t *topo)
{
    return topo->undirected;
}

int hs_topo_sides(const hs_topo_t *topo, int *side)
{
    int n = topo->n, period = topo->period, rc = 0;
    if (period < 1)
        return HS_ERR(-EINVAL, "graph '%s' is aperiodic: it has no fixed two sides",
                      hs_topo_spec(topo));
    int cap = HS_MAX(1, topo->max_out);
    unsigned char *adj = hs_calloc((size_t)n * n, 1, "adjacency");
    int *queue = hs_malloc((size_t)n * sizeof *queue, "queue");
    int *peers = hs_malloc((size_t)cap * sizeof *peers, "peers");
    if (!adj || !queue || !peers) {
        rc = -ENOMEM;
        goto out;
    }
    for (long t = 0; t < period && rc == 0; t++)
        for (int i = 0; i < n && rc == 0; i++) {
            int c = 0;
            rc = hs_topo_out_peers(topo, t, i, peers, NULL, cap, &c, NULL);
            for (int k = 0; k < c && rc == 0; k++) {
                adj[(size_t)i * n + peers[k]] = 1;
                adj[(size_t)peers[k] * n + i] = 1;
            }
        }
    for (int i = 0; i < n; i++) side[i] = -1;
    for (int s = 0; s < n && rc == 0; s++) {
        if (side[s] >= 0) continue;
        int head = 0, tail = 0;
        side[s] = 0;
        queue[tail++] = s;
        while (head < tail && rc == 0) {
            int i = queue[head++];
            for (int j = 0; j < n && rc == 0; j++) {
                if (!adj[(size_t)i * n + j] || i == j) continue;
                if (side[j] < 0) {
                    side[j] = 1 - side[i];
                    queue[tail++] = j;
                } else if (side[j] == side[i]) {
                    rc = HS_ERR(-EINVAL,
                                "graph '%s' on %d ranks is not bipartite (ranks %d and %d are "
                                "neighbours on the same side; try biring on an even number "
                                "of ranks, bipartite, hypercube, or torus with even sides)",
                                hs_topo_spec(topo), n, i, j);
                }
            }
        }
    }
out:
    free(adj);
    free(queue);
    free(peers);
    return rc;
}
hs_topo_mixing_t hs_topo_mixing(const hs_topo_t *topo)
{
    return topo->mixing;
}
int hs_topo_max_out_degree(const hs_topo_t *topo)
{
    return topo->max_out;
}
int hs_topo_max_in_degree(const hs_topo_t *topo)
{
    return topo->max_in;
}

static int check_query(const hs_topo_t *topo, long t, int rank)
{
    if (t < 0) return HS_ERR(-EINVAL, "topology '%s': iteration %ld < 0", topo->spec, t);
    if (rank < 0 || rank >= topo->n)
        return HS_ERR(-EINVAL, "topology '%s': rank %d is out of range [0, %d)", topo->spec, rank,
                      topo->n);
    return 0;
}

int hs_topo_out_peers(const hs_topo_t *topo, long t, int rank, int *peers, double *weights, int cap,
                      int *count, double *self_weight)
{
    HS_TRY(check_query(topo, t, rank));
    if (topo->period == 0) {
        int k = topo->random_k;
        if (cap < k)
            return HS_ERR(-ENOSPC, "topology '%s': %d out-peers, room for %d", topo->spec, k, cap);
        random_out(topo, t, rank, peers);
        for (int c = 0; c < k && weights; c++) weights[c] = 1.0 / (k + 1);
        if (self_weight) *self_weight = 1.0 / (k + 1);
        *count = k;
        return 0;
    }
    const topo_step_t *st = &topo->steps[t % topo->period];
    int lo = st->out_ptr[rank], d = st->out_ptr[rank + 1] - lo;
    if (cap < d)
        return HS_ERR(-ENOSPC, "topology '%s': %d out-peers, room for %d", topo->spec, d, cap);
    memcpy(peers, st->out_idx + lo, sizeof(int) * (size_t)d);
    if (weights) memcpy(weights, st->out_w + lo, sizeof(double) * (size_t)d);
    if (self_weight) *self_weight = st->self_w[rank];
    *count = d;
    return 0;
}

int hs_topo_in_peers(const hs_topo_t *topo, long t, int rank, int *peers, double *weights, int cap,
                     int *count)
{
    HS_TRY(check_query(topo, t, rank));
    if (topo->period == 0) {
        /* O(n k): every rank's draw at t is recomputed; nothing is exchanged */
        int k = topo->random_k, c = 0;
        int *tmp = hs_malloc(sizeof(int) * (size_t)k, "random peers");
        if (!tmp) return -ENOMEM;
        for (int j = 0; j < topo->n; j++) {
            if (j == rank) continue;
            random_out(topo, t, j, tmp);
            for (int l = 0; l < k; l++)
                if (tmp[l] == rank) {
                    if (c >= cap) {
                        free(tmp);
                        return HS_ERR(-ENOSPC, "topology '%s': more in-peers than room for %d",
                                      topo->spec, cap);
                    }
                    if (weights) weights[c] = 1.0 / (k + 1);
                    peers[c++] = j;
                }
        }
        free(tmp);
        *count = c;
        return 0;
    }
    const topo_step_t *st = &topo->steps[t % topo->period];
    int lo = st->in_ptr[rank], d = st->in_ptr[rank + 1] - lo;
    if (cap < d)
        return HS_ERR(-ENOSPC, "topology '%s': %d in-peers, room for %d", topo->spec, d, cap);
    memcpy(peers, st->in_idx + lo, sizeof(int) * (size_t)d);
    if (weights) memcpy(weights, st->in_w + lo, sizeof(double) * (size_t)d);
    *count = d;
    return 0;
}

int hs_topo_mixing_matrix(const hs_topo_t *topo, long t, double *W)
{
    HS_TRY(check_query(topo, t, 0));
    topo_step_t scratch = {0};
    const topo_step_t *st = topo_get_step(topo, t, &scratch);
    if (!st) return -ENOMEM;
    int n = topo->n;
    memset(W, 0, sizeof(double) * (size_t)n * n);
    for (int i = 0; i < n; i++) {
        W[(size_t)i * n + i] = st->self_w[i];
        for (int k = st->out_ptr[i]; k < st->out_ptr[i + 1]; k++)
            W[(size_t)st->out_idx[k] * n + i] = st->out_w[k];
    }
    topo_step_free(&scratch);
    return 0;
}

const char *hs_topo_spec_help(void)
{
    return "  ring              directed ring i -> i+1\n"
           "  biring            bidirectional ring i -> i+-1\n"
           "  exp               static exponential graph i -> i+2^k, k < ceil(log2 n)\n"
           "  exp1peer          time-varying 1-peer exponential: at t, i -> i+2^(t mod ceil(log2 "
           "n))\n"
           "  bipartite         bipartite exponential: i -> i+-1, i+-(1+2^k) (n even)\n"
           "  torus[:RxC]       2-D torus (default: the most square R x C = n)\n"
           "  mesh[:RxC]        2-D mesh, no wrap-around\n"
           "  hypercube         i -> i xor 2^k (n a power of two)\n"
           "  complete          everyone to everyone\n"
           "  star[:C]          rank C (default 0) to and from all others\n"
           "  regular:D         random D-regular undirected graph (seeded)\n"
           "  er:P              Erdos-Renyi G(n, P), undirected, redrawn until connected (seeded)\n"
           "  ws[:K[:BETA]]     Watts-Strogatz small world, K neighbours, rewiring BETA (4, 0.1)\n"
           "  hier[:R|:R1/R2..] clique inside each host of R ranks, exponential across hosts\n"
           "  file:PATH         edge list 'src dst [weight]' per line, '#' comments\n"
           "  seq:A+B+...       the graphs A, B, ... in turn, one per iteration\n"
           "  random[:K]        K random out-peers per rank per iteration (seeded)\n";
}

int hs_topo_check(const char *spec)
{
    if (!spec) return HS_ERR(-EINVAL, "no graph spec given");
    if (strlen(spec) >= sizeof((hs_topo_t *)NULL)->spec)
        return HS_ERR(-EINVAL, "graph spec '%.40s...' is too long", spec);
    char name[32];
    const char *args;
    HS_TRY(split_spec(spec, name, sizeof name, &args));
    if (!strcmp(name, "random")) {
        long k;
        return random_k(spec, args, TOPO_CHECK_N, &k);
    }
    if (!strcmp(name, "file")) { /* a graph on its own n: build it, invariants and all */
        hs_topo_t *t = NULL;
        int rc = hs_topo_create(&t, spec, 0, 0, NULL);
        hs_topo_destroy(&t);
        return rc;
    }
    topo_gen_t g = {0};
    int expect_deg, undirected;
    int rc = gen_spec(spec, TOPO_CHECK_N, 0, NULL, &g, &expect_deg, &undirected);
    topo_gen_free(&g);
    return rc;
}
