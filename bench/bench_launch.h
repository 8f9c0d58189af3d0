/* bench/bench_launch.h — helpers of the multi-rank benchmarks (bench allreduce, bench gossip):
 * list parsing, starting this program as N ranks and collecting rank 0's result lines, the
 * per-rank timing gather, and environment notes for the JSON output. */
#ifndef HEARSAY_BENCH_LAUNCH_H
#define HEARSAY_BENCH_LAUNCH_H

#include "hearsay/allreduce.h"
#include "hearsay/transport.h"

#include <stddef.h>
#include <stdio.h>

#define HS_BL_MAX_LIST 16

/* Parse "1M,16M,64M" (bytes; K/M/G are KiB/MiB/GiB) into out[0..*n). Returns 0 or -EINVAL
 * naming `what` and the bad item. */
int hs_bl_parse_sizes(const char *s, const char *what, size_t *out, int *n);
/* Parse "2,4,8" (each in lo..hi) into out[0..*n). */
int hs_bl_parse_ints(const char *s, const char *what, long lo, long hi, int *out, int *n);
/* "16M" style text of a byte count (exact multiples of K/M/G, else bytes). */
const char *hs_bl_size_text(size_t bytes, char *buf, size_t cap);

/* Absolute path of this program (the real binary behind a libtool wrapper works too, the
 * wrapper's environment being inherited). */
int hs_bl_self(char *buf, size_t cap);
/* Run argv (NULL-terminated) with the test harness's job runner (tests/runlib.h), its stdout
 * captured into *out (malloc'd, NUL-terminated) and its stderr passed through, for at most
 * limit_s (then the job is killed). *status: exit status, 128+signal, or -1 when killed for the
 * limit. Returns 0 or an error when it could not be started. */
int hs_bl_capture(char *const argv[], double limit_s, char **out, int *status);
/* 1 when `prog` is an executable in $PATH (tr_in_path). */
int hs_bl_in_path(const char *prog);

/* Find the next result line in `text` (from *pos): a line containing "HSB " ; copies the
 * part after it to line (cap bytes) and advances *pos. Returns 1, or 0 when none is left. */
int hs_bl_next_result(const char *text, size_t *pos, char *line, size_t cap);
/* Value of key=VALUE in a result line (VALUE up to the next space), or NULL. */
const char *hs_bl_field(const char *line, const char *key, char *buf, size_t cap);

/* Tags each of the benchmarks' private collectives (barrier, timing gather) may use from its
 * base: keep bases this far apart and outside other traffic. */
#define HS_BL_TAG_SPAN 0x80u

/* Options of the benchmarks' own all-reduces (barriers, timing gathers) on plain memory,
 * on tags tag .. tag + HS_BL_TAG_SPAN - 1: the library's defaults, except that
 * HS_AR_PATH=mapped (meant for the measured all-reduce) falls back to auto, since plain
 * memory cannot take the mapped path. */
int hs_bl_plain_opts(hs_allreduce_opts_t *o, unsigned tag);

/* Collective: every rank contributes times[0..n); every rank gets the element-wise maximum
 * over ranks in times (as floats: ~1e-7 relative). Runs a ring all-reduce on tags
 * tag .. tag + HS_BL_TAG_SPAN - 1 (keep them free of other traffic). */
int hs_bl_gather_max(hs_transport_t *t, double *times, int n, unsigned tag);

/* Collective: every rank contributes se[0..n) the hs_now() times at which it started each of
 * n repetitions and se[n..2n) those at which it ended them; every rank gets in se[0..n) each
 * repetition's span, the last end over ranks minus the first start (CLOCK_MONOTONIC is one
 * clock for every process of a host; each time travels as two floats, so the span keeps
 * ~1e-10 s). Same tags as hs_bl_gather_max. */
int hs_bl_gather_span(hs_transport_t *t, double *se, int n, unsigned tag);

/* Number of online CPUs. */
int hs_bl_cores(void);

struct hs_cfg;
struct hs_cfg_spec;
/* The common start of a multi-rank benchmark command `hearsay bench NAME`: parse argv with
 * spec, answer --help, and parse its --sizes and --ranks (each rank count >= min_ranks).
 * Returns -1 to go on (*cfg owned by the caller), else the exit status to return: 0 after
 * --help, 1 or 2 after an error (printed, naming the command). */
int hs_bl_start(const char *name, const struct hs_cfg_spec *spec, int argc, char **argv,
                long min_ranks, struct hs_cfg **cfg, size_t *sizes, int *nsizes, int *ranks,
                int *nranks);

#endif
