/* tests/test_env.c — the table of environment variables (util/env.c) and its readers. */
#include "hearsay/allreduce.h"
#include "hearsay/common.h"
#include "hearsay/env.h"
#include "hearsay/transport.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Unset every variable of the table, so the process's own environment cannot interfere. */
static void clear_env(void)
{
    size_t n;
    const hs_env_var_t *t = hs_env_table(&n);
    for (size_t i = 0; i < n; i++) unsetenv(t[i].name);
}

START_TEST(test_table_is_well_formed)
{
    size_t n;
    const hs_env_var_t *t = hs_env_table(&n);
    ck_assert_uint_gt(n, 20);
    clear_env();
    for (size_t i = 0; i < n; i++) {
        const char *name = t[i].name;
        ck_assert_msg(!strncmp(name, "HS_", 3) || !strncmp(name, "HEARSAY_", 8), "%s", name);
        ck_assert_msg(t[i].help && strlen(t[i].help) > 10, "%s has no help", name);
        ck_assert_ptr_eq(hs_env_lookup(name), &t[i]);
        for (size_t j = 0; j < i; j++) ck_assert_str_ne(t[j].name, name);
        /* Every default reads back as a value of its type, within its range. */
        long l = -12345;
        double d = -12345;
        int b = -12345;
        switch (t[i].type) {
        case HS_ENV_INT:
        case HS_ENV_SIZE:
            ck_assert_msg(t[i].lo <= t[i].hi, "%s: range", name);
            ck_assert_int_eq(hs_env_long(name, &l), 0);
            if (t[i].def)
                ck_assert_msg(l >= t[i].lo && l <= t[i].hi, "%s: default %ld", name, l);
            else
                ck_assert_int_eq(l, -12345);
            break;
        case HS_ENV_DOUBLE:
            ck_assert_msg(t[i].lo <= t[i].hi, "%s: range", name);
            ck_assert_int_eq(hs_env_double(name, &d), 0);
            if (t[i].def) ck_assert_msg(d >= t[i].lo && d <= t[i].hi, "%s: default", name);
            break;
        case HS_ENV_BOOL:
            ck_assert_int_eq(hs_env_bool(name, &b), 0);
            if (t[i].def) ck_assert_msg(b == 0 || b == 1, "%s: default", name);
            break;
        case HS_ENV_STRING:
            if (t[i].def)
                ck_assert_str_eq(hs_env_str(name), t[i].def);
            else
                ck_assert_ptr_null(hs_env_str(name));
            break;
        }
    }
    ck_assert_ptr_null(hs_env_lookup("HS_NO_SUCH_KNOB"));
    ck_assert_str_eq(hs_env_type_name(HS_ENV_SIZE), "size");
}
END_TEST

START_TEST(test_readers)
{
    clear_env();
    /* strings: the default when unset or empty */
    ck_assert_str_eq(hs_env_str("HS_PROVIDER"), "auto");
    setenv("HS_PROVIDER", "", 1);
    ck_assert_str_eq(hs_env_str("HS_PROVIDER"), "auto");
    setenv("HS_PROVIDER", "tcp", 1);
    ck_assert_str_eq(hs_env_str("HS_PROVIDER"), "tcp");
    ck_assert_ptr_null(hs_env_str("HS_SHAPING"));
    /* integers: 1 when set, 0 when unset (untouched without a default), errors name it */
    long l = 7;
    ck_assert_int_eq(hs_env_long("HS_CHUNK_BYTES", &l), 0);
    ck_assert_int_eq(l, 7);
    setenv("HS_CHUNK_BYTES", "8192", 1);
    ck_assert_int_eq(hs_env_long("HS_CHUNK_BYTES", &l), 1);
    ck_assert_int_eq(l, 8192);
    ck_assert_str_eq(hs_env_str("HS_CHUNK_BYTES"), "8192");
    setenv("HS_CHUNK_BYTES", "12", 1);
    ck_assert_int_eq(hs_env_long("HS_CHUNK_BYTES", &l), -EINVAL);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "HS_CHUNK_BYTES"));
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "out of range"));
    setenv("HS_CHUNK_BYTES", "4k", 1);
    ck_assert_int_eq(hs_env_long("HS_CHUNK_BYTES", &l), -EINVAL);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "'4k' is not an integer"));
    ck_assert_int_eq(l, 8192);
    setenv("HS_AR_DEPTH", "", 1);
    l = 7;
    ck_assert_int_eq(hs_env_long("HS_AR_DEPTH", &l), 0);
    ck_assert_int_eq(l, 0); /* the table's default */
    /* numbers */
    double d = 0;
    ck_assert_int_eq(hs_env_double("HS_TIMEOUT", &d), 0);
    ck_assert_double_eq(d, 60);
    setenv("HS_TIMEOUT", "2.5", 1);
    ck_assert_int_eq(hs_env_double("HS_TIMEOUT", &d), 1);
    ck_assert_double_eq(d, 2.5);
    setenv("HS_TIMEOUT", "soon", 1);
    ck_assert_int_eq(hs_env_double("HS_TIMEOUT", &d), -EINVAL);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "HS_TIMEOUT: 'soon'"));
    /* booleans */
    int b = -1;
    ck_assert_int_eq(hs_env_bool("HS_PROGRESS_THREAD", &b), 0);
    ck_assert_int_eq(b, 0);
    const char *yes[] = {"1", "true", "YES", "on"}, *no[] = {"0", "False", "no", "OFF"};
    for (int i = 0; i < 4; i++) {
        setenv("HS_PROGRESS_THREAD", yes[i], 1);
        ck_assert_int_eq(hs_env_bool("HS_PROGRESS_THREAD", &b), 1);
        ck_assert_int_eq(b, 1);
        setenv("HS_PROGRESS_THREAD", no[i], 1);
        ck_assert_int_eq(hs_env_bool("HS_PROGRESS_THREAD", &b), 1);
        ck_assert_int_eq(b, 0);
    }
    setenv("HS_PROGRESS_THREAD", "2", 1);
    ck_assert_int_eq(hs_env_bool("HS_PROGRESS_THREAD", &b), -EINVAL);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "HS_PROGRESS_THREAD: '2' is not a boolean"));
    /* switches never fail */
    ck_assert_int_eq(hs_env_flag("HS_SHM_QUIET"), 0);
    setenv("HS_SHM_QUIET", "1", 1);
    ck_assert_int_eq(hs_env_flag("HS_SHM_QUIET"), 1);
    setenv("HS_SHM_QUIET", "off", 1);
    ck_assert_int_eq(hs_env_flag("HS_SHM_QUIET"), 0);
    setenv("HS_SHM_QUIET", "please", 1);
    ck_assert_int_eq(hs_env_flag("HS_SHM_QUIET"), 1);
    clear_env();
}
END_TEST

/* The table's defaults are the ones the code applies. */
START_TEST(test_defaults_match_the_code)
{
    clear_env();
    hs_transport_opts_t o;
    ck_assert_int_eq(hs_transport_opts_default(&o), 0);
    ck_assert_str_eq(o.provider, hs_env_lookup("HS_PROVIDER")->def);
    ck_assert_double_eq(o.timeout_s, atof(hs_env_lookup("HS_TIMEOUT")->def));
    ck_assert_int_eq(o.progress_thread, atoi(hs_env_lookup("HS_PROGRESS_THREAD")->def));
    ck_assert_ptr_null(o.shaping);
    ck_assert_uint_eq(o.chunk_bytes, 0);
    hs_allreduce_opts_t a;
    ck_assert_int_eq(hs_allreduce_opts_default(&a), 0);
    ck_assert_uint_eq(a.chunk_bytes, strtoul(hs_env_lookup("HS_AR_CHUNK_BYTES")->def, NULL, 10));
    ck_assert_int_eq(a.depth, atoi(hs_env_lookup("HS_AR_DEPTH")->def));
    ck_assert_int_eq(a.path, HS_AR_PATH_AUTO);
    /* and a bad value reaches the caller naming the variable */
    setenv("HS_TIMEOUT", "-1", 1);
    ck_assert_int_eq(hs_transport_opts_default(&o), -EINVAL);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "HS_TIMEOUT"));
    setenv("HS_AR_DEPTH", "many", 1);
    ck_assert_int_eq(hs_allreduce_opts_default(&a), -EINVAL);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "HS_AR_DEPTH"));
    clear_env();
}
END_TEST

/* Reading a variable the table lacks is a bug: the process aborts. (Some libraries linked
 * in, e.g. libfabric's psm providers, install a SIGABRT handler that exits 1 instead.) */
START_TEST(test_undeclared_aborts)
{
    signal(SIGABRT, SIG_DFL);
    hs_env_str("HS_NO_SUCH_KNOB");
}
END_TEST

START_TEST(test_wrong_type_aborts)
{
    long l;
    signal(SIGABRT, SIG_DFL);
    hs_env_long("HS_PROVIDER", &l);
}
END_TEST

/* hearsay --help-env lists every variable of the table, and hearsay --help mentions it. */
START_TEST(test_help_env)
{
    const char *bin = getenv("HS_BIN");
    if (!bin) {
        fprintf(stderr, "test_help_env: HS_BIN is not set (run through make check); skipped\n");
        return;
    }
    char cmd[4096], *out = NULL;
    size_t cap = 0;
    snprintf(cmd, sizeof cmd, "'%s' --help-env", bin);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    FILE *m = open_memstream(&out, &cap);
    char line[1024];
    while (fgets(line, sizeof line, p)) fputs(line, m);
    fclose(m);
    ck_assert_int_eq(pclose(p), 0);
    size_t n;
    const hs_env_var_t *t = hs_env_table(&n);
    for (size_t i = 0; i < n; i++) {
        char want[128];
        snprintf(want, sizeof want, "\n%s ", t[i].name);
        ck_assert_msg(strstr(out, want), "hearsay --help-env does not list %s", t[i].name);
    }
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' --help | grep -q -- --help-env", bin);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("env");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_table_is_well_formed);
    tcase_add_test(tc, test_readers);
    tcase_add_test(tc, test_defaults_match_the_code);
    tcase_add_test_raise_signal(tc, test_undeclared_aborts, SIGABRT);
    tcase_add_test_raise_signal(tc, test_wrong_type_aborts, SIGABRT);
    tcase_add_test(tc, test_help_env);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
