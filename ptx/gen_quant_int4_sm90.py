#!/usr/bin/env python3
"""Generate libkaio's sm_90a W4A16 prefill kernels: GPTQ weights dequantized
into shared memory and fed straight to wgmma, no dequantized copy in global
memory.

    python3 ptx/gen_quant_int4_sm90.py --out-dir DIR  # write DIR/quant_int4_sm90{,_split}.ptx

Kernels: kaio_int4_mm_sm90_<dt>_m<BM>_ss, dt in {f16, bf16} (activations and
scales), BM in ROWS activation rows per CTA, and kaio_int4_mm_sm90_<dt>_
m<BM>_k<s>_ss, s in {2, 4}, whose clusters of s CTAs (1 x 1 x s, grid z = s)
split K in s parts; after the mainloops each CTA owns 1/s of the tile's rows,
sends its partials of the other parts into their owners' shared memory
(distributed shared memory, st.async completing on the owner's mbarrier) and
sums and stores its own part.  The split kernels are a module of their own
(quant_int4_sm90_split.ptx): st.async needs PTX 8.1, and drivers older than
12.1 keep the unsplit kernels.  The host (src/ops/quant_int4.cpp) picks the
tile and split by waves x (steps per CTA x step time + a wave's fixed time).

C [M, N] = X [M, K] * W [K, N], W in the GPTQ layout of ptx/gen_quant_int4.py
(qweight u32 [K/8, N], qzeros u32 [K/g, N/8] or none (zero 8), scales dt
[K/g, N]), dequantized exactly as there: ((q ^ xmask) - (z + zoff)) rounded
once after the multiply by the scale, f32 accumulation.  The kernel computes
C^T = W^T X^T: the dequantized weight is wgmma's A operand (64 columns of W
per consumer warpgroup, m64), X is B (n = BM: a tile of 64, 128, 192 or 256
rows, so that few rows need not compute a whole 256).

  // kaio-tma: <entry> tmap_x rank=2 dims=K,M box=64,<BM> swizzle=128 dtype=<dt>
  // kaio-tma: <entry> tmap_qw rank=2 dims=N,K/8 box=128,8 swizzle=none dtype=u32
      Out-of-bounds elements read as zeros (the N and K tails).
  // kaio-launch: <entry> block=384 cols_per_block=128
      grid (ceil(N / 128), ceil(M / BM), s), BM the tmap_x box's rows.
  Params: tmap_x, tmap_qw (.param .align 64 .b8 [128]), u64 c, ldc, sc,
  ldsc, qz (0: no qzeros, every zero 8), ldqz (row strides in elements),
  u32 m, n, k, group (g; K for one group per column), xmask, zoff,
  out_dtype (1 f32, 2 f16, 3 bf16).  Scales and zeros are plain loads (two
  per column and step, one step ahead), so they keep the decode kernel's
  alignment rules; qweight and X already meet TMA's (16-byte starts, row
  strides multiples of 16 bytes).
  Host guarantees: K % 32 == 0, g a power of two >= 32 dividing K or g = K.

Design: a dequantizing warpgroup and two wgmma consumer warpgroups
(ptx/quant_int4_ss.py), K steps of 64 through 4-8 stages (X BM x 128 B,
128-B swizzled; qweight 8 x 128 words; W^T 128 x 64 dequantized).  The
epilogue stores f32 C from the accumulators (a warp's store: four whole
32-byte sectors) and 16-bit C through the drained stages, transposed into
16-byte chunks along C's rows (element stores when C is not 16-byte
aligned).  The register-A kernel of 128 rows that dequantized in the
consumers' own registers is gone: the shared-memory one of 128 rows ran as
fast or faster on every shape timed (bench/RESULTS.md, session 20).
"""

import sys

from kaio_ptx import cli, cluster_sum, manifest, tma
from kaio_ptx.params import load_params
from kaio_ptx.preamble import extern_shared, preamble
from kaio_ptx.ring import Ring
from kaio_ptx.sm90 import SHARED_LIMIT, Kernel
import quant_int4_ss

OUTPUT, OUTPUT_SPLIT = "quant_int4_sm90.ptx", "quant_int4_sm90_split.ptx"
SMEM = "kaio_int4_90_smem"
BN = 128            # weight columns per CTA (64 per consumer warpgroup)
BK = 64             # K per stage
MAX_STAGES = 8
ROWS = (256, 192, 128, 64)   # tiles of activation rows (wgmma's N)

HEADER = preamble(__file__) + extern_shared(SMEM, 1024)

TMAP = ".align 64 .b8"
MAPS = [(TMAP, "tmap_x[128]"), (TMAP, "tmap_qw[128]")]
SCALARS = [(".u64", "c"), (".u64", "ldc"), (".u64", "sc"), (".u64", "ldsc"), (".u64", "qz"),
           (".u64", "ldqz"), (".u32", "m"), (".u32", "n"), (".u32", "k"), (".u32", "group"),
           (".u32", "xmask"), (".u32", "zoff"), (".u32", "out_dtype")]

QW_BYTES = (BK // 8) * BN * 4       # 8 packed rows of 128 words
X_OFF = 0


class Tile:
    """Shared-memory layout for bm activation rows per CTA: the stages of X,
    qweight and W^T (ptx/quant_int4_ss.py), then the barriers. As many
    stages as fit, up to MAX_STAGES: at few rows a step's loads are small
    and their latency sets the pace (4 at 256 rows, 5 at 192, 6 at 128, 8
    at 64)."""

    def __init__(self, bm, splits=1):
        self.bm = bm
        self.x_bytes = bm * 128                     # 64 k of bm rows, 128 B each
        self.qw_bytes = QW_BYTES
        stage = self.x_bytes + QW_BYTES + quant_int4_ss.W_BYTES + 8 * 3   # + full, empty, wfull
        self.stages = min(MAX_STAGES, (SHARED_LIMIT - 1024 - 8) // stage)
        self.qw_off = self.stages * self.x_bytes
        self.w_off = self.qw_off + self.stages * QW_BYTES
        self.bar_off = self.w_off + self.stages * quant_int4_ss.W_BYTES
        self.recv = 8 * 3 * self.stages      # split: the other CTAs' partials have landed
        self.shared = self.bar_off + self.recv + (8 if splits > 1 else 0) + 1024
        assert self.shared <= SHARED_LIMIT


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


def store_tile(k, T, P, acc, n0, m0, lo, cols, t, base, cw, warp, exit_, splits):
    if splits > 1:
        cluster_sum_and_store(k, T, P, acc, n0, m0, lo, cols, t, base, cw, warp, exit_, splits)
    else:
        epilogue(k, T, P, acc, n0, m0, lo, cols, t, base, cw, warp)
    k.op("bra.uni %s" % exit_)


def cluster_sum_and_store(k, T, P, acc, n0, m0, lo, cols, t, base, cw, warp, exit_, splits):
    """Split K over a cluster of `splits` CTAs: rank r owns the tile's rows
    m0 + r * bm / splits .. (a part), sends its partial of every other part
    to that part's owner, sums the partials of its own part in rank order
    (kaio_ptx/cluster_sum.py) and stores them. The partials land in the
    owner's drained stages. One mbarrier, no second cluster barrier (1.5-4 %
    faster than a barrier at M 512, bench/RESULTS.md)."""
    assert len(acc) % (4 * splits) == 0, "a part is whole quads of acc (8-row blocks)"
    parts = cluster_sum.bounds(len(acc) // 4, splits)
    assert (splits - 1) * cluster_sum.slot_bytes(parts) <= T.bar_off, "the partials must fit in the stages"
    part_rows = T.bm // splits

    def store(r, mine, q0):
        epilogue(k, Tile(part_rows), P, mine, n0, k.r("add.u32", m0, r * part_rows) if r else m0,
                 lo, cols, t, base, cw, warp)
        k.op("bra.uni %s" % exit_)

    cluster_sum.sum_parts(k, acc, parts, base, T.bar_off + T.recv, store,
                          lambda r: "rows %d.." % (r * part_rows))


def epilogue(k, T, P, acc, n0, m0, lo, cols, t, base, cw, warp):
    """acc[4j + v]: C^T row (weight column) cols[v >> 1], column (activation
    row) m0 + 8j + 2t + (v & 1), i.e. C[m][n], stored where lo <= m < M (rows
    below lo belong to the row tile before; see mm_kernel) and n < N.  f32 C
    takes element stores from the accumulators: a warp's store covers four
    whole 32-byte sectors, 1-3 % faster than a transpose (bench/RESULTS.md,
    session 18).  16-bit C, where its start and row stride are 16-byte
    aligned: the warpgroup transposes its 64 columns x bm rows through shared
    memory (the drained stages) and stores 16-byte chunks along rows;
    otherwise element stores."""
    is32 = k.p("setp.eq.u32", P["out_dtype"], 1)
    is16 = k.p("setp.eq.u32", P["out_dtype"], 2)
    span = k.r("sub.u32", P["m"], lo)          # row m is stored where m - lo < span (unsigned)
    sh = k.r("selp.b32", 2, 1, is32)
    ldb = k.rd("shl.b64", P["ldc"], sh)
    done, slow = k.label("stored"), k.label("slow_store")
    aligned = k.p("setp.eq.u64", k.rd("and.b64", k.rd("or.b64", P["c"], ldb), 15), 0)
    fast = k.p("and.pred", aligned, k.p("not.pred", is32))
    k.op("@!%s bra.uni %s" % (fast, slow))
    k.note("both consumer warpgroups are past their last wgmma: the stages are free")
    k.op("bar.sync 1, 256")
    esize = 2
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
                hv = k.reg("h")
                k.op("cvt.rn.bf16.f32 %s, %s" % (hv, v))
                k.op("@%s cvt.rn.f16.f32 %s, %s" % (is16, hv, v))
                k.op("st.shared.b16 [%s+%d], %s" % (wbase, off, hv))
    k.op("bar.sync %s, 128" % k.r("add.u32", cw, 2))
    cpr = 64 * esize // 16                   # 16-byte chunks per row
    rows_per_pass = 128 // cpr
    assert T.bm % rows_per_pass == 0
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


def mm_kernel(dt, bm, splits=1):
    split = splits > 1
    # "_ss": both wgmma operands in shared memory (the name outlived the register-A kernel)
    name = "kaio_int4_mm_sm90_%s_m%d%s_ss" % (dt, bm, "_k%d" % splits if split else "")
    manifest.keys(name, select="int4_mm_sm90", dtype=dt, tile_m=bm, split_k=splits)
    T = Tile(bm, splits)
    stages = T.stages
    wfull = 16 * stages                           # wfull[s] at bars + wfull + 8s
    k = Kernel()
    P = load_params(k, SCALARS, ("c", "sc"))
    tid = k.r("mov.u32", "%tid.x")
    base = k.smem_base(SMEM)
    bars = k.r("add.u32", base, T.bar_off)        # full[s] at + 8s, empty[s] at + 8(stages + s)
    n0 = k.r("shl.b32", k.r("mov.u32", "%ctaid.x"), 7)
    lo = k.r("mul.lo.u32", k.r("mov.u32", "%ctaid.y"), bm)
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
    inits = Ring.inits(stages, 0, 8 * stages, 8)
    inits += [(wfull + 8 * s, 128) for s in range(stages)]   # every dequantizing thread arrives
    if split:
        inits += [(T.recv, 1)]
    k.init_mbarriers(tid, bars, inits)

    def ss_loads():
        """load(i): the TMA loads of this CTA's step i, in order, from the thread that issues them."""
        ring = Ring(k, bars, stages, 0, 8 * stages)
        maps = tensor_maps(k)
        return lambda i: load_step(k, T, ring, maps, base, k.r("add.u32", step0, i), n0, m0, nbytes)

    exit_, cons = k.label("exit"), k.label("consumer")
    k.op("@%s bra.uni %s" % (k.p("setp.ge.u32", tid, 128), cons))
    prod_exit = k.label("producer_exit") if split else exit_
    quant_int4_ss.dequantizer(k, T, P, dt, base, bars, n0, nsteps, step0, stages, wfull)
    k.op("bra.uni %s" % prod_exit)
    if split:
        k.place(prod_exit)
        cluster_sum.cluster_barrier(k)
        k.op("bra.uni %s" % exit_)
    k.place(cons)

    def finish(acc, cw, warp, t, cols):
        store_tile(k, T, P, acc, n0, m0, lo, cols, t, base, cw, warp, exit_, splits)

    quant_int4_ss.consumer(k, T, dt, base, bars, nsteps, stages, wfull, finish, ss_loads())
    k.place(exit_)
    k.op("ret")
    roles = "1 dequantizing (W to shared memory) + 2 wgmma consumer warpgroups (one thread loads)"
    doc = ("%s: C = X * dequant(W), X %s [M, K], GPTQ int4 W, f32 accumulation; %d weight columns x\n"
           "%d rows per CTA, %s, %d stages of K %d."
           % (name, dt, BN, bm, roles, stages, BK))
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
    dts = ("f16", "bf16")
    return {OUTPUT: HEADER + "".join("\n" + mm_kernel(dt, bm) for bm in ROWS for dt in dts),
            OUTPUT_SPLIT: HEADER + "".join("\n" + mm_kernel(dt, bm, splits)
                                        for bm in ROWS for splits in (2, 4) for dt in dts)}

if __name__ == "__main__":
    sys.exit(cli.main(__file__, __doc__, generate))
