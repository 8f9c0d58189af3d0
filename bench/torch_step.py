#!/usr/bin/python3
"""Reference for `hearsay bench step`: the same training step in PyTorch (CPU or CUDA).

One step = forward + softmax cross-entropy + backward + SGD-momentum update of an MLP, LeNet-5
(1x28x28) or the batch-norm ResNet-20 (3x32x32),
timed like hearsay's benchmark (warm-up, then the median of --reps steps). Prints one JSON
object. Run with Debian's python3 (python3-torch); `hearsay bench step --reference torch`
calls it with the same thread count and OpenBLAS environment.
"""
import argparse
import json
import os
import statistics
import sys
import time


def build_model(torch, spec, batch):
    """(model, a random input batch of the model's shape, classes) for a hearsay model spec:
    mlp:IN-H1-...-OUT, logreg:IN-OUT, lenet5 (1x28x28), resnet20 (3x32x32); None for another.
    Also used by bench/torch_ddp.py."""
    kind, _, sizes = spec.partition(":")
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    if spec == "lenet5":  # MNIST shape, as Hearsay's lenet5 on 1x28x28
        import torch_digits
        return torch_digits.lenet5("torch"), torch.randn(batch, 1, 28, 28), 10
    if spec == "resnet20":  # CIFAR shape, He et al.'s ResNet-20 with batch norm
        import torch_parity
        return torch_parity.resnet20_torch(), torch.randn(batch, 3, 32, 32), 10
    if kind in ("mlp", "logreg") and sizes:
        dims = [int(s) for s in sizes.split("-")]
        layers = []
        for i in range(len(dims) - 1):
            layers.append(torch.nn.Linear(dims[i], dims[i + 1]))
            if i < len(dims) - 2:
                layers.append(torch.nn.ReLU(inplace=True))
        return torch.nn.Sequential(*layers), torch.randn(batch, dims[0]), dims[-1]
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="mlp:784-1024-1024-10",
                    help="mlp:IN-H1-...-OUT, logreg:IN-OUT, lenet5, resnet20")
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"],
                    help="bf16/fp16: torch.autocast over forward and loss (fp16 with a "
                         "GradScaler), as hearsay's --precision")
    ap.add_argument("--tf32", action="store_true",
                    help="allow TF32 in matmuls and cuDNN (both off otherwise; PyTorch 1.13's "
                         "defaults are off and on)")
    args = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"torch_step.py: PyTorch not available ({e}); install python3-torch", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    built = build_model(torch, args.model, args.batch)
    if built is None:
        print(f"torch_step.py: supported models: mlp:, logreg:, lenet5, resnet20; got "
              f"'{args.model}'", file=sys.stderr)
        return 2
    model, x, classes = built
    dev = torch.device(args.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        print("torch_step.py: this PyTorch has no CUDA device", file=sys.stderr)
        return 2
    model, x = model.to(dev), x.to(dev)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    y = torch.randint(0, classes, (args.batch,)).to(dev)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = args.tf32
        torch.backends.cudnn.allow_tf32 = args.tf32
    elif args.precision == "fp16":
        print("torch_step.py: --precision fp16 needs a CUDA device (PyTorch's CPU autocast "
              "takes bf16 only)", file=sys.stderr)
        return 2
    half = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision)
    scaler = torch.cuda.amp.GradScaler() if args.precision == "fp16" else None

    def step():
        opt.zero_grad(set_to_none=False)
        if half is None:
            loss = loss_fn(model(x), y)
        else:
            with torch.autocast(device_type=dev.type, dtype=half):
                loss = loss_fn(model(x), y)
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()

    for _ in range(args.warmup):
        step()
    sync()
    times = []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        step()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({
        "bench": "step", "impl": "pytorch", "version": torch.__version__, "model": args.model,
        "device": args.device, "precision": args.precision, "tf32": args.tf32,
        "batch": args.batch, "threads": torch.get_num_threads(),
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", "auto"),
        "reps": args.reps, "median_ms": round(statistics.median(times), 4),
        "min_ms": round(min(times), 4),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
