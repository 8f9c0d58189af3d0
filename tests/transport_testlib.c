/* tests/transport_testlib.c — helpers shared by the transport tests: reference payloads and
 * a forked multi-rank world whose parent relays the address blobs (its ranks are jobs of the
 * harness, tests/runlib.h). */
#include "tests/transport_testlib.h"
#include "hearsay/common.h"
#include "hearsay/rng.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/runlib.h"

/* Deterministic payload of message (src, dst, k): the reference the receiver checks. */
void tt_fill(unsigned char *p, size_t n, int src, int dst, int k)
{
    hs_rng_t r;
    hs_rng_seed(&r, 1000 + (uint64_t)src, (uint64_t)dst * 1000 + (uint64_t)k);
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)hs_rng_u64(&r);
}

int tt_check_payload(const unsigned char *p, size_t n, int src, int dst, int k)
{
    unsigned char *want = malloc(n ? n : 1);
    tt_fill(want, n, src, dst, k);
    int ok = n == 0 || memcmp(p, want, n) == 0; /* (an empty message's p may be NULL) */
    free(want);
    return ok;
}

void tt_opts(hs_transport_opts_t *o, const char *prov)
{
    hs_transport_opts_default(o);
    o->provider = prov;
    o->chunk_bytes = 64 << 10; /* small chunks so modest messages are multi-chunk */
    o->timeout_s = 20;
}

static int full_io(int fd, void *buf, size_t len, int wr)
{
    char *p = buf;
    while (len) {
        ssize_t n = wr ? write(fd, p, len) : read(fd, p, len);
        if (n <= 0) return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* One forked rank of tt_run_world: what it needs to know (the parent relays the addresses). */
typedef struct world_rank {
    int r, n, all_local;
    const int *host_of; /* non-NULL: hs_transport_create_hosts */
    int (*fds)[2];      /* the socket pairs of ranks 0..r */
    const hs_transport_opts_t *o;
    tt_rank_fn fn;
    void *arg;
    void (*child_setup)(int rank);
} world_rank_t;

/* The child's part: create, exchange addresses through the parent, connect, barrier, fn. */
static int world_rank_main(void *p)
{
    const world_rank_t *w = p;
    int r = w->r, n = w->n, fd = w->fds[r][1];
    for (int q = 0; q <= r; q++) close(w->fds[q][0]);
    if (w->child_setup) w->child_setup(r);
    hs_transport_t *t = NULL;
    char mine[HS_TRANSPORT_ADDR_MAX] = {0};
    char *all = calloc((size_t)n, HS_TRANSPORT_ADDR_MAX);
    size_t len;
    int rc = w->host_of ? hs_transport_create_hosts(&t, r, n, w->host_of, w->o)
                        : hs_transport_create(&t, r, n, w->all_local, w->o);
    if (rc == 0) rc = hs_transport_address(t, mine, &len);
    char ok = rc == 0;
    full_io(fd, &ok, 1, 1);
    full_io(fd, mine, sizeof mine, 1);
    if (full_io(fd, all, (size_t)n * HS_TRANSPORT_ADDR_MAX, 0) < 0) return 90;
    if (rc == 0) rc = hs_transport_connect(t, all, HS_TRANSPORT_ADDR_MAX);
    if (rc == 0) rc = hs_transport_barrier(t);
    if (rc == 0) rc = w->fn(t, w->arg);
    if (rc != 0) fprintf(stderr, "rank %d: rc %d: %s\n", r, rc, hs_last_error());
    hs_transport_close(&t);
    return rc == 0 ? 0 : rc > 0 ? rc : 1;
}

/* Run fn on n forked ranks (jobs of the harness, tests/runlib.h: output to this process's,
 * killed at the deadline, segments they leave removed); the parent relays the address blobs
 * (an in-memory allgather). Returns the number of ranks that failed (n after a timeout).
 * `expect` (may be NULL) gives each rank's expected exit code. */
int tt_run_world(int n, const hs_transport_opts_t *o, int all_local, tt_rank_fn fn, void *arg,
                 double timeout_s, const int *expect, void (*child_setup)(int rank))
{
    return tt_run_world_hosts(n, o, all_local, NULL, fn, arg, timeout_s, expect, child_setup);
}

int tt_run_world_hosts(int n, const hs_transport_opts_t *o, int all_local, const int *host_of,
                       tt_rank_fn fn, void *arg, double timeout_s, const int *expect,
                       void (*child_setup)(int rank))
{
    int fds[16][2];
    tr_job_t jobs[16];
    world_rank_t w[16];
    tr_opts_t jo = {.capture = TR_CAPTURE_NONE};
    ck_assert_int_le(n, 16);
    double end = hs_now() + timeout_s;
    for (int r = 0; r < n; r++) {
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, fds[r]), 0);
        w[r] = (world_rank_t){.r = r,
                              .n = n,
                              .all_local = all_local,
                              .host_of = host_of,
                              .fds = fds,
                              .o = o,
                              .fn = fn,
                              .arg = arg,
                              .child_setup = child_setup};
        ck_assert_int_eq(tr_start_fn(&jobs[r], world_rank_main, &w[r], &jo), 0);
        close(fds[r][1]);
    }
    char *all = calloc((size_t)n, HS_TRANSPORT_ADDR_MAX);
    int bad_start = 0;
    for (int r = 0; r < n; r++) {
        char ok = 0;
        if (full_io(fds[r][0], &ok, 1, 0) < 0 || !ok) bad_start = 1;
        full_io(fds[r][0], all + (size_t)r * HS_TRANSPORT_ADDR_MAX, HS_TRANSPORT_ADDR_MAX, 0);
    }
    for (int r = 0; r < n; r++) {
        full_io(fds[r][0], all, (size_t)n * HS_TRANSPORT_ADDR_MAX, 1);
        close(fds[r][0]);
    }
    free(all);
    int failed = 0, timed_out = 0;
    for (int r = 0; r < n; r++) {
        int st = tr_finish(&jobs[r], HS_MAX(end - hs_now(), 0.0));
        int want = expect ? expect[r] : 0;
        timed_out |= st == TR_TIMEOUT;
        if (st != want) {
            fprintf(stderr, "rank %d: %s (expected exit status %d)\n", r, tr_status_text(st), want);
            failed++;
        }
    }
    for (int r = 0; r < n; r++) tr_job_free(&jobs[r]);
    if (timed_out) {
        fprintf(stderr, "world of %d ranks timed out after %.0f s\n", n, timeout_s);
        return n;
    }
    ck_assert_msg(!bad_start, "a rank failed to create its endpoint");
    return failed;
}
