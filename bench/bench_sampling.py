"""libkaio token sampling against PyTorch on the same logits, same process,
same stream.

    python3 bench/bench_sampling.py --lib build-gpu/src/libkaio.so [--iters 30]

Modes (V = 128256, B in {1, 32, 128}, f32 and bf16 logits):
  greedy   kaio (temperature 0)       vs torch.argmax
  top-k 50 kaio (T = 1, top_k = 50)   vs torch.topk + softmax + multinomial
  top-p .9 kaio (T = 1, top_p = 0.9)  vs sort, softmax, cumsum, mask, multinomial
  min-p .1 kaio (T = 1, min_p = 0.1)  vs softmax, max, mask, multinomial
"read %" is the bytes of logits / time as a share of a device copy of the same
bytes (torch dst.copy_(src), timed in the same run).  Logits are rotated over
enough copies to exceed the 50 MiB L2, so every call reads from memory.
Timing: CUDA events, warm-up, median of --iters runs.
"""

import argparse
import ctypes as C
import statistics
import sys

import torch

KAIO_DTYPE = {torch.float16: 2, torch.bfloat16: 3, torch.float32: 1, torch.int32: 6}
RANDOM, TOP_K, TOP_P, MIN_P = 1, 2, 4, 8


class Tensor(C.Structure):
    _fields_ = [("buffer", C.c_void_p), ("offset_bytes", C.c_uint64), ("dtype", C.c_int32),
                ("reserved", C.c_uint32), ("rows", C.c_int64), ("cols", C.c_int64),
                ("row_stride", C.c_int64)]


class Desc(C.Structure):
    _fields_ = [("struct_size", C.c_uint32), ("dtype", C.c_int32), ("batch", C.c_int64),
                ("vocab", C.c_int64), ("max_prev", C.c_int64), ("features", C.c_uint32),
                ("reserved", C.c_uint32)]


class Kaio:
    def __init__(self, path):
        self.lib = C.CDLL(path)
        self.lib.kaio_last_error.restype = C.c_char_p
        self.dev = C.c_void_p()
        self.check(self.lib.kaio_device_open(C.byref(self.dev), 0), "kaio_device_open")
        self.stream = C.c_void_p()
        self.check(self.lib.kaio_stream_wrap(C.byref(self.stream), self.dev,
                                             C.c_void_p(torch.cuda.current_stream().cuda_stream)),
                   "kaio_stream_wrap")

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

    def launch(self, op, views):
        arr = (Tensor * 12)(*views)
        self.check(self.lib.kaio_op_launch(op, self.stream, arr, C.c_size_t(12)), "kaio_op_launch")


def time_ms(fn, iters, warmup=5):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def torch_topp(x, p):
    probs = torch.softmax(x.float(), -1)
    sp, si = torch.sort(probs, -1, descending=True)
    cum = torch.cumsum(sp, -1)
    sp[(cum - sp) >= p] = 0
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
    ap.add_argument("--iters", type=int, default=30)
    args = ap.parse_args()
    kaio = Kaio(args.lib)
    V = 128256
    print("| dtype | B | mode | kaio us | torch us | speed-up | kaio read % of copy | copy us |")
    print("|---|---|---|---|---|---|---|---|")
    for dtype in (torch.float32, torch.bfloat16):
        for B in (1, 32, 128):
            nbytes = B * V * torch.tensor([], dtype=dtype).element_size()
            ncopies = max(2, (120 << 20) // nbytes + 1)
            xs = [torch.randn(B, V, device="cuda", dtype=dtype) * 3 for _ in range(ncopies)]
            dst = torch.empty_like(xs[0])
            it = [0]

            def nxt():
                it[0] = (it[0] + 1) % ncopies
                return xs[it[0]]
            copy_ms = time_ms(lambda: dst.copy_(nxt()), args.iters)
            temp = torch.ones(B, device="cuda")
            topk = torch.full((B,), 50, dtype=torch.int32, device="cuda")
            topp = torch.full((B,), 0.9, device="cuda")
            minp = torch.full((B,), 0.1, device="cuda")
            rng = torch.randint(0, 2 ** 31, (B, 4), dtype=torch.int32, device="cuda")
            tokens = torch.empty(B, dtype=torch.int32, device="cuda")
            xviews = [kaio.view(x, B, V) for x in xs]
            common = dict(t=kaio.view(temp, B, 1), k=kaio.view(topk, B, 1), p=kaio.view(topp, B, 1),
                          m=kaio.view(minp, B, 1), r=kaio.view(rng, B, 4), o=kaio.view(tokens, B, 1))
            modes = [
                ("greedy", 0, lambda x: torch.argmax(x, -1)),
                ("top-k 50", RANDOM | TOP_K, lambda x: torch_topk(x, 50)),
                ("top-p 0.9", RANDOM | TOP_P, lambda x: torch_topp(x, 0.9)),
                ("top-k 50 + top-p 0.9", RANDOM | TOP_K | TOP_P, None),
                ("min-p 0.1", RANDOM | MIN_P, lambda x: torch_minp(x, 0.1)),
            ]
            for name, feat, ref in modes:
                op = kaio.op(dtype, B, V, feat)
                e = Tensor()
                views_of = []
                for xv in xviews:
                    views_of.append([xv, common["t"] if feat & RANDOM else e, common["k"] if feat & TOP_K else e,
                                     common["p"] if feat & TOP_P else e, common["m"] if feat & MIN_P else e,
                                     common["r"] if feat & RANDOM else e, e, e, e, common["o"], e, e])
                j = [0]

                def run_kaio():
                    j[0] = (j[0] + 1) % ncopies
                    kaio.launch(op, views_of[j[0]])
                kms = time_ms(run_kaio, args.iters)
                tms = time_ms(lambda: ref(nxt()), args.iters) if ref else float("nan")
                print("| %s | %d | %s | %.1f | %.1f | %.2fx | %.0f%% | %.1f |" % (
                    str(dtype).replace("torch.", ""), B, name, kms * 1e3, tms * 1e3, tms / kms,
                    100 * copy_ms / kms, copy_ms * 1e3))
                kaio.lib.kaio_op_destroy(op)
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
