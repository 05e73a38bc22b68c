#!/usr/bin/env python3
"""Generate libkaio's sm_80 tensor-core matmul kernels (mma.sync, no wgmma).

    python3 ptx/gen_matmul_sm80.py --out-dir DIR  # write DIR/matmul_sm80_sync.ptx and DIR/matmul_sm80_async.ptx

Only the Python standard library is used and the output depends on nothing but
this file and ptx/kaio_ptx, so the build is reproducible.

Kernels: kaio_matmul_sm80_<variant>_<in>_<la><lb>, variant in {sync, async},
in in {f16, bf16}, la, lb in {n, t}; 8 per file.

    C[M x N] = alpha * op(A) * op(B) + beta * C        (f32 accumulation)

  A, la = n: M x K row-major, (m, k) at a + (m*lda + k)*2
  A, la = t: K x M row-major, op(A)(m, k) at a + (k*lda + m)*2
  B, lb = n: K x N row-major, (k, n) at b + (k*ldb + n)*2
  B, lb = t: N x K row-major (nn.Linear weight), op(B)(k, n) at b + (n*ldb + k)*2
  C: M x N row-major, (m, n) at c + (m*ldc + n)*esize; out_dtype 1 = f32,
     2 = f16, 3 = bf16 (kaio_dtype), rounded once with cvt.rn; any other value
     writes nothing.  beta == 0: C is never read (it may hold NaN);
     otherwise out = fma(beta, C_old, alpha*acc).

  Params: (u64 a, u64 b, u64 c, u32 m, u32 n, u32 k, u64 lda, u64 ldb,
           u64 ldc, f32 alpha, f32 beta, u32 out_dtype); ld* in elements.
  Host guarantees: M, N >= 1; K >= 8, K % 8 == 0; a, b 16-byte aligned and
  lda, ldb multiples of 8; c aligned to its element size, ldc >= N.
  Launch: grid (ceil(N/128), ceil(M/128), 1), block (256, 1, 1), dynamic
  shared bytes as given by the '// kaio-shared-bytes: <kernel> <N>' line
  before each .entry (0: static shared only; > 48 KiB needs
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, kaio_kernel_launch sets it).

Design (both variants)
  * 256 threads = 8 warps, CTA tile 128 x 128, K step 32.  Warps form a 2 (M)
    x 4 (N) grid, warp tile 64 x 32 = 4 x 4 mma.m16n8k16 tiles, 64 f32
    accumulators per thread.  Per k16: 4 ldmatrix.x4 for A, 2 for B, 16 mma.
  * Shared tiles, 8 KiB per operand per stage, both XOR-swizzled on 16-byte
    chunks so that every ldmatrix phase (8 rows, one chunk each) and every
    16-byte store phase touches 8 distinct 16-byte bank groups:
      K-contiguous tile ([row][k], 128 rows x 64 B; A for la=n, B for lb=t):
          byte(row, chunk c) = row*64 + ((c ^ ((row >> 1) & 3)) << 4)
      MN-contiguous tile ([k][mn], 32 rows x 256 B; A for la=t, B for lb=n):
          byte(k, chunk c)   = k*256 + ((c ^ (k & 7)) << 4)
    ldmatrix without .trans reads the K-contiguous tiles (the layout mma's
    .row A / .col B fragments want); ldmatrix .trans reads the MN-contiguous
    ones and transposes on the way.
  * Global -> shared: each thread moves two 16-byte chunks of A and two of B
    per K step (A/B tile = 512 chunks).  Out-of-range chunks are zero-filled.
    Along K a chunk is wholly in or out (K % 8 == 0); along M/N (the
    contiguous dim of an MN-contiguous tile) a chunk may be partly valid: it
    is then loaded element by element in a CTA-uniform edge branch (async
    variant: and written with st.shared instead of cp.async, since a 16-byte
    cp.async with a short src-size still counts as a 16-byte read for
    compute-sanitizer).  Empty chunks are cp.async zero fills (src-size 0,
    source clamped to the matrix start) or zeroed registers.  No byte outside
    the valid elements of A and B is ever read.
  * Epilogue from registers: a CTA-uniform fast path (tile fully inside C,
    c and ldc allowing 2-element vectors) stores pairs of elements; the other
    CTAs store element by element with bounds predicates.

sync variant: ld.global.v4 into registers -> st.shared; 2 shared stages
  (32 KiB static).  The next K tile is fetched into registers while the
  current one is multiplied, stored to the other stage, then one bar.sync.
  The fetch sits in a basic block of its own (skipped after the last tile):
  otherwise ptxas sinks the loads next to their stores, after the mma, and
  exposes the global latency (measured: nt 190 -> 270 TFLOP/s).
async variant: cp.async.cg 16-byte copies, 4-stage ring (64 KiB dynamic
  shared), cp.async.wait_group 2 + one bar.sync per K step; the copy for
  tile kt+3 is issued right after the barrier, before tile kt is multiplied.

Both use 122-127 registers with no spills (ptxas 13, sm_80 and sm_90): two
CTAs (16 warps) per SM.  H100, 4096^3, f16/bf16 in and out: async 350-400
TFLOP/s, sync 240-330 (the 128 x 128 tile with 64 x 32 warp tiles is bound by
shared-memory bandwidth: 6 ldmatrix.x4 per 16 mma).

generate(opts) takes knobs that were measured and left off (DEFAULT_OPTS):
  pipe     ldmatrix of the next tile's first k16 step before its mma (needs
           140-158 registers: one CTA per SM; sync 2x slower, async +-4%)
  group    CTA raster in groups of `group` tile rows for L2 reuse (+-1%)
  stages   async ring depth (3 and 4 measured the same)
  maxnreg  .maxnreg cap (128 with pipe spills)
"""

import sys

from kaio_ptx import cli, manifest, sm80_gemm
from kaio_ptx.control import cases, if_else
from kaio_ptx.dtypes import OUT_DTYPES, store_f32_as
from kaio_ptx.kernel import Kernel
from kaio_ptx.params import load_params
from kaio_ptx.preamble import extern_shared, preamble
from kaio_ptx.sm80_gemm import (BLOCK, BM, BN, DEFAULT_OPTS, MT, NT, PARAMS, SMEM_SYM, STAGE_BYTES,
                                SYNC_STAGES, TILE_BYTES, Operand, main_loop)

HEADER = preamble(__file__)


# --------------------------------------------------------------------------
# Kernel body
# --------------------------------------------------------------------------

def epilogue(k, P, acc, tid, blk_m, blk_n, wm, wn):
    """alpha/beta, conversion, bounds-checked stores.  acc[mi][nj][e]: row
    wm*64 + 16 mi + g + 8 (e >= 2), col wn*32 + 8 nj + 2t + (e & 1)."""
    lane = k.r("and.b32", tid, 31)
    g = k.r("shr.u32", lane, 2)
    t2 = k.r("shl.b32", k.r("and.b32", lane, 3), 1)
    row0 = k.r("add.u32", blk_m, k.r("add.u32", wm, g))
    col0 = k.r("add.u32", blk_n, k.r("add.u32", wn, t2))
    pbeta = k.p("setp.ne.f32", P["beta"], "0f00000000")
    # CTA-uniform parts of the fast-path test
    in_m = k.p("setp.le.u32", k.r("add.u32", blk_m, BM), P["m"])
    in_n = k.p("setp.le.u32", k.r("add.u32", blk_n, BN), P["n"])
    inside = k.p("and.pred", in_m, in_n)
    # row predicates per 8-row group r (mi = r // 2, e >= 2 <=> r odd)
    row_ok = [k.p("setp.lt.u32", k.r("add.u32", row0, 8 * r), P["m"]) for r in range(2 * MT)]
    col_ok = [[k.p("setp.lt.u32", k.r("add.u32", col0, 8 * nj + e), P["n"]) for e in range(2)]
              for nj in range(NT)]
    elem0 = k.rd("add.u64", k.rd("mul.lo.u64", k.wide(row0), P["ldc"]), k.wide(col0))
    done = k.label("done")

    for code, name, esize in cases(k, P["out_dtype"], OUT_DTYPES, done):
        k.note("out dtype %s" % name)
        pc = k.rd("add.u64", P["c"], k.rd("shl.b64", elem0, esize.bit_length() - 1))
        rstride = k.rd("shl.b64", P["ldc"], (esize.bit_length() - 1) + 3)   # 8 rows in bytes
        # pairs need c and every row start aligned to 2 elements
        aligned = k.p("setp.eq.u64",
                      k.rd("and.b64", k.rd("or.b64", P["c"], k.rd("shl.b64", P["ldc"], esize.bit_length() - 1)),
                           2 * esize - 1), 0)
        fast = k.p("and.pred", inside, aligned)
        # the fast arm jumps to the switch's done; the slow arm falls into its branch there
        for arm in if_else(k, fast, "slow_" + name, uni=True, join=done):
            if arm.then:
                # fast path: whole tile in range, 2-element stores
                prow = pc
                for r in range(2 * MT):
                    if r:
                        prow = k.rd("add.u64", prow, rstride)
                    mi, hi = r // 2, r % 2
                    for nj in range(NT):
                        v = [k.f("mul.rn.f32", P["alpha"], acc[mi][nj][2 * hi + e]) for e in range(2)]
                        off = 8 * nj * esize
                        if name == "f32":
                            o = k.regs("f", 2)
                            k.op("@%s ld.global.v2.f32 {%s, %s}, [%s+%d]" % (pbeta, o[0], o[1], prow, off))
                        else:
                            w = k.reg("r")
                            k.op("@%s ld.global.b32 %s, [%s+%d]" % (pbeta, w, prow, off))
                            o = k.regs("f", 2)
                            if name == "f16":
                                hs = k.regs("h", 2)
                                k.op("@%s mov.b32 {%s, %s}, %s" % (pbeta, hs[0], hs[1], w))
                                for e in range(2):
                                    k.op("@%s cvt.f32.f16 %s, %s" % (pbeta, o[e], hs[e]))
                            else:
                                k.op("@%s shl.b32 %s, %s, 16" % (pbeta, o[0], w))
                                k.op("@%s and.b32 %s, %s, 0xFFFF0000" % (pbeta, o[1], w))
                        for e in range(2):
                            k.op("@%s fma.rn.f32 %s, %s, %s, %s" % (pbeta, v[e], P["beta"], o[e], v[e]))
                        if name == "f32":
                            k.op("st.global.v2.f32 [%s+%d], {%s, %s}" % (prow, off, v[0], v[1]))
                        else:
                            w = k.r("cvt.rn.%sx2.f32" % name, v[1], v[0])   # first source -> upper half
                            k.op("st.global.b32 [%s+%d], %s" % (prow, off, w))
            else:
                # slow path: element stores under row/column predicates
                prow = pc
                for r in range(2 * MT):
                    if r:
                        prow = k.rd("add.u64", prow, rstride)
                    mi, hi = r // 2, r % 2
                    for nj in range(NT):
                        for e in range(2):
                            ok = k.p("and.pred", row_ok[r], col_ok[nj][e])
                            okb = k.p("and.pred", ok, pbeta)
                            off = (8 * nj + e) * esize
                            v = k.f("mul.rn.f32", P["alpha"], acc[mi][nj][2 * hi + e])
                            o = k.reg("f")
                            if name == "f32":
                                k.op("@%s ld.global.f32 %s, [%s+%d]" % (okb, o, prow, off))
                            elif name == "f16":
                                h = k.reg("h")
                                k.op("@%s ld.global.b16 %s, [%s+%d]" % (okb, h, prow, off))
                                k.op("@%s cvt.f32.f16 %s, %s" % (okb, o, h))
                            else:
                                w = k.reg("r")
                                k.op("@%s ld.global.u16 %s, [%s+%d]" % (okb, w, prow, off))
                                k.op("@%s shl.b32 %s, %s, 16" % (okb, o, w))
                            k.op("@%s fma.rn.f32 %s, %s, %s, %s" % (okb, v, P["beta"], o, v))
                            store_f32_as(k, name, "%s+%d" % (prow, off), v, ok)
    k.op("ret")


def matmul_kernel(variant, dt, la, lb, opts=None):
    o = dict(DEFAULT_OPTS, **(opts or {}))
    name = "kaio_matmul_sm80_%s_%s_%s%s" % (variant, dt, la, lb)
    stages = o["stages"] if variant == "async" else SYNC_STAGES
    smem_bytes = stages * STAGE_BYTES
    if variant == "async":
        shared_decl, dyn = None, smem_bytes
    else:
        shared_decl, dyn = ".shared .align 128 .b8 %s_s[%d]" % (SMEM_SYM, smem_bytes), 0
    doc = """
%s: C = alpha * op(A) * op(B) + beta * C, A %s (%s), B %s (%s), %s inputs, f32 accumulation.
%s; %d shared stages of %d bytes (%s).
grid (ceil(N/128), ceil(M/128), 1), block (256, 1, 1).""" % (
        name, la, "K x M" if la == "t" else "M x K", lb, "N x K" if lb == "t" else "K x N", dt,
        "cp.async.cg 16-byte copies" if variant == "async" else "ld.global.v4 -> st.shared",
        stages, STAGE_BYTES, "dynamic" if dyn else "static")
    k = Kernel(name, doc, PARAMS, BLOCK, dyn, shared=shared_decl,
               keys={"variant": variant, "dtype": dt, "trans_a": la == "t", "trans_b": lb == "t"})
    manifest.facts(name, tile=[BM, BN, sm80_gemm.BK])
    k.maxnreg = o["maxnreg"]
    mma = "mma.sync.aligned.m16n8k16.row.col.f32.%s.%s.f32" % (dt, dt)

    P = load_params(k, PARAMS, ("a", "b", "c"))

    tid = k.r("mov.u32", "%tid.x")
    lane = k.r("and.b32", tid, 31)
    warp = k.r("shr.u32", tid, 5)
    wm = k.r("shl.b32", k.r("shr.u32", warp, 2), 6)     # warp row offset in the CTA tile: 0, 64
    wn = k.r("shl.b32", k.r("and.b32", warp, 3), 5)     # warp col offset: 0, 32, 64, 96
    cx, cy = k.r("mov.u32", "%ctaid.x"), k.r("mov.u32", "%ctaid.y")
    if o["group"]:
        g = o["group"]
        k.note("CTA order: groups of %d tile rows, column by column inside a group (L2 reuse)" % g)
        gx, gy = k.r("mov.u32", "%nctaid.x"), k.r("mov.u32", "%nctaid.y")
        pid = k.r("mad.lo.u32", cy, gx, cx)
        gsz = k.r("mul.lo.u32", gx, g)
        grp = k.r("div.u32", pid, gsz)
        first = k.r("mul.lo.u32", grp, g)
        gm = k.r("min.u32", k.r("sub.u32", gy, first), g)
        rem = k.r("sub.u32", pid, k.r("mul.lo.u32", grp, gsz))
        cy = k.r("add.u32", first, k.r("rem.u32", rem, gm))
        cx = k.r("div.u32", rem, gm)
    blk_n = k.r("shl.b32", cx, 7)
    blk_m = k.r("shl.b32", cy, 7)
    smem = k.r("mov.u32", SMEM_SYM if variant == "async" else SMEM_SYM + "_s")

    A = Operand(k, "A", la == "n", P["a"], P["lda"], P["m"], blk_m, tid, P["k"], 0)
    B = Operand(k, "B", lb == "t", P["b"], P["ldb"], P["n"], blk_n, tid, P["k"], TILE_BYTES)
    A.frag_setup(lane, wm, smem)
    B.frag_setup(lane, wn, smem)
    st_a = k.r("add.u32", smem, A.st_off)
    st_b = k.r("add.u32", smem, k.r("add.u32", B.st_off, TILE_BYTES))

    acc = [[k.regs("f", 4) for _ in range(NT)] for _ in range(MT)]
    for row in acc:
        for quad in row:
            for reg in quad:
                k.op("mov.f32 %s, 0f00000000" % reg)

    main_loop(k, variant, stages, o, A, B, st_a, st_b, acc, mma, P["k"])
    epilogue(k, P, acc, tid, blk_m, blk_n, wm, wn)
    return k.text()


# --------------------------------------------------------------------------

def generate(opts=None):
    files = {}
    for variant in ("sync", "async"):
        parts = [HEADER]
        if variant == "async":
            parts.append(extern_shared(SMEM_SYM, 128))
        for dt in ("f16", "bf16"):
            for la in ("n", "t"):
                for lb in ("n", "t"):
                    parts.append("\n" + matmul_kernel(variant, dt, la, lb, opts))
        files["matmul_sm80_%s.ptx" % variant] = "".join(parts)
    return files


if __name__ == "__main__":
    sys.exit(cli.main(__file__, __doc__, generate))
