/*
 * tests/rogue_worker.c — a hostile rank inside a running training job, for tests/test_faults:
 * the message decoders fuzzed in the receive path of a live job, not only standalone.
 *
 *   hearsay run -n N -- rogue_worker R SEED -- hearsay train ARGS...
 *
 * Every rank but R execs `hearsay train ARGS` (it keeps the launcher's environment, so it
 * joins the job as usual). Rank R joins the job as a training rank does (transport, the
 * one-byte wire-up with every rank, the start-up barrier), then sends each other rank a burst
 * of malformed messages on every training tag (the loop's and the algorithms', hs_dist_tag) —
 * random bytes, truncated headers, headers with absurd counts, lengths and weights, well-formed
 * headers with a wrong sender or kind — seeded by SEED, and exits. Prints "rogue: sent M messages"
 * on success.
 */
#include "hearsay/algo.h"
#include "hearsay/bootstrap.h"
#include "hearsay/common.h"
#include "hearsay/rng.h"
#include "hearsay/transport.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BURST   40
#define MAX_LEN 4096

/* The loop's own tags, then the algorithms' first offsets (hs_dist_tag with the loop's default
 * base): sgp, osgp, dpsgd, choco, qsgp 0; adpsgd 0, 1; easgd's center 0, 1; lsgd 0, 1, 2. */
#define ALGO_TAGS 3
static uint32_t tags[3 + ALGO_TAGS];

static void tags_init(void)
{
    const hs_dist_t d = {.tag_base = HS_TAG_ALGO_BASE};
    int n = 0;
    tags[n++] = HS_TAG_EVAL;
    tags[n++] = HS_TAG_FINAL;
    tags[n++] = HS_TAG_ACK;
    for (unsigned k = 0; k < ALGO_TAGS; k++) tags[n++] = hs_dist_tag(&d, k);
}

/* A malformed message of kind k (0..3) into buf; its length. */
static size_t craft(hs_rng_t *g, int k, unsigned char *buf)
{
    size_t len = 1 + hs_rng_u64(g) % MAX_LEN;
    for (size_t i = 0; i < len; i++) buf[i] = (unsigned char)hs_rng_u64(g);
    switch (k) {
    case 0: /* random bytes */
        return len;
    case 1: /* a truncated header: a few bytes only */
        return 1 + hs_rng_u64(g) % 24;
    case 2: { /* a plausible prefix with absurd 64-bit counts and lengths everywhere */
        uint64_t v[8];
        for (int i = 0; i < 8; i++)
            v[i] = (i % 2) ? (1ULL << (62 + hs_rng_u64(g) % 2)) : UINT64_MAX - hs_rng_u64(g) % 4;
        memcpy(buf + 8, v, sizeof v);
        return len < 128 ? 128 : len;
    }
    default: { /* a NaN / infinite weight where a double may sit */
        double bad[3] = {0.0 / 0.0, 1.0 / 0.0, -1e308};
        for (size_t o = 0; o + 8 <= len && o < 128; o += 8) memcpy(buf + o, &bad[o / 8 % 3], 8);
        return len;
    }
    }
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 5 || strcmp(argv[3], "--")) {
        fprintf(stderr, "usage: rogue_worker RANK SEED -- COMMAND ...\n");
        return 2;
    }
    int rogue = atoi(argv[1]);
    uint64_t seed = strtoull(argv[2], NULL, 10);
    const char *r = getenv("HS_RANK");
    if (!r || atoi(r) != rogue) {
        execvp(argv[4], argv + 4);
        perror("rogue_worker: exec");
        return 127;
    }
    hs_boot_t *b = NULL;
    hs_transport_t *t = NULL;
    int rc = hs_boot_init(&b, NULL);
    if (rc == 0) rc = hs_transport_open(&t, b, NULL);
    if (rc < 0) {
        fprintf(stderr, "rogue: start-up: %s\n", hs_last_error());
        return 1;
    }
    int me = hs_transport_rank(t), n = hs_transport_size(t);
    /* the wire-up every training rank does, then the start-up barrier */
    hs_treq_t *rq[2 * 256] = {0};
    char in[256] = {0}, one = 1;
    int k = 0;
    for (int j = 0; j < n && j < 256; j++) {
        if (j == me) continue;
        hs_transport_irecv(t, j, HS_TAG_WIREUP, &in[j], 1, &rq[k++]);
        hs_transport_isend(t, j, HS_TAG_WIREUP, &one, 1, &rq[k++]);
    }
    for (int i = 0; i < k; i++)
        if (rq[i]) hs_transport_wait(t, &rq[i], 30, NULL);
    if ((rc = hs_boot_barrier(b)) < 0) {
        fprintf(stderr, "rogue: barrier: %s\n", hs_last_error());
        return 1;
    }
    hs_rng_t g;
    hs_rng_seed(&g, seed, (uint64_t)me);
    tags_init();
    static unsigned char buf[BURST][MAX_LEN + 256];
    hs_treq_t *req[BURST] = {0};
    int sent = 0;
    for (int j = 0; j < n; j++) {
        if (j == me) continue;
        for (int m = 0; m < BURST; m++) {
            uint32_t tag = tags[hs_rng_u64(&g) % HS_ARRAY_LEN(tags)];
            size_t len = craft(&g, (int)(hs_rng_u64(&g) % 4), buf[m]);
            if (hs_transport_isend(t, j, tag, buf[m], len, &req[m]) == 0) sent++;
        }
        for (int m = 0; m < BURST; m++)
            if (req[m]) hs_transport_wait(t, &req[m], 10, NULL);
    }
    printf("rogue: sent %d messages\n", sent);
    fflush(stdout);
    hs_transport_close(&t);
    hs_boot_finalize(&b);
    return 0;
}
