/* gossip/rdv_wire.c — rendezvous message encoding and bounded socket I/O (see rdv_proto.h). */
#include "gossip/rdv_wire.h"
#include "hearsay/common.h"
#include "hearsay/rendezvous.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (24 - 8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)((p[0] << 8) | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v = (v << 8) | p[i];
    return v;
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    return v;
}

void hs_rdv_hdr_encode(const hs_rdv_hdr_t *h, uint8_t out[HS_RDV_HDR_BYTES])
{
    put32(out, h->magic);
    put16(out + 4, h->version);
    put16(out + 6, h->type);
    put32(out + 8, h->rank);
    put32(out + 12, h->seq);
    put64(out + 16, h->len);
}

void hs_rdv_hdr_decode(const uint8_t in[HS_RDV_HDR_BYTES], hs_rdv_hdr_t *h)
{
    h->magic = get32(in);
    h->version = get16(in + 4);
    h->type = get16(in + 6);
    h->rank = get32(in + 8);
    h->seq = get32(in + 12);
    h->len = get64(in + 16);
}

hs_rdv_hdr_t hs_rdv_hdr_make(uint16_t type, uint32_t rank, uint32_t seq, uint64_t len)
{
    hs_rdv_hdr_t h = {.magic = HS_RDV_MAGIC,
                      .version = HS_RDV_VERSION,
                      .type = type,
                      .rank = rank,
                      .seq = seq,
                      .len = len};
    return h;
}

int hs_rdv_hdr_check(const hs_rdv_hdr_t *h, int to_launcher, const char **why)
{
    if (h->magic != HS_RDV_MAGIC) {
        *why = "bad magic (not a hearsay rendezvous message)";
        return -EPROTO;
    }
    if (h->version != HS_RDV_VERSION) {
        *why = "unsupported protocol version";
        return -EPROTO;
    }
    if (to_launcher) {
        switch (h->type) {
        case HS_RDV_HELLO:
            if (h->len != HS_RDV_HELLO_BYTES) goto bad_len;
            return 0;
        case HS_RDV_GATHER:
            if (h->len > HS_RDV_GATHER_MAX) goto bad_len;
            return 0;
        case HS_RDV_BYE:
            if (h->len != 0) goto bad_len;
            return 0;
        default:
            break;
        }
    } else {
        switch (h->type) {
        case HS_RDV_WELCOME:
            if (h->len > (uint64_t)HS_RDV_MAX_SIZE * HS_RDV_HOST_MAX) goto bad_len;
            return 0;
        case HS_RDV_RESULT:
            if (h->len > (uint64_t)HS_RDV_MAX_SIZE * HS_RDV_GATHER_MAX) goto bad_len;
            return 0;
        case HS_RDV_ERROR:
            if (h->len > HS_RDV_ERR_MAX) goto bad_len;
            return 0;
        default:
            break;
        }
    }
    *why = "unexpected message type";
    return -EPROTO;
bad_len:
    *why = "payload length out of range for its message type";
    return -EPROTO;
}

void hs_rdv_hello_encode(const hs_rdv_hello_t *m, uint8_t out[HS_RDV_HELLO_BYTES])
{
    memcpy(out, m->key, HS_RDV_KEY_HEX);
    put32(out + HS_RDV_KEY_HEX, m->size);
    put32(out + HS_RDV_KEY_HEX + 4, m->pid);
    memset(out + HS_RDV_KEY_HEX + 8, 0, HS_RDV_HOST_MAX);
    size_t n = strnlen(m->host, HS_RDV_HOST_MAX);
    memcpy(out + HS_RDV_KEY_HEX + 8, m->host, n);
}

void hs_rdv_hello_decode(const uint8_t in[HS_RDV_HELLO_BYTES], hs_rdv_hello_t *m)
{
    memcpy(m->key, in, HS_RDV_KEY_HEX);
    m->size = get32(in + HS_RDV_KEY_HEX);
    m->pid = get32(in + HS_RDV_KEY_HEX + 4);
    memcpy(m->host, in + HS_RDV_KEY_HEX + 8, HS_RDV_HOST_MAX);
    m->host[HS_RDV_HOST_MAX] = '\0';
}

static int is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

int hs_rdv_key_valid(const char *key)
{
    if (!key) return 0;
    for (int i = 0; i < HS_RDV_KEY_HEX; i++)
        if (!is_hex(key[i])) return 0;
    return key[HS_RDV_KEY_HEX] == '\0';
}

int hs_rdv_key_equal(const char *a, const char *b)
{
    unsigned diff = 0;
    for (int i = 0; i < HS_RDV_KEY_HEX; i++) diff |= (unsigned char)a[i] ^ (unsigned char)b[i];
    return diff == 0;
}

int hs_rdv_parse_addr(const char *s, const char *what, char *host, size_t host_max, int *port)
{
    if (!s || !*s) return HS_ERR(-EINVAL, "%s is empty (expected HOST:PORT)", what);
    const char *colon, *h0 = s;
    size_t hl;
    if (s[0] == '[') {
        const char *end = strchr(s, ']');
        if (!end || end[1] != ':') return HS_ERR(-EINVAL, "%s='%s': expected [ADDR]:PORT", what, s);
        h0 = s + 1;
        hl = (size_t)(end - h0);
        colon = end + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon) return HS_ERR(-EINVAL, "%s='%s': expected HOST:PORT", what, s);
        hl = (size_t)(colon - s);
    }
    if (hl == 0 || hl >= host_max)
        return HS_ERR(-EINVAL, "%s='%s': bad host part (expected HOST:PORT)", what, s);
    long p;
    if (hs_parse_long(colon + 1, 1, 65535, what, &p) < 0)
        return HS_ERR(-EINVAL, "%s='%s': bad port (expected HOST:PORT, port 1..65535)", what, s);
    memcpy(host, h0, hl);
    host[hl] = '\0';
    *port = (int)p;
    return 0;
}

/* Wait until fd is ready for `events` or the deadline passes. */
static int wait_fd(int fd, short events, double deadline)
{
    for (;;) {
        double left = deadline - hs_now();
        if (left <= 0) return -ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = events};
        int ms = left > 1e6 ? 1000000000 : (int)(left * 1000.0) + 1;
        int n = poll(&p, 1, ms);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (n > 0) return 0;
    }
}

int hs_rdv_write_all(int fd, const void *buf, size_t len, double deadline)
{
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int rc = wait_fd(fd, POLLOUT, deadline);
            if (rc < 0) return rc;
            continue;
        }
        return n < 0 ? (errno == EPIPE ? -ECONNRESET : -errno) : -EIO;
    }
    return 0;
}

int hs_rdv_read_all(int fd, void *buf, size_t len, double deadline)
{
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0) return -ECONNRESET;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int rc = wait_fd(fd, POLLIN, deadline);
            if (rc < 0) return rc;
            continue;
        }
        return -errno;
    }
    return 0;
}

int hs_rdv_key_generate(char *out)
{
    uint8_t raw[HS_JOB_KEY_CHARS / 2];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return HS_ERR(-errno, "cannot open /dev/urandom for the job key: %s", strerror(errno));
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t n = read(fd, raw + got, sizeof raw - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            close(fd);
            return HS_ERR(-EIO, "cannot read /dev/urandom for the job key");
        }
        got += (size_t)n;
    }
    close(fd);
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof raw; i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 15];
    }
    out[HS_JOB_KEY_CHARS] = '\0';
    return 0;
}

int hs_rdv_listen(const char *bind_addr, int port, int *lfd, int *port_out, char *addr,
                  size_t addr_cap)
{
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *res = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int rc = getaddrinfo(bind_addr, ps, &hints, &res);
    if (rc != 0)
        return HS_ERR(-EINVAL, "rendezvous: cannot resolve bind address '%s': %s", bind_addr,
                      gai_strerror(rc));
    int err = 0;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            err = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 256) == 0) {
            struct sockaddr_storage sa;
            socklen_t sl = sizeof sa;
            getsockname(fd, (struct sockaddr *)&sa, &sl);
            *port_out = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
                                                       : ((struct sockaddr_in *)&sa)->sin_port);
            char host[INET6_ADDRSTRLEN];
            getnameinfo(a->ai_addr, a->ai_addrlen, host, sizeof host, NULL, 0, NI_NUMERICHOST);
            int wildcard = !strcmp(host, "0.0.0.0") || !strcmp(host, "::");
            if (wildcard) {
                char hn[256] = "localhost";
                gethostname(hn, sizeof hn - 1);
                snprintf(addr, addr_cap, "%s:%d", hn, *port_out);
            } else if (a->ai_family == AF_INET6) {
                snprintf(addr, addr_cap, "[%s]:%d", host, *port_out);
            } else {
                snprintf(addr, addr_cap, "%s:%d", host, *port_out);
            }
            *lfd = fd;
            freeaddrinfo(res);
            return 0;
        }
        err = errno;
        close(fd);
    }
    freeaddrinfo(res);
    return HS_ERR(-(err ? err : EADDRNOTAVAIL), "rendezvous: cannot listen on %s port %d: %s",
                  bind_addr, port, strerror(err ? err : EADDRNOTAVAIL));
}
