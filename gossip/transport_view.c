/*
 * gossip/transport_view.c — the generic layer of the zero-copy calls (include/hearsay/
 * transport.h): buffers a same-host receiver can map (hs_transport_buf_alloc) and receives
 * that hand the caller a pointer to the bytes where they lie (hs_transport_irecv_view).
 *
 * A backend that fills the optional slots (hsshm) does the work; for any other (libfabric,
 * the simulator, a composite) the calls fall back to plain memory and a receive into a
 * buffer the view owns: the same results with one copy more, so callers never branch.
 */
#include "hearsay/common.h"
#include "hearsay/transport.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A slot is usable when the table is large enough to hold it and it is filled. */
#define VIEW_HAS_OP(t, slot)                                                                       \
    ((t)->ops->size >= offsetof(hs_transport_ops_t, slot) + sizeof((t)->ops->slot) &&              \
     (t)->ops->slot != NULL)

/* The backend has the whole set of view slots (a partial set is not used). */
static int native_views(const hs_transport_t *t)
{
    return VIEW_HAS_OP(t, irecv_view) && VIEW_HAS_OP(t, view_wait) && VIEW_HAS_OP(t, view_release);
}

static int native_bufs(const hs_transport_t *t)
{
    return VIEW_HAS_OP(t, buf_alloc) && VIEW_HAS_OP(t, buf_free);
}

struct hs_tview {
    hs_treq_t *req;   /* the receive; NULL once a fallback receive completed */
    int native;       /* 1: the backend's view request; 0: a receive into own */
    int done;         /* 1 once complete */
    char *own;        /* fallback: (cap) the buffer received into */
    const void *data; /* the bytes, once complete */
    hs_tstatus_t st;
};

int hs_transport_buf_alloc(hs_transport_t *t, size_t len, void **buf)
{
    if (!buf) return HS_ERR(-EINVAL, "buf_alloc: no output pointer");
    *buf = NULL;
    if (native_bufs(t)) return t->ops->buf_alloc(t, len, buf);
    void *p = NULL;
    size_t n = (len + 63) / 64 * 64;
    if (posix_memalign(&p, 64, n ? n : 64) != 0)
        return HS_ERR(-ENOMEM, "out of memory for a message buffer of %zu bytes", len);
    memset(p, 0, n ? n : 64);
    *buf = p;
    return 0;
}

void hs_transport_buf_free(hs_transport_t *t, void **buf)
{
    if (!buf || !*buf) return;
    if (native_bufs(t))
        t->ops->buf_free(t, *buf);
    else
        free(*buf);
    *buf = NULL;
}

int hs_transport_has_peer_map(const hs_transport_t *t)
{
    return t && native_bufs(t) && VIEW_HAS_OP(t, buf_handle) && VIEW_HAS_OP(t, peer_map) &&
           VIEW_HAS_OP(t, peer_unmap);
}

int hs_transport_buf_handle(hs_transport_t *t, const void *buf, size_t len, hs_tbuf_handle_t *h)
{
    if (!t || !buf || !h) return HS_ERR(-EINVAL, "buf_handle: NULL argument");
    memset(h, 0, sizeof *h);
    if (!hs_transport_has_peer_map(t))
        return HS_ERR(-ENOSYS, "buf_handle: transport %s shares no buffers",
                      hs_transport_provider(t));
    return t->ops->buf_handle(t, buf, len, h);
}

int hs_transport_peer_map(hs_transport_t *t, int peer, const hs_tbuf_handle_t *h, void **ptr)
{
    if (!t || !h || !ptr) return HS_ERR(-EINVAL, "peer_map: NULL argument");
    *ptr = NULL;
    if (!hs_transport_has_peer_map(t))
        return HS_ERR(-ENOSYS, "peer_map: transport %s shares no buffers",
                      hs_transport_provider(t));
    if (peer < 0 || peer >= t->size || peer == t->rank)
        return HS_ERR(-EINVAL, "peer_map: rank %d is no peer of rank %d (of %d)", peer, t->rank,
                      t->size);
    return t->ops->peer_map(t, peer, h, ptr);
}

void hs_transport_peer_unmap(hs_transport_t *t, int peer, void **ptr)
{
    if (!t || !ptr || !*ptr) return;
    if (hs_transport_has_peer_map(t) && peer >= 0 && peer < t->size)
        t->ops->peer_unmap(t, peer, *ptr);
    *ptr = NULL;
}

int hs_transport_irecv_view(hs_transport_t *t, int peer, uint32_t tag, size_t cap,
                            hs_tview_t **view)
{
    if (!view) return HS_ERR(-EINVAL, "irecv_view: no output pointer");
    *view = NULL;
    if (peer < 0 || peer >= t->size)
        return HS_ERR(-EINVAL, "rank %d: irecv_view: peer %d is not a rank of this %d-rank job",
                      t->rank, peer, t->size);
    if (tag > HS_TAG_MAX)
        return HS_ERR(-EINVAL, "rank %d: irecv_view: tag %u is above HS_TAG_MAX (%u)", t->rank, tag,
                      HS_TAG_MAX);
    hs_tview_t *v = hs_calloc(1, sizeof *v, "view receive");
    if (!v) return -ENOMEM;
    int rc;
    if (native_views(t)) {
        v->native = 1;
        rc = t->ops->irecv_view(t, peer, tag, cap, &v->req);
    } else {
        v->own = cap ? hs_malloc(cap, "view receive buffer") : NULL;
        rc = cap && !v->own ? -ENOMEM : hs_transport_irecv(t, peer, tag, v->own, cap, &v->req);
    }
    if (rc < 0) {
        free(v->own);
        free(v);
        return rc;
    }
    *view = v;
    return 0;
}

int hs_transport_view_wait(hs_transport_t *t, hs_tview_t *v, double timeout_s, int *done)
{
    if (!v || !done) return HS_ERR(-EINVAL, "view_wait: no view");
    *done = 0;
    if (v->done) {
        *done = 1;
        return 0;
    }
    if (timeout_s < 0) timeout_s = t->opts.timeout_s;
    int rc;
    if (v->native) {
        rc = t->ops->view_wait(t, v->req, timeout_s, done, &v->data, &v->st);
    } else if (timeout_s == 0) {
        rc = hs_transport_test(t, &v->req, done, &v->st);
        if (rc < 0) v->req = NULL; /* a failed request is freed by the test */
        v->data = v->own;
    } else {
        rc = hs_transport_wait(t, &v->req, timeout_s, &v->st);
        if (rc == 0) *done = 1;
        v->data = v->own;
    }
    if (rc == 0 && *done) v->done = 1;
    return rc;
}

const void *hs_tview_data(const hs_tview_t *v)
{
    return v && v->done ? v->data : NULL;
}

size_t hs_tview_len(const hs_tview_t *v)
{
    return v && v->done ? v->st.len : 0;
}

int hs_tview_source(const hs_tview_t *v)
{
    return v && v->done ? v->st.source : -1;
}

void hs_transport_view_release(hs_transport_t *t, hs_tview_t **view)
{
    if (!view || !*view) return;
    hs_tview_t *v = *view;
    *view = NULL;
    if (v->native) {
        if (v->req) t->ops->view_release(t, &v->req);
    } else if (v->req) {
        hs_transport_req_free(t, &v->req);
    }
    free(v->own);
    free(v);
}
