#!/usr/bin/python3
"""LeNet-5 on scikit-learn's digits: Hearsay against PyTorch 1.13, same split, same
hyperparameters (PyTorch's: lr 0.05, momentum 0.9, weight decay 5e-4, batch 64), several seeds.

Runs `hearsay train --model lenet5 --data digits[:PATH] ...` once per seed (one worker, one
thread) and bench/torch_digits.py's identical set-up in this process, then prints a table of
test accuracies per seed and their means. --check POINTS exits 1 when the means differ by more
than POINTS percentage points (tests/test_digits_parity.sh uses 1); exit 77 (skip) when torch,
numpy or the digits file is missing.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hearsay", default=os.path.join(HERE, "..", "_build", "hearsay"))
    ap.add_argument("--path", default=None, help="digits.csv(.gz) (default: Debian's)")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr-schedule", choices=("constant", "cosine"), default="constant")
    ap.add_argument("--init", default="torch", help="Hearsay's --init (torch, he, xavier)")
    ap.add_argument("--check", type=float, default=None, metavar="POINTS")
    args = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"digits_parity.py: skipped: PyTorch not available ({e}); install python3-torch",
              file=sys.stderr)
        return 77
    sys.path.insert(0, HERE)
    import torch_digits

    path = args.path or torch_digits.DEFAULT_PATH
    if not os.path.exists(path):
        print(f"digits_parity.py: skipped: {path} missing (install python3-sklearn)",
              file=sys.stderr)
        return 77
    torch.set_num_threads(1)
    data = torch_digits.load_digits(path, 28)
    targs = argparse.Namespace(epochs=args.epochs, batch=args.batch, lr=args.lr,
                               momentum=args.momentum, weight_decay=args.weight_decay,
                               init="torch", lr_schedule=args.lr_schedule)
    seeds = [int(s) for s in args.seeds.split(",")]
    rows = []
    for seed in seeds:
        with tempfile.TemporaryDirectory(prefix="hs-digits-") as out:
            cmd = [args.hearsay, "train", "--model", "lenet5", "--data", f"digits:{path}",
                   "--init", args.init, "--lr", str(args.lr), "--momentum", str(args.momentum),
                   "--weight-decay", str(args.weight_decay), "--batch", str(args.batch),
                   "--epochs", str(args.epochs), "--lr-schedule", args.lr_schedule, "--seed", str(seed), "--threads", "1",
                   "--eval-every", "0", "--quiet", "--out", out]
            r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:
                print(f"digits_parity.py: {' '.join(cmd)} failed ({r.returncode}):\n{r.stderr}",
                      file=sys.stderr)
                return 1
            with open(os.path.join(out, "summary.json")) as f:
                hs = json.load(f)
        t = torch_digits.run(seed, data, targs)
        rows.append((seed, 100 * hs["final_test_acc"], 100 * t["test_acc"]))
    print(f"LeNet-5 on digits (1438 train / 359 test, 28x28), lr {args.lr} momentum "
          f"{args.momentum} weight decay {args.weight_decay} batch {args.batch}, {args.epochs} "
          f"epochs, {args.lr_schedule} lr; Hearsay --init {args.init}, PyTorch {torch.__version__} defaults")
    print(f"| seed | Hearsay test acc % | PyTorch test acc % |")
    print(f"|---:|---:|---:|")
    for seed, h, t in rows:
        print(f"| {seed} | {h:.2f} | {t:.2f} |")
    mh = sum(r[1] for r in rows) / len(rows)
    mt = sum(r[2] for r in rows) / len(rows)
    print(f"| mean | {mh:.2f} | {mt:.2f} |")
    print(f"difference of the means: {mh - mt:+.2f} points")
    if args.check is not None and abs(mh - mt) > args.check:
        print(f"digits_parity.py: FAIL: the means differ by {abs(mh - mt):.2f} points "
              f"(> {args.check})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
