/*
 * runtime/sim/run.c — hs_sim_run (hearsay/sim.h): N ranks of `hearsay train` in one process
 * in virtual time. It builds the world (the ranks, their transports and execution
 * environments, the network model), runs it (the scheduler) and tears it down; and the
 * parsers of the --sim-* options. The simulator's parts: sim_impl.h.
 */
#include "runtime/sim/sim_impl.h"

#include "hearsay/algo.h"
#include "hearsay/bootstrap.h"
#include "hearsay/common.h"
#include "hearsay/env.h"
#include "hearsay/nn.h"
#include "hearsay/topology.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

int hs_sim_compute_parse(const char *spec, double *fixed_s)
{
    if (!spec || !*spec) spec = "fixed:10";
    if (!strcmp(spec, "measured")) {
        *fixed_s = -1;
        return 0;
    }
    if (!strcmp(spec, "measured-all")) {
        *fixed_s = -2;
        return 0;
    }
    if (!strcmp(spec, "bench")) {
        *fixed_s = 0; /* measured once at the start of the run */
        return 0;
    }
    if (!strncmp(spec, "fixed:", 6)) {
        double ms;
        if (hs_parse_double(spec + 6, 1e-6, 1e9, "--sim-compute fixed:MS", &ms) < 0) return -EINVAL;
        *fixed_s = ms / 1000.0;
        return 0;
    }
    return HS_ERR(-EINVAL,
                  "--sim-compute '%s': expected fixed:MS (milliseconds per step), bench, "
                  "measured or measured-all",
                  spec);
}

int hs_sim_nic_share_parse(const char *share, int *fair)
{
    if (!share || !strcmp(share, "fair"))
        *fair = 1;
    else if (!strcmp(share, "fifo"))
        *fair = 0;
    else
        return HS_ERR(-EINVAL, "--sim-nic-share '%s': expected fair or fifo", share);
    return 0;
}

int hs_sim_proto_parse(const char *spec, long *rndv_bytes, int *acks)
{
    *rndv_bytes = 0;
    *acks = 0;
    if (!spec) return 0;
    if (!*spec)
        return HS_ERR(-EINVAL, "--sim-proto: expected a comma list of rxm, rndv=BYTES and acks");
    const char *p = spec;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char item[64];
        if (n == 0 || n >= sizeof item)
            return HS_ERR(-EINVAL,
                          "--sim-proto '%s': an empty or too long item (expected rxm, "
                          "rndv=BYTES or acks)",
                          spec);
        memcpy(item, p, n);
        item[n] = 0;
        if (!strcmp(item, "rxm")) { /* libfabric ofi_rxm over tcp, its defaults */
            *rndv_bytes = 131072;   /* FI_OFI_RXM_SAR_LIMIT */
            *acks = 1;
        } else if (!strcmp(item, "acks")) {
            *acks = 1;
        } else if (!strncmp(item, "rndv=", 5)) {
            if (hs_parse_long(item + 5, 1, (long)1 << 40, "--sim-proto rndv=BYTES", rndv_bytes) < 0)
                return -EINVAL;
        } else {
            return HS_ERR(-EINVAL,
                          "--sim-proto '%s': unknown item '%s' (expected rxm, "
                          "rndv=BYTES or acks)",
                          spec, item);
        }
        p += n;
        if (*p == ',') {
            p++;
            if (!*p) return HS_ERR(-EINVAL, "--sim-proto '%s': a trailing comma", spec);
        }
    }
    return 0;
}

/* Models of other frameworks that --sim-payload names: torchvision's ImageNet models
 * (parameter counts of torchvision.models.NAME(), counted again from their definitions). */
static const struct {
    const char *name;
    double params;
} payload_models[] = {
    {"resnet18", 11689512},
    {"resnet50", 25557032},
    {"resnet101", 44549160},
    {"vgg16", 138357544},
};

int hs_sim_payload_parse(const char *spec, int in_c, int in_h, int in_w, int classes,
                         double *params)
{
    *params = 0;
    if (!spec || !*spec)
        return HS_ERR(-EINVAL, "--sim-payload: expected a model (resnet50, a --model spec) or "
                               "bytes:N");
    for (size_t i = 0; i < HS_ARRAY_LEN(payload_models); i++)
        if (!strcmp(spec, payload_models[i].name)) {
            *params = payload_models[i].params;
            return 0;
        }
    int bytes = !strncmp(spec, "bytes:", 6), count = !strncmp(spec, "params:", 7);
    if (bytes || count) {
        const char *v = spec + (bytes ? 6 : 7);
        char *end = NULL;
        errno = 0;
        double x = strtod(v, &end);
        double mult = 1;
        if (end && end != v && *end && !end[1]) {
            const char *suf = "KMG";
            const char *at = strchr(suf, *end);
            if (at) {
                for (long k = 0; k <= at - suf; k++) mult *= 1024;
                end++;
            }
        }
        if (!end || end == v || *end || errno || !(x * mult >= 1) || !(x * mult <= 1e13))
            return HS_ERR(-EINVAL,
                          "--sim-payload %s: expected %s with a count from 1 to 1e13 (K, M, G: "
                          "powers of 1024)",
                          spec, bytes ? "bytes:N" : "params:N");
        x *= mult;
        if (bytes && fmod(x, 4) != 0)
            return HS_ERR(-EINVAL,
                          "--sim-payload %s: %.0f bytes is not a whole number of floats (4 bytes "
                          "each)",
                          spec, x);
        if (fmod(x, 1) != 0) return HS_ERR(-EINVAL, "--sim-payload %s: not a whole number", spec);
        *params = bytes ? x / 4 : x;
        return 0;
    }
    if (in_c <= 0) return 0; /* a --model spec, checked once the data's shape is known */
    size_t np = 0;
    if (hs_model_parse_spec(spec, in_c, in_h, in_w, classes, &np) < 0) {
        hs_error_prefix("--sim-payload %s (a --model spec, or one of resnet18, resnet50, "
                        "resnet101, vgg16, bytes:N, params:N)",
                        spec);
        return -EINVAL;
    }
    *params = (double)np;
    return 0;
}

int hs_sim_nic_parse(const char *rate, double *Bps)
{
    char spec[128];
    hs_shape_t *ns = NULL;
    if (!rate || strlen(rate) > 64)
        return HS_ERR(-EINVAL, "--sim-nic: expected a rate such as 10Gbit or 100MB");
    snprintf(spec, sizeof spec, "bw=%s", rate);
    int rc = hs_shape_parse(spec, &ns);
    if (rc == 0) {
        hs_link_shape_t l;
        hs_shape_link(ns, 0, 1, NULL, NULL, &l);
        *Bps = l.bw_Bps;
        if (!(*Bps > 0)) rc = HS_ERR(-EINVAL, "--sim-nic %s: the rate must be > 0", rate);
    } else {
        hs_error_prefix("--sim-nic %s", rate);
    }
    hs_shape_free(&ns);
    return rc;
}

/* Every simulated rank keeps its files open (rank-R.csv, rank-R-eval.csv, its trajectory):
 * with --out, the limit on open files goes up to what n ranks need, the soft limit within the
 * hard one, the hard one too where the process may (CAP_SYS_RESOURCE); else a warning says
 * what to raise (16,384 ranks need 33,000 and more, past the usual 20,000). */
static void raise_file_limit(const hs_train_opts_t *o, int n)
{
    struct rlimit rl;
    if (!o->out_dir || getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
    rlim_t need = 3 * (rlim_t)n + 256;
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need) return;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need) {
        struct rlimit up = {.rlim_cur = need, .rlim_max = need};
        if (setrlimit(RLIMIT_NOFILE, &up) == 0) return;
    }
    rlim_t want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need ? need : rl.rlim_max;
    if (want > rl.rlim_cur) {
        rl.rlim_cur = want;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (want < need)
        HS_WARN("hearsay sim -n %d: %llu open files allowed (ulimit -Hn), and the ranks' files "
                "may need up to %llu",
                n, (unsigned long long)want, (unsigned long long)need);
}

static double peak_rss_mib(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (double)ru.ru_maxrss / 1024.0 : NAN;
}

static double process_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Worker threads for local work: --sim-threads, else the cores this process may use. */
static int sim_threads(const hs_sim_opts_t *so)
{
    int p = so->threads;
    if (p <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        p = c > 0 ? (int)c : 1;
    }
    return HS_MAX(1, HS_MIN(p, so->n));
}

static void *rank_main(void *arg)
{
    sim_rank_t *rk = arg;
    sim_world_t *w = ((sim_x_t *)rk->x->impl)->w;
    int rc = hs_train_in(w->o, rk->boot, rk->x, &rk->res);
    if (rc < 0) {
        rk->rc = rc;
        snprintf(rk->msg, sizeof rk->msg, "%s", hs_last_error());
        /* said at once, as its process would: its peers' warnings that follow ("exited")
         * are its consequences, and the run's error names the first rank that failed */
        fprintf(stderr, "hearsay sim: rank %d failed at virtual time %.6f s: %s\n", rk->rank,
                w->now, rk->msg);
        if (w->first_failed < 0) w->first_failed = rk->rank;
        /* a rank that fails stops, as its process would: its peers see it dead */
        rk->dead = 1;
        w->live--;
        hs_sim_wake_all(w);
    }
    return NULL;
}

/* A crashed rank's replacement (crash:RANKS:iter=N:rejoin=D): D of virtual time after the
 * crash the rank is alive again, with the same transport and environment, and runs the loop
 * from the start as incarnation n + 1: it joins the running job (runtime/rejoin.h) instead of
 * starting with it. What its first process left (threads parked for good, their memory) stays
 * as it was. */
static void *rank_rejoin_main(void *arg)
{
    sim_rank_t *rk = arg;
    sim_world_t *w = ((sim_x_t *)rk->x->impl)->w;
    double wait = rk->rejoin_at - w->now;
    if (wait > 0) hs_exec_sleep(rk->x, wait);
    rk->dead = 0;
    rk->left = 0;
    w->live++;
    rk->rc = 0;
    rk->msg[0] = '\0';
    rk->x->incarnation++;
    rk->x->rejoin_s = -1;
    rk->x->idle = NULL; /* (the first process's loop: parked for good) */
    rk->x->idle_ctx = NULL;
    rk->x->trace = NULL;
    if (!w->o->quiet)
        fprintf(stderr, "hearsay sim: rank %d: a replacement starts at virtual time %.6f s\n",
                rk->rank, w->now);
    return rank_main(arg);
}

static int rank_open(sim_world_t *w, sim_rank_t *rk, const hs_sim_opts_t *so, const hs_shape_t *sh,
                     const char *const *hosts)
{
    HS_TRY(hs_boot_init_fixed(&rk->boot, rk->rank, w->n, so->ranks_per_host));
    hs_transport_t *t = hs_calloc(1, sizeof *t, "sim transport");
    hs_exec_t *x = hs_calloc(1, sizeof *x, "virtual execution environment");
    sim_x_t *v = hs_calloc(1, sizeof *v, "virtual execution environment");
    if (!t || !x || !v) {
        free(t);
        free(x);
        free(v);
        return -ENOMEM;
    }
    hs_transport_opts_default(&t->opts);
    t->opts.provider = NULL;
    t->opts.shaping = NULL;
    t->ops = &hs_sim_transport_ops;
    t->rank = rk->rank;
    t->size = w->n;
    t->impl = rk;
    v->w = w;
    v->rk = rk;
    x->ops = &hs_sim_exec_ops;
    x->t = t;
    x->rank = rk->rank;
    x->size = w->n;
    x->impl = v;
    rk->t = t;
    rk->x = x;
    if (sh && hs_shape_nrules(sh) > 0)
        HS_TRY(hs_shaper_create(sh, rk->rank, w->n, hosts, w->o->seed, &rk->shaper));
    return 0;
}

/* --sim-payload: every message of the algorithm carries the payload model's body in place
 * of the proxy's (--model): bodies grow by payload / proxy parameters. */
static int payload_setup(sim_world_t *w, const char *spec, const hs_dataset_t *data)
{
    double pp = 0;
    size_t np = 0;
    HS_TRY(hs_sim_payload_parse(spec, data->c, data->h, data->w, data->classes, &pp));
    if (hs_model_parse_spec(w->o->model, data->c, data->h, data->w, data->classes, &np) < 0 ||
        np == 0)
        return HS_ERR(-EINVAL, "--sim-payload: the --model %s has no parameters to scale",
                      w->o->model);
    const hs_algo_ops_t *ops = hs_algo_find(w->o->algo);
    w->payload_scale = pp / (double)np;
    w->payload_z = np * sizeof(float);
    w->payload_hdr = ops ? ops->msg_header : 0;
    if (!w->o->quiet) {
        printf("hearsay sim: --sim-payload %s: messages carry %.0f parameters (%.1f MB of "
               "floats) where --model %s has %zu: bodies x %.6g on the network, gradients and "
               "memory the proxy's\n",
               spec, pp, 4e-6 * pp, w->o->model, np, w->payload_scale);
        if (np % (size_t)w->n)
            printf("hearsay sim: --sim-payload: note: --model %s has %zu parameters, not a "
                   "multiple of -n %d, so a ring all-reduce's chunks differ by a float, which "
                   "the payload makes %.0f: its time is up to %.2f %% high (a --model with a "
                   "multiple of %d parameters is exact)\n",
                   w->o->model, np, w->n, w->payload_scale,
                   100.0 * ((double)((np + (size_t)w->n - 1) / (size_t)w->n) * w->n / np - 1),
                   w->n);
        fflush(stdout);
    }
    return 0;
}

int hs_sim_run(const hs_train_opts_t *o, const hs_sim_opts_t *so, hs_train_result_t *res)
{
    if (so->n < 1 || so->n > (1 << 16))
        return HS_ERR(-EINVAL, "hearsay sim -n %d: expected 1 to 65536 ranks", so->n);
    /* the data is loaded once and shared read-only by every simulated worker */
    hs_train_opts_t oo = *o;
    /* one BLAS thread per gradient unless told otherwise: ranks' gradients run side by side
     * (--sim-threads), and a measured step is the CPU time of the thread that ran it */
    if (oo.threads == 0) oo.threads = 1;
    hs_dataset_t train = {0}, test = {0};
    double fixed_s;
    HS_TRY(hs_sim_compute_parse(so->compute, &fixed_s));
    if (hs_data_load(o->data, o->seed, &train, &test) < 0) {
        hs_error_prefix("--data %s", o->data);
        return -EINVAL;
    }
    oo.shared_train = &train;
    oo.shared_test = &test;
    /* Tables every rank would build the same, built once: every rank's shard (one shuffle of
     * the data, not one per rank), the host map and the graph (built by the first rank that
     * needs it). If the shards cannot be made here, each rank makes its own and says why. */
    hs_train_shared_t shared = {0};
    hs_shard_t *shards = hs_calloc((size_t)so->n, sizeof *shards, "shards");
    int *host_map = hs_malloc((size_t)so->n * sizeof *host_map, "host map");
    if (shards && so->n >= 1 && hs_shard_all(&train, o->shard, so->n, o->seed, shards) == 0) {
        shared.shards = shards;
        shared.shard_ranks = so->n;
    }
    if (host_map) {
        int r_ph = so->ranks_per_host > 0 ? so->ranks_per_host : so->n;
        for (int r = 0; r < so->n; r++) host_map[r] = r / r_ph;
        shared.host_of = host_map;
        shared.host_ranks = so->n;
    }
    oo.shared = &shared;
    o = &oo;
    if (fixed_s == 0) {
        int brc = hs_sim_bench_step(o, so->n, &fixed_s);
        if (brc < 0) {
            if (shared.shards) hs_shards_free(shards, so->n);
            free(shards);
            free(host_map);
            hs_dataset_free(&train);
            hs_dataset_free(&test);
            hs_error_prefix("--sim-compute bench");
            return brc;
        }
        if (!o->quiet) {
            printf("hearsay sim: --sim-compute bench: a step of %s takes %.3f ms here (median "
                   "of 15)\n",
                   o->model, 1e3 * fixed_s);
            fflush(stdout);
        }
    }
    sim_world_t w = {.o = o, .n = so->n, .first_failed = -1, .flows_next = INFINITY};
    w.fixed_s = fixed_s;
    w.charge_all = fixed_s < -1.5;
    w.stack_bytes = (size_t)((so->stack_mib > 0 ? so->stack_mib : 2.0) * 1048576.0);
    sem_init(&w.sched, 0, 0);
    w.par = sim_threads(so);
    /* One host thread: the simulated threads hand the baton to each other on one CPU (the
     * one this run started on, so within any affinity the user set): a wake-up on the same
     * core is cheaper than across cores (64 x mlp:64-256-256-10: 1,710 worker-steps/s against
     * 1,550, the simulator's share of the run 24-25 % against 28-29 %). */
    w.pin_cpu = -1;
    if (w.par == 1) {
        int cpu = sched_getcpu();
        if (cpu >= 0) w.pin_cpu = cpu;
    }
    sem_init(&w.slots, 0, (unsigned)w.par);
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    hs_shape_t *sh = NULL;
    char **hosts = NULL;
    int rc = 0;
    w.rk = hs_calloc((size_t)w.n, sizeof *w.rk, "simulated ranks");
    w.in_flight = hs_calloc((size_t)w.n, sizeof *w.in_flight, "messages in flight");
    hosts = hs_calloc((size_t)w.n, sizeof *hosts, "host names");
    if (!w.rk || !w.in_flight || !hosts) rc = -ENOMEM;
    if (rc == 0 && o->link && *o->link) rc = hs_shape_parse(o->link, &sh);
    int rph = so->ranks_per_host > 0 ? so->ranks_per_host : w.n;
    w.rph = rph;
    int nhosts = (w.n + rph - 1) / rph;
    w.nic_tx = hs_calloc((size_t)nhosts, sizeof *w.nic_tx, "NIC state");
    w.nic_rx = hs_calloc((size_t)nhosts, sizeof *w.nic_rx, "NIC state");
    w.nic_ntx = hs_calloc((size_t)nhosts, sizeof *w.nic_ntx, "NIC state");
    w.nic_nrx = hs_calloc((size_t)nhosts, sizeof *w.nic_nrx, "NIC state");
    w.nic_atx = hs_calloc((size_t)nhosts, sizeof *w.nic_atx, "NIC state");
    w.nic_arx = hs_calloc((size_t)nhosts, sizeof *w.nic_arx, "NIC state");
    w.src_at = hs_calloc((size_t)nhosts + 1, sizeof *w.src_at, "NIC state");
    w.dst_at = hs_calloc((size_t)nhosts + 1, sizeof *w.dst_at, "NIC state");
    w.sides = hs_calloc(2 * (size_t)nhosts, sizeof *w.sides, "NIC state");
    if (!w.nic_tx || !w.nic_rx || !w.nic_ntx || !w.nic_nrx || !w.nic_atx || !w.nic_arx ||
        !w.src_at || !w.dst_at || !w.sides)
        rc = -ENOMEM;
    if (rc == 0 && so->nic && *so->nic) rc = hs_sim_nic_parse(so->nic, &w.nic_Bps);
    if (rc == 0) rc = hs_sim_nic_share_parse(so->nic_share, &w.nic_fair);
    w.fair_check = hs_env_flag("HS_TEST_SIM_FAIR_CHECK");
    if (rc == 0 && so->payload) rc = payload_setup(&w, so->payload, &train);
    if (rc == 0) raise_file_limit(o, w.n);
    int acks = 0;
    if (rc == 0) rc = hs_sim_proto_parse(so->proto, &w.rndv_bytes, &acks);
    if (rc == 0 && so->proto && !(w.nic_Bps > 0 && w.nic_fair))
        rc = HS_ERR(-EINVAL,
                    "--sim-proto %s: needs --sim-nic RATE with --sim-nic-share fair "
                    "(it acts on the transfers through the NICs)",
                    so->proto);
    /* TCP's delayed acknowledgements (RFC 1122 4.2.3.2, RFC 5681 4.2): one per two full-sized
     * segments, a 66-byte frame (14 Ethernet + 20 IP + 32 TCP with timestamps) for two
     * 1514-byte frames of data; the NIC's rate counts payload, so in time an acknowledgement
     * takes 66 / (2 x 1514) of the data it acknowledges. */
    if (acks) w.ack_share = 66.0 / (2.0 * 1514.0);
    /* The network model: the NICs (shared fairly or first in first out, the links between
     * them), else the links alone, else none; a rendezvous protocol over it. */
    sim_net_t net = {.w = &w}, rndv = {.ops = &hs_sim_net_rndv, .w = &w, .inner = &net};
    if (w.nic_Bps > 0)
        net.ops = w.nic_fair ? &hs_sim_net_fair : &hs_sim_net_fifo;
    else
        net.ops = sh && hs_shape_nrules(sh) > 0 ? &hs_sim_net_links : &hs_sim_net_ideal;
    w.net = w.rndv_bytes > 0 ? &rndv : &net;
    w.deliver = hs_sim_deliver;
    for (int r = 0; r < w.n && rc == 0; r++) {
        if (!(hosts[r] = malloc(32))) {
            rc = -ENOMEM;
            break;
        }
        snprintf(hosts[r], 32, "host%d", r / rph);
    }
    for (int r = 0; r < w.n && rc == 0; r++) {
        w.rk[r].rank = r;
        rc = rank_open(&w, &w.rk[r], so, sh, (const char *const *)hosts);
    }
    w.mains_left = w.n;
    w.live = w.n;
    w.rejoin_main = rank_rejoin_main;
    for (int r = 0; r < w.n && rc == 0; r++)
        rc = hs_sim_spawn(&w, &w.rk[r], rank_main, &w.rk[r], &w.rk[r].main);
    double host0 = hs_now(), cpu0 = process_cpu_s();
    if (rc == 0) rc = hs_sim_run_all(&w);
    double host_wall = hs_now() - host0, host_cpu = process_cpu_s() - cpu0;
    if (rc == 0) rc = w.cons_rc;
    if (rc == 0 && w.fair_mismatches > 0)
        rc = HS_ERR(-EPROTO,
                    "sim: HS_TEST_SIM_FAIR_CHECK: %ld fair-share rates differ from the "
                    "reference scan's",
                    w.fair_mismatches);
    if (rc == 0 && w.rk[0].rc == 0) rc = hs_sim_write_consensus(&w);
    if (rc == 0 && w.first_failed >= 0) {
        int r = w.first_failed;
        rc = HS_ERR(w.rk[r].rc, "rank %d (the first to fail): %s", r, w.rk[r].msg);
    }
    if (rc == 0) {
        for (int r = 0; r < w.n; r++) {
            if (w.rk[r].rc < 0) {
                /* an injected crash is the run's business (the survivors report it); any
                 * other failure of a rank fails the run */
                if (strstr(w.rk[r].msg, "injected crash")) continue;
                rc = HS_ERR(w.rk[r].rc, "rank %d: %s", r, w.rk[r].msg);
                break;
            }
        }
    }
    if (rc == 0 && res) *res = w.rk[0].res;
    if (rc == 0) {
        /* one thread: the run's wall time is the workers' code or the simulator's */
        hs_sim_stats_t stats = {.threads = w.par,
                                .host_wall_s = host_wall,
                                .host_cpu_s = host_cpu,
                                .worker_s = w.worker_s,
                                .local_s = w.local_s,
                                .overhead =
                                    w.par == 1 && host_wall > 0 ? 1 - w.worker_s / host_wall : NAN,
                                .steps = w.steps,
                                .steps_per_s = host_wall > 0 ? (double)w.steps / host_wall : NAN,
                                .peak_rss_mib = peak_rss_mib(),
                                .payload_scale = w.payload_scale,
                                .wire_bytes = w.wire_bytes};
        if (so->stats) *so->stats = stats;
        rc = hs_sim_write_stats(o, &stats);
    }
    /* Threads that returned are joined and freed; those of crashed ranks stay parked on their
     * semaphore for the life of the process (their records too). */
    for (int i = 0; i < w.nth; i++) {
        if (!w.th[i]->exited) continue;
        pthread_join(w.th[i]->th, NULL);
        sem_destroy(&w.th[i]->go);
        free(w.th[i]);
    }
    for (int r = 0; r < w.n && w.rk; r++) {
        hs_shaper_free(&w.rk[r].shaper);
        hs_boot_finalize(&w.rk[r].boot);
        if (w.rk[r].x) w.rk[r].x->ops->destroy(w.rk[r].x);
        free(w.rk[r].t);
        free(w.rk[r].chains);
        while (w.rk[r].unexpected) {
            sim_msg_t *m = w.rk[r].unexpected;
            w.rk[r].unexpected = m->next;
            free(m);
        }
        while (w.rk[r].dead_letters) {
            sim_msg_t *m = w.rk[r].dead_letters;
            w.rk[r].dead_letters = m->next;
            free(m);
        }
    }
    for (int i = 0; i < w.ncons; i++) free(w.cons[i].sum);
    free(w.cons);
    free(w.rows);
    for (int i = 0; i < w.nheap; i++) hs_sim_msg_free_flight(w.heap[i]);
    while (w.flows) { /* (what the fair NICs still carry) */
        sim_msg_t *m = w.flows;
        w.flows = m->next;
        hs_sim_msg_free_flight(m);
    }
    while (w.ctrl_pool) {
        sim_msg_t *c = w.ctrl_pool;
        w.ctrl_pool = c->next;
        free(c);
    }
    while (w.pool) {
        sim_msg_t *m = w.pool;
        w.pool = m->next;
        free(m);
    }
    while (w.req_pool) {
        struct hs_treq *r = w.req_pool;
        w.req_pool = r->next;
        free(r);
    }
    free(w.heap);
    for (int r = 0; hosts && r < w.n; r++) free(hosts[r]);
    free(hosts);
    hs_shape_free(&sh);
    hs_topo_destroy(&shared.topo);
    free(shared.blocked_on);
    free(shared.blocked_at);
    if (shared.shards) hs_shards_free(shards, so->n);
    free(shards);
    free(host_map);
    hs_dataset_free(&train);
    hs_dataset_free(&test);
    free(w.in_flight);
    free(w.nic_tx);
    free(w.nic_rx);
    free(w.nic_ntx);
    free(w.nic_nrx);
    free(w.nic_atx);
    free(w.nic_arx);
    free(w.src_at);
    free(w.dst_at);
    free(w.sides);
    free(w.by_src);
    free(w.by_dst);
    free(w.check_rate);
    free(w.rk);
    free(w.th);
    free(w.dl);
    free(w.due);
    sem_destroy(&w.slots);
    sem_destroy(&w.sched);
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    return rc;
}
