/*
 * kernels/cuda_stub.c — the CUDA backend's constructors in a build without CUDA: opening it
 * fails with -ENOSYS and says how to get it, and no device is ever counted. (With CUDA,
 * kernels/cuda/cuda_backend.cu defines these instead.)
 */
#include "config.h"

#include "hearsay/common.h"
#include "hearsay/kernels.h"

int hs_kernels_cuda_open(hs_kernels_t *k, int device_index)
{
    (void)k;
    (void)device_index;
    return HS_ERR(-ENOSYS, "this hearsay was built without CUDA (reconfigure with --with-cuda)");
}

void hs_kernels_cuda_close(hs_kernels_t *k)
{
    (void)k;
}

int hs_kernels_cuda_device_count(void)
{
    return 0;
}

int hs_kernels_cuda_libs_load(void)
{
    return HS_ERR(-ENOSYS, "this hearsay was built without CUDA (reconfigure with --with-cuda)");
}

int hs_kernels_cuda_probe(int *count)
{
    *count = 0;
    return HS_ERR(-ENOSYS, "this hearsay was built without CUDA (reconfigure with --with-cuda)");
}
