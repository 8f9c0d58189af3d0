/*
 * tests/test_data.c — datasets: MNIST idx, CIFAR-10 binary and NumPy .npy readers (good and bad
 * files written to a temp dir), synthetic sets and their Bayes accuracy, sharding, batching, specs.
 */
#include "hearsay/common.h"
#include "hearsay/data.h"
#include "hearsay/rng.h"

#include <check.h>
#include <zlib.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- temp files ---------------------------------------------------------------------------- */

/* One temp dir per test case, made and removed by an unchecked fixture (in the parent process,
 * so it is removed even when a test fails). Tests only read the path. */
static char g_tmp[256];

static void rm_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (d) {
            struct dirent *e;
            while ((e = readdir(d))) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
                char sub[1024];
                snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
                rm_tree(sub);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

static void tmp_setup(void)
{
    snprintf(g_tmp, sizeof(g_tmp), "/tmp/hs_test_data_XXXXXX");
    if (!mkdtemp(g_tmp)) {
        perror("mkdtemp");
        exit(1);
    }
}

static void tmp_teardown(void)
{
    rm_tree(g_tmp);
}

static void tmp_path(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", g_tmp, name);
}

static void make_subdir(char *buf, size_t size, const char *name)
{
    tmp_path(buf, size, name);
    ck_assert_int_eq(mkdir(buf, 0700), 0);
}

static void write_file(const char *path, const uint8_t *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* idx3 image file: header (magic, count, rows, cols) then `payload` pixel bytes (pixels
 * generated from seed). Returns the malloc'd pixels (payload bytes). */
static uint8_t *write_idx3(const char *path, uint32_t magic, uint32_t count, uint32_t rows,
                           uint32_t cols, size_t payload, uint64_t seed)
{
    uint8_t *buf = malloc(16 + payload);
    put_be32(buf, magic);
    put_be32(buf + 4, count);
    put_be32(buf + 8, rows);
    put_be32(buf + 12, cols);
    hs_rng_t r;
    hs_rng_seed(&r, seed, 0);
    for (size_t i = 0; i < payload; i++) buf[16 + i] = (uint8_t)hs_rng_below(&r, 256);
    write_file(path, buf, 16 + payload);
    uint8_t *px = malloc(payload ? payload : 1);
    memcpy(px, buf + 16, payload);
    free(buf);
    return px;
}

/* idx1 label file with the given labels. */
static void write_idx1(const char *path, uint32_t magic, uint32_t count, const uint8_t *labels,
                       size_t nlabels)
{
    uint8_t *buf = malloc(8 + nlabels);
    put_be32(buf, magic);
    put_be32(buf + 4, count);
    memcpy(buf + 8, labels, nlabels);
    write_file(path, buf, 8 + nlabels);
    free(buf);
}

/* A good MNIST pair DIR/PREFIX-images-idx3-ubyte, DIR/PREFIX-labels-idx1-ubyte with n samples;
 * returns the pixels (n * 784) and fills labels (n). */
static uint8_t *write_mnist_pair(const char *dir, const char *prefix, uint32_t n, uint8_t *labels,
                                 uint64_t seed)
{
    char ip[512], lp[512];
    snprintf(ip, sizeof(ip), "%s/%s-images-idx3-ubyte", dir, prefix);
    snprintf(lp, sizeof(lp), "%s/%s-labels-idx1-ubyte", dir, prefix);
    for (uint32_t i = 0; i < n; i++) labels[i] = (uint8_t)((i * 7 + seed) % 10);
    write_idx1(lp, 0x801, n, labels, n);
    return write_idx3(ip, 0x803, n, 28, 28, (size_t)n * 784, seed);
}

static void assert_error_has(const char *a, const char *b)
{
    const char *msg = hs_last_error();
    if (a && !strstr(msg, a)) ck_abort_msg("error '%s' does not contain '%s'", msg, a);
    if (b && !strstr(msg, b)) ck_abort_msg("error '%s' does not contain '%s'", msg, b);
}

/* ---- MNIST --------------------------------------------------------------------------------- */

START_TEST(test_mnist_roundtrip)
{
    char dir[512];
    make_subdir(dir, sizeof(dir), "mnist");
    uint8_t ltr[7], lte[3];
    uint8_t *ptr = write_mnist_pair(dir, "train", 7, ltr, 1);
    uint8_t *pte = write_mnist_pair(dir, "t10k", 3, lte, 2);
    hs_dataset_t tr, te;
    ck_assert_int_eq(hs_data_mnist(dir, HS_NORM_NONE, &tr, &te), 0);
    ck_assert_int_eq(tr.n, 7);
    ck_assert_int_eq(te.n, 3);
    ck_assert_int_eq(tr.c, 1);
    ck_assert_int_eq(tr.h, 28);
    ck_assert_int_eq(tr.w, 28);
    ck_assert_int_eq(tr.dim, 784);
    ck_assert_int_eq(tr.classes, 10);
    ck_assert(isnan(tr.bayes_acc));
    for (int i = 0; i < 7 * 784; i++) ck_assert(tr.x[i] == (float)ptr[i] / 255.0f);
    for (int i = 0; i < 3 * 784; i++) ck_assert(te.x[i] == (float)pte[i] / 255.0f);
    for (int i = 0; i < 7; i++) ck_assert_int_eq(tr.y[i], ltr[i]);
    for (int i = 0; i < 3; i++) ck_assert_int_eq(te.y[i], lte[i]);
    hs_dataset_free(&tr);
    hs_dataset_free(&te);

    /* Published statistics: (p/255 - 0.1307) / 0.3081, computed here in double. */
    ck_assert_int_eq(hs_data_mnist(dir, HS_NORM_KNOWN, &tr, &te), 0);
    for (int i = 0; i < 7 * 784; i++)
        ck_assert(fabs(tr.x[i] - (ptr[i] / 255.0 - 0.1307) / 0.3081) < 1e-5);
    for (int i = 0; i < 3 * 784; i++)
        ck_assert(fabs(te.x[i] - (pte[i] / 255.0 - 0.1307) / 0.3081) < 1e-5);
    hs_dataset_free(&tr);
    hs_dataset_free(&te);

    /* Train statistics: the train set ends with mean 0, std 1; test uses the same map. */
    ck_assert_int_eq(hs_data_mnist(dir, HS_NORM_TRAIN, &tr, &te), 0);
    double m = 0, m2 = 0;
    for (int i = 0; i < 7 * 784; i++) m += ptr[i] / 255.0;
    m /= 7 * 784;
    for (int i = 0; i < 7 * 784; i++) m2 += (ptr[i] / 255.0 - m) * (ptr[i] / 255.0 - m);
    const double sd = sqrt(m2 / (7 * 784));
    for (int i = 0; i < 7 * 784; i++) ck_assert(fabs(tr.x[i] - (ptr[i] / 255.0 - m) / sd) < 1e-4);
    for (int i = 0; i < 3 * 784; i++) ck_assert(fabs(te.x[i] - (pte[i] / 255.0 - m) / sd) < 1e-4);
    hs_dataset_free(&tr);
    hs_dataset_free(&te);

    /* Through the spec, keeping the first samples. */
    char spec[600];
    snprintf(spec, sizeof(spec), "mnist:%s,norm=none,train=5,test=2", dir);
    ck_assert_int_eq(hs_data_load(spec, 0, &tr, &te), 0);
    ck_assert_int_eq(tr.n, 5);
    ck_assert_int_eq(te.n, 2);
    ck_assert(tr.x[5 * 784 - 1] == (float)ptr[5 * 784 - 1] / 255.0f);
    hs_dataset_free(&tr);
    hs_dataset_free(&te);
    snprintf(spec, sizeof(spec), "mnist:%s,train=8", dir);
    ck_assert_int_eq(hs_data_load(spec, 0, &tr, &te), -EINVAL);
    assert_error_has("7", "8");
    free(ptr);
    free(pte);
}
END_TEST

START_TEST(test_mnist_bad_files)
{
    char img[512], lab[512], other[512];
    uint8_t labels[5] = {0, 1, 2, 3, 4};
    hs_dataset_t ds;
    tmp_path(lab, sizeof(lab), "labels-idx1-ubyte");
    write_idx1(lab, 0x801, 5, labels, 5);

    /* Truncated: the header promises 5 images, the file holds 3. */
    tmp_path(img, sizeof(img), "trunc-idx3-ubyte");
    free(write_idx3(img, 0x803, 5, 28, 28, 3 * 784, 1));
    ck_assert_int_eq(hs_mnist_read(img, lab, &ds), -EINVAL);
    assert_error_has(img, "truncated: header says 5 images of 28x28 (3936 bytes) but file has "
                          "2368 bytes");
    ck_assert_ptr_null(ds.x);
    /* Issue 17 item 7: files are read whole, so they are bounded (2 GiB, regular files):
     * /dev/zero and a sparse file past the bound are refused at once, naming the file. */
    double t0 = hs_now();
    ck_assert_int_eq(hs_mnist_read("/dev/zero", lab, &ds), -EINVAL);
    assert_error_has("/dev/zero", "not a regular file");
    tmp_path(img, sizeof(img), "huge-idx3-ubyte");
    FILE *hf = fopen(img, "w");
    ck_assert_ptr_nonnull(hf);
    ck_assert_int_eq(ftruncate(fileno(hf), ((off_t)2 << 30) + 1), 0); /* sparse: no disk used */
    fclose(hf);
    ck_assert_int_eq(hs_mnist_read(img, lab, &ds), -EINVAL);
    assert_error_has(img, "2147483649 bytes is too large for a dataset file");
    unlink(img);
    ck_assert_msg(hs_now() - t0 < 5.0, "took %.1f s", hs_now() - t0);
    /* Shorter than the header itself. */
    tmp_path(img, sizeof(img), "tiny-idx3-ubyte");
    write_file(img, (const uint8_t *)"\0\0\x08\x03\0\0", 6);
    ck_assert_int_eq(hs_mnist_read(img, lab, &ds), -EINVAL);
    assert_error_has(img, "truncated");
    /* Trailing bytes. */
    tmp_path(img, sizeof(img), "long-idx3-ubyte");
    free(write_idx3(img, 0x803, 5, 28, 28, 5 * 784 + 9, 1));
    ck_assert_int_eq(hs_mnist_read(img, lab, &ds), -EINVAL);
    assert_error_has(img, "9 trailing");
    /* Wrong magic: a label file given as images. */
    ck_assert_int_eq(hs_mnist_read(lab, lab, &ds), -EINVAL);
    assert_error_has(lab, "wrong magic 0x00000801");
    tmp_path(img, sizeof(img), "magic-idx3-ubyte");
    free(write_idx3(img, 0x0803 | 0x01000000, 5, 28, 28, 5 * 784, 1));
    ck_assert_int_eq(hs_mnist_read(img, lab, &ds), -EINVAL);
    assert_error_has(img, "wrong magic 0x01000803");
    /* Wrong dimensions. */
    tmp_path(img, sizeof(img), "dims-idx3-ubyte");
    free(write_idx3(img, 0x803, 5, 27, 28, 5 * 27 * 28, 1));
    ck_assert_int_eq(hs_mnist_read(img, lab, &ds), -EINVAL);
    assert_error_has(img, "wrong dimensions: header says 27x28 images, expected 28x28");
    /* Label out of range. */
    tmp_path(img, sizeof(img), "good-idx3-ubyte");
    free(write_idx3(img, 0x803, 5, 28, 28, 5 * 784, 1));
    uint8_t bad[5] = {0, 1, 2, 12, 4};
    tmp_path(other, sizeof(other), "badlab-idx1-ubyte");
    write_idx1(other, 0x801, 5, bad, 5);
    ck_assert_int_eq(hs_mnist_read(img, other, &ds), -EINVAL);
    assert_error_has(other, "label out of range: label 12 at index 3");
    /* Label file truncated. */
    write_idx1(other, 0x801, 5, labels, 4);
    ck_assert_int_eq(hs_mnist_read(img, other, &ds), -EINVAL);
    assert_error_has(other, "truncated: header says 5 labels (13 bytes) but file has 12 bytes");
    /* Counts disagree. */
    write_idx1(other, 0x801, 4, labels, 4);
    ck_assert_int_eq(hs_mnist_read(img, other, &ds), -EINVAL);
    assert_error_has(other, "4 labels but");
    /* Missing file. */
    tmp_path(other, sizeof(other), "no-such-file");
    ck_assert_int_eq(hs_mnist_read(other, lab, &ds), -ENOENT);
    assert_error_has(other, "missing file");
    ck_assert_int_eq(hs_mnist_read(img, other, &ds), -ENOENT);
    assert_error_has(other, "missing file");
    /* Compressed (zlib): truncated or corrupt gzip data, by name, by content, and as the only
     * copy of a missing file. */
    tmp_path(other, sizeof(other), "x-idx3-ubyte.gz");
    write_file(other, (const uint8_t *)"\x1f\x8b\x08\0", 4);
    ck_assert_int_eq(hs_mnist_read(other, lab, &ds), -EINVAL);
    assert_error_has(other, "truncated gzip file");
    tmp_path(other, sizeof(other), "x-idx3-ubyte");
    ck_assert_int_eq(hs_mnist_read(other, lab, &ds), -EINVAL);
    assert_error_has("x-idx3-ubyte.gz", "truncated gzip file");
    tmp_path(other, sizeof(other), "renamed-idx3-ubyte");
    write_file(other, (const uint8_t *)"\x1f\x8b\x08\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 17);
    ck_assert_int_eq(hs_mnist_read(other, lab, &ds), -EINVAL);
    assert_error_has(other, "corrupt gzip file");
    tmp_path(other, sizeof(other), "plain-idx3-ubyte.gz");
    write_file(other, (const uint8_t *)"\0\0\x08\x03\0\0", 6);
    ck_assert_int_eq(hs_mnist_read(other, lab, &ds), -EINVAL);
    assert_error_has(other, "no gzip magic");
    tmp_path(other, sizeof(other), "no-such-file");
    ck_assert_int_eq(hs_mnist_read(other, lab, &ds), -ENOENT);
    assert_error_has(other, "nor ");
    /* A whole directory without the files, via the spec: names the first missing file. */
    char spec[600];
    snprintf(spec, sizeof(spec), "mnist:%s/nothing-here", g_tmp);
    hs_dataset_t te;
    ck_assert_int_eq(hs_data_load(spec, 0, &ds, &te), -ENOENT);
    assert_error_has("nothing-here/train-images-idx3-ubyte", "missing file");
    ck_assert_ptr_null(ds.x);
    ck_assert_ptr_null(te.x);
}
END_TEST

/* gzip `src` into `dst` (zlib's gz writer); then remove src. */
static void gzip_file(const char *src, const char *dst)
{
    FILE *f = fopen(src, "rb");
    ck_assert_ptr_nonnull(f);
    gzFile gz = gzopen(dst, "wb");
    ck_assert_ptr_nonnull(gz);
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        ck_assert_int_eq(gzwrite(gz, buf, (unsigned)n), (int)n);
    fclose(f);
    ck_assert_int_eq(gzclose(gz), Z_OK);
    unlink(src);
}

static size_t file_bytes(const char *path, uint8_t *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

START_TEST(test_mnist_gzip)
{
    /* MNIST as distributed: the four .gz files, read directly */
    char dir[512], p[600], gz[620];
    make_subdir(dir, sizeof(dir), "mnistgz");
    uint8_t ltr[7], lte[3];
    uint8_t *ptr = write_mnist_pair(dir, "train", 7, ltr, 1);
    uint8_t *pte = write_mnist_pair(dir, "t10k", 3, lte, 2);
    const char *names[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                           "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
        snprintf(gz, sizeof(gz), "%s.gz", p);
        gzip_file(p, gz);
    }
    hs_dataset_t tr, te;
    ck_assert_msg(hs_data_mnist(dir, HS_NORM_NONE, &tr, &te) == 0, "%s", hs_last_error());
    ck_assert_int_eq(tr.n, 7);
    ck_assert_int_eq(te.n, 3);
    for (int i = 0; i < 7 * 784; i++) ck_assert(tr.x[i] == (float)ptr[i] / 255.0f);
    for (int i = 0; i < 3 * 784; i++) ck_assert(te.x[i] == (float)pte[i] / 255.0f);
    for (int i = 0; i < 7; i++) ck_assert_int_eq(tr.y[i], ltr[i]);
    hs_dataset_free(&tr);
    hs_dataset_free(&te);
    /* a truncated .gz and one with a flipped byte: errors naming the file, nothing read */
    snprintf(gz, sizeof(gz), "%s/train-images-idx3-ubyte.gz", dir);
    static uint8_t whole[1 << 16];
    size_t n = file_bytes(gz, whole, sizeof(whole));
    ck_assert(n > 40 && n < sizeof(whole));
    write_file(gz, whole, n - 9);
    ck_assert_int_eq(hs_data_mnist(dir, HS_NORM_NONE, &tr, &te), -EINVAL);
    assert_error_has("train-images-idx3-ubyte.gz", "truncated gzip file");
    ck_assert_ptr_null(tr.x);
    whole[n - 6] ^= 0x5a; /* inside the CRC / length trailer */
    write_file(gz, whole, n);
    ck_assert_int_eq(hs_data_mnist(dir, HS_NORM_NONE, &tr, &te), -EINVAL);
    assert_error_has("train-images-idx3-ubyte.gz", "corrupt gzip file");
    whole[n - 6] ^= 0x5a;
    whole[n / 2] ^= 0xff; /* inside the deflate stream */
    write_file(gz, whole, n);
    ck_assert_int_eq(hs_data_mnist(dir, HS_NORM_NONE, &tr, &te), -EINVAL);
    assert_error_has("train-images-idx3-ubyte.gz", "gzip file");
    free(ptr);
    free(pte);
}
END_TEST

/* ---- digits (scikit-learn's CSV) ------------------------------------------------------------ */

/* A digits-format CSV of `rows` rows: pixel j of row r = (r + j) % 17, label r % 10. */
static void write_digits(const char *path, int rows)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    for (int r = 0; r < rows; r++) {
        for (int j = 0; j < 64; j++) fprintf(f, "%d,", (r + j) % 17);
        fprintf(f, "%d\n", r % 10);
    }
    fclose(f);
}

START_TEST(test_digits)
{
    char path[512], gz[600], spec[700];
    tmp_path(path, sizeof(path), "digits.csv");
    write_digits(path, 12);
    hs_dataset_t tr, te;
    /* native 8x8; the fixed split: i % 5 == 4 is test */
    ck_assert_msg(hs_digits_read(path, 8, &tr, &te) == 0, "%s", hs_last_error());
    ck_assert_int_eq(tr.n, 10);
    ck_assert_int_eq(te.n, 2);
    ck_assert_int_eq(tr.dim, 64);
    ck_assert_int_eq(tr.classes, 10);
    int rtr[10] = {0, 1, 2, 3, 5, 6, 7, 8, 10, 11}, rte[2] = {4, 9};
    for (int i = 0; i < 10; i++) {
        ck_assert_int_eq(tr.y[i], rtr[i] % 10);
        for (int j = 0; j < 64; j++) ck_assert(tr.x[i * 64 + j] == (float)((rtr[i] + j) % 17) / 16);
    }
    for (int i = 0; i < 2; i++) ck_assert_int_eq(te.y[i], rte[i]);
    hs_dataset_free(&tr);
    hs_dataset_free(&te);
    /* 28x28: bilinear with half-pixel centres; corners are the corner pixels; output (0, 1)
     * sits at source x = 8/28 * 1.5 - 0.5 < 0, clamped to pixel 0; output (0, 5) at
     * x = 8/28 * 5.5 - 0.5 = 1.071 between pixels 1 and 2 (row 0: pixel j = j / 16) */
    ck_assert_int_eq(hs_digits_read(path, 28, &tr, &te), 0);
    ck_assert_int_eq(tr.dim, 784);
    ck_assert_int_eq(tr.h, 28);
    const float *x0 = tr.x;
    ck_assert(fabsf(x0[0] - 0.0f) < 1e-6f);
    ck_assert(fabsf(x0[27 * 28 + 27] - 63 % 17 / 16.0f) < 1e-6f);
    ck_assert(fabsf(x0[1] - 0.0f) < 1e-6f);
    const double sx = 8.0 / 28 * 5.5 - 0.5;
    ck_assert_msg(fabs(x0[5] - sx * (1.0 / 16)) < 1e-5, "x[0][5] = %g", x0[5]);
    hs_dataset_free(&tr);
    hs_dataset_free(&te);
    /* through the spec, gzip-compressed, normalised with the train statistics */
    snprintf(gz, sizeof(gz), "%s.gz", path);
    gzip_file(path, gz);
    snprintf(spec, sizeof(spec), "digits:%s,size=8", gz);
    hs_data_spec_t ds;
    ck_assert_int_eq(hs_data_spec_parse(spec, &ds), 0);
    int c, h, w, k;
    hs_data_spec_shape(&ds, &c, &h, &w, &k);
    ck_assert(c == 1 && h == 8 && w == 8 && k == 10);
    ck_assert_msg(hs_data_load(spec, 0, &tr, &te) == 0, "%s", hs_last_error());
    double m = 0, m2 = 0;
    for (int i = 0; i < 640; i++) m += tr.x[i];
    for (int i = 0; i < 640; i++) m2 += tr.x[i] * tr.x[i];
    ck_assert(fabs(m / 640) < 1e-5 && fabs(m2 / 640 - 1) < 1e-4);
    hs_dataset_free(&tr);
    hs_dataset_free(&te);
    ck_assert_int_eq(hs_data_spec_parse("digits", &ds), 0);
    hs_data_spec_shape(&ds, &c, &h, &w, &k);
    ck_assert(c == 1 && h == 28 && w == 28 && k == 10);

    /* not the expected CSV: each names the file, the line and the field */
    struct {
        const char *text, *must;
    } bad[] = {
        {"1,2,3\n", "lines"},
        {NULL, "line 3, field 7 is 'x'"},
        {NULL, "line 2 has the end of the line after field 64"},
        {NULL, "line 1, field 65 is '12'"},
        {NULL, "line 4, field 1 is '17'"},
    };
    for (size_t t = 0; t < HS_ARRAY_LEN(bad); t++) {
        tmp_path(path, sizeof(path), "bad.csv");
        if (bad[t].text) {
            write_file(path, (const uint8_t *)bad[t].text, strlen(bad[t].text));
        } else {
            FILE *f = fopen(path, "w");
            for (int r = 0; r < 6; r++) {
                for (int j = 0; j < 64; j++) {
                    if (t == 1 && r == 2 && j == 6)
                        fprintf(f, "x,");
                    else if (t == 4 && r == 3 && j == 0)
                        fprintf(f, "17,");
                    else if (t == 2 && r == 1 && j == 63)
                        fprintf(f, "0\n");
                    else
                        fprintf(f, "%d,", j % 16);
                }
                if (!(t == 2 && r == 1)) fprintf(f, "%d\n", t == 3 && r == 0 ? 12 : 1);
            }
            fclose(f);
        }
        ck_assert_int_eq(hs_digits_read(path, 28, &tr, &te), -EINVAL);
        assert_error_has(path, "not the digits CSV");
        assert_error_has(bad[t].must, NULL);
        ck_assert_ptr_null(tr.x);
        ck_assert_ptr_null(te.x);
    }
    /* spec errors */
    ck_assert_int_eq(hs_data_spec_parse("digits:size=16", &ds), -EINVAL);
    assert_error_has("size 16", "28");
    ck_assert_int_eq(hs_data_spec_parse("digits:norm=known", &ds), -EINVAL);
    assert_error_has("norm=known", "no published statistics");
    ck_assert_int_eq(hs_data_spec_parse("digits:x.csv,dir=y", &ds), -EINVAL);
    assert_error_has("unknown key 'dir'", "path, size");
    tmp_path(path, sizeof(path), "missing.csv");
    snprintf(spec, sizeof(spec), "digits:%s", path);
    ck_assert_int_eq(hs_data_load(spec, 0, &tr, &te), -ENOENT);
    assert_error_has(path, "missing file");
}
END_TEST

/* ---- CIFAR-10 ------------------------------------------------------------------------------ */

/* A CIFAR file of n records; returns the bytes (n * 3073). labels[i] = (i + seed) % 10. */
static uint8_t *write_cifar(const char *path, int n, uint64_t seed)
{
    size_t len = (size_t)n * 3073;
    uint8_t *buf = malloc(len);
    hs_rng_t r;
    hs_rng_seed(&r, seed, 5);
    for (int i = 0; i < n; i++) {
        buf[(size_t)i * 3073] = (uint8_t)((i + seed) % 10);
        for (int j = 1; j < 3073; j++) buf[(size_t)i * 3073 + j] = (uint8_t)hs_rng_below(&r, 256);
    }
    write_file(path, buf, len);
    return buf;
}

/* CIFAR-10 batches gzipped one by one, in the archive's cifar-10-batches-bin/ (the parent
 * given), read directly; a truncated one is an error naming it. */
START_TEST(test_cifar_gzip)
{
    char dir[512], sub[600], path[700], gz[720];
    make_subdir(dir, sizeof(dir), "cifargz");
    snprintf(sub, sizeof(sub), "%s/cifar-10-batches-bin", dir);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    uint8_t *files[6];
    for (int f = 0; f < 6; f++) {
        if (f < 5)
            snprintf(path, sizeof(path), "%s/data_batch_%d.bin", sub, f + 1);
        else
            snprintf(path, sizeof(path), "%s/test_batch.bin", sub);
        files[f] = write_cifar(path, 2, (uint64_t)f + 7);
        snprintf(gz, sizeof(gz), "%s.gz", path);
        gzip_file(path, gz);
    }
    hs_dataset_t tr, te;
    ck_assert_msg(hs_data_cifar10(dir, HS_NORM_NONE, &tr, &te) == 0, "%s", hs_last_error());
    ck_assert_int_eq(tr.n, 10);
    ck_assert_int_eq(te.n, 2);
    for (int f = 0; f < 5; f++)
        for (int i = 0; i < 2; i++) {
            const uint8_t *rec = files[f] + (size_t)i * 3073;
            ck_assert_int_eq(tr.y[2 * f + i], rec[0]);
            for (int j = 0; j < 3072; j++)
                ck_assert(tr.x[(2 * f + i) * 3072 + j] == rec[1 + j] / 255.0f);
        }
    hs_dataset_free(&tr);
    hs_dataset_free(&te);
    static uint8_t whole[1 << 15];
    snprintf(gz, sizeof(gz), "%s/data_batch_3.bin.gz", sub);
    size_t n = file_bytes(gz, whole, sizeof(whole));
    ck_assert(n > 100 && n < sizeof(whole));
    write_file(gz, whole, n / 2);
    ck_assert_int_eq(hs_data_cifar10(dir, HS_NORM_NONE, &tr, &te), -EINVAL);
    assert_error_has("data_batch_3.bin.gz", "truncated gzip file");
    ck_assert_ptr_null(tr.x);
    for (int f = 0; f < 6; f++) free(files[f]);
}
END_TEST

START_TEST(test_cifar_roundtrip)
{
    char dir[512], path[600];
    make_subdir(dir, sizeof(dir), "cifar");
    const int counts[5] = {3, 1, 2, 2, 1};
    uint8_t *files[6];
    for (int f = 0; f < 5; f++) {
        snprintf(path, sizeof(path), "%s/data_batch_%d.bin", dir, f + 1);
        files[f] = write_cifar(path, counts[f], (uint64_t)f + 1);
    }
    snprintf(path, sizeof(path), "%s/test_batch.bin", dir);
    files[5] = write_cifar(path, 4, 99);
    hs_dataset_t tr, te;
    ck_assert_int_eq(hs_data_cifar10(dir, HS_NORM_NONE, &tr, &te), 0);
    ck_assert_int_eq(tr.n, 9);
    ck_assert_int_eq(te.n, 4);
    ck_assert_int_eq(tr.c, 3);
    ck_assert_int_eq(tr.h, 32);
    ck_assert_int_eq(tr.w, 32);
    ck_assert_int_eq(tr.dim, 3072);
    int at = 0;
    for (int f = 0; f < 5; f++)
        for (int i = 0; i < counts[f]; i++, at++) {
            const uint8_t *rec = files[f] + (size_t)i * 3073;
            ck_assert_int_eq(tr.y[at], rec[0]);
            for (int j = 0; j < 3072; j++) ck_assert(tr.x[at * 3072 + j] == rec[1 + j] / 255.0f);
        }
    for (int i = 0; i < 4; i++) ck_assert_int_eq(te.y[i], files[5][(size_t)i * 3073]);
    hs_dataset_free(&tr);
    hs_dataset_free(&te);
    /* Known per-channel statistics: plane c of each record uses mean[c], std[c]. */
    const double mean[3] = {0.4914, 0.4822, 0.4465}, sd[3] = {0.2470, 0.2435, 0.2616};
    ck_assert_int_eq(hs_data_cifar10(dir, HS_NORM_KNOWN, &tr, &te), 0);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3072; j++) {
            const int c = j / 1024;
            double want = (files[5][(size_t)i * 3073 + 1 + j] / 255.0 - mean[c]) / sd[c];
            ck_assert(fabs(te.x[i * 3072 + j] - want) < 1e-5);
        }
    hs_dataset_free(&tr);
    hs_dataset_free(&te);
    /* Through the spec, pointing at the parent of cifar-10-batches-bin/. */
    char parent[512], sub[600], spec[700];
    make_subdir(parent, sizeof(parent), "cifar-parent");
    snprintf(sub, sizeof(sub), "%s/cifar-10-batches-bin", parent);
    ck_assert_int_eq(rename(dir, sub), 0);
    snprintf(spec, sizeof(spec), "cifar10:%s,norm=train", parent);
    ck_assert_int_eq(hs_data_load(spec, 0, &tr, &te), 0);
    ck_assert_int_eq(tr.n, 9);
    double m[3], s[3];
    hs_dataset_channel_stats(&tr, m, s);
    for (int c = 0; c < 3; c++) {
        ck_assert(fabs(m[c]) < 1e-5);
        ck_assert(fabs(s[c] - 1.0) < 1e-4);
    }
    hs_dataset_free(&tr);
    hs_dataset_free(&te);
    for (int f = 0; f < 6; f++) free(files[f]);
}
END_TEST

START_TEST(test_cifar_bad_files)
{
    char path[600];
    hs_dataset_t ds;
    const char *p1[1] = {path};
    /* Truncated: two records and 100 bytes. */
    tmp_path(path, sizeof(path), "trunc.bin");
    uint8_t *buf = calloc(2 * 3073 + 100, 1);
    write_file(path, buf, 2 * 3073 + 100);
    ck_assert_int_eq(hs_cifar10_read(p1, 1, &ds), -EINVAL);
    assert_error_has(path, "6246 bytes is not a whole number of 3073-byte records (2 records + "
                           "100 bytes)");
    ck_assert_ptr_null(ds.x);
    /* Empty. */
    tmp_path(path, sizeof(path), "empty.bin");
    write_file(path, buf, 0);
    ck_assert_int_eq(hs_cifar10_read(p1, 1, &ds), -EINVAL);
    assert_error_has(path, "empty");
    /* CIFAR-100 records. */
    tmp_path(path, sizeof(path), "c100.bin");
    write_file(path, buf, 3074 * 2);
    ck_assert_int_eq(hs_cifar10_read(p1, 1, &ds), -EINVAL);
    assert_error_has(path, "CIFAR-100");
    /* Label out of range in the second record. */
    tmp_path(path, sizeof(path), "label.bin");
    buf[3073] = 10;
    write_file(path, buf, 2 * 3073);
    ck_assert_int_eq(hs_cifar10_read(p1, 1, &ds), -EINVAL);
    assert_error_has(path, "label out of range: label 10 in record 1");
    ck_assert_ptr_null(ds.x);
    free(buf);
    /* Missing file: a directory with batches 1..5 but no test_batch.bin. */
    char dir[512];
    make_subdir(dir, sizeof(dir), "cifar-missing");
    for (int f = 0; f < 5; f++) {
        snprintf(path, sizeof(path), "%s/data_batch_%d.bin", dir, f + 1);
        free(write_cifar(path, 1, 3));
    }
    hs_dataset_t te;
    ck_assert_int_eq(hs_data_cifar10(dir, HS_NORM_KNOWN, &ds, &te), -ENOENT);
    assert_error_has("cifar-missing/test_batch.bin", "missing file");
    ck_assert_ptr_null(ds.x);
    ck_assert_ptr_null(te.x);
}
END_TEST

/* ---- synthetic ----------------------------------------------------------------------------- */

/* Fraction of samples whose nearest true mean (naive loop here) is their label. */
static double nearest_mean_accuracy(const hs_dataset_t *ds, const float *means)
{
    int64_t ok = 0;
    for (int64_t i = 0; i < ds->n; i++) {
        int best = -1;
        double bd = 0;
        for (int k = 0; k < ds->classes; k++) {
            double d = 0;
            for (int64_t j = 0; j < ds->dim; j++) {
                double t = ds->x[i * ds->dim + j] - means[k * ds->dim + j];
                d += t * t;
            }
            if (best < 0 || d < bd) {
                bd = d;
                best = k;
            }
        }
        ok += best == ds->y[i];
    }
    return (double)ok / ds->n;
}

START_TEST(test_gauss_determinism_and_geometry)
{
    hs_gauss_opts_t o;
    hs_gauss_defaults(&o);
    o.dim = 20;
    o.classes = 4;
    o.n_train = 500;
    o.n_test = 100;
    o.sep = 3.0;
    o.seed = 11;
    hs_dataset_t a, at, b, bt, c, ct;
    float ma[80], mb[80], mc[80];
    ck_assert_int_eq(hs_data_gauss(&o, &a, &at, ma), 0);
    ck_assert_int_eq(hs_data_gauss(&o, &b, &bt, mb), 0);
    o.seed = 12;
    ck_assert_int_eq(hs_data_gauss(&o, &c, &ct, mc), 0);
    ck_assert_int_eq(a.n, 500);
    ck_assert_int_eq(at.n, 100);
    ck_assert_int_eq(a.dim, 20);
    ck_assert_int_eq(memcmp(a.x, b.x, 500 * 20 * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(a.y, b.y, 500 * sizeof(int32_t)), 0);
    ck_assert_int_eq(memcmp(at.x, bt.x, 100 * 20 * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(ma, mb, sizeof(ma)), 0);
    int diff = 0;
    for (int i = 0; i < 500 * 20; i++) diff += a.x[i] != c.x[i];
    ck_assert_int_gt(diff, 9900);
    /* Train and test are different draws. */
    ck_assert(memcmp(a.x, at.x, 100 * 20 * sizeof(float)) != 0);
    /* Every pair of means is exactly sep apart. */
    for (int i = 0; i < 4; i++)
        for (int j = i + 1; j < 4; j++) {
            double d = 0;
            for (int k = 0; k < 20; k++)
                d += (ma[i * 20 + k] - ma[j * 20 + k]) * (ma[i * 20 + k] - ma[j * 20 + k]);
            ck_assert(fabs(sqrt(d) - 3.0) < 1e-5);
        }
    /* All labels valid, every class present. */
    int64_t counts[4];
    ck_assert_int_eq(hs_dataset_check_labels(&a), 0);
    hs_dataset_class_counts(&a, counts);
    for (int k = 0; k < 4; k++) ck_assert_int_gt(counts[k], 80);
    hs_dataset_free(&a);
    hs_dataset_free(&at);
    hs_dataset_free(&b);
    hs_dataset_free(&bt);
    hs_dataset_free(&c);
    hs_dataset_free(&ct);
}
END_TEST

START_TEST(test_gauss_bayes_formula)
{
    /* sep = 0: every class equally likely to win: exactly 1/K. */
    for (int k = 2; k <= 10; k += 4)
        ck_assert(fabs(hs_gauss_bayes_orthogonal(k, 0.0, 1.0) - 1.0 / k) < 1e-9);
    /* Two classes: Phi(sep / (2 sigma)). */
    ck_assert(fabs(hs_gauss_bayes_orthogonal(2, 3.0, 1.5) - 0.5 * erfc(-1.0 / sqrt(2.0))) < 1e-12);
    /* Monotone in K and in sep. */
    ck_assert(hs_gauss_bayes_orthogonal(10, 6, 1) < hs_gauss_bayes_orthogonal(3, 6, 1));
    ck_assert(hs_gauss_bayes_orthogonal(10, 6, 1) < hs_gauss_bayes_orthogonal(10, 7, 1));
    /* The integral against the independent Monte-Carlo path, on orthogonal means. */
    hs_gauss_opts_t o;
    hs_gauss_defaults(&o);
    o.dim = 50;
    o.n_train = o.n_test = 1;
    o.sep = 4.0;
    float means[10 * 50];
    hs_dataset_t tr, te;
    ck_assert_int_eq(hs_data_gauss(&o, &tr, &te, means), 0);
    const double p = tr.bayes_acc, mc = hs_gauss_bayes_mc(means, 10, 50, 1.0, 1000000, 5);
    ck_assert(fabs(p - hs_gauss_bayes_orthogonal(10, 4.0, 1.0)) < 1e-15);
    ck_assert_msg(fabs(p - mc) < 4 * sqrt(p * (1 - p) / 1e6), "integral %f vs MC %f", p, mc);
    hs_dataset_free(&tr);
    hs_dataset_free(&te);
}
END_TEST

START_TEST(test_gauss_bayes_empirical)
{
    /* Defaults (784-d, 10 classes): the figure is high, and the Bayes classifier measured on
     * all 22000 generated samples agrees with it. */
    hs_gauss_opts_t o;
    hs_gauss_defaults(&o);
    o.seed = 3;
    float *means = malloc(10 * 784 * sizeof(float));
    hs_dataset_t tr, te;
    ck_assert_int_eq(hs_data_gauss(&o, &tr, &te, means), 0);
    const double p = tr.bayes_acc;
    ck_assert(p > 0.97 && p < 0.99);
    ck_assert(te.bayes_acc == p);
    const double emp =
        (nearest_mean_accuracy(&tr, means) * tr.n + nearest_mean_accuracy(&te, means) * te.n) /
        (tr.n + te.n);
    const double tol = 4 * sqrt(p * (1 - p) / (tr.n + te.n));
    ck_assert_msg(fabs(emp - p) < tol, "empirical %f vs reported %f (tol %f)", emp, p, tol);
    free(means);
    hs_dataset_free(&tr);
    hs_dataset_free(&te);

    /* A harder, lower-dimensional one with a large sample: tight agreement. */
    hs_gauss_opts_t q = {.dim = 16,
                         .classes = 6,
                         .n_train = 200000,
                         .n_test = 10,
                         .sep = 3.0,
                         .noise = 1.2,
                         .seed = 4,
                         .bayes_samples = 1000000};
    float m2[6 * 16];
    ck_assert_int_eq(hs_data_gauss(&q, &tr, &te, m2), 0);
    const double p2 = tr.bayes_acc, e2 = nearest_mean_accuracy(&tr, m2);
    ck_assert(p2 > 0.6 && p2 < 0.9);
    ck_assert_msg(fabs(e2 - p2) < 4 * sqrt(p2 * (1 - p2) / 200000), "empirical %f vs %f", e2, p2);
    hs_dataset_free(&tr);
    hs_dataset_free(&te);

    /* More classes than dimensions: random means, Monte-Carlo figure. */
    hs_gauss_opts_t r = {.dim = 2,
                         .classes = 5,
                         .n_train = 200000,
                         .n_test = 10,
                         .sep = 3.0,
                         .noise = 1.0,
                         .seed = 5,
                         .bayes_samples = 1000000};
    float m3[5 * 2];
    ck_assert_int_eq(hs_data_gauss(&r, &tr, &te, m3), 0);
    const double p3 = tr.bayes_acc, e3 = nearest_mean_accuracy(&tr, m3);
    ck_assert(p3 > 0.3 && p3 < 0.99);
    ck_assert_msg(fabs(e3 - p3) < 4 * sqrt(p3 * (1 - p3) / 200000) + 4 * sqrt(p3 * (1 - p3) / 1e6),
                  "empirical %f vs MC %f", e3, p3);
    hs_dataset_free(&tr);
    hs_dataset_free(&te);
}
END_TEST

START_TEST(test_teacher)
{
    hs_teacher_opts_t o;
    hs_teacher_defaults(&o);
    o.dim = 30;
    o.hidden = 16;
    o.classes = 5;
    o.n_train = 20000;
    o.n_test = 200;
    o.seed = 8;
    hs_dataset_t a, at, b, bt, n, nt;
    ck_assert_int_eq(hs_data_teacher(&o, &a, &at), 0);
    ck_assert_int_eq(hs_data_teacher(&o, &b, &bt), 0);
    ck_assert(a.bayes_acc == 1.0);
    ck_assert_int_eq(memcmp(a.x, b.x, (size_t)a.n * 30 * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(a.y, b.y, (size_t)a.n * sizeof(int32_t)), 0);
    ck_assert_int_eq(hs_dataset_check_labels(&a), 0);
    /* Every class is used, none dominates. */
    int64_t counts[5];
    hs_dataset_class_counts(&a, counts);
    for (int k = 0; k < 5; k++)
        ck_assert_msg(counts[k] > 800 && counts[k] < 10000, "class %d: %lld", k,
                      (long long)counts[k]);
    /* Label noise p: same inputs, a fraction p of labels moved to another class. */
    o.label_noise = 0.2;
    ck_assert_int_eq(hs_data_teacher(&o, &n, &nt), 0);
    ck_assert(fabs(n.bayes_acc - 0.8) < 1e-12);
    ck_assert_int_eq(memcmp(a.x, n.x, (size_t)a.n * 30 * sizeof(float)), 0);
    int64_t moved = 0;
    for (int64_t i = 0; i < a.n; i++) moved += a.y[i] != n.y[i];
    ck_assert(fabs((double)moved / a.n - 0.2) < 4 * sqrt(0.16 / a.n));
    /* A different seed changes the teacher and the inputs. */
    o.seed = 9;
    o.label_noise = 0;
    hs_dataset_free(&b);
    hs_dataset_free(&bt);
    ck_assert_int_eq(hs_data_teacher(&o, &b, &bt), 0);
    ck_assert(memcmp(a.x, b.x, 30 * sizeof(float)) != 0);
    o.label_noise = 0.8; /* = (K-1)/K: the teacher is no longer the Bayes classifier */
    hs_dataset_t e, et;
    ck_assert_int_eq(hs_data_teacher(&o, &e, &et), -EINVAL);
    assert_error_has("label noise", "0.8");
    hs_dataset_free(&a);
    hs_dataset_free(&at);
    hs_dataset_free(&b);
    hs_dataset_free(&bt);
    hs_dataset_free(&n);
    hs_dataset_free(&nt);
}
END_TEST

/* ---- sharding ------------------------------------------------------------------------------ */

/* Assert shards partition [0, n): each index once, each shard sorted. */
static void assert_partition(const hs_shard_t *s, int workers, int64_t n)
{
    char *seen = calloc((size_t)n, 1);
    int64_t total = 0;
    for (int w = 0; w < workers; w++) {
        for (int64_t i = 0; i < s[w].n; i++) {
            const int64_t v = s[w].idx[i];
            ck_assert(v >= 0 && v < n);
            ck_assert_msg(!seen[v], "sample %lld in two shards", (long long)v);
            seen[v] = 1;
            if (i) ck_assert(s[w].idx[i - 1] < v);
        }
        total += s[w].n;
    }
    ck_assert_int_eq(total, n);
    free(seen);
}

START_TEST(test_shard_iid)
{
    hs_shard_t a[7], b[7], c[7];
    ck_assert_int_eq(hs_shard_iid(1003, 7, 42, a), 0);
    assert_partition(a, 7, 1003);
    int64_t lo = a[0].n, hi = a[0].n;
    for (int w = 0; w < 7; w++) {
        lo = HS_MIN(lo, a[w].n);
        hi = HS_MAX(hi, a[w].n);
    }
    ck_assert_int_le(hi - lo, 1);
    ck_assert_int_eq(hs_shard_iid(1003, 7, 42, b), 0);
    for (int w = 0; w < 7; w++) {
        ck_assert_int_eq(a[w].n, b[w].n);
        ck_assert_int_eq(memcmp(a[w].idx, b[w].idx, (size_t)a[w].n * sizeof(int64_t)), 0);
    }
    ck_assert_int_eq(hs_shard_iid(1003, 7, 43, c), 0);
    ck_assert(memcmp(a[0].idx, c[0].idx, (size_t)HS_MIN(a[0].n, c[0].n) * sizeof(int64_t)) != 0);
    /* Not contiguous blocks: a random split spreads over the range. */
    ck_assert_int_gt(a[0].idx[a[0].n - 1] - a[0].idx[0], 800);
    hs_shards_free(a, 7);
    hs_shards_free(b, 7);
    hs_shards_free(c, 7);
    ck_assert_int_eq(hs_shard_iid(5, 7, 1, a), -EINVAL);
}
END_TEST

/* hs_shard_for_rank computes only its rank's iid shard: the same as hs_shard_iid's. */
START_TEST(test_shard_for_rank_iid)
{
    hs_dataset_t ds = {.name = "t", .n = 1003, .classes = 2};
    hs_shard_t all[7];
    ck_assert_int_eq(hs_shard_iid(1003, 7, 42, all), 0);
    for (int r = 0; r < 7; r++) {
        hs_shard_t one;
        ck_assert_int_eq(hs_shard_for_rank(&ds, "iid", 7, r, 42, &one), 0);
        ck_assert_int_eq(one.n, all[r].n);
        ck_assert_int_eq(memcmp(one.idx, all[r].idx, (size_t)one.n * sizeof(int64_t)), 0);
        hs_shard_free(&one);
    }
    hs_shards_free(all, 7);
    hs_shard_t bad;
    ck_assert_int_eq(hs_shard_for_rank(&ds, "iid", 2000, 3, 42, &bad), -EINVAL);
}
END_TEST

/* Mean over workers of the total-variation distance between the worker's label distribution
 * and the uniform one (labels are balanced). */
static double label_skew(const hs_shard_t *s, int workers, const int32_t *labels, int classes)
{
    double tv = 0;
    for (int w = 0; w < workers; w++) {
        double h[16] = {0};
        for (int64_t i = 0; i < s[w].n; i++) h[labels[s[w].idx[i]]] += 1.0 / s[w].n;
        double d = 0;
        for (int k = 0; k < classes; k++) d += fabs(h[k] - 1.0 / classes);
        tv += 0.5 * d;
    }
    return tv / workers;
}

START_TEST(test_shard_dirichlet)
{
    const int64_t n = 20000;
    const int K = 10, W = 8;
    int32_t *labels = malloc(n * sizeof(int32_t));
    for (int64_t i = 0; i < n; i++) labels[i] = (int32_t)(i * 7 % K);
    hs_shard_t s[8], t[8];
    double skew[3];
    const double alphas[3] = {0.05, 1.0, 10000.0};
    for (int a = 0; a < 3; a++) {
        ck_assert_int_eq(hs_shard_dirichlet(labels, n, K, W, alphas[a], 10, 7, s), 0);
        assert_partition(s, W, n);
        for (int w = 0; w < W; w++) ck_assert_int_ge(s[w].n, 10);
        skew[a] = label_skew(s, W, labels, K);
        hs_shards_free(s, W);
    }
    ck_assert_msg(skew[0] > 0.6, "alpha 0.05: skew %f", skew[0]);
    ck_assert_msg(skew[1] > 0.15 && skew[1] < skew[0], "alpha 1: skew %f", skew[1]);
    ck_assert_msg(skew[2] < 0.03, "alpha 1e4: skew %f", skew[2]);
    /* alpha = inf: equal proportions, shard sizes within a class's rounding of n / W. */
    ck_assert_int_eq(hs_shard_dirichlet(labels, n, K, W, INFINITY, 1, 7, s), 0);
    assert_partition(s, W, n);
    ck_assert(label_skew(s, W, labels, K) < 0.002);
    for (int w = 0; w < W; w++) ck_assert(llabs(s[w].n - n / W) <= K);
    hs_shards_free(s, W);
    /* Repeatable per seed. */
    ck_assert_int_eq(hs_shard_dirichlet(labels, n, K, W, 0.3, 10, 9, s), 0);
    ck_assert_int_eq(hs_shard_dirichlet(labels, n, K, W, 0.3, 10, 9, t), 0);
    for (int w = 0; w < W; w++) {
        ck_assert_int_eq(s[w].n, t[w].n);
        ck_assert_int_eq(memcmp(s[w].idx, t[w].idx, (size_t)s[w].n * sizeof(int64_t)), 0);
    }
    hs_shards_free(s, W);
    hs_shards_free(t, W);
    /* Tiny alpha, many workers: the minimum still holds. */
    hs_shard_t many[40];
    ck_assert_int_eq(hs_shard_dirichlet(labels, 2000, K, 40, 0.01, 20, 1, many), 0);
    assert_partition(many, 40, 2000);
    for (int w = 0; w < 40; w++) ck_assert_int_ge(many[w].n, 20);
    hs_shards_free(many, 40);
    /* Impossible minimum, bad alpha, bad labels. */
    ck_assert_int_eq(hs_shard_dirichlet(labels, 100, K, 40, 1.0, 3, 1, many), -EINVAL);
    assert_error_has("100 samples", "40 workers");
    ck_assert_int_eq(hs_shard_dirichlet(labels, n, K, W, 0.0, 1, 1, s), -EINVAL);
    assert_error_has("alpha", NULL);
    ck_assert_int_eq(hs_shard_dirichlet(labels, n, 3, W, 1.0, 1, 1, s), -EINVAL);
    assert_error_has("label", NULL);
    free(labels);
}
END_TEST

START_TEST(test_shard_for_rank_and_spec)
{
    hs_dataset_t ds;
    ck_assert_int_eq(hs_dataset_alloc(&ds, "toy", 500, 1, 1, 2, 5), 0);
    for (int i = 0; i < 500; i++) ds.y[i] = i % 5;
    const char *specs[3] = {"iid", "dirichlet:0.2", "dirichlet:5,min=30"};
    for (int sp = 0; sp < 3; sp++) {
        hs_shard_t s[4];
        for (int r = 0; r < 4; r++)
            ck_assert_int_eq(hs_shard_for_rank(&ds, specs[sp], 4, r, 3, &s[r]), 0);
        assert_partition(s, 4, 500);
        if (sp == 2)
            for (int r = 0; r < 4; r++) ck_assert_int_ge(s[r].n, 30);
        if (sp == 0) {
            hs_shard_t ref[4];
            ck_assert_int_eq(hs_shard_iid(500, 4, 3, ref), 0);
            for (int r = 0; r < 4; r++)
                ck_assert_int_eq(memcmp(ref[r].idx, s[r].idx, (size_t)s[r].n * 8), 0);
            hs_shards_free(ref, 4);
        }
        hs_shards_free(s, 4);
    }
    ck_assert_int_eq(hs_shard_spec_check("dirichlet:inf"), 0);
    const char *bad[][2] = {{"random", "random"},
                            {"dirichlet:", "alpha"},
                            {"dirichlet:-1", "-1"},
                            {"dirichlet:0.5,foo=1", "foo=1"},
                            {"dirichlet:x", "'x'"},
                            /* issue 17 item 2: every number range-checked */
                            {"dirichlet:1e400", "'1e400'"},
                            {"dirichlet:nan", "'nan'"},
                            {"dirichlet:infinity", "'infinity'"},
                            {"dirichlet:1e13", "out of range"},
                            {"dirichlet:0.5,min=-1", "out of range"},
                            {"dirichlet:0.5,min=99999999999999999999", "min="},
                            {"dirichlet:0.5,min=1e3", "'1e3'"}};
    for (size_t i = 0; i < HS_ARRAY_LEN(bad); i++) {
        ck_assert_int_eq(hs_shard_spec_check(bad[i][0]), -EINVAL);
        assert_error_has(bad[i][1], NULL);
    }
    hs_shard_t one;
    ck_assert_int_eq(hs_shard_for_rank(&ds, "iid", 4, 4, 3, &one), -EINVAL);
    ck_assert_ptr_nonnull(strstr(hs_shard_spec_help(), "dirichlet"));
    hs_dataset_free(&ds);
}
END_TEST

/* ---- batching ------------------------------------------------------------------------------ */

static void make_toy(hs_dataset_t *ds, int64_t n)
{
    ck_assert_int_eq(hs_dataset_alloc(ds, "toy", n, 1, 1, 3, 4), 0);
    for (int64_t i = 0; i < n; i++) {
        ds->y[i] = (int32_t)(i % 4);
        for (int j = 0; j < 3; j++) ds->x[i * 3 + j] = (float)(i * 10 + j);
    }
}

/* One epoch: returns the number of batches; order (n) receives the dataset indices. */
static int run_epoch(hs_batcher_t *b, int64_t epoch, int64_t *order, int64_t *count)
{
    float x[16 * 3];
    int32_t y[16];
    int64_t idx[16];
    int nb = 0, got;
    *count = 0;
    hs_batcher_start_epoch(b, epoch);
    while ((got = hs_batcher_next(b, x, y, idx)) > 0) {
        ck_assert_int_le(got, b->batch);
        for (int i = 0; i < got; i++) {
            ck_assert(x[i * 3 + 1] == b->ds->x[idx[i] * 3 + 1]);
            ck_assert(x[i * 3 + 2] == (float)(idx[i] * 10 + 2));
            ck_assert_int_eq(y[i], b->ds->y[idx[i]]);
            order[(*count)++] = idx[i];
        }
        nb++;
    }
    ck_assert_int_eq(hs_batcher_next(b, x, y, idx), 0);
    return nb;
}

START_TEST(test_batcher)
{
    hs_dataset_t ds;
    make_toy(&ds, 300);
    hs_shard_t sh[3];
    ck_assert_int_eq(hs_shard_iid(300, 3, 1, sh), 0);
    hs_batcher_t b, c;
    ck_assert_int_eq(hs_batcher_init(&b, &ds, &sh[1], 16, HS_BATCH_SHUFFLE, 77, 1), 0);
    int64_t o0[100], o0b[100], o1[100], o2[100], cnt;
    /* Keep last: ceil(100 / 16) = 7 batches, every shard sample once. */
    ck_assert_int_eq(hs_batcher_batches_per_epoch(&b), 7);
    ck_assert_int_eq(run_epoch(&b, 0, o0, &cnt), 7);
    ck_assert_int_eq(cnt, 100);
    char seen[300] = {0};
    for (int i = 0; i < 100; i++) {
        ck_assert(!seen[o0[i]]);
        seen[o0[i]] = 1;
    }
    for (int i = 0; i < 100; i++) ck_assert(seen[sh[1].idx[i]]);
    /* Repeatable per (seed, rank, epoch), whatever came before; different across epochs. */
    ck_assert_int_eq(run_epoch(&b, 1, o1, &cnt), 7);
    ck_assert_int_eq(run_epoch(&b, 0, o0b, &cnt), 7);
    ck_assert_int_eq(memcmp(o0, o0b, sizeof(o0)), 0);
    ck_assert(memcmp(o0, o1, sizeof(o0)) != 0);
    ck_assert_int_eq(hs_batcher_init(&c, &ds, &sh[1], 16, HS_BATCH_SHUFFLE, 77, 1), 0);
    ck_assert_int_eq(run_epoch(&c, 1, o2, &cnt), 7);
    ck_assert_int_eq(memcmp(o1, o2, sizeof(o1)), 0);
    hs_batcher_free(&c);
    /* Another rank or seed: another order over the same shard. */
    ck_assert_int_eq(hs_batcher_init(&c, &ds, &sh[1], 16, HS_BATCH_SHUFFLE, 77, 2), 0);
    ck_assert_int_eq(run_epoch(&c, 0, o2, &cnt), 7);
    ck_assert(memcmp(o0, o2, sizeof(o0)) != 0);
    hs_batcher_free(&c);
    /* Shuffled: not the shard order. */
    ck_assert(memcmp(o0, sh[1].idx, sizeof(o0)) != 0);
    hs_batcher_free(&b);

    /* Drop last: 6 full batches; the 4 dropped samples differ between epochs. */
    ck_assert_int_eq(
        hs_batcher_init(&b, &ds, &sh[1], 16, HS_BATCH_SHUFFLE | HS_BATCH_DROP_LAST, 5, 0), 0);
    ck_assert_int_eq(hs_batcher_batches_per_epoch(&b), 6);
    ck_assert_int_eq(run_epoch(&b, 0, o0, &cnt), 6);
    ck_assert_int_eq(cnt, 96);
    ck_assert_int_eq(run_epoch(&b, 3, o1, &cnt), 6);
    ck_assert(memcmp(o0, o1, 96 * sizeof(int64_t)) != 0);
    hs_batcher_free(&b);

    /* Sequential evaluation over the whole set, last partial batch kept. */
    int64_t all[300];
    ck_assert_int_eq(hs_batcher_init_eval(&b, &ds, 16), 0);
    ck_assert_int_eq(run_epoch(&b, 0, all, &cnt), 19);
    ck_assert_int_eq(cnt, 300);
    for (int i = 0; i < 300; i++) ck_assert_int_eq(all[i], i);
    hs_batcher_free(&b);

    /* Errors. */
    ck_assert_int_eq(hs_batcher_init(&b, &ds, &sh[0], 0, 0, 1, 0), -EINVAL);
    ck_assert_int_eq(hs_batcher_init(&b, &ds, &sh[0], 101, HS_BATCH_DROP_LAST, 1, 0), -EINVAL);
    assert_error_has("100 samples", "101");
    hs_shards_free(sh, 3);
    hs_dataset_free(&ds);
}
END_TEST

/* ---- spec ---------------------------------------------------------------------------------- */

START_TEST(test_spec_parse)
{
    hs_data_spec_t s;
    ck_assert_int_eq(hs_data_spec_parse("gauss", &s), 0);
    ck_assert_int_eq(s.kind, HS_DATA_GAUSS);
    ck_assert_int_eq(s.gauss.dim, 784);
    ck_assert_int_eq(s.gauss.classes, 10);
    ck_assert_int_eq(s.has_seed, 0);
    ck_assert_int_eq(
        hs_data_spec_parse("gauss:dim=10,classes=3,train=50,test=20,sep=4,noise=0.5,seed=7,mc=99",
                           &s),
        0);
    ck_assert_int_eq(s.gauss.dim, 10);
    ck_assert_int_eq(s.gauss.classes, 3);
    ck_assert_int_eq(s.gauss.n_train, 50);
    ck_assert_int_eq(s.gauss.n_test, 20);
    ck_assert(s.gauss.sep == 4.0 && s.gauss.noise == 0.5);
    ck_assert_int_eq(s.gauss.bayes_samples, 99);
    ck_assert(s.has_seed && s.seed == 7);
    ck_assert_int_eq(hs_data_spec_parse("teacher:dim=12,hidden=5,classes=4,noise=0.25", &s), 0);
    ck_assert_int_eq(s.kind, HS_DATA_TEACHER);
    ck_assert_int_eq(s.teacher.hidden, 5);
    ck_assert(s.teacher.label_noise == 0.25);
    ck_assert_int_eq(hs_data_spec_parse("cifar10:/some/dir,norm=none,test=7", &s), 0);
    ck_assert_int_eq(s.kind, HS_DATA_CIFAR10);
    ck_assert_str_eq(s.dir, "/some/dir");
    ck_assert_int_eq(s.norm, HS_NORM_NONE);
    ck_assert_int_eq(s.n_test, 7);
    ck_assert_int_eq(hs_data_spec_parse("mnist:dir=/d,norm=train", &s), 0);
    ck_assert_str_eq(s.dir, "/d");
    ck_assert_int_eq(s.norm, HS_NORM_TRAIN);

    const char *bad[][3] = {
        {"", "empty", NULL},
        {"bogus", "unknown kind 'bogus'", NULL},
        {"gauss:foo=1", "unknown key 'foo'", "gauss"},
        {"gauss:dim=abc", "dim", "'abc'"},
        {"gauss:dim=0", "dim", "out of range"},
        {"gauss:sep=-2", "sep", "-2"},
        {"gauss:dim=3,dim=4", "'dim' given twice", NULL},
        {"gauss:", "nothing after", NULL},
        {"gauss:dim", "'dim' is not key=value", NULL},
        {"gauss:dim=5,,classes=3", "empty item", NULL},
        {"teacher:noise=0.9", "noise", "0.9"},
        {"teacher:width=3", "unknown key 'width'", "teacher"},
        {"mnist", "needs a directory", NULL},
        {"mnist:/x,norm=weird", "'weird'", NULL},
        {"mnist:/x,seed=3", "unknown key 'seed'", NULL},
        {"cifar10:/x,train=0", "train", "out of range"},
        /* issue 17 item 2: numbers that overflow, are not finite, negative or too large */
        {"gauss:sep=1e400", "sep", "'1e400'"},
        {"gauss:sep=nan", "sep", "'nan'"},
        {"gauss:noise=inf", "noise", "'inf'"},
        {"gauss:noise=-1", "noise", "out of range"},
        {"gauss:noise=1e7", "noise", "out of range"},
        {"gauss:dim=99999999999999999999", "dim", "'99999999999999999999'"},
        {"gauss:dim=16777217", "dim", "out of range"},
        {"gauss:dim=-3", "dim", "out of range"},
        {"gauss:dim=1e3", "dim", "'1e3'"},
        {"gauss:classes=65537", "classes", "out of range"},
        {"gauss:train=2147483649", "train", "out of range"},
        {"gauss:mc=10000000001", "mc", "out of range"},
        {"gauss:seed=-1", "seed", "out of range"},
        {"gauss:seed=99999999999999999999", "seed", "'99999999999999999999'"},
        {"teacher:hidden=1048577", "hidden", "out of range"},
        {"teacher:noise=nan", "noise", "'nan'"},
        {"teacher:noise=1e400", "noise", "'1e400'"},
        {"mnist:/x,test=-5", "test", "out of range"},
        {"mnist:/x,test=1e9", "test", "'1e9'"},
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(bad); i++) {
        ck_assert_msg(hs_data_spec_parse(bad[i][0], &s) == -EINVAL, "spec '%s' accepted",
                      bad[i][0]);
        assert_error_has(bad[i][1], bad[i][2]);
        if (*bad[i][0]) assert_error_has(bad[i][0], NULL);
    }
    const char *help = hs_data_spec_help();
    ck_assert_ptr_nonnull(strstr(help, "gauss"));
    ck_assert_ptr_nonnull(strstr(help, "teacher"));
    ck_assert_ptr_nonnull(strstr(help, "mnist:DIR"));
    ck_assert_ptr_nonnull(strstr(help, "cifar10:DIR"));
}
END_TEST

START_TEST(test_spec_load)
{
    hs_dataset_t a, at, b, bt;
    /* seed= fixes the data whatever the caller's seed. */
    ck_assert_int_eq(hs_data_load("gauss:dim=8,classes=3,train=40,test=10,seed=5", 1, &a, &at), 0);
    ck_assert_int_eq(hs_data_load("gauss:dim=8,classes=3,train=40,test=10,seed=5", 2, &b, &bt), 0);
    ck_assert_int_eq(a.n, 40);
    ck_assert_int_eq(at.n, 10);
    ck_assert_int_eq(a.dim, 8);
    ck_assert_int_eq(a.classes, 3);
    ck_assert(!isnan(a.bayes_acc));
    ck_assert_int_eq(memcmp(a.x, b.x, 40 * 8 * sizeof(float)), 0);
    hs_dataset_free(&b);
    hs_dataset_free(&bt);
    /* Without seed=, the caller's seed decides. */
    ck_assert_int_eq(hs_data_load("gauss:dim=8,classes=3,train=40,test=10", 5, &b, &bt), 0);
    ck_assert_int_eq(memcmp(a.x, b.x, 40 * 8 * sizeof(float)), 0);
    hs_dataset_free(&b);
    hs_dataset_free(&bt);
    ck_assert_int_eq(hs_data_load("gauss:dim=8,classes=3,train=40,test=10", 6, &b, &bt), 0);
    ck_assert(memcmp(a.x, b.x, 40 * 8 * sizeof(float)) != 0);
    hs_dataset_free(&a);
    hs_dataset_free(&at);
    hs_dataset_free(&b);
    hs_dataset_free(&bt);
    ck_assert_int_eq(
        hs_data_load("teacher:dim=6,hidden=4,classes=3,train=30,test=5,noise=0.1", 1, &a, &at), 0);
    ck_assert_int_eq(a.n, 30);
    ck_assert(fabs(a.bayes_acc - 0.9) < 1e-12);
    hs_dataset_free(&a);
    hs_dataset_free(&at);
    ck_assert_int_eq(hs_data_load("gauss:dim=-3", 1, &a, &at), -EINVAL);
    ck_assert_ptr_null(a.x);
}
END_TEST

/* ---- NumPy .npy ---------------------------------------------------------------------------- */

/* A .npy file as np.save writes it (version 1.0, header padded to 64 bytes): the header dict
 * `dict` (e.g. "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }") then len bytes. */
static void write_npy(const char *path, const char *dict, const void *data, size_t len)
{
    char hdr[512];
    size_t dl = strlen(dict), total = 10 + dl + 1;
    size_t pad = (64 - total % 64) % 64;
    ck_assert(dl + pad + 1 < sizeof hdr);
    memcpy(hdr, dict, dl);
    memset(hdr + dl, ' ', pad);
    hdr[dl + pad] = '\n';
    const size_t hlen = dl + pad + 1;
    uint8_t *buf = malloc(10 + hlen + len + 1);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (uint8_t)(hlen & 0xff);
    buf[9] = (uint8_t)(hlen >> 8);
    memcpy(buf + 10, hdr, hlen);
    if (len) memcpy(buf + 10 + hlen, data, len);
    write_file(path, buf, 10 + hlen + len);
    free(buf);
}

static void npy_file(char *path, size_t size, const char *dir, const char *name)
{
    snprintf(path, size, "%s/%s.npy", dir, name);
}

START_TEST(test_npy_roundtrip)
{
    char dir[512], p[600], spec[700];
    make_subdir(dir, sizeof dir, "npy");
    /* train: 6 samples of 2x3 float32 (1x2x3), labels int64 0..3; test: 2 samples, uint8 labels */
    float x[36];
    for (int i = 0; i < 36; i++) x[i] = (float)i * 0.5f - 3.0f;
    int64_t y[6] = {0, 1, 2, 3, 1, 0};
    npy_file(p, sizeof p, dir, "x_train");
    write_npy(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (6, 2, 3), }", x, sizeof x);
    npy_file(p, sizeof p, dir, "y_train");
    write_npy(p, "{'descr': '<i8', 'fortran_order': False, 'shape': (6,), }", y, sizeof y);
    npy_file(p, sizeof p, dir, "x_test");
    write_npy(p, "{\"descr\":\"<f4\",\"fortran_order\":False,\"shape\":(2,2,3)}", x + 6, 12 * 4);
    uint8_t yt[2] = {4, 2};
    npy_file(p, sizeof p, dir, "y_test");
    write_npy(p, "{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }", yt, 2);

    hs_dataset_t tr, te;
    ck_assert_msg(hs_data_npy(dir, 0, &tr, &te) == 0, "%s", hs_last_error());
    ck_assert(tr.n == 6 && tr.c == 1 && tr.h == 2 && tr.w == 3 && tr.dim == 6);
    ck_assert(te.n == 2 && te.dim == 6);
    ck_assert_int_eq(tr.classes, 5); /* the largest label of either set + 1 */
    ck_assert_int_eq(te.classes, 5);
    ck_assert_int_eq(memcmp(tr.x, x, sizeof x), 0);
    ck_assert_int_eq(memcmp(te.x, x + 6, 12 * 4), 0);
    for (int i = 0; i < 6; i++) ck_assert_int_eq(tr.y[i], y[i]);
    ck_assert(te.y[0] == 4 && te.y[1] == 2);
    hs_dataset_free(&tr);
    hs_dataset_free(&te);

    /* through the spec: the shape from the headers, classes= and train=/test= */
    hs_data_spec_t ds;
    int c, h, w, k;
    snprintf(spec, sizeof spec, "npy:%s", dir);
    ck_assert_int_eq(hs_data_spec_parse(spec, &ds), 0);
    ck_assert_int_eq(ds.norm, HS_NORM_NONE);
    ck_assert_msg(hs_data_spec_probe(&ds, &c, &h, &w, &k) == 0, "%s", hs_last_error());
    ck_assert(c == 1 && h == 2 && w == 3 && k == 5);
    snprintf(spec, sizeof spec, "npy:%s,classes=7,train=4,test=1,norm=train", dir);
    ck_assert_int_eq(hs_data_spec_parse(spec, &ds), 0);
    ck_assert_int_eq(hs_data_spec_probe(&ds, &c, &h, &w, &k), 0);
    ck_assert_int_eq(k, 7);
    ck_assert_msg(hs_data_load(spec, 0, &tr, &te) == 0, "%s", hs_last_error());
    ck_assert(tr.n == 4 && te.n == 1 && tr.classes == 7);
    double m = 0;
    for (int i = 0; i < 24; i++) m += tr.x[i];
    ck_assert(fabs(m / 24) < 1e-5); /* standardised with the (kept) train set's statistics */
    hs_dataset_free(&tr);
    hs_dataset_free(&te);
    snprintf(spec, sizeof spec, "npy:%s,classes=4", dir); /* test label 4 */
    ck_assert_int_eq(hs_data_load(spec, 0, &tr, &te), -EINVAL);
    assert_error_has("y_test.npy: label 4 at index 0 is out of range", "classes=");

    /* uint8 images (N, C, H, W), divided by 255; version 2.0 header; int16 labels */
    make_subdir(dir, sizeof dir, "npy2");
    uint8_t px[3 * 2 * 2 * 2];
    for (int i = 0; i < 24; i++) px[i] = (uint8_t)(i * 10);
    npy_file(p, sizeof p, dir, "x_train");
    write_npy(p, "{'descr': '|u1', 'fortran_order': False, 'shape': (3, 2, 2, 2), }", px, 24);
    npy_file(p, sizeof p, dir, "x_test");
    write_npy(p, "{'descr': '|u1', 'fortran_order': False, 'shape': (1, 2, 2, 2), }", px, 8);
    int16_t ys[3] = {1, 0, 1};
    npy_file(p, sizeof p, dir, "y_train");
    write_npy(p, "{'descr': '<i2', 'fortran_order': False, 'shape': (3,), }", ys, 6);
    npy_file(p, sizeof p, dir, "y_test");
    write_npy(p, "{'descr': '<i2', 'fortran_order': False, 'shape': (1,), }", ys, 2);
    ck_assert_msg(hs_data_npy(dir, 0, &tr, &te) == 0, "%s", hs_last_error());
    ck_assert(tr.c == 2 && tr.h == 2 && tr.w == 2 && tr.classes == 2);
    ck_assert(fabs(tr.x[23] - 230.0 / 255) < 1e-6);
    hs_dataset_free(&tr);
    hs_dataset_free(&te);
}
END_TEST

START_TEST(test_npy_bad_files)
{
    char x[512], y[512];
    hs_dataset_t ds;
    const float f[4] = {1, 2, 3, 4};
    const int64_t l[2] = {0, 1};
    tmp_path(y, sizeof y, "y.npy");
    write_npy(y, "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", l, sizeof l);
    tmp_path(x, sizeof x, "x.npy");
    write_npy(x, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", f, sizeof f);
    ck_assert_msg(hs_npy_read(x, y, 0, &ds) == 0, "%s", hs_last_error());
    ck_assert(ds.n == 2 && ds.dim == 2 && ds.classes == 2);
    hs_dataset_free(&ds);

    struct {
        const char *dict; /* NULL: raw bytes below */
        size_t len;       /* data bytes written (of f) */
        const char *must;
    } bad[] = {
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", 12,
         "truncated: the header says 4 elements of 4 bytes (16 bytes) but 12 bytes follow it"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2), }", 16,
         "corrupt: the header says 2 elements of 4 bytes (8 bytes) but 16 bytes follow it (8 "
         "trailing)"},
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16, "Fortran order"},
        {"{'descr': '>f4', 'fortran_order': False, 'shape': (2, 2), }", 16, "big-endian"},
        {"{'descr': '<f2', 'fortran_order': False, 'shape': (2, 4), }", 16,
         "dtype '<f2' is not supported"},
        {"{'descr': '<i4', 'fortran_order': False, 'shape': (2, 2), }", 16,
         "features of dtype '<i4'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", 16,
         "features of shape (4,): give (samples, features)"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4), }", 16, "is not a tuple"},
        {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4,), }", 16,
         "structured dtype"},
        {"{'descr': '<f4', 'shape': (2, 2), }", 16, "no 'fortran_order'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), 'x': 1}", 16,
         "unknown key 'x'"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", 16,
         "'descr' given twice"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), } x", 16,
         "unexpected text after the header dict"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4), }", 0, "holds no samples"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4), }", 16, NULL}, /* 1 vs 2 */
    };
    for (size_t t = 0; t < HS_ARRAY_LEN(bad); t++) {
        write_npy(x, bad[t].dict, f, bad[t].len);
        ck_assert_msg(hs_npy_read(x, y, 0, &ds) == -EINVAL, "case %zu accepted", t);
        assert_error_has(x, bad[t].must ? bad[t].must : "has 1 samples but");
        ck_assert_ptr_null(ds.x);
    }
    /* not a .npy file at all: a .npz (zip) archive, text, a future version */
    write_file(x, (const uint8_t *)"PK\x03\x04 zip", 8);
    ck_assert_int_eq(hs_npy_read(x, y, 0, &ds), -EINVAL);
    assert_error_has(x, "a zip archive (.npz, np.savez)");
    write_file(x, (const uint8_t *)"1,2,3\n", 6);
    ck_assert_int_eq(hs_npy_read(x, y, 0, &ds), -EINVAL);
    assert_error_has(x, "not a .npy file");
    write_file(x, (const uint8_t *)"\x93NUMPY\x04\x00\x10\x00{}", 12);
    ck_assert_int_eq(hs_npy_read(x, y, 0, &ds), -EINVAL);
    assert_error_has(x, "version 4.0 is not supported");
    write_file(x, (const uint8_t *)"\x93NUMPY\x01\x00\x40\x00{'descr'", 17);
    ck_assert_int_eq(hs_npy_read(x, y, 0, &ds), -EINVAL);
    assert_error_has(x, "truncated: the .npy header is 64 bytes");
    /* a NaN feature names its sample and feature */
    const float nanf_[4] = {1, 2, 3, NAN};
    write_npy(x, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", nanf_, 16);
    ck_assert_int_eq(hs_npy_read(x, y, 0, &ds), -EINVAL);
    assert_error_has(x, "sample 1, feature 1 is NaN");
    /* labels: floats, 2-D, negative */
    write_npy(x, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", f, 16);
    const double yf[2] = {0, 1};
    write_npy(y, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", yf, 16);
    ck_assert_int_eq(hs_npy_read(x, y, 0, &ds), -EINVAL);
    assert_error_has(y, "labels of dtype '<f8': give integers");
    write_npy(y, "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 1), }", l, 16);
    ck_assert_int_eq(hs_npy_read(x, y, 0, &ds), -EINVAL);
    assert_error_has(y, "labels of shape (2, 1)");
    const int32_t neg[2] = {0, -3};
    write_npy(y, "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", neg, 8);
    ck_assert_int_eq(hs_npy_read(x, y, 0, &ds), -EINVAL);
    assert_error_has(y, "label -3 at index 1 is out of range");
    /* a missing directory names the file */
    ck_assert_int_eq(hs_data_npy("/nonexistent-hs", 0, &ds, &ds), -ENOENT);
    assert_error_has("/nonexistent-hs/x_train.npy", "missing file");
    /* spec keys */
    hs_data_spec_t s;
    ck_assert_int_eq(hs_data_spec_parse("npy", &s), -EINVAL);
    assert_error_has("npy needs a directory", NULL);
    ck_assert_int_eq(hs_data_spec_parse("npy:d,norm=known", &s), -EINVAL);
    ck_assert_int_eq(hs_data_spec_parse("npy:d,classes=1", &s), -EINVAL);
    ck_assert_int_eq(hs_data_spec_parse("npy:d,size=8", &s), -EINVAL);
    assert_error_has("known: dir, classes, norm, train, test", NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("data");
    TCase *files = tcase_create("files");
    tcase_add_unchecked_fixture(files, tmp_setup, tmp_teardown);
    tcase_add_test(files, test_mnist_roundtrip);
    tcase_add_test(files, test_mnist_bad_files);
    tcase_add_test(files, test_mnist_gzip);
    tcase_add_test(files, test_cifar_gzip);
    tcase_add_test(files, test_digits);
    tcase_add_test(files, test_cifar_roundtrip);
    tcase_add_test(files, test_cifar_bad_files);
    tcase_add_test(files, test_npy_roundtrip);
    tcase_add_test(files, test_npy_bad_files);
    suite_add_tcase(s, files);
    TCase *synth = tcase_create("synthetic");
    tcase_set_timeout(synth, 60);
    tcase_add_test(synth, test_gauss_determinism_and_geometry);
    tcase_add_test(synth, test_gauss_bayes_formula);
    tcase_add_test(synth, test_gauss_bayes_empirical);
    tcase_add_test(synth, test_teacher);
    suite_add_tcase(s, synth);
    TCase *split = tcase_create("shard_batch_spec");
    tcase_add_test(split, test_shard_iid);
    tcase_add_test(split, test_shard_for_rank_iid);
    tcase_add_test(split, test_shard_dirichlet);
    tcase_add_test(split, test_shard_for_rank_and_spec);
    tcase_add_test(split, test_batcher);
    tcase_add_test(split, test_spec_parse);
    tcase_add_test(split, test_spec_load);
    suite_add_tcase(s, split);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
