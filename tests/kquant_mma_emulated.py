#!/usr/bin/env python3
"""The tensor-core dequant-matvec kernels (ptx/kquant_mma.py) run on the host
by tests/ptx_lockstep.py, against C = A · dequant(W)^T in doubles, with W's
dequantization written here from ggml's block layouts (dequantize_row_*).

    python3 tests/kquant_mma_emulated.py build/ptx/kquant_dequant.ptx

Random block bytes (every bit pattern is a valid block; only d, dmin are
set to small finite f16), f16 or bf16 A with a padded row stride, odd N, M
from 1 to 8, K of 2 to 5 superblocks, f32 and f16 C with padded rows (the
padding must stay untouched). This checks the fragment layout, the decoding
of every field and the split-K reduction without a GPU; the GPU test
(GpuKquant.QuantMatmulMatchesTheF64Reference) checks the hardware.
Tolerance: relative Frobenius 1e-5 for f32 C (the emulated mma is exact),
1e-3 for f16 C (2^-11 rounding of each output).
"""
import os
import random
import re
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ptx_lockstep import b2f, bf2f, f2h, h2f, launch, parse_kernel  # noqa: E402

BB = {"q4_k": 144, "q5_k": 176, "q6_k": 210}
BE = {"q4_k": 256, "q5_k": 256, "q6_k": 256}
UNIT = {"q4_k": 64, "q5_k": 64, "q6_k": 128}   # what the host passes as units
rnd = random.Random(1)
s8 = lambda v: v - 256 if v >= 128 else v


def f16(b, o):
    return h2f(b[o] | (b[o + 1] << 8))


def deq(fmt, b):
    """Reference dequant of one block (kquants.md section 3)."""
    out = [0.0] * BE[fmt]
    if fmt in ("q4_k", "q5_k"):
        d, dmin = f16(b, 0), f16(b, 2)
        s = b[4:16]
        qh = b[16:48] if fmt == "q5_k" else None
        qs = b[48:176] if fmt == "q5_k" else b[16:144]
        for j in range(8):
            if j < 4:
                sc, m = s[j] & 63, s[j + 4] & 63
            else:
                sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4)
                m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4)
            c, hi = j // 2, j % 2
            for l in range(32):
                q = (qs[32 * c + l] >> (4 * hi)) & 0xF
                if qh is not None:
                    q += 16 * ((qh[l] >> (2 * c + hi)) & 1)
                out[64 * c + 32 * hi + l] = d * sc * q - dmin * m
        return out
    ql, qh = b[0:128], b[128:192]
    d = f16(b, 208)
    for h in range(2):
        for l in range(32):
            for qq in range(4):
                low = (ql[64 * h + l + 32 * (qq & 1)] >> (4 * (qq >> 1))) & 0xF
                high = (qh[32 * h + l] >> (2 * qq)) & 3
                e = 128 * h + 32 * qq + l
                out[e] = d * s8(b[192 + e // 16]) * ((low | (high << 4)) - 32)
    return out


def make_block(fmt):
    b = bytearray(rnd.randrange(256) for _ in range(BB[fmt]))
    def put(o, v):
        h = f2h(v); b[o] = h & 0xFF; b[o + 1] = h >> 8
    if fmt == "q6_k":
        put(208, rnd.uniform(-0.01, 0.01))
    else:
        put(0, rnd.uniform(0, 0.01)); put(2, rnd.uniform(0, 0.01))
    return b


def run(text, fmt, M, N, nblk, stride_pad=0, out_f16=False, dt="f16", suffix=""):
    name = "kaio_kq_mma_%s_%s%s" % (fmt, dt, suffix)
    kern = parse_kernel(text, name)
    entry = text.index(".entry %s(" % name)
    threads = int(re.search(r"\.maxntid (\d+)", text[entry:]).group(1))   # 32 per warp
    K = nblk * BE[fmt]
    wstride = nblk * BB[fmt] + stride_pad
    W = bytearray()
    Wd = []
    for n in range(N):
        row, drow = bytearray(), []
        for bi in range(nblk):
            blk = make_block(fmt)
            drow += deq(fmt, blk)
            row += blk
        W += row + bytearray(stride_pad)
        Wd.append(drow)
    lda = K + 8
    if dt == "f16":
        A = [[h2f(f2h(rnd.uniform(-1, 1))) for _ in range(lda)] for _ in range(M)]
        abytes = b"".join(struct.pack("<H", f2h(v)) for r in A for v in r)
    else:
        bits = [[struct.unpack("<I", struct.pack("<f", rnd.uniform(-1, 1)))[0] >> 16 for _ in range(lda)] for _ in range(M)]
        A = [[bf2f(b) for b in r] for r in bits]
        abytes = b"".join(struct.pack("<H", b) for r in bits for b in r)
    aoff = 4096
    woff = (aoff + len(abytes) + 4096) // 16 * 16
    coff = (woff + len(W) + 4096) // 16 * 16
    ldc = N + 3
    esz = 2 if out_f16 else 4
    mem = bytearray(coff + M * ldc * esz + 4096)
    mem[aoff:aoff + len(abytes)] = abytes
    mem[woff:woff + len(W)] = W
    mem[coff:coff + M * ldc * esz] = b"\xff" * (M * ldc * esz)
    params = dict(a=aoff, w=woff, c=coff, m=M, n=N, units=K // UNIT[fmt], lda=lda, w_stride=wstride,
                  ldc=ldc, a_dtype=2 if dt == 'f16' else 3, out_dtype=2 if out_f16 else 1)
    launch(kern, (N + 15) // 16, params, mem, threads // 32)
    err = norm = 0.0
    for m in range(M):
        for n in range(N):
            o = coff + (m * ldc + n) * esz
            raw = int.from_bytes(mem[o:o + esz], "little")
            got = h2f(raw) if out_f16 else b2f(raw)
            ref = sum(A[m][kk] * Wd[n][kk] for kk in range(K))
            err += (got - ref) ** 2; norm += ref * ref
        for n in range(N, ldc):   # padding untouched
            o = coff + (m * ldc + n) * esz
            assert mem[o:o + esz] == b"\xff" * esz, "padding written"
    rel = (err / norm) ** 0.5
    print(fmt, dt + suffix, "M", M, "N", N, "blocks", nblk, "pad", stride_pad, "f16out", out_f16, "rel err %.3g" % rel, flush=True)
    return rel


def main():
    text = open(sys.argv[1]).read()
    bad = 0
    for dt in ("f16", "bf16"):
        for fmt in ("q4_k", "q5_k", "q6_k"):
            for (M, N, nblk) in [(1, 20, 5), (3, 16, 3), (8, 5, 2)]:
                bad += not (run(text, fmt, M, N, nblk, dt=dt) < 1e-5)
            # the 4-warp variant (superblocks: not a multiple of 4 warps x 2)
            for (M, N, nblk) in [(2, 19, 11), (8, 5, 1)]:
                bad += not (run(text, fmt, M, N, nblk, dt=dt, suffix="_w4") < 1e-5)
            # padded weight rows (16 bytes keep Q4_K/Q5_K 16-byte aligned), f16 C
            bad += not (run(text, fmt, 2, 9, 2, stride_pad=16 if fmt != "q6_k" else 2, out_f16=True, dt=dt) < 1e-3)
    print("%d case(s) over tolerance" % bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
