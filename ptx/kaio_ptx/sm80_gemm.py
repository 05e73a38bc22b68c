"""The sm_80 mma.sync GEMM main loop the matmul and int8 kernels share: a
128 x 128 CTA tile, K step 32, 256 threads as 2 x 4 warps of 64 x 32;
operands staged global -> shared (cp.async or through registers) into
XOR-swizzled tiles and read with ldmatrix.  The design is described in
ptx/gen_matmul_sm80.py's docstring."""

from kaio_ptx import cp_async
from kaio_ptx.control import loop, skip_if
from kaio_ptx.mma import ldmatrix_x4

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
            elem = k.rd("add.u64", k.rd("mul.lo.u64", k.wide(row), ld), k.wide(kc))
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
            elem = k.rd("add.u64", k.rd("mul.lo.u64", k.wide(krow), ld), k.wide(idx))
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
            cp_async.copy(k, "%s+%d" % (dst, s * 4096), src, 16, size, None if self.kmajor else "!" + self.part)
        if not self.kmajor:
            with skip_if(k, "!" + self.edge, "no_edge_" + self.tag, uni=True):
                k.note("partly valid chunks along M/N: element loads, st.shared")
                for s in range(2):
                    words = self.edge_words(s, oks[s])
                    k.op("@%s st.shared.v4.b32 [%s+%d], {%s}" % (self.part, dst, s * 4096, ", ".join(words)))
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
            with skip_if(k, "!" + self.edge, "no_edge_" + self.tag, uni=True):
                k.note("partly valid chunks along M/N: element loads")
                for s in range(2):
                    words = self.edge_words(s, oks[s])
                    for j in range(4):
                        k.op("@%s mov.b32 %s, %s" % (self.part, out[s][j], words[j]))
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
        out = []
        for i in range(self.nld):
            ri, imm = self.frag(kk, i)
            out.append(ldmatrix_x4(k, addrs[ri], imm, not self.kmajor, dst[i] if dst else None))
        return out


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


DEFAULT_OPTS = {"stages": ASYNC_STAGES, "pipe": False, "group": 0, "maxnreg": 0}


def main_loop(k, variant, stages, o, A, B, st_a, st_b, acc, mma, kdim):
    """The K loop of every variant: global -> shared staging and the mma steps;
    kdim is K in 16-bit elements."""
    ktiles = k.r("shr.u32", k.r("add.u32", kdim, BK - 1), 5)
    kt = k.r("mov.u32", 0)
    rs = k.r("mov.u32", 0)          # byte offset of the stage being multiplied
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
        with skip_if(k, k.p("setp.ge.u32", k.r("add.u32", kt, 1), ktiles), "no_next", uni=True):
            ra, rb = A.load_regs(), B.load_regs()
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
        with loop(k, "kloop") as lp:
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
            lp.again(k.p("setp.lt.u32", kt, ktiles))
        k.op("cp.async.wait_group 0")
    elif variant == "async":
        k.note("prologue: K tiles 0..%d into stages 0..%d" % (stages - 2, stages - 2))
        for s in range(stages - 1):
            A.issue_async(k.r("add.u32", st_a, s * STAGE_BYTES))
            B.issue_async(k.r("add.u32", st_b, s * STAGE_BYTES))
            k.op("cp.async.commit_group")
        ws = k.r("mov.u32", (stages - 1) * STAGE_BYTES)   # stage the next copy goes to
        with loop(k, "kloop") as lp:
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
            lp.again(k.p("setp.lt.u32", kt, ktiles))
        k.op("cp.async.wait_group 0")
    elif o["pipe"]:
        k.note("prologue: K tile 0 into stage 0")
        ra, rb = A.load_regs(), B.load_regs()
        A.store_regs(st_a, ra)
        B.store_regs(st_b, rb)
        k.op("bar.sync 0")
        cur = ([k.regs("r", 4) for _ in range(A.nld)], [k.regs("r", 4) for _ in range(B.nld)])
        load_kstep(A, B, stage_addrs(k, A, B, rs), 0, cur)
        with loop(k, "kloop") as lp:
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
            lp.again(k.p("setp.lt.u32", kt, ktiles))
    else:
        k.note("prologue: K tile 0 into stage 0")
        ra, rb = A.load_regs(), B.load_regs()
        A.store_regs(st_a, ra)
        B.store_regs(st_b, rb)
        k.op("bar.sync 0")
        with loop(k, "kloop") as lp:
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
            lp.again(k.p("setp.lt.u32", kt, ktiles))
