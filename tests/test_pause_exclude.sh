#!/bin/sh
# tests/test_pause_exclude.sh — issue 28 item 2 for a rank that is slow, not frozen: a pause
# (`--straggler once:2:iter=50:D`) keeps the process heartbeating, so no fence comes from
# silence; a pause longer than every bound (--comm-timeout + 3 x --fail-timeout) gets the rank
# given up on, which excludes it: it is fenced everywhere (told, it stops with 71; its later
# messages refused), and push-sum keeps each strongly connected part of the survivors' graph
# to itself, so that no weight drains to 0. Before: virtual time had no heartbeats at all (a
# 60 s pause made sgp and osgp diverge to NaN at the 30 s message timeout), and on the wall
# clock a 12 s pause at --comm-timeout 1 --fail-timeout 2 made sgp diverge to NaN (push-sum
# weight 7.25e-05 at rank 3) in both.
#   virtual time: hearsay sim -n 4, the eight algorithms, pauses of 60 s (within the bound of
#     30 + 3 x 30 s: no fault, status 0, a finite loss) and 200 s (past it: status 0 or 1,
#     never NaN; push-sum mass survivors + lost + unreported = 4 within 1e-6);
#   wall clock: sgp, 4 ranks on hsshm, a 12 s pause at --comm-timeout 1 --fail-timeout 2:
#     never NaN, mass 4, the job's status 71 (the excluded rank), only rank 2 excluded (not
#     rank 3, blocked behind it), the survivors holding at least 1.5 of the weight.
bin=${HS_BIN:-./hearsay}
[ -x /usr/bin/python3 ] || { echo "test_pause_exclude: /usr/bin/python3 missing: skipped"; exit 77; }
command -v timeout >/dev/null || { echo "test_pause_exclude: timeout(1) missing: skipped"; exit 77; }
out=$(mktemp -d "${TMPDIR:-/tmp}/hs-pause.XXXXXX")
trap 'rm -rf "$out"' EXIT
fail=0
flags="--model mlp:16-32-4 --data gauss:dim=16,classes=4,train=8000,test=500 --batch 16 --epochs 1 --threads 1 --quiet"
check() { # DIR LOG STATUS WANT(0|0or1|71) ALGO LABEL
    d=$1 log=$2 st=$3 want=$4 algo=$5 label=$6
    why=""
    case $want in
    0) [ "$st" -eq 0 ] || why="status $st (expected 0)" ;;
    0or1) [ "$st" -eq 0 ] || [ "$st" -eq 1 ] || why="status $st (expected 0 or 1)" ;;
    71) [ "$st" -eq 71 ] || why="status $st (expected 71)" ;;
    esac
    if grep -qi 'nan\b\|diverged' "$log"; then why="${why:+$why; }NaN or divergence"; fi
    v=$(/usr/bin/python3 - "$d/summary.json" "$algo" "$st" <<'PY' 2>&1
import json, math, sys
algo, st = sys.argv[2], int(sys.argv[3])
try:
    s = json.load(open(sys.argv[1]))
except OSError:
    print("ok (no summary)" if st != 0 else "no summary.json")
    sys.exit(0)
bad = []
loss = s.get("final_test_loss")
if not (isinstance(loss, (int, float)) and math.isfinite(loss)):
    bad.append("final test loss %s" % loss)
if algo in ("sgp", "osgp"):
    w = [s.get(k) for k in ("ps_weight_sum", "ps_weight_lost", "ps_weight_unreported")]
    if None in w or abs(sum(w) - s["ranks"]) > 1e-6:
        bad.append("push-sum mass %s, not %d" % (w, s["ranks"]))
print("; ".join(bad) if bad else "ok loss %.4f" % loss)
PY
    )
    case $v in ok*) ;; *) why="${why:+$why; }$v" ;; esac
    if [ -z "$why" ]; then
        echo "ok   $label: status $st; $v"
    else
        echo "FAIL $label: $why"
        tail -n 6 "$log"
        fail=1
    fi
}
for algo in ${PAUSE_ALGOS:-sgp osgp dpsgd adpsgd allreduce localsgd easgd lsgd}; do
    for p in 60s 200s; do
        d=$out/$algo-$p
        # shellcheck disable=SC2086
        timeout 120 "$bin" sim -n 4 --algo "$algo" $flags --straggler "once:2:iter=50:$p" \
            --out "$d" >"$d.log" 2>&1
        st=$?
        want=0
        [ $p = 200s ] && want=0or1
        check "$d" "$d.log" $st $want "$algo" "virtual $algo, rank 2 paused $p"
    done
done
if [ -z "${PAUSE_NO_REAL:-}" ]; then
    d=$out/real-sgp
    # shellcheck disable=SC2086
    timeout -k 5 120 "$bin" run --keep-going --finish-timeout 10 -n 4 -- "$bin" train --algo sgp \
        $flags --comm-timeout 1 --drain-timeout 5 --fail-timeout 2 \
        --straggler "once:2:iter=50:12s" --out "$d" >"$d.log" 2>&1
    st=$?
    check "$d" "$d.log" $st 71 sgp "wall clock sgp, rank 2 paused 12 s past every bound"
    # only rank 2 is excluded: rank 3, blocked on it, says so in its heartbeats, and rank 1,
    # blocked on rank 3, waits on (before: rank 1 gave up on rank 3 at the same moment, and
    # both were excluded); and the survivors learn of the exclusion at once (before: one that
    # heard of it from the next heartbeats sent rank 2 half its weight every other step)
    v=$(/usr/bin/python3 - "$d/summary.json" <<'PY' 2>&1
import json, sys
s = json.load(open(sys.argv[1]))
failed = sorted(f["rank"] for f in s["failed_ranks"])
w = s["ps_weight_sum"]
print("ok" if failed == [2] and w >= 1.5 else
      "failed ranks %s (expected [2]), survivors' weight %.5g (expected >= 1.5)" % (failed, w))
PY
    )
    if [ "$v" = ok ]; then
        echo "ok   wall clock sgp: only rank 2 excluded, survivors' weight >= 1.5"
    else
        echo "FAIL wall clock sgp: $v"
        fail=1
    fi
fi
exit $fail
