/*
 * tools/cmd_run.c — `hearsay run`: start N local workers around a TCP rendezvous.
 *
 * The launcher generates a random job key, starts the rendezvous server (a thread, see
 * hearsay/rendezvous.h), forks N workers with HS_RANK / HS_SIZE / HS_RDV / HS_JOB_KEY in
 * their environment, and then runs one poll() loop over: a self-pipe fed by the signal
 * handlers (SIGCHLD and the signals it forwards), and the pipes carrying each worker's stdout and
 * stderr, which it copies to its own with a "[rank] " prefix on every line. When a worker fails it
 * reports it and ends the others (SIGTERM, then SIGKILL after a grace period). A worker that
 * exits HS_EXIT_REJOIN (72, an injected crash asking for a replacement) is replaced at once by
 * a new process of the same rank (HS_INCARNATION, HS_CRASHED_AT in its environment), which the
 * rendezvous admits as a replacement (hs_rdv_server_opts_t.rejoin). `--rendezvous-only`
 * serves the rendezvous for workers started elsewhere (Slurm's srun), see docs/launch.md.
 */
#include "config.h"
#include "hearsay/common.h"
#include "hearsay/file.h"
#include "hearsay/rendezvous.h"
#include "tools/commands.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define RUN_MAX_RANKS  1024
#define LINE_MAX_BYTES (64 * 1024) /* a longer line is cut into prefixed pieces */

typedef struct run_opts {
    long n;
    const char *bind_addr;
    long port;
    double timeout_s;
    double grace_s;
    double finish_s; /* bound on the wait for the others once a rank has finished */
    int prefix;
    int keep_going; /* a failed worker does not end the others */
    int rdv_only;
    const char *env_file;
    char **cmd; /* NULL-terminated */
} run_opts_t;

typedef struct stream {
    int fd; /* -1 once closed */
    FILE *to;
    char *buf;
    size_t len;
} stream_t;

typedef struct worker {
    pid_t pid;
    int alive;
    int signalled; /* the launcher sent it a signal: its death is expected */
    int noted;     /* --finish-timeout passed while it still ran: said once */
    stream_t out, err;
    int incarnation;    /* replacements started for this rank so far (0: the original) */
    int rejoin_pending; /* exited HS_EXIT_REJOIN: start a replacement (main_loop) */
    double crashed_at;  /* hs_now() when that exit was reaped */
    pid_t *old_pids;    /* (nold) the crashed incarnations (their segments are removed) */
    int nold;
} worker_t;

typedef struct launcher {
    run_opts_t o;
    worker_t *w; /* (n) */
    int nalive;
    int first_code;       /* exit status of the first worker that did not succeed (0: none) */
    int failed;           /* a failure was reported and the others are being ended */
    double kill_at;       /* SIGKILL the survivors at this time (0: not scheduled) */
    double first_done_at; /* when the first rank exited (0: none yet) */
    long first_done;      /* which */
    int forwarded;        /* last user signal forwarded (0: none) */
    int interrupted; /* the first user signal received (0: none): the exit status is 128 + it */
    int sig_rd;      /* read end of the signal self-pipe */
    int mask_start;  /* the workers are hearsay: start them with the stop signals blocked */
    hs_rdv_server_t *srv;
    const char *path; /* the command, resolved (replacements start it again) */
    const char *key;  /* the job key */
} launcher_t;

/* The signals a worker is stopped with. A hearsay worker starts with them blocked (its main
 * sets their default actions, then unblocks them: HS_START_SIGNALS=blocked), so that a stop
 * during start-up never runs a handler some library's constructor installed (libinfinipath's
 * calls exit() in the handler: a crash in libcublasLt's half-run constructors, 1,606 lines of
 * nested aborts and *.btr files left in the working directory). The signal waits, pending,
 * until main, and then ends the rank by its default action. */
static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};

/* Is `path` hearsay itself (the installed binary, or libtool's wrapper and lt- binary)? */
static int is_hearsay(const char *path)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    return !strcmp(b, "hearsay") || !strcmp(b, "lt-hearsay");
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: hearsay run -n N [OPTIONS] [--] COMMAND [ARGS...]\n"
            "       hearsay run --rendezvous-only -n N [--bind ADDR] [--port P] [--env-file F]\n"
            "\n"
            "Start N local worker processes of COMMAND and a TCP rendezvous through which they\n"
            "find each other (hs_boot_init). Each worker gets in its environment:\n"
            "  HS_RANK, HS_SIZE        its rank (0..N-1) and the job size N\n"
            "  HS_LOCAL_RANK, HS_LOCAL_SIZE   the same numbers (all workers are local)\n"
            "  HS_RDV=HOST:PORT        the rendezvous address\n"
            "  HS_JOB_KEY=HEX          the job's random 128-bit key (from /dev/urandom); the\n"
            "                          rendezvous rejects connections that do not present it\n"
            "  HS_BOOT_TIMEOUT=S       the bound on every start-up wait\n"
            "  HS_RESPAWN=1            this launcher starts replacements (below)\n"
            "  HS_INCARNATION=K, HS_CRASHED_AT=T   only in a replacement (below): its number\n"
            "                          (1, 2, ... for that rank) and when the launcher saw the\n"
            "                          crash (CLOCK_MONOTONIC seconds, as hs_now())\n"
            "A COMMAND spelled `hearsay` runs this same hearsay binary.\n"
            "\n"
            "options:\n"
            "  -n, --np N         number of workers, 1..%d (required)\n"
            "  --bind ADDR        address the rendezvous listens on (default 127.0.0.1; give a\n"
            "                     cluster interface's address for workers on other hosts)\n"
            "  --port P           rendezvous port (default 0: any free port)\n"
            "  --timeout S        bound on each start-up wait: all ranks connected, each\n"
            "                     allgather/barrier round (default 60)\n"
            "  --grace S          after a failure, seconds between SIGTERM and SIGKILL for the\n"
            "                     other workers (default 3)\n"
            "  --finish-timeout S once a worker has ended (but by an injected crash or a\n"
            "                     fence: 70, 71, 72), the others must\n"
            "                     exit within S seconds (default 120); one that is then\n"
            "                     stopped (frozen, SIGSTOP) is named and killed, and the job\n"
            "                     fails with status 71; one still running (a straggler) is\n"
            "                     named and waited for\n"
            "  --keep-going       when a worker fails, report it but let the others run on\n"
            "                     (fault-injection studies: a crashed rank must not end the\n"
            "                     job); the exit status still reports the failure\n"
            "  --no-prefix        do not prefix output lines with \"[rank] \" (workers then\n"
            "                     write straight to this terminal)\n"
            "  --rendezvous-only  start no workers: serve the rendezvous for N workers started\n"
            "                     elsewhere (e.g. by srun), print HS_RDV=... and HS_JOB_KEY=...\n"
            "                     lines on stdout, and exit once every rank has left\n"
            "  --env-file F       with --rendezvous-only: also write those lines to F\n"
            "  -h, --help         this help\n"
            "\n"
            "Output: each line a worker writes to stdout (stderr) is copied to stdout (stderr)\n"
            "prefixed with \"[rank] \"; a last line without a newline is flushed at exit.\n"
            "Workers' stdin is /dev/null. When every worker is gone, the shared-memory\n"
            "segments they left in /dev/shm (hearsay-PID-*) are removed.\n"
            "Signals: SIGINT, SIGTERM and SIGHUP are forwarded to every worker (its process\n"
            "group); the same signal a second time kills them all with SIGKILL. Once the\n"
            "workers are gone the launcher exits 128+SIG (130 for SIGINT, 143 for SIGTERM).\n"
            "Failure: when a worker exits non-zero or is killed by a signal, the launcher\n"
            "prints \"rank R exited with status S\" or \"rank R killed by signal SIGX\", sends\n"
            "SIGTERM to the others, then SIGKILL after the grace period (unless --keep-going).\n"
            "Not failures: status 70 (an injected crash) and 71 (a fenced rank) let the others\n"
            "run on; status 72 (an injected crash asking for a replacement) makes the launcher\n"
            "start the same command again for that rank at once, with the same environment plus\n"
            "HS_INCARNATION and HS_CRASHED_AT, and the rendezvous admits it (it replays the\n"
            "start-up rounds the job completed); the job's status is then the replacement's.\n"
            "Exit status: 128+SIG when the launcher got SIGINT, SIGTERM or SIGHUP; else 0 when\n"
            "every worker exited 0; otherwise the status of the first worker that did not\n"
            "(128+SIG for a signal); 2 for usage errors; 127 when COMMAND cannot be executed.\n"
            "Under mpirun or Slurm workers need no `hearsay run`: see docs/launch.md.\n",
            RUN_MAX_RANKS);
}

static const char *sig_name(int sig, char *buf, size_t cap)
{
    static const struct {
        int sig;
        const char *name;
    } names[] = {{SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"},
                 {SIGILL, "SIGILL"},   {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"},
                 {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},   {SIGKILL, "SIGKILL"},
                 {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
                 {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"},
                 {SIGXCPU, "SIGXCPU"}, {SIGSYS, "SIGSYS"}};
    for (size_t i = 0; i < HS_ARRAY_LEN(names); i++)
        if (names[i].sig == sig) return names[i].name;
    snprintf(buf, cap, "signal %d", sig);
    return buf;
}

/* Returns 0, or 2 after printing a usage error; 1 when --help was printed. */
static int parse_args(int argc, char **argv, run_opts_t *o)
{
    *o = (run_opts_t){.n = 0,
                      .bind_addr = "127.0.0.1",
                      .timeout_s = 60,
                      .grace_s = 3,
                      .finish_s = 120,
                      .prefix = 1};
    int i;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (a[0] != '-') break; /* COMMAND starts here */
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 1;
        }
        if (!strcmp(a, "--no-prefix")) {
            o->prefix = 0;
            continue;
        }
        if (!strcmp(a, "--keep-going")) {
            o->keep_going = 1;
            continue;
        }
        if (!strcmp(a, "--rendezvous-only")) {
            o->rdv_only = 1;
            continue;
        }
        int takes = !strcmp(a, "-n") || !strcmp(a, "--np") || !strcmp(a, "--bind") ||
                    !strcmp(a, "--port") || !strcmp(a, "--timeout") || !strcmp(a, "--grace") ||
                    !strcmp(a, "--finish-timeout") || !strcmp(a, "--env-file");
        if (!takes) {
            fprintf(stderr, "hearsay run: unknown option '%s' (see hearsay run --help)\n", a);
            return 2;
        }
        if (!v) {
            fprintf(stderr, "hearsay run: option %s needs a value (see hearsay run --help)\n", a);
            return 2;
        }
        i++;
        int rc = 0;
        if (!strcmp(a, "-n") || !strcmp(a, "--np"))
            rc = hs_parse_long(v, 1, RUN_MAX_RANKS, "-n (number of workers, 1..1024)", &o->n);
        else if (!strcmp(a, "--port"))
            rc = hs_parse_long(v, 0, 65535, "--port (0..65535)", &o->port);
        else if (!strcmp(a, "--timeout"))
            rc = hs_parse_double(v, 0.01, 1e6, "--timeout (seconds)", &o->timeout_s);
        else if (!strcmp(a, "--grace"))
            rc = hs_parse_double(v, 0, 3600, "--grace (seconds)", &o->grace_s);
        else if (!strcmp(a, "--finish-timeout"))
            rc = hs_parse_double(v, 0.1, 1e6, "--finish-timeout (seconds)", &o->finish_s);
        else if (!strcmp(a, "--bind"))
            o->bind_addr = v;
        else
            o->env_file = v;
        if (rc < 0) {
            fprintf(stderr, "hearsay run: %s\n", hs_last_error());
            return 2;
        }
    }
    if (o->n == 0) {
        fprintf(stderr, "hearsay run: the number of workers is required: -n N (1..%d)\n",
                RUN_MAX_RANKS);
        return 2;
    }
    o->cmd = argv + i;
    if (o->rdv_only && i < argc) {
        fprintf(stderr, "hearsay run: --rendezvous-only starts no command, but '%s' was given\n",
                argv[i]);
        return 2;
    }
    if (!o->rdv_only && i >= argc) {
        fprintf(stderr, "hearsay run: missing COMMAND: hearsay run -n N [--] COMMAND [ARGS...]\n");
        return 2;
    }
    if (o->env_file && !o->rdv_only) {
        fprintf(stderr, "hearsay run: --env-file goes with --rendezvous-only\n");
        return 2;
    }
    return 0;
}

/* Absolute path of the program to execute: `hearsay` is this binary, a name with a slash is
 * taken as is, anything else is searched in PATH. 0 or -ENOENT. */
static int resolve_command(const char *name, char *out, size_t cap)
{
    if (!strcmp(name, "hearsay")) {
        ssize_t n = readlink("/proc/self/exe", out, cap - 1);
        if (n > 0) {
            out[n] = '\0';
            return 0;
        }
    }
    if (strchr(name, '/')) {
        snprintf(out, cap, "%s", name);
        return 0;
    }
    const char *path = getenv("PATH");
    if (!path) path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        const char *end = strchr(path, ':');
        size_t dl = end ? (size_t)(end - path) : strlen(path);
        snprintf(out, cap, "%.*s%s%s", (int)dl, path, dl ? "/" : "", name);
        struct stat st;
        if (stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0) return 0;
        if (!end) break;
        path = end + 1;
    }
    return -ENOENT;
}

static int is_ours(const char *e)
{
    static const char *const ours[] = {
        "HS_RANK=",         "HS_SIZE=",       "HS_RDV=",        "HS_JOB_KEY=",
        "HS_BOOT_TIMEOUT=", "HS_LOCAL_RANK=", "HS_LOCAL_SIZE=", "HS_START_SIGNALS=",
        "HS_INCARNATION=",  "HS_CRASHED_AT=", "HS_RESPAWN="};
    for (size_t i = 0; i < HS_ARRAY_LEN(ours); i++)
        if (!strncmp(e, ours[i], strlen(ours[i]))) return 1;
    return 0;
}

/* The environment of worker `rank`: ours plus the launcher's (minus our variables). A
 * replacement (incarnation > 0) also gets HS_INCARNATION and HS_CRASHED_AT. */
static char **build_env(const run_opts_t *o, int rank, const char *rdv, const char *key,
                        int mask_start, int incarnation, double crashed_at)
{
    size_t n = 0;
    while (environ[n]) n++;
    char **env = calloc(n + 12, sizeof *env);
    if (!env) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!is_ours(environ[i])) env[k++] = environ[i];
    char tmp[512];
    const char *fmt[7] = {"HS_RANK=%d",       "HS_SIZE=%ld",        "HS_RDV=%s",
                          "HS_JOB_KEY=%s",    "HS_BOOT_TIMEOUT=%g", "HS_LOCAL_RANK=%d",
                          "HS_LOCAL_SIZE=%ld"};
    for (int j = 0; j < 7; j++) {
        switch (j) {
        case 0:
            snprintf(tmp, sizeof tmp, fmt[j], rank);
            break;
        case 1:
            snprintf(tmp, sizeof tmp, fmt[j], o->n);
            break;
        case 2:
            snprintf(tmp, sizeof tmp, fmt[j], rdv);
            break;
        case 3:
            snprintf(tmp, sizeof tmp, fmt[j], key);
            break;
        case 4:
            snprintf(tmp, sizeof tmp, fmt[j], o->timeout_s);
            break;
        case 5:
            snprintf(tmp, sizeof tmp, fmt[j], rank);
            break;
        default:
            snprintf(tmp, sizeof tmp, fmt[j], o->n);
            break;
        }
        env[k] = strdup(tmp);
        if (!env[k]) return NULL; /* the process is about to fail anyway */
        k++;
    }
    if (mask_start && !(env[k++] = strdup("HS_START_SIGNALS=blocked"))) return NULL;
    /* this launcher starts a replacement for a rank that exits 72 (a worker asked for
     * crash:...:rejoin=D checks it: mpirun or srun would take 72 for a failure) */
    if (!(env[k++] = strdup("HS_RESPAWN=1"))) return NULL;
    if (incarnation > 0) {
        snprintf(tmp, sizeof tmp, "HS_INCARNATION=%d", incarnation);
        if (!(env[k++] = strdup(tmp))) return NULL;
        snprintf(tmp, sizeof tmp, "HS_CRASHED_AT=%.6f", crashed_at);
        if (!(env[k++] = strdup(tmp))) return NULL;
    }
    env[k] = NULL;
    return env;
}

static void free_env(char **env)
{
    if (!env) return;
    for (size_t i = 0; env[i]; i++)
        if (is_ours(env[i])) free(env[i]);
    free(env);
}

/* Copy complete lines from a worker's stream, prefixed with its rank. At EOF (final = 1)
 * a partial last line is flushed with a newline. */
static void emit_lines(stream_t *s, int rank, int prefix, int final)
{
    size_t start = 0;
    for (size_t i = 0; i < s->len; i++) {
        if (s->buf[i] != '\n') continue;
        if (prefix) fprintf(s->to, "[%d] ", rank);
        fwrite(s->buf + start, 1, i + 1 - start, s->to);
        start = i + 1;
    }
    if (start < s->len && (final || s->len - start >= LINE_MAX_BYTES)) {
        if (prefix) fprintf(s->to, "[%d] ", rank);
        fwrite(s->buf + start, 1, s->len - start, s->to);
        fputc('\n', s->to);
        start = s->len;
    }
    memmove(s->buf, s->buf + start, s->len - start);
    s->len -= start;
    fflush(s->to);
}

static void stream_read(stream_t *s, int rank, int prefix)
{
    ssize_t n = read(s->fd, s->buf + s->len, LINE_MAX_BYTES - s->len);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
        emit_lines(s, rank, prefix, 1);
        close(s->fd);
        s->fd = -1;
        return;
    }
    s->len += (size_t)n;
    emit_lines(s, rank, prefix, 0);
}

static void signal_all(launcher_t *L, int sig)
{
    for (long r = 0; r < L->o.n; r++) {
        worker_t *w = &L->w[r];
        if (!w->alive) continue;
        w->signalled = 1;
        if (kill(-w->pid, sig) < 0) kill(w->pid, sig); /* group gone: the process itself */
    }
}

static void end_others(launcher_t *L)
{
    if (L->failed) return;
    L->failed = 1;
    if (L->srv) hs_rdv_server_quiet(L->srv);
    if (L->nalive == 0) return;
    fprintf(stderr, "hearsay run: ending the other %d rank%s (SIGTERM, SIGKILL after %g s)\n",
            L->nalive, L->nalive > 1 ? "s" : "", L->o.grace_s);
    signal_all(L, SIGTERM);
    L->kill_at = hs_now() + L->o.grace_s;
}

/* Reap what exited. The job's status is the first failure's; ranks found exited in the same
 * pass cannot be ordered (under load the launcher may see a crash and the errors it caused
 * at once), so there a specific status (a crash's 70, a signal) wins over the generic 1. */
static void reap(launcher_t *L)
{
    int pass_code = 0;
    for (long r = 0; r < L->o.n; r++) {
        worker_t *w = &L->w[r];
        int st;
        if (!w->alive) continue;
        pid_t p = waitpid(w->pid, &st, WNOHANG);
        if (p != w->pid) continue;
        w->alive = 0;
        L->nalive--;
        /* An injected crash asking for a replacement (72): no failure, the replacement starts
         * in main_loop; unless the job is already ending (then it is a crash like 70). */
        if (WIFEXITED(st) && WEXITSTATUS(st) == HS_EXIT_REJOIN && !L->failed && !L->interrupted) {
            w->rejoin_pending = 1;
            w->crashed_at = hs_now();
            continue;
        }
        /* a finished or stopped rank arms --finish-timeout; an injected crash (70, 72) or a
         * fenced rank (71) lets the rest run on */
        int finished = !(WIFEXITED(st) && (WEXITSTATUS(st) == 70 || WEXITSTATUS(st) == 71 ||
                                           WEXITSTATUS(st) == HS_EXIT_REJOIN));
        if (finished && L->first_done_at == 0) L->first_done_at = hs_now(), L->first_done = r;
        int code = 0;
        char sb[32];
        if (WIFEXITED(st) && WEXITSTATUS(st) != 0) {
            code = WEXITSTATUS(st);
            if (!w->signalled)
                fprintf(stderr, "hearsay run: rank %ld exited with status %d\n", r, code);
        } else if (WIFSIGNALED(st)) {
            code = 128 + WTERMSIG(st);
            if (!w->signalled)
                fprintf(stderr, "hearsay run: rank %ld killed by signal %s\n", r,
                        sig_name(WTERMSIG(st), sb, sizeof sb));
        }
        /* (a rank the launcher itself signalled, ending the others, is no cause: it can die
         * of that SIGTERM before this very pass ends, and must not make the job's 1 a 143) */
        if (code && !w->signalled && (!pass_code || (pass_code == 1 && code != 1)))
            pass_code = code;
        if (code && !w->signalled && !L->o.keep_going) end_others(L);
    }
    if (pass_code && !L->first_code) L->first_code = pass_code;
}

/* 1 when process pid is stopped (SIGSTOP: state T in /proc/PID/stat), else 0. */
static int is_stopped(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *c = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
    return c && c[1] == ' ' && (c[2] == 'T' || c[2] == 't');
}

/* Every wait is bounded: once a rank has exited, a rank still there --finish-timeout later and
 * stopped (SIGSTOP: frozen) is named and killed, and the job fails. One still running is named
 * once and waited for: a straggler (a slowed rank, the slower side of AD-PSGD, an asynchronous
 * run's last rank) legitimately trains long after the others have finished, and its own waits
 * are bounded by --comm-timeout, --drain-timeout and the heartbeats' --fail-timeout. */
static void end_stragglers(launcher_t *L, double now)
{
    if (L->first_done_at == 0 || now - L->first_done_at < L->o.finish_s) return;
    for (long r = 0; r < L->o.n; r++) {
        worker_t *w = &L->w[r];
        if (!w->alive || w->signalled) continue;
        if (!is_stopped(w->pid)) {
            if (!w->noted)
                fprintf(stderr,
                        "hearsay run: rank %ld still running %.1f s after rank %ld finished "
                        "(--finish-timeout %g s): waiting for it (not stopped)\n",
                        r, now - L->first_done_at, L->first_done, L->o.finish_s);
            w->noted = 1;
            continue;
        }
        fprintf(stderr,
                "hearsay run: rank %ld frozen (stopped, SIGSTOP): still there %.1f s after rank "
                "%ld finished (--finish-timeout %g s); killed\n",
                r, now - L->first_done_at, L->first_done, L->o.finish_s);
        w->signalled = 1;
        if (kill(-w->pid, SIGKILL) < 0) kill(w->pid, SIGKILL);
        if (!L->first_code) L->first_code = 71;
    }
}

/* The write end of the self-pipe that the signal handlers feed: the one piece of process-wide
 * state here, since a handler can reach nothing else. Handlers, not a signalfd: libraries
 * (OpenBLAS) start threads before main() that do not block signals, and a signal delivered
 * to such a thread would never reach a signalfd. */
static int g_sig_wr = -1;

static void on_any_signal(int sig)
{
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    ssize_t w = write(g_sig_wr, &b, 1);
    (void)w;
    errno = saved;
}

static const int handled_signals[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP};

static int install_signals(int *rd)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) return -errno;
    g_sig_wr = p[1];
    *rd = p[0];
    struct sigaction sa = {.sa_handler = on_any_signal, .sa_flags = SA_RESTART | SA_NOCLDSTOP};
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < HS_ARRAY_LEN(handled_signals); i++)
        sigaction(handled_signals[i], &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

static void on_signal(launcher_t *L)
{
    unsigned char b;
    while (read(L->sig_rd, &b, 1) == 1) {
        int sig = b;
        if (sig == SIGCHLD) {
            reap(L);
            continue;
        }
        char sb[32];
        if (!L->interrupted) L->interrupted = sig;
        if (L->forwarded == sig) {
            fprintf(stderr, "hearsay run: %s again: killing every worker\n",
                    sig_name(sig, sb, sizeof sb));
            signal_all(L, SIGKILL);
        } else {
            fprintf(stderr, "hearsay run: forwarding %s to %d worker%s\n",
                    sig_name(sig, sb, sizeof sb), L->nalive, L->nalive == 1 ? "" : "s");
            signal_all(L, sig);
            L->forwarded = sig;
            if (L->srv) hs_rdv_server_quiet(L->srv);
        }
    }
    reap(L); /* SIGCHLD may have been merged with another signal */
}

/* fork + exec worker `rank`. Returns 0, or -errno when the command cannot be executed. */
static int spawn(launcher_t *L, int rank, const char *path, char **env)
{
    worker_t *w = &L->w[rank];
    int outp[2] = {-1, -1}, errp[2] = {-1, -1}, exe[2];
    if (pipe2(exe, O_CLOEXEC) < 0) return -errno;
    if (L->o.prefix && (pipe2(outp, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0)) {
        int e = errno;
        close(exe[0]);
        close(exe[1]);
        return -e;
    }
    /* No handler may run in the child before it has reset them: block across fork. */
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        sigprocmask(SIG_SETMASK, &old, NULL);
        return -e;
    }
    if (pid == 0) {
        /* Child: only async-signal-safe calls until execve. */
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        for (size_t i = 0; i < HS_ARRAY_LEN(handled_signals); i++)
            sigaction(handled_signals[i], &dfl, NULL);
        sigaction(SIGPIPE, &dfl, NULL);
        if (L->mask_start) /* until the worker's main unblocks them (stop_signals) */
            for (size_t i = 0; i < HS_ARRAY_LEN(stop_signals); i++)
                sigaddset(&old, stop_signals[i]);
        sigprocmask(SIG_SETMASK, &old, NULL);
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        int null = open("/dev/null", O_RDONLY);
        if (null >= 0) dup2(null, 0);
        if (L->o.prefix) {
            dup2(outp[1], 1);
            dup2(errp[1], 2);
        }
        execve(path, L->o.cmd, env);
        int e = errno;
        ssize_t wr = write(exe[1], &e, sizeof e);
        (void)wr;
        _exit(127);
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    setpgid(pid, pid);
    close(exe[1]);
    if (L->o.prefix) {
        close(outp[1]);
        close(errp[1]);
    }
    w->pid = pid;
    w->alive = 1;
    L->nalive++;
    w->out.fd = L->o.prefix ? outp[0] : -1;
    w->err.fd = L->o.prefix ? errp[0] : -1;
    int e = 0;
    ssize_t n;
    do n = read(exe[0], &e, sizeof e);
    while (n < 0 && errno == EINTR);
    close(exe[0]);
    if (n != (ssize_t)sizeof e) return 0;
    waitpid(pid, NULL, 0); /* it exits right after reporting */
    w->alive = 0;
    L->nalive--;
    return -e;
}

/* Remove the shared-memory segments the workers left: the transports name them
 * /dev/shm/hearsay-PID-RANK-RANDOM after the creating process (gossip/shm.c, and libfabric's shm
 * endpoints in gossip/fabric.c), and a worker ended by a signal or a crash between creating its
 * segment and every peer mapping it (start-up: the address exchange) never unlinks the name.
 * Only names of this launcher's own workers, and only once they are gone. */
static void remove_segments(const launcher_t *L)
{
    DIR *d = opendir("/dev/shm");
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "hearsay-", 8)) continue;
        char *end;
        long pid = strtol(e->d_name + 8, &end, 10);
        if (end == e->d_name + 8 || *end != '-') continue;
        int found = 0;
        for (long r = 0; r < L->o.n && !found; r++) {
            const worker_t *w = &L->w[r];
            /* the rank's current process, then its crashed incarnations (replaced) */
            for (int i = -1; i < w->nold && !found; i++) {
                pid_t wp = i < 0 ? w->pid : w->old_pids[i];
                if (wp <= 0 || (long)wp != pid || (i < 0 && w->alive)) continue;
                found = 1;
                if (kill(wp, 0) == 0) break; /* the pid runs again: not ours any more */
                char path[PATH_MAX];
                snprintf(path, sizeof path, "/dev/shm/%s", e->d_name);
                if (unlink(path) == 0)
                    fprintf(stderr, "hearsay run: removed %s, left by rank %ld\n", path, r);
            }
        }
    }
    closedir(d);
}

/* Copy what a gone process left in its output pipes, then close them (a process it left
 * behind may still hold them: what it writes later is lost, as when the job ends). */
static void drain_streams(worker_t *w, int rank, int prefix)
{
    stream_t *s2[2] = {&w->out, &w->err};
    for (int j = 0; j < 2; j++) {
        stream_t *s = s2[j];
        for (int i = 0; i < 1024 && s->fd >= 0; i++) {
            struct pollfd p = {.fd = s->fd, .events = POLLIN};
            if (poll(&p, 1, 0) <= 0) break;
            stream_read(s, rank, prefix);
        }
        if (s->fd >= 0) {
            emit_lines(s, rank, prefix, 1);
            close(s->fd);
            s->fd = -1;
        }
    }
}

/* Start a replacement for each rank that exited HS_EXIT_REJOIN: the same command and
 * environment, plus HS_INCARNATION and HS_CRASHED_AT, in the same worker slot. Not once the
 * job is ending or the launcher was interrupted. */
static void start_replacements(launcher_t *L)
{
    for (long r = 0; r < L->o.n; r++) {
        worker_t *w = &L->w[r];
        if (!w->rejoin_pending) continue;
        w->rejoin_pending = 0;
        if (L->failed || L->interrupted) continue;
        pid_t *old = realloc(w->old_pids, sizeof *old * (size_t)(w->nold + 1));
        if (!old) {
            fprintf(stderr, "hearsay run: out of memory starting a replacement for rank %ld\n", r);
            if (!L->first_code) L->first_code = 1;
            end_others(L);
            return;
        }
        w->old_pids = old;
        w->old_pids[w->nold++] = w->pid;
        kill(-w->pid, SIGKILL); /* what the crashed process left in its group ends with it */
        drain_streams(w, (int)r, L->o.prefix);
        w->incarnation++;
        w->signalled = 0;
        w->noted = 0;
        char **env = build_env(&L->o, (int)r, hs_rdv_server_addr(L->srv), L->key, L->mask_start,
                               w->incarnation, w->crashed_at);
        if (!env) {
            fprintf(stderr, "hearsay run: out of memory building the environment\n");
            if (!L->first_code) L->first_code = 1;
            end_others(L);
            return;
        }
        fprintf(stderr,
                "hearsay run: rank %ld crashed and asked for a replacement: starting it "
                "(replacement %d)\n",
                r, w->incarnation);
        int e = spawn(L, (int)r, L->path, env);
        free_env(env);
        if (e < 0) {
            fprintf(stderr, "hearsay run: cannot execute %s (rank %ld, replacement %d): %s\n",
                    L->path, r, w->incarnation, strerror(-e));
            if (!L->first_code) L->first_code = 127;
            end_others(L);
            return;
        }
    }
}

static int main_loop(launcher_t *L)
{
    long n = L->o.n;
    struct pollfd *pf = calloc((size_t)(2 * n + 1), sizeof *pf);
    stream_t **ps = calloc((size_t)(2 * n + 1), sizeof *ps);
    int *pr = calloc((size_t)(2 * n + 1), sizeof *pr);
    if (!pf || !ps || !pr) {
        fprintf(stderr, "hearsay run: out of memory\n");
        signal_all(L, SIGKILL);
    }
    double drain_until = 0;
    for (;;) {
        reap(L);
        start_replacements(L);
        int k = 0;
        if (pf) pf[k++] = (struct pollfd){.fd = L->sig_rd, .events = POLLIN};
        for (long r = 0; pf && r < n; r++) {
            stream_t *s2[2] = {&L->w[r].out, &L->w[r].err};
            for (int j = 0; j < 2; j++) {
                if (s2[j]->fd < 0) continue;
                ps[k] = s2[j];
                pr[k] = (int)r;
                pf[k++] = (struct pollfd){.fd = s2[j]->fd, .events = POLLIN};
            }
        }
        double now = hs_now();
        if (L->nalive == 0) {
            if (k <= 1) break; /* all reaped, all pipes closed */
            /* A worker's own children may hold its pipes open: drain a little, then stop. */
            if (drain_until == 0) drain_until = now + 1.0;
            if (now >= drain_until) break;
        }
        end_stragglers(L, now);
        if (L->kill_at > 0 && now >= L->kill_at) {
            signal_all(L, SIGKILL);
            L->kill_at = 0;
        }
        double until = 1e300;
        if (L->kill_at > 0) until = L->kill_at;
        if (drain_until > 0) until = HS_MIN(until, drain_until);
        if (L->first_done_at > 0) until = HS_MIN(until, L->first_done_at + L->o.finish_s);
        /* At most 1 s: reap() runs every iteration, a safety net for a lost SIGCHLD. */
        int ms = until > now + 1.0 ? 1000 : (int)((until - now) * 1000.0) + 1;
        if (!pf) {
            hs_sleep(0.05);
            continue;
        }
        int got = poll(pf, (nfds_t)k, ms);
        if (got < 0 && errno != EINTR) break;
        if (got <= 0) continue;
        if (pf[0].revents & POLLIN) on_signal(L);
        for (int i = 1; i < k; i++)
            if (pf[i].revents & (POLLIN | POLLHUP | POLLERR))
                stream_read(ps[i], pr[i], L->o.prefix);
    }
    for (long r = 0; r < n; r++) {
        /* Whatever a worker left behind in its process group ends with the job. */
        if (L->w[r].pid > 0) kill(-L->w[r].pid, SIGKILL);
        stream_t *s2[2] = {&L->w[r].out, &L->w[r].err};
        for (int j = 0; j < 2; j++)
            if (s2[j]->fd >= 0) {
                emit_lines(s2[j], (int)r, L->o.prefix, 1);
                close(s2[j]->fd);
                s2[j]->fd = -1;
            }
    }
    free(pf);
    free(ps);
    free(pr);
    remove_segments(L);
    /* Interrupted: what shells expect of a command a signal ended (130 for SIGINT, 143 for
     * SIGTERM), whatever the workers, once told, exited with. */
    return L->interrupted ? 128 + L->interrupted : L->first_code;
}

/* The file holds the job key: created 0600 under a fresh name beside F (O_EXCL | O_NOFOLLOW)
 * and renamed over F, so nothing planted at F or at any other name is written through. */
static int write_env_file(const char *path, const char *text)
{
    if (hs_file_write(path, text, strlen(text), HS_FILE_SECRET | HS_FILE_SYNC) < 0) {
        fprintf(stderr, "hearsay run: cannot write --env-file %s: %s\n", path, hs_last_error());
        return -1;
    }
    return 0;
}

/* --rendezvous-only: serve until every rank has left, the job failed, or a signal. */
static int serve_only(const run_opts_t *o, hs_rdv_server_t *srv, const char *key, int sig_rd)
{
    char text[512];
    snprintf(text, sizeof text, "HS_RDV=%s\nHS_JOB_KEY=%s\nHS_BOOT_TIMEOUT=%g\n",
             hs_rdv_server_addr(srv), key, o->timeout_s);
    /* The file first: whoever sees the printed lines may read the file at once. */
    if (o->env_file && write_env_file(o->env_file, text) < 0) return 1;
    fputs(text, stdout);
    fflush(stdout);
    for (;;) {
        struct pollfd pf[2] = {{.fd = sig_rd, .events = POLLIN},
                               {.fd = hs_rdv_server_event_fd(srv), .events = POLLIN}};
        int k = poll(pf, 2, -1);
        if (k < 0 && errno != EINTR) return 1;
        if (pf[0].revents & POLLIN) {
            unsigned char b;
            while (read(sig_rd, &b, 1) == 1)
                if (b != SIGCHLD) {
                    char sb[32];
                    fprintf(stderr, "hearsay run: %s: stopping the rendezvous\n",
                            sig_name(b, sb, sizeof sb));
                    return 128 + b;
                }
        }
        int st = hs_rdv_server_state(srv);
        if (st != 0) return st > 0 ? 0 : 1;
    }
}

int hs_cmd_run(int argc, char **argv)
{
    run_opts_t o;
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc == 1 ? 0 : rc;

    char path[PATH_MAX];
    if (!o.rdv_only && resolve_command(o.cmd[0], path, sizeof path) < 0) {
        fprintf(stderr, "hearsay run: command not found: %s\n", o.cmd[0]);
        return 127;
    }
    char key[HS_JOB_KEY_CHARS + 1];
    if (hs_rdv_key_generate(key) < 0) {
        fprintf(stderr, "hearsay run: %s\n", hs_last_error());
        return 1;
    }
    int sfd = -1;
    if (install_signals(&sfd) < 0) {
        fprintf(stderr, "hearsay run: cannot set up signal handling: %s\n", strerror(errno));
        return 1;
    }
    hs_rdv_server_opts_t so = {.bind_addr = o.bind_addr,
                               .port = (int)o.port,
                               .size = (int)o.n,
                               .key = key,
                               .timeout_s = o.timeout_s,
                               .log = stderr,
                               .log_prefix = "hearsay run: ",
                               /* replacements are started by this launcher only: a
                                * rendezvous for srun's workers admits none */
                               .rejoin = !o.rdv_only};
    hs_rdv_server_t *srv = NULL;
    if (hs_rdv_server_start(&srv, &so) < 0) {
        fprintf(stderr, "hearsay run: %s\n", hs_last_error());
        close(sfd);
        return 1;
    }
    if (o.rdv_only) {
        rc = serve_only(&o, srv, key, sfd);
        hs_rdv_server_stop(&srv);
        close(sfd);
        return rc;
    }

    launcher_t L = {.o = o,
                    .sig_rd = sfd,
                    .mask_start = is_hearsay(path),
                    .srv = srv,
                    .path = path,
                    .key = key};
    L.w = calloc((size_t)o.n, sizeof *L.w);
    char **env = NULL;
    rc = 1;
    if (!L.w) goto out;
    for (long r = 0; r < o.n; r++) {
        L.w[r].out = (stream_t){.fd = -1, .to = stdout, .buf = malloc(LINE_MAX_BYTES)};
        L.w[r].err = (stream_t){.fd = -1, .to = stderr, .buf = malloc(LINE_MAX_BYTES)};
        if (!L.w[r].out.buf || !L.w[r].err.buf) goto out;
    }
    for (long r = 0; r < o.n; r++) {
        env = build_env(&o, (int)r, hs_rdv_server_addr(srv), key, L.mask_start, 0, 0);
        if (!env) {
            fprintf(stderr, "hearsay run: out of memory building the environment\n");
            goto stop;
        }
        int e = spawn(&L, (int)r, path, env);
        free_env(env);
        env = NULL;
        if (e < 0) {
            fprintf(stderr, "hearsay run: cannot execute %s (rank %ld): %s\n", path, r,
                    strerror(-e));
            L.first_code = 127;
            goto stop;
        }
    }
    rc = main_loop(&L);
    goto out;
stop:
    end_others(&L);
    main_loop(&L);
    rc = L.interrupted ? 128 + L.interrupted : L.first_code ? L.first_code : 1;
out:
    if (L.w)
        for (long r = 0; r < o.n; r++) {
            free(L.w[r].out.buf);
            free(L.w[r].err.buf);
            free(L.w[r].old_pids);
        }
    free(L.w);
    hs_rdv_server_stop(&srv);
    close(sfd);
    return rc;
}
