/*
 * kernels/cpu/cpu_conv.c — convolution and pooling on the CPU.
 *
 * conv2d is im2col + OpenBLAS sgemm, one image at a time, the batch split among the
 * handle's threads (cpu_pool.c), so the workspace is one image's column matrix (C R S, P Q)
 * per thread; a 1x1 convolution with stride 1 and no padding uses the image itself as the
 * column matrix. The backward pass reuses the same buffer: first the columns of x for dw,
 * then, for stride 1, the columns of dy that the flipped filters turn into dx (a forward
 * convolution), otherwise the column gradient that col2im scatters to dx. With T threads,
 * threads 1..T-1 sum their dw and dbias in the workspace, added to the caller's at the end.
 *
 * A 3x3 convolution with stride 1 and padding 1 runs direct instead where cpu_direct.c has a
 * kernel for the CPU and the shapes fit: y and dx from a zero-bordered copy of the image (or
 * of dy) in the column buffer, with the filters laid out for the kernel once per call in the
 * wflip section; dw from bordered copies of groups of images (conv_dw_group). No im2col.
 *
 * With few input channels (C <= 4: a network's first layer), stride 1, 3- or 5-wide filters
 * and rows of at least 8 outputs, y and dw run direct too (fwdk_image, dwk_image: portable
 * C in vectors of 8, compiled for AVX2+FMA where the CPU has it), from a zero-bordered copy
 * of the image: the gemms of LeNet-5's first layer (M = 6 or N = 25) run slowly in OpenBLAS.
 */
#include "kernels/cpu/cpu_internal.h"

#include "hearsay/common.h"
#include "hearsay/kernels.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- convolution ---- */

static int conv_check(const char *what, const hs_conv2d_desc_t *d)
{
    if (!d) return HS_ERR(-EINVAL, "%s: descriptor is NULL", what);
    if (d->B < 0 || d->C <= 0 || d->H <= 0 || d->W <= 0 || d->K <= 0 || d->R <= 0 || d->S <= 0)
        return HS_ERR(-EINVAL, "%s: bad shape B=%d C=%d H=%d W=%d K=%d R=%d S=%d", what, d->B, d->C,
                      d->H, d->W, d->K, d->R, d->S);
    if (d->pad < 0 || d->stride <= 0)
        return HS_ERR(-EINVAL, "%s: bad pad=%d or stride=%d", what, d->pad, d->stride);
    if (d->H + 2 * d->pad < d->R || d->W + 2 * d->pad < d->S)
        return HS_ERR(-EINVAL, "%s: filter %dx%d is larger than the padded input %dx%d", what, d->R,
                      d->S, d->H + 2 * d->pad, d->W + 2 * d->pad);
    int P = (d->H + 2 * d->pad - d->R) / d->stride + 1;
    int Q = (d->W + 2 * d->pad - d->S) / d->stride + 1;
    if (d->P != P || d->Q != Q)
        return HS_ERR(-EINVAL, "%s: output size %dx%d does not match the geometry (expected %dx%d)",
                      what, d->P, d->Q, P, Q);
    /* gemm takes int sizes: the column matrix's dimensions must fit. */
    if ((int64_t)d->C * d->R * d->S > INT_MAX || (int64_t)P * Q > INT_MAX)
        return HS_ERR(-EINVAL, "%s: geometry too large for int gemm sizes", what);
    return 0;
}

static int conv_is_pointwise(const hs_conv2d_desc_t *d)
{
    return d->R == 1 && d->S == 1 && d->pad == 0 && d->stride == 1;
}

/* A "same" convolution (stride 1, square filters, P = H, Q = W): dx is the convolution of dy
 * (padded by R-1-pad) with the filters flipped and C, K swapped, so backward data is im2col +
 * gemm like the forward pass, with no col2im scatter and as many multiply-adds. (For a valid
 * convolution it would also multiply the zeros around dy: more work than col2im saves.) */
static int conv_bwd_as_fwd(const hs_conv2d_desc_t *d)
{
    return d->stride == 1 && d->R == d->S && !conv_is_pointwise(d) && d->P == d->H && d->Q == d->W;
}

/* The geometry of that convolution: dy (B, K, P, Q) to dx (B, C, H, W). */
static hs_conv2d_desc_t conv_bwd_desc(const hs_conv2d_desc_t *d)
{
    hs_conv2d_desc_t t = *d;
    t.C = d->K, t.H = d->P, t.W = d->Q;
    t.K = d->C, t.P = d->H, t.Q = d->W;
    t.pad = d->R - 1 - d->pad;
    return t;
}

/* The forward pass runs direct (cpu_direct.c): 3x3, stride 1, padding 1. */
static int conv_direct_fwd(const hs_conv2d_desc_t *d)
{
    return d->R == 3 && d->S == 3 && d->stride == 1 && d->pad == 1 && d->P == d->H &&
           d->Q == d->W && hs_kcpu_direct3_fits(d->C, d->K, d->H, d->W);
}

/* dx runs direct: the convolution of dy (K channels) with the flipped filters into C. */
static int conv_direct_dx(const hs_conv2d_desc_t *d)
{
    return conv_direct_fwd(d) && hs_kcpu_direct3_fits(d->K, d->C, d->H, d->W);
}

/* dw runs direct (cpu_direct.c), in groups of conv_dw_group images. */
static int conv_direct_dw(const hs_conv2d_desc_t *d)
{
    return d->R == 3 && d->S == 3 && d->stride == 1 && d->pad == 1 && d->P == d->H &&
           d->Q == d->W && hs_kcpu_direct3_dw_fits(d->C, d->K, d->H, d->W);
}

/* dw runs through dwk_image below: few input channels, stride 1. */
#define DWK_MAX_C 4

static int conv_direct_dwk(const hs_conv2d_desc_t *d)
{
    return d->stride == 1 && (d->S == 3 || d->S == 5) && d->Q >= 8 && d->C <= DWK_MAX_C &&
           !conv_direct_dw(d);
}

/* The forward pass runs through fwdk_image below: the same shapes. */
static int conv_direct_fwdk(const hs_conv2d_desc_t *d)
{
    return d->stride == 1 && (d->S == 3 || d->S == 5) && d->Q >= 8 && d->C <= DWK_MAX_C &&
           !conv_direct_fwd(d);
}

static size_t dwk_pad_floats(const hs_conv2d_desc_t *d)
{
    return (size_t)d->C * (d->H + 2 * d->pad) * (d->W + 2 * d->pad);
}

/* Images per call of the direct dw kernel: about 1024 positions, so that its sums across the
 * vector lanes are few beside the multiply-adds on small planes. */
static int conv_dw_group(const hs_conv2d_desc_t *d)
{
    return HS_MAX(1, HS_MIN(d->B, 1024 / (d->H * d->W)));
}

static size_t round16(size_t n)
{
    return (n + 15) & ~(size_t)15;
}

/* The workspace, in floats, T threads:
 *   col   T x (C R S, P Q)      one image's column matrix per thread (also (K R S, H W))
 *   wflip (C, K R S)            the flipped filters (conv_bwd_as_fwd), or the filters laid
 *                               out for the direct kernel (forward, or flipped for dx)
 *   dw    T x (K, C R S)        each thread's dw: (K R S, C) flipped for conv_bwd_as_fwd,
 *                               otherwise thread 0 adds to the caller's dw directly
 *   db    (T - 1) x (K)         threads 1..T-1's dbias */
typedef struct {
    size_t col, wflip, dw, db; /* each section's size in floats (rounded to 64 bytes) */
    size_t total;
} conv_ws_t;

static conv_ws_t conv_ws_layout(const hs_conv2d_desc_t *d, int T)
{
    conv_ws_t l = {0};
    const size_t CRS = (size_t)d->C * d->R * d->S, PQ = (size_t)d->P * d->Q;
    const int as_fwd = conv_bwd_as_fwd(d);
    if (!conv_is_pointwise(d)) {
        l.col = CRS * PQ;
        if (as_fwd) l.col = HS_MAX(l.col, (size_t)d->K * d->R * d->S * d->H * d->W);
        if (conv_direct_fwd(d))
            l.col = HS_MAX(l.col, hs_kcpu_direct3_pad_floats(HS_MAX(d->C, d->K), d->H, d->W));
        if (conv_direct_dwk(d) || conv_direct_fwdk(d)) l.col = HS_MAX(l.col, dwk_pad_floats(d));
        if (conv_direct_dw(d))
            l.col = HS_MAX(l.col,
                           (size_t)conv_dw_group(d) * hs_kcpu_direct3_pad_floats(d->C, d->H, d->W));
        l.col = round16(l.col);
    }
    if (as_fwd || conv_direct_fwd(d)) l.wflip = round16((size_t)d->K * CRS);
    if (T > 1 || as_fwd) l.dw = round16((size_t)d->K * CRS);
    if (T > 1) l.db = round16((size_t)d->K);
    l.total = (size_t)T * (l.col + l.dw) + l.wflip + (size_t)(T - 1) * l.db;
    return l;
}

size_t hs_kcpu_conv2d_workspace(hs_kernels_t *k, const hs_conv2d_desc_t *d)
{
    if (conv_check("conv2d_workspace", d) < 0) return 0;
    return conv_ws_layout(d, hs_kcpu_threads(k)).total * sizeof(float);
}

static int ceil_div(int a, int b) /* a >= 0, b > 0 */
{
    return (a + b - 1) / b;
}

/* For filter column s, the output columns q in [*lo, *hi) read an input column inside [0, W). */
static void valid_q(const hs_conv2d_desc_t *d, int s, int *lo, int *hi)
{
    int off = d->pad - s; /* iw = q stride - off */
    int l = off > 0 ? ceil_div(off, d->stride) : 0;
    int h = ceil_div(d->W + off, d->stride); /* W + off >= W - S + 1 > 0 */
    if (h > d->Q) h = d->Q;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* im2col for stride 1 and an output as large as the input (P = H, Q = W), one channel: plane
 * (r, s) of col is the plane x shifted by (r - pad, s - pad), so its valid rows are one
 * contiguous run; the columns that wrapped around from the neighbouring row are then zeroed.
 * Loops of 16 floats, not memcpy: planes of 64-1024 floats make the calls cost more than the
 * copying. */
HS_KCPU_SIMD static void im2col_same_channel(int R, int S, int pad, int H, int W,
                                             const float *restrict x, float *restrict col)
{
    const size_t HW = (size_t)H * W;
    for (int r = 0; r < R; r++)
        for (int s = 0; s < S; s++) {
            float *restrict dst = col + (size_t)(r * S + s) * HW; // (H, W)
            const int dr = r - pad, ds = s - pad;
            const int p0 = HS_MAX(0, -dr), p1 = HS_MIN(H, H - dr);
            const int q0 = HS_MAX(0, -ds), q1 = HS_MIN(W, W - ds);
            if (p0 >= p1 || q0 >= q1) {
                HS_KCPU_FOR(i, HW, dst[i] = 0.0f);
                continue;
            }
            /* flat [i0, i1) of dst reads x[i + dr W + ds], all inside the plane */
            const size_t i0 = (size_t)p0 * W + q0, i1 = (size_t)(p1 - 1) * W + q1;
            const float *restrict src = x + (ptrdiff_t)i0 + (ptrdiff_t)dr * W + ds;
            float *restrict mid = dst + i0, *restrict tail = dst + i1;
            HS_KCPU_FOR(i, i0, dst[i] = 0.0f);
            HS_KCPU_FOR(i, i1 - i0, mid[i] = src[i]);
            HS_KCPU_FOR(i, HW - i1, tail[i] = 0.0f);
            if (q0 > 0 || q1 < W)
                for (int p = p0; p < p1; p++) {
                    float *row = dst + (size_t)p * W;
                    for (int q = 0; q < q0; q++) row[q] = 0.0f;
                    for (int q = q1; q < W; q++) row[q] = 0.0f;
                }
        }
}

static void im2col_same(const hs_conv2d_desc_t *d, const float *restrict x, float *restrict col)
{
    const size_t HW = (size_t)d->H * d->W, RS = (size_t)d->R * d->S;
    for (int c = 0; c < d->C; c++)
        im2col_same_channel(d->R, d->S, d->pad, d->H, d->W, x + (size_t)c * HW,
                            col + (size_t)c * RS * HW);
}

/* col (C R S, P Q) = the receptive fields of one image x (C, H, W), zeros for padding. */
static void im2col(const hs_conv2d_desc_t *d, const float *restrict x, float *restrict col)
{
    const int H = d->H, W = d->W, P = d->P, Q = d->Q, st = d->stride;
    if (st == 1 && P == H && Q == W) {
        im2col_same(d, x, col);
        return;
    }
    const size_t PQ = (size_t)P * Q;
    for (int c = 0; c < d->C; c++)
        for (int r = 0; r < d->R; r++)
            for (int s = 0; s < d->S; s++) {
                float *dst = col + ((size_t)(c * d->R + r) * d->S + s) * PQ; // (P, Q)
                int lo, hi;
                valid_q(d, s, &lo, &hi);
                for (int p = 0; p < P; p++) {
                    float *drow = dst + (size_t)p * Q;
                    int ih = p * st - d->pad + r;
                    if (ih < 0 || ih >= H || lo == hi) {
                        memset(drow, 0, (size_t)Q * sizeof(float));
                        continue;
                    }
                    /* input column of output q is q st - pad + s, >= 0 from q = lo on */
                    const float *src = x + ((size_t)c * H + ih) * W + (lo * st - d->pad + s);
                    if (lo > 0) memset(drow, 0, (size_t)lo * sizeof(float));
                    if (st == 1)
                        memcpy(drow + lo, src, (size_t)(hi - lo) * sizeof(float));
                    else
                        for (int q = lo; q < hi; q++) drow[q] = src[(q - lo) * st];
                    if (hi < Q) memset(drow + hi, 0, (size_t)(Q - hi) * sizeof(float));
                }
            }
}

/* 8 floats in vector registers (GCC's vector extension; two SSE registers on baseline
 * x86-64), loaded and stored with memcpy, unaligned. */
typedef float hs_v8f __attribute__((vector_size(32)));

/* y (n) += x (n) for short rows (Q floats): inlined, no dispatch through a clone; blocks of 8
 * as vectors (the compiler leaves a scalar loop of unknown count as it is), then the tail. */
static inline void add_row(int n, const float *restrict x, float *restrict y)
{
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        hs_v8f a, b;
        memcpy(&a, x + i, sizeof(a));
        memcpy(&b, y + i, sizeof(b));
        b += a;
        memcpy(y + i, &b, sizeof(b));
    }
    for (; i < n; i++) y[i] += x[i];
}

/* dx (C, H, W) += scatter of the column gradient dcol (C R S, P Q); the inverse of im2col. */
static void col2im(const hs_conv2d_desc_t *d, const float *restrict dcol, float *restrict dx)
{
    const int H = d->H, W = d->W, P = d->P, Q = d->Q, st = d->stride;
    const size_t PQ = (size_t)P * Q;
    for (int c = 0; c < d->C; c++)
        for (int r = 0; r < d->R; r++)
            for (int s = 0; s < d->S; s++) {
                const float *src = dcol + ((size_t)(c * d->R + r) * d->S + s) * PQ; // (P, Q)
                int lo, hi;
                valid_q(d, s, &lo, &hi);
                for (int p = 0; p < P; p++) {
                    int ih = p * st - d->pad + r;
                    if (ih < 0 || ih >= H || lo == hi) continue;
                    const float *srow = src + (size_t)p * Q;
                    float *dst = dx + ((size_t)c * H + ih) * W + (lo * st - d->pad + s);
                    if (st == 1) {
                        add_row(hi - lo, srow + lo, dst);
                    } else {
                        for (int q = lo; q < hi; q++) dst[(q - lo) * st] += srow[q];
                    }
                }
            }
}

static int conv_ws_check(const char *what, hs_kernels_t *k, const hs_conv2d_desc_t *d, void *ws,
                         size_t ws_bytes)
{
    size_t need = hs_kcpu_conv2d_workspace(k, d);
    if (need && (!ws || ws_bytes < need))
        return HS_ERR(-EINVAL, "%s: workspace of %zu bytes is too small (need %zu)", what,
                      ws ? ws_bytes : 0, need);
    return 0;
}

/* ---- direct dw for few input channels (a network's first layer: LeNet-5's 1 channel) ----
 * There dw (K, C R S) += dy (K, PQ) col^T is a gemm of N = C R S = 25 columns, which OpenBLAS
 * runs slowly, after an im2col of 25 planes. Instead, per image, from a zero-bordered copy xp
 * (C, Hp, Wp) of x: dw[k][c][r][s] += sum over p, q of dy[k][p][q] xp[c][p + r][q + s], in
 * vectors of 8 along q (the last one overlapping the one before, its repeated lanes of dy
 * masked to zero), 2 output channels by the S taps of a filter row in registers, each sum of 8
 * lanes added to dw once per image. Stride 1, S = 3 or 5, Q >= 8, C <= DWK_MAX_C
 * (conv_direct_dwk). */
/* xp (C, H + 2 pad, W + 2 pad) = x (C, H, W) with a border of zeros */
static void dwk_pad(const hs_conv2d_desc_t *d, const float *restrict x, float *restrict xp)
{
    const int H = d->H, W = d->W, pad = d->pad, Wp = W + 2 * pad, Hp = H + 2 * pad;
    for (int c = 0; c < d->C; c++) {
        float *dst = xp + (size_t)c * Hp * Wp;
        const float *src = x + (size_t)c * H * W;
        memset(dst, 0, (size_t)pad * Wp * sizeof(float));
        for (int h = 0; h < H; h++) {
            float *row = dst + (size_t)(h + pad) * Wp;
            for (int i = 0; i < pad; i++) row[i] = row[pad + W + i] = 0.0f;
            memcpy(row + pad, src + (size_t)h * W, (size_t)W * sizeof(float));
        }
        memset(dst + (size_t)(H + pad) * Wp, 0, (size_t)pad * Wp * sizeof(float));
    }
}

typedef int32_t hs_v8i __attribute__((vector_size(32)));

/* by pointer: a 256-bit vector passed by value has no fixed ABI without AVX */
static inline float hsum8(const hs_v8f *v)
{
    return (((*v)[0] + (*v)[4]) + ((*v)[1] + (*v)[5])) +
           (((*v)[2] + (*v)[6]) + ((*v)[3] + (*v)[7]));
}

/* KB output channels from k on, taps (c, r, 0 .. S-1); inlined with constant KB and S */
static inline __attribute__((always_inline)) void
dwk_tile(int KB, int S, const hs_conv2d_desc_t *d, int k, int c, int r, const float *restrict xp,
         const float *restrict dy, float *restrict dw)
{
    const int P = d->P, Q = d->Q, Wp = d->W + 2 * d->pad, Hp = d->H + 2 * d->pad;
    const size_t PQ = (size_t)P * Q;
    const int nch = (Q + 7) / 8, rep = 8 * nch - Q; /* lanes of the last vector seen before */
    hs_v8i last;
    for (int i = 0; i < 8; i++) last[i] = i < rep ? 0 : -1;
    hs_v8f acc[2][5];
    _Pragma("GCC unroll 2") for (int i = 0; i < KB; i++)
        _Pragma("GCC unroll 5") for (int s = 0; s < S; s++) acc[i][s] = (hs_v8f){0};
    const float *xc = xp + (size_t)c * Hp * Wp + (size_t)r * Wp;
    for (int p = 0; p < P; p++) {
        const float *xr = xc + (size_t)p * Wp;
        const float *dr = dy + (size_t)k * PQ + (size_t)p * Q;
        for (int j = 0; j < nch; j++) {
            const int q0 = j < nch - 1 ? 8 * j : Q - 8;
            hs_v8f dv[2];
            _Pragma("GCC unroll 2") for (int i = 0; i < KB; i++)
            {
                memcpy(&dv[i], dr + (size_t)i * PQ + q0, sizeof(dv[i]));
                if (j == nch - 1) dv[i] = (hs_v8f)((hs_v8i)dv[i] & last);
            }
            _Pragma("GCC unroll 5") for (int s = 0; s < S; s++)
            {
                hs_v8f xv;
                memcpy(&xv, xr + q0 + s, sizeof(xv));
                _Pragma("GCC unroll 2") for (int i = 0; i < KB; i++) acc[i][s] += dv[i] * xv;
            }
        }
    }
    const int R = d->R, C = d->C;
    _Pragma("GCC unroll 2") for (int i = 0; i < KB; i++)
        _Pragma("GCC unroll 5") for (int s = 0; s < S; s++)
            dw[(((size_t)(k + i) * C + c) * R + r) * S + s] += hsum8(&acc[i][s]);
}

static inline __attribute__((always_inline)) void dwk_image_s(int S, const hs_conv2d_desc_t *d,
                                                              const float *restrict xp,
                                                              const float *restrict dy,
                                                              float *restrict dw)
{
    for (int c = 0; c < d->C; c++)
        for (int r = 0; r < d->R; r++) {
            int k = 0;
            for (; k + 2 <= d->K; k += 2) dwk_tile(2, S, d, k, c, r, xp, dy, dw);
            if (k < d->K) dwk_tile(1, S, d, k, c, r, xp, dy, dw);
        }
}

/* dw (K, C, R, S) += the image's share, from its padded copy xp and dy (K, P, Q) */
HS_KCPU_SIMD static void dwk_image(const hs_conv2d_desc_t *d, const float *restrict xp,
                                   const float *restrict dy, float *restrict dw)
{
    if (d->S == 5)
        dwk_image_s(5, d, xp, dy, dw);
    else
        dwk_image_s(3, d, xp, dy, dw);
}

/* y rows of KB output channels from k on, vectors j0 .. j0 + NC - 1 of row p (the last
 * vector of a row at Q - 8, overlapping: its repeated lanes get the same values again) */
static inline __attribute__((always_inline)) void
fwdk_tile(int KB, int NC, int S, const hs_conv2d_desc_t *d, int k, int p, int j0,
          const float *restrict xp, const float *restrict w, float *restrict y)
{
    const int P = d->P, Q = d->Q, Wp = d->W + 2 * d->pad, Hp = d->H + 2 * d->pad;
    const int R = d->R, C = d->C, nch = (Q + 7) / 8;
    int q0[2];
    _Pragma("GCC unroll 2") for (int j = 0; j < NC; j++) q0[j] =
        j0 + j < nch - 1 ? 8 * (j0 + j) : Q - 8;
    hs_v8f acc[3][2];
    _Pragma("GCC unroll 3") for (int i = 0; i < KB; i++)
        _Pragma("GCC unroll 2") for (int j = 0; j < NC; j++) acc[i][j] = (hs_v8f){0};
    for (int c = 0; c < C; c++)
        for (int r = 0; r < R; r++) {
            const float *xr = xp + ((size_t)c * Hp + p + r) * Wp;
            const float *wr = w + (((size_t)k * C + c) * R + r) * S;
            _Pragma("GCC unroll 5") for (int s = 0; s < S; s++)
            {
                hs_v8f xv[2];
                _Pragma("GCC unroll 2") for (int j = 0; j < NC; j++)
                    memcpy(&xv[j], xr + q0[j] + s, sizeof(xv[j]));
                _Pragma("GCC unroll 3") for (int i = 0; i < KB; i++)
                {
                    const float wv = wr[(size_t)i * C * R * S + s];
                    _Pragma("GCC unroll 2") for (int j = 0; j < NC; j++) acc[i][j] += wv * xv[j];
                }
            }
        }
    _Pragma("GCC unroll 3") for (int i = 0; i < KB; i++)
        _Pragma("GCC unroll 2") for (int j = 0; j < NC; j++)
            memcpy(y + ((size_t)(k + i) * P + p) * Q + q0[j], &acc[i][j], sizeof(acc[i][j]));
}

static inline __attribute__((always_inline)) void fwdk_image_s(int S, const hs_conv2d_desc_t *d,
                                                               const float *restrict xp,
                                                               const float *restrict w,
                                                               float *restrict y)
{
    const int nch = (d->Q + 7) / 8;
    for (int p = 0; p < d->P; p++) {
        int k = 0;
        for (; k + 3 <= d->K; k += 3) {
            int j = 0;
            for (; j + 2 <= nch; j += 2) fwdk_tile(3, 2, S, d, k, p, j, xp, w, y);
            if (j < nch) fwdk_tile(3, 1, S, d, k, p, j, xp, w, y);
        }
        for (; k < d->K; k++) {
            int j = 0;
            for (; j + 2 <= nch; j += 2) fwdk_tile(1, 2, S, d, k, p, j, xp, w, y);
            if (j < nch) fwdk_tile(1, 1, S, d, k, p, j, xp, w, y);
        }
    }
}

/* y (K, P, Q) = the convolution of one image's padded copy xp with w (K, C, R, S): stride 1,
 * few input channels (conv_direct_fwdk), in vectors of 8 along q, tiles of 3 output channels
 * by 2 vectors; each output a sum in the order (c, r, s). */
HS_KCPU_SIMD static void fwdk_image(const hs_conv2d_desc_t *d, const float *restrict xp,
                                    const float *restrict w, float *restrict y)
{
    if (d->S == 5)
        fwdk_image_s(5, d, xp, w, y);
    else
        fwdk_image_s(3, d, xp, w, y);
}

/* One conv2d call, shared by the threads: each takes a contiguous run of images. */
typedef struct {
    const hs_conv2d_desc_t *d;
    conv_ws_t l;
    const float *x, *w, *bias, *dy; // x (B, C, H, W), w (K, C, R, S), bias (K), dy (B, K, P, Q)
    float *y, *dx, *dw, *dbias;     // y (B, K, P, Q), dx (B, C, H, W), dw (K, C R S), dbias (K)
    float *ws;                      // the workspace (conv_ws_t)
    int Tw;                         // the threads the workspace is laid out for
} conv_task_t;

/* (a 1x1 convolution may have no workspace: ws NULL, and NULL + 0 is undefined) */
static float *task_col(const conv_task_t *a, int t)
{
    return a->ws ? a->ws + (size_t)t * a->l.col : NULL;
}

static float *task_wflip(const conv_task_t *a)
{
    return a->ws ? a->ws + (size_t)a->Tw * a->l.col : NULL;
}

/* Thread t's dw buffer and, for t >= 1, its dbias (thread 0 adds to the caller's). */
static float *task_dw(const conv_task_t *a, int t)
{
    return task_wflip(a) + a->l.wflip + (size_t)t * a->l.dw;
}

static float *task_db(const conv_task_t *a, int t)
{
    return t == 0
               ? a->dbias
               : task_wflip(a) + a->l.wflip + (size_t)a->Tw * a->l.dw + (size_t)(t - 1) * a->l.db;
}

static void conv_fwd_share(void *arg, int t, int T)
{
    const conv_task_t *a = arg;
    const hs_conv2d_desc_t *d = a->d;
    const int K = d->K, CRS = d->C * d->R * d->S, PQ = d->P * d->Q;
    const size_t x_img = (size_t)d->C * d->H * d->W, y_img = (size_t)K * PQ;
    float *ws = task_col(a, t);
    size_t b0, b1;
    hs_kcpu_share((size_t)d->B, t, T, &b0, &b1);
    const int direct = conv_direct_fwd(d), fwdk = conv_direct_fwdk(d);
    for (size_t b = b0; b < b1; b++) {
        const float *xb = a->x + b * x_img; // (C, H, W)
        float *yb = a->y + b * y_img;       // (K, P, Q)
        const float *col = xb;              // (C R S, P Q)
        if (direct) {
            hs_kcpu_direct3_image(d->C, K, d->H, d->W, xb, task_wflip(a), ws, yb);
        } else if (fwdk) {
            dwk_pad(d, xb, ws);
            fwdk_image(d, ws, a->w, yb);
        } else {
            if (a->l.col) {
                im2col(d, xb, ws);
                col = ws;
            }
            /* y_b (K, PQ) = w (K, CRS) col (CRS, PQ) */
            hs_kcpu_sgemm(0, 0, K, PQ, CRS, 1.0f, a->w, CRS, col, PQ, 0.0f, yb, PQ);
        }
        if (a->bias)
            for (int kk = 0; kk < K; kk++) {
                float *restrict plane = yb + (size_t)kk * PQ;
                const float bk = a->bias[kk];
                HS_KCPU_FOR(i, (size_t)PQ, plane[i] += bk);
            }
    }
}

int hs_kcpu_conv2d_fwd(hs_kernels_t *k, const hs_conv2d_desc_t *d, const float *x, const float *w,
                       const float *bias, float *y, void *ws, size_t ws_bytes)
{
    HS_TRY(conv_check("conv2d_fwd", d));
    HS_TRY(conv_ws_check("conv2d_fwd", k, d, ws, ws_bytes));
    if (d->B && (!x || !w || !y)) return HS_ERR(-EINVAL, "conv2d_fwd: NULL x, w or y");
    if (!d->B) return 0;
    { /* operands in the products' precision (hearsay/kernels.h) */
        const float *src[2] = {x, w}, *rounded[2];
        size_t len[2] = {(size_t)d->B * d->C * d->H * d->W, (size_t)d->K * d->C * d->R * d->S};
        HS_TRY(hs_kernels_round_operands(k, 2, src, len, rounded));
        x = rounded[0];
        w = rounded[1];
    }
    const int T = HS_MIN(hs_kcpu_threads(k), d->B);
    conv_task_t a = {.d = d,
                     .l = conv_ws_layout(d, hs_kcpu_threads(k)),
                     .x = x,
                     .w = w,
                     .bias = bias,
                     .y = y,
                     .ws = ws,
                     .Tw = hs_kcpu_threads(k)};
    if (conv_direct_fwd(d)) hs_kcpu_direct3_pack_w(w, d->K, d->C, 0, task_wflip(&a));
    if (T == 1)
        conv_fwd_share(&a, 0, 1);
    else
        hs_kcpu_parallel(k, conv_fwd_share, &a);
    return 0;
}

static float plane_sum(size_t n, const float *restrict x)
{
    float acc[16] = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (size_t j = 0; j < 16; j++) acc[j] += x[i + j];
    float t = 0.0f;
    for (; i < n; i++) t += x[i];
    for (int j = 0; j < 16; j++) t += acc[j];
    return t;
}

/* With conv_bwd_as_fwd, one column matrix of dy per image serves dw and dx:
 *   dx_b (C, HW) = wflip (C, KRS) col (KRS, HW)
 *   dwt (KRS, C) += col (KRS, HW) x_b^T (HW, C), dwt[k r s][c] = dw[k][c][R-1-r][S-1-s]
 * so the backward pass makes one im2col per image, not two. dw takes this route with or
 * without dx, so that it is the same to the bit either way; not with few input channels
 * (a network's first layer: C = 3), where that gemm is too narrow (N = C) to run fast and
 * the columns of x are the smaller matrix. */
static int bwd_shared_col(const conv_task_t *a)
{
    return a->dw && conv_bwd_as_fwd(a->d) && a->d->C >= 8 && !conv_direct_dw(a->d);
}

/* dx of image b, not through the columns shared with dw; ws: the thread's column buffer */
static void conv_dx_image(const conv_task_t *a, size_t b, float *ws)
{
    const hs_conv2d_desc_t *d = a->d;
    const int K = d->K, CRS = d->C * d->R * d->S, PQ = d->P * d->Q;
    const int KRS = K * d->R * d->S, HW = d->H * d->W;
    const size_t x_img = (size_t)d->C * d->H * d->W, y_img = (size_t)K * PQ;
    const float *dyb = a->dy + b * y_img; // (K, P, Q)
    float *dxb = a->dx + b * x_img;       // (C, H, W)
    if (!a->l.col) {
        /* 1x1: dx_b (C, PQ) = w^T (C, K) dy_b (K, PQ) */
        hs_kcpu_sgemm(1, 0, CRS, PQ, K, 1.0f, a->w, CRS, dyb, PQ, 0.0f, dxb, PQ);
    } else if (conv_direct_dx(d)) {
        hs_kcpu_direct3_image(K, d->C, d->H, d->W, dyb, task_wflip(a), ws, dxb);
    } else if (conv_bwd_as_fwd(d)) {
        /* dx_b (C, HW) = wflip (C, KRS) im2col(dy_b) (KRS, HW) */
        const hs_conv2d_desc_t db = conv_bwd_desc(d);
        im2col(&db, dyb, ws);
        hs_kcpu_sgemm(0, 0, d->C, HW, KRS, 1.0f, task_wflip(a), KRS, ws, HW, 0.0f, dxb, HW);
    } else {
        /* dcol (CRS, PQ) = w^T (CRS, K) dy_b (K, PQ), scattered back by col2im */
        hs_kcpu_sgemm(1, 0, CRS, PQ, K, 1.0f, a->w, CRS, dyb, PQ, 0.0f, ws, PQ);
        memset(dxb, 0, x_img * sizeof(float));
        col2im(d, ws, dxb);
    }
}

static void conv_bwd_share(void *arg, int t, int T)
{
    const conv_task_t *a = arg;
    const hs_conv2d_desc_t *d = a->d;
    const int K = d->K, CRS = d->C * d->R * d->S, PQ = d->P * d->Q;
    const size_t x_img = (size_t)d->C * d->H * d->W, y_img = (size_t)K * PQ;
    const int shared = bwd_shared_col(a);
    const int direct_dx = conv_direct_dx(d), dwk = conv_direct_dwk(d);
    const int KRS = K * d->R * d->S, HW = d->H * d->W;
    float *ws = task_col(a, t), *dbias = a->dbias ? task_db(a, t) : NULL;
    /* dw: thread t's (KRS, C) buffer when shared, else the caller's for thread 0 */
    float *dw = NULL;
    if (a->dw) dw = shared || t > 0 ? task_dw(a, t) : a->dw;
    if (dw && dw != a->dw) memset(dw, 0, (size_t)K * CRS * sizeof(float));
    if (t > 0 && dbias) memset(dbias, 0, (size_t)K * sizeof(float));
    const hs_conv2d_desc_t db = conv_bwd_desc(d);
    size_t b0, b1;
    hs_kcpu_share((size_t)d->B, t, T, &b0, &b1);
    if (conv_direct_dw(d)) {
        /* groups of G images: their dbias and dx, then dw from their padded copies */
        const size_t G = (size_t)conv_dw_group(d),
                     xpad = hs_kcpu_direct3_pad_floats(d->C, d->H, d->W);
        for (size_t b = b0; b < b1; b += G) {
            const size_t g = HS_MIN(G, b1 - b);
            for (size_t i = b; i < b + g; i++) {
                if (dbias)
                    for (int kk = 0; kk < K; kk++)
                        dbias[kk] += plane_sum((size_t)PQ, a->dy + i * y_img + (size_t)kk * PQ);
                if (a->dx) conv_dx_image(a, i, ws);
            }
            if (!dw) continue;
            for (size_t i = 0; i < g; i++)
                hs_kcpu_direct3_pad(d->C, d->H, d->W, a->x + (b + i) * x_img, ws + i * xpad);
            hs_kcpu_direct3_dw(d->C, K, d->H, d->W, (int)g, ws, a->dy + b * y_img, dw);
        }
        return;
    }
    for (size_t b = b0; b < b1; b++) {
        const float *dyb = a->dy + b * y_img;             // (K, P, Q)
        const float *xb = a->x ? a->x + b * x_img : NULL; // (C, H, W)
        if (dbias)
            for (int kk = 0; kk < K; kk++)
                dbias[kk] += plane_sum((size_t)PQ, dyb + (size_t)kk * PQ);
        if (shared) {
            if (a->dx && direct_dx)
                hs_kcpu_direct3_image(K, d->C, d->H, d->W, dyb, task_wflip(a), ws,
                                      a->dx + b * x_img);
            im2col(&db, dyb, ws); /* (KRS, HW) */
            if (a->dx && !direct_dx)
                hs_kcpu_sgemm(0, 0, d->C, HW, KRS, 1.0f, task_wflip(a), KRS, ws, HW, 0.0f,
                              a->dx + b * x_img, HW);
            hs_kcpu_sgemm(0, 1, KRS, d->C, HW, 1.0f, ws, HW, xb, HW, 1.0f, dw, d->C);
            continue;
        }
        if (dw && dwk) {
            dwk_pad(d, xb, ws);
            dwk_image(d, ws, dyb, dw);
        } else if (dw) {
            const float *col = xb; // (C R S, P Q)
            if (a->l.col) {
                im2col(d, xb, ws);
                col = ws;
            }
            /* dw (K, CRS) += dy_b (K, PQ) col^T (PQ, CRS) */
            hs_kcpu_sgemm(0, 1, K, CRS, PQ, 1.0f, dyb, PQ, col, PQ, 1.0f, dw, CRS);
        }
        if (a->dx) conv_dx_image(a, b, ws);
    }
}

int hs_kcpu_conv2d_bwd(hs_kernels_t *k, const hs_conv2d_desc_t *d, const float *x, const float *w,
                       const float *dy, float *dx, float *dw, float *dbias, void *ws,
                       size_t ws_bytes)
{
    HS_TRY(conv_check("conv2d_bwd", d));
    HS_TRY(conv_ws_check("conv2d_bwd", k, d, ws, ws_bytes));
    if (d->B && (!dy || (dw && !x) || (dx && !w)))
        return HS_ERR(-EINVAL, "conv2d_bwd: NULL input (dy, x for dw, or w for dx)");
    if (!d->B) return 0;
    { /* operands in the products' precision (hearsay/kernels.h); x only for dw, w for dx */
        const float *src[3] = {dy, dw ? x : NULL, dx ? w : NULL}, *rounded[3];
        size_t len[3] = {(size_t)d->B * d->K * d->P * d->Q, (size_t)d->B * d->C * d->H * d->W,
                         (size_t)d->K * d->C * d->R * d->S};
        HS_TRY(hs_kernels_round_operands(k, 3, src, len, rounded));
        dy = rounded[0];
        if (dw) x = rounded[1];
        if (dx) w = rounded[2];
    }
    const int Tk = hs_kcpu_threads(k);
    int T = HS_MIN(Tk, d->B);
    const int C = d->C, K = d->K, R = d->R, S = d->S;
    conv_task_t a = {.d = d,
                     .l = conv_ws_layout(d, Tk),
                     .x = x,
                     .w = w,
                     .dy = dy,
                     .dx = dx,
                     .dw = dw,
                     .dbias = dbias,
                     .ws = ws,
                     .Tw = Tk};
    if (dx && conv_direct_dx(d)) {
        hs_kcpu_direct3_pack_w(w, K, C, 1, task_wflip(&a));
    } else if (dx && conv_bwd_as_fwd(d)) {
        /* wflip (C, K, R, S) [c][k][r][s] = w (K, C, R, S) [k][c][R-1-r][S-1-s] */
        float *wf = task_wflip(&a);
        for (int c = 0; c < C; c++)
            for (int kk = 0; kk < K; kk++)
                for (int r = 0; r < R; r++)
                    for (int s = 0; s < S; s++)
                        wf[(((size_t)c * K + kk) * R + r) * S + s] =
                            w[(((size_t)kk * C + c) * R + (R - 1 - r)) * S + (S - 1 - s)];
    }
    int ran = 1; /* shares run: 1, or Tk */
    if (T == 1)
        conv_bwd_share(&a, 0, 1);
    else
        ran = hs_kcpu_parallel(k, conv_bwd_share, &a);
    /* add the threads' buffers of dw and dbias (those that ran over at least one image) */
    const int shared = bwd_shared_col(&a);
    T = HS_MIN(ran, d->B);
    const size_t nw = (size_t)K * C * R * S;
    for (int t = 0; t < T; t++) {
        if (dw && shared) {
            /* dwt (K, R, S, C) [k][r][s][c] -> dw (K, C, R, S) [k][c][R-1-r][S-1-s] */
            const float *src = task_dw(&a, t);
            for (int kk = 0; kk < K; kk++)
                for (int r = 0; r < R; r++)
                    for (int s = 0; s < S; s++)
                        for (int c = 0; c < C; c++)
                            dw[(((size_t)kk * C + c) * R + (R - 1 - r)) * S + (S - 1 - s)] +=
                                src[(((size_t)kk * R + r) * S + s) * C + c];
        } else if (dw && t > 0) {
            const float *restrict src = task_dw(&a, t);
            HS_KCPU_FOR(i, nw, dw[i] += src[i]);
        }
        if (dbias && t > 0) {
            const float *restrict src = task_db(&a, t);
            for (int i = 0; i < K; i++) dbias[i] += src[i];
        }
    }
    return 0;
}

/* ---- max pooling ---- */

static int pool_check(const char *what, const hs_pool2d_desc_t *d)
{
    if (!d) return HS_ERR(-EINVAL, "%s: descriptor is NULL", what);
    if (d->B < 0 || d->C <= 0 || d->H <= 0 || d->W <= 0 || d->size <= 0 || d->stride <= 0)
        return HS_ERR(-EINVAL, "%s: bad shape B=%d C=%d H=%d W=%d size=%d stride=%d", what, d->B,
                      d->C, d->H, d->W, d->size, d->stride);
    if (d->size > d->H || d->size > d->W)
        return HS_ERR(-EINVAL, "%s: window %d is larger than the input %dx%d", what, d->size, d->H,
                      d->W);
    int P = (d->H - d->size) / d->stride + 1, Q = (d->W - d->size) / d->stride + 1;
    if (d->P != P || d->Q != Q)
        return HS_ERR(-EINVAL, "%s: output size %dx%d does not match the geometry (expected %dx%d)",
                      what, d->P, d->Q, P, Q);
    if ((int64_t)d->B * d->C * d->H * d->W > INT32_MAX)
        return HS_ERR(-EINVAL, "%s: input of %lld elements is too large for int32 indices", what,
                      (long long)d->B * d->C * d->H * d->W);
    return 0;
}

/* Index within the plane (H, W) of the first maximum of the window at output (p, q). */
static int window_argmax(const hs_pool2d_desc_t *d, const float *plane, int p, int q)
{
    const int h0 = p * d->stride, w0 = q * d->stride;
    int best = h0 * d->W + w0;
    float bv = plane[best];
    for (int i = 0; i < d->size; i++) {
        const float *row = plane + (size_t)(h0 + i) * d->W + w0;
        for (int j = 0; j < d->size; j++)
            if (row[j] > bv) {
                bv = row[j];
                best = (h0 + i) * d->W + w0 + j;
            }
    }
    return best;
}

/* window_argmax for 2x2 windows, stride 2, over a whole plane (LeNet-5's pooling): the same
 * comparisons in the same order, inlined. am: the plane's argmax (P, Q), NULL for none; base:
 * the plane's first flat index. */
static void maxpool2_plane(int W, int P, int Q, const float *restrict xp, float *restrict yp,
                           int32_t *restrict am, int base)
{
    for (int p = 0; p < P; p++) {
        const float *r0 = xp + (size_t)(2 * p) * W, *r1 = r0 + W;
        const int i0 = 2 * p * W;
        for (int q = 0; q < Q; q++) {
            const int w0 = 2 * q;
            const float a = r0[w0], b = r0[w0 + 1], c = r1[w0], e = r1[w0 + 1];
            /* branch-free: the maxima of random data defeat the branch predictor */
            float bv = a;
            int off = 0;
            off = b > bv ? 1 : off;
            bv = b > bv ? b : bv;
            off = c > bv ? W : off;
            bv = c > bv ? c : bv;
            off = e > bv ? W + 1 : off;
            bv = e > bv ? e : bv;
            yp[p * Q + q] = bv;
            if (am) am[p * Q + q] = base + i0 + w0 + off;
        }
    }
}

int hs_kcpu_maxpool_fwd(hs_kernels_t *k, const hs_pool2d_desc_t *d, const float *x, float *y,
                        int32_t *argmax)
{
    HS_TRY(pool_check("maxpool_fwd", d));
    const int HW = d->H * d->W, PQ = d->P * d->Q, planes = d->B * d->C;
    if (planes && (!x || !y)) return HS_ERR(-EINVAL, "maxpool_fwd: NULL x or y");
    if (d->size == 2 && d->stride == 2) {
        for (int pl = 0; pl < planes; pl++)
            maxpool2_plane(d->W, d->P, d->Q, x + (size_t)pl * HW, y + (size_t)pl * PQ,
                           argmax ? argmax + (size_t)pl * PQ : NULL, pl * HW);
        return 0;
    }
    for (int pl = 0; pl < planes; pl++) {
        const float *xp = x + (size_t)pl * HW; // (H, W)
        float *yp = y + (size_t)pl * PQ;       // (P, Q)
        for (int p = 0; p < d->P; p++)
            for (int q = 0; q < d->Q; q++) {
                int idx = window_argmax(d, xp, p, q);
                yp[p * d->Q + q] = xp[idx];
                if (argmax) argmax[(size_t)pl * PQ + p * d->Q + q] = pl * HW + idx;
            }
    }
    return 0;
}

int hs_kcpu_maxpool_bwd(hs_kernels_t *k, const hs_pool2d_desc_t *d, const float *x, const float *y,
                        const int32_t *argmax, const float *dy, float *dx)
{
    HS_TRY(pool_check("maxpool_bwd", d));
    const int HW = d->H * d->W, PQ = d->P * d->Q, planes = d->B * d->C;
    if (planes && (!dy || !dx || (!argmax && !x)))
        return HS_ERR(-EINVAL, "maxpool_bwd: NULL dy or dx, or neither argmax nor x");
    const int total = planes * HW;
    memset(dx, 0, (size_t)total * sizeof(float));
    if (argmax) {
        const size_t n = (size_t)planes * PQ;
        for (size_t i = 0; i < n; i++) {
            int32_t a = argmax[i];
            if (a < 0 || a >= total)
                return HS_ERR(-EINVAL, "maxpool_bwd: argmax[%zu] = %d is outside [0, %d)", i,
                              (int)a, total);
            dx[a] += dy[i];
        }
        return 0;
    }
    /* No saved indices: find the maxima again from x. */
    for (int pl = 0; pl < planes; pl++) {
        const float *xp = x + (size_t)pl * HW;
        const float *dyp = dy + (size_t)pl * PQ;
        float *dxp = dx + (size_t)pl * HW;
        for (int p = 0; p < d->P; p++)
            for (int q = 0; q < d->Q; q++) dxp[window_argmax(d, xp, p, q)] += dyp[p * d->Q + q];
    }
    return 0;
}

/* ---- global average pooling ---- */

static int gap_check(const char *what, int B, int C, int HW, const void *a, const void *b)
{
    if (B < 0 || C < 0 || HW <= 0)
        return HS_ERR(-EINVAL, "%s: bad shape B=%d C=%d HW=%d", what, B, C, HW);
    if (B && C && (!a || !b)) return HS_ERR(-EINVAL, "%s: NULL tensor", what);
    return 0;
}

int hs_kcpu_avgpool_global_fwd(hs_kernels_t *k, int B, int C, int HW, const float *x, float *y)
{
    HS_TRY(gap_check("avgpool_global_fwd", B, C, HW, x, y));
    const size_t planes = (size_t)B * C;
    const float inv = 1.0f / (float)HW;
    for (size_t pl = 0; pl < planes; pl++) {
        const float *restrict xp = x + pl * HW; // (HW)
        float acc[16] = {0};
        size_t i = 0;
        for (; i + 16 <= (size_t)HW; i += 16)
            for (size_t j = 0; j < 16; j++) acc[j] += xp[i + j];
        float t = 0.0f;
        for (; i < (size_t)HW; i++) t += xp[i];
        for (int j = 0; j < 16; j++) t += acc[j];
        y[pl] = t * inv;
    }
    return 0;
}

static void fill_loop(size_t n, float v, float *restrict x)
{
    HS_KCPU_FOR(i, n, x[i] = v);
}

int hs_kcpu_avgpool_global_bwd(hs_kernels_t *k, int B, int C, int HW, const float *dy, float *dx)
{
    HS_TRY(gap_check("avgpool_global_bwd", B, C, HW, dy, dx));
    const size_t planes = (size_t)B * C;
    const float inv = 1.0f / (float)HW;
    for (size_t pl = 0; pl < planes; pl++) {
        fill_loop((size_t)HW, dy[pl] * inv, dx + pl * HW); // (HW) plane pl of dx
    }
    return 0;
}
