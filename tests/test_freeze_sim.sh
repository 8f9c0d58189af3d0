#!/bin/sh
# tests/test_freeze_sim.sh — issue 28 item 2 in virtual time: `--straggler freeze` in
# `hearsay sim`, a rank stopped as a SIGSTOP would stop its process (its threads and services
# do not run, what reaches it waits, its peers see it silent; docs/failure-model.md). The
# freeze matrix of the wall clock, 4 ranks, rank 2 frozen at iteration 50, the default
# --fail-timeout 30, for each of the eight algorithms:
#   10 s (less than the fail timeout): no fault: status 0, a finite loss, no failed rank;
#   60 s and forever (more): the others fence rank 2; the tolerant algorithms finish (status 0,
#     failed ranks [2], push-sum mass survivors + lost + unreported = 4 within 1e-6), the
#     synchronous ones (dpsgd, allreduce, localsgd) stop with status 1 naming rank 2; a rank
#     frozen for good is killed (status 71) once nothing else runs;
# never NaN, never a hang (each run bounded). Before: `hearsay sim` refused freeze.
bin=${HS_BIN:-./hearsay}
[ -x /usr/bin/python3 ] || { echo "test_freeze_sim: /usr/bin/python3 missing: skipped"; exit 77; }
command -v timeout >/dev/null || { echo "test_freeze_sim: timeout(1) missing: skipped"; exit 77; }
out=$(mktemp -d "${TMPDIR:-/tmp}/hs-freeze-sim.XXXXXX")
trap 'rm -rf "$out"' EXIT
fail=0
flags="--model mlp:16-32-4 --data gauss:dim=16,classes=4,train=8000,test=500 --batch 16 --epochs 1 --threads 1 --quiet"
for algo in ${FREEZE_SIM_ALGOS:-sgp osgp dpsgd adpsgd allreduce localsgd easgd lsgd}; do
    for f in 10s 60s forever; do
        d=$out/$algo-$f
        # shellcheck disable=SC2086
        timeout 120 "$bin" sim -n 4 --algo "$algo" $flags --straggler "freeze:2:at=50:for=$f" \
            --out "$d" >"$d.log" 2>&1
        st=$?
        v=$(/usr/bin/python3 - "$d" "$algo" "$f" "$st" <<'PY' 2>&1
import json, math, sys
d, algo, f, st = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
log = open(d + ".log").read()
bad = []
if "nan" in log.lower().split():
    bad.append("NaN in the log")
sync = algo in ("dpsgd", "allreduce", "localsgd")
if f != "10s" and sync:
    if st != 1 or "rank 2 was fenced" not in log:
        bad.append("status %d (expected 1, naming rank 2)" % st)
    print("; ".join(bad) if bad else "ok stopped naming rank 2")
    sys.exit(0)
if st != 0:
    bad.append("status %d (expected 0)" % st)
try:
    s = json.load(open(d + "/summary.json"))
except OSError:
    print("; ".join(bad + ["no summary.json"]))
    sys.exit(0)
loss = s.get("final_test_loss")
if not (isinstance(loss, (int, float)) and math.isfinite(loss)):
    bad.append("final test loss %s" % loss)
failed = sorted(x["rank"] for x in s["failed_ranks"])
if failed != ([] if f == "10s" else [2]):
    bad.append("failed ranks %s" % failed)
if algo in ("sgp", "osgp"):
    w = [s.get(k) for k in ("ps_weight_sum", "ps_weight_lost", "ps_weight_unreported")]
    if None in w or abs(sum(w) - 4) > 1e-6:
        bad.append("push-sum mass %s, not 4" % w)
if f == "forever" and "frozen for good" not in log:
    bad.append("the rank frozen for good was not named")
print("; ".join(bad) if bad else "ok loss %.4f, failed %s" % (loss, failed))
PY
        )
        case $v in
        ok*) echo "ok   $algo, rank 2 frozen $f: status $st; $v" ;;
        *)
            echo "FAIL $algo, rank 2 frozen $f: $v"
            tail -n 5 "$d.log"
            fail=1
            ;;
        esac
    done
done
exit $fail
