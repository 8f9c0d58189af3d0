/*
 * tests/fuzz/fuzz_cifar10.c — the CIFAR-10 binary reader (data/readers.c: hs_cifar10_read) and
 * the normalisation of what it read (hs_data_normalize).
 *
 * Input: one byte for the number of files (1..3) and the normalisation, then per file but the
 * last 2 bytes (little-endian) of length and its bytes, the last file taking the rest. Files are
 * held in memory and read through /proc/self/fd/N. Invariants (hearsay/data.h): an accepted
 * set holds every record of every file in order (3x32x32 pixels in [0, 1], labels 0..9), and
 * normalising it gives finite values.
 */
#include "hearsay/common.h"
#include "hearsay/data.h"
#include "tests/fuzz/fuzz_util.h"

#include <math.h>

static fz_file_t files[3];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_t in = fz_init(data, size);
    uint8_t b = fz_u8(&in);
    int nfiles = 1 + b % 3;
    size_t total = 0;
    const char *paths[3];
    for (int f = 0; f < nfiles; f++) {
        size_t len = in.n;
        if (f < nfiles - 1) {
            len = fz_u8(&in);
            len |= (size_t)fz_u8(&in) << 8;
            if (len > in.n) len = in.n;
        }
        fz_file_set(&files[f], in.p, len);
        in.p += len;
        in.n -= len;
        total += len;
        paths[f] = files[f].path;
    }
    hs_dataset_t ds, copy;
    if (hs_cifar10_read(paths, nfiles, &ds) == 0) {
        FZ_CHECK(total % 3073 == 0 && ds.n == (int64_t)(total / 3073), "%lld records in %zu bytes",
                 (long long)ds.n, total);
        FZ_CHECK(ds.c == 3 && ds.h == 32 && ds.w == 32 && ds.classes == 10, "shape");
        for (int64_t i = 0; i < ds.n * 3072; i++)
            FZ_CHECK(ds.x[i] >= 0 && ds.x[i] <= 1, "pixel %g", ds.x[i]);
        FZ_CHECK(hs_dataset_check_labels(&ds) == 0, "labels: %s", hs_last_error());
        if (hs_cifar10_read(paths, nfiles, &copy) != 0) abort();
        enum hs_data_norm norm = (enum hs_data_norm)((b >> 2) % 3);
        if (hs_data_normalize(norm, hs_cifar10_mean, hs_cifar10_std, &ds, &copy) == 0)
            for (int64_t i = 0; i < ds.n * 3072; i++)
                FZ_CHECK(isfinite(ds.x[i]) && isfinite(copy.x[i]), "normalised pixel %g", ds.x[i]);
        hs_dataset_free(&copy);
    }
    hs_dataset_free(&ds);
    return 0;
}
