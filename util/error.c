/* util/error.c — thread-local error messages, logging, clocks, checked allocation, parsing. */
#include "hearsay/common.h"
#include "hearsay/env.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static _Thread_local char tls_msg[HS_ERRMSG_MAX];
static _Thread_local char tls_where[128];

int hs_error_set(int code, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tls_msg, sizeof tls_msg, fmt, ap);
    va_end(ap);
    const char *base = strrchr(file, '/');
    snprintf(tls_where, sizeof tls_where, "%s:%d", base ? base + 1 : file, line);
    if (hs_env_flag("HEARSAY_DEBUG"))
        fprintf(stderr, "hearsay: error %d at %s: %s\n", code, tls_where, tls_msg);
    return code < 0 ? code : -EINVAL;
}

void hs_error_prefix(const char *fmt, ...)
{
    char pre[HS_ERRMSG_MAX], old[HS_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, tls_msg, sizeof old);
    snprintf(tls_msg, sizeof tls_msg, "%s: %s", pre, old);
}

const char *hs_last_error(void)
{
    return tls_msg;
}

const char *hs_last_error_where(void)
{
    return tls_where;
}

void hs_error_keep(hs_error_kept_t *k)
{
    memcpy(k->msg, tls_msg, sizeof k->msg);
    memcpy(k->where, tls_where, sizeof k->where);
}

void hs_error_restore(const hs_error_kept_t *k)
{
    memcpy(tls_msg, k->msg, sizeof tls_msg);
    memcpy(tls_where, k->where, sizeof tls_where);
}

void hs_error_clear(void)
{
    tls_msg[0] = '\0';
    tls_where[0] = '\0';
}

static int log_threshold(void)
{
    const char *v = hs_env_str("HEARSAY_LOG");
    if (!v) return HS_LOG_INFO;
    if (!strcmp(v, "error")) return HS_LOG_ERROR;
    if (!strcmp(v, "warn")) return HS_LOG_WARN;
    if (!strcmp(v, "debug")) return HS_LOG_DEBUG;
    return HS_LOG_INFO;
}

int hs_log_enabled(enum hs_log_level level)
{
    return (int)level <= log_threshold();
}

void hs_log(enum hs_log_level level, const char *fmt, ...)
{
    static const char *names[] = {"error", "warning", "info", "debug"};
    if (!hs_log_enabled(level)) return;
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (level == HS_LOG_INFO)
        fprintf(stderr, "%s\n", buf);
    else
        fprintf(stderr, "hearsay: %s: %s\n", names[level], buf);
}

double hs_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double hs_thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void hs_sleep(double seconds)
{
    if (!(seconds > 0)) return;
    struct timespec req, rem;
    req.tv_sec = (time_t)seconds;
    req.tv_nsec = (long)((seconds - (double)req.tv_sec) * 1e9);
    while (nanosleep(&req, &rem) != 0 && errno == EINTR) req = rem;
}

void *hs_malloc(size_t bytes, const char *what)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) HS_ERR(-ENOMEM, "out of memory allocating %zu bytes for %s", bytes, what);
    return p;
}

void *hs_calloc(size_t count, size_t size, const char *what)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) HS_ERR(-ENOMEM, "out of memory allocating %zu x %zu bytes for %s", count, size, what);
    return p;
}

int hs_parse_long(const char *s, long lo, long hi, const char *what, long *out)
{
    if (!s || !*s) return HS_ERR(-EINVAL, "%s: empty value (expected an integer)", what);
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end != '\0') return HS_ERR(-EINVAL, "%s: '%s' is not an integer", what, s);
    if (v < lo || v > hi)
        return HS_ERR(-EINVAL, "%s: %ld is out of range [%ld, %ld]", what, v, lo, hi);
    *out = v;
    return 0;
}

int hs_parse_double(const char *s, double lo, double hi, const char *what, double *out)
{
    if (!s || !*s) return HS_ERR(-EINVAL, "%s: empty value (expected a number)", what);
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end != '\0' || !isfinite(v))
        return HS_ERR(-EINVAL, "%s: '%s' is not a finite number", what, s);
    if (v < lo || v > hi)
        return HS_ERR(-EINVAL, "%s: %g is out of range [%g, %g]", what, v, lo, hi);
    *out = v;
    return 0;
}
