/* runtime/config_io.c — the configuration as text: INI files in and out, JSON out, --help.
 * See hearsay/options.h for the formats. */
#include "runtime/config_impl.h"
#include "hearsay/file.h"
#include "hearsay/json.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- INI in ------------------------------------------------------------------------------ */

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = '\0';
    return s;
}

/* Cut a trailing comment: '#' or ';' at the start or after whitespace. */
static void cut_comment(char *s)
{
    for (char *p = s; *p; p++)
        if ((*p == '#' || *p == ';') && (p == s || isspace((unsigned char)p[-1]))) {
            *p = '\0';
            return;
        }
}

/* Unquote "..." in place (escapes \" \\ \n \t). Returns 0, or -EINVAL when the quotes are not
 * closed or text other than a comment follows them. */
static int unquote(char *s)
{
    char *r = s + 1, *w = s;
    for (; *r && *r != '"'; r++) {
        if (*r == '\\' && r[1]) {
            r++;
            *w++ = *r == 'n' ? '\n' : *r == 't' ? '\t' : *r;
        } else {
            *w++ = *r;
        }
    }
    if (*r != '"') return -EINVAL;
    char *after = r + 1;
    *w = '\0';
    cut_comment(after);
    return *trim(after) ? -EINVAL : 0;
}

static int ini_line(hs_cfg_t *cfg, char *line, const char *name, int lineno, char *section,
                    size_t section_len)
{
    char *s = trim(line);
    if (!*s || *s == '#' || *s == ';') return 0;
    if (*s == '[') {
        char *close = strchr(s, ']');
        if (close) {
            *close = '\0';
            cut_comment(close + 1);
        }
        if (!close || *trim(close + 1))
            return HS_ERR(-EINVAL, "%s:%d: malformed section header '%s' (expected [name])", name,
                          lineno, s);
        char *sec = trim(s + 1);
        if (strlen(sec) >= section_len)
            return HS_ERR(-EINVAL, "%s:%d: section name too long", name, lineno);
        strcpy(section, sec);
        return 0;
    }
    char *eq = strchr(s, '=');
    if (!eq) {
        cut_comment(s);
        return HS_ERR(-EINVAL, "%s:%d: expected 'key = value', got '%s'", name, lineno, trim(s));
    }
    *eq = '\0';
    char *key = trim(s), *val = trim(eq + 1);
    if (!*key) return HS_ERR(-EINVAL, "%s:%d: missing key before '='", name, lineno);
    int quoted = *val == '"';
    if (quoted) {
        if (unquote(val) < 0)
            return HS_ERR(-EINVAL, "%s:%d: %s: unterminated quotes or text after them in %s", name,
                          lineno, key, val);
    } else {
        cut_comment(val);
        val = trim(val);
    }
    cfg_val_t *v = NULL;
    if (*section) {
        char full[512];
        snprintf(full, sizeof full, "%s.%s", section, key);
        v = hs_cfg__find(cfg, full);
    }
    if (!v) v = hs_cfg__find(cfg, key);
    if (!v) {
        const char *sug = hs_cfg__suggest(cfg, key, strlen(key));
        char in[300] = "";
        if (*section) snprintf(in, sizeof in, " in [%s]", section);
        if (sug)
            return HS_ERR(-EINVAL, "%s:%d: unknown key '%s'%s (did you mean '%s'?)", name, lineno,
                          key, in, sug);
        return HS_ERR(-EINVAL, "%s:%d: unknown key '%s'%s", name, lineno, key, in);
    }
    char where[600];
    snprintf(where, sizeof where, "%s:%d: %s", name, lineno, v->opt->name);
    return hs_cfg__set_value(v, val, quoted, HS_CFG_FILE, where);
}

int hs_cfg_load_string(hs_cfg_t *cfg, const char *text, const char *name)
{
    char section[256] = "";
    const char *p = text;
    int lineno = 0;
    if (!strncmp(p, "\xEF\xBB\xBF", 3)) p += 3; /* UTF-8 byte order mark */
    while (*p) {
        size_t l = strcspn(p, "\n");
        lineno++;
        char *line = hs_malloc(l + 1, "a config line");
        if (!line) return -ENOMEM;
        memcpy(line, p, l);
        line[l] = '\0';
        int rc = ini_line(cfg, line, name, lineno, section, sizeof section);
        free(line);
        if (rc < 0) return rc;
        p += l + (p[l] == '\n');
    }
    return 0;
}

int hs_cfg_load_file(hs_cfg_t *cfg, const char *path)
{
    /* A regular file of at most the bound: a FIFO (which would hang the open) and devices
     * such as /dev/zero are refused before anything is read. */
    FILE *f = NULL;
    HS_TRY(hs_file_fopen_read(&f, path, "config file", HS_CFG_FILE_MAX));
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = 0;
    /* Read up to one byte past the bound (the file may grow while read), checking each piece
     * for NUL bytes as it comes. */
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? 2 * cap : 8192;
            char *nb = realloc(buf, cap);
            if (!nb) {
                rc = HS_ERR(-ENOMEM, "out of memory reading '%s'", path);
                goto done;
            }
            buf = nb;
        }
        size_t want = HS_MIN(cap - len - 1, (size_t)HS_CFG_FILE_MAX + 1 - len);
        size_t got = fread(buf + len, 1, want, f);
        if (memchr(buf + len, '\0', got)) {
            rc = HS_ERR(-EINVAL, "%s: not a text file (contains NUL bytes)", path);
            goto done;
        }
        len += got;
        if (len > HS_CFG_FILE_MAX) {
            rc = HS_ERR(-EFBIG, "%s: more than the %d-byte bound for config files", path,
                        HS_CFG_FILE_MAX);
            goto done;
        }
        if (got == 0) break;
    }
    if (ferror(f)) {
        rc = HS_ERR(-EIO, "error reading config file '%s'", path);
        goto done;
    }
    buf[len] = '\0';
    rc = hs_cfg_load_string(cfg, buf, path);
done:
    free(buf);
    fclose(f);
    return rc;
}

/* ---- values as text ---------------------------------------------------------------------- */

/* Shortest "%g" that reads back as the same double. */
static void fmt_double(char *buf, size_t len, double v)
{
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) return;
    }
}

static int needs_quotes(const char *s)
{
    if (!*s || isspace((unsigned char)s[0]) || isspace((unsigned char)s[strlen(s) - 1])) return 1;
    return strpbrk(s, "#;\"\\\n\r\t") != NULL;
}

static void put_ini_string(FILE *f, const char *s)
{
    if (!needs_quotes(s)) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        if (*s == '\n')
            fputs("\\n", f);
        else if (*s == '\t')
            fputs("\\t", f);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

/* The value as plain text (not LIST, not an unset STRING). */
static const char *scalar_text(const cfg_val_t *v, char *buf, size_t len)
{
    switch (v->opt->type) {
    case HS_OPT_INT:
        snprintf(buf, len, "%ld", v->i);
        return buf;
    case HS_OPT_DOUBLE:
        fmt_double(buf, len, v->d);
        return buf;
    case HS_OPT_BOOL:
        return v->b ? "true" : "false";
    case HS_OPT_ENUM:
        return v->choices[v->e];
    default:
        return v->s ? v->s : "";
    }
}

/* Groups in order of first appearance (NULL first when some options have none). */
static size_t list_groups(const hs_cfg_t *cfg, const char **groups)
{
    size_t n = 0;
    for (size_t i = 0; i < cfg->n; i++) {
        const char *g = cfg->v[i].group;
        size_t j = 0;
        while (j < n && !(g == groups[j] || (g && groups[j] && !strcmp(g, groups[j])))) j++;
        if (j == n) groups[n++] = g;
    }
    return n;
}

static int same_group(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

static void section_name(const char *group, char *buf, size_t len)
{
    size_t w = 0;
    int dash = 0;
    for (const char *p = group; *p && w + 1 < len; p++) {
        if (isalnum((unsigned char)*p)) {
            if (dash && w) buf[w++] = '-';
            if (w + 1 < len) buf[w++] = (char)tolower((unsigned char)*p);
            dash = 0;
        } else {
            dash = 1;
        }
    }
    buf[w] = '\0';
}

int hs_cfg_write_ini(const hs_cfg_t *cfg, FILE *f)
{
    const char **groups = hs_calloc(cfg->n + 1, sizeof *groups, "groups");
    if (!groups) return -ENOMEM;
    size_t ng = list_groups(cfg, groups);
    fprintf(f, "# hearsay configuration (resolved: defaults < file < flags)\n");
    for (size_t g = 0; g < ng; g++) {
        if (groups[g]) {
            char sec[128];
            section_name(groups[g], sec, sizeof sec);
            fprintf(f, "\n[%s]\n", sec);
        }
        for (size_t i = 0; i < cfg->n; i++) {
            const cfg_val_t *v = &cfg->v[i];
            if (!same_group(v->group, groups[g])) continue;
            if (v->opt->help) fprintf(f, "# %s\n", v->opt->help);
            if (v->opt->type == HS_OPT_LIST) {
                if (!v->n_items) fprintf(f, "%s =\n", v->opt->name);
                for (size_t k = 0; k < v->n_items; k++) {
                    fprintf(f, "%s = ", v->opt->name);
                    put_ini_string(f, v->items[k]);
                    fputc('\n', f);
                }
            } else if (v->opt->type == HS_OPT_STRING && !v->s) {
                fprintf(f, "# %s = (unset)\n", v->opt->name);
            } else {
                char buf[64];
                fprintf(f, "%s = ", v->opt->name);
                put_ini_string(f, scalar_text(v, buf, sizeof buf));
                fputc('\n', f);
            }
        }
    }
    free(groups);
    return ferror(f) ? HS_ERR(-EIO, "error writing the configuration") : 0;
}

int hs_cfg_save_ini(const hs_cfg_t *cfg, const char *path)
{
    hs_wfile_t w;
    HS_TRY(hs_wfile_open(&w, path, 0));
    int rc = hs_cfg_write_ini(cfg, w.f);
    if (rc < 0) {
        hs_wfile_abort(&w);
        hs_error_prefix("%s", path);
        return rc;
    }
    return hs_wfile_commit(&w);
}

/* ---- JSON out ---------------------------------------------------------------------------- */

int hs_cfg_write_json(const hs_cfg_t *cfg, FILE *f, int indent)
{
    if (indent < 0) indent = 0;
    fputc('{', f);
    for (size_t i = 0; i < cfg->n; i++) {
        const cfg_val_t *v = &cfg->v[i];
        fprintf(f, "%s\n%*s", i ? "," : "", indent + 2, "");
        hs_json_string(f, v->opt->name);
        fputs(": ", f);
        char buf[64];
        switch (v->opt->type) {
        case HS_OPT_INT:
        case HS_OPT_DOUBLE:
        case HS_OPT_BOOL:
            fputs(scalar_text(v, buf, sizeof buf), f);
            break;
        case HS_OPT_ENUM:
            hs_json_string(f, scalar_text(v, buf, sizeof buf));
            break;
        case HS_OPT_STRING:
            if (v->s)
                hs_json_string(f, v->s);
            else
                fputs("null", f);
            break;
        case HS_OPT_LIST:
            fputc('[', f);
            for (size_t k = 0; k < v->n_items; k++) {
                if (k) fputs(", ", f);
                hs_json_string(f, v->items[k]);
            }
            fputc(']', f);
            break;
        }
    }
    fprintf(f, "%s%*s}", cfg->n ? "\n" : "", cfg->n ? indent : 0, "");
    return ferror(f) ? HS_ERR(-EIO, "error writing the configuration as JSON") : 0;
}

/* ---- --help ------------------------------------------------------------------------------ */

static const char *metavar(const cfg_val_t *v, char *buf, size_t len)
{
    if (v->opt->metavar) return v->opt->metavar;
    switch (v->opt->type) {
    case HS_OPT_INT:
        return "N";
    case HS_OPT_DOUBLE:
        return "X";
    case HS_OPT_ENUM:
        snprintf(buf, len, "{%s}", v->opt->choices);
        return buf;
    default:
        return "S";
    }
}

/* "  LEFT   text", the text in a column from HELP_COL wrapped at spaces to HELP_WIDTH. */
#define HELP_COL   30
#define HELP_WIDTH 100
#define NBSP       '\x1f' /* a space the wrapping keeps: "(default: 0.9)" stays whole */

static void help_line(FILE *f, const char *left, const char *text)
{
    int at = fprintf(f, "  %s", left);
    if (at + 1 > HELP_COL) {
        fputc('\n', f);
        at = 0;
    }
    fprintf(f, "%*s", HELP_COL - at, "");
    const int room = HELP_WIDTH - HELP_COL;
    if (!*text) fputc('\n', f);
    while (*text) {
        size_t l = strlen(text);
        if ((int)l > room) { /* break at the last space that fits, else the first after */
            l = (size_t)room;
            while (l > 0 && text[l] != ' ') l--;
            if (l == 0) l = strcspn(text, " ");
        }
        for (size_t i = 0; i < l; i++) fputc(text[i] == NBSP ? ' ' : text[i], f);
        fputc('\n', f);
        text += l;
        while (*text == ' ') text++;
        if (*text) fprintf(f, "%*s", HELP_COL, "");
    }
}

static void help_option(FILE *f, const cfg_val_t *v)
{
    const hs_option_t *o = v->opt;
    char left[256], mv[256], text[1024];
    int at = 0;
    if (o->short_name) at = snprintf(left, sizeof left, "-%c, ", o->short_name);
    if (o->type == HS_OPT_BOOL)
        snprintf(left + at, sizeof left - (size_t)at, "--[no-]%s", o->name);
    else
        snprintf(left + at, sizeof left - (size_t)at, "--%s %s", o->name,
                 metavar(v, mv, sizeof mv));
    char deflt[300] = "";
    if (o->type == HS_OPT_LIST) {
        snprintf(deflt, sizeof deflt, "repeatable%s%s", o->def ? "; default: " : "",
                 o->def ? o->def : "");
    } else if (o->def || o->type != HS_OPT_STRING) {
        char buf[64];
        const char *d = o->def;
        if (!d) d = o->type == HS_OPT_ENUM ? v->choices[0] : scalar_text(v, buf, sizeof buf);
        char range[80] = "";
        if (o->range) hs_cfg__range_text(v, range, sizeof range);
        if (o->def_help) d = o->def_help;
        snprintf(deflt, sizeof deflt, "default: %s%s%s", d, o->range ? "; range " : "", range);
    }
    for (char *p = deflt; *p; p++)
        if (*p == ' ') *p = NBSP;
    snprintf(text, sizeof text, "%s%s%s%s%s", o->help ? o->help : "", *deflt && o->help ? " " : "",
             *deflt ? "(" : "", deflt, *deflt ? ")" : "");
    help_line(f, left, text);
}

int hs_cfg_print_help(const hs_cfg_t *cfg, FILE *f)
{
    const hs_cfg_spec_t *s = cfg->spec;
    fprintf(f, "usage: %s\n", s->usage ? s->usage : "hearsay COMMAND [OPTIONS]");
    if (s->summary) fprintf(f, "\n%s\n", s->summary);
    const char **groups = hs_calloc(cfg->n + 1, sizeof *groups, "groups");
    if (!groups) return -ENOMEM;
    size_t ng = list_groups(cfg, groups);
    for (size_t g = 0; g < ng; g++) {
        fprintf(f, "\n%s:\n", groups[g] ? groups[g] : "Options");
        for (size_t i = 0; i < cfg->n; i++)
            if (same_group(cfg->v[i].group, groups[g])) help_option(f, &cfg->v[i]);
    }
    free(groups);
    fprintf(f, "\nGeneral:\n");
    help_line(f, "--config FILE", "read options from an INI file (flags override it)");
    help_line(f, "-h, --help", "print this help");
    return ferror(f) ? HS_ERR(-EIO, "error writing the help") : 0;
}
