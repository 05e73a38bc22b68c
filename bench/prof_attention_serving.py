#!/usr/bin/env python3
"""Launches issue 21's serving-attention kernels once each inside NVTX ranges
named "prof", for Nsight Compute, and (--splits) times decode at forced split
counts.

    ncu --clock-control none --nvtx --nvtx-include "prof/" --metrics ... \\
        python3 bench/prof_attention_serving.py decode --lib LIB
    ncu ... python3 bench/prof_attention_serving.py prefill --lib LIB [--other NAME=LIB ...]
    python3 bench/prof_attention_serving.py splits --lib LIB --splits 1 2 4 8

decode: bf16 Hq 32 Hkv 8 D 128 Sq 1, no mask, B x Sk in --shapes (default
8x32768 32x1024): kaio's prepared contiguous op of --lib, then of each
--other, then SDPA's cuDNN backend, on the same tensors (each launched twice,
the first outside the range).
prefill: the 16384-token chunk batch of bench_attention_paged_prefill.py
(len_k = 2 len_q, page 16): varlen AUTO of --lib, paged AUTO of --lib and
of each --other.  splits: decode µs (CUDA graph of the calls, median, as
bench_attention_decode.py times them) against cuDNN and the copy of the same
bytes, once per --splits entry with KAIO_TMP_DECODE_SPLITS set to it ("auto"
unsets it).  The library does not read that variable: a count other than
"auto" is forced only by a build whose plan_decode (src/ops/attention_decode.cpp)
was given the temporary override (bench/RESULTS.md, session 13); with the
library as it is, every entry times the plan's own split count.
"""

import argparse
import ctypes as C
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def ranged(fn):
    fn()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("prof")
    fn()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()


def decode_tensors(b, sk):
    import bench_attention_decode as bd
    bf = torch.bfloat16
    q = torch.randn(b, 1, bd.HQ, bd.D, device="cuda", dtype=bf)
    k = torch.randn(b, sk, bd.HKV, bd.D, device="cuda", dtype=bf)
    return q, k, torch.randn_like(k), torch.empty_like(q)


def decode_calls(kaio, b, sk, q, k, v, o):
    import bench_attention_decode as bd
    op = kaio.op(kaio.desc(b, 1, sk))
    views = [kaio.view(q, b, bd.HQ * bd.D), kaio.view(k, b * sk, bd.HKV * bd.D),
             kaio.view(v, b * sk, bd.HKV * bd.D), kaio.view(o, b, bd.HQ * bd.D), bd.Tensor()]
    run_kaio = kaio.launcher(op, views)
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

    def run_cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION), torch.no_grad():
            F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True)
    return op, run_kaio, run_cudnn


def decode(a):
    import bench_attention_decode as bd
    kaios = [(n, bd.Kaio(p)) for n, p in [("main", a.lib)] + [tuple(x.split("=", 1)) for x in a.other]]
    for shape in a.shapes:
        b, sk = (int(x) for x in shape.split("x"))
        tensors = decode_tensors(b, sk)
        for name, kaio in kaios:
            op, run_kaio, run_cudnn = decode_calls(kaio, b, sk, *tensors)
            print("decode B %d Sk %d: kaio (%s)" % (b, sk, name), flush=True)
            ranged(run_kaio)
            kaio.lib.kaio_op_destroy(op)
        print("decode B %d Sk %d: cudnn" % (b, sk), flush=True)
        ranged(run_cudnn)
        del tensors
        torch.cuda.empty_cache()


def splits(a):
    import bench_attention_decode as bd
    kaio = bd.Kaio(a.lib)       # first: the graphs that time cuDNN are captured through it
    for shape in a.shapes:
        b, sk = (int(x) for x in shape.split("x"))
        kv_bytes = 2 * b * sk * bd.HKV * bd.D * 2
        copies = max(1, -(-bd.ROTATE_BYTES // kv_bytes)) if kv_bytes < (50 << 20) else 1
        reps = copies * max(1, -(-4 // copies))
        bf = torch.bfloat16
        q = torch.randn(b, 1, bd.HQ, bd.D, device="cuda", dtype=bf)
        ks = [torch.randn(b, sk, bd.HKV, bd.D, device="cuda", dtype=bf) for _ in range(copies)]
        vs = [torch.randn_like(x) for x in ks]
        o = torch.empty_like(q)
        src = [torch.empty(kv_bytes // 2, device="cuda", dtype=bf) for _ in range(copies)]
        dst = [torch.empty_like(x) for x in src]
        cp = [lambda s=s, d=d: d.copy_(s) for s, d in zip(src, dst)]
        copy_us = bd.time_us((cp * reps)[:reps], a.iters, graph=False)
        del src, dst, cp
        fns = [bd.sdpa_call(SDPBackend.CUDNN_ATTENTION, q, x, y)[0] for x, y in zip(ks, vs)]
        cudnn_us = bd.time_us((fns * reps)[:reps], a.iters, name="cudnn")
        row = ["B %d Sk %d: copy %.1f µs, cuDNN %.1f (%.0f%%)" % (
            b, sk, copy_us, cudnn_us, 100 * copy_us / (2 * cudnn_us))]
        for n in a.splits:
            if n == "auto":
                os.environ.pop("KAIO_TMP_DECODE_SPLITS", None)
            else:
                os.environ["KAIO_TMP_DECODE_SPLITS"] = n
            us = bd.time_base(kaio, b, sk, 1, q, ks, vs, o, reps, a.iters)
            row.append("splits %s %.1f (%.0f%%)" % (n, us, 100 * copy_us / (2 * us)))
        os.environ.pop("KAIO_TMP_DECODE_SPLITS", None)
        print("; ".join(row), flush=True)
        del ks, vs
        torch.cuda.empty_cache()


def prefill(a):
    import bench_attention_paged_prefill as bp
    from bench_attention_varlen import D, HKV, HQ, KAIO_BF16, KAIO_F32, KAIO_I32, NSEQ, Kaio, lengths
    libs = [("main", a.lib)] + [tuple(x.split("=", 1)) for x in a.other]
    kaios = [(n, Kaio(p)) for n, p in libs]
    total, page = 16384, a.page
    lq = lengths(total, total)
    lk = [2 * x for x in lq]
    tk = sum(lk)
    cu_q = torch.tensor([0] + torch.tensor(lq).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0] + torch.tensor(lk).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
    seq_lens = torch.tensor(lk, dtype=torch.int32, device="cuda").view(1, NSEQ)
    q = torch.randn(total, HQ, D, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(tk, HKV, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    o = torch.empty_like(q)
    lse = torch.empty(HQ, total, device="cuda", dtype=torch.float32)
    kp, vp, table = bp.paged_pools(k, v, lk, page, torch.Generator().manual_seed(7))
    kaio = kaios[0][1]
    vviews = [kaio.view(q, total, HQ * D, KAIO_BF16), kaio.view(k, tk, HKV * D, KAIO_BF16),
              kaio.view(v, tk, HKV * D, KAIO_BF16), kaio.view(cu_q, 1, NSEQ + 1, KAIO_I32),
              kaio.view(cu_k, 1, NSEQ + 1, KAIO_I32), kaio.view(o, total, HQ * D, KAIO_BF16),
              kaio.view(lse, HQ, total, KAIO_F32)]
    op = kaio.op(kaio.lib.kaio_op_create_attention_varlen, bp.varlen_desc(kaio, 0, lq, lk, tk))
    print("prefill 16384 chunk: varlen AUTO (main)", flush=True)
    ranged(lambda: kaio.launch(op, vviews))
    for name, lib in kaios:
        views = [lib.view(q, total, HQ * D, KAIO_BF16), lib.view(kp, kp.shape[0], HKV * D, KAIO_BF16),
                 lib.view(vp, vp.shape[0], HKV * D, KAIO_BF16), lib.view(cu_q, 1, NSEQ + 1, KAIO_I32),
                 lib.view(table, NSEQ, table.shape[1], KAIO_I32), lib.view(seq_lens, 1, NSEQ, KAIO_I32),
                 lib.view(o, total, HQ * D, KAIO_BF16), lib.view(lse, HQ, total, KAIO_F32)]
        pd = bp.PagedDesc()
        lib.check(lib.lib.kaio_attention_paged_desc_init(C.byref(pd), C.sizeof(pd)), "init")
        pd.page_size = page
        pop = C.c_void_p()
        lib.check(lib.lib.kaio_op_create_attention_paged_prefill(
            C.byref(pop), lib.dev, C.byref(bp.varlen_desc(lib, 0, lq, lk, 0)), C.byref(pd)), "create")
        print("prefill 16384 chunk: paged %d AUTO (%s)" % (page, name), flush=True)
        ranged(lambda: lib.launch(pop, views))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["decode", "prefill", "splits"])
    ap.add_argument("--lib", required=True)
    ap.add_argument("--other", action="append", default=[], metavar="NAME=LIB")
    ap.add_argument("--shapes", nargs="+", default=["8x32768", "32x1024"])
    ap.add_argument("--splits", nargs="+", default=["auto", "1", "2", "4"])
    ap.add_argument("--page", type=int, default=16)
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    {"decode": decode, "prefill": prefill, "splits": splits}[a.mode](a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
