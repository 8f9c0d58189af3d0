/* tools/algo_options.c — the algorithms' own options in `hearsay train` / `hearsay sim`: the
 * generic option table plus the union of every registered algorithm's table
 * (hs_algo_ops_t.options), so --help, --config, validation, config.ini and summary.json's
 * "config" cover them with no per-option code here. */
#include "hearsay/algo.h"
#include "hearsay/common.h"
#include "hearsay/compress.h"
#include "tools/commands.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int same_text(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

/* The declaration of `name` in ops's table, or NULL. */
static const hs_option_t *declared(const hs_algo_ops_t *ops, const char *name)
{
    for (size_t i = 0; ops->options && i < ops->n_options; i++)
        if (!strcmp(ops->options[i].name, name)) return &ops->options[i];
    return NULL;
}

/* Append text to a growing string (*s, *len); -ENOMEM. */
static int append(char **s, size_t *len, const char *text)
{
    size_t n = strlen(text);
    char *p = realloc(*s, *len + n + 1);
    if (!p) return HS_ERR(-ENOMEM, "option help");
    memcpy(p + *len, text, n + 1);
    *s = p;
    *len += n;
    return 0;
}

/* The union entry of `name` (first declared by algorithm `first`): the first declaration's
 * type, range, choices and metavar; the default most declarations share (ties: the earliest),
 * recorded for the runs of the algorithms that do not take it; the help "a, b: help; c: help"
 * with every algorithm that takes it. */
static int union_entry(const char *name, int first, hs_option_t *out, char **help, char **def_help)
{
    const hs_option_t *d0 = declared(hs_algo_at(first), name);
    *out = *d0;
    out->group = NULL;
    int best = 0;
    for (int i = first; hs_algo_at(i); i++) {
        const hs_option_t *di = declared(hs_algo_at(i), name);
        if (!di) continue;
        int votes = 0;
        for (int j = first; hs_algo_at(j); j++) {
            const hs_option_t *dj = declared(hs_algo_at(j), name);
            votes += dj && same_text(dj->def, di->def);
        }
        if (votes > best) {
            best = votes;
            out->def = di->def;
        }
    }
    /* Defaults that differ: --help names each algorithm's ("osgp 2, easgd 1, ..."). */
    size_t len = 0;
    *def_help = NULL;
    for (int i = first; hs_algo_at(i); i++) {
        const hs_option_t *di = declared(hs_algo_at(i), name);
        if (di && !same_text(di->def, out->def)) len = 1;
    }
    if (len) {
        len = 0;
        for (int i = first; hs_algo_at(i); i++) {
            const hs_option_t *di = declared(hs_algo_at(i), name);
            if (!di) continue;
            HS_TRY(append(def_help, &len, len ? ", " : ""));
            HS_TRY(append(def_help, &len, hs_algo_at(i)->name));
            HS_TRY(append(def_help, &len, " "));
            HS_TRY(append(def_help, &len, di->def ? di->def : "unset"));
        }
        out->def_help = *def_help;
    }
    len = 0;
    *help = NULL;
    for (int i = first; hs_algo_at(i); i++) { /* each distinct help once, with its algorithms */
        const hs_option_t *di = declared(hs_algo_at(i), name);
        int seen = 0;
        for (int j = first; j < i && di; j++) {
            const hs_option_t *dj = declared(hs_algo_at(j), name);
            seen |= dj && same_text(dj->help, di->help);
        }
        if (!di || seen) continue;
        int n_alg = 0;
        HS_TRY(append(help, &len, len ? "; " : ""));
        for (int j = i; hs_algo_at(j); j++) {
            const hs_option_t *dj = declared(hs_algo_at(j), name);
            if (!dj || !same_text(dj->help, di->help)) continue;
            HS_TRY(append(help, &len, n_alg++ ? ", " : ""));
            HS_TRY(append(help, &len, hs_algo_at(j)->name));
        }
        HS_TRY(append(help, &len, ": "));
        HS_TRY(append(help, &len, di->help ? di->help : ""));
    }
    out->help = *help;
    return 0;
}

void tool_algo_table_free(tool_algo_table_t *t)
{
    for (size_t i = 0; i < t->n_helps; i++) free(t->helps[i]);
    free(t->helps);
    free(t->options);
    memset(t, 0, sizeof *t);
}

int tool_algo_table_build(tool_algo_table_t *t, const hs_option_t *generic, size_t n_generic,
                          const char *after)
{
    memset(t, 0, sizeof *t);
    size_t cap = n_generic;
    for (int i = 0; hs_algo_at(i); i++) cap += hs_algo_at(i)->n_options;
    t->options = calloc(cap, sizeof *t->options);
    t->helps = calloc(2 * cap + 1, sizeof *t->helps); /* a help and a default's per entry */
    if (!t->options || !t->helps) {
        tool_algo_table_free(t);
        return HS_ERR(-ENOMEM, "option table");
    }
    size_t pos = 0;
    for (size_t g = 0; g < n_generic; g++) {
        t->options[t->n++] = generic[g];
        if (strcmp(generic[g].name, after)) continue;
        pos = t->n;
        for (int i = 0; hs_algo_at(i); i++) {
            const hs_algo_ops_t *ops = hs_algo_at(i);
            for (size_t k = 0; ops->options && k < ops->n_options; k++) {
                const char *name = ops->options[k].name;
                int dup = 0;
                for (size_t j = pos; j < t->n; j++) dup |= !strcmp(t->options[j].name, name);
                for (size_t j = 0; j < n_generic; j++)
                    if (!strcmp(generic[j].name, name)) {
                        tool_algo_table_free(t);
                        return HS_ERR(-EINVAL,
                                      "--algo %s declares --%s, which is a generic option of "
                                      "this command",
                                      ops->name, name);
                    }
                if (dup) continue;
                hs_option_t *e = &t->options[t->n];
                char *help = NULL, *def_help = NULL;
                int rc = union_entry(name, i, e, &help, &def_help);
                if (help) t->helps[t->n_helps++] = help; /* (owned by the table) */
                if (def_help) t->helps[t->n_helps++] = def_help;
                if (rc < 0) {
                    tool_algo_table_free(t);
                    return rc;
                }
                if (t->n == pos) e->group = "Algorithm options";
                t->n++;
            }
        }
    }
    return 0;
}

/* The value of `name` as text that hs_cfg_set reads back to the same value. */
static const char *value_text(const hs_cfg_t *cfg, const hs_option_t *o, char *buf, size_t len)
{
    switch (o->type) {
    case HS_OPT_INT:
        snprintf(buf, len, "%ld", hs_cfg_int(cfg, o->name));
        return buf;
    case HS_OPT_DOUBLE:
        snprintf(buf, len, "%.17g", hs_cfg_double(cfg, o->name));
        return buf;
    case HS_OPT_BOOL:
        return hs_cfg_bool(cfg, o->name) ? "true" : "false";
    default: {
        const char *v = hs_cfg_str(cfg, o->name);
        return v ? v : "";
    }
    }
}

/* 1 when the option's value differs from its default in dflt (same table, defaults only). */
static int differs(const hs_cfg_t *cfg, const hs_cfg_t *dflt, const hs_option_t *o)
{
    switch (o->type) {
    case HS_OPT_INT:
        return hs_cfg_int(cfg, o->name) != hs_cfg_int(dflt, o->name);
    case HS_OPT_DOUBLE:
        return hs_cfg_double(cfg, o->name) != hs_cfg_double(dflt, o->name);
    case HS_OPT_BOOL:
        return hs_cfg_bool(cfg, o->name) != hs_cfg_bool(dflt, o->name);
    case HS_OPT_LIST:
        return 1;
    default:
        return !same_text(hs_cfg_str(cfg, o->name), hs_cfg_str(dflt, o->name));
    }
}

int tool_algo_options(const tool_algo_table_t *t, const hs_cfg_spec_t *spec, hs_cfg_t *cfg,
                      const hs_algo_ops_t *ops, char ***kv, size_t *n_kv)
{
    *kv = NULL;
    *n_kv = 0;
    hs_cfg_t *dflt = NULL;
    HS_TRY(hs_cfg_create(&dflt, spec));
    int rc = 0;
    char **list = calloc(t->n + 1, sizeof *list);
    if (!list) rc = HS_ERR(-ENOMEM, "algorithm options");
    for (size_t i = 0; rc == 0 && i < t->n; i++) {
        const hs_option_t *o = &t->options[i];
        int algo_opt = 0; /* declared by some algorithm */
        for (int a = 0; hs_algo_at(a) && !algo_opt; a++)
            algo_opt = declared(hs_algo_at(a), o->name) != NULL;
        if (!algo_opt || hs_cfg_source(cfg, o->name) == HS_CFG_DEFAULT) continue;
        if (!declared(ops, o->name)) {
            /* given for an algorithm without it: an error unless it is the default value (a
             * config.ini of another run names every option) */
            if (!differs(cfg, dflt, o)) continue;
            /* (--compress: the reason this algorithm cannot use a compressor, and which one
             * can: hearsay/compress.h) */
            if (!strcmp(o->name, "compress") &&
                (rc = hs_compress_check_algo(hs_cfg_str(cfg, o->name), ops->name, 0)) < 0)
                break;
            char names[512];
            size_t len = 0;
            names[0] = '\0';
            for (int a = 0; hs_algo_at(a) && len < sizeof names; a++)
                if (declared(hs_algo_at(a), o->name))
                    len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", len ? " " : "",
                                            hs_algo_at(a)->name);
            rc = HS_ERR(-EINVAL, "--%s applies to --algo %s (--algo %s has no --%s)", o->name,
                        names, ops->name, o->name);
            break;
        }
        char num[64];
        const char *v = value_text(cfg, o, num, sizeof num);
        size_t need = strlen(o->name) + strlen(v) + 2;
        if (!(list[*n_kv] = malloc(need))) {
            rc = HS_ERR(-ENOMEM, "algorithm options");
            break;
        }
        snprintf(list[(*n_kv)++], need, "%s=%s", o->name, v);
    }
    hs_cfg_free(&dflt);
    if (rc < 0) {
        tool_algo_options_free(&list, *n_kv);
        *n_kv = 0;
        return rc;
    }
    *kv = list;
    return 0;
}

void tool_algo_options_free(char ***kv, size_t n)
{
    if (!kv || !*kv) return;
    for (size_t i = 0; i < n; i++) free((*kv)[i]);
    free(*kv);
    *kv = NULL;
}

void tool_algo_record_defaults(hs_cfg_t *cfg, const hs_algo_ops_t *ops)
{
    for (size_t i = 0; ops->options && i < ops->n_options; i++) {
        const hs_option_t *o = &ops->options[i];
        if (o->def && hs_cfg_source(cfg, o->name) == HS_CFG_DEFAULT &&
            hs_cfg_set(cfg, o->name, o->def) < 0)
            hs_error_clear();
    }
}
