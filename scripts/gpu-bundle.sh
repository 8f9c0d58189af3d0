#!/usr/bin/env bash
# scripts/gpu-bundle.sh — build the CUDA backend here and pack it for a GPU machine that has the
# NVIDIA driver, CUDA runtime, cuBLAS and cuDNN but none of this project's build dependencies
# (libfabric, OpenBLAS, LAPACKE, Check, autotools): the way the CUDA backend first ran on an
# H100 (docs/benchmarks.md).
#
#   scripts/gpu-bundle.sh [OUT.tar.xz]     (default .gpu/bundle.tar.xz; .gpu/ and _gpubuild/ are
#                                           in .gitignore)
#
# What it does:
#   1. configures _gpubuild (../configure --enable-werror --without-mpi --with-cuda; MPI is
#      left out so that no Open MPI has to travel) unless it exists, and builds hearsay and the
#      test programs (make, make check TESTS=);
#   2. makes the build tree self-consistent without the system headers: automake's dependency
#      files name /usr/include/rdma/fabric.h and the like, which the GPU machine lacks, so make
#      would rebuild; they are emptied (as a fresh configure leaves them), and config.h's stamp
#      is ordered after config.status so config.h is not remade;
#   3. packs the source tree with _gpubuild, and the shared libraries the programs need beside
#      glibc and CUDA (ldd), into one archive. mtimes are kept, so `make check` there finds
#      everything up to date.
#
# On the GPU machine (as root, the archive in the current directory):
#   mkdir -p "$(dirname "$REPO")" && tar xJf bundle.tar.xz -C "$(dirname "$REPO")"
#   export LD_LIBRARY_PATH=$(dirname "$REPO")/hs-gpu-lib:<the directories of libcudnn.so.9
#                                                     and libcublas.so.13 there>
#   cd "$REPO/_gpubuild" && make -q all && make -j8 check
# where REPO is this checkout's absolute path, printed at the end: the libtool wrappers and
# the Makefiles name it, so the tree must land at the same path.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$repo/.gpu/bundle.tar.xz}
build=$repo/_gpubuild
cd "$repo"
command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] ||
    { echo "gpu-bundle: no nvcc (install the CUDA toolkit in /usr/local/cuda)" >&2; exit 1; }
[ -x configure ] || ./autogen.sh
mkdir -p "$build"
if [ ! -f "$build/Makefile" ]; then
    (cd "$build" && ../configure --enable-werror --without-mpi --with-cuda >configure.log) ||
        { echo "gpu-bundle: configure failed (see $build/configure.log)" >&2; exit 1; }
fi
make -C "$build" -j"$(nproc)" >/dev/null
make -C "$build" -j"$(nproc)" check TESTS= >/dev/null
find "$build" -path '*/.deps/*' -type f \( -name '*.Plo' -o -name '*.Po' \) \
    -exec sh -c 'for f; do echo "# dummy" >"$f"; done' sh {} +
s=$(stat -c %Y "$build/config.status")
touch -d "@$((s + 1))" "$build/stamp-h1"
touch -d "@$((s + 2))" "$build/config.h"
make -C "$build" -q all || { echo "gpu-bundle: $build is not up to date after the fix-up" >&2; exit 1; }

lib=$(mktemp -d "${TMPDIR:-/tmp}/hs-gpu-lib.XXXXXX")
trap 'rm -rf "$lib"' EXIT
mkdir "$lib/hs-gpu-lib"
bins="$build/.libs/hearsay $build/.libs/libhearsay.so"
for t in "$build"/tests/.libs/*; do [ -x "$t" ] && bins="$bins $t"; done
# shellcheck disable=SC2086 # word splitting of the program list is meant
ldd $bins 2>/dev/null | awk '/=> \//{print $3}' | sort -u |
    grep -v -E '/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so|cuda|cudnn|cublas|libhearsay' |
    while read -r l; do cp -L "$l" "$lib/hs-gpu-lib/"; done

mkdir -p "$(dirname "$out")"
name=$(basename "$repo")
tar cf - -C "$(dirname "$repo")" --exclude="$name/.git" --exclude="$name/.gpu" \
    --exclude="$name/_build" --exclude="$name/_build-*" --exclude="$name/autom4te.cache" \
    --exclude="$name/_gpubuild/tests/*.log" --exclude="$name/_gpubuild/tests/*.trs" "$name" \
    -C "$lib" hs-gpu-lib | xz -T0 -6 >"$out"
echo "gpu-bundle: $out ($(du -h "$out" | cut -f1)); unpack it on the GPU machine at $(dirname "$repo")"
