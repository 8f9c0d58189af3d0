#!/usr/bin/python3
"""Hearsay and PyTorch 1.13 on IDENTICAL weights and batches: LeNet-5 on the digits, or the
CIFAR ResNet-20 with batch norm on random 3x32x32 batches (--model resnet20).

Loads libhearsay.so with ctypes, builds the model with the chosen --init and --seed, copies its
flat parameter vector into a PyTorch model of the same layers (same parameter order), then
runs --steps SGD steps (lr, momentum, weight decay as given) on the same batches in both and
prints, per step: each side's loss and gradient norm, the largest gradient difference relative
to the gradient norm, and the largest parameter difference after the step. This separates what
the framework computes (kernels, loss, optimizer) from where it starts (initialisation). For
resnet20 it also compares the batch-norm running statistics after the steps and the
evaluation-mode (running statistics) loss.

--check TOL exits 1 when a step's relative difference of gradients (to the gradient norm), loss,
or parameters after the step (to the largest parameter) passes TOL
(used by tests/test_torch_parity.sh); exit 77 when torch, numpy or the digits are missing.
"""
import argparse
import ctypes as C
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def resnet20_torch(classes=10):
    """He et al. 2016's CIFAR ResNet-20 (option A shortcuts), as Hearsay's resnet20 lays it out."""
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self, cin, k, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, k, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(k)
            self.conv2 = nn.Conv2d(k, k, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(k)
            self.stride, self.pad = stride, (k - cin) // 2

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            sc = x
            if self.stride != 1 or self.pad:
                sc = F.pad(x[:, :, ::self.stride, ::self.stride],
                           (0, 0, 0, 0, self.pad, self.pad))
            return F.relu(out + sc)

    layers = [nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU()]
    cin = 16
    for s, k in enumerate((16, 32, 64)):
        for b in range(3):
            layers.append(Block(cin, k, 2 if s > 0 and b == 0 else 1))
            cin = k
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes)]
    return nn.Sequential(*layers)


class SgdCfg(C.Structure):
    _fields_ = [("momentum", C.c_float), ("weight_decay", C.c_float), ("nesterov", C.c_int)]


def open_lib(path):
    lib = C.CDLL(path)
    P = C.c_void_p
    lib.hs_kernels_open.argtypes = [C.POINTER(P), C.c_int, C.c_int, C.c_int]
    lib.hs_model_create.argtypes = [C.POINTER(P), P, C.c_char_p, C.c_int, C.c_int, C.c_int,
                                    C.c_int, C.c_int, C.c_uint64]
    lib.hs_model_set_init.argtypes = [P, C.c_int, C.c_uint64]
    lib.hs_init_parse.argtypes = [C.c_char_p, C.POINTER(C.c_int)]
    lib.hs_model_params.argtypes = [P]
    lib.hs_model_params.restype = C.POINTER(C.c_float)
    lib.hs_model_grads.argtypes = [P]
    lib.hs_model_grads.restype = C.POINTER(C.c_float)
    lib.hs_model_num_params.argtypes = [P]
    lib.hs_model_num_params.restype = C.c_size_t
    lib.hs_model_train_step.argtypes = [P, C.POINTER(C.c_float), C.POINTER(C.c_int32), C.c_int,
                                        C.POINTER(C.c_double), C.POINTER(C.c_int)]
    lib.hs_sgd_open.argtypes = [C.POINTER(P), P, C.c_size_t, C.POINTER(SgdCfg)]
    lib.hs_sgd_step.argtypes = [P, C.POINTER(C.c_float), C.POINTER(C.c_float), C.c_float]
    lib.hs_last_error.restype = C.c_char_p
    lib.hs_model_num_state.argtypes = [P]
    lib.hs_model_num_state.restype = C.c_size_t
    lib.hs_model_state.argtypes = [P]
    lib.hs_model_state.restype = C.POINTER(C.c_float)
    lib.hs_model_evaluate.argtypes = lib.hs_model_train_step.argtypes
    return lib


def check(lib, rc, what):
    if rc < 0:
        raise RuntimeError(f"{what}: {lib.hs_last_error().decode()}")


def compare(args, model_name, lib, np, torch, torch_digits):
    """One model: the step table; returns the worst relative difference (or 77: skip)."""
    if model_name == "lenet5" and args.mnist:
        import mnist_parity
        xtr, ytr, _, _ = mnist_parity.load(args.mnist)
        shape = (1, 28, 28)
    elif model_name == "lenet5":
        path = args.path or torch_digits.DEFAULT_PATH
        if not os.path.exists(path):
            print(f"torch_parity.py: skipped: {path} missing (install python3-sklearn)",
                  file=sys.stderr)
            return None
        xtr, ytr, _, _ = torch_digits.load_digits(path, 28)
        shape = (1, 28, 28)
    else:
        gen = torch.Generator().manual_seed(args.seed)
        xtr = torch.randn(16 * args.batch, 3, 32, 32, generator=gen)
        ytr = torch.randint(0, 10, (16 * args.batch,), generator=gen)
        shape = (3, 32, 32)

    k, m, opt = C.c_void_p(), C.c_void_p(), C.c_void_p()
    check(lib, lib.hs_kernels_open(C.byref(k), 0, 0, 1), "hs_kernels_open")
    check(lib, lib.hs_model_create(C.byref(m), k, model_name.encode(), *shape, 10, args.batch,
                                   args.seed), "hs_model_create")
    scheme = C.c_int()
    check(lib, lib.hs_init_parse(args.init.encode(), C.byref(scheme)), "--init")
    check(lib, lib.hs_model_set_init(m, scheme.value, args.seed), "hs_model_set_init")
    n = lib.hs_model_num_params(m)
    cfg = SgdCfg(args.momentum, args.weight_decay, 0)
    check(lib, lib.hs_sgd_open(C.byref(opt), k, n, C.byref(cfg)), "hs_sgd_open")
    hp = np.ctypeslib.as_array(lib.hs_model_params(m), shape=(n,))
    hg = np.ctypeslib.as_array(lib.hs_model_grads(m), shape=(n,))

    model = torch_digits.lenet5("torch") if model_name == "lenet5" else resnet20_torch()
    model.train()
    params = list(model.parameters())
    assert sum(p.numel() for p in params) == n, "layouts differ"
    with torch.no_grad():
        off = 0
        for p in params:  # Hearsay's flat order is PyTorch's: layer by layer, weight then bias
            p.copy_(torch.from_numpy(hp[off:off + p.numel()].copy()).view_as(p))
            off += p.numel()
    topt = torch.optim.SGD(params, lr=args.lr, momentum=args.momentum,
                           weight_decay=args.weight_decay)
    loss_fn = torch.nn.CrossEntropyLoss()

    g = torch.Generator().manual_seed(args.seed)
    perm = torch.randperm(len(ytr), generator=g)
    what = ("MNIST idx files in " + args.mnist if args.mnist else "digits") \
        if model_name == "lenet5" else "random CIFAR-shaped data"
    print(f"{model_name} on {what}, --init {args.init} --seed {args.seed}, lr {args.lr} momentum "
          f"{args.momentum} wd {args.weight_decay} batch {args.batch}; identical weights and "
          f"batches")
    print(f"{'step':>4} {'loss hearsay':>13} {'loss torch':>11} {'|g| hearsay':>12} "
          f"{'|g| torch':>10} {'max|dg|/|g|':>12} {'max|dw| after':>14}")
    worst = 0.0
    for s in range(args.steps):
        idx = perm[(s * args.batch) % (len(ytr) - args.batch):][:args.batch]
        x = np.ascontiguousarray(xtr[idx].numpy().reshape(args.batch, -1), dtype=np.float32)
        y = np.ascontiguousarray(ytr[idx].numpy(), dtype=np.int32)
        loss = C.c_double()
        check(lib, lib.hs_model_train_step(m, x.ctypes.data_as(C.POINTER(C.c_float)),
                                           y.ctypes.data_as(C.POINTER(C.c_int32)), args.batch,
                                           C.byref(loss), None), "train step")
        topt.zero_grad()
        tl = loss_fn(model(xtr[idx]), ytr[idx])
        tl.backward()
        tg = torch.cat([p.grad.reshape(-1) for p in params]).numpy()
        gn_h, gn_t = float(np.linalg.norm(hg)), float(np.linalg.norm(tg))
        rel = float(np.abs(hg - tg).max()) / max(gn_t, 1e-30)
        check(lib, lib.hs_sgd_step(opt, lib.hs_model_params(m), lib.hs_model_grads(m),
                                   args.lr), "sgd step")
        topt.step()
        tw = torch.cat([p.detach().reshape(-1) for p in params]).numpy()
        dw = float(np.abs(hp - tw).max())
        print(f"{s + 1:4d} {loss.value:13.4f} {tl.item():11.4f} {gn_h:12.4f} {gn_t:10.4f} "
              f"{rel:12.2e} {dw:14.2e}")
        ld = abs(loss.value - tl.item()) / max(1.0, abs(tl.item()))
        dwr = dw / max(1e-30, float(np.abs(tw).max()))
        if math.isfinite(rel):
            worst = max(worst, rel, ld, dwr)
        else:
            worst = math.inf
    if model_name == "resnet20":
        ns = lib.hs_model_num_state(m)
        hst = np.ctypeslib.as_array(lib.hs_model_state(m), shape=(ns,))
        tst = torch.cat([t.reshape(-1) for mod in model.modules()
                         if isinstance(mod, torch.nn.BatchNorm2d)
                         for t in (mod.running_mean, mod.running_var)]).numpy()
        ds = float(np.abs(hst - tst).max() / max(1e-30, np.abs(tst).max()))
        model.eval()
        with torch.no_grad():
            tl = loss_fn(model(xtr[:args.batch]), ytr[:args.batch]).item()
        x = np.ascontiguousarray(xtr[:args.batch].numpy().reshape(args.batch, -1))
        y = np.ascontiguousarray(ytr[:args.batch].numpy(), dtype=np.int32)
        loss = C.c_double()
        check(lib, lib.hs_model_evaluate(m, x.ctypes.data_as(C.POINTER(C.c_float)),
                                         y.ctypes.data_as(C.POINTER(C.c_int32)), args.batch,
                                         C.byref(loss), None), "evaluate")
        print(f"running statistics ({ns} values): max difference / max value {ds:.2e}; "
              f"evaluation loss (running statistics): hearsay {loss.value:.6f} torch {tl:.6f}")
        worst = max(worst, ds, abs(loss.value - tl) / max(1.0, abs(tl)))
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default=os.path.join(HERE, "..", "_build", ".libs", "libhearsay.so"))
    ap.add_argument("--path", default=None, help="digits.csv(.gz)")
    ap.add_argument("--mnist", default=None, metavar="DIR",
                    help="lenet5 on the MNIST idx files in DIR (bench/mnist5k_to_idx.py) instead "
                         "of the digits, standardised as Hearsay's mnist:DIR")
    ap.add_argument("--model", default="lenet5",
                    help="lenet5 (digits), resnet20 (random CIFAR-shaped data), or both: "
                         "lenet5,resnet20")
    ap.add_argument("--init", default="he", help="torch, he, xavier (Hearsay's scheme)")
    ap.add_argument("--seed", type=int, default=6)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--check", type=float, default=None)
    args = ap.parse_args()
    try:
        import numpy as np
        import torch
    except ImportError as e:
        print(f"torch_parity.py: skipped: {e} (install python3-torch)", file=sys.stderr)
        return 77
    sys.path.insert(0, HERE)
    import torch_digits

    torch.set_num_threads(1)
    lib = open_lib(args.lib)
    worst = 0.0
    for name in args.model.split(","):
        w = compare(args, name, lib, np, torch, torch_digits)
        if w is None:
            return 77
        worst = max(worst, w)
    if args.check is not None and not worst <= args.check:
        print(f"torch_parity.py: FAIL: difference {worst:.2e} > {args.check}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
