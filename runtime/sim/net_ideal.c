/*
 * runtime/sim/net_ideal.c — the ideal network (no --link, no --sim-nic): a message arrives
 * the moment it is sent.
 */
#include "runtime/sim/sim_impl.h"

static double ideal_arrival(sim_net_t *net, int src, int dst, size_t len)
{
    (void)src;
    (void)dst;
    (void)len;
    return net->w->now;
}

static void ideal_advance(sim_net_t *net)
{
    (void)net;
}

const sim_net_ops_t hs_sim_net_ideal = {
    .name = "ideal",
    .arrival = ideal_arrival,
    .next_event = hs_sim_net_none,
    .advance = ideal_advance,
};
