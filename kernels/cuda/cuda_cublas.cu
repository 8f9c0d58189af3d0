/*
 * kernels/cuda/cuda_cublas.cu — cuBLAS loaded when a CUDA context is first opened, not when the
 * process starts. Linked in, libcublas and libcublasLt put 104 KiB of static thread-local
 * storage (12 + 92 KiB, their PT_TLS segments) into every thread glibc creates, set up at
 * thread creation: `hearsay sim` runs each simulated worker on its own thread, so a CPU-only
 * simulation of 4,096 workers paid ~416 MiB for libraries it never calls, and every process
 * mapped cuBLASLt at start. The backend calls eight cuBLAS functions; cuda_internal.h maps
 * their names onto the wrappers here, which go through pointers resolved by dlopen/dlsym
 * (the soname of the toolkit built against: libcublas.so.<CUBLAS_VER_MAJOR>).
 */
#include "cuda_internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#define HS_KCUBLAS_STR_(x) #x
#define HS_KCUBLAS_STR(x)  HS_KCUBLAS_STR_(x)
#define HS_KCUBLAS_SONAME  "libcublas.so." HS_KCUBLAS_STR(CUBLAS_VER_MAJOR)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct {
    void *lib;
    char err[512];
    cublasStatus_t (*create)(cublasHandle_t *);
    cublasStatus_t (*destroy)(cublasHandle_t);
    cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
    cublasStatus_t (*set_math_mode)(cublasHandle_t, cublasMath_t);
    cublasStatus_t (*sgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const float *, const float *, int, const float *, int, const float *,
                            float *, int);
    cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                              const void *, const void *, cudaDataType, int, const void *,
                              cudaDataType, int, const void *, void *, cudaDataType, int,
                              cublasComputeType_t, cublasGemmAlgo_t);
    const char *(*status_name)(cublasStatus_t);
    const char *(*status_string)(cublasStatus_t);
} L; /* zero until load() runs */

static void *sym(const char *name)
{
    void *p = dlsym(L.lib, name);
    if (!p && !L.err[0])
        snprintf(L.err, sizeof L.err, "%s has no %s (%s)", HS_KCUBLAS_SONAME, name, dlerror());
    return p;
}

static void load(void)
{
    L.lib = dlopen(HS_KCUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!L.lib) {
        const char *why = dlerror();
        snprintf(L.err, sizeof L.err, "%s", why ? why : "dlopen failed");
        return;
    }
    /* the names behind cublas_v2.h's macros */
    L.create = (decltype(L.create))sym("cublasCreate_v2");
    L.destroy = (decltype(L.destroy))sym("cublasDestroy_v2");
    L.set_stream = (decltype(L.set_stream))sym("cublasSetStream_v2");
    L.set_math_mode = (decltype(L.set_math_mode))sym("cublasSetMathMode");
    L.sgemm = (decltype(L.sgemm))sym("cublasSgemm_v2");
    L.gemm_ex = (decltype(L.gemm_ex))sym("cublasGemmEx");
    L.status_name = (decltype(L.status_name))sym("cublasGetStatusName");
    L.status_string = (decltype(L.status_string))sym("cublasGetStatusString");
    if (L.err[0]) {
        dlclose(L.lib);
        L.lib = NULL;
    }
}

int hs_kcublas_load(void)
{
    pthread_once(&once, load);
    if (L.lib) return 0;
    return HS_ERR(-ENOSYS,
                  "cuBLAS could not be loaded: %s (the CUDA backend needs %s from the CUDA "
                  "toolkit it was built with, on the library path)",
                  L.err, HS_KCUBLAS_SONAME);
}

/* The wrappers: called only after hs_kcublas_load succeeded (kcuda_init loads it first). */
cublasStatus_t hs_kcublas_create(cublasHandle_t *h)
{
    return L.create ? L.create(h) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t hs_kcublas_destroy(cublasHandle_t h)
{
    return L.destroy ? L.destroy(h) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t hs_kcublas_set_stream(cublasHandle_t h, cudaStream_t s)
{
    return L.set_stream ? L.set_stream(h, s) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t hs_kcublas_set_math_mode(cublasHandle_t h, cublasMath_t m)
{
    return L.set_math_mode ? L.set_math_mode(h, m) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t hs_kcublas_sgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                                int n, int k, const float *alpha, const float *a, int lda,
                                const float *b, int ldb, const float *beta, float *c, int ldc)
{
    return L.sgemm ? L.sgemm(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
                   : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t hs_kcublas_sgemm_fast(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                     int m, int n, int k, const float *alpha, const float *a,
                                     int lda, const float *b, int ldb, const float *beta, float *c,
                                     int ldc, cublasComputeType_t compute)
{
    return L.gemm_ex ? L.gemm_ex(h, ta, tb, m, n, k, alpha, a, CUDA_R_32F, lda, b, CUDA_R_32F, ldb,
                                 beta, c, CUDA_R_32F, ldc, compute, CUBLAS_GEMM_DEFAULT)
                     : CUBLAS_STATUS_NOT_INITIALIZED;
}

const char *hs_kcublas_status_name(cublasStatus_t s)
{
    return L.status_name ? L.status_name(s) : "CUBLAS_STATUS_NOT_INITIALIZED";
}

const char *hs_kcublas_status_string(cublasStatus_t s)
{
    return L.status_string ? L.status_string(s) : "cuBLAS is not loaded";
}

int hs_kernels_cuda_libs_load(void)
{
    return hs_kcublas_load();
}
