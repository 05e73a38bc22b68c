"""The activations of the streaming matvec (kquant_stream.py), made once per
CTA before its first tile, by the consumer threads:

- Q4_K/Q5_K with f16/bf16 A: the f32 sums of A's 32-value groups, kept as
  three bf16 planes for kquant_mma.min_sums_by_group, and A re-paired in
  place for the mma's B fragments (group_sums);
- Q6_K with f16/bf16 A: A re-paired in place, 16-value spans (pair_spans);
- f32 A, and Q8_0's bf16 A: each row scaled by a power of two and split
  into f16 hi + lo, paired as its format's kernel reads it (prepare_split).

`threads` is the number of consumer threads (they share the work and meet
at named barrier 1).
"""

from kaio_ptx.control import loop, skip_if
from kquant_mma import pair_words

ROWMAX_LOADS = 4           # prepare_split: 16-byte loads per thread in flight for the row maxima


def store_sum_planes(k, x, addr, plane):
    """X (f32) as three bf16 at addr, addr + plane, addr + 2 plane: hi =
    bf16(X), mid = bf16(X - hi), lo = bf16(X - hi - mid), both differences
    exact in f32: 24 bits and f32's range."""
    rest = x
    for i in range(3):
        h = k.reg("h")
        k.op("cvt.rn.bf16.f32 %s, %s" % (h, rest))
        k.op("st.shared.b16 [%s], %s" % (k.r("mad.lo.u32", plane, str(i), addr), h))
        if i < 2:
            rest = k.f("sub.rn.f32", rest, k.f("cvt.f32.bf16", h))


def sums_reader(k, arow, ngroups, t, xs, plane):
    """What kquant_mma.min_sums_by_group reads the planes with: this lane's
    addresses (activation row arow, groups 2t, 2t + 1 of block 0) in each
    plane, and its constants."""
    lane = k.r("mad.lo.u32", k.r("mad.lo.u32", arow, ngroups, k.r("shl.b32", t, "1")), "2", xs)
    return {"lanes": [lane, k.r("add.u32", lane, plane), k.r("mad.lo.u32", plane, "2", lane)],
            "t_hi": k.p("setp.ge.u32", t, "2"), "shift": k.r("shl.b32", k.r("and.b32", t, "1"), "4"),
            "b43": k.r("mov.b32", "0x43434343"), "ones": k.r("mov.b32", "0x3F803F80"),
            "neg128": k.r("mov.b32", "0xC300C300")}


def for_each_group(k, p, ngroups, ct, threads, body):
    """body(idx, ngroups, total) for groups idx = ct, ct + threads, ... <
    total = M x ngroups (ngroups a row: K / 32, or pair_spans' K / 16; the
    `threads` consumer threads share the groups of all rows of A), then a
    barrier of the consumers."""
    total = k.r("mul.lo.u32", ngroups, p["m"])
    idx = k.var_r(ct)
    with loop(k, "groups", skip=k.p("setp.ge.u32", idx, total)) as lp:
        body(idx, ngroups, total)
        k.op("add.u32 %s, %s, %d" % (idx, idx, threads))
        lp.again(k.p("setp.lt.u32", idx, total))
    k.op("bar.sync 1, %d" % threads)


def group_sums(k, p, dt, nblk, act, ct, threads, arow, t):
    """Q4_K/Q5_K with f16/bf16 A: X_j, the f32 sum of each 32-value group of
    A, made once per CTA after A lands (each sum in order, so every CTA gets
    the same bits) and stored after A as three bf16 planes [M][K / 32]; and A
    re-paired in place for the mma (Ctx.act_paired), which saves the
    consumers 4 prmt a group and block."""
    k_bytes = k.r("shl.b32", nblk, "9")
    xs = k.r("mad.lo.u32", k_bytes, p["m"], act)          # after M x K x 2 bytes
    plane = k.r("shl.b32", k.r("mul.lo.u32", k.r("shl.b32", nblk, "3"), p["m"]), "1")

    def body(idx, ngroups, total):
        src = k.r("mad.lo.u32", idx, "64", act)          # group idx: 32 values, 64 bytes
        x = None
        for q in range(4):
            w = k.regs("r", 4)
            k.op("ld.shared.v4.b32 {%s}, [%s+%d]" % (", ".join(w), src, 16 * q))
            k.op("st.shared.v4.b32 [%s+%d], {%s}"
                 % (src, 16 * q, ", ".join(pair_words(k, w[0], w[1]) + pair_words(k, w[2], w[3]))))
            for word in w:
                lo, hi = k.reg("h"), k.reg("h")
                k.op("mov.b32 {%s, %s}, %s" % (lo, hi, word))
                for half in (lo, hi):
                    v = k.f("cvt.f32.%s" % dt, half)
                    x = v if x is None else k.f("add.rn.f32", x, v)
        store_sum_planes(k, x, k.r("mad.lo.u32", idx, "2", xs), plane)

    ngroups = k.r("shl.b32", nblk, "3")
    for_each_group(k, p, ngroups, ct, threads, body)
    return sums_reader(k, arow, ngroups, t, xs, plane)


def quarter_stores(fmt):
    """Where prepare_split puts the f16 halves of a quarter of a 32-value
    group (the 8 values one lane holds, at quarter_base): (byte offset, its
    4 words as (hi 0 / lo 1, value, value)), values numbered 0-7 in the lane.
    Q8_0: [hi01 lo01 hi23 lo23][hi45 lo45 hi67 lo67], each pair's hi and lo
    words side by side, so a lane's 8-byte load takes both
    (kquant_stream_q8);
    Q4_K/Q5_K: [8 hi][8 lo] (kquant_mma.act_base), paired for the mma as
    group_sums pairs A;
    Q6_K: half of a 16-value span, paired as pair_spans pairs A: values 0-3
    are span values i, 4-7 the i + 8 (quad_exchange_spans), [4 hi][4 lo]
    32 bytes apart."""
    if fmt == "q8_0":
        return [(16 * h, [(part, 4 * h + 2 * j, 4 * h + 2 * j + 1) for j in range(2) for part in (0, 1)])
                for h in range(2)]
    if fmt == "q6_k":
        return [(32 * part, [(part, j, 4 + j) for j in range(4)]) for part in (0, 1)]
    return [(16 * part, [(part, a, b) for a, b in ((0, 2), (1, 3), (4, 6), (5, 7))]) for part in (0, 1)]


def quarter_base(k, fmt, q):
    """The byte offset of quarter q's stores in its group's 128 split bytes:
    32 q, but Q6_K's span q / 2, half q % 2: 64 (q / 2) + 16 (q % 2)."""
    if fmt == "q6_k":
        return k.r("add.u32", k.r("shl.b32", k.r("shr.u32", q, "1"), "6"), k.r("shl.b32", k.r("and.b32", q, "1"), "4"))
    return k.r("shl.b32", q, "5")


def for_each_group_by_quad(k, p, ngroups, ct, threads, body):
    """body(group, valid) for groups ct / 4, ct / 4 + threads / 4, ... <
    total = M x ngroups, four lanes a group (lane % 4 its quarter), then a
    barrier of the consumers.
    Why four: a warp's 16-byte accesses then cover 8 consecutive groups'
    quarters, 2 lanes a bank at most; with a thread a group (128 split bytes
    each) all 8 lanes of a phase hit the same banks, which cost the f32
    split 2-3.7 us at K = 14336-18944 and 6-7 us at K = 28672 (bench_kquant,
    against a build that skipped the split). Two groups a pass, their sum
    chains interleaved, measured no faster.
    The warp runs while any of its 8 groups is < total (its lanes meet in
    shuffles); a lane past the end gets `group` clamped to the last
    (addresses in range) and `valid` false: it must neither load nor store."""
    total = k.r("mul.lo.u32", ngroups, p["m"])
    last = k.r("sub.u32", total, "1")
    idx = k.var_r(k.r("shr.u32", ct, "2"))
    with loop(k, "quads", skip=k.p("setp.ge.u32", k.r("and.b32", idx, "-8"), total)) as lp:
        body(k.r("min.u32", idx, last), k.p("setp.lt.u32", idx, total))
        k.op("add.u32 %s, %s, %d" % (idx, idx, threads // 4))
        lp.again(k.p("setp.lt.u32", k.r("and.b32", idx, "-8"), total))
    k.op("bar.sync 1, %d" % threads)


def quad_sum(k, xv, lane):
    """The sum of a group's 32 values in element order, each add rounded
    (the bits every CTA must agree on), from four lanes holding 8 each in
    order: lane 0 of the quad sums its 8 and passes the sum on to lane 1, ...
    Every lane of the quad returns the whole sum."""
    quad0 = k.r("and.b32", lane, "-4")
    s = None
    for j in range(4):
        c = xv[0] if j == 0 else k.f("add.rn.f32", s, xv[0])
        for v in xv[1:]:
            c = k.f("add.rn.f32", c, v)
        s = k.f("shfl.sync.idx.b32", c, k.r("or.b32", quad0, str(j)), "31", "-1")
    return s


def quad_exchange_spans(k, xv, q):
    """Q6_K: quarters 2s and 2s + 1 hold span s's values 0-7 and 8-15; after
    the exchange quarter 2s + h holds the span's i and i + 8 for i = 4h ..
    4h + 3 (its quarter_stores' pairs), as values 0-3 and 4-7."""
    odd = k.p("setp.ne.u32", k.r("and.b32", q, "1"), "0")
    out_i, out_i8 = [], []
    for j in range(4):
        got = k.f("shfl.sync.bfly.b32", k.f("selp.b32", xv[j], xv[4 + j], odd), "1", "31", "-1")
        out_i.append(k.f("selp.b32", got, xv[j], odd))
        out_i8.append(k.f("selp.b32", xv[4 + j], got, odd))
    return out_i + out_i8


def pair_spans(k, p, nblk, act, ct, threads):
    """Q6_K with f16/bf16 A: A re-paired in place, once per CTA, each
    16-value span as (a0, a8), (a1, a9), ..., (a7, a15) (Ctx.act_paired,
    kquant_mma.act_pair), which saves the consumers 2 prmt a step."""
    def body(idx, nspans, total):
        src = k.r("mad.lo.u32", idx, "32", act)
        w = k.regs("r", 8)
        for h in range(2):
            k.op("ld.shared.v4.b32 {%s}, [%s+%d]" % (", ".join(w[4 * h:4 * h + 4]), src, 16 * h))
        words = []
        for j in range(4):
            words += pair_words(k, w[j], w[j + 4])
        for h in range(2):
            k.op("st.shared.v4.b32 [%s+%d], {%s}" % (src, 16 * h, ", ".join(words[4 * h:4 * h + 4])))

    for_each_group(k, p, k.r("shl.b32", nblk, "4"), ct, threads, body)     # K / 16 spans a row


def prepare_split(k, p, fmt, src_dt, block_elems, nblk, dst, ct, threads, lane, prep, row_scale, arow, t):
    """A (f32, or bf16 for Q8_0), made once per CTA: each row m is scaled by
    a power of two s_m (exact) that puts its largest |x| in [2^14, 2^15), and
    each scaled value x' is split into f16 hi = f16(x') and lo = f16(x' - hi)
    (22 bits; no overflow), stored at dst as its format's kernel reads it
    (quarter_stores), four lanes a 32-value group (for_each_group_by_quad).
    The mma then runs in f16, twice per step, and each output is multiplied
    by 1 / s_m (row_scale[m]) when stored. Q4_K/Q5_K: the group sums are of
    x' (quad_sum) and stored after the split A as in group_sums. Returns
    their reader, or None.

    f32 A was bulk-copied to dst and is split in place. bf16 A is read from
    global memory (twice; after the first CTA from L2), so that shared memory
    holds only its split (its raw copy beside the split did not fit at K =
    28672: Q8_0 bf16 8192 x 28672 119.0 -> 100.0 us, but 27.7 -> 29.1 at 4096
    x 14336; reading f32 A so cost 3.6-7.6 us at K = 14336 where the bulk copy
    is free, so f32 keeps it)."""
    q45 = fmt in ("q4_k", "q5_k")
    esize = 4 if src_dt == "f32" else 2
    per_load = 16 // esize
    log2_k = block_elems.bit_length() - 1
    k_elems = k.r("shl.b32", nblk, str(log2_k))
    k_loads = k.r("shr.u32", k_elems, str(per_load.bit_length() - 1))    # 16-byte loads per row
    space = "shared" if src_dt == "f32" else "global"
    if space == "global":
        lda_bytes = k.rd("mul.lo.u64", p["lda"], str(esize))

        def at(m, col_bytes):
            """Byte col_bytes of row m of A."""
            return k.rd("add.u64", k.rd("mad.lo.u64", k.rd("cvt.u64.u32", m), lda_bytes, p["a"]),
                        k.rd("cvt.u64.u32", col_bytes))
    else:
        row_bytes = k.r("mul.lo.u32", k_elems, str(esize))

        def at(m, col_bytes):
            return k.r("add.u32", k.r("mad.lo.u32", m, row_bytes, dst), col_bytes)

    def values(w):
        """The f32 values of a 16-byte load."""
        if src_dt == "f32":
            return w
        out = []
        for word in w:
            lo, hi = k.reg("h"), k.reg("h")
            k.op("mov.b32 {%s, %s}, %s" % (lo, hi, word))
            out += [k.f("cvt.f32.bf16", lo), k.f("cvt.f32.bf16", hi)]
        return out

    def load16(addr, off=0, pred=None):
        w = k.regs("f" if src_dt == "f32" else "r", 4)
        if pred:       # a load not made leaves zeros (|x| = 0 for the max)
            for r in w:
                k.op("mov.b32 %s, 0" % r)
        k.op("%s%s.v4.%s {%s}, [%s+%d]" % ("@%s " % pred if pred else "", "ld.global.nc" if space == "global" else "ld.shared",
                                           "f32" if src_dt == "f32" else "b32", ", ".join(w), addr, off))
        return values(w)

    # 1. the largest |x| of each row: per thread, per warp, then across the
    #    warps by an atomic max on the bits (|x| >= 0, NaN dropped by max.f32)
    #    into prep[m], which the first thread zeroed before the start barrier
    m = k.var_r("0")
    with loop(k, "rowmax") as rows:
        mx = k.var_f("0f00000000")
        i = k.var_r(ct)
        with loop(k, "rowmax_e", skip=k.p("setp.ge.u32", i, k_loads)) as lp:
            # ROWMAX_LOADS loads in flight per thread and pass (a global A's latency)
            vals = []
            for u in range(ROWMAX_LOADS):
                iu = k.r("add.u32", i, str(threads * u)) if u else i
                vals += load16(at(m, k.r("shl.b32", iu, "4")), pred=k.p("setp.lt.u32", iu, k_loads) if u else None)
            for v in vals:
                k.op("max.f32 %s, %s, %s" % (mx, mx, k.f("abs.f32", v)))
            k.op("add.u32 %s, %s, %d" % (i, i, threads * ROWMAX_LOADS))
            lp.again(k.p("setp.lt.u32", i, k_loads))
        for sh in (16, 8, 4, 2, 1):
            k.op("max.f32 %s, %s, %s" % (mx, mx, k.f("shfl.sync.bfly.b32", mx, str(sh), "31", "-1")))
        with skip_if(k, k.p("setp.ne.u32", lane, "0"), "rowmax_w"):
            k.op("red.shared.max.u32 [%s], %s" % (k.r("mad.lo.u32", m, "4", prep), k.r("mov.b32", mx)))
        k.op("add.u32 %s, %s, 1" % (m, m))
        rows.again(k.p("setp.lt.u32", m, p["m"]))
    k.op("bar.sync 1, %d" % threads)
    # 2. thread m < M: t = clamp(exponent(max) - 14, -126, 113); s = 2^-t
    #    (kept at prep[m], over the max), 1 / s = 2^t (row_scale[m])
    with skip_if(k, k.p("setp.ge.u32", ct, p["m"]), "scaled"):
        maxes = k.r("mad.lo.u32", ct, "4", prep)
        e = k.r("and.b32", k.r("shr.u32", k.r("ld.shared.b32", "[%s]" % maxes), "23"), "255")
        tt = k.r("max.s32", k.r("sub.s32", e, "141"), "-126")
        k.op("st.shared.b32 [%s], %s" % (maxes, k.r("shl.b32", k.r("sub.s32", "127", tt), "23")))
        k.op("st.shared.b32 [%s], %s" % (k.r("mad.lo.u32", ct, "4", row_scale), k.r("shl.b32", k.r("add.s32", tt, "127"), "23")))
    k.op("bar.sync 1, %d" % threads)
    # 3. scale, split, and (Q4_K/Q5_K) the group sums of x'
    xs = k.r("mad.lo.u32", k.r("shl.b32", k_elems, "2"), p["m"], dst)   # after M x K x 4 bytes
    plane = k.r("shl.b32", k.r("mul.lo.u32", k.r("shr.u32", k_elems, "5"), p["m"]), "1")

    q = k.r("and.b32", lane, "3")
    out_base = quarter_base(k, fmt, q)
    ngroups = k.r("shr.u32", k_elems, "5")

    def body(group, valid):
        row = k.r("div.u32", group, ngroups)
        scale = k.f("ld.shared.f32", "[%s]" % k.r("mad.lo.u32", row, "4", prep))
        col = k.r("sub.u32", group, k.r("mul.lo.u32", row, ngroups))
        src = at(row, k.r("mad.lo.u32", col, str(32 * esize), k.r("mul.lo.u32", q, str(8 * esize))))
        xv = []
        for off in range(0, 8 * esize, 16):          # this quarter's 8 values (zeros past the end)
            xv += [k.f("mul.f32", v, scale) for v in load16(src, off, pred=valid)]
        if q45:
            x = quad_sum(k, xv, lane)
            with skip_if(k, "!" + k.p("and.pred", k.p("setp.eq.u32", q, "3"), valid), "sums_stored"):
                store_sum_planes(k, x, k.r("mad.lo.u32", group, "2", xs), plane)
        if fmt == "q6_k":
            xv = quad_exchange_spans(k, xv, q)
            # a quarter's stores overwrite bytes its neighbour read; the
            # shuffles already order them, but racecheck needs the warp
            # barrier to see it
            k.op("bar.warp.sync -1")
        his, los = [], []
        for v in xv:
            h, l = k.reg("h"), k.reg("h")
            k.op("cvt.rn.f16.f32 %s, %s" % (h, v))
            k.op("cvt.rn.f16.f32 %s, %s" % (l, k.f("sub.rn.f32", v, k.f("cvt.f32.f16", h))))
            his.append(h)
            los.append(l)
        out = k.r("mad.lo.u32", group, "128", k.r("add.u32", dst, out_base))
        for off, store in quarter_stores(fmt):
            words = []
            for part, j0, j1 in store:
                wd = k.reg("r")
                k.op("mov.b32 %s, {%s, %s}" % (wd, (his, los)[part][j0], (his, los)[part][j1]))
                words.append(wd)
            k.op("@%s st.shared.v4.b32 [%s+%d], {%s}" % (valid, out, off, ", ".join(words)))

    for_each_group_by_quad(k, p, ngroups, ct, threads, body)
    return sums_reader(k, arow, ngroups, t, xs, plane) if q45 else None
