/* tests/transport_testlib.c — helpers shared by the transport tests: reference payloads and
 * a forked multi-rank world whose parent relays the address blobs. */
#include "tests/transport_testlib.h"
#include "hearsay/common.h"
#include "hearsay/rng.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* Deterministic payload of message (src, dst, k): the reference the receiver checks. */
void tt_fill(unsigned char *p, size_t n, int src, int dst, int k)
{
    hs_rng_t r;
    hs_rng_seed(&r, 1000 + (uint64_t)src, (uint64_t)dst * 1000 + (uint64_t)k);
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)hs_rng_u64(&r);
}

int tt_check_payload(const unsigned char *p, size_t n, int src, int dst, int k)
{
    unsigned char *want = malloc(n ? n : 1);
    tt_fill(want, n, src, dst, k);
    int ok = memcmp(p, want, n) == 0;
    free(want);
    return ok;
}

void tt_opts(hs_transport_opts_t *o, const char *prov)
{
    hs_transport_opts_default(o);
    o->provider = prov;
    o->chunk_bytes = 64 << 10; /* small chunks so modest messages are multi-chunk */
    o->timeout_s = 20;
}

static int full_io(int fd, void *buf, size_t len, int wr)
{
    char *p = buf;
    while (len) {
        ssize_t n = wr ? write(fd, p, len) : read(fd, p, len);
        if (n <= 0) return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Run fn on n forked ranks; the parent relays the address blobs (an in-memory allgather).
 * Returns the number of ranks that failed; kills everything after timeout_s. `expect` (may be
 * NULL) gives each rank's expected exit code. */
int tt_run_world(int n, const hs_transport_opts_t *o, int all_local, tt_rank_fn fn, void *arg,
                 double timeout_s, const int *expect, void (*child_setup)(int rank))
{
    int fds[16][2];
    pid_t pids[16];
    for (int r = 0; r < n; r++) {
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, fds[r]), 0);
        fflush(stdout);
        fflush(stderr);
        pids[r] = fork();
        ck_assert_int_ge(pids[r], 0);
        if (pids[r] == 0) {
            for (int q = 0; q <= r; q++) close(fds[q][0]);
            int fd = fds[r][1];
            if (child_setup) child_setup(r);
            hs_transport_t *t = NULL;
            char mine[HS_TRANSPORT_ADDR_MAX] = {0};
            char *all = calloc((size_t)n, HS_TRANSPORT_ADDR_MAX);
            size_t len;
            int rc = hs_transport_create(&t, r, n, all_local, o);
            if (rc == 0) rc = hs_transport_address(t, mine, &len);
            char ok = rc == 0;
            full_io(fd, &ok, 1, 1);
            full_io(fd, mine, sizeof mine, 1);
            if (full_io(fd, all, (size_t)n * HS_TRANSPORT_ADDR_MAX, 0) < 0) _exit(90);
            if (rc == 0) rc = hs_transport_connect(t, all, HS_TRANSPORT_ADDR_MAX);
            if (rc == 0) rc = hs_transport_barrier(t);
            if (rc == 0) rc = fn(t, arg);
            if (rc != 0) fprintf(stderr, "rank %d: rc %d: %s\n", r, rc, hs_last_error());
            hs_transport_close(&t);
            _exit(rc == 0 ? 0 : rc > 0 ? rc : 1);
        }
        close(fds[r][1]);
    }
    char *all = calloc((size_t)n, HS_TRANSPORT_ADDR_MAX);
    int bad_start = 0;
    for (int r = 0; r < n; r++) {
        char ok = 0;
        if (full_io(fds[r][0], &ok, 1, 0) < 0 || !ok) bad_start = 1;
        full_io(fds[r][0], all + (size_t)r * HS_TRANSPORT_ADDR_MAX, HS_TRANSPORT_ADDR_MAX, 0);
    }
    for (int r = 0; r < n; r++) {
        full_io(fds[r][0], all, (size_t)n * HS_TRANSPORT_ADDR_MAX, 1);
        close(fds[r][0]);
    }
    free(all);
    int failed = 0, left = n, status[16];
    double end = hs_now() + timeout_s;
    for (int r = 0; r < n; r++) status[r] = -1;
    while (left > 0) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p > 0) {
            for (int r = 0; r < n; r++)
                if (pids[r] == p) status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            left--;
            continue;
        }
        if (hs_now() > end) {
            for (int r = 0; r < n; r++)
                if (status[r] < 0) kill(pids[r], SIGKILL);
            while (left > 0 && waitpid(-1, &st, 0) > 0) left--;
            fprintf(stderr, "world of %d ranks timed out after %.0f s\n", n, timeout_s);
            return n;
        }
        hs_sleep(0.005);
    }
    for (int r = 0; r < n; r++) {
        int want = expect ? expect[r] : 0;
        if (status[r] != want) {
            fprintf(stderr, "rank %d exited %d (expected %d)\n", r, status[r], want);
            failed++;
        }
    }
    ck_assert_msg(!bad_start, "a rank failed to create its endpoint");
    return failed;
}

int tt_job(const char *const *argv, const char *const *env, double limit_s, char **out)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        setpgid(0, 0);
        dup2(p[1], 1);
        dup2(p[1], 2);
        close(p[0]);
        close(p[1]);
        for (int i = 0; env && env[i]; i++) putenv((char *)env[i]);
        execvp(argv[0], (char *const *)argv);
        fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    close(p[1]);
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    double end = hs_now() + limit_s;
    int status = -2, open_pipe = 1;
    while (status == -2 || open_pipe) {
        struct pollfd pf = {.fd = p[0], .events = POLLIN};
        int wait_ms = open_pipe ? 100 : 20;
        if (open_pipe && poll(&pf, 1, wait_ms) > 0) {
            if (len + 4096 > cap) buf = realloc(buf, cap *= 2);
            ssize_t n = read(p[0], buf + len, cap - len - 1);
            if (n > 0)
                len += (size_t)n;
            else if (n == 0 || errno != EAGAIN)
                open_pipe = 0;
        } else if (!open_pipe) {
            hs_sleep(wait_ms * 1e-3);
        }
        int st;
        if (status == -2 && waitpid(pid, &st, WNOHANG) == pid)
            status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (hs_now() > end) {
            kill(-pid, SIGKILL);
            if (status == -2) {
                waitpid(pid, &st, 0);
                status = -1;
                fprintf(stderr, "job %s killed after %.0f s\n", argv[0], limit_s);
            }
            break;
        }
    }
    close(p[0]);
    buf[len] = '\0';
    fwrite(buf, 1, len, stdout);
    fflush(stdout);
    *out = buf;
    return status;
}

int tt_helper_path(const char *name, char *buf, size_t cap)
{
    const char *b = getenv("HS_BIN");
    if (!b || access(b, X_OK) != 0) {
        printf("HS_BIN does not name the built hearsay: multi-process test skipped\n");
        return -1;
    }
    snprintf(buf, cap, "%s", b);
    char *slash = strrchr(buf, '/');
    size_t at = slash ? (size_t)(slash + 1 - buf) : 0;
    snprintf(buf + at, cap - at, "tests/%s", name);
    if (access(buf, X_OK) != 0) {
        printf("%s not found: multi-process test skipped\n", buf);
        return -1;
    }
    return 0;
}
