#!/usr/bin/env bash
# The all-reduce alone on emulated hosts (experiments/lib.sh: namespaces, tc tbf): H hosts x R
# ranks of tests/allreduce_worker `timed N K` (one untimed all-reduce of N floats, then K timed,
# each checked), started Slurm-style with the transport a cluster job gets (--provider auto:
# hsshm within a host, tcp;ofi_rxm across). For each path in PATHS (ring: the flat ring; hier:
# the hierarchical plan, AR_HOSTS=H) prints the slowest rank's seconds per all-reduce, the bytes
# host 0's veth sent per all-reduce, and that as a share of the link rate.
#
#   experiments/ar_hosts.sh [--rate 1gbit] [--floats 10512650] [--reps 8] [--paths "ring hier"]
#                           [--runs 1] [--hosts 2] [--rph 2] [--tag T]
# Environment passed through to the ranks: HS_AR_CHUNK_BYTES, FI_OFI_RXM_*, HS_* knobs;
# HS_NETNS_SYSCTL (experiments/lib.sh) sets sysctls in every host namespace.
# Needs root and ip netns (else exit 77) and a build in _build (tests/allreduce_worker).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=experiments/lib.sh
. "$here/lib.sh"
rate=1gbit floats=10512650 reps=8 paths="ring hier" runs=1 hosts=2 rph=2 tag=hsa$$ limit=120
while [ $# -gt 0 ]; do
    case "$1" in
    --rate) rate=$2; shift 2 ;;
    --floats) floats=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --paths) paths=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --hosts) hosts=$2; shift 2 ;;
    --rph) rph=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    -h | --help) sed -n 2,13p "$0"; exit 0 ;;
    *) echo "usage: unknown option '$1' (--help)" >&2; exit 2 ;;
    esac
done
why=$(hs_netns_missing)
[ -z "$why" ] || { echo "skip: $why"; exit 77; }
bin=$(hs_find_bin) || exit 1
worker=$(dirname "$bin")/tests/allreduce_worker
[ -x "$worker" ] || { echo "error: no $worker (make -C _build tests/allreduce_worker)" >&2; exit 1; }
trap hs_cleanup EXIT
trap 'exit 130' INT TERM HUP
net=10.$((80 + $$ % 40)).$(($$ % 250)).0
net=${net%.0}
hs_hosts_up "$tag" "$hosts" "$rate" "$net" || exit 1
size=$((hosts * rph))
bits=$(hs_rate_bits "$rate")
printf 'path\trun\ts_per_op\thost0_tx_MB_per_op\tlink_share\tload1\n'
for ((k = 1; k <= runs; k++)); do
    for p in $paths; do
        log=$(mktemp)
        rdvdir=$(mktemp -d)
        timeout "$limit" ip netns exec "${tag}h0" "$bin" run --rendezvous-only -n "$size" \
            --bind "$net.1" --env-file "$rdvdir/rdv.env" --timeout 60 >"$rdvdir/rdv.log" 2>&1 &
        rdv=$!
        HS_PIDS+=("$rdv")
        i=0
        while [ ! -s "$rdvdir/rdv.env" ] && [ $i -lt 600 ]; do i=$((i + 1)); sleep 0.1; done
        tx0=$(hs_host_tx_bytes "$tag" 0)
        pids=()
        for ((r = 0; r < size; r++)); do
            h=$((r / rph))
            (
                set -a
                # shellcheck disable=SC1091
                . "$rdvdir/rdv.env"
                set +a
                hv=""
                [ "$p" = hier ] && hv=$hosts
                exec timeout "$limit" ip netns exec "${tag}h$h" env SLURM_PROCID="$r" \
                    SLURM_NTASKS="$size" HS_HOSTNAME="host$h" FI_TCP_IFACE="${tag}v$h" \
                    HS_AR_PATH="$p" AR_HOSTS="$hv" AR_BUF=shared "$worker" timed "$floats" "$reps"
            ) >"$log.$r" 2>&1 &
            pids+=($!)
            HS_PIDS+=("$!")
        done
        ok=1
        for x in "${pids[@]}"; do wait "$x" || ok=0; done
        wait "$rdv" 2>/dev/null || true
        tx1=$(hs_host_tx_bytes "$tag" 0)
        s=$(cat "$log".* | awk '/AR_TIME/ { if ($5 > m) m = $5 } END { print m + 0 }')
        if [ "$ok" = 0 ] || [ "$s" = 0 ]; then
            echo "error: $p run $k failed:" >&2
            cat "$log".* >&2
        fi
        awk -v p="$p" -v k="$k" -v s="$s" -v b=$((tx1 - tx0)) -v n=$((reps + 1)) -v bits="$bits" \
            -v l="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN {
            mb = b / n / 1e6; printf "%s\t%d\t%.4f\t%.2f\t%.2f\t%s\n", p, k, s, mb,
            (s > 0 ? mb * 8e6 / bits / s : 0), l }'
        [ -n "${AR_KEEP_LOGS:-}" ] && cat "$log".* >&2
        rm -rf "$log" "$log".* "$rdvdir"
    done
done
