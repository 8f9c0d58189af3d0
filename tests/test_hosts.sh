#!/bin/sh
# tests/test_hosts.sh — the transport chosen per pair of ranks (issue 15): two hosts emulated by
# two network namespaces of our own joined by a veth pair, two ranks in each, started
# Slurm-style (SLURM_PROCID/SLURM_NTASKS + HS_RDV/HS_JOB_KEY) against
# `hearsay run --rendezvous-only` in the first namespace. Each namespace is a "host"
# (HS_HOSTNAME), so auto opens hsshm between the ranks of a namespace and tcp;ofi_rxm over the
# veth between namespaces.
#   1. sgp and allreduce train to the target loss; summary.json says
#      "transports": {"intra_host": "hsshm", "inter_host": "tcp;ofi_rxm"};
#   2. sgp over a graph of intra-host edges only (0<->1, 2<->3): the model messages between
#      the ranks of a host never touch a network device: the veth and each namespace's
#      loopback carry far fewer bytes than those messages (the rest is start-up and the
#      end-of-run gather); the same run with --provider tcp moves them over loopback
#      (a control: the counters see what they should);
#   3. a rank whose host cannot be reached over tcp (its veth is down) is named, the job
#      stops within the timeout and nothing is left behind (processes, /dev/shm segments).
# Exit 0 pass, 77 skip (reason printed), 1 failure. The namespaces are always deleted.
set -u
HS_BIN=${HS_BIN:-./hearsay}
LIMIT=60 # seconds, bound on every job
tag=hh$$
nsA=${tag}a
nsB=${tag}b
vA=${tag}va # data: libfabric's tcp (FI_TCP_IFACE)
vB=${tag}vb
cA=${tag}ca # control: the rendezvous
cB=${tag}cb
dir=$(mktemp -d "${TMPDIR:-/tmp}/hs_hosts_XXXXXX") || exit 1
pids=
cleanup() {
    for p in $pids; do kill -9 "$p" 2>/dev/null; done
    for ns in "$nsA" "$nsB"; do
        # every process still in our namespaces (none on the normal path)
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
        ip netns del "$ns" 2>/dev/null
    done
    ip link del "$vA" 2>/dev/null
    ip link del "$cA" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
skip() {
    echo "test_hosts: skipped: $*"
    exit 77
}
fail() {
    echo "test_hosts: FAIL: $*"
    exit 1
}
[ "$(id -u)" = 0 ] || skip "not running as root (network namespaces need it)"
command -v ip >/dev/null 2>&1 || skip "no ip(8)"
command -v timeout >/dev/null 2>&1 || skip "no timeout(1)"
ip netns add "$nsA" 2>"$dir/err" || skip "ip netns add failed: $(cat "$dir/err")"
ip netns add "$nsB" 2>"$dir/err" || skip "ip netns add failed: $(cat "$dir/err")"
ip link add "$vA" type veth peer name "$vB" 2>"$dir/err" || skip "no veth: $(cat "$dir/err")"
ip link add "$cA" type veth peer name "$cB" 2>"$dir/err" || skip "no veth: $(cat "$dir/err")"
ip link set "$vA" netns "$nsA" && ip link set "$vB" netns "$nsB" &&
    ip link set "$cA" netns "$nsA" && ip link set "$cB" netns "$nsB" &&
    ip -n "$nsA" addr add 10.79.0.1/24 dev "$vA" && ip -n "$nsB" addr add 10.79.0.2/24 dev "$vB" &&
    ip -n "$nsA" addr add 10.78.0.1/24 dev "$cA" && ip -n "$nsB" addr add 10.78.0.2/24 dev "$cB" &&
    ip -n "$nsA" link set "$vA" up && ip -n "$nsB" link set "$vB" up &&
    ip -n "$nsA" link set "$cA" up && ip -n "$nsB" link set "$cB" up &&
    ip -n "$nsA" link set lo up && ip -n "$nsB" link set lo up ||
    fail "could not configure the veth pairs"

# bytes a namespace's device sent so far
txb() { ip netns exec "$1" cat "/sys/class/net/$2/statistics/tx_bytes"; }

# job NAME TRAIN-ARGS...: the rendezvous and 4 ranks (0, 1 in A; 2, 3 in B); rank logs in
# $dir/NAME.R.log, statuses in $dir/NAME.R.rc, rank 0's --out in $dir/NAME.
job() {
    name=$1
    shift
    rm -f "$dir/rdv.env"
    timeout "$LIMIT" ip netns exec "$nsA" "$HS_BIN" run --rendezvous-only -n 4 --bind 10.78.0.1 \
        --env-file "$dir/rdv.env" --timeout 30 >"$dir/$name.rdv.log" 2>&1 &
    rdv=$!
    pids="$rdv"
    i=0
    while [ ! -s "$dir/rdv.env" ]; do
        i=$((i + 1))
        [ $i -le 100 ] || fail "$name: the rendezvous did not start in 10 s: $(cat "$dir/$name.rdv.log")"
        sleep 0.1
    done
    env_rdv=$(grep -E '^(export )?HS_(RDV|JOB_KEY)=' "$dir/rdv.env" | sed 's/^export //' | tr '\n' ' ')
    for r in 0 1 2 3; do
        if [ $r -lt 2 ]; then ns=$nsA dev=$vA host=hostA; else ns=$nsB dev=$vB host=hostB; fi
        # shellcheck disable=SC2086
        (
            timeout "$LIMIT" ip netns exec "$ns" env $env_rdv SLURM_PROCID=$r SLURM_NTASKS=4 \
                HS_HOSTNAME=$host FI_TCP_IFACE=$dev HS_BOOT_TIMEOUT=30 \
                "$HS_BIN" train --threads 1 --quiet "$@" >"$dir/$name.$r.log" 2>&1
            echo $? >"$dir/$name.$r.rc"
        ) &
        pids="$pids $!"
    done
    for p in $pids; do [ "$p" = "$rdv" ] || wait "$p"; done
    kill "$rdv" 2>/dev/null
    wait "$rdv" 2>/dev/null
    pids=
}
show() { for r in 0 1 2 3; do sed "s/^/[$1 rank $r] /" "$dir/$1.$r.log"; done; }
ok_all() {
    for r in 0 1 2 3; do
        [ "$(cat "$dir/$1.$r.rc")" = 0 ] || {
            show "$1"
            fail "$1: rank $r exited $(cat "$dir/$1.$r.rc")"
        }
    done
}
jget() { # FILE KEY: a number or string value of summary.json
    sed -n "s/.*\"$2\": *\"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}$/\1/p" "$1" | head -1
}
# bytes sent (sum of the bytes_sent column of rank CSVs)
sent() { cat "$@" | awk -F, 'NR > 1 && $1 != "iteration" { s += $10 } END { printf "%d", s }'; }

TASK="--model mlp:64-256-256-10 --data gauss:dim=64,classes=10,train=8000,test=1000,sep=6 --batch 64 --lr 0.05 --eval-every 0"
t0=$(date +%s)

# --- 1. sgp and allreduce to the target ------------------------------------------------------
for algo in sgp allreduce; do
    # shellcheck disable=SC2086
    job "$algo" $TASK --algo "$algo" --epochs 4 --target-loss 0.3 --out "$dir/$algo"
    ok_all "$algo"
    s=$dir/$algo/summary.json
    grep -q '"transports": {"intra_host": "hsshm", "inter_host": "tcp;ofi_rxm"}' "$s" ||
        fail "$algo: summary.json: $(grep transports "$s")"
    ttt=$(jget "$s" time_to_target_s)
    loss=$(jget "$s" final_test_loss)
    case $ttt in "" | null) fail "$algo: never reached test loss 0.3 (final $loss)" ;; esac
    echo "ok: $algo on 2 hosts x 2 ranks: $(grep transports "$s" | sed 's/^ *//') final test loss $loss, target 0.3 reached after $ttt s"
done

# --- 2. what crosses the hosts: a directed ring 0 -> 1 -> 2 -> 3 -> 0 -------------------------
# Ranks 0 and 2 send to a rank of their own host, 1 and 3 to the other host: the veths carry
# the messages of 1 and 3 (plus start-up, the end-of-run gather and TCP's acks), never those of
# 0 and 2, which go through hsshm (loopback idle too). The same job with --provider tcp moves
# 0's and 2's messages over each namespace's loopback: a control that the counters see them.
printf '0 1\n1 2\n2 3\n3 0\n' >"$dir/ring.edges"
for prov in auto tcp; do
    a0=$(($(txb "$nsA" "$vA") + $(txb "$nsA" "$cA"))) b0=$(($(txb "$nsB" "$vB") + $(txb "$nsB" "$cB")))
    la0=$(txb "$nsA" lo) lb0=$(txb "$nsB" lo)
    # shellcheck disable=SC2086
    job "ring-$prov" $TASK --algo sgp --epochs 2 --graph "file:$dir/ring.edges" \
        --provider "$prov" --out "$dir/ring-$prov"
    ok_all "ring-$prov"
    veth=$(($(txb "$nsA" "$vA") + $(txb "$nsA" "$cA") - a0 + $(txb "$nsB" "$vB") + $(txb "$nsB" "$cB") - b0))
    lo=$(($(txb "$nsA" lo) - la0 + $(txb "$nsB" lo) - lb0))
    intra=$(($(sent "$dir/ring-$prov/rank-0.csv") + $(sent "$dir/ring-$prov/rank-2.csv")))
    inter=$(($(sent "$dir/ring-$prov/rank-1.csv") + $(sent "$dir/ring-$prov/rank-3.csv")))
    echo "ring, --provider $prov: messages within hosts $intra bytes, across hosts $inter bytes; the veths carried $veth bytes, loopback $lo bytes"
    [ "$intra" -gt 10000000 ] || fail "ring-$prov: only $intra bytes sent between same-host ranks"
    [ "$veth" -ge "$inter" ] || fail "ring-$prov: the veths carried $veth bytes, less than the $inter bytes sent across"
    [ "$veth" -lt $((inter + intra / 4)) ] ||
        fail "ring-$prov: the veths carried $veth bytes: more than the $inter bytes sent across plus a quarter of the $intra within hosts"
    if [ "$prov" = auto ]; then
        grep -q '"intra_host": "hsshm"' "$dir/ring-auto/summary.json" || fail "ring-auto: not hsshm"
        [ "$lo" -lt $((intra / 10)) ] || fail "ring-auto: $lo bytes over loopback: same-host traffic did not go through hsshm"
    else
        [ "$lo" -gt "$intra" ] || fail "ring-tcp (control): only $lo bytes over loopback for $intra bytes of messages"
    fi
done

# --- 3. a host that cannot be reached ---------------------------------------------------------
# The rendezvous (control veth) works, the data network between the hosts does not (an
# "unreachable" route each way): the first message across fails, naming the peer; every rank
# stops within the comm timeout; no process and no shared-memory segment is left behind.
ip -n "$nsA" route add unreachable 10.79.0.2/32 && ip -n "$nsB" route add unreachable 10.79.0.1/32 ||
    fail "could not add the unreachable routes"
segs() { for f in /dev/shm/hearsay-*; do [ -e "$f" ] && echo "${f#/dev/shm/}"; done | sort; }
shm0=$(segs)
t1=$(date +%s)
# shellcheck disable=SC2086
job unreach $TASK --algo sgp --epochs 1 --comm-timeout 10 --out "$dir/unreach"
t2=$(date +%s)
ip -n "$nsA" route del unreachable 10.79.0.2/32
ip -n "$nsB" route del unreachable 10.79.0.1/32
bad=0
for r in 0 1 2 3; do [ "$(cat "$dir/unreach.$r.rc")" = 0 ] || bad=$((bad + 1)); done
[ $bad = 4 ] || { show unreach; fail "unreach: only $bad of 4 ranks failed with no route between the hosts"; }
msg=$(show unreach | grep -E 'peer rank [0-3]|rank [0-3].*rank [0-3]' | head -1)
echo "unreach: $msg"
show unreach | grep -qE '(to|from|peer) rank [0-3].*(unreachable|No route|refused|timed out|timeout)|(unreachable|No route).*rank [0-3]' ||
    { show unreach; fail "unreach: no message naming the unreachable rank"; }
[ $((t2 - t1)) -lt 45 ] || fail "unreach: took $((t2 - t1)) s"
left=$(ip netns pids "$nsA"; ip netns pids "$nsB")
[ -z "$left" ] || fail "unreach: processes left in the namespaces: $left"
segs >"$dir/shm1"
new=$(echo "$shm0" | comm -13 - "$dir/shm1")
for f in $new; do
    p=${f#hearsay-}
    p=${p%%-*}
    [ -d "/proc/$p" ] || fail "unreach: shared memory left behind: /dev/shm/$f"
done
echo "ok: unreachable host: 4 ranks failed in $((t2 - t1)) s, nothing left behind"
echo "test_hosts: OK in $(($(date +%s) - t0)) s"
exit 0
