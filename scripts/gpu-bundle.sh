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
#   2. copies the build tree and makes the copy self-consistent without the system headers:
#      automake's dependency files name /usr/include/rdma/fabric.h and the like, which the GPU
#      machine lacks, so make would rebuild; the copy's are emptied (as a fresh configure leaves
#      them), and its config.h stamp is ordered after config.status so config.h is not remade
#      (_gpubuild itself keeps tracking the headers for the next build);
#   3. packs the source tree with that copy as _gpubuild, the shared libraries the programs
#      need beside glibc and CUDA (ldd), and the digits (hs-gpu-data/digits.csv.gz, for
#      gpu-check.sh's accuracy study), into one archive. mtimes are kept, so `make
#      check` there finds everything up to date; the script unpacks the archive once here and
#      checks that with `make -q`.
#
# On the GPU machine (as root, the archive in the current directory):
#   mkdir -p "$(dirname "$REPO")" && tar xJf bundle.tar.xz -C "$(dirname "$REPO")"
#   export LD_LIBRARY_PATH=$(dirname "$REPO")/hs-gpu-lib:<the directories of libcudnn.so.9
#                                                     and libcublas.so.13 there>
#   cd "$REPO/_gpubuild" && make -q all && make -j8 check
# where REPO is this checkout's absolute path, printed at the end: the Makefiles name
# it, so the tree must land at the same path.
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

# The archive's copy of the build tree: dependency files emptied, config.h's stamps ordered.
# (The copy, not _gpubuild itself, whose dependency files keep tracking the headers here.)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hs-gpu-bundle.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cp -a "$build" "$tmp/_gpubuild"
find "$tmp/_gpubuild" -path '*/.deps/*' -type f \( -name '*.Plo' -o -name '*.Po' \) \
    -exec sh -c 'for f; do echo "# dummy" >"$f"; done' sh {} +
rm -f "$tmp"/_gpubuild/tests/*.log "$tmp"/_gpubuild/tests/*.trs
s=$(stat -c %Y "$tmp/_gpubuild/config.status")
touch -d "@$((s + 1))" "$tmp/_gpubuild/stamp-h1"
touch -d "@$((s + 2))" "$tmp/_gpubuild/config.h"

mkdir "$tmp/hs-gpu-lib"
# The programs link libhearsay.a (Makefile.am's AM_LDFLAGS = -static): they are the files in
# the build tree themselves, not libtool wrappers (a .libs/ copy is looked at where one exists).
bins="$build/hearsay $build/.libs/libhearsay.so"
for t in "$build"/tests/* "$build"/tests/.libs/* "$build"/.libs/hearsay; do
    [ -f "$t" ] && [ -x "$t" ] && [ "$(head -c 4 "$t" | tail -c 3)" = ELF ] && bins="$bins $t"
done
# shellcheck disable=SC2086 # word splitting of the program list is meant
ldd $bins 2>/dev/null | awk '/=> \//{print $3}' | sort -u |
    grep -v -E '/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so|cuda|cudnn|cublas|libhearsay' |
    while read -r l; do cp -L "$l" "$tmp/hs-gpu-lib/"; done

# The handwritten digits (python3-sklearn's file) for gpu-check.sh's accuracy study: a GPU
# machine has no Debian packages.
mkdir "$tmp/hs-gpu-data"
for d in /usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz \
    /usr/local/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz; do
    [ -f "$d" ] && { cp "$d" "$tmp/hs-gpu-data/"; break; }
done
[ -f "$tmp/hs-gpu-data/digits.csv.gz" ] ||
    echo "gpu-bundle: no digits.csv.gz here (python3-sklearn): gpu-check.sh's step 5 will fail" >&2

mkdir -p "$(dirname "$out")"
name=$(basename "$repo")
tar cf - -C "$(dirname "$repo")" --exclude="$name/.git" --exclude="$name/.gpu" \
    --exclude="$name/_build" --exclude="$name/_build-*" --exclude="$name/_gpubuild" \
    --exclude="$name/autom4te.cache" "$name" \
    -C "$tmp" --transform="s,^_gpubuild,$name/_gpubuild," _gpubuild hs-gpu-lib hs-gpu-data |
    xz -T0 -6 >"$out"
# The archive's build tree must be up to date wherever it lands: unpacked here, `make -q`.
chk=$tmp/check
mkdir "$chk"
xz -dc "$out" | tar xf - -C "$chk"
[ -f "$chk/hs-gpu-lib/libfabric.so.1" ] ||
    { echo "gpu-bundle: the archive lacks hs-gpu-lib/libfabric.so.1" >&2; exit 1; }
make -C "$chk/$name/_gpubuild" -q all >/dev/null 2>&1 ||
    { echo "gpu-bundle: the archive's _gpubuild is not up to date once unpacked" >&2; exit 1; }
echo "gpu-bundle: $out ($(du -h "$out" | cut -f1)); unpack it on the GPU machine at $(dirname "$repo")"
