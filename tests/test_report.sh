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

# Hostile run directories (issue 28 item 6): each refused at once with one line naming the
# file, exit 2, no traceback, bounded time and memory. rank-3.csv -> /dev/zero grew to 20 GB.
hostile() { # WHAT SETUP-COMMAND EXPECT: a copy of the run, SETUP run in it, then the report
    what=$1
    h=$tmp/hostile
    rm -rf "$h"
    cp -r "$run" "$h"
    (cd "$h" && eval "$2")
    timeout -k 2 30 "$bin" report "$h" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ $rc -ge 124 ]; then
        bad "$what: the report hung (killed after 30 s)"
    elif [ $rc != 2 ] || grep -q Traceback "$tmp/err" || [ "$(wc -l <"$tmp/err")" != 1 ] ||
        ! grep -q -- "$3" "$tmp/err"; then
        bad "$what: exit $rc, stderr '$(head -c 600 "$tmp/err")'"
    else
        ok "$what: exit 2, '$(cat "$tmp/err")'"
    fi
}
hostile "rank-3.csv -> /dev/zero" "rm rank-3.csv && ln -s /dev/zero rank-3.csv" \
    "rank-3.csv is a character device"
hostile "rank-1.csv a FIFO" "rm rank-1.csv && mkfifo rank-1.csv" "rank-1.csv is a FIFO"
hostile "eval.csv above the bound (a sparse 300 MiB)" "truncate -s 300M eval.csv" \
    "above the 268435456-byte bound"
hostile "summary.json garbage" "printf '{\"algo\": ' >summary.json" "summary.json: not JSON"
hostile "summary.json a list" "echo '[1, 2]' >summary.json" "summary.json: not a JSON object"
hostile "rank-0.csv binary" "head -c 4096 /dev/urandom >rank-0.csv" "rank-0.csv"
hostile "rank-2.csv NUL bytes" "printf 'iteration,wall_s\n1,\0\0\0\n' >rank-2.csv" "rank-2.csv"
hostile "rank-2.csv too many fields" "printf '1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17\n' >>rank-2.csv" \
    "rank-2.csv:"
hostile "summary.json wrong types" \
    "sed -i 's/\"per_rank\": \\[/\"per_rank\": [7, /' summary.json" "$tmp/hostile"
# a symlink planted at a name the report writes: replaced, the file it points at unchanged
echo VICTIM >"$tmp/victim"
rm -f "$run/report.md" "$run/report-loss.png"
ln -s "$tmp/victim" "$run/report.md"
ln -s "$tmp/victim" "$run/report-loss.png"
"$bin" report "$run" >"$tmp/out" 2>"$tmp/err" || bad "report with planted symlinks: $(cat "$tmp/err")"
if [ "$(cat "$tmp/victim")" = VICTIM ] && [ ! -L "$run/report.md" ] &&
    [ ! -L "$run/report-loss.png" ] && png "$run/report-loss.png"; then
    ok "symlinks planted at report.md and a PNG are replaced, not written through"
else
    bad "the report wrote through a planted symlink: $(head -c 100 "$tmp/victim")"
fi
[ -z "$(find "$run" -name '*.tmp*')" ] && ok "no temporary left" ||
    bad "temporaries left: $(find "$run" -name '*.tmp*')"
exit $fail
