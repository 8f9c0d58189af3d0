/*
 * gossip/fabric.c — libfabric transport backend: provider selection, endpoint set-up,
 * address exchange blobs, teardown, and the ops table. Messages live in fabric_msg.c and
 * memory windows in fabric_rma.c.
 */
#include "gossip/fabric.h"
#include "gossip/transport_impl.h"
#include "hearsay/common.h"
#include "hearsay/env.h"

#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

int hs_fab_err(const fab_t *f, int ret, const char *call, int peer, const char *what)
{
    int code = (ret < 0 && ret > -256) ? ret : -EIO;
    char peerbuf[48] = "";
    if (peer >= 0) snprintf(peerbuf, sizeof peerbuf, " (peer rank %d)", peer);
    return HS_ERR(code, "rank %d: %s%s%s%s failed: %s (libfabric provider %s)",
                  f && f->t ? f->t->rank : -1, call, peerbuf, what ? " " : "", what ? what : "",
                  fi_strerror(ret < 0 ? -ret : ret), f && f->prov[0] ? f->prov : "?");
}

const char *hs_fab_host_of(const fab_t *f, int rank)
{
    if (!f->peers || rank < 0 || rank >= f->t->size) return "?";
    return f->peers[rank].host;
}

/* Map a user-facing provider name to the fi_info provider string. */
/* shm before libfabric 1.19 loses or stalls messages that arrive before their receive is
 * posted (inject-buffer exhaustion and unexpected SAR messages: libfabric issues #8976 and
 * #9143, fixed in 1.19). Gossip sends whenever it likes, so such messages are the normal case:
 * `auto` uses shm on one host only from 1.19 on, and tcp (over loopback) before. */
static int shm_trusted(void)
{
    return fi_version() >= FI_VERSION(1, 19);
}

static const char *map_provider(const char *name, int all_local)
{
    /* "auto" reaches this backend only when the ranks span hosts (on one host the generic
     * layer picks hsshm); kept complete for callers that open this backend directly. Its
     * registry name, "fabric", means the same. */
    if (!name || !*name || !strcmp(name, "auto") || !strcmp(name, "fabric"))
        return all_local && shm_trusted() ? "shm" : "tcp;ofi_rxm";
    if (!strcmp(name, "tcp")) return "tcp;ofi_rxm";
    if (!strcmp(name, "verbs")) return "verbs;ofi_rxm";
    if (!strcmp(name, "udp")) return "udp;ofi_rxd";
    return name;
}

static int get_info(fab_t *f, const char *prov, struct fi_info **out)
{
    struct fi_info *hints = fi_allocinfo();
    if (!hints) return HS_ERR(-ENOMEM, "fi_allocinfo: out of memory");
    hints->ep_attr->type = FI_EP_RDM;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    hints->fabric_attr->prov_name = strdup(prov);
    /* Most wanted first: atomics and send-after-send order, then less. */
    static const uint64_t caps[] = {FI_TAGGED | FI_RMA | FI_ATOMIC, FI_TAGGED | FI_RMA, FI_TAGGED};
    int ret = -FI_ENODATA;
    for (size_t i = 0; i < HS_ARRAY_LEN(caps) * 2 && ret; i++) {
        hints->caps = caps[i / 2];
        hints->tx_attr->msg_order = (i % 2 == 0) ? FI_ORDER_SAS : 0;
        hints->rx_attr->msg_order = hints->tx_attr->msg_order;
        ret = fi_getinfo(FI_VERSION(1, 11), NULL, NULL, 0, hints, out);
    }
    fi_freeinfo(hints);
    if (ret) {
        hs_fab_err(f, ret, "fi_getinfo", -1, "");
        hs_error_prefix("no libfabric provider '%s' with reliable tagged endpoints (FI_EP_RDM, "
                        "FI_TAGGED) on this machine (see fi_info -l)",
                        prov);
        return ret < 0 && ret > -256 ? ret : -ENODEV;
    }
    return 0;
}

/* 1 when name has only the characters of libfabric provider names (tcp;ofi_rxm, verbs, ...):
 * the names the registry hands this backend. */
static int fab_claims(const char *name)
{
    for (const char *c = name; *c; c++)
        if (!(*c >= 'a' && *c <= 'z') && !(*c >= '0' && *c <= '9') && *c != '_' && *c != ';')
            return 0;
    return *name != '\0';
}

int hs_fab_provider_check(const char *name)
{
    struct fi_info *info = NULL;
    const char *prov = map_provider(name, 0);
    int rc = get_info(NULL, prov, &info);
    if (info) fi_freeinfo(info);
    if (rc < 0)
        rc = HS_ERR(rc,
                    "no libfabric provider '%s' with reliable tagged endpoints (FI_EP_RDM, "
                    "FI_TAGGED) on this machine (fi_info -l lists them)",
                    prov);
    return rc;
}

/* libfabric's ofi_rxm over tcp sends a message above FI_OFI_RXM_EAGER_LIMIT (16 KiB by
 * default) by rendezvous: the sender announces it, the receiver fetches it with an RMA read.
 * Two ranks sending each other megabytes at once then took turns: the hierarchical
 * all-reduce's 2-rank ring across 2 emulated hosts at 1 Gbit completed a rank's receives of a
 * step while its sends waited, then the sends while nothing arrived (as if each read request
 * waited behind the data going the other way on the same connection): ~540 ms for the 42 MB a
 * host sends, against 310-360 ms with eager sends (docs/benchmarks.md). Every message this
 * transport posts is at most one chunk (opts.chunk_bytes, 1 MiB by default), so an eager
 * limit of a chunk sends them all eagerly, into the posted receive where there is one (tcp's
 * dynamic receive buffers), both directions at once: 0.41-0.42 s against 0.76 s per 42 MB
 * all-reduce of 2 ranks on 2 emulated hosts at 1 Gbit with --provider tcp. An eager send
 * completes once buffered, not delivered, so the close flushes (hs_fab_flush). A value the
 * user set is kept. libfabric reads it when the provider is first set up, so it is set before
 * the endpoint is opened. Used by this backend and by the hybrid one (gossip/hybrid.c). */
void hs_fab_rxm_eager_default(const char *provider, size_t chunk_bytes)
{
    if (strcmp(provider, "tcp") && strcmp(provider, "tcp;ofi_rxm")) return;
    char v[32];
    snprintf(v, sizeof v, "%zu", chunk_bytes ? chunk_bytes : (size_t)1 << 20);
    setenv("FI_OFI_RXM_EAGER_LIMIT", v, 0);
}

static int fab_create(hs_transport_t *t, const hs_transport_opts_t *o, int all_local)
{
    if (t->size > HS_FAB_MAX_RANKS)
        return HS_ERR(-EINVAL, "libfabric transport: %d ranks, at most %d supported", t->size,
                      HS_FAB_MAX_RANKS);
    fab_t *f = hs_calloc(1, sizeof *f, "libfabric transport");
    if (!f) return -ENOMEM;
    t->impl = f;
    f->t = t;
    f->wait_fd = -1;
    f->wake_fd = -1;
    f->pend.next = f->pend.prev = &f->pend;
    f->live.next_live = f->live.prev_live = &f->live;
    f->chunk = o->chunk_bytes ? o->chunk_bytes : (size_t)1 << 20;
    f->next_key = 1;
    {
        long v = 0;
        HS_TRY(hs_env_long("HS_FAB_TX_INFLIGHT", &v)); /* 0 (no cap) when unset */
        f->tx_max = (int)v;
    }
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->cond, NULL);
    f->retry_backoff = 100e-6;
    if (!(f->blocked_pass = hs_calloc((size_t)t->size, sizeof *f->blocked_pass, "send queue")))
        return -ENOMEM;
    f->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (f->wake_fd < 0)
        return HS_ERR(-errno, "libfabric transport: eventfd failed: %s", strerror(errno));
    int ret = hs_shape_parse(o->shaping, &f->shape);
    if (ret < 0) return ret;

    const char *prov = map_provider(o->provider, all_local);
    if (!strcmp(prov, "shm") && !shm_trusted() && !hs_env_flag("HS_SHM_QUIET"))
        HS_WARN("rank %d: the shm provider of libfabric %u.%u loses messages that arrive before "
                "their receive is posted (fixed in 1.19); prefer --provider hsshm (or auto) on one "
                "host, tcp across hosts",
                t->rank, FI_MAJOR(fi_version()), FI_MINOR(fi_version()));
    snprintf(f->prov, sizeof f->prov, "%s", prov);
    /* shm keeps libfabric's default large-message path (CMA): with ranks on busy or
     * oversubscribed cores, CMA off (FI_SHM_DISABLE_CMA=1) measured 15-40x slower here,
     * since both processes must run for each bounce-buffer hop (docs/benchmarks.md). The tcp
     * provider ignores the domain hint, so a single-host job is pinned to loopback. Never
     * override what the user set. */
    if (all_local && !strncmp(prov, "tcp", 3)) setenv("FI_TCP_IFACE", "lo", 0);
    hs_fab_rxm_eager_default(prov, f->chunk);

    HS_TRY(get_info(f, prov, &f->info));
    snprintf(f->prov, sizeof f->prov, "%s", f->info->fabric_attr->prov_name);
    f->mr_virt = !!(f->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR);
    f->mr_prov_key = !!(f->info->domain_attr->mr_mode & FI_MR_PROV_KEY);
    f->use_cq_data = f->info->domain_attr->cq_data_size >= 8 && !(f->info->mode & FI_RX_CQ_DATA);

    ret = fi_fabric(f->info->fabric_attr, &f->fabric, NULL);
    if (ret) return hs_fab_err(f, ret, "fi_fabric", -1, NULL);
    ret = fi_domain(f->fabric, f->info, &f->domain, NULL);
    if (ret) return hs_fab_err(f, ret, "fi_domain", -1, NULL);

    struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_FD};
    ret = fi_cq_open(f->domain, &cqa, &f->cq, NULL);
    if (ret) {
        cqa.wait_obj = FI_WAIT_NONE;
        ret = fi_cq_open(f->domain, &cqa, &f->cq, NULL);
        if (ret) return hs_fab_err(f, ret, "fi_cq_open", -1, NULL);
    } else if (fi_control(&f->cq->fid, FI_GETWAIT, &f->wait_fd) != 0) {
        f->wait_fd = -1;
    }
    struct fi_av_attr ava = {.type = FI_AV_TABLE, .count = (size_t)t->size};
    ret = fi_av_open(f->domain, &ava, &f->av, NULL);
    if (ret) return hs_fab_err(f, ret, "fi_av_open", -1, NULL);
    ret = fi_endpoint(f->domain, f->info, &f->ep, NULL);
    if (ret) return hs_fab_err(f, ret, "fi_endpoint", -1, NULL);
    ret = fi_ep_bind(f->ep, &f->av->fid, 0);
    if (ret) return hs_fab_err(f, ret, "fi_ep_bind", -1, "(address vector)");
    ret = fi_ep_bind(f->ep, &f->cq->fid, FI_TRANSMIT | FI_RECV);
    if (ret) return hs_fab_err(f, ret, "fi_ep_bind", -1, "(completion queue)");
    if (!strcmp(f->prov, "shm")) {
        /* shm names its region after the pid by default, and a region left behind by a
         * killed rank makes fi_enable fail with EBUSY for a new process that reuses the pid:
         * name it uniquely instead. */
        char name[64];
        snprintf(name, sizeof name, "hearsay-%u-%d-%08lx", (unsigned)getpid(), t->rank,
                 (unsigned long)((uint64_t)(hs_now() * 1e9) & 0xFFFFFFFFul));
        ret = fi_setname(&f->ep->fid, name, strlen(name) + 1);
        if (ret) return hs_fab_err(f, ret, "fi_setname", -1, "(shm endpoint name)");
    }
    ret = fi_enable(f->ep);
    if (ret) return hs_fab_err(f, ret, "fi_enable", -1, NULL);
    if (f->info->caps & FI_ATOMIC) hs_fab_query_atomics(f);

    size_t n = (size_t)t->size;
    f->addrs = hs_calloc(n, sizeof *f->addrs, "fabric addresses");
    f->peers = hs_calloc(n, sizeof *f->peers, "peer address blobs");
    f->seq_to = hs_calloc(n, sizeof *f->seq_to, "sequence counters");
    f->last_alive = hs_calloc(n, sizeof *f->last_alive, "liveness times");
    if (!f->addrs || !f->peers || !f->seq_to || !f->last_alive) return -ENOMEM;
    HS_DEBUG("rank %d: libfabric provider %s, CQ wait fd %d, chunk %zu bytes", t->rank, f->prov,
             f->wait_fd, f->chunk);
    return 0;
}

static int fab_address(hs_transport_t *t, void *buf, size_t *len)
{
    fab_t *f = t->impl;
    hs_fab_addr_v1_t a;
    memset(&a, 0, sizeof a);
    a.magic = HS_FAB_ADDR_MAGIC;
    a.version = HS_FAB_WIRE_VERSION;
    a.rank = (uint32_t)t->rank;
    a.pid = (uint32_t)getpid();
    struct stat ns;
    if (stat("/proc/self/ns/pid", &ns) == 0) a.pidns = (uint64_t)ns.st_ino;
    gethostname(a.host, sizeof a.host - 1);
    snprintf(a.prov, sizeof a.prov, "%s", f->prov);
    size_t nl = sizeof a.epname;
    int ret = fi_getname(&f->ep->fid, a.epname, &nl);
    if (ret) return hs_fab_err(f, ret, "fi_getname", -1, NULL);
    a.epname_len = (uint32_t)nl;
    memcpy(buf, &a, sizeof a);
    *len = sizeof a;
    return 0;
}

static int fab_connect(hs_transport_t *t, const void *all, size_t stride)
{
    fab_t *f = t->impl;
    if (stride < sizeof(hs_fab_addr_v1_t))
        return HS_ERR(-EINVAL, "transport connect: address stride %zu < blob size %zu", stride,
                      sizeof(hs_fab_addr_v1_t));
    for (int r = 0; r < t->size; r++) {
        hs_fab_addr_v1_t *a = &f->peers[r];
        memcpy(a, (const char *)all + (size_t)r * stride, sizeof *a);
        if (a->magic != HS_FAB_ADDR_MAGIC || a->version != HS_FAB_WIRE_VERSION)
            return HS_ERR(-EPROTO,
                          "rank %d: the address of rank %d is not a hearsay v%u address "
                          "(magic %08x version %u): mixed builds or a corrupt exchange",
                          t->rank, r, HS_FAB_WIRE_VERSION, a->magic, a->version);
        if ((int)a->rank != r)
            return HS_ERR(-EPROTO, "rank %d: address slot %d holds rank %u's address", t->rank, r,
                          a->rank);
        if (a->epname_len == 0 || a->epname_len > HS_FAB_EPNAME_MAX)
            return HS_ERR(-EPROTO,
                          "rank %d: the address of rank %d has an endpoint name of %u bytes "
                          "(1..%d): a corrupt exchange",
                          t->rank, r, a->epname_len, HS_FAB_EPNAME_MAX);
        a->host[sizeof a->host - 1] = '\0';
        a->prov[sizeof a->prov - 1] = '\0';
        if (strcmp(a->prov, f->prov))
            return HS_ERR(-EPROTO,
                          "rank %d uses libfabric provider '%s' but rank %d uses '%s': every "
                          "rank must use the same provider (--provider)",
                          t->rank, f->prov, r, a->prov);
        int ret = fi_av_insert(f->av, a->epname, 1, &f->addrs[r], 0, NULL);
        if (ret != 1) return hs_fab_err(f, ret < 0 ? ret : -FI_EINVAL, "fi_av_insert", r, NULL);
    }
    const char **hl = hs_calloc((size_t)t->size, sizeof *hl, "host list");
    if (!hl) return -ENOMEM;
    for (int r = 0; r < t->size; r++) hl[r] = f->peers[r].host;
    int ret = hs_shaper_create(f->shape, t->rank, t->size, hl, t->opts.seed, &f->shaper);
    free(hl);
    if (ret < 0) return ret;
    f->connected = 1;
    HS_TRY(hs_fab_fin_start(f));
    if (t->opts.progress_thread) HS_TRY(hs_fab_start_thread(f));
    return 0;
}

#define CLOSE_FID(p)                                                                               \
    do {                                                                                           \
        if (p) fi_close(&(p)->fid);                                                                \
        (p) = NULL;                                                                                \
    } while (0)

static void fab_close(hs_transport_t *t)
{
    fab_t *f = t->impl;
    if (!f) return;
    /* An eager send completed once buffered: wait (bounded) until the peers have it before
     * the endpoint, and with it what the provider still holds, goes away. */
    if (f->connected && f->fin_rx) {
        double limit = HS_MIN(t->opts.timeout_s > 0 ? t->opts.timeout_s : 10.0, 10.0);
        int late = hs_fab_flush(f, limit);
        if (late > 0)
            HS_WARN("rank %d: closing the transport: %d rank%s did not confirm the arrival of "
                    "this rank's last messages within %.0f s (still busy, or gone: those "
                    "messages may be lost)",
                    t->rank, late, late > 1 ? "s" : "", limit);
    }
    hs_fab_stop_thread(f);
    if (f->wake_fd >= 0) close(f->wake_fd);
    f->wake_fd = -1;
    HS_FREE(f->blocked_pass);
    HS_FREE(f->sent_to);
    HS_FREE(f->fin_from);
    CLOSE_FID(f->ep);
    CLOSE_FID(f->av);
    CLOSE_FID(f->cq);
    CLOSE_FID(f->domain);
    CLOSE_FID(f->fabric);
    while (f->live.next_live != &f->live) {
        hs_treq_t *r = f->live.next_live;
        r->outstanding = 0;
        r->orphan = 0;
        hs_fab_req_release_locked(f, r);
    }
    if (f->info) fi_freeinfo(f->info);
    hs_shaper_free(&f->shaper);
    hs_shape_free(&f->shape);
    free(f->addrs);
    free(f->peers);
    free(f->seq_to);
    free(f->last_alive);
    pthread_mutex_destroy(&f->lock);
    pthread_cond_destroy(&f->cond);
    free(f);
    t->impl = NULL;
}

static const char *fab_provider(const hs_transport_t *t)
{
    const fab_t *f = t->impl;
    return f ? f->prov : "none";
}

static int fab_shaped(const hs_transport_t *t, int peer)
{
    const fab_t *f = t->impl;
    for (int p = peer < 0 ? 0 : peer; p < (peer < 0 ? t->size : peer + 1); p++)
        if (p != t->rank && hs_shaper_active(f->shaper, p)) return 1;
    return 0;
}

/* What this provider offers of the backend's claims (hs_fab_probe, hs_fab_win_create and
 * hs_fab_atomic_add refuse the rest). */
static uint32_t fab_caps_of(const hs_transport_t *t)
{
    const fab_t *f = t->impl;
    uint32_t c = ~0u;
    if (!f || !f->info) return c;
    if (!strcmp(f->prov, "shm")) c &= ~HS_TCAP_PROBE;
    if (!(f->info->caps & FI_RMA)) c &= ~(HS_TCAP_WINDOWS | HS_TCAP_ATOMIC_FLOAT);
    if (!(f->info->caps & FI_ATOMIC) || !f->atomic_ok[0]) c &= ~HS_TCAP_ATOMIC_FLOAT;
    return c;
}

const hs_transport_ops_t hs_fabric_ops = {
    .size = sizeof(hs_transport_ops_t),
    .name = "fabric",
    .create = fab_create,
    .address = fab_address,
    .connect = fab_connect,
    .close = fab_close,
    .isend = hs_fab_isend,
    .irecv = hs_fab_irecv,
    .test = hs_fab_test,
    .waitany = hs_fab_waitany,
    .progress = hs_fab_progress,
    .probe = hs_fab_probe,
    .req_free = hs_fab_req_free,
    .barrier = hs_fab_barrier,
    .win_create = hs_fab_win_create,
    .win_free = hs_fab_win_free,
    .put = hs_fab_put,
    .get = hs_fab_get,
    .atomic_add = hs_fab_atomic_add,
    .provider = fab_provider,
    .peer_gone = hs_fab_peer_gone,
    .shaped = fab_shaped,
    .caps = HS_TCAP_TAGGED | HS_TCAP_ANY_SOURCE | HS_TCAP_PROBE | HS_TCAP_LIVENESS |
            HS_TCAP_WINDOWS | HS_TCAP_ATOMIC_FLOAT | HS_TCAP_MEM_HOST,
    .caps_of = fab_caps_of,
};

const hs_transport_entry_t hs_fabric_entry = {
    .name = "fabric",
    .ops = &hs_fabric_ops,
    .takes = "fabric, tcp, shm, verbs, efa, ... (any libfabric provider)",
    .help = "libfabric for every pair (fabric: tcp, or shm on one host from 1.19)",
    .claims = fab_claims,
    .check = hs_fab_provider_check,
};
