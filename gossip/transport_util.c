/*
 * gossip/transport_util.c — what the transport backends share (gossip/transport_impl.h):
 * contexts, calls through an ops table, the CTRL barrier, a look at a pid. The bottom layer:
 * it calls no other part of the transport, so a backend never calls back into the generic
 * layer (gossip/transport.c) or into another backend.
 */
#include "gossip/transport_impl.h"
#include "hearsay/common.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hs_op_missing(const hs_transport_t *t, const char *slot)
{
    return HS_ERR(-ENOSYS, "transport backend %s has no '%s' operation", t->ops->name, slot);
}

int hs_transport_ctx_new(hs_transport_t **out, const hs_transport_ops_t *ops, int rank, int size,
                         const hs_transport_opts_t *o)
{
    hs_transport_t *t = hs_calloc(1, sizeof *t, "transport");
    *out = t;
    if (!t) return -ENOMEM;
    t->ops = ops;
    t->rank = rank;
    t->size = size;
    t->opts = *o;
    /* The option strings belong to the caller; the backend copies what it keeps. */
    t->opts.provider = NULL;
    t->opts.shaping = NULL;
    return 0;
}

int hs_transport_ctx_create(hs_transport_t **out, const hs_transport_ops_t *ops, int rank, int size,
                            int all_local, const hs_transport_opts_t *o)
{
    HS_TRY(hs_transport_ctx_new(out, ops, rank, size, o));
    int rc = HS_OP(*out, create, o, all_local);
    if (rc < 0) hs_transport_ctx_close(out);
    return rc;
}

void hs_transport_ctx_close(hs_transport_t **t)
{
    if (!t || !*t) return;
    /* a close (a flush, hs_fab_flush) may fail requests of its own: the message of the
     * failure that led to the close stays the thread's error */
    hs_error_kept_t kept;
    hs_error_keep(&kept);
    if ((*t)->impl && (*t)->ops->close) (*t)->ops->close(*t);
    hs_error_restore(&kept);
    HS_FREE(*t);
}

void hs_op_req_free(hs_transport_t *t, hs_treq_t **req)
{
    if (!req || !*req) return;
    if (HS_OP_HAS(t, req_free)) t->ops->req_free(t, req);
    *req = NULL;
}

void hs_op_win_free(hs_transport_t *t, hs_twin_t **win)
{
    if (!win || !*win) return;
    if (HS_OP_HAS(t, win_free)) t->ops->win_free(t, win);
    *win = NULL;
}

const char *hs_op_provider(const hs_transport_t *t)
{
    return HS_OP_HAS(t, provider) ? t->ops->provider(t) : t->ops->name;
}

int hs_op_shaped(const hs_transport_t *t, int peer)
{
    if (!t || peer >= t->size || !HS_OP_HAS(t, shaped)) return 0;
    return t->ops->shaped(t, peer < 0 ? -1 : peer) == 1;
}

uint32_t hs_op_caps(const hs_transport_t *t)
{
    if (t->ops->size < offsetof(hs_transport_ops_t, caps) + sizeof t->ops->caps) return 0;
    uint32_t c = t->ops->caps;
    if (HS_OP_HAS(t, caps_of)) c &= t->ops->caps_of(t);
    return c;
}

int hs_transport_ctrl_barrier(hs_transport_t *t, uint32_t tag, hs_ctrl_isend_fn isend,
                              hs_ctrl_irecv_fn irecv)
{
    int n = t->size, me = t->rank;
    char out = 1, in[1];
    int round = 0;
    for (int k = 1; k < n; k <<= 1, round++) {
        hs_treq_t *rq[2] = {NULL, NULL};
        uint32_t rtag = tag | ((uint32_t)round << 8);
        HS_TRY(irecv(t, (me - k + n) % n, rtag, in, sizeof in, &rq[0]));
        int rc = isend(t, (me + k) % n, rtag, &out, 1, &rq[1]);
        for (int done = 0; rc == 0 && done < 2; done++) {
            int idx;
            rc = t->ops->waitany(t, rq, 2, t->opts.timeout_s, &idx, NULL);
        }
        if (rc < 0) {
            for (int i = 0; i < 2; i++)
                if (rq[i]) t->ops->req_free(t, &rq[i]);
            hs_error_prefix("barrier round %d", round);
            return rc;
        }
    }
    return 0;
}

int hs_pid_gone(unsigned pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%u/stat", pid);
    FILE *fp = fopen(path, "r");
    if (!fp) return errno == ENOENT;
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}
