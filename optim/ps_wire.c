/*
 * optim/ps_wire.c — the frame of the loop's own messages (hearsay/algo.h's hs_dist_frame_*):
 * the training messages' wire header (optim/ps_wire.h), which stays private to optim/, written
 * and read for runtime/'s evaluation snapshots and end-of-run results.
 */
#include "optim/ps_wire.h"

#include "hearsay/algo.h"

#include <string.h>

_Static_assert(sizeof(hs_ps_hdr_v1_t) == HS_DIST_FRAME_BYTES,
               "hearsay/algo.h's frame size is the wire header's");
_Static_assert(sizeof(((hs_ps_hdr_v1_t *)0)->aux) == HS_DIST_FRAME_AUX * sizeof(double),
               "hearsay/algo.h's aux count is the wire header's");
_Static_assert((int)HS_DIST_MSG_EVAL == (int)HS_PS_EVAL &&
                   (int)HS_DIST_MSG_FINAL == (int)HS_PS_FINAL,
               "hearsay/algo.h's message kinds are the wire's");

void hs_dist_frame_write(void *buf, hs_dist_msg_t kind, int sender, size_t n,
                         const hs_dist_frame_t *f)
{
    hs_ps_hdr_v1_t h;
    hs_ps_hdr_init(&h, (hs_ps_kind_t)kind, sender, f->iteration, f->weight, n);
    h.extra = f->extra;
    memcpy(h.aux, f->aux, sizeof h.aux);
    memcpy(buf, &h, sizeof h);
}

int hs_dist_frame_read(const void *buf, size_t bytes, hs_dist_msg_t kind, int source, size_t n,
                       hs_dist_frame_t *f)
{
    hs_ps_hdr_v1_t h;
    if (bytes < sizeof h)
        return HS_ERR(-EPROTO, "message from rank %d: %zu bytes, shorter than a header", source,
                      bytes);
    memcpy(&h, buf, sizeof h);
    int rc = hs_ps_hdr_check(&h, bytes, (hs_ps_kind_t)kind, source, n);
    if (rc < 0) return rc;
    f->iteration = (long)h.iteration;
    f->weight = h.weight;
    f->extra = h.extra;
    memcpy(f->aux, h.aux, sizeof f->aux);
    return 0;
}
