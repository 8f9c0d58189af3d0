/*
 * tests/test_allreduce.c — the all-reduce (direct path on hsshm, ring over hsshm and tcp)
 * across processes started by `hearsay run`.
 *
 * Each test starts $HS_BIN run -n N around tests/allreduce_worker, which compares every
 * result with the sum it computes directly (see that file), and asserts on the exit status
 * and the lines every rank prints. Sizes: 1, 7, 1000 and ~3M floats on 2, 3 and 4 ranks
 * (1 and 7 are below or near the rank count: empty segments and chunks). The crash test
 * checks that when a rank dies the others get an error naming a peer within the bound,
 * instead of hanging; the late test the same for a rank that stays away past the timeout.
 * AR_BUF=shared runs the same checks on buffers of hs_transport_buf_alloc (the mapped path
 * over hsshm), AR_BUF=mixed with rank 0's buffer plain (the copying fallback), 2 to 8 ranks.
 * All-reduce SGD with --bucket-mb (buckets reduced while backward runs): the final parameters
 * agree with the flat reduction's to 1e-5 and repeat bit for bit, in real processes (mapped
 * path, and the ring under --link) and in `hearsay sim`, where the overlap shows in virtual
 * time.
 */
#include "hearsay/common.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/runlib.h"

static int count(const char *hay, const char *needle)
{
    int c = 0;
    for (const char *q = strstr(hay, needle); q; q = strstr(q + 1, needle)) c++;
    return c;
}

/* One configuration of the sum and average checks: the ranks, the largest size (floats), and
 * what it forces (NULL: the default). The default on one host is the direct path over hsshm;
 * the ring must stay right too, over hsshm and over libfabric (tcp), and the direct path when
 * asked for by name. Shared buffers (hs_transport_buf_alloc): the mapped path over hsshm, 2 to
 * 8 ranks; forced by name; and one rank's buffer plain (every rank takes the copying
 * fallback). */
static const struct sum_case {
    const char *ranks, *big;
    const char *buf;      /* AR_BUF: shared, mixed */
    const char *path;     /* HS_AR_PATH */
    const char *provider; /* HS_PROVIDER */
    const char *hosts;    /* AR_HOSTS: a host map of that many hosts (the hierarchical plan) */
} sum_cases[] = {
    {"2", "3000017", NULL, NULL, NULL, NULL},
    {"3", "3000017", NULL, NULL, NULL, NULL},
    {"4", "3000017", NULL, NULL, NULL, NULL},
    {"4", "3000017", NULL, "ring", NULL, NULL},
    {"3", "3000017", NULL, NULL, "tcp", NULL},
    {"3", "3000017", NULL, "direct", NULL, NULL},
    {"2", "3000017", "shared", NULL, NULL, NULL},
    {"3", "3000017", "shared", NULL, NULL, NULL},
    {"4", "3000017", "shared", NULL, NULL, NULL},
    {"8", "100003", "shared", NULL, NULL, NULL},
    {"5", "1000003", "shared", "mapped", NULL, NULL},
    {"4", "3000017", "mixed", NULL, NULL, NULL},
    /* the hierarchical plan (issue 26): 2 hosts of 2, 2 of 3 (by name), 3 of 2 over tcp */
    {"4", "3000017", NULL, "hier", NULL, "2"},
    {"6", "1000003", NULL, "hier", NULL, "2"},
    {"6", "1000003", NULL, "hier", "tcp", "3"},
};

START_TEST(test_sum_avg)
{
    const struct sum_case *c = &sum_cases[_i];
    char what[160];
    snprintf(what, sizeof what,
             "%s ranks, up to %s floats, AR_BUF=%s HS_AR_PATH=%s HS_PROVIDER=%s AR_HOSTS=%s",
             c->ranks, c->big, c->buf ? c->buf : "-", c->path ? c->path : "-",
             c->provider ? c->provider : "-", c->hosts ? c->hosts : "-");
    if (c->buf) setenv("AR_BUF", c->buf, 1);
    if (c->path) setenv("HS_AR_PATH", c->path, 1);
    if (c->provider) setenv("HS_PROVIDER", c->provider, 1);
    if (c->hosts) setenv("AR_HOSTS", c->hosts, 1);
    const char *worker = tr_helper("allreduce_worker");
    tr_job_t j;
    const char *args[] = {tr_hearsay(), "run",   "-n", c->ranks, "--timeout", "20",   "--",
                          worker,       "check", "1",  "7",      "1000",      c->big, NULL};
    tr_run(&j, args, NULL, 60);
    ck_assert_msg(j.status == 0, "%s: %s after %.1f s, output:\n%s", what, tr_status_text(j.status),
                  j.elapsed, j.out);
    ck_assert_msg(count(j.out, "AR_FAIL") == 0, "%s: failures in:\n%s", what, j.out);
    int P = atoi(c->ranks);
    char want[64];
    for (int r = 0; r < P; r++) {
        snprintf(want, sizeof want, "AR_OK rank %d\n", r);
        ck_assert_msg(strstr(j.out, want), "%s: missing \"%s\" in:\n%s", what, want, j.out);
    }
    tr_job_free(&j);
}
END_TEST

/* Link shaping holds on every path: with HS_SHAPING="bw=40MB" (as `--link bw=40MB` sets it),
 * 3 ranks all-reduce 1M floats (4 MB); the ring moves 2 (P - 1) / P of it, 5.33 MB, over each
 * rank's link, 133 ms at 40 MB/s. Every path (the default on plain and on shared buffers,
 * mapped and direct by name, the ring, the ring over tcp) must take at least 0.9x that per
 * operation: the mapped and direct paths, which copy between the processes without messages,
 * give way to the ring. Load only makes it slower; the upper bound is generous (10x + 2 s). */
static const struct shaped_case {
    const char *buf, *path, *provider;
} shaped_cases[] = {
    {NULL, NULL, NULL},     {"shared", NULL, NULL}, {"shared", "mapped", NULL},
    {NULL, "direct", NULL}, {NULL, "ring", NULL},   {NULL, NULL, "tcp"},
};

START_TEST(test_shaped_every_path)
{
    const struct shaped_case *c = &shaped_cases[_i];
    const int P = 3;
    const double n = 1000000, bw = 40e6;
    const double need = 2.0 * (P - 1) / P * n * sizeof(float) / bw;
    char what[160];
    snprintf(what, sizeof what, "bw=40MB, AR_BUF=%s HS_AR_PATH=%s HS_PROVIDER=%s",
             c->buf ? c->buf : "-", c->path ? c->path : "-", c->provider ? c->provider : "-");
    setenv("HS_SHAPING", "bw=40MB", 1);
    if (c->buf) setenv("AR_BUF", c->buf, 1);
    if (c->path) setenv("HS_AR_PATH", c->path, 1);
    if (c->provider) setenv("HS_PROVIDER", c->provider, 1);
    const char *worker = tr_helper("allreduce_worker");
    tr_job_t j;
    const char *args[] = {tr_hearsay(), "run",  "-n",    "3",       "--timeout", "30",
                          "--",         worker, "timed", "1000000", "3",         NULL};
    tr_run(&j, args, NULL, 80);
    ck_assert_msg(j.status == 0, "%s: %s after %.1f s, output:\n%s", what, tr_status_text(j.status),
                  j.elapsed, j.out);
    ck_assert_msg(count(j.out, "AR_FAIL") == 0, "%s: failures in:\n%s", what, j.out);
    for (int r = 0; r < P; r++) {
        char want[64];
        snprintf(want, sizeof want, "AR_TIME rank %d s_per_op ", r);
        const char *q = strstr(j.out, want);
        ck_assert_msg(q, "%s: missing \"%s\" in:\n%s", what, want, j.out);
        double s = atof(q + strlen(want));
        ck_assert_msg(s >= 0.9 * need,
                      "%s: rank %d took %.4f s per all-reduce, below 0.9x the "
                      "%.4f s its bytes need over the shaped link:\n%s",
                      what, r, s, need, j.out);
        ck_assert_msg(s <= 10 * need + 2,
                      "%s: rank %d took %.4f s per all-reduce (%.4f s "
                      "needed):\n%s",
                      what, r, s, need, j.out);
    }
    tr_job_free(&j);
}
END_TEST

/* The same in training, 3 ranks at --link bw=20MB: all-reduce SGD (its gradient in shared
 * memory: the mapped path unless it gives way), EF-SGD's compressed all-gather (int8, one
 * message to each peer, over that peer's link: the links work at once) and local SGD's model
 * averaging (the same all-reduce). Every rank's time in the exchange, comm_s + wait_s (EF-SGD
 * books its waits for the peers' messages as wait_s), must be at least 0.9x the bytes it sent
 * over the busiest of its links at 20 MB/s (bytes_sent / links). */
static const struct shaped_train {
    const char *name, *args;
    int links; /* links bytes_sent spreads over evenly */
} shaped_trains[] = {
    {"allreduce", "--algo allreduce", 1},
    {"efsgd", "--algo allreduce --compress int8", 2},
    {"localsgd", "--algo localsgd --period 1", 1},
};

START_TEST(test_shaped_training)
{
    const struct shaped_train *c = &shaped_trains[_i];
    char dir[4096], args[1024];
    tr_workdir_path(dir, sizeof dir, c->name);
    snprintf(args, sizeof args,
             "%s --model mlp:16-512-512-4 --data gauss:dim=16,classes=4,train=1536,test=48 "
             "--batch 16 --threads 1 --max-iters 8 --eval-every 0 --link bw=20MB",
             c->args);
    double el = 0;
    int st = tr_train_job(3, "", dir, args, 120, &el);
    if (st != 0) tr_show_log(dir);
    ck_assert_msg(st == 0, "%s: %s after %.1f s", c->name, tr_status_text(st), el);
    for (int r = 0; r < 3; r++) {
        double comm = tr_summary_rank_num(dir, r, "comm_s") + tr_summary_rank_num(dir, r, "wait_s"),
               sent = tr_summary_rank_num(dir, r, "bytes_sent");
        double need = sent / c->links / 20e6;
        ck_assert_msg(sent > 1e6, "%s: rank %d sent only %g bytes", c->name, r, sent);
        ck_assert_msg(comm >= 0.9 * need,
                      "%s: rank %d spent %.4f s in the exchange, below 0.9x the %.4f s its %g "
                      "bytes need over %d link(s) at 20 MB/s",
                      c->name, r, comm, need, sent, c->links);
    }
}
END_TEST

/* --bucket-mb: 4 layers of 0.01-1 MB in 3 buckets of ~0.5 MiB (DIR/rank-R.final.f32). */
#define BUCKET_TASK                                                                                \
    "--algo allreduce --model mlp:256-512-512-512-10 "                                             \
    "--data gauss:dim=256,classes=10,train=8192,test=64 --batch 32 --threads 1 --max-iters 12 "    \
    "--eval-every 0 --dump-params -q"

/* The largest |a - b| over every rank's final parameters in dirs a and b (-1: unreadable), and
 * whether they are bit for bit the same. */
static double final_diff(const char *a, const char *b, int ranks, int *same)
{
    double worst = 0;
    *same = 1;
    for (int r = 0; r < ranks; r++) {
        char name[64];
        snprintf(name, sizeof name, "rank-%d.final.f32", r);
        size_t na = 0, nb = 0;
        float *x = tr_read_f32(a, name, &na), *y = tr_read_f32(b, name, &nb);
        if (!x || !y || na != nb || na == 0) worst = -1;
        for (size_t i = 0; worst >= 0 && i < na; i++) {
            double d = fabs((double)x[i] - (double)y[i]);
            if (!(d <= worst)) worst = d; /* NaN counts as worst */
            if (memcmp(&x[i], &y[i], sizeof(float))) *same = 0;
        }
        free(x);
        free(y);
        if (worst < 0) return -1;
    }
    return worst;
}

/* Real processes, 4 ranks: flat, then bucketed twice; without --link (the mapped path) and at
 * --link bw=1Gbit (every bucket's ring). Bucketed == flat to 1e-5 (seen: bitwise on the mapped
 * path, 1.1e-8 on the ring), and bitwise run to run. */
static const char *const bucket_links[] = {"", "--link bw=1Gbit"};

START_TEST(test_bucket_agrees)
{
    const char *link = bucket_links[_i];
    char dir[3][4096], args[1024];
    const char *mb[3] = {"0", "0.5", "0.5"};
    for (int k = 0; k < 3; k++) {
        char name[64];
        snprintf(name, sizeof name, "bucket%d-%d", _i, k);
        tr_workdir_path(dir[k], sizeof dir[k], name);
        snprintf(args, sizeof args, BUCKET_TASK " --bucket-mb %s %s", mb[k], link);
        double el = 0;
        int st = tr_train_job(4, "", dir[k], args, 180, &el);
        if (st != 0) tr_show_log(dir[k]);
        ck_assert_msg(st == 0, "--bucket-mb %s %s: %s after %.1f s", mb[k], link,
                      tr_status_text(st), el);
    }
    int same = 0;
    double d = final_diff(dir[0], dir[1], 4, &same);
    ck_assert_msg(d >= 0 && d <= 1e-5, "%s: bucketed and flat differ by %g", link, d);
    d = final_diff(dir[1], dir[2], 4, &same);
    ck_assert_msg(d == 0 && same, "%s: two bucketed runs differ by %g", link, d);
}
END_TEST

/* hearsay sim, 4 ranks, fixed 20 ms steps, 1 Gbit links, 3 buckets: the reductions overlap
 * backward in virtual time (flat: 12 x (20 ms + a 31.8 ms ring of 2.6 MB) = 0.64 s; bucketed,
 * seen 0.55 s: the last bucket's ring ends 23.8 ms after the step's end; at most 0.9x), the
 * parameters agree with the flat run's to 1e-5, and two bucketed runs give the same bytes. */
START_TEST(test_bucket_sim)
{
    char dir[3][4096], args[1024];
    const char *mb[3] = {"0", "0.5", "0.5"};
    for (int k = 0; k < 3; k++) {
        char name[64];
        snprintf(name, sizeof name, "bucket-sim-%d", k);
        tr_workdir_path(dir[k], sizeof dir[k], name);
        snprintf(args, sizeof args, BUCKET_TASK " --bucket-mb %s --link bw=1Gbit", mb[k]);
        int st = tr_sim_job(dir[k], "-n 4 --sim-compute fixed:20", args, 120);
        if (st != 0) tr_show_log(dir[k]);
        ck_assert_msg(st == 0, "sim --bucket-mb %s: %s", mb[k], tr_status_text(st));
    }
    double wf = tr_summary_num(dir[0], "wall_s"), wb = tr_summary_num(dir[1], "wall_s"),
           wb2 = tr_summary_num(dir[2], "wall_s");
    ck_assert_msg(wf > 12 * 0.02 && wb <= 0.9 * wf && wb >= 12 * 0.02,
                  "virtual time: flat %g s, bucketed %g s (expected <= 0.9x, >= the steps)", wf,
                  wb);
    ck_assert_msg(wb == wb2, "two bucketed sims: %g s and %g s", wb, wb2);
    int same = 0;
    double d = final_diff(dir[0], dir[1], 4, &same);
    ck_assert_msg(d >= 0 && d <= 1e-5, "sim: bucketed and flat differ by %g", d);
    d = final_diff(dir[1], dir[2], 4, &same);
    ck_assert_msg(d == 0 && same, "sim: two bucketed runs differ by %g", d);
}
END_TEST

/* The hierarchical all-reduce in virtual time (issue 26, item 3): 2 hosts of 4 ranks behind
 * 10 Gbit/s NICs, messages of ResNet-50's size (--sim-payload; m = 102,228,128 bytes), 0.3 s
 * steps. Each host's NIC carries 2 (H - 1) / H x m = m per iteration (0.08178 s) where the
 * flat ring (HS_AR_PATH=ring) crosses it with 2 (n - 1) / n x m (0.14312 s); auto takes the
 * hierarchical plan (ranks on several hosts); the parameters agree with the ring's to float
 * rounding, and two runs bit for bit. */
START_TEST(test_hier_sim)
{
    const double m = 25557032.0 * 4, beta = 10e9 / 8;
    const char *sim = "-n 8 --ranks-per-host 4 --sim-nic 10Gbit --sim-compute fixed:300 "
                      "--sim-payload resnet50";
    const char *args = "--algo allreduce --model logreg:63-10 "
                       "--data gauss:dim=63,classes=10,train=40000 --epochs 100 --max-iters 12 "
                       "--eval-every 0 -q --dump-params";
    char dir[4][4096];
    const char *path[4] = {"ring", "hier", "hier", "auto"};
    double per[4];
    for (int k = 0; k < 4; k++) {
        char name[64];
        snprintf(name, sizeof name, "hier-sim-%d", k);
        tr_workdir_path(dir[k], sizeof dir[k], name);
        setenv("HS_AR_PATH", path[k], 1);
        int st = tr_sim_job(dir[k], sim, args, 120);
        unsetenv("HS_AR_PATH");
        if (st != 0) tr_show_log(dir[k]);
        ck_assert_msg(st == 0, "sim HS_AR_PATH=%s: %s", path[k], tr_status_text(st));
        per[k] = (tr_rank0_wall_at(dir[k], 10) - tr_rank0_wall_at(dir[k], 2)) / 8;
    }
    double ring = 0.3 + 2 * 7.0 / 8 * m / beta, hier = 0.3 + m / beta;
    ck_assert_msg(fabs(per[0] - ring) <= 1e-6 * ring,
                  "flat ring: %.9f s per iteration, %.9f s "
                  "expected",
                  per[0], ring);
    ck_assert_msg(fabs(per[1] - hier) <= 1e-6 * hier,
                  "hierarchical: %.9f s per iteration, "
                  "%.9f s expected",
                  per[1], hier);
    ck_assert_msg(fabs(per[3] - hier) <= 1e-6 * hier,
                  "HS_AR_PATH=auto: %.9f s per iteration, %.9f s expected (the hierarchical "
                  "plan)",
                  per[3], hier);
    int same = 0;
    double d = final_diff(dir[0], dir[1], 8, &same);
    ck_assert_msg(d >= 0 && d <= 1e-5, "hierarchical and flat ring differ by %g", d);
    d = final_diff(dir[1], dir[2], 8, &same);
    ck_assert_msg(d == 0 && same, "two hierarchical runs differ by %g", d);
    d = final_diff(dir[1], dir[3], 8, &same);
    ck_assert_msg(d == 0 && same, "auto and hierarchical runs differ by %g", d);
}
END_TEST

/* HS_AR_PATH=mapped with plain buffers: an error on every rank, at once, not a hang. */
START_TEST(test_mapped_needs_shared_buffers)
{
    setenv("AR_BUF", "mixed", 1);
    setenv("HS_AR_PATH", "mapped", 1);
    const char *worker = tr_helper("allreduce_worker");
    tr_job_t j;
    const char *args[] = {tr_hearsay(), "run",  "-n",    "3",    "--timeout", "20",
                          "--",         worker, "check", "1000", NULL};
    tr_run(&j, args, NULL, 40);
    ck_assert_msg(j.status != 0, "succeeded:\n%s", j.out);
    ck_assert_msg(j.elapsed < 15, "took %.1f s:\n%s", j.elapsed, j.out);
    ck_assert_msg(strstr(j.out, "not memory of hs_transport_buf_alloc"), "output:\n%s", j.out);
    tr_job_free(&j);
}
END_TEST

/* Rank 2 of 4 leaves after one all-reduce; the others must report an error naming a rank
 * within the 10 s bound (their timeout is 8 s; a dead neighbour is noticed sooner). */
static void dead_rank(void)
{
    const char *worker = tr_helper("allreduce_worker");
    tr_job_t j;
    const char *args[] = {tr_hearsay(), "run",  "-n",    "4", "--timeout", "20",
                          "--",         worker, "crash", "2", "8",         NULL};
    tr_run(&j, args, NULL, 40);
    ck_assert_msg(j.status == 0, "%s after %.1f s, output:\n%s", tr_status_text(j.status),
                  j.elapsed, j.out);
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
    tr_job_free(&j);
}

START_TEST(test_dead_rank_is_reported)
{
    dead_rank();
}
END_TEST

START_TEST(test_dead_rank_is_reported_shared)
{
    setenv("AR_BUF", "shared", 1);
    dead_rank();
}
END_TEST

/* Rank 1 of 3 stays away for 9 s: the others give up after their 4 s timeout, naming it. */
static void late_rank(void)
{
    const char *worker = tr_helper("allreduce_worker");
    tr_job_t j;
    const char *args[] = {tr_hearsay(), "run",  "-n",   "3", "--timeout", "30",
                          "--",         worker, "late", "1", "4",         NULL};
    tr_run(&j, args, NULL, 40);
    ck_assert_msg(j.status == 0, "%s after %.1f s, output:\n%s", tr_status_text(j.status),
                  j.elapsed, j.out);
    ck_assert_msg(count(j.out, "AR_MISSED") == 0 && count(j.out, "AR_FAIL") == 0, "output:\n%s",
                  j.out);
    ck_assert_msg(count(j.out, "AR_DETECTED") == 2, "expected 2 ranks to report:\n%s", j.out);
    for (const char *q = strstr(j.out, "AR_DETECTED"); q; q = strstr(q + 1, "AR_DETECTED")) {
        const char *after = strstr(q, " after ");
        ck_assert_ptr_nonnull(after);
        double dt = atof(after + 7);
        ck_assert_msg(dt >= 3.5 && dt < 7.0, "reported after %.2f s:\n%s", dt, j.out);
        const char *eol = strchr(q, '\n');
        ck_assert_ptr_nonnull(eol);
        const char *peer = strstr(q, "rank 1");
        ck_assert_msg(peer && peer < eol, "message names no late rank: %.*s", (int)(eol - q), q);
    }
    ck_assert_msg(strstr(j.out, "AR_LATE rank 1: "), "output:\n%s", j.out);
    tr_job_free(&j);
}

START_TEST(test_late_rank_is_reported_shared)
{
    setenv("AR_BUF", "shared", 1);
    late_rank();
}
END_TEST

START_TEST(test_late_rank_is_reported)
{
    late_rank();
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
    /* every case runs `hearsay run` around tests/allreduce_worker */
    const char *why = tr_require("allreduce_worker", NULL);
    if (tr_workdir_init("allreduce") < 0) return 1;
    Suite *s = suite_create("allreduce");
    TCase *tc = tcase_create("ring");
    tcase_set_timeout(tc, 300);
    if (why)
        tr_skip("test_sum_avg", "%s", why);
    else
        tcase_add_loop_test(tc, test_sum_avg, 0, (int)HS_ARRAY_LEN(sum_cases));
    if (why)
        tr_skip("test_shaped_every_path", "%s", why);
    else
        tcase_add_loop_test(tc, test_shaped_every_path, 0, (int)HS_ARRAY_LEN(shaped_cases));
    if (why)
        tr_skip("test_shaped_training", "%s", why);
    else
        tcase_add_loop_test(tc, test_shaped_training, 0, (int)HS_ARRAY_LEN(shaped_trains));
    if (why)
        tr_skip("test_bucket_agrees", "%s", why);
    else
        tcase_add_loop_test(tc, test_bucket_agrees, 0, (int)HS_ARRAY_LEN(bucket_links));
    TR_ADD_TEST(tc, test_hier_sim, why);
    TR_ADD_TEST(tc, test_bucket_sim, why);
    TR_ADD_TEST(tc, test_dead_rank_is_reported, why);
    TR_ADD_TEST(tc, test_dead_rank_is_reported_ring, why);
    TR_ADD_TEST(tc, test_mapped_needs_shared_buffers, why);
    TR_ADD_TEST(tc, test_dead_rank_is_reported_shared, why);
    TR_ADD_TEST(tc, test_late_rank_is_reported_shared, why);
    TR_ADD_TEST(tc, test_late_rank_is_reported, why);
    suite_add_tcase(s, tc);
    return tr_run_suite(s);
}
