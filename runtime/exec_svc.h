/*
 * runtime/exec_svc.h — what both execution environments' services share (runtime/exec_svc.c):
 * a service's receive slots, copied from its description, posted, reposted and released.
 */
#ifndef HEARSAY_RUNTIME_EXEC_SVC_H
#define HEARSAY_RUNTIME_EXEC_SVC_H

#include "hearsay/exec.h"

typedef struct hs_svc_slots {
    int n;               /* receives kept posted */
    size_t bytes;        /* capacity of each */
    int *src;            /* (n) source of each */
    uint32_t *tag;       /* (n) tag of each */
    hs_treq_t **req;     /* (n) the posted receives (NULL: not posted) */
    unsigned char **buf; /* (n) their buffers */
} hs_svc_slots_t;

/* Copy desc's slots into sl (zeroed by the caller) and post every receive on t. On an error
 * what was made stays in sl for hs_svc_slots_close. */
int hs_svc_slots_open(hs_svc_slots_t *sl, hs_transport_t *t, const hs_service_desc_t *desc);
/* Post slot i again (after its message was handled). */
int hs_svc_slots_post(hs_svc_slots_t *sl, hs_transport_t *t, int i);
/* Hand a completed receive to the service's handler (desc->on_msg), inside an "apply" span
 * on the calling thread's track when x traces (--trace), where the message's flow ends. */
int hs_svc_handle(hs_exec_t *x, const hs_service_desc_t *desc, int slot, const void *buf,
                  const hs_tstatus_t *st);
/* The same for a handler run on whichever thread delivers the message (the simulator's pure
 * services): the "apply" span goes to the service's own track (hs_trace_track). */
int hs_svc_handle_inline(hs_exec_t *x, const hs_service_desc_t *desc, int slot, const void *buf,
                         const hs_tstatus_t *st);
/* Cancel the posted receives and free everything. */
void hs_svc_slots_close(hs_svc_slots_t *sl, hs_transport_t *t);

#endif
