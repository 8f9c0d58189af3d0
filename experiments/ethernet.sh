#!/usr/bin/env bash
# Ethernet study: how the link speed between hosts changes which algorithm trains fastest.
# N emulated hosts (network namespaces joined by a bridge, R ranks each) whose veths are rate
# limited by tc tbf (10 Gbit, 1 Gbit, 100 Mbit by default, full duplex, both ends of each veth),
# with latency added between hosts; all-reduce SGD, SGP, OSGP, AD-PSGD, EASGD and leader-SGD
# on a model large enough for the link to matter (mlp:256-512-512-10, 1.6 MB a model).
#
# Latency: this kernel has no netem, and tc tbf's `latency` is the longest a packet may queue,
# not a delay. The delay is hearsay's own link shaping (--link, gossip/shaping.c), applied by
# the sending rank to every link between two hosts (one A-B rule per rank pair across hosts):
# each message is handed to the kernel `--latency` after it was sent (after the tbf queue, the
# real wire adds its own). The same --link and the tbf rate (at TCP's goodput, 1448/1514, as
# a NIC per host: --sim-nic) give the simulator's figure for the same configuration:
# `hearsay sim -n N*R --ranks-per-host R --sim-compute measured`.
#
# Needs root, ip(8) with network namespaces, a bridge and tc(8) with tbf: otherwise it says
# what is missing and stops (exit 77) before making anything. Every namespace it made is
# removed on exit, also on SIGINT/SIGTERM/SIGHUP; one that already exists is never touched.
#
# The emulated link's real capacity is measured before each link speed's runs (one kernel TCP
# stream between two hosts): on a busy machine the veths carry less than the tbf rate, and the
# ranks' steps take longer than their CPU time. A second virtual run takes both from the real
# run (ALGO-simr: --sim-nic at the measured goodput, --sim-compute fixed at the real run's mean
# step) beside the nominal one (ALGO-sim: the tbf rate, the step's CPU time measured).
#
# --seeds K: K runs per (link speed, algorithm), seeds SEED..SEED+K-1, each with its real and
# virtual runs. Each cell of the table is then the mean with its 95 % interval over the seeds
# whose run did not fail (Student's t), and a verdict (virtual within --tolerance of real; the
# fastest algorithm at a link speed) is given only where the intervals decide it. A FAILED run
# (health failed, or no summary.json) is marked and left out of every mean and verdict.
#
# Writes OUT/runs.tsv (one line per real run: what the table is made from; its 12th column is
# the seed), OUT/table.md, OUT/results.csv (one row per run and seed: time to target, bytes per
# host, transports, health), and per link speed OUT/RATE/ALGO-sSEED-real, ALGO-sSEED-sim and
# ALGO-sSEED-simr run directories with their logs, and `hearsay report OUT`: OUT/report.md and
# OUT/report-loss_vs_time.png: a panel per link speed and kind of run (real, sim, simr), one
# line per algorithm, the mean of its seeds with their range as a band.
# Exit 0 when every run ran, 1 when one failed, 2 on a usage error, 77 when it cannot run here.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=experiments/lib.sh
. "$here/lib.sh"

usage() {
    cat <<EOF2
usage: experiments/ethernet.sh [OPTIONS] [-- EXTRA hearsay train FLAGS]

  --out DIR          results directory (default experiments/out/ethernet)
  --hosts N          emulated hosts, 2 to 4 (default 2)
  --ranks-per-host R (default 2)
  --rates LIST       tbf rates, tc syntax (default "10gbit 1gbit 100mbit")
  --latency DUR      added one-way latency between hosts, hearsay --link syntax (default 1ms;
                     0 for none)
  --algos LIST       among allreduce sgp osgp adpsgd easgd lsgd dpsgd localsgd (default
                     "allreduce sgp osgp adpsgd easgd lsgd")
  --model SPEC       (default mlp:256-512-512-10: 1.6 MB a model)
  --data SPEC        (default gauss:dim=256,classes=10,train=38400,test=500,sep=5)
  --batch N          per rank (default 64)
  --lr X             (default 0.1)
  --max-iters N      iterations per run (default 120)
  --eval-every E     epochs between evaluations (default 0.05)
  --target-loss X    test loss to time (default 0.4)
  --seed N           the first seed (default 1)
  --seeds K          K runs per (rate, algorithm), seeds SEED .. SEED+K-1, each real and
                     virtual (default 1): each cell is the mean with its 95 % interval over the
                     seeds that did not fail, and a verdict is given only where the intervals
                     decide it (one seed: no interval, no verdict)
  --tolerance X      virtual agrees with real when virtual/real is within 1 +- X over the whole
                     interval (default 0.25)
  --no-sim           no virtual-time runs
  --virtual-only     make the virtual runs of OUT's real runs again (OUT/runs.tsv; give the
                     options the study ran with); needs no root
  --quick            2 hosts x 2 ranks, 1gbit, allreduce and sgp, mlp:64-128-10, 40
                     iterations: the refusal, set-up and clean-up paths in well under a minute
  --tag T            prefix of the namespaces and links made (default hse<pid>; 1 to 9
                     lowercase letters and digits)
  --limit S          bound on any one run, seconds (default 300)
  -h, --help

Run it when the machine is otherwise idle: the real ranks share its cores. The 1-minute load
average before each real run is in the table.
EOF2
}

out=experiments/out/ethernet
hosts=2
rph=2
rates="10gbit 1gbit 100mbit"
latency=1ms
algos="allreduce sgp osgp adpsgd easgd lsgd"
model=mlp:256-512-512-10
data=gauss:dim=256,classes=10,train=38400,test=500,sep=5
batch=64
lr=0.1
iters=120
evalevery=0.05
target=0.4
seed=1
seeds=1
tol=0.25
sim=1
vonly=0
tag=hse$$
limit=300
goodput=$(awk 'BEGIN { printf "%.6f", 1448 / 1514 }')
extra=()
while [ $# -gt 0 ]; do
    case "$1" in
    --out) out=$2; shift 2 ;;
    --hosts) hosts=$2; shift 2 ;;
    --ranks-per-host) rph=$2; shift 2 ;;
    --rates) rates=$2; shift 2 ;;
    --latency) latency=$2; shift 2 ;;
    --algos) algos=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --lr) lr=$2; shift 2 ;;
    --max-iters) iters=$2; shift 2 ;;
    --eval-every) evalevery=$2; shift 2 ;;
    --target-loss) target=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --tolerance) tol=$2; shift 2 ;;
    --no-sim) sim=0; shift ;;
    --virtual-only) vonly=1; shift ;;
    --quick)
        hosts=2 rph=2 rates=1gbit algos="allreduce sgp" model=mlp:64-128-10
        data=gauss:dim=64,classes=10,train=10240,test=200,sep=5 iters=40 evalevery=0.25
        target=1.0
        shift
        ;;
    --tag) tag=$2; shift 2 ;;
    --limit) limit=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) usage >&2; hs_die "unknown option '$1'" ;;
    esac
done
case "$hosts" in 2 | 3 | 4) ;; *) hs_die "--hosts: expected 2, 3 or 4, got '$hosts'" ;; esac
case "$rph" in [1-8]) ;; *) hs_die "--ranks-per-host: expected 1 to 8, got '$rph'" ;; esac
[[ "$tag" =~ ^[a-z0-9]{1,9}$ ]] || hs_die "--tag: expected 1 to 9 lowercase letters and digits, got '$tag'"
[[ "$iters" =~ ^[1-9][0-9]*$ ]] || hs_die "--max-iters: expected a positive integer, got '$iters'"
[[ "$seed" =~ ^[0-9]+$ ]] || hs_die "--seed: expected a non-negative integer, got '$seed'"
case "$seeds" in '' | *[!0-9]* | 0) hs_die "--seeds $seeds: give a count >= 1" ;; esac
[[ "$tol" =~ ^[0-9]*\.?[0-9]+$ ]] || hs_die "--tolerance: expected a number such as 0.25, got '$tol'"
[[ "$limit" =~ ^[1-9][0-9]*$ ]] || hs_die "--limit: expected a positive number of seconds, got '$limit'"
for r in $rates; do
    [ -n "$(hs_rate_bits "$r")" ] || hs_die "--rates: '$r' is not a tc rate (NUMBER followed by kbit, mbit or gbit)"
done
[ -n "$rates" ] || hs_die "--rates: empty"
for a in $algos; do
    case "$a" in allreduce | sgp | osgp | adpsgd | easgd | lsgd | dpsgd | localsgd) ;;
    *) hs_die "--algos: unknown algorithm '$a' (allreduce sgp osgp adpsgd easgd lsgd dpsgd localsgd)" ;;
    esac
done
case "$latency" in
0) ;;
*[0-9]ns | *[0-9]us | *[0-9]ms | *[0-9]s) ;;
*) hs_die "--latency: expected a duration such as 500us or 1ms (hearsay --link syntax), or 0" ;;
esac

why=""
[ "$vonly" = 1 ] || why=$(hs_netns_missing)
if [ -n "$why" ]; then
    echo "ethernet: SKIP: $why; the study emulates hosts with network namespaces, veth pairs" \
        "and tc tbf, which need root and ip netns. Nothing was made." >&2
    exit 77
fi
bin=$(hs_find_bin)
mkdir -p "$out"
out=$(cd "$out" && pwd)
net=10.81.0
size=$((hosts * rph))
link=""
[ "$latency" != 0 ] && link=$(hs_cross_host_link "$hosts" "$rph" "latency=$latency")
failed=0
trap hs_cleanup EXIT
trap 'echo "ethernet: interrupted; removing the namespaces made" >&2; exit 130' INT TERM HUP

load1() { cut -d' ' -f1 /proc/loadavg; }
# Run a command in the background and wait for it: a signal interrupts the wait at once (bash
# runs a trap only after a foreground command ends) and hs_cleanup ends the command.
bg_wait() {
    "$@" &
    local p=$!
    HS_PIDS+=("$p")
    wait "$p"
}
ok_run() { # DIR LOG
    if [ -f "$1/summary.json" ]; then return 0; fi
    echo "   FAILED (log: $2)"
    tail -n 5 "$2" | sed 's/^/   /'
    failed=1
    return 1
}
train_flags() { # ALGO SEED
    printf '%s\n' --algo "$1" --model "$model" --data "$data" --epochs 10 --max-iters "$iters" \
        --batch "$batch" --lr "$lr" --threads 1 --seed "$2" --target-loss "$target" \
        --eval-every "$evalevery" --progress 0
    [ -n "$link" ] && printf '%s\n' --link "$link"
    [ ${#extra[@]} -gt 0 ] && printf '%s\n' "${extra[@]}"
    return 0
}

# The virtual runs of one real run (sets simd, simgd, cms): the same configuration at the tbf
# rate's goodput with the step's CPU time measured (RATE/ALGO-sSEED-sim), and the same with the
# real run's inputs, the measured link goodput and its mean step (RATE/ALGO-sSEED-simr).
virtual_runs() { # RATE ALGO REAL_DIR SIM_NIC MEASURED_NIC SEED
    local rate=$1 a=$2 real=$3 simrate=$4 simg=$5 sd=$6
    local -a flags
    mapfile -t flags < <(train_flags "$a" "$sd")
    simd="" simgd="" cms=""
    # a real run that failed has no virtual runs (its line stays: FAILED in the table)
    [ -f "$out/$real/summary.json" ] || return 0
    # the real run's step: mean compute_s over every rank's iterations (rank-R.csv only, not
    # rank-R-eval.csv nor the algorithms' own rank-R-adpsgd.csv, rank-R-leader.csv)
    cms=$(awk -F, 'FNR > 1 && FILENAME ~ /\/rank-[0-9]+\.csv$/ { s += $6; n++ }
        END { if (n) printf "%.4f", 1e3 * s / n }' "$out/$real"/rank-*.csv)
    [ "$sim" = 1 ] || return 0
    simd=${real%-real}-sim
    rm -rf "${out:?}/$simd"
    echo "== $rate $a seed $sd: virtual, --sim-nic $simrate"
    bg_wait timeout "$limit" "$bin" sim -n "$size" --ranks-per-host "$rph" \
        --sim-compute measured --sim-nic "$simrate" "${flags[@]}" --out "$out/$simd" \
        >"$out/$simd.log" 2>&1 || true
    ok_run "$out/$simd" "$out/$simd.log" || simd=""
    if [ -n "$simg" ] && [ -n "$cms" ]; then
        simgd=${real%-real}-simr
        rm -rf "${out:?}/$simgd"
        echo "== $rate $a seed $sd: virtual with the real inputs: --sim-nic $simg (measured goodput)" \
            "--sim-compute fixed:$cms (the real run's mean step, ms)"
        bg_wait timeout "$limit" "$bin" sim -n "$size" --ranks-per-host "$rph" \
            --sim-compute "fixed:$cms" --sim-nic "$simg" "${flags[@]}" --out "$out/$simgd" \
            >"$out/$simgd.log" 2>&1 || true
        ok_run "$out/$simgd" "$out/$simgd.log" || simgd=""
    fi
    return 0
}

# --virtual-only: the real runs of OUT/runs.tsv stay, their virtual runs are made again.
if [ "$vonly" = 1 ]; then
    [ -s "$out/runs.tsv" ] || hs_die "--virtual-only: no $out/runs.tsv (run the study first)"
    bin=$(hs_find_bin)
    mv "$out/runs.tsv" "$out/runs.tsv.old"
    # fields split on tabs one by one (read with IFS=tab would merge the empty ones); a file
    # from before --seeds has 11 columns: its runs are seed 1
    while IFS= read -r line; do
        [ -n "$line" ] || continue
        mapfile -t f < <(tr '\t' '\n' <<<"$line")
        rate=${f[0]} a=${f[1]} real=${f[2]} l=${f[4]} wire=${f[5]} rph=${f[6]} simrate=${f[7]}
        simg=${f[9]:-} s=${f[11]:-1}
        size=$((hosts * rph))
        virtual_runs "$rate" "$a" "$real" "$simrate" "$simg" "$s"
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$rate" "$a" "$real" \
            "$simd" "$l" "$wire" "$rph" "$simrate" "$simgd" "$simg" "$cms" "$s" >>"$out/runs.tsv"
    done <"$out/runs.tsv.old"
    rm -f "$out/runs.tsv.old"
    "$HS_PY" "$here/report.py" ethernet "$out" --target-loss "$target" --tolerance "$tol" || failed=1
    hs_report "$bin" "$out" --target-loss "$target"
    exit "$failed"
fi

echo "ethernet: $hosts hosts x $rph ranks, tbf [$rates], latency $latency between hosts" \
    "(hearsay --link), algorithms [$algos], $model on $data, batch $batch, lr $lr, $iters" \
    "iterations, target test loss $target, seeds $seed..$((seed + seeds - 1)) -> $out"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) on $(nproc) cores"
: >"$out/runs.tsv"
hs_progress_start $(($(wc -w <<<"$rates") * $(wc -w <<<"$algos") * seeds))
for rate in $rates; do
    simrate=$(awk -v b="$(hs_rate_bits "$rate")" -v g="$goodput" 'BEGIN { printf "%.6gMbit", b * g / 1e6 }')
    if ! hs_hosts_up "$tag" "$hosts" "$rate" "$net"; then
        echo "ethernet: could not build the emulated hosts for $rate (above); stopping" >&2
        exit 1
    fi
    echo "== $rate: namespaces ${tag}h0..${tag}h$((hosts - 1)) ($net.1..$net.$hosts) behind" \
        "${tag}sw, tbf $rate each way on every host"
    mkdir -p "$out/$rate"
    # the link's real capacity here: one kernel TCP stream, ~1 s of the rate (100 MB at most)
    gbytes=$(awk -v b="$(hs_rate_bits "$rate")" 'BEGIN { x = b / 8; printf "%d", (x > 1e8 ? 1e8 : x) }')
    gp=$(hs_link_goodput "$tag" "$net" "$gbytes" 60)
    simg=""
    if [ -n "$gp" ]; then
        simg=$(awk -v b="$gp" 'BEGIN { printf "%.6gMbit", b / 1e6 }')
        echo "   one TCP stream host1 -> host0 carries $simg/s ($gbytes bytes; tbf rate $rate)"
    else
        echo "   could not measure the link's TCP goodput (no $HS_PY?): no virtual run at it"
    fi
    # seeds outermost: a drift in the machine's load spreads over every algorithm
    for ((s = seed; s < seed + seeds; s++)); do for a in $algos; do
        mapfile -t flags < <(train_flags "$a" "$s")
        real=$rate/$a-s$s-real
        rm -rf "${out:?}/$real" "${out:?}/${real%-real}-sim" "${out:?}/${real%-real}-simr"
        l=$(load1)
        tx0=()
        for ((h = 0; h < hosts; h++)); do tx0+=("$(hs_host_tx_bytes "$tag" "$h")"); done
        hs_progress_next "$rate $a seed $s: real (load $l)"
        t0=$(date +%s%N)
        hs_netns_run "$bin" "$tag" "$net" "$hosts" "$rph" "$out/$real" "$out/$real.log" \
            "$limit" "${flags[@]}" || true
        t1=$(date +%s%N)
        wire=""
        for ((h = 0; h < hosts; h++)); do
            wire+="${wire:+,}$(($(hs_host_tx_bytes "$tag" "$h") - tx0[h]))"
        done
        if ok_run "$out/$real" "$out/$real.log"; then
            echo "   $(((t1 - t0) / 1000000)) ms, bytes sent by each host on its veth: $wire"
        fi
        # a failed real run keeps its line (no virtual runs): FAILED in the table
        virtual_runs "$rate" "$a" "$real" "$simrate" "$simg" "$s"
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$rate" "$a" "$real" \
            "$simd" "$l" "$wire" "$rph" "$simrate" "$simgd" "$simg" "$cms" "$s" >>"$out/runs.tsv"
    done; done
    hs_hosts_down
done
hs_progress_end
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
"$HS_PY" "$here/report.py" ethernet "$out" --target-loss "$target" --tolerance "$tol" || failed=1
hs_report "$bin" "$out" --target-loss "$target"
exit "$failed"
