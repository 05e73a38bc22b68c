"""Streaming tensor-core dequant-matvec for sm_90 (used by gen_kquant.py).

kaio_kq_stream_<fmt>_<f16|bf16|f32>, fmt Q8_0, Q4_K, Q5_K or Q6_K: the same
op and parameters as kquant_mma.py's kernels (C[M, N] = A[M, K] · W^T for M
<= 8) and, for the K-quants, the same weight arithmetic, fed differently
(Q8_0's is in kquant_stream_q8.py).

Why: at M = 1 the op is a stream of weight bytes, and the register-fed
kernels of kquant_mma.py reach 49-58 % of copy bandwidth at 33 MB of weights
where a plain read of the same bytes reaches 73 % (bench_kquant's "read"
column). Their CTAs own 16 rows each, so every CTA starts cold (its first
loads wait a full DRAM latency with nothing else in flight), and a grid of
several waves leaves a ragged tail. Here one persistent CTA per SM walks its
tiles (16 rows each: tile ctaid, ctaid + nctaid, ...) and one thread streams
them into a ring of shared-memory stages with bulk copies (cp.async.bulk,
completing on an mbarrier), so the next stages' bytes are in flight while
this one is multiplied and no register holds a load.

Mapping: warp 0 is the producer (lane 0 first copies A into shared memory,
but Q8_0's bf16 A, then the stages; the other lanes exit). A stage holds 16
rows x CW blocks, one bulk copy per row (rows past N re-read row N-1; their
results are never stored). Consumer warp c (warps 1 .. CW) multiplies block
c of every stage, reading its fragments from the stage as kquant_mma.py
reads them from global memory, and arrives on the stage's "empty" mbarrier;
at the end of a tile the CW partial sums go into the slot of its last stage
(all warps done with its weights), are added in warp order (deterministic)
and stored, and only then is that slot released. Before the first tile the
consumers prepare A once per CTA (kquant_stream_act.py):
- Q4_K/Q5_K get the sums of its 32-value groups (the min part becomes one
  m16n8k8 per split per block: kquant_mma.min_sums_by_group);
- f32 A (and Q8_0's bf16 A) is scaled and split into f16 hi + lo
  (prepare_split);
- the K-quants' A is stored in the pairs the mma's B fragments take
  (Ctx.act_paired), so no step re-pairs it with prmt.

Shared memory: the ring, a 32-byte scratch, mbarriers, 8 output scales,
then A (and the group sums), whose size the host adds at launch. The ring's
depth is a kernel parameter (`stages`): MAX_STAGES where A leaves room,
else 2 (a larger A, as f32 A at K = 28672); A that does not fit beside 2
runs kquant_mma.py's kernels (f32: the CUDA-core one). A stage's row pitch
is padded to 32 mod 128 bytes, so the 8 rows a warp's lanes read land in
different banks (2 wavefronts per 8-byte vector load, the minimum). Q8_0's
16-bit loads would take one wavefront at 16 mod 128, but a bulk copy whose
shared end sits 16 bytes off its global end mod 32 asks L2 for about 10 %
more sectors (ncu, 14336 x 4096: 1.10x the weight sectors at 16 mod 128,
1.00x at 32), so Q8_0 is padded to 32 too: 1.7x the shared-load wavefronts,
0-4 % faster (bench/RESULTS.md, session 13).

Q6_K and Q8_0 blocks (210 and 34 bytes) put a row's chunk at any even
address. Bulk copies need 16-byte aligned ends, so when the host says so
(`windows`: W's rows off 32 bytes, or K not a multiple of 8 blocks) each
row's chunk is copied in the 16-byte aligned window around it, placed
(start & 16) bytes into its shared row so that both ends of the copy sit
alike mod 32, and read from (start & 31) (the host checks W starts 16-byte
aligned and its buffer holds the last window's up to 15 extra bytes, else
the fallback kernels run). A copy whose ends differ by 16 mod 32 asks L2
for split sectors: Q6_K 4096 x 14336 (rows 16 mod 32 apart) read 1.12x the
ideal sectors with plain copies, 1.03x with placed windows (ncu, 26.5 ->
24.6 us; bench/RESULTS.md, session 14). Measured (same bench, 18944 x 3584 and 3584 x 18944, K not a
multiple of 2048): Q6_K f16 39.5 -> 27.0 and 40.9 -> 28.0 us, f32 62.6 ->
29.4 and 68.2 -> 34.1 (the register-fed and CUDA-core kernels before);
aligned rows take plain copies, within 0-4 % of before (Q6_K f32 24.4 ->
25.5 us at 14336 x 4096).

Measured on the H100 (bench_kquant --matvec, M = 1, 14336 x 4096, against
the register-fed kernels in the same call; bench/RESULTS.md, session 5):
Q4_K f16 21.6 -> 18.8 us, Q5_K 24.3 -> 22.1-23.0, Q6_K 29.7 -> 24.4-24.9,
f32 A (against the CUDA-core kernels) Q4_K 31.5 -> 20.8-21.2, Q5_K 43.0 ->
24.9-25.1, Q6_K 53.5 -> 26.9-27.0; Q8_0 (against the CUDA-core kernels)
f16 32.9 -> 28.2-28.4 us, 73 % of copy. Tried and left out: 8 consumer warps
with stages of 8 blocks (Q4_K f16 21.8-22.1 against 20.5-20.9 us for 16,
before the group sums), a ring of 2 or 4 stages (Q4_K 20.0 and 21.2 against
18.7 us; 4 again in session 6, after the reduction moved: 17.5 -> 20.0), and PRMT operands loaded from shared memory so that ptxas keeps the
selectors immediate (no change), and two consumer warps per block (each a
half, stages of 8 blocks in a ring of 6, to shorten the last stage's compute
after the last bytes land: Q4_K f16 19.7 against 18.7-18.9 us, Q6_K 26.3-26.6
against 24.6-24.8).

Session 6 (same bench, against the previous library in one call): the
reduction moved from a 16 KB area of its own into the last stage's slot and
the ring's depth became a parameter (2 when 3 does not fit). Q4_K f16 14336
x 4096 18.8 -> 17.8 us, 4096 x 14336 19.9 -> 17.7; Q6_K f16 25.1 -> 23.6;
Q8_0 f16 28.3 -> 27.2. At K = 28672 (8192 x 28672) kernels that fell back
stream now: Q6_K f16 101.8 -> 72.9 us, f32 180.8 -> 88.2; Q4_K f32 105.0 ->
59.0; Q5_K f32 151.5 -> 76.4; Q8_0 f32 123.3 -> 99.1. Then A stored in mma
pairs, paired scales and d / 16 per Q6_K block: Q4_K f16 14336 x 4096 18.0
-> 17.4-17.6 us, Q6_K f32 4096 x 14336 27.5 -> 25.8-26.0. The remaining gap
to a plain read is fixed, not a rate: from 33 to 132 MB of Q4_K weights the
kernel adds 32.9 us for 99 MB (3.01 TB/s, the copy bandwidth) where the read
adds 32.1, but it pays about 6.5 us at any size against the read's 4.3 (the
last stage's arithmetic after its bytes land, the reduction, and a last
round of tiles that not every CTA has).

Session 7: the f32 split (and Q8_0's bf16 split) went from a thread a
32-value group, whose 16-byte shared accesses hit the same banks 8 lanes at
a time, to four lanes a group (kquant_stream_act.for_each_group_by_quad):
Q4_K f32 4096 x 14336 20.7-20.9 -> 18.7-18.8 us, 3584 x 18944 24.1-24.5 ->
21.4-21.5, 8192 x 28672 56.9 -> 52.6; Q8_0 f32 8192 x 28672 99.2-99.4 ->
93.7-94.2, 3584 x 18944 35.3-36.0 -> 32.4-32.7 (two interleaved runs).
"""

import collections

from kaio_ptx import mbarrier
from kaio_ptx.grid_dep import dependent_launch
from kaio_ptx.control import if_else, loop, skip_if
from kaio_ptx.ring import Ring
from kaio_ptx.sm90 import SHARED_LIMIT
import kquant_stream_act as act_prep
import kquant_stream_q8 as q8
from kquant_mma import BLOCK_BYTES, BLOCK_ELEMS, UNITS_PER_BLOCK, Ctx, compute_block, load_block, store_row_sums

FORMATS = ("q8_0", "q4_k", "q5_k", "q6_k")
# per format: block bytes, values per block, blocks per consumer warp in a
# stage, and the row pitch's offset mod 128 (8 rows' lanes in distinct banks:
# 8-byte vectors need 32; Q8_0's 16-bit pairs would need only 16, but rows
# 16 bytes off their source mod 32 cost the bulk copies L2 sectors)
GEOMETRY = {fmt: (BLOCK_BYTES[fmt], BLOCK_ELEMS, 1, 32) for fmt in ("q4_k", "q5_k", "q6_k")}
GEOMETRY["q8_0"] = (q8.BLOCK_BYTES, q8.BLOCK_ELEMS, q8.BLOCKS_PER_WARP, 32)
CONSUMERS = 16             # consumer warps per CTA
PREFETCH_STAGES = 1        # ring stages asked of L2 before griddepcontrol.wait (grid_dependency)
MAX_STAGES = 3             # ring depth, when A leaves room for it (else fewer: the host's `stages`)
ROWS = 16                  # weight rows per tile (the mma's M side)
SMEM_SYMBOL = "kaio_kq_stream_ring"

Layout = collections.namedtuple("Layout", "pitch stage")


def stage_blocks(fmt):
    return CONSUMERS * GEOMETRY[fmt][2]


def windowed(fmt):
    """Q6_K and Q8_0 blocks (210 and 34 bytes) leave a row's chunk at any
    even address: each is copied in the 16-byte aligned window around it,
    and read from the window's offset (stream_matvec)."""
    return GEOMETRY[fmt][0] % 16 != 0


def layout(fmt):
    """Byte sizes: a stage row's pitch, a stage (a multiple of 128, so every
    stage keeps the ring's bank pattern)."""
    row = stage_blocks(fmt) * GEOMETRY[fmt][0]
    if windowed(fmt):
        row = (row + 15 + 15) // 16 * 16      # the window: up to 15 bytes before, rounded up
    pitch = row + (GEOMETRY[fmt][3] - row % 128) % 128
    assert ROWS * pitch >= CONSUMERS * 32 * 16     # a stage holds a tile's partial sums
    return Layout(pitch, ROWS * pitch)


# prepare_split's scratch: the largest |x| of each of A's (up to 8) rows,
# then in its place the row's scale s_m
PREP_BYTES = 8 * 4


ESIZE = {"f16": 2, "bf16": 2, "f32": 4}


def fixed_bytes(fmt):
    """Shared bytes between the ring and the activations: the split-A
    kernels' scratch, mbarriers (and 8 spare bytes) and 8 per-row output
    scales. (A tile's partial sums are added in its last stage's slot.)"""
    return PREP_BYTES + (2 * MAX_STAGES + 1) * 8 + 8 + 32


def shared_bytes(fmt):
    """The most dynamic shared memory a launch may ask for: the host asks
    for `stages` x layout(fmt).stage (the ring; MAX_STAGES when that fits,
    else 2) + fixed_bytes + M x K x 2 (A), or M x K x 4 (the split A: f32 A,
    and Q8_0's bf16 A) + 3 x M x K / 32 x 2 (Q4_K, Q5_K: the group sums,
    three bf16 planes) and takes another kernel when that is more."""
    return SHARED_LIMIT


def grid_dependency(k, p, fmt, tid, tile0, ntiles, nblk, tile_row):
    """Programmatic dependent launch (the host launches every entry that
    executes griddepcontrol.wait with programmatic stream serialization:
    KernelInfo::grid_dep_wait, read from the PTX by the manifest).

    - launch_dependents first: a streaming kernel has nothing the next one
      must wait for but its completion, which the next one's own wait
      covers; the next grid's CTAs only get an SM as ours retire (one CTA an
      SM: the ring's shared memory), so letting them in at once costs us
      nothing and hides their launch and ramp in our tail.
    - Before the wait only a hint: lanes 0-15 ask L2 for the first
      PREFETCH_STAGES stages of the first tile's rows (the bytes the ring's
      first copies read, in the same 16-byte windows), so DRAM is busy while
      the previous grid drains. One stage: the whole ring made launches
      without a predecessor at K >= 14336 up to 1.2x slower, and kept about
      the same gain in a burst (bench/RESULTS.md). A prefetch changes no data and reads nothing
      into the CTA, so it is safe even if the previous grid writes these
      weights (a quantize before a matvec): the bulk copies after the wait
      read L2, which is coherent with the previous grid's writes.
    - Every real read (A, the weights' bulk copies) and every global write
      (C) comes after the wait, which returns once the previous grid has
      completed and its writes are visible: it may write our A or W (RAW),
      and may still be reading the C we write (WAR).
    Kernel parameters are not memory a previous grid writes, so the
    addresses are computed before the wait."""
    bb = GEOMETRY[fmt][0]

    def prefetch():
        with skip_if(k, k.p("setp.ge.u32", tid, str(ROWS)), "prefetched"):
            with skip_if(k, k.p("setp.ge.u32", tile0, ntiles), "no_tile"):
                src = k.rd("mad.lo.u64", k.rd("cvt.u64.u32", tile_row(k.r("shl.b32", tile0, "4"), tid)),
                           p["w_stride"], p["w"])
                nb = k.r("min.u32", nblk, str(PREFETCH_STAGES * stage_blocks(fmt)))
                delta = k.r("and.b32", k.r("cvt.u32.u64", src), "15")
                size = k.r("and.b32", k.r("add.u32", delta, k.r("mad.lo.u32", nb, str(bb), "15")), "-16")
                k.op("cp.async.bulk.prefetch.L2.global [%s], %s" % (k.rd("sub.u64", src, k.rd("cvt.u64.u32", delta)), size))

    dependent_launch(k, prefetch)


def stream_matvec(k, p, fmt, dt):
    (bb, be, bpw, _), lay, sb = GEOMETRY[fmt], layout(fmt), stage_blocks(fmt)
    # f32 A, and bf16 A for Q8_0 (bf16 has no magic-number conversion for
    # 8-bit quants: 0x43 | u is exact for 7 bits), run in f16 from A split
    # into hi + lo (prepare_split)
    split = dt == "f32" or (fmt == "q8_0" and dt == "bf16")
    k.block, k.min_ctas = 32 * (CONSUMERS + 1), 1
    k.shared_fixed, k.ring_stage, k.ring_stages = fixed_bytes(fmt), lay.stage, MAX_STAGES
    stages = p["stages"]                                # 2 .. MAX_STAGES: what the host found room for
    ring = k.r("mov.u32", SMEM_SYMBOL)
    prep = k.r("mad.lo.u32", stages, str(lay.stage), ring)   # after the ring: prepare_split's scratch
    full = k.r("add.u32", prep, str(PREP_BYTES))        # stages mbarriers: the stage is loaded
    empty = k.r("add.u32", full, str(8 * MAX_STAGES))   # stages mbarriers: the stage is read
    act_bar = k.r("add.u32", empty, str(8 * MAX_STAGES))  # the activations are loaded
    row_scale = k.r("add.u32", act_bar, "16")          # split A: 1 / s_m (prepare_split)
    act = k.r("add.u32", prep, str(fixed_bytes(fmt)))   # A as M x K, packed
    log2_esize = ESIZE[dt].bit_length() - 1
    tid = k.r("mov.u32", "%tid.x")
    warp = k.r("shr.u32", tid, "5")
    lane = k.r("and.b32", tid, "31")
    units_per_block = 1 if fmt == "q8_0" else UNITS_PER_BLOCK[fmt]
    nblk = k.r("shr.u32", p["units"], str(units_per_block.bit_length() - 1))
    k_elems = k.r("shl.b32", nblk, str(be.bit_length() - 1))
    act_row = k.r("shl.b32", k_elems, str(log2_esize))   # K x esize bytes
    ntiles = k.r("shr.u32", k.r("add.u32", p["n"], str(ROWS - 1)), "4")
    ctas = k.r("mov.u32", "%nctaid.x")
    tile0 = k.r("mov.u32", "%ctaid.x")
    nlast = k.r("sub.u32", p["n"], "1")

    def tile_row(first, r):
        """W's row for row r (a register or a constant) of the tile whose
        first row is `first`: the producer copies it, the consumers find its
        window's offset; rows past N re-read row N-1 (their results are
        never stored)."""
        return k.r("min.u32", k.r("add.u32", first, r), nlast)

    grid_dependency(k, p, fmt, tid, tile0, ntiles, nblk, tile_row)
    with skip_if(k, k.p("setp.ne.u32", tid, "0"), "init_done"):
        for s in range(MAX_STAGES):
            k.op("mbarrier.init.shared::cta.b64 [%s+%d], 1" % (full, 8 * s))
            k.op("mbarrier.init.shared::cta.b64 [%s+%d], %d" % (empty, 8 * s, 32 * CONSUMERS))
        k.op("mbarrier.init.shared::cta.b64 [%s], 1" % act_bar)
        for m in range(8):
            k.op("st.shared.b32 [%s+%d], 0" % (prep, 4 * m))
        k.op("fence.mbarrier_init.release.cluster")
    k.op("bar.sync 0")

    def ring_side():
        """The producer's or the consumers' view of the ring: its slot and
        parity registers (0), barriers at full / empty + 8 slot."""
        return Ring(k, None, stages, full, empty, mad=True, mov="mov.b32")

    # first the activations, which every tile reads: row m of A to act + m K
    # esize (but a bf16 A to split: prepare_split reads it itself)
    copy_a = not (split and dt == "bf16")
    # warp 0 lane 0 produces, warps 1 .. CONSUMERS consume; the rest leave at once
    for arm in if_else(k, "!" + k.p("setp.ne.u32", warp, "0"), "consumer"):
        if arm.then:
            # ---- producer: lane 0 of warp 0 ----
            arm.exit_if(k.p("setp.ne.u32", lane, "0"))
            if copy_a:
                mbarrier.arrive_expect_tx(k, act_bar, k.r("mul.lo.u32", act_row, p["m"]))
                m_i = k.var_r("0")
                with loop(k, "arow") as rows_lp:
                    k.op("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%s], [%s], %s, [%s]"
                         % (k.r("mad.lo.u32", m_i, act_row, act),
                            k.rd("mad.lo.u64", k.rd("mul.lo.u64", k.rd("cvt.u64.u32", m_i), p["lda"]), str(ESIZE[dt]),
                                 p["a"]),
                            act_row, act_bar))
                    k.op("add.u32 %s, %s, 1" % (m_i, m_i))
                    rows_lp.again(k.p("setp.lt.u32", m_i, p["m"]))
            i = k.var_r("0")
            ring_p = ring_side()
            tile = k.var_r(tile0)
            arm.exit_if(k.p("setp.ge.u32", tile, ntiles))
            with loop(k, "ptile") as tile_lp:
                row0 = k.r("shl.b32", tile, "4")
                rows = [k.rd("mad.lo.u64", k.rd("cvt.u64.u32", tile_row(row0, str(r))), p["w_stride"], p["w"])
                        for r in range(ROWS)]

                kc = k.var_r("0")
                with loop(k, "pstage") as stage_lp:
                    with skip_if(k, k.p("setp.lt.u32", i, stages), "first_use"):
                        ring_p.wait_empty(ring_p.parity(), hint="spin")
                    nb = k.r("min.u32", k.r("sub.u32", nblk, kc), str(sb))
                    row_bytes = k.r("mul.lo.u32", nb, str(bb))
                    fbar = ring_p.bar(full)
                    dst = k.r("mad.lo.u32", ring_p.s, str(lay.stage), ring)
                    src_off = k.rd("mul.wide.u32", kc, str(bb))

                    def copy(r, src, size, shift=None):
                        row_dst = k.r("add.u32", dst, str(r * lay.pitch))
                        if shift is not None:
                            row_dst = k.r("add.u32", row_dst, shift)
                        k.op("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%s], [%s], %s, [%s]"
                             % (row_dst, src, size, fbar))

                    def plain_copies():
                        mbarrier.arrive_expect_tx(k, fbar, k.r("shl.b32", row_bytes, "4"))
                        for r in range(ROWS):
                            copy(r, k.rd("add.u64", rows[r], src_off), row_bytes)

                    if windowed(fmt):
                        # rows at any even address (the host's `windows`): each row's chunk
                        # from its 16-byte aligned window, start - (start & 15), its size
                        # rounded up to 16 (the host checks the last row's rounding stays in
                        # W's buffer), each expected as it is issued, then one arrive
                        for win in if_else(k, "!" + k.p("setp.eq.u32", p["windows"], "0"), "plain"):
                            if win.then:
                                for r in range(ROWS):
                                    src = k.rd("add.u64", rows[r], src_off)
                                    delta = k.r("and.b32", k.r("cvt.u32.u64", src), "15")
                                    size = k.r("and.b32", k.r("add.u32", delta, k.r("add.u32", row_bytes, "15")),
                                               "-16")
                                    mbarrier.expect_tx(k, fbar, size)
                                    # the window lands at the shared row + (src & 16): both
                                    # ends then sit alike mod 32, so no L2 sector is split
                                    copy(r, k.rd("sub.u64", src, k.rd("cvt.u64.u32", delta)), size,
                                         k.r("and.b32", k.r("cvt.u32.u64", src), "16"))
                                mbarrier.arrive(k, fbar)
                            else:
                                plain_copies()
                    else:
                        plain_copies()
                        k.place(k.label("copied"))   # unused; kept because dropping the line changes the lock
                    k.op("add.u32 %s, %s, 1" % (i, i))
                    ring_p.advance()
                    k.op("add.u32 %s, %s, %d" % (kc, kc, sb))
                    stage_lp.again(k.p("setp.lt.u32", kc, nblk))
                k.op("add.u32 %s, %s, %s" % (tile, tile, ctas))
                tile_lp.again(k.p("setp.lt.u32", tile, ntiles))
        else:
            # ---- consumers: warps 1 .. CONSUMERS ----
            cw = k.r("sub.u32", warp, "1")
            ct = k.r("sub.u32", tid, "32")
            g = k.r("shr.u32", lane, "2")
            t = k.r("and.b32", lane, "3")
            arow = k.r("min.u32", g, k.r("sub.u32", p["m"], "1"))    # rows past M re-read row M-1
            # this lane's activation row: K x 4 bytes a row when split (hi + lo)
            abase = k.r("mad.lo.u32", arow, k.r("shl.b32", k_elems, "2" if split else str(log2_esize)), act)
            ring_c = ring_side()
            cslot = ring_c.s
            ctile = k.var_r(tile0)
            always = k.p("setp.eq.u32", tid, tid)
            arm.exit_if(k.p("setp.ge.u32", ctile, ntiles))
            if copy_a:
                slot0, parity0 = k.r("mov.u32", "0"), k.r("mov.u32", "0")
                mbarrier.wait(k, k.r("mad.lo.u32", slot0, "8", act_bar), parity0, "spin")
            gs = None
            if split:
                gs = act_prep.prepare_split(k, p, fmt, dt, be, nblk, act, ct, 32 * CONSUMERS, lane, prep, row_scale,
                                            arow, t)
            elif fmt in ("q4_k", "q5_k"):
                gs = act_prep.group_sums(k, p, dt, nblk, act, ct, 32 * CONSUMERS, arow, t)
            elif fmt == "q6_k":
                act_prep.pair_spans(k, p, nblk, act, ct, 32 * CONSUMERS)
            cx = Ctx(k, "f16" if split or fmt == "q8_0" else dt, act_space="shared", group_sums=gs, split_act=split,
                     act_paired=fmt != "q8_0")
            # this lane's rows g and g + 8 at the warp's first block of a stage
            lane_row = k.r("mad.lo.u32", g, str(lay.pitch), k.r("mad.lo.u32", cw, str(bpw * bb), ring))
            with loop(k, "ctile") as tile_lp:
                # rows g and g + 8 in a stage slot: with windows, each 16-byte window
                # starts (start & 15) before its row's chunk and is placed (start & 16)
                # into the row; a stage's chunks start a multiple of 32 bytes apart
                # (sb x bb), so that offset, start & 31, is the row's for the whole tile
                if windowed(fmt):
                    assert sb * bb % 32 == 0
                    row_bases, crow0 = [], k.r("shl.b32", ctile, "4")
                    for off in (0, 8):
                        row = tile_row(crow0, k.r("add.u32", g, str(off)))
                        start = k.r("mad.lo.u32", row, k.r("cvt.u32.u64", p["w_stride"]), k.r("cvt.u32.u64", p["w"]))
                        row_bases.append(k.r("add.u32", k.r("add.u32", lane_row, str(off * lay.pitch)),
                                             k.r("and.b32", start, "31")))
                acc = [k.var_f("0f00000000") for _ in range(4)]
                ckc = k.var_r("0")
                with loop(k, "cstage") as stage_lp:
                    ring_c.wait_full(hint="spin")
                    bi = k.r("mad.lo.u32", cw, str(bpw), ckc)          # the warp's first block
                    with skip_if(k, k.p("setp.ge.u32", bi, nblk), "skip"):
                        if windowed(fmt):
                            slot_base = k.r("mul.lo.u32", cslot, str(lay.stage))
                            row_addrs = [k.r("add.u32", slot_base, base) for base in row_bases]
                        else:
                            blk = k.r("mad.lo.u32", cslot, str(lay.stage), lane_row)
                            row_addrs = [k.r("add.u32", blk, str(8 * ri * lay.pitch)) for ri in range(2)]
                        if fmt == "q8_0":
                            q8.q8_0_warp_blocks(k, cx, row_addrs, bi, nblk, abase, t, acc)
                        else:
                            loaded = [load_block(k, fmt, a, t, space="shared") for a in row_addrs]
                            compute_block(k, fmt, cx, loaded, abase, k.r("mul.lo.u32", bi, str(be)), t, acc, always)
                    # every consumer thread releases its own reads of the stage (a lane-0
                    # arrive after bar.warp.sync is enough in the memory model, but
                    # compute-sanitizer's racecheck reported the producer's next copies as
                    # racing with the other lanes' reads); the tile's last stage is released
                    # after the reduction below, which reuses its slot
                    empty_slot = ring_c.bar(empty)
                    k.op("add.u32 %s, %s, %d" % (ckc, ckc, sb))
                    last = k.p("setp.ge.u32", ckc, nblk)
                    stage_lp.exit_if(last)   # to the reduction, at the loop's end
                    mbarrier.arrive(k, empty_slot)
                    ring_c.advance()
                    stage_lp.again()
                # the tile's CW partial sums, added in warp order (store_row_sums'
                # layout), in the slot of its last stage once every warp is done reading
                # its weights: no shared memory of its own, which leaves room for a
                # larger A or a deeper ring
                part = k.r("mad.lo.u32", cslot, str(lay.stage), ring)
                k.op("bar.sync 1, %d" % (32 * CONSUMERS))
                k.op("st.shared.v4.f32 [%s], {%s}" % (k.r("mad.lo.u32", ct, "16", part), ", ".join(acc)))
                # the producer's next bulk copy into this slot (async proxy) must land
                # after these writes (generic proxy)
                k.op("fence.proxy.async.shared::cta")
                k.op("bar.sync 1, %d" % (32 * CONSUMERS))
                with skip_if(k, k.p("setp.ge.u32", ct, "128"), "stored"):
                    store_row_sums(k, p, part, ct, CONSUMERS, k.r("shl.b32", ctile, "4"), row_scale if split else None)
                mbarrier.arrive(k, empty_slot)
                ring_c.advance()
                k.op("add.u32 %s, %s, %s" % (ctile, ctile, ctas))
                tile_lp.again(k.p("setp.lt.u32", ctile, ntiles))
    k.op("ret")
