/*
 * bench/bench_p2p.c — `hearsay bench p2p`: latency (ping-pong) and bandwidth (streaming) of
 * tagged sends between 2 ranks over the transport, for message sizes --min .. --max
 * (powers of two). Started alone it forks its own second rank and exchanges the addresses
 * over a socketpair; under `hearsay run -n 2` (or mpirun) it joins through the bootstrap.
 * Reports medians over repetitions; --json prints one object per size. With --reference fi
 * (the default), once the transport is closed, rank 0 measures the same streaming windows
 * with a plain libfabric tagged-send loop (bench/bench_p2p_ref.c) and prints it beside ours.
 */
#include "hearsay/bootstrap.h"
#include "hearsay/common.h"
#include "hearsay/env.h"
#include "hearsay/kernels.h"
#include "hearsay/transport.h"
#include "tools/commands.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct p2p_args {
    int json, reps, iters, reference; /* reference: 1 = plain libfabric loop, 0 = none */
    size_t min, max;
    const char *device; /* --device: also device buffers through hs_transport_send_mr (NULL: no) */
    hs_transport_opts_t o;
} p2p_args_t;

/* One size's results (filled on rank 0). */
typedef struct p2p_row {
    size_t bytes;
    double lat, bw, ref; /* seconds one way; bytes/s streamed by us; GB/s of the reference */
    int iters, window;
    /* --device: bytes/s of a device-to-device transfer (send_mr -> recv_mr, then an ack), and
     * of the device's own copy of the same bytes on rank 0 (0: not measured) */
    double dev_bw, dev_copy;
} p2p_row_t;

/* Everything a run measured, printed once the reference (if any) has run too. */
typedef struct p2p_result {
    p2p_row_t *rows;
    int n;
    char provider[64];
} p2p_result_t;

#define P2P_REF_TIMEOUT_S 30.0

/* bench/bench_p2p_ref.c: median GB/s of a plain libfabric tagged-send loop over `prov`
 * between this process and a forked one, iters[i] messages of sizes[i] bytes per window. */
int hs_bench_p2p_ref(const char *prov, const size_t *sizes, const int *iters, int nsizes, int reps,
                     double timeout_s, double *gbps);

static void usage(FILE *f)
{
    fprintf(f,
            "usage: hearsay bench p2p [--json] [--provider auto|hsshm|tcp|shm|...] [--min 64K]\n"
            "                         [--max 64M] [--iters N] [--reps R] [--chunk BYTES]\n"
            "                         [--progress-thread] [--shaping SPEC] [--reference fi|none]\n"
            "                         [--device emu|cuda[:N]]\n"
            "Ping-pong latency and streaming bandwidth of tagged sends between 2 ranks.\n"
            "--device: also move each size from device memory on rank 0 to device memory on\n"
            "rank 1 (hs_transport_send_mr/recv_mr: staged through host buffers in 1 MiB\n"
            "chunks) and print its GB/s beside the device's own copy of the same bytes.\n"
            "Run alone it forks its second rank; under `hearsay run -n 2` it uses both.\n"
            "--reference fi (default): after our run, stream the same windows with a plain\n"
            "libfabric tagged-send loop (provider tcp;ofi_rxm when ours is tcp, else shm) in\n"
            "two local processes and print its GB/s and ours/reference; none: skip it.\n");
}

static int parse_size(const char *s, const char *what, size_t *out)
{
    char buf[64];
    size_t n = strlen(s);
    if (n == 0 || n >= sizeof buf) return HS_ERR(-EINVAL, "%s: bad size '%s'", what, s);
    memcpy(buf, s, n + 1);
    long mult = 1;
    char u = buf[n - 1];
    if (u == 'K' || u == 'k') mult = 1L << 10;
    if (u == 'M' || u == 'm') mult = 1L << 20;
    if (u == 'G' || u == 'g') mult = 1L << 30;
    if (mult > 1) buf[n - 1] = '\0';
    long v;
    HS_TRY(hs_parse_long(buf, 1, (1L << 32) / mult, what, &v));
    *out = (size_t)(v * mult);
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Rank 1 tells rank 0 that its receives are posted; rank 0 keeps a receive for that signal
 * posted at all times (*rdy), reposting it as soon as one arrives. */
static int ready(hs_transport_t *t, hs_treq_t **rdy, char *flag)
{
    if (hs_transport_rank(t) == 1) return hs_transport_send(t, 0, 5, flag, 1);
    HS_TRY(hs_transport_wait(t, rdy, -1, NULL));
    return hs_transport_irecv(t, 1, 5, flag, 1, rdy);
}

/* Both ranks run this; rank 0 prints. Every receive is posted before its message can be sent
 * (rank 1 signals rank 0 once a phase's receives are posted; rank 0 posts the reply's receive
 * before each send), so the benchmark measures the expected-message path only: the shm
 * provider of libfabric 1.17 loses unexpected messages. Only chunks 2.. of a message larger
 * than the chunk size are posted on arrival of its first chunk (give --chunk >= --max to
 * avoid that as well). */
static int run(hs_transport_t *t, const p2p_args_t *a, p2p_result_t *res)
{
    int me = hs_transport_rank(t), peer = 1 - me;
    char *buf = hs_malloc(a->max, "p2p send buffer"), *rbuf = hs_malloc(a->max, "p2p buffer");
    char *ack = hs_malloc(64, "ack");
    int nsamp = HS_MAX(a->iters ? a->iters : 100, a->reps) + 1; /* see iters below */
    double *samp = hs_malloc((size_t)nsamp * sizeof *samp, "samples");
    hs_treq_t **reqs = hs_calloc(65, sizeof *reqs, "requests"), *rdy = NULL;
    int rc = (!buf || !rbuf || !ack || !samp || !reqs) ? -ENOMEM : 0;
    if (rc == 0) memset(buf, me + 1, a->max);
    if (rc == 0 && me == 0) rc = hs_transport_irecv(t, 1, 5, ack + 32, 1, &rdy);
    if (rc == 0) rc = hs_transport_barrier(t); /* rdy is posted before rank 1 signals */
    snprintf(res->provider, sizeof res->provider, "%s", hs_transport_provider(t));
    for (size_t sz = a->min; rc == 0 && sz <= a->max; sz *= 2) {
        /* ping-pong: one-way latency = round trip / 2, one sample per iteration */
        int iters = a->iters ? a->iters : (int)HS_MAX(5, HS_MIN(100, (64u << 20) / sz));
        hs_treq_t *rr = NULL;
        rc = hs_transport_irecv(t, peer, me == 0 ? 2 : 1, rbuf, sz, &rr);
        if (rc == 0) rc = ready(t, &rdy, ack + 32);
        for (int i = -1; rc == 0 && i < iters; i++) { /* i == -1: warm-up */
            double t0 = hs_now();
            if (me == 0) {
                rc = hs_transport_send(t, peer, 1, buf, sz);
                if (rc == 0) rc = hs_transport_wait(t, &rr, -1, NULL);
                if (rc == 0 && i + 1 < iters) rc = hs_transport_irecv(t, peer, 2, rbuf, sz, &rr);
            } else {
                rc = hs_transport_wait(t, &rr, -1, NULL);
                if (rc == 0 && i + 1 < iters) rc = hs_transport_irecv(t, peer, 1, rbuf, sz, &rr);
                if (rc == 0) rc = hs_transport_send(t, peer, 2, buf, sz);
            }
            if (i >= 0) samp[i] = (hs_now() - t0) / 2;
        }
        if (rr) hs_transport_req_free(t, &rr);
        if (rc) break;
        double lat = median(samp, iters);
        /* streaming: w back-to-back messages, then a 1-byte ack; bytes / time */
        int w = (int)HS_MAX(4, HS_MIN(64, (256u << 20) / sz));
        for (int r = -1; rc == 0 && r < a->reps; r++) {
            for (int k = 0; rc == 0 && me == 1 && k < w; k++)
                rc = hs_transport_irecv(t, peer, 3, rbuf, sz, &reqs[k]);
            if (rc == 0 && me == 0) rc = hs_transport_irecv(t, peer, 4, ack, 1, &reqs[w]);
            if (rc == 0) rc = ready(t, &rdy, ack + 32);
            double t0 = hs_now();
            for (int k = 0; rc == 0 && me == 0 && k < w; k++)
                rc = hs_transport_isend(t, peer, 3, buf, sz, &reqs[k]);
            for (int k = 0; rc == 0 && k < w; k++) rc = hs_transport_wait(t, &reqs[k], -1, NULL);
            if (rc == 0)
                rc = me == 0 ? hs_transport_wait(t, &reqs[w], -1, NULL)
                             : hs_transport_send(t, peer, 4, ack, 1);
            if (r >= 0) samp[r] = (double)sz * w / (hs_now() - t0);
        }
        if (rc) break;
        double bw = median(samp, a->reps);
        res->rows[res->n++] =
            (p2p_row_t){.bytes = sz, .lat = lat, .bw = bw, .ref = -1, .iters = iters, .window = w};
    }
    for (int k = 0; k < 65; k++)
        if (reqs && reqs[k]) hs_transport_req_free(t, &reqs[k]);
    if (rdy) hs_transport_req_free(t, &rdy);
    free(buf);
    free(rbuf);
    free(ack);
    free(samp);
    free(reqs);
    return rc;
}

/* --device: for every size, device memory on rank 0 to device memory on rank 1 through
 * registered buffers (one transfer, then a 1-byte ack: bytes / time, median over the reps),
 * and on rank 0 the device's own copy of the same bytes (copy, then sync). */
static int run_device(hs_transport_t *t, const p2p_args_t *a, p2p_result_t *res)
{
    hs_device_t dev;
    int idx = 0, me = hs_transport_rank(t), peer = 1 - me;
    HS_TRY(hs_device_select(a->device, 0, &dev, &idx));
    hs_kernels_t *k = NULL;
    HS_TRY(hs_kernels_open(&k, dev, idx, 1));
    void *x = NULL, *y = NULL;
    hs_tmr_t *mr = NULL;
    char ack = 0;
    double *samp = hs_malloc((size_t)a->reps * sizeof *samp, "samples");
    int rc = samp ? 0 : -ENOMEM;
    if (rc == 0) rc = k->ops->alloc(k, a->max, &x);
    if (rc == 0) rc = k->ops->alloc(k, a->max, &y);
    if (rc == 0) rc = k->ops->zero(k, x, a->max);
    if (rc == 0) rc = hs_transport_mr_reg(t, k, x, a->max, "p2p device buffer", &mr);
    for (int i = 0; rc == 0 && i < res->n; i++) {
        p2p_row_t *row = &res->rows[i];
        const size_t sz = row->bytes;
        for (int r = -1; rc == 0 && r < a->reps; r++) {
            rc = hs_transport_barrier(t);
            double t0 = hs_now();
            if (rc == 0 && me == 0) {
                rc = hs_transport_send_mr(t, peer, 6, mr, 0, sz);
                if (rc == 0) rc = hs_transport_recv(t, peer, 7, &ack, 1, NULL);
            } else if (rc == 0) {
                rc = hs_transport_recv_mr(t, peer, 6, mr, 0, sz);
                if (rc == 0) rc = hs_transport_send(t, peer, 7, &ack, 1);
            }
            if (r >= 0) samp[r] = (double)sz / (hs_now() - t0);
        }
        if (rc == 0) row->dev_bw = median(samp, a->reps);
        for (int r = -1; rc == 0 && me == 0 && r < a->reps; r++) {
            double t0 = hs_now();
            rc = k->ops->copy(k, y, x, sz);
            if (rc == 0) rc = k->ops->sync(k);
            if (r >= 0) samp[r] = (double)sz / (hs_now() - t0);
        }
        if (rc == 0 && me == 0) row->dev_copy = median(samp, a->reps);
    }
    if (rc < 0) hs_error_prefix("--device %s", a->device);
    hs_transport_mr_dereg(t, &mr);
    k->ops->free(k, x);
    k->ops->free(k, y);
    hs_kernels_close(&k);
    free(samp);
    return rc;
}

/* The libfabric provider of the reference loop for our provider `ours`. */
static const char *ref_provider(const char *ours)
{
    return !strncmp(ours, "tcp", 3) ? "tcp;ofi_rxm" : "shm";
}

/* Rank 0, after the transport is closed: the plain libfabric loop over the same windows. */
static int run_reference(const p2p_args_t *a, p2p_result_t *res)
{
    if (!a->reference || res->n == 0) return 0;
    size_t *sizes = hs_calloc((size_t)res->n, sizeof *sizes, "reference sizes");
    int *iters = hs_calloc((size_t)res->n, sizeof *iters, "reference windows");
    double *gbps = hs_calloc((size_t)res->n, sizeof *gbps, "reference results");
    int rc = (!sizes || !iters || !gbps) ? -ENOMEM : 0;
    for (int i = 0; rc == 0 && i < res->n; i++) {
        sizes[i] = res->rows[i].bytes;
        iters[i] = res->rows[i].window;
    }
    if (rc == 0)
        rc = hs_bench_p2p_ref(ref_provider(res->provider), sizes, iters, res->n, a->reps,
                              P2P_REF_TIMEOUT_S, gbps);
    for (int i = 0; rc == 0 && i < res->n; i++) res->rows[i].ref = gbps[i];
    if (rc) hs_error_prefix("reference loop (--reference none skips it)");
    free(sizes);
    free(iters);
    free(gbps);
    return rc;
}

static void print_rows(const p2p_args_t *a, const p2p_result_t *res)
{
    const char *cma = getenv("FI_SHM_DISABLE_CMA");
    const char *rp = ref_provider(res->provider);
    if (!cma) cma = "unset";
    if (!a->json && res->n > 0 && a->reference)
        printf("# ref: plain libfabric tagged-send loop, provider %s, same windows; "
               "FI_SHM_DISABLE_CMA=%s\n",
               rp, cma);
    else if (!a->json && res->n > 0)
        printf("# FI_SHM_DISABLE_CMA=%s\n", cma);
    for (int i = 0; i < res->n; i++) {
        const p2p_row_t *r = &res->rows[i];
        int has_ref = a->reference && r->ref > 0;
        double ratio = has_ref ? r->bw / 1e9 / r->ref : 0;
        if (a->json) {
            char refs[160] = "\"ref_provider\":null,\"ref_GBps\":null,\"ratio\":null";
            if (has_ref)
                snprintf(refs, sizeof refs,
                         "\"ref_provider\":\"%s\",\"ref_GBps\":%.3f,\"ratio\":%.3f", rp, r->ref,
                         ratio);
            char devs[160] = "\"device\":null";
            if (a->device)
                snprintf(devs, sizeof devs,
                         "\"device\":\"%s\",\"device_GBps\":%.3f,\"device_copy_GBps\":%.3f",
                         a->device, r->dev_bw / 1e9, r->dev_copy / 1e9);
            printf("{\"bench\":\"p2p\",\"provider\":\"%s\",\"bytes\":%zu,\"median_us\":%.2f,"
                   "\"pingpong_GBps\":%.3f,\"GBps\":%.3f,\"iters\":%d,\"reps\":%d,\"window\":%d,"
                   "\"chunk\":%zu,%s,%s,\"fi_shm_disable_cma\":\"%s\"}\n",
                   res->provider, r->bytes, r->lat * 1e6, (double)r->bytes / r->lat / 1e9,
                   r->bw / 1e9, r->iters, a->reps, r->window, a->o.chunk_bytes, refs, devs, cma);
        } else {
            printf("%-12s %10zu B  latency %10.1f us  ping-pong %7.2f GB/s  stream %7.2f GB/s",
                   res->provider, r->bytes, r->lat * 1e6, (double)r->bytes / r->lat / 1e9,
                   r->bw / 1e9);
            if (has_ref) printf("  ref %7.2f GB/s  ratio %5.2f", r->ref, ratio);
            if (a->device)
                printf("  %s: device-to-device %7.2f GB/s, its own copy %7.2f GB/s (x%.1f)",
                       a->device, r->dev_bw / 1e9, r->dev_copy / 1e9,
                       r->dev_bw > 0 ? r->dev_copy / r->dev_bw : 0.0);
            printf("\n");
        }
    }
    fflush(stdout);
}

/* waitpid, bounded: SIGKILL after timeout_s. Returns 0, or -ETIMEDOUT after the kill. */
static int wait_child(pid_t pid, double timeout_s, int *st)
{
    double deadline = hs_now() + timeout_s;
    pid_t w;
    while ((w = waitpid(pid, st, WNOHANG)) == 0 && hs_now() < deadline) hs_sleep(0.01);
    if (w != 0) return 0;
    kill(pid, SIGKILL);
    waitpid(pid, st, 0);
    return HS_ERR(-ETIMEDOUT, "bench p2p: rank 1 did not exit within %.0f s", timeout_s);
}

static int io_all(int fd, void *p, size_t n, int wr)
{
    char *c = p;
    while (n) {
        ssize_t k = wr ? write(fd, c, n) : read(fd, c, n);
        if (k <= 0) return -1;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Fork rank 1; exchange the two address blobs over a socketpair. */
static int run_forked(const p2p_args_t *a, p2p_result_t *res)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
        return HS_ERR(-errno, "bench p2p: socketpair: %s", strerror(errno));
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return HS_ERR(-errno, "bench p2p: fork: %s", strerror(errno));
    int me = pid == 0 ? 1 : 0, fd = sv[me];
    close(sv[1 - me]);
    hs_transport_t *t = NULL;
    char all[2][HS_TRANSPORT_ADDR_MAX];
    memset(all, 0, sizeof all);
    size_t len;
    int rc = hs_transport_create(&t, me, 2, 1, &a->o);
    if (rc == 0) rc = hs_transport_address(t, all[me], &len);
    char ok = rc == 0, peer_ok = 0;
    if (io_all(fd, &ok, 1, 1) || io_all(fd, all[me], HS_TRANSPORT_ADDR_MAX, 1) ||
        io_all(fd, &peer_ok, 1, 0) || io_all(fd, all[1 - me], HS_TRANSPORT_ADDR_MAX, 0))
        rc = rc ? rc : HS_ERR(-EPIPE, "bench p2p: the other rank went away during set-up");
    if (rc == 0 && !peer_ok) rc = HS_ERR(-EIO, "bench p2p: the other rank failed to start");
    if (rc == 0) rc = hs_transport_connect(t, all, HS_TRANSPORT_ADDR_MAX);
    if (rc == 0) rc = hs_transport_barrier(t);
    if (rc == 0) rc = run(t, a, res);
    if (rc == 0 && a->device) rc = run_device(t, a, res);
    if (rc && me == 1) fprintf(stderr, "hearsay bench p2p (rank 1): %s\n", hs_last_error());
    hs_transport_close(&t);
    close(fd);
    if (me == 1) _exit(rc ? 1 : 0);
    int st = 0;
    if (rc) kill(pid, SIGTERM);
    int wrc = wait_child(pid, a->o.timeout_s, &st);
    if (rc == 0) rc = wrc;
    if (rc == 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
        rc = HS_ERR(-EIO, "bench p2p: rank 1 failed");
    if (rc == 0) rc = run_reference(a, res); /* rank 1 has exited: nothing competes */
    return rc;
}

static int run_booted(const p2p_args_t *a, p2p_result_t *res)
{
    hs_boot_t *b = NULL;
    HS_TRY(hs_boot_init(&b, NULL));
    int rc = 0;
    if (hs_boot_size(b) != 2)
        rc = HS_ERR(-EINVAL, "bench p2p needs exactly 2 ranks, the job has %d", hs_boot_size(b));
    hs_transport_t *t = NULL;
    if (rc == 0) rc = hs_transport_open(&t, b, &a->o);
    int me = t ? hs_transport_rank(t) : -1;
    if (rc == 0) rc = run(t, a, res);
    if (rc == 0 && a->device) rc = run_device(t, a, res);
    hs_transport_close(&t);
    hs_boot_finalize(&b);
    /* Rank 0 runs the reference on its own host once both ranks are done. */
    if (me != 0) res->n = 0;
    if (rc == 0) rc = run_reference(a, res);
    return rc;
}

int hs_bench_p2p(int argc, char **argv)
{
    p2p_args_t a = {.reps = 5, .min = 64u << 10, .max = 64u << 20, .reference = 1};
    if (hs_transport_opts_default(&a.o) < 0) {
        fprintf(stderr, "hearsay bench p2p: %s\n", hs_last_error());
        return 2;
    }
    a.o.timeout_s = 60;
    int rc = 0;
    for (int i = 1; i < argc && rc == 0; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(f, "--json")) {
            a.json = 1;
        } else if (!strcmp(f, "--progress-thread")) {
            a.o.progress_thread = 1;
        } else if (!v) {
            rc = HS_ERR(-EINVAL, "%s needs a value", f);
        } else if (!strcmp(f, "--provider")) {
            a.o.provider = argv[++i];
        } else if (!strcmp(f, "--reference")) {
            const char *r = argv[++i];
            if (!strcmp(r, "fi"))
                a.reference = 1;
            else if (!strcmp(r, "none"))
                a.reference = 0;
            else
                rc = HS_ERR(-EINVAL, "--reference: '%s' is not one of fi, none", r);
        } else if (!strcmp(f, "--shaping")) {
            a.o.shaping = argv[++i];
        } else if (!strcmp(f, "--device")) {
            a.device = argv[++i];
            hs_device_t dev;
            if ((rc = hs_device_select(a.device, 0, &dev, NULL)) == 0 && dev == HS_DEV_CPU)
                a.device = NULL; /* the CPU's memory is what the other columns measure */
        } else if (!strcmp(f, "--min")) {
            rc = parse_size(argv[++i], "--min", &a.min);
        } else if (!strcmp(f, "--max")) {
            rc = parse_size(argv[++i], "--max", &a.max);
        } else if (!strcmp(f, "--chunk")) {
            rc = parse_size(argv[++i], "--chunk", &a.o.chunk_bytes);
        } else if (!strcmp(f, "--iters")) {
            rc = hs_parse_long(argv[++i], 1, 100000, "--iters", &n);
            a.iters = (int)n;
        } else if (!strcmp(f, "--reps")) {
            rc = hs_parse_long(argv[++i], 1, 1000, "--reps", &n);
            a.reps = (int)n;
        } else {
            rc = HS_ERR(-EINVAL, "unknown option '%s'", f);
        }
    }
    if (rc == 0 && a.min > a.max) rc = HS_ERR(-EINVAL, "--min %zu > --max %zu", a.min, a.max);
    if (rc < 0) {
        fprintf(stderr, "hearsay bench p2p: %s\n", hs_last_error());
        usage(stderr);
        return 2;
    }
    if (!a.o.chunk_bytes) a.o.chunk_bytes = 1u << 20;
    p2p_result_t res = {.n = 0};
    int nsizes = 0;
    for (size_t sz = a.min; sz <= a.max; sz *= 2) nsizes++;
    res.rows = hs_calloc((size_t)nsizes, sizeof *res.rows, "p2p results");
    if (!res.rows) {
        fprintf(stderr, "hearsay bench p2p: %s\n", hs_last_error());
        return 1;
    }
    rc = hs_env_str("HS_RANK") || getenv("OMPI_COMM_WORLD_RANK") ? run_booted(&a, &res)
                                                                 : run_forked(&a, &res);
    print_rows(&a, &res); /* whatever was measured, also when the reference failed */
    free(res.rows);
    if (rc < 0) {
        fprintf(stderr, "hearsay bench p2p: %s\n", hs_last_error());
        return 1;
    }
    return 0;
}
