/*
 * tests/fuzz/fuzz_ps_wire.c — the training messages' header check (optim/ps_wire.h:
 * hs_ps_hdr_check).
 *
 * Input: 8 bytes for the received byte count, 8 for the expected float count n, one for the kind
 * and one for the source rank, then the message's first bytes (the 128-byte header; zero-padded).
 * Invariant: an accepted header has the expected magic, version, kind and sender, length == n,
 * and the byte count is exactly 128 + 4 n + extra in exact arithmetic (no wrap-around).
 */
#include "optim/ps_wire.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_t in = fz_init(data, size);
    size_t bytes = (size_t)fz_u64(&in), n = (size_t)fz_u64(&in);
    hs_ps_kind_t kind = (hs_ps_kind_t)(fz_u8(&in) % 6);
    int source = (int)(int8_t)fz_u8(&in);
    hs_ps_hdr_v1_t h;
    memset(&h, 0, sizeof h);
    memcpy(&h, in.p, HS_MIN(in.n, sizeof h));
    if (hs_ps_hdr_check(&h, bytes, kind, source, n) == 0) {
        FZ_CHECK(h.magic == HS_PS_MAGIC && h.version == HS_PS_VERSION, "magic/version");
        FZ_CHECK(h.kind == kind && h.sender == source, "kind %u sender %d", h.kind, h.sender);
        FZ_CHECK(h.length == n, "length %llu, expected %zu", (unsigned long long)h.length, n);
        unsigned __int128 want = (unsigned __int128)sizeof h + (unsigned __int128)n * 4 + h.extra;
        FZ_CHECK(want == bytes,
                 "accepted %zu bytes for %zu floats and %u extra bytes (the sum wrapped around)",
                 bytes, n, h.extra);
    }
    return 0;
}
