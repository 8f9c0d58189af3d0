/*
 * tests/fuzz/fuzz_el_wire.c — the EASGD / leader-SGD header check (optim/elastic_wire.h:
 * hs_el_hdr_check).
 *
 * Input: 8 bytes for the received byte count, one for the source rank (negative: any), then the
 * message's first bytes (the 64-byte header; zero-padded). Invariant: an accepted header has the
 * magic and version, the source as sender, and the byte count is exactly 64 + w count in exact
 * arithmetic (no wrap-around), w = 2 for a half-precision payload (HS_EL_HALF_MASK in kind),
 * else 4.
 */
#include "optim/elastic_wire.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_t in = fz_init(data, size);
    size_t len = (size_t)fz_u64(&in);
    int source = (int)(int8_t)fz_u8(&in);
    hs_el_hdr_v1_t h;
    memset(&h, 0, sizeof h);
    memcpy(&h, in.p, HS_MIN(in.n, sizeof h));
    if (hs_el_hdr_check(&h, len, source) == 0) {
        FZ_CHECK(h.magic == HS_EL_MAGIC && h.version == HS_EL_VERSION, "magic/version");
        FZ_CHECK(source < 0 || h.sender == source, "sender %d from %d", h.sender, source);
        unsigned w = (h.kind & HS_EL_HALF_MASK) ? 2 : 4;
        unsigned __int128 want = (unsigned __int128)sizeof h + (unsigned __int128)h.count * w;
        FZ_CHECK(want == len,
                 "accepted %zu bytes for %llu %u-byte values (the size wrapped around)", len,
                 (unsigned long long)h.count, w);
    }
    return 0;
}
