#!/usr/bin/python3
"""bench/torch_gossip.py: the PyTorch + gloo reference of `hearsay bench gossip`.

One SGP exchange over the 1-peer exponential graph, as the SGP reference implementation
does it with torch.distributed: scale the model (and the push-sum weight) by 1/2, isend the
share to rank + 2^(t mod log2 n), irecv the in-peer's share, wait for both, add. The time of
an exchange is its span, as hearsay's: from the first rank's leaving a barrier to the last
rank's end of the add (time.monotonic, the host's CLOCK_MONOTONIC); rank 0 prints one
"HSB ..." line per size with the median (the format hearsay collects). Between two
exchanges, after a barrier, every rank makes untimed copies over its model and its receive
buffer (there and back, then half), as hearsay's benchmark makes its floor's passes over its
model and share buffer: both exchanges find the caches alike.

usage: /usr/bin/python3 torch_gossip.py --ranks 4 --sizes 4M,64M --reps 20 --warmup 3
"""
import argparse
import os
import socket
import statistics
import sys
import time


def parse_size(text):
    mul = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().rstrip("B").rstrip("I")
    if t and t[-1] in mul:
        return int(float(t[:-1]) * mul[t[-1]])
    return int(float(t))


def worker(rank, n, port, sizes, reps, warmup, threads):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(threads)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                            world_size=n)
    logn = max(1, (n - 1).bit_length())
    for size in sizes:
        numel = size // 4
        # The weight travels in the same message: one extra element after the model.
        x = torch.full((numel + 1,), float(rank), dtype=torch.float32)
        x[numel] = 1.0
        buf = torch.empty_like(x)
        # hearsay's benchmark runs its floor's passes (over its model and share buffer)
        # between two exchanges; the same untimed passes here over x and buf (x is left as it
        # was), so that both find the caches alike
        half = (numel + 1) // 2
        starts, ends = [], []
        for i in range(warmup + reps):
            dist.barrier()
            t0 = time.monotonic()
            hop = 1 << (i % logn)
            out_peer, in_peer = (rank + hop) % n, (rank - hop) % n
            x.mul_(0.5)
            share = x.clone()  # snapshot of the share sent (x is accumulated into below)
            sreq = dist.isend(share, out_peer)
            rreq = dist.irecv(buf, in_peer)
            rreq.wait()
            x.add_(buf)
            sreq.wait()
            t1 = time.monotonic()
            if i >= warmup:
                starts.append(-t0)
                ends.append(t1)
            dist.barrier()
            buf.copy_(x)
            x.copy_(buf)
            buf[:half].copy_(x[:half])
        t = torch.tensor(starts + ends, dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)  # (-first start, last end) of each
        if rank == 0:
            v = [t[reps + j].item() + t[j].item() for j in range(reps)]
            print("HSB impl=torch ranks=%d bytes=%d median_s=%.6e min_s=%.6e reps=%d "
                  "backend=gloo torch=%s" % (n, numel * 4, statistics.median(v), min(v), reps,
                                             torch.__version__), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--sizes", default="4M,64M")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    sizes = [parse_size(s) for s in a.sizes.split(",") if s]
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(a.ranks, port, sizes, a.reps, a.warmup, a.threads), nprocs=a.ranks,
             join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
