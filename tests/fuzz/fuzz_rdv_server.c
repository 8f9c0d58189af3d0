/*
 * tests/fuzz/fuzz_rdv_server.c — the launcher's side of the rendezvous (gossip/rendezvous.c and
 * rdv_wire.c) fed by hostile connections over loopback TCP.
 *
 * Input: one byte for the job size (1..3) and the number of connections (1..3); then, for every
 * connection but the last, 2 bytes (little-endian) of length and the bytes it sends; the last
 * connection sends the rest. The job key is fixed (the seeds hold valid HELLOs, so the fuzzer
 * reaches admitted ranks, WELCOME and collective rounds). Each input gets a fresh server: the
 * connections are opened in order, each sends its bytes, then all close their sending side.
 * Invariants (hearsay/rendezvous.h): the server closes every connection once its peer has
 * closed (within 10 s: a connection held open longer is a hang), its state is 1, 0 or -1, and
 * stopping it frees everything.
 */
#include "gossip/rdv_wire.h"
#include "hearsay/common.h"
#include "hearsay/rendezvous.h"
#include "tests/fuzz/fuzz_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#define KEY "0123456789abcdef0123456789abcdef"

static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    devnull = fopen("/dev/null", "w");
    if (!devnull) abort();
    return 0;
}

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) abort();
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    FZ_CHECK(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "connect: %s", strerror(errno));
    return fd;
}

/* Send what can be sent (the server may close first: that is its right). */
static void send_some(int fd, const uint8_t *p, size_t len)
{
    while (len) {
        struct pollfd pf = {.fd = fd, .events = POLLOUT};
        if (poll(&pf, 1, 2000) <= 0) return;
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) return;
        p += n;
        len -= (size_t)n;
    }
}

/* Read until the server closes, for at most 10 s. 1 when it closed. */
static int wait_closed(int fd)
{
    double deadline = hs_now() + 10.0;
    uint8_t junk[4096];
    for (;;) {
        double left = deadline - hs_now();
        if (left <= 0) return 0;
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int k = poll(&pf, 1, (int)(left * 1000) + 1);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return 0;
        ssize_t n = recv(fd, junk, sizeof junk, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return 1;
    }
}

static void close_now(int fd)
{
    struct linger l = {.l_onoff = 1, .l_linger = 0}; /* no TIME_WAIT: thousands of inputs */
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_t in = fz_init(data, size);
    uint8_t b = fz_u8(&in);
    int job = 1 + b % 3, nconn = 1 + (b >> 2) % 3;
    hs_rdv_server_opts_t o = {.size = job,
                              .key = KEY,
                              .timeout_s = 5,
                              .hello_timeout_s = 5,
                              .log = devnull,
                              .log_prefix = "fuzz: "};
    hs_rdv_server_t *s = NULL;
    FZ_CHECK(hs_rdv_server_start(&s, &o) == 0, "server start: %s", hs_last_error());
    int fds[3];
    for (int c = 0; c < nconn; c++) {
        size_t len = in.n;
        if (c < nconn - 1) {
            len = fz_u8(&in);
            len |= (size_t)fz_u8(&in) << 8;
            if (len > in.n) len = in.n;
        }
        fds[c] = connect_to(hs_rdv_server_port(s));
        send_some(fds[c], in.p, len);
        in.p += len;
        in.n -= len;
    }
    for (int c = 0; c < nconn; c++) shutdown(fds[c], SHUT_WR);
    for (int c = 0; c < nconn; c++) {
        FZ_CHECK(wait_closed(fds[c]), "connection %d still open 10 s after its peer closed", c);
        close_now(fds[c]);
    }
    int st = hs_rdv_server_state(s);
    FZ_CHECK(st == 0 || st == 1 || st == -1, "state %d", st);
    hs_rdv_server_stop(&s);
    return 0;
}
