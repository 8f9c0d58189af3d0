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
 * after timeout_s. */
int tt_run_world(int n, const hs_transport_opts_t *o, int all_local, tt_rank_fn fn, void *arg,
                 double timeout_s, const int *expect, void (*child_setup)(int rank));

/* Run argv (stdout and stderr merged into *out, NUL-terminated, caller frees) with the
 * environment assignments env ("NAME=VALUE", NULL-terminated, may be NULL) added, in its own
 * process group, for at most limit_s seconds (then the group is killed). Returns the exit
 * status, 128+signal, or -1 when it had to be killed. The output is echoed to stdout. */
int tt_job(const char *const *argv, const char *const *env, double limit_s, char **out);
/* BUILDDIR/tests/NAME next to $HS_BIN (= BUILDDIR/hearsay) into buf; 0, or -1 (and a printed
 * reason) when HS_BIN is unset or either program is missing. */
int tt_helper_path(const char *name, char *buf, size_t cap);

#define RFAIL(...)                                                                                 \
    do {                                                                                           \
        fprintf(stderr, "rank %d: ", hs_transport_rank(t));                                        \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, " (%s)\n", hs_last_error());                                               \
        return 1;                                                                                  \
    } while (0)

#endif
