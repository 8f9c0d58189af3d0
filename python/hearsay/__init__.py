"""Hearsay from Python: run decentralized (gossip) training and load its results.

    import hearsay
    run = hearsay.sim(8, algo="sgp", max_iters=200)        # N simulated ranks, virtual time
    run = hearsay.train(4, algo="sgp", epochs=2)           # N real processes (hearsay run)
    run.summary       # summary.json as a dict
    run.iterations    # every rank's rank-R.csv rows, with a `rank` column (pandas)
    run.evals         # eval.csv (the averaged model's test loss and accuracy)
    hearsay.load("runs/stragglers")                        # an existing run or study directory

Every keyword is a flag of `hearsay train` / `hearsay sim` (max_iters=20 is --max-iters 20;
True is the bare flag, False its --no- form, a list repeats the flag, None leaves it out),
checked by the command itself: a bad option or a failed run raises HearsayError with the
command's own message. The command is $HEARSAY, else `hearsay` on PATH. See docs/python.md.
"""

from ._core import (
    Dataset,
    HearsayError,
    Run,
    Study,
    command,
    dataset_from_numpy,
    find_hearsay,
    load,
    sim,
    train,
)

__all__ = [
    "Dataset",
    "HearsayError",
    "Run",
    "Study",
    "command",
    "dataset_from_numpy",
    "find_hearsay",
    "load",
    "sim",
    "train",
]
__version__ = "0.1.0"
