/*
 * bench/bench_gossip.c — `hearsay bench gossip`: median time of one SGP (push-sum) exchange
 * over the 1-peer exponential graph, beside PyTorch + gloo doing the same (torch_gossip.py).
 *
 * One exchange at iteration t on rank i (uniform mixing, exp1peer: one out-peer
 * i + 2^(t mod log2 n), one in-peer): snapshot the share to send, s = p·(x, w) (the weight
 * travels in the same message, after x); send s to the out-peer; receive the in-peer's
 * share r; x = p_self·x + r_x, w = p_self·w + r_w. An exchange's time is its span: from
 * the first rank's leaving the barrier to the last rank's end of the add (one clock,
 * CLOCK_MONOTONIC, for every process of the host; hs_bl_gather_span). With more ranks than
 * cores, that counts the ranks that wait for a core, which a rank's own clock, started when
 * it gets one, would not. The send of an exchange is waited for where SGP waits for it
 * (optim/sgp.c's wait_round, tau = 1): before the next exchange writes its share into the same
 * buffer, inside that exchange's time. With --path zerocopy that send completes when its receiver
 * has mixed from it and released its view, which every rank does before the barrier between
 * two exchanges; so an exchange does not wait for its receiver's add, as a gloo send
 * (complete once the kernel has the bytes) does not either. The receive of the next exchange
 * is posted before this one ends, so a faster peer's message finds it waiting (see
 * gossip/allreduce.c on unexpected messages with libfabric 1.17's shm provider).
 *
 * --path zerocopy (the default): the share is scaled straight into a buffer of
 * hs_transport_buf_alloc, which a same-host receiver maps, and the receiver mixes straight
 * from it through a view receive (hs_transport_irecv_view): 5 passes over the model per rank
 * (read x, write s; read x, read s, write x), the fewest an exchange without a barrier makes.
 * --path copy: scale into plain memory, isend / irecv into a receive buffer (the transport
 * copies in between: 7 to 9 passes).
 *
 * The floor: in the same job, after the same barrier, every rank makes the exchange's 5
 * passes over its own model and share buffer (the exchange's memory, so that the job's
 * footprint in the caches is the exchange's), timed as the exchange (span), median of --reps
 * (each repetition right after an exchange's, so that both meet the same bandwidth), once as
 * memcpy copies (the model to the share and back, then half of it) and once as the exchange's
 * own scale and mix loops mixing from the rank's own share (the exchange without its message);
 * both leave the model as it was. floor_s = the faster. It holds every rank's passes and the
 * same barrier exit and wake-ups as the exchange, but no message: ranks sharing cores share it
 * as in the exchange (a copy shorter than a time slice is not shared but queued, which the
 * span counts and a rank's own clock would not). Up to commit bed0310 the floor used two
 * buffers of its own: the job then touched twice the exchange's memory (64 MiB at 4 MiB on 4
 * ranks, twice this VM's L3), and each turn evicted the other's data (docs/benchmarks.md).
 */
#include "config.h"

#include "bench/bench_launch.h"
#include "bench/bench_util.h"
#include "hearsay/allreduce.h"
#include "hearsay/bootstrap.h"
#include "hearsay/common.h"
#include "hearsay/options.h"
#include "hearsay/topology.h"
#include "hearsay/transport.h"
#include "tools/commands.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GOSSIP_TAG  0x7200u /* + iteration % 1024 */
#define TIMES_TAG   0x7180u
#define BARRIER_TAG 0x7000u /* .. + HS_BL_TAG_SPAN */

static const hs_option_t g_options[] = {
    {.name = "ranks",
     .type = HS_OPT_STRING,
     .def = "4",
     .metavar = "LIST",
     .group = "Benchmark",
     .help = "rank counts to run (powers of two for exp1peer), comma-separated"},
    {.name = "sizes",
     .type = HS_OPT_STRING,
     .def = "4M,64M",
     .metavar = "LIST",
     .help = "model sizes in bytes (K/M/G = KiB/MiB/GiB), comma-separated"},
    {.name = "reps",
     .type = HS_OPT_INT,
     .def = "20",
     .range = "[1, 100000]",
     .help =
         "repetitions per size: each times two exchanges and the floor's two ways, taking turns "
         "(medians reported; the reference times N exchanges)"},
    {.name = "warmup",
     .type = HS_OPT_INT,
     .def = "3",
     .range = "[0, 100000]",
     .help = "untimed repetitions first"},
    {.name = "graph",
     .type = HS_OPT_STRING,
     .def = "exp1peer",
     .metavar = "SPEC",
     .help = "topology (see hearsay topo); the reference only knows exp1peer"},
    {.name = "provider",
     .type = HS_OPT_STRING,
     .def = "auto",
     .metavar = "NAME",
     .help = "transport provider: auto (hsshm on one host), hsshm, or libfabric's tcp, shm, .."},
    {.name = "reference",
     .type = HS_OPT_ENUM,
     .def = "none",
     .choices = "none|torch",
     .help = "also run PyTorch + gloo (bench/torch_gossip.py, /usr/bin/python3) and print the "
             "ratio"},
    {.name = "path",
     .type = HS_OPT_ENUM,
     .def = "zerocopy",
     .choices = "zerocopy|copy",
     .help = "zerocopy: scale into a mappable buffer, mix straight from the peer's (views); "
             "copy: isend/irecv through buffers of the transport"},
    {.name = "timeout",
     .type = HS_OPT_DOUBLE,
     .def = "600",
     .range = "(0, 86400]",
     .help = "seconds each launched job may take"},
    {.name = "json",
     .type = HS_OPT_BOOL,
     .def = "false",
     .help = "one JSON object per (ranks, size)"},
    {.name = "worker",
     .type = HS_OPT_BOOL,
     .def = "false",
     .group = "Internal",
     .help = "run as one rank under hearsay run (used by the benchmark itself)"},
};

static const hs_cfg_spec_t g_spec = {
    .usage = "hearsay bench gossip [OPTIONS]",
    .summary = "Median time of one SGP exchange (scale, send, receive, add; the push-sum weight\n"
               "travels with the model) on N local ranks over the 1-peer exponential graph.\n"
               "--reference torch runs the same exchange with PyTorch + gloo isend/irecv in the\n"
               "same run and prints torch_time / hearsay_time (> 1: hearsay is faster).",
    .options = g_options,
    .n_options = HS_ARRAY_LEN(g_options),
};

typedef float v8f_t __attribute__((vector_size(32)));

/* dst = a * src (n floats). */
static void scale_to(float *restrict dst, const float *restrict src, size_t n, float a)
{
    v8f_t va = {a, a, a, a, a, a, a, a};
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v8f_t v;
        memcpy(&v, src + i, sizeof v);
        v *= va;
        memcpy(dst + i, &v, sizeof v);
    }
    for (; i < n; i++) dst[i] = a * src[i];
}

/* x = a * x + r (n floats). */
static void mix_into(float *restrict x, const float *restrict r, size_t n, float a)
{
    v8f_t va = {a, a, a, a, a, a, a, a};
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v8f_t v, u;
        memcpy(&v, x + i, sizeof v);
        memcpy(&u, r + i, sizeof u);
        v = v * va + u;
        memcpy(x + i, &v, sizeof v);
    }
    for (; i < n; i++) x[i] = a * x[i] + r[i];
}

typedef struct gossip {
    hs_transport_t *t;
    hs_topo_t *topo;
    hs_treq_t *sreq; /* the last exchange's send, waited for before the next one */
    int zc;          /* 1: --path zerocopy */
    size_t n;        /* floats */
    size_t bytes;    /* message: n floats + one double */
    char *x;         /* (bytes) model, then w */
    char *sbuf;      /* (bytes) the share sent (zerocopy: of hs_transport_buf_alloc) */
    char *rbuf[2];   /* (bytes) receive buffers, alternating by iteration (copy) */
    hs_treq_t *rreq[2];
    hs_tview_t *rview[2]; /* view receives, alternating by iteration (zerocopy) */
    hs_allreduce_t *bar;  /* a 1-float all-reduce used as the barrier (padded messages) */
} gossip_t;

/* Barrier: an all-reduce of one float (every output depends on every rank). The transport's
 * own barrier sends 1-byte messages, which libfabric 1.17's shm provider can lose when they
 * arrive before their receive (see gossip/allreduce.c). */
static int barrier(gossip_t *g)
{
    float one = 1;
    return hs_allreduce_run(g->bar, &one);
}

static uint32_t gtag(long it)
{
    return GOSSIP_TAG + (uint32_t)(it % 1024);
}

static int post_recv(gossip_t *g, long it)
{
    int peers[4], cnt = 0, rank = hs_transport_rank(g->t);
    HS_TRY(hs_topo_in_peers(g->topo, it, rank, peers, NULL, 4, &cnt));
    if (cnt != 1)
        return HS_ERR(-EINVAL, "bench gossip: rank %d has %d in-peers at step %ld (need 1)", rank,
                      cnt, it);
    if (g->zc)
        return hs_transport_irecv_view(g->t, peers[0], gtag(it), g->bytes, &g->rview[it & 1]);
    return hs_transport_irecv(g->t, peers[0], gtag(it), g->rbuf[it & 1], g->bytes,
                              &g->rreq[it & 1]);
}

/* Wait for the receive of iteration it: *r its bytes (in the peer's buffer with zerocopy). */
static int wait_recv(gossip_t *g, long it, const char **r)
{
    size_t len;
    if (g->zc) {
        int done = 0;
        HS_TRY(hs_transport_view_wait(g->t, g->rview[it & 1], -1, &done));
        if (!done) return HS_ERR(-ETIMEDOUT, "bench gossip: no share at step %ld", it);
        *r = hs_tview_data(g->rview[it & 1]);
        len = hs_tview_len(g->rview[it & 1]);
    } else {
        hs_tstatus_t st;
        HS_TRY(hs_transport_wait(g->t, &g->rreq[it & 1], 0, &st));
        *r = g->rbuf[it & 1];
        len = st.len;
    }
    if (len != g->bytes)
        return HS_ERR(-EPROTO, "bench gossip: message of %zu bytes, expected %zu", len, g->bytes);
    return 0;
}

/* One exchange at iteration it; its receive is already posted. */
static int exchange(gossip_t *g, long it)
{
    int rank = hs_transport_rank(g->t), out[4], cnt = 0;
    double wout[4], self_w = 0;
    HS_TRY(hs_topo_out_peers(g->topo, it, rank, out, wout, 4, &cnt, &self_w));
    if (cnt != 1)
        return HS_ERR(-EINVAL, "bench gossip: rank %d has %d out-peers at step %ld (need 1)", rank,
                      cnt, it);
    float *x = (float *)g->x;
    double w;
    memcpy(&w, g->x + g->n * sizeof(float), sizeof w);
    /* The share buffer is free once the last exchange's send is complete. */
    if (g->sreq) HS_TRY(hs_transport_wait(g->t, &g->sreq, 0, NULL));
    /* Snapshot the share: s = p (x, w). */
    scale_to((float *)g->sbuf, x, g->n, (float)wout[0]);
    double sw = wout[0] * w;
    memcpy(g->sbuf + g->n * sizeof(float), &sw, sizeof sw);
    HS_TRY(hs_transport_isend(g->t, out[0], gtag(it), g->sbuf, g->bytes, &g->sreq));
    /* The next exchange's receive, before this one ends. */
    int rc = post_recv(g, it + 1);
    const char *r = NULL;
    if (rc == 0) rc = wait_recv(g, it, &r);
    if (rc == 0) {
        mix_into(x, (const float *)r, g->n, (float)self_w);
        double rw;
        memcpy(&rw, r + g->n * sizeof(float), sizeof rw);
        w = self_w * w + rw;
        memcpy(g->x + g->n * sizeof(float), &w, sizeof w);
    }
    /* (its sender's send completes when the view is released) */
    if (g->rview[it & 1]) hs_transport_view_release(g->t, &g->rview[it & 1]);
    return rc;
}

/* The passes that set the floor: after a barrier every rank makes the exchange's 5 passes
 * over the model a (n floats, then the weight: `bytes`) and the share buffer b, as memcpy
 * copies (a to b, b to a, half of a to b: 2 + 2 + 1; ctimes) and as the exchange's own loops
 * with no message (b = a / 2, then a = a / 2 + b; vtimes). Both leave a as it was: the
 * copies by copying it back, the loops because halving and doubling a normal float (or 0)
 * is exact. times[i] and times[reps + i] are when this rank started and ended repetition i
 * (hs_bl_gather_span). */
static void copy5(char *a, char *b, size_t n, size_t bytes, int vec)
{
    if (vec) { /* the exchange's own loops, mixing from its own share: no message */
        scale_to((float *)b, (const float *)a, n, 0.5f);
        mix_into((float *)a, (const float *)b, n, 0.5f);
        return;
    }
    size_t half = bytes / 2 / sizeof(float) * sizeof(float);
    char *dst[3] = {b, a, b}, *src[3] = {a, b, a};
    size_t len[3] = {bytes, bytes, half};
    for (int k = 0; k < 3; k++) memcpy(dst[k], src[k], len[k]);
}

/* One repetition of the floor, one way (vec: the exchange's loops; else memcpy), on the
 * model and the share buffer after a barrier: this rank's (start, end) into t[0] and t[reps].
 * The last exchange's send must be complete first: its receiver may still read the share. */
static int floor_rep(gossip_t *g, int vec, int reps, double *t)
{
    if (g->sreq) HS_TRY(hs_transport_wait(g->t, &g->sreq, 0, NULL));
    HS_TRY(barrier(g));
    double t0 = hs_now();
    copy5(g->x, g->sbuf, g->n, g->bytes, vec);
    t[0] = t0, t[reps] = hs_now();
    return 0;
}

static int gossip_worker(const hs_cfg_t *cfg, const size_t *sizes, int nsizes)
{
    int reps = (int)hs_cfg_int(cfg, "reps"), warmup = (int)hs_cfg_int(cfg, "warmup");
    hs_boot_t *b = NULL;
    gossip_t g;
    memset(&g, 0, sizeof g);
    /* (start, end) on this rank of each exchange (times: 2 xreps values) and of each floor
     * repetition (ctimes, vtimes: 2 reps values each) */
    int xreps = 2 * reps; /* exchanges: two per repetition (see the loop) */
    double *times = hs_malloc(2 * (size_t)xreps * sizeof *times, "timings");
    double *ctimes = hs_malloc(2 * (size_t)reps * sizeof *ctimes, "copy timings");
    double *vtimes = hs_malloc(2 * (size_t)reps * sizeof *vtimes, "copy timings");
    double *rdur = hs_malloc((size_t)xreps * sizeof *rdur, "timings");
    double *cdur = hs_malloc((size_t)reps * sizeof *cdur, "copy timings");
    if (!times || !ctimes || !vtimes || !rdur || !cdur) {
        free(times);
        free(ctimes);
        free(vtimes);
        free(rdur);
        free(cdur);
        return 1;
    }
    g.zc = hs_cfg_enum(cfg, "path") == 0;
    hs_transport_opts_t to;
    int rc = hs_transport_opts_default(&to);
    const char *prov = hs_cfg_str(cfg, "provider");
    if (strcmp(prov, "auto") != 0) to.provider = prov;
    if (rc == 0) rc = hs_boot_init(&b, NULL);
    if (rc == 0) rc = hs_transport_open(&g.t, b, &to);
    hs_allreduce_opts_t bo;
    if (rc == 0) rc = hs_bl_plain_opts(&bo, BARRIER_TAG);
    if (rc == 0) rc = hs_allreduce_create(&g.bar, g.t, 1, &bo);
    if (rc == 0)
        rc = hs_topo_create(&g.topo, hs_cfg_str(cfg, "graph"), hs_transport_size(g.t), 1, NULL);
    long it = 0;
    for (int si = 0; rc == 0 && si < nsizes; si++) {
        g.n = sizes[si] / sizeof(float);
        g.bytes = g.n * sizeof(float) + sizeof(double);
        g.x = hs_malloc(g.bytes, "model");
        if (g.zc) {
            if ((rc = hs_transport_buf_alloc(g.t, g.bytes, (void **)&g.sbuf)) < 0) break;
        } else {
            g.sbuf = hs_malloc(g.bytes, "send share");
            g.rbuf[0] = hs_malloc(g.bytes, "receive buffer");
            g.rbuf[1] = hs_malloc(g.bytes, "receive buffer");
            if (!g.sbuf || !g.rbuf[0] || !g.rbuf[1]) {
                rc = -ENOMEM;
                break;
            }
            memset(g.rbuf[0], 0, g.bytes);
            memset(g.rbuf[1], 0, g.bytes);
        }
        if (!g.x) {
            rc = -ENOMEM;
            break;
        }
        float *x = (float *)g.x;
        int rank = hs_transport_rank(g.t), P = hs_transport_size(g.t);
        for (size_t i = 0; i < g.n; i++) x[i] = (float)rank;
        double w = 1;
        memcpy(g.x + g.n * sizeof(float), &w, sizeof w);
        memset(g.sbuf, 0, g.bytes);
        if (rc == 0) rc = post_recv(&g, it);
        if (rc == 0) rc = barrier(&g);
        /* Exchanges and the floor's repetitions take turns: exchange, memcpy floor, exchange,
         * the loops' floor. Each floor repetition follows an exchange, as each exchange
         * follows a floor repetition, so both find the caches as the other left them and meet
         * the same memory bandwidth (this VM's drifts within seconds) and the same placement
         * of ranks on cores. Both exchanges count; a repetition is the pair. */
        for (int i = 0; rc == 0 && i < warmup + reps; i++) {
            int k = i - warmup;
            double wt[2]; /* a warm-up repetition's floor times: not kept */
            for (int vec = 0; rc == 0 && vec < 2; vec++, it++) {
                if ((rc = barrier(&g)) < 0) break;
                double t0 = hs_now();
                rc = exchange(&g, it);
                if (k >= 0) times[2 * k + vec] = t0, times[xreps + 2 * k + vec] = hs_now();
                if (rc == 0)
                    rc = k >= 0 ? floor_rep(&g, vec, reps, (vec ? vtimes : ctimes) + k)
                                : floor_rep(&g, vec, 1, wt);
            }
        }
        /* Push-sum keeps sum(x) / sum(w): z = x / w must stay the mean rank (P-1)/2. */
        memcpy(&w, g.x + g.n * sizeof(float), sizeof w);
        if (rc == 0 && fabs(x[g.n / 2] / w - (P - 1) / 2.0) > 0.5 * (P - 1) + 1e-6)
            rc = HS_ERR(-EIO, "bench gossip: z = %g left the range of the initial values",
                        x[g.n / 2] / w);
        /* Drop the receive posted for the next iteration: the barrier below proves nobody
         * sends it. */
        if (rc == 0 && g.sreq) rc = hs_transport_wait(g.t, &g.sreq, 0, NULL);
        if (g.sreq) hs_transport_req_free(g.t, &g.sreq);
        if (rc == 0) rc = barrier(&g);
        if (g.rreq[it & 1]) hs_transport_req_free(g.t, &g.rreq[it & 1]);
        if (g.rview[it & 1]) hs_transport_view_release(g.t, &g.rview[it & 1]);
        /* Also each rank's own clock (the slowest rank's duration), as this benchmark timed it
         * before 2026-11-24: exchanges (rdur) and the faster of the floor's copies (cdur). */
        for (int i = 0; i < xreps; i++) rdur[i] = times[xreps + i] - times[i];
        for (int i = 0; i < reps; i++)
            cdur[i] = HS_MIN(ctimes[reps + i] - ctimes[i], vtimes[reps + i] - vtimes[i]);
        if (rc == 0) rc = hs_bl_gather_max(g.t, rdur, xreps, TIMES_TAG);
        if (rc == 0) rc = hs_bl_gather_max(g.t, cdur, reps, TIMES_TAG);
        if (rc == 0) rc = hs_bl_gather_span(g.t, times, xreps, TIMES_TAG);
        if (rc == 0) rc = hs_bl_gather_span(g.t, ctimes, reps, TIMES_TAG);
        if (rc == 0) rc = hs_bl_gather_span(g.t, vtimes, reps, TIMES_TAG);
        if (rc == 0 && rank == 0) {
            double min = times[0];
            for (int i = 1; i < xreps; i++) min = HS_MIN(min, times[i]);
            double med = hs_bench_median(times, (size_t)xreps);
            double copy = hs_bench_median(ctimes, (size_t)reps);
            double vcopy = hs_bench_median(vtimes, (size_t)reps);
            /* the faster of the two copies: the lower (stricter) floor */
            printf("HSB impl=hearsay ranks=%d bytes=%zu median_s=%.6e min_s=%.6e reps=%d "
                   "provider=%s graph=%s path=%s memcpy_s=%.6e vcopy_s=%.6e floor_s=%.6e "
                   "rank_median_s=%.6e rank_floor_s=%.6e\n",
                   P, g.n * sizeof(float), med, min, reps, hs_transport_provider(g.t),
                   hs_topo_spec(g.topo), g.zc ? "zerocopy" : "copy", copy, vcopy,
                   HS_MIN(copy, vcopy), hs_bench_median(rdur, (size_t)xreps),
                   hs_bench_median(cdur, (size_t)reps));
            fflush(stdout);
        }
        HS_FREE(g.x);
        if (g.zc)
            hs_transport_buf_free(g.t, (void **)&g.sbuf);
        else
            HS_FREE(g.sbuf);
        HS_FREE(g.rbuf[0]);
        HS_FREE(g.rbuf[1]);
    }
    if (rc == 0) rc = barrier(&g);
    if (rc < 0) fprintf(stderr, "hearsay bench gossip (worker): %s\n", hs_last_error());
    if (g.sreq) hs_transport_req_free(g.t, &g.sreq);
    for (int i = 0; i < 2; i++) {
        if (g.rreq[i]) hs_transport_req_free(g.t, &g.rreq[i]);
        if (g.rview[i]) hs_transport_view_release(g.t, &g.rview[i]);
    }
    free(g.x);
    if (g.zc)
        hs_transport_buf_free(g.t, (void **)&g.sbuf);
    else
        free(g.sbuf);
    free(g.rbuf[0]);
    free(g.rbuf[1]);
    free(times);
    free(ctimes);
    free(vtimes);
    free(rdur);
    free(cdur);
    hs_topo_destroy(&g.topo);
    hs_allreduce_destroy(&g.bar);
    hs_transport_close(&g.t);
    hs_boot_finalize(&b);
    return rc < 0 ? 1 : 0;
}

/* bench/torch_gossip.py: the source tree (build time), then the installed copy. */
static const char *torch_script(void)
{
    static const char *candidates[] = {HS_SRCDIR "/bench/torch_gossip.py",
                                       HS_PKGDATADIR "/torch_gossip.py"};
    for (size_t i = 0; i < HS_ARRAY_LEN(candidates); i++)
        if (access(candidates[i], R_OK) == 0) return candidates[i];
    return NULL;
}

typedef struct gres {
    int have;
    double med, min, floor; /* floor: NaN where not measured (the reference) */
    double memcpy_s, vcopy_s;
    double rank_med, rank_floor; /* each rank's own clock, the slowest rank (hearsay only) */
    char provider[64], path[16];
} gres_t;

static int collect(char *const argv[], double limit, const size_t *sizes, int nsizes, gres_t *res,
                   const char *what)
{
    char *out = NULL;
    int status;
    HS_TRY(hs_bl_capture(argv, limit, &out, &status));
    size_t pos = 0;
    char line[1024], v[256];
    while (hs_bl_next_result(out, &pos, line, sizeof line)) {
        size_t bytes = (size_t)strtoull(hs_bl_field(line, "bytes", v, sizeof v) ?: "0", NULL, 10);
        for (int i = 0; i < nsizes; i++) {
            if (sizes[i] / 4 * 4 != bytes) continue;
            res[i].have = 1;
            res[i].med = atof(hs_bl_field(line, "median_s", v, sizeof v) ?: "nan");
            res[i].min = atof(hs_bl_field(line, "min_s", v, sizeof v) ?: "nan");
            res[i].floor = atof(hs_bl_field(line, "floor_s", v, sizeof v) ?: "nan");
            res[i].memcpy_s = atof(hs_bl_field(line, "memcpy_s", v, sizeof v) ?: "nan");
            res[i].vcopy_s = atof(hs_bl_field(line, "vcopy_s", v, sizeof v) ?: "nan");
            res[i].rank_med = atof(hs_bl_field(line, "rank_median_s", v, sizeof v) ?: "nan");
            res[i].rank_floor = atof(hs_bl_field(line, "rank_floor_s", v, sizeof v) ?: "nan");
            snprintf(res[i].provider, sizeof res[i].provider, "%s",
                     hs_bl_field(line, "provider", v, sizeof v) ?: "");
            snprintf(res[i].path, sizeof res[i].path, "%s",
                     hs_bl_field(line, "path", v, sizeof v) ?: "");
        }
    }
    free(out);
    if (status != 0)
        return HS_ERR(-EIO, "%s exited with status %d%s (its errors are above)", what, status,
                      status < 0 ? " (killed: over --timeout)" : "");
    return 0;
}

int hs_bench_gossip(int argc, char **argv)
{
    hs_cfg_t *cfg = NULL;
    size_t sizes[HS_BL_MAX_LIST];
    int ranks[HS_BL_MAX_LIST], nsizes = 0, nranks = 0;
    int early = hs_bl_start("gossip", &g_spec, argc, argv, 2, &cfg, sizes, &nsizes, ranks, &nranks);
    if (early >= 0) return early;
    if (hs_cfg_bool(cfg, "worker")) {
        int st = gossip_worker(cfg, sizes, nsizes);
        hs_cfg_free(&cfg);
        return st;
    }
    char self[PATH_MAX], reps[32], warmup[32];
    if (hs_bl_self(self, sizeof self) < 0) {
        fprintf(stderr, "hearsay bench gossip: %s\n", hs_last_error());
        hs_cfg_free(&cfg);
        return 1;
    }
    snprintf(reps, sizeof reps, "%ld", hs_cfg_int(cfg, "reps"));
    snprintf(warmup, sizeof warmup, "%ld", hs_cfg_int(cfg, "warmup"));
    int json = hs_cfg_bool(cfg, "json"), torch = hs_cfg_enum(cfg, "reference") == 1, status = 0;
    double limit = hs_cfg_double(cfg, "timeout");
    const char *script = torch ? torch_script() : NULL;
    if (torch && !script) {
        fprintf(stderr, "hearsay bench gossip: bench/torch_gossip.py not found (source tree or "
                        "install)\n");
        hs_cfg_free(&cfg);
        return 1;
    }
    if (!json)
        printf("one SGP exchange (%s): median of %s, first start to last end over ranks; %d "
               "cores\n",
               hs_cfg_str(cfg, "graph"), reps, hs_bl_cores());
    for (int ri = 0; ri < nranks; ri++) {
        char np[16];
        snprintf(np, sizeof np, "%d", ranks[ri]);
        gres_t h[HS_BL_MAX_LIST], t[HS_BL_MAX_LIST];
        memset(h, 0, sizeof h);
        memset(t, 0, sizeof t);
        char *hargv[] = {self,
                         "run",
                         "-n",
                         np,
                         "--",
                         self,
                         "bench",
                         "gossip",
                         "--worker",
                         "--sizes",
                         (char *)hs_cfg_str(cfg, "sizes"),
                         "--reps",
                         reps,
                         "--warmup",
                         warmup,
                         "--graph",
                         (char *)hs_cfg_str(cfg, "graph"),
                         "--provider",
                         (char *)hs_cfg_str(cfg, "provider"),
                         "--path",
                         (char *)hs_cfg_str(cfg, "path"),
                         NULL};
        if (collect(hargv, limit, sizes, nsizes, h, "the hearsay ranks") < 0) {
            fprintf(stderr, "hearsay bench gossip (%d ranks): %s\n", ranks[ri], hs_last_error());
            status = 1;
            continue;
        }
        const char *tnote = NULL;
        if (torch) {
            char *targv[] = {"/usr/bin/python3",
                             (char *)script,
                             "--ranks",
                             np,
                             "--sizes",
                             (char *)hs_cfg_str(cfg, "sizes"),
                             "--reps",
                             reps,
                             "--warmup",
                             warmup,
                             NULL};
            if (collect(targv, limit, sizes, nsizes, t, "the PyTorch reference") < 0) {
                fprintf(stderr,
                        "hearsay bench gossip: %s; is python3-torch installed? (apt-get install "
                        "python3-torch)\n",
                        hs_last_error());
                tnote = "the PyTorch reference failed (see stderr)";
            }
        }
        for (int si = 0; si < nsizes; si++) {
            size_t bytes = sizes[si] / 4 * 4;
            char sz[32];
            hs_bl_size_text(bytes, sz, sizeof sz);
            if (!h[si].have) {
                fprintf(stderr, "hearsay bench gossip: no result for %d ranks, %s\n", ranks[ri],
                        sz);
                status = 1;
                continue;
            }
            if (json) {
                printf("{\"bench\": \"gossip\", \"graph\": \"%s\", \"ranks\": %d, \"bytes\": %zu, "
                       "\"size\": \"%s\", \"cores\": %d, \"provider\": \"%s\", \"reps\": %s, "
                       "\"median_s\": %.6g, \"min_s\": %.6g, \"path\": \"%s\", "
                       "\"floor_s\": %.6g, \"floor_ratio\": %.4g, \"memcpy_s\": %.6g, "
                       "\"vcopy_s\": %.6g, \"rank_median_s\": %.6g, \"rank_floor_s\": %.6g, "
                       "\"rank_floor_ratio\": %.4g",
                       hs_cfg_str(cfg, "graph"), ranks[ri], bytes, sz, hs_bl_cores(),
                       h[si].provider, reps, h[si].med, h[si].min, h[si].path, h[si].floor,
                       h[si].med / h[si].floor, h[si].memcpy_s, h[si].vcopy_s, h[si].rank_med,
                       h[si].rank_floor, h[si].rank_med / h[si].rank_floor);
                if (t[si].have)
                    printf(", \"torch_median_s\": %.6g, \"torch_min_s\": %.6g, "
                           "\"torch_over_hearsay\": %.4g}\n",
                           t[si].med, t[si].min, t[si].med / h[si].med);
                else if (torch)
                    printf(", \"torch_median_s\": null, \"torch_note\": \"%s\"}\n",
                           tnote ? tnote : "no result");
                else
                    printf("}\n");
            } else {
                printf("ranks %d  %6s  hearsay %9.3f ms  floor %9.3f ms (x%.2f)", ranks[ri], sz,
                       h[si].med * 1e3, h[si].floor * 1e3, h[si].med / h[si].floor);
                if (t[si].have)
                    printf("  |  torch+gloo %9.3f ms  |  torch/hearsay %.2f\n", t[si].med * 1e3,
                           t[si].med / h[si].med);
                else
                    printf("%s\n", torch ? "  |  torch: no result" : "");
            }
            fflush(stdout);
        }
    }
    hs_cfg_free(&cfg);
    return status;
}
