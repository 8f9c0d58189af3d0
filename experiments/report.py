#!/usr/bin/python3
"""Summarise a study's runs: results.csv, table.md and PNG plots.

    report.py stragglers OUT [--target-loss X]   runs OUT/ALGO-xK/ (one straggler slowed K times), OUT/ALGO-pauses/
    report.py topologies OUT [--target-loss X] [--eps E]   runs OUT/GRAPH/, pure averaging
                                                 runs OUT/averaging/GRAPH/
    report.py validate OUT [--tolerance 0.15]    pairs of runs listed in OUT/pairs.tsv
                                                 (experiments/validate_sim.sh)
    report.py ethernet OUT --target-loss X [--tolerance 0.25]
                                                 OUT/runs.tsv (experiments/ethernet.sh)
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


def health(summ):
    """summary.json's health: "ok", "warn", "failed"; "failed" without a summary (the run
    never wrote one); "ok" for a run older than the field."""
    if not summ:
        return "failed"
    return summ.get("health", "ok")


def health_note(summ):
    """The first of summary.json's health_reasons ('' when none)."""
    why = (summ or {}).get("health_reasons") or []
    return why[0] if why else ""


def ttt_avg(summ, ev, target):
    """The averaged model's time to `target`: the first row of eval.csv (in iteration order, the
    final row included) whose avg_test_loss is at most the target, at its clock_s (the latest
    training clock among the ranks there); summary.json's time_to_target_avg_s is the same
    figure for its own target. None when never reached or failed."""
    if summ and health(summ) == "failed":
        return None
    t = get(summ, "time_to_target_avg_s")
    if t is not None and target is not None and get(summ, "target_loss") == target:
        return t if math.isfinite(t) else None
    if target is None:
        return t if t is not None and math.isfinite(t) else None
    e = first_crossing(ev, "avg_test_loss", target)
    return e["clock_s"] if e else None


TTT_WORDS = ("the averaged model's time to target: eval.csv's first evaluation at the target, "
             "on the latest rank's training clock there (summary.json time_to_target_avg_s)")


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


FIELDS = ["time_to_target_avg_s", "time_to_target_s", "final_test_loss", "final_test_acc",
          "wall_s", "iterations", "ps_weight_sum", "consensus_distance"]


def clock_words(runs):
    """What the times are: the runs' summary.json says "clock": "virtual" for hearsay sim."""
    clocks = {(r["summary"] or {}).get("clock", "wall") for r in runs if r["summary"]}
    ranks = {(r["summary"] or {}).get("ranks") for r in runs if r["summary"]}
    n = f"{ranks.pop()} workers, " if len(ranks) == 1 else ""
    if clocks == {"virtual"}:
        return n + "virtual seconds: hearsay sim"
    return n + "seconds of wall-clock time, real processes"


def time_unit(runs):
    """The unit of the runs' times for axis labels: "virtual s" when every one ran on hearsay
    sim's virtual clock (issue 30: they were labelled "(s)"), else "s"."""
    clocks = {(r.get("summary") or {}).get("clock", "wall") for r in runs}
    return "virtual s" if clocks == {"virtual"} else "s"


ALGO_ORDER = ["allreduce", "localsgd", "sgp", "sgp-d2", "sgp-d10", "sgp-d30", "sgp-async",
              "osgp", "osgp-d10", "osgp-d30", "dpsgd", "adpsgd", "easgd", "eamsgd", "lsgd"]


def scenario_key(sc):
    """x1, x2, .. by factor, then the transient pauses."""
    return (1, 0.0) if sc == "pauses" else (0, float(sc[1:]))


def scenario_title(sc):
    return "transient pauses" if sc == "pauses" else f"×{float(sc[1:]):g}"


# --- seeds, intervals and health (issue 25) -------------------------------------------------

# Student's t, two-sided 95 %, by degrees of freedom (beyond 30: 1.96 is within 2 %).
T95 = [float("nan"), 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
       2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074,
       2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def mean_ci(xs):
    """(mean, half-width of its 95 % interval) of the values; the half-width is None for fewer
    than 2 values, the mean None for none."""
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    if not xs:
        return None, None
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return m, None
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))
    return m, T95[min(len(xs) - 1, 30)] * sd / math.sqrt(len(xs))


def fmt_ci(m, h, nd=3):
    if m is None:
        return "—"
    if h is None:
        return f"{m:.{nd}g}"
    if h <= 1e-9 * max(1.0, abs(m)):  # every seed at the same evaluation point
        return f"{m:.{nd}g} ± 0"
    return f"{m:.{nd}g} ± {h:.2g}"


def run_health(summ, ev=None):
    """(status, reasons) of one run: "failed" when it left no summary, its summary says so
    (summary.json "health"), or its final loss or averaged model is not finite; "warn" when the
    summary says so; else "ok"."""
    if not summ:
        return "failed", ["no summary.json (the run did not finish)"]
    reasons = [str(x) for x in summ.get("health_reasons") or []]
    h = summ.get("health")
    loss = summ.get("final_test_loss")
    if not isinstance(loss, (int, float)) or not math.isfinite(loss):
        return "failed", reasons + [f"final test loss {loss}"]
    if ev and any(isinstance(e.get("avg_test_loss"), float) and
                  not math.isfinite(e["avg_test_loss"]) for e in ev):
        return "failed", reasons + ["the averaged model's loss is not finite"]
    if h in ("failed", "warn"):
        return h, reasons
    return "ok", reasons


def avg_to_target(ev, target):
    """(time, iteration) at which the averaged model first reaches the target test loss
    (eval.csv, on the common clock: what `hearsay report` and the plots use), else (None,
    None)."""
    e = first_crossing(by_iteration(ev), "avg_test_loss", target)
    return (e["clock_s"], e["iteration"]) if e else (None, None)


def decide(lo, hi, limit):
    """A verdict on "value <= limit" from an interval [lo, hi]: yes, no, or undecided."""
    if hi <= limit:
        return "yes"
    if lo > limit:
        return "no"
    return "undecided"


def seed_runs(top, pattern):
    """Runs TOP/SCENARIO/NAME-sSEED (the layout since issue 25): a list
    of dicts with name, scenario, seed, dir, summary, eval, health."""
    runs = []
    for sc in sorted(os.listdir(top)):
        sd = os.path.join(top, sc)
        if not os.path.isdir(sd) or not re.fullmatch(pattern, sc):
            continue
        for name in sorted(os.listdir(sd)):
            d = os.path.join(sd, name)
            m = re.fullmatch(r"(.+)-s([0-9]+)", name)
            if not m or not os.path.isdir(d):
                continue
            summ = read_json(os.path.join(d, "summary.json"))
            ev = read_csv(os.path.join(d, "eval.csv"))
            st, why = run_health(summ, ev)
            runs.append({"name": m.group(1), "scenario": sc, "seed": int(m.group(2)), "dir": d,
                         "summary": summ, "eval": ev, "health": st, "why": why})
    return runs


def band_curve(evs, key="avg_test_loss", xkey="clock_s", points=60):
    """Mean and min..max of several runs' curves on a common grid of x (the runs' eval.csv
    rows, interpolated linearly in x; the grid ends where the shortest run ends)."""
    curves = []
    for ev in evs:
        pts = sorted((e[xkey], e[key]) for e in ev if finite(e.get(xkey)) and finite(e.get(key)))
        if len(pts) >= 2:
            curves.append(pts)
    if not curves:
        return None
    lo = max(c[0][0] for c in curves)
    hi = min(c[-1][0] for c in curves)
    if not hi > lo:
        return None
    xs = [lo + (hi - lo) * i / (points - 1) for i in range(points)]

    def at(c, x):
        for (x0, y0), (x1, y1) in zip(c, c[1:]):
            if x0 <= x <= x1:
                return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
        return c[-1][1]
    ys = [[at(c, x) for c in curves] for x in xs]
    return (xs, [sum(v) / len(v) for v in ys], [min(v) for v in ys], [max(v) for v in ys],
            len(curves))


PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "h", "<"]


NICE = [0.01, 0.02, 0.03, 0.05, 0.07, 0.1, 0.15, 0.2, 0.3, 0.5, 0.7, 1, 1.5, 2, 3, 5, 7, 10, 20,
        30, 50, 100]


def log_ticks(ax, lo, hi):
    """A log y axis over [lo, hi] with plain-number ticks (0.3, 0.5, 0.7, 1, 2 ..), no minor
    labels."""
    from matplotlib.ticker import NullFormatter, NullLocator
    ax.set_ylim(lo, hi)
    ticks = [v for v in NICE if lo <= v <= hi]
    if len(ticks) > 7:
        ticks = ticks[::2]
    ax.set_yticks(ticks)
    ax.set_yticklabels([f"{v:g}" for v in ticks])
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_minor_formatter(NullFormatter())


def clock_label(runs):
    clocks = {(r["summary"] or {}).get("clock", "wall") for r in runs if r["summary"]}
    return "virtual time (s, hearsay sim)" if clocks == {"virtual"} else "wall-clock time (s)"


def stragglers(out, target):
    runs = seed_runs(out, r"x[0-9.]+|pauses")
    if not runs:
        sys.exit(f"report: no runs found in {out} (expected {out}/SCENARIO/ALGO-sSEED)")
    for r in runs:
        r["ttt"], r["itt"] = avg_to_target(r["eval"], target) if r["health"] != "failed" \
            else (None, None)
    rows = []
    for r in runs:
        s = r["summary"] or {}
        row = {"algo": r["name"], "scenario": r["scenario"], "seed": r["seed"],
               "health": r["health"], "health_reasons": "; ".join(r["why"]),
               "time_to_target_avg_s": r["ttt"], "iterations_to_target_avg": r["itt"]}
        for f in FIELDS + ["ps_weight_min", "ps_weight_max", "staleness_min", "staleness_max"]:
            row[f] = get(s, f)
        rows.append(row)
    write_csv(os.path.join(out, "results.csv"), rows,
              ["algo", "scenario", "seed", "health", "health_reasons", "time_to_target_avg_s",
               "iterations_to_target_avg"] + FIELDS +
              ["ps_weight_min", "ps_weight_max", "staleness_min", "staleness_max"])
    algos = sorted({r["name"] for r in runs},
                   key=lambda a: (ALGO_ORDER.index(a) if a in ALGO_ORDER else 99, a))
    scs = sorted({r["scenario"] for r in runs}, key=scenario_key)
    seeds = sorted({r["seed"] for r in runs})
    cell = {}
    for r in runs:
        cell.setdefault((r["name"], r["scenario"]), []).append(r)

    def ok_runs(a, sc):
        return [r for r in cell.get((a, sc), []) if r["health"] != "failed"]

    def times(a, sc):
        return [r["ttt"] for r in ok_runs(a, sc)]

    nseed = len(seeds)
    clock = clock_words([r for r in runs if r["summary"]])
    lines = [f"Time to test loss {target} of **the averaged model** (the mean of every rank's "
             f"model; {clock}; {TTT_WORDS}; the same figure `hearsay report` and the plots "
             f"show), by straggler: ×k = one worker's steps k "
             f"times slower, transient pauses = every worker pauses with probability 0.05 per "
             f"iteration for an exponential time of mean 10 steps. "
             + (f"Mean ± the 95 % interval's half-width over {nseed} seeds "
                f"({seeds[0]}..{seeds[-1]}; Student's t)." if nseed > 1 else
                "One seed: no interval, hence no verdicts (--seeds K)."), "",
             "| algorithm | " + " | ".join(scenario_title(sc) for sc in scs) +
             " | final test acc (×1) | push-sum weight min–max (all runs) |",
             "|---|" + "---|" * (len(scs) + 2)]
    failed = []
    for a in algos:
        cells = []
        for sc in scs:
            rs = cell.get((a, sc), [])
            bad = [r for r in rs if r["health"] == "failed"]
            failed += bad
            ts = times(a, sc)
            m, h = mean_ci(ts)
            reached = sum(1 for t in ts if t is not None)
            txt = fmt_ci(m, h)
            if reached < len(rs):
                txt += f" ({reached}/{len(rs)} reached)"
            if bad:
                txt += f" **FAILED {len(bad)}/{len(rs)}**"
            cells.append(txt)
        accs = [get(r["summary"], "final_test_acc") for r in ok_runs(a, scs[0])]
        am, ah = mean_ci([100 * x for x in accs if x is not None])
        ws = [r["summary"] for sc in scs for r in ok_runs(a, sc)]
        wmin = [get(s, "ps_weight_min") for s in ws if get(s, "ps_weight_min") is not None]
        wmax = [get(s, "ps_weight_max") for s in ws if get(s, "ps_weight_max") is not None]
        wr = f"{min(wmin):.3g}–{max(wmax):.3g}" if wmin and wmax else "—"
        lines.append(f"| {a} | " + " | ".join(cells) + f" | {fmt_ci(am, ah)} % | {wr} |")
    if failed:
        lines += ["", "FAILED runs (excluded from every mean and verdict):"] + \
            [f"- {os.path.relpath(r['dir'], out)}: {'; '.join(r['why']) or 'failed'}"
             for r in failed]
    # Robustness: under a scenario, an algorithm reaches the target within 1.3x its own time
    # without stragglers and within 0.4x all-reduce SGD's time under the same scenario. Per
    # seed (the same seed's runs form a pair), then the interval of the ratio's mean decides.
    crit = []
    by_seed = {(r["name"], r["scenario"], r["seed"]): r for r in runs if r["health"] != "failed"}

    def ratios(a, sc, b, sc_b):
        out_ = []
        for sd in seeds:
            x, y = by_seed.get((a, sc, sd)), by_seed.get((b, sc_b, sd))
            if x and y and x["ttt"] is not None and y["ttt"] is not None and y["ttt"] > 0:
                out_.append(x["ttt"] / y["ttt"])
        return out_
    for sc in [s for s in scs if s != "x1"]:
        if "x1" not in scs:
            break
        for a in [x for x in algos if x != "allreduce"]:
            own, vs = ratios(a, sc, a, "x1"), ratios(a, sc, "allreduce", sc)
            if not own:
                continue
            om, oh = mean_ci(own)
            vm, vh = mean_ci(vs)
            if nseed < 2 or oh is None or vh is None:
                verdict = "— (one seed)"
            else:
                v1 = decide(om - oh, om + oh, 1.3)
                v2 = decide(vm - vh, vm + vh, 0.4)
                verdict = "yes" if v1 == v2 == "yes" else \
                    "no" if "no" in (v1, v2) else "undecided"
            crit.append(f"| {a} | {scenario_title(sc)} | {fmt_ci(om, oh, 3)} | "
                        f"{fmt_ci(vm, vh, 3)} | {verdict} |")
    if crit:
        lines += ["", "Robustness, on the averaged model (target: ≤ 1.3 of its own time without "
                  "stragglers, and ≤ 0.4 of all-reduce SGD's under the same stragglers; ratios "
                  "per seed, then their mean and 95 % interval; yes or no only when the whole "
                  "interval is on one side of both limits, else undecided):", "",
                  "| algorithm | stragglers | / own ×1 | / all-reduce | both met |",
                  "|---|---|---|---|---|"] + crit
    # Without stragglers: which algorithms the intervals separate from all-reduce SGD.
    if "x1" in scs and "allreduce" in algos and nseed > 1:
        sep = []
        for a in [x for x in algos if x != "allreduce"]:
            rr = ratios(a, "x1", "allreduce", "x1")
            m, h = mean_ci(rr)
            if m is None or h is None:
                continue
            word = "faster" if m + h < 1 else "slower" if m - h > 1 else "not separated"
            sep.append(f"| {a} | {fmt_ci(m, h, 3)} | {word} |")
        if sep:
            lines += ["", "Without stragglers (×1), time to target against all-reduce SGD's "
                      "(per seed, mean and 95 % interval):", "",
                      "| algorithm | / all-reduce | verdict |", "|---|---|---|"] + sep
    table = "\n".join(lines) + "\n"
    with write_file(os.path.join(out, "table.md")) as f:
        f.write(table)
    print(table)
    if plots_available():
        import matplotlib.pyplot as plt
        study_panels(out, runs, target, plt, "loss_vs_time.png", scenario_title,
                     order=lambda sc: scenario_key(sc))
        fig, ax = plt.subplots(figsize=(7, 4.5))
        ks = [sc for sc in scs if sc != "pauses"]
        for i, a in enumerate(algos):
            pts = []
            for sc in ks:
                m, h = mean_ci(times(a, sc))
                if m is not None:
                    pts.append((float(sc[1:]), m, h or 0.0))
            if pts:
                ax.errorbar([p[0] for p in pts], [p[1] for p in pts],
                            yerr=[p[2] for p in pts], marker=MARKERS[i % len(MARKERS)],
                            color=PALETTE[i % len(PALETTE)], capsize=3, label=a)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ys = [m for a in algos for sc in ks for m in [mean_ci(times(a, sc))[0]] if m]
        if ys:
            log_ticks(ax, min(ys) / 1.5, max(ys) * 1.5)
        ax.set_xticks([float(sc[1:]) for sc in ks])
        ax.set_xticklabels([scenario_title(sc) for sc in ks])
        ax.set_xlabel("straggler slowdown")
        ax.set_ylabel(f"time to test loss {target}, averaged model\n({clock_label(runs)})")
        if nseed > 1:
            ax.set_title(f"mean and 95 % interval over {nseed} seeds")
        ax.legend(fontsize=8, ncol=2)
        fig.tight_layout()
        savefig(fig, os.path.join(out, "time_to_target.png"), 110)
        plt.close(fig)


def study_panels(out, runs, target, plt, name, title, order=None, max_lines=9):
    """One figure, one panel per scenario (the runs' "scenario"), one line per algorithm (the
    mean over its seeds, with the min..max band where there are several), log loss axis."""
    scs = sorted({r["scenario"] for r in runs}, key=order or (lambda x: x))
    names = []
    for r in runs:
        if r["name"] not in names:
            names.append(r["name"])
    names.sort(key=lambda a: (ALGO_ORDER.index(a) if a in ALGO_ORDER else 99, a))
    cols = min(3, len(scs))
    rows_ = (len(scs) + cols - 1) // cols
    fig, axes = plt.subplots(rows_, cols, figsize=(5.2 * cols, 4.2 * rows_), squeeze=False)
    # y: from the best mean to the worst starting loss (a diverging curve leaves the panel at
    # the top, and its legend entry says so); x: to 2.5x the slowest time to target
    starts, lows, ttts, diverged = [], [], [], set()
    for r in runs:
        pts = [e["avg_test_loss"] for e in r["eval"] if finite(e.get("avg_test_loss"))]
        if pts and r["health"] != "failed":
            starts.append(pts[0])
            lows.append(min(pts))
        t, _ = avg_to_target(r["eval"], target) if r["health"] != "failed" else (None, None)
        if t is not None:
            ttts.append(t)
    ylo = min(lows + [target]) / 1.15 if lows else None
    yhi = max(starts + [target]) * 1.3 if starts else None
    for k, sc in enumerate(scs):
        ax = axes[k // cols][k % cols]
        for i, a in enumerate(names[:max_lines]):
            evs = [r["eval"] for r in runs if r["scenario"] == sc and r["name"] == a and
                   r["health"] != "failed"]
            b = band_curve(evs)
            if not b:
                continue
            xs, mean, lo, hi, n = b
            c = PALETTE[i % len(PALETTE)]
            if yhi and max(mean) > yhi:
                diverged.add(a)
            ax.plot(xs, mean, color=c, lw=1.6, label=a if k == 0 else None,
                    marker=MARKERS[i % len(MARKERS)], markevery=max(1, len(xs) // 8), ms=4)
            if n > 1:
                ax.fill_between(xs, lo, hi, color=c, alpha=0.15, lw=0)
        ax.axhline(target, color="gray", ls="--", lw=1)
        ax.set_yscale("log")
        if ylo and yhi:
            log_ticks(ax, ylo, yhi)
        if ttts:
            ax.set_xlim(0, 2.5 * max(ttts))
        ax.set_title(title(sc))
        ax.set_xlabel(clock_label(runs))
        if k % cols == 0:
            ax.set_ylabel("test loss, averaged model")
    for k in range(len(scs), rows_ * cols):
        axes[k // cols][k % cols].axis("off")
    nseed = len({r["seed"] for r in runs})
    fig.legend(loc="lower center", ncol=min(len(names), 9), fontsize=8,
               bbox_to_anchor=(0.5, 0.0))
    fig.suptitle(f"test loss of the averaged model (dashed: target {target})" +
                 (f"; lines: mean of {nseed} seeds, bands: their range" if nseed > 1 else "") +
                 (f"; leaving the top: {', '.join(sorted(diverged))}" if diverged else ""),
                 fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 0.97))
    savefig(fig, os.path.join(out, name), 110)
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
    iterations run, the curve [(t, d / d0)], summary's consensus_rate, its
    consensus_exact_after: the iteration of finite-time averaging, or None)."""
    rows = read_csv(os.path.join(d, "consensus.csv"))
    rows = [r for r in rows if isinstance(r.get("consensus_distance"), float)]
    if not rows or rows[0]["consensus_distance"] <= 0:
        return None, None, [], None, None
    d0 = rows[0]["consensus_distance"]
    curve = [(r["iteration"], r["consensus_distance"] / d0) for r in rows]
    hit = next((t for t, v in curve if v <= eps), None)
    summ = read_json(os.path.join(d, "summary.json"))
    return hit, curve[-1][0], curve, get(summ, "consensus_rate"), \
        get(summ, "consensus_exact_after")


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


def order_check(rows, key, what, pred="pred_iters", pred_name="predicted", margin=0.0,
                ci=False):
    """Pairs that contradict a prediction: a graph predicted to do strictly better (fewer
    iterations to the same eps from hearsay topo, or a smaller gain) that measured more than
    `margin` worse."""
    bad = []
    for a in rows:
        for b in rows:
            pa, pb, ma, mb = a[pred], b[pred], a.get(key), b.get(key)
            if key.startswith("iterations_to_target"):  # never reached: infinitely many
                ma = math.inf if ma is None and a["status"] == "ok" else ma
                mb = math.inf if mb is None and b["status"] == "ok" else mb
            if None in (pa, pb, ma, mb) or (math.isinf(ma) and math.isinf(mb)):
                continue
            # with seeds: a pair counts only when its intervals do not overlap either
            m_ab = max(margin, (a.get(key + "_ci") or 0) + (b.get(key + "_ci") or 0)) if ci \
                else margin
            if pa < pb * (1 - 1e-3) and ma > mb + m_ab:
                bad.append(f"{a['graph']} ({pred_name} {pa:.3g}) {what} {ma:.3g}, "
                           f"{b['graph']} ({pred_name} {pb:.3g}) {mb:.3g}")
    return bad


def topologies(out, target, eps, eval_every=0.25, network=None):
    runs = []
    for r in load_runs(out, r"([a-z0-9]+)(?:-s([0-9]+))?"):
        if r["name"] == "averaging":
            continue
        r["graph"], r["seed"] = r["match"].group(1), int(r["match"].group(2) or 1)
        runs.append(r)
    if not runs:
        sys.exit(f"report: no runs found in {out}")
    per_run = []
    for r in runs:
        hl = health(r["summary"])
        row = {"graph": r["graph"], "seed": r["seed"], "status": "FAILED" if hl == "failed"
               else "ok", "health": hl, "health_reason": health_note(r["summary"])}
        for f in FIELDS:
            row[f] = get(r["summary"], f)
        row["ttt"] = ttt_avg(r["summary"], r["eval"], target)
        e = first_crossing(by_iteration(r["eval"]), "avg_test_loss", target)
        row["iterations_to_target_avg_model"] = e["iteration"] if e and hl != "failed" else None
        row["iterations_to_target"] = rank_iters_to_target(r["dir"], target)
        its, wall = row["iterations"], row["wall_s"]
        row["per_iter_ms"] = 1e3 * wall / its if its and wall is not None else None
        pr = [x for x in ((r["summary"] or {}).get("per_rank") or []) if x.get("finished")]
        mpi = [x.get("msgs_per_iter") for x in pr if isinstance(x.get("msgs_per_iter"),
                                                               (int, float))]
        row["msgs_per_iter"] = sum(mpi) / len(mpi) if mpi else None
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
        per_run.append(row)
    # one row per graph: the graph's own figures once, the runs' as mean and 95 % interval over
    # the seeds that did not fail
    rows = []
    for g in dict.fromkeys(r["graph"] for r in runs):
        mine = [x for x in per_run if x["graph"] == g]
        good = [x for x in mine if x["status"] != "FAILED"]
        full = next((read_json(os.path.join(r["dir"], "topo.json")) for r in runs
                     if r["graph"] == g and os.path.exists(os.path.join(r["dir"], "topo.json"))),
                    None) or read_json(os.path.join(out, "averaging", g, "topo.json")) or {}
        topo = full.get("report", full)
        row = {"graph": g, "seeds": len(mine), "failed_seeds": len(mine) - len(good),
               "status": "FAILED" if len(good) < len(mine) else "ok",
               "persistent_gain": persistent_gain(full.get("steps")),
               "gap_per_iter": topo.get("gap_per_iter"), "lambda2": topo.get("lambda2"),
               "period": topo.get("period"), "pred_iters": topo.get("predicted_iters")}
        for k in ("iterations_to_target_avg_model", "iterations_to_target", "ttt", "per_iter_ms",
                  "msgs_per_iter", "train_consensus_mean", "final_test_loss"):
            vals = [x[k] for x in good]
            row[k], row[k + "_ci"] = mean_ci(vals)
            row[k + "_reached"] = sum(1 for v in vals if v is not None)
        hit, ran, curve, rate, exact = averaging(os.path.join(out, "averaging", g), eps)
        row["avg_iters_to_eps"], row["avg_iters_run"], row["avg_rate"] = hit, ran, rate
        row["avg_exact_after"] = exact
        row["avg_curve"] = curve
        rows.append(row)
    rows.sort(key=lambda x: (x["pred_iters"] is None, x["pred_iters"] or 0,
                             -(x["gap_per_iter"] or 0)))
    write_csv(os.path.join(out, "results.csv"), per_run,
              ["graph", "seed", "status", "health", "health_reason", "ttt",
               "iterations_to_target", "iterations_to_target_avg_model", "per_iter_ms",
               "msgs_per_iter", "train_consensus_mean"] + FIELDS)
    have_avg = any(r["avg_iters_run"] for r in rows)
    nseed = max(r["seeds"] for r in rows)
    lines = [f"Graphs compared ({clock_words(runs)}), in the order their spectral gaps predict "
             f"(hearsay topo: iterations to consensus {eps:g}, one period at least)" +
             (f"; network: {network}" if network else "") +
             (f"; training figures: mean ± the 95 % interval's half-width over {nseed} seeds "
              "(Student's t)" if nseed > 1 else "; one seed: no intervals") + ":", ""]
    head = "| graph | 1−\\|λ2\\| per iteration | predicted iterations to " + f"{eps:g} |"
    sep = "|---|---|---|"
    if have_avg:
        head += f" averaging: iterations to {eps:g} | measured rate |"
        sep += "---|---|"
    head += (f" iterations to loss {target}, averaged model | messages per rank and iteration | "
             "ms per iteration | time to target, averaged model (ms) | rank by iterations | "
             "rank by time | consensus distance, 2nd half of training | final test loss |")
    sep += "---|---|---|---|---|---|---|---|"
    lines += [head, sep]
    ok_rows = [r for r in rows if r["status"] != "FAILED"]

    def rank_of(key):
        vals = sorted(r[key] for r in ok_rows if r[key] is not None)
        return {r["graph"]: 1 + vals.index(r[key]) for r in ok_rows if r[key] is not None}
    by_it, by_t = rank_of("iterations_to_target_avg_model"), rank_of("ttt")
    for r in rows:
        cells = [r["graph"] + (" (FAILED)" if r["status"] == "FAILED" else ""),
                 fmt(r["gap_per_iter"], 4), fmt(r["pred_iters"], 0)]
        if have_avg:
            a = r["avg_iters_to_eps"]
            cells.append(fmt(a, 0) if a is not None else
                         (f"> {r['avg_iters_run']:g}" if r["avg_iters_run"] else "—"))
            cells.append(f"0 (exact after {r['avg_exact_after']:g})"
                         if r.get("avg_exact_after") is not None else fmt(r["avg_rate"], 4))
        ttt, h = r["ttt"], r["ttt_ci"]
        it = fmt_ci(r["iterations_to_target_avg_model"], r["iterations_to_target_avg_model_ci"])
        if r["iterations_to_target_avg_model_reached"] < r["seeds"] - r["failed_seeds"]:
            it += f" ({r['iterations_to_target_avg_model_reached']}/" \
                  f"{r['seeds'] - r['failed_seeds']} reached)"
        cells += [it, fmt(r["msgs_per_iter"], 1),
                  fmt_ci(r["per_iter_ms"], r["per_iter_ms_ci"]),
                  "FAILED" if r["status"] == "FAILED" and ttt is None else
                  fmt_ci(1e3 * ttt if ttt is not None else None,
                         1e3 * h if h is not None else None),
                  str(by_it.get(r["graph"], "—")), str(by_t.get(r["graph"], "—")),
                  f"{r['train_consensus_mean']:.3g}"
                  if r["train_consensus_mean"] is not None else "—",
                  fmt(r["final_test_loss"], 4)]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    # the spread of the training half: do the graphs need different iterations at all?
    its = [(r["iterations_to_target_avg_model"], r["graph"]) for r in ok_rows
           if r["iterations_to_target_avg_model"] is not None]
    if len(its) >= 2:
        lo, hi = min(its), max(its)
        lines.append(f"Iterations to the target (averaged model): best {lo[1]} {lo[0]:.3g}, worst "
                     f"{hi[1]} {hi[0]:.3g}: a spread of {100 * (hi[0] / lo[0] - 1):.0f} %.")
    # the two orders: where fewer iterations do not mean less time, say why (the cost of an
    # iteration: messages per rank over the network), pairs the intervals separate both ways
    def sep_(x, y, key):
        mx, hx, my, hy = x[key], x.get(key + "_ci") or 0, y[key], y.get(key + "_ci") or 0
        return mx is not None and my is not None and mx + hx < my - hy
    flips = []
    for x in ok_rows:
        for y in ok_rows:
            if sep_(x, y, "iterations_to_target_avg_model") and sep_(y, x, "ttt"):
                flips.append(
                    f"  - {x['graph']} needs fewer iterations than {y['graph']} "
                    f"({x['iterations_to_target_avg_model']:.3g} against "
                    f"{y['iterations_to_target_avg_model']:.3g}) but more time "
                    f"({1e3 * x['ttt']:.3g} ms against {1e3 * y['ttt']:.3g} ms): each of its "
                    f"iterations costs {x['per_iter_ms']:.3g} ms against {y['per_iter_ms']:.3g} "
                    f"ms ({fmt(x['msgs_per_iter'], 1)} messages per rank and iteration against "
                    f"{fmt(y['msgs_per_iter'], 1)}: a denser graph mixes better per iteration "
                    f"and pays for it in bytes on every rank's link)")
    if flips:
        lines += ["Where the two orders disagree (iterations to target against time to target, "
                  "each pair separated by its intervals both ways):"] + flips
    elif ok_rows:
        lines.append("The order by iterations and the order by time do not contradict each other "
                     "for any pair the intervals separate.")
    # the verdicts: the averaged model's iterations to the target (the tables' figure), never
    # a FAILED run's
    checks = (("avg_iters_to_eps", "averaging iterations", "pred_iters", "predicted iterations",
               "the spectral gaps"),
              ("iterations_to_target_avg_model",
               "iterations to the target loss (averaged model)", "pred_iters",
               "predicted iterations", "the spectral gaps"),
              ("train_consensus_mean", "consensus distance while training", "pred_iters",
               "predicted iterations", "the spectral gaps"),
              ("iterations_to_target_avg_model",
               "iterations to the target loss (averaged model)", "persistent_gain", "gain",
               "the persistent-disagreement gains"),
              ("train_consensus_mean", "consensus distance while training", "persistent_gain",
               "gain", "the persistent-disagreement gains"))
    # iterations to the target are read at evaluations: a difference of one evaluation
    # interval (in iterations, at the largest shard) is a tie
    ev_its = max([r["summary"]["iterations"] / max(1.0, get(r["summary"], "epochs") or 1.0)
                  * eval_every for r in runs if r["summary"]], default=1.0)
    margin_its = max(1.0, math.ceil(ev_its - 1e-9))
    failed_rows = [r["graph"] for r in rows if r["status"] == "FAILED"]
    for key, what, pred, pred_name, by in checks:
        if not any(r.get(key) is not None for r in ok_rows) or \
                not any(r.get(pred) is not None for r in ok_rows):
            continue
        margin = margin_its if key.startswith("iterations_to_target") else 0.0
        bad = order_check([dict(r, status="ok") for r in ok_rows], key, what, pred, pred_name,
                          margin, ci=nseed > 1)
        if bad:
            lines.append(f"Order of the {what}: {len(bad)} pair(s) contradict {by}" +
                         (f" by more than {margin:g} iteration(s), the evaluation interval" +
                          (", and by more than their intervals" if nseed > 1 else "") + ":"
                          if margin else (" beyond their intervals:" if nseed > 1 else ":")))
            lines += [f"  - {b}" for b in bad]
        else:
            lines.append(f"Order of the {what}: as {by} predict" +
                         (f" (differences of {margin:g} iteration(s), the evaluation interval, "
                          "count as ties)." if margin else "."))
    if failed_rows:
        lines.append("Left out of every verdict, FAILED (summary.json health failed: diverged or "
                     "NaN): " + ", ".join(
                         f"{r['graph']} ({r['failed_seeds']} of {r['seeds']} seeds)"
                         for r in rows if r["status"] == "FAILED") + ".")
    lines.append(f"Time to target: {TTT_WORDS}.")
    table = "\n".join(lines) + "\n"
    with write_file(os.path.join(out, "table.md")) as f:
        f.write(table)
    print(table)
    if not plots_available():
        return
    import matplotlib.pyplot as plt
    order = {r["graph"]: i for i, r in enumerate(rows)}
    runs.sort(key=lambda r: (order.get(r["graph"], 99), r["seed"]))
    floor = 1e-9
    if have_avg:
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
        for ax, xmax in zip(axes, (60, None)):
            for i, r in enumerate(rows):
                curve = r["avg_curve"]
                if not curve:
                    continue
                c = PALETTE[i % len(PALETTE)]
                ts = [t for t, _ in curve if xmax is None or t <= xmax]
                vs = [max(v, floor) for t, v in curve if xmax is None or t <= xmax]
                ax.plot(ts, vs, color=c, lw=1.6, label=r["graph"])
                lam, per = r["lambda2"], r["period"] or 1
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
    for i, g in enumerate(r["graph"] for r in rows):
        first = next((r for r in runs if r["graph"] == g), None)
        pts = [(t, v) for t, v in first["train_cons"] if v > 0] if first else []
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], color=PALETTE[i % len(PALETTE)],
                    label=f"{g} (seed {first['seed']})")
    ax.set_yscale("log")
    ax.set_xlabel("iteration")
    ax.set_ylabel("consensus distance ‖z_i − z̄‖ while training")
    ax.legend(fontsize=8)
    fig.tight_layout()
    savefig(fig, os.path.join(out, "consensus_training.png"), 110)
    plt.close(fig)
    # the averaged model's loss against time and against iterations: one line per graph (the
    # mean of its seeds, their range as a band)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    lows, starts = [], []
    for ax, xkey, xlabel in ((axes[0], "clock_s", clock_label(runs)),
                             (axes[1], "iteration", "iteration")):
        for i, r in enumerate(rows):
            evs = [x["eval"] for x in runs if x["graph"] == r["graph"] and
                   health(x["summary"]) != "failed"]
            b = band_curve(evs, xkey=xkey)
            if not b:
                continue
            xs, mean, lo, hi, n = b
            c = PALETTE[i % len(PALETTE)]
            ax.plot(xs, mean, color=c, lw=1.6, marker=MARKERS[i % len(MARKERS)],
                    markevery=max(1, len(xs) // 8), ms=4, label=r["graph"])
            if n > 1:
                ax.fill_between(xs, lo, hi, color=c, alpha=0.15, lw=0)
            lows.append(min(mean))
            starts.append(mean[0])
        ax.axhline(target, color="gray", ls="--", lw=1)
        ax.set_yscale("log")
        if lows and starts:
            log_ticks(ax, min(lows + [target]) / 1.15, max(starts + [target]) * 1.3)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("test loss, averaged model")
    axes[0].set_title("against time: the per-iteration cost counts")
    axes[1].set_title("against iterations: mixing alone")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"test loss of the averaged model (dashed: target {target})" +
                 (f"; lines: mean of {nseed} seeds, bands: their range" if nseed > 1 else ""),
                 fontsize=10)
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


def validate_runs(groups, tol):
    """Configurations run several times (validate_sim.sh --runs K): the real runs' median and
    range beside the virtual runs' median, and the ratio of the medians."""
    many = {k: v for k, v in groups.items() if len(v) > 1}
    if not many:
        return []

    def stats(vals):
        vals = sorted(v for v in vals if v is not None)
        if not vals:
            return None, "—"
        m = vals[len(vals) // 2] if len(vals) % 2 else (vals[len(vals) // 2 - 1] +
                                                        vals[len(vals) // 2]) / 2
        return m, f"{m:.2f} ({vals[0]:.2f}-{vals[-1]:.2f})"

    out = ["", "Over the repeated runs (median, range over the runs; ratio = virtual median / "
           f"real median, flagged (!) when outside ±{100 * tol:.0f} %):", "",
           "| configuration | algorithm | runs | time to target: real | virtual | ratio | "
           "it/s: real | virtual | ratio |", "|---|---|---|---|---|---|---|---|---|"]
    for (cfg, algo), res in many.items():
        cells = []
        for k in ("ttt", "its"):
            rm, rc = stats(r["real"][k] for r in res)
            sm, sc = stats(r["sim"][k] for r in res)
            if rm and sm:
                rt = sm / rm
                cells += [rc, sc, f"{rt:.3f}" + (" (!)" if abs(rt - 1) > tol else "")]
            else:
                cells += [rc, sc, "—"]
        out.append(f"| {cfg} | {algo} | {len(res)} | " + " | ".join(cells) + " |")
    return out


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
             "ms/it p10/p50/p90: real | virtual | load (1 min), cores busy in the real run |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    rows, bad, groups = [], 0, {}
    for p in pairs:
        cfg, algo, rd, sd, load = p[:5]
        res = {}
        for kind, d in (("real", rd), ("sim", sd)):
            d = os.path.join(out, d)
            summ = None
            if os.path.exists(os.path.join(d, "summary.json")):
                summ = read_json(os.path.join(d, "summary.json"))
            sp = rank_split(d)
            res[kind] = {"ttt": ttt_avg(summ, read_csv(os.path.join(d, "eval.csv")),
                                        get(summ, "target_loss")),
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
        groups.setdefault((cfg, algo), []).append(res)
        rows.append({"configuration": cfg, "algorithm": algo,
                     "real_time_to_target_s": res["real"]["ttt"],
                     "sim_time_to_target_s": res["sim"]["ttt"], "ttt_ratio": r_ttt,
                     "real_it_per_s": res["real"]["its"], "sim_it_per_s": res["sim"]["its"],
                     "its_ratio": r_its, "load": load, "within_tolerance": int(ok)})
    lines.append("")
    lines.append(f"{len(pairs) - bad} of {len(pairs)} within ±{100 * tol:.0f} % on both figures" +
                 ("" if not bad else f"; {bad} outside (or missing): see docs/simulation.md, "
                  "\"Validation against real runs\""))
    lines += validate_runs(groups, tol)
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
    # the averaged model's (summary.json's time_to_target_avg_s, or eval.csv at a target of
    # our own), as the study tables; None for a FAILED run
    info["ttt"] = ttt_avg(summ, ev, target)
    info["health"] = health(summ)
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
    if isinstance(t, dict):  # a kind of pair the job did not have is null: left out
        return ", ".join(f"{k}: {v}" for k, v in sorted(t.items()) if v is not None) or "—"
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
             f"transport: {transports_of(s)}", ""]
    if s.get("algo") == "local" and (s.get("ranks") or 1) > 1:  # issue 30
        lines += [f"Note: --algo local: the {s.get('ranks')} workers trained independently (they "
                  "never communicated); the \"averaged model\" figures below are those of the "
                  "average of their separately trained models, which no worker trained.", ""]
    lines += ["| figure | value |", "|---|---|"]
    for key in ("iterations", "epochs", "wall_s", "samples_per_s", "final_test_loss",
                "final_test_acc", "final_train_loss", "target_loss", "time_to_target_avg_s",
                "time_to_target_s",
                "consensus_distance", "consensus_distance_rel", "ps_weight_min", "ps_weight_max",
                "ps_weight_sum", "ps_weight_lost", "staleness_p50", "staleness_p99",
                "staleness_max"):
        v = s.get(key)
        if v is None:
            continue
        if key.endswith("_acc") and isinstance(v, (int, float)):  # as everywhere else: a %
            lines.append(f"| {key} | {100 * v:.2f} % |")
            continue
        label = f"{key} ({unit})" if key in ("wall_s", "time_to_target_s") else key
        lines.append(f"| {label} | {v:.6g} |" if isinstance(v, (int, float)) else
                     f"| {label} | {v} |")
    if target is not None:
        lines.append(f"| time to test loss {target:g}, averaged model ({unit}) | "
                     f"{fmt(info['ttt'], 3)} |")
    hl = s.get("health")
    if hl:
        why = "; ".join(s.get("health_reasons") or [])
        lines.append(f"| health | {'FAILED' if hl == 'failed' else hl}{': ' + why if why else ''} |")
    failed = s.get("failed_ranks") or []
    if failed:
        lines.append(f"| failed ranks | {', '.join(str(f.get('rank')) for f in failed)} |")
    per = s.get("per_rank") or []
    if per:
        lines += ["", f"Per rank (times in {unit} over the run, compute + comm + wait + straggle + "
                  "eval = the rank's wall; bytes from rank-R.csv):", "",
                  "| rank | iterations | compute | comm | wait | straggle | eval | wall | sent | "
                  "received | push-sum weight | staleness p50 / p99 / max | test loss |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for p in per:
            q = p.get("rank", 0)
            sent = info["sent"][q] if q < len(info["sent"]) else None
            recv = info["recv"][q] if q < len(info["recv"]) else None

            def g(k, nd=3):
                v = p.get(k)
                return fmt(float(v), nd) if isinstance(v, (int, float)) else "—"
            lines.append(f"| {q} | {g('iterations', 0)} | {g('compute_s')} | {g('comm_s')} | "
                         f"{g('wait_s')} | {g('straggle_s')} | {g('eval_s')} | {g('wall_s')} | "
                         f"{human_bytes(sent)} | "
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
    xlabel = "time (virtual s)" if s.get("clock") == "virtual" else "time (s)"
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
                ax.plot(*zip(*pts), marker="o", ms=3, lw=2, color="k",
                        label="average of independent models" if s.get("algo") == "local"
                        else "averaged model")
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
        for key in ("compute_s", "comm_s", "wait_s", "straggle_s", "eval_s"):
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
                     "wall_s": get(s, "wall_s"), "health": i["health"],
                     "time_to_target_avg_s": i["ttt"],
                     "target_loss": i["target"], "final_test_loss": get(s, "final_test_loss"),
                     "final_test_acc": get(s, "final_test_acc"),
                     "bytes_sent_per_rank": sum(sent) / len(sent) if sent else None,
                     "consensus_distance": get(s, "consensus_distance"),
                     "staleness_p99": get(s, "staleness_p99")})
    write_csv(os.path.join(top, "runs.csv"), rows, list(rows[0].keys()))
    lines = [f"# {os.path.basename(os.path.normpath(top))}: {len(rows)} runs", "",
             "| run | algorithm | clock | ranks | transport | iterations | time | time to "
             "target, averaged model | target | final test loss | final test acc | sent per rank "
             "| health |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        acc = r["final_test_acc"]
        lines.append(f"| {r['run']} | {r['algo']} | {r['clock']} | {r['ranks']} | "
                     f"{r['transport']} | {r['iterations']} | {fmt(r['wall_s'])} | "
                     f"{fmt(r['time_to_target_avg_s'])} | {fmt(r['target_loss'], 3)} | "
                     f"{fmt(r['final_test_loss'], 4)} | "
                     f"{fmt(100 * acc if acc is not None else None, 1)} % | "
                     f"{human_bytes(r['bytes_sent_per_rank'])} | "
                     f"{'FAILED' if r['health'] == 'failed' else r['health']} |")
    # a study of seeds (runs GROUP/NAME-sSEED, as experiments/stragglers.sh writes them): each
    # (group, name) as the study table has it, the mean and 95 % interval over its seeds, and
    # one figure with a panel per group, one line per name with its seeds' band
    # (experiments/ethernet.sh's RATE/ALGO-sSEED-KIND: a panel per rate and kind of run, real
    # or virtual, so no panel holds more lines than algorithms)
    seeded = []
    for i in infos:
        m = re.fullmatch(r"(.+?)-s([0-9]+)(?:-([a-z]+))?", os.path.basename(i["dir"]))
        if not m:
            break
        group = os.path.relpath(os.path.dirname(i["dir"]), top)
        seeded.append({"name": m.group(1), "seed": int(m.group(2)), "dir": i["dir"],
                       "scenario": group + (f" {m.group(3)}" if m.group(3) else ""),
                       "summary": i["summary"], "eval": i["eval"],
                       "health": "failed" if i["health"] == "failed" else "ok"})
    if len(seeded) != len(infos):
        seeded = []
    if seeded and target is not None:
        cells = {}
        for r in seeded:
            cells.setdefault((r["scenario"], r["name"]), []).append(r)
        lines += ["", f"Per group and algorithm over its seeds: the averaged model's time to test "
                  f"loss {target:g}, mean ± the 95 % interval's half-width (Student's t; a "
                  f"straggler study's table.md shows the same figures):", "",
                  "| group | algorithm | seeds | time to target, averaged model | reached | "
                  "FAILED |", "|---|---|---|---|---|---|"]
        for (g, a), rs in sorted(cells.items()):
            ok_ = [r for r in rs if r["health"] != "failed"]
            ts = [avg_to_target(r["eval"], target)[0] for r in ok_]
            m, h = mean_ci(ts)
            lines.append(f"| {g} | {a} | {len(rs)} | {fmt_ci(m, h)} | "
                         f"{sum(1 for t in ts if t is not None)}/{len(ok_)} | "
                         f"{len(rs) - len(ok_)} |")
    pngs = []
    if plt is not None and seeded and target is not None:
        scen = all(re.fullmatch(r"x[0-9.]+|pauses", r["scenario"]) for r in seeded)
        study_panels(top, seeded, target, plt, "report-loss_vs_time.png",
                     scenario_title if scen else (lambda g: g),
                     order=scenario_key if scen else None)
        pngs.append("report-loss_vs_time.png")
    elif plt is not None:
        groups = {}
        for i in infos:
            groups.setdefault(os.path.relpath(os.path.dirname(i["dir"]), top), []).append(i)
        for g, members in sorted(groups.items()):
            suffix = "" if g == "." else "_" + re.sub(r"[^A-Za-z0-9.-]+", "_", g)
            # one colour per algorithm; its runs (real first, then virtual) solid, dashed, ...
            colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
            algos = sorted({i["summary"].get("algo", "") for i in members})
            styles = {}
            labels = {}
            for i in sorted(members, key=lambda i: (i["summary"].get("clock") == "virtual",
                                                    i["dir"])):
                a = i["summary"].get("algo", "")
                c = colors[algos.index(a) % len(colors)]
                # experiments/ethernet.sh's ALGO-sSEED-real|sim|simr: the style by kind (real
                # solid, virtual dashed, virtual with the real inputs dotted), one legend entry
                # per algorithm and kind whatever the seeds
                m = re.fullmatch(r"(.+)-s[0-9]+-(real|sim|simr)", os.path.basename(i["dir"]))
                if m:
                    styles[(a, i["dir"])] = (c, {"real": "-", "sim": "--", "simr": ":"}[m[2]])
                    lab = f"{m[1]} {m[2]}"
                    labels[i["dir"]] = lab if lab not in labels.values() else None
                    continue
                k = sum(1 for (b, _) in styles if b == a)
                styles[(a, i["dir"])] = (c, ("-", "--", ":", "-.")[k % 4])
            for xkey, xname in (("clock_s", "time"), ("iteration", "iterations")):
                fig, ax = plt.subplots(figsize=(7.5, 4.5))
                for i in members:
                    pts = [(e[xkey], e["avg_test_loss"]) for e in i["eval"]
                           if finite(e.get("avg_test_loss"))]
                    if pts:
                        c, ls = styles[(i["summary"].get("algo", ""), i["dir"])]
                        ax.plot(*zip(*pts), marker="o", ms=3, color=c, ls=ls,
                                label=labels.get(i["dir"], os.path.basename(i["dir"])))
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


def ethernet(out, target, tol=0.25):
    """OUT/runs.tsv lines RATE, ALGO, REAL_DIR, SIM_DIR, LOAD, WIRE_BYTES_PER_HOST (comma list),
    RANKS_PER_HOST, SIM_NIC_RATE, SIMR_DIR, MEASURED_GOODPUT, REAL_STEP_MS, SEED (a file from
    before --seeds has no SEED: seed 1): one table per link speed, real beside virtual, each
    cell the mean and 95 % interval over the seeds whose run did not fail."""
    path = os.path.join(out, "runs.tsv")
    if not os.path.exists(path):
        sys.exit(f"report: {path} not found (written by experiments/ethernet.sh)")
    with open_regular(path, CSV_MAX_BYTES, "list of runs") as f:
        lines_in = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    rows = []
    for p in lines_in:
        p += [""] * (12 - len(p))
        rate, algo, rd, sd, load, wire, rph = p[:7]
        rph = int(rph)
        seed = int(p[11]) if p[11].strip() else 1
        res = {}
        for kind, d in (("real", rd), ("sim", sd), ("simr", p[8])):
            if not d:  # not made: --no-sim, no goodput, or its real run failed
                res[kind] = None
                continue
            dd = os.path.join(out, d)
            summ = read_json(os.path.join(dd, "summary.json"))
            ev = read_csv(os.path.join(dd, "eval.csv"))
            st, why = run_health(summ, ev)
            r_ = {"dir": d, "health": st, "why": why}
            if st != "failed":
                i = run_info(dd, target)
                sent = [b or 0 for b in i["sent"]]
                nh = max(1, len(sent) // rph)
                sp = rank_split(dd)
                r_.update({"ttt": avg_to_target(ev, target)[0],
                           "loss": get(i["summary"], "final_test_loss"),
                           "msg_per_host": sum(sent) / nh if sent else None,
                           "its": sp["iterations"] / sp["clock_s"] if sp and sp["clock_s"] > 0
                           else None, "split": sp, "transport": transports_of(i["summary"]),
                           "iterations": get(i["summary"], "iterations")})
            res[kind] = r_
        w = [float(x) for x in wire.split(",") if x]
        rows.append({"rate": rate, "algo": algo, "seed": seed, "load": _num(load),
                     "real": res["real"], "sim": res["sim"], "simr": res["simr"],
                     "wire_per_host": sum(w) / len(w) if w and res["real"] and
                     res["real"]["health"] != "failed" else None,
                     "simrate": p[7], "goodput": p[9], "step_ms": p[10]})
    seeds = sorted({r["seed"] for r in rows})
    nseed = len(seeds)

    def ok(r, kind):
        x = r[kind]
        return x if x and x["health"] != "failed" else None

    def val(r, kind, k):
        x = ok(r, kind)
        return x.get(k) if x else None

    def ci(rs, kind, k, nd=3):
        return fmt_ci(*mean_ci([val(r, kind, k) for r in rs]), nd)

    def mean(xs):
        return mean_ci(xs)[0]

    def ratios(rs, kind):
        """virtual / real per seed, where both runs are ok and reached the target"""
        out_ = []
        for r in rs:
            a, b = val(r, "real", "ttt"), val(r, kind, "ttt")
            if a and b is not None and a > 0:
                out_.append(b / a)
        return out_

    def agree(xs):
        m, h = mean_ci(xs)
        if m is None:
            return "—"
        if h is None:
            return fmt_ci(m, h)
        if m - h >= 1 - tol and m + h <= 1 + tol:
            word = "agrees"
        elif m + h < 1 - tol or m - h > 1 + tol:
            word = "differs"
        else:
            word = "undecided"
        return f"{fmt_ci(m, h)} ({word})"

    def split(rs, kind):
        sps = [val(r, kind, "split") for r in rs]
        sps = [s for s in sps if s]
        if not sps:
            return "—"
        return "+".join(f"{mean([s[k] for s in sps]):.1f}"
                        for k in ("compute_s", "comm_s", "wait_s"))

    def cell_note(rs, kind):
        """'(k/n reached)' (of the n runs that did not fail) and '**FAILED f/m**' (of the m
        made) after a time cell"""
        made = [r for r in rs if r[kind]]
        bad = [r for r in made if r[kind]["health"] == "failed"]
        ts = [val(r, kind, "ttt") for r in made if ok(r, kind)]
        note = ""
        if sum(1 for t in ts if t is not None) < len(ts):  # of the runs that did not fail
            note += f" ({sum(1 for t in ts if t is not None)}/{len(ts)} reached)"
        if bad:
            note += f" **FAILED {len(bad)}/{len(made)}**"
        return note

    text = [f"Time to test loss {target} of **the averaged model** ({TTT_WORDS}), real "
            "(emulated hosts: network namespaces, tc tbf, hearsay's sender-side latency; "
            "wall-clock seconds) beside virtual (hearsay sim, same configuration, --sim-nic at "
            "TCP goodput, --sim-compute measured; virtual seconds); ratio = virtual / real, per "
            "seed; virtual (r): the same with the real run's inputs, the link's goodput "
            "measured before the runs (one kernel TCP stream between two hosts) and the real "
            "run's mean step time (--sim-compute fixed). Bytes per host: real = frames its "
            "veth sent (Ethernet/IP/TCP headers, inter-host traffic only, the evaluations' "
            "gathers to rank 0 included); messages = hearsay's bytes_sent summed over the "
            "host's ranks (intra-host messages included).", "",
            (f"Each cell: the mean ± the 95 % interval's half-width over {nseed} seeds "
             f"({seeds[0]}..{seeds[-1]}; Student's t) of the runs that did not fail (the time "
             "split, the bytes and the load: means). A ratio's verdict: agrees when its whole "
             f"interval is within 1 ± {tol:g}, differs when it is wholly outside, else "
             "undecided; the fastest algorithm is named only where its interval lies below "
             "every other's." if nseed > 1 else
             f"One seed ({seeds[0]}): no interval, hence no verdict (real against virtual, "
             "fastest algorithm); --seeds K for them."), ""]
    csv_rows = []
    failed = []
    verdicts = []
    for rate in sorted({r["rate"] for r in rows}, key=rate_key):
        sel = [r for r in rows if r["rate"] == rate]
        simrate = next((r["simrate"] for r in sel if r["simrate"]), "")
        gps = [float(re.sub(r"[A-Za-z/]+$", "", r["goodput"])) for r in sel
               if re.fullmatch(r"[0-9.eE+-]+Mbit", r["goodput"] or "")]
        gp = f"{mean(gps):.6g}Mbit" if gps else ""
        text += [f"### {rate} (virtual: --sim-nic {simrate}" +
                 (f"; virtual (r): measured goodput {gp}/s)" if gp else ")"), "",
                 "| algorithm | time to target: real (s) | virtual (s) | ratio | virtual (r) | "
                 "ratio | it/s: real | virtual | virtual (r) | ms/it compute+comm+wait: real | "
                 "virtual (r) | bytes per host: real wire | messages, real | messages, virtual | "
                 "final test loss: real | virtual | transport | load (1 min) | seeds |",
                 "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        algos = sorted({r["algo"] for r in sel},
                       key=lambda a: (ALGO_ORDER.index(a) if a in ALGO_ORDER else 99, a))
        for a in algos:
            rs = sorted([r for r in sel if r["algo"] == a], key=lambda r: r["seed"])
            for r in rs:
                for kind in ("real", "sim", "simr"):
                    if r[kind] and r[kind]["health"] == "failed":
                        failed.append(r[kind])
            tr = {ok(r, "real") and (ok(r, "real").get("transport") or "—") for r in rs} - {None}
            text.append(
                f"| {a} | {ci(rs, 'real', 'ttt')}{cell_note(rs, 'real')} | "
                f"{ci(rs, 'sim', 'ttt')}{cell_note(rs, 'sim')} | {agree(ratios(rs, 'sim'))} | "
                f"{ci(rs, 'simr', 'ttt')}{cell_note(rs, 'simr')} | "
                f"{agree(ratios(rs, 'simr'))} | {ci(rs, 'real', 'its')} | "
                f"{ci(rs, 'sim', 'its')} | {ci(rs, 'simr', 'its')} | {split(rs, 'real')} | "
                f"{split(rs, 'simr')} | {human_bytes(mean([r['wire_per_host'] for r in rs]))} | "
                f"{human_bytes(mean([val(r, 'real', 'msg_per_host') for r in rs]))} | "
                f"{human_bytes(mean([val(r, 'sim', 'msg_per_host') for r in rs]))} | "
                f"{ci(rs, 'real', 'loss')} | {ci(rs, 'sim', 'loss')} | "
                f"{', '.join(sorted(tr)) or '—'} | "
                f"{fmt(mean([r['load'] for r in rs if isinstance(r['load'], float)]))} | "
                f"{sum(1 for r in rs if ok(r, 'real'))}/{len(rs)} |")
            for r in rs:
                csv_rows.append({
                    "rate": rate, "algo": a, "seed": r["seed"],
                    "health_real": (r["real"] or {}).get("health"),
                    "health_sim": (r["sim"] or {}).get("health"),
                    "health_simr": (r["simr"] or {}).get("health"),
                    "real_time_to_target_s": val(r, "real", "ttt"),
                    "sim_time_to_target_s": val(r, "sim", "ttt"),
                    "simr_time_to_target_s": val(r, "simr", "ttt"),
                    "real_it_per_s": val(r, "real", "its"), "sim_it_per_s": val(r, "sim", "its"),
                    "simr_it_per_s": val(r, "simr", "its"),
                    "measured_goodput": r["goodput"], "real_step_ms": r["step_ms"],
                    "wire_bytes_per_host": r["wire_per_host"],
                    "msg_bytes_per_host_real": val(r, "real", "msg_per_host"),
                    "msg_bytes_per_host_sim": val(r, "sim", "msg_per_host"),
                    "final_test_loss_real": val(r, "real", "loss"),
                    "final_test_loss_sim": val(r, "sim", "loss"),
                    "iterations_real": val(r, "real", "iterations"),
                    "transport": val(r, "real", "transport"), "load": r["load"]})
        # the fastest algorithm at this rate, on each clock: named only where its interval
        # lies wholly below every other algorithm's
        for kind, what in (("real", "real"), ("sim", "virtual"), ("simr", "virtual (r)")):
            cis = {}
            for a in algos:
                m, h = mean_ci([val(r, kind, "ttt") for r in sel if r["algo"] == a])
                if m is not None:
                    cis[a] = (m, h)
            if len(cis) < 2:
                continue
            best = min(cis, key=lambda a: cis[a][0])
            if nseed < 2 or any(h is None for _, h in cis.values()):
                v = f"— (one seed: {best} has the lowest time, no verdict)" if nseed < 2 else \
                    ("— (an algorithm has fewer than 2 seeds that reached the target; lowest: "
                     f"{best})")
            else:
                over = [a for a in cis if a != best and
                        cis[a][0] - cis[a][1] <= cis[best][0] + cis[best][1]]
                v = f"**{best}**" if not over else \
                    f"undecided ({best} lowest; its interval overlaps {', '.join(over)})"
            verdicts.append(f"| {rate} | {what} | {v} |")
        text.append("")
    if verdicts:
        text += ["Fastest algorithm to the target at each link speed (intervals of the times "
                 "above):", "", "| link | clock | fastest |", "|---|---|---|"] + verdicts + [""]
    if failed:
        text += ["FAILED runs (excluded from every mean and verdict):"] + \
            [f"- {x['dir']}: {'; '.join(x['why']) or 'failed'}" for x in failed] + [""]
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
    ap.add_argument("--tolerance", type=float, help="validate: default 0.15; ethernet: 0.25")
    ap.add_argument("--eps", type=float, default=1e-3)
    ap.add_argument("--runs", action="store_true", help="dir: a study directory's runs too")
    ap.add_argument("--network", help="topologies: the network the runs had, for the heading")
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
            validate(a.out, 0.15 if a.tolerance is None else a.tolerance)
        elif a.study == "ethernet":
            ethernet(a.out, a.target_loss, 0.25 if a.tolerance is None else a.tolerance)
        elif a.study == "stragglers":
            stragglers(a.out, a.target_loss)
        else:
            topologies(a.out, a.target_loss, a.eps, a.eval_every, a.network)
    except ReportError as e:
        sys.exit(f"report: {e}")


if __name__ == "__main__":
    main()
