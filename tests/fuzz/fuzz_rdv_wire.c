/*
 * tests/fuzz/fuzz_rdv_wire.c — rendezvous frame decoding (gossip/rdv_wire.c): headers, HELLO
 * payloads, job keys and HOST:PORT addresses.
 *
 * Input: at least a header and a HELLO payload's bytes (shorter inputs are zero-padded), the rest
 * as an address text. Invariants (gossip/rdv_proto.h): decode then encode gives the same bytes;
 * a header accepted in either direction has a known type for that direction and a length within
 * its bound; a decoded HELLO's host is NUL-terminated and re-encodes to the same host bytes up
 * to its end; a parsed address has a non-empty host that fits and a port in 1..65535.
 */
#include "gossip/rdv_wire.h"
#include "hearsay/common.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t buf[HS_RDV_HDR_BYTES + HS_RDV_HELLO_BYTES] = {0};
    size_t take = HS_MIN(size, sizeof buf);
    memcpy(buf, data, take);
    fz_t in = fz_init(data + take, size - take);

    hs_rdv_hdr_t h;
    uint8_t again[HS_RDV_HDR_BYTES];
    hs_rdv_hdr_decode(buf, &h);
    hs_rdv_hdr_encode(&h, again);
    FZ_CHECK(memcmp(buf, again, sizeof again) == 0, "header decode/encode differ");
    for (int dir = 0; dir < 2; dir++) {
        const char *why = NULL;
        if (hs_rdv_hdr_check(&h, dir, &why) == 0) {
            FZ_CHECK(h.magic == HS_RDV_MAGIC && h.version == HS_RDV_VERSION, "magic/version");
            if (dir) {
                FZ_CHECK(h.type == HS_RDV_HELLO || h.type == HS_RDV_GATHER || h.type == HS_RDV_BYE,
                         "type %u to the launcher", h.type);
                FZ_CHECK(h.len <= HS_RDV_GATHER_MAX, "len %llu", (unsigned long long)h.len);
            } else {
                FZ_CHECK(h.type == HS_RDV_WELCOME || h.type == HS_RDV_RESULT ||
                             h.type == HS_RDV_ERROR,
                         "type %u to a worker", h.type);
                FZ_CHECK(h.len <= (uint64_t)HS_RDV_MAX_SIZE * HS_RDV_GATHER_MAX, "len %llu",
                         (unsigned long long)h.len);
            }
        } else {
            FZ_CHECK(why != NULL && *why, "rejected without a reason");
        }
    }

    hs_rdv_hello_t m, m2;
    uint8_t hb[HS_RDV_HELLO_BYTES];
    hs_rdv_hello_decode(buf + HS_RDV_HDR_BYTES, &m);
    FZ_CHECK(memchr(m.host, 0, sizeof m.host) != NULL, "host not terminated");
    hs_rdv_hello_encode(&m, hb);
    hs_rdv_hello_decode(hb, &m2);
    FZ_CHECK(!memcmp(m.key, m2.key, sizeof m.key) && m.size == m2.size && m.pid == m2.pid &&
                 !strcmp(m.host, m2.host),
             "HELLO decode/encode/decode differ");

    char key[HS_RDV_KEY_HEX + 1];
    memcpy(key, m.key, HS_RDV_KEY_HEX);
    key[HS_RDV_KEY_HEX] = '\0';
    if (hs_rdv_key_valid(key)) FZ_CHECK(hs_rdv_key_equal(key, key), "a key differs from itself");
    FZ_CHECK(!hs_rdv_key_valid(NULL), "NULL key valid");

    char *addr = fz_rest_str(&in);
    char host[64];
    int port = -1;
    if (hs_rdv_parse_addr(addr, "HS_RDV", host, sizeof host, &port) == 0) {
        FZ_CHECK(host[0] && strlen(host) < sizeof host, "host '%s'", host);
        FZ_CHECK(port >= 1 && port <= 65535, "port %d", port);
    }
    free(addr);
    return 0;
}
