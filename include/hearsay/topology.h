/*
 * hearsay/topology.h — peer graphs, time-varying schedules, mixing weights and their analysis.
 *
 * A topology (hs_topo_t) answers, for any iteration t and rank i, who i sends to, with which
 * mixing weights, and who sends to i. It is a pure function of (spec, n, seed, t): every rank
 * builds the same object from the same arguments and computes the same schedule without
 * talking to the others. Periodic schedules (every static graph, exp1peer, seq:...) are
 * precomputed for one period, so the per-iteration queries are O(degree) copies; the random
 * schedule draws each rank's peers from a stream seeded by (seed, t, rank).
 *
 * Mixing is column-stochastic: rank i keeps self_weight(t, i) of its (x, w) and sends
 * weight(t, i -> j) of it to each out-peer j; for each i the kept share plus the sent shares
 * sum to 1 (within 1e-12). Metropolis–Hastings weights are also row-stochastic (doubly
 * stochastic) and need an undirected graph at every step.
 *
 * Graph spec grammar (the same everywhere a graph is named; see docs/topologies.md):
 *   ring | biring | exp | exp1peer | bipartite | hypercube | complete | star[:CENTER]
 *   torus[:RxC] | mesh[:RxC] | regular:D | er:P | ws[:K[:BETA]]
 *   hier[:R | :R1/R2/...] | file:PATH | seq:SPEC+SPEC+... | random[:K]
 */
#ifndef HEARSAY_TOPOLOGY_H
#define HEARSAY_TOPOLOGY_H

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hs_topo hs_topo_t;

typedef enum hs_topo_mixing {
    HS_TOPO_MIX_AUTO = 0,   /* the file's weights when it has them, else uniform */
    HS_TOPO_MIX_UNIFORM,    /* 1/(out-degree + 1) to each out-peer and to self */
    HS_TOPO_MIX_METROPOLIS, /* 1/(1 + max(d_i, d_j)); undirected graphs only */
    HS_TOPO_MIX_FILE,       /* explicit weights from file:PATH */
} hs_topo_mixing_t;

typedef struct hs_topo_opts {
    int ranks_per_host;      /* hier without arguments: ranks per host (last host may be smaller) */
    const int *host_sizes;   /* hier without arguments: explicit host sizes (sum n), or NULL */
    int n_hosts;             /* entries in host_sizes */
    hs_topo_mixing_t mixing; /* how to weight edges (default AUTO) */
} hs_topo_opts_t;

/* Build the topology named by `spec` over n ranks (n = 0 with file:PATH takes n from the
 * file). `seed` drives the random graphs and the random schedule; `opts` may be NULL.
 * Checks the invariants (strong connectivity over one period, degrees as the graph defines
 * them, column sums 1, rows too for Metropolis) and returns -EINVAL with a message naming
 * the spec and what is wrong. */
int hs_topo_create(hs_topo_t **topo, const char *spec, int n, uint64_t seed,
                   const hs_topo_opts_t *opts);
/* Check `spec` without a job size (for flag checks at start, whatever the rank count): the
 * grammar, every number in it against its bounds for any n up to 65536, and for file:PATH (alone
 * or in a seq) that the file exists, is within the edge-list size bound and parses; a file alone
 * is built as a graph on its own n (connectivity, weights). Whether the spec fits a particular n
 * (a hypercube needs a power of two) is left to hs_topo_create. 0 or -EINVAL (-ENOENT etc. for
 * a file that cannot be opened) with a message naming the spec. */
int hs_topo_check(const char *spec);
/* Free a topology and null the handle (NULL is fine). */
void hs_topo_destroy(hs_topo_t **topo);

/* Number of ranks. */
int hs_topo_n(const hs_topo_t *topo);
/* Steps in one period (1 for static graphs); 0 for the aperiodic random schedule. */
int hs_topo_period(const hs_topo_t *topo);
/* The canonical spec ("torus:8x8", "exp", ...). */
const char *hs_topo_spec(const hs_topo_t *topo);
/* 1 when every step's graph is undirected (j in out(i) iff i in out(j)). */
int hs_topo_undirected(const hs_topo_t *topo);
/* The two sides of a bipartite graph (the union of the steps of one period): side (n) gets 0
 * or 1 per rank, breadth-first from the lowest rank of each component, which is on side 0; every
 * edge joins the sides. -EINVAL with a message naming the graph and two neighbours on one side
 * when it is not bipartite or is aperiodic, -ENOMEM. */
int hs_topo_sides(const hs_topo_t *topo, int *side);
/* The mixing actually used (never AUTO). */
hs_topo_mixing_t hs_topo_mixing(const hs_topo_t *topo);
/* Largest out-/in-degree over all iterations: the capacity the peer queries need. */
int hs_topo_max_out_degree(const hs_topo_t *topo);
int hs_topo_max_in_degree(const hs_topo_t *topo);

/* Out-peers of `rank` at iteration t (t >= 0), ascending, with the share of (x, w) sent to
 * each (weights may be NULL); *self_weight (may be NULL) gets the share kept. `cap` is the
 * room in peers/weights; returns -ENOSPC if it is below the count. */
int hs_topo_out_peers(const hs_topo_t *topo, long t, int rank, int *peers, double *weights, int cap,
                      int *count, double *self_weight);
/* In-peers of `rank` at iteration t: who sends to it (ascending) and the share each sends,
 * i.e. the mixing entry W[rank][peer]. Synchronous algorithms use the count to know how
 * many messages to expect. */
int hs_topo_in_peers(const hs_topo_t *topo, long t, int rank, int *peers, double *weights, int cap,
                     int *count);

/* Dense mixing matrix at iteration t, row-major: W[j * n + i] is the share rank i sends to
 * rank j (W[i * n + i] the kept share). Columns sum to 1. */
// (n, n) W
int hs_topo_mixing_matrix(const hs_topo_t *topo, long t, double *W);

/* Write the graph of iteration t as an edge list ("src dst [weight]" lines, self weights
 * as "i i w" when with_weights), readable back with file:PATH. */
int hs_topo_write_edges(const hs_topo_t *topo, long t, int with_weights, FILE *f);
/* Write Graphviz: one graph for static topologies, edges labelled by step otherwise. */
int hs_topo_write_dot(const hs_topo_t *topo, FILE *f);

typedef struct hs_topo_analysis_opts {
    double target;      /* relative consensus error to reach (default 1e-6) */
    long model_params;  /* floats per message payload for the byte count (default 0) */
    long sim_max_iters; /* cap on simulated push-sum iterations (default 20000) */
    int sim_dim;        /* length of the simulated vectors (default 4) */
    uint64_t sim_seed;  /* seed of the random vectors */
    int skip_spectral;  /* 1: skip the eigenvalues (large n) */
    int skip_sim;       /* 1: skip the push-sum simulation */
} hs_topo_analysis_opts_t;

typedef struct hs_topo_report {
    int n, period; /* period 0: random schedule, analysed over `window` steps */
    int window;    /* steps whose product the spectral figures use */
    double out_deg_min, out_deg_mean, out_deg_max; /* over ranks and the steps of a period */
    double in_deg_min, in_deg_mean, in_deg_max;
    int diameter;              /* hops in the union graph over one period */
    int undirected;            /* every step undirected */
    int doubly_stochastic;     /* rows also sum to 1 at every step */
    double lambda2;            /* |lambda_2| of the product of the window's mixing matrices */
    double gap_step;           /* 1 - lambda2^(1/window): the spectral gap per iteration */
    double predicted_iters;    /* ln(target) / ln(lambda2^(1/window)), at least 1 */
    double measured_rate;      /* fitted per-iteration contraction of the simulated error */
    double measured_iters;     /* iterations the simulation took to reach target */
    int measured_extrapolated; /* 1: the cap was hit, measured_iters extrapolated by the rate */
    double msgs_per_iter;      /* messages per rank per iteration (mean over a period) */
    double bytes_per_iter;     /* msgs_per_iter * (4 * model_params + 8) */
} hs_topo_report_t;

/* Fill `opts` with the defaults. */
void hs_topo_analysis_defaults(hs_topo_analysis_opts_t *opts);
/* Degrees, diameter, spectral gap (LAPACKE: dsyev when the product is symmetric, dgeev
 * otherwise), predicted iterations to the target, and a simulated push-sum averaging run
 * (x, w) on random vectors measuring the actual contraction of max_i ||x_i/w_i - mean||. */
int hs_topo_analyze(const hs_topo_t *topo, const hs_topo_analysis_opts_t *opts,
                    hs_topo_report_t *rep);

/* The spec grammar, one line per graph, for --help texts. */
const char *hs_topo_spec_help(void);

#ifdef __cplusplus
}
#endif
#endif
