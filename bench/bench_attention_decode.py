#!/usr/bin/env python3
"""libkaio decode attention (contiguous and paged KV cache) against PyTorch SDPA
(FLASH_ATTENTION and CUDNN_ATTENTION) on the same tensors, in one process, on
the same stream.

    python3 bench/bench_attention_decode.py --lib build-gpu/src/libkaio.so [--iters 20]
        [--baseline OLD/libkaio.so] [--other NAME=LIB ...] [--sq 1] [--no-paged]
        [--max-bytes N] [--no-peers]

bf16, Hq 32, Hkv 8, D 128; B in {1, 8, 32, 128} x Sk in {1k, 8k, 32k, 128k}
(shapes whose K+V cache and a paged copy of it do not fit in ~60 GB are
skipped) x Sq in {1, 4}. No mask for every contender (SDPA's is_causal is
top-left, which is not decoding's alignment; kaio's bottom-right causal
costs the same reads). libkaio: a prepared op (kaio_op_create_attention,
which splits the keys) and prepared paged ops (page 16 and 128, pages in
shuffled order in the pool, every seq_len = Sk). Timing: CUDA events around
a sample of `reps` calls that rotate over enough cache copies to exceed
256 MiB when one cache is smaller (so L2 does not flatter), warm-up first,
median of --iters samples, each a replay of a CUDA graph of the `reps`
calls (so Python and dispatch costs count for no one). "copy" is
dst.copy_(src) of the same K+V bytes rotated the same way, run eagerly;
"%copy" is (K+V bytes / time) / (2 x bytes / copy time), i.e. the read
bandwidth against the copy's read+write bandwidth. --baseline times a second
libkaio's prepared contiguous op on the same tensors (column "base"), for
before/after comparisons in one process; --other NAME=LIB (repeatable) times
more libkaio builds the same way (columns "NAME µs"), to compare variants;
a row says "(NAME O differs!)" when that build's O is not kaio's bit for bit.
"""

import argparse
import ctypes as C
import math
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

HQ, HKV, D = 32, 8, 128
BATCHES = (1, 8, 32, 128)
SEQS = (1024, 8192, 32768, 131072)
QROWS = (1, 4)
MAX_BYTES = 30e9            # one K+V cache; a paged copy doubles it
ROTATE_BYTES = 256 << 20


class Tensor(C.Structure):
    _fields_ = [("buffer", C.c_void_p), ("offset_bytes", C.c_uint64), ("dtype", C.c_int32),
                ("reserved", C.c_uint32), ("rows", C.c_int64), ("cols", C.c_int64),
                ("row_stride", C.c_int64)]


class Desc(C.Structure):
    _fields_ = [("struct_size", C.c_uint32), ("dtype", C.c_int32), ("out_dtype", C.c_int32),
                ("o_dtype", C.c_int32), ("mask", C.c_int32), ("variant", C.c_int32),
                ("deterministic", C.c_int32), ("reserved", C.c_uint32), ("batch", C.c_int64),
                ("seq_q", C.c_int64), ("seq_k", C.c_int64), ("heads_q", C.c_int64),
                ("heads_kv", C.c_int64), ("head_dim", C.c_int64), ("softmax_scale", C.c_float),
                ("reserved2", C.c_uint32)]


class PagedDesc(C.Structure):
    _fields_ = [("struct_size", C.c_uint32), ("page_size", C.c_int32),
                ("reserved", C.c_uint64 * 2)]


KAIO_DTYPE = {torch.float16: 2, torch.bfloat16: 3, torch.float32: 1, torch.int32: 6}


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
        self.buffers = []
        self.cur = self.stream
        # the stream graphs are captured on, wrapped too: launches go to self.cur
        if GRAPH["stream"] is None:
            GRAPH["stream"] = torch.cuda.Stream()
        self.capture = C.c_void_p()
        self.check(self.lib.kaio_stream_wrap(C.byref(self.capture), self.dev,
                                             C.c_void_p(GRAPH["stream"].cuda_stream)),
                   "kaio_stream_wrap")
        if GRAPH["kaio"] is None:
            GRAPH["kaio"] = self

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
        self.buffers.append(b)
        v.buffer, v.dtype, v.rows, v.cols, v.row_stride = b.value, KAIO_DTYPE[t.dtype], rows, cols, cols
        return v

    def desc(self, b, sq, sk):
        x = Desc()
        self.check(self.lib.kaio_attention_desc_init(C.byref(x), C.sizeof(Desc)), "desc_init")
        x.dtype = KAIO_DTYPE[torch.bfloat16]
        x.batch, x.seq_q, x.seq_k, x.heads_q, x.heads_kv, x.head_dim = b, sq, sk, HQ, HKV, D
        return x

    def op(self, desc, page=0):
        o = C.c_void_p()
        if page:
            p = PagedDesc()
            self.check(self.lib.kaio_attention_paged_desc_init(C.byref(p), C.sizeof(PagedDesc)), "paged init")
            p.page_size = page
            self.check(self.lib.kaio_op_create_attention_paged(C.byref(o), self.dev, C.byref(desc), C.byref(p)),
                       "kaio_op_create_attention_paged")
        else:
            self.check(self.lib.kaio_op_create_attention(C.byref(o), self.dev, C.byref(desc)),
                       "kaio_op_create_attention")
        return o

    def launcher(self, op, views):
        arr = (Tensor * len(views))(*views)
        n = C.c_size_t(len(views))
        fn, check = self.lib.kaio_op_launch, self.check
        return lambda: check(fn(op, self.cur, arr, n), "kaio_op_launch")

    def release(self):
        for b in self.buffers:
            self.lib.kaio_buffer_destroy(b)
        self.buffers = []


GRAPH = {"kaio": None, "stream": None, "fallbacks": []}


def time_us(calls, iters, warmup=3, name="", graph=True):
    """Median over iters samples of one pass over calls, per call, in µs. The
    pass is captured into a CUDA graph after the eager warm-up, so host-side
    launch costs (Python, SDPA's dispatch) do not count for anyone; where
    capture fails the pass runs eagerly (listed at the end)."""
    for _ in range(warmup):
        for c in calls:
            c()
    torch.cuda.synchronize()
    run = None
    try:
        if not graph:
            raise RuntimeError("eager by request")
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=GRAPH["stream"]):
            GRAPH["kaio"].cur = GRAPH["kaio"].capture
            try:
                for c in calls:
                    c()
            finally:
                GRAPH["kaio"].cur = GRAPH["kaio"].stream
        run = g.replay
    except Exception as e:  # noqa: BLE001 - timed eagerly instead, and reported
        if graph:
            GRAPH["fallbacks"].append("%s: %s" % (name, str(e).split("\n")[0][:100]))
        torch.cuda.synchronize()

        def run():
            for c in calls:
                c()
    run()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        run()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000.0 / len(calls))
    return statistics.median(times)


def sdpa_call(backend, q, k, v):
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

    def run():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True)
    try:
        with torch.no_grad():
            out = run()
    except Exception as e:  # noqa: BLE001 - a backend that refuses a shape is reported
        return None, None, str(e).split("\n")[0][:80]
    return run, out.transpose(1, 2), None


def time_base(base, b, sk, sq, q, ks, vs, o, reps, iters):
    """The baseline libkaio's prepared contiguous op, timed like kaio's; o
    is left holding its O for the first cache copy."""
    op = base.op(base.desc(b, sq, sk))
    vq, vo = base.view(q, b * sq, HQ * D), base.view(o, b * sq, HQ * D)
    calls = [base.launcher(op, [vq, base.view(k, b * sk, HKV * D), base.view(v, b * sk, HKV * D), vo, Tensor()])
             for k, v in zip(ks, vs)]
    main, GRAPH["kaio"] = GRAPH["kaio"], base
    try:
        return time_us((calls * reps)[:reps], iters, name="base")
    finally:
        GRAPH["kaio"] = main
        calls[0]()
        torch.cuda.synchronize()
        base.lib.kaio_op_destroy(op)
        base.release()


def bench_shape(kaio, b, sk, sq, iters, base=None, paged=True, others=(), peers=True):
    kv_bytes = 2 * b * sk * HKV * D * 2
    copies = max(1, math.ceil(ROTATE_BYTES / kv_bytes)) if kv_bytes < (50 << 20) else 1
    reps = copies * max(1, math.ceil(4 / copies))
    bf = torch.bfloat16
    q = torch.randn(b, sq, HQ, D, device="cuda", dtype=bf)
    ks = [torch.randn(b, sk, HKV, D, device="cuda", dtype=bf) for _ in range(copies)]
    vs = [torch.randn(b, sk, HKV, D, device="cuda", dtype=bf) for _ in range(copies)]
    o = torch.empty(b, sq, HQ, D, device="cuda", dtype=bf)
    res = {"B": b, "Sk": sk, "Sq": sq, "MiB": kv_bytes / 2**20, "copies": copies}
    # copy of the same bytes
    src = [torch.empty(kv_bytes // 2, device="cuda", dtype=bf) for _ in range(copies)]
    dst = [torch.empty_like(s) for s in src]
    cp = [lambda s=s, d=d: d.copy_(s) for s, d in zip(src, dst)]
    # eager: captured, copy_ becomes a copy-engine memcpy node, slower than the
    # copy kernel for large sizes, which would flatter "%copy"
    res["copy_us"] = time_us((cp * reps)[:reps], iters, name="copy", graph=False)
    del src, dst, cp
    desc = kaio.desc(b, sq, sk)
    op = kaio.op(desc)
    vq, vo = kaio.view(q, b * sq, HQ * D), kaio.view(o, b * sq, HQ * D)
    calls = [kaio.launcher(op, [vq, kaio.view(k, b * sk, HKV * D), kaio.view(v, b * sk, HKV * D), vo, Tensor()])
             for k, v in zip(ks, vs)]
    res["kaio_us"] = time_us((calls * reps)[:reps], iters, name="kaio")
    calls[0]()
    o_contig = o.clone()
    kaio.lib.kaio_op_destroy(op)
    if base is not None:
        res["base_us"] = time_base(base, b, sk, sq, q, ks, vs, o, reps, iters)
        res["base_same_bits"] = bool(torch.equal(o, o_contig))
    for name, lib in others:
        res["other_" + name] = time_base(lib, b, sk, sq, q, ks, vs, o, reps, iters)
        res["other_%s_same_bits" % name] = bool(torch.equal(o, o_contig))
    for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        if not peers:
            res[name + "_us"] = None
            continue
        fn, out, why = sdpa_call(backend, q, ks[0], vs[0])
        if fn is None:
            res[name + "_us"] = None
            res[name + "_why"] = why
            continue
        fns = [sdpa_call(backend, q, k, v)[0] for k, v in zip(ks, vs)]
        res[name + "_us"] = time_us((fns * reps)[:reps], iters, name=name)
        res[name + "_maxdiff"] = (out.float() - o_contig.float()).abs().max().item()
    for page in (16, 128) if paged else ():
        pps = sk // page
        pools_k, pools_v, tables = [], [], []
        for k, v in zip(ks, vs):
            perm = torch.randperm(b * pps, device="cuda")
            pk = torch.empty(b * pps, page, HKV * D, device="cuda", dtype=bf)
            pv = torch.empty_like(pk)
            pk[perm] = k.reshape(b * pps, page, HKV * D)
            pv[perm] = v.reshape(b * pps, page, HKV * D)
            pools_k.append(pk)
            pools_v.append(pv)
            tables.append(perm.to(torch.int32).reshape(b, pps).contiguous())
        lens = torch.full((1, b), sk, device="cuda", dtype=torch.int32)
        op = kaio.op(desc, page)
        calls = [kaio.launcher(op, [vq, kaio.view(pk, b * pps * page, HKV * D),
                                    kaio.view(pv, b * pps * page, HKV * D), kaio.view(t, b, pps),
                                    kaio.view(lens, 1, b), vo, Tensor()])
                 for pk, pv, t in zip(pools_k, pools_v, tables)]
        res["paged%d_us" % page] = time_us((calls * reps)[:reps], iters, name="paged%d" % page)
        calls[0]()
        torch.cuda.synchronize()
        res["paged%d_same_bits" % page] = bool(torch.equal(o, o_contig))
        kaio.lib.kaio_op_destroy(op)
        del pools_k, pools_v, tables, calls
    # The contiguous op once more, last: a shape whose first timing fell into
    # the slow mode seen at B 32 / 128 x 1k (session 12, 13) shows it here.
    op = kaio.op(desc)
    calls = [kaio.launcher(op, [vq, kaio.view(k, b * sk, HKV * D), kaio.view(v, b * sk, HKV * D), vo, Tensor()])
             for k, v in zip(ks, vs)]
    res["kaio_again_us"] = time_us((calls * reps)[:reps], iters, name="kaio")
    kaio.lib.kaio_op_destroy(op)
    kaio.release()
    del ks, vs
    torch.cuda.empty_cache()
    return res


def pct(res, key):
    t = res.get(key)
    if t is None:
        return "n/a"
    return "%.1f (%.0f%%)" % (t, 100.0 * res["copy_us"] / (2.0 * t))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--max-bytes", type=float, default=MAX_BYTES)
    ap.add_argument("--baseline", help="a second libkaio to time (prepared contiguous op)")
    ap.add_argument("--sq", type=int, action="append", help="only these Sq (repeatable)")
    ap.add_argument("--no-paged", action="store_true", help="skip the paged ops")
    ap.add_argument("--other", action="append", default=[], metavar="NAME=LIB",
                    help="another libkaio to time like --baseline (repeatable)")
    ap.add_argument("--no-peers", action="store_true", help="skip SDPA flash and cuDNN")
    args = ap.parse_args()
    kaio = Kaio(args.lib)
    base = Kaio(args.baseline) if args.baseline else None
    others = [(n, Kaio(p)) for n, p in (x.split("=", 1) for x in args.other)]
    print("device: %s, torch %s" % (torch.cuda.get_device_name(), torch.__version__))
    print("bf16 Hq %d Hkv %d D %d, no mask; µs per call (%% of copy bandwidth)" % (HQ, HKV, D))
    hdr = ("| B | Sk | Sq | K+V MiB | copy µs | kaio µs (%copy) | paged 16 | paged 128 | SDPA flash | cuDNN "
           "| best peer / kaio | kaio again, last | best peer / again |" + (" base µs | base / kaio |" if base else "")
           + "".join(" %s µs |" % n for n, _ in others))
    print(hdr)
    print("|" + "---|" * (hdr.count("|") - 1))
    for sq in args.sq or QROWS:
        for b in BATCHES:
            for sk in SEQS:
                if 2 * b * sk * HKV * D * 2 > args.max_bytes:
                    continue
                r = bench_shape(kaio, b, sk, sq, args.iters, base, not args.no_paged, others,
                                not args.no_peers)
                peers = [r[k] for k in ("flash_us", "cudnn_us") if r.get(k)]
                ratio = "%.2f" % (min(peers) / r["kaio_us"]) if peers else "n/a"
                ratio2 = "%.2f" % (min(peers) / r["kaio_again_us"]) if peers else "n/a"
                same = all(r.get("paged%d_same_bits" % p, True) for p in (16, 128))
                bits = "" if same else " (paged O differs!)"
                bits += "".join(" (%s O differs!)" % n for n in ["base"] + [n for n, _ in others]
                                if not r.get(("base" if n == "base" else "other_" + n) + "_same_bits", True))
                extra = (" %.1f | %.2f |" % (r["base_us"], r["base_us"] / r["kaio_us"])) if base else ""
                extra += "".join(" %s |" % pct(r, "other_" + n) for n, _ in others)
                print("| %d | %d | %d | %.0f | %.1f | %s | %s | %s | %s | %s | %s | %s | %s |%s%s" % (
                    b, sk, sq, r["MiB"], r["copy_us"], pct(r, "kaio_us"), pct(r, "paged16_us"),
                    pct(r, "paged128_us"), pct(r, "flash_us"), pct(r, "cudnn_us"), ratio,
                    pct(r, "kaio_again_us"), ratio2, extra, bits),
                    flush=True)
                for name in ("flash", "cudnn"):
                    if r.get(name + "_why"):
                        print("   %s refused: %s" % (name, r[name + "_why"]))
                    elif r.get(name + "_maxdiff", 0) > 0.05:
                        print("   max |O_kaio - O_%s| = %.3g" % (name, r[name + "_maxdiff"]))
    for f in sorted(set(GRAPH["fallbacks"])):
        print("timed eagerly (graph capture failed): " + f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
