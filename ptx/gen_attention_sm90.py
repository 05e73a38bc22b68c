#!/usr/bin/env python3
"""Generate libkaio's sm_90a (Hopper) FlashAttention forward: TMA + wgmma,
a producer warpgroup and two consumer warpgroups, FlashAttention-3 style.

    python3 ptx/gen_attention_sm90.py --out-dir DIR  # write DIR/attention_fwd_sm90.ptx

Kernels: kaio_attn_fwd_sm90_<dt>_d<D>, dt in {f16, bf16}, D in {64, 128}.
Same contract as the sm_80 forward (ptx/gen_attention_sm80.py: BSHD tensors,
GQA through `group`, bottom-right causal through causal_off, O = 0 and
LSE = -inf for a row that sees no key, P rounded to the input dtype before
P.V, ex2.approx), except that Q, K and V come in as TMA tensor maps:

  // kaio-tma: <entry> tmap_q|tmap_k|tmap_v rank=4 dims=D,H,S,B box=64,<rows> swizzle=128 dtype=<dt>
      cuTensorMapEncodeTiled, rank 4: dim 0 the head dim (D elements,
      contiguous), dim 1 the head (Hq for Q, Hkv for K and V; stride D
      elements), dim 2 the sequence (stride = the rank-2 view's row_stride),
      dim 3 the batch (stride S * row_stride); box {64, 1, rows, 1}; 128-byte
      swizzle; out-of-bounds elements read as zeros (the kernel relies on it
      for rows past Sq and keys past Sk, which never leak into another
      (batch, head): the map's bounds are per dimension).  tmap_v uses
      tmap_k's box.
  // kaio-launch: <entry> block=384 cols_per_block=128
      grid = (ceil(Sq / 128), B * Hq); query rows per CTA = cols_per_block.

  Params: tmap_q, tmap_k, tmap_v (.param .align 64 .b8 [128]), u64 o,
  u64 lse (0: not written), u32 seq_q, seq_k, heads_q, group (Hq / Hkv),
  u64 o_bs, o_ss (O's batch and sequence strides in elements), u64 lse_rs,
  f32 scale_log2 (softmax_scale * log2 e), u32 causal, u32 causal_off (s32:
  key j is visible to query i iff j <= i + causal_off), u32 out_dtype
  (1 f32, 2 f16, 3 bf16).

Design
  * .version 8.0, .target sm_90a (wgmma, setmaxnreg).  384 threads: warpgroup
    0 produces (setmaxnreg.dec 24; one thread issues every TMA load), warp-
    groups 1 and 2 consume (setmaxnreg.inc 240), 64 query rows each.
    .maxntid 384 + .minnctapersm 1 cap the entry at 168 registers so that
    setmaxnreg applies (24 * 128 + 240 * 256 <= 65536).
  * Shared memory, 1024-B aligned at run time: Q (D/64 panels of 128 rows x
    128 B), then STAGES stages of K and V (D/64 panels of 128 keys x 128 B
    each), then mbarriers: q_full, k_full[s], v_full[s] (count 1: the
    producer's arrive.expect_tx, completed by the TMA bytes), k_empty[s],
    v_empty[s] (count 8: lane 0 of each consumer warp once the wgmma that
    read the stage has completed).  K and V have their own barriers, so
    S = Q K^T starts before V has landed.
  * S = Q K^T: wgmma m64n128k16, A = Q and B = K from shared memory, both
    K-major (descriptor SBO 1024 B, +32 B per k16 step inside a 128-B
    panel, next panel after 4 steps).  O += P V: wgmma m64n<D>k16 with A =
    P in registers (the S accumulators rounded in pairs: the wgmma
    accumulator layout is the register-A layout) and B = V from shared
    memory, MN-major (transpose bit; LBO = the V panel stride, SBO 1024 B,
    +2 KiB per 16 keys), the layout checked by the sm_90a nn matmul.
  * Intra-warpgroup overlap (FlashAttention-3 section 3.2): in iteration j
    a consumer issues S_j = Q K_j^T, then O += P_{j-1} V_{j-1}, waits for
    S_j only (wgmma.wait_group 1), computes the masked online softmax of S_j
    in place while P_{j-1} V_{j-1} runs on the tensor cores, then waits for
    it, rescales O and packs P_j.  Registers: S 64, P 32, O D/2.
  * Key blocks: n_end = min(Sk, last row + causal_off + 1) when causal, else
    Sk; blocks past n_end are never loaded.  Blocks that reach past Sk or
    past the causal diagonal of the CTA's first row take the masked path
    (one CTA-uniform branch per block).
  * Epilogue: l summed over the quad, O * (1 / l) (0 where l = 0), stored
    from the accumulators with 2-element stores under a row predicate;
    LSE = (m * scale_log2 + log2 l) * ln 2.
"""

import sys

from kaio_ptx import cli, manifest, mbarrier, tma, wgmma
from kaio_ptx.control import skip_if
from kaio_ptx.attention import (NAN, PAGED_PARAMS, VARLEN_PARAMS, VARLEN_PTRS, PagedKeys, bh_split, key_blocks,
                                mask_tile, out_base, store_rows, varlen_bounds, varlen_sequence)
from kaio_ptx.literals import LN2, NEG_INF
from kaio_ptx.params import load_params
from kaio_ptx.preamble import extern_shared, preamble
from kaio_ptx.ring import Ring
from kaio_ptx.sm90 import Kernel
from kaio_ptx.tma import PANEL
from kaio_ptx.warp import quad_reduce

OUTPUT = "attention_fwd_sm90.ptx"
SMEM = "kaio_attn90_smem"
BM = 128                    # query rows per CTA: 64 per consumer warpgroup
BN = 128                    # keys per block
DIMS = (64, 128)
DTYPES = ("f16", "bf16")
STAGES = {64: 3, 128: 2}
PROD_REGS, CONS_REGS = 24, 240
NTHREADS = 384

HEADER = preamble(__file__) + extern_shared(SMEM, 1024)

TMAPS = [(".align 64 .b8", "tmap_q[128]"), (".align 64 .b8", "tmap_k[128]"),
         (".align 64 .b8", "tmap_v[128]")]
SCALARS = [(".u64", "o"), (".u64", "lse"), (".u32", "seq_q"), (".u32", "seq_k"),
           (".u32", "heads_q"), (".u32", "group"), (".u64", "o_bs"), (".u64", "o_ss"),
           (".u64", "lse_rs"), (".f32", "scale_log2"), (".u32", "causal"), (".u32", "causal_off"),
           (".u32", "out_dtype")]


class Layout:
    """Byte offsets in the CTA's shared memory for head dim d."""

    def __init__(self, d, paged=False):
        self.panels = d // PANEL
        self.q_panel = BM * 128
        self.kv_panel = BN * 128
        self.q_bytes = self.panels * self.q_panel
        self.kv_bytes = self.panels * self.kv_panel          # one K (or V) block
        self.stages = STAGES[d]       # paged too: 3 stages at D 128 measured no faster
        self.kv_off = self.q_bytes
        self.bar_off = self.kv_off + self.stages * 2 * self.kv_bytes
        nbars = 1 + 4 * self.stages
        self.flag_off = self.bar_off + 8 * nbars             # paged: the producer's bad-page word
        self.shared = self.flag_off + (8 if paged else 0) + 1024  # + run-time 1024-B alignment slack

    def k_stage(self, s):
        return self.kv_off + 2 * s * self.kv_bytes

    # barrier offsets from the barrier base
    def q_full(self):
        return 0

    def k_full(self, s=0):
        return 8 * (1 + s)

    def v_full(self, s=0):
        return 8 * (1 + self.stages + s)

    def k_empty(self, s=0):
        return 8 * (1 + 2 * self.stages + s)

    def v_empty(self, s=0):
        return 8 * (1 + 3 * self.stages + s)


def producer(k, L, P, base, bars, b, h, hk, m0, nblocks, exit_, starts=None):
    """starts: (q_start, k_start) of a varlen kernel's sequence, added to the
    TMA row coordinates (b is then 0: the maps are over the packed rows)."""
    k.note("producer warpgroup: give registers back; one thread issues every TMA load")
    k.op("setmaxnreg.dec.sync.aligned.u32 %d" % PROD_REGS)
    tid = k.r("mov.u32", "%tid.x")
    k.op("@%s bra %s" % (k.p("setp.ne.u32", tid, 0), exit_))
    maps = {}
    for name in ("tmap_q", "tmap_k", "tmap_v"):
        maps[name] = k.rd("cvta.param.u64", k.rd("mov.b64", name))
        k.op("prefetch.tensormap [%s]" % maps[name])
    k.op("@%s bra %s" % (k.p("setp.eq.u32", nblocks, 0), exit_))
    q_full = k.r("add.u32", bars, L.q_full())
    mbarrier.arrive_expect_tx(k, q_full, L.q_bytes)
    qrow = m0 if starts is None else k.r("add.u32", m0, starts[0])
    for p in range(L.panels):
        tma.load(k, k.r("add.u32", base, p * L.q_panel), maps["tmap_q"], (p * PANEL, h, qrow, b), q_full)
    ring = Ring(k, bars, L.stages, L.k_full(), L.k_empty())
    j = k.r("mov.u32", 0)
    top = k.label("p_block")
    k.place(top)
    kv0 = k.r("shl.b32", j, BN.bit_length() - 1)
    if starts is not None:
        kv0 = k.r("add.u32", kv0, starts[1])
    stage = k.r("add.u32", base, k.r("add.u32", k.r("mul.lo.u32", ring.s, 2 * L.kv_bytes), L.kv_off))
    off8 = ring.offset()
    pph = ring.parity()
    for tag, full_off, empty_off, soff in (("tmap_k", L.k_full(), L.k_empty(), 0),
                                           ("tmap_v", L.v_full(), L.v_empty(), L.kv_bytes)):
        full = ring.acquire(L.kv_bytes, full_off, empty_off, off8, pph)
        for p in range(L.panels):
            tma.load(k, k.r("add.u32", stage, soff + p * L.kv_panel), maps[tag],
                     (p * PANEL, hk, kv0, b), full)
    ring.advance()
    k.op("add.u32 %s, %s, 1" % (j, j))
    k.op("@%s bra %s" % (k.p("setp.lt.u32", j, nblocks), top))
    k.op("bra.uni %s" % exit_)


def paged_producer(k, L, P, base, bars, h, hk, m0, nblocks, exit_, pages):
    """The paged kernel's producer: warp 0, lane i loads box i of every key
    block, 1 << shift rows from the pool row of its first key (shift =
    min(page_shift, log2 BN): a box never crosses a page; the host encodes
    tmap_k and tmap_v with that box).  The boxes land 2^(shift + 7) bytes
    apart, whole 1024-B swizzle atoms, so the stage's layout is the
    contiguous kernel's.  A box whose first key is past the sequence is not
    loaded (its table entry is never read; the consumers zero those V rows).
    Block j + 1's table entry is loaded before block j waits for its stages
    (checked only when block j + 1 is issued), off the loads' critical path.
    A bad page id reads page 0 and sets the shared bad word, which the
    consumers read after their last full wait (ordered by the warp barrier
    and lane 0's arrive)."""
    k.note("producer warpgroup: give registers back; warp 0 loads, lane i box i of a key block")
    k.op("setmaxnreg.dec.sync.aligned.u32 %d" % PROD_REGS)
    tid = k.r("mov.u32", "%tid.x")
    k.op("@%s bra %s" % (k.p("setp.ge.u32", tid, 32), exit_))
    k.op("@%s bra %s" % (k.p("setp.eq.u32", nblocks, 0), exit_))
    lane0 = k.p("setp.eq.u32", tid, 0)
    tmap = lambda name: k.rd("cvta.param.u64", k.rd("mov.b64", name))
    q_full = k.r("add.u32", bars, L.q_full())
    with skip_if(k, "!" + lane0, "q_issued"):
        for name in ("tmap_q", "tmap_k", "tmap_v"):
            k.op("prefetch.tensormap [%s]" % tmap(name))
        mbarrier.arrive_expect_tx(k, q_full, L.q_bytes)
        qrow = k.r("add.u32", m0, P["q_start"])
        for p in range(L.panels):
            tma.load(k, k.r("add.u32", base, p * L.q_panel), tmap("tmap_q"), (p * PANEL, h, qrow, 0), q_full)
    shift = k.r("min.u32", P["page_shift"], BN.bit_length() - 1)
    koff = k.r("shl.b32", tid, shift)                   # this lane's first key in a block
    mine = k.p("setp.lt.u32", koff, BN)
    box_bytes = k.r("shl.b32", L.panels * 128, shift)   # one box, every panel
    flag = k.r("add.u32", base, L.flag_off)
    ring = Ring(k, bars, L.stages, L.k_full(), L.k_empty())
    k.note("the table entry of block j + 1 loads while block j waits for its stages")
    key = k.r("mov.u32", koff)
    page = pages.load_pages([key], [k.p("setp.lt.and.u32", key, pages.length, mine)])[0]
    j = k.r("mov.u32", 0)
    top = k.label("p_block")
    k.place(top)
    ok = k.p("setp.lt.and.u32", key, pages.length, mine)
    key_next = k.r("add.u32", key, BN)
    page_next = pages.load_pages([key_next], [k.p("setp.lt.and.u32", key_next, pages.length, mine)])[0]
    row = k.r("cvt.u32.u64", pages.check_pages([page], [key])[0])
    k.op("@%s st.shared.u32 [%s], 1" % (pages.bad, flag))
    nbytes = k.r("mul.lo.u32", k.r("popc.b32", k.r("vote.sync.ballot.b32", ok, "0xffffffff")), box_bytes)
    stage = k.r("add.u32", base, k.r("add.u32", k.r("mul.lo.u32", ring.s, 2 * L.kv_bytes), L.kv_off))
    dst = k.r("add.u32", stage, k.r("shl.b32", koff, 7))
    off8 = ring.offset()
    pph = ring.parity()
    for tag, full_off, empty_off, soff in (("tmap_k", L.k_full(), L.k_empty(), 0),
                                           ("tmap_v", L.v_full(), L.v_empty(), L.kv_bytes)):
        ring.wait_empty(pph, empty_off, off8)
        k.op("bar.warp.sync -1")
        full = ring.bar(full_off, off8=off8)
        k.op("@%s mbarrier.arrive.expect_tx.shared::cta.b64 _, [%s], %s" % (lane0, full, nbytes))
        k.op("bar.warp.sync -1")
        m = tmap(tag)
        for p in range(L.panels):
            tma.load(k, k.r("add.u32", dst, soff + p * L.kv_panel), m, (p * PANEL, hk, row, 0), full, ok)
    ring.advance()
    k.op("mov.u32 %s, %s" % (key, key_next))
    k.op("mov.u32 %s, %s" % (page, page_next))
    k.op("add.u32 %s, %s, 1" % (j, j))
    k.op("@%s bra %s" % (k.p("setp.lt.u32", j, nblocks), top))
    k.op("bra.uni %s" % exit_)


class Consumer:
    """One consumer warpgroup's state and code: 64 query rows."""

    def __init__(self, k, L, P, dt, d, base, bars, m0, nblocks, first_mask, pages=None):
        """pages: the paged kernel's PagedKeys (its length bounds the keys;
        its bad, or the producer's bad word, makes the rows NaN)."""
        self.pages = pages
        self.k, self.L, self.P, self.dt, self.d = k, L, P, dt, d
        self.base, self.bars, self.nblocks, self.first_mask = base, bars, nblocks, first_mask
        tid = k.r("mov.u32", "%tid.x")
        cw = k.r("sub.u32", k.r("shr.u32", tid, 7), 1)
        warp = k.r("and.b32", k.r("shr.u32", tid, 5), 3)
        self.lane = k.r("and.b32", tid, 31)
        self.lane0 = k.p("setp.eq.u32", self.lane, 0)
        g = k.r("shr.u32", self.lane, 2)
        self.t2 = k.r("shl.b32", k.r("and.b32", self.lane, 3), 1)
        self.row0 = k.r("add.u32", m0, k.r("add.u32", k.r("shl.b32", cw, 6),
                                           k.r("add.u32", k.r("shl.b32", warp, 4), g)))
        causal = k.p("setp.ne.u32", P["causal"], 0)
        self.lims = []
        for r in range(2):
            row = k.r("add.u32", self.row0, 8 * r)
            lim = k.r("min.s32", k.r("add.s32", k.r("add.s32", row, P["causal_off"]), 1), P["seq_k"])
            self.lims.append(k.r("selp.b32", lim, P["seq_k"], causal))
        # Q descriptors, one per panel: this warpgroup's 64 rows start 8 KiB into each panel
        q_rows = k.r("add.u32", base, k.r("shl.b32", cw, 13))
        self.q_desc = [wgmma.desc(k, k.r("add.u32", q_rows, p * L.q_panel), 16, 1024) for p in range(L.panels)]
        self.S = k.regs("f", BN // 2)
        self.O = k.regs("f", d // 2)
        self.Pf = k.regs("r", BN // 4)
        self.m = [k.reg("f") for _ in range(2)]
        self.l = [k.reg("f") for _ in range(2)]

    def wgmma_s(self, kstage):
        """Issues S = Q K^T over the stage at shared address kstage (one commit group)."""
        k, L = self.k, self.L
        kd = [wgmma.desc(k, k.r("add.u32", kstage, p * L.kv_panel), 16, 1024) for p in range(L.panels)]
        for kk in range(self.d // 16):
            p, w = divmod(kk, 4)
            wgmma.mma(k, self.dt, BN, self.S, wgmma.advance(k, self.q_desc[p], 32 * w),
                      wgmma.advance(k, kd[p], 32 * w), 0 if kk == 0 else 1)
        wgmma.commit(k)

    def wgmma_pv(self, vstage):
        """Issues O += P V over the stage's V at shared address vstage (one commit group)."""
        k, L = self.k, self.L
        vd = wgmma.desc(k, vstage, L.kv_panel, 1024)
        for j in range(BN // 16):
            wgmma.mma(k, self.dt, self.d, self.O, self.Pf[4 * j:4 * j + 4],
                      wgmma.advance(k, vd, 16 * 128 * j), 1, trans_b=1)
        wgmma.commit(k)

    def mask(self, kv0):
        k = self.k
        skip = k.label("no_mask")
        k.op("@%s bra.uni %s" % (k.p("setp.le.s32", kv0, self.first_mask), skip))
        tiles = [self.S[4 * c:4 * c + 4] for c in range(BN // 8)]
        mask_tile(k, tiles, kv0, self.lims, BN, NEG_INF, self.t2)
        k.place(skip)

    def tree(self, op, vals):
        """Reduces vals pairwise (a short dependency chain); returns a fresh register."""
        k = self.k
        vals = list(vals)
        while len(vals) > 1:
            nxt = [k.f(op, vals[i], vals[i + 1]) for i in range(0, len(vals) - 1, 2)]
            if len(vals) % 2:
                nxt.append(vals[-1])
            vals = nxt
        return vals[0]

    def softmax(self):
        """Online softmax of S in place (S becomes P in f32); returns the
        per-row correction factors for O."""
        k, sl2 = self.k, self.P["scale_log2"]
        corr = []
        for r in range(2):
            row = [self.S[4 * c + 2 * r + e] for c in range(BN // 8) for e in range(2)]
            mx = self.tree("max.f32", row)
            quad_reduce(k, mx, "max.f32")
            mnew = k.f("max.f32", self.m[r], mx)
            muse = k.f("selp.f32", "0f00000000", mnew, k.p("setp.eq.f32", mnew, NEG_INF))
            c = k.f("ex2.approx.ftz.f32", k.f("mul.f32", k.f("sub.f32", self.m[r], muse), sl2))
            k.op("mov.f32 %s, %s" % (self.m[r], mnew))
            negm = k.f("neg.f32", k.f("mul.f32", muse, sl2))
            for x in row:
                k.op("fma.rn.f32 %s, %s, %s, %s" % (x, x, sl2, negm))
                k.op("ex2.approx.ftz.f32 %s, %s" % (x, x))
            total = self.tree("add.f32", row)
            k.op("fma.rn.f32 %s, %s, %s, %s" % (self.l[r], self.l[r], c, total))
            corr.append(c)
        return corr

    def rescale_and_pack(self, corr):
        k = self.k
        for i, x in enumerate(self.O):
            k.op("mul.f32 %s, %s, %s" % (x, x, corr[(i >> 1) & 1]))
        for i in range(BN // 4):
            k.op("cvt.rn.%sx2.f32 %s, %s, %s" % (self.dt, self.Pf[i], self.S[2 * i + 1], self.S[2 * i]))

    def run(self, exit_):
        k, L, P = self.k, self.L, self.P
        k.op("setmaxnreg.inc.sync.aligned.u32 %d" % CONS_REGS)
        for r in range(2):
            k.op("mov.f32 %s, %s" % (self.m[r], NEG_INF))
            k.op("mov.f32 %s, 0f00000000" % self.l[r])
        for x in self.O:
            k.op("mov.f32 %s, 0f00000000" % x)
        done = k.label("blocks_done")
        k.op("@%s bra.uni %s" % (k.p("setp.eq.u32", self.nblocks, 0), done))
        k.wait(k.r("add.u32", self.bars, L.q_full()), 0, "q_full")
        ring = Ring(k, self.bars, L.stages, L.k_full(), L.k_empty())
        s, ph = ring.s, ring.ph
        stage = lambda ring: k.r("add.u32", self.base, k.r("add.u32", k.r("mul.lo.u32", ring, 2 * L.kv_bytes), L.kv_off))

        k.note("block 0: S_0 = Q K_0^T, softmax, P_0")
        ring.wait_full(hint="k_full")
        wgmma.fence(k)
        self.wgmma_s(stage(s))
        wgmma.wait(k, 0)
        ring.release(self.lane0)
        self.mask(k.r("mov.u32", 0))
        self.rescale_and_pack(self.softmax())
        # ps, pph: the previous block's stage and phase (its V is read one block later)
        ps = k.r("mov.u32", s)
        pph = k.r("mov.u32", ph)
        j = k.r("mov.u32", 1)
        tail = k.label("last_pv")
        k.op("@%s bra.uni %s" % (k.p("setp.ge.u32", j, self.nblocks), tail))
        ring.advance()
        top = k.label("c_block")
        k.place(top)
        k.note("S_j = Q K_j^T and O += P_{j-1} V_{j-1} in flight; softmax(S_j) overlaps the second")
        ring.wait_full(hint="k_full")
        wgmma.fence(k)
        self.wgmma_s(stage(s))
        ring.wait_full(L.v_full(), ps, pph, "v_full")
        self.wgmma_pv(k.r("add.u32", stage(ps), L.kv_bytes))
        wgmma.wait(k, 1)
        ring.release(self.lane0)
        self.mask(k.r("shl.b32", j, BN.bit_length() - 1))
        corr = self.softmax()
        wgmma.wait(k, 0)
        ring.release(self.lane0, ps, L.v_empty())
        self.rescale_and_pack(corr)
        k.op("mov.u32 %s, %s" % (ps, s))
        k.op("mov.u32 %s, %s" % (pph, ph))
        ring.advance()
        k.op("add.u32 %s, %s, 1" % (j, j))
        k.op("@%s bra.uni %s" % (k.p("setp.lt.u32", j, self.nblocks), top))
        k.place(tail)
        ring.wait_full(L.v_full(), ps, pph, "v_full")
        if self.pages:
            self.zero_v_tail(k.r("add.u32", stage(ps), L.kv_bytes))
        wgmma.fence(k)
        self.wgmma_pv(k.r("add.u32", stage(ps), L.kv_bytes))
        wgmma.wait(k, 0)
        ring.release(self.lane0, ps, L.v_empty())
        k.place(done)
        self.epilogue()
        k.op("bra.uni %s" % exit_)

    def zero_v_tail(self, vstage):
        """Paged: zeroes the last block's V rows past the sequence (the rest
        of its last page, or boxes never loaded: any bits, NaN included,
        and P = 0 there would still give NaN).  Both warpgroups write the
        same zeros; each orders its own for its wgmma."""
        k, L = self.k, self.L
        rem = k.r("sub.u32", self.P["seq_k"], k.r("shl.b32", k.r("sub.u32", self.nblocks, 1), BN.bit_length() - 1))
        with skip_if(k, k.p("setp.ge.u32", rem, BN), "v_whole", uni=True):
            z = k.r("mov.b32", 0)
            off = k.r("add.u32", k.r("shl.b32", rem, 7), k.r("shl.b32", k.r("and.b32", k.r("mov.u32", "%tid.x"), 127), 4))
            top, done = k.label("zero_v"), k.label("zeroed")
            k.place(top)
            k.op("@%s bra %s" % (k.p("setp.ge.u32", off, BN * 128), done))
            for p in range(L.panels):
                k.op("st.shared.v4.b32 [%s+%d], {%s, %s, %s, %s}" % (k.r("add.u32", vstage, off), p * L.kv_panel, z, z, z, z))
            k.op("add.u32 %s, %s, %d" % (off, off, 128 * 16))
            k.op("bra %s" % top)
            k.place(done)
            k.op("fence.proxy.async.shared::cta")
            cw = k.r("shr.u32", k.r("mov.u32", "%tid.x"), 7)
            k.op("bar.sync %s, 128" % cw)     # named barrier 1 or 2: this warpgroup

    def epilogue(self):
        k, P, d = self.k, self.P, self.d
        k.note("epilogue: O = acc / l, LSE = (m scale_log2 + log2 l) ln 2")
        bad = None
        if self.pages:
            k.note("a bad length, or a bad page the producer read, makes the rows NaN")
            word = k.r("ld.shared.u32", "[%s]" % k.r("add.u32", self.base, self.L.flag_off))
            bad = k.p("setp.ne.or.u32", word, 0, self.pages.bad)
        lse_vals = []
        for r in range(2):
            quad_reduce(k, self.l[r], "add.f32")
            pos = k.p("setp.gt.f32", self.l[r], "0f00000000")
            inv = k.f("selp.f32", k.f("rcp.approx.ftz.f32", self.l[r]), "0f00000000", pos)
            if bad:
                inv = k.f("selp.f32", NAN, inv, bad)
            for i, x in enumerate(self.O):
                if (i >> 1) & 1 == r:
                    k.op("mul.f32 %s, %s, %s" % (x, x, inv))
            lse2 = k.f("fma.rn.f32", self.m[r], P["scale_log2"], k.f("lg2.approx.ftz.f32", self.l[r]))
            lse_vals.append(k.f("selp.f32", k.f("mul.f32", lse2, LN2), NEG_INF, pos))
            if bad:
                lse_vals[-1] = k.f("selp.f32", NAN, lse_vals[-1], bad)
        ob = out_base(k, P["o"], P["b"], P["o_bs"], P["h"], d, P["out_dtype"])
        tiles = [self.O[4 * c:4 * c + 4] for c in range(d // 8)]
        store_rows(k, tiles, d, self.row0, P["seq_q"], ob, P["o_ss"], P["out_dtype"], self.t2)
        no_lse = k.label("no_lse")
        k.op("@%s bra.uni %s" % (k.p("setp.eq.u64", P["lse"], 0), no_lse))
        if "q_start" in P:      # varlen: LSE [heads_q, total_q], row h, column q_start + s
            el = k.rd("add.u64", k.rd("mul.lo.u64", k.wide(P["h"]), P["lse_rs"]), k.wide(P["q_start"]))
            lptr = k.rd("add.u64", P["lse"], k.rd("shl.b64", el, 2))
        else:
            lrow = k.r("add.u32", k.r("mul.lo.u32", P["b"], P["heads_q"]), P["h"])
            lptr = k.rd("add.u64", P["lse"], k.rd("shl.b64", k.rd("mul.lo.u64", k.rd("cvt.u64.u32", lrow), P["lse_rs"]), 2))
        lead = k.p("setp.eq.u32", self.t2, 0)
        for r in range(2):
            row = k.r("add.u32", self.row0, 8 * r)
            ok = k.p("setp.lt.and.u32", row, P["seq_q"], lead)
            k.op("@%s st.global.f32 [%s], %s" % (ok, k.rd("add.u64", lptr, k.rd("mul.wide.u32", row, 4)), lse_vals[r]))
        k.place(no_lse)


def fwd_kernel(dt, d, varlen=False, paged=False):
    """varlen: packed sequences (kaio_ptx.attention.VARLEN_PARAMS after the
    scalars; maps over the packed rows, one batch), grid x over the longest
    sequence, LSE [heads_q, total_q].  Rows past a sequence's end are read
    (its tiles reach into the next sequence) but masked or never stored.
    paged: chunked prefill, PAGED_PARAMS instead: queries as varlen's, the
    keys of sequence b (0 .. min(lens[b], seq_k) - 1, PagedKeys) in the
    pools that tmap_k and tmap_v map as one batch of num_pages * page_size
    rows, with box rows min(page_size, BN) (paged_producer)."""
    kind = "_paged" if paged else "_varlen" if varlen else ""
    name = "kaio_attn_fwd%s_sm90_%s_d%d" % (kind, dt, d)
    manifest.keys(name, **{"select": "attn_fwd%s_sm90" % kind, "pass": "fwd", "dtype": dt, "head_dim": d})
    L = Layout(d, paged)
    k = Kernel()
    scalars = SCALARS + (PAGED_PARAMS if paged else VARLEN_PARAMS if varlen else [])
    ptrs = ("cu_q", "table", "lens", "flag") if paged else VARLEN_PTRS if varlen else ()
    P = load_params(k, scalars, ("o", "lse") + ptrs)
    tid = k.r("mov.u32", "%tid.x")
    base = k.smem_base(SMEM)
    bars = k.r("add.u32", base, L.bar_off)
    _, b, h = bh_split(k, P["heads_q"])
    P["b"], P["h"] = b, h
    hk = k.r("div.u32", h, P["group"])
    # the last query blocks first: under a causal mask they have the most keys
    mb = k.r("sub.u32", k.r("sub.u32", k.r("mov.u32", "%nctaid.x"), 1), k.r("mov.u32", "%ctaid.x"))
    m0 = k.r("shl.b32", mb, BM.bit_length() - 1)
    starts, pages = None, None
    if paged:
        # no flag for a bad cu_seqlens_q pair here (an empty sequence): raising it
        # makes the m128 d128 sm_80 kernel spill
        q_start, len_q = varlen_bounds(k, P["cu_q"], b, P["total_q"], P["seq_q"])
        k.op("@%s ret" % k.p("setp.ge.u32", m0, len_q))
        pages = PagedKeys(k, P, b, tid)
        pages.report_length()
        bottom_right = k.p("setp.eq.u32", P["causal"], 1)
        P = dict(P, seq_q=len_q, seq_k=pages.length, q_start=q_start, b=q_start, o_bs=P["o_ss"],
                 causal_off=k.r("selp.b32", k.r("sub.u32", pages.length, len_q), 0, bottom_right))
    elif varlen:
        P = varlen_sequence(k, P, b)
        k.op("@%s ret" % k.p("setp.ge.u32", m0, P["seq_q"]))
        starts = (P["q_start"], P["k_start"])
        P["b"], P["o_bs"] = P["q_start"], P["o_ss"]     # O's "batch": the sequence's first row
        b = k.r("mov.u32", 0)
    nblocks, first_mask = key_blocks(k, P, m0, BM, BN)

    k.note("thread 0: init the barriers")
    if paged:
        k.op("@%s st.shared.u32 [%s+%d], 0" % (k.p("setp.eq.u32", tid, 0), base, L.flag_off))
    k.init_mbarriers(tid, bars, [(L.q_full(), 1)] + [
        x for s in range(L.stages)
        for x in ((L.k_full(s), 1), (L.v_full(s), 1), (L.k_empty(s), 8), (L.v_empty(s), 8))])
    exit_ = k.label("exit")
    consumer = k.label("consumer")
    k.op("@%s bra.uni %s" % (k.p("setp.ge.u32", tid, 128), consumer))
    if paged:
        paged_producer(k, L, P, base, bars, h, hk, m0, nblocks, exit_, pages)
    else:
        producer(k, L, P, base, bars, b, h, hk, m0, nblocks, exit_, starts)
    k.place(consumer)
    Consumer(k, L, P, dt, d, base, bars, m0, nblocks, first_mask, pages).run(exit_)
    k.place(exit_)
    k.op("ret")

    doc = ("%s: FlashAttention forward, %s, head dim %d, %d query rows x %d-key blocks per CTA,\n"
           "1 TMA producer + 2 wgmma consumer warpgroups, %d K/V stages." % (name, dt, d, BM, BN, L.stages))
    # paged: tmap_k's rows are the most a box holds; the host takes min(page_size, rows)
    ann = ["// kaio-tma: %s %s rank=4 dims=D,H,S,B box=%d,%d swizzle=128 dtype=%s" % (name, m, PANEL, rows, dt)
           for m, rows in (("tmap_q", BM), ("tmap_k", BN), ("tmap_v", BN))]
    ann.append("// kaio-launch: %s block=%d cols_per_block=%d" % (name, NTHREADS, BM))
    ann.append("// kaio-shared-bytes: %s %d" % (name, L.shared))
    if paged:
        doc += "\nPaged K/V: TMA boxes of min(page_size, %d) rows, one page each." % BN
    return k.entry_text(name, doc, ann, TMAPS + scalars, [".maxntid %d, 1, 1" % NTHREADS, ".minnctapersm 1"])


def generate():
    parts = [HEADER]
    for dt in DTYPES:
        for d in DIMS:
            parts.append("\n" + fwd_kernel(dt, d))
    for dt in DTYPES:
        for d in DIMS:
            parts.append("\n" + fwd_kernel(dt, d, varlen=True))
    for dt in DTYPES:
        for d in DIMS:
            parts.append("\n" + fwd_kernel(dt, d, paged=True))
    return {OUTPUT: "".join(parts)}


if __name__ == "__main__":
    sys.exit(cli.main(__file__, __doc__, generate))
