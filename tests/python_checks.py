"""tests/python_checks.py — the hearsay Python package against the real command (run by
tests/test_python.sh in a fresh venv, HEARSAY set): keywords become flags, the command's own
error message comes back as HearsayError, sim/train/load return the run's tables, and arrays
from dataset_from_numpy train through the npy reader. Prints "ok: ..." per check; raises on
the first failure."""
import io
import os
import tempfile

import numpy as np
import pandas as pd

import hearsay
from hearsay import _progress

SMALL = dict(model="mlp:16-16-4", data="gauss:dim=16,classes=4,train=512,test=128,sep=5",
             batch=32, epochs=1, eval_every=0.5)


def ok(what):
    print("ok: " + what)


assert hearsay.command({"max_iters": 20, "nesterov": True, "progress_thread": False,
                        "straggler": ["slow:1:x4", "once:0:iter=3:1s"], "graph": None,
                        "lr": 0.1}) == [
    "--max-iters", "20", "--nesterov", "--no-progress-thread", "--straggler", "slow:1:x4",
    "--straggler", "once:0:iter=3:1s", "--lr", "0.1"]
ok("keywords become flags")

# a bad option: the command's own message, for sim and for train (through hearsay run)
for fn in (hearsay.sim, hearsay.train):
    try:
        fn(2, epoch=3)
        raise AssertionError("epoch=3 accepted")
    except hearsay.HearsayError as e:
        assert "unknown option '--epoch' (did you mean '--epochs'?)" in str(e), str(e)
        assert "[0]" not in str(e) and str(e).count("unknown option") == 1, str(e)
        assert e.returncode == 2
ok("a bad option raises HearsayError with the command's message, once")
try:
    hearsay.sim(2, lr=-1, **SMALL)
    raise AssertionError("lr=-1 accepted")
except hearsay.HearsayError as e:
    assert "--lr" in str(e), str(e)
ok("a bad value raises HearsayError naming the flag")

# sim: summary, iterations of every rank, evals
out = tempfile.mkdtemp()
run = hearsay.sim(4, algo="sgp", out=os.path.join(out, "study", "sgp"), **SMALL)
assert run.summary["ranks"] == 4 and run.summary["algo"] == "sgp"
it = run.iterations
assert isinstance(it, pd.DataFrame) and sorted(it["rank"].unique()) == [0, 1, 2, 3]
assert len(it) == 4 * run.summary["iterations"], len(it)
assert {"iteration", "train_loss", "wall_s"} <= set(it.columns)
assert len(run.evals) >= 2 and "avg_test_loss" in run.evals.columns
assert sorted(run.rank_evals["rank"].unique()) == [0, 1, 2, 3]
assert run.config["algo"] == "sgp"
ok("sim: summary, iterations (%d rows, 4 ranks), evals, rank_evals" % len(it))

# train: real processes through hearsay run
run2 = hearsay.train(2, algo="allreduce", out=os.path.join(out, "study", "allreduce"), **SMALL)
assert run2.summary["ranks"] == 2 and sorted(run2.iterations["rank"].unique()) == [0, 1]
assert "averaged model" in run2.output
ok("train: 2 worker processes, summary and iterations")

# load: a run, a study, nothing
again = hearsay.load(run.dir)
assert isinstance(again, hearsay.Run) and again.summary == run.summary
study = hearsay.load(os.path.join(out, "study"))
assert isinstance(study, hearsay.Study) and sorted(study) == ["allreduce", "sgp"], list(study)
assert list(study.table()["algo"]) == ["allreduce", "sgp"]
try:
    hearsay.load(tempfile.mkdtemp())
    raise AssertionError("an empty directory loaded")
except hearsay.HearsayError as e:
    assert "no run directory" in str(e)
ok("load: a run, a study of two runs, an empty directory refused")

# a failed run (not an option error): the worker's message
try:
    hearsay.sim(2, algo="sgp", data="npy:/nonexistent-hearsay", model="mlp:4-4-2")
    raise AssertionError("a missing data directory accepted")
except hearsay.HearsayError as e:
    assert "/nonexistent-hearsay/x_train.npy" in str(e), str(e)
ok("a missing npy directory: the message names the file")

# arrays: dataset_from_numpy, then training on them, from Python and the command line
rng = np.random.default_rng(1)
x = rng.normal(size=(600, 2, 3, 3)).astype(np.float64)
y = (x[:, 0, 0, 0] > 0).astype(np.int32)
data = hearsay.dataset_from_numpy(x[:500], y[:500], x[500:], y[500:])
assert data.startswith("npy:") and os.path.isfile(os.path.join(data.dir, "x_train.npy"))
assert np.load(os.path.join(data.dir, "x_train.npy")).dtype == np.float32
run3 = hearsay.sim(2, algo="sgp", data=data, model="mlp:18-16-2", epochs=4, batch=25, lr=0.1)
assert run3.summary["final_test_acc"] > 0.8, run3.summary["final_test_acc"]
ok("dataset_from_numpy: (N, C, H, W) float64 arrays train (accuracy %.2f)"
   % run3.summary["final_test_acc"])
try:
    hearsay.sim(2, data=data, model="mlp:16-16-2")
    raise AssertionError("a model that does not fit accepted")
except hearsay.HearsayError as e:
    assert "2x3x3 = 18 inputs" in str(e), str(e)
ok("a model that does not fit the arrays: the command says their shape")
for bad, why in [((x[:5], y[:4], x[:2], y[:2]), "5 samples but y_train has 4"),
                 ((x[:5, 0, 0, 0], y[:5], x[:2], y[:2]), "features of shape (5,)"),
                 ((x[:5], y[:5] - 1, x[:2], y[:2]), "negative label"),
                 ((x[:5], y[:5] + 0.5, x[:2], y[:2]), "give integers")]:
    try:
        hearsay.dataset_from_numpy(*bad)
        raise AssertionError("accepted: " + why)
    except ValueError as e:
        assert why in str(e), (why, str(e))
ok("dataset_from_numpy refuses mismatched sizes, 1-D features, negative and float labels")
# a corrupt file: the reader's message
with open(os.path.join(data.dir, "y_test.npy"), "r+b") as f:
    f.truncate(os.path.getsize(f.name) - 3)
try:
    hearsay.sim(2, data=data, model="mlp:18-16-2")
    raise AssertionError("a truncated y_test.npy accepted")
except hearsay.HearsayError as e:
    assert "y_test.npy: truncated" in str(e), str(e)
ok("a truncated .npy file: the reader says which and how")

# progress: quiet when not attached, a text bar when asked
assert _progress.make(None) is None or _progress._where() is not None
bar = _progress._Text(io.StringIO())
bar.line("epoch   1.50/3  iter     150/300  loss 0.4121  lr 0.05")
bar.close()
assert "150/300" in bar.stream.getvalue() and " 50%" in bar.stream.getvalue()
ok("progress: quiet unless attached; the bar follows rank 0's progress lines")
