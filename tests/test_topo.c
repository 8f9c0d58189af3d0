/* tests/test_topo.c — topologies against closed forms and naive references: spectral gaps of
 * the ring, bidirectional ring, hypercube and complete graph; diameters; column and row sums;
 * strong connectivity; schedules identical across ranks; edge-list round trip; bad specs. */
#include "hearsay/common.h"
#include "hearsay/topology.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static hs_topo_t *make(const char *spec, int n, uint64_t seed, hs_topo_mixing_t mix)
{
    hs_topo_t *t = NULL;
    hs_topo_opts_t o = {.mixing = mix};
    int rc = hs_topo_create(&t, spec, n, seed, &o);
    ck_assert_msg(rc == 0, "create %s n=%d: %s", spec, n, hs_last_error());
    return t;
}

static hs_topo_report_t analyze(const hs_topo_t *t)
{
    hs_topo_analysis_opts_t o;
    hs_topo_analysis_defaults(&o);
    hs_topo_report_t r;
    ck_assert_int_eq(hs_topo_analyze(t, &o, &r), 0);
    return r;
}

/* Naive reference: hop diameter of the union graph over `steps` iterations, by BFS from
 * every rank over an adjacency matrix filled from the peer queries. -1: not strongly
 * connected. */
static int naive_diameter(const hs_topo_t *t, int steps)
{
    int n = hs_topo_n(t), cap = hs_topo_max_out_degree(t), diam = 0;
    char *adj = calloc((size_t)n * n, 1);
    int *peers = malloc(sizeof(int) * (size_t)cap), *dist = malloc(sizeof(int) * (size_t)n);
    int *queue = malloc(sizeof(int) * (size_t)n);
    for (int s = 0; s < steps; s++)
        for (int i = 0; i < n; i++) {
            int c;
            ck_assert_int_eq(hs_topo_out_peers(t, s, i, peers, NULL, cap, &c, NULL), 0);
            for (int k = 0; k < c; k++) adj[(size_t)i * n + peers[k]] = 1;
        }
    for (int src = 0; src < n && diam >= 0; src++) {
        for (int i = 0; i < n; i++) dist[i] = -1;
        int head = 0, tail = 0;
        dist[src] = 0;
        queue[tail++] = src;
        while (head < tail) {
            int u = queue[head++];
            for (int v = 0; v < n; v++)
                if (adj[(size_t)u * n + v] && dist[v] < 0) {
                    dist[v] = dist[u] + 1;
                    queue[tail++] = v;
                }
        }
        for (int i = 0; i < n && diam >= 0; i++) diam = dist[i] < 0 ? -1 : HS_MAX(diam, dist[i]);
    }
    free(adj);
    free(peers);
    free(dist);
    free(queue);
    return diam;
}

START_TEST(test_ring_spectral_gap_closed_form)
{
    /* W = (I + S) / 2: eigenvalues (1 + e^{2 pi i k / n}) / 2, |lambda_2| = cos(pi / n) */
    int ns[] = {5, 8, 13, 64};
    for (size_t a = 0; a < HS_ARRAY_LEN(ns); a++) {
        int n = ns[a];
        hs_topo_t *t = make("ring", n, 1, HS_TOPO_MIX_AUTO);
        hs_topo_report_t r = analyze(t);
        ck_assert_msg(fabs(r.lambda2 - cos(M_PI / n)) < 1e-9, "ring n=%d: %.15g vs %.15g", n,
                      r.lambda2, cos(M_PI / n));
        ck_assert(fabs(r.gap_step - (1 - cos(M_PI / n))) < 1e-9);
        ck_assert_int_eq(r.diameter, n - 1);
        double pred = ceil(log(1e-6) / log(cos(M_PI / n)));
        ck_assert(fabs(r.predicted_iters - pred) <= 1);
        /* the simulated contraction approaches the spectral rate */
        ck_assert_msg(fabs(r.measured_rate - cos(M_PI / n)) < 0.02, "ring n=%d rate %g", n,
                      r.measured_rate);
        hs_topo_destroy(&t);
        ck_assert_ptr_null(t);
    }
    /* bidirectional ring, W = (I + S + S^-1) / 3: naive maximum over the eigenvalues */
    for (int n = 3; n <= 20; n += 7) {
        double ref = 0;
        for (int k = 1; k < n; k++) ref = fmax(ref, fabs(1 + 2 * cos(2 * M_PI * k / n)) / 3);
        hs_topo_t *t = make("biring", n, 1, HS_TOPO_MIX_AUTO);
        hs_topo_report_t r = analyze(t);
        ck_assert_msg(fabs(r.lambda2 - ref) < 1e-9, "biring n=%d: %g vs %g", n, r.lambda2, ref);
        ck_assert_int_eq(r.diameter, n / 2);
        ck_assert(r.undirected && r.doubly_stochastic);
        hs_topo_destroy(&t);
    }
}
END_TEST

START_TEST(test_complete_and_hypercube_closed_forms)
{
    hs_topo_t *t = make("complete", 16, 1, HS_TOPO_MIX_AUTO);
    hs_topo_report_t r = analyze(t);
    ck_assert(r.lambda2 < 1e-12);
    ck_assert(fabs(r.gap_step - 1) < 1e-12);
    ck_assert_int_eq(r.diameter, 1);
    ck_assert(r.predicted_iters == 1);
    ck_assert(r.measured_iters == 1);
    ck_assert(r.out_deg_min == 15 && r.out_deg_max == 15);
    hs_topo_destroy(&t);
    for (int d = 1; d <= 6; d++) {
        t = make("hypercube", 1 << d, 1, HS_TOPO_MIX_AUTO);
        r = analyze(t);
        ck_assert_int_eq(r.diameter, d);
        /* W = (I + sum of flips) / (d + 1): |lambda_2| = (d - 1) / (d + 1) */
        ck_assert_msg(fabs(r.lambda2 - (d - 1.0) / (d + 1.0)) < 1e-9, "cube d=%d %g", d, r.lambda2);
        hs_topo_destroy(&t);
    }
}
END_TEST

START_TEST(test_exponential_diameters_and_peers)
{
    for (int n = 2; n <= 70; n++) {
        hs_topo_t *t = make("exp", n, 1, HS_TOPO_MIX_AUTO);
        int K = 0;
        while ((1 << K) < n) K++;
        hs_topo_report_t r = analyze(t);
        ck_assert_int_eq(r.diameter, naive_diameter(t, 1));
        if ((n & (n - 1)) == 0) ck_assert_int_eq(r.diameter, K);
        ck_assert(r.out_deg_min == K && r.out_deg_max == K);
        hs_topo_destroy(&t);
        /* 1-peer exponential: at t, i -> i + 2^(t mod K); one peer, never self */
        t = make("exp1peer", n, 1, HS_TOPO_MIX_AUTO);
        ck_assert_int_eq(hs_topo_period(t), K);
        for (long it = 0; it < 2 * K; it++)
            for (int i = 0; i < n; i++) {
                int p[4], c;
                double w[4], self;
                ck_assert_int_eq(hs_topo_out_peers(t, it, i, p, w, 4, &c, &self), 0);
                ck_assert_int_eq(c, 1);
                ck_assert_int_eq(p[0], (i + (1 << (it % K))) % n);
                ck_assert(w[0] == 0.5 && self == 0.5);
                ck_assert_int_eq(hs_topo_in_peers(t, it, i, p, w, 4, &c), 0);
                ck_assert_int_eq(c, 1);
                ck_assert_int_eq(p[0], ((i - (1 << (it % K))) % n + n) % n);
            }
        ck_assert_int_eq(naive_diameter(t, K), analyze(t).diameter);
        hs_topo_destroy(&t);
    }
    /* exp1peer on a power of two averages exactly in one period */
    hs_topo_t *t = make("exp1peer", 64, 1, HS_TOPO_MIX_AUTO);
    hs_topo_report_t r = analyze(t);
    ck_assert(r.lambda2 < 1e-12);
    ck_assert(r.predicted_iters == 6 && r.measured_iters == 6);
    hs_topo_destroy(&t);
}
END_TEST

static const char *all_specs[] = {"ring",
                                  "biring",
                                  "exp",
                                  "exp1peer",
                                  "bipartite",
                                  "torus",
                                  "mesh",
                                  "complete",
                                  "star",
                                  "star:3",
                                  "regular:3",
                                  "er:0.3",
                                  "ws",
                                  "ws:6:0.5",
                                  "hier:4",
                                  "hier:3",
                                  "random:2",
                                  "seq:ring+biring",
                                  "seq:exp1peer+torus"};

/* Structural checks on every graph at every step: ascending out-peers, no self and no
 * duplicates, in-peers exactly the transpose with the same weights, dense columns summing to
 * 1 (rows too when doubly stochastic), and strong connectivity over the period. */
static void check_invariants(const hs_topo_t *t)
{
    int n = hs_topo_n(t), T = hs_topo_period(t) ? hs_topo_period(t) : 3;
    int cap = HS_MAX(hs_topo_max_out_degree(t), hs_topo_max_in_degree(t));
    int *p = malloc(sizeof(int) * (size_t)cap), *q = malloc(sizeof(int) * (size_t)cap);
    double *w = malloc(sizeof(double) * (size_t)cap), *v = malloc(sizeof(double) * (size_t)cap);
    double *W = malloc(sizeof(double) * (size_t)n * n), *R = calloc((size_t)n * n, sizeof(double));
    for (int s = 0; s < T; s++) {
        memset(R, 0, sizeof(double) * (size_t)n * n);
        ck_assert_int_eq(hs_topo_mixing_matrix(t, s, W), 0);
        int doubly = 1;
        for (int i = 0; i < n; i++) {
            int c;
            double self, col = 0, row = 0;
            ck_assert_int_eq(hs_topo_out_peers(t, s, i, p, w, cap, &c, &self), 0);
            R[(size_t)i * n + i] = self;
            for (int k = 0; k < c; k++) {
                ck_assert_msg(p[k] != i, "%s: self peer", hs_topo_spec(t));
                if (k) ck_assert_msg(p[k] > p[k - 1], "%s: duplicate peer", hs_topo_spec(t));
                ck_assert(w[k] > 0);
                R[(size_t)p[k] * n + i] = w[k];
            }
            ck_assert_int_eq(hs_topo_in_peers(t, s, i, q, v, cap, &c), 0);
            for (int k = 1; k < c; k++) ck_assert(q[k] > q[k - 1]);
            for (int j = 0; j < n; j++) {
                col += W[(size_t)j * n + i];
                row += W[(size_t)i * n + j];
                ck_assert(W[(size_t)j * n + i] >= 0);
            }
            ck_assert_msg(fabs(col - 1) <= 1e-12, "%s: column %d sums to %.17g", hs_topo_spec(t), i,
                          col);
            doubly &= fabs(row - 1) <= 1e-12;
        }
        /* the dense matrix equals the one rebuilt from out-peers; in-peers are its rows */
        for (size_t k = 0; k < (size_t)n * n; k++) ck_assert(W[k] == R[k]);
        for (int i = 0; i < n; i++) {
            int c, cnt = 0;
            ck_assert_int_eq(hs_topo_in_peers(t, s, i, q, v, cap, &c), 0);
            for (int j = 0; j < n; j++) cnt += j != i && W[(size_t)i * n + j] > 0;
            ck_assert_int_eq(c, cnt);
            for (int k = 0; k < c; k++) ck_assert(v[k] == W[(size_t)i * n + q[k]]);
        }
        if (hs_topo_mixing(t) == HS_TOPO_MIX_METROPOLIS) ck_assert(doubly);
    }
    if (hs_topo_period(t)) ck_assert_msg(naive_diameter(t, T) > 0, "%s", hs_topo_spec(t));
    free(p);
    free(q);
    free(w);
    free(v);
    free(W);
    free(R);
}

START_TEST(test_invariants_all_graphs)
{
    int ns[] = {12, 16, 30};
    for (size_t a = 0; a < HS_ARRAY_LEN(ns); a++)
        for (size_t s = 0; s < HS_ARRAY_LEN(all_specs); s++) {
            hs_topo_t *t = make(all_specs[s], ns[a], 7, HS_TOPO_MIX_AUTO);
            check_invariants(t);
            hs_topo_destroy(&t);
        }
    const char *undirected[] = {"biring", "torus:4x4", "mesh:2x8", "hypercube", "complete",
                                "star",   "regular:5", "er:0.25",  "ws:4:0.3",  "bipartite"};
    for (size_t s = 0; s < HS_ARRAY_LEN(undirected); s++) {
        hs_topo_t *t = make(undirected[s], 16, 3, HS_TOPO_MIX_METROPOLIS);
        ck_assert(hs_topo_undirected(t));
        check_invariants(t);
        hs_topo_destroy(&t);
    }
    /* uneven hosts; degrees as defined: clique (size - 1) + ceil(log2 hosts) */
    hs_topo_t *t = make("hier:4/4/4/2", 14, 1, HS_TOPO_MIX_AUTO);
    check_invariants(t);
    hs_topo_destroy(&t);
    hs_topo_opts_t o = {.ranks_per_host = 4};
    ck_assert_int_eq(hs_topo_create(&t, "hier", 16, 1, &o), 0);
    hs_topo_report_t r = analyze(t);
    ck_assert(r.out_deg_min == 3 + 2 && r.out_deg_max == 5);
    hs_topo_destroy(&t);
    /* random regular: exactly d peers everywhere; small-n duplicates never appear */
    t = make("regular:4", 30, 11, HS_TOPO_MIX_AUTO);
    r = analyze(t);
    ck_assert(r.out_deg_min == 4 && r.out_deg_max == 4);
    hs_topo_destroy(&t);
    t = make("torus:2x2", 4, 1, HS_TOPO_MIX_AUTO);
    ck_assert_int_eq(hs_topo_max_out_degree(t), 2);
    hs_topo_destroy(&t);
    t = make("bipartite", 4, 1, HS_TOPO_MIX_AUTO);
    ck_assert_int_eq(hs_topo_max_out_degree(t), 2);
    hs_topo_destroy(&t);
}
END_TEST

START_TEST(test_schedule_identical_across_ranks)
{
    /* two "ranks" build the schedule independently and agree; another seed differs */
    const char *specs[] = {"random:1", "random:3", "er:0.2", "regular:3", "ws:4:0.5"};
    for (size_t s = 0; s < HS_ARRAY_LEN(specs); s++) {
        hs_topo_t *a = make(specs[s], 24, 42, HS_TOPO_MIX_AUTO);
        hs_topo_t *b = make(specs[s], 24, 42, HS_TOPO_MIX_AUTO);
        hs_topo_t *c = make(specs[s], 24, 43, HS_TOPO_MIX_AUTO);
        int differ = 0;
        for (long it = 0; it < 40; it++)
            for (int i = 0; i < 24; i++) {
                int pa[32], pb[32], pc[32], na, nb, nc;
                ck_assert_int_eq(hs_topo_out_peers(a, it, i, pa, NULL, 32, &na, NULL), 0);
                ck_assert_int_eq(hs_topo_out_peers(b, it, i, pb, NULL, 32, &nb, NULL), 0);
                ck_assert_int_eq(hs_topo_out_peers(c, it, i, pc, NULL, 32, &nc, NULL), 0);
                ck_assert_int_eq(na, nb);
                ck_assert(!memcmp(pa, pb, sizeof(int) * (size_t)na));
                differ += na != nc || memcmp(pa, pc, sizeof(int) * (size_t)na);
                ck_assert_int_eq(hs_topo_in_peers(a, it, i, pa, NULL, 32, &na), 0);
                ck_assert_int_eq(hs_topo_in_peers(b, it, i, pb, NULL, 32, &nb), 0);
                ck_assert(na == nb && !memcmp(pa, pb, sizeof(int) * (size_t)na));
            }
        ck_assert_msg(differ > 0, "%s ignores the seed", specs[s]);
        hs_topo_destroy(&a);
        hs_topo_destroy(&b);
        hs_topo_destroy(&c);
    }
    /* the random schedule changes peers over iterations */
    hs_topo_t *t = make("random:1", 16, 5, HS_TOPO_MIX_AUTO);
    int first[16], changed = 0;
    for (long it = 0; it < 10; it++)
        for (int i = 0; i < 16; i++) {
            int p, c;
            ck_assert_int_eq(hs_topo_out_peers(t, it, i, &p, NULL, 1, &c, NULL), 0);
            if (it == 0) first[i] = p;
            changed += p != first[i];
        }
    ck_assert_int_gt(changed, 50);
    int p[2], c;
    ck_assert_int_eq(hs_topo_out_peers(t, 0, 0, p, NULL, 0, &c, NULL), -ENOSPC);
    ck_assert_int_eq(hs_topo_out_peers(t, 0, 16, p, NULL, 2, &c, NULL), -EINVAL);
    hs_topo_destroy(&t);
}
END_TEST

static char *tmp_write(const char *text)
{
    char *path = strdup("/tmp/hs_topo_XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

START_TEST(test_edge_list_round_trip)
{
    const char *specs[] = {"torus:4x4", "er:0.3", "exp", "hier:5"};
    for (size_t s = 0; s < HS_ARRAY_LEN(specs); s++)
        for (int weighted = 0; weighted < 2; weighted++) {
            hs_topo_mixing_t mix = weighted && s < 2 ? HS_TOPO_MIX_METROPOLIS : HS_TOPO_MIX_UNIFORM;
            hs_topo_t *a = make(specs[s], 16, 9, mix);
            char path[] = "/tmp/hs_topo_rt_XXXXXX";
            int fd = mkstemp(path);
            FILE *f = fdopen(fd, "w");
            ck_assert_int_eq(hs_topo_write_edges(a, 0, weighted, f), 0);
            fclose(f);
            char spec[64];
            snprintf(spec, sizeof spec, "file:%s", path);
            hs_topo_t *b = NULL;
            ck_assert_msg(hs_topo_create(&b, spec, 0, 0, NULL) == 0, "%s", hs_last_error());
            ck_assert_int_eq(hs_topo_n(b), 16);
            ck_assert_int_eq(hs_topo_mixing(b), weighted ? HS_TOPO_MIX_FILE : HS_TOPO_MIX_UNIFORM);
            double *Wa = malloc(sizeof(double) * 256), *Wb = malloc(sizeof(double) * 256);
            ck_assert_int_eq(hs_topo_mixing_matrix(a, 0, Wa), 0);
            ck_assert_int_eq(hs_topo_mixing_matrix(b, 0, Wb), 0);
            for (int k = 0; k < 256; k++) ck_assert(Wa[k] == Wb[k]);
            free(Wa);
            free(Wb);
            unlink(path);
            hs_topo_destroy(&a);
            hs_topo_destroy(&b);
        }
    /* comments, blank lines, explicit self weights, n from the header */
    char *path = tmp_write("# a weighted 3-cycle\n\nn 3\n0 1 0.25\n0 0 0.75\n1 2 0.5\n"
                           "2 0 0.5   # trailing comment\n");
    char spec[64];
    snprintf(spec, sizeof spec, "file:%s", path);
    hs_topo_t *t = NULL;
    ck_assert_msg(hs_topo_create(&t, spec, 3, 0, NULL) == 0, "%s", hs_last_error());
    int p, c;
    double w, self;
    ck_assert_int_eq(hs_topo_out_peers(t, 0, 0, &p, &w, 1, &c, &self), 0);
    ck_assert(c == 1 && p == 1 && w == 0.25 && self == 0.75);
    ck_assert_int_eq(hs_topo_out_peers(t, 0, 1, &p, &w, 1, &c, &self), 0);
    ck_assert(self == 0.5);
    hs_topo_destroy(&t);
    unlink(path);
    free(path);
}
END_TEST

/* Create must fail with -EINVAL and a message containing `needle`. */
static void expect_bad(const char *spec, int n, const char *needle)
{
    hs_topo_t *t = NULL;
    hs_error_clear();
    int rc = hs_topo_create(&t, spec, n, 1, NULL);
    ck_assert_msg(rc < 0, "'%s' n=%d accepted", spec, n);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(hs_last_error(), needle), "'%s': message '%s' lacks '%s'", spec,
                  hs_last_error(), needle);
}

static void expect_bad_file(const char *text, const char *needle)
{
    char *path = tmp_write(text);
    char spec[64];
    snprintf(spec, sizeof spec, "file:%s", path);
    expect_bad(spec, 0, needle);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), path)); /* names the file */
    unlink(path);
    free(path);
}

START_TEST(test_bad_specs_and_files)
{
    expect_bad("nosuchgraph", 8, "unknown graph 'nosuchgraph'");
    expect_bad("ring", 1, "at least 2 ranks");
    expect_bad("ring:3", 8, "takes no arguments");
    expect_bad("hypercube", 12, "power of two");
    expect_bad("torus:3x3", 8, "3 x 3 = 9");
    expect_bad("torus:3by3", 9, "expected RxC");
    expect_bad("torus", 7, "no factorisation");
    expect_bad("bipartite", 7, "even n");
    expect_bad("regular:3", 7, "must be even");
    expect_bad("regular:9", 8, "out of range");
    expect_bad("er:0", 8, "out of range");
    expect_bad("er:1e-9", 40, "no connected draw");
    expect_bad("hier:3/3", 8, "sum to 6");
    expect_bad("seq:ring+random", 8, "cannot be part of a seq");
    expect_bad("", 8, "empty graph spec");
    expect_bad("file:/nonexistent/hs.edges", 4, "cannot open");
    hs_topo_t *t = NULL;
    hs_topo_opts_t mh = {.mixing = HS_TOPO_MIX_METROPOLIS};
    ck_assert_int_eq(hs_topo_create(&t, "exp", 8, 1, &mh), -EINVAL);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "undirected"));
    expect_bad_file("0 1\n1 0\n2 3\n3 2\n", "not strongly connected");
    expect_bad_file("0 1\n1 2\n2 0 x\n", ":3: weight 'x'");
    expect_bad_file("0 1\n1 two\n", ":2: expected 'SRC DST [WEIGHT]'");
    expect_bad_file("0 1\n1 0\n0 1\n", ":3: duplicate edge 0 -> 1 (first on line 1)");
    expect_bad_file("0 1 0.5\n1 0\n", "either every edge has a weight");
    expect_bad_file("0 1 0.5\n1 0 0.5\n0 0 0.7\n", "column 0 of the mixing matrix sums to");
    expect_bad_file("n 3\n0 1\n1 0\n", "not strongly connected");
    expect_bad_file("# nothing\n", "no edges");
    expect_bad_file("0 0\n", "self loop");
}
END_TEST

/* Issue 17 item 2: every number in a graph spec or an edge list is range-checked where it is
 * parsed, and an argument too long for the parser's buffer is refused, not cut. */
START_TEST(test_spec_numbers_out_of_range)
{
    expect_bad("regular:99999999999999999999", 8, "'99999999999999999999'");
    expect_bad("regular:-2", 8, "out of range");
    expect_bad("er:nan", 8, "'nan'");
    expect_bad("er:1e400", 8, "'1e400'");
    expect_bad("er:inf", 8, "'inf'");
    expect_bad("ws:4:nan", 8, "'nan'");
    expect_bad("ws:4:1e400", 8, "'1e400'");
    expect_bad("ws:1e3", 8, "'1e3'");
    expect_bad("star:-1", 8, "out of range");
    expect_bad("star:8", 8, "out of range");
    expect_bad("torus:99999999999x2", 8, "99999999999 is out of range");
    expect_bad("torus:2x-4", 8, "out of range");
    expect_bad("hier:0", 8, "out of range");
    expect_bad("hier:4/99999999999999999999", 8, "'99999999999999999999'");
    expect_bad("random:1e3", 8, "'1e3'");
    expect_bad("random:8", 8, "out of range");
    /* ws's arguments were cut to 63 characters: a bad tail was dropped unseen */
    char longws[128] = "ws:4:0.1";
    for (int i = 0; i < 70; i++) strcat(longws, "0");
    strcat(longws, "x");
    expect_bad(longws, 8, "too long");
    /* ranks in a file are bounded by the largest job (65536 ranks), not 2^24 */
    expect_bad_file("0 65536\n65536 0\n",
                    ":1: expected 'SRC DST [WEIGHT]' with ranks in [0, 65535]");
    expect_bad_file("0 99999999999999999999\n1 0\n", ":1:");
    expect_bad_file("0 1 nan\n1 0 0.5\n", "weight 'nan'");
    expect_bad_file("0 1 1e400\n1 0 0.5\n", "weight '1e400'");
    expect_bad_file("n 99999999999999999999\n0 1\n1 0\n", "expected 'n N'");
}
END_TEST

/* Issue 17 item 6: a graph spec is checked without a job size (a one-rank run never builds its
 * graph): syntax and the numbers in it, and a file's existence and contents. */
START_TEST(test_check_spec)
{
    static const char *const good[] = {
        "ring",       "biring", "exp",      "exp1peer", "bipartite",    "hypercube",
        "complete",   "star",   "star:3",   "torus",    "torus:3x3",    "mesh:2x5",
        "regular:3",  "er:0.2", "ws",       "ws:4:0.2", "hier",         "hier:4",
        "hier:3/3/2", "random", "random:2", "Ring",     "seq:ring+exp", "seq:torus:2x2+ring",
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(good); i++)
        ck_assert_msg(hs_topo_check(good[i]) == 0, "'%s': %s", good[i], hs_last_error());
    static const struct {
        const char *spec, *needle;
    } bad[] = {
        {"donut", "unknown graph 'donut'"},
        {"", "empty graph spec"},
        {"ring:3", "takes no arguments"},
        {"torus:3by3", "expected RxC"},
        {"torus:1x4", "both sides"},
        {"regular", "give the degree"},
        {"regular:x", "'x'"},
        {"er:0", "out of range"},
        {"ws:3:2", "out of range"},
        {"hier:0/4", "out of range"},
        {"star:x", "'x'"},
        {"random:0", "out of range"},
        {"seq:ring+donut", "donut"},
        {"seq:ring+random", "cannot be part of a seq"},
        {"seq:", "give the members"},
        {"file:", "give a path"},
        {"file:/nonexistent/hs.edges", "cannot open"},
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(bad); i++) {
        hs_error_clear();
        ck_assert_msg(hs_topo_check(bad[i].spec) == -EINVAL ||
                          (bad[i].needle[0] == 'c' && hs_topo_check(bad[i].spec) < 0),
                      "'%s' accepted", bad[i].spec);
        ck_assert_msg(strstr(hs_last_error(), bad[i].needle), "'%s': message '%s' lacks '%s'",
                      bad[i].spec, hs_last_error(), bad[i].needle);
    }
    /* A file is read and checked as a graph on its own n. */
    char *path = tmp_write("n 3\n0 1\n1 2\n2 0\n");
    char spec[64];
    snprintf(spec, sizeof spec, "file:%s", path);
    ck_assert_msg(hs_topo_check(spec) == 0, "%s", hs_last_error());
    snprintf(spec, sizeof spec, "seq:ring+file:%s", path);
    ck_assert_msg(hs_topo_check(spec) == 0, "%s", hs_last_error());
    unlink(path);
    free(path);
    path = tmp_write("0 1\n1 0\n2 3\n3 2\n");
    snprintf(spec, sizeof spec, "file:%s", path);
    ck_assert_int_eq(hs_topo_check(spec), -EINVAL);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "not strongly connected"));
    unlink(path);
    free(path);
}
END_TEST

/* Issue 17 item 7: an edge list is read whole into memory, so it has a size bound (256 MiB):
 * /dev/zero and a large sparse file are refused at once, naming the file and the bound. */
/* hs_topo_sides: the two sides of a bipartite graph (AD-PSGD's active and passive ranks), every
 * edge across; a graph with an odd cycle is refused with a message naming it. */
START_TEST(test_bipartite_sides)
{
    static const struct {
        const char *spec;
        int n;
    } ok[] = {{"bipartite", 4}, {"bipartite", 8},  {"bipartite", 16}, {"biring", 6},
              {"hypercube", 8}, {"torus:4x4", 16}, {"star", 5}};
    for (size_t c = 0; c < HS_ARRAY_LEN(ok); c++) {
        hs_topo_t *t = make(ok[c].spec, ok[c].n, 1, HS_TOPO_MIX_AUTO);
        int n = ok[c].n, side[64], peers[64], cnt = 0;
        ck_assert_msg(hs_topo_sides(t, side) == 0, "%s n=%d: %s", ok[c].spec, n, hs_last_error());
        ck_assert_int_eq(side[0], 0);
        int count[2] = {0, 0};
        for (int i = 0; i < n; i++) {
            ck_assert(side[i] == 0 || side[i] == 1);
            count[side[i]]++;
            for (long it = 0; it < hs_topo_period(t); it++) {
                ck_assert_int_eq(hs_topo_out_peers(t, it, i, peers, NULL, 64, &cnt, NULL), 0);
                for (int k = 0; k < cnt; k++)
                    ck_assert_msg(side[peers[k]] != side[i], "%s n=%d: %d -> %d on one side",
                                  ok[c].spec, n, i, peers[k]);
            }
        }
        ck_assert(count[0] > 0 && count[1] > 0);
        if (!strcmp(ok[c].spec, "bipartite")) /* the SGP reference's split: even ranks passive */
            for (int i = 0; i < n; i++) ck_assert_int_eq(side[i], i % 2);
        hs_topo_destroy(&t);
    }
    static const struct {
        const char *spec;
        int n;
    } bad[] = {{"complete", 4}, {"biring", 5}, {"exp", 8}, {"ring", 3}, {"exp1peer", 8}};
    for (size_t c = 0; c < HS_ARRAY_LEN(bad); c++) {
        hs_topo_t *t = make(bad[c].spec, bad[c].n, 1, HS_TOPO_MIX_AUTO);
        int side[64];
        ck_assert_int_eq(hs_topo_sides(t, side), -EINVAL);
        ck_assert_msg(strstr(hs_last_error(), "is not bipartite") &&
                          strstr(hs_last_error(), bad[c].spec),
                      "%s: %s", bad[c].spec, hs_last_error());
        hs_topo_destroy(&t);
    }
}
END_TEST

START_TEST(test_edge_file_size_bound)
{
    double t0 = hs_now();
    expect_bad("file:/dev/zero", 0, "only a regular file");
    char path[] = "/tmp/hs_topo_big_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, ((off_t)256 << 20) + 1), 0); /* sparse: no disk used */
    close(fd);
    char spec[64];
    snprintf(spec, sizeof spec, "file:%s", path);
    expect_bad(spec, 0, "268435457 bytes, above the 268435456-byte bound for edge lists");
    ck_assert_ptr_nonnull(strstr(hs_last_error(), path));
    ck_assert_int_lt(hs_topo_check(spec), 0);
    unlink(path);
    ck_assert_msg(hs_now() - t0 < 5.0, "took %.1f s", hs_now() - t0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("topo");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_ring_spectral_gap_closed_form);
    tcase_add_test(tc, test_complete_and_hypercube_closed_forms);
    tcase_add_test(tc, test_exponential_diameters_and_peers);
    tcase_add_test(tc, test_invariants_all_graphs);
    tcase_add_test(tc, test_schedule_identical_across_ranks);
    tcase_add_test(tc, test_edge_list_round_trip);
    tcase_add_test(tc, test_bad_specs_and_files);
    tcase_add_test(tc, test_spec_numbers_out_of_range);
    tcase_add_test(tc, test_check_spec);
    tcase_add_test(tc, test_edge_file_size_bound);
    tcase_add_test(tc, test_bipartite_sides);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
