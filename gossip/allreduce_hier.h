/*
 * gossip/allreduce_hier.h — the hierarchical all-reduce (private to gossip/allreduce.c): ranks
 * on H hosts, R on each, reduce-scatter within each host, all-reduce each shard across the
 * hosts (a ring of the H ranks with the same place on their hosts), all-gather within the host.
 */
#ifndef HEARSAY_GOSSIP_ALLREDUCE_HIER_H
#define HEARSAY_GOSSIP_ALLREDUCE_HIER_H

#include "hearsay/allreduce.h"
#include "hearsay/transport.h"

#include <stddef.h>

typedef struct hs_ar_hier hs_ar_hier_t;

/* 1 when host_of (P ranks) puts them on several hosts, as many on each, more than one. */
int hs_ar_hier_fits(const int *host_of, int P);
/* A plan for n floats over transport t (every rank of it), o->host_of giving the hosts. */
int hs_ar_hier_create(hs_ar_hier_t **out, hs_transport_t *t, size_t n,
                      const hs_allreduce_opts_t *o);
void hs_ar_hier_destroy(hs_ar_hier_t **h);
/* Collective over every rank: buf[0..n) becomes the sum (average: divided by the ranks). */
int hs_ar_hier_run(hs_ar_hier_t *h, float *buf, int average);

#endif
