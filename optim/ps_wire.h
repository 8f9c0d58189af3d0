/*
 * optim/ps_wire.h — the wire format of every training message (SGP shares, D-PSGD neighbour
 * exchanges, evaluation snapshots, end-of-run results): one fixed header, then the payload.
 *
 * Version 1 (the only one): 128 bytes, native byte order (the ranks of a job run one build
 * on one architecture), then `length` floats of parameters, then kind-specific trailing
 * bytes (hs_ps_hdr_v1_t.extra). The push-sum weight always travels in the same message as
 * the numerator it belongs to (ALGORITHMS.md): never assumed from the graph.
 */
#ifndef HEARSAY_OPTIM_PS_WIRE_H
#define HEARSAY_OPTIM_PS_WIRE_H

#include "hearsay/common.h"

#include <stddef.h>
#include <stdint.h>

#define HS_PS_MAGIC   0x53505348u /* "HSPS" */
#define HS_PS_VERSION 1u

typedef enum hs_ps_kind {
    HS_PS_GOSSIP = 1,      /* SGP share: payload p * x, weight p * w */
    HS_PS_NEIGHBOR = 2,    /* D-PSGD: payload x (weight 1) */
    HS_PS_EVAL = 3,        /* the loop's z snapshot to rank 0 (hearsay/algo.h's hs_dist_frame_*,
                            * optim/ps_wire.c; aux: runtime/dist.h's HS_AUX_*) */
    HS_PS_FINAL = 4,       /* the loop's end-of-run z + results (likewise) */
    HS_PS_REPLY = 5,       /* SGP share answering the sender's GOSSIP after the end of training:
                            * payload z, weight the share; iteration: the last GOSSIP answered */
    HS_PS_DONE = 6,        /* SGP, no payload: the sender trained `iteration` rounds and sent
                            * aux[0] GOSSIP messages here in all */
    HS_PS_FIN = 7,         /* SGP, no payload: the sender answers no more; it sent aux[0] REPLY
                            * messages here in all */
    HS_PS_PAIR_REQ = 8,    /* AD-PSGD active -> passive: x_i, iteration = the active's round */
    HS_PS_PAIR_REP = 9,    /* AD-PSGD passive -> active: x_j before the average; iteration = the
                            * passive's local steps in x_j, aux[0] = its exchange number */
    HS_PS_PAIR_FIN = 10,   /* AD-PSGD active -> passive: no more requests (no payload) */
    HS_PS_COMPRESSED = 16, /* CHOCO-SGD, qsgp, EF-SGD: length = n, no floats, `extra` bytes of
                            * compressed data (hearsay/compress.h) */
} hs_ps_kind_t;

typedef struct hs_ps_hdr_v1 {
    uint32_t magic;    /* HS_PS_MAGIC */
    uint16_t version;  /* HS_PS_VERSION */
    uint16_t kind;     /* hs_ps_kind_t */
    int32_t sender;    /* rank */
    uint32_t extra;    /* bytes after the floats (FINAL: size int64 failure reports) */
    int64_t iteration; /* sender's iteration (rounds are numbered from 0) */
    double weight;     /* push-sum weight (share) travelling with the payload */
    uint64_t length;   /* floats of payload */
    double aux[11];    /* kind-specific values (hs_ps_aux) */
} hs_ps_hdr_v1_t;

_Static_assert(sizeof(hs_ps_hdr_v1_t) == 128, "wire header must stay 128 bytes");

/* Fill a header. */
static inline void hs_ps_hdr_init(hs_ps_hdr_v1_t *h, hs_ps_kind_t kind, int sender, long iter,
                                  double weight, size_t length)
{
    *h = (hs_ps_hdr_v1_t){.magic = HS_PS_MAGIC,
                          .version = HS_PS_VERSION,
                          .kind = (uint16_t)kind,
                          .sender = sender,
                          .iteration = iter,
                          .weight = weight,
                          .length = length};
}

/* Check a received message of `bytes` bytes from `source`: magic, version, kind, sender,
 * length == n floats and the byte count. Overflow-safe for any n and extra: the byte count is
 * split, never summed (128 + n * 4 + extra wraps for n >= 2^62). -EPROTO with a message naming
 * what is wrong. */
static inline int hs_ps_hdr_check(const hs_ps_hdr_v1_t *h, size_t bytes, hs_ps_kind_t kind,
                                  int source, size_t n)
{
    if (bytes < sizeof *h)
        return HS_ERR(-EPROTO, "message from rank %d: %zu bytes, shorter than a header", source,
                      bytes);
    if (h->magic != HS_PS_MAGIC || h->version != HS_PS_VERSION)
        return HS_ERR(-EPROTO, "message from rank %d: bad magic 0x%08x or version %u", source,
                      h->magic, h->version);
    if (h->kind != kind || h->sender != source)
        return HS_ERR(-EPROTO, "message from rank %d: kind %u sender %d, expected kind %d", source,
                      h->kind, h->sender, (int)kind);
    const size_t rest = bytes - sizeof *h; /* bytes >= sizeof *h: checked above */
    if (h->length != n || h->extra > rest || (rest - h->extra) % sizeof(float) != 0 ||
        (rest - h->extra) / sizeof(float) != n)
        return HS_ERR(-EPROTO,
                      "message from rank %d: %llu floats in %zu bytes, expected %zu floats "
                      "(do all ranks run the same --model?)",
                      source, (unsigned long long)h->length, bytes, n);
    return 0;
}

#endif
