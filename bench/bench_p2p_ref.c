/*
 * bench/bench_p2p_ref.c — the reference column of `hearsay bench p2p`: streaming bandwidth of a
 * plain libfabric tagged-send loop between this process and a forked child, with none of the
 * transport's machinery (no chunking, no sequence numbers, no request objects).
 *
 * Both processes open an FI_EP_RDM endpoint with FI_TAGGED on the named provider ("shm",
 * "tcp;ofi_rxm", ...) and swap endpoint names over a socketpair. For each size and repetition
 * the child (the receiver) posts every receive of the window, then tells the parent over the
 * socketpair; the parent (the sender) starts its clock, fi_tsend's the window's messages back to
 * back (one message per send; split only where the provider's max_msg_size is smaller), reaps
 * the send completions and waits for the receiver's 1-byte tagged ack, whose receive it posted
 * before the window. Every message therefore meets a posted receive: the shm provider of
 * libfabric 1.17 loses messages that arrive first. Completions are reaped with fi_cq_read
 * (yielding the core while the queue is empty) and every wait is bounded by timeout_s.
 */
#include "bench/bench_util.h"
#include "hearsay/common.h"

#include <poll.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* Declared in bench/bench_p2p.c too (the only caller). sizes[i] bytes, iters[i] messages per
 * window, reps timed windows after one warm-up; gbps[i] = median over reps of
 * sizes[i] * iters[i] / window time, in GB/s (1e9 bytes). */
int hs_bench_p2p_ref(const char *prov, const size_t *sizes, const int *iters, int nsizes, int reps,
                     double timeout_s, double *gbps);

#define TAG_DATA 0x51ull
#define TAG_ACK  0x52ull

typedef struct ref {
    const char *prov;
    int me, fd;
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_cq *cq;
    struct fid_av *av;
    struct fid_ep *ep;
    fi_addr_t peer;
    double timeout_s;
    char ack[8]; /* the sender's ack lands here, not in the data buffer */
} ref_t;

static int fab_fail(const ref_t *r, const char *call, long ret)
{
    int code = (ret < 0 && ret > -256) ? (int)ret : -EIO;
    return HS_ERR(code, "bench p2p reference (%s, %s): %s failed: %s", r->prov,
                  r->me ? "receiver" : "sender", call, fi_strerror((int)(ret < 0 ? -ret : ret)));
}

/* Read or write exactly n bytes of the socketpair, giving up after the timeout. */
static int sock_io(const ref_t *r, void *p, size_t n, int wr, const char *what)
{
    char *c = p;
    double deadline = hs_now() + r->timeout_s;
    while (n) {
        struct pollfd pf = {.fd = r->fd, .events = wr ? POLLOUT : POLLIN};
        int left_ms = (int)((deadline - hs_now()) * 1e3);
        if (left_ms <= 0)
            return HS_ERR(-ETIMEDOUT,
                          "bench p2p reference (%s): no %s from the other process "
                          "within %.0f s",
                          r->prov, what, r->timeout_s);
        int k = poll(&pf, 1, left_ms);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return HS_ERR(-errno, "bench p2p reference: poll: %s", strerror(errno));
        if (k == 0) continue;
        ssize_t m = wr ? write(r->fd, c, n) : read(r->fd, c, n);
        if (m < 0 && errno == EINTR) continue;
        if (m <= 0)
            return HS_ERR(-EPIPE, "bench p2p reference (%s): the other process went away (%s)",
                          r->prov, what);
        c += m;
        n -= (size_t)m;
    }
    return 0;
}

/* One fi_cq_read: subtracts the completions found from *pending. */
static int progress(ref_t *r, int *pending)
{
    struct fi_cq_tagged_entry e[16];
    ssize_t n = fi_cq_read(r->cq, e, HS_ARRAY_LEN(e));
    if (n > 0) {
        *pending -= (int)n;
        return 1;
    }
    if (n == -FI_EAGAIN) return 0;
    if (n == -FI_EAVAIL) {
        struct fi_cq_err_entry err;
        memset(&err, 0, sizeof err);
        ssize_t k = fi_cq_readerr(r->cq, &err, 0);
        if (k < 0) return fab_fail(r, "fi_cq_readerr", k);
        return HS_ERR(err.err ? -err.err : -EIO,
                      "bench p2p reference (%s, %s): fi_cq_read reported a failed operation: %s "
                      "(%s)",
                      r->prov, r->me ? "receiver" : "sender", fi_strerror(err.err),
                      fi_cq_strerror(r->cq, err.prov_errno, err.err_data, NULL, 0));
    }
    return fab_fail(r, "fi_cq_read", n);
}

/* Reap completions until *pending is 0, at most until `deadline`. */
static int reap(ref_t *r, int *pending, double deadline, const char *what)
{
    for (unsigned spins = 1; *pending > 0; spins++) {
        int rc = progress(r, pending);
        if (rc < 0) return rc;
        if (rc) continue;
        sched_yield();
        if (spins % 64 == 0 && hs_now() > deadline)
            return HS_ERR(-ETIMEDOUT,
                          "bench p2p reference (%s, %s): %d %s completion(s) still missing "
                          "after %.0f s",
                          r->prov, r->me ? "receiver" : "sender", *pending, what, r->timeout_s);
    }
    return 0;
}

/* fi_tsend, progressing the queue and retrying while the provider says -FI_EAGAIN. */
static int tsend(ref_t *r, const void *buf, size_t len, uint64_t tag, void *ctx, int *pending,
                 double deadline)
{
    for (;;) {
        ssize_t ret = fi_tsend(r->ep, buf, len, NULL, r->peer, tag, ctx);
        if (ret == 0) {
            (*pending)++;
            return 0;
        }
        if (ret != -FI_EAGAIN) return fab_fail(r, "fi_tsend", ret);
        int rc = progress(r, pending);
        if (rc < 0) return rc;
        if (hs_now() > deadline)
            return HS_ERR(-ETIMEDOUT,
                          "bench p2p reference (%s): fi_tsend kept returning "
                          "FI_EAGAIN for %.0f s",
                          r->prov, r->timeout_s);
    }
}

static int trecv(ref_t *r, void *buf, size_t len, uint64_t tag, void *ctx, int *pending)
{
    ssize_t ret = fi_trecv(r->ep, buf, len, NULL, FI_ADDR_UNSPEC, tag, 0, ctx);
    if (ret) return fab_fail(r, "fi_trecv", ret);
    (*pending)++;
    return 0;
}

static int ref_open(ref_t *r)
{
    struct fi_info *hints = fi_allocinfo();
    if (!hints) return HS_ERR(-ENOMEM, "bench p2p reference: fi_allocinfo: out of memory");
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_TAGGED;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    hints->fabric_attr->prov_name = strdup(r->prov);
    int ret = hints->fabric_attr->prov_name
                  ? fi_getinfo(FI_VERSION(1, 11), NULL, NULL, 0, hints, &r->info)
                  : -FI_ENOMEM;
    fi_freeinfo(hints);
    if (ret) return fab_fail(r, "fi_getinfo", ret);
    ret = fi_fabric(r->info->fabric_attr, &r->fabric, NULL);
    if (ret) return fab_fail(r, "fi_fabric", ret);
    ret = fi_domain(r->fabric, r->info, &r->domain, NULL);
    if (ret) return fab_fail(r, "fi_domain", ret);
    struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
    ret = fi_cq_open(r->domain, &cqa, &r->cq, NULL);
    if (ret) return fab_fail(r, "fi_cq_open", ret);
    struct fi_av_attr ava = {.type = FI_AV_TABLE, .count = 2};
    ret = fi_av_open(r->domain, &ava, &r->av, NULL);
    if (ret) return fab_fail(r, "fi_av_open", ret);
    ret = fi_endpoint(r->domain, r->info, &r->ep, NULL);
    if (ret) return fab_fail(r, "fi_endpoint", ret);
    ret = fi_ep_bind(r->ep, &r->av->fid, 0);
    if (ret) return fab_fail(r, "fi_ep_bind (address vector)", ret);
    ret = fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV);
    if (ret) return fab_fail(r, "fi_ep_bind (completion queue)", ret);
    ret = fi_enable(r->ep);
    if (ret) return fab_fail(r, "fi_enable", ret);
    return 0;
}

static void ref_close(ref_t *r)
{
    if (r->ep) fi_close(&r->ep->fid);
    if (r->av) fi_close(&r->av->fid);
    if (r->cq) fi_close(&r->cq->fid);
    if (r->domain) fi_close(&r->domain->fid);
    if (r->fabric) fi_close(&r->fabric->fid);
    if (r->info) fi_freeinfo(r->info);
    r->ep = NULL;
    r->av = NULL;
    r->cq = NULL;
    r->domain = NULL;
    r->fabric = NULL;
    r->info = NULL;
}

/* Swap endpoint names (preceded by a status byte, so a failed set-up on one side is reported
 * on the other) and insert the peer's into the address vector. `rc` is this side's set-up. */
static int ref_connect(ref_t *r, int rc)
{
    char name[512], peer[512];
    size_t len = sizeof name;
    memset(name, 0, sizeof name);
    if (rc == 0) {
        int ret = fi_getname(&r->ep->fid, name, &len);
        if (ret) rc = fab_fail(r, "fi_getname", ret);
    }
    uint32_t hdr[2] = {rc == 0, (uint32_t)len}, phdr[2];
    int io = sock_io(r, hdr, sizeof hdr, 1, "endpoint name");
    if (io == 0) io = sock_io(r, name, sizeof name, 1, "endpoint name");
    if (io == 0) io = sock_io(r, phdr, sizeof phdr, 0, "endpoint name");
    if (io == 0) io = sock_io(r, peer, sizeof peer, 0, "endpoint name");
    if (rc) return rc;
    if (io) return io;
    if (!phdr[0])
        return HS_ERR(-EIO,
                      "bench p2p reference (%s): the other process failed to "
                      "open its endpoint",
                      r->prov);
    int n = fi_av_insert(r->av, peer, 1, &r->peer, 0, NULL);
    if (n != 1) return fab_fail(r, "fi_av_insert", n < 0 ? n : -FI_EINVAL);
    return 0;
}

/* One window: `n` messages of `len` bytes (each sent as `pieces` sends of at most `piece`). */
static int window(ref_t *r, char *buf, size_t len, size_t piece, int n, struct fi_context2 *ctx,
                  double *seconds)
{
    double deadline = hs_now() + r->timeout_s;
    int pending = 0, k = 0, rc = 0;
    char sig = 'R';
    if (r->me == 1) { /* receiver: post the whole window, signal, reap, ack */
        for (int i = 0; rc == 0 && i < n; i++)
            for (size_t off = 0; rc == 0 && off < len; off += piece)
                rc = trecv(r, buf + off, HS_MIN(piece, len - off), TAG_DATA, &ctx[k++], &pending);
        if (rc == 0) rc = sock_io(r, &sig, 1, 1, "ready signal");
        if (rc == 0) rc = reap(r, &pending, deadline, "receive");
        if (rc == 0) rc = tsend(r, buf, 1, TAG_ACK, &ctx[k], &pending, deadline);
        if (rc == 0) rc = reap(r, &pending, deadline, "ack send");
        return rc;
    }
    /* sender: post the ack's receive, wait until the window is posted, send, reap */
    rc = trecv(r, r->ack, 1, TAG_ACK, &ctx[k++], &pending);
    if (rc == 0) rc = sock_io(r, &sig, 1, 0, "ready signal");
    double t0 = hs_now();
    deadline = t0 + r->timeout_s;
    for (int i = 0; rc == 0 && i < n; i++)
        for (size_t off = 0; rc == 0 && off < len; off += piece)
            rc = tsend(r, buf + off, HS_MIN(piece, len - off), TAG_DATA, &ctx[k++], &pending,
                       deadline);
    if (rc == 0) rc = reap(r, &pending, deadline, "send or ack");
    *seconds = hs_now() - t0;
    return rc;
}

/* Both processes run this; the sender fills gbps. */
static int ref_run(ref_t *r, const size_t *sizes, const int *iters, int nsizes, int reps,
                   double *gbps)
{
    size_t maxsz = 1, piece = r->info->ep_attr->max_msg_size;
    if (!piece) piece = SIZE_MAX;
    int maxops = 1;
    for (int s = 0; s < nsizes; s++) {
        maxsz = HS_MAX(maxsz, sizes[s]);
        size_t ops = (size_t)iters[s] * ((sizes[s] + piece - 1) / piece) + 1;
        if (ops > (size_t)1 << 24)
            return HS_ERR(-EINVAL,
                          "bench p2p reference (%s): %zu-byte messages need %zu "
                          "sends each (max_msg_size %zu)",
                          r->prov, sizes[s], ops, piece);
        maxops = HS_MAX(maxops, (int)ops);
    }
    char *buf = hs_malloc(maxsz, "reference buffer");
    struct fi_context2 *ctx = hs_calloc((size_t)maxops + 1, sizeof *ctx, "reference contexts");
    double *samp = hs_calloc((size_t)reps, sizeof *samp, "reference samples");
    int rc = (!buf || !ctx || !samp) ? -ENOMEM : 0;
    if (rc == 0) memset(buf, r->me + 1, maxsz);
    for (int s = 0; rc == 0 && s < nsizes; s++) {
        for (int rep = -1; rc == 0 && rep < reps; rep++) { /* rep -1: warm-up */
            double dt = 0;
            rc = window(r, buf, sizes[s], piece, iters[s], ctx, &dt);
            if (rc == 0 && rep >= 0) samp[rep] = (double)sizes[s] * iters[s] / dt / 1e9;
        }
        if (rc == 0 && r->me == 0) gbps[s] = hs_bench_median(samp, (size_t)reps);
    }
    free(buf);
    free(ctx);
    free(samp);
    return rc;
}

int hs_bench_p2p_ref(const char *prov, const size_t *sizes, const int *iters, int nsizes, int reps,
                     double timeout_s, double *gbps)
{
    if (!strncmp(prov, "tcp", 3)) setenv("FI_TCP_IFACE", "lo", 0); /* never override the user */
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
        return HS_ERR(-errno, "bench p2p reference: socketpair: %s", strerror(errno));
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(sv[0]);
        close(sv[1]);
        return HS_ERR(-e, "bench p2p reference: fork: %s", strerror(e));
    }
    ref_t r = {.prov = prov, .me = pid == 0, .timeout_s = timeout_s > 0 ? timeout_s : 30};
    r.fd = sv[r.me];
    close(sv[1 - r.me]);
    int rc = ref_open(&r);
    rc = ref_connect(&r, rc);
    if (rc == 0) rc = ref_run(&r, sizes, iters, nsizes, reps, gbps);
    char done = 'D'; /* the receiver keeps its endpoint open until the sender is finished */
    if (rc == 0) rc = sock_io(&r, &done, 1, r.me == 0, "end of the run");
    ref_close(&r);
    close(r.fd);
    if (r.me == 1) {
        if (rc) fprintf(stderr, "hearsay bench p2p (reference receiver): %s\n", hs_last_error());
        _exit(rc ? 1 : 0);
    }
    if (rc) kill(pid, SIGTERM);
    int st = 0;
    double deadline = hs_now() + r.timeout_s;
    pid_t w;
    while ((w = waitpid(pid, &st, WNOHANG)) == 0 && hs_now() < deadline) hs_sleep(0.01);
    if (w == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        if (rc == 0)
            rc = HS_ERR(-ETIMEDOUT,
                        "bench p2p reference (%s): the receiver did not exit "
                        "within %.0f s",
                        prov, r.timeout_s);
    }
    if (rc == 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
        rc = HS_ERR(-EIO, "bench p2p reference (%s): the receiver failed", prov);
    return rc;
}
