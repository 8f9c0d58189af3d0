/*
 * tests/transport_worker.c — a worker program for tests/test_transport, started by `hearsay run`
 * (or Slurm-style with HS_RDV, in separate network namespaces). It joins through the bootstrap
 * and opens the transport with the environment's knobs (HS_PROVIDER, HS_CHUNK_BYTES, ...).
 *
 *   transport_worker anysrc K   ranks 1..N-1 each send K messages of random size (0..200 KiB)
 *                               with random pauses to rank 0, which receives them through a pool
 *                               of HS_ANY_SOURCE receives and checks, per message, source,
 *                               length, a checksum and every byte, then the count per source
 *   transport_worker rma        memory windows: every rank puts into, and gets from, the next
 *                               rank's window and checks the bytes against the reference; then
 *                               float/double atomic adds into rank 0 (summed and checked there),
 *                               or, where the provider has none, -ENOSYS with a reason
 *   transport_worker all K      anysrc K, then rma (the network-namespace test)
 * Prints "rank R: OK ..." lines; every failure prints "rank R: ERROR: ..." and exits 1.
 */
#include "hearsay/bootstrap.h"
#include "hearsay/common.h"
#include "hearsay/rng.h"
#include "hearsay/transport.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG_DATA 7u
#define TAG_DONE 8u
#define MAX_BODY (200u << 10)
#define POOL     8

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "rank %d: ERROR: ", hs_transport_rank(t));                                 \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, " (last error: %s)\n", hs_last_error());                                   \
        return 1;                                                                                  \
    } while (0)

/* What opens every message: the receiver checks it against what it received. */
typedef struct msg_hdr {
    int32_t src, k;
    uint64_t len; /* whole message, header included */
    uint64_t sum; /* FNV-1a of the body */
} msg_hdr_t;

static uint64_t fnv1a(const unsigned char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* The reference body of message k from src (independent of the checksum). */
static void body_fill(unsigned char *p, size_t n, int src, int k)
{
    hs_rng_t r;
    hs_rng_seed(&r, 77 + (uint64_t)src, (uint64_t)k);
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)hs_rng_u64(&r);
}

/* Length of message k from src: drawn from a stream of its own so the receiver can redo it. */
static size_t msg_len(int src, int k)
{
    hs_rng_t r;
    hs_rng_seed(&r, 991, (uint64_t)src * 100000 + (uint64_t)k);
    return sizeof(msg_hdr_t) + (size_t)hs_rng_below(&r, MAX_BODY + 1);
}

static int anysrc_send(hs_transport_t *t, int K)
{
    int me = hs_transport_rank(t);
    hs_rng_t pause;
    hs_rng_seed(&pause, 5, (uint64_t)me);
    unsigned char **bufs = calloc((size_t)K, sizeof *bufs);
    hs_treq_t **rq = calloc((size_t)K, sizeof *rq);
    for (int k = 0; k < K; k++) {
        size_t len = msg_len(me, k);
        bufs[k] = malloc(len);
        msg_hdr_t h = {.src = me, .k = k, .len = len};
        body_fill(bufs[k] + sizeof h, len - sizeof h, me, k);
        h.sum = fnv1a(bufs[k] + sizeof h, len - sizeof h);
        memcpy(bufs[k], &h, sizeof h);
        if (hs_transport_isend(t, 0, TAG_DATA, bufs[k], len, &rq[k])) FAIL("isend %d", k);
        hs_sleep(1e-3 * (double)hs_rng_below(&pause, 4)); /* 0..3 ms */
        if (hs_transport_progress(t) < 0) FAIL("progress");
    }
    for (int k = 0; k < K; k++)
        if (hs_transport_wait(t, &rq[k], 20, NULL)) FAIL("send %d never completed", k);
    int32_t count = K;
    if (hs_transport_send(t, 0, TAG_DONE, &count, sizeof count)) FAIL("send done");
    for (int k = 0; k < K; k++) free(bufs[k]);
    free(bufs);
    free(rq);
    printf("rank %d: OK sent %d messages to rank 0\n", me, K);
    return 0;
}

static int anysrc_recv(hs_transport_t *t, int K)
{
    int n = hs_transport_size(t), total = (n - 1) * K, got = 0;
    size_t cap = sizeof(msg_hdr_t) + MAX_BODY;
    unsigned char *pool[POOL], *want = malloc(cap);
    hs_treq_t *rq[POOL] = {0};
    int *count = calloc((size_t)n, sizeof *count);
    unsigned char *seen = calloc((size_t)n * (size_t)K, 1);
    /* Directed receives of the end markers stay posted beside the any-source pool. */
    int32_t *done = calloc((size_t)n, sizeof *done);
    hs_treq_t **drq = calloc((size_t)n, sizeof *drq);
    for (int p = 1; p < n; p++)
        if (hs_transport_irecv(t, p, TAG_DONE, &done[p], sizeof done[p], &drq[p]))
            FAIL("irecv done");
    for (int i = 0; i < POOL; i++) {
        pool[i] = malloc(cap);
        if (i < total && hs_transport_irecv(t, HS_ANY_SOURCE, TAG_DATA, pool[i], cap, &rq[i]))
            FAIL("irecv");
    }
    int posted = total < POOL ? total : POOL;
    double t0 = hs_now();
    while (got < total) {
        int idx;
        hs_tstatus_t st;
        if (hs_transport_waitany(t, rq, POOL, 20, &idx, &st))
            FAIL("waitany after %d of %d messages", got, total);
        msg_hdr_t h;
        if (st.len < sizeof h) FAIL("message of %zu bytes from %d: no header", st.len, st.source);
        memcpy(&h, pool[idx], sizeof h);
        if (h.src != st.source || h.src < 1 || h.src >= n || h.k < 0 || h.k >= K)
            FAIL("header says rank %d message %d, status says source %d", h.src, h.k, st.source);
        if (st.tag != TAG_DATA || st.len != h.len || h.len != msg_len(h.src, h.k))
            FAIL("message %d from %d: tag %u, %zu bytes, header %llu, want %zu", h.k, h.src, st.tag,
                 st.len, (unsigned long long)h.len, msg_len(h.src, h.k));
        size_t blen = st.len - sizeof h;
        if (fnv1a(pool[idx] + sizeof h, blen) != h.sum)
            FAIL("message %d from %d: checksum mismatch", h.k, h.src);
        body_fill(want, blen, h.src, h.k);
        if (memcmp(want, pool[idx] + sizeof h, blen))
            FAIL("message %d from %d: bytes differ from the reference", h.k, h.src);
        if (seen[(size_t)h.src * (size_t)K + (size_t)h.k]++)
            FAIL("message %d from %d received twice", h.k, h.src);
        count[h.src]++;
        got++;
        if (posted < total) {
            if (hs_transport_irecv(t, HS_ANY_SOURCE, TAG_DATA, pool[idx], cap, &rq[idx]))
                FAIL("irecv");
            posted++;
        }
    }
    for (int p = 1; p < n; p++) {
        if (hs_transport_wait(t, &drq[p], 20, NULL)) FAIL("end marker of rank %d", p);
        if (count[p] != K || done[p] != K)
            FAIL("rank %d: received %d messages, it sent %d, want %d", p, count[p], done[p], K);
    }
    printf("rank 0: OK received %d messages from %d ranks through HS_ANY_SOURCE in %.2f s\n", got,
           n - 1, hs_now() - t0);
    for (int i = 0; i < POOL; i++) free(pool[i]);
    free(want);
    free(count);
    free(seen);
    free(done);
    free(drq);
    return 0;
}

/* Window layout (bytes): [0, S) this rank's pattern, [S, 2S) written by the previous rank,
 * then NA floats and NA doubles that every rank adds into on rank 0. */
#define S  ((size_t)300000)
#define NA 1000

static void pattern(unsigned char *p, size_t n, int rank, int what)
{
    hs_rng_t r;
    hs_rng_seed(&r, 4242 + (uint64_t)what, (uint64_t)rank);
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)hs_rng_u64(&r);
}

static int rma(hs_transport_t *t)
{
    int me = hs_transport_rank(t), n = hs_transport_size(t);
    int next = (me + 1) % n, prev = (me + n - 1) % n;
    size_t wlen = 2 * S + NA * (sizeof(float) + sizeof(double));
    unsigned char *win = calloc(1, wlen), *mine = malloc(S), *got = malloc(S), *want = malloc(S);
    pattern(win, S, me, 0);
    pattern(mine, S, me, 1);
    hs_twin_t *w = NULL;
    if (hs_transport_win_create(t, win, wlen, &w)) FAIL("win_create");
    hs_treq_t *rp = NULL, *rg = NULL;
    if (hs_transport_put(t, w, next, S, mine, S, &rp)) FAIL("put");
    if (hs_transport_get(t, w, next, 0, got, S, &rg)) FAIL("get");
    if (hs_transport_wait(t, &rp, 20, NULL)) FAIL("put to rank %d", next);
    if (hs_transport_wait(t, &rg, 20, NULL)) FAIL("get from rank %d", next);
    pattern(want, S, next, 0);
    if (memcmp(got, want, S)) FAIL("get of rank %d's window differs from its pattern", next);
    if (hs_transport_barrier(t)) FAIL("barrier");
    pattern(want, S, prev, 1);
    if (memcmp(win + S, want, S)) FAIL("rank %d's put into this window differs", prev);
    /* Read back what this rank wrote into the next one. */
    memset(got, 0, S);
    if (hs_transport_get(t, w, next, S, got, S, &rg) || hs_transport_wait(t, &rg, 20, NULL))
        FAIL("get back from rank %d", next);
    if (memcmp(got, mine, S)) FAIL("read-back of the put into rank %d differs", next);
    printf("rank %d: OK put/get %zu bytes with rank %d (%s)\n", me, S, next,
           hs_transport_provider(t));

    /* Atomics: rank r adds (r + 1) * (i + 1) to element i on rank 0. */
    float fa[NA];
    double da[NA];
    for (int i = 0; i < NA; i++) {
        fa[i] = (float)((me + 1) * (i + 1));
        da[i] = 0.5 * (double)((me + 1) * (i + 1));
    }
    hs_treq_t *ra = NULL, *rd = NULL;
    int rcf = hs_transport_atomic_add_float(t, w, 0, 2 * S, fa, NA, &ra);
    int rcd = hs_transport_atomic_add_double(t, w, 0, 2 * S + NA * sizeof(float), da, NA, &rd);
    if ((rcf && rcf != -ENOSYS) || (rcd && rcd != -ENOSYS))
        FAIL("atomic add: %d/%d, neither 0 nor -ENOSYS", rcf, rcd);
    if (rcf == -ENOSYS || rcd == -ENOSYS)
        printf("rank %d: OK atomics unsupported (-ENOSYS) on %s: %s\n", me,
               hs_transport_provider(t), hs_last_error());
    if (rcf == 0 && hs_transport_wait(t, &ra, 20, NULL)) FAIL("float atomic");
    if (rcd == 0 && hs_transport_wait(t, &rd, 20, NULL)) FAIL("double atomic");
    if (hs_transport_barrier(t)) FAIL("barrier");
    if (me == 0) {
        double tri = (double)n * (n + 1) / 2; /* sum over ranks of (r + 1) */
        for (int i = 0; i < NA; i++) {
            float f;
            double d;
            memcpy(&f, win + 2 * S + (size_t)i * sizeof f, sizeof f);
            memcpy(&d, win + 2 * S + NA * sizeof(float) + (size_t)i * sizeof d, sizeof d);
            if (rcf == 0 && f != (float)(tri * (i + 1)))
                FAIL("float element %d: %g, want %g", i, (double)f, tri * (i + 1));
            if (rcd == 0 && d != 0.5 * tri * (i + 1))
                FAIL("double element %d: %g, want %g", i, d, 0.5 * tri * (i + 1));
        }
        if (rcf == 0 || rcd == 0)
            printf("rank 0: OK atomics summed from %d ranks (float %s, double %s)\n", n,
                   rcf ? "-ENOSYS" : "ok", rcd ? "-ENOSYS" : "ok");
    }
    if (hs_transport_barrier(t)) FAIL("barrier");
    hs_transport_win_free(t, &w);
    free(win);
    free(mine);
    free(got);
    free(want);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: transport_worker anysrc K | rma | all K\n");
        return 2;
    }
    const char *mode = argv[1];
    int K = argc > 2 ? atoi(argv[2]) : 20;
    setvbuf(stdout, NULL, _IOLBF, 0);
    hs_boot_t *b = NULL;
    if (hs_boot_init(&b, NULL) < 0) {
        fprintf(stderr, "ERROR: hs_boot_init: %s\n", hs_last_error());
        return 1;
    }
    hs_transport_t *t = NULL;
    if (hs_transport_open(&t, b, NULL) < 0) {
        fprintf(stderr, "rank %d: ERROR: transport open: %s\n", hs_boot_rank(b), hs_last_error());
        hs_boot_finalize(&b);
        return 1;
    }
    int rc = 0;
    if (!strcmp(mode, "anysrc") || !strcmp(mode, "all"))
        rc = hs_transport_rank(t) == 0 ? anysrc_recv(t, K) : anysrc_send(t, K);
    if (rc == 0 && (!strcmp(mode, "rma") || !strcmp(mode, "all"))) rc = rma(t);
    if (rc == 0 && hs_transport_barrier(t)) {
        fprintf(stderr, "rank %d: ERROR: final barrier: %s\n", hs_transport_rank(t),
                hs_last_error());
        rc = 1;
    }
    hs_transport_close(&t);
    hs_boot_finalize(&b);
    return rc;
}
