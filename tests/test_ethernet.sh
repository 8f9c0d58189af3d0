#!/bin/bash
# shellcheck disable=SC2015,SC2317 # A && ok || bad: ok never fails; cleanup runs from trap
# tests/test_ethernet.sh — experiments/ethernet.sh's refusal, failure and clean-up paths, and
# its --quick study (2 hosts x 2 ranks, 1gbit, all-reduce and SGP, 40 iterations):
#   1. without namespaces (simulated by HS_NETNS_UNAVAILABLE) it says why, exits 77, makes
#      nothing; a bad option is a usage error (exit 2) naming it;
#   2. a namespace it cannot create (one of its names already taken): a message naming it,
#      exit 1, every namespace it made removed, the one it did not make left alone;
#   3. SIGTERM in the middle of a run: exit 130, no namespace and no process left;
#   4. the --quick study to its end: both algorithms real and virtual in table.md, the report
#      of `hearsay report`, no namespace left.
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
while [ $i -lt 300 ] && ! ls "$tmp/killed/1gbit/allreduce-real"/rank-*.csv >/dev/null 2>&1; do
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

# 4. the quick study to its end
if timeout 120 bash "$study" --quick --tag "$tag" --out "$tmp/quick" >"$tmp/out" 2>&1; then
    ok "the --quick study ran"
else
    bad "the --quick study failed: $(tail -n 20 "$tmp/out")"
fi
for a in allreduce sgp; do
    row=$(grep "^| $a |" "$tmp/quick/table.md" 2>/dev/null)
    # real and virtual times to the target both given: the 2nd and 3rd cells are numbers
    if echo "$row" | awk -F'|' '{ exit !($3 + 0 > 0 && $4 + 0 > 0) }'; then
        ok "table.md: $row"
    else
        bad "table.md has no real and virtual time for $a: '$row'"
    fi
done
[ -s "$tmp/quick/report.md" ] && [ -s "$tmp/quick/report-loss_vs_time_1gbit.png" ] &&
    ok "hearsay report wrote report.md and the 1gbit loss-versus-time plot" ||
    bad "no report.md or report-loss_vs_time_1gbit.png in $(ls "$tmp/quick")"
[ "$(ours)" = 0 ] && ok "no namespace left" || bad "namespaces left: $(ip netns list | grep "^$tag")"
exit $fail
