/*
 * gossip/transport_impl.h — what the transport backends share (gossip/fabric*.c, shm*.c,
 * hybrid.c; defined in gossip/transport_util.c, which calls nothing above it); not part of the
 * public API. Layers, each calling only those below it:
 *   transport.c (the generic layer: options, auto, checks, dispatch)
 *     -> transport_registry.c (the table: name -> entry, ops and capability flags)
 *       -> the backends (shm*.c, fabric*.c, hybrid.c: one entry each)
 *         -> transport_util.c (contexts, calls through an ops table, the CTRL barrier)
 * A backend built of others (hybrid) gets their entries from the generic layer and calls them
 * through their ops tables (HS_OP below), never through transport.c or another's internals.
 */
#ifndef HEARSAY_GOSSIP_TRANSPORT_IMPL_H
#define HEARSAY_GOSSIP_TRANSPORT_IMPL_H

#include "hearsay/transport.h"

#include <stddef.h>
#include <stdint.h>

/* The match rule of a tagged receive, the one every backend that matches itself applies
 * (hsshm, gossip/shm*.c; the simulator, runtime/sim/queues.c): a receive for `peer`
 * (HS_ANY_SOURCE: any) and `tag` (any_tag: any) takes a message from src with msg_tag. Among
 * the posted receives the first that matches takes a message; a receive takes the oldest
 * unexpected message that matches. */
static inline int hs_tag_match(int peer, uint32_t tag, int any_tag, int src, uint32_t msg_tag)
{
    return (peer < 0 || peer == src) && (any_tag || tag == msg_tag);
}

/* The backends' registry entries (gossip/transport_registry.c lists them). */
extern const hs_transport_entry_t hs_shm_entry;    /* gossip/shm.c */
extern const hs_transport_entry_t hs_hybrid_entry; /* gossip/hybrid.c */
extern const hs_transport_entry_t hs_fabric_entry; /* gossip/fabric.c */

/* A slot is usable when the table is large enough to hold it and it is filled. */
#define HS_OP_HAS(t, slot)                                                                         \
    ((t)->ops->size >= offsetof(hs_transport_ops_t, slot) + sizeof((t)->ops->slot) &&              \
     (t)->ops->slot != NULL)
/* -ENOSYS naming the backend and the slot it lacks. */
int hs_op_missing(const hs_transport_t *t, const char *slot);
/* Call an int slot of t's ops table (-ENOSYS where it is empty): a backend built of others
 * calls them this way, with arguments it has checked. */
#define HS_OP(t, slot, ...)                                                                        \
    (HS_OP_HAS(t, slot) ? (t)->ops->slot((t), __VA_ARGS__) : hs_op_missing((t), #slot))

/* A context for ops (rank of size; opts copied without its strings, which belong to the
 * caller), not yet created: the caller calls ops->create (or the entry's create_hosts). */
int hs_transport_ctx_new(hs_transport_t **out, const hs_transport_ops_t *ops, int rank, int size,
                         const hs_transport_opts_t *o);
/* ctx_new, then ops->create: closed again on failure (*out NULL). */
int hs_transport_ctx_create(hs_transport_t **out, const hs_transport_ops_t *ops, int rank, int size,
                            int all_local, const hs_transport_opts_t *o);
/* Close the backend and free the context; *t = NULL. Safe on NULL. */
void hs_transport_ctx_close(hs_transport_t **t);
/* The void and pointer slots, as the public calls treat them. */
void hs_op_req_free(hs_transport_t *t, hs_treq_t **req);
void hs_op_win_free(hs_transport_t *t, hs_twin_t **win);
const char *hs_op_provider(const hs_transport_t *t);
int hs_op_shaped(const hs_transport_t *t, int peer);
uint32_t hs_op_caps(const hs_transport_t *t);

/* A backend's non-blocking send / receive of its own CTRL traffic (tags apart from users'). */
typedef int (*hs_ctrl_isend_fn)(hs_transport_t *t, int peer, uint32_t tag, const void *buf,
                                size_t len, hs_treq_t **req);
typedef int (*hs_ctrl_irecv_fn)(hs_transport_t *t, int peer, uint32_t tag, void *buf, size_t cap,
                                hs_treq_t **req);

/* Dissemination barrier over CTRL messages (ceil(log2 n) rounds, round r uses tag
 * tag | r << 8), waiting through the backend's waitany with opts.timeout_s. */
int hs_transport_ctrl_barrier(hs_transport_t *t, uint32_t tag, hs_ctrl_isend_fn isend,
                              hs_ctrl_irecv_fn irecv);

/* `auto` across hosts: the libfabric providers it considers, best first (HS_FAB_AUTO, default
 * "efa,verbs,tcp"), each with whether this rank's libfabric offers it. Ranks exchange these
 * records through the bootstrap and all take the first provider of rank 0's list that every
 * rank has (hs_transport_auto_choose), so that a job never mixes providers. */
#define HS_FAB_AUTO_MAX   8
#define HS_FAB_AUTO_NAME  32
#define HS_FAB_AUTO_MAGIC 0x4f545541u /* "AUTO" */
typedef struct hs_fab_auto_rec {
    uint32_t magic, count;
    struct {
        char name[HS_FAB_AUTO_NAME]; /* as --provider takes it: efa, verbs, tcp, ... */
        uint32_t have;               /* 1: this rank's libfabric has it (the entry's check) */
    } e[HS_FAB_AUTO_MAX];
} hs_fab_auto_rec_t;

/* Parse `list` (NULL: HS_FAB_AUTO, else "efa,verbs,tcp") into *rec and probe each name here. */
int hs_fab_auto_probe(const char *list, hs_fab_auto_rec_t *rec);
/* The first provider of recs[0]'s list that every one of the n records has, into out; else an
 * error naming, for each candidate, a rank that lacks it. */
int hs_fab_auto_choose(const hs_fab_auto_rec_t *recs, int n, char *out, size_t cap);

/* 1 when process pid (of this pid namespace) has exited or is a zombie, else 0. */
int hs_pid_gone(unsigned pid);

/* ofi_rxm over tcp: FI_OFI_RXM_EAGER_LIMIT = one chunk (chunk_bytes, 1 MiB if 0) unless the
 * user set it, so every message the libfabric backend posts (at most a chunk) goes eagerly
 * (gossip/fabric.c; the hybrid backend calls it before opening its libfabric part). */
void hs_fab_rxm_eager_default(const char *provider, size_t chunk_bytes);

/* The per-pair backend (gossip/hybrid.c), for tests: receives from any source the hybrid keeps as
 * orphans on its hsshm [0] and libfabric [1] sides: now and the most at once (tests: they stay
 * bounded by the receives posted). */
void hs_hybrid_orphans(hs_transport_t *t, int now[2], int max[2]);

#endif
