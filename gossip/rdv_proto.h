/*
 * gossip/rdv_proto.h — wire format of the start-up rendezvous (`hearsay run`, Slurm).
 *
 * A star: every worker opens one TCP connection to the launcher and keeps it for its whole
 * start-up; the launcher answers each collective round once every rank has contributed.
 * Every message is a fixed 24-byte header followed by `len` payload bytes. All integers are
 * unsigned and big-endian (network order); strings are fixed-width, NUL-padded.
 *
 *   offset size field
 *        0    4 magic    HS_RDV_MAGIC ("HSRD")
 *        4    2 version  HS_RDV_VERSION
 *        6    2 type     enum hs_rdv_type
 *        8    4 rank     sender's rank (worker -> launcher); 0 from the launcher
 *       12    4 seq      collective round (1, 2, ...); 0 for HELLO / WELCOME / BYE / ERROR
 *       16    8 len      payload bytes that follow
 *
 * Conversation (worker W, launcher L):
 *   W -> L  HELLO    payload struct hs_rdv_hello (the job key, the job size, pid, hostname)
 *   L -> W  ERROR    text, then close: bad key, bad rank, duplicate rank, size mismatch,
 *                    malformed message, timeout naming the ranks that never connected,
 *                    "rendezvous busy: ..." (dropped among too many connections without
 *                    the key: the worker connects again while its deadline lasts)
 *   L -> W  WELCOME  once all ranks said HELLO; payload: size x HS_RDV_HOST_MAX hostnames
 *   W -> L  GATHER   seq k, payload: this rank's bytes (every rank the same length)
 *   L -> W  RESULT   seq k, payload: size x len bytes in rank order (a barrier is len 0)
 *   W -> L  BYE      leaving after the last round (a close without BYE is a dead rank)
 * A connection that does not present a valid HELLO within the hello timeout, or sends
 * anything malformed, is answered with ERROR (when possible) and closed.
 *
 * Versions:
 *   1 — first version (this layout).
 */
#ifndef HEARSAY_GOSSIP_RDV_PROTO_H
#define HEARSAY_GOSSIP_RDV_PROTO_H

#include <stdint.h>

#define HS_RDV_MAGIC   0x48535244u /* "HSRD" */
#define HS_RDV_VERSION 1u

#define HS_RDV_HDR_BYTES 24
#define HS_RDV_KEY_HEX   32 /* 128-bit key as 32 lowercase hex digits */
#define HS_RDV_HOST_MAX  64 /* hostname bytes on the wire, NUL-padded (truncated if longer) */
#define HS_RDV_ERR_MAX   1024
/* An ERROR text starting so: the launcher dropped or refused a connection that had not yet
 * presented the key, for want of room (a flood of strangers); the worker connects again. */
#define HS_RDV_BUSY "rendezvous busy:"
/* Bound on one rank's contribution to a round (start-up data only: endpoint addresses). */
#define HS_RDV_GATHER_MAX (16u << 20)
#define HS_RDV_MAX_SIZE   1024 /* ranks in one job */

enum hs_rdv_type {
    HS_RDV_HELLO = 1,
    HS_RDV_WELCOME = 2,
    HS_RDV_GATHER = 3,
    HS_RDV_RESULT = 4,
    HS_RDV_BYE = 5,
    HS_RDV_ERROR = 6,
};

/* Decoded header (host order). */
typedef struct hs_rdv_hdr {
    uint32_t magic;
    uint16_t version;
    uint16_t type;
    uint32_t rank;
    uint32_t seq;
    uint64_t len;
} hs_rdv_hdr_t;

/* HELLO payload (HS_RDV_HELLO_BYTES on the wire):
 *   offset size field
 *        0   32 key      the job key, hex (HS_JOB_KEY)
 *       32    4 size     the job size this worker believes in
 *       36    4 pid      the worker's process id (for log lines)
 *       40   64 host     hostname, NUL-padded */
#define HS_RDV_HELLO_BYTES (HS_RDV_KEY_HEX + 4 + 4 + HS_RDV_HOST_MAX)

typedef struct hs_rdv_hello {
    char key[HS_RDV_KEY_HEX];
    uint32_t size;
    uint32_t pid;
    char host[HS_RDV_HOST_MAX + 1]; /* NUL-terminated after decoding */
} hs_rdv_hello_t;

#endif
