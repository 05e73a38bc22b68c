#!/usr/bin/env python3
"""Generate libkaio's sm_80 FlashAttention-2-style kernels (mma.sync m16n8k16).

    python3 ptx/gen_attention_sm80.py --out-dir DIR  # write DIR/attention_fwd_sm80.ptx, DIR/attention_bwd_sm80.ptx

Only the Python standard library is used; the output depends on nothing but this
file and ptx/kaio_ptx.

Tensors (all element strides; a "row" is one (batch, position) of a BSHD tensor):
  Q  (b, s, h, d) at q + (b*q_bs + s*q_ss + h*D + d)*2      s < seq_q, h < heads_q
  K  (b, s, g, d) at k + (b*k_bs + s*k_ss + g*D + d)*2      s < seq_k, g = h / group
  V  like K with v_bs, v_ss;  O / dO / dQ like Q;  dK / dV like K
  LSE (b, h, s) f32 at lse + ((b*heads_q + h)*lse_rs + s)*4
  out_dtype: 1 = f32, 2 = f16, 3 = bf16 (kaio_dtype) for O, dQ, dK, dV.
Masking: key j is visible to query i iff j < seq_k and, when causal != 0,
  j <= i + causal_off (causal_off = seq_k - seq_q: bottom-right; 0: top-left).
Host guarantees: pointers 16-byte aligned, strides multiples of 8 elements,
  every row of every tensor in bounds, heads_q = group * heads_kv.

Kernels (dt in f16/bf16, D = head dim; 128 threads = 4 warps, 16 rows per warp, but pre):
  kaio_attn_fwd_<dt>_d<D>        grid (ceil(seq_q/64), B*heads_q)
  kaio_attn_fwd_m128_<dt>_d<D>   grid (ceil(seq_q/128), B*heads_q), D <= 128: the same with
      two m16 tiles (32 query rows) per warp, so each K/V fragment feeds two mma
      O = softmax(scale * Q K^T) V, LSE = logsumexp(scale * Q K^T) (natural log).
      The CTA's 64 query rows stay in shared memory; K/V tiles of BN keys are
      double-buffered with cp.async (tile j+1 is copied while tile j is
      multiplied).  Per tile and warp: S = Q K^T (ldmatrix Q as A, K as B),
      masking only in CTA-uniform edge tiles, online softmax in registers with
      ex2 and log2(e)-prescaled scores, P rounded to dt and fed from the S
      accumulators straight into P V as the A operand (ldmatrix.trans V).
      Rows whose keys are all masked give O = 0 and LSE = -inf.
  kaio_attn_bwd_pre_<dt>         grid (ceil(B*seq_q*heads_q/16)), 256 threads, 16 lanes per row:
      Dv[(b*heads_q + h)*seq_q + s] = sum_d dO * O   (O in dt or f32: o_f32)
  kaio_attn_bwd_dq_<dt>_d<D>     grid (ceil(seq_q/64), B*heads_q)
      per K/V tile: S = Q K^T, P = exp(scale S - LSE), dP = dO V^T,
      dS = P (dP - Dv), dQ += dS K; dQ *= scale.  No atomics.
  kaio_attn_bwd_dkdv_<dt>_d<D>   grid (ceil(seq_k/64), B*heads_kv)
      per query head of the group and Q/dO tile of BQ rows (double-buffered):
      S^T = K Q^T, P^T, dV += P^T dO, dP^T = V dO^T, dS^T = P^T (dP^T - Dv),
      dK += dS^T Q; dK *= scale.  GQA sums run in registers: no atomics.
  The backward is therefore deterministic: every output element is written
  once by one thread after a fixed-order reduction.

Shared tiles are [row][D] with a pitch of D+8 elements: 8 consecutive rows
of any 16-byte chunk fall in 8 distinct 16-byte bank groups, so ldmatrix and
cp.async stores are conflict-free without a swizzle (works for D = 96 too).
Out-of-range rows are cp.async zero fills (src-size 0, source clamped to the
tensor start); no byte outside the tensors is read or written.
"""

import contextlib
import sys

from kaio_ptx import cli, cp_async, kernel
from kaio_ptx.attention import (NAN, PAGED_PARAMS, VARLEN_PARAMS, VARLEN_PTRS, Kernel, PagedKeys, bh_split,
                                mask_tile, out_base, out_shift, rebase, store_rows, tensor_base,
                                varlen_bounds, varlen_sequence)
from kaio_ptx.control import if_else, loop, skip_if
from kaio_ptx.literals import LN2, NEG_INF
from kaio_ptx.mma import ldmatrix_x4, pack
from kaio_ptx.params import load_params
from kaio_ptx.preamble import extern_shared, preamble
from kaio_ptx.warp import quad_reduce

SMEM = "kaio_attn_smem"
HEADER = preamble(__file__) + extern_shared(SMEM, 128)
NTHREADS = 128
BM = 64                     # query rows per CTA (fwd, dq) / key rows per CTA (dkdv)
FWD_DIMS = (32, 64, 96, 128, 256)
BWD_DIMS = (32, 64, 96, 128)
FWD_M128_DIMS = (32, 64, 96, 128)   # also as 128-row forward kernels (two m16 tiles per warp)
DTYPES = ("f16", "bf16")


def pitch(d):
    return (d + 8) * 2


def mma(k, dt, d, a, b):
    k.op("mma.sync.aligned.m16n8k16.row.col.f32.%s.%s.f32 {%s}, {%s}, {%s}, {%s}"
         % (dt, dt, ", ".join(d), ", ".join(a), ", ".join(b), ", ".join(d)))


class Lanes:
    """Per-thread constants: warp, lane, g, t and the ldmatrix lane offsets
    (bytes from a tile's base) for a tile pitch."""

    def __init__(self, k, d, mt=1):
        self.tid = k.r("mov.u32", "%tid.x")
        self.lane = k.r("and.b32", self.tid, 31)
        self.warp = k.r("shr.u32", self.tid, 5)
        self.g = k.r("shr.u32", self.lane, 2)
        self.t2 = k.r("shl.b32", k.r("and.b32", self.lane, 3), 1)
        p = pitch(d)
        lane = self.lane
        l7 = k.r("and.b32", lane, 7)
        l15 = k.r("and.b32", lane, 15)
        b3 = k.r("and.b32", k.r("shr.u32", lane, 3), 1)
        b4 = k.r("shr.u32", lane, 4)
        # A operand ([m][k]) for this warp's 16 mt rows: row w*16*mt + (lane & 15), chunk lane >> 4
        # (m tile i at + 16 i rows)
        wrow = k.r("shl.b32", self.warp, (16 * mt).bit_length() - 1)
        self.a_off = k.r("add.u32", k.r("mul.lo.u32", k.r("add.u32", wrow, l15), p),
                         k.r("shl.b32", b4, 4))
        # B operand, [n][k]: row (lane & 7) + (lane >> 4)*8, chunk (lane >> 3) & 1
        self.b_off = k.r("add.u32", k.r("mul.lo.u32", k.r("add.u32", l7, k.r("shl.b32", b4, 3)), p),
                         k.r("shl.b32", b3, 4))
        # B operand, [k][n] via .trans: row (lane & 7) + ((lane >> 3) & 1)*8, chunk lane >> 4
        self.bt_off = k.r("add.u32", k.r("mul.lo.u32", k.r("add.u32", l7, k.r("shl.b32", b3, 3)), p),
                          k.r("shl.b32", b4, 4))


class TileLoader:
    """cp.async of an R x D tile (rows of a BSHD tensor) into shared memory
    with pitch D+8.  Thread tid moves chunk tid % (D/8) of rows
    tid / (D/8) + i * (128 / (D/8))."""

    def __init__(self, k, tid, rows, d):
        self.k, self.rows, self.d = k, rows, d
        self.cpr = d // 8
        self.rpi = NTHREADS // self.cpr
        self.iters = (rows + self.rpi - 1) // self.rpi
        self.trow = k.r("div.u32", tid, self.cpr) if self.cpr & (self.cpr - 1) else \
            k.r("shr.u32", tid, self.cpr.bit_length() - 1)
        tcol = k.r("sub.u32", tid, k.r("mul.lo.u32", self.trow, self.cpr))
        self.tcol16 = k.r("shl.b32", tcol, 4)
        self.soff = k.r("add.u32", k.r("mul.lo.u32", self.trow, pitch(d)), self.tcol16)

    def issue(self, dst, gbase, sstride_bytes, valid_rows, clamp):
        """dst: shared u32 address of the tile; gbase: global address of the
        tile's row 0; valid_rows: s32 count of rows that exist (may be <= 0)."""
        k = self.k
        gptr = k.rd("add.u64", gbase, k.rd("add.u64", k.rd("mul.lo.u64", k.wide(self.trow), sstride_bytes),
                                              k.wide(self.tcol16)))
        step = k.rd("mul.lo.u64", sstride_bytes, self.rpi)
        sdst = k.r("add.u32", dst, self.soff)
        for i in range(self.iters):
            row = k.r("add.u32", self.trow, i * self.rpi)
            ok = k.p("setp.lt.s32", row, valid_rows)
            size = k.r("selp.b32", 16, 0, ok)
            src = k.rd("selp.b64", gptr, clamp, ok)
            inside = None
            if self.rpi * self.cpr != NTHREADS or (i + 1) * self.rpi > self.rows:
                inside = k.p("setp.lt.u32", row, min(self.rows, (i + 1) * self.rpi))
            cp_async.copy(k, "%s+%d" % (sdst, i * self.rpi * pitch(self.d)), src, 16, size, inside)
            if i + 1 < self.iters:
                gptr = k.rd("add.u64", gptr, step)

    def issue_paged(self, dsts, kv0, valid_rows, pages, tensors):
        """The tile of keys kv0.. into each dsts[t] from tensors[t] = (base
        address of column 0 of the head, row stride in bytes, clamp): each row
        from its pool row (pages: PagedKeys), one table load per row shared by
        the tensors."""
        k = self.k
        rows, oks, insides = [], [], []
        for i in range(self.iters):
            row = k.r("add.u32", self.trow, i * self.rpi)
            rows.append(k.r("add.u32", kv0, row))
            oks.append(k.p("setp.lt.s32", row, valid_rows))
            insides.append(k.p("setp.lt.u32", row, min(self.rows, (i + 1) * self.rpi))
                           if self.rpi * self.cpr != NTHREADS or (i + 1) * self.rpi > self.rows else None)
        prows = pages.pool_rows(rows, oks)
        col = k.wide(self.tcol16)
        sdsts = [k.r("add.u32", dst, self.soff) for dst in dsts]
        for i in range(self.iters):
            size = k.r("selp.b32", 16, 0, oks[i])
            for sdst, (base, stride, clamp) in zip(sdsts, tensors):
                src = k.rd("add.u64", k.rd("add.u64", base, k.rd("mul.lo.u64", prows[i], stride)), col)
                src = k.rd("selp.b64", src, clamp, oks[i])
                cp_async.copy(k, "%s+%d" % (sdst, i * self.rpi * pitch(self.d)), src, 16, size,
                              insides[i])


def gemm_abT(k, dt, accs, a_addr, b_addr, d, ncols):
    """accs[i][nt] (m tile i: 16 x ncols, nt = ncols/8 n8 tiles) += A_i (16 x d,
    [m][k] at a_addr + 16 i rows, lane address) * B^T (B is ncols x d, [n][k]
    at b_addr lane address).  Each B fragment feeds every m tile."""
    p = pitch(d)
    for kk in range(d // 16):
        a = [ldmatrix_x4(k, a_addr, i * 16 * p + kk * 32) for i in range(len(accs))]
        for np_ in range(ncols // 16):
            b = ldmatrix_x4(k, b_addr, np_ * 16 * p + kk * 32)
            for i, acc in enumerate(accs):
                mma(k, dt, acc[2 * np_], a[i], b[0:2])
                mma(k, dt, acc[2 * np_ + 1], a[i], b[2:4])


def gemm_pv(k, dt, accs, pfrags, bt_addr, d, nk):
    """accs[i][nt] (16 x d) += P_i (16 x nk, C fragments pfrags[i][nt8]) * V (nk x d,
    [k][n] at bt_addr lane address, read with ldmatrix.trans)."""
    p = pitch(d)
    for j in range(nk // 16):
        a = [[pack(k, dt, pf[2 * j][1], pf[2 * j][0]), pack(k, dt, pf[2 * j][3], pf[2 * j][2]),
              pack(k, dt, pf[2 * j + 1][1], pf[2 * j + 1][0]),
              pack(k, dt, pf[2 * j + 1][3], pf[2 * j + 1][2])] for pf in pfrags]
        for np_ in range(d // 16):
            b = ldmatrix_x4(k, bt_addr, j * 16 * p + np_ * 32, trans=True)
            for i, acc in enumerate(accs):
                mma(k, dt, acc[2 * np_], a[i], b[0:2])
                mma(k, dt, acc[2 * np_ + 1], a[i], b[2:4])


# --------------------------------------------------------------------------
# Forward
# --------------------------------------------------------------------------

FWD_PARAMS = [(".u64", "q"), (".u64", "k"), (".u64", "v"), (".u64", "o"), (".u64", "lse"),
              (".u32", "seq_q"), (".u32", "seq_k"), (".u32", "heads_q"), (".u32", "group"),
              (".u64", "q_bs"), (".u64", "q_ss"), (".u64", "k_bs"), (".u64", "k_ss"),
              (".u64", "v_bs"), (".u64", "v_ss"), (".u64", "o_bs"), (".u64", "o_ss"),
              (".u64", "lse_rs"), (".f32", "scale_log2"), (".u32", "causal"),
              (".u32", "causal_off"), (".u32", "out_dtype")]


def fwd_block_n(d):
    return 32 if d > 128 else 64


class KvPipeline:
    """The key side of the kernels over query rows (forward, dQ): keys
    [0, n_end) that the CTA's rows may see (n_end = min(seq_k, last row +
    causal_off + 1) when causal), in tiles of bn keys whose K and V are
    double-buffered with cp.async: stage s holds K at s_kv + 2s*kv_bytes and
    V right after it.  Tile j+1 is copied while tile j is multiplied.
    Tiles with kv0 > first_mask need the mask (they reach past seq_k, or
    past the causal diagonal of the CTA's first row)."""

    def __init__(self, k, P, L, q0, row0, d, bn, s_kv, hk, b, bm=BM, mt=1, pages=None):
        self.k, self.P, self.d, self.bn, self.s_kv = k, P, d, bn, s_kv
        self.kv_bytes = bn * pitch(d)
        self.pages = pages
        sq, sk, off = P["seq_q"], P["seq_k"], P["causal_off"]
        if pages:       # K, V: pools [pages * page_size, Hkv * D]; row from the table
            self.kb = k.rd("add.u64", P["k"], k.rd("mul.wide.u32", hk, 2 * d))
            self.vb = k.rd("add.u64", P["v"], k.rd("mul.wide.u32", hk, 2 * d))
        else:
            self.kb = tensor_base(k, P["k"], b, P["k_bs"], hk, d)
            self.vb = tensor_base(k, P["v"], b, P["v_bs"], hk, d)
        self.k_ss = k.rd("shl.b64", P["k_ss"], 1)
        self.v_ss = k.rd("shl.b64", P["v_ss"], 1)
        causal = k.p("setp.ne.u32", P["causal"], 0)
        # per-row key limit of this thread's rows (row0 + 16 i, row0 + 16 i + 8), m tile i
        self.lims = []
        for i in range(mt):
            pair = []
            for r in range(2):
                row = k.r("add.u32", row0, 16 * i + 8 * r)
                lim = k.r("min.s32", k.r("add.s32", k.r("add.s32", row, off), 1), sk)
                pair.append(k.r("selp.b32", lim, sk, causal))
            self.lims.append(pair)
        last = k.r("sub.u32", k.r("min.u32", k.r("add.u32", q0, bm), sq), 1)
        n_end_c = k.r("min.s32", k.r("add.s32", k.r("add.s32", last, off), 1), sk)
        n_end = k.r("max.s32", k.r("selp.b32", n_end_c, sk, causal), 0)
        self.ntiles = k.r("div.u32", k.r("add.u32", n_end, bn - 1), bn)
        first_mask_sk = k.r("sub.s32", sk, bn)                          # kv0 + bn > seq_k
        first_mask_c = k.r("sub.s32", k.r("add.s32", q0, off), bn - 1)  # kv0 + bn - 1 > q0 + off
        self.first_mask = k.r("selp.b32", k.r("min.s32", first_mask_sk, first_mask_c), first_mask_sk,
                              causal)
        self.load = TileLoader(k, L.tid, bn, d)
        self.have = k.p("setp.ne.u32", self.ntiles, 0)

    def _issue(self, dst, kv0):
        k, P = self.k, self.P
        valid = k.r("sub.s32", P["seq_k"], kv0)
        if self.pages:
            self.load.issue_paged([dst, k.r("add.u32", dst, self.kv_bytes)], kv0, valid, self.pages,
                                  [(self.kb, self.k_ss, P["k"]), (self.vb, self.v_ss, P["v"])])
            return
        self.load.issue(dst, k.rd("add.u64", self.kb, k.rd("mul.lo.u64", k.wide(kv0), self.k_ss)),
                        self.k_ss, valid, P["k"])
        self.load.issue(k.r("add.u32", dst, self.kv_bytes),
                        k.rd("add.u64", self.vb, k.rd("mul.lo.u64", k.wide(kv0), self.v_ss)),
                        self.v_ss, valid, P["v"])

    def prologue(self):
        """Tile 0 into stage 0, committed with whatever the caller issued before."""
        k = self.k
        with skip_if(k, "!" + self.have, "no_tiles", uni=True):
            self._issue(self.s_kv, k.r("mov.u32", 0))
        k.op("cp.async.commit_group")
        self.j = k.r("mov.u32", 0)
        self.stage = k.r("mov.u32", 0)        # byte offset of tile j's stage

    @contextlib.contextmanager
    def tiles(self):
        """The loop over the tiles (none unless have): the with-block's body
        runs for tile j with (kv0, K tile, V tile)."""
        k = self.k
        with loop(k, "kv_loop", uni=True, skip="!" + self.have) as lp:
            yield self._loop_head()
            k.op("xor.b32 %s, %s, %d" % (self.stage, self.stage, 2 * self.kv_bytes))
            k.op("add.u32 %s, %s, 1" % (self.j, self.j))
            lp.again(k.p("setp.lt.u32", self.j, self.ntiles), uni=False)
        k.op("cp.async.wait_group 0")

    def _loop_head(self):
        """Waits for tile j, starts tile j+1; returns (kv0, K tile, V tile)."""
        k = self.k
        k.op("cp.async.wait_group 0")
        k.op("bar.sync 0")
        k.note("everyone is past tile j-1: copy tile j+1 into the other stage")
        nxt = k.r("add.u32", self.j, 1)
        with skip_if(k, k.p("setp.ge.u32", nxt, self.ntiles), "no_next", uni=True):
            other = k.r("xor.b32", self.stage, 2 * self.kv_bytes)
            self._issue(k.r("add.u32", self.s_kv, other), k.r("mul.lo.u32", nxt, self.bn))
        k.op("cp.async.commit_group")
        kv0 = k.r("mul.lo.u32", self.j, self.bn)
        s_k = k.r("add.u32", self.s_kv, self.stage)
        return kv0, s_k, k.r("add.u32", s_k, self.kv_bytes)

    def mask(self, ss, kv0, fill, t2):
        """Applies the mask to the score fragments ss[i] of m tile i in the
        CTA-uniform edge tiles."""
        k = self.k
        with skip_if(k, k.p("setp.le.s32", kv0, self.first_mask), "no_mask", uni=True):
            for s, lims in zip(ss, self.lims):
                mask_tile(k, s, kv0, lims, self.bn, fill, t2)


def row_side(k, P, d, mt=1):
    """Common set-up of the kernels over query rows (64 mt per CTA, 16 mt per
    warp): lanes, (b, h, KV head), q0, this thread's first row, and the
    shared base address."""
    L = Lanes(k, d, mt)
    _, b, h = bh_split(k, P["heads_q"])
    hk = k.r("div.u32", h, P["group"])
    q0 = k.r("shl.b32", k.r("mov.u32", "%ctaid.x"), (BM * mt).bit_length() - 1)
    row0 = k.r("add.u32", q0, k.r("add.u32", k.r("shl.b32", L.warp, (16 * mt).bit_length() - 1), L.g))
    return L, b, h, hk, q0, row0, k.r("mov.u32", SMEM)


def issue_rows(k, P, load, dst, name, stride_name, bs_name, b, h, q0, d):
    """cp.async of the CTA's BM rows of a query-side tensor (Q, dO)."""
    base = tensor_base(k, P[name], b, P[bs_name], h, d)
    ss = k.rd("shl.b64", P[stride_name], 1)
    valid = k.r("sub.s32", P["seq_q"], q0)
    load.issue(dst, k.rd("add.u64", base, k.rd("mul.lo.u64", k.wide(q0), ss)), ss, valid, P[name])


def varlen_rows(k, P, b, first, side, tensors):
    """A varlen kernel's CTA (rows [first, ...) of its sequence's query side
    or key side): sequence b's parameters (varlen_sequence), the CTA returns
    when first is past its side's length, and tensors (name, side, stride
    param or None, shift: 1 half, 2 f32, "out" out_dtype) move to the
    sequence's first row.  Returns (P', batch 0)."""
    V = varlen_sequence(k, P, b)
    k.op("@%s ret" % k.p("setp.ge.u32", first, V["seq_" + side]))
    for name, tside, stride, shift in tensors:
        start = V[tside + "_start"]
        sh = out_shift(k, P["out_dtype"]) if shift == "out" else shift
        V[name] = rebase(k, P[name], start, None if stride is None else P[stride], sh)
    return V, k.r("mov.u32", 0)


def fwd_kernel(dt, d, mt=1, varlen=False, paged=False):
    """mt: m16 tiles per warp (query rows per CTA = 64 mt).  mt = 2 lets every
    K/V fragment feed two mma (FlashAttention-2's 128-row tile), at twice the
    accumulator registers.  varlen: packed sequences (VARLEN_PARAMS, grid y =
    B*heads_q, grid x over the longest sequence; LSE [heads_q, total_q]).
    paged (with varlen): chunked prefill, PAGED_PARAMS instead: queries packed
    by cu_q, sequence b's keys 0 .. min(lens[b], seq_k) - 1 in the K and V
    pools through the block table (PagedKeys); k_bs, v_bs unused."""
    bn = fwd_block_n(d) if mt == 1 or d <= 64 else 32   # 32-key tiles keep d > 64 in 255 registers
    bm = BM * mt
    q_bytes = bm * pitch(d)
    smem = q_bytes + 4 * bn * pitch(d)
    kind = "_paged" if paged else "_varlen" if varlen else ""
    name = "kaio_attn_fwd%s%s_%s_d%d" % (kind, "" if mt == 1 else "_m%d" % bm, dt, d)
    doc = "%s: FlashAttention forward%s, %s, head dim %d, %d query rows x %d-key tiles per CTA." % (
        name, " (packed queries, paged keys)" if paged else " (packed sequences)" if varlen else "",
        dt, d, bm, bn)
    params = FWD_PARAMS + (PAGED_PARAMS if paged else VARLEN_PARAMS if varlen else [])
    k = Kernel(name, doc, params, smem, bm,
               keys={"select": "attn_fwd%s_sm80" % kind, "pass": "fwd",
                     "dtype": dt, "head_dim": d, "rows_per_cta": bm})
    ptrs = ("cu_q", "table", "lens", "flag") if paged else VARLEN_PTRS if varlen else ()
    P = load_params(k, params, ("q", "k", "v", "o") + ptrs)
    L, b, h, hk, q0, row0, base = row_side(k, P, d, mt)
    bk = b
    pages = None
    if paged:
        # queries as varlen's; the clamped length and the causal offset per sequence
        # no flag for a bad cu_seqlens_q pair here (an empty sequence): raising it
        # makes the m128 d128 sm_80 kernel spill
        q_start, len_q = varlen_bounds(k, P["cu_q"], b, P["total_q"], P["seq_q"])
        k.op("@%s ret" % k.p("setp.ge.u32", q0, len_q))
        pages = PagedKeys(k, P, b, L.tid)
        pages.report_length()
        bottom_right = k.p("setp.eq.u32", P["causal"], 1)
        P = dict(P, seq_q=len_q, seq_k=pages.length, q_bs=P["q_ss"], o_bs=P["o_ss"],
                 causal_off=k.r("selp.b32", k.r("sub.u32", pages.length, len_q), 0, bottom_right))
        b = q_start
    elif varlen:
        # the sequence's first rows as the "batch" of Q and O (q_start) and of
        # K and V (k_start), with the row stride as batch stride: no pointer
        # registers beyond the contiguous kernel's (the m128 d128 kernel is at
        # the register limit)
        P = varlen_sequence(k, P, b)
        k.op("@%s ret" % k.p("setp.ge.u32", q0, P["seq_q"]))
        for name in ("q", "k", "v", "o"):
            P[name + "_bs"] = P[name + "_ss"]
        b, bk = P["q_start"], P["k_start"]
    s_q = base
    kv = KvPipeline(k, P, L, q0, row0, d, bn, k.r("add.u32", base, q_bytes), hk, bk, bm, mt, pages)
    k.note("prologue: Q tile and K/V tile 0")
    issue_rows(k, P, TileLoader(k, L.tid, bm, d), s_q, "q", "q_ss", "q_bs", b, h, q0, d)
    accs = [[k.regs("f", 4) for _ in range(d // 8)] for _ in range(mt)]
    for acc in accs:
        for tile in acc:
            k.zero_f(tile)
    # running max and sum per row: index 2 i + r for m tile i, row half r
    m = [k.reg("f") for _ in range(2 * mt)]
    l = [k.reg("f") for _ in range(2 * mt)]
    for r in range(2 * mt):
        k.op("mov.f32 %s, %s" % (m[r], NEG_INF))
        k.op("mov.f32 %s, 0f00000000" % l[r])
    sl2 = P["scale_log2"]
    a_q = k.r("add.u32", s_q, L.a_off)
    kv.prologue()

    with kv.tiles() as (kv0, s_k, s_v):
        ss = [[k.regs("f", 4) for _ in range(bn // 8)] for _ in range(mt)]
        for s in ss:
            for tile in s:
                k.zero_f(tile)
        gemm_abT(k, dt, ss, a_q, k.r("add.u32", s_k, L.b_off), d, bn)
        kv.mask(ss, kv0, NEG_INF, L.t2)
        k.note("online softmax")
        for i in range(mt):
            s, acc = ss[i], accs[i]
            for r in range(2):
                ri = 2 * i + r
                mx = k.f("max.f32", s[0][2 * r], s[0][2 * r + 1])
                for nt in range(1, bn // 8):
                    k.op("max.f32 %s, %s, %s" % (mx, mx, s[nt][2 * r]))
                    k.op("max.f32 %s, %s, %s" % (mx, mx, s[nt][2 * r + 1]))
                quad_reduce(k, mx, "max.f32")
                mnew = k.f("max.f32", m[ri], mx)
                isinf = k.p("setp.eq.f32", mnew, NEG_INF)
                muse = k.f("selp.f32", "0f00000000", mnew, isinf)
                alpha = k.f("ex2.approx.ftz.f32", k.f("mul.f32", k.f("sub.f32", m[ri], muse), sl2))
                k.op("mov.f32 %s, %s" % (m[ri], mnew))
                negm = k.f("neg.f32", k.f("mul.f32", muse, sl2))
                k.op("mul.f32 %s, %s, %s" % (l[ri], l[ri], alpha))
                for tile in acc:
                    for e in (2 * r, 2 * r + 1):
                        k.op("mul.f32 %s, %s, %s" % (tile[e], tile[e], alpha))
                for tile in s:
                    for e in (2 * r, 2 * r + 1):
                        k.op("fma.rn.f32 %s, %s, %s, %s" % (tile[e], tile[e], sl2, negm))
                        k.op("ex2.approx.ftz.f32 %s, %s" % (tile[e], tile[e]))
                        k.op("add.f32 %s, %s, %s" % (l[ri], l[ri], tile[e]))
        gemm_pv(k, dt, accs, ss, k.r("add.u32", s_v, L.bt_off), d, bn)

    k.note("epilogue: O = acc / l, LSE = (m scale_log2 + log2 l) ln 2")
    if pages:
        k.note("a bad length or page seen by any thread spoils the CTA's rows: O and LSE NaN")
        pages.spoil()
    lse_vals = []
    for i in range(mt):
        for r in range(2):
            ri = 2 * i + r
            quad_reduce(k, l[ri], "add.f32")
            pos = k.p("setp.gt.f32", l[ri], "0f00000000")
            inv = k.f("rcp.approx.ftz.f32", l[ri])
            inv = k.f("selp.f32", inv, "0f00000000", pos)
            if pages:
                inv = k.f("selp.f32", NAN, inv, pages.bad)
            for tile in accs[i]:
                for e in (2 * r, 2 * r + 1):
                    k.op("mul.f32 %s, %s, %s" % (tile[e], tile[e], inv))
            lg = k.f("lg2.approx.ftz.f32", l[ri])
            lse2 = k.f("fma.rn.f32", m[ri], sl2, lg)
            lse = k.f("mul.f32", lse2, LN2)
            lse_vals.append(k.f("selp.f32", lse, NEG_INF, pos))
            if pages:
                lse_vals[-1] = k.f("selp.f32", NAN, lse_vals[-1], pages.bad)
    ob = out_base(k, P["o"], b, P["o_bs"], h, d, P["out_dtype"])
    for i in range(mt):
        rowi = row0 if i == 0 else k.r("add.u32", row0, 16 * i)
        store_rows(k, accs[i], d, rowi, P["seq_q"], ob, P["o_ss"], P["out_dtype"], L.t2)
    lead = k.p("setp.eq.u32", L.t2, 0)
    with skip_if(k, k.p("setp.eq.u64", P["lse"], 0), "no_lse", uni=True):
        if varlen or paged:     # LSE [heads_q, total_q]: row h, column q_start + s
            el = k.rd("add.u64", k.rd("mul.lo.u64", k.wide(h), P["lse_rs"]), k.wide(b))
            lptr = k.rd("add.u64", P["lse"], k.rd("shl.b64", el, 2))
        else:
            lrow = k.r("add.u32", k.r("mul.lo.u32", b, P["heads_q"]), h)
            lptr = k.rd("add.u64", P["lse"], k.rd("shl.b64", k.rd("mul.lo.u64", k.wide(lrow), P["lse_rs"]), 2))
        for ri in range(2 * mt):
            row = k.r("add.u32", row0, 16 * (ri // 2) + 8 * (ri % 2))
            ok = k.p("setp.lt.and.u32", row, P["seq_q"], lead)
            k.op("@%s st.global.f32 [%s], %s"
                 % (ok, k.rd("add.u64", lptr, k.rd("mul.wide.u32", row, 4)), lse_vals[ri]))
    k.op("ret")
    return k.text()


# --------------------------------------------------------------------------
# Backward
# --------------------------------------------------------------------------

PRE_PARAMS = [(".u64", "dout"), (".u64", "o"), (".u64", "dv"), (".u32", "rows"),
              (".u32", "seq_q"), (".u32", "heads_q"), (".u32", "head_dim"),
              (".u64", "do_bs"), (".u64", "do_ss"), (".u64", "o_bs"), (".u64", "o_ss"),
              (".u32", "o_f32")]


PRE_LANES = 16                  # lanes a row: 16-byte loads, 128 elements a pass
PRE_THREADS = 256
PRE_ROWS = PRE_THREADS // PRE_LANES


def halves_f32(k, dt, word):
    """The two 16-bit elements of a b32 word (low first), widened to f32."""
    if dt == "f16":
        lo, hi = k.reg("h"), k.reg("h")
        k.op("mov.b32 {%s, %s}, %s" % (lo, hi, word))
        return k.f("cvt.f32.f16", lo), k.f("cvt.f32.f16", hi)
    return k.f("mov.b32", k.r("shl.b32", word, 16)), k.f("mov.b32", k.r("and.b32", word, 0xFFFF0000))


def pre_kernel(dt):
    name = "kaio_attn_bwd_pre_%s" % dt
    doc = ("%s: Dv = rowsum(dO * O) for the attention backward, %d lanes per (b, s, h) row,\n"
           "8 elements a lane per 16-byte load (rows 16-byte aligned: check_aligned16)." % (name, PRE_LANES))
    k = kernel.Kernel(name, doc, PRE_PARAMS, PRE_THREADS, 0, PRE_ROWS,
                      keys={"select": "attn_bwd_pre_sm80", "pass": "bwd_pre", "dtype": dt})
    P = load_params(k, PRE_PARAMS, ("dout", "o", "dv"))
    tid = k.r("mov.u32", "%tid.x")
    sub = k.r("and.b32", tid, PRE_LANES - 1)
    row = k.r("mad.lo.u32", k.r("mov.u32", "%ctaid.x"), PRE_ROWS, k.r("shr.u32", tid, 4))
    k.note("a row past the end loads nothing but joins the shuffles (both halves of a warp do)")
    live = k.p("setp.lt.u32", row, P["rows"])
    # row = (b * seq_q + s) * heads_q + h
    h = k.r("rem.u32", row, P["heads_q"])
    bs = k.r("div.u32", row, P["heads_q"])
    b = k.r("div.u32", bs, P["seq_q"])
    s_ = k.r("rem.u32", bs, P["seq_q"])
    hd = k.rd("mul.wide.u32", h, P["head_dim"])
    do_el = k.rd("add.u64", k.rd("add.u64", k.rd("mul.lo.u64", k.wide(b), P["do_bs"]),
                                 k.rd("mul.lo.u64", k.wide(s_), P["do_ss"])), hd)
    o_el = k.rd("add.u64", k.rd("add.u64", k.rd("mul.lo.u64", k.wide(b), P["o_bs"]),
                                k.rd("mul.lo.u64", k.wide(s_), P["o_ss"])), hd)
    o32 = k.p("setp.ne.u32", P["o_f32"], 0)
    acc = k.f("mov.f32", "0f00000000")
    base = k.r("mov.u32", 0)
    with loop(k, "d_loop") as lp:
        lp.exit_if(k.p("setp.ge.u32", base, P["head_dim"]))
        col = k.r("add.u32", base, k.r("shl.b32", sub, 3))
        ok = k.p("setp.lt.and.u32", col, P["head_dim"], live)
        dw = k.regs("r", 4)
        for w in dw:
            k.op("mov.b32 %s, 0" % w)
        dptr = k.rd("add.u64", P["dout"], k.rd("shl.b64", k.rd("add.u64", do_el, k.wide(col)), 1))
        k.op("@%s ld.global.v4.b32 {%s}, [%s]" % (ok, ", ".join(dw), dptr))
        dvals = [x for w in dw for x in halves_f32(k, dt, w)]
        ovals = k.regs("f", 8)
        for x in ovals:
            k.op("mov.f32 %s, 0f00000000" % x)
        for arm in if_else(k, o32, "o_f32", uni=True):
            if arm.then:
                optr = k.rd("add.u64", P["o"], k.rd("shl.b64", k.rd("add.u64", o_el, k.wide(col)), 2))
                for i in range(2):
                    k.op("@%s ld.global.v4.f32 {%s}, [%s+%d]" % (ok, ", ".join(ovals[4 * i:4 * i + 4]), optr, 16 * i))
            else:
                ow = k.regs("r", 4)
                for w in ow:
                    k.op("mov.b32 %s, 0" % w)
                optr = k.rd("add.u64", P["o"], k.rd("shl.b64", k.rd("add.u64", o_el, k.wide(col)), 1))
                k.op("@%s ld.global.v4.b32 {%s}, [%s]" % (ok, ", ".join(ow), optr))
                for dst, src in zip(ovals, [x for w in ow for x in halves_f32(k, dt, w)]):
                    k.op("mov.f32 %s, %s" % (dst, src))
        for x, y in zip(dvals, ovals):
            k.op("fma.rn.f32 %s, %s, %s, %s" % (acc, x, y, acc))
        k.op("add.u32 %s, %s, %d" % (base, base, 8 * PRE_LANES))
        lp.again()
    for m in (8, 4, 2, 1):
        o = k.reg("f")
        k.op("shfl.sync.bfly.b32 %s, %s, %d, 0x1f, 0xffffffff" % (o, acc, m))
        k.op("add.f32 %s, %s, %s" % (acc, acc, o))
    with skip_if(k, "!" + k.p("setp.eq.and.u32", sub, 0, live), "not_first"):
        b_h = k.r("add.u32", k.r("mul.lo.u32", b, P["heads_q"]), h)
        idx = k.r("add.u32", k.r("mul.lo.u32", b_h, P["seq_q"]), s_)
        k.op("st.global.f32 [%s], %s" % (k.rd("add.u64", P["dv"], k.rd("mul.wide.u32", idx, 4)), acc))
    k.op("ret")
    return k.text()


BWD_PARAMS = [(".u64", "q"), (".u64", "k"), (".u64", "v"), (".u64", "dout"), (".u64", "lse"),
              (".u64", "dv"), (".u64", "grad_a"), (".u64", "grad_b"),
              (".u32", "seq_q"), (".u32", "seq_k"), (".u32", "heads_q"), (".u32", "group"),
              (".u64", "q_bs"), (".u64", "q_ss"), (".u64", "k_bs"), (".u64", "k_ss"),
              (".u64", "v_bs"), (".u64", "v_ss"), (".u64", "do_bs"), (".u64", "do_ss"),
              (".u64", "ga_bs"), (".u64", "ga_ss"), (".u64", "gb_bs"), (".u64", "gb_ss"),
              (".u64", "lse_rs"), (".f32", "scale"), (".f32", "scale_log2"), (".u32", "causal"),
              (".u32", "causal_off"), (".u32", "out_dtype")]


# what a varlen backward kernel moves to its sequence's first rows (Dv's rows
# are heads_q rows of total_q, like the LSE's)
VARLEN_BWD_TENSORS = [("q", "q", "q_ss", 1), ("dout", "q", "do_ss", 1), ("k", "k", "k_ss", 1),
                      ("v", "k", "v_ss", 1), ("lse", "q", None, 2), ("dv", "q", None, 2)]


def bwd_dq_kernel(dt, d, varlen=False):
    """grad_a = dQ (grad_b unused).  varlen: as the forward's; Dv is
    [heads_q, total_q] (the pre kernel run with one batch of total_q)."""
    bn = 64 if d <= 64 else 32
    tile_q = BM * pitch(d)
    smem = 2 * tile_q + 4 * bn * pitch(d)
    name = "kaio_attn_bwd_dq%s_%s_d%d" % ("_varlen" if varlen else "", dt, d)
    doc = "%s: attention backward dQ, %s, head dim %d, %d query rows x %d-key tiles per CTA." % (
        name, dt, d, BM, bn)
    params = BWD_PARAMS + (VARLEN_PARAMS if varlen else [])
    k = Kernel(name, doc, params, smem, BM,
               keys={"select": "attn_bwd_varlen_sm80" if varlen else "attn_bwd_sm80", "pass": "bwd_dq",
                     "dtype": dt, "head_dim": d})
    P = load_params(k, params, ("q", "k", "v", "dout", "lse", "dv", "grad_a") + VARLEN_PTRS[:3 * varlen])
    L, b, h, hk, q0, row0, base = row_side(k, P, d)
    if varlen:
        P, b = varlen_rows(k, P, b, q0, "q", VARLEN_BWD_TENSORS + [("grad_a", "q", "ga_ss", "out")])
    sq = P["seq_q"]
    s_q = base
    s_do = k.r("add.u32", base, tile_q)
    kv = KvPipeline(k, P, L, q0, row0, d, bn, k.r("add.u32", base, 2 * tile_q), hk, b)
    lse2, dvals = [], []
    lrow = k.r("add.u32", k.r("mul.lo.u32", b, P["heads_q"]), h)
    lptr = k.rd("add.u64", P["lse"], k.rd("shl.b64", k.rd("mul.lo.u64", k.wide(lrow), P["lse_rs"]), 2))
    dptr = k.rd("add.u64", P["dv"], k.rd("shl.b64", k.rd("mul.wide.u32", lrow, P.get("total_q", sq)), 2))
    for r in range(2):
        row = k.r("add.u32", row0, 8 * r)
        ok = k.p("setp.lt.u32", row, sq)
        lv, dvv = k.reg("f"), k.reg("f")
        k.op("mov.f32 %s, 0f00000000" % lv)
        k.op("mov.f32 %s, 0f00000000" % dvv)
        k.op("@%s ld.global.f32 %s, [%s]" % (ok, lv, k.rd("add.u64", lptr, k.rd("mul.wide.u32", row, 4))))
        k.op("@%s ld.global.f32 %s, [%s]" % (ok, dvv, k.rd("add.u64", dptr, k.rd("mul.wide.u32", row, 4))))
        lse2.append(k.f("mul.f32", lv, "0fBFB8AA3B"))       # -LSE log2(e)
        dvals.append(dvv)
    load = TileLoader(k, L.tid, BM, d)
    issue_rows(k, P, load, s_q, "q", "q_ss", "q_bs", b, h, q0, d)
    issue_rows(k, P, load, s_do, "dout", "do_ss", "do_bs", b, h, q0, d)
    acc = [k.regs("f", 4) for _ in range(d // 8)]
    for tile in acc:
        k.zero_f(tile)
    sl2 = P["scale_log2"]
    a_q = k.r("add.u32", s_q, L.a_off)
    a_do = k.r("add.u32", s_do, L.a_off)
    kv.prologue()

    with kv.tiles() as (kv0, s_k, s_v):
        s = [k.regs("f", 4) for _ in range(bn // 8)]
        for tile in s:
            k.zero_f(tile)
        gemm_abT(k, dt, [s], a_q, k.r("add.u32", s_k, L.b_off), d, bn)
        k.note("P = exp2(S scale log2e - LSE log2e)")
        for tile in s:
            for e in range(4):
                k.op("fma.rn.f32 %s, %s, %s, %s" % (tile[e], tile[e], sl2, lse2[e >> 1]))
                k.op("ex2.approx.ftz.f32 %s, %s" % (tile[e], tile[e]))
        kv.mask([s], kv0, "0f00000000", L.t2)
        dp = [k.regs("f", 4) for _ in range(bn // 8)]
        for tile in dp:
            k.zero_f(tile)
        gemm_abT(k, dt, [dp], a_do, k.r("add.u32", s_v, L.b_off), d, bn)
        k.note("dS = P (dP - Dv)")
        for nt in range(bn // 8):
            for e in range(4):
                k.op("sub.f32 %s, %s, %s" % (dp[nt][e], dp[nt][e], dvals[e >> 1]))
                k.op("mul.f32 %s, %s, %s" % (dp[nt][e], dp[nt][e], s[nt][e]))
        gemm_pv(k, dt, [acc], [dp], k.r("add.u32", s_k, L.bt_off), d, bn)
    gb = out_base(k, P["grad_a"], b, P["ga_bs"], h, d, P["out_dtype"])
    store_rows(k, acc, d, row0, sq, gb, P["ga_ss"], P["out_dtype"], L.t2, scale=P["scale"])
    k.op("ret")
    return k.text()


def bwd_dkdv_kernel(dt, d, varlen=False):
    """grad_a = dK, grad_b = dV.  varlen: as bwd_dq_kernel's."""
    bq = 64 if d <= 64 else 32
    p = pitch(d)
    tile_k = BM * p
    qt_bytes = bq * p
    vec_bytes = bq * 4
    stage_bytes = 2 * qt_bytes + 2 * vec_bytes     # Q, dO, LSE, Dv
    smem = 2 * tile_k + 2 * stage_bytes
    name = "kaio_attn_bwd_dkdv%s_%s_d%d" % ("_varlen" if varlen else "", dt, d)
    doc = "%s: attention backward dK and dV, %s, head dim %d, %d key rows x %d-query tiles per CTA." % (
        name, dt, d, BM, bq)
    params = BWD_PARAMS + (VARLEN_PARAMS if varlen else [])
    k = Kernel(name, doc, params, smem, BM,
               keys={"select": "attn_bwd_varlen_sm80" if varlen else "attn_bwd_sm80", "pass": "bwd_dkdv",
                     "dtype": dt, "head_dim": d})
    P = load_params(k, params, ("q", "k", "v", "dout", "lse", "dv", "grad_a", "grad_b") + VARLEN_PTRS[:3 * varlen])
    L = Lanes(k, d)
    heads_kv = k.r("div.u32", P["heads_q"], P["group"])
    _, b, hk = bh_split(k, heads_kv)
    k0 = k.r("shl.b32", k.r("mov.u32", "%ctaid.x"), 6)
    if varlen:
        P, b = varlen_rows(k, P, b, k0, "k", VARLEN_BWD_TENSORS + [("grad_a", "k", "ga_ss", "out"),
                                                                   ("grad_b", "k", "gb_ss", "out")])
    sq, sk = P["seq_q"], P["seq_k"]
    kb = tensor_base(k, P["k"], b, P["k_bs"], hk, d)
    vb = tensor_base(k, P["v"], b, P["v_bs"], hk, d)
    q_ss = k.rd("shl.b64", P["q_ss"], 1)
    do_ss = k.rd("shl.b64", P["do_ss"], 1)
    k_ss = k.rd("shl.b64", P["k_ss"], 1)
    v_ss = k.rd("shl.b64", P["v_ss"], 1)
    base = k.r("mov.u32", SMEM)
    s_k = base
    s_v = k.r("add.u32", base, tile_k)
    s_st = k.r("add.u32", base, 2 * tile_k)     # stage s at + s*stage_bytes: Q, dO, LSE, Dv
    causal = k.p("setp.ne.u32", P["causal"], 0)
    off = P["causal_off"]
    # key rows of this thread: k0 + 16 w + g (+8); visible queries: q >= key - off (causal), q < seq_q
    krow0 = k.r("add.u32", k0, k.r("add.u32", k.r("shl.b32", L.warp, 4), L.g))
    qlo = []
    for r in range(2):
        kr = k.r("add.u32", krow0, 8 * r)
        qlo.append(k.r("selp.b32", k.r("sub.s32", kr, off), -(1 << 30), causal))
    # first query any key of this block sees: max(0, k0 - off) when causal
    qstart = k.r("selp.b32", k.r("max.s32", k.r("sub.s32", k0, off), 0), 0, causal)
    qstart = k.r("min.u32", qstart, sq)
    t_first = k.r("div.u32", qstart, bq)
    t_count = k.r("div.u32", k.r("add.u32", sq, bq - 1), bq)
    nt_per_head = k.r("sub.u32", t_count, t_first)
    # tiles with q0t >= first_full need no mask: q0t + bq <= seq_q and (causal: q0t >= k0 + 63 - off)
    nomask_sk = k.r("sub.s32", sq, bq)
    nomask_c = k.r("sub.s32", k.r("add.s32", k0, BM - 1), off)
    # mask when q0t > nomask_sk or (causal and q0t < nomask_c)

    kload = TileLoader(k, L.tid, BM, d)
    qload = TileLoader(k, L.tid, bq, d)
    kvalid = k.r("sub.s32", sk, k0)
    kload.issue(s_k, k.rd("add.u64", kb, k.rd("mul.lo.u64", k.wide(k0), k_ss)), k_ss, kvalid, P["k"])
    kload.issue(s_v, k.rd("add.u64", vb, k.rd("mul.lo.u64", k.wide(k0), v_ss)), v_ss, kvalid, P["v"])

    # iteration space: it = 0 .. group * nt_per_head - 1; head = hk*group + it / nt_per_head
    total = k.r("mul.lo.u32", P["group"], nt_per_head)
    have = k.p("setp.ne.u32", total, 0)

    def issue_qtile(it, dst):
        hi = k.r("div.u32", it, nt_per_head)
        ti = k.r("add.u32", k.r("sub.u32", it, k.r("mul.lo.u32", hi, nt_per_head)), t_first)
        h = k.r("add.u32", k.r("mul.lo.u32", hk, P["group"]), hi)
        q0t = k.r("mul.lo.u32", ti, bq)
        qb = tensor_base(k, P["q"], b, P["q_bs"], h, d)
        dob = tensor_base(k, P["dout"], b, P["do_bs"], h, d)
        valid = k.r("sub.s32", sq, q0t)
        qload.issue(dst, k.rd("add.u64", qb, k.rd("mul.lo.u64", k.wide(q0t), q_ss)), q_ss, valid, P["q"])
        qload.issue(k.r("add.u32", dst, qt_bytes), k.rd("add.u64", dob, k.rd("mul.lo.u64", k.wide(q0t), do_ss)),
                    do_ss, valid, P["dout"])
        # LSE and Dv of the tile's queries: threads 0 .. bq-1, 4-byte copies
        with skip_if(k, k.p("setp.ge.u32", L.tid, bq), "no_vec"):
            qi = k.r("add.u32", q0t, L.tid)
            ok = k.p("setp.lt.u32", qi, sq)
            size = k.r("selp.b32", 4, 0, ok)
            lrow = k.r("add.u32", k.r("mul.lo.u32", b, P["heads_q"]), h)
            lrow_el = k.rd("add.u64", k.rd("mul.lo.u64", k.wide(lrow), P["lse_rs"]), k.wide(qi))
            lsrc = k.rd("add.u64", P["lse"], k.rd("shl.b64", lrow_el, 2))
            dv_row = k.r("mul.lo.u32", lrow, P.get("total_q", sq))
            dsrc = k.rd("add.u64", P["dv"], k.rd("shl.b64", k.wide(k.r("add.u32", dv_row, qi)), 2))
            lsrc = k.rd("selp.b64", lsrc, P["lse"], ok)
            dsrc = k.rd("selp.b64", dsrc, P["dv"], ok)
            sv = k.r("add.u32", dst, k.r("add.u32", k.r("shl.b32", L.tid, 2), 2 * qt_bytes))
            cp_async.copy(k, sv, lsrc, 4, size)
            cp_async.copy(k, "%s+%d" % (sv, vec_bytes), dsrc, 4, size)
        return q0t

    with skip_if(k, "!" + have, "no_tiles", uni=True):
        issue_qtile(k.r("mov.u32", 0), s_st)
    k.op("cp.async.commit_group")

    dk = [k.regs("f", 4) for _ in range(d // 8)]
    dvacc = [k.regs("f", 4) for _ in range(d // 8)]
    for tile in dk + dvacc:
        k.zero_f(tile)
    sl2 = P["scale_log2"]
    a_k = k.r("add.u32", s_k, L.a_off)
    a_v = k.r("add.u32", s_v, L.a_off)
    it = k.r("mov.u32", 0)
    stage = k.r("mov.u32", 0)
    with loop(k, "q_loop", uni=True, skip="!" + have) as lp:
        k.op("cp.async.wait_group 0")
        k.op("bar.sync 0")
        nxt = k.r("add.u32", it, 1)
        with skip_if(k, k.p("setp.ge.u32", nxt, total), "no_next", uni=True):
            other = k.r("xor.b32", stage, stage_bytes)
            issue_qtile(nxt, k.r("add.u32", s_st, other))
        k.op("cp.async.commit_group")

        hi = k.r("div.u32", it, nt_per_head)
        ti = k.r("add.u32", k.r("sub.u32", it, k.r("mul.lo.u32", hi, nt_per_head)), t_first)
        q0t = k.r("mul.lo.u32", ti, bq)
        cur = k.r("add.u32", s_st, stage)
        s_q = cur
        s_do = k.r("add.u32", cur, qt_bytes)
        s_lse = k.r("add.u32", cur, 2 * qt_bytes)
        s_dv = k.r("add.u32", s_lse, vec_bytes)
        st = [k.regs("f", 4) for _ in range(bq // 8)]
        for tile in st:
            k.zero_f(tile)
        gemm_abT(k, dt, [st], a_k, k.r("add.u32", s_q, L.b_off), d, bq)
        k.note("P^T = exp2(S^T scale log2e - LSE[col] log2e)")
        lse_addr = k.r("add.u32", s_lse, k.r("shl.b32", L.t2, 2))
        dv_addr = k.r("add.u32", s_dv, k.r("shl.b32", L.t2, 2))
        dcols = []
        for nt in range(bq // 8):
            lv = k.regs("f", 2)
            k.op("ld.shared.v2.f32 {%s, %s}, [%s+%d]" % (lv[0], lv[1], lse_addr, 32 * nt))
            dd = k.regs("f", 2)
            k.op("ld.shared.v2.f32 {%s, %s}, [%s+%d]" % (dd[0], dd[1], dv_addr, 32 * nt))
            dcols.append(dd)
            nl = [k.f("mul.f32", x, "0fBFB8AA3B") for x in lv]     # -LSE log2(e)
            for e in range(4):
                k.op("fma.rn.f32 %s, %s, %s, %s" % (st[nt][e], st[nt][e], sl2, nl[e & 1]))
                k.op("ex2.approx.ftz.f32 %s, %s" % (st[nt][e], st[nt][e]))
        need = k.p("setp.gt.s32", q0t, nomask_sk)
        needc = k.p("setp.lt.and.s32", q0t, nomask_c, causal)
        need = k.p("or.pred", need, needc)
        with skip_if(k, "!" + need, "no_mask", uni=True):
            c0 = k.r("add.s32", q0t, L.t2)
            for nt in range(bq // 8):
                for e in range(4):
                    col = k.r("add.s32", c0, 8 * nt + (e & 1))
                    ok = k.p("setp.lt.s32", col, sq)
                    ok2 = k.p("setp.ge.and.s32", col, qlo[e >> 1], ok)
                    k.op("selp.f32 %s, %s, 0f00000000, %s" % (st[nt][e], st[nt][e], ok2))
        k.note("dV += P^T dO")
        gemm_pv(k, dt, [dvacc], [st], k.r("add.u32", s_do, L.bt_off), d, bq)
        dpt = [k.regs("f", 4) for _ in range(bq // 8)]
        for tile in dpt:
            k.zero_f(tile)
        gemm_abT(k, dt, [dpt], a_v, k.r("add.u32", s_do, L.b_off), d, bq)
        k.note("dS^T = P^T (dP^T - Dv[col])")
        for nt in range(bq // 8):
            for e in range(4):
                k.op("sub.f32 %s, %s, %s" % (dpt[nt][e], dpt[nt][e], dcols[nt][e & 1]))
                k.op("mul.f32 %s, %s, %s" % (dpt[nt][e], dpt[nt][e], st[nt][e]))
        k.note("dK += dS^T Q")
        gemm_pv(k, dt, [dk], [dpt], k.r("add.u32", s_q, L.bt_off), d, bq)
        k.op("xor.b32 %s, %s, %d" % (stage, stage, stage_bytes))
        k.op("add.u32 %s, %s, 1" % (it, it))
        lp.again(k.p("setp.lt.u32", it, total), uni=False)
    k.op("cp.async.wait_group 0")
    gka = out_base(k, P["grad_a"], b, P["ga_bs"], hk, d, P["out_dtype"])
    store_rows(k, dk, d, krow0, sk, gka, P["ga_ss"], P["out_dtype"], L.t2, scale=P["scale"])
    gvb = out_base(k, P["grad_b"], b, P["gb_bs"], hk, d, P["out_dtype"])
    store_rows(k, dvacc, d, krow0, sk, gvb, P["gb_ss"], P["out_dtype"], L.t2)
    k.op("ret")
    return k.text()


# --------------------------------------------------------------------------

def generate():
    fwd = [HEADER]
    for dt in DTYPES:
        for d in FWD_DIMS:
            fwd.append("\n" + fwd_kernel(dt, d))
    for dt in DTYPES:
        for d in FWD_M128_DIMS:
            fwd.append("\n" + fwd_kernel(dt, d, mt=2))
    for dt in DTYPES:
        for d in FWD_DIMS:
            fwd.append("\n" + fwd_kernel(dt, d, varlen=True))
        for d in FWD_M128_DIMS:
            fwd.append("\n" + fwd_kernel(dt, d, mt=2, varlen=True))
    for dt in DTYPES:
        for d in FWD_DIMS:
            fwd.append("\n" + fwd_kernel(dt, d, paged=True))
        for d in FWD_M128_DIMS:
            fwd.append("\n" + fwd_kernel(dt, d, mt=2, paged=True))
    bwd = [HEADER]
    for dt in DTYPES:
        bwd.append("\n" + pre_kernel(dt))
        for d in BWD_DIMS:
            bwd.append("\n" + bwd_dq_kernel(dt, d))
            bwd.append("\n" + bwd_dkdv_kernel(dt, d))
    for dt in DTYPES:
        for d in BWD_DIMS:
            bwd.append("\n" + bwd_dq_kernel(dt, d, varlen=True))
            bwd.append("\n" + bwd_dkdv_kernel(dt, d, varlen=True))
    return {"attention_fwd_sm80.ptx": "".join(fwd), "attention_bwd_sm80.ptx": "".join(bwd)}


if __name__ == "__main__":
    sys.exit(cli.main(__file__, __doc__, generate))
