/*
 * runtime/sim/net_fair.c — the network model of --sim-nic RATE with --sim-nic-share fair (the
 * default). A message between two hosts is a flow through the sending host's NIC (tx) and the
 * receiving host's (rx). The flows of different rank pairs share each NIC as TCP connections share
 * a bottleneck: max-min fair rates (below), recomputed whenever a flow starts or ends; the messages
 * of one pair (one connection, one byte stream) go one after the other. When a message's last byte
 * is through, the link model (--link) takes it from there; without one it is delivered then.
 * Messages within a host go by the links alone (net_links.c), their arrival known at the send. See
 * sim_impl.h for the contract.
 */
#include "runtime/sim/sim_impl.h"

#include "hearsay/common.h"

#include <stdlib.h>
#include <string.h>

static int host_of(const sim_world_t *w, int rank)
{
    return rank / w->rph;
}

/* Every active flow's bytes left, brought to the time now. */
static void flows_progress(sim_world_t *w)
{
    double dt = w->now - w->flows_t;
    if (dt > 0)
        for (sim_msg_t *m = w->flows; m; m = m->next)
            if (m->active) {
                m->rem -= m->rate * dt;
                if (m->rem < 0) m->rem = 0;
            }
    w->flows_t = w->now;
}

/* Max-min fair rates by progressive filling: of the NICs (tx, then rx, by host) that still
 * carry flows without a rate, the one whose rate left divided by those flows is the smallest
 * (the first such, on a tie) gives each of them that share, which is taken from the other NIC
 * each of them crosses; until every flow has its rate. */
/* With TCP's acknowledgements (--sim-proto acks), a flow at rate r also takes a * r of the
 * reverse direction (the receiving host's transmit side, the sending host's receive side), a
 * = w->ack_share: progressive filling with those weights (a side's flows without a rate grow
 * together, a side is full when its rate left equals (flows + a x reverse flows) x r). */
/* The flows of side (rx, h) to give a rate when it is the bottleneck, in the flows' order: the
 * flows whose data crosses it, and with acknowledgements (a > 0) those whose acknowledgements
 * do (a flow is between two hosts: no flow is in both). Merged by position in the flows' list
 * (each group is in that order). */
static void share_side(sim_world_t *w, int brx, int bh, double best, double a)
{
    sim_msg_t **x = brx ? w->by_dst + w->dst_at[bh] : w->by_src + w->src_at[bh];
    sim_msg_t **y = brx ? w->by_src + w->src_at[bh] : w->by_dst + w->dst_at[bh];
    int nx = brx ? w->dst_at[bh + 1] - w->dst_at[bh] : w->src_at[bh + 1] - w->src_at[bh];
    int ny =
        a > 0 ? (brx ? w->src_at[bh + 1] - w->src_at[bh] : w->dst_at[bh + 1] - w->dst_at[bh]) : 0;
    for (int i = 0, j = 0; i < nx || j < ny;) {
        sim_msg_t *m = j >= ny || (i < nx && x[i]->ord < y[j]->ord) ? x[i++] : y[j++];
        if (m->rate >= 0) continue;
        int hs = host_of(w, m->src), hd = host_of(w, m->dst);
        m->rate = best;
        w->nic_tx[hs] = HS_MAX(w->nic_tx[hs] - best, 0.0);
        w->nic_rx[hd] = HS_MAX(w->nic_rx[hd] - best, 0.0);
        w->nic_ntx[hs]--;
        w->nic_nrx[hd]--;
        if (a > 0) {
            w->nic_tx[hd] = HS_MAX(w->nic_tx[hd] - a * best, 0.0);
            w->nic_rx[hs] = HS_MAX(w->nic_rx[hs] - a * best, 0.0);
            w->nic_atx[hd]--;
            w->nic_arx[hs]--;
        }
    }
}

/* HS_TEST_SIM_FAIR_CHECK (tests): the rates flows_share gave, against the reference
 * progressive filling that scans every flow for every side it gives out (the simulator's
 * before issue 29), on scratch copies of the sides; a rate that differs in a bit is counted
 * (w->fair_mismatches) and fails the run. */
static void flows_share_check(sim_world_t *w)
{
    int nh = (w->n + w->rph - 1) / w->rph;
    double a = w->ack_share, *tx = w->nic_tx, *rx = w->nic_rx; /* (restored below) */
    int *ntx = w->nic_ntx, *nrx = w->nic_nrx, *atx = w->nic_atx, *arx = w->nic_arx;
    int nf = 0;
    for (sim_msg_t *m = w->flows; m; m = m->next)
        if (m->active) w->check_rate[nf++] = m->rate;
    for (int h = 0; h < nh; h++) {
        tx[h] = rx[h] = w->nic_Bps;
        ntx[h] = nrx[h] = atx[h] = arx[h] = 0;
    }
    for (sim_msg_t *m = w->flows; m; m = m->next)
        if (m->active) {
            m->rate = -1;
            ntx[host_of(w, m->src)]++;
            nrx[host_of(w, m->dst)]++;
            if (a > 0) {
                atx[host_of(w, m->dst)]++;
                arx[host_of(w, m->src)]++;
            }
        }
    for (;;) {
        double best = INFINITY;
        int bh = -1, brx = 0;
        for (int h = 0; h < nh; h++) {
            double k = ntx[h] + a * atx[h];
            if (ntx[h] + atx[h] > 0 && tx[h] / k < best) best = tx[h] / k, bh = h, brx = 0;
        }
        for (int h = 0; h < nh; h++) {
            double k = nrx[h] + a * arx[h];
            if (nrx[h] + arx[h] > 0 && rx[h] / k < best) best = rx[h] / k, bh = h, brx = 1;
        }
        if (bh < 0) break;
        for (sim_msg_t *m = w->flows; m; m = m->next) {
            int hs = host_of(w, m->src), hd = host_of(w, m->dst);
            if (!m->active || m->rate >= 0) continue;
            if ((brx ? hd : hs) != bh && !(a > 0 && (brx ? hs : hd) == bh)) continue;
            m->rate = best;
            tx[hs] = HS_MAX(tx[hs] - best, 0.0);
            rx[hd] = HS_MAX(rx[hd] - best, 0.0);
            ntx[hs]--;
            nrx[hd]--;
            if (a > 0) {
                tx[hd] = HS_MAX(tx[hd] - a * best, 0.0);
                rx[hs] = HS_MAX(rx[hs] - a * best, 0.0);
                atx[hd]--;
                arx[hs]--;
            }
        }
    }
    nf = 0;
    for (sim_msg_t *m = w->flows; m; m = m->next)
        if (m->active) {
            if (memcmp(&m->rate, &w->check_rate[nf], sizeof m->rate) != 0) w->fair_mismatches++;
            m->rate = w->check_rate[nf++]; /* (flows_share's stands) */
        }
}

/* The same progressive filling as a scan of every flow for every side given out would do, in
 * the same order and with the same arithmetic (every rate and every bytes-left bit for bit):
 * but each round looks only at the sides that still have flows without a rate and at the
 * flows of the side it gives out, so a recomputation costs O(flows + sides^2), not O(flows x
 * sides) (the complete graph on 64 hosts: 4,032 flows through 128 sides). */
static void flows_share(sim_world_t *w)
{
    int nh = (w->n + w->rph - 1) / w->rph;
    double a = w->ack_share;
    for (int h = 0; h < nh; h++) {
        w->nic_tx[h] = w->nic_rx[h] = w->nic_Bps;
        w->nic_ntx[h] = w->nic_nrx[h] = w->nic_atx[h] = w->nic_arx[h] = 0;
    }
    int nf = 0;
    for (sim_msg_t *m = w->flows; m; m = m->next)
        if (m->active) {
            m->rate = -1;
            m->ord = nf++;
            w->nic_ntx[host_of(w, m->src)]++;
            w->nic_nrx[host_of(w, m->dst)]++;
            if (a > 0) {
                w->nic_atx[host_of(w, m->dst)]++;
                w->nic_arx[host_of(w, m->src)]++;
            }
        }
    /* the active flows by sending host and by receiving host, each in the flows' order */
    w->src_at[0] = w->dst_at[0] = 0;
    for (int h = 0; h < nh; h++) {
        w->src_at[h + 1] = w->src_at[h] + w->nic_ntx[h];
        w->dst_at[h + 1] = w->dst_at[h] + w->nic_nrx[h];
    }
    for (sim_msg_t *m = w->flows; m; m = m->next)
        if (m->active) {
            int hs = host_of(w, m->src), hd = host_of(w, m->dst);
            w->by_src[w->src_at[hs]++] = m;
            w->by_dst[w->dst_at[hd]++] = m;
        }
    for (int h = nh; h > 0; h--) { /* (back to the groups' starts) */
        w->src_at[h] = w->src_at[h - 1];
        w->dst_at[h] = w->dst_at[h - 1];
    }
    w->src_at[0] = w->dst_at[0] = 0;
    /* the sides with flows, in the order the scan below would meet them: (rx, host) */
    int ns = 0;
    for (int h = 0; h < nh; h++)
        if (w->nic_ntx[h] + w->nic_atx[h] > 0) w->sides[ns++] = h;
    for (int h = 0; h < nh; h++)
        if (w->nic_nrx[h] + w->nic_arx[h] > 0) w->sides[ns++] = nh + h;
    for (;;) {
        double best = INFINITY;
        int bh = -1, brx = 0, live = 0;
        for (int i = 0; i < ns; i++) {
            int sd = w->sides[i], rx = sd >= nh, h = rx ? sd - nh : sd;
            int cnt = rx ? w->nic_nrx[h] + w->nic_arx[h] : w->nic_ntx[h] + w->nic_atx[h];
            if (cnt <= 0) continue; /* (done: dropped from the list) */
            w->sides[live++] = sd;
            double k = rx ? w->nic_nrx[h] + a * w->nic_arx[h] : w->nic_ntx[h] + a * w->nic_atx[h];
            double c = rx ? w->nic_rx[h] : w->nic_tx[h];
            if (c / k < best) {
                best = c / k;
                bh = h;
                brx = rx;
            }
        }
        ns = live;
        if (bh < 0) break;
        share_side(w, brx, bh, best, a);
    }
    if (w->fair_check) flows_share_check(w);
}

/* 1 when an active flow is through: its last byte, to a billionth of the message, or so
 * little left that the clock cannot move by its time (a few bytes late in a long run: now +
 * rem / rate == now, where waiting for them would never end). */
static int flow_through(const sim_world_t *w, const sim_msg_t *m)
{
    return m->rem <= 1e-9 * (double)hs_sim_wire_of(m) ||
           (m->rate > 0 && w->now + m->rem / m->rate <= w->now);
}

/* After flows_progress: hand the flows that are through (flow_through) to the link model,
 * start the next message of their pair, share the NICs anew and find when the next flow will
 * be through. The heap has room (flows_add). */
static void flows_settle(sim_world_t *w)
{
    for (int done = 1; done;) {
        done = 0;
        sim_msg_t **pp = &w->flows, *prev = NULL;
        while (*pp) {
            sim_msg_t *m = *pp;
            if (!m->active || !flow_through(w, m)) {
                prev = m;
                pp = &m->next;
                continue;
            }
            *pp = m->next;
            w->nflows--;
            if (w->flows_tail == m) w->flows_tail = prev;
            for (sim_msg_t *q = m->next; q; q = q->next)
                if (q->src == m->src && q->dst == m->dst) {
                    q->active = 1;
                    break;
                }
            double at = w->now;
            if (w->rk[m->src].shaper)
                at = hs_shaper_release(w->rk[m->src].shaper, m->dst, hs_sim_wire_of(m), at);
            m->at = at < w->now ? w->now : at;
            m->next = NULL;
            (void)hs_sim_event_push(w, m); /* cannot fail: room kept */
            done = 1;
        }
    }
    flows_share(w);
    w->flows_next = INFINITY;
    for (sim_msg_t *m = w->flows; m; m = m->next)
        if (m->active && m->rate > 0 && w->now + m->rem / m->rate < w->flows_next)
            w->flows_next = w->now + m->rem / m->rate;
}

/* A message enters the NICs now (its fields set; the heap has room for it). */
static void flows_enter(sim_world_t *w, sim_msg_t *m)
{
    flows_progress(w);
    m->active = 1;
    for (sim_msg_t *q = w->flows; q && m->active; q = q->next)
        if (q->src == m->src && q->dst == m->dst) m->active = 0;
    m->rem = (double)hs_sim_wire_of(m);
    m->rate = 0;
    m->next = NULL;
    if (w->flows_tail)
        w->flows_tail->next = m;
    else
        w->flows = m;
    w->flows_tail = m;
    w->nflows++;
    flows_settle(w);
}

/* A message enters the NICs now (its fields set, in_flight counted). */
static int flows_add(sim_world_t *w, sim_msg_t *m)
{
    HS_TRY(hs_sim_event_reserve(w, w->nflows + 1));
    flows_enter(w, m);
    return 0;
}

/* Within a host: the links' answer; between hosts: the NICs carry it (INFINITY). */
static double fair_arrival(sim_net_t *net, int src, int dst, size_t len)
{
    sim_world_t *w = net->w;
    if (host_of(w, src) != host_of(w, dst)) return INFINITY;
    return hs_sim_net_links.arrival(net, src, dst, len);
}

static int fair_carry(sim_net_t *net, sim_msg_t *m)
{
    return flows_add(net->w, m);
}

static double fair_next_event(const sim_net_t *net)
{
    return net->w->flows_next;
}

static void fair_advance(sim_net_t *net)
{
    flows_progress(net->w);
    flows_settle(net->w);
}

/* flows_share's scratch: every message in flight may be a flow. */
static int fair_reserve(sim_net_t *net, int nc)
{
    sim_world_t *w = net->w;
    sim_msg_t **a = realloc(w->by_src, (size_t)nc * sizeof *a);
    if (!a) return HS_ERR(-ENOMEM, "out of memory for messages in flight");
    w->by_src = a;
    sim_msg_t **b = realloc(w->by_dst, (size_t)nc * sizeof *b);
    if (!b) return HS_ERR(-ENOMEM, "out of memory for messages in flight");
    w->by_dst = b;
    double *c = realloc(w->check_rate, (size_t)nc * sizeof *c);
    if (!c) return HS_ERR(-ENOMEM, "out of memory for messages in flight");
    w->check_rate = c;
    return 0;
}

static int fair_each(sim_net_t *net, int (*fn)(sim_world_t *w, sim_msg_t *m, void *ctx), void *ctx)
{
    int n = 0;
    for (sim_msg_t *m = net->w->flows; m; m = m->next) n += fn(net->w, m, ctx);
    return n;
}

const sim_net_ops_t hs_sim_net_fair = {
    .name = "fair",
    .arrival = fair_arrival,
    .carry = fair_carry,
    .next_event = fair_next_event,
    .advance = fair_advance,
    .reserve = fair_reserve,
    .each = fair_each,
};
