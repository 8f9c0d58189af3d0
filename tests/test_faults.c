/*
 * tests/test_faults.c — the fault matrix: for every distributed algorithm, one rank of four
 * crashes (`--straggler crash:2:iter=20` under `hearsay run --keep-going`), on hsshm and on
 * tcp, and the survivors do what docs/algorithms.md promises:
 *   - sgp, osgp (push-sum): they finish, summary.json lists rank 2, the ranks that sent to it
 *     report it, and the push-sum mass is conserved: survivors' weights + ps_weight_lost (what
 *     rank 2 took with it) = 4 within 1e-6, on hsshm with eager and with by-address messages
 *     (HS_SHM_RDV_BYTES); on tcp within what was provably in flight (sent to rank 2, neither
 *     returned nor taken back, and not received by it: the senders' rank-R-ps-failed.csv
 *     against rank 2's received_from), which is printed;
 *   - dpsgd, allreduce, localsgd: every survivor stops with an error naming the dead rank
 *     within 10 s of the crash, and no summary is written;
 *   - adpsgd (rank 2 is passive): the actives that draw it find it dead and go on with their
 *     other neighbours; every survivor finishes and reports it;
 *   - easgd, eamsgd (rank 2 owns a center shard; also the only owner, --centers 2) and lsgd
 *     (rank 2 made the global leader: a one-class shard, so the lowest loss): they finish
 *     and report it.
 * Plus: kill -9 while a checkpoint is being written (HS_TEST_CKPT_PAUSE holds the write
 * before its rename) leaves the previous checkpoint whole, and a resume from it ends at the
 * very parameters of an uninterrupted run.
 *
 * Every job is bounded by the runner's time limit (tests/runlib.h). ~1 min on 2 cores.
 */
#include "hearsay/checkpoint.h"
#include "hearsay/common.h"

#include <check.h>
#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/runlib.h"

#define N_RANKS      4
#define DEAD         2
#define CRASH_STATUS 70
#define JOB_LIMIT_S  60
/* 62 iterations of ~5 ms (the pause paces the ranks as compute would, so that the crash
 * meets messages in flight); rank 2 crashes at the start of iteration 20. */
#define TASK                                                                                       \
    "--model mlp:16-32-4 --data gauss:dim=16,classes=4,train=4000,test=500 --batch 16 "            \
    "--epochs 1 --threads 1 --quiet --comm-timeout 10 --drain-timeout 5 "                          \
    "--straggler pause:all:p=1:fixed=5ms --straggler crash:2:iter=20"

typedef struct fault_run {
    char dir[PATH_MAX];
    int status;
    double stop_s; /* from the launcher's report of the crash to the job's end */
} fault_run_t;

/* `hearsay run --keep-going -n 4 -- hearsay train --algo ALGO --provider PROV TASK EXTRA --out
 * DIR` with the extra environment `env` (NULL-terminated, may be NULL), DIR named after NAME. */
static void run_crash(fault_run_t *f, const char *name, const char *algo, const char *prov,
                      const char *extra, const char *const *env)
{
    tr_workdir_path(f->dir, sizeof f->dir, name);
    tr_rm_rf(f->dir);
    char log[PATH_MAX + 8];
    snprintf(log, sizeof log, "%s.log", f->dir);
    tr_args_t a;
    tr_args_init(&a);
    tr_args_add(&a, tr_hearsay());
    tr_args_add(&a, "run");
    tr_args_add(&a, "--keep-going");
    tr_args_add(&a, "-n");
    tr_args_addf(&a, "%d", N_RANKS);
    tr_args_add(&a, "--");
    tr_args_add(&a, tr_hearsay());
    tr_args_add(&a, "train");
    tr_args_add(&a, "--algo");
    tr_args_add(&a, algo);
    tr_args_add(&a, "--provider");
    tr_args_add(&a, prov);
    tr_args_split(&a, TASK);
    tr_args_split(&a, extra ? extra : "");
    tr_args_add(&a, "--out");
    tr_args_add(&a, f->dir);
    tr_opts_t o = {.log = log, .env = env};
    tr_job_t j;
    f->stop_s = NAN;
    ck_assert_int_eq(tr_start(&j, TR_ARGV(&a), &o), 0);
    int seen = tr_wait_output(&j, "rank 2 exited with status 70", 1, JOB_LIMIT_S);
    double t_crash = hs_now();
    f->status = tr_finish(&j, JOB_LIMIT_S);
    if (seen) f->stop_s = hs_now() - t_crash;
    tr_job_free(&j);
    tr_args_free(&a);
    printf("%s: %s, %.2f s from the crash to the end\n", name, tr_status_text(f->status),
           f->stop_s);
    fflush(stdout);
}

/* The survivors finished and summary.json lists rank 2 as failed (and only it). */
static void check_finished(const fault_run_t *f)
{
    if (f->status != CRASH_STATUS) tr_show_log(f->dir);
    ck_assert_msg(f->status == CRASH_STATUS, "%s: %s", f->dir, tr_status_text(f->status));
    ck_assert(tr_log_has(f->dir, "hearsay run: rank 2 exited with status 70"));
    for (int r = 0; r < N_RANKS; r++) {
        double fin = tr_summary_rank_num(f->dir, r, "finished");
        ck_assert_msg(fin == (r == DEAD ? 0 : 1), "%s: rank %d finished = %g", f->dir, r, fin);
    }
    ck_assert(tr_summary_has(f->dir, "\"rank\": 2, \"after_iteration\""));
    ck_assert_msg(!tr_summary_has(f->dir, "\"rank\": 0, \"after_iteration\"") &&
                      !tr_summary_has(f->dir, "\"rank\": 1, \"after_iteration\"") &&
                      !tr_summary_has(f->dir, "\"rank\": 3, \"after_iteration\""),
                  "%s: a survivor is listed as failed", f->dir);
    ck_assert(tr_log_has(f->dir, "continuing without it"));
}

/* Survivors stop with a clear error within 10 s of the crash; nothing is summarised. */
static void check_stopped(const fault_run_t *f, const char *algo)
{
    if (f->status == 0 || f->status == TR_TIMEOUT) tr_show_log(f->dir);
    ck_assert_msg(f->status != 0 && f->status != TR_TIMEOUT, "%s: %s", f->dir,
                  tr_status_text(f->status));
    ck_assert_msg(isfinite(f->stop_s) && f->stop_s < 10, "%s: the survivors took %.1f s to stop",
                  f->dir, f->stop_s);
    for (int r = 0; r < N_RANKS; r++) { /* each survivor: an error line, a failure status */
        if (r == DEAD) continue;
        char line[96];
        snprintf(line, sizeof line, "hearsay run: rank %d exited with status 1", r);
        ck_assert_msg(tr_log_has(f->dir, line), "%s: rank %d did not stop with an error", f->dir,
                      r);
        snprintf(line, sizeof line, "[%d] hearsay train: rank %d: ", r, r);
        ck_assert_msg(tr_log_has(f->dir, line), "%s: rank %d gave no reason", f->dir, r);
    }
    /* the reason names the dead peer (D-PSGD ranks that are not rank 2's neighbours stop when
     * a neighbour that stopped exits: the error names that one) */
    ck_assert(tr_log_has(f->dir, "rank 2 (pid"));
    ck_assert(tr_log_has(f->dir, "has exited"));
    if (!strcmp(algo, "dpsgd"))
        ck_assert(tr_log_has(f->dir, "--algo dpsgd cannot go on without it and stops"));
    else if (!strcmp(algo, "localsgd")) /* --period 4: the first average after the crash */
        ck_assert(tr_log_has(f->dir, "local SGD, iteration 23"));
    else
        ck_assert(tr_log_has(f->dir, "all-reduce SGD, iteration 20"));
    ck_assert_msg(!tr_log_has(f->dir, "continuing without it"), "%s: says it continues", f->dir);
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/summary.json", f->dir);
    ck_assert_msg(access(path, F_OK) != 0, "%s: a stopped run wrote a summary", f->dir);
}

/* Sum of the numbers in the JSON array after "key": [ in DIR/rank-R-lost.json (NAN when
 * absent). */
static double lost_received(const char *dir, int rank)
{
    char path[PATH_MAX + 32], buf[4096];
    snprintf(path, sizeof path, "%s/rank-%d-lost.json", dir, rank);
    FILE *f = fopen(path, "r");
    if (!f) return NAN;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strstr(buf, "\"received_from\": [");
    if (!p) return NAN;
    p = strchr(p, '[') + 1;
    double sum = 0;
    for (;;) {
        char *e;
        double v = strtod(p, &e);
        if (e == p) break;
        sum += v;
        p = e;
        while (*p == ',' || *p == ' ') p++;
    }
    return sum;
}

/* From rank r's DIR/rank-R-ps-failed.csv, the row of peer `dead`: weight sent - returned -
 * taken back (what left r for it for good), *msgs messages sent. 0 when r has no such row. */
static double sent_for_good(const char *dir, int r, int dead, long *msgs)
{
    char path[PATH_MAX + 32], line[512];
    snprintf(path, sizeof path, "%s/rank-%d-ps-failed.csv", dir, r);
    *msgs = 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    double w = 0;
    while (fgets(line, sizeof line, f)) {
        int peer;
        long sent_n, taken_n;
        double sent, ret, taken;
        if (sscanf(line, "%d,%ld,%lf,%lf,%ld,%lf", &peer, &sent_n, &sent, &ret, &taken_n, &taken) ==
                6 &&
            peer == dead) {
            w = sent - ret - taken;
            *msgs = sent_n;
        }
    }
    fclose(f);
    return w;
}

/* Push-sum: survivors + lost (+ in flight, where the transport cannot take messages back) = N,
 * and the ranks that sent to rank 2 reported it. exact: nothing may be in flight (hsshm). */
static void check_mass(const fault_run_t *f, int exact)
{
    double w = tr_summary_num(f->dir, "ps_weight_sum");
    double lost = tr_summary_num(f->dir, "ps_weight_lost");
    double lost_rank = tr_summary_rank_num(f->dir, DEAD, "ps_weight_lost");
    double sent = 0, recv = lost_received(f->dir, DEAD);
    int senders = 0;
    for (int r = 0; r < N_RANKS; r++) {
        if (r == DEAD) continue;
        long msgs;
        sent += sent_for_good(f->dir, r, DEAD, &msgs);
        if (msgs == 0) continue;
        senders++;
        char line[128];
        snprintf(line, sizeof line, "[%d] hearsay: warning: rank %d: peer rank 2 failed", r, r);
        ck_assert_msg(tr_log_has(f->dir, line), "%s: rank %d sent to rank 2 and did not report it",
                      f->dir, r);
    }
    double in_flight = sent - recv, gap = N_RANKS - w - lost;
    printf("%s: survivors %.12f + lost %.12f = %.12f (N - sum %.3g); in flight %.3g; %d "
           "senders\n",
           f->dir, w, lost, w + lost, gap, in_flight, senders);
    fflush(stdout);
    ck_assert_msg(w > 0 && lost > 0 && lost == lost_rank, "%s: survivors %g, lost %g (rank 2: %g)",
                  f->dir, w, lost, lost_rank);
    ck_assert_msg(senders >= 1 && isfinite(recv), "%s: no account of what was sent to rank 2",
                  f->dir);
    ck_assert_msg(fabs(gap - in_flight) < 1e-6,
                  "%s: survivors + lost = %.12g, N - that = %.3g, but %.3g was in flight", f->dir,
                  w + lost, gap, in_flight);
    ck_assert_msg(in_flight > -1e-6, "%s: negative in-flight weight %.3g", f->dir, in_flight);
    if (exact)
        ck_assert_msg(fabs(gap) < 1e-6, "%s: survivors + lost = %.12g, not %d", f->dir, w + lost,
                      N_RANKS);
}

static const char *const rdv_env[] = {"HS_SHM_RDV_BYTES=1024", NULL}; /* by address */
static const char *const eager_env[] = {"HS_SHM_RDV_BYTES=0", NULL};  /* always eager */

START_TEST(test_sgp_hsshm_eager)
{
    fault_run_t f;
    run_crash(&f, "sgp_hsshm_eager", "sgp", "hsshm", NULL, eager_env);
    check_finished(&f);
    check_mass(&f, 1);
}
END_TEST

START_TEST(test_sgp_hsshm_rdv)
{
    fault_run_t f;
    run_crash(&f, "sgp_hsshm_rdv", "sgp", "hsshm", NULL, rdv_env);
    check_finished(&f);
    check_mass(&f, 1);
}
END_TEST

START_TEST(test_sgp_tcp)
{
    fault_run_t f;
    run_crash(&f, "sgp_tcp", "sgp", "tcp", NULL, NULL);
    check_finished(&f);
    check_mass(&f, 0);
}
END_TEST

START_TEST(test_osgp_hsshm_eager)
{
    fault_run_t f;
    run_crash(&f, "osgp_hsshm_eager", "osgp", "hsshm", "--tau 3", eager_env);
    check_finished(&f);
    check_mass(&f, 1);
}
END_TEST

START_TEST(test_osgp_hsshm_rdv)
{
    fault_run_t f;
    run_crash(&f, "osgp_hsshm_rdv", "osgp", "hsshm", "--tau 3", rdv_env);
    check_finished(&f);
    check_mass(&f, 1);
}
END_TEST

START_TEST(test_osgp_tcp)
{
    fault_run_t f;
    run_crash(&f, "osgp_tcp", "osgp", "tcp", "--tau 3", NULL);
    check_finished(&f);
    check_mass(&f, 0);
}
END_TEST

/* dpsgd, allreduce and localsgd on both transports: loop index = algo * 2 + transport */
static const char *const stop_algo[] = {"dpsgd", "allreduce", "localsgd"};
static const char *const prov[] = {"hsshm", "tcp"};

START_TEST(test_stops)
{
    const char *algo = stop_algo[_i / 2], *p = prov[_i % 2];
    char name[64];
    snprintf(name, sizeof name, "%s_%s", algo, p);
    fault_run_t f;
    run_crash(&f, name, algo, p, NULL, NULL);
    check_stopped(&f, algo);
}
END_TEST

/* easgd and eamsgd (rank 2 owns one of the four center shards) on both transports */
static const char *const elastic_algo[] = {"easgd", "eamsgd"};

START_TEST(test_elastic)
{
    const char *algo = elastic_algo[_i / 2], *p = prov[_i % 2];
    char name[64];
    snprintf(name, sizeof name, "%s_%s", algo, p);
    fault_run_t f;
    run_crash(&f, name, algo, p, NULL, NULL);
    check_finished(&f);
    ck_assert(tr_log_has(f.dir, "center shard"));
}
END_TEST

/* AD-PSGD on both transports: rank 2 is passive (bipartite graph, even ranks passive); the
 * actives that draw it find it dead and average with their other neighbours, rank 0 (passive)
 * hears of it, and every survivor finishes. */
START_TEST(test_adpsgd)
{
    const char *p = prov[_i];
    char name[64];
    snprintf(name, sizeof name, "adpsgd_%s", p);
    fault_run_t f;
    run_crash(&f, name, "adpsgd", p, NULL, NULL);
    check_finished(&f);
    ck_assert(tr_log_has(f.dir, "peer rank 2 failed"));
}
END_TEST

/* EASGD whose only center owner (a parameter server) crashes: the workers go on alone. */
START_TEST(test_easgd_server_hsshm)
{
    fault_run_t f;
    run_crash(&f, "easgd_server_hsshm", "easgd", "hsshm", "--centers 2", NULL);
    check_finished(&f);
    ck_assert(tr_log_has(f.dir, "owner of center shard 0 unreachable"));
}
END_TEST

/* The global leader of leader-SGD crashes: with --seed 35, a Dirichlet(0.05) split and the
 * He initialisation, rank 2's shard is nearly one class, so it leads from the first iterations
 * on; rank 0's rank-0-leader.csv shows rank 2 leading until it crashed and another leader at
 * the end. The seed is chosen for a margin that timing cannot undo: the leader is the lowest
 * recent loss at the time of the election, so a rank running ahead (a starved rank 2, beside
 * a CPU-bound load) wins on more steps, not on an easier shard. With --seed 2 (until
 * 2026-11-28) rank 0's shard was nearly one class too, and a loaded run saw rank 0 lead
 * throughout (its own recent loss ~10x below rank 2's, several iterations ahead). Measured by
 * `hearsay sim --algo local` over 62 iterations: with seed 35 rank 2's recent loss (mean of 10
 * batches) at iterations 15-19 is 22x below the lowest any other rank reaches in the whole
 * run; seeds 1-60 searched, the next best is 12 (11x), and seed 2 had 0.5x early on. */
START_TEST(test_lsgd_leader)
{
    const char *p = prov[_i];
    char name[64];
    snprintf(name, sizeof name, "lsgd_leader_%s", p);
    fault_run_t f;
    run_crash(&f, name, "lsgd", p, "--shard dirichlet:0.05 --seed 35 --init he", NULL);
    check_finished(&f);
    char path[PATH_MAX + 32], line[256];
    snprintf(path, sizeof path, "%s/rank-0-leader.csv", f.dir);
    FILE *fp = fopen(path, "r");
    ck_assert_ptr_nonnull(fp);
    long it, led_until = -1, last = -1;
    double loss;
    int leader;
    while (fgets(line, sizeof line, fp)) {
        if (sscanf(line, "%ld,%lf,%d", &it, &loss, &leader) != 3) continue;
        if (leader == DEAD) led_until = it;
        last = leader;
    }
    fclose(fp);
    /* rank 2 led, and not after its crash (at the start of its iteration 20; rank 0 may be a
     * little behind or ahead of it: the leader table ages entries by time, and on a loaded
     * 2-core host rank 0 was seen 5 iterations ahead before it noticed). How long it led
     * before the crash is not checked: beside 8 CPU-bound processes (scripts/test-load.sh)
     * rank 2 was starved for over AGE_S (1 s) and aged out at iteration 9, as it should. */
    ck_assert_msg(led_until >= 0 && led_until <= 26,
                  "%s: rank 2 led until iteration %ld, not until its crash at 20", f.dir,
                  led_until);
    ck_assert_msg(last >= 0 && last != DEAD, "%s: rank 2 still leads at the end (%ld)", f.dir,
                  last);
}
END_TEST

/* 1 when the two files hold the same bytes (and exist, not empty). */
static int same_file(const char *p, const char *q)
{
    FILE *a = fopen(p, "rb"), *b = fopen(q, "rb");
    int same = a && b, ca = 0, cb = 0;
    long n = 0;
    while (same) {
        ca = fgetc(a);
        cb = fgetc(b);
        if (ca != cb) same = 0;
        if (ca == EOF) break;
        n++;
    }
    if (a) fclose(a);
    if (b) fclose(b);
    return same && n > 0;
}

/* 1 when DIR/ckpt holds a temporary file of a write in progress. */
static int ckpt_tmp_exists(const char *dir)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/ckpt", dir);
    DIR *d = opendir(path);
    if (!d) return 0;
    int found = 0;
    for (struct dirent *e; !found && (e = readdir(d));) found = strstr(e->d_name, ".tmp") != NULL;
    closedir(d);
    return found;
}

#define CKPT_TASK                                                                                  \
    "--algo allreduce --model mlp:16-32-4 --data gauss:dim=16,classes=4,train=2000,test=500 "      \
    "--batch 32 --threads 1 --quiet --epochs 2 --dump-params"

/* kill -9 while the ranks hold a checkpoint write (not the first) before its rename: the
 * previous checkpoint is still there, whole (it reads back, checksum included), and a resume
 * from it ends at the very parameters of a run that was never interrupted (all-reduce is
 * deterministic). */
START_TEST(test_kill_during_checkpoint)
{
    char full[PATH_MAX], dir[PATH_MAX], res[PATH_MAX], log[PATH_MAX + 8], args[1024];
    tr_workdir_path(full, sizeof full, "ckpt_full");
    tr_workdir_path(dir, sizeof dir, "ckpt_killed");
    tr_workdir_path(res, sizeof res, "ckpt_resumed");
    int rc = tr_train_job(2, NULL, full, CKPT_TASK, JOB_LIMIT_S, NULL);
    if (rc) tr_show_log(full);
    ck_assert_int_eq(rc, 0);
    /* checkpoints at iterations 16, 32, 48 (ipe 31 with 2 ranks, every 0.5 epoch) */
    tr_rm_rf(dir);
    snprintf(log, sizeof log, "%s.log", dir);
    tr_args_t a;
    tr_args_init(&a);
    tr_args_add(&a, tr_hearsay());
    tr_args_split(&a, "run -n 2 --");
    tr_args_add(&a, tr_hearsay());
    tr_args_split(&a, "train " CKPT_TASK " --checkpoint-every 0.5 --out");
    tr_args_add(&a, dir);
    const char *env[] = {"HS_TEST_CKPT_PAUSE=1", NULL};
    tr_opts_t o = {.log = log, .env = env};
    tr_job_t j;
    ck_assert_int_eq(tr_start(&j, TR_ARGV(&a), &o), 0);
    tr_args_free(&a);
    /* A set committed (its manifest in place) and a temporary file: a later part is held
     * before its rename (each rank passes the barrier after its first part before it can
     * start the next, and rank 0 writes the manifest after that barrier). */
    char m16[PATH_MAX + 32], m32[PATH_MAX + 32];
    hs_ckpt_manifest_path(m16, sizeof m16, dir, 16);
    hs_ckpt_manifest_path(m32, sizeof m32, dir, 32);
    int held = 0;
    for (double t0 = hs_now(); !held && hs_now() - t0 < 30; hs_sleep(0.005))
        held = ckpt_tmp_exists(dir) && (access(m16, F_OK) == 0 || access(m32, F_OK) == 0);
    int st = tr_finish(&j, 0); /* SIGKILL to every process of the job */
    tr_job_free(&j);
    ck_assert_msg(held, "never saw a second checkpoint being written");
    ck_assert_msg(st == TR_TIMEOUT, "the job ended by itself (%s) instead of being killed",
                  tr_status_text(st));
    ck_assert_msg(ckpt_tmp_exists(dir), "no write was in progress when killed");
    /* The newest complete set is whole and an earlier one (16 or 32: on a loaded machine the
     * poll may see the second write only after it, but it is always one before the write
     * that was killed): both parts read back at its iteration. */
    long at = -1;
    ck_assert_msg(hs_ckpt_set_find(dir, 2, &at, NULL) == 0, "%s", hs_last_error());
    ck_assert_msg(at == 16 || at == 32, "checkpoint set at %ld", at);
    for (int r = 0; r < 2; r++) {
        char p[PATH_MAX + 32];
        hs_ckpt_t c;
        ck_assert_int_eq(hs_ckpt_part_path(p, sizeof p, dir, r, at), 0);
        ck_assert_int_eq(hs_ckpt_read(p, &c), 0);
        ck_assert_int_eq(c.iteration, at);
        hs_ckpt_free(&c);
    }
    snprintf(args, sizeof args, CKPT_TASK " --resume '%s'", dir);
    rc = tr_train_job(2, NULL, res, args, JOB_LIMIT_S, NULL);
    if (rc) tr_show_log(res);
    ck_assert_int_eq(rc, 0);
    for (int r = 0; r < 2; r++) {
        char csv[PATH_MAX + 32], line[256];
        snprintf(csv, sizeof csv, "%s/rank-%d.csv", res, r);
        FILE *fp = fopen(csv, "r");
        ck_assert_ptr_nonnull(fp);
        ck_assert(fgets(line, sizeof line, fp) && fgets(line, sizeof line, fp));
        fclose(fp);
        ck_assert_int_eq(strtol(line, NULL, 10), at + 1); /* it went on from the checkpoint */
        char pa[PATH_MAX + 32], pb[PATH_MAX + 32];
        snprintf(pa, sizeof pa, "%s/rank-%d.final.f32", full, r);
        snprintf(pb, sizeof pb, "%s/rank-%d.final.f32", res, r);
        ck_assert_msg(same_file(pa, pb), "rank %d: the resumed run ends elsewhere", r);
    }
}
END_TEST

/* A hostile rank in a live job (tests/rogue_worker): rank 2 of 3 joins as a training rank does,
 * then sends every other rank bursts of malformed messages on every training tag. The
 * decoders in the receive path of each algorithm refuse them: no honest rank is killed by a
 * signal or hangs; each finishes (what it received was ignored or rejected) or stops with a
 * message, within the time limit. Seeded: each algorithm gets two seeds. */
static const char *const rogue_algos[] = {"sgp", "dpsgd", "allreduce", "easgd", "lsgd"};

START_TEST(test_rogue_rank)
{
    const char *algo = rogue_algos[_i / 2];
    char dir[PATH_MAX], name[64], log[PATH_MAX + 8], seed[16];
    snprintf(name, sizeof name, "rogue_%s_%d", algo, _i % 2);
    tr_workdir_path(dir, sizeof dir, name);
    snprintf(log, sizeof log, "%s.log", dir);
    snprintf(seed, sizeof seed, "%d", 11 + _i);
    tr_rm_rf(dir);
    tr_args_t a;
    tr_args_init(&a);
    tr_args_add(&a, tr_hearsay());
    tr_args_split(&a, "run --keep-going -n 3 --");
    tr_args_add(&a, tr_helper("rogue_worker"));
    tr_args_add(&a, "2");
    tr_args_add(&a, seed);
    tr_args_add(&a, "--");
    tr_args_add(&a, tr_hearsay());
    tr_args_add(&a, "train");
    tr_args_addf(&a, "--algo");
    tr_args_add(&a, algo);
    tr_args_split(&a, "--model mlp:16-32-4 --data gauss:dim=16,classes=4,train=4000,test=500 "
                      "--batch 16 --epochs 1 --threads 1 --quiet --comm-timeout 5 "
                      "--drain-timeout 3 --straggler pause:all:p=1:fixed=2ms");
    tr_args_add(&a, "--out");
    tr_args_add(&a, dir);
    tr_opts_t o = {.log = log};
    int st = tr_cmd(TR_ARGV(&a), &o, 80, NULL);
    tr_args_free(&a);
    if (st == TR_TIMEOUT || TR_IS_SIGNALED(st)) tr_show_log(dir);
    ck_assert_msg(st != TR_TIMEOUT, "%s: the job hung with a rogue rank", algo);
    ck_assert_msg(!TR_IS_SIGNALED(st), "%s: the job died of a signal", algo);
    ck_assert_msg(tr_file_has(log, "rogue: sent"), "%s: the rogue rank did not get to send", algo);
    for (int r = 0; r < 2; r++) {
        char line[96];
        snprintf(line, sizeof line, "hearsay run: rank %d killed by signal", r);
        ck_assert_msg(!tr_file_has(log, line), "%s: rank %d was killed by a signal", algo, r);
        snprintf(line, sizeof line, "hearsay run: rank %d exited with status", r);
        if (tr_file_has(log, line)) { /* an honest rank that stopped said why */
            snprintf(line, sizeof line, "hearsay train: rank %d:", r);
            ck_assert_msg(tr_file_has(log, line), "%s: rank %d stopped without a message", algo, r);
        }
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("faults");
    const char *why = tr_require(NULL);
    TCase *tc = tcase_create("pushsum");
    tcase_set_timeout(tc, 90);
    TR_ADD_TEST(tc, test_sgp_hsshm_eager, why);
    TR_ADD_TEST(tc, test_sgp_hsshm_rdv, why);
    TR_ADD_TEST(tc, test_sgp_tcp, why);
    TR_ADD_TEST(tc, test_osgp_hsshm_eager, why);
    TR_ADD_TEST(tc, test_osgp_hsshm_rdv, why);
    TR_ADD_TEST(tc, test_osgp_tcp, why);
    suite_add_tcase(s, tc);
    tc = tcase_create("others");
    tcase_set_timeout(tc, 90);
    if (why) {
        tr_skip("test_stops, test_elastic, test_easgd_server_hsshm, test_lsgd_leader", "%s", why);
    } else {
        tcase_add_loop_test(tc, test_stops, 0, 2 * (int)HS_ARRAY_LEN(stop_algo));
        tcase_add_loop_test(tc, test_adpsgd, 0, 2);
        tcase_add_loop_test(tc, test_elastic, 0, 4);
        tcase_add_test(tc, test_easgd_server_hsshm);
        tcase_add_loop_test(tc, test_lsgd_leader, 0, 2);
    }
    suite_add_tcase(s, tc);
    tc = tcase_create("rogue");
    tcase_set_timeout(tc, 100);
    const char *no_rogue = why ? why : tr_helper("rogue_worker") ? NULL : tr_why();
    if (no_rogue)
        tr_skip("test_rogue_rank", "%s", no_rogue);
    else
        tcase_add_loop_test(tc, test_rogue_rank, 0, 2 * (int)HS_ARRAY_LEN(rogue_algos));
    suite_add_tcase(s, tc);
    tc = tcase_create("checkpoint");
    tcase_set_timeout(tc, 120);
    TR_ADD_TEST(tc, test_kill_during_checkpoint, why);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (tr_workdir_init("faults") < 0) return 1;
    return tr_run_suite(suite());
}
