/*
 * gossip/rdv_wire.h — encoding of rendezvous messages and bounded socket I/O, shared by the
 * launcher side (rendezvous.c) and the worker side (bootstrap.c). Internal to libhearsay.
 */
#ifndef HEARSAY_GOSSIP_RDV_WIRE_H
#define HEARSAY_GOSSIP_RDV_WIRE_H

#include "gossip/rdv_proto.h"

#include <stddef.h>
#include <stdint.h>

/* Header to / from its 24 wire bytes. */
void hs_rdv_hdr_encode(const hs_rdv_hdr_t *h, uint8_t out[HS_RDV_HDR_BYTES]);
void hs_rdv_hdr_decode(const uint8_t in[HS_RDV_HDR_BYTES], hs_rdv_hdr_t *h);
/* Fill a header with magic and version. */
hs_rdv_hdr_t hs_rdv_hdr_make(uint16_t type, uint32_t rank, uint32_t seq, uint64_t len);
/* Check magic, version, type and length bounds of a received header. Returns 0, or -EPROTO
 * with `why` (a static string) saying what is wrong. `to_launcher`: 1 for messages a worker
 * may send, 0 for messages the launcher may send. */
int hs_rdv_hdr_check(const hs_rdv_hdr_t *h, int to_launcher, const char **why);

void hs_rdv_hello_encode(const hs_rdv_hello_t *m, uint8_t out[HS_RDV_HELLO_BYTES]);
void hs_rdv_hello_decode(const uint8_t in[HS_RDV_HELLO_BYTES], hs_rdv_hello_t *m);

/* 1 when `key` is exactly 32 hex digits. */
int hs_rdv_key_valid(const char *key);
/* Constant-time comparison of two 32-byte keys; 1 when equal. */
int hs_rdv_key_equal(const char *a, const char *b);

/* Split "host:port" ("[v6addr]:port" too) into host (NUL-terminated, at most host_max - 1
 * bytes) and port. 0 or -EINVAL naming `what` and the text. */
int hs_rdv_parse_addr(const char *s, const char *what, char *host, size_t host_max, int *port);

/* Blocking-with-deadline I/O on a socket (deadline in hs_now() seconds). Return 0, -ETIMEDOUT,
 * -ECONNRESET (peer closed), or another negative errno; they do not record an error message,
 * the caller does with its own context. */
int hs_rdv_write_all(int fd, const void *buf, size_t len, double deadline);
int hs_rdv_read_all(int fd, void *buf, size_t len, double deadline);

/* Listen on bind_addr:port (port 0: any free port) with a non-blocking, close-on-exec socket.
 * Sets *lfd, the bound port, and addr = "HOST:PORT" for workers to connect to (this host's
 * name when bound to a wildcard address). 0 or a negative errno with a message. */
int hs_rdv_listen(const char *bind_addr, int port, int *lfd, int *port_out, char *addr,
                  size_t addr_cap);

#endif
