#!/bin/sh
# tests/test_trace.sh — the timeline (--trace FILE, docs/timeline.md). Short runs with --trace
# (4 simulated ranks in virtual time, 4 real worker processes, one worker alone, D-PSGD's
# main-thread applies), each file parsed by tests/check_trace.py: every flow has one start in a
# send span and one end in an apply span on another rank, no later than it; spans on every
# thread nest; every rank has compute spans; no part file is left behind. A crashed rank leaves
# the parts for `hearsay trace merge`, which merges them by hand. Bad input: a trace file that
# cannot be written stops the run at once with a message naming it, and leaves nothing behind.
# Skips (77) without /usr/bin/python3.
bin=${HS_BIN:-./hearsay}
src=${HS_SRCDIR:-.}
py=/usr/bin/python3
if [ ! -x "$py" ]; then
    echo "test_trace: skipped: $py is missing (it parses the trace JSON)"
    exit 77
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/hs_trace_XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT
fail=0
common="--model mlp:784-64-10 --data gauss:train=2000,test=200 --batch 32 --eval-every 0.5 \
--threads 1 --quiet"
bound=120 # seconds: every run here takes a few

check() { # FILE RANKS MIN_FLOWS CLOCK WHAT [SPANS THAT MUST APPEAR]
    if "$py" "$src/tests/check_trace.py" "$1" "$2" "$3" "$4" ${6:+"$6"}; then
        echo "ok: $5"
    else
        echo "FAIL: $5"; fail=1
    fi
    if ls "$1".rank* >/dev/null 2>&1; then
        echo "FAIL: $5: part files left behind: $(ls "$1".rank*)"; fail=1
    fi
}

run() { # WHAT COMMAND...
    what=$1; shift
    if ! timeout -k 5 $bound "$@" >"$out/log" 2>&1; then
        echo "FAIL: $what: the run failed:"; cat "$out/log"; fail=1; return 1
    fi
}

# 4 simulated ranks (SGP: the gossip receiver's applies), virtual time, with a straggler and
# a checkpoint
# shellcheck disable=SC2086
run "sim -n 4 sgp" "$bin" sim -n 4 --algo sgp $common --max-iters 30 --trace "$out/sim.json" \
    --straggler slow:2:x2 --checkpoint-every 0.5 --out "$out/simrun" &&
    check "$out/sim.json" 4 100 virtual "hearsay sim -n 4 --algo sgp: virtual-time trace" \
        "iteration,compute,straggler sleep,step,local step,send,apply,wait,evaluation,checkpoint,finish"
# D-PSGD mixes on the training loop's thread
# shellcheck disable=SC2086
run "sim -n 4 dpsgd" "$bin" sim -n 4 --algo dpsgd $common --max-iters 20 \
    --trace "$out/dpsgd.json" &&
    check "$out/dpsgd.json" 4 100 virtual "hearsay sim -n 4 --algo dpsgd: main-thread applies"
# 4 real processes: rank 0 merges the parts
# shellcheck disable=SC2086
run "run -n 4 sgp" "$bin" run -n 4 -- "$bin" train --algo sgp $common --max-iters 30 \
    --trace "$out/run.json" &&
    check "$out/run.json" 4 100 wall "hearsay run -n 4 -- hearsay train --algo sgp: wall-clock trace" \
        "iteration,compute,step,local step,send,apply,recv,evaluation,finish"
# The heartbeat service records its sends: with heartbeats every ~0.1 s (--fail-timeout 0.5)
# one used to land after the trace was freed, during rank 0's merge (a use-after-free:
# AddressSanitizer in 3 runs of 3, heap corruption without it)
# shellcheck disable=SC2086
run "run -n 4 sgp, fast heartbeats" "$bin" run -n 4 -- "$bin" train --algo sgp $common \
    --max-iters 30 --fail-timeout 0.5 --trace "$out/hb.json" &&
    check "$out/hb.json" 4 100 wall "hearsay run -n 4 --fail-timeout 0.5: wall-clock trace" \
        "iteration,compute,step,send"
# one worker alone
# shellcheck disable=SC2086
run "train alone" "$bin" train $common --max-iters 10 --trace "$out/one.json" &&
    check "$out/one.json" 1 0 wall "hearsay train alone"

# A rank that crashes writes no part: the others' parts stay for hearsay trace merge.
# shellcheck disable=SC2086
if run "sim crash" "$bin" sim -n 4 --algo sgp --delay-bound none $common --max-iters 30 \
    --straggler crash:1:iter=10 --trace "$out/crash.json"; then
    if [ -e "$out/crash.json.rank1" ] || [ ! -e "$out/crash.json.rank2" ]; then
        echo "FAIL: crashed rank 1: expected the parts of ranks 0, 2, 3 and none of rank 1:" \
            "$(ls "$out")"; fail=1
    elif ! grep -q "rank 1 wrote no part" "$out/log"; then
        echo "FAIL: crashed rank 1: no warning about its missing part:"; cat "$out/log"; fail=1
    elif ! "$bin" trace merge "$out/byhand.json" "$out/crash.json.rank0" \
        "$out/crash.json.rank2" "$out/crash.json.rank3"; then
        echo "FAIL: hearsay trace merge of the parts"; fail=1
    else
        rm -f "$out"/crash.json.rank*
        check "$out/byhand.json" 0,2,3 10 virtual "hearsay trace merge after rank 1 crashed"
    fi
fi

# Bad input: a part that is not one names the file; a trace that cannot be written stops the
# run at once, names the file and leaves nothing behind.
echo "not a trace" >"$out/junk"
if msg=$("$bin" trace merge "$out/m.json" "$out/junk" 2>&1) || ! echo "$msg" | grep -q "junk"; then
    echo "FAIL: hearsay trace merge of a bad part: '$msg'"; fail=1
elif [ -e "$out/m.json" ]; then
    echo "FAIL: hearsay trace merge of a bad part left $out/m.json"; fail=1
else
    echo "ok: a bad part: $msg"
fi
mkdir "$out/bad"
for t in "$out/bad/missing/t.json" "$out/bad"; do
    for cmd in "train" "sim -n 2" "run -n 2 -- $bin train"; do
        # shellcheck disable=SC2086
        msg=$(timeout -k 5 $bound "$bin" $cmd $common --max-iters 5 --trace "$t" 2>&1)
        st=$?
        if [ $st -eq 0 ] || [ $st -ge 124 ] || ! echo "$msg" | grep -q -- "--trace $t"; then
            echo "FAIL: hearsay $cmd --trace $t: exit $st, '$msg'"; fail=1
        elif [ -n "$(ls -A "$out/bad")" ]; then
            echo "FAIL: hearsay $cmd --trace $t left $(ls -A "$out/bad")"; fail=1
        else
            echo "ok: hearsay $cmd --trace $t: exit $st: $(echo "$msg" | head -1)"
        fi
    done
done
exit $fail
