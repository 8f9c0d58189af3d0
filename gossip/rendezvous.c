/*
 * gossip/rendezvous.c — the launcher side of the start-up rendezvous (hearsay/rendezvous.h).
 *
 * One thread, one poll() loop over the listening socket, every connection and a wake-up pipe.
 * Connections are non-blocking; each has an input state machine (24-byte header, then the
 * payload) and an output queue. The job moves through two phases: "welcome" (waiting for all
 * HELLOs) and "rounds" (collective round k = 1, 2, ... gathering one contribution per rank).
 * Any rank that leaves, any bounded wait that expires, any protocol error from an admitted
 * rank fails the job: every admitted rank gets an ERROR naming the rank(s) at fault.
 *
 * Admission first (issue 28 item 4): connections that have not presented the job key are
 * bounded, PENDING_MAX in all and PENDING_PER_SOURCE from one address; a new connection past
 * either bound drops the oldest such connection (of that address, else of all), after one
 * last look at its input (a worker's HELLO already there admits it instead). Each has
 * hello_timeout_s (default 5 s) to present the key. A new connection's input is read at
 * once, so a worker is admitted before any later stranger can push it out; a dropped or
 * refused connection is told why (an ERROR starting "rendezvous busy:", on which a worker
 * connects again while its start-up deadline lasts). Refused connections that linger to
 * deliver their ERROR are bounded too (CLOSING_MAX). So idle strangers, however many, can
 * neither fill the table nor exhaust the launcher's descriptors.
 *
 * Replacements (opts.rejoin, `hearsay run`): every completed round's RESULT blob is kept
 * (results[seq - 1]). A HELLO for a rank whose connection closed without BYE (RANK_GONE), once
 * the job is running and while it has neither finished nor failed, admits a replacement: a
 * connection marked `replacement`, which gets a WELCOME of its own and then replays the job's
 * start-up. Its GATHER for a completed round k is answered at once with round k's result, its
 * contribution in its slot; the stored result takes that contribution (copied first when a
 * queued message still shares the blob), so a later replacement of another rank sees it. A
 * replacement is never sent the live ranks' RESULTs and takes no part in later rounds: a GATHER
 * for a round not completed, or anything else unexpected from it, is an ERROR to it alone.
 */
#include "hearsay/rendezvous.h"
#include "gossip/rdv_wire.h"
#include "hearsay/common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Reference-counted payload shared by the RESULT messages of one round. */
typedef struct blob {
    int refs;
    size_t len;
    uint8_t data[];
} blob_t;

typedef struct outmsg {
    uint8_t hdr[HS_RDV_HDR_BYTES];
    blob_t *blob;        /* payload shared with other queues, or NULL */
    const uint8_t *data; /* payload start (inside blob or own) */
    size_t len;          /* payload bytes */
    size_t sent;         /* bytes of header + payload already written */
    struct outmsg *next;
    uint8_t own[]; /* small private payload (errors) */
} outmsg_t;

typedef struct conn {
    int fd;
    char peer[80];
    char src[INET6_ADDRSTRLEN]; /* the peer's address alone (per-source bound) */
    int rank;                   /* -1 until admitted */
    double hello_deadline;      /* for connections not yet admitted */
    uint8_t hbuf[HS_RDV_HDR_BYTES];
    size_t hgot;
    hs_rdv_hdr_t hdr;
    uint8_t *body;
    size_t bgot;
    int in_body;
    outmsg_t *out, *out_tail;
    int closing;  /* 1: close once the output queue is drained; 2: close now */
    int draining; /* output done, write side shut: discard input until EOF */
    double drain_deadline;
    size_t drained;  /* bytes discarded while draining */
    int replacement; /* admitted as a replacement for a rank that left (opts.rejoin) */
    struct conn *next;
} conn_t;

enum { RANK_NONE = 0, RANK_HERE, RANK_BYE, RANK_GONE };

struct hs_rdv_server {
    int lfd;
    int wake[2];  /* stop request */
    int event[2]; /* readable once state != 0 */
    int port;
    char addr[320];
    int size;
    char key[HS_RDV_KEY_HEX + 1];
    double timeout_s, hello_timeout_s;
    FILE *log;
    char prefix[64];
    pthread_t thread;
    int thread_started;
    atomic_int state;
    atomic_int quiet; /* no more log lines */
    /* ---- owned by the server thread ---- */
    conn_t *conns;
    int nconns;
    long strangers;                 /* log lines about connections without the key (rate-limited) */
    int *rank_state;                /* (size) RANK_* */
    conn_t **rank_conn;             /* (size) */
    char (*hosts)[HS_RDV_HOST_MAX]; /* (size) hostnames from HELLO */
    int nhere;                      /* ranks admitted */
    int welcomed;                   /* WELCOME sent */
    double phase_start;             /* first HELLO, or first contribution to the current round */
    uint32_t seq;                   /* current round */
    size_t round_len;               /* contribution length of the current round */
    blob_t *round;                  /* (size * round_len) contributions */
    uint8_t *have;                  /* (size) contributed to the current round */
    int nhave;
    int nbye;
    int rejoin;        /* opts.rejoin: replacements are admitted */
    blob_t **results;  /* (nresults) completed rounds' results, by seq - 1 (rejoin only) */
    uint32_t nresults; /* rounds completed */
    uint32_t cap_results;
};

#define PENDING_MAX        256 /* connections without the key yet, in all */
#define PENDING_PER_SOURCE 64  /* ... from one address */
#define CLOSING_MAX        256 /* refused connections still delivering their ERROR */
#define STRANGER_LOG_LINES 20  /* then one line in STRANGER_LOG_EVERY */
#define STRANGER_LOG_EVERY 500
#define HELLO_TIMEOUT_S    5.0
/* Admitted ranks (and those saying BYE), pending and closing connections, and spare. */
#define MAX_CONNS (2 * HS_RDV_MAX_SIZE + PENDING_MAX + CLOSING_MAX + 64)

static void slog(hs_rdv_server_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void slog(hs_rdv_server_t *s, const char *fmt, ...)
{
    char line[1400];
    if (atomic_load(&s->quiet)) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(s->log, "%s%s\n", s->prefix, line);
    fflush(s->log);
}

static void blob_unref(blob_t *b)
{
    if (b && --b->refs == 0) free(b);
}

static void set_state(hs_rdv_server_t *s, int st)
{
    if (atomic_load(&s->state) != 0) return;
    atomic_store(&s->state, st);
    ssize_t w = write(s->event[1], "x", 1);
    (void)w;
}

/* Queue a message; payload from `blob` (shared) or copied from `data` when blob is NULL. */
static int queue_msg(conn_t *c, uint16_t type, uint32_t seq, blob_t *blob, const void *data,
                     size_t len)
{
    size_t own = blob ? 0 : len;
    outmsg_t *m = malloc(sizeof *m + own);
    if (!m) return -ENOMEM;
    hs_rdv_hdr_t h = hs_rdv_hdr_make(type, 0, seq, len);
    hs_rdv_hdr_encode(&h, m->hdr);
    m->blob = blob;
    if (blob) {
        blob->refs++;
        m->data = blob->data;
    } else {
        if (len) memcpy(m->own, data, len);
        m->data = m->own;
    }
    m->len = len;
    m->sent = 0;
    m->next = NULL;
    if (c->out_tail)
        c->out_tail->next = m;
    else
        c->out = m;
    c->out_tail = m;
    return 0;
}

static void queue_error(conn_t *c, const char *text)
{
    size_t n = HS_MIN(strlen(text), (size_t)HS_RDV_ERR_MAX);
    (void)queue_msg(c, HS_RDV_ERROR, 0, NULL, text, n); /* best effort: we close anyway */
    c->closing = 1;
}

static void conn_free(conn_t *c)
{
    if (c->fd >= 0) close(c->fd);
    while (c->out) {
        outmsg_t *m = c->out;
        c->out = m->next;
        blob_unref(m->blob);
        free(m);
    }
    free(c->body);
    free(c);
}

/* "3, 5, 9" — the ranks with rank_state == st (or, with have != NULL, without a contribution). */
static void list_ranks(const hs_rdv_server_t *s, int want_state, const uint8_t *have, char *out,
                       size_t cap)
{
    size_t n = 0;
    int count = 0, shown = 0;
    out[0] = '\0';
    for (int r = 0; r < s->size; r++) {
        int pick = have ? !have[r] : s->rank_state[r] == want_state;
        if (!pick) continue;
        count++;
        if (shown < 16 && n + 16 < cap) {
            n += (size_t)snprintf(out + n, cap - n, "%s%d", shown ? ", " : "", r);
            shown++;
        }
    }
    if (count > shown && n + 32 < cap) snprintf(out + n, cap - n, ", ... (%d in all)", count);
}

static int count_state(const hs_rdv_server_t *s, int st)
{
    int n = 0;
    for (int r = 0; r < s->size; r++) n += s->rank_state[r] == st;
    return n;
}

/* The job cannot go on: tell every admitted rank still here, log, and remember. */
static void fail_job(hs_rdv_server_t *s, const char *msg)
{
    if (atomic_load(&s->state) < 0) return;
    slog(s, "%s", msg);
    for (conn_t *c = s->conns; c; c = c->next)
        if (c->rank >= 0 && !c->closing) queue_error(c, msg);
    set_state(s, -1);
}

/* A log line about a connection without the key: the first STRANGER_LOG_LINES, then one in
 * STRANGER_LOG_EVERY with the count (thousands of strangers must not flood the log). */
static void slog_stranger(hs_rdv_server_t *s, conn_t *c, const char *what)
{
    long n = ++s->strangers;
    if (n <= STRANGER_LOG_LINES)
        slog(s, "rejected connection from %s: %s", c->peer, what);
    else if (n % STRANGER_LOG_EVERY == 0)
        slog(s,
             "rejected connection from %s: %s (%ld connections without the job key refused so "
             "far; logging one in %d)",
             c->peer, what, n, STRANGER_LOG_EVERY);
}

static void reject(hs_rdv_server_t *s, conn_t *c, const char *why)
{
    slog_stranger(s, c, why);
    queue_error(c, why);
}

/* Tell a connection why with one non-blocking send (nothing queued, nothing waited for) and
 * close it now: its input has been read, so the close is a FIN and the ERROR arrives. */
static void send_error_now(int fd, const char *text)
{
    uint8_t buf[HS_RDV_HDR_BYTES + HS_RDV_ERR_MAX];
    size_t n = HS_MIN(strlen(text), (size_t)HS_RDV_ERR_MAX);
    hs_rdv_hdr_t h = hs_rdv_hdr_make(HS_RDV_ERROR, 0, 0, n);
    hs_rdv_hdr_encode(&h, buf);
    memcpy(buf + HS_RDV_HDR_BYTES, text, n);
    ssize_t w = send(fd, buf, HS_RDV_HDR_BYTES + n, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)w;
}

static void send_welcome(hs_rdv_server_t *s)
{
    size_t len = (size_t)s->size * HS_RDV_HOST_MAX;
    blob_t *b = malloc(sizeof *b + len);
    if (!b) {
        fail_job(s, "rendezvous: out of memory");
        return;
    }
    b->refs = 1;
    b->len = len;
    memcpy(b->data, s->hosts, len);
    for (int r = 0; r < s->size; r++)
        if (s->rank_conn[r]) queue_msg(s->rank_conn[r], HS_RDV_WELCOME, 0, b, NULL, len);
    blob_unref(b);
    s->welcomed = 1;
    s->seq = 1;
    s->phase_start = 0;
}

static void check_departures(hs_rdv_server_t *s);
static void conn_read(hs_rdv_server_t *s, conn_t *c);

/* A replacement that cannot go on (it asked for a round the job has not completed, sent
 * something unexpected): an ERROR to it alone, and its rank is gone again (replaceable). */
static void drop_replacement(hs_rdv_server_t *s, conn_t *c, const char *msg)
{
    int r = c->rank;
    slog(s, "%s", msg);
    queue_error(c, msg);
    s->rank_state[r] = RANK_GONE;
    s->rank_conn[r] = NULL;
    c->rank = -1;
    check_departures(s);
}

/* Admit connection c as a replacement for rank r (RANK_GONE, rejoin): a WELCOME of its own,
 * with its hostname in the table (kept for later replacements). */
static void admit_replacement(hs_rdv_server_t *s, conn_t *c, int r, const hs_rdv_hello_t *h)
{
    size_t len = (size_t)s->size * HS_RDV_HOST_MAX;
    c->rank = r;
    c->replacement = 1;
    s->rank_state[r] = RANK_HERE;
    s->rank_conn[r] = c;
    memcpy(s->hosts[r], h->host, HS_RDV_HOST_MAX);
    slog(s, "rank %d rejoins the job (a replacement)", r);
    if (queue_msg(c, HS_RDV_WELCOME, 0, NULL, s->hosts, len) < 0)
        drop_replacement(s, c, "rendezvous: out of memory for a replacement's WELCOME");
}

/* A replacement's GATHER for round k: answered at once from the stored result of round k, its
 * contribution in its slot (and kept there). Never part of the live ranks' current round. */
static void handle_replay(hs_rdv_server_t *s, conn_t *c)
{
    char msg[400];
    int r = c->rank;
    uint32_t k = c->hdr.seq;
    if (c->hdr.rank != (uint32_t)r) {
        snprintf(msg, sizeof msg,
                 "rank %d (a replacement) sent a GATHER with rank %u in its header", r,
                 c->hdr.rank);
        drop_replacement(s, c, msg);
        return;
    }
    if (k == 0 || k > s->nresults) {
        snprintf(msg, sizeof msg,
                 "rank %d (a replacement) asked for collective round %u; the job completed only "
                 "%u start-up rounds: a replacement takes no part in later collectives",
                 r, k, s->nresults);
        drop_replacement(s, c, msg);
        return;
    }
    blob_t *b = s->results[k - 1];
    size_t each = b->len / (size_t)s->size;
    if ((size_t)c->hdr.len != each) {
        snprintf(msg, sizeof msg,
                 "rank %d (a replacement) contributed %zu bytes to collective round %u, the job's "
                 "ranks %zu (a replacement must contribute the same length)",
                 r, (size_t)c->hdr.len, k, each);
        drop_replacement(s, c, msg);
        return;
    }
    if (b->refs > 1) {
        /* Still queued to someone (besides the stored reference): copy first, so that nothing
         * already queued changes. */
        blob_t *n = malloc(sizeof *n + b->len);
        if (!n) {
            drop_replacement(s, c, "rendezvous: out of memory replaying a round for a replacement");
            return;
        }
        n->refs = 1;
        n->len = b->len;
        memcpy(n->data, b->data, b->len);
        blob_unref(b);
        s->results[k - 1] = b = n;
    }
    if (each) memcpy(b->data + (size_t)r * each, c->body, each);
    if (queue_msg(c, HS_RDV_RESULT, k, b, NULL, b->len) < 0)
        drop_replacement(s, c, "rendezvous: out of memory replaying a round for a replacement");
}

static void handle_hello(hs_rdv_server_t *s, conn_t *c)
{
    char why[256];
    if (c->hdr.type != HS_RDV_HELLO) {
        reject(s, c, "first message is not HELLO");
        return;
    }
    hs_rdv_hello_t h;
    hs_rdv_hello_decode(c->body, &h);
    if (!hs_rdv_key_equal(h.key, s->key)) {
        reject(s, c, "bad job key");
        return;
    }
    int r = (int)c->hdr.rank;
    if (c->hdr.rank >= (uint32_t)s->size) {
        snprintf(why, sizeof why, "rank %u out of range (job size %d)", c->hdr.rank, s->size);
        reject(s, c, why);
        return;
    }
    if (h.size != (uint32_t)s->size) {
        snprintf(why, sizeof why, "rank %d believes the job has %u ranks, the launcher has %d", r,
                 h.size, s->size);
        reject(s, c, why);
        return;
    }
    if (s->rejoin && s->welcomed && s->rank_state[r] == RANK_HERE && s->rank_conn[r]) {
        /* The crashed predecessor's close may not have been seen yet (its EOF and this HELLO
         * in one poll): one last look at its connection. */
        conn_t *old = s->rank_conn[r];
        if (!old->closing) conn_read(s, old);
        if (s->rank_conn[r] == old && old->closing == 2) {
            s->rank_state[r] = RANK_GONE;
            s->rank_conn[r] = NULL;
            old->rank = -1;
            check_departures(s);
        }
    }
    if (s->rejoin && s->welcomed && s->rank_state[r] == RANK_GONE) {
        if (atomic_load(&s->state) != 0) {
            reject(s, c,
                   atomic_load(&s->state) > 0 ? "the job has already finished"
                                              : "the job has already failed");
            return;
        }
        admit_replacement(s, c, r, &h);
        return;
    }
    if (s->rank_state[r] != RANK_NONE) {
        snprintf(why, sizeof why, "rank %d already connected (duplicate HS_RANK?)", r);
        reject(s, c, why);
        return;
    }
    if (atomic_load(&s->state) != 0) {
        reject(s, c,
               atomic_load(&s->state) > 0 ? "the job has already finished"
                                          : "the job has already failed");
        return;
    }
    c->rank = r;
    s->rank_state[r] = RANK_HERE;
    s->rank_conn[r] = c;
    memcpy(s->hosts[r], h.host, HS_RDV_HOST_MAX);
    s->nhere++;
    if (s->phase_start == 0) s->phase_start = hs_now();
    if (s->nhere == s->size) send_welcome(s);
}

/* Keep round seq's result for replacements (rejoin). Returns 0 or -ENOMEM. */
static int keep_result(hs_rdv_server_t *s, blob_t *b)
{
    if (s->nresults == s->cap_results) {
        uint32_t cap = s->cap_results ? 2 * s->cap_results : 16;
        blob_t **n = realloc(s->results, sizeof *n * cap);
        if (!n) return -ENOMEM;
        s->results = n;
        s->cap_results = cap;
    }
    b->refs++;
    s->results[s->nresults++] = b;
    return 0;
}

static void complete_round(hs_rdv_server_t *s)
{
    for (int r = 0; r < s->size; r++)
        if (s->rank_conn[r] && !s->rank_conn[r]->replacement)
            queue_msg(s->rank_conn[r], HS_RDV_RESULT, s->seq, s->round, NULL, s->round->len);
    if (s->rejoin && keep_result(s, s->round) < 0) {
        blob_unref(s->round);
        s->round = NULL;
        fail_job(s, "rendezvous failed: out of memory keeping a round's result for replacements");
        return;
    }
    blob_unref(s->round);
    s->round = NULL;
    memset(s->have, 0, (size_t)s->size);
    s->nhave = 0;
    s->seq++;
    s->phase_start = 0;
}

/* A rank left (BYE or closed). Fails the job if anyone now waits on it. */
static void check_departures(hs_rdv_server_t *s)
{
    char ranks[256], msg[600];
    int gone = count_state(s, RANK_GONE);
    /* Everyone has left: nothing more to serve (with rejoin, a rank gone without BYE may still
     * be replaced). */
    if (s->welcomed && count_state(s, RANK_HERE) == 0 && (!s->rejoin || gone == 0)) {
        set_state(s, 1);
        return;
    }
    if (!s->welcomed) {
        if (gone) {
            list_ranks(s, RANK_GONE, NULL, ranks, sizeof ranks);
            snprintf(msg, sizeof msg,
                     "rendezvous failed: rank%s %s disconnected during start-up (died?)",
                     gone > 1 ? "s" : "", ranks);
            fail_job(s, msg);
        }
        return;
    }
    if (s->nhave == 0) return; /* nobody waits */
    int left = 0;
    for (int r = 0; r < s->size; r++) left += !s->have[r] && s->rank_state[r] != RANK_HERE;
    if (!left) return;
    uint8_t *missing = calloc((size_t)s->size, 1);
    if (!missing) return;
    for (int r = 0; r < s->size; r++) missing[r] = s->have[r] || s->rank_state[r] == RANK_HERE;
    list_ranks(s, 0, missing, ranks, sizeof ranks);
    free(missing);
    snprintf(msg, sizeof msg,
             "rendezvous failed in collective round %u: rank%s %s left the job (exited or died) "
             "before contributing",
             s->seq, left > 1 ? "s" : "", ranks);
    fail_job(s, msg);
}

static void handle_admitted(hs_rdv_server_t *s, conn_t *c)
{
    char msg[300];
    int r = c->rank;
    if (c->hdr.type == HS_RDV_BYE) {
        s->rank_state[r] = RANK_BYE;
        s->rank_conn[r] = NULL;
        c->rank = -1;
        c->closing = 1;
        s->nbye++;
        check_departures(s);
        return;
    }
    if (c->replacement) {
        if (c->hdr.type == HS_RDV_GATHER) {
            handle_replay(s, c);
        } else {
            snprintf(msg, sizeof msg,
                     "rank %d (a replacement) sent an unexpected message (type %u, round %u)", r,
                     c->hdr.type, c->hdr.seq);
            drop_replacement(s, c, msg);
        }
        return;
    }
    if (c->hdr.type != HS_RDV_GATHER || c->hdr.rank != (uint32_t)r || !s->welcomed ||
        c->hdr.seq != s->seq || s->have[r]) {
        snprintf(msg, sizeof msg,
                 "rendezvous failed: rank %d sent an unexpected message (type %u, round %u; "
                 "expected GATHER for round %u)",
                 r, c->hdr.type, c->hdr.seq, s->seq);
        fail_job(s, msg);
        return;
    }
    size_t len = (size_t)c->hdr.len;
    if (s->nhave == 0) {
        s->round = malloc(sizeof *s->round + len * (size_t)s->size);
        if (!s->round) {
            fail_job(s, "rendezvous failed: out of memory for a collective round");
            return;
        }
        s->round->refs = 1;
        s->round->len = len * (size_t)s->size;
        s->round_len = len;
        s->phase_start = hs_now();
    } else if (len != s->round_len) {
        snprintf(msg, sizeof msg,
                 "rendezvous failed in collective round %u: rank %d contributed %zu bytes, "
                 "others %zu (every rank must contribute the same length)",
                 s->seq, r, len, s->round_len);
        fail_job(s, msg);
        return;
    }
    if (len) memcpy(s->round->data + (size_t)r * len, c->body, len);
    s->have[r] = 1;
    if (++s->nhave == s->size)
        complete_round(s);
    else
        check_departures(s);
}

static void handle_message(hs_rdv_server_t *s, conn_t *c)
{
    if (c->rank < 0)
        handle_hello(s, c);
    else
        handle_admitted(s, c);
}

/* Read what is available; dispatch complete messages. */
static void conn_read(hs_rdv_server_t *s, conn_t *c)
{
    for (int iter = 0; iter < 64 && !c->closing; iter++) {
        uint8_t *dst;
        size_t want;
        if (!c->in_body) {
            dst = c->hbuf + c->hgot;
            want = HS_RDV_HDR_BYTES - c->hgot;
        } else {
            dst = c->body + c->bgot;
            want = (size_t)c->hdr.len - c->bgot;
        }
        ssize_t n = want ? recv(c->fd, dst, want, MSG_DONTWAIT) : 0;
        if (want && n == 0) {
            if (c->rank >= 0) {
                s->rank_state[c->rank] = RANK_GONE;
                s->rank_conn[c->rank] = NULL;
                c->rank = -1;
                c->closing = 2;
                check_departures(s);
            } else {
                slog_stranger(s, c,
                              c->hgot || c->in_body ? "closed in the middle of a message"
                                                    : "closed before presenting the job key");
                c->closing = 2;
            }
            return;
        }
        if (want && n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return;
            c->closing = 2;
            if (c->rank >= 0) {
                s->rank_state[c->rank] = RANK_GONE;
                s->rank_conn[c->rank] = NULL;
                c->rank = -1;
                check_departures(s);
            }
            return;
        }
        if (!c->in_body) {
            c->hgot += (size_t)n;
            if (c->hgot < HS_RDV_HDR_BYTES) continue;
            hs_rdv_hdr_decode(c->hbuf, &c->hdr);
            const char *why = NULL;
            if (hs_rdv_hdr_check(&c->hdr, 1, &why) < 0) {
                if (c->rank < 0) {
                    reject(s, c, why);
                } else if (c->replacement) {
                    char msg[300];
                    snprintf(msg, sizeof msg, "malformed message from rank %d (a replacement): %s",
                             c->rank, why);
                    drop_replacement(s, c, msg);
                } else {
                    char msg[300];
                    snprintf(msg, sizeof msg,
                             "rendezvous failed: malformed message from rank %d: %s", c->rank, why);
                    int r = c->rank;
                    fail_job(s, msg);
                    s->rank_state[r] = RANK_GONE;
                    s->rank_conn[r] = NULL;
                    c->rank = -1;
                }
                return;
            }
            if (c->rank < 0 && c->hdr.type != HS_RDV_HELLO) {
                reject(s, c, "first message is not HELLO");
                return;
            }
            free(c->body);
            c->body = c->hdr.len ? malloc((size_t)c->hdr.len) : NULL;
            if (c->hdr.len && !c->body) {
                reject(s, c, "out of memory for the message");
                return;
            }
            c->bgot = 0;
            c->in_body = 1;
        } else {
            c->bgot += (size_t)n;
        }
        if (c->in_body && c->bgot == c->hdr.len) {
            handle_message(s, c);
            c->in_body = 0;
            c->hgot = 0;
        }
    }
}

static int pending(const conn_t *c)
{
    return c->rank < 0 && !c->closing;
}

/* The oldest connection without the key (from `src` when not NULL), or NULL. */
static conn_t *oldest_pending(hs_rdv_server_t *s, const char *src, int *count)
{
    conn_t *old = NULL;
    int n = 0;
    for (conn_t *c = s->conns; c; c = c->next)
        if (pending(c) && (!src || !strcmp(c->src, src))) {
            n++;
            if (!old || c->hello_deadline <= old->hello_deadline) old = c;
        }
    if (count) *count = n;
    return old;
}

/* Make room for one more connection without the key from `src`: past PENDING_PER_SOURCE from
 * src, or PENDING_MAX in all, drop the oldest (of src, else of all). A candidate's input is
 * read first: a HELLO already there admits it (or refuses it) instead. */
static void make_room(hs_rdv_server_t *s, const char *src)
{
    for (int tries = 0; tries < 8; tries++) {
        int from_src = 0, all = 0;
        conn_t *c = oldest_pending(s, src, &from_src);
        if (from_src < PENDING_PER_SOURCE) {
            c = oldest_pending(s, NULL, &all);
            if (all < PENDING_MAX) return;
        }
        conn_read(s, c);
        if (!pending(c)) continue; /* admitted, refused or closed by what it had sent */
        char why[200];
        if (from_src >= PENDING_PER_SOURCE)
            snprintf(why, sizeof why,
                     HS_RDV_BUSY " dropped, more than %d connections without the job key "
                                 "from %s (the oldest are dropped first)",
                     PENDING_PER_SOURCE, c->src);
        else
            snprintf(why, sizeof why,
                     HS_RDV_BUSY " dropped, more than %d connections without the job key "
                                 "(the oldest are dropped first)",
                     PENDING_MAX);
        slog_stranger(s, c, why);
        send_error_now(c->fd, why);
        c->closing = 2;
    }
}

static void conn_drain(conn_t *c)
{
    uint8_t junk[4096];
    ssize_t n = recv(c->fd, junk, sizeof junk, MSG_DONTWAIT);
    if (n > 0)
        c->drained += (size_t)n;
    else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        c->closing = 2;
}

static void conn_write(conn_t *c)
{
    while (c->out) {
        outmsg_t *m = c->out;
        const uint8_t *p;
        size_t left;
        if (m->sent < HS_RDV_HDR_BYTES) {
            p = m->hdr + m->sent;
            left = HS_RDV_HDR_BYTES - m->sent;
        } else {
            p = m->data + (m->sent - HS_RDV_HDR_BYTES);
            left = m->len - (m->sent - HS_RDV_HDR_BYTES);
        }
        if (left) {
            ssize_t n = send(c->fd, p, left, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n < 0) {
                if (errno == EINTR) continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK) return;
                c->closing = 2; /* peer gone; the read side reports it */
                return;
            }
            m->sent += (size_t)n;
            if ((size_t)n < left) continue;
        }
        if (m->sent == HS_RDV_HDR_BYTES + m->len) {
            c->out = m->next;
            if (!c->out) c->out_tail = NULL;
            blob_unref(m->blob);
            free(m);
        }
    }
}

/* Accept one connection; 0 when there was none to accept. */
static int accept_one(hs_rdv_server_t *s)
{
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    int fd = accept4(s->lfd, (struct sockaddr *)&sa, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return 0;
    char host[INET6_ADDRSTRLEN] = "?", serv[16] = "?";
    getnameinfo((struct sockaddr *)&sa, sl, host, sizeof host, serv, sizeof serv,
                NI_NUMERICHOST | NI_NUMERICSERV);
    make_room(s, host);
    /* Dropped connections leave the count when the loop frees them: count the live ones. */
    int live = 0;
    for (conn_t *o = s->conns; o; o = o->next) live += o->closing != 2;
    if (live >= MAX_CONNS) {
        char why[160];
        snprintf(why, sizeof why, HS_RDV_BUSY " too many connections (%d)", live);
        if (++s->strangers <= STRANGER_LOG_LINES || s->strangers % STRANGER_LOG_EVERY == 0)
            slog(s, "rejected connection from %s:%s: %s", host, serv, why);
        send_error_now(fd, why);
        close(fd);
        return 1;
    }
    conn_t *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return 1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->fd = fd;
    c->rank = -1;
    snprintf(c->peer, sizeof c->peer, "%s:%s", host, serv);
    snprintf(c->src, sizeof c->src, "%s", host);
    c->hello_deadline = hs_now() + s->hello_timeout_s;
    c->next = s->conns;
    s->conns = c;
    s->nconns++;
    conn_read(s, c); /* a worker's HELLO is usually there already: admit it now */
    return 1;
}

static void check_timeouts(hs_rdv_server_t *s, double now)
{
    char ranks[256], msg[600];
    for (conn_t *c = s->conns; c; c = c->next)
        if (c->rank < 0 && !c->closing && now >= c->hello_deadline) {
            snprintf(msg, sizeof msg, "did not present the job key within %g s",
                     s->hello_timeout_s);
            reject(s, c, msg);
        }
    if (atomic_load(&s->state) != 0 || s->phase_start == 0) return;
    if (now - s->phase_start < s->timeout_s) return;
    if (!s->welcomed) {
        int n = count_state(s, RANK_NONE);
        list_ranks(s, RANK_NONE, NULL, ranks, sizeof ranks);
        snprintf(msg, sizeof msg, "rendezvous timeout after %g s: rank%s %s never connected",
                 s->timeout_s, n > 1 ? "s" : "", ranks);
    } else {
        int n = s->size - s->nhave;
        list_ranks(s, 0, s->have, ranks, sizeof ranks);
        snprintf(msg, sizeof msg,
                 "rendezvous timeout after %g s in collective round %u: rank%s %s never arrived",
                 s->timeout_s, s->seq, n > 1 ? "s" : "", ranks);
    }
    fail_job(s, msg);
    s->phase_start = 0;
}

static double next_deadline(const hs_rdv_server_t *s)
{
    double d = 1e300;
    for (const conn_t *c = s->conns; c; c = c->next) {
        if (c->rank < 0 && !c->closing)
            d = HS_MIN(d, c->hello_deadline);
        else if (c->draining)
            d = HS_MIN(d, c->drain_deadline);
    }
    if (atomic_load(&s->state) == 0 && s->phase_start > 0)
        d = HS_MIN(d, s->phase_start + s->timeout_s);
    return d;
}

static void *server_main(void *arg)
{
    hs_rdv_server_t *s = arg;
    struct pollfd *pf = malloc(sizeof *pf * (MAX_CONNS + 2));
    conn_t **pc = malloc(sizeof *pc * (MAX_CONNS + 2));
    if (!pf || !pc) {
        slog(s, "rendezvous thread: out of memory");
        set_state(s, -1);
        free(pf);
        free(pc);
        return NULL;
    }
    for (;;) {
        /* Drop finished connections. A connection closed with unread input would answer
         * with a reset that can destroy our last (ERROR) message before the peer reads it:
         * shut the write side and discard input until the peer closes (bounded). */
        double tnow = hs_now();
        int ndraining = 0;
        for (conn_t **pp = &s->conns; *pp;) {
            conn_t *c = *pp;
            if (c->closing == 1 && !c->out && !c->draining) {
                shutdown(c->fd, SHUT_WR);
                c->draining = 1;
                c->drain_deadline = tnow + 1.0;
                if (++ndraining > CLOSING_MAX) c->closing = 2; /* enough lingering already */
            } else if (c->draining && c->closing != 2) {
                ndraining++;
            }
            if (c->draining && (tnow >= c->drain_deadline || c->drained > (1u << 20)))
                c->closing = 2;
            if (c->closing == 2) {
                *pp = c->next;
                s->nconns--;
                if (c->rank >= 0) { /* an admitted rank's connection broke (e.g. on write) */
                    s->rank_state[c->rank] = RANK_GONE;
                    s->rank_conn[c->rank] = NULL;
                    c->rank = -1;
                    check_departures(s);
                }
                conn_free(c);
            } else {
                pp = &c->next;
            }
        }
        int n = 0;
        pf[n++] = (struct pollfd){.fd = s->wake[0], .events = POLLIN};
        pf[n++] = (struct pollfd){.fd = s->lfd, .events = POLLIN};
        for (conn_t *c = s->conns; c; c = c->next) {
            pc[n] = c;
            pf[n++] = (struct pollfd){.fd = c->fd,
                                      .events = (short)((c->closing && !c->draining ? 0 : POLLIN) |
                                                        (c->out ? POLLOUT : 0))};
        }
        double now = hs_now(), dl = next_deadline(s);
        int ms = dl > now + 3600 ? 3600 * 1000 : (int)((dl - now) * 1000.0) + 1;
        if (ms < 0) ms = 0;
        int k = poll(pf, (nfds_t)n, ms);
        if (k < 0 && errno != EINTR) {
            slog(s, "rendezvous thread: poll failed: %s", strerror(errno));
            set_state(s, -1);
            break;
        }
        if (k > 0 && (pf[0].revents & POLLIN)) break;
        if (k > 0 && (pf[1].revents & POLLIN))
            for (int a = 0; a < 64 && accept_one(s); a++) continue;
        for (int i = 2; k > 0 && i < n; i++) {
            conn_t *c = pc[i];
            if (pf[i].revents & POLLOUT) conn_write(c);
            if (pf[i].revents & (POLLIN | POLLHUP | POLLERR)) {
                if (!c->closing)
                    conn_read(s, c);
                else if (c->draining)
                    conn_drain(c);
                else if (pf[i].revents & (POLLHUP | POLLERR))
                    c->closing = 2;
            }
            if (c->out && c->closing != 2) conn_write(c);
        }
        /* Messages queued while handling other connections: try to send right away. */
        for (conn_t *c = s->conns; c; c = c->next)
            if (c->out && c->closing != 2) conn_write(c);
        check_timeouts(s, hs_now());
    }
    free(pf);
    free(pc);
    return NULL;
}

int hs_rdv_server_start(hs_rdv_server_t **out, const hs_rdv_server_opts_t *o)
{
    *out = NULL;
    if (o->size < 1 || o->size > HS_RDV_MAX_SIZE)
        return HS_ERR(-EINVAL, "rendezvous: job size %d out of range 1..%d", o->size,
                      HS_RDV_MAX_SIZE);
    if (!hs_rdv_key_valid(o->key))
        return HS_ERR(-EINVAL, "rendezvous: the job key must be %d hex digits", HS_RDV_KEY_HEX);
    if (o->port < 0 || o->port > 65535)
        return HS_ERR(-EINVAL, "rendezvous: port %d out of range 0..65535", o->port);
    hs_rdv_server_t *s = hs_calloc(1, sizeof *s, "rendezvous server");
    if (!s) return -ENOMEM;
    s->lfd = -1;
    s->wake[0] = s->wake[1] = s->event[0] = s->event[1] = -1;
    s->size = o->size;
    memcpy(s->key, o->key, HS_RDV_KEY_HEX + 1);
    s->timeout_s = o->timeout_s > 0 ? o->timeout_s : 60.0;
    s->hello_timeout_s =
        o->hello_timeout_s > 0 ? o->hello_timeout_s : HS_MIN(HELLO_TIMEOUT_S, s->timeout_s);
    s->log = o->log ? o->log : stderr;
    s->rejoin = o->rejoin != 0;
    snprintf(s->prefix, sizeof s->prefix, "%s", o->log_prefix ? o->log_prefix : "rendezvous: ");
    atomic_init(&s->state, 0);
    atomic_init(&s->quiet, 0);
    int rc = -ENOMEM;
    s->rank_state = hs_calloc((size_t)s->size, sizeof *s->rank_state, "rendezvous ranks");
    s->rank_conn = hs_calloc((size_t)s->size, sizeof *s->rank_conn, "rendezvous ranks");
    s->hosts = hs_calloc((size_t)s->size, sizeof *s->hosts, "rendezvous hostnames");
    s->have = hs_calloc((size_t)s->size, 1, "rendezvous round");
    if (!s->rank_state || !s->rank_conn || !s->hosts || !s->have) goto fail;
    if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) < 0 || pipe2(s->event, O_CLOEXEC | O_NONBLOCK) < 0) {
        rc = HS_ERR(-errno, "rendezvous: pipe: %s", strerror(errno));
        goto fail;
    }
    rc = hs_rdv_listen(o->bind_addr ? o->bind_addr : "127.0.0.1", o->port, &s->lfd, &s->port,
                       s->addr, sizeof s->addr);
    if (rc < 0) goto fail;
    if (pthread_create(&s->thread, NULL, server_main, s) != 0) {
        rc = HS_ERR(-EAGAIN, "rendezvous: cannot start the server thread");
        goto fail;
    }
    s->thread_started = 1;
    *out = s;
    return 0;
fail:
    hs_rdv_server_stop(&s);
    return rc;
}

int hs_rdv_server_port(const hs_rdv_server_t *s)
{
    return s->port;
}

const char *hs_rdv_server_addr(const hs_rdv_server_t *s)
{
    return s->addr;
}

int hs_rdv_server_state(const hs_rdv_server_t *s)
{
    return atomic_load(&((hs_rdv_server_t *)s)->state);
}

void hs_rdv_server_quiet(hs_rdv_server_t *s)
{
    atomic_store(&s->quiet, 1);
}

int hs_rdv_server_event_fd(const hs_rdv_server_t *s)
{
    return s->event[0];
}

void hs_rdv_server_stop(hs_rdv_server_t **sp)
{
    hs_rdv_server_t *s = *sp;
    if (!s) return;
    if (s->thread_started) {
        ssize_t w = write(s->wake[1], "x", 1);
        (void)w;
        pthread_join(s->thread, NULL);
    }
    while (s->conns) {
        conn_t *c = s->conns;
        s->conns = c->next;
        conn_free(c);
    }
    blob_unref(s->round);
    for (uint32_t k = 0; k < s->nresults; k++) blob_unref(s->results[k]);
    free(s->results);
    if (s->lfd >= 0) close(s->lfd);
    for (int i = 0; i < 2; i++) {
        if (s->wake[i] >= 0) close(s->wake[i]);
        if (s->event[i] >= 0) close(s->event[i]);
    }
    free(s->rank_state);
    free(s->rank_conn);
    free(s->hosts);
    free(s->have);
    free(s);
    *sp = NULL;
}
