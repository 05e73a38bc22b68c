#!/usr/bin/env python3
"""libkaio's matmul with 16-bit and f32 outputs against torch (cuBLAS), in one
process on torch's stream: prepared AUTO ops, nn.Linear layout (A M x K, B N x K),
f16 / bf16 in, out f16 / bf16 (torch.matmul, same dtype) and f32 (torch.mm
with out_dtype=float32 where this torch has it: cuBLAS's f16-in/f32-out).

    python3 bench/bench_matmul_out.py --lib build/src/libkaio.so [--iters 20]
        [--shape M,N,K ...] [--tag NAME]

Prints one line per (shape, in dtype, out dtype): kaio and torch TFLOP/s
(medians of --iters CUDA-event timings after 3 warm-ups), kaio / torch, and
the relative Frobenius difference between the two outputs. Exit status 1 if
any difference exceeds the dtype's tolerance."""

import argparse
import ctypes as C
import sys

import torch

from kaio_torch import KAIO_DTYPE, Kaio, time_ms

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (2048, 4096, 4096), (2048, 14336, 4096),
          (128, 4096, 4096), (128, 14336, 4096)]
# outputs rounded to 16 bits differ by a rounding step where the f32 sums differ
TOL = {torch.float32: 1e-4, torch.float16: 2e-3, torch.bfloat16: 1e-2}


class MatmulDesc(C.Structure):
    """kaio_matmul_desc."""
    _fields_ = [("struct_size", C.c_uint32), ("in_dtype", C.c_int32), ("out_dtype", C.c_int32),
                ("trans_a", C.c_int32), ("trans_b", C.c_int32), ("variant", C.c_int32),
                ("m", C.c_int64), ("n", C.c_int64), ("k", C.c_int64), ("alpha", C.c_float),
                ("beta", C.c_float)]


def matmul_desc(kaio, dt, od, m=0, n=0, k=0):
    """AUTO, A M x K and B N x K (nn.Linear's layout), alpha 1, beta 0."""
    d = MatmulDesc()
    kaio.check(kaio.lib.kaio_matmul_desc_init(C.byref(d), C.c_size_t(C.sizeof(MatmulDesc))), "desc_init")
    d.in_dtype, d.out_dtype, d.trans_b, d.m, d.n, d.k = KAIO_DTYPE[dt], KAIO_DTYPE[od], 1, m, n, k
    return d


def matmul_op(kaio, dt, od, m, n, k):
    o = C.c_void_p()
    kaio.check(kaio.lib.kaio_op_create_matmul(C.byref(o), kaio.dev, C.byref(matmul_desc(kaio, dt, od, m, n, k))),
               "kaio_op_create_matmul")
    return o


def torch_fn(a, b, c, od):
    if od == a.dtype:
        return lambda: torch.matmul(a, b.t(), out=c)
    try:
        torch.mm(a[:8], b[:8].t(), out_dtype=od)
    except Exception:  # noqa: BLE001 - no out_dtype in this torch: no peer
        return None
    return lambda: torch.mm(a, b.t(), out_dtype=od, out=c)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--shape", action="append", default=[])
    ap.add_argument("--tag", default="")
    args = ap.parse_args()
    shapes = [tuple(int(x) for x in s.split(",")) for s in args.shape] or SHAPES
    kaio = Kaio(args.lib)
    torch.manual_seed(0)
    bad = 0
    print("%s %-20s %-5s %-5s | %8s %8s | %6s | %s" % (args.tag, "M x N x K", "in", "out", "kaio", "torch",
                                                      "ratio", "rel diff"))
    for m, n, k in shapes:
        for dt in (torch.float16, torch.bfloat16):
            a = torch.randn(m, k, device="cuda", dtype=dt)
            b = torch.randn(n, k, device="cuda", dtype=dt)
            for od in (dt, torch.float32):
                c = torch.empty(m, n, device="cuda", dtype=od)
                ref = torch.empty(m, n, device="cuda", dtype=od)
                op = matmul_op(kaio, dt, od, m, n, k)
                run = kaio.launcher(op, [kaio.view(a), kaio.view(b), kaio.view(c)])
                peer = torch_fn(a, b, ref, od)
                tk = time_ms(run, args.iters)
                tt = time_ms(peer, args.iters) if peer else float("nan")
                run()
                if peer:
                    peer()
                torch.cuda.synchronize()
                diff = ((c.double() - ref.double()).norm() / ref.double().norm()).item() if peer else float("nan")
                ok = not peer or diff <= TOL[od]
                bad += not ok
                flops = 2.0 * m * n * k
                print("%s %5d x %5d x %5d %-5s %-5s | %8.1f %8.1f | %6.3f | %.1e%s" % (
                    args.tag, m, n, k, str(dt)[6:], str(od)[6:], flops / tk / 1e9, flops / tt / 1e9,
                    tt / tk, diff, "" if ok else " !!"), flush=True)
                kaio.lib.kaio_op_destroy(op)
                kaio.release()
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
