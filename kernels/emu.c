/*
 * kernels/emu.c — the emulated device (`--device emu`): a kernel backend whose "device"
 * memory is host memory that the host may not touch, so the GPU data path (staging through
 * host buffers, to_device/to_host, device-to-device copies) runs and is checked on a machine
 * without a GPU (docs/testing.md, "The emulated device").
 *
 * It reports itself as a device that is not the host (HS_DEV_EMU, so `k->device !=
 * HS_DEV_CPU` everywhere) and does the math with the CPU backend's slots: each slot here
 * checks that its device arguments lie in memory from this backend's alloc (-EFAULT with the
 * slot and argument named, as a CUDA kernel given a host pointer would fault) and that its
 * host arguments do not, opens the allocations it touches, calls the CPU slot and closes them.
 *
 * In a build with AddressSanitizer (scripts/test.sh --sanitize) every allocation is poisoned
 * (ASAN_POISON_MEMORY_REGION) except while a slot holds it open, so any other access from the
 * host, in any algorithm or transport, is a use-after-poison report that fails the test.
 * Without AddressSanitizer nothing is poisoned, and the argument checks still run.
 *
 * The allocations live in one process-wide table (hearsay sim runs its ranks as threads, and
 * a transport's progress thread may stage a buffer while a kernel runs): sorted by address,
 * a count of the slots holding each one open, under one mutex. The CPU backend's worker
 * threads (k->impl) are the ones it opened for the same handle.
 *
 * Allocations of HS_EMU_IPC_MIN bytes or more are mapped pages; ipc_handle moves one into a
 * memfd, at the same address (its bytes copied, then the memfd mapped over it), so that another
 * process of the host can map it (ipc_open: what CUDA IPC does for a GPU's memory); the mapping
 * enters that process's table as its device memory, poisoned likewise. Only allocations asked
 * for get a memfd (and hold a descriptor): a simulation of thousands of ranks holds none.
 */
#include "config.h"

#include "kernels/cpu/cpu_internal.h"

#include "hearsay/common.h"
#include "hearsay/kernels.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define HS_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HS_EMU_ASAN 1
#endif
#endif
#ifdef HS_EMU_ASAN
#include <sanitizer/asan_interface.h>
#define EMU_POISON(p, n)   ASAN_POISON_MEMORY_REGION((p), (n))
#define EMU_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define EMU_POISON(p, n)   ((void)(p), (void)(n))
#define EMU_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* ---- the allocation table ---- */

typedef struct emu_block {
    char *base;
    size_t size;     /* bytes taken (rounded up to 64, as the CPU backend's vector loops expect) */
    size_t bytes;    /* bytes asked for: a copy or a vector slot must stay within them */
    int open;        /* slots holding it open (unpoisoned while > 0) */
    size_t map_len;  /* > 0: mapped pages (size rounded up to pages), unmapped at free */
    int fd;          /* its memfd once shared (ipc_handle), or -1 */
    int foreign;     /* 1: another process's allocation mapped by ipc_open (ipc_close frees it) */
    uint64_t serial; /* shareable ones: this process's count of them, to tell reused fds apart */
} emu_block_t;

static pthread_mutex_t emu_mu = PTHREAD_MUTEX_INITIALIZER;
static emu_block_t *emu_tab; /* (emu_n) sorted by base */
static size_t emu_n, emu_cap;
/* emu_n as last set under emu_mu, read without it: no emulated device memory exists (the
 * common case, every CPU run) answers hs_kernels_emu_is_device without the lock */
static _Atomic size_t emu_live;

/* Index of the block holding p, or -1; under emu_mu. */
static long emu_find(const void *p)
{
    const char *c = p;
    size_t lo = 0, hi = emu_n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c < emu_tab[mid].base)
            hi = mid;
        else if (c >= emu_tab[mid].base + emu_tab[mid].size)
            lo = mid + 1;
        else
            return (long)mid;
    }
    return -1;
}

/* 1 when p lies in emulated device memory (any handle's). */
int hs_kernels_emu_is_device(const void *p)
{
    if (!p || atomic_load_explicit(&emu_live, memory_order_acquire) == 0) return 0;
    pthread_mutex_lock(&emu_mu);
    int in = emu_find(p) >= 0;
    pthread_mutex_unlock(&emu_mu);
    return in;
}

/* The allocations a slot holds open between emu_enter and emu_leave. */
#define EMU_MAX_ARGS 12
typedef struct emu_held {
    int n;
    char *base[EMU_MAX_ARGS];
} emu_held_t;

static void emu_leave(emu_held_t *h)
{
    pthread_mutex_lock(&emu_mu);
    for (int i = 0; i < h->n; i++) {
        long j = emu_find(h->base[i]);
        if (j >= 0 && --emu_tab[j].open == 0) EMU_POISON(emu_tab[j].base, emu_tab[j].size);
    }
    pthread_mutex_unlock(&emu_mu);
    h->n = 0;
}

/* Open the allocations of the np device pointers p (NULL ones skipped; names: the argument
 * list as written, for messages). bytes[i] > 0: argument i spans that many bytes, which must
 * fit in its allocation. -EFAULT, nothing held, when one is not device memory. */
static int emu_enter(emu_held_t *h, const char *op, const char *names, const void *const *p,
                     const size_t *bytes, int np)
{
    h->n = 0;
    pthread_mutex_lock(&emu_mu);
    for (int i = 0; i < np; i++) {
        if (!p[i]) continue;
        long j = emu_find(p[i]);
        size_t need = bytes ? bytes[i] : 0;
        if (j < 0 || (size_t)((const char *)p[i] - emu_tab[j].base) + need > emu_tab[j].bytes) {
            pthread_mutex_unlock(&emu_mu);
            emu_leave(h);
            if (j < 0)
                return HS_ERR(-EFAULT,
                              "emu %s: argument %d of (%s), %p, is not device memory from the "
                              "backend's alloc (a host pointer where the slot takes a device one)",
                              op, i + 1, names, p[i]);
            return HS_ERR(-EFAULT,
                          "emu %s: argument %d of (%s) runs %zu bytes past its device "
                          "allocation of %zu bytes",
                          op, i + 1, names,
                          (size_t)((const char *)p[i] - emu_tab[j].base) + need - emu_tab[j].bytes,
                          emu_tab[j].bytes);
        }
        if (emu_tab[j].open++ == 0) EMU_UNPOISON(emu_tab[j].base, emu_tab[j].size);
        h->base[h->n++] = emu_tab[j].base;
    }
    pthread_mutex_unlock(&emu_mu);
    return 0;
}

/* A host argument (copies' host side, results to host) must not be device memory. */
static int emu_host_arg(const char *op, const char *name, const void *p)
{
    if (hs_kernels_emu_is_device(p))
        return HS_ERR(-EFAULT, "emu %s: %s, %p, is device memory where the slot takes host memory",
                      op, name, p);
    return 0;
}

static const hs_kernel_ops_t *cpu(void)
{
    return hs_kcpu_ops();
}

/* Run `call` with the device pointers `...` open; every one spans `span` bytes (0: unknown). */
#define EMU_CALL_SPAN(op, span, call, ...)                                                         \
    do {                                                                                           \
        const void *const emu_p_[] = {__VA_ARGS__};                                                \
        enum { emu_np_ = (int)(sizeof emu_p_ / sizeof emu_p_[0]) };                                \
        size_t emu_b_[emu_np_];                                                                    \
        for (int emu_i_ = 0; emu_i_ < emu_np_; emu_i_++) emu_b_[emu_i_] = (span);                  \
        emu_held_t emu_h_;                                                                         \
        HS_TRY(emu_enter(&emu_h_, (op), #__VA_ARGS__, emu_p_, emu_b_, emu_np_));                   \
        int emu_rc_ = (call);                                                                      \
        emu_leave(&emu_h_);                                                                        \
        return emu_rc_;                                                                            \
    } while (0)
#define EMU_CALL(op, call, ...) EMU_CALL_SPAN(op, 0, call, __VA_ARGS__)

/* ---- memory ---- */

/* Enter [p, p + rounded) in the table, poisoned; -ENOMEM when the table cannot grow. */
static int emu_insert(char *p, size_t rounded, size_t map_len, size_t bytes, int fd, int foreign,
                      uint64_t serial)
{
    pthread_mutex_lock(&emu_mu);
    if (emu_n == emu_cap) {
        size_t cap = emu_cap ? 2 * emu_cap : 64;
        emu_block_t *t = realloc(emu_tab, cap * sizeof *t);
        if (!t) {
            pthread_mutex_unlock(&emu_mu);
            return HS_ERR(-ENOMEM, "emu alloc: out of memory for the allocation table");
        }
        emu_tab = t;
        emu_cap = cap;
    }
    size_t at = emu_n;
    while (at > 0 && emu_tab[at - 1].base > p) at--;
    memmove(emu_tab + at + 1, emu_tab + at, (emu_n - at) * sizeof *emu_tab);
    emu_tab[at] = (emu_block_t){.base = p,
                                .size = rounded,
                                .map_len = map_len,
                                .bytes = bytes,
                                .open = 0,
                                .fd = fd,
                                .foreign = foreign,
                                .serial = serial};
    emu_n++;
    atomic_store_explicit(&emu_live, emu_n, memory_order_release);
    EMU_POISON(p, rounded);
    pthread_mutex_unlock(&emu_mu);
    return 0;
}

/* Take the block starting at p out of the table (foreign: 1 for ipc_close, 0 for free) into
 * *b; 0, or -1 after saying why on stderr (a programming error a void slot cannot return:
 * leak rather than corrupt). */
static int emu_remove(void *p, int foreign, const char *op, emu_block_t *b)
{
    pthread_mutex_lock(&emu_mu);
    long j = emu_find(p);
    const char *why = j < 0                          ? "not device memory from the backend"
                      : emu_tab[j].base != (char *)p ? "inside a device allocation, not its start"
                      : emu_tab[j].open              ? "held by a running kernel"
                      : emu_tab[j].foreign != foreign
                          ? (foreign ? "this process's own allocation (free it)"
                                     : "another process's allocation (ipc_close it)")
                          : NULL;
    if (why) {
        pthread_mutex_unlock(&emu_mu);
        fprintf(stderr, "hearsay: emu %s: %p is %s\n", op, p, why);
        return -1;
    }
    *b = emu_tab[j];
    EMU_UNPOISON(b->base, b->size);
    memmove(emu_tab + j, emu_tab + j + 1, (emu_n - (size_t)j - 1) * sizeof *emu_tab);
    emu_n--;
    atomic_store_explicit(&emu_live, emu_n, memory_order_release);
    if (emu_n == 0) {
        free(emu_tab);
        emu_tab = NULL;
        emu_cap = 0;
    }
    pthread_mutex_unlock(&emu_mu);
    return 0;
}

static _Atomic uint64_t emu_serial;

static int emu_alloc(hs_kernels_t *k, size_t bytes, void **out)
{
    (void)k;
    if (!out) return HS_ERR(-EINVAL, "emu alloc: out is NULL");
    *out = NULL;
    if (bytes == 0) return 0;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    if (rounded < bytes) return HS_ERR(-ENOMEM, "emu alloc: %zu bytes is too large", bytes);
    void *p = NULL;
    size_t map_len = 0;
    if (rounded >= HS_EMU_IPC_MIN) { /* pages of its own: ipc_handle can share them */
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        map_len = (rounded + page - 1) / page * page;
        p = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return HS_ERR(-ENOMEM, "emu alloc: mapping %zu bytes: %s", map_len, strerror(errno));
    } else if (posix_memalign(&p, 64, rounded) != 0 || !p) {
        return HS_ERR(-ENOMEM, "emu alloc: out of memory allocating %zu bytes", bytes);
    }
    int rc = emu_insert(p, rounded, map_len, bytes, -1, 0, 0);
    if (rc < 0) {
        if (map_len)
            munmap(p, map_len);
        else
            free(p);
        return rc;
    }
    *out = p;
    return 0;
}

static void emu_free(hs_kernels_t *k, void *p)
{
    (void)k;
    if (!p) return;
    emu_block_t b;
    if (emu_remove(p, 0, "free", &b) < 0) return;
    if (b.map_len) {
        munmap(b.base, b.map_len);
        if (b.fd >= 0) close(b.fd);
    } else {
        free(p);
    }
}

/* ---- sharing with other processes of the host (CUDA IPC's stand-in) ---- */

#define EMU_IPC_MAGIC 0x49554d45u /* "EMUI" */
typedef struct emu_ipc {
    uint32_t magic, pid;
    int32_t fd, pad;
    uint64_t serial, size, bytes;
} emu_ipc_t;

/* Move block j's pages into a memfd at the same address (under emu_mu, no slot holding it):
 * its bytes are written to the memfd, which is then mapped over them. */
static int emu_share_locked(long j)
{
    emu_block_t *b = &emu_tab[j];
    int fd = memfd_create("hearsay-emu", MFD_CLOEXEC);
    if (fd < 0) return HS_ERR(-errno, "emu ipc_handle: memfd_create: %s", strerror(errno));
    EMU_UNPOISON(b->base, b->size);
    int rc = 0;
    if (ftruncate(fd, (off_t)b->map_len) != 0) {
        rc =
            HS_ERR(-errno, "emu ipc_handle: a memfd of %zu bytes: %s", b->map_len, strerror(errno));
    } else {
        for (size_t done = 0; rc == 0 && done < b->size;) {
            ssize_t w = pwrite(fd, b->base + done, b->size - done, (off_t)done);
            if (w <= 0)
                rc = HS_ERR(w < 0 ? -errno : -EIO, "emu ipc_handle: writing the memfd: %s",
                            w < 0 ? strerror(errno) : "short write");
            else
                done += (size_t)w;
        }
    }
    if (rc == 0 && mmap(b->base, b->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
                        0) == MAP_FAILED)
        rc = HS_ERR(-errno, "emu ipc_handle: mapping the memfd over %p: %s", (void *)b->base,
                    strerror(errno));
    EMU_POISON(b->base, b->size);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    b->fd = fd;
    b->serial = atomic_fetch_add(&emu_serial, 1) + 1;
    return 0;
}

static int emu_ipc_handle(hs_kernels_t *k, const void *p, hs_ipc_handle_t *h)
{
    (void)k;
    if (!p || !h) return HS_ERR(-EINVAL, "emu ipc_handle: NULL argument");
    pthread_mutex_lock(&emu_mu);
    long j = emu_find(p);
    int rc = 0;
    if (j < 0 || emu_tab[j].base != (const char *)p || emu_tab[j].foreign)
        rc = HS_ERR(-EINVAL, "emu ipc_handle: %p is not the start of an allocation of this process",
                    p);
    else if (!emu_tab[j].map_len)
        rc = HS_ERR(-ENOSYS,
                    "emu ipc_handle: the allocation at %p (%zu bytes) is under %zu bytes, which "
                    "the emulated device does not share",
                    p, emu_tab[j].bytes, HS_EMU_IPC_MIN);
    else if (emu_tab[j].fd < 0 && emu_tab[j].open)
        rc = HS_ERR(-EBUSY, "emu ipc_handle: the allocation at %p is held by a running kernel", p);
    else if (emu_tab[j].fd < 0)
        rc = emu_share_locked(j);
    emu_block_t b = rc == 0 ? emu_tab[j] : (emu_block_t){.fd = -1};
    pthread_mutex_unlock(&emu_mu);
    HS_TRY(rc);
    emu_ipc_t e = {.magic = EMU_IPC_MAGIC,
                   .pid = (uint32_t)getpid(),
                   .fd = b.fd,
                   .serial = b.serial,
                   .size = b.map_len,
                   .bytes = b.bytes};
    memset(h, 0, sizeof *h);
    memcpy(h->b, &e, sizeof e);
    return 0;
}

static int emu_ipc_open(hs_kernels_t *k, const hs_ipc_handle_t *h, void **p, size_t *bytes)
{
    (void)k;
    if (!h || !p) return HS_ERR(-EINVAL, "emu ipc_open: NULL argument");
    *p = NULL;
    emu_ipc_t e;
    memcpy(&e, h->b, sizeof e);
    if (e.magic != EMU_IPC_MAGIC || e.size < e.bytes || e.size == 0)
        return HS_ERR(-EINVAL, "emu ipc_open: not a handle of the emulated device");
    if (e.pid == (uint32_t)getpid())
        return HS_ERR(-EINVAL, "emu ipc_open: a handle of this very process (as CUDA IPC, "
                               "only another process opens it)");
    char path[64];
    snprintf(path, sizeof path, "/proc/%u/fd/%d", e.pid, e.fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return HS_ERR(-ENOENT, "emu ipc_open: %s: %s (the owner exited, or another host's)", path,
                      strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != e.size) {
        close(fd);
        return HS_ERR(-ENOENT, "emu ipc_open: %s is not the allocation the handle names", path);
    }
    void *m = mmap(NULL, e.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int err = errno;
    close(fd);
    if (m == MAP_FAILED) return HS_ERR(-err, "emu ipc_open: mapping %s: %s", path, strerror(err));
    int rc = emu_insert(m, (e.bytes + 63) & ~(uint64_t)63, e.size, e.bytes, -1, 1, e.serial);
    if (rc < 0) {
        munmap(m, e.size);
        return rc;
    }
    *p = m;
    if (bytes) *bytes = e.bytes;
    return 0;
}

static void emu_ipc_close(hs_kernels_t *k, void *p)
{
    (void)k;
    if (!p) return;
    emu_block_t b;
    if (emu_remove(p, 1, "ipc_close", &b) == 0) munmap(b.base, b.map_len);
}

static int emu_to_device(hs_kernels_t *k, void *dst_dev, const void *src_host, size_t bytes)
{
    if (bytes == 0) return 0;
    HS_TRY(emu_host_arg("to_device", "the source", src_host));
    EMU_CALL_SPAN("to_device", bytes, cpu()->to_device(k, dst_dev, src_host, bytes), dst_dev);
}

static int emu_to_host(hs_kernels_t *k, void *dst_host, const void *src_dev, size_t bytes)
{
    if (bytes == 0) return 0;
    HS_TRY(emu_host_arg("to_host", "the destination", dst_host));
    EMU_CALL_SPAN("to_host", bytes, cpu()->to_host(k, dst_host, src_dev, bytes), src_dev);
}

static int emu_copy(hs_kernels_t *k, void *dst_dev, const void *src_dev, size_t bytes)
{
    if (bytes == 0) return 0;
    EMU_CALL_SPAN("copy", bytes, cpu()->copy(k, dst_dev, src_dev, bytes), dst_dev, src_dev);
}

static int emu_zero(hs_kernels_t *k, void *dst_dev, size_t bytes)
{
    if (bytes == 0) return 0;
    EMU_CALL_SPAN("zero", bytes, cpu()->zero(k, dst_dev, bytes), dst_dev);
}

static int emu_sync(hs_kernels_t *k)
{
    return cpu()->sync(k);
}

/* ---- BLAS-like ---- */

static int emu_gemm(hs_kernels_t *k, int trans_a, int trans_b, int M, int N, int K, float alpha,
                    const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    EMU_CALL("gemm", cpu()->gemm(k, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc),
             A, B, C);
}

static int emu_axpy(hs_kernels_t *k, size_t n, float a, const float *x, float *y)
{
    EMU_CALL_SPAN("axpy", n * sizeof(float), cpu()->axpy(k, n, a, x, y), x, y);
}

static int emu_scale(hs_kernels_t *k, size_t n, float a, float *x)
{
    EMU_CALL_SPAN("scale", n * sizeof(float), cpu()->scale(k, n, a, x), x);
}

static int emu_mix(hs_kernels_t *k, size_t n, float a, const float *x, float b, float *y)
{
    EMU_CALL_SPAN("mix", n * sizeof(float), cpu()->mix(k, n, a, x, b, y), x, y);
}

static int emu_add_bias(hs_kernels_t *k, int B, int N, const float *bias, float *y)
{
    EMU_CALL("add_bias", cpu()->add_bias(k, B, N, bias, y), bias, y);
}

static int emu_bias_grad(hs_kernels_t *k, int B, int N, const float *dy, float *db, int accumulate)
{
    EMU_CALL("bias_grad", cpu()->bias_grad(k, B, N, dy, db, accumulate), dy, db);
}

/* ---- activations ---- */

static int emu_relu_fwd(hs_kernels_t *k, size_t n, const float *x, float *y)
{
    EMU_CALL_SPAN("relu_fwd", n * sizeof(float), cpu()->relu_fwd(k, n, x, y), x, y);
}

static int emu_relu_bwd(hs_kernels_t *k, size_t n, const float *y, const float *dy, float *dx)
{
    EMU_CALL_SPAN("relu_bwd", n * sizeof(float), cpu()->relu_bwd(k, n, y, dy, dx), y, dy, dx);
}

static int emu_tanh_fwd(hs_kernels_t *k, size_t n, const float *x, float *y)
{
    EMU_CALL_SPAN("tanh_fwd", n * sizeof(float), cpu()->tanh_fwd(k, n, x, y), x, y);
}

static int emu_tanh_bwd(hs_kernels_t *k, size_t n, const float *y, const float *dy, float *dx)
{
    EMU_CALL_SPAN("tanh_bwd", n * sizeof(float), cpu()->tanh_bwd(k, n, y, dy, dx), y, dy, dx);
}

/* ---- loss ---- */

static int emu_softmax_xent(hs_kernels_t *k, int B, int C, const float *logits,
                            const int32_t *labels, float *probs, float *dlogits, double *loss_host,
                            int *correct_host)
{
    HS_TRY(emu_host_arg("softmax_xent", "loss_host", loss_host));
    HS_TRY(emu_host_arg("softmax_xent", "correct_host", correct_host));
    EMU_CALL("softmax_xent",
             cpu()->softmax_xent(k, B, C, logits, labels, probs, dlogits, loss_host, correct_host),
             logits, labels, probs, dlogits);
}

/* ---- convolution and pooling ---- */

static size_t emu_conv2d_workspace(hs_kernels_t *k, const hs_conv2d_desc_t *d)
{
    return cpu()->conv2d_workspace(k, d);
}

static int emu_conv2d_fwd(hs_kernels_t *k, const hs_conv2d_desc_t *d, const float *x,
                          const float *w, const float *bias, float *y, void *ws, size_t ws_bytes)
{
    EMU_CALL("conv2d_fwd", cpu()->conv2d_fwd(k, d, x, w, bias, y, ws, ws_bytes), x, w, bias, y, ws);
}

static int emu_conv2d_bwd(hs_kernels_t *k, const hs_conv2d_desc_t *d, const float *x,
                          const float *w, const float *dy, float *dx, float *dw, float *dbias,
                          void *ws, size_t ws_bytes)
{
    EMU_CALL("conv2d_bwd", cpu()->conv2d_bwd(k, d, x, w, dy, dx, dw, dbias, ws, ws_bytes), x, w, dy,
             dx, dw, dbias, ws);
}

static int emu_maxpool_fwd(hs_kernels_t *k, const hs_pool2d_desc_t *d, const float *x, float *y,
                           int32_t *argmax)
{
    EMU_CALL("maxpool_fwd", cpu()->maxpool_fwd(k, d, x, y, argmax), x, y, argmax);
}

static int emu_maxpool_bwd(hs_kernels_t *k, const hs_pool2d_desc_t *d, const float *x,
                           const float *y, const int32_t *argmax, const float *dy, float *dx)
{
    EMU_CALL("maxpool_bwd", cpu()->maxpool_bwd(k, d, x, y, argmax, dy, dx), x, y, argmax, dy, dx);
}

static int emu_avgpool_global_fwd(hs_kernels_t *k, int B, int C, int HW, const float *x, float *y)
{
    EMU_CALL("avgpool_global_fwd", cpu()->avgpool_global_fwd(k, B, C, HW, x, y), x, y);
}

static int emu_avgpool_global_bwd(hs_kernels_t *k, int B, int C, int HW, const float *dy, float *dx)
{
    EMU_CALL("avgpool_global_bwd", cpu()->avgpool_global_bwd(k, B, C, HW, dy, dx), dy, dx);
}

/* ---- batch normalisation ---- */

static int emu_batchnorm_fwd_train(hs_kernels_t *k, int B, int C, int HW, const float *x,
                                   const float *gamma, const float *beta, float *y,
                                   float *save_mean, float *save_invstd, float *running_mean,
                                   float *running_var, float momentum, float eps)
{
    EMU_CALL("batchnorm_fwd_train",
             cpu()->batchnorm_fwd_train(k, B, C, HW, x, gamma, beta, y, save_mean, save_invstd,
                                        running_mean, running_var, momentum, eps),
             x, gamma, beta, y, save_mean, save_invstd, running_mean, running_var);
}

static int emu_batchnorm_fwd_eval(hs_kernels_t *k, int B, int C, int HW, const float *x,
                                  const float *gamma, const float *beta, const float *running_mean,
                                  const float *running_var, float eps, float *y)
{
    EMU_CALL(
        "batchnorm_fwd_eval",
        cpu()->batchnorm_fwd_eval(k, B, C, HW, x, gamma, beta, running_mean, running_var, eps, y),
        x, gamma, beta, running_mean, running_var, y);
}

static int emu_batchnorm_bwd(hs_kernels_t *k, int B, int C, int HW, const float *x, const float *dy,
                             const float *gamma, const float *save_mean, const float *save_invstd,
                             float eps, float *dx, float *dgamma, float *dbeta)
{
    EMU_CALL("batchnorm_bwd",
             cpu()->batchnorm_bwd(k, B, C, HW, x, dy, gamma, save_mean, save_invstd, eps, dx,
                                  dgamma, dbeta),
             x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
}

/* ---- optimizer and reductions ---- */

static int emu_sgd_step(hs_kernels_t *k, size_t n, float lr, float momentum, float wd, int nesterov,
                        float *param, const float *grad, float *vel)
{
    EMU_CALL_SPAN("sgd_step", n * sizeof(float),
                  cpu()->sgd_step(k, n, lr, momentum, wd, nesterov, param, grad, vel), param, grad,
                  vel);
}

static int emu_sum(hs_kernels_t *k, size_t n, const float *x, double *out_host)
{
    HS_TRY(emu_host_arg("sum", "out_host", out_host));
    EMU_CALL_SPAN("sum", n * sizeof(float), cpu()->sum(k, n, x, out_host), x);
}

static int emu_dot(hs_kernels_t *k, size_t n, const float *x, const float *y, double *out_host)
{
    HS_TRY(emu_host_arg("dot", "out_host", out_host));
    EMU_CALL_SPAN("dot", n * sizeof(float), cpu()->dot(k, n, x, y, out_host), x, y);
}

static int emu_nrm2(hs_kernels_t *k, size_t n, const float *x, double *out_host)
{
    HS_TRY(emu_host_arg("nrm2", "out_host", out_host));
    EMU_CALL_SPAN("nrm2", n * sizeof(float), cpu()->nrm2(k, n, x, out_host), x);
}

/* ---- compression ---- */

static int emu_compress(hs_kernels_t *k, const hs_kcompress_t *c, const float *x, void *out,
                        size_t *bytes)
{
    if (!c || !bytes) return HS_ERR(-EINVAL, "emu compress: NULL argument");
    HS_TRY(emu_host_arg("compress", "bytes", bytes));
    const void *const p[] = {x, out};
    const size_t span[] = {c->n * sizeof(float), c->bytes};
    emu_held_t h;
    HS_TRY(emu_enter(&h, "compress", "x, out", p, span, 2));
    int rc = cpu()->compress(k, c, x, out, bytes);
    emu_leave(&h);
    return rc;
}

static int emu_decompress(hs_kernels_t *k, const hs_kcompress_t *c, const void *in, size_t bytes,
                          float alpha, int add, float *y)
{
    if (!c) return HS_ERR(-EINVAL, "emu decompress: NULL argument");
    const void *const p[] = {in, y};
    const size_t span[] = {bytes, c->n * sizeof(float)};
    emu_held_t h;
    HS_TRY(emu_enter(&h, "decompress", "in, y", p, span, 2));
    int rc = cpu()->decompress(k, c, in, bytes, alpha, add, y);
    emu_leave(&h);
    return rc;
}

/* ---- the table ---- */

static const hs_kernel_ops_t emu_ops = {
    .size = sizeof(hs_kernel_ops_t),
    .name = "emu",
    .device = HS_DEV_EMU,
    .alloc = emu_alloc,
    .free = emu_free,
    .to_device = emu_to_device,
    .to_host = emu_to_host,
    .copy = emu_copy,
    .zero = emu_zero,
    .sync = emu_sync,
    .gemm = emu_gemm,
    .axpy = emu_axpy,
    .scale = emu_scale,
    .mix = emu_mix,
    .add_bias = emu_add_bias,
    .bias_grad = emu_bias_grad,
    .relu_fwd = emu_relu_fwd,
    .relu_bwd = emu_relu_bwd,
    .tanh_fwd = emu_tanh_fwd,
    .tanh_bwd = emu_tanh_bwd,
    .softmax_xent = emu_softmax_xent,
    .conv2d_workspace = emu_conv2d_workspace,
    .conv2d_fwd = emu_conv2d_fwd,
    .conv2d_bwd = emu_conv2d_bwd,
    .maxpool_fwd = emu_maxpool_fwd,
    .maxpool_bwd = emu_maxpool_bwd,
    .avgpool_global_fwd = emu_avgpool_global_fwd,
    .avgpool_global_bwd = emu_avgpool_global_bwd,
    .batchnorm_fwd_train = emu_batchnorm_fwd_train,
    .batchnorm_fwd_eval = emu_batchnorm_fwd_eval,
    .batchnorm_bwd = emu_batchnorm_bwd,
    .sgd_step = emu_sgd_step,
    .sum = emu_sum,
    .dot = emu_dot,
    .nrm2 = emu_nrm2,
    .ipc_handle = emu_ipc_handle,
    .ipc_open = emu_ipc_open,
    .ipc_close = emu_ipc_close,
    .compress = emu_compress,
    .decompress = emu_decompress,
};

int hs_kernels_emu_open(hs_kernels_t *k, int threads)
{
    HS_TRY(hs_kernels_cpu_open(k, threads)); /* k->impl: the CPU backend's worker threads */
    k->ops = &emu_ops;
    k->device = HS_DEV_EMU;
    return 0;
}

void hs_kernels_emu_close(hs_kernels_t *k)
{
    hs_kernels_cpu_close(k);
}

int hs_kernels_emu_poisons(void)
{
#ifdef HS_EMU_ASAN
    return 1;
#else
    return 0;
#endif
}
