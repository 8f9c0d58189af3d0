/*
 * gossip/fabric_wire.h — the libfabric backend's wire format: tag layout, address blob and
 * window descriptor. Everything that crosses between ranks is defined here, once.
 *
 * Version 1 (this file):
 *
 *   64-bit libfabric tag of every message chunk
 *     bit  63      CTRL   1 = the transport's own traffic (barrier, window keys)
 *     bit  62      FIRST  1 = first chunk of a message (the one a receive matches)
 *     bits 46..61  SRC    sending rank (16 bits: up to 65536 ranks); receives match the
 *                         source with this field, so providers without FI_DIRECTED_RECV
 *                         (tcp;ofi_rxm) still do source matching
 *     bits 30..45  CHUNK  FIRST: the number of chunks of the message (1..65535);
 *                         otherwise: this chunk's index (1..65534)
 *     bits 24..29  SEQ    per (sender, receiver) message counter mod 64, so chunks of two
 *                         messages in flight with the same tag never mix
 *     bits  0..23  TAG    user tag (HS_TAG_MAX)
 *   A message of L bytes sent with chunk size C is ceil(L / C) chunks; chunk k carries bytes
 *   [k*C, min(L, (k+1)*C)). The receiver learns C from the length of chunk 0 and posts the
 *   remaining chunks at k*C once chunk 0 has arrived. A zero-length message is one chunk.
 *
 *   Address blob (exchanged at start-up, fixed-width little-endian fields):
 *     magic "HSFA", version, rank, pid, hostname, provider name, endpoint name (its length
 *     1..HS_FAB_EPNAME_MAX, checked at connect like magic, version and rank).
 *   Window descriptor (exchanged over CTRL messages when a window is created):
 *     magic "HSFW", version, base address as the target wants it, length, key.
 */
#ifndef HEARSAY_GOSSIP_FABRIC_WIRE_H
#define HEARSAY_GOSSIP_FABRIC_WIRE_H

#include <stdint.h>

#define HS_FAB_WIRE_VERSION 1u

#define HS_FAB_TAG_CTRL        (1ull << 63)
#define HS_FAB_TAG_FIRST       (1ull << 62)
#define HS_FAB_TAG_SRC_SHIFT   46
#define HS_FAB_TAG_SRC_MASK    (0xFFFFull << HS_FAB_TAG_SRC_SHIFT)
#define HS_FAB_TAG_CHUNK_SHIFT 30
#define HS_FAB_TAG_CHUNK_MASK  (0xFFFFull << HS_FAB_TAG_CHUNK_SHIFT)
#define HS_FAB_TAG_SEQ_SHIFT   24
#define HS_FAB_TAG_SEQ_MASK    (0x3Full << HS_FAB_TAG_SEQ_SHIFT)
#define HS_FAB_TAG_USER_MASK   0xFFFFFFull
#define HS_FAB_MAX_CHUNKS      0xFFFFu
#define HS_FAB_MAX_RANKS       0x10000

static inline uint64_t hs_fab_tag(int ctrl, int first, int src, unsigned chunk, unsigned seq,
                                  uint32_t tag)
{
    return (ctrl ? HS_FAB_TAG_CTRL : 0) | (first ? HS_FAB_TAG_FIRST : 0) |
           ((uint64_t)(unsigned)src << HS_FAB_TAG_SRC_SHIFT) |
           ((uint64_t)(chunk & 0xFFFFu) << HS_FAB_TAG_CHUNK_SHIFT) |
           ((uint64_t)(seq & 0x3Fu) << HS_FAB_TAG_SEQ_SHIFT) | (tag & HS_FAB_TAG_USER_MASK);
}
static inline int hs_fab_tag_src(uint64_t t)
{
    return (int)((t & HS_FAB_TAG_SRC_MASK) >> HS_FAB_TAG_SRC_SHIFT);
}
static inline unsigned hs_fab_tag_chunk(uint64_t t)
{
    return (unsigned)((t & HS_FAB_TAG_CHUNK_MASK) >> HS_FAB_TAG_CHUNK_SHIFT);
}
static inline unsigned hs_fab_tag_seq(uint64_t t)
{
    return (unsigned)((t & HS_FAB_TAG_SEQ_MASK) >> HS_FAB_TAG_SEQ_SHIFT);
}

#define HS_FAB_ADDR_MAGIC 0x41465348u /* "HSFA" little-endian */
#define HS_FAB_EPNAME_MAX 256
#define HS_FAB_HOST_MAX   64
#define HS_FAB_PROV_MAX   32

/* v1: 24 + 64 + 32 + 4 + 256 + 4 = 384 bytes (<= HS_TRANSPORT_ADDR_MAX). */
typedef struct hs_fab_addr_v1 {
    uint32_t magic, version;
    uint32_t rank, pid;
    uint64_t pidns; /* inode of /proc/self/ns/pid (0 unknown): pids compare only when equal */
    char host[HS_FAB_HOST_MAX]; /* NUL-terminated hostname */
    char prov[HS_FAB_PROV_MAX]; /* provider name, must match across ranks */
    uint32_t epname_len;
    uint8_t epname[HS_FAB_EPNAME_MAX]; /* fi_getname() */
} hs_fab_addr_v1_t;

#define HS_FAB_WIN_MAGIC 0x57465348u /* "HSFW" */
typedef struct hs_fab_win_v1 {
    uint32_t magic, version;
    uint64_t base; /* remote address of byte 0 (0 when the provider uses offsets) */
    uint64_t len;
    uint64_t key;
} hs_fab_win_v1_t;

/* CTRL tags (user field) of the transport's own traffic. */
#define HS_FAB_CTRL_BARRIER 1u
#define HS_FAB_CTRL_WIN     2u
/* The close's flush (providers over ofi_rxm): a FIN to every rank this one sent to, each
 * answered with a FINACK once the FIN, and so everything sent before it, has arrived. */
#define HS_FAB_CTRL_FIN    3u
#define HS_FAB_CTRL_FINACK 4u

#endif
