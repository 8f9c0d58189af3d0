dnl HS_CHECK_CUDA: optional CUDA backend (nvcc, cuBLAS, cuDNN).
dnl --with-cuda[=DIR] (must exist), --without-cuda, default: auto-detect in /usr/local/cuda.
dnl --with-cuda-arch=LIST: nvcc -gencode targets (default: sm_90, the H100/H200).
AC_DEFUN([HS_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@], [build the CUDA backend (cuBLAS + cuDNN) from DIR (default: auto, /usr/local/cuda)])],
    [], [with_cuda=auto])
  AC_ARG_WITH([cuda-arch],
    [AS_HELP_STRING([--with-cuda-arch=SMS], [comma-separated compute capabilities to build for (default: 90)])],
    [], [with_cuda_arch=90])
  hs_have_cuda=no
  hs_cuda_summary=""
  AS_CASE([$with_cuda],
    [yes|auto], [hs_cuda_dir=/usr/local/cuda],
    [no], [hs_cuda_dir=""],
    [hs_cuda_dir=$with_cuda])
  AS_IF([test -n "$hs_cuda_dir"], [
    hs_cuda_fail=""
    AC_PATH_PROG([NVCC], [nvcc], [], [$hs_cuda_dir/bin$PATH_SEPARATOR$PATH])
    AS_IF([test -z "$NVCC"], [hs_cuda_fail="nvcc not found in $hs_cuda_dir/bin or PATH"])
    hs_save_CPPFLAGS=$CPPFLAGS; hs_save_LIBS=$LIBS; hs_save_LDFLAGS=$LDFLAGS
    CPPFLAGS="$CPPFLAGS -I$hs_cuda_dir/include"
    LDFLAGS="$LDFLAGS -L$hs_cuda_dir/lib64 -L$hs_cuda_dir/lib"
    AS_IF([test -z "$hs_cuda_fail"], [AC_CHECK_HEADER([cuda_runtime.h], [], [hs_cuda_fail="cuda_runtime.h not found in $hs_cuda_dir/include"])])
    AS_IF([test -z "$hs_cuda_fail"], [AC_CHECK_HEADER([cublas_v2.h], [], [hs_cuda_fail="cublas_v2.h not found (cuBLAS)"])])
    AS_IF([test -z "$hs_cuda_fail"], [AC_CHECK_HEADER([cudnn.h], [], [hs_cuda_fail="cudnn.h not found (cuDNN)"])])
    AS_IF([test -z "$hs_cuda_fail"], [AC_CHECK_LIB([cudart], [cudaGetDeviceCount], [], [hs_cuda_fail="libcudart not found"])])
    AS_IF([test -z "$hs_cuda_fail"], [AC_CHECK_LIB([cublas], [cublasCreate_v2], [], [hs_cuda_fail="libcublas not found"])])
    AS_IF([test -z "$hs_cuda_fail"], [AC_CHECK_LIB([cudnn], [cudnnCreate], [], [hs_cuda_fail="libcudnn not found"])])
    CPPFLAGS=$hs_save_CPPFLAGS; LIBS=$hs_save_LIBS; LDFLAGS=$hs_save_LDFLAGS
    AS_IF([test -z "$hs_cuda_fail"], [
      hs_have_cuda=yes
      CUDA_CFLAGS="-I$hs_cuda_dir/include"
      dnl cuBLAS is not linked: kernels/cuda/cuda_cublas.cu loads it when a GPU is opened (its
      dnl thread-local storage would otherwise be set up in every thread); -ldl for older glibc
      CUDA_LIBS="-L$hs_cuda_dir/lib64 -Wl,-rpath,$hs_cuda_dir/lib64 -lcudnn -lcudart -ldl -lstdc++"
      NVCC_GENCODE=""
      for hs_sm in `echo "$with_cuda_arch" | tr ',' ' '`; do
        NVCC_GENCODE="$NVCC_GENCODE -gencode arch=compute_$hs_sm,code=sm_$hs_sm"
      done
      hs_cuda_summary="($hs_cuda_dir, sm_$with_cuda_arch)"
    ], [
      AS_IF([test "x$with_cuda" != xauto],
        [AC_MSG_ERROR([--with-cuda given but the CUDA backend cannot be built: $hs_cuda_fail])])
      hs_cuda_summary="($hs_cuda_fail)"
    ])
  ])
  AS_IF([test "x$hs_have_cuda" = xyes], [AC_DEFINE([HS_HAVE_CUDA], [1], [Define to 1 when the CUDA backend is built])],
        [AC_DEFINE([HS_HAVE_CUDA], [0], [Define to 1 when the CUDA backend is built])])
  AC_SUBST([CUDA_CFLAGS])
  AC_SUBST([CUDA_LIBS])
  AC_SUBST([NVCC_GENCODE])
  AM_CONDITIONAL([HAVE_CUDA], [test "x$hs_have_cuda" = xyes])
])
