#!/usr/bin/env python3
"""The int4 decode matvec kernels (ptx/gen_quant_int4.py gemv_kernel) run on
the host by tests/ptx_lockstep.py, against x · W in doubles, W dequantized
as the kernels' contract says (((q ^ xmask) - (z + zoff)) * s, rounded once
to the activations' type).

    python3 tests/int4_gemv_emulated.py build/ptx/quant_int4_gemv_sm90.ptx

Every contiguous-K kernel (16, 8 and 4 warps; M <= 8 and M <= 16) and the
interleaved ones, f16 and bf16, GPTQ and signed nibbles, with and without
qzeros, zoff 0 and 1: random x with padded rows, random weights and zeros,
scales from 2^-12 to 2^-4, N off the CTA's 32 columns, K with whole and
partial batches, a warp with no steps; f32 C with padded rows (the padding
must stay untouched). This checks the fragment layouts (the m8 kernels'
weights in the mma's A), the step-by-step refill with its predicated tail
and the warp-order reduction without a GPU; GpuQuantInt4 and GpuInt4Pdl
check the hardware. Tolerance: relative Frobenius 1e-6 (the emulated mma
sums exactly; W is rounded as the reference rounds it).
"""
import os
import random
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ptx_lockstep  # noqa: E402
from ptx_lockstep import b2f, bf2f, d2bf, f2h, h2f, launch, parse_kernel  # noqa: E402

ptx_lockstep.EXACT_HALF = False     # the scale multiply rounds W once, as the contract says

rnd = random.Random(7)


def to16(dt, v):
    return f2h(v) if dt == "f16" else d2bf(v)


def from16(dt, b):
    return h2f(b) if dt == "f16" else bf2f(b)


def run(text, name, warps, dt, m, n, k, group, signed, zeros, zoff):
    rows = 16 if "_m16" in name else 8
    ldx, ldqw, ldsc, ldo = k + 8, n + 4, n + 4, n + 3
    ldqz = (n + 7) // 8 + 1
    ngrp = k // group
    x = [to16(dt, rnd.uniform(-1, 1)) for _ in range(m * ldx)]
    qw = [rnd.getrandbits(32) for _ in range(k // 8 * ldqw)]
    qz = [rnd.getrandbits(32) for _ in range(ngrp * ldqz)]
    sc = [to16(dt, rnd.choice((1, -1)) * 2.0 ** rnd.uniform(-12, -4)) for _ in range(ngrp * ldsc)]
    xmask = 0x88888888 if signed else 0
    # reference: W(k, n) rounded once to dt, then an f64 dot product
    ref = [[0.0] * n for _ in range(m)]
    for kk in range(k):
        g = kk // group
        for nn in range(n):
            q = ((qw[(kk // 8) * ldqw + nn] ^ xmask) >> (4 * (kk % 8))) & 15
            z = (((qz[g * ldqz + nn // 8] >> (4 * (nn % 8))) & 15) + zoff) if zeros else 8
            w = from16(dt, to16(dt, (q - z) * from16(dt, sc[g * ldsc + nn])))
            for r in range(m):
                ref[r][nn] += from16(dt, x[r * ldx + kk]) * w
    mem = bytearray()

    def put(words, size):
        off = (len(mem) + 255) // 256 * 256
        mem.extend(bytearray(off - len(mem)))
        for v in words:
            mem.extend(v.to_bytes(size, "little"))
        return off

    xo, qwo, qzo, sco = put(x, 2), put(qw, 4), put(qz, 4), put(sc, 2)
    nan = 0x7FC00000
    co = put([nan] * (m * ldo), 4)
    mem.extend(bytearray(4096))
    gshift = 31 if group == k and group & (group - 1) else (group // 32).bit_length() - 1
    params = dict(x=xo, ldx=ldx, m=m, k=k, gshift=gshift, xmask=xmask, zoff=zoff, out_dtype=1)
    for p in "qkv":
        params.update({"qw_" + p: qwo, "ldqw_" + p: ldqw, "qz_" + p: qzo if zeros else 0,
                       "ldqz_" + p: ldqz, "sc_" + p: sco, "ldsc_" + p: ldsc, "out_" + p: co,
                       "ldo_" + p: ldo, "n_" + p: n if p == "q" else 0})
    launch(parse_kernel(text, name), ((n + 31) // 32, 1, (m + rows - 1) // rows), params, mem, warps,
           smem_bytes=warps * rows * 32 * 4)
    err2 = ref2 = 0.0
    for r in range(m):
        for nn in range(ldo):
            got = b2f(int.from_bytes(mem[co + 4 * (r * ldo + nn):co + 4 * (r * ldo + nn) + 4], "little"))
            if nn >= n:
                if int.from_bytes(mem[co + 4 * (r * ldo + nn):co + 4 * (r * ldo + nn) + 4], "little") != nan:
                    return "padding written at %d,%d" % (r, nn)
                continue
            if got != got:
                return "output %d,%d unwritten" % (r, nn)
            err2 += (got - ref[r][nn]) ** 2
            ref2 += ref[r][nn] ** 2
    rel = (err2 / max(ref2, 1e-300)) ** 0.5
    return None if rel <= 1e-6 else "relative error %.3g" % rel


def main(path):
    text = open(path).read()
    warps_of = {"": 16, "_w8": 8, "_w4": 4, "_w4s2": 4}
    failures = cases = 0
    for name in re.findall(r"\.entry (kaio_int4_gemv_\w+)\(", text):
        dt = "bf16" if "_bf16_" in name else "f16"
        v = re.search(r"_g128(_w\d+s?\d?)?", name)
        warps = warps_of[(v.group(1) or "")] if v else 16
        group = 128 if v else 64
        m = 3 if "_m8" in name else 11
        # K 4096 and 3200: three or more batches a warp, so the refill runs (and ends off a
        # batch at 3200); 640: a partial batch and warps with no step
        for n, k, signed, zeros, zoff in ((72, 1024, False, True, 0), (40, 640, True, False, 0),
                                          (8, 256, False, True, 1), (40, 4096, False, True, 1),
                                          (24, 3200, True, True, 0)):
            cases += 1
            why = run(text, name, warps, dt, m, n, k, group, signed, zeros, zoff)
            if why:
                failures += 1
                print("FAIL %s n %d k %d: %s" % (name, n, k, why))
    print("%d cases, %d failed" % (cases, failures))
    return 1 if failures or not cases else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
