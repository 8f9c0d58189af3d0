#!/usr/bin/env bash
# Topology study: SGP on W workers over several peer graphs (ring, static exponential,
# 1-peer time-varying exponential, torus, complete): iterations and time to a target test
# loss, and the consensus distance over time.
#
# Writes OUT/results.csv, OUT/table.md, OUT/consensus.png, OUT/loss_vs_time.png and one run
# directory per graph. Runs on one 2-core machine in a few minutes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=experiments/lib.sh
. "$here/lib.sh"

usage() {
    cat <<EOF2
usage: experiments/topologies.sh [OPTIONS] [-- EXTRA hearsay train FLAGS]

  --out DIR        results directory (default experiments/out/topologies)
  --graphs LIST    space-separated graph specs (default "ring exp exp1peer torus complete")
  --algo A         sgp, osgp, dpsgd (undirected graphs only), ... (default sgp)
  --quick          fewer epochs
  --sim            in virtual time (hearsay sim, deterministic; -n 64 for 64 workers)
  -n, --workers N  workers (default 8)
  --sim-compute S  the step time in virtual time (default bench)
  --model SPEC     (default mlp:64-256-256-10)
  --data SPEC      (default gauss:dim=64,classes=10,train=32000,test=2000,sep=5)
  --epochs N       (default 2; --quick: 1)
  --target-loss X  test loss to time (default 0.3)
  --seed N         (default 1)
  -h, --help
EOF2
}

out=experiments/out/topologies
workers=8
graphs="ring exp exp1peer torus complete"
algo=sgp
model=mlp:64-256-256-10
data=gauss:dim=64,classes=10,train=32000,test=2000,sep=5
epochs=2
target=0.3
seed=1
quick=0
sim=0
simcompute=bench
extra=()
while [ $# -gt 0 ]; do
    case "$1" in
    --out) out=$2; shift 2 ;;
    --workers | -n) workers=$2; shift 2 ;;
    --sim) sim=1; shift ;;
    --sim-compute) simcompute=$2; shift 2 ;;
    --graphs) graphs=$2; shift 2 ;;
    --algo) algo=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --model) model=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --target-loss) target=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) usage >&2; hs_die "unknown option '$1'" ;;
    esac
done
[ "$quick" = 1 ] && epochs=1
bin=$(hs_find_bin)
[ "$sim" = 1 ] && simcompute=$(hs_sim_compute "$bin" "$simcompute" "$model" 64)
hs_launcher "$bin" "$sim" "$workers" "$simcompute"
mkdir -p "$out"
echo "topologies: $workers workers, $algo over [$graphs], model $model, data $data," \
    "$epochs epochs, target loss $target -> $out"
for g in $graphs; do
    name=${g%%:*}
    dir="$out/$name"
    rm -rf "$dir"
    echo "== $g"
    t0=$(date +%s%N)
    if ! "${HS_LAUNCH[@]}" --algo "$algo" --graph "$g" --model "$model" \
        --data "$data" --epochs "$epochs" --seed "$seed" --batch 64 --threads 1 --target-loss "$target" \
        --eval-every 0.25 --progress 5 --out "$dir" "${extra[@]}" >"$dir.log" 2>&1 && [ ! -f "$dir/summary.json" ]; then
        echo "   FAILED (log: $dir.log)"
        tail -n 5 "$dir.log" | sed 's/^/   /'
        continue
    fi
    t1=$(date +%s%N)
    echo "   done in $(((t1 - t0) / 1000000)) ms"
done
"$HS_PY" "$here/report.py" topologies "$out" --target-loss "$target"
