#!/usr/bin/env python3
"""libkaio paged prefill (kaio_op_create_attention_paged_prefill) against the
contiguous varlen op on the same keys, in one process on one stream.

    python3 bench/bench_attention_paged_prefill.py --lib build-gpu/src/libkaio.so [--iters 20] [--json out.json]
        [--other NAME=LIB ...] [--totals 16384] [--sides chunk] [--pages 16] [--variants AUTO]

Batches as bench_attention_varlen.py: TOTAL new query tokens (8192, 16384)
in 16 sequences of random mixed lengths (same seeds), bf16, Hq 32, Hkv 8,
D 128, causal bottom-right per sequence, LSE written. Two key sides:
  self:  len_k = len_q (a whole prompt: the same work as the varlen bench)
  chunk: len_k = 2 len_q (the chunk follows a cached prefix of len_q keys)
Paged: pages of 16 and 128 tokens, shuffled in the pools. Rows compare
paged (AUTO, which is the sm_90a paged kernel on an H100, SM90 and
SM80_M128) with varlen SM80_M128, varlen AUTO (sm_90a on an H100) and the
contiguous kaio_attention AUTO at the same total tokens (B 16, S_q =
total/16, S_k = S_q or 2 S_q, bottom-right causal): issue 21's target is
paged TFLOP/s within 10% of that contiguous prefill's ("p/c" the ratio of
TFLOP/s). "bitwise" says whether paged O equals the varlen O of the same
family (sm_90a: varlen AUTO; sm_80: varlen SM80_M128) exactly.
TFLOP/s counts the visible (masked) work: 4·Hq·D·Σ(len_q(len_k − len_q) +
len_q(len_q + 1)/2). Timing: CUDA events, warm-up, median of --iters.
--other NAME=LIB (repeatable) times another libkaio build's paged AUTO op on
the same tensors right after each paged row (columns "NAME ms", its p/c and
whether its O equals the varlen AUTO O of --lib bit for bit), to compare
variants in one process; --totals, --sides, --pages, --variants narrow the
shapes and the paged variants of --lib.
"""

import argparse
import ctypes as C
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_attention_varlen import (D, HKV, HQ, KAIO_BF16, KAIO_F32, KAIO_I32, NSEQ,  # noqa: E402
                                    Desc, Kaio, VarlenDesc, lengths, time_ms)

VARIANTS = {"AUTO": 0, "SM80_M128": 2}
PAGED_VARIANTS = {"AUTO": 0, "SM90": 3, "SM80_M128": 2}


class PagedDesc(C.Structure):
    _fields_ = [("struct_size", C.c_uint32), ("page_size", C.c_int32),
                ("reserved", C.c_uint64 * 2)]


def varlen_desc(kaio, variant, lq, lk, total_k):
    vd = VarlenDesc()
    kaio.check(kaio.lib.kaio_attention_varlen_desc_init(C.byref(vd), C.sizeof(vd)), "init")
    vd.dtype, vd.mask, vd.variant, vd.batch = KAIO_BF16, 1, variant, NSEQ
    vd.max_seqlen_q, vd.max_seqlen_k = max(lq), max(lk)
    vd.total_q, vd.total_k = sum(lq), total_k
    vd.heads_q, vd.heads_kv, vd.head_dim = HQ, HKV, D
    return vd


def contiguous_ms(kaio, total, side, iters):
    """kaio_attention AUTO at the same total tokens: (ms, TFLOP/s)."""
    s = total // NSEQ
    sk = s if side == "self" else 2 * s
    q = torch.randn(NSEQ, s, HQ, D, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(NSEQ, sk, HKV, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    o = torch.empty_like(q)
    lse = torch.empty(NSEQ * HQ, s, device="cuda", dtype=torch.float32)
    views = [kaio.view(q, NSEQ * s, HQ * D, KAIO_BF16), kaio.view(k, NSEQ * sk, HKV * D, KAIO_BF16),
             kaio.view(v, NSEQ * sk, HKV * D, KAIO_BF16), kaio.view(o, NSEQ * s, HQ * D, KAIO_BF16),
             kaio.view(lse, NSEQ * HQ, s, KAIO_F32)]
    cd = Desc()
    kaio.check(kaio.lib.kaio_attention_desc_init(C.byref(cd), C.sizeof(cd)), "init")
    cd.dtype, cd.mask, cd.variant, cd.batch, cd.seq_q, cd.seq_k = KAIO_BF16, 1, 0, NSEQ, s, sk
    cd.heads_q, cd.heads_kv, cd.head_dim = HQ, HKV, D
    cop = kaio.op(kaio.lib.kaio_op_create_attention, cd)
    ms = time_ms(lambda: kaio.launch(cop, views), iters)
    kaio.lib.kaio_op_destroy(cop)
    work = NSEQ * 4.0 * HQ * D * (s * (sk - s) + s * (s + 1) / 2)
    return ms, work / ms / 1e9


def paged_pools(k, v, lk, page, gen):
    """K and V scattered into shuffled pages: (k_pool, v_pool, block_table)."""
    need = [(l + page - 1) // page for l in lk]
    num_pages = sum(need) + 4
    ids = torch.randperm(num_pages, generator=gen).tolist()
    maxp = max(need)
    table = torch.zeros(NSEQ, maxp, dtype=torch.int32)
    kp = torch.randn(num_pages * page, HKV, D, device="cuda", dtype=torch.bfloat16)
    vp = torch.randn_like(kp)
    nxt, start = 0, 0
    for b, l in enumerate(lk):
        table[b, :need[b]] = torch.tensor(ids[nxt:nxt + need[b]], dtype=torch.int32)
        nxt += need[b]
        j = torch.arange(l)
        rows = (table[b, j // page].long() * page + j % page).cuda()
        kp[rows] = k[start:start + l]
        vp[rows] = v[start:start + l]
        start += l
    return kp, vp, table.cuda()


def paged_other(lib, tensors, vd, page, ref, iters):
    """Another libkaio's paged AUTO op on the same tensors: (ms, O == ref bitwise)."""
    q, kp, vp, cu_q, table, seq_lens, o, lse = tensors
    total, nseq = q.shape[0], table.shape[0]
    views = [lib.view(q, total, HQ * D, KAIO_BF16), lib.view(kp, kp.shape[0], HKV * D, KAIO_BF16),
             lib.view(vp, vp.shape[0], HKV * D, KAIO_BF16), lib.view(cu_q, 1, nseq + 1, KAIO_I32),
             lib.view(table, nseq, table.shape[1], KAIO_I32), lib.view(seq_lens, 1, nseq, KAIO_I32),
             lib.view(o, total, HQ * D, KAIO_BF16), lib.view(lse, HQ, total, KAIO_F32)]
    pd = PagedDesc()
    lib.check(lib.lib.kaio_attention_paged_desc_init(C.byref(pd), C.sizeof(pd)), "init")
    pd.page_size = page
    op = C.c_void_p()
    lib.check(lib.lib.kaio_op_create_attention_paged_prefill(C.byref(op), lib.dev, C.byref(vd), C.byref(pd)),
              "create paged prefill")
    o.zero_()
    lib.launch(op, views)
    lib.check(lib.lib.kaio_stream_synchronize(lib.stream), "sync")
    same = bool(torch.equal(o, ref))
    ms = time_ms(lambda: lib.launch(op, views), iters)
    lib.lib.kaio_op_destroy(op)
    return ms, same


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--json")
    ap.add_argument("--other", action="append", default=[], metavar="NAME=LIB",
                    help="another libkaio whose paged AUTO op is timed too (repeatable)")
    ap.add_argument("--totals", type=int, nargs="+", default=[8192, 16384])
    ap.add_argument("--sides", nargs="+", default=["self", "chunk"], choices=["self", "chunk"])
    ap.add_argument("--pages", type=int, nargs="+", default=[16, 128])
    ap.add_argument("--variants", nargs="+", default=list(PAGED_VARIANTS), choices=list(PAGED_VARIANTS))
    a = ap.parse_args()
    kaio = Kaio(a.lib)
    others = [(n, Kaio(p)) for n, p in (x.split("=", 1) for x in a.other)]
    print("torch", torch.__version__, torch.cuda.get_device_name())
    print("%-6s %-5s %-4s %-9s | %9s %7s | %9s %7s %6s | %9s %7s %6s | %9s %7s %6s | %s" % (
        "total", "keys", "page", "paged var", "paged ms", "TFLOP/s", "M128 ms", "TFLOP/s", "p/v",
        "AUTO ms", "TFLOP/s", "p/v", "contig ms", "TFLOP/s", "p/c", "bitwise vs varlen")
          + "".join(" | %s ms, p/c, bitwise" % n for n, _ in others))
    results = []
    gen = torch.Generator().manual_seed(7)
    for total in a.totals:
        lq = lengths(total, total)
        for side in a.sides:
            lk = list(lq) if side == "self" else [2 * l for l in lq]
            tk = sum(lk)
            work = sum(4.0 * HQ * D * (q * (k - q) + q * (q + 1) / 2) for q, k in zip(lq, lk))
            cu_q = torch.tensor([0] + torch.tensor(lq).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
            cu_k = torch.tensor([0] + torch.tensor(lk).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
            seq_lens = torch.tensor(lk, dtype=torch.int32, device="cuda").view(1, NSEQ)
            q = torch.randn(total, HQ, D, device="cuda", dtype=torch.bfloat16)
            k = torch.randn(tk, HKV, D, device="cuda", dtype=torch.bfloat16)
            v = torch.randn(tk, HKV, D, device="cuda", dtype=torch.bfloat16)
            o = torch.empty_like(q)
            lse = torch.empty(HQ, total, device="cuda", dtype=torch.float32)
            vq, vo, vl = (kaio.view(q, total, HQ * D, KAIO_BF16), kaio.view(o, total, HQ * D, KAIO_BF16),
                          kaio.view(lse, HQ, total, KAIO_F32))
            vcq = kaio.view(cu_q, 1, NSEQ + 1, KAIO_I32)
            vviews = [vq, kaio.view(k, tk, HKV * D, KAIO_BF16), kaio.view(v, tk, HKV * D, KAIO_BF16),
                      vcq, kaio.view(cu_k, 1, NSEQ + 1, KAIO_I32), vo, vl]
            ref, ref_o = {}, {}
            for vname, var in VARIANTS.items():
                op = kaio.op(kaio.lib.kaio_op_create_attention_varlen, varlen_desc(kaio, var, lq, lk, tk))
                ref[vname] = time_ms(lambda: kaio.launch(op, vviews), a.iters)
                kaio.launch(op, vviews)
                ref_o[vname] = o.clone()
                kaio.lib.kaio_op_destroy(op)
            c_ms, c_tflops = contiguous_ms(kaio, total, side, a.iters)
            for page in a.pages:
                kp, vp, table = paged_pools(k, v, lk, page, gen)
                pviews = [vq, kaio.view(kp, kp.shape[0], HKV * D, KAIO_BF16),
                          kaio.view(vp, vp.shape[0], HKV * D, KAIO_BF16), vcq,
                          kaio.view(table, NSEQ, table.shape[1], KAIO_I32),
                          kaio.view(seq_lens, 1, NSEQ, KAIO_I32), vo, vl]
                pd = PagedDesc()
                kaio.check(kaio.lib.kaio_attention_paged_desc_init(C.byref(pd), C.sizeof(pd)), "init")
                pd.page_size = page
                for vname, var in ((n, PAGED_VARIANTS[n]) for n in a.variants):
                    vd = varlen_desc(kaio, var, lq, lk, 0)
                    op = C.c_void_p()
                    kaio.check(kaio.lib.kaio_op_create_attention_paged_prefill(
                        C.byref(op), kaio.dev, C.byref(vd), C.byref(pd)), "create paged prefill")
                    o.zero_()
                    kaio.launch(op, pviews)
                    kaio.check(kaio.lib.kaio_stream_synchronize(kaio.stream), "sync")
                    same = bool(torch.equal(o, ref_o["SM80_M128" if var == 2 else "AUTO"]))
                    p_ms = time_ms(lambda: kaio.launch(op, pviews), a.iters)
                    kaio.lib.kaio_op_destroy(op)
                    r = {"total": total, "keys": side, "page": page, "variant": vname,
                         "paged_ms": p_ms, "paged_tflops": work / p_ms / 1e9,
                         "varlen_m128_ms": ref["SM80_M128"], "varlen_auto_ms": ref["AUTO"],
                         "contig_auto_ms": c_ms, "contig_auto_tflops": c_tflops,
                         "paged_over_contig_tflops": work / p_ms / 1e9 / c_tflops,
                         "bitwise_vs_varlen": same, "lq": lq, "lk": lk}
                    extra = ""
                    for oname, lib in others if vname == "AUTO" else ():
                        o_ms, o_same = paged_other(lib, [q, kp, vp, cu_q, table, seq_lens, o, lse],
                                                   varlen_desc(lib, 0, lq, lk, 0), page, ref_o["AUTO"], a.iters)
                        r["other_" + oname] = {"ms": o_ms, "p/c": work / o_ms / 1e9 / c_tflops, "bitwise": o_same}
                        extra += " | %9.3f %6.2f %s" % (o_ms, work / o_ms / 1e9 / c_tflops, o_same)
                    results.append(r)
                    print("%-6d %-5s %-4d %-9s | %9.3f %7.1f | %9.3f %7.1f %6.2f | %9.3f %7.1f %6.2f | %9.3f %7.1f %6.2f | %s" % (
                        total, side, page, vname, p_ms, work / p_ms / 1e9, ref["SM80_M128"],
                        work / ref["SM80_M128"] / 1e9, p_ms / ref["SM80_M128"], ref["AUTO"],
                        work / ref["AUTO"] / 1e9, p_ms / ref["AUTO"], c_ms, c_tflops,
                        r["paged_over_contig_tflops"], same) + extra, flush=True)
        print("  lengths %s" % lq)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
