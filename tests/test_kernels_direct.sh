#!/bin/sh
# tests/test_kernels_direct.sh — tests/test_kernels and tests/test_nn again with the other
# choices of HS_CPU_CONV_DIRECT: the AVX2 tile of the direct 3x3 convolution (the default
# takes AVX-512VL's wider tile where the CPU has it, so the AVX2 one would go untested there)
# and off (im2col and gemm, what machines without AVX2 run).
dir=$(dirname "${HS_BIN:-./hearsay}")/tests
fail=0
modes=off
# the AVX2 tile only where the CPU runs it (elsewhere avx2 falls back to im2col: no test of it)
if grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo 2>/dev/null; then
    modes="avx2 off"
else
    echo "skip: HS_CPU_CONV_DIRECT=avx2 (this CPU has no AVX2+FMA: the tile cannot run here)"
fi
for mode in $modes; do
    for t in test_kernels test_nn; do
        if ! HS_CPU_CONV_DIRECT=$mode "$dir/$t" >/dev/null 2>&1; then
            echo "FAIL: HS_CPU_CONV_DIRECT=$mode $t"
            HS_CPU_CONV_DIRECT=$mode "$dir/$t" 2>&1 | tail -20
            fail=1
        else
            echo "ok: HS_CPU_CONV_DIRECT=$mode $t"
        fi
    done
done
exit $fail
