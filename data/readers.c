/*
 * data/readers.c — MNIST idx and CIFAR-10 binary readers, plain or gzip-compressed.
 *
 * Each file is read whole into memory (a .gz file, by name or by its gzip magic, is inflated
 * with zlib, its CRC and length checked) and then its size is checked against what its header
 * (idx) or record size (CIFAR) implies; every access is bounded by the data's length, so a
 * truncated or corrupt file gives an error message naming the file, never a read past a
 * buffer. A missing FILE is looked for as FILE.gz too (MNIST ships as .gz files).
 */
#include "data/data_internal.h"
#include "hearsay/common.h"
#include "hearsay/data.h"
#include "hearsay/file.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

const double hs_mnist_mean[1] = {0.1307};
const double hs_mnist_std[1] = {0.3081};
/* Population statistics of the 50000 CIFAR-10 training images, per channel R, G, B. */
const double hs_cifar10_mean[3] = {0.4914, 0.4822, 0.4465};
const double hs_cifar10_std[3] = {0.2470, 0.2435, 0.2616};

#define MAX_FILE_BYTES ((off_t)1 << 31)
#define CIFAR_RECORD   3073
#define CIFAR_PIXELS   3072

/* Size of a regular file, or an error naming it (-ENOENT when missing). */
static int file_size(const char *path, off_t *size)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        int e = errno;
        return HS_ERR(e == ENOENT ? -ENOENT : -EIO, "%s: %s", path,
                      e == ENOENT ? "missing file (no such file or directory)" : strerror(e));
    }
    if (!S_ISREG(st.st_mode)) return HS_ERR(-EINVAL, "%s: not a regular file", path);
    if (st.st_size > MAX_FILE_BYTES)
        return HS_ERR(-EINVAL, "%s: %lld bytes is too large for a dataset file", path,
                      (long long)st.st_size);
    *size = st.st_size;
    return 0;
}

/* Read the whole file (of `expect` bytes, from file_size) into a new buffer. */
static int read_all(const char *path, size_t expect, uint8_t **out)
{
    *out = NULL;
    /* Checked again on the descriptor: a FIFO swapped in after file_size's stat is refused
     * at once (O_NONBLOCK), not waited on. */
    int fd = hs_file_open_read(path, "dataset file", (long long)MAX_FILE_BYTES, NULL);
    if (fd < 0) return fd == -ENOENT ? -ENOENT : fd == -EINVAL || fd == -EFBIG ? fd : -EIO;
    uint8_t *buf = hs_malloc(expect ? expect : 1, "dataset file");
    if (!buf) {
        close(fd);
        return -ENOMEM;
    }
    size_t got = 0;
    while (got < expect) {
        ssize_t r = read(fd, buf + got, expect - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            free(buf);
            return HS_ERR(-EIO, "%s: read failed after %zu bytes: %s", path, got, strerror(e));
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (got != expect) {
        free(buf);
        return HS_ERR(-EIO, "%s: file shrank while reading (%zu of %zu bytes)", path, got, expect);
    }
    *out = buf;
    return 0;
}

/* Inflate the gzip data in (in_len bytes; one or more members) into a new buffer of at most
 * MAX_FILE_BYTES. Truncated or corrupt data (a bad header, a bad deflate stream, a CRC or length
 * mismatch, trailing bytes that are not another member) is -EINVAL naming `path`. */
static int gunzip_all(const char *path, const uint8_t *in, size_t in_len, uint8_t **out,
                      size_t *out_len)
{
    *out = NULL;
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (inflateInit2(&z, 15 + 16) != Z_OK)
        return HS_ERR(-ENOMEM, "%s: cannot start zlib's inflate", path);
    size_t cap = in_len < ((size_t)1 << 26) ? 4 * in_len + 4096 : (size_t)MAX_FILE_BYTES, len = 0;
    uint8_t *buf = hs_malloc(cap, "decompressed dataset file");
    int rc = 0;
    if (!buf) {
        rc = -ENOMEM;
        goto done;
    }
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)in_len; /* in_len <= 2 GiB */
    for (;;) {
        if (len == cap) {
            if (cap >= (size_t)MAX_FILE_BYTES) {
                rc = HS_ERR(-EINVAL, "%s: decompresses to more than %lld bytes (too large)", path,
                            (long long)MAX_FILE_BYTES);
                goto done;
            }
            cap = HS_MIN(2 * cap, (size_t)MAX_FILE_BYTES);
            uint8_t *nb = realloc(buf, cap);
            if (!nb) {
                rc = HS_ERR(-ENOMEM, "%s: out of memory decompressing (%zu bytes)", path, cap);
                goto done;
            }
            buf = nb;
        }
        z.next_out = buf + len;
        z.avail_out = (uInt)HS_MIN(cap - len, (size_t)1 << 30);
        uInt before = z.avail_out;
        int r = inflate(&z, Z_NO_FLUSH);
        len += before - z.avail_out;
        if (r == Z_STREAM_END) {
            if (z.avail_in == 0) break;
            if (z.avail_in >= 2 && z.next_in[0] == 0x1f && z.next_in[1] == 0x8b) {
                inflateReset(&z); /* another gzip member follows */
                continue;
            }
            rc = HS_ERR(-EINVAL, "%s: corrupt gzip file: %u bytes of trailing garbage", path,
                        z.avail_in);
            goto done;
        }
        if (r == Z_OK || (r == Z_BUF_ERROR && z.avail_out == 0)) continue; /* more room */
        if (r == Z_BUF_ERROR) {
            rc = HS_ERR(-EINVAL,
                        "%s: truncated gzip file: the compressed data ends early (%zu bytes "
                        "inflated so far)",
                        path, len);
            goto done;
        }
        if (r == Z_MEM_ERROR) {
            rc = HS_ERR(-ENOMEM, "%s: out of memory in zlib", path);
            goto done;
        }
        rc = HS_ERR(-EINVAL, "%s: corrupt gzip file: %s", path, z.msg ? z.msg : "bad data");
        goto done;
    }
    *out = buf;
    *out_len = len;
    buf = NULL;
done:
    inflateEnd(&z);
    free(buf);
    return rc;
}

int data_load_file(const char *path, uint8_t **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    off_t size;
    char gz[4096];
    const char *use = path;
    int rc = file_size(path, &size);
    size_t plen = strlen(path);
    if (rc == -ENOENT && plen > 3 && strcmp(path + plen - 3, ".gz") == 0) return rc;
    if (rc == -ENOENT) {
        /* FILE missing: FILE.gz will do */
        struct stat st;
        snprintf(gz, sizeof(gz), "%s.gz", path);
        if (strlen(path) + 4 < sizeof(gz) && stat(gz, &st) == 0) {
            use = gz;
            rc = file_size(gz, &size);
        } else {
            return HS_ERR(-ENOENT, "%s: missing file (no such file or directory, nor %s.gz)", path,
                          path);
        }
    }
    if (rc < 0) return rc;
    uint8_t *raw;
    HS_TRY(read_all(use, (size_t)size, &raw));
    if (size >= 2 && raw[0] == 0x1f && raw[1] == 0x8b) {
        rc = gunzip_all(use, raw, (size_t)size, buf, len);
        free(raw);
        return rc;
    }
    size_t n = strlen(use);
    if (n > 3 && strcmp(use + n - 3, ".gz") == 0) {
        free(raw);
        return HS_ERR(-EINVAL, "%s: corrupt gzip file: no gzip magic (1f 8b) at the start", use);
    }
    *buf = raw;
    *len = (size_t)size;
    return 0;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static int load_file(const char *path, uint8_t **buf, size_t *len)
{
    return data_load_file(path, buf, len);
}

/* ---- MNIST idx ---------------------------------------------------------------------------- */

#define IDX_IMAGES_MAGIC 0x00000803u /* unsigned bytes, 3 dimensions */
#define IDX_LABELS_MAGIC 0x00000801u /* unsigned bytes, 1 dimension */

static int idx_check_magic(const char *path, uint32_t magic, uint32_t want, const char *what)
{
    if (magic == want) return 0;
    const char *hint = "";
    if (magic == IDX_LABELS_MAGIC) hint = " (that is an idx1 label file)";
    if (magic == IDX_IMAGES_MAGIC) hint = " (that is an idx3 image file)";
    return HS_ERR(-EINVAL, "%s: wrong magic 0x%08x%s, expected 0x%08x for %s", path, magic, hint,
                  want, what);
}

static int idx_check_size(const char *path, size_t len, uint64_t expect, const char *says)
{
    if (len < expect)
        return HS_ERR(-EINVAL, "%s: truncated: header says %s (%llu bytes) but file has %zu bytes",
                      path, says, (unsigned long long)expect, len);
    if (len > expect)
        return HS_ERR(-EINVAL,
                      "%s: corrupt: header says %s (%llu bytes) but file has %zu bytes (%llu "
                      "trailing)",
                      path, says, (unsigned long long)expect, len,
                      (unsigned long long)(len - expect));
    return 0;
}

int hs_mnist_read(const char *images_path, const char *labels_path, hs_dataset_t *out)
{
    memset(out, 0, sizeof(*out));
    uint8_t *img = NULL, *lab = NULL;
    size_t ilen = 0, llen = 0;
    char says[160];
    int rc = load_file(images_path, &img, &ilen);
    if (rc < 0) goto done;
    if (ilen >= 4 &&
        (rc = idx_check_magic(images_path, be32(img), IDX_IMAGES_MAGIC, "idx3 images")) < 0)
        goto done;
    if (ilen < 16) {
        rc = HS_ERR(-EINVAL, "%s: truncated: %zu bytes, shorter than the 16-byte idx3 header",
                    images_path, ilen);
        goto done;
    }
    const uint32_t count = be32(img + 4), rows = be32(img + 8), cols = be32(img + 12);
    if (rows != 28 || cols != 28) {
        rc = HS_ERR(-EINVAL, "%s: wrong dimensions: header says %ux%u images, expected 28x28",
                    images_path, rows, cols);
        goto done;
    }
    if (count == 0) {
        rc = HS_ERR(-EINVAL, "%s: header says 0 images", images_path);
        goto done;
    }
    snprintf(says, sizeof(says), "%u images of %ux%u", count, rows, cols);
    if ((rc = idx_check_size(images_path, ilen, 16 + (uint64_t)count * rows * cols, says)) < 0)
        goto done;

    if ((rc = load_file(labels_path, &lab, &llen)) < 0) goto done;
    if (llen >= 4 &&
        (rc = idx_check_magic(labels_path, be32(lab), IDX_LABELS_MAGIC, "idx1 labels")) < 0)
        goto done;
    if (llen < 8) {
        rc = HS_ERR(-EINVAL, "%s: truncated: %zu bytes, shorter than the 8-byte idx1 header",
                    labels_path, llen);
        goto done;
    }
    const uint32_t nlab = be32(lab + 4);
    snprintf(says, sizeof(says), "%u labels", nlab);
    if ((rc = idx_check_size(labels_path, llen, 8 + (uint64_t)nlab, says)) < 0) goto done;
    if (nlab != count) {
        rc = HS_ERR(-EINVAL, "%s has %u labels but %s has %u images", labels_path, nlab,
                    images_path, count);
        goto done;
    }
    for (uint32_t i = 0; i < nlab; i++)
        if (lab[8 + i] > 9) {
            rc = HS_ERR(-EINVAL, "%s: label out of range: label %u at index %u (expected 0..9)",
                        labels_path, lab[8 + i], i);
            goto done;
        }
    if ((rc = hs_dataset_alloc(out, "mnist", count, 1, 28, 28, 10)) < 0) goto done;
    const size_t total = (size_t)count * 784;
    for (size_t i = 0; i < total; i++) out->x[i] = (float)img[16 + i] / 255.0f;
    for (uint32_t i = 0; i < count; i++) out->y[i] = lab[8 + i];
    rc = 0;
done:
    free(img);
    free(lab);
    return rc;
}

static int join_path(char *buf, size_t size, const char *dir, const char *name)
{
    int n = snprintf(buf, size, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= size)
        return HS_ERR(-ENAMETOOLONG, "data directory path too long: %s", dir);
    return 0;
}

int hs_data_normalize(enum hs_data_norm norm, const double *known_mean, const double *known_std,
                      hs_dataset_t *train, hs_dataset_t *test)
{
    double mean[8], std[8];
    if (train->c > 8 || test->c != train->c)
        return HS_ERR(-EINVAL, "normalise %s: unsupported channel count %d", train->name, train->c);
    switch (norm) {
    case HS_NORM_NONE:
        return 0;
    case HS_NORM_KNOWN:
        HS_TRY(hs_dataset_standardize(train, known_mean, known_std));
        return hs_dataset_standardize(test, known_mean, known_std);
    case HS_NORM_TRAIN:
        hs_dataset_channel_stats(train, mean, std);
        HS_TRY(hs_dataset_standardize(train, mean, std));
        return hs_dataset_standardize(test, mean, std);
    }
    return HS_ERR(-EINVAL, "unknown normalisation %d", (int)norm);
}

int hs_data_mnist(const char *dir, enum hs_data_norm norm, hs_dataset_t *train, hs_dataset_t *test)
{
    char ip[4096], lp[4096];
    memset(test, 0, sizeof(*test));
    memset(train, 0, sizeof(*train));
    int rc;
    if ((rc = join_path(ip, sizeof(ip), dir, "train-images-idx3-ubyte")) < 0 ||
        (rc = join_path(lp, sizeof(lp), dir, "train-labels-idx1-ubyte")) < 0 ||
        (rc = hs_mnist_read(ip, lp, train)) < 0)
        goto fail;
    if ((rc = join_path(ip, sizeof(ip), dir, "t10k-images-idx3-ubyte")) < 0 ||
        (rc = join_path(lp, sizeof(lp), dir, "t10k-labels-idx1-ubyte")) < 0 ||
        (rc = hs_mnist_read(ip, lp, test)) < 0)
        goto fail;
    snprintf(train->name, sizeof(train->name), "mnist-train");
    snprintf(test->name, sizeof(test->name), "mnist-test");
    if ((rc = hs_data_normalize(norm, hs_mnist_mean, hs_mnist_std, train, test)) < 0) goto fail;
    return 0;
fail:
    hs_dataset_free(train);
    hs_dataset_free(test);
    return rc;
}

/* ---- CIFAR-10 binary ---------------------------------------------------------------------- */

/* Records in a CIFAR file of len bytes, or -EINVAL naming it. */
static int cifar_records(const char *path, size_t len, int64_t *records)
{
    if (len == 0) return HS_ERR(-EINVAL, "%s: empty file (expected 3073-byte records)", path);
    if (len % CIFAR_RECORD != 0) {
        const char *hint = len % 3074 == 0 ? " (looks like CIFAR-100's 3074-byte records)" : "";
        return HS_ERR(-EINVAL,
                      "%s: truncated or corrupt: %zu bytes is not a whole number of 3073-byte "
                      "records (%zu records + %zu bytes)%s",
                      path, len, len / CIFAR_RECORD, len % CIFAR_RECORD, hint);
    }
    *records = (int64_t)(len / CIFAR_RECORD);
    return 0;
}

int hs_cifar10_read(const char *const *paths, int nfiles, hs_dataset_t *out)
{
    memset(out, 0, sizeof(*out));
    if (nfiles < 1) return HS_ERR(-EINVAL, "cifar10: no files to read");
    if (nfiles > 64) return HS_ERR(-EINVAL, "cifar10: too many files (%d, at most 64)", nfiles);
    uint8_t *bufs[64] = {0};
    size_t lens[64] = {0};
    int64_t total = 0;
    int rc = 0;
    for (int f = 0; f < nfiles; f++) {
        int64_t r = 0;
        if ((rc = load_file(paths[f], &bufs[f], &lens[f])) < 0 ||
            (rc = cifar_records(paths[f], lens[f], &r)) < 0)
            goto done;
        total += r;
    }
    if ((rc = hs_dataset_alloc(out, "cifar10", total, 3, 32, 32, 10)) < 0) goto done;
    int64_t at = 0;
    for (int f = 0; f < nfiles; f++) {
        const int64_t nrec = (int64_t)(lens[f] / CIFAR_RECORD);
        for (int64_t r = 0; r < nrec; r++) {
            const uint8_t *rec = bufs[f] + r * CIFAR_RECORD;
            if (rec[0] > 9) {
                rc = HS_ERR(-EINVAL,
                            "%s: label out of range: label %u in record %lld (expected 0..9)",
                            paths[f], rec[0], (long long)r);
                hs_dataset_free(out);
                goto done;
            }
            out->y[at + r] = rec[0];
            float *xi = out->x + (at + r) * CIFAR_PIXELS; // (3, 32, 32)
            for (int j = 0; j < CIFAR_PIXELS; j++) xi[j] = (float)rec[1 + j] / 255.0f;
        }
        at += nrec;
    }
done:
    for (int f = 0; f < nfiles; f++) free(bufs[f]);
    return rc;
}

/* FILE or FILE.gz exists. */
static int exists_maybe_gz(const char *path)
{
    struct stat st;
    char gz[4200];
    snprintf(gz, sizeof(gz), "%s.gz", path);
    return stat(path, &st) == 0 || stat(gz, &st) == 0;
}

int hs_data_cifar10(const char *dir, enum hs_data_norm norm, hs_dataset_t *train,
                    hs_dataset_t *test)
{
    char base[4096], paths[6][4096];
    const char *ptrs[6];
    int rc;
    memset(test, 0, sizeof(*test));
    memset(train, 0, sizeof(*train));
    snprintf(base, sizeof(base), "%s", dir);
    /* The official archive unpacks into cifar-10-batches-bin/: accept its parent too. */
    if ((rc = join_path(paths[0], sizeof(paths[0]), dir, "data_batch_1.bin")) < 0) return rc;
    if (!exists_maybe_gz(paths[0])) {
        char sub[4096];
        if (join_path(sub, sizeof(sub), dir, "cifar-10-batches-bin/data_batch_1.bin") == 0 &&
            exists_maybe_gz(sub))
            snprintf(base, sizeof(base), "%s/cifar-10-batches-bin", dir);
    }
    for (int f = 0; f < 5; f++) {
        char name[32];
        snprintf(name, sizeof(name), "data_batch_%d.bin", f + 1);
        if ((rc = join_path(paths[f], sizeof(paths[f]), base, name)) < 0) return rc;
        ptrs[f] = paths[f];
    }
    if ((rc = join_path(paths[5], sizeof(paths[5]), base, "test_batch.bin")) < 0) return rc;
    ptrs[5] = paths[5];
    if ((rc = hs_cifar10_read(ptrs, 5, train)) < 0) goto fail;
    if ((rc = hs_cifar10_read(ptrs + 5, 1, test)) < 0) goto fail;
    snprintf(train->name, sizeof(train->name), "cifar10-train");
    snprintf(test->name, sizeof(test->name), "cifar10-test");
    if ((rc = hs_data_normalize(norm, hs_cifar10_mean, hs_cifar10_std, train, test)) < 0) goto fail;
    return 0;
fail:
    hs_dataset_free(train);
    hs_dataset_free(test);
    return rc;
}
