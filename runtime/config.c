/* runtime/config.c — typed option registry: defaults, values from text, command-line flags
 * and getters. INI reading/writing, JSON and --help live in config_io.c. See hearsay/options.h. */
#include "runtime/config_impl.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- names ------------------------------------------------------------------------------- */

static int norm_char(int c)
{
    return c == '_' ? '-' : c;
}

/* a[0..alen) equals b ('-' and '_' equal). */
static int name_eq_n(const char *a, size_t alen, const char *b)
{
    size_t i = 0;
    for (; i < alen && b[i]; i++)
        if (norm_char((unsigned char)a[i]) != norm_char((unsigned char)b[i])) return 0;
    return i == alen && b[i] == '\0';
}

cfg_val_t *hs_cfg__find_n(const hs_cfg_t *cfg, const char *name, size_t len)
{
    for (size_t i = 0; i < cfg->n; i++)
        if (name_eq_n(name, len, cfg->v[i].opt->name)) return &cfg->v[i];
    return NULL;
}

cfg_val_t *hs_cfg__find(const hs_cfg_t *cfg, const char *name)
{
    return hs_cfg__find_n(cfg, name, strlen(name));
}

static size_t edit_distance(const char *a, size_t la, const char *b)
{
    size_t lb = strlen(b);
    if (la > 64 || lb > 64) return 99;
    size_t row[65];
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            int same = norm_char((unsigned char)a[i - 1]) == norm_char((unsigned char)b[j - 1]);
            size_t best = diag + (same ? 0 : 1);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const char *hs_cfg__suggest(const hs_cfg_t *cfg, const char *name, size_t len)
{
    const char *best = NULL;
    size_t best_d = len >= 4 ? 3 : 2; /* accept distance < best_d */
    for (size_t i = 0; i < cfg->n; i++) {
        const char *o = cfg->v[i].opt->name;
        size_t d = edit_distance(name, len, o);
        if (d < best_d) {
            best_d = d;
            best = o;
        }
    }
    if (best || len < 3) return best;
    /* A unique option that starts with what was typed ("--moment" -> "momentum"). */
    for (size_t i = 0; i < cfg->n; i++) {
        const char *o = cfg->v[i].opt->name;
        if (strlen(o) <= len) continue;
        int pre = 1;
        for (size_t j = 0; j < len && pre; j++)
            pre = norm_char((unsigned char)name[j]) == norm_char((unsigned char)o[j]);
        if (pre) {
            if (best) return NULL; /* ambiguous */
            best = o;
        }
    }
    return best;
}

/* ---- ranges and choices ------------------------------------------------------------------ */

static const char *skip_ws(const char *p)
{
    while (isspace((unsigned char)*p)) p++;
    return p;
}

/* Parse one bound up to `stop`: a number, "inf", "-inf", "+inf" or nothing. */
static int parse_bound(const char *p, const char **endp, char stop, double inf, double *out)
{
    p = skip_ws(p);
    const char *e = strchr(p, stop);
    if (!e) return -EINVAL;
    const char *t = e;
    while (t > p && isspace((unsigned char)t[-1])) t--;
    size_t l = (size_t)(t - p);
    char buf[64];
    if (l >= sizeof buf) return -EINVAL;
    memcpy(buf, p, l);
    buf[l] = '\0';
    *endp = e;
    if (l == 0 || !strcmp(buf, "inf") || !strcmp(buf, "+inf") || !strcmp(buf, "-inf")) {
        if (l > 0 && ((buf[0] == '-') != (inf < 0))) return -EINVAL;
        *out = inf;
        return 0;
    }
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (errno || *end || !isfinite(v)) return -EINVAL;
    *out = v;
    return 0;
}

static int parse_range(cfg_val_t *v)
{
    const hs_option_t *o = v->opt;
    v->lo = -INFINITY;
    v->hi = INFINITY;
    if (!o->range) return 0;
    const char *p = skip_ws(o->range), *e;
    if (*p != '[' && *p != '(') goto bad;
    v->lo_open = *p == '(';
    if (parse_bound(p + 1, &e, ',', -INFINITY, &v->lo) < 0) goto bad;
    const char *c = e + 1, *close = c + strcspn(c, "])");
    if (!*close) goto bad;
    v->hi_open = *close == ')';
    char stop = *close;
    if (parse_bound(c, &e, stop, INFINITY, &v->hi) < 0 || *skip_ws(e + 1) != '\0') goto bad;
    if (!(v->lo <= v->hi)) goto bad;
    return 0;
bad:
    return HS_ERR(-EINVAL, "option table: '%s' has a bad range \"%s\" (expected e.g. \"[0, 1)\")",
                  o->name, o->range);
}

void hs_cfg__range_text(const cfg_val_t *v, char *buf, size_t len)
{
    char lo[32] = "-inf", hi[32] = "inf";
    if (isfinite(v->lo)) snprintf(lo, sizeof lo, "%.15g", v->lo);
    if (isfinite(v->hi)) snprintf(hi, sizeof hi, "%.15g", v->hi);
    snprintf(buf, len, "%c%s, %s%c", v->lo_open ? '(' : '[', lo, hi, v->hi_open ? ')' : ']');
}

static int in_range(const cfg_val_t *v, double x)
{
    if (v->lo_open ? !(x > v->lo) : !(x >= v->lo)) return 0;
    if (v->hi_open ? !(x < v->hi) : !(x <= v->hi)) return 0;
    return 1;
}

static int parse_choices(cfg_val_t *v)
{
    const hs_option_t *o = v->opt;
    if (!o->choices || !*o->choices)
        return HS_ERR(-EINVAL, "option table: enum '%s' has no choices", o->name);
    v->choice_buf = strdup(o->choices);
    if (!v->choice_buf) return HS_ERR(-ENOMEM, "out of memory for the choices of '%s'", o->name);
    int n = 1;
    for (const char *p = o->choices; *p; p++) n += *p == '|';
    v->choices = hs_calloc((size_t)n, sizeof *v->choices, "enum choices");
    if (!v->choices) return -ENOMEM;
    char *save = NULL;
    for (char *t = strtok_r(v->choice_buf, "|", &save); t; t = strtok_r(NULL, "|", &save))
        v->choices[v->n_choices++] = t;
    if (v->n_choices != n)
        return HS_ERR(-EINVAL, "option table: enum '%s' has an empty choice in \"%s\"", o->name,
                      o->choices);
    return 0;
}

/* ---- values ------------------------------------------------------------------------------ */

static const char *type_name(const cfg_val_t *v)
{
    switch (v->opt->type) {
    case HS_OPT_INT:
        return "an integer";
    case HS_OPT_DOUBLE:
        return "a number";
    case HS_OPT_BOOL:
        return "a boolean (true/false, yes/no, on/off, 1/0)";
    default:
        return "text";
    }
}

static int parse_bool(const char *s, int *out)
{
    static const char *yes[] = {"true", "yes", "on", "1"}, *no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < HS_ARRAY_LEN(yes); i++) {
        if (!strcasecmp(s, yes[i])) return *out = 1, 0;
        if (!strcasecmp(s, no[i])) return *out = 0, 0;
    }
    return -EINVAL;
}

static void list_clear(cfg_val_t *v)
{
    for (size_t i = 0; i < v->n_items; i++) free(v->items[i]);
    v->n_items = 0;
}

static int list_push(cfg_val_t *v, const char *s)
{
    if (v->n_items + 1 >= v->cap) { /* keep room for a NULL terminator */
        size_t cap = v->cap ? 2 * v->cap : 8;
        char **p = realloc(v->items, cap * sizeof *p);
        if (!p) return HS_ERR(-ENOMEM, "out of memory for the list '%s'", v->opt->name);
        v->items = p;
        v->cap = cap;
    }
    if (!(v->items[v->n_items] = strdup(s)))
        return HS_ERR(-ENOMEM, "out of memory for the list '%s'", v->opt->name);
    v->items[++v->n_items] = NULL;
    return 0;
}

int hs_cfg__set_value(cfg_val_t *v, const char *text, int quoted, hs_cfg_source_t src,
                      const char *where)
{
    if (src < v->src) return 0; /* a lower source never overrides a higher one */
    const hs_option_t *o = v->opt;
    char range[80] = "";
    if (o->range) hs_cfg__range_text(v, range, sizeof range);
    switch (o->type) {
    case HS_OPT_INT: {
        char *end;
        errno = 0;
        long x = strtol(text, &end, 10);
        if (!*text || errno == ERANGE || *end)
            return HS_ERR(-EINVAL, "%s: '%s' is not %s%s%s", where, text, type_name(v),
                          o->range ? " in " : "", range);
        if (!in_range(v, (double)x))
            return HS_ERR(-EINVAL, "%s: %s is out of range %s", where, text, range);
        v->i = x;
        break;
    }
    case HS_OPT_DOUBLE: {
        char *end;
        errno = 0;
        double x = strtod(text, &end);
        if (!*text || errno == ERANGE || *end || !isfinite(x))
            return HS_ERR(-EINVAL, "%s: '%s' is not %s%s%s", where, text, type_name(v),
                          o->range ? " in " : "", range);
        if (!in_range(v, x))
            return HS_ERR(-EINVAL, "%s: %s is out of range %s", where, text, range);
        v->d = x;
        break;
    }
    case HS_OPT_BOOL:
        if (parse_bool(text, &v->b) < 0)
            return HS_ERR(-EINVAL, "%s: '%s' is not %s", where, text, type_name(v));
        break;
    case HS_OPT_ENUM: {
        int k = -1;
        for (int i = 0; i < v->n_choices && k < 0; i++)
            if (!strcmp(text, v->choices[i])) k = i;
        if (k < 0) return HS_ERR(-EINVAL, "%s: '%s' is not one of %s", where, text, o->choices);
        v->e = k;
        break;
    }
    case HS_OPT_STRING: {
        char *s = strdup(text);
        if (!s) return HS_ERR(-ENOMEM, "out of memory for '%s'", o->name);
        free(v->s);
        v->s = s;
        break;
    }
    case HS_OPT_LIST:
        if (src > v->src) list_clear(v);
        if (*text || quoted)
            HS_TRY(list_push(v, text));
        else
            list_clear(v);
        break;
    default:
        return HS_ERR(-EINVAL, "%s: option has an unknown type %d", where, (int)o->type);
    }
    v->src = src;
    return 0;
}

static int is_name_char(int c)
{
    return isalnum(c) || c == '-' || c == '_' || c == '.';
}

static int apply_default(cfg_val_t *v)
{
    const hs_option_t *o = v->opt;
    char where[160];
    snprintf(where, sizeof where, "option table: default of '%s'", o->name);
    if (!o->def) {
        if (o->type == HS_OPT_INT || o->type == HS_OPT_DOUBLE)
            return hs_cfg__set_value(v, "0", 0, HS_CFG_DEFAULT, where);
        if (o->type == HS_OPT_BOOL) return hs_cfg__set_value(v, "false", 0, HS_CFG_DEFAULT, where);
        return 0; /* enum: first choice; string: unset; list: empty */
    }
    if (o->type != HS_OPT_LIST) return hs_cfg__set_value(v, o->def, 1, HS_CFG_DEFAULT, where);
    const char *p = o->def;
    while (*p) {
        size_t l = strcspn(p, ",");
        char item[512];
        snprintf(item, sizeof item, "%.*s", (int)l, p);
        HS_TRY(list_push(v, item));
        p += l + (p[l] == ',');
    }
    return 0;
}

static int check_option(const hs_cfg_t *cfg, size_t idx)
{
    const hs_option_t *o = &cfg->spec->options[idx];
    if (!o->name || !*o->name) return HS_ERR(-EINVAL, "option table: entry %zu has no name", idx);
    for (const char *p = o->name; *p; p++)
        if (!is_name_char((unsigned char)*p))
            return HS_ERR(-EINVAL, "option table: bad character '%c' in name '%s'", *p, o->name);
    if (o->name[0] == '-')
        return HS_ERR(-EINVAL, "option table: name '%s' starts with '-'", o->name);
    if (name_eq_n("config", 6, o->name) || name_eq_n("help", 4, o->name))
        return HS_ERR(-EINVAL, "option table: '%s' is a reserved name", o->name);
    if (o->type < HS_OPT_INT || o->type > HS_OPT_LIST)
        return HS_ERR(-EINVAL, "option table: '%s' has an unknown type %d", o->name, (int)o->type);
    if (o->short_name && (!isalpha((unsigned char)o->short_name) || o->short_name == 'h'))
        return HS_ERR(-EINVAL, "option table: '%s' has a bad short name '%c'", o->name,
                      o->short_name);
    for (size_t j = 0; j < idx; j++) {
        const hs_option_t *p = &cfg->spec->options[j];
        if (name_eq_n(o->name, strlen(o->name), p->name))
            return HS_ERR(-EINVAL, "option table: '%s' is declared twice", o->name);
        if (o->short_name && o->short_name == p->short_name)
            return HS_ERR(-EINVAL, "option table: '-%c' is used by '%s' and '%s'", o->short_name,
                          p->name, o->name);
    }
    return 0;
}

int hs_cfg_create(hs_cfg_t **out, const hs_cfg_spec_t *spec)
{
    *out = NULL;
    if (!spec || (spec->n_options && !spec->options))
        return HS_ERR(-EINVAL, "option table: missing");
    hs_cfg_t *cfg = hs_calloc(1, sizeof *cfg, "configuration");
    if (!cfg) return -ENOMEM;
    cfg->spec = spec;
    cfg->v = hs_calloc(spec->n_options ? spec->n_options : 1, sizeof *cfg->v, "option values");
    int rc = cfg->v ? 0 : -ENOMEM;
    const char *group = NULL;
    for (size_t i = 0; rc == 0 && i < spec->n_options; i++) {
        cfg_val_t *v = &cfg->v[i];
        v->opt = &spec->options[i];
        cfg->n = i + 1;
        if (v->opt->group) group = v->opt->group;
        v->group = group;
        rc = check_option(cfg, i);
        if (rc == 0 && (v->opt->type == HS_OPT_INT || v->opt->type == HS_OPT_DOUBLE))
            rc = parse_range(v);
        if (rc == 0 && v->opt->type == HS_OPT_ENUM) rc = parse_choices(v);
        if (rc == 0) rc = apply_default(v);
    }
    if (rc < 0) {
        hs_cfg_free(&cfg);
        return rc;
    }
    *out = cfg;
    return 0;
}

void hs_cfg_free(hs_cfg_t **pcfg)
{
    if (!pcfg || !*pcfg) return;
    hs_cfg_t *cfg = *pcfg;
    for (size_t i = 0; i < cfg->n; i++) {
        cfg_val_t *v = &cfg->v[i];
        free(v->s);
        list_clear(v);
        free(v->items);
        free(v->choices);
        free(v->choice_buf);
    }
    free(cfg->v);
    free(cfg->pos);
    free(cfg->config_path);
    free(cfg);
    *pcfg = NULL;
}

int hs_cfg_set(hs_cfg_t *cfg, const char *name, const char *value)
{
    cfg_val_t *v = hs_cfg__find(cfg, name);
    if (!v) return HS_ERR(-EINVAL, "unknown option '%s'", name);
    char where[160];
    snprintf(where, sizeof where, "--%s", v->opt->name);
    return hs_cfg__set_value(v, value ? value : "", 1, HS_CFG_FLAG, where);
}

/* ---- command line ------------------------------------------------------------------------ */

static int unknown_flag(const hs_cfg_t *cfg, const char *arg, const char *name, size_t len)
{
    const char *s = hs_cfg__suggest(cfg, name, len);
    if (s) return HS_ERR(-EINVAL, "unknown option '%s' (did you mean '--%s'?)", arg, s);
    return HS_ERR(-EINVAL, "unknown option '%s' (see --help)", arg);
}

/* One flag at argv[*i]: resolves it to an option and its value text. On return *i points at
 * the last argument consumed. Sets *v = NULL for --config (value in *value). */
static int read_flag(const hs_cfg_t *cfg, int argc, char **argv, int *i, cfg_val_t **v,
                     const char **value, int *negated)
{
    const char *arg = argv[*i];
    const char *eq = NULL, *name;
    size_t len;
    *v = NULL;
    *value = NULL;
    *negated = 0;
    if (arg[1] != '-') { /* short: -n 4, -n4 */
        for (size_t k = 0; k < cfg->n && !*v; k++)
            if (cfg->v[k].opt->short_name == arg[1]) *v = &cfg->v[k];
        if (!*v) return unknown_flag(cfg, arg, arg + 1, strlen(arg + 1));
        if ((*v)->opt->type == HS_OPT_BOOL) {
            if (arg[2]) return HS_ERR(-EINVAL, "%s: a boolean flag takes no value", arg);
            *value = "true";
            return 0;
        }
        if (arg[2]) eq = arg + 1; /* value follows the letter */
        name = arg + 1;
        len = 1;
    } else {
        name = arg + 2;
        eq = strchr(name, '=');
        len = eq ? (size_t)(eq - name) : strlen(name);
        if (name_eq_n(name, len, "config")) {
            if (eq)
                *value = eq + 1;
            else if (*i + 1 < argc)
                *value = argv[++*i];
            else
                return HS_ERR(-EINVAL, "--config: missing file name");
            return 0;
        }
        *v = hs_cfg__find_n(cfg, name, len);
        if (!*v && len > 3 && !strncmp(name, "no-", 3)) {
            cfg_val_t *b = hs_cfg__find_n(cfg, name + 3, len - 3);
            if (b && b->opt->type == HS_OPT_BOOL) {
                if (eq) return HS_ERR(-EINVAL, "--%.*s takes no value", (int)len, name);
                *v = b;
                *negated = 1;
                *value = "false";
                return 0;
            }
        }
        if (!*v) return unknown_flag(cfg, arg, name, len);
        if ((*v)->opt->type == HS_OPT_BOOL && !eq) {
            *value = "true";
            return 0;
        }
    }
    if (eq)
        *value = eq + 1;
    else if (*i + 1 < argc)
        *value = argv[++*i];
    else
        return HS_ERR(-EINVAL, "--%s: missing value", (*v)->opt->name);
    return 0;
}

int hs_cfg_parse_args(hs_cfg_t *cfg, int argc, char **argv)
{
    const char *config = NULL;
    int end = argc; /* index of "--" */
    /* Pass 1: help, --config and the extent of the options; nothing is applied yet. */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            end = i;
            break;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return HS_CFG_HELP;
        if (a[0] != '-' || !a[1]) continue;
        cfg_val_t *v;
        const char *value;
        int neg;
        if (read_flag(cfg, argc, argv, &i, &v, &value, &neg) < 0) continue; /* pass 2 reports */
        if (!v) {
            if (config) return HS_ERR(-EINVAL, "--config: given twice ('%s', '%s')", config, value);
            config = value;
        }
    }
    hs_error_clear();
    if (config) {
        HS_TRY(hs_cfg_load_file(cfg, config));
        if (!(cfg->config_path = strdup(config)))
            return HS_ERR(-ENOMEM, "out of memory for the config path");
    }
    /* Pass 2: apply flags, collect positional arguments. */
    free(cfg->pos);
    cfg->pos = hs_calloc((size_t)argc + 1, sizeof *cfg->pos, "positional arguments");
    if (!cfg->pos) return -ENOMEM;
    cfg->n_pos = 0;
    for (int i = 1; i < end; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || !a[1]) {
            if (cfg->spec->max_positional >= 0 && cfg->n_pos >= (size_t)cfg->spec->max_positional)
                return HS_ERR(-EINVAL, "unexpected argument '%s'%s", a,
                              cfg->spec->max_positional ? " (too many positional arguments)" : "");
            cfg->pos[cfg->n_pos++] = a;
            continue;
        }
        cfg_val_t *v;
        const char *value;
        int neg;
        HS_TRY(read_flag(cfg, argc, argv, &i, &v, &value, &neg));
        if (!v) continue; /* --config, done */
        char where[160];
        snprintf(where, sizeof where, "--%s%s", neg ? "no-" : "", v->opt->name);
        HS_TRY(hs_cfg__set_value(v, value, 1, HS_CFG_FLAG, where));
    }
    cfg->rest = NULL;
    cfg->n_rest = 0;
    if (end < argc) {
        if (!cfg->spec->allow_rest && end + 1 < argc)
            return HS_ERR(-EINVAL, "unexpected arguments after '--' ('%s' ...)", argv[end + 1]);
        cfg->rest = argv + end + 1;
        cfg->n_rest = argc - end - 1;
    }
    return 0;
}

/* ---- getters ----------------------------------------------------------------------------- */

static const cfg_val_t *get(const hs_cfg_t *cfg, const char *name, hs_opt_type_t t1,
                            hs_opt_type_t t2)
{
    const cfg_val_t *v = hs_cfg__find(cfg, name);
    if (!v) {
        hs_log(HS_LOG_ERROR, "config: no option named '%s' (programming error)", name);
        return NULL;
    }
    if (v->opt->type != t1 && v->opt->type != t2) {
        hs_log(HS_LOG_ERROR, "config: option '%s' read with the wrong type (programming error)",
               name);
        return NULL;
    }
    return v;
}

long hs_cfg_int(const hs_cfg_t *cfg, const char *name)
{
    const cfg_val_t *v = get(cfg, name, HS_OPT_INT, HS_OPT_INT);
    return v ? v->i : 0;
}

double hs_cfg_double(const hs_cfg_t *cfg, const char *name)
{
    const cfg_val_t *v = get(cfg, name, HS_OPT_DOUBLE, HS_OPT_INT);
    if (!v) return 0.0;
    return v->opt->type == HS_OPT_INT ? (double)v->i : v->d;
}

int hs_cfg_bool(const hs_cfg_t *cfg, const char *name)
{
    const cfg_val_t *v = get(cfg, name, HS_OPT_BOOL, HS_OPT_BOOL);
    return v ? v->b : 0;
}

const char *hs_cfg_str(const hs_cfg_t *cfg, const char *name)
{
    const cfg_val_t *v = get(cfg, name, HS_OPT_STRING, HS_OPT_ENUM);
    if (!v) return NULL;
    return v->opt->type == HS_OPT_ENUM ? v->choices[v->e] : v->s;
}

int hs_cfg_enum(const hs_cfg_t *cfg, const char *name)
{
    const cfg_val_t *v = get(cfg, name, HS_OPT_ENUM, HS_OPT_ENUM);
    return v ? v->e : 0;
}

const char *const *hs_cfg_list(const hs_cfg_t *cfg, const char *name, size_t *n)
{
    static const char *const empty[] = {NULL};
    const cfg_val_t *v = get(cfg, name, HS_OPT_LIST, HS_OPT_LIST);
    if (n) *n = v ? v->n_items : 0;
    return v && v->items ? (const char *const *)v->items : empty;
}

hs_cfg_source_t hs_cfg_source(const hs_cfg_t *cfg, const char *name)
{
    const cfg_val_t *v = hs_cfg__find(cfg, name);
    return v ? v->src : HS_CFG_DEFAULT;
}

const char *hs_cfg_config_path(const hs_cfg_t *cfg)
{
    return cfg->config_path;
}

const char *const *hs_cfg_positional(const hs_cfg_t *cfg, size_t *n)
{
    static const char *const empty[] = {NULL};
    if (n) *n = cfg->n_pos;
    return cfg->pos ? (const char *const *)cfg->pos : empty;
}

char **hs_cfg_rest(const hs_cfg_t *cfg, int *argc)
{
    if (argc) *argc = cfg->n_rest;
    return cfg->n_rest ? cfg->rest : NULL;
}
