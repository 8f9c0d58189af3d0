"""The hearsay package's implementation: running the command, loading run directories."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from . import _progress


class HearsayError(RuntimeError):
    """A hearsay command failed (a bad option, a failed run) or a run directory is unusable.

    str(e) is the command's own message (its error lines, without the "[rank] " prefixes and
    without repeats); e.returncode, e.stderr (all of it) and e.command say the rest.
    """

    def __init__(self, message, returncode=None, stderr="", command=None):
        super().__init__(message)
        self.returncode = returncode
        self.stderr = stderr
        self.command = command


# ---- finding and running the command ---------------------------------------------------------


def find_hearsay():
    """The hearsay command: $HEARSAY, else `hearsay` on PATH (HearsayError when neither)."""
    env = os.environ.get("HEARSAY")
    if env:
        path = shutil.which(env) or (env if os.access(env, os.X_OK) else None)
        if not path:
            raise HearsayError("HEARSAY=%s is not an executable hearsay command" % env)
        return os.path.abspath(path)
    path = shutil.which("hearsay")
    if not path:
        raise HearsayError(
            "no hearsay command: put it on PATH (make install) or set HEARSAY=/path/to/hearsay "
            "(a build tree's _build/hearsay)"
        )
    return path


def _flag_value(v):
    if isinstance(v, float):
        return repr(v)
    return str(v)


def command(options):
    """The flags of a dict of options: {"max_iters": 20, "nesterov": True} ->
    ["--max-iters", "20", "--nesterov"]. False gives --no-NAME, a list or tuple repeats the
    flag, None leaves it out. The command checks names and values."""
    args = []
    for key, value in options.items():
        name = key.replace("_", "-")
        if value is None:
            continue
        if value is True:
            args.append("--" + name)
        elif value is False:
            args.append("--no-" + name)
        elif isinstance(value, (list, tuple)):
            for item in value:
                args += ["--" + name, _flag_value(item)]
        else:
            args += ["--" + name, _flag_value(value)]
    return args


_PREFIX = re.compile(r"^\[\d+\] ")


def _error_message(stderr):
    """The command's own message from its stderr: worker lines without their "[rank] "
    prefix, each once; the launcher's own lines ("hearsay run: ...") only when nothing else."""
    lines, seen, launcher = [], set(), []
    for line in stderr.splitlines():
        text = _PREFIX.sub("", line).rstrip()
        if not text or "warning:" in text:
            continue
        if text.startswith("hearsay run:"):
            launcher.append(text)
            continue
        if text not in seen:
            seen.add(text)
            lines.append(text)
    return "\n".join(lines or launcher) or "the command failed without a message"


def _execute(argv, out, show_progress):
    """Run argv, stdout read line by line (progress), stderr kept; raise on failure."""
    bar = _progress.make(show_progress)
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as err:
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=err,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            bufsize=1,
        )
        output = []
        try:
            for line in proc.stdout:
                output.append(line)
                if bar:
                    bar.line(_PREFIX.sub("", line))
            rc = proc.wait()
        except BaseException:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            raise
        finally:
            if bar:
                bar.close()
        err.seek(0)
        stderr = err.read()
    if rc != 0:
        raise HearsayError(_error_message(stderr), returncode=rc, stderr=stderr, command=argv)
    if stderr.strip() and show_progress is not False:
        # warnings (e.g. "workers train independently") go where the user looks
        for line in stderr.splitlines():
            if "warning:" in line:
                print(_PREFIX.sub("", line), file=sys.stderr)
    run = Run(out)
    run.output = "".join(output)
    run.stderr = stderr
    return run


def _out_dir(out):
    if out is None:
        return Path(tempfile.mkdtemp(prefix="hearsay-run-"))
    return Path(out)


def sim(n, *, out=None, show_progress=None, **options):
    """`hearsay sim -n N` with options as flags: N simulated ranks on a virtual clock.

    out: the run directory (default: a new temporary directory, kept); show_progress: None
    (a progress bar when attached to a terminal or a notebook), True or False. Returns a Run.
    """
    out = _out_dir(out)
    argv = [find_hearsay(), "sim", "-n", str(int(n))] + command(options) + ["--out", str(out)]
    return _execute(argv, out, show_progress)


def train(n, *, out=None, show_progress=None, **options):
    """`hearsay run -n N -- hearsay train` with options as flags: N real worker processes on
    this machine. Arguments as sim(); returns a Run."""
    out = _out_dir(out)
    argv = [find_hearsay(), "run", "-n", str(int(n)), "--", "hearsay", "train"]
    argv += command(options) + ["--out", str(out)]
    return _execute(argv, out, show_progress)


# ---- run and study directories ---------------------------------------------------------------


class Run:
    """One run directory (--out DIR of hearsay train or sim). Tables load on first use."""

    def __init__(self, path):
        self.dir = Path(path)
        self.output = None  # what the command printed, when this object ran it
        self.stderr = None
        self._cache = {}

    def __repr__(self):
        try:
            s = self.summary
            what = "%s on %s ranks, %s iterations" % (s.get("algo"), s.get("ranks"), s.get("iterations"))
        except HearsayError:
            what = "no summary.json"
        return "<hearsay.Run %s: %s>" % (self.dir, what)

    def _file(self, name):
        p = self.dir / name
        if not p.is_file():
            raise HearsayError("%s: no %s (not a finished run directory?)" % (self.dir, name))
        return p

    @property
    def summary(self):
        """summary.json as a dict."""
        if "summary" not in self._cache:
            with open(self._file("summary.json"), encoding="utf-8") as f:
                self._cache["summary"] = json.load(f)
        return self._cache["summary"]

    @property
    def config(self):
        """The options the run used (summary.json's "config")."""
        return self.summary.get("config", {})

    def _ranks(self, suffix):
        """rank-R<suffix>.csv of every rank, concatenated with a `rank` column, by rank."""
        if suffix not in self._cache:
            import pandas as pd

            frames = []
            for p in self.dir.glob("rank-*%s.csv" % suffix):
                m = re.fullmatch(r"rank-(\d+)%s\.csv" % re.escape(suffix), p.name)
                if not m:
                    continue
                df = pd.read_csv(p)
                df.insert(0, "rank", int(m.group(1)))
                frames.append((int(m.group(1)), df))
            if not frames:
                self._file("rank-0%s.csv" % suffix)
            frames.sort(key=lambda f: f[0])
            self._cache[suffix] = pd.concat([f[1] for f in frames], ignore_index=True)
        return self._cache[suffix]

    @property
    def iterations(self):
        """Every rank's rank-R.csv rows (one per iteration) with a `rank` column, by rank."""
        return self._ranks("")

    @property
    def rank_evals(self):
        """Every rank's rank-R-eval.csv rows (its own model's test loss at its own clock) with a
        `rank` column."""
        return self._ranks("-eval")

    @property
    def evals(self):
        """eval.csv: the averaged model's test loss and accuracy at each evaluation."""
        if "evals" not in self._cache:
            import pandas as pd

            self._cache["evals"] = pd.read_csv(self._file("eval.csv"))
        return self._cache["evals"]


class Study(dict):
    """A study directory: {relative path of a run directory: Run}, sorted by path."""

    def __init__(self, path, runs):
        super().__init__(runs)
        self.dir = Path(path)

    def __repr__(self):
        return "<hearsay.Study %s: %d runs>" % (self.dir, len(self))

    def table(self):
        """One row per run: its path and summary.json's scalar fields (pandas DataFrame)."""
        import pandas as pd

        rows = []
        for name, run in self.items():
            row = {"run": name}
            row.update({k: v for k, v in run.summary.items() if not isinstance(v, (dict, list))})
            rows.append(row)
        return pd.DataFrame(rows)


def load(path):
    """A Run for a run directory (it holds summary.json), else a Study of every run directory
    below path. HearsayError when there is none."""
    path = Path(path)
    if not path.is_dir():
        raise HearsayError("%s: no such directory" % path)
    if (path / "summary.json").is_file():
        return Run(path)
    runs = {}
    for p in sorted(path.rglob("summary.json")):
        runs[str(p.parent.relative_to(path))] = Run(p.parent)
    if not runs:
        raise HearsayError("%s: no run directory in it (no summary.json in it or below)" % path)
    return Study(path, runs)


# ---- NumPy arrays as a dataset ---------------------------------------------------------------


class Dataset(str):
    """A data= value ("npy:DIR") naming arrays written by dataset_from_numpy; .dir is DIR."""

    def __new__(cls, directory, spec):
        s = super().__new__(cls, spec)
        s.dir = Path(directory)
        return s


def _labels(np, y, what):
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError("%s: labels of shape %s: give one label per sample (y.ravel())" % (what, y.shape))
    if y.dtype.kind in "iu":
        pass
    elif y.dtype.kind == "f" and np.all(np.isfinite(y)) and np.all(y == np.round(y)):
        y = y.astype(np.int64)
    else:
        raise ValueError("%s: labels of dtype %s: give integers" % (what, y.dtype))
    if y.size and y.min() < 0:
        raise ValueError("%s: negative label %d" % (what, y.min()))
    return y.astype("<i8")


def _features(np, x, what):
    x = np.asarray(x)
    if x.ndim not in (2, 3, 4):
        raise ValueError(
            "%s: features of shape %s: give (samples, features), (samples, H, W) or "
            "(samples, C, H, W)" % (what, x.shape)
        )
    if x.dtype == np.uint8:
        return np.ascontiguousarray(x)
    x = np.ascontiguousarray(x, dtype="<f4")
    if not np.all(np.isfinite(x)):
        raise ValueError("%s: holds NaN or infinite values" % what)
    return x


def dataset_from_numpy(x_train, y_train, x_test, y_test, dir=None, classes=None):
    """Write four arrays as DIR/x_train.npy, y_train.npy, x_test.npy, y_test.npy and return the
    data= value that trains on them ("npy:DIR[,classes=K]", a str).

    x: (samples, features), (samples, H, W) or (samples, C, H, W), uint8 kept (the reader
    divides by 255), anything else as float32; y: integer labels 0..K-1, one per sample.
    dir: where to write (default: a new temporary directory, kept). classes: K (default: the
    largest label + 1).
    """
    import numpy as np

    xs = [_features(np, x_train, "x_train"), _features(np, x_test, "x_test")]
    ys = [_labels(np, y_train, "y_train"), _labels(np, y_test, "y_test")]
    for x, y, name in zip(xs, ys, ("train", "test")):
        if len(x) != len(y):
            raise ValueError("x_%s has %d samples but y_%s has %d labels" % (name, len(x), name, len(y)))
        if len(x) == 0:
            raise ValueError("x_%s has no samples" % name)
    if xs[0].shape[1:] != xs[1].shape[1:]:
        raise ValueError(
            "x_train's samples are %s but x_test's are %s" % (xs[0].shape[1:], xs[1].shape[1:])
        )
    d = Path(dir) if dir is not None else Path(tempfile.mkdtemp(prefix="hearsay-data-"))
    d.mkdir(parents=True, exist_ok=True)
    for name, a in (("x_train", xs[0]), ("y_train", ys[0]), ("x_test", xs[1]), ("y_test", ys[1])):
        np.save(d / (name + ".npy"), a, allow_pickle=False)
    spec = "npy:" + str(d.resolve())
    if "," in spec:
        raise ValueError("%s: a data spec cannot name a directory with a comma in it" % d)
    if classes is not None:
        spec += ",classes=%d" % int(classes)
    return Dataset(d, spec)
