/*
 * runtime/sim/net_rndv.c — the rendezvous protocol of --sim-proto rndv=BYTES (ofi_rxm's, over
 * tcp), a decorator over the network model that carries the message (net->inner): a message
 * above BYTES that the inner model would carry goes as a request to send, a read request back,
 * the data, and a closing message back, each carried by the inner model; the send completes
 * when the closing message is in. A message the inner model delivers at a time it knows at
 * the send (within a host) goes as it is. See sim_impl.h for the contract.
 */
#include "runtime/sim/sim_impl.h"

#include "hearsay/common.h"

/* x (a control message, or a rendezvous's data) goes on through the inner model now. The
 * event heap's room is unchanged (a message has just left it, x takes its place in the
 * inner model): carrying it cannot fail. */
static void enter(sim_net_t *net, sim_msg_t *x)
{
    x->at = INFINITY;
    (void)net->inner->ops->carry(net->inner, x);
}

/* A control message of a rendezvous (--sim-proto rndv=BYTES) is through (the clock is at
 * c->at). As libfabric's ofi_rxm over tcp: the sender's request to send (RTS) reaches the
 * receiver, which asks for the data with a read request; that goes back on the receiver's
 * own byte stream to the sender, behind what the receiver is sending it already; when it
 * reaches the sender the data follows on the sender's stream, and once the data is in, the
 * receiver's closing message (DONE) goes back the same way as the read request; the send
 * completes when it arrives. */
static void rndv_step(sim_net_t *net, sim_msg_t *c)
{
    sim_world_t *w = net->w;
    sim_msg_t *m = c->ref;
    if (c->kind == MSG_DONE) {
        if (c->sreq) {
            c->sreq->done = 1;
            c->sreq->msg = NULL;
            hs_sim_wake_rank(&w->rk[c->dst]);
        }
        hs_sim_ctrl_put(w, c);
        return;
    }
    if (m->reclaimed) { /* its sender took it back (unsent): the send has completed */
        w->in_flight[m->src]--;
        hs_sim_msg_put(w, m);
        hs_sim_ctrl_put(w, c);
        return;
    }
    sim_rank_t *d = &w->rk[m->dst];
    if (c->kind == MSG_RTS && (d->dead || d->left)) { /* nobody will read it: it goes where a
                                                       * message to the gone rank goes */
        hs_sim_ctrl_put(w, c);
        m->rndv = 0;
        m->ref = NULL;
        w->deliver(w, m);
        return;
    }
    if (c->kind == MSG_RTS && d->frozen_until > w->now) {
        /* frozen (SIGSTOP): its progress engine does not run, so it asks for nothing until it
         * thaws or ends (hs_sim_rndv_release); the sender's send stays open meanwhile */
        c->next = NULL;
        if (d->rts_held_tail)
            d->rts_held_tail->next = c;
        else
            d->rts_held = c;
        d->rts_held_tail = c;
        return;
    }
    c->seq = ++w->seq;
    if (c->kind == MSG_RTS) { /* the receiver's read request, on its stream to the sender */
        c->kind = MSG_RREQ;
        c->src = m->dst;
        c->dst = m->src;
        enter(net, c);
        return;
    }
    c->kind = MSG_DONE; /* (parked until the data is in) */
    enter(net, m);
}

void hs_sim_rndv_release(sim_world_t *w, sim_rank_t *d)
{
    while (d->rts_held) {
        sim_msg_t *c = d->rts_held;
        d->rts_held = c->next;
        if (!d->rts_held) d->rts_held_tail = NULL;
        c->next = NULL;
        rndv_step(w->net, c); /* (it holds requests only where w->net is this model) */
    }
}

/* A message the inner model would carry: above the threshold, its request to send goes first
 * (the data waits beside it, parked). */
static int rndv_carry(sim_net_t *net, sim_msg_t *m)
{
    sim_world_t *w = net->w;
    sim_msg_t *c = NULL;
    if (w->rndv_bytes > 0 && hs_sim_wire_of(m) > (size_t)w->rndv_bytes) {
        c = hs_sim_ctrl_get(w);
        if (!c) return HS_ERR(-ENOMEM, "sim: out of memory for a control message");
        size_t ccap = c->cap;
        *c = (sim_msg_t){.src = m->src,
                         .dst = m->dst,
                         .tag = m->tag,
                         .len = SIM_CTRL_BYTES,
                         .at = INFINITY,
                         .seq = ++w->seq,
                         .cap = ccap,
                         .kind = MSG_RTS,
                         .ref = m};
        m->rndv = 1;
        m->ref = c;
    }
    int rc = net->inner->ops->carry(net->inner, c ? c : m);
    if (rc < 0 && c) {
        m->rndv = 0;
        m->ref = NULL;
        hs_sim_ctrl_put(w, c);
    }
    return rc;
}

/* A message leaves the event heap: a control message takes its next step (consumed); the
 * data of a rendezvous is in, so its closing message goes back and completes the send (the
 * data itself is the transport's to deliver). */
static int rndv_arrived(sim_net_t *net, sim_msg_t *m)
{
    sim_world_t *w = net->w;
    if (m->kind != MSG_DATA) {
        rndv_step(net, m);
        return 1;
    }
    sim_rank_t *d = &w->rk[m->dst];
    if (m->rndv) { /* the data is in: the closing message goes back, and completes the send */
        sim_msg_t *c = m->ref;
        m->rndv = 0;
        m->ref = NULL;
        if (m->reclaimed || d->dead || d->left) {
            hs_sim_ctrl_put(w, c);
        } else {
            c->src = m->dst;
            c->dst = m->src;
            c->seq = ++w->seq;
            c->ref = NULL;
            c->sreq = m->sreq;
            if (c->sreq) c->sreq->msg = c;
            m->sreq = NULL;
            enter(net, c);
        }
    }
    return 0;
}

static double rndv_arrival(sim_net_t *net, int src, int dst, size_t len)
{
    return net->inner->ops->arrival(net->inner, src, dst, len);
}

static double rndv_next_event(const sim_net_t *net)
{
    return net->inner->ops->next_event(net->inner);
}

static void rndv_advance(sim_net_t *net)
{
    net->inner->ops->advance(net->inner);
}

static int rndv_reserve(sim_net_t *net, int cap)
{
    return net->inner->ops->reserve ? net->inner->ops->reserve(net->inner, cap) : 0;
}

static int rndv_each(sim_net_t *net, int (*fn)(sim_world_t *w, sim_msg_t *m, void *ctx), void *ctx)
{
    return net->inner->ops->each ? net->inner->ops->each(net->inner, fn, ctx) : 0;
}

const sim_net_ops_t hs_sim_net_rndv = {
    .name = "rndv",
    .arrival = rndv_arrival,
    .carry = rndv_carry,
    .next_event = rndv_next_event,
    .advance = rndv_advance,
    .arrived = rndv_arrived,
    .reserve = rndv_reserve,
    .each = rndv_each,
};
