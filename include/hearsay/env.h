/*
 * hearsay/env.h — the environment variables Hearsay reads, declared once.
 *
 * util/env.c holds one table with every HS_* (and HEARSAY_*) knob the library and the
 * `hearsay` command read: name, type, default, range and a one-line help. Code reads a knob
 * only through the functions below, which look the name up in the table; reading a name the
 * table lacks is a programming error (the process aborts with a message naming it).
 * `hearsay --help-env` prints the table.
 *
 * A variable that is unset or set to the empty string counts as unset. The environment is
 * read at every call (no caching), so tests may setenv between calls.
 */
#ifndef HEARSAY_ENV_H
#define HEARSAY_ENV_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hs_env_type {
    HS_ENV_STRING, /* text, read with hs_env_str */
    HS_ENV_INT,    /* decimal integer in [lo, hi], read with hs_env_long */
    HS_ENV_SIZE,   /* a byte count: decimal integer in [lo, hi], read with hs_env_long */
    HS_ENV_DOUBLE, /* finite number in [lo, hi], read with hs_env_double */
    HS_ENV_BOOL,   /* 1/0, true/false, yes/no, on/off; read with hs_env_bool or hs_env_flag */
} hs_env_type_t;

typedef struct hs_env_var {
    const char *name;
    hs_env_type_t type;
    /* The value used when unset, as text; NULL when the caller computes it (the help says
     * how). Numbers and booleans parse it like a value from the environment. */
    const char *def;
    double lo, hi; /* range of INT, SIZE and DOUBLE values (inclusive) */
    const char *help;
} hs_env_var_t;

/* The table, in a stable order; *count gets its length. */
const hs_env_var_t *hs_env_table(size_t *count);
/* The entry of `name`, or NULL when the table has none. */
const hs_env_var_t *hs_env_lookup(const char *name);
/* "string", "int", "size", "double" or "bool". */
const char *hs_env_type_name(hs_env_type_t type);

/* The text of `name` (any type) when set, else the table's default (NULL when none). */
const char *hs_env_str(const char *name);

/* Integer knob (INT or SIZE). Returns 1 with the value in *out when set, 0 when unset (*out
 * = the table's default when it has one, else untouched), or -EINVAL when the text is not
 * an integer in the table's range (message via HS_ERR naming the variable and the text). */
int hs_env_long(const char *name, long *out);
/* Number knob (DOUBLE); returns as hs_env_long. */
int hs_env_double(const char *name, double *out);
/* Boolean knob (BOOL): 1/0, true/false, yes/no, on/off (any case); returns as hs_env_long. */
int hs_env_bool(const char *name, int *out);
/* Boolean switch (BOOL) that never fails: 1 when set to anything but 0/false/no/off, else
 * the table's default. For debugging switches read where an error cannot be reported (the
 * error and logging code itself). */
int hs_env_flag(const char *name);

#ifdef __cplusplus
}
#endif
#endif
