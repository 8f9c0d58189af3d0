/* gossip/boot_rdv.c — the worker side of the TCP rendezvous (see rdv_proto.h, boot_rdv.h). */
#include "gossip/boot_rdv.h"
#include "gossip/rdv_wire.h"
#include "hearsay/common.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Extra time a worker waits beyond the launcher's bound, so that the launcher's message
 * (which names the missing ranks) arrives before the worker gives up on its own. */
#define CLIENT_GRACE_S 5.0

/* One non-blocking connect attempt bounded by `deadline`; returns the fd or -errno. */
static int try_connect(const struct addrinfo *a, double deadline)
{
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) return -errno;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) return fd;
    if (errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        return -e;
    }
    for (;;) {
        double left = deadline - hs_now();
        if (left <= 0) {
            close(fd);
            return -ETIMEDOUT;
        }
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int n = poll(&p, 1, (int)(HS_MIN(left, 1.0) * 1000.0) + 1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            return -e;
        }
        if (n == 0) continue;
        int err = 0;
        socklen_t el = sizeof err;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
        if (err == 0) return fd;
        close(fd);
        return -err;
    }
}

static int connect_retry(hs_rdv_client_t *c, const char *host, int port, double deadline)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    double backoff = 0.01;
    int last = 0;
    for (;;) {
        struct addrinfo *res = NULL;
        int rc = getaddrinfo(host, ps, &hints, &res);
        if (rc == 0) {
            for (struct addrinfo *a = res; a; a = a->ai_next) {
                int fd = try_connect(a, deadline);
                if (fd >= 0) {
                    freeaddrinfo(res);
                    return fd;
                }
                last = -fd;
            }
            freeaddrinfo(res);
        } else if (rc != EAI_AGAIN) {
            return HS_ERR(-EHOSTUNREACH,
                          "rank %d: cannot resolve the rendezvous host in HS_RDV=%s: %s", c->rank,
                          c->addr, gai_strerror(rc));
        }
        double left = deadline - hs_now();
        if (left <= 0) break;
        hs_sleep(HS_MIN(backoff, left));
        backoff = HS_MIN(backoff * 2, 0.25);
    }
    return HS_ERR(-ETIMEDOUT,
                  "rank %d: cannot reach the rendezvous at HS_RDV=%s within %g s (%s): is the "
                  "launcher running, and reachable from this host?",
                  c->rank, c->addr, c->timeout_s, last ? strerror(last) : "timed out");
}

/* Receive one message from the launcher. On ERROR returns its text as an error. `*body` is
 * malloc'ed (NULL when len is 0). `what` names the wait for messages. A message other than
 * ERROR whose length is not `expect` is returned without its body (nothing allocated, nothing
 * waited for): the caller refuses it. */
static int recv_msg(hs_rdv_client_t *c, hs_rdv_hdr_t *h, uint8_t **body, const char *what,
                    uint64_t expect)
{
    uint8_t hb[HS_RDV_HDR_BYTES];
    double deadline = hs_now() + c->timeout_s + CLIENT_GRACE_S;
    *body = NULL;
    int rc = hs_rdv_read_all(c->fd, hb, sizeof hb, deadline);
    if (rc == -ETIMEDOUT)
        return HS_ERR(-ETIMEDOUT,
                      "rank %d: rendezvous timeout after %g s waiting for %s (no "
                      "answer from the launcher at %s)",
                      c->rank, c->timeout_s + CLIENT_GRACE_S, what, c->addr);
    if (rc == -ECONNRESET)
        return HS_ERR(-ECONNRESET,
                      "rank %d: the rendezvous at %s closed the connection while "
                      "this rank waited for %s, without saying why (the launcher exited or "
                      "was killed?)",
                      c->rank, c->addr, what);
    if (rc < 0)
        return HS_ERR(rc, "rank %d: reading from the rendezvous at %s: %s", c->rank, c->addr,
                      strerror(-rc));
    hs_rdv_hdr_decode(hb, h);
    const char *why = NULL;
    if (hs_rdv_hdr_check(h, 0, &why) < 0)
        return HS_ERR(-EPROTO, "rank %d: malformed message from the rendezvous at %s: %s", c->rank,
                      c->addr, why);
    if (h->type != HS_RDV_ERROR && h->len != expect) return 0;
    if (h->len) {
        *body = malloc((size_t)h->len + 1);
        if (!*body)
            return HS_ERR(-ENOMEM, "rank %d: out of memory for a rendezvous message", c->rank);
        rc = hs_rdv_read_all(c->fd, *body, (size_t)h->len, deadline);
        if (rc < 0) {
            HS_FREE(*body);
            return HS_ERR(rc, "rank %d: reading from the rendezvous at %s: %s", c->rank, c->addr,
                          rc == -ECONNRESET ? "connection closed" : strerror(-rc));
        }
    }
    if (h->type == HS_RDV_ERROR) {
        char text[HS_RDV_ERR_MAX + 1];
        size_t n = (size_t)h->len;
        if (n) memcpy(text, *body, n);
        text[n] = '\0';
        HS_FREE(*body);
        /* "rendezvous busy:": dropped among connections without the key; connect again. */
        int code = !strncmp(text, HS_RDV_BUSY, strlen(HS_RDV_BUSY)) ? -EBUSY
                   : strstr(text, "timeout")                        ? -ETIMEDOUT
                                                                    : -ECONNABORTED;
        return HS_ERR(code, "rank %d: rendezvous at %s: %s", c->rank, c->addr, text);
    }
    return 0;
}

static int send_msg(hs_rdv_client_t *c, uint16_t type, uint32_t seq, const void *data, size_t len)
{
    uint8_t hb[HS_RDV_HDR_BYTES];
    hs_rdv_hdr_t h = hs_rdv_hdr_make(type, (uint32_t)c->rank, seq, len);
    hs_rdv_hdr_encode(&h, hb);
    double deadline = hs_now() + c->timeout_s + CLIENT_GRACE_S;
    int rc = hs_rdv_write_all(c->fd, hb, sizeof hb, deadline);
    if (rc == 0 && len) rc = hs_rdv_write_all(c->fd, data, len, deadline);
    if (rc < 0)
        return HS_ERR(rc, "rank %d: sending to the rendezvous at %s: %s", c->rank, c->addr,
                      rc == -ECONNRESET ? "connection closed by the launcher" : strerror(-rc));
    return 0;
}

int hs_rdv_client_join(hs_rdv_client_t *c, const char *addr, const char *key, int rank, int size,
                       const char *host, double timeout_s, char *hosts)
{
    memset(c, 0, sizeof *c);
    c->fd = -1;
    c->rank = rank;
    c->size = size;
    c->timeout_s = timeout_s;
    snprintf(c->addr, sizeof c->addr, "%s", addr);
    if (!hs_rdv_key_valid(key))
        return HS_ERR(-EINVAL, "rank %d: HS_JOB_KEY must be %d hex digits", rank, HS_RDV_KEY_HEX);
    char h[256];
    int port;
    HS_TRY(hs_rdv_parse_addr(addr, "HS_RDV", h, sizeof h, &port));
    hs_rdv_hello_t hello = {.size = (uint32_t)size, .pid = (uint32_t)getpid()};
    memcpy(hello.key, key, HS_RDV_KEY_HEX);
    snprintf(hello.host, sizeof hello.host, "%s", host);
    uint8_t hb[HS_RDV_HELLO_BYTES];
    hs_rdv_hello_encode(&hello, hb);
    double deadline = hs_now() + timeout_s, backoff = 0.02;
    hs_rdv_hdr_t rh;
    uint8_t *body = NULL;
    int rc, resets = 0, again = 0;
    /* A launcher flooded by connections without the key may drop this one before reading
     * its HELLO ("rendezvous busy: ..."): connect again until the start-up deadline. */
    for (;;) {
        /* Connecting again after a drop: a launcher that is gone refuses at once, so a short
         * bound (not the whole start-up timeout) says so soon. */
        int fd = connect_retry(c, h, port, again ? HS_MIN(deadline, hs_now() + 2.0) : deadline);
        if (fd < 0) return fd;
        c->fd = fd;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        rc = send_msg(c, HS_RDV_HELLO, 0, hb, sizeof hb);
        if (rc == 0)
            rc = recv_msg(c, &rh, &body, "every rank to connect", (uint64_t)size * HS_RDV_HOST_MAX);
        /* Dropped (busy), or closed before this rank was admitted (a drop that raced with
         * our HELLO reads as a reset): again, while the deadline lasts. A launcher that is
         * gone refuses the next connect, and connect_retry says so. */
        if ((rc != -EBUSY && (rc != -ECONNRESET || ++resets > 5)) || hs_now() + backoff >= deadline)
            break;
        again = 1;
        close(c->fd);
        c->fd = -1;
        hs_sleep(backoff);
        backoff = HS_MIN(2 * backoff, 0.5);
    }
    if (rc == 0 && (rh.type != HS_RDV_WELCOME || rh.len != (uint64_t)size * HS_RDV_HOST_MAX))
        rc = HS_ERR(-EPROTO,
                    "rank %d: unexpected answer from the rendezvous at %s (type %u, "
                    "%llu bytes; expected the hostnames of %d ranks)",
                    rank, addr, rh.type, (unsigned long long)rh.len, size);
    if (rc == 0 && body) memcpy(hosts, body, (size_t)size * HS_RDV_HOST_MAX);
    free(body);
    if (rc < 0) {
        close(c->fd);
        c->fd = -1;
    }
    return rc;
}

int hs_rdv_client_allgather(hs_rdv_client_t *c, const void *mine, size_t len, void *all)
{
    if (c->fd < 0) return HS_ERR(-ENOTCONN, "rank %d: not connected to the rendezvous", c->rank);
    if (len > HS_RDV_GATHER_MAX)
        return HS_ERR(-EMSGSIZE,
                      "rank %d: allgather of %zu bytes per rank exceeds the "
                      "rendezvous bound of %u bytes",
                      c->rank, len, HS_RDV_GATHER_MAX);
    uint32_t seq = ++c->seq;
    HS_TRY(send_msg(c, HS_RDV_GATHER, seq, mine, len));
    char what[64];
    snprintf(what, sizeof what, "collective round %u", seq);
    hs_rdv_hdr_t h;
    uint8_t *body = NULL;
    HS_TRY(recv_msg(c, &h, &body, what, (uint64_t)len * (uint64_t)c->size));
    int rc = 0;
    if (h.type != HS_RDV_RESULT || h.seq != seq || h.len != (uint64_t)len * (uint64_t)c->size)
        rc = HS_ERR(-EPROTO,
                    "rank %d: unexpected answer from the rendezvous in %s (type %u, "
                    "round %u, %llu bytes; expected %zu)",
                    c->rank, what, h.type, h.seq, (unsigned long long)h.len, len * (size_t)c->size);
    else if (h.len && body)
        memcpy(all, body, (size_t)h.len);
    free(body);
    return rc;
}

void hs_rdv_client_leave(hs_rdv_client_t *c)
{
    if (c->fd < 0) return;
    uint8_t hb[HS_RDV_HDR_BYTES];
    hs_rdv_hdr_t h = hs_rdv_hdr_make(HS_RDV_BYE, (uint32_t)c->rank, 0, 0);
    hs_rdv_hdr_encode(&h, hb);
    (void)hs_rdv_write_all(c->fd, hb, sizeof hb, hs_now() + 1.0);
    close(c->fd);
    c->fd = -1;
}
