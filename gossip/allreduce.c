/*
 * gossip/allreduce.c — pipelined ring all-reduce (reduce-scatter + all-gather) of floats.
 *
 * Notation: P ranks, buffer of n floats cut into P segments (the first n % P one float
 * longer), each segment cut into K chunks of nearly equal length. The 2(P-1) steps are
 * numbered s = 0 .. S-1 (S = 2(P-1)); at step s rank r sends segment (r - s) mod P to its
 * right neighbour and receives segment (r - s - 1) mod P from its left one. Steps
 * 0 .. P-2 reduce (the received chunk is added into the buffer; after step P-2 rank r owns
 * the complete segment (r + 1) mod P), steps P-1 .. S-1 gather (the received chunk is
 * final and lands in place). Item (s, k) is chunk k of step s, numbered idx = s * K + k.
 *
 * Pipelining: send (s + 1, k) leaves as soon as receive (s, k) has been processed, so a
 * chunk travels round the ring without waiting for the rest of its segment. Receives are
 * posted in idx order, by default all of them when the call starts (opts.depth limits how
 * many are outstanding); reduce-scatter receives each hold one scratch slot. Posting them all
 * matters with libfabric 1.17's shm provider: many messages arriving before their receives
 * (unexpected) were seen to stall it, so the only unexpected ones left are the first step's,
 * from a left neighbour that entered the call earlier. Sends are posted from the user's buffer.
 * Each item has its own tag (tag_base + (op * S * K + idx) mod tag_span), so neither items nor
 * operations mix.
 *
 * Safety of sending from and receiving into the user's buffer: a segment's chunk is read by
 * at most one outstanding send at a time before it is written again, because the data that
 * overwrites it (the reduced value from the left) can only exist after our own send of
 * that chunk has been received downstream (the ring's causality); all-gather receives are
 * posted into the buffer for the same reason.
 *
 * The mapped path (one host, every buffer from hs_transport_buf_alloc; include/hearsay/
 * allreduce.h). Each rank has a control block (ar_ctl_t) in shared memory that every peer
 * maps read-write, set up in the plan's first operation by two all-to-alls of small messages
 * (handles, then whether every rank mapped every block). Operation op on rank r:
 *   1. publish its buffer's handle (or address), then arrive = op + 1; ring every peer's bell
 *   2. wait until every peer's arrive = op + 1 (they all published: every rank now sees the
 *      same set of handles and takes the same path)
 *   3. map the peers' buffers (cached while a peer keeps its buffer)
 *   4. for each 256 KiB chunk of segment r: sum it over every buffer in rank order into its
 *      own buffer, then stream the sum into every peer's buffer
 *   5. set done[r] = op + 1 in every peer's block, ring its bell; wait until done[p] = op + 1
 *      for every peer p in its own block, and return.
 * Why that is safe without more waits: segment r of any buffer is read and written by rank r
 * alone during the operation, and only after its owner entered (step 2); an owner returns
 * (and may change its buffer) only after every peer's step 5, which comes after that peer's
 * last read of it. The waits poll a few times, then sleep on the owner's bell (a futex word
 * in its block; sleepers counted so ringing costs no system call when nobody sleeps), in
 * slices of 50 ms between which they look whether a rank waited for has exited, bounded by the
 * timeout. A rank that fails sets failed = op + 1 in its block: the others stop waiting for it
 * and do not write into its buffer any more. When some buffer is not shared, every rank sees
 * that at step 2 and takes the direct path's copies (process_vm_readv) with two more counter
 * waits (stage: reduced, then done reading) instead of message exchanges, or the ring.
 */
#include "hearsay/allreduce.h"
#include "gossip/allreduce_hier.h"

#include "hearsay/common.h"
#include "hearsay/env.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HAVE_STREAM 1
#endif

#define DEFAULT_CHUNK_BYTES ((size_t)1 << 20)
#define MAX_DEPTH           (1 << 20)
/* Chunks below this many bytes travel padded to it, on a transport that does not claim
 * HS_TCAP_EARLY_SMALL (ar->min_wire). Seen with libfabric 1.17's shm provider: a message of
 * at most 4096 bytes (its inject path) that arrives before its receive is posted is never
 * matched; larger ones are. Padding costs a copy of a few KiB per tiny chunk, which only tiny
 * buffers have (and, on a shaped link or in virtual time, the padding's bytes). */
#define MIN_WIRE_BYTES 4104

#define DIRECT_MAGIC 0x44524148u        /* "HARD" */
#define DIRECT_CHUNK ((size_t)64 << 10) /* floats summed per pass: 256 KiB, stays in L2 */

typedef struct direct_msg {
    uint32_t magic, phase;
    uint64_t op, addr, n;
    uint32_t ok, shaped;  /* shaped: some link of the sender is shaped (--link) */
    hs_tbuf_handle_t hdl; /* mapped path set-up: the sender's control block */
} direct_msg_t;

/* Mapped path: each rank's control block, in memory of hs_transport_buf_alloc that every peer
 * maps read-write (its own cache lines for what the owner writes and what peers write). */
typedef struct ar_ctl {
    alignas(64) _Atomic uint32_t bell;   /* futex word: bumped by whoever has news for the owner */
    _Atomic uint32_t sleepers;           /* owner threads waiting on bell */
    alignas(64) _Atomic uint64_t arrive; /* op + 1 of the operation the owner entered */
    _Atomic uint64_t failed;             /* op + 1 of an operation the owner gave up */
    _Atomic uint64_t stage;              /* copying fallback: 2 op + 1 reduced, 2 op + 2 done */
    uint32_t mapped;                     /* for that operation: 1 when hdl names its buffer */
    uint32_t readok;                     /* 1: the owner can read every peer (peer_read) */
    uint64_t addr;                       /* the owner's buffer (copying fallback) */
    hs_tbuf_handle_t hdl;
    /* done[p] = op + 1: rank p has written its segment of op into the owner's buffer */
    alignas(64) _Atomic uint64_t done[];
} ar_ctl_t;

#define MAPPED_SPIN 64 /* polls before sleeping on the bell (ranks often outnumber cores) */

struct hs_allreduce {
    hs_transport_t *t;
    hs_allreduce_opts_t o;
    size_t n; /* floats per buffer */
    int P, rank, left, right;
    size_t K;            /* chunks per segment */
    size_t S;            /* steps: 2 (P - 1) */
    size_t slot_floats;  /* floats a scratch slot holds: longest chunk, or the padded size */
    int depth;           /* receives outstanding at most */
    int nslots;          /* scratch slots */
    size_t seg_q, seg_r; /* segment j: q + (j < r) floats */
    float *scratch;      /* (nslots, slot_floats) landing slots: reduce-scatter receives, and
                            padded (tiny) receives of either phase */
    char *bounce;        /* (S * K, min_wire) padded copies of tiny sends, or NULL */
    size_t min_wire;     /* chunks travel padded to this many bytes (MIN_WIRE_BYTES, or 0) */
    int *free_slots;     /* (nslots) stack of free slot indices */
    int nfree;
    /* Active requests, kept compact: reqs[i] with its item (idx >= 0 receive, -1 - idx send)
     * and the scratch slot a receive holds (-1: none). */
    hs_treq_t **reqs; /* (cap) */
    long *item;       /* (cap) */
    int *slot;        /* (cap) */
    size_t cap, nact;
    uint64_t ops; /* operations started */
    /* direct path (NULL when the ring is forced or the transport cannot read peers) */
    float *direct_tmp;             /* (DIRECT_CHUNK) a peer's chunk */
    struct direct_msg *direct_all; /* (P) the exchanged messages */
    /* mapped path: 0 not set up yet, 1 on, -1 off (agreed by every rank), -2 failed */
    int mapped;
    ar_ctl_t *ctl;          /* mine (hs_transport_buf_alloc) */
    ar_ctl_t **pctl;        /* (P) the peers' control blocks mapped here (NULL: me) */
    float **pbuf;           /* (P) the peers' buffers of the last mapped operation, mapped */
    hs_tbuf_handle_t *phdl; /* (P) their handles */
    int *pend;              /* (P) ranks a wait is waiting for */
    int npend;
    hs_ar_hier_t *hier; /* the hierarchical plan (ranks on several hosts), or NULL */
};

/* Some rank's links are shaped (hs_transport_shaped; every rank learns it in the first
 * exchange of the mapped or direct path): those paths would move the bytes past the link
 * model, so every rank gives way to the ring, whose messages the transport shapes. Frees
 * what the shortcuts held; the same on every rank. Returns 1 when it gave way. */
static int give_way_if_shaped(hs_allreduce_t *ar, const struct direct_msg *all)
{
    int shaped = 0;
    for (int p = 0; p < ar->P; p++) shaped |= all[p].shaped != 0;
    if (!shaped) return 0;
    if (ar->rank == 0) {
        if (ar->o.path == HS_AR_PATH_MAPPED || ar->o.path == HS_AR_PATH_DIRECT)
            HS_INFO("all-reduce: links are shaped (--link / HS_SHAPING): HS_AR_PATH=%s gives way "
                    "to the ring, whose messages the link model paces",
                    ar->o.path == HS_AR_PATH_MAPPED ? "mapped" : "direct");
        else
            HS_DEBUG("all-reduce: links are shaped: the ring (the mapped and direct paths would "
                     "bypass the link model)");
    }
    if (ar->ctl) {
        void *v = ar->ctl;
        hs_transport_buf_free(ar->t, &v);
        ar->ctl = NULL;
    }
    ar->mapped = -1;
    HS_FREE(ar->direct_tmp);
    return 1;
}

int hs_allreduce_opts_default(hs_allreduce_opts_t *o)
{
    if (!o) return HS_ERR(-EINVAL, "hs_allreduce_opts_default: NULL options");
    memset(o, 0, sizeof *o);
    o->tag_base = HS_ALLREDUCE_TAG_BASE;
    o->tag_span = HS_ALLREDUCE_TAG_SPAN;
    long v = (long)DEFAULT_CHUNK_BYTES; /* also the table's default (util/env.c) */
    if (hs_env_long("HS_AR_CHUNK_BYTES", &v) < 0) return -EINVAL;
    o->chunk_bytes = (size_t)v;
    const char *e = hs_env_str("HS_AR_PATH");
    if (e) {
        if (!strcmp(e, "auto"))
            o->path = HS_AR_PATH_AUTO;
        else if (!strcmp(e, "ring"))
            o->path = HS_AR_PATH_RING;
        else if (!strcmp(e, "direct"))
            o->path = HS_AR_PATH_DIRECT;
        else if (!strcmp(e, "mapped"))
            o->path = HS_AR_PATH_MAPPED;
        else if (!strcmp(e, "hier"))
            o->path = HS_AR_PATH_HIER;
        else
            return HS_ERR(-EINVAL, "HS_AR_PATH '%s': expected auto, ring, direct, mapped or hier",
                          e);
    }
    v = 0; /* also the table's default */
    if (hs_env_long("HS_AR_DEPTH", &v) < 0) return -EINVAL;
    o->depth = (int)v;
    return 0;
}

/* Element-wise y += x (scale: y = (y + x) * a), vectorized through GCC/Clang vector types
 * (whatever the -O level), unaligned loads through memcpy. */
typedef float v8f_t __attribute__((vector_size(32)));

static void add_into(float *restrict y, const float *restrict x, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        v8f_t a0, a1, b0, b1;
        memcpy(&a0, y + i, sizeof a0);
        memcpy(&a1, y + i + 8, sizeof a1);
        memcpy(&b0, x + i, sizeof b0);
        memcpy(&b1, x + i + 8, sizeof b1);
        a0 += b0;
        a1 += b1;
        memcpy(y + i, &a0, sizeof a0);
        memcpy(y + i + 8, &a1, sizeof a1);
    }
    for (; i < n; i++) y[i] += x[i];
}

static void add_scale_into(float *restrict y, const float *restrict x, size_t n, float a)
{
    size_t i = 0;
    v8f_t va = {a, a, a, a, a, a, a, a};
    for (; i + 16 <= n; i += 16) {
        v8f_t a0, a1, b0, b1;
        memcpy(&a0, y + i, sizeof a0);
        memcpy(&a1, y + i + 8, sizeof a1);
        memcpy(&b0, x + i, sizeof b0);
        memcpy(&b1, x + i + 8, sizeof b1);
        a0 = (a0 + b0) * va;
        a1 = (a1 + b1) * va;
        memcpy(y + i, &a0, sizeof a0);
        memcpy(y + i + 8, &a1, sizeof a1);
    }
    for (; i < n; i++) y[i] = (y[i] + x[i]) * a;
}

/* Floats in segment j and its offset in the buffer. */
static size_t seg_len(const hs_allreduce_t *ar, int j)
{
    return ar->seg_q + ((size_t)j < ar->seg_r);
}

static size_t seg_off(const hs_allreduce_t *ar, int j)
{
    return (size_t)j * ar->seg_q + HS_MIN((size_t)j, ar->seg_r);
}

/* Chunk k of segment j: [*off, *off + *len) in the buffer (len may be 0 for tiny buffers). */
static void chunk_range(const hs_allreduce_t *ar, int j, size_t k, size_t *off, size_t *len)
{
    size_t c = seg_len(ar, j), lo = c * k / ar->K, hi = c * (k + 1) / ar->K;
    *off = seg_off(ar, j) + lo;
    *len = hi - lo;
}

static int mod(long a, int p)
{
    long m = a % p;
    return (int)(m < 0 ? m + p : m);
}

static uint32_t item_tag(const hs_allreduce_t *ar, uint64_t op, size_t idx)
{
    uint64_t per_op = (uint64_t)ar->S * ar->K;
    return ar->o.tag_base + (uint32_t)((op * per_op + idx) % ar->o.tag_span);
}

/* A plan over every rank (members NULL) or over members[0..nmem) in that order (the ring). */
static int create(hs_allreduce_t **out, hs_transport_t *t, size_t n,
                  const hs_allreduce_opts_t *opts, const int *members, int nmem)
{
    if (!out || !t) return HS_ERR(-EINVAL, "hs_allreduce_create: NULL argument");
    *out = NULL;
    hs_allreduce_opts_t o;
    if (opts)
        o = *opts;
    else
        HS_TRY(hs_allreduce_opts_default(&o));
    if (!o.chunk_bytes) o.chunk_bytes = DEFAULT_CHUNK_BYTES;
    if (!o.tag_base) o.tag_base = HS_ALLREDUCE_TAG_BASE;
    if (!o.tag_span) o.tag_span = HS_ALLREDUCE_TAG_SPAN;
    if (o.chunk_bytes < sizeof(float))
        return HS_ERR(-EINVAL, "all-reduce: chunk of %zu bytes is below one float", o.chunk_bytes);
    if (o.depth < 0 || o.depth > MAX_DEPTH)
        return HS_ERR(-EINVAL, "all-reduce: depth %d outside 0..%d", o.depth, MAX_DEPTH);
    if (o.timeout_s < 0) return HS_ERR(-EINVAL, "all-reduce: negative timeout %g", o.timeout_s);
    if ((uint64_t)o.tag_base + o.tag_span - 1 > HS_TAG_MAX)
        return HS_ERR(-EINVAL, "all-reduce: tag range %u + %u passes HS_TAG_MAX (%u)", o.tag_base,
                      o.tag_span, HS_TAG_MAX);
    if (o.path < HS_AR_PATH_AUTO || o.path > HS_AR_PATH_HIER)
        return HS_ERR(-EINVAL,
                      "all-reduce: path %d is not auto (0), ring (1), direct (2), mapped (3) or "
                      "hier (4)",
                      o.path);
    int me = hs_transport_rank(t), P = hs_transport_size(t);
    if (members) {
        if (o.path != HS_AR_PATH_AUTO && o.path != HS_AR_PATH_RING)
            return HS_ERR(-EINVAL,
                          "all-reduce: a plan over %d of the %d ranks runs the ring "
                          "(path %d asked)",
                          nmem, P, o.path);
        int idx = -1;
        for (int i = 0; i < nmem; i++) {
            if (members[i] < 0 || members[i] >= P)
                return HS_ERR(-EINVAL, "all-reduce: group member %d is not a rank (0..%d)",
                              members[i], P - 1);
            if (members[i] == me) idx = i;
        }
        if (nmem < 1 || idx < 0)
            return HS_ERR(-EINVAL, "all-reduce: rank %d is not among the group's %d ranks", me,
                          nmem);
        o.path = HS_AR_PATH_RING;
        o.host_of = NULL;
        P = nmem;
        me = idx;
    }
    /* Ranks on several hosts, as many on each: the hierarchical plan (gossip/allreduce_hier.c),
     * by name or by auto. Each host's link carries 2 (H - 1) / H of the buffer instead of the
     * flat ring's 2 (HR - 1) / HR (mlp:1024-2048-2048-2048-10 on 2 emulated hosts x 2 ranks at
     * 1 Gbit: 489-560 against 604-648 ms per step; docs/benchmarks.md). It was by name only
     * while ofi_rxm's rendezvous made its 2-rank rings across the hosts take turns per
     * direction (gossip/hybrid.c, rxm_eager_default). HS_AR_PATH=ring keeps the flat ring. */
    int hier = !members && P > 1 && (o.path == HS_AR_PATH_HIER || o.path == HS_AR_PATH_AUTO) &&
               hs_ar_hier_fits(o.host_of, P);
    if (o.path == HS_AR_PATH_HIER && !hier)
        return HS_ERR(-EINVAL,
                      "all-reduce: HS_AR_PATH=hier needs ranks on several hosts, as many on "
                      "each (%s)",
                      o.host_of ? "the hosts here are one, or uneven" : "no host map given");

    hs_allreduce_t *ar = hs_calloc(1, sizeof *ar, "all-reduce plan");
    if (!ar) return -ENOMEM;
    ar->t = t;
    ar->o = o;
    ar->n = n;
    ar->P = P;
    ar->rank = me;
    ar->left = members ? members[mod(me - 1, P)] : mod(me - 1, P);
    ar->right = members ? members[(me + 1) % P] : (me + 1) % P;
    if (hier) {
        int rc = hs_ar_hier_create(&ar->hier, t, n, &o);
        if (rc < 0) {
            free(ar);
            return rc;
        }
        *out = ar;
        return 0;
    }
    ar->S = 2 * (size_t)(P - 1);
    ar->seg_q = n / (size_t)P;
    ar->seg_r = n % (size_t)P;
    size_t maxseg = ar->seg_q + (ar->seg_r > 0), cf = o.chunk_bytes / sizeof(float);
    ar->K = maxseg ? (maxseg + cf - 1) / cf : 1;
    /* Every item of a few operations must have its own tag. */
    if (ar->S && ar->S * ar->K > o.tag_span / 4) {
        ar->K = HS_MAX((size_t)1, o.tag_span / 4 / ar->S);
        if (ar->K > HS_MAX(maxseg, (size_t)1)) ar->K = HS_MAX(maxseg, (size_t)1);
    }
    ar->min_wire = (hs_transport_caps(t) & HS_TCAP_EARLY_SMALL) ? 0 : MIN_WIRE_BYTES;
    ar->slot_floats = HS_MAX((maxseg + ar->K - 1) / ar->K, ar->min_wire / sizeof(float));
    int tiny = (ar->seg_q / ar->K) * sizeof(float) < ar->min_wire; /* some chunk is padded */
    if (P > 1 && n > 0) {
        size_t items = ar->S * ar->K, rs_items = items / 2;
        ar->depth = o.depth > 0 ? (int)HS_MIN((size_t)o.depth, items) : (int)items;
        /* Slots: one per receive that can be outstanding and needs one (every reduce-scatter
         * receive; gather receives only when padded). */
        ar->nslots = (int)HS_MIN((size_t)ar->depth, tiny ? items : rs_items);
        ar->cap = (size_t)ar->depth + items;
        ar->scratch = hs_malloc((size_t)ar->nslots * ar->slot_floats * sizeof(float),
                                "all-reduce scratch slots");
        ar->free_slots = hs_calloc((size_t)ar->nslots, sizeof *ar->free_slots, "all-reduce slots");
        ar->reqs = hs_calloc(ar->cap, sizeof *ar->reqs, "all-reduce requests");
        ar->item = hs_calloc(ar->cap, sizeof *ar->item, "all-reduce requests");
        ar->slot = hs_calloc(ar->cap, sizeof *ar->slot, "all-reduce requests");
        if (tiny) ar->bounce = hs_malloc(items * ar->min_wire, "all-reduce padded sends");
        /* Whether peer reads work is settled collectively in the first exchange; here only
         * whether the backend has them at all (the same on every rank). */
        int want_direct = (o.path == HS_AR_PATH_AUTO || o.path == HS_AR_PATH_DIRECT) &&
                          hs_transport_has_peer_read(t);
        int want_mapped = (o.path == HS_AR_PATH_AUTO || o.path == HS_AR_PATH_MAPPED) &&
                          hs_transport_has_peer_map(t);
        /* A path asked for by name that this transport cannot give. */
        if ((o.path == HS_AR_PATH_MAPPED && !want_mapped) ||
            (o.path == HS_AR_PATH_DIRECT && !want_direct)) {
            int mapped = o.path == HS_AR_PATH_MAPPED;
            hs_allreduce_destroy(&ar);
            return HS_ERR(-ENOSYS,
                          "all-reduce: the %s path needs a transport that %s (hsshm); "
                          "this one is %s",
                          mapped ? "mapped" : "direct",
                          mapped ? "shares buffers between same-host ranks"
                                 : "reads same-host peers' memory",
                          hs_transport_provider(t));
        }
        ar->mapped = want_mapped ? 0 : -1;
        if (want_mapped) {
            ar->pctl = hs_calloc((size_t)P, sizeof *ar->pctl, "all-reduce mapped path");
            ar->pbuf = hs_calloc((size_t)P, sizeof *ar->pbuf, "all-reduce mapped path");
            ar->phdl = hs_calloc((size_t)P, sizeof *ar->phdl, "all-reduce mapped path");
            ar->pend = hs_calloc((size_t)P, sizeof *ar->pend, "all-reduce mapped path");
            if (!ar->direct_all)
                ar->direct_all =
                    hs_calloc((size_t)P, sizeof(struct direct_msg), "all-reduce direct");
            if (!ar->pctl || !ar->pbuf || !ar->phdl || !ar->pend || !ar->direct_all) {
                hs_allreduce_destroy(&ar);
                return -ENOMEM;
            }
        }
        /* The direct path needs 3 tags per operation, and 2 (P - 1) receives and sends at
         * once in the request table. */
        if (want_direct && items >= 3 && ar->cap >= 2 * (size_t)P) {
            ar->direct_tmp = hs_malloc(DIRECT_CHUNK * sizeof(float), "all-reduce direct chunk");
            if (!ar->direct_all)
                ar->direct_all =
                    hs_calloc((size_t)P, sizeof(struct direct_msg), "all-reduce direct");
            if (!ar->direct_tmp || !ar->direct_all) {
                hs_allreduce_destroy(&ar);
                return -ENOMEM;
            }
        }
        if (!ar->scratch || !ar->free_slots || !ar->reqs || !ar->item || !ar->slot ||
            (tiny && !ar->bounce)) {
            hs_allreduce_destroy(&ar);
            return -ENOMEM;
        }
    }
    *out = ar;
    return 0;
}

int hs_allreduce_create(hs_allreduce_t **out, hs_transport_t *t, size_t n,
                        const hs_allreduce_opts_t *opts)
{
    return create(out, t, n, opts, NULL, 0);
}

int hs_allreduce_create_group(hs_allreduce_t **out, hs_transport_t *t, size_t n,
                              const hs_allreduce_opts_t *opts, const int *members, int n_members)
{
    if (!members) return HS_ERR(-EINVAL, "hs_allreduce_create_group: NULL members");
    return create(out, t, n, opts, members, n_members);
}

void hs_allreduce_destroy(hs_allreduce_t **ar)
{
    if (!ar || !*ar) return;
    hs_allreduce_t *a = *ar;
    hs_ar_hier_destroy(&a->hier);
    for (size_t i = 0; i < a->nact; i++)
        if (a->reqs[i]) hs_transport_req_free(a->t, &a->reqs[i]);
    for (int p = 0; p < a->P && (a->pctl || a->pbuf); p++) {
        if (a->pbuf && a->pbuf[p]) {
            void *v = a->pbuf[p];
            hs_transport_peer_unmap(a->t, p, &v);
        }
        if (a->pctl && a->pctl[p]) {
            void *v = a->pctl[p];
            hs_transport_peer_unmap(a->t, p, &v);
        }
    }
    if (a->ctl) {
        void *v = a->ctl;
        hs_transport_buf_free(a->t, &v);
    }
    free(a->pctl);
    free(a->pbuf);
    free(a->phdl);
    free(a->pend);
    free(a->scratch);
    free(a->bounce);
    free(a->direct_tmp);
    free(a->direct_all);
    free(a->free_slots);
    free(a->reqs);
    free(a->item);
    free(a->slot);
    HS_FREE(*ar);
}

size_t hs_allreduce_len(const hs_allreduce_t *ar)
{
    return ar ? ar->n : 0;
}

uint64_t hs_allreduce_count(const hs_allreduce_t *ar)
{
    return ar ? ar->ops : 0;
}

/* Per-call state. */
typedef struct run {
    hs_allreduce_t *ar;
    float *buf;
    float inv; /* 1/P when averaging, else 0 */
    uint64_t op;
    size_t next_post, total, recv_done, recv_active, send_active;
} run_t;

static void act_push(hs_allreduce_t *ar, hs_treq_t *r, long item, int slot)
{
    ar->reqs[ar->nact] = r;
    ar->item[ar->nact] = item;
    ar->slot[ar->nact] = slot;
    ar->nact++;
}

/* Post send item (s, k) from the buffer. Empty chunks send nothing. */
static int post_send(run_t *ru, size_t s, size_t k)
{
    hs_allreduce_t *ar = ru->ar;
    size_t off, len, idx = s * ar->K + k;
    chunk_range(ar, mod(ar->rank - (long)s, ar->P), k, &off, &len);
    if (!len) return 0;
    const void *src = ru->buf + off;
    size_t bytes = len * sizeof(float);
    if (bytes < ar->min_wire) { /* padded: see MIN_WIRE_BYTES */
        char *b = ar->bounce + idx * ar->min_wire;
        memcpy(b, src, bytes);
        memset(b + bytes, 0, ar->min_wire - bytes);
        src = b;
        bytes = ar->min_wire;
    }
    hs_treq_t *r = NULL;
    int rc = hs_transport_isend(ar->t, ar->right, item_tag(ar, ru->op, idx), src, bytes, &r);
    if (rc < 0) {
        hs_error_prefix("all-reduce #%llu: sending step %zu chunk %zu to rank %d",
                        (unsigned long long)ru->op, s, k, ar->right);
        return rc;
    }
    act_push(ar, r, -1 - (long)idx, -1);
    ru->send_active++;
    return 0;
}

/* Post receives in item order while fewer than depth are outstanding. */
static int post_recvs(run_t *ru)
{
    hs_allreduce_t *ar = ru->ar;
    size_t rs_items = (size_t)(ar->P - 1) * ar->K;
    while (ru->next_post < ru->total && ru->recv_active < (size_t)ar->depth) {
        size_t idx = ru->next_post, s = idx / ar->K, k = idx % ar->K, off, len;
        chunk_range(ar, mod(ar->rank - (long)s - 1, ar->P), k, &off, &len);
        if (!len) { /* nothing travels: done at once, and its forward send is empty too */
            ru->next_post++;
            ru->recv_done++;
            continue;
        }
        int slot = -1;
        float *dst = ru->buf + off;
        size_t bytes = HS_MAX(len * sizeof(float), ar->min_wire);
        if (idx < rs_items || len * sizeof(float) < ar->min_wire) {
            if (ar->nfree == 0) break; /* tiny gather receives wait for a slot */
            slot = ar->free_slots[--ar->nfree];
            dst = ar->scratch + (size_t)slot * ar->slot_floats;
        }
        hs_treq_t *r = NULL;
        int rc = hs_transport_irecv(ar->t, ar->left, item_tag(ar, ru->op, idx), dst, bytes, &r);
        if (rc < 0) {
            if (slot >= 0) ar->free_slots[ar->nfree++] = slot;
            hs_error_prefix("all-reduce #%llu: receiving step %zu chunk %zu from rank %d",
                            (unsigned long long)ru->op, s, k, ar->left);
            return rc;
        }
        act_push(ar, r, (long)idx, slot);
        ru->next_post++;
        ru->recv_active++;
    }
    return 0;
}

/* A receive completed: reduce it (reduce-scatter) and forward the chunk one step on. */
static int on_recv(run_t *ru, size_t idx, int slot, size_t got)
{
    hs_allreduce_t *ar = ru->ar;
    size_t s = idx / ar->K, k = idx % ar->K, off, len;
    chunk_range(ar, mod(ar->rank - (long)s - 1, ar->P), k, &off, &len);
    size_t want = HS_MAX(len * sizeof(float), ar->min_wire);
    if (got != want)
        return HS_ERR(-EPROTO,
                      "all-reduce #%llu: step %zu chunk %zu from rank %d has %zu bytes, expected "
                      "%zu (do all ranks reduce the same length?)",
                      (unsigned long long)ru->op, s, k, ar->left, got, want);
    if (slot >= 0) {
        const float *x = ar->scratch + (size_t)slot * ar->slot_floats;
        if (s >= (size_t)ar->P - 1)
            memcpy(ru->buf + off, x, len * sizeof(float));
        else if (ru->inv != 0.0f && s == (size_t)ar->P - 2)
            add_scale_into(ru->buf + off, x, len, ru->inv);
        else
            add_into(ru->buf + off, x, len);
        ar->free_slots[ar->nfree++] = slot;
    }
    ru->recv_done++;
    if (s + 1 < ar->S) HS_TRY(post_send(ru, s + 1, k));
    return 0;
}

static void cancel_all(hs_allreduce_t *ar)
{
    for (size_t i = 0; i < ar->nact; i++)
        if (ar->reqs[i]) hs_transport_req_free(ar->t, &ar->reqs[i]);
    ar->nact = 0;
}

/* --- waiting ---------------------------------------------------------------------------- */

#define PATIENCE_SLICE 0.25

/* The plan's patience on a wait that has gone `waited` s without progress (bound `timeout`):
 * 1 to wait on. Without a patience callback: the bound alone. */
static int patient(const hs_allreduce_t *ar, double waited, double timeout)
{
    if (!ar->o.patience) return waited < timeout;
    return ar->o.patience(ar->o.patience_ctx, waited, timeout) > 0;
}

/* hs_transport_waitany on ar->reqs[0..n); with a patience callback in slices of
 * PATIENCE_SLICE s, for as long as it says (the error of the last slice when it stops). */
static int ar_waitany(hs_allreduce_t *ar, int n, double timeout, int *i, hs_tstatus_t *st)
{
    if (!ar->o.patience) return hs_transport_waitany(ar->t, ar->reqs, n, timeout, i, st);
    double t0 = hs_now();
    for (;;) {
        *i = -1;
        int rc = hs_transport_waitany(ar->t, ar->reqs, n, PATIENCE_SLICE, i, st);
        if (rc != -ETIMEDOUT || *i >= 0) return rc;
        if (!patient(ar, hs_now() - t0, timeout)) return rc;
        hs_error_clear();
    }
}

/* --- the direct path (same-host peers whose memory this rank can read) -------------------- */

/* One all-to-all of small messages for `phase` of operation op: every rank sends `mine`
 * to every other and gets theirs into all[] (indexed by rank; all[rank] = mine). It is also
 * a barrier: it returns once every rank has reached this phase. */
static int direct_exchange(hs_allreduce_t *ar, uint64_t op, uint32_t phase, direct_msg_t *mine,
                           direct_msg_t *all, double timeout)
{
    int P = ar->P;
    uint32_t tag = item_tag(ar, op, phase % 3); /* set-up phases 3, 4 reuse the first tags */
    mine->magic = DIRECT_MAGIC;
    mine->phase = phase;
    mine->op = op;
    all[ar->rank] = *mine;
    size_t n = 0;
    int rc = 0;
    for (int d = 1; d < P && rc == 0; d++) {
        int from = mod(ar->rank - d, P), to = (ar->rank + d) % P;
        rc = hs_transport_irecv(ar->t, from, tag, &all[from], sizeof all[from], &ar->reqs[n++]);
        if (rc == 0) rc = hs_transport_isend(ar->t, to, tag, mine, sizeof *mine, &ar->reqs[n++]);
    }
    ar->nact = n;
    for (size_t left = n; rc == 0 && left > 0; left--) {
        int i = -1;
        rc = ar_waitany(ar, (int)n, timeout, &i, NULL);
        if (rc == 0 && i < 0) rc = HS_ERR(-EIO, "all-reduce: wait returned no request");
    }
    if (rc < 0) {
        cancel_all(ar);
        hs_error_prefix("all-reduce #%llu (rank %d of %d), direct path, phase %u exchange",
                        (unsigned long long)op, ar->rank, P, phase);
        return rc;
    }
    ar->nact = 0;
    for (int r = 0; r < P; r++)
        if (all[r].magic != DIRECT_MAGIC || all[r].phase != phase || all[r].op != op ||
            all[r].n != ar->n)
            return HS_ERR(-EPROTO,
                          "all-reduce #%llu (rank %d): rank %d sent phase %u of operation %llu "
                          "for %llu floats (expected phase %u of %llu for %zu): every rank must "
                          "call the same all-reduces in the same order",
                          (unsigned long long)op, ar->rank, r, all[r].phase,
                          (unsigned long long)all[r].op, (unsigned long long)all[r].n, phase,
                          (unsigned long long)op, ar->n);
    return 0;
}

/* Returns 1 when the direct path ran (rc in *rc), 0 when the ranks agreed to use the ring. */
static int direct_run(hs_allreduce_t *ar, float *buf, float inv, uint64_t op, double timeout,
                      int *rcp)
{
    int P = ar->P, me = ar->rank;
    direct_msg_t *all = ar->direct_all, mine = {0};
    mine.addr = (uint64_t)(uintptr_t)buf;
    mine.n = ar->n;
    mine.ok = hs_transport_peer_read_ok(ar->t) ? 1 : 0;
    mine.shaped = (uint32_t)hs_transport_shaped(ar->t, -1);
    int rc = direct_exchange(ar, op, 0, &mine, all, timeout);
    if (rc == 0 && give_way_if_shaped(ar, all)) return 0;
    if (rc == 0) {
        int ok = 1;
        for (int r = 0; r < P; r++) ok &= all[r].ok == 1;
        if (!ok) {
            if (ar->o.path == HS_AR_PATH_DIRECT) {
                rc = HS_ERR(-ENOSYS,
                            "all-reduce: HS_AR_PATH=direct but some rank cannot read its peers' "
                            "memory (transport %s)",
                            hs_transport_provider(ar->t));
            } else { /* every rank saw the same flags: all use the ring from now on */
                HS_FREE(ar->direct_tmp);
                return 0;
            }
        }
    }
    /* Reduce-scatter: sum my segment over every rank, a cache-sized chunk at a time. */
    size_t off0 = seg_off(ar, me), len = seg_len(ar, me);
    for (size_t c = 0; rc == 0 && c < len; c += DIRECT_CHUNK) {
        size_t m = HS_MIN(DIRECT_CHUNK, len - c);
        float *y = buf + off0 + c;
        for (int d = 1; d < P && rc == 0; d++) {
            int p = (me + d) % P;
            rc = hs_transport_peer_read(ar->t, p, all[p].addr + (off0 + c) * sizeof(float),
                                        ar->direct_tmp, m * sizeof(float));
            if (rc == 0) {
                if (inv != 0.0f && d == P - 1)
                    add_scale_into(y, ar->direct_tmp, m, inv);
                else
                    add_into(y, ar->direct_tmp, m);
            }
        }
    }
    if (rc == 0) rc = direct_exchange(ar, op, 1, &mine, all, timeout);
    /* All-gather: every other finished segment straight into place. */
    for (int d = 1; d < P && rc == 0; d++) {
        int p = (me + d) % P;
        size_t o = seg_off(ar, p);
        rc = hs_transport_peer_read(ar->t, p, all[p].addr + o * sizeof(float), buf + o,
                                    seg_len(ar, p) * sizeof(float));
    }
    if (rc == 0) rc = direct_exchange(ar, op, 2, &mine, all, timeout);
    if (rc < 0)
        hs_error_prefix("all-reduce #%llu (rank %d of %d, %zu floats), direct path",
                        (unsigned long long)op, me, P, ar->n);
    *rcp = rc;
    return 1;
}

/* --- the mapped path (every rank's buffer in shared memory: hs_transport_buf_alloc) ------ */

static long futex_call(_Atomic uint32_t *w, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, (uint32_t *)w, op, val, ts, NULL, 0);
}

/* Tell the owner of c there is news. */
static void ctl_bell(ar_ctl_t *c)
{
    atomic_fetch_add(&c->bell, 1);
    if (atomic_load(&c->sleepers) > 0) futex_call(&c->bell, FUTEX_WAKE, INT_MAX, NULL);
}

static inline void cpu_relax(void)
{
#ifdef HAVE_STREAM
    _mm_pause();
#endif
}

/* "rank 3" or "ranks 1, 2": the ranks a wait still waits for. */
static void pend_text(const hs_allreduce_t *ar, char *buf, size_t cap)
{
    size_t w = (size_t)snprintf(buf, cap, "rank%s ", ar->npend > 1 ? "s" : "");
    for (int i = 0; i < ar->npend && w + 16 < cap; i++)
        w += (size_t)snprintf(buf + w, cap - w, "%s%d", i ? ", " : "", ar->pend[i]);
}

/* What a wait waits for. */
enum { W_ARRIVE, W_FILLED, W_STAGE };
static const char *const wait_what[] = {"to enter the operation",
                                        "to write their segments into this rank's buffer",
                                        "to finish their part of the copying fallback"};

/* Every peer's arrival at op (W_ARRIVE), the peers' segments of op written into my buffer
 * (W_FILLED: my done[p] = op + 1), every peer's stage >= want (W_STAGE). 1: there, 0: not
 * yet (ar->pend: the ranks missing), < 0: a peer gave up this operation. */
static int ctl_check(hs_allreduce_t *ar, uint64_t op, int kind, uint64_t want)
{
    ar->npend = 0;
    int gave_up = -1;
    for (int p = 0; p < ar->P; p++) {
        if (p == ar->rank) continue;
        if (gave_up < 0 && atomic_load(&ar->pctl[p]->failed) == op + 1) gave_up = p;
        if ((kind == W_ARRIVE && atomic_load(&ar->pctl[p]->arrive) < op + 1) ||
            (kind == W_STAGE && atomic_load(&ar->pctl[p]->stage) < want) ||
            (kind == W_FILLED && atomic_load(&ar->ctl->done[p]) < op + 1))
            ar->pend[ar->npend++] = p;
    }
    /* A peer that gave up is reported unless all this rank waited for is there and its
     * buffer is not touched any more (W_FILLED). */
    if (gave_up >= 0 && (ar->npend > 0 || kind != W_FILLED)) {
        if (!ar->npend)
            return HS_ERR(-ECONNABORTED, "rank %d gave up this operation (see its error)", gave_up);
        char who[256];
        pend_text(ar, who, sizeof who);
        return HS_ERR(-ECONNABORTED,
                      "nothing yet from %s (waiting for %s %s), and rank %d gave up this "
                      "operation (see its error)",
                      who, ar->npend > 1 ? "them" : "it", wait_what[kind], gave_up);
    }
    return ar->npend == 0;
}

/* Peer p has exited while this rank waited for it: an error naming it as the transport does
 * (a 1-byte direct read from the buffer it last published fails with its pid), or as here
 * where that cannot be had. */
static int peer_exited(hs_allreduce_t *ar, int p, int kind)
{
    char b;
    uint64_t a = ar->pctl[p]->addr;
    if (a && hs_transport_has_peer_read(ar->t) &&
        hs_transport_peer_read(ar->t, p, a, &b, 1) == -ECONNRESET) {
        hs_error_prefix("nothing from rank %d (waiting for it %s)", p, wait_what[kind]);
        return -ECONNRESET;
    }
    return HS_ERR(-ECONNRESET, "nothing from rank %d, which has exited (waiting for it %s)", p,
                  wait_what[kind]);
}

/* Wait for ctl_check: poll a little, then sleep on my bell, bounded by timeout; a peer that
 * exited is reported at once (-ECONNRESET), a late one after timeout (-ETIMEDOUT): both name
 * the ranks waited for. */
static int ctl_wait(hs_allreduce_t *ar, uint64_t op, int kind, uint64_t want, double timeout)
{
    ar_ctl_t *c = ar->ctl;
    double t0 = hs_now(), next_live = t0 + 0.05, next_patience = t0;
    for (int spin = 0;; spin++) {
        int r = ctl_check(ar, op, kind, want);
        if (r) return r < 0 ? r : 0;
        if (spin < MAPPED_SPIN) {
            cpu_relax();
            continue;
        }
        atomic_fetch_add(&c->sleepers, 1);
        uint32_t seen = atomic_load(&c->bell);
        r = ctl_check(ar, op, kind, want);
        double now = hs_now();
        if (r == 0 && (ar->o.patience || now - t0 < timeout)) {
            double d = ar->o.patience ? 0.05 : HS_MIN(timeout - (now - t0), 0.05);
            struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
            futex_call(&c->bell, FUTEX_WAIT, seen, &ts);
        }
        atomic_fetch_sub(&c->sleepers, 1);
        if (r) return r < 0 ? r : 0;
        now = hs_now();
        int give_up = now - t0 >= timeout;
        if (ar->o.patience) { /* (asked every PATIENCE_SLICE s) */
            give_up = 0;
            if (now >= next_patience) {
                next_patience = now + PATIENCE_SLICE;
                give_up = !patient(ar, now - t0, timeout);
            }
        }
        if (now >= next_live || give_up) {
            next_live = now + 0.05;
            for (int i = 0; i < ar->npend; i++)
                if (hs_transport_peer_gone(ar->t, ar->pend[i]) == 1)
                    return peer_exited(ar, ar->pend[i], kind);
        }
        if (give_up) {
            if (ctl_check(ar, op, kind, want)) continue; /* arrived meanwhile */
            char who[256];
            pend_text(ar, who, sizeof who);
            return HS_ERR(-ETIMEDOUT, "nothing from %s in %.1f s (waiting for %s %s)", who,
                          now - t0, ar->npend > 1 ? "them" : "it", wait_what[kind]);
        }
    }
}

/* Set up the mapped path (once per plan, collectively, with two small all-to-alls): every
 * rank makes a control block and maps every peer's. Every rank ends with the same ar->mapped
 * (1, or -1 when some rank could not). */
static int mapped_setup(hs_allreduce_t *ar, uint64_t op, double timeout)
{
    int P = ar->P;
    direct_msg_t mine = {0}, *all = ar->direct_all;
    void *v = NULL;
    mine.n = ar->n;
    mine.shaped = (uint32_t)hs_transport_shaped(ar->t, -1);
    size_t bytes = sizeof(ar_ctl_t) + (size_t)P * sizeof(uint64_t);
    if (hs_transport_buf_alloc(ar->t, bytes, &v) == 0) {
        ar->ctl = v;
        mine.ok = hs_transport_buf_handle(ar->t, v, bytes, &mine.hdl) == 0;
    }
    HS_TRY(direct_exchange(ar, op, 3, &mine, all, timeout));
    if (give_way_if_shaped(ar, all)) return 0;
    int ok = 1;
    for (int p = 0; p < P; p++) ok &= all[p].ok == 1;
    for (int p = 0; ok && p < P; p++) {
        if (p == ar->rank) continue;
        void *m = NULL;
        if (hs_transport_peer_map(ar->t, p, &all[p].hdl, &m) < 0) {
            HS_DEBUG("all-reduce: rank %d cannot map rank %d's control block (%s): no mapped path",
                     ar->rank, p, hs_last_error());
            ok = 0;
        } else {
            ar->pctl[p] = m;
        }
    }
    mine.ok = (uint32_t)ok;
    HS_TRY(direct_exchange(ar, op, 4, &mine, all, timeout));
    for (int p = 0; p < P; p++) ok &= all[p].ok == 1;
    if (ok) {
        ar->mapped = 1;
        return 0;
    }
    for (int p = 0; p < P; p++)
        if (ar->pctl[p]) {
            v = ar->pctl[p];
            hs_transport_peer_unmap(ar->t, p, &v);
            ar->pctl[p] = NULL;
        }
    if (ar->ctl) {
        v = ar->ctl;
        hs_transport_buf_free(ar->t, &v);
        ar->ctl = NULL;
    }
    ar->mapped = -1;
    if (ar->o.path == HS_AR_PATH_MAPPED)
        return HS_ERR(-ENOSYS,
                      "all-reduce: HS_AR_PATH=mapped but some rank cannot map its peers' "
                      "buffers (transport %s)",
                      hs_transport_provider(ar->t));
    return 0;
}

/* y[0..m) = (x[0][0..m) + x[1][0..m) + ... + x[P-1][0..m)) (* a when a != 0), in rank order
 * whichever rank computes it (y may be one of the x). */
static void sum_ranks(float *y, const float *const *x, int P, size_t m, float a)
{
    size_t i = 0;
    v8f_t va = {a, a, a, a, a, a, a, a};
    for (; i + 16 <= m; i += 16) {
        v8f_t s0, s1, b0, b1;
        memcpy(&s0, x[0] + i, sizeof s0);
        memcpy(&s1, x[0] + i + 8, sizeof s1);
        for (int r = 1; r < P; r++) {
            memcpy(&b0, x[r] + i, sizeof b0);
            memcpy(&b1, x[r] + i + 8, sizeof b1);
            s0 += b0;
            s1 += b1;
        }
        if (a != 0.0f) {
            s0 *= va;
            s1 *= va;
        }
        memcpy(y + i, &s0, sizeof s0);
        memcpy(y + i + 8, &s1, sizeof s1);
    }
    for (; i < m; i++) {
        float v = x[0][i];
        for (int r = 1; r < P; r++) v += x[r][i];
        y[i] = a != 0.0f ? v * a : v;
    }
}

/* Copy m floats into another rank's buffer with non-temporal stores where the CPU has them:
 * the lines go to memory without being read first (nobody here reads them again). */
static void stream_copy(float *dst, const float *src, size_t m)
{
    size_t i = 0;
#ifdef HAVE_STREAM
    for (; i < m && ((uintptr_t)(dst + i) & 15); i++) dst[i] = src[i];
    for (; i + 16 <= m; i += 16) {
        _mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
        _mm_stream_ps(dst + i + 4, _mm_loadu_ps(src + i + 4));
        _mm_stream_ps(dst + i + 8, _mm_loadu_ps(src + i + 8));
        _mm_stream_ps(dst + i + 12, _mm_loadu_ps(src + i + 12));
    }
#endif
    memcpy(dst + i, src + i, (m - i) * sizeof(float));
}

static void stream_fence(void)
{
#ifdef HAVE_STREAM
    _mm_sfence();
#endif
    atomic_thread_fence(memory_order_seq_cst);
}

/* Give up op: tell the peers (they stop waiting for this rank) and stop using the path. */
static int mapped_fail(hs_allreduce_t *ar, uint64_t op, int rc)
{
    atomic_store(&ar->ctl->failed, op + 1);
    for (int p = 0; p < ar->P; p++)
        if (p != ar->rank) ctl_bell(ar->pctl[p]);
    ar->mapped = -2;
    hs_error_prefix("all-reduce #%llu (rank %d of %d, %zu floats), mapped path",
                    (unsigned long long)op, ar->rank, ar->P, ar->n);
    return rc;
}

/* Some buffer is not shared memory, but every rank can read its peers' (process_vm_readv):
 * the direct path's copies, with the control blocks' counters in place of its message
 * exchanges (the addresses came with the arrival). */
static int copied_run(hs_allreduce_t *ar, float *buf, float inv, uint64_t op, double timeout)
{
    int P = ar->P, me = ar->rank, rc = 0;
    size_t off0 = seg_off(ar, me), len = seg_len(ar, me);
    for (size_t c = 0; rc == 0 && c < len; c += DIRECT_CHUNK) {
        size_t m = HS_MIN(DIRECT_CHUNK, len - c);
        float *y = buf + off0 + c;
        for (int d = 1; d < P && rc == 0; d++) {
            int p = (me + d) % P;
            rc = hs_transport_peer_read(ar->t, p, ar->pctl[p]->addr + (off0 + c) * sizeof(float),
                                        ar->direct_tmp, m * sizeof(float));
            if (rc == 0) {
                if (inv != 0.0f && d == P - 1)
                    add_scale_into(y, ar->direct_tmp, m, inv);
                else
                    add_into(y, ar->direct_tmp, m);
            }
        }
    }
    for (int step = 1; step <= 2 && rc == 0; step++) {
        atomic_store(&ar->ctl->stage, 2 * op + (uint64_t)step);
        for (int p = 0; p < P; p++)
            if (p != me) ctl_bell(ar->pctl[p]);
        rc = ctl_wait(ar, op, W_STAGE, 2 * op + (uint64_t)step, timeout);
        for (int d = 1; step == 1 && d < P && rc == 0; d++) { /* all-gather, in place */
            int p = (me + d) % P;
            size_t o = seg_off(ar, p);
            rc = hs_transport_peer_read(ar->t, p, ar->pctl[p]->addr + o * sizeof(float), buf + o,
                                        seg_len(ar, p) * sizeof(float));
        }
    }
    return rc < 0 ? mapped_fail(ar, op, rc) : 0;
}

/* Returns 1 when the mapped path ran (rc in *rcp), 0 when some rank's buffer is not shared
 * memory (every rank sees that and takes another path for this operation). */
static int mapped_run(hs_allreduce_t *ar, float *buf, float inv, uint64_t op, double timeout,
                      int *rcp)
{
    int P = ar->P, me = ar->rank;
    ar_ctl_t *c = ar->ctl;
    hs_tbuf_handle_t h;
    c->mapped = hs_transport_buf_handle(ar->t, buf, ar->n * sizeof(float), &h) == 0;
    c->hdl = h;
    c->addr = (uint64_t)(uintptr_t)buf;
    c->readok = hs_transport_has_peer_read(ar->t) && hs_transport_peer_read_ok(ar->t);
    atomic_store(&c->arrive, op + 1); /* publishes mapped and hdl */
    for (int p = 0; p < P; p++)
        if (p != me) ctl_bell(ar->pctl[p]);
    int rc = ctl_wait(ar, op, W_ARRIVE, 0, timeout);
    if (rc < 0) {
        *rcp = mapped_fail(ar, op, rc);
        return 1;
    }
    int all = (int)c->mapped, readok = (int)c->readok;
    for (int p = 0; p < P; p++)
        if (p != me) {
            all &= ar->pctl[p]->mapped == 1;
            readok &= ar->pctl[p]->readok == 1;
        }
    if (!all) {
        if (ar->o.path != HS_AR_PATH_MAPPED) {
            if (!readok || !ar->direct_tmp) return 0; /* every rank: the ring */
            *rcp = copied_run(ar, buf, inv, op, timeout);
            return 1;
        }
        *rcp =
            mapped_fail(ar, op,
                        HS_ERR(-EINVAL, "HS_AR_PATH=mapped, but a rank's buffer is not memory of "
                                        "hs_transport_buf_alloc"));
        return 1;
    }
    /* The peers' buffers, mapped here (kept while a peer keeps its buffer). */
    for (int p = 0; p < P; p++) {
        if (p == me) continue;
        hs_tbuf_handle_t ph = ar->pctl[p]->hdl;
        if (ar->pbuf[p] && !memcmp(&ph, &ar->phdl[p], sizeof ph)) continue;
        void *m = NULL, *old = ar->pbuf[p];
        rc = hs_transport_peer_map(ar->t, p, &ph, &m);
        if (rc < 0) {
            *rcp = mapped_fail(ar, op, rc);
            return 1;
        }
        hs_transport_peer_unmap(ar->t, p, &old); /* after mapping: a shared mapping stays */
        ar->pbuf[p] = m;
        ar->phdl[p] = ph;
    }
    /* Reduce my segment over every rank's buffer and write the result into every buffer, a
     * cache-sized chunk at a time (the sum stays in cache for the copies). Nobody else
     * reads or writes segment `me` of any buffer during the operation. */
    size_t off0 = seg_off(ar, me), len = seg_len(ar, me);
    const float *x[64];
    const float **xs = P <= 64 ? x : NULL;
    if (!xs && !(xs = hs_malloc((size_t)P * sizeof *xs, "all-reduce sources"))) {
        *rcp = mapped_fail(ar, op, -ENOMEM);
        return 1;
    }
    for (size_t ch = 0; ch < len; ch += DIRECT_CHUNK) {
        size_t m = HS_MIN(DIRECT_CHUNK, len - ch), o = off0 + ch;
        for (int r = 0; r < P; r++) xs[r] = (r == me ? buf : ar->pbuf[r]) + o;
        sum_ranks(buf + o, xs, P, m, inv);
        for (int d = 1; d < P; d++) {
            int p = (me + d) % P;
            if (atomic_load(&ar->pctl[p]->failed) == op + 1) { /* its buffer is its own again */
                rc = HS_ERR(-ECONNABORTED, "rank %d gave up this operation (see its error)", p);
                break;
            }
            stream_copy(ar->pbuf[p] + o, buf + o, m);
        }
        if (rc < 0) break;
    }
    if (xs != x) free(xs);
    stream_fence();
    if (rc < 0) {
        *rcp = mapped_fail(ar, op, rc);
        return 1;
    }
    for (int d = 1; d < P; d++) {
        int p = (me + d) % P;
        atomic_store(&ar->pctl[p]->done[me], op + 1);
        ctl_bell(ar->pctl[p]);
    }
    /* Done when every peer has written its segment here. */
    rc = ctl_wait(ar, op, W_FILLED, 0, timeout);
    *rcp = rc < 0 ? mapped_fail(ar, op, rc) : 0;
    return 1;
}

int hs_allreduce_run_avg(hs_allreduce_t *ar, float *buf, int average)
{
    if (!ar) return HS_ERR(-EINVAL, "hs_allreduce_run: NULL plan");
    if (!buf && ar->n) return HS_ERR(-EINVAL, "hs_allreduce_run: NULL buffer");
    uint64_t op = ar->ops++;
    if (ar->hier) return hs_ar_hier_run(ar->hier, buf, average);
    if (ar->P == 1 || ar->n == 0) return 0;
    run_t ru = {.ar = ar, .buf = buf, .inv = average ? 1.0f / (float)ar->P : 0.0f, .op = op};
    ru.total = ar->S * ar->K;
    ar->nact = 0;
    ar->nfree = ar->nslots;
    for (int i = 0; i < ar->nslots; i++) ar->free_slots[i] = ar->nslots - 1 - i;
    double timeout = ar->o.timeout_s > 0 ? ar->o.timeout_s : ar->t->opts.timeout_s;
    if (timeout <= 0) timeout = 60;
    if (ar->mapped == -2)
        return HS_ERR(-EIO,
                      "all-reduce #%llu: an earlier operation of this plan failed on the mapped "
                      "path (make a new plan)",
                      (unsigned long long)op);
    if (ar->mapped == 0) {
        int rc = mapped_setup(ar, op, timeout);
        if (rc < 0) {
            ar->mapped = -2;
            hs_error_prefix("all-reduce #%llu (rank %d of %d), setting up the mapped path",
                            (unsigned long long)op, ar->rank, ar->P);
            return rc;
        }
    }
    if (ar->mapped == 1) {
        int rc = 0;
        if (mapped_run(ar, buf, ru.inv, op, timeout, &rc)) return rc;
    }
    if (ar->direct_tmp) {
        int rc = 0;
        if (direct_run(ar, buf, ru.inv, op, timeout, &rc)) return rc;
    }

    int rc = post_recvs(&ru);
    for (size_t k = 0; rc == 0 && k < ar->K; k++) rc = post_send(&ru, 0, k);
    while (rc == 0 && (ru.recv_done < ru.total || ru.send_active > 0)) {
        int i = -1;
        hs_tstatus_t st = {0};
        rc = ar_waitany(ar, (int)ar->nact, timeout, &i, &st);
        if (rc < 0 || i < 0) {
            long it = i >= 0 ? ar->item[i] : (ar->nact ? ar->item[0] : 0);
            size_t idx = (size_t)(it >= 0 ? it : -1 - it);
            if (rc == 0) rc = HS_ERR(-EIO, "all-reduce: wait returned no request");
            hs_error_prefix("all-reduce #%llu (rank %d of %d, %zu floats), %s step %zu chunk "
                            "%zu %s rank %d",
                            (unsigned long long)op, ar->rank, ar->P, ar->n,
                            it >= 0 ? "receiving" : "sending", idx / ar->K, idx % ar->K,
                            it >= 0 ? "from" : "to", it >= 0 ? ar->left : ar->right);
            break;
        }
        long it = ar->item[i];
        int slot = ar->slot[i];
        ar->nact--; /* keep the table compact: the last entry fills the hole */
        ar->reqs[i] = ar->reqs[ar->nact];
        ar->item[i] = ar->item[ar->nact];
        ar->slot[i] = ar->slot[ar->nact];
        ar->reqs[ar->nact] = NULL;
        if (it < 0) {
            ru.send_active--;
            continue;
        }
        ru.recv_active--;
        rc = on_recv(&ru, (size_t)it, slot, st.len);
        if (rc == 0) rc = post_recvs(&ru);
    }
    if (rc < 0) cancel_all(ar);
    return rc;
}

int hs_allreduce_run(hs_allreduce_t *ar, float *buf)
{
    if (!ar) return HS_ERR(-EINVAL, "hs_allreduce_run: NULL plan");
    return hs_allreduce_run_avg(ar, buf, ar->o.average);
}

int hs_allreduce_sum(hs_transport_t *t, float *buf, size_t n, const hs_allreduce_opts_t *o)
{
    hs_allreduce_t *ar = NULL;
    HS_TRY(hs_allreduce_create(&ar, t, n, o));
    int rc = hs_allreduce_run(ar, buf);
    hs_allreduce_destroy(&ar);
    return rc;
}
