#!/usr/bin/python3
"""Summarise a study's runs: results.csv, table.md and PNG plots.

    report.py stragglers OUT [--target-loss X]   runs OUT/ALGO-xK/ (one straggler slowed K times), OUT/ALGO-pauses/
    report.py topologies OUT [--target-loss X] [--eps E]   runs OUT/GRAPH/, pure averaging
                                                 runs OUT/averaging/GRAPH/
    report.py validate OUT [--tolerance 0.15]    pairs of runs listed in OUT/pairs.tsv
                                                 (experiments/validate_sim.sh)
    report.py ethernet OUT --target-loss X       OUT/runs.tsv (experiments/ethernet.sh)
    report.py dir DIR [--target-loss X] [--runs] any run or study directory: what
                                                 `hearsay report DIR` runs (report.md, PNGs)

Each run directory is a `hearsay train --out` directory: summary.json, eval.csv (the averaged
model and the consensus distance at evaluation points) and rank-R.csv / rank-R-eval.csv.
Needs Debian's python3-matplotlib (run with /usr/bin/python3); without it, no plots.
"""
import argparse
import csv
import itertools
import json
import math
import os
import re
import stat
import sys
from array import array
from collections.abc import Sequence

# What is read, and how much (hearsay report, docs/timeline.md "hearsay report"): regular
# files only (a FIFO, a device such as /dev/zero, a socket is refused before anything is
# read), a CSV of at most CSV_MAX_BYTES, a JSON file of at most JSON_MAX_BYTES, CSV lines of
# at most CSV_MAX_LINE bytes. Anything else is one line on stderr naming the file, exit 2.
CSV_MAX_BYTES = 256 << 20
JSON_MAX_BYTES = 16 << 20
CSV_MAX_LINE = 1 << 16
PLOT_MAX_POINTS = 4000  # per line of a plot: longer series are thinned evenly


class ReportError(Exception):
    """A file the report cannot use: the message names it (one line, no traceback)."""


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def open_regular(path, limit, what="file"):
    """Open path for reading as text: a regular file of at most `limit` bytes, else
    ReportError. O_NONBLOCK: a FIFO with no writer would hang the open itself."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as e:
        raise ReportError(f"cannot open {path}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = next((k for test, k in _KINDS if test(st.st_mode)), "not a regular file")
            raise ReportError(f"{path} is {kind}: only regular files are read")
        if st.st_size > limit:
            raise ReportError(f"{path}: {st.st_size} bytes, above the {limit}-byte bound for a "
                              f"{what}")
        os.set_blocking(fd, True)
        return open(fd, newline="", encoding="utf-8", errors="strict", closefd=True)
    except BaseException:
        os.close(fd)
        raise


class Rows(Sequence):
    """A CSV's rows, kept by column (array('d') while every value of a column is a number):
    a row is a dict built when it is used, so the memory is about that of the numbers, not of
    a dict per row (a 184 MB CSV took 3.5 GB as dicts)."""
    __slots__ = ("keys", "cols", "idx")

    def __init__(self, keys, cols, idx):
        self.keys, self.cols, self.idx = keys, cols, idx

    def __len__(self):
        return len(self.idx)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return Rows(self.keys, self.cols, self.idx[i])
        j = self.idx[i]
        return {k: c[j] for k, c in zip(self.keys, self.cols)}

    def column(self, key):
        """One column's values (None for a column the file does not have)."""
        if key not in self.keys:
            return [None] * len(self.idx)
        c = self.cols[self.keys.index(key)]
        return c if self.idx == range(len(c)) else [c[j] for j in self.idx]

    def __iter__(self):
        keys, cols = self.keys, self.cols
        for j in self.idx:
            yield {k: c[j] for k, c in zip(keys, cols)}


def _text_lines(f, path):
    """f's lines, refusing NUL bytes and lines above CSV_MAX_LINE (not a CSV hearsay wrote)."""
    for i, line in enumerate(f, 1):
        if "\0" in line or len(line) > CSV_MAX_LINE:
            raise ReportError(f"{path}:{i}: not a text file (NUL bytes, or a line above "
                              f"{CSV_MAX_LINE} characters)")
        yield line


_csv_cache = {}


def read_csv(path):
    """A CSV with a header line, as Rows (numbers as floats); [] when the file is missing.
    Read once per report (run_info and rank_split both want the rank CSVs; Rows are never
    changed)."""
    if not os.path.lexists(path):
        return []
    key = os.path.abspath(path)
    if key not in _csv_cache:
        if len(_csv_cache) >= 64:
            _csv_cache.clear()
        _csv_cache[key] = _read_csv(path)
    return _csv_cache[key]


def _read_csv(path):
    with open_regular(path, CSV_MAX_BYTES, "CSV file") as f:
        try:
            rd = csv.reader(_text_lines(f, path))
            keys = next(rd, None)
            if not keys:
                return []
            cols = [array("d") for _ in keys]
            n, width = 0, len(keys)
            # By chunks of rows, a column at a time (float() over a column runs in C; a
            # column with a value that is no number becomes a plain list).
            for chunk in iter(lambda: list(itertools.islice(rd, 16384)), []):
                chunk = [r for r in chunk if r]  # blank lines, as csv.DictReader skips them
                if not chunk:
                    continue
                longest = max(map(len, chunk))
                if longest > width:
                    raise ReportError(f"{path}:{rd.line_num}: a line of {longest} fields for a "
                                      f"header of {width}")
                if min(map(len, chunk)) < width:
                    chunk = [r + [None] * (width - len(r)) for r in chunk]
                for c, vals in enumerate(zip(*chunk)):
                    col = cols[c]
                    if isinstance(col, array):
                        try:
                            col.extend(array("d", map(float, vals)))
                            continue
                        except (TypeError, ValueError):
                            cols[c] = col = list(col)
                    col.extend(map(_num, vals))
                n += len(chunk)
            return Rows(keys, cols, range(n))
        except csv.Error as e:
            raise ReportError(f"{path}: not a CSV file ({e})") from None
        except UnicodeDecodeError:
            raise ReportError(f"{path}: not a text file (bytes that are not UTF-8)") from None


class write_file:
    """with write_file(path[, binary]) as f: the file is written to a fresh temporary in
    path's directory (tempfile.mkstemp: O_EXCL, a random name) and renamed over path when
    the block ends without an error, so a symlink planted at path is replaced, never written
    through; 0666 less the umask."""

    def __init__(self, path, binary=False):
        self.path, self.binary, self.tmp, self.f = path, binary, None, None

    def __enter__(self):
        import tempfile
        d = os.path.dirname(self.path) or "."
        fd, self.tmp = tempfile.mkstemp(dir=d, prefix="." + os.path.basename(self.path) + ".tmp-")
        mask = os.umask(0o022)
        os.umask(mask)
        os.fchmod(fd, 0o666 & ~mask)
        self.f = (os.fdopen(fd, "wb") if self.binary
                  else os.fdopen(fd, "w", newline="", encoding="utf-8"))
        return self.f

    def __exit__(self, exc_type, exc, tb):
        try:
            self.f.close()
            if exc_type is None:
                os.replace(self.tmp, self.path)
        finally:
            if os.path.lexists(self.tmp):
                os.unlink(self.tmp)
        return False


def savefig(fig, path, dpi):
    """fig.savefig(path) through write_file."""
    with write_file(path, binary=True) as f:
        fig.savefig(f, format="png", dpi=dpi)


def column(rows, key):
    """rows' values of key: straight from the column for Rows, else row by row."""
    return rows.column(key) if isinstance(rows, Rows) else [r.get(key) for r in rows]


def sample(rows, n=PLOT_MAX_POINTS):
    """About n of rows, evenly spaced (a slice: nothing copied for Rows): a long run's plot."""
    return rows[::max(1, len(rows) // n)]


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
            summ = read_json(summ_path)
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
    with write_file(path) as f:
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
    with write_file(os.path.join(out, "table.md")) as f:
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
            savefig(fig, os.path.join(out, f"loss_vs_time_{sc}.png"), 110)
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
        savefig(fig, os.path.join(out, "time_to_target.png"), 110)
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
    """A JSON object (a dict); None when the file is missing; ReportError when it is no
    JSON object or not a regular file within JSON_MAX_BYTES."""
    if not os.path.lexists(path):
        return None
    with open_regular(path, JSON_MAX_BYTES, "JSON file") as f:
        try:
            v = json.load(f)
        except (ValueError, UnicodeDecodeError) as e:
            raise ReportError(f"{path}: not JSON ({str(e).splitlines()[0]})") from None
    if not isinstance(v, dict):
        raise ReportError(f"{path}: not a JSON object")
    return v


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
    with write_file(os.path.join(out, "table.md")) as f:
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
        savefig(fig, os.path.join(out, "consensus.png"), 110)
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
    savefig(fig, os.path.join(out, "consensus_training.png"), 110)
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
    savefig(fig, os.path.join(out, "loss_vs_time.png"), 110)
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
    split = {k: 1e3 * sum(sum(column(x, k)) for x in rows) / n
             for k in ("compute_s", "comm_s", "wait_s")}
    clocks = sorted(x[-1]["wall_s"] for x in rows)
    split["clock_s"] = clocks[len(clocks) // 2]
    # spread of one iteration's duration (rank 0's loop clock; evaluations included)
    w0 = column(rows[0], "wall_s")
    dts = sorted(1e3 * (b - a) for a, b in zip(w0, w0[1:]))
    split["dt"] = [dts[int(q * (len(dts) - 1))] for q in (0.1, 0.5, 0.9)] if dts else None
    split["iterations"] = len(rows[0])
    return split


def validate(out, tol):
    """Real against virtual: OUT/pairs.tsv lines CONFIG, ALGO, REAL_DIR, SIM_DIR, LOAD, NOTE."""
    path = os.path.join(out, "pairs.tsv")
    if not os.path.exists(path):
        sys.exit(f"report: {path} not found (written by experiments/validate_sim.sh)")
    with open_regular(path, CSV_MAX_BYTES, "list of runs") as f:
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
                summ = read_json(os.path.join(d, "summary.json"))
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
    with write_file(os.path.join(out, "table.md")) as f:
        f.write(table)
    print(table)



# --- hearsay report DIR: any run or study directory -----------------------------------------

def is_run_dir(d):
    return os.path.isfile(os.path.join(d, "summary.json"))


def find_runs(top, depth=4):
    """Run directories below top (not top itself), at most `depth` levels down, sorted."""
    found = []
    for root, dirs, _files in os.walk(top):
        rel = os.path.relpath(root, top)
        level = 0 if rel == "." else rel.count(os.sep) + 1
        if root != top and is_run_dir(root):
            found.append(root)
            dirs[:] = []  # a run's own folders (ckpt/) are not runs
            continue
        if level >= depth:
            dirs[:] = []
        dirs.sort()
    return sorted(found)


def rank_files(d):
    """rank-R.csv of every rank, in rank order (empty list for a missing file)."""
    out, r = [], 0
    while os.path.exists(os.path.join(d, f"rank-{r}.csv")):
        out.append(read_csv(os.path.join(d, f"rank-{r}.csv")))
        r += 1
    return out


def finite(v):
    return isinstance(v, float) and math.isfinite(v)


def total(rows, key):
    """The column's total over the run (rank-R.csv's byte counts are per iteration)."""
    vals = [v for v in column(rows, key) if finite(v)]
    return sum(vals) if vals else None


def run_info(d, target=None):
    """One run's figures for tables: summary.json plus what the CSVs add."""
    summ = read_json(os.path.join(d, "summary.json")) or {}
    ranks = rank_files(d)
    ev = by_iteration(read_csv(os.path.join(d, "eval.csv")))
    info = {"dir": d, "summary": summ, "ranks": ranks, "eval": ev}
    info["sent"] = [total(x, "bytes_sent") for x in ranks]
    info["recv"] = [total(x, "bytes_recv") for x in ranks]
    t = target if target is not None else get(summ, "target_loss")
    info["target"] = t
    ttt = get(summ, "time_to_target_s")
    if target is not None:  # a target of our own: the first evaluation of the averaged model
        e = first_crossing(ev, "avg_test_loss", target)
        ttt = e["clock_s"] if e else None
    info["ttt"] = ttt if ttt is not None and math.isfinite(ttt) else None
    return info


def human_bytes(b):
    if b is None:
        return "—"
    for unit, f in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if b >= f:
            return f"{b / f:.3g} {unit}"
    return f"{b:.0f} B"


def transports_of(summ):
    """The transport(s) a run used: summary.json's "transports" (per pair kind) when present,
    else its "transport"."""
    t = summ.get("transports")
    if isinstance(t, dict):
        return ", ".join(f"{k}: {v}" for k, v in sorted(t.items()))
    if isinstance(t, list):
        return ", ".join(str(x) for x in t)
    return summ.get("transport") or "—"


def run_report(d, target, plt):
    """DIR/report.md and DIR/report-*.png of one run."""
    info = run_info(d, target)
    s = info["summary"]
    name = os.path.basename(os.path.normpath(d))
    clock = s.get("clock", "wall")
    unit = "virtual s" if clock == "virtual" else "s"
    lines = [f"# {name}", "",
             f"{s.get('algo', '?')} on {s.get('ranks', '?')} ranks, {s.get('model', '?')} "
             f"({s.get('num_params', '?')} parameters) on {s.get('data', '?')}; clock: {clock}; "
             f"transport: {transports_of(s)}", "",
             "| figure | value |", "|---|---|"]
    for key in ("iterations", "epochs", "wall_s", "samples_per_s", "final_test_loss",
                "final_test_acc", "final_train_loss", "target_loss", "time_to_target_s",
                "consensus_distance", "consensus_distance_rel", "ps_weight_min", "ps_weight_max",
                "ps_weight_sum", "ps_weight_lost", "staleness_p50", "staleness_p99",
                "staleness_max"):
        v = s.get(key)
        if v is None:
            continue
        lines.append(f"| {key} | {v:.6g} |" if isinstance(v, (int, float)) else
                     f"| {key} | {v} |")
    if target is not None:
        lines.append(f"| time to test loss {target:g} ({unit}) | {fmt(info['ttt'], 3)} |")
    failed = s.get("failed_ranks") or []
    if failed:
        lines.append(f"| failed ranks | {', '.join(str(f.get('rank')) for f in failed)} |")
    per = s.get("per_rank") or []
    if per:
        lines += ["", f"Per rank (times in {unit} over the run; bytes from rank-R.csv):", "",
                  "| rank | iterations | compute | comm | wait | straggle | sent | received | "
                  "push-sum weight | staleness p50 / p99 / max | test loss |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for p in per:
            q = p.get("rank", 0)
            sent = info["sent"][q] if q < len(info["sent"]) else None
            recv = info["recv"][q] if q < len(info["recv"]) else None

            def g(k, nd=3):
                v = p.get(k)
                return fmt(float(v), nd) if isinstance(v, (int, float)) else "—"
            lines.append(f"| {q} | {g('iterations', 0)} | {g('compute_s')} | {g('comm_s')} | "
                         f"{g('wait_s')} | {g('straggle_s')} | {human_bytes(sent)} | "
                         f"{human_bytes(recv)} | {g('ps_weight', 4)} | {g('staleness_p50', 1)} / "
                         f"{g('staleness_p99', 1)} / {g('staleness_max', 0)} | "
                         f"{g('test_loss', 4)} |")
    pngs = []
    if plt is not None:
        pngs = run_plots(d, info, plt)
        lines += ["", "Plots: " + ", ".join(pngs)]
    text = "\n".join(lines) + "\n"
    with write_file(os.path.join(d, "report.md")) as f:
        f.write(text)
    return text, pngs


def run_plots(d, info, plt):
    s, ranks, ev = info["summary"], info["ranks"], info["eval"]
    xlabel = "virtual time (s)" if s.get("clock") == "virtual" else "time (s)"
    revs = []
    r = 0
    while os.path.exists(os.path.join(d, f"rank-{r}-eval.csv")):
        revs.append(by_iteration(read_csv(os.path.join(d, f"rank-{r}-eval.csv"))))
        r += 1
    made = []

    def save(fig, name):
        fig.tight_layout()
        savefig(fig, os.path.join(d, name), 100)
        plt.close(fig)
        made.append(name)

    for what, avg_key, rank_key, ylabel, log in (
            ("loss", "avg_test_loss", "test_loss", "test loss", True),
            ("accuracy", "avg_test_acc", "test_acc", "test accuracy", False)):
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
        for ax, xkey, xl in ((axes[0], "clock_s", xlabel), (axes[1], "iteration", "iteration")):
            pts = [(e[xkey], e[avg_key]) for e in sample(ev) if finite(e.get(avg_key))]
            if pts:
                ax.plot(*zip(*pts), marker="o", ms=3, lw=2, color="k", label="averaged model")
            for q, rev in enumerate(revs):
                pts = [(e[xkey], e[rank_key]) for e in sample(rev) if finite(e.get(rank_key))]
                if pts:
                    ax.plot(*zip(*pts), lw=1, alpha=0.7, label=f"rank {q}")
            if log and info["target"] is not None and math.isfinite(info["target"]):
                ax.axhline(info["target"], color="gray", ls="--", lw=1, label="target")
            if log:
                ax.set_yscale("log")
            ax.set_xlabel(xl)
            ax.set_ylabel(ylabel)
        axes[0].legend(fontsize=7)
        fig.suptitle(f"{s.get('algo', '')}: {ylabel} versus time and iterations")
        save(fig, f"report-{what}.png")
    cons = read_csv(os.path.join(d, "consensus.csv"))
    cpts = [(c["iteration"], c["consensus_distance"]) for c in sample(cons)
            if finite(c.get("consensus_distance")) and c["consensus_distance"] > 0]
    if not cpts:
        cpts = [(e["iteration"], e["consensus"]) for e in ev
                if finite(e.get("consensus")) and e["consensus"] > 0]
    if cpts:
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot(*zip(*cpts), marker="." if len(cpts) < 200 else None)
        ax.set_yscale("log")
        ax.set_xlabel("iteration")
        ax.set_ylabel("consensus distance ‖x_i − x̄‖")
        save(fig, "report-consensus.png")
    for what, key, ylabel in (("ps_weight", "ps_weight", "push-sum weight"),
                              ("staleness", "staleness_mean",
                               "staleness of the messages applied (iterations, mean)")):
        series = [[(row["iteration"], row[key]) for row in sample(x) if finite(row.get(key))]
                  for x in ranks]
        if not any(series):
            continue
        fig, ax = plt.subplots(figsize=(6, 4))
        for q, pts in enumerate(series):
            if pts:
                ax.plot(*zip(*pts), lw=1, label=f"rank {q}")
        ax.set_xlabel("iteration")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7)
        save(fig, f"report-{what}.png")
    per = [p for p in s.get("per_rank") or [] if p.get("finished")]
    if per:
        fig, ax = plt.subplots(figsize=(6, 4))
        bottom = [0.0] * len(per)
        for key in ("compute_s", "comm_s", "wait_s", "straggle_s"):
            vals = [float(p.get(key)) if isinstance(p.get(key), (int, float)) else 0.0
                    for p in per]
            ax.bar([str(p["rank"]) for p in per], vals, bottom=bottom, label=key[:-2])
            bottom = [b + v for b, v in zip(bottom, vals)]
        ax.set_xlabel("rank")
        ax.set_ylabel("virtual seconds" if s.get("clock") == "virtual" else "seconds")
        ax.set_title("time split per rank")
        ax.legend(fontsize=7)
        save(fig, "report-time_split.png")
    return made


def study_report(top, target, plt, each):
    runs = find_runs(top)
    infos = [run_info(d, target) for d in runs]
    rows = []
    for i in infos:
        s = i["summary"]
        sent = [b for b in i["sent"] if b is not None]
        rows.append({"run": os.path.relpath(i["dir"], top), "algo": s.get("algo"),
                     "clock": s.get("clock", "wall"), "ranks": s.get("ranks"),
                     "transport": transports_of(s), "iterations": s.get("iterations"),
                     "wall_s": get(s, "wall_s"), "time_to_target_s": i["ttt"],
                     "target_loss": i["target"], "final_test_loss": get(s, "final_test_loss"),
                     "final_test_acc": get(s, "final_test_acc"),
                     "bytes_sent_per_rank": sum(sent) / len(sent) if sent else None,
                     "consensus_distance": get(s, "consensus_distance"),
                     "staleness_p99": get(s, "staleness_p99")})
    write_csv(os.path.join(top, "runs.csv"), rows, list(rows[0].keys()))
    lines = [f"# {os.path.basename(os.path.normpath(top))}: {len(rows)} runs", "",
             "| run | algorithm | clock | ranks | transport | iterations | time | time to "
             "target | target | final test loss | final test acc | sent per rank |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        acc = r["final_test_acc"]
        lines.append(f"| {r['run']} | {r['algo']} | {r['clock']} | {r['ranks']} | "
                     f"{r['transport']} | {r['iterations']} | {fmt(r['wall_s'])} | "
                     f"{fmt(r['time_to_target_s'])} | {fmt(r['target_loss'], 3)} | "
                     f"{fmt(r['final_test_loss'], 4)} | "
                     f"{fmt(100 * acc if acc is not None else None, 1)} % | "
                     f"{human_bytes(r['bytes_sent_per_rank'])} |")
    pngs = []
    if plt is not None:
        groups = {}
        for i in infos:
            groups.setdefault(os.path.relpath(os.path.dirname(i["dir"]), top), []).append(i)
        for g, members in sorted(groups.items()):
            suffix = "" if g == "." else "_" + re.sub(r"[^A-Za-z0-9.-]+", "_", g)
            # one colour per algorithm; its runs (real first, then virtual) solid, dashed, ...
            colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
            algos = sorted({i["summary"].get("algo", "") for i in members})
            styles = {}
            for i in sorted(members, key=lambda i: (i["summary"].get("clock") == "virtual",
                                                    i["dir"])):
                a = i["summary"].get("algo", "")
                k = sum(1 for (b, _) in styles if b == a)
                styles[(a, i["dir"])] = (colors[algos.index(a) % len(colors)],
                                         ("-", "--", ":", "-.")[k % 4])
            for xkey, xname in (("clock_s", "time"), ("iteration", "iterations")):
                fig, ax = plt.subplots(figsize=(7.5, 4.5))
                for i in members:
                    pts = [(e[xkey], e["avg_test_loss"]) for e in i["eval"]
                           if finite(e.get("avg_test_loss"))]
                    if pts:
                        c, ls = styles[(i["summary"].get("algo", ""), i["dir"])]
                        ax.plot(*zip(*pts), marker="o", ms=3, color=c, ls=ls,
                                label=os.path.basename(i["dir"]))
                tg = {i["target"] for i in members if i["target"] is not None and
                      math.isfinite(i["target"])}
                if len(tg) == 1:
                    ax.axhline(tg.pop(), color="gray", ls=":", lw=1, label="target")
                ax.set_yscale("log")
                ax.set_xlabel("time (s; virtual for the virtual-time runs)" if xkey == "clock_s"
                              else "iteration")
                ax.set_ylabel("test loss of the averaged model")
                ax.set_title(g if g != "." else os.path.basename(os.path.normpath(top)))
                ax.legend(fontsize=7, ncol=2)
                fig.tight_layout()
                name = f"report-loss_vs_{xname}{suffix}.png"
                savefig(fig, os.path.join(top, name), 100)
                plt.close(fig)
                pngs.append(name)
        lines += ["", "Plots: " + ", ".join(pngs)]
    if each:
        for i in infos:
            run_report(i["dir"], target, plt)
        lines += ["", "Each run's own report: RUN/report.md and RUN/report-*.png."]
    else:
        lines += ["", "One run's plots: hearsay report RUN (or --runs here for every run)."]
    text = "\n".join(lines) + "\n"
    with write_file(os.path.join(top, "report.md")) as f:
        f.write(text)
    return text, pngs


def report_dir(d, target, each):
    """hearsay report DIR. Exit 2 when DIR is not a run or study directory, 1 without
    matplotlib (the tables are written all the same)."""
    if not os.path.isdir(d):
        sys.stderr.write(f"hearsay report: {d} is not a directory\n")
        return 2
    single = is_run_dir(d)
    if not single and not find_runs(d):
        sys.stderr.write(
            f"hearsay report: {d} is neither a run directory (no summary.json in it) nor a "
            f"study directory (no run directory with a summary.json below it, 4 levels at "
            f"most)\n")
        return 2
    plt = None
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        pass
    if single:
        text, pngs = run_report(d, target, plt)
    else:
        text, pngs = study_report(d, target, plt, each)
    print(text, end="")
    if plt is None:
        sys.stderr.write(f"hearsay report: {sys.executable} has no matplotlib (Debian: apt-get "
                         "install python3-matplotlib): tables written, no plots\n")
        return 1
    print(f"hearsay report: {os.path.join(d, 'report.md')} and {len(pngs)} PNG plot(s) written")
    return 0



# --- experiments/ethernet.sh ------------------------------------------------------------------

def rate_key(rate):
    m = re.fullmatch(r"([0-9.]+)(k|m|g)bit", rate)
    return -float(m.group(1)) * {"k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)] if m else 0


def ethernet(out, target):
    """OUT/runs.tsv lines RATE, ALGO, REAL_DIR, SIM_DIR, LOAD, WIRE_BYTES_PER_HOST (comma list),
    RANKS_PER_HOST, SIM_NIC_RATE: one table per link speed, real beside virtual."""
    path = os.path.join(out, "runs.tsv")
    if not os.path.exists(path):
        sys.exit(f"report: {path} not found (written by experiments/ethernet.sh)")
    with open_regular(path, CSV_MAX_BYTES, "list of runs") as f:
        lines_in = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    rows = []
    for p in lines_in:
        rate, algo, rd, sd, load, wire, rph = p[:7]
        rph = int(rph)
        gd = p[8] if len(p) > 8 else ""
        res = {}
        for kind, d in (("real", rd), ("sim", sd), ("simr", gd)):
            if not d or not is_run_dir(os.path.join(out, d)):
                res[kind] = None
                continue
            i = run_info(os.path.join(out, d), target)
            sent = [b or 0 for b in i["sent"]]
            nh = max(1, len(sent) // rph)
            sp = rank_split(os.path.join(out, d))
            res[kind] = {"ttt": i["ttt"], "loss": get(i["summary"], "final_test_loss"),
                         "msg_per_host": sum(sent) / nh if sent else None,
                         "its": sp["iterations"] / sp["clock_s"] if sp and sp["clock_s"] > 0
                         else None, "split": sp, "transport": transports_of(i["summary"]),
                         "iterations": get(i["summary"], "iterations")}
        w = [float(x) for x in wire.split(",") if x]
        rows.append({"rate": rate, "algo": algo, "load": load, "real": res["real"],
                     "sim": res["sim"], "simr": res["simr"],
                     "wire_per_host": sum(w) / len(w) if w else None,
                     "simrate": p[7] if len(p) > 7 else "",
                     "goodput": p[9] if len(p) > 9 else "",
                     "step_ms": p[10] if len(p) > 10 else ""})

    def ratio(a, b):
        return f"{b / a:.2f}" if a and b is not None and a > 0 else "—"

    def val(r, kind, k):
        return (r[kind] or {}).get(k) if r[kind] else None

    def split(sp):
        return f"{sp['compute_s']:.1f}+{sp['comm_s']:.1f}+{sp['wait_s']:.1f}" if sp else "—"

    text = [f"Time to test loss {target} of the averaged model, real (emulated hosts: network "
            "namespaces, tc tbf, hearsay's sender-side latency) beside virtual (hearsay sim, "
            "same configuration, --sim-nic at TCP goodput, --sim-compute measured); ratio = "
            "virtual / real; virtual (r): the same with the real run's inputs, the link's goodput "
            "measured before the runs (one kernel TCP stream between two hosts) and the real "
            "run's mean step time (--sim-compute fixed). Bytes per host: real = frames its "
            "veth sent (Ethernet/IP/TCP headers, inter-host traffic only, the evaluations' "
            "gathers to rank 0 included); messages = hearsay's bytes_sent summed over the host's "
            "ranks (intra-host messages included).", ""]
    csv_rows = []
    for rate in sorted({r["rate"] for r in rows}, key=rate_key):
        sel = [r for r in rows if r["rate"] == rate]
        simrate, gp = sel[0]["simrate"], sel[0]["goodput"]
        text += [f"### {rate} (virtual: --sim-nic {simrate}" +
                 (f"; virtual (r): measured goodput {gp}/s)" if gp else ")"), "",
                 "| algorithm | time to target: real (s) | virtual (s) | ratio | virtual (r) | "
                 "ratio | it/s: real | virtual | virtual (r) | ms/it compute+comm+wait: real | "
                 "virtual (r) | bytes per host: real wire | messages, real | messages, virtual | "
                 "final test loss: real | virtual | transport | load (1 min) |",
                 "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in sorted(sel, key=lambda r: ALGO_ORDER.index(r["algo"])
                        if r["algo"] in ALGO_ORDER else 99):
            rt, st = val(r, "real", "ttt"), val(r, "sim", "ttt")
            ri, si = val(r, "real", "its"), val(r, "sim", "its")
            gt, gi = val(r, "simr", "ttt"), val(r, "simr", "its")
            text.append(
                f"| {r['algo']} | {fmt(rt)} | {fmt(st)} | {ratio(rt, st)} | {fmt(gt)} | "
                f"{ratio(rt, gt)} | {fmt(ri, 1)} | {fmt(si, 1)} | {fmt(gi, 1)} | "
                f"{split(val(r, 'real', 'split'))} | "
                f"{split(val(r, 'simr', 'split'))} | {human_bytes(r['wire_per_host'])} | "
                f"{human_bytes(val(r, 'real', 'msg_per_host'))} | "
                f"{human_bytes(val(r, 'sim', 'msg_per_host'))} | "
                f"{fmt(val(r, 'real', 'loss'), 3)} | {fmt(val(r, 'sim', 'loss'), 3)} | "
                f"{val(r, 'real', 'transport') or '—'} | {r['load']} |")
            csv_rows.append({"rate": rate, "algo": r["algo"], "real_time_to_target_s": rt,
                             "sim_time_to_target_s": st, "simr_time_to_target_s": gt,
                             "real_it_per_s": ri, "sim_it_per_s": si, "simr_it_per_s": gi,
                             "measured_goodput": r["goodput"], "real_step_ms": r["step_ms"], "wire_bytes_per_host": r["wire_per_host"],
                             "msg_bytes_per_host_real": val(r, "real", "msg_per_host"),
                             "msg_bytes_per_host_sim": val(r, "sim", "msg_per_host"),
                             "final_test_loss_real": val(r, "real", "loss"),
                             "final_test_loss_sim": val(r, "sim", "loss"),
                             "iterations_real": val(r, "real", "iterations"),
                             "transport": val(r, "real", "transport"), "load": r["load"]})
        text.append("")
    if csv_rows:
        write_csv(os.path.join(out, "results.csv"), csv_rows, list(csv_rows[0].keys()))
    table = "\n".join(text) + "\n"
    with write_file(os.path.join(out, "table.md")) as f:
        f.write(table)
    print(table)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("study", choices=["stragglers", "topologies", "validate", "ethernet", "dir"])
    ap.add_argument("out")
    ap.add_argument("--target-loss", type=float)
    ap.add_argument("--tolerance", type=float, default=0.15)
    ap.add_argument("--eps", type=float, default=1e-3)
    ap.add_argument("--runs", action="store_true", help="dir: a study directory's runs too")
    ap.add_argument("--eval-every", type=float, default=0.25, help="topologies: epochs between "
                    "evaluations (differences in iterations to the target below it are ties)")
    a = ap.parse_args()
    if a.study == "dir":
        # Garbage in a run directory is one line naming the file, never a traceback.
        try:
            code = report_dir(a.out, a.target_loss, a.runs)
        except ReportError as e:
            sys.stderr.write(f"hearsay report: {e}\n")
            code = 2
        except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError,
                ZeroDivisionError, OverflowError) as e:
            sys.stderr.write(f"hearsay report: {a.out}: a file of the run is not what hearsay "
                             f"writes ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})\n")
            code = 2
        except MemoryError:
            sys.stderr.write(f"hearsay report: {a.out}: out of memory\n")
            code = 2
        sys.exit(code)
    if not os.path.isdir(a.out):
        sys.exit(f"report: {a.out} is not a directory")
    if a.study != "validate" and a.target_loss is None:
        ap.error("--target-loss is required")
    try:  # a file the study cannot use: one line naming it (the traceback is not news)
        if a.study == "validate":
            validate(a.out, a.tolerance)
        elif a.study == "ethernet":
            ethernet(a.out, a.target_loss)
        elif a.study == "stragglers":
            stragglers(a.out, a.target_loss)
        else:
            topologies(a.out, a.target_loss, a.eps, a.eval_every)
    except ReportError as e:
        sys.exit(f"report: {e}")


if __name__ == "__main__":
    main()
