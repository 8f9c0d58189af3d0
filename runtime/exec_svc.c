/* runtime/exec_svc.c — a service's receive slots (runtime/exec_svc.h). */
#include "runtime/exec_svc.h"

#include "hearsay/common.h"

#include <stdlib.h>
#include <string.h>

int hs_svc_slots_post(hs_svc_slots_t *sl, hs_transport_t *t, int i)
{
    return hs_transport_irecv(t, sl->src[i], sl->tag[i], sl->buf[i], sl->bytes, &sl->req[i]);
}

int hs_svc_slots_open(hs_svc_slots_t *sl, hs_transport_t *t, const hs_service_desc_t *desc)
{
    size_t n = (size_t)desc->n_slots;
    sl->n = desc->n_slots;
    sl->bytes = desc->slot_bytes;
    sl->src = hs_malloc(n * sizeof *sl->src, "service sources");
    sl->tag = hs_malloc(n * sizeof *sl->tag, "service tags");
    sl->req = hs_calloc(n, sizeof *sl->req, "service receives");
    sl->buf = hs_calloc(n, sizeof *sl->buf, "service buffers");
    if (!sl->src || !sl->tag || !sl->req || !sl->buf) return -ENOMEM;
    memcpy(sl->src, desc->src, n * sizeof *sl->src);
    memcpy(sl->tag, desc->tag, n * sizeof *sl->tag);
    for (int i = 0; i < sl->n; i++) {
        if (!(sl->buf[i] = hs_malloc(HS_MAX(sl->bytes, (size_t)1), "service buffer")))
            return -ENOMEM;
        HS_TRY(hs_svc_slots_post(sl, t, i));
    }
    return 0;
}

int hs_svc_handle(hs_exec_t *x, const hs_service_desc_t *desc, int slot, const void *buf,
                  const hs_tstatus_t *st)
{
    hs_trace_t *tr = x->trace;
    if (__builtin_expect(tr == NULL, 1)) return desc->on_msg(desc->ctx, slot, buf, st);
    hs_trace_thread(tr, desc->name); /* this thread's track is the service's */
    hs_trace_apply_begin(tr, x->rank, buf, st);
    int rc = desc->on_msg(desc->ctx, slot, buf, st);
    hs_trace_end(tr, HS_TR_APPLY);
    return rc;
}

int hs_svc_handle_inline(hs_exec_t *x, const hs_service_desc_t *desc, int slot, const void *buf,
                         const hs_tstatus_t *st)
{
    hs_trace_t *tr = x->trace;
    if (__builtin_expect(tr == NULL, 1)) return desc->on_msg(desc->ctx, slot, buf, st);
    hs_trace_thr_t *th = hs_trace_track(tr, desc->name);
    if (th)
        hs_trace_thr_ev(th, 'B', HS_TR_APPLY, st->source,
                        hs_trace_flow_id(st->source, x->rank, st->tag, buf, st->len),
                        (int64_t)st->len);
    int rc = desc->on_msg(desc->ctx, slot, buf, st);
    if (th) hs_trace_thr_ev(th, 'E', HS_TR_APPLY, -1, 0, 0);
    return rc;
}

void hs_svc_slots_close(hs_svc_slots_t *sl, hs_transport_t *t)
{
    for (int i = 0; i < sl->n; i++) {
        if (sl->req && sl->req[i]) hs_transport_req_free(t, &sl->req[i]);
        if (sl->buf) free(sl->buf[i]);
    }
    free(sl->req);
    free(sl->buf);
    free(sl->src);
    free(sl->tag);
    memset(sl, 0, sizeof *sl);
}
