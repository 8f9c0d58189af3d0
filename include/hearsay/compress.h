/*
 * hearsay/compress.h — compressors for the parameters and gradients that travel between
 * workers (`--compress SPEC`): half precision (fp16, bf16), 8-bit integers with a float scale
 * per chunk (nearest or stochastic rounding, seeded), and sparsification (top-k, random-k:
 * indices and values on the wire). One small interface: compress a dense float32 vector of n
 * elements into a byte buffer, decompress (or decompress and add) it back into a dense vector.
 *
 * Wire formats (native byte order, like every training message; docs/algorithms.md,
 * "Compressed communication", gives the bytes-on-the-wire formula of each):
 *   fp16, bf16   n x uint16
 *   int8         ceil(n / C) x float scale, then n x int8 (value = q * scale of its chunk)
 *   topk, randk  uint32 m (m <= k), m x uint32 index (increasing), m x float value
 *
 * A compressor is one object per vector size and stream: it owns scratch space and the
 * counter of its random stream (stochastic rounding, random-k, top-k's threshold sample), so
 * it is not shared between threads. Every compress call advances the stream; a run with the
 * same seed makes the same choices.
 */
#ifndef HEARSAY_COMPRESS_H
#define HEARSAY_COMPRESS_H

#include "hearsay/kernels.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hs_compress_kind {
    HS_COMPRESS_NONE = 0, /* float32 as is */
    HS_COMPRESS_FP16,     /* IEEE half, round to nearest even (|x| > 65504 becomes inf) */
    HS_COMPRESS_BF16,     /* bfloat16 (the float's top 16 bits), round to nearest even */
    HS_COMPRESS_INT8,     /* int8 q in [-127, 127] with scale = max|x| / 127 per chunk */
    HS_COMPRESS_TOPK,     /* the k entries of largest magnitude (sampled threshold) */
    HS_COMPRESS_RANDK,    /* k entries chosen at random (one per stratum of n / k) */
} hs_compress_kind_t;

typedef struct hs_compress_spec {
    hs_compress_kind_t kind;
    int stochastic; /* int8: 1 = stochastic rounding (unbiased), 0 = nearest */
    uint32_t chunk; /* int8: floats per scale (default 512) */
    double k_frac;  /* topk/randk: k = ceil(k_frac * n) when > 0 (a "P%" spec) */
    uint64_t k_abs; /* topk/randk: k when k_frac == 0 */
    char text[64];  /* the spec as given (for messages) */
} hs_compress_spec_t;

/* Parse "none", "fp16", "bf16", "int8[:nearest|:stochastic][:chunk=C]", "topk:K" or "randk:K"
 * with K a count (>= 1) or a percentage ("1%", "0.5%"). NULL or "" is "none". -EINVAL with
 * a message naming the spec. */
int hs_compress_parse(const char *spec, hs_compress_spec_t *s);

/* k of a topk/randk spec for vectors of n floats: -EINVAL (naming the spec) when k <= 0 or
 * k > n. Other kinds: *k = n. */
int hs_compress_k(const hs_compress_spec_t *s, size_t n, size_t *k);

/* The largest number of bytes one compressed vector of n floats takes on the wire. */
size_t hs_compress_max_bytes(const hs_compress_spec_t *s, size_t n);

/* 1 for an unbiased compressor (E[Q(x)] = x): none, int8:stochastic. The others are biased
 * (fp16, bf16 and int8:nearest round; topk and randk drop entries without rescaling). */
int hs_compress_unbiased(const hs_compress_spec_t *s);

/* The grammar, one line per kind, for --help. */
const char *hs_compress_help(void);

/* The `--compress` entry of an algorithm's option table (hs_algo_ops_t.options; the
 * hs_option_t of hearsay/options.h) that takes every compressor, with error feedback (allreduce,
 * choco, qsgp): one declaration, so that their help and type stay the same. */
#define HS_COMPRESS_OPTION_ALL                                                                     \
    {                                                                                              \
        .name = "compress", .type = HS_OPT_STRING, .def = "none", .metavar = "SPEC",               \
        .help = "compress what is sent (with error feedback): none, fp16, bf16, "                  \
                "int8[:nearest|:stochastic][:chunk=C], topk:K, randk:K (K a count or P%)"          \
    }

/* The generic check of `--compress spec` for `--algo algo` (takes = the algorithm declares the
 * option --compress): the spec parses, and an algorithm that cannot keep its guarantee under
 * compression is refused with the reason. */
int hs_compress_check_algo(const char *spec, const char *algo, int takes);

typedef struct hs_compressor hs_compressor_t;

/* A compressor of vectors of n floats (n >= 1) for the spec (checked with hs_compress_k),
 * with its random stream seeded by seed. */
int hs_compressor_create(hs_compressor_t **out, const char *spec, size_t n, uint64_t seed);
void hs_compressor_destroy(hs_compressor_t **c);
const hs_compress_spec_t *hs_compressor_spec(const hs_compressor_t *c);
/* hs_compress_max_bytes for this compressor's n; k after resolution (n for dense kinds). */
size_t hs_compressor_max_bytes(const hs_compressor_t *c);
size_t hs_compressor_k(const hs_compressor_t *c);

/* Compress x (n floats, host) into out (at least hs_compressor_max_bytes bytes); *bytes gets
 * the size used. */
int hs_compress(hs_compressor_t *c, const float *x, void *out, size_t *bytes);

/* y (n floats) = the vector that `bytes` bytes of compressed data `in` stand for. -EPROTO when
 * the data do not fit the compressor (length, an index out of range or not increasing). */
int hs_decompress(const hs_compressor_t *c, const void *in, size_t bytes, float *y);

/* y += alpha * (the vector `in` stands for): a sparse vector touches only its entries. */
int hs_decompress_add(const hs_compressor_t *c, const void *in, size_t bytes, float alpha,
                      float *y);

/* ---- vectors in device memory (docs/algorithms.md, "Compression on the device") ----
 * A compressor bound to a kernel backend takes its dense vectors in that backend's memory and
 * its compressed bytes in host memory, where messages are: fp16, bf16, int8, random-k and none
 * run as the backend's compression slots (CUDA kernels; the CPU's code on the emulated device),
 * so only the compressed bytes cross to the host; top-k selects on the host (x copied to a host
 * image first). The same bytes and the same random stream as hs_compress on the same values. */
/* Bind c to k (once, before the first hs_compress_dev): device room for one compressed vector,
 * and a host image of x where k's slot does not take c's kind. On the CPU: nothing to do. */
int hs_compressor_bind(hs_compressor_t *c, hs_kernels_t *k);
/* 1 when hs_compress_dev of c runs on its device (no vector through the host). */
int hs_compressor_on_device(const hs_compressor_t *c);
/* Compress x (n floats, device memory of the bound backend; host without one) into out (host,
 * hs_compressor_max_bytes bytes), *bytes the size used. The compressed bytes stay on the device
 * too, for hs_decompress_add_dev(c, NULL, ...). -ERANGE for a non-finite value under int8. */
int hs_compress_dev(hs_compressor_t *c, const float *x, void *out, size_t *bytes);
/* y (n floats, device memory) += alpha * the vector that `bytes` bytes at in (host: a message,
 * checked as hs_decompress_add checks it, then copied to the device and decoded there) stand
 * for; in == NULL: this compressor's last hs_compress_dev output (bytes ignored). */
int hs_decompress_add_dev(hs_compressor_t *c, const void *in, size_t bytes, float alpha, float *y);

/* The compression slots' host code (the CPU backend's, and the emulated device's under its
 * checks): x, out, in and y in host memory; the kinds of the compress slot (-ENOTSUP for
 * top-k). The decoder takes bytes already checked. */
int hs_compress_format(const hs_kcompress_t *p, const float *x, void *out, size_t *bytes);
int hs_decompress_format(const hs_kcompress_t *p, const void *in, size_t bytes, float alpha,
                         int add, float *y);

/* The compressor of an algorithm whose messages may travel in half precision (choco, qsgp,
 * easgd/eamsgd, lsgd): `given` (the --compress flag; NULL when it was not given), else the
 * precision of k's products where it is bf16 or fp16 (messages in the compute precision,
 * docs/algorithms.md "Mixed precision"), else "none". All-reduce SGD keeps its float32 ring
 * unless --compress is given, as DDP under autocast reduces float32 gradients. */
const char *hs_compress_or_precision(const char *given, const hs_kernels_t *k);

/* Elementwise half precision for callers with their own message layout (EASGD's center):
 * y (n) = fp16 or bf16 (bf16 != 0) of x, nearest even; and back: y = x, or y += alpha x. */
void hs_half_encode(int bf16, const float *x, uint16_t *y, size_t n);
void hs_half_decode(int bf16, const uint16_t *x, float *y, size_t n, float alpha, int add);

#ifdef __cplusplus
}
#endif
#endif
