/* tests/runlib.c — the test harness (see tests/runlib.h). Compiled into the test suites and
 * into the hearsay command (bench/bench_launch.c), so it does not use Check. */
#include "tests/runlib.h"
#include "hearsay/common.h"
#include "hearsay/train.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* ---------------------------------------------------------------- live jobs */

/* Jobs started and not finished yet: killed when this process exits (atexit). */
static pid_t g_live[64];

static void kill_live(void)
{
    for (size_t i = 0; i < HS_ARRAY_LEN(g_live); i++)
        if (g_live[i] > 0) kill(-g_live[i], SIGKILL);
}

static void track(pid_t pid, int add)
{
    static int registered;
    if (!registered) registered = atexit(kill_live) == 0;
    for (size_t i = 0; i < HS_ARRAY_LEN(g_live); i++)
        if (add ? g_live[i] == 0 : g_live[i] == pid) {
            g_live[i] = add ? pid : 0;
            return;
        }
}

static double real_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---------------------------------------------------------------- the job's processes */

/* 1 when `value` (space-separated tokens) holds `token` as a whole word. */
static int has_token(const char *value, const char *token)
{
    size_t n = strlen(token);
    for (const char *p = strstr(value, token); p; p = strstr(p + 1, token))
        if ((p == value || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return 1;
    return 0;
}

/* State letter ('?' when gone) and process group of process pid, from /proc/PID/stat. */
static char proc_state(pid_t pid, pid_t *pgrp)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return '?';
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *q = strrchr(buf, ')'); /* after "PID (COMM)": state, ppid, pgrp */
    int ppid, pg;
    char state;
    if (!q || sscanf(q + 1, " %c %d %d", &state, &ppid, &pg) != 3) return '?';
    if (pgrp) *pgrp = (pid_t)pg;
    return state;
}

/* 1 when process pid no longer runs: gone, or a zombie. */
static int pid_gone(pid_t pid)
{
    char st = proc_state(pid, NULL);
    if (st == '?') return kill(pid, 0) < 0 && errno == ESRCH;
    return st == 'Z' || st == 'X';
}

/* Running processes (other than this one) whose environment carries the job's token, only
 * those in process group pgid when pgid > 0: up to cap pids into out; returns how many. A
 * process that is exiting no longer shows its environment: look before killing. */
static int find_marked(const char *token, pid_t pgid, pid_t *out, int cap)
{
    static char buf[1 << 17];
    const size_t vl = strlen(TR_JOB_VAR "=");
    DIR *d = opendir("/proc");
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while (n < cap && (e = readdir(d)) != NULL) {
        if (!isdigit((unsigned char)e->d_name[0])) continue;
        pid_t pid = (pid_t)atoi(e->d_name), pg = 0;
        if (pid <= 0 || pid == getpid()) continue;
        if (pgid > 0 && (proc_state(pid, &pg) == '?' || pg != pgid)) continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        size_t len = 0;
        ssize_t r;
        while (len < sizeof buf - 1 && (r = read(fd, buf + len, sizeof buf - 1 - len)) > 0)
            len += (size_t)r;
        close(fd);
        buf[len] = '\0';
        for (size_t i = 0; i < len; i += strlen(buf + i) + 1)
            if (!strncmp(buf + i, TR_JOB_VAR "=", vl) && has_token(buf + i + vl, token)) {
                out[n++] = pid;
                break;
            }
    }
    closedir(d);
    return n;
}

/* Kill (SIGKILL) the job's process group and its marked processes (with group_only, only
 * those in its group), and wait up to 2 s for them to go, so that their segments can be
 * removed. The job's own process is left to reap. */
static void kill_job(const tr_job_t *j, int group_only)
{
    pid_t pids[256];
    double end = hs_now() + 2.0;
    for (int round = 0; round < 5; round++) {
        int n = find_marked(j->token, group_only ? j->pid : 0, pids, (int)HS_ARRAY_LEN(pids));
        /* By its id only while the leader is not reaped: after that the id may already be
         * another process group's (hearsay run makes every worker a group leader). */
        if (!j->reaped) kill(-j->pid, SIGKILL);
        for (int i = 0; i < n; i++) kill(pids[i], SIGKILL);
        for (int i = 0; i < n; i++)
            while (!pid_gone(pids[i]) && hs_now() < end) hs_sleep(0.002);
        if (n == 0) return;
    }
}

/* Remove /dev/shm/hearsay-PID-* segments created since the job started whose PID no longer
 * runs (see the header). */
static void clean_segments(const tr_job_t *j)
{
    DIR *d = opendir("/dev/shm");
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "hearsay-", 8)) continue;
        char *end;
        long pid = strtol(e->d_name + 8, &end, 10);
        if (end == e->d_name + 8 || *end != '-' || pid <= 0 || pid > INT_MAX) continue;
        char path[PATH_MAX];
        snprintf(path, sizeof path, "/dev/shm/%s", e->d_name);
        struct stat st;
        if (lstat(path, &st) < 0) continue;
        /* file times come from a coarse clock: allow a second */
        double made = (double)st.st_ctim.tv_sec + 1e-9 * (double)st.st_ctim.tv_nsec;
        if (made < j->t0_real - 1.0 || !pid_gone((pid_t)pid)) continue;
        if (unlink(path) == 0)
            fprintf(stderr, "runlib: removed %s, left by process %ld of the job %s\n", path, pid,
                    j->name);
    }
    closedir(d);
}

int tr_job_pids(const tr_job_t *j, pid_t *out, int cap)
{
    if (cap < 1 || j->pid <= 0) return 0;
    int n = 0;
    if (!pid_gone(j->pid)) out[n++] = j->pid;
    pid_t more[256];
    int m = find_marked(j->token, 0, more, (int)HS_ARRAY_LEN(more));
    for (int i = 0; i < m && n < cap; i++)
        if (more[i] != j->pid) out[n++] = more[i];
    return n;
}

int tr_pid_gone(pid_t pid)
{
    return pid_gone(pid);
}

/* ---------------------------------------------------------------- starting */

/* Length of the NAME part of "NAME=VALUE" (or of a bare "NAME"). */
static size_t name_len(const char *e)
{
    const char *eq = strchr(e, '=');
    return eq ? (size_t)(eq - e) : strlen(e);
}

static int same_name(const char *a, const char *b)
{
    size_t n = name_len(a);
    return n == name_len(b) && !strncmp(a, b, n);
}

/* TR_JOB_VAR=OUTER TOKEN (malloc'd). */
static char *mark_of(const char *token)
{
    const char *outer = getenv(TR_JOB_VAR);
    size_t n = strlen(TR_JOB_VAR) + (outer ? strlen(outer) : 0) + strlen(token) + 4;
    char *m = malloc(n);
    if (m)
        snprintf(m, n, "%s=%s%s%s", TR_JOB_VAR, outer && *outer ? outer : "",
                 outer && *outer ? " " : "", token);
    return m;
}

/* This environment, then env applied over it, then the job's mark; *mark is the one string to
 * free. NULL when out of memory. */
static char **build_env(const char *const *env, const char *token, char **mark)
{
    size_t n = 0, m = 0;
    while (environ[n]) n++;
    while (env && env[m]) m++;
    char **out = calloc(n + m + 2, sizeof *out);
    *mark = mark_of(token);
    if (!out || !*mark) {
        free(out);
        free(*mark);
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!same_name(environ[i], TR_JOB_VAR)) out[k++] = environ[i];
    for (size_t i = 0; i < m; i++) {
        size_t w = 0; /* drop what this entry sets or removes */
        for (size_t r = 0; r < k; r++)
            if (!same_name(out[r], env[i])) out[w++] = out[r];
        k = w;
        if (strchr(env[i], '=')) out[k++] = (char *)env[i];
    }
    out[k++] = *mark;
    out[k] = NULL;
    return out;
}

static void job_init(tr_job_t *j, const tr_opts_t *o, const char *name)
{
    static unsigned counter;
    memset(j, 0, sizeof *j);
    j->rfd = -1;
    j->status = TR_NOT_STARTED;
    j->cap = 4096;
    j->out = calloc(1, j->cap);
    if (!j->out) {
        fprintf(stderr, "runlib: out of memory\n");
        abort();
    }
    j->t0 = hs_now();
    j->t0_real = real_now();
    const char *base = name ? strrchr(name, '/') : NULL;
    snprintf(j->name, sizeof j->name, "%s", !name ? "(function)" : base ? base + 1 : name);
    j->capture = o ? o->capture : TR_CAPTURE_ALL;
    j->echo = o && o->echo;
    snprintf(j->token, sizeof j->token, "j%d.%u.%08x", (int)getpid(), ++counter,
             (unsigned)((uint64_t)(j->t0_real * 1e9) ^ ((uint64_t)getpid() << 20)));
}

/* The log file: write end (returned, close-on-exec) and read end (j->rfd). -1 on error. */
static int open_log(tr_job_t *j, const tr_opts_t *o)
{
    int wfd, tmp = 0;
    if (o && o->log) {
        snprintf(j->log, sizeof j->log, "%s", o->log);
        wfd = open(j->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    } else {
        const char *t = getenv("TMPDIR");
        snprintf(j->log, sizeof j->log, "%s/hs_job_XXXXXX", t && *t ? t : "/tmp");
        wfd = mkostemp(j->log, O_CLOEXEC);
        tmp = wfd >= 0;
    }
    if (wfd < 0) {
        fprintf(stderr, "runlib: cannot create the log %s of %s: %s\n", j->log, j->name,
                strerror(errno));
        return -1;
    }
    j->rfd = open(j->log, O_RDONLY | O_CLOEXEC);
    int e = errno;
    if (tmp) unlink(j->log); /* both ends are open: nothing to leave behind */
    if (j->rfd < 0) {
        fprintf(stderr, "runlib: cannot read the log %s: %s\n", j->log, strerror(e));
        close(wfd);
        return -1;
    }
    return wfd;
}

/* In the child: own process group, death with the parent, output to the log. */
static void child_setup(pid_t parent, int wfd, int capture)
{
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    if (capture != TR_CAPTURE_NONE) {
        dup2(wfd, 1);
        if (capture == TR_CAPTURE_ALL) dup2(wfd, 2);
    }
}

static int fork_job(tr_job_t *j, const tr_opts_t *o, const char *const *argv, int (*fn)(void *),
                    void *arg)
{
    int wfd = -1;
    if (j->capture != TR_CAPTURE_NONE && (wfd = open_log(j, o)) < 0) return TR_NOT_STARTED;
    char *mark = NULL, **envp = NULL;
    if (argv && !(envp = build_env(o ? o->env : NULL, j->token, &mark))) {
        fprintf(stderr, "runlib: out of memory for the environment of %s\n", j->name);
        if (wfd >= 0) close(wfd);
        return TR_NOT_STARTED;
    }
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        child_setup(parent, wfd, j->capture);
        if (argv) {
            execvpe(argv[0], (char *const *)argv, envp);
            fprintf(stderr, "runlib: cannot run %s: %s\n", argv[0], strerror(errno));
            _exit(127);
        }
        if (wfd > 2) close(wfd);
        if (j->rfd > 2) close(j->rfd);
        for (size_t i = 0; o && o->env && o->env[i]; i++) {
            if (strchr(o->env[i], '='))
                putenv((char *)o->env[i]);
            else
                unsetenv(o->env[i]);
        }
        char *m = mark_of(j->token);
        if (m) putenv(m);
        int rc = fn(arg);
        fflush(NULL);
        _exit(rc);
    }
    int e = errno;
    if (wfd >= 0) close(wfd);
    free(envp);
    free(mark);
    if (pid < 0) {
        fprintf(stderr, "runlib: fork for %s: %s\n", j->name, strerror(e));
        return TR_NOT_STARTED;
    }
    setpgid(pid, pid);
    track(pid, 1);
    j->pid = pid;
    return 0;
}

int tr_start(tr_job_t *j, const char *const *argv, const tr_opts_t *o)
{
    job_init(j, o, argv[0]);
    return fork_job(j, o, argv, NULL, NULL);
}

int tr_start_fn(tr_job_t *j, int (*fn)(void *), void *arg, const tr_opts_t *o)
{
    job_init(j, o, NULL);
    return fork_job(j, o, NULL, fn, arg);
}

/* ---------------------------------------------------------------- waiting */

/* Append what the log holds beyond what was read. */
static void read_new(tr_job_t *j)
{
    if (j->rfd < 0) return;
    for (;;) {
        if (j->len + 4096 >= j->cap) {
            char *nb = realloc(j->out, j->cap * 2);
            if (!nb) return;
            j->out = nb;
            j->cap *= 2;
        }
        ssize_t n = read(j->rfd, j->out + j->len, j->cap - j->len - 1);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        j->len += (size_t)n;
        j->out[j->len] = '\0';
    }
}

static int decode(int st)
{
    return WIFEXITED(st) ? WEXITSTATUS(st) : TR_SIGNALED(WTERMSIG(st));
}

/* Reap the job's process if it has exited; 1 when it is reaped. What is left of its process
 * group is killed first, while the exited leader (a zombie) still holds the group's id. */
static int reap(tr_job_t *j)
{
    int st;
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (!j->reaped && j->pid > 0 &&
        waitid(P_PID, (id_t)j->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == j->pid)
        kill(-j->pid, SIGKILL);
    if (!j->reaped && j->pid > 0 && si.si_pid == j->pid &&
        waitpid(j->pid, &st, WNOHANG) == j->pid) {
        j->reaped = 1;
        j->status = decode(st);
        j->elapsed = hs_now() - j->t0;
    }
    return j->reaped;
}

static int occurrences(const char *hay, const char *needle)
{
    int c = 0;
    for (const char *q = strstr(hay, needle); q; q = strstr(q + 1, needle)) c++;
    return c;
}

int tr_wait_output(tr_job_t *j, const char *needle, int count, double limit_s)
{
    double end = hs_now() + limit_s;
    for (;;) {
        read_new(j);
        if (occurrences(j->out, needle) >= count) return 1;
        if (j->pid <= 0 || j->finished) return 0;
        if (reap(j)) {
            read_new(j);
            return occurrences(j->out, needle) >= count;
        }
        if (hs_now() >= end) return 0;
        hs_sleep(0.01);
    }
}

int tr_finish(tr_job_t *j, double limit_s)
{
    if (j->finished || j->pid <= 0) {
        j->finished = 1;
        return j->status;
    }
    double end = hs_now() + limit_s;
    while (!reap(j)) {
        read_new(j);
        if (hs_now() >= end) {
            j->elapsed = hs_now() - j->t0;
            kill_job(j, 0);
            int st;
            while (waitpid(j->pid, &st, 0) < 0 && errno == EINTR) {
            }
            j->reaped = 1;
            j->status = TR_TIMEOUT;
            fprintf(stderr, "runlib: %s still running after %.3g s: killed the job\n", j->name,
                    limit_s);
            break;
        }
        hs_sleep(0.01);
    }
    if (j->status != TR_TIMEOUT) kill_job(j, 1); /* whatever is left of its process group */
    clean_segments(j);
    read_new(j);
    track(j->pid, 0);
    j->finished = 1;
    if (j->echo && j->len) {
        fwrite(j->out, 1, j->len, stdout);
        fflush(stdout);
    }
    return j->status;
}

int tr_run(tr_job_t *j, const char *const *argv, const tr_opts_t *o, double limit_s)
{
    if (tr_start(j, argv, o) != 0) return TR_NOT_STARTED;
    return tr_finish(j, limit_s);
}

void tr_job_free(tr_job_t *j)
{
    if (j->pid > 0) {
        if (!j->finished) tr_finish(j, 0);
        kill_job(j, 0);
        clean_segments(j);
    }
    if (j->rfd >= 0) close(j->rfd);
    j->rfd = -1;
    free(j->out);
    j->out = NULL;
    j->len = 0;
}

int tr_cmd(const char *const *argv, const tr_opts_t *o, double limit_s, double *elapsed_s)
{
    tr_job_t j;
    int st = tr_run(&j, argv, o, limit_s);
    if (elapsed_s) *elapsed_s = j.elapsed;
    tr_job_free(&j);
    return st;
}

const char *tr_status_text(int status)
{
    static char buf[64];
    if (status == TR_TIMEOUT) return "timed out (killed by the runner)";
    if (status == TR_NOT_STARTED) return "not started";
    if (TR_IS_SIGNALED(status)) {
        int sig = TR_SIGNAL_OF(status);
        const char *name = sigabbrev_np(sig);
        snprintf(buf, sizeof buf, "killed by signal %d (SIG%s)", sig, name ? name : "?");
    } else {
        snprintf(buf, sizeof buf, "exit status %d", status);
    }
    return buf;
}

/* ---------------------------------------------------------------- argument vectors */

void tr_args_init(tr_args_t *a)
{
    memset(a, 0, sizeof *a);
}

void tr_args_add(tr_args_t *a, const char *word)
{
    if (a->n >= TR_ARGS_MAX) {
        fprintf(stderr, "runlib: more than %d arguments\n", TR_ARGS_MAX);
        abort();
    }
    a->v[a->n] = strdup(word);
    if (!a->v[a->n]) abort();
    a->v[++a->n] = NULL;
}

void tr_args_addf(tr_args_t *a, const char *fmt, ...)
{
    char buf[PATH_MAX + 256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    tr_args_add(a, buf);
}

void tr_args_split(tr_args_t *a, const char *text)
{
    size_t cap = strlen(text) + 1;
    char *w = malloc(cap);
    if (!w) abort();
    const char *p = text;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\n') p++;
        if (!*p) break;
        size_t n = 0;
        while (*p && *p != ' ' && *p != '\t' && *p != '\n') {
            if (*p == '\'' || *p == '"') {
                char q = *p++;
                while (*p && *p != q) w[n++] = *p++;
                if (*p) p++;
            } else if (*p == '\\' && p[1]) {
                w[n++] = p[1];
                p += 2;
            } else {
                w[n++] = *p++;
            }
        }
        w[n] = '\0';
        tr_args_add(a, w);
    }
    free(w);
}

void tr_args_free(tr_args_t *a)
{
    for (int i = 0; i < a->n; i++) free(a->v[i]);
    tr_args_init(a);
}

/* ---------------------------------------------------------------- the programs */

static char g_why[PATH_MAX + 256];

const char *tr_why(void)
{
    return g_why;
}

static int is_exe(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* BUILDDIR/tests: the directory of the running test program (libtool's .libs/ looked
 * through) into buf; 0 or -1. */
static int tests_dir(char *buf, size_t cap)
{
    ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
    if (n <= 0) return -1;
    buf[n] = '\0';
    char *slash = strrchr(buf, '/');
    if (!slash) return -1;
    *slash = '\0';
    size_t l = strlen(buf);
    if (l > 6 && !strcmp(buf + l - 6, "/.libs")) buf[l - 6] = '\0';
    return 0;
}

const char *tr_hearsay(void)
{
    static char path[PATH_MAX];
    const char *b = getenv("HS_BIN");
    if (b && *b) {
        snprintf(path, sizeof path, "%s", b);
        if (is_exe(path)) return path;
        snprintf(g_why, sizeof g_why, "HS_BIN=%s is not an executable file", b);
        return NULL;
    }
    char dir[PATH_MAX];
    if (tests_dir(dir, sizeof dir) == 0) {
        char *slash = strrchr(dir, '/');
        if (slash) *slash = '\0';
        snprintf(path, sizeof path, "%s/hearsay", dir);
        if (is_exe(path)) return path;
        snprintf(g_why, sizeof g_why, "hearsay not found at %s (set HS_BIN)", path);
        return NULL;
    }
    snprintf(g_why, sizeof g_why, "HS_BIN is not set and the test's directory is unknown");
    return NULL;
}

const char *tr_helper(const char *name)
{
    static struct {
        char name[64];
        char path[PATH_MAX];
    } cache[8];
    size_t i = 0;
    while (i < HS_ARRAY_LEN(cache) && cache[i].name[0] && strcmp(cache[i].name, name)) i++;
    if (i == HS_ARRAY_LEN(cache)) i = HS_ARRAY_LEN(cache) - 1; /* full: reuse the last slot */
    char dir[PATH_MAX];
    if (tests_dir(dir, sizeof dir) < 0) {
        snprintf(g_why, sizeof g_why, "the test's directory is unknown: no %s", name);
        return NULL;
    }
    snprintf(cache[i].name, sizeof cache[i].name, "%s", name);
    snprintf(cache[i].path, sizeof cache[i].path, "%s/%s", dir, name);
    if (is_exe(cache[i].path)) return cache[i].path;
    snprintf(g_why, sizeof g_why, "helper program %s not found", cache[i].path);
    return NULL;
}

const char *tr_require(const char *helper, ...)
{
    if (!tr_hearsay()) return g_why;
    va_list ap;
    va_start(ap, helper);
    for (const char *h = helper; h; h = va_arg(ap, const char *))
        if (!tr_helper(h)) {
            va_end(ap);
            return g_why;
        }
    va_end(ap);
    return NULL;
}

int tr_in_path(const char *prog)
{
    const char *path = getenv("PATH");
    if (!path) return 0;
    char dirs[4096], full[PATH_MAX];
    snprintf(dirs, sizeof dirs, "%s", path);
    for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(full, sizeof full, "%s/%s", *d ? d : ".", prog);
        if (is_exe(full)) return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- skips */

static int g_nskipped;
static char g_skipped[4096];

void tr_skip(const char *what, const char *fmt, ...)
{
    char why[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    printf("SKIP: %s: %s\n", what, why);
    fflush(stdout);
    size_t l = strlen(g_skipped);
    snprintf(g_skipped + l, sizeof g_skipped - l, "%s%s", g_nskipped ? ", " : "", what);
    g_nskipped++;
}

int tr_skipped(void)
{
    return g_nskipped;
}

int tr_suite_status(int ran, int failed)
{
    if (g_nskipped)
        printf("SKIP: %d case%s not run (reasons above): %s\n", g_nskipped,
               g_nskipped == 1 ? "" : "s", g_skipped);
    if (failed) return 1;
    if (ran == 0) {
        printf("SKIP: no case could run\n");
        return 77;
    }
    return 0;
}

/* ---------------------------------------------------------------- files of the jobs */

static char g_workdir[PATH_MAX], g_suite[64];

int tr_workdir_init(const char *suite)
{
    const char *t = getenv("TMPDIR");
    snprintf(g_suite, sizeof g_suite, "%s", suite);
    snprintf(g_workdir, sizeof g_workdir, "%s/hs_test_%s_%d", t && *t ? t : "/tmp", suite,
             (int)getpid());
    if (hs_mkdir_p(g_workdir) < 0) {
        fprintf(stderr, "test_%s: %s\n", suite, hs_last_error());
        return -1;
    }
    return 0;
}

void tr_workdir_path(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", g_workdir, name);
}

void tr_workdir_done(int failed)
{
    if (!g_workdir[0]) return;
    if (failed) /* keep the runs of a failure for inspection */
        fprintf(stderr, "test_%s: the runs are in %s\n", g_suite, g_workdir);
    else if (tr_rm_rf(g_workdir) < 0)
        fprintf(stderr, "test_%s: could not remove %s\n", g_suite, g_workdir);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

int tr_rm_rf(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0) return errno == ENOENT ? 0 : -1;
    return nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}

/* The whole file, NUL-terminated (malloc'd); NULL when it cannot be read. */
static char *slurp_text(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    while (b) {
        n += fread(b + n, 1, cap - n - 1, f);
        if (n < cap - 1) break;
        char *nb = realloc(b, cap * 2);
        if (!nb) {
            free(b);
            b = NULL;
            break;
        }
        b = nb;
        cap *= 2;
    }
    fclose(f);
    if (b) b[n] = '\0';
    if (len) *len = n;
    return b;
}

char *tr_slurp(const char *path, size_t *n)
{
    return slurp_text(path, n);
}

float *tr_read_f32(const char *dir, const char *name, size_t *n)
{
    char path[PATH_MAX + 256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *v = bytes > 0 ? malloc((size_t)bytes) : NULL;
    *n = v ? (size_t)bytes / sizeof(float) : 0;
    if (v && fread(v, sizeof(float), *n, f) != *n) {
        free(v);
        v = NULL;
        *n = 0;
    }
    fclose(f);
    return v;
}

int tr_file_has(const char *path, const char *text)
{
    size_t n;
    char *b = slurp_text(path, &n);
    int has = b && memmem(b, n, text, strlen(text)) != NULL;
    free(b);
    return has;
}

int tr_sim_job(const char *dir, const char *simargs, const char *args, double limit_s)
{
    const char *bin = tr_hearsay();
    if (!bin) {
        fprintf(stderr, "runlib: %s\n", tr_why());
        return TR_NOT_STARTED;
    }
    char log[PATH_MAX + 8];
    snprintf(log, sizeof log, "%s.log", dir);
    tr_rm_rf(dir);
    tr_args_t a;
    tr_args_init(&a);
    tr_args_add(&a, bin);
    tr_args_add(&a, "sim");
    tr_args_split(&a, simargs);
    tr_args_split(&a, args);
    tr_args_add(&a, "--out");
    tr_args_add(&a, dir);
    tr_opts_t o = {.log = log};
    int st = tr_cmd(TR_ARGV(&a), &o, limit_s, NULL);
    tr_args_free(&a);
    return st;
}

int tr_sim_rejected(const char *simargs, const char *args, int status, const char *needle)
{
    char dir[PATH_MAX], log[PATH_MAX + 8];
    tr_workdir_path(dir, sizeof dir, "bad");
    int st = tr_sim_job(dir, simargs, args, 30);
    snprintf(log, sizeof log, "%s.log", dir);
    if (status ? st != status : st == 0) {
        fprintf(stderr, "'%s %s': %s, expected %s%d\n", simargs, args, tr_status_text(st),
                status ? "exit status " : "a nonzero status, not ", status);
        return 0;
    }
    if (!tr_file_has(log, needle)) {
        fprintf(stderr, "'%s %s': no '%s' in the message\n", simargs, args, needle);
        return 0;
    }
    return 1;
}

int tr_train_job(int n, const char *runflags, const char *dir, const char *args, double limit_s,
                 double *elapsed_s)
{
    const char *bin = tr_hearsay();
    if (elapsed_s) *elapsed_s = 0;
    if (!bin) {
        fprintf(stderr, "runlib: %s\n", tr_why());
        return TR_NOT_STARTED;
    }
    tr_args_t a;
    tr_args_init(&a);
    if (n > 0) {
        tr_args_add(&a, bin);
        tr_args_add(&a, "run");
        tr_args_split(&a, runflags ? runflags : "");
        tr_args_add(&a, "-n");
        tr_args_addf(&a, "%d", n);
        tr_args_add(&a, "--");
    }
    tr_args_add(&a, bin);
    tr_args_add(&a, "train");
    tr_args_split(&a, args);
    tr_args_add(&a, "--out");
    tr_args_add(&a, dir);
    char log[PATH_MAX + 8];
    snprintf(log, sizeof log, "%s.log", dir);
    tr_rm_rf(dir);
    tr_opts_t o = {.log = log};
    int st = tr_cmd(TR_ARGV(&a), &o, limit_s, elapsed_s);
    tr_args_free(&a);
    return st;
}

/* DIR/summary.json (NUL-terminated, malloc'd) or NULL. */
static char *read_summary(const char *dir)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/summary.json", dir);
    return slurp_text(path, NULL);
}

/* The value at p: a number, true/false (1/0) or null (NAN). */
static double value_at(const char *p)
{
    if (!strncmp(p, "null", 4)) return NAN;
    if (!strncmp(p, "true", 4)) return 1;
    if (!strncmp(p, "false", 5)) return 0;
    return strtod(p, NULL);
}

double tr_rank0_wall_at(const char *dir, long it)
{
    char path[PATH_MAX + 16], line[1024];
    snprintf(path, sizeof path, "%s/rank-0.csv", dir);
    FILE *f = fopen(path, "r");
    double v = NAN;
    if (!f) return v;
    while (fgets(line, sizeof line, f)) {
        long i;
        double t;
        if (sscanf(line, "%ld,%lf", &i, &t) == 2 && i == it) v = t;
    }
    fclose(f);
    return v;
}

double tr_summary_num(const char *dir, const char *key)
{
    char pat[128], *buf = read_summary(dir);
    if (!buf) return NAN;
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(buf, pat);
    double v = p ? value_at(p + strlen(pat)) : NAN;
    free(buf);
    return v;
}

double tr_summary_rank_num(const char *dir, int rank, const char *key)
{
    char pat[128], *buf = read_summary(dir);
    if (!buf) return NAN;
    double v = NAN;
    const char *p = strstr(buf, "\"per_rank\"");
    snprintf(pat, sizeof pat, "{\"rank\": %d,", rank);
    if (p && (p = strstr(p, pat))) {
        const char *end = strchr(p, '}');
        snprintf(pat, sizeof pat, "\"%s\": ", key);
        const char *q = strstr(p, pat);
        if (q && (!end || q < end)) v = value_at(q + strlen(pat));
    }
    free(buf);
    return v;
}

int tr_time_adds_up(const char *dir, int ranks, char *why, size_t cap)
{
    for (int r = 0; r < ranks; r++) {
        if (tr_summary_rank_num(dir, r, "finished") != 1) continue;
        static const char *const cols[] = {"compute_s", "comm_s", "wait_s", "straggle_s", "eval_s"};
        double sum = 0, wall = tr_summary_rank_num(dir, r, "wall_s");
        for (size_t i = 0; i < sizeof cols / sizeof *cols; i++)
            sum += tr_summary_rank_num(dir, r, cols[i]);
        if (!(fabs(sum - wall) <= 1e-6 * (1 + wall))) {
            snprintf(why, cap,
                     "summary.json: rank %d's time columns sum to %.9g s, its wall_s %.9g s", r,
                     sum, wall);
            return -1;
        }
        char path[PATH_MAX + 32], line[1024];
        snprintf(path, sizeof path, "%s/rank-%d.csv", dir, r);
        FILE *f = fopen(path, "r");
        if (!f) {
            snprintf(why, cap, "%s is missing", path);
            return -1;
        }
        double csum = 0, clock = 0;
        long rows = 0;
        int bad = !fgets(line, sizeof line, f); /* header: iteration,wall_s,epoch,train_loss,lr,
                                                 * compute_s,comm_s,wait_s,straggle_s,... */
        while (!bad && fgets(line, sizeof line, f)) {
            double v[9];
            char *p = line;
            for (int k = 0; k < 9 && !bad; k++) {
                char *end;
                v[k] = strtod(p, &end);
                if (end == p || (*end != ',' && k < 8)) bad = 1;
                p = end + 1;
            }
            if (bad) break;
            clock = v[1];
            csum += v[5] + v[6] + v[7] + v[8];
            rows++;
        }
        fclose(f);
        /* (each value printed to 6 significant digits) */
        if (bad || !rows || !(fabs(csum - clock) <= 1e-5 * (double)rows * (1 + clock))) {
            snprintf(why, cap, "%s: the time columns of %ld rows sum to %.9g s, the clock %.9g s",
                     path, rows, csum, clock);
            return -1;
        }
    }
    return 0;
}

int tr_summary_has(const char *dir, const char *text)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/summary.json", dir);
    return tr_file_has(path, text);
}

int tr_log_has(const char *dir, const char *text)
{
    char path[PATH_MAX + 8];
    snprintf(path, sizeof path, "%s.log", dir);
    return tr_file_has(path, text);
}

void tr_show_log(const char *dir)
{
    char path[PATH_MAX + 8];
    snprintf(path, sizeof path, "%s.log", dir);
    size_t n;
    char *b = slurp_text(path, &n);
    if (!b) return;
    const char *p = b + n;
    if (p > b && p[-1] == '\n') p--;
    for (int lines = 0; p > b; p--)
        if (p[-1] == '\n' && ++lines == 20) break;
    fputs(p, stderr);
    free(b);
}
