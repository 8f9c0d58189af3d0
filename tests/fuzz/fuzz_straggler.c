/*
 * tests/fuzz/fuzz_straggler.c — straggler and fault specs (runtime/straggler.c).
 *
 * Input: one byte for the job size (1..64), one for this rank, 8 bytes of seed, then up to 8
 * specs separated by newlines. Invariants (hearsay/straggler.h): hs_straggler_create refuses
 * when hs_straggler_check refuses a spec, and accepts when hs_straggler_check_list accepts the
 * list (which bounds each rank's slowdown with the largest hetero draw, so it may refuse a
 * list that this rank's actual draw keeps under the limit); delays are finite and never
 * negative; crash() agrees with crash_iter(); describe() behaves like snprintf.
 */
#include "hearsay/common.h"
#include "hearsay/straggler.h"
#include "tests/fuzz/fuzz_util.h"

#include <math.h>

#define MAX_SPECS 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_t in = fz_init(data, size);
    int ranks = fz_range(&in, 1, 64);
    int rank = fz_u8(&in) % ranks;
    uint64_t seed = fz_u64(&in);
    char *specs[MAX_SPECS];
    size_t n = 0;
    int all_ok = 1;
    while (in.n && n < MAX_SPECS) {
        specs[n] = fz_until(&in, '\n');
        if (hs_straggler_check(specs[n], ranks) < 0) all_ok = 0;
        hs_straggler_check(specs[n], 0);
        n++;
    }
    hs_straggler_t *s = NULL;
    int list_ok = hs_straggler_check_list((const char *const *)specs, n, ranks) == 0;
    FZ_CHECK(!list_ok || all_ok, "check_list accepts a spec that check refuses");
    int rc = hs_straggler_create(&s, (const char *const *)specs, n, seed, rank, ranks);
    FZ_CHECK(all_ok || rc != 0, "create accepted a spec that check refuses");
    FZ_CHECK(!list_ok || rc == 0, "create returned %d but check_list accepts: %s", rc,
             hs_last_error());
    if (rc == 0) {
        double k = hs_straggler_slowdown(s);
        FZ_CHECK(isfinite(k) && k >= 1, "slowdown %g", k);
        long ci = hs_straggler_crash_iter(s);
        FZ_CHECK(ci >= -1, "crash_iter %ld", ci);
        static const long iters[] = {0, 1, 2, 3, 10, 99, 1000, 123456789, 0x7fffffffffffL};
        for (size_t i = 0; i < HS_ARRAY_LEN(iters); i++) {
            double d = hs_straggler_delay(s, iters[i], 0.01);
            FZ_CHECK(isfinite(d) && d >= 0, "delay %g at iteration %ld", d, iters[i]);
            FZ_CHECK(hs_straggler_delay(s, iters[i], 0.01) == d, "delay not pure");
            int c = hs_straggler_crash(s, iters[i]);
            FZ_CHECK(!c || ci >= 0, "crashes at %ld but crash_iter is %ld", iters[i], ci);
        }
        if (ci >= 0) FZ_CHECK(hs_straggler_crash(s, ci) == 1, "no crash at crash_iter %ld", ci);
        char small[8], big[512];
        int need = hs_straggler_describe(s, small, sizeof small);
        FZ_CHECK(need >= 0 && strlen(small) < sizeof small, "describe into 8 bytes");
        int need2 = hs_straggler_describe(s, big, sizeof big);
        FZ_CHECK(need == need2, "describe needs %d then %d", need, need2);
        if ((size_t)need < sizeof big) FZ_CHECK(strlen(big) == (size_t)need, "describe length");
    }
    FZ_CHECK(rc == 0 || s == NULL, "*out not NULL after a failure");
    hs_straggler_free(&s);
    for (size_t i = 0; i < n; i++) free(specs[i]);
    return 0;
}
