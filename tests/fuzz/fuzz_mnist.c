/*
 * tests/fuzz/fuzz_mnist.c — the MNIST idx reader (data/readers.c: hs_mnist_read).
 *
 * Input: 4 bytes (little-endian) giving the image file's length, the image file (idx3), then the
 * label file (idx1); both are held in memory and read through /proc/self/fd/N. Invariants
 * (hearsay/data.h): an accepted pair gives count samples of 1x28x28 pixels in [0, 1] with labels
 * in 0..9, exactly as many as the header says (for plain files; gzip ones are inflated first).
 */
#include "hearsay/common.h"
#include "hearsay/data.h"
#include "tests/fuzz/fuzz_util.h"

static fz_file_t images, labels;

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_t in = fz_init(data, size);
    size_t ilen = fz_u32(&in);
    if (ilen > in.n) ilen = in.n;
    fz_file_set(&images, in.p, ilen);
    fz_file_set(&labels, in.p + ilen, in.n - ilen);
    hs_dataset_t ds;
    /* a gzip file (by its magic) is inflated first: its sizes say nothing of the content */
    const int gz = (ilen >= 2 && in.p[0] == 0x1f && in.p[1] == 0x8b) ||
                   (in.n - ilen >= 2 && in.p[ilen] == 0x1f && in.p[ilen + 1] == 0x8b);
    if (hs_mnist_read(images.path, labels.path, &ds) == 0) {
        FZ_CHECK(ds.n > 0, "no samples accepted");
        FZ_CHECK(ds.c == 1 && ds.h == 28 && ds.w == 28 && ds.classes == 10, "shape");
        if (!gz) {
            FZ_CHECK(ilen >= 16, "accepted %zu image bytes", ilen);
            uint32_t count = be32(in.p + 4);
            FZ_CHECK(ds.n == (int64_t)count && count > 0, "%lld samples, header says %u",
                     (long long)ds.n, count);
            FZ_CHECK(ilen == 16 + (size_t)count * 784 && in.n - ilen == 8 + (size_t)count,
                     "file sizes %zu, %zu for %u samples", ilen, in.n - ilen, count);
        }
        for (int64_t i = 0; i < ds.n * 784; i++)
            FZ_CHECK(ds.x[i] >= 0 && ds.x[i] <= 1, "pixel %g", ds.x[i]);
        FZ_CHECK(hs_dataset_check_labels(&ds) == 0, "labels: %s", hs_last_error());
    }
    hs_dataset_free(&ds);
    return 0;
}
