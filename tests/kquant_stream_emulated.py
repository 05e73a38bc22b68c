#!/usr/bin/env python3
"""The streaming dequant-matvec kernels (ptx/kquant_stream.py) run on the host
by tests/ptx_lockstep.py's Cta (divergent lanes, mbarriers, bulk copies,
named barriers), against C = A · dequant(W)^T in doubles.

    python3 tests/kquant_stream_emulated.py build/ptx/kquant_stream_sm90.ptx

Every format (Q8_0, Q4_K, Q5_K, Q6_K) with f16, bf16 and f32 A: random block
bytes (only the f16 scales set to small finite values), A rows padded with
NaN poison, C rows padded (the padding must stay untouched), two CTAs of a
grid striding over 16-row tiles, more stages than the ring holds, a partial
last tile and stage. One case has two stages per tile, two run a ring of 2
(the host's choice for a large A), two split A with lanes past its end
or in three passes. This checks the
producer / consumer protocol, the fragment layouts, the group sums and the
f32 / bf16 split without a GPU; GpuKquant.QuantMatmulMatchesTheF64Reference
checks the hardware. Tolerance: the Frobenius norm of the error over that of
sum_k |a_k w_k| (the emulated mma sums exactly): 1e-5, plus 2^-11 for f16 C.
"""
import os
import random
import re
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kquant_mma_emulated import BB, deq, make_block  # noqa: E402
from ptx_lockstep import Cta, b2f, bf2f, f2h, h2f, parse_kernel  # noqa: E402

rnd = random.Random(7)
BB = dict(BB, q8_0=34)
BE = {"q8_0": 32, "q4_k": 256, "q5_k": 256, "q6_k": 256}
UNIT = {"q8_0": 32, "q4_k": 64, "q5_k": 64, "q6_k": 128}    # what the host passes as units
ESIZE = {"f16": 2, "bf16": 2, "f32": 4}
DTYPE = {"f32": 1, "f16": 2, "bf16": 3}


def q8_block():
    b = bytearray(rnd.randrange(256) for _ in range(34))
    b[0:2] = struct.pack("<H", f2h(rnd.uniform(-0.01, 0.01)))
    return b


def q8_deq(b):
    d = h2f(b[0] | (b[1] << 8))
    return [d * (v - 256 if v >= 128 else v) for v in b[2:34]]


def activations(dt, count):
    """count values of dt: (bytes, the values as doubles)."""
    vals, raw = [], bytearray()
    for _ in range(count):
        x = rnd.uniform(-1, 1) * (2.0 ** rnd.randrange(-3, 4))
        if dt == "f16":
            h = f2h(x)
            raw += struct.pack("<H", h)
            vals.append(h2f(h))
        elif dt == "bf16":
            h = struct.unpack("<I", struct.pack("<f", x))[0] >> 16
            raw += struct.pack("<H", h)
            vals.append(bf2f(h))
        else:
            raw += struct.pack("<f", x)
            vals.append(struct.unpack("<f", struct.pack("<f", x))[0])
    return raw, vals


def run(text, fmt, dt, M, N, nblk, ctas=2, out_f16=False, stages=3, windows=None):
    name = "kaio_kq_stream_%s_%s" % (fmt, dt)
    kern = parse_kernel(text, name)
    launch_line = re.search(r"// kaio-launch: %s block=(\d+) shared_fixed=(\d+) ring_stage=(\d+) ring_stages=(\d+)"
                            % name, text)
    threads, fixed, stage = (int(launch_line.group(i)) for i in (1, 2, 3))
    assert 2 <= stages <= int(launch_line.group(4))
    K = nblk * BE[fmt]
    W, Wd = bytearray(), []
    for _ in range(N):
        drow = []
        for _ in range(nblk):
            blk = q8_block() if fmt == "q8_0" else make_block(fmt)
            drow += q8_deq(blk) if fmt == "q8_0" else deq(fmt, blk)
            W += blk
        Wd.append(drow)
    lda = K + 8
    abytes, avals = bytearray(), []
    for _ in range(M):
        raw, vals = activations(dt, K)
        abytes += raw + b"\xff" * (8 * ESIZE[dt])       # NaN poison past K
        avals.append(vals)
    aoff = 4096
    woff = (aoff + len(abytes) + 4096) // 16 * 16
    coff = (woff + len(W) + 4096) // 16 * 16
    ldc, csize = N + 3, 2 if out_f16 else 4
    mem = bytearray(coff + M * ldc * csize + 4096)
    mem[aoff:aoff + len(abytes)] = abytes
    mem[woff:woff + len(W)] = W
    mem[coff:coff + M * ldc * csize] = b"\xff" * (M * ldc * csize)
    params = dict(a=aoff, w=woff, c=coff, m=M, n=N, units=K // UNIT[fmt], lda=lda,
                  w_stride=nblk * BB[fmt], ldc=ldc, a_dtype=DTYPE[dt], out_dtype=2 if out_f16 else 1,
                  stages=stages)
    # Q6_K / Q8_0 rows off 32 bytes take 16-byte windows, placed at their
    # source's offset mod 32 (the host's rule; a case may force them on
    # aligned rows)
    if windows is None:
        windows = int(fmt in ("q6_k", "q8_0") and (nblk % 8 != 0 or woff % 32 != 0 or params["w_stride"] % 32 != 0))
    params["windows"] = windows
    split = dt == "f32" or (fmt == "q8_0" and dt == "bf16")
    smem = stages * stage + fixed + M * K * (4 if split else 2)
    smem += 3 * M * (K // 32) * 2 if fmt in ("q4_k", "q5_k") else 0
    for cta in range(ctas):
        Cta(kern, params, mem, threads // 32, smem, cta, ctas).run()
    err = norm = 0.0
    for m in range(M):
        for n in range(N):
            o = coff + csize * (m * ldc + n)
            raw = int.from_bytes(mem[o:o + csize], "little")
            assert raw != (1 << (8 * csize)) - 1, "C[%d, %d] not written" % (m, n)
            terms = [avals[m][kk] * Wd[n][kk] for kk in range(K)]
            err += ((h2f(raw) if out_f16 else b2f(raw)) - sum(terms)) ** 2
            norm += sum(abs(x) for x in terms) ** 2
        for n in range(N, ldc):
            o = coff + csize * (m * ldc + n)
            assert mem[o:o + csize] == b"\xff" * csize, "padding written"
    rel = (err / norm) ** 0.5
    print(fmt, dt, "M", M, "N", N, "blocks", nblk, "CTAs", ctas, "stages", stages, "windows", windows,
          "f16 C" if out_f16 else "f32 C",
          "rel err %.3g" % rel, flush=True)
    return rel


def main():
    text = open(sys.argv[1]).read()
    bad = 0
    # N = 70: 5 tiles (the last of 6 rows) over 2 CTAs, so CTA 0 runs 3 stages
    # into a ring of 3 and CTA 1 2; blocks per row: less than a stage (Q8_0:
    # 16 of 64, K-quants 2 of 16, Q6_K the 8 its chunks need)
    for dt in ("f16", "bf16", "f32"):
        for fmt, nblk in (("q8_0", 16), ("q4_k", 2), ("q5_k", 2), ("q6_k", 8)):
            bad += not (run(text, fmt, dt, 3, 70, nblk) < 1e-5)
    # one CTA, 7 tiles of one stage each: the ring wraps twice
    bad += not (run(text, "q4_k", "f16", 2, 100, 1, ctas=1) < 1e-5)
    # two stages per tile (17 blocks: 16 + 1)
    bad += not (run(text, "q5_k", "bf16", 1, 20, 17, ctas=1) < 1e-5)
    # a ring of 2 (the host's choice when A leaves no room for 3): 7 and 5
    # stages through it, the slots and parities wrapping at 2
    bad += not (run(text, "q6_k", "f32", 2, 100, 8, ctas=1, stages=2) < 1e-5)
    bad += not (run(text, "q4_k", "f16", 1, 40, 33, ctas=1, stages=2) < 1e-5)
    # Q6_K and Q8_0 rows at any even address (5 and 19 blocks a row: 1050
    # and 646 bytes): each chunk copied in its 16-byte window
    bad += not (run(text, "q6_k", "f16", 2, 37, 5) < 1e-5)
    bad += not (run(text, "q8_0", "bf16", 1, 23, 19) < 1e-5)
    bad += not (run(text, "q6_k", "f32", 1, 20, 21, ctas=1, stages=2) < 1e-5)
    bad += not (run(text, "q8_0", "f16", 2, 20, 16, windows=1) < 1e-5)      # windows on aligned rows
    # Q6_K rows 16 mod 32 bytes apart (8 blocks, 1680 bytes; the cases above
    # with 8 blocks too) take windows, odd rows placed 16 bytes in; 16 blocks
    # (3360 bytes) take them only where W starts at 16 mod 32
    bad += not (run(text, "q6_k", "bf16", 1, 20, 16) < 1e-5)
    # the split by quads of lanes: 57 groups (a warp's last 8 partly past
    # the end) and 272 (three passes of the 128 groups the consumers take)
    bad += not (run(text, "q8_0", "f32", 3, 20, 19, ctas=1) < 1e-5)
    bad += not (run(text, "q4_k", "f32", 2, 20, 17, ctas=1) < 1e-5)
    # f16 C (one 2^-11 rounding of each output), with the f32 split's unscale
    bad += not (run(text, "q8_0", "f32", 2, 40, 8, out_f16=True) < 1e-5 + 2.0 ** -11)
    print("%d case(s) over tolerance" % bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
