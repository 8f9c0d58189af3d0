#!/usr/bin/env bash
# All-reduce SGD against PyTorch DDP on emulated hosts (issue 26 item 2): 2 hosts x 2 ranks
# (network namespaces behind one bridge, tc tbf on every veth, experiments/lib.sh), for each
# link rate and model, K rounds of five runs in turn, so that every kind sees the same load:
#   hs       hearsay train --algo allreduce (default --bucket-mb 25: buckets during backward;
#            hierarchical across the hosts: reduce-scatter within a host, ring across, gather)
#   hs-b0    the same with --bucket-mb 0 (one reduction after backward)
#   hs-ring  the same with HS_AR_PATH=ring (one flat ring of the 4 ranks instead, buckets on)
#   ddp      bench/torch_ddp.py: PyTorch DDP, gloo, default bucket_cap_mb=25
#   ddp-flat bench/torch_ddp.py --flat: one flat all-reduce after backward
# The same model (bench/torch_step.py's builders), batch per rank, SGD momentum 0.9 (weight
# decay 0), one thread per rank; hearsay on random data of the model's shape (gauss for an
# MLP, npy arrays of random 3x32x32 images for resnet20), DDP on a random batch.
#
# A run's step: hearsay, the median over iterations SKIP+1..ITERS of rank 0's per-iteration
# wall time (rank-0.csv's wall_s differences); DDP, the median of its ITERS-SKIP timed steps
# after SKIP warm-up steps. Beside each hearsay kind, the simulator's prediction for the same
# configuration: `hearsay sim -n 4 --ranks-per-host 2 --sim-nic <the TCP goodput measured on
# the emulated link> --sim-compute fixed:<mean compute_s of the real runs>`, its step the same
# median over rank 0's iterations. The goodput (--sim-nic-from) is by default that of both
# directions loaded at once (hs_link_goodput_duplex), as the all-reduce loads them; `one` takes
# one stream host 1 -> host 0 (hs_link_goodput; the only measurement before 2026-11-29). Both are
# printed and kept in OUT/goodput.tsv.
#
# Writes OUT/runs.tsv (a line per real run), OUT/sims.tsv, OUT/table.md (experiments/ddp_table.py),
# and per rate OUT/RATE/MODEL-KIND-kK run directories (hearsay) or .json files (DDP) with
# their logs, and OUT/RATE/MODEL-KIND-sim (the virtual runs).
# Exit 0 when every run ran, 1 when one failed, 2 on a usage error, 77 when it cannot run here
# (not root, no network namespaces, no torch.distributed).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=experiments/lib.sh
. "$here/lib.sh"

usage() {
    cat <<EOF2
usage: experiments/ddp_compare.sh [OPTIONS]

  --rates LIST    tbf rates, tc syntax (default "1gbit 10gbit")
  --models LIST   hearsay model specs: mlp:IN-..-OUT or resnet20 (default
                  "mlp:1024-2048-2048-2048-10 resnet20")
  --batch N       per rank (default 32)
  --iters N       iterations (steps) per run (default 30)
  --skip S        first iterations not timed (DDP: warm-up steps) (default 5)
  --runs K        rounds of the five kinds per rate and model (default 3)
  --kinds LIST    among hs hs-b0 hs-ring ddp ddp-flat (default all five)
  --out DIR       (default experiments/out/ddp_compare)
  --no-sim        no simulator predictions
  --sim-nic-from M  the sim's NIC rate: duplex (default: the TCP goodput with both directions
                  loaded at once, the smaller of the two) or one (one stream, one direction)
  --quick         1gbit, mlp:256-512-10, batch 16, 8 iterations (skip 3), 1 round: the
                  set-up, both frameworks and clean-up in well under a minute
  --tag T         prefix of the namespaces and links made (default hsd<pid>; 1 to 9
                  lowercase letters and digits)
  --limit S       bound on any one run, seconds (default 300)
  -h, --help

Needs root, ip netns, tc tbf and /usr/bin/python3 with torch (else exit 77, nothing made).
Run it on an otherwise quiet machine: the 4 ranks share its cores; the load average before each
run is in runs.tsv and the table's heading.
EOF2
}

out=experiments/out/ddp_compare
rates="1gbit 10gbit"
models="mlp:1024-2048-2048-2048-10 resnet20"
batch=32
iters=30
skip=5
runs=3
kinds="hs hs-b0 hs-ring ddp ddp-flat"
sim=1
nic_from=duplex
tag=hsd$$
limit=300
while [ $# -gt 0 ]; do
    case "$1" in
    --rates) rates=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --skip) skip=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --kinds) kinds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --no-sim) sim=0; shift ;;
    --sim-nic-from) nic_from=$2; shift 2 ;;
    --quick) rates=1gbit models=mlp:256-512-10 batch=16 iters=8 skip=3 runs=1; shift ;;
    --tag) tag=$2; shift 2 ;;
    --limit) limit=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; hs_die "unknown option '$1'" ;;
    esac
done
case "$nic_from" in one | duplex) ;;
*) hs_die "--sim-nic-from: '$nic_from': expected one or duplex" ;;
esac
[ -n "$rates" ] || hs_die "--rates: empty"
for r in $rates; do
    [ -n "$(hs_rate_bits "$r")" ] || hs_die "--rates: '$r' is not a tc rate (NUMBER followed by kbit, mbit or gbit)"
done
[ -n "$models" ] || hs_die "--models: empty"
for m in $models; do
    case "$m" in resnet20 | mlp:[0-9]*-[0-9]*) ;;
    *) hs_die "--models: '$m': expected resnet20 or mlp:IN-H1-..-OUT" ;;
    esac
done
for k in $kinds; do
    case "$k" in hs | hs-b0 | hs-ring | ddp | ddp-flat) ;;
    *) hs_die "--kinds: unknown kind '$k' (hs hs-b0 hs-ring ddp ddp-flat)" ;;
    esac
done
[[ "$batch" =~ ^[1-9][0-9]*$ ]] || hs_die "--batch: expected a positive integer, got '$batch'"
[[ "$iters" =~ ^[1-9][0-9]*$ ]] || hs_die "--iters: expected a positive integer, got '$iters'"
if ! [[ "$skip" =~ ^[0-9]+$ ]] || [ "$skip" -ge "$iters" ]; then
    hs_die "--skip: expected an integer below --iters ($iters), got '$skip'"
fi
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || hs_die "--runs: expected a positive integer, got '$runs'"
[[ "$tag" =~ ^[a-z0-9]{1,9}$ ]] || hs_die "--tag: expected 1 to 9 lowercase letters and digits, got '$tag'"
[[ "$limit" =~ ^[1-9][0-9]*$ ]] || hs_die "--limit: expected a positive number of seconds, got '$limit'"

why=$(hs_netns_missing)
if [ -z "$why" ] && ! "$HS_PY" -c 'import torch.distributed as d; assert d.is_available() and d.is_gloo_available()' 2>/dev/null; then
    why="$HS_PY has no torch.distributed with gloo (python3-torch)"
fi
if [ -n "$why" ]; then
    echo "ddp_compare: SKIP: $why; the comparison emulates hosts with network namespaces, veth" \
        "pairs and tc tbf (root, ip netns) and runs PyTorch DDP. Nothing was made." >&2
    exit 77
fi
bin=$(hs_find_bin)
mkdir -p "$out"
out=$(cd "$out" && pwd)
net=10.83.0
hosts=2
rph=2
size=$((hosts * rph))
failed=0
port=29500
trap hs_cleanup EXIT
trap 'echo "ddp_compare: interrupted; removing the namespaces made" >&2; exit 130' INT TERM HUP
load1() { cut -d' ' -f1 /proc/loadavg; }
mbit() { [ -n "$1" ] && awk -v b="$1" 'BEGIN { printf "%.6gMbit", b / 1e6 }'; } # BIT/S -> RATE
bg_wait() { # a signal interrupts the wait at once; hs_cleanup ends the command
    "$@" &
    local p=$!
    HS_PIDS+=("$p")
    wait "$p"
}

# Random data of each model's shape for hearsay (the npy arrays made once, in OUT).
data_spec() { # MODEL
    local n=$((batch * iters * 2))
    case "$1" in
    resnet20)
        if [ ! -s "$out/data-r20-$n/x_train.npy" ]; then
            mkdir -p "$out/data-r20-$n"
            "$HS_PY" - "$out/data-r20-$n" "$n" <<'EOF'
import sys
import numpy as np
d, n = sys.argv[1], int(sys.argv[2])
g = np.random.default_rng(0)
np.save(f"{d}/x_train.npy", g.standard_normal((n, 3, 32, 32), dtype=np.float32))
np.save(f"{d}/y_train.npy", g.integers(0, 10, n))
np.save(f"{d}/x_test.npy", g.standard_normal((64, 3, 32, 32), dtype=np.float32))
np.save(f"{d}/y_test.npy", g.integers(0, 10, 64))
EOF
        fi
        echo "npy:$out/data-r20-$n,classes=10"
        ;;
    mlp:*)
        local dims=${1#mlp:}
        echo "gauss:dim=${dims%%-*},classes=${dims##*-},train=$n,test=64"
        ;;
    esac
}
train_flags() { # MODEL
    printf '%s\n' --algo allreduce --model "$1" --data "$(data_spec "$1")" --batch "$batch" \
        --epochs 100 --max-iters "$iters" --lr 0.01 --momentum 0.9 --weight-decay 0 \
        --threads 1 --eval-every 0 --progress 0 --seed 1
}
# rank 0's step: the median per-iteration wall time after SKIP iterations (seconds); the mean
# compute_s, comm_s, wait_s of every rank's iterations after SKIP (ms)
hs_step() { # DIR
    awk -F, -v s="$skip" 'FNR == 1 { prev = 0; next }
        { d = $2 - prev; prev = $2 } $1 > s { printf "%.6f\n", d }' "$1/rank-0.csv" |
        sort -g | awk '{ a[NR] = $1 } END { if (NR) printf "%.6f", NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}
hs_parts() { # DIR -> "compute_ms comm_ms wait_ms"
    awk -F, -v s="$skip" 'FNR > 1 && FILENAME ~ /\/rank-[0-9]+\.csv$/ && $1 > s {
        c += $6; m += $7; w += $8; n++ }
        END { if (n) printf "%.2f %.2f %.2f", 1e3 * c / n, 1e3 * m / n, 1e3 * w / n }' "$1"/rank-*.csv
}
hs_kind_env() { # KIND -> the HS_AR_PATH for it
    [ "$1" = hs-ring ] && echo ring || echo "${HS_AR_PATH:-auto}"
}
hs_kind_flags() { # KIND
    [ "$1" = hs-b0 ] && printf '%s\n' --bucket-mb 0
    return 0
}

# One DDP job: 4 ranks of bench/torch_ddp.py, 2 per namespace, gloo over the veths.
ddp_run() { # MODEL FLAT(0|1) JSON LOG
    local m=$1 flat=$2 json=$3 log=$4 r h rc=0
    local -a ranks=() extra=()
    [ "$flat" = 1 ] && extra=(--flat)
    port=$((port + 1))
    for ((r = 0; r < size; r++)); do
        h=$((r / rph))
        timeout "$limit" ip netns exec "${tag}h$h" env MASTER_ADDR="$net.1" MASTER_PORT="$port" \
            RANK="$r" WORLD_SIZE="$size" GLOO_SOCKET_IFNAME="${tag}v$h" OMP_NUM_THREADS=1 \
            "$HS_PY" "$here/../bench/torch_ddp.py" --model "$m" --batch "$batch" \
            --warmup "$skip" --steps $((iters - skip)) --timeout "$limit" "${extra[@]}" \
            >"$log.$r" 2>&1 &
        ranks+=($!)
        HS_PIDS+=("$!")
    done
    for r in "${ranks[@]}"; do wait "$r" || rc=1; done
    grep '^{' "$log.0" >"$json" || rc=1
    for ((r = 0; r < size; r++)); do cat "$log.$r" >>"$log"; rm -f "$log.$r"; done
    return "$rc"
}
json_get() { # FILE KEY
    "$HS_PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

echo "ddp_compare: $hosts hosts x $rph ranks, tbf [$rates], models [$models], batch $batch," \
    "$iters iterations (first $skip untimed), $runs rounds of [$kinds] -> $out"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) on $(nproc) cores"
load_start=$(load1)
: >"$out/runs.tsv"
: >"$out/sims.tsv"
: >"$out/goodput.tsv"
hs_progress_start $(($(wc -w <<<"$rates") * $(wc -w <<<"$models") * runs * $(wc -w <<<"$kinds")))
for rate in $rates; do
    if ! hs_hosts_up "$tag" "$hosts" "$rate" "$net"; then
        echo "ddp_compare: could not build the emulated hosts for $rate (above); stopping" >&2
        exit 1
    fi
    mkdir -p "$out/$rate"
    gbytes=$(awk -v b="$(hs_rate_bits "$rate")" 'BEGIN { x = b / 8; printf "%d", (x > 1e8 ? 1e8 : x) }')
    gp1=$(hs_link_goodput "$tag" "$net" "$gbytes" 60)
    gp2=$(hs_link_goodput_duplex "$tag" "$net" "$gbytes" 60)
    g1=$(mbit "$gp1" || true)
    g2=$(mbit "$gp2" || true)
    echo "== $rate: TCP goodput: one stream host1 -> host0 ${g1:-not measured}/s ($gbytes bytes);" \
        "both directions at once ${g2:-not measured}/s each (the smaller)"
    if [ "$nic_from" = duplex ]; then simg=$g2; else simg=$g1; fi
    [ -n "$simg" ] || echo "== $rate: could not measure the link's TCP goodput ($nic_from): no sim prediction"
    printf '%s\t%s\t%s\t%s\n' "$rate" "$simg" "$g1" "$g2" >>"$out/goodput.tsv"
    for m in $models; do
        mname=${m//:/_}
        mapfile -t flags < <(train_flags "$m")
        for ((k = 1; k <= runs; k++)); do
            for kind in $kinds; do
                l=$(load1)
                base=$rate/$mname-$kind-k$k
                hs_progress_next "$rate $m $kind round $k (load $l)"
                step="" parts="" ok=1
                case "$kind" in
                hs*)
                    rm -rf "${out:?}/$base"
                    mapfile -t kf < <(hs_kind_flags "$kind")
                    HS_AR_PATH=$(hs_kind_env "$kind") hs_netns_run "$bin" "$tag" "$net" \
                        "$hosts" "$rph" "$out/$base" "$out/$base.log" "$limit" "${flags[@]}" \
                        "${kf[@]}" || ok=0
                    if [ "$ok" = 1 ] && [ -s "$out/$base/rank-0.csv" ]; then
                        step=$(hs_step "$out/$base")
                        parts=$(hs_parts "$out/$base")
                    else
                        ok=0
                    fi
                    ;;
                ddp*)
                    fl=0
                    [ "$kind" = ddp-flat ] && fl=1
                    rm -f "$out/$base.json"
                    if ddp_run "$m" "$fl" "$out/$base.json" "$out/$base.log"; then
                        step=$(json_get "$out/$base.json" median_s)
                    else
                        ok=0
                    fi
                    ;;
                esac
                if [ "$ok" = 1 ] && [ -n "$step" ]; then
                    echo "   $step s/step${parts:+ (compute, comm, wait ms per iteration: $parts)}"
                else
                    echo "   FAILED (log: $out/$base.log)"
                    tail -n 5 "$out/$base.log" 2>/dev/null | sed 's/^/   /'
                    failed=1
                    step=""
                fi
                printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$rate" "$m" "$kind" "$k" "$step" "$l" \
                    "${parts// /,}" >>"$out/runs.tsv"
            done
        done
        # the simulator's prediction of each hearsay kind: the measured goodput, the real runs'
        # mean compute_s
        if [ "$sim" != 1 ] || [ -z "$simg" ]; then continue; fi
        for kind in $kinds; do
            case "$kind" in hs*) ;; *) continue ;; esac
            cms=$(awk -F'\t' -v r="$rate" -v m="$m" -v k="$kind" '$1 == r && $2 == m &&
                $3 == k && $5 != "" { split($7, p, ","); s += p[1]; n++ }
                END { if (n) printf "%.3f", s / n }' "$out/runs.tsv")
            [ -n "$cms" ] || continue
            sd=$rate/$mname-$kind-sim
            rm -rf "${out:?}/$sd"
            mapfile -t kf < <(hs_kind_flags "$kind")
            echo "== $rate $m $kind: sim, --sim-nic $simg --sim-compute fixed:$cms"
            simstep=""
            if HS_AR_PATH=$(hs_kind_env "$kind") bg_wait timeout "$limit" "$bin" sim -n "$size" \
                --ranks-per-host "$rph" --sim-nic "$simg" --sim-compute "fixed:$cms" \
                "${flags[@]}" "${kf[@]}" --out "$out/$sd" >"$out/$sd.log" 2>&1 &&
                [ -s "$out/$sd/rank-0.csv" ]; then
                simstep=$(hs_step "$out/$sd")
                echo "   $simstep s/step (virtual)"
            else
                echo "   sim FAILED (log: $out/$sd.log)"
                failed=1
            fi
            printf '%s\t%s\t%s\t%s\t%s\n' "$rate" "$m" "$kind" "$simstep" "$cms" >>"$out/sims.tsv"
        done
    done
    hs_hosts_down
done
hs_progress_end
load_end=$(load1)
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
"$HS_PY" "$here/ddp_table.py" "$out" --load "$load_start,$load_end" --batch "$batch" \
    --iters "$iters" --skip "$skip" || failed=1
exit "$failed"
