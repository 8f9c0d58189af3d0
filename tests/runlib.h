/*
 * tests/runlib.h — the one test harness: every suite that starts programs uses it, and so does
 * `hearsay bench` (hs_bl_capture in bench/bench_launch.c). tests/runlib.c is built once as the
 * convenience library tests/librunlib.la (bench/Makefile.inc) that the hearsay command and the
 * suites link, so it does not use Check; only TR_ADD_TEST and tr_run_suite, which a suite
 * expands, do. A new suite: `tests_test_X_LDADD = tests/librunlib.la $(TEST_LDADD)` in its
 * module's .inc, and #include "tests/runlib.h" after <check.h>.
 *
 *   1. the job runner: tr_start / tr_wait_output / tr_finish / tr_job_free (tr_run does all);
 *   2. the programs: tr_hearsay() and tr_helper(NAME), checked by tr_require();
 *   3. the skip rule: TR_ADD_TEST, tr_skip, tr_suite_status (tr_run_suite runs a suite by it);
 *   4. a training job's files: tr_train_job, tr_summary_num, tr_log_has, tr_show_log, ...
 *
 * A suite's main() follows this pattern:
 *
 *     const char *why = tr_require("center_worker", NULL); // NULL: hearsay and it are there
 *     TCase *tc = tcase_create("multiprocess");
 *     TR_ADD_TEST(tc, test_center_conservation, why);      // dropped, "SKIP: ..." when why
 *     ...
 *     return tr_run_suite(s);                               // 1 failed, 77 none ran, else 0
 *
 * and a case runs a job like this (every wait bounded; the output is in j.out):
 *
 *     const char *argv[] = {tr_hearsay(), "run", "-n", "2", "--", tr_helper("w"), NULL};
 *     tr_job_t j;
 *     int st = tr_run(&j, argv, NULL, 30);
 *     ck_assert_msg(st == 0, "%s, output:\n%s", tr_status_text(st), j.out);
 *     tr_job_free(&j);
 */
#ifndef HEARSAY_TESTS_RUNLIB_H
#define HEARSAY_TESTS_RUNLIB_H

#include <stddef.h>
#include <sys/types.h>

/* ---------------------------------------------------------------- 1. the job runner
 *
 * A job is one command line (argv[0] looked up in $PATH like execvp), started by fork/exec
 * with the caller's environment plus opts->env, in a process group of its own (the child calls
 * setpgid(0, 0): pgid == pid) and with PR_SET_PDEATHSIG SIGKILL, so that it dies with the
 * process that started it (a Check case killed for its timeout included). Its stdout and
 * stderr go to a log file (opts->log, or a temporary file); the runner reads that file as it
 * grows, so the output is in j->out while the job runs and after.
 *
 * Waiting is always bounded: tr_finish polls (every 10 ms) until the job's process exits or
 * the limit passes; then it kills the whole process group (kill(-pgid, SIGKILL)) and every
 * process that still carries the job's mark (see below), reaps the job's process and returns.
 * A job started and never finished is killed when the starting process exits (atexit), or dies
 * with it (PR_SET_PDEATHSIG).
 *
 * The job's processes: the runner marks a job by adding its token to HS_RUNLIB_JOB in the
 * job's environment (appended to any outer token, so that a job inside a job is both jobs'),
 * which `hearsay run`, mpirun and shells pass on to what they start. Workers that leave the
 * job's process group (`hearsay run` puts every worker in a group of its own) are found by it.
 *
 * Clean-up (tr_finish, and again tr_job_free): the shared-memory segments the job left in
 * /dev/shm (a temporary log is removed as soon as it is open). Both shared-memory transports name
 * their segments "hearsay-PID-RANK-RANDOM" after the creating process (hsshm in gossip/shm.c,
 * libfabric's shm endpoint names in gossip/fabric.c); a segment is the job's to remove when its PID
 * carries the job's mark and has been killed, or when its PID no longer exists and the segment was
 * created after the job started (a dead process's segment: the job's, or a leftover nobody can
 * use any more). Segments of live processes of other jobs are never touched.
 *
 * Statuses (tr_finish, tr_run, tr_cmd, tr_train_job and j->status):
 *   0..255              the job's process exited with that status;
 *   TR_SIGNALED(sig)    it was killed by signal sig (not by the runner): 256 + sig, so never
 *                       equal to an exit status such as `hearsay run`'s own 128 + sig;
 *   TR_TIMEOUT          the limit passed: the runner killed the job;
 *   TR_NOT_STARTED      the log file, the environment or fork failed (the reason is on
 *                       stderr).
 * A program that cannot be executed exits 127 after printing why (as a shell does).
 */
#define TR_TIMEOUT         (-1)
#define TR_NOT_STARTED     (-2)
#define TR_SIGNALED(sig)   (256 + (sig))
#define TR_IS_SIGNALED(st) ((st) > 256)
#define TR_SIGNAL_OF(st)   ((st)-256)
/* The environment variable that carries the marks of the jobs a process belongs to. */
#define TR_JOB_VAR "HS_RUNLIB_JOB"

/* What happens to the job's output (tr_opts_t.capture). */
enum {
    TR_CAPTURE_ALL = 0, /* stdout and stderr to the log (the default) */
    TR_CAPTURE_STDOUT,  /* stdout to the log; stderr stays the caller's */
    TR_CAPTURE_NONE     /* both stay the caller's: no log, j->out stays "" */
};

/* Options of a job; a zeroed struct (or NULL) gives the defaults. */
typedef struct tr_opts {
    /* Extra environment, NULL-terminated (NULL: none): "NAME=VALUE" sets NAME, a bare "NAME"
     * removes it. Applied over the caller's environment, in this order. */
    const char *const *env;
    /* The log file (created or truncated; kept afterwards). NULL: a temporary file in $TMPDIR
     * (else /tmp), removed as soon as the runner has opened it (so never left behind). */
    const char *log;
    int capture; /* TR_CAPTURE_* */
    int echo;    /* 1: tr_finish copies the whole output to stdout (into the test's log) */
} tr_opts_t;

/* A job. The public fields are read-only for the caller, except that it may take `out` (set it
 * to NULL, then free it itself) before tr_job_free. */
typedef struct tr_job {
    pid_t pid;      /* the job's process, leader of its process group (pgid == pid); 0 if none */
    int status;     /* after tr_finish: see Statuses above */
    char *out;      /* the output read so far, NUL-terminated; never NULL after tr_start */
    size_t len;     /* strlen(out) */
    double t0;      /* hs_now() when it started */
    double elapsed; /* after tr_finish: seconds from start to end (or to the kill) */
    /* private */
    int rfd, reaped, finished, echo, capture;
    size_t cap;
    double t0_real;
    char token[48];
    char log[4096];
    char name[64]; /* argv[0]'s last part, for messages */
} tr_job_t;

/* Start argv (NULL-terminated, argv[0] looked up in $PATH) with options o (may be NULL).
 * Returns 0, or TR_NOT_STARTED (the reason printed; j is still safe to finish and free).
 * Use j->pid to send the job's process a signal. */
int tr_start(tr_job_t *j, const char *const *argv, const tr_opts_t *o);
/* The same for a function: the child runs fn(arg) (no exec) and _exits with its return value
 * (0..255). For worlds of forked ranks (tests/transport_testlib.c). */
int tr_start_fn(tr_job_t *j, int (*fn)(void *), void *arg, const tr_opts_t *o);
/* Read the job's output until `needle` has appeared `count` times in all of it, for at most
 * limit_s. Returns 1 when it has, 0 when the limit passed or the job ended without it (the job
 * keeps running: tr_finish still has to be called). */
int tr_wait_output(tr_job_t *j, const char *needle, int count, double limit_s);
/* Wait at most limit_s (from now) for the job's process to exit; past that, kill the job
 * (process group and marked processes, with SIGKILL). Once it exited by itself, what is left of
 * its process group is killed (not its marked processes elsewhere: see tr_job_free). Then clean
 * up as described above and return the status (also in j->status). A second call returns the
 * same status at once. */
int tr_finish(tr_job_t *j, double limit_s);
/* tr_start then tr_finish(limit_s): the status. */
int tr_run(tr_job_t *j, const char *const *argv, const tr_opts_t *o, double limit_s);
/* Finish the job if needed (at once: limit 0), kill whatever of it still lives (marked
 * processes outside its group included), remove its segments, free j->out. Safe on a job whose
 * start failed. Call it after the assertions on what the job left (test_launch checks that
 * `hearsay run` reaped its workers itself). */
void tr_job_free(tr_job_t *j);
/* The job's running processes (its own process and every process carrying its mark, see
 * above), up to cap pids into out; returns how many. Look while they run: a process that is
 * exiting no longer shows its environment. */
int tr_job_pids(const tr_job_t *j, pid_t *out, int cap);
/* 1 when process pid no longer runs (gone, or a zombie). */
int tr_pid_gone(pid_t pid);
/* tr_run and tr_job_free in one: the status; the elapsed seconds in *elapsed_s (may be NULL). */
int tr_cmd(const char *const *argv, const tr_opts_t *o, double limit_s, double *elapsed_s);
/* "exit status 3", "killed by signal 9 (SIGKILL)", "timed out ...", "not started" (a static
 * buffer, overwritten by the next call). */
const char *tr_status_text(int status);

/* Building argument vectors: words added one by one, or split from text. */
#define TR_ARGS_MAX 255
typedef struct tr_args {
    int n;
    char *v[TR_ARGS_MAX + 1]; /* v[n] == NULL: usable as argv */
} tr_args_t;
void tr_args_init(tr_args_t *a);
/* One word (copied); the printf form formats it. Too many words abort the process. */
void tr_args_add(tr_args_t *a, const char *word);
void tr_args_addf(tr_args_t *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The words of `text` split at blanks; '...' and "..." group (quotes removed, no expansion
 * inside), a backslash outside quotes takes the next character as it is. */
void tr_args_split(tr_args_t *a, const char *text);
/* As argv for tr_start. */
#define TR_ARGV(a) ((const char *const *)(a)->v)
void tr_args_free(tr_args_t *a);

/* ---------------------------------------------------------------- 2. the programs
 *
 * `hearsay` is $HS_BIN when set and not empty (make check sets it), else BUILDDIR/hearsay
 * when the running test program is BUILDDIR/tests/NAME (libtool's BUILDDIR/tests/.libs/ is
 * looked through). Helper programs (launch_worker, center_worker, allreduce_worker,
 * transport_worker) are beside the running test program: BUILDDIR/tests/NAME. Both return the
 * path (static storage: one buffer for hearsay, one per helper name for up to 8 names), or NULL
 * when it is not an executable file; tr_why() then says why. */
const char *tr_hearsay(void);
const char *tr_helper(const char *name);
const char *tr_why(void);
/* NULL when hearsay and every helper named (a NULL-terminated list; none: pass NULL alone)
 * are found; else the reason (static text), for TR_ADD_TEST and tr_skip. */
const char *tr_require(const char *helper, ...);
/* 1 when `prog` is an executable file in a directory of $PATH. */
int tr_in_path(const char *prog);

/* ---------------------------------------------------------------- 3. the skip rule
 *
 * A test whose prerequisite is missing (a program, a device, root, an opt-in variable) reports
 * a skip with its reason, never a pass:
 *   - main() checks each prerequisite before it builds the suite. A case whose prerequisite is
 *     missing is not added: TR_ADD_TEST / tr_skip print "SKIP: CASE: REASON" to stdout (the
 *     test's log) right away. So a case never returns early and counts as a PASS without having
 *     checked anything; a case that meets a missing prerequisite only while it runs fails.
 *   - The other cases run. main() returns tr_suite_status(ran, failed): 1 when a case failed,
 *     else 77 (automake's SKIP) when no case ran at all, else 0. When cases were dropped it
 *     prints the SKIP lines again at the end ("SKIP: N case(s) not run: ..."), so that a
 *     partly skipped suite says so loudly in its log; it passes for the cases that ran.
 *   - A suite with no case that can run without the prerequisite (test_sgp without hearsay)
 *     therefore exits 77; one with a few dropped cases (test_transport's shm case without
 *     HS_TEST_SHM=1) passes with its SKIP lines.
 */
#define TR_ADD_TEST(tc, test, why)                                                                 \
    do {                                                                                           \
        const char *tr_why_ = (why);                                                               \
        if (tr_why_)                                                                               \
            tr_skip(#test, "%s", tr_why_);                                                         \
        else                                                                                       \
            tcase_add_test((tc), test);                                                            \
    } while (0)
/* Record and print "SKIP: what: reason". */
void tr_skip(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* How many cases tr_skip dropped. */
int tr_skipped(void);
/* The suite's exit status (see the rule above); ran and failed from srunner_ntests_run and
 * srunner_ntests_failed. tr_run_suite (at the end of this file) does it all. */
int tr_suite_status(int ran, int failed);

/* ---------------------------------------------------------------- 4. files of the jobs
 *
 * A suite's jobs write under one directory, $TMPDIR/hs_test_SUITE_PID (else /tmp/...). */
/* Create it (call in main, before the runner forks the cases); 0 or -1 (reason printed). */
int tr_workdir_init(const char *suite);
/* WORKDIR/NAME into out. */
void tr_workdir_path(char *out, size_t cap, const char *name);
/* At the end: remove it when nothing failed, else print where the runs are. */
void tr_workdir_done(int failed); /* tr_run_suite calls it */
/* rm -rf PATH (no error when absent); 0 or -1. */
int tr_rm_rf(const char *path);
/* 1 when the file holds `text` (a fixed string). */
int tr_file_has(const char *path, const char *text);

/* `HEARSAY run RUNFLAGS -n N -- HEARSAY train ARGS --out DIR` (n == 0: `HEARSAY train ARGS
 * --out DIR`) in a fresh DIR (removed first), output in DIR.log, bounded by limit_s. RUNFLAGS
 * and ARGS are split by tr_args_split. Returns the status; the elapsed seconds in *elapsed_s
 * (may be NULL). */
int tr_train_job(int n, const char *runflags, const char *dir, const char *args, double limit_s,
                 double *elapsed_s);
/* `HEARSAY sim SIMARGS ARGS --out DIR` in a fresh DIR (removed first), output in DIR.log,
 * bounded by limit_s (SIMARGS and ARGS split by tr_args_split): the status. */
int tr_sim_job(const char *dir, const char *simargs, const char *args, double limit_s);
/* 1 when `HEARSAY sim SIMARGS ARGS` (in the work directory's "bad") is refused: it exits with
 * `status` (0: any nonzero status) and its output holds `needle`; else 0, with what happened
 * on stderr. */
int tr_sim_rejected(const char *simargs, const char *args, int status, const char *needle);
/* The whole file, NUL-terminated (malloc'd), its length in *n (may be NULL); NULL when it
 * cannot be read. */
char *tr_slurp(const char *path, size_t *n);
/* DIR/NAME as float32 values (malloc'd), their count in *n; NULL when absent or empty. */
float *tr_read_f32(const char *dir, const char *name, size_t *n);
/* The number after "key": in DIR/summary.json (the first occurrence); NAN when the file or
 * the key is absent, or the value is null. */
double tr_summary_num(const char *dir, const char *key);
/* The wall_s column of DIR/rank-0.csv at iteration it (NAN when absent). */
double tr_rank0_wall_at(const char *dir, long it);
/* The number after "key": inside the per_rank entry of `rank` in DIR/summary.json; true and
 * false read as 1 and 0; NAN when absent or null. */
double tr_summary_rank_num(const char *dir, int rank, const char *key);
/* 1 when DIR/summary.json holds `text` (a fixed string). */
int tr_summary_has(const char *dir, const char *text);
/* Every finished rank's time adds up: in summary.json, compute_s + comm_s + wait_s +
 * straggle_s + eval_s = its wall_s, and in DIR/rank-R.csv the rows' compute_s + comm_s +
 * wait_s + straggle_s = the last row's wall_s (the training clock). 0, or -1 with the first
 * mismatch in why. */
int tr_time_adds_up(const char *dir, int ranks, char *why, size_t cap);
/* 1 when DIR.log (the job's merged output) holds `text` (a fixed string). */
int tr_log_has(const char *dir, const char *text);
/* The last 20 lines of DIR.log to stderr (for a failing assertion's context). */
void tr_show_log(const char *dir);

/* ---------------------------------------------------------------- Check */

#ifdef CHECK_H /* included after <check.h> */
/* The end of a suite's main(): run s (CK_NORMAL), return the exit status by the rule above
 * (tr_suite_status), and remove the work directory (tr_workdir_init) unless a case failed. */
static inline int tr_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    int st = tr_suite_status(srunner_ntests_run(sr), failed);
    srunner_free(sr);
    tr_workdir_done(failed);
    return st;
}
#endif

#endif
