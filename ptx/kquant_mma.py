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
16-bit products are exact, accumulated in f32) forms the dot products.
Q4_K and Q5_K: the min part, sum_j m_j * sum(x of group j), is a second mma
whose A holds the 6-bit mins; with f16 A the 6-bit group scales are folded
into the weights by the fma that removes the magic (u * sc < 2048 stays an
exact f16 integer), so one accumulator spans the superblock and only d and
dmin are applied in f32; with bf16 A (8-bit significands) each group keeps
its own mma and an f32 fma applies its scale. Q6_K (signed 8-bit scales:
u * sc needs 13 bits) applies each group's scale in f32.

Measured (bench_kquant --matvec, H100, M = 1, same run against the unfolded
kernels with their ones-mma for the mins and per-group f32 updates): Q4_K
bf16 22.1-23.0 -> 19.0-19.8 us, f16 at (4096 x 14336) 21.9 -> 20.1-20.2;
Q5_K 25.5-27.7 -> 23.2-24.4 us. ncu: still latency-bound (16 warps per SM
by registers, 48 % issue, the top stall on L1TEX results).

Checked without a GPU by tests/kquant_mma_emulated.py (a PTX interpreter
runs these kernels); on the H100 by GpuKquant.QuantMatmulMatchesTheF64Reference.

Q8_0 has no kernel here: a version of this design (34-byte blocks, only
2-byte aligned, read with 16-bit loads that each touch 8 rows) measured
26-34 % of copy bandwidth on the H100 against 59-63 % for the CUDA-core
kernel, so Q8_0 keeps that one (bench/RESULTS.md) before sm_90. On sm_90 the
streaming kernels do it from shared memory (kquant_stream_q8.py).

Mapping: a CTA of W warps (8, or 4 in the _w4 kernels; see VARIANTS) owns 16
weight rows (n0 .. n0+15); warp w takes superblocks w, w+W, ..., w+W(U-1) per
iteration, then the next WU (split-K over the warps, balanced to a block),
and the W partial results are added in shared memory in warp order
(deterministic). Q4_K and Q5_K hold U = 1 block per warp and row in each of
two register sets, so the next block's loads fly while this one is
multiplied, and read a group's 8 activations with one 16-byte load; Q6_K
loads the variant's U blocks and then multiplies them.
In the mma, the "M" side is the 16 weight rows, "N" the 8 activation rows
(rows past M re-read row M-1; their results are never stored) and K one
16-value step of a scale group. Which k a slot of the step holds is free
as long as A and B agree: lane (g, t) gets, for slots 2t, 2t+1, 2t+8, 2t+9,
weights that are cheap to cut from its own loaded words, and the same
positions of the activations (re-paired with prmt).
"""

import collections

from kaio_ptx.control import block, loop, skip_if

FORMATS = ("q4_k", "q5_k", "q6_k")
BLOCK_BYTES = {"q4_k": 144, "q5_k": 176, "q6_k": 210}
BLOCK_ELEMS = 256
UNROLL = 1                 # Q6_K: superblocks in flight per warp and row (the 8-warp kernel)
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

    def __init__(self, k, dt, act_space="global", group_sums=None, split_act=False, act_paired=False):
        self.k, self.dt, self.act_space, self.group_sums = k, dt, act_space, group_sums
        self.split_act = split_act      # A as f16 hi + lo (act_base); f16 math only
        self.act_paired = act_paired    # A stored in mma pairs (act_groups, act_pair)
        self.x16 = dt == "f16"     # high nibbles stay in place as 16 u
        self.magic = k.r("mov.b32", "0x64006400" if self.x16 else "0x43004300")
        self.ones = k.r("mov.b32", ONES[dt])
        self.bias = {}

    def half2(self, h, bias):
        """h (magic | u in each half, from field or nibble) -> exact u - bias
        in each half; bias is the offset past the magic (f16: 0, 32 or 512
        for a 16 u field; bf16: 0 or 32)."""
        k = self.k
        if bias not in self.bias:
            if self.x16:
                hb = 0x6400 + bias     # f16 bits of 1024 + bias (bias < 1024, exact)
            else:
                hb = 0xC300 + bias     # bf16 bits of -(128 + bias) (bias < 128, exact)
            self.bias[bias] = k.r("mov.b32", "0x%04X%04X" % (hb, hb))
        if self.x16:
            return k.r("sub.rn.f16x2", h, self.bias[bias])
        return k.r("fma.rn.bf16x2", h, self.ones, self.bias[bias])

    def field(self, w, n, mask, base=None):
        """(w shifted by n, see shift) & mask | base, base the magic when
        None: one lop3, where and + or took ptxas two instructions."""
        return self.k.r("lop3.b32", shift(self.k, w, n), mask, base or self.magic, "0xEA")

    def nibble(self, w, byte_shift, high, base=None):
        """magic | the nibble pair (bytes 0, 2 of w >> byte_shift), low or
        high nibble (| base's other bits, when given); f16 keeps a high nibble
        in place (16 u)."""
        if self.x16:
            return self.field(w, -byte_shift, "0x00F000F0" if high else "0x000F000F", base)
        return self.field(w, -(byte_shift + (4 if high else 0)), "0x000F000F", base)

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


# Where a kernel reads its weight blocks and activations from: global memory
# (64-bit addresses, read-only loads) or shared memory (32-bit addresses; the
# streaming kernels of kquant_stream.py).
LOAD = {"global": "ld.global.nc", "shared": "ld.shared"}


def lane_addr(k, space, blk, t, stride):
    """blk + t * stride in the space's address width."""
    if space == "shared":
        return k.r("mad.lo.u32", t, str(stride), blk)
    return k.rd("add.u64", blk, k.rd("mul.wide.u32", t, str(stride)))


def act_base(k, cx, abase, kblk, t, per_lane):
    """The address of this lane's first activation of a block: element kblk
    + t * per_lane of the row at abase (global: kblk 64-bit; shared: 32-bit).
    Split activations (cx.split_act, kquant_stream.py's f32 A) sit in 8-value
    chunks of 32 bytes, [8 f16 hi][8 f16 lo]: element e at byte 32 (e / 8) +
    2 (e % 8); kblk is a multiple of 256 and t * per_lane either a chunk
    (8) or inside the first (2). Paired Q6_K activations (per_lane 2,
    cx.act_paired: act_pair) hold a lane's two words at 8 t in each 16-value
    span of 32 bytes (split: [16 hi][16 lo], 64 bytes)."""
    if cx.act_paired and per_lane == 2:
        return k.r("mad.lo.u32", t, "8", k.r("mad.lo.u32", kblk, "4" if cx.split_act else "2", abase))
    if cx.split_act:
        lane = k.r("mul.lo.u32", t, "32" if per_lane == 8 else str(2 * per_lane))
        return k.r("add.u32", lane, k.r("mad.lo.u32", kblk, "4", abase))
    if cx.act_space == "shared":
        return k.r("mad.lo.u32", t, str(2 * per_lane), k.r("mad.lo.u32", kblk, "2", abase))
    kelem = k.rd("add.u64", kblk, k.rd("mul.wide.u32", t, str(per_lane)))
    return k.rd("mad.lo.u64", kelem, "2", abase)


def act_pair(k, cx, base, kofs, off2):
    """The B fragments (one, or hi and lo for split activations) of a step
    whose slots 2t, 2t+1, 2t+8, 2t+9 hold the activations at k + (0, off2, 1,
    off2 + 1), k = kofs (even) elements past base (act_base): b0 = (a[k],
    a[k+off2]), b1 = (a[k+1], a[k+off2+1]). Split: kofs and off2 are
    multiples of 8, whole chunks. Paired (cx.act_paired; off2 = 8, kofs a
    multiple of 16): each 16-value span stored as (a0, a8), (a1, a9), ...,
    (a7, a15), so b0, b1 are one 8-byte load."""
    ld = LOAD[cx.act_space]
    if cx.act_paired:
        assert off2 == 8 and kofs % 16 == 0
        out = []
        for part in ((0, 32) if cx.split_act else (0,)):
            w = k.regs("r", 2)
            k.op("%s.v2.b32 {%s}, [%s+%d]" % (ld, ", ".join(w), base, (4 if cx.split_act else 2) * kofs + part))
            out.append(w)
        return out
    out = []
    for part in ((0, 16) if cx.split_act else (None,)):
        o0, o1 = (2 * kofs, 2 * (kofs + off2)) if part is None else (4 * kofs + part, 4 * (kofs + off2) + part)
        y0 = k.r(ld + ".b32", "[%s+%d]" % (base, o0))
        y1 = k.r(ld + ".b32", "[%s+%d]" % (base, o1))
        out.append([k.r("prmt.b32", y0, y1, "0x5410"), k.r("prmt.b32", y0, y1, "0x7632")])
    return out


def act_groups(k, cx, base):
    """The activations of a Q4_K/Q5_K lane's 8 groups, (c, half) -> step s ->
    its B fragments (one, or hi and lo for split activations): each group's 8
    values (k = 64c + 32half + 0..7 past base, 16-byte aligned: the host
    checks A's address and row stride) come in one 16-byte load (split: two),
    issued a group ahead of its mma, and are re-paired with prmt as (x0, x2),
    (x1, x3) for step 0 and (x4, x6), (x5, x7) for step 1, unless a kernel
    stored them so (cx.act_paired: kquant_stream.py, once per CTA)."""
    words = {}
    parts = (0, 16) if cx.split_act else (None,)

    def load(c, half):
        words[(c, half)] = []
        for part in parts:
            w = k.regs("r", 4)
            off = 2 * (64 * c + 32 * half) if part is None else 4 * (64 * c + 32 * half) + part
            k.op("%s.v4.b32 {%s}, [%s+%d]" % (LOAD[cx.act_space], ", ".join(w), base, off))
            words[(c, half)].append(w)

    order = [(c, half) for c in range(4) for half in (0, 1)]
    load(*order[0])
    for i, key in enumerate(order):
        if i + 1 < len(order):
            load(*order[i + 1])
        ws = words.pop(key)
        if cx.act_paired:
            yield key, [[[w[2 * s], w[2 * s + 1]] for w in ws] for s in (0, 1)]
        else:
            yield key, [[pair_words(k, w[2 * s], w[2 * s + 1]) for w in ws] for s in (0, 1)]


def pair_words(k, w0, w1):
    """Words (x0, x1), (x2, x3) -> (x0, x2), (x1, x3): act_groups' pairing."""
    return [k.r("prmt.b32", w0, w1, sel) for sel in ("0x5410", "0x7632")]


def ld_u16_pair(k, addr, off_lo, off_hi, space="global"):
    """A word whose low half is the 2 bytes at addr+off_lo and high half the
    2 bytes at addr+off_hi (2-byte aligned loads)."""
    lo, hi = k.reg("h"), k.reg("h")
    k.op("%s.b16 %s, [%s+%d]" % (LOAD[space], lo, addr, off_lo))
    k.op("%s.b16 %s, [%s+%d]" % (LOAD[space], hi, addr, off_hi))
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

def load_q45(k, blk, t, q5, dst=None, space="global"):
    """Into dst (fresh registers when None): the header, this lane's 32 quant
    bytes (8 per 64-value chunk) and, for Q5_K, its 8 high-bit bytes."""
    if dst is None:
        dst = {"hdr": k.regs("r", 4), "qs": [k.regs("r", 2) for _ in range(4)]}
        if q5:
            dst["qh"] = k.regs("r", 2)
    ld = LOAD[space]
    k.op("%s.v4.b32 {%s}, [%s]" % (ld, ", ".join(dst["hdr"]), blk))
    base = lane_addr(k, space, blk, t, 8)
    qs_off = 48 if q5 else 16
    for c, w in enumerate(dst["qs"]):
        k.op("%s.v2.b32 {%s}, [%s+%d]" % (ld, ", ".join(w), base, qs_off + 32 * c))
    if q5:
        k.op("%s.v2.b32 {%s}, [%s+16]" % (ld, ", ".join(dst["qh"]), base))
    return dst


def load_q6_k(k, blk, t, space="global"):
    # per half hh and l0 in (0, 16): ql words for quarters (0, 2) and (1, 3)
    # and the qh word, each from bytes l0 + 2t (+1) and l0 + 2t + 8 (+1)
    base = lane_addr(k, space, blk, t, 2)
    parts = {}
    for hh in (0, 1):
        for l0 in (0, 16):
            ql0 = ld_u16_pair(k, base, 64 * hh + l0, 64 * hh + l0 + 8, space)
            ql1 = ld_u16_pair(k, base, 64 * hh + 32 + l0, 64 * hh + 32 + l0 + 8, space)
            qh = ld_u16_pair(k, base, 128 + 32 * hh + l0, 128 + 32 * hh + l0 + 8, space)
            parts[(hh, l0)] = (ql0, ql1, qh)
    sc = []
    for i in range(8):
        h = k.reg("h")
        k.op("%s.b16 %s, [%s+%d]" % (LOAD[space], h, blk, 192 + 2 * i))
        sc.append(k.r("cvt.u32.u16", h))
    dh = k.reg("h")
    k.op("%s.b16 %s, [%s+208]" % (LOAD[space], dh, blk))
    return {"parts": parts, "sc": sc, "d": k.f("cvt.f32.f16", dh)}


def load_block(k, fmt, blk, t, dst=None, space="global"):
    if fmt == "q6_k":
        return load_q6_k(k, blk, t, space)
    return load_q45(k, blk, t, fmt == "q5_k", dst, space)


# ------------------------------------------------------------- compute ----

def accumulate(k, acc, valid, scales, dq):
    """acc[i] += scale(row of i)·dq[i]; registers 0, 1 belong to row g, 2, 3
    to row g + 8. Only for a valid block."""
    for i in range(4):
        v = k.f("mul.f32", scales[i // 2], dq[i])
        k.op("@%s add.f32 %s, %s, %s" % (valid, acc[i], acc[i], v))


def scale_min_bytes_k4(k, hdr):
    """The 8 six-bit scales and mins of a Q4_K/Q5_K block as bytes: (sc of
    groups 0-3, sc of 4-7, m of 0-3, m of 4-7), byte j % 4 for group j
    (get_scale_min_k4, four groups per word)."""
    lo6 = "0x3F3F3F3F"
    hi2 = lambda w: k.r("and.b32", k.r("shr.b32", w, "2"), "0x30303030")   # bits 6-7 -> 4-5
    sc_hi = k.r("or.b32", k.r("and.b32", hdr[3], "0x0F0F0F0F"), hi2(hdr[1]))
    m_hi = k.r("or.b32", k.r("and.b32", k.r("shr.b32", hdr[3], "4"), "0x0F0F0F0F"), hi2(hdr[2]))
    return (k.r("and.b32", hdr[1], lo6), sc_hi, k.r("and.b32", hdr[2], lo6), m_hi)


def q45_header(k, rw):
    """A row's d and dmin (f32) and its scale and min bytes."""
    lo, hi = k.reg("h"), k.reg("h")
    k.op("mov.b32 {%s, %s}, %s" % (lo, hi, rw["hdr"][0]))
    return k.f("cvt.f32.f16", lo), k.f("cvt.f32.f16", hi), scale_min_bytes_k4(k, rw["hdr"])


def q45_bits(k, cx, rw, c, s, pair, half, q5):
    """magic | the quants of nibble pair `pair` of word s in chunk c (group
    2c + half) as u in each 16-bit half (f16: a high nibble stays in place as
    16 u), with Q5_K's fifth bit (qh byte bit 2c + half) beside them."""
    if not q5:
        return cx.nibble(rw["qs"][c][s], 8 * pair, half)
    at8 = half and cx.x16
    hb = cx.field(rw["qh"][s], (8 if at8 else 4) - (2 * c + half + 8 * pair),
                  "0x01000100" if at8 else "0x00100010")
    return cx.nibble(rw["qs"][c][s], 8 * pair, half, hb)


def min_sums_by_group(k, cx, per_row, kblk):
    """The min part sum_j m_j * X_j of a block (rows g, g + 8; X_j the sum of
    group j's activations) from sums a kernel made once (cx.group_sums, see
    kquant_stream.py): the mma's k runs over the block's 8 groups, so one
    m16n8k8 does the work of the per-step min mmas. X_j, an f32, is held as
    three bf16 (hi + mid + lo: 24 bits, and f32's range), one mma each; the
    6-bit mins are exact bf16. Lane (g, t) takes groups 2t, 2t + 1."""
    gs = cx.group_sums
    a = []
    for _, _, sm in per_row:
        pair = k.r("shr.b32", k.r("selp.b32", sm[3], sm[2], gs["t_hi"]), gs["shift"])
        h = k.r("prmt.b32", pair, gs["b43"], "0x4140")            # bf16 128 + m, two groups
        a.append(k.r("fma.rn.bf16x2", h, gs["ones"], gs["neg128"]))
    off = k.r("shr.u32", kblk, "4")                               # 8 sums of 2 bytes a block
    msum = [k.var_f("0f00000000") for _ in range(4)]
    for lane in gs["lanes"]:                                      # hi, mid, lo
        b = k.r("ld.shared.b32", "[%s]" % k.r("add.u32", lane, off))
        k.op("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%s}, {%s}, {%s}, {%s}"
             % (", ".join(msum), ", ".join(a), b, ", ".join(msum)))
    return msum


def q45_finish(k, per_row, dsum, msum, acc, valid):
    """acc += d * dsum - dmin * msum (rows g, g + 8), for a valid block."""
    for i in range(4):
        d, dmin, _ = per_row[i // 2]
        v = k.f("fma.rn.f32", k.f("neg.f32", dmin), msum[i], k.f("mul.f32", d, dsum[i]))
        k.op("@%s add.f32 %s, %s, %s" % (valid, acc[i], acc[i], v))


def bcast_half(k, x, high):
    """x's low (high) f16 in both halves."""
    lo, hi = k.reg("h"), k.reg("h")
    k.op("mov.b32 {%s, %s}, %s" % (lo, hi, x))
    h = hi if high else lo
    return k.r("mov.b32", "{%s, %s}" % (h, h))


def compute_q45_f16(k, cx, rows, abase, kblk, t, acc, valid, q5):
    """f16 A: each group's integer scale is folded into its weights, which
    stay exact: (1024 + u) * sc - 1024 * sc = u * sc <= 31 * 63 < 2048 is an
    f16 integer, and one fma.f16x2 forms it where the unscaled kernel needs a
    sub. So one accumulator takes a whole superblock, and the min part
    sum_j m_j * sum(x of group j) comes from a second mma whose A holds m_j
    (exact f16 integers). Per superblock and row only d and dmin are applied
    in f32, instead of two scales and four f32 updates per group."""
    # per chunk c and row, both its groups' scales at once: (1024 + sc_2c,
    # 1024 + sc_2c+1) -> (sc_2c, sc_2c+1 / 16) (the high nibbles stay in
    # place as 16 u) -> x -1024; each group's fma takes its half of both
    # (bcast_half, which ptxas folds into the HFMA2's operand selects)
    one_16th, neg_1024_64 = k.r("mov.b32", "0x2C003C00"), k.r("mov.b32", "0xD400E400")
    cneg1024 = k.r("mov.b32", "0xE400E400")
    b64 = k.r("mov.b32", "0x64646464")
    per_row = [q45_header(k, rw) for rw in rows]
    ab = act_base(k, cx, abase, kblk, t, 8)
    dsum = msum = None
    pairs = []
    for (c, half), bfrag in act_groups(k, cx, ab):
        j = 2 * c + half
        if not half:
            sel = "0x%X" % (0x4040 | (((j + 1) % 4) << 8) | (j % 4))   # bytes j%4, j%4 + 1 under 0x64
            pairs = []
            for _, _, sm in per_row:
                sc2 = k.r("fma.rn.f16x2", k.r("prmt.b32", sm[j // 4], b64, sel), one_16th, neg_1024_64)
                pairs.append((sc2, k.r("mul.rn.f16x2", sc2, cneg1024)))
        scs = [bcast_half(k, sc2, half) for sc2, _ in pairs]
        nbs = [bcast_half(k, nb2, half) for _, nb2 in pairs]
        mins = []
        if not cx.group_sums:
            sel = "0x%X" % (0x4040 | ((j % 4) << 8) | (j % 4))           # byte j%4 under 0x64, both halves
            for _, _, sm in per_row:
                mins.append(cx.half2(k.r("prmt.b32", sm[2 + j // 4], b64, sel), 0))
        for s in (0, 1):
            a = []
            for pair in (0, 1):
                for ri, rw in enumerate(rows):
                    a.append(k.r("fma.rn.f16x2", q45_bits(k, cx, rw, c, s, pair, half, q5), scs[ri], nbs[ri]))
            for b in bfrag[s]:
                dsum = mma(cx, a, b, dsum)
            if not cx.group_sums:
                msum = mma(cx, mins + mins, bfrag[s][0], msum)
    if cx.group_sums:
        msum = min_sums_by_group(k, cx, per_row, kblk)
    q45_finish(k, per_row, dsum, msum, acc, valid)


def compute_q45_bf16(k, cx, rows, abase, kblk, t, acc, valid, q5):
    """bf16 A: u * sc may need 11 bits, past bf16's 8, so each group keeps its
    own mma and its scale is applied in f32 (one fma per result); the min part
    comes from a second mma with A = m_j (exact bf16 integers), accumulated over
    the superblock as in compute_q45_f16."""
    b43 = k.r("mov.b32", "0x43000000")    # prmt's bytes 4-6 zero, byte 7 0x43
    per_row = [q45_header(k, rw) for rw in rows]
    ab = act_base(k, cx, abase, kblk, t, 8)
    dsum, msum = [k.var_f("0f00000000") for _ in range(4)], None
    for (c, half), bfrag in act_groups(k, cx, ab):
        j = 2 * c + half
        scs, mins = [], []
        for _, _, sm in per_row:
            # f32 bits 0x43 sc 00 00 = 128 + sc; bf16 bits 0x43 m = 128 + m
            f = k.r("prmt.b32", sm[j // 4], b43, "0x%X" % (0x7000 | ((j % 4) << 8) | 0x44))
            scs.append(k.f("sub.f32", f, "0f43000000"))
            if not cx.group_sums:
                h = k.r("prmt.b32", sm[2 + j // 4], b43, "0x%X" % (0x7070 | ((j % 4) << 8) | (j % 4)))
                mins.append(cx.half2(h, 0))
        dq = None
        for s in (0, 1):
            b = bfrag[s][0]     # bf16 A is never split
            a = []
            for pair in (0, 1):
                for rw in rows:
                    a.append(cx.half2(q45_bits(k, cx, rw, c, s, pair, half, q5), 0))
            dq = mma(cx, a, b, dq)
            if not cx.group_sums:
                msum = mma(cx, mins + mins, b, msum)
        for i in range(4):
            k.op("fma.rn.f32 %s, %s, %s, %s" % (dsum[i], scs[i // 2], dq[i], dsum[i]))
    if cx.group_sums:
        msum = min_sums_by_group(k, cx, per_row, kblk)
    q45_finish(k, per_row, dsum, msum, acc, valid)


def compute_q6_k(k, cx, rows, abase, kblk, t, acc, valid):
    ab = act_base(k, cx, abase, kblk, t, 2)
    # each row's d, and d / 16 for the in-place high nibbles (exact: a power of two)
    ds = [(rw["d"], cx.hi_scale(rw["d"], True)) for rw in rows]
    for hh in (0, 1):
        for l0 in (0, 16):
            for q in range(4):
                # group 8hh + 2q + l0/16: elements 128hh + 32q + l0 + (0..15);
                # slots (l0+2t, l0+2t+8) and (l0+2t+1, l0+2t+9)
                bs = act_pair(k, cx, ab, 128 * hh + 32 * q + l0, 8)
                a = []
                for pair in (0, 1):
                    for rw in rows:
                        ql = rw["parts"][(hh, l0)][q & 1]
                        qh = rw["parts"][(hh, l0)][2]
                        at8 = q >= 2 and cx.x16      # the 6-bit u in place as 16 u
                        hb = cx.field(qh, (8 if at8 else 4) - 2 * q - 8 * pair,
                                      "0x03000300" if at8 else "0x00300030")
                        a.append(cx.half2(cx.nibble(ql, 8 * pair, q >= 2, hb), 512 if at8 else 32))   # u - 32
                d = None
                for b in bs:
                    d = mma(cx, a, b, d)
                gi = 8 * hh + 2 * q + l0 // 16
                scs = []
                for rw, d_row in zip(rows, ds):
                    sc = k.r("bfe.s32", rw["sc"][gi // 2], str(8 * (gi % 2)), "8")
                    scs.append(k.f("mul.f32", d_row[q >= 2], k.f("cvt.rn.f32.s32", sc)))
                accumulate(k, acc, valid, scs, d)


def compute_block(k, fmt, cx, rows, abase, kblk, t, acc, valid):
    if fmt == "q6_k":
        compute_q6_k(k, cx, rows, abase, kblk, t, acc, valid)
    elif cx.x16:
        compute_q45_f16(k, cx, rows, abase, kblk, t, acc, valid, fmt == "q5_k")
    else:
        compute_q45_bf16(k, cx, rows, abase, kblk, t, acc, valid, fmt == "q5_k")


# -------------------------------------------------------------- kernel ----

def store_row_sums(k, p, red, idx, warps, n0, row_scale=None):
    """For thread idx < 128 of a CTA: C[idx % 8, n0 + idx / 8] (when inside
    C) = the sum, in warp order, of `warps` warps' accumulator fragments in
    shared memory at red (warp w's lane l register i at red + 512 w + 16 l +
    4 i), times row_scale[idx % 8] (f32s in shared memory) when given,
    stored as C's dtype."""
    r = k.r("shr.u32", idx, "3")          # weight row n0 + r
    m = k.r("and.b32", idx, "7")          # activation row
    src_lane = k.r("add.u32", k.r("shl.b32", k.r("and.b32", r, "7"), "2"), k.r("shr.u32", m, "1"))
    reg = k.r("or.b32", k.r("shl.b32", k.r("shr.u32", r, "3"), "1"), k.r("and.b32", m, "1"))
    a0 = k.r("add.u32", red, k.r("mad.lo.u32", src_lane, "16", k.r("shl.b32", reg, "2")))
    total = k.f("ld.shared.f32", "[%s]" % a0)
    for w in range(1, warps):
        k.op("add.f32 %s, %s, %s" % (total, total, k.f("ld.shared.f32", "[%s+%d]" % (a0, w * 32 * 16))))
    if row_scale:
        k.op("mul.f32 %s, %s, %s" % (total, total, k.f("ld.shared.f32", "[%s]" % k.r("mad.lo.u32", m, "4", row_scale))))
    n = k.r("add.u32", n0, r)
    ok = k.p("and.pred", k.p("setp.lt.u32", n, p["n"]), k.p("setp.lt.u32", m, p["m"]))
    off = k.rd("add.u64", k.rd("mul.lo.u64", p["ldc"], k.rd("cvt.u64.u32", m)), k.rd("cvt.u64.u32", n))
    is_f32 = k.p("setp.eq.u32", p["out_dtype"], "1")
    k.op("@%s st.global.f32 [%s], %s" % (k.p("and.pred", ok, is_f32), k.rd("mad.lo.u64", off, "4", p["c"]), total))
    h = k.reg("h")
    k.op("cvt.rn.f16.f32 %s, %s" % (h, total))
    k.op("@%s st.global.b16 [%s], %s" % (k.p("and.pred", ok, k.p("setp.ne.u32", p["out_dtype"], "1")),
                                           k.rd("mad.lo.u64", off, "2", p["c"]), h))


def mma_matvec(k, p, fmt, dt, variant=VARIANTS[0]):
    bb, be, WARPS = BLOCK_BYTES[fmt], BLOCK_ELEMS, variant.warps
    # Q4_K/Q5_K double-buffer one block per warp and row; Q6_K loads the variant's unroll at once
    U = variant.unroll if fmt == "q6_k" else 1
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

    def block_index(c, u):
        """Block c + u*WARPS, and whether it exists (past the row it re-reads the last)."""
        bi = k.r("add.u32", c, str(u * WARPS)) if u else c
        return k.r("min.u32", bi, blast), k.p("setp.lt.u32", bi, nblk)

    def issue_loads(c, dst):
        out = []
        for u in range(U):
            off = k.rd("mul.wide.u32", block_index(c, u)[0], str(bb))
            out.append([load_block(k, fmt, k.rd("add.u64", wr, off), t, dst[u][ri] if dst else None)
                        for ri, wr in enumerate(wrows)])
        return out

    def compute_set(c, blocks):
        for u, rows in enumerate(blocks):
            bc, valid = block_index(c, u)
            compute_block(k, fmt, cx, rows, abase, k.rd("mul.wide.u32", bc, str(be)), t, acc, valid)

    with block(k, "mma_done") as chunks:
        chunks.exit_if(k.p("setp.ge.u32", c0, nblk))
        if fmt == "q6_k":
            # loads then compute (Q6_K's 2-byte-aligned fields take too many registers to double-buffer)
            with loop(k, "mma_chunk") as lp:
                compute_set(c0, issue_loads(c0, None))
                k.op("add.u32 %s, %s, %d" % (c0, c0, WARPS * U))
                lp.again(k.p("setp.lt.u32", c0, nblk))
        else:
            # two register sets: the next blocks' loads are in flight while these are multiplied
            sets = [issue_loads(c0, None), None]
            with loop(k, "mma_chunk", uni=True) as lp:
                for half in (0, 1):
                    cn = k.r("add.u32", c0, str(WARPS * U))
                    more = k.p("setp.lt.u32", cn, nblk)
                    with skip_if(k, "!" + more, "noload", uni=True):
                        sets[1 - half] = issue_loads(cn, sets[1 - half])
                    compute_set(c0, sets[half])
                    k.op("mov.u32 %s, %s" % (c0, cn))
                    if half == 0:
                        chunks.exit_if("!" + more, uni=True)
                    else:
                        lp.again(more)
    # split-K reduction over the 8 warps, in warp order
    red = k.r("mov.u32", "kq_red")
    k.op("st.shared.v4.f32 [%s], {%s}" % (k.r("mad.lo.u32", tid, "16", red), ", ".join(acc)))
    k.op("bar.sync 0")
    with skip_if(k, k.p("setp.ge.u32", tid, "128"), "done"):
        store_row_sums(k, p, red, tid, WARPS, n0)
    k.op("ret")
