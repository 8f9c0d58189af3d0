/*
 * util/trace.c — the timeline (hearsay/trace.h): per-thread event buffers, the binary part
 * each rank writes, and the merge of the parts into one Chrome trace-event JSON file.
 *
 * Recording: a thread finds its buffer through a thread-local pointer (checked against the
 * tracer's generation, so a buffer of a closed tracer is never used); the buffer is a list of
 * chunks of EV_CHUNK events, appended to without a lock. A thread's first event takes the
 * tracer's lock once to join its list of threads.
 */
#include "hearsay/trace.h"

#include "hearsay/common.h"
#include "hearsay/exec.h"
#include "hearsay/file.h"
#include "hearsay/json.h"
#include "hearsay/transport.h"

#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EV_CHUNK        4096
#define EV_MAX_PER_THR  (1L << 22) /* 4 Mi events (128 MiB) per thread; later ones are counted */
#define TRACE_MAGIC     "HSTRACE"  /* 8 bytes with its NUL */
#define TRACE_VERSION   1u
#define THR_NAME_MAX    48
#define PART_MAX_BYTES  (8LL << 30)
#define MERGE_MAX_PARTS 65536

/* One event: 32 bytes, written as is to the part (version 1). */
typedef struct tr_ev {
    int64_t ts;    /* ns on the rank's clock */
    uint64_t flow; /* 0: none */
    int64_t arg;   /* bytes of a message, or an iteration */
    int32_t peer;  /* -1: none */
    uint16_t name; /* hs_trace_name_t */
    uint8_t ph;    /* 'B' or 'E' */
    uint8_t pad;
} tr_ev_t;

typedef struct chunk {
    struct chunk *next;
    size_t n;
    tr_ev_t ev[EV_CHUNK];
} chunk_t;

struct hs_trace_thr {
    hs_trace_t *tr;
    pthread_t owner;
    int track; /* 1: a named track, not a thread's (hs_trace_track) */
    int tid;
    char name[THR_NAME_MAX];
    chunk_t *head, *tail;
    long n;
    uint64_t dropped;
    struct hs_trace_thr *next;
};

struct hs_trace {
    uint64_t gen;
    char *path;
    hs_exec_t *x;
    int rank, size, virt;
    int64_t offset_ns; /* add to a ts to get rank 0's clock */
    pthread_mutex_t mu;
    hs_trace_thr_t *threads, **tail;
    int nthr;
};

/* The part's layout (version 1): part_hdr_t, then per thread part_thr_t and its events. */
typedef struct part_hdr {
    char magic[8];
    uint32_t version, rank, size, nthr;
    int64_t offset_ns;
    uint32_t virt, ev_bytes;
    uint64_t reserved;
} part_hdr_t;

typedef struct part_thr {
    uint32_t tid, pad;
    char name[THR_NAME_MAX];
    uint64_t n, dropped;
} part_thr_t;

static const char *const names[HS_TR_N_NAMES] = {
    [HS_TR_ITERATION] = "iteration",
    [HS_TR_COMPUTE] = "compute",
    [HS_TR_STRAGGLER] = "straggler sleep",
    [HS_TR_STEP] = "step",
    [HS_TR_LOCAL_STEP] = "local step",
    [HS_TR_SEND] = "send",
    [HS_TR_APPLY] = "apply",
    [HS_TR_WAIT] = "wait",
    [HS_TR_SVC_WAIT] = "service wait",
    [HS_TR_RECV] = "recv",
    [HS_TR_EVAL] = "evaluation",
    [HS_TR_CHECKPOINT] = "checkpoint",
    [HS_TR_FINISH] = "finish",
};

const char *hs_trace_name(int name)
{
    return name >= 0 && name < HS_TR_N_NAMES ? names[name] : "?";
}

static atomic_uint_fast64_t next_gen = 1;
static __thread hs_trace_thr_t *cur_thr;
static __thread uint64_t cur_gen;

/* --- recording --------------------------------------------------------------------------- */

static int64_t now_ns(hs_trace_t *tr)
{
    return (int64_t)llround(tr->x->ops->now(tr->x) * 1e9);
}

/* This thread's buffer in tr: the cached one, one it had before (a thread that records for
 * two tracers in turn), or a new one. */
static hs_trace_thr_t *attach(hs_trace_t *tr)
{
    if (cur_thr && cur_gen == tr->gen) return cur_thr;
    pthread_t me = pthread_self();
    pthread_mutex_lock(&tr->mu);
    hs_trace_thr_t *th = tr->threads;
    while (th && (th->track || !pthread_equal(th->owner, me))) th = th->next;
    if (!th && (th = calloc(1, sizeof *th))) {
        th->tr = tr;
        th->owner = me;
        th->tid = tr->nthr++;
        snprintf(th->name, sizeof th->name, "thread %d", th->tid);
        *tr->tail = th;
        tr->tail = &th->next;
    }
    pthread_mutex_unlock(&tr->mu);
    if (!th) return NULL;
    cur_thr = th;
    cur_gen = tr->gen;
    return th;
}

void hs_trace_thread(hs_trace_t *tr, const char *name)
{
    if (!tr) return;
    hs_trace_thr_t *th = attach(tr);
    if (th && name && strncmp(th->name, "thread ", 7) == 0)
        snprintf(th->name, sizeof th->name, "%s", name);
}

hs_trace_thr_t *hs_trace_track(hs_trace_t *tr, const char *name)
{
    pthread_mutex_lock(&tr->mu);
    hs_trace_thr_t *th = tr->threads;
    while (th && !(th->track && !strcmp(th->name, name))) th = th->next;
    if (!th && (th = calloc(1, sizeof *th))) {
        th->tr = tr;
        th->track = 1;
        th->tid = tr->nthr++;
        snprintf(th->name, sizeof th->name, "%s", name);
        *tr->tail = th;
        tr->tail = &th->next;
    }
    pthread_mutex_unlock(&tr->mu);
    return th;
}

hs_trace_thr_t *hs_trace_self(void)
{
    return cur_thr;
}

void hs_trace_thr_ev(hs_trace_thr_t *th, int ph, int name, int peer, uint64_t flow, int64_t arg)
{
    if (th->n >= EV_MAX_PER_THR) {
        th->dropped++;
        return;
    }
    chunk_t *c = th->tail;
    if (!c || c->n == EV_CHUNK) {
        chunk_t *nc = malloc(sizeof *nc);
        if (!nc) {
            th->dropped++;
            return;
        }
        nc->next = NULL;
        nc->n = 0;
        if (c)
            c->next = nc;
        else
            th->head = nc;
        th->tail = c = nc;
    }
    tr_ev_t *e = &c->ev[c->n++];
    e->ts = now_ns(th->tr);
    e->flow = flow;
    e->arg = arg;
    e->peer = peer;
    e->name = (uint16_t)name;
    e->ph = (uint8_t)ph;
    e->pad = 0;
    th->n++;
}

void hs_trace_ev(hs_trace_t *tr, int ph, int name, int peer, uint64_t flow, int64_t arg)
{
    hs_trace_thr_t *th = attach(tr);
    if (th) hs_trace_thr_ev(th, ph, name, peer, flow, arg);
}

/* 8 bytes at a time: a multiply and a shift per word (a tail is zero-padded). */
static uint64_t mix(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t w = 0;
        memcpy(&w, b + i, n - i < 8 ? n - i : 8);
        h = (h ^ w) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
    }
    return h;
}

uint64_t hs_trace_flow_id(int src, int dst, uint32_t tag, const void *buf, size_t len)
{
    uint64_t head[3] = {(uint64_t)(uint32_t)src << 32 | (uint32_t)dst, tag, len};
    uint64_t h = mix(0x84222325CBF29CE4ull, head, sizeof head);
    if (buf && len) { /* 32 bytes at the start, the middle and the end */
        size_t k = len < 32 ? len : 32;
        h = mix(h, buf, k);
        if (len > 64) h = mix(h, (const unsigned char *)buf + len / 2 - 16, 32);
        if (len > 32) h = mix(h, (const unsigned char *)buf + len - k, k);
    }
    return h ? h : 1;
}

void hs_trace_apply_msg(hs_trace_t *tr, int me, int src, uint32_t tag, const void *buf, size_t len)
{
    if (!tr) return;
    hs_trace_ev(tr, 'B', HS_TR_APPLY, src, hs_trace_flow_id(src, me, tag, buf, len), (int64_t)len);
}

void hs_trace_apply_begin(hs_trace_t *tr, int me, const void *buf, const hs_tstatus_t *st)
{
    hs_trace_apply_msg(tr, me, st->source, st->tag, buf, st->len);
}

/* --- opening, alignment, the part ---------------------------------------------------------- */

void hs_trace_part_name(char *buf, size_t cap, const char *path, int r)
{
    snprintf(buf, cap, "%s.rank%d", path, r);
}

/* Can `path` be written? The trace and its parts are written to a fresh temporary beside
 * them and renamed over them (hearsay/file.h), so what counts is: the name is not a directory,
 * a device, a FIFO or a socket (/dev/full is refused here, at start, not after the run), and
 * a temporary can be created in its directory. Creates nothing that stays, and never creates
 * or removes `path` itself: every rank of a job checks the same names at once, and one rank's
 * probe of a shared name (created, then unlinked) made another's open fail with ENOENT in
 * between, reported as a missing directory; each probe has a fresh name of its own. */
static int check_one(const char *path, const char *what)
{
    struct stat sb;
    if (lstat(path, &sb) == 0) {
        if (S_ISDIR(sb.st_mode))
            return HS_ERR(-EISDIR, "--trace %s: %s is a directory", what, path);
        if (!S_ISREG(sb.st_mode) && !S_ISLNK(sb.st_mode))
            return HS_ERR(-EINVAL,
                          "--trace %s: cannot write %s: %s, not a regular file (the trace is "
                          "written to a file)",
                          what, path,
                          S_ISFIFO(sb.st_mode)   ? "a FIFO"
                          : S_ISCHR(sb.st_mode)  ? "a character device"
                          : S_ISBLK(sb.st_mode)  ? "a block device"
                          : S_ISSOCK(sb.st_mode) ? "a socket"
                                                 : "a special file");
    }
    hs_wfile_t w;
    int rc = hs_wfile_open(&w, path, 0);
    if (rc < 0) {
        if (rc == -ENOENT)
            return HS_ERR(rc, "--trace %s: cannot create %s: its directory does not exist", what,
                          path);
        return HS_ERR(rc, "--trace %s: cannot write %s: %s", what, path, strerror(-rc));
    }
    hs_wfile_abort(&w);
    return 0;
}

int hs_trace_check_path(const char *path)
{
    if (!path || !*path) return HS_ERR(-EINVAL, "--trace: the file name is empty");
    char part[4096];
    if (strlen(path) + 16 > sizeof part)
        return HS_ERR(-ENAMETOOLONG, "--trace: the file name is too long (%zu bytes)",
                      strlen(path));
    HS_TRY(check_one(path, path));
    hs_trace_part_name(part, sizeof part, path, 0);
    return check_one(part, path);
}

int hs_trace_open(hs_trace_t **out, const char *path, hs_exec_t *x, int rank, int size)
{
    *out = NULL;
    HS_TRY(hs_trace_check_path(path));
    char part[4096];
    hs_trace_part_name(part, sizeof part, path, rank);
    HS_TRY(check_one(part, path));
    unlink(part); /* an earlier run's part: never merged with this run's */
    hs_trace_t *tr = hs_calloc(1, sizeof *tr, "tracer");
    if (!tr) return -ENOMEM;
    if (!(tr->path = strdup(path))) {
        free(tr);
        return HS_ERR(-ENOMEM, "out of memory for the tracer");
    }
    tr->gen = atomic_fetch_add(&next_gen, 1);
    tr->x = x;
    tr->rank = rank;
    tr->size = size;
    tr->virt = (hs_exec_caps(x) & HS_EXEC_VIRTUAL_CLOCK) != 0;
    tr->tail = &tr->threads;
    pthread_mutex_init(&tr->mu, NULL);
    *out = tr;
    return 0;
}

int hs_trace_align(hs_trace_t *tr, const hs_trace_sync_t *sync)
{
    if (!tr || tr->virt || tr->size < 2 || !sync) return 0;
    int64_t *all = hs_calloc((size_t)tr->size, sizeof *all, "clock readings");
    if (!all) return -ENOMEM;
    int rc = sync->barrier(sync->ctx);
    int64_t mine = now_ns(tr);
    if (rc == 0) rc = sync->allgather(sync->ctx, &mine, sizeof mine, all);
    if (rc == 0) tr->offset_ns = all[0] - mine;
    free(all);
    if (rc < 0) hs_error_prefix("--trace: aligning the ranks' clocks");
    return rc;
}

void hs_trace_close(hs_trace_t **trp)
{
    hs_trace_t *tr = trp ? *trp : NULL;
    if (!tr) return;
    if (cur_gen == tr->gen) {
        cur_thr = NULL;
        cur_gen = 0;
    }
    for (hs_trace_thr_t *th = tr->threads, *nt; th; th = nt) {
        nt = th->next;
        for (chunk_t *c = th->head, *nc; c; c = nc) {
            nc = c->next;
            free(c);
        }
        free(th);
    }
    pthread_mutex_destroy(&tr->mu);
    free(tr->path);
    free(tr);
    *trp = NULL;
}

int hs_trace_write_part(hs_trace_t *tr)
{
    char part[4096];
    hs_trace_part_name(part, sizeof part, tr->path, tr->rank);
    hs_wfile_t w; /* a fresh temporary beside the part, renamed over it (hearsay/file.h) */
    int rc = hs_wfile_open(&w, part, 0);
    if (rc < 0) {
        hs_error_prefix("--trace %s", tr->path);
        return rc;
    }
    FILE *f = w.f;
    pthread_mutex_lock(&tr->mu);
    part_hdr_t h = {.version = TRACE_VERSION,
                    .rank = (uint32_t)tr->rank,
                    .size = (uint32_t)tr->size,
                    .nthr = (uint32_t)tr->nthr,
                    .offset_ns = tr->offset_ns,
                    .virt = (uint32_t)tr->virt,
                    .ev_bytes = sizeof(tr_ev_t)};
    memcpy(h.magic, TRACE_MAGIC, sizeof h.magic);
    int ok = fwrite(&h, sizeof h, 1, f) == 1;
    for (hs_trace_thr_t *th = tr->threads; th && ok; th = th->next) {
        part_thr_t pt = {.tid = (uint32_t)th->tid, .n = (uint64_t)th->n, .dropped = th->dropped};
        memcpy(pt.name, th->name, sizeof pt.name);
        ok = fwrite(&pt, sizeof pt, 1, f) == 1;
        for (chunk_t *c = th->head; c && ok; c = c->next)
            ok = fwrite(c->ev, sizeof(tr_ev_t), c->n, f) == c->n;
    }
    pthread_mutex_unlock(&tr->mu);
    if (!ok) {
        int e = errno;
        hs_wfile_abort(&w);
        return HS_ERR(-EIO, "--trace %s: writing %s failed: %s", tr->path, part, strerror(e));
    }
    rc = hs_wfile_commit(&w);
    if (rc < 0) hs_error_prefix("--trace %s", tr->path);
    return rc;
}

/* --- reading parts and merging ------------------------------------------------------------- */

typedef struct rd_thr {
    part_thr_t h;
    tr_ev_t *ev;   /* (n) */
    int64_t *dur;  /* (n) for 'B' events: the span's length in ns (-1: not a begin) */
    uint64_t *fid; /* (n) the merged flow id (0: none) */
} rd_thr_t;

typedef struct rd_part {
    part_hdr_t h;
    unsigned char *data;
    rd_thr_t *thr; /* (h.nthr) */
} rd_part_t;

static void part_free(rd_part_t *p)
{
    for (uint32_t i = 0; p->thr && i < p->h.nthr; i++) {
        free(p->thr[i].dur);
        free(p->thr[i].fid);
    }
    free(p->thr);
    free(p->data);
    memset(p, 0, sizeof *p);
}

static int part_read(rd_part_t *p, const char *path)
{
    memset(p, 0, sizeof *p);
    /* A regular file of at most the bound; a FIFO is refused, not waited on. */
    FILE *f = NULL;
    HS_TRY(hs_file_fopen_read(&f, path, "trace part", PART_MAX_BYTES));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0) {
        int e = errno;
        fclose(f);
        return HS_ERR(-e, "cannot stat the trace part %s: %s", path, strerror(e));
    }
    size_t len = (size_t)sb.st_size;
    p->data = malloc(len ? len : 1);
    if (!p->data || fread(p->data, 1, len, f) != len) {
        fclose(f);
        part_free(p);
        return HS_ERR(-EIO, "cannot read the trace part %s", path);
    }
    fclose(f);
    if (len >= sizeof p->h) memcpy(&p->h, p->data, sizeof p->h);
    if (len < sizeof p->h || memcmp(p->h.magic, TRACE_MAGIC, sizeof p->h.magic) != 0) {
        part_free(p);
        return HS_ERR(-EPROTO, "%s is not a Hearsay trace part (no HSTRACE magic)", path);
    }
    if (p->h.version != TRACE_VERSION || p->h.ev_bytes != sizeof(tr_ev_t)) {
        uint32_t v = p->h.version;
        part_free(p);
        return HS_ERR(-EPROTO, "%s: trace part version %u, this hearsay reads version %u", path, v,
                      TRACE_VERSION);
    }
    if (p->h.nthr > 100000 || p->h.rank >= p->h.size) goto bad;
    if (!(p->thr = calloc(p->h.nthr ? p->h.nthr : 1, sizeof *p->thr))) goto nomem;
    size_t off = sizeof p->h;
    for (uint32_t i = 0; i < p->h.nthr; i++) {
        rd_thr_t *t = &p->thr[i];
        if (len - off < sizeof t->h) goto bad;
        memcpy(&t->h, p->data + off, sizeof t->h);
        off += sizeof t->h;
        t->h.name[THR_NAME_MAX - 1] = '\0';
        if (t->h.n > (len - off) / sizeof(tr_ev_t)) goto bad;
        t->ev = (tr_ev_t *)(void *)(p->data + off);
        off += t->h.n * sizeof(tr_ev_t);
        if (!(t->dur = malloc((t->h.n ? t->h.n : 1) * sizeof *t->dur))) goto nomem;
        if (!(t->fid = calloc(t->h.n ? t->h.n : 1, sizeof *t->fid))) goto nomem;
        for (uint64_t k = 0; k < t->h.n; k++)
            if (t->ev[k].name >= HS_TR_N_NAMES || (t->ev[k].ph != 'B' && t->ev[k].ph != 'E'))
                goto bad;
    }
    if (off != len) goto bad;
    return 0;
bad:
    part_free(p);
    return HS_ERR(-EPROTO, "%s: a truncated or corrupt trace part", path);
nomem:
    part_free(p);
    return HS_ERR(-ENOMEM, "out of memory reading %s", path);
}

/* Spans: each 'B' gets its length from its 'E' (stack per thread; an 'E' closes the nearest
 * open span of its name, closing those opened inside it; a span never closed ends at the
 * thread's last event). */
static void spans(rd_thr_t *t)
{
    uint64_t n = t->h.n, *stack = malloc((n ? n : 1) * sizeof *stack), sp = 0;
    int64_t last = n ? t->ev[n - 1].ts : 0;
    for (uint64_t k = 0; k < n; k++) t->dur[k] = -1;
    if (!stack) { /* no memory: every span as an instant */
        for (uint64_t k = 0; k < n; k++)
            if (t->ev[k].ph == 'B') t->dur[k] = 0;
        return;
    }
    for (uint64_t k = 0; k < n; k++) {
        const tr_ev_t *e = &t->ev[k];
        if (e->ts > last) last = e->ts;
        if (e->ph == 'B') {
            stack[sp++] = k;
            continue;
        }
        uint64_t j = sp;
        while (j > 0 && t->ev[stack[j - 1]].name != e->name) j--;
        if (j == 0) continue; /* an end without a begin */
        while (sp >= j) {     /* stack[j - 1] is the begin; those above it end here too */
            uint64_t b = stack[--sp];
            int64_t d = e->ts - t->ev[b].ts;
            t->dur[b] = d > 0 ? d : 0;
        }
    }
    while (sp > 0) {
        uint64_t b = stack[--sp];
        int64_t d = last - t->ev[b].ts;
        t->dur[b] = d > 0 ? d : 0;
    }
    free(stack);
}

typedef struct fend {
    uint64_t id;
    int64_t ts;
    uint64_t *slot; /* where the merged id goes */
    int send;
} fend_t;

static int fend_cmp(const void *a, const void *b)
{
    const fend_t *x = a, *y = b;
    if (x->id != y->id) return x->id < y->id ? -1 : 1;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return y->send - x->send; /* at one time, the send first */
}

/* Pair every flow's sends and applies: within one id, in time order, each apply takes the
 * oldest send not yet taken (messages of one link and tag are matched in order). */
static long pair_flows(rd_part_t *p, int n, uint64_t *count)
{
    size_t m = 0;
    for (int i = 0; i < n; i++)
        for (uint32_t j = 0; j < p[i].h.nthr; j++)
            for (uint64_t k = 0; k < p[i].thr[j].h.n; k++)
                m += p[i].thr[j].ev[k].ph == 'B' && p[i].thr[j].ev[k].flow != 0;
    fend_t *f = malloc((m ? m : 1) * sizeof *f);
    size_t *q = malloc((m ? m : 1) * sizeof *q);
    if (!f || !q) {
        free(f);
        free(q);
        return (long)m;
    }
    size_t c = 0;
    for (int i = 0; i < n; i++)
        for (uint32_t j = 0; j < p[i].h.nthr; j++)
            for (uint64_t k = 0; k < p[i].thr[j].h.n; k++) {
                const tr_ev_t *e = &p[i].thr[j].ev[k];
                if (e->ph != 'B' || e->flow == 0) continue;
                f[c++] = (fend_t){.id = e->flow,
                                  .ts = e->ts + p[i].h.offset_ns,
                                  .slot = &p[i].thr[j].fid[k],
                                  .send = e->name == HS_TR_SEND};
            }
    qsort(f, m, sizeof *f, fend_cmp);
    long unpaired = 0;
    uint64_t next = 1;
    for (size_t a = 0; a < m;) {
        size_t b = a, qh = 0, qt = 0;
        while (b < m && f[b].id == f[a].id) b++;
        for (size_t k = a; k < b; k++) {
            if (f[k].send) {
                q[qt++] = k;
            } else if (qh < qt) {
                *f[q[qh++]].slot = next;
                *f[k].slot = next++;
            } else {
                unpaired++;
            }
        }
        unpaired += (long)(qt - qh);
        a = b;
    }
    *count = next - 1;
    free(f);
    free(q);
    return unpaired;
}

static void write_args(FILE *o, const tr_ev_t *e)
{
    switch (e->name) {
    case HS_TR_SEND:
        fprintf(o, ",\"args\":{\"to\":%d,\"bytes\":%lld}", e->peer, (long long)e->arg);
        break;
    case HS_TR_APPLY:
        fprintf(o, ",\"args\":{\"from\":%d,\"bytes\":%lld}", e->peer, (long long)e->arg);
        break;
    case HS_TR_ITERATION:
    case HS_TR_EVAL:
    case HS_TR_CHECKPOINT:
        fprintf(o, ",\"args\":{\"iteration\":%lld}", (long long)e->arg);
        break;
    default:
        break;
    }
}

static void us(FILE *o, int64_t ns)
{
    fprintf(o, "%lld.%03lld", (long long)(ns / 1000), (long long)(ns % 1000));
}

int hs_trace_merge(const char *out, const char *const *in, int n, long *dropped)
{
    if (n < 1 || n > MERGE_MAX_PARTS)
        return HS_ERR(-EINVAL, "trace merge: %d parts (1 .. %d)", n, MERGE_MAX_PARTS);
    /* OUT must not be one of the parts: it would be replaced by the merge of itself. */
    for (int i = 0; i < n; i++)
        if (!strcmp(out, in[i]) || hs_file_same(out, in[i]))
            return HS_ERR(-EINVAL,
                          "the output %s is the part %s: refused (it would "
                          "overwrite its input)",
                          out, in[i]);
    rd_part_t *p = hs_calloc((size_t)n, sizeof *p, "trace parts");
    if (!p) return -ENOMEM;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) rc = part_read(&p[i], in[i]);
    for (int i = 0; i < n && rc == 0; i++)
        for (int j = 0; j < i && rc == 0; j++)
            if (p[i].h.rank == p[j].h.rank)
                rc = HS_ERR(-EINVAL, "trace merge: %s and %s are both rank %u's", in[j], in[i],
                            p[i].h.rank);
    hs_wfile_t wo = {0}; /* a fresh temporary beside OUT, renamed over it at the end */
    if (rc == 0 && (rc = hs_wfile_open(&wo, out, 0)) < 0)
        hs_error_prefix("cannot write the trace %s", out);
    if (rc < 0) goto done;
    FILE *o = wo.f;
    int64_t t0 = INT64_MAX;
    uint64_t dropped_ev = 0, flows = 0;
    for (int i = 0; i < n; i++)
        for (uint32_t j = 0; j < p[i].h.nthr; j++) {
            rd_thr_t *t = &p[i].thr[j];
            spans(t);
            dropped_ev += t->h.dropped;
            for (uint64_t k = 0; k < t->h.n; k++)
                if (t->ev[k].ts + p[i].h.offset_ns < t0) t0 = t->ev[k].ts + p[i].h.offset_ns;
        }
    if (t0 == INT64_MAX) t0 = 0;
    long unpaired = pair_flows(p, n, &flows);
    fputs("{\"traceEvents\":[\n", o);
    const char *sep = "";
    for (int i = 0; i < n; i++) {
        int r = (int)p[i].h.rank;
        fprintf(o,
                "%s{\"ph\":\"M\",\"pid\":%d,\"name\":\"process_name\",\"args\":{\"name\":"
                "\"rank %d\"}}",
                sep, r, r);
        sep = ",\n";
        fprintf(o,
                ",\n{\"ph\":\"M\",\"pid\":%d,\"name\":\"process_sort_index\",\"args\":{"
                "\"sort_index\":%d}}",
                r, r);
        for (uint32_t j = 0; j < p[i].h.nthr; j++) {
            rd_thr_t *t = &p[i].thr[j];
            fprintf(o,
                    ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%u,\"name\":\"thread_name\",\"args\":{"
                    "\"name\":",
                    r, t->h.tid);
            hs_json_string(o, t->h.name);
            fprintf(o, "}}");
            for (uint64_t k = 0; k < t->h.n; k++) {
                const tr_ev_t *e = &t->ev[k];
                if (e->ph != 'B') continue;
                int64_t ts = e->ts + p[i].h.offset_ns - t0;
                fprintf(
                    o,
                    ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%u,\"name\":\"%s\",\"cat\":\"hearsay\","
                    "\"ts\":",
                    r, t->h.tid, names[e->name]);
                us(o, ts);
                fputs(",\"dur\":", o);
                us(o, t->dur[k]);
                write_args(o, e);
                fputc('}', o);
                if (t->fid[k]) {
                    int send = e->name == HS_TR_SEND;
                    fprintf(o,
                            ",\n{\"ph\":\"%s\",\"pid\":%d,\"tid\":%u,\"name\":\"message\","
                            "\"cat\":\"flow\",\"id\":%llu,\"ts\":",
                            send ? "s" : "f\",\"bp\":\"e", r, t->h.tid,
                            (unsigned long long)t->fid[k]);
                    us(o, ts);
                    fputc('}', o);
                }
            }
        }
    }
    fprintf(o,
            "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"clock\":\"%s\",\"ranks\":%u,"
            "\"parts\":%d,\"flows\":%llu,\"unpaired_flow_ends\":%ld,\"dropped_events\":%llu}}\n",
            p[0].h.virt ? "virtual" : "wall", p[0].h.size, n, (unsigned long long)flows, unpaired,
            (unsigned long long)dropped_ev);
    if (dropped) *dropped = unpaired;
    if (dropped_ev)
        HS_WARN("trace %s: %llu events were not recorded (a thread's buffer was full)", out,
                (unsigned long long)dropped_ev);
    rc = hs_wfile_commit(&wo);
done:
    for (int i = 0; i < n; i++) part_free(&p[i]);
    free(p);
    return rc;
}

int hs_trace_merge_run(const char *path, int size, const unsigned char *skip, double timeout_s)
{
    char **in = hs_calloc((size_t)size, sizeof *in, "trace part names");
    if (!in) return -ENOMEM;
    int rc = 0, n = 0, missing = 0;
    double until = hs_now() + timeout_s;
    for (int r = 0; r < size && rc == 0; r++) {
        char part[4096];
        hs_trace_part_name(part, sizeof part, path, r);
        while (access(part, F_OK) != 0 && !(skip && skip[r]) && hs_now() < until) hs_sleep(0.01);
        if (access(part, F_OK) != 0) {
            missing++;
            HS_WARN("--trace %s: rank %d wrote no part (%s)%s", path, r, part,
                    skip && skip[r] ? ": it failed" : "");
            continue;
        }
        if (!(in[n] = strdup(part))) rc = HS_ERR(-ENOMEM, "out of memory");
        n++;
    }
    if (rc == 0 && n == 0) rc = HS_ERR(-ENOENT, "--trace %s: no rank wrote its part", path);
    if (rc == 0) rc = hs_trace_merge(path, (const char *const *)in, n, NULL);
    if (rc == 0 && !missing)
        for (int i = 0; i < n; i++) unlink(in[i]);
    else if (rc == 0)
        HS_WARN("--trace %s: merged %d of %d ranks; the parts are kept (hearsay trace merge %s "
                "%s.rank*)",
                path, n, size, path, path);
    for (int i = 0; i < size; i++) free(in[i]);
    free(in);
    return rc;
}
