#!/usr/bin/env bash
# Straggler study: all-reduce SGD, SGP (faithful and asynchronous), OSGP, D-PSGD, AD-PSGD, local
# SGD, EASGD and leader-SGD on W workers, under two kinds of straggler: one worker persistently
# slowed down k x (its compute time x k, emulated by sleeping), and transient random pauses on
# every worker (each iteration with probability 0.05, exponential with a mean of 10 step
# times). Measures the time each algorithm needs to reach a target test loss, and plots loss
# versus time.
#
# Writes OUT/results.csv, OUT/table.md, OUT/loss_vs_time_*.png, OUT/time_to_target.png and
# one run directory per (algorithm, scenario). Runs on one 2-core machine in a few minutes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=experiments/lib.sh
. "$here/lib.sh"

usage() {
    cat <<EOF2
usage: experiments/stragglers.sh [OPTIONS] [-- EXTRA hearsay train FLAGS]

  --out DIR          results directory (default experiments/out/stragglers)
  --workers N        workers (default 8)
  --algos LIST       space-separated (default "allreduce sgp sgp-async osgp dpsgd adpsgd
                     localsgd easgd lsgd"; sgp-async is sgp --delay-bound none, the fully
                     asynchronous variant; sgp-dD and osgp-dD take --delay-bound D)
  --slowdowns LIST   persistent straggler factors (default "1 2 4 8"; 1: no straggler)
  --pauses           add the transient scenario: on every worker, each iteration pauses with
                     probability 0.05 for an exponential time of mean 10 step times
  --straggler-rank R the slowed rank (default 1)
  --quick            fewer epochs (2; 6 with --sim), slowdowns "1 4" and --pauses (the
                     README's main job)
  --sim              in virtual time (hearsay sim: one process, a deterministic clock; the
                     slowdown is exact whatever the cores), workers default 16
  --sim-compute SPEC the step time in virtual time (default bench: this model's median step
                     measured here; fixed:MS for a step time measured elsewhere)
  --model SPEC       (default mlp:64-256-256-10)
  --data SPEC        (default gauss:dim=64,classes=10,train=128000,test=2000,sep=5)
  --batch N          per-worker batch (default 1024: compute dominates a step, as on real
                     hardware, so a straggler's slowdown is what the algorithms must absorb)
  --lr X             (default 0.2)
  --epochs N         (default 3; --quick: 2)
  --target-loss X    test loss to time (default 0.3)
  --seed N           (default 1)
  -h, --help
EOF2
}

out=experiments/out/stragglers
workers=8
algos="allreduce sgp sgp-async osgp dpsgd adpsgd localsgd easgd lsgd"
slowdowns="1 2 4 8"
pauses=0
srank=1
model=mlp:64-256-256-10
data=gauss:dim=64,classes=10,train=128000,test=2000,sep=5
batch=1024
lr=0.2
epochs=3
target=0.3
seed=1
quick=0
sim=0
simcompute=bench
extra=()
while [ $# -gt 0 ]; do
    case "$1" in
    --out) out=$2; shift 2 ;;
    --workers) workers=$2; workers_set=1; shift 2 ;;
    --algos) algos=$2; shift 2 ;;
    --slowdowns) slowdowns=$2; shift 2 ;;
    --pauses) pauses=1; shift ;;
    --straggler-rank) srank=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --sim) sim=1; shift ;;
    --sim-compute) simcompute=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --lr) lr=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --target-loss) target=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) usage >&2; hs_die "unknown option '$1'" ;;
    esac
done
if [ "$quick" = 1 ]; then
    # virtual time: 16 workers share the data, so they need more epochs for as many steps
    if [ "$sim" = 1 ]; then epochs=6; else epochs=2; fi
    [ "$slowdowns" = "1 2 4 8" ] && slowdowns="1 4"
    pauses=1
fi
[ "$sim" = 1 ] && [ -z "${workers_set:-}" ] && workers=16
bin=$(hs_find_bin)
[ "$sim" = 1 ] && simcompute=$(hs_sim_compute "$bin" "$simcompute" "$model" "$batch")
hs_launcher "$bin" "$sim" "$workers" "$simcompute"
# The step time the pauses are measured in: the virtual one, or this model's median step here.
step_ms=""
if [ "$pauses" = 1 ]; then
    if [ "$sim" = 1 ]; then step_ms=${simcompute#fixed:}; else step_ms=$(hs_sim_compute "$bin" bench "$model" "$batch"); step_ms=${step_ms#fixed:}; fi
    pause_ms=$(awk -v s="$step_ms" 'BEGIN { printf "%.3f", 10 * s }')
fi
scenarios=()
for k in $slowdowns; do scenarios+=("x$k"); done
[ "$pauses" = 1 ] && scenarios+=(pauses)
mkdir -p "$out"
echo "stragglers: $workers workers$([ "$sim" = 1 ] && echo " in virtual time ($simcompute)"), algos [$algos], scenarios [${scenarios[*]}] (xK: rank $srank slowed K times$([ "$pauses" = 1 ] && echo "; pauses: p=0.05, exponential, mean ${pause_ms} ms = 10 steps"))," \
    "model $model, data $data, batch $batch, lr $lr, $epochs epochs, target loss $target -> $out"
nalgos=$(wc -w <<<"$algos")
hs_progress_start $((${#scenarios[@]} * nalgos))
for sc in "${scenarios[@]}"; do
    for a in $algos; do
        dir="$out/$a-$sc"
        rm -rf "$dir"
        strag=()
        case "$sc" in
        x1) ;;
        x*) strag=(--straggler "slow:$srank:$sc") ;;
        pauses) strag=(--straggler "pause:all:p=0.05:exp=${pause_ms}ms") ;;
        esac
        case "$a" in
        sgp-async) algo=(--algo sgp --delay-bound none) ;;
        sgp-d* | osgp-d*) algo=(--algo "${a%%-d*}" --delay-bound "${a##*-d}") ;;
        *) algo=(--algo "$a") ;;
        esac
        hs_progress_next "$a, $sc"
        t0=$(date +%s%N)
        if ! "${HS_LAUNCH[@]}" "${algo[@]}" --model "$model" --data "$data" \
            --epochs "$epochs" --seed "$seed" --batch "$batch" --lr "$lr" --threads 1 --target-loss "$target" \
            --eval-every 0.25 --progress 5 --out "$dir" "${strag[@]}" "${extra[@]}" \
            >"$dir.log" 2>&1 && [ ! -f "$dir/summary.json" ]; then
            echo "   FAILED (log: $dir.log)"
            tail -n 5 "$dir.log" | sed 's/^/   /'
            continue
        fi
        t1=$(date +%s%N)
        echo "   done in $(((t1 - t0) / 1000000)) ms"
    done
done
hs_progress_end
"$HS_PY" "$here/report.py" stragglers "$out" --target-loss "$target"
hs_report "$bin" "$out" --target-loss "$target"
