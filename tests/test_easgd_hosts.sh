#!/bin/sh
# shellcheck disable=SC2015,SC2317 # A && B || fail: fail is the else; cleanup runs from trap
# tests/test_easgd_hosts.sh — EASGD over `--provider auto` on two emulated hosts keeps its pace
# (issue 28, item 8). Two network namespaces of our own joined by a veth pair, two ranks in
# each, started Slurm-style against `hearsay run --rendezvous-only` in the first; auto opens
# the hybrid transport (hsshm within a namespace, tcp;ofi_rxm over the veth).
#
# The EASGD center's service keeps 8 receives from any source posted and reposts each one as
# soon as it handled its message. Before the fix, every such receive that completed on one
# side of the hybrid left its other side posted for good (an "orphan"), one more per message:
# after 1000 iterations ~2000 on each rank, every one tested on each poll and scanned by
# hsshm's match, and the run slowed from 305 to 110 it/s between its first and last quarter
# (the median iteration of the last quarter about 3x the first's). Now a repost takes the
# orphan over (gossip/hybrid.c, docs/transport.md).
#
# Checks: every rank exits 0 and the job writes summary.json naming both transports; for
# each rank, the median iteration time of the last quarter is at most 1/0.45 of the first
# quarter's (the median, not the mean: a burst of load from elsewhere on a shared machine
# moves a mean, rarely a median). Measured on the loaded 2-core machine (load 20-28), last
# quarter's pace over the first's: the fixed code 1.03 .. 1.66 per rank (2 runs, ~5 s jobs),
# the old one 0.29 .. 0.33 (and once past the 50 s bound under heavier load). The fixed code
# once fell to 0.57 on one rank with another test suite running beside a CI rehearsal (stop
# 39), so the bound sits between the two: 0.45, a third above the leak's worst.
# Exit 0 pass, 77 skip (reason printed), 1 failure. The namespaces are always deleted.
set -u
HS_BIN=${HS_BIN:-./hearsay}
LIMIT=50  # seconds, bound on the job (the fixed code: ~5 s here, the old one ~20 s)
ITERS=1000
MIN_PACE=0.45
tag=he$$
nsA=${tag}a
nsB=${tag}b
vA=${tag}va
vB=${tag}vb
dir=$(mktemp -d "${TMPDIR:-/tmp}/hs_easgd_hosts_XXXXXX") || exit 1
pids=
cleanup() {
    for p in $pids; do kill -9 "$p" 2>/dev/null; done
    for ns in "$nsA" "$nsB"; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
        ip netns del "$ns" 2>/dev/null
    done
    ip link del "$vA" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
skip() {
    echo "test_easgd_hosts: skipped: $*"
    exit 77
}
fail() {
    echo "test_easgd_hosts: FAIL: $*"
    exit 1
}
[ "$(id -u)" = 0 ] || skip "not running as root (network namespaces need it)"
command -v ip >/dev/null 2>&1 || skip "no ip(8)"
command -v timeout >/dev/null 2>&1 || skip "no timeout(1)"
ip netns add "$nsA" 2>"$dir/err" || skip "ip netns add failed: $(cat "$dir/err")"
ip netns add "$nsB" 2>"$dir/err" || skip "ip netns add failed: $(cat "$dir/err")"
ip link add "$vA" type veth peer name "$vB" 2>"$dir/err" || skip "no veth: $(cat "$dir/err")"
ip link set "$vA" netns "$nsA" && ip link set "$vB" netns "$nsB" &&
    ip -n "$nsA" addr add 10.76.0.1/24 dev "$vA" && ip -n "$nsB" addr add 10.76.0.2/24 dev "$vB" &&
    ip -n "$nsA" link set "$vA" up && ip -n "$nsB" link set "$vB" up &&
    ip -n "$nsA" link set lo up && ip -n "$nsB" link set lo up ||
    fail "could not configure the veth pair"

timeout "$LIMIT" ip netns exec "$nsA" "$HS_BIN" run --rendezvous-only -n 4 --bind 10.76.0.1 \
    --env-file "$dir/rdv.env" --timeout 30 >"$dir/rdv.log" 2>&1 &
rdv=$!
pids=$rdv
i=0
while [ ! -s "$dir/rdv.env" ]; do
    i=$((i + 1))
    [ $i -le 100 ] || fail "the rendezvous did not start in 10 s: $(cat "$dir/rdv.log")"
    sleep 0.1
done
env_rdv=$(grep -E '^(export )?HS_(RDV|JOB_KEY)=' "$dir/rdv.env" | sed 's/^export //' | tr '\n' ' ')
t0=$(date +%s)
for r in 0 1 2 3; do
    if [ $r -lt 2 ]; then ns=$nsA dev=$vA host=hostA; else ns=$nsB dev=$vB host=hostB; fi
    # shellcheck disable=SC2086
    (
        timeout "$LIMIT" ip netns exec "$ns" env $env_rdv SLURM_PROCID=$r SLURM_NTASKS=4 \
            HS_HOSTNAME=$host FI_TCP_IFACE=$dev HS_BOOT_TIMEOUT=30 \
            "$HS_BIN" train --algo easgd --provider auto --model mlp:64-128-10 \
            --data gauss:dim=64,classes=10,train=38400,test=500,sep=5 --epochs 100 \
            --max-iters $ITERS --batch 64 --lr 0.1 --threads 1 --seed 1 --eval-every 0 \
            --progress 0 --quiet --out "$dir/run" >"$dir/rank$r.log" 2>&1
        echo $? >"$dir/rank$r.rc"
    ) &
    pids="$pids $!"
done
for p in $pids; do [ "$p" = "$rdv" ] || wait "$p"; done
kill "$rdv" 2>/dev/null
wait "$rdv" 2>/dev/null
pids=
wall=$(($(date +%s) - t0))
for r in 0 1 2 3; do
    [ "$(cat "$dir/rank$r.rc")" = 0 ] || {
        for q in 0 1 2 3; do sed "s/^/[rank $q] /" "$dir/rank$q.log"; done
        fail "rank $r exited $(cat "$dir/rank$r.rc") (the job took $wall s)"
    }
done
[ -f "$dir/run/summary.json" ] || fail "no summary.json"
grep -q '"transports": {"intra_host": "hsshm", "inter_host": "tcp;ofi_rxm"}' \
    "$dir/run/summary.json" || fail "summary.json: $(grep transports "$dir/run/summary.json")"

# median of column 2 differences (iteration times) over rows [A, B) of a rank's CSV
median_dt() { # CSV A B
    awk -F, -v a="$2" -v b="$3" 'NR > 1 { n++; if (n > a && n <= b) print $2 - prev; prev = $2 }' \
        "$1" | sort -g | awk '{ v[NR] = $1 } END { print (NR ? v[int((NR + 1) / 2)] : 0) }'
}
bad=
for r in 0 1 2 3; do
    csv=$dir/run/rank-$r.csv
    [ -f "$csv" ] || fail "no $csv"
    n=$(($(wc -l <"$csv") - 1))
    [ "$n" -ge "$ITERS" ] || fail "rank $r: $n iterations in its CSV, expected $ITERS"
    q=$((n / 4))
    first=$(median_dt "$csv" 1 "$q")
    last=$(median_dt "$csv" $((n - q)) "$n")
    pace=$(awk -v f="$first" -v l="$last" 'BEGIN { printf "%.2f", (l > 0 ? f / l : 0) }')
    echo "rank $r: median iteration $(awk -v x="$first" 'BEGIN { printf "%.3f", 1e3 * x }') ms" \
        "in the first quarter, $(awk -v x="$last" 'BEGIN { printf "%.3f", 1e3 * x }') ms in the" \
        "last: pace last/first $pace"
    awk -v p="$pace" -v m="$MIN_PACE" 'BEGIN { exit !(p >= m) }' || bad="$bad $r"
done
[ -z "$bad" ] || fail "rank(s)$bad slowed down over the run (last quarter's pace below $MIN_PACE of the first's): the hybrid transport leaks posted receives?"
echo "test_easgd_hosts: OK: easgd, 4 ranks on 2 emulated hosts, $ITERS iterations in $wall s, no rank slowed down"
exit 0
