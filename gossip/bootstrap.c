/*
 * gossip/bootstrap.c — how a worker learns its rank, the job size and its peers' addresses
 * (hearsay/bootstrap.h): `hearsay run` / Slurm through the TCP rendezvous (boot_rdv.c),
 * Open MPI's mpirun through MPI collectives, or a 1-rank world.
 */
#include "config.h"
#include "hearsay/bootstrap.h"
#include "gossip/boot_rdv.h"
#include "hearsay/common.h"
#include "hearsay/env.h"
#include "hearsay/trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if HS_HAVE_MPI
#include <mpi.h>
#endif

enum boot_kind { BOOT_SINGLE, BOOT_RDV, BOOT_MPI, BOOT_FIXED };

struct hs_boot {
    enum boot_kind kind;
    const char *method;
    int rank, size;
    int local_rank, local_size, nhosts;
    int *host_of;                   /* (size) host index of each rank (not BOOT_FIXED) */
    char (*hosts)[HS_RDV_HOST_MAX]; /* (size) hostnames, NUL-padded (not BOOT_FIXED) */
    int rph;                        /* BOOT_FIXED: ranks per host (host of r: r / rph) */
    char name[HS_RDV_HOST_MAX];     /* BOOT_FIXED: hs_boot_hostname's answer */
    hs_rdv_client_t rdv;
#if HS_HAVE_MPI
    MPI_Comm comm;
    int mpi_init_here;
#endif
};

#define DEFAULT_TIMEOUT_S 60.0 /* also HS_BOOT_TIMEOUT's default in util/env.c */
/* util/env.c bounds HS_RANK and HS_SIZE by the rendezvous' limit. */
_Static_assert(HS_RDV_MAX_SIZE == 1024, "update HS_RANK and HS_SIZE in util/env.c");

/* Parse an integer environment variable of another program (Slurm); 1 when present and
 * valid, 0 when absent. Hearsay's own (HS_*) are read through hearsay/env.h. */
static int env_long(const char *name, long lo, long hi, long *out)
{
    const char *v = getenv(name);
    if (!v) return 0;
    if (hs_parse_long(v, lo, hi, name, out) < 0) return -EINVAL;
    return 1;
}

static void my_hostname(char out[HS_RDV_HOST_MAX])
{
    char buf[256];
    const char *h = hs_env_str("HS_HOSTNAME"); /* override: tests, hosts with identical names */
    if (!h) {
        if (gethostname(buf, sizeof buf) != 0) snprintf(buf, sizeof buf, "localhost");
        buf[sizeof buf - 1] = '\0';
        h = buf;
    }
    memset(out, 0, HS_RDV_HOST_MAX);
    size_t n = strnlen(h, HS_RDV_HOST_MAX - 1);
    memcpy(out, h, n);
}

/* host_of, local rank and size from the hostnames. */
static int compute_hosts(hs_boot_t *b)
{
    b->host_of = hs_calloc((size_t)b->size, sizeof *b->host_of, "bootstrap host table");
    if (!b->host_of) return -ENOMEM;
    b->nhosts = 0;
    for (int r = 0; r < b->size; r++) {
        b->hosts[r][HS_RDV_HOST_MAX - 1] = '\0';
        int idx = -1;
        for (int q = 0; q < r && idx < 0; q++)
            if (!strcmp(b->hosts[q], b->hosts[r])) idx = b->host_of[q];
        b->host_of[r] = idx >= 0 ? idx : b->nhosts++;
    }
    b->local_rank = 0;
    b->local_size = 0;
    for (int r = 0; r < b->size; r++) {
        if (b->host_of[r] != b->host_of[b->rank]) continue;
        if (r < b->rank) b->local_rank++;
        b->local_size++;
    }
    return 0;
}

static double pick_timeout(const hs_boot_opts_t *opts)
{
    if (opts && opts->timeout_s > 0) return opts->timeout_s;
    double t = DEFAULT_TIMEOUT_S;
    if (hs_env_double("HS_BOOT_TIMEOUT", &t) < 0) return DEFAULT_TIMEOUT_S;
    return t;
}

static int init_rdv(hs_boot_t *b, const char *method, long rank, long size, double timeout_s)
{
    const char *addr = hs_env_str("HS_RDV"), *key = hs_env_str("HS_JOB_KEY");
    if (!addr)
        return HS_ERR(-EINVAL,
                      "%s start-up: HS_RDV (host:port of the rendezvous) is not set "
                      "(see docs/launch.md)",
                      method);
    if (!key)
        return HS_ERR(-EINVAL, "%s start-up: HS_JOB_KEY is not set (see docs/launch.md)", method);
    b->kind = BOOT_RDV;
    b->method = method;
    b->rank = (int)rank;
    b->size = (int)size;
    b->hosts = hs_calloc((size_t)size, HS_RDV_HOST_MAX, "bootstrap hostnames");
    if (!b->hosts) return -ENOMEM;
    char me[HS_RDV_HOST_MAX];
    my_hostname(me);
    HS_TRY(
        hs_rdv_client_join(&b->rdv, addr, key, b->rank, b->size, me, timeout_s, (char *)b->hosts));
    return compute_hosts(b);
}

#if HS_HAVE_MPI
static int mpi_err(int rc, const char *call)
{
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    MPI_Error_string(rc, s, &n);
    return HS_ERR(-EIO, "%s failed: %s", call, s);
}

static int init_mpi(hs_boot_t *b)
{
    int flag = 0, rc;
    MPI_Initialized(&flag);
    if (!flag) {
        rc = MPI_Init(NULL, NULL);
        if (rc != MPI_SUCCESS) return HS_ERR(-EIO, "MPI_Init failed (code %d)", rc);
        b->mpi_init_here = 1;
    }
    b->kind = BOOT_MPI;
    b->method = "mpi";
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &b->comm);
    if (rc != MPI_SUCCESS) return mpi_err(rc, "MPI_Comm_dup");
    MPI_Comm_set_errhandler(b->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(b->comm, &b->rank);
    MPI_Comm_size(b->comm, &b->size);
    b->hosts = hs_calloc((size_t)b->size, HS_RDV_HOST_MAX, "bootstrap hostnames");
    if (!b->hosts) return -ENOMEM;
    char me[HS_RDV_HOST_MAX];
    my_hostname(me);
    rc = MPI_Allgather(me, HS_RDV_HOST_MAX, MPI_CHAR, b->hosts, HS_RDV_HOST_MAX, MPI_CHAR, b->comm);
    if (rc != MPI_SUCCESS) return mpi_err(rc, "MPI_Allgather of hostnames");
    return compute_hosts(b);
}
#endif

static int init_single(hs_boot_t *b)
{
    b->kind = BOOT_SINGLE;
    b->method = "single";
    b->rank = 0;
    b->size = 1;
    b->hosts = hs_calloc(1, HS_RDV_HOST_MAX, "bootstrap hostnames");
    if (!b->hosts) return -ENOMEM;
    my_hostname(b->hosts[0]);
    return compute_hosts(b);
}

static int launched_by_mpirun(void)
{
    return getenv("OMPI_COMM_WORLD_RANK") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

static int init_any(hs_boot_t *b, const hs_boot_opts_t *opts)
{
    double timeout_s = pick_timeout(opts);
    int use_mpi = opts ? opts->use_mpi : -1;
    long rank, size;
    int rc;

    /* 1. hearsay run */
    if ((rc = hs_env_long("HS_RANK", &rank)) != 0 && use_mpi != 1) {
        if (rc < 0) return rc;
        if ((rc = hs_env_long("HS_SIZE", &size)) <= 0)
            return rc < 0 ? rc
                          : HS_ERR(-EINVAL, "HS_RANK is set but HS_SIZE is not (started by "
                                            "hearsay run? see docs/launch.md)");
        if (rank >= size)
            return HS_ERR(-EINVAL, "HS_RANK=%ld is not below HS_SIZE=%ld", rank, size);
        return init_rdv(b, "hearsay-run", rank, size, timeout_s);
    }
    /* 2. mpirun */
    if (use_mpi == 1 || (use_mpi < 0 && launched_by_mpirun())) {
#if HS_HAVE_MPI
        return init_mpi(b);
#else
        const char *n = getenv("OMPI_COMM_WORLD_SIZE");
        if (use_mpi == 1)
            return HS_ERR(-ENOSYS, "MPI start-up requested but hearsay was built without MPI "
                                   "(reconfigure with --with-mpi)");
        if (n && strcmp(n, "1") != 0)
            return HS_ERR(-ENOSYS,
                          "started by mpirun (%s ranks) but hearsay was built without "
                          "MPI: reconfigure with --with-mpi, or use hearsay run -n N",
                          n);
#endif
    }
    /* 3. Slurm */
    if (use_mpi != 1 && (rc = env_long("SLURM_PROCID", 0, HS_RDV_MAX_SIZE - 1, &rank)) != 0) {
        if (rc < 0) return rc;
        /* srun sets the step's size in SLURM_STEP_NUM_TASKS; SLURM_NTASKS is the allocation's. */
        const char *nvar = getenv("SLURM_STEP_NUM_TASKS") ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS";
        if ((rc = env_long(nvar, 1, HS_RDV_MAX_SIZE, &size)) <= 0)
            return rc < 0 ? rc : HS_ERR(-EINVAL, "SLURM_PROCID is set but SLURM_NTASKS is not");
        if (rank >= size)
            return HS_ERR(-EINVAL, "SLURM_PROCID=%ld is not below %s=%ld", rank, nvar, size);
        if (size > 1 || hs_env_str("HS_RDV")) {
            if (!hs_env_str("HS_RDV"))
                return HS_ERR(-EINVAL,
                              "Slurm job step with %ld tasks but HS_RDV is not set: start "
                              "a rendezvous with `hearsay run --rendezvous-only -n %ld --bind "
                              "ADDR` and export what it prints (see docs/launch.md)",
                              size, size);
            return init_rdv(b, "slurm", rank, size, timeout_s);
        }
    }
    /* 4. alone */
    return init_single(b);
}

int hs_boot_init(hs_boot_t **out, const hs_boot_opts_t *opts)
{
    *out = NULL;
    hs_boot_t *b = hs_calloc(1, sizeof *b, "bootstrap");
    if (!b) return -ENOMEM;
    b->rdv.fd = -1;
    int rc = init_any(b, opts);
    if (rc < 0) {
        hs_boot_finalize(&b);
        return rc;
    }
    *out = b;
    return 0;
}

int hs_boot_rank(const hs_boot_t *b)
{
    return b->rank;
}

int hs_boot_size(const hs_boot_t *b)
{
    return b->size;
}

int hs_boot_local_rank(const hs_boot_t *b)
{
    return b->local_rank;
}

int hs_boot_local_size(const hs_boot_t *b)
{
    return b->local_size;
}

int hs_boot_all_local(const hs_boot_t *b)
{
    return b->nhosts == 1;
}

int hs_boot_host_of(const hs_boot_t *b, int rank)
{
    if (rank < 0 || rank >= b->size) return -1;
    if (b->kind == BOOT_FIXED) return rank / b->rph;
    return b->host_of[rank];
}

int hs_boot_num_hosts(const hs_boot_t *b)
{
    return b->nhosts;
}

const char *hs_boot_hostname(const hs_boot_t *b, int rank)
{
    if (rank < 0 || rank >= b->size) return NULL;
    if (b->kind == BOOT_FIXED) { /* (valid until the next call) */
        hs_boot_t *m = (hs_boot_t *)b;
        snprintf(m->name, sizeof m->name, "host%d", rank / b->rph);
        return m->name;
    }
    return b->hosts[rank];
}

int hs_boot_init_fixed(hs_boot_t **out, int rank, int size, int ranks_per_host)
{
    *out = NULL;
    if (size < 1 || rank < 0 || rank >= size)
        return HS_ERR(-EINVAL, "bootstrap: rank %d of %d ranks", rank, size);
    if (ranks_per_host < 1) ranks_per_host = size;
    hs_boot_t *b = hs_calloc(1, sizeof *b, "bootstrap");
    if (!b) return -ENOMEM;
    b->rdv.fd = -1;
    b->kind = BOOT_FIXED;
    b->method = "fixed";
    b->rank = rank;
    b->size = size;
    /* Hosts host0, host1, ... of ranks_per_host consecutive ranks each: computed, not tabled
     * (a simulator's N ranks each hold one of these; tables of N hostnames were 64 N bytes
     * per rank). */
    b->rph = ranks_per_host;
    b->nhosts = (size + ranks_per_host - 1) / ranks_per_host;
    b->local_rank = rank % ranks_per_host;
    b->local_size = HS_MIN(ranks_per_host, size - rank / ranks_per_host * ranks_per_host);
    *out = b;
    return 0;
}

int hs_boot_allgather(hs_boot_t *b, const void *mine, size_t len, void *all)
{
    switch (b->kind) {
    case BOOT_FIXED:
        return HS_ERR(-ENOSYS, "bootstrap: a fixed (simulated) job has no allgather");
    case BOOT_SINGLE:
        if (len) memmove(all, mine, len);
        return 0;
    case BOOT_RDV:
        return hs_rdv_client_allgather(&b->rdv, mine, len, all);
    case BOOT_MPI:
#if HS_HAVE_MPI
        if (len > (size_t)0x7fffffff)
            return HS_ERR(-EMSGSIZE, "allgather of %zu bytes per rank is too large for MPI", len);
        {
            int rc = MPI_Allgather(mine, (int)len, MPI_BYTE, all, (int)len, MPI_BYTE, b->comm);
            if (rc != MPI_SUCCESS) return mpi_err(rc, "MPI_Allgather");
        }
        return 0;
#else
        break;
#endif
    }
    return HS_ERR(-ENOSYS, "bootstrap: unknown method");
}

int hs_boot_barrier(hs_boot_t *b)
{
    switch (b->kind) {
    case BOOT_FIXED:
        return HS_ERR(-ENOSYS, "bootstrap: a fixed (simulated) job has no barrier");
    case BOOT_SINGLE:
        return 0;
    case BOOT_RDV:
        return hs_rdv_client_allgather(&b->rdv, NULL, 0, NULL);
    case BOOT_MPI:
#if HS_HAVE_MPI
    {
        int rc = MPI_Barrier(b->comm);
        if (rc != MPI_SUCCESS) return mpi_err(rc, "MPI_Barrier");
    }
        return 0;
#else
        break;
#endif
    }
    return HS_ERR(-ENOSYS, "bootstrap: unknown method");
}

void hs_boot_finalize(hs_boot_t **bp)
{
    hs_boot_t *b = *bp;
    if (!b) return;
    if (b->kind == BOOT_RDV) hs_rdv_client_leave(&b->rdv);
#if HS_HAVE_MPI
    if (b->kind == BOOT_MPI) {
        if (b->comm != MPI_COMM_NULL && b->comm != 0) MPI_Comm_free(&b->comm);
        int fin = 0;
        MPI_Finalized(&fin);
        if (b->mpi_init_here && !fin) MPI_Finalize();
    }
#endif
    free(b->host_of);
    free(b->hosts);
    free(b);
    *bp = NULL;
}

const char *hs_boot_method(const hs_boot_t *b)
{
    return b->method;
}

static int trace_sync_barrier(void *ctx)
{
    return hs_boot_barrier(ctx);
}

static int trace_sync_allgather(void *ctx, const void *mine, size_t len, void *all)
{
    return hs_boot_allgather(ctx, mine, len, all);
}

int hs_boot_trace_align(hs_boot_t *b, struct hs_trace *tr)
{
    if (!b || hs_boot_all_local(b)) return hs_trace_align(tr, NULL);
    const hs_trace_sync_t sync = {
        .barrier = trace_sync_barrier, .allgather = trace_sync_allgather, .ctx = b};
    return hs_trace_align(tr, &sync);
}
