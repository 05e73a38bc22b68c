#!/usr/bin/env python3
"""Generate libkaio's sm_90a (Hopper) FlashAttention backward: TMA + wgmma.

    python3 ptx/gen_attention_bwd_sm90.py --out-dir DIR  # write DIR/attention_bwd_sm90.ptx

Kernels, dt in {f16, bf16}, D in {64, 128}:
  kaio_attn_bwd_dq_sm90_<dt>_d<D>          dQ over blocks of 128 query rows
  kaio_attn_bwd_dkdv_sm90_<dt>_d<D>        dK and dV over blocks of 128 keys
  kaio_attn_bwd_fused_sm90_<dt>_d<D>       dkdv that also adds dQ's f32 partial
                                           sums into a workspace (below)
  kaio_attn_bwd_dq_convert_sm90_<dt>_d<D>  dQ from that workspace
All follow the sm_80 backward's contract (ptx/gen_attention_sm80.py): Dv =
rowsum(dO * O) comes from kaio_attn_bwd_pre_<dt> in a B*Hq*Sq f32 workspace
(row (b*Hq + h)*Sq + s); P is recomputed from the forward's LSE.  dq and
dkdv write every gradient element from one thread of one CTA, in a fixed
order (no atomics): deterministic.  dK and dV of a KV head sum over the
`group` query heads that share it, inside one CTA.

Fused: params = dkdv's + u64 dq_ws, u64 sem, u32 sq_pad, u32 ordered.  Per
tile, dS^T goes to shared memory and dQ_partial (64 queries x D) = dS K is
one more wgmma; a writer thread (tid 32) bulk-adds the f32 tile into
dq_ws [B*Hq, sq_pad, D] (row q's column c at c ^ ((q & 7) << 3)); ordered:
per (b, hq, 64-query block) a u32 semaphore makes the key blocks add in
their launch order, descending (key blocks in reverse launch order) or, for
causal GQA, ascending (bit-identical sums; the last adder puts the semaphore
back to 0; dq_writer says why each order).  Convert (256 threads, grid
(ceil(Sq / rows), B * Hq)): params u64 dq_ws, sem, grad, u32 seq_q,
heads_q, sq_pad, u64 g_bs, g_ss, f32 scale, u32 out_dtype, first_row; dQ =
scale * dq_ws in out_dtype (0 in rows below first_row, which see no key) and
the semaphores back to zero.  dq_ws stays: ordered, each query block's first
adder stores instead of adding; unordered, the host zeroes it with a memset
(zero stores here made convert 7.7x slower, bench/RESULTS.md, session 25).

  // kaio-tma: <entry> <map> rank=4 dims=D,H,S,B box=64,<rows> swizzle=128 dtype=<dt>
      As in ptx/gen_attention_sm90.py.  tmap_q and tmap_do share one box
      (rows: 128 in dq, 64 in dkdv), tmap_k and tmap_v the other (64 in dq,
      128 in dkdv).
  // kaio-launch: <entry> block=384 cols_per_block=128
      dq: grid (ceil(Sq / 128), B * Hq); dkdv: grid (ceil(Sk / 128), B * Hkv).
      Causal (in the fused kernel: causal and grouped), a CTA's linear id is
      read block-major (kaio_ptx/attention.py blocks_first).

  dq params: tmap_q, tmap_do, tmap_k, tmap_v, u64 lse, u64 dv (Dv), u64 grad
  (dQ), u32 seq_q, seq_k, heads_q, group, u64 g_bs, g_ss, lse_rs, f32 scale,
  f32 scale_log2, u32 causal, causal_off, out_dtype.
  dkdv params: tmap_k, tmap_v, tmap_q, tmap_do, u64 lse, dv, grad_a (dK),
  grad_b (dV), u32 seq_q, seq_k, heads_q, group, u64 ga_bs, ga_ss, gb_bs,
  gb_ss, lse_rs, f32 scale, scale_log2, u32 causal, causal_off, out_dtype.

Design (both kernels): 384 threads, a TMA producer warpgroup and two wgmma
consumer warpgroups of 64 rows (query rows in dq, keys in dkdv), the
producer/consumer split and register budget of the forward.  The CTA's own
rows (Q and dO, or K and V) land once; the other side streams through a
ring of stages (full: the producer's expect_tx; empty: one arrive per
consumer warp).
  dq, per block of 64 keys:  S = Q K^T and dP = dO V^T (wgmma, A and B from
    shared memory, K-major), P = exp2(S scale log2e - LSE log2e) masked to
    0, dS = P (dP - Dv), dQ += dS K (A = dS in registers, B = K MN-major).
  dkdv, per block of 64 queries of each query head of the group:
    S^T = K Q^T and dP^T = V dO^T, P^T = exp2(S^T scale log2e - LSE[col]
    log2e) masked, dV += P^T dO, dS^T = P^T (dP^T - Dv[col]), dK += dS^T Q
    (A in registers, B = dO and Q MN-major).  LSE and Dv of the block's
    columns are read with plain loads, issued before the stage's wait.
  dQ and dK are scaled by softmax_scale in the epilogue.
"""

import sys

from kaio_ptx import cli, manifest, mbarrier, tma, wgmma
from kaio_ptx.attention import bh_split, blocks_first, key_blocks, mask_tile, out_base, store_rows
from kaio_ptx.control import cases
from kaio_ptx.dtypes import OUT_DTYPES
from kaio_ptx.literals import NEG_LOG2E
from kaio_ptx.mma import pack
from kaio_ptx.params import load_params
from kaio_ptx.preamble import extern_shared, preamble
from kaio_ptx.ring import Ring
from kaio_ptx.sm90 import Kernel
from kaio_ptx.tma import PANEL

OUTPUT = "attention_bwd_sm90.ptx"
SMEM = "kaio_attn90_bwd_smem"
BM = 128                    # the CTA's own rows (queries in dq, keys in dkdv), 64 per consumer
BT = 64                     # streamed rows per stage (keys in dq, queries in dkdv)
DIMS = (64, 128)
DTYPES = ("f16", "bf16")
PROD_REGS, CONS_REGS = 24, 240
NTHREADS = 384

HEADER = preamble(__file__) + extern_shared(SMEM, 1024)

TMAP = ".align 64 .b8"
DQ_PARAMS = [(TMAP, "tmap_q[128]"), (TMAP, "tmap_do[128]"), (TMAP, "tmap_k[128]"),
             (TMAP, "tmap_v[128]")]
DQ_SCALARS = [(".u64", "lse"), (".u64", "dv"), (".u64", "grad"), (".u32", "seq_q"),
              (".u32", "seq_k"), (".u32", "heads_q"), (".u32", "group"), (".u64", "g_bs"),
              (".u64", "g_ss"), (".u64", "lse_rs"), (".f32", "scale"), (".f32", "scale_log2"),
              (".u32", "causal"), (".u32", "causal_off"), (".u32", "out_dtype")]
DKDV_PARAMS = [(TMAP, "tmap_k[128]"), (TMAP, "tmap_v[128]"), (TMAP, "tmap_q[128]"),
               (TMAP, "tmap_do[128]")]
DKDV_SCALARS = [(".u64", "lse"), (".u64", "dv"), (".u64", "grad_a"), (".u64", "grad_b"),
                (".u32", "seq_q"), (".u32", "seq_k"), (".u32", "heads_q"), (".u32", "group"),
                (".u64", "ga_bs"), (".u64", "ga_ss"), (".u64", "gb_bs"), (".u64", "gb_ss"),
                (".u64", "lse_rs"), (".f32", "scale"), (".f32", "scale_log2"), (".u32", "causal"),
                (".u32", "causal_off"), (".u32", "out_dtype")]

# The fused kernel's extra parameters: the f32 dQ workspace [B*Hq, sq_pad, D]
# (sq_pad = seq_q rounded up to BT; row q's column c at c ^ ((q & 7) << 3)), one u32 semaphore per (b, hq, query
# block) and whether the adds wait their turn (key-block order).
FUSED_SCALARS = [(".u64", "dq_ws"), (".u64", "sem"), (".u32", "sq_pad"), (".u32", "ordered")]
DS_BYTES = BM * 128         # one dS^T tile: 128 keys x 64 queries, 128-B rows
DQ_BUFS = 2                 # f32 dQ tiles (64 queries x D) between the consumers and the writer
STAT_BYTES = 2 * BT * 4     # one tile's columns: -LSE / scale (BT f32), then -Dv (BT f32)
CONV_THREADS = 256
CONV_SCALARS = [(".u64", "dq_ws"), (".u64", "sem"), (".u64", "grad"), (".u32", "seq_q"),
                (".u32", "heads_q"), (".u32", "sq_pad"), (".u64", "g_bs"), (".u64", "g_ss"),
                (".f32", "scale"), (".u32", "out_dtype"), (".u32", "first_row")]


class Layout:
    """Shared memory: the CTA's two fixed tiles (BM rows each), then stages of
    two streamed tiles (BT rows each), then the barriers."""

    def __init__(self, d, stages, extra=0, dq_bufs=0):
        self.panels = d // PANEL
        self.fix_panel = BM * 128
        self.fix_bytes = self.panels * self.fix_panel         # one fixed tile
        self.st_panel = BT * 128
        self.st_bytes = self.panels * self.st_panel           # one streamed tile
        self.stages = stages
        self.st_off = 2 * self.fix_bytes
        self.ds_off = self.st_off + stages * 2 * self.st_bytes
        self.bar_off = self.ds_off + extra
        self.dq_bufs = dq_bufs
        self.shared = self.bar_off + 8 * (1 + 2 * stages + 2 * dq_bufs) + 1024

    fixed_full = 0

    def full(self, s):
        return 8 * (1 + s)

    def empty(self, s):
        return 8 * (1 + self.stages + s)

    def dq_full(self, s):
        """The fused kernel's f32 dQ tile s written (256 consumer arrivals)."""
        return 8 * (1 + 2 * self.stages + s)

    def dq_empty(self, s):
        """... and added into the workspace (the writer's arrival)."""
        return 8 * (1 + 2 * self.stages + self.dq_bufs + s)


def init_barriers(k, L, bars, tid):
    inits = [(L.fixed_full, 1)] + Ring.inits(L.stages, L.full(0), L.empty(0), 8)
    if L.dq_bufs:
        inits += Ring.inits(L.dq_bufs, L.dq_empty(0), L.dq_full(0), 256)
    k.init_mbarriers(tid, bars, inits)


def producer(k, L, base, bars, b, maps, fixed_head, fixed_row, count, coords_of, exit_, writer=None):
    """Thread 0 of warpgroup 0: the two fixed tiles (maps[0:2] at (fixed_head,
    fixed_row)), then `count` stages of maps[2:4] at coords_of(i) = (head, row).
    writer: code for thread 32 (the fused kernel's dQ writer)."""
    k.op("setmaxnreg.dec.sync.aligned.u32 %d" % PROD_REGS)
    tid = k.r("mov.u32", "%tid.x")
    if writer is not None:
        wl = k.label("writer")
        k.op("@%s bra %s" % (k.p("setp.eq.u32", tid, 32), wl))
    k.op("@%s bra %s" % (k.p("setp.ne.u32", tid, 0), exit_))
    k.op("@%s bra %s" % (k.p("setp.eq.u32", count, 0), exit_))
    tm = []
    for name in maps:
        m = k.rd("cvta.param.u64", k.rd("mov.b64", name))
        k.op("prefetch.tensormap [%s]" % m)
        tm.append(m)
    full = k.r("add.u32", bars, L.fixed_full)
    mbarrier.arrive_expect_tx(k, full, 2 * L.fix_bytes)
    for i in range(2):
        for p in range(L.panels):
            tma.load(k, k.r("add.u32", base, i * L.fix_bytes + p * L.fix_panel), tm[i],
                     (p * PANEL, fixed_head, fixed_row, b), full)
    ring = Ring(k, bars, L.stages, L.full(0), L.empty(0))
    it = k.r("mov.u32", 0)
    top = k.label("p_stage")
    k.place(top)
    head, row = coords_of(it)
    full = ring.acquire(2 * L.st_bytes, off8=ring.offset())
    stage = k.r("add.u32", base, k.r("add.u32", k.r("mul.lo.u32", ring.s, 2 * L.st_bytes), L.st_off))
    for i in range(2):
        for p in range(L.panels):
            tma.load(k, k.r("add.u32", stage, i * L.st_bytes + p * L.st_panel), tm[2 + i],
                     (p * PANEL, head, row, b), full)
    ring.advance()
    k.op("add.u32 %s, %s, 1" % (it, it))
    k.op("@%s bra %s" % (k.p("setp.lt.u32", it, count), top))
    k.op("bra.uni %s" % exit_)
    if writer is not None:
        k.place(wl)
        writer()
        k.op("bra.uni %s" % exit_)


class Consumer:
    """What both kernels' consumer warpgroups share: lanes, this thread's
    first row (of the CTA's fixed tiles), descriptors and the wgmma forms."""

    def __init__(self, k, L, dt, d, base, bars):
        self.k, self.L, self.dt, self.d, self.base, self.bars = k, L, dt, d, base, bars
        k.op("setmaxnreg.inc.sync.aligned.u32 %d" % CONS_REGS)
        tid = k.r("mov.u32", "%tid.x")
        self.cw = k.r("sub.u32", k.r("shr.u32", tid, 7), 1)
        warp = k.r("and.b32", k.r("shr.u32", tid, 5), 3)
        lane = k.r("and.b32", tid, 31)
        self.lane0 = k.p("setp.eq.u32", lane, 0)
        self.t2 = k.r("shl.b32", k.r("and.b32", lane, 3), 1)
        self.rel_row = k.r("add.u32", k.r("shl.b32", self.cw, 6),
                           k.r("add.u32", k.r("shl.b32", warp, 4), k.r("shr.u32", lane, 2)))
        # this warpgroup's 64 rows of each fixed tile start 8 KiB into each panel
        slice_ = k.r("add.u32", base, k.r("shl.b32", self.cw, 13))
        self.fixed = [[wgmma.desc(k, k.r("add.u32", slice_, i * L.fix_bytes + p * L.fix_panel), 16, 1024)
                       for p in range(L.panels)] for i in range(2)]

    def stage(self, s):
        return self.k.r("add.u32", self.base, self.k.r("add.u32", self.k.r("mul.lo.u32", s, 2 * self.L.st_bytes), self.L.st_off))

    def ring(self):
        """The consumers' side of the streamed stages' ring (s, ph = 0)."""
        return Ring(self.k, self.bars, self.L.stages, self.L.full(0), self.L.empty(0))

    def gemm_kmajor(self, acc, a_desc, tile, n, zero):
        """acc (64 x n) (+)= A (64 x D, descriptors per panel) * B^T, B the
        streamed n x D tile at shared address `tile`, both K-major."""
        k, L = self.k, self.L
        bd = [wgmma.desc(k, k.r("add.u32", tile, p * L.st_panel), 16, 1024) for p in range(L.panels)]
        for kk in range(self.d // 16):
            p, w = divmod(kk, 4)
            wgmma.mma(k, self.dt, n, acc, wgmma.advance(k, a_desc[p], 32 * w), wgmma.advance(k, bd[p], 32 * w),
                      0 if (zero and kk == 0) else 1)

    def gemm_rs(self, acc, a_regs, tile, panel_bytes):
        """acc (64 x D) += A (64 x 16 s, registers: 4 per k16 step) * B, B the
        (16 s) x D tile at `tile`, rows of D contiguous (MN-major)."""
        k = self.k
        bd = wgmma.desc(k, tile, panel_bytes, 1024)
        for j in range(len(a_regs) // 4):
            wgmma.mma(k, self.dt, self.d, acc, a_regs[4 * j:4 * j + 4], wgmma.advance(k, bd, 16 * 128 * j), 1,
                      trans_b=1)

    def next_stage(self, ring, it, count, top):
        """After the stage's last wgmma: wait for it, hand the stage back to
        the producer, move the ring on and loop while ++it < count."""
        k = self.k
        wgmma.wait(k, 0)
        ring.release(self.lane0)
        ring.advance()
        k.op("add.u32 %s, %s, 1" % (it, it))
        k.op("@%s bra.uni %s" % (k.p("setp.lt.u32", it, count), top))

    def pack(self, vals):
        k = self.k
        return [k.r("cvt.rn.%sx2.f32" % self.dt, vals[2 * i + 1], vals[2 * i]) for i in range(len(vals) // 2)]


class FusedDq:
    """The fused kernel's per-thread constants for dQ_partial = dS K: where
    this thread writes its dS^T fragment (128-B swizzle: 16-B chunk c of row
    r at chunk c ^ (r & 7)), the K panel(s) its warpgroup multiplies by, and
    its fragment's row and column in the workspace.  D 128: warpgroup w
    owns dQ columns 64w..64w+63; D 64: the warpgroups take turns by tile."""

    def __init__(self, k, C, L, d):
        lane = k.r("and.b32", k.r("mov.u32", "%tid.x"), 31)
        self.xr = k.r("shr.u32", lane, 2)
        self.w_off = k.r("add.u32", k.r("shl.b32", C.rel_row, 7), k.r("shl.b32", k.r("and.b32", lane, 3), 2))
        self.ds_base = k.r("add.u32", C.base, L.ds_off)
        kaddr = C.base if L.panels == 1 else k.r("add.u32", C.base, k.r("mul.lo.u32", C.cw, L.fix_panel))
        self.kdesc = wgmma.desc(k, kaddr, L.fix_panel, 1024)
        self.qrow = k.r("and.b32", C.rel_row, BT - 1)
        self.col = C.t2 if L.panels == 1 else k.r("add.u32", k.r("shl.b32", C.cw, 6), C.t2)
        dqs = k.r("add.u32", C.base, L.ds_off + 2 * DS_BYTES)
        self.dqs_off = k.r("add.u32", dqs, k.r("add.u32", k.r("mul.lo.u32", self.qrow, d * 4),
                                               k.r("shl.b32", self.col, 2)))
        # the consumers fill the f32 tiles: they wait on dq_empty, arrive on dq_full
        self.ring = Ring(k, C.bars, L.dq_bufs, L.dq_full(0), L.dq_empty(0))
        # the tiles' column statistics (stats_fetch): consumer thread ct < 2 BT
        # loads value ct of a tile (-LSE / scale of column ct, or -Dv of column ct - BT)
        self.stats = k.r("add.u32", C.base, L.ds_off + 2 * DS_BYTES + L.dq_bufs * BT * d * 4)
        ct = k.r("sub.u32", k.r("mov.u32", "%tid.x"), 128)
        self.loader = k.p("setp.lt.u32", ct, 2 * BT)
        self.is_dv = k.p("setp.ge.u32", ct, BT)
        self.scol = k.r("and.b32", ct, BT - 1)
        self.st_off = k.r("add.u32", self.stats, k.r("shl.b32", ct, 2))
        self.rd_off = k.r("add.u32", self.stats, k.r("shl.b32", C.t2, 2))


def stats_fetch(k, P, Q, b, it, count, coords_of, inv_scale):
    """The fused kernel's per-tile column statistics, one tile ahead: this
    thread's value of tile it (if it < count): -LSE[col] / scale or -Dv[col]
    (0 past seq_q), loaded from global memory into one register.  Replaces
    the 32 loads per thread per tile that each tile's start waited on."""
    h, q0t = coords_of(k.r("min.u32", it, k.r("sub.u32", count, 1)))
    lrow = k.r("mad.lo.u32", b, P["heads_q"], h)
    col = k.r("add.u32", q0t, Q.scol)
    ok = k.p("setp.lt.and.u32", col, P["seq_q"], Q.loader)
    ok = k.p("setp.lt.and.u32", it, count, ok)
    lptr = k.rd("add.u64", P["lse"], k.rd("shl.b64", k.rd("mul.lo.u64", k.wide(lrow), P["lse_rs"]), 2))
    dptr = k.rd("add.u64", P["dv"], k.rd("shl.b64", k.rd("mul.wide.u32", lrow, P["seq_q"]), 2))
    ptr = k.rd("add.u64", k.rd("selp.b64", dptr, lptr, Q.is_dv), k.rd("mul.wide.u32", col, 4))
    v = k.f("mov.f32", "0f00000000")
    k.op("@%s ld.global.f32 %s, [%s]" % (ok, v, ptr))
    return k.f("mul.f32", k.f("neg.f32", v), k.f("selp.f32", "0f3F800000", inv_scale, Q.is_dv))


def stats_store(k, Q, v, it):
    """v (stats_fetch of tile it) into buffer it & 1; read after the next
    consumers_sync (dq_partial's, or the prologue's)."""
    addr = k.r("add.u32", Q.st_off, k.r("shl.b32", k.r("and.b32", it, 1), STAT_BYTES.bit_length() - 1))
    k.op("@%s st.shared.f32 [%s], %s" % (Q.loader, addr, v))


def stats_init(k, Q, S, dP, it):
    """S^T and dP^T accumulators of tile it from its statistics (buffer
    it & 1): columns t2 + 8c + e, e = 0, 1."""
    base = k.r("add.u32", Q.rd_off, k.r("shl.b32", k.r("and.b32", it, 1), STAT_BYTES.bit_length() - 1))
    for c in range(BT // 8):
        for acc, off in ((S, 0), (dP, BT * 4)):
            pair = k.regs("f", 2)
            k.op("ld.shared.v2.f32 {%s, %s}, [%s+%d]" % (pair[0], pair[1], base, off + 32 * c))
            for e in range(2):
                for v in (e, e + 2):
                    k.op("mov.f32 %s, %s" % (acc[4 * c + v], pair[e]))


def consumers_sync(k):
    """Both consumer warpgroups (256 threads)."""
    k.op("bar.sync 1, 256")


def dq_partial(k, C, L, Q, ds, ring, it, issue_dk):
    """After the tile's dV wgmma is issued: dS^T into shared memory (buffer
    it & 1, so a warpgroup never overwrites what the other still reads),
    dQ_partial (64 queries x 64 columns) = dS (A: dS^T MN-major) K (B: K
    MN-major) over the CTA's 128 keys, then issue_dk() (dK's wgmma, its
    own group) so that the f32 tile goes to shared memory for the writer
    (dq_writer) while dK runs.  D 64: dK first (the warpgroups take turns
    at dQ, and a wgmma after that divergent branch would make ptxas
    serialize every wgmma of the kernel)."""
    split = L.panels > 1
    if not split:
        issue_dk()
    dsb = k.r("add.u32", Q.ds_base, k.r("shl.b32", k.r("and.b32", it, 1), DS_BYTES.bit_length() - 1))
    wbase = k.r("add.u32", dsb, Q.w_off)
    for c in range(BT // 8):
        addr = k.r("add.u32", wbase, k.r("shl.b32", k.r("xor.b32", Q.xr, c), 4))
        for r in range(2):
            k.op("st.shared.b32 [%s+%d], %s" % (addr, 1024 * r, ds[2 * c + r]))
    k.op("fence.proxy.async.shared::cta")
    consumers_sync(k)
    acc = k.regs("f", BT // 2)
    skip = k.label("no_dq")
    job = None
    if L.panels == 1:
        job = k.p("setp.eq.u32", k.r("and.b32", it, 1), C.cw)
        k.op("@!%s bra.uni %s" % (job, skip))
    adesc = wgmma.desc(k, dsb, DS_BYTES, 1024)
    wgmma.fence(k)
    for j in range(BM // 16):
        wgmma.mma(k, C.dt, 64, acc, wgmma.advance(k, adesc, 2048 * j), wgmma.advance(k, Q.kdesc, 2048 * j),
                  0 if j == 0 else 1, trans_a=1, trans_b=1)
    wgmma.commit(k)
    k.place(skip)
    if split:
        issue_dk()
    wgmma.wait(k, 1 if split else 0)  # dV and dQ done (split: dK in flight)
    Q.ring.wait_empty(hint="c_dq_empty")
    written = k.label("dq_written")
    if job is not None:
        k.op("@!%s bra.uni %s" % (job, written))
    k.note("row q, column c of the f32 tile at q*D + (c ^ ((q & 7) << 3)): no bank conflicts")
    tile = k.r("mad.lo.u32", Q.ring.s, BT * C.d * 4, Q.dqs_off)
    for c in range(BT // 8):
        addr = k.r("add.u32", tile, k.r("shl.b32", k.r("xor.b32", Q.xr, c), 5))
        for r in range(2):
            k.op("st.shared.v2.f32 [%s+%d], {%s, %s}" % (addr, 8 * r * C.d * 4, acc[4 * c + 2 * r],
                                                        acc[4 * c + 2 * r + 1]))
    k.place(written)
    k.op("fence.proxy.async.shared::cta")
    mbarrier.arrive(k, Q.ring.bar(Q.ring.full))
    Q.ring.advance()
    if split:
        wgmma.wait(k, 0)
    ring.release(C.lane0)


def dq_writer(k, L, P, base, bars, b, d, kb, lpt, count, coords_of):
    """Thread 32 (producer warpgroup): per tile, once the consumers have
    written the f32 tile, one bulk reduce-add of it into the workspace rows
    (lrow * sq_pad + q0) * D.. (contiguous), then the buffer back to them.

    ordered: the key blocks touching a query block (0..nmax, below) add in
    launch order.  A u32 semaphore per (b, hq, query block) counts the adds
    done; a key block waits until it equals the adds before its own, raises
    it once its add has landed, and the last adder puts it back to 0 for the
    next launch.  Two orders, by the caller's CTA order:
      * head by head, key blocks in reverse (CTA x works on key block
        nkb-1-x): descending, key block kb waits for nmax - kb adds, key
        block 0 is last.  Each CTA walks its query blocks first to last;
        under a causal mask key block n starts at query block ~2n, so the
        higher key blocks reach a query block two tiles apart, first: they
        seldom wait.  But each head's longest CTA starts last.
      * lpt (causal GQA, the CTAs block-major, key block 0 first):
        ascending, key block kb waits for kb adds, nmax is last.  Each CTA
        walks its query blocks last to first (coords), so key block kb
        reaches a query block as many tiles after its start as key block 0
        does, and the lower key blocks, launched no later, get there no
        later.  The longest CTAs start first, not in the tail.

    Forward progress: either way a CTA waits only on CTAs of its (b, kv
    head) with smaller linear ids (x + y * nkb).  Induction on the id: the
    CTAs below id i finish (each waits only on lower ids); CTAs are
    dispatched in id order, so i gets an SM once those free theirs, whatever
    ids above i hold; then every add it waits for happens.  No deadlock
    however many key blocks a head has or how few CTAs are resident; CTAs of
    other heads and batches never wait on each other."""
    ordered = k.p("setp.ne.u32", P["ordered"], 0)
    causal = k.p("setp.ne.u32", P["causal"], 0)
    last_kb = k.r("sub.u32", k.r("mov.u32", "%nctaid.x"), 1)
    nqt = k.r("shr.u32", P["sq_pad"], BT.bit_length() - 1)
    ring = Ring(k, bars, L.dq_bufs, L.dq_full(0), L.dq_empty(0))
    done = k.label("w_done")
    k.op("@%s bra %s" % (k.p("setp.eq.u32", count, 0), done))
    it = k.r("mov.u32", 0)
    top = k.label("w_tile")
    k.place(top)
    h, q0t = coords_of(it)
    lrow = k.r("mad.lo.u32", b, P["heads_q"], h)
    ring.wait_full(hint="w_full")
    sem = k.rd("add.u64", P["sem"], k.rd("mul.wide.u32", k.r("mad.lo.u32", lrow, nqt,
                                                                k.r("shr.u32", q0t, BT.bit_length() - 1)), 4))
    k.note("nmax: the highest key block touching this query block (all of them")
    k.note("when not causal or the block reaches seq_q, else (q0 + 63 + off) >> 7)")
    every = k.p("setp.gt.or.u32", k.r("add.u32", q0t, BT), P["seq_q"], "!" + causal)
    lim = k.r("shr.s32", k.r("add.s32", k.r("add.s32", q0t, BT - 1), P["causal_off"]), BM.bit_length() - 1)
    nmax = k.r("selp.b32", last_kb, k.r("min.s32", lim, last_kb), every)
    want = k.r("selp.b32", kb, k.r("sub.u32", nmax, kb), lpt)
    last = k.p("setp.eq.u32", kb, k.r("selp.b32", nmax, 0, lpt))
    k.note("ordered, the first adder stores: the workspace needs no zeroing")
    first = k.p("setp.eq.and.u32", want, 0, ordered)
    turn = k.label("turn")
    k.op("@!%s bra %s" % (ordered, turn))
    spin = k.label("spin")
    k.place(spin)
    v = k.r("ld.acquire.gpu.global.u32", "[%s]" % sem)
    k.op("@%s bra %s" % (k.p("setp.ne.u32", v, want), spin))
    k.place(turn)
    el = k.rd("mul.lo.u64", k.wide(k.r("mad.lo.u32", lrow, P["sq_pad"], q0t)), d * 4)
    src = k.r("add.u32", base, k.r("mad.lo.u32", ring.s, BT * d * 4, L.ds_off + 2 * DS_BYTES))
    dst = k.rd("add.u64", P["dq_ws"], el)
    k.op("@%s cp.async.bulk.global.shared::cta.bulk_group [%s], [%s], %d" % (first, dst, src, BT * d * 4))
    k.op("@!%s cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%s], [%s], %d" % (
        first, dst, src, BT * d * 4))
    k.op("cp.async.bulk.commit_group")
    landed, freed = k.label("landed"), k.label("freed")
    k.op("@%s bra %s" % (ordered, landed))
    k.op("cp.async.bulk.wait_group.read 0")
    k.op("bra.uni %s" % freed)
    k.place(landed)
    k.op("cp.async.bulk.wait_group 0")
    k.op("fence.proxy.async.global")
    k.op("@%s st.relaxed.gpu.global.u32 [%s], 0" % (last, sem))
    k.op("@!%s red.release.gpu.global.add.u32 [%s], 1" % (last, sem))
    k.place(freed)
    ring.release(None)
    ring.advance()
    k.op("add.u32 %s, %s, 1" % (it, it))
    k.op("@%s bra %s" % (k.p("setp.lt.u32", it, count), top))
    k.op("cp.async.bulk.wait_group 0")
    k.place(done)


def convert_kernel(dt, d):
    """dQ = scale * workspace, in out_dtype, and the semaphores back to 0 for
    the next launch.  CTA (x, b*Hq + h): rows x*rpc.. of that head, 4
    columns per thread."""
    name = "kaio_attn_bwd_dq_convert_sm90_%s_d%d" % (dt, d)
    manifest.keys(name, **{"select": "attn_bwd_sm90", "pass": "bwd_dq_convert", "dtype": dt, "head_dim": d})
    per = d // 4
    rpc = CONV_THREADS // per
    k = Kernel()
    P = load_params(k, CONV_SCALARS, ("dq_ws", "sem", "grad"))
    tid = k.r("mov.u32", "%tid.x")
    x = k.r("mov.u32", "%ctaid.x")
    y, b, h = bh_split(k, P["heads_q"])
    nqt = k.r("shr.u32", P["sq_pad"], BT.bit_length() - 1)
    first = k.p("setp.eq.u32", tid, 0)
    zero_sem = k.p("setp.lt.and.u32", x, nqt, first)
    sem = k.rd("add.u64", P["sem"], k.rd("mul.wide.u32", k.r("mad.lo.u32", y, nqt, x), 4))
    k.op("@%s st.global.u32 [%s], 0" % (zero_sem, sem))
    row = k.r("add.u32", k.r("mul.lo.u32", x, rpc), k.r("div.u32", tid, per))
    col = k.r("shl.b32", k.r("rem.u32", tid, per), 2)
    exit_ = k.label("exit")
    k.op("@%s bra %s" % (k.p("setp.ge.u32", row, P["sq_pad"]), exit_))
    phys = k.r("xor.b32", col, k.r("shl.b32", k.r("and.b32", row, 7), 3))
    el = k.rd("add.u64", k.rd("mul.wide.u32", k.r("mad.lo.u32", y, P["sq_pad"], row), d), k.wide(phys))
    src = k.rd("add.u64", P["dq_ws"], k.rd("shl.b64", el, 2))
    v = k.regs("f", 4)
    k.op("ld.global.v4.f32 {%s}, [%s]" % (", ".join(v), src))
    k.op("@%s bra %s" % (k.p("setp.ge.u32", row, P["seq_q"]), exit_))
    k.note("rows below first_row see no key; ordered, no key block wrote their blocks: 0")
    seen = k.p("setp.ge.u32", row, P["first_row"])
    vals = [k.f("selp.f32", k.f("mul.f32", x_, P["scale"]), "0f00000000", seen) for x_ in v]
    gb = out_base(k, P["grad"], b, P["g_bs"], h, d, P["out_dtype"])
    rowel = k.rd("add.u64", k.rd("mul.lo.u64", k.wide(row), P["g_ss"]), k.wide(col))
    for code, oname, esize in cases(k, P["out_dtype"], OUT_DTYPES, exit_):
        ptr = k.rd("add.u64", gb, k.rd("shl.b64", rowel, esize.bit_length() - 1))
        if oname == "f32":
            k.op("st.global.v4.f32 [%s], {%s}" % (ptr, ", ".join(vals)))
        else:
            w = [pack(k, oname, vals[1], vals[0]), pack(k, oname, vals[3], vals[2])]
            k.op("st.global.v2.b32 [%s], {%s, %s}" % (ptr, w[0], w[1]))
    k.op("ret")
    doc = ("%s: attention backward dQ from the fused kernel's f32 workspace, %s, head dim %d,\n"
           "%d rows per CTA, the workspace and semaphores zeroed behind." % (name, dt, d, rpc))
    ann = ["// kaio-launch: %s block=%d cols_per_block=%d" % (name, CONV_THREADS, rpc)]
    return k.entry_text(name, doc, ann, CONV_SCALARS, [".maxntid %d, 1, 1" % CONV_THREADS])


def zero(k, regs):
    for x in regs:
        k.op("mov.f32 %s, 0f00000000" % x)


def dq_kernel(dt, d):
    name = "kaio_attn_bwd_dq_sm90_%s_d%d" % (dt, d)
    manifest.keys(name, **{"select": "attn_bwd_sm90", "pass": "bwd_dq", "dtype": dt, "head_dim": d})
    L = Layout(d, 3)
    k = Kernel()
    P = load_params(k, DQ_SCALARS, ("lse", "dv", "grad"))
    tid = k.r("mov.u32", "%tid.x")
    base = k.smem_base(SMEM)
    bars = k.r("add.u32", base, L.bar_off)
    k.note("causal: query blocks of every head in turn, the longest (last) first")
    blk, y = blocks_first(k, k.p("setp.ne.u32", P["causal"], 0))
    _, b, h = bh_split(k, P["heads_q"], y)
    hk = k.r("div.u32", h, P["group"])
    mb = k.r("sub.u32", k.r("sub.u32", k.r("mov.u32", "%nctaid.x"), 1), blk)
    m0 = k.r("shl.b32", mb, BM.bit_length() - 1)
    nblocks, first_mask = key_blocks(k, P, m0, BM, BT)
    init_barriers(k, L, bars, tid)
    exit_, consumer = k.label("exit"), k.label("consumer")
    k.op("@%s bra.uni %s" % (k.p("setp.ge.u32", tid, 128), consumer))
    producer(k, L, base, bars, b, ("tmap_q", "tmap_do", "tmap_k", "tmap_v"), h, m0, nblocks,
             lambda it: (hk, k.r("shl.b32", it, BT.bit_length() - 1)), exit_)

    k.place(consumer)
    C = Consumer(k, L, dt, d, base, bars)
    row0 = k.r("add.u32", m0, C.rel_row)
    sq, sk = P["seq_q"], P["seq_k"]
    causal = k.p("setp.ne.u32", P["causal"], 0)
    lrow = k.r("add.u32", k.r("mul.lo.u32", b, P["heads_q"]), h)
    lptr = k.rd("add.u64", P["lse"], k.rd("shl.b64", k.rd("mul.lo.u64", k.wide(lrow), P["lse_rs"]), 2))
    dptr = k.rd("add.u64", P["dv"], k.rd("shl.b64", k.rd("mul.wide.u32", lrow, sq), 2))
    lse2, dvals, lims = [], [], []
    for r in range(2):
        row = k.r("add.u32", row0, 8 * r)
        ok = k.p("setp.lt.u32", row, sq)
        lv, dvv = k.f("mov.f32", "0f00000000"), k.f("mov.f32", "0f00000000")
        k.op("@%s ld.global.f32 %s, [%s]" % (ok, lv, k.rd("add.u64", lptr, k.rd("mul.wide.u32", row, 4))))
        k.op("@%s ld.global.f32 %s, [%s]" % (ok, dvv, k.rd("add.u64", dptr, k.rd("mul.wide.u32", row, 4))))
        lse2.append(k.f("mul.f32", lv, NEG_LOG2E))
        dvals.append(dvv)
        lim = k.r("min.s32", k.r("add.s32", k.r("add.s32", row, P["causal_off"]), 1), sk)
        lims.append(k.r("selp.b32", lim, sk, causal))
    acc = k.regs("f", d // 2)
    zero(k, acc)
    S, dP = k.regs("f", BT // 2), k.regs("f", BT // 2)
    done = k.label("blocks_done")
    k.op("@%s bra.uni %s" % (k.p("setp.eq.u32", nblocks, 0), done))
    k.wait(k.r("add.u32", bars, L.fixed_full), 0, "fixed_full")
    ring = C.ring()
    j = k.r("mov.u32", 0)
    top = k.label("c_block")
    k.place(top)
    ring.wait_full()
    st = C.stage(ring.s)
    wgmma.fence(k)
    C.gemm_kmajor(S, C.fixed[0], st, BT, True)
    C.gemm_kmajor(dP, C.fixed[1], k.r("add.u32", st, L.st_bytes), BT, True)
    wgmma.commit(k)
    wgmma.wait(k, 0)
    k.note("P = exp2(S scale log2e - LSE log2e), masked to 0; dS = P (dP - Dv)")
    for i, x in enumerate(S):
        k.op("fma.rn.f32 %s, %s, %s, %s" % (x, x, P["scale_log2"], lse2[(i >> 1) & 1]))
        k.op("ex2.approx.ftz.f32 %s, %s" % (x, x))
    kv0 = k.r("shl.b32", j, BT.bit_length() - 1)
    nomask = k.label("no_mask")
    k.op("@%s bra.uni %s" % (k.p("setp.le.s32", kv0, first_mask), nomask))
    mask_tile(k, [S[4 * c:4 * c + 4] for c in range(BT // 8)], kv0, lims, BT, "0f00000000", C.t2)
    k.place(nomask)
    for i, x in enumerate(dP):
        k.op("sub.f32 %s, %s, %s" % (x, x, dvals[(i >> 1) & 1]))
        k.op("mul.f32 %s, %s, %s" % (x, x, S[i]))
    ds = C.pack(dP)
    wgmma.fence(k)
    C.gemm_rs(acc, ds, st, L.st_panel)
    wgmma.commit(k)
    C.next_stage(ring, j, nblocks, top)
    k.place(done)
    gb = out_base(k, P["grad"], b, P["g_bs"], h, d, P["out_dtype"])
    store_rows(k, [acc[4 * c:4 * c + 4] for c in range(d // 8)], d, row0, sq, gb, P["g_ss"],
               P["out_dtype"], C.t2, scale=P["scale"])
    k.op("bra.uni %s" % exit_)
    k.place(exit_)
    k.op("ret")
    doc = ("%s: attention backward dQ, %s, head dim %d, %d query rows x %d-key blocks per CTA,\n"
           "1 TMA producer + 2 wgmma consumer warpgroups, %d K/V stages." % (name, dt, d, BM, BT, L.stages))
    return finish(k, name, doc, L, DQ_PARAMS + DQ_SCALARS, BM, BT)


def dkdv_kernel(dt, d, fused=False):
    kind = "fused" if fused else "dkdv"
    name = "kaio_attn_bwd_%s_sm90_%s_d%d" % (kind, dt, d)
    manifest.keys(name, **{"select": "attn_bwd_sm90", "pass": "bwd_" + kind, "dtype": dt, "head_dim": d})
    L = Layout(d, 2, 2 * DS_BYTES + DQ_BUFS * BT * d * 4 + 2 * STAT_BYTES, DQ_BUFS) if fused else Layout(d, 2)
    k = Kernel()
    P = load_params(k, DKDV_SCALARS + (FUSED_SCALARS if fused else []),
                    ("lse", "dv", "grad_a", "grad_b") + (("dq_ws", "sem") if fused else ()))
    tid = k.r("mov.u32", "%tid.x")
    base = k.smem_base(SMEM)
    bars = k.r("add.u32", base, L.bar_off)
    sq, sk, off = P["seq_q"], P["seq_k"], P["causal_off"]
    heads_kv = k.r("div.u32", P["heads_q"], P["group"])
    causal = k.p("setp.ne.u32", P["causal"], 0)
    if fused:
        # Two orders (dq_writer says how the ordered adds follow each). Causal GQA
        # ("longest first"): block-major, key block 0 first; a CTA takes the group's
        # query heads, so its longest is group times a head's and must not start in the
        # tail. Otherwise head by head (block-major ran 3-5 % slower without GQA, the
        # heads' working sets, bench/RESULTS.md, session 23), ordered in reverse.
        lpt = k.p("and.pred", causal, k.p("setp.gt.u32", P["group"], 1))
        ordered = k.p("setp.ne.u32", P["ordered"], 0)
        desc = k.p("and.pred", lpt, ordered)
        k.note("causal GQA: key blocks of every head in turn, the longest first")
        kb, y = blocks_first(k, lpt)
        _, b, hk = bh_split(k, heads_kv, y)
        rev = k.r("sub.u32", k.r("sub.u32", k.r("mov.u32", "%nctaid.x"), 1), kb)
        kb = k.r("selp.b32", rev, kb, k.p("and.pred", ordered, "!" + lpt))
    else:
        k.note("causal: key blocks of every head in turn, the longest (first) first")
        kb, y = blocks_first(k, causal)
        _, b, hk = bh_split(k, heads_kv, y)
    k0 = k.r("shl.b32", kb, BM.bit_length() - 1)
    # first query any key of the block sees: max(0, k0 - off) when causal
    qstart = k.r("min.u32", k.r("selp.b32", k.r("max.s32", k.r("sub.s32", k0, off), 0), 0, causal), sq)
    t_first = k.r("shr.u32", qstart, BT.bit_length() - 1)
    t_count = k.r("shr.u32", k.r("add.u32", sq, BT - 1), BT.bit_length() - 1)
    per_head = k.r("sub.u32", t_count, t_first)
    total = k.r("mul.lo.u32", P["group"], per_head)

    # it -> (query head, first query): head by head, query blocks first to last;
    # desc: query blocks last to first, the group's heads within each
    div = k.r("selp.b32", P["group"], per_head, desc) if fused else per_head
    t_last = k.r("sub.u32", t_count, 1) if fused else None

    def coords(it):
        q = k.r("div.u32", it, div)
        r = k.r("sub.u32", it, k.r("mul.lo.u32", q, div))
        hi, ti = q, k.r("add.u32", r, t_first)
        if fused:
            hi = k.r("selp.b32", r, q, desc)
            ti = k.r("selp.b32", k.r("sub.u32", t_last, q), ti, desc)
        return k.r("mad.lo.u32", hk, P["group"], hi), k.r("shl.b32", ti, BT.bit_length() - 1)

    init_barriers(k, L, bars, tid)
    exit_, consumer = k.label("exit"), k.label("consumer")
    k.op("@%s bra.uni %s" % (k.p("setp.ge.u32", tid, 128), consumer))
    writer = (lambda: dq_writer(k, L, P, base, bars, b, d, kb, lpt, total, coords)) if fused else None
    producer(k, L, base, bars, b, ("tmap_k", "tmap_v", "tmap_q", "tmap_do"), hk, k0, total, coords, exit_,
             writer)

    k.place(consumer)
    C = Consumer(k, L, dt, d, base, bars)
    krow0 = k.r("add.u32", k0, C.rel_row)
    qlo = [k.r("selp.b32", k.r("sub.s32", k.r("add.u32", krow0, 8 * r), off), -(1 << 30), causal)
           for r in range(2)]
    nomask_sk = k.r("sub.s32", sq, BT)                                   # q0t + BT > seq_q
    nomask_c = k.r("sub.s32", k.r("add.s32", k0, BM - 1), off)           # q0t < k0 + BM-1 - off
    inv_scale = k.f("rcp.rn.f32", P["scale"])
    Q = FusedDq(k, C, L, d) if fused else None
    dK, dV = k.regs("f", d // 2), k.regs("f", d // 2)
    zero(k, dK + dV)
    S, dP = k.regs("f", BT // 2), k.regs("f", BT // 2)
    done = k.label("tiles_done")
    k.op("@%s bra.uni %s" % (k.p("setp.eq.u32", total, 0), done))
    if fused:
        zero_it = k.r("mov.u32", 0)
        stats_store(k, Q, stats_fetch(k, P, Q, b, zero_it, total, coords, inv_scale), zero_it)
        consumers_sync(k)
    k.wait(k.r("add.u32", bars, L.fixed_full), 0, "fixed_full")
    ring = C.ring()
    it = k.r("mov.u32", 0)
    top = k.label("c_tile")
    k.place(top)
    h, q0t = coords(it)
    k.note("S^T starts at -LSE[col] / scale and dP^T at -Dv[col], so the wgmma")
    k.note("leaves S^T - LSE / scale and dP^T - Dv: no per-column registers stay live")
    if fused:
        c0 = k.r("add.u32", q0t, C.t2)
        stats_init(k, Q, S, dP, it)
    else:
        lrow = k.r("mad.lo.u32", b, P["heads_q"], h)
        lptr = k.rd("add.u64", P["lse"], k.rd("shl.b64", k.rd("mul.lo.u64", k.wide(lrow), P["lse_rs"]), 2))
        dptr = k.rd("add.u64", P["dv"], k.rd("shl.b64", k.rd("mul.wide.u32", lrow, sq), 2))
        c0 = k.r("add.u32", q0t, C.t2)
        for c in range(BT // 8):
            for e in range(2):
                col = k.r("add.u32", c0, 8 * c + e)
                ok = k.p("setp.lt.u32", col, sq)
                lv, dvv = k.f("mov.f32", "0f00000000"), k.f("mov.f32", "0f00000000")
                k.op("@%s ld.global.f32 %s, [%s]" % (ok, lv, k.rd("add.u64", lptr, k.rd("mul.wide.u32", col, 4))))
                k.op("@%s ld.global.f32 %s, [%s]" % (ok, dvv, k.rd("add.u64", dptr, k.rd("mul.wide.u32", col, 4))))
                ls = k.f("mul.f32", k.f("neg.f32", lv), inv_scale)
                ndv = k.f("neg.f32", dvv)
                for v in (e, e + 2):
                    k.op("mov.f32 %s, %s" % (S[4 * c + v], ls))
                    k.op("mov.f32 %s, %s" % (dP[4 * c + v], ndv))
    ring.wait_full()
    st = C.stage(ring.s)
    st_do = k.r("add.u32", st, L.st_bytes)
    wgmma.fence(k)
    C.gemm_kmajor(S, C.fixed[0], st, BT, False)
    if fused:  # exp2 of S^T overlaps the dP^T wgmma; the next tile's columns load meanwhile
        wgmma.commit(k)
    C.gemm_kmajor(dP, C.fixed[1], st_do, BT, False)
    wgmma.commit(k)
    if fused:
        nxt = k.r("add.u32", it, 1)
        stat = stats_fetch(k, P, Q, b, nxt, total, coords, inv_scale)
        wgmma.wait(k, 1)
    else:
        wgmma.wait(k, 0)
    for x in S:
        k.op("mul.f32 %s, %s, %s" % (x, x, P["scale_log2"]))
        k.op("ex2.approx.ftz.f32 %s, %s" % (x, x))
    nomask = k.label("no_mask")
    need = k.p("or.pred", k.p("setp.gt.s32", q0t, nomask_sk), k.p("setp.lt.and.s32", q0t, nomask_c, causal))
    k.op("@!%s bra.uni %s" % (need, nomask))
    for c in range(BT // 8):
        for e in range(2):
            col = k.r("add.s32", c0, 8 * c + e)
            inside = k.p("setp.lt.s32", col, sq)
            for r in range(2):
                ok = k.p("setp.ge.and.s32", col, qlo[r], inside)
                x = S[4 * c + 2 * r + e]
                k.op("selp.f32 %s, %s, 0f00000000, %s" % (x, x, ok))
    k.place(nomask)
    if fused:
        wgmma.wait(k, 0)
    pp = C.pack(S)
    wgmma.fence(k)
    k.note("dV += P^T dO, while dS^T = P^T (dP^T - Dv) is formed")
    C.gemm_rs(dV, pp, st_do, L.st_panel)
    wgmma.commit(k)
    for i, x in enumerate(dP):
        k.op("mul.f32 %s, %s, %s" % (x, x, S[i]))
    ds = C.pack(dP)

    def issue_dk():
        wgmma.fence(k)
        C.gemm_rs(dK, ds, st, L.st_panel)
        wgmma.commit(k)

    if fused:
        stats_store(k, Q, stat, nxt)
        dq_partial(k, C, L, Q, ds, ring, it, issue_dk)
        ring.advance()
        k.op("add.u32 %s, %s, 1" % (it, it))
        k.op("@%s bra.uni %s" % (k.p("setp.lt.u32", it, total), top))
    else:
        issue_dk()
        C.next_stage(ring, it, total, top)
    k.place(done)
    for grad, bs, ss, acc, scale in (("grad_a", "ga_bs", "ga_ss", dK, P["scale"]),
                                      ("grad_b", "gb_bs", "gb_ss", dV, None)):
        gb = out_base(k, P[grad], b, P[bs], hk, d, P["out_dtype"])
        store_rows(k, [acc[4 * c:4 * c + 4] for c in range(d // 8)], d, krow0, sk, gb, P[ss],
                   P["out_dtype"], C.t2, scale=scale)
    k.op("bra.uni %s" % exit_)
    k.place(exit_)
    k.op("ret")
    doc = ("%s: attention backward dK and dV%s, %s, head dim %d, %d keys x %d-query blocks per CTA,\n"
           "1 TMA producer + 2 wgmma consumer warpgroups, %d Q/dO stages." % (
               name, " (and dQ into an f32 workspace)" if fused else "", dt, d, BM, BT, L.stages))
    return finish(k, name, doc, L, DKDV_PARAMS + DKDV_SCALARS + (FUSED_SCALARS if fused else []), BT, BM)


def finish(k, name, doc, L, params, q_rows, kv_rows):
    ann = ["// kaio-tma: %s %s rank=4 dims=D,H,S,B box=%d,%d swizzle=128 dtype=%s" % (
        name, m, PANEL, rows, "bf16" if "bf16" in name else "f16")
        for m, rows in (("tmap_q", q_rows), ("tmap_do", q_rows), ("tmap_k", kv_rows), ("tmap_v", kv_rows))]
    ann.append("// kaio-launch: %s block=%d cols_per_block=%d" % (name, NTHREADS, BM))
    ann.append("// kaio-shared-bytes: %s %d" % (name, L.shared))
    return k.entry_text(name, doc, ann, params, [".maxntid %d, 1, 1" % NTHREADS, ".minnctapersm 1"])


def generate():
    parts = [HEADER]
    for dt in DTYPES:
        for d in DIMS:
            parts.append("\n" + dq_kernel(dt, d))
            parts.append("\n" + dkdv_kernel(dt, d))
            parts.append("\n" + dkdv_kernel(dt, d, fused=True))
            parts.append("\n" + convert_kernel(dt, d))
    return {OUTPUT: "".join(parts)}


if __name__ == "__main__":
    sys.exit(cli.main(__file__, __doc__, generate))
