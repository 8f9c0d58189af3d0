/*
 * tests/test_easgd.c — EASGD / EAMSGD and leader-SGD.
 *
 * Unit: leader election and groups (optim/lsgd.h), the triple-buffered snapshot under a
 * concurrent publisher (no torn copy ever passes) and under a publisher that republishes during
 * every copy (a starved reader still gets a whole snapshot: the Ethernet study's failure).
 * Multi-process (`hearsay run`, $HS_BIN; every job through the harness, tests/runlib.h, --provider
 * tcp because libfabric 1.17's shm loses early small messages): center conservation with concurrent
 * adds (tests/center_worker), a dead center owner, convergence to the single-worker optimum of a
 * convex task (logistic regression with weight decay), a crashed worker, and a paused worker that
 * does not stall the others.
 */
#include "hearsay/common.h"
#include "optim/center.h"
#include "optim/elastic_wire.h"
#include "optim/lsgd.h"

#include <check.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/runlib.h"

#define TASK                                                                                       \
    "--model logreg:16-4 --data gauss:dim=16,classes=4,train=2000,test=500 --batch 32 "            \
    "--threads 1 --quiet --comm-timeout 10 --drain-timeout 5 --provider tcp"

/* --- unit ------------------------------------------------------------------------------ */

/* Issue 17 item 2: --centers is parsed strictly, every rank number range-checked (strtol used to
 * take "+1", " 1", "1-+2", a trailing comma and overflowing numbers). With size <= 0 (the job
 * size unknown, at start) only the grammar and the numbers' bounds are checked. */
START_TEST(test_centers_spec)
{
    int *own = NULL, n = 0;
    ck_assert_int_eq(hs_center_parse_owners("0,2-3", 4, &own, &n), 0);
    ck_assert(n == 3 && own[0] == 0 && own[1] == 2 && own[2] == 3);
    free(own);
    ck_assert_int_eq(hs_center_parse_owners("3,1,1", 4, &own, &n), 0);
    ck_assert(n == 2 && own[0] == 1 && own[1] == 3);
    free(own);
    ck_assert_int_eq(hs_center_parse_owners("all", 3, &own, &n), 0);
    ck_assert(n == 3 && own[2] == 2);
    free(own);
    ck_assert_int_eq(hs_center_parse_owners(NULL, 2, &own, &n), 0);
    ck_assert_int_eq(n, 2);
    free(own);
    static const struct {
        const char *spec, *needle;
    } bad[] = {
        {"1,", "empty entry"},   {",1", "empty entry"},
        {"1,,2", "empty entry"}, {"-1", "'-1'"},
        {"1-", "'1-'"},          {"4", "not within ranks 0-3"},
        {"2-1", "'2-1'"},        {"99999999999999999999", "'99999999999999999999'"},
        {"+1", "'+1'"},          {" 1", "' 1'"},
        {"1 ", "'1 '"},          {"0x1", "'0x1'"},
        {"1-+2", "'1-+2'"},      {"1e3", "'1e3'"},
        {"one", "'one'"},
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(bad); i++) {
        hs_error_clear();
        own = NULL;
        ck_assert_msg(hs_center_parse_owners(bad[i].spec, 4, &own, &n) == -EINVAL, "'%s' accepted",
                      bad[i].spec);
        ck_assert_ptr_null(own);
        ck_assert_msg(strstr(hs_last_error(), "--centers") &&
                          strstr(hs_last_error(), bad[i].needle),
                      "'%s': message '%s' lacks '%s'", bad[i].spec, hs_last_error(), bad[i].needle);
        if (strcmp(bad[i].spec, "4")) /* the grammar alone refuses the others */
            ck_assert_msg(hs_center_parse_owners(bad[i].spec, 0, NULL, NULL) == -EINVAL,
                          "'%s' accepted without a job size", bad[i].spec);
    }
    /* Without a job size any rank up to the largest job passes. */
    ck_assert_int_eq(hs_center_parse_owners("4,100-200", 0, NULL, NULL), 0);
    ck_assert_int_eq(hs_center_parse_owners("2147483648", 0, NULL, NULL), -EINVAL);
}
END_TEST

/* Issue 17 item 8: the elastic header check is overflow-safe. It computed 64 + count * 4, which
 * wraps for count = 2^62 (to 64: a bare header passed for 2^62 floats) and for 2^62 + k (to
 * 64 + 4k). */
START_TEST(test_el_hdr_check_overflow)
{
    hs_el_hdr_v1_t h;
    hs_el_hdr_init(&h, HS_EL_DATA, 3, 0, 3, 0);
    ck_assert_int_eq(hs_el_hdr_check(&h, 64 + 12, 3), 0);
    ck_assert_int_eq(hs_el_hdr_check(&h, 64 + 16, 3), -EPROTO);
    ck_assert_int_eq(hs_el_hdr_check(&h, 64 + 14, 3), -EPROTO); /* not whole floats */
    ck_assert_int_eq(hs_el_hdr_check(&h, 64 + 12, 2), -EPROTO); /* another sender */
    ck_assert_int_eq(hs_el_hdr_check(&h, 63, 3), -EPROTO);
    static const struct {
        uint64_t count;
        size_t len;
    } bad[] = {
        {1ull << 62, 64},
        {(1ull << 62) + 1, 68},
        {(1ull << 62) + 3, 76},
        {1ull << 63, 64},
        {3ull << 62, 64},
        {UINT64_MAX, 60},
        {UINT64_MAX, 64},
        {UINT64_MAX - 15, 0},
        {(UINT64_MAX >> 2) + 1, 64},
        {(UINT64_MAX >> 2) + 17, 128},
        {UINT64_MAX >> 2, SIZE_MAX - 3},
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(bad); i++) {
        h.count = bad[i].count;
        hs_error_clear();
        ck_assert_msg(hs_el_hdr_check(&h, bad[i].len, 3) == -EPROTO,
                      "count %llu in %zu bytes accepted", (unsigned long long)bad[i].count,
                      bad[i].len);
        ck_assert_ptr_nonnull(strstr(hs_last_error(), "rank 3"));
    }
}
END_TEST

START_TEST(test_elect)
{
    hs_lsgd_entry_t tab[6] = {0};
    double now = 100;
    ck_assert_int_eq(hs_lsgd_elect(tab, NULL, 0, 6, 0, now, 1, 50, 10), -1);
    double loss[6] = {0.9, 0.4, 0.7, 0.4, 1.5, 0.2};
    for (int r = 0; r < 6; r++) hs_lsgd_note(tab, r, loss[r], 10, now, 50);
    /* the minimum; independent reference: a naive scan */
    int ref = 0;
    for (int r = 1; r < 6; r++)
        if (loss[r] < loss[ref]) ref = r;
    ck_assert_int_eq(hs_lsgd_elect(tab, NULL, 0, 6, 0, now, 1, 50, 10), ref);
    ck_assert_int_eq(ref, 5);
    /* ties go to the lowest rank; groups restrict the range */
    ck_assert_int_eq(hs_lsgd_elect(tab, NULL, 0, 5, 0, now, 1, 50, 10), 1);
    ck_assert_int_eq(hs_lsgd_elect(tab, NULL, 2, 5, 2, now, 1, 50, 10), 3);
    /* a dead rank is skipped, the next best wins */
    char dead[6] = {0, 0, 0, 0, 0, 1};
    ck_assert_int_eq(hs_lsgd_elect(tab, dead, 0, 6, 0, now, 1, 50, 10), 1);
    /* an older version never replaces a newer one */
    hs_lsgd_note(tab, 4, 0.01, 5, now, 50);
    ck_assert(tab[4].loss == 1.5);
    /* stale: rank 5 not heard for 2 s and 20 iterations ages out; self never does */
    hs_lsgd_note(tab, 5, 0.2, 11, now - 2, 30);
    ck_assert_int_eq(hs_lsgd_elect(tab, NULL, 0, 6, 0, now, 1, 50, 10), 1);
    ck_assert_int_eq(hs_lsgd_elect(tab, NULL, 0, 6, 5, now, 1, 50, 10), 5);
    /* old in seconds but recent in iterations (a slow machine): still eligible */
    ck_assert_int_eq(hs_lsgd_elect(tab, NULL, 0, 6, 0, now, 1, 35, 10), 5);
    /* an update brings it back */
    hs_lsgd_note(tab, 5, 0.3, 12, now, 50);
    ck_assert_int_eq(hs_lsgd_elect(tab, NULL, 0, 6, 0, now, 1, 50, 10), 5);
}
END_TEST

START_TEST(test_groups)
{
    for (int size = 1; size <= 9; size++)
        for (int g = 1; g <= size; g++) {
            int cover[16] = {0}, prev_hi = 0;
            for (int r = 0; r < size; r++) {
                int lo, hi;
                hs_lsgd_group(r, size, g, &lo, &hi);
                ck_assert(lo <= r && r < hi);
                ck_assert(hi - lo >= size / g && hi - lo <= (size + g - 1) / g);
                if (lo == prev_hi) prev_hi = hi, cover[lo] = 1;
            }
            ck_assert_int_eq(prev_hi, size);
            int ng = 0;
            for (int r = 0; r < size; r++) ng += cover[r];
            ck_assert_int_eq(ng, g);
        }
}
END_TEST

typedef struct {
    hs_snapshot_t *s;
    int rounds;
} pub_arg_t;

static void *publisher(void *p)
{
    pub_arg_t *a = p;
    float *v = malloc(a->s->n * sizeof *v);
    for (int k = 1; k <= a->rounds; k++) {
        for (size_t i = 0; i < a->s->n; i++) v[i] = (float)k;
        hs_snapshot_publish(a->s, v, k, (double)k);
    }
    free(v);
    return NULL;
}

/* A reader racing a publisher never returns a mixed copy: all elements equal the iteration
 * stored with them, and versions never go back. */
START_TEST(test_snapshot_no_tear)
{
    hs_snapshot_t s;
    ck_assert_int_eq(hs_snapshot_init(&s, 20000), 0);
    float *dst = malloc(s.n * sizeof *dst);
    uint64_t ver, chk;
    long it;
    double loss;
    ck_assert_int_eq(hs_snapshot_read(&s, dst, &ver, &it, &loss, &chk), -EAGAIN);
    pub_arg_t pa = {&s, 3000};
    pthread_t th;
    pthread_create(&th, NULL, publisher, &pa);
    uint64_t last = 0;
    int ok = 0;
    while (ok < 2000) {
        int rc = hs_snapshot_read(&s, dst, &ver, &it, &loss, &chk);
        if (rc == -EAGAIN) continue;
        ck_assert_int_eq(rc, 0);
        ck_assert(ver % 2 == 0 && ver >= last);
        last = ver;
        for (size_t i = 0; i < s.n; i++)
            ck_assert_msg(dst[i] == (float)it, "torn copy: element %zu is %g in version %ld", i,
                          dst[i], it);
        ck_assert(chk == hs_el_checksum(dst, s.n));
        ok++;
        if (it == pa.rounds) break;
    }
    pthread_join(th, NULL);
    ck_assert_int_eq(s.skipped, 0); /* one reader never keeps the publisher from publishing */
    ck_assert_int_eq(hs_snapshot_read(&s, dst, &ver, &it, &loss, &chk), 0);
    ck_assert_int_eq(it, pa.rounds);
    ck_assert(ver == 2 * (uint64_t)pa.rounds);
    free(dst);
    hs_snapshot_free(&s);
}
END_TEST

/* The Ethernet study's failure (docs/ethernet.md, "Found on the way"): a leader's service thread
 * starved of CPU copied its 1.6 MB snapshot while the training thread republished it, and gave
 * up after 1000 torn tries, which ended the leader. Deterministic here: the test hook runs in
 * the middle of every copy and publishes `per_read` new versions (from the reader's thread; one
 * publisher at a time). The read must still return a whole, consistent snapshot (the one
 * current when it started), never an error, and the publisher must never be kept from
 * publishing. */
typedef struct {
    hs_snapshot_t *s;
    float *v;
    int per_read, k, hooked;
} starve_t;

static void publish_during_read(void *p)
{
    starve_t *c = p;
    c->hooked++;
    for (int j = 0; j < c->per_read; j++) {
        c->k++;
        for (size_t i = 0; i < c->s->n; i++) c->v[i] = (float)c->k;
        ck_assert_int_eq(hs_snapshot_publish(c->s, c->v, c->k, (double)c->k), 0);
    }
}

START_TEST(test_snapshot_starved_reader)
{
    hs_snapshot_t s;
    ck_assert_int_eq(hs_snapshot_init(&s, 400000), 0); /* 1.6 MB, as in the study */
    float *dst = malloc(s.n * sizeof *dst);
    starve_t c = {.s = &s, .v = malloc(s.n * sizeof(float)), .per_read = 3, .k = 1};
    for (size_t i = 0; i < s.n; i++) c.v[i] = 1.0f;
    hs_snapshot_publish(&s, c.v, 1, 1.0);
    s.test_during_read = publish_during_read;
    s.test_ctx = &c;
    uint64_t ver = 0, chk = 0, last = 0;
    long it = -1;
    double loss = NAN;
    for (int round = 0; round < 20; round++) {
        int before = c.k;
        int rc = hs_snapshot_read(&s, dst, &ver, &it, &loss, &chk);
        ck_assert_msg(rc == 0, "read %d under a publishing writer: %d (%s)", round, rc,
                      hs_last_error());
        ck_assert_int_eq(c.k, before + c.per_read); /* every publish went through */
        /* the snapshot current when the read started, whole */
        ck_assert_int_eq(it, before);
        ck_assert(loss == (double)before);
        ck_assert(ver % 2 == 0 && ver > last && ver == 2 * (uint64_t)before);
        last = ver;
        size_t bad = 0;
        for (size_t i = 0; i < s.n; i++) bad += dst[i] != (float)it;
        ck_assert_msg(bad == 0, "torn copy: %zu elements are not %ld", bad, it);
        ck_assert(chk == hs_el_checksum(dst, s.n));
    }
    /* without the hook the next read is the latest publish */
    s.test_during_read = NULL;
    ck_assert_int_eq(hs_snapshot_read(&s, dst, &ver, &it, &loss, &chk), 0);
    ck_assert_int_eq(it, c.k);
    ck_assert(dst[0] == (float)c.k && dst[s.n - 1] == (float)c.k);
    ck_assert_int_eq(s.skipped, 0);
    free(c.v);
    free(dst);
    hs_snapshot_free(&s);
}
END_TEST

/* --- multi-process --------------------------------------------------------------------- */

/* Exit status of a rank that crashes by injection (HS_EXIT_CRASH in runtime/train_dist.c):
 * `hearsay run --keep-going` lets the others finish and then exits with it. */
#define CRASH_STATUS 70

/* Count "CENTER_OK" lines of a center_worker job on center path `path` (rma / service /
 * auto); a forced path must be the one the ranks report. */
static int center_job(int n, const char *args, const char *name, const char *path)
{
    char dir[PATH_MAX], log[PATH_MAX + 8], want[64], center[64];
    tr_workdir_path(dir, sizeof dir, name);
    snprintf(log, sizeof log, "%s.log", dir);
    snprintf(want, sizeof want, "path %s", path);
    snprintf(center, sizeof center, "HS_CENTER_PATH=%s", path);
    tr_args_t a;
    tr_args_init(&a);
    tr_args_add(&a, tr_hearsay());
    tr_args_add(&a, "run");
    tr_args_add(&a, "-n");
    tr_args_addf(&a, "%d", n);
    tr_args_add(&a, "--");
    tr_args_add(&a, tr_helper("center_worker"));
    tr_args_add(&a, "conserve");
    tr_args_split(&a, args);
    const char *env[] = {"HS_PROVIDER=tcp", center, NULL};
    tr_opts_t o = {.env = env, .log = log};
    int st = tr_cmd(TR_ARGV(&a), &o, 60, NULL);
    tr_args_free(&a);
    FILE *f = fopen(log, "r");
    int ok = 0;
    char line[1024];
    while (f && fgets(line, sizeof line, f)) {
        if (strstr(line, "CENTER_OK") && (!strcmp(path, "auto") || strstr(line, want))) ok++;
        if (strstr(line, "CENTER_FAIL")) fprintf(stderr, "%s", line);
    }
    if (f) fclose(f);
    if (st != 0 || ok < 1) tr_show_log(dir);
    return st == 0 ? ok : -1;
}

/* NULL when the one-sided (RMA) center path is there: a 2-rank center_worker job on path auto
 * takes it; else why not (main() probes once, before building the suite). */
static const char *rma_missing(void)
{
    char dir[PATH_MAX], log[PATH_MAX + 8];
    tr_workdir_path(dir, sizeof dir, "cons_probe");
    snprintf(log, sizeof log, "%s.log", dir);
    int ok = center_job(2, "1 10 all", "cons_probe", "auto");
    if (ok != 2) return "the probe job on center path auto failed (its log is above)";
    if (!tr_file_has(log, "path rma")) return "no float atomics on tcp: RMA center path not tested";
    return NULL;
}

/* N workers add known integer differences concurrently: the center ends exactly at init + sum,
 * sharded over every rank and held by one or two server ranks; on the service-thread path and
 * on the one-sided path (added only where the provider has float atomics). */
static void conservation(const char *path)
{
    ck_assert_int_eq(center_job(4, "150 1001 all", "cons_all", path), 4);
    ck_assert_int_eq(center_job(4, "150 333 0", "cons_one", path), 4);
    ck_assert_int_eq(center_job(3, "100 50 1-2", "cons_two", path), 3);
}

START_TEST(test_center_conservation)
{
    conservation("service");
}
END_TEST

START_TEST(test_center_conservation_rma)
{
    conservation("rma");
}
END_TEST

/* A center owner that dies: the others finish, its shard is reported lost, the rest exact. */
START_TEST(test_center_dead_owner)
{
    ck_assert_int_eq(center_job(4, "60 400 all 2", "cons_dead", "service"), 3);
}
END_TEST

START_TEST(test_center_dead_owner_rma)
{
    ck_assert_int_eq(center_job(4, "60 400 all 2", "cons_dead", "rma"), 3);
}
END_TEST

/* Convex task: both reach the single-worker optimum's test loss within tolerance. */
static double reference_loss(void)
{
    static double ref = NAN;
    if (isfinite(ref)) return ref;
    char dir[PATH_MAX];
    tr_workdir_path(dir, sizeof dir, "ref");
    ck_assert_int_eq(
        tr_train_job(0, NULL, dir, TASK " --algo local --epochs 60 --lr 0.1", 60, NULL), 0);
    ref = tr_summary_num(dir, "final_test_loss");
    ck_assert(isfinite(ref) && ref < 0.05);
    return ref;
}

static void converges(const char *algo, const char *extra)
{
    double ref = reference_loss();
    char dir[PATH_MAX], args[1024];
    char name[64];
    snprintf(name, sizeof name, "conv_%s", algo);
    tr_workdir_path(dir, sizeof dir, name);
    snprintf(args, sizeof args, "%s --algo %s --epochs 20 --lr 0.1 %s", TASK, algo, extra);
    int st = tr_train_job(4, "", dir, args, 90, NULL);
    if (st) tr_show_log(dir);
    ck_assert_int_eq(st, 0);
    double loss = tr_summary_num(dir, "final_test_loss");
    ck_assert_msg(fabs(loss - ref) < 0.01 + 0.5 * ref, "%s: final test loss %g, optimum %g", algo,
                  loss, ref);
    /* these algorithms declare that they need the transport's progress thread (HS_ALGO_PROGRESS):
     * on by default, and the run says so */
    ck_assert_msg(tr_summary_has(dir, "\"progress_thread\": true"), "%s: no progress thread", algo);
}

/* --no-progress-thread wins over the algorithm's default, with a warning; SGP, which does
 * not declare the need, runs without one. */
START_TEST(test_progress_thread_setting)
{
    char dir[PATH_MAX], args[1024];
    tr_workdir_path(dir, sizeof dir, "pt_off");
    snprintf(args, sizeof args, "%s --algo easgd --epochs 2 --no-progress-thread", TASK);
    int st = tr_train_job(2, "", dir, args, 60, NULL);
    if (st) tr_show_log(dir);
    ck_assert_int_eq(st, 0);
    ck_assert(tr_summary_has(dir, "\"progress_thread\": false"));
    ck_assert(tr_log_has(dir, "without a progress thread"));
    tr_workdir_path(dir, sizeof dir, "pt_sgp");
    snprintf(args, sizeof args, "%s --algo sgp --epochs 2", TASK);
    st = tr_train_job(2, "", dir, args, 60, NULL);
    if (st) tr_show_log(dir);
    ck_assert_int_eq(st, 0);
    ck_assert(tr_summary_has(dir, "\"progress_thread\": false"));
    ck_assert(!tr_log_has(dir, "without a progress thread"));
}
END_TEST

START_TEST(test_easgd_converges)
{
    converges("easgd", "");
}
END_TEST

START_TEST(test_eamsgd_converges)
{
    converges("eamsgd", "--tau 2");
}
END_TEST

START_TEST(test_lsgd_converges)
{
    converges("lsgd", "--groups 2 --tau 2");
}
END_TEST

/* A crashed worker stops neither algorithm: the others finish and report it. */
static void survives_crash(const char *algo)
{
    char dir[PATH_MAX], args[1024], name[64];
    snprintf(name, sizeof name, "crash_%s", algo);
    tr_workdir_path(dir, sizeof dir, name);
    snprintf(args, sizeof args, "%s --algo %s --epochs 4 --straggler crash:2:iter=20", TASK, algo);
    int st = tr_train_job(4, "--keep-going", dir, args, 90, NULL);
    if (st != CRASH_STATUS) tr_show_log(dir);
    ck_assert_int_eq(st, CRASH_STATUS);
    ck_assert_msg(tr_summary_has(dir, "rank 2 failed at/after iteration"), "%s: crash not reported",
                  algo);
    ck_assert(tr_summary_num(dir, "final_test_loss") < 0.2);
}

START_TEST(test_easgd_crash)
{
    survives_crash("easgd");
}
END_TEST

START_TEST(test_lsgd_crash)
{
    survives_crash("lsgd");
}
END_TEST

/* Rows (iteration, wall_s) of DIR/rank-R.csv. */
static int read_clock(const char *dir, int r, double *wall, int cap)
{
    char path[PATH_MAX + 32], line[1024];
    snprintf(path, sizeof path, "%s/rank-%d.csv", dir, r);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int n = 0;
    if (!fgets(line, sizeof line, f)) n = 0;
    while (n < cap && fgets(line, sizeof line, f)) {
        char *p = strchr(line, ',');
        wall[n++] = p ? strtod(p + 1, NULL) : NAN;
    }
    fclose(f);
    return n;
}

/* Rank 1 pauses 2 s at iteration 10: the others keep iterating during the pause. */
static void pause_no_stall(const char *algo)
{
    char dir[PATH_MAX], args[1024], name[64];
    snprintf(name, sizeof name, "pause_%s", algo);
    tr_workdir_path(dir, sizeof dir, name);
    /* ranks 0 and 2 take >= 5 ms an iteration, so that they are still running during the
     * pause even when they do not communicate (a leader) */
    snprintf(args, sizeof args,
             "%s --algo %s --epochs 100 --max-iters 500 --straggler once:1:iter=10:2s "
             "--straggler pause:0,2:p=1:fixed=5ms",
             TASK, algo);
    int st = tr_train_job(3, "", dir, args, 90, NULL);
    if (st) tr_show_log(dir);
    ck_assert_int_eq(st, 0);
    static double w1[1000], w[1000];
    int n1 = read_clock(dir, 1, w1, 1000);
    ck_assert_int_ge(n1, 20);
    double p0 = w1[9], p1 = w1[10]; /* iteration 11's row ends after the pause */
    ck_assert_msg(p1 - p0 >= 1.9, "%s: rank 1's pause %.2f s", algo, p1 - p0);
    for (int r = 0; r < 3; r += 2) {
        int n = read_clock(dir, r, w, 1000), during = 0, after = 0;
        for (int i = 0; i < n; i++) {
            during += w[i] > p0 + 0.1 && w[i] < p1 - 0.1;
            after += w[i] >= p1 - 0.1;
        }
        ck_assert_msg(during >= 20 || (during >= 5 && after == 0),
                      "%s: rank %d did %d iterations during rank 1's pause (%.2f-%.2f s), %d "
                      "after",
                      algo, r, during, p0, p1, after);
    }
}

START_TEST(test_easgd_pause)
{
    pause_no_stall("easgd");
}
END_TEST

START_TEST(test_lsgd_pause)
{
    pause_no_stall("lsgd");
}
END_TEST

/* Once losses are exchanged, every worker's global leader is the minimum-loss worker: lr 0
 * keeps each rank's model fixed, --init-spread makes their losses differ widely, and 5 ms per
 * iteration lets the losses travel while every rank still runs. */
START_TEST(test_lsgd_leader_is_min)
{
    char dir[PATH_MAX], path[PATH_MAX + 32], line[512];
    tr_workdir_path(dir, sizeof dir, "leader");
    int st = tr_train_job(4, "", dir,
                          TASK " --algo lsgd --lr 0 --init-spread 2 --epochs 4 --leader-window 5 "
                               "--straggler pause:all:p=1:fixed=5ms",
                          60, NULL);
    if (st) tr_show_log(dir);
    ck_assert_int_eq(st, 0);
    double mean[4] = {0};
    int last_leader[4] = {-1, -1, -1, -1};
    for (int r = 0; r < 4; r++) {
        snprintf(path, sizeof path, "%s/rank-%d-leader.csv", dir, r);
        FILE *f = fopen(path, "r");
        ck_assert_ptr_nonnull(f);
        int n = 0;
        ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
        while (fgets(line, sizeof line, f)) {
            long it;
            double rl, gl;
            int lead;
            if (sscanf(line, "%ld,%lf,%d,%lf", &it, &rl, &lead, &gl) != 4) continue;
            mean[r] += rl;
            n++;
            last_leader[r] = lead;
        }
        fclose(f);
        ck_assert_int_gt(n, 5);
        mean[r] /= n;
    }
    int best = 0, followed = 0;
    for (int r = 1; r < 4; r++)
        if (mean[r] < mean[best]) best = r;
    /* each rank follows a minimum-loss worker: the best, or one within the noise of the
     * k-batch window (5 %) of it; and losses were exchanged (someone follows another rank) */
    for (int r = 0; r < 4; r++) {
        int L = last_leader[r];
        ck_assert_msg(L >= 0 && L < 4, "rank %d has no leader", r);
        ck_assert_msg(mean[L] <= 1.05 * mean[best],
                      "rank %d follows rank %d (mean loss %g), the minimum-loss rank is %d (%g)", r,
                      L, mean[L], best, mean[best]);
        followed += L != r;
    }
    ck_assert_int_ge(followed, 2);
}
END_TEST

/* --- byte accounting (docs/ethernet.md, "Found on the way") ------------------------------ */

#define TASK_N  68               /* logreg:16-4: 16 x 4 + 4 parameters */
#define EL_HDR  64               /* sizeof(hs_el_hdr_v1_t) */
#define SHARD_B (4 * TASK_N / 4) /* one of 4 center shards, float32 */

/* Rows of DIR/rank-R-leader.csv (communication rounds) and the last snapshots_fetched. */
static long leader_rounds(const char *dir, int r, long *fetched)
{
    char path[PATH_MAX + 32], line[512];
    snprintf(path, sizeof path, "%s/rank-%d-leader.csv", dir, r);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    long n = 0;
    *fetched = 0;
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    while (fgets(line, sizeof line, f)) {
        char *p = strrchr(line, ',');
        if (p) *fetched = strtol(p + 1, NULL, 10), n++;
    }
    fclose(f);
    return n;
}

/* Sum of column `col` (0-based) of DIR/rank-R.csv. */
static double csv_sum(const char *dir, int r, int col)
{
    char path[PATH_MAX + 32], line[1024];
    snprintf(path, sizeof path, "%s/rank-%d.csv", dir, r);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    double sum = 0;
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    while (fgets(line, sizeof line, f)) {
        char *p = line;
        for (int c = 0; c < col && p; c++) p = strchr(p, ','), p = p ? p + 1 : NULL;
        if (p) sum += strtod(p, NULL);
    }
    fclose(f);
    return sum;
}

/* Leader-SGD's bytes (summary.json per_rank, the final drain included) are every message's:
 * each rank sends its loss (a header) to the 3 others every round and once more when done; a
 * fetch is a request (a header) and a reply (header + n floats) that the leader's service
 * sends. Every byte sent is received: the totals over the ranks agree. `exact`: no loss message
 * was skipped (the simulated clock; a real run may skip one whose 4 predecessors to that peer
 * are still in flight). */
static void lsgd_bytes_check(const char *dir, int exact)
{
    double sent = 0, recv = 0, loss_max = 0, snap = 0;
    for (int r = 0; r < 4; r++) {
        long fetched, rounds = leader_rounds(dir, r, &fetched);
        ck_assert_int_gt(rounds, 10);
        double s = tr_summary_rank_num(dir, r, "bytes_sent");
        double v = tr_summary_rank_num(dir, r, "bytes_recv");
        ck_assert_msg(isfinite(s) && isfinite(v), "rank %d: no bytes in summary.json", r);
        ck_assert(csv_sum(dir, r, 9) <= s && csv_sum(dir, r, 10) <= v); /* rows end earlier */
        sent += s;
        recv += v;
        loss_max += 3.0 * EL_HDR * (double)(rounds + 1);
        snap += (double)fetched * (EL_HDR + EL_HDR + 4 * TASK_N);
    }
    ck_assert_msg(snap > 0, "no snapshot was fetched");
    ck_assert_msg(sent == recv, "bytes sent %.0f, received %.0f", sent, recv);
    double loss = sent - snap;
    if (exact)
        ck_assert_msg(loss == loss_max, "bytes sent %.0f: loss messages %.0f, predicted %.0f", sent,
                      loss, loss_max);
    else
        ck_assert_msg(loss <= loss_max && loss >= 0.9 * loss_max && fmod(loss, EL_HDR) == 0,
                      "bytes sent %.0f: loss messages %.0f, predicted at most %.0f", sent, loss,
                      loss_max);
}

START_TEST(test_lsgd_bytes)
{
    char dir[PATH_MAX];
    tr_workdir_path(dir, sizeof dir, "lsgd_bytes_sim");
    int st = tr_sim_job(dir, "-n 4", TASK " --algo lsgd --epochs 2", 60);
    if (st) tr_show_log(dir);
    ck_assert_int_eq(st, 0);
    lsgd_bytes_check(dir, 1);
    tr_workdir_path(dir, sizeof dir, "lsgd_bytes_real");
    st = tr_train_job(4, "", dir, TASK " --algo lsgd --epochs 2", 90, NULL);
    if (st) tr_show_log(dir);
    ck_assert_int_eq(st, 0);
    lsgd_bytes_check(dir, 0);
}
END_TEST

/* EASGD on the service path, one shard per rank: per iteration a rank sends 3 READ requests
 * and 3 ADDs and its service 3 replies; at the end 3 FINs and 3 FINAL replies. Each rank
 * receives as much. The real run and the simulated one report these bytes per rank. */
static double easgd_service_bytes(double iters)
{
    return iters * (3 * EL_HDR + 6 * (EL_HDR + SHARD_B)) + 3 * EL_HDR + 3 * (EL_HDR + SHARD_B);
}

START_TEST(test_easgd_bytes_real_vs_sim)
{
    char real[PATH_MAX], sim[PATH_MAX];
    tr_workdir_path(real, sizeof real, "easgd_bytes_real");
    tr_workdir_path(sim, sizeof sim, "easgd_bytes_sim");
    int st =
        tr_train_job(4, "", real, TASK " --algo easgd --epochs 1 --center-path service", 90, NULL);
    if (st) tr_show_log(real);
    ck_assert_int_eq(st, 0);
    st = tr_sim_job(sim, "-n 4", TASK " --algo easgd --epochs 1", 60);
    if (st) tr_show_log(sim);
    ck_assert_int_eq(st, 0);
    for (int r = 0; r < 4; r++) {
        double it = tr_summary_rank_num(real, r, "iterations");
        ck_assert(it > 10 && it == tr_summary_rank_num(sim, r, "iterations"));
        double want = easgd_service_bytes(it);
        const char *key[2] = {"bytes_sent", "bytes_recv"};
        for (int k = 0; k < 2; k++) {
            double a = tr_summary_rank_num(real, r, key[k]),
                   b = tr_summary_rank_num(sim, r, key[k]);
            ck_assert_msg(a == b && a == want,
                          "rank %d %s: real %.0f, simulated %.0f, predicted %.0f", r, key[k], a, b,
                          want);
        }
    }
}
END_TEST

/* The one-sided path (the real runs' default where the provider has float atomics, as in the
 * Ethernet study) counted the own shard's get and atomic add, which go to the rank itself:
 * 4/4 of the center where the service path sends 3/4. Per iteration a rank adds into the 3
 * other shards (payload only) and gets them; at the end FIN and FINAL as on the service path. */
START_TEST(test_easgd_bytes_rma)
{
    char dir[PATH_MAX];
    tr_workdir_path(dir, sizeof dir, "easgd_bytes_rma");
    int st = tr_train_job(4, "", dir, TASK " --algo easgd --epochs 1 --center-path rma", 90, NULL);
    if (st) tr_show_log(dir);
    ck_assert_int_eq(st, 0);
    for (int r = 0; r < 4; r++) {
        double it = tr_summary_rank_num(dir, r, "iterations");
        double want = it * 3 * SHARD_B + 3 * EL_HDR + 3 * (EL_HDR + SHARD_B);
        double s = tr_summary_rank_num(dir, r, "bytes_sent");
        double v = tr_summary_rank_num(dir, r, "bytes_recv");
        ck_assert_msg(s == want && v == want, "rank %d: sent %.0f, received %.0f, predicted %.0f",
                      r, s, v, want);
        ck_assert(csv_sum(dir, r, 9) == it * 3 * SHARD_B);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("easgd");
    TCase *tu = tcase_create("unit");
    tcase_add_test(tu, test_centers_spec);
    tcase_add_test(tu, test_el_hdr_check_overflow);
    tcase_add_test(tu, test_elect);
    tcase_add_test(tu, test_groups);
    tcase_add_test(tu, test_snapshot_no_tear);
    tcase_add_test(tu, test_snapshot_starved_reader);
    suite_add_tcase(s, tu);
    /* multi-process: `hearsay run` around hearsay train and tests/center_worker */
    const char *why = tr_require("center_worker", NULL);
    const char *no_rma = why ? why : rma_missing();
    TCase *tc = tcase_create("multiprocess");
    tcase_set_timeout(tc, 120);
    TR_ADD_TEST(tc, test_center_conservation, why);
    TR_ADD_TEST(tc, test_center_conservation_rma, no_rma);
    TR_ADD_TEST(tc, test_center_dead_owner, why);
    TR_ADD_TEST(tc, test_center_dead_owner_rma, no_rma);
    TR_ADD_TEST(tc, test_easgd_converges, why);
    TR_ADD_TEST(tc, test_eamsgd_converges, why);
    TR_ADD_TEST(tc, test_lsgd_converges, why);
    TR_ADD_TEST(tc, test_progress_thread_setting, why);
    TR_ADD_TEST(tc, test_lsgd_leader_is_min, why);
    TR_ADD_TEST(tc, test_easgd_crash, why);
    TR_ADD_TEST(tc, test_lsgd_crash, why);
    TR_ADD_TEST(tc, test_easgd_pause, why);
    TR_ADD_TEST(tc, test_lsgd_pause, why);
    TR_ADD_TEST(tc, test_lsgd_bytes, why);
    TR_ADD_TEST(tc, test_easgd_bytes_real_vs_sim, why);
    TR_ADD_TEST(tc, test_easgd_bytes_rma, no_rma);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (tr_workdir_init("easgd") < 0) return 1;
    return tr_run_suite(suite());
}
