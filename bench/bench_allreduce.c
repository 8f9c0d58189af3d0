/*
 * bench/bench_allreduce.c — `hearsay bench allreduce`: our all-reduce beside Open MPI's
 * MPI_Allreduce, on N local ranks, in the same run.
 *
 * The command starts itself as N ranks twice per rank count: through `hearsay run -n N`
 * (--worker: hearsay's transport and hs_allreduce) and, where MPI is built in and mpirun is
 * found, through `mpirun -n N` (--mpi-worker: MPI_Allreduce on the same buffer). Each rank
 * times every repetition after a barrier; the time of a repetition is the slowest rank's,
 * and the median over repetitions is reported with the algorithm bandwidth (bytes / time)
 * and the bus bandwidth (bytes * 2(N-1)/N / time). Hearsay's buffer is memory of
 * hs_transport_buf_alloc by default (--buffer shared: as all-reduce SGD keeps its gradient),
 * and each of its repetitions also times one memcpy of the buffer on every rank at once (the
 * floor: the least memory traffic of any all-reduce). Rank 0 of each job prints "HSB ..."
 * result lines that this process collects and prints (one JSON object per ranks x size
 * with --json).
 */
#include "config.h"

#include "bench/bench_launch.h"
#include "bench/bench_util.h"
#include "hearsay/allreduce.h"
#include "hearsay/bootstrap.h"
#include "hearsay/common.h"
#include "hearsay/options.h"
#include "hearsay/env.h"
#include "hearsay/transport.h"
#include "tools/commands.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if HS_HAVE_MPI
#include <mpi.h>
#endif

#define BARRIER_TAG 0x7000u /* .. + HS_BL_TAG_SPAN: the 1-float all-reduce barrier */
#define TIMES_TAG   0x7100u

static const hs_option_t ar_options[] = {
    {.name = "ranks",
     .type = HS_OPT_STRING,
     .def = "2,4,8",
     .metavar = "LIST",
     .group = "Benchmark",
     .help = "rank counts to run, comma-separated"},
    {.name = "sizes",
     .type = HS_OPT_STRING,
     .def = "1M,16M,64M",
     .metavar = "LIST",
     .help = "buffer sizes in bytes (K/M/G = KiB/MiB/GiB), comma-separated"},
    {.name = "reps",
     .type = HS_OPT_INT,
     .def = "20",
     .range = "[1, 100000]",
     .help = "timed repetitions per size (the median is reported)"},
    {.name = "warmup",
     .type = HS_OPT_INT,
     .def = "3",
     .range = "[0, 100000]",
     .help = "untimed repetitions first"},
    {.name = "provider",
     .type = HS_OPT_STRING,
     .def = "auto",
     .metavar = "NAME",
     .help = "transport provider: auto (hsshm on one host), hsshm, or libfabric's tcp, shm, .."},
    {.name = "chunk",
     .type = HS_OPT_STRING,
     .def = "0",
     .metavar = "BYTES",
     .help = "all-reduce pipeline chunk (0: the library default; K/M suffixes)"},
    {.name = "depth",
     .type = HS_OPT_INT,
     .def = "0",
     .range = "[0, 4096]",
     .help = "receives posted ahead (0: the library default)"},
    {.name = "buffer",
     .type = HS_OPT_STRING,
     .def = "shared",
     .metavar = "KIND",
     .help = "hearsay's buffer: shared (hs_transport_buf_alloc, as all-reduce SGD allocates its "
             "gradients: over hsshm the peers map it and the all-reduce reads and writes it "
             "in place) or plain (malloc: over hsshm the direct path's process_vm_readv)"},
    {.name = "mpi",
     .type = HS_OPT_BOOL,
     .def = "true",
     .help = "also time MPI_Allreduce through mpirun (where MPI is built in)"},
    {.name = "timeout",
     .type = HS_OPT_DOUBLE,
     .def = "600",
     .range = "(0, 86400]",
     .help = "seconds each launched job may take"},
    {.name = "json",
     .type = HS_OPT_BOOL,
     .def = "false",
     .help = "one JSON object per (ranks, size)"},
    {.name = "worker",
     .type = HS_OPT_BOOL,
     .def = "false",
     .group = "Internal",
     .help = "run as one rank under hearsay run (used by the benchmark itself)"},
    {.name = "mpi-worker",
     .type = HS_OPT_BOOL,
     .def = "false",
     .help = "run as one rank under mpirun (used by the benchmark itself)"},
};

static const hs_cfg_spec_t ar_spec = {
    .usage = "hearsay bench allreduce [OPTIONS]",
    .summary =
        "Median time of an all-reduce (sum) of a float buffer on N local ranks: hearsay's\n"
        "(over hsshm on one host the mapped path for --buffer shared, the direct path for\n"
        "plain buffers, else the pipelined ring; HS_AR_PATH=ring|direct|mapped forces one)\n"
        "and Open MPI's MPI_Allreduce in the same run (mpirun --oversubscribe) where MPI is\n"
        "built in. Reports the algorithm bandwidth (bytes / time), the bus bandwidth\n"
        "(bytes * 2(N-1)/N / time), the floor (one memcpy of the buffer on every rank at\n"
        "once) and the ratio mpi_time / hearsay_time (> 1: hearsay is faster). Times are the\n"
        "slowest rank's.",
    .options = ar_options,
    .n_options = HS_ARRAY_LEN(ar_options),
};

/* Deterministic contents: small integers, so the first all-reduce can be checked exactly. */
static void fill(float *x, size_t n, int rank)
{
    for (size_t i = 0; i < n; i++) x[i] = (float)((i + (size_t)rank) % 8);
}

static int verify(const float *x, size_t n, int P)
{
    for (size_t i = 0; i < n; i++) {
        float e = 0;
        for (int r = 0; r < P; r++) e += (float)((i + (size_t)r) % 8);
        if (x[i] != e)
            return HS_ERR(-EIO, "all-reduce result wrong at element %zu: %g, expected %g", i, x[i],
                          e);
    }
    return 0;
}

/* ---------------------------------------------------------------- hearsay worker */

static int hearsay_worker(const hs_cfg_t *cfg, const size_t *sizes, int nsizes)
{
    int reps = (int)hs_cfg_int(cfg, "reps"), warmup = (int)hs_cfg_int(cfg, "warmup");
    hs_boot_t *b = NULL;
    hs_transport_t *t = NULL;
    hs_allreduce_t *ar = NULL, *bar = NULL; /* bar: 1-float all-reduce used as the barrier */
    float *x = NULL, *x0 = NULL, *one = NULL;
    const char *bufkind = hs_cfg_str(cfg, "buffer");
    int shared = !strcmp(bufkind, "shared");
    if (!shared && strcmp(bufkind, "plain") != 0) {
        fprintf(stderr, "hearsay bench allreduce: --buffer %s: expected shared or plain\n",
                bufkind);
        return 1;
    }
    /* times[0..reps): the all-reduce; times[reps..2 reps): the floor's copy */
    double *times = hs_malloc(2 * (size_t)reps * sizeof *times, "timings");
    if (!times) return 1;
    hs_transport_opts_t to;
    int rc = hs_transport_opts_default(&to);
    const char *prov = hs_cfg_str(cfg, "provider");
    if (strcmp(prov, "auto") != 0) to.provider = prov;
    if (rc == 0) rc = hs_boot_init(&b, NULL);
    if (rc == 0) rc = hs_transport_open(&t, b, &to);
    /* The barrier's float lies in shared memory like the buffer: every all-reduce here takes
     * the path the buffer kind gives. */
    if (rc == 0) rc = shared ? hs_transport_buf_alloc(t, sizeof *one, (void **)&one) : 0;
    if (rc == 0 && !shared && !(one = hs_malloc(sizeof *one, "barrier"))) rc = -ENOMEM;
    if (rc == 0) *one = 1;
    hs_allreduce_opts_t ao;
    if (rc == 0) rc = hs_allreduce_opts_default(&ao);
    /* The transport's barrier sends 1-byte messages, which libfabric 1.17's shm provider can
     * lose when they arrive before their receive (see gossip/allreduce.c): use our own. */
    if (rc == 0) {
        hs_allreduce_opts_t bo = ao; /* its own tags, apart from the measured all-reduce's */
        bo.tag_base = BARRIER_TAG;
        bo.tag_span = HS_BL_TAG_SPAN;
        rc = hs_allreduce_create(&bar, t, 1, &bo);
    }
    size_t chunk = 0;
    int nchunk = 0;
    if (rc == 0 && strcmp(hs_cfg_str(cfg, "chunk"), "0") != 0)
        rc = hs_bl_parse_sizes(hs_cfg_str(cfg, "chunk"), "--chunk", &chunk, &nchunk);
    if (rc == 0 && chunk) ao.chunk_bytes = chunk;
    if (hs_cfg_int(cfg, "depth")) ao.depth = (int)hs_cfg_int(cfg, "depth");
    for (int si = 0; rc == 0 && si < nsizes; si++) {
        int rank = hs_transport_rank(t), P = hs_transport_size(t);
        size_t n = sizes[si] / sizeof(float);
        /* shared: as optim/allreduce_sgd.c allocates the gradients it all-reduces */
        if (shared && (rc = hs_transport_buf_alloc(t, n * sizeof *x, (void **)&x)) < 0) break;
        if (!shared) x = hs_malloc(n * sizeof *x, "all-reduce buffer");
        x0 = hs_malloc(n * sizeof *x0, "all-reduce buffer copy");
        if (!x || !x0) {
            rc = -ENOMEM;
            break;
        }
        fill(x0, n, rank);
        if ((rc = hs_allreduce_create(&ar, t, n, &ao)) < 0) break;
        memcpy(x, x0, n * sizeof *x);
        if ((rc = hs_allreduce_run(ar, x)) < 0 || (rc = verify(x, n, P)) < 0) break;
        /* The floor first: every rank copies the buffer once at the same time, after a
         * barrier (reads and writes it once: the least memory traffic of any all-reduce). */
        for (int i = 0; rc == 0 && i < warmup + reps; i++) {
            if ((rc = hs_allreduce_run(bar, one)) < 0) break;
            double t0 = hs_now();
            memcpy(x, x0, n * sizeof *x);
            if (i >= warmup) times[reps + i - warmup] = hs_now() - t0;
        }
        /* The all-reduce, in the MPI worker's loop: reset, barrier, timed call. (A barrier
         * before the reset too made the mapped path 1.3-1.8x faster here on 4 ranks / 2 cores,
         * so the two workers must loop alike.) */
        for (int i = 0; rc == 0 && i < warmup + reps; i++) {
            memcpy(x, x0, n * sizeof *x);
            if ((rc = hs_allreduce_run(bar, one)) < 0) break;
            double t0 = hs_now();
            rc = hs_allreduce_run(ar, x);
            if (i >= warmup) times[i - warmup] = hs_now() - t0;
        }
        if (rc == 0) rc = verify(x, n, P); /* the last repetition too (untimed) */
        if (rc == 0) rc = hs_bl_gather_max(t, times, 2 * reps, TIMES_TAG);
        if (rc == 0 && rank == 0) {
            double min = times[0];
            for (int i = 1; i < reps; i++) min = HS_MIN(min, times[i]);
            double med = hs_bench_median(times, (size_t)reps);
            double floor = hs_bench_median(times + reps, (size_t)reps);
            printf("HSB impl=hearsay ranks=%d bytes=%zu median_s=%.6e min_s=%.6e reps=%d "
                   "provider=%s chunk=%zu depth=%d buffer=%s path=%s floor_s=%.6e\n",
                   P, n * sizeof(float), med, min, reps, hs_transport_provider(t), ao.chunk_bytes,
                   ao.depth, bufkind, hs_env_str("HS_AR_PATH") ?: "auto", floor);
            fflush(stdout);
        }
        hs_allreduce_destroy(&ar);
        if (shared)
            hs_transport_buf_free(t, (void **)&x);
        else
            HS_FREE(x);
        HS_FREE(x0);
    }
    if (rc == 0) rc = hs_allreduce_run(bar, one);
    if (rc < 0) fprintf(stderr, "hearsay bench allreduce (worker): %s\n", hs_last_error());
    hs_allreduce_destroy(&ar);
    hs_allreduce_destroy(&bar);
    if (shared && t) {
        hs_transport_buf_free(t, (void **)&x);
        hs_transport_buf_free(t, (void **)&one);
    } else {
        free(x);
        free(one);
    }
    free(x0);
    free(times);
    hs_transport_close(&t);
    hs_boot_finalize(&b);
    return rc < 0 ? 1 : 0;
}

/* ---------------------------------------------------------------- MPI worker */

#if HS_HAVE_MPI
static int mpi_worker(const hs_cfg_t *cfg, const size_t *sizes, int nsizes)
{
    int reps = (int)hs_cfg_int(cfg, "reps"), warmup = (int)hs_cfg_int(cfg, "warmup");
    MPI_Init(NULL, NULL);
    int rank, P, rc = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    double *times = hs_malloc((size_t)reps * sizeof *times, "timings");
    double *tmax = hs_malloc((size_t)reps * sizeof *tmax, "timings");
    if (!times || !tmax) rc = -ENOMEM;
    for (int si = 0; rc == 0 && si < nsizes; si++) {
        size_t n = sizes[si] / sizeof(float);
        float *x = hs_malloc(n * sizeof *x, "all-reduce buffer");
        float *x0 = hs_malloc(n * sizeof *x0, "all-reduce buffer copy");
        if (!x || !x0 || n > INT_MAX) {
            free(x);
            free(x0);
            rc = x && x0 ? HS_ERR(-EINVAL, "MPI: %zu floats do not fit an int count", n) : -ENOMEM;
            break;
        }
        fill(x0, n, rank);
        memcpy(x, x0, n * sizeof *x);
        MPI_Allreduce(MPI_IN_PLACE, x, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        rc = verify(x, n, P);
        for (int i = 0; rc == 0 && i < warmup + reps; i++) {
            memcpy(x, x0, n * sizeof *x);
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            MPI_Allreduce(MPI_IN_PLACE, x, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            if (i >= warmup) times[i - warmup] = MPI_Wtime() - t0;
        }
        if (rc == 0) {
            MPI_Reduce(times, tmax, reps, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            if (rank == 0) {
                double min = tmax[0];
                for (int i = 1; i < reps; i++) min = HS_MIN(min, tmax[i]);
                double med = hs_bench_median(tmax, (size_t)reps);
                char ver[MPI_MAX_LIBRARY_VERSION_STRING];
                int vl = 0;
                MPI_Get_library_version(ver, &vl);
                char *comma = strchr(ver, ',');
                if (comma) *comma = '\0';
                for (char *c = ver; *c; c++)
                    if (*c == ' ' || *c == '\n') *c = '_';
                printf("HSB impl=mpi ranks=%d bytes=%zu median_s=%.6e min_s=%.6e reps=%d "
                       "library=%s\n",
                       P, n * sizeof(float), med, min, reps, ver);
                fflush(stdout);
            }
        }
        free(x);
        free(x0);
    }
    if (rc < 0) fprintf(stderr, "hearsay bench allreduce (MPI worker): %s\n", hs_last_error());
    free(times);
    free(tmax);
    if (rc < 0) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Finalize();
    return rc < 0 ? 1 : 0;
}
#endif

/* ---------------------------------------------------------------- driver */

typedef struct result {
    int have;
    double med, min;
    char provider[64], library[128], buffer[16], path[16];
    double floor;
    size_t chunk;
    int depth, reps;
} result_t;

/* Run one job and store rank 0's results by size index. */
static int collect(char *const argv[], double limit_s, const size_t *sizes, int nsizes,
                   result_t *res, const char *what)
{
    char *out = NULL;
    int status;
    HS_TRY(hs_bl_capture(argv, limit_s, &out, &status));
    size_t pos = 0;
    char line[1024], v[256];
    while (hs_bl_next_result(out, &pos, line, sizeof line)) {
        size_t bytes = (size_t)strtoull(hs_bl_field(line, "bytes", v, sizeof v) ?: "0", NULL, 10);
        for (int i = 0; i < nsizes; i++) {
            if (sizes[i] / 4 * 4 != bytes) continue;
            result_t *r = &res[i];
            r->have = 1;
            r->med = atof(hs_bl_field(line, "median_s", v, sizeof v) ?: "nan");
            r->min = atof(hs_bl_field(line, "min_s", v, sizeof v) ?: "nan");
            snprintf(r->provider, sizeof r->provider, "%s",
                     hs_bl_field(line, "provider", v, sizeof v) ?: "");
            snprintf(r->library, sizeof r->library, "%s",
                     hs_bl_field(line, "library", v, sizeof v) ?: "");
            for (char *c = r->library; *c; c++)
                if (*c == '_') *c = ' ';
            r->chunk = (size_t)strtoull(hs_bl_field(line, "chunk", v, sizeof v) ?: "0", NULL, 10);
            r->depth = atoi(hs_bl_field(line, "depth", v, sizeof v) ?: "0");
            snprintf(r->buffer, sizeof r->buffer, "%s",
                     hs_bl_field(line, "buffer", v, sizeof v) ?: "");
            snprintf(r->path, sizeof r->path, "%s", hs_bl_field(line, "path", v, sizeof v) ?: "");
            r->reps = atoi(hs_bl_field(line, "reps", v, sizeof v) ?: "0");
            r->floor = atof(hs_bl_field(line, "floor_s", v, sizeof v) ?: "nan");
        }
    }
    free(out);
    if (status != 0)
        return HS_ERR(-EIO, "%s exited with status %d%s (its errors are above)", what, status,
                      status < 0 ? " (killed: over --timeout)" : "");
    return 0;
}

static void print_result(int json, int P, size_t bytes, const result_t *h, const result_t *m,
                         const char *mpi_note)
{
    double f = 2.0 * (P - 1) / P;
    double h_alg = bytes / h->med / 1e9, h_bus = h_alg * f;
    char sz[32];
    hs_bl_size_text(bytes, sz, sizeof sz);
    if (json) {
        printf("{\"bench\": \"allreduce\", \"ranks\": %d, \"bytes\": %zu, \"size\": \"%s\", "
               "\"cores\": %d, \"provider\": \"%s\", \"fi_shm_disable_cma\": \"%s\", "
               "\"chunk_bytes\": %zu, \"depth\": %d, \"buffer\": \"%s\", \"path\": \"%s\", "
               "\"reps\": %d, \"median_s\": %.6g, \"min_s\": %.6g, \"algbw_GBps\": %.4g, "
               "\"busbw_GBps\": %.4g, \"floor_s\": %.6g, \"floor_ratio\": %.4g",
               P, bytes, sz, hs_bl_cores(), h->provider, getenv("FI_SHM_DISABLE_CMA") ?: "unset",
               h->chunk, h->depth, h->buffer, h->path, h->reps, h->med, h->min, h_alg, h_bus,
               h->floor, h->med / h->floor);
        if (m && m->have) {
            double m_alg = bytes / m->med / 1e9;
            printf(", \"mpi\": \"%s\", \"mpi_median_s\": %.6g, \"mpi_min_s\": %.6g, "
                   "\"mpi_algbw_GBps\": %.4g, \"mpi_busbw_GBps\": %.4g, "
                   "\"mpi_over_hearsay\": %.4g}\n",
                   m->library, m->med, m->min, m_alg, m_alg * f, m->med / h->med);
        } else {
            printf(", \"mpi\": null, \"mpi_note\": \"%s\"}\n", mpi_note);
        }
    } else {
        printf("ranks %d  %6s  hearsay (%s, %s) %8.3f ms  busbw %6.2f GB/s  floor %7.3f ms (x%.2f)",
               P, sz, h->buffer, h->path, h->med * 1e3, h_bus, h->floor * 1e3, h->med / h->floor);
        if (m && m->have)
            printf("  |  MPI %9.3f ms  busbw %6.2f GB/s  |  mpi/hearsay %.2f\n", m->med * 1e3,
                   bytes / m->med / 1e9 * f, m->med / h->med);
        else
            printf("  |  MPI: %s\n", mpi_note);
    }
    fflush(stdout);
}

int hs_bench_allreduce(int argc, char **argv)
{
    hs_cfg_t *cfg = NULL;
    size_t sizes[HS_BL_MAX_LIST];
    int ranks[HS_BL_MAX_LIST], nsizes = 0, nranks = 0;
    int early =
        hs_bl_start("allreduce", &ar_spec, argc, argv, 1, &cfg, sizes, &nsizes, ranks, &nranks);
    if (early >= 0) return early;
    int status = 0;
    if (hs_cfg_bool(cfg, "worker")) {
        status = hearsay_worker(cfg, sizes, nsizes);
        hs_cfg_free(&cfg);
        return status;
    }
    if (hs_cfg_bool(cfg, "mpi-worker")) {
#if HS_HAVE_MPI
        status = mpi_worker(cfg, sizes, nsizes);
#else
        fprintf(stderr, "hearsay bench allreduce: built without MPI\n");
        status = 1;
#endif
        hs_cfg_free(&cfg);
        return status;
    }

    char self[PATH_MAX], reps[32], warmup[32], depth[32];
    if (hs_bl_self(self, sizeof self) < 0) {
        fprintf(stderr, "hearsay bench allreduce: %s\n", hs_last_error());
        hs_cfg_free(&cfg);
        return 1;
    }
    snprintf(reps, sizeof reps, "%ld", hs_cfg_int(cfg, "reps"));
    snprintf(warmup, sizeof warmup, "%ld", hs_cfg_int(cfg, "warmup"));
    snprintf(depth, sizeof depth, "%ld", hs_cfg_int(cfg, "depth"));
    const char *mpi_note = NULL;
#if HS_HAVE_MPI
    if (!hs_cfg_bool(cfg, "mpi"))
        mpi_note = "skipped (--no-mpi)";
    else if (!hs_bl_in_path("mpirun"))
        mpi_note = "mpirun not found in PATH: no MPI reference";
#else
    mpi_note = "hearsay was built without MPI: no MPI reference";
#endif
    int json = hs_cfg_bool(cfg, "json");
    double limit = hs_cfg_double(cfg, "timeout");
    if (!json)
        printf("all-reduce (sum, float32): median of %s repetitions, slowest rank; %d cores\n",
               reps, hs_bl_cores());
    if (mpi_note && !json) printf("MPI: %s\n", mpi_note);
    for (int ri = 0; ri < nranks; ri++) {
        char np[16];
        snprintf(np, sizeof np, "%d", ranks[ri]);
        result_t hres[HS_BL_MAX_LIST], mres[HS_BL_MAX_LIST];
        memset(hres, 0, sizeof hres);
        memset(mres, 0, sizeof mres);
        char *hargv[] = {self,
                         "run",
                         "-n",
                         np,
                         "--",
                         self,
                         "bench",
                         "allreduce",
                         "--worker",
                         "--sizes",
                         (char *)hs_cfg_str(cfg, "sizes"),
                         "--reps",
                         reps,
                         "--warmup",
                         warmup,
                         "--provider",
                         (char *)hs_cfg_str(cfg, "provider"),
                         "--chunk",
                         (char *)hs_cfg_str(cfg, "chunk"),
                         "--depth",
                         depth,
                         "--buffer",
                         (char *)hs_cfg_str(cfg, "buffer"),
                         NULL};
        if (collect(hargv, limit, sizes, nsizes, hres, "the hearsay ranks") < 0) {
            fprintf(stderr, "hearsay bench allreduce (%d ranks): %s\n", ranks[ri], hs_last_error());
            status = 1;
            continue;
        }
        const char *note = mpi_note;
        if (!note) {
            char *margv[] = {"mpirun",
                             "--allow-run-as-root",
                             "--oversubscribe",
                             "-n",
                             np,
                             self,
                             "bench",
                             "allreduce",
                             "--mpi-worker",
                             "--sizes",
                             (char *)hs_cfg_str(cfg, "sizes"),
                             "--reps",
                             reps,
                             "--warmup",
                             warmup,
                             NULL};
            if (collect(margv, limit, sizes, nsizes, mres, "mpirun") < 0) {
                fprintf(stderr, "hearsay bench allreduce (%d ranks, MPI): %s\n", ranks[ri],
                        hs_last_error());
                note = "the MPI run failed (see stderr)";
            }
        }
        for (int si = 0; si < nsizes; si++) {
            if (!hres[si].have) {
                fprintf(stderr, "hearsay bench allreduce: no result for %d ranks, %zu bytes\n",
                        ranks[ri], sizes[si]);
                status = 1;
                continue;
            }
            print_result(json, ranks[ri], sizes[si] / 4 * 4, &hres[si], &mres[si],
                         note ? note : "no MPI result");
        }
    }
    hs_cfg_free(&cfg);
    return status;
}
