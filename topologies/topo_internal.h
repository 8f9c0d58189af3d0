/*
 * topologies/topo_internal.h — the topology object and the helpers shared by the files of
 * topologies/ (generators, edge lists, analysis). Not installed.
 */
#ifndef HEARSAY_TOPO_INTERNAL_H
#define HEARSAY_TOPO_INTERNAL_H

#include "hearsay/topology.h"

#include <stdint.h>

/* The largest job a topology is built for. */
#define TOPO_MAX_N 65536
/* n given to the generators by hs_topo_check: no job size, check the arguments only. */
#define TOPO_CHECK_N (-1)
/* The largest edge-list file read (bytes): a complete graph on 4096 ranks, the largest the
 * generators make, takes ~170 MB as text. */
#define TOPO_EDGE_FILE_MAX ((long)256 << 20)

/* A growable list of directed edges (src -> dst, optional weight). */
typedef struct topo_edges {
    int *src, *dst;
    double *w;
    long len, cap;
} topo_edges_t;

/* One step of a schedule in compressed rows, both directions. */
typedef struct topo_step {
    int n;
    long n_edges;
    int *out_ptr;   // (n + 1)
    int *out_idx;   // (n_edges) out-peers of each rank, ascending
    double *out_w;  // (n_edges) share sent along each out-edge
    int *in_ptr;    // (n + 1)
    int *in_idx;    // (n_edges) in-peers of each rank, ascending
    double *in_w;   // (n_edges) share the in-peer sends
    double *self_w; // (n) share kept
} topo_step_t;

/* What a generator produces: the steps' edges and the invariants it promises. */
typedef struct topo_gen {
    topo_edges_t *steps; // (nsteps)
    int nsteps;
    int expect_deg;  // every out-degree at every step, or -1 when it varies
    int undirected;  // the generator promises symmetric steps
    int has_weights; // edges carry weights (file), self weights in self_w
    double *self_w;  // (n) explicit self weights from a file, NaN where absent; or NULL
    int file_n;      // n read from a file
} topo_gen_t;

struct hs_topo {
    int n;
    uint64_t seed;
    char spec[512];
    int period;         // steps; 0 for the random schedule
    topo_step_t *steps; // (period)
    int random_k;       // random schedule: peers per iteration
    hs_topo_mixing_t mixing;
    int undirected;
    int doubly;
    int max_out, max_in;
};

int topo_edges_add(topo_edges_t *e, int src, int dst, double w);

/* Generate the graph `name` with argument text `args` (may be NULL) over n ranks, appending
 * its steps to g. Reports errors naming `spec`. n == TOPO_CHECK_N: check the arguments for
 * any n (files are read with their own n) and add no steps. */
int topo_generate(const char *spec, const char *name, const char *args, int n, uint64_t seed,
                  const hs_topo_opts_t *opts, topo_gen_t *g);
/* Read an edge list file: "src dst [weight]" per line, '#' comments; fills g with one step.
 * n == 0: the file's own n. Files over TOPO_EDGE_FILE_MAX bytes are refused. */
int topo_read_edge_file(const char *path, int n, topo_gen_t *g);

void topo_step_free(topo_step_t *st);

/* The step used at iteration t: a precomputed one, or the random schedule's drawn into
 * `scratch` (freed by the caller with topo_step_free). Returns NULL on error. */
const topo_step_t *topo_get_step(const hs_topo_t *topo, long t, topo_step_t *scratch);

/* ceil(log2(n)) for n >= 1. */
int topo_ceil_log2(long n);

#endif
