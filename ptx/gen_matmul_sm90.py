#!/usr/bin/env python3
"""Generate libkaio's sm_90a (Hopper) tensor-core matmul kernels: TMA + wgmma.

    python3 ptx/gen_matmul_sm90.py --out-dir DIR  # write DIR/matmul_sm90{,_cluster}.ptx

Only the Python standard library is used and the output depends on nothing but
this file and ptx/kaio_ptx, so the build is reproducible.

Kernels: kaio_matmul_sm90_<in>_<la><lb>[_n128|_n64|_m64][_sk], in in {f16, bf16}, la,
lb in {n, t}; 48 entries: CTA tiles 128 x 256, and 128 x 128 (_n128, 6 stages),
128 x 64 (_n64, 8 stages, m64n64 wgmma) and 64 x 64 (_m64: one consumer
warpgroup, 256 threads, 6 stages, two CTAs an SM, no setmaxnreg) for shapes
with too few tiles to fill the SMs; the _n128 and _n64 tiles again as _sk, which sum split-K
inside the kernel (below), and as _k<S> (module matmul_sm90_cluster, PTX 8.1
for st.async: 40 more entries, _n64_k2/_k4, _n128_k2/_k3/_k4), which split K
over a cluster of S CTAs (below).  "nt" (A M x K row-major, B N x K
row-major: the nn.Linear layout) is the primary one: both operands K-major,
no transposes.

Plus kaio_matmul_sm90_s8_nt[_n128] (W8A8): A M x K and B N x K int8, both
K-major (int8 wgmma has no transpose), m64nNk32 s32 accumulation (exact),
K step 128; TMA maps of dtype UINT8 (0); two more params, row_scale and
col_scale (f32 vectors of M and N, 0 = none):
    out = ((f32(acc) * alpha) * row_scale[m]) * col_scale[n] (+ beta * C),
each product rounded (the order of the sm_80 int8 kernel); out_dtype 6 (i32)
stores the exact sums themselves (the host passes alpha 1 and no scales).  The host keeps
lda, ldb multiples of 16 and never splits K (f32 partials would lose the
exact sum).  Measured through a driver-API harness on the H100: exact
against the integer reference (K <= 1008); 4096^3 at 1335 TOPS on constant
inputs (wide tile; cuBLASLt int8 1271 in h100-baselines.md), a first figure.

    C[M x N] = alpha * op(A) * op(B) + beta * C        (f32 accumulation)

  A, la = n: M x K row-major, (m, k) at a + (m*lda + k)*2
  A, la = t: K x M row-major, op(A)(m, k) at a + (k*lda + m)*2
  B, lb = n: K x N row-major, (k, n) at b + (k*ldb + n)*2
  B, lb = t: N x K row-major (nn.Linear weight), op(B)(k, n) at b + (n*ldb + k)*2
  C: M x N row-major, (m, n) at c + (m*ldc + n)*esize; out_dtype 1 = f32,
     2 = f16, 3 = bf16 (kaio_dtype), rounded once with cvt.rn; any other value
     writes nothing.  beta == 0: C is never read (it may hold NaN);
     otherwise out = fma(beta, C_old, alpha*acc).

  Params: (.param .align 64 .b8 tmap_a[128], .param .align 64 .b8 tmap_b[128],
           u64 c, u32 m, u32 n, u32 k, u64 ldc, f32 alpha, f32 beta,
           u32 out_dtype, u32 kper, u64 split_elems[, u32 kchunk]); ldc in
           elements; kchunk (last, f16/bf16 entries only): K steps per f32
           accumulation chunk, 0 = one chunk (below, "Long K").
  Split-K: kper = K steps (of 64) per split, split_elems = elements between
  the splits' outputs.  Work item t = s * tiles + tile computes split s of
  that tile over K steps [s*kper, min(s*kper + kper, ceil(K/64))) and stores
  it at c + s * split_elems * 4 bytes.  kper >= ceil(K/64) (one split) is the
  plain product; with more than one split the host passes out_dtype 1 (f32),
  alpha 1, beta 0 and a workspace for c, and sums the splits in a second
  kernel (kaio_splitk_reduce in convert.ptx) in split order: deterministic.
  _sk entries: two more params, u64 ws and u64 count (before kchunk); c, alpha, beta and
  out_dtype are the product's own and split_elems is unused.  Work items as
  above; with more than one split, each stores its f32 partial tile (bm x bn,
  in the consumers' fragment order) at ws + (s * tiles + tile) * bm * bn * 4,
  fences, and counts itself in the u32 count[tile] (atom.acq_rel.gpu); the CTA
  that counts last adds the splits in split order starting from -0.0 (so the
  bits do not depend on which CTA that is), runs the epilogue into C and
  stores count[tile] = 0 for the next launch (kaio_ptx/arrival.py).  The host
  zeroes the counts once, when it allocates the workspace.
  _k<S> entries: the plain params; grid (tiles, 1, S), clusters 1 x 1 x S
  (.reqnctapercluster), one tile a CTA.  CTA z of a cluster computes K
  steps [z * kper, z * kper + kper) of tile ctaid.x (none if that is past
  K: a partial of zeros); after its mainloop rank r owns a run of the
  tile's 8-column blocks, receives the other ranks' f32 partials of it in
  its drained stages (st.async, kaio_ptx/cluster_sum.py), adds them in rank
  order and runs the epilogue on those columns: no workspace, no second
  launch, the same bits whichever CTA finishes first.  Long-K chunks are on
  whenever kchunk > 0 (the partials are f32 whatever the output).
  Packed argument buffer (CU_LAUNCH_PARAM_BUFFER_POINTER, kaio_kernel_launch):
  the .align 64 is honoured in absolute constant-bank terms, and on sm_90
  (driver 580) the parameter block starts at c[0x0][0x210], which is 16 mod
  64: the driver puts tmap_a at offset 48, so the offsets are 48, 176, 304,
  312, 316, 320, 328, 336, 340, 344, 348, 352 (360 bytes; then kchunk at
  360, or _sk: ws 360, count 368, kchunk 376), NOT those of a
  C struct (0, 128, 256, ...).  Take them from cuFuncGetParamInfo (or launch with a
  kernelParams array, which the driver places itself); seen on an H100:
  param_bytes = 348 before kper and split_elems were added; SASS reads c
  at c[0x0][0x340].
  Host guarantees: M, N >= 1; K >= 8, K % 8 == 0; a, b 16-byte aligned and
  lda, ldb multiples of 8 (TMA: global address 16-B aligned, strides multiples
  of 16 bytes); c aligned to its element size, ldc >= N.

Host contract, machine-readable, in comment lines before each .entry:

  // kaio-tma: <entry> <param> rank=2 dims=<inner>,<outer> box=<inner>,<outer> swizzle=128 dtype=<f16|bf16>
      cuTensorMapEncodeTiled for that .param: tensorRank 2, data type FLOAT16
      (6) or BFLOAT16 (9), globalAddress = the operand's base pointer,
      globalDim = {inner, outer} with the letters meaning the problem's M, N, K
      (e.g. A with la = n is stored M x K: dims=K,M -> {K, M}), globalStrides
      = {ld * 2} bytes (lda for tmap_a, ldb for tmap_b), boxDim = the two
      numbers, elementStrides {1, 1}, CU_TENSOR_MAP_INTERLEAVE_NONE (0),
      CU_TENSOR_MAP_SWIZZLE_128B (3), CU_TENSOR_MAP_L2_PROMOTION_L2_128B (2),
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE (0: out-of-bounds elements read as
      zeros; the kernel relies on it for the M, N and K tails).  The 128-byte
      map is copied into the argument buffer at the param's offset.
  // kaio-launch: <entry> grid=min(ceil(M/128)*ceil(N/256),sm_count),1,1 block=384,1,1
      Persistent: CTA i handles tiles i, i + gridDim.x, ...; ANY grid.x >= 1
      is correct (grid.x = the tile count gives one tile per CTA).
  // kaio-shared-bytes: <entry> <bytes>
      Dynamic shared memory per CTA (> 48 KiB: the host raises
      CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES; kaio_kernel_launch does).

Design
  * .version 8.0 (the lowest with wgmma, TMA, setmaxnreg, mbarrier expect_tx;
    cvta.param needs 7.7), .target sm_90a (wgmma and setmaxnreg exist only
    there).
  * CTA tile 128 x 256, K step 64; 384 threads = 3 warpgroups.  Warpgroup 0
    is the producer: setmaxnreg.dec to 40, one thread issues the TMA loads.
    Warpgroups 1, 2 are consumers: setmaxnreg.inc to 232, each owns 64 rows x
    256 columns (128 f32 accumulators per thread) and issues, per K step, 4 x
    wgmma.mma_async.m64n256k16.f32.<in>.<in> with A and B from shared memory.
    .maxntid 384 + .minnctapersm 1 caps the entry at 168 registers, so
    setmaxnreg takes effect (40*128 + 232*256 = 168*384).
  * Thread 0 prefetches both tensor maps first thing, so their fetch overlaps
    the barrier set-up (measured neutral at the 512-1024 squares, session 15).
  * Shared: a ring of 4 stages x 48 KiB (A 128 x 64 = 16 KiB, B 256 x 64 =
    32 KiB), 128-byte swizzled (TMA SWIZZLE_128B = wgmma descriptor swizzle
    mode 1), each box 1024-B aligned (the dynamic base is rounded up to 1024 B
    at run time, hence +1 KiB), then 8 mbarriers: full[s] (count 1, the
    producer's arrive.expect_tx of 48 KiB, completed by the TMA bytes) and
    empty[s] (count 8: lane 0 of each consumer warp after the wgmma that read
    the stage has completed).  Stage s = it % 4, parity = (it / 4) & 1 over a
    running K-step counter `it` shared by all tiles of the CTA; the producer
    waits empty with parity ^ 1 (a fresh barrier passes parity 1).
  * Consumers keep one wgmma group in flight: commit, wait_group 1, then
    release the previous stage; the first wgmma of a tile has scale-d = false
    (no accumulator zeroing).
  * K-major operand (A la = n, B lb = t): one box {64, rows}; rows are 128 B,
    descriptor LBO 16 B (unused), SBO 1024 B (8 rows), +32 B per k16 step.
    MN-major operand (A la = t, B lb = n): boxes {64, 64} (64 M/N x 64 K),
    one per 64-wide M/N panel, 8 KiB apart; descriptor transpose bit 1,
    LBO = 8 KiB (panel stride), SBO = 1024 B (8 K rows), +2 KiB per k16 step.
  * Persistent tile loop, tiles in groups of 16 tile rows (M) walked column by
    column inside a group, for L2 reuse; the producer runs ahead into the
    next tile while the consumers run the epilogue.
  * Long K (16-bit inputs, 128 x 128 and 128 x 64 tiles): with kchunk > 0 and
    f32 output or f32 split partials, each chunk of kchunk K steps starts
    from fresh accumulators (scale-d = false) and is added into f32 totals in
    registers after a wgmma.wait_group 0, in chunk order; the totals start at
    -0.0, so a product of one chunk keeps its bits. The tensor cores' own f32
    sums err about linearly in K; the host passes 64 (4096 of K). The wide
    tile ignores kchunk: its 128 accumulators leave no registers for totals.
  * Epilogue straight from the accumulators: alpha/beta, cvt.rn, 8-byte
    stores when the tile is whole along N and C/ldc are 8-byte aligned (one
    copy per out dtype, beta == 0 without any C load): f32 pairs, and for
    16-bit outputs 4 adjacent columns, after lanes t and t ^ 1 trade one packed
    pair per two column blocks (shfl.bfly 1), so a warp's store fills whole
    32-byte sectors of 8 rows where the 4-byte stores filled half of each;
    else one shared element-store path under row/column predicates.  Registers written only under a predicate
    are zeroed first: otherwise ptxas keeps them live from the kernel entry
    and spills (5.5 KB of stack before that change).  Tried and dropped
    (session 14, bench/RESULTS.md): 16-bit output staged through shared
    memory (stmatrix into a ring of 3 x 64 x 32-column buffers per
    warpgroup) and written with one cp.async.bulk per 64-byte row run: 0.3-14 %
    slower than these stores at 4096^3, 8192^3 and the nn.Linear shapes.
  * TMA boxes start on a 16-byte boundary along their inner dimension (an
    unaligned start is CUDA_ERROR_ILLEGAL_INSTRUCTION); a box never lies
    wholly outside the matrix.

ptxas 13.0 -arch=sm_90a: every entry 168 registers at entry (setmaxnreg
40 / 232), 0 bytes stack, 0 spills; SASS (bf16_nt): 4 HGMMA.64x256x16.F32.BF16
per K step, 2 UTMALDG.2D, USETMAXREG.DEALLOC / TRY_ALLOC.

Measured on an H100 80GB HBM3 (driver 580.159.04), through kaio_module_load_ptx
+ kaio_kernel_launch (.sm90_scratch harness, not in the tree):
  * nt, f16 and bf16: 96 / 96 cases pass against an f64 reference on sampled
    rows (M, N in {1, 7, 127..4097}, K in {8, 24, 1000, 4096}, out f32 / f16 /
    bf16, beta 0 (NaN-poisoned C) and 0.5, alpha 1 and 0.75, padded lda / ldc,
    grids min(tiles, 132), tiles and 3 CTAs): rel. Frobenius error <= 4.9e-6
    (f32 out), 2.7e-4 (f16), 1.8e-3 (bf16); pads and guard rows untouched.
    4096^3 and 8192^3 f16 -> f32 equal cuBLAS's output bit for bit.
  * Median of 30 (5 warm-up), TFLOP/s, cuBLAS GemmEx f16 -> f32 beside it:
      4096^3: f16 in f32 out 717 (cuBLAS 742), bf16 in f32 out 740; 16-bit
              out 640-690 (the 4-byte stores fill half sectors); with
              the 8-byte stores of whole sectors (session 15, prepared
              ops, bench_matmul_out.py): f16 out 721-726, bf16 out 730-747,
              main beside it 660-680.
      8192^3: 656-755 (cuBLAS 765); noisy from run to run (clocks).
    The same kernel with one tile per CTA (grid = tiles) is 2-3 % slower at
    4096^3; 128 x 128 tiles (m64n128, 6 stages) reach only 580.
  * _sk (bench_matmul, f16, % of cuBLAS, bench/RESULTS.md session 13): 128 x 64
    tiles, 2 splits at M = 128, N = 4096: K = 11008 94.3 (the second launch
    87.2), K = 4096 81.7 (78.4; one split 89.2).  GpuMatmul.* pass with every
    product forced onto _n64_sk; memcheck and racecheck clean.
  * Long K, f32 out (bench_matmul_accuracy.py, session 14; relative error on
    512 sampled elements against an f64 reference, cuBLAS f16-in/f32-out
    beside it): M 128, N 4096, K 14336 / 57344, one-shot 1.7e-5 / 6.5e-5
    (3.1-3.9x cuBLAS) before chunks, 4.7e-6 / 4.8e-6 (0.84 / 0.28x) with
    chunks of 64 steps; K <= 4096 unchanged, bit for bit.
  * nn / tn / tt (MN-major operands, transpose bits): NOT verified on a GPU.
    The first build raised CUDA_ERROR_ILLEGAL_INSTRUCTION at M = N = 7: its
    wholly-out-of-range panels were clamped to M-1 / N-1, an unaligned TMA
    start; the clamp now rounds down to a multiple of 8 (the nt entries are
    unchanged by that fix).  The MN-major descriptor (LBO = panel stride
    8 KiB, SBO = 1 KiB) follows CUTLASS's canonical MN-major SW128 layout and
    has not been checked against results.
"""

import sys

from kaio_ptx import arrival, cli, cluster_sum, manifest, tma, wgmma
from kaio_ptx.control import loop, skip_if
from kaio_ptx.preamble import extern_shared, preamble
from kaio_ptx.sm90 import Kernel
from kaio_ptx.ring import Ring
from kaio_ptx.tma import PANEL

OUTPUT = "matmul_sm90.ptx"
OUTPUT_CLUSTER = "matmul_sm90_cluster.ptx"     # st.async: PTX 8.1, a module of its own
SMEM_SYM = "kaio_mm90_smem"
BK = 64                     # K step: one 128-byte swizzle row of 16-bit elements

DEFAULT_CFG = {
    "bn": 256,              # CTA tile N = wgmma N
    "consumers": 2,         # consumer warpgroups, 64 rows each: BM = 64 * consumers
    "stages": 4,
    "group": 16,            # tile rows per raster group
    "prod_regs": 40,
    "cons_regs": 232,
    "mn_lbo": 8192,         # MN-major descriptor: LBO = panel stride (bytes); see docstring
    "mn_sbo": 1024,
    "suffix": "",
    "int8": True,           # also emit the s8 (W8A8) entry of this tile
    "fused": False,         # split-K summed inside the kernel (_sk entries)
    "cluster": 0,           # K split over a cluster of this many CTAs (_k<S> entries)
    "ctas_per_sm": 1,       # .minnctapersm
}

PARAMS = [(".align 64 .b8", "tmap_a[128]"), (".align 64 .b8", "tmap_b[128]"),
          (".u64", "c"), (".u32", "m"), (".u32", "n"), (".u32", "k"),
          (".u64", "ldc"), (".f32", "alpha"), (".f32", "beta"),
          (".u32", "out_dtype"), (".u32", "kper"), (".u64", "split_elems")]
# int8 kernels: optional per-row (A) and per-column (B) f32 scales; 0 = none.
INT8_PARAMS = PARAMS + [(".u64", "row_scale"), (".u64", "col_scale")]
# _sk kernels: the splits' f32 partial tiles and a u32 count per tile.
FUSED_PARAMS = PARAMS + [(".u64", "ws"), (".u64", "count")]
# 16-bit inputs, last: u32 kchunk = K steps per f32 accumulation chunk (0 = one
# chunk; see chunked()).
FLOAT_PARAMS = PARAMS + [(".u32", "kchunk")]
FUSED_FLOAT_PARAMS = FUSED_PARAMS + [(".u32", "kchunk")]


# --------------------------------------------------------------------------
# Kernel builder: virtual registers, labels, text.
# --------------------------------------------------------------------------

# --------------------------------------------------------------------------
# Operands: TMA boxes and wgmma descriptors
# --------------------------------------------------------------------------

class Operand:
    """One input operand's stage tile.  rows = BM (A) or BN (B); kmajor: the
    global matrix is K-contiguous (A la = n, B lb = t)."""

    def __init__(self, tag, kmajor, rows, cfg, bk=BK):
        self.tag, self.kmajor, self.rows = tag, kmajor, rows
        self.bytes = rows * BK * 2                  # 128 B per row: bk elements of K
        if kmajor:
            self.box = (bk, rows)                   # {K, rows}: rows x 128 B
            self.dims = ("K", "M" if tag == "A" else "N")
            self.boxes = [(0, 0)]                   # (smem byte offset, row offset)
            self.slice = 64 * 128                   # next 64 rows (A per consumer)
            self.kstep = 32                         # k16 = 32 bytes inside the 128-B row
            self.lbo, self.sbo, self.trans = 16, 1024, 0
        else:
            self.box = (PANEL, BK)                  # {M/N, K}: 64 K rows x 128 B
            self.dims = ("M" if tag == "A" else "N", "K")
            self.boxes = [(p * PANEL * BK * 2, p * PANEL) for p in range(rows // PANEL)]
            self.slice = PANEL * BK * 2             # 64 rows of M = one panel
            self.kstep = 16 * 128                   # 16 K rows
            self.lbo, self.sbo, self.trans = cfg["mn_lbo"], cfg["mn_sbo"], 1

    def tma_line(self, entry, param, dt):
        return "// kaio-tma: %s %s rank=2 dims=%s,%s box=%d,%d swizzle=128 dtype=%s" % (
            entry, param, self.dims[0], self.dims[1], self.box[0], self.box[1], dt)


def tile_coords(k, t, tiles_m, tiles_n, cfg, bm, bn):
    """Tile t -> (m0, n0): groups of `group` tile rows, column-major inside a group."""
    g = cfg["group"]
    gsz = k.r("mul.lo.u32", tiles_n, g)
    grp = k.r("div.u32", t, gsz)
    first = k.r("mul.lo.u32", grp, g)
    gm = k.r("min.u32", k.r("sub.u32", tiles_m, first), g)
    rem = k.r("sub.u32", t, k.r("mul.lo.u32", grp, gsz))
    mb = k.r("add.u32", first, k.r("rem.u32", rem, gm))
    nb = k.r("div.u32", rem, gm)
    return k.r("mul.lo.u32", mb, bm), k.r("mul.lo.u32", nb, bn)


def work_item(k, t, ntiles, tiles_m, tiles_n, ktiles, kper, cfg, bm, bn):
    """Work item t -> (m0, n0, first K step, K steps) of split t / ntiles;
    cluster kernels: tile t, split %ctaid.z (none of its K steps where the
    host gave too many splits)."""
    if cfg["cluster"]:
        m0, n0 = tile_coords(k, t, tiles_m, tiles_n, cfg, bm, bn)
        kbeg = k.r("mul.lo.u32", k.r("mov.u32", "%ctaid.z"), kper)
        kcnt = k.r("selp.b32", k.r("min.u32", k.r("sub.u32", ktiles, kbeg), kper), 0,
                   k.p("setp.lt.u32", kbeg, ktiles))
        return m0, n0, kbeg, kcnt
    split = k.r("div.u32", t, ntiles)
    tile = k.r("sub.u32", t, k.r("mul.lo.u32", split, ntiles))
    m0, n0 = tile_coords(k, tile, tiles_m, tiles_n, cfg, bm, bn)
    kbeg = k.r("mul.lo.u32", split, kper)
    kcnt = k.r("min.u32", k.r("sub.u32", ktiles, kbeg), kper)
    return m0, n0, kbeg, kcnt


# --------------------------------------------------------------------------
# Epilogue
# --------------------------------------------------------------------------

def load_pair(k, name, pred, ptr, off):
    """Two adjacent C elements as f32 (under pred)."""
    # every register defined on all paths: a register written only under a
    # predicate is live from the kernel entry on (ptxas then spills)
    o = k.regs("f", 2)
    for x in o:
        k.op("mov.f32 %s, 0f00000000" % x)
    if name == "f32":
        k.op("@%s ld.global.v2.f32 {%s, %s}, [%s+%d]" % (pred, o[0], o[1], ptr, off))
        return o
    w = k.r("mov.b32", 0)
    k.op("@%s ld.global.b32 %s, [%s+%d]" % (pred, w, ptr, off))
    if name == "f16":
        hs = k.regs("h", 2)
        k.op("mov.b32 {%s, %s}, %s" % (hs[0], hs[1], w))
        for e in range(2):
            k.op("cvt.f32.f16 %s, %s" % (o[e], hs[e]))
    else:
        k.op("shl.b32 %s, %s, 16" % (o[0], w))
        k.op("and.b32 %s, %s, 0xFFFF0000" % (o[1], w))
    return o


class IntScale:
    """int8 output value of accumulator i: the s32 sum as f32 (exact below
    2^24), times alpha, then row_scale[row] and col_scale[col] where those
    pointers are not 0.  Built per element inside the epilogue, so no more
    than one converted value and one column predicate are live at a time
    (converting all 128 up front spilled)."""

    def __init__(self, k, P, acc, m0, n0, cw, warp, lane):
        self.k, self.P, self.acc = k, P, acc
        g = k.r("shr.u32", lane, 2)
        row0 = k.r("add.u32", m0, k.r("add.u32", k.r("shl.b32", cw, 6),
                                       k.r("add.u32", k.r("shl.b32", warp, 4), g)))
        self.col0 = k.r("add.u32", n0, k.r("shl.b32", k.r("and.b32", lane, 3), 1))
        prs = k.p("setp.ne.u64", P["row_scale"], 0)
        self.pcs = k.p("setp.ne.u64", P["col_scale"], 0)
        rs = k.rd("cvta.to.global.u64", P["row_scale"])
        self.cs = k.rd("add.u64", k.rd("cvta.to.global.u64", P["col_scale"]),
                       k.rd("mul.wide.u32", self.col0, 4))
        self.rsc = []
        for h in range(2):
            row = k.r("add.u32", row0, 8 * h)
            ok = k.p("and.pred", prs, k.p("setp.lt.u32", row, P["m"]))
            r = k.f("mov.f32", "0f3F800000")
            k.op("@%s ld.global.f32 %s, [%s]" % (ok, r, k.rd("add.u64", rs, k.rd("mul.wide.u32", row, 4))))
            self.rsc.append(r)

    def __call__(self, j, h, e):
        """((f32(acc) * alpha) * row_scale) * col_scale, each product rounded: the
        same order as the sm_80 int8 kernel, so both give the same bits (a missing
        scale multiplies by 1, exactly)."""
        k = self.k
        c = k.f("mov.f32", "0f3F800000")
        ok = k.p("and.pred", self.pcs, k.p("setp.lt.u32", k.r("add.u32", self.col0, 8 * j + e), self.P["n"]))
        k.op("@%s ld.global.f32 %s, [%s+%d]" % (ok, c, self.cs, 4 * (8 * j + e)))
        f = k.f("mul.rn.f32", k.f("cvt.rn.f32.s32", self.acc[4 * j + 2 * h + e]), self.P["alpha"])
        return k.f("mul.rn.f32", k.f("mul.rn.f32", f, self.rsc[h]), c)


def float_value(k, P, acc):
    """f32 output value of accumulator (j, h, e): alpha * acc."""
    return lambda j, h, e: k.f("mul.rn.f32", P["alpha"], acc[4 * j + 2 * h + e])


def store_i32(k, P, acc, row_ok, whole_n, col0, elem0, nj, done):
    """int8 kernels, out_dtype 6 (i32): the exact s32 sums, unscaled (the host
    passes alpha 1, no scale vectors, beta 0).  2-element stores when the tile
    is whole along N and C / ldc are 8-byte aligned, else element stores under
    column predicates."""
    other = k.label("not_i32")
    k.op("@%s bra.uni %s" % (k.p("setp.ne.u32", P["out_dtype"], 6), other))
    pc = k.rd("add.u64", P["c"], k.rd("shl.b64", elem0, 2))
    prow = [pc, k.rd("add.u64", pc, k.rd("shl.b64", P["ldc"], 5))]       # + 8 rows
    aligned = k.p("setp.eq.u64", k.rd("and.b64", k.rd("or.b64", P["c"], k.rd("shl.b64", P["ldc"], 2)), 7), 0)
    slow = k.label("i32_slow")
    k.op("@!%s bra.uni %s" % (k.p("and.pred", whole_n, aligned), slow))
    for h in range(2):
        for j in range(nj):
            k.op("@%s st.global.v2.s32 [%s+%d], {%s, %s}" % (
                row_ok[h], prow[h], 32 * j, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]))
    k.op("bra.uni %s" % done)
    k.place(slow)
    for j in range(nj):
        for e in range(2):
            col_in = k.p("setp.lt.u32", k.r("add.u32", col0, 8 * j + e), P["n"])
            for h in range(2):
                k.op("@%s st.global.s32 [%s+%d], %s" % (
                    k.p("and.pred", row_ok[h], col_in), prow[h], 4 * (8 * j + e), acc[4 * j + 2 * h + e]))
    k.op("bra.uni %s" % done)
    k.place(other)


def store_quad16(k, pred, ptr, off, odd, w0, w1):
    """16-bit out: w0, w1 = this thread's packed pairs of column blocks 2J and
    2J + 1 (columns 2t, 2t + 1 of each).  An even lane keeps w0 and takes its
    odd neighbour's w0; an odd lane keeps w1 and takes its even neighbour's w1:
    4 adjacent columns each, stored as one 8-byte word at ptr + off (ptr
    already holds the odd lanes' + 12 bytes).  Every lane shuffles, the store
    alone is predicated."""
    got = k.reg("r")
    k.op("shfl.sync.bfly.b32 %s, %s, 1, 0x1f, 0xffffffff" % (got, k.r("selp.b32", w0, w1, odd)))
    lo = k.r("selp.b32", got, w0, odd)
    hi = k.r("selp.b32", w1, got, odd)
    k.op("@%s st.global.v2.b32 [%s+%d], {%s, %s}" % (pred, ptr, off, lo, hi))


def epilogue(k, P, value, m0, n0, cw, warp, lane, bn, done, int_acc=None):
    """acc[4j + v]: row 16w + g + 8(v >> 1), col 8j + 2t + (v & 1) of this
    consumer's 64 x bn block (w = warp in the warpgroup, g = lane/4, t = lane%4).
    One fast path per output dtype (whole tile along N, C and ldc aligned to
    element pairs: 2-element stores), one shared slow path (element stores
    under row/column predicates, dtype picked per element)."""
    nj = bn // 8
    g = k.r("shr.u32", lane, 2)
    t2 = k.r("shl.b32", k.r("and.b32", lane, 3), 1)
    row0 = k.r("add.u32", m0, k.r("add.u32", k.r("shl.b32", cw, 6),
                                   k.r("add.u32", k.r("shl.b32", warp, 4), g)))
    col0 = k.r("add.u32", n0, t2)
    pbeta = k.p("setp.ne.f32", P["beta"], "0f00000000")
    row_ok = [k.p("setp.lt.u32", row0, P["m"]),
              k.p("setp.lt.u32", k.r("add.u32", row0, 8), P["m"])]
    whole_n = k.p("setp.le.u32", k.r("add.u32", n0, bn), P["n"])
    elem0 = k.rd("add.u64", k.rd("mul.lo.u64", k.wide(row0), P["ldc"]), k.wide(col0))
    if int_acc is not None:
        store_i32(k, P, int_acc, row_ok, whole_n, col0, elem0, nj, done)
    k.note("out_dtype outside 1..3: write nothing")
    k.op("@%s bra.uni %s" % (k.p("setp.gt.u32", k.r("sub.u32", P["out_dtype"], 1), 2), done))
    is32 = k.p("setp.eq.u32", P["out_dtype"], 1)
    sh = k.r("selp.b32", 2, 1, is32)                     # log2(element size)
    pc = k.rd("add.u64", P["c"], k.rd("shl.b64", elem0, sh))
    prow = [pc, k.rd("add.u64", pc, k.rd("shl.b64", P["ldc"], k.r("add.u32", sh, 3)))]   # + 8 rows
    esz = k.r("shl.b32", 1, sh)
    # 8-byte stores on the fast path, any dtype (f32 pairs, 16-bit quads)
    aligned = k.p("setp.eq.u64",
                  k.rd("and.b64", k.rd("or.b64", P["c"], k.rd("shl.b64", P["ldc"], sh)), 7), 0)
    slow = k.label("slow")
    k.op("@!%s bra.uni %s" % (k.p("and.pred", whole_n, aligned), slow))
    # 16-bit out: lanes t, t ^ 1 of a quad trade one packed pair per two column
    # blocks j = 2J, 2J + 1, so that each thread stores 4 adjacent columns (8
    # bytes) and a warp's store fills whole 32-byte sectors of 8 rows; even t:
    # columns 16J + 2t .. + 3, odd t: 16J + 2t + 6 .. + 9.
    odd = k.p("setp.ne.u32", k.r("and.b32", lane, 1), 0)
    q16 = [k.rd("add.u64", p, k.rd("cvt.u64.u32", k.r("selp.b32", 12, 0, odd))) for p in prow]

    for code, name, esize in ((1, "f32", 4), (2, "f16", 2), (3, "bf16", 2)):
        nxt = k.label("not_" + name)
        if code != 3:
            k.op("@%s bra.uni %s" % (k.p("setp.ne.u32", P["out_dtype"], code), nxt))
        k.note("out dtype %s, whole along N and aligned: 2-element stores, rows predicated" % name)
        for with_beta in (False, True):
            if with_beta:
                k.place(fbeta)
                k.note("beta != 0: out = fma(beta, C, alpha*acc)")
            else:
                fbeta = k.label("fast_beta_" + name)
                k.op("@%s bra.uni %s" % (pbeta, fbeta))
            for h in range(2):
                words = []
                for j in range(nj):
                    v = [value(j, h, e) for e in range(2)]
                    off = 8 * j * esize
                    if with_beta:
                        o = load_pair(k, name, row_ok[h], prow[h], off)
                        for e in range(2):
                            k.op("@%s fma.rn.f32 %s, %s, %s, %s" % (row_ok[h], v[e], P["beta"], o[e], v[e]))
                    if name == "f32":
                        k.op("@%s st.global.v2.f32 [%s+%d], {%s, %s}" % (row_ok[h], prow[h], off, v[0], v[1]))
                        continue
                    words.append(k.r("cvt.rn.%sx2.f32" % name, v[1], v[0]))   # first source -> upper half
                    if j % 2:
                        store_quad16(k, row_ok[h], q16[h], 16 * (j - 1), odd, words[-2], words[-1])
            k.op("bra.uni %s" % done)
        if code != 3:
            k.place(nxt)

    k.place(slow)
    k.note("edge along N or unaligned C: element stores under row/column predicates, any dtype")
    is16 = k.p("setp.eq.u32", P["out_dtype"], 2)
    step8 = k.rd("cvt.u64.u32", k.r("shl.b32", esz, 3))   # 8 columns in bytes
    for h in range(2):
        ptr = k.rd("mov.b64", prow[h])
        ok32 = k.p("and.pred", row_ok[h], is32)
        ok16 = k.p("and.pred", row_ok[h], k.p("not.pred", is32))
        for j in range(nj):
            if j:
                k.op("add.u64 %s, %s, %s" % (ptr, ptr, step8))
            for e in range(2):
                addr = ptr if e == 0 else k.rd("add.u64", ptr, k.rd("cvt.u64.u32", esz))
                col_in = k.p("setp.lt.u32", k.r("add.u32", col0, 8 * j + e), P["n"])
                p32 = k.p("and.pred", ok32, col_in)
                p16 = k.p("and.pred", ok16, col_in)
                v = value(j, h, e)
                # beta: raw bits of the old value (zero when not read, so every register
                # is defined on all paths)
                raw = k.r("mov.b32", 0)
                k.op("@%s ld.global.b32 %s, [%s]" % (k.p("and.pred", p32, pbeta), raw, addr))
                k.op("@%s ld.global.u16 %s, [%s]" % (k.p("and.pred", p16, pbeta), raw, addr))
                hraw = k.reg("h")
                k.op("cvt.u16.u32 %s, %s" % (hraw, raw))
                old = k.f("selp.f32", raw, k.f("shl.b32", raw, 16), is32)
                k.op("@%s cvt.f32.f16 %s, %s" % (is16, old, hraw))
                k.op("@%s fma.rn.f32 %s, %s, %s, %s" % (pbeta, v, P["beta"], old, v))
                k.op("@%s st.global.f32 [%s], %s" % (p32, addr, v))
                h16 = k.reg("h")
                k.op("cvt.rn.bf16.f32 %s, %s" % (h16, v))
                k.op("@%s cvt.rn.f16.f32 %s, %s" % (is16, h16, v))
                k.op("@%s st.global.b16 [%s], %s" % (p16, addr, h16))
    k.op("bra.uni %s" % done)


# --------------------------------------------------------------------------
# Long K: the accumulators summed per chunk of K steps
# --------------------------------------------------------------------------
# The tensor cores add each k16 product into the f32 accumulators less
# exactly than an f32 add: the error grows about linearly with K (measured
# 6.5e-5 relative at K 57344, where cuBLAS, splitting K at M = 128, errs
# 1.7e-5). With chunks on (kchunk K steps, f32 output or f32 split
# partials), each chunk starts from fresh accumulators and is added into f32
# totals in registers (add.rn, in chunk order: deterministic), so the error
# stays that of one chunk at any K. The 128 x 128 and 128 x 64 tiles only:
# the wide tile has no registers for a second set of 128 (its shapes, many
# tiles, are those cuBLAS does not split either: the same error, measured).

def chunked(cfg, int8):
    return not int8 and cfg["bn"] <= 128


def chunk_setup(k, P, nsplit, fused, bn, cluster=False):
    """(chunk, cleft, tot): K steps per chunk (all ones when chunks are off:
    never reached), steps left in this chunk, the totals (-0.0).  Cluster
    kernels always add f32 partials."""
    steps = P["kchunk"]
    if cluster:
        on = k.p("setp.ne.u32", steps, 0)
    else:
        f32 = k.p("setp.eq.u32", P["out_dtype"], 1)
        if fused:
            f32 = k.p("or.pred", f32, k.p("setp.gt.u32", nsplit, 1))
        on = k.p("and.pred", k.p("setp.ne.u32", steps, 0), f32)
    chunk = k.r("selp.b32", steps, "0xFFFFFFFF", on)
    tot = k.regs("f", bn // 2)
    for x in tot:
        k.op("mov.f32 %s, 0f80000000" % x)
    return chunk, k.r("mov.u32", chunk), tot


def chunk_boundary(k, acc, tot, chunk, cleft):
    """Top of a K step: at the end of a chunk, wait for its wgmma groups and
    add the accumulators into the totals; the step then starts a new chunk."""
    with skip_if(k, k.p("setp.ne.u32", cleft, 0), "no_flush", uni=True):
        wgmma.wait(k, 0)
        for x, a in zip(tot, acc):
            k.op("add.rn.f32 %s, %s, %s" % (x, x, a))
        k.op("mov.u32 %s, %s" % (cleft, chunk))


# --------------------------------------------------------------------------
# K split over a cluster
# --------------------------------------------------------------------------

def cluster_tile(k, P, acc, splits, base, recv_off, m0, n0, cw, warp, lane, bn, done):
    """Cluster kernels: rank r owns a run of the tile's 8-column blocks (acc
    quads; pairs of them, as the 16-bit fast path stores two at once), sums
    the cluster's partials of it in rank order (kaio_ptx/cluster_sum.py) and
    runs the epilogue on those columns alone."""
    parts = cluster_sum.bounds(bn // 8, splits, unit=2)

    def store(r, mine, q0):
        q1 = parts[r][1]
        n0r = k.r("add.u32", n0, 8 * q0) if q0 else n0
        epilogue(k, P, float_value(k, P, mine), m0, n0r, cw, warp, lane, 8 * (q1 - q0), done)

    cluster_sum.sum_parts(k, acc, parts, base, recv_off, store,
                          lambda r: "columns %d..%d" % (8 * parts[r][0], 8 * parts[r][1] - 1))


# --------------------------------------------------------------------------
# Kernel
# --------------------------------------------------------------------------

def layout(cfg):
    bn, ncons, stages = cfg["bn"], cfg["consumers"], cfg["stages"]
    bm = 64 * ncons
    stage_bytes = (bm + bn) * BK * 2
    bar_off = stages * stage_bytes
    # + run-time 1024-B alignment slack; _sk: + the last-arrival flag after the
    # barriers; cluster: + the partials' mbarrier (the partials land in the stages)
    shared = bar_off + 2 * stages * 8 + (16 if cfg["fused"] else 0) + (8 if cfg["cluster"] else 0) + 1024
    return bm, stage_bytes, bar_off, shared


def fused_splits(k, P, acc, t, ntiles, nsplit, tid, bars, stages, bm, bn, epi, done):
    """_sk kernels, more than one split: every split stores its f32 partial
    tile (unscaled) in the workspace, slot split * ntiles + tile, in
    fragment order (consumer thread i's float4 q at (q * 256 + i) * 16
    bytes: coalesced, and read back by the same thread); the CTA that counts
    last for the tile sums the splits in split order from -0.0 (the
    identity: the bits do not depend on which CTA is last) into acc, sets
    the count back to zero and goes on to the epilogue; the others skip it."""
    nthreads = 128 * (bm // 64)
    k.note("split-K in the kernel: one split goes straight to the epilogue")
    k.op("@%s bra.uni %s" % (k.p("setp.eq.u32", nsplit, 1), epi))
    split = k.r("div.u32", t, ntiles)
    tile = k.r("sub.u32", t, k.r("mul.lo.u32", split, ntiles))
    ctid = k.r("sub.u32", tid, 128)
    slot_bytes = bm * bn * 4
    mine = k.rd("add.u64", P["ws"], k.rd("mul.wide.u32", ctid, 16))
    k.note("store this split's partial tile, count it; the last CTA of the tile sums them")
    own = k.rd("add.u64", mine, k.rd("mul.wide.u32", k.r("mad.lo.u32", split, ntiles, tile), slot_bytes))
    nq = bn // 8
    for q in range(nq):
        k.op("st.global.v4.f32 [%s+%d], {%s}" % (own, q * nthreads * 16, ", ".join(acc[4 * q:4 * q + 4])))
    counter = k.rd("add.u64", P["count"], k.rd("mul.wide.u32", tile, 4))
    flag = k.r("add.u32", bars, 16 * stages)
    last = arrival.count_last(k, k.p("setp.eq.u32", ctid, 0), counter, nsplit, flag,
                              "bar.sync 1, %d" % nthreads)
    k.op("@!%s bra.uni %s" % (last, done))
    arrival.acquire(k)
    tot = k.regs("f", bn // 2)
    for x in tot:
        k.op("mov.f32 %s, 0f80000000" % x)
    s = k.r("mov.u32", 0)
    with loop(k, "split_sum", uni=True) as lp:
        nxt = k.label("split_next")
        with skip_if(k, k.p("setp.ne.u32", s, split), "split_other", uni=True):
            for x, a in zip(tot, acc):
                k.op("add.rn.f32 %s, %s, %s" % (x, x, a))
            k.op("bra.uni %s" % nxt)
        src = k.rd("add.u64", mine, k.rd("mul.wide.u32", k.r("mad.lo.u32", s, ntiles, tile), slot_bytes))
        for q in range(nq):
            part = k.regs("f", 4)
            k.op("ld.global.cg.v4.f32 {%s}, [%s+%d]" % (", ".join(part), src, q * nthreads * 16))
            for e in range(4):
                k.op("add.rn.f32 %s, %s, %s" % (tot[4 * q + e], tot[4 * q + e], part[e]))
        k.place(nxt)
        k.op("add.u32 %s, %s, 1" % (s, s))
        lp.again(k.p("setp.lt.u32", s, nsplit))
    for x, a in zip(tot, acc):
        k.op("mov.f32 %s, %s" % (a, x))


def matmul_kernel(dt, la, lb, cfg):
    bn, ncons, stages = cfg["bn"], cfg["consumers"], cfg["stages"]
    bm, stage_bytes, bar_off, shared = layout(cfg)
    fused, cluster = cfg["fused"], cfg["cluster"]
    name = "kaio_matmul_sm90_%s_%s%s%s%s%s" % (dt, la, lb, cfg["suffix"], "_sk" if fused else "",
                                             "_k%d" % cluster if cluster else "")
    sel = ({"select": "matmul_sm90_sk"} if fused else
           {"select": "matmul_sm90_cluster", "split_k": cluster} if cluster else {})
    manifest.keys(name, dtype=dt, trans_a=la == "t", trans_b=lb == "t", tile=cfg["suffix"].lstrip("_") or "n256", **sel)
    int8 = dt == "s8"
    assert not (int8 and (fused or cluster)), "int8 never splits K (f32 partials would lose the exact sum)"
    assert not (fused and cluster)
    if cluster:
        assert (cluster - 1) * cluster_sum.slot_bytes(cluster_sum.bounds(bn // 8, cluster, 2)) <= bar_off, \
            "the partials must fit in the stages"
    # K per 128-byte swizzle row: 64 16-bit or 128 8-bit elements
    bk, lg_bk = (128, 7) if int8 else (BK, 6)
    manifest.facts(name, tile=[bm, bn, bk])
    assert not int8 or (la, lb) == ("n", "t"), "int8 wgmma takes K-major operands only"
    A = Operand("A", la == "n", bm, cfg, bk)
    B = Operand("B", lb == "t", bn, cfg, bk)
    assert bn % 64 == 0 and 8 <= bn <= 256 and A.bytes % 1024 == 0
    nthreads = 128 * (1 + ncons)
    # two consumers: .maxntid 384 + .minnctapersm 1 caps the entry at 168 registers and
    # setmaxnreg moves them to the consumers; one consumer (_m64): two CTAs an SM, 128
    # registers each thread, enough for its 32 accumulators, so no setmaxnreg
    per_sm = cfg["ctas_per_sm"]
    regs = cfg["prod_regs"] is not None
    assert (nthreads, per_sm, regs) in ((384, 1, True), (256, 2, False))
    assert not regs or 128 * cfg["prod_regs"] + 128 * ncons * cfg["cons_regs"] <= 65536
    k = Kernel()

    P = {}
    P["c"] = k.rd("cvta.to.global.u64", k.rd("ld.param.u64", "[c]"))
    for pname in ("m", "n", "k", "out_dtype", "kper"):
        P[pname] = k.r("ld.param.u32", "[%s]" % pname)
    P["ldc"] = k.rd("ld.param.u64", "[ldc]")
    P["split_elems"] = k.rd("ld.param.u64", "[split_elems]")
    if fused:
        for pname in ("ws", "count"):
            P[pname] = k.rd("cvta.to.global.u64", k.rd("ld.param.u64", "[%s]" % pname))
    if int8:
        for pname in ("row_scale", "col_scale"):
            P[pname] = k.rd("ld.param.u64", "[%s]" % pname)
    else:
        P["kchunk"] = k.r("ld.param.u32", "[kchunk]")
    for pname in ("alpha", "beta"):
        P[pname] = k.f("ld.param.f32", "[%s]" % pname)

    tid = k.r("mov.u32", "%tid.x")
    wg = k.r("shr.u32", tid, 7)
    base = k.smem_base(SMEM_SYM)
    bars = k.r("add.u32", base, bar_off)            # full[s] at bars + 8s, empty[s] at + 8(stages + s)
    tiles_m = k.r("shr.u32", k.r("add.u32", P["m"], bm - 1), (bm).bit_length() - 1) \
        if bm & (bm - 1) == 0 else k.r("div.u32", k.r("add.u32", P["m"], bm - 1), bm)
    tiles_n = k.r("shr.u32", k.r("add.u32", P["n"], bn - 1), (bn).bit_length() - 1) \
        if bn & (bn - 1) == 0 else k.r("div.u32", k.r("add.u32", P["n"], bn - 1), bn)
    ntiles = k.r("mul.lo.u32", tiles_m, tiles_n)
    ktiles = k.r("shr.u32", k.r("add.u32", P["k"], bk - 1), lg_bk)
    k.note("split-K: work item t = split * ntiles + tile; split s covers K steps [s*kper, s*kper + kper)")
    kper = k.r("min.u32", k.r("max.u32", P["kper"], 1), ktiles)
    nsplit = k.r("div.u32", k.r("add.u32", ktiles, k.r("sub.u32", kper, 1)), kper)
    nwork = ntiles if cluster else k.r("mul.lo.u32", ntiles, nsplit)
    cta = k.r("mov.u32", "%ctaid.x")
    nctas = k.r("mov.u32", "%nctaid.x")

    k.note("thread 0 (the TMA thread): fetch the tensor maps while the barriers are set up")
    tmaps = [k.rd("cvta.param.u64", k.rd("mov.b64", pname)) for pname in ("tmap_a", "tmap_b")]
    tid0 = k.p("setp.eq.u32", tid, 0)
    for tm in tmaps:
        k.op("@%s prefetch.tensormap [%s]" % (tid0, tm))
    k.note("thread 0: init the full/empty barriers")
    k.init_mbarriers(tid, bars, Ring.inits(stages, 0, 8 * stages, 4 * ncons) +
                     ([(16 * stages, 1)] if cluster else []))   # cluster: the partials' mbarrier
    consumer = k.label("consumer")
    exit_ = k.label("exit")
    k.op("@%s bra.uni %s" % (k.p("setp.ne.u32", wg, 0), consumer))

    # ---------------- producer warpgroup ----------------
    k.note("producer warpgroup: give registers back, one thread issues every TMA load")
    if regs:
        k.op("setmaxnreg.dec.sync.aligned.u32 %d" % cfg["prod_regs"])
    # cluster: every thread meets the cluster's barrier once (kaio_ptx/cluster_sum.py)
    prod_exit = k.label("producer_exit") if cluster else exit_
    k.op("@%s bra %s" % (k.p("setp.ne.u32", tid, 0), prod_exit))
    ring = Ring(k, bars, stages, 0, 8 * stages, mad=True)
    t = k.r("mov.u32", cta)
    ptile = k.label("p_tile")
    k.place(ptile)
    k.op("@%s bra %s" % (k.p("setp.ge.u32", t, nwork), prod_exit))
    m0, n0, kbeg, kcnt = work_item(k, t, ntiles, tiles_m, tiles_n, ktiles, kper, cfg, bm, bn)
    if cluster:
        k.op("@%s bra %s" % (k.p("setp.eq.u32", kcnt, 0), prod_exit))
    kc = k.r("shl.b32", kbeg, lg_bk)
    kt = k.r("mov.u32", 0)
    pk = k.label("p_k")
    k.place(pk)
    full = ring.acquire(stage_bytes)
    stage = k.r("mad.lo.u32", ring.s, stage_bytes, base)
    last = {"A": k.r("sub.u32", P["m"], 1), "B": k.r("sub.u32", P["n"], 1)}
    for op, tm, blk, off0 in ((A, tmaps[0], m0, 0), (B, tmaps[1], n0, A.bytes)):
        for soff, roff in op.boxes:
            # a panel wholly past M/N only feeds output rows/columns that are never
            # stored: start it inside the matrix so that no box is entirely out of
            # bounds, at a multiple of 8 elements (a TMA box must start on a 16-byte
            # boundary along the inner dimension: an unaligned start is an illegal
            # instruction, seen on the H100)
            rc = blk if roff == 0 else k.r("min.u32", k.r("add.u32", blk, roff),
                                           k.r("and.b32", last[op.tag], "0xFFFFFFF8"))
            coords = (kc, rc) if op.kmajor else (rc, kc)
            tma.load(k, "%s+%d" % (stage, off0 + soff), tm, coords, full)
    ring.advance()
    k.op("add.u32 %s, %s, %d" % (kc, kc, bk))
    k.op("add.u32 %s, %s, 1" % (kt, kt))
    k.op("@%s bra %s" % (k.p("setp.lt.u32", kt, kcnt), pk))
    if cluster:
        k.note("one tile a CTA")
        k.place(prod_exit)
        cluster_sum.cluster_barrier(k)
        k.op("bra.uni %s" % exit_)
    else:
        k.op("add.u32 %s, %s, %s" % (t, t, nctas))
        k.op("bra %s" % ptile)

    # ---------------- consumer warpgroups ----------------
    k.place(consumer)
    k.note("consumer warpgroups: 64 rows each, wgmma from shared memory")
    if regs:
        k.op("setmaxnreg.inc.sync.aligned.u32 %d" % cfg["cons_regs"])
    cw = k.r("sub.u32", wg, 1)
    warp = k.r("and.b32", k.r("shr.u32", tid, 5), 3)
    lane = k.r("and.b32", tid, 31)
    lane0 = k.p("setp.eq.u32", lane, 0)
    a_slice = k.r("mul.lo.u32", cw, A.slice)
    dbase = tma.cta_window(k, base) if cluster else base     # for the descriptors
    acc = k.regs("r" if int8 else "f", bn // 2)
    ring = Ring(k, bars, stages, 0, 8 * stages, mad=True)
    prev = k.r("mov.u32", 0)
    t = k.r("mov.u32", cta)
    ctile = k.label("c_tile")
    k.place(ctile)
    no_tile = k.label("no_tile") if cluster else exit_
    k.op("@%s bra.uni %s" % (k.p("setp.ge.u32", t, nwork), no_tile))
    m0, n0, kbeg, kcnt = work_item(k, t, ntiles, tiles_m, tiles_n, ktiles, kper, cfg, bm, bn)
    chunks = chunked(cfg, int8)
    if chunks:
        k.note("long K: chunks of kchunk K steps, each added into f32 totals")
        chunk, cleft, tot = chunk_setup(k, P, nsplit, fused, bn, cluster)
    if cluster:
        no_steps = k.label("no_steps")
        k.op("@%s bra.uni %s" % (k.p("setp.eq.u32", kcnt, 0), no_steps))
    kt = k.r("mov.u32", 0)
    ck = k.label("c_k")
    k.place(ck)
    if chunks:
        chunk_boundary(k, acc, tot, chunk, cleft)
    ring.wait_full()
    stage = k.r("mad.lo.u32", ring.s, stage_bytes, dbase)
    addrs = [(A, k.r("add.u32", stage, a_slice)), (B, k.r("add.u32", stage, A.bytes))]
    da, db = [wgmma.desc(k, addr, op.lbo, op.sbo) for op, addr in addrs]
    notfirst = k.p("setp.ne.u32", kt, 0)
    # the first step of a chunk starts the accumulators afresh
    accum = k.p("setp.ne.u32", cleft, chunk) if chunks else notfirst
    if chunks:
        k.op("sub.u32 %s, %s, 1" % (cleft, cleft))
    wgmma.fence(k)
    for kk in range(BK // 16):
        wgmma.mma(k, dt, bn, acc, wgmma.advance(k, da, kk * A.kstep), wgmma.advance(k, db, kk * B.kstep),
                  accum if kk == 0 else "1", A.trans, B.trans)
    wgmma.commit(k)
    wgmma.wait(k, 1)
    k.note("the group before this one is done: its stage goes back to the producer")
    ring.release(k.p("and.pred", lane0, notfirst), prev)
    k.op("mov.u32 %s, %s" % (prev, ring.s))
    ring.advance()
    k.op("add.u32 %s, %s, 1" % (kt, kt))
    k.op("@%s bra.uni %s" % (k.p("setp.lt.u32", kt, kcnt), ck))
    wgmma.wait(k, 0)
    ring.release(lane0, prev)
    if cluster:
        summed = k.label("steps_done")
        k.op("bra.uni %s" % summed)
        k.place(no_steps)
        k.note("no K steps in this split: a partial of zeros")
        for a in acc:
            k.op("mov.f32 %s, 0f00000000" % a)
        k.place(summed)
    if chunks:
        k.note("the last chunk plus the totals (-0.0 + x = x: one chunk keeps its bits)")
        for a, x in zip(acc, tot):
            k.op("add.rn.f32 %s, %s, %s" % (a, x, a))
    done = k.label("stored")
    if cluster:
        cluster_tile(k, P, acc, cluster, base, bar_off + 2 * stages * 8, m0, n0, cw, warp, lane, bn, done)
        k.place(no_tile)
        k.note("no tile: the cluster's barrier all the same")
        cluster_sum.cluster_barrier(k)
        k.place(done)
    else:
        if fused:
            epi = k.label("epilogue")
            fused_splits(k, P, acc, t, ntiles, nsplit, tid, bars, stages, bm, bn, epi, done)
            k.place(epi)
            Pt = P
        else:
            k.note("split s > 0 stores its f32 partial sum at c + s * split_elems (the host's workspace)")
            split = k.r("div.u32", t, ntiles)
            Pt = dict(P, c=k.rd("add.u64", P["c"], k.rd("shl.b64", k.rd("mul.lo.u64", k.wide(split), P["split_elems"]), 2)))
        value = IntScale(k, P, acc, m0, n0, cw, warp, lane) if int8 else float_value(k, P, acc)
        epilogue(k, Pt, value, m0, n0, cw, warp, lane, bn, done, acc if int8 else None)
        k.place(done)
        k.op("add.u32 %s, %s, %s" % (t, t, nctas))
        k.op("bra.uni %s" % ctile)
    k.place(exit_)
    k.op("ret")

    doc = [
        "%s: C = alpha * op(A) * op(B) + beta * C, A %s (%s), B %s (%s), %s inputs, f32 accumulation."
        % (name, la, "K x M" if la == "t" else "M x K", lb, "N x K" if lb == "t" else "K x N", dt),
        "CTA tile %d x %d x %d, %d stages, 1 TMA producer + %d wgmma consumer warpgroups." % (
            bm, bn, bk, stages, ncons),
    ] + (["Split-K summed in the kernel: the last CTA to finish a tile's split adds the splits."]
         if fused else [])
    ann = [A.tma_line(name, "tmap_a", dt), B.tma_line(name, "tmap_b", dt)]
    if cluster:
        doc.append("K split over a cluster of %d CTAs (grid z = %d, kper K steps each), the partials"
                   " summed in rank order through DSMEM; one tile a CTA." % (cluster, cluster))
        ann.append("// kaio-launch: %s grid=ceil(M/%d)*ceil(N/%d),1,%d block=%d,1,1"
                   % (name, bm, bn, cluster, nthreads))
    else:
        ann.append("// kaio-launch: %s grid=min(ceil(M/%d)*ceil(N/%d),%ssm_count),1,1 block=%d,1,1"
                   % (name, bm, bn, "%d*" % per_sm if per_sm > 1 else "", nthreads))
    ann.append("// kaio-shared-bytes: %s %d" % (name, shared))
    directives = [".maxntid %d, 1, 1" % nthreads, ".minnctapersm %d" % per_sm]
    if cluster:
        directives.append(".reqnctapercluster 1, 1, %d" % cluster)
    return k.entry_text(name, "\n".join(doc), ann,
                        INT8_PARAMS if int8 else FUSED_FLOAT_PARAMS if fused else FLOAT_PARAMS,
                        directives)


# --------------------------------------------------------------------------

# Half-width tiles for few-tile shapes (M = 128 prefill chunks): twice the
# CTAs per split, so split-K needs half the splits and half the partials'
# round trip through DRAM.
NARROW_CFG = {"bn": 128, "stages": 6, "suffix": "_n128"}
# Quarter-width tiles (128 x 64, 8 stages of 24 KiB) for shapes whose 128-wide
# tiles still leave SMs idle: M = 128 linear layers get twice the CTAs without
# splitting K (no partials, no reduction launch), small squares four times as
# many as with wide tiles.  16-bit inputs only.
SLIM_CFG = {"bn": 64, "stages": 8, "suffix": "_n64", "int8": False}
# 64 x 64 tiles (_m64: one consumer warpgroup, 6 stages of 16 KiB, two CTAs
# an SM) for the small squares: at 512^3 the 128 x 64 tiles give 32 CTAs of 8
# K steps and cuBLAS's 64 x 48 tiles 96 (ncu, bench/RESULTS.md, session 23);
# halving a CTA's rows halves the bytes each K step brings into its SM.
TINY_CFG = {"bn": 64, "consumers": 1, "stages": 6, "suffix": "_m64", "int8": False,
            "prod_regs": None, "cons_regs": None, "ctas_per_sm": 2}
# The same two tiles with split-K summed inside the kernel (_sk): the CTA
# that finishes a tile's last split adds the partials and runs the epilogue,
# so splitting K costs no second launch.
NARROW_SK_CFG = dict(NARROW_CFG, fused=True, int8=False)
SLIM_SK_CFG = dict(SLIM_CFG, fused=True)
# The same two tiles with K split over a cluster of CTAs (_k<S>): one tile
# a CTA, the partials summed through distributed shared memory, no
# workspace; for shapes with too few tiles for the SMs and few K steps
# (the squares 512-1024), where the _sk kernels' round trip through global
# memory costs more than the split saves.
CLUSTER_CFGS = tuple(dict(SLIM_CFG, cluster=s) for s in (2, 4)) + \
    tuple(dict(NARROW_CFG, cluster=s, int8=False) for s in (2, 3, 4))


def generate(cfgs=(None, NARROW_CFG, SLIM_CFG, TINY_CFG, NARROW_SK_CFG, SLIM_SK_CFG), layouts=("nt", "nn", "tn", "tt"), dtypes=("f16", "bf16")):
    parts = [preamble(__file__), extern_shared(SMEM_SYM, 1024)]
    for extra in cfgs:
        cfg = dict(DEFAULT_CFG, **(extra or {}))
        for dt in dtypes:
            for lay in layouts:
                parts.append("\n" + matmul_kernel(dt, lay[0], lay[1], cfg))
        # int8 (W8A8): A M x K and B N x K, both K-major, as wgmma requires
        if cfg["int8"]:
            parts.append("\n" + matmul_kernel("s8", "n", "t", cfg))
    return "".join(parts)


if __name__ == "__main__":
    sys.exit(cli.main(__file__, __doc__, lambda: {OUTPUT: generate(),
                                                  OUTPUT_CLUSTER: generate(CLUSTER_CFGS)}))
