#!/usr/bin/env python3
"""libkaio varlen (packed-sequence) attention prefill against libkaio's
contiguous prefill at the same total tokens and PyTorch's varlen path.

    python3 bench/bench_attention_varlen.py --lib build-gpu/src/libkaio.so [--iters 20] [--json out.json]

Batches: TOTAL tokens (8192, 16384) split into 16 sequences of random mixed
lengths (seeded), bf16, Hq 32, Hkv 8, D 128, causal (bottom-right per
sequence; self-attention, so the usual triangle), LSE written.
Rows: kaio varlen (AUTO: the sm_90a kernel on an H100; and SM80_M128),
kaio contiguous (kaio_attention, B = 16, S = TOTAL / 16, same variant) and
torch's varlen FlashAttention-2 (torch.ops.aten._flash_attention_forward with
cum_seq_q / cum_seq_k), all on one stream in one process. TFLOP/s counts
only the real (masked) work: sum over sequences of 4 * Hq * D * L(L+1)/2.
Timing: CUDA events, warm-up, median of --iters (>= 20).
"""

import argparse
import ctypes as C
import json
import random
import statistics
import sys

import torch

HQ, HKV, D, NSEQ = 32, 8, 128, 16
KAIO_BF16, KAIO_I32, KAIO_F32 = 3, 6, 1
VARIANTS = {"AUTO": 0, "SM80_M128": 2}


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


class VarlenDesc(C.Structure):
    _fields_ = [("struct_size", C.c_uint32), ("dtype", C.c_int32), ("out_dtype", C.c_int32),
                ("o_dtype", C.c_int32), ("mask", C.c_int32), ("variant", C.c_int32),
                ("reserved", C.c_uint32), ("batch", C.c_int64), ("max_seqlen_q", C.c_int64),
                ("max_seqlen_k", C.c_int64), ("total_q", C.c_int64), ("total_k", C.c_int64),
                ("heads_q", C.c_int64), ("heads_kv", C.c_int64), ("head_dim", C.c_int64),
                ("softmax_scale", C.c_float), ("reserved2", C.c_uint32)]


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

    def view(self, t, rows, cols, dtype):
        b = C.c_void_p()
        self.check(self.lib.kaio_buffer_wrap(C.byref(b), self.dev, C.c_uint64(t.data_ptr()),
                                             C.c_uint64(t.numel() * t.element_size())), "kaio_buffer_wrap")
        v = Tensor()
        v.buffer, v.dtype, v.rows, v.cols, v.row_stride = b.value, dtype, rows, cols, cols
        return v

    def op(self, create, desc):
        o = C.c_void_p()
        self.check(create(C.byref(o), self.dev, C.byref(desc)), "create")
        return o

    def launch(self, op, views):
        arr = (Tensor * len(views))(*views)
        self.check(self.lib.kaio_op_launch(op, self.stream, arr, C.c_size_t(len(views))), "kaio_op_launch")


def time_ms(fn, iters, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def lengths(total, seed):
    """NSEQ random lengths >= 16 summing to total."""
    rng = random.Random(seed)
    w = [rng.uniform(0.1, 1.0) for _ in range(NSEQ)]
    ls = [max(16, int(total * x / sum(w))) for x in w]
    ls[ls.index(max(ls))] += total - sum(ls)
    return ls


def torch_varlen(q, k, v, cu, maxlen):
    """torch's varlen FlashAttention-2 forward, or (None, why)."""
    try:
        def run():
            return torch.ops.aten._flash_attention_forward(q, k, v, cu, cu, maxlen, maxlen, 0.0, True, False)[0]
        out = run()
        return run, out
    except Exception as e:  # noqa: BLE001 - reported in the table
        return None, str(e).split("\n")[0][:100]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--json")
    a = ap.parse_args()
    kaio = Kaio(a.lib)
    print("torch", torch.__version__, torch.cuda.get_device_name())
    results = []
    print("%-6s %-9s | %-10s %8s %8s | %-10s %8s %8s | %8s %8s %6s | %s" % (
        "total", "variant", "varlen ms", "TFLOP/s", "", "contig ms", "TFLOP/s", "v/c", "torch ms",
        "TFLOP/s", "k/t", "max|O kaio - O torch|"))
    for total in (8192, 16384):
        ls = lengths(total, total)
        cu = torch.tensor([0] + list(torch.tensor(ls).cumsum(0)), dtype=torch.int32, device="cuda")
        real = sum(4.0 * HQ * D * l * (l + 1) / 2 for l in ls)
        q = torch.randn(total, HQ, D, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(total, HKV, D, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(total, HKV, D, device="cuda", dtype=torch.bfloat16)
        o = torch.empty_like(q)
        lse = torch.empty(HQ, total, device="cuda", dtype=torch.float32)
        views = [kaio.view(q, total, HQ * D, KAIO_BF16), kaio.view(k, total, HKV * D, KAIO_BF16),
                 kaio.view(v, total, HKV * D, KAIO_BF16), kaio.view(cu, 1, NSEQ + 1, KAIO_I32),
                 kaio.view(cu, 1, NSEQ + 1, KAIO_I32), kaio.view(o, total, HQ * D, KAIO_BF16),
                 kaio.view(lse, HQ, total, KAIO_F32)]
        s = total // NSEQ
        lse_c = torch.empty(NSEQ * HQ, s, device="cuda", dtype=torch.float32)
        cviews = views[:3] + [views[5], kaio.view(lse_c, NSEQ * HQ, s, KAIO_F32)]
        contig_real = NSEQ * 4.0 * HQ * D * s * (s + 1) / 2
        trun, tout = torch_varlen(q, k, v, cu, max(ls))
        t_ms = time_ms(trun, a.iters) if trun else None
        for vname, var in VARIANTS.items():
            vd = VarlenDesc()
            kaio.check(kaio.lib.kaio_attention_varlen_desc_init(C.byref(vd), C.sizeof(vd)), "init")
            vd.dtype, vd.mask, vd.variant, vd.batch = KAIO_BF16, 1, var, NSEQ
            vd.max_seqlen_q = vd.max_seqlen_k = max(ls)
            vd.total_q = vd.total_k = total
            vd.heads_q, vd.heads_kv, vd.head_dim = HQ, HKV, D
            vop = kaio.op(kaio.lib.kaio_op_create_attention_varlen, vd)
            cd = Desc()
            kaio.check(kaio.lib.kaio_attention_desc_init(C.byref(cd), C.sizeof(cd)), "init")
            cd.dtype, cd.mask, cd.variant, cd.batch, cd.seq_q, cd.seq_k = KAIO_BF16, 1, var, NSEQ, s, s
            cd.heads_q, cd.heads_kv, cd.head_dim = HQ, HKV, D
            cop = kaio.op(kaio.lib.kaio_op_create_attention, cd)
            v_ms = time_ms(lambda: kaio.launch(vop, views), a.iters)
            diff = (o.float() - tout.float()).abs().max().item() if trun else float("nan")
            c_ms = time_ms(lambda: kaio.launch(cop, cviews), a.iters)
            r = {"total": total, "lengths": ls, "variant": vname, "varlen_ms": v_ms,
                 "varlen_tflops": real / v_ms / 1e9, "contig_ms": c_ms, "contig_S": s,
                 "contig_tflops": contig_real / c_ms / 1e9, "torch_varlen_ms": t_ms,
                 "torch_tflops": real / t_ms / 1e9 if t_ms else None, "max_abs_diff_o": diff,
                 "torch_note": None if trun else tout}
            r["varlen_over_contig_tflops"] = r["varlen_tflops"] / r["contig_tflops"]
            results.append(r)
            print("%-6d %-9s | %-10.3f %8.1f %8s | %-10.3f %8.1f %8.2f | %8s %8s %6s | %s" % (
                total, vname, v_ms, r["varlen_tflops"], "", c_ms, r["contig_tflops"],
                r["varlen_over_contig_tflops"], "%.3f" % t_ms if t_ms else "n/a",
                "%.1f" % r["torch_tflops"] if t_ms else "n/a",
                "%.2f" % (r["varlen_tflops"] / r["torch_tflops"]) if t_ms else "n/a",
                "%.3g" % diff if trun else tout), flush=True)
            kaio.lib.kaio_op_destroy(vop)
            kaio.lib.kaio_op_destroy(cop)
        print("  lengths %s (max %d)" % (ls, max(ls)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
