/*
 * tests/test_views.c — zero-copy messages (hs_transport_buf_alloc, hs_transport_irecv_view):
 * forked ranks over hsshm, where a send from a mappable buffer is read in place and completes
 * only when the receiver releases its view (acknowledged in the order sent), beside every other
 * mix of sender and receiver (plain buffer to a view, a mappable buffer to a plain receive, by
 * address, unexpected messages, a cancelled view), and the same calls over tcp, which has none
 * of the slots and falls back to a copy.
 */
#include "hearsay/common.h"
#include "hearsay/transport.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/runlib.h"
#include "tests/transport_testlib.h"

#define MB (1u << 20)

/* Wait for view v and check it holds message k of len bytes from src. */
static int view_check(hs_transport_t *t, hs_tview_t *v, int src, int k, size_t len)
{
    int done = 0;
    if (hs_transport_view_wait(t, v, 20, &done) || !done) RFAIL("view_wait of message %d", k);
    if (hs_tview_len(v) != len || hs_tview_source(v) != src)
        RFAIL("message %d: %zu bytes from %d (want %zu from %d)", k, hs_tview_len(v),
              hs_tview_source(v), len, src);
    if (!tt_check_payload(hs_tview_data(v), len, src, hs_transport_rank(t), k))
        RFAIL("message %d corrupt", k);
    return 0;
}

/* A ring of n ranks: each sends 3 rounds of a 1 MiB + 8 share from one mappable buffer to its
 * right neighbour and views the left one's: the bytes are right in every round. */
static int ring(hs_transport_t *t, void *arg)
{
    (void)arg;
    int me = hs_transport_rank(t), n = hs_transport_size(t);
    int right = (me + 1) % n, left = (me + n - 1) % n;
    size_t len = MB + 8;
    unsigned char *buf = NULL;
    if (hs_transport_buf_alloc(t, len, (void **)&buf)) RFAIL("buf_alloc");
    if (((uintptr_t)buf & 63) != 0) RFAIL("buffer not 64-byte aligned");
    for (int k = 0; k < 3; k++) {
        hs_tview_t *v = NULL;
        hs_treq_t *s = NULL;
        if (hs_transport_irecv_view(t, left, (uint32_t)k, len, &v)) RFAIL("irecv_view");
        tt_fill(buf, len, me, right, k);
        if (hs_transport_isend(t, right, (uint32_t)k, buf, len, &s)) RFAIL("isend");
        if (view_check(t, v, left, k, len)) return 1;
        hs_transport_view_release(t, &v);
        if (v) RFAIL("release left the view set");
        if (hs_transport_wait(t, &s, 20, NULL)) RFAIL("send %d", k);
    }
    hs_transport_buf_free(t, (void **)&buf);
    if (buf) RFAIL("buf_free left the pointer set");
    return 0;
}

START_TEST(test_ring_hsshm)
{
    hs_transport_opts_t o;
    tt_opts(&o, "hsshm");
    ck_assert_int_eq(tt_run_world(3, &o, 1, ring, NULL, 40, NULL, NULL), 0);
}
END_TEST

/* The fallback: tcp has none of the slots; the same calls work, with a copy. */
START_TEST(test_ring_tcp)
{
    hs_transport_opts_t o;
    tt_opts(&o, "tcp");
    ck_assert_int_eq(tt_run_world(3, &o, 1, ring, NULL, 40, NULL, NULL), 0);
}
END_TEST

/* Zero copy proven by behaviour: rank 0's two sends from mappable buffers complete only once
 * rank 1 released its views, and in the order sent (releasing the second first completes
 * neither). */
static int hold(hs_transport_t *t, void *arg)
{
    (void)arg;
    int me = hs_transport_rank(t);
    size_t len = 256 << 10;
    char sig = 0;
    if (me == 0) {
        unsigned char *b[2] = {NULL, NULL};
        hs_treq_t *s[2] = {NULL, NULL};
        /* (a message that arrives before its view is copied, and its send completes then) */
        if (hs_transport_recv(t, 1, 9, &sig, 1, NULL)) RFAIL("views posted");
        for (int k = 0; k < 2; k++) {
            if (hs_transport_buf_alloc(t, len, (void **)&b[k])) RFAIL("buf_alloc");
            tt_fill(b[k], len, 0, 1, k);
            if (hs_transport_isend(t, 1, (uint32_t)k, b[k], len, &s[k])) RFAIL("isend %d", k);
        }
        /* rank 1 has both views and released the second one */
        if (hs_transport_recv(t, 1, 10, &sig, 1, NULL)) RFAIL("signal A");
        double until = hs_now() + 0.3;
        while (hs_now() < until) {
            int done = 0;
            if (hs_transport_test(t, &s[0], &done, NULL)) RFAIL("test send 0");
            if (done) RFAIL("send 0 completed while rank 1 still reads it");
            hs_sleep(0.01);
        }
        if (hs_transport_send(t, 1, 11, &sig, 1)) RFAIL("signal B");
        for (int k = 0; k < 2; k++)
            if (hs_transport_wait(t, &s[k], 20, NULL)) RFAIL("send %d", k);
        for (int k = 0; k < 2; k++) hs_transport_buf_free(t, (void **)&b[k]);
    } else {
        hs_tview_t *v[2] = {NULL, NULL};
        for (int k = 0; k < 2; k++)
            if (hs_transport_irecv_view(t, 0, (uint32_t)k, len, &v[k])) RFAIL("irecv_view");
        if (hs_transport_send(t, 0, 9, &sig, 1)) RFAIL("views posted");
        for (int k = 0; k < 2; k++)
            if (view_check(t, v[k], 0, k, len)) return 1;
        hs_transport_view_release(t, &v[1]);
        if (hs_transport_send(t, 0, 10, &sig, 1)) RFAIL("signal A");
        if (hs_transport_recv(t, 0, 11, &sig, 1, NULL)) RFAIL("signal B");
        /* still intact: the sender left its buffer alone */
        if (!tt_check_payload(hs_tview_data(v[0]), len, 0, 1, 0)) RFAIL("view 0 changed");
        hs_transport_view_release(t, &v[0]);
    }
    return 0;
}

START_TEST(test_hold_hsshm)
{
    hs_transport_opts_t o;
    tt_opts(&o, "hsshm");
    ck_assert_int_eq(tt_run_world(2, &o, 1, hold, NULL, 40, NULL, NULL), 0);
}
END_TEST

/* Every other pairing, rank 1 to rank 0: a plain buffer to a view (eager copy, and by address
 * with HS_SHM_RDV_BYTES), a mappable buffer to a plain receive, messages that arrive before
 * their view (unexpected: mappable and plain), a view cancelled before anything came (its
 * message then goes to the next one), a zero-length message, and one too long for the view. */
enum { M_PLAIN, M_MAP_TO_RECV, M_LATE_MAP, M_LATE_PLAIN, M_CANCELLED, M_EMPTY, M_BIG, M_N };

static int mixes(hs_transport_t *t, void *arg)
{
    /* (over tcp the rest of a message too long for its receive is never taken: its send would
     * not complete, so there M_BIG is an ordinary message) */
    int big = !arg || *(const int *)arg;
    int me = hs_transport_rank(t);
    size_t len = 300 << 10;
    if (me == 1) {
        unsigned char *plain[M_N] = {NULL}, *map = NULL, *map2 = NULL;
        hs_treq_t *s[M_N] = {NULL};
        if (hs_transport_buf_alloc(t, len, (void **)&map)) RFAIL("buf_alloc");
        if (hs_transport_buf_alloc(t, len, (void **)&map2)) RFAIL("buf_alloc");
        char sig;
        if (hs_transport_recv(t, 0, 100, &sig, 1, NULL)) RFAIL("go"); /* views posted */
        for (int k = 0; k < M_N; k++) {
            const unsigned char *src;
            size_t n = k == M_EMPTY ? 0 : k == M_BIG && big ? 2 * len : len;
            if (k == M_MAP_TO_RECV || k == M_LATE_MAP) {
                tt_fill(k == M_LATE_MAP ? map2 : map, len, 1, 0, k);
                src = k == M_LATE_MAP ? map2 : map;
            } else {
                plain[k] = malloc(n + 1);
                tt_fill(plain[k], n, 1, 0, k);
                src = plain[k];
            }
            if (hs_transport_isend(t, 0, (uint32_t)k, src, n, &s[k])) RFAIL("isend %d", k);
        }
        if (hs_transport_send(t, 0, 101, &sig, 1)) RFAIL("sent");
        for (int k = 0; k < M_N; k++)
            if (hs_transport_wait(t, &s[k], 20, NULL)) RFAIL("send %d", k);
        for (int k = 0; k < M_N; k++) free(plain[k]);
        hs_transport_buf_free(t, (void **)&map);
        hs_transport_buf_free(t, (void **)&map2);
        return 0;
    }
    hs_tview_t *v[M_N] = {NULL};
    unsigned char *rb = malloc(len);
    hs_treq_t *r = NULL;
    char sig = 1;
    if (hs_transport_irecv_view(t, 1, M_PLAIN, len, &v[M_PLAIN])) RFAIL("irecv_view");
    if (hs_transport_irecv(t, 1, M_MAP_TO_RECV, rb, len, &r)) RFAIL("irecv");
    if (hs_transport_irecv_view(t, 1, M_CANCELLED, len, &v[M_CANCELLED])) RFAIL("irecv_view");
    int done = 1;
    if (hs_transport_view_wait(t, v[M_CANCELLED], 0, &done) || done) RFAIL("poll of a new view");
    hs_transport_view_release(t, &v[M_CANCELLED]);
    if (hs_transport_irecv_view(t, 1, M_EMPTY, len, &v[M_EMPTY])) RFAIL("irecv_view");
    if (hs_transport_irecv_view(t, 1, M_BIG, len, &v[M_BIG])) RFAIL("irecv_view");
    if (hs_transport_send(t, 1, 100, &sig, 1)) RFAIL("go");
    if (hs_transport_recv(t, 1, 101, &sig, 1, NULL)) RFAIL("sent");
    hs_sleep(0.1); /* (let the late ones arrive unexpected) */
    if (view_check(t, v[M_PLAIN], 1, M_PLAIN, len)) return 1;
    hs_tstatus_t st;
    if (hs_transport_wait(t, &r, 20, &st) || st.len != len ||
        !tt_check_payload(rb, len, 1, 0, M_MAP_TO_RECV))
        RFAIL("mappable buffer to a plain receive");
    for (int k = M_LATE_MAP; k <= M_CANCELLED; k++) {
        if (hs_transport_irecv_view(t, 1, (uint32_t)k, len, &v[k])) RFAIL("irecv_view");
        if (view_check(t, v[k], 1, k, len)) return 1;
    }
    if (view_check(t, v[M_EMPTY], 1, M_EMPTY, 0)) return 1;
    if (big) {
        int rc = hs_transport_view_wait(t, v[M_BIG], 20, &done);
        if (rc != -EMSGSIZE || done)
            RFAIL("a message too long for its view: %d, done %d", rc, done);
    } else if (view_check(t, v[M_BIG], 1, M_BIG, len)) {
        return 1;
    }
    for (int k = 0; k < M_N; k++) hs_transport_view_release(t, &v[k]);
    free(rb);
    return 0;
}

static void rdv_64k(int rank)
{
    (void)rank;
    setenv("HS_SHM_RDV_BYTES", "65536", 1);
}

START_TEST(test_mixes_hsshm)
{
    hs_transport_opts_t o;
    tt_opts(&o, "hsshm");
    ck_assert_int_eq(tt_run_world(2, &o, 1, mixes, NULL, 40, NULL, NULL), 0);
}
END_TEST

START_TEST(test_mixes_hsshm_rdv)
{
    hs_transport_opts_t o;
    tt_opts(&o, "hsshm");
    ck_assert_int_eq(tt_run_world(2, &o, 1, mixes, NULL, 40, NULL, rdv_64k), 0);
}
END_TEST

START_TEST(test_mixes_tcp)
{
    hs_transport_opts_t o;
    tt_opts(&o, "tcp");
    int big = 0;
    ck_assert_int_eq(tt_run_world(2, &o, 1, mixes, &big, 40, NULL, NULL), 0);
}
END_TEST

/* Bad arguments are refused by name. */
START_TEST(test_bad_args)
{
    hs_transport_opts_t o;
    tt_opts(&o, "hsshm");
    hs_transport_t *t = NULL;
    ck_assert_int_eq(hs_transport_create(&t, 0, 1, 1, &o), 0);
    hs_tview_t *v = NULL;
    ck_assert_int_eq(hs_transport_irecv_view(t, 3, 0, 16, &v), -EINVAL);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "peer 3"));
    ck_assert_int_eq(hs_transport_irecv_view(t, HS_ANY_SOURCE, 0, 16, &v), -EINVAL);
    ck_assert_int_eq(hs_transport_irecv_view(t, 0, HS_TAG_MAX + 1, 16, &v), -EINVAL);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "tag"));
    ck_assert_ptr_null(v);
    ck_assert_ptr_null(hs_tview_data(NULL));
    hs_transport_view_release(t, &v); /* NULL: nothing */
    hs_transport_close(&t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("views");
    TCase *c = tcase_create("views");
    tcase_set_timeout(c, 60);
    tcase_add_test(c, test_bad_args);
    tcase_add_test(c, test_ring_hsshm);
    tcase_add_test(c, test_ring_tcp);
    tcase_add_test(c, test_hold_hsshm);
    tcase_add_test(c, test_mixes_hsshm);
    tcase_add_test(c, test_mixes_hsshm_rdv);
    tcase_add_test(c, test_mixes_tcp);
    suite_add_tcase(s, c);
    return tr_run_suite(s);
}
