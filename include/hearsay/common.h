/*
 * hearsay/common.h — errors, logging, clocks and small helpers shared by every module.
 *
 * Errors are values: library functions return 0 on success or a negative errno-style
 * code (-EINVAL, -ENOMEM, -EIO, -ENOSYS, -ETIMEDOUT, ...). The function that detects a
 * failure records a human-readable message with HS_ERR(); callers propagate the code and
 * may add context with hs_error_prefix(). Only main() prints the message and exits.
 * The message lives in thread-local storage, so many workers can share one process.
 */
#ifndef HEARSAY_COMMON_H
#define HEARSAY_COMMON_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HS_ERRMSG_MAX 1024

/* Record an error: formats the message, remembers file:line, and returns `code` (negative).
 * With HEARSAY_DEBUG=1 in the environment, every recorded error is also logged to stderr
 * at the point of failure. Use through HS_ERR. */
int hs_error_set(int code, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define HS_ERR(code, ...) hs_error_set((code), __FILE__, __LINE__, __VA_ARGS__)

/* Prepend context to the current thread's error message ("reading x.idx: <old message>").
 * Returns nothing; the code is propagated by the caller. */
void hs_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The current thread's last error message ("" when none), and where it was raised. */
const char *hs_last_error(void);
const char *hs_last_error_where(void);
void hs_error_clear(void);

/* The current thread's error, kept across clean-up that may record errors of its own (a
 * close after a failure must not replace the failure's message). */
typedef struct hs_error_kept {
    char msg[HS_ERRMSG_MAX];
    char where[128];
} hs_error_kept_t;
void hs_error_keep(hs_error_kept_t *k);
void hs_error_restore(const hs_error_kept_t *k);

/* Propagate a negative return code: `HS_TRY(f(x));` returns it from the enclosing function. */
#define HS_TRY(expr)                                                                               \
    do {                                                                                           \
        int hs_try_rc_ = (expr);                                                                   \
        if (hs_try_rc_ < 0) return hs_try_rc_;                                                     \
    } while (0)

/* Logging to stderr. Level from HEARSAY_LOG (error|warn|info|debug; default info). */
enum hs_log_level { HS_LOG_ERROR = 0, HS_LOG_WARN = 1, HS_LOG_INFO = 2, HS_LOG_DEBUG = 3 };
void hs_log(enum hs_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int hs_log_enabled(enum hs_log_level level);
#define HS_WARN(...)  hs_log(HS_LOG_WARN, __VA_ARGS__)
#define HS_INFO(...)  hs_log(HS_LOG_INFO, __VA_ARGS__)
#define HS_DEBUG(...) hs_log(HS_LOG_DEBUG, __VA_ARGS__)

/* Monotonic clock in seconds. */
double hs_now(void);
/* CPU time of the calling thread in seconds. */
double hs_thread_cpu_s(void);
/* Sleep for `seconds` (>= 0), resuming after signals. */
void hs_sleep(double seconds);

/* A worker's exit statuses that are not failures of the job (`hearsay run` lets the others run
 * on): an injected crash (--straggler crash) 70, a fenced rank (runtime/heartbeat.h) 71, and an
 * injected crash that asks the launcher for a replacement (crash:...:rejoin=D) 72. `hearsay run`
 * starts a replacement for a rank that exits 72 at once, with HS_INCARNATION=K (its K-th
 * replacement) and HS_CRASHED_AT (hs_now() when the launcher saw the exit) in its environment. */
#define HS_EXIT_REJOIN 72

/* Checked allocation helpers: return NULL and record -ENOMEM with `what` in the message. */
void *hs_malloc(size_t bytes, const char *what);
void *hs_calloc(size_t count, size_t size, const char *what);
/* free() that also nulls the pointer: HS_FREE(p). */
#define HS_FREE(p)                                                                                 \
    do {                                                                                           \
        free(p);                                                                                   \
        (p) = NULL;                                                                                \
    } while (0)

/* Strict number parsing for flags and config values: the whole string must be a number
 * in range. Return 0 or -EINVAL with a message naming `what` and the bad text. */
int hs_parse_long(const char *s, long lo, long hi, const char *what, long *out);
int hs_parse_double(const char *s, double lo, double hi, const char *what, double *out);

#define HS_MIN(a, b)    ((a) < (b) ? (a) : (b))
#define HS_MAX(a, b)    ((a) > (b) ? (a) : (b))
#define HS_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#ifdef __cplusplus
}
#endif
#endif
