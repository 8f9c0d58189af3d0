/*
 * gossip/shm_view.c — zero-copy messages on one host for hsshm: buffers a receiver can map
 * (hs_transport_buf_alloc: one memfd each), the peers' buffers mapped here, and view receives
 * (hs_transport_irecv_view) that hand the caller the bytes where they lie.
 *
 * A send from a mappable buffer goes as one SNAP record (gossip/shm_wire.h): the receiver maps
 * /proc/PID/fd/FD of the sender once (cached per buffer) and then either copies from the
 * mapping into a plain receive (one memcpy, instead of process_vm_readv) or, for a view
 * receive, hands out a pointer into it and holds the record unacknowledged until the view is
 * released: the sender's send completes then, so the sender leaves the bytes alone while they
 * are read. Acknowledgements stay in ring order (rdv_done is a count): a released view is
 * acknowledged only once every older RTS/SNAP of the same sender is. Where the mapping fails
 * (no access to /proc/PID/fd) the receiver copies with process_vm_readv, as for an RTS.
 *
 * With this, one push-sum exchange makes the fewest passes over the model an exchange without
 * a barrier can: the sender writes its share once (scaled straight into the mappable buffer)
 * and the receiver mixes straight from it (docs/benchmarks.md counts them).
 */
#include "gossip/shm_impl.h"
#include "hearsay/common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* --- this rank's mappable buffers -------------------------------------------------------- */

int hs_shm_buf_alloc(hs_transport_t *t, size_t len, void **buf)
{
    shm_t *s = t->impl;
    long pg = sysconf(_SC_PAGESIZE);
    size_t page = pg > 0 ? (size_t)pg : 4096;
    size_t map_len = hs_shm_align_up(len ? len : 1, page);
    shbuf_t *b = hs_calloc(1, sizeof *b, "mappable buffer");
    if (!b) return -ENOMEM;
    b->fd = memfd_create("hearsay-buf", MFD_CLOEXEC);
    if (b->fd < 0) {
        int e = errno;
        free(b);
        return HS_ERR(-e, "rank %d: memfd_create for a buffer of %zu bytes: %s", t->rank, len,
                      strerror(e));
    }
    void *m = MAP_FAILED;
    if (ftruncate(b->fd, (off_t)map_len) == 0)
        m = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, b->fd, 0);
    if (m == MAP_FAILED) {
        int e = errno;
        close(b->fd);
        free(b);
        return HS_ERR(-e, "rank %d: mapping a shared buffer of %zu bytes: %s", t->rank, map_len,
                      strerror(e));
    }
    b->base = m;
    b->len = len;
    b->map_len = map_len;
    pthread_mutex_lock(&s->lock);
    b->id = ++s->buf_seq;
    b->next = s->bufs;
    s->bufs = b;
    pthread_mutex_unlock(&s->lock);
    *buf = m;
    return 0;
}

void hs_shm_buf_free(hs_transport_t *t, void *buf)
{
    shm_t *s = t->impl;
    pthread_mutex_lock(&s->lock);
    shbuf_t **pp = &s->bufs;
    while (*pp && (*pp)->base != buf) pp = &(*pp)->next;
    shbuf_t *b = *pp;
    if (b) *pp = b->next;
    pthread_mutex_unlock(&s->lock);
    if (!b) {
        HS_WARN("rank %d: buf_free of %p, which is no buffer of buf_alloc: ignored", t->rank, buf);
        return;
    }
    munmap(b->base, b->map_len);
    close(b->fd);
    free(b);
}

shbuf_t *hs_shm_buf_find_locked(shm_t *s, const void *buf, size_t len)
{
    const char *p = buf;
    for (shbuf_t *b = s->bufs; b; b = b->next)
        if (p >= b->base && (size_t)(p - b->base) <= b->map_len &&
            len <= b->map_len - (size_t)(p - b->base))
            return b;
    return NULL;
}

/* --- peers' buffers mapped here ---------------------------------------------------------- */

static void map_drop(shm_t *s, pmap_t **pp)
{
    pmap_t *m = *pp;
    *pp = m->next;
    munmap((void *)m->base, m->len);
    free(m);
    s->nmaps--;
}

pmap_t *hs_shm_map_get_locked(shm_t *s, int p, const hs_shm_snap_t *sn)
{
    double now = hs_now();
    for (pmap_t *m = s->maps; m; m = m->next)
        if (m->peer == p && m->id == sn->id && m->len >= sn->map_len) {
            m->used = now;
            return m;
        }
    peer_t *pe = &s->peers[p];
    char path[64];
    snprintf(path, sizeof path, "/proc/%u/fd/%u", pe->addr.pid, sn->fd);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    const char *why = NULL;
    void *base = MAP_FAILED;
    if (fd < 0)
        why = "open";
    else if (fstat(fd, &st) < 0 || st.st_size < 0 || (uint64_t)st.st_size < sn->map_len)
        why = "size";
    else if ((base = mmap(NULL, sn->map_len, PROT_READ, MAP_SHARED, fd, 0)) == MAP_FAILED)
        why = "mmap";
    int e = errno;
    if (fd >= 0) close(fd);
    if (why) {
        if (!s->map_warned++)
            HS_DEBUG("rank %d: cannot map rank %d's buffer (%s %s: %s): copying it instead",
                     s->t->rank, p, why, path, strerror(e));
        return NULL;
    }
    pmap_t *m = calloc(1, sizeof *m);
    if (!m) {
        munmap(base, sn->map_len);
        return NULL;
    }
    *m = (pmap_t){.peer = p, .id = sn->id, .base = base, .len = sn->map_len, .used = now};
    m->next = s->maps;
    s->maps = m;
    s->nmaps++;
    /* Keep a few per peer: drop the least recently used that no view reads. */
    while (s->nmaps > 8 * s->t->size + 64) {
        pmap_t **lru = NULL;
        for (pmap_t **pp = &s->maps; *pp; pp = &(*pp)->next)
            if (!(*pp)->holds && *pp != m && (!lru || (*pp)->used < (*lru)->used)) lru = pp;
        if (!lru) break;
        map_drop(s, lru);
    }
    return m;
}

void hs_shm_rdv_ack_locked(shm_t *s, int p)
{
    peer_t *pe = &s->peers[p];
    uint64_t upto = pe->rdv_taken;
    for (struct hs_treq *r = s->held.hnext; r != &s->held; r = r->hnext)
        if (r->peer == p && r->rdv_idx < upto) upto = r->rdv_idx;
    if (upto <= pe->rdv_told) return;
    atomic_fetch_add(&pe->in->rdv_done, upto - pe->rdv_told);
    pe->rdv_told = upto;
    hs_shm_ring_bell(pe->seg);
}

/* --- shared buffers: a peer's buffer mapped read-write (the direct all-reduce) ---------- */

#define HANDLE_MAGIC 0x4853484d41500001ull /* "HSHMAP" v1 */

/* Handle words: magic, buffer id, memfd number, map_len, offset of buf, len. */
int hs_shm_buf_handle(hs_transport_t *t, const void *buf, size_t len, hs_tbuf_handle_t *h)
{
    shm_t *s = t->impl;
    pthread_mutex_lock(&s->lock);
    shbuf_t *b = hs_shm_buf_find_locked(s, buf, len);
    if (b) {
        h->w[0] = HANDLE_MAGIC;
        h->w[1] = b->id;
        h->w[2] = (uint64_t)b->fd;
        h->w[3] = b->map_len;
        h->w[4] = (uint64_t)((const char *)buf - b->base);
        h->w[5] = len;
    }
    pthread_mutex_unlock(&s->lock);
    return b ? 0 : -ENOENT; /* not an error to report: the caller copies instead */
}

int hs_shm_peer_map(hs_transport_t *t, int peer, const hs_tbuf_handle_t *h, void **ptr)
{
    shm_t *s = t->impl;
    uint64_t id = h->w[1], fdn = h->w[2], map_len = h->w[3], off = h->w[4], len = h->w[5];
    if (h->w[0] != HANDLE_MAGIC || fdn > INT32_MAX || off > map_len || len > map_len - off)
        return HS_ERR(-EINVAL, "rank %d: rank %d's buffer handle is not one of hsshm's", t->rank,
                      peer);
    pthread_mutex_lock(&s->lock);
    for (wmap_t *m = s->wmaps; m; m = m->next)
        if (m->peer == peer && m->id == id && m->len >= map_len) {
            m->refs++;
            *ptr = m->base + off;
            pthread_mutex_unlock(&s->lock);
            return 0;
        }
    unsigned pid = s->peers[peer].addr.pid;
    pthread_mutex_unlock(&s->lock);
    /* Map outside the lock: populating a large buffer takes a while. */
    char path[64];
    snprintf(path, sizeof path, "/proc/%u/fd/%u", pid, (unsigned)fdn);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return HS_ERR(-e, "rank %d: opening rank %d's buffer (%s): %s", t->rank, peer, path,
                      strerror(e));
    }
    struct stat st;
    void *base = MAP_FAILED;
    const char *why = NULL;
    if (fstat(fd, &st) < 0 || st.st_size < 0 || (uint64_t)st.st_size < map_len)
        why = "size";
    else if ((base = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
                          0)) == MAP_FAILED)
        why = "mmap";
    int e = errno;
    close(fd);
    if (why)
        return HS_ERR(e ? -e : -EIO, "rank %d: mapping rank %d's buffer of %llu bytes (%s): %s",
                      t->rank, peer, (unsigned long long)map_len, why, strerror(e));
    wmap_t *m = hs_calloc(1, sizeof *m, "mapped peer buffer");
    if (!m) {
        munmap(base, map_len);
        return -ENOMEM;
    }
    *m = (wmap_t){.peer = peer, .id = id, .base = base, .len = map_len, .refs = 1};
    pthread_mutex_lock(&s->lock);
    m->next = s->wmaps;
    s->wmaps = m;
    pthread_mutex_unlock(&s->lock);
    *ptr = m->base + off;
    return 0;
}

void hs_shm_peer_unmap(hs_transport_t *t, int peer, void *ptr)
{
    shm_t *s = t->impl;
    const char *p = ptr;
    pthread_mutex_lock(&s->lock);
    wmap_t **pp = &s->wmaps;
    while (*pp && !((*pp)->peer == peer && p >= (*pp)->base && p < (*pp)->base + (*pp)->len))
        pp = &(*pp)->next;
    wmap_t *m = *pp;
    if (m && --m->refs == 0)
        *pp = m->next;
    else
        m = NULL;
    pthread_mutex_unlock(&s->lock);
    if (m) {
        munmap(m->base, m->len);
        free(m);
    }
}

void hs_shm_views_close(shm_t *s)
{
    while (s->wmaps) {
        wmap_t *m = s->wmaps;
        s->wmaps = m->next;
        munmap(m->base, m->len);
        free(m);
    }
    while (s->maps) map_drop(s, &s->maps);
    while (s->bufs) {
        shbuf_t *b = s->bufs;
        s->bufs = b->next;
        munmap(b->base, b->map_len);
        close(b->fd);
        free(b);
    }
}

/* --- view receives ----------------------------------------------------------------------- */

int hs_shm_irecv_view(hs_transport_t *t, int peer, uint32_t tag, size_t cap, hs_treq_t **req)
{
    return hs_shm_irecv_common(t, 0, peer, tag, 0, NULL, cap, 1, req);
}

int hs_shm_view_wait(hs_transport_t *t, hs_treq_t *req, double timeout_s, int *done,
                     const void **data, hs_tstatus_t *st)
{
    shm_t *s = t->impl;
    hs_treq_t *w = req;
    int idx = -1;
    *done = 0;
    HS_TRY(hs_shm_wait_keep(t, &w, timeout_s, &idx));
    pthread_mutex_lock(&s->lock);
    int rc = 0;
    if (req->complete) {
        hs_shm_list_unlink(req); /* from doneq: reported now */
        if (req->err) {
            rc = HS_ERR(req->err, "%s", req->errmsg ? req->errmsg : "view receive failed");
        } else {
            *done = 1;
            *data = req->buf;
            st->source = req->peer;
            st->tag = req->tag;
            st->len = req->len;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

void hs_shm_view_release(hs_transport_t *t, hs_treq_t **req)
{
    shm_t *s = t->impl;
    struct hs_treq *r = *req;
    *req = NULL;
    if (!r) return;
    pthread_mutex_lock(&s->lock);
    int acked_peer = -1;
    if (r->map) { /* the sender's bytes are free again */
        r->hprev->hnext = r->hnext;
        r->hnext->hprev = r->hprev;
        r->hprev = r->hnext = NULL;
        r->map->holds--;
        r->map = NULL;
        acked_peer = r->peer;
    }
    if (r->bound && !r->complete) s->peers[r->peer].cur_req = NULL; /* the rest is dropped */
    hs_shm_list_unlink(r);                                          /* posted or doneq */
    hs_shm_req_destroy(r);
    if (acked_peer >= 0) hs_shm_rdv_ack_locked(s, acked_peer);
    pthread_mutex_unlock(&s->lock);
}
