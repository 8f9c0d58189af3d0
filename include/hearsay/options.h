/*
 * hearsay/options.h — typed options for the `hearsay` commands: defaults, an INI file
 * (--config FILE) and command-line flags, in that order of precedence.
 *
 * A command declares its options once, as a static table:
 *
 *     static const hs_option_t opts[] = {
 *         {.name = "epochs", .type = HS_OPT_INT, .def = "90", .range = "[1, 100000]",
 *          .group = "Training", .help = "number of epochs"},
 *         {.name = "lr", .type = HS_OPT_DOUBLE, .def = "0.1", .range = "(0, inf)",
 *          .help = "base learning rate"},            // group: same as the option above
 *         {.name = "nesterov", .type = HS_OPT_BOOL, .def = "true", .help = "Nesterov momentum"},
 *         {.name = "device", .type = HS_OPT_ENUM, .def = "cpu", .choices = "cpu|cuda"},
 *         {.name = "straggler", .type = HS_OPT_LIST, .metavar = "RANK:FACTOR",
 *          .help = "slow a rank down (repeatable)"},
 *         {.name = "workers", .short_name = 'n', .type = HS_OPT_INT, .def = "1"},
 *     };
 *     static const hs_cfg_spec_t spec = {.usage = "hearsay train [OPTIONS]",
 *         .options = opts, .n_options = HS_ARRAY_LEN(opts)};
 *
 *     hs_cfg_t *cfg;
 *     if (hs_cfg_create(&cfg, &spec) < 0) ...            // checks the table itself
 *     int rc = hs_cfg_parse_args(cfg, argc, argv);       // argv[0] is the command name
 *     if (rc == HS_CFG_HELP) { hs_cfg_print_help(cfg, stdout); ... exit 0 }
 *     if (rc < 0) { fprintf(stderr, "hearsay train: %s\n", hs_last_error()); ... exit 2 }
 *     long epochs = hs_cfg_int(cfg, "epochs");
 *
 * Values. Every value is given as text and parsed by type: defaults too (a bad default is an
 * error from hs_cfg_create). INT is a long, DOUBLE a finite double, both checked against
 * .range, written "[lo, hi]" with '(' / ')' for open ends and "inf" or nothing for no bound
 * ("(0, inf)", "[1, )"). BOOL takes true/false, yes/no, on/off, 1/0. ENUM takes one of
 * .choices ("a|b|c"). STRING takes any text (its default may be NULL: unset). LIST is a
 * repeatable string: every occurrence appends an item (its default is split at ',').
 *
 * Precedence: default < file < flag. A source never overrides a higher one, whatever the
 * call order; for a LIST, the first item from a higher source replaces the lower source's
 * items, so `--straggler` flags replace the file's stragglers instead of adding to them.
 *
 * Names. Option names use letters, digits, '-', '_' and '.'; '-' and '_' are the same
 * character everywhere ("lr-schedule" == "lr_schedule"). Names are case-sensitive.
 * "config" and "help" are reserved.
 *
 * Flags: "--name value", "--name=value", "-x value" / "-xvalue" for a .short_name.
 * BOOL flags take no separate value: "--name" sets true, "--no-name" false, "--name=false"
 * works too. "-h" / "--help" ask for help; "--config FILE" loads an INI file before every
 * flag, wherever it appears. Arguments that do not start with '-' are positional (allowed up
 * to spec->max_positional); "--" ends the options and everything after it is the "rest"
 * (allowed when spec->allow_rest: `hearsay run -n 4 -- hearsay train ...`).
 *
 * INI files: `key = value` lines; blank lines and lines starting with '#' or ';' are
 * ignored; ' #' or ' ;' (after whitespace) starts a trailing comment. Values may be
 * double-quoted to keep '#', ';' or surrounding spaces ("\"" and "\\" escape inside quotes).
 * `[section]` headers are headings: a key in [section] names the option "section.key" when
 * such an option exists, else the option "key" itself, so files can be organised freely
 * and the flat flag names work in any section. hs_cfg_write_ini writes one section per
 * option group. A repeated key overrides the earlier line (a LIST appends; an empty
 * unquoted value clears the list). Errors name file:line, the key and the value.
 *
 * The hs_cfg_t keeps pointers to the spec (and its table) and to argv: both must outlive it.
 */
#ifndef HEARSAY_OPTIONS_H
#define HEARSAY_OPTIONS_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hs_opt_type {
    HS_OPT_INT = 1, /* long, checked against .range */
    HS_OPT_DOUBLE,  /* finite double, checked against .range */
    HS_OPT_STRING,  /* any text; default may be NULL (unset) */
    HS_OPT_BOOL,    /* true/false yes/no on/off 1/0; flags --name / --no-name */
    HS_OPT_ENUM,    /* one of .choices ("cpu|cuda") */
    HS_OPT_LIST,    /* repeatable string; each occurrence appends */
} hs_opt_type_t;

typedef struct hs_option {
    const char *name; /* flag "--name" and INI key */
    hs_opt_type_t type;
    const char *def;      /* default, as text (NULL: 0 / false / first choice / unset / empty) */
    const char *help;     /* one line for --help */
    const char *group;    /* help heading and INI section; NULL = the previous option's group */
    const char *range;    /* INT/DOUBLE: "[lo, hi]", open ends with '(' ')'; NULL = any */
    const char *choices;  /* ENUM: "a|b|c" */
    const char *metavar;  /* value placeholder in --help (default by type: N, X, S, ...) */
    char short_name;      /* optional single-letter flag: -n */
    const char *def_help; /* what --help says of the default (NULL: .def), e.g. when it
                           * depends on another option */
} hs_option_t;

typedef struct hs_cfg_spec {
    const char *usage;   /* "hearsay train [OPTIONS]" */
    const char *summary; /* a paragraph printed under the usage line (may be NULL) */
    const hs_option_t *options;
    size_t n_options;
    int max_positional; /* positional arguments before "--": 0 none, -1 any number */
    int allow_rest;     /* 1: arguments after "--" are kept (hs_cfg_rest); 0: an error */
} hs_cfg_spec_t;

/* Where a value came from. */
typedef enum hs_cfg_source { HS_CFG_DEFAULT = 0, HS_CFG_FILE = 1, HS_CFG_FLAG = 2 } hs_cfg_source_t;

/* hs_cfg_parse_args found -h / --help. */
#define HS_CFG_HELP 1

typedef struct hs_cfg hs_cfg_t;

/* Build a configuration from the option table and apply the defaults. -EINVAL with a message
 * for a bad table (duplicate or reserved name, bad default, range or choices). */
int hs_cfg_create(hs_cfg_t **out, const hs_cfg_spec_t *spec);
/* Free everything; *cfg becomes NULL (NULL is fine). */
void hs_cfg_free(hs_cfg_t **cfg);

/* Parse a command line (argv[0], the command name, is skipped): --config first, then the
 * flags. Returns 0, HS_CFG_HELP when -h/--help is present (nothing else is applied), or
 * -EINVAL naming the flag, the value and what was expected (unknown flags get a "did you
 * mean" suggestion). May be called once per hs_cfg_t. */
int hs_cfg_parse_args(hs_cfg_t *cfg, int argc, char **argv);

/* The largest config file read (bytes): configs are a few hundred bytes; the bound keeps
 * --config /dev/zero or a huge file from being read whole into memory. */
#define HS_CFG_FILE_MAX (1 << 20)
/* Read an INI file (precedence "file"); errors name path:line. A file over HS_CFG_FILE_MAX
 * bytes gives -EFBIG, one with a NUL byte -EINVAL (both naming the file), before the rest is
 * read. */
int hs_cfg_load_file(hs_cfg_t *cfg, const char *path);
/* Same for INI text in memory; `name` stands for the file name in messages. */
int hs_cfg_load_string(hs_cfg_t *cfg, const char *text, const char *name);

/* Set one option from text with flag precedence (e.g. values a launcher decides). */
int hs_cfg_set(hs_cfg_t *cfg, const char *name, const char *value);

/* Typed getters. Asking for an unknown name or the wrong type is a programming error: it is
 * logged and 0 / NULL is returned. hs_cfg_double also reads an INT; hs_cfg_str serves STRING
 * (NULL when unset) and ENUM (the choice); hs_cfg_enum gives the index of the choice in
 * .choices. Strings stay valid until the option is set again or the hs_cfg_t is freed. */
long hs_cfg_int(const hs_cfg_t *cfg, const char *name);
double hs_cfg_double(const hs_cfg_t *cfg, const char *name);
int hs_cfg_bool(const hs_cfg_t *cfg, const char *name);
const char *hs_cfg_str(const hs_cfg_t *cfg, const char *name);
int hs_cfg_enum(const hs_cfg_t *cfg, const char *name);
/* A LIST's items (in order) and their number in *n. */
const char *const *hs_cfg_list(const hs_cfg_t *cfg, const char *name, size_t *n);
/* Where the option's value came from (HS_CFG_DEFAULT for an unknown name). */
hs_cfg_source_t hs_cfg_source(const hs_cfg_t *cfg, const char *name);

/* The --config file given to hs_cfg_parse_args (NULL when none). */
const char *hs_cfg_config_path(const hs_cfg_t *cfg);
/* Positional arguments (before "--"), *n of them. */
const char *const *hs_cfg_positional(const hs_cfg_t *cfg, size_t *n);
/* Arguments after "--" (a NULL-terminated slice of argv, *argc of them; NULL when none). */
char **hs_cfg_rest(const hs_cfg_t *cfg, int *argc);

/* --help text: usage, summary, then the options grouped, each with its type, help, default,
 * range or choices. */
int hs_cfg_print_help(const hs_cfg_t *cfg, FILE *f);
/* The resolved values as INI (one [section] per group) that hs_cfg_load_file reads back to
 * the same values. hs_cfg_save_ini writes it to `path` (errors name the path). */
int hs_cfg_write_ini(const hs_cfg_t *cfg, FILE *f);
int hs_cfg_save_ini(const hs_cfg_t *cfg, const char *path);
/* The resolved values as one JSON object (numbers, booleans, strings, arrays for LISTs, null
 * for an unset STRING). Inner lines are indented by indent + 2 spaces and the closing brace
 * by `indent`, so it can be embedded after `"config": ` in a larger document. No newline
 * after the closing brace. */
int hs_cfg_write_json(const hs_cfg_t *cfg, FILE *f, int indent);

#ifdef __cplusplus
}
#endif
#endif
