#!/usr/bin/env bash
# scripts/gpu-check.sh — the prepared run for a GPU machine (issue 27 item 5): one script, short
# enough to rerun, that records what only a GPU can measure. Run it from the bundle that
# scripts/gpu-bundle.sh packed (its header says how to unpack it), in the checkout's root:
#
#   scripts/gpu-check.sh [--device cuda|emu] [--out DIR] [--quick]
#
# --device emu rehearses the whole script on a machine without a GPU (the emulated device:
# every step runs, the figures are the host's). Steps, each logged to DIR (default
# ${OUT:-gpu-check}) and summed up in DIR/summary.txt, one line per step, PASS or FAIL:
#   1. the CUDA kernel suite and the transport suite (device memory through the transports:
#      mapped by IPC, staged), `make check` in _gpubuild (in _build with --device emu);
#   2. every algorithm in `hearsay sim -n 4` on the device and on the CPU, same flags: both
#      finish, and the final test accuracies are printed side by side;
#   3. `hearsay bench p2p --device`: 64 MiB device-to-device between 2 processes, mapped
#      (CUDA IPC) and staged (HS_TMR_IPC=0), beside the device's own copy;
#   4. `hearsay bench step` of LeNet-5 and ResNet-20 on the device (--quick: LeNet-5 only),
#      in fp32, fp32 with TF32, bf16 and fp16 (beside PyTorch's autocast when HS_PYTHON names
#      a Python whose torch has CUDA);
#   5. mixed precision's accuracy: experiments/precision.sh on the device (LeNet-5, 3 seeds,
#      and ResNet-20, 2 seeds; --quick: LeNet-5, 2 seeds), fp32 / bf16 / fp16 / tf32 side by
#      side in DIR/precision.md.
# Exits 1 when a step failed (the others still run), 2 on a usage error.
set -uo pipefail
device=cuda out=${OUT:-gpu-check} quick=0
while [ $# -gt 0 ]; do
    case "$1" in
    --device) device=${2:?--device needs cuda or emu}; shift 2 ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --quick) quick=1; shift ;;
    -h | --help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
case "$device" in cuda | cuda:[0-9]* | emu) ;; *) echo "gpu-check: --device $device: cuda or emu" >&2; exit 2 ;; esac
repo=$(cd "$(dirname "$0")/.." && pwd)
build=$repo/_gpubuild
[ "$device" = emu ] && build=$repo/${HS_BUILD:-_build}
bin=$build/hearsay
[ -x "$bin" ] || { echo "gpu-check: no $bin (build it, or unpack the bundle)" >&2; exit 2; }
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
summary=$out/summary.txt
: >"$summary"
fail=0
step() { # NAME LOG CMD...: run, record PASS/FAIL with the seconds it took
    local name=$1 log=$2 t0 rc
    shift 2
    t0=$(date +%s.%N)
    "$@" >"$log" 2>&1
    rc=$?
    printf '%-5s %-40s %6.1f s  (%s)\n' "$([ $rc = 0 ] && echo PASS || echo FAIL)" "$name" \
        "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')" "${log#"$out"/}" | tee -a "$summary"
    [ $rc = 0 ] || fail=1
    return $rc
}
{
    echo "# gpu-check $(date -u +%FT%TZ), device $device, $(uname -n)"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    grep -m1 'model name' /proc/cpuinfo
    "$bin" --version
} >"$out/machine.txt" 2>&1
cat "$out/machine.txt"

# 1. the suites
suites="tests/test_transport tests/test_device_emu"
[ "$device" != emu ] && suites="tests/test_kernels_cuda $suites"
step "make check ($suites)" "$out/check.log" make -C "$build" check TESTS="$suites"

# 2. every algorithm on the device and on the CPU
algos=("local" "sgp" "osgp --tau 2" "dpsgd" "allreduce" "allreduce --compress int8"
    "easgd --tau 2" "lsgd --tau 2" "localsgd --period 3" "adpsgd" "choco --compress topk:25%"
    "qsgp --compress int8")
flags="--model mlp:64-128-10 --data gauss:dim=64,classes=10,train=8000,test=1000 --batch 32
    --lr 0.1 --max-iters 200 --seed 1 -q --threads 1"
acc() { /usr/bin/env python3 -c "import json,sys; print('%.2f' % (100 * json.load(open(sys.argv[1]))['final_test_acc']))" "$1" 2>/dev/null || echo -; }
printf '%-28s %10s %10s\n' algorithm "acc cpu" "acc $device" >"$out/algos.txt"
for a in "${algos[@]}"; do
    tag=$(echo "$a" | tr ' :%' '___')
    for d in cpu "$device"; do
        # shellcheck disable=SC2086 # the flags are words
        step "sim -n 4 --algo $a --device $d" "$out/sim-$tag-$d.log" \
            "$bin" sim -n 4 --algo $a --device "$d" $flags --out "$out/sim-$tag-$d"
    done
    printf '%-28s %10s %10s\n' "$a" "$(acc "$out/sim-$tag-cpu/summary.json")" \
        "$(acc "$out/sim-$tag-$device/summary.json")" >>"$out/algos.txt"
done
cat "$out/algos.txt"

# 3. device memory between two processes: mapped, then staged
for ipc in 1 0; do
    step "bench p2p --device $device (HS_TMR_IPC=$ipc)" "$out/p2p-ipc$ipc.log" \
        env HS_TMR_IPC=$ipc "$bin" bench p2p --provider hsshm --min 4M --max 64M --reps 5 \
        --reference none --device "$device"
    grep -o '[0-9]* B .*' "$out/p2p-ipc$ipc.log" | sed 's/latency.*stream/stream/' | tail -5
done

# 4. the step on the device
models="lenet5 resnet20"
[ $quick = 1 ] && models=lenet5
ref=()
[ -n "${HS_PYTHON:-}" ] && ref=(--reference torch)
for m in $models; do
    for p in fp32 tf32 bf16 fp16; do
        pf=(--precision "$p")
        [ "$p" = tf32 ] && pf=(--precision fp32 --tf32)
        step "bench step --model $m --device $device ${pf[*]}" "$out/step-$m-$p.log" \
            "$bin" bench step --model "$m" --device "$device" --reps 10 --warmup 3 "${pf[@]}" \
            "${ref[@]}"
        grep -E '^(hearsay|gemm|pytorch|ratio)' "$out/step-$m-$p.log"
    done
done

# 5. mixed precision's accuracy against fp32
pm=(--models lenet5 --seeds 3)
[ $quick = 1 ] && pm=(--models lenet5 --seeds 2)
# the digits: python3-sklearn's where it is installed, else the bundle's copy
dg=$(dirname "$repo")/hs-gpu-data/digits.csv.gz
[ -f "$dg" ] && pm+=(--data "digits:$dg")
step "precision.sh ${pm[*]} --device $device" "$out/precision-lenet5.log" \
    env HEARSAY="$bin" bash "$repo/experiments/precision.sh" --device "$device" "${pm[@]}" \
    --out "$out/precision-runs"
if [ $quick = 0 ]; then
    step "precision.sh --models resnet20 --seeds 2 --device $device" "$out/precision-resnet20.log" \
        env HEARSAY="$bin" bash "$repo/experiments/precision.sh" --device "$device" \
        --models resnet20 --seeds 2 "${pm[@]:4}" --out "$out/precision-runs"
fi
grep -h '^|' "$out"/precision-*.log | awk '!seen[$0]++' >"$out/precision.md"
cat "$out/precision.md"
echo "gpu-check: $(grep -c '^PASS' "$summary") passed, $(grep -c '^FAIL' "$summary") failed; all in $out"
exit $fail
