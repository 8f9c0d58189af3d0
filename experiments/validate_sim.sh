#!/usr/bin/env bash
# Validation of the virtual-time simulator against real runs: the same configuration run for
# real and in virtual time (hearsay sim --sim-compute measured), compared on time to a target
# test loss and iterations per second (docs/simulation.md, "Validation against real runs").
#
#   (a) 2 ranks on this machine, `hearsay run -n 2 -- hearsay train`, links shaped in user
#       space by --link latency=10ms,bw=100Mbit; virtually `hearsay sim -n 2` with that --link.
#   (b) 4 ranks on 2 emulated hosts: two network namespaces joined by a veth pair whose two
#       ends are rate-limited by tc tbf (100 Mbit/s each way, no offloads); 2 ranks in each,
#       started Slurm-style against `hearsay run --rendezvous-only` over the tcp provider
#       (docs/launch.md; as tests/transport_netns.sh). Virtually `hearsay sim -n 4
#       --ranks-per-host 2` with the inter-host links capped by --link (one rule per rank pair
#       across the hosts), and again with --sim-nic (each host's NIC shared by its ranks).
#       Needs root, ip(8) with network namespaces and tc(8) with tbf: otherwise a SKIP line and
#       (a) alone. Every namespace made here is deleted on exit, also on a signal.
#
# Writes OUT/table.md, OUT/results.csv, OUT/pairs.tsv and one run directory per run (their
# logs beside them). Exit 0 when the runs ran (the table flags figures outside the tolerance),
# 1 when a run failed, 2 on a usage error.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=experiments/lib.sh
. "$here/lib.sh"

usage() {
    cat <<EOF2
usage: experiments/validate_sim.sh [OPTIONS] [-- EXTRA hearsay train FLAGS]

  --out DIR         results directory (default experiments/out/validate_sim)
  --configs LIST    which comparisons: "a b" (default), "a" or "b"
  --algos LIST      among allreduce, sgp-sync (sgp --delay-bound 0, hearsay train's default)
                    and sgp-async (sgp --delay-bound none --sgp-step z: never waits for
                    arrivals) (default "allreduce sgp-sync sgp-async")
  --model SPEC      model of (a) (default mlp:64-128-64-10: 17,226 parameters, a 69 kB SGP
                    message takes 5.5 ms at 100 Mbit/s, the 10 ms latency dominates)
  --model-b SPEC    model of (b) (default mlp:64-512-512-10: 300,554 parameters, 1.2 MB, 100 ms
                    a message: the network, not the 4 ranks' scheduling on 2 cores, dominates)
  --data SPEC       (a) (default gauss:dim=64,classes=10,train=20000,test=2000,sep=5)
  --data-b SPEC     (b) (default the same with test=500: a real evaluation's compute, which
                    virtual time leaves out, costs 4x less)
  --epochs N        (a) (default 2)
  --epochs-b N      (b) (default 1)
  --target-loss X   test loss to time (default 0.3)
  --link SPEC       link of (a) (default latency=10ms,bw=100Mbit)
  --rate RATE       tbf rate of (b), tc syntax: NUMBER kbit|mbit|gbit (default 100mbit)
  --goodput F       the virtual links of (b) carry RATE x F of message bytes (default
                    1448/1514: TCP payload per Ethernet frame; tbf counts frames)
  --tolerance X     flag ratios outside 1 ± X (default 0.15)
  --seed N          (default 1)
  -h, --help

Run it when the machine is otherwise idle: the real runs share its cores, the virtual ones
measure each step's CPU time. The 1-minute load average before each real run is in the table.
EOF2
}

out=experiments/out/validate_sim
configs="a b"
algos="allreduce sgp-sync sgp-async"
model=mlp:64-128-64-10
modelb=mlp:64-512-512-10
datab=gauss:dim=64,classes=10,train=20000,test=500,sep=5
epochsb=1
data=gauss:dim=64,classes=10,train=20000,test=2000,sep=5
epochs=2
target=0.3
link=latency=10ms,bw=100Mbit
rate=100mbit
tol=0.15
seed=1
# The virtual side counts message bytes, tbf counts frames: a TCP segment carries 1448 bytes
# of payload (MSS of a 1500-byte MTU with timestamps) in a 1514-byte frame, so the virtual
# links of (b) get the tbf rate x 1448/1514 (--goodput 1 turns that off).
goodput=$(awk 'BEGIN { printf "%.6f", 1448 / 1514 }')
extra=()
while [ $# -gt 0 ]; do
    case "$1" in
    --out) out=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --algos) algos=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --model-b) modelb=$2; shift 2 ;;
    --data-b) datab=$2; shift 2 ;;
    --epochs-b) epochsb=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --target-loss) target=$2; shift 2 ;;
    --link) link=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --tolerance) tol=$2; shift 2 ;;
    --goodput) goodput=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) usage >&2; hs_die "unknown option '$1'" ;;
    esac
done
for c in $configs; do
    case "$c" in a | b) ;; *) hs_die "--configs: unknown configuration '$c' (a, b)" ;; esac
done
for a in $algos; do
    case "$a" in allreduce | sgp-sync | sgp-async) ;; *) hs_die "--algos: unknown '$a'" ;; esac
done
case "$rate" in
*[0-9]kbit) bits=$(awk -v r="${rate%kbit}" 'BEGIN { print r * 1e3 }') ;;
*[0-9]mbit) bits=$(awk -v r="${rate%mbit}" 'BEGIN { print r * 1e6 }') ;;
*[0-9]gbit) bits=$(awk -v r="${rate%gbit}" 'BEGIN { print r * 1e9 }') ;;
*) hs_die "--rate: expected NUMBER followed by kbit, mbit or gbit (tc's units)" ;;
esac
simrate=$(awk -v b="$bits" -v g="$goodput" 'BEGIN { printf "%.6gMbit", b * g / 1e6 }')
bin=$(hs_find_bin)
mkdir -p "$out"
out=$(cd "$out" && pwd)
: >"$out/pairs.tsv"
limit=600 # seconds, any one run

algo_flags() { # NAME
    case "$1" in
    allreduce) echo "--algo allreduce" ;;
    sgp-sync) echo "--algo sgp --delay-bound 0" ;;
    sgp-async) echo "--algo sgp --delay-bound none --sgp-step z" ;;
    esac
}
load1() { cut -d' ' -f1 /proc/loadavg; }
train_flags() { # ALGO CONFIG
    local m=$model e=$epochs d=$data
    if [ "$2" = b ]; then m=$modelb e=$epochsb d=$datab; fi
    # shellcheck disable=SC2046
    printf '%s\n' $(algo_flags "$1") --model "$m" --data "$d" --epochs "$e" \
        --batch 64 --threads 1 --seed "$seed" --target-loss "$target" --eval-every 0.25 \
        --progress 0 "${extra[@]}"
}
ok_run() { # DIR LOG: the run wrote its summary
    if [ -f "$1/summary.json" ]; then return 0; fi
    echo "   FAILED (log: $2)"
    tail -n 5 "$2" | sed 's/^/   /'
    failed=1
    return 1
}
failed=0
# Run a command in the background and wait for it: a signal then interrupts the wait at once
# (bash runs a trap only after a foreground command ends) and cleanup stops the command.
bg_wait() {
    "$@" &
    local p=$!
    pids+=("$p")
    wait "$p"
}

# --- namespaces: made by setup_netns, always removed ------------------------------------------
tag=hsv$$
nsa=${tag}a
nsb=${tag}b
va=${tag}0
vb=${tag}1
made_ns=0
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    if [ "$made_ns" = 1 ]; then
        ip netns del "$nsa" 2>/dev/null || true
        ip netns del "$nsb" 2>/dev/null || true
        ip link del "$va" 2>/dev/null || true
    fi
}
trap cleanup EXIT
trap 'echo "validate_sim: interrupted" >&2; exit 130' INT TERM HUP

# Prints nothing and returns 0 when (b) can run, else the reason on stdout.
netns_missing() {
    [ "$(id -u)" = 0 ] || { echo "not running as root"; return; }
    command -v ip >/dev/null 2>&1 || { echo "no ip(8)"; return; }
    command -v tc >/dev/null 2>&1 || { echo "no tc(8)"; return; }
    command -v timeout >/dev/null 2>&1 || { echo "no timeout(1)"; return; }
    ip netns list >/dev/null 2>&1 || { echo "ip netns does not work here"; return; }
}

setup_netns() {
    local err
    err=$(mktemp)
    made_ns=1
    if ! { ip netns add "$nsa" && ip netns add "$nsb"; } 2>"$err"; then
        echo "SKIP (b): ip netns add failed: $(cat "$err")"
        rm -f "$err"
        return 1
    fi
    if ! ip link add "$va" type veth peer name "$vb" 2>"$err"; then
        echo "SKIP (b): no veth pair: $(cat "$err")"
        rm -f "$err"
        return 1
    fi
    # tbf at packet size: no segmentation offload (a 64 kB GSO packet would pass a small
    # bucket in one go, or never), a bucket of two packets, a queue long enough never to drop.
    if ! { ip link set "$va" netns "$nsa" && ip link set "$vb" netns "$nsb" &&
        ip -n "$nsa" addr add 10.79.0.1/24 dev "$va" &&
        ip -n "$nsb" addr add 10.79.0.2/24 dev "$vb" &&
        ip -n "$nsa" link set "$va" gso_max_size 1500 gso_max_segs 1 &&
        ip -n "$nsb" link set "$vb" gso_max_size 1500 gso_max_segs 1 &&
        ip -n "$nsa" link set "$va" up && ip -n "$nsb" link set "$vb" up &&
        ip -n "$nsa" link set lo up && ip -n "$nsb" link set lo up; } 2>"$err"; then
        echo "SKIP (b): could not configure the veth pair: $(cat "$err")"
        rm -f "$err"
        return 1
    fi
    if ! { tc -n "$nsa" qdisc add dev "$va" root tbf rate "$rate" burst 3000 latency 2s &&
        tc -n "$nsb" qdisc add dev "$vb" root tbf rate "$rate" burst 3000 latency 2s; } 2>"$err"; then
        echo "SKIP (b): no tc tbf: $(cat "$err")"
        rm -f "$err"
        return 1
    fi
    rm -f "$err"
    echo "(b) hosts: namespaces $nsa (10.79.0.1, ranks 0-1) and $nsb (10.79.0.2, ranks 2-3)," \
        "veth $va-$vb, tbf $rate each way"
}

# (b) for real: 4 ranks, 2 per namespace, Slurm-style against a rendezvous in the first.
run_netns() { # DIR LOG ALGO
    local dir=$1 log=$2 rdvdir r ns dev i rc=0
    local -a flags
    mapfile -t flags < <(train_flags "$3" b)
    rdvdir=$(mktemp -d)
    timeout "$limit" ip netns exec "$nsa" "$bin" run --rendezvous-only -n 4 --bind 10.79.0.1 \
        --env-file "$rdvdir/rdv.env" --timeout 60 >"$rdvdir/rdv.log" 2>&1 &
    local rdv=$!
    pids+=("$rdv")
    i=0
    while [ ! -s "$rdvdir/rdv.env" ]; do
        i=$((i + 1))
        if [ $i -gt 100 ]; then
            echo "the rendezvous did not start in 10 s:" >>"$log"
            cat "$rdvdir/rdv.log" >>"$log"
            kill "$rdv" 2>/dev/null || true
            rm -rf "$rdvdir"
            return 1
        fi
        sleep 0.1
    done
    local -a ranks=()
    for r in 0 1 2 3; do
        if [ "$r" -lt 2 ]; then ns=$nsa dev=$va; else ns=$nsb dev=$vb; fi
        (
            set -a
            # shellcheck disable=SC1091
            . "$rdvdir/rdv.env"
            set +a
            exec timeout "$limit" ip netns exec "$ns" env SLURM_PROCID="$r" SLURM_NTASKS=4 \
                HS_HOSTNAME="host$((r / 2))" FI_TCP_IFACE="$dev" \
                "$bin" train "${flags[@]}" --provider tcp --out "$dir"
        ) >"$log.$r" 2>&1 &
        ranks+=($!)
        pids+=("$!")
    done
    for r in "${ranks[@]}"; do wait "$r" || rc=1; done
    if [ "$rc" = 0 ]; then wait "$rdv" || true; else kill "$rdv" 2>/dev/null || true; fi
    cat "$log".[0-3] >>"$log"
    rm -f "$log".[0-3]
    rm -rf "$rdvdir"
    return "$rc"
}

echo "validate_sim: (a) $model on $data, $epochs epochs; (b) $modelb on $datab, $epochsb" \
    "epochs; target test loss $target, algorithms [$algos] -> $out"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) on $(nproc) cores"
for c in $configs; do
    if [ "$c" = b ]; then
        why=$(netns_missing)
        if [ -n "$why" ]; then
            echo "SKIP (b): $why: the 4-rank, 2-host comparison needs root and network namespaces"
            continue
        fi
        setup_netns || continue
    fi
    for a in $algos; do
        mapfile -t flags < <(train_flags "$a" "$c")
        real=$c-$a-real
        rm -rf "${out:?}/$real"
        l=$(load1)
        echo "== ($c) $a: real (load $l)"
        if [ "$c" = a ]; then
            bg_wait timeout "$limit" "$bin" run -n 2 -- hearsay train "${flags[@]}" --link "$link" \
                --out "$out/$real" >"$out/$real.log" 2>&1 || true
        else
            run_netns "$out/$real" "$out/$real.log" "$a" || true
        fi
        ok_run "$out/$real" "$out/$real.log" || continue
        if [ "$c" = a ]; then
            sims=("sim:--link $link")
        else
            pairs="0-2:bw=$simrate;0-3:bw=$simrate;1-2:bw=$simrate;1-3:bw=$simrate"
            sims=("sim-link:--ranks-per-host 2 --link $pairs" "sim-nic:--ranks-per-host 2 --sim-nic $simrate")
        fi
        for s in "${sims[@]}"; do
            kind=${s%%:*}
            read -r -a simflags <<<"${s#*:}"
            sim=$c-$a-$kind
            rm -rf "${out:?}/$sim"
            echo "== ($c) $a: virtual, ${s#*:}"
            bg_wait timeout "$limit" "$bin" sim -n "$([ "$c" = a ] && echo 2 || echo 4)" \
                --sim-compute measured "${simflags[@]}" "${flags[@]}" --out "$out/$sim" \
                >"$out/$sim.log" 2>&1 || true
            ok_run "$out/$sim" "$out/$sim.log" || continue
            if [ "$c" = a ]; then
                cfg="(a) 2 ranks, 1 host, --link $link"
            elif [ "$kind" = sim-link ]; then
                cfg="(b) 4 ranks, 2 netns hosts, tbf $rate; virtual: --link per rank pair"
            else
                cfg="(b) 4 ranks, 2 netns hosts, tbf $rate; virtual: --sim-nic $simrate"
            fi
            printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$cfg" "$a" "$real" "$sim" "$l" "" >>"$out/pairs.tsv"
        done
    done
    if [ "$c" = b ] && [ "$made_ns" = 1 ]; then
        cleanup
        made_ns=0
    fi
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
"$HS_PY" "$here/report.py" validate "$out" --tolerance "$tol"
exit "$failed"
