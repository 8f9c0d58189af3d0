/*
 * gossip/shm_wire.h — the layout of the shared-memory backend ("hsshm", gossip/shm.c): the
 * address blob, the per-rank segment and the records in its rings. Everything one rank reads
 * from another's memory is defined here, once.
 *
 * Version 1 (this file):
 *
 *   Each rank (the owner) creates one POSIX shared-memory segment holding its inbound rings,
 *   one per possible sender, and every other rank maps it:
 *     [ segment header | ring 0 | ring 1 | ... | ring size-1 ]   (the owner's own ring unused)
 *   A ring is a single-producer (the sender) single-consumer (the owner) byte ring:
 *     [ ring header (tail, head, producer_waiting: each on its own cache line) | data ]
 *   tail and head are monotonic byte positions; the producer owns tail, the consumer head.
 *   The data holds records, each 64-byte aligned and never wrapping around the end: a PAD
 *   record (header only) fills the rest of the ring when the next record does not fit.
 *
 *   Wake-ups: the segment header's doorbell is a futex word. Whoever has news for the owner
 *   (a record written into one of its rings, space freed in a ring the owner writes to, a
 *   completion made by another of its threads) increments it and, when the owner has
 *   sleepers, wakes them. An owner waits only on its own doorbell.
 *
 *   A message of L bytes travels as ceil(L / C) DATA records (one when L = 0), in order and
 *   never interleaved with another message on the same ring; record k carries bytes
 *   [off, off + len) and every record repeats the tag and the total length.
 *   A large message may instead travel as one RTS record (when the receiver's reader_ok is
 *   set): its 8-byte payload is the address of the data in the sender, which the receiver
 *   copies itself (process_vm_readv, one copy) when it reaches the record, then increments
 *   the ring's rdv_done and rings the sender's doorbell; RTS records are finished in ring
 *   order, so the sender completes its RTS sends in the order it wrote them.
 *
 *   Departure (version 2): a rank about to exit on purpose (an injected crash) takes what is in
 *   its rings, then sets its segment's `left` and takes nothing more. Senders then write no
 *   more records to it; the records it never consumed (between head and tail) are still the
 *   sender's, who may take them back (hs_transport_unsent) and marks them TAKEN (a TAKEN
 *   record keeps its length, so the records after it are still found).
 *
 *   Mapped buffers (version 3): a message sent from a buffer the sender made mappable
 *   (hs_transport_buf_alloc: a memfd) travels as one SNAP record (payload hs_shm_snap_t): its
 *   address (for process_vm_readv, the fallback) and the memfd's number in the sender, so the
 *   receiver can map /proc/PID/fd/FD and read the bytes in place. A SNAP is acknowledged like
 *   an RTS (rdv_done, in ring order), when the receiver has copied it or, for a view receive,
 *   when the view is released: until then the sender leaves the buffer alone.
 *
 *   Replacements (version 5): a process that replaces a crashed rank in a running job
 *   (crash:...:rejoin=D; its transport opened with hs_transport_opts_t.incarnation > 0) cannot
 *   open the peers' segments by name (each owner unlinks its name once every peer has mapped
 *   it), so every owner keeps its segment's descriptor open and announces it (seg_fd): the
 *   replacement opens /proc/PID/fd/SEG_FD. It then produces into the rings the crashed process
 *   produced into, from where that process stopped (tail), and its first record in each is a
 *   RESET whose payload is its own address. The consumer, reaching it, drops the message the
 *   crashed process left half-written, fails its own sends still queued for that process,
 *   maps the replacement's segment (by /proc too) and sends to it from then on. The crashed
 *   process's segment stays mapped until the transport closes: what was sent to it and never
 *   taken is still the senders' to take back (hs_transport_unsent). A replacement sends
 *   eagerly only (no RTS or SNAP): the by-address acknowledgements of the crashed process's
 *   records (rdv_done) are not its own.
 */
#ifndef HEARSAY_GOSSIP_SHM_WIRE_H
#define HEARSAY_GOSSIP_SHM_WIRE_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

#define HS_SHM_WIRE_VERSION 5u
#define HS_SHM_ADDR_MAGIC   0x41535348u /* "HSSA" */
#define HS_SHM_SEG_MAGIC    0x53535348u /* "HSSS" */
#define HS_SHM_WIN_MAGIC    0x57535348u /* "HSSW" */
#define HS_SHM_PROBE_MAGIC  0x5052534853524145ull
#define HS_SHM_HOST_MAX     64
#define HS_SHM_NAME_MAX     64
#define HS_SHM_ALIGN        64

/* Address blob: 16 + 8 + 8 + 8 + 8 + 64 + 64 = 176 bytes (<= HS_TRANSPORT_ADDR_MAX). */
typedef struct hs_shm_addr_v1 {
    uint32_t magic, version;
    uint32_t rank, pid;
    uint64_t pidns;       /* inode of /proc/self/ns/pid: the peers must share it */
    uint64_t ring_bytes;  /* data bytes of each ring of the segment */
    uint64_t probe;       /* address of a word holding HS_SHM_PROBE_MAGIC (peer-read check) */
    uint32_t seg_fd;      /* the segment's descriptor in the owner (version 5: replacements) */
    uint32_t incarnation; /* 0: the rank's first process; K: its K-th replacement */
    char host[HS_SHM_HOST_MAX];
    char name[HS_SHM_NAME_MAX]; /* shm_open name of the segment */
} hs_shm_addr_v1_t;

typedef struct hs_shm_seg_hdr {
    uint32_t magic, version;
    uint32_t owner, size;
    uint64_t ring_bytes, seg_bytes;
    _Atomic uint32_t mapped; /* ranks that mapped the segment (the owner unlinks the name
                                once every peer has) */
    alignas(HS_SHM_ALIGN) _Atomic uint32_t doorbell;
    _Atomic uint32_t sleepers;  /* owner threads blocked on the doorbell */
    _Atomic uint32_t reader_ok; /* 1: the owner can read every peer's memory (checked at
                                   connect), so senders may use RTS records; 0 unknown */
    _Atomic uint32_t left;      /* 1: the owner left the job (about to exit): it consumes
                                   nothing more from its rings */
} hs_shm_seg_hdr_t;

typedef struct hs_shm_ring_hdr {
    alignas(HS_SHM_ALIGN) _Atomic uint64_t tail;
    alignas(HS_SHM_ALIGN) _Atomic uint64_t head;
    alignas(HS_SHM_ALIGN) _Atomic uint32_t producer_waiting;
    alignas(HS_SHM_ALIGN) _Atomic uint64_t rdv_done; /* RTS messages the consumer finished */
} hs_shm_ring_hdr_t;

/* TAKEN: a record its producer took back from a consumer that exited or left (unsent), or,
 * for the first record of a message the consumer had not claimed, from one that was fenced
 * and may still run (revoke, version 4). */
enum {
    HS_SHM_REC_DATA = 1,
    HS_SHM_REC_PAD = 2,
    HS_SHM_REC_RTS = 3,
    HS_SHM_REC_TAKEN = 4,
    HS_SHM_REC_SNAP = 5, /* version 3 */
    HS_SHM_REC_RESET = 6 /* version 5: a replacement's first record; payload its address */
};
#define HS_SHM_REC_CTRL 0x100u /* flag: the transport's own traffic (barrier, windows) */
/* flag (version 4): the consumer has begun to take the message that starts with this record
 * (set by compare-and-swap; the producer takes back only an unclaimed record, by swapping it
 * to TAKEN: see hs_transport_revoke) */
#define HS_SHM_REC_CLAIMED 0x200u

typedef struct hs_shm_rec {
    uint32_t kind; /* HS_SHM_REC_DATA, _PAD, _RTS or _TAKEN, | HS_SHM_REC_CTRL */
    uint32_t tag;  /* user tag */
    uint64_t msg_len;
    uint64_t off;
    uint32_t len; /* payload bytes that follow the header */
    uint32_t seq; /* per (sender, receiver) message counter, for checks */
} hs_shm_rec_t;

#define HS_SHM_REC_HDR 32u /* header bytes of a record (payload starts here) */
_Static_assert(sizeof(hs_shm_rec_t) <= HS_SHM_REC_HDR, "record header");

/* Claims (version 4): the consumer swaps the kind of each message's first record to
 * kind | HS_SHM_REC_CLAIMED (compare-and-swap) before it takes anything of the message; a
 * producer that takes a message back from a consumer that still runs (revoke) swaps the
 * unclaimed first record to TAKEN the same way. Whoever wins owns the message: the consumer
 * skips a TAKEN first record and drops the rest of that message; a claimed one is finished
 * (an RTS or SNAP acknowledged) as before. */

/* Payload of a SNAP record (version 3): the message is bytes [off, off + msg_len) of the
 * sender's mappable buffer number `id` (map_len bytes, memfd `fd` in the sender), which starts
 * at `addr` - off in the sender's address space (addr: the message itself, for
 * process_vm_readv). */
typedef struct hs_shm_snap {
    uint64_t addr;
    uint64_t id;
    uint64_t map_len;
    uint64_t off;
    uint32_t fd, pad;
} hs_shm_snap_t;

/* Window descriptor (exchanged over CTRL messages when a window is created). */
typedef struct hs_shm_win_v1 {
    uint32_t magic, version;
    uint64_t base, len;
} hs_shm_win_v1_t;

/* CTRL tags of the backend's own traffic. */
#define HS_SHM_CTRL_BARRIER 1u
#define HS_SHM_CTRL_WIN     2u

#endif
