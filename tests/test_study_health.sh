#!/bin/sh
# shellcheck disable=SC2015 # A && ok || bad: ok never fails
# tests/test_study_health.sh — the study tables (experiments/report.py stragglers and
# topologies) on tiny virtual-time runs, one of which diverges: its row says FAILED, it counts
# in no verdict and the verdicts say so; the times to target are the averaged model's
# (summary.json time_to_target_avg_s), and the headings say so. No matplotlib needed (the
# tables are written without it).
bin=${HS_BIN:-./hearsay}
src=${HS_SRCDIR:-$(dirname "$0")/..}
py=${HS_PY:-/usr/bin/python3}
# shellcheck source=tests/shlib.sh
. "$(dirname "$0")/shlib.sh"
hs_scratch study_health
trap 'rm -rf "$tmp"' EXIT

task="--model mlp:16-32-4 --data gauss:dim=16,classes=4,train=4000,test=500 --batch 32 \
--threads 1 --epochs 2 --eval-every 0.125 --target-loss 0.5 --progress 0 -q"
sim() { # DIR ARGS..: a run that must leave a summary.json (its exit status may say it failed)
    d=$1
    shift
    # shellcheck disable=SC2086 # $task is a word list
    "$bin" sim --sim-compute fixed:1 $task "$@" --out "$d" >"$d.log" 2>&1
    [ -f "$d/summary.json" ] || {
        bad "no summary.json in $d: $(tail -n 3 "$d.log")"
        exit 1
    }
}
# a run that diverges while rank 0 lives: asynchronous SGP with the step on x beside a x100
# straggler (rank 0), lr 2: the other ranks' weights fall below 1e-2 and their loss turns NaN
diverge="--algo sgp --straggler slow:0:x100 --delay-bound none --sgp-step x --lr 2"

s=$tmp/stragglers
mkdir -p "$s/x1" "$s/x4"
sim "$s/x1/allreduce-s1" -n 4 --algo allreduce
sim "$s/x4/allreduce-s1" -n 4 --algo allreduce --straggler slow:1:x4
sim "$s/x1/sgp-s1" -n 4 --algo sgp
# shellcheck disable=SC2086
sim "$s/x4/sgp-s1" -n 4 $diverge
grep -q '"health": "failed"' "$s/x4/sgp-s1/summary.json" && ok "the diverged run's health is failed" ||
    bad "the diverged run's summary.json: $(grep health "$s/x4/sgp-s1/summary.json")"
grep -q '"health": "ok"' "$s/x1/sgp-s1/summary.json" && ok "a healthy run's health is ok" ||
    bad "sgp x1's summary.json: $(grep health "$s/x1/sgp-s1/summary.json")"
"$py" "$src/experiments/report.py" stragglers "$s" --target-loss 0.5 >"$tmp/out" 2>&1 ||
    bad "report.py stragglers failed: $(cat "$tmp/out")"
grep -q '^| sgp | [^|]* | [^|]*FAILED 1/1' "$s/table.md" && ok "the diverged run's cell says FAILED" ||
    bad "no FAILED cell for sgp x4: $(cat "$s/table.md")"
grep -q '^| sgp | ×4 |' "$s/table.md" && bad "a FAILED run has a verdict: $(cat "$s/table.md")" ||
    ok "the FAILED run has no verdict"
grep -q 'FAILED runs (excluded from every mean and verdict)' "$s/table.md" &&
    grep -q '^- x4/sgp-s1: ' "$s/table.md" &&
    ok "the table says the FAILED run is left out" || bad "no left-out line: $(cat "$s/table.md")"
grep -q "the averaged model's time to target" "$s/table.md" &&
    ok "the heading names the averaged model's time to target" || bad "heading: $(head -n 1 "$s/table.md")"
# the table's x1 time is summary.json's time_to_target_avg_s
want=$("$py" -c 'import json, sys; print("%.3g" % json.load(open(sys.argv[1]))["time_to_target_avg_s"])' \
    "$s/x1/allreduce-s1/summary.json")
grep -q "^| allreduce | $want |" "$s/table.md" &&
    ok "allreduce x1: the table shows time_to_target_avg_s ($want)" ||
    bad "allreduce x1: expected $want: $(grep '^| allreduce' "$s/table.md")"
grep -q '^sgp,x4,1,failed,' "$s/results.csv" && ok "results.csv marks the run failed" ||
    bad "results.csv: $(cat "$s/results.csv")"
# a second seed of allreduce x1: the table's mean and interval, and `hearsay report` on the
# study directory gives the same figure for the same cell
sim "$s/x1/allreduce-s2" -n 4 --algo allreduce --seed 2
"$py" "$src/experiments/report.py" stragglers "$s" --target-loss 0.5 >"$tmp/out" 2>&1 ||
    bad "report.py stragglers (2 seeds) failed: $(cat "$tmp/out")"
cell=$(awk -F' [|] ' '/^[|] allreduce [|]/ { print $2; exit }' "$s/table.md")
case "$cell" in
*±*) ok "allreduce x1 over 2 seeds: $cell" ;;
*) bad "allreduce x1 over 2 seeds has no interval: $(grep '^| allreduce' "$s/table.md")" ;;
esac
"$py" "$src/experiments/report.py" dir "$s" --target-loss 0.5 >"$tmp/out" 2>&1
grep -q "^| x1 | allreduce | 2 | $cell |" "$s/report.md" &&
    ok "hearsay report on the study shows the table's figure for allreduce x1 ($cell)" ||
    bad "report.md's allreduce x1: $(grep '| allreduce |' "$s/report.md"), table: $cell"

t=$tmp/topologies
mkdir -p "$t"
sim "$t/ring" -n 4 --algo sgp --graph ring
sim "$t/exp" -n 4 --algo sgp --graph exp
# shellcheck disable=SC2086
sim "$t/exp1peer" -n 4 $diverge --graph exp1peer
"$py" "$src/experiments/report.py" topologies "$t" --target-loss 0.5 >"$tmp/out" 2>&1 ||
    bad "report.py topologies failed: $(cat "$tmp/out")"
grep -q '^| exp1peer (FAILED) |' "$t/table.md" && ok "the diverged graph's row says FAILED" ||
    bad "no FAILED row: $(cat "$t/table.md")"
grep -q 'Left out of every verdict, FAILED.*exp1peer' "$t/table.md" &&
    ok "the topology verdicts say the FAILED run is left out" ||
    bad "no left-out line: $(cat "$t/table.md")"
grep -q 'exp1peer (predicted' "$t/table.md" && bad "a FAILED run in a verdict: $(cat "$t/table.md")" ||
    ok "the FAILED graph is in no verdict"
grep -q 'time to target, averaged model (ms)' "$t/table.md" &&
    ok "the topology table's time to target is the averaged model's" ||
    bad "topology heading: $(cat "$t/table.md")"
exit $fail
