/*
 * hearsay/checkpoint.h — checkpoints of one rank of `hearsay train` (--checkpoint-every,
 * --resume).
 *
 * One file per rank and checkpoint, DIR/ckpt/rank-R.it-ITER.bin, written atomically (a
 * temporary file, fsync, rename, fsync of the directory), and one manifest per job-wide set,
 * DIR/ckpt/set-ITER.manifest (below: hs_ckpt_set_*). The single-file layout of earlier versions,
 * DIR/ckpt/rank-R.bin, is read only. Layout of a part (little-endian, the host's float32):
 *
 *     hs_ckpt_hdr_t (96 bytes)    magic "HSCK", version 3, rank, size, iteration, algo name,
 *                                 num_params, byte sizes of the four sections, the dynamic
 *                                 loss scale's state (v3), checksum
 *     params   (num_params f32)   the point the model holds (z)
 *     velocity (velocity_bytes)   the local optimizer's velocity (absent without momentum)
 *     state    (state_bytes)      the algorithm's state (hs_algo_ops_t.state_save)
 *     bn       (bn_bytes)         the model's batch-norm running statistics (hs_model_state;
 *                                 absent without bn layers; each rank's own: they are local)
 *
 * The checksum is FNV-1a 64 over the header (its checksum field zeroed) and the payload.
 * Messages in flight when the checkpoint is taken are not part of it (see docs/algorithms.md).
 */
#ifndef HEARSAY_CHECKPOINT_H
#define HEARSAY_CHECKPOINT_H

#include "hearsay/algo.h"
#include "hearsay/train.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HS_CKPT_MAGIC "HSCK"
#define HS_CKPT_VERSION                                                                            \
    3u /* v1: header, params, velocity, state; v2: + bn_bytes, bn; v3: +                           \
        * loss_scale, scale_good (v2 parts are still read) */
#define HS_CKPT_ALGO_MAX 16

/* The file header, version 2 (fixed-width fields, no padding). */
typedef struct hs_ckpt_hdr {
    char magic[4];               /* "HSCK" */
    uint32_t version;            /* HS_CKPT_VERSION */
    int32_t rank, size;          /* the writer's rank and the job's size */
    int64_t iteration;           /* iterations done when it was taken */
    char algo[HS_CKPT_ALGO_MAX]; /* algorithm name, NUL-padded */
    uint64_t num_params;         /* parameters */
    uint64_t params_bytes;       /* num_params * 4 */
    uint64_t velocity_bytes;     /* 0 or num_params * 4 */
    uint64_t state_bytes;        /* the algorithm's state */
    uint64_t bn_bytes;           /* v2: batch-norm running statistics (hs_model_num_state * 4) */
    float loss_scale;            /* v3: the dynamic loss scale (hearsay/train.h; 0: not dynamic) */
    uint32_t scale_good;         /* v3: dynamic scaling's good steps since its last change */
    uint64_t checksum;           /* FNV-1a 64 of header (this field 0) + payload */
} hs_ckpt_hdr_t;

/* One rank's checkpoint in host memory. */
typedef struct hs_ckpt {
    int rank, size;
    long iteration;
    char algo[HS_CKPT_ALGO_MAX + 1];
    size_t num_params;
    float *params;       /* (num_params) */
    float *velocity;     /* (velocity_len) or NULL */
    size_t velocity_len; /* floats */
    void *state;         /* (state_bytes) or NULL */
    size_t state_bytes;
    float *bn;     /* (bn_len) batch-norm running statistics, or NULL */
    size_t bn_len; /* floats */
    /* the dynamic loss scale's state (mixed precision): the scale and its good steps; 0 and
     * 0 where the run that wrote it had none (or the part does not say: version 2) */
    float loss_scale;
    unsigned scale_good;
} hs_ckpt_t;

/* No run takes this many iterations: a header that says more is corrupt. */
#define HS_CKPT_ITER_MAX (1LL << 48)

/* FNV-1a 64 of n bytes, continuing from h (start with HS_FNV1A_INIT). */
#define HS_FNV1A_INIT 0xcbf29ce484222325ULL
uint64_t hs_ckpt_fnv1a(const void *p, size_t n, uint64_t h);

/* DIR/ckpt/rank-R.bin into buf. -ENAMETOOLONG when it does not fit. */
int hs_ckpt_path(char *buf, size_t cap, const char *dir, int rank);

/* Write c to path atomically (a temporary file beside it, fsync, rename, fsync of the
 * directory): a reader sees the previous file or the new one, whole, even when the writer is
 * killed midway. The parent directory must exist. Errors name the file. HS_TEST_CKPT_PAUSE
 * (seconds, tests only) sleeps between the fsync and the rename. */
int hs_ckpt_write(const char *path, const hs_ckpt_t *c);
/* Read and verify path (magic, version, section sizes against the file's size, an iteration
 * in [0, HS_CKPT_ITER_MAX], checksum) into *c (allocated; release with hs_ckpt_free). Errors name
 * the file and the problem. */
int hs_ckpt_read(const char *path, hs_ckpt_t *c);
void hs_ckpt_free(hs_ckpt_t *c);

/* Checkpoint sets (docs/algorithms.md, "Checkpoints"). A job-wide checkpoint at ITER is one
 * part per rank, DIR/ckpt/rank-R.it-ITER.bin (hs_ckpt_write: synced), and then, once every
 * part is durable, one manifest DIR/ckpt/set-ITER.manifest (rank 0) naming ITER, the job's
 * size, the algorithm and each part's checksum. --resume trusts the manifest only. */
int hs_ckpt_part_path(char *buf, size_t cap, const char *dir, int rank, long iteration);
int hs_ckpt_manifest_path(char *buf, size_t cap, const char *dir, long iteration);
/* Rank 0, after every rank's part at `iteration` is durable: check each part's header (rank,
 * size, iteration), write the manifest (synced), then remove the older sets (manifests
 * first) and the single-file layout's rank-R.bin. */
int hs_ckpt_set_commit(const char *dir, int size, long iteration);
/* The newest complete set of a `size`-rank job in DIR/ckpt: its manifest whole, every part
 * present, at the manifest's iteration, with the manifest's checksum, and whole (checksum of
 * the payload). *legacy 1 when it is the single-file layout (no manifest anywhere, every
 * rank-R.bin whole at one iteration). None: -ENOENT with a message naming each rank's parts
 * and their iterations. Never mixes iterations. */
int hs_ckpt_set_find(const char *dir, int size, long *iteration, int *legacy);
/* hs_ckpt_set_find reading the parts' headers only (their payload's checksum is not verified):
 * the check before a job starts (the load verifies in full). */
int hs_ckpt_set_check(const char *dir, int size, long *iteration);

/* Save rank `rank` of `size`: the worker's parameters and velocity and the algorithm's state
 * (a may be NULL or have no state slots), at `iteration`, to DIR/ckpt/rank-R.it-ITER.bin
 * (creating DIR/ckpt). The caller drains the algorithm first, and commits the set
 * (hs_ckpt_set_commit) once every rank's part is written. */
int hs_ckpt_save_run(const char *dir, int rank, int size, long iteration, hs_worker_t *w,
                     const hs_algo_ops_t *ops, hs_algo_t *a);
/* Load rank R's part of the newest complete set (hs_ckpt_set_find) into the worker (parameters,
 * velocity, data position: O(1) in the iteration) and the algorithm (state_load); *iteration gets
 * the saved iteration. Checks the iteration against the run's `total_iters` first (> 0; a
 * checkpoint past the end is refused before anything is restored), then rank, size, algorithm,
 * parameter count, velocity and state sizes; errors name the file and what differs. */
int hs_ckpt_load_run(const char *dir, int rank, int size, hs_worker_t *w, const hs_algo_ops_t *ops,
                     hs_algo_t *a, long total_iters, long *iteration);

/* A running rank's state in memory, for a replacement that joins the job (runtime/rejoin.h):
 * the worker's parameters, velocity and running statistics, the algorithm's state
 * (state_save) and the iteration, in a buffer of hs_ckpt_snapshot_bytes. hs_ckpt_adopt loads
 * one into this rank (sizes checked: -EPROTO naming what differs) and seeks the data to its
 * iteration (*iteration gets it). */
size_t hs_ckpt_snapshot_bytes(hs_worker_t *w, const hs_algo_ops_t *ops, hs_algo_t *a);
int hs_ckpt_snapshot(hs_worker_t *w, const hs_algo_ops_t *ops, hs_algo_t *a, long iteration,
                     void *buf, size_t len);
int hs_ckpt_adopt(const void *buf, size_t len, hs_worker_t *w, const hs_algo_ops_t *ops,
                  hs_algo_t *a, long total_iters, long *iteration);

#ifdef __cplusplus
}
#endif
#endif
