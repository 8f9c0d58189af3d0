/*
 * tests/allreduce_worker.c — one rank of the all-reduce tests, started by `hearsay run`.
 *
 *   allreduce_worker check N1 N2 ...   all-reduce buffers of N1, N2, ... floats (sum, average,
 *                                      back-to-back calls, one-shot, small chunks) and compare
 *                                      each result with the sum computed directly here;
 *                                      prints "AR_OK rank R" and exits 0 when all match
 *   allreduce_worker crash D T         one good all-reduce, then rank D exits (status 0, so
 *                                      the launcher keeps the others); the others run another
 *                                      with a T-second timeout and print
 *                                      "AR_DETECTED rank R after S s: MESSAGE" (exit 0), or
 *                                      "AR_MISSED" (exit 1) if it succeeded
 *   allreduce_worker late D T          the same, but rank D sleeps 2T + 1 s instead of exiting,
 *                                      then runs its all-reduce too and prints "AR_LATE rank D:
 *                                      MESSAGE" (exit 0 either way)
 *   allreduce_worker timed N K         one all-reduce of N floats (sets the plan up), then K
 *                                      more, timed, each checked; prints "AR_TIME rank R
 *                                      s_per_op S" and "AR_OK rank R" (the link-shaping test
 *                                      holds S against the bytes over the shaped bandwidth)
 *
 * AR_BUF selects the buffers: "shared" (hs_transport_buf_alloc, as all-reduce SGD allocates
 * its gradients: the mapped path over hsshm), "mixed" (shared except on rank 0: every rank
 * takes the copying fallback), else plain malloc.
 *
 * AR_HOSTS=H (check, timed) gives the plan a host map of H hosts, P / H consecutive ranks
 * each (opts.host_of): the hierarchical all-reduce, over whatever transport runs it.
 *
 * Values are small integers, so sums are exact in float and compared with ==.
 */
#include "hearsay/allreduce.h"
#include "hearsay/bootstrap.h"
#include "hearsay/common.h"
#include "hearsay/transport.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Rank r's value at i in round `round`: an integer in [-60, 60]. */
static float value(int r, size_t i, int round)
{
    return (float)((long)((i * 7 + (size_t)r * 13 + (size_t)round * 29) % 101) - 50 + r % 10);
}

/* The host map of AR_HOSTS (NULL when unset): ranks r / (P / H). */
static const int *fake_hosts(int P)
{
    static int map[4096];
    const char *e = getenv("AR_HOSTS");
    int H = e ? atoi(e) : 0;
    if (H < 1 || P > 4096 || P % H) return NULL;
    for (int r = 0; r < P; r++) map[r] = r / (P / H);
    return map;
}

static void fill(float *x, size_t n, int r, int round)
{
    for (size_t i = 0; i < n; i++) x[i] = value(r, i, round);
}

/* Compare x with the direct sum over P ranks (divided by P when avg). Returns 0 or 1. */
static int check(const float *x, size_t n, int P, int round, int avg, int rank, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        double s = 0;
        for (int r = 0; r < P; r++) s += value(r, i, round);
        int ok;
        if (avg) {
            double e = s / P;
            ok = fabs(x[i] - e) <= 1e-6 * HS_MAX(1.0, fabs(e));
        } else {
            ok = x[i] == (float)s;
        }
        if (!ok) {
            printf("AR_FAIL rank %d %s n=%zu: element %zu is %.9g, expected %.9g\n", rank, what, n,
                   i, x[i], avg ? s / P : s);
            return 1;
        }
    }
    return 0;
}

static int fail(int rank, const char *what, int rc)
{
    printf("AR_FAIL rank %d %s: rc %d: %s\n", rank, what, rc, hs_last_error());
    return 1;
}

/* A buffer of n floats of the kind AR_BUF asks for (see the top); free it with buf_free. */
static int shared_buf(hs_transport_t *t)
{
    const char *k = getenv("AR_BUF");
    if (!k) return 0;
    return !strcmp(k, "shared") || (!strcmp(k, "mixed") && hs_transport_rank(t) != 0);
}

static float *buf_alloc(hs_transport_t *t, size_t n)
{
    void *p = NULL;
    if (shared_buf(t))
        return hs_transport_buf_alloc(t, (n ? n : 1) * sizeof(float), &p) < 0 ? NULL : p;
    return malloc((n ? n : 1) * sizeof(float));
}

static void buf_free(hs_transport_t *t, float *x)
{
    void *p = x;
    if (shared_buf(t))
        hs_transport_buf_free(t, &p);
    else
        free(x);
}

/* Every check on buffers of n floats; 0 or 1 (reported), everything freed either way. */
static int check_size(hs_transport_t *t, size_t n)
{
    int rank = hs_transport_rank(t), P = hs_transport_size(t), st = 1, rc = 0;
    float *x = buf_alloc(t, n), *y = NULL;
    hs_allreduce_t *ar = NULL;
    hs_allreduce_opts_t o;
    hs_allreduce_opts_default(&o);
    o.timeout_s = 20;
    o.host_of = fake_hosts(P);
    if (!x) {
        fail(rank, "buf_alloc", -ENOMEM);
        goto out;
    }
    if ((rc = hs_allreduce_create(&ar, t, n, &o)) < 0) {
        fail(rank, "create", rc);
        goto out;
    }
    /* Back-to-back sums on one plan, then an average. */
    for (int round = 0; round < 3; round++) {
        fill(x, n, rank, round);
        if ((rc = hs_allreduce_run(ar, x)) < 0) {
            fail(rank, "sum", rc);
            goto out;
        }
        if (check(x, n, P, round, 0, rank, "sum")) goto out;
    }
    fill(x, n, rank, 3);
    if ((rc = hs_allreduce_run_avg(ar, x, 1)) < 0) {
        fail(rank, "average", rc);
        goto out;
    }
    if (check(x, n, P, 3, 1, rank, "average")) goto out;
    hs_allreduce_destroy(&ar);
    /* One-shot calls, twice in a row, with tiny chunks (many items, each padded on the
     * wire) where the buffer is not huge. */
    if (n <= 100000) o.chunk_bytes = 40;
    for (int round = 4; round < 6; round++) {
        fill(x, n, rank, round);
        o.average = round == 5;
        if ((rc = hs_allreduce_sum(t, x, n, &o)) < 0) {
            fail(rank, "one-shot", rc);
            goto out;
        }
        if (check(x, n, P, round, o.average, rank, "one-shot")) goto out;
    }
    /* Another buffer on the same plan, then the first again (the peers remap). */
    if (n > 0) {
        o.chunk_bytes = 0;
        o.average = 0;
        if (!(y = buf_alloc(t, n))) {
            fail(rank, "buf_alloc", -ENOMEM);
            goto out;
        }
        if ((rc = hs_allreduce_create(&ar, t, n, &o)) < 0) {
            fail(rank, "create", rc);
            goto out;
        }
        for (int round = 6; round < 9; round++) {
            float *z = round == 7 ? y : x;
            fill(z, n, rank, round);
            if ((rc = hs_allreduce_run(ar, z)) < 0) {
                fail(rank, "sum, two buffers", rc);
                goto out;
            }
            if (check(z, n, P, round, 0, rank, "sum, two buffers")) goto out;
        }
    }
    st = 0;
out:
    hs_allreduce_destroy(&ar);
    if (y) buf_free(t, y);
    if (x) buf_free(t, x);
    return st;
}

static int run_checks(hs_transport_t *t, int argc, char **argv)
{
    for (int a = 0; a < argc; a++)
        if (check_size(t, (size_t)strtoul(argv[a], NULL, 10))) return 1;
    printf("AR_OK rank %d\n", hs_transport_rank(t));
    return 0;
}

static int run_timed(hs_transport_t *t, size_t n, int k)
{
    int rank = hs_transport_rank(t), P = hs_transport_size(t), st = 1, rc;
    float *x = buf_alloc(t, n);
    hs_allreduce_t *ar = NULL;
    hs_allreduce_opts_t o;
    hs_allreduce_opts_default(&o);
    o.timeout_s = 60;
    o.host_of = fake_hosts(hs_transport_size(t));
    if (!x) return fail(rank, "buf_alloc", -ENOMEM);
    if ((rc = hs_allreduce_create(&ar, t, n, &o)) < 0) {
        fail(rank, "create", rc);
        goto out;
    }
    double t0 = 0;
    for (int round = 0; round <= k; round++) {
        fill(x, n, rank, round);
        if (round == 1) t0 = hs_now();
        if ((rc = hs_allreduce_run(ar, x)) < 0) {
            fail(rank, "timed sum", rc);
            goto out;
        }
        if (check(x, n, P, round, 0, rank, "timed sum")) goto out;
    }
    printf("AR_TIME rank %d s_per_op %.6f\n", rank, k > 0 ? (hs_now() - t0) / k : 0.0);
    printf("AR_OK rank %d\n", rank);
    st = 0;
out:
    hs_allreduce_destroy(&ar);
    buf_free(t, x);
    return st;
}

static int run_crash(hs_transport_t *t, int die, double timeout_s, int late)
{
    int rank = hs_transport_rank(t), P = hs_transport_size(t);
    size_t n = 100000;
    float *x = buf_alloc(t, n);
    if (!x) return fail(rank, "buf_alloc", -ENOMEM);
    hs_allreduce_opts_t o;
    hs_allreduce_opts_default(&o);
    o.timeout_s = timeout_s;
    hs_allreduce_t *ar = NULL;
    int rc = hs_allreduce_create(&ar, t, n, &o);
    if (rc < 0) return fail(rank, "create", rc);
    fill(x, n, rank, 0);
    if ((rc = hs_allreduce_run(ar, x)) < 0) return fail(rank, "first all-reduce", rc);
    if (check(x, n, P, 0, 0, rank, "first all-reduce")) return 1;
    fflush(stdout);
    if (rank == die && !late) _exit(0);
    if (rank == die) usleep((useconds_t)((2 * timeout_s + 1) * 1e6));
    fill(x, n, rank, 1);
    double t0 = hs_now();
    rc = hs_allreduce_run(ar, x);
    double dt = hs_now() - t0;
    if (rank == die) {
        printf("AR_LATE rank %d: %s\n", rank, rc == 0 ? "succeeded" : hs_last_error());
        fflush(stdout);
        _exit(0);
    }
    if (rc == 0) {
        printf("AR_MISSED rank %d: the all-reduce succeeded without rank %d\n", rank, die);
        return 1;
    }
    printf("AR_DETECTED rank %d after %.2f s: %s\n", rank, dt, hs_last_error());
    fflush(stdout);
    /* Leave at once, without a barrier: the job is broken. */
    _exit(0);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2) {
        fprintf(stderr, "usage: allreduce_worker check N... | crash|late RANK TIMEOUT\n");
        return 2;
    }
    hs_boot_t *b = NULL;
    hs_transport_t *t = NULL;
    int rc = hs_boot_init(&b, NULL);
    if (rc == 0) rc = hs_transport_open(&t, b, NULL);
    if (rc < 0) {
        printf("AR_FAIL start-up: %s\n", hs_last_error());
        return 1;
    }
    int st;
    if (!strcmp(argv[1], "check")) {
        st = run_checks(t, argc - 2, argv + 2);
    } else if (!strcmp(argv[1], "timed") && argc == 4) {
        st = run_timed(t, (size_t)strtoul(argv[2], NULL, 10), atoi(argv[3]));
    } else if ((!strcmp(argv[1], "crash") || !strcmp(argv[1], "late")) && argc == 4) {
        st = run_crash(t, atoi(argv[2]), atof(argv[3]), !strcmp(argv[1], "late"));
    } else {
        fprintf(stderr, "allreduce_worker: unknown mode '%s'\n", argv[1]);
        st = 2;
    }
    /* Final barrier: a 1-float all-reduce (the transport's own barrier sends 1-byte messages,
     * which libfabric 1.17's shm provider can lose; see gossip/allreduce.c). */
    float one = 1;
    hs_allreduce_opts_t bo;
    hs_allreduce_opts_default(&bo);
    bo.path = HS_AR_PATH_RING; /* a plain float, whatever HS_AR_PATH asks of the checks */
    if (st == 0 && hs_allreduce_sum(t, &one, 1, &bo) < 0) {
        printf("AR_FAIL final barrier: %s\n", hs_last_error());
        st = 1;
    }
    hs_transport_close(&t);
    hs_boot_finalize(&b);
    return st;
}
