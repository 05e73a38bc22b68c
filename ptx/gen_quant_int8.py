#!/usr/bin/env python3
"""Generate libkaio's W8A8 matmul kernel: C = scale(A_s8 * B_s8^T), s32 accumulation.

    python3 ptx/gen_quant_int8.py --out-dir DIR  # write DIR/quant_int8.ptx

Kernel: kaio_matmul_int8_sm80_async.

  A: M x K row-major s8, (m, k) at a + m*lda + k
  B: N x K row-major s8 ("TN", the nn.Linear / cuBLASLt layout), (k, n) at b + n*ldb + k
  acc(m, n) = sum_k A(m, k) * B(k, n), exact in s32 (wraps past 2^31, as
  mma.sync does; |acc| <= K * 128 * 128 never reaches it for K < 131072).
  C: M x N row-major, (m, n) at c + (m*ldc + n)*esize; out_dtype
     6 = i32: acc itself (the scales are not applied);
     1 = f32, 2 = f16, 3 = bf16: v = ((f32(acc) * alpha) * sa[m]) * sb[n],
     each product rounded in f32, then rounded once to the output type;
     sa (f32 [M]) or sb (f32 [N]) of 0 means "no such vector" (factor 1).
  Params: (u64 a, u64 b, u64 c, u32 m, u32 n, u32 k, u64 lda, u64 ldb,
           u64 ldc, f32 alpha, u64 sa, u64 sb, u32 out_dtype); ld* in elements.
  Host guarantees: M, N >= 1; K >= 16, K % 16 == 0; a, b 16-byte aligned,
  lda, ldb multiples of 16; c aligned to its element size, ldc >= N.
  Launch: grid (ceil(N/128), ceil(M/128), 1), block (256, 1, 1), dynamic
  shared bytes from the '// kaio-shared-bytes:' line (64 KiB).

Design: the f16 "nt" cp.async kernel of gen_matmul_sm80.py, unchanged in its
staging, swizzle, ldmatrix and 4-stage ring, with two s8 values per 16-bit
element.  For K-contiguous operands an ldmatrix of 8 rows x 16 bytes hands
lane (g, t) bytes 4t..4t+3 of row g: exactly the m16n8k32 s8 fragments
(A r0 = (g, 4t..4t+3), r2 = (g, 4t+16..), B r0 = (k = 4t.., n = g)).  So
the kernel runs the f16 machinery with K/2, lda/2 and ldb/2 "elements" and
swaps each m16n8k16 f16 mma for one m16n8k32 s8 mma (twice the work per
instruction) and the f32 accumulators for s32 ones.  The epilogue converts
and scales element by element under row/column predicates.

On compute capability 9.0 the op runs kaio_matmul_sm90_s8_nt[_n128] instead,
generated with the f16/bf16 Hopper kernels by gen_matmul_sm90.py (same
scaling order, so both give the same bits); this kernel stays the sm_80
path, KAIO_MATMUL_ASYNC on any device, and the i32-output path.
"""

import sys

from kaio_ptx import cli, manifest, sm80_gemm as mm
from kaio_ptx.control import cases
from kaio_ptx.dtypes import I32, OUT_DTYPES, store_f32_as
from kaio_ptx.kernel import Kernel
from kaio_ptx.params import load_params
from kaio_ptx.preamble import extern_shared, preamble

OUT_NAME = "quant_int8.ptx"

PARAMS = [(".u64", "a"), (".u64", "b"), (".u64", "c"), (".u32", "m"), (".u32", "n"),
          (".u32", "k"), (".u64", "lda"), (".u64", "ldb"), (".u64", "ldc"),
          (".f32", "alpha"), (".u64", "sa"), (".u64", "sb"), (".u32", "out_dtype")]
MMA = "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"


def epilogue(k, P, acc, tid, blk_m, blk_n, wm, wn):
    """acc[mi][nj][e] (s32): row wm + 16 mi + g + 8 (e >= 2), col wn + 8 nj + 2t + (e & 1)."""
    lane = k.r("and.b32", tid, 31)
    g = k.r("shr.u32", lane, 2)
    t2 = k.r("shl.b32", k.r("and.b32", lane, 3), 1)
    row0 = k.r("add.u32", blk_m, k.r("add.u32", wm, g))
    col0 = k.r("add.u32", blk_n, k.r("add.u32", wn, t2))
    rows = [k.r("add.u32", row0, 8 * r) for r in range(2 * mm.MT)]
    cols = [k.r("add.u32", col0, 8 * nj + e) for nj in range(mm.NT) for e in range(2)]
    row_ok = [k.p("setp.lt.u32", r, P["m"]) for r in rows]
    col_ok = [k.p("setp.lt.u32", c, P["n"]) for c in cols]

    k.note("row and column scales (1.0 where absent or out of range)")
    has_sa = k.p("setp.ne.u64", P["sa"], 0)
    has_sb = k.p("setp.ne.u64", P["sb"], 0)

    def scales(base, idx, oks, has):
        out = []
        for i, ok in zip(idx, oks):
            s = k.reg("f")
            k.op("mov.f32 %s, 0f3F800000" % s)
            addr = k.rd("add.u64", base, k.rd("mul.wide.u32", i, 4))
            k.op("@%s ld.global.nc.f32 %s, [%s]" % (k.p("and.pred", ok, has), s, addr))
            out.append(s)
        return out

    sa = scales(P["sa"], rows, row_ok, has_sa)
    sb = scales(P["sb"], cols, col_ok, has_sb)
    rstart = [k.rd("mul.lo.u64", k.wide(r), P["ldc"]) for r in rows]
    for code, name, esize in cases(k, P["out_dtype"], (I32,) + OUT_DTYPES):
        k.note("out dtype %s" % name)
        for r in range(2 * mm.MT):
            mi, hi = r // 2, r % 2
            for nj in range(mm.NT):
                for e in range(2):
                    ci = 2 * nj + e
                    ok = k.p("and.pred", row_ok[r], col_ok[ci])
                    elem = k.rd("add.u64", rstart[r], k.wide(cols[ci]))
                    addr = k.rd("add.u64", P["c"], k.rd("shl.b64", elem, esize.bit_length() - 1))
                    a = acc[mi][nj][2 * hi + e]
                    if name == "i32":
                        k.op("@%s st.global.s32 [%s], %s" % (ok, addr, a))
                        continue
                    v = k.f("cvt.rn.f32.s32", a)
                    v = k.f("mul.rn.f32", v, P["alpha"])
                    v = k.f("mul.rn.f32", v, sa[r])
                    v = k.f("mul.rn.f32", v, sb[ci])
                    store_f32_as(k, name, addr, v, ok)
    k.op("ret")


def int8_kernel():
    name = "kaio_matmul_int8_sm80_async"
    manifest.keys(name, select="matmul_int8_sm80", variant="async", dtype="s8", trans_a=False, trans_b=True)
    manifest.facts(name, tile=[mm.BM, mm.BN, 0])
    stages = mm.ASYNC_STAGES
    dyn = stages * mm.STAGE_BYTES
    doc = """
%s: C = scale(A * B^T), A M x K s8, B N x K s8, exact s32 accumulation.
cp.async.cg 16-byte copies; %d shared stages of %d bytes (dynamic).
grid (ceil(N/128), ceil(M/128), 1), block (256, 1, 1).""" % (name, stages, mm.STAGE_BYTES)
    k = Kernel(name, doc, PARAMS, mm.BLOCK, dyn)
    P = load_params(k, PARAMS, ("a", "b", "c", "sa", "sb"))
    # A null scale vector stays null (cvta of 0 is not 0 in general).
    for s in ("sa", "sb"):
        raw = k.rd("ld.param.u64", "[%s]" % s)
        P[s] = k.rd("selp.b64", P[s], 0, k.p("setp.ne.u64", raw, 0))
    k.note("the f16 machinery in units of two s8 values")
    kb = k.r("shr.u32", P["k"], 1)
    lda = k.rd("shr.u64", P["lda"], 1)
    ldb = k.rd("shr.u64", P["ldb"], 1)

    tid = k.r("mov.u32", "%tid.x")
    lane = k.r("and.b32", tid, 31)
    warp = k.r("shr.u32", tid, 5)
    wm = k.r("shl.b32", k.r("shr.u32", warp, 2), 6)
    wn = k.r("shl.b32", k.r("and.b32", warp, 3), 5)
    blk_n = k.r("shl.b32", k.r("mov.u32", "%ctaid.x"), 7)
    blk_m = k.r("shl.b32", k.r("mov.u32", "%ctaid.y"), 7)
    smem = k.r("mov.u32", mm.SMEM_SYM)

    A = mm.Operand(k, "A", True, P["a"], lda, P["m"], blk_m, tid, kb, 0)
    B = mm.Operand(k, "B", True, P["b"], ldb, P["n"], blk_n, tid, kb, mm.TILE_BYTES)
    A.frag_setup(lane, wm, smem)
    B.frag_setup(lane, wn, smem)
    st_a = k.r("add.u32", smem, A.st_off)
    st_b = k.r("add.u32", smem, k.r("add.u32", B.st_off, mm.TILE_BYTES))

    acc = [[k.regs("r", 4) for _ in range(mm.NT)] for _ in range(mm.MT)]
    for row in acc:
        for quad in row:
            for reg in quad:
                k.op("mov.b32 %s, 0" % reg)
    mm.main_loop(k, "async", stages, mm.DEFAULT_OPTS, A, B, st_a, st_b, acc, MMA, kb)
    epilogue(k, P, acc, tid, blk_m, blk_n, wm, wn)
    return k.text()


def generate():
    text = preamble(__file__) + extern_shared(mm.SMEM_SYM, 128) + "\n" + int8_kernel()
    return {OUT_NAME: text}


if __name__ == "__main__":
    sys.exit(cli.main(__file__, __doc__, generate))
