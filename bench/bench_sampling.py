"""libkaio token sampling against PyTorch on the same logits, same process.

    python3 bench/bench_sampling.py --lib build-gpu/src/libkaio.so [--old OLD.so] [--iters 25]
        [--other NAME=LIB.so ...]

Modes (V = 128256, B in {1, 32, 128}, f32, f16 and bf16 logits):
  greedy   kaio (temperature 0)       vs torch.argmax
  top-k 50 kaio (T = 1, top_k = 50)   vs torch.topk + softmax + multinomial
  top-p .9 kaio (T = 1, top_p = 0.9)  vs sort, softmax, cumsum, mask, multinomial
  min-p .1 kaio (T = 1, min_p = 0.1)  vs softmax, max, mask, multinomial
--old times a second libkaio (e.g. the previous build) in the same process,
and checks that it draws the same tokens from the same call; each --other
NAME=LIB.so (repeatable: variants of one change) adds a column the same way.
Timing: a pass of --calls calls (each on the next copy of the logits; enough
copies to exceed the 50 MiB L2, so every call reads from memory) is captured
in a CUDA graph; the median over --iters replays, per call, so host dispatch
counts for no one.  Where capture fails the pass runs eagerly behind a GPU
sleep long enough for the host to queue it (listed at the end).  "read %" is
the bytes of logits / kaio time as a share of a device copy of the same
bytes (torch dst.copy_(src), timed the same eager way: captured, a copy
becomes a slower copy-engine transfer).
"""

import argparse
import ctypes as C
import statistics
import sys
import time

import torch

KAIO_DTYPE = {torch.float16: 2, torch.bfloat16: 3, torch.float32: 1, torch.int32: 6}
RANDOM, TOP_K, TOP_P, MIN_P = 1, 2, 4, 8
FALLBACKS = []


class Tensor(C.Structure):
    _fields_ = [("buffer", C.c_void_p), ("offset_bytes", C.c_uint64), ("dtype", C.c_int32),
                ("reserved", C.c_uint32), ("rows", C.c_int64), ("cols", C.c_int64),
                ("row_stride", C.c_int64)]


class Desc(C.Structure):
    _fields_ = [("struct_size", C.c_uint32), ("dtype", C.c_int32), ("batch", C.c_int64),
                ("vocab", C.c_int64), ("max_prev", C.c_int64), ("features", C.c_uint32),
                ("reserved", C.c_uint32)]


class Kaio:
    def __init__(self, path, capture_stream):
        self.lib = C.CDLL(path)
        self.lib.kaio_last_error.restype = C.c_char_p
        self.dev = C.c_void_p()
        self.check(self.lib.kaio_device_open(C.byref(self.dev), 0), "kaio_device_open")
        self.stream, self.capture = C.c_void_p(), C.c_void_p()
        for s, t in ((self.stream, torch.cuda.current_stream()), (self.capture, capture_stream)):
            self.check(self.lib.kaio_stream_wrap(C.byref(s), self.dev, C.c_void_p(t.cuda_stream)),
                       "kaio_stream_wrap")
        self.cur = self.stream

    def check(self, status, what):
        if status != 0:
            raise RuntimeError("%s failed (%d): %s" % (what, status, self.lib.kaio_last_error().decode()))

    def view(self, t, rows, cols):
        v = Tensor()
        if t is None:
            return v
        b = C.c_void_p()
        self.check(self.lib.kaio_buffer_wrap(C.byref(b), self.dev, C.c_uint64(t.data_ptr()),
                                             C.c_uint64(t.numel() * t.element_size())), "kaio_buffer_wrap")
        v.buffer, v.dtype, v.rows, v.cols, v.row_stride = b.value, KAIO_DTYPE[t.dtype], rows, cols, cols
        return v

    def op(self, dtype, b, v, features):
        d = Desc()
        self.check(self.lib.kaio_sampling_desc_init(C.byref(d), C.sizeof(Desc)), "desc_init")
        d.dtype, d.batch, d.vocab, d.features = KAIO_DTYPE[dtype], b, v, features
        o = C.c_void_p()
        self.check(self.lib.kaio_op_create_sampling(C.byref(o), self.dev, C.byref(d)), "create")
        return o

    def launcher(self, op, views):
        arr = (Tensor * 12)(*views)
        return lambda: self.check(self.lib.kaio_op_launch(op, self.cur, arr, C.c_size_t(12)),
                                  "kaio_op_launch")


def eager_us(calls, iters):
    """Per call, in µs: the calls queued behind a GPU sleep, so the GPU runs
    them back to back whatever the host's dispatch costs."""
    for c in calls:
        c()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for c in calls:
        c()
    host_s = time.perf_counter() - t0
    torch.cuda.synchronize()
    cycles = int(max(2e5, 3.0 * host_s * 2e9))     # > 1.5x the host time at <= 2 GHz
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(cycles)
        a.record()
        for c in calls:
            c()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000.0 / len(calls))
    return statistics.median(times)


def graph_us(calls, iters, capture_stream, kaios, name):
    for _ in range(2):
        for c in calls:
            c()
    torch.cuda.synchronize()
    try:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=capture_stream):
            for k in kaios:
                k.cur = k.capture
            try:
                for c in calls:
                    c()
            finally:
                for k in kaios:
                    k.cur = k.stream
    except Exception as e:  # noqa: BLE001 - timed eagerly instead, and reported
        FALLBACKS.append("%s: %s" % (name, str(e).split("\n")[0][:100]))
        torch.cuda.synchronize()
        return eager_us(calls, iters)
    g.replay()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000.0 / len(calls))
    return statistics.median(times)


def torch_topp(x, p):
    probs = torch.softmax(x.float(), -1)
    sp, si = torch.sort(probs, -1, descending=True)
    cum = torch.cumsum(sp, -1)
    sp = sp.masked_fill((cum - sp) >= p, 0)      # not sp[mask] = 0: that syncs (nonzero)
    return si.gather(-1, torch.multinomial(sp, 1))


def torch_topk(x, k):
    v, i = torch.topk(x.float(), k, -1)
    return i.gather(-1, torch.multinomial(torch.softmax(v, -1), 1))


def torch_minp(x, mp):
    probs = torch.softmax(x.float(), -1)
    probs = probs.masked_fill(probs < mp * probs.amax(-1, keepdim=True), 0)
    return torch.multinomial(probs, 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().split("\n")[0])
    ap.add_argument("--lib", required=True)
    ap.add_argument("--old", help="a second libkaio to time side by side")
    ap.add_argument("--other", action="append", default=[], metavar="NAME=LIB",
                    help="more libkaio builds to time side by side (repeatable)")
    ap.add_argument("--iters", type=int, default=25)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--only", help="comma list of modes to run (default: all)")
    ap.add_argument("--batches", help="comma list of batch sizes to run (default: 1,32,128)")
    args = ap.parse_args()
    cap = torch.cuda.Stream()
    libs = [("new", Kaio(args.lib, cap))] + ([("old", Kaio(args.old, cap))] if args.old else [])
    libs += [(o.split("=", 1)[0], Kaio(o.split("=", 1)[1], cap)) for o in args.other]
    kaios = [k for _, k in libs]
    V = 128256
    head = "| dtype | B | mode | " + " | ".join("kaio %s us" % n for n, _ in libs) + \
        " | torch us | speed-up | read % of copy | copy us |" + (" tokens = old |" if args.old else "")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for B in [int(b) for b in (args.batches or "1,32,128").split(",")]:
            nbytes = B * V * torch.tensor([], dtype=dtype).element_size()
            ncopies = max(2, (120 << 20) // nbytes + 1)
            calls = max(args.calls, ncopies)
            xs = [torch.randn(B, V, device="cuda", dtype=dtype) * 3 for _ in range(ncopies)]
            dst = torch.empty_like(xs[0])
            copy_us = eager_us([lambda i=i: dst.copy_(xs[i % ncopies]) for i in range(calls)], args.iters)
            temp = torch.ones(B, device="cuda")
            topk = torch.full((B,), 50, dtype=torch.int32, device="cuda")
            topp = torch.full((B,), 0.9, device="cuda")
            minp = torch.full((B,), 0.1, device="cuda")
            rng = torch.randint(0, 2 ** 31, (B, 4), dtype=torch.int32, device="cuda")
            tokens = torch.empty(B, dtype=torch.int32, device="cuda")
            modes = [
                ("greedy", 0, lambda x: torch.argmax(x, -1)),
                ("top-k 50", RANDOM | TOP_K, lambda x: torch_topk(x, 50)),
                ("top-p 0.9", RANDOM | TOP_P, lambda x: torch_topp(x, 0.9)),
                ("top-k 50 + top-p 0.9", RANDOM | TOP_K | TOP_P, None),
                ("min-p 0.1", RANDOM | MIN_P, lambda x: torch_minp(x, 0.1)),
            ]
            for name, feat, ref in modes:
                if args.only and name not in args.only.split(","):
                    continue
                res, drawn = [], []
                for lname, kaio in libs:
                    xviews = [kaio.view(x, B, V) for x in xs]
                    c = dict(t=kaio.view(temp, B, 1), k=kaio.view(topk, B, 1), p=kaio.view(topp, B, 1),
                             m=kaio.view(minp, B, 1), r=kaio.view(rng, B, 4), o=kaio.view(tokens, B, 1))
                    op = kaio.op(dtype, B, V, feat)
                    e = Tensor()
                    fns = []
                    for i in range(calls):
                        fns.append(kaio.launcher(op, [
                            xviews[i % ncopies], c["t"] if feat & RANDOM else e, c["k"] if feat & TOP_K else e,
                            c["p"] if feat & TOP_P else e, c["m"] if feat & MIN_P else e,
                            c["r"] if feat & RANDOM else e, e, e, e, c["o"], e, e]))
                    res.append(graph_us(fns, args.iters, cap, kaios, "kaio %s %s" % (lname, name)))
                    fns[0]()        # the same call on each library: the same tokens
                    torch.cuda.synchronize()
                    drawn.append(tokens.clone())
                    kaio.lib.kaio_op_destroy(op)
                tus = float("nan")
                if ref:
                    tus = graph_us([lambda i=i: ref(xs[i % ncopies]) for i in range(calls)], args.iters, cap,
                                   kaios, "torch " + name)
                same = ""
                if args.old:
                    same = " %s |" % ("yes" if torch.equal(drawn[0], drawn[1]) else
                                      "NO (%d of %d rows differ)" % (int((drawn[0] != drawn[1]).sum()), B))
                print("| %s | %d | %s | %s | %.1f | %.2fx | %.0f%% | %.1f |%s" % (
                    str(dtype).replace("torch.", ""), B, name, " | ".join("%.1f" % r for r in res), tus,
                    tus / res[0], 100 * copy_us / res[0], copy_us, same))
                sys.stdout.flush()
            del xs
            torch.cuda.empty_cache()
    for f in FALLBACKS:
        print("timed eagerly (graph capture failed): " + f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
