/* tests/test_config.c — the configuration layer: option table, INI files, flags, precedence,
 * errors, --help, INI/JSON output. */
#include "hearsay/algo.h"
#include "hearsay/common.h"
#include "hearsay/options.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const hs_option_t opts[] = {
    {.name = "epochs",
     .type = HS_OPT_INT,
     .def = "90",
     .range = "[1, 1000]",
     .group = "Training",
     .help = "number of epochs"},
    {.name = "lr",
     .type = HS_OPT_DOUBLE,
     .def = "0.1",
     .range = "(0, inf)",
     .help = "base learning rate"},
    {.name = "momentum",
     .type = HS_OPT_DOUBLE,
     .def = "0.9",
     .range = "[0, 1)",
     .help = "momentum"},
    {.name = "nesterov", .type = HS_OPT_BOOL, .def = "true", .help = "Nesterov momentum"},
    {.name = "lr-schedule", .type = HS_OPT_STRING, .def = "constant", .help = "lr schedule"},
    {.name = "eval-every",
     .type = HS_OPT_DOUBLE,
     .def = "1.5",
     .range = "[0, 1000]",
     .help = "evaluate on the test set every this many epochs; a long help text that has to be "
             "wrapped over more than one line of the help screen"},
    {.name = "device",
     .type = HS_OPT_ENUM,
     .def = "cpu",
     .choices = "cpu|cuda",
     .group = "System",
     .help = "kernel backend"},
    {.name = "workers",
     .short_name = 'n',
     .type = HS_OPT_INT,
     .def = "1",
     .range = "[1, )",
     .help = "number of workers"},
    {.name = "run-dir", .type = HS_OPT_STRING, .help = "output directory"},
    {.name = "verbose", .short_name = 'v', .type = HS_OPT_BOOL, .help = "log more"},
    {.name = "straggler",
     .type = HS_OPT_LIST,
     .metavar = "RANK:FACTOR",
     .group = "Faults",
     .help = "slow a rank down"},
    {.name = "faults.drop",
     .type = HS_OPT_DOUBLE,
     .def = "0",
     .range = "[0, 1]",
     .help = "message drop probability"},
};
static const hs_cfg_spec_t spec = {.usage = "hearsay train [OPTIONS]",
                                   .summary = "Train a model.",
                                   .options = opts,
                                   .n_options = HS_ARRAY_LEN(opts)};

static hs_cfg_t *make(void)
{
    hs_cfg_t *cfg = NULL;
    int rc = hs_cfg_create(&cfg, &spec);
    ck_assert_msg(rc == 0, "create: %s", hs_last_error());
    return cfg;
}

/* Parse a command line given as a NULL-terminated list (argv[0] = "train" is added). */
#define ARGS(...) ((char *[]){"train", __VA_ARGS__, NULL})
static int parse(hs_cfg_t *cfg, char **argv)
{
    int argc = 0;
    while (argv[argc]) argc++;
    return hs_cfg_parse_args(cfg, argc, argv);
}

static void assert_error_has(const char *a, const char *b)
{
    const char *e = hs_last_error();
    ck_assert_msg(strstr(e, a) != NULL, "error '%s' lacks '%s'", e, a);
    if (b) ck_assert_msg(strstr(e, b) != NULL, "error '%s' lacks '%s'", e, b);
}

static char *write_temp(const char *text)
{
    char *path = strdup("/tmp/hs_test_config_XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

START_TEST(test_defaults)
{
    hs_cfg_t *cfg = make();
    ck_assert_int_eq(hs_cfg_int(cfg, "epochs"), 90);
    ck_assert(hs_cfg_double(cfg, "lr") == 0.1);
    ck_assert_int_eq(hs_cfg_bool(cfg, "nesterov"), 1);
    ck_assert_int_eq(hs_cfg_bool(cfg, "verbose"), 0);
    ck_assert_str_eq(hs_cfg_str(cfg, "device"), "cpu");
    ck_assert_int_eq(hs_cfg_enum(cfg, "device"), 0);
    ck_assert_ptr_null(hs_cfg_str(cfg, "run-dir"));
    ck_assert_str_eq(hs_cfg_str(cfg, "lr_schedule"), "constant"); /* '_' == '-' */
    size_t n = 99;
    hs_cfg_list(cfg, "straggler", &n);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(hs_cfg_source(cfg, "lr"), HS_CFG_DEFAULT);
    hs_cfg_free(&cfg);
    ck_assert_ptr_null(cfg);
}
END_TEST

START_TEST(test_precedence)
{
    char *path = write_temp("epochs = 10\nlr = 0.5\nmomentum = 0.5\n");
    hs_cfg_t *cfg = make();
    /* The flag comes before --config on the command line and still wins. */
    int rc = parse(cfg, ARGS("--lr", "0.25", "--config", path));
    ck_assert_msg(rc == 0, "%s", hs_last_error());
    ck_assert_int_eq(hs_cfg_int(cfg, "epochs"), 10);   /* file over default */
    ck_assert(hs_cfg_double(cfg, "lr") == 0.25);       /* flag over file */
    ck_assert(hs_cfg_double(cfg, "momentum") == 0.5);  /* file */
    ck_assert(hs_cfg_double(cfg, "faults.drop") == 0); /* default */
    ck_assert_int_eq(hs_cfg_source(cfg, "epochs"), HS_CFG_FILE);
    ck_assert_int_eq(hs_cfg_source(cfg, "lr"), HS_CFG_FLAG);
    ck_assert_int_eq(hs_cfg_source(cfg, "faults.drop"), HS_CFG_DEFAULT);
    ck_assert_str_eq(hs_cfg_config_path(cfg), path);
    /* Loading a file afterwards never overrides a flag. */
    ck_assert_int_eq(hs_cfg_load_string(cfg, "lr = 0.75\nepochs = 11\n", "late.ini"), 0);
    ck_assert(hs_cfg_double(cfg, "lr") == 0.25);
    ck_assert_int_eq(hs_cfg_int(cfg, "epochs"), 11);
    hs_cfg_free(&cfg);
    unlink(path);
    free(path);
}
END_TEST

START_TEST(test_flag_forms)
{
    hs_cfg_t *cfg = make();
    int rc = parse(cfg, ARGS("--epochs=7", "--lr", "1e-3", "--no-nesterov", "-n", "4", "-v",
                             "--device=cuda", "--run_dir", "/tmp/x y", "--momentum=0"));
    ck_assert_msg(rc == 0, "%s", hs_last_error());
    ck_assert_int_eq(hs_cfg_int(cfg, "epochs"), 7);
    ck_assert(hs_cfg_double(cfg, "lr") == 1e-3);
    ck_assert_int_eq(hs_cfg_bool(cfg, "nesterov"), 0);
    ck_assert_int_eq(hs_cfg_int(cfg, "workers"), 4);
    ck_assert_int_eq(hs_cfg_bool(cfg, "verbose"), 1);
    ck_assert_int_eq(hs_cfg_enum(cfg, "device"), 1);
    ck_assert_str_eq(hs_cfg_str(cfg, "device"), "cuda");
    ck_assert_str_eq(hs_cfg_str(cfg, "run-dir"), "/tmp/x y");
    ck_assert(hs_cfg_double(cfg, "momentum") == 0);
    hs_cfg_free(&cfg);

    cfg = make();
    ck_assert_int_eq(parse(cfg, ARGS("-n8", "--nesterov=off", "--verbose=yes")), 0);
    ck_assert_int_eq(hs_cfg_int(cfg, "workers"), 8);
    ck_assert_int_eq(hs_cfg_bool(cfg, "nesterov"), 0);
    ck_assert_int_eq(hs_cfg_bool(cfg, "verbose"), 1);
    /* A negative number is a value, not a flag. */
    ck_assert_int_eq(parse(cfg, ARGS("--faults.drop", "-1")), -EINVAL);
    assert_error_has("--faults.drop", "-1");
    hs_cfg_free(&cfg);
}
END_TEST

START_TEST(test_bad_values)
{
    static const struct {
        const char *arg, *value, *expect;
    } cases[] = {
        {"--epochs", "ten", "integer"},
        {"--epochs", "0", "[1, 1000]"},
        {"--epochs", "1001", "[1, 1000]"},
        {"--epochs", "3.5", "integer"},
        {"--lr", "0", "(0, inf)"},
        {"--lr", "fast", "number"},
        {"--lr", "nan", "number"},
        {"--momentum", "1", "[0, 1)"},
        {"--momentum", "-0.1", "[0, 1)"},
        {"--device", "tpu", "cpu|cuda"},
        {"--nesterov", "maybe", "boolean"},
        {"--workers", "0", "[1, inf)"},
        {"--faults.drop", "1.5", "[0, 1]"},
        {"--epochs", "", "integer"},
        /* issue 17 item 2: overflow, not-a-number, infinities, negatives, huge integers */
        {"--epochs", "1e400", "integer"},
        {"--epochs", "1e3", "integer"},
        {"--epochs", "99999999999999999999", "integer"},
        {"--epochs", "-99999999999999999999", "integer"},
        {"--epochs", "-5", "[1, 1000]"},
        {"--epochs", "0x10", "integer"},
        {"--epochs", "5 apples", "integer"},
        {"--workers", "-1", "[1, inf)"},
        {"--workers", "9223372036854775808", "integer"},
        {"--lr", "1e400", "number"},
        {"--lr", "-1e400", "number"},
        {"--lr", "inf", "number"},
        {"--lr", "-inf", "number"},
        {"--lr", "infinity", "number"},
        {"--lr", "NaN", "number"},
        {"--lr", "-nan", "number"},
        {"--lr", "1e-400", "number"},
        {"--lr", "-3", "(0, inf)"},
        {"--momentum", "1e308", "[0, 1)"},
        {"--eval-every", "1e309", "number"},
        {"--faults.drop", "nan", "number"},
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(cases); i++) {
        hs_cfg_t *cfg = make();
        char flag[64];
        snprintf(flag, sizeof flag, "%s=%s", cases[i].arg, cases[i].value);
        hs_error_clear();
        ck_assert_int_eq(parse(cfg, ARGS(flag)), -EINVAL);
        assert_error_has(cases[i].arg, cases[i].expect);
        if (*cases[i].value) assert_error_has(cases[i].value, NULL);
        hs_cfg_free(&cfg);
    }
    /* Range bounds themselves: closed ends accepted. */
    hs_cfg_t *cfg = make();
    ck_assert_int_eq(parse(cfg, ARGS("--epochs", "1000", "--faults.drop=1", "--momentum=0")), 0);
    ck_assert_int_eq(hs_cfg_int(cfg, "epochs"), 1000);
    hs_cfg_free(&cfg);
    /* Missing value. */
    cfg = make();
    ck_assert_int_eq(parse(cfg, ARGS("--lr")), -EINVAL);
    assert_error_has("--lr", "missing");
    hs_cfg_free(&cfg);
    /* A boolean negation takes no value. */
    cfg = make();
    ck_assert_int_eq(parse(cfg, ARGS("--no-nesterov=true")), -EINVAL);
    assert_error_has("no-nesterov", NULL);
    hs_cfg_free(&cfg);
}
END_TEST

START_TEST(test_unknown_flags)
{
    hs_cfg_t *cfg = make();
    ck_assert_int_eq(parse(cfg, ARGS("--lrr", "0.1")), -EINVAL);
    assert_error_has("--lrr", "did you mean '--lr'");
    ck_assert_int_eq(parse(cfg, ARGS("--epoch=3")), -EINVAL);
    assert_error_has("--epoch=3", "'--epochs'");
    ck_assert_int_eq(parse(cfg, ARGS("--moment", "0.1")), -EINVAL); /* unique prefix */
    assert_error_has("--moment", "'--momentum'");
    ck_assert_int_eq(parse(cfg, ARGS("--zzzzzz")), -EINVAL);
    assert_error_has("--zzzzzz", NULL);
    ck_assert_ptr_null(strstr(hs_last_error(), "did you mean"));
    ck_assert_int_eq(parse(cfg, ARGS("-q")), -EINVAL);
    assert_error_has("-q", NULL);
    ck_assert_int_eq(parse(cfg, ARGS("--no-lr")), -EINVAL); /* not a boolean */
    /* No positional arguments declared. */
    ck_assert_int_eq(parse(cfg, ARGS("extra")), -EINVAL);
    assert_error_has("extra", NULL);
    ck_assert_int_eq(parse(cfg, ARGS("--", "ls")), -EINVAL);
    assert_error_has("--", "ls");
    hs_cfg_free(&cfg);
}
END_TEST

START_TEST(test_help_request)
{
    hs_cfg_t *cfg = make();
    /* --help wins over anything else on the line, including bad flags. */
    ck_assert_int_eq(parse(cfg, ARGS("--lrr", "3", "--help")), HS_CFG_HELP);
    ck_assert_int_eq(parse(cfg, ARGS("-h")), HS_CFG_HELP);
    /* After "--" it belongs to the rest. */
    hs_cfg_free(&cfg);
}
END_TEST

START_TEST(test_positional_and_rest)
{
    static const hs_option_t ro[] = {
        {.name = "workers", .short_name = 'n', .type = HS_OPT_INT, .def = "1"},
    };
    hs_cfg_spec_t rs = {.usage = "hearsay run -n N -- COMMAND",
                        .options = ro,
                        .n_options = 1,
                        .max_positional = 1,
                        .allow_rest = 1};
    hs_cfg_t *cfg = NULL;
    ck_assert_int_eq(hs_cfg_create(&cfg, &rs), 0);
    char **argv = ARGS("-n", "4", "job", "--", "hearsay", "train", "--lr", "0.1", "--help");
    ck_assert_int_eq(parse(cfg, argv), 0);
    ck_assert_int_eq(hs_cfg_int(cfg, "workers"), 4);
    size_t np;
    const char *const *pos = hs_cfg_positional(cfg, &np);
    ck_assert_uint_eq(np, 1);
    ck_assert_str_eq(pos[0], "job");
    int nr;
    char **rest = hs_cfg_rest(cfg, &nr);
    ck_assert_int_eq(nr, 5);
    ck_assert_str_eq(rest[0], "hearsay");
    ck_assert_str_eq(rest[4], "--help");
    ck_assert_ptr_null(rest[5]);
    hs_cfg_free(&cfg);

    ck_assert_int_eq(hs_cfg_create(&cfg, &rs), 0);
    ck_assert_int_eq(parse(cfg, ARGS("a", "b")), -EINVAL); /* only one positional */
    assert_error_has("'b'", NULL);
    hs_cfg_free(&cfg);
}
END_TEST

START_TEST(test_file_syntax)
{
    const char *text = "\xEF\xBB\xBF# a comment\n"
                       "; another comment\n"
                       "   \n"
                       "  epochs   =   12   # trailing comment\n"
                       "lr=0.05;also a comment\n" /* ';' not after whitespace: part of value */
                       "[training]\n"
                       "momentum = 0.8 ; comment\r\n"
                       "lr_schedule = \"step:30,60 # not a comment\"  # but this is\n"
                       "[faults]   # section comment\n"
                       "drop = 0.25\n" /* [faults] drop -> faults.drop */
                       "[ system ]\n"
                       "run-dir = \" padded \"\n"
                       "nesterov = no\n"
                       "device=cuda\n";
    hs_cfg_t *cfg = make();
    ck_assert_int_eq(hs_cfg_load_string(cfg, text, "t.ini"), -EINVAL);
    /* "0.05;also" is not a number: the error names file:line, key and value. */
    assert_error_has("t.ini:5", "lr");
    assert_error_has("0.05;also", NULL);
    hs_cfg_free(&cfg);

    char *fixed = strdup(text);
    char *p = strstr(fixed, "0.05;also a comment");
    memcpy(p, "0.05 ;also", 10);
    cfg = make();
    int rc = hs_cfg_load_string(cfg, fixed, "t.ini");
    ck_assert_msg(rc == 0, "%s", hs_last_error());
    ck_assert_int_eq(hs_cfg_int(cfg, "epochs"), 12);
    ck_assert(hs_cfg_double(cfg, "lr") == 0.05);
    ck_assert(hs_cfg_double(cfg, "momentum") == 0.8);
    ck_assert_str_eq(hs_cfg_str(cfg, "lr-schedule"), "step:30,60 # not a comment");
    ck_assert(hs_cfg_double(cfg, "faults.drop") == 0.25);
    ck_assert_str_eq(hs_cfg_str(cfg, "run-dir"), " padded ");
    ck_assert_int_eq(hs_cfg_bool(cfg, "nesterov"), 0);
    ck_assert_str_eq(hs_cfg_str(cfg, "device"), "cuda");
    hs_cfg_free(&cfg);
    free(fixed);
}
END_TEST

START_TEST(test_file_errors)
{
    static const struct {
        const char *text, *expect1, *expect2;
    } cases[] = {
        {"epochs = 5\nlrr = 0.1\n", "x.ini:2", "unknown key 'lrr' (did you mean 'lr'?)"},
        {"\n\nepochs = many\n", "x.ini:3", "'many'"},
        {"epochs = 5000\n", "x.ini:1: epochs", "5000"},
        {"[training\nlr = 1\n", "x.ini:1", "section"},
        {"lr 0.1\n", "x.ini:1", "key = value"},
        {"= 3\n", "x.ini:1", "missing key"},
        {"[faults]\nrate = 1\n", "x.ini:2", "'rate' in [faults]"},
        {"run-dir = \"open\n", "x.ini:1", "run-dir"},
        {"device = gpu\n", "x.ini:1: device", "'gpu' is not one of cpu|cuda"},
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(cases); i++) {
        hs_cfg_t *cfg = make();
        ck_assert_int_eq(hs_cfg_load_string(cfg, cases[i].text, "x.ini"), -EINVAL);
        assert_error_has(cases[i].expect1, cases[i].expect2);
        hs_cfg_free(&cfg);
    }
    /* A real file: errors carry its path; a missing file is named. */
    char *path = write_temp("epochs = 3\nmomentum = 2\n");
    hs_cfg_t *cfg = make();
    ck_assert_int_eq(parse(cfg, ARGS("--config", path)), -EINVAL);
    char where[128];
    snprintf(where, sizeof where, "%s:2: momentum", path);
    assert_error_has(where, "2 is out of range [0, 1)");
    hs_cfg_free(&cfg);
    unlink(path);
    cfg = make();
    ck_assert_int_lt(parse(cfg, ARGS("--config=/nonexistent/hs.ini")), 0);
    assert_error_has("/nonexistent/hs.ini", NULL);
    ck_assert_int_eq(parse(cfg, ARGS("--config", path, "--config", path)), -EINVAL);
    assert_error_has("twice", NULL);
    hs_cfg_free(&cfg);
    free(path);
}
END_TEST

/* Issue 17 item 7: a config file is read whole, so it has a size bound (1 MiB, HS_CFG_FILE_MAX):
 * /dev/zero (endless NUL bytes) used to read 2 GB before failing; it, a large sparse file and a
 * text file just over the bound are refused at once, naming the file and the bound. */
START_TEST(test_file_size_bound)
{
    double t0 = hs_now();
    hs_cfg_t *cfg = make();
    ck_assert_int_eq(parse(cfg, ARGS("--config", "/dev/zero")), -EINVAL);
    assert_error_has("/dev/zero", "only a regular file");
    hs_cfg_free(&cfg);
    /* a sparse file of 2 GiB: no disk used */
    char *path = write_temp("");
    FILE *f = fopen(path, "r+");
    ck_assert_int_eq(ftruncate(fileno(f), (off_t)2 << 30), 0);
    fclose(f);
    cfg = make();
    ck_assert_int_eq(parse(cfg, ARGS("--config", path)), -EFBIG);
    assert_error_has(path, "above the 1048576-byte bound for config files");
    hs_cfg_free(&cfg);
    /* text: exactly the bound is read, one byte more is not */
    f = fopen(path, "w");
    for (int i = 0; i < HS_CFG_FILE_MAX / 64; i++) fprintf(f, "#%62d\n", i);
    fclose(f);
    cfg = make();
    ck_assert_msg(parse(cfg, ARGS("--config", path)) == 0, "%s", hs_last_error());
    hs_cfg_free(&cfg);
    f = fopen(path, "a");
    fputc('\n', f);
    fclose(f);
    cfg = make();
    ck_assert_int_eq(parse(cfg, ARGS("--config", path)), -EFBIG);
    assert_error_has(path, "1048577 bytes");
    hs_cfg_free(&cfg);
    unlink(path);
    free(path);
    ck_assert_msg(hs_now() - t0 < 5.0, "took %.1f s", hs_now() - t0);
}
END_TEST

START_TEST(test_lists)
{
    hs_cfg_t *cfg = make();
    ck_assert_int_eq(hs_cfg_load_string(cfg, "straggler = 1:2\nstraggler = 3:4\n", "f.ini"), 0);
    size_t n;
    const char *const *l = hs_cfg_list(cfg, "straggler", &n);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(l[0], "1:2");
    ck_assert_str_eq(l[1], "3:4");
    ck_assert_ptr_null(l[2]);
    /* Flags replace the file's items, then append to each other. */
    ck_assert_int_eq(parse(cfg, ARGS("--straggler", "5:6", "--straggler=7:8", "--lr", "1")), 0);
    l = hs_cfg_list(cfg, "straggler", &n);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(l[0], "5:6");
    ck_assert_str_eq(l[1], "7:8");
    hs_cfg_free(&cfg);
    /* An empty unquoted value clears; a quoted empty value is an item. */
    cfg = make();
    ck_assert_int_eq(
        hs_cfg_load_string(cfg, "straggler = a\nstraggler =\nstraggler = \"\"\n", "f.ini"), 0);
    l = hs_cfg_list(cfg, "straggler", &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(l[0], "");
    hs_cfg_free(&cfg);
    /* A list default is split at commas. */
    static const hs_option_t lo[] = {{.name = "peers", .type = HS_OPT_LIST, .def = "1,2,3"}};
    hs_cfg_spec_t ls = {.options = lo, .n_options = 1};
    ck_assert_int_eq(hs_cfg_create(&cfg, &ls), 0);
    l = hs_cfg_list(cfg, "peers", &n);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(l[2], "3");
    hs_cfg_free(&cfg);
}
END_TEST

static void check_same(const hs_cfg_t *a, const hs_cfg_t *b)
{
    ck_assert_int_eq(hs_cfg_int(a, "epochs"), hs_cfg_int(b, "epochs"));
    ck_assert(hs_cfg_double(a, "lr") == hs_cfg_double(b, "lr"));
    ck_assert(hs_cfg_double(a, "momentum") == hs_cfg_double(b, "momentum"));
    ck_assert(hs_cfg_double(a, "faults.drop") == hs_cfg_double(b, "faults.drop"));
    ck_assert_int_eq(hs_cfg_bool(a, "nesterov"), hs_cfg_bool(b, "nesterov"));
    ck_assert_int_eq(hs_cfg_bool(a, "verbose"), hs_cfg_bool(b, "verbose"));
    ck_assert_int_eq(hs_cfg_enum(a, "device"), hs_cfg_enum(b, "device"));
    ck_assert_int_eq(hs_cfg_int(a, "workers"), hs_cfg_int(b, "workers"));
    const char *sa = hs_cfg_str(a, "run-dir"), *sb = hs_cfg_str(b, "run-dir");
    ck_assert((sa == NULL) == (sb == NULL));
    if (sa) ck_assert_str_eq(sa, sb);
    ck_assert_str_eq(hs_cfg_str(a, "lr-schedule"), hs_cfg_str(b, "lr-schedule"));
    size_t na, nb;
    const char *const *la = hs_cfg_list(a, "straggler", &na);
    const char *const *lb = hs_cfg_list(b, "straggler", &nb);
    ck_assert_uint_eq(na, nb);
    for (size_t i = 0; i < na; i++) ck_assert_str_eq(la[i], lb[i]);
}

START_TEST(test_round_trip)
{
    hs_cfg_t *a = make();
    int rc = parse(a, ARGS("--epochs", "33", "--lr", "0.1234567890123", "--momentum=0.3",
                           "--no-nesterov", "--device", "cuda", "-n", "6", "-v", "--run-dir",
                           " a # b \"q\" \\ ", "--lr-schedule", "", "--straggler", "1:2.5",
                           "--straggler", "x;y", "--faults.drop", "1e-7"));
    ck_assert_msg(rc == 0, "%s", hs_last_error());
    char *path = strdup("/tmp/hs_test_config_rt_XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(hs_cfg_save_ini(a, path), 0);
    hs_cfg_t *b = make();
    rc = hs_cfg_load_file(b, path);
    ck_assert_msg(rc == 0, "reading back: %s", hs_last_error());
    check_same(a, b);
    ck_assert_int_eq(hs_cfg_source(b, "epochs"), HS_CFG_FILE);
    hs_cfg_free(&b);
    /* Defaults round-trip too (an unset string stays unset). */
    hs_cfg_t *d = make();
    ck_assert_int_eq(hs_cfg_save_ini(d, path), 0);
    b = make();
    ck_assert_int_eq(hs_cfg_load_file(b, path), 0);
    check_same(d, b);
    hs_cfg_free(&b);
    hs_cfg_free(&d);
    unlink(path);
    free(path);

    /* JSON: every key with its typed value. */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(hs_cfg_write_json(a, f, 0), 0);
    fclose(f);
    const char *want[] = {"\"epochs\": 33,",          "\"lr\": 0.1234567890123,",
                          "\"nesterov\": false,",     "\"device\": \"cuda\",",
                          "\"verbose\": true,",       "\"run-dir\": \" a # b \\\"q\\\" \\\\ \",",
                          "\"lr-schedule\": \"\",",   "\"straggler\": [\"1:2.5\", \"x;y\"],",
                          "\"faults.drop\": 1e-07\n}"};
    for (size_t i = 0; i < HS_ARRAY_LEN(want); i++)
        ck_assert_msg(strstr(buf, want[i]), "JSON lacks %s:\n%s", want[i], buf);
    ck_assert(buf[0] == '{');
    free(buf);
    hs_cfg_t *u = make();
    f = open_memstream(&buf, &len);
    ck_assert_int_eq(hs_cfg_write_json(u, f, 2), 0);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "\n    \"run-dir\": null,"));
    ck_assert_ptr_nonnull(strstr(buf, "\"straggler\": [],"));
    ck_assert_int_eq(buf[len - 1], '}');
    ck_assert_int_eq(buf[len - 2], ' ');
    free(buf);
    hs_cfg_free(&u);
    hs_cfg_free(&a);
}
END_TEST

START_TEST(test_help_text)
{
    hs_cfg_t *cfg = make();
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(hs_cfg_print_help(cfg, f), 0);
    fclose(f);
    /* Lines are wrapped to 100 columns; a default is never split across lines. */
    for (const char *l = buf; *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] != 0))
        ck_assert_msg(strcspn(l, "\n") <= 100, "help line too long: %.*s", (int)strcspn(l, "\n"),
                      l);
    ck_assert_ptr_nonnull(strstr(buf, "(default: 1.5; range [0, 1000])"));
    /* Collapse the wrapping to compare texts. */
    char *flat = strdup(buf);
    size_t w = 0;
    for (size_t r = 0; buf[r]; r++) {
        if (buf[r] == '\n' || (buf[r] == ' ' && buf[r + 1] == ' ')) {
            while (buf[r + 1] == ' ' || buf[r + 1] == '\n') r++;
            flat[w++] = ' ';
        } else {
            flat[w++] = buf[r];
        }
    }
    flat[w] = '\0';
    free(buf);
    buf = flat;
    for (size_t i = 0; i < HS_ARRAY_LEN(opts); i++) {
        char name[80];
        snprintf(name, sizeof name, "%s%s", opts[i].type == HS_OPT_BOOL ? "--[no-]" : "--",
                 opts[i].name);
        ck_assert_msg(strstr(buf, name), "help lacks %s:\n%s", name, buf);
        ck_assert_msg(strstr(buf, opts[i].help), "help lacks '%s'", opts[i].help);
        if (opts[i].def) {
            char d[80];
            snprintf(d, sizeof d, "default: %s", opts[i].def);
            ck_assert_msg(strstr(buf, d), "help lacks '%s'", d);
        }
    }
    const char *more[] = {"usage: hearsay train [OPTIONS]",
                          "Train a model.",
                          "Training:",
                          "System:",
                          "Faults:",
                          "-n, --workers N",
                          "{cpu|cuda}",
                          "RANK:FACTOR",
                          "repeatable",
                          "range [0, 1)",
                          "--config FILE",
                          "default: false"};
    for (size_t i = 0; i < HS_ARRAY_LEN(more); i++)
        ck_assert_msg(strstr(buf, more[i]), "help lacks '%s':\n%s", more[i], buf);
    /* Grouped: Training's options come before the System heading. */
    ck_assert(strstr(buf, "--epochs") < strstr(buf, "System:"));
    ck_assert(strstr(buf, "--device") > strstr(buf, "System:"));
    free(buf);
    hs_cfg_free(&cfg);
}
END_TEST

START_TEST(test_bad_tables)
{
    static const struct {
        hs_option_t o[2];
        size_t n;
        const char *expect;
    } cases[] = {
        {{{.name = "a", .type = HS_OPT_INT}, {.name = "a", .type = HS_OPT_BOOL}}, 2, "twice"},
        {{{.name = "a_b", .type = HS_OPT_INT}, {.name = "a-b", .type = HS_OPT_INT}}, 2, "twice"},
        {{{.name = "x", .type = HS_OPT_INT, .def = "1.5"}}, 1, "default of 'x'"},
        {{{.name = "x", .type = HS_OPT_INT, .def = "5", .range = "[0, 3]"}}, 1, "[0, 3]"},
        {{{.name = "x", .type = HS_OPT_DOUBLE, .range = "0..1"}}, 1, "bad range"},
        {{{.name = "x", .type = HS_OPT_DOUBLE, .range = "[2, 1]"}}, 1, "bad range"},
        {{{.name = "x", .type = HS_OPT_ENUM}}, 1, "no choices"},
        {{{.name = "x", .type = HS_OPT_ENUM, .choices = "a||b"}}, 1, "empty choice"},
        {{{.name = "x", .type = HS_OPT_ENUM, .choices = "a|b", .def = "c"}}, 1, "'c'"},
        {{{.name = "config", .type = HS_OPT_STRING}}, 1, "reserved"},
        {{{.name = "bad name", .type = HS_OPT_STRING}}, 1, "bad character"},
        {{{.name = "x", .type = (hs_opt_type_t)42}}, 1, "unknown type"},
        {{{.name = "a", .short_name = 'q', .type = HS_OPT_INT},
          {.name = "b", .short_name = 'q', .type = HS_OPT_INT}},
         2,
         "-q"},
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(cases); i++) {
        hs_cfg_spec_t s = {.options = cases[i].o, .n_options = cases[i].n};
        hs_cfg_t *cfg = (hs_cfg_t *)1;
        ck_assert_int_eq(hs_cfg_create(&cfg, &s), -EINVAL);
        ck_assert_ptr_null(cfg);
        assert_error_has(cases[i].expect, NULL);
    }
}

/* hs_algo_register (hearsay/algo.h): the table is checked; a registered algorithm is found
 * like a built-in; its options resolve per run, a bad or unknown one named. */
static int dummy_init(hs_algo_t **out, hs_dist_t *d)
{
    (void)d;
    *out = NULL;
    return 0;
}
static int dummy_step(hs_algo_t *a, long t)
{
    (void)a;
    (void)t;
    return 0;
}
static int dummy_drain(hs_algo_t *a, int final)
{
    (void)a;
    (void) final;
    return 0;
}
static void dummy_finalize(hs_algo_t **a)
{
    (void)a;
}

static void register_fails(const hs_algo_ops_t *ops, const char *needle)
{
    ck_assert_int_lt(hs_algo_register(ops), 0);
    ck_assert_msg(strstr(hs_last_error(), needle), "'%s' lacks '%s'", hs_last_error(), needle);
    hs_error_clear();
}

START_TEST(test_algo_register)
{
    static const hs_option_t opts[] = {
        {.name = "ex-rate", .type = HS_OPT_DOUBLE, .def = "0.5", .range = "(0, 1]", .help = "r"},
        {.name = "tau", .type = HS_OPT_INT, .def = "3", .range = "[1, 64]", .help = "t"},
    };
    hs_algo_ops_t ok = {.size = sizeof(hs_algo_ops_t),
                        .name = "dummy",
                        .options = opts,
                        .n_options = 2,
                        .init = dummy_init,
                        .step = dummy_step,
                        .drain = dummy_drain,
                        .finalize = dummy_finalize};
    hs_algo_ops_t bad = ok;
    bad.size = sizeof(hs_algo_ops_t) - 8;
    register_fails(&bad, "built against other headers");
    bad = ok;
    bad.name = "sgp";
    register_fails(&bad, "--algo sgp is registered already");
    bad = ok;
    bad.step = NULL;
    register_fails(&bad, "init, step, drain and finalize are required");
    static const hs_option_t clash[] = {{.name = "tau", .type = HS_OPT_DOUBLE, .def = "1"}};
    bad = ok;
    bad.options = clash;
    bad.n_options = 1;
    register_fails(&bad, "option --tau differs from --algo osgp's");
    static const hs_option_t outside[] = {
        {.name = "ex-rate", .type = HS_OPT_DOUBLE, .def = "2", .range = "(0, 1]"}};
    bad = ok;
    bad.options = outside;
    bad.n_options = 1;
    register_fails(&bad, "--algo dummy: its option table");
    ck_assert_ptr_null(hs_algo_find("dummy"));

    ck_assert_int_eq(hs_algo_register(&ok), 0);
    ck_assert_ptr_eq(hs_algo_find("dummy"), &ok);
    ck_assert_msg(strstr(hs_algo_names(), "|qsgp|dummy"), "names: %s", hs_algo_names());
    int last = 0;
    while (hs_algo_at(last + 1)) last++;
    ck_assert_ptr_eq(hs_algo_at(last), &ok);
    register_fails(&ok, "registered already");

    /* per run: defaults, given values, refusals naming the option */
    hs_cfg_spec_t spec;
    hs_cfg_t *cfg = NULL;
    ck_assert_int_eq(hs_algo_cfg_create(&cfg, &spec, &ok, NULL, 0), 0);
    ck_assert(hs_cfg_double(cfg, "ex-rate") == 0.5);
    ck_assert_int_eq(hs_cfg_int(cfg, "tau"), 3);
    hs_cfg_free(&cfg);
    const char *given[] = {"ex_rate=0.25", "tau=5"};
    ck_assert_int_eq(hs_algo_cfg_create(&cfg, &spec, &ok, given, 2), 0);
    ck_assert(hs_cfg_double(cfg, "ex-rate") == 0.25);
    ck_assert_int_eq(hs_cfg_int(cfg, "tau"), 5);
    ck_assert_int_eq(hs_cfg_source(cfg, "tau"), HS_CFG_FLAG);
    hs_cfg_free(&cfg);
    const char *unknown[] = {"alpha=0.1"};
    ck_assert_int_eq(hs_algo_cfg_create(&cfg, &spec, &ok, unknown, 1), -EINVAL);
    ck_assert_msg(strstr(hs_last_error(), "--alpha: --algo dummy has no such option"), "%s",
                  hs_last_error());
    const char *range[] = {"ex-rate=3"};
    ck_assert_int_eq(hs_algo_cfg_create(&cfg, &spec, &ok, range, 1), -EINVAL);
    ck_assert_msg(strstr(hs_last_error(), "ex-rate") && strstr(hs_last_error(), "(0, 1]"), "%s",
                  hs_last_error());
    const char *noeq[] = {"tau"};
    ck_assert_int_eq(hs_algo_cfg_create(&cfg, &spec, &ok, noeq, 1), -EINVAL);
    ck_assert_ptr_null(cfg);
    hs_error_clear();
}
END_TEST
END_TEST

int main(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_precedence);
    tcase_add_test(tc, test_flag_forms);
    tcase_add_test(tc, test_bad_values);
    tcase_add_test(tc, test_unknown_flags);
    tcase_add_test(tc, test_help_request);
    tcase_add_test(tc, test_positional_and_rest);
    tcase_add_test(tc, test_file_syntax);
    tcase_add_test(tc, test_file_errors);
    tcase_add_test(tc, test_file_size_bound);
    tcase_add_test(tc, test_lists);
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_help_text);
    tcase_add_test(tc, test_bad_tables);
    tcase_add_test(tc, test_algo_register);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
