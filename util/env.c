/*
 * util/env.c — the one table of the environment variables Hearsay reads (HS_*, HEARSAY_*),
 * and the functions that read them (hearsay/env.h). A new knob is declared here first;
 * `hearsay --help-env` prints this table.
 *
 * Not declared here: variables of other programs that Hearsay honours (FI_* for libfabric,
 * OMPI_COMM_WORLD_* / PMI* under mpirun, SLURM_* under srun, OPENBLAS_CORETYPE, PATH), the
 * variables `hearsay run` sets only for its workers (HS_LOCAL_RANK, HS_LOCAL_SIZE), and
 * those of the test harness (HS_BIN, HS_SRCDIR, HS_TEST_*).
 */
#include "hearsay/env.h"

#include "hearsay/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define NO_RANGE 0, 0

/* Ranks in one job: HS_RDV_MAX_SIZE in gossip/rdv_proto.h (checked there at compile time). */
#define MAX_RANKS 1024

static const hs_env_var_t table[] = {
    /* --- start-up (gossip/bootstrap.c; set by `hearsay run`, docs/launch.md) --- */
    {"HS_RANK", HS_ENV_INT, NULL, 0, MAX_RANKS - 1,
     "this worker's rank (set by hearsay run; with HS_SIZE selects hearsay-run start-up)"},
    {"HS_SIZE", HS_ENV_INT, NULL, 1, MAX_RANKS, "the job's number of ranks (set by hearsay run)"},
    {"HS_RDV", HS_ENV_STRING, NULL, NO_RANGE,
     "HOST:PORT (or [V6ADDR]:PORT) of the job's rendezvous (set by hearsay run; Slurm: export "
     "what hearsay run --rendezvous-only prints)"},
    {"HS_JOB_KEY", HS_ENV_STRING, NULL, NO_RANGE,
     "the job's key, 32 hex digits; the rendezvous admits only workers that know it"},
    {"HS_BOOT_TIMEOUT", HS_ENV_DOUBLE, "60", 0.001, 1e6,
     "seconds; bound on every start-up wait when the caller gives none (hearsay run --timeout)"},
    {"HS_INCARNATION", HS_ENV_INT, "0", 0, 1000000,
     "set by hearsay run for a replacement of a crashed rank (crash:...:rejoin=D): its K-th "
     "replacement, which joins the running job (0: the rank's first process)"},
    {"HS_CRASHED_AT", HS_ENV_DOUBLE, NULL, 0, 1e12,
     "set by hearsay run for a replacement: the monotonic clock (seconds) when the crashed "
     "process exited; the replacement joins D after it"},
    {"HS_RESPAWN", HS_ENV_BOOL, "0", NO_RANGE,
     "set by hearsay run: 1 when it starts a replacement for a rank that exits with status 72 "
     "(crash:...:rejoin=D)"},
    {"HS_HOSTNAME", HS_ENV_STRING, NULL, NO_RANGE,
     "overrides gethostname() for host grouping (local ranks, the hsshm/tcp choice); for "
     "tests, or hosts that share a name"},

    /* --- transport (gossip/transport.c, fabric*.c, shm*.c; docs/transport.md) --- */
    {"HS_PROVIDER", HS_ENV_STRING, "auto", NO_RANGE,
     "transport: auto (hsshm on one host, else tcp), hsshm, tcp, shm, verbs, udp, sockets, efa "
     "or any fi_info -l name"},
    {"HS_FAB_AUTO", HS_ENV_STRING, "efa,verbs,tcp", NO_RANGE,
     "libfabric providers auto tries between hosts, best first; the job takes the first that "
     "every rank has (rank 0's list)"},
    {"HS_SHAPING", HS_ENV_STRING, NULL, NO_RANGE,
     "link shaping spec, e.g. 'latency=2ms,jitter=1ms,bw=1Gbit; 0-3:latency=5ms' (none when "
     "unset)"},
    {"HS_CHUNK_BYTES", HS_ENV_SIZE, NULL, 4096, 1L << 30,
     "bytes; chunk size of large messages (unset: 1 MiB on libfabric, 256 KiB on hsshm)"},
    {"HS_TMR_IPC", HS_ENV_BOOL, "1", NO_RANGE,
     "device memory to a process of the same host (hs_transport_send_mr): 1 maps it there "
     "(CUDA IPC; the emulated device's memfd), 0 stages it through host memory in chunks"},
    {"HS_PROGRESS_THREAD", HS_ENV_BOOL, "0", NO_RANGE,
     "1: a thread of the transport drives progress"},
    {"HS_TIMEOUT", HS_ENV_DOUBLE, "60", 0.001, 1e6, "seconds; bound on every transport wait"},
    {"HS_FAB_TX_INFLIGHT", HS_ENV_INT, "0", 0, 2147483647,
     "libfabric: cap on sends and RMA owned by the provider at once (0: none)"},
    {"HS_SHM_QUIET", HS_ENV_BOOL, "0", NO_RANGE,
     "1: no warning when libfabric's shm provider (< 1.19) is chosen"},
    {"HS_SHM_RING_BYTES", HS_ENV_SIZE, NULL, 65536, 1L << 30,
     "hsshm: bytes of each inbound ring, alike on every rank (unset: 2 GiB / (n (n-1)), "
     "clamped to 256 KiB .. 4 MiB)"},
    {"HS_SHM_RDV_BYTES", HS_ENV_SIZE, NULL, 0, 1L << 40,
     "hsshm: messages at least this long go by address, 0: never (unset: 1 MiB when ranks "
     "outnumber cores, else 0)"},

    /* --- all-reduce (gossip/allreduce.c; docs/algorithms.md) --- */
    {"HS_AR_PATH", HS_ENV_STRING, "auto", NO_RANGE,
     "all-reduce path: auto (on one host: mapped where every rank's buffer is shared memory, "
     "else direct reads; else ring), ring, direct, mapped or hier (across hosts: reduce within "
     "each host, a ring per shard across hosts, gather within)"},
    {"HS_AR_CHUNK_BYTES", HS_ENV_SIZE, "1048576", 4, 1L << 30, "bytes; all-reduce pipeline chunk"},
    {"HS_AR_DEPTH", HS_ENV_INT, "0", 0, 1 << 20,
     "all-reduce receives outstanding at most (0: all of a call's, posted when it starts)"},

    /* --- algorithms (optim/) --- */
    {"HS_CENTER_PATH", HS_ENV_STRING, "auto", NO_RANGE,
     "EASGD center: auto, rma or service (the --center-path flag overrides it)"},

    /* --- CPU kernels (kernels/cpu/cpu_direct.c; docs/benchmarks.md) --- */
    {"HS_CPU_CONV_DIRECT", HS_ENV_STRING, "auto", NO_RANGE,
     "3x3 stride-1 convolutions: auto (the direct kernel for this CPU: AVX-512VL's wider tile, "
     "else AVX2), avx2 (the AVX2 tile even with AVX-512VL) or off (im2col and gemm)"},

    /* --- the simulator (runtime/sim/; docs/simulation.md) --- */
    {"HS_TEST_SIM_FAIR_CHECK", HS_ENV_BOOL, "0", NO_RANGE,
     "tests only: hearsay sim's fair NICs also share every time by the reference scan (every "
     "flow for every side given out) and the run fails at the first rate that differs in a bit"},

    /* --- checkpoints (runtime/checkpoint.c) --- */
    {"HS_TEST_CKPT_PAUSE", HS_ENV_DOUBLE, "0", 0, 600,
     "seconds; tests only: a checkpoint write sleeps this long between writing its temporary "
     "file and renaming it (to kill a run mid-write)"},

    /* --- failure detection (runtime/heartbeat.c; docs/failure-model.md) --- */
    {"HS_TEST_FENCE_DEAF_RANK", HS_ENV_INT, "-1", -1, MAX_RANKS - 1,
     "tests only: this rank learns that it was fenced HS_TEST_FENCE_DEAF_S seconds late (a "
     "woken rank that sends before it knows: the others must refuse what it sends); -1: none"},
    {"HS_TEST_FENCE_DEAF_S", HS_ENV_DOUBLE, "1", 0, 600,
     "seconds; tests only: how late HS_TEST_FENCE_DEAF_RANK learns that it was fenced"},

    /* --- logging and errors (util/error.c) --- */
    {"HEARSAY_LOG", HS_ENV_STRING, "info", NO_RANGE,
     "log level: error, warn, info or debug (debug traces every transport post and "
     "completion)"},
    {"HEARSAY_DEBUG", HS_ENV_BOOL, "0", NO_RANGE,
     "1: log every recorded error to stderr where it is raised"},

    /* --- debugging aids of the test suites (tests/test_nn) --- */
    {"HS_NN_GRADCHECK", HS_ENV_STRING, NULL, NO_RANGE,
     "tests/test_nn: gradient-check only 'SPEC C H W CLASSES B'"},
    {"HS_GC_STRICT", HS_ENV_BOOL, "0", NO_RANGE,
     "tests/test_nn: gradient checks accept only central differences (no one-sided ones "
     "near a kink)"},
    {"HS_GC_DEBUG", HS_ENV_BOOL, "0", NO_RANGE,
     "tests/test_nn: print the finite differences of each gradient-check step"},
};

const hs_env_var_t *hs_env_table(size_t *count)
{
    if (count) *count = HS_ARRAY_LEN(table);
    return table;
}

const hs_env_var_t *hs_env_lookup(const char *name)
{
    if (!name) return NULL;
    for (size_t i = 0; i < HS_ARRAY_LEN(table); i++)
        if (!strcmp(table[i].name, name)) return &table[i];
    return NULL;
}

const char *hs_env_type_name(hs_env_type_t type)
{
    switch (type) {
    case HS_ENV_STRING:
        return "string";
    case HS_ENV_INT:
        return "int";
    case HS_ENV_SIZE:
        return "size";
    case HS_ENV_DOUBLE:
        return "double";
    case HS_ENV_BOOL:
        return "bool";
    }
    return "?";
}

/* The entry of `name`, which must be declared with one of the types in mask (a bit per
 * hs_env_type_t); anything else is a bug in the caller, not a bad environment. */
static const hs_env_var_t *must_find(const char *name, unsigned mask, const char *fn)
{
    const hs_env_var_t *v = hs_env_lookup(name);
    if (!v) {
        fprintf(stderr,
                "hearsay: internal error: %s(\"%s\"): the variable is not declared in the "
                "table of util/env.c\n",
                fn, name ? name : "(null)");
        abort();
    }
    if (!(mask & (1u << v->type))) {
        fprintf(stderr, "hearsay: internal error: %s(\"%s\"): the variable is declared as %s\n", fn,
                name, hs_env_type_name(v->type));
        abort();
    }
    return v;
}

#define ANY_TYPE 0xFFu
#define BIT(t)   (1u << (t))

static const char *raw(const hs_env_var_t *v)
{
    const char *s = getenv(v->name);
    return s && *s ? s : NULL;
}

const char *hs_env_str(const char *name)
{
    const hs_env_var_t *v = must_find(name, ANY_TYPE, "hs_env_str");
    const char *s = raw(v);
    return s ? s : v->def;
}

int hs_env_long(const char *name, long *out)
{
    const hs_env_var_t *v = must_find(name, BIT(HS_ENV_INT) | BIT(HS_ENV_SIZE), "hs_env_long");
    const char *s = raw(v);
    int set = s != NULL;
    if (!s && !(s = v->def)) return 0;
    long x;
    HS_TRY(hs_parse_long(s, (long)v->lo, (long)v->hi, v->name, &x));
    *out = x;
    return set;
}

int hs_env_double(const char *name, double *out)
{
    const hs_env_var_t *v = must_find(name, BIT(HS_ENV_DOUBLE), "hs_env_double");
    const char *s = raw(v);
    int set = s != NULL;
    if (!s && !(s = v->def)) return 0;
    double x;
    HS_TRY(hs_parse_double(s, v->lo, v->hi, v->name, &x));
    *out = x;
    return set;
}

/* 1 or 0 for a boolean word, -1 for anything else. */
static int bool_word(const char *s)
{
    static const char *yes[] = {"1", "true", "yes", "on"}, *no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < HS_ARRAY_LEN(yes); i++) {
        if (!strcasecmp(s, yes[i])) return 1;
        if (!strcasecmp(s, no[i])) return 0;
    }
    return -1;
}

int hs_env_bool(const char *name, int *out)
{
    const hs_env_var_t *v = must_find(name, BIT(HS_ENV_BOOL), "hs_env_bool");
    const char *s = raw(v);
    int set = s != NULL;
    if (!s && !(s = v->def)) return 0;
    int b = bool_word(s);
    if (b < 0)
        return HS_ERR(-EINVAL,
                      "%s: '%s' is not a boolean (expected 1/0, true/false, yes/no or "
                      "on/off)",
                      v->name, s);
    *out = b;
    return set;
}

int hs_env_flag(const char *name)
{
    const hs_env_var_t *v = must_find(name, BIT(HS_ENV_BOOL), "hs_env_flag");
    const char *s = raw(v);
    if (!s) s = v->def;
    return s && bool_word(s) != 0;
}
