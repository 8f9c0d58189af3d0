/*
 * tests/fuzz/fuzz_topo_spec.c — graph specs (topologies/topo.c, generators.c: hs_topo_create).
 *
 * Input: one byte for n (1..48), one for the mixing and hier's host layout, 8 bytes of seed,
 * then the spec text. Specs that name a file (file:PATH, also inside seq:) are skipped: the
 * edge-list reader has its own harness (fuzz_topo_edges.c). A topology that was built is checked
 * against hearsay/topology.h's invariants (fuzz_topo_common.h).
 */
#include "hearsay/common.h"
#include "hearsay/topology.h"
#include "tests/fuzz/fuzz_topo_common.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_t in = fz_init(data, size);
    int n = fz_range(&in, 1, 48);
    uint8_t b = fz_u8(&in);
    uint64_t seed = fz_u64(&in);
    char *spec = fz_rest_str(&in);
    if (strstr(spec, "file")) {
        free(spec);
        return 0;
    }
    int hosts[4] = {1, 1, 1, 1};
    hs_topo_opts_t o = {.mixing = (hs_topo_mixing_t)(b & 3), .ranks_per_host = (b >> 2) & 7};
    if (b & 0x20) { /* explicit host sizes summing to n */
        int left = n, k = 0;
        for (; k < 3 && left > 1; k++) left -= (hosts[k] = 1 + (left - 1) * (k + 1) / 5);
        hosts[k++] = left;
        o.host_sizes = hosts;
        o.n_hosts = k;
        o.ranks_per_host = 0;
    }
    hs_topo_t *t = NULL;
    if (hs_topo_create(&t, spec, n, seed, &o) == 0) {
        FZ_CHECK(hs_topo_n(t) == n, "asked for %d ranks, got %d", n, hs_topo_n(t));
        fz_topo_check(t);
        if (n <= 16 && (b & 0x40)) {
            hs_topo_analysis_opts_t ao;
            hs_topo_analysis_defaults(&ao);
            ao.sim_max_iters = 200;
            hs_topo_report_t rep;
            hs_topo_analyze(t, &ao, &rep);
        }
    }
    hs_topo_destroy(&t);
    free(spec);
    return 0;
}
