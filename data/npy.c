/*
 * data/npy.c — NumPy's own .npy format (np.save): `--data npy:DIR` reads DIR/x_train.npy,
 * DIR/y_train.npy, DIR/x_test.npy and DIR/y_test.npy.
 *
 * A .npy file is the magic "\x93NUMPY", a version (1.0: a 2-byte header length; 2.0 and 3.0:
 * 4 bytes), then a header that is a Python dict literal such as
 *     {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 28, 28), }
 * padded with spaces and a newline, then the array's bytes in C order. The header is parsed
 * strictly (exactly the keys descr, fortran_order and shape, each once) and every size is checked
 * against the file's length before any byte of data is read, so a truncated, padded or foreign
 * file is an error naming the file and what is wrong, never a read past a buffer.
 *
 * Features x: float32 ('<f4', taken as they are), float64 ('<f8', converted) or uint8 ('|u1',
 * divided by 255), of shape (N, D) (1 x 1 x D), (N, H, W) (1 x H x W) or (N, C, H, W); every
 * value finite. Labels y: any integer dtype, shape (N), values in [0, classes).
 */
#include "data/data_internal.h"
#include "hearsay/common.h"
#include "hearsay/data.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NPY_MAGIC_LEN   6
#define NPY_MAX_HEADER  ((size_t)1 << 20)
#define NPY_MAX_DIM     ((int64_t)1 << 24) /* features per sample and each of C, H, W */
#define NPY_MAX_CLASSES 65536

static const char npy_magic[NPY_MAGIC_LEN] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

/* ---- the header --------------------------------------------------------------------------- */

typedef struct cursor {
    const char *path;
    const char *p, *end;
} cursor_t;

static void skip_ws(cursor_t *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static int expect_char(cursor_t *c, char ch, const char *where)
{
    skip_ws(c);
    if (c->p >= c->end)
        return HS_ERR(-EINVAL, "%s: bad .npy header: it ends where '%c' was expected %s", c->path,
                      ch, where);
    if (*c->p != ch)
        return HS_ERR(-EINVAL, "%s: bad .npy header: '%c' where '%c' was expected %s", c->path,
                      *c->p, ch, where);
    c->p++;
    return 0;
}

/* A quoted Python string ('...' or "...", no escapes) into out (size n). */
static int parse_string(cursor_t *c, char *out, size_t n, const char *what)
{
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return HS_ERR(-EINVAL, "%s: bad .npy header: %s is not a quoted string", c->path, what);
    const char q = *c->p++;
    const char *s = c->p;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || *c->p == '\n')
            return HS_ERR(-EINVAL, "%s: bad .npy header: unexpected character in %s", c->path,
                          what);
        c->p++;
    }
    if (c->p >= c->end)
        return HS_ERR(-EINVAL, "%s: bad .npy header: unterminated string in %s", c->path, what);
    const size_t len = (size_t)(c->p - s);
    c->p++;
    if (len >= n) return HS_ERR(-EINVAL, "%s: bad .npy header: %s is too long", c->path, what);
    memcpy(out, s, len);
    out[len] = '\0';
    return 0;
}

static int parse_bool(cursor_t *c, int *out)
{
    skip_ws(c);
    const size_t left = (size_t)(c->end - c->p);
    if (left >= 4 && memcmp(c->p, "True", 4) == 0) {
        c->p += 4;
        *out = 1;
        return 0;
    }
    if (left >= 5 && memcmp(c->p, "False", 5) == 0) {
        c->p += 5;
        *out = 0;
        return 0;
    }
    return HS_ERR(-EINVAL, "%s: bad .npy header: fortran_order is not True or False", c->path);
}

/* (d0, d1, ...) with an optional trailing comma; () is a scalar. */
static int parse_shape(cursor_t *c, hs_npy_header_t *h)
{
    HS_TRY(expect_char(c, '(', "to open the shape"));
    h->ndim = 0;
    for (;;) {
        skip_ws(c);
        if (c->p < c->end && *c->p == ')') {
            c->p++;
            return 0;
        }
        if (c->p >= c->end || *c->p < '0' || *c->p > '9')
            return HS_ERR(-EINVAL,
                          "%s: bad .npy header: the shape holds something other than "
                          "non-negative integers",
                          c->path);
        int64_t v = 0;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            if (v > ((int64_t)1 << 50))
                return HS_ERR(-EINVAL,
                              "%s: bad .npy header: a dimension of the shape is too "
                              "large",
                              c->path);
            v = v * 10 + (*c->p++ - '0');
        }
        if (c->p < c->end && *c->p == 'L') c->p++; /* Python 2 long */
        if (h->ndim >= HS_NPY_MAX_NDIM)
            return HS_ERR(-EINVAL, "%s: the array has more than %d dimensions", c->path,
                          HS_NPY_MAX_NDIM);
        h->shape[h->ndim++] = v;
        skip_ws(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            continue;
        }
        if (c->p < c->end && *c->p == ')') {
            c->p++;
            /* a one-element tuple needs its comma: (5) is the number 5, not a shape */
            if (h->ndim == 1)
                return HS_ERR(-EINVAL,
                              "%s: bad .npy header: shape (%lld) is not a tuple "
                              "(a 1-D shape is written (%lld,))",
                              c->path, (long long)h->shape[0], (long long)h->shape[0]);
            return 0;
        }
        return HS_ERR(-EINVAL, "%s: bad .npy header: the shape is not closed by ')'", c->path);
    }
}

/* descr "<f4", "|u1", ... into byte order, kind and item size. */
static int parse_descr(const char *path, hs_npy_header_t *h)
{
    const char *d = h->descr;
    const size_t len = strlen(d);
    if (len < 3 || len > 4 || !strchr("<>|=", d[0]) || !strchr("fiub", d[1]) || d[2] < '1' ||
        d[2] > '9' || (len == 4 && (d[3] < '0' || d[3] > '9')))
        return HS_ERR(-EINVAL,
                      "%s: dtype '%s' is not supported (x: float32 '<f4', float64 '<f8' or uint8 "
                      "'|u1'; y: an integer type such as '<i8')",
                      path, d);
    h->kind = d[1];
    h->itemsize = atoi(d + 2);
    const int ok_size = h->kind == 'f'   ? (h->itemsize == 4 || h->itemsize == 8)
                        : h->kind == 'b' ? h->itemsize == 1
                                         : (h->itemsize == 1 || h->itemsize == 2 ||
                                            h->itemsize == 4 || h->itemsize == 8);
    if (!ok_size) return HS_ERR(-EINVAL, "%s: dtype '%s' is not supported", path, d);
    if (d[0] == '>' && h->itemsize > 1)
        return HS_ERR(-EINVAL,
                      "%s: dtype '%s' is big-endian: save a little-endian array "
                      "(a.astype('<%c%d'))",
                      path, d, h->kind, h->itemsize);
    return 0;
}

int hs_npy_parse_header(const char *path, const uint8_t *buf, size_t avail, size_t file_len,
                        hs_npy_header_t *h)
{
    memset(h, 0, sizeof(*h));
    if (avail >= 2 && buf[0] == 'P' && buf[1] == 'K')
        return HS_ERR(-EINVAL,
                      "%s: a zip archive (.npz, np.savez), not a .npy file: save each array "
                      "with np.save",
                      path);
    if (avail < NPY_MAGIC_LEN || memcmp(buf, npy_magic, NPY_MAGIC_LEN) != 0)
        return HS_ERR(-EINVAL, "%s: not a .npy file (no \\x93NUMPY magic at the start)", path);
    if (avail < 10)
        return HS_ERR(-EINVAL, "%s: truncated: %zu bytes, shorter than the .npy preamble", path,
                      avail);
    const int major = buf[6], minor = buf[7];
    size_t hlen, start;
    if (major == 1) {
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
        start = 10;
    } else if (major == 2 || major == 3) {
        if (avail < 12)
            return HS_ERR(-EINVAL, "%s: truncated: %zu bytes, shorter than the .npy preamble", path,
                          avail);
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        start = 12;
    } else {
        return HS_ERR(-EINVAL, "%s: .npy format version %d.%d is not supported (1.0, 2.0 or 3.0)",
                      path, major, minor);
    }
    if (hlen > NPY_MAX_HEADER)
        return HS_ERR(-EINVAL, "%s: the .npy header says it is %zu bytes long (too long)", path,
                      hlen);
    if (start + hlen > avail)
        return HS_ERR(-EINVAL,
                      "%s: truncated: the .npy header is %zu bytes but the file ends after %zu",
                      path, hlen, avail - start);
    cursor_t c = {
        .path = path, .p = (const char *)buf + start, .end = (const char *)buf + start + hlen};
    int have_descr = 0, have_fortran = 0, have_shape = 0;
    HS_TRY(expect_char(&c, '{', "at the start of the header dict"));
    for (;;) {
        skip_ws(&c);
        if (c.p < c.end && *c.p == '}') {
            c.p++;
            break;
        }
        char key[32];
        HS_TRY(parse_string(&c, key, sizeof key, "a key of the header dict"));
        HS_TRY(expect_char(&c, ':', "after a key"));
        if (strcmp(key, "descr") == 0) {
            if (have_descr++)
                return HS_ERR(-EINVAL, "%s: bad .npy header: 'descr' given twice", path);
            skip_ws(&c);
            if (c.p < c.end && *c.p == '[')
                return HS_ERR(-EINVAL,
                              "%s: a structured dtype (record array) is not supported: save "
                              "plain arrays of numbers",
                              path);
            HS_TRY(parse_string(&c, h->descr, sizeof h->descr, "descr"));
        } else if (strcmp(key, "fortran_order") == 0) {
            if (have_fortran++)
                return HS_ERR(-EINVAL, "%s: bad .npy header: 'fortran_order' given twice", path);
            HS_TRY(parse_bool(&c, &h->fortran_order));
        } else if (strcmp(key, "shape") == 0) {
            if (have_shape++)
                return HS_ERR(-EINVAL, "%s: bad .npy header: 'shape' given twice", path);
            HS_TRY(parse_shape(&c, h));
        } else {
            return HS_ERR(-EINVAL,
                          "%s: bad .npy header: unknown key '%s' (expected descr, fortran_order, "
                          "shape)",
                          path, key);
        }
        skip_ws(&c);
        if (c.p < c.end && *c.p == ',') {
            c.p++;
            continue;
        }
        HS_TRY(expect_char(&c, '}', "after a value of the header dict"));
        break;
    }
    skip_ws(&c);
    if (c.p != c.end)
        return HS_ERR(-EINVAL, "%s: bad .npy header: unexpected text after the header dict", path);
    if (!have_descr || !have_fortran || !have_shape)
        return HS_ERR(-EINVAL, "%s: bad .npy header: no '%s'", path,
                      !have_descr     ? "descr"
                      : !have_fortran ? "fortran_order"
                                      : "shape");
    HS_TRY(parse_descr(path, h));
    if (h->fortran_order && h->ndim > 1)
        return HS_ERR(-EINVAL,
                      "%s: the array is in Fortran order (fortran_order: True): save a C-ordered "
                      "one (np.ascontiguousarray(a))",
                      path);
    /* element count and data size, checked before they could wrap */
    int64_t count = 1;
    for (int i = 0; i < h->ndim; i++) {
        if (h->shape[i] != 0 && count > (((int64_t)1 << 40) / h->shape[i]))
            return HS_ERR(-EINVAL, "%s: the shape holds too many elements", path);
        count *= h->shape[i];
    }
    h->count = count;
    h->data_offset = start + hlen;
    const uint64_t want = (uint64_t)count * (uint64_t)h->itemsize;
    const uint64_t have = file_len - h->data_offset;
    if (have < want)
        return HS_ERR(-EINVAL,
                      "%s: truncated: the header says %lld elements of %d bytes (%llu bytes) but "
                      "%llu bytes follow it",
                      path, (long long)count, h->itemsize, (unsigned long long)want,
                      (unsigned long long)have);
    if (have > want)
        return HS_ERR(-EINVAL,
                      "%s: corrupt: the header says %lld elements of %d bytes (%llu bytes) but "
                      "%llu bytes follow it (%llu trailing)",
                      path, (long long)count, h->itemsize, (unsigned long long)want,
                      (unsigned long long)have, (unsigned long long)(have - want));
    return 0;
}

/* ---- features and labels ------------------------------------------------------------------ */

static void shape_str(const hs_npy_header_t *h, char *buf, size_t n)
{
    size_t len = (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < h->ndim && len < n; i++)
        len +=
            (size_t)snprintf(buf + len, n - len, "%s%lld", i ? ", " : "", (long long)h->shape[i]);
    if (len < n) snprintf(buf + len, n - len, "%s)", h->ndim == 1 ? "," : "");
}

/* The sample shape of features x: (N, D), (N, H, W) or (N, C, H, W). */
static int x_shape(const char *path, const hs_npy_header_t *h, int *c, int *hh, int *w)
{
    char s[160];
    shape_str(h, s, sizeof s);
    if (h->kind != 'f' && !(h->kind == 'u' && h->itemsize == 1))
        return HS_ERR(-EINVAL,
                      "%s: features of dtype '%s': give float32 ('<f4'), float64 ('<f8') or uint8 "
                      "('|u1')",
                      path, h->descr);
    if (h->ndim < 2 || h->ndim > 4)
        return HS_ERR(-EINVAL,
                      "%s: features of shape %s: give (samples, features), (samples, H, W) or "
                      "(samples, C, H, W)",
                      path, s);
    if (h->shape[0] < 1) return HS_ERR(-EINVAL, "%s: shape %s holds no samples", path, s);
    int64_t d = 1;
    for (int i = 1; i < h->ndim; i++) {
        if (h->shape[i] < 1 || h->shape[i] > NPY_MAX_DIM)
            return HS_ERR(-EINVAL, "%s: shape %s: dimension %d is not in 1..%lld", path, s, i,
                          (long long)NPY_MAX_DIM);
        d *= h->shape[i];
        if (d > NPY_MAX_DIM)
            return HS_ERR(-EINVAL, "%s: shape %s: more than %lld features per sample", path, s,
                          (long long)NPY_MAX_DIM);
    }
    *c = h->ndim == 4 ? (int)h->shape[1] : 1;
    *hh = h->ndim == 4 ? (int)h->shape[2] : h->ndim == 3 ? (int)h->shape[1] : 1;
    *w = (int)h->shape[h->ndim - 1];
    return 0;
}

static int y_check(const char *path, const hs_npy_header_t *h)
{
    char s[160];
    shape_str(h, s, sizeof s);
    if (h->kind != 'i' && h->kind != 'u')
        return HS_ERR(-EINVAL, "%s: labels of dtype '%s': give integers (y.astype('int64'))", path,
                      h->descr);
    if (h->ndim != 1)
        return HS_ERR(-EINVAL,
                      "%s: labels of shape %s: give one label per sample, shape "
                      "(samples,) (y.ravel())",
                      path, s);
    return 0;
}

/* Label i of an integer array (little-endian), as a signed 64-bit value (an unsigned 64-bit one
 * above INT64_MAX reads as -1: out of range anyway). */
static int64_t label_at(const uint8_t *p, const hs_npy_header_t *h, int64_t i)
{
    const uint8_t *q = p + i * h->itemsize;
    uint64_t u = 0;
    for (int b = 0; b < h->itemsize; b++) u |= (uint64_t)q[b] << (8 * b);
    if (h->kind == 'i' && h->itemsize < 8 && (u >> (8 * h->itemsize - 1)) & 1)
        u |= ~(uint64_t)0 << (8 * h->itemsize); /* sign-extend */
    if (h->kind == 'u' && h->itemsize == 8 && u > (uint64_t)INT64_MAX) return -1;
    return (int64_t)u;
}

/* Largest label of y, checking each is in [0, classes) (classes 0: below NPY_MAX_CLASSES). */
static int labels_max(const char *path, const uint8_t *p, const hs_npy_header_t *h, int classes,
                      int64_t *max)
{
    const int64_t lim = classes > 0 ? classes : NPY_MAX_CLASSES;
    *max = -1;
    for (int64_t i = 0; i < h->count; i++) {
        const int64_t v = label_at(p, h, i);
        if (v < 0 || v >= lim)
            return HS_ERR(-EINVAL,
                          "%s: label %lld at index %lld is out of range (expected 0..%lld%s)", path,
                          (long long)v, (long long)i, (long long)lim - 1,
                          classes > 0 ? ", as classes= says" : "");
        if (v > *max) *max = v;
    }
    return 0;
}

int hs_npy_read(const char *x_path, const char *y_path, int classes, hs_dataset_t *out)
{
    memset(out, 0, sizeof(*out));
    uint8_t *xb = NULL, *yb = NULL;
    size_t xlen = 0, ylen = 0;
    hs_npy_header_t xh, yh;
    int c = 0, hh = 0, w = 0;
    int64_t max = -1;
    int rc;
    if (classes < 0 || classes > NPY_MAX_CLASSES)
        return HS_ERR(-EINVAL, "npy: classes %d is not in 0..%d", classes, NPY_MAX_CLASSES);
    if ((rc = data_load_file(x_path, &xb, &xlen)) < 0 ||
        (rc = hs_npy_parse_header(x_path, xb, xlen, xlen, &xh)) < 0 ||
        (rc = x_shape(x_path, &xh, &c, &hh, &w)) < 0)
        goto done;
    if ((rc = data_load_file(y_path, &yb, &ylen)) < 0 ||
        (rc = hs_npy_parse_header(y_path, yb, ylen, ylen, &yh)) < 0 ||
        (rc = y_check(y_path, &yh)) < 0)
        goto done;
    if (yh.shape[0] != xh.shape[0]) {
        rc = HS_ERR(-EINVAL, "%s has %lld samples but %s has %lld labels", x_path,
                    (long long)xh.shape[0], y_path, (long long)yh.shape[0]);
        goto done;
    }
    const uint8_t *ylab = yb + yh.data_offset;
    if ((rc = labels_max(y_path, ylab, &yh, classes, &max)) < 0) goto done;
    if ((rc = hs_dataset_alloc(out, "npy", xh.shape[0], c, hh, w,
                               classes > 0 ? classes : (int)max + 1)) < 0)
        goto done;
    const uint8_t *xd = xb + xh.data_offset;
    const int64_t total = xh.count;
    for (int64_t i = 0; i < total; i++) {
        float v;
        if (xh.kind == 'u') {
            v = (float)xd[i] / 255.0f;
        } else if (xh.itemsize == 4) {
            memcpy(&v, xd + 4 * i, 4);
        } else {
            double dv;
            memcpy(&dv, xd + 8 * i, 8);
            v = (float)dv;
        }
        if (!isfinite(v)) {
            rc = HS_ERR(-EINVAL, "%s: sample %lld, feature %lld is %s%s", x_path,
                        (long long)(i / out->dim), (long long)(i % out->dim),
                        isnan(v) ? "NaN" : "infinite",
                        xh.itemsize == 8 && !isnan(v) ? " (or too large for float32)" : "");
            hs_dataset_free(out);
            goto done;
        }
        out->x[i] = v;
    }
    for (int64_t i = 0; i < out->n; i++) out->y[i] = (int32_t)label_at(ylab, &yh, i);
    rc = 0;
done:
    free(xb);
    free(yb);
    return rc;
}

/* ---- a directory of four files ------------------------------------------------------------ */

static int npy_path(char *buf, size_t n, const char *dir, const char *name)
{
    int len = snprintf(buf, n, "%s/%s.npy", dir, name);
    if (len < 0 || (size_t)len >= n)
        return HS_ERR(-ENAMETOOLONG, "npy: data directory path too long: %s", dir);
    return 0;
}

/* classes 0: from the labels, the same for both sets (at least 2). */
static int agree_classes(const char *dir, int classes, hs_dataset_t *train, hs_dataset_t *test)
{
    if (classes > 0) return 0;
    const int k = HS_MAX(train->classes, test->classes);
    if (k < 2)
        return HS_ERR(-EINVAL,
                      "npy:%s: every label is 0: a classifier needs at least 2 classes (or give "
                      "classes=K)",
                      dir);
    train->classes = test->classes = k;
    return 0;
}

int hs_data_npy(const char *dir, int classes, hs_dataset_t *train, hs_dataset_t *test)
{
    char xp[4096], yp[4096];
    memset(train, 0, sizeof(*train));
    memset(test, 0, sizeof(*test));
    int rc;
    if ((rc = npy_path(xp, sizeof xp, dir, "x_train")) < 0 ||
        (rc = npy_path(yp, sizeof yp, dir, "y_train")) < 0 ||
        (rc = hs_npy_read(xp, yp, classes, train)) < 0)
        goto fail;
    if ((rc = npy_path(xp, sizeof xp, dir, "x_test")) < 0 ||
        (rc = npy_path(yp, sizeof yp, dir, "y_test")) < 0 ||
        (rc = hs_npy_read(xp, yp, classes, test)) < 0)
        goto fail;
    if (test->c != train->c || test->h != train->h || test->w != train->w) {
        rc = HS_ERR(-EINVAL,
                    "npy:%s: x_test.npy's samples are %dx%dx%d but x_train.npy's are %dx%dx%d", dir,
                    test->c, test->h, test->w, train->c, train->h, train->w);
        goto fail;
    }
    if ((rc = agree_classes(dir, classes, train, test)) < 0) goto fail;
    snprintf(train->name, sizeof(train->name), "npy-train");
    snprintf(test->name, sizeof(test->name), "npy-test");
    return 0;
fail:
    hs_dataset_free(train);
    hs_dataset_free(test);
    return rc;
}

/* The header of a file, reading only its first bytes (a gzip file is inflated whole). */
static int read_header(const char *path, hs_npy_header_t *h)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        uint8_t buf[4096];
        ssize_t got = pread(fd, buf, sizeof buf, 0);
        if (got >= 2 && !(buf[0] == 0x1f && buf[1] == 0x8b)) {
            size_t avail = (size_t)got;
            uint8_t *big = NULL;
            /* a header longer than the first block: read up to its stated length */
            if (avail >= 12 && memcmp(buf, npy_magic, NPY_MAGIC_LEN) == 0 && buf[6] >= 2) {
                size_t hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 |
                              (size_t)buf[11] << 24;
                if (hlen + 12 > avail && hlen <= NPY_MAX_HEADER &&
                    (off_t)(hlen + 12) <= st.st_size) {
                    big = hs_malloc(hlen + 12, "npy header");
                    if (!big) {
                        close(fd);
                        return -ENOMEM;
                    }
                    got = pread(fd, big, hlen + 12, 0);
                    avail = got > 0 ? (size_t)got : 0;
                }
            }
            close(fd);
            int rc = hs_npy_parse_header(path, big ? big : buf, avail, (size_t)st.st_size, h);
            free(big);
            return rc;
        }
    }
    if (fd >= 0) close(fd);
    uint8_t *all = NULL;
    size_t len = 0;
    HS_TRY(data_load_file(path, &all, &len));
    int rc = hs_npy_parse_header(path, all, len, len, h);
    free(all);
    return rc;
}

/* The largest label of a labels file (the whole file is read: one number per sample). */
static int file_max_label(const char *path, int classes, int64_t *max)
{
    uint8_t *b = NULL;
    size_t len = 0;
    hs_npy_header_t h;
    HS_TRY(data_load_file(path, &b, &len));
    int rc = hs_npy_parse_header(path, b, len, len, &h);
    if (rc == 0) rc = y_check(path, &h);
    if (rc == 0) rc = labels_max(path, b + h.data_offset, &h, classes, max);
    free(b);
    return rc;
}

int hs_npy_probe(const char *dir, int classes, int *c, int *h, int *w, int *classes_out)
{
    char xp[4096], yp[4096];
    hs_npy_header_t xh;
    int c2, h2, w2;
    HS_TRY(npy_path(xp, sizeof xp, dir, "x_train"));
    HS_TRY(read_header(xp, &xh));
    HS_TRY(x_shape(xp, &xh, c, h, w));
    HS_TRY(npy_path(xp, sizeof xp, dir, "x_test"));
    HS_TRY(read_header(xp, &xh));
    HS_TRY(x_shape(xp, &xh, &c2, &h2, &w2));
    if (c2 != *c || h2 != *h || w2 != *w)
        return HS_ERR(-EINVAL,
                      "npy:%s: x_test.npy's samples are %dx%dx%d but x_train.npy's are %dx%dx%d",
                      dir, c2, h2, w2, *c, *h, *w);
    if (classes > 0) {
        *classes_out = classes;
        return 0;
    }
    int64_t m1, m2;
    HS_TRY(npy_path(yp, sizeof yp, dir, "y_train"));
    HS_TRY(file_max_label(yp, 0, &m1));
    HS_TRY(npy_path(yp, sizeof yp, dir, "y_test"));
    HS_TRY(file_max_label(yp, 0, &m2));
    const int64_t k = HS_MAX(m1, m2) + 1;
    if (k < 2)
        return HS_ERR(-EINVAL,
                      "npy:%s: every label is 0: a classifier needs at least 2 classes (or give "
                      "classes=K)",
                      dir);
    *classes_out = (int)k;
    return 0;
}
