/*
 * optim/elastic_wire.h — the wire format of the EASGD center service (optim/center.c) and of
 * leader-SGD's loss gossip and snapshots (optim/lsgd.c): one fixed 64-byte header, then
 * `count` floats.
 *
 * Version 1 (the only one): native byte order (the ranks of a job run one build).
 */
#ifndef HEARSAY_OPTIM_ELASTIC_WIRE_H
#define HEARSAY_OPTIM_ELASTIC_WIRE_H

#include "hearsay/common.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define HS_EL_MAGIC   0x4c455348u /* "HSEL" */
#define HS_EL_VERSION 1u

typedef enum hs_el_kind {
    HS_EL_READ = 1,    /* worker -> owner: send me your shard (count 0) */
    HS_EL_ADD = 2,     /* worker -> owner: add these count floats to your shard */
    HS_EL_FIN = 3,     /* worker -> owner: I sent you `seq` adds in all; send me the final shard */
    HS_EL_DATA = 4,    /* owner -> worker: the shard now (seq = adds applied so far) */
    HS_EL_FINAL = 5,   /* owner -> worker: the final shard (every live worker has finished) */
    HS_EL_LOSS = 6,    /* LSGD: value = recent loss, seq = version (iteration), shard = done flag */
    HS_EL_SNAPREQ = 7, /* LSGD: send me your published snapshot */
    HS_EL_SNAP = 8,    /* LSGD: snapshot, seq = its version, check = hs_el_checksum */
} hs_el_kind_t;

/* Flags or-ed into `kind` of DATA, FINAL and ADD (EASGD with --compress fp16|bf16): the payload
 * is `count` 16-bit values instead of floats. A receiver decodes by the flag. */
#define HS_EL_FP16      0x100u
#define HS_EL_BF16      0x200u
#define HS_EL_HALF_MASK (HS_EL_FP16 | HS_EL_BF16)

typedef struct hs_el_hdr_v1 {
    uint32_t magic;    /* HS_EL_MAGIC */
    uint16_t version;  /* HS_EL_VERSION */
    uint16_t kind;     /* hs_el_kind_t */
    int32_t sender;    /* rank */
    int32_t shard;     /* center shard index; LOSS: 1 when the sender has finished its run */
    uint64_t count;    /* floats after the header */
    uint64_t seq;      /* kind-specific counter (see hs_el_kind_t) */
    int64_t iteration; /* sender's iteration */
    double value;      /* LOSS / SNAP: the sender's recent training loss */
    uint64_t check;    /* SNAP: hs_el_checksum of the payload */
    uint64_t pad;
} hs_el_hdr_v1_t;

_Static_assert(sizeof(hs_el_hdr_v1_t) == 64, "elastic wire header must stay 64 bytes");

static inline void hs_el_hdr_init(hs_el_hdr_v1_t *h, hs_el_kind_t kind, int sender, int shard,
                                  size_t count, uint64_t seq)
{
    memset(h, 0, sizeof *h);
    h->magic = HS_EL_MAGIC;
    h->version = HS_EL_VERSION;
    h->kind = (uint16_t)kind;
    h->sender = sender;
    h->shard = shard;
    h->count = count;
    h->seq = seq;
}

/* Check a received header: magic, version, sender, and that `len` bytes hold the header and
 * its payload. Overflow-safe: count is compared with the whole floats that follow the header,
 * never multiplied (64 + count * 4 wraps for count >= 2^62). Returns 0 or -EPROTO naming what
 * is wrong. */
static inline int hs_el_hdr_check(const hs_el_hdr_v1_t *h, size_t len, int source)
{
    if (len < sizeof *h)
        return HS_ERR(-EPROTO, "elastic message from rank %d: %zu bytes, shorter than a header",
                      source, len);
    if (h->magic != HS_EL_MAGIC || h->version != HS_EL_VERSION)
        return HS_ERR(-EPROTO, "elastic message from rank %d: bad magic 0x%x or version %u", source,
                      h->magic, h->version);
    if (source >= 0 && h->sender != source)
        return HS_ERR(-EPROTO, "elastic message from rank %d claims sender %d", source, h->sender);
    const size_t w = (h->kind & HS_EL_HALF_MASK) ? 2 : sizeof(float);
    if ((len - sizeof *h) % w != 0 || h->count != (len - sizeof *h) / w)
        return HS_ERR(-EPROTO, "elastic message from rank %d: %zu bytes for %llu floats", source,
                      len, (unsigned long long)h->count);
    return 0;
}

/* FNV-1a-style 64-bit hash over n floats, one 32-bit word at a time: the snapshot checksum. */
static inline uint64_t hs_el_checksum(const float *v, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        uint32_t w;
        memcpy(&w, &v[i], sizeof w);
        h = (h ^ w) * 1099511628211ull;
    }
    return h;
}

#endif
