/*
 * data/batch.c — batch iterators: per-epoch seeded shuffles over a shard for training and a
 * sequential pass for evaluation. They copy samples into caller-provided host buffers.
 */
#include "hearsay/common.h"
#include "hearsay/data.h"
#include "hearsay/rng.h"

#include <stdlib.h>
#include <string.h>

/* The stream of epoch `epoch` on `rank`: a 64-bit mix so (rank, epoch) pairs never collide
 * for rank < 2^24 and epoch < 2^40, and no stream equals the other modules' small ones. */
static uint64_t epoch_stream(int rank, int64_t epoch)
{
    return 0x5EED000000000000ull ^ ((uint64_t)(uint32_t)rank << 40) ^
           ((uint64_t)epoch & 0xFFFFFFFFFFull);
}

int hs_batcher_init(hs_batcher_t *b, const hs_dataset_t *ds, const hs_shard_t *shard, int batch,
                    int flags, uint64_t seed, int rank)
{
    memset(b, 0, sizeof(*b));
    const int64_t n = shard ? shard->n : ds->n;
    if (batch < 1) return HS_ERR(-EINVAL, "batch size must be >= 1 (got %d)", batch);
    if (n < 1) return HS_ERR(-EINVAL, "batches of %s: the shard is empty", ds->name);
    if ((flags & HS_BATCH_DROP_LAST) && n < batch)
        return HS_ERR(-EINVAL,
                      "batches of %s: the shard has %lld samples, fewer than one batch of %d, "
                      "and the last partial batch is dropped",
                      ds->name, (long long)n, batch);
    if (shard)
        for (int64_t i = 0; i < n; i++)
            if (shard->idx[i] < 0 || shard->idx[i] >= ds->n)
                return HS_ERR(-EINVAL, "batches of %s: shard index %lld is outside [0, %lld)",
                              ds->name, (long long)shard->idx[i], (long long)ds->n);
    b->order = hs_malloc((size_t)n * sizeof(int64_t), "batch order");
    if (!b->order) return -ENOMEM;
    b->ds = ds;
    b->n = n;
    b->index = shard ? shard->idx : NULL;
    b->batch = batch;
    b->flags = flags;
    b->seed = seed;
    b->rank = rank;
    hs_batcher_start_epoch(b, 0);
    return 0;
}

int hs_batcher_init_eval(hs_batcher_t *b, const hs_dataset_t *ds, int batch)
{
    return hs_batcher_init(b, ds, NULL, batch, 0, 0, 0);
}

void hs_batcher_start_epoch(hs_batcher_t *b, int64_t epoch)
{
    b->epoch = epoch;
    b->pos = 0;
    for (int64_t i = 0; i < b->n; i++) b->order[i] = i;
    if (b->flags & HS_BATCH_SHUFFLE) {
        hs_rng_t rng;
        hs_rng_seed(&rng, b->seed, epoch_stream(b->rank, epoch));
        for (int64_t i = b->n; i > 1; i--) {
            int64_t j = (int64_t)hs_rng_below(&rng, (uint64_t)i);
            int64_t t = b->order[i - 1];
            b->order[i - 1] = b->order[j];
            b->order[j] = t;
        }
    }
}

int64_t hs_batcher_batches_per_epoch(const hs_batcher_t *b)
{
    if (b->flags & HS_BATCH_DROP_LAST) return b->n / b->batch;
    return (b->n + b->batch - 1) / b->batch;
}

int hs_batcher_next(hs_batcher_t *b, float *x, int32_t *y, int64_t *idx)
{
    int64_t left = b->n - b->pos;
    if (left <= 0) return 0;
    if (left < b->batch && (b->flags & HS_BATCH_DROP_LAST)) {
        b->pos = b->n;
        return 0;
    }
    const int cnt = (int)HS_MIN(left, (int64_t)b->batch);
    const int64_t D = b->ds->dim;
    for (int i = 0; i < cnt; i++) {
        int64_t p = b->order[b->pos + i];
        int64_t s = b->index ? b->index[p] : p;
        memcpy(x + (int64_t)i * D, b->ds->x + s * D, (size_t)D * sizeof(float)); // (B, D)
        y[i] = b->ds->y[s];
        if (idx) idx[i] = s;
    }
    b->pos += cnt;
    return cnt;
}

void hs_batcher_free(hs_batcher_t *b)
{
    if (!b) return;
    HS_FREE(b->order);
    memset(b, 0, sizeof(*b));
}
