/*
 * bench/bench_compress.c — `hearsay bench compress`: compress and decompress speed of every
 * compressor (hearsay/compress.h) on one core, in GB/s of float32 input (4 n bytes over the
 * time of one call), beside memcpy of the same 4 n bytes measured in the same run: once before
 * every compressor, and again interleaved with its calls (one memcpy before each call, so a
 * loaded machine slows both alike; the `memcpy GB/s` column). Medians over --reps calls after a
 * warm-up call. Default input: --n 4194304 floats (16 MiB, a model
 * of 4M parameters; it may fit a large L3, so give --n 67108864 for a memory-bound figure).
 */
#include "bench/bench_util.h"
#include "hearsay/common.h"
#include "hearsay/compress.h"
#include "tools/commands.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static clockid_t bench_clock = CLOCK_MONOTONIC;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(bench_clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: hearsay bench compress [--n FLOATS] [--reps R] [--spec SPEC]... [--cpu-time]\n"
            "                              [--json]\n"
            "  compress / decompress GB/s of float32 input on one core, beside memcpy\n"
            "  (--cpu-time: time on this thread's CPU clock, not the wall clock: on a loaded\n"
            "  machine it leaves out the time the thread waited for a core)\n"
            "  (default: --n 4194304, --reps 9, every compressor; SPEC: %s)\n",
            hs_compress_help());
}

int hs_bench_compress(int argc, char **argv)
{
    long n = 4194304, reps = 9;
    float *x = NULL, *y = NULL, *z = NULL;
    unsigned char *w = NULL;
    double *t = NULL, *tm = NULL;
    int json = 0;
    bench_clock = CLOCK_MONOTONIC;
    const char *specs[32];
    int nspecs = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--cpu-time")) {
            bench_clock = CLOCK_THREAD_CPUTIME_ID;
        } else if (!strcmp(a, "--n") && v) {
            if (hs_parse_long(v, 1, 1L << 30, "--n", &n) < 0) goto bad;
            i++;
        } else if (!strcmp(a, "--reps") && v) {
            if (hs_parse_long(v, 1, 1000, "--reps", &reps) < 0) goto bad;
            i++;
        } else if (!strcmp(a, "--spec") && v && nspecs < 32) {
            hs_compress_spec_t s;
            if (hs_compress_parse(v, &s) < 0) goto bad;
            specs[nspecs++] = v;
            i++;
        } else {
            fprintf(stderr, "hearsay bench compress: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!nspecs) {
        static const char *all[] = {"fp16",    "bf16",     "int8",     "int8:stochastic",
                                    "topk:1%", "topk:10%", "randk:1%", "none"};
        for (size_t i = 0; i < HS_ARRAY_LEN(all); i++) specs[nspecs++] = all[i];
    }
    const size_t N = (size_t)n, bytes_in = N * 4;
    x = malloc(bytes_in), y = malloc(bytes_in), z = malloc(bytes_in);
    w = malloc(bytes_in + 64);
    t = calloc((size_t)reps, sizeof *t);
    tm = calloc(3 * (size_t)reps, sizeof *tm);
    int status = 1;
    if (!x || !y || !z || !w || !t || !tm) goto done;
    uint64_t s = 88172645463325252ull;
    for (size_t i = 0; i < N; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        x[i] = (float)((double)(s >> 11) * 0x1p-53 - 0.5) * (i % 5 ? 0.01f : 1.0f);
    }
    memset(y, 0, bytes_in);
    memset(z, 0, bytes_in);
    /* memcpy of the same bytes, the bandwidth every pass is priced against */
    memcpy(y, x, bytes_in);
    for (long r = 0; r < reps; r++) {
        double t0 = now_s();
        memcpy(y, x, bytes_in);
        t[r] = now_s() - t0;
    }
    double memcpy_gbs = (double)bytes_in / hs_bench_median(t, (size_t)reps) / 1e9;
    if (json)
        printf("{\"bench\":\"compress\",\"spec\":\"memcpy\",\"n\":%zu,\"gbs\":%.3f,"
               "\"clock\":\"%s\"}\n",
               N, memcpy_gbs, bench_clock == CLOCK_MONOTONIC ? "wall" : "thread_cpu");
    else {
        printf("hearsay bench compress: %zu floats (%.1f MiB), median of %ld, one core, %s\n", N,
               (double)bytes_in / 1048576.0, reps,
               bench_clock == CLOCK_MONOTONIC ? "wall clock" : "thread CPU time");
        printf("%-18s %12s %8s %14s %16s %18s %10s %12s\n", "compressor", "wire bytes", "ratio",
               "compress GB/s", "decompress GB/s", "decompress+add GB/s", "max |err|",
               "memcpy GB/s");
        printf("%-18s %12zu %8.2f %14.2f %16s %18s %10s %12s\n", "memcpy", bytes_in, 1.0,
               memcpy_gbs, "", "", "", "");
    }
    for (int si = 0; si < nspecs; si++) {
        hs_compressor_t *c = NULL;
        if (hs_compressor_create(&c, specs[si], N, 1) < 0) goto bad;
        size_t wb = 0;
        double tc[3];
        for (int phase = 0; phase < 3; phase++) {
            for (long r = -1; r < reps; r++) { /* r = -1: warm-up */
                double t0 = now_s();
                memcpy(y, x, bytes_in); /* the interleaved reference */
                if (r >= 0) tm[phase * reps + r] = now_s() - t0;
                t0 = now_s();
                int rc = phase == 0   ? hs_compress(c, x, w, &wb)
                         : phase == 1 ? hs_decompress(c, w, wb, y)
                                      : hs_decompress_add(c, w, wb, 1.0f, z);
                double dt = now_s() - t0;
                if (rc < 0) {
                    hs_compressor_destroy(&c);
                    goto bad;
                }
                if (r >= 0) t[r] = dt;
            }
            tc[phase] = (double)bytes_in / hs_bench_median(t, (size_t)reps) / 1e9;
        }
        double mc = (double)bytes_in / hs_bench_median(tm, 3 * (size_t)reps) / 1e9;
        if (hs_decompress(c, w, wb, y) < 0) { /* y last held the interleaved memcpy's copy */
            hs_compressor_destroy(&c);
            goto bad;
        }
        float err = 0;
        for (size_t i = 0; i < N; i++) err = fmaxf(err, fabsf(y[i] - x[i]));
        if (json)
            printf("{\"bench\":\"compress\",\"spec\":\"%s\",\"n\":%zu,\"wire_bytes\":%zu,"
                   "\"compress_gbs\":%.3f,\"decompress_gbs\":%.3f,\"decompress_add_gbs\":%.3f,"
                   "\"memcpy_gbs\":%.3f,\"memcpy_interleaved_gbs\":%.3f,\"max_abs_err\":%g}\n",
                   specs[si], N, wb, tc[0], tc[1], tc[2], memcpy_gbs, mc, err);
        else
            printf("%-18s %12zu %8.2f %14.2f %16.2f %18.2f %10.3g %12.2f\n", specs[si], wb,
                   (double)bytes_in / (double)wb, tc[0], tc[1], tc[2], err, mc);
        hs_compressor_destroy(&c);
    }
    status = 0;
    goto done;
bad:
    fprintf(stderr, "hearsay bench compress: %s\n", hs_last_error());
    status = 2;
done:
    free(x);
    free(y);
    free(z);
    free(w);
    free(t);
    free(tm);
    return status;
}
