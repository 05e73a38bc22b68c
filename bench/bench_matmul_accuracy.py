#!/usr/bin/env python3
"""Long-K accuracy of libkaio's f32-output matmul against cuBLAS's
f16-in/f32-out (torch.mm with out_dtype=float32), both measured against an
f64 CPU reference on a sample of output elements, in one process.

    python3 bench/bench_matmul_accuracy.py --lib build/src/libkaio.so
        [--k 4096 --k 14336 --k 57344] [--shape M,N ...] [--samples 512] [--tag NAME]

Per (M, N, K, in dtype): the relative error ||out - ref|| / ||ref|| over the
sampled elements of the one-shot call (kaio_matmul), the prepared op
(kaio_op_create_matmul: it may split K) and cuBLAS, and kaio / cuBLAS.
Inputs are standard normal, nn.Linear layout (A M x K, B N x K)."""

import argparse
import ctypes as C
import math

import torch

from bench_matmul_out import matmul_desc, matmul_op
from kaio_torch import Kaio


def one_shot(kaio, a, b, c):
    d = matmul_desc(kaio, a.dtype, c.dtype)
    va, vb, vc = kaio.view(a), kaio.view(b), kaio.view(c)
    kaio.check(kaio.lib.kaio_matmul(kaio.stream, C.byref(va), C.byref(vb), C.byref(vc), C.byref(d)),
               "kaio_matmul")


def prepared(kaio, a, b, c):
    m, k = a.shape
    op = matmul_op(kaio, a.dtype, c.dtype, m, b.shape[0], k)
    kaio.launch(op, [kaio.view(a), kaio.view(b), kaio.view(c)])
    torch.cuda.synchronize()
    kaio.lib.kaio_op_destroy(op)


def rel_err(out, rows, cols, ref):
    got = out[rows, cols].double().cpu()
    return math.sqrt(((got - ref) ** 2).sum().item() / (ref ** 2).sum().item())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--k", type=int, action="append", default=[])
    ap.add_argument("--shape", action="append", default=[])
    ap.add_argument("--samples", type=int, default=512)
    ap.add_argument("--tag", default="")
    args = ap.parse_args()
    ks = args.k or [4096, 14336, 57344]
    shapes = [tuple(int(x) for x in s.split(",")) for s in args.shape] or [(2048, 2048), (128, 4096)]
    kaio = Kaio(args.lib)
    print("%s %-22s %-5s | %9s %9s %9s | %6s %6s" % (args.tag, "M x N x K", "in", "one-shot", "prepared",
                                                     "cuBLAS", "1s/cub", "pr/cub"))
    for m, n in shapes:
        for k in ks:
            for dt in (torch.float16, torch.bfloat16):
                g = torch.Generator(device="cuda").manual_seed(k + m)
                a = torch.randn(m, k, device="cuda", dtype=dt, generator=g)
                b = torch.randn(n, k, device="cuda", dtype=dt, generator=g)
                gs = torch.Generator().manual_seed(1)
                rows = torch.randint(0, m, (args.samples,), generator=gs)
                cols = torch.randint(0, n, (args.samples,), generator=gs)
                ref = (a[rows].double().cpu() * b[cols].double().cpu()).sum(dim=1)
                errs = []
                for fn in (one_shot, prepared):
                    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
                    fn(kaio, a, b, c)
                    torch.cuda.synchronize()
                    errs.append(rel_err(c, rows, cols, ref))
                    kaio.release()
                cub = torch.mm(a, b.t(), out_dtype=torch.float32)
                errs.append(rel_err(cub, rows, cols, ref))
                print("%s %5d x %5d x %5d %-5s | %9.2e %9.2e %9.2e | %6.2f %6.2f" % (
                    args.tag, m, n, k, str(dt)[6:], errs[0], errs[1], errs[2], errs[0] / errs[2],
                    errs[1] / errs[2]), flush=True)


if __name__ == "__main__":
    main()
