/*
 * gossip/transport_mem.c — memory of any kind through the transport (hearsay/transport.h,
 * hs_transport_mr_*): registrations that know their memory kind, and blocking transfers of
 * registered buffers. Device memory goes to a process of the same host by mapping (the
 * kernels' ipc slots: CUDA IPC), elsewhere through four host buffers of its kernels in chunks
 * of HS_TMR_CHUNK bytes, so that the copy of one chunk overlaps the wire of others. The
 * generic layer: it calls the public transport calls and the kernels' slots only.
 *
 * The wire of one transfer of len bytes on tag T (docs/transport.md, "Memory of any kind"):
 *   sender -> receiver  T    a header (mr_hdr_t): the length, and for device memory that can
 *                            be shared, its IPC handle, offset and the host's boot id;
 *   receiver -> sender  T+1  for a header with a handle only: the answer (mr_answer_t), DONE
 *                            when the receiver mapped the sender's memory and copied it (the
 *                            transfer is over), CHUNKS when it could not (another host, host
 *                            memory, HS_TMR_IPC=0, a failed map);
 *   sender -> receiver  T    unless DONE: ceil(len / HS_TMR_CHUNK) chunk messages, in order
 *                            (one, empty, for len 0).
 */
#include "config.h"

#include "hearsay/common.h"
#include "hearsay/env.h"
#include "hearsay/kernels.h"
#include "hearsay/transport.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    MR_SLOTS = 4,     /* staging buffers of a device registration (4: steadier than 2 on hsshm) */
    MR_WINDOW = 8,    /* chunks of host memory in flight at once */
    MR_IPC_CACHE = 4, /* peers' allocations a receiving registration keeps mapped */
};

#define MR_MAGIC        0x524d5348u /* "HSMR" */
#define MR_ANSWER_MAGIC 0x414d5348u /* "HSMA" */
enum { MR_CHUNKS = 1, MR_IPC = 2 };

typedef struct mr_hdr {
    uint32_t magic, mode; /* MR_CHUNKS or MR_IPC */
    uint64_t len;         /* bytes of the transfer */
    uint64_t off;         /* MR_IPC: where they start in the allocation the handle names */
    char kernels[16];     /* MR_IPC: the backend whose memory it is ("cuda", "emu") */
    char boot[40];        /* MR_IPC: the sender's host (its kernel's boot id) */
    hs_ipc_handle_t h;    /* MR_IPC: the allocation */
} mr_hdr_t;

typedef struct mr_answer {
    uint32_t magic, done; /* done 1: copied by mapping; 0: send the chunks */
} mr_answer_t;

struct hs_tmr {
    hs_kernels_t *k; /* the memory's kernels; NULL for host memory */
    int kind;        /* HS_TMEM_HOST or HS_TMEM_DEVICE */
    unsigned char *base;
    size_t len;
    size_t slot_bytes;             /* bytes of each staging buffer (device memory) */
    unsigned char *slot[MR_SLOTS]; /* staging buffers in the kernels' host memory */
    int ipc;                       /* 1: sends offer the mapping (ih describes base) */
    hs_ipc_handle_t ih;
    struct {
        hs_ipc_handle_t h; /* a peer's allocation mapped here (receives), at p */
        void *p;
        unsigned long used;
    } cache[MR_IPC_CACHE];
    unsigned long tick;
    char what[48]; /* for messages */
};

/* This host's boot id (one kernel: processes that can map each other's memory), read once
 * per process ("" when it cannot be read: no mapping is then offered or taken). */
static char g_boot[40];
static pthread_once_t g_boot_once = PTHREAD_ONCE_INIT;

static void boot_read(void)
{
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f) return;
    if (!fgets(g_boot, sizeof g_boot, f)) g_boot[0] = '\0';
    fclose(f);
    g_boot[strcspn(g_boot, "\n")] = '\0';
}

static const char *boot_id(void)
{
    pthread_once(&g_boot_once, boot_read);
    return g_boot;
}

static int ipc_wanted(void)
{
    int on = 1;
    if (hs_env_bool("HS_TMR_IPC", &on) < 0) on = 1;
    return on;
}

static int has_ipc(const hs_kernels_t *k)
{
    return HS_KOP_HAS(k, ipc_handle) && HS_KOP_HAS(k, ipc_open) && HS_KOP_HAS(k, ipc_close);
}

int hs_transport_mr_reg(hs_transport_t *t, hs_kernels_t *k, void *buf, size_t len, const char *what,
                        hs_tmr_t **mr)
{
    if (!mr) return HS_ERR(-EINVAL, "transport memory registration: mr is NULL");
    *mr = NULL;
    if (!t) return HS_ERR(-EINVAL, "transport memory registration: no transport");
    if (!buf && len)
        return HS_ERR(-EINVAL, "registration of %s: NULL buffer of %zu bytes",
                      what ? what : "a buffer", len);
    int device = k && k->device != HS_DEV_CPU;
    if (!device && len &&
        (hs_kernels_emu_is_device(buf) || hs_kernels_emu_is_device((const char *)buf + len - 1)))
        return HS_ERR(-EFAULT,
                      "registration of %s: %p is the emulated device's memory, registered as "
                      "host memory (give its kernels)",
                      what ? what : "a buffer", buf);
    hs_tmr_t *m = hs_calloc(1, sizeof *m, "memory registration");
    if (!m) return -ENOMEM;
    m->k = device ? k : NULL;
    m->kind = device ? HS_TMEM_DEVICE : HS_TMEM_HOST;
    m->base = buf;
    m->len = len;
    snprintf(m->what, sizeof m->what, "%s", what ? what : "registered buffer");
    /* a provider that takes device memory would need no staging; none claims it yet */
    if (device && !(hs_transport_caps(t) & HS_TCAP_MEM_DEVICE) && len) {
        m->slot_bytes = len < HS_TMR_CHUNK ? len : HS_TMR_CHUNK;
        for (int i = 0; i < MR_SLOTS; i++) {
            void *p = NULL;
            int rc = hs_kernels_host_alloc(k, m->slot_bytes, &p, "transport staging buffer");
            if (rc < 0) {
                hs_error_prefix("registration of %s", m->what);
                hs_transport_mr_dereg(t, &m);
                return rc;
            }
            m->slot[i] = p;
        }
        /* sends offer the mapping where the backend shares this allocation */
        if (has_ipc(k)) {
            int rc = k->ops->ipc_handle(k, buf, &m->ih);
            if (rc == 0)
                m->ipc = 1;
            else
                HS_DEBUG("registration of %s: not shared with other processes (%s): its sends "
                         "are staged",
                         m->what, hs_last_error());
        }
    }
    *mr = m;
    return 0;
}

void hs_transport_mr_dereg(hs_transport_t *t, hs_tmr_t **mr)
{
    (void)t;
    if (!mr || !*mr) return;
    hs_tmr_t *m = *mr;
    for (int i = 0; i < MR_SLOTS; i++) hs_kernels_host_free(m->k, m->slot[i]);
    for (int i = 0; i < MR_IPC_CACHE; i++)
        if (m->cache[i].p) m->k->ops->ipc_close(m->k, m->cache[i].p);
    free(m);
    *mr = NULL;
}

int hs_transport_mr_kind(const hs_tmr_t *mr)
{
    return mr ? mr->kind : HS_TMEM_HOST;
}

static int check_range(const hs_tmr_t *m, size_t off, size_t len, const char *op)
{
    if (!m) return HS_ERR(-EINVAL, "%s: no registration", op);
    if (off > m->len || len > m->len - off)
        return HS_ERR(-ERANGE, "%s: bytes [%zu, %zu) are outside %s (%zu bytes)", op, off,
                      off + len, m->what, m->len);
    return 0;
}

static int check_tag(uint32_t tag, const char *op)
{
    if (tag >= HS_TAG_MAX)
        return HS_ERR(-EINVAL, "%s: tag %u leaves no room for its answer's tag + 1 (at most %u)",
                      op, tag, HS_TAG_MAX - 1);
    return 0;
}

static size_t chunks_of(size_t len)
{
    return len == 0 ? 1 : (len + HS_TMR_CHUNK - 1) / HS_TMR_CHUNK;
}

static size_t chunk_len(size_t len, size_t i)
{
    size_t lo = i * HS_TMR_CHUNK;
    return len - lo < HS_TMR_CHUNK ? len - lo : HS_TMR_CHUNK;
}

/* Cancel whatever is still in flight (after an error, or chunks a mapping made moot). */
static void drop_all(hs_transport_t *t, hs_treq_t **req, int n)
{
    for (int i = 0; i < n; i++)
        if (req[i]) hs_transport_req_free(t, &req[i]);
}

/* Wait for req (a receive of exactly `expect` bytes unless expect is (size_t)-1). */
static int wait_msg(hs_transport_t *t, hs_treq_t **req, size_t expect, const char *what, size_t i,
                    const hs_tmr_t *m, int peer)
{
    hs_tstatus_t st;
    int rc = hs_transport_wait(t, req, -1, &st);
    if (*req) hs_transport_req_free(t, req);
    if (rc < 0) return rc;
    if (expect != (size_t)-1 && st.len != expect)
        return HS_ERR(-EPROTO,
                      "receive into %s: %s %zu from rank %d brought %zu bytes, expected %zu "
                      "(the sender's length differs)",
                      m->what, what, i, peer, st.len, expect);
    return 0;
}

/* The chunks of a send, from the registration (host) or staged through its slots (device). */
static int send_chunks(hs_transport_t *t, int peer, uint32_t tag, hs_tmr_t *mr, size_t off,
                       size_t len)
{
    const size_t n = chunks_of(len);
    hs_treq_t *req[MR_WINDOW] = {0};
    const int staged = mr->slot[0] != NULL;
    const size_t w = staged ? MR_SLOTS : MR_WINDOW;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        hs_treq_t **r = &req[i % w];
        if (*r && (rc = wait_msg(t, r, (size_t)-1, "chunk", i, mr, peer)) < 0) break;
        const size_t c = chunk_len(len, i);
        const unsigned char *src = mr->base + off + i * HS_TMR_CHUNK;
        if (staged) {
            unsigned char *slot = mr->slot[i % MR_SLOTS];
            if ((rc = mr->k->ops->to_host(mr->k, slot, src, c)) < 0) break;
            src = slot;
        }
        rc = hs_transport_isend(t, peer, tag, src, c, r);
    }
    for (size_t i = 0; i < w && rc == 0; i++)
        if (req[i]) rc = wait_msg(t, &req[i], (size_t)-1, "chunk", i, mr, peer);
    if (rc < 0) drop_all(t, req, (int)w);
    return rc;
}

int hs_transport_send_mr(hs_transport_t *t, int peer, uint32_t tag, hs_tmr_t *mr, size_t off,
                         size_t len)
{
    HS_TRY(check_range(mr, off, len, "send_mr"));
    HS_TRY(check_tag(tag, "send_mr"));
    mr_hdr_t h;
    memset(&h, 0, sizeof h);
    h.magic = MR_MAGIC;
    h.len = len;
    h.mode = mr->ipc && len > 0 && ipc_wanted() ? MR_IPC : MR_CHUNKS;
    if (h.mode == MR_IPC) {
        h.off = off;
        snprintf(h.kernels, sizeof h.kernels, "%s", mr->k->ops->name);
        snprintf(h.boot, sizeof h.boot, "%s", boot_id());
        h.h = mr->ih;
    }
    hs_treq_t *ar = NULL;
    mr_answer_t ans = {0};
    int rc = 0;
    if (h.mode == MR_IPC) rc = hs_transport_irecv(t, peer, tag + 1, &ans, sizeof ans, &ar);
    if (rc == 0) rc = hs_transport_send(t, peer, tag, &h, sizeof h);
    if (rc == 0 && ar) { /* the receiver maps and copies, or asks for the chunks */
        rc = wait_msg(t, &ar, sizeof ans, "answer", 0, mr, peer);
        if (rc == 0 && ans.magic != MR_ANSWER_MAGIC)
            rc = HS_ERR(-EPROTO, "send_mr: rank %d's answer is not one (tag %u)", peer, tag + 1);
        if (rc == 0 && ans.done) return 0;
    }
    if (ar) hs_transport_req_free(t, &ar);
    if (rc == 0) rc = send_chunks(t, peer, tag, mr, off, len);
    if (rc < 0) hs_error_prefix("send of %zu bytes of %s to rank %d", len, mr->what, peer);
    return rc;
}

/* A peer's allocation mapped here (cached per registration; the least recently used mapping
 * goes when the cache is full). */
static int ipc_map(hs_tmr_t *m, const hs_ipc_handle_t *h, void **p)
{
    int free_i = -1, lru = 0;
    for (int i = 0; i < MR_IPC_CACHE; i++) {
        if (m->cache[i].p && !memcmp(&m->cache[i].h, h, sizeof *h)) {
            m->cache[i].used = ++m->tick;
            *p = m->cache[i].p;
            return 0;
        }
        if (!m->cache[i].p && free_i < 0) free_i = i;
        if (m->cache[i].used < m->cache[lru].used) lru = i;
    }
    int i = free_i >= 0 ? free_i : lru;
    if (m->cache[i].p) {
        m->k->ops->ipc_close(m->k, m->cache[i].p);
        m->cache[i].p = NULL;
    }
    HS_TRY(m->k->ops->ipc_open(m->k, h, p, NULL));
    m->cache[i].h = *h;
    m->cache[i].p = *p;
    m->cache[i].used = ++m->tick;
    return 0;
}

/* A header with a handle: map the sender's memory and copy it into ours. 1 done, 0 not
 * possible here (the chunks will come), < 0 a failed copy. */
static int recv_by_map(hs_tmr_t *m, const mr_hdr_t *h, size_t off, size_t len)
{
    if (m->kind != HS_TMEM_DEVICE || !has_ipc(m->k) || !ipc_wanted()) return 0;
    const char *boot = boot_id();
    if (!boot[0] || strncmp(boot, h->boot, sizeof h->boot) ||
        strncmp(h->kernels, m->k->ops->name, sizeof h->kernels))
        return 0;
    void *src = NULL;
    if (ipc_map(m, &h->h, &src) < 0) {
        HS_DEBUG("receive into %s: could not map the sender's memory (%s): staged instead", m->what,
                 hs_last_error());
        return 0;
    }
    HS_TRY(m->k->ops->copy(m->k, m->base + off, (const char *)src + h->off, len));
    HS_TRY(m->k->ops->sync(m->k));
    return 1;
}

int hs_transport_recv_mr(hs_transport_t *t, int peer, uint32_t tag, hs_tmr_t *mr, size_t off,
                         size_t len)
{
    HS_TRY(check_range(mr, off, len, "recv_mr"));
    HS_TRY(check_tag(tag, "recv_mr"));
    if (peer < 0) return HS_ERR(-EINVAL, "recv_mr into %s: needs a named peer", mr->what);
    const size_t n = chunks_of(len);
    hs_treq_t *req[MR_WINDOW] = {0}, *hr = NULL;
    const int staged = mr->slot[0] != NULL;
    const size_t w = staged ? MR_SLOTS : MR_WINDOW;
    mr_hdr_t h;
    size_t posted = 0;
    /* the header's receive, then the first chunks' (posted before they can arrive), in chunk
     * order: chunk i waits in req[i % w] */
#define POST(i)                                                                                    \
    hs_transport_irecv(t, peer, tag,                                                               \
                       staged ? (void *)mr->slot[(i) % MR_SLOTS]                                   \
                              : (void *)(mr->base + off + (i)*HS_TMR_CHUNK),                       \
                       chunk_len(len, (i)), &req[(i) % w])
    int rc = hs_transport_irecv(t, peer, tag, &h, sizeof h, &hr);
    for (; rc == 0 && posted < n && posted < w; posted++) rc = POST(posted);
    if (rc == 0) rc = wait_msg(t, &hr, sizeof h, "header", 0, mr, peer);
    if (rc == 0 && (h.magic != MR_MAGIC || (h.mode != MR_CHUNKS && h.mode != MR_IPC)))
        rc = HS_ERR(-EPROTO, "recv_mr: rank %d's message on tag %u is not a transfer header", peer,
                    tag);
    if (rc == 0 && h.len != len)
        rc = HS_ERR(-EPROTO, "recv_mr into %s: rank %d sends %llu bytes, %zu expected", mr->what,
                    peer, (unsigned long long)h.len, len);
    if (rc == 0 && h.mode == MR_IPC) {
        int done = recv_by_map(mr, &h, off, len);
        rc = done < 0 ? done : 0;
        /* mapped: the chunks will not come, and their receives go before the answer does (the
         * sender's next transfer on this tag may follow it at once) */
        if (done > 0) drop_all(t, req, (int)w);
        mr_answer_t ans = {.magic = MR_ANSWER_MAGIC, .done = done > 0};
        if (rc == 0) rc = hs_transport_send(t, peer, tag + 1, &ans, sizeof ans);
        if (rc == 0 && done > 0) return 0;
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        const size_t c = chunk_len(len, i);
        if ((rc = wait_msg(t, &req[i % w], c, "chunk", i, mr, peer)) < 0) break;
        if (staged && (rc = mr->k->ops->to_device(mr->k, mr->base + off + i * HS_TMR_CHUNK,
                                                  mr->slot[i % MR_SLOTS], c)) < 0)
            break;
        if (posted < n) {
            rc = POST(posted);
            posted++;
        }
    }
#undef POST
    if (rc < 0) {
        if (hr) hs_transport_req_free(t, &hr);
        drop_all(t, req, (int)w);
        hs_error_prefix("receive of %zu bytes into %s from rank %d", len, mr->what, peer);
    }
    return rc;
}
