"""tests/rejoin_verdict.py: what every rejoin test asserts of one run (tests/test_rejoin.sh in
virtual time, tests/test_rejoin_real.sh with real processes). Rank 2 crashed at iteration 100.

usage: rejoin_verdict.py DIR REF_DIR ALGO DOWN_MIN DOWN_MAX JOINED(1|0) CLOCK(virtual|wall)

The final test loss is finite and within 25 % (+ 0.002) of the uninterrupted run's (REF_DIR);
eval.csv has one row per evaluation, in iteration order. JOINED: DIR/rank-2-rejoin.json says
rank 2 crashed at 100, joined later with another rank's state, on CLOCK, down between DOWN_MIN
and DOWN_MAX seconds; every rank is in the rows after the join (but the first, which may have
closed before rank 0 heard of it); summary.json says rank 2 finished and rejoined. sgp: the
push-sum mass survivors + lost + unreported = 4 within 1e-6; the others (JOINED): 4 ranks
finished. Prints "ok ..." or what is wrong.
"""
import csv
import json
import math
import sys

d, ref, algo, lo, hi, joined, clock = sys.argv[1:8]
lo, hi, joined = float(lo.rstrip("s")), float(hi.rstrip("s")), joined == "1"
bad = []
s = json.load(open(d + "/summary.json"))
r = json.load(open(ref + "/summary.json"))
loss, rloss = s.get("final_test_loss"), r.get("final_test_loss")
if not (isinstance(loss, (int, float)) and math.isfinite(loss)):
    bad.append("final test loss %s" % loss)
elif loss > 1.25 * rloss + 0.002:
    bad.append("final test loss %.5f, uninterrupted %.5f" % (loss, rloss))
rows = list(csv.DictReader(open(d + "/eval.csv")))
its = [int(x["iteration"]) for x in rows]
if its != sorted(set(its)):
    bad.append("eval.csv iterations %s" % its)
what = ""
if joined:
    j = json.load(open(d + "/rank-2-rejoin.json"))
    if not lo <= j["down_s"] <= hi:
        bad.append("down %.3f s, not within [%.3f, %.3f]" % (j["down_s"], lo, hi))
    if not (j["iteration"] >= j["crash_iteration"] == 100 and j["donor"] != 2 and
            j["clock"] == clock):
        bad.append("rejoin record %s" % j)
    late = [int(x["ranks"]) for x in rows if int(x["iteration"]) > j["iteration"]]
    if len(late) < 2 or min(late[1:]) != 4:
        bad.append("ranks in the rows after the join: %s" % late)
    if '"rank": 2, "finished": true, "rejoined": true' not in open(d + "/summary.json").read():
        bad.append("summary.json does not say rank 2 finished, rejoined")
    what = ", down %.3f s, joined at %d" % (j["down_s"], j["iteration"])
if algo == "sgp":
    w = [s.get(k) for k in ("ps_weight_sum", "ps_weight_lost", "ps_weight_unreported")]
    if None in w or abs(sum(w) - 4) > 1e-6:
        bad.append("push-sum mass %s, not 4" % w)
elif joined and s.get("ps_weight_sum") != 4:  # (1 per rank that finished)
    bad.append("ranks finished: %s, not 4" % s.get("ps_weight_sum"))
print("; ".join(bad) if bad else "ok loss %.5f (uninterrupted %.5f)%s" % (loss, rloss, what))
