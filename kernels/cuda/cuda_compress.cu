/*
 * kernels/cuda/cuda_compress.cu — the CUDA backend's compression slots: hearsay/compress.h's
 * formats (none, fp16, bf16, int8 with a scale per chunk, random-k; and the decoding of every
 * kind, top-k's included) on device memory, so a compressed message crosses to the host as its
 * compressed bytes only (optim/compress.c, hs_compress_dev).
 *
 * The bytes are those of optim/compress.c's host code: the bit-level pieces are the same
 * functions (optim/compress_bits.h: fp16 and bf16 rounding, the lowbias32 hash, int8's 16
 * xorshift32 lanes per chunk, random-k's choice per stratum), and the arithmetic follows the
 * host's where it is AVX2 code (its fused multiply-adds: x86-64-v3 clones): int8's
 * x * inv + u and the decoders' y + a * v. Top-k is not a slot kind (-ENOTSUP: its selection
 * runs on the host). A non-finite value under int8 leaves a non-finite scale, which
 * hs_compress_dev finds in the host copy.
 */
#include "cuda_internal.h"

#include "hearsay/compress.h"
#include "optim/compress_bits.h"

/* ---- elementwise encoders and decoders ---- */

static __global__ void k_half_enc(size_t n, int bf16, const float *x, uint16_t *y)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = bf16 ? hs_cq_bf16(__float_as_uint(x[i])) : hs_cq_f2h(x[i]);
}

/* fp16 add: the host's F16C loop multiplies, then adds (no fused step); bf16 add: fused. */
static __global__ void k_half_dec(size_t n, int bf16, const uint16_t *x, float *y, float alpha,
                                  int add)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = bf16 ? __uint_as_float((uint32_t)x[i] << 16) : hs_cq_h2f(x[i]);
        if (add) v = bf16 ? __fmaf_rn(alpha, v, y[i]) : __fadd_rn(y[i], __fmul_rn(alpha, v));
        y[i] = v;
    }
}

static __global__ void k_f32_dec(size_t n, const float *x, float *y, float alpha, int add)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = add ? __fmaf_rn(alpha, x[i], y[i]) : x[i];
}

/* int8: one block per chunk. The chunk's largest magnitude (abs bits: their order is the
 * magnitudes' for finite floats; a NaN's bits are above inf's), its scale and inverse as the
 * host computes them, then the values: nearest, or 16 lanes of xorshift32 streams seeded from
 * (key, the chunk's offset + lane), lane l taking elements l, l + 16, .. in that order. */
static __global__ void k_int8_enc(size_t n, uint32_t C, int stochastic, uint32_t key,
                                  const float *x, float *scales, int8_t *q)
{
    __shared__ uint32_t smax;
    __shared__ float sinv;
    size_t ch = blockIdx.x, off = ch * C;
    size_t len = n - off < C ? n - off : C;
    if (threadIdx.x == 0) smax = 0;
    __syncthreads();
    uint32_t m = 0;
    for (size_t i = threadIdx.x; i < len; i += blockDim.x) {
        uint32_t a = __float_as_uint(x[off + i]) & 0x7fffffffu;
        m = a > m ? a : m;
    }
    atomicMax(&smax, m);
    __syncthreads();
    if (threadIdx.x == 0) {
        float amax = __uint_as_float(smax);
        float scale = __fdiv_rn(amax, 127.0f);
        float inv = amax > 0 ? __fdiv_rn(127.0f, amax) : 0.0f;
        if (smax >= 0x7f800000u) { /* the host's error: hs_compress_dev sees the scale */
            scale = __uint_as_float(0x7fc00000u);
            inv = 0;
        } else if (!(inv < INFINITY)) {
            inv = 0;
            scale = 0;
        }
        scales[ch] = scale;
        sinv = inv;
    }
    __syncthreads();
    float inv = sinv;
    if (!stochastic) {
        for (size_t i = threadIdx.x; i < len; i += blockDim.x)
            q[off + i] = (int8_t)((int)__fmaf_rn(x[off + i], inv, 128.5f) - 128);
        return;
    }
    if (threadIdx.x >= 16) return;
    uint32_t l = threadIdx.x;
    uint32_t st = hs_cq_lane_seed((uint32_t)off, l, key);
    for (size_t i = l; i < len; i += 16) {
        st = hs_cq_xorshift(st);
        float u = hs_cq_unit(st);
        q[off + i] = (int8_t)((int)__fadd_rn(__fmaf_rn(x[off + i], inv, u), 128.0f) - 128);
    }
}

static __global__ void k_int8_dec(size_t n, uint32_t C, const float *scales, const int8_t *q,
                                  float *y, float alpha, int add)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float s = scales[i / C];
        y[i] = add ? __fmaf_rn((float)q[i], __fmul_rn(alpha, s), y[i]) : __fmul_rn((float)q[i], s);
    }
}

/* random-k: stratum j = [j n / k, (j + 1) n / k), one index in each. */
static __global__ void k_randk_enc(size_t n, size_t kk, uint32_t key, const float *x, uint32_t *oi,
                                   float *ov)
{
    for (size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; j < kk;
         j += (size_t)gridDim.x * blockDim.x) {
        size_t i = hs_cq_randk_index(j, n, kk, key);
        oi[j] = (uint32_t)i;
        ov[j] = x[i];
    }
}

/* Sparse entries (distinct indices): y[idx] = val, or y[idx] += alpha val (multiply, then add,
 * as the host's scalar loop). */
static __global__ void k_sparse_dec(size_t m, const uint32_t *idx, const float *val, float *y,
                                    float alpha, int add)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < m;
         i += (size_t)gridDim.x * blockDim.x) {
        uint32_t j = idx[i];
        y[j] = add ? __fadd_rn(y[j], __fmul_rn(alpha, val[i])) : val[i];
    }
}

/* ---- the slots ---- */

int hs_kcuda_compress(hs_kernels_t *k, const hs_kcompress_t *p, const float *x, void *out,
                      size_t *bytes)
{
    if (!p || !bytes) return HS_ERR(-EINVAL, "cuda compress: NULL argument");
    if (p->n && (!x || !out)) return HS_ERR(-EINVAL, "cuda compress: NULL vector (n=%zu)", p->n);
    HS_TRY(hs_kcuda_enter(k));
    hs_kcuda_t *c = hs_kcuda(k);
    const size_t n = p->n;
    *bytes = p->bytes;
    if (n == 0) return 0;
    switch ((hs_compress_kind_t)p->kind) {
    case HS_COMPRESS_NONE:
        HS_KCUDA_CHECK(
            cudaMemcpyAsync(out, x, n * sizeof(float), cudaMemcpyDeviceToDevice, c->stream));
        return 0;
    case HS_COMPRESS_FP16:
    case HS_COMPRESS_BF16:
        k_half_enc<<<hs_kcuda_blocks(c, n), HS_KCUDA_THREADS, 0, c->stream>>>(
            n, p->kind == HS_COMPRESS_BF16, x, (uint16_t *)out);
        HS_KCUDA_LAUNCHED("k_half_enc");
        return 0;
    case HS_COMPRESS_INT8: {
        if (p->chunk == 0) return HS_ERR(-EINVAL, "cuda compress: int8 chunk of 0");
        size_t nch = (n + p->chunk - 1) / p->chunk;
        if (nch > 0x7fffffffu) return HS_ERR(-EINVAL, "cuda compress: %zu int8 chunks", nch);
        float *scales = (float *)out;
        int8_t *q = (int8_t *)((unsigned char *)out + nch * 4);
        k_int8_enc<<<(unsigned)nch, HS_KCUDA_THREADS, 0, c->stream>>>(n, p->chunk, p->stochastic,
                                                                      p->key, x, scales, q);
        HS_KCUDA_LAUNCHED("k_int8_enc");
        return 0;
    }
    case HS_COMPRESS_RANDK: {
        uint32_t k32 = (uint32_t)p->k;
        unsigned char *o = (unsigned char *)out;
        HS_KCUDA_CHECK(cudaMemcpyAsync(o, &k32, 4, cudaMemcpyHostToDevice, c->stream));
        k_randk_enc<<<hs_kcuda_blocks(c, p->k), HS_KCUDA_THREADS, 0, c->stream>>>(
            n, p->k, p->key, x, (uint32_t *)(o + 4), (float *)(o + 4 + 4 * p->k));
        HS_KCUDA_LAUNCHED("k_randk_enc");
        /* the count's source is a stack variable: the copy must be done before it goes */
        HS_KCUDA_CHECK(cudaStreamSynchronize(c->stream));
        *bytes = 4 + 8 * p->k;
        return 0;
    }
    case HS_COMPRESS_TOPK:
        return HS_ERR(-ENOTSUP, "cuda compress: top-k selects on the host");
    }
    return HS_ERR(-EINVAL, "cuda compress: compressor kind %d", p->kind);
}

int hs_kcuda_decompress(hs_kernels_t *k, const hs_kcompress_t *p, const void *in, size_t bytes,
                        float alpha, int add, float *y)
{
    if (!p) return HS_ERR(-EINVAL, "cuda decompress: NULL argument");
    if (p->n && (!in || !y)) return HS_ERR(-EINVAL, "cuda decompress: NULL vector (n=%zu)", p->n);
    HS_TRY(hs_kcuda_enter(k));
    hs_kcuda_t *c = hs_kcuda(k);
    const size_t n = p->n;
    if (n == 0) return 0;
    const unsigned char *b = (const unsigned char *)in;
    switch ((hs_compress_kind_t)p->kind) {
    case HS_COMPRESS_NONE:
        k_f32_dec<<<hs_kcuda_blocks(c, n), HS_KCUDA_THREADS, 0, c->stream>>>(n, (const float *)in,
                                                                             y, alpha, add);
        HS_KCUDA_LAUNCHED("k_f32_dec");
        return 0;
    case HS_COMPRESS_FP16:
    case HS_COMPRESS_BF16:
        k_half_dec<<<hs_kcuda_blocks(c, n), HS_KCUDA_THREADS, 0, c->stream>>>(
            n, p->kind == HS_COMPRESS_BF16, (const uint16_t *)in, y, alpha, add);
        HS_KCUDA_LAUNCHED("k_half_dec");
        return 0;
    case HS_COMPRESS_INT8: {
        if (p->chunk == 0) return HS_ERR(-EINVAL, "cuda decompress: int8 chunk of 0");
        size_t nch = (n + p->chunk - 1) / p->chunk;
        k_int8_dec<<<hs_kcuda_blocks(c, n), HS_KCUDA_THREADS, 0, c->stream>>>(
            n, p->chunk, (const float *)b, (const int8_t *)(b + nch * 4), y, alpha, add);
        HS_KCUDA_LAUNCHED("k_int8_dec");
        return 0;
    }
    case HS_COMPRESS_TOPK:
    case HS_COMPRESS_RANDK: {
        size_t m = bytes >= 4 ? (bytes - 4) / 8 : 0;
        if (!add) HS_KCUDA_CHECK(cudaMemsetAsync(y, 0, n * sizeof(float), c->stream));
        if (m == 0) return 0;
        k_sparse_dec<<<hs_kcuda_blocks(c, m), HS_KCUDA_THREADS, 0, c->stream>>>(
            m, (const uint32_t *)(b + 4), (const float *)(b + 4 + 4 * m), y, alpha, add);
        HS_KCUDA_LAUNCHED("k_sparse_dec");
        return 0;
    }
    }
    return HS_ERR(-EINVAL, "cuda decompress: compressor kind %d", p->kind);
}
