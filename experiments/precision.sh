#!/usr/bin/env bash
# experiments/precision.sh — mixed precision's accuracy against fp32 (issue 27 item 3): LeNet-5
# and ResNet-20 trained on the handwritten digits (--data digits, 1,438 train / 359 test) with
# --precision fp32, bf16 and fp16 (dynamic loss scaling), and fp32 --tf32, the same seeds for
# every precision. Prints a Markdown table: each precision's mean final test accuracy over the
# seeds, its difference from fp32 (paired by seed) with a 95 % interval (t), the skipped steps
# of fp16's loss scaling, and the seconds a run took. docs/algorithms.md "Mixed precision"
# holds one.
#
# On the CPU (and --device emu) the bf16/fp16 products are an emulation (rounded operands, fp32
# sums; hearsay/kernels.h), numerically what tensor cores compute, slower than fp32; on
# --device cuda they run on the GPU's tensor cores.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

usage() {
    cat <<EOF
usage: experiments/precision.sh [--device DEV] [--models LIST] [--seeds K] [--out DIR]
                                [--jobs J]
  --device DEV    cpu (default), emu, cuda, cuda:N
  --models LIST   comma-separated (default lenet5,resnet20)
  --seeds K       seeds per model and precision (default 8; resnet20 takes min(K, 3) unless
                  --all-seeds)
  --all-seeds     K seeds for every model
  --epochs-lenet5 E (default 30)   --epochs-resnet20 E (default 15)
  --data SPEC     the digits (default digits; digits:PATH for a copy of digits.csv.gz)
  --jobs J        runs at once (default: the number of cores)
  --out DIR       keep the runs there (default: a fresh mktemp directory)
EOF
}

device=cpu models=lenet5,resnet20 seeds=8 all=0 out="" jobs=$(nproc) e_lenet5=30 e_resnet20=15
data=digits
while [ $# -gt 0 ]; do
    case "$1" in
    --device) device=$2; shift ;;
    --models) models=$2; shift ;;
    --seeds) seeds=$2; shift ;;
    --all-seeds) all=1 ;;
    --epochs-lenet5) e_lenet5=$2; shift ;;
    --epochs-resnet20) e_resnet20=$2; shift ;;
    --jobs) jobs=$2; shift ;;
    --data) data=$2; shift ;;
    --out) out=$2; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
    shift
done
case "$seeds" in '' | *[!0-9]* | 0) hs_die "--seeds $seeds: a count >= 1" ;; esac
bin=$(hs_find_bin)
[ -n "$out" ] || out=$(mktemp -d /tmp/hs_precision.XXXXXX)
mkdir -p "$out"
precs=("fp32" "bf16" "fp16" "tf32")
flags_of() { # PREC -> the hearsay train flags
    case "$1" in
    tf32) echo "--precision fp32 --tf32" ;;
    *) echo "--precision $1" ;;
    esac
}

# every run: model prec seed
list=$out/runs.txt
: >"$list"
IFS=, read -r -a mlist <<<"$models"
for m in "${mlist[@]}"; do
    k=$seeds
    [ "$m" = resnet20 ] && [ "$all" = 0 ] && [ "$k" -gt 3 ] && k=3
    for s in $(seq 1 "$k"); do
        for p in "${precs[@]}"; do echo "$m $p $s" >>"$list"; done
    done
done
echo "precision: $(wc -l <"$list") runs ($models, device $device), $jobs at a time, in $out" >&2

run_one() { # MODEL PREC SEED
    local m=$1 p=$2 s=$3 e dir t0
    e=$e_lenet5
    [ "$m" = resnet20 ] && e=$e_resnet20
    dir=$out/$m-$p-s$s
    [ -f "$dir/summary.json" ] && return 0
    t0=$(date +%s.%N)
    # shellcheck disable=SC2046 # the flags are words
    "$bin" train --model "$m" --data "$data" --device "$device" --threads 1 --batch 32 --lr 0.05 \
        --momentum 0.9 --weight-decay 5e-4 --lr-schedule cosine --epochs "$e" --seed "$s" \
        --eval-every 0 -q $(flags_of "$p") --out "$dir" >"$dir.log" 2>&1 ||
        { echo "precision: $m $p seed $s failed (see $dir.log)" >&2; return 1; }
    awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }' >"$dir/seconds"
}
export -f run_one flags_of
export bin out device data e_lenet5 e_resnet20
xargs -P "$jobs" -L 1 bash -c 'run_one "$@"' _ <"$list"

/usr/bin/python3 - "$out" "$device" <<'EOF'
import json, math, os, sys
from collections import defaultdict
out, device = sys.argv[1], sys.argv[2]
# 97.5 % quantiles of Student's t
T = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
     10: 2.228, 11: 2.201, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}
def t975(df):
    return T.get(df) or T[max(k for k in T if k <= df)]
acc = defaultdict(dict); skips = defaultdict(float); secs = defaultdict(list)
for name in sorted(os.listdir(out)):
    f = os.path.join(out, name, "summary.json")
    if not os.path.isfile(f): continue
    m, p, s = name.rsplit("-", 2)
    d = json.load(open(f))
    acc[(m, p)][s] = 100 * d["final_test_acc"]
    skips[(m, p)] += d.get("loss_scale_skipped_steps") or 0
    try: secs[(m, p)].append(float(open(os.path.join(out, name, "seconds")).read()))
    except OSError: pass
print(f"Final test accuracy (%) of the model each run ends with (one worker, so no averaging), "
      f"digits test set (359 images), device {device}; difference from fp32 paired by seed, "
      f"mean and 95 % interval (t).\n")
print("| model | precision | seeds | accuracy mean | minus fp32 | 95 % interval | fp16 skipped steps | s per run (median) |")
print("|---|---|---|---|---|---|---|---|")
for m in sorted({m for m, _ in acc}, key=lambda x: (x != "lenet5", x)):
    base = acc.get((m, "fp32"), {})
    for p in ("fp32", "bf16", "fp16", "tf32"):
        a = acc.get((m, p))
        if not a: continue
        mean = sum(a.values()) / len(a)
        common = [s for s in a if s in base]
        diffs = [a[s] - base[s] for s in common]
        if p != "fp32" and len(diffs) >= 2:
            dm = sum(diffs) / len(diffs)
            sd = math.sqrt(sum((x - dm) ** 2 for x in diffs) / (len(diffs) - 1))
            h = t975(len(diffs) - 1) * sd / math.sqrt(len(diffs))
            dtxt, itxt = f"{dm:+.2f}", f"[{dm - h:+.2f}, {dm + h:+.2f}]"
        elif p != "fp32" and diffs:
            dtxt, itxt = f"{diffs[0]:+.2f}", "-"
        else:
            dtxt, itxt = "", ""
        sk = f"{skips[(m, p)]:.0f}" if p == "fp16" else ""
        sv = sorted(secs[(m, p)])
        med = f"{sv[len(sv) // 2]:.1f}" if sv else "-"
        print(f"| {m} | {p} | {len(a)} | {mean:.2f} | {dtxt} | {itxt} | {sk} | {med} |")
EOF
