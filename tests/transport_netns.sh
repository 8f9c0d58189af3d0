#!/bin/sh
# tests/transport_netns.sh HS_BIN WORKER — two ranks in two network namespaces of our own,
# joined by a veth pair (10.77.0.1 <-> 10.77.0.2), over the tcp provider.
# Rank 0's namespace runs `hearsay run --rendezvous-only` bound to its veth address; both ranks
# start Slurm-style (SLURM_PROCID/SLURM_NTASKS + HS_RDV/HS_JOB_KEY) and run
# `transport_worker all`. Checks the worker's exit codes and that the bytes crossed the veth.
# Exit 0 pass, 77 skip (reason printed), 1 failure. The namespaces are always deleted.
# tests/transport_netns.sh --check — only the prerequisites (root, ip(8), timeout(1), network
# namespaces and a veth pair can be made): exit 0, or 77 with the reason on the first line.
set -u
check_only=
if [ "${1:-}" = --check ]; then
    check_only=1
    HS_BIN=
    WORKER=
else
    HS_BIN=$1
    WORKER=$2
fi
LIMIT=25 # seconds, every step
tag=hs$$
ns0=${tag}a
ns1=${tag}b
v0=${tag}v0
v1=${tag}v1
dir=$(mktemp -d)
rdv=
cleanup() {
    [ -n "$rdv" ] && kill "$rdv" 2>/dev/null
    ip netns del "$ns0" 2>/dev/null
    ip netns del "$ns1" 2>/dev/null
    ip link del "$v0" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
skip() {
    echo "netns test skipped: $*"
    exit 77
}
[ "$(id -u)" = 0 ] || skip "not running as root"
command -v ip >/dev/null 2>&1 || skip "no ip(8)"
command -v timeout >/dev/null 2>&1 || skip "no timeout(1)"
ip netns add "$ns0" 2>"$dir/err" || skip "ip netns add failed: $(cat "$dir/err")"
ip netns add "$ns1" 2>"$dir/err" || skip "ip netns add failed: $(cat "$dir/err")"
ip link add "$v0" type veth peer name "$v1" 2>"$dir/err" || skip "no veth: $(cat "$dir/err")"
if [ -n "$check_only" ]; then
    echo "netns test: prerequisites present"
    exit 0
fi
ip link set "$v0" netns "$ns0" && ip link set "$v1" netns "$ns1" &&
    ip -n "$ns0" addr add 10.77.0.1/24 dev "$v0" && ip -n "$ns1" addr add 10.77.0.2/24 dev "$v1" &&
    ip -n "$ns0" link set "$v0" up && ip -n "$ns1" link set "$v1" up &&
    ip -n "$ns0" link set lo up && ip -n "$ns1" link set lo up || {
    echo "netns test: FAILED to configure the veth pair"
    exit 1
}

timeout "$LIMIT" ip netns exec "$ns0" "$HS_BIN" run --rendezvous-only -n 2 --bind 10.77.0.1 \
    --env-file "$dir/rdv.env" --timeout 20 >"$dir/rdv.log" 2>&1 &
rdv=$!
i=0
while [ ! -s "$dir/rdv.env" ]; do
    i=$((i + 1))
    if [ $i -gt 100 ]; then
        echo "netns test: FAILED: the rendezvous did not start in 10 s"
        cat "$dir/rdv.log"
        exit 1
    fi
    sleep 0.1
done
set -a
. "$dir/rdv.env"
set +a
rx0=$(ip netns exec "$ns1" cat "/sys/class/net/$v1/statistics/rx_bytes")
run_rank() { # rank namespace veth
    timeout "$LIMIT" ip netns exec "$2" env SLURM_PROCID="$1" SLURM_NTASKS=2 HS_HOSTNAME="$2" \
        HS_PROVIDER=tcp FI_TCP_IFACE="$3" HS_CHUNK_BYTES=65536 HS_TIMEOUT=20 \
        "$WORKER" all 10 >"$dir/rank$1.log" 2>&1
    echo $? >"$dir/rank$1.rc"
}
run_rank 0 "$ns0" "$v0" &
p0=$!
run_rank 1 "$ns1" "$v1" &
p1=$!
wait $p0
wait $p1
rc0=$(cat "$dir/rank0.rc")
rc1=$(cat "$dir/rank1.rc")
if [ "$rc0" = 0 ] && [ "$rc1" = 0 ]; then
    wait "$rdv" # it exits once both ranks left
else
    kill "$rdv" 2>/dev/null
    wait "$rdv"
fi
rdv=
rx1=$(ip netns exec "$ns1" cat "/sys/class/net/$v1/statistics/rx_bytes")
sed 's/^/[rank 0] /' "$dir/rank0.log"
sed 's/^/[rank 1] /' "$dir/rank1.log"
echo "netns test: ranks exited $rc0 and $rc1; $((rx1 - rx0)) bytes received on $v1 ($ns1)"
[ "$rc0" = 0 ] && [ "$rc1" = 0 ] || exit 1
# rank 1 got at least the 300000-byte put and get replies from rank 0 across the veth
[ $((rx1 - rx0)) -gt 600000 ] || {
    echo "netns test: FAILED: too few bytes crossed the veth"
    exit 1
}
echo "netns test: OK"
exit 0
