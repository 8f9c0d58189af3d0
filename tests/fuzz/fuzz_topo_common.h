/*
 * tests/fuzz/fuzz_topo_common.h — the checks both topology harnesses (fuzz_topo_spec.c,
 * fuzz_topo_edges.c) make on a topology that was built: hearsay/topology.h's invariants.
 */
#ifndef HEARSAY_TESTS_FUZZ_TOPO_COMMON_H
#define HEARSAY_TESTS_FUZZ_TOPO_COMMON_H

#include "hearsay/topology.h"
#include "tests/fuzz/fuzz_util.h"

#include <math.h>

/* Peers ascending and in range, each share in (0, 1], the kept share plus the sent shares 1
 * (within 1e-9), in-peers consistent with out-peers; for the steps of two periods (random
 * schedules: 4 steps) and one far iteration. */
static inline void fz_topo_check(const hs_topo_t *t)
{
    const int n = hs_topo_n(t), period = hs_topo_period(t);
    const int dout = hs_topo_max_out_degree(t), din = hs_topo_max_in_degree(t);
    FZ_CHECK(n >= 1, "n %d", n);
    FZ_CHECK(dout >= 0 && dout < n + 1 && din >= 0 && din < n + 1, "degrees %d %d of %d", dout, din,
             n);
    FZ_CHECK(hs_topo_spec(t) != NULL, "no canonical spec");
    int *peers = malloc(sizeof(int) * (size_t)(n + 1)), *in = malloc(sizeof(int) * (size_t)(n + 1));
    double *w = malloc(sizeof(double) * (size_t)(n + 1));
    double *win = malloc(sizeof(double) * (size_t)(n + 1));
    if (!peers || !in || !w || !win) abort();
    long steps = period > 0 ? HS_MIN(2L * period, 16L) : 4;
    for (long s = 0; s <= steps; s++) {
        long it = s < steps ? s : 1000003L;
        for (int r = 0; r < n; r++) {
            int cnt = -1;
            double self = -1;
            FZ_CHECK(hs_topo_out_peers(t, it, r, peers, w, n + 1, &cnt, &self) == 0,
                     "out_peers(%ld, %d): %s", it, r, hs_last_error());
            FZ_CHECK(cnt >= 0 && cnt <= dout, "out-degree %d above the maximum %d", cnt, dout);
            double sum = self;
            FZ_CHECK(self >= 0 && self <= 1 + 1e-12, "self weight %g", self);
            for (int k = 0; k < cnt; k++) {
                FZ_CHECK(peers[k] >= 0 && peers[k] < n && peers[k] != r, "peer %d of %d", peers[k],
                         r);
                FZ_CHECK(k == 0 || peers[k] > peers[k - 1], "peers not ascending");
                FZ_CHECK(w[k] > 0 && w[k] <= 1 + 1e-12, "weight %g", w[k]);
                sum += w[k];
                /* r is an in-peer of peers[k], with the same share. (The random schedule
                 * computes a whole step per query: there, only each rank's first peer.) */
                if (period == 0 && k > 0) continue;
                int nin = -1;
                FZ_CHECK(hs_topo_in_peers(t, it, peers[k], in, win, n + 1, &nin) == 0,
                         "in_peers: %s", hs_last_error());
                FZ_CHECK(nin >= 0 && nin <= din, "in-degree %d above the maximum %d", nin, din);
                int found = 0;
                for (int q = 0; q < nin; q++)
                    if (in[q] == r) {
                        found = 1;
                        FZ_CHECK(win[q] == w[k], "in/out shares differ: %.17g, %.17g", win[q],
                                 w[k]);
                    }
                FZ_CHECK(found, "%d sends to %d at %ld, which does not list it", r, peers[k], it);
            }
            FZ_CHECK(fabs(sum - 1) < 1e-9, "rank %d keeps and sends %.17g at %ld", r, sum, it);
        }
    }
    if (n <= 64) {
        double *W = malloc(sizeof(double) * (size_t)n * (size_t)n);
        if (!W) abort();
        FZ_CHECK(hs_topo_mixing_matrix(t, 0, W) == 0, "mixing_matrix: %s", hs_last_error());
        free(W);
    }
    FILE *f = fopen("/dev/null", "w");
    if (!f) abort();
    FZ_CHECK(hs_topo_write_edges(t, 0, 1, f) == 0, "write_edges: %s", hs_last_error());
    if (n <= 64) FZ_CHECK(hs_topo_write_dot(t, f) == 0, "write_dot: %s", hs_last_error());
    fclose(f);
    free(peers);
    free(in);
    free(w);
    free(win);
}

#endif
