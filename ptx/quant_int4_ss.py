"""The roles of the sm_90a W4A16 prefill kernel (ptx/gen_quant_int4_sm90.py):
the weight is dequantized into shared memory by a warpgroup of its own, and
the consumers run wgmma with both operands from shared memory ("_ss").

Why: in the register-A kernel (removed in session 20) each consumer warp
dequantized its A operand in front of its wgmma; ncu put the limit there
(tensor pipe 70-72 % busy, the dequantization's dependent chain with two
consumer warps a scheduler).

  * 384 threads: a dequantizing warpgroup (DQ_REGS) and two wgmma consumer
    warpgroups (CS_REGS): DQ + 2 CS = 3 x 168, the registers a thread had
    at launch (setmaxnreg only moves them between warpgroups).  A fourth
    warpgroup for the TMA alone would leave 128 registers a thread at
    launch; ptxas wants 154 for m64n256's f32 accumulators.
  * Consumer thread 128 issues the TMA loads: every stage first, then step
    i + STAGES - 1 into step i - 1's stage once both warpgroups released it,
    while step i's wgmma runs.  (First the dequantizing warpgroup's thread 0
    issued them after publishing a step, waiting for that release: its
    whole warp waited, 1.7-1.9x slower than the register kernel; waiting
    for step i - 2's release instead (2 steps ahead) matched it.)
  * Shared memory: the tile's stages (as many as fit: gen_quant_int4_sm90.py's
    Tile) of X and qweight, and as many of W^T, 128 rows (the CTA's weight
    columns) of 64 k, 16 KiB, in wgmma's K-major 128-byte-swizzled layout
    (X's layout): row n, 16-byte chunk j at n * 128 + ((j ^ (n % 8)) * 16).
    A consumer's A is its 64 rows (+ 8 KiB), a k16 step + 32 B, as X.
    209 KiB at BM = 256 (4 stages).
  * Dequantizer thread c owns column c: per step its 8 qweight words (one a
    16-byte chunk: k 8j .. 8j + 7 of row c), dequantized exactly as
    ptx/gen_quant_int4.py defines it ((q ^ xmask) - (z + zoff) exact, times
    the scale rounded once), one 16-byte store each; lanes on consecutive rows hit all
    8 chunk positions, so the stores and the word loads are conflict-free.
    Then fence.proxy.async (generic stores read by wgmma) and an arrival on
    wfull[s] (count 128).  It needs no barrier of its own for W's reuse: it
    waits full[s] for step i + STAGES, which is only loaded after the
    consumers released step i's stage (their wgmma done with W[s] too);
    that release also orders its qweight reads (they come before its wfull
    arrival, which the consumers waited for).
  * Consumers: wait full[s] and wfull[s], four wgmma of m64 n<BM> k16 with
    descriptors for both, commit, wait_group 1, release the stage before:
    no other work in the mainloop.  The epilogues are in gen_quant_int4_sm90.py.
  Measured (bench_quant --prefill, H100 and H200): 4-8 % faster than the
  register kernel at BM = 256, split or not, f16 and bf16 (H100, M = 2048,
  N = K = 4096 99.4 against 104.5 us); ncu (H200): tensor pipe 80 % busy.
"""

from kaio_ptx import mbarrier, wgmma
from quant_int4_scales import MAGIC, GroupScales

DQ_REGS, CS_REGS = 136, 184
BN, BK = 128, 64
W_BYTES = BN * BK * 2           # a stage of W^T
ROW_BYTES = BK * 2              # one weight column's 64 k: one 128-byte swizzle row
NIB = "0x000F000F"              # bf16: nibbles of bytes 0 and 2


def dequant_word(k, dt, wd, sc2, zm2, c):
    """The four f16x2 (bf16x2) registers of one qweight word (k pairs (0, 1)
    .. (6, 7)), scales sc2 and zero constants zm2 of its group; c: the
    dtype's constants."""
    out = []
    if dt == "f16":
        # one permute copies byte p to bytes 0 and 2, one lop3 (xmask's xor
        # folded in) leaves 1024 + q_lo and 1024 + 16 q_hi, one fma by (1,
        # 1/16) plus (-(1024 + z), -(64 + z)) gives q - z exactly
        for p in range(4):
            x = k.r("lop3.b32", k.r("prmt.b32", wd, wd, "0x%x" % (0x1111 * p)), "0x00F0000F", c["cmagic"], "0x6A")
            out.append(k.r("mul.rn.f16x2", k.r("fma.rn.f16x2", x, c["nib_mul"], zm2), sc2))
        return out
    # bf16: nibbles of bytes (0, 2) and (1, 3) at the low and high positions
    # under the magic's exponent byte (xor folded in: (w & m) ^ (xmask & m |
    # magic)), then a permute pairs a byte's low and high nibble
    lo_a = k.r("lop3.b32", wd, NIB, c["c2"], "0x6A")
    hi_a = k.r("lop3.b32", k.r("shr.u32", wd, 4), NIB, c["c2"], "0x6A")
    lo_b = k.r("lop3.b32", k.r("shr.u32", wd, 8), NIB, c["c2"], "0x6A")
    hi_b = k.r("lop3.b32", k.r("shr.u32", wd, 12), NIB, c["c2"], "0x6A")
    for lo, hi, sel in ((lo_a, hi_a, "0x5410"), (lo_b, hi_b, "0x5410"), (lo_a, hi_a, "0x7632"),
                        (lo_b, hi_b, "0x7632")):
        x = k.r("prmt.b32", lo, hi, sel)
        out.append(k.r("mul.rn.bf16x2", k.r("sub.rn.bf16x2", x, zm2), sc2))
    return out


def preload(k, issuer, load, count):
    """issuer's loads of the first `count` steps (count >= 1)."""
    first = k.label("c_loaded")
    k.op("@!%s bra %s" % (issuer, first))
    j = k.r("mov.u32", 0)
    top = k.label("preload")
    k.place(top)
    load(j)
    k.op("add.u32 %s, %s, 1" % (j, j))
    k.op("@%s bra %s" % (k.p("setp.lt.u32", j, count), top))
    k.place(first)


def load_ahead(k, issuer, load, it, ahead, nsteps):
    """issuer's loads of step it + ahead, if there is one."""
    nxt = k.r("add.u32", it, ahead)
    loaded = k.label("c_loaded")
    k.op("@!%s bra %s" % (k.p("setp.lt.and.u32", nxt, nsteps, issuer), loaded))
    load(nxt)
    k.place(loaded)


def dequantizer(k, T, P, dt, base, bars, n0, nsteps, step0, stages, wfull):
    """The dequantizing warpgroup's loop (one copy per stage: constant offsets)."""
    k.op("setmaxnreg.dec.sync.aligned.u32 %d" % DQ_REGS)
    col = k.r("and.b32", k.r("mov.u32", "%tid.x"), 127)
    gs = GroupScales(k, P, n0, [col], step0, nsteps)
    gs.registers()
    c = {}
    if dt == "f16":
        c["cmagic"] = k.r("or.b32", k.r("and.b32", k.r("prmt.b32", P["xmask"], P["xmask"], 0), "0x00F0000F"),
                          MAGIC["f16"])
        neg1, zc_hi, c["nib_mul"] = (k.r("mov.b32", v) for v in ("0xBC00BC00", "0x63800000", "0x2C003C00"))
    else:
        c["c2"] = k.r("or.b32", k.r("and.b32", P["xmask"], NIB), MAGIC["bf16"])
        neg1 = zc_hi = None
    qsrc = k.r("add.u32", k.r("add.u32", base, T.qw_off), k.r("shl.b32", col, 2))
    wrow = k.r("mad.lo.u32", col, ROW_BYTES, k.r("add.u32", base, T.w_off))
    swz = k.r("and.b32", col, 7)
    wdst = [k.r("add.u32", wrow, k.r("shl.b32", k.r("xor.b32", swz, j), 4)) for j in range(BK // 8)]
    ph = k.r("mov.u32", 0)
    it = k.r("mov.u32", 0)
    gs.last_grp = k.r("mov.u32", -1)
    gs.loads(it)
    gs.prepare(dt, neg1, zc_hi)
    gs.loads(k.r("mov.u32", 1))
    top, done = k.label("d_step"), k.label("d_done")
    k.place(top)
    for s in range(stages):
        mbarrier.wait(k, k.r("add.u32", bars, 8 * s), ph, "d_full")
        # every word first: ptxas keeps loads behind earlier stores (it cannot
        # tell the addresses apart), which would chain the words one by one
        words = [k.r("ld.shared.b32", "[%s+%d]" % (qsrc, s * T.qw_bytes + j * BN * 4)) for j in range(BK // 8)]
        for j, wd in enumerate(words):
            r = j // 4      # k 0..31 in group row 0, 32..63 in row 1
            regs = dequant_word(k, dt, wd, gs.sc2[r, 0], gs.zm2[r, 0], c)
            k.op("st.shared.v4.b32 [%s+%d], {%s}" % (wdst[j], s * W_BYTES, ", ".join(regs)))
        k.note("W's stage is written: generic stores made visible to wgmma, then published")
        k.op("fence.proxy.async.shared::cta")
        mbarrier.arrive(k, k.r("add.u32", bars, wfull + 8 * s))
        k.op("add.u32 %s, %s, 1" % (it, it))
        k.op("@%s bra.uni %s" % (k.p("setp.ge.u32", it, nsteps), done))
        gs.prepare(dt, neg1, zc_hi)
        gs.loads(k.r("add.u32", it, 1))
        if s == stages - 1:
            k.op("xor.b32 %s, %s, 1" % (ph, ph))
    k.op("bra.uni %s" % top)
    k.place(done)


def consumer_thread(k):
    """A consumer thread's place: its warpgroup cw (0, 1), warp, lane 0,
    lane / 4 (g) and lane % 4 (t), and its accumulator fragment's rows:
    weight columns g and g + 8 of its warp's 16 inside the CTA's 128."""
    tid = k.r("mov.u32", "%tid.x")
    cw = k.r("sub.u32", k.r("shr.u32", tid, 7), 1)
    warp = k.r("and.b32", k.r("shr.u32", tid, 5), 3)
    lane = k.r("and.b32", tid, 31)
    lane0 = k.p("setp.eq.u32", lane, 0)
    g = k.r("shr.u32", lane, 2)
    t = k.r("and.b32", lane, 3)
    col = k.r("add.u32", k.r("shl.b32", cw, 6), k.r("add.u32", k.r("shl.b32", warp, 4), g))
    return cw, warp, lane0, g, t, [col, k.r("add.u32", col, 8)]


def drain(k, drains, empty, lane0, epi):
    """drains[s]: the loop left after the step in stage s; the last wgmma
    group completes and that stage goes back, then on to epi (placed here)."""
    for s, label in enumerate(drains):
        k.place(label)
        wgmma.wait(k, 0)
        k.note("the last step's stage goes back")
        mbarrier.arrive(k, empty(s), lane0)
        k.op("bra.uni %s" % epi)
    k.place(epi)


def consumer(k, T, dt, base, bars, nsteps, stages, wfull, finish, load):
    """A wgmma warpgroup's loop: both operands from shared memory; then
    finish(acc, cw, warp, t, cols) stores the tile.  Thread 128 issues the
    TMA loads of this CTA's step i with load(i), in order."""
    k.op("setmaxnreg.inc.sync.aligned.u32 %d" % CS_REGS)
    cw, warp, lane0, g, t, cols = consumer_thread(k)
    issuer = k.p("setp.eq.u32", k.r("mov.u32", "%tid.x"), 128)
    preload(k, issuer, load, k.r("min.u32", nsteps, stages))
    acc = k.regs("f", T.bm // 2)
    # descriptors by 32-bit adds to the start address field (shared addresses
    # >> 4 fit its 14 bits, so no carry): 128-B swizzle, LBO 16, SBO 1024;
    # the stages are 1024-aligned.  In the split kernels (clusters) base
    # carries the CTA's rank in bits 24+, which lands in the LBO field: harmless
    # here, both operands being K-major (the LBO unread; kaio_ptx/tma.py cta_window)
    dhi = k.r("mov.b32", (1024 >> 4) | (1 << 30))
    xlo = k.r("or.b32", k.r("shr.u32", base, 4), 1 << 16)
    wlo = k.r("or.b32", k.r("shr.u32", k.r("mad.lo.u32", cw, 64 * ROW_BYTES, k.r("add.u32", base, T.w_off)), 4),
              1 << 16)

    def descs(lo, off):
        out = []
        for kk in range(BK // 16):
            d = k.reg("rd")
            k.op("mov.b64 %s, {%s, %s}" % (d, k.r("add.u32", lo, (off >> 4) + 2 * kk), dhi))
            out.append(d)
        return out

    def empty(s):
        return k.r("add.u32", bars, 8 * (stages + s))

    ph = k.r("mov.u32", 0)
    it = k.r("mov.u32", 0)
    top, epi = k.label("c_step"), k.label("c_epilogue")
    drains = [k.label("c_drain") for _ in range(stages)]
    k.place(top)
    for s in range(stages):
        mbarrier.wait(k, k.r("add.u32", bars, 8 * s), ph, "c_full")
        mbarrier.wait(k, k.r("add.u32", bars, wfull + 8 * s), ph, "c_wfull")
        wgmma.fence(k)
        xd, wd = descs(xlo, s * T.x_bytes), descs(wlo, s * W_BYTES)
        for kk in range(BK // 16):
            scale_d = k.p("setp.ne.u32", it, 0) if kk == 0 and s == 0 else "1"
            wgmma.mma(k, dt, T.bm, acc, wd[kk], xd[kk], scale_d)
        wgmma.commit(k)
        wgmma.wait(k, 1)
        k.note("step it - 1 is done: its stage goes back")
        mbarrier.arrive(k, empty((s - 1) % stages), k.p("and.pred", lane0, k.p("setp.ge.u32", it, 1)))
        k.note("step it + STAGES - 1 goes where step it - 1 was")
        load_ahead(k, k.p("and.pred", issuer, k.p("setp.ge.u32", it, 1)), load, it, stages - 1, nsteps)
        k.op("add.u32 %s, %s, 1" % (it, it))
        k.op("@%s bra.uni %s" % (k.p("setp.ge.u32", it, nsteps), drains[s]))
        if s == stages - 1:
            k.op("xor.b32 %s, %s, 1" % (ph, ph))
    k.op("bra.uni %s" % top)
    drain(k, drains, empty, lane0, epi)
    finish(acc, cw, warp, t, cols)
