/*
 * tests/fuzz/fuzz_config.c — the configuration layer (runtime/config.c, config_io.c): INI text
 * and command-line flags against a small option table with every type.
 *
 * Input: INI text, a NUL byte, then the flags (argv[1..]) separated by NUL bytes. Flags naming
 * "config" are dropped (--config reads a file). Invariant (hearsay/options.h): whatever was
 * accepted, hs_cfg_write_ini writes text that a fresh configuration reads back to the same
 * values.
 */
#include "hearsay/common.h"
#include "hearsay/options.h"
#include "tests/fuzz/fuzz_util.h"

#include <math.h>

static const hs_option_t opts[] = {
    {.name = "epochs",
     .type = HS_OPT_INT,
     .def = "90",
     .range = "[1, 100000]",
     .group = "Training",
     .help = "number of epochs"},
    {.name = "lr", .type = HS_OPT_DOUBLE, .def = "0.1", .range = "(0, inf)", .help = "rate"},
    {.name = "momentum", .type = HS_OPT_DOUBLE, .def = "0.9", .range = "[0, 1)"},
    {.name = "ratio", .type = HS_OPT_DOUBLE, .def = "-1.5", .range = "[-10, 10]"},
    {.name = "nesterov", .type = HS_OPT_BOOL, .def = "true", .help = "Nesterov momentum"},
    {.name = "device", .type = HS_OPT_ENUM, .def = "cpu", .choices = "cpu|cuda|cuda_2"},
    {.name = "straggler", .type = HS_OPT_LIST, .metavar = "SPEC", .help = "repeatable"},
    {.name = "tags", .type = HS_OPT_LIST, .def = "a,b"},
    {.name = "workers",
     .short_name = 'n',
     .type = HS_OPT_INT,
     .def = "1",
     .range = "[1, )",
     .group = "Run: the launcher"},
    {.name = "seed", .type = HS_OPT_INT, .def = "0"},
    {.name = "out", .short_name = 'o', .type = HS_OPT_STRING},
    {.name = "run.name", .type = HS_OPT_STRING, .def = "x"},
    {.name = "verbose", .short_name = 'v', .type = HS_OPT_BOOL},
};
static const hs_cfg_spec_t spec = {.usage = "fuzz [OPTIONS]",
                                   .summary = "the fuzzer's table",
                                   .options = opts,
                                   .n_options = HS_ARRAY_LEN(opts),
                                   .max_positional = 2,
                                   .allow_rest = 1};

#define MAX_ARGS 64

static int same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

/* Every value of a equals b's. */
static void check_same(const hs_cfg_t *a, const hs_cfg_t *b, const char *ini)
{
    for (size_t i = 0; i < HS_ARRAY_LEN(opts); i++) {
        const char *nm = opts[i].name;
        switch (opts[i].type) {
        case HS_OPT_INT:
            FZ_CHECK(hs_cfg_int(a, nm) == hs_cfg_int(b, nm), "%s: %ld read back as %ld\n%s", nm,
                     hs_cfg_int(a, nm), hs_cfg_int(b, nm), ini);
            break;
        case HS_OPT_DOUBLE:
            FZ_CHECK(hs_cfg_double(a, nm) == hs_cfg_double(b, nm), "%s: %.17g read back as %.17g",
                     nm, hs_cfg_double(a, nm), hs_cfg_double(b, nm));
            break;
        case HS_OPT_BOOL:
            FZ_CHECK(hs_cfg_bool(a, nm) == hs_cfg_bool(b, nm), "%s", nm);
            break;
        case HS_OPT_ENUM:
            FZ_CHECK(hs_cfg_enum(a, nm) == hs_cfg_enum(b, nm), "%s", nm);
            break;
        case HS_OPT_STRING:
            FZ_CHECK(same_str(hs_cfg_str(a, nm), hs_cfg_str(b, nm)), "%s: '%s' read back as '%s'",
                     nm, hs_cfg_str(a, nm) ? hs_cfg_str(a, nm) : "(unset)",
                     hs_cfg_str(b, nm) ? hs_cfg_str(b, nm) : "(unset)");
            break;
        case HS_OPT_LIST: {
            size_t na, nb;
            const char *const *la = hs_cfg_list(a, nm, &na);
            const char *const *lb = hs_cfg_list(b, nm, &nb);
            FZ_CHECK(na == nb, "%s: %zu items read back as %zu\n%s", nm, na, nb, ini);
            for (size_t k = 0; k < na; k++)
                FZ_CHECK(!strcmp(la[k], lb[k]), "%s[%zu]: '%s' read back as '%s'", nm, k, la[k],
                         lb[k]);
            break;
        }
        }
    }
}

/* Write cfg as INI (and JSON and help, for the writers), read the INI back, compare. */
static void roundtrip(const hs_cfg_t *cfg)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) abort();
    FZ_CHECK(hs_cfg_write_ini(cfg, f) == 0, "write_ini: %s", hs_last_error());
    fclose(f);
    hs_cfg_t *back = NULL;
    FZ_CHECK(hs_cfg_create(&back, &spec) == 0, "create: %s", hs_last_error());
    int rc = hs_cfg_load_string(back, buf, "written.ini");
    FZ_CHECK(rc == 0, "the written INI does not read back: %s\n%s", hs_last_error(), buf);
    check_same(cfg, back, buf);
    hs_cfg_free(&back);
    free(buf);

    f = fopen("/dev/null", "w");
    if (!f) abort();
    FZ_CHECK(hs_cfg_write_json(cfg, f, 2) == 0, "write_json: %s", hs_last_error());
    hs_cfg_print_help(cfg, f);
    fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_t in = fz_init(data, size);
    char *ini = fz_until(&in, '\0');
    char *argv[MAX_ARGS + 2];
    int argc = 0, skip_args = 0;
    argv[argc++] = strdup("fuzz");
    while (in.n && argc <= MAX_ARGS) {
        argv[argc] = fz_until(&in, '\0');
        if (strstr(argv[argc], "config")) skip_args = 1; /* --config FILE reads a file */
        argc++;
    }
    argv[argc] = NULL;

    hs_cfg_t *cfg = NULL;
    FZ_CHECK(hs_cfg_create(&cfg, &spec) == 0, "create: %s", hs_last_error());
    int rc = hs_cfg_load_string(cfg, ini, "fuzz.ini");
    if (rc == 0 && !skip_args) rc = hs_cfg_parse_args(cfg, argc, argv);
    if (rc == 0) {
        size_t n;
        hs_cfg_positional(cfg, &n);
        FZ_CHECK(n <= 2, "%zu positional arguments accepted, at most 2 allowed", n);
        int nrest = 0;
        char **rest = hs_cfg_rest(cfg, &nrest);
        for (int i = 0; rest && i < nrest; i++) FZ_CHECK(rest[i] != NULL, "rest[%d] is NULL", i);
        FZ_CHECK(isfinite(hs_cfg_double(cfg, "lr")) && hs_cfg_double(cfg, "lr") > 0, "lr %g",
                 hs_cfg_double(cfg, "lr"));
        double m = hs_cfg_double(cfg, "momentum");
        FZ_CHECK(m >= 0 && m < 1, "momentum %g outside [0, 1)", m);
        long e = hs_cfg_int(cfg, "epochs");
        FZ_CHECK(e >= 1 && e <= 100000, "epochs %ld outside [1, 100000]", e);
        roundtrip(cfg);
    } else if (rc == HS_CFG_HELP) {
        FILE *f = fopen("/dev/null", "w");
        if (!f) abort();
        hs_cfg_print_help(cfg, f);
        fclose(f);
    }
    hs_cfg_free(&cfg);
    for (int i = 0; i < argc; i++) free(argv[i]);
    free(ini);
    return 0;
}
