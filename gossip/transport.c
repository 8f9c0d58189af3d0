/*
 * gossip/transport.c — the transport's generic layer: options and environment knobs,
 * opening (by hand or through the bootstrap: --provider names resolve through the registry,
 * gossip/transport_registry.c, and auto picks a name), argument checks, dispatch through the
 * ops table, blocking helpers. Backends never see an unchecked argument, and this file names
 * none of them.
 */
#include "hearsay/kernels.h"
#include "hearsay/transport.h"
#include "gossip/transport_impl.h"
#include "hearsay/bootstrap.h"
#include "hearsay/common.h"
#include "hearsay/env.h"
#include "hearsay/trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_TIMEOUT_S 60.0

#define HAS_OP HS_OP_HAS
#define NEED_OP(t, slot)                                                                           \
    do {                                                                                           \
        if (!HAS_OP(t, slot)) return hs_op_missing(t, #slot);                                      \
    } while (0)

int hs_transport_opts_default(hs_transport_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->provider = hs_env_str("HS_PROVIDER"); /* "auto" when unset */
    o->shaping = hs_env_str("HS_SHAPING");   /* NULL when unset */
    o->timeout_s = DEFAULT_TIMEOUT_S;
    long c;
    int rc = hs_env_long("HS_CHUNK_BYTES", &c);
    if (rc < 0) return rc;
    if (rc > 0) o->chunk_bytes = (size_t)c;
    HS_TRY(hs_env_bool("HS_PROGRESS_THREAD", &o->progress_thread));
    HS_TRY(hs_env_double("HS_TIMEOUT", &o->timeout_s));
    return 0;
}

/* --- auto across hosts: the best libfabric provider every rank has ----------------------- */

int hs_fab_auto_probe(const char *list, hs_fab_auto_rec_t *rec)
{
    memset(rec, 0, sizeof *rec);
    rec->magic = HS_FAB_AUTO_MAGIC;
    if (!list) list = hs_env_str("HS_FAB_AUTO");
    if (!list) list = "efa,verbs,tcp";
    const char *p = list;
    for (;;) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= HS_FAB_AUTO_NAME)
            return HS_ERR(-EINVAL,
                          "HS_FAB_AUTO '%s': expected a comma-separated list of libfabric "
                          "providers such as efa,verbs,tcp (an entry is empty or longer than "
                          "%d characters)",
                          list, HS_FAB_AUTO_NAME - 1);
        if (rec->count == HS_FAB_AUTO_MAX)
            return HS_ERR(-EINVAL, "HS_FAB_AUTO '%s': at most %d providers", list, HS_FAB_AUTO_MAX);
        char *name = rec->e[rec->count].name;
        memcpy(name, p, len);
        name[len] = '\0';
        /* the names of a backend with a check: libfabric's (the registry's fabric entry) */
        const hs_transport_entry_t *e = hs_transport_lookup(name);
        if (!strncmp(name, "hsshm", 5) || !strcmp(name, "auto") || (e && !e->check))
            return HS_ERR(-EINVAL,
                          "HS_FAB_AUTO '%s': '%s' is not a libfabric provider (the list names "
                          "the providers tried between hosts)",
                          list, name);
        if (!e) return HS_ERR(-EINVAL, "HS_FAB_AUTO '%s': '%s' is not a provider name", list, name);
        rec->e[rec->count].have = e->check(name) == 0;
        rec->count++;
        if (!p[len]) break;
        p += len + 1;
    }
    return 0;
}

int hs_fab_auto_choose(const hs_fab_auto_rec_t *recs, int n, char *out, size_t cap)
{
    for (int r = 0; r < n; r++)
        if (recs[r].magic != HS_FAB_AUTO_MAGIC || recs[r].count > HS_FAB_AUTO_MAX)
            return HS_ERR(-EPROTO,
                          "choosing the provider between hosts: rank %d sent no valid record "
                          "(its HS_FAB_AUTO is bad, or mixed builds)",
                          r);
    char why[HS_ERRMSG_MAX] = "";
    size_t used = 0;
    for (uint32_t i = 0; i < recs[0].count; i++) {
        char name[HS_FAB_AUTO_NAME];
        memcpy(name, recs[0].e[i].name, sizeof name);
        name[sizeof name - 1] = '\0';
        int lacking = -1;
        for (int r = 0; r < n && lacking < 0; r++) {
            int have = 0;
            for (uint32_t j = 0; j < recs[r].count && !have; j++)
                have = recs[r].e[j].have && !strncmp(recs[r].e[j].name, name, sizeof name);
            if (!have) lacking = r;
        }
        if (lacking < 0) {
            if (strlen(name) >= cap) return HS_ERR(-ENAMETOOLONG, "provider name '%s'", name);
            memcpy(out, name, strlen(name) + 1);
            return 0;
        }
        if (used < sizeof why)
            used += (size_t)snprintf(why + used, sizeof why - used, "%s%s (not on rank %d)",
                                     i ? ", " : "", name, lacking);
    }
    return HS_ERR(-ENODEV,
                  "no libfabric provider that every rank has among HS_FAB_AUTO's: %s; install "
                  "one (fi_info -l lists them) or name one with --provider",
                  recs[0].count ? why : "(empty list)");
}

/* host_of NULL: only all_local is known (auto picks hsshm or libfabric for every pair).
 * auto_inter: the libfabric provider auto takes across hosts (NULL: tcp). */
static int create_impl(hs_transport_t **out, int rank, int size, int all_local, const int *host_of,
                       const hs_transport_opts_t *opts, const char *auto_inter)
{
    *out = NULL;
    if (size < 1 || rank < 0 || rank >= size)
        return HS_ERR(-EINVAL, "transport: rank %d is out of range for %d ranks", rank, size);
    hs_transport_opts_t o;
    if (opts)
        o = *opts;
    else
        HS_TRY(hs_transport_opts_default(&o));
    if (!o.provider) o.provider = "auto";
    if (!(o.timeout_s > 0)) o.timeout_s = DEFAULT_TIMEOUT_S;
    if (o.chunk_bytes && o.chunk_bytes < 4096)
        return HS_ERR(-EINVAL, "transport: chunk size %zu bytes is below the 4096-byte minimum",
                      o.chunk_bytes);
    /* auto resolves to a registered name: hsshm when every rank shares this host (libfabric
     * 1.17's shm loses early messages; see docs/transport.md), per pair (hsshm+P: hsshm within
     * a host, libfabric P across) when the job spans hosts and some host holds several ranks,
     * else libfabric for every pair (P, or the fabric backend's own default). */
    char pick[HS_FAB_AUTO_NAME + 8];
    const char *name = o.provider;
    int nhosts = 1, crowded = 0;
    if (host_of) {
        nhosts = 0;
        for (int r = 0; r < size; r++) {
            int first = 1;
            for (int q = 0; q < r && first; q++)
                if (host_of[q] == host_of[r]) first = 0, crowded = 1;
            nhosts += first;
        }
        all_local = nhosts == 1;
    }
    if (!strcmp(name, "auto")) {
        if (nhosts > 1 && crowded) {
            snprintf(pick, sizeof pick, "hsshm+%s", auto_inter ? auto_inter : "tcp");
            name = pick;
        } else if (nhosts > 1 && auto_inter) {
            name = o.provider = auto_inter; /* one rank per host: libfabric for every pair */
        } else {
            name = all_local ? "hsshm" : "fabric"; /* fabric takes provider "auto" as its own */
        }
    }
    const hs_transport_entry_t *e = hs_transport_lookup(name);
    if (!e)
        return HS_ERR(-EINVAL, "transport: no registered transport takes provider '%s' (%s)", name,
                      hs_transport_names());
    if (o.incarnation > 0 && (e->parts || strcmp(e->name, "hsshm")))
        return HS_ERR(-ENOTSUP,
                      "transport: rank %d's replacement (incarnation %d) can join a running job "
                      "over hsshm only (every rank on one host): provider '%s' cannot take a new "
                      "process for a rank (docs/failure-model.md)",
                      rank, o.incarnation, name);
    hs_transport_t *t = NULL;
    int rc;
    if (e->parts) { /* built of two registered backends, one per kind of pair */
        char local[HS_FAB_AUTO_NAME], remote[HS_FAB_AUTO_NAME];
        HS_TRY(e->parts(name, local, remote, sizeof local));
        if (!host_of)
            return HS_ERR(-EINVAL,
                          "transport: provider '%s' (%s within a host, %s across hosts) needs the "
                          "host of every rank: open with hs_transport_open or "
                          "hs_transport_create_hosts",
                          name, local, remote);
        const hs_transport_entry_t *le = hs_transport_lookup(local);
        const hs_transport_entry_t *re = hs_transport_lookup(remote);
        if (!le || !re || le->parts || re->parts)
            return HS_ERR(-EINVAL,
                          "transport: provider '%s': '%s' is not a registered backend (%s)", name,
                          !le || le->parts ? local : remote, hs_transport_names());
        rc = hs_transport_ctx_new(&t, e->ops, rank, size, &o);
        if (rc == 0) rc = e->create_hosts(t, &o, host_of, le, re, remote);
        if (rc < 0) hs_transport_ctx_close(&t);
    } else {
        rc = hs_transport_ctx_create(&t, e->ops, rank, size, all_local, &o);
    }
    HS_TRY(rc);
    *out = t;
    return 0;
}

int hs_transport_create(hs_transport_t **out, int rank, int size, int all_local,
                        const hs_transport_opts_t *opts)
{
    return create_impl(out, rank, size, all_local, NULL, opts, NULL);
}

int hs_transport_create_hosts(hs_transport_t **out, int rank, int size, const int *host_of,
                              const hs_transport_opts_t *opts)
{
    *out = NULL;
    if (!host_of) return HS_ERR(-EINVAL, "transport: no host table");
    return create_impl(out, rank, size, 0, host_of, opts, NULL);
}

const char *hs_transport_pair_provider(const hs_transport_t *t, int same_host)
{
    if (HAS_OP(t, pair_provider)) return t->ops->pair_provider(t, same_host);
    return hs_transport_provider(t);
}

/* Append the registered names to the error of a failed check. */
static int with_names(int rc)
{
    char why[HS_ERRMSG_MAX];
    snprintf(why, sizeof why, "%s", hs_last_error());
    return HS_ERR(rc, "%s (the registered transports take %s)", why, hs_transport_names());
}

int hs_transport_check_provider(const char *name)
{
    if (!name || !*name || !strcmp(name, "auto")) return 0;
    const hs_transport_entry_t *e = hs_transport_lookup(name);
    if (!e)
        return HS_ERR(-EINVAL, "'%s' is not a provider name: the registered transports take %s",
                      name, hs_transport_names());
    if (e->parts) {
        char part[2][HS_FAB_AUTO_NAME];
        HS_TRY(e->parts(name, part[0], part[1], sizeof part[0]));
        for (int i = 0; i < 2; i++) {
            const hs_transport_entry_t *pe = hs_transport_lookup(part[i]);
            if (!pe || pe->parts)
                return HS_ERR(-EINVAL, "provider '%s': '%s' is not a registered backend (%s)", name,
                              part[i], hs_transport_names());
            int rc = pe->check ? pe->check(part[i]) : 0;
            if (rc < 0) return with_names(rc);
        }
        return 0;
    }
    int rc = e->check ? e->check(name) : 0;
    return rc < 0 ? with_names(rc) : 0;
}

int hs_transport_address(hs_transport_t *t, void *buf, size_t *len)
{
    NEED_OP(t, address);
    return t->ops->address(t, buf, len);
}

int hs_transport_connect(hs_transport_t *t, const void *all, size_t stride)
{
    NEED_OP(t, connect);
    return t->ops->connect(t, all, stride);
}

int hs_transport_open(hs_transport_t **out, struct hs_boot *boot, const hs_transport_opts_t *opts)
{
    *out = NULL;
    hs_transport_t *t = NULL;
    int rank = hs_boot_rank(boot), size = hs_boot_size(boot);
    int *host_of = hs_calloc((size_t)size, sizeof *host_of, "host table");
    if (!host_of) return -ENOMEM;
    for (int r = 0; r < size; r++) host_of[r] = hs_boot_host_of(boot, r);
    /* auto across hosts: every rank probes HS_FAB_AUTO's providers and all take the first
     * that every rank has (a collective: every rank of a job sees the same hosts). */
    const char *prov = opts && opts->provider ? opts->provider : hs_env_str("HS_PROVIDER");
    char inter[HS_FAB_AUTO_NAME] = "";
    int crc = 0;
    if ((!prov || !strcmp(prov, "auto")) && !hs_boot_all_local(boot)) {
        hs_fab_auto_rec_t mine, *recs = hs_calloc((size_t)size, sizeof *recs, "provider choice");
        crc = recs ? hs_fab_auto_probe(NULL, &mine) : -ENOMEM;
        if (recs) {
            /* A rank whose list is bad still takes part, with a record the others refuse at
             * once (rather than waiting for it until the bootstrap's timeout). */
            if (crc < 0) {
                mine.magic = 0;
                /* said now: the others stop as soon as they see the refused record, and a
                 * launcher ends the job at the first failure, which may be before this
                 * rank's own error reaches its main (test_auto_provider.sh saw that) */
                hs_log(HS_LOG_ERROR, "rank %d: %s", rank, hs_last_error());
            }
            int grc = hs_boot_allgather(boot, &mine, sizeof mine, recs);
            if (crc == 0) crc = grc;
        }
        if (crc == 0) crc = hs_fab_auto_choose(recs, size, inter, sizeof inter);
        if (crc == 0)
            HS_DEBUG("rank %d: auto takes libfabric provider %s across hosts", rank, inter);
        free(recs);
    }
    if (crc == 0)
        crc = create_impl(&t, rank, size, hs_boot_all_local(boot), host_of, opts,
                          inter[0] ? inter : NULL);
    free(host_of);
    if (crc < 0) hs_error_prefix("opening the transport (rank %d of %d)", rank, size);
    HS_TRY(crc);
    char *all = hs_calloc((size_t)size, HS_TRANSPORT_ADDR_MAX, "address exchange");
    char mine[HS_TRANSPORT_ADDR_MAX];
    memset(mine, 0, sizeof mine);
    size_t len = 0;
    int rc = all ? hs_transport_address(t, mine, &len) : -ENOMEM;
    if (rc == 0) rc = hs_boot_allgather(boot, mine, HS_TRANSPORT_ADDR_MAX, all);
    if (rc == 0) rc = hs_transport_connect(t, all, HS_TRANSPORT_ADDR_MAX);
    free(all);
    if (rc == 0) {
        /* Every rank has inserted every address before anyone sends. */
        rc = hs_boot_barrier(boot);
    }
    if (rc < 0) {
        hs_error_prefix("opening the transport (rank %d of %d)", rank, size);
        hs_transport_close(&t);
        return rc;
    }
    *out = t;
    return 0;
}

void hs_transport_close(hs_transport_t **t)
{
    hs_transport_ctx_close(t);
}

int hs_transport_rank(const hs_transport_t *t)
{
    return t->rank;
}

int hs_transport_size(const hs_transport_t *t)
{
    return t->size;
}

int hs_transport_peer_read_ok(const hs_transport_t *t)
{
    return HAS_OP(t, peer_read_ok) && HAS_OP(t, peer_read) && t->ops->peer_read_ok(t);
}

int hs_transport_has_peer_read(const hs_transport_t *t)
{
    return HAS_OP(t, peer_read);
}

int hs_transport_shaped(const hs_transport_t *t, int peer)
{
    if (!t || peer >= t->size || !HAS_OP(t, shaped)) return 0;
    return t->ops->shaped(t, peer < 0 ? -1 : peer) == 1;
}

int hs_transport_peer_read(hs_transport_t *t, int peer, uint64_t remote, void *local, size_t len)
{
    NEED_OP(t, peer_read);
    if (peer < 0 || peer >= t->size)
        return HS_ERR(-EINVAL, "peer_read: rank %d is out of range for %d ranks", peer, t->size);
    if (!local && len) return HS_ERR(-EINVAL, "peer_read: NULL buffer");
    return t->ops->peer_read(t, peer, remote, local, len);
}

const char *hs_transport_provider(const hs_transport_t *t)
{
    return HAS_OP(t, provider) ? t->ops->provider(t) : t->ops->name;
}

static int check_peer(const hs_transport_t *t, int peer, int any_ok, const char *what)
{
    if ((any_ok && peer == HS_ANY_SOURCE) || (peer >= 0 && peer < t->size)) return 0;
    return HS_ERR(-EINVAL, "rank %d: %s: peer %d is not a rank of this %d-rank job", t->rank, what,
                  peer, t->size);
}

static int check_tag(const hs_transport_t *t, uint32_t tag, const char *what)
{
    if (tag <= HS_TAG_MAX) return 0;
    return HS_ERR(-EINVAL, "rank %d: %s: tag %u is above HS_TAG_MAX (%u)", t->rank, what, tag,
                  HS_TAG_MAX);
}

int hs_transport_unsent(hs_transport_t *t, int peer, uint32_t tag, hs_transport_msg_fn cb,
                        void *ctx)
{
    HS_TRY(check_peer(t, peer, 0, "unsent"));
    HS_TRY(check_tag(t, tag, "unsent"));
    if (!cb) return HS_ERR(-EINVAL, "unsent: no callback");
    if (peer == t->rank) return 0;
    NEED_OP(t, unsent);
    return t->ops->unsent(t, peer, tag, cb, ctx);
}

int hs_transport_peer_gone(hs_transport_t *t, int peer)
{
    HS_TRY(check_peer(t, peer, 0, "peer_gone"));
    if (peer == t->rank) return 0;
    NEED_OP(t, peer_gone);
    return t->ops->peer_gone(t, peer);
}

int hs_transport_revoke(hs_transport_t *t, int peer, uint32_t tag, hs_transport_msg_fn cb,
                        void *ctx)
{
    HS_TRY(check_peer(t, peer, 0, "revoke"));
    HS_TRY(check_tag(t, tag, "revoke"));
    if (!cb) return HS_ERR(-EINVAL, "revoke: no callback");
    if (peer == t->rank) return 0;
    NEED_OP(t, revoke);
    return t->ops->revoke(t, peer, tag, cb, ctx);
}

int hs_transport_leave(hs_transport_t *t, uint32_t tag, hs_transport_msg_fn cb, void *ctx)
{
    HS_TRY(check_tag(t, tag, "leave"));
    if (!cb) return HS_ERR(-EINVAL, "leave: no callback");
    NEED_OP(t, leave);
    return t->ops->leave(t, tag, cb, ctx);
}

/* Device memory given to a call that takes host memory: where a GPU's would fault (or be
 * read as garbage by a provider without FI_HMEM), the emulated device's is refused, naming the
 * calls that take it. Costs one atomic load when no emulated device memory exists. */
static int device_refused(const hs_transport_t *t, const char *op, int peer, const void *buf)
{
    return HS_ERR(-EFAULT,
                  "rank %d: %s rank %d: the buffer %p is device memory (the emulated device's), "
                  "and these calls take host memory: register it (hs_transport_mr_reg) and use "
                  "hs_transport_send_mr / hs_transport_recv_mr",
                  t->rank, op, peer, buf);
}

int hs_transport_isend(hs_transport_t *t, int peer, uint32_t tag, const void *buf, size_t len,
                       hs_treq_t **req)
{
    HS_TRY(check_peer(t, peer, 0, "isend"));
    HS_TRY(check_tag(t, tag, "isend"));
    if (!buf && len) return HS_ERR(-EINVAL, "isend: NULL buffer of %zu bytes", len);
    if (len && hs_kernels_emu_is_device(buf)) return device_refused(t, "isend to", peer, buf);
    NEED_OP(t, isend);
    hs_trace_thr_t *tth = hs_trace_self(); /* --trace: a "send" span, where a flow starts */
    if (__builtin_expect(tth == NULL, 1)) return t->ops->isend(t, peer, tag, buf, len, req);
    hs_trace_thr_ev(tth, 'B', HS_TR_SEND, peer, hs_trace_flow_id(t->rank, peer, tag, buf, len),
                    (int64_t)len);
    int rc = t->ops->isend(t, peer, tag, buf, len, req);
    hs_trace_thr_ev(tth, 'E', HS_TR_SEND, -1, 0, 0);
    return rc;
}

int hs_transport_irecv(hs_transport_t *t, int peer, uint32_t tag, void *buf, size_t cap,
                       hs_treq_t **req)
{
    HS_TRY(check_peer(t, peer, 1, "irecv"));
    HS_TRY(check_tag(t, tag, "irecv"));
    if (!buf && cap) return HS_ERR(-EINVAL, "irecv: NULL buffer of %zu bytes", cap);
    if (cap && hs_kernels_emu_is_device(buf)) return device_refused(t, "irecv from", peer, buf);
    NEED_OP(t, irecv);
    return t->ops->irecv(t, peer, tag, buf, cap, req);
}

int hs_transport_test(hs_transport_t *t, hs_treq_t **req, int *done, hs_tstatus_t *st)
{
    if (!req || !*req) return HS_ERR(-EINVAL, "transport test: no request");
    NEED_OP(t, test);
    return t->ops->test(t, req, done, st);
}

int hs_transport_waitany(hs_transport_t *t, hs_treq_t **reqs, int n, double timeout_s, int *index,
                         hs_tstatus_t *st)
{
    NEED_OP(t, waitany);
    if (timeout_s < 0) timeout_s = t->opts.timeout_s;
    return t->ops->waitany(t, reqs, n, timeout_s, index, st);
}

int hs_transport_wait(hs_transport_t *t, hs_treq_t **req, double timeout_s, hs_tstatus_t *st)
{
    if (!req || !*req) return HS_ERR(-EINVAL, "transport wait: no request");
    int idx;
    if (timeout_s <= 0) timeout_s = t->opts.timeout_s;
    return hs_transport_waitany(t, req, 1, timeout_s, &idx, st);
}

int hs_transport_progress(hs_transport_t *t)
{
    NEED_OP(t, progress);
    return t->ops->progress(t);
}

int hs_transport_probe(hs_transport_t *t, int peer, uint32_t tag, int any_tag, int *found,
                       hs_tstatus_t *st)
{
    HS_TRY(check_peer(t, peer, 1, "probe"));
    if (!any_tag) HS_TRY(check_tag(t, tag, "probe"));
    NEED_OP(t, probe);
    return t->ops->probe(t, peer, tag, any_tag, found, st);
}

void hs_transport_req_free(hs_transport_t *t, hs_treq_t **req)
{
    if (!req || !*req) return;
    if (HAS_OP(t, req_free)) t->ops->req_free(t, req);
    *req = NULL;
}

int hs_transport_send(hs_transport_t *t, int peer, uint32_t tag, const void *buf, size_t len)
{
    hs_treq_t *r = NULL;
    HS_TRY(hs_transport_isend(t, peer, tag, buf, len, &r));
    int rc = hs_transport_wait(t, &r, -1, NULL);
    if (r) hs_transport_req_free(t, &r);
    return rc;
}

int hs_transport_recv(hs_transport_t *t, int peer, uint32_t tag, void *buf, size_t cap,
                      hs_tstatus_t *st)
{
    hs_treq_t *r = NULL;
    HS_TRY(hs_transport_irecv(t, peer, tag, buf, cap, &r));
    int rc = hs_transport_wait(t, &r, -1, st);
    if (r) hs_transport_req_free(t, &r);
    return rc;
}

int hs_transport_barrier(hs_transport_t *t)
{
    NEED_OP(t, barrier);
    return t->ops->barrier(t);
}

int hs_transport_win_create(hs_transport_t *t, void *buf, size_t len, hs_twin_t **win)
{
    if (!buf && len) return HS_ERR(-EINVAL, "window: NULL buffer of %zu bytes", len);
    NEED_OP(t, win_create);
    return t->ops->win_create(t, buf, len, win);
}

void hs_transport_win_free(hs_transport_t *t, hs_twin_t **win)
{
    if (!win || !*win) return;
    if (HAS_OP(t, win_free)) t->ops->win_free(t, win);
    *win = NULL;
}

int hs_transport_put(hs_transport_t *t, hs_twin_t *w, int target, size_t offset, const void *buf,
                     size_t len, hs_treq_t **req)
{
    HS_TRY(check_peer(t, target, 0, "put"));
    NEED_OP(t, put);
    return t->ops->put(t, w, target, offset, buf, len, req);
}

int hs_transport_get(hs_transport_t *t, hs_twin_t *w, int target, size_t offset, void *buf,
                     size_t len, hs_treq_t **req)
{
    HS_TRY(check_peer(t, target, 0, "get"));
    NEED_OP(t, get);
    return t->ops->get(t, w, target, offset, buf, len, req);
}

int hs_transport_atomic_add_float(hs_transport_t *t, hs_twin_t *w, int target, size_t offset,
                                  const float *buf, size_t n, hs_treq_t **req)
{
    HS_TRY(check_peer(t, target, 0, "atomic add"));
    NEED_OP(t, atomic_add);
    return t->ops->atomic_add(t, w, target, offset, buf, n, 4, req);
}

int hs_transport_atomic_add_double(hs_transport_t *t, hs_twin_t *w, int target, size_t offset,
                                   const double *buf, size_t n, hs_treq_t **req)
{
    HS_TRY(check_peer(t, target, 0, "atomic add"));
    NEED_OP(t, atomic_add);
    return t->ops->atomic_add(t, w, target, offset, buf, n, 8, req);
}
