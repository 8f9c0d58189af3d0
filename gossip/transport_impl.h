/*
 * gossip/transport_impl.h — helpers the transport backends share (gossip/fabric*.c,
 * gossip/shm*.c); not part of the public API.
 */
#ifndef HEARSAY_GOSSIP_TRANSPORT_IMPL_H
#define HEARSAY_GOSSIP_TRANSPORT_IMPL_H

#include "hearsay/transport.h"

#include <stddef.h>
#include <stdint.h>

/* A backend's non-blocking send / receive of its own CTRL traffic (tags apart from users'). */
typedef int (*hs_ctrl_isend_fn)(hs_transport_t *t, int peer, uint32_t tag, const void *buf,
                                size_t len, hs_treq_t **req);
typedef int (*hs_ctrl_irecv_fn)(hs_transport_t *t, int peer, uint32_t tag, void *buf, size_t cap,
                                hs_treq_t **req);

/* Dissemination barrier over CTRL messages (ceil(log2 n) rounds, round r uses tag
 * tag | r << 8), waiting through the backend's waitany with opts.timeout_s. */
int hs_transport_ctrl_barrier(hs_transport_t *t, uint32_t tag, hs_ctrl_isend_fn isend,
                              hs_ctrl_irecv_fn irecv);

/* 0 when libfabric has provider `name` (tcp, verbs, ... as --provider takes them) with the
 * endpoints the libfabric backend needs (gossip/fabric.c); else an error naming it. */
int hs_fab_provider_check(const char *name);

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
        uint32_t have;               /* 1: this rank's libfabric has it (hs_fab_provider_check) */
    } e[HS_FAB_AUTO_MAX];
} hs_fab_auto_rec_t;

/* Parse `list` (NULL: HS_FAB_AUTO, else "efa,verbs,tcp") into *rec and probe each name here. */
int hs_fab_auto_probe(const char *list, hs_fab_auto_rec_t *rec);
/* The first provider of recs[0]'s list that every one of the n records has, into out; else an
 * error naming, for each candidate, a rank that lacks it. */
int hs_fab_auto_choose(const hs_fab_auto_rec_t *recs, int n, char *out, size_t cap);

/* 1 when process pid (of this pid namespace) has exited or is a zombie, else 0. */
int hs_pid_gone(unsigned pid);

/* The per-pair backend (gossip/hybrid.c): hsshm among the ranks of this host, libfabric
 * provider `inter` towards the others; host_of[r] is rank r's host index. */
extern const hs_transport_ops_t hs_hybrid_ops;
int hs_hybrid_create(hs_transport_t *t, const hs_transport_opts_t *o, const int *host_of,
                     const char *inter);
/* Receives from any source the hybrid keeps as orphans on its hsshm [0] and libfabric [1]
 * sides: now and the most at once (tests: they stay bounded by the receives posted). */
void hs_hybrid_orphans(hs_transport_t *t, int now[2], int max[2]);
/* The backend the hybrid uses for same-host (1) or other-host (0) pairs. */
const char *hs_hybrid_pair_provider(const hs_transport_t *t, int same_host);

#endif
