#!/usr/bin/python3
"""Summarise a study's runs: results.csv, table.md and PNG plots.

    report.py stragglers OUT [--target-loss X]   runs OUT/ALGO-xK/ (one straggler slowed K times), OUT/ALGO-pauses/
    report.py topologies OUT [--target-loss X] [--eps E]   runs OUT/GRAPH/, pure averaging
                                                 runs OUT/averaging/GRAPH/
    report.py validate OUT [--tolerance 0.15]    pairs of runs listed in OUT/pairs.tsv
                                                 (experiments/validate_sim.sh)

Each run directory is a `hearsay train --out` directory: summary.json, eval.csv (the averaged
model and the consensus distance at evaluation points) and rank-R.csv / rank-R-eval.csv.
Needs Debian's python3-matplotlib (run with /usr/bin/python3); without it, no plots.
"""
import argparse
import csv
import json
import math
import os
import re
import sys


def read_csv(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return [{k: _num(v) for k, v in row.items()} for row in csv.DictReader(f)]


def _num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return v


def load_runs(out, pattern):
    runs = []
    for name in sorted(os.listdir(out)):
        d = os.path.join(out, name)
        m = re.fullmatch(pattern, name)
        if not m or not os.path.isdir(d):
            continue
        summ_path = os.path.join(d, "summary.json")
        summ = None
        if os.path.exists(summ_path):
            with open(summ_path) as f:
                summ = json.load(f)
        runs.append({"name": name, "dir": d, "match": m, "summary": summ,
                     "eval": read_csv(os.path.join(d, "eval.csv"))})
    return runs


def fmt(v, nd=2):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{v:.{nd}f}"


def get(summ, key):
    if not summ:
        return None
    v = summ.get(key)
    return float(v) if isinstance(v, (int, float)) else None


def plots_available():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot  # noqa: F401
        return True
    except ImportError:
        print("report: matplotlib not found (apt-get install python3-matplotlib): no plots",
              file=sys.stderr)
        return False


def write_csv(path, rows, fields):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in fields})


FIELDS = ["time_to_target_s", "final_test_loss", "final_test_acc", "wall_s", "iterations",
          "ps_weight_sum", "consensus_distance"]


def clock_words(runs):
    """What the times are: the runs' summary.json says "clock": "virtual" for hearsay sim."""
    clocks = {(r["summary"] or {}).get("clock", "wall") for r in runs if r["summary"]}
    ranks = {(r["summary"] or {}).get("ranks") for r in runs if r["summary"]}
    n = f"{ranks.pop()} workers, " if len(ranks) == 1 else ""
    if clocks == {"virtual"}:
        return n + "virtual seconds: hearsay sim"
    return n + "seconds of wall-clock time, real processes"


ALGO_ORDER = ["allreduce", "localsgd", "sgp", "sgp-d2", "sgp-d10", "sgp-d30", "sgp-async",
              "osgp", "osgp-d10", "osgp-d30", "dpsgd", "adpsgd", "easgd", "eamsgd", "lsgd"]


def scenario_key(sc):
    """x1, x2, .. by factor, then the transient pauses."""
    return (1, 0.0) if sc == "pauses" else (0, float(sc[1:]))


def scenario_title(sc):
    return "transient pauses" if sc == "pauses" else f"×{float(sc[1:]):g}"


def stragglers(out, target):
    runs = load_runs(out, r"([a-z0-9-]+?)-(x[0-9.]+|pauses)")
    if not runs:
        sys.exit(f"report: no runs found in {out}")
    rows = []
    for r in runs:
        algo, sc = r["match"].group(1), r["match"].group(2)
        row = {"algo": algo, "scenario": sc, "status": "ok" if r["summary"] else "failed"}
        for f in FIELDS + ["ps_weight_min", "ps_weight_max", "staleness_p99"]:
            row[f] = get(r["summary"], f)
        rows.append(row)
    write_csv(os.path.join(out, "results.csv"), rows,
              ["algo", "scenario", "status"] + FIELDS + ["ps_weight_min", "ps_weight_max",
                                                         "staleness_p99"])
    algos = sorted({r["algo"] for r in rows},
                   key=lambda a: ALGO_ORDER.index(a) if a in ALGO_ORDER else 99)
    scs = sorted({r["scenario"] for r in rows}, key=scenario_key)
    by = {(r["algo"], r["scenario"]): r for r in rows}

    def t(a, sc):
        return by.get((a, sc), {}).get("time_to_target_s")

    lines = [f"Time to test loss {target} ({clock_words(runs)}; the averaged model), by "
             f"straggler: ×k = one worker's steps k times slower, transient pauses = every "
             f"worker pauses with probability 0.05 per iteration for an exponential time of "
             f"mean 10 steps:", "",
             "| algorithm | " + " | ".join(scenario_title(sc) for sc in scs) +
             " | final test acc (×1) | push-sum weight min–max (all runs) |",
             "|---|" + "---|" * (len(scs) + 2)]
    for a in algos:
        cells = [fmt(t(a, sc)) for sc in scs]
        acc = by.get((a, scs[0]), {}).get("final_test_acc")
        wmin = [by[(a, sc)]["ps_weight_min"] for sc in scs
                if by.get((a, sc), {}).get("ps_weight_min") is not None]
        wmax = [by[(a, sc)]["ps_weight_max"] for sc in scs
                if by.get((a, sc), {}).get("ps_weight_max") is not None]
        wr = f"{min(wmin):.3g}–{max(wmax):.3g}" if wmin and wmax else "—"
        lines.append(f"| {a} | " + " | ".join(cells) +
                     f" | {fmt(100 * acc if acc else None, 1)} % | {wr} |")
    # The robustness criteria of the straggler study: under a scenario, an algorithm reaches
    # the target within 1.3x of its own time without stragglers and within 0.4x of all-reduce
    # SGD's time under the same scenario.
    checks = [("x4", ["adpsgd", "sgp-async", "sgp", "osgp"]),
              ("pauses", ["sgp", "osgp", "adpsgd", "sgp-async"])]
    crit = []
    for sc, names in checks:
        ar = t("allreduce", sc)
        for a in names:
            base, with_ = t(a, "x1"), t(a, sc)
            if base is None or with_ is None:
                continue
            own = with_ / base
            vs = with_ / ar if ar else None
            ok = own <= 1.3 and (vs is not None and vs <= 0.4)
            crit.append(f"| {a} | {scenario_title(sc)} | {own:.2f} | "
                        f"{'—' if vs is None else f'{vs:.2f}'} | {'yes' if ok else 'no'} |")
    if crit:
        lines += ["", "Robustness (target: ≤ 1.3 of its own time without stragglers, and ≤ 0.4 "
                  "of all-reduce SGD's under the same stragglers):", "",
                  "| algorithm | stragglers | / own ×1 | / all-reduce | both met |",
                  "|---|---|---|---|---|"] + crit
    table = "\n".join(lines) + "\n"
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(table)
    print(table)
    if plots_available():
        import matplotlib.pyplot as plt
        for sc in scs:
            fig, ax = plt.subplots(figsize=(7, 4.5))
            for r in runs:
                if r["match"].group(2) != sc or not r["eval"]:
                    continue
                ev = r["eval"]
                ax.plot([e["clock_s"] for e in ev], [e["avg_test_loss"] for e in ev],
                        marker="o", ms=3, label=r["match"].group(1))
            ax.axhline(target, color="gray", ls="--", lw=1, label=f"target {target}")
            ax.set_yscale("log")
            ax.set_xlabel("training time (s)")
            ax.set_ylabel("test loss of the averaged model")
            ax.set_title(f"stragglers: {scenario_title(sc)}")
            ax.legend(fontsize=8)
            fig.tight_layout()
            fig.savefig(os.path.join(out, f"loss_vs_time_{sc}.png"), dpi=110)
            plt.close(fig)
        ks = [sc for sc in scs if sc != "pauses"]
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for a in algos:
            pts = [(float(sc[1:]), t(a, sc)) for sc in ks if t(a, sc) is not None]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=a)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("straggler slowdown k")
        ax.set_ylabel(f"time to test loss {target} (s)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "time_to_target.png"), dpi=110)
        plt.close(fig)


def by_iteration(rows):
    """Rows in iteration order (a simulated run may append evaluations out of order)."""
    return sorted((r for r in rows if isinstance(r.get("iteration"), float)),
                  key=lambda r: r["iteration"])


def first_crossing(rows, key, target):
    for e in by_iteration(rows):
        if isinstance(e.get(key), float) and e[key] <= target:
            return e
    return None


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else None


def read_json(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def rank_iters_to_target(d, target):
    """Median over ranks of the first evaluated iteration where the rank's own model reaches the
    target (None when half the ranks or more never do)."""
    its, n, r = [], 0, 0
    while os.path.exists(os.path.join(d, f"rank-{r}-eval.csv")):
        e = first_crossing(read_csv(os.path.join(d, f"rank-{r}-eval.csv")), "test_loss", target)
        n += 1
        its.append(e["iteration"] if e else math.inf)
        r += 1
    m = median(its)
    return None if m is None or math.isinf(m) else m


def averaging(d, eps):
    """Pure averaging run: (iterations until the distance is eps of its start or None, the
    iterations run, the curve [(t, d / d0)], summary's consensus_rate)."""
    rows = read_csv(os.path.join(d, "consensus.csv"))
    rows = [r for r in rows if isinstance(r.get("consensus_distance"), float)]
    if not rows or rows[0]["consensus_distance"] <= 0:
        return None, None, [], None
    d0 = rows[0]["consensus_distance"]
    curve = [(r["iteration"], r["consensus_distance"] / d0) for r in rows]
    hit = next((t for t, v in curve if v <= eps), None)
    return hit, curve[-1][0], curve, get(read_json(os.path.join(d, "summary.json")),
                                             "consensus_rate")


def persistent_gain(steps):
    """How far apart a graph lets the ranks drift under a persistent disagreement: every rank
    adds its own fixed u_i (zero mean over ranks) before each mixing, e <- W_t (e + u) (a fixed
    shard pulls each rank's model its own way every iteration); the steady state's ||e|| / ||u||,
    averaged over random u and over a period. 0 for exact averaging in one step. |lambda2| is the
    decay rate of an initial disagreement instead: the two differ, e.g. a directed ring's complex
    modes carry a disagreement round the ring (|1 - lambda| ~ pi/n) where the bidirectional ring
    only diffuses it (1 - lambda ~ (2 pi/n)^2 / 3). steps: hearsay topo --json's "steps"."""
    if not steps:
        return None
    try:
        import numpy as np
    except ImportError:
        return None
    n = len(steps[0])
    ws = []
    for step in steps:
        w = np.zeros((n, n))
        for r in step:
            i = r["rank"]
            w[i, i] = r["self"]
            for j, x in zip(r["out"], r["weights"]):
                w[j, i] = x  # column-stochastic: i keeps self, sends x to j
        ws.append(w)
    u = np.random.default_rng(1).standard_normal((n, 8))
    u -= u.mean(0)
    e = np.zeros_like(u)
    period, last = len(ws), None
    for k in range(200000):
        e = ws[k % period] @ (e + u)
        e -= e.mean(0)
        if k % period == period - 1:
            g = np.linalg.norm(e) / np.linalg.norm(u)
            if last is not None and abs(g - last) <= 1e-6 * max(g, 1e-12):
                break
            last = g
    norms = []
    for k in range(period):  # average over the phase of the period
        e = ws[k % period] @ (e + u)
        e -= e.mean(0)
        norms.append(np.linalg.norm(e) / np.linalg.norm(u))
    return float(np.mean(norms))


def order_check(rows, key, what, pred="pred_iters", pred_name="predicted", margin=0.0):
    """Pairs that contradict a prediction: a graph predicted to do strictly better (fewer
    iterations to the same eps from hearsay topo, or a smaller gain) that measured more than
    `margin` worse."""
    bad = []
    for a in rows:
        for b in rows:
            pa, pb, ma, mb = a[pred], b[pred], a.get(key), b.get(key)
            if key == "iterations_to_target":  # a run that never reached it: infinitely many
                ma = math.inf if ma is None and a["status"] == "ok" else ma
                mb = math.inf if mb is None and b["status"] == "ok" else mb
            if None in (pa, pb, ma, mb) or (math.isinf(ma) and math.isinf(mb)):
                continue
            if pa < pb * (1 - 1e-3) and ma > mb + margin:
                bad.append(f"{a['graph']} ({pred_name} {pa:.3g}) {what} {ma:.3g}, "
                           f"{b['graph']} ({pred_name} {pb:.3g}) {mb:.3g}")
    return bad


def topologies(out, target, eps, eval_every=0.25):
    runs = [r for r in load_runs(out, r"([a-z0-9]+)") if r["name"] != "averaging"]
    if not runs:
        sys.exit(f"report: no runs found in {out}")
    rows = []
    for r in runs:
        row = {"graph": r["name"], "status": "ok" if r["summary"] else "failed"}
        for f in FIELDS:
            row[f] = get(r["summary"], f)
        full = read_json(os.path.join(r["dir"], "topo.json")) or \
            read_json(os.path.join(out, "averaging", r["name"], "topo.json")) or {}
        topo = full.get("report", full)
        row["persistent_gain"] = persistent_gain(full.get("steps"))
        row["gap_per_iter"] = topo.get("gap_per_iter")
        row["lambda2"] = topo.get("lambda2")
        row["period"] = topo.get("period")
        row["pred_iters"] = topo.get("predicted_iters")
        e = first_crossing(r["eval"], "avg_test_loss", target)
        row["iterations_to_target_avg_model"] = e["iteration"] if e else None
        row["iterations_to_target"] = rank_iters_to_target(r["dir"], target)
        hit, ran, curve, rate = averaging(os.path.join(out, "averaging", r["name"]), eps)
        row["avg_iters_to_eps"], row["avg_iters_run"], row["avg_rate"] = hit, ran, rate
        r["avg_curve"] = curve
        # consensus distance while training: every iteration (virtual time) or evaluations
        cons = read_csv(os.path.join(r["dir"], "consensus.csv"))
        if cons:
            r["train_cons"] = [(c["iteration"], c["consensus_distance"]) for c in cons
                               if isinstance(c.get("consensus_distance"), float)]
        else:
            r["train_cons"] = [(e["iteration"], e["consensus"]) for e in by_iteration(r["eval"])
                               if isinstance(e.get("consensus"), float)]
        half = r["train_cons"][len(r["train_cons"]) // 2:]
        row["train_consensus_mean"] = sum(v for _, v in half) / len(half) if half else None
        rows.append(row)
    rows.sort(key=lambda x: (x["pred_iters"] is None, x["pred_iters"] or 0,
                             -(x["gap_per_iter"] or 0)))
    write_csv(os.path.join(out, "results.csv"), rows,
              ["graph", "status", "lambda2", "period", "gap_per_iter", "pred_iters",
               "avg_iters_to_eps", "avg_iters_run", "avg_rate", "persistent_gain",
               "iterations_to_target",
               "iterations_to_target_avg_model", "train_consensus_mean"] + FIELDS)
    have_avg = any(r["avg_iters_run"] for r in rows)
    lines = [f"Graphs compared ({clock_words(runs)}), in the order their spectral gaps predict "
             f"(hearsay topo: iterations to consensus {eps:g}, one period at least):", ""]
    head = "| graph | 1−\\|λ2\\| per iteration | predicted iterations to " + f"{eps:g} |"
    sep = "|---|---|---|"
    if have_avg:
        head += f" averaging: iterations to {eps:g} | measured rate |"
        sep += "---|---|"
    head += (f" iterations to loss {target} (rank median) | ... averaged model | time to target "
             "(ms) | persistent-disagreement gain | consensus distance, 2nd half of training | "
             "final test loss |")
    sep += "---|---|---|---|---|---|"
    lines += [head, sep]
    for r in rows:
        cells = [r["graph"], fmt(r["gap_per_iter"], 4), fmt(r["pred_iters"], 0)]
        if have_avg:
            a = r["avg_iters_to_eps"]
            cells.append(fmt(a, 0) if a is not None else
                         (f"> {r['avg_iters_run']:g}" if r["avg_iters_run"] else "—"))
            cells.append(fmt(r["avg_rate"], 4))
        ttt = r["time_to_target_s"]
        cells += [fmt(r["iterations_to_target"], 0), fmt(r["iterations_to_target_avg_model"], 0),
                  fmt(1e3 * ttt if ttt is not None else None, 1),
                  fmt(r["persistent_gain"], 3), f"{r['train_consensus_mean']:.3g}"
                  if r["train_consensus_mean"] is not None else "—",
                  fmt(r["final_test_loss"], 4)]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    checks = (("avg_iters_to_eps", "averaging iterations", "pred_iters", "predicted iterations",
               "the spectral gaps"),
              ("iterations_to_target", "iterations to the target loss", "pred_iters",
               "predicted iterations", "the spectral gaps"),
              ("train_consensus_mean", "consensus distance while training", "pred_iters",
               "predicted iterations", "the spectral gaps"),
              ("iterations_to_target", "iterations to the target loss", "persistent_gain",
               "gain", "the persistent-disagreement gains"),
              ("train_consensus_mean", "consensus distance while training", "persistent_gain",
               "gain", "the persistent-disagreement gains"))
    # iterations to the target are read at evaluations: a difference of one evaluation
    # interval (in iterations, at the largest shard) is a tie
    ev_its = max([r["summary"]["iterations"] / max(1.0, get(r["summary"], "epochs") or 1.0)
                  * eval_every for r in runs if r["summary"]], default=1.0)
    margin_its = max(1.0, math.ceil(ev_its - 1e-9))
    for key, what, pred, pred_name, by in checks:
        if not any(r.get(key) is not None for r in rows) or \
                not any(r.get(pred) is not None for r in rows):
            continue
        margin = margin_its if key == "iterations_to_target" else 0.0
        bad = order_check(rows, key, what, pred, pred_name, margin)
        if bad:
            lines.append(f"Order of the {what}: {len(bad)} pair(s) contradict {by}" +
                         (f" by more than {margin:g} iteration(s), the evaluation interval:"
                          if margin else ":"))
            lines += [f"  - {b}" for b in bad]
        else:
            lines.append(f"Order of the {what}: as {by} predict" +
                         (f" (differences of {margin:g} iteration(s), the evaluation interval, "
                          "count as ties)." if margin else "."))
    table = "\n".join(lines) + "\n"
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(table)
    print(table)
    if not plots_available():
        return
    import matplotlib.pyplot as plt
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    order = {r["graph"]: i for i, r in enumerate(rows)}
    runs.sort(key=lambda r: order.get(r["name"], 99))
    info = {r["graph"]: r for r in rows}
    floor = 1e-9
    if have_avg:
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
        for ax, xmax in zip(axes, (60, None)):
            top = 0
            for i, r in enumerate(runs):
                curve = r["avg_curve"]
                if not curve:
                    continue
                c = colors[i % len(colors)]
                ts = [t for t, _ in curve if xmax is None or t <= xmax]
                vs = [max(v, floor) for t, v in curve if xmax is None or t <= xmax]
                ax.plot(ts, vs, color=c, lw=1.6, label=r["name"])
                top = max(top, ts[-1])
                lam, per = info[r["name"]]["lambda2"], info[r["name"]]["period"] or 1
                if lam is not None and lam > 0:
                    rate = abs(lam) ** (1.0 / per)
                    pts = [(t, rate ** t) for t in ts if rate ** t >= floor]
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], color=c, ls="--", lw=1)
            ax.set_yscale("log")
            ax.set_ylim(floor / 2, 2)
            ax.set_xlabel("iteration")
            ax.set_ylabel("consensus distance / its start")
            ax.set_title("first 60 iterations" if xmax else "whole runs")
        axes[0].legend(title="measured (solid), |λ2|^t (dashed)", fontsize=8)
        fig.suptitle(f"pure averaging (SGP, --lr 0 --init-spread 1), {clock_words(runs)}")
        fig.tight_layout()
        fig.savefig(os.path.join(out, "consensus.png"), dpi=110)
        plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, r in enumerate(runs):
        pts = [(t, v) for t, v in r["train_cons"] if v > 0]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], color=colors[i % len(colors)],
                    label=r["name"])
    ax.set_yscale("log")
    ax.set_xlabel("iteration")
    ax.set_ylabel("consensus distance ‖z_i − z̄‖ while training")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "consensus_training.png"), dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, r in enumerate(runs):
        ev = [e for e in by_iteration(r["eval"]) if isinstance(e.get("avg_test_loss"), float)]
        if ev:
            ax.plot([e["clock_s"] for e in ev], [e["avg_test_loss"] for e in ev], marker="o",
                    ms=3, color=colors[i % len(colors)], label=r["name"])
    ax.axhline(target, color="gray", ls="--", lw=1, label=f"target {target}")
    ax.set_yscale("log")
    ax.set_xlabel("training time (s)")
    ax.set_ylabel("test loss of the averaged model")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "loss_vs_time.png"), dpi=110)
    plt.close(fig)


def rank_split(d):
    """Per-iteration means over ranks of the rank-R.csv time columns (ms), the loop only (no
    final drain): compute, comm, wait, and the iterations per second of the loop's clock."""
    rows = []
    r = 0
    while os.path.exists(os.path.join(d, f"rank-{r}.csv")):
        rows.append(read_csv(os.path.join(d, f"rank-{r}.csv")))
        r += 1
    if not rows or not all(rows):
        return None
    n = sum(len(x) for x in rows)
    split = {k: 1e3 * sum(row[k] for x in rows for row in x) / n
             for k in ("compute_s", "comm_s", "wait_s")}
    clocks = sorted(x[-1]["wall_s"] for x in rows)
    split["clock_s"] = clocks[len(clocks) // 2]
    # spread of one iteration's duration (rank 0's loop clock; evaluations included)
    dts = sorted(1e3 * (b["wall_s"] - a["wall_s"]) for a, b in zip(rows[0], rows[0][1:]))
    split["dt"] = [dts[int(q * (len(dts) - 1))] for q in (0.1, 0.5, 0.9)] if dts else None
    split["iterations"] = len(rows[0])
    return split


def validate(out, tol):
    """Real against virtual: OUT/pairs.tsv lines CONFIG, ALGO, REAL_DIR, SIM_DIR, LOAD, NOTE."""
    path = os.path.join(out, "pairs.tsv")
    if not os.path.exists(path):
        sys.exit(f"report: {path} not found (written by experiments/validate_sim.sh)")
    with open(path) as f:
        pairs = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    lines = ["Real runs against the same configuration in virtual time (hearsay sim "
             "--sim-compute measured); ratio = virtual / real, "
             f"flagged (!) when outside ±{100 * tol:.0f} %:", "",
             "| configuration | algorithm | time to target: real | virtual | ratio | "
             "it/s: real | virtual | ratio | ms/it compute+comm+wait: real | virtual | "
             "ms/it p10/p50/p90: real | virtual | load (1 min) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    rows, bad = [], 0
    for p in pairs:
        cfg, algo, rd, sd, load = p[:5]
        res = {}
        for kind, d in (("real", rd), ("sim", sd)):
            d = os.path.join(out, d)
            summ = None
            if os.path.exists(os.path.join(d, "summary.json")):
                with open(os.path.join(d, "summary.json")) as f:
                    summ = json.load(f)
            sp = rank_split(d)
            res[kind] = {"ttt": get(summ, "time_to_target_s"),
                         "its": sp["iterations"] / sp["clock_s"] if sp and sp["clock_s"] > 0
                         else None, "split": sp}

        def ratio(k):
            a, b = res["real"][k], res["sim"][k]
            if a is None or b is None or a <= 0:
                return None, "—"
            r = b / a
            flag = abs(r - 1) > tol
            return r, f"{r:.3f}" + (" (!)" if flag else "")

        def split(sp):
            if not sp:
                return "—"
            return f"{sp['compute_s']:.2f}+{sp['comm_s']:.2f}+{sp['wait_s']:.2f}"

        def spread(sp):
            if not sp or not sp["dt"]:
                return "—"
            return "/".join(f"{v:.1f}" for v in sp["dt"])

        r_ttt, c_ttt = ratio("ttt")
        r_its, c_its = ratio("its")
        ok = r_ttt is not None and r_its is not None and abs(r_ttt - 1) <= tol and \
            abs(r_its - 1) <= tol
        bad += not ok
        lines.append(f"| {cfg} | {algo} | {fmt(res['real']['ttt'])} | {fmt(res['sim']['ttt'])} | "
                     f"{c_ttt} | {fmt(res['real']['its'], 1)} | {fmt(res['sim']['its'], 1)} | "
                     f"{c_its} | {split(res['real']['split'])} | {split(res['sim']['split'])} | "
                     f"{spread(res['real']['split'])} | {spread(res['sim']['split'])} | {load} |")
        rows.append({"configuration": cfg, "algorithm": algo,
                     "real_time_to_target_s": res["real"]["ttt"],
                     "sim_time_to_target_s": res["sim"]["ttt"], "ttt_ratio": r_ttt,
                     "real_it_per_s": res["real"]["its"], "sim_it_per_s": res["sim"]["its"],
                     "its_ratio": r_its, "load": load, "within_tolerance": int(ok)})
    lines.append("")
    lines.append(f"{len(pairs) - bad} of {len(pairs)} within ±{100 * tol:.0f} % on both figures" +
                 ("" if not bad else f"; {bad} outside (or missing): see docs/simulation.md, "
                  "\"Validation against real runs\""))
    notes = [p[5] for p in pairs if len(p) > 5 and p[5]]
    for n in dict.fromkeys(notes):
        lines.append(f"- {n}")
    write_csv(os.path.join(out, "results.csv"), rows, list(rows[0].keys()) if rows else [])
    table = "\n".join(lines) + "\n"
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(table)
    print(table)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("study", choices=["stragglers", "topologies", "validate"])
    ap.add_argument("out")
    ap.add_argument("--target-loss", type=float)
    ap.add_argument("--tolerance", type=float, default=0.15)
    ap.add_argument("--eps", type=float, default=1e-3)
    ap.add_argument("--eval-every", type=float, default=0.25, help="topologies: epochs between "
                    "evaluations (differences in iterations to the target below it are ties)")
    a = ap.parse_args()
    if not os.path.isdir(a.out):
        sys.exit(f"report: {a.out} is not a directory")
    if a.study == "validate":
        validate(a.out, a.tolerance)
        return
    if a.target_loss is None:
        ap.error("--target-loss is required")
    if a.study == "stragglers":
        stragglers(a.out, a.target_loss)
    else:
        topologies(a.out, a.target_loss, a.eps, a.eval_every)


if __name__ == "__main__":
    main()
