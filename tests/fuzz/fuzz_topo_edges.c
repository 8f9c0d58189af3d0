/*
 * tests/fuzz/fuzz_topo_edges.c — edge-list files (topologies/edgelist.c: file:PATH).
 *
 * Input: one byte for n (0: from the file, else 1..64) and the mixing, then the file's bytes
 * (held in memory and read through /proc/self/fd/N). A topology that was built is checked
 * against hearsay/topology.h's invariants, and its written edge list (with weights) must read
 * back as a topology with the same mixing matrix.
 */
#include "hearsay/common.h"
#include "hearsay/topology.h"
#include "tests/fuzz/fuzz_topo_common.h"
#include "tests/fuzz/fuzz_util.h"

static fz_file_t file, back;

/* The graph written with weights reads back with the same matrix. */
static void check_roundtrip(const hs_topo_t *t)
{
    int n = hs_topo_n(t);
    if (n > 64 || hs_topo_period(t) != 1) return;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) abort();
    FZ_CHECK(hs_topo_write_edges(t, 0, 1, f) == 0, "write_edges: %s", hs_last_error());
    fclose(f);
    fz_file_set(&back, buf, len);
    char spec[96];
    snprintf(spec, sizeof spec, "file:%s", back.path);
    hs_topo_opts_t o = {.mixing = HS_TOPO_MIX_FILE};
    hs_topo_t *t2 = NULL;
    FZ_CHECK(hs_topo_create(&t2, spec, n, 0, &o) == 0,
             "the written edge list does not read back: %s\n%s", hs_last_error(), buf);
    double *a = malloc(sizeof(double) * (size_t)n * (size_t)n);
    double *b = malloc(sizeof(double) * (size_t)n * (size_t)n);
    if (!a || !b) abort();
    hs_topo_mixing_matrix(t, 0, a);
    hs_topo_mixing_matrix(t2, 0, b);
    for (int i = 0; i < n * n; i++)
        FZ_CHECK(fabs(a[i] - b[i]) < 1e-9, "W[%d][%d]: %.17g read back as %.17g", i / n, i % n,
                 a[i], b[i]);
    free(a);
    free(b);
    hs_topo_destroy(&t2);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_t in = fz_init(data, size);
    uint8_t b = fz_u8(&in);
    int n = (b & 0x3f) % 65; /* 0: the file says */
    fz_file_set(&file, in.p, in.n);
    char spec[96];
    snprintf(spec, sizeof spec, "file:%s", file.path);
    hs_topo_opts_t o = {.mixing = (hs_topo_mixing_t)(b >> 6)};
    hs_topo_t *t = NULL;
    if (hs_topo_create(&t, spec, n, 7, &o) == 0) {
        FZ_CHECK(n == 0 || hs_topo_n(t) == n, "asked for %d ranks, got %d", n, hs_topo_n(t));
        fz_topo_check(t);
        check_roundtrip(t);
    }
    hs_topo_destroy(&t);
    return 0;
}
