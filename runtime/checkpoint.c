/* runtime/checkpoint.c — one rank's checkpoint file: write atomically, read and verify. */
#include "hearsay/checkpoint.h"

#include "hearsay/common.h"
#include "hearsay/env.h"
#include "hearsay/file.h"

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert(sizeof(hs_ckpt_hdr_t) == 96, "checkpoint header v3 is 96 bytes");
_Static_assert(offsetof(hs_ckpt_hdr_t, loss_scale) + 8 == 88, "checkpoint header v2 is 88 bytes");

uint64_t hs_ckpt_fnv1a(const void *p, size_t n, uint64_t h)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) {
        h ^= c[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

int hs_ckpt_path(char *buf, size_t cap, const char *dir, int rank)
{
    int len = snprintf(buf, cap, "%s/ckpt/rank-%d.bin", dir, rank);
    if (len < 0 || (size_t)len >= cap)
        return HS_ERR(-ENAMETOOLONG, "checkpoint path under %s is too long", dir);
    return 0;
}

static void fill_hdr(hs_ckpt_hdr_t *h, const hs_ckpt_t *c)
{
    memset(h, 0, sizeof *h);
    memcpy(h->magic, HS_CKPT_MAGIC, 4);
    h->version = HS_CKPT_VERSION;
    h->rank = c->rank;
    h->size = c->size;
    h->iteration = c->iteration;
    memcpy(h->algo, c->algo, strnlen(c->algo, HS_CKPT_ALGO_MAX - 1)); /* NUL-padded */
    h->num_params = c->num_params;
    h->params_bytes = (uint64_t)c->num_params * sizeof(float);
    h->velocity_bytes = c->velocity ? (uint64_t)c->velocity_len * sizeof(float) : 0;
    h->state_bytes = c->state ? c->state_bytes : 0;
    h->bn_bytes = c->bn ? (uint64_t)c->bn_len * sizeof(float) : 0;
    h->loss_scale = c->loss_scale;
    h->scale_good = c->scale_good;
}

/* A version 2 header: version 3's without loss_scale and scale_good (88 bytes). */
#define HDR_V2_BYTES (offsetof(hs_ckpt_hdr_t, loss_scale) + sizeof(uint64_t))

/* The header's size in a part of version v (2 or 3). */
static size_t hdr_bytes(uint32_t v)
{
    return v == 2 ? HDR_V2_BYTES : sizeof(hs_ckpt_hdr_t);
}

/* The header of a part as its file holds it (version 2: without the loss scale's fields), its
 * checksum field zeroed: what the checksum covers. */
static size_t hdr_image(const hs_ckpt_hdr_t *h, unsigned char *img)
{
    hs_ckpt_hdr_t z = *h;
    z.checksum = 0;
    if (h->version != 2) {
        memcpy(img, &z, sizeof z);
        return sizeof z;
    }
    memcpy(img, &z, offsetof(hs_ckpt_hdr_t, loss_scale));
    memset(img + offsetof(hs_ckpt_hdr_t, loss_scale), 0, sizeof(uint64_t));
    return HDR_V2_BYTES;
}

/* A part's header from the first n bytes of its file: version 3 as it is, version 2 with the
 * loss scale's fields zero. 0, or -1 when n is shorter than the header of the version its
 * bytes 4..7 say (the magic and the version are the caller's to check). */
static int hdr_parse(const unsigned char *buf, size_t n, hs_ckpt_hdr_t *h)
{
    memset(h, 0, sizeof *h);
    if (n < 8) return -1;
    memcpy(h, buf, 8); /* magic, version */
    if (n < hdr_bytes(h->version)) return -1;
    if (h->version != 2) {
        memcpy(h, buf, sizeof *h);
        return 0;
    }
    memcpy(h, buf, offsetof(hs_ckpt_hdr_t, loss_scale));
    memcpy(&h->checksum, buf + HDR_V2_BYTES - sizeof h->checksum, sizeof h->checksum);
    return 0;
}

static uint64_t checksum(const hs_ckpt_hdr_t *h, const void *params, const void *vel,
                         const void *state, const void *bn)
{
    unsigned char img[sizeof(hs_ckpt_hdr_t)];
    uint64_t s = hs_ckpt_fnv1a(img, hdr_image(h, img), HS_FNV1A_INIT);
    s = hs_ckpt_fnv1a(params, h->params_bytes, s);
    if (h->velocity_bytes) s = hs_ckpt_fnv1a(vel, h->velocity_bytes, s);
    if (h->state_bytes) s = hs_ckpt_fnv1a(state, h->state_bytes, s);
    if (h->bn_bytes) s = hs_ckpt_fnv1a(bn, h->bn_bytes, s);
    return s;
}

int hs_ckpt_write(const char *path, const hs_ckpt_t *c)
{
    hs_ckpt_hdr_t h;
    fill_hdr(&h, c);
    h.checksum = checksum(&h, c->params, c->velocity, c->state, c->bn);
    /* A fresh temporary beside path (O_EXCL | O_NOFOLLOW), synced, renamed over path, and the
     * directory synced (hearsay/file.h). */
    hs_wfile_t w;
    int rc = hs_wfile_open(&w, path, HS_FILE_SYNC);
    if (rc < 0) {
        hs_error_prefix("checkpoint");
        return rc;
    }
    FILE *f = w.f;
    int ok =
        fwrite(&h, sizeof h, 1, f) == 1 &&
        fwrite(c->params, 1, h.params_bytes, f) == h.params_bytes &&
        (!h.velocity_bytes || fwrite(c->velocity, 1, h.velocity_bytes, f) == h.velocity_bytes) &&
        (!h.state_bytes || fwrite(c->state, 1, h.state_bytes, f) == h.state_bytes) &&
        (!h.bn_bytes || fwrite(c->bn, 1, h.bn_bytes, f) == h.bn_bytes);
    ok = ok && fflush(f) == 0;
    if (!ok) {
        int err = errno;
        hs_wfile_abort(&w);
        return HS_ERR(-EIO, "writing checkpoint %s failed: %s", path, strerror(err));
    }
    double pause = 0;
    if (hs_env_double("HS_TEST_CKPT_PAUSE", &pause) > 0 && pause > 0) hs_sleep(pause);
    rc = hs_wfile_commit(&w);
    if (rc < 0) hs_error_prefix("checkpoint");
    return rc;
}

void hs_ckpt_free(hs_ckpt_t *c)
{
    if (!c) return;
    free(c->params);
    free(c->velocity);
    free(c->state);
    free(c->bn);
    memset(c, 0, sizeof *c);
}

int hs_ckpt_read(const char *path, hs_ckpt_t *c)
{
    memset(c, 0, sizeof *c);
    FILE *f = NULL;
    /* A regular file only: a FIFO planted as a part is refused, not waited on. */
    HS_TRY(hs_file_fopen_read(&f, path, "checkpoint", -1));
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        int err = errno;
        fclose(f);
        return HS_ERR(-err, "cannot stat checkpoint %s: %s", path, strerror(err));
    }
    uint64_t fsize = (uint64_t)st.st_size;
    hs_ckpt_hdr_t h;
    int rc = 0;
    unsigned char *pay = NULL, hb[sizeof(hs_ckpt_hdr_t)];
    size_t got = fread(hb, 1, sizeof hb, f);
    if (got >= 8 && memcmp(hb, HS_CKPT_MAGIC, 4) != 0) {
        rc = HS_ERR(-EINVAL, "%s is not a hearsay checkpoint (bad magic, want \"%s\")", path,
                    HS_CKPT_MAGIC);
        goto out;
    }
    if (got >= 8) {
        uint32_t v;
        memcpy(&v, hb + 4, sizeof v);
        if (v != HS_CKPT_VERSION && v != 2) {
            rc = HS_ERR(-EINVAL, "checkpoint %s has version %u; this build reads versions 2 and %u",
                        path, (unsigned)v, HS_CKPT_VERSION);
            goto out;
        }
    }
    if (hdr_parse(hb, got, &h) < 0) {
        rc = HS_ERR(-EINVAL, "checkpoint %s is truncated: %llu bytes, shorter than its header",
                    path, (unsigned long long)fsize);
        goto out;
    }
    const size_t hsize = hdr_bytes(h.version);
    if (!(h.loss_scale >= 0) || !isfinite(h.loss_scale) || h.scale_good > 1000000) {
        rc = HS_ERR(-EINVAL, "checkpoint %s has an inconsistent header (corrupt)", path);
        goto out;
    }
    uint64_t np = h.num_params;
    if (h.params_bytes != np * sizeof(float) ||
        (h.velocity_bytes != 0 && h.velocity_bytes != np * sizeof(float)) ||
        h.state_bytes > ((uint64_t)1 << 40) || np > ((uint64_t)1 << 40) ||
        h.bn_bytes > ((uint64_t)1 << 40) || h.bn_bytes % sizeof(float) || h.size < 1 ||
        h.rank < 0 || h.rank >= h.size || memchr(h.algo, 0, sizeof h.algo) == NULL) {
        rc = HS_ERR(-EINVAL, "checkpoint %s has an inconsistent header (corrupt)", path);
        goto out;
    }
    if (h.iteration < 0 || h.iteration > HS_CKPT_ITER_MAX) {
        rc = HS_ERR(-EINVAL,
                    "checkpoint %s says iteration %lld: impossible (0 .. 2^48; corrupt or not "
                    "written by hearsay)",
                    path, (long long)h.iteration);
        goto out;
    }
    uint64_t want = hsize + h.params_bytes + h.velocity_bytes + h.state_bytes + h.bn_bytes;
    if (fsize != want) {
        rc = HS_ERR(-EINVAL, "checkpoint %s is %s: %llu bytes, its header says %llu", path,
                    fsize < want ? "truncated" : "too long", (unsigned long long)fsize,
                    (unsigned long long)want);
        goto out;
    }
    size_t pn = (size_t)(want - hsize);
    if (!(pay = hs_malloc(pn ? pn : 1, "checkpoint payload"))) {
        rc = -ENOMEM;
        goto out;
    }
    if (fseek(f, (long)hsize, SEEK_SET) != 0 || fread(pay, 1, pn, f) != pn) {
        rc = HS_ERR(-EIO, "reading checkpoint %s failed", path);
        goto out;
    }
    const unsigned char *vel = pay + h.params_bytes, *state = vel + h.velocity_bytes;
    const unsigned char *bn = state + h.state_bytes;
    if (checksum(&h, pay, vel, state, bn) != h.checksum) {
        rc = HS_ERR(-EINVAL, "checkpoint %s is corrupt: checksum mismatch", path);
        goto out;
    }
    c->rank = h.rank;
    c->size = h.size;
    c->iteration = (long)h.iteration;
    c->loss_scale = h.loss_scale;
    c->scale_good = h.scale_good;
    memcpy(c->algo, h.algo, HS_CKPT_ALGO_MAX);
    c->num_params = (size_t)np;
    c->params = hs_malloc(h.params_bytes ? h.params_bytes : 1, "checkpoint parameters");
    if (h.velocity_bytes) c->velocity = hs_malloc(h.velocity_bytes, "checkpoint velocity");
    if (h.state_bytes) c->state = hs_malloc(h.state_bytes, "checkpoint state");
    if (h.bn_bytes) c->bn = hs_malloc(h.bn_bytes, "checkpoint running statistics");
    if (!c->params || (h.velocity_bytes && !c->velocity) || (h.state_bytes && !c->state) ||
        (h.bn_bytes && !c->bn)) {
        rc = -ENOMEM;
        goto out;
    }
    memcpy(c->params, pay, h.params_bytes);
    if (h.velocity_bytes) memcpy(c->velocity, vel, h.velocity_bytes);
    if (h.state_bytes) memcpy(c->state, state, h.state_bytes);
    c->velocity_len = h.velocity_bytes / sizeof(float);
    c->state_bytes = h.state_bytes;
    if (h.bn_bytes) memcpy(c->bn, bn, h.bn_bytes);
    c->bn_len = h.bn_bytes / sizeof(float);
out:
    free(pay);
    fclose(f);
    if (rc < 0) hs_ckpt_free(c);
    return rc;
}

int hs_ckpt_save_run(const char *dir, int rank, int size, long iteration, hs_worker_t *w,
                     const hs_algo_ops_t *ops, hs_algo_t *a)
{
    hs_kernels_t *k = hs_worker_kernels(w);
    hs_model_t *m = hs_worker_model(w);
    hs_ckpt_t c = {.rank = rank, .size = size, .iteration = iteration};
    snprintf(c.algo, sizeof c.algo, "%s", ops ? ops->name : "local");
    c.num_params = hs_model_num_params(m);
    if (hs_worker_scale_good(w) >= 0) { /* dynamic scaling's state (0: none kept) */
        c.loss_scale = hs_worker_loss_scale(w);
        c.scale_good = (unsigned)hs_worker_scale_good(w);
    }
    size_t vn = 0;
    float *vel = hs_sgd_velocity(hs_worker_optimizer(w), &vn);
    char path[4096];
    int rc = hs_ckpt_part_path(path, sizeof path, dir, rank, iteration);
    if (rc < 0) return rc;
    char sub[4096];
    snprintf(sub, sizeof sub, "%s/ckpt", dir);
    struct stat sl; /* a symlink planted as DIR/ckpt would carry the parts elsewhere */
    if (lstat(sub, &sl) == 0 && S_ISLNK(sl.st_mode))
        return HS_ERR(-ELOOP, "checkpoint directory %s is a symbolic link: refused", sub);
    HS_TRY(hs_mkdir_p(sub));
    c.params = hs_malloc(c.num_params * sizeof(float) + 1, "checkpoint parameters");
    if (vel && vn) {
        c.velocity_len = vn;
        c.velocity = hs_malloc(vn * sizeof(float), "checkpoint velocity");
    }
    if (ops && a && ops->state_bytes && ops->state_save) c.state_bytes = ops->state_bytes(a);
    if (c.state_bytes) c.state = hs_malloc(c.state_bytes, "checkpoint state");
    if ((c.bn_len = hs_model_num_state(m)))
        c.bn = hs_malloc(c.bn_len * sizeof(float), "checkpoint running statistics");
    if (!c.params || (c.velocity_len && !c.velocity) || (c.state_bytes && !c.state) ||
        (c.bn_len && !c.bn)) {
        rc = -ENOMEM;
        goto out;
    }
    if ((rc = k->ops->to_host(k, c.params, hs_model_params(m), c.num_params * sizeof(float))) < 0)
        goto out;
    if (c.velocity && (rc = k->ops->to_host(k, c.velocity, vel, vn * sizeof(float))) < 0) goto out;
    if (c.state && (rc = ops->state_save(a, c.state)) < 0) goto out;
    if (c.bn && (rc = k->ops->to_host(k, c.bn, hs_model_state(m), c.bn_len * sizeof(float))) < 0)
        goto out;
    rc = hs_ckpt_write(path, &c);
out:
    hs_ckpt_free(&c);
    return rc;
}

int hs_ckpt_load_run(const char *dir, int rank, int size, hs_worker_t *w, const hs_algo_ops_t *ops,
                     hs_algo_t *a, long total_iters, long *iteration)
{
    char path[4096];
    long at = -1;
    int legacy = 0;
    HS_TRY(hs_ckpt_set_find(dir, size, &at, &legacy));
    if (legacy)
        HS_TRY(hs_ckpt_path(path, sizeof path, dir, rank));
    else
        HS_TRY(hs_ckpt_part_path(path, sizeof path, dir, rank, at));
    hs_ckpt_t c;
    HS_TRY(hs_ckpt_read(path, &c));
    if (c.iteration != at) { /* changed since the set was chosen */
        hs_ckpt_free(&c);
        return HS_ERR(-EINVAL, "checkpoint %s changed: iteration %ld, its set's %ld", path,
                      c.iteration, at);
    }
    if (total_iters > 0 && c.iteration > total_iters) {
        int rc = HS_ERR(-EINVAL,
                        "checkpoint %s is at iteration %ld, past the end of this run (%ld "
                        "iterations)",
                        path, c.iteration, total_iters);
        hs_ckpt_free(&c);
        return rc;
    }
    hs_kernels_t *k = hs_worker_kernels(w);
    hs_model_t *m = hs_worker_model(w);
    const char *name = ops ? ops->name : "local";
    size_t vn = 0, sb = 0;
    float *vel = hs_sgd_velocity(hs_worker_optimizer(w), &vn);
    if (!vel) vn = 0;
    if (ops && a && ops->state_bytes && ops->state_load) sb = ops->state_bytes(a);
    int rc = 0;
    if (c.rank != rank || c.size != size)
        rc = HS_ERR(-EINVAL, "checkpoint %s is rank %d of a %d-rank job; this is rank %d of %d",
                    path, c.rank, c.size, rank, size);
    else if (strcmp(c.algo, name) != 0)
        rc = HS_ERR(-EINVAL, "checkpoint %s was written by --algo %s; this run is --algo %s", path,
                    c.algo, name);
    else if (c.num_params != hs_model_num_params(m))
        rc = HS_ERR(-EINVAL, "checkpoint %s holds %zu parameters; --model has %zu", path,
                    c.num_params, hs_model_num_params(m));
    else if (c.velocity_len != vn)
        rc = HS_ERR(-EINVAL,
                    "checkpoint %s has %s velocity and this optimizer %s (--momentum differs)",
                    path, c.velocity_len ? "a" : "no", vn ? "has one" : "has none");
    else if (c.bn_len != hs_model_num_state(m))
        rc = HS_ERR(-EINVAL,
                    "checkpoint %s holds %zu batch-norm running statistics; --model has %zu", path,
                    c.bn_len, hs_model_num_state(m));
    else if (c.state_bytes != sb)
        rc = HS_ERR(-EINVAL,
                    "checkpoint %s has %zu bytes of --algo %s state, this run expects %zu (its "
                    "options differ)",
                    path, c.state_bytes, name, sb);
    if (rc == 0)
        rc = k->ops->to_device(k, hs_model_params(m), c.params, c.num_params * sizeof(float));
    if (rc == 0 && vn) rc = k->ops->to_device(k, vel, c.velocity, vn * sizeof(float));
    if (rc == 0 && c.bn_len)
        rc = k->ops->to_device(k, hs_model_state(m), c.bn, c.bn_len * sizeof(float));
    if (rc == 0 && sb && (rc = ops->state_load(a, c.state)) < 0) hs_error_prefix("%s", path);
    /* the dynamic loss scale where it was (a version 2 part: from its initial value) */
    if (rc == 0 && c.loss_scale > 0 &&
        (rc = hs_worker_scale_restore(w, c.loss_scale, c.scale_good)) < 0)
        hs_error_prefix("%s", path);
    if (rc == 0) rc = hs_worker_seek(w, c.iteration);
    if (rc == 0 && iteration) *iteration = c.iteration;
    hs_ckpt_free(&c);
    return rc;
}

/* --- checkpoint sets -------------------------------------------------------------------- */

int hs_ckpt_part_path(char *buf, size_t cap, const char *dir, int rank, long iteration)
{
    int len = snprintf(buf, cap, "%s/ckpt/rank-%d.it-%ld.bin", dir, rank, iteration);
    if (len < 0 || (size_t)len >= cap)
        return HS_ERR(-ENAMETOOLONG, "checkpoint path under %s is too long", dir);
    return 0;
}

int hs_ckpt_manifest_path(char *buf, size_t cap, const char *dir, long iteration)
{
    int len = snprintf(buf, cap, "%s/ckpt/set-%ld.manifest", dir, iteration);
    if (len < 0 || (size_t)len >= cap)
        return HS_ERR(-ENAMETOOLONG, "checkpoint path under %s is too long", dir);
    return 0;
}

/* The header of one part (no payload read): its size and iteration checked against the file. */
static int read_part_hdr(const char *path, hs_ckpt_hdr_t *h)
{
    long long size = 0;
    int fd = hs_file_open_read(path, "checkpoint part", -1, &size);
    if (fd < 0) return fd;
    unsigned char hb[sizeof *h];
    ssize_t n = read(fd, hb, sizeof hb);
    close(fd);
    if (n < 0 || hdr_parse(hb, (size_t)n, h) < 0 || memcmp(h->magic, HS_CKPT_MAGIC, 4) != 0 ||
        (h->version != HS_CKPT_VERSION && h->version != 2))
        return HS_ERR(-EINVAL, "checkpoint part %s has no valid header", path);
    uint64_t want =
        hdr_bytes(h->version) + h->params_bytes + h->velocity_bytes + h->state_bytes + h->bn_bytes;
    if ((uint64_t)size != want)
        return HS_ERR(-EINVAL, "checkpoint part %s is %lld bytes, its header says %llu", path, size,
                      (unsigned long long)want);
    return 0;
}

/* The manifest of a set: a short text file.
 *     hearsay-checkpoint-set 1
 *     iteration ITER
 *     size N
 *     algo NAME
 *     part R CHECKSUM          (N lines, R = 0 .. N-1, the part's header checksum in hex)
 *     end CHECKSUM             (FNV-1a 64 of every byte before this line)                     */
#define MANIFEST_MAGIC "hearsay-checkpoint-set 1\n"

int hs_ckpt_set_commit(const char *dir, int size, long iteration)
{
    if (size < 1) return HS_ERR(-EINVAL, "checkpoint set of %d ranks", size);
    size_t cap = 256 + (size_t)size * 48, len = 0;
    char *buf = hs_malloc(cap, "checkpoint manifest");
    if (!buf) return -ENOMEM;
    int rc = 0;
    char path[4096];
    for (int r = 0; r < size && rc == 0; r++) {
        hs_ckpt_hdr_t h;
        if ((rc = hs_ckpt_part_path(path, sizeof path, dir, r, iteration)) < 0) break;
        if ((rc = read_part_hdr(path, &h)) < 0) break;
        if (h.iteration != iteration || h.rank != r || h.size != size) {
            rc = HS_ERR(-EINVAL, "checkpoint part %s holds rank %d of %d at iteration %lld", path,
                        h.rank, h.size, (long long)h.iteration);
            break;
        }
        if (r == 0) {
            char algo[HS_CKPT_ALGO_MAX + 1] = {0};
            memcpy(algo, h.algo, HS_CKPT_ALGO_MAX);
            len += (size_t)snprintf(buf + len, cap - len,
                                    MANIFEST_MAGIC "iteration %ld\nsize %d\nalgo %s\n", iteration,
                                    size, algo);
        }
        len += (size_t)snprintf(buf + len, cap - len, "part %d %016llx\n", r,
                                (unsigned long long)h.checksum);
    }
    if (rc == 0) {
        uint64_t s = hs_ckpt_fnv1a(buf, len, HS_FNV1A_INIT);
        len += (size_t)snprintf(buf + len, cap - len, "end %016llx\n", (unsigned long long)s);
        if ((rc = hs_ckpt_manifest_path(path, sizeof path, dir, iteration)) == 0)
            rc = hs_file_write(path, buf, len, HS_FILE_SYNC);
    }
    free(buf);
    if (rc < 0) {
        hs_error_prefix("checkpoint set at iteration %ld", iteration);
        return rc;
    }
    /* The new set is durable: the older ones go, manifests first (a set without its manifest is
     * never taken), then their parts and the single-file layout's rank-R.bin. A manifest of a
     * later iteration is another run's (only rank 0 writes manifests, in order): it goes too,
     * so that a resume cannot take a set of an earlier run over this run's. (Later parts are
     * left: a rank ahead may be writing its next one.) */
    char sub[4096];
    snprintf(sub, sizeof sub, "%s/ckpt", dir);
    for (int pass = 0; pass < 2; pass++) {
        DIR *d = opendir(sub);
        if (!d) break;
        for (struct dirent *e; (e = readdir(d));) {
            long it = -1;
            int r = -1, n = 0;
            int old = 0;
            if (pass == 0)
                old = sscanf(e->d_name, "set-%ld.manifest%n", &it, &n) == 1 && e->d_name[n] == 0 &&
                      it != iteration;
            else if (sscanf(e->d_name, "rank-%d.it-%ld.bin%n", &r, &it, &n) == 2 &&
                     e->d_name[n] == 0)
                old = it < iteration;
            else
                old = sscanf(e->d_name, "rank-%d.bin%n", &r, &n) == 1 && e->d_name[n] == 0;
            if (old) unlinkat(dirfd(d), e->d_name, 0);
        }
        closedir(d);
    }
    return 0;
}

/* Parse a manifest; 0 and *it, *size, checksums (size entries, allocated) or an error. */
static int read_manifest(const char *path, long *it, int *size, uint64_t **sums)
{
    char *buf = NULL;
    size_t len = 0;
    *sums = NULL;
    HS_TRY(hs_file_read_all(path, "checkpoint manifest", 1 << 24, &buf, &len));
    int rc = -EINVAL, n = 0;
    char *end = NULL;
    unsigned long long want = 0;
    if (strncmp(buf, MANIFEST_MAGIC, strlen(MANIFEST_MAGIC)) != 0) goto bad;
    if (!(end = strstr(buf, "\nend "))) goto bad;
    end++;
    if (sscanf(end, "end %16llx", &want) != 1 ||
        hs_ckpt_fnv1a(buf, (size_t)(end - buf), HS_FNV1A_INIT) != want)
        goto bad;
    const char *p = buf + strlen(MANIFEST_MAGIC);
    if (sscanf(p, "iteration %ld\nsize %d\n%n", it, size, &n) != 2 || *size < 1 ||
        *size > (1 << 20) || *it < 0) /* (the parts' reader refuses an impossible iteration) */
        goto bad;
    p += n;
    if (!(p = strstr(p, "\npart "))) goto bad;
    p++;
    if (!(*sums = hs_malloc((size_t)*size * sizeof **sums, "checkpoint manifest"))) {
        rc = -ENOMEM;
        goto out;
    }
    for (int r = 0; r < *size; r++) {
        int rr = -1;
        unsigned long long s = 0;
        if (sscanf(p, "part %d %16llx\n%n", &rr, &s, &n) != 2 || rr != r) goto bad;
        (*sums)[r] = s;
        p += n;
    }
    if (p != end) goto bad;
    rc = 0;
    goto out;
bad:
    rc = HS_ERR(-EINVAL, "checkpoint manifest %s is corrupt", path);
out:
    if (rc < 0) {
        free(*sums);
        *sums = NULL;
    }
    free(buf);
    return rc;
}

/* Is the set at `it` complete for a job of `size`? 0, or a negative code with the reason in
 * why (one short phrase). */
static int set_complete(const char *dir, int size, long it, int full, char *why, size_t wn)
{
    char path[4096];
    long mit = -1;
    int msize = 0;
    uint64_t *sums = NULL;
    HS_TRY(hs_ckpt_manifest_path(path, sizeof path, dir, it));
    if (read_manifest(path, &mit, &msize, &sums) < 0) {
        snprintf(why, wn, "manifest refused: %s", hs_last_error());
        return -EINVAL;
    }
    int rc = 0;
    if (mit != it || msize != size) {
        snprintf(why, wn, "manifest of %d ranks at %ld", msize, mit);
        rc = -EINVAL;
    }
    for (int r = 0; r < size && rc == 0; r++) {
        hs_ckpt_t c;
        if ((rc = hs_ckpt_part_path(path, sizeof path, dir, r, it)) < 0) break;
        if (access(path, F_OK) != 0) {
            snprintf(why, wn, "rank %d's part missing", r);
            rc = -ENOENT;
            break;
        }
        hs_ckpt_hdr_t h;
        if (read_part_hdr(path, &h) < 0) {
            snprintf(why, wn, "rank %d's part invalid: %s", r, hs_last_error());
            rc = -EINVAL;
            break;
        }
        if (h.checksum != sums[r]) {
            snprintf(why, wn, "rank %d's part is not the one the manifest names (checksum)", r);
            rc = -EINVAL;
            break;
        }
        if (!full) {
            if (h.iteration != it || h.rank != r || h.size != size) {
                snprintf(why, wn, "rank %d's part holds iteration %lld", r, (long long)h.iteration);
                rc = -EINVAL;
            }
            continue;
        }
        if (hs_ckpt_read(path, &c) < 0) {
            snprintf(why, wn, "rank %d's part invalid: %s", r, hs_last_error());
            rc = -EINVAL;
            break;
        }
        if (c.iteration != it || c.rank != r || c.size != size) {
            snprintf(why, wn, "rank %d's part holds iteration %ld", r, c.iteration);
            rc = -EINVAL;
        }
        hs_ckpt_free(&c);
    }
    free(sums);
    return rc;
}

static int cmp_long_desc(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

static int set_find(const char *dir, int size, long *iteration, int *legacy, int full);

int hs_ckpt_set_find(const char *dir, int size, long *iteration, int *legacy)
{
    return set_find(dir, size, iteration, legacy, 1);
}

int hs_ckpt_set_check(const char *dir, int size, long *iteration)
{
    return set_find(dir, size, iteration, NULL, 0);
}

static int set_find(const char *dir, int size, long *iteration, int *legacy, int full)
{
    char sub[4096], path[4096];
    if (legacy) *legacy = 0;
    int len = snprintf(sub, sizeof sub, "%s/ckpt", dir);
    if (len < 0 || (size_t)len >= sizeof sub)
        return HS_ERR(-ENAMETOOLONG, "checkpoint path under %s is too long", dir);
    DIR *d = opendir(sub);
    if (!d) {
        int e = errno;
        return HS_ERR(-e, "no checkpoint directory %s: %s", sub, strerror(e));
    }
    /* Every manifest's iteration and every part (rank, iteration), for the choice and for the
     * message when there is none. */
    size_t nm = 0, np = 0, cm = 16, cp = 64;
    long *mans = hs_malloc(cm * sizeof *mans, "checkpoint list");
    long(*parts)[2] = hs_malloc(cp * sizeof *parts, "checkpoint list");
    int rc = 0;
    if (!mans || !parts) rc = -ENOMEM;
    for (struct dirent *e; rc == 0 && (e = readdir(d));) {
        long it = -1;
        int r = -1, n = 0;
        if (sscanf(e->d_name, "set-%ld.manifest%n", &it, &n) == 1 && e->d_name[n] == 0 && it >= 0) {
            if (nm == cm) {
                long *m2 = realloc(mans, (cm *= 2) * sizeof *mans);
                if (!m2) {
                    rc = -ENOMEM;
                    break;
                }
                mans = m2;
            }
            mans[nm++] = it;
        } else if (sscanf(e->d_name, "rank-%d.it-%ld.bin%n", &r, &it, &n) == 2 &&
                   e->d_name[n] == 0 && r >= 0) {
            if (np == cp) {
                long(*p2)[2] = realloc(parts, (cp *= 2) * sizeof *parts);
                if (!p2) {
                    rc = -ENOMEM;
                    break;
                }
                parts = p2;
            }
            parts[np][0] = r;
            parts[np++][1] = it;
        }
    }
    closedir(d);
    if (rc < 0) goto out;
    qsort(mans, nm, sizeof *mans, cmp_long_desc);
    char why[4096] = "";
    size_t wl = 0;
    for (size_t i = 0; i < nm; i++) {
        char w[512];
        if (set_complete(dir, size, mans[i], full, w, sizeof w) == 0) {
            *iteration = mans[i];
            goto out;
        }
        if (wl < sizeof why)
            wl += (size_t)snprintf(why + wl, sizeof why - wl, "%sset %ld: %s", wl ? "; " : "",
                                   mans[i], w);
    }
    /* The single-file layout (read only): taken when every rank's rank-R.bin is there, whole,
     * at one iteration. */
    if (nm == 0) {
        long at = -1;
        int ok = 1;
        for (int r = 0; r < size; r++) {
            hs_ckpt_t c;
            if (hs_ckpt_path(path, sizeof path, dir, r) < 0 || access(path, F_OK) != 0) {
                if (at >= 0 && wl < sizeof why) /* (no rank-R.bin at all: not this layout) */
                    wl += (size_t)snprintf(why + wl, sizeof why - wl, "%srank-%d.bin missing",
                                           wl ? "; " : "", r);
                ok = 0;
                break;
            }
            if (hs_ckpt_read(path, &c) < 0) {
                if (wl < sizeof why)
                    wl += (size_t)snprintf(why + wl, sizeof why - wl, "%s%s", wl ? "; " : "",
                                           hs_last_error());
                ok = 0;
                break;
            }
            ok = ok && c.rank == r && c.size == size && (at < 0 || c.iteration == at);
            if (at < 0) at = c.iteration;
            if (wl < sizeof why)
                wl += (size_t)snprintf(why + wl, sizeof why - wl, "%srank-%d.bin at %ld",
                                       wl ? "; " : "", r, c.iteration);
            hs_ckpt_free(&c);
        }
        if (ok && at >= 0) {
            *iteration = at;
            if (legacy) *legacy = 1;
            goto out;
        }
    }
    /* None: name what is there, rank by rank. */
    char found[2048] = "";
    size_t fl = 0;
    for (int r = 0; r < size && fl < sizeof found; r++) {
        fl += (size_t)snprintf(found + fl, sizeof found - fl, "%srank %d at", r ? "; " : "", r);
        int any = 0;
        for (size_t i = 0; i < np && fl < sizeof found; i++)
            if (parts[i][0] == r) {
                fl += (size_t)snprintf(found + fl, sizeof found - fl, " %ld", parts[i][1]);
                any = 1;
            }
        if (!any && fl < sizeof found)
            fl += (size_t)snprintf(found + fl, sizeof found - fl, " (none)");
    }
    rc = HS_ERR(-ENOENT,
                "no complete checkpoint set in %s for %d ranks (a manifest set-ITER.manifest and "
                "every rank's part at ITER): %s%sparts found: %s; refusing to mix iterations",
                sub, size, why, wl ? "; " : "", found);
out:
    free(mans);
    free(parts);
    return rc;
}

/* --- a running rank's state, in memory (a replacement's start: runtime/rejoin.h) --------- */

#define SNAP_MAGIC   0x4a525348u /* "HSRJ" */
#define SNAP_VERSION 1u

typedef struct {
    uint32_t magic, version;
    int64_t iteration;
    uint64_t num_params, velocity_len, bn_len, state_bytes;
} snap_hdr_t;

/* The sizes of this rank's state: parameters, velocity, running statistics, algorithm. */
static void snap_sizes(hs_worker_t *w, const hs_algo_ops_t *ops, hs_algo_t *a, snap_hdr_t *h)
{
    hs_model_t *m = hs_worker_model(w);
    size_t vn = 0;
    float *vel = hs_sgd_velocity(hs_worker_optimizer(w), &vn);
    memset(h, 0, sizeof *h);
    h->magic = SNAP_MAGIC;
    h->version = SNAP_VERSION;
    h->num_params = hs_model_num_params(m);
    h->velocity_len = vel ? vn : 0;
    h->bn_len = hs_model_num_state(m);
    h->state_bytes = ops && a && !(ops->flags & HS_ALGO_OWN_STATE) && ops->state_bytes &&
                             ops->state_save && ops->state_load
                         ? ops->state_bytes(a)
                         : 0;
}

static size_t snap_len(const snap_hdr_t *h)
{
    return sizeof *h + (h->num_params + h->velocity_len + h->bn_len) * sizeof(float) +
           h->state_bytes;
}

size_t hs_ckpt_snapshot_bytes(hs_worker_t *w, const hs_algo_ops_t *ops, hs_algo_t *a)
{
    snap_hdr_t h;
    snap_sizes(w, ops, a, &h);
    return snap_len(&h);
}

int hs_ckpt_snapshot(hs_worker_t *w, const hs_algo_ops_t *ops, hs_algo_t *a, long iteration,
                     void *buf, size_t len)
{
    hs_kernels_t *k = hs_worker_kernels(w);
    hs_model_t *m = hs_worker_model(w);
    snap_hdr_t h;
    snap_sizes(w, ops, a, &h);
    h.iteration = iteration;
    if (len != snap_len(&h))
        return HS_ERR(-EINVAL, "state snapshot: %zu bytes given, %zu needed", len, snap_len(&h));
    size_t vn = 0;
    float *vel = hs_sgd_velocity(hs_worker_optimizer(w), &vn);
    char *p = buf;
    memcpy(p, &h, sizeof h);
    p += sizeof h;
    HS_TRY(k->ops->to_host(k, p, hs_model_params(m), h.num_params * sizeof(float)));
    p += h.num_params * sizeof(float);
    if (h.velocity_len) HS_TRY(k->ops->to_host(k, p, vel, h.velocity_len * sizeof(float)));
    p += h.velocity_len * sizeof(float);
    if (h.bn_len) HS_TRY(k->ops->to_host(k, p, hs_model_state(m), h.bn_len * sizeof(float)));
    p += h.bn_len * sizeof(float);
    if (h.state_bytes) HS_TRY(ops->state_save(a, p));
    return 0;
}

int hs_ckpt_adopt(const void *buf, size_t len, hs_worker_t *w, const hs_algo_ops_t *ops,
                  hs_algo_t *a, long total_iters, long *iteration)
{
    hs_kernels_t *k = hs_worker_kernels(w);
    hs_model_t *m = hs_worker_model(w);
    snap_hdr_t want, h;
    snap_sizes(w, ops, a, &want);
    if (len < sizeof h) return HS_ERR(-EPROTO, "state snapshot: %zu bytes, no header", len);
    memcpy(&h, buf, sizeof h);
    if (h.magic != SNAP_MAGIC || h.version != SNAP_VERSION)
        return HS_ERR(-EPROTO, "state snapshot: not a version-%u snapshot", SNAP_VERSION);
    if (h.num_params != want.num_params || h.velocity_len != want.velocity_len ||
        h.bn_len != want.bn_len || h.state_bytes != want.state_bytes || len != snap_len(&h))
        return HS_ERR(-EPROTO,
                      "state snapshot: %llu parameters, %llu velocity, %llu statistics, %llu "
                      "state bytes; this rank has %llu, %llu, %llu, %llu (a different "
                      "configuration?)",
                      (unsigned long long)h.num_params, (unsigned long long)h.velocity_len,
                      (unsigned long long)h.bn_len, (unsigned long long)h.state_bytes,
                      (unsigned long long)want.num_params, (unsigned long long)want.velocity_len,
                      (unsigned long long)want.bn_len, (unsigned long long)want.state_bytes);
    if (h.iteration < 0 || (total_iters > 0 && h.iteration > total_iters))
        return HS_ERR(-EPROTO, "state snapshot: iteration %lld is not in [0, %ld]",
                      (long long)h.iteration, total_iters);
    size_t vn = 0;
    float *vel = hs_sgd_velocity(hs_worker_optimizer(w), &vn);
    const char *p = (const char *)buf + sizeof h;
    HS_TRY(k->ops->to_device(k, hs_model_params(m), p, h.num_params * sizeof(float)));
    p += h.num_params * sizeof(float);
    if (h.velocity_len) HS_TRY(k->ops->to_device(k, vel, p, h.velocity_len * sizeof(float)));
    p += h.velocity_len * sizeof(float);
    if (h.bn_len) HS_TRY(k->ops->to_device(k, hs_model_state(m), p, h.bn_len * sizeof(float)));
    p += h.bn_len * sizeof(float);
    if (h.state_bytes) HS_TRY(ops->state_load(a, p));
    HS_TRY(hs_worker_seek(w, (long)h.iteration));
    if (iteration) *iteration = (long)h.iteration;
    return 0;
}
