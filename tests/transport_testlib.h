/* tests/transport_testlib.h — helpers shared by the transport tests. */
#ifndef HEARSAY_TESTS_TRANSPORT_TESTLIB_H
#define HEARSAY_TESTS_TRANSPORT_TESTLIB_H

#include "hearsay/transport.h"

#include <stddef.h>

/* Deterministic payload of message k from src to dst (the reference receivers check). */
void tt_fill(unsigned char *p, size_t n, int src, int dst, int k);
int tt_check_payload(const unsigned char *p, size_t n, int src, int dst, int k);
/* Test defaults: provider prov, 64 KiB chunks, 20 s timeout. */
void tt_opts(hs_transport_opts_t *o, const char *prov);

typedef int (*tt_rank_fn)(hs_transport_t *t, void *arg);
/* Fork n ranks (n <= 16) that create, exchange addresses through this process, connect,
 * barrier and run fn (0 = success). child_setup (may be NULL) runs first in each child.
 * Returns how many ranks exited other than expect[r] (0 when NULL); everything is killed
 * after timeout_s (then n). The ranks are jobs of the harness (tr_start_fn, tests/runlib.h).
 * Programs started through `hearsay run` use tests/runlib.h directly. */
int tt_run_world(int n, const hs_transport_opts_t *o, int all_local, tt_rank_fn fn, void *arg,
                 double timeout_s, const int *expect, void (*child_setup)(int rank));
/* The same with the host of every rank given (host_of[r], opened with
 * hs_transport_create_hosts: per-pair transports under "auto"). */
int tt_run_world_hosts(int n, const hs_transport_opts_t *o, int all_local, const int *host_of,
                       tt_rank_fn fn, void *arg, double timeout_s, const int *expect,
                       void (*child_setup)(int rank));

#define RFAIL(...)                                                                                 \
    do {                                                                                           \
        fprintf(stderr, "rank %d: ", hs_transport_rank(t));                                        \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, " (%s)\n", hs_last_error());                                               \
        return 1;                                                                                  \
    } while (0)

#endif
