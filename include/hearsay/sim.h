/*
 * hearsay/sim.h — `hearsay sim`: N workers of `hearsay train` in one process, on a virtual
 * clock, run by a discrete-event scheduler (runtime/sim/).
 *
 * Every rank runs the unchanged training loop (hs_train_in) and algorithms (optim/) against a
 * virtual execution environment (hearsay/exec.h: clock, sleep, waits, services, liveness,
 * barrier) and a simulated transport behind hs_transport_ops_t (tagged messages,
 * receive-from-any, probes, liveness; no RMA windows: EASGD takes its service path, the
 * all-reduce its ring). Each rank and each of its services is a thread of its own, but exactly
 * one runs at a time, chosen by the scheduler in a deterministic order: with a fixed compute
 * model a run is bit-for-bit repeatable whatever the machine's load.
 *
 * Time: a rank's gradient takes its compute model's duration (--sim-compute fixed:MS, or
 * measured: the thread CPU time the step really took); every other piece of its code takes
 * no virtual time. Messages travel over the link model of --link (hearsay/shaping.h: per-link
 * latency, seeded jitter, bandwidth, store and forward, never reordering); without --link
 * links are ideal (a message is delivered at the virtual time it was sent). See
 * docs/simulation.md for the model and what it leaves out.
 */
#ifndef HEARSAY_SIM_H
#define HEARSAY_SIM_H

#include "hearsay/train.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a run cost on the host (DIR/sim.json has the same). */
typedef struct hs_sim_stats {
    int threads;          /* --sim-threads used */
    double host_wall_s;   /* the ranks' run, set-up and data loading excluded */
    double host_cpu_s;    /* CPU time of the process over the same span, all threads */
    double worker_s;      /* wall seconds the baton spent in the workers' own code: training
                           * loop, algorithms, handlers, gradients run on the baton */
    double local_s;       /* wall seconds of gradients, all ranks (with threads > 1 most run
                           * off the baton, side by side, and overlap) */
    double overhead;      /* threads == 1: 1 - worker_s / host_wall_s, the share of the run
                           * spent in the simulator's own code (scheduling, thread switches,
                           * simulated transport, consensus); NAN with more threads */
    long steps;           /* gradients computed, over all ranks */
    double steps_per_s;   /* steps / host_wall_s */
    double peak_rss_mib;  /* the process's peak resident memory at the end (getrusage) */
    double payload_scale; /* --sim-payload: wire bytes per proxy byte of a message's body (0:
                           * no payload, messages are their own size) */
    double wire_bytes;    /* bytes of every message between ranks, as the network model
                           * carried them (the payload's sizes under --sim-payload) */
} hs_sim_stats_t;

typedef struct hs_sim_opts {
    int n;                 /* simulated ranks (>= 1) */
    int ranks_per_host;    /* consecutive ranks per host for host-scoped link rules (<= 0: n) */
    const char *compute;   /* "fixed:MS" (default fixed:10), "bench", "measured" (a gradient
                            * step: its thread CPU time) or "measured-all" (also the rest of
                            * the workers' code: mixing, optimizer step, evaluations) */
    double stack_mib;      /* stack of each simulated thread (0: 2 MiB) */
    const char *nic;       /* each host's NIC rate ("10Gbit"; NULL: none): inter-host messages
                            * go through the sending and the receiving host's NIC */
    const char *nic_share; /* how a NIC serves concurrent messages: "fair" (NULL: max-min fair
                            * shares among rank pairs, as TCP flows) or "fifo" (one after the
                            * other, in the order sent) */
    const char *proto;     /* what the transport does inside a transfer between hosts (NULL:
                            * nothing): a comma list of rndv=BYTES (messages above BYTES go
                            * by a read rendezvous, as libfabric ofi_rxm's), acks (TCP's
                            * acknowledgements share the reverse direction) or rxm (both, at
                            * ofi_rxm's defaults); needs nic with fair sharing */
    int threads;           /* host threads that run ranks' gradients at once (<= 0: the online
                            * CPUs); results are identical whatever the count */
    hs_sim_stats_t *stats; /* optional: filled at the end of a run */
    const char *payload;   /* size-true messages (NULL: off): a model whose messages they
                            * carry ("resnet50", any --model spec, "bytes:N"); see
                            * hs_sim_payload_parse and docs/simulation.md */
} hs_sim_opts_t;

/* Check a --sim-compute spec: 0, or -EINVAL naming the bad part. *fixed_s gets the fixed
 * duration in seconds, 0 for "bench" (measured at the start of the run), -1 for "measured"
 * or -2 for "measured-all". */
int hs_sim_compute_parse(const char *spec, double *fixed_s);

/* --sim-payload SPEC: the parameter count of the model whose messages the simulated ranks
 * carry. SPEC is a named model of another framework (resnet18, resnet50, resnet101, vgg16:
 * torchvision's ImageNet models), "bytes:N" (N bytes of floats: N / 4 parameters; K, M, G
 * suffixes are powers of 1024) or "params:N", or a hearsay --model spec checked against the
 * data shape (in_c x in_h x in_w inputs, classes labels; in_c 0: the shape is not known yet
 * and a --model spec is accepted unchecked with *params 0). 0, or -EINVAL naming SPEC. */
int hs_sim_payload_parse(const char *spec, int in_c, int in_h, int in_w, int classes,
                         double *params);

/* Check a --sim-nic rate ("10Gbit"): 0 and *Bps in bytes per second, or -EINVAL naming it. */
int hs_sim_nic_parse(const char *rate, double *Bps);

/* Check a --sim-nic-share policy ("fair", NULL: fair, or "fifo"): 0 and *fair, or -EINVAL. */
int hs_sim_nic_share_parse(const char *share, int *fair);

/* Check a --sim-proto spec ("rxm", "rndv=131072,acks", NULL: none): 0, *rndv_bytes (0: no
 * rendezvous) and *acks, or -EINVAL naming the bad part. */
int hs_sim_proto_parse(const char *spec, long *rndv_bytes, int *acks);

/* Run o (as `hearsay train` would on so->n ranks) in virtual time. Files as hearsay train
 * writes them (summary.json gains "clock": "virtual"). *res: rank 0's result. Returns 0, or
 * the first error of a rank (with its message). */
int hs_sim_run(const hs_train_opts_t *o, const hs_sim_opts_t *so, hs_train_result_t *res);

#ifdef __cplusplus
}
#endif
#endif
