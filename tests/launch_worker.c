/*
 * tests/launch_worker.c — a worker program for tests/test_launch, started by `hearsay run`.
 *
 *   launch_worker gather          init, allgather (rank, hostname, pid), check every entry
 *                                 against independent facts, barrier, finalize, exit 0
 *   launch_worker fail R CODE     init; rank R exits CODE, the others sleep 60 s
 *   launch_worker sigwait         print "ready", wait for SIGTERM, print "got SIGTERM", exit 0
 *   launch_worker rawkey          rank 0 first connects to HS_RDV itself with a wrong key and
 *                                 prints the launcher's answer; then everyone does `gather`
 *   launch_worker garbage         like rawkey, with bytes that are not a rendezvous message
 *   launch_worker tamper R        rank R joins with a wrong HS_JOB_KEY; init must fail
 *   launch_worker absent R        rank R never joins (sleeps 60 s); the others must fail
 *   launch_worker vanish R        rank R joins, then exits 0 without finalize; the others'
 *                                 allgather must fail naming rank R
 *   launch_worker rejoin R T      init, barrier; rank R exits HS_EXIT_REJOIN (72) without
 *                                 finalize while HS_INCARNATION < T (unset: 0); its
 *                                 replacement checks HS_CRASHED_AT (a number, hs_now() of the
 *                                 launcher's crash, not in the future) and does the same
 * Every failure prints "rank R: ERROR: message" on stderr and exits 1.
 */
#include "gossip/rdv_wire.h"
#include "hearsay/bootstrap.h"
#include "hearsay/common.h"
#include "hearsay/env.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netdb.h>
#include <unistd.h>

typedef struct entry {
    int32_t rank;
    int32_t pid;
    char host[64];
} entry_t;

/* The rank and size the launcher meant, read independently of hs_boot. */
static int env_int(const char *a, const char *b, const char *c)
{
    const char *v = getenv(a);
    if (!v) v = getenv(b);
    if (!v) v = getenv(c);
    return v ? atoi(v) : -1;
}

static int env_rank(void)
{
    return env_int("HS_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK");
}

static int env_size(void)
{
    return env_int("HS_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE");
}

static int fail(int rank, const char *what)
{
    fprintf(stderr, "rank %d: ERROR: %s: %s\n", rank, what, hs_last_error());
    return 1;
}

/* Every path frees what it allocated (one clean-up label), so that under LeakSanitizer the
 * exit status stays the one the mode means. */
static int do_gather(void)
{
    hs_boot_t *b = NULL;
    entry_t *all = NULL;
    int32_t *sqs = NULL;
    int me = env_rank(), rc = 1;
    if (hs_boot_init(&b, NULL) < 0) {
        rc = fail(me, "hs_boot_init");
        goto out;
    }
    int rank = hs_boot_rank(b), size = hs_boot_size(b);
    if (rank != me || size != env_size()) {
        fprintf(stderr, "rank %d: ERROR: rank/size %d/%d disagree with HS_RANK/HS_SIZE\n", me, rank,
                size);
        goto out;
    }
    entry_t mine = {.rank = rank, .pid = (int32_t)getpid()};
    gethostname(mine.host, sizeof mine.host - 1);
    all = calloc((size_t)size, sizeof *all);
    sqs = calloc((size_t)size, sizeof *sqs);
    if (!all || !sqs) {
        fprintf(stderr, "rank %d: ERROR: out of memory\n", rank);
        goto out;
    }
    if (hs_boot_allgather(b, &mine, sizeof mine, all) < 0) {
        rc = fail(rank, "allgather");
        goto out;
    }
    for (int r = 0; r < size; r++) {
        if (all[r].rank != r || strcmp(all[r].host, mine.host) != 0 ||
            (r == rank && all[r].pid != mine.pid) || (r != rank && all[r].pid == mine.pid)) {
            fprintf(stderr, "rank %d: ERROR: bad allgather entry %d (rank %d host %s)\n", rank, r,
                    all[r].rank, all[r].host);
            goto out;
        }
        if (hs_boot_host_of(b, r) != 0 || strcmp(hs_boot_hostname(b, r), mine.host) != 0) {
            fprintf(stderr, "rank %d: ERROR: host_of(%d) = %d\n", rank, r, hs_boot_host_of(b, r));
            goto out;
        }
    }
    if (!hs_boot_all_local(b) || hs_boot_local_rank(b) != rank || hs_boot_local_size(b) != size) {
        fprintf(stderr, "rank %d: ERROR: local numbering wrong\n", rank);
        goto out;
    }
    /* A second round of a different length, then a barrier. */
    int32_t sq = rank * rank;
    if (hs_boot_allgather(b, &sq, sizeof sq, sqs) < 0) {
        rc = fail(rank, "allgather 2");
        goto out;
    }
    for (int r = 0; r < size; r++)
        if (sqs[r] != r * r) {
            fprintf(stderr, "rank %d: ERROR: round 2 entry %d is %d\n", rank, r, sqs[r]);
            goto out;
        }
    if (hs_boot_barrier(b) < 0) {
        rc = fail(rank, "barrier");
        goto out;
    }
    printf("rank %d of %d ok via %s\n", rank, size, hs_boot_method(b));
    fprintf(stderr, "stderr line from %d\n", rank);
    printf("partial %d", rank); /* no newline: the launcher flushes it at exit */
    fflush(stdout);
    rc = 0;
out:
    free(all);
    free(sqs);
    hs_boot_finalize(&b);
    return rc;
}

/* Connect to HS_RDV and send `bytes`; print what comes back. */
static int raw_probe(const void *bytes, size_t len)
{
    char host[256];
    int port;
    if (hs_rdv_parse_addr(hs_env_str("HS_RDV"), "HS_RDV", host, sizeof host, &port) < 0)
        return fail(0, "HS_RDV");
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    if (getaddrinfo(host, ps, &hints, &res) != 0) return fail(0, "getaddrinfo");
    int fd = socket(res->ai_family, SOCK_STREAM, 0);
    double deadline = hs_now() + 10;
    while (connect(fd, res->ai_addr, res->ai_addrlen) < 0 && hs_now() < deadline) hs_sleep(0.02);
    freeaddrinfo(res);
    if (hs_rdv_write_all(fd, bytes, len, hs_now() + 5) < 0) {
        close(fd);
        return fail(0, "probe write");
    }
    uint8_t hb[HS_RDV_HDR_BYTES];
    hs_rdv_hdr_t h;
    char text[HS_RDV_ERR_MAX + 1] = "";
    if (hs_rdv_read_all(fd, hb, sizeof hb, hs_now() + 10) == 0) {
        hs_rdv_hdr_decode(hb, &h);
        if (h.type == HS_RDV_ERROR && h.len <= HS_RDV_ERR_MAX &&
            hs_rdv_read_all(fd, text, (size_t)h.len, hs_now() + 5) == 0)
            text[h.len] = '\0';
    }
    char c;
    ssize_t n = recv(fd, &c, 1, 0); /* the launcher must close after the error */
    printf("probe answer: '%s' then %s\n", text, n == 0 ? "closed" : "still open");
    fflush(stdout);
    close(fd);
    return 0;
}

static int do_rawkey(int garbage)
{
    if (env_rank() == 0) {
        uint8_t msg[HS_RDV_HDR_BYTES + HS_RDV_HELLO_BYTES];
        if (garbage) {
            memset(msg, 'G', sizeof msg);
        } else {
            hs_rdv_hdr_t h = hs_rdv_hdr_make(HS_RDV_HELLO, 0, 0, HS_RDV_HELLO_BYTES);
            hs_rdv_hdr_encode(&h, msg);
            hs_rdv_hello_t hello = {.size = (uint32_t)env_size(), .pid = 1};
            memset(hello.key, 'f', sizeof hello.key);
            if (!strncmp(hs_env_str("HS_JOB_KEY"), "ffff", 4)) hello.key[0] = 'e';
            snprintf(hello.host, sizeof hello.host, "intruder");
            hs_rdv_hello_encode(&hello, msg + HS_RDV_HDR_BYTES);
        }
        int rc = raw_probe(msg, sizeof msg);
        if (rc) return rc;
    }
    return do_gather();
}

static int do_fail(int who, int code)
{
    hs_boot_t *b = NULL;
    int me = env_rank(), rc;
    if (hs_boot_init(&b, NULL) < 0) {
        rc = fail(me, "hs_boot_init");
        goto out;
    }
    if (me != who) {
        printf("rank %d sleeping pid %d\n", me, (int)getpid());
        fflush(stdout);
    }
    /* Everyone has said it sleeps before rank `who` fails (else the launcher may end a rank
     * before it printed, and the test would count too few). */
    if (hs_boot_barrier(b) < 0) {
        rc = fail(me, "hs_boot_barrier");
        goto out;
    }
    if (me == who) {
        printf("rank %d failing with %d\n", me, code);
        fflush(stdout);
        rc = code;
        goto out;
    }
    hs_sleep(60);
    printf("rank %d woke up: it was not ended\n", me);
    rc = 0;
out:
    hs_boot_finalize(&b);
    return rc;
}

/* Incarnation K (HS_INCARNATION, 0 when unset) of every rank: join (a replacement replays the
 * barrier), say so; rank `who` crashes asking for a replacement while K < times. */
static int do_rejoin(int who, int times)
{
    int me = env_rank(), k = 0;
    const char *inc = getenv("HS_INCARNATION"), *at = getenv("HS_CRASHED_AT");
    if (inc) {
        char *end;
        k = (int)strtol(inc, &end, 10);
        double t = at ? strtod(at, &end) : -1;
        if (k < 1 || !at || *end || end == at || t <= 0 || t > hs_now() || hs_now() - t > 30) {
            fprintf(stderr, "rank %d: ERROR: HS_INCARNATION=%s HS_CRASHED_AT=%s\n", me, inc,
                    at ? at : "(unset)");
            return 1;
        }
    } else if (at) {
        fprintf(stderr, "rank %d: ERROR: HS_CRASHED_AT=%s without HS_INCARNATION\n", me, at);
        return 1;
    }
    hs_boot_t *b = NULL;
    if (hs_boot_init(&b, NULL) < 0) return fail(me, "hs_boot_init");
    if (hs_boot_barrier(b) < 0) {
        hs_boot_finalize(&b);
        return fail(me, "hs_boot_barrier");
    }
    if (k)
        printf("rank %d replacement %d ok (crashed at %s)\n", me, k, at);
    else
        printf("rank %d original ok\n", me);
    fflush(stdout);
    if (me == who && k < times) {
        printf("rank %d crashing for a replacement\n", me);
        fflush(stdout);
        _exit(HS_EXIT_REJOIN); /* no finalize, no goodbye */
    }
    hs_boot_finalize(&b);
    return 0;
}

static void on_term(int sig)
{
    static const char msg[] = "got SIGTERM\n";
    ssize_t w = write(1, msg, sizeof msg - 1);
    (void)w;
    (void)sig;
    _exit(0);
}

static int do_sigwait(void)
{
    struct sigaction sa = {.sa_handler = on_term};
    sigaction(SIGTERM, &sa, NULL);
    printf("ready\n");
    fflush(stdout);
    for (int i = 0; i < 600; i++) pause();
    return 2;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "gather";
    int arg = argc > 2 ? atoi(argv[2]) : 0, me = env_rank();
    if (!strcmp(mode, "gather")) return do_gather();
    if (!strcmp(mode, "rawkey")) return do_rawkey(0);
    if (!strcmp(mode, "garbage")) return do_rawkey(1);
    if (!strcmp(mode, "fail")) return do_fail(arg, argc > 3 ? atoi(argv[3]) : 3);
    if (!strcmp(mode, "sigwait")) return do_sigwait();
    if (!strcmp(mode, "rejoin")) return do_rejoin(arg, argc > 3 ? atoi(argv[3]) : 1);
    if (!strcmp(mode, "tamper")) {
        if (me == arg) setenv("HS_JOB_KEY", "0123456789abcdef0123456789abcdef", 1);
        return do_gather();
    }
    if (!strcmp(mode, "absent")) {
        if (me == arg) {
            hs_sleep(60);
            return 0;
        }
        return do_gather();
    }
    if (!strcmp(mode, "vanish")) {
        if (me == arg) {
            hs_boot_t *b;
            if (hs_boot_init(&b, NULL) < 0) return fail(me, "hs_boot_init");
            printf("rank %d vanishing\n", me);
            fflush(stdout);
            _exit(0); /* no finalize, no goodbye */
        }
        return do_gather();
    }
    fprintf(stderr, "launch_worker: unknown mode '%s'\n", mode);
    return 2;
}
