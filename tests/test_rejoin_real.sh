#!/bin/sh
# tests/test_rejoin_real.sh — issue 28 item 9 with real processes: `hearsay run -n 4 -- hearsay
# train --straggler crash:2:iter=100:rejoin=D`. Rank 2's process exits with status 72 at
# iteration 100; hearsay run starts a replacement (HS_INCARNATION=1), which waits until D after
# the crash, replays the job's start-up from the rendezvous, takes the crashed process's place in
# the shared-memory rings (hsshm's RESET record, gossip/shm_wire.h) and joins the running job
# (runtime/rejoin.h). For sgp (D = 0.5 s and 0 s), adpsgd and lsgd (0.5 s), easgd (0 s), or
# each of REJOIN_ALGOS with both, it asserts: status 0; hearsay run said it started the replacement; rank 2 finished and is marked
# "rejoined" in summary.json; DIR/rank-2-rejoin.json says it crashed at 100, joined later with
# another rank's state, and was down between D and D + 10 s (process start-up, the replay and
# the donor's next step); and what tests/rejoin_verdict.py asserts of every rejoin: eval.csv in
# order with every rank after the join, the final test loss within 25 % (+ 0.002) of an
# uninterrupted run's, sgp's push-sum mass 4 within 1e-6, every rank finished. Then sgp with
# ranks 1 and 2 replaced at once (both rejoined, mass 4). Then the refusals: --provider tcp
# (hsshm only) and a launcher that does not start replacements (HS_RESPAWN unset: mpirun,
# Slurm).
# Every rank's pause of 3 ms per iteration stretches the run (1,000 iterations) to about 3 s of
# training, so that the replacement, started 0.3 s after the crash on an idle machine, still
# finds ranks to join on a loaded one.
bin=${HS_BIN:-./hearsay}
[ -x /usr/bin/python3 ] || { echo "test_rejoin_real: /usr/bin/python3 missing: skipped"; exit 77; }
command -v timeout >/dev/null || { echo "test_rejoin_real: timeout(1) missing: skipped"; exit 77; }
[ -d /dev/shm ] && [ -w /dev/shm ] || { echo "test_rejoin_real: /dev/shm not writable: skipped"; exit 77; }
out=$(mktemp -d "${TMPDIR:-/tmp}/hs-rejoin-real.XXXXXX")
trap 'rm -rf "$out"' EXIT
. "$(dirname "$0")/shlib.sh"
flags="--model mlp:16-32-4 --data gauss:dim=16,classes=4,train=8000,test=500 --batch 16 --epochs 8 --threads 1 --quiet --provider hsshm"
slow="pause:all:p=1:fixed=3ms"
verdict() { # DIR REF_DIR ALGO DOWN: down between D and D + 10 s
    dn=${4%s}
    /usr/bin/python3 "$(dirname "$0")/rejoin_verdict.py" "$1" "$2" "$3" \
        "$(echo "$dn" | awk '{print $1 - 0.01}')" "$(echo "$dn" | awk '{print $1 + 10}')" 1 wall
}
run() { # LABEL DIR ARGS...
    label=$1 d=$2
    shift 2
    # shellcheck disable=SC2086
    hs_run_status "$label" 0 "$d.log" 12 timeout -k 5 120 "$bin" run -n 4 -- "$bin" train $flags "$@" --out "$d"
}
for algo in ${REJOIN_ALGOS:-sgp adpsgd easgd lsgd}; do
    run "$algo uninterrupted" "$out/$algo-ref" --algo "$algo" --straggler "$slow" || continue
    delays="0.5s 0s"
    if [ -z "${REJOIN_ALGOS:-}" ]; then
        case $algo in adpsgd | lsgd) delays=0.5s ;; easgd) delays=0s ;; esac
    fi
    for delay in $delays; do
        spec=crash:2:iter=100:rejoin=$delay
        d=$out/$algo-${spec##*=}
        run "$algo $spec" "$d" --algo "$algo" --straggler "$slow" --straggler "$spec" || continue
        if ! grep -q "rank 2 crashed and asked for a replacement" "$d.log"; then
            echo "FAIL $algo $spec: hearsay run did not say it started a replacement"
            fail=1
            continue
        fi
        v=$(verdict "$d" "$out/$algo-ref" "$algo" "${spec##*=}" 2>&1)
        case $v in
        ok*) echo "ok   $algo $spec: $v" ;;
        *)
            echo "FAIL $algo $spec: $v"
            tail -n 12 "$d.log"
            fail=1
            ;;
        esac
    done
done
# two ranks crash at once and both are replaced: each replacement replays the start-up while
# the other's process is gone (it finds that peer dead, and the other's RESET brings it back)
if [ -d "$out/sgp-ref" ]; then
    d=$out/sgp-two
    if run "sgp, ranks 1 and 2 replaced at once" "$d" --algo sgp --straggler "$slow" \
        --straggler crash:1,2:iter=100:rejoin=0.5s; then
        v=$(verdict "$d" "$out/sgp-ref" sgp 0.5s 2>&1)
        if ! grep -q '"rank": 1, "finished": true, "rejoined": true' "$d/summary.json"; then
            v="rank 1 not finished and rejoined"
        fi
        case $v in
        ok*) echo "ok   sgp, ranks 1 and 2 replaced at once: $v" ;;
        *)
            echo "FAIL sgp, ranks 1 and 2 replaced at once: $v"
            tail -n 12 "$d.log"
            fail=1
            ;;
        esac
    fi
fi
refuse() { # LABEL PATTERN LAUNCHER_PREFIX... -- ARGS...
    label=$1 pat=$2
    shift 2
    d=$out/refuse
    rm -rf "$d"
    timeout -k 5 60 "$@" --out "$d" >"$out/refuse.log" 2>&1
    st=$?
    if [ "$st" -ne 0 ] && grep -q "$pat" "$out/refuse.log"; then
        echo "ok   refused: $label (status $st)"
    else
        echo "FAIL refused: $label: status $st, expected a message matching '$pat'"
        tail -n 4 "$out/refuse.log"
        fail=1
    fi
}
# shellcheck disable=SC2086
refuse "--provider tcp" "over --provider hsshm only" "$bin" run -n 2 -- "$bin" train --algo sgp \
    $flags --provider tcp --straggler crash:1:iter=5:rejoin=1s
# shellcheck disable=SC2086
refuse "a launcher that starts no replacement" "started by .hearsay run. only" \
    "$bin" run -n 2 -- env -u HS_RESPAWN "$bin" train --algo sgp $flags \
    --straggler crash:1:iter=5:rejoin=1s
exit $fail
