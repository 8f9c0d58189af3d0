/*
 * tests/test_device_emu.c — the emulated device (`--device emu`, kernels/emu.c; issue 27):
 * the GPU data path of every algorithm, tested without a GPU.
 *
 * The backend itself: its device memory is checked (a host pointer given to a kernel, a copy
 * past an allocation, device memory given as a copy's host side: -EFAULT with the slot named)
 * and, in the sanitizer build, poisoned for the host except inside its slots. Its results are
 * the CPU backend's bit for bit.
 *
 * Every algorithm then trains on it: in `hearsay sim -n 4`, each one's trajectories
 * (--dump-trajectory) must be bit-identical to the same run on --device cpu, so every staging
 * copy (to_host, to_device, device-to-device) is where it should be and moves the right
 * bytes (a missing one shows as a different model: EF-SGD's first staged version read a host
 * buffer nobody filled and trained on zero gradients); and a few jobs of real processes (hsshm
 * and tcp, checkpoints and a resume, a convolutional model with batch norm) run on it. Under
 * `scripts/test.sh --sanitize` any host access to device memory in an algorithm, the loop or a
 * transport is an AddressSanitizer report (use-after-poison), which ends the job with status 1
 * and fails its case.
 */
#include "hearsay/algo.h"
#include "hearsay/common.h"
#include "hearsay/kernels.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/runlib.h"

#if defined(__SANITIZE_ADDRESS__)
#define EMU_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMU_TEST_ASAN 1
#endif
#endif
#ifdef EMU_TEST_ASAN
#include <sanitizer/asan_interface.h>
#endif

#define BASE                                                                                       \
    "--model mlp:16-32-4 --data gauss:dim=16,classes=4,train=4000,test=200 --batch 16 --lr 0.1 "   \
    "--max-iters 12 --seed 3 -q --dump-trajectory --threads 1"

/* Every rank's trajectory in dirs a and b: the same bytes (and not empty). */
static void same_trajectories(const char *a, const char *b, int ranks, const char *what)
{
    for (int r = 0; r < ranks; r++) {
        char name[64];
        snprintf(name, sizeof name, "rank-%d.traj.f32", r);
        size_t na = 0, nb = 0;
        float *x = tr_read_f32(a, name, &na), *y = tr_read_f32(b, name, &nb);
        ck_assert_msg(x && y, "%s: rank %d has no trajectory (%s, %s)", what, r, a, b);
        ck_assert_msg(na == nb, "%s: rank %d: %zu values against %zu", what, r, na, nb);
        size_t first = na;
        for (size_t i = 0; i < na && first == na; i++)
            if (memcmp(&x[i], &y[i], sizeof *x)) first = i;
        ck_assert_msg(first == na, "%s: rank %d differs first at value %zu (%.9g against %.9g)",
                      what, r, first, first < na ? x[first] : 0.0, first < na ? y[first] : 0.0);
        free(x);
        free(y);
    }
}

/* ---- the backend ---- */

static int poisoned(const void *p)
{
#ifdef EMU_TEST_ASAN
    return __asan_address_is_poisoned(p);
#else
    (void)p;
    return 0;
#endif
}

START_TEST(test_backend_checks)
{
    hs_kernels_t *k = NULL, *c = NULL;
    ck_assert_int_eq(hs_kernels_open(&k, HS_DEV_EMU, 0, 1), 0);
    ck_assert_int_eq(hs_kernels_open(&c, HS_DEV_CPU, 0, 1), 0);
    ck_assert_int_eq(k->device, HS_DEV_EMU);
    ck_assert_str_eq(k->ops->name, "emu");
    hs_device_t dev;
    int idx = -1;
    ck_assert_int_eq(hs_device_select("emu", 3, &dev, &idx), 0);
    ck_assert(dev == HS_DEV_EMU && idx == 0);
    hs_kernels_t *bad = NULL;
    ck_assert_int_eq(hs_kernels_open(&bad, HS_DEV_EMU, 1, 1), -EINVAL); /* no device index */
    ck_assert(bad == NULL);

    enum { N = 100 };
    float h[N], back[N], *x = NULL, *y = NULL;
    for (int i = 0; i < N; i++) h[i] = (float)i * 0.25f - 3.0f;
    ck_assert_int_eq(k->ops->alloc(k, N * sizeof(float), (void **)&x), 0);
    ck_assert_int_eq(k->ops->alloc(k, N * sizeof(float), (void **)&y), 0);
    ck_assert(hs_kernels_emu_is_device(x) && hs_kernels_emu_is_device(x + N - 1));
    ck_assert(!hs_kernels_emu_is_device(h));
    if (hs_kernels_emu_poisons()) ck_assert(poisoned(x) && poisoned(y));
    ck_assert_int_eq(k->ops->to_device(k, x, h, sizeof h), 0);
    ck_assert_int_eq(k->ops->copy(k, y, x, sizeof h), 0);
    ck_assert_int_eq(k->ops->axpy(k, N, 0.5f, x, y), 0);
    /* poisoned for the host between the slots (in the sanitizer build) */
    if (hs_kernels_emu_poisons()) ck_assert(poisoned(x) && poisoned(y + N - 1));
    ck_assert_int_eq(k->ops->to_host(k, back, y, sizeof back), 0);
    for (int i = 0; i < N; i++) ck_assert_float_eq(back[i], h[i] + 0.5f * h[i]);
    double s = 0, s_cpu = 0;
    ck_assert_int_eq(k->ops->dot(k, N, x, y, &s), 0);
    ck_assert_int_eq(c->ops->dot(c, N, h, back, &s_cpu), 0);
    ck_assert(s == s_cpu);

    /* misuse: what a CUDA kernel would fault on */
    ck_assert_int_eq(k->ops->axpy(k, N, 1.0f, h, y), -EFAULT);
    ck_assert_msg(strstr(hs_last_error(), "emu axpy") && strstr(hs_last_error(), "not device"),
                  "%s", hs_last_error());
    ck_assert_int_eq(k->ops->to_device(k, x, y, sizeof h), -EFAULT); /* device as the source */
    ck_assert_int_eq(k->ops->to_host(k, y, x, sizeof h), -EFAULT);   /* device as the dest */
    ck_assert_int_eq(k->ops->to_host(k, back, x + 1, sizeof back), -EFAULT); /* past the end */
    ck_assert_msg(strstr(hs_last_error(), "past its device allocation"), "%s", hs_last_error());
    ck_assert_int_eq(k->ops->sum(k, N, x, (double *)(void *)y), -EFAULT); /* result to device */
    /* a failed slot leaves nothing open */
    if (hs_kernels_emu_poisons()) ck_assert(poisoned(x) && poisoned(y));
    k->ops->free(k, x);
    k->ops->free(k, y);
    ck_assert(!hs_kernels_emu_is_device(x));
    hs_kernels_close(&k);
    hs_kernels_close(&c);
}
END_TEST

/* ---- the staging helper (hearsay/algo.h, hs_stage_t): the algorithms' one way between the
 * kernels' memory and the host ---- */

START_TEST(test_stage)
{
    enum { N = 64 };
    float h[N], back[N];
    for (int i = 0; i < N; i++) h[i] = (float)i - 20.5f;
    hs_kernels_t *c = NULL, *k = NULL;
    ck_assert_int_eq(hs_kernels_open(&c, HS_DEV_CPU, 0, 1), 0);
    ck_assert_int_eq(hs_kernels_open(&k, HS_DEV_EMU, 0, 1), 0);

    /* the CPU: the image is the memory itself, the view the host data; nothing is copied */
    float cpu_x[N];
    memcpy(cpu_x, h, sizeof h);
    hs_stage_t s;
    ck_assert_int_eq(hs_stage_image(&s, c, cpu_x, N, "test image"), 0);
    ck_assert(hs_stage_host(&s) == cpu_x && !hs_stage_copies(&s));
    hs_stage_host(&s)[3] = 99.0f;
    ck_assert_int_eq(hs_stage_pull(&s), 0); /* must not bring anything back over it */
    ck_assert_float_eq(cpu_x[3], 99.0f);
    hs_stage_close(&s);
    const float *v = NULL;
    ck_assert_int_eq(hs_stage_view_open(&s, c, N, "test view"), 0);
    ck_assert_int_eq(hs_stage_view(&s, h, N, &v), 0);
    ck_assert(v == h);
    ck_assert_int_eq(hs_stage_view(&s, h, N + 1, &v), -EINVAL); /* more than the stage holds */
    hs_stage_close(&s);
    ck_assert_int_eq(hs_stage_buffer(&s, c, N, "test buffer"), 0);
    ck_assert(hs_stage_dev(&s) == hs_stage_host(&s));
    for (int i = 0; i < N; i++) ck_assert_float_eq(hs_stage_host(&s)[i], 0.0f);
    hs_stage_close(&s);
    ck_assert(s.host == NULL && s.dev == NULL);
    hs_stage_close(&s); /* a closed stage closes again */

    /* the emulated device: the image is host memory apart from the device's, and only pull and
     * push move values between them (under ASan any host access to the device side fails) */
    float *x = NULL;
    ck_assert_int_eq(k->ops->alloc(k, N * sizeof(float), (void **)&x), 0);
    ck_assert_int_eq(k->ops->to_device(k, x, h, sizeof h), 0);
    ck_assert_int_eq(hs_stage_image(&s, k, x, N, "test image"), 0);
    float *img = hs_stage_host(&s);
    ck_assert(hs_stage_copies(&s) && img && img != x && !hs_kernels_emu_is_device(img));
    if (hs_kernels_emu_poisons()) ck_assert(!poisoned(img) && !poisoned(img + N - 1));
    ck_assert_int_eq(hs_stage_pull(&s), 0);
    ck_assert_int_eq(memcmp(img, h, sizeof h), 0);
    for (int i = 0; i < N; i++) img[i] *= 2.0f;
    ck_assert_int_eq(k->ops->to_host(k, back, x, sizeof back), 0);
    ck_assert_int_eq(memcmp(back, h, sizeof h), 0); /* not before push */
    ck_assert_int_eq(hs_stage_push(&s), 0);
    ck_assert_int_eq(k->ops->to_host(k, back, x, sizeof back), 0);
    for (int i = 0; i < N; i++) ck_assert_float_eq(back[i], 2.0f * h[i]);
    hs_stage_close(&s);
    /* an image in the caller's memory (all-reduce SGD's shared buffer): used, not freed */
    float mine[N];
    ck_assert_int_eq(hs_stage_image_in(&s, k, x, N, mine, "test image"), 0);
    ck_assert(hs_stage_host(&s) == mine);
    ck_assert_int_eq(hs_stage_pull(&s), 0);
    ck_assert_float_eq(mine[5], 2.0f * h[5]);
    hs_stage_close(&s);
    ck_assert_int_eq(hs_stage_image_in(&s, c, cpu_x, N, mine, "test image"), 0);
    ck_assert(hs_stage_host(&s) == cpu_x); /* the CPU: the memory itself, mine unused */
    hs_stage_close(&s);

    /* a view: device memory holding a copy of host data, for a kernel to read */
    ck_assert_int_eq(hs_stage_view_open(&s, k, N, "test view"), 0);
    ck_assert_int_eq(hs_stage_view(&s, h, N / 2, &v), 0);
    ck_assert(hs_kernels_emu_is_device(v));
    ck_assert_int_eq(k->ops->axpy(k, N / 2, 1.0f, v, x), 0); /* a kernel takes it */
    ck_assert_int_eq(k->ops->to_host(k, back, x, sizeof back), 0);
    for (int i = 0; i < N; i++) ck_assert_float_eq(back[i], (i < N / 2 ? 3.0f : 2.0f) * h[i]);
    hs_stage_close(&s);

    /* a buffer: device memory (zeroed) and its image */
    ck_assert_int_eq(hs_stage_buffer(&s, k, N, "test buffer"), 0);
    ck_assert(hs_kernels_emu_is_device(hs_stage_dev(&s)) &&
              !hs_kernels_emu_is_device(hs_stage_host(&s)));
    ck_assert_int_eq(k->ops->to_host(k, back, hs_stage_dev(&s), sizeof back), 0);
    for (int i = 0; i < N; i++) ck_assert_float_eq(back[i], 0.0f);
    float *dev = hs_stage_dev(&s);
    hs_stage_close(&s);
    ck_assert(!hs_kernels_emu_is_device(dev)); /* freed */

    /* staging memory from the backend, or aligned host memory where it has none */
    void *p = NULL;
    ck_assert_int_eq(hs_kernels_host_alloc(k, 1000, &p, "test staging"), 0);
    ck_assert(p && ((uintptr_t)p % 64) == 0 && !hs_kernels_emu_is_device(p));
    memset(p, 1, 1000);
    hs_kernels_host_free(k, p);
    ck_assert_int_eq(hs_kernels_host_alloc(k, 0, &p, "test staging"), 0);
    ck_assert(p == NULL);

    k->ops->free(k, x);
    hs_kernels_close(&k);
    hs_kernels_close(&c);
}
END_TEST

/* ---- every algorithm in hearsay sim: bit-identical to the CPU ---- */

static void sim_parity(const char *algo)
{
    char a[4096], b[4096], name[80], args[1024], what[200];
    snprintf(name, sizeof name, "%.*s", (int)strcspn(algo, " "), algo);
    for (char *p = name; *p; p++)
        if (*p == ' ' || *p == ':' || *p == '%') *p = '_';
    char tag[120];
    snprintf(tag, sizeof tag, "%s-%zu-cpu", name, strlen(algo));
    tr_workdir_path(a, sizeof a, tag);
    snprintf(tag, sizeof tag, "%s-%zu-emu", name, strlen(algo));
    tr_workdir_path(b, sizeof b, tag);
    snprintf(args, sizeof args, "--algo %s --device cpu " BASE " --eval-every 0.5", algo);
    int st = tr_sim_job(a, "-n 4", args, 120);
    if (st != 0) tr_show_log(a);
    ck_assert_msg(st == 0, "%s on the CPU failed", algo);
    snprintf(args, sizeof args, "--algo %s --device emu " BASE " --eval-every 0.5", algo);
    st = tr_sim_job(b, "-n 4", args, 120);
    if (st != 0) tr_show_log(b);
    ck_assert_msg(st == 0, "%s on the emulated device failed", algo);
    snprintf(what, sizeof what, "hearsay sim --algo %s, --device cpu against emu", algo);
    same_trajectories(a, b, 4, what);
}

static const char *const algos[] = {
    "local",
    "sgp",
    "osgp --tau 2",
    "dpsgd",
    "allreduce",
    "allreduce --bucket-mb 0.0004", /* a bucket per layer (528, 2176 bytes), staged */
    "allreduce --compress int8",
    "allreduce --compress topk:10%",
    "allreduce --compress int8 --bucket-mb 0.0004", /* EF-SGD's parts sent in backward */
    "easgd --tau 2",
    "eamsgd --tau 2",
    "lsgd --tau 2",
    "localsgd --period 3",
    "adpsgd",
    "choco --compress topk:25%",        /* selected on the host, decoded on the device */
    "choco --compress int8:stochastic", /* the compression slots: only bytes cross */
    "choco --compress randk:25%",
    "qsgp --compress topk:25%",
    "qsgp --compress int8",
    "allreduce --precision fp16 --loss-scale dynamic:16777216", /* skips, then trains */
    "sgp --precision bf16",
};

START_TEST(test_sim_algo)
{
    sim_parity(algos[_i]);
}
END_TEST

/* A convolutional model with batch norm and a residual block (conv, pooling, batch-norm
 * kernels and the model's state), with evaluations; on gauss's 1 x 1 x 16 samples. */
START_TEST(test_sim_conv)
{
    char a[4096], b[4096], args[1024];
    tr_workdir_path(a, sizeof a, "conv-cpu");
    tr_workdir_path(b, sizeof b, "conv-emu");
    const char *fmt =
        "--algo dpsgd --device %s --model seq:conv4k3p1-bn-relu-res4-maxpool1-gap-fc4 "
        "--data gauss:dim=16,classes=4,train=800,test=100 --batch 8 --lr 0.05 "
        "--max-iters 10 --seed 5 -q --dump-trajectory --threads 1 --eval-every 0.3";
    snprintf(args, sizeof args, fmt, "cpu");
    int st = tr_sim_job(a, "-n 2", args, 120);
    if (st != 0) tr_show_log(a);
    ck_assert_int_eq(st, 0);
    snprintf(args, sizeof args, fmt, "emu");
    st = tr_sim_job(b, "-n 2", args, 120);
    if (st != 0) tr_show_log(b);
    ck_assert_int_eq(st, 0);
    same_trajectories(a, b, 2, "dpsgd of a residual conv net, --device cpu against emu");
}
END_TEST

/* ---- real processes ---- */

/* 4 ranks of synchronous SGP over hsshm, and 2 of all-reduce SGD over tcp: the same
 * trajectories on the CPU and on the emulated device. */
static void real_parity(int n, const char *runflags, const char *algo, const char *tag)
{
    char a[4096], b[4096], args[1024], name[64];
    snprintf(name, sizeof name, "real-%s-cpu", tag);
    tr_workdir_path(a, sizeof a, name);
    snprintf(name, sizeof name, "real-%s-emu", tag);
    tr_workdir_path(b, sizeof b, name);
    snprintf(args, sizeof args, "%s --device cpu " BASE " --eval-every 0", algo);
    int st = tr_train_job(n, runflags, a, args, 120, NULL);
    if (st != 0) tr_show_log(a);
    ck_assert_msg(st == 0, "%s: the CPU job failed", tag);
    snprintf(args, sizeof args, "%s --device emu " BASE " --eval-every 0.5", algo);
    st = tr_train_job(n, runflags, b, args, 120, NULL);
    if (st != 0) tr_show_log(b);
    ck_assert_msg(st == 0, "%s: the emulated-device job failed", tag);
    same_trajectories(a, b, n, tag);
}

START_TEST(test_real_sgp)
{
    real_parity(4, "", "--algo sgp", "sgp");
}
END_TEST

START_TEST(test_real_allreduce_tcp)
{
    real_parity(2, "", "--algo allreduce --provider tcp", "allreduce-tcp");
}
END_TEST

/* Buckets staged by the service thread while the training thread runs backward on the same
 * kernels: the wall clock's concurrency, over hsshm's mapped all-reduce path. */
START_TEST(test_real_allreduce_buckets)
{
    real_parity(4, "", "--algo allreduce --bucket-mb 0.0004", "allreduce-buckets");
    /* EF-SGD's parts compressed and sent from the notifications, inside backward */
    real_parity(4, "", "--algo allreduce --compress int8 --bucket-mb 0.0004", "efsgd-buckets");
}
END_TEST

START_TEST(test_real_allreduce_shm)
{
    real_parity(4, "", "--algo allreduce --compress int8", "efsgd-shm");
}
END_TEST

/* The asynchronous ones (their trajectories depend on timing): they run, and a checkpoint
 * written on the emulated device resumes on it. */
START_TEST(test_real_async_checkpoint)
{
    const char *runs[] = {"--algo adpsgd", "--algo easgd --tau 2", "--algo lsgd --tau 2"};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        char d[4096], name[32], args[1024];
        snprintf(name, sizeof name, "async-%zu", i);
        tr_workdir_path(d, sizeof d, name);
        snprintf(args, sizeof args, "%s --device emu " BASE " --eval-every 0.5", runs[i]);
        int st = tr_train_job(4, "", d, args, 120, NULL);
        if (st != 0) tr_show_log(d);
        ck_assert_msg(st == 0, "%s on the emulated device failed", runs[i]);
    }
    char a[4096], b[4096], args[1024];
    tr_workdir_path(a, sizeof a, "ckpt");
    tr_workdir_path(b, sizeof b, "ckpt-resumed");
    const char *common = "--algo dpsgd --provider tcp --device emu --model mlp:16-32-4 "
                         "--data gauss:dim=16,classes=4,train=800,test=100 --batch 16 "
                         "--lr 0.1 --seed 3 -q --threads 1";
    snprintf(args, sizeof args, "%s --max-iters 12 --checkpoint-every 0.2", common);
    int st = tr_train_job(2, "", a, args, 120, NULL);
    if (st != 0) tr_show_log(a);
    ck_assert_int_eq(st, 0);
    snprintf(args, sizeof args, "%s --max-iters 20 --resume %s", common, a);
    st = tr_train_job(2, "", b, args, 120, NULL);
    if (st != 0) tr_show_log(b);
    ck_assert_int_eq(st, 0);
    /* the resumed job's first row is the iteration after the checkpoint (it-10: row 11) */
    char path[4200];
    snprintf(path, sizeof path, "%s/rank-0.csv", b);
    char *csv = tr_slurp(path, NULL);
    ck_assert_msg(csv && strchr(csv, '\n'), "no %s", path);
    ck_assert_msg(strncmp(strchr(csv, '\n') + 1, "11,", 3) == 0,
                  "the resumed job did not start after the checkpoint of iteration 10: %.60s",
                  strchr(csv, '\n') + 1);
    free(csv);
}
END_TEST

int main(void)
{
    const char *why = tr_require(NULL, NULL);
    if (tr_workdir_init("device_emu") < 0) return 1;
    Suite *s = suite_create("device_emu");
    TCase *tc = tcase_create("device_emu");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_backend_checks);
    tcase_add_test(tc, test_stage);
    if (why)
        tr_skip("test_sim_algo", "%s", why);
    else
        tcase_add_loop_test(tc, test_sim_algo, 0, (int)(sizeof algos / sizeof algos[0]));
    TR_ADD_TEST(tc, test_sim_conv, why);
    TR_ADD_TEST(tc, test_real_sgp, why);
    TR_ADD_TEST(tc, test_real_allreduce_tcp, why);
    TR_ADD_TEST(tc, test_real_allreduce_shm, why);
    TR_ADD_TEST(tc, test_real_allreduce_buckets, why);
    TR_ADD_TEST(tc, test_real_async_checkpoint, why);
    suite_add_tcase(s, tc);
    return tr_run_suite(s);
}
