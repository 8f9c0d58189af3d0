#!/bin/sh
# shellcheck disable=SC2015,SC2317 # A && ok || bad: ok never fails; cleanup runs from trap
# tests/test_report.sh — `hearsay report DIR` on a tiny run directory (hearsay sim, 4 ranks,
# a few iterations: no network, a second) and on a study directory holding two runs: the
# tables carry the run's figures, every PNG is a PNG; and the bad inputs: a directory with no
# run in it, a path that does not exist, a file, an interpreter that does not exist — each an
# error naming it, exit 2, nothing written. Exits 77 (skipped), saying why, when Debian's
# python3 has no matplotlib (apt-get install python3-matplotlib).
bin=${HS_BIN:-./hearsay}
if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
    echo "test_report: skipped: /usr/bin/python3 cannot import matplotlib (apt-get install python3-matplotlib)"
    exit 77
fi
# shellcheck source=tests/shlib.sh
. "$(dirname "$0")/shlib.sh"
hs_scratch report
trap 'rm -rf "$tmp"' EXIT
png() { # FILE: starts with the PNG signature
    [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]
}

mkdir -p "$tmp/study"
for a in sgp allreduce; do
    if ! "$bin" sim -n 4 --ranks-per-host 2 --sim-compute fixed:1 --algo "$a" \
        --model mlp:16-32-4 --data gauss:dim=16,classes=4,train=2000,test=200,sep=5 \
        --epochs 1 --batch 32 --eval-every 0.25 --target-loss 0.5 --progress 0 \
        --out "$tmp/study/$a" >"$tmp/$a.log" 2>&1; then
        bad "hearsay sim ($a) failed:"
        cat "$tmp/$a.log"
        exit 1
    fi
done

# one run
run=$tmp/study/sgp
if "$bin" report "$run" >"$tmp/out" 2>"$tmp/err"; then
    ok "hearsay report on a run directory exits 0"
else
    bad "hearsay report $run failed: $(cat "$tmp/err")"
fi
grep -q '^| 3 | 15 |' "$run/report.md" && ok "per-rank table has rank 3 with its 15 iterations" ||
    bad "no per-rank row for rank 3 in report.md: $(cat "$run/report.md")"
iters=$(sed -n 's/.*"iterations": \([0-9]*\),.*/\1/p' "$run/summary.json" | head -n 1)
grep -q "^| iterations | $iters |" "$run/report.md" && ok "summary table: $iters iterations" ||
    bad "report.md does not give summary.json's $iters iterations"
grep -q '^| algo\|^sgp on 4 ranks' "$run/report.md" && ok "report.md names the algorithm" ||
    bad "report.md does not name the algorithm sgp"
for p in loss accuracy consensus ps_weight staleness time_split; do
    if [ -s "$run/report-$p.png" ] && png "$run/report-$p.png"; then
        ok "report-$p.png is a PNG"
    else
        bad "report-$p.png missing or not a PNG"
    fi
done

# a study directory: both runs in the table, one loss-versus-time plot for the folder of runs
if "$bin" report "$tmp/study" --target-loss 0.6 >"$tmp/out" 2>"$tmp/err"; then
    ok "hearsay report on a study directory exits 0"
else
    bad "hearsay report $tmp/study failed: $(cat "$tmp/err")"
fi
[ "$(grep -c '^| \(sgp\|allreduce\) |' "$tmp/study/report.md")" = 2 ] &&
    ok "the study table has both runs" || bad "study report.md: $(cat "$tmp/study/report.md")"
[ "$(wc -l <"$tmp/study/runs.csv")" = 3 ] && ok "runs.csv: a header and 2 rows" ||
    bad "runs.csv has $(wc -l <"$tmp/study/runs.csv") lines, expected 3"
png "$tmp/study/report-loss_vs_time.png" && ok "study loss-versus-time plot is a PNG" ||
    bad "no study loss-versus-time PNG"

# bad inputs: a clear message naming what is wrong, exit 2, nothing written
mkdir "$tmp/empty"
"$bin" report "$tmp/empty" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc = 2 ] && grep -q "$tmp/empty is neither a run directory" "$tmp/err" &&
    [ -z "$(ls -A "$tmp/empty")" ]; then
    ok "a directory with no run: exit 2, '$(cat "$tmp/err")'"
else
    bad "empty directory: exit $rc, stderr '$(cat "$tmp/err")', contents '$(ls -A "$tmp/empty")'"
fi
"$bin" report "$tmp/nonexistent" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 2 ] && grep -q "$tmp/nonexistent: No such file" "$tmp/err" &&
    ok "a missing path: exit 2, '$(cat "$tmp/err")'" ||
    bad "missing path: exit $rc, stderr '$(cat "$tmp/err")'"
"$bin" report "$run/summary.json" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 2 ] && grep -q "summary.json is not a directory" "$tmp/err" &&
    ok "a file: exit 2, '$(cat "$tmp/err")'" || bad "a file: exit $rc, stderr '$(cat "$tmp/err")'"
"$bin" report "$run" --python "$tmp/no-python" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 2 ] && grep -q -- "--python $tmp/no-python" "$tmp/err" &&
    ok "a missing interpreter: exit 2, '$(cat "$tmp/err")'" ||
    bad "missing --python: exit $rc, stderr '$(cat "$tmp/err")'"
"$bin" report "$run" --target-loss x >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 2 ] && grep -q "target-loss expects a positive number, got 'x'" "$tmp/err" &&
    ok "a bad --target-loss: exit 2" || bad "--target-loss x: exit $rc, '$(cat "$tmp/err")'"
exit $fail
