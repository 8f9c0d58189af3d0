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
  --workers N        workers (default 8; 16 with --sim)
  --algos LIST       space-separated (default "allreduce sgp sgp-async osgp dpsgd adpsgd
                     localsgd easgd lsgd"; sgp-async is sgp --delay-bound none, the fully
                     asynchronous variant; sgp-dD and osgp-dD take --delay-bound D, osgp-exact
                     is osgp --delay-mode exact)
  --slowdowns LIST   persistent straggler factors (default "1 2 4 8"; 1: no straggler)
  --pauses           add the transient scenario: on every worker, each iteration pauses with
                     probability 0.05 for an exponential time of mean 10 step times
  --straggler-rank R the slowed rank (default 1)
  --seeds K          K runs per cell, seeds SEED .. SEED+K-1 (default 1; the README's main job
                     takes 3 in virtual time): each cell is the mean with its 95 % interval
                     (Student's t over the seeds), and a verdict is given only where the
                     intervals decide it
  --quick            fewer epochs, slowdowns "1 4" and --pauses (the README's main job)
  --sim              in virtual time (hearsay sim: one process, a deterministic clock; the
                     slowdown is exact whatever the cores), workers default 16, and the
                     network costs time: one worker per host, each host's NIC at --sim-nic
  --sim-compute SPEC the step time in virtual time (default with --sim: fixed:0.5, see below;
                     bench: this model's median step measured here)
  --sim-nic RATE     each host's NIC in virtual time (default 1Gbit; none: ideal links)
  --model SPEC       (default mlp:64-256-256-10; with --sim mlp:64-64-10)
  --data SPEC        (default gauss:dim=64,classes=10,train=128000,test=2000,sep=5; with --sim
                     gauss:dim=64,classes=10,train=64000,test=2000,sep=3.5)
  --shard SPEC       how the training set is split (default iid; with --sim dirichlet:0.1:
                     label skew, where the algorithms' mixing matters)
  --batch N          per-worker batch (default 1024: compute dominates a step, as on real
                     hardware; with --sim 64)
  --lr X             (default 0.2; with --sim 0.1)
  --epochs N         (default 3; --quick: 2; with --sim 4, --quick 3)
  --eval-every E     epochs between evaluations (default 0.25; with --sim 0.125)
  --target-loss X    test loss to time (default 0.3; with --sim 0.75)
  --seed N           (default 1)
  -h, --help

In virtual time the default is a step of 0.5 ms on 1 Gbit NICs: one model-sized message of
mlp:64-64-10 (19 KB, 0.15 ms) then costs 0.31 of a step, about what a ResNet-50 message (102 MB,
82 ms on 10 GbE) costs of the SGP paper's 0.3 s step (0.27); all-reduce moves twice that.
EOF2
}

out=experiments/out/stragglers
workers=8
algos="allreduce sgp sgp-async osgp dpsgd adpsgd localsgd easgd lsgd"
slowdowns="1 2 4 8"
pauses=0
srank=1
model=
data=
shard=
batch=
lr=
epochs=
evalevery=
target=
seed=1
seeds=1
quick=0
sim=0
simcompute=
simnic=1Gbit
extra=()
while [ $# -gt 0 ]; do
    case "$1" in
    --out) out=$2; shift 2 ;;
    --workers) workers=$2; workers_set=1; shift 2 ;;
    --algos) algos=$2; shift 2 ;;
    --slowdowns) slowdowns=$2; shift 2 ;;
    --pauses) pauses=1; shift ;;
    --straggler-rank) srank=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --sim) sim=1; shift ;;
    --sim-compute) simcompute=$2; shift 2 ;;
    --sim-nic) simnic=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --shard) shard=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --lr) lr=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --eval-every) evalevery=$2; shift 2 ;;
    --target-loss) target=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) usage >&2; hs_die "unknown option '$1'" ;;
    esac
done
case "$seeds" in '' | *[!0-9]* | 0) hs_die "--seeds $seeds: give a count >= 1" ;; esac
if [ "$sim" = 1 ]; then
    : "${model:=mlp:64-64-10}" "${data:=gauss:dim=64,classes=10,train=64000,test=2000,sep=3.5}"
    : "${shard:=dirichlet:0.1}" "${batch:=64}" "${lr:=0.1}" "${evalevery:=0.125}"
    : "${target:=0.75}" "${simcompute:=fixed:0.5}"
    if [ "$quick" = 1 ]; then : "${epochs:=3}"; else : "${epochs:=4}"; fi
    [ -z "${workers_set:-}" ] && workers=16
else
    : "${model:=mlp:64-256-256-10}" "${data:=gauss:dim=64,classes=10,train=128000,test=2000,sep=5}"
    : "${shard:=iid}" "${batch:=1024}" "${lr:=0.2}" "${evalevery:=0.25}" "${target:=0.3}"
    if [ "$quick" = 1 ]; then : "${epochs:=2}"; else : "${epochs:=3}"; fi
fi
if [ "$quick" = 1 ]; then
    [ "$slowdowns" = "1 2 4 8" ] && slowdowns="1 4"
    pauses=1
fi
bin=$(hs_find_bin)
[ "$sim" = 1 ] && simcompute=$(hs_sim_compute "$bin" "$simcompute" "$model" "$batch")
hs_launcher "$bin" "$sim" "$workers" "$simcompute"
net=()
if [ "$sim" = 1 ] && [ "$simnic" != none ]; then
    net=(--ranks-per-host 1 --sim-nic "$simnic")
fi
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
nalgos=$(echo "$algos" | wc -w)
total=$((${#scenarios[@]} * nalgos * seeds))
echo "stragglers: $workers workers$([ "$sim" = 1 ] && echo " in virtual time ($simcompute per step$([ ${#net[@]} -gt 0 ] && echo ", one per host, $simnic NICs"))"), algos [$algos], scenarios [${scenarios[*]}] (xK: rank $srank slowed K times$([ "$pauses" = 1 ] && echo "; pauses: p=0.05, exponential, mean ${pause_ms} ms = 10 steps")),"
echo "  model $model, data $data, shards $shard, batch $batch, lr $lr, $epochs epochs, target loss $target, seeds $seed..$((seed + seeds - 1)) -> $out"
# Runs go to OUT/SCENARIO/ALGO-sSEED: one folder per scenario, so `hearsay report OUT` draws one
# panel per scenario, the seeds of an algorithm as one line with its band.
hs_progress_start "$total"
for sc in "${scenarios[@]}"; do
    mkdir -p "$out/$sc"
    for a in $algos; do
        strag=()
        case "$sc" in
        x1) ;;
        x*) strag=(--straggler "slow:$srank:$sc") ;;
        pauses) strag=(--straggler "pause:all:p=0.05:exp=${pause_ms}ms") ;;
        esac
        case "$a" in
        sgp-async) algo=(--algo sgp --delay-bound none) ;;
        osgp-exact) algo=(--algo osgp --delay-mode exact) ;;
        sgp-d* | osgp-d*) algo=(--algo "${a%%-d*}" --delay-bound "${a##*-d}") ;;
        *) algo=(--algo "$a") ;;
        esac
        for ((s = seed; s < seed + seeds; s++)); do
            dir="$out/$sc/$a-s$s"
            rm -rf "$dir"
            hs_progress_next "$a, $sc, seed $s"
            t0=$(date +%s%N)
            if ! "${HS_LAUNCH[@]}" "${algo[@]}" "${net[@]}" --model "$model" --data "$data" \
                --shard "$shard" --epochs "$epochs" --seed "$s" --batch "$batch" --lr "$lr" \
                --threads 1 --target-loss "$target" --eval-every "$evalevery" --progress 5 \
                --out "$dir" "${strag[@]}" "${extra[@]}" >"$dir.log" 2>&1 &&
                [ ! -f "$dir/summary.json" ]; then
                echo "   FAILED (log: $dir.log)"
                tail -n 5 "$dir.log" | sed 's/^/   /'
            fi
            t1=$(date +%s%N)
            echo "   done in $(((t1 - t0) / 1000000)) ms"
            hs_health "$dir"
        done
    done
done
hs_progress_end
"$HS_PY" "$here/report.py" stragglers "$out" --target-loss "$target"
hs_report "$bin" "$out" --target-loss "$target"
