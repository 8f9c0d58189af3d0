#!/usr/bin/python3
"""Check a --trace file (Chrome trace-event JSON): it parses, every flow has exactly one start
('s') and one end ('f'), the start is not later than the end and lies inside a "send" span,
the end inside an "apply" span, spans on each thread nest (no partial overlap), and every rank
has compute spans. Usage: check_trace.py FILE RANKS [MIN_FLOWS [CLOCK [NAMES]]], RANKS a count
(0..N-1) or a comma list; CLOCK wall or virtual; NAMES spans that must appear (a comma list).
Exit 0, or 1 with the reason.
"""
import json
import sys
from collections import defaultdict


def fail(msg):
    print("check_trace: FAIL: " + msg)
    sys.exit(1)


def main():
    path = sys.argv[1]
    if "," in sys.argv[2]:
        ranks = [int(r) for r in sys.argv[2].split(",")]
    else:
        ranks = list(range(int(sys.argv[2])))
    min_flows = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    clock = sys.argv[4] if len(sys.argv) > 4 and sys.argv[4] else None
    expect = sys.argv[5].split(",") if len(sys.argv) > 5 else []
    with open(path) as f:
        doc = json.load(f)
    evs = doc["traceEvents"]
    spans = defaultdict(list)  # (pid, tid) -> [(ts, end, name)]
    flows = defaultdict(lambda: {"s": [], "f": []})
    for e in evs:
        ph = e["ph"]
        if ph == "X":
            if e["dur"] < 0:
                fail("negative duration: %r" % e)
            spans[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"], e["name"]))
        elif ph in ("s", "f"):
            flows[e["id"]][ph].append(e)
        elif ph != "M":
            fail("unexpected phase %r" % ph)
    # nesting: sorted by start (longest first at a tie), every span lies wholly inside the
    # enclosing open one or starts after it ended
    eps = 1e-3  # the file's resolution (1 ns in us)
    for key, lst in spans.items():
        lst.sort(key=lambda s: (s[0], -(s[1] - s[0])))
        stack = []
        for s in lst:
            while stack and stack[-1][1] <= s[0] + eps:  # ended before s starts
                stack.pop()
            if stack and s[1] > stack[-1][1] + eps:
                fail("rank %d thread %d: span %s [%.3f, %.3f] overlaps %s [%.3f, %.3f] "
                     "partially" % (key[0], key[1], s[2], s[0], s[1], stack[-1][2],
                                    stack[-1][0], stack[-1][1]))
            stack.append(s)
    pids = {k[0] for k in spans}
    for r in ranks:
        if not any(s[2] == "compute" for k, l in spans.items() if k[0] == r for s in l):
            fail("rank %d has no compute span" % r)
    if pids != set(ranks):
        fail("ranks in the trace: %s, expected %s" % (sorted(pids), ranks))

    seen = {s[2] for l in spans.values() for s in l}
    for name in expect:
        if name not in seen:
            fail("no %r span (spans seen: %s)" % (name, ", ".join(sorted(seen))))

    def inside(e, name):
        return any(s[2] == name and s[0] - eps <= e["ts"] <= s[1] + eps
                   for s in spans[(e["pid"], e["tid"])])

    for fid, ends in flows.items():
        if len(ends["s"]) != 1 or len(ends["f"]) != 1:
            fail("flow %s has %d starts and %d ends" % (fid, len(ends["s"]), len(ends["f"])))
        s, f = ends["s"][0], ends["f"][0]
        if f.get("bp") != "e":
            fail("flow %s's end does not bind to its enclosing slice" % fid)
        if s["ts"] > f["ts"] + eps:
            fail("flow %s starts at %.3f, after its end at %.3f" % (fid, s["ts"], f["ts"]))
        if s["pid"] == f["pid"]:
            fail("flow %s goes from rank %d to itself" % (fid, s["pid"]))
        if not inside(s, "send"):
            fail("flow %s starts outside a send span" % fid)
        if not inside(f, "apply"):
            fail("flow %s ends outside an apply span" % fid)
    if len(flows) < min_flows:
        fail("%d flows, expected at least %d" % (len(flows), min_flows))
    other = doc.get("otherData", {})
    if clock and other.get("clock") != clock:
        fail("clock %r, expected %r" % (other.get("clock"), clock))
    print("check_trace: ok: %d ranks, %d threads, %d spans, %d flows (clock %s, %s unpaired ends "
          "dropped)" % (len(ranks), len(spans), sum(len(l) for l in spans.values()), len(flows),
                        other.get("clock"), other.get("unpaired_flow_ends")))


main()
