/*
 * gossip/transport_mem.c — memory of any kind through the transport (hearsay/transport.h,
 * hs_transport_mr_*): registrations that know their memory kind, and blocking sends and
 * receives of registered buffers in chunks of HS_TMR_CHUNK bytes, device memory staged through
 * four host buffers of its kernels so that the copy of one chunk overlaps the wire of others.
 * The generic layer: it calls the public transport calls and the kernels' copy slots only.
 */
#include "config.h"

#include "hearsay/common.h"
#include "hearsay/kernels.h"
#include "hearsay/transport.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    MR_SLOTS = 4,  /* staging buffers of a device registration (4: steadier than 2 on hsshm) */
    MR_WINDOW = 8, /* chunks of host memory in flight at once */
};

struct hs_tmr {
    hs_kernels_t *k; /* the memory's kernels; NULL for host memory */
    int kind;        /* HS_TMEM_HOST or HS_TMEM_DEVICE */
    unsigned char *base;
    size_t len;
    size_t slot_bytes;             /* bytes of each staging buffer (device memory) */
    unsigned char *slot[MR_SLOTS]; /* staging buffers in the kernels' host memory */
    char what[48];                 /* for messages */
};

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

static size_t chunks_of(size_t len)
{
    return len == 0 ? 1 : (len + HS_TMR_CHUNK - 1) / HS_TMR_CHUNK;
}

static size_t chunk_len(size_t len, size_t i)
{
    size_t lo = i * HS_TMR_CHUNK;
    return len - lo < HS_TMR_CHUNK ? len - lo : HS_TMR_CHUNK;
}

/* Cancel whatever is still in flight (after an error). */
static void drop_all(hs_transport_t *t, hs_treq_t **req, int n)
{
    for (int i = 0; i < n; i++)
        if (req[i]) hs_transport_req_free(t, &req[i]);
}

/* Wait for req (a chunk's receive when expect != (size_t)-1: it must bring expect bytes). */
static int wait_chunk(hs_transport_t *t, hs_treq_t **req, size_t expect, size_t i,
                      const hs_tmr_t *m, int peer)
{
    hs_tstatus_t st;
    int rc = hs_transport_wait(t, req, -1, &st);
    if (*req) hs_transport_req_free(t, req);
    if (rc < 0) return rc;
    if (expect != (size_t)-1 && st.len != expect)
        return HS_ERR(-EPROTO,
                      "receive into %s: chunk %zu from rank %d brought %zu bytes, expected %zu "
                      "(the sender's length differs)",
                      m->what, i, peer, st.len, expect);
    return 0;
}

int hs_transport_send_mr(hs_transport_t *t, int peer, uint32_t tag, hs_tmr_t *mr, size_t off,
                         size_t len)
{
    HS_TRY(check_range(mr, off, len, "send_mr"));
    const size_t n = chunks_of(len);
    hs_treq_t *req[MR_WINDOW] = {0};
    const int staged = mr->slot[0] != NULL;
    const int w = staged ? MR_SLOTS : MR_WINDOW;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        hs_treq_t **r = &req[i % (size_t)w];
        if (*r && (rc = wait_chunk(t, r, (size_t)-1, i, mr, peer)) < 0) break;
        const size_t c = chunk_len(len, i);
        const unsigned char *src = mr->base + off + i * HS_TMR_CHUNK;
        if (staged) {
            unsigned char *slot = mr->slot[i % MR_SLOTS];
            if ((rc = mr->k->ops->to_host(mr->k, slot, src, c)) < 0) break;
            src = slot;
        }
        rc = hs_transport_isend(t, peer, tag, src, c, r);
    }
    for (int i = 0; i < w && rc == 0; i++)
        if (req[i]) rc = wait_chunk(t, &req[i], (size_t)-1, 0, mr, peer);
    if (rc < 0) {
        drop_all(t, req, w);
        hs_error_prefix("send of %zu bytes of %s to rank %d", len, mr->what, peer);
    }
    return rc;
}

int hs_transport_recv_mr(hs_transport_t *t, int peer, uint32_t tag, hs_tmr_t *mr, size_t off,
                         size_t len)
{
    HS_TRY(check_range(mr, off, len, "recv_mr"));
    if (peer < 0) return HS_ERR(-EINVAL, "recv_mr into %s: needs a named peer", mr->what);
    const size_t n = chunks_of(len);
    hs_treq_t *req[MR_WINDOW] = {0};
    const int staged = mr->slot[0] != NULL;
    const size_t w = staged ? MR_SLOTS : MR_WINDOW;
    int rc = 0;
    size_t posted = 0;
    /* receives posted ahead, in chunk order: chunk i waits in req[i % w] */
#define POST(i)                                                                                    \
    hs_transport_irecv(t, peer, tag,                                                               \
                       staged ? (void *)mr->slot[(i) % MR_SLOTS]                                   \
                              : (void *)(mr->base + off + (i)*HS_TMR_CHUNK),                       \
                       chunk_len(len, (i)), &req[(i) % w])
    for (; posted < n && posted < w && rc == 0; posted++) rc = POST(posted);
    for (size_t i = 0; i < n && rc == 0; i++) {
        const size_t c = chunk_len(len, i);
        if ((rc = wait_chunk(t, &req[i % w], c, i, mr, peer)) < 0) break;
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
        drop_all(t, req, (int)w);
        hs_error_prefix("receive of %zu bytes into %s from rank %d", len, mr->what, peer);
    }
    return rc;
}
