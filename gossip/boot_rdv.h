/*
 * gossip/boot_rdv.h — the worker side of the TCP rendezvous (wire format in rdv_proto.h).
 * Internal to libhearsay: used by bootstrap.c for `hearsay run` and Slurm jobs.
 */
#ifndef HEARSAY_GOSSIP_BOOT_RDV_H
#define HEARSAY_GOSSIP_BOOT_RDV_H

#include "gossip/rdv_proto.h"

#include <stddef.h>
#include <stdint.h>

typedef struct hs_rdv_client {
    int fd;
    int rank, size;
    uint32_t seq;     /* last collective round */
    double timeout_s; /* bound on each wait (the launcher's own bound plus a grace) */
    char addr[300];   /* HS_RDV, for messages */
} hs_rdv_client_t;

/* Connect to `addr` ("host:port"), retrying until timeout_s, present the key, and wait for
 * every rank to arrive. `hosts` receives size x (HS_RDV_HOST_MAX) NUL-padded hostnames. */
int hs_rdv_client_join(hs_rdv_client_t *c, const char *addr, const char *key, int rank, int size,
                       const char *host, double timeout_s, char *hosts);
/* Allgather through the launcher: `all` receives size * len bytes in rank order. */
int hs_rdv_client_allgather(hs_rdv_client_t *c, const void *mine, size_t len, void *all);
/* Say goodbye (best effort) and close. */
void hs_rdv_client_leave(hs_rdv_client_t *c);

#endif
