/*
 * tests/test_launch.c — start-up and launch through `hearsay run`, Slurm-style and mpirun.
 *
 * Multi-process tests start the built `hearsay` ($HS_BIN) around tests/launch_worker and
 * assert on exit statuses, output lines and timings; every wait is bounded and every process
 * group started here is killed at the end. In-process tests of hs_boot and the rendezvous
 * server are in tests/test_rendezvous.c.
 */
#include "config.h"
#include "hearsay/common.h"

#include <check.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_bin[PATH_MAX];    /* hearsay */
static char g_worker[PATH_MAX]; /* tests/launch_worker */

/* ---------------------------------------------------------------- running a job */

typedef struct job {
    pid_t pid;
    int fd; /* merged stdout + stderr */
    char *out;
    size_t len, cap;
    int status; /* exit status, 128+sig, or -1 when it had to be killed */
    double t0, elapsed;
} job_t;

/* Process groups started by this test, killed at exit even when an assertion fails first. */
static pid_t g_groups[32];

static void kill_groups(void)
{
    for (size_t i = 0; i < HS_ARRAY_LEN(g_groups); i++)
        if (g_groups[i] > 0) kill(-g_groups[i], SIGKILL);
}

static void track_group(pid_t pid, int add)
{
    static int registered;
    if (!registered) registered = atexit(kill_groups) == 0;
    for (size_t i = 0; i < HS_ARRAY_LEN(g_groups); i++)
        if (add ? g_groups[i] == 0 : g_groups[i] == pid) {
            g_groups[i] = add ? pid : 0;
            return;
        }
}

static void job_start(job_t *j, const char *const *args)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    memset(j, 0, sizeof *j);
    j->t0 = hs_now();
    j->pid = fork();
    ck_assert_int_ge(j->pid, 0);
    if (j->pid == 0) {
        setpgid(0, 0);
        dup2(p[1], 1);
        dup2(p[1], 2);
        close(p[0]);
        close(p[1]);
        execv(args[0], (char *const *)args);
        _exit(126);
    }
    setpgid(j->pid, j->pid);
    track_group(j->pid, 1);
    close(p[1]);
    j->fd = p[0];
    j->cap = 1 << 16;
    j->out = calloc(1, j->cap);
}

/* Read output until `needle` appears `count` times or the limit passes; 1 when it did. */
static int job_read_until(job_t *j, const char *needle, int count, double limit_s)
{
    double end = hs_now() + limit_s;
    for (;;) {
        int seen = 0;
        for (const char *q = needle ? strstr(j->out, needle) : NULL; q; q = strstr(q + 1, needle))
            seen++;
        if (needle && seen >= count) return 1;
        double left = end - hs_now();
        if (left <= 0 || j->fd < 0) return 0;
        struct pollfd pf = {.fd = j->fd, .events = POLLIN};
        if (poll(&pf, 1, (int)(left * 1000) + 1) <= 0) continue;
        if (j->len + 4096 >= j->cap) {
            j->cap *= 2;
            j->out = realloc(j->out, j->cap);
        }
        ssize_t n = read(j->fd, j->out + j->len, j->cap - j->len - 1);
        if (n <= 0) {
            close(j->fd);
            j->fd = -1;
            if (!needle) return 1;
            continue;
        }
        j->len += (size_t)n;
        j->out[j->len] = '\0';
    }
}

/* Collect the rest of the output and the exit status, within limit_s; then kill the group. */
static void job_finish(job_t *j, double limit_s)
{
    double end = hs_now() + limit_s;
    job_read_until(j, NULL, 0, limit_s);
    int st = 0;
    j->status = -1;
    while (hs_now() < end) {
        pid_t w = waitpid(j->pid, &st, WNOHANG);
        if (w == j->pid) {
            j->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            break;
        }
        hs_sleep(0.02);
    }
    j->elapsed = hs_now() - j->t0;
    kill(-j->pid, SIGKILL);
    track_group(j->pid, 0);
    if (j->status == -1) waitpid(j->pid, &st, 0);
    if (j->fd >= 0) close(j->fd);
    j->fd = -1;
}

static void job_run(job_t *j, const char *const *args, double limit_s)
{
    job_start(j, args);
    job_finish(j, limit_s);
}

#define ASSERT_HAS(j, s)                                                                           \
    ck_assert_msg(strstr((j)->out, (s)) != NULL, "expected \"%s\" in the output:\n%s", (s),        \
                  (j)->out)
#define ASSERT_LACKS(j, s)                                                                         \
    ck_assert_msg(strstr((j)->out, (s)) == NULL, "did not expect \"%s\" in the output:\n%s", (s),  \
                  (j)->out)

static void find_programs(void)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    ck_assert_int_gt(n, 0);
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    *slash = '\0';
    size_t l = strlen(exe);
    if (l > 6 && !strcmp(exe + l - 6, "/.libs")) exe[l - 6] = '\0'; /* libtool's real binary */
    snprintf(g_worker, sizeof g_worker, "%s/launch_worker", exe);
    const char *b = getenv("HS_BIN");
    if (b && *b)
        snprintf(g_bin, sizeof g_bin, "%s", b);
    else
        snprintf(g_bin, sizeof g_bin, "%s/../hearsay", exe);
    ck_assert_msg(access(g_bin, X_OK) == 0, "hearsay not found at %s (set HS_BIN)", g_bin);
    ck_assert_msg(access(g_worker, X_OK) == 0, "launch_worker not found at %s", g_worker);
}

/* ---------------------------------------------------------------- hearsay run */

START_TEST(test_run_allgather_4)
{
    find_programs();
    job_t j;
    const char *args[] = {g_bin, "run", "-n",     "4",      "--timeout",
                          "20",  "--",  g_worker, "gather", NULL};
    job_run(&j, args, 30);
    ck_assert_msg(j.status == 0, "status %d, output:\n%s", j.status, j.out);
    char want[128];
    for (int r = 0; r < 4; r++) {
        snprintf(want, sizeof want, "[%d] rank %d of 4 ok via hearsay-run\n", r, r);
        ASSERT_HAS(&j, want);
        snprintf(want, sizeof want, "[%d] stderr line from %d\n", r, r);
        ASSERT_HAS(&j, want);
        snprintf(want, sizeof want, "[%d] partial %d\n", r, r); /* flushed at exit */
        ASSERT_HAS(&j, want);
    }
    /* Every line carries a rank prefix: nothing else was printed. */
    int lines = 0;
    for (char *line = j.out; *line; lines++) {
        ck_assert_msg(line[0] == '[' && line[1] >= '0' && line[1] <= '3' && line[2] == ']' &&
                          line[3] == ' ',
                      "unprefixed line in:\n%s", j.out);
        char *nl = strchr(line, '\n');
        ck_assert_ptr_nonnull(nl);
        line = nl + 1;
    }
    ck_assert_int_eq(lines, 12);
    free(j.out);
}
END_TEST

START_TEST(test_run_hearsay_resolves_to_self)
{
    find_programs();
    job_t j;
    const char *args[] = {g_bin, "run", "-n", "2", "hearsay", "--version", NULL};
    job_run(&j, args, 20);
    ck_assert_msg(j.status == 0, "status %d, output:\n%s", j.status, j.out);
    ASSERT_HAS(&j, "[0] hearsay ");
    ASSERT_HAS(&j, "[1] hearsay ");
    free(j.out);
}
END_TEST

/* Parse "rank R sleeping pid P" lines; check those processes are gone. */
static void assert_sleepers_gone(const job_t *j, int expect)
{
    int found = 0;
    for (const char *q = strstr(j->out, "sleeping pid "); q; q = strstr(q + 1, "sleeping pid ")) {
        pid_t p = (pid_t)atoi(q + strlen("sleeping pid "));
        ck_assert_int_gt(p, 1);
        /* Reaped by the launcher: no such process (or a zombie of another parent, never). */
        ck_assert_msg(kill(p, 0) < 0 && errno == ESRCH, "worker pid %d still alive", (int)p);
        found++;
    }
    ck_assert_int_eq(found, expect);
}

START_TEST(test_run_failure_ends_others)
{
    find_programs();
    job_t j;
    const char *args[] = {g_bin,    "run",  "-n", "4", "--grace", "2",
                          g_worker, "fail", "2",  "3", NULL};
    job_start(&j, args);
    /* Let everyone reach its sleep, so that the others must really be ended. */
    job_read_until(&j, "sleeping pid", 3, 20);
    job_finish(&j, 20);
    ck_assert_msg(j.status == 3, "status %d, output:\n%s", j.status, j.out);
    ASSERT_HAS(&j, "hearsay run: rank 2 exited with status 3\n");
    ASSERT_HAS(&j, "ending the other 3 ranks");
    ASSERT_LACKS(&j, "woke up");
    ck_assert_msg(j.elapsed < 10, "took %.1f s (the others sleep 60 s)", j.elapsed);
    assert_sleepers_gone(&j, 3);
    free(j.out);
}
END_TEST

START_TEST(test_run_killed_by_signal)
{
    find_programs();
    job_t j;
    const char *args[] = {
        g_bin,     "run",     "-n",
        "3",       "--grace", "1",
        "/bin/sh", "-c",      "if [ \"$HS_RANK\" = 1 ]; then kill -KILL $$; fi; exec sleep 60",
        NULL};
    job_run(&j, args, 20);
    ck_assert_msg(j.status == 128 + SIGKILL, "status %d, output:\n%s", j.status, j.out);
    ASSERT_HAS(&j, "hearsay run: rank 1 killed by signal SIGKILL\n");
    ck_assert_msg(j.elapsed < 10, "took %.1f s", j.elapsed);
    free(j.out);
}
END_TEST

START_TEST(test_run_forwards_sigterm)
{
    find_programs();
    job_t j;
    const char *args[] = {g_bin, "run", "-n", "3", g_worker, "sigwait", NULL};
    job_start(&j, args);
    ck_assert_msg(job_read_until(&j, "] ready\n", 3, 20), "workers not ready:\n%s", j.out);
    double t = hs_now();
    kill(j.pid, SIGTERM);
    job_finish(&j, 20);
    ck_assert_msg(j.status == 0, "status %d, output:\n%s", j.status, j.out);
    ASSERT_HAS(&j, "forwarding SIGTERM to 3 workers");
    ASSERT_HAS(&j, "[0] got SIGTERM\n");
    ASSERT_HAS(&j, "[1] got SIGTERM\n");
    ASSERT_HAS(&j, "[2] got SIGTERM\n");
    ck_assert_double_lt(hs_now() - t, 10);
    free(j.out);
}
END_TEST

START_TEST(test_run_second_signal_kills)
{
    find_programs();
    job_t j;
    /* Workers that ignore SIGINT: the first one is forwarded, the second kills them. */
    const char *args[] = {
        g_bin, "run", "-n", "2", "/bin/sh", "-c", "trap '' INT; echo ready; exec sleep 60", NULL};
    job_start(&j, args);
    ck_assert_msg(job_read_until(&j, "] ready\n", 2, 20), "workers not ready:\n%s", j.out);
    kill(j.pid, SIGINT);
    ck_assert_msg(job_read_until(&j, "forwarding SIGINT to 2 workers", 1, 10), "%s", j.out);
    hs_sleep(0.3);
    kill(j.pid, SIGINT);
    job_finish(&j, 20);
    ck_assert_msg(j.status == 128 + SIGKILL, "status %d, output:\n%s", j.status, j.out);
    ASSERT_HAS(&j, "SIGINT again: killing every worker");
    ck_assert_msg(j.elapsed < 15, "took %.1f s", j.elapsed);
    free(j.out);
}
END_TEST

START_TEST(test_run_wrong_key_connection_rejected)
{
    find_programs();
    const char *modes[] = {"rawkey", "garbage"};
    const char *why[] = {"bad job key", "bad magic"};
    for (int m = 0; m < 2; m++) {
        job_t j;
        const char *args[] = {g_bin, "run", "-n", "4", "--timeout", "20", g_worker, modes[m], NULL};
        job_run(&j, args, 30);
        /* The intruder is rejected with a log line; the job itself completes. */
        ck_assert_msg(j.status == 0, "status %d, output:\n%s", j.status, j.out);
        ASSERT_HAS(&j, "hearsay run: rejected connection from 127.0.0.1:");
        ASSERT_HAS(&j, why[m]);
        char want[128];
        snprintf(want, sizeof want, "[0] probe answer: '%s", why[m]);
        ASSERT_HAS(&j, want);
        ASSERT_HAS(&j, "then closed");
        for (int r = 0; r < 4; r++) {
            snprintf(want, sizeof want, "[%d] rank %d of 4 ok", r, r);
            ASSERT_HAS(&j, want);
        }
        free(j.out);
    }
}
END_TEST

START_TEST(test_run_tampered_key_fails_cleanly)
{
    find_programs();
    job_t j;
    const char *args[] = {g_bin, "run", "-n", "3", "--grace", "1", g_worker, "tamper", "1", NULL};
    job_run(&j, args, 30);
    ck_assert_msg(j.status == 1, "status %d, output:\n%s", j.status, j.out);
    ASSERT_HAS(&j, "rejected connection from 127.0.0.1:");
    ASSERT_HAS(&j, "[1] rank 1: ERROR: hs_boot_init: rank 1: rendezvous at 127.0.0.1:");
    ASSERT_HAS(&j, ": bad job key\n");
    ASSERT_HAS(&j, "hearsay run: rank 1 exited with status 1");
    ck_assert_msg(j.elapsed < 15, "took %.1f s", j.elapsed);
    free(j.out);
}
END_TEST

START_TEST(test_run_rendezvous_timeout_names_rank)
{
    find_programs();
    job_t j;
    const char *args[] = {g_bin,     "run", "-n",     "2",      "--timeout", "2",
                          "--grace", "1",   g_worker, "absent", "1",         NULL};
    job_run(&j, args, 30);
    ck_assert_msg(j.status == 1, "status %d, output:\n%s", j.status, j.out);
    ASSERT_HAS(&j, "rendezvous timeout after 2 s: rank 1 never connected");
    ASSERT_HAS(&j, "hearsay run: rank 0 exited with status 1");
    ck_assert_msg(j.elapsed > 1.5 && j.elapsed < 10, "took %.1f s for a 2 s bound", j.elapsed);
    free(j.out);
}
END_TEST

START_TEST(test_run_rank_vanishes_mid_startup)
{
    find_programs();
    job_t j;
    const char *args[] = {g_bin,     "run", "-n",     "3",      "--timeout", "20",
                          "--grace", "1",   g_worker, "vanish", "1",         NULL};
    job_run(&j, args, 30);
    ck_assert_msg(j.status == 1, "status %d, output:\n%s", j.status, j.out);
    ASSERT_HAS(&j, "rank 1 left the job");
    ASSERT_HAS(&j, "ERROR: allgather");
    ck_assert_msg(j.elapsed < 10, "took %.1f s: not detected promptly", j.elapsed);
    free(j.out);
}
END_TEST

START_TEST(test_run_usage_errors)
{
    find_programs();
    static const struct {
        const char *a[6];
        int status;
        const char *msg;
    } cases[] = {
        {{"-n", "0", "true"}, 2, "out of range"},
        {{"-n", "1025", "true"}, 2, "out of range"},
        {{"-n", "x", "true"}, 2, "-n"},
        {{"-n", "2"}, 2, "missing COMMAND"},
        {{"true"}, 2, "number of workers is required"},
        {{"-n", "2", "--bogus", "true"}, 2, "unknown option '--bogus'"},
        {{"-n", "2", "--timeout"}, 2, "needs a value"},
        {{"-n", "2", "no-such-command-xyz"}, 127, "command not found: no-such-command-xyz"},
        {{"-n", "2", "--bind", "203.0.113.77", "true"}, 1, "cannot listen on 203.0.113.77"},
        {{"--help"}, 0, "--rendezvous-only"},
    };
    for (size_t c = 0; c < HS_ARRAY_LEN(cases); c++) {
        const char *args[10] = {g_bin, "run"};
        int k = 2;
        for (int i = 0; i < 6 && cases[c].a[i]; i++) args[k++] = cases[c].a[i];
        job_t j;
        job_run(&j, args, 20);
        ck_assert_msg(j.status == cases[c].status, "case %zu: status %d, output:\n%s", c, j.status,
                      j.out);
        ASSERT_HAS(&j, cases[c].msg);
        free(j.out);
    }
    /* --help documents every option and variable. */
    const char *args[] = {g_bin, "run", "--help", NULL};
    job_t j;
    job_run(&j, args, 20);
    const char *doc[] = {"--bind",  "--port", "--timeout",  "--no-prefix", "--grace", "HS_RANK",
                         "HS_SIZE", "HS_RDV", "HS_JOB_KEY", "SIGTERM",     "[rank] "};
    for (size_t i = 0; i < HS_ARRAY_LEN(doc); i++) ASSERT_HAS(&j, doc[i]);
    free(j.out);
}
END_TEST

/* Slurm design: a rendezvous-only launcher, and tasks that know only SLURM_PROCID/NTASKS. */
START_TEST(test_slurm_with_rendezvous_only)
{
    find_programs();
    char envfile[] = "/tmp/hs_test_rdv_XXXXXX";
    int efd = mkstemp(envfile);
    ck_assert_int_ge(efd, 0);
    close(efd);
    unlink(envfile);
    job_t srv;
    const char *args[] = {g_bin,       "run", "--rendezvous-only", "-n",    "2",
                          "--timeout", "20",  "--env-file",        envfile, NULL};
    job_start(&srv, args);
    ck_assert_msg(job_read_until(&srv, "HS_BOOT_TIMEOUT=", 1, 20), "no env printed:\n%s", srv.out);
    FILE *f = fopen(envfile, "r");
    ck_assert_ptr_nonnull(f);
    char line[256], rdv[128] = "", key[64] = "";
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (!strncmp(line, "HS_RDV=", 7)) snprintf(rdv, sizeof rdv, "%s", line + 7);
        if (!strncmp(line, "HS_JOB_KEY=", 11)) snprintf(key, sizeof key, "%s", line + 11);
    }
    fclose(f);
    unlink(envfile);
    ck_assert(strstr(srv.out, rdv) != NULL && strlen(key) == 32);
    pid_t kids[2];
    int fds[2];
    for (int r = 0; r < 2; r++) {
        int p[2];
        ck_assert_int_eq(pipe(p), 0);
        kids[r] = fork();
        if (kids[r] == 0) {
            setpgid(0, 0);
            char pr[8];
            snprintf(pr, sizeof pr, "%d", r);
            unsetenv("HS_RANK");
            unsetenv("HS_SIZE");
            setenv("SLURM_PROCID", pr, 1);
            setenv("SLURM_NTASKS", "2", 1);
            setenv("HS_RDV", rdv, 1);
            setenv("HS_JOB_KEY", key, 1);
            dup2(p[1], 1);
            dup2(p[1], 2);
            alarm(30);
            execl(g_worker, g_worker, "gather", (char *)NULL);
            _exit(126);
        }
        setpgid(kids[r], kids[r]);
        track_group(kids[r], 1);
        close(p[1]);
        fds[r] = p[0];
    }
    for (int r = 0; r < 2; r++) {
        job_t k = {.pid = kids[r], .fd = fds[r], .cap = 1 << 14, .t0 = hs_now()};
        k.out = calloc(1, k.cap);
        job_finish(&k, 30);
        ck_assert_msg(k.status == 0, "task %d: status %d:\n%s", r, k.status, k.out);
        char want[64];
        snprintf(want, sizeof want, "rank %d of 2 ok via slurm", r);
        ASSERT_HAS(&k, want);
        free(k.out);
    }
    /* Every rank left: the rendezvous-only launcher ends by itself, successfully. */
    job_finish(&srv, 20);
    ck_assert_msg(srv.status == 0, "rendezvous-only status %d:\n%s", srv.status, srv.out);
    free(srv.out);
}
END_TEST

/* Under Open MPI's mpirun (only where hearsay is built with MPI and mpirun exists). */
START_TEST(test_mpirun_allgather)
{
    find_programs();
    char mpirun[PATH_MAX] = "";
    const char *path = getenv("PATH");
    for (const char *p = path ? path : ""; *p;) {
        const char *end = strchr(p, ':');
        int dl = end ? (int)(end - p) : (int)strlen(p);
        snprintf(mpirun, sizeof mpirun, "%.*s/mpirun", dl, p);
        if (access(mpirun, X_OK) == 0) break;
        mpirun[0] = '\0';
        if (!end) break;
        p = end + 1;
    }
    if (!HS_HAVE_MPI || !mpirun[0]) {
        printf("test_mpirun_allgather: skipped (%s)\n",
               HS_HAVE_MPI ? "no mpirun in PATH" : "hearsay built without MPI");
        return;
    }
    job_t j;
    const char *args[] = {
        mpirun, "--allow-run-as-root", "--oversubscribe", "-n", "2", g_worker, "gather", NULL};
    job_run(&j, args, 90);
    ck_assert_msg(j.status == 0, "status %d, output:\n%s", j.status, j.out);
    ASSERT_HAS(&j, "rank 0 of 2 ok via mpi");
    ASSERT_HAS(&j, "rank 1 of 2 ok via mpi");
    free(j.out);
}
END_TEST

static Suite *launch_suite(void)
{
    Suite *s = suite_create("launch");
    TCase *tc = tcase_create("hearsay_run");
    tcase_set_timeout(tc, 100);
    tcase_add_test(tc, test_run_allgather_4);
    tcase_add_test(tc, test_run_hearsay_resolves_to_self);
    tcase_add_test(tc, test_run_failure_ends_others);
    tcase_add_test(tc, test_run_killed_by_signal);
    tcase_add_test(tc, test_run_forwards_sigterm);
    tcase_add_test(tc, test_run_second_signal_kills);
    tcase_add_test(tc, test_run_wrong_key_connection_rejected);
    tcase_add_test(tc, test_run_tampered_key_fails_cleanly);
    tcase_add_test(tc, test_run_rendezvous_timeout_names_rank);
    tcase_add_test(tc, test_run_rank_vanishes_mid_startup);
    tcase_add_test(tc, test_run_usage_errors);
    tcase_add_test(tc, test_slurm_with_rendezvous_only);
    tcase_add_test(tc, test_mpirun_allgather);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    SRunner *sr = srunner_create(launch_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
