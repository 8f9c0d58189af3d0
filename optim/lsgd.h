/*
 * optim/lsgd.h — the pieces of leader-SGD that need no transport: the recent-loss table and
 * the leader election over it, the group layout, and the versioned (triple-buffered) snapshot a
 * worker publishes for the workers that follow it. Used by optim/lsgd.c; tested directly by
 * tests/test_easgd.c.
 */
#ifndef HEARSAY_OPTIM_LSGD_H
#define HEARSAY_OPTIM_LSGD_H

#include "hearsay/exec.h"

#include <stddef.h>
#include <stdint.h>

/* What a worker knows about one rank's recent training loss. */
typedef struct hs_lsgd_entry {
    double loss;    /* the rank's mean loss over its last k batches */
    long version;   /* the rank's iteration when it sent it (newer replaces older) */
    double seen_s;  /* the clock (hs_exec_now) when it arrived here */
    long seen_iter; /* this worker's iteration when it arrived */
    int valid;      /* 0: nothing heard yet */
    int done;       /* the rank has finished its run */
} hs_lsgd_entry_t;

/* Record (loss, version) from rank r into tab (ignored when older than what is there). */
void hs_lsgd_note(hs_lsgd_entry_t *tab, int r, double loss, long version, double now, long my_iter);

/* The leader among ranks lo..hi-1: the valid, live (dead[r] == 0; dead may be NULL), fresh
 * entry with the lowest loss, ties to the lowest rank. An entry is stale, and skipped, when
 * it is older than age_s seconds AND age_iters of this worker's iterations (a silent or
 * paused rank ages out; a merely slow one does not). `self` (in range or not) is always
 * fresh. Returns the rank, or -1 when no entry qualifies. */
int hs_lsgd_elect(const hs_lsgd_entry_t *tab, const char *dead, int lo, int hi, int self,
                  double now, double age_s, long my_iter, long age_iters);

/* The group of `rank` when `size` ranks are split into `groups` contiguous groups (sizes
 * differ by at most one): ranks [*lo, *hi). */
void hs_lsgd_group(int rank, int size, int groups, int *lo, int *hi);

/* A published parameter snapshot, triple-buffered: the publisher writes a buffer that is
 * neither the current one nor being read, then makes it current; a reader pins the current
 * buffer (a reference count), copies it and unpins it. The lock (`mu`, hearsay/exec.h's short
 * lock) is held only to pick, pin, unpin and switch buffers, never during a copy, so a reader
 * slowed down for any time (a service thread starved of CPU) neither fails nor retries, and
 * the publisher never waits
 * for it: with one reader thread a buffer is always free (the current one and the one being
 * read are two of three). The publisher also stores the checksum of what it wrote, which the
 * reader checks against its copy. Versions are even (2 per publish), as on the wire. */
#define HS_SNAPSHOT_BUFS 3

typedef struct hs_snapshot_buf {
    float *data;      /* (n) */
    long iter;        /* publisher's iteration */
    double loss;      /* publisher's recent loss */
    uint64_t check;   /* hs_el_checksum of data */
    uint64_t version; /* 2, 4, ...: the publish that wrote it */
    int readers;      /* readers copying it now (under mu) */
} hs_snapshot_buf_t;

typedef struct hs_snapshot {
    hs_spinlock_t mu; /* guards cur, version and every buffer's readers and fields */
    size_t n;
    hs_snapshot_buf_t buf[HS_SNAPSHOT_BUFS];
    int cur;          /* the current buffer; -1: never published */
    uint64_t version; /* of the current buffer; 0: never published */
    long skipped;     /* publishes skipped because every other buffer was being read */
    /* test hook (tests/test_easgd.c): called by hs_snapshot_read while it holds its buffer,
     * before it copies; NULL in the library */
    void (*test_during_read)(void *ctx);
    void *test_ctx;
} hs_snapshot_t;

int hs_snapshot_init(hs_snapshot_t *s, size_t n);
void hs_snapshot_free(hs_snapshot_t *s);
/* Publish src (n floats); one publisher thread only. Never waits for a reader: 0, or -EBUSY
 * when every buffer but the current one is being read (more than one reader at once; the
 * previous snapshot stays current, `skipped` counts it). */
int hs_snapshot_publish(hs_snapshot_t *s, const float *src, long iter, double loss);
/* Copy the current snapshot into dst (n floats): 0, with its version, iter, loss, check; or
 * -EAGAIN when nothing was published yet; -EPROTO if the copy fails its checksum (memory
 * corrupted: cannot happen otherwise). Any number of reader threads; never retries. */
int hs_snapshot_read(hs_snapshot_t *s, float *dst, uint64_t *version, long *iter, double *loss,
                     uint64_t *check);

#endif
