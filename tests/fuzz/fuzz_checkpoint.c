/*
 * tests/fuzz/fuzz_checkpoint.c — checkpoint files (runtime/checkpoint.c: hs_ckpt_read).
 *
 * Input: one flag byte, then the file (held in memory, read through /proc/self/fd/N). With flag
 * bit 0 the harness first writes the right FNV-1a checksum into the header (when the input is
 * long enough), so that the fuzzer reaches what the reader does after the checksum (bit 1
 * first zeroes the algorithm name's bytes after its end, as the writer pads it). Invariants
 * (hearsay/checkpoint.h): an accepted file has a consistent header (sizes, rank < size,
 * iteration >= 0), and hs_ckpt_write writes it back byte for byte (a file in a private temp
 * directory, removed at once).
 */
#include "hearsay/checkpoint.h"
#include "hearsay/common.h"
#include "tests/fuzz/fuzz_util.h"

#include <stddef.h>
#include <sys/stat.h>

static fz_file_t file;

static void check_rewrite(const hs_ckpt_t *c, const uint8_t *orig, size_t len)
{
    char path[600];
    snprintf(path, sizeof path, "%s/rank-0.bin", fz_tmpdir());
    FZ_CHECK(hs_ckpt_write(path, c) == 0, "write: %s", hs_last_error());
    FILE *f = fopen(path, "rb");
    FZ_CHECK(f != NULL, "written checkpoint missing");
    uint8_t *buf = malloc(len + 1);
    if (!buf) abort();
    size_t got = fread(buf, 1, len + 1, f);
    fclose(f);
    unlink(path);
    FZ_CHECK(got == len, "rewritten file has %zu bytes, the original %zu", got, len);
    FZ_CHECK(memcmp(buf, orig, len) == 0, "rewritten file differs from the original");
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_t in = fz_init(data, size);
    uint8_t flags = fz_u8(&in);
    uint8_t *file_bytes = malloc(in.n + 1);
    if (!file_bytes) abort();
    memcpy(file_bytes, in.p, in.n);
    size_t len = in.n;
    /* the header's size: 88 bytes in a version 2 part, 96 in version 3 (hearsay/checkpoint.h);
     * its checksum is its last 8 bytes in both */
    uint32_t version = 0;
    if (len >= 8) memcpy(&version, file_bytes + 4, sizeof version);
    const size_t hdr =
        version == 2 ? offsetof(hs_ckpt_hdr_t, loss_scale) + 8 : sizeof(hs_ckpt_hdr_t);
    if ((flags & 2) && len >= hdr) {
        /* The writer NUL-pads the algorithm name: make the input's padding canonical so that
         * the rewritten file can equal it. */
        char *algo = (char *)file_bytes + offsetof(hs_ckpt_hdr_t, algo);
        size_t an = strnlen(algo, HS_CKPT_ALGO_MAX);
        memset(algo + an, 0, HS_CKPT_ALGO_MAX - an);
    }
    if ((flags & 1) && len >= hdr) {
        memset(file_bytes + hdr - 8, 0, 8);
        uint64_t s = hs_ckpt_fnv1a(file_bytes, len, HS_FNV1A_INIT);
        memcpy(file_bytes + hdr - 8, &s, sizeof s);
    }
    fz_file_set(&file, file_bytes, len);
    hs_ckpt_t c;
    if (hs_ckpt_read(file.path, &c) == 0) {
        FZ_CHECK(c.size >= 1 && c.rank >= 0 && c.rank < c.size, "rank %d of %d", c.rank, c.size);
        FZ_CHECK(c.iteration >= 0, "iteration %ld", c.iteration);
        FZ_CHECK(memchr(c.algo, 0, sizeof c.algo) != NULL, "algo not terminated");
        FZ_CHECK(c.params != NULL, "no parameter buffer");
        FZ_CHECK(c.velocity_len == 0 || c.velocity_len == c.num_params, "velocity %zu of %zu",
                 c.velocity_len, c.num_params);
        FZ_CHECK(len == hdr + 4 * (c.num_params + c.velocity_len + c.bn_len) + c.state_bytes,
                 "sections do not add up to the file's %zu bytes", len);
        /* (a version 2 part is written back as version 3: not the same bytes) */
        if ((flags & 2) && version != 2) check_rewrite(&c, file_bytes, len);
    }
    hs_ckpt_free(&c);
    free(file_bytes);
    return 0;
}
