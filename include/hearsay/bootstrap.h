/*
 * hearsay/bootstrap.h — how a worker learns its rank, the job size and its peers' addresses.
 *
 * Used at start-up only (never on the training path). Sources, tried in this order:
 *   1. `hearsay run -n N` (no MPI): HS_RANK, HS_SIZE, HS_RDV (host:port of the launcher's
 *      TCP rendezvous) and HS_JOB_KEY (the job's random key) in the environment;
 *   2. Open MPI's mpirun (when built with MPI): MPI_Init, then MPI collectives;
 *   3. Slurm (SLURM_PROCID / SLURM_NTASKS) with HS_RDV pointing at a rendezvous;
 *   4. none of these: a 1-rank world (allgather copies, barrier returns).
 */
#ifndef HEARSAY_BOOTSTRAP_H
#define HEARSAY_BOOTSTRAP_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hs_boot hs_boot_t;

typedef struct hs_boot_opts {
    double timeout_s; /* bound on every start-up wait (default 60 s when 0) */
    int use_mpi; /* -1 auto (MPI when launched by mpirun and built with MPI), 0 never, 1 must */
} hs_boot_opts_t;

/* Join the job. Fails with a clear message (e.g. a bad HS_JOB_KEY, an unreachable
 * rendezvous, or a timeout naming the ranks that never arrived). */
int hs_boot_init(hs_boot_t **out, const hs_boot_opts_t *opts);
/* A job whose ranks live in this process (the virtual-time simulator): rank `rank` of `size`,
 * ranks_per_host consecutive ranks per host ("host0", "host1", ...; < 1: one host). No
 * allgather or barrier (-ENOSYS): the simulator's execution environment has its own. */
int hs_boot_init_fixed(hs_boot_t **out, int rank, int size, int ranks_per_host);
int hs_boot_rank(const hs_boot_t *b);
int hs_boot_size(const hs_boot_t *b);
/* Ranks on the same host as this one form a contiguous "local" numbering. */
int hs_boot_local_rank(const hs_boot_t *b);
int hs_boot_local_size(const hs_boot_t *b);
/* 1 when all ranks run on this host. */
int hs_boot_all_local(const hs_boot_t *b);
/* Host index of a rank (ranks sharing a hostname share an index, numbered by first rank). */
int hs_boot_host_of(const hs_boot_t *b, int rank);
/* Number of distinct hosts in the job. */
int hs_boot_num_hosts(const hs_boot_t *b);
/* Hostname of a rank as it reported it (HS_HOSTNAME overrides gethostname()); NULL when
 * rank is out of range. Valid until hs_boot_finalize (a fixed job's: until the next call on
 * b, which formats it; such a job keeps no table of N names). */
const char *hs_boot_hostname(const hs_boot_t *b, int rank);
/* Every rank contributes `len` bytes; `all` receives size * len bytes in rank order. */
int hs_boot_allgather(hs_boot_t *b, const void *mine, size_t len, void *all);
/* Wait for every rank (start-up and shutdown only). */
int hs_boot_barrier(hs_boot_t *b);
/* --trace: align tr's clock with rank 0's (hs_trace_align of hearsay/trace.h, through this
 * bootstrap's barrier and allgather; nothing to measure when every rank runs on this host or
 * b is NULL). A collective of every rank. */
struct hs_trace;
int hs_boot_trace_align(hs_boot_t *b, struct hs_trace *tr);
/* Leave the job and free everything; *b = NULL. */
void hs_boot_finalize(hs_boot_t **b);
/* "hearsay-run", "mpi", "slurm" or "single". */
const char *hs_boot_method(const hs_boot_t *b);

#ifdef __cplusplus
}
#endif
#endif
