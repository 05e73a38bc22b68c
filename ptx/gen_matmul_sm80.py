#!/usr/bin/env python3
"""Generate libkaio's sm_80 tensor-core matmul kernels (mma.sync, no wgmma).

    python3 ptx/gen_matmul_sm80.py          # write ptx/matmul_sm80_sync.ptx and ptx/matmul_sm80_async.ptx
    python3 ptx/gen_matmul_sm80.py --check  # exit 1 if a committed file differs from a fresh run

Only the Python standard library is used and the output depends on nothing but
this file, so --check is reproducible.

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

import argparse
import os
import sys

from ptx_emitter import PtxEmitter, load_params, write_or_check

HERE = os.path.dirname(os.path.abspath(__file__))
HEADER = (
    "// Generated by ptx/gen_matmul_sm80.py -- do not edit; edit the generator and re-run it.\n"
    "// Check with: python3 ptx/gen_matmul_sm80.py --check\n"
    "\n"
    ".version 7.0\n"
    ".target sm_80\n"
    ".address_size 64\n"
)

BLOCK = 256                 # blockDim (256, 1, 1)
BM = BN = 128               # CTA tile
BK = 32                     # K step
TILE_BYTES = BM * BK * 2    # one operand tile: 8 KiB
STAGE_BYTES = 2 * TILE_BYTES
ASYNC_STAGES = 4
SYNC_STAGES = 2
WARP_M, WARP_N = 64, 32     # warp tile; warps arranged 2 (M) x 4 (N)
MT, NT = WARP_M // 16, WARP_N // 8   # mma tiles per warp: 4 x 4
SMEM_SYM = "kaio_mm_smem"

PARAMS = [(".u64", "a"), (".u64", "b"), (".u64", "c"), (".u32", "m"), (".u32", "n"),
          (".u32", "k"), (".u64", "lda"), (".u64", "ldb"), (".u64", "ldc"),
          (".f32", "alpha"), (".f32", "beta"), (".u32", "out_dtype")]


# --------------------------------------------------------------------------
# Kernel builder: virtual registers, labels, text.
# --------------------------------------------------------------------------

class Kernel(PtxEmitter):
    def __init__(self, name, doc, shared_decl, shared_bytes, params=PARAMS):
        self.name, self.doc = name, doc
        self.shared_decl, self.shared_bytes = shared_decl, shared_bytes
        self.params = params
        super().__init__()

    def text(self):
        directives = [".maxntid %d, 1, 1" % BLOCK]
        if getattr(self, "maxnreg", 0):
            directives.append(".maxnreg %d" % self.maxnreg)
        return self.entry_text(self.name, self.doc,
                               ["// kaio-shared-bytes: %s %d" % (self.name, self.shared_bytes)],
                               self.params, directives, self.shared_decl)


def wide(k, r32):
    return k.rd("cvt.u64.u32", r32)


# --------------------------------------------------------------------------
# One operand (A or B): global addressing, shared layout, fragment addressing.
# --------------------------------------------------------------------------

class Operand:
    """kmajor: the shared tile is [row][k] (row = m for A, n for B), i.e. the
    global matrix is K-contiguous (A la=n, B lb=t).  Otherwise [k][row] from an
    M/N-contiguous global matrix (A la=t, B lb=n).

    Global chunks of this thread (s = 0, 1):
      kmajor: row = blk + tid/4 + 64 s, k = k0 + 8 (tid % 4)
      mn:     k = k0 + tid/16 + 16 s,   row = blk + 8 (tid % 16) .. +7
    Shared byte offset of chunk 1 = chunk 0 + 4096 in both layouts."""

    def __init__(self, k, tag, kmajor, base, ld, extent, blk, tid, kdim, tile_off):
        self.k, self.tag, self.kmajor = k, tag, kmajor
        self.base, self.ld, self.extent, self.kdim = base, ld, extent, kdim
        self.tile_off = tile_off
        k.note("operand %s: %s-contiguous shared tile" % (tag, "K" if kmajor else "M/N"))
        if kmajor:
            row = k.r("add.u32", blk, k.r("shr.u32", tid, 2))
            kc = k.r("shl.b32", k.r("and.b32", tid, 3), 3)
            elem = k.rd("add.u64", k.rd("mul.lo.u64", wide(k, row), ld), wide(k, kc))
            self.ptr = [k.rd("add.u64", base, k.rd("shl.b64", elem, 1))]
            self.ptr.append(k.rd("add.u64", self.ptr[0], k.rd("shl.b64", ld, 7)))   # +64 rows
            self.adv = str(BK * 2)
            self.row_ok = [k.p("setp.lt.u32", row, extent),
                           k.p("setp.lt.u32", k.r("add.u32", row, 64), extent)]
            self.kcur = kc          # k index (relative to the running k0) of this thread's chunks
            # store offset: row*64 + ((c ^ ((row>>1)&3)) << 4), row = tid/4 (block offset irrelevant)
            srow = k.r("shr.u32", tid, 2)
            sw = k.r("and.b32", k.r("shr.u32", srow, 1), 3)
            chunk = k.r("xor.b32", k.r("and.b32", tid, 3), sw)
            self.st_off = k.r("add.u32", k.r("shl.b32", srow, 6), k.r("shl.b32", chunk, 4))
        else:
            krow = k.r("shr.u32", tid, 4)
            mc = k.r("shl.b32", k.r("and.b32", tid, 15), 3)
            idx = k.r("add.u32", blk, mc)
            elem = k.rd("add.u64", k.rd("mul.lo.u64", wide(k, krow), ld), wide(k, idx))
            self.ptr = [k.rd("add.u64", base, k.rd("shl.b64", elem, 1))]
            self.ptr.append(k.rd("add.u64", self.ptr[0], k.rd("shl.b64", ld, 5)))   # +16 k rows
            self.adv = k.rd("shl.b64", ld, 6)                                       # 32 k rows
            # valid elements of this thread's chunk along M/N: clamp(extent - idx, 0, 8)
            rem = k.r("sub.s32", extent, idx)
            nval = k.r("min.s32", k.r("max.s32", rem, 0), 8)
            self.full = k.p("setp.eq.u32", nval, 8)
            self.kcur = krow
            srow = krow
            chunk = k.r("xor.b32", k.r("and.b32", tid, 15), k.r("and.b32", srow, 7))
            self.st_off = k.r("add.u32", k.r("shl.b32", srow, 8), k.r("shl.b32", chunk, 4))
            # CTA-uniform: does this CTA hold a partly valid chunk along M/N?
            tail = k.r("and.b32", extent, 7)
            last = k.p("setp.gt.u32", k.r("add.u32", blk, BM), extent)
            self.edge = k.p("setp.ne.and.u32", tail, 0, last)
            part = k.p("setp.lt.and.u32", nval, 8, k.p("setp.gt.u32", nval, 0))
            self.part = part
            self.nval_part = k.r("selp.b32", nval, 0, part)

    def chunk_valid(self, s):
        """Predicate: chunk s of the current K tile holds data (K and, for kmajor, row bounds)."""
        k = self.k
        if self.kmajor:
            return k.p("setp.lt.and.u32", self.kcur, self.kdim, self.row_ok[s])
        kk = self.kcur if s == 0 else k.r("add.u32", self.kcur, 16)
        return k.p("setp.lt.u32", kk, self.kdim)

    def advance(self):
        k = self.k
        for ptr in self.ptr:
            k.op("add.u64 %s, %s, %s" % (ptr, ptr, self.adv))
        k.op("add.u32 %s, %s, %d" % (self.kcur, self.kcur, BK))

    # ---- global -> shared, async ------------------------------------------
    def edge_words(self, s, ok):
        """Chunk s of a partly valid M/N chunk, loaded element by element: 4 packed
        words (zero past the valid elements or when `ok` is false)."""
        k = self.k
        hs = k.regs("h", 8)
        for e in range(8):
            k.op("mov.b16 %s, 0" % hs[e])
            pe = k.p("setp.gt.and.u32", self.nval_part, e, ok)
            k.op("@%s ld.global.nc.b16 %s, [%s+%d]" % (pe, hs[e], self.ptr[s], 2 * e))
        words = k.regs("r", 4)
        for j in range(4):
            k.op("mov.b32 %s, {%s, %s}" % (words[j], hs[2 * j], hs[2 * j + 1]))
        return words

    # ---- global -> shared, async ------------------------------------------
    def issue_async(self, dst):
        """cp.async this thread's two chunks of the current K tile to shared dst (+4096).
        Every cp.async copies 16 valid bytes or is a zero fill (src-size 0, source
        clamped to the matrix start).  A chunk that is only partly valid along M/N
        is not given to cp.async at all (a 16-byte copy would reach past the
        matrix): its thread loads the elements and stores them with st.shared,
        which the barriers before the stage is read order like the copies."""
        k = self.k
        oks = []
        for s in range(2):
            ok = self.chunk_valid(s)
            oks.append(ok)
            full = ok if self.kmajor else k.p("and.pred", ok, self.full)
            size = k.r("selp.b32", 16, 0, full)
            src = k.rd("selp.b64", self.ptr[s], self.base, full)
            guard = "" if self.kmajor else "@!%s " % self.part
            k.op("%scp.async.cg.shared.global [%s+%d], [%s], 16, %s" % (guard, dst, s * 4096, src, size))
        if not self.kmajor:
            skip = k.label("no_edge_" + self.tag)
            k.op("@!%s bra.uni %s" % (self.edge, skip))
            k.note("partly valid chunks along M/N: element loads, st.shared")
            for s in range(2):
                words = self.edge_words(s, oks[s])
                k.op("@%s st.shared.v4.b32 [%s+%d], {%s}" % (self.part, dst, s * 4096, ", ".join(words)))
            k.place(skip)
        self.advance()

    # ---- global -> registers -> shared, sync ------------------------------
    def load_regs(self):
        """ld.global this thread's two chunks into registers (zero where invalid)."""
        k = self.k
        out, oks = [], []
        for s in range(2):
            ok = self.chunk_valid(s)
            oks.append(ok)
            regs = k.regs("r", 4)
            for reg in regs:
                k.op("mov.b32 %s, 0" % reg)
            pred = ok if self.kmajor else k.p("and.pred", ok, self.full)
            k.op("@%s ld.global.nc.v4.b32 {%s}, [%s]" % (pred, ", ".join(regs), self.ptr[s]))
            out.append(regs)
        if not self.kmajor:
            skip = k.label("no_edge_" + self.tag)
            k.op("@!%s bra.uni %s" % (self.edge, skip))
            k.note("partly valid chunks along M/N: element loads")
            for s in range(2):
                words = self.edge_words(s, oks[s])
                for j in range(4):
                    k.op("@%s mov.b32 %s, %s" % (self.part, out[s][j], words[j]))
            k.place(skip)
        self.advance()
        return out

    def store_regs(self, dst, regs):
        for s in range(2):
            self.k.op("st.shared.v4.b32 [%s+%d], {%s}" % (dst, s * 4096, ", ".join(regs[s])))

    # ---- fragments ---------------------------------------------------------
    def frag_setup(self, lane, wpos, smem):
        """Lane base addresses (shared window, stage 0) for ldmatrix; returns nothing.
        self.frag(kk, i) -> (reg index, immediate) for k16 step kk and x4 load i
        (A: i = m16 tile 0..3; B: i = pair of n8 tiles 0..1)."""
        k = self.k
        is_a = self.tag == "A"
        self.nld = MT if is_a else NT // 2
        base = k.r("add.u32", smem, self.tile_off)
        self.lane_regs = []
        if self.kmajor:
            # A: row = wpos + (lane & 15), chunk = 2kk + (lane >> 4)
            # B: row = wpos + (lane & 7) + (lane >> 4)*8, chunk = 2kk + ((lane >> 3) & 1)
            if is_a:
                row = k.r("add.u32", wpos, k.r("and.b32", lane, 15))
                half = k.r("shr.u32", lane, 4)
            else:
                row = k.r("add.u32", wpos, k.r("add.u32", k.r("and.b32", lane, 7),
                                                k.r("shl.b32", k.r("shr.u32", lane, 4), 3)))
                half = k.r("and.b32", k.r("shr.u32", lane, 3), 1)
            sw = k.r("and.b32", k.r("shr.u32", row, 1), 3)
            for kk in range(2):
                chunk = k.r("xor.b32", k.r("add.u32", half, 2 * kk), sw)
                off = k.r("add.u32", k.r("shl.b32", row, 6), k.r("shl.b32", chunk, 4))
                self.lane_regs.append(k.r("add.u32", base, off))
            self.frag = lambda kk, i: (kk, i * 1024)   # 16 rows = 1024 bytes, swizzle unchanged
        else:
            # .trans; A: k = (lane & 7) + ((lane >> 4) & 1)*8, chunk = wpos/8 + 2i + ((lane >> 3) & 1)
            #         B: k = (lane & 7) + ((lane >> 3) & 1)*8, chunk = wpos/8 + 2i + (lane >> 4)
            if is_a:
                krow = k.r("add.u32", k.r("and.b32", lane, 7),
                           k.r("shl.b32", k.r("and.b32", k.r("shr.u32", lane, 4), 1), 3))
                half = k.r("and.b32", k.r("shr.u32", lane, 3), 1)
            else:
                krow = k.r("add.u32", k.r("and.b32", lane, 7),
                           k.r("shl.b32", k.r("and.b32", k.r("shr.u32", lane, 3), 1), 3))
                half = k.r("shr.u32", lane, 4)
            c0 = k.r("add.u32", k.r("shr.u32", wpos, 3), half)
            sw = k.r("and.b32", krow, 7)
            rowoff = k.r("shl.b32", krow, 8)
            for i in range(self.nld):
                chunk = k.r("xor.b32", k.r("add.u32", c0, 2 * i), sw)
                self.lane_regs.append(k.r("add.u32", base, k.r("add.u32", rowoff, k.r("shl.b32", chunk, 4))))
            self.frag = lambda kk, i: (i, kk * 16 * 256)   # 16 k rows = 4096 bytes

    def load_frags(self, addrs, kk, dst=None):
        k = self.k
        trans = "" if self.kmajor else ".trans"
        out = []
        for i in range(self.nld):
            ri, imm = self.frag(kk, i)
            regs = dst[i] if dst else k.regs("r", 4)
            k.op("ldmatrix.sync.aligned.m8n8.x4%s.shared.b16 {%s}, [%s+%d]"
                 % (trans, ", ".join(regs), addrs[ri], imm))
            out.append(regs)
        return out


# --------------------------------------------------------------------------
# Kernel body
# --------------------------------------------------------------------------

def stage_addrs(k, A, B, stage):
    """ldmatrix lane addresses of both operands for the stage at byte offset `stage`."""
    return ([k.r("add.u32", r, stage) for r in A.lane_regs],
            [k.r("add.u32", r, stage) for r in B.lane_regs])


def load_kstep(A, B, addrs, kk, dst=None):
    return (A.load_frags(addrs[0], kk, dst[0] if dst else None),
            B.load_frags(addrs[1], kk, dst[1] if dst else None))


def mma_kstep(k, acc, frags, mma):
    fa, fb = frags
    for mi in range(MT):
        for nj in range(NT):
            bregs = fb[nj // 2][2 * (nj % 2): 2 * (nj % 2) + 2]
            d = acc[mi][nj]
            k.op("%s {%s}, {%s}, {%s}, {%s}" % (mma, ", ".join(d), ", ".join(fa[mi]),
                                                ", ".join(bregs), ", ".join(d)))


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
    elem0 = k.rd("add.u64", k.rd("mul.lo.u64", wide(k, row0), P["ldc"]), wide(k, col0))
    done = k.label("done")

    for code, name, esize in ((1, "f32", 4), (2, "f16", 2), (3, "bf16", 2)):
        nxt = k.label("not_" + name)
        k.op("@%s bra.uni %s" % (k.p("setp.ne.u32", P["out_dtype"], code), nxt))
        k.note("out dtype %s" % name)
        pc = k.rd("add.u64", P["c"], k.rd("shl.b64", elem0, esize.bit_length() - 1))
        rstride = k.rd("shl.b64", P["ldc"], (esize.bit_length() - 1) + 3)   # 8 rows in bytes
        # pairs need c and every row start aligned to 2 elements
        aligned = k.p("setp.eq.u64",
                      k.rd("and.b64", k.rd("or.b64", P["c"], k.rd("shl.b64", P["ldc"], esize.bit_length() - 1)),
                           2 * esize - 1), 0)
        fast = k.p("and.pred", inside, aligned)
        slow = k.label("slow_" + name)
        k.op("@!%s bra.uni %s" % (fast, slow))
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
        k.op("bra.uni %s" % done)
        # slow path: element stores under row/column predicates
        k.place(slow)
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
                    if name == "f32":
                        k.op("@%s st.global.f32 [%s+%d], %s" % (ok, prow, off, v))
                    else:
                        h = k.reg("h")
                        k.op("cvt.rn.%s.f32 %s, %s" % (name, h, v))
                        k.op("@%s st.global.b16 [%s+%d], %s" % (ok, prow, off, h))
        k.op("bra.uni %s" % done)
        k.place(nxt)
    k.place(done)
    k.op("ret")


def main_loop(k, variant, stages, o, A, B, st_a, st_b, acc, mma, kdim):
    """The K loop of every variant: global -> shared staging and the mma steps;
    kdim is K in 16-bit elements."""
    ktiles = k.r("shr.u32", k.r("add.u32", kdim, BK - 1), 5)
    kt = k.r("mov.u32", 0)
    rs = k.r("mov.u32", 0)          # byte offset of the stage being multiplied
    loop = k.label("kloop")
    ring = stages * STAGE_BYTES

    def next_stage(reg):
        if stages == 2:
            k.op("xor.b32 %s, %s, %d" % (reg, reg, STAGE_BYTES))
        else:
            k.op("add.u32 %s, %s, %d" % (reg, reg, STAGE_BYTES))
            k.op("@%s mov.u32 %s, 0" % (k.p("setp.eq.u32", reg, ring), reg))

    def guarded_loads():
        """Registers for K tile kt+1, in a block of their own (ptxas then keeps
        the loads ahead of the mma instead of sinking them to their stores)."""
        skip = k.label("no_next")
        k.op("@%s bra.uni %s" % (k.p("setp.ge.u32", k.r("add.u32", kt, 1), ktiles), skip))
        ra, rb = A.load_regs(), B.load_regs()
        k.place(skip)
        return ra, rb

    if variant == "async" and o["pipe"]:
        k.note("prologue: K tiles 0..%d into stages 0..%d" % (stages - 1, stages - 1))
        for s in range(stages):
            A.issue_async(k.r("add.u32", st_a, s * STAGE_BYTES))
            B.issue_async(k.r("add.u32", st_b, s * STAGE_BYTES))
            k.op("cp.async.commit_group")
        k.op("cp.async.wait_group %d" % (stages - 1))
        k.op("bar.sync 0")
        cur = ([k.regs("r", 4) for _ in range(A.nld)], [k.regs("r", 4) for _ in range(B.nld)])
        load_kstep(A, B, stage_addrs(k, A, B, rs), 0, cur)
        k.place(loop)
        k.note("k16 step 1 of tile kt from shared, step 0 (loaded before) on the tensor cores")
        nxt = load_kstep(A, B, stage_addrs(k, A, B, rs), 1)
        mma_kstep(k, acc, cur, mma)
        k.op("cp.async.wait_group %d" % (stages - 2))
        k.op("bar.sync 0")
        k.note("everyone is done with stage kt %% %d: refill it with tile kt+%d" % (stages, stages))
        A.issue_async(k.r("add.u32", st_a, rs))
        B.issue_async(k.r("add.u32", st_b, rs))
        k.op("cp.async.commit_group")
        next_stage(rs)
        k.note("step 0 of tile kt+1 while step 1 of tile kt runs")
        load_kstep(A, B, stage_addrs(k, A, B, rs), 0, cur)
        mma_kstep(k, acc, nxt, mma)
        k.op("add.u32 %s, %s, 1" % (kt, kt))
        k.op("@%s bra %s" % (k.p("setp.lt.u32", kt, ktiles), loop))
        k.op("cp.async.wait_group 0")
    elif variant == "async":
        k.note("prologue: K tiles 0..%d into stages 0..%d" % (stages - 2, stages - 2))
        for s in range(stages - 1):
            A.issue_async(k.r("add.u32", st_a, s * STAGE_BYTES))
            B.issue_async(k.r("add.u32", st_b, s * STAGE_BYTES))
            k.op("cp.async.commit_group")
        ws = k.r("mov.u32", (stages - 1) * STAGE_BYTES)   # stage the next copy goes to
        k.place(loop)
        k.op("cp.async.wait_group %d" % (stages - 2))
        k.op("bar.sync 0")
        k.note("tile kt+%d -> stage (kt-1) %% %d, read by everyone before this barrier" % (stages - 1, stages))
        A.issue_async(k.r("add.u32", st_a, ws))
        B.issue_async(k.r("add.u32", st_b, ws))
        k.op("cp.async.commit_group")
        next_stage(ws)
        addrs = stage_addrs(k, A, B, rs)
        for kk in range(BK // 16):
            mma_kstep(k, acc, load_kstep(A, B, addrs, kk), mma)
        next_stage(rs)
        k.op("add.u32 %s, %s, 1" % (kt, kt))
        k.op("@%s bra %s" % (k.p("setp.lt.u32", kt, ktiles), loop))
        k.op("cp.async.wait_group 0")
    elif o["pipe"]:
        k.note("prologue: K tile 0 into stage 0")
        ra, rb = A.load_regs(), B.load_regs()
        A.store_regs(st_a, ra)
        B.store_regs(st_b, rb)
        k.op("bar.sync 0")
        cur = ([k.regs("r", 4) for _ in range(A.nld)], [k.regs("r", 4) for _ in range(B.nld)])
        load_kstep(A, B, stage_addrs(k, A, B, rs), 0, cur)
        k.place(loop)
        ra, rb = guarded_loads()
        nxt = load_kstep(A, B, stage_addrs(k, A, B, rs), 1)
        mma_kstep(k, acc, cur, mma)
        next_stage(rs)
        k.note("the other stage was last read before the previous barrier")
        A.store_regs(k.r("add.u32", st_a, rs), ra)
        B.store_regs(k.r("add.u32", st_b, rs), rb)
        k.op("bar.sync 0")
        load_kstep(A, B, stage_addrs(k, A, B, rs), 0, cur)
        mma_kstep(k, acc, nxt, mma)
        k.op("add.u32 %s, %s, 1" % (kt, kt))
        k.op("@%s bra %s" % (k.p("setp.lt.u32", kt, ktiles), loop))
    else:
        k.note("prologue: K tile 0 into stage 0")
        ra, rb = A.load_regs(), B.load_regs()
        A.store_regs(st_a, ra)
        B.store_regs(st_b, rb)
        k.op("bar.sync 0")
        k.place(loop)
        ra, rb = guarded_loads()
        addrs = stage_addrs(k, A, B, rs)
        for kk in range(BK // 16):
            mma_kstep(k, acc, load_kstep(A, B, addrs, kk), mma)
        next_stage(rs)
        k.note("the other stage was last read before the previous barrier")
        A.store_regs(k.r("add.u32", st_a, rs), ra)
        B.store_regs(k.r("add.u32", st_b, rs), rb)
        k.op("bar.sync 0")
        k.op("add.u32 %s, %s, 1" % (kt, kt))
        k.op("@%s bra %s" % (k.p("setp.lt.u32", kt, ktiles), loop))



DEFAULT_OPTS = {"stages": ASYNC_STAGES, "pipe": False, "group": 0, "maxnreg": 0}


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
    k = Kernel(name, doc, shared_decl, dyn)
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
            parts.append("\n// dynamic shared memory of every kernel below\n"
                         ".extern .shared .align 128 .b8 %s[];\n" % SMEM_SYM)
        for dt in ("f16", "bf16"):
            for la in ("n", "t"):
                for lb in ("n", "t"):
                    parts.append("\n" + matmul_kernel(variant, dt, la, lb, opts))
        files["matmul_sm80_%s.ptx" % variant] = "".join(parts)
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="fail if the committed files are stale")
    args = ap.parse_args()
    return write_or_check(HERE, generate(), args.check, "gen_matmul_sm80.py")


if __name__ == "__main__":
    sys.exit(main())
