#!/usr/bin/env bash
# Topology study: SGP on W workers over several peer graphs (ring, bidirectional ring, torus,
# static exponential, 1-peer time-varying exponential, complete): iterations and time to a
# target test loss, the consensus distance over time, each beside the graph's spectral gap
# (hearsay topo).
#
# In virtual time (--sim, e.g. -n 64) each graph also gets a pure-averaging run (--lr 0
# --init-spread 1, synchronous SGP: push-sum on the graph's mixing matrices) whose consensus
# distance is written at every iteration: the iterations it takes to fall to --eps of its start
# are what the spectral gap predicts, and OUT/consensus.png draws each curve beside
# |lambda2|^t. Training in virtual time is synchronous SGP too (--delay-bound 0) unless
# --delay-bound says otherwise, on label-skewed shards (Dirichlet 0.1, where the graph decides
# how fast the ranks agree) and costs communication (one rank per host, 1 Gbit NICs, 50 us
# links: --sim-net), so the table gives both orders: iterations to the target (mixing) and
# time to it (mixing times the per-iteration cost), and explains the pairs where they differ.
#
# Writes OUT/results.csv, OUT/table.md, OUT/consensus.png (virtual time),
# OUT/consensus_training.png, OUT/loss_vs_time.png and one run directory per graph and seed
# (OUT/GRAPH-sSEED: training; OUT/averaging/GRAPH: pure averaging; each with the graph's
# topo.json). A few minutes on one 2-core machine either way (--seeds K: K times the training).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=experiments/lib.sh
. "$here/lib.sh"

usage() {
    cat <<EOF2
usage: experiments/topologies.sh [OPTIONS] [-- EXTRA hearsay train FLAGS]

  --out DIR         results directory (default experiments/out/topologies)
  --graphs LIST     space-separated graph specs (default "ring biring torus exp exp1peer
                    complete")
  --algo A          sgp, osgp, dpsgd (undirected graphs only), ... (default sgp)
  --quick           fewer epochs
  --sim             in virtual time (hearsay sim, deterministic; -n 64 for 64 workers), with
                    a pure-averaging run per graph
  -n, --workers N   workers (default 8)
  --delay-bound D   sgp/osgp --delay-bound (default: 0 with --sim, the synchronous SGP of the
                    theory; the algorithm's own default for real runs)
  --eps X           averaging runs: iterations until the consensus distance is X times its
                    start (default 1e-3)
  --max-avg-iters K averaging runs: at most K iterations (default 8000; a graph is run for
                    1.5x its predicted iterations plus 10, up to K)
  --model SPEC      (default mlp:64-128-64-10)
  --data SPEC       (default gauss:dim=64,classes=10,train=32000,test=2000,sep=5)
  --epochs N        (default 2, with --sim 14 = 98 iterations at 64 workers; --quick: 1,
                    with --sim 10)
  --eval-every E    epochs between evaluations (default 0.25, with --sim 0.125: about every
                    iteration at 64 workers)
  --target-loss X   test loss to time (default 0.3, with --sim 0.4: every graph reaches it
                    at 64 workers under the label skew, the slowest mixing ones late)
  --seed N          (default 1)
  --seeds K         K training runs per graph, seeds SEED .. SEED+K-1 (default 1): the table
                    gives each figure's mean and 95 % interval, and the orders count only the
                    pairs the intervals separate
  --shard SPEC      how the training set is split (default iid; with --sim dirichlet:0.1:
                    label skew, where the graph decides how fast the ranks agree)
  --sim-net SPEC    the network in virtual time (default "1Gbit,50us": one rank per host,
                    each host's NIC at 1 Gbit/s, served in send order, 50 us links; none:
                    ideal links, where an iteration costs the same on every graph)
  --sim-compute S   the step time in virtual time (default fixed:5)
  -h, --help
EOF2
}

out=experiments/out/topologies
workers=8
graphs="ring biring torus exp exp1peer complete"
algo=sgp
model=mlp:64-128-64-10
data=gauss:dim=64,classes=10,train=32000,test=2000,sep=5
epochs=
evalevery=
target=
seed=1
seeds=1
shard=
simnet=1Gbit,50us
quick=0
sim=0
simcompute=fixed:5
dbound=
eps=1e-3
maxavg=8000
extra=()
while [ $# -gt 0 ]; do
    case "$1" in
    --out) out=$2; shift 2 ;;
    --workers | -n) workers=$2; shift 2 ;;
    --sim) sim=1; shift ;;
    --sim-compute) simcompute=$2; shift 2 ;;
    --delay-bound) dbound=$2; shift 2 ;;
    --eps) eps=$2; shift 2 ;;
    --max-avg-iters) maxavg=$2; shift 2 ;;
    --graphs) graphs=$2; shift 2 ;;
    --algo) algo=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --model) model=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --eval-every) evalevery=$2; shift 2 ;;
    --target-loss) target=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --shard) shard=$2; shift 2 ;;
    --sim-net) simnet=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) usage >&2; hs_die "unknown option '$1'" ;;
    esac
done
if [ -z "$epochs" ]; then
    # virtual time: 64 workers share the data, so they need more epochs for as many steps
    if [ "$sim" = 1 ]; then epochs=14; else epochs=2; fi
    if [ "$quick" = 1 ]; then
        if [ "$sim" = 1 ]; then epochs=10; else epochs=1; fi
    fi
fi
case "$seeds" in '' | *[!0-9]* | 0) hs_die "--seeds $seeds: give a count >= 1" ;; esac
if [ -z "$target" ]; then
    if [ "$sim" = 1 ]; then target=0.4; else target=0.3; fi
fi
if [ -z "$shard" ]; then
    if [ "$sim" = 1 ]; then shard=dirichlet:0.1; else shard=iid; fi
fi
net=()
networds="the machine's own transport"
if [ "$sim" = 1 ]; then
    case "$simnet" in
    none) networds="ideal links (no communication cost)" ;;
    *,*)
        net=(--ranks-per-host 1 --sim-nic "${simnet%%,*}" --sim-nic-share fifo --link "latency=${simnet#*,}")
        networds="one rank per host, ${simnet%%,*} NICs (served in send order), ${simnet#*,} links"
        ;;
    *) hs_die "--sim-net $simnet: give RATE,LATENCY (1Gbit,50us) or none" ;;
    esac
fi
[ -z "$dbound" ] && [ "$sim" = 1 ] && dbound=0
if [ -z "$evalevery" ]; then
    if [ "$sim" = 1 ]; then evalevery=0.125; else evalevery=0.25; fi
fi
dflags=()
case "$algo" in sgp | osgp) [ -n "$dbound" ] && dflags=(--delay-bound "$dbound") ;; esac
bin=$(hs_find_bin)
[ "$sim" = 1 ] && simcompute=$(hs_sim_compute "$bin" "$simcompute" "$model" 64)
hs_launcher "$bin" "$sim" "$workers" "$simcompute"
mkdir -p "$out"
echo "topologies: $workers workers, $algo ${dflags[*]} over [$graphs], model $model, data" \
    "$data, shards $shard, $epochs epochs, target loss $target, seeds $seed..$((seed + seeds - 1))," \
    "network: $networds -> $out"

# The graph's spectral analysis and mixing matrices (hearsay topo --json) into FILE; prints the
# iterations it predicts to consensus eps.
topo_json() { # GRAPH FILE
    "$bin" topo --graph "$1" --n "$workers" --seed "$seed" --target "$eps" --json >"$2.tmp"
    mv "$2.tmp" "$2"
    "$HS_PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["report"]["predicted_iters"])' "$2"
}

hs_progress_start $(($(wc -w <<<"$graphs") * seeds))
for g in $graphs; do
    name=${g%%:*}
    pred=$(topo_json "$g" "$out/$name.topo.json") || {
        echo "   hearsay topo --graph $g --n $workers failed"
        continue
    }
    if [ "$sim" = 1 ]; then
        # pure averaging: push-sum of random initial models (any model will do: logreg is the
        # cheapest), a step of 1 ms, no learning
        adir="$out/averaging/$name"
        rm -rf "$adir"
        mkdir -p "$out/averaging"
        iters=$(awk -v p="$pred" -v m="$maxavg" 'BEGIN { k = int(1.5 * p + 10); print (k > m ? m : k) }')
        t0=$(date +%s%N)
        if ! "$bin" sim -n "$workers" --sim-compute fixed:1 --algo "$algo" --graph "$g" \
            "${dflags[@]}" --lr 0 --momentum 0 --weight-decay 0 --init-spread 1 \
            --model logreg:64-10 --data "gauss:dim=64,classes=10,train=$((workers * 8)),test=10" \
            --batch 8 --threads 1 --epochs 100000 --max-iters "$iters" --eval-every 0 \
            --seed "$seed" --progress 0 --out "$adir" >"$adir.log" 2>&1 ||
            [ ! -f "$adir/summary.json" ]; then
            echo "   averaging FAILED (log: $adir.log)"
            tail -n 5 "$adir.log" | sed 's/^/   /'
        else
            cp "$out/$name.topo.json" "$adir/topo.json"
            echo "   averaging: $iters iterations in $((($(date +%s%N) - t0) / 1000000)) ms"
        fi
    fi
    # training: one run per seed, OUT/GRAPH-sSEED
    for ((s = seed; s < seed + seeds; s++)); do
        dir="$out/$name-s$s"
        rm -rf "$dir"
        hs_progress_next "$g, seed $s"
        t0=$(date +%s%N)
        if ! "${HS_LAUNCH[@]}" --algo "$algo" --graph "$g" "${dflags[@]}" "${net[@]}" \
            --model "$model" --data "$data" --shard "$shard" --epochs "$epochs" --seed "$s" \
            --batch 64 --threads 1 --target-loss "$target" --eval-every "$evalevery" \
            --progress 5 --out "$dir" "${extra[@]}" >"$dir.log" 2>&1 &&
            [ ! -f "$dir/summary.json" ]; then
            echo "   FAILED (log: $dir.log)"
            tail -n 5 "$dir.log" | sed 's/^/   /'
            continue
        fi
        cp "$out/$name.topo.json" "$dir/topo.json"
        t1=$(date +%s%N)
        echo "   training done in $(((t1 - t0) / 1000000)) ms"
        hs_health "$dir"
    done
    rm -f "$out/$name.topo.json"
done
hs_progress_end
"$HS_PY" "$here/report.py" topologies "$out" --target-loss "$target" --eps "$eps" \
    --eval-every "$evalevery" --network "$networds"
hs_report "$bin" "$out" --target-loss "$target"
