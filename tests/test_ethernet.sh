#!/bin/bash
# shellcheck disable=SC2015,SC2317 # A && ok || bad: ok never fails; cleanup runs from trap
# tests/test_ethernet.sh — experiments/ethernet.sh's refusal, failure and clean-up paths, and
# its --quick study (2 hosts x 2 ranks, 1gbit, all-reduce and SGP, 40 iterations):
#   1. without namespaces (simulated by HS_NETNS_UNAVAILABLE) it says why, exits 77, makes
#      nothing; a bad option is a usage error (exit 2) naming it;
#   2. a namespace it cannot create (one of its names already taken): a message naming it,
#      exit 1, every namespace it made removed, the one it did not make left alone;
#   3. SIGTERM in the middle of a run: exit 130, no namespace and no process left;
#   4. the --quick study to its end with --seeds 2: both algorithms real and virtual in
#      table.md as means with their intervals (RATE/ALGO-sSEED-real|sim|simr runs, runs.tsv's
#      seed column), the report of `hearsay report`, no namespace left; --virtual-only on it,
#      and runs.tsv from before --seeds (11 columns) read as seed 1 with no interval.
# 2-4 need root and ip netns: exit 77 with the reason otherwise (1 still runs).
bin=${HS_BIN:-./hearsay}
src=${HS_SRCDIR:-.}
study=$src/experiments/ethernet.sh
# shellcheck source=tests/shlib.sh
. "$(dirname "$0")/shlib.sh"
hs_scratch ethernet
tag=hst$$
job=
cleanup() {
    [ -n "$job" ] && kill "$job" 2>/dev/null
    for n in sw h0 h1; do ip netns del "$tag$n" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
ours() { ip netns list 2>/dev/null | grep -c "^$tag" || true; }
export HEARSAY=$bin

# 1. refusal
HS_NETNS_UNAVAILABLE="no namespaces in this test" bash "$study" --quick --tag "$tag" \
    --out "$tmp/refused" >"$tmp/out" 2>&1
rc=$?
if [ $rc = 77 ] && grep -q "SKIP: no namespaces in this test" "$tmp/out" && [ "$(ours)" = 0 ] &&
    [ ! -e "$tmp/refused" ]; then
    ok "refused without namespaces: $(head -n 1 "$tmp/out")"
else
    bad "without namespaces: exit $rc (expected 77), made '$(ls "$tmp")', output: $(cat "$tmp/out")"
fi
bash "$study" --quick --rates 1gigabit >"$tmp/out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "'1gigabit' is not a tc rate" "$tmp/out" && ok "a bad rate: exit 2" ||
    bad "--rates 1gigabit: exit $rc, $(cat "$tmp/out")"
bash "$study" --quick --seeds 0 >"$tmp/out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "seeds 0: give a count" "$tmp/out" && ok "--seeds 0: exit 2" ||
    bad "--seeds 0: exit $rc, $(cat "$tmp/out")"

why=$(bash -c '. "$1/experiments/lib.sh" && hs_netns_missing' sh "$src")
if [ -n "$why" ]; then
    echo "test_ethernet: the rest skipped: $why (needs root and ip netns)"
    [ $fail = 0 ] && exit 77
    exit 1
fi

# 2. a namespace that cannot be created: its name is taken (not by the study)
ip netns add "${tag}h1" || {
    echo "FAIL: cannot make namespace ${tag}h1"
    exit 1
}
timeout 60 bash "$study" --quick --tag "$tag" --out "$tmp/taken" >"$tmp/out" 2>&1
rc=$?
if [ $rc = 1 ] && grep -q "cannot create network namespace '${tag}h1'" "$tmp/out" &&
    [ "$(ours)" = 1 ] && ip netns list | grep -q "^${tag}h1"; then
    ok "a namespace taken: exit 1, '$(grep "cannot create" "$tmp/out")'; only ours is left"
else
    bad "namespace taken: exit $rc, namespaces left: $(ip netns list | grep "^$tag" | tr '\n' ' ')," \
        "output: $(cat "$tmp/out")"
fi
ip netns del "${tag}h1"

# 3. interrupted in the middle of the first real run
bash "$study" --quick --tag "$tag" --out "$tmp/killed" >"$tmp/out" 2>&1 &
job=$!
i=0
while [ $i -lt 300 ] && ! ls "$tmp/killed/1gbit/allreduce-s1-real"/rank-*.csv >/dev/null 2>&1; do
    i=$((i + 1))
    sleep 0.1
done
if [ $i -ge 300 ]; then
    bad "the quick study's first run did not start in 30 s: $(cat "$tmp/out")"
fi
kill -TERM "$job"
i=0
while [ $i -lt 200 ] && kill -0 "$job" 2>/dev/null; do
    i=$((i + 1))
    sleep 0.1
done
if kill -0 "$job" 2>/dev/null; then
    bad "ethernet.sh still running 20 s after SIGTERM"
    kill -KILL "$job"
fi
wait "$job"
rc=$?
job=
sleep 0.5
left=$( (pgrep -f "$tmp/killed"; pgrep -f "netns exec $tag") | tr '\n' ' ')
if [ $rc = 130 ] && [ "$(ours)" = 0 ] && [ -z "$left" ]; then
    ok "SIGTERM mid-run: exit 130, no namespace and no process left"
else
    bad "SIGTERM: exit $rc (expected 130), namespaces: $(ip netns list | grep "^$tag" | tr '\n' ' ')," \
        "processes: $left; output: $(tail -n 5 "$tmp/out")"
    for p in $left; do kill -KILL "$p" 2>/dev/null; done
fi

# 4. the quick study to its end, two seeds
if timeout 180 bash "$study" --quick --seeds 2 --tag "$tag" --out "$tmp/quick" >"$tmp/out" 2>&1
then
    ok "the --quick --seeds 2 study ran"
else
    bad "the --quick --seeds 2 study failed: $(tail -n 20 "$tmp/out")"
fi
# real and virtual times to the target both given, each a mean with its interval: the 2nd and
# 3rd cells are "M ± H"
intervals() { # TABLE
    for a in allreduce sgp; do
        row=$(grep "^| $a |" "$1" 2>/dev/null)
        if echo "$row" | awk -F'|' '{ exit !($3 + 0 > 0 && $4 + 0 > 0 && $3 ~ /±/ && $4 ~ /±/) }'
        then
            ok "$(basename "$(dirname "$1")")/table.md: $(cut -d"|" -f1-7 <<<"$row")..."
        else
            bad "$1 has no real and virtual time with an interval for $a: '$row'"
        fi
    done
}
intervals "$tmp/quick/table.md"
grep -q "over 2 seeds (1..2" "$tmp/quick/table.md" && ok "table.md: the heading names the seeds" ||
    bad "table.md's heading does not say 2 seeds: $(head -n 3 "$tmp/quick/table.md")"
n=0
for s in 1 2; do
    for a in allreduce sgp; do
        for k in real sim simr; do
            [ -s "$tmp/quick/1gbit/$a-s$s-$k/summary.json" ] && n=$((n + 1))
        done
        awk -F'\t' -v a="$a" -v s="$s" '$2 == a && $12 == s && $3 ~ "-s" s "-real$" { f = 1 }
            END { exit !f }' "$tmp/quick/runs.tsv" || bad "runs.tsv has no line for $a seed $s"
    done
done
[ $n = 12 ] && ok "12 runs: 1gbit/ALGO-sSEED-real|sim|simr, runs.tsv a line per seed" ||
    bad "$n of 12 run directories: $(ls "$tmp/quick/1gbit")"
# --virtual-only (no namespaces): the virtual runs again, the intervals still there
if timeout 120 bash "$study" --quick --seeds 2 --virtual-only --out "$tmp/quick" \
    >"$tmp/out" 2>&1 && [ "$(awk -F'\t' 'NF == 12' "$tmp/quick/runs.tsv" | wc -l)" = 4 ]; then
    ok "--virtual-only on it: runs.tsv's 4 lines kept, 12 columns"
    intervals "$tmp/quick/table.md"
else
    bad "--virtual-only: $(tail -n 20 "$tmp/out"); runs.tsv: $(cat "$tmp/quick/runs.tsv")"
fi
# runs.tsv from before --seeds: 11 columns, the seed-1 lines as they were: one seed, no verdict
mkdir -p "$tmp/old"
grep -- "-s1-real" "$tmp/quick/runs.tsv" | cut -f1-11 >"$tmp/old/runs.tsv"
ln -s "$tmp/quick/1gbit" "$tmp/old/1gbit"
if "${HS_PY:-/usr/bin/python3}" "$src/experiments/report.py" ethernet "$tmp/old" --target-loss 1.0 \
    >"$tmp/out" 2>&1 && grep -q "One seed (1): no interval, hence no verdict" "$tmp/old/table.md" &&
    grep "^| sgp |" "$tmp/old/table.md" | awk -F'|' '{ exit !($3 + 0 > 0 && $3 !~ /±/) }'; then
    ok "an 11-column runs.tsv (before --seeds): seed 1, no interval, no verdict"
else
    bad "an 11-column runs.tsv: $(cat "$tmp/out")"
fi
[ -s "$tmp/quick/report.md" ] && [ -s "$tmp/quick/report-loss_vs_time.png" ] &&
    ok "hearsay report wrote report.md and the loss-versus-time panels (a panel per rate and kind of run)" ||
    bad "no report.md or report-loss_vs_time.png in $(ls "$tmp/quick")"
[ "$(ours)" = 0 ] && ok "no namespace left" || bad "namespaces left: $(ip netns list | grep "^$tag")"
exit $fail
