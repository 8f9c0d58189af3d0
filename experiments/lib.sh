# experiments/lib.sh — shared by the study scripts: find the hearsay binary, parse common flags.
# Sourced, not run.

# The hearsay command: $HEARSAY, else the build tree's, else PATH.
hs_find_bin() {
    local here
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    if [ -n "${HEARSAY:-}" ]; then echo "$HEARSAY"; return; fi
    for b in "$here/${HS_BUILD:-_build}/hearsay" "$here/_build/hearsay" "$here/build/hearsay"; do
        if [ -x "$b" ]; then echo "$b"; return; fi
    done
    if command -v hearsay >/dev/null; then command -v hearsay; return; fi
    echo "error: no hearsay binary found: build first (bash scripts/build.sh) or set HEARSAY" >&2
    return 1
}

# Python with numpy/matplotlib: Debian's, not the one first on PATH.
HS_PY=${HS_PY:-/usr/bin/python3}

# The launcher of one run: `hearsay run -n N -- hearsay train` for real, or, in virtual time,
# `hearsay sim -n N --sim-compute SPEC` (sets HS_LAUNCH). Call after the flags are parsed.
# --sim-compute bench is measured once here, for every run of the study (each run measuring its
# own would give each its own step time): `hearsay bench step` on MODEL at BATCH, 1 thread.
hs_sim_compute() { # BIN SPEC MODEL BATCH
    if [ "$2" != bench ]; then echo "$2"; return; fi
    local ms
    ms=$("$1" bench step --model "$3" --batch "$4" --threads 1 --reps 30 2>/dev/null |
        awk '{for (i = 1; i < NF; i++) if ($i == "median") print $(i + 1)}' | head -n 1)
    [ -n "$ms" ] || hs_die "hearsay bench step --model $3 --batch $4 failed"
    echo "fixed:$ms"
}

# After a run: its summary.json's health, said when it is not ok ("   FAILED (health failed:
# REASON)" or "   health warn: REASON"); report.py marks a failed run FAILED in its row and
# leaves it out of every verdict.
hs_health() { # DIR
    [ -f "$1/summary.json" ] || return 0
    "$HS_PY" - "$1/summary.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
h, why = s.get("health", "ok"), s.get("health_reasons") or []
more = f" (+{len(why) - 1} more in summary.json)" if len(why) > 1 else ""
if h == "failed":
    print(f"   FAILED (health failed: {why[0] if why else '?'}{more})")
elif h == "warn":
    print(f"   health warn: {why[0] if why else '?'}{more}")
EOF
}

hs_launcher() { # BIN SIM WORKERS SIMCOMPUTE
    if [ "$2" = 1 ]; then
        HS_LAUNCH=("$1" sim -n "$3" --sim-compute "$4")
    else
        HS_LAUNCH=("$1" run --keep-going -n "$3" -- hearsay train)
    fi
}

# --- overall progress of a study (issue 30: 27 runs, 12 minutes, and no "run k of 27") -------
# hs_progress_start K before the first run, hs_progress_next LABEL before each run: it prints
# "== run k of K: LABEL (elapsed 1m05s, about 3m20s left)", the estimate the mean time of the
# runs so far times the runs left; hs_progress_end prints the total.
hs_dur() { # SECONDS -> 45s, 3m05s, 1h02m
    local s=$1
    if [ "$s" -ge 3600 ]; then
        printf '%dh%02dm' $((s / 3600)) $((s % 3600 / 60))
    elif [ "$s" -ge 60 ]; then
        printf '%dm%02ds' $((s / 60)) $((s % 60))
    else
        printf '%ds' "$s"
    fi
}

hs_progress_start() { # K
    HS_RUNS_TOTAL=$1
    HS_RUNS_DONE=0
    HS_RUNS_T0=$(date +%s)
}

hs_progress_next() { # LABEL...
    local el est=""
    el=$(($(date +%s) - HS_RUNS_T0))
    if [ "$HS_RUNS_DONE" -gt 0 ]; then
        est=", about $(hs_dur $((el * (HS_RUNS_TOTAL - HS_RUNS_DONE) / HS_RUNS_DONE))) left"
    fi
    HS_RUNS_DONE=$((HS_RUNS_DONE + 1))
    echo "== run $HS_RUNS_DONE of $HS_RUNS_TOTAL: $* (elapsed $(hs_dur "$el")$est)"
}

hs_progress_end() {
    echo "== $HS_RUNS_DONE of $HS_RUNS_TOTAL runs in $(hs_dur $(($(date +%s) - HS_RUNS_T0)))"
}

hs_die() {
    echo "error: $*" >&2
    exit 2
}

# --- emulated hosts: network namespaces behind one switch ------------------------------------
# Used by validate_sim.sh and ethernet.sh. Every namespace and link made is recorded, and
# hs_hosts_down removes those (never one it did not make); hs_cleanup also ends the processes
# recorded in HS_PIDS. A script calls `trap hs_cleanup EXIT` and turns INT/TERM/HUP into exit.
HS_NETNS_MADE=()
HS_LINKS_MADE=()
HS_PIDS=()

# Empty when namespaces can be made here, else the reason. HS_NETNS_UNAVAILABLE=REASON makes it
# answer REASON (tests of the refusal path on a machine where namespaces work).
hs_netns_missing() {
    if [ -n "${HS_NETNS_UNAVAILABLE:-}" ]; then
        echo "$HS_NETNS_UNAVAILABLE (HS_NETNS_UNAVAILABLE is set)"
        return
    fi
    [ "$(id -u)" = 0 ] || { echo "not running as root"; return; }
    command -v ip >/dev/null 2>&1 || { echo "no ip(8)"; return; }
    command -v tc >/dev/null 2>&1 || { echo "no tc(8)"; return; }
    command -v timeout >/dev/null 2>&1 || { echo "no timeout(1)"; return; }
    ip netns list >/dev/null 2>&1 || { echo "ip netns does not work here"; return; }
}

# Segmentation offload and the tbf bucket for RATE (tc syntax): "GSO_SIZE GSO_SEGS BURST".
# Up to 200 Mbit/s, no offload (tbf then meters real 1514-byte frames) and a bucket of 2
# frames. Above, 64 kB offload packets and a bucket of 2 of them or 0.2 ms of the rate: one
# packet per frame costs so much CPU that on the shared 2-core machine a veth carried ~0.2
# Gbit/s whatever the tbf rate (1gbit and 10gbit alike), ~1.9 Gbit/s with offload.
hs_tbf_shape() { # RATE
    local bits
    bits=$(hs_rate_bits "$1")
    if [ -z "$bits" ]; then
        echo "error: rate '$1': expected NUMBER followed by kbit, mbit or gbit (tc's units)" >&2
        return 1
    fi
    awk -v b="$bits" 'BEGIN {
        if (b <= 2e8) { print "1500 1 3000"; exit }
        x = b / 8 * 2e-4
        printf "65536 64 %d\n", (x > 131072 ? x : 131072)
    }'
}

# The rate in bit/s of RATE (tc syntax: NUMBER kbit|mbit|gbit), or nothing for a bad one.
hs_rate_bits() {
    case "$1" in
    *[0-9]kbit) awk -v r="${1%kbit}" 'BEGIN { printf "%.0f", r * 1e3 }' ;;
    *[0-9]mbit) awk -v r="${1%mbit}" 'BEGIN { printf "%.0f", r * 1e6 }' ;;
    *[0-9]gbit) awk -v r="${1%gbit}" 'BEGIN { printf "%.0f", r * 1e9 }' ;;
    esac
}

hs_ns_add() { # NAME: make a namespace and record it, or say which one could not be made
    local err
    if ! err=$(ip netns add "$1" 2>&1); then
        echo "error: cannot create network namespace '$1': ${err:-ip netns add failed}" >&2
        return 1
    fi
    HS_NETNS_MADE+=("$1")
}

# N hosts: namespaces TAGh0 .. TAGh(N-1), each joined to a switch (namespace TAGsw, bridge br0)
# by a veth pair: TAGv<i> in host i (address NET.<i+1>/24; NET is three octets such as
# 10.79.0), TAGs<i> on the switch. tbf RATE on both ends of every pair: a host sends and
# receives at RATE, full duplex, like a NIC. Offload and bucket by hs_tbf_shape, a queue long
# enough never to drop. Returns 1 with the reason on stderr; whatever
# was made is recorded for hs_hosts_down.
hs_hosts_up() { # TAG N RATE NET
    local tag=$1 n=$2 rate=$3 net=$4 i err gso segs burst h v s shape x
    shape=$(hs_tbf_shape "$rate") || return 1
    read -r gso segs burst <<<"$shape"
    hs_ns_add "${tag}sw" || return 1
    for ((i = 0; i < n; i++)); do hs_ns_add "${tag}h$i" || return 1; done
    if ! err=$({ ip -n "${tag}sw" link add br0 type bridge &&
        ip -n "${tag}sw" link set br0 up && ip -n "${tag}sw" link set lo up; } 2>&1); then
        echo "error: cannot make the bridge in namespace '${tag}sw': $err" >&2
        return 1
    fi
    for ((i = 0; i < n; i++)); do
        h=${tag}h$i v=${tag}v$i s=${tag}s$i
        if ! err=$(ip link add "$v" type veth peer name "$s" 2>&1); then
            echo "error: cannot make the veth pair $v-$s: $err" >&2
            return 1
        fi
        HS_LINKS_MADE+=("$v")
        if ! err=$({ ip link set "$v" netns "$h" && ip link set "$s" netns "${tag}sw" &&
            ip -n "$h" addr add "$net.$((i + 1))/24" dev "$v" &&
            ip -n "$h" link set "$v" gso_max_size "$gso" gso_max_segs "$segs" &&
            ip -n "${tag}sw" link set "$s" gso_max_size "$gso" gso_max_segs "$segs" &&
            ip -n "${tag}sw" link set "$s" master br0 &&
            ip -n "$h" link set "$v" up && ip -n "${tag}sw" link set "$s" up &&
            ip -n "$h" link set lo up; } 2>&1); then
            echo "error: cannot configure the veth pair $v-$s of namespace '$h': $err" >&2
            return 1
        fi
        for x in ${HS_NETNS_SYSCTL:-}; do # e.g. net.ipv4.tcp_slow_start_after_idle=0
            if ! err=$(ip netns exec "$h" sysctl -q -w "$x" 2>&1); then
                echo "error: HS_NETNS_SYSCTL: cannot set '$x' in namespace '$h': $err" >&2
                return 1
            fi
        done
        if ! err=$({ tc -n "$h" qdisc add dev "$v" root tbf rate "$rate" burst "$burst" latency 2s &&
            tc -n "${tag}sw" qdisc add dev "$s" root tbf rate "$rate" burst "$burst" latency 2s; } 2>&1); then
            echo "error: cannot add tc tbf rate $rate on $v/$s: $err" >&2
            return 1
        fi
    done
}

# Bytes host I has sent on its veth so far (frames, headers included).
hs_host_tx_bytes() { # TAG I
    ip netns exec "$1h$2" cat "/sys/class/net/$1v$2/statistics/tx_bytes" 2>/dev/null || echo 0
}

hs_hosts_down() {
    local x
    for x in "${HS_NETNS_MADE[@]}"; do ip netns del "$x" 2>/dev/null || true; done
    for x in "${HS_LINKS_MADE[@]}"; do ip link del "$x" 2>/dev/null || true; done
    HS_NETNS_MADE=()
    HS_LINKS_MADE=()
}

hs_cleanup() {
    local p
    for p in "${HS_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${HS_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    HS_PIDS=()
    hs_hosts_down
}

# One job of N x R ranks on the hosts of hs_hosts_up, R consecutive ranks per host, started
# Slurm-style (docs/launch.md) against `hearsay run --rendezvous-only` in host 0, with the
# transport a cluster job gets (`--provider auto`: hsshm between the ranks of a host, tcp over
# each host's veth between hosts; HS_HOSTNAME host<i>); HS_NETNS_PROVIDER=tcp forces tcp for
# every pair, as these studies did before 2026-11-24. Every process under `timeout LIMIT`.
# Returns 1 when a rank failed; the ranks' output goes to LOG.
hs_netns_run() { # BIN TAG NET N R DIR LOG LIMIT TRAIN-FLAGS...
    local bin=$1 tag=$2 net=$3 n=$4 rph=$5 dir=$6 log=$7 limit=$8 rdvdir r h i rc=0 rdv
    shift 8
    local size=$((n * rph))
    rdvdir=$(mktemp -d)
    timeout "$limit" ip netns exec "${tag}h0" "$bin" run --rendezvous-only -n "$size" \
        --bind "$net.1" --env-file "$rdvdir/rdv.env" --timeout 60 >"$rdvdir/rdv.log" 2>&1 &
    rdv=$!
    HS_PIDS+=("$rdv")
    i=0
    while [ ! -s "$rdvdir/rdv.env" ]; do
        i=$((i + 1))
        if [ $i -gt 600 ] || ! kill -0 "$rdv" 2>/dev/null; then
            echo "the rendezvous did not start in 60 s:" >>"$log"
            cat "$rdvdir/rdv.log" >>"$log"
            kill "$rdv" 2>/dev/null || true
            rm -rf "$rdvdir"
            return 1
        fi
        sleep 0.1
    done
    local -a ranks=()
    for ((r = 0; r < size; r++)); do
        h=$((r / rph))
        (
            set -a
            # shellcheck disable=SC1091
            . "$rdvdir/rdv.env"
            set +a
            exec timeout "$limit" ip netns exec "${tag}h$h" env SLURM_PROCID="$r" \
                SLURM_NTASKS="$size" HS_HOSTNAME="host$h" FI_TCP_IFACE="${tag}v$h" \
                "$bin" train "$@" --provider "${HS_NETNS_PROVIDER:-auto}" --out "$dir"
        ) >"$log.$r" 2>&1 &
        ranks+=($!)
        HS_PIDS+=("$!")
    done
    for r in "${ranks[@]}"; do wait "$r" || rc=1; done
    if [ "$rc" = 0 ]; then wait "$rdv" || true; else kill "$rdv" 2>/dev/null || true; fi
    for ((r = 0; r < size; r++)); do cat "$log.$r" >>"$log"; rm -f "$log.$r"; done
    rm -rf "$rdvdir"
    return "$rc"
}

# The --link rules that give every link between two different hosts (R consecutive ranks per
# host) the parameters PARAMS, e.g. latency=1ms: one A-B rule per rank pair (a host rule would
# also shape the links inside the host).
hs_cross_host_link() { # N R PARAMS
    local n=$1 rph=$2 p=$3 a b spec=""
    for ((a = 0; a < n * rph; a++)); do
        for ((b = a + 1; b < n * rph; b++)); do
            [ $((a / rph)) = $((b / rph)) ] && continue
            spec+="${spec:+;}$a-$b:$p"
        done
    done
    echo "$spec"
}

# `hearsay report DIR`: the study's report.md and the loss-versus-time and -iterations plots of
# each folder of runs (docs/ethernet.md, "hearsay report"). A failure (no matplotlib) is said,
# not fatal: the study's own table is written already.
hs_report() { # BIN DIR [hearsay report FLAGS]
    local bin=$1 dir=$2
    shift 2
    if "$bin" report "$dir" "$@" >/dev/null; then
        echo "report: $dir/report.md and its plots (hearsay report $dir)"
    else
        echo "warning: hearsay report $dir failed (above); the study's table stands" >&2
    fi
}

# The goodput measurements' two ends (python): a server on ADDR PORT that prints "ready", then,
# once its one connection closes, the bits per second it received from the first byte to the
# last; a client that sends BYTES zero bytes to ADDR PORT.
HS_GOODPUT_SERVER='
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(1)
print("ready", flush=True)
c, _ = s.accept()
n, t0 = 0, None
while True:
    b = c.recv(1 << 20)
    if not b:
        break
    if t0 is None:
        t0 = time.monotonic()
    n += len(b)
dt = time.monotonic() - t0
print(f"{8 * n / dt:.0f}" if n and dt > 0 else "", flush=True)
'
HS_GOODPUT_CLIENT='
import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])))
c.sendall(bytes(int(sys.argv[3])))
c.close()
'

# What one TCP stream from host 1 to host 0 of hs_hosts_up carries, in bit/s (kernel sockets,
# BYTES bytes, timed at the receiver from the first byte to the last): the emulated link's
# real capacity on this machine, which a busy CPU can hold far below the tbf rate. Empty when
# the measurement failed.
hs_link_goodput() { # TAG NET BYTES LIMIT
    local tag=$1 net=$2 bytes=$3 limit=$4 f srv
    f=$(mktemp)
    timeout "$limit" ip netns exec "${tag}h0" "$HS_PY" -c "$HS_GOODPUT_SERVER" "$net.1" 5999 \
        >"$f" 2>/dev/null &
    srv=$!
    HS_PIDS+=("$srv")
    local i=0
    while [ $i -lt 50 ] && ! grep -q ready "$f"; do i=$((i + 1)); sleep 0.1; done
    timeout "$limit" ip netns exec "${tag}h1" "$HS_PY" -c "$HS_GOODPUT_CLIENT" "$net.1" 5999 \
        "$bytes" 2>/dev/null || true
    wait "$srv" 2>/dev/null || true
    sed -n 2p "$f"
    rm -f "$f"
}

# Both directions at once (host 1 -> host 0 and host 0 -> host 1, one TCP stream each, started
# together), as an all-reduce loads a link: the smaller of the two rates, bits per second, or
# nothing. On a machine whose CPUs carry the emulated hosts' TCP, this is below one stream's.
hs_link_goodput_duplex() { # TAG NET BYTES LIMIT
    local tag=$1 net=$2 bytes=$3 limit=$4 f0 f1 s0 s1 c1 i a b
    f0=$(mktemp)
    f1=$(mktemp)
    timeout "$limit" ip netns exec "${tag}h0" "$HS_PY" -c "$HS_GOODPUT_SERVER" "$net.1" 5998 \
        >"$f0" 2>/dev/null &
    s0=$!
    timeout "$limit" ip netns exec "${tag}h1" "$HS_PY" -c "$HS_GOODPUT_SERVER" "$net.2" 5998 \
        >"$f1" 2>/dev/null &
    s1=$!
    HS_PIDS+=("$s0" "$s1")
    i=0
    while [ $i -lt 50 ] && ! { grep -q ready "$f0" && grep -q ready "$f1"; }; do
        i=$((i + 1))
        sleep 0.1
    done
    timeout "$limit" ip netns exec "${tag}h1" "$HS_PY" -c "$HS_GOODPUT_CLIENT" "$net.1" 5998 \
        "$bytes" 2>/dev/null &
    c1=$!
    HS_PIDS+=("$c1")
    timeout "$limit" ip netns exec "${tag}h0" "$HS_PY" -c "$HS_GOODPUT_CLIENT" "$net.2" 5998 \
        "$bytes" 2>/dev/null || true
    wait "$c1" "$s0" "$s1" 2>/dev/null || true
    a=$(sed -n 2p "$f0")
    b=$(sed -n 2p "$f1")
    rm -f "$f0" "$f1"
    if [ -n "$a" ] && [ -n "$b" ]; then
        awk -v a="$a" -v b="$b" 'BEGIN { printf "%.0f\n", a < b ? a : b }'
    fi
}
