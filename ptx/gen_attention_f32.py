#!/usr/bin/env python3
"""Generate libkaio's f32 single-head FlashAttention kernels (KAIO's attention_flash
family): plain f32 FMA on the CUDA cores, no tensor cores, no 16-bit rounding.

    python3 ptx/gen_attention_f32.py --out-dir DIR  # write DIR/attention_f32.ptx

Tensors are row-major f32 [S, D] (row strides ld* in elements, any value >= D),
self-attention (one sequence length S), scale 1/sqrt(D) given by the host,
causal = top-left (key j visible to query i iff j <= i).  LSE: f32 [S], natural
log of sum_j exp(scale q_i.k_j); the backward reads it.

Kernels, for DM in {32, 64, 128, 256} (any D <= DM; 256 threads = 2 groups of
4 warps, 8 rows per warp, 32 rows per CTA, tiles of 32 keys or queries; the
two groups take alternate tiles of the other side and merge their partial
results in group order at the end, so one head of S = 4096, which fills only
128 CTAs, still keeps 8 warps per SM busy: 1.5x faster forward on the H100):
  kaio_attn_f32_fwd_d<DM>     grid ceil(S/32): O (and LSE when lse != 0)
  kaio_attn_f32_dq_d<DM>      grid ceil(S/32): dQ = scale sum_j dS_ij k_j
  kaio_attn_f32_dkdv_d<DM>    grid ceil(S/32): dK = scale sum_i dS_ij q_i, dV = sum_i P_ij dO_i
  with P = exp(scale S - LSE), dS = P (dO.v_j - dO.o_i).  No atomics, no workspace:
  rowsum(dO o O) is recomputed where needed, so the backward is deterministic.

Shared layout: the rows a warp owns are row-major with pitch DM (zero past D),
read as 16-byte broadcasts; the other side's 32-row tile is stored transposed
with pitch 33 words, so lanes reading one element per row (scores) and lanes
reading one column each (P.V accumulation) both hit 32 distinct banks.
"""

import sys

from kaio_ptx import cli, manifest
from kaio_ptx.attention import Kernel
from kaio_ptx.control import loop, skip_if
from kaio_ptx.literals import LN2, LOG2E, NEG_INF, NEG_LOG2E
from kaio_ptx.params import load_params
from kaio_ptx.preamble import extern_shared, preamble
from kaio_ptx.warp import warp_reduce

SMEM = "kaio_attn_smem"
DIMS = (32, 64, 128, 256)
RW = 8          # rows per warp
TILE = 32       # rows per CTA and per tile of the other side
TP = 33         # transposed tile pitch, words

COMMON = [(".u32", "seq"), (".u32", "dim"), (".f32", "scale"), (".u32", "causal")]
FWD_PARAMS = [(".u64", "q"), (".u64", "k"), (".u64", "v"), (".u64", "o"), (".u64", "lse"),
              (".u64", "ldq"), (".u64", "ldk"), (".u64", "ldv"), (".u64", "ldo")] + COMMON
BWD_PARAMS = [(".u64", "dout"), (".u64", "q"), (".u64", "k"), (".u64", "v"), (".u64", "o"),
              (".u64", "lse"), (".u64", "ga"), (".u64", "gb"),
              (".u64", "lddo"), (".u64", "ldq"), (".u64", "ldk"), (".u64", "ldv"), (".u64", "ldo"),
              (".u64", "ldga"), (".u64", "ldgb")] + COMMON


class Ctx:
    """groups: 4-warp groups that share the CTA's 32 rows and split the other
    side's tiles (group g takes tiles g, g + groups, ...), each with its own
    tile buffers and named barrier; their partial results are merged in group
    order at the end, so the sums stay deterministic."""

    def __init__(self, k, P, dm, groups=1):
        self.k, self.P, self.dm, self.groups = k, P, dm, groups
        tid = k.r("mov.u32", "%tid.x")
        self.group = k.r("shr.u32", tid, 7)
        self.tid = k.r("and.b32", tid, 127)
        self.lane = k.r("and.b32", self.tid, 31)
        self.warp = k.r("shr.u32", self.tid, 5)
        self.blk0 = k.r("shl.b32", k.r("mov.u32", "%ctaid.x"), 5)       # first row of this CTA
        self.base = k.r("mov.u32", SMEM)
        self.row_bytes = dm * 4                                          # row-side pitch
        self.tile_rows = TILE * dm * 4                                   # a row-side tile
        self.tile_t = dm * TP * 4                                        # a transposed tile
        self.sl2 = k.f("mul.f32", P["scale"], LOG2E)
        self.causal = k.p("setp.ne.u32", P["causal"], 0)

    def load(self, dst, src, ld, row0, transposed, whole_cta=False):
        """Rows row0 .. row0+31 of an [S, D] tensor at src (row stride ld
        elements) into shared dst: warp w of the group loads rows w + 4 rr,
        lanes over columns (whole_cta: the CTA's groups split the rows);
        zeros past S and past D (up to DM).  A runtime loop over rr keeps
        only DM/32 loads in flight (an unrolled one makes ptxas hoist all of
        them and spill in the register-heavy dK/dV kernel)."""
        k, P = self.k, self.P
        ldb = k.rd("shl.b64", ld, 2)
        first, step = self.warp, 4
        if whole_cta and self.groups > 1:
            first, step = k.r("add.u32", self.warp, k.r("shl.b32", self.group, 2)), 4 * self.groups
        if self.dm < 256:   # unrolled: measured spill-free for these sizes
            for rr in range(TILE // step):
                self.load_row(dst, src, ldb, row0, k.r("add.u32", first, step * rr), transposed)
            return
        row = k.r("mov.u32", first)
        with loop(k, "load", uni=True) as lp:
            self.load_row(dst, src, ldb, row0, row, transposed)
            k.op("add.u32 %s, %s, %d" % (row, row, step))
            lp.again(k.p("setp.lt.u32", row, TILE))

    def sync_group(self):
        """A barrier among this group's 128 threads (named barrier 1 + group)."""
        if self.groups == 1:
            self.k.op("bar.sync 0")
        else:
            self.k.op("bar.sync %s, 128" % self.k.r("add.u32", self.group, 1))

    def group_buffers(self, first, nbytes):
        """This group's copy of per-group shared buffers laid out from first."""
        return self.k.r("mad.lo.u32", self.group, nbytes, first) if self.groups > 1 else first

    def merge_sums(self, accs, scratch):
        """Groups > 0 leave their accumulators in shared scratch (per group,
        32 rows x DM); group 0 adds them in group order.  Returns the
        predicate 'this thread is in group 0' (the one that stores)."""
        k = self.k
        lead = k.p("setp.eq.u32", self.group, 0)
        if self.groups == 1:
            return lead
        nc = self.dm // 32
        per = TILE * self.dm * 4
        # element (row warp*8 + r, col lane + 32 c) at ((warp*8 + r)*DM + lane + 32 c)*4
        base = k.r("add.u32", scratch, k.r("shl.b32", k.r("add.u32", k.r("mul.lo.u32", self.warp, 8 * self.dm),
                                                          self.lane), 2))
        k.op("bar.sync 0")
        skip = k.label("merge_put")
        k.op("@%s bra.uni %s" % (lead, skip))
        mine = k.r("add.u32", base, k.r("mul.lo.u32", k.r("sub.u32", self.group, 1), per))
        for acc in accs:
            for r in range(RW):
                for c in range(nc):
                    k.op("st.shared.f32 [%s+%d], %s" % (mine, (r * self.dm + 32 * c) * 4, acc[r][c]))
            k.op("add.u32 %s, %s, %d" % (mine, mine, (self.groups - 1) * per))
        k.place(skip)
        k.op("bar.sync 0")
        done = k.label("merge_done")
        k.op("@!%s bra.uni %s" % (lead, done))
        ptr = k.r("mov.u32", base)
        for acc in accs:
            for g in range(1, self.groups):
                for r in range(RW):
                    for c in range(nc):
                        v = k.f("ld.shared.f32", "[%s+%d]" % (ptr, ((g - 1) * TILE * self.dm + r * self.dm + 32 * c) * 4))
                        k.op("add.f32 %s, %s, %s" % (acc[r][c], acc[r][c], v))
            k.op("add.u32 %s, %s, %d" % (ptr, ptr, (self.groups - 1) * per))
        k.place(done)
        return lead

    def load_row(self, dst, src, ldb, row0, row, transposed):
        k, P = self.k, self.P
        grow = k.r("add.u32", row0, row)
        rok = k.p("setp.lt.u32", grow, P["seq"])
        gptr = k.rd("add.u64", src, k.rd("add.u64", k.rd("mul.lo.u64", k.wide(grow), ldb),
                                           k.rd("mul.wide.u32", self.lane, 4)))
        if transposed:   # element (row, c) at (c*33 + row)*4
            sptr = k.r("add.u32", dst, k.r("shl.b32", k.r("add.u32", k.r("mul.lo.u32", self.lane, TP), row), 2))
        else:
            sptr = k.r("add.u32", dst, k.r("add.u32", k.r("mul.lo.u32", row, self.row_bytes),
                                            k.r("shl.b32", self.lane, 2)))
        for c in range(self.dm // 32):
            col = k.r("add.u32", self.lane, 32 * c)
            ok = k.p("setp.lt.and.u32", col, P["dim"], rok)
            val = k.f("mov.f32", "0f00000000")
            k.op("@%s ld.global.f32 %s, [%s+%d]" % (ok, val, gptr, 128 * c))
            step = 32 * TP * 4 if transposed else 128
            k.op("st.shared.f32 [%s+%d], %s" % (sptr, step * c, val))

    def dots(self, pairs):
        """For each (row-side tile, transposed tile): out[r] = sum_d row(warp*8 + r, d) *
        tile(d, lane) over d < ceil4(D).  Returns one list of 8 registers per pair."""
        k, P = self.k, self.P
        outs = [[k.f("mov.f32", "0f00000000") for _ in range(RW)] for _ in pairs]
        n4 = k.r("shr.u32", k.r("add.u32", P["dim"], 3), 2)
        rptrs = [k.r("add.u32", rows, k.r("mul.lo.u32", self.warp, RW * self.row_bytes)) for rows, _ in pairs]
        tptrs = [k.r("add.u32", tile, k.r("shl.b32", self.lane, 2)) for _, tile in pairs]
        i = k.r("mov.u32", 0)
        with loop(k, "dot", uni=True) as lp:
            lp.exit_if(k.p("setp.ge.u32", i, n4))
            for pi in range(len(pairs)):
                t = [k.reg("f") for _ in range(4)]
                for u in range(4):
                    k.op("ld.shared.f32 %s, [%s+%d]" % (t[u], tptrs[pi], u * TP * 4))
                for r in range(RW):
                    q = k.regs("f", 4)
                    k.op("ld.shared.v4.f32 {%s}, [%s+%d]" % (", ".join(q), rptrs[pi], r * self.row_bytes))
                    for u in range(4):
                        k.op("fma.rn.f32 %s, %s, %s, %s" % (outs[pi][r], q[u], t[u], outs[pi][r]))
                k.op("add.u32 %s, %s, 16" % (rptrs[pi], rptrs[pi]))
                k.op("add.u32 %s, %s, %d" % (tptrs[pi], tptrs[pi], 4 * TP * 4))
            k.op("add.u32 %s, %s, 1" % (i, i))
            lp.again()
        return outs

    def accumulate(self, accs, weights, tile):
        """acc[r][c] += sum_j weights[r] (lane j's value) * tile(lane + 32 c, j)."""
        k = self.k
        ptr = k.r("add.u32", tile, k.r("mul.lo.u32", self.lane, TP * 4))
        nc = self.dm // 32
        for j in range(32):
            vals = [k.reg("f") for _ in range(nc)]
            for c in range(nc):   # element (lane + 32 c, j)
                k.op("ld.shared.f32 %s, [%s+%d]" % (vals[c], ptr, 32 * c * TP * 4 + 4 * j))
            for r in range(RW):
                w = k.reg("f")
                k.op("shfl.sync.idx.b32 %s, %s, %d, 0x1f, 0xffffffff" % (w, weights[r], j))
                for c in range(nc):
                    k.op("fma.rn.f32 %s, %s, %s, %s" % (accs[r][c], w, vals[c], accs[r][c]))

    def store(self, accs, dst, ld, row0, scale=None):
        """Rows row0 + warp*8 + r of an [S, D] output, lanes over columns."""
        k, P = self.k, self.P
        ldb = k.rd("shl.b64", ld, 2)
        for r in range(RW):
            row = k.r("add.u32", row0, k.r("add.u32", k.r("shl.b32", self.warp, 3), r))
            rok = k.p("setp.lt.u32", row, P["seq"])
            gptr = k.rd("add.u64", dst, k.rd("add.u64", k.rd("mul.lo.u64", k.wide(row), ldb),
                                               k.rd("mul.wide.u32", self.lane, 4)))
            for c in range(self.dm // 32):
                ok = k.p("setp.lt.and.u32", k.r("add.u32", self.lane, 32 * c), P["dim"], rok)
                v = accs[r][c] if scale is None else k.f("mul.f32", accs[r][c], scale)
                k.op("@%s st.global.f32 [%s+%d], %s" % (ok, gptr, 128 * c, v))

    def key_tiles_begin(self, s_k, s_v):
        """Opens the loop over the key tiles the CTA's query rows may see
        ([0, S), or [0, min(S, blk0 + 32)) when causal), loading each tile's K
        and V transposed; returns (kv0, this lane's key, key < S)."""
        k, P = self.k, self.P
        n_end = k.r("selp.b32", k.r("min.u32", P["seq"], k.r("add.u32", self.blk0, TILE)), P["seq"],
                    self.causal)
        self.ntiles = k.r("shr.u32", k.r("add.u32", n_end, TILE - 1), 5)
        self.t = k.r("mov.u32", self.group)
        self.loop, self.end = k.label("kv"), k.label("kv_end")
        k.place(self.loop)
        k.op("@%s bra.uni %s" % (k.p("setp.ge.u32", self.t, self.ntiles), self.end))
        kv0 = k.r("shl.b32", self.t, 5)
        self.load(s_k, P["k"], P["ldk"], kv0, True)
        self.load(s_v, P["v"], P["ldv"], kv0, True)
        self.sync_group()
        key = k.r("add.u32", kv0, self.lane)
        return key, k.p("setp.lt.u32", key, P["seq"])

    def key_tiles_end(self):
        k = self.k
        self.sync_group()
        k.op("add.u32 %s, %s, %d" % (self.t, self.t, self.groups))
        k.op("bra.uni %s" % self.loop)
        k.place(self.end)

    def zeros(self):
        return [[self.k.f("mov.f32", "0f00000000") for _ in range(self.dm // 32)] for _ in range(RW)]


# 4-warp groups per CTA: two, so that a head of S = 4096 (128 CTAs) keeps 8
# warps per SM busy; 256 threads leave each up to 255 registers.
GROUPS = 2


def kernel(kind, dm, params, smem):
    name = "kaio_attn_f32_%s_d%d" % (kind, dm)
    manifest.keys(name, **{"select": "attn_f32", "pass": kind, "head_dim": dm})
    doc = ("%s: f32 single-head attention %s, head dim <= %d, 32 rows per CTA, %d groups of 4 warps."
           % (name, kind, dm, GROUPS))
    k = Kernel(name, doc, params, smem, TILE)
    k.block = 128 * GROUPS
    # One CTA per SM is enough (the large-D kernels use over 168 registers);
    # without it ptxas aims at more CTAs and spills.
    k.min_ctas = 1
    return k


def fwd(dm):
    kv_bytes = 2 * dm * TP * 4
    smem = TILE * dm * 4 + GROUPS * kv_bytes
    k = kernel("fwd", dm, FWD_PARAMS, smem)
    P = load_params(k, FWD_PARAMS, ("q", "k", "v", "o"))
    x = Ctx(k, P, dm, GROUPS)
    s_q = x.base
    s_k = x.group_buffers(k.r("add.u32", x.base, x.tile_rows), kv_bytes)
    s_v = k.r("add.u32", s_k, x.tile_t)
    x.load(s_q, P["q"], P["ldq"], x.blk0, False, whole_cta=True)
    k.op("bar.sync 0")
    rows = [k.r("add.u32", x.blk0, k.r("add.u32", k.r("shl.b32", x.warp, 3), r)) for r in range(RW)]
    acc = x.zeros()
    m = [k.f("mov.f32", NEG_INF) for _ in range(RW)]
    l = [k.f("mov.f32", "0f00000000") for _ in range(RW)]
    key, kin = x.key_tiles_begin(s_k, s_v)
    (s,) = x.dots([(s_q, s_k)])
    for r in range(RW):
        vis = k.p("setp.le.or.u32", key, rows[r], k.p("not.pred", x.causal))
        ok = k.p("and.pred", vis, kin)
        k.op("selp.f32 %s, %s, %s, %s" % (s[r], s[r], NEG_INF, ok))
        mx = k.f("mov.f32", s[r])
        warp_reduce(k, mx, "max.f32")
        mnew = k.f("max.f32", m[r], mx)
        muse = k.f("selp.f32", "0f00000000", mnew, k.p("setp.eq.f32", mnew, NEG_INF))
        alpha = k.f("ex2.approx.f32", k.f("mul.f32", k.f("sub.f32", m[r], muse), x.sl2))
        k.op("mov.f32 %s, %s" % (m[r], mnew))
        k.op("ex2.approx.f32 %s, %s" % (s[r], k.f("mul.f32", k.f("sub.f32", s[r], muse), x.sl2)))
        psum = k.f("mov.f32", s[r])
        warp_reduce(k, psum, "add.f32")
        k.op("fma.rn.f32 %s, %s, %s, %s" % (l[r], l[r], alpha, psum))
        for c in range(dm // 32):
            k.op("mul.f32 %s, %s, %s" % (acc[r][c], acc[r][c], alpha))
    x.accumulate(acc, s, s_v)
    x.key_tiles_end()
    merge_softmax(k, x, m, l, acc, k.r("add.u32", x.base, x.tile_rows))
    done = k.label("not_group0")
    k.op("@%s bra.uni %s" % (k.p("setp.ne.u32", x.group, 0), done))
    lse_ok = k.p("setp.ne.u64", P["lse"], 0)
    lead = k.p("setp.eq.and.u32", x.lane, 0, lse_ok)
    for r in range(RW):
        pos = k.p("setp.gt.f32", l[r], "0f00000000")
        inv = k.f("selp.f32", k.f("rcp.rn.f32", l[r]), "0f00000000", pos)
        for c in range(dm // 32):
            k.op("mul.f32 %s, %s, %s" % (acc[r][c], acc[r][c], inv))
        lse = k.f("fma.rn.f32", m[r], P["scale"], k.f("mul.f32", k.f("lg2.approx.f32", l[r]), LN2))
        lse = k.f("selp.f32", lse, NEG_INF, pos)
        ok = k.p("setp.lt.and.u32", rows[r], P["seq"], lead)
        k.op("@%s st.global.f32 [%s], %s" % (ok, k.rd("add.u64", P["lse"], k.rd("mul.wide.u32", rows[r], 4)), lse))
    x.store(acc, P["o"], P["ldo"], x.blk0)
    k.place(done)
    k.op("ret")
    return k.text()


def merge_softmax(k, x, m, l, acc, scratch):
    """Group 0 folds the other groups' online-softmax states (row max m,
    sum l, accumulators) into its own, in group order; scratch holds, per
    group > 0, 32 rows x DM accumulators then 32 (m, l) pairs."""
    if x.groups == 1:
        return
    dm, nc = x.dm, x.dm // 32
    per = TILE * dm * 4 + TILE * 8
    rows0 = k.r("mul.lo.u32", x.warp, RW)
    accp = k.r("add.u32", scratch, k.r("shl.b32", k.r("add.u32", k.r("mul.lo.u32", rows0, dm), x.lane), 2))
    mlp = k.r("add.u32", scratch, k.r("add.u32", k.r("shl.b32", rows0, 3), TILE * dm * 4))
    k.op("bar.sync 0")
    lead = k.p("setp.eq.u32", x.group, 0)
    put = k.label("merge_put")
    k.op("@%s bra.uni %s" % (lead, put))
    off = k.r("mul.lo.u32", k.r("sub.u32", x.group, 1), per)
    a, b = k.r("add.u32", accp, off), k.r("add.u32", mlp, off)
    for r in range(RW):
        for c in range(nc):
            k.op("st.shared.f32 [%s+%d], %s" % (a, (r * dm + 32 * c) * 4, acc[r][c]))
        k.op("st.shared.v2.f32 [%s+%d], {%s, %s}" % (b, 8 * r, m[r], l[r]))
    k.place(put)
    k.op("bar.sync 0")
    done = k.label("merge_done")
    k.op("@!%s bra.uni %s" % (lead, done))
    for g in range(1, x.groups):
        for r in range(RW):
            mg, lg = k.regs("f", 2)
            k.op("ld.shared.v2.f32 {%s, %s}, [%s+%d]" % (mg, lg, mlp, (g - 1) * per + 8 * r))
            mnew = k.f("max.f32", m[r], mg)
            muse = k.f("selp.f32", "0f00000000", mnew, k.p("setp.eq.f32", mnew, NEG_INF))
            e0 = k.f("ex2.approx.f32", k.f("mul.f32", k.f("sub.f32", m[r], muse), x.sl2))
            e1 = k.f("ex2.approx.f32", k.f("mul.f32", k.f("sub.f32", mg, muse), x.sl2))
            k.op("mov.f32 %s, %s" % (m[r], mnew))
            k.op("mul.f32 %s, %s, %s" % (l[r], l[r], e0))
            k.op("fma.rn.f32 %s, %s, %s, %s" % (l[r], lg, e1, l[r]))
            for c in range(nc):
                v = k.f("ld.shared.f32", "[%s+%d]" % (accp, (g - 1) * per + (r * dm + 32 * c) * 4))
                k.op("mul.f32 %s, %s, %s" % (acc[r][c], acc[r][c], e0))
                k.op("fma.rn.f32 %s, %s, %s, %s" % (acc[r][c], v, e1, acc[r][c]))
    k.place(done)


def row_dot(k, x, a_ptr, lda, b_ptr, ldb, row):
    """sum_d a[row, d] * b[row, d] of two global [S, D] tensors, lanes over d,
    reduced over the warp (0 when row >= S)."""
    P = x.P
    acc = k.f("mov.f32", "0f00000000")
    rok = k.p("setp.lt.u32", row, P["seq"])
    pa = k.rd("add.u64", a_ptr, k.rd("add.u64", k.rd("mul.lo.u64", k.wide(row), k.rd("shl.b64", lda, 2)),
                                       k.rd("mul.wide.u32", x.lane, 4)))
    pb = k.rd("add.u64", b_ptr, k.rd("add.u64", k.rd("mul.lo.u64", k.wide(row), k.rd("shl.b64", ldb, 2)),
                                       k.rd("mul.wide.u32", x.lane, 4)))
    for c in range(x.dm // 32):
        ok = k.p("setp.lt.and.u32", k.r("add.u32", x.lane, 32 * c), P["dim"], rok)
        va, vb = k.f("mov.f32", "0f00000000"), k.f("mov.f32", "0f00000000")
        k.op("@%s ld.global.f32 %s, [%s+%d]" % (ok, va, pa, 128 * c))
        k.op("@%s ld.global.f32 %s, [%s+%d]" % (ok, vb, pb, 128 * c))
        k.op("fma.rn.f32 %s, %s, %s, %s" % (acc, va, vb, acc))
    warp_reduce(k, acc, "add.f32")
    return acc


def dq(dm):
    """ga = dQ."""
    kv_bytes = 2 * dm * TP * 4
    smem = 2 * TILE * dm * 4 + GROUPS * kv_bytes
    k = kernel("dq", dm, BWD_PARAMS, smem)
    P = load_params(k, BWD_PARAMS, ("dout", "q", "k", "v", "o", "lse", "ga"))
    x = Ctx(k, P, dm, GROUPS)
    s_q = x.base
    s_do = k.r("add.u32", x.base, x.tile_rows)
    s_k = x.group_buffers(k.r("add.u32", s_do, x.tile_rows), kv_bytes)
    s_v = k.r("add.u32", s_k, x.tile_t)
    x.load(s_q, P["q"], P["ldq"], x.blk0, False, whole_cta=True)
    x.load(s_do, P["dout"], P["lddo"], x.blk0, False, whole_cta=True)
    k.op("bar.sync 0")
    rows = [k.r("add.u32", x.blk0, k.r("add.u32", k.r("shl.b32", x.warp, 3), r)) for r in range(RW)]
    dvals, nl = [], []
    for r in range(RW):
        dvals.append(row_dot(k, x, P["dout"], P["lddo"], P["o"], P["ldo"], rows[r]))
        lv = k.f("mov.f32", "0f00000000")
        k.op("@%s ld.global.f32 %s, [%s]" % (k.p("setp.lt.u32", rows[r], P["seq"]), lv,
                                            k.rd("add.u64", P["lse"], k.rd("mul.wide.u32", rows[r], 4))))
        nl.append(k.f("mul.f32", lv, NEG_LOG2E))
    acc = x.zeros()
    key, kin = x.key_tiles_begin(s_k, s_v)
    s, dp = x.dots([(s_q, s_k), (s_do, s_v)])
    for r in range(RW):
        vis = k.p("setp.le.or.u32", key, rows[r], k.p("not.pred", x.causal))
        ok = k.p("and.pred", vis, kin)
        p = k.f("ex2.approx.f32", k.f("fma.rn.f32", s[r], x.sl2, nl[r]))
        p = k.f("selp.f32", p, "0f00000000", ok)
        k.op("sub.f32 %s, %s, %s" % (dp[r], dp[r], dvals[r]))
        k.op("mul.f32 %s, %s, %s" % (dp[r], dp[r], p))
    x.accumulate(acc, dp, s_k)
    x.key_tiles_end()
    lead = x.merge_sums([acc], k.r("add.u32", s_do, x.tile_rows))
    done = k.label("not_group0")
    k.op("@!%s bra.uni %s" % (lead, done))
    x.store(acc, P["ga"], P["ldga"], x.blk0, scale=P["scale"])
    k.place(done)
    k.op("ret")
    return k.text()


def dkdv(dm):
    """ga = dK, gb = dV."""
    q_bytes = 2 * dm * TP * 4 + 2 * TILE * 4
    smem = 2 * TILE * dm * 4 + max(GROUPS * q_bytes, 2 * (GROUPS - 1) * TILE * dm * 4)
    k = kernel("dkdv", dm, BWD_PARAMS, smem)
    P = load_params(k, BWD_PARAMS, ("dout", "q", "k", "v", "o", "lse", "ga", "gb"))
    x = Ctx(k, P, dm, GROUPS)
    s_k = x.base
    s_v = k.r("add.u32", x.base, x.tile_rows)
    s_q = x.group_buffers(k.r("add.u32", s_v, x.tile_rows), q_bytes)
    s_do = k.r("add.u32", s_q, x.tile_t)
    s_l = k.r("add.u32", s_do, x.tile_t)      # LSE of the tile's queries
    s_d = k.r("add.u32", s_l, TILE * 4)       # rowsum(dO o O) of the tile's queries
    x.load(s_k, P["k"], P["ldk"], x.blk0, False, whole_cta=True)
    x.load(s_v, P["v"], P["ldv"], x.blk0, False, whole_cta=True)
    k.op("bar.sync 0")
    keys = [k.r("add.u32", x.blk0, k.r("add.u32", k.r("shl.b32", x.warp, 3), r)) for r in range(RW)]
    # query tiles: from blk0/32 when causal (queries i >= key), else 0
    t = k.r("add.u32", k.r("selp.b32", k.r("mov.u32", "%ctaid.x"), 0, x.causal), x.group)
    ntiles = k.r("shr.u32", k.r("add.u32", P["seq"], TILE - 1), 5)
    dk, dv = x.zeros(), x.zeros()
    with loop(k, "q", uni=True) as lp:
        lp.exit_if(k.p("setp.ge.u32", t, ntiles))
        q0 = k.r("shl.b32", t, 5)
        x.load(s_q, P["q"], P["ldq"], q0, True)
        x.load(s_do, P["dout"], P["lddo"], q0, True)
        for rr in range(RW):
            qi = k.r("add.u32", k.r("shl.b32", x.warp, 3), rr)
            qrow = k.r("add.u32", q0, qi)
            dsum = row_dot(k, x, P["dout"], P["lddo"], P["o"], P["ldo"], qrow)
            lv = k.f("mov.f32", "0f00000000")
            k.op("@%s ld.global.f32 %s, [%s]" % (k.p("setp.lt.u32", qrow, P["seq"]), lv,
                                                k.rd("add.u64", P["lse"], k.rd("mul.wide.u32", qrow, 4))))
            lead = k.p("setp.eq.u32", x.lane, 0)
            off = k.r("shl.b32", qi, 2)
            k.op("@%s st.shared.f32 [%s], %s" % (lead, k.r("add.u32", s_l, off), lv))
            k.op("@%s st.shared.f32 [%s], %s" % (lead, k.r("add.u32", s_d, off), dsum))
        x.sync_group()
        s, dp = x.dots([(s_k, s_q), (s_v, s_do)])
        query = k.r("add.u32", q0, x.lane)
        qin = k.p("setp.lt.u32", query, P["seq"])
        lane4 = k.r("shl.b32", x.lane, 2)
        nl = k.f("mul.f32", k.f("ld.shared.f32", "[%s]" % k.r("add.u32", s_l, lane4)), NEG_LOG2E)
        dq_ = k.f("ld.shared.f32", "[%s]" % k.r("add.u32", s_d, lane4))
        for r in range(RW):
            vis = k.p("setp.ge.or.u32", query, keys[r], k.p("not.pred", x.causal))
            ok = k.p("and.pred", vis, qin)
            p = k.f("ex2.approx.f32", k.f("fma.rn.f32", s[r], x.sl2, nl))
            k.op("selp.f32 %s, %s, 0f00000000, %s" % (s[r], p, ok))
            k.op("sub.f32 %s, %s, %s" % (dp[r], dp[r], dq_))
            k.op("mul.f32 %s, %s, %s" % (dp[r], dp[r], s[r]))
        x.accumulate(dv, s, s_do)
        x.accumulate(dk, dp, s_q)
        x.sync_group()
        k.op("add.u32 %s, %s, %d" % (t, t, GROUPS))
        lp.again()
    lead = x.merge_sums([dk, dv], k.r("add.u32", s_v, x.tile_rows))
    with skip_if(k, "!" + lead, "not_group0", uni=True):
        x.store(dk, P["ga"], P["ldga"], x.blk0, scale=P["scale"])
        x.store(dv, P["gb"], P["ldgb"], x.blk0)
    k.op("ret")
    return k.text()


def generate():
    parts = [preamble(__file__) + extern_shared(SMEM, 128)]
    for dm in DIMS:
        parts.append("\n" + fwd(dm))
        parts.append("\n" + dq(dm))
        parts.append("\n" + dkdv(dm))
    return {"attention_f32.ptx": "".join(parts)}


if __name__ == "__main__":
    sys.exit(cli.main(__file__, __doc__, generate))
