/*
 * tests/test_conformance.c — one conformance suite that every transport backend runs: hsshm,
 * libfabric tcp, the per-pair hybrid (hsshm within a host, tcp across emulated hosts) and
 * libfabric shm. The same checks, on 3 ranks, for each: tagged messages (matched by tag, not
 * by order), any-source receives, probes, liveness, views, memory from hs_transport_buf_alloc
 * and its peer mappings, windows (put, get, float atomics), direct reads, unsent. Each
 * capability is held to the backend's flags (hs_transport_caps, HS_TCAP_*): claimed, it works as
 * hearsay/transport.h says; not claimed, it is refused cleanly: -ENOSYS with a message
 * (hs_last_error), and the transport still works afterwards. A last case checks that the
 * registry's flags are those docs/transport.md's table lists.
 *
 * The receives are posted before the senders pass a barrier, except where a check needs an
 * unexpected message (the probe). libfabric 1.17's shm loses some of those, the transport's own
 * barrier messages included (docs/transport.md), so its run is part of the suite only with
 * HS_TEST_SHM=1, as in tests/test_transport.c.
 */
#include "hearsay/common.h"
#include "hearsay/transport.h"
#include "tests/transport_testlib.h"

#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NR      3
#define LEN     1000
#define T_A     0x100u /* tagged: the first message */
#define T_B     0x101u /* tagged: the second, received first */
#define T_ANY   0x110u /* any-source */
#define T_PROBE 0x120u
#define T_VIEW  0x130u
#define T_HDL   0x140u /* a buffer handle */
#define T_READ  0x150u /* an address for a direct read */

typedef struct backend {
    const char *name; /* tt_opts provider */
    int hosts;        /* 1: ranks on emulated hosts {0, 0, 1} (per-pair choice) */
    int unexpected;   /* 1: unexpected messages are safe (the probe check runs) */
} backend_t;

static const int HOSTS3[NR] = {0, 0, 1};
static const backend_t *g_b;
static uint32_t g_caps; /* this rank's transport's hs_transport_caps */

static int claimed(uint32_t cap)
{
    return (g_caps & cap) != 0;
}

static int same_host(int a, int b)
{
    return !g_b->hosts || HOSTS3[a] == HOSTS3[b];
}

/* What this rank found, printed by rank 0 at the end ("probe ok, windows refused, ..."). */
static char found_caps[512];
static void note(const char *cap, int rc)
{
    size_t n = strlen(found_caps);
    snprintf(found_caps + n, sizeof found_caps - n, "%s%s %s", n ? ", " : "", cap,
             rc == 0 ? "ok" : "refused");
}

/* A refusal is clean: -ENOSYS with a message saying so. */
#define CHECK_REFUSAL(rc, what)                                                                    \
    do {                                                                                           \
        if ((rc) != -ENOSYS) RFAIL("%s: %d, not the -ENOSYS of a refusal", what, rc);              \
        if (!hs_last_error()[0]) RFAIL("%s refused without a message", what);                      \
    } while (0)
/* A capability's call: with the flag claimed it works (0), without it it is refused. */
#define CHECK_CAP(cap, rc, what)                                                                   \
    do {                                                                                           \
        if (claimed(cap) && (rc) < 0)                                                              \
            RFAIL("%s: %d (%s), though the backend claims it", what, rc, hs_last_error());         \
        if (!claimed(cap)) CHECK_REFUSAL(rc, what);                                                \
    } while (0)

static int wait1(hs_transport_t *t, hs_treq_t **req, hs_tstatus_t *st)
{
    return hs_transport_wait(t, req, 20, st);
}

/* Tagged messages: ranks 1 and 2 send T_A then T_B; rank 0 posted T_B's receive first. */
static int check_tagged(hs_transport_t *t)
{
    int me = hs_transport_rank(t);
    unsigned char buf[2][NR][LEN];
    hs_treq_t *req[2][NR] = {{0}};
    if (me == 0)
        for (int r = 1; r < NR; r++) {
            if (hs_transport_irecv(t, r, T_B, buf[1][r], LEN, &req[1][r]) < 0) RFAIL("irecv B");
            if (hs_transport_irecv(t, r, T_A, buf[0][r], LEN, &req[0][r]) < 0) RFAIL("irecv A");
        }
    if (hs_transport_barrier(t) < 0) RFAIL("barrier");
    if (me != 0) {
        tt_fill(buf[0][0], LEN, me, 0, 1);
        tt_fill(buf[1][0], LEN, me, 0, 2);
        if (hs_transport_send(t, 0, T_A, buf[0][0], LEN) < 0) RFAIL("send A");
        if (hs_transport_send(t, 0, T_B, buf[1][0], LEN) < 0) RFAIL("send B");
        return 0;
    }
    for (int r = 1; r < NR; r++)
        for (int k = 0; k < 2; k++) {
            hs_tstatus_t st;
            if (wait1(t, &req[k][r], &st) < 0) RFAIL("wait tag %d from %d", k, r);
            if (st.source != r || st.tag != (k ? T_B : T_A) || st.len != LEN)
                RFAIL("tagged: status source %d tag %#x len %zu from rank %d", st.source, st.tag,
                      st.len, r);
            if (!tt_check_payload(buf[k][r], LEN, r, 0, k + 1)) RFAIL("tagged payload %d/%d", r, k);
        }
    return 0;
}

/* Any-source: two receives from HS_ANY_SOURCE get ranks 1 and 2, each once. */
static int check_any_source(hs_transport_t *t)
{
    int me = hs_transport_rank(t);
    unsigned char buf[NR][LEN];
    hs_treq_t *req[NR] = {0};
    if (me == 0)
        for (int s = 1; s < NR; s++)
            if (hs_transport_irecv(t, HS_ANY_SOURCE, T_ANY, buf[s], LEN, &req[s]) < 0)
                RFAIL("irecv any");
    if (hs_transport_barrier(t) < 0) RFAIL("barrier");
    if (me != 0) {
        tt_fill(buf[0], LEN, me, 0, 3);
        if (hs_transport_send(t, 0, T_ANY, buf[0], LEN) < 0) RFAIL("send any");
        return 0;
    }
    int seen[NR] = {0};
    for (int s = 1; s < NR; s++) {
        hs_tstatus_t st;
        if (wait1(t, &req[s], &st) < 0) RFAIL("wait any");
        if (st.source < 1 || st.source >= NR || seen[st.source]++)
            RFAIL("any-source: source %d (twice, or out of range)", st.source);
        if (st.tag != T_ANY || !tt_check_payload(buf[s], LEN, st.source, 0, 3))
            RFAIL("any-source payload from %d", st.source);
    }
    return 0;
}

/* Probe: rank 1's message, sent before rank 0 receives, is found, then received. */
static int check_probe(hs_transport_t *t)
{
    int me = hs_transport_rank(t);
    unsigned char buf[LEN];
    if (me == 1) {
        tt_fill(buf, LEN, 1, 0, 4);
        if (hs_transport_send(t, 0, T_PROBE, buf, LEN) < 0) RFAIL("send probe");
    }
    if (me == 0) {
        int found = 0, rc = 0;
        hs_tstatus_t st = {0};
        double end = hs_now() + 20;
        while (!found && hs_now() < end) {
            hs_error_clear();
            rc = hs_transport_probe(t, 1, T_PROBE, 0, &found, &st);
            if (rc < 0) break;
            if (!found) hs_transport_progress(t);
        }
        note("probe", rc);
        CHECK_CAP(HS_TCAP_PROBE, rc, "probe");
        if (rc == 0 && !found)
            RFAIL("probe: rank 1's message not found in 20 s");
        else if (st.source != 1 || st.tag != T_PROBE || st.len != LEN)
            RFAIL("probe: source %d tag %#x len %zu", st.source, st.tag, st.len);
        /* any tag from anyone finds it too */
        if (rc == 0) {
            found = 0;
            if (hs_transport_probe(t, HS_ANY_SOURCE, 0, 1, &found, &st) < 0 || !found ||
                st.source != 1)
                RFAIL("probe any source, any tag: found %d source %d", found, st.source);
        }
        if (hs_transport_recv(t, 1, T_PROBE, buf, LEN, &st) < 0) RFAIL("recv probed");
        if (!tt_check_payload(buf, LEN, 1, 0, 4)) RFAIL("probed payload");
    }
    return hs_transport_barrier(t) < 0;
}

/* Liveness: a running peer is never reported gone. Claimed, peer_gone answers (0) for every
 * peer on this host, and may say -ENOSYS for others (it cannot know); not claimed, it is
 * refused for every peer. */
static int check_liveness(hs_transport_t *t)
{
    int me = hs_transport_rank(t);
    for (int r = 0; r < NR; r++) {
        if (r == me) continue;
        hs_error_clear();
        int rc = hs_transport_peer_gone(t, r);
        if (rc == 1) RFAIL("peer_gone(%d) = 1 while it runs", r);
        if (same_host(me, r)) CHECK_CAP(HS_TCAP_LIVENESS, rc, "peer_gone (same host)");
        if (rc < 0) CHECK_REFUSAL(rc, "peer_gone");
        if (hs_transport_rank(t) == 0) note(r == 1 ? "liveness(rank 1)" : "liveness(rank 2)", rc);
    }
    return 0;
}

/* Views, from a buffer of hs_transport_buf_alloc: rank 1 -> rank 0. */
static int check_views(hs_transport_t *t)
{
    int me = hs_transport_rank(t);
    hs_tview_t *view = NULL;
    int rc = 0;
    /* every backend takes views (the generic layer copies where it cannot map) */
    if (me == 0 && (rc = hs_transport_irecv_view(t, 1, T_VIEW, LEN, &view)) < 0)
        RFAIL("irecv_view: %d (%s)", rc, hs_last_error());
    /* every rank learns whether rank 0 posted it: rank 1 sends only then */
    int posted = me == 0 ? view != NULL : 0;
    if (me == 0) note("views", rc);
    if (me == 0)
        for (int r = 1; r < NR; r++)
            if (hs_transport_send(t, r, T_VIEW + 1, &posted, sizeof posted) < 0) RFAIL("send");
    if (me != 0 && hs_transport_recv(t, 0, T_VIEW + 1, &posted, sizeof posted, NULL) < 0)
        RFAIL("recv");
    if (hs_transport_barrier(t) < 0) RFAIL("barrier");
    if (!posted) return 0;
    if (me == 1) {
        void *b = NULL;
        if (hs_transport_buf_alloc(t, LEN, &b) < 0) RFAIL("buf_alloc");
        tt_fill(b, LEN, 1, 0, 5);
        if (hs_transport_send(t, 0, T_VIEW, b, LEN) < 0) RFAIL("send view");
        hs_transport_buf_free(t, &b);
    }
    if (me == 0) {
        int done = 0;
        if (hs_transport_view_wait(t, view, 20, &done) < 0 || !done) RFAIL("view_wait");
        if (hs_tview_len(view) != LEN || hs_tview_source(view) != 1 ||
            !tt_check_payload(hs_tview_data(view), LEN, 1, 0, 5))
            RFAIL("view: len %zu source %d", hs_tview_len(view), hs_tview_source(view));
        hs_transport_view_release(t, &view);
        if (view) RFAIL("view_release left the view");
    }
    return hs_transport_barrier(t) < 0;
}

/* Memory kinds: every backend claims host memory, and buf_alloc is plain host memory
 * everywhere (no backend claims device memory yet: there is nothing to check). Peer maps:
 * claimed, rank 1's buffer mapped by rank 0 is the same memory; not claimed, refused. */
static int check_memory(hs_transport_t *t)
{
    int me = hs_transport_rank(t);
    if (!claimed(HS_TCAP_MEM_HOST)) RFAIL("host memory not claimed");
    if (claimed(HS_TCAP_MEM_DEVICE)) RFAIL("device memory claimed: add its check here");
    void *b = NULL;
    if (hs_transport_buf_alloc(t, 4096, &b) < 0) RFAIL("buf_alloc");
    memset(b, 0x5a, 4096);
    int map = claimed(HS_TCAP_PEER_MAP);
    if (hs_transport_has_peer_map(t) != map)
        RFAIL("has_peer_map %d, peer-map flag %d", hs_transport_has_peer_map(t), map);
    hs_tbuf_handle_t h;
    hs_error_clear();
    int rc = hs_transport_buf_handle(t, b, 4096, &h);
    CHECK_CAP(HS_TCAP_PEER_MAP, rc, "buf_handle");
    if (!map) {
        void *p = NULL;
        memset(&h, 0, sizeof h);
        hs_error_clear();
        int mrc = hs_transport_peer_map(t, (me + 1) % NR, &h, &p);
        CHECK_REFUSAL(mrc, "peer_map");
    }
    if (me == 0) note("peer maps", rc);
    /* ranks 0 and 1 share host 0 in every layout here */
    if (map && me == 1) {
        tt_fill(b, 4096, 1, 0, 6);
        if (hs_transport_send(t, 0, T_HDL, &h, sizeof h) < 0) RFAIL("send handle");
        if (hs_transport_recv(t, 0, T_HDL + 1, &rc, sizeof rc, NULL) < 0) RFAIL("recv ack");
    }
    if (map && me == 0) {
        hs_tbuf_handle_t ph;
        void *p = NULL;
        if (hs_transport_recv(t, 1, T_HDL, &ph, sizeof ph, NULL) < 0) RFAIL("recv handle");
        if (hs_transport_peer_map(t, 1, &ph, &p) < 0) RFAIL("peer_map");
        if (!tt_check_payload(p, 4096, 1, 0, 6)) RFAIL("mapped bytes differ");
        hs_transport_peer_unmap(t, 1, &p);
        if (hs_transport_send(t, 1, T_HDL + 1, &rc, sizeof rc) < 0) RFAIL("send ack");
    }
    hs_transport_buf_free(t, &b);
    return hs_transport_barrier(t) < 0;
}

/* Windows: rank 1 puts into rank 0's, rank 2 gets it back; a float atomic add where offered. */
static int check_windows(hs_transport_t *t)
{
    int me = hs_transport_rank(t);
    float mem[64] = {0};
    hs_twin_t *w = NULL;
    hs_error_clear();
    int rc = hs_transport_win_create(t, mem, sizeof mem, &w);
    if (me == 0) note("windows", rc);
    CHECK_CAP(HS_TCAP_WINDOWS, rc, "win_create");
    if (rc < 0) {
        /* no windows: atomics cannot be claimed either */
        if (claimed(HS_TCAP_ATOMIC_FLOAT)) RFAIL("float atomics claimed without windows");
        return hs_transport_barrier(t) < 0;
    }
    hs_treq_t *req = NULL;
    float v[16];
    for (int i = 0; i < 16; i++) v[i] = (float)(i + 1);
    if (me == 1) {
        if (hs_transport_put(t, w, 0, 0, v, sizeof v, &req) < 0 || wait1(t, &req, NULL) < 0)
            RFAIL("put");
    }
    if (hs_transport_barrier(t) < 0) RFAIL("barrier");
    if (me == 0 && memcmp(mem, v, sizeof v)) RFAIL("put: rank 0's window differs");
    if (me == 2) {
        float got[16];
        if (hs_transport_get(t, w, 0, 0, got, sizeof got, &req) < 0 || wait1(t, &req, NULL) < 0)
            RFAIL("get");
        if (memcmp(got, v, sizeof v)) RFAIL("get: bytes differ");
    }
    if (hs_transport_barrier(t) < 0) RFAIL("barrier");
    float one[4] = {1, 1, 1, 1};
    int arc = 0;
    if (me != 0) {
        hs_error_clear();
        arc = hs_transport_atomic_add_float(t, w, 0, 32 * sizeof(float), one, 4, &req);
        CHECK_CAP(HS_TCAP_ATOMIC_FLOAT, arc, "atomic_add_float");
        if (arc == 0 && wait1(t, &req, NULL) < 0) RFAIL("atomic add");
    }
    /* rank 0 learns whether the adds happened */
    int added = 0;
    if (me != 0 && hs_transport_send(t, 0, T_HDL + 2, &arc, sizeof arc) < 0) RFAIL("send");
    if (me == 0)
        for (int r = 1; r < NR; r++) {
            if (hs_transport_recv(t, r, T_HDL + 2, &arc, sizeof arc, NULL) < 0) RFAIL("recv");
            added += arc == 0;
        }
    if (me == 0) note("float atomics", added ? 0 : -ENOSYS);
    if (me == 0 && added != (claimed(HS_TCAP_ATOMIC_FLOAT) ? NR - 1 : 0))
        RFAIL("float atomics: %d ranks added, flag %d", added, claimed(HS_TCAP_ATOMIC_FLOAT));
    if (hs_transport_barrier(t) < 0) RFAIL("barrier");
    if (me == 0)
        for (int i = 32; i < 36; i++)
            if (mem[i] != (float)added) RFAIL("atomic add: %g, expected %d", mem[i], added);
    if (hs_transport_barrier(t) < 0) RFAIL("barrier");
    hs_transport_win_free(t, &w);
    return 0;
}

/* Direct reads: claimed, rank 0 reads rank 1's bytes where the kernel lets it
 * (hs_transport_peer_read_ok); not claimed, has_peer_read is 0 and a read is refused. */
static int check_peer_read(hs_transport_t *t)
{
    int me = hs_transport_rank(t);
    int cl = claimed(HS_TCAP_PEER_READ);
    if (hs_transport_has_peer_read(t) != cl)
        RFAIL("has_peer_read %d, peer-read flag %d", hs_transport_has_peer_read(t), cl);
    unsigned char mine[LEN];
    tt_fill(mine, LEN, me, 0, 7);
    uint64_t addr = (uint64_t)(uintptr_t)mine;
    if (me == 1 && hs_transport_send(t, 0, T_READ, &addr, sizeof addr) < 0) RFAIL("send addr");
    if (me == 0) {
        if (hs_transport_recv(t, 1, T_READ, &addr, sizeof addr, NULL) < 0) RFAIL("recv addr");
        unsigned char got[LEN];
        if (!cl || hs_transport_peer_read_ok(t)) {
            hs_error_clear();
            int rc = hs_transport_peer_read(t, 1, addr, got, LEN);
            note("peer reads", rc);
            CHECK_CAP(HS_TCAP_PEER_READ, rc, "peer_read");
            if (rc == 0 && !tt_check_payload(got, LEN, 1, 0, 7)) RFAIL("peer_read: bytes differ");
        } else {
            note("peer reads (not allowed here)", 0);
        }
    }
    return hs_transport_barrier(t) < 0; /* rank 1's buffer stays until rank 0 has read it */
}

static void unsent_cb(void *ctx, int peer, const void *buf, size_t got, size_t len)
{
    (void)peer, (void)buf, (void)got, (void)len;
    ++*(int *)ctx;
}

/* Unsent (and leave): claimed, a running same-host peer is not ready to hand back (-EBUSY);
 * not claimed, refused. leave ends a rank's receiving for good: only its refusal is checked. */
static int check_unsent(hs_transport_t *t)
{
    int me = hs_transport_rank(t), n = 0;
    if (me != 0) return 0;
    hs_error_clear();
    int rc = hs_transport_unsent(t, 1, T_ANY, unsent_cb, &n);
    if (claimed(HS_TCAP_UNSENT) && rc != -EBUSY)
        RFAIL("unsent(running rank 1): %d, expected -EBUSY", rc);
    if (!claimed(HS_TCAP_UNSENT)) {
        CHECK_REFUSAL(rc, "unsent");
        hs_error_clear();
        CHECK_REFUSAL(hs_transport_leave(t, T_ANY, unsent_cb, &n), "leave");
    }
    note("unsent", claimed(HS_TCAP_UNSENT) ? 0 : rc);
    return n != 0;
}

static int conform(hs_transport_t *t, void *arg)
{
    const backend_t *b = arg;
    g_b = b;
    g_caps = hs_transport_caps(t);
    const hs_transport_entry_t *e = hs_transport_lookup(b->name);
    if (!e) RFAIL("%s: not in the registry", b->name);
    if (g_caps & ~e->ops->caps)
        RFAIL("%s: open transport's flags %#x beyond the entry's %#x", b->name, g_caps,
              e->ops->caps);
    if (!claimed(HS_TCAP_TAGGED) || !claimed(HS_TCAP_ANY_SOURCE))
        RFAIL("%s: tagged messages and any-source receives not claimed", b->name);
    if (check_tagged(t)) return 1;
    if (check_any_source(t)) return 1;
    if (b->unexpected && check_probe(t)) return 1;
    if (check_liveness(t)) return 1;
    if (check_views(t)) return 1;
    if (check_memory(t)) return 1;
    if (check_peer_read(t)) return 1;
    if (check_unsent(t)) return 1;
    if (check_windows(t)) return 1;
    /* still working after every refusal */
    if (check_tagged(t)) return 1;
    char flags[256];
    hs_transport_caps_str(g_caps, flags, sizeof flags);
    if (hs_transport_rank(t) == 0)
        printf("test_conformance: %s (%s; flags: %s): tagged ok, any-source ok, %s\n", b->name,
               hs_transport_pair_provider(t, 0), flags, found_caps);
    return 0;
}

static void run(const backend_t *b)
{
    hs_transport_opts_t o;
    tt_opts(&o, b->name);
    int rc = b->hosts ? tt_run_world_hosts(NR, &o, 0, HOSTS3, conform, (void *)b, 60, NULL, NULL)
                      : tt_run_world(NR, &o, 1, conform, (void *)b, 60, NULL, NULL);
    ck_assert_msg(rc == 0, "%s: %d ranks failed the conformance checks", b->name, rc);
}

START_TEST(test_conform_hsshm)
{
    run(&(backend_t){"hsshm", 0, 1});
}
END_TEST

START_TEST(test_conform_tcp)
{
    run(&(backend_t){"tcp", 0, 1});
}
END_TEST

START_TEST(test_conform_hybrid)
{
    run(&(backend_t){"hsshm+tcp", 1, 1});
}
END_TEST

START_TEST(test_conform_fabric_shm)
{
    run(&(backend_t){"shm", 0, 1});
}
END_TEST

/* The registry: each entry found by its name, the core slots filled, flags within
 * HS_TCAP_COUNT; an unknown provider's error lists the registered names. */
START_TEST(test_registry)
{
    int n = 0;
    for (const hs_transport_entry_t *e; (e = hs_transport_registry_at(n)); n++) {
        ck_assert_ptr_eq(hs_transport_lookup(e->name), e);
        ck_assert_msg(e->ops && e->ops->size == sizeof(hs_transport_ops_t), "%s", e->name);
        ck_assert_msg((e->ops->caps >> HS_TCAP_COUNT) == 0, "%s", e->name);
        ck_assert_msg(e->ops->create || e->create_hosts, "%s opens no way", e->name);
        ck_assert_msg(e->ops->isend && e->ops->irecv && e->ops->test && e->ops->waitany &&
                          e->ops->progress && e->ops->req_free && e->ops->barrier &&
                          e->ops->address && e->ops->connect && e->ops->close,
                      "%s lacks a core slot", e->name);
        ck_assert_msg(!!e->parts == !!e->create_hosts, "%s", e->name);
        ck_assert_msg(strstr(hs_transport_names(), e->name), "%s", hs_transport_names());
    }
    ck_assert_int_ge(n, 3);
    ck_assert_ptr_null(hs_transport_lookup("auto"));
    ck_assert_str_eq(hs_transport_lookup("tcp")->name, "fabric");
    ck_assert_str_eq(hs_transport_lookup("hsshm+verbs")->name, "hybrid");
    ck_assert_int_eq(hs_transport_check_provider("no/such"), -EINVAL);
    ck_assert_msg(strstr(hs_last_error(), "hsshm") && strstr(hs_last_error(), "hybrid"), "%s",
                  hs_last_error());
    ck_assert_int_lt(hs_transport_check_provider("nosuchprov"), 0);
    ck_assert_msg(strstr(hs_last_error(), "nosuchprov") && strstr(hs_last_error(), "hsshm+P"), "%s",
                  hs_last_error());
}
END_TEST

/* docs/transport.md's table of flags ("| `name` | flag flag ... |") is the registry's. */
START_TEST(test_flags_documented)
{
    const char *src = getenv("HS_SRCDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/docs/transport.md", src ? src : ".");
    FILE *fp = fopen(path, "r");
    if (!fp) {
        printf("test_conformance: %s not found (set HS_SRCDIR): flags table unchecked\n", path);
        return;
    }
    static char doc[1 << 17];
    size_t len = fread(doc, 1, sizeof doc - 1, fp);
    fclose(fp);
    doc[len] = '\0';
    for (int i = 0; hs_transport_registry_at(i); i++) {
        const hs_transport_entry_t *e = hs_transport_registry_at(i);
        char key[64], want[256];
        snprintf(key, sizeof key, "\n| `%s` | ", e->name);
        ck_assert_int_eq(hs_transport_caps_str(e->ops->caps, want, sizeof want), 0);
        const char *row = strstr(doc, key);
        ck_assert_msg(row, "docs/transport.md has no flags row for %s (%s)", e->name, key + 1);
        row += strlen(key);
        size_t n = strcspn(row, "|");
        while (n && row[n - 1] == ' ') n--;
        ck_assert_msg(n == strlen(want) && !strncmp(row, want, n),
                      "docs/transport.md says %s: '%.*s'; the registry: '%s'", e->name, (int)n, row,
                      want);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("conformance");
    TCase *c = tcase_create("backends");
    tcase_add_test(c, test_conform_hsshm);
    tcase_add_test(c, test_conform_tcp);
    tcase_add_test(c, test_conform_hybrid);
    /* libfabric 1.17's shm loses messages that arrive before their receive is posted, the
     * transport's own barrier messages included (docs/transport.md): the same known problem
     * for which tests/test_transport.c runs shm only with HS_TEST_SHM=1. */
    const char *shm = getenv("HS_TEST_SHM");
    if (shm && !strcmp(shm, "1") && hs_transport_check_provider("shm") == 0)
        tcase_add_test(c, test_conform_fabric_shm);
    else
        printf("test_conformance: libfabric shm left out (HS_TEST_SHM=1 runs it: libfabric "
               "1.17's shm loses unexpected messages, barriers included)\n");
    tcase_set_timeout(c, 90);
    suite_add_tcase(s, c);
    TCase *r = tcase_create("registry");
    tcase_add_test(r, test_registry);
    tcase_add_test(r, test_flags_documented);
    suite_add_tcase(s, r);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
