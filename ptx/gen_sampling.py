#!/usr/bin/env python3
"""Generate libkaio's token-sampling kernels (kaio_op_create_sampling).

    python3 ptx/gen_sampling.py --out-dir DIR  # write DIR/sampling.ptx

kaio_sample_<dt>: one 1024-thread CTA per row of logits.  Every pass reads the
row (the first from memory, the next mostly from L2); thread t handles the
quads (4 consecutive tokens) t, t + 1024, ..., one 16-byte (f32) or 8-byte
load per quad where the row is aligned for it.

  1. max and argmax (NaN skipped, lowest index on ties).  Greedy rows
     (temperature <= 0 or NaN), rows with a +inf logit and rows with no logit
     above -inf stop here.
  2. top-k: the k-th largest value's key (order-preserving bits of the
     float), by radix_select with counts: a histogram of a coarse key, the
     log2-weight (x - max) * log2(e) / T in 1/64 steps (2048 bins, spread
     where the float bits' top digit piles a row into a few exponents), then
     the exact key among the threshold bin's elements, collected into shared
     memory (up to 512; more: radix passes over the float key's digits, f32
     11/11/10 bits, f16 / bf16 8/8, inside that bin).
  3. top-p: the same search weighted by mass, exp2((x - max) * log2(e) / T)
     in 1.31 fixed point (exact u64 sums kept as u32 lo / hi words: order
     independent, so the threshold is the same bits on every run), over the tokens top-k kept
     (flags bit 0, KAIO_SAMPLING_TOP_P_OF_ROW: over the whole row, and the
     draw keeps what both filters keep); the target is ceil(top_p * total).
  4. the draw: the Gumbel-max trick over the kept tokens (value >= both
     thresholds and mass >= min_p), token = argmax of
     log2(w) - log2(-ln U), U from Philox4x32-10 with key = the row's seed
     and counter (quad index, 0, offset lo, offset hi): one counter per 4
     tokens, so a token's draw does not depend on the batch or the launch.
     The same pass sums the kept mass for the chosen token's probability.

kaio_sample_split_<dt>: a row over several CTAs, one launch per pass (the
same bits); top-k without top-p in one launch that reads the row once
(fast_topk).

kaio_sample_penalty_<dt>: one CTA per row copies the row as f32 into the op's
workspace and applies the repetition, presence and frequency penalties of the
row's previous tokens (counted with global atomics in a second workspace that
it leaves zeroed for the tokens it touched).
"""

import sys

from kaio_ptx import cli
from kaio_ptx.control import cases, loop, skip_if
from kaio_ptx.kernel import Kernel
from kaio_ptx.literals import NEG_INF, INF, ONE, ZERO, f32
from kaio_ptx.preamble import preamble

BLOCK = 1024
WARPS = BLOCK // 32
NONE = "0xFFFFFFFF"
LN2 = 0.6931471805599453
LOG2E = 1.4426950408889634
UNROLL = 2          # quads per loop trip: 8 loads in flight per thread

PHILOX_M = (0xD2511F53, 0xCD9E8D57)
PHILOX_W = (0x9E3779B9, 0xBB67AE85)


class DType:
    def __init__(self, name, bits, digits):
        self.name, self.bits, self.digits = name, bits, digits
        self.esize = bits // 8

    def decode(self, k, raw):
        """(x as f32, order-preserving key) of a raw element (NaN stays NaN)."""
        if self.bits == 32:
            x = k.f("mov.b32", raw)
            sign = k.r("shr.s32", raw, "31")
            key = k.r("xor.b32", raw, k.r("or.b32", sign, "0x80000000"))
            return x, key
        if self.name == "f16":
            x = k.f("cvt.f32.f16", raw)
        else:
            x = k.f("mov.b32", k.r("shl.b32", k.r("cvt.u32.u16", raw), "16"))
        wide = k.r("cvt.u32.u16", raw)
        sign = k.r("and.b32", k.r("shr.s32", k.r("shl.b32", wide, "16"), "31"), "0xFFFF")
        key = k.r("xor.b32", wide, k.r("or.b32", sign, "0x8000"))
        return x, key

    def load_quad(self, k, R, q, qin):
        """The raw elements 4q .. 4q+3 of the row: one 16-byte (f32) or
        8-byte (f16 / bf16) load for a whole quad of an aligned row, else
        one load per element in range; missing elements are NaN."""
        nan = "0x7FC00000" if self.bits == 32 else ("0x7E00" if self.name == "f16" else "0x7FC0")
        kind, w = ("r", 32) if self.bits == 32 else ("h", 16)
        raws = [k.reg(kind) for _ in range(4)]
        for r in raws:
            k.op("mov.b%d %s, %s" % (w, r, nan))
        full = k.p("setp.lt.and.u32", q, R.nfull, R.vec)
        qaddr = k.rd("add.u64", R.rowp, k.rd("mul.wide.u32", q, 4 * self.esize))
        if self.bits == 32:
            k.op("@%s ld.global.nc.v4.b32 {%s}, [%s]" % (full, ", ".join(raws), qaddr))
        else:
            lo, hi = k.reg("r"), k.reg("r")
            k.op("@%s ld.global.nc.v2.b32 {%s, %s}, [%s]" % (full, lo, hi, qaddr))
            k.op("@%s mov.b32 {%s, %s}, %s" % (full, raws[0], raws[1], lo))
            k.op("@%s mov.b32 {%s, %s}, %s" % (full, raws[2], raws[3], hi))
        # the row's tail quad, or a row not aligned for the wide load
        with skip_if(k, full, "wide"):
            for e in range(4):
                i = k.r("add.u32", k.r("shl.b32", q, "2"), e)
                inr = k.p("setp.lt.and.u32", i, R.vocab, qin)
                addr = k.rd("add.u64", qaddr, e * self.esize)
                k.op("@%s ld.global.nc.b%d %s, [%s]" % (inr, w, raws[e], addr))
        return raws


DTYPES = [DType("f32", 32, [(21, 11), (10, 11), (0, 10)]),
          DType("f16", 16, [(8, 8), (0, 8)]),
          DType("bf16", 16, [(8, 8), (0, 8)])]
MAX_BINS = 2048
COARSE_BINS = 2048
MASS_HI = COARSE_BINS * 4   # s_hist_mass: lo words of the bins, then hi words
CAND = 512          # candidates of the threshold's coarse bin kept in shared memory

SHARED = [".shared .align 8 .b8 s_hist_cnt[%d]" % (MAX_BINS * 4),
          ".shared .align 8 .b8 s_hist_mass[%d]" % (MAX_BINS * 8),
          ".shared .align 8 .b8 s_red[%d]" % (WARPS * 16),
          ".shared .align 8 .b8 s_scan[%d]" % (WARPS * 8),
          ".shared .align 8 .b8 s_bc[64]"]


def bar(k):
    k.op("bar.sync 0")


def shfl(k, kind, val, how, lane_arg, clamp):
    o = k.reg(kind)
    k.op("shfl.sync.%s.b32 %s, %s, %s, %s, 0xffffffff" % (how, o, val, lane_arg, clamp))
    return o


def shfl64(k, val, how, lane_arg, clamp):
    lo, hi = k.reg("r"), k.reg("r")
    k.op("mov.b64 {%s, %s}, %s" % (lo, hi, val))
    lo2 = shfl(k, "r", lo, how, lane_arg, clamp)
    hi2 = shfl(k, "r", hi, how, lane_arg, clamp)
    return k.rd("mov.b64", "{%s, %s}" % (lo2, hi2))


class Row:
    """The registers one row's passes share."""


def each_quad(k, R, dt, body, guard=True):
    """for each quad q = qstart + j * 1024 (UNROLL quads per trip) below qend
    (the CTA's quads: tid + its first quad .. its last):
    body(quad, [(x, key, valid, index)] * 4), valid = in range and not NaN."""
    q0 = k.reg("r")
    k.op("mov.u32 %s, %s" % (q0, R.qstart))
    with loop(k, "quads", skip=k.p("setp.ge.u32", q0, R.qend)) as lp:
        loaded = []
        for u in range(UNROLL):
            q = k.r("add.u32", q0, u * BLOCK) if u else q0
            qin = k.p("setp.lt.u32", q, R.qend)
            loaded.append((q, qin, dt.load_quad(k, R, q, qin)))
        for j, (q, qin, raws) in enumerate(loaded):
            elems = []
            i0 = k.r("shl.b32", q, "2")
            for e, raw in enumerate(raws):
                x, key = dt.decode(k, raw)
                valid = k.p("setp.num.f32", x, x)
                elems.append((x, key, valid, k.r("add.u32", i0, e) if e else i0))
            loaded[j] = (q, qin, elems)
        for q, qin, elems in loaded:
            if not guard:      # out-of-range lanes are not valid: no branch, the warp stays whole
                body(q, elems)
                continue
            with skip_if(k, "!" + qin, "quad_out"):
                body(q, elems)
        k.op("add.u32 %s, %s, %d" % (q0, q0, UNROLL * BLOCK))
        lp.again(k.p("setp.lt.u32", q0, R.qend))


def argmax_combine(k, a, b):
    """a = better of (score, index, extra) a and b: larger score, then lower
    index; index NONE is empty."""
    bv, bi, bx = b
    av, ai, ax = a
    a_none = k.p("setp.eq.u32", ai, NONE)
    b_some = k.p("setp.ne.u32", bi, NONE)
    gt = k.p("setp.gt.f32", bv, av)
    eq = k.p("setp.eq.f32", bv, av)
    lo = k.p("setp.lt.u32", bi, ai)
    t = k.p("and.pred", eq, lo)
    t = k.p("or.pred", t, gt)
    t = k.p("or.pred", t, a_none)
    take = k.p("and.pred", t, b_some)
    k.op("selp.f32 %s, %s, %s, %s" % (av, bv, av, take))
    k.op("selp.b32 %s, %s, %s, %s" % (ai, bi, ai, take))
    k.op("selp.f32 %s, %s, %s, %s" % (ax, bx, ax, take))


def block_argmax(k, R, best):
    """Reduces best (score, index, extra) over the CTA; every thread gets the
    result (through s_bc)."""
    v, i, x = best
    for m in (16, 8, 4, 2, 1):
        argmax_combine(k, best, (shfl(k, "f", v, "bfly", m, "0x1f"), shfl(k, "r", i, "bfly", m, "0x1f"),
                                 shfl(k, "f", x, "bfly", m, "0x1f")))
    with skip_if(k, k.p("setp.ne.u32", R.lane, 0), "red_w"):
        a = k.r("add.u32", R.s_red, k.r("shl.b32", R.warp, "4"))
        k.op("st.shared.v2.f32 [%s], {%s, %s}" % (a, v, x))
        k.op("st.shared.u32 [%s+8], %s" % (a, i))
    bar(k)
    with skip_if(k, k.p("setp.ne.u32", R.warp, 0), "red_b"):
        a = k.r("add.u32", R.s_red, k.r("shl.b32", R.lane, "4"))
        k.op("ld.shared.v2.f32 {%s, %s}, [%s]" % (v, x, a))
        k.op("ld.shared.u32 %s, [%s+8]" % (i, a))
        for m in (16, 8, 4, 2, 1):
            argmax_combine(k, best, (shfl(k, "f", v, "bfly", m, "0x1f"), shfl(k, "r", i, "bfly", m, "0x1f"),
                                     shfl(k, "f", x, "bfly", m, "0x1f")))
        with skip_if(k, k.p("setp.ne.u32", R.lane, 0), "red_bc"):
            k.op("st.shared.v2.f32 [s_bc], {%s, %s}" % (v, x))
            k.op("st.shared.u32 [s_bc+8], %s" % i)
    bar(k)
    k.op("ld.shared.v2.f32 {%s, %s}, [s_bc]" % (v, x))
    k.op("ld.shared.u32 %s, [s_bc+8]" % i)
    bar(k)


def block_sum_f32(k, R, s):
    for m in (16, 8, 4, 2, 1):
        k.op("add.f32 %s, %s, %s" % (s, s, shfl(k, "f", s, "bfly", m, "0x1f")))
    with skip_if(k, k.p("setp.ne.u32", R.lane, 0), "sum_w"):
        k.op("st.shared.f32 [%s], %s" % (k.r("add.u32", R.s_scan, k.r("shl.b32", R.warp, "2")), s))
    bar(k)
    k.op("ld.shared.f32 %s, [%s]" % (s, k.r("add.u32", R.s_scan, k.r("shl.b32", R.lane, "2"))))
    for m in (16, 8, 4, 2, 1):
        k.op("add.f32 %s, %s, %s" % (s, s, shfl(k, "f", s, "bfly", m, "0x1f")))
    bar(k)


def block_scan_u64(k, R, v):
    """(exclusive prefix of v in thread order, total over the CTA)."""
    inc = k.rd("mov.b64", v)
    for d in (1, 2, 4, 8, 16):
        o = shfl64(k, inc, "up", d, "0")
        ok = k.p("setp.ge.u32", R.lane, d)
        k.op("@%s add.u64 %s, %s, %s" % (ok, inc, inc, o))
    with skip_if(k, k.p("setp.ne.u32", R.lane, 31), "scan_w"):
        k.op("st.shared.u64 [%s], %s" % (k.r("add.u32", R.s_scan, k.r("shl.b32", R.warp, "3")), inc))
    bar(k)
    with skip_if(k, k.p("setp.ne.u32", R.warp, 0), "scan_b"):
        a = k.r("add.u32", R.s_scan, k.r("shl.b32", R.lane, "3"))
        t = k.rd("ld.shared.u64", "[%s]" % a)
        for d in (1, 2, 4, 8, 16):
            o = shfl64(k, t, "up", d, "0")
            ok = k.p("setp.ge.u32", R.lane, d)
            k.op("@%s add.u64 %s, %s, %s" % (ok, t, t, o))
        k.op("st.shared.u64 [%s], %s" % (a, t))
    bar(k)
    prev = k.rd("mov.u64", 0)
    has = k.p("setp.ne.u32", R.warp, 0)
    k.op("@%s ld.shared.u64 %s, [%s]" % (has, prev, k.r("add.u32", R.s_scan, k.r("shl.b32", k.r("sub.u32", R.warp, 1), "3"))))
    excl = k.rd("add.u64", prev, k.rd("sub.u64", inc, v))
    total = k.rd("ld.shared.u64", "[s_scan+%d]" % ((WARPS - 1) * 8))
    return excl, total


def coarse_bin(k, R, x):
    """The bin of x's log2-weight (x - max) * log2(e) / T in steps of 1/64:
    2047 holds the max, 0 everything 32 octaves or more below it (weight
    < 2^-32).  Monotone in x, and it spreads a row's values over many bins
    where the float bits' top digit piles them into a few exponents."""
    l2w = k.f("mul.rn.f32", k.f("sub.rn.f32", x, R.m), R.coef)
    d = k.r("cvt.rzi.u32.f32", k.f("mul.rn.f32", l2w, f32(-64.0)))
    return k.r("sub.u32", COARSE_BINS - 1, k.r("min.u32", d, COARSE_BINS - 1)), l2w


def fixed_of(k, w):
    """A weight w <= 1 in 1.31 fixed point (a u32): sums are exact, so they
    do not depend on the order of the additions (or atomics)."""
    return k.r("cvt.rni.u32.f32", k.f("mul.rn.f32", w, f32(2147483648.0)))


def fixed_mass(k, l2w):
    """The weight 2^l2w in 1.31 fixed point."""
    return fixed_of(k, k.f("ex2.approx.ftz.f32", l2w))


def pick_bin(k, R, hist, nb, mass, rem, first, target_of, done):
    """Scans the histogram from the top: the bin where the running count /
    mass reaches rem; rem becomes the rest inside that bin.  Returns the bin
    (a register every thread holds).  first: sets rem = target_of(total) and
    leaves (to done) when the target is above the total."""
    bpt = max(1, nb // BLOCK)
    vals = []
    local = k.rd("mov.u64", 0)
    owns = k.p("setp.lt.u32", k.r("mul.lo.u32", R.tid, bpt), nb)
    for j in range(bpt):
        rank = k.r("add.u32", k.r("mul.lo.u32", R.tid, bpt), j)
        b = k.r("sub.u32", nb - 1, rank)
        a = k.r("add.u32", hist, k.r("shl.b32", b, 2))
        c = k.rd("mov.u64", 0)
        if mass:
            lo, hi = k.r("mov.u32", 0), k.r("mov.u32", 0)
            k.op("@%s ld.shared.u32 %s, [%s]" % (owns, lo, a))
            k.op("@%s ld.shared.u32 %s, [%s+%d]" % (owns, hi, a, MASS_HI))
            k.op("mov.b64 %s, {%s, %s}" % (c, lo, hi))
        else:
            c32 = k.r("mov.u32", 0)
            k.op("@%s ld.shared.u32 %s, [%s]" % (owns, c32, a))
            k.op("cvt.u64.u32 %s, %s" % (c, c32))
        k.op("add.u64 %s, %s, %s" % (local, local, c))
        vals.append((b, c))
    excl, total = block_scan_u64(k, R, local)
    if first:
        # every thread has read s_scan before the branch to done skips the
        # barriers below (the draw's sum writes s_scan next)
        bar(k)
        k.op("mov.u64 %s, %s" % (rem, target_of(total)))
        # target above the total: the filter keeps everything
        k.op("@%s bra.uni %s" % (k.p("setp.gt.u64", rem, total), done))
    above = excl
    for b, c in vals:
        hit = k.p("setp.lt.u64", above, rem)
        hit = k.p("setp.le.and.u64", rem, k.rd("add.u64", above, c), hit)
        hit = k.p("and.pred", hit, owns)
        with skip_if(k, "!" + hit, "hit"):
            k.op("st.shared.u32 [s_bc+16], %s" % b)
            k.op("st.shared.u64 [s_bc+24], %s" % above)
        above = k.rd("add.u64", above, c)
    bar(k)
    b = k.r("ld.shared.u32", "[s_bc+16]")
    ab = k.rd("ld.shared.u64", "[s_bc+24]")
    bar(k)
    k.op("sub.u64 %s, %s, %s" % (rem, rem, ab))
    return b


class Select:
    """One threshold search's pieces (radix_select composes them for one
    CTA per row; the split kernel runs them in separate launches)."""

    def __init__(self, k, R, dt, mass, thr_lo):
        self.k, self.R, self.dt, self.mass, self.thr_lo = k, R, dt, mass, thr_lo
        self.hist = R.s_hist_mass if mass else R.s_hist_cnt

    def weight(self, l2w):
        k = self.k
        return k.rd("cvt.u64.u32", fixed_mass(k, l2w)) if self.mass else k.rd("mov.u64", 1)

    def clear(self, nb):
        k, R = self.k, self.R
        for b0 in range(0, nb, BLOCK):
            with skip_if(k, k.p("setp.ge.u32", k.r("add.u32", R.tid, b0), nb), "clr"):
                a = k.r("add.u32", self.hist, k.r("shl.b32", k.r("add.u32", R.tid, b0), 2))
                k.op("st.shared.u32 [%s], 0" % a)
                if self.mass:
                    k.op("st.shared.u32 [%s+%d], 0" % (a, MASS_HI))

    def add(self, bin_, ok, l2w):
        k = self.k
        if self.mass:
            # u64 sums as (hi, lo) u32 bins: a shared u64 add is a CAS loop,
            # a u32 add is native; a wrap of lo carries one into hi
            a = k.r("add.u32", self.hist, k.r("shl.b32", bin_, 2))
            v = fixed_mass(k, l2w)
            old = k.r("mov.u32", 0)
            k.op("@%s atom.shared.add.u32 %s, [%s], %s" % (ok, old, a, v))
            carry = k.p("setp.lt.and.u32", k.r("add.u32", old, v), old, ok)
            k.op("@%s red.shared.add.u32 [%s+%d], 1" % (carry, a, MASS_HI))
            return
        k.op("@%s red.shared.add.u32 [%s], 1" % (ok, k.r("add.u32", self.hist, k.r("shl.b32", bin_, 2))))

    def counted(self, key, valid):
        return self.k.p("setp.ge.and.u32", key, self.thr_lo, valid)

    def coarse_pass(self):
        """The histogram of coarse_bin over the CTA's quads, in shared memory
        (the caller clears it and syncs first)."""
        k, R = self.k, self.R

        def coarse_body(q, elems):
            for x, key, valid, i in elems:
                cb, l2w = coarse_bin(k, R, x)
                self.add(cb, self.counted(key, valid), l2w)
        each_quad(k, R, self.dt, coarse_body)
        bar(k)

    def collect(self, cstar, store):
        """store(key, weight) for each counted element of coarse bin cstar."""
        k, R = self.k, self.R

        def collect_body(q, elems):
            for x, key, valid, i in elems:
                cb, l2w = coarse_bin(k, R, x)
                hit = k.p("setp.eq.and.u32", cb, cstar, self.counted(key, valid))
                with skip_if(k, "!" + hit, "cand"):
                    store(key, l2w)
        each_quad(k, R, self.dt, collect_body)

    def store_shared(self, key, l2w):
        k, R = self.k, self.R
        slot = k.r("atom.shared.add.u32", "[s_bc+48]", 1)
        with skip_if(k, k.p("setp.ge.u32", slot, CAND), "cand_full"):
            k.op("st.shared.u32 [%s], %s" % (k.r("add.u32", R.s_hist_cnt, k.r("shl.b32", slot, 2)), key))
            k.op("st.shared.u64 [%s], %s" % (k.r("add.u32", R.s_hist_mass, k.r("shl.b32", slot, 3)),
                                             self.weight(l2w)))

    def resolve_cands(self, ncand, rem, out_thr):
        """The candidates (keys in s_hist_cnt, u64 weights in s_hist_mass):
        the key whose weight above < rem <= above + its own."""
        k, R = self.k, self.R
        k.note("the candidates: the key whose weight above < rem <= above + its own")
        with skip_if(k, k.p("setp.ge.u32", R.tid, ncand), "cand_mine"):
            mk = k.r("ld.shared.u32", "[%s]" % k.r("add.u32", R.s_hist_cnt, k.r("shl.b32", R.tid, 2)))
            above, same = k.rd("mov.u64", 0), k.rd("mov.u64", 0)
            j = k.r("mov.u32", 0)
            with loop(k, "cand_sum") as lp:
                kj = k.r("ld.shared.u32", "[%s]" % k.r("add.u32", R.s_hist_cnt, k.r("shl.b32", j, 2)))
                wj = k.rd("ld.shared.u64", "[%s]" % k.r("add.u32", R.s_hist_mass, k.r("shl.b32", j, 3)))
                k.op("@%s add.u64 %s, %s, %s" % (k.p("setp.gt.u32", kj, mk), above, above, wj))
                k.op("@%s add.u64 %s, %s, %s" % (k.p("setp.eq.u32", kj, mk), same, same, wj))
                k.op("add.u32 %s, %s, 1" % (j, j))
                lp.again(k.p("setp.lt.u32", j, ncand))
            hit = k.p("setp.lt.u64", above, rem)
            hit = k.p("setp.le.and.u64", rem, k.rd("add.u64", above, same), hit)
            with skip_if(k, "!" + hit, "cand_hit"):
                k.op("st.shared.u32 [s_bc+40], %s" % mk)
        bar(k)
        k.op("ld.shared.u32 %s, [s_bc+40]" % out_thr)

    def fine(self, cstar, rem, out_thr, done):
        """Too many candidates: a radix select on the float key inside cstar,
        over the CTA's quads (the whole row)."""
        k, R, dt = self.k, self.R, self.dt
        k.note("too many candidates: a radix select on the float key inside c*")
        prefix = k.r("mov.u32", 0)
        for di, (shift, width) in enumerate(dt.digits):
            nb = 1 << width
            self.clear(nb)
            bar(k)
            hi_shift = shift + width

            def body(q, elems, shift=shift, width=width, hi_shift=hi_shift, di=di):
                for x, key, valid, i in elems:
                    cb, l2w = coarse_bin(k, R, x)
                    ok = k.p("setp.eq.and.u32", cb, cstar, self.counted(key, valid))
                    if di:
                        ok = k.p("setp.eq.and.u32", k.r("shr.u32", key, hi_shift),
                                 k.r("shr.u32", prefix, hi_shift), ok)
                    self.add(k.r("and.b32", k.r("shr.u32", key, shift), (1 << width) - 1), ok, l2w)
            each_quad(k, R, dt, body)
            bar(k)
            b = pick_bin(k, R, self.hist, nb, self.mass, rem, False, None, done)
            k.op("or.b32 %s, %s, %s" % (prefix, prefix, k.r("shl.b32", b, shift)))
        k.op("mov.u32 %s, %s" % (out_thr, prefix))


def radix_select(k, R, dt, mass, target_of, thr_lo, out_thr):
    """Finds the threshold key of the descending search: the key of the
    element where the running count (mass=False) or fixed-point mass
    (mass=True) from the top first reaches the target.  Elements counted:
    valid ones with key >= thr_lo.  target_of(total) gives the target
    (a u64 register) once the total is known; a target above the total
    leaves out_thr unchanged (the filter is off).

    Pass A: histogram of coarse_bin -> the bin c* that holds the target.
    Pass B: the elements of c* (key, weight) into shared memory; if they
    fit (CAND), the exact key is found there (each candidate sums the
    weights above it).  Else passes over the float key's digits, counting
    only the elements of c*."""
    rem = k.reg("rd")
    S = Select(k, R, dt, mass, thr_lo)
    done = k.label("radix_done")
    # pass A
    S.clear(COARSE_BINS)
    with skip_if(k, k.p("setp.ne.u32", R.tid, 0), "ncand0"):
        k.op("st.shared.u32 [s_bc+48], 0")
    bar(k)
    S.coarse_pass()
    cstar = pick_bin(k, R, S.hist, COARSE_BINS, mass, rem, True, target_of, done)

    # pass B: c*'s elements into shared memory (the histograms are free now)
    S.collect(cstar, S.store_shared)
    bar(k)
    ncand = k.r("ld.shared.u32", "[s_bc+48]")
    fine = k.label("radix_fine")
    k.op("@%s bra.uni %s" % (k.p("setp.gt.u32", ncand, CAND), fine))
    S.resolve_cands(ncand, rem, out_thr)
    k.op("bra.uni %s" % done)

    k.place(fine)
    S.fine(cstar, rem, out_thr, done)
    k.place(done)


def philox(k, q, seed, off):
    """Philox4x32-10 of counter (q, 0, off lo, off hi) and key (seed lo, seed hi)."""
    c = [q, k.r("mov.u32", 0), off[0], off[1]]
    key = [seed[0], seed[1]]
    for rnd in range(10):
        if rnd:
            key = [k.r("add.u32", key[0], PHILOX_W[0]), k.r("add.u32", key[1], PHILOX_W[1])]
        hi0 = k.r("mul.hi.u32", c[0], PHILOX_M[0])
        lo0 = k.r("mul.lo.u32", c[0], PHILOX_M[0])
        hi1 = k.r("mul.hi.u32", c[2], PHILOX_M[1])
        lo1 = k.r("mul.lo.u32", c[2], PHILOX_M[1])
        c = [k.r("xor.b32", k.r("xor.b32", hi1, c[1]), key[0]), lo1,
             k.r("xor.b32", k.r("xor.b32", hi0, c[3]), key[1]), lo0]
    return c


def row_ptr(k, base, row, stride):
    return k.rd("add.u64", base, k.rd("mul.lo.u64", row, stride))


def load_opt(k, R, name, kind, default):
    """A per-row parameter from an optional vector (pointer 0: absent)."""
    reg = k.reg(kind)
    k.op("mov.%s %s, %s" % ("f32" if kind == "f" else "b32", reg, default))
    ptr = R.p[name]
    present = k.p("setp.ne.u64", ptr, 0)
    a = row_ptr(k, ptr, R.row, R.p[name + "_stride"])
    k.op("@%s ld.global.%s %s, [%s]" % (present, "f32" if kind == "f" else "u32", reg, a))
    return reg, present


def write_out(k, R, token, prob, logprob):
    with skip_if(k, k.p("setp.ne.u32", R.tid, 0), "out"):
        k.op("st.global.u32 [%s], %s" % (row_ptr(k, R.p["tokens"], R.row, R.p["tokens_stride"]), token))
        for name, v in (("probs", prob), ("logprobs", logprob)):
            ptr = R.p[name]
            ok = k.p("setp.ne.u64", ptr, 0)
            k.op("@%s st.global.f32 [%s], %s" % (ok, row_ptr(k, ptr, R.row, R.p[name + "_stride"]), v))


SAMPLE_PARAMS = ["logits", "logits_stride", "temperature", "temperature_stride", "top_k",
                 "top_k_stride", "top_p", "top_p_stride", "min_p", "min_p_stride", "rng",
                 "rng_stride", "tokens", "tokens_stride", "probs", "probs_stride", "logprobs",
                 "logprobs_stride"]


def setup(k, R, dt, names, row):
    """Loads the parameters and the registers every pass uses; row: the
    special register that numbers the row."""
    R.p = {}
    for p in names:
        v = k.rd("ld.param.u64", "[%s]" % p)
        if not p.endswith("_stride"):
            g = k.rd("cvta.to.global.u64", v)
            v = k.rd("selp.b64", g, 0, k.p("setp.ne.u64", v, 0))
        R.p[p] = v
    R.vocab = k.r("ld.param.u32", "[vocab]")
    R.nquads = k.r("shr.u32", k.r("add.u32", R.vocab, 3), "2")
    R.nfull = k.r("shr.u32", R.vocab, "2")
    R.tid = k.r("mov.u32", "%tid.x")
    R.lane = k.r("and.b32", R.tid, "31")
    R.warp = k.r("shr.u32", R.tid, "5")
    R.row = k.rd("cvt.u64.u32", k.r("mov.u32", row))
    R.qstart, R.qend = R.tid, R.nquads
    R.rowp = row_ptr(k, R.p["logits"], R.row, R.p["logits_stride"])
    # quads of an aligned row load whole (any row_stride stays valid)
    R.vec = k.p("setp.eq.u64", k.rd("and.b64", R.rowp, 4 * dt.esize - 1), 0)
    for sym in ("s_scan", "s_red", "s_hist_cnt", "s_hist_mass"):
        setattr(R, sym, k.r("mov.u32", sym))


def max_pass(k, R, dt):
    """(max, argmax) over the CTA's quads, every thread holding them."""
    bv, bi, bx = k.f("mov.f32", NEG_INF), k.r("mov.u32", NONE), k.f("mov.f32", ZERO)

    def max_body(q, elems):
        for x, key, valid, i in elems:
            take = k.p("setp.gt.f32", x, bv)
            take = k.p("or.pred", take, k.p("setp.eq.u32", bi, NONE))
            take = k.p("and.pred", take, valid)
            k.op("selp.f32 %s, %s, %s, %s" % (bv, x, bv, take))
            k.op("selp.b32 %s, %s, %s, %s" % (bi, i, bi, take))
    each_quad(k, R, dt, max_body)
    block_argmax(k, R, (bv, bi, bx))
    return bv, bi


def row_kind(k, R, bv, bi):
    """(temperature, stop, empty): stop holds for rows that end with the
    argmax: greedy (temperature <= 0 or NaN), a +inf logit, or no logit
    above -inf (empty)."""
    temp, _ = load_opt(k, R, "temperature", "f", ZERO)
    greedy = k.p("setp.gt.f32", temp, ZERO)      # temp > 0 samples; <= 0 and NaN: greedy
    k.op("not.pred %s, %s" % (greedy, greedy))
    empty = k.p("setp.eq.u32", bi, NONE)
    empty = k.p("or.pred", empty, k.p("setp.eq.f32", bv, NEG_INF))
    special = k.p("or.pred", empty, k.p("setp.eq.f32", bv, INF))
    return temp, k.p("or.pred", greedy, special), empty


def write_argmax(k, R, bi, empty):
    tok = k.r("selp.b32", 0, bi, k.p("setp.eq.u32", bi, NONE))
    write_out(k, R, tok, k.f("selp.f32", ZERO, ONE, empty), k.f("selp.f32", NEG_INF, ZERO, empty))


def block_sum_u64(k, R, s):
    for m in (16, 8, 4, 2, 1):
        k.op("add.u64 %s, %s, %s" % (s, s, shfl64(k, s, "bfly", m, "0x1f")))
    with skip_if(k, k.p("setp.ne.u32", R.lane, 0), "sum_w"):
        k.op("st.shared.u64 [%s], %s" % (k.r("add.u32", R.s_scan, k.r("shl.b32", R.warp, "3")), s))
    bar(k)
    k.op("ld.shared.u64 %s, [%s]" % (s, k.r("add.u32", R.s_scan, k.r("shl.b32", R.lane, "3"))))
    for m in (16, 8, 4, 2, 1):
        k.op("add.u64 %s, %s, %s" % (s, s, shfl64(k, s, "bfly", m, "0x1f")))
    bar(k)


def draw_setup(k, R):
    """(min_p clamped to [0, 1], 0 when off; seed; offset) of the row."""
    minp, has_m = load_opt(k, R, "min_p", "f", ZERO)
    m_on = k.p("setp.gt.and.f32", minp, ZERO, has_m)
    minp = k.f("min.f32", minp, ONE)
    k.op("@!%s mov.f32 %s, %s" % (m_on, minp, ZERO))
    rngp = row_ptr(k, R.p["rng"], R.row, R.p["rng_stride"])
    seed = [k.r("ld.global.u32", "[%s]" % rngp), k.r("ld.global.u32", "[%s+4]" % rngp)]
    off = [k.r("ld.global.u32", "[%s+8]" % rngp), k.r("ld.global.u32", "[%s+12]" % rngp)]
    return minp, seed, off


def draw_take(k, best, l2w, w, keep, i, r):
    """Token i's Gumbel score from its Philox word r; best = (score, token,
    log2-weight, kept mass) takes it if kept and better (lower index on ties)."""
    sv, si, sx, zsum = best
    u = k.f("fma.rn.f32", k.f("cvt.rn.f32.u32", k.r("shr.u32", r, 8)), f32(2.0 ** -24), f32(2.0 ** -25))
    e = k.f("mul.rn.f32", k.f("lg2.approx.ftz.f32", u), f32(-LN2))
    s = k.f("sub.rn.f32", l2w, k.f("lg2.approx.ftz.f32", e))
    k.op("@%s add.u64 %s, %s, %s" % (keep, zsum, zsum, k.rd("cvt.u64.u32", fixed_of(k, w))))
    take = k.p("setp.gt.f32", s, sv)
    take = k.p("or.pred", take, k.p("setp.eq.u32", si, NONE))
    take = k.p("and.pred", take, keep)
    take = k.p("and.pred", take, k.p("setp.num.f32", s, s))
    k.op("selp.f32 %s, %s, %s, %s" % (sv, s, sv, take))
    k.op("selp.b32 %s, %s, %s, %s" % (si, i, si, take))
    k.op("selp.f32 %s, %s, %s, %s" % (sx, l2w, sx, take))


def draw_pass(k, R, dt, thr_all):
    """The Gumbel-max draw over the CTA's kept tokens: (score, token, its
    log2-weight) of the best and the kept mass in 1.31 fixed point (an
    exact sum: the same bits however the row is split), over the CTA."""
    minp, seed, off = draw_setup(k, R)
    sv, si, sx = k.f("mov.f32", NEG_INF), k.r("mov.u32", NONE), k.f("mov.f32", ZERO)
    zsum = k.rd("mov.u64", 0)

    def draw_body(q, elems):
        kept = []
        any_kept = None
        for x, key, valid, i in elems:
            l2w = k.f("mul.rn.f32", k.f("sub.rn.f32", x, R.m), R.coef)
            w = k.f("ex2.approx.ftz.f32", l2w)
            keep = k.p("setp.ge.and.u32", key, thr_all, valid)
            keep = k.p("setp.ge.and.f32", w, minp, keep)
            kept.append((l2w, w, keep, i))
            any_kept = keep if any_kept is None else k.p("or.pred", any_kept, keep)
        # the filters usually keep few tokens: quads without one skip Philox
        with skip_if(k, "!" + any_kept, "none_kept"):
            rnd = philox(k, q, seed, off)
            for (l2w, w, keep, i), r in zip(kept, rnd):
                draw_take(k, (sv, si, sx, zsum), l2w, w, keep, i, r)
    each_quad(k, R, dt, draw_body)
    block_sum_u64(k, R, zsum)
    block_argmax(k, R, (sv, si, sx))
    return sv, si, sx, zsum


def write_drawn(k, R, si, sx, zsum):
    """The drawn token, its probability 2^sx / mass and log-probability."""
    z = k.f("mul.rn.f32", k.f("cvt.rn.f32.u64", zsum), f32(2.0 ** -31))
    l2p = k.f("sub.rn.f32", sx, k.f("lg2.approx.ftz.f32", z))
    write_out(k, R, si, k.f("ex2.approx.ftz.f32", l2p), k.f("mul.rn.f32", l2p, f32(LN2)))


def top_k_on(k, R):
    topk, has_k = load_opt(k, R, "top_k", "r", 0)
    return topk, k.p("setp.gt.and.s32", topk, 0, has_k)


def top_p_on(k, R):
    topp, has_p = load_opt(k, R, "top_p", "f", ONE)
    return topp, k.p("setp.lt.and.f32", topp, ONE, has_p)     # NaN and >= 1: off


def p_floor(k, thr):
    """The lowest key top-p weighs: top-k's threshold (top-p renormalised
    over what top-k kept), or every token with bit 0 of the flags parameter
    (KAIO_SAMPLING_TOP_P_OF_ROW: the mass of the whole row, candle's
    TopKThenTopP; the draw then keeps what both filters keep)."""
    of_row = k.p("setp.ne.u32", k.r("and.b32", k.r("ld.param.u32", "[flags]"), 1), 0)
    return k.r("selp.u32", 0, thr, of_row)


def p_target(k, topp):
    return lambda total: k.rd("max.u64", k.rd("cvt.rpi.u64.f64", _ptarget(k, total, topp)), 1)


def sample_kernel(dt):
    name = "kaio_sample_%s" % dt.name
    params = [(".u64", p) for p in SAMPLE_PARAMS] + [(".u32", "vocab"), (".u32", "flags")]
    doc = """
%s(%s)
One 1024-thread CTA per row (grid = rows).  Pointers of absent optional
vectors are 0; strides are in bytes.  rng: u32 [rows, 4] (seed lo, seed hi,
offset lo, offset hi).  Writes tokens (u32), and probs / logprobs if present.  flags bit 0: top-p's
mass over the whole row (KAIO_SAMPLING_TOP_P_OF_ROW).
""" % (name, ", ".join(p for _, p in params))
    k = Kernel(name, doc, params, BLOCK, shared=SHARED,
               keys={"select": "sampling", "pass": "sample", "dtype": dt.name})
    R = Row()
    setup(k, R, dt, SAMPLE_PARAMS, "%ctaid.x")

    k.note("pass 1: max and argmax")
    bv, bi = max_pass(k, R, dt)
    R.m = k.f("add.f32", bv, ZERO)      # -0 as +0, as the split kernel's packed max
    temp, stop, empty = row_kind(k, R, bv, bi)
    with skip_if(k, "!" + stop, "sampled", uni=True):
        write_argmax(k, R, bi, empty)
        k.op("ret")

    R.coef = k.f("div.rn.f32", f32(LOG2E), temp)
    k.note("pass 2: top-k threshold")
    thr = k.r("mov.u32", 0)
    topk, k_on = top_k_on(k, R)
    with skip_if(k, "!" + k_on, "no_topk", uni=True):
        radix_select(k, R, dt, False, lambda total: k.rd("cvt.u64.u32", topk), 0, thr)
    k.note("pass 3: top-p threshold over what top-k kept")
    thr_p = k.r("mov.u32", thr)
    topp, p_on = top_p_on(k, R)
    with skip_if(k, "!" + p_on, "no_topp", uni=True):
        radix_select(k, R, dt, True, p_target(k, topp), p_floor(k, thr), thr_p)
    k.note("pass 4: Gumbel-max draw over the kept tokens, and their mass")
    sv, si, sx, zsum = draw_pass(k, R, dt, k.r("max.u32", thr, thr_p))
    write_drawn(k, R, si, sx, zsum)
    k.op("ret")
    return k.text()


# The split kernel's workspace: one record of SPLIT_ROW_BYTES per row (byte
# offsets), zero before the first launch; the last CTA of a row's last
# stage zeroes its first SPLIT_RESET_BYTES again (stage 7: its first WS_HCNT,
# all it writes besides its list).  src/ops/sampling.cpp
# sizes it with the same number.
WS_MAX, WS_DRAW, WS_ZSUM, WS_REM_K, WS_REM_P = 0, 8, 16, 24, 32
WS_CSTAR_K, WS_CSTAR_P, WS_THR_K, WS_NC_K, WS_NC_P, WS_COUNT, WS_OFF_K, WS_OFF_P = (
    40, 44, 48, 52, 56, 60, 64, 68)
WS_HCNT = 128
WS_HMASS = WS_HCNT + COARSE_BINS * 4
WS_CK = WS_HMASS + COARSE_BINS * 8
WS_CPK = WS_CK + CAND * 4
WS_CPW = WS_CPK + CAND * 4
SPLIT_ROW_BYTES = WS_CPW + CAND * 8
SPLIT_RESET_BYTES = WS_CK
assert SPLIT_ROW_BYTES == 32896, "update kSplitRowBytes in src/ops/sampling.cpp"
STAGES = [(1, "max"), (2, "k_hist"), (3, "k_collect"), (4, "p_hist"), (5, "p_collect"), (6, "draw"),
          (7, "topk")]
# Stage 7 (top-k without top-p): the row's candidate tokens (u32 indices)
# where top-p's lists lie on the staged path.
FAST_CAND = BLOCK
WS_FAST = WS_CK
assert WS_FAST + FAST_CAND * 8 <= SPLIT_ROW_BYTES      # (index, key) pairs


def pack(k, v, i):
    """(order-preserving key of v, with -0 as +0) << 32 | ~i: the u64 max
    is the larger value, then the lower index, as argmax_combine; 0 is
    empty."""
    raw = k.r("mov.b32", k.f("add.f32", v, ZERO))
    key = k.r("xor.b32", raw, k.r("or.b32", k.r("shr.s32", raw, "31"), "0x80000000"))
    return k.rd("mov.b64", "{%s, %s}" % (k.r("not.b32", i), key))


def unpack(k, acc):
    """(value, index) of a packed u64; 0 gives index NONE."""
    lo, hi = k.reg("r"), k.reg("r")
    k.op("mov.b64 {%s, %s}, %s" % (lo, hi, acc))
    flip = k.r("or.b32", k.r("not.b32", k.r("shr.s32", hi, "31")), "0x80000000")
    return k.f("mov.b32", k.r("xor.b32", hi, flip)), k.r("not.b32", lo)


def ws_at(R, off):
    return "[%s+%d]" % (R.st, off)


def once(k, R, hint):
    """Thread 0 of the row's first CTA (writes of the row's state)."""
    return skip_if(k, k.p("setp.ne.u32", k.r("or.b32", R.tid, R.cta), 0), hint)


def split_gate(k, R):
    """The row's max from stage 1; returns past rows that end with the argmax."""
    m, bi = unpack(k, k.rd("ld.global.u64", ws_at(R, WS_MAX)))
    temp, stop, _ = row_kind(k, R, m, bi)
    R.m = m
    R.coef = k.f("div.rn.f32", f32(LOG2E), temp)
    return stop


def split_hist(k, R, dt, mass, thr_lo):
    """The CTA's coarse histogram, added into the row's (exact integer
    sums: the same totals in any order)."""
    S = Select(k, R, dt, mass, thr_lo)
    S.clear(COARSE_BINS)
    bar(k)
    S.coarse_pass()
    for b0 in range(0, COARSE_BINS, BLOCK):
        b = k.r("add.u32", R.tid, b0)
        a = k.r("add.u32", S.hist, k.r("shl.b32", b, 2))
        if mass:
            lo, hi = k.r("ld.shared.u32", "[%s]" % a), k.r("ld.shared.u32", "[%s+%d]" % (a, MASS_HI))
            v = k.rd("mov.b64", "{%s, %s}" % (lo, hi))
            g = k.rd("add.u64", R.st, k.rd("mul.wide.u32", b, 8))
            k.op("@%s red.global.add.u64 [%s+%d], %s" % (k.p("setp.ne.u64", v, 0), g, WS_HMASS, v))
        else:
            v = k.r("ld.shared.u32", "[%s]" % a)
            g = k.rd("add.u64", R.st, k.rd("mul.wide.u32", b, 4))
            k.op("@%s red.global.add.u32 [%s+%d], %s" % (k.p("setp.ne.u32", v, 0), g, WS_HCNT, v))


def split_collect(k, R, dt, mass, thr_lo, target_of):
    """The row's histogram -> c* and the rest inside it (the row's first CTA
    records them, or that the filter is off); c*'s counted elements of the
    CTA's quads into the row's candidate list (CAND kept, all counted)."""
    S = Select(k, R, dt, mass, thr_lo)
    for b0 in range(0, COARSE_BINS, BLOCK):
        b = k.r("add.u32", R.tid, b0)
        a = k.r("add.u32", S.hist, k.r("shl.b32", b, 2))
        if mass:
            v = k.rd("ld.global.u64", "[%s+%d]" % (k.rd("add.u64", R.st, k.rd("mul.wide.u32", b, 8)), WS_HMASS))
            lo, hi = k.reg("r"), k.reg("r")
            k.op("mov.b64 {%s, %s}, %s" % (lo, hi, v))
            k.op("st.shared.u32 [%s], %s" % (a, lo))
            k.op("st.shared.u32 [%s+%d], %s" % (a, MASS_HI, hi))
        else:
            v = k.r("ld.global.u32", "[%s+%d]" % (k.rd("add.u64", R.st, k.rd("mul.wide.u32", b, 4)), WS_HCNT))
            k.op("st.shared.u32 [%s], %s" % (a, v))
    bar(k)
    off = k.r("mov.u32", 1)
    rem = k.reg("rd")
    done = k.label("collect_done")
    cstar = pick_bin(k, R, S.hist, COARSE_BINS, mass, rem, True, target_of, done)
    k.op("mov.u32 %s, 0" % off)
    with once(k, R, "record"):
        k.op("st.global.u32 %s, %s" % (ws_at(R, WS_CSTAR_P if mass else WS_CSTAR_K), cstar))
        k.op("st.global.u64 %s, %s" % (ws_at(R, WS_REM_P if mass else WS_REM_K), rem))

    def store(key, l2w):
        slot = k.r("atom.global.add.u32", ws_at(R, WS_NC_P if mass else WS_NC_K), 1)
        with skip_if(k, k.p("setp.ge.u32", slot, CAND), "cand_full"):
            k.op("st.global.u32 [%s+%d], %s" % (k.rd("add.u64", R.st, k.rd("mul.wide.u32", slot, 4)),
                                                WS_CPK if mass else WS_CK, key))
            if mass:
                k.op("st.global.u64 [%s+%d], %s" % (k.rd("add.u64", R.st, k.rd("mul.wide.u32", slot, 8)),
                                                    WS_CPW, S.weight(l2w)))
    S.collect(cstar, store)
    k.place(done)
    with once(k, R, "record_off"):
        k.op("st.global.u32 %s, %s" % (ws_at(R, WS_OFF_P if mass else WS_OFF_K), off))


def split_resolve(k, R, dt, mass, thr_lo, out_thr):
    """The exact threshold key from the row's candidates (or, when c* held
    more than CAND, the float-digit passes over the whole row in this CTA);
    out_thr = thr_lo when the filter is off."""
    S = Select(k, R, dt, mass, thr_lo)
    k.op("mov.u32 %s, %s" % (out_thr, thr_lo))
    off = k.r("ld.global.u32", ws_at(R, WS_OFF_P if mass else WS_OFF_K))
    done = k.label("resolved")
    k.op("@%s bra.uni %s" % (k.p("setp.ne.u32", off, 0), done))
    cstar = k.r("ld.global.u32", ws_at(R, WS_CSTAR_P if mass else WS_CSTAR_K))
    rem = k.rd("ld.global.u64", ws_at(R, WS_REM_P if mass else WS_REM_K))
    n = k.r("ld.global.u32", ws_at(R, WS_NC_P if mass else WS_NC_K))
    fine = k.label("resolve_fine")
    k.op("@%s bra.uni %s" % (k.p("setp.gt.u32", n, CAND), fine))
    with skip_if(k, k.p("setp.ge.u32", R.tid, n), "cand_load"):
        key = k.r("ld.global.u32", "[%s+%d]" % (k.rd("add.u64", R.st, k.rd("mul.wide.u32", R.tid, 4)),
                                                 WS_CPK if mass else WS_CK))
        if mass:
            w = k.rd("ld.global.u64", "[%s+%d]" % (k.rd("add.u64", R.st, k.rd("mul.wide.u32", R.tid, 8)), WS_CPW))
        else:
            w = k.rd("mov.u64", 1)
        k.op("st.shared.u32 [%s], %s" % (k.r("add.u32", R.s_hist_cnt, k.r("shl.b32", R.tid, 2)), key))
        k.op("st.shared.u64 [%s], %s" % (k.r("add.u32", R.s_hist_mass, k.r("shl.b32", R.tid, 3)), w))
    bar(k)
    S.resolve_cands(n, rem, out_thr)
    k.op("bra.uni %s" % done)
    k.place(fine)
    saved = R.qstart, R.qend
    R.qstart, R.qend = R.tid, R.nquads
    S.fine(cstar, rem, out_thr, done)
    R.qstart, R.qend = saved
    k.place(done)


def count_in(k, R):
    """The row's CTAs count themselves in; all but the last return."""
    bar(k)
    with skip_if(k, k.p("setp.ne.u32", R.tid, 0), "count"):
        k.op("membar.gl")
        old = k.r("atom.global.add.u32", ws_at(R, WS_COUNT), 1)
        k.op("st.shared.u32 [s_bc+56], %s" % k.r("selp.u32", 1, 0, k.p("setp.eq.u32", old, R.nlast)))
    bar(k)
    k.op("@%s ret" % k.p("setp.eq.u32", k.r("ld.shared.u32", "[s_bc+56]"), 0))
    k.op("membar.gl")


def reset_record(k, R, upto=SPLIT_RESET_BYTES):
    """The row's last CTA zeroes the row's record for the next launch (every
    other CTA of the row is done with it): its first upto bytes."""
    bar(k)      # every thread has read the record
    for o in range(0, upto, 16 * BLOCK):
        at = k.r("add.u32", k.r("shl.b32", R.tid, 4), o)
        with skip_if(k, k.p("setp.ge.u32", at, upto), "reset"):
            k.op("st.global.v4.u32 [%s], {0, 0, 0, 0}" % k.rd("add.u64", R.st, k.rd("cvt.u64.u32", at)))
    k.op("ret")


def split_finish(k, R, dt):
    """The row's CTAs count themselves in; the last writes the row's result
    from the combined partials and zeroes the row's record for the next
    launch (every other CTA of the row is done with it)."""
    count_in(k, R)
    m, bi = unpack(k, k.rd("ld.global.cg.u64", ws_at(R, WS_MAX)))
    temp, stop, empty = row_kind(k, R, m, bi)
    drawn = k.label("drawn")
    with skip_if(k, "!" + stop, "final_argmax", uni=True):
        write_argmax(k, R, bi, empty)
        k.op("bra.uni %s" % drawn)
    R.m = m
    R.coef = k.f("div.rn.f32", f32(LOG2E), temp)
    _, si = unpack(k, k.rd("ld.global.cg.u64", ws_at(R, WS_DRAW)))
    zsum = k.rd("ld.global.cg.u64", ws_at(R, WS_ZSUM))
    sx = k.f("mov.f32", ZERO)
    with skip_if(k, k.p("setp.eq.u32", si, NONE), "no_draw"):
        # the drawn token's log2-weight, as the draw pass computed it
        raw = k.reg("r" if dt.bits == 32 else "h")
        k.op("ld.global.nc.b%d %s, [%s]" % (dt.bits, raw, k.rd("add.u64", R.rowp, k.rd("mul.wide.u32", si, dt.esize))))
        x, _ = dt.decode(k, raw)
        k.op("mul.rn.f32 %s, %s, %s" % (sx, k.f("sub.rn.f32", x, R.m), R.coef))
    write_drawn(k, R, si, sx, zsum)
    k.place(drawn)
    reset_record(k, R)


KEY_BITS = 12      # stage 7's histogram: 4096 bins in s_hist_mass
KEEP = 4           # stage 7: the largest keys each thread keeps while reading


def key_bin(k, dt, key):
    """The top KEY_BITS bits of the order-preserving key: monotone in the
    value and known without the row's max (sign, exponent, 3 mantissa bits)."""
    return k.r("shr.u32", key, dt.bits - KEY_BITS)


def fast_topk(k, R, dt):
    """Stage 7, top-k (and min-p) without top-p, in one launch.  Each CTA
    reads its quads once for the max and each thread's KEEP largest keys.
    A histogram of key_bin over those kept keys gives the bin b where their
    count from the top reaches k (all tokens when there are fewer): the
    CTA's k-th largest key is in b or above (the kept keys are some of its
    keys), and the row's is at least the CTA's, so every token top-k keeps
    is in a bin >= b.  The CTA passes those on to the row's candidates
    (token and key, so the last CTA loads no logits): a thread's kept ones,
    or, where its KEEP-th kept key is in a bin >= b too (rare), its quads
    read again by its warp.  After the first trip (the sample) a bound from the sample
    keeps most tokens out of the insertion (below).  The row's last CTA
    finds the exact threshold key among the candidates and draws over them;
    rows with top-k off or more than FAST_CAND candidates take the one-CTA
    passes over the whole row there instead (the same bits either way)."""
    nbins = 1 << KEY_BITS
    topk, k_on = top_k_on(k, R)     # loaded early: its latency hides under the read
    target = lambda total: k.rd("cvt.u64.u32", topk)

    def clear_hist():
        for b0 in range(0, nbins, BLOCK):
            a = k.r("add.u32", R.s_hist_mass, k.r("shl.b32", k.r("add.u32", R.tid, b0), 2))
            k.op("st.shared.u32 [%s], 0" % a)

    def hist_kept():
        for kj in ks:
            a = k.r("add.u32", R.s_hist_mass, k.r("shl.b32", key_bin(k, dt, kj), 2))
            k.op("@%s red.shared.add.u32 [%s], 1" % (k.p("setp.ne.u32", kj, 0), a))
    clear_hist()
    bv, bi, bx = k.f("mov.f32", NEG_INF), k.r("mov.u32", NONE), k.f("mov.f32", ZERO)
    # the thread's largest keys, in order (0: none; every valid key is above 0)
    ks = [k.r("mov.u32", 0) for _ in range(KEEP)]
    ids = [k.r("mov.u32", 0) for _ in range(KEEP)]
    # a key enters the kept ones above gate = max(ks[-1], lim); lim: below
    # the sample's bound (see below), 0 before it
    gate, lim = k.r("mov.u32", 0), k.r("mov.u32", 0)

    def max_top(q, elems):
        for x, key, valid, i in elems:
            take = k.p("setp.gt.f32", x, bv)
            take = k.p("or.pred", take, k.p("setp.eq.u32", bi, NONE))
            take = k.p("and.pred", take, valid)
            k.op("selp.f32 %s, %s, %s, %s" % (bv, x, bv, take))
            k.op("selp.b32 %s, %s, %s, %s" % (bi, i, bi, take))
            with skip_if(k, "!" + k.p("setp.gt.and.u32", key, gate, valid), "ins"):
                gts = [k.p("setp.gt.u32", key, kj) for kj in ks]
                for j in range(KEEP - 1, -1, -1):
                    k.op("selp.b32 %s, %s, %s, %s" % (ks[j], key, ks[j], gts[j]))
                    k.op("selp.b32 %s, %s, %s, %s" % (ids[j], i, ids[j], gts[j]))
                    if j:
                        k.op("selp.b32 %s, %s, %s, %s" % (ks[j], ks[j - 1], ks[j], gts[j - 1]))
                        k.op("selp.b32 %s, %s, %s, %s" % (ids[j], ids[j - 1], ids[j], gts[j - 1]))
                k.op("max.u32 %s, %s, %s" % (gate, ks[-1], lim))
    # The sample: the CTA's first UNROLL * BLOCK quads.  Their kept keys'
    # histogram gives the bin where the count from the top reaches k; that
    # many of the CTA's keys are at or above the bin's lower edge, so the
    # row's k-th largest key is too, and a later token below it can be
    # dropped (it is below the threshold, never a candidate the last CTA
    # needs): the kept ones then change rarely, where without the bound a
    # warp runs the insertion for nearly every token (some lane inserts).
    # Fewer than k kept keys in the sample (top_k > its size): no bound.
    end = R.qend
    R.qend = k.r("min.u32", end, k.r("add.u32", R.first, UNROLL * BLOCK))
    each_quad(k, R, dt, max_top)
    R.qend = end
    w_done, w_none = k.label("w_done"), k.label("w_none")
    k.op("@!%s bra.uni %s" % (k_on, w_done))
    bar(k)      # the histogram is clear
    hist_kept()
    bar(k)
    wb = pick_bin(k, R, R.s_hist_mass, nbins, False, k.reg("rd"), True, target, w_none)
    k.op("shl.b32 %s, %s, %d" % (lim, wb, dt.bits - KEY_BITS))
    k.op("max.u32 %s, %s, 1" % (lim, lim))
    k.op("sub.u32 %s, %s, 1" % (lim, lim))
    k.op("max.u32 %s, %s, %s" % (gate, ks[-1], lim))
    k.place(w_none)
    clear_hist()    # pick_bin's barriers: every thread has read it
    k.place(w_done)
    start = R.qstart
    R.qstart = k.r("add.u32", start, UNROLL * BLOCK)
    each_quad(k, R, dt, max_top)
    R.qstart = start
    bar(k)      # the histogram is clear
    hist_kept()
    bar(k)
    # each warp's max straight into the row's packed max (the u64 max is
    # order-free: the bits a block argmax first gives, without its barriers)
    for m in (16, 8, 4, 2, 1):
        argmax_combine(k, (bv, bi, bx), (shfl(k, "f", bv, "bfly", m, "0x1f"),
                                         shfl(k, "r", bi, "bfly", m, "0x1f"), bx))
    with skip_if(k, k.p("setp.ne.or.u32", R.lane, 0, k.p("setp.eq.u32", bi, NONE)), "max_out"):
        k.op("red.global.max.u64 %s, %s" % (ws_at(R, WS_MAX), pack(k, bv, bi)))
    collected = k.label("collected")
    k.op("@!%s bra.uni %s" % (k_on, collected))
    bmin = k.r("mov.u32", 0)
    rem = k.reg("rd")
    all_in = k.label("all_in")
    b = pick_bin(k, R, R.s_hist_mass, nbins, False, rem, True, target, all_in)
    k.op("mov.u32 %s, %s" % (bmin, b))
    k.place(all_in)

    def above(kj):
        return k.p("setp.ge.and.u32", key_bin(k, dt, kj), bmin, k.p("setp.ne.u32", kj, 0))
    again = above(ks[-1])
    own = k.p("not.pred", again)
    mine, cnt = [], k.r("mov.u32", 0)
    for kj in ks:
        h = k.p("and.pred", above(kj), own)
        k.op("@%s add.u32 %s, %s, 1" % (h, cnt, cnt))
        mine.append(h)
    # one slot reservation per warp, no barrier
    slot = warp_slots(k, R, cnt)
    for h, ij, kj in zip(mine, ids, ks):
        with skip_if(k, "!" + h, "own"):
            with skip_if(k, k.p("setp.ge.u32", slot, FAST_CAND), "own_full"):
                put_cand(k, R, slot, ij, kj)
            k.op("add.u32 %s, %s, 1" % (slot, slot))
    warp_reread(k, R, dt, again, bmin)
    k.place(collected)

    # count_in's barrier and thread 0's membar.gl publish every thread's
    # candidates (the fence is cumulative: the pattern of a grid-wide sync)
    count_in(k, R)
    # every load the fast draw needs, issued together (none depends on another)
    cand = get_cand(k, R)
    setup = draw_setup(k, R)
    n = k.r("ld.global.cg.u32", ws_at(R, WS_NC_K))
    m, bi = unpack(k, k.rd("ld.global.cg.u64", ws_at(R, WS_MAX)))
    temp, stop, empty = row_kind(k, R, m, bi)
    drawn = k.label("drawn")
    with skip_if(k, "!" + stop, "fast_argmax", uni=True):
        write_argmax(k, R, bi, empty)
        k.op("bra.uni %s" % drawn)
    R.m = m
    R.coef = k.f("div.rn.f32", f32(LOG2E), temp)
    fast = k.label("fast")
    k.op("@%s bra.uni %s" % (k.p("setp.le.and.u32", n, FAST_CAND, k_on), fast))
    k.note("top-k off for the row, or too many candidates: the one-CTA passes")
    saved = R.qstart, R.qend
    R.qstart, R.qend = R.tid, R.nquads
    thr = k.r("mov.u32", 0)
    with skip_if(k, "!" + k_on, "slow_k", uni=True):
        radix_select(k, R, dt, False, target, 0, thr)
    sv, si, sx, zsum = draw_pass(k, R, dt, thr)
    write_drawn(k, R, si, sx, zsum)
    k.op("bra.uni %s" % drawn)
    R.qstart, R.qend = saved
    k.place(fast)
    fast_draw(k, R, dt, n, target, cand, setup)
    k.place(drawn)
    # stage 7 writes only words below WS_HCNT besides its list (which needs
    # no reset: the list's count, below WS_HCNT, masks stale pairs)
    reset_record(k, R, WS_HCNT)


def warp_slots(k, R, cnt):
    """The first of cnt list slots for this lane, reserved with one atomic
    per warp (warp scan; the list's order does not matter: the last CTA's
    select and draw are order-free).  Every lane of the warp calls it."""
    inc = k.r("mov.u32", cnt)
    for d in (1, 2, 4, 8, 16):
        o = shfl(k, "r", inc, "up", d, "0")
        k.op("@%s add.u32 %s, %s, %s" % (k.p("setp.ge.u32", R.lane, d), inc, inc, o))
    base = k.r("mov.u32", 0)
    with skip_if(k, k.p("setp.ne.or.u32", R.lane, 31, k.p("setp.eq.u32", inc, 0)), "cand_base"):
        k.op("atom.global.add.u32 %s, %s, %s" % (base, ws_at(R, WS_NC_K), inc))
    return k.r("sub.u32", k.r("add.u32", shfl(k, "r", base, "idx", 31, "0x1f"), inc), cnt)


def warp_reread(k, R, dt, again, bmin):
    """The quads of each lane whose KEEP-th kept key reached bin bmin, read
    again by its whole warp (lane j its j-th quad: one round trip per 32
    quads, where the lane alone takes one per trip); the keys in bins >=
    bmin join the row's candidates."""
    todo = k.r("vote.sync.ballot.b32", again, "0xffffffff")
    with loop(k, "again", uni=True, skip=k.p("setp.eq.u32", todo, 0)) as lp:
        who = k.r("bfind.u32", todo)
        k.op("xor.b32 %s, %s, %s" % (todo, todo, k.r("shl.b32", 1, who)))
        # lane who's first quad, then this lane's part of its quads
        qw = k.r("add.u32", k.r("sub.u32", R.qstart, R.lane), who)
        q = k.r("add.u32", qw, k.r("shl.b32", R.lane, 10))
        with loop(k, "again_q", uni=True) as lq:
            qin = k.p("setp.lt.u32", q, R.qend)
            raws = dt.load_quad(k, R, q, qin)
            i0 = k.r("shl.b32", q, "2")
            hits, cnt = [], k.r("mov.u32", 0)
            for e, raw in enumerate(raws):
                x, key = dt.decode(k, raw)
                valid = k.p("and.pred", k.p("setp.num.f32", x, x), qin)
                h = k.p("setp.ge.and.u32", key_bin(k, dt, key), bmin, valid)
                k.op("@%s add.u32 %s, %s, 1" % (h, cnt, cnt))
                hits.append((h, k.r("add.u32", i0, e) if e else i0, key))
            slot = warp_slots(k, R, cnt)
            for h, i, key in hits:
                with skip_if(k, "!" + h, "again_hit"):
                    with skip_if(k, k.p("setp.ge.u32", slot, FAST_CAND), "again_full"):
                        put_cand(k, R, slot, i, key)
                    k.op("add.u32 %s, %s, 1" % (slot, slot))
            k.op("add.u32 %s, %s, %d" % (q, q, 32 * BLOCK))
            k.op("add.u32 %s, %s, %d" % (qw, qw, 32 * BLOCK))
            lq.again(k.p("setp.lt.u32", qw, R.qend))
        lp.again(k.p("setp.ne.u32", todo, 0))


def put_cand(k, R, slot, idx, key):
    """Candidate slot of the row's list: the token and its key (the last CTA
    needs no second load for the value)."""
    a = k.rd("add.u64", R.st, k.rd("mul.wide.u32", slot, 8))
    k.op("st.global.v2.u32 [%s+%d], {%s, %s}" % (a, WS_FAST, idx, key))


def get_cand(k, R):
    """(index, key) of candidate slot tid; slots at or past the count hold
    stale pairs, which fast_draw masks."""
    idx, key = k.reg("r"), k.reg("r")
    a = k.rd("add.u64", R.st, k.rd("mul.wide.u32", R.tid, 8))
    k.op("ld.global.cg.v2.u32 {%s, %s}, [%s+%d]" % (idx, key, a, WS_FAST))
    return idx, key


def value_of_key(k, dt, key):
    """The f32 value whose order-preserving key (DType.decode) is key: the
    same bits decode gives (every candidate is a number, not NaN)."""
    top = 1 << (dt.bits - 1)
    pos = k.r("shr.s32", k.r("shl.b32", key, 32 - dt.bits), "31")    # all ones: sign was clear
    flip = k.r("or.b32", k.r("not.b32", pos), "0x%X" % top)
    if dt.bits == 32:
        return k.f("mov.b32", k.r("xor.b32", key, flip))
    raw = k.r("and.b32", k.r("xor.b32", key, flip), "0xFFFF")
    if dt.name == "f16":
        h = k.reg("h")
        k.op("cvt.u16.u32 %s, %s" % (h, raw))
        return k.f("cvt.f32.f16", h)
    return k.f("mov.b32", k.r("shl.b32", raw, "16"))


def fast_draw(k, R, dt, n, target, cand, setup):
    """The row's last CTA, n <= FAST_CAND candidates (one a thread): the
    k-th largest key among them by a radix select over the float key's
    digits (none when there are fewer than k: then every valid token is a
    candidate and top-k keeps all), then the draw_pass arithmetic over the
    kept ones."""
    has = k.p("setp.lt.u32", R.tid, n)
    idx, key = cand
    key = k.r("selp.b32", key, 0, has)
    x = value_of_key(k, dt, key)
    has = k.p("setp.num.and.f32", x, x, has)
    S = Select(k, R, dt, False, 0)
    thr, prefix = k.r("mov.u32", 0), k.r("mov.u32", 0)
    rem = k.reg("rd")
    off = k.label("fast_off")
    for di, (shift, width) in enumerate(dt.digits):
        nb = 1 << width
        S.clear(nb)
        bar(k)
        ok = has
        if di:
            ok = k.p("setp.eq.and.u32", k.r("shr.u32", key, shift + width),
                     k.r("shr.u32", prefix, shift + width), has)
        digit = k.r("and.b32", k.r("shr.u32", key, shift), nb - 1)
        k.op("@%s red.shared.add.u32 [%s], 1" % (ok, k.r("add.u32", R.s_hist_cnt, k.r("shl.b32", digit, 2))))
        bar(k)
        b = pick_bin(k, R, R.s_hist_cnt, nb, False, rem, di == 0, target, off)
        k.op("or.b32 %s, %s, %s" % (prefix, prefix, k.r("shl.b32", b, shift)))
    k.op("mov.u32 %s, %s" % (thr, prefix))
    k.place(off)
    minp, seed, offs = setup
    best = (k.f("mov.f32", NEG_INF), k.r("mov.u32", NONE), k.f("mov.f32", ZERO), k.rd("mov.u64", 0))
    l2w = k.f("mul.rn.f32", k.f("sub.rn.f32", x, R.m), R.coef)
    w = k.f("ex2.approx.ftz.f32", l2w)
    keep = k.p("setp.ge.and.u32", key, thr, has)
    keep = k.p("setp.ge.and.f32", w, minp, keep)
    with skip_if(k, "!" + keep, "fast_kept"):
        rnd = philox(k, k.r("shr.u32", idx, 2), seed, offs)
        e = k.r("and.b32", idx, 3)
        r = rnd[3]
        for j in (2, 1, 0):
            r = k.r("selp.b32", rnd[j], r, k.p("setp.eq.u32", e, j))
        draw_take(k, best, l2w, w, keep, idx, r)
    sv, si, sx, zsum = best
    block_sum_u64(k, R, zsum)
    block_argmax(k, R, (sv, si, sx))
    write_drawn(k, R, si, sx, zsum)


def split_kernel(dt):
    name = "kaio_sample_split_%s" % dt.name
    params = [(".u64", p) for p in SAMPLE_PARAMS + ["ws"]] + [(".u32", "vocab"), (".u32", "stage"),
                                                              (".u32", "span"), (".u32", "flags")]
    doc = """
%s(%s)
A row split over several 1024-thread CTAs: grid (CTAs per row, rows); CTA c
takes the row's quads [c * span, (c + 1) * span).  One launch per stage, in
order (stream order is the sync between them): 1 max (with no temperature
vector, also the result), then as the op's features ask 2 / 3 the top-k
histogram / candidates, 4 / 5 top-p's, 6 the draw and the result; or, for
top-k without top-p, 7 alone (fast_topk; CTAs per row may be 1).  Partials
are integer sums and packed maxima combined with atomics in the row's
record of ws (SPLIT_ROW_BYTES = %d), so the result is the bits the one-CTA
kernel gives, whatever the split.  Other parameters as kaio_sample_%s.
""" % (name, ", ".join(p for _, p in params), SPLIT_ROW_BYTES, dt.name)
    k = Kernel(name, doc, params, BLOCK, shared=SHARED,
               keys={"select": "sampling", "pass": "split", "dtype": dt.name})
    R = Row()
    setup(k, R, dt, SAMPLE_PARAMS + ["ws"], "%ctaid.y")
    R.cta = k.r("mov.u32", "%ctaid.x")
    R.nlast = k.r("sub.u32", k.r("mov.u32", "%nctaid.x"), 1)
    span = k.r("ld.param.u32", "[span]")
    first = k.r("mul.lo.u32", R.cta, span)
    R.first = first
    R.qstart = k.r("add.u32", first, R.tid)
    R.qend = k.r("min.u32", k.r("add.u32", first, span), R.nquads)
    R.st = k.rd("add.u64", R.p["ws"], k.rd("mul.lo.u64", R.row, SPLIT_ROW_BYTES))
    stage = k.r("ld.param.u32", "[stage]")
    for code, what in cases(k, stage, STAGES):
        k.note("stage %d: %s" % (code, what))
        if what == "max":
            bv, bi = max_pass(k, R, dt)
            with skip_if(k, k.p("setp.ne.or.u32", R.tid, 0, k.p("setp.eq.u32", bi, NONE)), "max_out"):
                k.op("red.global.max.u64 %s, %s" % (ws_at(R, WS_MAX), pack(k, bv, bi)))
            k.op("@%s ret" % k.p("setp.ne.u64", R.p["temperature"], 0))
            split_finish(k, R, dt)
            continue
        if what == "topk":
            fast_topk(k, R, dt)
            continue
        if what == "draw":
            finish = k.label("finish")
            k.op("@%s bra.uni %s" % (split_gate(k, R), finish))
            thr = k.r("mov.u32", 0)
            _, k_on = top_k_on(k, R)
            _, p_on = top_p_on(k, R)
            k_done = k.label("k_done")
            with skip_if(k, "!" + p_on, "k_of_p", uni=True):
                k.op("ld.global.u32 %s, %s" % (thr, ws_at(R, WS_THR_K)))
                k.op("bra.uni %s" % k_done)
            with skip_if(k, "!" + k_on, "k_here", uni=True):
                split_resolve(k, R, dt, False, 0, thr)
            k.place(k_done)
            thr_p = k.r("mov.u32", thr)
            with skip_if(k, "!" + p_on, "p_here", uni=True):
                split_resolve(k, R, dt, True, p_floor(k, thr), thr_p)
            sv, si, sx, zsum = draw_pass(k, R, dt, k.r("max.u32", thr, thr_p))
            with skip_if(k, k.p("setp.ne.u32", R.tid, 0), "draw_out"):
                k.op("@%s red.global.max.u64 %s, %s" % (k.p("setp.ne.u32", si, NONE), ws_at(R, WS_DRAW),
                                                       pack(k, sv, si)))
                k.op("red.global.add.u64 %s, %s" % (ws_at(R, WS_ZSUM), zsum))
            k.place(finish)
            split_finish(k, R, dt)
            continue
        k.op("@%s ret" % split_gate(k, R))
        if what.startswith("k_"):
            topk, on = top_k_on(k, R)
            k.op("@!%s ret" % on)
            if what == "k_hist":
                split_hist(k, R, dt, False, 0)
            else:
                split_collect(k, R, dt, False, 0, lambda total: k.rd("cvt.u64.u32", topk))
        else:
            topp, on = top_p_on(k, R)
            k.op("@!%s ret" % on)
            if what == "p_hist":
                thr = k.r("mov.u32", 0)
                _, k_on = top_k_on(k, R)
                with skip_if(k, "!" + k_on, "k_first", uni=True):
                    split_resolve(k, R, dt, False, 0, thr)
                with once(k, R, "record_k"):
                    k.op("st.global.u32 %s, %s" % (ws_at(R, WS_THR_K), thr))
                split_hist(k, R, dt, True, p_floor(k, thr))
            else:
                split_collect(k, R, dt, True, p_floor(k, k.r("ld.global.u32", ws_at(R, WS_THR_K))),
                              p_target(k, topp))
        k.op("ret")
    k.op("ret")
    return k.text()


def _ptarget(k, total, topp):
    z = k.rd("cvt.rn.f64.u64", total)
    p = k.rd("cvt.f64.f32", k.f("max.f32", topp, ZERO))
    return k.rd("mul.rn.f64", z, p)


PENALTY_PARAMS = ["logits", "logits_stride", "prev", "prev_stride", "prev_lens",
                  "prev_lens_stride", "penalties", "penalties_stride", "ws", "counts"]


def penalty_kernel(dt):
    name = "kaio_sample_penalty_%s" % dt.name
    params = [(".u64", p) for p in PENALTY_PARAMS] + [(".u32", "vocab"), (".u32", "max_prev")]
    doc = """
%s(%s)
One 1024-thread CTA per row: ws[row] = f32(logits[row]), then for each distinct
previous token t in [0, vocab) of prev[row, 0 .. min(max(len, 0), max_prev)):
x = ws[t]; x = x > 0 ? x / rep : x * rep; x -= presence + frequency * count(t).
ws and counts are contiguous rows of vocab; counts is left 0 where touched.
""" % (name, ", ".join(p for _, p in params))
    k = Kernel(name, doc, params, BLOCK, keys={"select": "sampling", "pass": "penalty", "dtype": dt.name})
    P = {}
    for p in PENALTY_PARAMS:
        v = k.rd("ld.param.u64", "[%s]" % p)
        P[p] = v if p.endswith("_stride") else k.rd("cvta.to.global.u64", v)
    vocab = k.r("ld.param.u32", "[vocab]")
    max_prev = k.r("ld.param.u32", "[max_prev]")
    tid = k.r("mov.u32", "%tid.x")
    row = k.rd("cvt.u64.u32", k.r("mov.u32", "%ctaid.x"))
    src = row_ptr(k, P["logits"], row, P["logits_stride"])
    rowbytes = k.rd("mul.wide.u32", vocab, 4)
    ws = k.rd("add.u64", P["ws"], k.rd("mul.lo.u64", row, rowbytes))
    cnt = k.rd("add.u64", P["counts"], k.rd("mul.lo.u64", row, rowbytes))
    c = k.r("mov.u32", tid)
    with loop(k, "copy", skip=k.p("setp.ge.u32", c, vocab)) as lp:
        a = k.rd("add.u64", src, k.rd("mul.wide.u32", c, dt.esize))
        if dt.bits == 32:
            x = k.f("ld.global.nc.f32", "[%s]" % a)
        elif dt.name == "f16":
            x = k.f("cvt.f32.f16", k._dst("h", "ld.global.nc.b16", ["[%s]" % a]))
        else:
            x = k.f("mov.b32", k.r("shl.b32", k.r("cvt.u32.u16", k._dst("h", "ld.global.nc.b16", ["[%s]" % a])), "16"))
        k.op("st.global.f32 [%s], %s" % (k.rd("add.u64", ws, k.rd("mul.wide.u32", c, 4)), x))
        k.op("add.u32 %s, %s, %d" % (c, c, BLOCK))
        lp.again(k.p("setp.lt.u32", c, vocab))
    lens = k.r("ld.global.u32", "[%s]" % row_ptr(k, P["prev_lens"], row, P["prev_lens_stride"]))
    lens = k.r("max.s32", lens, 0)
    lens = k.r("min.u32", lens, max_prev)
    pen = row_ptr(k, P["penalties"], row, P["penalties_stride"])
    rep = k.f("ld.global.f32", "[%s]" % pen)
    pres = k.f("ld.global.f32", "[%s+4]" % pen)
    freq = k.f("ld.global.f32", "[%s+8]" % pen)
    rep_ok = k.p("setp.gt.f32", rep, ZERO)           # <= 0 or NaN: no repetition penalty
    k.op("@!%s mov.f32 %s, %s" % (rep_ok, rep, ONE))
    prevp = row_ptr(k, P["prev"], row, P["prev_stride"])

    def over_prev(step):
        j = k.r("mov.u32", tid)
        with loop(k, "prev", skip=k.p("setp.ge.u32", j, lens)) as lp:
            t = k.r("ld.global.u32", "[%s]" % k.rd("add.u64", prevp, k.rd("mul.wide.u32", j, 4)))
            inr = k.p("setp.lt.u32", t, vocab)      # negative ids are huge as u32
            with skip_if(k, "!" + inr, "bad_tok"):
                step(k.rd("add.u64", cnt, k.rd("mul.wide.u32", t, 4)),
                     k.rd("add.u64", ws, k.rd("mul.wide.u32", t, 4)))
            k.op("add.u32 %s, %s, %d" % (j, j, BLOCK))
            lp.again(k.p("setp.lt.u32", j, lens))

    bar(k)
    over_prev(lambda ca, wa: k.op("st.global.u32 [%s], 0" % ca))
    bar(k)
    over_prev(lambda ca, wa: k.op("red.global.add.u32 [%s], 1" % ca))
    bar(k)

    def apply(ca, wa):
        n = k.r("atom.global.exch.b32", "[%s]" % ca, 0)
        with skip_if(k, k.p("setp.eq.u32", n, 0), "seen"):
            x = k.f("ld.global.f32", "[%s]" % wa)
            pos = k.p("setp.gt.f32", x, ZERO)
            y = k.f("selp.f32", k.f("div.rn.f32", x, rep), k.f("mul.rn.f32", x, rep), pos)
            y = k.f("sub.rn.f32", y, k.f("fma.rn.f32", freq, k.f("cvt.rn.f32.u32", n), pres))
            k.op("st.global.f32 [%s], %s" % (wa, y))
    over_prev(apply)
    k.op("ret")
    return k.text()


def generate():
    out = [preamble(__file__)]
    for dt in DTYPES:
        out.append("\n" + sample_kernel(dt))
        out.append("\n" + split_kernel(dt))
        out.append("\n" + penalty_kernel(dt))
    return {"sampling.ptx": "".join(out)}


if __name__ == "__main__":
    sys.exit(cli.main(__file__, __doc__, generate))
