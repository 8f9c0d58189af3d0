/*
 * tests/center_worker.c — one rank of the EASGD center-service tests, started by `hearsay run`.
 *
 *   center_worker conserve ROUNDS N OWNERS [DEAD]
 *       Every rank opens the center (N floats, owners OWNERS: "all" or a rank list) with
 *       init[i] = i % 7 - 3, then ROUNDS times reads it and adds diff(rank, round, i), an
 *       integer in [-2, 2], concurrently with every other rank; then finishes and compares the
 *       final center with init + the sum over ranks and rounds of diff (exact: small integers
 *       are exact in float, in any order of addition). With DEAD, rank DEAD exits abruptly
 *       right after opening (adding nothing): the others must finish, report its shard lost,
 *       and every other shard must still match exactly.
 *       Prints "CENTER_OK rank R lost L reads K path P" (exit 0) or "CENTER_FAIL ..." (exit 1).
 *       The path (rma / service) follows $HS_CENTER_PATH (default auto).
 */
#include "hearsay/bootstrap.h"
#include "hearsay/algo.h"
#include "hearsay/common.h"
#include "hearsay/transport.h"
#include "optim/center.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static float diff_of(int rank, int round, size_t i)
{
    return (float)((long)((i * 3 + (size_t)rank * 5 + (size_t)round * 7) % 5) - 2);
}

static int fail(int rank, const char *what, int rc)
{
    printf("CENTER_FAIL rank %d %s: rc %d: %s\n", rank, what, rc, hs_last_error());
    return 1;
}

static int run_conserve(hs_exec_t *xe, int rounds, size_t n, const char *spec, int dead)
{
    hs_transport_t *t = xe->t;
    int rank = hs_transport_rank(t), P = hs_transport_size(t);
    int *owners = NULL, m = 0;
    int rc = hs_center_parse_owners(spec, P, &owners, &m);
    if (rc < 0) return fail(rank, "owners", rc);
    float *init = malloc(n * sizeof *init), *x = malloc(n * sizeof *x);
    if (!init || !x) return fail(rank, "malloc", -ENOMEM);
    for (size_t i = 0; i < n; i++) init[i] = (float)((long)(i % 7) - 3);
    hs_center_t *c = NULL;
    if ((rc = hs_center_open(&c, xe, n, init, owners, m, 10.0, NULL, HS_TAG_ALGO_BASE)) < 0)
        return fail(rank, "open", rc);
    /* Every rank is done opening (the RMA path's window set-up exchanges descriptors) before
     * the dead rank dies: a death during set-up is another test's business. */
    if (dead >= 0 && (rc = hs_transport_barrier(xe->t)) < 0) return fail(rank, "barrier", rc);
    if (rank == dead) {
        fflush(stdout);
        _exit(0); /* abrupt: no finish, no goodbye */
    }
    long reads = 0;
    for (int r = 0; r < rounds; r++) {
        memcpy(x, init, n * sizeof *x);
        if ((rc = hs_center_read(c, x)) < 0) return fail(rank, "read", rc);
        for (size_t i = 0; i < n; i++) /* every value read is an integer */
            if (x[i] != floorf(x[i])) {
                printf("CENTER_FAIL rank %d: read %.9g at %zu, not an integer\n", rank, x[i], i);
                return 1;
            }
        reads++;
        for (size_t i = 0; i < n; i++) x[i] = diff_of(rank, r, i);
        if ((rc = hs_center_add(c, x)) < 0) return fail(rank, "add", rc);
        if (r % 7 == 3) hs_sleep(0.002); /* vary the interleaving */
    }
    memcpy(x, init, n * sizeof *x);
    int lost = hs_center_finish(c, x, 10.0);
    if (lost < 0) return fail(rank, "finish", lost);
    for (int s = 0; s < m; s++) {
        int o;
        size_t off, len;
        hs_center_shard(c, s, &o, &off, &len);
        int should_lose = o == dead;
        if (hs_center_shard_lost(c, s) != should_lose) {
            printf("CENTER_FAIL rank %d: shard %d (rank %d) lost=%d, expected %d\n", rank, s, o,
                   hs_center_shard_lost(c, s), should_lose);
            return 1;
        }
        if (should_lose) continue;
        for (size_t i = off; i < off + len; i++) {
            double want = init[i];
            for (int q = 0; q < P; q++)
                for (int r = 0; q != dead && r < rounds; r++) want += diff_of(q, r, i);
            if (x[i] != (float)want) {
                printf("CENTER_FAIL rank %d: center[%zu] = %.9g, expected init + sum of "
                       "diffs = %.9g\n",
                       rank, i, x[i], want);
                return 1;
            }
        }
    }
    printf("CENTER_OK rank %d lost %d reads %ld path %s\n", rank, lost, reads, hs_center_path(c));
    hs_center_close(&c);
    free(owners);
    free(init);
    free(x);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 5 || strcmp(argv[1], "conserve")) {
        fprintf(stderr, "usage: center_worker conserve ROUNDS N OWNERS [DEAD]\n");
        return 2;
    }
    hs_boot_t *b = NULL;
    hs_transport_t *t = NULL;
    hs_transport_opts_t to;
    int rc = hs_transport_opts_default(&to);
    to.progress_thread = 1;
    if (rc == 0) rc = hs_boot_init(&b, NULL);
    if (rc == 0) rc = hs_transport_open(&t, b, &to);
    hs_exec_t *xe = NULL;
    if (rc == 0) rc = hs_exec_threads_create(&xe, t, b);
    if (rc < 0) {
        printf("CENTER_FAIL start-up: %s\n", hs_last_error());
        return 1;
    }
    int st = run_conserve(xe, atoi(argv[2]), (size_t)strtoul(argv[3], NULL, 10), argv[4],
                          argc > 5 ? atoi(argv[5]) : -1);
    if (st) { /* a failed check may leave the center's service thread running: leave now */
        fflush(stdout);
        _exit(st);
    }
    /* No final barrier: hs_center_finish already kept every owner until all were served. */
    hs_exec_destroy(&xe);
    hs_transport_close(&t);
    hs_boot_finalize(&b);
    return st;
}
