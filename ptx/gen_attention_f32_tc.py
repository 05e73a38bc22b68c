#!/usr/bin/env python3
"""Generate libkaio's tensor-core backward of the f32 single-head flash
attention (kaio_attention_flash_backward for head dims D <= 128).

    python3 ptx/gen_attention_f32_tc.py          # write ptx/attention_f32_tc.ptx
    python3 ptx/gen_attention_f32_tc.py --check  # exit 1 if the committed file differs

Why tensor cores: the CUDA-core kernels (gen_attention_f32.py) are bound by
shared-memory loads per FMA and ran the backward at 0.55x PyTorch's f32 math
path.  Here every product is split TF32 ("3xTF32"): x = big + small with big
= x rounded to TF32 and small = x - big (exact), and a.b is summed as
a_small.b_big + a_big.b_small + a_big.b_big by mma.sync m16n8k8 with f32
accumulation.  The dropped a_small.b_small term and the tensor cores'
truncation of small to TF32 leave a relative error of about 2^-21 per
product, the order of f32's own rounding of the sums over K: results stay
f32-accurate (the GPU test holds them to the same 1e-4 bound as the CUDA-core
kernels; at S = 4096, D = 128 the bench measures 7.7e-6 against an f64
reference), never TF32-accurate.  Inputs must be finite and below 2^127 in
magnitude (the rounding is integer arithmetic on the bits).

Tensors are row-major f32 [S, D] (row strides ld* in elements, any value
>= D), scale 1/sqrt(D), causal = top-left (key j visible to query i iff
j <= i), LSE f32 [S] (natural log), as in gen_attention_f32.py.

Kernels (all take X3_PARAMS; launch order is the contract):
  kaio_attn_f32_rowsum          grid ceil(S/8), 8 warps, one row each:
      Dv_i = sum_d dO_id O_id, stored in column 0 of dq (dq is scratch until
      the dQ kernel overwrites it: no workspace).
  kaio_attn_f32x3_dkdv_d<DM>    grid ceil(S/32), 256 threads: dK, dV of 32 keys.
  kaio_attn_f32x3_dq_d<DM>      grid ceil(S/32), 512 threads: dQ of 32 queries;
      each CTA reads Dv of its own rows from dq before any CTA-wide barrier
      and writes dq only after it.
  DM in {32, 64, 128}; any D <= DM (shared tiles are zero past D and past S).

CTA shape: G groups of 2 warps (dK/dV: G = 4, about 220 registers; dQ:
G = 8 in 128 registers); warp h of a group owns rows 16h..16h+15 of the
CTA's 32 rows (keys for dK/dV, queries for dQ), kept in shared memory split
into big and small planes once; group g takes the other side's 16-row tiles
g, g+G, g+2G, ..., copied with 4-byte cp.async (zero fill past S and D)
behind its own named barrier, double-buffered for dK/dV.  At the end groups
1..G-1 leave their accumulators in shared memory and group 0 adds them in
group order: no atomics, every output written once, deterministic.

Per tile, dK/dV (dQ is the same with the roles swapped, and no dV):
  S^T = K Q^T, P^T = exp(scale S^T - LSE), dV += P^T dO,
  dP^T = V dO^T, dS^T = P^T (dP^T - Dv), dK += dS^T Q.
The second products take P^T / dS^T straight from the accumulators as the A
operand: within each k8 step logical column t holds key/query 2t and column
t+4 holds 2t+1, and the B rows are read in the same order.

Shared tiles are [row][DM] with a pitch of DM+4 words: every fragment load
(rows g, columns t or 2t, 2t+1 rows) hits 32 distinct banks.
"""

import os
import sys

from ptx_emitter import load_params, write_or_check
from gen_attention_sm80 import Kernel, header

HERE = os.path.dirname(os.path.abspath(__file__))
DIMS = (32, 64, 128)
# groups of 2 warps splitting the other side's tiles, and tile buffers per
# group: dK/dV (about 220 registers) fits 4 groups, double-buffered; dQ fits
# 8 groups in 128 registers, single-buffered (the other groups hide the copy)
SHAPES = {"dkdv": (4, 2), "dq": (8, 1)}
OWN = 32            # own rows per CTA
TILE = 16           # other-side rows per tile
UNROLL = 8          # k8 steps per iteration of the A B^T loop
NN_GROUP = 4        # accumulators the R B product interleaves
NEG_INF = "0fFF800000"
LOG2E = "0f3FB8AA3B"
NEG_LOG2E = "0fBFB8AA3B"
ZERO = "0f00000000"

X3_PARAMS = [(".u64", "dout"), (".u64", "q"), (".u64", "k"), (".u64", "v"), (".u64", "o"),
             (".u64", "lse"), (".u64", "dq"), (".u64", "dk"), (".u64", "dv"),
             (".u64", "lddo"), (".u64", "ldq"), (".u64", "ldk"), (".u64", "ldv"), (".u64", "ldo"),
             (".u64", "lddq"), (".u64", "lddk"), (".u64", "lddv"),
             (".u32", "seq"), (".u32", "dim"), (".f32", "scale"), (".u32", "causal")]
POINTERS = ("dout", "q", "k", "v", "o", "lse", "dq", "dk", "dv")


def pitch(dm):
    return dm + 4


def split(k, x):
    """x (f32, finite, |x| < 2^127) -> (big, small): big = x rounded to TF32
    (half away from zero, as integer ops: cvt.rna.tf32 costs about four SASS
    instructions, this two), small = x - big exactly (|small| <= 2^-11 |x|).
    small goes to the mma as raw f32 bits: the tensor cores read the top 19
    bits of a TF32 operand, truncating small to 2^-10 of itself."""
    if x.startswith("%f"):
        x = k.r("mov.b32", x)
    big = k.r("and.b32", k.r("add.u32", x, 0x1000), "0xffffe000")
    return big, k.r("sub.f32", x, big)


def split_all(k, xs):
    pairs = [split(k, x) for x in xs]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def mma(k, acc, x, y):
    k.op("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%s}, {%s}, {%s}, {%s}"
         % (", ".join(acc), ", ".join(x), ", ".join(y), ", ".join(acc)))


def mma3(k, acc, a, b):
    """acc += a.b in split TF32: the two small cross terms first, then big.big.
    acc is one C fragment, or three (one per term: independent mma chains,
    added by the caller)."""
    (ab, as_), (bb, bs) = a, b
    accs = acc if isinstance(acc[0], list) else [acc] * 3
    for t, (x, y) in zip(accs, ((as_, bb), (ab, bs), (ab, bb))):
        mma(k, t, x, y)


class Lanes:
    def __init__(self, k):
        self.tid = k.r("mov.u32", "%tid.x")
        self.warp = k.r("shr.u32", self.tid, 5)
        self.lane = k.r("and.b32", self.tid, 31)
        self.group = k.r("shr.u32", self.warp, 1)
        self.h = k.r("and.b32", self.warp, 1)
        self.gtid = k.r("and.b32", self.tid, 63)
        self.g = k.r("shr.u32", self.lane, 2)
        self.t = k.r("and.b32", self.lane, 3)
        self.blk0 = k.r("shl.b32", k.r("mov.u32", "%ctaid.x"), 5)


class Loader:
    """cp.async (4 bytes, zero fill) of an nrows x DM block of an [S, D]
    tensor by nthreads threads: element e = tid + nthreads*i."""

    def __init__(self, k, P, tid, nthreads, nrows, dm):
        self.k, self.P, self.dm, self.nrows = k, P, dm, nrows
        if dm >= nthreads:
            per_row = dm // nthreads
            self.rbase, self.cbase = k.r("mov.u32", 0), tid
            self.elems = [(i // per_row, nthreads * (i % per_row)) for i in range(nrows * per_row)]
        else:
            rows_per = nthreads // dm
            self.rbase = k.r("shr.u32", tid, dm.bit_length() - 1)
            self.cbase = k.r("and.b32", tid, dm - 1)
            self.elems = [(rows_per * i, 0) for i in range(nrows // rows_per)]
        self.cols = sorted(set(c for _, c in self.elems))
        self.col_ok = {c: k.p("setp.lt.u32", k.r("add.u32", self.cbase, c), P["dim"]) for c in self.cols}
        self.dim_full = k.p("setp.eq.u32", P["dim"], dm)
        self.soff = k.r("shl.b32", k.r("mad.lo.u32", self.rbase, pitch(dm), self.cbase), 2)

    def issue(self, sdst, src, ldb, row0):
        """Rows row0 .. row0+nrows-1 of src (row stride ldb bytes) into the
        shared block at sdst; rows >= S and columns >= D read as zeros."""
        k, P = self.k, self.P
        r0 = k.r("add.u32", row0, self.rbase)
        gptr = k.rd("add.u64", src, k.rd("add.u64", k.rd("mul.lo.u64", k.wide(r0), ldb),
                                           k.rd("mul.wide.u32", self.cbase, 4)))
        sptr = k.r("add.u32", sdst, self.soff)
        full = k.p("setp.le.and.u32", k.r("add.u32", row0, self.nrows), P["seq"], self.dim_full)
        slow, done = k.label("ld_edge"), k.label("ld_done")
        k.op("@!%s bra.uni %s" % (full, slow))
        self._copies(gptr, sptr, ldb, None, None, src)
        k.op("bra.uni %s" % done)
        k.place(slow)
        lim = k.r("sub.u32", P["seq"], r0)      # rows left from this thread's first row (s32, may be <= 0)
        self._copies(gptr, sptr, ldb, lim, True, src)
        k.place(done)

    def split_in_place(self, sdst, small_off):
        """After this thread's copies into sdst landed: each of its elements
        x becomes big in place and small at + small_off (see split)."""
        k = self.k
        sptr = k.r("add.u32", sdst, self.soff)
        for row, col in self.elems:
            simm = (row * pitch(self.dm) + col) * 4
            big, small = split(k, k.r("ld.shared.b32", "[%s+%d]" % (sptr, simm)))
            k.op("st.shared.b32 [%s+%d], %s" % (sptr, simm, big))
            k.op("st.shared.b32 [%s+%d], %s" % (sptr, simm + small_off, small))

    def _copies(self, gptr, sptr, ldb, lim, guarded, src):
        k = self.k
        ptr, at = k.rd("mov.b64", gptr), 0
        rows = sorted(set(r for r, _ in self.elems))
        step = rows[1] - rows[0] if len(rows) > 1 else 1
        stride = ldb if step == 1 else k.rd("mul.lo.u64", ldb, step)
        row_ok = None
        for row, col in self.elems:
            if at < row:
                assert row - at == step
                k.op("add.u64 %s, %s, %s" % (ptr, ptr, stride))
                at = row
                row_ok = None
            simm = (row * pitch(self.dm) + col) * 4
            if not guarded:
                k.op("cp.async.ca.shared.global [%s+%d], [%s+%d], 4" % (sptr, simm, ptr, col * 4))
                continue
            if row_ok is None:
                row_ok = k.p("setp.gt.s32", lim, row)
            ok = k.p("and.pred", row_ok, self.col_ok[col])
            addr = k.rd("selp.b64", k.rd("add.u64", ptr, col * 4), src, ok)
            k.op("cp.async.ca.shared.global [%s+%d], [%s], 4, %s"
                 % (sptr, simm, addr, k.r("selp.b32", 4, 0, ok)))


def gemm_nt(k, L, dm, a_tile, a_row0, b_tile, nterms, a_small_off):
    """16 x 16 block of A B^T over DM: A = the warp's 16 rows of an own tile
    (from row a_row0 = 16h), B = the 16 rows of a tile.  Returns two C
    fragments (columns 0-7, 8-15)."""
    p4 = pitch(dm) * 4
    # per fragment one accumulator per split term (nterms 3) or for big.big
    # and the small terms (2): six or four independent mma chains instead of
    # two (the chains' latency bounded the loop)
    terms = [[[k.f("mov.f32", ZERO) for _ in range(4)] for _ in range(nterms)] for _ in range(2)]
    if nterms == 2:   # both small terms in one accumulator
        terms = [[t[0], t[0], t[1]] for t in terms]
    aptr = k.r("add.u32", a_tile, k.r("shl.b32", k.r("mad.lo.u32", k.r("add.u32", a_row0, L.g), pitch(dm), L.t), 2))
    bptr = k.r("add.u32", b_tile, k.r("shl.b32", k.r("mad.lo.u32", L.g, pitch(dm), L.t), 2))
    steps = dm // 8
    unroll = min(steps, UNROLL)
    if unroll < steps:   # a runtime loop keeps ptxas from hoisting every load (spills at DM 128)
        i = k.r("mov.u32", 0)
        loop = k.label("nt")
        k.place(loop)
    for s in range(unroll):
        # A comes split already: big at a_tile, small at a_tile + a_small_off
        asplit = [[k.r("ld.shared.b32", "[%s+%d]" % (aptr, 32 * s + off + plane))
                   for off in (0, 8 * p4, 16, 8 * p4 + 16)] for plane in (0, a_small_off)]
        for n in range(2):
            b = [k.r("ld.shared.b32", "[%s+%d]" % (bptr, 8 * n * p4 + 32 * s + off)) for off in (0, 16)]
            mma3(k, terms[n], asplit, split_all(k, b))
    if unroll < steps:
        for ptr in (aptr, bptr):
            k.op("add.u32 %s, %s, %d" % (ptr, ptr, 32 * unroll))
        k.op("add.u32 %s, %s, 1" % (i, i))
        k.op("@%s bra.uni %s" % (k.p("setp.lt.u32", i, steps // unroll), loop))
    if nterms == 2:
        return [[k.f("add.f32", big[c], s1[c]) for c in range(4)] for s1, _, big in terms]
    return [[k.f("add.f32", big[c], k.f("add.f32", s1[c], s2[c])) for c in range(4)]
            for s1, s2, big in terms]


def gemm_nn(k, L, dm, accs, frags, b_tile):
    """accs[m] (16 x DM as DM/8 C fragments) += R B, R = the 16 x 16 register
    block given as two C fragments, B = a tile's 16 rows x DM (k = its rows)."""
    p4 = pitch(dm) * 4
    bptr = k.r("add.u32", b_tile, k.r("shl.b32", k.r("mad.lo.u32", k.r("shl.b32", L.t, 1), pitch(dm), L.g), 2))
    for s in range(2):
        c = frags[s]
        (ab, as_) = split_all(k, [c[0], c[2], c[1], c[3]])
        for m0 in range(0, dm // 8, NN_GROUP):
            # NN_GROUP fragments term by term: consecutive mma never share an accumulator
            ms = range(m0, m0 + NN_GROUP)
            bs = {}
            for m in ms:
                b = [k.r("ld.shared.b32", "[%s+%d]" % (bptr, 8 * s * p4 + 32 * m + off)) for off in (0, p4)]
                bs[m] = split_all(k, b)
            for x, pick in ((as_, 0), (ab, 1), (ab, 0)):
                for m in ms:
                    mma(k, accs[m], x, bs[m][pick])


def kernel(name, doc, smem, cols, threads):
    k = Kernel(name, doc, X3_PARAMS, smem, cols)
    k.threads = threads
    k.directives = [".minnctapersm 1"]
    return k


def rowsum():
    name = "kaio_attn_f32_rowsum"
    k = Kernel(name, name + ": Dv_i = sum_d dO_id O_id into dq[i, 0], one warp per row.",
               X3_PARAMS, 0, 8)
    k.threads = 256
    P = load_params(k, X3_PARAMS, POINTERS)
    tid = k.r("mov.u32", "%tid.x")
    lane = k.r("and.b32", tid, 31)
    row = k.r("add.u32", k.r("shl.b32", k.r("mov.u32", "%ctaid.x"), 3), k.r("shr.u32", tid, 5))
    done = k.label("done")
    k.op("@%s bra.uni %s" % (k.p("setp.ge.u32", row, P["seq"]), done))
    wr = k.wide(row)
    pa = k.rd("add.u64", P["dout"], k.rd("mul.lo.u64", wr, k.rd("shl.b64", P["lddo"], 2)))
    pb = k.rd("add.u64", P["o"], k.rd("mul.lo.u64", wr, k.rd("shl.b64", P["ldo"], 2)))
    acc = k.f("mov.f32", ZERO)
    col0 = k.r("mov.u32", 0)     # warp-uniform loop (the shuffles below need the whole warp)
    loop, end = k.label("col"), k.label("col_end")
    k.place(loop)
    k.op("@%s bra.uni %s" % (k.p("setp.ge.u32", col0, P["dim"]), end))
    col = k.r("add.u32", col0, lane)
    ok = k.p("setp.lt.u32", col, P["dim"])
    off = k.rd("mul.wide.u32", col, 4)
    a, b = k.f("mov.f32", ZERO), k.f("mov.f32", ZERO)
    k.op("@%s ld.global.f32 %s, [%s]" % (ok, a, k.rd("add.u64", pa, off)))
    k.op("@%s ld.global.f32 %s, [%s]" % (ok, b, k.rd("add.u64", pb, off)))
    k.op("fma.rn.f32 %s, %s, %s, %s" % (acc, a, b, acc))
    k.op("add.u32 %s, %s, 32" % (col0, col0))
    k.op("bra.uni %s" % loop)
    k.place(end)
    for m in (16, 8, 4, 2, 1):
        o = k.reg("f")
        k.op("shfl.sync.bfly.b32 %s, %s, %d, 0x1f, 0xffffffff" % (o, acc, m))
        k.op("add.f32 %s, %s, %s" % (acc, acc, o))
    lead = k.p("setp.eq.u32", lane, 0)
    dst = k.rd("add.u64", P["dq"], k.rd("mul.lo.u64", wr, k.rd("shl.b64", P["lddq"], 2)))
    k.op("@%s st.global.f32 [%s], %s" % (lead, dst, acc))
    k.place(done)
    k.op("ret")
    return k.text()


def main_kernel(kind, dm):
    """kind 'dkdv': own rows are keys (K, V), tiles are queries (Q, dO, LSE, Dv).
    kind 'dq': own rows are queries (Q, dO), tiles are keys (K, V)."""
    is_kv = kind == "dkdv"
    p4 = pitch(dm) * 4
    own_bytes = 4 * OWN * p4                           # x and y, each as big and small planes
    block_bytes = TILE * p4
    buf_bytes = 2 * block_bytes + (2 * TILE * 4 if is_kv else 0)
    groups, nbuf = SHAPES[kind]
    group_bytes = nbuf * buf_bytes
    nacc = 2 if is_kv else 1
    nregs = dm // 2                                    # C registers per 16 x DM accumulator
    scratch = (groups - 1) * 2 * nregs * nacc * 32 * 4
    assert scratch <= groups * group_bytes
    smem = own_bytes + groups * group_bytes
    name = "kaio_attn_f32x3_%s_d%d" % (kind, dm)
    doc = ("%s: f32 single-head attention backward (%s), head dim <= %d, split-TF32 mma.sync,\n"
           "32 rows per CTA, %d groups of 2 warps, %d tile buffer(s) per group."
           % (name, "dK, dV" if is_kv else "dQ", dm, groups, nbuf))
    k = kernel(name, doc, smem, OWN, 64 * groups)
    P = load_params(k, X3_PARAMS, POINTERS)
    L = Lanes(k)
    ldb = {n: k.rd("shl.b64", P[n], 2) for n in ("lddo", "ldq", "ldk", "ldv", "lddq", "lddk", "lddv")}
    causal = k.p("setp.ne.u32", P["causal"], 0)
    sl2 = k.f("mul.f32", P["scale"], LOG2E)
    base = k.r("mov.u32", "kaio_attn_smem")
    plane = OWN * p4
    own_x, own_y = base, k.r("add.u32", base, 2 * plane)
    gbase = k.r("add.u32", k.r("mad.lo.u32", L.group, group_bytes, base), own_bytes)

    own_ld = Loader(k, P, L.tid, 64 * groups, OWN, dm)
    if is_kv:
        own = (("k", "ldk"), ("v", "ldv"))
        tiles = (("q", "ldq"), ("dout", "lddo"))
    else:
        own = (("q", "ldq"), ("dout", "lddo"))
        tiles = (("k", "ldk"), ("v", "ldv"))
    own_ld.issue(own_x, P[own[0][0]], ldb[own[0][1]], L.blk0)
    own_ld.issue(own_y, P[own[1][0]], ldb[own[1][1]], L.blk0)
    k.op("cp.async.commit_group")
    k.op("cp.async.wait_group 0")
    own_ld.split_in_place(own_x, plane)     # the own rows are A of every tile's A B^T: split once
    own_ld.split_in_place(own_y, plane)
    k.op("bar.sync 0")

    # this thread's own rows (C fragment rows g and g+8 of warp h)
    row_a = k.r("add.u32", L.blk0, k.r("add.u32", k.r("shl.b32", L.h, 4), L.g))
    rows = [row_a, k.r("add.u32", row_a, 8)]
    if not is_kv:   # LSE and Dv of the own query rows
        nls, dvs = [], []
        for r in rows:
            ok = k.p("setp.lt.u32", r, P["seq"])
            lv, dv = k.f("mov.f32", ZERO), k.f("mov.f32", ZERO)
            k.op("@%s ld.global.f32 %s, [%s]" % (ok, lv, k.rd("add.u64", P["lse"], k.rd("mul.wide.u32", r, 4))))
            k.op("@%s ld.global.f32 %s, [%s]" % (ok, dv, k.rd("add.u64", P["dq"],
                                                              k.rd("mul.lo.u64", k.wide(r), ldb["lddq"]))))
            nls.append(k.f("mul.f32", lv, NEG_LOG2E))
            dvs.append(dv)

    tile_ld = Loader(k, P, L.gtid, 64, TILE, dm)

    def prefetch(buf, t):
        row0 = k.r("shl.b32", t, 4)
        tile_ld.issue(buf, P[tiles[0][0]], ldb[tiles[0][1]], row0)
        tile_ld.issue(k.r("add.u32", buf, block_bytes), P[tiles[1][0]], ldb[tiles[1][1]], row0)
        if is_kv:   # LSE (threads 0-15) and Dv (16-31) of the tile's queries
            sub = k.p("setp.lt.u32", L.gtid, 32)
            hi = k.r("shr.u32", L.gtid, 4)
            qrow = k.r("add.u32", row0, k.r("and.b32", L.gtid, 15))
            ok = k.p("setp.lt.and.u32", qrow, P["seq"], sub)
            lse_src = k.rd("add.u64", P["lse"], k.rd("mul.wide.u32", qrow, 4))
            dv_src = k.rd("add.u64", P["dq"], k.rd("mul.lo.u64", k.wide(qrow), ldb["lddq"]))
            src = k.rd("selp.b64", dv_src, lse_src, k.p("setp.ne.u32", hi, 0))
            src = k.rd("selp.b64", src, P["lse"], ok)
            dst = k.r("add.u32", buf, k.r("add.u32", 2 * block_bytes, k.r("shl.b32", L.gtid, 2)))
            k.op("@%s cp.async.ca.shared.global [%s], [%s], 4, %s" % (sub, dst, src, k.r("selp.b32", 4, 0, ok)))

    # tiles of the other side this CTA needs: causal dK/dV starts at the CTA's
    # first key (queries i >= j), causal dQ stops after its last query
    ntiles_all = k.r("shr.u32", k.r("add.u32", P["seq"], TILE - 1), 4)
    if is_kv:
        first = k.r("selp.b32", k.r("shr.u32", L.blk0, 4), 0, causal)
        ntiles = ntiles_all
    else:
        first = k.r("mov.u32", 0)
        n_end = k.r("min.u32", P["seq"], k.r("add.u32", L.blk0, OWN))
        ntiles = k.r("selp.b32", k.r("shr.u32", k.r("add.u32", n_end, TILE - 1), 4), ntiles_all, causal)
    t = k.r("add.u32", first, L.group)
    cur = k.r("mov.u32", gbase)
    if nbuf == 2:
        nxt = k.r("add.u32", gbase, buf_bytes)
        has = k.p("setp.lt.u32", t, ntiles)
        skip0 = k.label("pf0")
        k.op("@!%s bra.uni %s" % (has, skip0))
        prefetch(cur, t)
        k.place(skip0)
        k.op("cp.async.commit_group")

    accs = [[[k.f("mov.f32", ZERO) for _ in range(4)] for _ in range(dm // 8)] for _ in range(nacc)]
    loop, end = k.label("tile"), k.label("tile_end")
    k.place(loop)
    k.op("@%s bra.uni %s" % (k.p("setp.ge.u32", t, ntiles), end))
    tn = k.r("add.u32", t, groups)
    if nbuf == 2:
        skip = k.label("pf")
        k.op("@%s bra.uni %s" % (k.p("setp.ge.u32", tn, ntiles), skip))
        prefetch(nxt, tn)
        k.place(skip)
        k.op("cp.async.commit_group")
        k.op("cp.async.wait_group 1")
    else:
        prefetch(cur, t)
        k.op("cp.async.commit_group")
        k.op("cp.async.wait_group 0")
    bar = k.r("add.u32", L.group, 1)
    k.op("bar.sync %s, 64" % bar)

    row16 = k.r("shl.b32", L.h, 4)
    tile_x, tile_y = cur, k.r("add.u32", cur, block_bytes)
    # other-side index of C column 2t (+1) of fragment n: 16 t_tile + 8 n + 2 t
    col0 = k.r("add.u32", k.r("shl.b32", t, 4), k.r("shl.b32", L.t, 1))
    nterms = 3 if is_kv else 2
    s = gemm_nt(k, L, dm, own_x, row16, tile_x, nterms, plane)  # S (dQ) or S^T (dK/dV)
    if is_kv:
        lptr = k.r("add.u32", cur, k.r("add.u32", 2 * block_bytes, k.r("shl.b32", L.t, 3)))
    probs = []
    for n in range(2):
        if is_kv:
            l0, l1 = k.regs("f", 2)
            k.op("ld.shared.v2.f32 {%s, %s}, [%s+%d]" % (l0, l1, lptr, 32 * n))
            nl = [k.f("mul.f32", l0, NEG_LOG2E), k.f("mul.f32", l1, NEG_LOG2E)]
        frag = []
        for c in range(4):
            other = k.r("add.u32", col0, 8 * n + (c & 1))
            mine = rows[c >> 1]
            if is_kv:   # row = key, column = query
                vis = k.p("setp.ge.or.u32", other, mine, k.p("not.pred", causal))
                bias = nl[c & 1]
            else:       # row = query, column = key
                vis = k.p("setp.le.or.u32", other, mine, k.p("not.pred", causal))
                bias = nls[c >> 1]
            ok = k.p("setp.lt.and.u32", other, P["seq"], vis)
            e = k.f("ex2.approx.f32", k.f("fma.rn.f32", s[n][c], sl2, bias))
            frag.append(k.f("selp.f32", e, ZERO, ok))
        probs.append(frag)
    if is_kv:
        gemm_nn(k, L, dm, accs[1], probs, tile_y)         # dV += P^T dO
    dp = gemm_nt(k, L, dm, own_y, row16, tile_y, nterms, plane)  # dP (dQ) or dP^T (dK/dV)
    if is_kv:
        dptr = k.r("add.u32", lptr, TILE * 4)
    ds = []
    for n in range(2):
        if is_kv:
            d0, d1 = k.regs("f", 2)
            k.op("ld.shared.v2.f32 {%s, %s}, [%s+%d]" % (d0, d1, dptr, 32 * n))
        frag = []
        for c in range(4):
            dv = (d0, d1)[c & 1] if is_kv else dvs[c >> 1]
            frag.append(k.f("mul.f32", probs[n][c], k.f("sub.f32", dp[n][c], dv)))
        ds.append(frag)
    gemm_nn(k, L, dm, accs[0], ds, tile_x)               # dK += dS^T Q, or dQ += dS K

    k.op("bar.sync %s, 64" % bar)
    k.op("mov.u32 %s, %s" % (t, tn))
    if nbuf == 2:
        tmp = k.r("mov.u32", cur)
        k.op("mov.u32 %s, %s" % (cur, nxt))
        k.op("mov.u32 %s, %s" % (nxt, tmp))
    k.op("bra.uni %s" % loop)
    k.place(end)
    k.op("cp.async.wait_all")

    # merge: groups 1..3 leave their accumulators in shared memory, group 0
    # adds them in group order and stores
    k.op("bar.sync 0")
    lead = k.p("setp.eq.u32", L.group, 0)
    per_thread = nregs * nacc
    put = k.label("merge_put")
    k.op("@%s bra.uni %s" % (lead, put))
    slot = k.r("mad.lo.u32", k.r("sub.u32", k.r("add.u32", k.r("shl.b32", L.group, 1), L.h), 2), per_thread * 32, L.lane)
    sp = k.r("add.u32", k.r("add.u32", base, own_bytes), k.r("shl.b32", slot, 2))
    i = 0
    for acc in accs:
        for frag in acc:
            for reg in frag:
                k.op("st.shared.f32 [%s+%d], %s" % (sp, i * 128, reg))
                i += 1
    k.place(put)
    k.op("bar.sync 0")
    done = k.label("done")
    k.op("@!%s bra.uni %s" % (lead, done))
    rp = k.r("add.u32", k.r("add.u32", base, own_bytes),
             k.r("shl.b32", k.r("mad.lo.u32", L.h, per_thread * 32, L.lane), 2))
    outs = [("dk", "lddk", True), ("dv", "lddv", False)] if is_kv else [("dq", "lddq", True)]
    col_ok = {}
    for m in range(dm // 8):
        for c in range(2):
            col_ok[(m, c)] = k.p("setp.lt.u32", k.r("add.u32", k.r("shl.b32", L.t, 1), 8 * m + c), P["dim"])
    rok = [k.p("setp.lt.u32", r, P["seq"]) for r in rows]
    i = 0
    # fragment by fragment (each one's registers die at its store: adding
    # every group first would keep all loads live and spill at DM 128)
    for acc, (dst, ld, scaled) in zip(accs, outs):
        ptrs = [k.rd("add.u64", P[dst], k.rd("add.u64", k.rd("mul.lo.u64", k.wide(r), ldb[ld]),
                                                  k.rd("mul.wide.u32", L.t, 8))) for r in rows]
        for m in range(dm // 8):
            for c4, reg in enumerate(acc[m]):
                for gsrc in range(1, groups):
                    goff = (gsrc - 1) * 2 * per_thread * 32 * 4
                    v = k.f("ld.shared.f32", "[%s+%d]" % (rp, goff + i * 128))
                    k.op("add.f32 %s, %s, %s" % (reg, reg, v))
                i += 1
                half, c = c4 >> 1, c4 & 1
                v = k.f("mul.f32", reg, P["scale"]) if scaled else reg
                ok = k.p("and.pred", rok[half], col_ok[(m, c)])
                k.op("@%s st.global.f32 [%s+%d], %s" % (ok, ptrs[half], (8 * m + c) * 4, v))
    k.place(done)
    k.op("ret")
    return k.text()


def generate():
    parts = [header("gen_attention_f32_tc.py"), "\n" + rowsum()]
    for dm in DIMS:
        parts.append("\n" + main_kernel("dkdv", dm))
        parts.append("\n" + main_kernel("dq", dm))
    return {"attention_f32_tc.ptx": "".join(parts)}


def main():
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="fail if the committed file is stale")
    args = ap.parse_args()
    return write_or_check(HERE, generate(), args.check, "gen_attention_f32_tc.py")


if __name__ == "__main__":
    sys.exit(main())
