/* tests/runlib.c — see tests/runlib.h. */
#include "tests/runlib.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* DIR/summary.json into buf (NUL-terminated, truncated to cap - 1 bytes); 0 or -1. */
static int read_summary(const char *dir, char *buf, size_t cap)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/summary.json", dir);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return 0;
}

/* The value at p: a number, true/false (1/0) or null (NAN). */
static double value_at(const char *p)
{
    if (!strncmp(p, "null", 4)) return NAN;
    if (!strncmp(p, "true", 4)) return 1;
    if (!strncmp(p, "false", 5)) return 0;
    return strtod(p, NULL);
}

double tr_summary_num(const char *dir, const char *key)
{
    static char buf[1 << 16];
    char pat[128];
    if (read_summary(dir, buf, sizeof buf) < 0) return NAN;
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(buf, pat);
    return p ? value_at(p + strlen(pat)) : NAN;
}

double tr_summary_rank_num(const char *dir, int rank, const char *key)
{
    static char buf[1 << 16];
    char pat[128];
    if (read_summary(dir, buf, sizeof buf) < 0) return NAN;
    const char *p = strstr(buf, "\"per_rank\"");
    snprintf(pat, sizeof pat, "{\"rank\": %d,", rank);
    if (!p || !(p = strstr(p, pat))) return NAN;
    const char *end = strchr(p, '}');
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *q = strstr(p, pat);
    if (!q || (end && q > end)) return NAN;
    return value_at(q + strlen(pat));
}

int tr_log_has(const char *dir, const char *text)
{
    char cmd[PATH_MAX + 256];
    snprintf(cmd, sizeof cmd, "grep -qF '%s' '%s.log'", text, dir);
    return system(cmd) == 0;
}

void tr_show_log(const char *dir)
{
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "tail -n 20 '%s.log' >&2", dir);
    if (system(cmd)) { /* nothing to show */
    }
}
