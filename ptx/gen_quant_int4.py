#!/usr/bin/env python3
"""Generate libkaio's W4A16 kernels for GPTQ-packed weights.

    python3 ptx/gen_quant_int4.py --out-dir DIR  # write DIR/quant_int4.ptx, quant_int4_gemv_sm90.ptx

The weight format (GPTQ checkpoints) for a logical K x N weight W:
  qweight u32 [K/8, N] row-major: W(k, n) is nibble k % 8 (bits 4(k%8)..+3)
          of word (k/8, n), an unsigned value q in 0..15;
  qzeros  u32 [K/g, N/8] row-major: the zero point of (group k/g, column n)
          is nibble n % 8 of word (k/g, n/8); with no qzeros every zero is 8;
  scales  [K/g, N] row-major, of the activations' type (f16 or bf16).
  W(k, n) = ((q ^ xmask_nibble) - (z + zoff)) * s, computed exactly and
  rounded once to the activations' type (xmask 0x88888888 turns KAIO's signed
  nibbles into GPTQ's unsigned ones; zoff 1 reads the "zeros minus one"
  qzeros of AutoGPTQ's v1 format).

Kernels
  kaio_int4_gemv_<dt>_m<MT> (dt in {f16, bf16}, MT in {8, 16}):
      out_p = x * W_p for up to three weight sets p (grid.y picks p: fused
      QKV is one launch), rows m0 .. m0 + MT - 1 with m0 = MT * ctaid.z.
  kaio_int4_gemv_<dt>_m<MT>_g128[_w8|_w4]: the same for groups >= 128 (or
      g = K), each warp on a contiguous K range (see gemv_kernel's contig);
      16 warps per CTA, or 8 (_w8) / 4 (_w4): CONTIG_M8 and CONTIG_M16.
  kaio_int4_gemv_..._pdl (module quant_int4_gemv_sm90, PTX 7.8 sm_90): every int4 gemv
      above again, from the same gemv_kernel, behind grid_dependency's preamble
      (programmatic dependent launch: launch_dependents, then griddepcontrol.wait
      before any real read or store);
      the host picks them where the device runs sm_90 and the driver loads them.
  kaio_int4_dequant_<dt>: W (K x N row-major, dt) from the packed weight, for
      the prefill path (a workspace the op handle owns, then the f16 matmul).
  kaio_int4_transpose_u32: KAIO's column-major packing (u32 N x K/8) to the
      K/8 x N arrangement above.

gemv design (decode: the weight bytes are the cost)
  * Lane (g = lane/4, t = lane%4) of warp w loads, per K step s (32 k), the
    16 bytes qweight[4s + t][n + 4g .. n + 4g + 3] for each of CW column
    groups (n = CTA column base + 32 c): four packed rows of 128 contiguous
    bytes per instruction; WK warps take steps w, w + WK, ...; U steps are
    loaded per batch, the next batch's loads issued (in a basic block of
    their own) before the current one is multiplied.  The 8- and 4-warp
    kernels instead refill a set step by step as its batch is multiplied,
    with the batch two ahead: twice the loads in flight in the same
    registers.
  * One word holds k = 32s + 8t + j (j = 0..7) of one column.  The lane
    turns nibble pairs (j, j + 4) into f16x2/bf16x2 with one lop3
    (x & 0x000F000F | magic, magic = 1024 (f16) or 128 (bf16)), subtracts
    magic + zero exactly and multiplies by the scale (rounded once).  f16
    takes the odd pairs in place (x & 0x00F000F0 | 1024 = 1024 + 16q, times
    1/16 less 64 + z: exact) from the word and the word >> 8: one shift.
  * mma.sync.m16n8k16 with A = activations, B = dequantized weights.  The
    sum over k ignores order, so the fragment slots (2t, 2t+1, 2t+8, 2t+9)
    of mma h take k = 8t + 2h + (0, 4, 1, 5): B registers are the pairs
    (j, j+4) as produced, and A is the lane's 16-byte x chunk with prmt
    pairing (x0, x4), (x1, x5) / (x2, x6), (x3, x7).  The mma column g is
    weight column 4g + i of the group (i = 0..3: four mma per step and h).
    That is the m16 kernels' layout.  The m8 kernels (M <= 8) swap the
    roles: A = the weights, rows g and g + 8 of tile T (T = 0, 1) being
    columns 4g + 2T and 4g + 2T + 1, B = x row g in the same k slots, so an
    mma holds 256 weights and no padding rows: two mma per step and h.  Each
    output adds the same 16-k products in the same order: the same bits.
  * The 8- and 4-warp contiguous-K kernels: a batch whose steps and columns
    are all in range (every batch but a warp's last when K is not a multiple
    of the batch, outside the last CTA) loads without predicates or zero
    fills, x rows past M re-reading row M-1 (never stored); the sign mask is
    folded into the nibble lop3 ((w >> 4j) & 0xF) ^ (magic ^ (xmask & 0xF)),
    xmask being 0 or 0x88888888.  About 10 % fewer instructions a step, same
    bits; 2-4 % faster at N = K = 8192 and N 14336 (bench/RESULTS.md, session
    14), where the 16-warp kernels at N = K = 4096 ran 8 % slower with it.
  * Partial sums go to shared [warp][row][col] (f32); thread o then adds the
    WK partials of one output in warp order: no atomics, bitwise repeatable.
  The _pdl twins read x, scales and zeros with plain ld.global
  (grid_dep.coherent_loads): ptxas moved ld.global.nc above the wait.
  Host guarantees: K % 32 == 0, g = 32 << gshift divides K (or gshift 31
  when g = K), N_p % 8 == 0, x 16-byte aligned with ldx % 8 == 0, qweight
  16-byte aligned with ldqw % 4 == 0, scales 8-byte aligned with
  ldsc % 4 == 0; out_dtype 1 = f32, 2 = f16, 3 = bf16.
  Launch: '// kaio-launch:' line (block, cols_per_block X): grid
  (ceil(max N_p / X), projections, ceil(M / MT)).

Measured (H100, bench/bench_quant, group 128 with qzeros, 2026-11-22; see bench/RESULTS.md):
  N = K = 8192: the contiguous-K m8 kernel 19.7 us (1770 GB/s of weights, 2.44x cuBLAS f16)
  against 23.9 us for the interleaved kernel (its first version, now the small-group path);
  N = K = 4096: 8.4 us.  The m16 contiguous-K kernel with two sets of 4 steps spilled under
  the 128-register cap of 512 threads; it runs 2 steps per batch (or 4 with 4 warps).
  decode-bw: with 16 warps per CTA and 128 registers a CTA fills an SM, so N = K = 8192
  (256 CTAs) ran in two waves and N = 14336 (448) in four; 8 warps (2 CTAs per SM) and 4 warps
  (4 per SM) keep every CTA resident: N = K = 8192 M = 1 18.1 us (1925 GB/s, 2.67x),
  N = 14336 K = 4096 18.0 us (2.65x); M = 16 22.2 us (2.24x).  A scratch sweep on the same
  GPU also tried prefetch.global.L2 of the weights 1-3 batches ahead (2-10 % slower) and
  ld.global.nc.L1::no_allocate / .L2::256B on the weight loads (within noise).
  M = 16 with 8 warps per CTA (2 CTAs per SM): N = K = 8192 20.6 us (2.38x) where the 16-warp
  kernel's two waves took 22.3 us (2.20x); N = 14336 K = 4096 (448 CTAs) with 4 warps x 2 steps
  at 4 CTAs per SM 20.8 us (2.35x) against 22.0 us (2.21x) for 4 steps at 3 per SM, which
  stays the faster one while the grid fits it (fused QKV 3 x 4096, 384 CTAs: 18.5 us against 19.6).
  Tried in session 15 (bench/RESULTS.md), not kept: weights and x of the 8- and 4-warp kernels
  through a cp.async ring in dynamic shared memory (3 batches, copies two batches ahead, each
  thread reading back its own 16-byte chunks; 90-109 registers): N = K = 8192 M = 1 38.4 us
  against 20.2 (DRAM 29 %, 14.9 cycles per issued instruction); and, f16 only, nibbles 1 and 3
  dequantized in place as 1024 + 16 q (one shift a word instead of three, same bits): within
  noise (M = 1 20.2 us both, M = 16 21.9 against 22.0-22.3).  Kept in session 24, after the m8
  layout and the step-by-step refill: 2-4 % on the H200 (bench/RESULTS.md).
"""

import collections
import sys

from kaio_ptx import cli, manifest
from kaio_ptx.control import cases, if_else, loop, skip_if
from kaio_ptx.dtypes import OUT_DTYPES, store_f32_as
from kaio_ptx.grid_dep import coherent_loads, dependent_launch
from kaio_ptx.kernel import Kernel
from kaio_ptx.params import load_params
from kaio_ptx.preamble import preamble
from kaio_ptx.warp import sum_warp_partials

OUT_NAME = "quant_int4.ptx"
PDL_NAME = "quant_int4_gemv_sm90.ptx"   # the decode kernels again, as dependent launches
HEADER = preamble(__file__)
DTYPES = ("f16", "bf16")
MAGIC = {"f16": "0x64006400", "bf16": "0x43004300"}   # 1024.0 / 128.0 in both halves
ONE = {"f16": "0x3C003C00", "bf16": "0x3F803F80"}
NEG0 = "0x80008000"
# The contiguous-K (group >= 128) kernels: warps per CTA, steps per batch, the CTAs per SM that
# cap ptxas's registers (none spill), and the name suffix.  Fewer warps per CTA suit wider N:
# src/ops/quant_int4.cpp picks the most warps whose CTAs still fit the GPU in one wave
# (measured on the H100, see the header).
Contig = collections.namedtuple("Contig", "warps steps min_ctas suffix")
CONTIG_M8 = (Contig(16, 4, 1, ""), Contig(8, 4, 2, "_w8"), Contig(4, 4, 4, "_w4"))
# M <= 16: 16 or 8 warps take batches of 2 steps (4 spill under the 128-register cap of 512
# threads); 4 warps take 4 steps with up to 168 registers (3 CTAs per SM), or 2 steps at 4
# CTAs per SM for grids too large for that.
CONTIG_M16 = (Contig(16, 2, 1, ""), Contig(8, 2, 2, "_w8"), Contig(4, 4, 3, "_w4"),
              Contig(4, 2, 4, "_w4s2"))
CW, U, WARPS_SPLIT_K = 1, 2, 16   # column groups per warp, steps per batch, warps per CTA
X = 32 * CW                  # columns per CTA
PROJ = ("q", "k", "v")
PER_PROJ = ((".u64", "qw"), (".u64", "ldqw"), (".u64", "qz"), (".u64", "ldqz"),
            (".u64", "sc"), (".u64", "ldsc"), (".u64", "out"), (".u64", "ldo"), (".u32", "n"))
GEMV_PARAMS = ([(".u64", "x"), (".u64", "ldx"), (".u32", "m"), (".u32", "k"), (".u32", "gshift"),
                (".u32", "xmask"), (".u32", "zoff"), (".u32", "out_dtype")]
               + [(t, "%s_%s" % (nm, p)) for p in PROJ for t, nm in PER_PROJ])
PER_PROJ8 = ((".u64", "w"), (".u64", "ldw"), (".u64", "sc"), (".u32", "scstep"),
             (".u64", "out"), (".u64", "ldo"), (".u32", "n"))
GEMV8_PARAMS = ([(".u64", "x"), (".u64", "ldx"), (".u32", "m"), (".u32", "k"), (".u32", "out_dtype")]
                + [(t, "%s_%s" % (nm, p)) for p in PROJ for t, nm in PER_PROJ8])
MAGIC8 = "0x64646464"        # 0x64 bytes: 1024.0 as the high byte of an f16
NEG1152 = "0xE480E480"       # -(1024 + 128) in both halves
DQ_PARAMS = [(".u64", "qw"), (".u64", "ldqw"), (".u64", "qz"), (".u64", "ldqz"), (".u64", "sc"),
             (".u64", "ldsc"), (".u64", "w"), (".u64", "ldw"), (".u32", "n"), (".u32", "group"),
             (".u32", "xmask"), (".u32", "zoff")]
DQ_BLOCK = 256


def null_safe(k, P, name):
    """A pointer parameter that may be 0 (absent): 0 stays 0 after cvta."""
    raw = k.rd("ld.param.u64", "[%s]" % name)
    P[name] = k.rd("selp.b64", P[name], 0, k.p("setp.ne.u64", raw, 0))


def constants(k, dt):
    """Registers holding 1.0 and -0.0 in both halves (f16x2 math takes no immediates)."""
    return k.r("mov.b32", ONE[dt]), k.r("mov.b32", NEG0)


def dequant_pair(k, dt, cst, packed, bias_neg, scale2, mult=None):
    """f16x2/bf16x2 (packed holds magic | q in each half, or with mult = 1/16 the f16
    1024 + 16q): (q - z) * s, exact then rounded once."""
    d = k.r("fma.rn.%sx2" % dt, packed, mult or cst[0], bias_neg)
    return k.r("fma.rn.%sx2" % dt, d, scale2, cst[1])


def neg_bias(k, dt, zpair):
    """zpair: z in both 16-bit halves -> -(magic + z) in both halves."""
    return k.r("xor.b32", k.r("or.b32", zpair, MAGIC[dt]), NEG0)


def output_store(k, out_dtype, base, elem, v):
    done = k.label("stored")
    for code, name, esize in cases(k, out_dtype, OUT_DTYPES, done):
        addr = k.rd("add.u64", base, k.rd("shl.b64", elem, esize.bit_length() - 1))
        store_f32_as(k, name, addr, v)


def grid_dependency(k):
    """The sm_90 twins' preamble (kaio_ptx/grid_dep.py): launch_dependents,
    then the wait before any real read or write; the next matvec's CTAs take
    an SM only as ours leave it.  No L2 prefetch of the first batch before
    the wait (unlike kquant_stream.py's): measured on the H100 it made a
    launch that follows a kernel which does not trigger early (a norm, RoPE,
    or any launch alone) 0.3-0.7 us slower and saved only 0.3-0.6 us in
    back-to-back matvecs (bench/RESULTS.md, session 16)."""
    dependent_launch(k, None)


def gemv_kernel(dt, mt, wfmt="int4", contig=None, pdl=False):
    """wfmt "int4": GPTQ-packed weights; "int8": s8 K x N weights (W8A16), f16
    only, the per-tensor or per-column f32 scale applied to the f32 sums.
    contig (int4, groups of >= 128), a Contig: each warp takes a contiguous
    range of K, in batches of contig.steps consecutive steps that lie in one
    group, so scales and zeros are loaded once per batch and more weight bytes
    fit in flight; contig.warps warps per CTA.  pdl (int4): the sm_90 twin,
    name suffix _pdl, the same kernel behind grid_dependency's preamble."""
    i4 = wfmt == "int4"
    Ub = contig.steps if contig else U
    WK = contig.warps if contig else WARPS_SPLIT_K
    # the lean batches (below) where measured faster: 8 and 4 warps a CTA (N = K = 8192,
    # N 14336: -2..-4 %); the 16-warp kernels (N 4096, two batches a warp) ran 8 % slower
    lean = contig is not None and contig.warps < 16
    name = ("kaio_int4_gemv_%s_m%d" if i4 else "kaio_int8w_gemv_%s_m%d") % (dt, mt)
    if contig:
        name += "_g128" + contig.suffix
    if pdl:
        name += "_pdl"
    manifest.keys(name, select="quant_gemv_pdl" if pdl else "quant_gemv", weights=wfmt, dtype=dt, rows=mt, variant=("g128" + contig.suffix) if contig else "")
    threads = 32 * WK
    red_bytes = WK * mt * X * 4
    sym = "kaio_int4_red"
    doc = """
%s: out_p = x * dequant(W_p) (%s weights), x %s rows ctaid.z*%d .. +%d, f32 accumulation.
CTA: %d columns (%d groups of 32), %d warps splitting K in 32-k steps, %d steps per batch;
%d bytes of static shared.  grid (ceil(max N_p/%d), projections, ceil(M/%d)), block (%d, 1, 1).""" % (
        name, "GPTQ int4" if i4 else "s8 K x N", dt, mt, mt - 1, X, CW, WK, Ub, red_bytes, X, mt,
        threads)
    if contig:
        doc += "\nEach warp: a contiguous K range (batches of %d steps in one group >= 128)." % Ub
    ann = ["// kaio-shared-bytes: %s 0" % name,
           "// kaio-launch: %s block=%d cols_per_block=%d" % (name, threads, X)]
    params, per_proj = (GEMV_PARAMS, PER_PROJ) if i4 else (GEMV8_PARAMS, PER_PROJ8)
    k = Kernel(name, doc, params, threads, annotations=ann,
               shared=".shared .align 16 .b8 %s[%d]" % (sym, red_bytes), min_ctas=contig.min_ctas if contig else 0)
    pnames = ("qw", "qz", "sc", "out") if i4 else ("w", "sc", "out")
    ptrs = ["x"] + ["%s_%s" % (nm, p) for p in PROJ for nm in pnames]
    P = load_params(k, params, ptrs)
    if i4:
        for p in PROJ:
            null_safe(k, P, "qz_" + p)

    k.note("projection ctaid.y: its pointers, strides and N")
    py = k.r("mov.u32", "%ctaid.y")
    is1, is2 = k.p("setp.eq.u32", py, 1), k.p("setp.eq.u32", py, 2)
    S = {}
    for ptype, nm in per_proj:
        kind = "r" if ptype == ".u32" else "rd"
        typ = "b32" if kind == "r" else "b64"
        v = k._dst(kind, "selp.%s" % typ, (P["%s_k" % nm], P["%s_q" % nm], is1))
        S[nm] = k._dst(kind, "selp.%s" % typ, (P["%s_v" % nm], v, is2))
    nb = k.r("mul.lo.u32", k.r("mov.u32", "%ctaid.x"), X)
    k.op("@%s ret" % k.p("setp.ge.u32", nb, S["n"]))
    mb = k.r("mul.lo.u32", k.r("mov.u32", "%ctaid.z"), mt)

    tid = k.r("mov.u32", "%tid.x")
    lane = k.r("and.b32", tid, 31)
    warp = k.r("shr.u32", tid, 5)
    g = k.r("shr.u32", lane, 2)
    t = k.r("and.b32", lane, 3)
    if i4:
        has_z = k.p("setp.ne.u64", S["qz"], 0)
        zsh = k.r("shl.b32", k.r("and.b32", g, 1), 4)
    nsteps = k.r("shr.u32", P["k"], 5)
    if contig:
        k.note("warp range [start, end) of K steps, a multiple of %d steps long" % Ub)
        spw = k.r("and.b32", k.r("add.u32", k.r("shr.u32", k.r("add.u32", nsteps, WK - 1),
                                               WK.bit_length() - 1), Ub - 1), -Ub)
        start = k.r("mul.lo.u32", warp, spw)
        end = k.r("min.u32", k.r("add.u32", start, spw), nsteps)

    k.note("per column group c: columns nb + 32c + 4g .. +3")
    ncol = [k.r("add.u32", nb, k.r("add.u32", k.r("shl.b32", g, 2), 32 * c)) for c in range(CW)]
    col_ok = [k.p("setp.lt.u32", n, S["n"]) for n in ncol]
    wptr = []
    if i4:
        ldqw4 = k.rd("shl.b64", S["ldqw"], 2)
        first = start if contig else warp
        for c in range(CW):
            row = k.wide(k.r("add.u32", t, k.r("shl.b32", first, 2)))    # packed row 4*step + t
            elem = k.rd("add.u64", k.rd("mul.lo.u64", row, S["ldqw"]), k.wide(ncol[c]))
            wptr.append(k.rd("add.u64", S["qw"], k.rd("shl.b64", elem, 2)))
        # the next step of this warp: WK steps on, or (contig) the next step
        ustride = k.rd("shl.b64", ldqw4, 2 + (0 if contig else WK.bit_length() - 1))
        bstride = k.rd("shl.b64", ustride, Ub.bit_length() - 1)
        sc_base = [k.rd("add.u64", S["sc"], k.rd("shl.b64", k.wide(n), 1)) for n in ncol]
        qz_base = [k.rd("add.u64", S["qz"], k.rd("shl.b64", k.wide(k.r("shr.u32", n, 3)), 2))
                   for n in ncol]
        ldsc2 = k.rd("shl.b64", S["ldsc"], 1)
        ldqz4 = k.rd("shl.b64", S["ldqz"], 2)
    else:
        k.note("s8 rows k = 32 s + 8t + j (j = 0..7), 4 columns (bytes) per b32 load")
        for c in range(CW):
            krow = k.wide(k.r("add.u32", k.r("shl.b32", warp, 5), k.r("shl.b32", t, 3)))
            elem = k.rd("add.u64", k.rd("mul.lo.u64", krow, S["ldw"]), k.wide(ncol[c]))
            wptr.append(k.rd("add.u64", S["w"], elem))
        rowoff = [None] + [k.rd("mul.lo.u64", S["ldw"], j) for j in range(1, 8)]
        ustride = k.rd("shl.b64", S["ldw"], 5 + (WK.bit_length() - 1))  # WK steps of 32 rows
        bstride = k.rd("shl.b64", ustride, U.bit_length() - 1)
        mag8 = k.r("mov.b32", MAGIC8)
        neg1152 = k.r("mov.b32", NEG1152)

    rows = [k.r("add.u32", mb, g)] + ([k.r("add.u32", mb, k.r("add.u32", g, 8))] if mt == 16 else [])
    row_ok = [k.p("setp.lt.u32", r, P["m"]) for r in rows]
    xptr = []
    if lean:
        k.note("x rows past M re-read row M-1 (their sums are never stored): full batches load unpredicated")
        mlast = k.r("sub.u32", P["m"], 1)
        cta_full = k.p("setp.le.u32", k.r("add.u32", nb, X), S["n"])
    for r in rows:
        kk = k.r("add.u32", k.r("shl.b32", start if contig else warp, 5), k.r("shl.b32", t, 3))
        xrow = k.r("min.u32", r, mlast) if lean else r
        elem = k.rd("add.u64", k.rd("mul.lo.u64", k.wide(xrow), P["ldx"]), k.wide(kk))
        xptr.append(k.rd("add.u64", P["x"], k.rd("shl.b64", elem, 1)))
    if pdl:
        grid_dependency(k)

    def batch_full(sb):
        """A whole batch of whole columns (all but a warp's last batch when its range is not a
        multiple of the batch, and the last CTA's columns): loads without predicates or zero
        fills, fewer instructions a step."""
        return k.p("and.pred", k.p("setp.le.u32", k.r("add.u32", sb, Ub), end), cta_full)

    def load_step(sb, u, dst, full):
        """The lean kernels' loads of step sb + u (weights, x) into dst's step u."""
        if not full:
            ok = k.p("setp.lt.u32", k.r("add.u32", sb, u) if u else sb, end)
        for c in range(CW):
            w = dst["w"][u][c]
            wa = k.rd("add.u64", wptr[c], k.rd("mul.lo.u64", ustride, u)) if u else wptr[c]
            if full:
                k.op("ld.global.cg.v4.b32 {%s}, [%s]" % (", ".join(w), wa))
                continue
            okc = k.p("and.pred", ok, col_ok[c])
            for reg in w:
                k.op("mov.b32 %s, 0" % reg)
            k.op("@%s ld.global.cg.v4.b32 {%s}, [%s]" % (okc, ", ".join(w), wa))
        for i, r in enumerate(rows):
            xr = dst["x"][u][i]
            if full:
                k.op("ld.global.nc.v4.b32 {%s}, [%s+%d]" % (", ".join(xr), xptr[i], u * 64))
                continue
            for reg in xr:
                k.op("mov.b32 %s, 0" % reg)
            okr = k.p("and.pred", ok, row_ok[i])
            k.op("@%s ld.global.nc.v4.b32 {%s}, [%s+%d]" % (okr, ", ".join(xr), xptr[i], u * 64))

    def load_scales(sb, dst):
        """contig: the scales and zeros of batch sb's group; 0 and 8s where invalid."""
        grp = k.wide(k.r("shr.u32", sb, P["gshift"]))
        okb = k.p("setp.lt.u32", sb, end)
        for c in range(CW):
            okc = k.p("and.pred", okb, col_ok[c])
            s, z = dst["s"][0][c], dst["z"][0][c]
            for reg in s:
                k.op("mov.b32 %s, 0" % reg)
            k.op("mov.b32 %s, 0x88888888" % z)
            if mt == 8:
                # from the (uniform) bases and the lane's column each time: two 64-bit
                # per-lane pointers fewer held across the K loop (the m8 kernels spilled)
                sa = k.rd("add.u64", k.rd("mad.lo.u64", grp, ldsc2, S["sc"]),
                          k.rd("mul.wide.u32", ncol[c], 2))
                za = k.rd("add.u64", k.rd("mad.lo.u64", grp, ldqz4, S["qz"]),
                          k.rd("mul.wide.u32", k.r("shr.u32", ncol[c], 3), 4))
                k.op("@%s ld.global.nc.v2.b32 {%s}, [%s]" % (okc, ", ".join(s), sa))
            else:
                sa = k.rd("add.u64", sc_base[c], k.rd("mul.lo.u64", grp, ldsc2))
                k.op("@%s ld.global.nc.v2.b32 {%s}, [%s]" % (okc, ", ".join(s), sa))
                za = k.rd("add.u64", qz_base[c], k.rd("mul.lo.u64", grp, ldqz4))
            k.op("@%s ld.global.nc.b32 %s, [%s]" % (k.p("and.pred", okc, has_z), z, za))

    def load_batch(sb, dst):
        """Loads of the U steps sb + u*WK; registers are zero (zeros 8) where invalid."""
        if dst is None and not i4:
            dst = {"w": [[k.regs("r", 8) for _ in range(CW)] for _ in range(U)],
                   "x": [[k.regs("r", 4) for _ in rows] for _ in range(U)]}
        if dst is None:
            ngrp = 1 if contig else Ub
            dst = {"w": [[k.regs("r", 4) for _ in range(CW)] for _ in range(Ub)],
                   "s": [[k.regs("r", 2) for _ in range(CW)] for _ in range(ngrp)],
                   "z": [[k.reg("r") for _ in range(CW)] for _ in range(ngrp)],
                   "x": [[k.regs("r", 4) for _ in rows] for _ in range(Ub)]}
        if contig:
            k.note("batch of steps sb .. sb+%d: one group, its scales and zeros" % (Ub - 1))
            load_scales(sb, dst)
            if not lean:
                for u in range(Ub):
                    ok = k.p("setp.lt.u32", k.r("add.u32", sb, u) if u else sb, end)
                    for c in range(CW):
                        okc = k.p("and.pred", ok, col_ok[c])
                        w = dst["w"][u][c]
                        for reg in w:
                            k.op("mov.b32 %s, 0" % reg)
                        wa = k.rd("add.u64", wptr[c], k.rd("mul.lo.u64", ustride, u)) if u else wptr[c]
                        k.op("@%s ld.global.cg.v4.b32 {%s}, [%s]" % (okc, ", ".join(w), wa))
                    for i, r in enumerate(rows):
                        xr = dst["x"][u][i]
                        for reg in xr:
                            k.op("mov.b32 %s, 0" % reg)
                        okr = k.p("and.pred", ok, row_ok[i])
                        k.op("@%s ld.global.nc.v4.b32 {%s}, [%s+%d]" % (okr, ", ".join(xr), xptr[i], u * 64))
                return dst
            for arm in if_else(k, batch_full(sb), "partial", uni=True):
                for u in range(Ub):
                    load_step(sb, u, dst, arm.then)
            return dst
        for u in range(U):
            su = k.r("add.u32", sb, u * WK) if u else sb
            ok = k.p("setp.lt.u32", su, nsteps)
            if i4:
                grp = k.wide(k.r("shr.u32", su, P["gshift"]))
            for c in range(CW):
                okc = k.p("and.pred", ok, col_ok[c])
                if not i4:
                    base = k.rd("add.u64", wptr[c], k.rd("mul.lo.u64", ustride, u)) if u else wptr[c]
                    for j, reg in enumerate(dst["w"][u][c]):
                        k.op("mov.b32 %s, 0" % reg)
                        addr = k.rd("add.u64", base, rowoff[j]) if j else base
                        k.op("@%s ld.global.cg.b32 %s, [%s]" % (okc, reg, addr))
                    continue
                w, s, z = dst["w"][u][c], dst["s"][u][c], dst["z"][u][c]
                for reg in w + s:
                    k.op("mov.b32 %s, 0" % reg)
                k.op("mov.b32 %s, 0x88888888" % z)
                wa = k.rd("add.u64", wptr[c], ustride) if u == 1 else (
                    k.rd("add.u64", wptr[c], k.rd("mul.lo.u64", ustride, u)) if u else wptr[c])
                k.op("@%s ld.global.cg.v4.b32 {%s}, [%s]" % (okc, ", ".join(w), wa))
                sa = k.rd("add.u64", sc_base[c], k.rd("mul.lo.u64", grp, ldsc2))
                k.op("@%s ld.global.nc.v2.b32 {%s}, [%s]" % (okc, ", ".join(s), sa))
                za = k.rd("add.u64", qz_base[c], k.rd("mul.lo.u64", grp, ldqz4))
                k.op("@%s ld.global.nc.b32 %s, [%s]" % (k.p("and.pred", okc, has_z), z, za))
            for i, r in enumerate(rows):
                xr = dst["x"][u][i]
                for reg in xr:
                    k.op("mov.b32 %s, 0" % reg)
                okr = k.p("and.pred", ok, row_ok[i])
                k.op("@%s ld.global.nc.v4.b32 {%s}, [%s+%d]" % (okr, ", ".join(xr), xptr[i], u * WK * 64))
        return dst

    def advance():
        for c in range(CW):
            k.op("add.u64 %s, %s, %s" % (wptr[c], wptr[c], bstride))
        for xp in xptr:
            k.op("add.u64 %s, %s, %d" % (xp, xp, Ub * 64 if contig else U * WK * 64))

    # M <= 8: the weights are the mma's A (16 columns a tile), x its B (8 rows): an mma
    # takes twice the weights of the m16 layout, and no row of it is padding
    swap = i4 and mt == 8
    acc = [[k.regs("f", 4) for _ in range(2 if swap else 4)] for _ in range(CW)]
    for a4 in acc:
        for quad in a4:
            for reg in quad:
                k.op("mov.f32 %s, 0f00000000" % reg)
    zero = k.r("mov.b32", 0)
    cst = constants(k, dt)
    if lean and i4:
        # xmask is 0 or 0x88888888 (the same in every nibble), so ((w ^ xmask) >> 4j) & 0xF
        # == ((w >> 4j) & 0xF) ^ (xmask & 0xF); magic has no bit there: one lop3
        # (a & b) ^ c with c = magic ^ (xmask & 0x000F000F) takes the xor's place
        magic_x = k.r("xor.b32", k.r("and.b32", P["xmask"], "0x000F000F"), MAGIC[dt])
        magic_x16 = k.r("xor.b32", k.r("and.b32", P["xmask"], "0x00F000F0"), MAGIC[dt])
    sixteenth = k.r("mov.b32", "0x2C002C00") if dt == "f16" and i4 else None   # 1/16, both halves
    mma = "mma.sync.aligned.m16n8k16.row.col.f32.%s.%s.f32" % (dt, dt)

    def bias_scale(st, gi, c, i, zw):
        """Word i of column group c: -(magic + zero) and the scale, in both halves
        (zw: the lane's qzeros word, shifted to its columns)."""
        z = k.r("add.u32", k.r("and.b32", k.r("shr.u32", zw, 4 * i) if i else zw, 15), P["zoff"])
        sreg = st["s"][gi][c][i // 2]
        # f16: the odd nibbles stay in place as 1024 + 16q, times 1/16 less 64 + z
        # (0x5400 + 16z is 64 + z in f16), so a word needs one shift instead of three
        return (neg_bias(k, dt, k.r("mul.lo.u32", z, "0x00010001")),
                k.r("prmt.b32", sreg, sreg, "0x1010" if i % 2 == 0 else "0x3232"),
                k.r("mad.lo.u32", z, "0x00100010", "0xD400D400") if dt == "f16" else None)

    def prep(st, gi):
        """bias_scale of every word of the batch, before its registers refill."""
        zws = [k.r("shr.u32", st["z"][gi][c], zsh) for c in range(CW)]
        return [[bias_scale(st, gi, c, i, zws[c]) for i in range(4)] for c in range(CW)]

    def compute(st, der=None, refill=None):
        """The batch in st; der: its prep (contig); refill(u): called after step u."""
        for u in range(Ub):
            step(st, u, der)
            if refill:
                refill(u)

    def step(st, u, der):
        afr = []
        for h in range(2):
            pairs = []
            for xr in st["x"][u]:
                pairs.append((k.r("prmt.b32", xr[h], xr[h + 2], "0x5410"),
                              k.r("prmt.b32", xr[h], xr[h + 2], "0x7632")))
            hi = pairs[1] if len(pairs) > 1 else (zero, zero)
            afr.append((pairs[0][0], hi[0], pairs[0][1], hi[1]))
        for c in range(CW):
            if not i4:
                for i in range(4):
                    wv = []
                    for j in range(4):
                        w = st["w"][u][c]
                        pair = k.r("prmt.b32", w[j], w[j + 4], hex(((4 + i) << 4) | i))
                        h = k.r("xor.b32", k.r("prmt.b32", pair, mag8, "0x4140"), "0x00800080")
                        wv.append(k.r("fma.rn.f16x2", h, cst[0], neg1152))
                    d = ", ".join(acc[c][i])
                    for h in range(2):
                        k.op("%s {%s}, {%s}, {%s, %s}, {%s}" % (mma, d, ", ".join(afr[h]),
                                                                 wv[2 * h], wv[2 * h + 1], d))
                continue
            zw = None if der else k.r("shr.u32", st["z"][0 if contig else u][c], zsh)
            for i in range(4):
                nbias, s2, nbias16 = der[c][i] if der else bias_scale(st, 0 if contig else u, c, i, zw)
                if lean:
                    word = st["w"][u][c][i]
                else:
                    word = k.r("xor.b32", st["w"][u][c][i], P["xmask"])
                wv = []
                if nbias16:
                    w8 = k.r("shr.u32", word, 8)
                for j in range(4):
                    odd = nbias16 is not None and j % 2 == 1
                    if nbias16:
                        sh, mask = (word if j < 2 else w8), ("0x00F000F0" if odd else "0x000F000F")
                    else:
                        sh, mask = (k.r("shr.u32", word, 4 * j) if j else word), "0x000F000F"
                    if lean:
                        packed = k.r("lop3.b32", sh, mask, magic_x16 if odd else magic_x, "0x6A")
                    else:
                        packed = k.r("lop3.b32", sh, mask, MAGIC[dt], "0xEA")
                    wv.append(dequant_pair(k, dt, cst, packed, nbias16 if odd else nbias, s2,
                                           sixteenth if odd else None))
                if swap:
                    if i % 2 == 0:
                        wv_a = wv
                        continue
                    # tile i // 2: A rows g and g + 8 are columns 4g + i - 1 and 4g + i;
                    # B = x row g at the same k (the m16 layout's A fragments)
                    d = ", ".join(acc[c][i // 2])
                    for h in range(2):
                        a = (wv_a[2 * h], wv[2 * h], wv_a[2 * h + 1], wv[2 * h + 1])
                        k.op("%s {%s}, {%s}, {%s, %s}, {%s}" % (mma, d, ", ".join(a),
                                                                 afr[h][0], afr[h][2], d))
                    continue
                d = ", ".join(acc[c][i])
                for h in range(2):
                    k.op("%s {%s}, {%s}, {%s, %s}, {%s}" % (mma, d, ", ".join(afr[h]),
                                                             wv[2 * h], wv[2 * h + 1], d))

    if lean:
        k.note("pipeline of two register sets: a set refills step by step, as its batch is"
               " computed, with the batch two ahead")
        s = k.r("mov.u32", start)
        sets = [load_batch(s, None), None]
        advance()
        sets[1] = load_batch(k.r("add.u32", s, Ub), None)
        advance()
        with loop(k, "kloop", uni=True) as lp:
            for half in range(2):
                st = sets[half]
                nsb = k.r("add.u32", s, 2 * Ub)
                for arm in if_else(k, batch_full(nsb), "refill_partial", uni=True):
                    der = prep(st, 0)
                    load_scales(nsb, st)
                    compute(st, der, lambda u: load_step(nsb, u, st, arm.then))
                advance()
                k.op("add.u32 %s, %s, %d" % (s, s, Ub))
                more = k.p("setp.lt.u32", s, end)
                if half == 0:
                    lp.exit_if("!" + more)
                else:
                    lp.again(more)
    else:
        k.note("software pipeline over batches of %d steps (two register sets)" % Ub)
        s = k.r("mov.u32", start if contig else warp)
        sets = [load_batch(s, None), None]
        advance()
        with loop(k, "kloop", uni=True) as lp:
            for half in range(2):
                cur, nxt = half, 1 - half
                k.op("add.u32 %s, %s, %d" % (s, s, Ub if contig else U * WK))
                more = k.p("setp.lt.u32", s, end if contig else nsteps)
                with skip_if(k, "!" + more, "noload", uni=True):
                    sets[nxt] = load_batch(s, sets[nxt])
                    advance()
                compute(sets[cur])
                if half == 0:
                    lp.exit_if("!" + more)
                else:
                    lp.again(more)

    k.note("partial sums -> shared [warp][row][col]")
    smem = k.r("mov.u32", sym)
    wbase = k.r("mad.lo.u32", warp, mt * X * 4, smem)
    if swap:
        # tile T: c0, c1 = column 4g + 2T of x rows 2t, 2t + 1; c2, c3 = column 4g + 2T + 1
        off = k.r("add.u32", wbase, k.r("shl.b32", k.r("mad.lo.u32", t, 2 * X, k.r("shl.b32", g, 2)), 2))
        for c in range(CW):
            for tile in range(2):
                base = (32 * c + 2 * tile) * 4
                for v, (row, col) in enumerate(((0, 0), (1, 0), (0, 1), (1, 1))):
                    k.op("st.shared.f32 [%s+%d], %s" % (off, base + (row * X + col) * 4, acc[c][tile][v]))
    off = k.r("add.u32", wbase, k.r("shl.b32", k.r("mad.lo.u32", g, X, k.r("shl.b32", t, 3)), 2))
    for c in range(CW if not swap else 0):
        for i in range(4):
            base = (32 * c + i) * 4
            k.op("st.shared.f32 [%s+%d], %s" % (off, base, acc[c][i][0]))
            k.op("st.shared.f32 [%s+%d], %s" % (off, base + 16, acc[c][i][1]))
            if mt == 16:
                k.op("st.shared.f32 [%s+%d], %s" % (off, base + 8 * X * 4, acc[c][i][2]))
                k.op("st.shared.f32 [%s+%d], %s" % (off, base + 8 * X * 4 + 16, acc[c][i][3]))
    k.op("bar.sync 0")

    k.note("outputs: thread o sums the %d partials of (o / %d, o %% %d) in warp order" % (WK, X, X))
    def store(row, col, ssum):
        if not i4:
            sa = k.rd("add.u64", S["sc"], k.rd("mul.wide.u32", k.r("mul.lo.u32", col, S["scstep"]), 4))
            ssum = k.f("mul.rn.f32", ssum, k.f("ld.global.nc.f32", "[%s]" % sa))
        elem = k.rd("add.u64", k.rd("mul.lo.u64", k.wide(row), S["ldo"]), k.wide(col))
        output_store(k, P["out_dtype"], S["out"], elem, ssum)

    sum_warp_partials(k, smem, tid, threads, mt, X, WK, mb, nb, P["m"], S["n"], store)
    k.op("ret")
    return coherent_loads(k.text()) if pdl else k.text()


DQ_COLS = 8                  # columns per thread of the dequantize kernel


def dequant_kernel(dt):
    name = "kaio_int4_dequant_%s" % dt
    manifest.keys(name, select="int4_dequant", dtype=dt)
    per_block = DQ_COLS * DQ_BLOCK
    doc = """
%s: W (K x N row-major %s, ldw) = dequant(qweight, qzeros, scales).
Thread: one packed row (ctaid.y) of %d adjacent columns: two 16-byte loads of
words, one zero word, 8 16-byte stores (a warp writes 512 contiguous bytes per row).
Host guarantees: N %% 8 == 0, ldw %% 8 == 0, w 16-byte aligned (plus matmul_int4's).
grid (ceil(N / %d), K / 8, 1), block (%d, 1, 1).""" % (name, dt, DQ_COLS, per_block, DQ_BLOCK)
    ann = ["// kaio-shared-bytes: %s 0" % name,
           "// kaio-launch: %s block=%d cols_per_block=%d" % (name, DQ_BLOCK, per_block)]
    k = Kernel(name, doc, DQ_PARAMS, DQ_BLOCK, annotations=ann)
    P = load_params(k, DQ_PARAMS, ("qw", "qz", "sc", "w"))
    null_safe(k, P, "qz")
    cst = constants(k, dt)
    tid = k.r("mov.u32", "%tid.x")
    n = k.r("shl.b32", k.r("mad.lo.u32", k.r("mov.u32", "%ctaid.x"), DQ_BLOCK, tid), 3)
    k.op("@%s ret" % k.p("setp.ge.u32", n, P["n"]))
    kw = k.r("mov.u32", "%ctaid.y")
    grp = k.wide(k.r("div.u32", k.r("shl.b32", kw, 3), P["group"]))
    wn = k.wide(n)
    wa = k.rd("add.u64", P["qw"], k.rd("shl.b64", k.rd("add.u64", k.rd("mul.lo.u64", k.wide(kw), P["ldqw"]), wn), 2))
    words = k.regs("r", 8)
    k.op("ld.global.nc.v4.b32 {%s}, [%s]" % (", ".join(words[:4]), wa))
    k.op("ld.global.nc.v4.b32 {%s}, [%s+16]" % (", ".join(words[4:]), wa))
    sa = k.rd("add.u64", P["sc"], k.rd("shl.b64", k.rd("add.u64", k.rd("mul.lo.u64", grp, P["ldsc"]), wn), 1))
    sc = k.regs("r", 4)      # scale pairs of columns (0, 1), (2, 3), ...
    k.op("ld.global.nc.v2.b32 {%s}, [%s]" % (", ".join(sc[:2]), sa))
    k.op("ld.global.nc.v2.b32 {%s}, [%s+8]" % (", ".join(sc[2:]), sa))
    zw = k.r("mov.b32", "0x88888888")
    za = k.rd("add.u64", P["qz"], k.rd("shl.b64", k.rd("add.u64", k.rd("mul.lo.u64", grp, P["ldqz"]),
                                                         k.wide(k.r("shr.u32", n, 3))), 2))
    k.op("@%s ld.global.nc.b32 %s, [%s]" % (k.p("setp.ne.u64", P["qz"], 0), zw, za))
    nbias = []
    for p in range(4):
        z0 = k.r("add.u32", k.r("and.b32", k.r("shr.u32", zw, 8 * p), 15), P["zoff"])
        z1 = k.r("add.u32", k.r("and.b32", k.r("shr.u32", zw, 8 * p + 4), 15), P["zoff"])
        nbias.append(neg_bias(k, dt, k.r("or.b32", z0, k.r("shl.b32", z1, 16))))
    w = [k.r("xor.b32", x, P["xmask"]) for x in words]
    row = k.rd("mul.lo.u64", k.wide(k.r("shl.b32", kw, 3)), P["ldw"])
    out = k.rd("add.u64", P["w"], k.rd("shl.b64", k.rd("add.u64", row, wn), 1))
    rstride = k.rd("shl.b64", P["ldw"], 1)
    for j in range(8):
        vals = []
        for p in range(4):
            q0 = k.r("and.b32", k.r("shr.u32", w[2 * p], 4 * j), 15)
            q1 = k.r("and.b32", k.r("shr.u32", w[2 * p + 1], 4 * j), 15)
            packed = k.r("or.b32", k.r("or.b32", q0, k.r("shl.b32", q1, 16)), MAGIC[dt])
            vals.append(dequant_pair(k, dt, cst, packed, nbias[p], sc[p]))
        if j:
            k.op("add.u64 %s, %s, %s" % (out, out, rstride))
        k.op("st.global.v4.b32 [%s], {%s}" % (out, ", ".join(vals)))
    k.op("ret")
    return k.text()


TR_PARAMS = [(".u64", "src"), (".u64", "lds"), (".u64", "dst"), (".u64", "ldd"),
             (".u32", "rows")]


def transpose_kernel():
    name = "kaio_int4_transpose_u32"
    manifest.keys(name, select="int4_transpose", dtype="u32")
    doc = """
%s: dst[c][r] = src[r][c] for u32 words (KAIO's N x K/8 packing -> K/8 x N).
Thread: r = ctaid.x * %d + tid.x (r < rows), c = ctaid.y; coalesced stores.
grid (ceil(rows / %d), cols, 1), block (%d, 1, 1).""" % (name, DQ_BLOCK, DQ_BLOCK, DQ_BLOCK)
    ann = ["// kaio-shared-bytes: %s 0" % name,
           "// kaio-launch: %s block=%d cols_per_block=%d" % (name, DQ_BLOCK, DQ_BLOCK)]
    k = Kernel(name, doc, TR_PARAMS, DQ_BLOCK, annotations=ann)
    P = load_params(k, TR_PARAMS, ("src", "dst"))
    r = k.r("mad.lo.u32", k.r("mov.u32", "%ctaid.x"), DQ_BLOCK, k.r("mov.u32", "%tid.x"))
    k.op("@%s ret" % k.p("setp.ge.u32", r, P["rows"]))
    c = k.wide(k.r("mov.u32", "%ctaid.y"))
    sa = k.rd("add.u64", P["src"], k.rd("shl.b64", k.rd("add.u64", k.rd("mul.lo.u64", k.wide(r), P["lds"]), c), 2))
    da = k.rd("add.u64", P["dst"], k.rd("shl.b64", k.rd("add.u64", k.rd("mul.lo.u64", c, P["ldd"]), k.wide(r)), 2))
    k.op("st.global.b32 [%s], %s" % (da, k.r("ld.global.nc.b32", "[%s]" % sa)))
    k.op("ret")
    return k.text()


def generate():
    parts = [HEADER]
    for dt in DTYPES:
        for mt in (8, 16):
            parts.append("\n" + gemv_kernel(dt, mt))
    for mt in (8, 16):
        parts.append("\n" + gemv_kernel("f16", mt, "int8"))
    for dt in DTYPES:
        parts.append("\n" + gemv_kernel(dt, 8, contig=CONTIG_M8[0]))
    for dt in DTYPES:
        parts.append("\n" + dequant_kernel(dt))
    parts.append("\n" + transpose_kernel())
    for dt in DTYPES:
        for c in CONTIG_M8[1:]:
            parts.append("\n" + gemv_kernel(dt, 8, contig=c))
        for c in CONTIG_M16:
            parts.append("\n" + gemv_kernel(dt, 16, contig=c))
    # the same int4 decode kernels (one source) in an sm_90 module, which may hold
    # griddepcontrol: src/ops/quant_int4.cpp picks them where it loads
    pdl = [HEADER]
    for dt in DTYPES:
        for mt in (8, 16):
            pdl.append("\n" + gemv_kernel(dt, mt, pdl=True))
        for c in CONTIG_M8:
            pdl.append("\n" + gemv_kernel(dt, 8, contig=c, pdl=True))
        for c in CONTIG_M16:
            pdl.append("\n" + gemv_kernel(dt, 16, contig=c, pdl=True))
    return {OUT_NAME: "".join(parts), PDL_NAME: "".join(pdl)}


if __name__ == "__main__":
    sys.exit(cli.main(__file__, __doc__, generate))
