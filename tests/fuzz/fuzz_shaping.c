/*
 * tests/fuzz/fuzz_shaping.c — link shaping specs (gossip/shaping.c: --link).
 *
 * Input: one byte for the job size (1..16), then the spec text. Invariants (hearsay/shaping.h):
 * every resolved link has finite, non-negative latency, jitter and bandwidth; the sending
 * side's chunk is in [1, chunk]; release times are finite and never before the offer.
 */
#include "hearsay/common.h"
#include "hearsay/shaping.h"
#include "tests/fuzz/fuzz_util.h"

#include <math.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_t in = fz_init(data, size);
    int n = fz_range(&in, 1, 16);
    char *spec = fz_rest_str(&in);
    static const char *const hosts[16] = {"host0", "host1", "host0", "host1", "a", "b", "a", "b",
                                          "host0", "x-y",   "x-y",   "z",     "z", "h", "h", "h"};
    hs_shape_t *s = NULL;
    if (hs_shape_parse(spec, &s) == 0) {
        FZ_CHECK(hs_shape_nrules(s) >= 0, "nrules");
        for (int a = 0; a < n; a++)
            for (int b = 0; b < n; b++) {
                hs_link_shape_t l;
                hs_shape_link(s, a, b, hosts[a], b & 1 ? NULL : hosts[b], &l);
                FZ_CHECK(isfinite(l.latency_s) && l.latency_s >= 0, "latency %g", l.latency_s);
                FZ_CHECK(isfinite(l.jitter_s) && l.jitter_s >= 0, "jitter %g", l.jitter_s);
                FZ_CHECK(isfinite(l.bw_Bps) && l.bw_Bps >= 0, "bandwidth %g", l.bw_Bps);
            }
        for (int r = 0; r < n; r++) {
            hs_shaper_t *sh = NULL;
            if (hs_shaper_create(s, r, n, hosts, 1, &sh) != 0) continue;
            for (int d = 0; d < n; d++) {
                hs_shaper_active(sh, d);
                static const size_t chunks[] = {1, 4096, 1 << 20, (size_t)1 << 40};
                for (size_t k = 0; k < HS_ARRAY_LEN(chunks); k++) {
                    size_t c = hs_shaper_chunk(sh, d, chunks[k]);
                    FZ_CHECK(c >= 1 && c <= chunks[k], "chunk %zu for %zu to %d", c, chunks[k], d);
                }
                double t = 1000.0;
                static const size_t bytes[] = {0, 1, 1 << 20, (size_t)1 << 40};
                for (size_t k = 0; k < HS_ARRAY_LEN(bytes); k++) {
                    double rel = hs_shaper_release(sh, d, bytes[k], t);
                    FZ_CHECK(!isnan(rel) && rel >= t, "release %g of %zu bytes offered at %g", rel,
                             bytes[k], t);
                }
            }
            hs_shaper_free(&sh);
        }
    }
    hs_shape_free(&s);
    free(spec);
    return 0;
}
