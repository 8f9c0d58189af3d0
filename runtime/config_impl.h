/* runtime/config_impl.h — private to the configuration layer (config.c, config_io.c). */
#ifndef HEARSAY_RUNTIME_CONFIG_IMPL_H
#define HEARSAY_RUNTIME_CONFIG_IMPL_H

#include "hearsay/common.h"
#include "hearsay/options.h"

#include <stddef.h>

/* One option's current value. */
typedef struct cfg_val {
    const hs_option_t *opt;
    const char *group; /* resolved: inherited from the previous option when NULL */
    hs_cfg_source_t src;
    long i;       /* INT */
    double d;     /* DOUBLE */
    int b;        /* BOOL */
    int e;        /* ENUM: index into choices */
    char *s;      /* STRING (NULL = unset) */
    char **items; /* LIST: n_items strings, NULL-terminated */
    size_t n_items, cap;
    double lo, hi; /* INT/DOUBLE range */
    int lo_open, hi_open;
    char **choices; /* ENUM: pointers into choice_buf */
    int n_choices;
    char *choice_buf;
} cfg_val_t;

struct hs_cfg {
    const hs_cfg_spec_t *spec;
    cfg_val_t *v; /* one per option, in table order */
    size_t n;
    const char **pos; /* positional arguments (pointers into argv) */
    size_t n_pos;
    char **rest; /* after "--" (a slice of argv) */
    int n_rest;
    char *config_path;
};

/* Find an option by name (or its first len characters); '-' and '_' are equal. */
cfg_val_t *hs_cfg__find(const hs_cfg_t *cfg, const char *name);
cfg_val_t *hs_cfg__find_n(const hs_cfg_t *cfg, const char *name, size_t len);
/* The closest option name to name[0..len), or NULL when none is close. */
const char *hs_cfg__suggest(const hs_cfg_t *cfg, const char *name, size_t len);
/* The option's range as "[lo, hi)" with "inf" for a missing bound. */
void hs_cfg__range_text(const cfg_val_t *v, char *buf, size_t len);
/* Parse `text` into the option's value with source `src` (ignored when a higher source has
 * set it). `quoted`: the text was quoted (for a LIST, an empty unquoted value clears it).
 * `where` starts error messages ("--lr", "run.ini:3: lr"). */
int hs_cfg__set_value(cfg_val_t *v, const char *text, int quoted, hs_cfg_source_t src,
                      const char *where);

#endif
