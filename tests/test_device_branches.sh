#!/bin/sh
# tests/test_device_branches.sh — no algorithm branches on the device (issue 27 item 1): the
# algorithms (optim/*.c) reach the kernels' memory only through the staging helper
# (optim/dist_stage.c, hearsay/algo.h's hs_stage_t) and the kernels' own slots, so none of them
# names a device kind or reads which device the kernels are. A line that does fails this test,
# named. The sources come from $HS_SRCDIR, else the directory above this script's.
src=${HS_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
if [ ! -f "$src/optim/dist_stage.c" ]; then
    echo "test_device_branches: FAIL: no optim/dist_stage.c under $src (set HS_SRCDIR)"
    exit 1
fi
n=0
for f in "$src"/optim/*.c "$src"/optim/*.h "$src"/optim/*.inc; do
    [ -f "$f" ] || continue
    case ${f##*/} in dist_stage.c) continue ;; esac
    n=$((n + 1))
done
if [ "$n" -lt 10 ]; then
    echo "test_device_branches: FAIL: only $n algorithm sources found under $src/optim"
    exit 1
fi
hits=$(grep -nE 'HS_DEV_(CPU|CUDA|EMU)|->device\b|\.device\b' "$src"/optim/*.c "$src"/optim/*.h \
    "$src"/optim/*.inc 2>/dev/null | grep -v '/dist_stage\.c:')
if [ -n "$hits" ]; then
    echo "test_device_branches: FAIL: these lines of optim/ branch on the device; stage through"
    echo "hs_stage_t (hearsay/algo.h) instead:"
    printf '%s\n' "$hits" | sed "s|^$src/|  |"
    exit 1
fi
echo "test_device_branches: ok: $n algorithm sources, none names a device kind"
