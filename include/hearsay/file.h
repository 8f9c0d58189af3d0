/*
 * hearsay/file.h — writing and reading files in directories another user may share.
 *
 * Writing: every file Hearsay writes is first created under a fresh, unpredictable name in
 * the target's own directory with O_CREAT | O_EXCL | O_NOFOLLOW (so a symlink or file planted
 * at any name is never opened, followed or truncated) and then renamed over the target (so a
 * symlink planted at the target's name is replaced, never written through). Files that hold
 * a secret (HS_FILE_SECRET: the --env-file with the job key) are created 0600; the others
 * 0666 less the umask (as fopen would).
 *
 * Reading: a file is opened without waiting (O_NONBLOCK: a FIFO with no writer does not
 * hang the open), refused unless it is a regular file of at most the stated size, and only
 * then read (blocking again).
 */
#ifndef HEARSAY_FILE_H
#define HEARSAY_FILE_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    HS_FILE_SECRET = 1 << 0, /* created 0600 (the job key) */
    HS_FILE_SYNC = 1 << 1,   /* fsync the file before the rename and the directory after */
};

/* A file being written: `f` goes to a temporary in the target's directory until commit. */
typedef struct hs_wfile {
    FILE *f;
    char *path; /* the target */
    char *tmp;  /* the temporary (NULL once renamed or removed) */
    unsigned flags;
} hs_wfile_t;

/* Create the temporary for `path` (a fresh name, O_EXCL | O_NOFOLLOW, in path's directory).
 * On error *w is left closed (hs_wfile_abort is a no-op). */
int hs_wfile_open(hs_wfile_t *w, const char *path, unsigned flags);
/* Flush (and with HS_FILE_SYNC fsync), close, and rename the temporary over the target.
 * On any error the temporary is removed and the target left as it was. Frees *w. */
int hs_wfile_commit(hs_wfile_t *w);
/* Close and remove the temporary; the target is left as it was. Safe on a closed *w. */
void hs_wfile_abort(hs_wfile_t *w);

/* The whole of `data` into `path` through hs_wfile (one call). */
int hs_file_write(const char *path, const void *data, size_t len, unsigned flags);

/* A file written as it goes (a CSV a run appends to): created empty under a fresh name and
 * renamed over `path` at once, then returned open for writing ("w"); *out NULL on error.
 * Whatever was at `path` (a planted symlink included) is replaced, never written through. */
int hs_file_create(FILE **out, const char *path, unsigned flags);

/* Open an existing file to add to or change it in place (mode "ab" or "r+b"): never through
 * a symlink (O_NOFOLLOW) and only a regular file. */
int hs_file_reopen(FILE **out, const char *path, const char *mode);

/* Open `path` for reading: without waiting on a FIFO, a regular file only, of at most
 * `max_bytes` (< 0: no bound). `what` names the file in the messages ("config file").
 * Returns the descriptor (>= 0, O_CLOEXEC, blocking) or a negative code; *size its size. */
int hs_file_open_read(const char *path, const char *what, long long max_bytes, long long *size);
/* hs_file_open_read, as a FILE ("rb"). */
int hs_file_fopen_read(FILE **out, const char *path, const char *what, long long max_bytes);
/* The whole file, NUL-terminated (*len excludes the NUL), through hs_file_open_read. */
int hs_file_read_all(const char *path, const char *what, long long max_bytes, char **buf,
                     size_t *len);

/* 1 when a and b name the same existing file (device and inode), 0 when not (or either is
 * missing). */
int hs_file_same(const char *a, const char *b);

#ifdef __cplusplus
}
#endif

#endif /* HEARSAY_FILE_H */
