/*
 * topologies/generators.c — the graph families: rings, exponential graphs (static, 1-peer
 * time-varying, bipartite), torus and mesh, hypercube, complete, star, random regular,
 * Erdős–Rényi, Watts–Strogatz and hierarchical (clique per host, exponential across hosts).
 *
 * Generators only list edges; topo.c sorts them, drops the duplicates a small n can create
 * (torus 2xC, biring on 2 ranks), builds the compressed rows, weights them and checks the
 * invariants each generator promises here (out-degree, undirected).
 */
#include "topologies/topo_internal.h"

#include "hearsay/common.h"
#include "hearsay/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RANDOM_GRAPH_MAX_N     4096
#define RANDOM_GRAPH_MAX_DRAWS 1000

int topo_ceil_log2(long n)
{
    int k = 0;
    while ((1L << k) < n) k++;
    return k;
}

/* Append an empty step to g and return its edge list. */
static topo_edges_t *new_step(topo_gen_t *g)
{
    topo_edges_t *s = realloc(g->steps, (size_t)(g->nsteps + 1) * sizeof *s);
    if (!s) {
        HS_ERR(-ENOMEM, "out of memory for a schedule step");
        return NULL;
    }
    g->steps = s;
    memset(&s[g->nsteps], 0, sizeof s[0]);
    return &s[g->nsteps++];
}

/* Add i -> j unless it is a self loop (duplicates are removed later). */
static int edge(topo_edges_t *e, int i, int j)
{
    if (i == j) return 0;
    return topo_edges_add(e, i, j, NAN);
}

static int mod(long a, int n)
{
    long r = a % n;
    return (int)(r < 0 ? r + n : r);
}

/* n, or the largest n when only the arguments are checked (TOPO_CHECK_N). */
static int max_n(int n)
{
    return n < 0 ? TOPO_MAX_N : n;
}

static int need_n(const char *spec, int n, int min)
{
    if (n >= 0 && n < min)
        return HS_ERR(-EINVAL, "graph '%s' needs at least %d ranks (n = %d)", spec, min, n);
    return 0;
}

static int no_args(const char *spec, const char *args)
{
    if (args) return HS_ERR(-EINVAL, "graph '%s' takes no arguments", spec);
    return 0;
}

/* Parse "RxC"; or, with no text, the most square factorisation with both sides >= min_side. */
static int parse_grid(const char *spec, const char *args, int n, int min_side, int *R, int *C)
{
    if (!args && n < 0) return 0; /* the grid follows n */
    if (!args) {
        int best = 0;
        for (int r = 1; (long)r * r <= n; r++)
            if (n % r == 0 && r >= min_side) best = r;
        if (!best)
            return HS_ERR(-EINVAL,
                          "graph '%s': n = %d has no factorisation R x C with R, C >= %d; "
                          "give the grid, e.g. %s:4x4",
                          spec, n, min_side, spec);
        *R = best;
        *C = n / best;
        return 0;
    }
    const char *x = strchr(args, 'x');
    if (!x) return HS_ERR(-EINVAL, "graph '%s': expected RxC (e.g. 8x8), got '%s'", spec, args);
    char rbuf[32];
    size_t len = (size_t)(x - args);
    if (len == 0 || len >= sizeof rbuf)
        return HS_ERR(-EINVAL, "graph '%s': expected RxC (e.g. 8x8), got '%s'", spec, args);
    memcpy(rbuf, args, len);
    rbuf[len] = '\0';
    long r, c;
    HS_TRY(hs_parse_long(rbuf, 1, 1 << 20, spec, &r));
    HS_TRY(hs_parse_long(x + 1, 1, 1 << 20, spec, &c));
    if (n < 0 && r * c > TOPO_MAX_N)
        return HS_ERR(-EINVAL, "graph '%s': %ld x %ld = %ld ranks, more than %d", spec, r, c, r * c,
                      TOPO_MAX_N);
    if (n >= 0 && r * c != n)
        return HS_ERR(-EINVAL, "graph '%s': %ld x %ld = %ld ranks, but n = %d", spec, r, c, r * c,
                      n);
    if (r < min_side || c < min_side)
        return HS_ERR(-EINVAL, "graph '%s': both sides must be >= %d", spec, min_side);
    *R = (int)r;
    *C = (int)c;
    return 0;
}

/* Connected components check of an undirected graph given as an n x n byte matrix. */
static int adj_connected(const unsigned char *adj, int n, int *queue, unsigned char *seen)
{
    memset(seen, 0, (size_t)n);
    int head = 0, tail = 0;
    queue[tail++] = 0;
    seen[0] = 1;
    while (head < tail) {
        int u = queue[head++];
        for (int v = 0; v < n; v++)
            if (adj[(size_t)u * n + v] && !seen[v]) {
                seen[v] = 1;
                queue[tail++] = v;
            }
    }
    return tail == n;
}

static int adj_to_step(topo_gen_t *g, const unsigned char *adj, int n)
{
    topo_edges_t *e = new_step(g);
    if (!e) return -ENOMEM;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (adj[(size_t)i * n + j]) HS_TRY(edge(e, i, j));
    return 0;
}

/* One attempt at a random d-regular simple graph by pairing stubs, picking random pairs and
 * falling back to a scan when random picks keep failing. Returns 1 on success, 0 when stuck. */
static int regular_attempt(hs_rng_t *r, int n, int d, unsigned char *adj, int *pts)
{
    long m = (long)n * d;
    memset(adj, 0, (size_t)n * n);
    for (long p = 0; p < m; p++) pts[p] = (int)(p / d);
    long rem = m;
    while (rem > 0) {
        long a = -1, b = -1;
        for (int tries = 0; tries < 64; tries++) {
            long x = (long)hs_rng_below(r, (uint64_t)rem), y = (long)hs_rng_below(r, (uint64_t)rem);
            int u = pts[x], v = pts[y];
            if (u != v && !adj[(size_t)u * n + v]) {
                a = x;
                b = y;
                break;
            }
        }
        for (long x = 0; a < 0 && x < rem; x++)
            for (long y = x + 1; y < rem; y++) {
                int u = pts[x], v = pts[y];
                if (u != v && !adj[(size_t)u * n + v]) {
                    a = x;
                    b = y;
                    break;
                }
            }
        if (a < 0) return 0;
        int u = pts[a], v = pts[b];
        adj[(size_t)u * n + v] = adj[(size_t)v * n + u] = 1;
        if (a < b) { /* remove the larger index first so the smaller stays valid */
            long t = a;
            a = b;
            b = t;
        }
        pts[a] = pts[--rem];
        pts[b] = pts[--rem];
    }
    return 1;
}

/* Random graphs (regular, er, ws): draw until connected. */
static int gen_random(const char *spec, const char *name, const char *args, int n, uint64_t seed,
                      topo_gen_t *g)
{
    HS_TRY(need_n(spec, n, 2));
    const int check = n < 0, top = check ? RANDOM_GRAPH_MAX_N : n;
    if (n > RANDOM_GRAPH_MAX_N)
        return HS_ERR(-EINVAL, "graph '%s': random graphs are limited to n <= %d (n = %d)", spec,
                      RANDOM_GRAPH_MAX_N, n);
    long d = 0, k = 4;
    double p = 0, beta = 0.1;
    if (!strcmp(name, "regular")) {
        if (!args) return HS_ERR(-EINVAL, "graph '%s': give the degree, e.g. regular:4", spec);
        HS_TRY(hs_parse_long(args, 1, top - 1, spec, &d));
        if (check) return 0; /* evenness and connectivity depend on n */
        if (((long)n * d) % 2)
            return HS_ERR(-EINVAL, "graph '%s': n x degree = %d x %ld must be even", spec, n, d);
        if (d == 1 && n > 2)
            return HS_ERR(-EINVAL, "graph '%s': a 1-regular graph on %d ranks is disconnected",
                          spec, n);
        g->expect_deg = (int)d;
    } else if (!strcmp(name, "er")) {
        if (!args)
            return HS_ERR(-EINVAL, "graph '%s': give the edge probability, e.g. er:0.1", spec);
        HS_TRY(hs_parse_double(args, 1e-9, 1.0, spec, &p));
        if (check) return 0;
    } else { /* ws[:K[:BETA]] */
        if (args) {
            char buf[64];
            if (strlen(args) >= sizeof buf)
                return HS_ERR(-EINVAL, "graph '%s': arguments too long", spec);
            snprintf(buf, sizeof buf, "%s", args);
            char *colon = strchr(buf, ':');
            if (colon) *colon = '\0';
            HS_TRY(hs_parse_long(buf, 2, top - 1, spec, &k));
            if (colon) HS_TRY(hs_parse_double(colon + 1, 0.0, 1.0, spec, &beta));
        } else if (k > top - 1) {
            k = top - 1;
        }
        if (check) return 0;
        if (k % 2) k -= (k > 2 ? 1 : -1);
        if (k < 2 || k > n - 1)
            return HS_ERR(-EINVAL, "graph '%s': K must be even and in [2, n-1] (n = %d)", spec, n);
    }
    g->undirected = 1;
    int rc = 0;
    unsigned char *adj = hs_malloc((size_t)n * n, "adjacency matrix");
    int *queue = hs_malloc(sizeof(int) * ((size_t)n * (d > 0 ? d : 1) + n), "graph scratch");
    unsigned char *seen = hs_malloc((size_t)n, "graph scratch");
    if (!adj || !queue || !seen) {
        rc = -ENOMEM;
        goto out;
    }
    hs_rng_t r;
    hs_rng_seed(&r, seed, 0x746f706f); /* "topo" */
    for (int draw = 0; draw < RANDOM_GRAPH_MAX_DRAWS; draw++) {
        if (d > 0) {
            if (!regular_attempt(&r, n, (int)d, adj, queue)) continue;
        } else if (p > 0) {
            memset(adj, 0, (size_t)n * n);
            for (int i = 0; i < n; i++)
                for (int j = i + 1; j < n; j++)
                    if (hs_rng_uniform(&r) < p) adj[(size_t)i * n + j] = adj[(size_t)j * n + i] = 1;
        } else {
            memset(adj, 0, (size_t)n * n);
            for (int i = 0; i < n; i++)
                for (int j = 1; j <= k / 2; j++) {
                    int v = mod(i + j, n);
                    adj[(size_t)i * n + v] = adj[(size_t)v * n + i] = 1;
                }
            for (int j = 1; j <= k / 2; j++)
                for (int i = 0; i < n; i++) {
                    int v = mod(i + j, n);
                    if (!adj[(size_t)i * n + v] || hs_rng_uniform(&r) >= beta) continue;
                    int w = (int)hs_rng_below(&r, (uint64_t)n);
                    if (w == i || adj[(size_t)i * n + w]) continue; /* keep the edge */
                    adj[(size_t)i * n + v] = adj[(size_t)v * n + i] = 0;
                    adj[(size_t)i * n + w] = adj[(size_t)w * n + i] = 1;
                }
        }
        if (adj_connected(adj, n, queue, seen)) {
            rc = adj_to_step(g, adj, n);
            goto out;
        }
    }
    rc =
        HS_ERR(-EINVAL, "graph '%s' on %d ranks: no connected draw in %d tries; use a denser graph",
               spec, n, RANDOM_GRAPH_MAX_DRAWS);
out:
    free(adj);
    free(queue);
    free(seen);
    return rc;
}

/* hier: hosts of given sizes; a clique inside each host; local rank j of host h sends to
 * local rank j mod size(h') of host h' = h + 2^k (mod hosts), k < ceil(log2 hosts). */
static int gen_hier(const char *spec, const char *args, int n, const hs_topo_opts_t *opts,
                    topo_gen_t *g)
{
    HS_TRY(need_n(spec, n, 2));
    const int check = n < 0, top = max_n(n);
    int *sizes = hs_calloc((size_t)top, sizeof(int), "host sizes");
    if (!sizes) return -ENOMEM;
    int H = 0, rc = 0;
    long total = 0;
    if (args && strchr(args, '/')) {
        char buf[512];
        if (strlen(args) >= sizeof buf) {
            rc = HS_ERR(-EINVAL, "graph '%s': arguments too long", spec);
            goto out;
        }
        snprintf(buf, sizeof buf, "%s", args);
        for (char *save = NULL, *tok = strtok_r(buf, "/", &save); tok;
             tok = strtok_r(NULL, "/", &save)) {
            long s;
            if ((rc = hs_parse_long(tok, 1, top, spec, &s)) < 0) goto out;
            if (H >= top) break;
            sizes[H++] = (int)s;
            total += s;
        }
    } else if (!args && check) {
        goto out; /* the host layout comes from the job */
    } else if (!args && opts && opts->host_sizes && opts->n_hosts > 0) {
        for (int h = 0; h < opts->n_hosts && h < n; h++) {
            sizes[H++] = opts->host_sizes[h];
            total += opts->host_sizes[h];
            if (opts->host_sizes[h] < 1) {
                rc = HS_ERR(-EINVAL, "graph '%s': host %d has size %d", spec, h,
                            opts->host_sizes[h]);
                goto out;
            }
        }
    } else {
        long R = opts ? opts->ranks_per_host : 0;
        if (args && (rc = hs_parse_long(args, 1, top, spec, &R)) < 0) goto out;
        if (check) goto out;
        if (R < 1) {
            rc = HS_ERR(-EINVAL,
                        "graph '%s': give the ranks per host (hier:8 or hier:8/8/4, or "
                        "--ranks-per-host)",
                        spec);
            goto out;
        }
        for (long left = n; left > 0; left -= R) sizes[H++] = (int)HS_MIN(R, left);
        total = n;
    }
    if (check && total > TOPO_MAX_N) {
        rc = HS_ERR(-EINVAL, "graph '%s': host sizes sum to %ld, more than %d", spec, total,
                    TOPO_MAX_N);
        goto out;
    }
    if (check) goto out;
    if (total != n) {
        rc = HS_ERR(-EINVAL, "graph '%s': host sizes sum to %ld, but n = %d", spec, total, n);
        goto out;
    }
    topo_edges_t *e = new_step(g);
    if (!e) {
        rc = -ENOMEM;
        goto out;
    }
    int K = topo_ceil_log2(H), uniform = 1;
    for (int h = 0; h < H; h++) uniform &= sizes[h] == sizes[0];
    g->expect_deg = uniform ? sizes[0] - 1 + K : -1;
    /* start[h] = first rank of host h, kept in the upper half of one allocation */
    int *start = hs_calloc((size_t)H + 1, sizeof(int), "host offsets");
    if (!start) {
        rc = -ENOMEM;
        goto out;
    }
    for (int h = 0; h < H; h++) start[h + 1] = start[h] + sizes[h];
    for (int h = 0; h < H && rc == 0; h++)
        for (int j = 0; j < sizes[h] && rc == 0; j++) {
            int i = start[h] + j;
            for (int l = 0; l < sizes[h] && rc == 0; l++) rc = edge(e, i, start[h] + l);
            for (int kk = 0; kk < K && rc == 0; kk++) {
                int h2 = mod(h + (1L << kk), H);
                if (h2 != h) rc = edge(e, i, start[h2] + j % sizes[h2]);
            }
        }
    free(start);
out:
    free(sizes);
    return rc;
}

/* Circulant graph: i -> i + o (mod n) for each offset (duplicates removed later). */
static int gen_circulant(topo_gen_t *g, int n, const long *offsets, int count)
{
    topo_edges_t *e = new_step(g);
    if (!e) return -ENOMEM;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < count; k++) HS_TRY(edge(e, i, mod(i + offsets[k], n)));
    return 0;
}

/* Number of distinct nonzero residues among the offsets (the circulant's degree). */
static int distinct_offsets(int n, const long *offsets, int count)
{
    int d = 0;
    for (int k = 0; k < count; k++) {
        int r = mod(offsets[k], n), dup = r == 0;
        for (int l = 0; l < k && !dup; l++) dup = mod(offsets[l], n) == r;
        d += !dup;
    }
    return d;
}

static int gen_grid(const char *spec, const char *args, int n, int wrap, topo_gen_t *g)
{
    int R = 0, C = 0;
    HS_TRY(need_n(spec, n, wrap ? 4 : 2));
    HS_TRY(parse_grid(spec, args, n, wrap ? 2 : 1, &R, &C));
    if (n < 0) return 0;
    topo_edges_t *e = new_step(g);
    if (!e) return -ENOMEM;
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            int i = r * C + c;
            if (wrap) {
                HS_TRY(edge(e, i, mod(r + 1, R) * C + c));
                HS_TRY(edge(e, i, mod(r - 1, R) * C + c));
                HS_TRY(edge(e, i, r * C + mod(c + 1, C)));
                HS_TRY(edge(e, i, r * C + mod(c - 1, C)));
            } else {
                if (r + 1 < R) HS_TRY(edge(e, i, (r + 1) * C + c));
                if (r > 0) HS_TRY(edge(e, i, (r - 1) * C + c));
                if (c + 1 < C) HS_TRY(edge(e, i, r * C + c + 1));
                if (c > 0) HS_TRY(edge(e, i, r * C + c - 1));
            }
        }
    g->undirected = 1;
    g->expect_deg = wrap ? (R == 2 ? 1 : 2) + (C == 2 ? 1 : 2) : -1;
    return 0;
}

int topo_generate(const char *spec, const char *name, const char *args, int n, uint64_t seed,
                  const hs_topo_opts_t *opts, topo_gen_t *g)
{
    long off[64];
    g->expect_deg = -1;
    g->undirected = 0;
    if (!strcmp(name, "ring") || !strcmp(name, "biring")) {
        HS_TRY(no_args(spec, args));
        HS_TRY(need_n(spec, n, 2));
        if (n < 0) return 0;
        int bi = name[0] == 'b';
        off[0] = 1;
        off[1] = -1;
        g->undirected = bi;
        g->expect_deg = distinct_offsets(n, off, bi ? 2 : 1);
        return gen_circulant(g, n, off, bi ? 2 : 1);
    }
    if (!strcmp(name, "exp") || !strcmp(name, "exp1peer")) {
        HS_TRY(no_args(spec, args));
        HS_TRY(need_n(spec, n, 2));
        if (n < 0) return 0;
        int K = topo_ceil_log2(n); /* offsets 2^k < n: nonzero and distinct mod n */
        for (int k = 0; k < K; k++) off[k] = 1L << k;
        if (name[3] == '\0') {
            g->expect_deg = K;
            return gen_circulant(g, n, off, K);
        }
        g->expect_deg = 1;
        for (int k = 0; k < K; k++) HS_TRY(gen_circulant(g, n, &off[k], 1));
        return 0;
    }
    if (!strcmp(name, "bipartite")) {
        HS_TRY(no_args(spec, args));
        HS_TRY(need_n(spec, n, 2));
        if (n < 0) return 0;
        if (n % 2) return HS_ERR(-EINVAL, "graph '%s' needs an even n (n = %d)", spec, n);
        /* odd offsets 1 and 1 + 2^k both ways: even ranks talk only to odd ranks */
        int count = 0;
        off[count++] = 1;
        off[count++] = -1;
        for (int k = 1; (1L << k) + 1 < n && count + 2 <= 64; k++) {
            off[count++] = (1L << k) + 1;
            off[count++] = -((1L << k) + 1);
        }
        g->undirected = 1;
        g->expect_deg = distinct_offsets(n, off, count);
        return gen_circulant(g, n, off, count);
    }
    if (!strcmp(name, "torus")) return gen_grid(spec, args, n, 1, g);
    if (!strcmp(name, "mesh")) return gen_grid(spec, args, n, 0, g);
    if (!strcmp(name, "hypercube")) {
        HS_TRY(no_args(spec, args));
        HS_TRY(need_n(spec, n, 2));
        if (n < 0) return 0;
        if (n & (n - 1))
            return HS_ERR(-EINVAL, "graph '%s' needs n a power of two (n = %d)", spec, n);
        int K = topo_ceil_log2(n);
        topo_edges_t *e = new_step(g);
        if (!e) return -ENOMEM;
        for (int i = 0; i < n; i++)
            for (int k = 0; k < K; k++) HS_TRY(edge(e, i, i ^ (1 << k)));
        g->undirected = 1;
        g->expect_deg = K;
        return 0;
    }
    if (!strcmp(name, "complete")) {
        HS_TRY(no_args(spec, args));
        HS_TRY(need_n(spec, n, 2));
        if (n < 0) return 0;
        if (n > RANDOM_GRAPH_MAX_N)
            return HS_ERR(-EINVAL, "graph '%s' is limited to n <= %d", spec, RANDOM_GRAPH_MAX_N);
        topo_edges_t *e = new_step(g);
        if (!e) return -ENOMEM;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) HS_TRY(edge(e, i, j));
        g->undirected = 1;
        g->expect_deg = n - 1;
        return 0;
    }
    if (!strcmp(name, "star")) {
        HS_TRY(need_n(spec, n, 2));
        long c = 0;
        if (args) HS_TRY(hs_parse_long(args, 0, max_n(n) - 1, spec, &c));
        if (n < 0) return 0;
        topo_edges_t *e = new_step(g);
        if (!e) return -ENOMEM;
        for (int i = 0; i < n; i++) {
            HS_TRY(edge(e, (int)c, i));
            HS_TRY(edge(e, i, (int)c));
        }
        g->undirected = 1;
        g->expect_deg = n == 2 ? 1 : -1;
        return 0;
    }
    if (!strcmp(name, "regular") || !strcmp(name, "er") || !strcmp(name, "ws"))
        return gen_random(spec, name, args, n, seed, g);
    if (!strcmp(name, "hier")) return gen_hier(spec, args, n, opts, g);
    if (!strcmp(name, "file")) {
        if (!args || !*args) return HS_ERR(-EINVAL, "graph '%s': give a path, file:PATH", spec);
        return topo_read_edge_file(args, n < 0 ? 0 : n, g);
    }
    return HS_ERR(-EINVAL,
                  "unknown graph '%s' (known: ring, biring, exp, exp1peer, bipartite, torus, mesh, "
                  "hypercube, complete, star, regular, er, ws, hier, file, seq, random)",
                  spec);
}
