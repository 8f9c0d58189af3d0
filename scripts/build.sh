#!/usr/bin/env bash
# Build Hearsay out of tree in ${HS_BUILD:-_build} (configure flags from HS_CONFIGURE_FLAGS).
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)
build=${HS_BUILD:-_build}
[ -x configure ] && [ configure -nt configure.ac ] || ./autogen.sh
mkdir -p "$build"
cd "$build"
if [ ! -f Makefile ] || [ "$src/configure" -nt config.status ]; then
    # shellcheck disable=SC2086
    "$src/configure" --enable-werror ${HS_CONFIGURE_FLAGS:-}
fi
make -j"$(nproc)"
