/* bench/bench_launch.c — helpers of the multi-rank benchmarks (see bench_launch.h). */
#include "bench/bench_launch.h"

#include "hearsay/allreduce.h"
#include "hearsay/common.h"
#include "hearsay/options.h"
#include "tests/runlib.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int hs_bl_parse_sizes(const char *s, const char *what, size_t *out, int *n)
{
    *n = 0;
    if (!s || !*s) return HS_ERR(-EINVAL, "%s: empty list", what);
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        double v = strtod(p, &end);
        if (end == p || errno || v <= 0)
            return HS_ERR(-EINVAL, "%s: bad size at '%s' (want e.g. 1M,16M,64M)", what, p);
        double mul = 1;
        switch (toupper((unsigned char)*end)) {
        case 'K':
            mul = 1024.0, end++;
            break;
        case 'M':
            mul = 1024.0 * 1024, end++;
            break;
        case 'G':
            mul = 1024.0 * 1024 * 1024, end++;
            break;
        default:
            break;
        }
        if (toupper((unsigned char)*end) == 'I') end++; /* 16MiB */
        if (toupper((unsigned char)*end) == 'B') end++;
        if (*end && *end != ',')
            return HS_ERR(-EINVAL, "%s: bad size at '%s' (want e.g. 1M,16M,64M)", what, p);
        double bytes = v * mul;
        if (bytes < 4 || bytes > 64.0 * 1024 * 1024 * 1024)
            return HS_ERR(-EINVAL, "%s: size '%.*s' outside 4 bytes .. 64 GiB", what,
                          (int)(end - p), p);
        if (*n >= HS_BL_MAX_LIST)
            return HS_ERR(-EINVAL, "%s: more than %d sizes", what, HS_BL_MAX_LIST);
        out[(*n)++] = (size_t)bytes;
        p = *end ? end + 1 : end;
    }
    return 0;
}

int hs_bl_parse_ints(const char *s, const char *what, long lo, long hi, int *out, int *n)
{
    *n = 0;
    if (!s || !*s) return HS_ERR(-EINVAL, "%s: empty list", what);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        long v;
        HS_TRY(hs_parse_long(tok, lo, hi, what, &v));
        if (*n >= HS_BL_MAX_LIST)
            return HS_ERR(-EINVAL, "%s: more than %d values", what, HS_BL_MAX_LIST);
        out[(*n)++] = (int)v;
    }
    return *n ? 0 : HS_ERR(-EINVAL, "%s: empty list '%s'", what, s);
}

const char *hs_bl_size_text(size_t bytes, char *buf, size_t cap)
{
    if (bytes >= (1u << 30) && bytes % (1u << 30) == 0)
        snprintf(buf, cap, "%zuG", bytes >> 30);
    else if (bytes >= (1u << 20) && bytes % (1u << 20) == 0)
        snprintf(buf, cap, "%zuM", bytes >> 20);
    else if (bytes >= 1024 && bytes % 1024 == 0)
        snprintf(buf, cap, "%zuK", bytes >> 10);
    else
        snprintf(buf, cap, "%zu", bytes);
    return buf;
}

int hs_bl_self(char *buf, size_t cap)
{
    ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
    if (n <= 0) return HS_ERR(-errno, "readlink /proc/self/exe: %s", strerror(errno));
    buf[n] = '\0';
    return 0;
}

int hs_bl_in_path(const char *prog)
{
    return tr_in_path(prog);
}

int hs_bl_capture(char *const argv[], double limit_s, char **out, int *status)
{
    *out = NULL;
    *status = -1;
    tr_opts_t o = {.capture = TR_CAPTURE_STDOUT};
    tr_job_t j;
    int st = tr_run(&j, (const char *const *)argv, &o, limit_s);
    if (st == TR_NOT_STARTED) {
        tr_job_free(&j);
        return HS_ERR(-EIO, "could not start %s (the reason is above)", argv[0]);
    }
    *status = st == TR_TIMEOUT ? -1 : TR_IS_SIGNALED(st) ? 128 + TR_SIGNAL_OF(st) : st;
    *out = j.out;
    j.out = NULL;
    tr_job_free(&j);
    return 0;
}

int hs_bl_next_result(const char *text, size_t *pos, char *line, size_t cap)
{
    const char *q = strstr(text + *pos, "HSB ");
    if (!q) return 0;
    q += 4;
    const char *eol = strchr(q, '\n');
    size_t n = eol ? (size_t)(eol - q) : strlen(q);
    snprintf(line, cap, "%.*s", (int)HS_MIN(n, cap - 1), q);
    *pos = (size_t)(q - text) + n;
    return 1;
}

const char *hs_bl_field(const char *line, const char *key, char *buf, size_t cap)
{
    size_t kl = strlen(key);
    for (const char *q = line; (q = strstr(q, key)) != NULL; q += kl) {
        if ((q == line || q[-1] == ' ') && q[kl] == '=') {
            const char *v = q + kl + 1, *e = strchr(v, ' ');
            size_t n = e ? (size_t)(e - v) : strlen(v);
            snprintf(buf, cap, "%.*s", (int)HS_MIN(n, cap - 1), v);
            return buf;
        }
    }
    return NULL;
}

int hs_bl_plain_opts(hs_allreduce_opts_t *o, unsigned tag)
{
    HS_TRY(hs_allreduce_opts_default(o));
    o->tag_base = tag;
    o->tag_span = HS_BL_TAG_SPAN;
    if (o->path == HS_AR_PATH_MAPPED) o->path = HS_AR_PATH_AUTO; /* plain memory */
    return 0;
}

/* The timing gathers' exchange: sum `all` (count floats, plain memory) over the ranks on
 * tags tag .. Through the all-reduce (every receive posted before anything can arrive, and
 * messages padded past shm's inject size), not plain send/recv: libfabric 1.17's shm loses
 * small messages that arrive before their receive. Each rank fills its own row of `all` and
 * leaves the others zero, so the sum holds every rank's row exactly. */
static int sum_rows(hs_transport_t *t, float *all, size_t count, unsigned tag)
{
    hs_allreduce_opts_t o;
    HS_TRY(hs_bl_plain_opts(&o, tag));
    return hs_allreduce_sum(t, all, count, &o);
}

int hs_bl_gather_max(hs_transport_t *t, double *times, int n, unsigned tag)
{
    /* Row r of the (P, n) buffer is rank r's times (sum_rows). */
    int rank = hs_transport_rank(t), P = hs_transport_size(t);
    if (P == 1 || n <= 0) return 0;
    float *all = hs_calloc((size_t)P * (size_t)n, sizeof *all, "timing gather");
    if (!all) return -ENOMEM;
    for (int i = 0; i < n; i++) all[(size_t)rank * (size_t)n + (size_t)i] = (float)times[i];
    int rc = sum_rows(t, all, (size_t)P * (size_t)n, tag);
    for (int r = 0; rc == 0 && r < P; r++)
        for (int i = 0; i < n; i++)
            times[i] = HS_MAX(times[i], (double)all[(size_t)r * (size_t)n + (size_t)i]);
    free(all);
    return rc;
}

int hs_bl_gather_span(hs_transport_t *t, double *se, int n, unsigned tag)
{
    int rank = hs_transport_rank(t), P = hs_transport_size(t);
    if (n <= 0) return 0;
    if (P == 1) {
        for (int i = 0; i < n; i++) se[i] = se[n + i] - se[i];
        return 0;
    }
    /* Row r: rank r's (-start, end) of each repetition, each as hi + lo floats (rows of the
     * other ranks are zero, so the sum is exact); the max of -start is the first start. */
    size_t row = 4 * (size_t)n;
    float *all = hs_calloc((size_t)P * row, sizeof *all, "timing gather");
    if (!all) return -ENOMEM;
    for (int i = 0; i < n; i++) {
        double v[2] = {-se[i], se[n + i]};
        for (int k = 0; k < 2; k++) {
            float hi = (float)v[k];
            all[(size_t)rank * row + 4 * (size_t)i + 2 * (size_t)k] = hi;
            all[(size_t)rank * row + 4 * (size_t)i + 2 * (size_t)k + 1] = (float)(v[k] - hi);
        }
    }
    int rc = sum_rows(t, all, (size_t)P * row, tag);
    for (int i = 0; rc == 0 && i < n; i++) {
        double first = -HUGE_VAL, last = -HUGE_VAL;
        for (int r = 0; r < P; r++) {
            const float *a = all + (size_t)r * row + 4 * (size_t)i;
            first = HS_MAX(first, (double)a[0] + (double)a[1]);
            last = HS_MAX(last, (double)a[2] + (double)a[3]);
        }
        se[i] = last + first;
    }
    free(all);
    return rc;
}

int hs_bl_cores(void)
{
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c > 0 ? (int)c : 1;
}

int hs_bl_start(const char *name, const struct hs_cfg_spec *spec, int argc, char **argv,
                long min_ranks, struct hs_cfg **cfg, size_t *sizes, int *nsizes, int *ranks,
                int *nranks)
{
    *cfg = NULL;
    if (hs_cfg_create(cfg, spec) < 0) {
        fprintf(stderr, "hearsay bench %s: %s\n", name, hs_last_error());
        return 1;
    }
    int rc = hs_cfg_parse_args(*cfg, argc, argv);
    if (rc == HS_CFG_HELP) {
        hs_cfg_print_help(*cfg, stdout);
        hs_cfg_free(cfg);
        return 0;
    }
    if (rc == 0) rc = hs_bl_parse_sizes(hs_cfg_str(*cfg, "sizes"), "--sizes", sizes, nsizes);
    if (rc == 0)
        rc = hs_bl_parse_ints(hs_cfg_str(*cfg, "ranks"), "--ranks", min_ranks, 256, ranks, nranks);
    if (rc < 0) {
        fprintf(stderr, "hearsay bench %s: %s\n", name, hs_last_error());
        hs_cfg_free(cfg);
        return 2;
    }
    return -1;
}
