/*
 * tests/test_allreduce.c — the all-reduce (direct path on hsshm, ring over hsshm and tcp)
 * across processes started by `hearsay run`.
 *
 * Each test starts $HS_BIN run -n N around tests/allreduce_worker, which compares every
 * result with the sum it computes directly (see that file), and asserts on the exit status
 * and the lines every rank prints. Sizes: 1, 7, 1000 and ~3M floats on 2, 3 and 4 ranks
 * (1 and 7 are below or near the rank count: empty segments and chunks). The crash test
 * checks that when a rank dies the others get an error naming a peer within the bound,
 * instead of hanging.
 */
#include "hearsay/common.h"

#include <check.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_bin[PATH_MAX];
static char g_worker[PATH_MAX];

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
    snprintf(g_worker, sizeof g_worker, "%s/allreduce_worker", exe);
    const char *b = getenv("HS_BIN");
    if (b && *b)
        snprintf(g_bin, sizeof g_bin, "%s", b);
    else
        snprintf(g_bin, sizeof g_bin, "%s/../hearsay", exe);
    ck_assert_msg(access(g_bin, X_OK) == 0, "hearsay not found at %s (set HS_BIN)", g_bin);
    ck_assert_msg(access(g_worker, X_OK) == 0, "allreduce_worker not found at %s", g_worker);
}

typedef struct job {
    char *out;
    size_t len;
    int status; /* exit status, 128+signal, or -1 when it had to be killed */
    double elapsed;
} job_t;

/* Run args (stdout and stderr merged into j->out) for at most limit_s, then kill the group. */
static void job_run(job_t *j, const char *const *args, double limit_s)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    memset(j, 0, sizeof *j);
    size_t cap = 1 << 16;
    j->out = calloc(1, cap);
    ck_assert_ptr_nonnull(j->out);
    double t0 = hs_now();
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        setpgid(0, 0);
        dup2(p[1], 1);
        dup2(p[1], 2);
        close(p[0]);
        close(p[1]);
        execv(args[0], (char *const *)args);
        _exit(126);
    }
    setpgid(pid, pid);
    close(p[1]);
    for (;;) {
        double left = t0 + limit_s - hs_now();
        if (left <= 0) break;
        struct pollfd pf = {.fd = p[0], .events = POLLIN};
        if (poll(&pf, 1, (int)(left * 1000) + 1) <= 0) continue;
        if (j->len + 4096 >= cap) {
            cap *= 2;
            j->out = realloc(j->out, cap);
            ck_assert_ptr_nonnull(j->out);
        }
        ssize_t n = read(p[0], j->out + j->len, cap - j->len - 1);
        if (n <= 0) break;
        j->len += (size_t)n;
        j->out[j->len] = '\0';
    }
    close(p[0]);
    int st = 0;
    j->status = -1;
    while (hs_now() < t0 + limit_s) {
        if (waitpid(pid, &st, WNOHANG) == pid) {
            j->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            break;
        }
        hs_sleep(0.02);
    }
    j->elapsed = hs_now() - t0;
    kill(-pid, SIGKILL);
    if (j->status == -1) waitpid(pid, &st, 0);
}

static int count(const char *hay, const char *needle)
{
    int c = 0;
    for (const char *q = strstr(hay, needle); q; q = strstr(q + 1, needle)) c++;
    return c;
}

static void run_check(const char *ranks)
{
    find_programs();
    job_t j;
    const char *args[] = {g_bin,    "run",   "-n", ranks, "--timeout", "20",      "--",
                          g_worker, "check", "1",  "7",   "1000",      "3000017", NULL};
    job_run(&j, args, 60);
    ck_assert_msg(j.status == 0, "status %d after %.1f s, output:\n%s", j.status, j.elapsed, j.out);
    ck_assert_msg(count(j.out, "AR_FAIL") == 0, "failures in:\n%s", j.out);
    int P = atoi(ranks);
    char want[64];
    for (int r = 0; r < P; r++) {
        snprintf(want, sizeof want, "AR_OK rank %d\n", r);
        ck_assert_msg(strstr(j.out, want), "missing \"%s\" in:\n%s", want, j.out);
    }
    free(j.out);
}

START_TEST(test_sum_avg_2)
{
    run_check("2");
}
END_TEST

START_TEST(test_sum_avg_3)
{
    run_check("3");
}
END_TEST

START_TEST(test_sum_avg_4)
{
    run_check("4");
}
END_TEST

/* The default on one host is the direct path over hsshm; the ring must stay right too, over
 * hsshm and over libfabric (tcp), and the direct path when asked for by name. */
START_TEST(test_sum_avg_4_ring)
{
    setenv("HS_AR_PATH", "ring", 1);
    run_check("4");
}
END_TEST

START_TEST(test_sum_avg_3_tcp_ring)
{
    setenv("HS_PROVIDER", "tcp", 1);
    run_check("3");
}
END_TEST

START_TEST(test_sum_avg_3_direct)
{
    setenv("HS_AR_PATH", "direct", 1);
    run_check("3");
}
END_TEST

/* Rank 2 of 4 leaves after one all-reduce; the others must report an error naming a rank
 * within the 10 s bound (their timeout is 8 s; a dead neighbour is noticed sooner). */
static void dead_rank(void)
{
    find_programs();
    job_t j;
    const char *args[] = {g_bin, "run",    "-n",    "4", "--timeout", "20",
                          "--",  g_worker, "crash", "2", "8",         NULL};
    job_run(&j, args, 40);
    ck_assert_msg(j.status == 0, "status %d after %.1f s, output:\n%s", j.status, j.elapsed, j.out);
    ck_assert_msg(count(j.out, "AR_MISSED") == 0 && count(j.out, "AR_FAIL") == 0, "output:\n%s",
                  j.out);
    ck_assert_msg(count(j.out, "AR_DETECTED") == 3, "expected 3 survivors to report:\n%s", j.out);
    for (const char *q = strstr(j.out, "AR_DETECTED"); q; q = strstr(q + 1, "AR_DETECTED")) {
        const char *after = strstr(q, " after ");
        ck_assert_ptr_nonnull(after);
        double dt = atof(after + 7);
        ck_assert_msg(dt >= 0 && dt < 10.0, "reported after %.2f s:\n%s", dt, j.out);
        const char *eol = strchr(q, '\n');
        ck_assert_ptr_nonnull(eol);
        /* The message names a peer rank. */
        const char *peer = strstr(q, "from rank ");
        if (!peer || peer > eol) peer = strstr(q, "to rank ");
        ck_assert_msg(peer && peer < eol, "message names no peer: %.*s", (int)(eol - q), q);
    }
    /* The neighbours of the dead rank notice it directly, well within the timeout. */
    const char *q1 = strstr(j.out, "AR_DETECTED rank 3 after ");
    ck_assert_ptr_nonnull(q1);
    ck_assert_msg(atof(q1 + strlen("AR_DETECTED rank 3 after ")) < 5.0, "slow detection:\n%s",
                  j.out);
    free(j.out);
}

START_TEST(test_dead_rank_is_reported)
{
    dead_rank();
}
END_TEST

START_TEST(test_dead_rank_is_reported_ring)
{
    setenv("HS_AR_PATH", "ring", 1);
    dead_rank();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("allreduce");
    TCase *tc = tcase_create("ring");
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, test_sum_avg_2);
    tcase_add_test(tc, test_sum_avg_3);
    tcase_add_test(tc, test_sum_avg_4);
    tcase_add_test(tc, test_sum_avg_4_ring);
    tcase_add_test(tc, test_sum_avg_3_tcp_ring);
    tcase_add_test(tc, test_sum_avg_3_direct);
    tcase_add_test(tc, test_dead_rank_is_reported);
    tcase_add_test(tc, test_dead_rank_is_reported_ring);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
