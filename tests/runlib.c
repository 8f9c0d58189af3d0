/* tests/runlib.c — see tests/runlib.h. */
#include "tests/runlib.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double tr_summary_num(const char *dir, const char *key)
{
    char path[PATH_MAX], pat[128], buf[65536];
    snprintf(path, sizeof path, "%s/summary.json", dir);
    FILE *f = fopen(path, "r");
    if (!f) return NAN;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(buf, pat);
    if (!p) return NAN;
    p += strlen(pat);
    if (!strncmp(p, "null", 4)) return NAN;
    return strtod(p, NULL);
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
