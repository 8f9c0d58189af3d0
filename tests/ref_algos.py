#!/usr/bin/python3
"""tests/ref_algos.py - an independent reference of Hearsay's distributed algorithms.

Plain NumPy, sharing no code with optim/: it rebuilds the data a `hearsay sim` run used (the
gauss mixture, the IID shards and the per-pass shuffles, from the documented generators:
xoshiro256** seeded by splitmix64, Marsaglia's polar normals, Gram-Schmidt), takes the run's
initial parameters (DIR/rank-R.init.f32, --dump-params), runs the algorithm's equations from
its paper in float64 on logistic regression, and compares every rank's parameters after every
iteration with DIR/rank-R.traj.f32 (--dump-trajectory).

    ref_algos.py DIR ALGO [--delay D] [--easgd-order alg1|alg2] [--tol 1e-5]

reads the run's options from DIR/config.ini. ALGO: sgp, osgp, dpsgd, allreduce, easgd,
localsgd, adpsgd (which replays the pairings of DIR/rank-R-adpsgd.csv). --delay D: a push-sum
message of round t is mixed in round t + D (the run makes it so: lockstep steps of C ms and,
for D > 0, links of (D - 0.5) C ms latency). Prints the largest relative deviation
max_t,i ||x_i(t) - ref||_inf / ||ref||_inf and exits 0 when it is within --tol, 1 otherwise,
2 on bad input. --easgd-order: the paper's Algorithm 1 (easgd's default: the elastic exchange
before the gradient step, at the point the gradient was taken) or Algorithm 2 as the code runs
it (eamsgd's default: the exchange after the step).
"""
import configparser
import math
import os
import sys

import numpy as np

M64 = (1 << 64) - 1


# ---- random numbers (util/rng.c's documented algorithms) ---------------------------------
def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return state, z ^ (z >> 31)


def rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & M64


class Rng:
    def __init__(self, seed, stream):
        x = (seed ^ ((0xD1B54A32D192ED03 * (stream + 1)) & M64)) & M64
        self.s = []
        for _ in range(4):
            x, z = splitmix64(x)
            self.s.append(z)
        self.spare = None

    def u64(self):
        s = self.s
        result = (rotl((s[1] * 5) & M64, 7) * 9) & M64
        t = (s[1] << 17) & M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        return result

    def uniform(self):
        return (self.u64() >> 11) * 2.0**-53

    def below(self, n):
        if n <= 1:
            return 0
        limit = M64 - (M64 % n)
        while True:
            v = self.u64()
            if v < limit:
                return v % n

    def normal(self):
        if self.spare is not None:
            v, self.spare = self.spare, None
            return v
        while True:
            u = 2.0 * self.uniform() - 1.0
            v = 2.0 * self.uniform() - 1.0
            s = u * u + v * v
            if 0.0 < s < 1.0:
                break
        m = math.sqrt(-2.0 * math.log(s) / s)
        self.spare = v * m
        return u * m


def shuffle(rng, a):
    for i in range(len(a), 1, -1):
        j = rng.below(i)
        a[i - 1], a[j] = a[j], a[i - 1]


# ---- the data: gauss:dim=D,classes=K,train=N (K <= D), IID shards, shuffled passes --------
def gauss_train(dim, classes, n, sep, noise, seed):
    rng = Rng(seed, 101)  # the class means
    v = np.array([rng.normal() for _ in range(classes * dim)]).reshape(classes, dim)
    basis = []
    for i in range(classes):  # modified Gram-Schmidt, twice
        vi = v[i].copy()
        n0 = math.sqrt(sum(vi * vi))
        for _ in range(2):
            for b in basis:
                vi = vi - float(np.dot(vi, b)) * b
        n1 = math.sqrt(sum(vi * vi))
        if not (n1 > 1e-6 * n0):
            raise SystemExit("reference: degenerate mean directions (redraw not mirrored)")
        basis.append(vi / n1)
    means = (sep / math.sqrt(2.0) * np.array(basis)).astype(np.float32)
    rng = Rng(seed, 102)  # the training set
    x = np.zeros((n, dim), np.float32)
    y = np.zeros(n, np.int64)
    for i in range(n):
        c = rng.below(classes)
        y[i] = c
        for j in range(dim):
            x[i, j] = means[c, j] + np.float32(noise * rng.normal())
    return x, y


def iid_shard(n, workers, rank, seed):
    perm = list(range(n))
    shuffle(Rng(seed, 201), perm)
    return sorted(perm[rank * n // workers:(rank + 1) * n // workers])


class Batches:
    """One rank's batches: a seeded shuffle per pass over its shard, the last partial batch
    dropped; a new pass at every schedule epoch and whenever the shard runs out."""

    def __init__(self, shard, batch, ipe, seed, rank):
        self.shard, self.batch, self.ipe, self.seed, self.rank = shard, batch, ipe, seed, rank
        self.pass_, self.epoch = 0, 0
        self.start()

    def start(self):
        order = list(range(len(self.shard)))
        stream = 0x5EED000000000000 ^ (self.rank << 40) ^ (self.pass_ & 0xFFFFFFFFFF)
        shuffle(Rng(self.seed, stream), order)
        self.order, self.pos = order, 0

    def at(self, t):
        if t // self.ipe != self.epoch:
            self.epoch = t // self.ipe
            self.pass_ += 1
            self.start()
        if len(self.order) - self.pos < self.batch:
            self.pass_ += 1
            self.start()
        idx = [self.shard[p] for p in self.order[self.pos:self.pos + self.batch]]
        self.pos += self.batch
        return idx


# ---- the model and the local optimizer ----------------------------------------------------
class Task:
    def __init__(self, cfg, size):
        model = cfg["model"]
        kind, dims = model.split(":")
        if kind != "logreg":
            raise SystemExit("reference: --model %s (only logreg:IN-OUT)" % model)
        self.din, self.k = (int(v) for v in dims.split("-"))
        spec = dict(kv.split("=") for kv in cfg["data"].split(":", 1)[1].split(","))
        seed = int(cfg["seed"])
        x, y = gauss_train(int(spec["dim"]), int(spec["classes"]), int(spec["train"]),
                           float(spec.get("sep", 6)), float(spec.get("noise", 1)),
                           int(spec.get("seed", seed)))
        self.x, self.y = x.astype(np.float64), y
        batch = int(cfg["batch"])
        n = len(y)
        shards = [iid_shard(n, size, r, seed) for r in range(size)]
        batch = min([batch] + [len(s) for s in shards])
        ipe = max(1, n // size // batch)
        self.batches = [Batches(shards[r], batch, ipe, seed, r) for r in range(size)]
        self.lr = float(cfg["lr"])
        self.mom = float(cfg["momentum"])
        self.wd = float(cfg["weight-decay"])
        self.nesterov = cfg["nesterov"] == "true"

    def grad(self, rank, t, p):
        """The mean softmax cross-entropy gradient of rank's batch t at p = [W (K, D), b (K)]."""
        idx = self.batches[rank].at(t)
        xb, yb = self.x[idx], self.y[idx]
        w = p[:self.k * self.din].reshape(self.k, self.din)
        logits = xb @ w.T + p[self.k * self.din:]
        logits -= logits.max(axis=1, keepdims=True)
        prob = np.exp(logits)
        prob /= prob.sum(axis=1, keepdims=True)
        prob[np.arange(len(yb)), yb] -= 1.0
        prob /= len(yb)
        return np.concatenate([(prob.T @ xb).ravel(), prob.sum(axis=0)])

    def update(self, g, p, v):
        """PyTorch's SGD direction with weight decay on p: returns u (the step is -lr u)."""
        g = g + self.wd * p
        if self.mom == 0:
            return g
        v[:] = self.mom * v + g
        return g + self.mom * v if self.nesterov else v.copy()


# ---- the graphs ----------------------------------------------------------------------------
def out_peers(graph, n, i, t):
    if graph == "exp1peer":
        lg = max(1, math.ceil(math.log2(n)))
        return [(i + 2 ** (t % lg)) % n]
    if graph == "biring":
        return sorted({(i + 1) % n, (i - 1) % n} - {i})
    if graph == "bipartite":
        offs = [1] + [1 + 2 ** k for k in range(1, int(math.log2(n - 1)) + 1)]
        s = set()
        for o in offs:
            s |= {(i + o) % n, (i - o) % n}
        return sorted(s - {i})
    raise SystemExit("reference: --graph %s not mirrored" % graph)


# ---- the algorithms: each returns traj[t][i], the parameters after t iterations ----------
def run_pushsum(task, n, T, x0, graph, delay):
    z = [p.copy() for p in x0]
    w = [1.0] * n
    x = [p.copy() for p in x0]  # numerators x = w z
    vel = [np.zeros_like(p) for p in x0]
    inbox = {}  # round -> list of (dst, x share, w share)
    traj = [[p.copy() for p in z]]
    for t in range(T):
        grads = [task.grad(i, t, z[i]) for i in range(n)]
        for i in range(n):
            u = task.update(grads[i], z[i], vel[i])
            x[i] = x[i] - task.lr * u  # the paper's step on x
        for i in range(n):
            peers = out_peers(graph, n, i, t)
            share = 1.0 / (len(peers) + 1)
            for j in peers:
                inbox.setdefault(t + delay, []).append((j, share * x[i], share * w[i]))
            x[i] = share * x[i]
            w[i] = share * w[i]
        for j, xs, ws in inbox.pop(t, []):
            x[j] = x[j] + xs
            w[j] += ws
        z = [x[i] / w[i] for i in range(n)]
        traj.append([p.copy() for p in z])
    return traj


def run_dpsgd(task, n, T, x0, graph):
    x = [p.copy() for p in x0]
    vel = [np.zeros_like(p) for p in x0]
    deg = [len(out_peers(graph, n, i, 0)) for i in range(n)]
    traj = [[p.copy() for p in x]]
    for t in range(T):
        for i in range(n):
            x[i] = x[i] - task.lr * task.update(task.grad(i, t, x[i]), x[i], vel[i])
        new = []
        for i in range(n):  # Metropolis-Hastings weights
            acc, self_w = np.zeros_like(x[i]), 1.0
            for j in out_peers(graph, n, i, t):
                wij = 1.0 / (1 + max(deg[i], deg[j]))
                acc += wij * x[j]
                self_w -= wij
            new.append(self_w * x[i] + acc)
        x = new
        traj.append([p.copy() for p in x])
    return traj


def run_allreduce(task, n, T, x0):
    x = [p.copy() for p in x0]
    vel = [np.zeros_like(p) for p in x0]
    traj = [[p.copy() for p in x]]
    for t in range(T):
        g = sum(task.grad(i, t, x[i]) for i in range(n)) / n
        for i in range(n):
            x[i] = x[i] - task.lr * task.update(g, x[i], vel[i])
        traj.append([p.copy() for p in x])
    return traj


def run_localsgd(task, n, T, x0, period):
    x = [p.copy() for p in x0]
    vel = [np.zeros_like(p) for p in x0]
    traj = [[p.copy() for p in x]]
    for t in range(T):
        for i in range(n):
            x[i] = x[i] - task.lr * task.update(task.grad(i, t, x[i]), x[i], vel[i])
        if (t + 1) % period == 0:
            avg = sum(x) / n
            x = [avg.copy() for _ in range(n)]
        traj.append([p.copy() for p in x])
    return traj


def run_easgd(task, n, T, x0, tau, alpha, order):
    """EASGD / EAMSGD with a synchronous center: in lockstep every worker reads the same x~,
    then the adds land. order "alg1": the paper's Algorithm 1 (EASGD), the exchange at the
    point where iteration t's gradient was taken when tau divides t, then the gradient step
    from the moved x_i; "alg2": Algorithm 2's (EAMSGD) as the code runs it, the exchange after
    the step of iteration t when tau divides t + 1 (the exchange that opens iteration t + 1)."""
    x = [p.copy() for p in x0]
    center = x0[0].copy()
    vel = [np.zeros_like(p) for p in x0]
    traj = [[p.copy() for p in x]]

    def exchange():
        nonlocal center
        diffs = [alpha * (x[i] - center) for i in range(n)]
        for i in range(n):
            x[i] = x[i] - diffs[i]
        center = center + sum(diffs)

    for t in range(T):
        grads = [task.grad(i, t, x[i]) for i in range(n)]
        if order == "alg1" and t % tau == 0:
            exchange()
        for i in range(n):
            x[i] = x[i] - task.lr * task.update(grads[i], x[i], vel[i])
        if order == "alg2" and (t + 1) % tau == 0:
            exchange()
        traj.append([p.copy() for p in x])
    return traj


def run_adpsgd(task, n, T, x0, log):
    """Replays the logged pairings: log[active][t] = (passive, passive_steps, passive_seq)."""
    actives = sorted(log)
    passives = [i for i in range(n) if i not in log]
    x = [p.copy() for p in x0]
    snap = [p.copy() for p in x0]  # where each rank's next gradient is taken
    vel = [np.zeros_like(p) for p in x0]
    steps = [0] * n
    seq = [0] * n
    nxt = [0] * n
    at = {p: sorted((v[2], v[1]) for a in log for v in log[a].values() if v[0] == p)
          for p in passives}
    traj = [[None] * n for _ in range(T + 1)]
    for i in range(n):
        traj[0][i] = x0[i].copy()

    def local_step(i):
        t = nxt[i]
        x[i] = x[i] - task.lr * task.update(task.grad(i, t, snap[i]), x[i], vel[i])
        steps[i] += 1

    while any(nxt[i] < T for i in range(n)):
        progress = False
        for a in actives:
            t = nxt[a]
            if t >= T:
                continue
            rec = log[a].get(t)
            if rec is not None:  # the average first (Algorithm 1: steps 3 and 4)
                p, ps, pq = rec
                if steps[p] != ps or seq[p] != pq:
                    continue
                old = x[p].copy()
                x[p] = 0.5 * x[p] + 0.5 * x[a]
                x[a] = 0.5 * x[a] + 0.5 * old
                seq[p] += 1
            local_step(a)  # then the gradient taken at the end of round t-1
            snap[a] = x[a].copy()
            traj[t + 1][a] = x[a].copy()
            nxt[a] += 1
            progress = True
        for p in passives:
            t = nxt[p]
            if t >= T:
                continue
            pending = [s for q, s in at[p] if q >= seq[p]]
            if pending and pending[0] <= steps[p]:
                continue  # an exchange of this step count comes first
            local_step(p)
            snap[p] = x[p].copy()
            traj[t + 1][p] = x[p].copy()
            nxt[p] += 1
            progress = True
        if not progress:
            raise SystemExit("reference: the logged pairings cannot be replayed (stuck)")
    return traj


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        print(__doc__)
        return 2
    d, algo = args[0], args[1]
    opts = dict(zip(args[2::2], args[3::2]))
    tol = float(opts.get("--tol", "1e-5"))
    delay = int(opts.get("--delay", "0"))
    cp = configparser.ConfigParser(interpolation=None)
    cp.read(os.path.join(d, "config.ini"))
    cfg = {k: v.strip().strip('"') for s in cp.sections() for k, v in cp[s].items()}
    n = 0
    while os.path.exists(os.path.join(d, "rank-%d.traj.f32" % n)):
        n += 1
    if n < 2:
        print("reference: no DIR/rank-R.traj.f32 in %s" % d)
        return 2
    got = [np.fromfile(os.path.join(d, "rank-%d.traj.f32" % r), np.float32) for r in range(n)]
    x0 = [np.fromfile(os.path.join(d, "rank-%d.init.f32" % r), np.float32).astype(np.float64)
          for r in range(n)]
    P = len(x0[0])
    T = len(got[0]) // P - 1
    task = Task(cfg, n)
    graph = cfg.get("graph", "")
    if algo in ("sgp", "osgp"):
        traj = run_pushsum(task, n, T, x0, graph, delay)
    elif algo == "dpsgd":
        traj = run_dpsgd(task, n, T, x0, graph)
    elif algo == "allreduce":
        traj = run_allreduce(task, n, T, x0)
    elif algo == "localsgd":
        traj = run_localsgd(task, n, T, x0, int(cfg["period"]))
    elif algo in ("easgd", "eamsgd"):
        alpha = float(cfg["alpha"]) or 0.9 / n
        order = opts.get("--easgd-order", "alg1" if algo == "easgd" else "alg2")
        if order not in ("alg1", "alg2"):
            print("reference: --easgd-order %s (alg1 or alg2)" % order)
            return 2
        traj = run_easgd(task, n, T, x0, int(cfg["tau"]), alpha, order)
    elif algo == "adpsgd":
        log = {}
        for r in range(n):
            path = os.path.join(d, "rank-%d-adpsgd.csv" % r)
            if not os.path.exists(path):
                continue
            with open(path) as f:
                next(f)
                for line in f:
                    t, a, p, ps, pq = (int(v) for v in line.split(","))
                    log.setdefault(a, {})[t] = (p, ps, pq)
        if not log:
            print("reference: no pairings (DIR/rank-R-adpsgd.csv) in %s" % d)
            return 2
        traj = run_adpsgd(task, n, T, x0, log)
    else:
        print("reference: unknown algorithm %s" % algo)
        return 2
    worst, where = 0.0, None
    for t in range(T + 1):
        for r in range(n):
            ref = traj[t][r]
            hs = got[r][t * P:(t + 1) * P].astype(np.float64)
            dev = float(np.max(np.abs(hs - ref)) / max(np.max(np.abs(ref)), 1e-30))
            if dev > worst:
                worst, where = dev, (t, r)
    moved = float(np.max(np.abs(traj[T][0] - traj[0][0])) / np.max(np.abs(traj[0][0])))
    print("%s n=%d: %d iterations, max relative deviation %.3g (iteration %s, rank %s); "
          "the reference moved %.3g" % (algo, n, T, worst, where and where[0],
                                        where and where[1], moved))
    return 0 if worst <= tol else 1


if __name__ == "__main__":
    sys.exit(main())
