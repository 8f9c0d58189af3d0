#!/usr/bin/python3
"""PyTorch 1.13 reference for LeNet-5 on scikit-learn's digits, set up exactly as
`hearsay train --model lenet5 --data digits` trains it.

Data (the same as Hearsay's data/digits.c): sklearn's digits.csv.gz, pixels / 16, sample i is a
test sample when i % 5 == 4 (1438 train, 359 test), each 8x8 image resized to 28x28 with
F.interpolate(mode="bilinear", align_corners=False), then standardised with the training set's
mean and (population) standard deviation. Model: conv5x5(6, pad 2)-relu-maxpool2-conv5x5(16)-
relu-maxpool2-fc120-relu-fc84-relu-fc10, PyTorch's default initialisation (--init torch), or
Hearsay's former He/Xavier scheme (--init he: kaiming_normal for fc layers followed by relu,
xavier_uniform for the convs and the last fc, zero biases). Training: SGD with momentum and
weight decay, a constant learning rate (or Hearsay's per-iteration cosine to 0), shuffled batches with the last partial batch dropped.

Prints one JSON line per seed: {"seed", "test_acc", "test_loss", "first_losses", "wall_s"}.
"""
import argparse
import gzip
import json
import math
import sys
import time

DEFAULT_PATH = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"


def load_digits(path, size):
    import numpy as np
    import torch
    import torch.nn.functional as F

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        a = np.loadtxt(f, delimiter=",", dtype=np.float64)
    x = torch.tensor(a[:, :64] / 16.0, dtype=torch.float32).reshape(-1, 1, 8, 8)
    y = torch.tensor(a[:, 64], dtype=torch.int64)
    if size != 8:
        x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
    test = torch.arange(len(y)) % 5 == 4
    xtr, ytr, xte, yte = x[~test], y[~test], x[test], y[test]
    mean = xtr.double().mean().item()
    std = xtr.double().std(unbiased=False).item()
    return (xtr - mean) / std, ytr, (xte - mean) / std, yte


def lenet5(init):
    import torch.nn as nn

    m = nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
    if init == "he":
        mods = list(m)
        for i, l in enumerate(mods):
            if isinstance(l, (nn.Conv2d, nn.Linear)):
                relu_next = i + 1 < len(mods) and isinstance(mods[i + 1], nn.ReLU)
                # Hearsay's former scheme (nn/spec.c before --init): He-normal for every fc/conv
                # followed by relu, Xavier-uniform otherwise, zero bias
                if relu_next:
                    nn.init.kaiming_normal_(l.weight, nonlinearity="relu")
                else:
                    nn.init.xavier_uniform_(l.weight)
                nn.init.zeros_(l.bias)
    return m


def run(seed, data, args):
    import torch

    xtr, ytr, xte, yte = data
    torch.manual_seed(seed)
    model = lenet5(args.init)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                          weight_decay=args.weight_decay)
    loss_fn = torch.nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(seed)
    n = len(ytr)
    first = []
    ipe = n // args.batch
    total = args.epochs * ipe
    it = 0
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
            loss = loss_fn(model(xtr[idx]), ytr[idx])
            loss.backward()
            opt.step()
            if len(first) < 5:
                first.append(round(loss.item(), 4))
    with torch.no_grad():
        out = model(xte)
        test_loss = loss_fn(out, yte).item()
        acc = (out.argmax(1) == yte).double().mean().item()
    return {"seed": seed, "test_acc": acc, "test_loss": test_loss, "first_losses": first,
            "wall_s": round(time.perf_counter() - t0, 2)}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--path", default=DEFAULT_PATH, help="digits.csv(.gz)")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--lr-schedule", choices=("constant", "cosine"), default="constant")
    ap.add_argument("--init", choices=("torch", "he"), default="torch")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"torch_digits.py: PyTorch not available ({e}); install python3-torch",
              file=sys.stderr)
        return 77
    torch.set_num_threads(args.threads)
    try:
        data = load_digits(args.path, 28)
    except OSError as e:
        print(f"torch_digits.py: {args.path}: {e} (install python3-sklearn)", file=sys.stderr)
        return 77
    for s in args.seeds.split(","):
        print(json.dumps(run(int(s), data, args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
