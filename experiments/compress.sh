#!/usr/bin/env bash
# experiments/compress.sh — compressed communication on a slow link: time to a target accuracy
# and bytes per iteration of CHOCO-SGD, compressed push-sum (qsgp) and EF-SGD against their
# uncompressed baselines (D-PSGD, SGP, all-reduce SGD), 4 workers, 100 Mbit links.
# Prints a Markdown table (docs/algorithms.md, "Compressed communication", holds one).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

usage() {
    cat <<EOF
usage: experiments/compress.sh [--real] [--out DIR] [--sim-compute SPEC] [--epochs E]
                               [--link SPEC] [--target-acc A] [--only REGEX]
  --real              real processes: hearsay run -n 4 -- hearsay train --link ... (slow,
                      and 4 ranks share this machine's cores); default: virtual time
                      (hearsay sim -n 4, deterministic)
  --sim-compute SPEC  the simulator's step time (default bench: measured once here)
  --link SPEC         link model / shaping (default bw=100Mbit)
  --epochs E          (default 4)   --target-acc A (default 0.97)
  --only REGEX        only the runs whose label matches
  --out DIR           keep the runs there (default: a fresh mktemp directory)
EOF
}

real=0 out="" compute=bench epochs=4 link=bw=100Mbit target=0.97 only=.
while [ $# -gt 0 ]; do
    case "$1" in
    --real) real=1 ;;
    --out) out=$2; shift ;;
    --sim-compute) compute=$2; shift ;;
    --epochs) epochs=$2; shift ;;
    --link) link=$2; shift ;;
    --target-acc) target=$2; shift ;;
    --only) only=$2; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
    shift
done

bin=$(hs_find_bin)
model=mlp:256-512-512-10
data=gauss:dim=256
batch=128
[ -n "$out" ] || out=$(mktemp -d /tmp/hs_compress.XXXXXX)
mkdir -p "$out"
if [ "$real" = 1 ]; then
    launch=("$bin" run -n 4 -- "$bin" train)
    mode="real: hearsay run -n 4, --link $link"
else
    compute=$(hs_sim_compute "$bin" "$compute" "$model" "$batch")
    launch=("$bin" sim -n 4 --sim-compute "$compute")
    mode="virtual time: hearsay sim -n 4 --sim-compute $compute, --link $link"
fi
common=(--model "$model" --data "$data" --batch "$batch" --epochs "$epochs" --eval-every 0.25
    --target-acc "$target" --link "$link" --threads 1 -q)

# label | baseline label | flags
runs=(
    "dpsgd||--algo dpsgd"
    "choco int8|dpsgd|--algo choco --compress int8"
    "choco topk:1%|dpsgd|--algo choco --compress topk:1%"
    "choco fp16|dpsgd|--algo choco --compress fp16"
    "sgp (exp1peer, --delay-bound 0)||--algo sgp --graph exp1peer --delay-bound 0"
    "sgp (ring, --delay-bound 0)||--algo sgp --graph ring --delay-bound 0"
    "qsgp int8 (ring)|sgp (exp1peer, --delay-bound 0)|--algo qsgp --graph ring --compress int8"
    "qsgp topk:1% (ring)|sgp (exp1peer, --delay-bound 0)|--algo qsgp --graph ring --compress topk:1%"
    "qsgp int8 (exp)|sgp (exp1peer, --delay-bound 0)|--algo qsgp --graph exp --compress int8"
    "allreduce||--algo allreduce"
    "allreduce EF int8|allreduce|--algo allreduce --compress int8"
    "allreduce EF topk:1%|allreduce|--algo allreduce --compress topk:1%"
)

declare -A ttt
echo "# $mode; $model ($data), batch $batch, $epochs epochs, target test accuracy $target"
echo
echo "| run | bytes sent / iteration / rank | time to target, averaged model (s) | speed-up vs baseline | final test acc | final test loss | run time (s) |"
echo "|---|---:|---:|---:|---:|---:|---:|"
i=0
for r in "${runs[@]}"; do
    IFS='|' read -r label base flags <<<"$r"
    [[ $label =~ $only ]] || continue
    dir="$out/run$i"
    i=$((i + 1))
    # shellcheck disable=SC2086
    if ! "${launch[@]}" "${common[@]}" $flags --out "$dir" >"$dir.log" 2>&1; then
        echo "| $label | failed: see $dir.log | | | | | |"
        continue
    fi
    read -r t acc loss wall bytes < <("$HS_PY" - "$dir" <<'EOF'
import csv, json, sys
d = sys.argv[1]
s = json.load(open(d + "/summary.json"))
rows = list(csv.DictReader(open(d + "/rank-0.csv")))
b = sum(float(r["bytes_sent"]) for r in rows) / max(1, len(rows))
# the averaged model's (summary.json time_to_target_avg_s; a FAILED run reaches nothing)
t = s.get("time_to_target_avg_s", s.get("time_to_target_s"))
if s.get("health") == "failed":
    t = None
print("nan" if t is None else t, s["final_test_acc"], s["final_test_loss"], s["wall_s"], b)
EOF
    )
    ttt[$label]=$t
    sp=""
    if [ -n "$base" ] && [ -n "${ttt[$base]:-}" ]; then
        sp=$(awk -v a="${ttt[$base]}" -v b="$t" 'BEGIN { if (b == "nan" || a == "nan") print "-"; else printf "%.2fx", a / b }')
    fi
    printf "| %s | %.0f | %s | %s | %.2f%% | %.4f | %.1f |\n" "$label" "$bytes" \
        "$(awk -v t="$t" 'BEGIN { if (t == "nan") print "not reached"; else printf "%.2f", t }')" \
        "$sp" "$(awk -v a="$acc" 'BEGIN { print a * 100 }')" "$loss" "$wall"
done
echo
echo "runs in $out"
hs_report "$bin" "$out"
