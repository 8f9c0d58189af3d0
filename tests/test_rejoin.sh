#!/bin/sh
# tests/test_rejoin.sh — issue 28 item 9: a replacement of a crashed rank joins the running job
# (`--straggler crash:2:iter=100:rejoin=D`, virtual time: hearsay sim). For sgp, adpsgd, easgd
# and lsgd on 4 ranks (REJOIN_ALGOS) it asserts: status 0; rank 2 finished and is marked "rejoined" in summary.json;
# DIR/rank-2-rejoin.json says it was down D (within 0.05 s) and joined at a later iteration
# with a live rank's state; eval.csv has one row per evaluation, in iteration order, all 4
# ranks in the rows after the join; the final test loss is finite and within 25 % (+ 0.002) of
# an uninterrupted run's; sgp: push-sum mass survivors + lost = 4 within 1e-6 (the crashed
# process's weight is lost; the donor halves its own for the replacement); the others: all 4
# ranks finished. Then a replacement
# that comes after every rank finished (rejoin=100s) ends as the crashed rank (status 0, mass
# still 4); and the refusals: an algorithm without rejoin (dpsgd), rank 0, sgp --delay-mode
# bounded and --checkpoint-every. (Real processes: tests/test_rejoin_real.sh.)
bin=${HS_BIN:-./hearsay}
[ -x /usr/bin/python3 ] || { echo "test_rejoin: /usr/bin/python3 missing: skipped"; exit 77; }
command -v timeout >/dev/null || { echo "test_rejoin: timeout(1) missing: skipped"; exit 77; }
out=$(mktemp -d "${TMPDIR:-/tmp}/hs-rejoin.XXXXXX")
trap 'rm -rf "$out"' EXIT
. "$(dirname "$0")/shlib.sh"
flags="--model mlp:16-32-4 --data gauss:dim=16,classes=4,train=8000,test=500 --batch 16 --epochs 4 --threads 1 --quiet"
verdict() { # LABEL DIR REF_DIR ALGO DOWN JOINED(1|0): the rank was down D (within 0.05 s)
    dn=${5%s}
    /usr/bin/python3 "$(dirname "$0")/rejoin_verdict.py" "$2" "$3" "$4" \
        "$(echo "$dn" | awk '{print $1 - 0.05}')" "$(echo "$dn" | awk '{print $1 + 0.05}')" "$6" virtual
}
run() { # LABEL WANT_STATUS DIR ARGS...
    label=$1 want=$2 d=$3
    shift 3
    # shellcheck disable=SC2086
    hs_run_status "$label" "$want" "$d.log" 8 timeout 120 "$bin" sim -n "${ranks:-4}" $flags "$@" --out "$d"
}
for algo in ${REJOIN_ALGOS:-sgp adpsgd easgd lsgd}; do
    run "$algo uninterrupted" 0 "$out/$algo-ref" --algo "$algo" || continue
    for spec in crash:2:iter=100:rejoin=0.5s crash:2:iter=100:rejoin=0s; do
        d=$out/$algo-${spec##*=}
        run "$algo $spec" 0 "$d" --algo "$algo" --straggler "$spec" || continue
        v=$(verdict "$algo" "$d" "$out/$algo-ref" "$algo" "${spec##*=}" 1 2>&1)
        case $v in ok*) echo "ok   $algo $spec: $v" ;; *) echo "FAIL $algo $spec: $v"; fail=1 ;; esac
    done
    d=$out/$algo-late
    if run "$algo, a replacement after the end" 0 "$d" --algo "$algo" \
        --straggler crash:2:iter=100:rejoin=100s; then
        v=$(verdict "$algo late" "$d" "$out/$algo-ref" "$algo" 0 0 2>&1)
        if ! grep -q "found no rank to take a state from" "$d.log"; then
            v="no 'found no rank' message"
        fi
        case $v in ok*) echo "ok   $algo late replacement: $v" ;; *) echo "FAIL $algo late: $v"; fail=1 ;; esac
    fi
done
# AD-PSGD with an active rank replaced (rank 3 of 8; before the fix a passive neighbour that
# restarted its service to serve the replacement dropped a request it had received, and the
# active waited for the reply in vain: the passives were fenced, status 1)
d=$out/adpsgd-active
if ranks=8 run "adpsgd, active rank 3 of 8 replaced" 0 "$d" --algo adpsgd \
    --straggler crash:3:iter=50:rejoin=1s; then
    if grep -q '"rank": 3, "finished": true, "rejoined": true' "$d/summary.json" &&
        ! grep -q "fenced" "$d.log"; then
        echo "ok   adpsgd, active rank 3 of 8 replaced"
    else
        echo "FAIL adpsgd, active rank 3 of 8 replaced: not finished and rejoined, or a rank fenced"
        grep -i "fenced\|failed" "$d.log" | head -5
        fail=1
    fi
fi
refuse() { # LABEL PATTERN ARGS...
    label=$1 pat=$2
    shift 2
    d=$out/refuse
    rm -rf "$d"
    # shellcheck disable=SC2086
    timeout 60 "$bin" sim -n 4 $flags "$@" --out "$d" >"$out/refuse.log" 2>&1
    st=$?
    if [ "$st" -ne 0 ] && grep -q "$pat" "$out/refuse.log"; then
        echo "ok   refused: $label (status $st)"
    else
        echo "FAIL refused: $label: status $st, expected a message matching '$pat'"
        tail -n 4 "$out/refuse.log"
        fail=1
    fi
}
refuse "dpsgd" "cannot take a replacement" --algo dpsgd --straggler crash:2:iter=100:rejoin=1s
refuse "rank 0" "rank 0 cannot be replaced" --algo sgp --straggler crash:0:iter=100:rejoin=1s
refuse "sgp bounded" "delay-mode exact only" --algo sgp --delay-mode bounded \
    --straggler crash:2:iter=100:rejoin=1s
refuse "checkpoints" "not with a replacement" --algo sgp --checkpoint-every 1 \
    --straggler crash:2:iter=100:rejoin=1s
refuse "bad spec" "rejoin=D" --algo sgp --straggler crash:2:iter=100:later=1s
exit $fail
