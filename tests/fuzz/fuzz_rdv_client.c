/*
 * tests/fuzz/fuzz_rdv_client.c — the worker's side of the rendezvous (gossip/boot_rdv.c and
 * rdv_wire.c) answered by a hostile launcher over loopback TCP.
 *
 * Input: one byte for the job size (1..3) and this rank, one for the allgather length of each
 * of up to 3 rounds, then what the launcher sends (all of it at once, then it closes). The worker
 * joins and, when it was admitted, runs the rounds and leaves. Invariants: every call returns
 * (a launcher that closes is an error, not a hang, within the worker's bounds) and a round
 * writes no more than size x len bytes into the caller's buffer.
 */
#include "gossip/boot_rdv.h"
#include "gossip/rdv_wire.h"
#include "hearsay/common.h"
#include "tests/fuzz/fuzz_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>

#define KEY "0123456789abcdef0123456789abcdef"

static int lfd = -1;
static char addr[64];

typedef struct launcher {
    const uint8_t *p;
    size_t len;
} launcher_t;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof sa;
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(lfd, 4) != 0 ||
        getsockname(lfd, (struct sockaddr *)&sa, &sl) != 0)
        abort();
    snprintf(addr, sizeof addr, "127.0.0.1:%d", ntohs(sa.sin_port));
    return 0;
}

/* The fake launcher: accept, send everything, close the sending side, read until the worker
 * closes (at most 10 s), close. */
static void *launcher_main(void *arg)
{
    launcher_t *l = arg;
    struct pollfd pf = {.fd = lfd, .events = POLLIN};
    if (poll(&pf, 1, 10000) <= 0) return NULL; /* the worker gave up before connecting */
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) return NULL;
    const uint8_t *p = l->p;
    size_t len = l->len;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        p += n;
        len -= (size_t)n;
    }
    shutdown(fd, SHUT_WR);
    uint8_t junk[4096];
    double deadline = hs_now() + 10.0;
    while (hs_now() < deadline) {
        struct pollfd q = {.fd = fd, .events = POLLIN};
        if (poll(&q, 1, 100) < 0 && errno != EINTR) break;
        ssize_t n = recv(fd, junk, sizeof junk, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) break;
    }
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_t in = fz_init(data, size);
    uint8_t b = fz_u8(&in);
    int job = 1 + b % 3, rank = (b >> 2) % job;
    size_t lens[3];
    for (int i = 0; i < 3; i++) lens[i] = fz_u8(&in) % 17;
    launcher_t l = {in.p, in.n};
    pthread_t th;
    if (pthread_create(&th, NULL, launcher_main, &l) != 0) abort();

    hs_rdv_client_t c;
    char hosts[3 * HS_RDV_HOST_MAX];
    double t0 = hs_now();
    int rc = hs_rdv_client_join(&c, addr, KEY, rank, job, "fuzzhost", 2.0, hosts);
    if (rc == 0) {
        for (int r = 0; r < 3 && rc == 0; r++) {
            uint8_t mine[16], all[3 * 16];
            memset(mine, r + 1, sizeof mine);
            memset(all, 0xee, sizeof all);
            rc = hs_rdv_client_allgather(&c, mine, lens[r], all);
            for (size_t k = (size_t)job * lens[r]; k < sizeof all; k++)
                FZ_CHECK(all[k] == 0xee, "round %d wrote byte %zu of a %zu-byte result", r, k,
                         (size_t)job * lens[r]);
        }
        hs_rdv_client_leave(&c);
    }
    pthread_join(th, NULL);
    FZ_CHECK(hs_now() - t0 < 15.0, "the worker took %.1f s against a launcher that closed",
             hs_now() - t0);
    return 0;
}
