/*
 * data/digits.c — scikit-learn's handwritten digits (the UCI "optdigits" test set: 1,797 8x8
 * images, 10 classes) read from its digits.csv.gz, which Debian's python3-sklearn installs.
 *
 * The file: one sample per line, 64 pixel counts (0..16, row-major 8x8) and the label (0..9),
 * comma-separated; plain or gzip-compressed. Split (fixed, needs no seed, so any script can
 * repeat it): sample i (0-based, in file order) is a test sample when i % 5 == 4, a training
 * sample otherwise: 1,438 train and 359 test. Pixels are scaled to [0, 1] (divided by 16); at
 * size 28 each image is resized to 28x28 by bilinear interpolation with half-pixel centres
 * (PyTorch's F.interpolate(mode="bilinear", align_corners=False)), so lenet5 takes it as it takes
 * MNIST. Normalisation happens in data/spec.c.
 */
#include "data/data_internal.h"
#include "hearsay/common.h"
#include "hearsay/data.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DIGITS_SIDE   8
#define DIGITS_PIXELS 64
#define DIGITS_FIELDS 65
#define DIGITS_MAX    100000 /* rows: the file has 1,797; a larger file is not this data set */

const char *const hs_digits_default_paths[] = {
    "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz",
    "/usr/local/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz",
    NULL,
};

int hs_digits_find(char *path, size_t size)
{
    struct stat st;
    for (int i = 0; hs_digits_default_paths[i]; i++)
        if (stat(hs_digits_default_paths[i], &st) == 0) {
            snprintf(path, size, "%s", hs_digits_default_paths[i]);
            return 0;
        }
    return HS_ERR(-ENOENT,
                  "digits: %s not found: install Debian's python3-sklearn (apt-get install "
                  "python3-sklearn), or give the file with --data digits:PATH",
                  hs_digits_default_paths[0]);
}

/* Parse one unsigned integer field at *s (digits only, optionally followed by ".0..."), up to
 * `max`; advance *s past it. -1 when malformed. */
static long field(const char **s, const char *end, long max)
{
    const char *p = *s;
    long v = 0;
    int nd = 0;
    while (p < end && *p >= '0' && *p <= '9' && nd < 9) {
        v = v * 10 + (*p - '0');
        p++;
        nd++;
    }
    if (nd == 0 || (p < end && *p >= '0' && *p <= '9')) return -1;
    if (p < end && *p == '.') { /* 16.0, 3.00: a whole number written as a float */
        p++;
        while (p < end && *p == '0') p++;
    }
    *s = p;
    return v <= max ? v : -1;
}

/* Resize one (8, 8) image to (S, S) bilinearly, half-pixel centres, edges clamped. */
static void resize_bilinear(const float *in, int S, float *out)
{
    const float scale = (float)DIGITS_SIDE / (float)S;
    for (int oy = 0; oy < S; oy++) {
        float sy = HS_MAX(scale * ((float)oy + 0.5f) - 0.5f, 0.0f);
        int y0 = (int)sy, y1 = y0 + (y0 < DIGITS_SIDE - 1);
        float ly = sy - (float)y0;
        for (int ox = 0; ox < S; ox++) {
            float sx = HS_MAX(scale * ((float)ox + 0.5f) - 0.5f, 0.0f);
            int x0 = (int)sx, x1 = x0 + (x0 < DIGITS_SIDE - 1);
            float lx = sx - (float)x0;
            const float *r0 = in + y0 * DIGITS_SIDE, *r1 = in + y1 * DIGITS_SIDE;
            out[oy * S + ox] = (1.0f - ly) * ((1.0f - lx) * r0[x0] + lx * r0[x1]) +
                               ly * ((1.0f - lx) * r1[x0] + lx * r1[x1]);
        }
    }
}

int hs_digits_read(const char *path, int size, hs_dataset_t *train, hs_dataset_t *test)
{
    memset(train, 0, sizeof(*train));
    memset(test, 0, sizeof(*test));
    if (size != 8 && size != 28)
        return HS_ERR(-EINVAL, "digits: size %d is not 8 (native) or 28 (upscaled)", size);
    uint8_t *buf = NULL;
    size_t len = 0;
    HS_TRY(data_load_file(path, &buf, &len));
    const char *s = (const char *)buf, *end = s + len;
    /* count the lines first (a last line without '\n' counts) */
    int64_t rows = 0;
    for (const char *p = s; p < end; p++)
        if (*p == '\n' || p + 1 == end) rows++;
    int rc = 0;
    float *pix = NULL;
    int32_t *lab = NULL;
    if (rows < 5 || rows > DIGITS_MAX) {
        rc = HS_ERR(-EINVAL,
                    "%s: not the digits CSV: %lld line%s (expected 5 .. %d lines of 64 pixel "
                    "values and a label; sklearn's file has 1797)",
                    path, (long long)rows, rows == 1 ? "" : "s", DIGITS_MAX);
        goto done;
    }
    pix = hs_malloc((size_t)rows * DIGITS_PIXELS * sizeof(float), "digits pixels");
    lab = hs_malloc((size_t)rows * sizeof(int32_t), "digits labels");
    if (!pix || !lab) {
        rc = -ENOMEM;
        goto done;
    }
    for (int64_t r = 0; r < rows; r++) {
        for (int f = 0; f < DIGITS_FIELDS; f++) {
            const int is_label = f == DIGITS_PIXELS;
            const char *at = s;
            long v = field(&s, end, is_label ? 9 : 16);
            if (v < 0) {
                const char *e = at;
                while (e < end && *e != ',' && *e != '\n' && e - at < 20) e++;
                rc = HS_ERR(-EINVAL,
                            "%s: not the digits CSV: line %lld, field %d is '%.*s' (expected %s)",
                            path, (long long)r + 1, f + 1, (int)(e - at), at,
                            is_label ? "a label 0..9" : "a pixel count 0..16");
                goto done;
            }
            if (is_label)
                lab[r] = (int32_t)v;
            else
                pix[r * DIGITS_PIXELS + f] = (float)v / 16.0f;
            const char want = is_label ? '\n' : ',';
            if (s < end && *s == '\r' && is_label) s++;
            if (s < end ? *s != want : !is_label) {
                rc = HS_ERR(-EINVAL,
                            "%s: not the digits CSV: line %lld has %s after field %d (expected "
                            "65 comma-separated values per line: 64 pixels and a label)",
                            path, (long long)r + 1,
                            s >= end     ? "the end of the file"
                            : *s == '\n' ? "the end of the line"
                                         : "an unexpected character",
                            f + 1);
                goto done;
            }
            if (s < end) s++;
        }
    }
    const int64_t n_test = rows / 5, n_train = rows - n_test;
    if ((rc = hs_dataset_alloc(train, "digits-train", n_train, 1, size, size, 10)) < 0 ||
        (rc = hs_dataset_alloc(test, "digits-test", n_test, 1, size, size, 10)) < 0)
        goto done;
    int64_t itr = 0, ite = 0;
    const size_t D = (size_t)size * size;
    for (int64_t r = 0; r < rows; r++) {
        hs_dataset_t *ds = r % 5 == 4 ? test : train;
        int64_t at = r % 5 == 4 ? ite++ : itr++;
        float *x = ds->x + (size_t)at * D;
        if (size == DIGITS_SIDE)
            memcpy(x, pix + r * DIGITS_PIXELS, DIGITS_PIXELS * sizeof(float));
        else
            resize_bilinear(pix + r * DIGITS_PIXELS, size, x);
        ds->y[at] = lab[r];
    }
done:
    if (rc < 0) {
        hs_dataset_free(train);
        hs_dataset_free(test);
    }
    free(buf);
    free(pix);
    free(lab);
    return rc;
}
