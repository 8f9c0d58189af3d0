#!/usr/bin/python3
"""Summarise a study's runs: results.csv, table.md and PNG plots.

    report.py stragglers OUT [--target-loss X]   runs OUT/ALGO-xK/ (one straggler slowed K times), OUT/ALGO-pauses/
    report.py topologies OUT [--target-loss X]   runs OUT/GRAPH/
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


def topologies(out, target):
    runs = load_runs(out, r"([a-z0-9]+)")
    if not runs:
        sys.exit(f"report: no runs found in {out}")
    rows = []
    for r in runs:
        row = {"graph": r["name"], "status": "ok" if r["summary"] else "failed"}
        for f in FIELDS:
            row[f] = get(r["summary"], f)
        it = None
        for e in r["eval"]:
            if e.get("avg_test_loss") is not None and e["avg_test_loss"] <= target:
                it = e["iteration"]
                break
        row["iterations_to_target"] = it
        rows.append(row)
    write_csv(os.path.join(out, "results.csv"), rows,
              ["graph", "status", "iterations_to_target"] + FIELDS)
    lines = [f"Graphs compared (target test loss {target}; times in {clock_words(runs)}):", "",
             "| graph | iterations to target (averaged model) | time to target (s) | "
             "final test loss | final consensus distance | wall (s) |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['graph']} | {fmt(r['iterations_to_target'], 0)} | "
                     f"{fmt(r['time_to_target_s'])} | {fmt(r['final_test_loss'], 4)} | "
                     f"{fmt(r['consensus_distance'], 4)} | {fmt(r['wall_s'], 1)} |")
    table = "\n".join(lines) + "\n"
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(table)
    print(table)
    if plots_available():
        import matplotlib.pyplot as plt
        for key, ylabel, fname in (("consensus", "consensus distance ‖z_i − z̄‖", "consensus.png"),
                                   ("avg_test_loss", "test loss of the averaged model",
                                    "loss_vs_time.png")):
            fig, ax = plt.subplots(figsize=(7, 4.5))
            for r in runs:
                ev = [e for e in r["eval"] if isinstance(e.get(key), float) and e[key] > 0]
                if ev:
                    ax.plot([e["clock_s"] for e in ev], [e[key] for e in ev], marker="o", ms=3,
                            label=r["name"])
            ax.set_yscale("log")
            ax.set_xlabel("training time (s)")
            ax.set_ylabel(ylabel)
            ax.legend()
            fig.tight_layout()
            fig.savefig(os.path.join(out, fname), dpi=110)
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
             "load (1 min) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
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

        r_ttt, c_ttt = ratio("ttt")
        r_its, c_its = ratio("its")
        ok = r_ttt is not None and r_its is not None and abs(r_ttt - 1) <= tol and \
            abs(r_its - 1) <= tol
        bad += not ok
        lines.append(f"| {cfg} | {algo} | {fmt(res['real']['ttt'])} | {fmt(res['sim']['ttt'])} | "
                     f"{c_ttt} | {fmt(res['real']['its'], 1)} | {fmt(res['sim']['its'], 1)} | "
                     f"{c_its} | {split(res['real']['split'])} | {split(res['sim']['split'])} | "
                     f"{load} |")
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
    a = ap.parse_args()
    if not os.path.isdir(a.out):
        sys.exit(f"report: {a.out} is not a directory")
    if a.study == "validate":
        validate(a.out, a.tolerance)
        return
    if a.target_loss is None:
        ap.error("--target-loss is required")
    (stragglers if a.study == "stragglers" else topologies)(a.out, a.target_loss)


if __name__ == "__main__":
    main()
