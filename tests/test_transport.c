/*
 * tests/test_transport.c — the transport: shaping spec and model, two endpoints in one
 * process, and multi-process worlds (forked ranks exchanging addresses through the parent,
 * or `hearsay run` with the bootstrap) over hsshm (our shared memory), shm and tcp: all-to-all with
 * random sizes and delays, receive-from-any under load, RMA and atomics, a peer dying mid-exchange,
 * link shaping measured; through `hearsay run` ($HS_BIN, tests/transport_worker): receive-from-any
 * under load and RMA/atomics, and ranks in separate network namespaces joined by veth
 * (tests/transport_netns.sh).
 */
#include "hearsay/common.h"
#include "hearsay/kernels.h"
#include "hearsay/rng.h"
#include "hearsay/shaping.h"
#include "hearsay/transport.h"
#include "gossip/fabric_wire.h"

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/runlib.h"
#include "tests/transport_testlib.h"

/* --- shaping spec and model ------------------------------------------------------------ */

START_TEST(test_shape_parse)
{
    hs_shape_t *s = NULL;
    ck_assert_int_eq(
        hs_shape_parse("latency=2ms,jitter=1ms,bw=1Gbit; 0-3:latency=5ms; host1:bw=100Mbit/s; "
                       "2>1:jitter=0.5ms",
                       &s),
        0);
    ck_assert_int_eq(hs_shape_nrules(s), 4);
    hs_link_shape_t l;
    hs_shape_link(s, 0, 1, "h0", "h0", &l);
    ck_assert(fabs(l.latency_s - 2e-3) < 1e-12 && fabs(l.jitter_s - 1e-3) < 1e-12);
    ck_assert(fabs(l.bw_Bps - 1.25e8) < 1e-3);
    hs_shape_link(s, 3, 0, "h0", "h0", &l); /* pair rule works both ways */
    ck_assert(fabs(l.latency_s - 5e-3) < 1e-12 && fabs(l.bw_Bps - 1.25e8) < 1e-3);
    hs_shape_link(s, 0, 2, "h0", "host1", &l); /* host rule: either end */
    ck_assert(fabs(l.bw_Bps - 1.25e7) < 1e-3 && fabs(l.latency_s - 2e-3) < 1e-12);
    hs_shape_link(s, 2, 1, "h0", "h0", &l); /* directed */
    ck_assert(fabs(l.jitter_s - 0.5e-3) < 1e-12);
    hs_shape_link(s, 1, 2, "h0", "h0", &l);
    ck_assert(fabs(l.jitter_s - 1e-3) < 1e-12);
    hs_shape_free(&s);
    ck_assert_int_eq(hs_shape_parse("", &s), 0);
    ck_assert_int_eq(hs_shape_nrules(s), 0);
    hs_shape_free(&s);
    ck_assert_int_eq(hs_shape_parse(" bw = 12.5MB , latency=1s ", &s), 0);
    hs_shape_link(s, 0, 1, NULL, NULL, &l);
    ck_assert(fabs(l.bw_Bps - 12.5e6) < 1e-3 && l.latency_s == 1.0);
    hs_shape_free(&s);
}
END_TEST

START_TEST(test_shape_parse_errors)
{
    static const struct {
        const char *spec, *needle;
    } bad[] = {
        {"latency=2ms,jiter=1ms", "'jiter'"},
        {"latency=2", "unknown time unit"},
        {"bw=10furlongs", "'furlongs'"},
        {"latency=-1ms", "non-negative"},
        {"0-0:latency=1ms", "two different"},
        {"3:latency=1ms", "single rank"},
        {"latency=1ms;;bw=1Gbit", "empty rule"},
        {"0-1:", "no parameters"},
        {"bw=0Mbit", "must be > 0"},
        {"latency", "NAME=VALUE"},
        {"ho$t:bw=1Gbit", "bad host name"},
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(bad); i++) {
        hs_shape_t *s = NULL;
        ck_assert_int_eq(hs_shape_parse(bad[i].spec, &s), -EINVAL);
        ck_assert_ptr_null(s);
        ck_assert_msg(strstr(hs_last_error(), bad[i].needle) != NULL, "spec '%s': got '%s'",
                      bad[i].spec, hs_last_error());
        ck_assert_msg(strstr(hs_last_error(), "character") != NULL, "no position: %s",
                      hs_last_error());
    }
    /* The transport refuses a bad spec at creation, naming it. */
    hs_transport_opts_t o;
    tt_opts(&o, "shm");
    o.shaping = "latency=fast";
    hs_transport_t *t = NULL;
    ck_assert_int_eq(hs_transport_create(&t, 0, 2, 1, &o), -EINVAL);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "latency=fast"));
    /* Ranks out of range are caught once the job size is known. */
    hs_shape_t *s = NULL;
    hs_shaper_t *sh = NULL;
    ck_assert_int_eq(hs_shape_parse("0-5:latency=1ms", &s), 0);
    ck_assert_int_eq(hs_shaper_create(s, 0, 4, NULL, 1, &sh), -EINVAL);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "4 ranks"));
    hs_shape_free(&s);
}
END_TEST

/* Issue 17 item 2: every number of a shaping spec is range-checked where it is parsed (bw=1e30Gbit
 * used to pass, overflow the chunk size to 0 and kill the sending rank with SIGFPE). */
START_TEST(test_shape_parse_ranges)
{
    static const struct {
        const char *spec, *needle;
    } bad[] = {
        {"bw=1e30Gbit", "bw"},
        {"bw=1e400Gbit", "non-negative number"},
        {"bw=1e-30bit", "bw"},
        {"bw=nanGbit", "non-negative number"},
        {"bw=infGbit", "non-negative number"},
        {"bw=81Tbit", "unknown rate unit"}, /* no T unit: a unit error, not a range one */
        {"bw=10001GB", "bw"},
        {"latency=1e30s", "latency"},
        {"latency=3601s", "latency"},
        {"jitter=1e300ms", "jitter"},
        {"jitter=-0.5ms", "non-negative"},
        {"latency=nans", "non-negative number"},
        {"1-99999999999:latency=1ms", "scope"},
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(bad); i++) {
        hs_shape_t *s = NULL;
        ck_assert_msg(hs_shape_parse(bad[i].spec, &s) == -EINVAL, "spec '%s' was accepted",
                      bad[i].spec);
        ck_assert_ptr_null(s);
        ck_assert_msg(strstr(hs_last_error(), bad[i].needle) != NULL, "spec '%s': got '%s'",
                      bad[i].spec, hs_last_error());
        ck_assert_msg(strstr(hs_last_error(), bad[i].spec) != NULL, "spec not quoted: %s",
                      hs_last_error());
    }
    /* The bounds themselves are accepted, and the fastest link still gets a usable chunk. */
    hs_shape_t *s = NULL;
    hs_shaper_t *sh = NULL;
    ck_assert_int_eq(hs_shape_parse("0>1:bw=10000GB,latency=3600s,jitter=3600s; 1>0:bw=1bit", &s),
                     0);
    ck_assert_int_eq(hs_shaper_create(s, 0, 2, NULL, 1, &sh), 0);
    ck_assert_uint_eq(hs_shaper_chunk(sh, 1, 1 << 20), 1 << 20);
    ck_assert(isfinite(hs_shaper_release(sh, 1, (size_t)1 << 40, 1.0)));
    hs_shaper_free(&sh);
    ck_assert_int_eq(hs_shaper_create(s, 1, 2, NULL, 1, &sh), 0);
    ck_assert_uint_eq(hs_shaper_chunk(sh, 0, 1 << 20), 16384);
    ck_assert(isfinite(hs_shaper_release(sh, 0, (size_t)1 << 40, 1.0)));
    hs_shaper_free(&sh);
    hs_shape_free(&s);
}
END_TEST

START_TEST(test_shaper_model)
{
    hs_shape_t *s = NULL;
    hs_shaper_t *sh = NULL;
    ck_assert_int_eq(hs_shape_parse("0>1:latency=10ms,bw=1MB; 0>2:latency=1ms,jitter=4ms", &s), 0);
    ck_assert_int_eq(hs_shaper_create(s, 0, 3, NULL, 7, &sh), 0);
    ck_assert(hs_shaper_active(sh, 1) && hs_shaper_active(sh, 2));
    /* Store and forward: n bytes leave after n / bw, arrive latency later; back-to-back
     * messages queue behind each other. */
    double r1 = hs_shaper_release(sh, 1, 500000, 100.0);
    ck_assert(fabs(r1 - (100.0 + 0.5 + 0.01)) < 1e-9);
    double r2 = hs_shaper_release(sh, 1, 250000, 100.1);
    ck_assert(fabs(r2 - (100.5 + 0.25 + 0.01)) < 1e-9);
    double r3 = hs_shaper_release(sh, 1, 1000, 200.0); /* idle link: no queue */
    ck_assert(fabs(r3 - (200.001 + 0.01)) < 1e-9);
    ck_assert_uint_eq(hs_shaper_chunk(sh, 1, 1 << 20), 16384); /* 2 ms of 1 MB/s < 16 KiB */
    /* Jitter adds within [0, 4 ms], never reorders, and is repeatable from the seed. */
    double prev = 0, sum = 0, now = 300.0, first[50];
    for (int i = 0; i < 50; i++, now += 1e-4) {
        double r = hs_shaper_release(sh, 2, 10, now);
        ck_assert(r >= now + 1e-3 - 1e-12 && r <= now + 5e-3 + 1e-12);
        ck_assert(r >= prev);
        prev = r;
        first[i] = r;
        sum += r - now;
    }
    ck_assert(sum / 50 > 1.3e-3); /* jitter did add something */
    hs_shaper_free(&sh);
    ck_assert_int_eq(hs_shaper_create(s, 0, 3, NULL, 7, &sh), 0);
    now = 300.0;
    for (int i = 0; i < 50; i++, now += 1e-4)
        ck_assert(hs_shaper_release(sh, 2, 10, now) == first[i]);
    ck_assert(!hs_shaper_active(sh, 0));
    hs_shaper_free(&sh);
    hs_shape_free(&s);
}
END_TEST

/* --- two endpoints in one process -------------------------------------------------------- */

static void pair_open(const char *prov, hs_transport_t *t[2])
{
    hs_transport_opts_t o;
    tt_opts(&o, prov);
    o.progress_thread = 1; /* both live in this thread: let threads drive them */
    char blobs[2][HS_TRANSPORT_ADDR_MAX];
    memset(blobs, 0, sizeof blobs);
    for (int r = 0; r < 2; r++) {
        ck_assert_msg(hs_transport_create(&t[r], r, 2, 1, &o) == 0, "%s", hs_last_error());
        size_t len;
        ck_assert_int_eq(hs_transport_address(t[r], blobs[r], &len), 0);
    }
    for (int r = 0; r < 2; r++)
        ck_assert_msg(hs_transport_connect(t[r], blobs, HS_TRANSPORT_ADDR_MAX) == 0, "%s",
                      hs_last_error());
}

static void inproc(const char *prov)
{
    hs_transport_t *t[2];
    pair_open(prov, t);
    const size_t sizes[] = {0, 1, 4096, 65536, 65537, 300000};
    for (size_t i = 0; i < HS_ARRAY_LEN(sizes); i++) {
        size_t n = sizes[i];
        unsigned char *a = malloc(n + 1), *b = calloc(1, n + 100);
        tt_fill(a, n, 0, 1, (int)i);
        hs_treq_t *rs = NULL, *rr = NULL;
        hs_tstatus_t st;
        ck_assert_int_eq(hs_transport_irecv(t[1], i % 2 ? HS_ANY_SOURCE : 0, 77, b, n + 100, &rr),
                         0);
        ck_assert_int_eq(hs_transport_isend(t[0], 1, 77, a, n, &rs), 0);
        ck_assert_msg(hs_transport_wait(t[1], &rr, 10, &st) == 0, "%s", hs_last_error());
        ck_assert_msg(hs_transport_wait(t[0], &rs, 10, NULL) == 0, "%s", hs_last_error());
        ck_assert_ptr_null(rr);
        ck_assert_int_eq(st.source, 0);
        ck_assert_uint_eq(st.tag, 77);
        ck_assert_uint_eq(st.len, n);
        ck_assert(tt_check_payload(b, n, 0, 1, (int)i));
        free(a);
        free(b);
    }
    /* Probe sees an arrived message with its source, tag and full length. */
    unsigned char big[200000], got[200000];
    tt_fill(big, sizeof big, 1, 0, 9);
    hs_treq_t *rs = NULL;
    ck_assert_int_eq(hs_transport_isend(t[1], 0, 5, big, sizeof big, &rs), 0);
    int found = 0;
    hs_tstatus_t st;
    for (int i = 0; i < 400 && !found; i++) {
        int rc = hs_transport_probe(t[0], HS_ANY_SOURCE, 0, 1, &found, &st);
        if (rc == -ENOSYS) break;
        ck_assert_int_eq(rc, 0);
        if (!found) hs_sleep(0.005);
    }
    if (strcmp(hs_transport_provider(t[0]), "shm")) {
        ck_assert_msg(found, "probe never saw the message");
        ck_assert_int_eq(st.source, 1);
        ck_assert_uint_eq(st.tag, 5);
        /* exact, or the bound (chunks x chunk size) where the provider hides CQ data */
        ck_assert_uint_ge(st.len, sizeof big);
        ck_assert_uint_le(st.len, (sizeof big + 65535) / 65536 * 65536);
    } else {
        ck_assert(!found);
    }
    ck_assert_int_eq(hs_transport_recv(t[0], 1, 5, got, sizeof got, &st), 0);
    ck_assert(memcmp(big, got, sizeof big) == 0);
    ck_assert_int_eq(hs_transport_wait(t[1], &rs, 10, NULL), 0);
    /* Too small a receive buffer is an error that says so. */
    ck_assert_int_eq(hs_transport_isend(t[1], 0, 6, big, 1000, &rs), 0);
    hs_treq_t *rr = NULL;
    ck_assert_int_eq(hs_transport_irecv(t[0], 1, 6, got, 10, &rr), 0);
    ck_assert_int_eq(hs_transport_wait(t[0], &rr, 10, NULL), -EMSGSIZE);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "rank 1"));
    hs_transport_req_free(t[1], &rs);
    /* Bad arguments are refused with a message. */
    ck_assert_int_eq(hs_transport_isend(t[0], 2, 1, big, 1, &rs), -EINVAL);
    ck_assert_int_eq(hs_transport_isend(t[0], 1, HS_TAG_MAX + 1, big, 1, &rs), -EINVAL);
    /* A wait with nobody sending times out, naming the peer. */
    ck_assert_int_eq(hs_transport_irecv(t[0], 1, 99, got, 10, &rr), 0);
    double t0 = hs_now();
    ck_assert_int_eq(hs_transport_wait(t[0], &rr, 0.3, NULL), -ETIMEDOUT);
    ck_assert(hs_now() - t0 >= 0.29 && hs_now() - t0 < 2.0);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "rank 1"));
    ck_assert_ptr_nonnull(rr);
    hs_transport_req_free(t[0], &rr);
    hs_transport_close(&t[0]);
    hs_transport_close(&t[1]);
}

/* Known problem (docs/transport.md): with libfabric 1.17's shm, unexpected messages are
 * sometimes lost. Added to the suite only with HS_TEST_SHM=1 while that is being fixed. */
START_TEST(test_inproc_shm)
{
    inproc("shm");
}
END_TEST

START_TEST(test_inproc_tcp)
{
    inproc("tcp");
}
END_TEST

START_TEST(test_inproc_hsshm)
{
    inproc("hsshm");
}
END_TEST

/* Issue 17 item 8: the libfabric address blob's lengths are checked before use: an endpoint
 * name length past its 256-byte field is refused, naming the rank. */
START_TEST(test_fabric_addr_lengths)
{
    static const uint32_t bad[] = {HS_FAB_EPNAME_MAX + 1, 0x80000000u, 0xFFFFFFFFu};
    for (size_t i = 0; i < HS_ARRAY_LEN(bad); i++) {
        hs_transport_opts_t o;
        tt_opts(&o, "tcp");
        hs_transport_t *t[2] = {NULL, NULL};
        char all[2][HS_TRANSPORT_ADDR_MAX];
        memset(all, 0, sizeof all);
        for (int r = 0; r < 2; r++) {
            size_t len;
            ck_assert_int_eq(hs_transport_create(&t[r], r, 2, 1, &o), 0);
            ck_assert_int_eq(hs_transport_address(t[r], all[r], &len), 0);
        }
        hs_fab_addr_v1_t a;
        memcpy(&a, all[1], sizeof a);
        a.epname_len = bad[i];
        memcpy(all[1], &a, sizeof a);
        hs_error_clear();
        ck_assert_int_eq(hs_transport_connect(t[0], all, HS_TRANSPORT_ADDR_MAX), -EPROTO);
        ck_assert_msg(strstr(hs_last_error(), "rank 1") && strstr(hs_last_error(), "name"), "%s",
                      hs_last_error());
        hs_transport_close(&t[0]);
        hs_transport_close(&t[1]);
    }
}
END_TEST

/* hsshm refuses ranks on several hosts, and a peer address of another backend, by name. */
START_TEST(test_hsshm_errors)
{
    hs_transport_opts_t o;
    tt_opts(&o, "hsshm");
    hs_transport_t *t = NULL, *u = NULL;
    ck_assert_int_eq(hs_transport_create(&t, 0, 2, 0, &o), -EINVAL);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "one host"));
    ck_assert_ptr_null(t);
    /* rank 0 on hsshm, rank 1 on tcp: rank 0's connect names the mismatch */
    ck_assert_int_eq(hs_transport_create(&t, 0, 2, 1, &o), 0);
    hs_transport_opts_t ot;
    tt_opts(&ot, "tcp");
    ck_assert_int_eq(hs_transport_create(&u, 1, 2, 1, &ot), 0);
    char all[2][HS_TRANSPORT_ADDR_MAX];
    memset(all, 0, sizeof all);
    size_t len;
    ck_assert_int_eq(hs_transport_address(t, all[0], &len), 0);
    ck_assert_int_eq(hs_transport_address(u, all[1], &len), 0);
    ck_assert_int_eq(hs_transport_connect(t, all, HS_TRANSPORT_ADDR_MAX), -EPROTO);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "same --provider"));
    ck_assert_str_eq(hs_transport_provider(t), "hsshm");
    hs_transport_close(&t);
    hs_transport_close(&u);
    /* a bad ring size is refused naming the variable */
    setenv("HS_SHM_RING_BYTES", "12", 1);
    ck_assert_int_eq(hs_transport_create(&t, 0, 2, 1, &o), -EINVAL);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "HS_SHM_RING_BYTES"));
    unsetenv("HS_SHM_RING_BYTES");
}
END_TEST

/* --- forked ranks ---------------------------------------------------------------------- */

/* Every rank sends 6 messages of random size (0 .. 300 KiB, so most are multi-chunk) to
 * every other rank with random pauses; receivers check every byte against the reference. */
static int alltoall(hs_transport_t *t, void *arg)
{
    (void)arg;
    int me = hs_transport_rank(t), n = hs_transport_size(t), per = 6;
    hs_rng_t rng;
    hs_rng_seed(&rng, 42, (uint64_t)me);
    size_t cap = 300 << 10;
    int nreq = 2 * n * per;
    hs_treq_t **rq = calloc((size_t)nreq, sizeof *rq);
    unsigned char **bufs = calloc((size_t)nreq, sizeof *bufs);
    for (int p = 0; p < n; p++) {
        if (p == me) continue;
        for (int k = 0; k < per; k++) {
            int i = (p * per + k) * 2;
            bufs[i] = malloc(cap);
            if (hs_transport_irecv(t, p, (uint32_t)k, bufs[i], cap, &rq[i])) RFAIL("irecv");
        }
    }
    for (int k = 0; k < per; k++) {
        for (int p = 0; p < n; p++) {
            if (p == me) continue;
            int i = (p * per + k) * 2 + 1;
            size_t len = (size_t)hs_rng_below(&rng, cap + 1);
            bufs[i] = malloc(len + 1);
            tt_fill(bufs[i], len, me, p, k);
            if (hs_transport_isend(t, p, (uint32_t)k, bufs[i], len, &rq[i])) RFAIL("isend");
        }
        hs_sleep(1e-3 * (double)hs_rng_below(&rng, 5));
    }
    for (int left = 2 * (n - 1) * per; left > 0; left--) {
        int idx;
        hs_tstatus_t st;
        if (hs_transport_waitany(t, rq, nreq, 10, &idx, &st)) RFAIL("waitany");
        if (idx % 2 == 0) {
            int p = idx / 2 / per, k = idx / 2 % per;
            if (st.source != p || st.tag != (uint32_t)k)
                RFAIL("wrong source/tag %d/%u", st.source, st.tag);
            /* the sender drew the length from its own stream: recompute it */
            hs_rng_t sr;
            hs_rng_seed(&sr, 42, (uint64_t)p);
            size_t want = 0;
            for (int kk = 0; kk <= k; kk++) {
                for (int q = 0; q < n; q++) {
                    if (q == p) continue;
                    size_t l = (size_t)hs_rng_below(&sr, cap + 1);
                    if (kk == k && q == me) want = l;
                }
                hs_rng_below(&sr, 5);
            }
            if (st.len != want)
                RFAIL("message %d from %d: %zu bytes, want %zu", k, p, st.len, want);
            if (!tt_check_payload(bufs[idx], st.len, p, me, k))
                RFAIL("payload %d from %d corrupt", k, p);
        }
    }
    for (int i = 0; i < nreq; i++) free(bufs[i]);
    free(bufs);
    free(rq);
    return 0;
}

START_TEST(test_world_alltoall_tcp)
{
    hs_transport_opts_t o;
    tt_opts(&o, "tcp");
    ck_assert_int_eq(tt_run_world(4, &o, 1, alltoall, NULL, 40, NULL, NULL), 0);
}
END_TEST

START_TEST(test_world_alltoall_hsshm)
{
    hs_transport_opts_t o;
    tt_opts(&o, "hsshm");
    ck_assert_int_eq(tt_run_world(4, &o, 1, alltoall, NULL, 40, NULL, NULL), 0);
}
END_TEST

/* Device memory through the transport (hs_transport_mr_*, issue 27): 2 ranks, each with the
 * emulated device. Rank 0 sends 3 chunks (2 whole, 1 partial) from device memory; rank 1
 * receives them into host memory (staged), answers from device memory, and rank 0 receives
 * into device memory (mapped: CUDA IPC's stand-in; staged with HS_TMR_IPC=0); then an empty
 * message, parts at offsets, and the misuses. Under the sanitizers any host access to the
 * device side (poisoned, the peer's mapping too) is a report: only the kernels' copies may
 * touch it. */
/* Mappings of memfds named `name` in this process (/proc/self/maps). */
static int memfd_maps(const char *name)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return -1;
    char line[512], pat[128];
    snprintf(pat, sizeof pat, "/memfd:%s", name);
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, pat)) n++;
    fclose(f);
    return n;
}

static int device_mem(hs_transport_t *t, void *arg)
{
    (void)arg;
    const int me = hs_transport_rank(t), peer = 1 - me;
    const size_t L = 2 * HS_TMR_CHUNK + 12345;
    hs_kernels_t *k = NULL;
    if (hs_kernels_open(&k, HS_DEV_EMU, 0, 1)) RFAIL("emu kernels");
    unsigned char *h = malloc(L), *x = NULL;
    if (!h || k->ops->alloc(k, L, (void **)&x)) RFAIL("buffers");
    hs_tmr_t *dm = NULL, *hm = NULL;
    if (hs_transport_mr_reg(t, k, x, L, "device buffer", &dm)) RFAIL("mr_reg device");
    if (hs_transport_mr_kind(dm) != HS_TMEM_DEVICE) RFAIL("device memory registered as host");
    if (hs_transport_mr_reg(t, NULL, h, L, "host buffer", &hm)) RFAIL("mr_reg host");
    if (hs_transport_mr_kind(hm) != HS_TMEM_HOST) RFAIL("host memory registered as device");
    if (me == 0) {
        tt_fill(h, L, 0, 1, 7);
        if (k->ops->to_device(k, x, h, L)) RFAIL("to_device");
        memset(h, 0, L);
        if (hs_transport_send_mr(t, peer, 5, dm, 0, L)) RFAIL("send_mr from device memory");
        if (hs_transport_recv_mr(t, peer, 5, dm, 0, L)) RFAIL("recv_mr into device memory");
        if (k->ops->to_host(k, h, x, L)) RFAIL("to_host");
        if (!tt_check_payload(h, L, 1, 0, 8)) RFAIL("device-to-device exchange corrupt");
    } else {
        if (hs_transport_recv_mr(t, peer, 5, hm, 0, L)) RFAIL("recv_mr into host memory");
        if (!tt_check_payload(h, L, 0, 1, 7)) RFAIL("device-to-host exchange corrupt");
        tt_fill(h, L, 1, 0, 8);
        if (k->ops->to_device(k, x, h, L)) RFAIL("to_device");
        if (hs_transport_send_mr(t, peer, 5, dm, 0, L)) RFAIL("send_mr from device memory");
    }
    /* an empty message, and a part of a registration (offset) */
    if (me == 0) {
        if (hs_transport_send_mr(t, peer, 6, dm, 0, 0)) RFAIL("empty send_mr");
        if (hs_transport_send_mr(t, peer, 6, dm, 4096, 70000)) RFAIL("send_mr at an offset");
    } else {
        if (hs_transport_recv_mr(t, peer, 6, dm, 0, 0)) RFAIL("empty recv_mr");
        if (hs_transport_recv_mr(t, peer, 6, hm, 100, 70000)) RFAIL("recv_mr at an offset");
        tt_fill(h + 200000, 74096, 1, 0, 8); /* what rank 0's device held: bytes 4096.. */
        if (memcmp(h + 100, h + 200000 + 4096, 70000)) RFAIL("offset exchange corrupt");
    }
    /* device to device at offsets on both sides: rank 1's bytes 8192.. into rank 0's 100.. */
    if (me == 1) {
        if (hs_transport_send_mr(t, peer, 10, dm, 8192, 300000)) RFAIL("send_mr device offset");
    } else {
        if (hs_transport_recv_mr(t, peer, 10, dm, 100, 300000)) RFAIL("recv_mr device offset");
        if (k->ops->to_host(k, h, x, L)) RFAIL("to_host");
        tt_fill(h + L / 2, 308192, 1, 0, 8); /* rank 1's device held this pattern */
        if (memcmp(h + 100, h + L / 2 + 8192, 300000))
            RFAIL("device-to-device exchange at offsets corrupt");
    }
    /* back to back on one tag (the mapping cached from the first): each transfer's header must
     * find its own receive, not one the last transfer left posted */
    for (int i = 0; i < 5; i++) {
        size_t at = (size_t)i * 100000;
        if (me == 1 && hs_transport_send_mr(t, peer, 11, dm, at, 100000))
            RFAIL("send_mr %d of 5", i);
        if (me == 0 && hs_transport_recv_mr(t, peer, 11, dm, L - 100000, 100000))
            RFAIL("recv_mr %d of 5", i);
    }
    if (me == 0) {
        if (k->ops->to_host(k, h, x, L)) RFAIL("to_host");
        tt_fill(h + L / 2, 500000, 1, 0, 8);
        if (memcmp(h + L - 100000, h + L / 2 + 400000, 100000))
            RFAIL("back-to-back transfers corrupt");
    }
    /* rank 0 mapped rank 1's buffer (CUDA IPC's stand-in) unless HS_TMR_IPC=0 says to stage:
     * its process maps two emulated-device memfds while the registration lives, else one */
    if (me == 0) {
        int want = getenv("HS_TMR_IPC") && !strcmp(getenv("HS_TMR_IPC"), "0") ? 1 : 2;
        int got = memfd_maps("hearsay-emu");
        if (got != want)
            RFAIL("%d emulated-device memfds mapped, %d expected (HS_TMR_IPC=%s)", got, want,
                  getenv("HS_TMR_IPC") ? getenv("HS_TMR_IPC") : "unset");
    }
    /* misuses: device memory to the host-memory calls, or registered as host memory; a range
     * past the registration */
    hs_treq_t *r = NULL;
    if (hs_transport_isend(t, peer, 9, x, 16, &r) != -EFAULT || r ||
        !strstr(hs_last_error(), "hs_transport_send_mr"))
        RFAIL("isend of device memory was not refused");
    if (hs_transport_irecv(t, peer, 9, x + 64, 16, &r) != -EFAULT || r)
        RFAIL("irecv into device memory was not refused");
    hs_tmr_t *bad = NULL;
    if (hs_transport_mr_reg(t, NULL, x, L, "device buffer", &bad) != -EFAULT || bad)
        RFAIL("device memory registered as host memory");
    if (hs_transport_send_mr(t, peer, 9, dm, L - 10, 11) != -ERANGE ||
        !strstr(hs_last_error(), "outside device buffer"))
        RFAIL("a range past the registration was not refused");
    hs_transport_mr_dereg(t, &dm);
    hs_transport_mr_dereg(t, &hm);
    hs_transport_mr_dereg(t, &dm); /* again: NULL */
    k->ops->free(k, x);
    free(h);
    hs_kernels_close(&k);
    return 0;
}

START_TEST(test_world_device_mem_hsshm)
{
    hs_transport_opts_t o;
    tt_opts(&o, "hsshm");
    ck_assert_int_eq(tt_run_world(2, &o, 1, device_mem, NULL, 40, NULL, NULL), 0);
}
END_TEST

static void no_ipc(int rank)
{
    (void)rank;
    setenv("HS_TMR_IPC", "0", 1);
}

START_TEST(test_world_device_mem_staged_hsshm)
{
    hs_transport_opts_t o;
    tt_opts(&o, "hsshm");
    ck_assert_int_eq(tt_run_world(2, &o, 1, device_mem, NULL, 40, NULL, no_ipc), 0);
}
END_TEST

START_TEST(test_world_device_mem_tcp)
{
    hs_transport_opts_t o;
    tt_opts(&o, "tcp");
    ck_assert_int_eq(tt_run_world(2, &o, 1, device_mem, NULL, 40, NULL, NULL), 0);
}
END_TEST

/* Small rings (64 KiB) so that records wrap and senders block on a full ring. */
static void small_rings(int rank)
{
    (void)rank;
    setenv("HS_SHM_RING_BYTES", "65536", 1);
}

/* Every message arrives before its receive: rank 1 sends 40 messages (random sizes up to
 * 300 KiB, tags 0..39) while rank 0 sleeps, then rank 0 receives them in reverse tag order
 * and checks every byte. With *arg set (hsshm, whose sends are eager): a send freed
 * mid-message (its buffer overwritten right after) must still arrive whole, and the message
 * after it intact. Rank 1 starts that send once rank 0 has taken the 40 (a "go" message):
 * freeing a send that has not started yet cancels it (the contract), and on a loaded machine
 * the 64 KiB ring could still be full of the 40 when it was posted (seen in a CI run: the
 * freed send never arrived, "0 of 0 bytes received"). */
static int late_receives(hs_transport_t *t, void *arg)
{
    int freed_send = arg && *(const int *)arg;
    int me = hs_transport_rank(t), nmsg = 40;
    size_t cap = 300 << 10, big = 2 << 20;
    hs_rng_t rng;
    hs_rng_seed(&rng, 7, 1);
    size_t len[40];
    for (int k = 0; k < nmsg; k++) len[k] = (size_t)hs_rng_below(&rng, cap + 1);
    unsigned char *b = malloc(cap), *g = malloc(big);
    if (me == 1) {
        hs_treq_t *rq[40] = {NULL};
        unsigned char *sb[40];
        for (int k = 0; k < nmsg; k++) {
            sb[k] = malloc(len[k] + 1);
            tt_fill(sb[k], len[k], 1, 0, k);
            if (hs_transport_isend(t, 0, (uint32_t)k, sb[k], len[k], &rq[k])) RFAIL("isend");
        }
        for (int k = 0; k < nmsg; k++) {
            if (hs_transport_wait(t, &rq[k], 20, NULL)) RFAIL("send %d", k);
            free(sb[k]);
        }
        if (!freed_send) goto out;
        hs_tstatus_t gst;
        if (hs_transport_recv(t, 0, 200, b, cap, &gst)) RFAIL("recv go");
        tt_fill(g, big, 1, 0, 100);
        hs_treq_t *r = NULL;
        if (hs_transport_isend(t, 0, 100, g, big, &r)) RFAIL("isend big");
        hs_transport_req_free(t, &r);
        memset(g, 0xEE, big); /* the transport must not read this any more */
        tt_fill(b, 1000, 1, 0, 101);
        if (hs_transport_send(t, 0, 101, b, 1000)) RFAIL("send after the freed one");
    } else {
        hs_sleep(0.3);
        for (int k = nmsg - 1; k >= 0; k--) {
            hs_tstatus_t st;
            if (hs_transport_recv(t, 1, (uint32_t)k, b, cap, &st)) RFAIL("recv %d", k);
            if (st.len != len[k] || !tt_check_payload(b, st.len, 1, 0, k))
                RFAIL("message %d: %zu bytes (want %zu) or corrupt", k, st.len, len[k]);
        }
        if (!freed_send) goto out;
        if (hs_transport_send(t, 1, 200, "g", 1)) RFAIL("send go");
        hs_tstatus_t st;
        if (hs_transport_recv(t, 1, 100, g, big, &st)) RFAIL("recv freed send");
        if (st.len != big || !tt_check_payload(g, big, 1, 0, 100)) RFAIL("freed send corrupt");
        if (hs_transport_recv(t, 1, 101, b, cap, &st)) RFAIL("recv after the freed one");
        if (st.len != 1000 || !tt_check_payload(b, 1000, 1, 0, 101)) RFAIL("last corrupt");
    }
out:
    free(b);
    free(g);
    return 0;
}

START_TEST(test_world_late_receives_hsshm)
{
    hs_transport_opts_t o;
    tt_opts(&o, "hsshm");
    int freed_send = 1;
    ck_assert_int_eq(tt_run_world(2, &o, 1, late_receives, &freed_send, 40, NULL, small_rings), 0);
}
END_TEST

/* The same two tests with messages from 64 KiB on sent by address (RTS: the receiver copies
 * them with process_vm_readv), as hsshm does by default when ranks outnumber cores. */
static void rdv_64k(int rank)
{
    (void)rank;
    setenv("HS_SHM_RDV_BYTES", "65536", 1);
}

static void small_rings_rdv(int rank)
{
    small_rings(rank);
    rdv_64k(rank);
}

START_TEST(test_world_alltoall_hsshm_rdv)
{
    hs_transport_opts_t o;
    tt_opts(&o, "hsshm");
    ck_assert_int_eq(tt_run_world(4, &o, 1, alltoall, NULL, 40, NULL, rdv_64k), 0);
}
END_TEST

START_TEST(test_world_late_receives_hsshm_rdv)
{
    hs_transport_opts_t o;
    tt_opts(&o, "hsshm");
    int freed_send = 1;
    ck_assert_int_eq(tt_run_world(2, &o, 1, late_receives, &freed_send, 40, NULL, small_rings_rdv),
                     0);
}
END_TEST

/* 8 ranks on 64 KiB rings, RTS from 64 KiB, a progress thread per rank: all-to-all under
 * contention (senders blocked on full rings while their own rings fill). */
START_TEST(test_world_alltoall8_hsshm_stress)
{
    hs_transport_opts_t o;
    tt_opts(&o, "hsshm");
    o.progress_thread = 1;
    ck_assert_int_eq(tt_run_world(8, &o, 1, alltoall, NULL, 50, NULL, small_rings_rdv), 0);
}
END_TEST

/* --- after a departure: hs_transport_unsent and hs_transport_leave (hsshm) ------------- */

/* Message k of these tests: tag 5, 1000 + 997 k bytes (its length tells k), filled by tt_fill. */
#define GONE_TAG 5
static size_t gone_len(int k)
{
    return 1000 + 997 * (size_t)k;
}

typedef struct gone_seen {
    int n, bad;
    int from[4];     /* messages per source */
    int k_seen[200]; /* how often each k was handed back (per the one sender of a test) */
    int me;
} gone_seen_t;

static void gone_cb(void *ctx, int peer, const void *buf, size_t got, size_t len)
{
    gone_seen_t *g = ctx;
    g->n++;
    if (peer >= 0 && peer < 4) g->from[peer]++;
    size_t k = (len - 1000) / 997;
    if (got != len || len < 1000 || (len - 1000) % 997 || k >= 200) {
        g->bad++;
        return;
    }
    int src = g->me == 0 ? peer : g->me, dst = g->me == 0 ? 0 : peer;
    if (!tt_check_payload(buf, len, src, dst, (int)k)) g->bad++;
    g->k_seen[k]++;
}

/* Wait until `peer` has exited or left: unsent stops saying -EBUSY. Returns its result. */
static int unsent_when_gone(hs_transport_t *t, int peer, gone_seen_t *g)
{
    for (double t0 = hs_now(); hs_now() - t0 < 15; hs_sleep(0.01)) {
        int rc = hs_transport_unsent(t, peer, GONE_TAG, gone_cb, g);
        if (rc != -EBUSY) return rc;
    }
    return -ETIMEDOUT;
}

/* A rank that dies without a word: rank 1 sends 8 messages that rank 0 never takes (each
 * wholly in rank 0's ring once its send completes), with *arg 2 of 100 KiB by address (RTS,
 * never complete), then one of 40 KiB, larger than what is left of the 64 KiB ring (partly
 * written). Once rank 0 has exited, unsent hands back exactly the 8 whole eager ones, byte
 * for byte, once; the by-address and the partly written sends fail with -ECONNRESET. */
static int unsent_after_death(hs_transport_t *t, void *arg)
{
    int rdv = arg && *(const int *)arg, nmsg = 8, nall = nmsg + 2 * rdv + 1;
    char go = 'g';
    if (hs_transport_rank(t) == 0) {
        hs_treq_t *r = NULL; /* eager: in rank 1's ring at once; no transport call after it */
        if (hs_transport_isend(t, 1, GONE_TAG + 1, &go, 1, &r)) RFAIL("isend go");
        hs_sleep(0.5); /* takes nothing, then exits */
        _exit(0);
    }
    if (hs_transport_recv(t, 0, GONE_TAG + 1, &go, 1, NULL)) RFAIL("recv go");
    unsigned char *b[11];
    hs_treq_t *r[11] = {NULL};
    for (int k = 0; k < nall; k++) {
        size_t len = k < nmsg ? gone_len(k) : k < nall - 1 ? (size_t)100 << 10 : (size_t)40 << 10;
        b[k] = malloc(len);
        tt_fill(b[k], len, 1, 0, k < nmsg ? k : 150 + k);
        if (hs_transport_isend(t, 0, GONE_TAG, b[k], len, &r[k])) RFAIL("isend %d", k);
    }
    for (int k = 0; k < nall; k++) {
        int done = 0;
        if (hs_transport_test(t, &r[k], &done, NULL)) RFAIL("test %d", k);
        if (done != (k < nmsg))
            RFAIL("send %d (%zu bytes): done %d", k, k < nmsg ? gone_len(k) : (size_t)0, done);
    }
    gone_seen_t g = {.me = 1};
    if (hs_transport_unsent(t, 0, GONE_TAG, gone_cb, &g) != -EBUSY) RFAIL("unsent while it runs");
    int rc = unsent_when_gone(t, 0, &g);
    if (rc != nmsg || g.n != nmsg || g.bad)
        RFAIL("unsent: %d (%d handed back, %d bad), want %d", rc, g.n, g.bad, nmsg);
    for (int k = 0; k < nmsg; k++)
        if (g.k_seen[k] != 1) RFAIL("message %d handed back %d times", k, g.k_seen[k]);
    if (hs_transport_unsent(t, 0, GONE_TAG, gone_cb, &g) != 0 || g.n != nmsg)
        RFAIL("a second unsent handed something back");
    for (int k = 0; k < nall; k++) {
        if (r[k] && hs_transport_wait(t, &r[k], 5, NULL) != -ECONNRESET)
            RFAIL("send %d to the dead rank did not fail with -ECONNRESET", k);
        free(b[k]);
    }
    fprintf(stderr, "(expected) took back %d messages from a dead rank\n", g.n);
    return 0;
}

START_TEST(test_world_unsent_after_death_hsshm)
{
    hs_transport_opts_t o;
    tt_opts(&o, "hsshm");
    int rdv = 0, expect[2] = {0, 0};
    ck_assert_int_eq(tt_run_world(2, &o, 1, unsent_after_death, &rdv, 30, expect, small_rings), 0);
    rdv = 1;
    ck_assert_int_eq(tt_run_world(2, &o, 1, unsent_after_death, &rdv, 30, expect, small_rings_rdv),
                     0);
}
END_TEST

/* A rank that leaves (an injected crash): ranks 1 and 2 send rank 0 12 messages each; rank 0
 * has receives posted for 3 of rank 1's (completed, never waited for) and takes the rest as
 * unexpected. hs_transport_leave hands back all 24 once, byte for byte, and fails the 3
 * receives with -ECANCELED. Then the senders' new sends fail at once with -ECONNRESET, and
 * unsent finds nothing: rank 0 took everything that had reached it. */
static int leave_takes_all(hs_transport_t *t, void *arg)
{
    (void)arg;
    int me = hs_transport_rank(t), nmsg = 12;
    if (me == 0) {
        hs_treq_t *r[3] = {NULL};
        unsigned char *rb[3];
        for (int i = 0; i < 3; i++) {
            rb[i] = malloc(gone_len(nmsg));
            if (hs_transport_irecv(t, 1, GONE_TAG, rb[i], gone_len(nmsg), &r[i])) RFAIL("irecv");
        }
        if (hs_transport_barrier(t)) RFAIL("barrier"); /* every send is complete */
        gone_seen_t g = {.me = 0};
        int n = hs_transport_leave(t, GONE_TAG, gone_cb, &g);
        if (n != 2 * nmsg || g.n != n || g.bad || g.from[1] != nmsg || g.from[2] != nmsg)
            RFAIL("leave handed back %d (%d from 1, %d from 2, %d bad), want %d", n, g.from[1],
                  g.from[2], g.bad, 2 * nmsg);
        for (int i = 0; i < 3; i++) {
            if (hs_transport_wait(t, &r[i], 1, NULL) != -ECANCELED)
                RFAIL("receive %d handed back but not cancelled", i);
            free(rb[i]);
        }
        if (hs_transport_leave(t, GONE_TAG, gone_cb, &g) != 0) RFAIL("a second leave");
        hs_sleep(0.3); /* stays alive while the others see it gone */
        return 0;
    }
    unsigned char *b[12];
    for (int k = 0; k < nmsg; k++) {
        b[k] = malloc(gone_len(k));
        tt_fill(b[k], gone_len(k), me, 0, k);
        if (hs_transport_send(t, 0, GONE_TAG, b[k], gone_len(k))) RFAIL("send %d", k);
    }
    if (hs_transport_barrier(t)) RFAIL("barrier");
    gone_seen_t g = {.me = me};
    int rc = unsent_when_gone(t, 0, &g);
    if (rc != 0 || g.n) RFAIL("unsent after leave: %d (%d handed back)", rc, g.n);
    double t0 = hs_now();
    if (hs_transport_send(t, 0, GONE_TAG, b[0], gone_len(0)) != -ECONNRESET)
        RFAIL("a send to a rank that left did not fail with -ECONNRESET");
    if (hs_now() - t0 > 1) RFAIL("the failed send took %.1f s", hs_now() - t0);
    if (!strstr(hs_last_error(), "left")) RFAIL("the error does not say it left");
    for (int k = 0; k < nmsg; k++) free(b[k]);
    return 0;
}

START_TEST(test_world_leave_hsshm)
{
    hs_transport_opts_t o;
    tt_opts(&o, "hsshm");
    ck_assert_int_eq(tt_run_world(3, &o, 1, leave_takes_all, NULL, 30, NULL, NULL), 0);
}
END_TEST

/* libfabric cannot know what a peer took: both calls say -ENOSYS. */
static int fabric_nosys(hs_transport_t *t, void *arg)
{
    (void)arg;
    gone_seen_t g = {.me = hs_transport_rank(t)};
    if (hs_transport_unsent(t, 1 - hs_transport_rank(t), GONE_TAG, gone_cb, &g) != -ENOSYS)
        RFAIL("unsent on tcp");
    if (hs_transport_leave(t, GONE_TAG, gone_cb, &g) != -ENOSYS) RFAIL("leave on tcp");
    return g.n != 0;
}

START_TEST(test_world_unsent_nosys_tcp)
{
    hs_transport_opts_t o;
    tt_opts(&o, "tcp");
    ck_assert_int_eq(tt_run_world(2, &o, 1, fabric_nosys, NULL, 30, NULL, NULL), 0);
}
END_TEST

/* A receiver that dies before reading a message sent by address: the sender's wait fails
 * naming it, well before the 20 s timeout. Rank 1 says goodbye and exits without another
 * transport call, so nothing of it reads the message that rank 0 sends after the goodbye. */
static int rdv_receiver_dies(hs_transport_t *t, void *arg)
{
    (void)arg;
    size_t big = 1 << 20;
    char *b = calloc(1, big), bye = 'b';
    if (hs_transport_rank(t) == 1) {
        hs_treq_t *r = NULL;
        if (hs_transport_isend(t, 0, 6, &bye, 1, &r)) RFAIL("isend bye");
        _exit(3); /* eager: the goodbye is in rank 0's ring already */
    }
    if (hs_transport_recv(t, 1, 6, &bye, 1, NULL)) RFAIL("recv bye");
    hs_treq_t *r = NULL;
    if (hs_transport_isend(t, 1, 7, b, big, &r)) RFAIL("isend");
    double t0 = hs_now();
    int rc = hs_transport_wait(t, &r, 0, NULL);
    double dt = hs_now() - t0;
    if (rc == 0) RFAIL("a send to a dead rank completed");
    if (dt > 5) RFAIL("took %.1f s to notice", dt);
    if (!strstr(hs_last_error(), "rank 1")) RFAIL("error does not name rank 1");
    fprintf(stderr, "(expected) dead reader detected in %.2f s: %s\n", dt, hs_last_error());
    free(b);
    return 0;
}

START_TEST(test_world_rdv_receiver_dies_hsshm)
{
    hs_transport_opts_t o;
    tt_opts(&o, "hsshm");
    int expect[2] = {0, 3};
    ck_assert_int_eq(tt_run_world(2, &o, 1, rdv_receiver_dies, NULL, 30, expect, rdv_64k), 0);
}
END_TEST

START_TEST(test_world_late_receives_tcp)
{
    hs_transport_opts_t o;
    tt_opts(&o, "tcp");
    ck_assert_int_eq(tt_run_world(2, &o, 1, late_receives, NULL, 40, NULL, NULL), 0);
}
END_TEST

/* What a rank sent before it closed and exited arrives whole. ofi_rxm sends a chunk eagerly
 * (its eager limit is set to the chunk, hs_fab_rxm_eager_default), and an eager send completes
 * once the provider has it, not the peer. Rank 0 posts its receives, then sleeps without
 * progress while rank 1 sends and closes: rank 1's close waits until rank 0 has everything
 * (its FIN answered, hs_fab_flush), and a rank that finds a peer gone completes what its
 * provider already holds before failing the rest on the liveness check. Either one keeps the
 * messages here; without both, every run failed ("peer rank 1 has exited during receive from
 * rank 1 (tag 0, 1 of 8 chunks done)"), as test_views' tcp case did under the sanitizers. */
static int after_exit(hs_transport_t *t, void *arg)
{
    (void)arg;
    enum { NMSG = 3 };
    int me = hs_transport_rank(t);
    size_t len = 512 << 10; /* 8 chunks of 64 KiB (tt_opts) */
    unsigned char *b[NMSG];
    for (int k = 0; k < NMSG; k++)
        if (!(b[k] = malloc(len + 1))) RFAIL("malloc");
    char go = 1;
    if (me == 1) {
        if (hs_transport_recv(t, 0, 100, &go, 1, NULL)) RFAIL("go");
        for (int k = 0; k < NMSG; k++) {
            tt_fill(b[k], len, 1, 0, k);
            if (hs_transport_send(t, 0, (uint32_t)k, b[k], len)) RFAIL("send %d", k);
        }
        for (int k = 0; k < NMSG; k++) free(b[k]);
        return 0; /* the close (transport_testlib.c), then exit */
    }
    hs_treq_t *rq[NMSG] = {NULL};
    for (int k = 0; k < NMSG; k++)
        if (hs_transport_irecv(t, 1, (uint32_t)k, b[k], len, &rq[k])) RFAIL("irecv %d", k);
    if (hs_transport_send(t, 1, 100, &go, 1)) RFAIL("go");
    hs_sleep(1.0); /* no progress here meanwhile */
    for (int k = 0; k < NMSG; k++) {
        hs_tstatus_t st;
        if (hs_transport_wait(t, &rq[k], 20, &st))
            RFAIL("message %d of the rank that closed: %s", k, hs_last_error());
        if (st.len != len || !tt_check_payload(b[k], st.len, 1, 0, k))
            RFAIL("message %d: %zu bytes (want %zu) or corrupt", k, st.len, len);
    }
    for (int k = 0; k < NMSG; k++) free(b[k]);
    printf("after a close: %d messages of %zu bytes whole, the sender %s\n", NMSG, len,
           hs_transport_peer_gone(t, 1) == 1 ? "gone" : "still running");
    return 0;
}

START_TEST(test_world_after_exit_tcp)
{
    hs_transport_opts_t o;
    tt_opts(&o, "tcp");
    ck_assert_int_eq(tt_run_world(2, &o, 1, after_exit, NULL, 40, NULL, NULL), 0);
}
END_TEST

/* Rank 1 dies after its first message; rank 0 waiting for the second must fail with an
 * error naming rank 1 well before its 20 s timeout. */
static int die_midway(hs_transport_t *t, void *arg)
{
    (void)arg;
    char b[64] = "x";
    if (hs_transport_rank(t) == 1) {
        if (hs_transport_send(t, 0, 1, b, sizeof b)) RFAIL("send");
        hs_sleep(0.05);
        _exit(3);
    }
    if (hs_transport_recv(t, 1, 1, b, sizeof b, NULL)) RFAIL("first recv");
    double t0 = hs_now();
    int rc = hs_transport_recv(t, 1, 2, b, sizeof b, NULL);
    double dt = hs_now() - t0;
    if (rc == 0) RFAIL("a dead peer's message arrived");
    if (dt > 5) RFAIL("took %.1f s to notice", dt);
    if (!strstr(hs_last_error(), "rank 1")) RFAIL("error does not name rank 1");
    fprintf(stderr, "(expected) peer death detected in %.2f s: %s\n", dt, hs_last_error());
    return 0;
}

START_TEST(test_world_peer_death_tcp)
{
    hs_transport_opts_t o;
    tt_opts(&o, "tcp");
    int expect[2] = {0, 3};
    ck_assert_int_eq(tt_run_world(2, &o, 1, die_midway, NULL, 30, expect, NULL), 0);
}
END_TEST

START_TEST(test_world_peer_death_hsshm)
{
    hs_transport_opts_t o;
    tt_opts(&o, "hsshm");
    int expect[2] = {0, 3};
    ck_assert_int_eq(tt_run_world(2, &o, 1, die_midway, NULL, 30, expect, NULL), 0);
}
END_TEST

/* latency=20ms: the one-way time of a small message (same host: one monotonic clock) is at
 * least 20 ms; bw=50MB: 4 MB take at least 80 ms. */
static int shaped(hs_transport_t *t, void *arg)
{
    (void)arg;
    size_t big = 4000000;
    char *b = calloc(1, big);
    double sent;
    if (hs_transport_rank(t) == 0) {
        sent = hs_now();
        if (hs_transport_send(t, 1, 1, &sent, sizeof sent)) RFAIL("send");
        sent = hs_now();
        if (hs_transport_send(t, 1, 2, b, big)) RFAIL("send big");
        memcpy(b, &sent, sizeof sent);
        if (hs_transport_send(t, 1, 3, b, sizeof sent)) RFAIL("send time");
    } else {
        if (hs_transport_recv(t, 0, 1, &sent, sizeof sent, NULL)) RFAIL("recv");
        double lat = hs_now() - sent;
        if (hs_transport_recv(t, 0, 2, b, big, NULL)) RFAIL("recv big");
        double got = hs_now();
        if (hs_transport_recv(t, 0, 3, &sent, sizeof sent, NULL)) RFAIL("recv time");
        double bw_time = got - sent;
        fprintf(stderr, "shaped: one-way %.1f ms (>= 20), 4 MB in %.1f ms (>= 100)\n", lat * 1e3,
                bw_time * 1e3);
        if (lat < 0.020 || lat > 0.5) RFAIL("one-way latency %.1f ms", lat * 1e3);
        if (bw_time < 0.100 || bw_time > 1.0) RFAIL("4 MB took %.1f ms", bw_time * 1e3);
    }
    free(b);
    return 0;
}

START_TEST(test_world_shaping_tcp)
{
    hs_transport_opts_t o;
    tt_opts(&o, "tcp");
    o.shaping = "0>1:latency=20ms,bw=50MB";
    ck_assert_int_eq(tt_run_world(2, &o, 1, shaped, NULL, 30, NULL, NULL), 0);
}
END_TEST

START_TEST(test_world_shaping_hsshm)
{
    hs_transport_opts_t o;
    tt_opts(&o, "hsshm");
    o.shaping = "0>1:latency=20ms,bw=50MB";
    ck_assert_int_eq(tt_run_world(2, &o, 1, shaped, NULL, 30, NULL, NULL), 0);
}
END_TEST

/* A shaped send posted while another thread of the rank sleeps in a wait (a service's
 * receive) and the posting thread does not progress the transport: the sleeper must re-plan
 * for the send's release time. Before the fix (gossip/shm_msg.c rang the bell only for the
 * progress thread) the chunks waited for the sleeper's next pass, up to 0.2 s: SGP with
 * --delay-bound 0 over --link latency=10ms took 50 ms per iteration instead of 15.5. */
typedef struct {
    hs_transport_t *t;
    int rc;
} sleeper_t;

static void *sleeper_recv(void *arg)
{
    sleeper_t *s = arg;
    char c;
    s->rc = hs_transport_recv(s->t, 1, 9, &c, 1, NULL);
    return NULL;
}

static int shaped_sleeper(hs_transport_t *t, void *arg)
{
    (void)arg;
    double sent;
    if (hs_transport_rank(t) == 0) {
        sleeper_t sl = {.t = t, .rc = -1};
        pthread_t th;
        if (pthread_create(&th, NULL, sleeper_recv, &sl)) RFAIL("pthread_create");
        hs_sleep(0.03); /* the receiver thread is asleep in its wait now */
        hs_treq_t *r = NULL;
        sent = hs_now();
        if (hs_transport_isend(t, 1, 1, &sent, sizeof sent, &r)) RFAIL("isend");
        hs_sleep(0.3); /* no progress from this thread meanwhile */
        if (hs_transport_wait(t, &r, 5, NULL)) RFAIL("send wait");
        pthread_join(th, NULL);
        if (sl.rc) RFAIL("the sleeper's receive");
    } else {
        if (hs_transport_recv(t, 0, 1, &sent, sizeof sent, NULL)) RFAIL("recv");
        double lat = hs_now() - sent;
        fprintf(stderr, "shaped, posted beside a sleeper: one-way %.1f ms (>= 20, < 120)\n",
                lat * 1e3);
        char c = 1;
        if (hs_transport_send(t, 0, 9, &c, 1)) RFAIL("send to the sleeper");
        if (lat < 0.020 || lat >= 0.120) RFAIL("one-way latency %.1f ms", lat * 1e3);
    }
    return 0;
}

START_TEST(test_world_shaping_sleeper_hsshm)
{
    hs_transport_opts_t o;
    tt_opts(&o, "hsshm");
    o.shaping = "0>1:latency=20ms";
    ck_assert_int_eq(tt_run_world(2, &o, 1, shaped_sleeper, NULL, 30, NULL, NULL), 0);
}
END_TEST

/* --- through `hearsay run` ($HS_BIN) around tests/transport_worker ---------------------- */

static char g_worker[4096]; /* tests/transport_worker */

static const char *const g_tcp_env[] = {"HS_PROVIDER=tcp", "HS_CHUNK_BYTES=65536", "HS_TIMEOUT=20",
                                        NULL};
static const char *const g_hsshm_env[] = {"HS_PROVIDER=hsshm", "HS_CHUNK_BYTES=65536",
                                          "HS_TIMEOUT=20", NULL};

/* 4 ranks: ranks 1..3 send 25 messages each (random sizes up to 200 KiB, random pauses) to
 * rank 0, which receives them all through HS_ANY_SOURCE; the worker checks source, length,
 * checksum and bytes of each, and the count per source. */
static void run_anysrc(const char *const *env)
{
    const char *argv[] = {tr_hearsay(), "run",    "-n",     "4",  "--timeout", "20",
                          "--",         g_worker, "anysrc", "25", NULL};
    tr_opts_t o = {.env = env, .echo = 1};
    tr_job_t j;
    int st = tr_run(&j, argv, &o, 35);
    const char *out = j.out;
    ck_assert_msg(st == 0, "hearsay run: %s", tr_status_text(st));
    ck_assert_ptr_nonnull(strstr(out, "rank 0: OK received 75 messages from 3 ranks"));
    for (int r = 1; r < 4; r++) {
        char line[64];
        snprintf(line, sizeof line, "rank %d: OK sent 25 messages", r);
        ck_assert_msg(strstr(out, line) != NULL, "missing '%s'", line);
    }
    tr_job_free(&j);
}

START_TEST(test_run_anysrc_tcp)
{
    run_anysrc(g_tcp_env);
}
END_TEST

START_TEST(test_run_anysrc_hsshm)
{
    run_anysrc(g_hsshm_env);
}
END_TEST

/* 2 ranks: put/get between windows (checked against the reference bytes), then atomics:
 * summed and checked on rank 0 where the provider has them, else -ENOSYS with a reason. */
static void run_rma(const char *const *env, const char *name)
{
    const char *argv[] = {tr_hearsay(), "run", "-n",     "2",   "--timeout",
                          "20",         "--",  g_worker, "rma", NULL};
    tr_opts_t o = {.env = env, .echo = 1};
    tr_job_t j;
    int st = tr_run(&j, argv, &o, 35);
    const char *out = j.out;
    ck_assert_msg(st == 0, "hearsay run: %s", tr_status_text(st));
    ck_assert_ptr_nonnull(strstr(out, "rank 0: OK put/get 300000 bytes with rank 1"));
    ck_assert_ptr_nonnull(strstr(out, "rank 1: OK put/get 300000 bytes with rank 0"));
    const char *skip = strstr(out, "OK atomics unsupported (-ENOSYS)");
    if (skip) {
        const char *eol = strchr(skip, '\n');
        printf("%s: atomics skipped: %.*s\n", name, eol ? (int)(eol - skip) : 200, skip);
    } else {
        ck_assert_ptr_nonnull(strstr(out, "rank 0: OK atomics summed from 2 ranks"));
    }
    tr_job_free(&j);
}

START_TEST(test_run_rma_tcp)
{
    run_rma(g_tcp_env, "test_run_rma_tcp");
}
END_TEST

START_TEST(test_run_rma_hsshm)
{
    run_rma(g_hsshm_env, "test_run_rma_hsshm");
}
END_TEST

/* tests/transport_netns.sh, found through $HS_SRCDIR (make check sets it), into g_netns. */
static char g_netns[4096];

/* Two ranks in two network namespaces joined by a veth pair, over tcp. Added to the suite only
 * where the script's own check (`--check`: root, ip(8), namespaces and veth work) passes. */
START_TEST(test_netns_veth_tcp)
{
    const char *argv[] = {"sh", g_netns, tr_hearsay(), g_worker, NULL};
    tr_opts_t o = {.echo = 1};
    tr_job_t j;
    int st = tr_run(&j, argv, &o, 40);
    ck_assert_msg(st == 0, "netns test: %s", tr_status_text(st));
    ck_assert_ptr_nonnull(strstr(j.out, "netns test: OK"));
    ck_assert_ptr_nonnull(strstr(j.out, "rank 0: OK received 10 messages from 1 ranks"));
    tr_job_free(&j);
}
END_TEST

/* NULL when the netns case can run, else why not. */
static const char *netns_missing(const char *why)
{
    static char reason[4096 + 64];
    if (why) return why;
    const char *src = getenv("HS_SRCDIR");
    snprintf(g_netns, sizeof g_netns, "%s/tests/transport_netns.sh", src ? src : ".");
    if (access(g_netns, R_OK) != 0) {
        snprintf(reason, sizeof reason, "%s not found; set HS_SRCDIR", g_netns);
        return reason;
    }
    const char *argv[] = {"sh", g_netns, "--check", NULL};
    tr_job_t j;
    int st = tr_run(&j, argv, NULL, 20);
    if (st != 0) {
        size_t l = strcspn(j.out, "\n");
        snprintf(reason, sizeof reason, "%.*s (transport_netns.sh --check: %s)", (int)l, j.out,
                 tr_status_text(st));
    }
    tr_job_free(&j);
    return st == 0 ? NULL : reason;
}

int main(void)
{
    /* through `hearsay run`: hearsay and tests/transport_worker */
    const char *why = tr_require("transport_worker", NULL);
    if (!why) snprintf(g_worker, sizeof g_worker, "%s", tr_helper("transport_worker"));
    Suite *s = suite_create("transport");
    TCase *c = tcase_create("spec");
    tcase_add_test(c, test_shape_parse);
    tcase_add_test(c, test_shape_parse_errors);
    tcase_add_test(c, test_shape_parse_ranges);
    tcase_add_test(c, test_shaper_model);
    suite_add_tcase(s, c);
    c = tcase_create("inproc");
    tcase_set_timeout(c, 30);
    TR_ADD_TEST(c, test_inproc_shm,
                getenv("HS_TEST_SHM") ? NULL
                                      : "known shm message loss (docs/transport.md); "
                                        "HS_TEST_SHM=1 runs it");
    tcase_add_test(c, test_inproc_tcp);
    tcase_add_test(c, test_inproc_hsshm);
    tcase_add_test(c, test_hsshm_errors);
    tcase_add_test(c, test_fabric_addr_lengths);
    suite_add_tcase(s, c);
    c = tcase_create("world");
    tcase_set_timeout(c, 60);
    tcase_add_test(c, test_world_alltoall_tcp);
    tcase_add_test(c, test_world_peer_death_tcp);
    tcase_add_test(c, test_world_shaping_tcp);
    tcase_add_test(c, test_world_alltoall_hsshm);
    tcase_add_test(c, test_world_late_receives_hsshm);
    tcase_add_test(c, test_world_alltoall_hsshm_rdv);
    tcase_add_test(c, test_world_late_receives_hsshm_rdv);
    tcase_add_test(c, test_world_rdv_receiver_dies_hsshm);
    tcase_add_test(c, test_world_unsent_after_death_hsshm);
    tcase_add_test(c, test_world_leave_hsshm);
    tcase_add_test(c, test_world_unsent_nosys_tcp);
    tcase_add_test(c, test_world_alltoall8_hsshm_stress);
    tcase_add_test(c, test_world_late_receives_tcp);
    tcase_add_test(c, test_world_after_exit_tcp);
    tcase_add_test(c, test_world_peer_death_hsshm);
    tcase_add_test(c, test_world_shaping_hsshm);
    tcase_add_test(c, test_world_shaping_sleeper_hsshm);
    tcase_add_test(c, test_world_device_mem_hsshm);
    tcase_add_test(c, test_world_device_mem_staged_hsshm);
    tcase_add_test(c, test_world_device_mem_tcp);
    suite_add_tcase(s, c);
    c = tcase_create("hearsay-run");
    tcase_set_timeout(c, 60);
    TR_ADD_TEST(c, test_run_anysrc_tcp, why);
    TR_ADD_TEST(c, test_run_rma_tcp, why);
    TR_ADD_TEST(c, test_run_anysrc_hsshm, why);
    TR_ADD_TEST(c, test_run_rma_hsshm, why);
    TR_ADD_TEST(c, test_netns_veth_tcp, netns_missing(why));
    suite_add_tcase(s, c);
    return tr_run_suite(s);
}
