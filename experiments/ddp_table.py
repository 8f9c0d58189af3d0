#!/usr/bin/python3
"""experiments/ddp_table.py OUT [--load A,B] [--batch N] [--iters N] [--skip S]: the table of
experiments/ddp_compare.sh from OUT/runs.tsv (rate, model, kind, round, s/step, load before,
compute,comm,wait ms) and OUT/sims.tsv (rate, model, kind, virtual s/step, compute ms), written
to OUT/table.md and printed.

Per rate and model: each kind's median s/step over its rounds with the range; hearsay's default
(hs: buckets during backward, hierarchical) over DDP's (ddp: gloo, default buckets), target at
most 0.8; the simulator's prediction of hs beside the real step, target within 15 %. The other
kinds (hs-b0: --bucket-mb 0, hs-ring: HS_AR_PATH=ring, ddp-flat: one flat all-reduce after
backward) are in the second table with hearsay's per-iteration compute, comm and wait.
Standard library only.
"""
import argparse
import statistics
import sys

KINDS = ["hs", "hs-b0", "hs-ring", "ddp", "ddp-flat"]


def fmt(xs):
    if not xs:
        return "FAILED"
    m = statistics.median(xs)
    if len(xs) == 1:
        return f"{1e3 * m:.1f}"
    return f"{1e3 * m:.1f} ({1e3 * min(xs):.1f}-{1e3 * max(xs):.1f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out")
    ap.add_argument("--load", default="")
    ap.add_argument("--batch", default="?")
    ap.add_argument("--iters", default="?")
    ap.add_argument("--skip", default="?")
    a = ap.parse_args()
    runs, parts, loads, order = {}, {}, [], []
    with open(f"{a.out}/runs.tsv") as f:
        for line in f:
            c = line.rstrip("\n").split("\t")
            if len(c) < 7:
                continue
            rate, model, kind, _, step, load, p = c[:7]
            key = (rate, model)
            if key not in order:
                order.append(key)
            runs.setdefault(key + (kind,), [])
            if step:
                runs[key + (kind,)].append(float(step))
            if p:
                parts.setdefault(key + (kind,), []).append([float(x) for x in p.split(",")])
            if load:
                loads.append(float(load))
    sims = {}
    try:
        with open(f"{a.out}/sims.tsv") as f:
            for line in f:
                c = line.rstrip("\n").split("\t")
                if len(c) >= 5 and c[3]:
                    sims[(c[0], c[1], c[2])] = (float(c[3]), float(c[4]))
    except FileNotFoundError:
        pass
    goodput = {}
    try:
        with open(f"{a.out}/goodput.tsv") as f:
            for line in f:
                c = line.rstrip("\n").split("\t")
                if len(c) >= 4:  # rate, the sim's NIC, one stream, both directions
                    goodput[c[0]] = (c[1] or "not measured", c[2] or "not measured",
                                     c[3] or "not measured")
                elif len(c) >= 2:  # before 2026-11-29: one stream only
                    goodput[c[0]] = (c[1] or "not measured", c[1] or "not measured", "not measured")
    except FileNotFoundError:
        pass

    def med(k):
        xs = runs.get(k) or []
        return statistics.median(xs) if xs else None

    lines = []
    lo = f"{min(loads):.2f}-{max(loads):.2f}" if loads else "?"
    lines.append(f"2 emulated hosts x 2 ranks (namespaces, tbf), batch {a.batch} per rank, "
                 f"{a.iters} iterations of which the first {a.skip} untimed; ms per step: median "
                 f"over rounds (range); 1-minute load average before the runs {lo}"
                 + (f" (start, end: {a.load})" if a.load else "") + ".")
    if goodput:
        lines.append("Measured TCP goodput per link, one stream / both directions at once: "
                     + ", ".join(f"{r}: {g[1]}/s / {g[2]}/s" for r, g in goodput.items())
                     + "; the sim's --sim-nic: "
                     + ", ".join(f"{r}: {g[0]}" for r, g in goodput.items()) + ".")
    lines.append("")
    lines.append("| rate | model | hearsay ms/step | DDP ms/step | DDP-flat ms/step | hearsay/DDP "
                 "(target <= 0.8) | sim ms/step | sim/real (target 0.85-1.15) |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for rate, model in order:
        k = (rate, model)
        h, d = med(k + ("hs",)), med(k + ("ddp",))
        ratio = f"{h / d:.2f}" if h and d else "-"
        if h and d:
            ratio += " met" if h / d <= 0.8 else " NOT met"
        s = sims.get(k + ("hs",))
        sim = f"{1e3 * s[0]:.1f}" if s else "-"
        sr = f"{s[0] / h:.2f}" if s and h else "-"
        if s and h:
            sr += " met" if abs(s[0] / h - 1) <= 0.15 else " NOT met"
        lines.append(f"| {rate} | {model} | {fmt(runs.get(k + ('hs',), []))} | "
                     f"{fmt(runs.get(k + ('ddp',), []))} | {fmt(runs.get(k + ('ddp-flat',), []))}"
                     f" | {ratio} | {sim} | {sr} |")
    lines.append("")
    lines.append("Every kind, with hearsay's mean per-iteration compute_s / comm_s / wait_s over "
                 "all ranks (ms; rank-R.csv) and the simulator's prediction "
                 "(--sim-compute fixed: that compute):")
    lines.append("")
    lines.append("| rate | model | kind | ms/step | / DDP | compute, comm, wait ms | sim ms/step "
                 "| sim/real |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for rate, model in order:
        k = (rate, model)
        d = med(k + ("ddp",))
        for kind in KINDS:
            if k + (kind,) not in runs:
                continue
            m = med(k + (kind,))
            p = parts.get(k + (kind,))
            pm = ", ".join(f"{statistics.median(x):.1f}" for x in zip(*p)) if p else "-"
            s = sims.get(k + (kind,))
            lines.append(f"| {rate} | {model} | {kind} | {fmt(runs[k + (kind,)])} | "
                         f"{m / d:.2f} |" if m and d else
                         f"| {rate} | {model} | {kind} | {fmt(runs[k + (kind,)])} | - |")
            lines[-1] += (f" {pm} | {1e3 * s[0]:.1f} | {s[0] / m:.2f} |" if s and m else f" {pm} | - | - |")
    text = "\n".join(lines) + "\n"
    with open(f"{a.out}/table.md", "w") as f:
        f.write(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
