/*
 * gossip/shm.c — "hsshm", Hearsay's own shared-memory transport backend for ranks that share
 * a host: set-up (the segment and its rings), addresses, connect (mapping the peers'
 * segments, checking direct reads), teardown and the ops table. Progress, doorbells and
 * liveness are in shm_progress.c, tagged messages in shm_msg.c, windows in shm_rma.c; the
 * private state in shm_impl.h.
 *
 * The layout is in gossip/shm_wire.h: each rank owns a segment with one inbound
 * single-producer single-consumer ring per sender; a send copies its chunks into the
 * receiver's ring (and is complete once the last one is there: an eager protocol, so a
 * receiver that is busy computing never stalls its senders until the ring is full); the
 * receiver copies them out into the posted receive, or into an unexpected-message buffer
 * when none is posted yet, so nothing that arrives early is ever lost.
 *
 * Why a backend of our own: libfabric 1.17's shm provider (Debian 12) loses messages that
 * arrive before their receive is posted, and its two-copy path without CMA crawls when
 * ranks outnumber cores. Here both copies overlap (sender and receiver copy different
 * chunks at once) and a waiting rank sleeps on a futex, never spinning.
 *
 * Waiting: every thread of a rank that blocks waits on the rank's own doorbell (a futex
 * word in its segment); see shm_wire.h for who rings it. Link shaping delays the chunks of a
 * shaped link until their release time, exactly as the libfabric backend does.
 * Windows: put and get copy straight between the processes (process_vm_writev / readv, one
 * copy); there are no remote atomics (-ENOSYS: the EASGD center then uses its service
 * thread).
 */
#include "gossip/shm_impl.h"
#include "hearsay/common.h"
#include "hearsay/env.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define DEFAULT_CHUNK (256u << 10) /* measured: 256 KiB chunks keep both copies in cache */
/* Messages from 1 MiB on go by address (one copy, by the receiver) when ranks outnumber
 * cores. Measured (docs/benchmarks.md): the eager path's two copies overlap on two cores and
 * stream 5.2 GB/s at 16 MiB where process_vm_readv copies 2.8-3.4 GB/s, but they cost more
 * CPU in all: 4 ranks on 2 cores ran a gossip exchange 11-15 % faster by address. */
#define DEFAULT_RDV    (1u << 20)
#define RING_MAX       (4u << 20)
#define RING_MIN       (256u << 10)
#define RING_BUDGET    (2ull << 30) /* all rings of all ranks together, at most */
#define SEG_HDR_BYTES  256u
#define RING_HDR_BYTES sizeof(hs_shm_ring_hdr_t)
_Static_assert(sizeof(hs_shm_seg_hdr_t) <= SEG_HDR_BYTES, "segment header");
_Static_assert(sizeof(hs_shm_ring_hdr_t) % HS_SHM_ALIGN == 0, "ring header");

static hs_shm_ring_hdr_t *ring_of(hs_shm_seg_hdr_t *seg, size_t ring_bytes, int sender)
{
    return (hs_shm_ring_hdr_t *)((char *)seg + SEG_HDR_BYTES +
                                 (size_t)sender * (RING_HDR_BYTES + ring_bytes));
}

static int shm_create(hs_transport_t *t, const hs_transport_opts_t *o, int all_local)
{
    if (!all_local && t->size > 1)
        return HS_ERR(-EINVAL,
                      "rank %d: provider hsshm (shared memory) needs every rank on one host; "
                      "these ranks span several hosts: use --provider tcp (or auto)",
                      t->rank);
    shm_t *s = hs_calloc(1, sizeof *s, "shared-memory transport");
    if (!s) return -ENOMEM;
    t->impl = s;
    s->t = t;
    pthread_mutex_init(&s->lock, NULL);
    s->seg_fd = -1;
    s->posted.next = s->posted.prev = &s->posted;
    s->uxq.next = s->uxq.prev = &s->uxq;
    s->doneq.next = s->doneq.prev = &s->doneq;
    s->held.hnext = s->held.hprev = &s->held;
    int n = t->size;
    uint64_t per = n > 1 ? RING_BUDGET / ((uint64_t)n * (uint64_t)(n - 1)) : RING_MAX;
    size_t ring = (size_t)HS_MIN((uint64_t)RING_MAX, HS_MAX((uint64_t)RING_MIN, per));
    long b;
    int rc = hs_env_long("HS_SHM_RING_BYTES", &b);
    if (rc < 0) return rc;
    if (rc > 0) ring = (size_t)b;
    s->ring_bytes = hs_shm_align_up(ring, HS_SHM_ALIGN);
    s->chunk = o->chunk_bytes ? o->chunk_bytes : DEFAULT_CHUNK;
    /* A record must fit in a quarter of the ring so that sender and receiver overlap. */
    s->chunk = HS_MIN(s->chunk, s->ring_bytes / 4 - HS_SHM_REC_HDR);
    s->chunk = s->chunk / HS_SHM_ALIGN * HS_SHM_ALIGN;
    s->peers = hs_calloc((size_t)n, sizeof *s->peers, "shared-memory peers");
    if (!s->peers) return -ENOMEM;
    for (int p = 0; p < n; p++) {
        peer_t *pe = &s->peers[p];
        pe->sendq.next = pe->sendq.prev = &pe->sendq;
        pe->rdvq.next = pe->rdvq.prev = &pe->rdvq;
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    s->rdv_bytes = cores > 0 && n > cores ? DEFAULT_RDV : 0;
    if ((rc = hs_env_long("HS_SHM_RDV_BYTES", &b)) < 0) return rc;
    if (rc > 0) s->rdv_bytes = (size_t)b;
    HS_TRY(hs_shape_parse(o->shaping, &s->shape));

    uint64_t rnd = ((uint64_t)getpid() << 32) ^ (uint64_t)(hs_now() * 1e9);
    int fd = -1;
    for (int attempt = 0; attempt < 8 && fd < 0; attempt++) {
        rnd = rnd * 6364136223846793005ull + 1442695040888963407ull;
        snprintf(s->name, sizeof s->name, "/hearsay-%u-%d-%08x", (unsigned)getpid(), t->rank,
                 (unsigned)(rnd >> 32));
        fd = shm_open(s->name, O_RDWR | O_CREAT | O_EXCL, 0600);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0)
        return HS_ERR(-errno, "rank %d: shm_open(%s) failed: %s (is /dev/shm mounted?)", t->rank,
                      s->name, strerror(errno));
    s->seg_bytes = SEG_HDR_BYTES + (size_t)n * (RING_HDR_BYTES + s->ring_bytes);
    if (ftruncate(fd, (off_t)s->seg_bytes) < 0) {
        int e = errno;
        close(fd);
        shm_unlink(s->name);
        return HS_ERR(-e, "rank %d: sizing shared-memory segment %s to %zu bytes: %s", t->rank,
                      s->name, s->seg_bytes, strerror(e));
    }
    void *m = mmap(NULL, s->seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    if (m == MAP_FAILED) {
        close(fd);
        shm_unlink(s->name);
        return HS_ERR(-e, "rank %d: mmap of shared-memory segment %s (%zu bytes): %s", t->rank,
                      s->name, s->seg_bytes, strerror(e));
    }
    s->seg = m;
    /* kept open: a replacement of a crashed peer, which joins after the name is gone, opens
     * the segment as /proc/PID/fd/FD (shm_wire.h, version 5) */
    s->seg_fd = fd;
    s->incarnation = o->incarnation;
    if (s->incarnation > 0) { /* (its peers open it by /proc only) */
        shm_unlink(s->name);
        s->unlinked = 1;
    }
    s->seg->magic = HS_SHM_SEG_MAGIC;
    s->seg->version = HS_SHM_WIRE_VERSION;
    s->seg->owner = (uint32_t)t->rank;
    s->seg->size = (uint32_t)n;
    s->seg->ring_bytes = s->ring_bytes;
    s->seg->seg_bytes = s->seg_bytes;
    /* Let peers read and write windows with process_vm_readv/writev where Yama restricts
     * ptrace to descendants (no effect elsewhere). */
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    HS_DEBUG("rank %d: shared-memory transport, segment %s, %zu-byte rings, %zu-byte chunks",
             t->rank, s->name, s->ring_bytes, s->chunk);
    return 0;
}

static int shm_address(hs_transport_t *t, void *buf, size_t *len)
{
    shm_t *s = t->impl;
    hs_shm_addr_v1_t a;
    memset(&a, 0, sizeof a);
    a.magic = HS_SHM_ADDR_MAGIC;
    a.version = HS_SHM_WIRE_VERSION;
    a.rank = (uint32_t)t->rank;
    a.pid = (uint32_t)getpid();
    struct stat ns;
    if (stat("/proc/self/ns/pid", &ns) == 0) a.pidns = (uint64_t)ns.st_ino;
    a.ring_bytes = s->ring_bytes;
    s->probe_word = HS_SHM_PROBE_MAGIC;
    a.probe = (uint64_t)(uintptr_t)&s->probe_word;
    gethostname(a.host, sizeof a.host - 1);
    snprintf(a.name, sizeof a.name, "%s", s->name);
    a.seg_fd = (uint32_t)s->seg_fd;
    a.incarnation = (uint32_t)s->incarnation;
    s->me = a;
    memcpy(buf, &a, sizeof a);
    *len = sizeof a;
    return 0;
}

/* Map rank r's segment as its address a announces it: by name, or (by_proc: a replacement, or
 * a peer's replacement, whose names are gone) as /proc/PID/fd/SEG_FD, and check its header. */
static int map_peer(shm_t *s, int r, const hs_shm_addr_v1_t *a, int by_proc, hs_shm_seg_hdr_t **seg,
                    size_t *bytes)
{
    hs_transport_t *t = s->t;
    char path[96];
    const char *what = a->name;
    int fd;
    if (by_proc) {
        snprintf(path, sizeof path, "/proc/%u/fd/%u", a->pid, a->seg_fd);
        what = path;
        fd = open(path, O_RDWR | O_CLOEXEC);
    } else {
        fd = shm_open(a->name, O_RDWR, 0);
    }
    if (fd < 0)
        return HS_ERR(-errno, "rank %d: opening rank %d's shared-memory segment %s: %s", t->rank, r,
                      what, strerror(errno));
    struct stat st;
    size_t want = SEG_HDR_BYTES + (size_t)t->size * (RING_HDR_BYTES + a->ring_bytes);
    if (fstat(fd, &st) < 0 || (size_t)st.st_size != want) {
        close(fd);
        return HS_ERR(-EPROTO,
                      "rank %d: rank %d's shared-memory segment %s has %lld bytes, expected %zu",
                      t->rank, r, what, (long long)st.st_size, want);
    }
    void *m = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (m == MAP_FAILED)
        return HS_ERR(-e, "rank %d: mapping rank %d's shared-memory segment %s: %s", t->rank, r,
                      what, strerror(e));
    hs_shm_seg_hdr_t *h = m;
    if (h->magic != HS_SHM_SEG_MAGIC || h->owner != (uint32_t)r || h->size != (uint32_t)t->size ||
        h->ring_bytes != a->ring_bytes) {
        munmap(m, want);
        return HS_ERR(-EPROTO,
                      "rank %d: rank %d's shared-memory segment %s does not hold the header it "
                      "announced (owner %u, %u ranks)",
                      t->rank, r, what, h->owner, h->size);
    }
    if (a->ring_bytes != s->ring_bytes) {
        munmap(m, want);
        return HS_ERR(-EINVAL,
                      "rank %d: rank %d uses %llu-byte rings, this rank %zu: set "
                      "HS_SHM_RING_BYTES alike on every rank",
                      t->rank, r, (unsigned long long)a->ring_bytes, s->ring_bytes);
    }
    *seg = h;
    *bytes = want;
    return 0;
}

/* A send or receive of the crashed process's time that can no longer be: it fails. */
static void fail_for_replacement_locked(shm_t *s, struct hs_treq *r, int p, unsigned old_pid)
{
    hs_shm_list_unlink(r);
    r->bound = 0;
    if (r->orphan) {
        hs_shm_req_destroy(r);
        return;
    }
    hs_shm_req_fail_locked(s, r, -ECONNRESET,
                           "rank %d: %s rank %d (tag %u): its process (pid %u) exited and a "
                           "replacement took its place",
                           s->t->rank, r->kind == REQ_SEND ? "send to" : "receive from", p, r->tag,
                           old_pid);
}

int hs_shm_reattach_locked(shm_t *s, int p, const hs_shm_addr_v1_t *a)
{
    hs_transport_t *t = s->t;
    peer_t *pe = &s->peers[p];
    const hs_shm_addr_v1_t *me = &s->peers[t->rank].addr;
    if (a->magic != HS_SHM_ADDR_MAGIC || a->version != HS_SHM_WIRE_VERSION ||
        a->rank != (uint32_t)p || strncmp(a->host, me->host, sizeof a->host) ||
        a->pidns != me->pidns)
        return HS_ERR(-EPROTO, "rank %d: rank %d's replacement announced a malformed address",
                      t->rank, p);
    hs_shm_seg_hdr_t *seg = NULL;
    size_t bytes = 0;
    HS_TRY(map_peer(s, p, a, 1, &seg, &bytes));
    unsigned old_pid = pe->addr.pid;
    /* what its crashed process left half-written to me is dropped */
    if (pe->cur_req) {
        struct hs_treq *r = pe->cur_req;
        pe->cur_req = NULL;
        fail_for_replacement_locked(s, r, p, old_pid);
    }
    if (pe->cur_ux) {
        if (pe->cur_ux->got < pe->cur_ux->len) hs_shm_ux_unlink_free(pe->cur_ux);
        pe->cur_ux = NULL;
    }
    /* my sends still queued for it (or written by address, unread) were for the crashed
     * process: they fail, and the caller keeps what it sent */
    while (pe->sendq.next != &pe->sendq) fail_for_replacement_locked(s, pe->sendq.next, p, old_pid);
    while (pe->rdvq.next != &pe->rdvq) fail_for_replacement_locked(s, pe->rdvq.next, p, old_pid);
    /* its buffers mapped here belong to the crashed process (the ids start again) */
    for (pmap_t *m = s->maps; m; m = m->next)
        if (m->peer == p) m->peer = -1, m->used = 0; /* (dropped first) */
    if (pe->seg) { /* kept for hs_shm_unsent (an older one: what it held is given up) */
        if (pe->old_seg) munmap(pe->old_seg, pe->old_bytes);
        pe->old_seg = pe->seg;
        pe->old_bytes = pe->seg_bytes;
        pe->old_out = pe->out;
        pe->old_out_data = pe->out_data;
    }
    pe->addr = *a;
    pe->addr.host[HS_SHM_HOST_MAX - 1] = pe->addr.name[HS_SHM_NAME_MAX - 1] = '\0';
    pe->seg = seg;
    pe->seg_bytes = bytes;
    pe->out = ring_of(seg, s->ring_bytes, t->rank);
    pe->out_data = (char *)pe->out + RING_HDR_BYTES;
    pe->dead = 0;
    pe->corrupt = 0;
    pe->rdv_acked = 0;
    pe->seq_out = 0;
    pe->last_alive = hs_now();
    atomic_fetch_add(&seg->mapped, 1);
    HS_DEBUG("rank %d: rank %d's replacement %u (pid %u) took the place of pid %u", t->rank, p,
             a->incarnation, a->pid, old_pid);
    return 0;
}

static int shm_connect(hs_transport_t *t, const void *all, size_t stride)
{
    shm_t *s = t->impl;
    if (stride < sizeof(hs_shm_addr_v1_t))
        return HS_ERR(-EINVAL, "transport connect: address stride %zu < blob size %zu", stride,
                      sizeof(hs_shm_addr_v1_t));
    const hs_shm_addr_v1_t *me =
        (const hs_shm_addr_v1_t *)((const char *)all + (size_t)t->rank * stride);
    for (int r = 0; r < t->size; r++) {
        peer_t *pe = &s->peers[r];
        memcpy(&pe->addr, (const char *)all + (size_t)r * stride, sizeof pe->addr);
        hs_shm_addr_v1_t *a = &pe->addr;
        a->host[HS_SHM_HOST_MAX - 1] = a->name[HS_SHM_NAME_MAX - 1] = '\0';
        if (a->magic != HS_SHM_ADDR_MAGIC)
            return HS_ERR(-EPROTO,
                          "rank %d: the address of rank %d is not a shared-memory (hsshm) "
                          "address: every rank must use the same --provider",
                          t->rank, r);
        if (a->version != HS_SHM_WIRE_VERSION || a->rank != (uint32_t)r)
            return HS_ERR(-EPROTO,
                          "rank %d: rank %d's shared-memory address has version %u and rank %u "
                          "(expected version %u, rank %d): mixed Hearsay builds?",
                          t->rank, r, a->version, a->rank, HS_SHM_WIRE_VERSION, r);
        if (strcmp(a->host, me->host) || a->pidns != me->pidns)
            return HS_ERR(-EINVAL,
                          "rank %d: rank %d runs on host %s%s, not on %s: provider hsshm needs "
                          "every rank on one host; use --provider tcp",
                          t->rank, r, a->host,
                          a->pidns != me->pidns ? " (another pid namespace)" : "", me->host);
    }
    for (int r = 0; r < t->size; r++) {
        if (r == t->rank) continue;
        peer_t *pe = &s->peers[r];
        pe->in = ring_of(s->seg, s->ring_bytes, r);
        pe->in_data = (char *)pe->in + RING_HDR_BYTES;
        int rc = map_peer(s, r, &pe->addr, s->incarnation > 0, &pe->seg, &pe->seg_bytes);
        if (rc < 0 && s->incarnation > 0 && hs_pid_gone(pe->addr.pid)) {
            /* a replacement: this peer's process has exited too (its own replacement, if it
             * gets one, will announce itself with a RESET) */
            HS_DEBUG("rank %d (a replacement): rank %d (pid %u) has exited", t->rank, r,
                     pe->addr.pid);
            pe->dead = 1;
            continue;
        }
        HS_TRY(rc);
        pe->out = ring_of(pe->seg, s->ring_bytes, t->rank);
        pe->out_data = (char *)pe->out + RING_HDR_BYTES;
        atomic_fetch_add(&pe->seg->mapped, 1);
        if (s->incarnation > 0) {
            /* My first record in its ring says who I am (shm_wire.h, version 5). */
            struct hs_treq *q = hs_shm_req_new(REQ_SEND, r, 0);
            if (!q) return -ENOMEM;
            q->ctrl = 1;
            q->reset = 1;
            q->orphan = 1; /* (nobody waits for it: freed once written) */
            q->buf = (char *)&s->me;
            q->cap = q->len = sizeof s->me;
            q->seq = pe->seq_out++;
            hs_shm_list_append(&pe->sendq, q);
            pe->eager_only = 1;
        }
    }
    /* Direct reads (process_vm_readv) need ptrace rights over the peers; find out now. */
    s->peer_read_ok = 1;
    for (int r = 0; r < t->size; r++) {
        if (r == t->rank || !s->peers[r].seg) continue;
        uint64_t w = 0;
        struct iovec lo = {&w, sizeof w},
                     re = {(void *)(uintptr_t)s->peers[r].addr.probe, sizeof w};
        if (process_vm_readv((pid_t)s->peers[r].addr.pid, &lo, 1, &re, 1, 0) != (ssize_t)sizeof w ||
            w != HS_SHM_PROBE_MAGIC) {
            HS_DEBUG("rank %d: cannot read rank %d's memory (%s): direct collectives off", t->rank,
                     r, strerror(errno));
            s->peer_read_ok = 0;
            break;
        }
    }
    /* Senders may hand this rank large messages by address (RTS) only if it can read them. */
    atomic_store(&s->seg->reader_ok, s->peer_read_ok ? 1u : 2u);
    const char **hosts = hs_calloc((size_t)t->size, sizeof *hosts, "host names");
    if (!hosts) return -ENOMEM;
    for (int r = 0; r < t->size; r++) hosts[r] = s->peers[r].addr.host;
    int rc = hs_shaper_create(s->shape, t->rank, t->size, hosts, t->opts.seed, &s->shaper);
    free(hosts);
    HS_TRY(rc);
    if (t->opts.progress_thread) {
        if (pthread_create(&s->thread, NULL, hs_shm_progress_thread, s))
            return HS_ERR(-EAGAIN, "rank %d: cannot start the progress thread", t->rank);
        s->thread_on = 1;
    }
    return 0;
}

static void shm_close(hs_transport_t *t)
{
    shm_t *s = t->impl;
    if (!s) return;
    if (s->thread_on) {
        atomic_store(&s->stop, 1);
        hs_shm_ring_bell(s->seg);
        pthread_join(s->thread, NULL);
    }
    hs_shm_views_close(s);
    if (s->peers) {
        for (int p = 0; p < t->size; p++) {
            peer_t *pe = &s->peers[p];
            while (pe->sendq.next != &pe->sendq) {
                struct hs_treq *r = pe->sendq.next;
                hs_shm_list_unlink(r);
                if (r->orphan) hs_shm_req_destroy(r);
            }
            while (pe->rdvq.next != &pe->rdvq) {
                struct hs_treq *r = pe->rdvq.next;
                hs_shm_list_unlink(r);
                if (r->orphan) hs_shm_req_destroy(r);
            }
            if (pe->seg) munmap(pe->seg, pe->seg_bytes);
            if (pe->old_seg) munmap(pe->old_seg, pe->old_bytes);
        }
        free(s->peers);
    }
    while (s->uxq.next != &s->uxq) hs_shm_ux_unlink_free(s->uxq.next);
    while (s->posted.next != &s->posted) hs_shm_list_unlink(s->posted.next);
    while (s->doneq.next != &s->doneq) hs_shm_list_unlink(s->doneq.next);
    if (s->seg) {
        munmap(s->seg, s->seg_bytes);
        if (!s->unlinked) shm_unlink(s->name);
    }
    if (s->seg_fd >= 0) close(s->seg_fd);
    hs_shaper_free(&s->shaper);
    hs_shape_free(&s->shape);
    pthread_mutex_destroy(&s->lock);
    free(s);
    t->impl = NULL;
}

static const char *shm_provider(const hs_transport_t *t)
{
    (void)t;
    return "hsshm";
}

static int shm_shaped(const hs_transport_t *t, int peer)
{
    const shm_t *s = t->impl;
    for (int p = peer < 0 ? 0 : peer; p < (peer < 0 ? t->size : peer + 1); p++)
        if (p != t->rank && hs_shaper_active(s->shaper, p)) return 1;
    return 0;
}

const hs_transport_ops_t hs_shm_ops = {
    .size = sizeof(hs_transport_ops_t),
    .name = "hsshm",
    .create = shm_create,
    .address = shm_address,
    .connect = shm_connect,
    .close = shm_close,
    .isend = hs_shm_isend,
    .irecv = hs_shm_irecv,
    .test = hs_shm_test,
    .waitany = hs_shm_waitany,
    .progress = hs_shm_progress,
    .probe = hs_shm_probe,
    .req_free = hs_shm_req_free,
    .barrier = hs_shm_barrier,
    .win_create = hs_shm_win_create,
    .win_free = hs_shm_win_free,
    .put = hs_shm_put,
    .get = hs_shm_get,
    .atomic_add = hs_shm_atomic_add,
    .provider = shm_provider,
    .peer_read_ok = hs_shm_peer_read_ok,
    .peer_read = hs_shm_peer_read,
    .unsent = hs_shm_unsent,
    .leave = hs_shm_leave,
    .revoke = hs_shm_revoke,
    .peer_gone = hs_shm_peer_gone,
    .buf_alloc = hs_shm_buf_alloc,
    .buf_free = hs_shm_buf_free,
    .irecv_view = hs_shm_irecv_view,
    .view_wait = hs_shm_view_wait,
    .view_release = hs_shm_view_release,
    .buf_handle = hs_shm_buf_handle,
    .peer_map = hs_shm_peer_map,
    .peer_unmap = hs_shm_peer_unmap,
    .shaped = shm_shaped,
    .caps = HS_TCAP_TAGGED | HS_TCAP_ANY_SOURCE | HS_TCAP_PROBE | HS_TCAP_LIVENESS |
            HS_TCAP_PEER_MAP | HS_TCAP_WINDOWS | HS_TCAP_PEER_READ | HS_TCAP_UNSENT |
            HS_TCAP_MEM_HOST | HS_TCAP_EARLY_SMALL,
};

const hs_transport_entry_t hs_shm_entry = {
    .name = "hsshm",
    .ops = &hs_shm_ops,
    .takes = "hsshm",
    .help = "Hearsay's shared memory, every rank on one host (auto's choice there)",
};
