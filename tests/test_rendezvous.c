/*
 * tests/test_rendezvous.c — hs_boot and the rendezvous server, in one process.
 *
 * The server runs in its thread; clients are threads using the worker side (boot_rdv.h) or
 * raw sockets that send wrong keys, malformed headers and seeded random bytes. Asserts on
 * the answers, the log lines, the states and the time every bounded wait takes.
 */
#include "gossip/boot_rdv.h"
#include "gossip/rdv_wire.h"
#include "hearsay/bootstrap.h"
#include "hearsay/common.h"
#include "hearsay/rendezvous.h"
#include "hearsay/rng.h"

#include <check.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---------------------------------------------------------------- hs_boot in-process */

static void clear_launch_env(void)
{
    const char *vars[] = {"HS_RANK",
                          "HS_SIZE",
                          "HS_RDV",
                          "HS_JOB_KEY",
                          "SLURM_PROCID",
                          "SLURM_NTASKS",
                          "OMPI_COMM_WORLD_RANK",
                          "PMIX_RANK",
                          "PMI_RANK",
                          "HS_HOSTNAME"};
    for (size_t i = 0; i < HS_ARRAY_LEN(vars); i++) unsetenv(vars[i]);
}

START_TEST(test_boot_single_world)
{
    clear_launch_env();
    setenv("HS_HOSTNAME", "nodeA", 1);
    hs_boot_t *b = NULL;
    ck_assert_int_eq(hs_boot_init(&b, NULL), 0);
    ck_assert_str_eq(hs_boot_method(b), "single");
    ck_assert_int_eq(hs_boot_rank(b), 0);
    ck_assert_int_eq(hs_boot_size(b), 1);
    ck_assert_int_eq(hs_boot_local_rank(b), 0);
    ck_assert_int_eq(hs_boot_local_size(b), 1);
    ck_assert_int_eq(hs_boot_all_local(b), 1);
    ck_assert_int_eq(hs_boot_host_of(b, 0), 0);
    ck_assert_int_eq(hs_boot_host_of(b, 1), -1);
    ck_assert_str_eq(hs_boot_hostname(b, 0), "nodeA");
    int x = 42, y = 0;
    ck_assert_int_eq(hs_boot_allgather(b, &x, sizeof x, &y), 0);
    ck_assert_int_eq(y, 42);
    ck_assert_int_eq(hs_boot_barrier(b), 0);
    hs_boot_finalize(&b);
    ck_assert_ptr_null(b);
}
END_TEST

/* A fixed (simulated) job: hosts of ranks_per_host consecutive ranks, computed (no tables of
 * the whole job in each of the simulator's ranks): 10 ranks, 4 per host. */
START_TEST(test_boot_fixed)
{
    hs_boot_t *b = NULL;
    ck_assert_int_eq(hs_boot_init_fixed(&b, 5, 10, 4), 0);
    ck_assert_str_eq(hs_boot_method(b), "fixed");
    ck_assert_int_eq(hs_boot_rank(b), 5);
    ck_assert_int_eq(hs_boot_size(b), 10);
    ck_assert_int_eq(hs_boot_num_hosts(b), 3);
    ck_assert_int_eq(hs_boot_all_local(b), 0);
    ck_assert_int_eq(hs_boot_local_rank(b), 1);
    ck_assert_int_eq(hs_boot_local_size(b), 4);
    ck_assert_int_eq(hs_boot_host_of(b, 0), 0);
    ck_assert_int_eq(hs_boot_host_of(b, 7), 1);
    ck_assert_int_eq(hs_boot_host_of(b, 9), 2);
    ck_assert_int_eq(hs_boot_host_of(b, 10), -1);
    ck_assert_str_eq(hs_boot_hostname(b, 8), "host2");
    ck_assert_str_eq(hs_boot_hostname(b, 3), "host0");
    ck_assert_ptr_null(hs_boot_hostname(b, -1));
    hs_boot_finalize(&b);
    ck_assert_int_eq(hs_boot_init_fixed(&b, 9, 10, 4), 0); /* the last host: 2 ranks */
    ck_assert_int_eq(hs_boot_local_rank(b), 1);
    ck_assert_int_eq(hs_boot_local_size(b), 2);
    hs_boot_finalize(&b);
    ck_assert_int_eq(hs_boot_init_fixed(&b, 2, 3, 0), 0); /* one host */
    ck_assert_int_eq(hs_boot_num_hosts(b), 1);
    ck_assert_int_eq(hs_boot_all_local(b), 1);
    ck_assert_int_eq(hs_boot_local_rank(b), 2);
    ck_assert_int_eq(hs_boot_local_size(b), 3);
    hs_boot_finalize(&b);
    ck_assert_ptr_null(b);
}
END_TEST

START_TEST(test_boot_env_errors)
{
    clear_launch_env();
    hs_boot_t *b = NULL;
    setenv("HS_RANK", "0", 1);
    ck_assert_int_eq(hs_boot_init(&b, NULL), -EINVAL);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "HS_SIZE"));
    setenv("HS_SIZE", "2", 1);
    ck_assert_int_eq(hs_boot_init(&b, NULL), -EINVAL);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "HS_RDV"));
    setenv("HS_RDV", "127.0.0.1", 1);
    setenv("HS_JOB_KEY", "00112233445566778899aabbccddeeff", 1);
    ck_assert_int_eq(hs_boot_init(&b, NULL), -EINVAL);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "HOST:PORT"));
    setenv("HS_JOB_KEY", "short", 1);
    setenv("HS_RDV", "127.0.0.1:1", 1);
    ck_assert_int_eq(hs_boot_init(&b, NULL), -EINVAL);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "HS_JOB_KEY"));
    setenv("HS_RANK", "2", 1);
    ck_assert_int_eq(hs_boot_init(&b, NULL), -EINVAL);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "HS_RANK=2"));
    /* Nobody listens on port 1: a bounded wait and a message naming the address. */
    setenv("HS_RANK", "0", 1);
    setenv("HS_JOB_KEY", "00112233445566778899aabbccddeeff", 1);
    hs_boot_opts_t o = {.timeout_s = 0.5, .use_mpi = 0};
    double t = hs_now();
    ck_assert_int_eq(hs_boot_init(&b, &o), -ETIMEDOUT);
    ck_assert_double_lt(hs_now() - t, 3);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "HS_RDV=127.0.0.1:1"));
    ck_assert_ptr_null(b);
    /* Slurm without a rendezvous. */
    clear_launch_env();
    setenv("SLURM_PROCID", "1", 1);
    setenv("SLURM_NTASKS", "4", 1);
    ck_assert_int_eq(hs_boot_init(&b, NULL), -EINVAL);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "--rendezvous-only"));
}
END_TEST

/* ---------------------------------------------------------------- server in-process */

typedef struct srv_fixture {
    hs_rdv_server_t *s;
    char key[HS_JOB_KEY_CHARS + 1];
    FILE *log;
    char *logbuf;
    size_t loglen;
    char host[64];
    int port;
} srv_fixture_t;

static void srv_open_rejoin(srv_fixture_t *f, int size, double timeout_s, double hello_s,
                            int rejoin)
{
    memset(f, 0, sizeof *f);
    ck_assert_int_eq(hs_rdv_key_generate(f->key), 0);
    ck_assert_int_eq((int)strlen(f->key), 32);
    f->log = open_memstream(&f->logbuf, &f->loglen);
    hs_rdv_server_opts_t o = {.size = size,
                              .key = f->key,
                              .timeout_s = timeout_s,
                              .hello_timeout_s = hello_s,
                              .log = f->log,
                              .log_prefix = "rdv: ",
                              .rejoin = rejoin};
    ck_assert_int_eq(hs_rdv_server_start(&f->s, &o), 0);
    ck_assert_int_eq(
        hs_rdv_parse_addr(hs_rdv_server_addr(f->s), "addr", f->host, sizeof f->host, &f->port), 0);
    ck_assert_int_eq(f->port, hs_rdv_server_port(f->s));
}

static void srv_open(srv_fixture_t *f, int size, double timeout_s, double hello_s)
{
    srv_open_rejoin(f, size, timeout_s, hello_s, 0);
}

/* The log so far (the server thread writes it; stopping the server makes it complete). */
static const char *srv_close(srv_fixture_t *f)
{
    hs_rdv_server_stop(&f->s);
    fflush(f->log);
    return f->logbuf;
}

static int raw_connect(const srv_fixture_t *f)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", f->port);
    ck_assert_int_eq(getaddrinfo(f->host, ps, &hints, &res), 0);
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_eq(connect(fd, res->ai_addr, res->ai_addrlen), 0);
    freeaddrinfo(res);
    return fd;
}

/* Read the server's answer: its ERROR text (or "" for none), then whether it closed. */
static int read_answer(int fd, char *text, size_t cap, double limit_s)
{
    uint8_t hb[HS_RDV_HDR_BYTES];
    text[0] = '\0';
    double end = hs_now() + limit_s;
    if (hs_rdv_read_all(fd, hb, sizeof hb, end) < 0) return 0;
    hs_rdv_hdr_t h;
    hs_rdv_hdr_decode(hb, &h);
    if (h.type != HS_RDV_ERROR || h.len >= cap) return 0;
    if (hs_rdv_read_all(fd, text, (size_t)h.len, end) < 0) return 0;
    text[h.len] = '\0';
    char c;
    return hs_rdv_read_all(fd, &c, 1, end) == -ECONNRESET; /* closed after the error */
}

typedef struct client_arg {
    const srv_fixture_t *f;
    int rank, size;
    int rc;
    int vanish; /* leave after joining, without BYE */
    char err[HS_ERRMSG_MAX];
    uint64_t sum;
} client_arg_t;

static void *client_main(void *p)
{
    client_arg_t *a = p;
    hs_rdv_client_t c;
    char addr[128], host[32];
    char(*hosts)[HS_RDV_HOST_MAX] = calloc((size_t)a->size, HS_RDV_HOST_MAX);
    snprintf(addr, sizeof addr, "%s:%d", a->f->host, a->f->port);
    snprintf(host, sizeof host, "host%d", a->rank % 2);
    a->rc = hs_rdv_client_join(&c, addr, a->f->key, a->rank, a->size, host, 10, (char *)hosts);
    if (a->rc == 0) {
        for (int r = 0; r < a->size; r++)
            if (strncmp(hosts[r], r % 2 ? "host1" : "host0", HS_RDV_HOST_MAX) != 0) a->rc = -100;
    }
    if (a->rc == 0 && a->vanish) {
        close(c.fd);
        free(hosts);
        return NULL;
    }
    for (int round = 0; a->rc == 0 && round < 3; round++) {
        /* Round k: rank r contributes (k + 1) * (r + 1) in a k+1-word vector. */
        uint64_t mine[3] = {0}, all[64 * 3];
        for (int i = 0; i <= round; i++) mine[i] = (uint64_t)((round + 1) * (a->rank + 1));
        a->rc = hs_rdv_client_allgather(&c, mine, (size_t)(round + 1) * 8, all);
        for (int r = 0; a->rc == 0 && r < a->size; r++)
            for (int i = 0; i <= round; i++) {
                uint64_t v = all[r * (round + 1) + i];
                if (v != (uint64_t)((round + 1) * (r + 1))) a->rc = -101;
                a->sum += v;
            }
    }
    if (a->rc < 0)
        snprintf(a->err, sizeof a->err, "%s", hs_last_error());
    else
        hs_rdv_client_leave(&c);
    free(hosts);
    return NULL;
}

static void run_clients(const srv_fixture_t *f, int size, int vanish_rank, client_arg_t *args)
{
    pthread_t th[64];
    for (int r = 0; r < size; r++) {
        args[r] = (client_arg_t){.f = f, .rank = r, .size = size, .vanish = r == vanish_rank};
        pthread_create(&th[r], NULL, client_main, &args[r]);
    }
    for (int r = 0; r < size; r++) pthread_join(th[r], NULL);
}

START_TEST(test_server_rounds_and_state)
{
    srv_fixture_t f;
    srv_open(&f, 5, 10, 5);
    ck_assert_int_eq(hs_rdv_server_state(f.s), 0);
    client_arg_t a[5];
    run_clients(&f, 5, -1, a);
    for (int r = 0; r < 5; r++) {
        ck_assert_msg(a[r].rc == 0, "rank %d: %d %s", r, a[r].rc, a[r].err);
        /* Independent closed form: sum over rounds k of (k+1) * (k+1) * sum_r (r+1). */
        ck_assert_uint_eq(a[r].sum, (1 * 1 + 2 * 2 + 3 * 3) * 15);
    }
    struct pollfd pf = {.fd = hs_rdv_server_event_fd(f.s), .events = POLLIN};
    ck_assert_int_eq(poll(&pf, 1, 5000), 1);
    ck_assert_int_eq(hs_rdv_server_state(f.s), 1);
    const char *log = srv_close(&f);
    ck_assert_msg(strstr(log, "rejected") == NULL, "log: %s", log);
    fclose(f.log);
    free(f.logbuf);
}
END_TEST

START_TEST(test_server_rejects_bad_input)
{
    srv_fixture_t f;
    srv_open(&f, 2, 10, 0.5);
    char text[HS_RDV_ERR_MAX + 1];
    uint8_t msg[HS_RDV_HDR_BYTES + HS_RDV_HELLO_BYTES];
    hs_rdv_hello_t hello = {.size = 2, .pid = 7};
    snprintf(hello.host, sizeof hello.host, "h");

    /* Wrong key. */
    int fd = raw_connect(&f);
    hs_rdv_hdr_t h = hs_rdv_hdr_make(HS_RDV_HELLO, 0, 0, HS_RDV_HELLO_BYTES);
    hs_rdv_hdr_encode(&h, msg);
    memcpy(hello.key, f.key, 32);
    hello.key[5] = hello.key[5] == 'a' ? 'b' : 'a';
    hs_rdv_hello_encode(&hello, msg + HS_RDV_HDR_BYTES);
    ck_assert_int_eq(hs_rdv_write_all(fd, msg, sizeof msg, hs_now() + 5), 0);
    ck_assert(read_answer(fd, text, sizeof text, 5));
    ck_assert_str_eq(text, "bad job key");
    close(fd);

    /* Right key, rank out of range / size mismatch. */
    memcpy(hello.key, f.key, 32);
    const struct {
        uint32_t rank, size;
        const char *why;
    } bad[] = {{2, 2, "rank 2 out of range"}, {1, 3, "believes the job has 3 ranks"}};
    for (size_t i = 0; i < HS_ARRAY_LEN(bad); i++) {
        fd = raw_connect(&f);
        h = hs_rdv_hdr_make(HS_RDV_HELLO, bad[i].rank, 0, HS_RDV_HELLO_BYTES);
        hs_rdv_hdr_encode(&h, msg);
        hello.size = bad[i].size;
        hs_rdv_hello_encode(&hello, msg + HS_RDV_HDR_BYTES);
        ck_assert_int_eq(hs_rdv_write_all(fd, msg, sizeof msg, hs_now() + 5), 0);
        ck_assert(read_answer(fd, text, sizeof text, 5));
        ck_assert_msg(strstr(text, bad[i].why), "answer '%s'", text);
        close(fd);
    }

    /* Malformed headers: wrong version, huge length, GATHER before HELLO. */
    const struct {
        hs_rdv_hdr_t h;
        const char *why;
    } mal[] = {
        {{HS_RDV_MAGIC, 9, HS_RDV_HELLO, 0, 0, HS_RDV_HELLO_BYTES}, "version"},
        {{HS_RDV_MAGIC, HS_RDV_VERSION, HS_RDV_GATHER, 0, 1, 1ull << 40}, "length"},
        {{HS_RDV_MAGIC, HS_RDV_VERSION, HS_RDV_GATHER, 0, 1, 4}, "not HELLO"},
        {{HS_RDV_MAGIC, HS_RDV_VERSION, 77, 0, 0, 0}, "type"},
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(mal); i++) {
        fd = raw_connect(&f);
        hs_rdv_hdr_encode(&mal[i].h, msg);
        ck_assert_int_eq(hs_rdv_write_all(fd, msg, HS_RDV_HDR_BYTES, hs_now() + 5), 0);
        ck_assert(read_answer(fd, text, sizeof text, 5));
        ck_assert_msg(strstr(text, mal[i].why), "case %zu answer '%s'", i, text);
        close(fd);
    }

    /* Silent connection, and half a header: dropped after the hello timeout. */
    int silent = raw_connect(&f), half = raw_connect(&f);
    ck_assert_int_eq(hs_rdv_write_all(half, msg, 10, hs_now() + 5), 0);
    double t = hs_now();
    ck_assert(read_answer(silent, text, sizeof text, 5));
    ck_assert_ptr_nonnull(strstr(text, "did not present the job key within 0.5 s"));
    ck_assert(read_answer(half, text, sizeof text, 5));
    ck_assert_double_lt(hs_now() - t, 3);
    close(silent);
    close(half);

    /* Random bytes from many connections (seeded): never a crash; a real job still works. */
    hs_rng_t rng;
    hs_rng_seed(&rng, 7, 0);
    for (int c = 0; c < 40; c++) {
        fd = raw_connect(&f);
        uint8_t junk[300];
        size_t n = 1 + hs_rng_below(&rng, sizeof junk);
        for (size_t i = 0; i < n; i++) junk[i] = (uint8_t)hs_rng_below(&rng, 256);
        if (c % 2) memcpy(junk, msg, HS_RDV_HDR_BYTES < n ? 8 : 0); /* sometimes a valid magic */
        hs_rdv_write_all(fd, junk, n, hs_now() + 5);
        close(fd);
    }
    client_arg_t a[2];
    run_clients(&f, 2, -1, a);
    ck_assert_msg(a[0].rc == 0 && a[1].rc == 0, "%s / %s", a[0].err, a[1].err);
    const char *log = srv_close(&f);
    ck_assert_ptr_nonnull(strstr(log, "rdv: rejected connection from 127.0.0.1:"));
    ck_assert_ptr_nonnull(strstr(log, ": bad job key\n"));
    fclose(f.log);
    free(f.logbuf);
}
END_TEST

START_TEST(test_server_timeouts_and_departures)
{
    /* 4 ranks, 2 never come: both named, within the bound. */
    srv_fixture_t f;
    srv_open(&f, 4, 1.0, 1.0);
    client_arg_t a[2];
    double t = hs_now();
    pthread_t th[2];
    for (int r = 0; r < 2; r++) {
        a[r] = (client_arg_t){.f = &f, .rank = r * 2, .size = 4};
        pthread_create(&th[r], NULL, client_main, &a[r]);
    }
    for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
    ck_assert_double_lt(hs_now() - t, 4);
    for (int r = 0; r < 2; r++) {
        ck_assert_int_eq(a[r].rc, -ETIMEDOUT);
        ck_assert_msg(strstr(a[r].err, "rendezvous timeout after 1 s: ranks 1, 3 never connected"),
                      "%s", a[r].err);
    }
    ck_assert_int_lt(hs_rdv_server_state(f.s), 0);
    const char *log = srv_close(&f);
    ck_assert_ptr_nonnull(strstr(log, "ranks 1, 3 never connected"));
    fclose(f.log);
    free(f.logbuf);

    /* A rank that joins and vanishes: the others' first allgather fails naming it. */
    srv_open(&f, 3, 10, 5);
    client_arg_t b[3];
    t = hs_now();
    run_clients(&f, 3, 1, b);
    ck_assert_double_lt(hs_now() - t, 5);
    for (int r = 0; r < 3; r += 2) {
        ck_assert_int_eq(b[r].rc, -ECONNABORTED);
        ck_assert_msg(strstr(b[r].err, "rank 1 left the job"), "%s", b[r].err);
    }
    srv_close(&f);
    fclose(f.log);
    free(f.logbuf);
}
END_TEST

/* Issue 17 item 8: every length in a rendezvous header is checked against its type's bound
 * before it is used (2^62, 2^63, 2^64 - 1 never reach an allocation or a multiplication). */
START_TEST(test_hdr_lengths_overflow)
{
    static const uint64_t huge[] = {1ull << 62, 1ull << 63, UINT64_MAX, UINT64_MAX - 23,
                                    (uint64_t)HS_RDV_MAX_SIZE * HS_RDV_GATHER_MAX + 1};
    static const struct {
        uint16_t type;
        int to_launcher;
        uint64_t ok; /* the largest accepted length */
    } types[] = {
        {HS_RDV_HELLO, 1, HS_RDV_HELLO_BYTES},
        {HS_RDV_GATHER, 1, HS_RDV_GATHER_MAX},
        {HS_RDV_BYE, 1, 0},
        {HS_RDV_WELCOME, 0, (uint64_t)HS_RDV_MAX_SIZE * HS_RDV_HOST_MAX},
        {HS_RDV_RESULT, 0, (uint64_t)HS_RDV_MAX_SIZE * HS_RDV_GATHER_MAX},
        {HS_RDV_ERROR, 0, HS_RDV_ERR_MAX},
    };
    for (size_t t = 0; t < HS_ARRAY_LEN(types); t++) {
        const char *why = NULL;
        hs_rdv_hdr_t h = hs_rdv_hdr_make(types[t].type, 0, 1, types[t].ok);
        ck_assert_int_eq(hs_rdv_hdr_check(&h, types[t].to_launcher, &why), 0);
        h.len = types[t].ok + 1;
        ck_assert_int_eq(hs_rdv_hdr_check(&h, types[t].to_launcher, &why), -EPROTO);
        for (size_t i = 0; i < HS_ARRAY_LEN(huge); i++) {
            h.len = huge[i];
            why = NULL;
            ck_assert_msg(hs_rdv_hdr_check(&h, types[t].to_launcher, &why) == -EPROTO,
                          "type %u with %llu bytes accepted", types[t].type,
                          (unsigned long long)huge[i]);
            ck_assert_ptr_nonnull(strstr(why, "length"));
        }
        /* and never from the wrong side */
        h.len = 0;
        ck_assert_int_eq(hs_rdv_hdr_check(&h, !types[t].to_launcher, &why), -EPROTO);
    }
}
END_TEST

/* A launcher that answers HELLO with a WELCOME whose length is within the type's bound but not
 * the job's (64 KiB of hostnames for 2 ranks) and then says nothing. */
typedef struct fake_launcher {
    int lfd;
    uint64_t len;
} fake_launcher_t;

static void *fake_launcher(void *arg)
{
    fake_launcher_t *fl = arg;
    struct pollfd p = {.fd = fl->lfd, .events = POLLIN};
    if (poll(&p, 1, 5000) != 1) return NULL;
    int fd = accept(fl->lfd, NULL, NULL);
    if (fd < 0) return NULL;
    uint8_t in[HS_RDV_HDR_BYTES + HS_RDV_HELLO_BYTES], hb[HS_RDV_HDR_BYTES];
    if (hs_rdv_read_all(fd, in, sizeof in, hs_now() + 5) == 0) {
        hs_rdv_hdr_t h = hs_rdv_hdr_make(HS_RDV_WELCOME, 0, 0, fl->len);
        hs_rdv_hdr_encode(&h, hb);
        hs_rdv_write_all(fd, hb, sizeof hb, hs_now() + 5);
        char c;
        hs_rdv_read_all(fd, &c, 1, hs_now() + 5); /* until the worker hangs up */
    }
    close(fd);
    return NULL;
}

/* The worker checks a length against what it expects before it allocates or waits for the
 * body: it used to allocate the announced length (up to 16 GiB for a RESULT) and wait for the
 * bytes until its timeout. */
START_TEST(test_client_checks_length_first)
{
    fake_launcher_t fl = {.len = (uint64_t)HS_RDV_MAX_SIZE * HS_RDV_HOST_MAX};
    int port;
    char addr[300], key[HS_RDV_KEY_HEX + 1];
    ck_assert_int_eq(hs_rdv_listen("127.0.0.1", 0, &fl.lfd, &port, addr, sizeof addr), 0);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    ck_assert_int_eq(hs_rdv_key_generate(key), 0);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, fake_launcher, &fl), 0);
    hs_rdv_client_t c;
    char hosts[2 * HS_RDV_HOST_MAX];
    double t0 = hs_now();
    hs_error_clear();
    int rc = hs_rdv_client_join(&c, addr, key, 0, 2, "h", 3, hosts);
    double el = hs_now() - t0;
    ck_assert_int_eq(rc, -EPROTO);
    ck_assert_msg(strstr(hs_last_error(), "expected the hostnames of 2 ranks"), "%s",
                  hs_last_error());
    ck_assert_msg(el < 1.0, "the worker took %.1f s to refuse the answer", el);
    pthread_join(th, NULL);
    close(fl.lfd);
}
END_TEST

/* Issue 28 item 4: 2,200 idle strangers (all on 127.0.0.1) holding connections before the
 * workers come used to fill the launcher's table (about 2,150 did), and both workers were
 * refused with "launcher gone?". Now connections without the key are bounded (64 from one
 * address), the oldest dropped first and told why, and the workers are admitted at once. */
START_TEST(test_server_admits_job_first)
{
    int n = 2200;
    struct rlimit rl;
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_cur < (rlim_t)n + 1500) {
        rl.rlim_cur = HS_MIN(rl.rlim_max, (rlim_t)n + 1500);
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur < (rlim_t)n + 1500) n = (int)rl.rlim_cur - 1500;
    ck_assert_msg(n >= 500, "RLIMIT_NOFILE %llu is too low for this test",
                  (unsigned long long)rl.rlim_cur);
    srv_fixture_t f;
    srv_open(&f, 2, 20, 0); /* the default deadline to present the key (5 s) */
    int *fds = malloc(sizeof *fds * (size_t)n);
    double t = hs_now();
    for (int i = 0; i < n; i++) fds[i] = raw_connect(&f);
    double t_strangers = hs_now() - t;
    client_arg_t a[2];
    t = hs_now();
    run_clients(&f, 2, -1, a);
    double t_job = hs_now() - t;
    ck_assert_msg(a[0].rc == 0 && a[1].rc == 0, "%d strangers: %s / %s", n, a[0].err, a[1].err);
    ck_assert_msg(t_job < 5, "the job took %.1f s to start", t_job);
    /* Each stranger dropped was told why; at most 64 are still held. */
    int told = 0, held = 0;
    char text[HS_RDV_ERR_MAX + 1];
    for (int i = 0; i < n; i++) {
        struct pollfd pf = {.fd = fds[i], .events = POLLIN};
        if (poll(&pf, 1, 0) == 0) {
            held++;
        } else if (read_answer(fds[i], text, sizeof text, 1) &&
                   (strstr(text, "rendezvous busy: dropped, more than 64 connections without "
                                 "the job key from 127.0.0.1") ||
                    strstr(text, "did not present the job key"))) {
            told++;
        }
        close(fds[i]);
    }
    free(fds);
    printf("%d strangers connected in %.2f s; the 2-rank job then started in %.3f s; %d told "
           "why, %d still held\n",
           n, t_strangers, t_job, told, held);
    ck_assert_int_le(held, 64);
    ck_assert_int_eq(told + held, n);
    const char *log = srv_close(&f);
    int lines = 0;
    for (const char *p = log; p && *p; p++) lines += *p == '\n';
    ck_assert_msg(lines < 40, "%d log lines", lines); /* 20, then one in 500 */
    ck_assert_ptr_nonnull(strstr(log, "connections without the job key refused so far"));
    fclose(f.log);
    free(f.logbuf);
}
END_TEST

/* ---------------------------------------------------------------- replacements (rejoin) */

/* Connect and present the key as rank `rank` of `size` on host `host`. */
static int raw_hello(const srv_fixture_t *f, int rank, int size, const char *host)
{
    int fd = raw_connect(f);
    uint8_t msg[HS_RDV_HDR_BYTES + HS_RDV_HELLO_BYTES];
    hs_rdv_hdr_t h = hs_rdv_hdr_make(HS_RDV_HELLO, (uint32_t)rank, 0, HS_RDV_HELLO_BYTES);
    hs_rdv_hdr_encode(&h, msg);
    hs_rdv_hello_t hello = {.size = (uint32_t)size, .pid = 1};
    memcpy(hello.key, f->key, HS_RDV_KEY_HEX);
    snprintf(hello.host, sizeof hello.host, "%s", host);
    hs_rdv_hello_encode(&hello, msg + HS_RDV_HDR_BYTES);
    ck_assert_int_eq(hs_rdv_write_all(fd, msg, sizeof msg, hs_now() + 5), 0);
    return fd;
}

static void raw_send(int fd, uint16_t type, int rank, uint32_t seq, const void *data, size_t len)
{
    uint8_t hb[HS_RDV_HDR_BYTES];
    hs_rdv_hdr_t h = hs_rdv_hdr_make(type, (uint32_t)rank, seq, len);
    hs_rdv_hdr_encode(&h, hb);
    ck_assert_int_eq(hs_rdv_write_all(fd, hb, sizeof hb, hs_now() + 5), 0);
    if (len) ck_assert_int_eq(hs_rdv_write_all(fd, data, len, hs_now() + 5), 0);
}

/* Read one message of `type` (and `seq`) of exactly `len` bytes into buf (within 5 s). */
static void raw_expect(int fd, uint16_t type, uint32_t seq, void *buf, size_t len)
{
    uint8_t hb[HS_RDV_HDR_BYTES];
    hs_rdv_hdr_t h;
    ck_assert_int_eq(hs_rdv_read_all(fd, hb, sizeof hb, hs_now() + 5), 0);
    hs_rdv_hdr_decode(hb, &h);
    ck_assert_msg(h.type == type && h.seq == seq && h.len == len,
                  "got type %u seq %u len %llu, expected type %u seq %u len %zu", h.type, h.seq,
                  (unsigned long long)h.len, type, seq, len);
    if (len) ck_assert_int_eq(hs_rdv_read_all(fd, buf, len, hs_now() + 5), 0);
}

/* Round k's contribution length per rank (round 2 is a barrier), and rank r's bytes in it:
 * the live ranks give 16 * k + r, a replacement its own `mark`. */
static const size_t rj_len[4] = {0, 8, 0, 16};

/* A replacement for `rank` replays round k contributing `mark` bytes; the result must hold its
 * bytes in its slot and `slot_want[r]` (the stored contributions) in the others'. */
static void replay_round(int fd, int rank, uint32_t k, uint8_t mark, const uint8_t *slot_want)
{
    uint8_t mine[16], all[3 * 16];
    memset(mine, mark, sizeof mine);
    raw_send(fd, HS_RDV_GATHER, rank, k, mine, rj_len[k]);
    raw_expect(fd, HS_RDV_RESULT, k, all, 3 * rj_len[k]);
    for (int r = 0; r < 3; r++)
        for (size_t i = 0; i < rj_len[k]; i++) {
            uint8_t want = r == rank ? mark : slot_want[r];
            ck_assert_msg(all[(size_t)r * rj_len[k] + i] == want,
                          "round %u: rank %d's slot byte %zu is %u, expected %u", k, r, i,
                          all[(size_t)r * rj_len[k] + i], want);
        }
}

/* A job of 3 ranks (raw connections) does 3 rounds and keeps its connections; then rank 1's
 * closes. Returns the live connections in fd[]. */
static void rejoin_job_start(srv_fixture_t *f, int fd[3])
{
    char hosts[3 * HS_RDV_HOST_MAX], name[16];
    for (int r = 0; r < 3; r++) {
        snprintf(name, sizeof name, "host%d", r);
        fd[r] = raw_hello(f, r, 3, name);
    }
    for (int r = 0; r < 3; r++) {
        raw_expect(fd[r], HS_RDV_WELCOME, 0, hosts, sizeof hosts);
        ck_assert_str_eq(hosts + r * HS_RDV_HOST_MAX, r == 0   ? "host0"
                                                      : r == 1 ? "host1"
                                                               : "host2");
    }
    for (uint32_t k = 1; k <= 3; k++) {
        uint8_t mine[16], all[3 * 16];
        for (int r = 0; r < 3; r++) {
            memset(mine, (int)(16 * k + (uint32_t)r), sizeof mine);
            raw_send(fd[r], HS_RDV_GATHER, r, k, mine, rj_len[k]);
        }
        for (int r = 0; r < 3; r++) {
            raw_expect(fd[r], HS_RDV_RESULT, k, all, 3 * rj_len[k]);
            for (size_t i = 0; i < 3 * rj_len[k]; i++)
                ck_assert_uint_eq(all[i], 16 * k + i / rj_len[k]);
        }
    }
    close(fd[1]); /* rank 1 crashes: no BYE */
    fd[1] = -1;
}

/* Nothing arrived on fd (within 0.1 s). */
static int quiet_fd(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 100) == 0;
}

/* With opts.rejoin a replacement for a crashed rank is admitted after WELCOME, replays the
 * completed rounds with its own contribution in its slot, and cannot fail the running job. */
START_TEST(test_server_rejoin_replays_rounds)
{
    srv_fixture_t f;
    srv_open_rejoin(&f, 3, 10, 5, 1);
    int fd[3];
    rejoin_job_start(&f, fd);
    char text[HS_RDV_ERR_MAX + 1], hosts[3 * HS_RDV_HOST_MAX];
    uint8_t bad[4] = {0};

    /* A replacement contributing the wrong length: an ERROR naming the rank and round. */
    int rep = raw_hello(&f, 1, 3, "newhost");
    raw_expect(rep, HS_RDV_WELCOME, 0, hosts, sizeof hosts);
    raw_send(rep, HS_RDV_GATHER, 1, 1, bad, sizeof bad);
    ck_assert(read_answer(rep, text, sizeof text, 5));
    ck_assert_msg(strstr(text, "rank 1 (a replacement) contributed 4 bytes to collective round 1"),
                  "%s", text);
    close(rep);

    /* The next one: its hostname in its WELCOME, rounds 1..3 replayed, round 4 refused. */
    rep = raw_hello(&f, 1, 3, "newhost");
    raw_expect(rep, HS_RDV_WELCOME, 0, hosts, sizeof hosts);
    ck_assert_str_eq(hosts, "host0");
    ck_assert_str_eq(hosts + HS_RDV_HOST_MAX, "newhost");
    ck_assert_str_eq(hosts + 2 * HS_RDV_HOST_MAX, "host2");
    for (uint32_t k = 1; k <= 3; k++) {
        uint8_t want[3] = {(uint8_t)(16 * k), 0, (uint8_t)(16 * k + 2)};
        replay_round(rep, 1, k, (uint8_t)(0xB0 + k), want);
    }
    uint8_t mine[8] = {0};
    raw_send(rep, HS_RDV_GATHER, 1, 4, mine, sizeof mine);
    ck_assert(read_answer(rep, text, sizeof text, 5));
    ck_assert_msg(strstr(text, "rank 1 (a replacement) asked for collective round 4; the job "
                               "completed only 3 start-up rounds: a replacement takes no part "
                               "in later collectives"),
                  "%s", text);
    close(rep);
    ck_assert_int_eq(hs_rdv_server_state(f.s), 0); /* the job goes on */

    /* A second replacement of rank 1 (the first crashed too) replays round 1 and leaves. */
    rep = raw_hello(&f, 1, 3, "newhost2");
    raw_expect(rep, HS_RDV_WELCOME, 0, hosts, sizeof hosts);
    uint8_t want1[3] = {16, 0, 18};
    replay_round(rep, 1, 1, 0xC1, want1);
    raw_send(rep, HS_RDV_BYE, 1, 0, NULL, 0);

    /* Rank 2 crashes; its replacement sees rank 1's replacements' entries. */
    close(fd[2]);
    int rep2 = raw_hello(&f, 2, 3, "host2b");
    raw_expect(rep2, HS_RDV_WELCOME, 0, hosts, sizeof hosts);
    ck_assert_str_eq(hosts + HS_RDV_HOST_MAX, "newhost2");
    ck_assert_str_eq(hosts + 2 * HS_RDV_HOST_MAX, "host2b");
    uint8_t w1[3] = {16, 0xC1, 0}, w2[3] = {32, 0xB2, 0}, w3[3] = {48, 0xB3, 0};
    replay_round(rep2, 2, 1, 0xD1, w1);
    replay_round(rep2, 2, 2, 0xD2, w2);
    replay_round(rep2, 2, 3, 0xD3, w3);

    /* The live rank saw nothing of it, and can leave; so can the replacement: finished. */
    ck_assert(quiet_fd(fd[0]));
    ck_assert_int_eq(hs_rdv_server_state(f.s), 0);
    raw_send(fd[0], HS_RDV_BYE, 0, 0, NULL, 0);
    raw_send(rep2, HS_RDV_BYE, 2, 0, NULL, 0);
    struct pollfd pf = {.fd = hs_rdv_server_event_fd(f.s), .events = POLLIN};
    ck_assert_int_eq(poll(&pf, 1, 5000), 1);
    ck_assert_int_eq(hs_rdv_server_state(f.s), 1);
    char c;
    ck_assert_int_eq(hs_rdv_read_all(fd[0], &c, 1, hs_now() + 5), -ECONNRESET); /* closed */
    close(fd[0]);
    close(rep);
    close(rep2);
    const char *log = srv_close(&f);
    ck_assert_ptr_nonnull(strstr(log, "rdv: rank 1 rejoins the job (a replacement)\n"));
    ck_assert_ptr_nonnull(strstr(log, "rdv: rank 2 rejoins the job (a replacement)\n"));
    ck_assert_msg(strstr(log, "rendezvous failed") == NULL, "log: %s", log);
    fclose(f.log);
    free(f.logbuf);
}
END_TEST

/* Without opts.rejoin the same late HELLO is refused, as before. */
START_TEST(test_server_no_rejoin_refuses_late_hello)
{
    srv_fixture_t f;
    srv_open(&f, 3, 10, 5);
    int fd[3];
    rejoin_job_start(&f, fd);
    char text[HS_RDV_ERR_MAX + 1];
    int rep = raw_hello(&f, 1, 3, "newhost");
    ck_assert(read_answer(rep, text, sizeof text, 5));
    ck_assert_msg(strstr(text, "rank 1 already connected"), "%s", text);
    close(rep);
    ck_assert(quiet_fd(fd[0]) && quiet_fd(fd[2]));
    ck_assert_int_eq(hs_rdv_server_state(f.s), 0);
    raw_send(fd[0], HS_RDV_BYE, 0, 0, NULL, 0);
    raw_send(fd[2], HS_RDV_BYE, 2, 0, NULL, 0);
    struct pollfd pf = {.fd = hs_rdv_server_event_fd(f.s), .events = POLLIN};
    ck_assert_int_eq(poll(&pf, 1, 5000), 1);
    ck_assert_int_eq(hs_rdv_server_state(f.s), 1);
    close(fd[0]);
    close(fd[2]);
    const char *log = srv_close(&f);
    ck_assert_msg(strstr(log, "rejoins") == NULL, "log: %s", log);
    fclose(f.log);
    free(f.logbuf);
}
END_TEST

static Suite *rendezvous_suite(void)
{
    Suite *s = suite_create("rendezvous");
    TCase *tb = tcase_create("boot_and_server");
    tcase_set_timeout(tb, 30);
    tcase_add_test(tb, test_boot_single_world);
    tcase_add_test(tb, test_boot_fixed);
    tcase_add_test(tb, test_boot_env_errors);
    tcase_add_test(tb, test_server_rounds_and_state);
    tcase_add_test(tb, test_server_rejects_bad_input);
    tcase_add_test(tb, test_server_timeouts_and_departures);
    tcase_add_test(tb, test_hdr_lengths_overflow);
    tcase_add_test(tb, test_client_checks_length_first);
    tcase_add_test(tb, test_server_admits_job_first);
    tcase_add_test(tb, test_server_rejoin_replays_rounds);
    tcase_add_test(tb, test_server_no_rejoin_refuses_late_hello);
    suite_add_tcase(s, tb);
    return s;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    SRunner *sr = srunner_create(rendezvous_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
