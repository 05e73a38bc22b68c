#!/usr/bin/env python3
"""Generate libkaio's GGUF k-quant kernels (Q8_0, Q4_K, Q5_K, Q6_K).

    python3 ptx/gen_kquant.py --out-dir DIR  # write DIR/kquant_{quantize,dequant,stream_sm90}.ptx

Byte layouts and the two reference algorithms (GGML: ggml's current
quantize_row_*_ref; CANDLE: candle's QTensor::quantize) are summarised in
README.md ("GGUF k-quants"); tests/support/kquant_ref.cpp is the C++ version
the GPU output is compared with, byte for byte.

Bit-exactness rules every quantize kernel follows (kquants.md §2.7):
  * every f32 operation is a separately rounded mul.rn / add.rn / sub.rn /
    div.rn / sqrt.rn (ptxas never fuses ops that carry .rn), no fma, no .ftz;
  * sums run sequentially in element order (loops over elements are
    unrolled here, so each element's value lives in its own register);
  * argmax with the first index winning on ties, NaN never winning;
  * ggml's nearest_int (round half to even) is its own v + 1.5*2^23
    rounding: as a float in the searches' hot loops (rne_f, whose values
    are bounded; an infinite qkx2 iscale is made 0 first), and bit for bit,
    infinities and NaN included, in the final passes (ggml_nearest);
    candle's f32::round (half away from zero) + saturating `as i32` is
    built from the same rounding (away_f) or from cvt.rzi (candle_round).
    The hot loops stay in the float domain because conversion instructions
    issue at a fraction of the ALU rate.

Quantize kernels: kaio_kq_quantize_<fmt>_<mode>, one thread per scale group
(Q8_0: a 32-value block; Q6_K: a 16-value sub-block; Q4_K/Q5_K: a 32-value
sub-block) running the reference's serial search; the threads of one
superblock then meet in shared memory for the superblock scale and the
packing (Q8_0: the CTA's blocks are assembled in shared memory and written
with consecutive 2-byte stores). Block 256 threads; superblocks never
straddle CTAs.
  Params: (u64 x, u64 q, u32 blocks, u32 blocks_per_row, u64 x_stride
  (elements), u64 q_stride (bytes), u32 in_dtype (1 f32, 2 f16, 3 bf16)).
  Grid: ceil(blocks * groups_per_block / 256).
  Host guarantees: x 16-byte aligned with x_stride * esize % 16 == 0; q and
  q_stride aligned to 16 (Q4_K, Q5_K) or 2 (Q8_0, Q6_K) bytes.

Dequantize kernels: kaio_kq_dequantize_<fmt>, one thread per 32 values.
  Params: (u64 q, u64 y, u32 chunks, u32 chunks_per_row, u64 q_stride
  (bytes), u64 y_stride (elements), u32 out_dtype). y 16-byte aligned with
  y_stride * esize % 16 == 0. Values are computed exactly as the references
  do (each a single rounding, kquants.md §3) and rounded once (RNE) to f16
  or bf16.

Dequant-matvec kernels: kaio_kq_matvec_<fmt>_m<MT>, C[M, N] = A[M, K] · W^T
with W [N, K] quantized, MT in {1, 2, 4, 8} (rows of A; the host picks the
smallest MT >= M). One warp per weight row n, 8 warps (8 rows) per CTA; lane
i takes units i, i+32, ... of the row (a unit: Q8_0 one block, Q4_K/Q5_K 64
values, Q6_K 128 values); per scale group the lane sums q·a and a, applies
the group's scale (and min) once, and the warp sums the lanes with
shuffles. The weights are read once, with the widest loads their alignment
allows (Q4_K/Q5_K 16 bytes, Q8_0/Q6_K 2 bytes), and their quants become
floats without conversion instructions (see small() in decode_unit). The
8 warps of a CTA walk the same units in step, so where the activations of
32 units for all MT rows fit in 40 KiB (all but Q4_K/Q5_K m8 and Q6_K m4,
m8) they are converted to f32 into shared memory once per CTA; otherwise
every warp reads and converts them from L1/L2. Not bit-exact with any
reference (f32 accumulation in this order); tests use a tolerance.
  Params: (u64 a, u64 w, u64 c, u32 m, u32 n, u32 units_per_row, u64 lda
  (elements), u64 w_stride (bytes), u64 ldc (elements), u32 a_dtype,
  u32 out_dtype (1 f32, 2 f16)). a 16-byte aligned, lda * esize % 16 == 0.

Only the Python standard library is used; the output depends on nothing but
this file and ptx/kaio_ptx.
"""

import sys

from kaio_ptx import cli, kernel, manifest
from kaio_ptx.control import block, loop, skip_if
from kaio_ptx.grid_dep import coherent_loads
from kaio_ptx.literals import INF, ONE, ZERO, f32
from kaio_ptx.params import load_params
from kaio_ptx.preamble import preamble
from kquant_mma import FORMATS as MMA_FORMATS, VARIANTS as MMA_VARIANTS, mma_matvec
import kquant_stream

HEADER = preamble(__file__)
BLOCK = 256
MAGIC = f32(12582912.0)   # 1.5 * 2^23: adding it rounds to an integer

# format: (block elements, block bytes, values per thread group)
FORMATS = {
    "q8_0": (32, 34, 32),
    "q4_k": (256, 144, 32),
    "q5_k": (256, 176, 32),
    "q6_k": (256, 210, 16),
}


class Kernel(kernel.Kernel):
    """A 256-thread entry (a body may launch fewer threads), plus strict-IEEE
    helpers."""

    def __init__(self, name, params, doc):
        super().__init__(name, doc, params, BLOCK, shared=[])
        self.shared_fixed = 0                   # a body whose launch sizes a shared tail
        self.ring_stage = self.ring_stages = 0  # ... and a ring of up to ring_stages stages

    # ---- strict IEEE f32 arithmetic (never contracted) ----
    def mul(self, a, b): return self.f("mul.rn.f32", a, b)
    def add(self, a, b): return self.f("add.rn.f32", a, b)
    def sub(self, a, b): return self.f("sub.rn.f32", a, b)
    def div(self, a, b): return self.f("div.rn.f32", a, b)
    def cvt_f(self, i): return self.f("cvt.rn.f32.s32", i)

    def var_f(self, init):
        v = self.reg("f")
        self.op("mov.f32 %s, %s" % (v, init))
        return v

    def var_r(self, init):
        v = self.reg("r")
        self.op("mov.b32 %s, %s" % (v, init))
        return v

    def setf(self, dst, src, pred=None):
        self.op("%smov.f32 %s, %s" % ("@%s " % pred if pred else "", dst, src))

    def setr(self, dst, src, pred=None):
        self.op("%smov.b32 %s, %s" % ("@%s " % pred if pred else "", dst, src))

    def clamp(self, i, lo, hi):
        return self.r("min.s32", self.r("max.s32", i, str(lo)), str(hi))

    def text(self):
        if self.block != BLOCK:    # the host launches what the PTX says (module_cache)
            extra = " shared_fixed=%d" % self.shared_fixed if self.shared_fixed else ""
            if self.ring_stage:
                extra += " ring_stage=%d ring_stages=%d" % (self.ring_stage, self.ring_stages)
            self.annotations = ["// kaio-launch: %s block=%d%s" % (self.name, self.block, extra)]
        return super().text()


def ggml_nearest(k, v):
    """ggml's nearest_int bit for bit on every input: the low 23 bits of
    v + 1.5*2^23, less 2^22. That is round half to even for |v| < 2^22, and
    beyond it what x86-64 gives: -4194304 for ±inf, a wrapped value for
    larger finite v; and 0 for NaN (x86's default NaN has mantissa 2^22;
    the GPU's canonical NaN would give 2^22 - 1). cvt.rni would saturate
    instead, which a final pass's (x + dm) / d reaches where dmin is an
    infinite f16 and d is not."""
    t = k.r("mov.b32", k.add(v, MAGIC))
    i = k.r("sub.s32", k.r("and.b32", t, "0x007FFFFF"), "0x00400000")
    return k.r("selp.s32", i, "0", k.p("setp.num.f32", v, v))


def candle_round(k, v):
    """candle's `v.round() as i32`: half away from zero, saturating, NaN -> 0.
    v - trunc(v) is exact, so comparing it with 0.5 decides the rounding."""
    t = k.f("cvt.rzi.f32.f32", v)
    frac = k.f("abs.f32", k.sub(v, t))
    away = k.p("setp.ge.f32", frac, f32(0.5))
    step = k.f("selp.f32", f32(1.0), f32(0.0), away)
    signed = k.f("copysign.f32", v, step)          # copysign(step, sign of v)
    r = k.add(t, signed)
    return k.r("cvt.rzi.s32.f32", r)


def nearest(k, mode, v):
    return ggml_nearest(k, v) if mode == "ggml" else candle_round(k, v)


# The searches round and clamp every value of every candidate: those run in
# the float domain, with full-rate add/sub/min/max instead of conversions
# (which issue at a fraction of that rate and would bound the kernels).


def rne_f(k, v):
    """ggml's nearest_int as a float: the very same v + 1.5*2^23 rounding,
    exact for |v| < 2^22 (beyond, only the clamp that follows matters)."""
    return k.sub(k.add(v, MAGIC), MAGIC)


def away_f(k, v):
    """candle's `v.round() as i32` as a float: half away from zero, NaN -> 0.
    |v| is rounded to nearest even, and a tie that went down (r - |v| is
    exactly -0.5, Sterbenz) goes up instead."""
    a = k.f("abs.f32", v)
    r = rne_f(k, a)
    tie_down = k.p("setp.eq.f32", k.sub(r, a), f32(-0.5))
    r = k.f("selp.f32", k.add(r, ONE), r, tie_down)
    signed = k.f("copysign.f32", v, r)                 # r with the sign of v
    return k.f("selp.f32", signed, ZERO, k.p("setp.num.f32", v, v))


def round_f(k, mode, v):
    return rne_f(k, v) if mode == "ggml" else away_f(k, v)


def clamp_f(k, v, lo, hi):
    return k.f("min.f32", k.f("max.f32", v, f32(float(lo))), f32(float(hi)))


def int8_bits(k, q):
    """The two's-complement byte of an integral float q in [-128, 127]:
    q + 1.5*2^23 is exact and its low mantissa bits are q."""
    return k.r("and.b32", k.r("mov.b32", k.add(q, MAGIC)), "0xFF")


# ---------------------------------------------------------------- loads ----

def load_values(k, addr, count, dtype):
    """count (multiple of 8) consecutive input values at addr as f32
    registers; dtype is a register holding 1 (f32), 2 (f16) or 3 (bf16)."""
    vals = k.regs("f", count)
    is_f32 = k.p("setp.eq.u32", dtype, "1")
    is_f16 = k.p("setp.eq.u32", dtype, "2")
    l_half, l_done = k.label("half"), k.label("loaded")
    k.op("@!%s bra %s" % (is_f32, l_half))
    for c in range(count // 4):
        k.op("ld.global.v4.f32 {%s}, [%s+%d]" % (", ".join(vals[4 * c:4 * c + 4]), addr, 16 * c))
    k.op("bra.uni %s" % l_done)
    k.place(l_half)
    words = k.regs("r", count // 2)
    for c in range(count // 8):
        k.op("ld.global.v4.b32 {%s}, [%s+%d]" % (", ".join(words[4 * c:4 * c + 4]), addr, 16 * c))
    l_bf16 = k.label("bf16")
    k.op("@!%s bra %s" % (is_f16, l_bf16))
    for i, w in enumerate(words):
        lo, hi = k.reg("h"), k.reg("h")
        k.op("mov.b32 {%s, %s}, %s" % (lo, hi, w))
        k.op("cvt.f32.f16 %s, %s" % (vals[2 * i], lo))
        k.op("cvt.f32.f16 %s, %s" % (vals[2 * i + 1], hi))
    k.op("bra.uni %s" % l_done)
    k.place(l_bf16)
    for i, w in enumerate(words):
        k.op("mov.b32 %s, %s" % (vals[2 * i], k.r("shl.b32", w, "16")))
        k.op("mov.b32 %s, %s" % (vals[2 * i + 1], k.r("and.b32", w, "0xFFFF0000")))
    k.place(l_done)
    return vals


# ---------------------------------------------------------------- setup ----

QUANT_PARAMS = [(".u64", "x"), (".u64", "q"), (".u32", "blocks"), (".u32", "per_row"),
                (".u64", "x_stride"), (".u64", "q_stride"), (".u32", "in_dtype")]


def group_setup(k, p, groups_per_block, block_elems, block_bytes, group_elems):
    """Thread -> (block g, group j); returns (active pred, j, x address of
    the group, q address of the block, tid)."""
    tid = k.r("mov.u32", "%tid.x")
    t = k.r("mad.lo.u32", k.r("mov.u32", "%ctaid.x"), str(BLOCK), tid)
    g = k.r("div.u32", t, str(groups_per_block)) if groups_per_block > 1 else t
    j = k.r("rem.u32", t, str(groups_per_block)) if groups_per_block > 1 else k.r("mov.u32", "0")
    active = k.p("setp.lt.u32", g, p["blocks"])
    gc = k.r("min.u32", g, k.r("sub.u32", p["blocks"], "1"))   # clamped: never read out of range
    row = k.r("div.u32", gc, p["per_row"])
    b = k.r("sub.u32", gc, k.r("mul.lo.u32", row, p["per_row"]))
    row64 = k.rd("cvt.u64.u32", row)
    elem = k.rd("mad.lo.u64", row64, p["x_stride"],
                k.rd("cvt.u64.u32", k.r("mad.lo.u32", b, str(block_elems),
                                        k.r("mul.lo.u32", j, str(group_elems)))))
    esize = k.rd("cvt.u64.u32", k.r("selp.u32", "4", "2", k.p("setp.eq.u32", p["in_dtype"], "1")))
    xaddr = k.rd("mad.lo.u64", elem, esize, p["x"])
    qaddr = k.rd("add.u64", p["q"], k.rd("mad.lo.u64", row64, p["q_stride"],
                                          k.rd("mul.wide.u32", b, str(block_bytes))))
    return active, j, xaddr, qaddr, tid


def signed_absmax(k, xs):
    """(max, amax): the value with the largest |x| (strict '>': the first
    such index wins, its sign kept) and that magnitude; NaN never wins."""
    amax, mx = k.var_f(ZERO), k.var_f(ZERO)
    for v in xs:
        a = k.f("abs.f32", v)
        gt = k.p("setp.gt.f32", a, amax)
        k.setf(amax, a, gt)
        k.setf(mx, v, gt)
    return mx, amax


def store_u16(k, pred, addr, off, lo_byte, hi_byte):
    w = k.r("or.b32", k.r("and.b32", lo_byte, "0xFF"), k.r("shl.b32", k.r("and.b32", hi_byte, "0xFF"), "8"))
    h = k.reg("h")
    k.op("cvt.u16.u32 %s, %s" % (h, w))
    k.op("@%s st.global.b16 [%s+%d], %s" % (pred, addr, off, h))


def store_f16_of(k, pred, addr, off, value):
    """Rounds value to f16 (RNE, as ggml's and candle's conversions) and
    stores it; returns the f16 widened back to f32."""
    h = k.reg("h")
    k.op("cvt.rn.f16.f32 %s, %s" % (h, value))
    k.op("@%s st.global.b16 [%s+%d], %s" % (pred, addr, off, h))
    return k.f("cvt.f32.f16", h)


# ---------------------------------------------------------------- Q8_0 -----

def quantize_q8_0(k, p, mode):
    """Thread per block; the CTA's 256 blocks are assembled in shared memory
    and then written with consecutive 2-byte stores (34-byte blocks written
    by one thread each would scatter every store over 32 sectors). The modes
    differ where 1/d overflows (amax below about 3.7e-37) and x * id is
    ±inf: ggml's (int8_t) roundf gives 0 on x86-64 (int8_bits of ±inf is
    0), candle's saturating `as i8` 127 / -128 (clamped first)."""
    k.shared.append(".shared .align 4 .b8 kq_stage[%d]" % (BLOCK * 34))
    _, _, xaddr, _, tid = group_setup(k, p, 1, 32, 34, 32)
    xs = load_values(k, xaddr, 32, p["in_dtype"])
    amax = k.var_f(ZERO)
    for v in xs:   # MAX(amax, |v|) = amax > |v| ? amax : |v|
        a = k.f("abs.f32", v)
        k.setf(amax, a, "!" + k.p("setp.gt.f32", amax, a))
    d = k.div(amax, f32(127.0))
    nz = k.p("setp.neu.f32", d, ZERO)              # C truthiness: NaN counts as nonzero
    idv = k.f("selp.f32", k.div(ONE, d), ZERO, nz)
    stage = k.r("mad.lo.u32", tid, "34", k.r("mov.u32", "kq_stage"))
    dh = k.reg("h")
    k.op("cvt.rn.f16.f32 %s, %s" % (dh, d))
    k.op("st.shared.b16 [%s], %s" % (stage, dh))
    if mode == "candle":
        qs = [int8_bits(k, clamp_f(k, away_f(k, k.mul(v, idv)), -128, 127)) for v in xs]
    else:
        qs = [int8_bits(k, away_f(k, k.mul(v, idv))) for v in xs]
    for i in range(16):
        w = k.r("or.b32", k.r("and.b32", qs[2 * i], "0xFF"), k.r("shl.b32", k.r("and.b32", qs[2 * i + 1], "0xFF"), "8"))
        h = k.reg("h")
        k.op("cvt.u16.u32 %s, %s" % (h, w))
        k.op("st.shared.b16 [%s+%d], %s" % (stage, 2 + 2 * i, h))
    k.op("bar.sync 0")
    # copy out the CTA's valid blocks, 2 bytes per thread and step
    g0 = k.r("mul.lo.u32", k.r("mov.u32", "%ctaid.x"), str(BLOCK))
    nvalid = k.r("min.u32", k.r("sub.u32", p["blocks"], g0), str(BLOCK))
    units = k.r("mul.lo.u32", nvalid, "17")
    linear = k.p("setp.eq.u64", p["q_stride"], k.rd("mul.wide.u32", p["per_row"], "34"))
    u = k.var_r(tid)
    with loop(k, "copy", skip=k.p("setp.ge.u32", u, units)) as lp:
        blk = k.r("div.u32", u, "17")
        off = k.r("sub.u32", k.r("shl.b32", u, "1"), k.r("mul.lo.u32", blk, "34"))
        g = k.r("add.u32", g0, blk)
        row = k.r("div.u32", g, p["per_row"])
        row = k.r("selp.u32", "0", row, linear)      # contiguous rows: one linear run
        b = k.r("sub.u32", g, k.r("mul.lo.u32", row, p["per_row"]))
        addr = k.rd("add.u64", p["q"], k.rd("mad.lo.u64", k.rd("cvt.u64.u32", row), p["q_stride"],
                                             k.rd("mad.wide.u32", b, "34", k.rd("cvt.u64.u32", off))))
        h = k.reg("h")
        k.op("ld.shared.b16 %s, [%s]" % (h, k.r("mad.lo.u32", u, "2", k.r("mov.u32", "kq_stage"))))
        k.op("st.global.b16 [%s], %s" % (addr, h))
        k.op("add.u32 %s, %s, %d" % (u, u, BLOCK))
        lp.again(k.p("setp.lt.u32", u, units))
    k.op("ret")


# ---------------------------------------------------------------- Q6_K -----

def qx_pass(k, mode, xs, weights, iscale):
    """One make_qx_quants pass at iscale: (sumlx, suml2) in element order,
    and the clamped quants (signed, -32..31, as floats). weights(i) gives
    element i's (w, w x)."""
    sumlx, suml2 = k.var_f(ZERO), k.var_f(ZERO)
    ls = []
    for i, v in enumerate(xs):
        l = clamp_f(k, round_f(k, mode, k.mul(iscale, v)), -32, 31)
        w, wx = weights(i)
        k.setf(sumlx, k.add(sumlx, k.mul(wx, l)))
        k.setf(suml2, k.add(suml2, k.mul(k.mul(w, l), l)))
        ls.append(l)
    return sumlx, suml2, ls


def q6_search_ggml(k, xs, lraw):
    """ggml's make_qx_quants(16, 32, x, L, 1, NULL); writes the stored
    quants (0..63) into lraw, returns the scale."""
    scale = k.var_f(ZERO)
    mx, amax = signed_absmax(k, xs)
    zero = k.p("setp.lt.f32", amax, f32(1e-15))
    for r in lraw:
        k.setr(r, "0")
    with skip_if(k, zero, "qx_done"):
        w = [k.mul(v, v) for v in xs]
        wx = [k.mul(w[i], v) for i, v in enumerate(xs)]
        iscale0 = k.div(f32(-32.0), mx)
        sumlx, suml2, _ = qx_pass(k, "ggml", xs, lambda i: (w[i], wx[i]), iscale0)
        nz = k.p("setp.neu.f32", suml2, ZERO)
        k.setf(scale, k.f("selp.f32", k.div(sumlx, suml2), ZERO, nz))
        best = k.var_f(k.mul(scale, sumlx))
        best_iscale = k.var_f(iscale0)
        is_ = k.var_r("-9")
        with loop(k, "qx_cand") as lp:
            fis = k.cvt_f(is_)
            iscale = k.div(k.f("neg.f32", k.add(f32(32.0), k.mul(f32(0.1), fis))), mx)
            sumlx, suml2, _ = qx_pass(k, "ggml", xs, lambda i: (w[i], wx[i]), iscale)
            pos = k.p("setp.gt.f32", suml2, ZERO)
            better = k.p("setp.gt.f32", k.mul(sumlx, sumlx), k.mul(best, suml2))
            win = k.p("and.pred", pos, better)
            with skip_if(k, "!" + win, "qx_next"):
                k.setf(best_iscale, iscale)
                k.setf(scale, k.div(sumlx, suml2))
                k.setf(best, k.mul(scale, sumlx))
            k.op("add.s32 %s, %s, %s" % (is_, is_, k.r("selp.s32", "2", "1", k.p("setp.eq.s32", is_, "-1"))))
            lp.again(k.p("setp.le.s32", is_, "9"))
        for i, v in enumerate(xs):
            k.setr(lraw[i], k.r("add.s32", k.clamp(ggml_nearest(k, k.mul(best_iscale, v)), -32, 31), "32"))
    return scale


def q6_search_candle(k, xs, lraw):
    """candle's make_qx_quants(16, 32, x, L, 1): up to 3 re-scaling passes
    and up to 5 coordinate-descent passes, all serial."""
    scale = k.var_f(ZERO)
    mx, amax = signed_absmax(k, xs)
    zero = k.p("setp.eq.f32", amax, ZERO)
    for r in lraw:
        k.setr(r, "0")
    with skip_if(k, zero, "qx_done"):

        def weights(i):
            """Element i's w = x x and w x, made where they are used: kept for
            all 16 elements they took 32 registers (106 in all, 2 CTAs an SM)."""
            w = k.mul(xs[i], xs[i])
            return w, k.mul(w, xs[i])

        L = [k.reg("f") for _ in xs]    # signed quants, as floats
        sumlx, suml2, ls = qx_pass(k, "candle", xs, weights, k.div(f32(-32.0), mx))
        for i in range(16):
            k.setf(L[i], ls[i])
        k.setf(scale, k.div(sumlx, suml2))
        best = k.var_f(k.mul(scale, sumlx))
        # up to 3 re-scaling passes
        it = k.var_r("0")
        with loop(k, "rs_loop") as lp:
            isc = k.div(ONE, scale)
            slx, sl2, ls = qx_pass(k, "candle", xs, weights, isc)
            changed = k.var_r("0")
            for i in range(16):
                k.op("or.b32 %s, %s, %s" % (changed, changed, k.r("selp.u32", "1", "0", k.p("setp.neu.f32", ls[i], L[i]))))
            stop = k.p("setp.eq.u32", changed, "0")
            stop = k.p("or.pred", stop, k.p("setp.eq.f32", sl2, ZERO))
            stop = k.p("or.pred", stop, k.p("setp.le.f32", k.mul(slx, slx), k.mul(best, sl2)))
            lp.exit_if(stop)
            for i in range(16):
                k.setf(L[i], ls[i])
            k.setf(sumlx, slx)
            k.setf(suml2, sl2)
            k.setf(scale, k.div(sumlx, suml2))
            k.setf(best, k.mul(scale, sumlx))
            k.op("add.u32 %s, %s, 1" % (it, it))
            lp.again(k.p("setp.lt.u32", it, "3"))
        # up to 5 coordinate-descent passes
        k.setr(it, "0")
        with loop(k, "cd_loop") as lp:
            n_changed = k.var_r("0")
            for i, v in enumerate(xs):
                with block(k, "cd_next") as nx:
                    fl = L[i]
                    w, wx = weights(i)
                    slx = k.var_f(k.sub(sumlx, k.mul(wx, fl)))
                    nx.exit_if("!" + k.p("setp.gt.f32", slx, ZERO))
                    sl2 = k.var_f(k.sub(suml2, k.mul(k.mul(w, fl), fl)))
                    new_l = clamp_f(k, away_f(k, k.div(k.mul(v, sl2), slx)), -32, 31)
                    nx.exit_if(k.p("setp.eq.f32", new_l, L[i]))
                    fn = new_l
                    k.setf(slx, k.add(slx, k.mul(wx, fn)))
                    k.setf(sl2, k.add(sl2, k.mul(k.mul(w, fn), fn)))
                    ok = k.p("setp.gt.f32", sl2, ZERO)
                    better = k.p("setp.gt.f32", k.mul(k.mul(slx, slx), suml2), k.mul(k.mul(sumlx, sumlx), sl2))
                    nx.exit_if("!" + k.p("and.pred", ok, better))
                    k.setf(L[i], new_l)
                    k.setf(sumlx, slx)
                    k.setf(suml2, sl2)
                    k.setf(scale, k.div(sumlx, suml2))
                    k.setf(best, k.mul(scale, sumlx))
                    k.op("add.u32 %s, %s, 1" % (n_changed, n_changed))
            lp.exit_if(k.p("setp.eq.u32", n_changed, "0"))
            k.op("add.u32 %s, %s, 1" % (it, it))
            lp.again(k.p("setp.lt.u32", it, "5"))
        for i in range(16):
            k.setr(lraw[i], k.r("add.s32", k.r("cvt.rzi.s32.f32", L[i]), "32"))
    return scale


def pack_bytes4(k, vals):
    """Four byte values (low 8 bits of each register) as one .b32 word."""
    w = k.r("and.b32", vals[0], "0xFF")
    for i in (1, 2, 3):
        w = k.r("or.b32", w, k.r("shl.b32", k.r("and.b32", vals[i], "0xFF"), str(8 * i)))
    return w


def store_l_shared(k, lraw, tid, nvals):
    base = k.r("mov.u32", "kq_l")
    addr = k.r("mad.lo.u32", tid, str(nvals), base)
    for c in range(nvals // 4):
        k.op("st.shared.b32 [%s+%d], %s" % (addr, 4 * c, pack_bytes4(k, lraw[4 * c:4 * c + 4])))
    k.op("bar.sync 0")


def ld_l(k, base, off):
    return k.r("ld.shared.u8", "[%s+%d]" % (base, off))


def quantize_q6_k(k, p, mode):
    if mode == "candle":
        # candle's coordinate descent is one serial chain a thread, bound by
        # latency (54 % issue in ncu at 2 CTAs an SM): 4 CTAs, which the
        # weights made where they are used (q6_search_candle) fit in 64
        # registers without spilling
        k.min_ctas = 4
    k.shared.append(".shared .align 4 .f32 kq_scales[%d]" % BLOCK)
    k.shared.append(".shared .align 4 .b8 kq_l[%d]" % (BLOCK * 16))
    active, j, xaddr, qaddr, tid = group_setup(k, p, 16, 256, 210, 16)
    xs = load_values(k, xaddr, 16, p["in_dtype"])
    lraw = [k.reg("r") for _ in range(16)]
    scale = (q6_search_ggml if mode == "ggml" else q6_search_candle)(k, xs, lraw)
    sbase = k.r("mov.u32", "kq_scales")
    k.op("st.shared.f32 [%s], %s" % (k.r("mad.lo.u32", tid, "4", sbase), scale))
    k.op("bar.sync 0")
    gbase = k.r("mad.lo.u32", k.r("and.b32", tid, "0xFFFFFFF0"), "4", sbase)
    scales = [k.f("ld.shared.f32", "[%s+%d]" % (gbase, 4 * i)) for i in range(16)]
    max_scale, max_abs = signed_absmax(k, scales)
    sc = k.var_r("0")
    dh = k.reg("h")
    k.op("mov.b16 %s, 0" % dh)
    with block(k, "pack") as pk:
        if mode == "ggml":   # an all-zero superblock is 210 zero bytes
            zero = k.p("setp.lt.f32", max_abs, f32(1e-15))
            for r in lraw:
                k.setr(r, "0", zero)
            pk.exit_if(zero)
        iscale = k.div(f32(-128.0), max_scale)
        k.op("cvt.rn.f16.f32 %s, %s" % (dh, k.div(ONE, iscale)))
        k.setr(sc, k.r("min.s32", nearest(k, mode, k.mul(iscale, scale)), "127"))
        dj = k.mul(k.f("cvt.f32.f16", dh), k.cvt_f(sc))
        pk.exit_if(k.p("setp.eq.f32", dj, ZERO))
        for i, v in enumerate(xs):
            k.setr(lraw[i], k.r("add.s32", k.clamp(nearest(k, mode, k.div(v, dj)), -32, 31), "32"))
    store_l_shared(k, lraw, tid, 16)
    # Thread j of the superblock writes ql[8j..8j+7], qh[4j..4j+3],
    # scales[j], and thread 0 also d.
    lb = k.r("mad.lo.u32", k.r("and.b32", tid, "0xFFFFFFF0"), "16", k.r("mov.u32", "kq_l"))
    h, jj = k.r("shr.u32", j, "3"), k.r("and.b32", j, "7")
    e0 = k.r("add.u32", lb, k.r("mad.lo.u32", h, "128", k.r("mul.lo.u32", jj, "8")))
    qlb = [k.r("or.b32", k.r("and.b32", ld_l(k, e0, u), "15"),
                k.r("shl.b32", k.r("and.b32", ld_l(k, e0, 64 + u), "15"), "4")) for u in range(8)]
    e1 = k.r("add.u32", lb, k.r("mad.lo.u32", h, "128", k.r("mul.lo.u32", jj, "4")))
    qhb = []
    for u in range(4):
        b = k.r("shr.u32", ld_l(k, e1, u), "4")
        for q in (1, 2, 3):
            b = k.r("or.b32", b, k.r("shl.b32", k.r("shr.u32", ld_l(k, e1, u + 32 * q), "4"), str(2 * q)))
        qhb.append(b)
    out = k.rd("add.u64", qaddr, k.rd("mul.wide.u32", j, "8"))
    for u in range(4):
        store_u16(k, active, out, 2 * u, qlb[2 * u], qlb[2 * u + 1])
    out = k.rd("add.u64", qaddr, k.rd("mul.wide.u32", j, "4"))
    for u in range(2):
        store_u16(k, active, out, 128 + 2 * u, qhb[2 * u], qhb[2 * u + 1])
    scb = k.reg("h")
    k.op("cvt.u16.u32 %s, %s" % (scb, sc))
    k.op("@%s st.global.b8 [%s+192], %s" % (active, k.rd("add.u64", qaddr, k.rd("cvt.u64.u32", j)), scb))
    first = k.p("and.pred", active, k.p("setp.eq.u32", j, "0"))
    k.op("@%s st.global.b16 [%s+208], %s" % (first, qaddr, dh))
    k.op("ret")


# ------------------------------------------------------------ Q4_K / Q5_K --

def finite_or_zero(k, iscale):
    """A qkx2 iscale for its rounding loops: an infinite one (max - min of a
    few subnormals) is 0. ggml rounds inf * (x - min) (and the NaN of
    inf * 0) to 0 after its clamp; rne_f and clamp_f would give nmax, so
    the loops round 0 * (x - min) = 0 instead (no test in the hot loop)."""
    return k.f("selp.f32", iscale, ZERO, k.p("setp.lt.f32", k.f("abs.f32", iscale), INF))


def qkx2_search(k, xs, nmax, rmin, nstep):
    """ggml's make_qkx2_quants(32, nmax, x, w, L, &the_min, Laux, rmin, 0.1,
    nstep, false) with w = av_x + |x|. Returns (scale, the_min, lsel_iscale,
    lsel_min): the search's quants are clamp(nearest(lsel_iscale * (x -
    lsel_min)), 0, nmax), regenerated when needed instead of kept."""
    sum_x2 = k.var_f(ZERO)
    for v in xs:
        k.setf(sum_x2, k.add(sum_x2, k.mul(v, v)))
    av_x = k.f("sqrt.rn.f32", k.div(sum_x2, f32(32.0)))
    w = [k.add(av_x, k.f("abs.f32", v)) for v in xs]
    mn, mx = k.var_f(xs[0]), k.var_f(xs[0])
    sum_w = k.var_f(w[0])
    sum_x = k.var_f(k.mul(sum_w, xs[0]))
    for i in range(1, 32):
        k.setf(mn, xs[i], k.p("setp.lt.f32", xs[i], mn))
        k.setf(mx, xs[i], k.p("setp.gt.f32", xs[i], mx))
        k.setf(sum_w, k.add(sum_w, w[i]))
        k.setf(sum_x, k.add(sum_x, k.mul(w[i], xs[i])))
    k.setf(mn, ZERO, k.p("setp.gt.f32", mn, ZERO))
    scale, lsel_iscale, lsel_min = k.var_f(ZERO), k.var_f(ZERO), k.var_f(ZERO)
    with skip_if(k, k.p("setp.eq.f32", mx, mn), "qkx2_done"):
        fnmax = f32(float(nmax))
        iscale = k.div(fnmax, k.sub(mx, mn))
        k.setf(scale, k.div(ONE, iscale))
        iscale = finite_or_zero(k, iscale)
        k.setf(lsel_iscale, iscale)
        k.setf(lsel_min, mn)
        best = k.var_f(ZERO)
        for i, v in enumerate(xs):
            l = clamp_f(k, rne_f(k, k.mul(iscale, k.sub(v, mn))), 0, nmax)
            diff = k.sub(k.add(k.mul(scale, l), mn), v)
            k.setf(best, k.add(best, k.mul(w[i], k.mul(diff, diff))))
        is_ = k.var_r("0")
        with loop(k, "cand") as lp:
            rng = k.sub(mx, mn)
            isc = k.div(k.add(k.add(f32(rmin), k.mul(f32(0.1), k.cvt_f(is_))), fnmax), rng)
            isc = finite_or_zero(k, isc)
            s_l, s_l2, s_xl = k.var_f(ZERO), k.var_f(ZERO), k.var_f(ZERO)
            fls = []
            for i, v in enumerate(xs):
                fl = clamp_f(k, rne_f(k, k.mul(isc, k.sub(v, mn))), 0, nmax)
                fls.append(fl)
                wl = k.mul(w[i], fl)
                k.setf(s_l, k.add(s_l, wl))
                k.setf(s_l2, k.add(s_l2, k.mul(wl, fl)))
                k.setf(s_xl, k.add(s_xl, k.mul(wl, v)))
            with block(k, "cand_next") as cand:
                D = k.sub(k.mul(sum_w, s_l2), k.mul(s_l, s_l))
                cand.exit_if("!" + k.p("setp.gt.f32", D, ZERO))
                this_scale = k.var_f(k.div(k.sub(k.mul(sum_w, s_xl), k.mul(sum_x, s_l)), D))
                this_min = k.var_f(k.div(k.sub(k.mul(s_l2, sum_x), k.mul(s_l, s_xl)), D))
                clampmin = k.p("setp.gt.f32", this_min, ZERO)
                k.setf(this_min, ZERO, clampmin)
                k.setf(this_scale, k.div(s_xl, s_l2), clampmin)
                cur = k.var_f(ZERO)
                for i, v in enumerate(xs):
                    diff = k.sub(k.add(k.mul(this_scale, fls[i]), this_min), v)
                    k.setf(cur, k.add(cur, k.mul(w[i], k.mul(diff, diff))))
                cand.exit_if("!" + k.p("setp.lt.f32", cur, best))
                k.setf(lsel_iscale, isc)
                k.setf(lsel_min, mn)
                k.setf(best, cur)
                k.setf(scale, this_scale)
                k.setf(mn, this_min)
            k.op("add.u32 %s, %s, 1" % (is_, is_))
            lp.again(k.p("setp.le.u32", is_, str(nstep)))
    return scale, k.f("neg.f32", mn), lsel_iscale, lsel_min


def qkx1_search(k, xs, nmax):
    """candle's make_qkx1_quants(nmax, 5, x): (scale, the_min)."""
    mn, mx = k.var_f(xs[0]), k.var_f(xs[0])
    for v in xs[1:]:
        k.setf(mn, v, k.p("setp.lt.f32", v, mn))
        k.setf(mx, v, k.p("setp.gt.f32", v, mx))
    scale, mmin = k.var_f(ZERO), k.var_f(ZERO)
    with skip_if(k, k.p("setp.eq.f32", mx, mn), "qkx1_done"):
        k.setf(mn, ZERO, k.p("setp.gt.f32", mn, ZERO))
        fnmax = f32(float(nmax))
        iscale = k.var_f(k.div(fnmax, k.sub(mx, mn)))
        L = [k.var_f(ZERO) for _ in xs]   # quants as floats
        it = k.var_r("0")
        with loop(k, "qkx1_try") as lp:
            # suml2 is an integer sum (at most 32 * 31^2) in the reference: exact in f32
            sumlx, suml2, changed = k.var_f(ZERO), k.var_f(ZERO), k.var_r("0")
            for i, v in enumerate(xs):
                xm = k.sub(v, mn)
                li = clamp_f(k, away_f(k, k.mul(iscale, xm)), 0, nmax)
                k.op("or.b32 %s, %s, %s" % (changed, changed, k.r("selp.u32", "1", "0", k.p("setp.neu.f32", li, L[i]))))
                k.setf(L[i], li)
                k.setf(sumlx, k.add(sumlx, k.mul(xm, li)))
                k.setf(suml2, k.add(suml2, k.mul(li, li)))
            k.setf(scale, k.div(sumlx, suml2))
            total = k.var_f(f32(-0.0))
            for i, v in enumerate(xs):
                k.setf(total, k.add(total, k.sub(v, k.mul(scale, L[i]))))
            k.setf(mn, k.div(total, f32(32.0)))
            k.setf(mn, ZERO, k.p("setp.gt.f32", mn, ZERO))
            k.setf(iscale, k.div(ONE, scale))
            k.op("add.u32 %s, %s, 1" % (it, it))
            again = k.p("and.pred", k.p("setp.ne.u32", changed, "0"), k.p("setp.lt.u32", it, "5"))
            lp.again(again)
        k.setf(mmin, k.f("neg.f32", mn))
    return scale, mmin


def quantize_q45_k(k, p, mode, q5):
    nmax = 31 if q5 else 15
    bb = 176 if q5 else 144
    k.shared.append(".shared .align 4 .f32 kq_scales[%d]" % BLOCK)
    k.shared.append(".shared .align 4 .f32 kq_mins[%d]" % BLOCK)
    k.shared.append(".shared .align 4 .b8 kq_l[%d]" % (BLOCK * 32))
    active, j, xaddr, qaddr, tid = group_setup(k, p, 8, 256, bb, 32)
    xs = load_values(k, xaddr, 32, p["in_dtype"])
    if mode == "ggml":
        scale, the_min, lsel_iscale, lsel_min = qkx2_search(
            k, xs, nmax, -0.5 if q5 else -1.0, 15 if q5 else 20)
    else:
        scale, the_min = qkx1_search(k, xs, nmax)
    sa = k.r("mad.lo.u32", tid, "4", k.r("mov.u32", "kq_scales"))
    ma = k.r("mad.lo.u32", tid, "4", k.r("mov.u32", "kq_mins"))
    k.op("st.shared.f32 [%s], %s" % (sa, scale))
    k.op("st.shared.f32 [%s], %s" % (ma, the_min))
    k.op("bar.sync 0")
    g0 = k.r("mul.lo.u32", k.r("and.b32", tid, "0xFFFFFFF8"), "4")
    sb = k.r("add.u32", g0, k.r("mov.u32", "kq_scales"))
    mb = k.r("add.u32", g0, k.r("mov.u32", "kq_mins"))
    scales = [k.f("ld.shared.f32", "[%s+%d]" % (sb, 4 * i)) for i in range(8)]
    mins = [k.f("ld.shared.f32", "[%s+%d]" % (mb, 4 * i)) for i in range(8)]
    # max over the 8, from 0. ggml: strict '>'. candle's x86-64
    # `fold(0.0, |max, &val| val.max(max))` takes val also on a tie (maxss
    # returns its second operand): mins that are all ±0 end on the last
    # one's sign, so dmin is -0.0 (0x8000) where mins[7] is; NaN never wins
    cmp = "setp.gt.f32" if mode == "ggml" else "setp.ge.f32"
    max_scale, max_min = k.var_f(ZERO), k.var_f(ZERO)
    for i in range(8):
        k.setf(max_scale, scales[i], k.p(cmp, scales[i], max_scale))
        k.setf(max_min, mins[i], k.p(cmp, mins[i], max_min))
    inv_scale = k.f("selp.f32", k.div(f32(63.0), max_scale), ZERO, k.p("setp.gt.f32", max_scale, ZERO))
    inv_min = k.f("selp.f32", k.div(f32(63.0), max_min), ZERO, k.p("setp.gt.f32", max_min, ZERO))

    def six_bit(v):
        n = nearest(k, mode, v)
        if mode == "ggml":   # (uint8_t) nearest_int(.), then MIN(63, .)
            return k.r("min.u32", k.r("and.b32", n, "0xFF"), "63")
        return k.r("and.b32", k.r("min.s32", n, "63"), "0xFF")   # .min(63) as u8

    ls = [six_bit(k.mul(inv_scale, scales[i])) for i in range(8)]
    lm = [six_bit(k.mul(inv_min, mins[i])) for i in range(8)]
    d_h = _f16(k, k.div(max_scale, f32(63.0)))
    d16 = k.f("cvt.f32.f16", d_h)
    dmin_h = _f16(k, k.div(max_min, f32(63.0)))
    dmin16 = k.f("cvt.f32.f16", dmin_h)
    # this thread's (sc, m): select entry j
    my_ls, my_lm = k.var_r(ls[0]), k.var_r(lm[0])
    for i in range(1, 8):
        sel = k.p("setp.eq.u32", j, str(i))
        k.setr(my_ls, ls[i], sel)
        k.setr(my_lm, lm[i], sel)
    lraw = [k.reg("r") for _ in range(32)]
    for i, v in enumerate(xs):
        if mode == "ggml":
            k.setr(lraw[i], k.clamp(ggml_nearest(k, k.mul(lsel_iscale, k.sub(v, lsel_min))), 0, nmax))
        else:
            k.setr(lraw[i], "0")
    dj = k.mul(d16, k.cvt_f(my_ls))
    with skip_if(k, k.p("setp.eq.f32", dj, ZERO), "keep_l"):
        dm = k.mul(dmin16, k.cvt_f(my_lm))
        for i, v in enumerate(xs):
            k.setr(lraw[i], k.clamp(nearest(k, mode, k.div(k.add(v, dm), dj)), 0, nmax))
    store_l_shared(k, lraw, tid, 32)
    # thread j writes qs[16j..16j+15] (and for Q5_K qh[4j..4j+3]); thread 0
    # the 16-byte header d, dmin, scales[12]
    lb = k.r("add.u32", k.r("mul.lo.u32", k.r("and.b32", tid, "0xFFFFFFF8"), "32"), k.r("mov.u32", "kq_l"))
    e0 = k.r("add.u32", lb, k.r("mad.lo.u32", k.r("shr.u32", j, "1"), "64",
                                 k.r("mul.lo.u32", k.r("and.b32", j, "1"), "16")))
    qsb = [k.r("or.b32", k.r("and.b32", ld_l(k, e0, u), "15"),
                k.r("shl.b32", k.r("and.b32", ld_l(k, e0, 32 + u), "15"), "4")) for u in range(16)]
    words = [pack_bytes4(k, qsb[4 * c:4 * c + 4]) for c in range(4)]
    qs_off = 48 if q5 else 16
    out = k.rd("add.u64", qaddr, k.rd("mul.wide.u32", j, "16"))
    k.op("@%s st.global.v4.b32 [%s+%d], {%s}" % (active, out, qs_off, ", ".join(words)))
    if q5:
        e1 = k.r("add.u32", lb, k.r("mul.lo.u32", j, "4"))
        qhb = []
        for u in range(4):
            b = k.r("mov.u32", "0")
            for c in range(4):
                lo = k.r("shr.u32", ld_l(k, e1, 64 * c + u), "4")
                hi = k.r("shr.u32", ld_l(k, e1, 64 * c + 32 + u), "4")
                b = k.r("or.b32", b, k.r("or.b32", k.r("shl.b32", lo, str(2 * c)), k.r("shl.b32", hi, str(2 * c + 1))))
            qhb.append(b)
        k.op("@%s st.global.b32 [%s+16], %s" % (active, k.rd("add.u64", qaddr, k.rd("mul.wide.u32", j, "4")),
                                               pack_bytes4(k, qhb)))
    sbytes = []
    for i in range(4):
        sbytes.append(k.r("or.b32", ls[i], k.r("shl.b32", k.r("shr.u32", ls[i + 4], "4"), "6")))
    for i in range(4):
        sbytes.append(k.r("or.b32", lm[i], k.r("shl.b32", k.r("shr.u32", lm[i + 4], "4"), "6")))
    for i in range(4):
        sbytes.append(k.r("or.b32", k.r("and.b32", ls[i + 4], "15"), k.r("shl.b32", k.r("and.b32", lm[i + 4], "15"), "4")))
    dwords = k.reg("r")
    k.op("mov.b32 %s, {%s, %s}" % (dwords, d_h, dmin_h))
    first = k.p("and.pred", active, k.p("setp.eq.u32", j, "0"))
    k.op("@%s st.global.v4.b32 [%s], {%s, %s, %s, %s}" % (
        first, qaddr, dwords, pack_bytes4(k, sbytes[0:4]), pack_bytes4(k, sbytes[4:8]), pack_bytes4(k, sbytes[8:12])))
    k.op("ret")


def _f16(k, v):
    h = k.reg("h")
    k.op("cvt.rn.f16.f32 %s, %s" % (h, v))
    return h


# ------------------------------------------------------- weight decoding --

class Bytes:
    """count bytes at addr+off, loaded as words (16-byte vectors when
    align16, else 2-byte loads) and cut into fields only where used, so a
    decoded unit never holds one register per byte."""

    def __init__(self, k, addr, off, count, align16):
        self.k, self.words, self.width = k, [], 32 if align16 else 16
        if align16:
            for c in range(count // 16):
                ws = k.regs("r", 4)
                k.op("ld.global.nc.v4.b32 {%s}, [%s+%d]" % (", ".join(ws), addr, off + 16 * c))
                self.words += ws
        else:
            for c in range(count // 2):
                h = k.reg("h")
                k.op("ld.global.nc.b16 %s, [%s+%d]" % (h, addr, off + 2 * c))
                self.words.append(k.r("cvt.u32.u16", h))

    def bits(self, i, pos, n):
        """n bits from bit pos of byte i."""
        per = self.width // 8
        return self.k.r("bfe.u32", self.words[i // per], str(8 * (i % per) + pos), str(n))

    def byte(self, i):
        return self.bits(i, 0, 8)


def f16_lo_hi(k, word):
    lo, hi = k.reg("h"), k.reg("h")
    k.op("mov.b32 {%s, %s}, %s" % (lo, hi, word))
    return k.f("cvt.f32.f16", lo), k.f("cvt.f32.f16", hi)


def scale_min_k4(k, s, j):
    """(sc, m) of sub-block j (a Python int) from the 12 scale bytes s."""
    if j < 4:
        return k.r("and.b32", s[j], "63"), k.r("and.b32", s[j + 4], "63")
    sc = k.r("or.b32", k.r("and.b32", s[j + 4], "15"), k.r("shl.b32", k.r("shr.u32", s[j - 4], "6"), "4"))
    m = k.r("or.b32", k.r("shr.u32", s[j + 4], "4"), k.r("shl.b32", k.r("shr.u32", s[j], "6"), "4"))
    return sc, m


def select(k, options, index):
    """options[index] for a runtime index register (a chain of selp)."""
    v = k.var_r(options[0])
    for i in range(1, len(options)):
        k.setr(v, options[i], k.p("setp.eq.u32", index, str(i)))
    return v


def decode_unit(k, fmt, blk, part):
    """Loads one unit of weights and returns its scale groups as (scale, min
    or None, qs, first element, count), where qs() emits the group's quants
    as exact f32 registers. blk: the block's address; part: which unit of the
    block (register; Q4_K/Q5_K: pair 0..3 of 64 values, Q6_K: half 0..1 of
    128 values, Q8_0: always 0). Scales are d·sc and mins dmin·m, both exact
    products as in the references."""
    cvt_u = lambda v: k.f("cvt.rn.f32.u32", v)
    cvt_s = lambda v: k.f("cvt.rn.f32.s32", v)

    def small(u, bias):
        """u - bias as f32 for an unsigned u < 2^23, exactly, without a
        conversion instruction (those issue at a fraction of the ALU rate):
        the bits 0x4B000000 | u are the float 2^23 + u."""
        return k.sub(k.f("mov.b32", k.r("or.b32", u, "0x4B000000")), f32(8388608.0 + bias))
    if fmt == "q8_0":
        hb = Bytes(k, blk, 0, 34, False)
        d_h = k.reg("h")
        k.op("cvt.u16.u32 %s, %s" % (d_h, hb.words[0]))
        d = k.f("cvt.f32.f16", d_h)
        qs = lambda: [small(k.r("xor.b32", hb.byte(2 + i), "0x80"), 128) for i in range(32)]
        return [(d, None, qs, 0, 32)]
    if fmt in ("q4_k", "q5_k"):
        q5 = fmt == "q5_k"
        hdr = k.regs("r", 4)
        k.op("ld.global.nc.v4.b32 {%s}, [%s]" % (", ".join(hdr), blk))
        d, dmin = f16_lo_hi(k, hdr[0])
        s = [k.r("bfe.u32", hdr[1 + i // 4], str(8 * (i % 4)), "8") for i in range(12)]
        pairs = [scale_min_k4(k, s, j) for j in range(8)]
        qaddr = k.rd("add.u64", blk, k.rd("mul.wide.u32", part, "32"))
        qs = Bytes(k, qaddr, 48 if q5 else 16, 32, True)
        qh = Bytes(k, blk, 16, 32, True) if q5 else None
        groups = []
        for half in (0, 1):
            sc = select(k, [pairs[2 * c + half][0] for c in range(4)], part)
            m = select(k, [pairs[2 * c + half][1] for c in range(4)], part)
            shift = k.r("add.u32", k.r("shl.b32", part, "1"), str(half)) if q5 else None

            def quants(half=half, shift=shift):
                out = []
                for i in range(32):
                    q = qs.bits(i, 4 * half, 4)
                    if q5:
                        hb = k.r("and.b32", k.r("shr.u32", qh.byte(i), shift), "1")
                        q = k.r("or.b32", q, k.r("shl.b32", hb, "4"))
                    out.append(small(q, 0))
                return out
            groups.append((k.mul(d, cvt_u(sc)), k.mul(dmin, cvt_u(m)), quants, 32 * half, 32))
        return groups
    # q6_k: half `part` (128 values)
    ql = Bytes(k, k.rd("add.u64", blk, k.rd("mul.wide.u32", part, "64")), 0, 64, False)
    qh = Bytes(k, k.rd("add.u64", blk, k.rd("mul.wide.u32", part, "32")), 128, 32, False)
    sc = Bytes(k, k.rd("add.u64", blk, k.rd("mul.wide.u32", part, "8")), 192, 8, False)
    d_h = k.reg("h")
    k.op("ld.global.nc.b16 %s, [%s+208]" % (d_h, blk))
    d = k.f("cvt.f32.f16", d_h)
    groups = []
    for g in range(8):
        quarter = g // 2

        def quants(g=g, quarter=quarter):
            out = []
            for l in range(16 * (g % 2), 16 * (g % 2) + 16):
                low = ql.bits(l + 32 * (quarter & 1), 4 * (quarter >> 1), 4)
                high = qh.bits(l, 2 * quarter, 2)
                out.append(small(k.r("or.b32", low, k.r("shl.b32", high, "4")), 32))
            return out
        groups.append((k.mul(d, cvt_s(k.r("cvt.s32.s8", sc.byte(g)))), None, quants, 16 * g, 16))
    return groups


UNIT = {"q8_0": 32, "q4_k": 64, "q5_k": 64, "q6_k": 128}
UNITS_PER_BLOCK = {"q8_0": 1, "q4_k": 4, "q5_k": 4, "q6_k": 2}


def store_values(k, addr, vals, dtype):
    """Stores 32 f32 values at addr (16-byte aligned) as f32, f16 or bf16."""
    is_f32 = k.p("setp.eq.u32", dtype, "1")
    is_f16 = k.p("setp.eq.u32", dtype, "2")
    l16, lbf, done = k.label("st16"), k.label("stbf"), k.label("stored")
    k.op("@!%s bra %s" % (is_f32, l16))
    for c in range(len(vals) // 4):
        k.op("st.global.v4.f32 [%s+%d], {%s}" % (addr, 16 * c, ", ".join(vals[4 * c:4 * c + 4])))
    k.op("bra.uni %s" % done)
    for lab, cvt in ((l16, "f16x2"), (lbf, "bf16x2")):
        k.place(lab)
        if lab == l16:
            k.op("@!%s bra %s" % (is_f16, lbf))
        words = []
        for lo, hi in zip(vals[0::2], vals[1::2]):
            w = k.reg("r")
            k.op("cvt.rn.%s.f32 %s, %s, %s" % (cvt, w, hi, lo))
            words.append(w)
        for c in range(len(words) // 4):
            k.op("st.global.v4.b32 [%s+%d], {%s}" % (addr, 16 * c, ", ".join(words[4 * c:4 * c + 4])))
        k.op("bra.uni %s" % done)
    k.place(done)


DEQ_PARAMS = [(".u64", "q"), (".u64", "y"), (".u32", "chunks"), (".u32", "per_row"),
              (".u64", "q_stride"), (".u64", "y_stride"), (".u32", "out_dtype")]


def dequantize(k, p, fmt):
    be, bb, _ = FORMATS[fmt]
    t = k.r("mad.lo.u32", k.r("mov.u32", "%ctaid.x"), str(BLOCK), k.r("mov.u32", "%tid.x"))
    with skip_if(k, k.p("setp.ge.u32", t, p["chunks"]), "done"):
        row = k.r("div.u32", t, p["per_row"])
        c = k.r("sub.u32", t, k.r("mul.lo.u32", row, p["per_row"]))
        per_block = be // 32
        b = k.r("div.u32", c, str(per_block)) if per_block > 1 else c
        sub = k.r("rem.u32", c, str(per_block)) if per_block > 1 else k.r("mov.u32", "0")
        row64 = k.rd("cvt.u64.u32", row)
        blk = k.rd("add.u64", p["q"], k.rd("mad.lo.u64", row64, p["q_stride"], k.rd("mul.wide.u32", b, str(bb))))
        # A 32-value chunk is half a decode unit (Q4_K/Q5_K: one of a pair; Q6_K:
        # a quarter of a half): decode the unit, keep the chunk's groups.
        vals = k.regs("f", 32)
        if fmt == "q8_0":
            (d, _, qs, _, _), = decode_unit(k, fmt, blk, sub)
            for i, q in enumerate(qs()):
                k.op("mul.rn.f32 %s, %s, %s" % (vals[i], q, d))
        elif fmt in ("q4_k", "q5_k"):
            # chunk `sub` is sub-block sub: half (sub & 1) of pair (sub >> 1)
            groups = decode_unit(k, fmt, blk, k.r("shr.u32", sub, "1"))
            odd = k.p("setp.eq.u32", k.r("and.b32", sub, "1"), "1")
            q0, q1 = groups[0][2](), groups[1][2]()
            for i in range(32):
                v0 = k.sub(k.mul(groups[0][0], q0[i]), groups[0][1])
                v1 = k.sub(k.mul(groups[1][0], q1[i]), groups[1][1])
                k.op("selp.f32 %s, %s, %s, %s" % (vals[i], v1, v0, odd))
        else:
            # chunk `sub` is quarter (sub & 3) of half (sub >> 2): groups 2q, 2q+1
            groups = decode_unit(k, fmt, blk, k.r("shr.u32", sub, "2"))
            quarter = k.r("and.b32", sub, "3")
            for qq in range(4):
                take = k.p("setp.eq.u32", quarter, str(qq))
                for gi in (2 * qq, 2 * qq + 1):
                    scale, _, qs, first, _ = groups[gi]
                    for i, q in enumerate(qs()):
                        k.setf(vals[first - 32 * qq + i], k.mul(scale, q), take)
        esize = k.rd("cvt.u64.u32", k.r("selp.u32", "4", "2", k.p("setp.eq.u32", p["out_dtype"], "1")))
        elem = k.rd("mad.lo.u64", row64, p["y_stride"], k.rd("mul.wide.u32", c, "32"))
        store_values(k, k.rd("mad.lo.u64", elem, esize, p["y"]), vals, p["out_dtype"])
    k.op("ret")


MV_PARAMS = [(".u64", "a"), (".u64", "w"), (".u64", "c"), (".u32", "m"), (".u32", "n"),
             (".u32", "units"), (".u64", "lda"), (".u64", "w_stride"), (".u64", "ldc"),
             (".u32", "a_dtype"), (".u32", "out_dtype")]
# the streaming kernels also take their ring depth and whether W's rows need
# 16-byte windows (kquant_stream.py)
STREAM_PARAMS = MV_PARAMS + [(".u32", "stages"), (".u32", "windows")]


STAGE_LIMIT = 40 * 1024   # shared bytes for A staging (static shared memory stays < 48 KiB)


def stage_bytes(fmt, mt):
    return mt * 32 * (UNIT[fmt] + 4) * 4


def dot_groups(k, groups, mt, acc, a_of):
    """acc[m] += sum over the unit's groups of scale·(q·a) - min·(sum a);
    a_of(m, first, count) gives the activations of a group as f32."""
    for scale, mn, qfun, first, count in groups:
        qs = qfun()
        for m in range(mt):
            a = a_of(m, first, count)
            dot = k.var_f(ZERO)
            for i, q in enumerate(qs):
                k.op("fma.rn.f32 %s, %s, %s, %s" % (dot, q, a[i], dot))
            k.op("fma.rn.f32 %s, %s, %s, %s" % (acc[m], scale, dot, acc[m]))
            if mn is not None:
                sa = k.var_f(ZERO)
                for v in a:
                    k.op("add.f32 %s, %s, %s" % (sa, sa, v))
                k.op("fma.rn.f32 %s, %s, %s, %s" % (acc[m], k.f("neg.f32", mn), sa, acc[m]))


def matvec(k, p, fmt, mt):
    """See the file header. When the activations of 32 units (all M rows)
    fit in shared memory, the CTA's 8 warps, which walk the same units in
    step, convert them to f32 there once per CTA instead of once per warp:
    conversions issue at a fraction of the ALU rate and would otherwise cost
    as much as the weights themselves."""
    _, bb, _ = FORMATS[fmt]
    ue, upb = UNIT[fmt], UNITS_PER_BLOCK[fmt]
    staged = stage_bytes(fmt, mt) <= STAGE_LIMIT
    # ptxas picks 128 for some variants and spills; M = 1 fits 128 (2 CTAs per SM)
    k.maxnreg = 128 if mt == 1 and fmt != "q5_k" else 192
    tid = k.r("mov.u32", "%tid.x")
    lane = k.r("and.b32", tid, "31")
    nrow = k.r("mad.lo.u32", k.r("mov.u32", "%ctaid.x"), "8", k.r("shr.u32", tid, "5"))
    row_ok = k.p("setp.lt.u32", nrow, p["n"])
    done = k.label("done")
    if not staged:
        k.op("@!%s bra %s" % (row_ok, done))
    # rows past N (staged CTAs keep them for the barriers) read row N-1
    wrow = k.rd("add.u64", p["w"], k.rd("mul.lo.u64", k.rd("cvt.u64.u32", k.r("min.u32", nrow, k.r("sub.u32", p["n"], "1"))),
                                        p["w_stride"]))
    esize = k.rd("cvt.u64.u32", k.r("selp.u32", "4", "2", k.p("setp.eq.u32", p["a_dtype"], "1")))
    arows = []
    for m in range(mt):   # rows past M re-read row M-1; their sums are never stored
        mr = k.r("min.u32", str(m), k.r("sub.u32", p["m"], "1")) if m else k.r("mov.u32", "0")
        arows.append(k.rd("add.u64", p["a"], k.rd("mul.lo.u64", k.rd("mul.lo.u64", k.rd("cvt.u64.u32", mr), p["lda"]), esize)))
    acc = [k.var_f(ZERO) for _ in range(mt)]

    def unit_blk(u):
        sb = k.r("div.u32", u, str(upb)) if upb > 1 else u
        part = k.r("rem.u32", u, str(upb)) if upb > 1 else k.r("mov.u32", "0")
        return k.rd("add.u64", wrow, k.rd("mul.wide.u32", sb, str(bb))), part

    if not staged:
        u = k.var_r(lane)
        with loop(k, "unit", skip=k.p("setp.ge.u32", u, p["units"])) as lp:
            blk, part = unit_blk(u)
            koff = k.rd("mul.lo.u64", k.rd("mul.wide.u32", u, str(ue)), esize)
            dot_groups(k, decode_unit(k, fmt, blk, part), mt, acc, lambda m, first, count: load_values(
                k, k.rd("add.u64", arows[m], k.rd("add.u64", koff, k.rd("mul.lo.u64", esize, str(first)))),
                count, p["a_dtype"]))
            k.op("add.u32 %s, %s, 32" % (u, u))
            lp.again(k.p("setp.lt.u32", u, p["units"]))
    else:
        pitch = (ue + 4) * 4          # bytes per staged unit (16 bytes of padding: no bank conflicts)
        k.shared.append(".shared .align 16 .f32 kq_a[%d]" % (mt * 32 * (ue + 4)))
        base = k.r("mov.u32", "kq_a")
        u0 = k.var_r("0")
        top, end = k.label("chunk"), k.label("chunks_done")   # nothing branches to end
        k.place(top)
        # stage: 8-value pieces of units u0 .. u0+31, for every row m
        pieces = 32 * ue // 8
        for rep in range((pieces + BLOCK - 1) // BLOCK):
            gi = k.r("add.u32", tid, str(BLOCK * rep))
            unit = k.r("add.u32", u0, k.r("shr.u32", gi, str((ue // 8).bit_length() - 1)))
            ok = k.p("and.pred", k.p("setp.lt.u32", gi, str(pieces)), k.p("setp.lt.u32", unit, p["units"]))
            with skip_if(k, "!" + ok, "stage_skip"):
                kidx = k.rd("mad.wide.u32", u0, str(ue), k.rd("mul.wide.u32", gi, "8"))   # element index
                local = k.r("and.b32", gi, str(ue // 8 - 1))
                ulocal = k.r("shr.u32", gi, str((ue // 8).bit_length() - 1))
                for m in range(mt):
                    vals = load_values(k, k.rd("mad.lo.u64", kidx, esize, arows[m]), 8, p["a_dtype"])
                    sa = k.r("add.u32", base, k.r("mad.lo.u32", k.r("add.u32", ulocal, str(32 * m)), str(pitch),
                                                    k.r("mul.lo.u32", local, "32")))
                    k.op("st.shared.v4.f32 [%s], {%s}" % (sa, ", ".join(vals[0:4])))
                    k.op("st.shared.v4.f32 [%s+16], {%s}" % (sa, ", ".join(vals[4:8])))
        k.op("bar.sync 0")
        u = k.r("add.u32", u0, lane)
        with skip_if(k, "!" + k.p("and.pred", row_ok, k.p("setp.lt.u32", u, p["units"])), "unit_skip"):
            blk, part = unit_blk(u)
            mine = [k.r("add.u32", base, k.r("mul.lo.u32", k.r("add.u32", lane, str(32 * m)), str(pitch))) for m in range(mt)]

            def a_smem(m, first, count):
                regs = k.regs("f", count)
                for c in range(count // 4):
                    k.op("ld.shared.v4.f32 {%s}, [%s+%d]" % (", ".join(regs[4 * c:4 * c + 4]), mine[m], 4 * first + 16 * c))
                return regs
            dot_groups(k, decode_unit(k, fmt, blk, part), mt, acc, a_smem)
        k.op("bar.sync 0")
        k.op("add.u32 %s, %s, 32" % (u0, u0))
        k.op("@%s bra %s" % (k.p("setp.lt.u32", u0, p["units"]), top))
        k.place(end)
    for m in range(mt):
        for sh in (16, 8, 4, 2, 1):
            o = k.f("shfl.sync.bfly.b32", acc[m], str(sh), "31", "0xFFFFFFFF")
            k.op("add.f32 %s, %s, %s" % (acc[m], acc[m], o))
    lead = k.p("and.pred", row_ok, k.p("setp.eq.u32", lane, "0"))
    is_f32 = k.p("setp.eq.u32", p["out_dtype"], "1")
    for m in range(mt):
        ok = k.p("and.pred", lead, k.p("setp.gt.u32", p["m"], str(m)))
        off = k.rd("add.u64", k.rd("mul.lo.u64", p["ldc"], str(m)), k.rd("cvt.u64.u32", nrow))
        f32ok = k.p("and.pred", ok, is_f32)
        h16ok = k.p("and.pred", ok, k.p("setp.ne.u32", p["out_dtype"], "1"))
        k.op("@%s st.global.f32 [%s], %s" % (f32ok, k.rd("mad.lo.u64", off, "4", p["c"]), acc[m]))
        h = k.reg("h")
        k.op("cvt.rn.f16.f32 %s, %s" % (h, acc[m]))
        k.op("@%s st.global.b16 [%s], %s" % (h16ok, k.rd("mad.lo.u64", off, "2", p["c"]), h))
    k.place(done)
    k.op("ret")


# ---------------------------------------------------------------- files ----

MODES = ("ggml", "candle")
MTS = (1, 2, 4, 8)


def kernel(name, params, doc, body, *args, shared_bytes=0, keys=None):
    manifest.keys(name, **(keys or {}))
    manifest.facts(name, dynamic_shared_bytes=shared_bytes)
    k = Kernel(name, params, doc)
    p = load_params(k, params, [n for t, n in params if t == ".u64" and n in ("x", "q", "y", "a", "w", "c")])
    body(k, p, *args)
    return "// kaio-shared-bytes: %s %d\n" % (name, shared_bytes) + k.text()


def quantize_body(k, p, fmt, mode):
    if fmt == "q8_0":
        quantize_q8_0(k, p, mode)
    elif fmt == "q6_k":
        quantize_q6_k(k, p, mode)
    else:
        quantize_q45_k(k, p, mode, fmt == "q5_k")


def build():
    quant = [HEADER]
    for fmt in FORMATS:
        for mode in MODES:
            name = "kaio_kq_quantize_%s_%s" % (fmt, mode)
            quant.append(kernel(name, QUANT_PARAMS, "%s quantize, %s mode (see the file header)." % (fmt, mode),
                                quantize_body, fmt, mode, keys={"select": "kq_quantize", "format": fmt, "mode": mode}))
    deq = [HEADER]
    for fmt in FORMATS:
        deq.append(kernel("kaio_kq_dequantize_%s" % fmt, DEQ_PARAMS, "%s dequantize." % fmt, dequantize, fmt,
                          keys={"select": "kq_dequantize", "format": fmt}))
    for fmt in FORMATS:
        for mt in MTS:
            deq.append(kernel("kaio_kq_matvec_%s_m%d" % (fmt, mt), MV_PARAMS,
                              "%s dequant-matvec for M <= %d." % (fmt, mt), matvec, fmt, mt,
                              keys={"select": "kq_matvec", "format": fmt, "rows": mt}))
    for v in MMA_VARIANTS:
        for dt in ("f16", "bf16"):
            for fmt in MMA_FORMATS:
                deq.append(kernel("kaio_kq_mma_%s_%s%s" % (fmt, dt, v.suffix), MV_PARAMS,
                                  "%s dequant-matvec on tensor cores, %s A, M <= 8, %d warps (see kquant_mma.py)."
                                  % (fmt, dt, v.warps), mma_matvec, fmt, dt, v,
                                  keys={"select": "kq_mma", "format": fmt, "dtype": dt, "variant": v.suffix.lstrip("_")}))
    stream = [HEADER, ".extern .shared .align 128 .b8 %s[];\n" % kquant_stream.SMEM_SYMBOL]
    for dt in ("f32", "f16", "bf16"):      # float_variant order (the host indexes by it)
        for fmt in kquant_stream.FORMATS:
            stream.append(kernel("kaio_kq_stream_%s_%s" % (fmt, dt), STREAM_PARAMS,
                                 "%s dequant-matvec on tensor cores, %s A, M <= 8, weights streamed by "
                                 "bulk copies (see kquant_stream.py)." % (fmt, dt),
                                 kquant_stream.stream_matvec, fmt, dt,
                                 shared_bytes=kquant_stream.shared_bytes(fmt),
                                 keys={"select": "kq_stream", "format": fmt, "dtype": dt}))
    return {"kquant_quantize.ptx": "\n".join(quant), "kquant_dequant.ptx": "\n".join(deq),
            "kquant_stream_sm90.ptx": coherent_loads("\n".join(stream))}


if __name__ == "__main__":
    sys.exit(cli.main(__file__, __doc__, build))
