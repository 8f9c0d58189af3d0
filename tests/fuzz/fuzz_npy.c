/*
 * tests/fuzz/fuzz_npy.c — the NumPy .npy reader (data/npy.c: hs_npy_read, hs_npy_parse_header).
 *
 * Input: 1 byte (classes= value, 0..15: 0 means from the labels), 4 bytes (little-endian) giving
 * the features file's length, the features file (x), then the labels file (y); both are held in
 * memory and read through /proc/self/fd/N. Invariants (hearsay/data.h): an accepted pair has
 * n = the header's first dimension samples of finite features, as many labels in [0, classes),
 * and (for plain files) each file is exactly its header plus count * itemsize bytes.
 */
#include "hearsay/common.h"
#include "hearsay/data.h"
#include "tests/fuzz/fuzz_util.h"

#include <math.h>

static fz_file_t xs, ys;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_t in = fz_init(data, size);
    const int classes = fz_u8(&in) % 16;
    size_t xlen = fz_u32(&in);
    if (xlen > in.n) xlen = in.n;
    fz_file_set(&xs, in.p, xlen);
    fz_file_set(&ys, in.p + xlen, in.n - xlen);
    const int gz = (xlen >= 2 && in.p[0] == 0x1f && in.p[1] == 0x8b) ||
                   (in.n - xlen >= 2 && in.p[xlen] == 0x1f && in.p[xlen + 1] == 0x8b);
    hs_npy_header_t h;
    if (hs_npy_parse_header("x", in.p, xlen, xlen, &h) == 0) {
        FZ_CHECK(h.data_offset + (size_t)h.count * (size_t)h.itemsize == xlen,
                 "offset %zu + %lld x %d != %zu", h.data_offset, (long long)h.count, h.itemsize,
                 xlen);
        FZ_CHECK(h.ndim >= 0 && h.ndim <= HS_NPY_MAX_NDIM, "ndim %d", h.ndim);
    }
    hs_dataset_t ds;
    if (hs_npy_read(xs.path, ys.path, classes, &ds) == 0) {
        FZ_CHECK(ds.n > 0 && ds.dim == (int64_t)ds.c * ds.h * ds.w && ds.dim > 0, "n %lld dim %lld",
                 (long long)ds.n, (long long)ds.dim);
        FZ_CHECK(classes == 0 || ds.classes == classes, "classes %d, asked %d", ds.classes,
                 classes);
        if (!gz) {
            FZ_CHECK(hs_npy_parse_header("x", in.p, xlen, xlen, &h) == 0, "header: %s",
                     hs_last_error());
            FZ_CHECK(h.shape[0] == ds.n, "%lld samples, header says %lld", (long long)ds.n,
                     (long long)h.shape[0]);
        }
        for (int64_t i = 0; i < ds.n * ds.dim; i++)
            FZ_CHECK(isfinite(ds.x[i]), "feature %lld is %g", (long long)i, ds.x[i]);
        FZ_CHECK(hs_dataset_check_labels(&ds) == 0, "labels: %s", hs_last_error());
    }
    hs_dataset_free(&ds);
    return 0;
}
