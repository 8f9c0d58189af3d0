/* tests/test_util.c — errors, parsing and the seeded RNG. */
#include "hearsay/common.h"
#include "hearsay/file.h"
#include "hearsay/json.h"
#include "hearsay/rng.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

START_TEST(test_error_message_and_prefix)
{
    hs_error_clear();
    int rc = HS_ERR(-EINVAL, "bad value %d", 7);
    ck_assert_int_eq(rc, -EINVAL);
    ck_assert_str_eq(hs_last_error(), "bad value 7");
    ck_assert_ptr_nonnull(strstr(hs_last_error_where(), "test_util.c:"));
    hs_error_prefix("reading %s", "x.cfg");
    ck_assert_str_eq(hs_last_error(), "reading x.cfg: bad value 7");
    /* A non-negative code is never reported as success. */
    ck_assert_int_lt(HS_ERR(5, "oops"), 0);
}
END_TEST

START_TEST(test_parse_numbers)
{
    long v;
    double d;
    ck_assert_int_eq(hs_parse_long("42", 0, 100, "--epochs", &v), 0);
    ck_assert_int_eq(v, 42);
    ck_assert_int_eq(hs_parse_long("42x", 0, 100, "--epochs", &v), -EINVAL);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "--epochs"));
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "42x"));
    ck_assert_int_eq(hs_parse_long("101", 0, 100, "--epochs", &v), -EINVAL);
    ck_assert_int_eq(hs_parse_long("", 0, 100, "--epochs", &v), -EINVAL);
    ck_assert_int_eq(hs_parse_double("0.5", 0, 1, "--lr", &d), 0);
    ck_assert(d == 0.5);
    ck_assert_int_eq(hs_parse_double("nan", 0, 1, "--lr", &d), -EINVAL);
    ck_assert_int_eq(hs_parse_double("1e9", 0, 1, "--lr", &d), -EINVAL);
}
END_TEST

START_TEST(test_rng_repeatable_and_moments)
{
    hs_rng_t a, b, c;
    hs_rng_seed(&a, 123, 0);
    hs_rng_seed(&b, 123, 0);
    hs_rng_seed(&c, 123, 1);
    int same_c = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t x = hs_rng_u64(&a), y = hs_rng_u64(&b), z = hs_rng_u64(&c);
        ck_assert(x == y);
        same_c += (x == z);
    }
    ck_assert_int_lt(same_c, 2);
    const int n = 200000;
    double s = 0, s2 = 0, e = 0, g = 0;
    for (int i = 0; i < n; i++) {
        double x = hs_rng_normal(&a);
        s += x;
        s2 += x * x;
        e += hs_rng_exponential(&a, 2.0);
        g += hs_rng_gamma(&a, 0.5);
    }
    ck_assert(fabs(s / n) < 0.01);
    ck_assert(fabs(s2 / n - 1.0) < 0.02);
    ck_assert(fabs(e / n - 2.0) < 0.03);
    ck_assert(fabs(g / n - 0.5) < 0.01);
    int counts[7] = {0};
    for (int i = 0; i < 70000; i++) counts[hs_rng_below(&a, 7)]++;
    for (int i = 0; i < 7; i++) ck_assert(abs(counts[i] - 10000) < 500);
}
END_TEST

START_TEST(test_shuffle_is_permutation)
{
    hs_rng_t r;
    hs_rng_seed(&r, 9, 0);
    int a[50], seen[50] = {0}, moved = 0;
    for (int i = 0; i < 50; i++) a[i] = i;
    hs_rng_shuffle_int(&r, a, 50);
    for (int i = 0; i < 50; i++) {
        seen[a[i]]++;
        moved += a[i] != i;
    }
    for (int i = 0; i < 50; i++) ck_assert_int_eq(seen[i], 1);
    ck_assert_int_gt(moved, 25);
}
END_TEST

START_TEST(test_json_writers)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    hs_json_string(f, "a\"b\\c\n");
    fputc(' ', f);
    hs_json_string(f, NULL);
    fputc(' ', f);
    hs_json_number(f, 0.25);
    fputc(' ', f);
    hs_json_number(f, NAN);
    fputc(' ', f);
    hs_json_number(f, -INFINITY);
    fclose(f);
    ck_assert_str_eq(buf, "\"a\\\"b\\\\c\\n\" \"\" 0.25 null null");
    free(buf);
}
END_TEST

/* util/file.c (issue 28 items 5 and 6): a write replaces what was planted at the name and
 * never writes through it; a secret is 0600; devices, FIFOs and oversized files are refused
 * for reading at once; a write never replaces a device or FIFO. */
START_TEST(test_file_write_and_read)
{
    char dir[] = "/tmp/hs_util_file_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char victim[256], name[256], fifo[256], big[256];
    snprintf(victim, sizeof victim, "%s/victim", dir);
    snprintf(name, sizeof name, "%s/out", dir);
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    snprintf(big, sizeof big, "%s/big", dir);
    ck_assert_int_eq(hs_file_write(victim, "VICTIM", 6, 0), 0);
    ck_assert_int_eq(symlink(victim, name), 0);
    ck_assert_int_eq(hs_file_write(name, "key", 3, HS_FILE_SECRET | HS_FILE_SYNC), 0);
    struct stat sb;
    ck_assert_int_eq(lstat(name, &sb), 0);
    ck_assert(S_ISREG(sb.st_mode));
    ck_assert_int_eq(sb.st_mode & 0777, 0600);
    char *buf = NULL;
    size_t len = 0;
    ck_assert_int_eq(hs_file_read_all(victim, "file", 100, &buf, &len), 0);
    ck_assert_str_eq(buf, "VICTIM"); /* not written through the symlink */
    free(buf);
    ck_assert_int_eq(hs_file_read_all(name, "file", 100, &buf, &len), 0);
    ck_assert_uint_eq(len, 3);
    ck_assert_str_eq(buf, "key");
    free(buf);
    /* created and renamed at once, then appended to (never through a symlink) */
    FILE *f = NULL;
    ck_assert_int_eq(unlink(name), 0);
    ck_assert_int_eq(symlink(victim, name), 0);
    ck_assert_int_eq(hs_file_create(&f, name, 0), 0);
    fputs("a", f);
    fclose(f);
    ck_assert_int_eq(hs_file_reopen(&f, name, "ab"), 0);
    fputs("b", f);
    fclose(f);
    ck_assert_int_eq(hs_file_read_all(name, "file", 100, &buf, &len), 0);
    ck_assert_str_eq(buf, "ab");
    free(buf);
    ck_assert_int_eq(unlink(name), 0);
    ck_assert_int_eq(symlink(victim, name), 0);
    ck_assert_int_lt(hs_file_reopen(&f, name, "ab"), 0);
    /* reading: a FIFO and a device refused at once, a file above its bound */
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    double t = hs_now();
    ck_assert_int_eq(hs_file_read_all(fifo, "part", 100, &buf, &len), -EINVAL);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "is a FIFO: only a regular file is read"));
    ck_assert_int_eq(hs_file_read_all("/dev/zero", "part", 100, &buf, &len), -EINVAL);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "a character device"));
    ck_assert_double_lt(hs_now() - t, 1.0);
    ck_assert_int_eq(hs_file_write(big, "0123456789", 10, 0), 0);
    ck_assert_int_eq(hs_file_read_all(big, "thing", 9, &buf, &len), -EFBIG);
    ck_assert_ptr_nonnull(strstr(hs_last_error(), "10 bytes, above the 9-byte bound for things"));
    /* a write never replaces a FIFO (or a directory) */
    ck_assert_int_lt(hs_file_write(fifo, "x", 1, 0), 0);
    ck_assert_int_eq(lstat(fifo, &sb), 0);
    ck_assert(S_ISFIFO(sb.st_mode));
    ck_assert_int_lt(hs_file_write(dir, "x", 1, 0), 0);
    ck_assert_int_eq(hs_file_same(big, big), 1);
    ck_assert_int_eq(hs_file_same(big, victim), 0);
    /* nothing temporary left */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A %s | grep tmp)\"", dir);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("util");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_error_message_and_prefix);
    tcase_add_test(tc, test_parse_numbers);
    tcase_add_test(tc, test_rng_repeatable_and_moments);
    tcase_add_test(tc, test_shuffle_is_permutation);
    tcase_add_test(tc, test_json_writers);
    tcase_add_test(tc, test_file_write_and_read);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
