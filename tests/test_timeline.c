/*
 * tests/test_timeline.c — the timeline's module (hearsay/trace.h, util/trace.c) on a clock the
 * test sets: spans become complete events with the right times, an end closes the spans
 * opened inside its own, a span left open ends at the thread's last event, a stray end is
 * dropped; flows pair each apply with the oldest send of the same id (identical messages
 * included) and leave out ends without a partner; threads get their own tracks; parts that
 * are not parts, are truncated or repeat a rank are refused by name; --trace paths that
 * cannot be written are refused by name and the check leaves nothing behind.
 */
#include "hearsay/common.h"
#include "hearsay/exec.h"
#include "hearsay/trace.h"
#include "hearsay/transport.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static double clk; /* the fake environment's clock (s) */

static double fake_now(hs_exec_t *x)
{
    (void)x;
    return clk;
}

static const hs_exec_ops_t fake_ops = {.size = sizeof(hs_exec_ops_t),
                                       .name = "virtual",
                                       .now = fake_now,
                                       .caps = HS_EXEC_VIRTUAL_CLOCK};

static char dir[256];

static void make_dir(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/hs_timeline_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void remove_dir(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(fread(b, 1, (size_t)n, f), n);
    b[n] = '\0';
    fclose(f);
    return b;
}

static int count(const char *hay, const char *needle)
{
    int c = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++) c++;
    return c;
}

/* A send of msg from rank `me` to `to` with tag 5, at clk, lasting 1 us. */
static void send_at(double t, int me, int to, const void *msg, size_t len)
{
    clk = t;
    hs_trace_thr_t *th = hs_trace_self();
    ck_assert_ptr_nonnull(th);
    hs_trace_thr_ev(th, 'B', HS_TR_SEND, to, hs_trace_flow_id(me, to, 5, msg, len), (int64_t)len);
    clk = t + 1e-6;
    hs_trace_thr_ev(th, 'E', HS_TR_SEND, -1, 0, 0);
}

static void apply_at(hs_trace_t *tr, double t, int me, int from, const void *msg, size_t len)
{
    clk = t;
    hs_trace_apply_msg(tr, me, from, 5, msg, len);
    clk = t + 1e-6;
    hs_trace_end(tr, HS_TR_APPLY);
}

START_TEST(test_spans_and_flows)
{
    make_dir();
    char path[512], part[600];
    snprintf(path, sizeof path, "%s/t.json", dir);
    hs_exec_t x0 = {.ops = &fake_ops, .rank = 0, .size = 2};
    hs_exec_t x1 = {.ops = &fake_ops, .rank = 1, .size = 2};
    hs_trace_t *t0 = NULL, *t1 = NULL;
    ck_assert_int_eq(hs_trace_open(&t0, path, &x0, 0, 2), 0);
    ck_assert_int_eq(hs_trace_open(&t1, path, &x1, 1, 2), 0);
    float a[300], b[300];
    for (int i = 0; i < 300; i++) a[i] = b[i] = (float)i;
    b[150] = -1; /* differs from a only in the middle */
    ck_assert_uint_ne(hs_trace_flow_id(0, 1, 5, a, sizeof a),
                      hs_trace_flow_id(0, 1, 5, b, sizeof b));

    /* rank 0 (times in us from 10) */
    hs_trace_thread(t0, "training loop");
    clk = 10e-6;
    hs_trace_begin(t0, HS_TR_ITERATION, 7);
    send_at(11e-6, 0, 1, a, sizeof a);
    send_at(13e-6, 0, 1, a, sizeof a); /* the same bytes again: the same id */
    send_at(15e-6, 0, 1, b, sizeof b); /* never applied */
    clk = 20e-6;
    hs_trace_end(t0, HS_TR_ITERATION);
    clk = 30e-6;
    hs_trace_begin(t0, HS_TR_FINISH, 0); /* never ended */
    clk = 40e-6;
    hs_trace_end(t0, HS_TR_WAIT); /* an end without a begin */
    clk = 45e-6;
    hs_trace_begin(t0, HS_TR_STEP, 0);
    clk = 46e-6;
    hs_trace_begin(t0, HS_TR_WAIT, 0); /* closed by the step's end */
    clk = 50e-6;
    hs_trace_end(t0, HS_TR_STEP);

    /* rank 1, on the same thread (its own buffer) */
    hs_trace_thread(t1, "gossip receiver");
    apply_at(t1, 16e-6, 1, 0, a, sizeof a);
    apply_at(t1, 18e-6, 1, 0, a, sizeof a);
    ck_assert_int_eq(hs_trace_write_part(t0), 0);
    ck_assert_int_eq(hs_trace_write_part(t1), 0);
    hs_trace_close(&t0);
    hs_trace_close(&t1);
    ck_assert_ptr_null(hs_trace_self());

    ck_assert_int_eq(hs_trace_merge_run(path, 2, NULL, 0), 0);
    for (int r = 0; r < 2; r++) { /* merged: the parts are gone */
        hs_trace_part_name(part, sizeof part, path, r);
        ck_assert_int_ne(access(part, F_OK), 0);
    }
    char *j = slurp(path);
    ck_assert_msg(strstr(j, "\"traceEvents\":["), "%s", j);
    ck_assert(strstr(j, "\"args\":{\"name\":\"rank 1\"}"));
    ck_assert(
        strstr(j, "\"tid\":0,\"name\":\"thread_name\",\"args\":{\"name\":\"training loop\"}"));
    ck_assert(strstr(j, "\"args\":{\"name\":\"gossip receiver\"}"));
    ck_assert_msg(strstr(j,
                         "\"name\":\"iteration\",\"cat\":\"hearsay\",\"ts\":0.000,\"dur\":10.000,"
                         "\"args\":{\"iteration\":7}"),
                  "%s", j);
    /* left open: ends at the thread's last event (50 us, 40 from the first) */
    ck_assert(strstr(j, "\"name\":\"finish\",\"cat\":\"hearsay\",\"ts\":20.000,\"dur\":20.000"));
    ck_assert(strstr(j, "\"name\":\"step\",\"cat\":\"hearsay\",\"ts\":35.000,\"dur\":5.000"));
    /* the wait opened inside the step ends with it; the stray end made no span */
    ck_assert(strstr(j, "\"name\":\"wait\",\"cat\":\"hearsay\",\"ts\":36.000,\"dur\":4.000"));
    ck_assert_int_eq(count(j, "\"name\":\"wait\""), 1);
    ck_assert(strstr(j, "\"name\":\"send\",\"cat\":\"hearsay\",\"ts\":1.000,\"dur\":1.000,"
                        "\"args\":{\"to\":1,\"bytes\":1200}"));
    ck_assert(strstr(j, "\"name\":\"apply\",\"cat\":\"hearsay\",\"ts\":6.000,\"dur\":1.000,"
                        "\"args\":{\"from\":0,\"bytes\":1200}"));
    /* flows: 11 -> 16 us and 13 -> 18 us, the send at 15 us has no partner */
    ck_assert(strstr(j, "{\"ph\":\"s\",\"pid\":0,\"tid\":0,\"name\":\"message\",\"cat\":\"flow\","
                        "\"id\":1,\"ts\":1.000}"));
    ck_assert(strstr(j, "{\"ph\":\"f\",\"bp\":\"e\",\"pid\":1,\"tid\":0,\"name\":\"message\","
                        "\"cat\":\"flow\",\"id\":1,\"ts\":6.000}"));
    ck_assert(strstr(j, "\"id\":2,\"ts\":3.000}"));
    ck_assert(strstr(j, "\"id\":2,\"ts\":8.000}"));
    ck_assert_int_eq(count(j, "\"ph\":\"s\""), 2);
    ck_assert_int_eq(count(j, "\"ph\":\"f\""), 2);
    ck_assert_msg(strstr(j, "\"clock\":\"virtual\",\"ranks\":2,\"parts\":2,\"flows\":2,"
                            "\"unpaired_flow_ends\":1,\"dropped_events\":0"),
                  "%s", j);
    free(j);
    remove_dir();
}
END_TEST

typedef struct thr_arg {
    hs_trace_t *tr;
    const char *name;
} thr_arg_t;

static void *recorder(void *p)
{
    thr_arg_t *a = p;
    hs_trace_thread(a->tr, a->name);
    for (int i = 0; i < 5000; i++) { /* more than one chunk */
        hs_trace_begin(a->tr, HS_TR_COMPUTE, 0);
        hs_trace_end(a->tr, HS_TR_COMPUTE);
    }
    return NULL;
}

START_TEST(test_threads)
{
    make_dir();
    char path[512], part[600];
    snprintf(path, sizeof path, "%s/t.json", dir);
    hs_exec_t x = {.ops = &fake_ops, .rank = 0, .size = 1};
    hs_trace_t *tr = NULL;
    ck_assert_int_eq(hs_trace_open(&tr, path, &x, 0, 1), 0);
    clk = 1;
    hs_trace_begin(tr, HS_TR_EVAL, 3);
    pthread_t th[2];
    thr_arg_t args[2] = {{tr, "service one"}, {tr, "service two"}};
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, recorder, &args[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    clk = 2;
    hs_trace_end(tr, HS_TR_EVAL);
    ck_assert_int_eq(hs_trace_write_part(tr), 0);
    hs_trace_close(&tr);
    hs_trace_part_name(part, sizeof part, path, 0);
    /* by hand, into another file: a part converts alone */
    char out[600];
    snprintf(out, sizeof out, "%s/one.json", dir);
    const char *in[1] = {part};
    long unpaired = -1;
    ck_assert_int_eq(hs_trace_merge(out, in, 1, &unpaired), 0);
    ck_assert_int_eq(unpaired, 0);
    char *j = slurp(out);
    ck_assert_int_eq(count(j, "\"name\":\"compute\""), 10000);
    ck_assert_int_eq(count(j, "\"name\":\"thread_name\""), 3);
    ck_assert(strstr(j, "{\"name\":\"service one\"}"));
    ck_assert(strstr(j, "{\"name\":\"service two\"}"));
    ck_assert(strstr(j, "\"name\":\"evaluation\",\"cat\":\"hearsay\",\"ts\":0.000,"
                        "\"dur\":1000000.000,\"args\":{\"iteration\":3}"));
    free(j);
    remove_dir();
}
END_TEST

static void write_file(const char *path, const void *buf, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fwrite(buf, 1, n, f), n);
    fclose(f);
}

START_TEST(test_bad_parts)
{
    make_dir();
    char path[512], part[600], junk[600], cut[600], out[600];
    snprintf(path, sizeof path, "%s/t.json", dir);
    snprintf(junk, sizeof junk, "%s/junk", dir);
    snprintf(cut, sizeof cut, "%s/cut", dir);
    snprintf(out, sizeof out, "%s/out.json", dir);
    hs_exec_t x = {.ops = &fake_ops, .rank = 0, .size = 1};
    hs_trace_t *tr = NULL;
    ck_assert_int_eq(hs_trace_open(&tr, path, &x, 0, 1), 0);
    hs_trace_begin(tr, HS_TR_COMPUTE, 0);
    hs_trace_end(tr, HS_TR_COMPUTE);
    ck_assert_int_eq(hs_trace_write_part(tr), 0);
    hs_trace_close(&tr);
    hs_trace_part_name(part, sizeof part, path, 0);
    write_file(junk, "not a trace part, just some text long enough for a header....", 60);
    char *p = slurp(part);
    struct stat sb;
    ck_assert_int_eq(stat(part, &sb), 0);
    write_file(cut, p, (size_t)sb.st_size - 7);
    free(p);

    const char *a[1] = {junk};
    ck_assert_int_lt(hs_trace_merge(out, a, 1, NULL), 0);
    ck_assert_msg(strstr(hs_last_error(), "junk is not a Hearsay trace part"), "%s",
                  hs_last_error());
    const char *b[1] = {cut};
    ck_assert_int_lt(hs_trace_merge(out, b, 1, NULL), 0);
    ck_assert_msg(strstr(hs_last_error(), "cut: a truncated or corrupt trace part"), "%s",
                  hs_last_error());
    const char *c[2] = {part, part};
    ck_assert_int_lt(hs_trace_merge(out, c, 2, NULL), 0);
    ck_assert_msg(strstr(hs_last_error(), "both rank 0's"), "%s", hs_last_error());
    ck_assert_int_ne(access(out, F_OK), 0); /* nothing written on an error */
    remove_dir();
}
END_TEST

START_TEST(test_paths)
{
    make_dir();
    char path[512];
    ck_assert_int_lt(hs_trace_check_path(dir), 0); /* a directory */
    ck_assert_msg(strstr(hs_last_error(), "is a directory"), "%s", hs_last_error());
    snprintf(path, sizeof path, "%s/no/such/dir/t.json", dir);
    ck_assert_int_lt(hs_trace_check_path(path), 0);
    ck_assert_msg(strstr(hs_last_error(), path) && strstr(hs_last_error(), "does not exist"), "%s",
                  hs_last_error());
    ck_assert_int_lt(hs_trace_check_path(""), 0);
    snprintf(path, sizeof path, "%s/fifo", dir); /* refused at once, not waiting for a reader */
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    ck_assert_int_lt(hs_trace_check_path(path), 0);
    ck_assert_msg(strstr(hs_last_error(), "cannot write"), "%s", hs_last_error());
    unlink(path);
    snprintf(path, sizeof path, "%s/t.json", dir);
    ck_assert_int_eq(hs_trace_check_path(path), 0);
    ck_assert_int_ne(access(path, F_OK), 0); /* the check left nothing */
    char part[600];
    hs_trace_part_name(part, sizeof part, path, 0);
    ck_assert_int_ne(access(part, F_OK), 0);
    remove_dir();
}
END_TEST

/* Every rank of a job checks the same names at once (the path and rank 0's part): 4
 * processes doing so 2000 times each must all pass, and leave nothing behind. Before the check
 * stopped creating and removing the shared names, one rank's probe made another's check fail
 * ("its directory does not exist") in the CI run of 2026-11-24. */
START_TEST(test_paths_concurrent)
{
    make_dir();
    char path[512];
    snprintf(path, sizeof path, "%s/t.json", dir);
    pid_t kids[4];
    for (int k = 0; k < 4; k++) {
        kids[k] = fork();
        ck_assert_int_ge(kids[k], 0);
        if (kids[k] == 0) {
            for (int i = 0; i < 2000; i++)
                if (hs_trace_check_path(path) < 0) {
                    fprintf(stderr, "check %d of process %d: %s\n", i, k, hs_last_error());
                    _exit(1);
                }
            _exit(0);
        }
    }
    int failed = 0;
    for (int k = 0; k < 4; k++) {
        int st = 0;
        ck_assert_int_eq(waitpid(kids[k], &st, 0), kids[k]);
        failed += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    ck_assert_msg(failed == 0, "%d of 4 processes saw a check fail (stderr above)", failed);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s')\"", dir);
    ck_assert_msg(system(cmd) == 0, "the checks left files in %s", dir);
    remove_dir();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("timeline");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_spans_and_flows);
    tcase_add_test(tc, test_threads);
    tcase_add_test(tc, test_bad_parts);
    tcase_add_test(tc, test_paths);
    tcase_add_test(tc, test_paths_concurrent);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
