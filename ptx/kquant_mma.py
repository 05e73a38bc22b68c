"""Tensor-core dequant-matvec for f16 and bf16 activations (used by gen_kquant.py).

kaio_kq_mma_<fmt>_<f16|bf16>, fmt Q4_K, Q5_K or Q6_K: C[M, N] = A[M, K] · W^T
for M <= 8, A f16 or bf16 (the mma runs in that type), W [N, K]
quantized. Same parameters as kaio_kq_matvec_* (units = K / that kernel's
unit, see UNITS_PER_BLOCK).

Why tensor cores for a matvec: the CUDA-core kernels spend 4-7 instructions
per weight (extract, convert, multiply-add, the activation sum for the min)
and an H100 SM can issue only about 8 per weight at full HBM rate, so they
were issue-bound at 30-60 % of copy bandwidth. Here each weight costs about
one or two integer ops: quants are cut out of the loaded words two at a
time as f16x2 (bf16x2) bit patterns magic + u (exact; see Ctx), one packed
subtract makes them the exact integers, and mma.sync m16n8k16 (16-bit x
16-bit products are exact, accumulated in f32) forms the per-scale-group dot
products. The scale (and min) of each group is applied in f32 afterwards, as
in the CUDA-core kernels; the sum of the activations that the min multiplies
comes from a second mma with an all-ones A.

Checked without a GPU by tests/kquant_mma_emulated.py (a PTX interpreter
runs these kernels); on the H100 by GpuKquant.QuantMatmulMatchesTheF64Reference.

Q8_0 has no kernel here: a version of this design (34-byte blocks, only
2-byte aligned, read with 16-bit loads that each touch 8 rows) measured
26-34 % of copy bandwidth on the H100 against 59-63 % for the CUDA-core
kernel, so Q8_0 keeps that one (bench/RESULTS.md).

Mapping: a CTA of W warps (8, or 4 in the _w4 kernels; see VARIANTS) owns 16
weight rows (n0 .. n0+15); warp w takes superblocks w, w+W, ..., w+W(U-1) per
iteration, then the next WU (split-K over the warps, U blocks in flight per
warp and row, balanced to a block), and the W partial results are added in
shared memory in warp order (deterministic).
In the mma, the "M" side is the 16 weight rows, "N" the 8 activation rows
(rows past M re-read row M-1; their results are never stored) and K one
16-value step of a scale group. Which k a slot of the step holds is free
as long as A and B agree: lane (g, t) gets, for slots 2t, 2t+1, 2t+8, 2t+9,
weights that are cheap to cut from its own loaded words, and the same
positions of the activations (re-paired with prmt).
"""

import collections

FORMATS = ("q4_k", "q5_k", "q6_k")
BLOCK_BYTES = {"q4_k": 144, "q5_k": 176, "q6_k": 210}
BLOCK_ELEMS = 256
UNROLL = 1                 # superblocks in flight per warp and row (the 8-warp kernel)
UNITS_PER_BLOCK = {"q4_k": 4, "q5_k": 4, "q6_k": 2}
WARPS = 8
# The kernels: (warps per CTA, superblocks in flight per warp and row, the CTAs
# per SM that cap ptxas's registers, name suffix). Measured on the H100 at
# M = 1, f16 A (bench/RESULTS.md, decode-bw; before: 8 warps with 2 superblocks
# in flight): with 16 superblocks per row (K = 4096), where each of 8 warps made
# a single pass, 4 warps per CTA (twice the CTAs per SM): Q4_K 27.0 -> 21.3 us,
# Q5_K 28.8 -> 25.6, Q6_K 31.3 -> 30.8; with 56 (K = 14336), one superblock in
# flight per warp: Q4_K 25.5 -> 21.7 us, Q5_K 29.7 -> 27.3, Q6_K 32.0 -> 32.5
# (f16; bf16 35.0 -> 32.7). src/ops/kquant.cpp picks by K.
Variant = collections.namedtuple("Variant", "warps unroll min_ctas suffix")
VARIANTS = (Variant(WARPS, UNROLL, 2, ""), Variant(4, 2, 4, "_w4"))
ONES = {"f16": "0x3C003C00", "bf16": "0x3F803F80"}


def shift(k, v, n):
    """v << n for n >= 0, v >> n otherwise (logical)."""
    if n == 0:
        return v
    return k.r("shl.b32", v, str(n)) if n > 0 else k.r("shr.b32", v, str(-n))


class Ctx:
    """Per-kernel registers and dtype rules shared by the decoders.

    f16: a quant u sits in the f16 bits 0x6400 | u (1024 + u, u < 1024), so
    a nibble in bits 4-7 can stay there (16 u; the group scale is divided
    by 16) and sub.f16x2 removes 1024 + bias. bf16 has 7 mantissa bits:
    0x4300 | u is 128 + u for u < 128 only, so every field is shifted down
    to bit 0 and fma.bf16x2 (x * 1 - (128 + bias); sm_80 has no bf16 sub)
    removes the offset."""

    def __init__(self, k, dt):
        self.k, self.dt = k, dt
        self.x16 = dt == "f16"     # high nibbles stay in place as 16 u
        self.magic = k.r("mov.b32", "0x64006400" if self.x16 else "0x43004300")
        self.ones = k.r("mov.b32", ONES[dt])
        self.bias = {}

    def half2(self, bits, bias):
        """bits (u in each half, already masked) -> exact u - bias in each
        half; bias is the offset past the magic (f16: 0, 32 or 512 for a 16 u
        field; bf16: 0 or 32)."""
        k = self.k
        if bias not in self.bias:
            if self.x16:
                hb = 0x6400 + bias     # f16 bits of 1024 + bias (bias < 1024, exact)
            else:
                hb = 0xC300 + bias     # bf16 bits of -(128 + bias) (bias < 128, exact)
            self.bias[bias] = k.r("mov.b32", "0x%04X%04X" % (hb, hb))
        h = k.r("or.b32", bits, self.magic)
        if self.x16:
            return k.r("sub.rn.f16x2", h, self.bias[bias])
        return k.r("fma.rn.bf16x2", h, self.ones, self.bias[bias])

    def nibble(self, w, byte_shift, high):
        """The nibble pair (bytes 0, 2 of w >> byte_shift), low or high
        nibble; f16 keeps a high nibble in place (16 u)."""
        k = self.k
        if self.x16:
            return k.r("and.b32", shift(k, w, -byte_shift), "0x00F000F0" if high else "0x000F000F")
        return k.r("and.b32", shift(k, w, -(byte_shift + (4 if high else 0))), "0x000F000F")

    def hi_scale(self, s, high):
        """A group scale, divided by 16 for an in-place high nibble."""
        return self.k.f("mul.f32", s, "0f3D800000") if high and self.x16 else s


def mma(cx, a, b, c):
    """D = A·B + C (c None: zero); returns the 4 f32 D registers."""
    k = cx.k
    d = k.regs("f", 4)
    cs = c if c is not None else ["0f00000000"] * 4
    k.op("mma.sync.aligned.m16n8k16.row.col.f32.%s.%s.f32 {%s}, {%s}, {%s}, {%s}"
         % (cx.dt, cx.dt, ", ".join(d), ", ".join(a), ", ".join(b), ", ".join(cs)))
    return d


def act_pair(k, abase, kelem, off2):
    """The B fragment of a step whose slots 2t, 2t+1, 2t+8, 2t+9 hold the
    activations at kelem + (0, off2, 1, off2 + 1) (kelem even, a 64-bit
    register of the element index): b0 = (a[k], a[k+off2]), b1 = (a[k+1],
    a[k+off2+1])."""
    addr = k.rd("mad.lo.u64", kelem, "2", abase)
    y0 = k.r("ld.global.nc.b32", "[%s]" % addr)
    y1 = k.r("ld.global.nc.b32", "[%s+%d]" % (addr, 2 * off2))
    return [k.r("prmt.b32", y0, y1, "0x5410"), k.r("prmt.b32", y0, y1, "0x7632")]


def ld_u16_pair(k, addr, off_lo, off_hi):
    """A word whose low half is the 2 bytes at addr+off_lo and high half the
    2 bytes at addr+off_hi (2-byte aligned loads)."""
    lo, hi = k.reg("h"), k.reg("h")
    k.op("ld.global.nc.b16 %s, [%s+%d]" % (lo, addr, off_lo))
    k.op("ld.global.nc.b16 %s, [%s+%d]" % (hi, addr, off_hi))
    w = k.reg("r")
    k.op("mov.b32 %s, {%s, %s}" % (w, lo, hi))
    return w


def f16_to_f32(k, word, high):
    lo, hi = k.reg("h"), k.reg("h")
    k.op("mov.b32 {%s, %s}, %s" % (lo, hi, word))
    return k.f("cvt.f32.f16", hi if high else lo)


# ---------------------------------------------------------------- loads ----
# load_<fmt>(k, blk, t): the raw words one row of one block needs (issued
# early so U blocks x 2 rows of loads are in flight); blk is the block's
# address, t the lane's threadID_in_group.

def load_q45(k, blk, t, q5):
    hdr = k.regs("r", 4)
    k.op("ld.global.nc.v4.b32 {%s}, [%s]" % (", ".join(hdr), blk))
    base = k.rd("add.u64", blk, k.rd("mul.wide.u32", t, "8"))
    qs_off = 48 if q5 else 16
    qs = []
    for c in range(4):
        w = k.regs("r", 2)
        k.op("ld.global.nc.v2.b32 {%s}, [%s+%d]" % (", ".join(w), base, qs_off + 32 * c))
        qs.append(w)
    out = {"hdr": hdr, "qs": qs}
    if q5:
        qh = k.regs("r", 2)
        k.op("ld.global.nc.v2.b32 {%s}, [%s+16]" % (", ".join(qh), base))
        out["qh"] = qh
    return out


def load_q6_k(k, blk, t):
    # per half hh and l0 in (0, 16): ql words for quarters (0, 2) and (1, 3)
    # and the qh word, each from bytes l0 + 2t (+1) and l0 + 2t + 8 (+1)
    base = k.rd("add.u64", blk, k.rd("mul.wide.u32", t, "2"))
    parts = {}
    for hh in (0, 1):
        for l0 in (0, 16):
            ql0 = ld_u16_pair(k, base, 64 * hh + l0, 64 * hh + l0 + 8)
            ql1 = ld_u16_pair(k, base, 64 * hh + 32 + l0, 64 * hh + 32 + l0 + 8)
            qh = ld_u16_pair(k, base, 128 + 32 * hh + l0, 128 + 32 * hh + l0 + 8)
            parts[(hh, l0)] = (ql0, ql1, qh)
    sc = []
    for i in range(8):
        h = k.reg("h")
        k.op("ld.global.nc.b16 %s, [%s+%d]" % (h, blk, 192 + 2 * i))
        sc.append(k.r("cvt.u32.u16", h))
    dh = k.reg("h")
    k.op("ld.global.nc.b16 %s, [%s+208]" % (dh, blk))
    return {"parts": parts, "sc": sc, "d": k.f("cvt.f32.f16", dh)}


def load_block(k, fmt, blk, t):
    if fmt == "q6_k":
        return load_q6_k(k, blk, t)
    return load_q45(k, blk, t, fmt == "q5_k")


# ------------------------------------------------------------- compute ----

def accumulate(k, acc, valid, scales, dq, mins=None, ds=None):
    """acc[i] += scale(row of i)·dq[i] (- min·ds[i]); registers 0, 1 belong
    to row g, 2, 3 to row g + 8. Only for a valid block."""
    for i in range(4):
        s = scales[i // 2]
        v = k.f("mul.f32", s, dq[i])
        if mins is not None:
            v = k.f("fma.rn.f32", k.f("neg.f32", mins[i // 2]), ds[i], v)
        k.op("@%s add.f32 %s, %s, %s" % (valid, acc[i], acc[i], v))


def scale_min_k4(k, hdr, j):
    """(sc, m) of sub-block j as u32 from the header words (bytes 4..15)."""
    def byte(i):
        return k.r("bfe.u32", hdr[1 + i // 4], str(8 * (i % 4)), "8")
    if j < 4:
        return k.r("and.b32", byte(j), "63"), k.r("and.b32", byte(j + 4), "63")
    sc = k.r("or.b32", k.r("and.b32", byte(j + 4), "15"), k.r("shl.b32", k.r("shr.u32", byte(j - 4), "6"), "4"))
    m = k.r("or.b32", k.r("shr.u32", byte(j + 4), "4"), k.r("shl.b32", k.r("shr.u32", byte(j), "6"), "4"))
    return sc, m


def compute_q45(k, cx, rows, abase, kblk, t, acc, valid, q5):
    ds = []   # per row: (d, dmin) as f32
    for rw in rows:
        lo, hi = k.reg("h"), k.reg("h")
        k.op("mov.b32 {%s, %s}, %s" % (lo, hi, rw["hdr"][0]))
        ds.append((k.f("cvt.f32.f16", lo), k.f("cvt.f32.f16", hi)))
    kt = k.rd("add.u64", kblk, k.rd("mul.wide.u32", t, "8"))
    for c in range(4):
        for half in (0, 1):
            j = 2 * c + half
            # lane t holds bytes 8t .. 8t+7 of the 32: step s uses word s,
            # pairs (bytes 0, 2) and (1, 3) -> k offsets (4s, 4s+2), (4s+1, 4s+3)
            kg = k.rd("add.u64", kt, str(64 * c + 32 * half))
            dq = ds_ = None
            for s in (0, 1):
                b = act_pair(k, abase, k.rd("add.u64", kg, str(4 * s)), 2)
                a = []
                for pair in (0, 1):
                    for rw in rows:
                        u = cx.nibble(rw["qs"][c][s], 8 * pair, half)
                        if q5:
                            # qh byte bit (2c + half) -> bit 4 (bit 8 for an in-place high nibble)
                            src = 2 * c + half + 8 * pair
                            at8 = half and cx.x16
                            hb = k.r("and.b32", shift(k, rw["qh"][s], (8 if at8 else 4) - src),
                                     "0x01000100" if at8 else "0x00100010")
                            u = k.r("or.b32", u, hb)
                        a.append(cx.half2(u, 0))
                dq = mma(cx, a, b, dq)
                ds_ = mma(cx, [cx.ones] * 4, b, ds_)
            scs, mns = [], []
            for ri, rw in enumerate(rows):
                sc, m = scale_min_k4(k, rw["hdr"], j)
                scs.append(cx.hi_scale(k.f("mul.f32", ds[ri][0], k.f("cvt.rn.f32.u32", sc)), half))
                mns.append(k.f("mul.f32", ds[ri][1], k.f("cvt.rn.f32.u32", m)))
            accumulate(k, acc, valid, scs, dq, mns, ds_)


def compute_q6_k(k, cx, rows, abase, kblk, t, acc, valid):
    kt = k.rd("add.u64", kblk, k.rd("mul.wide.u32", t, "2"))
    for hh in (0, 1):
        for l0 in (0, 16):
            for q in range(4):
                # group 8hh + 2q + l0/16: elements 128hh + 32q + l0 + (0..15);
                # slots (l0+2t, l0+2t+8) and (l0+2t+1, l0+2t+9)
                b = act_pair(k, abase, k.rd("add.u64", kt, str(128 * hh + 32 * q + l0)), 8)
                a = []
                for pair in (0, 1):
                    for rw in rows:
                        ql = rw["parts"][(hh, l0)][q & 1]
                        qh = rw["parts"][(hh, l0)][2]
                        nib = cx.nibble(ql, 8 * pair, q >= 2)
                        at8 = q >= 2 and cx.x16      # the 6-bit u in place as 16 u
                        hb = k.r("and.b32", shift(k, qh, (8 if at8 else 4) - 2 * q - 8 * pair),
                                 "0x03000300" if at8 else "0x00300030")
                        a.append(cx.half2(k.r("or.b32", nib, hb), 512 if at8 else 32))   # u - 32
                d = mma(cx, a, b, None)
                gi = 8 * hh + 2 * q + l0 // 16
                scs = []
                for rw in rows:
                    sc = k.r("bfe.s32", rw["sc"][gi // 2], str(8 * (gi % 2)), "8")
                    scs.append(cx.hi_scale(k.f("mul.f32", rw["d"], k.f("cvt.rn.f32.s32", sc)), q >= 2))
                accumulate(k, acc, valid, scs, d)


def compute_block(k, fmt, cx, rows, abase, kblk, t, acc, valid):
    if fmt == "q6_k":
        compute_q6_k(k, cx, rows, abase, kblk, t, acc, valid)
    else:
        compute_q45(k, cx, rows, abase, kblk, t, acc, valid, fmt == "q5_k")


# -------------------------------------------------------------- kernel ----

def mma_matvec(k, p, fmt, dt, variant=VARIANTS[0]):
    bb, be, U, WARPS = BLOCK_BYTES[fmt], BLOCK_ELEMS, variant.unroll, variant.warps
    k.block, k.min_ctas = 32 * WARPS, variant.min_ctas
    k.shared.append(".shared .align 16 .f32 kq_red[%d]" % (WARPS * 32 * 4))
    tid = k.r("mov.u32", "%tid.x")
    lane = k.r("and.b32", tid, "31")
    warp = k.r("shr.u32", tid, "5")
    g = k.r("shr.u32", lane, "2")
    t = k.r("and.b32", lane, "3")
    n0 = k.r("mul.lo.u32", k.r("mov.u32", "%ctaid.x"), "16")
    nlast = k.r("sub.u32", p["n"], "1")
    wrows = []
    for off in (0, 8):   # rows past N read row N-1; their sums are never stored
        r = k.r("min.u32", k.r("add.u32", k.r("add.u32", n0, g), str(off)), nlast)
        wrows.append(k.rd("add.u64", p["w"], k.rd("mul.lo.u64", k.rd("cvt.u64.u32", r), p["w_stride"])))
    arow = k.r("min.u32", g, k.r("sub.u32", p["m"], "1"))
    abase = k.rd("add.u64", p["a"], k.rd("mul.lo.u64", k.rd("mul.lo.u64", k.rd("cvt.u64.u32", arow), p["lda"]), "2"))
    upb = UNITS_PER_BLOCK[fmt]
    nblk = k.r("shr.u32", p["units"], str(upb.bit_length() - 1))
    blast = k.r("sub.u32", nblk, "1")
    cx = Ctx(k, dt)
    acc = [k.var_f("0f00000000") for _ in range(4)]
    c0 = k.var_r(warp)
    loop, end = k.label("mma_chunk"), k.label("mma_done")
    k.op("@%s bra %s" % (k.p("setp.ge.u32", c0, nblk), end))
    k.place(loop)
    blocks = []
    for u in range(U):
        bi = k.r("add.u32", c0, str(u * WARPS))
        valid = k.p("setp.lt.u32", bi, nblk)
        bc = k.r("min.u32", bi, blast)   # a block past the row re-reads the last; never added
        off = k.rd("mul.wide.u32", bc, str(bb))
        rows = [load_block(k, fmt, k.rd("add.u64", wr, off), t) for wr in wrows]
        blocks.append((rows, k.rd("mul.wide.u32", bc, str(be)), valid))
    for rows, kblk, valid in blocks:
        compute_block(k, fmt, cx, rows, abase, kblk, t, acc, valid)
    k.op("add.u32 %s, %s, %d" % (c0, c0, WARPS * U))
    k.op("@%s bra %s" % (k.p("setp.lt.u32", c0, nblk), loop))
    k.place(end)
    # split-K reduction over the 8 warps, in warp order
    red = k.r("mov.u32", "kq_red")
    k.op("st.shared.v4.f32 [%s], {%s}" % (k.r("mad.lo.u32", tid, "16", red), ", ".join(acc)))
    k.op("bar.sync 0")
    done = k.label("done")
    k.op("@%s bra %s" % (k.p("setp.ge.u32", tid, "128"), done))
    r = k.r("shr.u32", tid, "3")          # weight row n0 + r
    m = k.r("and.b32", tid, "7")          # activation row
    src_lane = k.r("add.u32", k.r("shl.b32", k.r("and.b32", r, "7"), "2"), k.r("shr.u32", m, "1"))
    reg = k.r("or.b32", k.r("shl.b32", k.r("shr.u32", r, "3"), "1"), k.r("and.b32", m, "1"))
    a0 = k.r("add.u32", red, k.r("mad.lo.u32", src_lane, "16", k.r("shl.b32", reg, "2")))
    total = k.f("ld.shared.f32", "[%s]" % a0)
    for w in range(1, WARPS):
        k.op("add.f32 %s, %s, %s" % (total, total, k.f("ld.shared.f32", "[%s+%d]" % (a0, w * 32 * 16))))
    n = k.r("add.u32", n0, r)
    ok = k.p("and.pred", k.p("setp.lt.u32", n, p["n"]), k.p("setp.lt.u32", m, p["m"]))
    off = k.rd("add.u64", k.rd("mul.lo.u64", p["ldc"], k.rd("cvt.u64.u32", m)), k.rd("cvt.u64.u32", n))
    is_f32 = k.p("setp.eq.u32", p["out_dtype"], "1")
    k.op("@%s st.global.f32 [%s], %s" % (k.p("and.pred", ok, is_f32), k.rd("mad.lo.u64", off, "4", p["c"]), total))
    h = k.reg("h")
    k.op("cvt.rn.f16.f32 %s, %s" % (h, total))
    k.op("@%s st.global.b16 [%s], %s" % (k.p("and.pred", ok, k.p("setp.ne.u32", p["out_dtype"], "1")),
                                           k.rd("mad.lo.u64", off, "2", p["c"]), h))
    k.place(done)
    k.op("ret")
