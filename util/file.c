/*
 * util/file.c — writing and reading files in directories another user may share
 * (hearsay/file.h): temporaries created O_EXCL | O_NOFOLLOW under unpredictable names and
 * renamed into place, secrets 0600, readers that refuse FIFOs, devices and oversized files.
 */
#include "hearsay/file.h"

#include "hearsay/common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TMP_TRIES 64

static const char *type_name(mode_t m)
{
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISLNK(m)) return "a symbolic link";
    return "not a regular file";
}

/* 64 unpredictable bits (getrandom; the clock, pid and a counter if it fails). */
static uint64_t tmp_bits(void)
{
    static atomic_ulong counter;
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) == (ssize_t)sizeof v) return v;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    v = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ULL ^ (uint64_t)ts.tv_sec << 20 ^
        (uint64_t)getpid() << 40 ^ atomic_fetch_add(&counter, 1);
    return v;
}

/* Create a fresh temporary beside `path`: DIR/.BASE.tmp-XXXXXXXXXXXX. Returns the fd; *tmp
 * the name (malloc'd). */
static int make_tmp(const char *path, unsigned flags, char **tmp)
{
    *tmp = NULL;
    if (!path || !*path) return HS_ERR(-EINVAL, "empty file name");
    const char *slash = strrchr(path, '/');
    size_t dlen = slash ? (size_t)(slash - path) + 1 : 0;
    const char *base = slash ? slash + 1 : path;
    if (!*base) return HS_ERR(-EISDIR, "%s: names a directory, not a file", path);
    /* Never rename over a device, a FIFO, a socket or a directory (/dev/full as root would
     * lose its device node); a symlink at the name is replaced, never followed. */
    struct stat sb;
    if (lstat(path, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISLNK(sb.st_mode))
        return HS_ERR(S_ISDIR(sb.st_mode) ? -EISDIR : -EINVAL,
                      "cannot write %s: it is %s, and only a regular file is written", path,
                      type_name(sb.st_mode));
    size_t cap = strlen(path) + 32;
    char *name = malloc(cap);
    if (!name) return HS_ERR(-ENOMEM, "out of memory");
    mode_t mode = (flags & HS_FILE_SECRET) ? 0600 : 0666; /* less the umask, as fopen */
    int e = EEXIST;
    for (int i = 0; i < TMP_TRIES; i++) {
        snprintf(name, cap, "%.*s.%s.tmp-%012llx", (int)dlen, path, base,
                 (unsigned long long)(tmp_bits() & 0xffffffffffffULL));
        int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd >= 0) {
            *tmp = name;
            return fd;
        }
        e = errno;
        if (e != EEXIST) break;
    }
    free(name);
    if (e == ENOENT) return HS_ERR(-e, "cannot create %s: its directory does not exist", path);
    return HS_ERR(-e, "cannot create a temporary file beside %s: %s", path, strerror(e));
}

/* fsync the directory holding path (best effort: some file systems refuse). */
static void sync_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir) return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    if (fd < 0) return;
    (void)fsync(fd);
    close(fd);
}

int hs_wfile_open(hs_wfile_t *w, const char *path, unsigned flags)
{
    memset(w, 0, sizeof *w);
    char *tmp = NULL;
    int fd = make_tmp(path, flags, &tmp);
    if (fd < 0) return fd;
    w->f = fdopen(fd, "wb");
    w->path = strdup(path);
    if (!w->f || !w->path) {
        if (w->f)
            fclose(w->f);
        else
            close(fd);
        unlink(tmp);
        free(tmp);
        free(w->path);
        memset(w, 0, sizeof *w);
        return HS_ERR(-ENOMEM, "out of memory opening %s", path);
    }
    w->tmp = tmp;
    w->flags = flags;
    return 0;
}

void hs_wfile_abort(hs_wfile_t *w)
{
    if (!w) return;
    if (w->f) fclose(w->f);
    if (w->tmp) unlink(w->tmp);
    free(w->tmp);
    free(w->path);
    memset(w, 0, sizeof *w);
}

int hs_wfile_commit(hs_wfile_t *w)
{
    if (!w->f) return HS_ERR(-EBADF, "commit of a file that is not open");
    int ok = fflush(w->f) == 0 && !ferror(w->f);
    int e = ok ? 0 : (errno ? errno : EIO);
    if (ok && (w->flags & HS_FILE_SYNC) && fsync(fileno(w->f)) != 0) {
        ok = 0;
        e = errno;
    }
    if (fclose(w->f) != 0 && ok) {
        ok = 0;
        e = errno;
    }
    w->f = NULL;
    if (ok && rename(w->tmp, w->path) != 0) {
        ok = 0;
        e = errno;
    }
    int rc = 0;
    if (!ok) {
        rc = HS_ERR(-e, "writing %s failed: %s", w->path, strerror(e));
        unlink(w->tmp);
    } else if (w->flags & HS_FILE_SYNC) {
        sync_dir(w->path); /* the rename itself survives a power cut */
    }
    free(w->tmp);
    free(w->path);
    memset(w, 0, sizeof *w);
    return rc;
}

int hs_file_write(const char *path, const void *data, size_t len, unsigned flags)
{
    hs_wfile_t w;
    HS_TRY(hs_wfile_open(&w, path, flags));
    if (len && fwrite(data, 1, len, w.f) != len) {
        int e = errno ? errno : EIO;
        hs_wfile_abort(&w);
        return HS_ERR(-e, "writing %s failed: %s", path, strerror(e));
    }
    return hs_wfile_commit(&w);
}

int hs_file_create(FILE **out, const char *path, unsigned flags)
{
    *out = NULL;
    char *tmp = NULL;
    int fd = make_tmp(path, flags, &tmp);
    if (fd < 0) return fd;
    if (rename(tmp, path) != 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        free(tmp);
        return HS_ERR(-e, "cannot create %s: %s", path, strerror(e));
    }
    free(tmp);
    if (!(*out = fdopen(fd, "wb"))) {
        close(fd);
        return HS_ERR(-ENOMEM, "out of memory opening %s", path);
    }
    return 0;
}

int hs_file_reopen(FILE **out, const char *path, const char *mode)
{
    *out = NULL;
    int append = mode[0] == 'a';
    int fd = open(path, (append ? O_WRONLY | O_APPEND : O_RDWR) | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == ELOOP) return HS_ERR(-e, "%s: is a symbolic link: refused", path);
        return HS_ERR(-e, "cannot open %s: %s", path, strerror(e));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return HS_ERR(-EINVAL, "%s: %s: refused", path, type_name(sb.st_mode));
    }
    if (!(*out = fdopen(fd, mode))) {
        int e = errno;
        close(fd);
        return HS_ERR(-e, "cannot open %s: %s", path, strerror(e));
    }
    return 0;
}

int hs_file_open_read(const char *path, const char *what, long long max_bytes, long long *size)
{
    if (size) *size = 0;
    if (!path || !*path) return HS_ERR(-EINVAL, "%s: the file name is empty", what);
    /* O_NONBLOCK: a FIFO with no writer would block the open itself. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        return HS_ERR(-e, "cannot open the %s %s: %s", what, path, strerror(e));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return HS_ERR(-e, "cannot stat the %s %s: %s", what, path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return HS_ERR(-EINVAL, "the %s %s is %s: only a regular file is read", what, path,
                      type_name(sb.st_mode));
    }
    if (max_bytes >= 0 && (long long)sb.st_size > max_bytes) {
        close(fd);
        return HS_ERR(-EFBIG, "the %s %s: %lld bytes, above the %lld-byte bound for %ss", what,
                      path, (long long)sb.st_size, max_bytes, what);
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
        int e = errno;
        close(fd);
        return HS_ERR(-e, "cannot read the %s %s: %s", what, path, strerror(e));
    }
    if (size) *size = (long long)sb.st_size;
    return fd;
}

int hs_file_fopen_read(FILE **out, const char *path, const char *what, long long max_bytes)
{
    *out = NULL;
    int fd = hs_file_open_read(path, what, max_bytes, NULL);
    if (fd < 0) return fd;
    if (!(*out = fdopen(fd, "rb"))) {
        int e = errno;
        close(fd);
        return HS_ERR(-e, "cannot read the %s %s: %s", what, path, strerror(e));
    }
    return 0;
}

int hs_file_read_all(const char *path, const char *what, long long max_bytes, char **buf,
                     size_t *len)
{
    *buf = NULL;
    if (len) *len = 0;
    long long size = 0;
    int fd = hs_file_open_read(path, what, max_bytes, &size);
    if (fd < 0) return fd;
    /* Read at most the bound (the file may grow while it is read): one byte past it tells. */
    size_t cap = (size_t)size + 1, got = 0;
    char *b = malloc(cap + 1);
    if (!b) {
        close(fd);
        return HS_ERR(-ENOMEM, "out of memory reading the %s %s", what, path);
    }
    for (;;) {
        if (got == cap) break;
        ssize_t r = read(fd, b + got, cap - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            free(b);
            return HS_ERR(-e, "reading the %s %s failed: %s", what, path, strerror(e));
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (got == cap && max_bytes >= 0 && (long long)got > max_bytes) {
        free(b);
        return HS_ERR(-EFBIG, "the %s %s grew past the bound of %lld bytes while read", what, path,
                      max_bytes);
    }
    b[got] = '\0';
    *buf = b;
    if (len) *len = got;
    return 0;
}

int hs_file_same(const char *a, const char *b)
{
    struct stat sa, sb;
    if (stat(a, &sa) != 0 || stat(b, &sb) != 0) return 0;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}
