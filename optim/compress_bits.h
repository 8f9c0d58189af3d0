/*
 * optim/compress_bits.h — the bit-level pieces of the compressors' formats (hearsay/compress.h),
 * written once for the host code (optim/compress.c) and the CUDA kernels
 * (kernels/cuda/cuda_compress.cu), so that both write the same bytes: the random stream's hash,
 * float <-> fp16 and bf16, int8's per-lane xorshift streams and random-k's choice per stratum.
 * Each is a single integer or float operation sequence with no multiply-add to fuse, so the
 * host's and the device's compilers give the same bits.
 */
#ifndef HEARSAY_OPTIM_COMPRESS_BITS_H
#define HEARSAY_OPTIM_COMPRESS_BITS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define HS_CQ_FN static __host__ __device__ __forceinline__
#else
#define HS_CQ_FN static inline
#endif

/* A counter-based hash (lowbias32): 32-bit multiplies and shifts, which vectorise. */
HS_CQ_FN uint32_t hs_cq_hash(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

HS_CQ_FN uint32_t hs_cq_f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

HS_CQ_FN float hs_cq_u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* float -> half, round to nearest even (F. Giesen's float_to_half_fast3_rtne; NaN -> 0x7e00). */
HS_CQ_FN uint16_t hs_cq_f2h(float f)
{
    uint32_t x = hs_cq_f2u(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    uint16_t o;
    if (x >= 0x47800000u) /* >= 65536: inf, or NaN */
        o = x > 0x7f800000u ? 0x7e00u : 0x7c00u;
    else if (x < 0x38800000u) /* a half subnormal or zero: let the FPU round */
        o = (uint16_t)(hs_cq_f2u(hs_cq_u2f(x) + 0.5f) - 0x3f000000u);
    else {
        uint32_t odd = (x >> 13) & 1u;
        x += 0xc8000fffu + odd; /* rebias the exponent, round */
        o = (uint16_t)(x >> 13);
    }
    return (uint16_t)(o | sign);
}

/* half -> float (exact). */
HS_CQ_FN float hs_cq_h2f(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return hs_cq_u2f(sign | 0x7f800000u | (m << 13));
    if (e == 0) return hs_cq_u2f(sign | hs_cq_f2u((float)m * 0x1p-24f));
    return hs_cq_u2f(sign | ((e + 112u) << 23) | (m << 13));
}

/* The bf16 of a float's bits v, nearest even; a NaN stays a (quiet) NaN instead of rounding
 * into inf. */
HS_CQ_FN uint16_t hs_cq_bf16(uint32_t v)
{
    uint32_t r = (v + 0x7fffu + ((v >> 16) & 1u)) >> 16;
    return (uint16_t)((v & 0x7fffffffu) > 0x7f800000u ? ((v >> 16) | 0x40u) : r);
}

/* int8 stochastic rounding: lane l's xorshift32 state for the chunk at offset base, one step
 * of the stream, and the step's uniform in [0, 1) (24 bits). */
HS_CQ_FN uint32_t hs_cq_lane_seed(uint32_t base, uint32_t l, uint32_t key)
{
    return hs_cq_hash((base + l) * 0x9e3779b9u ^ key) | 1u;
}

HS_CQ_FN uint32_t hs_cq_xorshift(uint32_t v)
{
    v ^= v << 13;
    v ^= v >> 17;
    v ^= v << 5;
    return v;
}

HS_CQ_FN float hs_cq_unit(uint32_t v)
{
    return (float)(int32_t)(v >> 8) * 0x1p-24f;
}

/* random-k: the index chosen in stratum j = [j n / k, (j + 1) n / k) (n and k fit 32 bits,
 * so j n fits 64). */
HS_CQ_FN size_t hs_cq_randk_index(size_t j, size_t n, size_t k, uint32_t key)
{
    size_t lo = (size_t)((uint64_t)j * n / k);
    size_t hi = (size_t)((uint64_t)(j + 1) * n / k);
    return lo + hs_cq_hash((uint32_t)j * 0x9e3779b9u ^ key) % (hi - lo);
}

#endif
