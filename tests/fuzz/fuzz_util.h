/*
 * tests/fuzz/fuzz_util.h — helpers shared by the libFuzzer harnesses (tests/fuzz/fuzz_*.c).
 *
 * A harness is one file defining LLVMFuzzerTestOneInput; it is built by `make fuzz` with clang
 * -fsanitize=fuzzer,address,undefined against every libhearsay source (tests/fuzz/Makefile.inc)
 * and run by scripts/fuzz.sh. Rules every harness follows:
 *   - a rejected input (a negative return, usually -EINVAL) is a normal outcome: only a crash,
 *     a sanitizer report, a leak, a hang or a broken documented invariant (FZ_CHECK) is a bug;
 *   - no file is left behind: inputs that must be files live in memory (memfd), read through
 *     /proc/self/fd/N; a harness that must write uses FZ_TMPDIR and removes what it wrote;
 *   - nothing outside the input is read (no file: specs, no --config FILE).
 *
 * The input is split with a cursor (fz_t): bytes and small numbers from the front, the rest as
 * text or as a file's content.
 */
#ifndef HEARSAY_TESTS_FUZZ_UTIL_H
#define HEARSAY_TESTS_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* A broken invariant: print it and abort, which libFuzzer reports as a crash with the input. */
#define FZ_CHECK(cond, ...)                                                                        \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: invariant broken: %s: ", __FILE__, __LINE__, #cond);           \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* A cursor over the input. */
typedef struct fz {
    const uint8_t *p;
    size_t n;
} fz_t;

static inline fz_t fz_init(const uint8_t *data, size_t size)
{
    fz_t f = {data, size};
    return f;
}

/* The next byte (0 once the input is used up). */
static inline uint8_t fz_u8(fz_t *f)
{
    if (!f->n) return 0;
    f->n--;
    return *f->p++;
}

/* The next 4 bytes, little-endian (missing bytes read as 0). */
static inline uint32_t fz_u32(fz_t *f)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)fz_u8(f) << (8 * i);
    return v;
}

static inline uint64_t fz_u64(fz_t *f)
{
    uint64_t lo = fz_u32(f);
    return lo | (uint64_t)fz_u32(f) << 32;
}

/* A number in [lo, hi] from the next byte. */
static inline int fz_range(fz_t *f, int lo, int hi)
{
    return lo + (int)(fz_u8(f) % (unsigned)(hi - lo + 1));
}

/* The rest of the input as a new NUL-terminated string (an embedded NUL ends it early, as it
 * would for any C string the program receives). Never NULL (aborts when out of memory). */
static inline char *fz_rest_str(fz_t *f)
{
    char *s = malloc(f->n + 1);
    if (!s) abort();
    memcpy(s, f->p, f->n);
    s[f->n] = '\0';
    f->p += f->n;
    f->n = 0;
    return s;
}

/* The next bytes up to (not including) `sep`, or the rest when it is absent, as a new string;
 * the separator is consumed. */
static inline char *fz_until(fz_t *f, char sep)
{
    const uint8_t *e = memchr(f->p, sep, f->n);
    size_t len = e ? (size_t)(e - f->p) : f->n;
    char *s = malloc(len + 1);
    if (!s) abort();
    memcpy(s, f->p, len);
    s[len] = '\0';
    f->p += len + (e ? 1 : 0);
    f->n -= len + (e ? 1 : 0);
    return s;
}

/* A file in memory holding the given bytes: an anonymous memfd, named for the program by
 * fz_file_path. Reused between inputs (rewritten each time); never on disk. */
typedef struct fz_file {
    int fd;
    char path[64];
} fz_file_t;

static inline void fz_file_set(fz_file_t *ff, const void *data, size_t len)
{
    if (ff->fd <= 0) {
        ff->fd = memfd_create("hearsay-fuzz", MFD_CLOEXEC);
        if (ff->fd < 0) {
            perror("memfd_create");
            abort();
        }
        snprintf(ff->path, sizeof ff->path, "/proc/self/fd/%d", ff->fd);
    }
    if (ftruncate(ff->fd, 0) != 0) abort();
    const uint8_t *p = data;
    size_t done = 0;
    while (done < len) {
        ssize_t w = pwrite(ff->fd, p + done, len - done, (off_t)done);
        if (w <= 0) abort();
        done += (size_t)w;
    }
}

/* A private directory in $TMPDIR (else /tmp) for harnesses that must write files (created on
 * first use, removed at exit; whatever a harness writes there it removes itself). */
static char fz_tmpdir_path[512];

static inline void fz_tmpdir_remove(void)
{
    if (fz_tmpdir_path[0]) rmdir(fz_tmpdir_path);
}

static inline const char *fz_tmpdir(void)
{
    if (!fz_tmpdir_path[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(fz_tmpdir_path, sizeof fz_tmpdir_path, "%s/hs-fuzz-XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(fz_tmpdir_path)) {
            perror("mkdtemp");
            abort();
        }
        atexit(fz_tmpdir_remove);
    }
    return fz_tmpdir_path;
}

#endif
