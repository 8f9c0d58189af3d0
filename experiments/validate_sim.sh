#!/usr/bin/env bash
# Validation of the virtual-time simulator against real runs: the same configuration run for
# real and in virtual time (hearsay sim --sim-compute measured), compared on time to a target
# test loss and iterations per second (docs/simulation.md, "Validation against real runs").
#
#   (a) 2 ranks on this machine, `hearsay run -n 2 -- hearsay train`, links shaped in user
#       space by --link latency=10ms,bw=100Mbit; virtually `hearsay sim -n 2` with that --link.
#   (b) 4 ranks on 2 emulated hosts: two network namespaces joined by a bridge (lib.sh's
#       hs_hosts_up), each host's veth rate-limited by tc tbf at both ends (100 Mbit/s each
#       way, no offloads); 2 ranks in each,
#       started Slurm-style against `hearsay run --rendezvous-only` over the tcp provider
#       (docs/launch.md; as tests/transport_netns.sh). Virtually `hearsay sim -n 4
#       --ranks-per-host 2` with the inter-host links capped by --link (one rule per rank pair
#       across the hosts), and again with --sim-nic (each host's NIC shared by its ranks: fairly
#       among concurrent flows, the default, and first come first served, --sim-nic-share fifo),
#       and with --sim-nic --sim-proto rxm: what the real transport, libfabric's tcp;ofi_rxm,
#       does inside a transfer (every 1.2 MB message goes by ofi_rxm's read rendezvous, and
#       TCP's acknowledgements share the reverse direction; docs/simulation.md), once more
#       with --sim-compute measured-all (the CPU time of the workers' code besides the
#       gradients: mixing, optimizer step, evaluations).
#   (c) 8 ranks on 4 emulated hosts (issue 29 item 6): lib.sh's hosts again, 4 namespaces
#       behind the bridge, tbf at --rate-c (default 1 Gbit/s) each way on every host's veth, 2
#       ranks in each, started as (b); virtually `hearsay sim -n 8 --ranks-per-host 2
#       --sim-nic` at the rate's TCP goodput, fair and with --sim-proto rxm, and with the rxm
#       protocol charging each step the real run's mean compute time (--sim-compute fixed:
#       8 ranks on this machine's cores take several times a step's CPU time).
#       (b) and (c) need root, ip(8) with network namespaces and tc(8) with tbf: otherwise a
#       SKIP line and (a) alone. Every namespace made here is deleted on exit, also on a signal.
# --runs K repeats every configuration's runs K times, the algorithms in turn within a round (so
# each sees the same load); the table then adds one row per configuration and algorithm with
# the real runs' median and range beside the virtual ones' median.
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
  --configs LIST    which comparisons among a, b and c (default "a b"; c: 4 hosts x 2 ranks)
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
  --model-c SPEC    model of (c) (default mlp:64-1024-1024-10: 1,127,434 parameters, a 4.5 MB
                    message takes 38 ms at 1 Gbit/s, two per host NIC per SGP iteration)
  --data-c SPEC     (c) (default the same as (b))
  --epochs-c N      (c) (default 2)
  --rate-c RATE     tbf rate of (c) (default 1gbit)
  --runs K          repeat each configuration's runs K times (default 1)
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
modelc=mlp:64-1024-1024-10
datac=$datab
epochsc=2
ratec=1gbit
runs=1
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
    --model-c) modelc=$2; shift 2 ;;
    --data-c) datac=$2; shift 2 ;;
    --epochs-c) epochsc=$2; shift 2 ;;
    --rate-c) ratec=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --tolerance) tol=$2; shift 2 ;;
    --goodput) goodput=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) usage >&2; hs_die "unknown option '$1'" ;;
    esac
done
for c in $configs; do
    case "$c" in a | b | c) ;; *) hs_die "--configs: unknown configuration '$c' (a, b, c)" ;; esac
done
for a in $algos; do
    case "$a" in allreduce | sgp-sync | sgp-async) ;; *) hs_die "--algos: unknown '$a'" ;; esac
done
case "$runs" in '' | *[!0-9]* | 0) hs_die "--runs: expected a count >= 1, not '$runs'" ;; esac
sim_rate() { # RATE OPTION: the virtual links' rate, RATE x goodput, in Mbit/s
    local bits
    bits=$(hs_rate_bits "$1")
    [ -n "$bits" ] || hs_die "$2: expected NUMBER followed by kbit, mbit or gbit (tc's units), not '$1'"
    awk -v b="$bits" -v g="$goodput" 'BEGIN { printf "%.6gMbit", b * g / 1e6 }'
}
simrate=$(sim_rate "$rate" --rate)
simratec=$(sim_rate "$ratec" --rate-c)
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
cpu_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8, $5 + $6 }' /proc/stat; } # busy idle
cpu_busy() { # "BUSY IDLE" at the start: the share of every core busy since, in %
    local b0 i0 b1 i1
    read -r b0 i0 <<<"$1"
    read -r b1 i1 < <(cpu_ticks)
    awk -v b=$((b1 - b0)) -v i=$((i1 - i0)) 'BEGIN { if (b + i > 0) printf "%.0f", 100 * b / (b + i) }'
}
train_flags() { # ALGO CONFIG
    local m=$model e=$epochs d=$data
    if [ "$2" = b ]; then m=$modelb e=$epochsb d=$datab; fi
    if [ "$2" = c ]; then m=$modelc e=$epochsc d=$datac; fi
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
# (bash runs a trap only after a foreground command ends) and hs_cleanup stops the command.
bg_wait() {
    "$@" &
    local p=$!
    HS_PIDS+=("$p")
    wait "$p"
}

# --- (b)'s and (c)'s hosts: lib.sh's namespaces behind a bridge, always removed ---------------
trap hs_cleanup EXIT
trap 'echo "validate_sim: interrupted" >&2; exit 130' INT TERM HUP

# Per configuration: its namespaces' tag, subnet, hosts and tbf rate.
net_of() { case "$1" in b) echo 10.79.0 ;; c) echo 10.79.1 ;; esac; }
tag_of() { case "$1" in b) echo "hsv$$" ;; c) echo "hsw$$" ;; esac; }
hosts_of() { case "$1" in b) echo 2 ;; c) echo 4 ;; esac; }
rate_of() { case "$1" in b) echo "$rate" ;; c) echo "$ratec" ;; esac; }

setup_netns() { # CONFIG
    local tag net n r
    tag=$(tag_of "$1") net=$(net_of "$1") n=$(hosts_of "$1") r=$(rate_of "$1")
    if ! hs_hosts_up "$tag" "$n" "$r" "$net"; then
        echo "SKIP ($1): could not build the $n hosts (above)"
        return 1
    fi
    echo "($1) hosts: namespaces ${tag}h0..${tag}h$((n - 1)) ($net.1-$n, 2 ranks each) behind the" \
        "bridge of ${tag}sw, tbf $r each way on every host"
}

# (b), (c) for real: 2 ranks per namespace, Slurm-style against a rendezvous in the first.
run_netns() { # DIR LOG ALGO CONFIG
    local -a flags
    mapfile -t flags < <(train_flags "$3" "$4")
    hs_netns_run "$bin" "$(tag_of "$4")" "$(net_of "$4")" "$(hosts_of "$4")" 2 "$1" "$2" \
        "$limit" "${flags[@]}"
}

# The virtual runs paired with a real one of CONFIG: "KIND:FLAGS" lines.
sims_of() { # CONFIG
    local pairs
    case "$1" in
    a) echo "sim:--link $link" ;;
    b)
        pairs="0-2:bw=$simrate;0-3:bw=$simrate;1-2:bw=$simrate;1-3:bw=$simrate"
        printf '%s\n' "sim-link:--ranks-per-host 2 --link $pairs" \
            "sim-nic:--ranks-per-host 2 --sim-nic $simrate" \
            "sim-nic-fifo:--ranks-per-host 2 --sim-nic $simrate --sim-nic-share fifo" \
            "sim-rxm:--ranks-per-host 2 --sim-nic $simrate --sim-proto rxm" \
            "sim-rxm-all:--ranks-per-host 2 --sim-nic $simrate --sim-proto rxm --sim-compute measured-all"
        ;;
    c)
        printf '%s\n' "sim-nic:--ranks-per-host 2 --sim-nic $simratec" \
            "sim-rxm:--ranks-per-host 2 --sim-nic $simratec --sim-proto rxm" \
            "sim-rxm-wallc:--ranks-per-host 2 --sim-nic $simratec --sim-proto rxm --sim-compute REAL"
        ;;
    esac
}
# The real run's compute per iteration in ms of wall time (compute_s of every rank-R.csv row,
# the mean): 8 ranks share 2 cores here, so a step's wall time is several times its CPU time,
# which is what --sim-compute measured charges. `--sim-compute REAL` in a row stands for it.
real_compute_ms() { # DIR
    "$HS_PY" - "$1" <<'PY'
import csv, glob, sys
v = []
for f in glob.glob(sys.argv[1] + "/rank-[0-9]*.csv"):
    with open(f) as fh:
        v += [float(r["compute_s"]) for r in csv.DictReader(fh) if r.get("compute_s")]
print(f"{1000 * sum(v) / len(v):.4f}" if v else "")
PY
}
ranks_of() { case "$1" in a) echo 2 ;; b) echo 4 ;; c) echo 8 ;; esac; }
describe() { # CONFIG KIND
    local r
    case "$1" in
    a) echo "(a) 2 ranks, 1 host, --link $link"; return ;;
    b) r="(b) 4 ranks, 2 netns hosts, tbf $rate" ;;
    c) r="(c) 8 ranks, 4 netns hosts, tbf $ratec" ;;
    esac
    case "$2" in
    sim-link) echo "$r; virtual: --link per rank pair" ;;
    sim-rxm-all) echo "$r; virtual: --sim-nic --sim-proto rxm --sim-compute measured-all" ;;
    sim-rxm-wallc) echo "$r; virtual: --sim-nic --sim-proto rxm --sim-compute fixed:<the real run's compute>" ;;
    sim-rxm) echo "$r; virtual: --sim-nic --sim-proto rxm" ;;
    sim-nic-fifo) echo "$r; virtual: --sim-nic --sim-nic-share fifo" ;;
    *) echo "$r; virtual: --sim-nic" ;;
    esac
}

echo "validate_sim: (a) $model on $data, $epochs epochs; (b) $modelb on $datab, $epochsb" \
    "epochs; (c) $modelc on $datac, $epochsc epochs; target test loss $target, algorithms" \
    "[$algos], $runs run(s) each -> $out"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) on $(nproc) cores"
for c in $configs; do
    if [ "$c" != a ]; then
        why=$(hs_netns_missing)
        if [ -n "$why" ]; then
            echo "SKIP ($c): $why: the ${c} comparison needs root and network namespaces"
            continue
        fi
        setup_netns "$c" || continue
    fi
    mapfile -t sims < <(sims_of "$c")
    for ((k = 1; k <= runs; k++)); do
        sfx=
        [ "$runs" -gt 1 ] && sfx=-r$k
        for a in $algos; do
            mapfile -t flags < <(train_flags "$a" "$c")
            real=$c-$a-real$sfx
            rm -rf "${out:?}/$real"
            l=$(load1)
            echo "== ($c) $a: real${sfx:+ (run $k)} (load $l)"
            t0=$(cpu_ticks)
            if [ "$c" = a ]; then
                bg_wait timeout "$limit" "$bin" run -n 2 -- hearsay train "${flags[@]}" \
                    --link "$link" --out "$out/$real" >"$out/$real.log" 2>&1 || true
            else
                run_netns "$out/$real" "$out/$real.log" "$a" "$c" || true
            fi
            busy=$(cpu_busy "$t0")
            echo "   the machine's cores were ${busy}% busy during the real run"
            [ -n "$busy" ] && l="$l, cpu ${busy}%"
            ok_run "$out/$real" "$out/$real.log" || continue
            for s in "${sims[@]}"; do
                kind=${s%%:*}
                read -r -a simflags <<<"${s#*:}"
                comp=measured # (a --sim-compute in the row's flags replaces it)
                for ((i = 0; i < ${#simflags[@]}; i++)); do
                    if [ "${simflags[$i]}" = --sim-compute ]; then
                        comp=${simflags[$((i + 1))]}
                        simflags=("${simflags[@]:0:$i}" "${simflags[@]:$((i + 2))}")
                        break
                    fi
                done
                if [ "$comp" = REAL ]; then
                    comp=$(real_compute_ms "$out/$real")
                    [ -n "$comp" ] || { echo "   no compute_s in $out/$real"; continue; }
                    comp=fixed:$comp
                fi
                sim=$c-$a-$kind$sfx
                rm -rf "${out:?}/$sim"
                echo "== ($c) $a: virtual, ${s#*:}"
                bg_wait timeout "$limit" "$bin" sim -n "$(ranks_of "$c")" --sim-compute "$comp" \
                    "${simflags[@]}" "${flags[@]}" --out "$out/$sim" >"$out/$sim.log" 2>&1 || true
                ok_run "$out/$sim" "$out/$sim.log" || continue
                printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$(describe "$c" "$kind")" "$a" "$real" "$sim" \
                    "$l" "" >>"$out/pairs.tsv"
            done
        done
    done
    [ "$c" != a ] && hs_hosts_down
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
"$HS_PY" "$here/report.py" validate "$out" --tolerance "$tol"
hs_report "$bin" "$out"
exit "$failed"
