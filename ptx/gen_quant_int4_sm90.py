#!/usr/bin/env python3
"""Generate libkaio's sm_90a W4A16 prefill kernels: GPTQ weights dequantized
straight into wgmma (in registers, or into shared memory for the _ss ones),
no dequantized copy in global memory.

    python3 ptx/gen_quant_int4_sm90.py --out-dir DIR  # write DIR/quant_int4_sm90{,_k2}.ptx

Kernels: kaio_int4_mm_sm90_<dt>_m128, dt in {f16, bf16} (activations and
scales), 128 activation rows per CTA, W dequantized in the consumers'
registers (the design below); kaio_int4_mm_sm90_<dt>_m256_ss, 256 rows, whose
own warpgroup dequantizes W into shared memory for wgmma with both operands
there (ptx/quant_int4_ss.py), and kaio_int4_mm_sm90_<dt>_m256_k<s>_ss, s in
{2, 4}, whose clusters of s CTAs (1 x 1 x s, grid z = s) split K in s parts;
after the mainloops each CTA owns 1/s of the tile's rows, sends its partials
of the other parts into their owners' shared memory (distributed shared
memory, st.async completing on the owner's mbarrier) and sums and stores its
own part.  The split kernels are a module of their own
(quant_int4_sm90_split.ptx): st.async needs PTX 8.1, and drivers older than
12.1 keep the unsplit kernels.  The register kernel at 256 rows (and split)
is no longer emitted: the _ss one ran 4-7% faster (session 17); the figures
below that name 256-row tiles are the register kernel's.  The host (src/ops/quant_int4.cpp)
picks by waves x steps per CTA x step time.
Measured on the H100 (bench_quant, same runs): M = 512, N = K = 4096 54.2-54.4
-> 43.8-44.1 us (0.53x -> 0.64-0.65x cuBLAS f16) with the split 256-row tile
in place of the 128-row one when rank 0 summed and stored the whole tile;
42.1-42.4 us (0.67x) with each rank storing half.
C [M, N] = X [M, K] * W [K, N], W in the GPTQ layout of ptx/gen_quant_int4.py
(qweight u32 [K/8, N], qzeros u32 [K/g, N/8] or none (zero 8), scales dt
[K/g, N]), dequantized exactly as there: ((q ^ xmask) - (z + zoff)) rounded
once after the multiply by the scale, f32 accumulation.  The kernel computes
C^T = W^T X^T: the dequantized weight is wgmma's A operand, in registers, for
64 columns of W per consumer warpgroup; X is B, from shared memory.

  // kaio-tma: <entry> tmap_x rank=2 dims=K,M box=64,<BM> swizzle=128 dtype=<dt>
  // kaio-tma: <entry> tmap_qw rank=2 dims=N,K/8 box=128,8 swizzle=none dtype=u32
      Out-of-bounds elements read as zeros (the M, N and K tails).
  // kaio-launch: <entry> block=384 cols_per_block=128
      grid (ceil(N / 128), ceil(M / BM)), BM the tmap_x box's rows.
  Params: tmap_x, tmap_qw (.param .align 64 .b8 [128]), u64 c, ldc, sc,
  ldsc, qz (0: no qzeros, every zero 8), ldqz (row strides in elements),
  u32 m, n, k, group (g; K for one group per column), xmask, zoff,
  out_dtype (1 f32, 2 f16, 3 bf16).  Scales and zeros are plain loads (two
  per column and step, one step ahead), so they keep the decode kernel's
  alignment rules; qweight and X already meet TMA's (16-byte starts, row
  strides multiples of 16 bytes).
  Host guarantees: K % 32 == 0, g a power of two >= 32 dividing K or g = K.

Design (the register kernel; the _ss roles are in ptx/quant_int4_ss.py)
  * 384 threads: a TMA producer warpgroup (setmaxnreg.dec 24) and two wgmma
    consumer warpgroups (setmaxnreg.inc 240), each owning 64 weight columns;
    a CTA covers 128 columns of N and 128 rows of M (wgmma m64n128k16).  K steps of 64 through
    STAGES stages (X 16 KiB, 128-B swizzled; qweight 8 x 128 words; scales
    and zeros of the one or two groups a step touches come from global
    memory, loaded during the step before).
  * Per k16 step a thread builds its four A registers, rows n (g, g + 8 of
    its warp's 16) and k pairs (2t, 2t+1) and (2t+8, 2t+9): byte t of the
    words (2s, n) and (2s+1, n) holds exactly those nibbles.  One byte
    permute gathers byte t of the two rows' words, two lop3 split low and
    high nibbles under the magic's exponent byte, and one more permute per
    register makes the f16x2 (bf16x2) 1024 + q (128 + q): 5.5 instructions
    a register where shifts and masks took 10 (M = 512 0.49x/0.72x/0.67x ->
    0.53x/0.74x/0.69x cuBLAS f16 on the H100).  Then (x - (magic + z)) is
    exact and the multiply by the scale rounds once.  f16 (session 14) takes
    2 integer instructions a register: one permute copies byte t to bytes 0
    and 2, one lop3 (the signed format's xor folded in) leaves 1024 + q_lo
    and 1024 + 16 q_hi, and an fma by (1, 1/16) plus (-(1024 + z), -(64 + z))
    gives the same exact q - z; a step's group is a shift, not a division,
    the second group row is loaded only when g = 32, and a step in the group
    of the step before loads no scales or zeros: M = 512 0.68x / 0.73x /
    0.69x -> 0.81x / 0.91x / 0.86x cuBLAS f16, M = 2048 one-shot 0.70-0.72x
    -> 0.86-0.88x; ncu at M = 2048, N = K = 4096: tensor pipe 56% -> 72%
    busy (bench_quant --prefill, H100).  A third register set (a3, two steps
    in flight) measured slower again (M = 512 0.72x / 0.82x / 0.77x).
    Session 15: ncu showed the consumer warps' instruction chain setting the
    step time (SM pipe, mostly tensor, 67%; L2 31%; 2.2 warps a scheduler,
    7 cycles an issue); the scale and zero constants are now made only when
    a step's group is new (row 1 copied unless g = 32), the stage behind by
    a mask (ptxas made rem.u32 by 4 a division) and X's descriptors by
    32-bit adds: about 220 -> 180 SASS instructions a K step at g = 128;
    M = 2048 0.86-0.88x -> 0.90-0.91x, M = 512 0.80x / 0.92x / 0.86x ->
    0.83x / 0.95x / 0.91x cuBLAS f16 (bf16 at M = 2048 0.83-0.84x ->
    0.85-0.86x).  Pairs of column tiles in a cluster multicasting X (half
    the L2 reads of X) measured 1-6% slower on 8 of 18 rows (most f16
    ones), faster on 4 bf16 ones (ncu 11.2 cycles an issue against 8.1: a
    pair's CTAs wait on each other's releases), so each CTA loads its X.
    A whole K step's registers (16) are built at once, in two sets: the
    four wgmma of step i run (one commit group) while step i+1's set is
    built; wait_group 1 then frees step i-1's set and its stage.
    Session 16: the consumer loop is emitted once per stage (4 copies), so
    the stage's barriers, qweight words and X descriptors are constant
    offsets (no ring index or phase arithmetic; 2 R2UR a step for X's
    descriptors where there were 8): issued instructions -9%, M = 2048
    -2% (f16) and -4-6% (bf16), M = 512 -1-2% (f16) and -1-5% (bf16)
    (bench_quant --prefill, H100, timed in the same call as main).
    Per-warp cycles an issue went 8.15 -> 8.79: what is left is the
    dequantization's own latency chain with two consumer warps a scheduler.
  * Epilogue: element (n, m) of C^T is C[m][n]; each warpgroup transposes
    its tile through the drained stages and stores 16-byte chunks along C's
    rows (element stores when C is not 16-byte aligned, and for f32 C in
    the _ss kernels: see epilogue()).
"""

import sys

from kaio_ptx import cli, manifest, mbarrier, tma, wgmma
from kaio_ptx.params import load_params
from kaio_ptx.preamble import extern_shared, preamble
from kaio_ptx.ring import Ring
from kaio_ptx.sm90 import Kernel
import quant_int4_ss
from quant_int4_scales import MAGIC, GroupScales

OUTPUT, OUTPUT_SPLIT = "quant_int4_sm90.ptx", "quant_int4_sm90_split.ptx"
SMEM = "kaio_int4_90_smem"
BN = 128            # weight columns per CTA (64 per consumer warpgroup)
BK = 64             # K per stage
STAGES = 4
ASETS = 2           # A register sets: one K step of wgmma in flight while the next is built
PROD_REGS, CONS_REGS = 24, 240

HEADER = preamble(__file__) + extern_shared(SMEM, 1024)

TMAP = ".align 64 .b8"
MAPS = [(TMAP, "tmap_x[128]"), (TMAP, "tmap_qw[128]")]
SCALARS = [(".u64", "c"), (".u64", "ldc"), (".u64", "sc"), (".u64", "ldsc"), (".u64", "qz"),
           (".u64", "ldqz"), (".u32", "m"), (".u32", "n"), (".u32", "k"), (".u32", "group"),
           (".u32", "xmask"), (".u32", "zoff"), (".u32", "out_dtype")]

QW_BYTES = (BK // 8) * BN * 4       # 8 packed rows of 128 words
X_OFF = 0


class Tile:
    """Shared-memory layout for bm activation rows per CTA; ss: the W^T stages
    and their wfull barriers of the _ss kernels (ptx/quant_int4_ss.py) too."""

    def __init__(self, bm, ss=False, splits=1):
        self.bm = bm
        self.x_bytes = bm * 128                     # 64 k of bm rows, 128 B each
        self.qw_bytes = QW_BYTES
        self.qw_off = STAGES * self.x_bytes
        self.w_off = self.qw_off + STAGES * QW_BYTES
        self.bar_off = self.w_off + (STAGES * quant_int4_ss.W_BYTES if ss else 0)
        self.recv = 8 * (3 if ss else 2) * STAGES     # split: the other CTAs' partials have landed
        self.shared = self.bar_off + self.recv + (8 if splits > 1 else 0) + 1024


def tensor_maps(k):
    """The two tensor maps' generic addresses, prefetched."""
    maps = {}
    for _, name in MAPS:
        name = name.split("[")[0]
        maps[name] = k.rd("cvta.param.u64", k.rd("mov.b64", name))
        k.op("prefetch.tensormap [%s]" % maps[name])
    return maps


def load_step(k, T, ring, maps, base, step, n0, m0, nbytes):
    """The TMA loads of this CTA's K step `step` into the ring's stage, once
    the consumers released it; the ring moves on. nbytes: X's box and
    qweight's together (X's box has M rows where M < bm, see mm_kernel)."""
    k0 = k.r("shl.b32", step, 6)
    full = ring.acquire(nbytes, off8=ring.offset())
    tma.load(k, k.r("mad.lo.u32", ring.s, T.x_bytes, k.r("add.u32", base, X_OFF)), maps["tmap_x"], (k0, m0), full)
    tma.load(k, k.r("mad.lo.u32", ring.s, QW_BYTES, k.r("add.u32", base, T.qw_off)), maps["tmap_qw"],
             (n0, k.r("shr.u32", k0, 3)), full)
    ring.advance()


def producer(k, T, P, base, bars, n0, m0, nsteps, step0, nbytes, exit_):
    k.op("setmaxnreg.dec.sync.aligned.u32 %d" % PROD_REGS)
    tid = k.r("mov.u32", "%tid.x")
    k.op("@%s bra %s" % (k.p("setp.ne.u32", tid, 0), exit_))
    maps = tensor_maps(k)
    ring = Ring(k, bars, STAGES, 0, 8 * STAGES)
    it = k.r("mov.u32", 0)
    top = k.label("p_step")
    k.place(top)
    load_step(k, T, ring, maps, base, k.r("add.u32", step0, it), n0, m0, nbytes)
    k.op("add.u32 %s, %s, 1" % (it, it))
    k.op("@%s bra %s" % (k.p("setp.lt.u32", it, nsteps), top))
    k.op("bra.uni %s" % exit_)


def consumer(k, T, P, dt, base, bars, n0, m0, lo, nsteps, step0, exit_, splits):
    k.op("setmaxnreg.inc.sync.aligned.u32 %d" % CONS_REGS)
    # this thread's two weight columns (cols) inside the CTA's 128: rows g and g + 8 of A
    cw, warp, lane0, g, t, cols = quant_int4_ss.consumer_thread(k)
    # prmt selector: byte t of the first word to byte 0, of the second to byte 1
    bsel = k.r("or.b32", t, k.r("shl.b32", k.r("add.u32", t, 4), 4))
    hi_bytes = {"f16": "0x64640000", "bf16": "0x43430000"}[dt]   # the magic's exponent byte
    hx = "f16x2" if dt == "f16" else "bf16x2"
    gs = GroupScales(k, P, n0, cols, step0, nsteps)
    gs.registers()
    acc = k.regs("f", T.bm // 2)
    # A registers of a whole K step (4 per k16 step), ASETS sets: step i reads
    # set i % ASETS while the next set is built, with up to ASETS - 1 steps in
    # flight.  ncu at M = 4096 with two sets: tensor pipe 58% busy, the warps
    # stalled on the dequantization's dependency chains; three sets measured
    # slower still (0.62x cuBLAS against 0.71x), so two it is.
    areg = [k.regs("r", 4 * (BK // 16)) for _ in range(ASETS)]

    # the qweight words' addresses: this thread's columns in the stage-0 copy;
    # a stage and a word are immediate offsets from these (the loop below has
    # one copy per stage)
    qcol = [k.r("add.u32", k.r("add.u32", base, T.qw_off), k.r("shl.b32", c, 2)) for c in cols]

    def build(a, s, ph):
        """Waits for stage s (a constant) to fill in phase ph and dequantizes
        its weights into a, with the scales and zeros in gs.sc2, gs.zm2."""
        mbarrier.wait(k, k.r("add.u32", bars, 8 * s), ph, "c_full")

        def word(ci, row):
            return k.r("ld.shared.b32", "[%s+%d]" % (qcol[ci], s * QW_BYTES + row * BN * 4))
        if dt == "f16":
            build_f16(a, word, gs.sc2, gs.zm2)
            return
        for kk in range(BK // 16):
            r = 0 if kk < 2 else 1
            for w in range(2):
                # a_(2w + ci): column g + 8 ci, word 2kk + w; byte t of each word holds its
                # nibbles (2t, 2t+1).  Both bytes into one register, low and high nibbles
                # apart under the exponent byte, then each f16x2 (bf16x2) is one byte permute
                words = [word(ci, 2 * kk + w) for ci in range(2)]
                both = k.r("xor.b32", k.r("prmt.b32", words[0], words[1], bsel), P["xmask"])
                lows = k.r("lop3.b32", both, "0x0F0F", hi_bytes, "0xEA")
                highs = k.r("lop3.b32", k.r("shr.u32", both, 4), "0x0F0F", hi_bytes, "0xEA")
                for ci, sel in ((0, "0x6420"), (1, "0x6521")):
                    x = k.r("prmt.b32", lows, highs, sel)
                    k.op("mul.rn.%s %s, %s, %s" % (hx, a[4 * kk + 2 * w + ci],
                                                   k.r("sub.rn.%s" % hx, x, gs.zm2[r, ci]), gs.sc2[r, ci]))

    # f16: a register's nibble pair (2t, 2t+1) is byte t of one word; one permute
    # puts it in bytes 0 and 2, one lop3 keeps the low nibble in the low half
    # and the high one at bits 4..7 of the high half under the magic's exponent
    # (xmask's xor folded in: f = b ? a ^ c : c, with c = magic | xmask's bits
    # there), so the halves are 1024 + q and 1024 + 16 q; one fma by (1, 1/16)
    # plus (-(1024 + z), -(64 + z)) makes q - z exactly, as the subtraction did.
    tsel = k.r("mul.lo.u32", t, "0x1111")
    nmask = "0x00F0000F"
    cmagic = k.r("or.b32", k.r("and.b32", k.r("prmt.b32", P["xmask"], P["xmask"], tsel), nmask), MAGIC["f16"])
    # f16x2 constants (no immediates there): (-1, -1), (0, 960), (1, 1/16)
    neg1, zc_hi, nib_mul = (k.r("mov.b32", c) for c in ("0xBC00BC00", "0x63800000", "0x2C003C00"))

    def build_f16(a, word, sc2, zc):
        for kk in range(BK // 16):
            r = 0 if kk < 2 else 1
            for w in range(2):
                for ci in range(2):
                    wd = word(ci, 2 * kk + w)
                    x = k.r("lop3.b32", k.r("prmt.b32", wd, wd, tsel), nmask, cmagic, "0x6A")
                    k.op("mul.rn.f16x2 %s, %s, %s" % (a[4 * kk + 2 * w + ci],
                                                      k.r("fma.rn.f16x2", x, nib_mul, zc[r, ci]),
                                                      sc2[r, ci]))

    def next_scales(step):
        """The step to build's scales from nxt, then the loads of the one after."""
        gs.prepare(dt, neg1, zc_hi)
        gs.loads(step)

    # The loop body once per stage (STAGES copies, the A register sets
    # rotating with them): every stage's barrier, qweight and X addresses are
    # constant offsets, and the phase flips once a lap.  Session 16: ncu
    # showed half of a K step's ~170 SASS instructions outside the
    # dequantization (ring index and phase, R2UR of X's descriptors, the
    # stage's addresses).
    assert STAGES % ASETS == 0 and STAGES & (STAGES - 1) == 0

    def empty(s):
        return k.r("add.u32", bars, 8 * (STAGES + s))

    ph = k.r("mov.u32", 0)
    it = k.r("mov.u32", 0)
    gs.last_grp = k.r("mov.u32", -1)
    gs.loads(it)
    next_scales(k.r("mov.u32", 1))
    build(areg[0], 0, ph)
    top, epi = k.label("c_step"), k.label("c_epilogue")
    drains = [k.label("c_drain") for _ in range(STAGES)]
    # X's descriptors (wgmma.desc: 128-B swizzle, LBO 16, SBO 1024) by 32-bit
    # adds: the start address field (bits 0-13, shared address >> 4, at most
    # 227 KiB >> 4) never carries into the rest; base is 1024-aligned, so a
    # stage's and a k16 step's offsets add to the shifted base
    dhi = k.r("mov.b32", (1024 >> 4) | (1 << 30))
    lo0 = k.r("or.b32", k.r("shr.u32", k.r("add.u32", base, X_OFF), 4), (16 >> 4) << 16)

    def xdescs(s):
        out = []
        for kk in range(BK // 16):
            d = k.reg("rd")
            k.op("mov.b64 %s, {%s, %s}" % (d, k.r("add.u32", lo0, (s * T.x_bytes >> 4) + 2 * kk), dhi))
            out.append(d)
        return out

    k.place(top)
    for s in range(STAGES):
        # step it (it % STAGES == s) reads stage s and set s % ASETS
        a, b = areg[s % ASETS], areg[(s + 1) % ASETS]
        wgmma.fence(k)
        xd = xdescs(s)
        for kk in range(BK // 16):
            # only the first step (it = 0, stage 0) starts from zero
            scale_d = k.p("setp.ne.u32", it, 0) if kk == 0 and s == 0 else "1"
            wgmma.mma(k, dt, T.bm, acc, a[4 * kk:4 * kk + 4], xd[kk], scale_d)
        wgmma.commit(k)
        wgmma.wait(k, ASETS - 1)
        k.note("step it - %d is done: its stage goes back, its registers are free" % (ASETS - 1))
        mbarrier.arrive(k, empty((s - 1) % STAGES), k.p("and.pred", lane0, k.p("setp.ge.u32", it, ASETS - 1)))
        k.op("add.u32 %s, %s, 1" % (it, it))
        k.op("@%s bra.uni %s" % (k.p("setp.ge.u32", it, nsteps), drains[s]))
        next_scales(k.r("add.u32", it, 1))
        if s == STAGES - 1:
            k.op("xor.b32 %s, %s, 1" % (ph, ph))
        build(b, (s + 1) % STAGES, ph)
    k.op("bra.uni %s" % top)
    assert ASETS == 2, "the drains release the one stage still in flight"
    quant_int4_ss.drain(k, drains, empty, lane0, epi)
    store_tile(k, T, P, acc, n0, m0, lo, cols, t, base, cw, warp, exit_, splits)


def store_tile(k, T, P, acc, n0, m0, lo, cols, t, base, cw, warp, exit_, splits, f32_direct=False):
    if splits > 1:
        cluster_sum_and_store(k, T, P, acc, n0, m0, lo, cols, t, base, cw, warp, exit_, splits)
    else:
        epilogue(k, T, P, acc, n0, m0, lo, cols, t, base, cw, warp, f32_direct)
    k.op("bra.uni %s" % exit_)


def cluster_barrier(k):
    """Every thread of both CTAs (not .aligned: the producer warp arrives
    diverged); release/acquire orders the shared::cluster stores."""
    k.op("barrier.cluster.arrive.release")
    k.op("barrier.cluster.wait.acquire")


def cluster_sum_and_store(k, T, P, acc, n0, m0, lo, cols, t, base, cw, warp, exit_, splits):
    """Split K over a cluster of `splits` CTAs: rank r owns the tile's rows
    m0 + r * bm / splits .. (a part), sends its partial of every other part
    to that part's owner, sums the partials of its own part in rank order
    (the same bits whichever rank owns it) and stores them. The stages are
    free once every CTA passed the cluster barrier (their wgmma and TMA are
    done). The partials go by st.async into the owner's stages, each store
    completing its bytes on the owner's recv mbarrier: the owner waits for
    all of them, with no second cluster barrier (1.5-4 % faster than a
    barrier at M 512, bench/RESULTS.md)."""
    rank = k.r("mov.u32", "%cluster_ctarank")
    ctid = k.r("sub.u32", k.r("mov.u32", "%tid.x"), 128)
    nq = len(acc) // splits                     # acc[4j + v]: row 8j + ..; part r: j in [r, r + 1) * bm / 8 / splits
    quad = 256 * 16                             # one quad of acc from every consumer thread
    part = nq // 4 * quad                       # one sender's partial of one part
    assert (splits - 1) * part <= T.bar_off, "the partials must fit in the stages"
    slot = k.r("add.u32", base, k.r("shl.b32", ctid, 4))    # [sender][acc quad][256 threads][16 B]
    recv = k.r("add.u32", base, T.bar_off + T.recv)
    part_rows = T.bm // splits
    k.note("recv expects every other rank's partial before any may send it")
    mbarrier.arrive_expect_tx(k, recv, (splits - 1) * part, pred=k.p("setp.eq.u32", ctid, 0))
    cluster_barrier(k)
    ranks = [k.label("rank%d_part" % r) for r in range(1, splits)]
    for r in range(1, splits):
        k.op("@%s bra.uni %s" % (k.p("setp.eq.u32", rank, r), ranks[r - 1]))
    for r in range(splits):
        if r:
            k.place(ranks[r - 1])
        k.note("rank %d: owns rows %d.., sends the other parts to their owners" % (r, r * part_rows))
        for o in range(splits):
            if o == r:
                continue
            remote = k.r("mapa.shared::cluster.u32", slot, o)
            remote_recv = k.r("mapa.shared::cluster.u32", recv, o)
            at = (r if r < o else r - 1) * part           # the sender's slot at the owner
            for q in range(nq // 4):
                k.op("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%s+%d], {%s}, [%s]"
                     % (remote, at + q * quad, ", ".join(acc[o * nq + 4 * q:o * nq + 4 * q + 4]), remote_recv))
        mbarrier.wait(k, recv, "0", "c_recv", scope="cluster")
        mine = acc[r * nq:(r + 1) * nq]
        for q in range(nq // 4):
            quads = {}
            for src in range(splits):
                if src != r:
                    quads[src] = k.regs("f", 4)
                    k.op("ld.shared.v4.f32 {%s}, [%s+%d]" % (", ".join(quads[src]), slot,
                                                              (src if src < r else src - 1) * part + q * quad))
            for i in range(4):
                # ((p0 + p1) + p2) + ..., p_r from the registers
                # (the running sum stays out of mine[] until the last add: mine[] is a term)
                terms = [mine[4 * q + i] if src == r else quads[src][i] for src in range(splits)]
                total = terms[0]
                for n, tm in enumerate(terms[1:], 2):
                    out = mine[4 * q + i] if n == splits else k.reg("f")
                    k.op("add.f32 %s, %s, %s" % (out, total, tm))
                    total = out
        epilogue(k, Tile(part_rows), P, mine, n0, k.r("add.u32", m0, r * part_rows) if r else m0,
                 lo, cols, t, base, cw, warp, f32_direct=True)   # the split kernels are all _ss
        k.op("bra.uni %s" % exit_)


def epilogue(k, T, P, acc, n0, m0, lo, cols, t, base, cw, warp, f32_direct=False):
    """acc[4j + v]: C^T row (weight column) cols[v >> 1], column (activation
    row) m0 + 8j + 2t + (v & 1), i.e. C[m][n], stored where lo <= m < M (rows
    below lo belong to the row tile before; see mm_kernel) and n < N.  When
    C's start and row stride are 16-byte aligned the warpgroup transposes
    its 64 columns x bm rows through shared memory (the drained stages) and
    stores 16-byte chunks along rows; otherwise element stores.
    f32_direct (the _ss kernels): f32 C always takes the element stores, a
    warp's store then four whole 32-byte sectors: 1-3 % faster there than
    the transpose (bench_quant --prefill, H100, session 18), but 6-8 %
    slower in the 128-row register kernel (M 40, N 8960, K 128)."""
    is32 = k.p("setp.eq.u32", P["out_dtype"], 1)
    is16 = k.p("setp.eq.u32", P["out_dtype"], 2)
    span = k.r("sub.u32", P["m"], lo)          # row m is stored where m - lo < span (unsigned)
    sh = k.r("selp.b32", 2, 1, is32)
    ldb = k.rd("shl.b64", P["ldc"], sh)
    done, slow = k.label("stored"), k.label("slow_store")
    aligned = k.p("setp.eq.u64", k.rd("and.b64", k.rd("or.b64", P["c"], ldb), 15), 0)
    fast = k.p("and.pred", aligned, k.p("not.pred", is32)) if f32_direct else aligned
    k.op("@!%s bra.uni %s" % (fast, slow))
    k.note("both consumer warpgroups are past their last wgmma: the stages are free")
    k.op("bar.sync 1, 256")
    for esize, name in ((2, "b16"),) if f32_direct else ((4, "f32"), (2, "b16")):
        if not f32_direct:
            other = k.label("not_" + name)
            k.op("@%s bra.uni %s" % (k.p("not.pred", is32) if esize == 4 else is32, other))
        pitch = 64 * esize + 16                  # padded: the 4 rows a quad writes hit 4 bank groups
        scratch = k.r("mad.lo.u32", cw, T.bm * pitch, base)
        nl = k.r("add.u32", k.r("shl.b32", warp, 4), k.r("shr.u32", k.r("mov.u32", "%laneid"), 2))
        wbase = k.r("add.u32", scratch, k.r("add.u32", k.r("mul.lo.u32", k.r("shl.b32", t, 1), pitch),
                                              k.r("mul.lo.u32", nl, esize)))
        for j in range(T.bm // 8):
            for e in range(2):
                for h in range(2):
                    v = acc[4 * j + 2 * h + e]
                    off = (8 * j + e) * pitch + 8 * h * esize
                    if esize == 4:
                        k.op("st.shared.f32 [%s+%d], %s" % (wbase, off, v))
                    else:
                        hv = k.reg("h")
                        k.op("cvt.rn.bf16.f32 %s, %s" % (hv, v))
                        k.op("@%s cvt.rn.f16.f32 %s, %s" % (is16, hv, v))
                        k.op("st.shared.b16 [%s+%d], %s" % (wbase, off, hv))
        k.op("bar.sync %s, 128" % k.r("add.u32", cw, 2))
        cpr = 64 * esize // 16                   # 16-byte chunks per row
        rows_per_pass = 128 // cpr
        tid = k.r("and.b32", k.r("mov.u32", "%tid.x"), 127)
        chunk = k.r("and.b32", tid, cpr - 1)
        row = k.r("shr.u32", tid, cpr.bit_length() - 1)
        n = k.r("add.u32", k.r("add.u32", n0, k.r("shl.b32", cw, 6)), k.r("mul.lo.u32", chunk, 16 // esize))
        nok = k.p("setp.lt.u32", n, P["n"])
        rbase = k.r("add.u32", scratch, k.r("add.u32", k.r("mul.lo.u32", row, pitch), k.r("shl.b32", chunk, 4)))
        m = k.r("add.u32", m0, row)
        mrel = k.r("sub.u32", m, lo)
        gptr = k.rd("add.u64", P["c"], k.rd("add.u64", k.rd("mul.lo.u64", k.rd("cvt.u64.u32", m), ldb),
                                             k.rd("mul.wide.u32", n, esize)))
        step = k.rd("mul.lo.u64", ldb, rows_per_pass)
        for ps in range(T.bm // rows_per_pass):
            v4 = k.regs("r", 4)
            k.op("ld.shared.v4.b32 {%s}, [%s+%d]" % (", ".join(v4), rbase, ps * rows_per_pass * pitch))
            ok = k.p("setp.lt.and.u32", k.r("add.u32", mrel, ps * rows_per_pass), span, nok)
            k.op("@%s st.global.v4.b32 [%s], {%s}" % (ok, gptr, ", ".join(v4)))
            if ps + 1 < T.bm // rows_per_pass:
                k.op("add.u64 %s, %s, %s" % (gptr, gptr, step))
        k.op("bra.uni %s" % done)
        if not f32_direct:
            k.place(other)
    k.place(slow)
    ns = [k.r("add.u32", n0, c) for c in cols]
    nok = [k.p("setp.lt.u32", n, P["n"]) for n in ns]
    mrow = k.r("add.u32", m0, k.r("shl.b32", t, 1))
    base_n = [k.rd("add.u64", P["c"], k.rd("shl.b64", k.rd("cvt.u64.u32", n), sh)) for n in ns]
    for j in range(T.bm // 8):
        for e in range(2):
            m = k.r("add.u32", mrow, 8 * j + e)
            mok = k.p("setp.lt.u32", k.r("sub.u32", m, lo), span)
            roff = k.rd("mul.lo.u64", k.rd("cvt.u64.u32", m), ldb)
            for h in range(2):
                v = acc[4 * j + 2 * h + e]
                ok = k.p("and.pred", mok, nok[h])
                addr = k.rd("add.u64", base_n[h], roff)
                k.op("@%s st.global.f32 [%s], %s" % (k.p("and.pred", ok, is32), addr, v))
                hv = k.reg("h")
                k.op("cvt.rn.bf16.f32 %s, %s" % (hv, v))
                k.op("@%s cvt.rn.f16.f32 %s, %s" % (is16, hv, v))
                k.op("@%s st.global.b16 [%s], %s" % (k.p("and.pred", ok, k.p("not.pred", is32)), addr, hv))
    k.place(done)


def mm_kernel(dt, bm, splits=1, ss=False):
    split = splits > 1
    name = "kaio_int4_mm_sm90_%s_m%d%s%s" % (dt, bm, "_k%d" % splits if split else "", "_ss" if ss else "")
    manifest.keys(name, select="int4_mm_sm90", variant="ss" if ss else "", dtype=dt, tile_m=bm,
                  split_k=splits)
    T = Tile(bm, ss, splits)
    wfull = 16 * STAGES                           # ss: wfull[s] at bars + wfull + 8s
    k = Kernel()
    P = load_params(k, SCALARS, ("c", "sc"))
    tid = k.r("mov.u32", "%tid.x")
    base = k.smem_base(SMEM)
    bars = k.r("add.u32", base, T.bar_off)        # full[s] at + 8s, empty[s] at + 8(STAGES + s)
    n0 = k.r("shl.b32", k.r("mov.u32", "%ctaid.x"), 7)
    lo = k.r("shl.b32", k.r("mov.u32", "%ctaid.y"), bm.bit_length() - 1)
    k.note("rows: the last row tile loads the last bm rows of X and stores those from lo on (a TMA "
           "box partly past M loads slowly, bench/RESULTS.md); where M < bm it cannot")
    m0 = k.r("min.u32", lo, k.r("sub.u32", k.r("max.u32", P["m"], bm), bm))
    k.note("where M < bm the host's box for X has M rows: no box reaches past M; the stages' "
           "other rows keep stale data, which only rows never stored read")
    nbytes = k.r("add.u32", k.r("shl.b32", k.r("min.u32", P["m"], bm), 7), QW_BYTES)
    nsteps = k.r("shr.u32", k.r("add.u32", P["k"], BK - 1), 6)
    step0 = k.r("mov.u32", 0)
    if split:
        k.note("split K: CTA z of the cluster takes steps [z * q, min(nsteps, (z + 1) * q)), q = "
               "ceil(nsteps / %d); the host splits only where each CTA gets a step" % splits)
        q = k.r("shr.u32", k.r("add.u32", nsteps, splits - 1), splits.bit_length() - 1)
        k.op("mul.lo.u32 %s, %s, %s" % (step0, k.r("mov.u32", "%ctaid.z"), q))
        k.op("min.u32 %s, %s, %s" % (nsteps, k.r("sub.u32", nsteps, step0), q))
    inits = Ring.inits(STAGES, 0, 8 * STAGES, 8)
    if ss:
        inits += [(wfull + 8 * s, 128) for s in range(STAGES)]   # every dequantizing thread arrives
    if split:
        inits += [(T.recv, 1)]
    k.init_mbarriers(tid, bars, inits)

    def ss_loads():
        """load(i): the TMA loads of this CTA's step i, in order, from the thread that issues them."""
        ring = Ring(k, bars, STAGES, 0, 8 * STAGES)
        maps = tensor_maps(k)
        return lambda i: load_step(k, T, ring, maps, base, k.r("add.u32", step0, i), n0, m0, nbytes)

    exit_, cons = k.label("exit"), k.label("consumer")
    k.op("@%s bra.uni %s" % (k.p("setp.ge.u32", tid, 128), cons))
    prod_exit = k.label("producer_exit") if split else exit_
    if ss:
        quant_int4_ss.dequantizer(k, T, P, dt, base, bars, n0, nsteps, step0, STAGES, wfull)
        k.op("bra.uni %s" % prod_exit)
    else:
        producer(k, T, P, base, bars, n0, m0, nsteps, step0, nbytes, prod_exit)
    if split:
        k.place(prod_exit)
        cluster_barrier(k)
        k.op("bra.uni %s" % exit_)
    k.place(cons)
    if ss:
        def finish(acc, cw, warp, t, cols):
            store_tile(k, T, P, acc, n0, m0, lo, cols, t, base, cw, warp, exit_, splits, f32_direct=True)

        quant_int4_ss.consumer(k, T, dt, base, bars, nsteps, STAGES, wfull, finish, ss_loads())
    else:
        consumer(k, T, P, dt, base, bars, n0, m0, lo, nsteps, step0, exit_, splits)
    k.place(exit_)
    k.op("ret")
    roles = ("1 dequantizing (W to shared memory) + 2 wgmma consumer warpgroups (one thread loads)" if ss
             else "1 TMA producer + 2 wgmma consumer warpgroups")
    doc = ("%s: C = X * dequant(W), X %s [M, K], GPTQ int4 W, f32 accumulation; %d weight columns x\n"
           "%d rows per CTA, %s, %d stages of K %d."
           % (name, dt, BN, bm, roles, STAGES, BK))
    if split:
        doc += ("\nSplit K over a cluster of %d CTAs (grid z = %d): each sums and stores 1/%d of the"
                " rows, exchanging partials through DSMEM." % (splits, splits, splits))
    ann = ["// kaio-tma: %s tmap_x rank=2 dims=K,M box=64,%d swizzle=128 dtype=%s" % (name, bm, dt),
           "// kaio-tma: %s tmap_qw rank=2 dims=N,K/8 box=%d,8 swizzle=none dtype=u32" % (name, BN),
           "// kaio-launch: %s block=384 cols_per_block=%d" % (name, BN),
           "// kaio-shared-bytes: %s %d" % (name, T.shared)]
    directives = [".maxntid 384, 1, 1", ".minnctapersm 1"] + ([".reqnctapercluster 1, 1, %d" % splits] if split else [])
    return k.entry_text(name, doc, ann, MAPS + SCALARS, directives)


def generate():
    # registers at 128 rows; shared memory (_ss) at 256 rows, split or not: 4-7% faster than
    # the register kernel there (bench/RESULTS.md, session 17), which is no longer emitted
    dts = ("f16", "bf16")
    return {OUTPUT: HEADER + "".join("\n" + mm_kernel(dt, 128) for dt in dts)
            + "".join("\n" + mm_kernel(dt, 256, ss=True) for dt in dts),
            OUTPUT_SPLIT: HEADER + "".join("\n" + mm_kernel(dt, 256, splits, ss=True)
                                        for splits in (2, 4) for dt in dts)}

if __name__ == "__main__":
    sys.exit(cli.main(__file__, __doc__, generate))
