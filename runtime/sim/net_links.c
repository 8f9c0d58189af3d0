/*
 * runtime/sim/net_links.c — the network model of --link without --sim-nic: each rank's
 * shaper (hearsay/shaping.h: store and forward at the link's bandwidth, plus latency and
 * seeded jitter, never reordering a link) gives a message's arrival at the send.
 */
#include "runtime/sim/sim_impl.h"

static double links_arrival(sim_net_t *net, int src, int dst, size_t len)
{
    sim_world_t *w = net->w;
    double t = w->now;
    if (w->rk[src].shaper) t = hs_shaper_release(w->rk[src].shaper, dst, len, t);
    return t < w->now ? w->now : t;
}

static void links_advance(sim_net_t *net)
{
    (void)net;
}

const sim_net_ops_t hs_sim_net_links = {
    .name = "links",
    .arrival = links_arrival,
    .next_event = hs_sim_net_none,
    .advance = links_advance,
};
