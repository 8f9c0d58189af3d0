/*
 * tests/fuzz/fuzz_shard.c — --shard specs (data/shard.c: hs_shard_spec_check, hs_shard_for_rank)
 * on a small dataset whose labels come from the input.
 *
 * Input: one byte for the workers (1..16), one for the classes (2..10), 8 bytes of seed, one
 * byte for the sample count (1..256), that many label bytes, then the spec text.
 * Invariants (hearsay/data.h): hs_shard_for_rank accepts exactly the specs hs_shard_spec_check
 * accepts (when the data allows it); every shard is ascending, and over all ranks every sample
 * lands in exactly one shard.
 */
#include "hearsay/common.h"
#include "hearsay/data.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_t in = fz_init(data, size);
    int workers = fz_range(&in, 1, 16);
    int classes = fz_range(&in, 2, 10);
    uint64_t seed = fz_u64(&in);
    int n = 1 + fz_u8(&in);
    hs_dataset_t ds;
    if (hs_dataset_alloc(&ds, "fuzz", n, 1, 1, 1, classes) != 0) abort();
    for (int i = 0; i < n; i++) {
        ds.y[i] = fz_u8(&in) % classes;
        ds.x[i] = 0;
    }
    char *spec = fz_rest_str(&in);
    int ok = hs_shard_spec_check(spec) == 0;
    int *seen = calloc((size_t)n + 1, sizeof(int));
    if (!seen) abort();
    int failed = 0;
    for (int r = 0; r < workers; r++) {
        hs_shard_t sh;
        int rc = hs_shard_for_rank(&ds, spec, workers, r, seed, &sh);
        FZ_CHECK(ok || rc < 0, "for_rank accepted a spec that check rejected");
        if (rc < 0) {
            failed = 1;
            FZ_CHECK(sh.idx == NULL && sh.n == 0, "a failed shard is not empty");
            continue;
        }
        FZ_CHECK(!failed, "rank %d succeeded after an earlier rank failed", r);
        FZ_CHECK(sh.n >= 0 && sh.n <= n, "shard of %lld samples out of %d", (long long)sh.n, n);
        for (int64_t k = 0; k < sh.n; k++) {
            FZ_CHECK(sh.idx[k] >= 0 && sh.idx[k] < n, "index %lld", (long long)sh.idx[k]);
            FZ_CHECK(k == 0 || sh.idx[k] > sh.idx[k - 1], "shard not ascending");
            seen[sh.idx[k]]++;
        }
        hs_shard_free(&sh);
    }
    if (!failed)
        for (int i = 0; i < n; i++)
            FZ_CHECK(seen[i] == 1, "sample %d is in %d shards (spec '%s', %d workers)", i, seen[i],
                     spec, workers);
    free(seen);
    free(spec);
    hs_dataset_free(&ds);
    return 0;
}
