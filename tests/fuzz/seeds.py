#!/usr/bin/env python3
"""tests/fuzz/seeds.py: write the seed corpora in tests/fuzz/corpus/NAME/ (small valid inputs
and edge cases, in each harness's input layout: see the comment at the top of fuzz_NAME.c).

The seeds are committed; run this again after changing a harness's input layout:
    python3 tests/fuzz/seeds.py
"""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus")
KEY = b"0123456789abcdef0123456789abcdef"


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def u64(v):
    return struct.pack("<Q", v & (2**64 - 1))


def fnv1a(data, h=0xCBF29CE484222325):
    for c in data:
        h ^= c
        h = (h * 0x100000001B3) & (2**64 - 1)
    return h


# ---- config: INI, NUL, flags separated by NULs
def config():
    ini = ("epochs = 5\nlr = 0.01\n\n[training]\nmomentum = 0.5  # trailing comment\n"
           "; a comment\nstraggler = slow:1:x2\nstraggler = pause:all:p=0.1:exp=10ms\n"
           "tags =\ndevice = cuda_2\nout = \"/tmp/a b # c\"\n[run]\nname = foo\n"
           "ratio = -2.5e0\nnesterov = off\n")
    args = ["--lr=0.5", "-n", "4", "--no-nesterov", "--straggler", "crash:1:iter=3", "pos1",
            "--", "hearsay", "train"]
    put("config", "full", ini + "\0" + "\0".join(args))
    put("config", "flags", "\0" + "\0".join(["--epochs", "7", "-vo", "out", "--tags=x",
                                             "--ratio", "10", "-n8", "--run.name", "r"]))
    put("config", "help", "\0--help")
    put("config", "empty", "")
    put("config", "quotes", 'out = "a\\"b\\\\c"\ntags = ""\ntags = "x;y"\nseed = -3\n')
    put("config", "sections", "[Run: the launcher]\nworkers = 2\n[run]\nname = \"  sp  \"\n")
    put("config", "bad_range", "lr = -1\n")
    put("config", "bad_key", "unknown = 3\n")
    put("config", "bad_section", "[sec\nepochs = 2\n")
    put("config", "bad_line", "just words\n")
    put("config", "bad_flag", "\0--epoch\0005")
    put("config", "bad_enum", "device = tpu\n")
    put("config", "too_many_pos", "\0a\0b\0c")


# ---- topo_spec: n byte, flags byte, 8 seed bytes, spec
def topo_spec():
    specs = ["ring", "biring", "exp", "exp1peer", "bipartite", "hypercube", "complete", "star:2",
             "torus:4x4", "mesh:2x8", "regular:3", "er:0.3", "ws:4:0.2", "hier:4", "hier:2/3/3",
             "seq:ring+exp", "random:2", "torus", "hier"]
    for i, s in enumerate(specs):
        put("topo_spec", "ok_%02d_%s" % (i, s.replace(":", "_").replace("/", "_")),
            bytes([15, 0x40 if i % 3 == 0 else 2 if s == "biring" else 0]) + u64(i) + s.encode())
    put("topo_spec", "hier_hosts", bytes([7, 0x20]) + u64(1) + b"hier")
    for i, s in enumerate(["torus:0x0", "regular:99", "er:2", "star:100", "", "ws:99", "seq:",
                           "random:0", "hier:3/3", "mesh:4x5"]):
        put("topo_spec", "bad_%02d" % i, bytes([15, 0]) + u64(0) + s.encode())


# ---- topo_edges: byte (n & 0x3f, mixing << 6), file
def topo_edges():
    put("topo_edges", "ring4", b"\x00" + b"n 4\n0 1\n1 2\n2 3\n3 0\n")
    put("topo_edges", "weighted", b"\x00" + b"0 1 0.5\n1 0 0.5\n0 0 0.5\n1 1 0.5\n")
    put("topo_edges", "comments", b"\x02" + b"# two ranks\n0 1  # edge\n\n1 0\n")
    put("topo_edges", "metropolis", b"\x80" + b"0 1\n1 0\n1 2\n2 1\n2 0\n0 2\n")
    put("topo_edges", "uniform", b"\x44" + b"0 1\n1 2\n2 3\n3 0\n0 2\n")
    put("topo_edges", "self_weight", b"\xc0" + b"n 3\n0 1 0.25\n1 2 0.5\n2 0 0.75\n0 0 0.75\n")
    for i, s in enumerate([b"0 0\n", b"n 1\n", b"a b\n", b"0 1\n" + b"#" * 2000 + b"\n",
                           b"0 1 2\n1 0 0.5\n", b"0 1\n", b"0 1 nan\n1 0 0.5\n", b""]):
        put("topo_edges", "bad_%02d" % i, b"\x00" + s)


# ---- straggler: ranks byte, rank byte, 8 seed bytes, specs by line
def straggler():
    head = bytes([3, 1]) + u64(42)
    put("straggler", "all", head + b"slow:1:x4\npause:all:p=0.1:exp=200ms\nonce:0:iter=5:1.5s\n"
        b"hetero:1-3\ncrash:2:iter=50")
    put("straggler", "lognormal", head + b"pause:0,2-3:p=1:lognormal=median=10ms,sigma=0.5:max=1s"
        b"\npause:1:p=0.5:lognormal=-3,0.5\npause:all:p=0.2:lognormal=mean=10ms,sigma=1")
    put("straggler", "fixed", head + b"pause:all:p=0.2:fixed=20ms\nonce:1:iter=0:500us\n")
    put("straggler", "crash_me", bytes([1, 0]) + u64(0) + b"crash:0:iter=3")
    for i, s in enumerate([b"pause:1:p=1.5:fixed=1s", b"slow:9:x2", b"crash:1:iter=-1",
                           b"slow:1:x0.5", b"hetero:3-1", b"once:0:iter=1:-2s", b"pause:all:p=0.1",
                           b"slow:all:x1e400", b""]):
        put("straggler", "bad_%02d" % i, head + s)


# ---- shaping: n byte, spec
def shaping():
    for i, s in enumerate(["latency=2ms,jitter=1ms,bw=1Gbit; 0-3:latency=5ms; host1:bw=100Mbit",
                           "*:bw=10MB/s", "0>1:latency=100us", "bw=1KiB", "latency=1s,jitter=0ns",
                           " x-y : bw = 2GiB/s ; 2-1:jitter=3us", "", "bw=8bit"]):
        put("shaping", "ok_%02d" % i, bytes([7]) + s.encode())
    for i, s in enumerate(["bw=0bit", "latency=-1ms", "latency=5", "bw=1Tbit", "0-:bw=1MB",
                           "latency=1ms,", ";", "0>99:latency=1ms,jitter"]):
        put("shaping", "bad_%02d" % i, bytes([7]) + s.encode())


# ---- data_spec: spec
def data_spec():
    for i, s in enumerate(["gauss", "gauss:dim=8,classes=3,train=50,test=10,sep=5,noise=1,seed=3",
                           "gauss:dim=2,classes=5,train=20,test=5,mc=100",
                           "teacher:dim=8,hidden=4,classes=3,train=40,test=10,noise=0.1",
                           "teacher", "mnist:data/mnist,norm=train,train=100,test=10",
                           "cifar10:dir=/x,norm=none", "cifar10:/data/c10,norm=known",
                           "digits:size=8", "digits:/x/digits.csv.gz,norm=none,test=5",
                           "npy:/x/arrays,classes=3,norm=train,train=10"]):
        put("data_spec", "ok_%02d" % i, s)
    for i, s in enumerate(["gauss:dim=0", "gauss:dim=8,dim=9", "foo", "mnist", "gauss:sep=nan",
                           "gauss:,", "teacher:noise=1", "mnist:d,norm=zz", "gauss:train=1e3",
                           "digits:size=9", "digits:norm=known", "digits:dir=x", "npy",
                           "npy:d,classes=1"]):
        put("data_spec", "bad_%02d" % i, s)


# ---- shard: workers, classes, 8 seed bytes, n-1, labels, spec
def shard():
    labels = bytes(i % 10 for i in range(40))
    for i, s in enumerate(["iid", "dirichlet:0.5", "dirichlet:0.1,min=2", "dirichlet:100"]):
        put("shard", "ok_%02d" % i, bytes([3, 8]) + u64(i) + bytes([39]) + labels + s.encode())
    put("shard", "one_sample", bytes([0, 0]) + u64(0) + bytes([0, 1]) + b"dirichlet:1")
    for i, s in enumerate(["dirichlet:0", "dirichlet:-1", "iid:3", "dirichlet:0.5,min=1000",
                           "dirichlet:", "dirichlet:0.5,max=2", "dirichlet:inf"]):
        put("shard", "bad_%02d" % i, bytes([3, 8]) + u64(0) + bytes([39]) + labels + s.encode())


# ---- model_spec: c, h, w, classes, batch bytes (ranges 1+b%4, 1+b%40, 1+b%40, 1+b%20, 1+b%3)
def model_spec():
    mnist = bytes([0, 27, 27, 9, 1])
    for i, s in enumerate(["logreg:784-10", "mlp:784-32-10",
                           "seq:conv8k3p1-relu-maxpool2-flatten-fc10",
                           "seq:conv4k5s2-tanh-gap-fc10", "seq:fc16-relu-fc10", "lenet5"]):
        put("model_spec", "mnist_%02d" % i, mnist + s.encode())
    small = bytes([2, 7, 7, 4, 2])  # 3x8x8, 5 classes
    for i, s in enumerate(["seq:block8s2-gap-fc5", "seq:conv8k3p1-block8-block16s2-gap-fc5",
                           "resnet20", "seq:maxpool2s2-flatten-fc5", "resnet20-fixup",
                           "seq:conv8k3-bn-relu-res8-res16s2-gap-fc5", "seq:bn-flatten-fc5",
                           "seq:flatten-fc5-bn", "seq:fc8-bn-tanh-fc5"]):
        put("model_spec", "small_%02d" % i, small + s.encode())
    for i, s in enumerate(["mlp:784-10-9", "logreg:10-10", "seq:fc0", "seq:conv3k9-fc10",
                           "seq:", "lenet", "seq:maxpool64-fc10", "mlp:784--10"]):
        put("model_spec", "bad_%02d" % i, mnist + s.encode())


# ---- mnist: LE32 image length, idx3 images, idx1 labels
def idx3(count, rows=28, cols=28, magic=0x803, pixels=None):
    body = pixels if pixels is not None else bytes((i * 7) % 256 for i in range(count * rows * cols))
    return struct.pack(">IIII", magic, count, rows, cols) + body


def idx1(labels, magic=0x801):
    return struct.pack(">II", magic, len(labels)) + bytes(labels)


def mnist():
    def pair(img, lab):
        return struct.pack("<I", len(img)) + img + lab
    put("mnist", "one", pair(idx3(1), idx1([7])))
    put("mnist", "two", pair(idx3(2), idx1([0, 9])))
    put("mnist", "truncated", pair(idx3(2)[:-5], idx1([0, 9])))
    put("mnist", "trailing", pair(idx3(1) + b"x", idx1([1])))
    put("mnist", "swapped", pair(idx1([1]), idx3(1)))
    put("mnist", "gzip", pair(b"\x1f\x8b\x08\x00" + bytes(20), idx1([1])))
    put("mnist", "zero", pair(idx3(0), idx1([])))
    put("mnist", "label10", pair(idx3(1), idx1([10])))
    put("mnist", "count_mismatch", pair(idx3(1), idx1([1, 2])))
    put("mnist", "dims", pair(idx3(1, 32, 32), idx1([1])))
    put("mnist", "short", pair(b"\x00\x00\x08\x03\x00", b"\x00\x00"))


# ---- cifar10: byte (nfiles-1 | norm << 2), then per file but the last LE16 length + bytes
# ---- npy: classes byte, u32 length of x, x (.npy), y (.npy)
def npy_file(descr, shape, data, version=1):
    dims = "".join("%d, " % d for d in shape) if len(shape) != 1 else "%d," % shape[0]
    d = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims.rstrip(", ")
                                                                       if len(shape) > 1 else dims)
    pre = 12 if version > 1 else 10
    pad = (64 - (pre + len(d) + 1) % 64) % 64
    hdr = (d + " " * pad + "\n").encode()
    ln = struct.pack("<I", len(hdr)) if version > 1 else struct.pack("<H", len(hdr))
    return b"\x93NUMPY" + bytes([version, 0]) + ln + hdr + data


def npy():
    def pair(classes, x, y):
        return bytes([classes]) + struct.pack("<I", len(x)) + x + y
    f4 = struct.pack("<6f", 0.5, -1, 2, 3.25, 0, 1e3)
    y2 = npy_file("<i8", [2], struct.pack("<2q", 0, 1))
    put("npy", "f4_2x3", pair(0, npy_file("<f4", [2, 3], f4), y2))
    put("npy", "u1_2x1x3", pair(3, npy_file("|u1", [2, 1, 3], bytes([0, 9, 255, 7, 128, 1])),
                                npy_file("|u1", [2], bytes([2, 0]))))
    put("npy", "f8_nchw", pair(0, npy_file("<f8", [2, 1, 1, 3], struct.pack("<6d", *range(6))),
                               npy_file("<i2", [2], struct.pack("<2h", 1, 0)), ))
    put("npy", "v2", pair(0, npy_file("<f4", [2, 3], f4, version=2), y2))
    put("npy", "fortran", pair(0, npy_file("<f4", [2, 3], f4).replace(b"False", b"True "), y2))
    put("npy", "big_endian", pair(0, npy_file(">f4", [2, 3], f4), y2))
    put("npy", "truncated", pair(0, npy_file("<f4", [2, 3], f4)[:-3], y2))
    put("npy", "trailing", pair(0, npy_file("<f4", [2, 3], f4) + b"xx", y2))
    put("npy", "label_range", pair(2, npy_file("<f4", [2, 3], f4),
                                   npy_file("<i4", [2], struct.pack("<2i", 0, 5))))
    put("npy", "count_mismatch", pair(0, npy_file("<f4", [2, 3], f4),
                                      npy_file("<i8", [1], struct.pack("<q", 1))))
    put("npy", "nan", pair(0, npy_file("<f4", [1, 2], struct.pack("<2f", 1, float("nan"))),
                           npy_file("<i8", [1], struct.pack("<q", 1))))
    put("npy", "gzip", pair(0, b"\x1f\x8b\x08\x00" + bytes(20), y2))


def cifar10():
    def rec(label, seed=0):
        return bytes([label]) + bytes((i * 13 + seed) % 256 for i in range(3072))
    put("cifar10", "one", bytes([0]) + rec(3))
    put("cifar10", "two_files", bytes([1 | 4]) + struct.pack("<H", 3073) + rec(0) + rec(9, 1))
    put("cifar10", "three_files", bytes([2 | 8]) + struct.pack("<H", 3073) + rec(1) +
        struct.pack("<H", 3073) + rec(2, 5) + rec(3, 7))
    put("cifar10", "cifar100", bytes([0]) + rec(3) + b"\x00")
    put("cifar10", "label10", bytes([0]) + rec(10))
    put("cifar10", "empty", bytes([0]))
    put("cifar10", "partial", bytes([0]) + rec(1)[:1000])


# ---- checkpoint: flags (bit 0: fix the checksum, bit 1: rewrite), file
def ckpt(rank=0, size=2, it=10, algo=b"sgp", np_=3, vel=True, state=b"\x01" * 8, magic=b"HSCK",
         version=2, fix=True, params_bytes=None, bn=b""):
    params = struct.pack("<%df" % np_, *[0.5 * i for i in range(np_)])
    velocity = struct.pack("<%df" % np_, *[-1.0] * np_) if vel else b""
    pb = 4 * np_ if params_bytes is None else params_bytes
    def hdr(cs):
        return (magic + struct.pack("<Iiiq", version, rank, size, it) + algo.ljust(16, b"\0") +
                struct.pack("<QQQQQQ", np_, pb, len(velocity), len(state), len(bn), cs))
    payload = params + velocity + state + bn
    cs = fnv1a(payload, fnv1a(hdr(0))) if fix else 0
    return hdr(cs) + payload


def checkpoint():
    put("checkpoint", "valid", b"\x02" + ckpt())
    put("checkpoint", "valid_fix", b"\x03" + ckpt(fix=False))
    put("checkpoint", "no_velocity", b"\x02" + ckpt(vel=False, state=b"", algo=b"local"))
    put("checkpoint", "zero_params", b"\x02" + ckpt(np_=0, vel=False, state=b"", size=1, it=0))
    put("checkpoint", "bad_checksum", b"\x00" + ckpt(fix=False))
    put("checkpoint", "bad_magic", b"\x01" + ckpt(magic=b"HSCX"))
    put("checkpoint", "version1", b"\x01" + ckpt(version=1))
    put("checkpoint", "with_bn", b"\x02" + ckpt(bn=struct.pack("<4f", 0.0, 0.5, 1.0, 2.0)))
    put("checkpoint", "odd_bn", b"\x01" + ckpt(bn=b"\x01\x02\x03"))
    put("checkpoint", "truncated", b"\x01" + ckpt()[:-3])
    put("checkpoint", "rank_ge_size", b"\x01" + ckpt(rank=2, size=2))
    put("checkpoint", "negative_iter", b"\x01" + ckpt(it=-5))
    put("checkpoint", "huge_params", b"\x01" + ckpt(np_=0, vel=False, state=b"",
                                                    params_bytes=1 << 42)[:88])
    put("checkpoint", "long_algo", b"\x03" + ckpt(algo=b"x" * 16))
    put("checkpoint", "header_only", b"\x01" + ckpt()[:88])


# ---- rendezvous frames
def rdv_hdr(typ, rank=0, seq=0, length=0, magic=0x48535244, version=1):
    return struct.pack(">IHHIIQ", magic, version, typ, rank, seq, length)


def hello(size, key=KEY, pid=1234, host=b"node1"):
    return key + struct.pack(">II", size, pid) + host.ljust(64, b"\0")


def rdv_wire():
    put("rdv_wire", "hello", rdv_hdr(1, 0, 0, 104) + hello(4) + b"127.0.0.1:5000")
    put("rdv_wire", "gather", rdv_hdr(3, 2, 1, 16) + bytes(104) + b"[::1]:80")
    put("rdv_wire", "result", rdv_hdr(4, 0, 3, 4096) + hello(2, host=b"h" * 64) + b"host:65535")
    put("rdv_wire", "welcome", rdv_hdr(2, 0, 0, 256) + bytes(104) + b"a:1")
    put("rdv_wire", "error", rdv_hdr(6, 0, 0, 20) + bytes(104) + b"host:0")
    put("rdv_wire", "bye", rdv_hdr(5, 1) + bytes(104) + b":1")
    put("rdv_wire", "bad_len", rdv_hdr(1, 0, 0, 105) + bytes(104) + b"[::1:80")
    put("rdv_wire", "bad_magic", rdv_hdr(1, magic=0x12345678) + bytes(104) + b"x:99999")


def rdv_server():
    def conn(size, rank, rounds):
        b = rdv_hdr(1, rank, 0, 104) + hello(size)
        for seq, n in rounds:
            b += rdv_hdr(3, rank, seq, n) + bytes([rank + 1]) * n
        return b + rdv_hdr(5, rank)
    put("rdv_server", "one_rank", bytes([0]) + conn(1, 0, [(1, 4), (2, 0)]))
    c0, c1 = conn(2, 0, [(1, 8)]), conn(2, 1, [(1, 8)])
    put("rdv_server", "two_ranks", bytes([1 | 4]) + struct.pack("<H", len(c0)) + c0 + c1)
    cs = [conn(3, r, [(1, 2), (2, 3)]) for r in range(3)]
    put("rdv_server", "three_ranks", bytes([2 | 8]) + struct.pack("<H", len(cs[0])) + cs[0] +
        struct.pack("<H", len(cs[1])) + cs[1] + cs[2])
    put("rdv_server", "bad_key", bytes([0]) + rdv_hdr(1, 0, 0, 104) + hello(1, key=b"f" * 32))
    put("rdv_server", "garbage", bytes([0]) + b"G" * 128)
    put("rdv_server", "wrong_size", bytes([1]) + rdv_hdr(1, 0, 0, 104) + hello(3))
    dup = rdv_hdr(1, 0, 0, 104) + hello(2)
    put("rdv_server", "duplicate", bytes([1 | 4]) + struct.pack("<H", len(dup)) + dup + dup)
    put("rdv_server", "gather_first", bytes([0]) + rdv_hdr(3, 0, 1, 4) + b"abcd")
    put("rdv_server", "wrong_round", bytes([0]) + conn(1, 0, [(2, 4)]))
    put("rdv_server", "partial", bytes([0]) + (rdv_hdr(1, 0, 0, 104) + hello(1))[:50])


def rdv_client():
    def launcher(job, lens, extra=b""):
        b = rdv_hdr(2, 0, 0, 64 * job) + b"".join(
            ("host%d" % r).encode().ljust(64, b"\0") for r in range(job))
        for seq, n in enumerate(lens, 1):
            b += rdv_hdr(4, 0, seq, n * job) + bytes([seq]) * (n * job)
        return b + extra
    put("rdv_client", "one_rank", bytes([0, 4, 0, 16]) + launcher(1, [4, 0, 16]))
    put("rdv_client", "two_ranks", bytes([1 | 4, 3, 3, 1]) + launcher(2, [3, 3, 1]))
    put("rdv_client", "three_ranks", bytes([2 | 8, 2, 5, 0]) + launcher(3, [2, 5, 0]))
    msg = b"rendezvous timeout after 5 s: rank 1 never connected"
    put("rdv_client", "error", bytes([1, 0, 0, 0]) + rdv_hdr(6, 0, 0, len(msg)) + msg)
    put("rdv_client", "error_in_round", bytes([0, 4, 0, 0]) + launcher(1, []) +
        rdv_hdr(6, 0, 0, 5) + b"gone!")
    put("rdv_client", "wrong_seq", bytes([0, 4, 4, 4]) + launcher(1, []) + rdv_hdr(4, 0, 7, 4) +
        b"abcd")
    put("rdv_client", "huge_result", bytes([0, 4, 4, 4]) + launcher(1, []) +
        rdv_hdr(4, 0, 1, 1 << 34))
    put("rdv_client", "short_welcome", bytes([1, 0, 0, 0]) + rdv_hdr(2, 0, 0, 64) + bytes(64))
    put("rdv_client", "closed", bytes([0, 1, 1, 1]))


# ---- wire headers
def ps_hdr(kind, sender, length, extra=0, it=5, weight=0.5, magic=0x53505348, version=1):
    return (struct.pack("<IHHiIqdQ", magic, version, kind, sender, extra, it, weight, length) +
            struct.pack("<11d", *[0.0] * 11))


def ps_wire():
    def inp(nbytes, n, kind, src, hdr):
        return u64(nbytes) + u64(n) + bytes([kind, src & 0xff]) + hdr
    put("ps_wire", "gossip", inp(128 + 40, 10, 1, 3, ps_hdr(1, 3, 10)))
    put("ps_wire", "final", inp(128 + 40 + 16, 10, 4, 0, ps_hdr(4, 0, 10, 16)))
    put("ps_wire", "eval_empty", inp(128, 0, 3, 1, ps_hdr(3, 1, 0)))
    put("ps_wire", "short", inp(100, 10, 1, 3, ps_hdr(1, 3, 10)))
    put("ps_wire", "wrong_kind", inp(168, 10, 2, 3, ps_hdr(1, 3, 10)))
    put("ps_wire", "wrong_sender", inp(168, 10, 1, 2, ps_hdr(1, 3, 10)))
    put("ps_wire", "bad_magic", inp(168, 10, 1, 3, ps_hdr(1, 3, 10, magic=1)))


def el_hdr(kind, sender, shard, count, seq=0, magic=0x4C455348, version=1):
    return struct.pack("<IHHiiQQqdQQ", magic, version, kind, sender, shard, count, seq, 7, 0.25,
                       0, 0)


def el_wire():
    def inp(nbytes, src, hdr):
        return u64(nbytes) + bytes([src & 0xff]) + hdr
    put("el_wire", "add", inp(64 + 40, 2, el_hdr(2, 2, 0, 10, 3)))
    put("el_wire", "read", inp(64, 1, el_hdr(1, 1, 1, 0)))
    put("el_wire", "any_source", inp(64 + 4, -1, el_hdr(8, 5, 0, 1)))
    put("el_wire", "short", inp(40, 2, el_hdr(2, 2, 0, 10)))
    put("el_wire", "wrong_sender", inp(104, 1, el_hdr(2, 2, 0, 10)))
    put("el_wire", "bad_version", inp(104, 2, el_hdr(2, 2, 0, 10, version=2)))


# ---- regressions: inputs that crashed a harness before the fix named (issue 17)
def regressions():
    # gossip/shaping.c: bw * 2e-3 converted to size_t overflowed (UBSan float-cast-overflow at
    # hs_shaper_chunk), a zero chunk then divided by in gossip/fabric_msg.c (SIGFPE).
    put("shaping", "regress_bw_1e30Gbit", bytes([1]) + b"bw=1e30Gbit")
    put("shaping", "regress_bw_1e50B", bytes([7]) + b"*:bw=1" + b"0" * 50 + b"B/s")
    # optim/elastic_wire.h: 64 + count * 4 wrapped for count = 2^62 (and 2^63), so a 64-byte
    # message passed as one carrying 2^62 floats.
    put("el_wire", "regress_count_2p62", u64(64) + bytes([2]) + el_hdr(2, 2, 0, 1 << 62))
    put("el_wire", "regress_count_2p63_1", u64(68) + bytes([2]) + el_hdr(2, 2, 0, (1 << 63) + 1))
    # optim/ps_wire.h: 128 + n * 4 + extra wrapped for n = 2^62 (a receiver expecting that many
    # floats; latent).
    put("ps_wire", "regress_n_2p62", u64(128) + u64(1 << 62) + bytes([1, 3]) +
        ps_hdr(1, 3, 1 << 62))


if __name__ == "__main__":
    for fn in (config, topo_spec, topo_edges, straggler, shaping, data_spec, shard, model_spec,
               mnist, cifar10, npy, checkpoint, rdv_wire, rdv_server, rdv_client, ps_wire, el_wire,
               regressions):
        fn()
    sys.exit(0)
