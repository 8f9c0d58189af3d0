/*
 * runtime/sim/net_fifo.c — the network model of --sim-nic RATE --sim-nic-share fifo: each
 * host's NIC sends, and takes in, one message after the other, first in first out, with the
 * --link shaper between them. It knows every arrival at the send (it carries nothing).
 */
#include "runtime/sim/sim_impl.h"

#include "hearsay/common.h"

/* When a message of len bytes sent now from src reaches dst: the sending host's NIC
 * serialises it (inter-host only, --sim-nic), the link carries it (--link: bandwidth,
 * latency, jitter), the receiving host's NIC takes it in, shared with the host's other
 * arrivals (cut through: an idle NIC adds nothing to the last byte's arrival). */
static double deliver_time(sim_world_t *w, int src, int dst, size_t len)
{
    double t = w->now;
    int hs = src / w->rph, hd = dst / w->rph, nic = w->nic_Bps > 0 && hs != hd;
    if (nic) {
        double tx = HS_MAX(t, w->nic_tx[hs]) + (double)len / w->nic_Bps;
        w->nic_tx[hs] = tx;
        t = tx;
    }
    if (w->rk[src].shaper) t = hs_shaper_release(w->rk[src].shaper, dst, len, t);
    if (nic) { /* the receiving NIC takes the bytes in as they arrive (cut through): done
                * when the last has arrived, or len / nic after it is free again */
        double rx = HS_MAX(t, w->nic_rx[hd] + (double)len / w->nic_Bps);
        w->nic_rx[hd] = rx;
        t = rx;
    }
    return t < w->now ? w->now : t;
}

static double fifo_arrival(sim_net_t *net, int src, int dst, size_t len)
{
    return deliver_time(net->w, src, dst, len);
}

static void fifo_advance(sim_net_t *net)
{
    (void)net;
}

const sim_net_ops_t hs_sim_net_fifo = {
    .name = "fifo",
    .arrival = fifo_arrival,
    .next_event = hs_sim_net_none,
    .advance = fifo_advance,
};
