/*
 * hearsay/rendezvous.h — the launcher side of the start-up rendezvous (`hearsay run`).
 *
 * A TCP server, run in a thread of the launcher, that admits only connections presenting the
 * job's key, tells every worker the others' hostnames once all have arrived, and answers
 * collective rounds (allgather, barrier) once every rank has contributed. Every wait is
 * bounded: a rank that never arrives, or leaves, fails the round for everyone with a message
 * naming the rank(s). The wire format is in gossip/rdv_proto.h; workers join through
 * hs_boot_init() (hearsay/bootstrap.h).
 *
 * Replacements (opts.rejoin): a worker that crashed after start-up (its connection closed
 * without BYE) may be replaced by a new process of the same rank while the job runs. Its HELLO
 * is admitted, it gets a WELCOME of its own, and its GATHERs for the rounds the job has
 * completed are answered at once from the stored results, its own contribution in its slot
 * (and kept there, for a later replacement of another rank). The live ranks see nothing of it.
 * A replacement takes no part in later rounds: a GATHER for a round the job has not completed
 * is an ERROR to the replacement alone.
 */
#ifndef HEARSAY_RENDEZVOUS_H
#define HEARSAY_RENDEZVOUS_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HS_JOB_KEY_CHARS 32 /* a job key: 128 bits as lowercase hex */

typedef struct hs_rdv_server hs_rdv_server_t;

typedef struct hs_rdv_server_opts {
    const char *bind_addr;  /* numeric address or hostname to listen on; NULL: 127.0.0.1 */
    int port;               /* 0: any free port */
    int size;               /* ranks in the job, 1..1024 */
    const char *key;        /* the job key (HS_JOB_KEY_CHARS hex digits) */
    double timeout_s;       /* bound on "all ranks connected" and on each round (0: 60 s) */
    double hello_timeout_s; /* a connection must present the key within this (0: min(5, timeout)) */
    FILE *log;              /* rejections and failures are logged here (NULL: stderr) */
    const char *log_prefix; /* put before each log line (NULL: "rendezvous: ") */
    int rejoin;             /* 1: admit a replacement for a rank gone without BYE (see above);
                             * the server then keeps every round's result, and the job counts
                             * as finished (state 1) only when no rank is gone without BYE */
} hs_rdv_server_opts_t;

/* Fill `out` (HS_JOB_KEY_CHARS + 1 bytes) with a fresh random key from /dev/urandom. */
int hs_rdv_key_generate(char *out);

/* Bind, listen and start serving in a background thread. */
int hs_rdv_server_start(hs_rdv_server_t **out, const hs_rdv_server_opts_t *opts);
/* The port actually bound (useful with opts.port == 0). */
int hs_rdv_server_port(const hs_rdv_server_t *s);
/* "HOST:PORT" that workers should use as HS_RDV (the bind address; the hostname when bound
 * to a wildcard address). Valid until hs_rdv_server_stop. */
const char *hs_rdv_server_addr(const hs_rdv_server_t *s);
/* 0 while the job is starting or running, 1 when every rank has left (said BYE or, without
 * opts.rejoin, closed its connection), negative when a round failed (the message is in the
 * log). */
int hs_rdv_server_state(const hs_rdv_server_t *s);
/* A file descriptor that becomes readable when the state leaves 0 (for poll()). */
int hs_rdv_server_event_fd(const hs_rdv_server_t *s);
/* Stop logging: the launcher is ending the job, and the rendezvous failures that follow
 * (ranks disconnecting) are consequences, not news. Workers still get ERROR answers. */
void hs_rdv_server_quiet(hs_rdv_server_t *s);
/* Stop the thread, close every connection and free; *s = NULL. Safe with *s == NULL. */
void hs_rdv_server_stop(hs_rdv_server_t **s);

#ifdef __cplusplus
}
#endif
#endif
