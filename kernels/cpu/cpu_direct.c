/*
 * kernels/cpu/cpu_direct.c — direct 3x3 convolution, stride 1, padding 1, one image at a time,
 * for the x86-64 machines with AVX2 and FMA (and a wider register tile with AVX-512VL's 32
 * vector registers); no column matrix and no gemm packing. cpu_conv.c uses it for the forward
 * pass and for dx (the same convolution of dy with the flipped filters) when
 * hs_kcpu_direct3_nv() says a kernel exists and the shapes fit (hs_kcpu_direct3_fits).
 *
 * The image x (C, H, W) is first copied into a zero-bordered plane of (H + 2, W + 2) per
 * channel; output row p, columns q .. q + 7 of tap (r, s) then read the padded plane at row
 * p + r, columns q + s .. q + s + 7: one unaligned vector load. A register tile is KB = 4
 * output channels by NV vectors of 8 outputs (NV consecutive vectors of the flattened output
 * plane, each inside a single row since W % 8 == 0; NV = 3 on AVX2, 12 of its 16 registers,
 * and 4 with AVX-512VL; with AVX-512 and W % 16 == 0, 4 vectors of 16 in 512-bit registers),
 * accumulated over c, r, s in that order; each output is a sum in the same order (c, r, s) as a
 * naive loop, in float with FMA, whatever the tile. With AVX-512 and W == 8 a 512-bit vector
 * holds two output rows, read by masked loads from the unpadded image (direct3_w8_avx512). dw
 * (direct3_dw_*) sums over the image in vectors of 8 (or 16 with AVX-512 and W % 16 == 0) partial
 * sums per tap.
 */
#include "kernels/cpu/cpu_internal.h"

#include "hearsay/common.h"
#include "hearsay/env.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define HS_DIRECT3_X86 1
#include <immintrin.h>
#endif

#define KB 4 /* output channels per register tile */

void hs_kcpu_direct3_pack_w(const float *w, int K, int C, int flip, float *wt)
{
    /* out channels Ko (K, or C when flipped), in channels Ci */
    const int Ko = flip ? C : K, Ci = flip ? K : C;
    for (int ko = 0; ko < Ko; ko++)
        for (int ci = 0; ci < Ci; ci++)
            for (int r = 0; r < 3; r++)
                for (int s = 0; s < 3; s++) {
                    float v = flip ? w[(((size_t)ci * C + ko) * 3 + (2 - r)) * 3 + (2 - s)]
                                   : w[(((size_t)ko * C + ci) * 3 + r) * 3 + s];
                    wt[(((size_t)(ko / KB) * Ci + ci) * 9 + r * 3 + s) * KB + ko % KB] = v;
                }
}

/* xp (C, H + 2, W + 2) = x (C, H, W) with a border of zeros */
static void pad_image(int C, int H, int W, const float *restrict x, float *restrict xp)
{
    const int Wp = W + 2;
    const size_t plane = (size_t)(H + 2) * Wp;
    for (int c = 0; c < C; c++) {
        float *dst = xp + (size_t)c * plane;
        const float *src = x + (size_t)c * H * W;
        memset(dst, 0, (size_t)Wp * sizeof(float));
        for (int h = 0; h < H; h++) {
            float *row = dst + (size_t)(h + 1) * Wp;
            row[0] = 0.0f;
            memcpy(row + 1, src + (size_t)h * W, (size_t)W * sizeof(float));
            row[W + 1] = 0.0f;
        }
        memset(dst + (size_t)(H + 1) * Wp, 0, (size_t)Wp * sizeof(float));
    }
}

#ifdef HS_DIRECT3_X86

/* The intrinsics of B-bit vectors (B = 256 or 512): MMB(256, loadu_ps) is _mm256_loadu_ps. */
#define MMB(B, OP) _mm##B##_##OP

/* Output vectors v0 .. v0 + NVB - 1 of L floats each (L = B / 32) for every tile of KB output
 * channels: the forward kernel's body, in B-bit vectors. */
#define DIRECT3_BLOCK(B, NVB)                                                                      \
    do {                                                                                           \
        const int L = (B) / 32;                                                                    \
        ptrdiff_t off[NVB];                                                                        \
        _Pragma("GCC unroll 8") for (int j = 0; j < (NVB); j++)                                    \
        {                                                                                          \
            const int e = (v0 + j) * L, p = e / W, q = e % W;                                      \
            off[j] = (ptrdiff_t)p * Wp + q;                                                        \
        }                                                                                          \
        for (int kb = 0; kb < Ko / KB; kb++) {                                                     \
            __m##B acc[KB][NVB];                                                                   \
            _Pragma("GCC unroll 8") for (int i = 0; i < KB; i++)                                   \
                _Pragma("GCC unroll 8") for (int j = 0; j < (NVB); j++) acc[i][j] =                \
                    MMB(B, setzero_ps)();                                                          \
            const float *wk = wt + (size_t)kb * Ci * 9 * KB;                                       \
            for (int c = 0; c < Ci; c++) {                                                         \
                const float *xc = xp + (size_t)c * plane;                                          \
                const float *wc = wk + (size_t)c * 9 * KB;                                         \
                _Pragma("GCC unroll 3") for (int r = 0; r < 3; r++)                                \
                    _Pragma("GCC unroll 3") for (int s = 0; s < 3; s++)                            \
                {                                                                                  \
                    const float *xr = xc + (ptrdiff_t)r * Wp + s;                                  \
                    const float *wr = wc + (r * 3 + s) * KB;                                       \
                    __m##B xv[NVB];                                                                \
                    _Pragma("GCC unroll 8") for (int j = 0; j < (NVB); j++) xv[j] =                \
                        MMB(B, loadu_ps)(xr + off[j]);                                             \
                    _Pragma("GCC unroll 8") for (int i = 0; i < KB; i++)                           \
                    {                                                                              \
                        const __m##B wb = MMB(B, set1_ps)(wr[i]);                                  \
                        _Pragma("GCC unroll 8") for (int j = 0; j < (NVB); j++) acc[i][j] =        \
                            MMB(B, fmadd_ps)(wb, xv[j], acc[i][j]);                                \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
            _Pragma("GCC unroll 8") for (int i = 0; i < KB; i++)                                   \
                _Pragma("GCC unroll 8") for (int j = 0; j < (NVB); j++) MMB(B, storeu_ps)(         \
                    y + (size_t)(kb * KB + i) * PQ + (size_t)(v0 + j) * L, acc[i][j]);             \
        }                                                                                          \
    } while (0)

/* The forward kernel's loop in B-bit vectors with tile width NV; the vectors past the last
 * whole tile (hs_kcpu_direct3_fits asks a multiple of the dispatch's unit, not of NV) go two,
 * then one at a time. Every output's sum runs over (c, r, s) in the same order whatever the tile
 * and the vector width. */
#define DIRECT3_LOOP(B, NV)                                                                        \
    do {                                                                                           \
        const int Wp = W + 2;                                                                      \
        const size_t plane = (size_t)(H + 2) * Wp, PQ = (size_t)H * W;                             \
        const int nvec = (int)(PQ / ((B) / 32));                                                   \
        int v0 = 0;                                                                                \
        for (; v0 + (NV) <= nvec; v0 += (NV)) DIRECT3_BLOCK(B, NV);                                \
        for (; v0 + 2 <= nvec; v0 += 2) DIRECT3_BLOCK(B, 2);                                       \
        for (; v0 < nvec; v0++) DIRECT3_BLOCK(B, 1);                                               \
    } while (0)

__attribute__((target("avx2,fma"))) static void direct3_avx2(int Ci, int Ko, int H, int W,
                                                             const float *restrict xp,
                                                             const float *restrict wt,
                                                             float *restrict y)
{
    DIRECT3_LOOP(256, 3);
}

/* AVX-512: 512-bit vectors of 16 outputs where W % 16 == 0 (the same sums, lane for lane, as
 * the 256-bit kernels; 16 accumulators of the 32 registers), else 256-bit ones, 4 a tile. */
__attribute__((target("avx2,fma,avx512f,avx512vl"))) static void
direct3_avx512(int Ci, int Ko, int H, int W, const float *restrict xp, const float *restrict wt,
               float *restrict y)
{
    if (W % 16)
        DIRECT3_LOOP(256, 4);
    else
        DIRECT3_LOOP(512, 4);
}

/* W == 8 (ResNet-20's 8x8 stage) with AVX-512: a 512-bit vector is two output rows p, p + 1
 * (16 consecutive outputs), and tap (r, s) reads x's rows p + r - 1 and p + r at columns
 * q + s - 1 directly from the unpadded image: one masked load of 16 floats at x + (p + r - 1) W
 * + s - 1, whose lanes outside the image (column -1 or 8, row -1 or H) are zeros, as the padded
 * plane's are. The same sums in the same (c, r, s) order as the 256-bit kernel, lane for lane.
 * Tiles of KB channels by NVB row pairs; H even (hs_kcpu_direct3_fits: H W / 8 a multiple of 4).
 * The masked-off lanes are never read (their addresses may lie before or after the image). */
#define DIRECT3_W8_BLOCK(NVB)                                                                      \
    do {                                                                                           \
        __mmask16 m[NVB][9];                                                                       \
        ptrdiff_t off[NVB][9];                                                                     \
        for (int j = 0; j < (NVB); j++)                                                            \
            for (int t = 0; t < 9; t++) {                                                          \
                const int p = 2 * (v0 + j), r = t / 3, sc = t % 3;                                 \
                unsigned mk = 0;                                                                   \
                for (int l = 0; l < 16; l++) {                                                     \
                    const int row = p + r - 1 + (l >> 3), col = (l & 7) + sc - 1;                  \
                    if (row >= 0 && row < H && col >= 0 && col < 8) mk |= 1u << l;                 \
                }                                                                                  \
                m[j][t] = (__mmask16)mk;                                                           \
                off[j][t] = (ptrdiff_t)(p + r - 1) * 8 + sc - 1;                                   \
            }                                                                                      \
        for (int kb = 0; kb < Ko / KB; kb++) {                                                     \
            __m512 acc[KB][NVB];                                                                   \
            _Pragma("GCC unroll 8") for (int i = 0; i < KB; i++)                                   \
                _Pragma("GCC unroll 8") for (int j = 0; j < (NVB); j++) acc[i][j] =                \
                    _mm512_setzero_ps();                                                           \
            const float *wk = wt + (size_t)kb * Ci * 9 * KB;                                       \
            for (int c = 0; c < Ci; c++) {                                                         \
                /* as an address: the masked loads below never touch what lies outside */          \
                const uintptr_t xc = (uintptr_t)(x + (size_t)c * PQ);                              \
                const float *wc = wk + (size_t)c * 9 * KB;                                         \
                _Pragma("GCC unroll 9") for (int t = 0; t < 9; t++)                                \
                {                                                                                  \
                    const float *wr = wc + t * KB;                                                 \
                    __m512 xv[NVB];                                                                \
                    _Pragma("GCC unroll 8") for (int j = 0; j < (NVB); j++) xv[j] =                \
                        _mm512_maskz_loadu_ps(m[j][t], (const void *)(xc + off[j][t] * 4));        \
                    _Pragma("GCC unroll 8") for (int i = 0; i < KB; i++)                           \
                    {                                                                              \
                        const __m512 wb = _mm512_set1_ps(wr[i]);                                   \
                        _Pragma("GCC unroll 8") for (int j = 0; j < (NVB); j++) acc[i][j] =        \
                            _mm512_fmadd_ps(wb, xv[j], acc[i][j]);                                 \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
            _Pragma("GCC unroll 8") for (int i = 0; i < KB; i++)                                   \
                _Pragma("GCC unroll 8") for (int j = 0; j < (NVB); j++) _mm512_storeu_ps(          \
                    y + (size_t)(kb * KB + i) * PQ + (size_t)(v0 + j) * 16, acc[i][j]);            \
        }                                                                                          \
    } while (0)

__attribute__((target("avx2,fma,avx512f,avx512vl"))) static void
direct3_w8_avx512(int Ci, int Ko, int H, const float *restrict x, const float *restrict wt,
                  float *restrict y)
{
    const size_t PQ = (size_t)H * 8;
    const int npair = H / 2;
    int v0 = 0;
    for (; v0 + 4 <= npair; v0 += 4) DIRECT3_W8_BLOCK(4);
    for (; v0 + 2 <= npair; v0 += 2) DIRECT3_W8_BLOCK(2);
    for (; v0 < npair; v0++) DIRECT3_W8_BLOCK(1);
}

/* dw (K, C, 3, 3) += sum over G images and the H x W positions of dy[k][p][q] times
 * xp[c][p + r][q + s]: a tile of KD output channels, one input channel and the taps of some
 * filter rows in vectors of partial sums (x's shifted vectors loaded once for the KD
 * channels), added up across the lanes once per (k, c) and call. */

/* A vector's lanes added up: 256-bit in halves, then pairs; 512-bit as GCC's reduction does. */
__attribute__((target("avx2,fma"))) static inline float hsum256(__m256 v)
{
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

__attribute__((target("avx2,fma,avx512f"))) static inline float hsum512(__m512 v)
{
    return _mm512_reduce_add_ps(v);
}

/* One pass of the dw kernel in B-bit vectors: channels k0 .. k0 + KD - 1 against input channel
 * c, taps of filter rows R0 .. R0 + NR - 1; KD x 3 NR accumulators, with KD dy vectors and one
 * x vector, each summed over g, p, q in that order and then across its lanes. The passes a
 * kernel splits the taps into leave every accumulator's sum as one pass over all 9 would. */
#define DW_PASS(B, KD, R0, NR)                                                                     \
    do {                                                                                           \
        __m##B acc[KD][3 * (NR)];                                                                  \
        _Pragma("GCC unroll 4") for (int i = 0; i < (KD); i++)                                     \
            _Pragma("GCC unroll 9") for (int t = 0; t < 3 * (NR); t++) acc[i][t] =                 \
                MMB(B, setzero_ps)();                                                              \
        for (int g = 0; g < G; g++) {                                                              \
            const float *xc = xp + ((size_t)g * C + c) * plane + (size_t)(R0)*Wp;                  \
            const float *dk = dy + ((size_t)g * K + (size_t)k0) * PQ;                              \
            for (int p = 0; p < H; p++)                                                            \
                for (int q = 0; q < W; q += (B) / 32) {                                            \
                    const float *xr = xc + (size_t)p * Wp + q;                                     \
                    __m##B dv[KD];                                                                 \
                    _Pragma("GCC unroll 4") for (int i = 0; i < (KD); i++) dv[i] =                 \
                        MMB(B, loadu_ps)(dk + (size_t)i * PQ + (size_t)p * W + q);                 \
                    _Pragma("GCC unroll 3") for (int r = 0; r < (NR); r++)                         \
                        _Pragma("GCC unroll 3") for (int s = 0; s < 3; s++)                        \
                    {                                                                              \
                        __m##B xv = MMB(B, loadu_ps)(xr + (size_t)r * Wp + s);                     \
                        /* one load for the KD channels, not one each */                           \
                        __asm__("" : "+v"(xv));                                                    \
                        _Pragma("GCC unroll 4") for (int i = 0; i < (KD); i++) acc[i][r * 3 + s] = \
                            MMB(B, fmadd_ps)(dv[i], xv, acc[i][r * 3 + s]);                        \
                    }                                                                              \
                }                                                                                  \
        }                                                                                          \
        _Pragma("GCC unroll 4") for (int i = 0; i < (KD); i++)                                     \
            _Pragma("GCC unroll 9") for (int t = 0; t < 3 * (NR); t++)                             \
                dw[((size_t)(k0 + i) * C + c) * 9 + (R0)*3 + t] += hsum##B(acc[i][t]);             \
    } while (0)

#define DW_DIMS                                                                                    \
    const int Wp = W + 2;                                                                          \
    const size_t plane = (size_t)(H + 2) * Wp, PQ = (size_t)H * W

/* dw on AVX2: two output channels share each x load, but their 18 accumulators (2 channels x 9
 * taps) do not fit AVX2's 16 registers, so the taps go in two passes over the image, filter
 * rows 0-1 (12 accumulators) then row 2 (6): 13 loads per 18 FMAs against 20 for one channel
 * at a time (the kernel is load-bound), the same sums bit for bit. An odd last channel takes
 * one pass alone. */
__attribute__((target("avx2,fma"))) static void direct3_dw_avx2(int C, int K, int H, int W, int G,
                                                                const float *restrict xp,
                                                                const float *restrict dy,
                                                                float *restrict dw)
{
    DW_DIMS;
    int k0 = 0;
    for (; k0 + 2 <= K; k0 += 2)
        for (int c = 0; c < C; c++) {
            DW_PASS(256, 2, 0, 2);
            DW_PASS(256, 2, 2, 1);
        }
    for (; k0 < K; k0++)
        for (int c = 0; c < C; c++) DW_PASS(256, 1, 0, 3);
}

/* dw with AVX-512 (K even: hs_kcpu_direct3_dw_fits): 2 channels x 9 taps in one pass (18 of the
 * 32 registers), in 512-bit vectors where W % 16 == 0, else 256-bit ones. A 512-bit lane sums
 * every other 8-column vector of a 256-bit one's, so those last bits of dw differ from the
 * 256-bit kernels' (the forward pass's do not). */
__attribute__((target("avx2,fma,avx512f,avx512vl"))) static void
direct3_dw_avx512(int C, int K, int H, int W, int G, const float *restrict xp,
                  const float *restrict dy, float *restrict dw)
{
    DW_DIMS;
    for (int k0 = 0; k0 + 2 <= K; k0 += 2)
        for (int c = 0; c < C; c++) {
            if (W % 16)
                DW_PASS(256, 2, 0, 3);
            else
                DW_PASS(512, 2, 0, 3);
        }
}

typedef void (*direct3_fn)(int, int, int, int, const float *, const float *, float *);
typedef void (*direct3_dw_fn)(int, int, int, int, int, const float *, const float *, float *);

static direct3_fn direct3_pick(int *nv, direct3_dw_fn *dwf, int *kd)
{
    __builtin_cpu_init();
    const char *want = hs_env_str("HS_CPU_CONV_DIRECT");
    const int off = !strcmp(want, "off"), avx2_only = !strcmp(want, "avx2");
    if (!off && !avx2_only && strcmp(want, "auto"))
        HS_WARN("HS_CPU_CONV_DIRECT=%s: expected auto, avx2 or off; using auto", want);
    if (off) {
        *nv = 0, *kd = 0, *dwf = NULL;
        return NULL;
    }
    if (!avx2_only && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("fma")) {
        *nv = 4, *kd = 2, *dwf = direct3_dw_avx512;
        return direct3_avx512;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        *nv = 2, *kd = 1, *dwf = direct3_dw_avx2;
        return direct3_avx2;
    }
    *nv = 0, *kd = 0, *dwf = NULL;
    return NULL;
}
#endif

static int direct3_nv = -1, direct3_kd;
#ifdef HS_DIRECT3_X86
static direct3_fn direct3_kernel;
static direct3_dw_fn direct3_dw_kernel;
static int direct3_w8; /* 1: W == 8 goes to direct3_w8_avx512 (unpadded) */
#endif

int hs_kcpu_direct3_nv(void)
{
    int nv = __atomic_load_n(&direct3_nv, __ATOMIC_ACQUIRE);
    if (nv >= 0) return nv;
#ifdef HS_DIRECT3_X86
    direct3_dw_fn dwf;
    int kd;
    direct3_fn f = direct3_pick(&nv, &dwf, &kd);
    __atomic_store_n(&direct3_w8, f == direct3_avx512, __ATOMIC_RELAXED);
    __atomic_store_n(&direct3_kernel, f, __ATOMIC_RELAXED);
    __atomic_store_n(&direct3_dw_kernel, dwf, __ATOMIC_RELAXED);
    __atomic_store_n(&direct3_kd, kd, __ATOMIC_RELAXED);
#else
    nv = 0;
#endif
    __atomic_store_n(&direct3_nv, nv, __ATOMIC_RELEASE);
    return nv;
}

int hs_kcpu_direct3_fits(int Ci, int Ko, int H, int W)
{
    const int nv = hs_kcpu_direct3_nv();
    return nv > 0 && Ci > 0 && Ko % KB == 0 && H > 0 && W > 0 && W % 8 == 0 &&
           ((size_t)H * W / 8) % (size_t)nv == 0;
}

int hs_kcpu_direct3_dw_fits(int C, int K, int H, int W)
{
    if (hs_kcpu_direct3_nv() <= 0) return 0;
    const int kd = __atomic_load_n(&direct3_kd, __ATOMIC_RELAXED);
    return C > 0 && K > 0 && kd > 0 && K % kd == 0 && H > 0 && W > 0 && W % 8 == 0;
}

void hs_kcpu_direct3_pad(int C, int H, int W, const float *x, float *xpad)
{
    pad_image(C, H, W, x, xpad);
}

void hs_kcpu_direct3_dw(int C, int K, int H, int W, int G, const float *xpad, const float *dy,
                        float *dw)
{
#ifdef HS_DIRECT3_X86
    __atomic_load_n(&direct3_dw_kernel, __ATOMIC_RELAXED)(C, K, H, W, G, xpad, dy, dw);
#else
    (void)C, (void)K, (void)H, (void)W, (void)G, (void)xpad, (void)dy, (void)dw;
#endif
}

size_t hs_kcpu_direct3_pad_floats(int Ci, int H, int W)
{
    return (size_t)Ci * (H + 2) * (W + 2);
}

void hs_kcpu_direct3_image(int Ci, int Ko, int H, int W, const float *x, const float *wt,
                           float *xpad, float *y)
{
#ifdef HS_DIRECT3_X86
    if (W == 8 && H % 2 == 0 && __atomic_load_n(&direct3_w8, __ATOMIC_RELAXED)) {
        direct3_w8_avx512(Ci, Ko, H, x, wt, y); /* no padded copy */
        return;
    }
    pad_image(Ci, H, W, x, xpad);
    __atomic_load_n(&direct3_kernel, __ATOMIC_RELAXED)(Ci, Ko, H, W, xpad, wt, y);
#else
    pad_image(Ci, H, W, x, xpad);
    (void)Ko, (void)wt, (void)y;
#endif
}
