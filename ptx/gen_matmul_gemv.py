#!/usr/bin/env python3
"""Generate libkaio's small-M ("decode") matmul kernels: C = alpha * A * B^T + beta * C.

    python3 ptx/gen_matmul_gemv.py --out-dir DIR  # write DIR/matmul_gemv.ptx

Only the Python standard library is used and the output depends on nothing but
this file and ptx/kaio_ptx, so the build is reproducible.

Kernels: kaio_matmul_gemv_<in>_m<MT>, in in {f16, bf16}, MT in {1, 2, 4, 8, 16}
(the rows of A one kernel handles; the host picks the smallest MT >= M).

    C[M x N] = alpha * A * op(B) + beta * C        (f32 accumulation)

  A: M x K row-major (activations), (m, k) at a + (m*lda + k)*2
  B: N x K row-major (nn.Linear weight, "nt"), op(B)(k, n) at b + (n*ldb + k)*2
  C: M x N row-major, (m, n) at c + (m*ldc + n)*esize; out_dtype 1 = f32,
     2 = f16, 3 = bf16 (kaio_dtype), rounded once with cvt.rn; any other value
     writes nothing.  beta == 0: C is never read (it may hold NaN); otherwise
     out = fma(beta, C_old, alpha*acc), as in the tiled kernels.

  Params: exactly the tiled kernels' (u64 a, u64 b, u64 c, u32 m, u32 n,
          u32 k, u64 lda, u64 ldb, u64 ldc, f32 alpha, f32 beta,
          u32 out_dtype); ld* in elements.
  Host guarantees: 1 <= M <= MT; N >= 1; K >= 8, K % 8 == 0; a, b 16-byte
  aligned, lda, ldb multiples of 8; c aligned to its element size, ldc >= N.
  Launch: the '// kaio-launch: <kernel> block=<T> cols_per_block=<X>' line
  before each .entry: grid (ceil(N/X), 1, 1), block (T, 1, 1); no dynamic
  shared memory ('// kaio-shared-bytes: <kernel> 0'; the cross-warp
  reduction buffer is static).  No workspace, no atomics: every output is
  the same sum in the same order on every run (bitwise repeatable).

Design
  These shapes read B (N*K*2 bytes) once and everything else is small, so the
  kernels are built to keep many 16-byte loads of B in flight and do little
  else.
  * A CTA owns X = 8*NT consecutive columns (rows of B) and all of K.  Its WK
    warps split K: K is cut into steps of SK = 32*U elements and warp w takes
    steps w, w + WK, w + 2 WK, ...  (the last, partial step, if K % SK != 0,
    is taken by the warp whose turn it is, with per-chunk predicates).
  * Inside a step, lane (g = lane/4, t = lane%4) loads, for each n8 tile j
    and each u < U, the 16 bytes B[n0 + 8j + g][k + 32u + 8t .. +7]
    (ld.global.cg: L2 only, B is streamed).  Each B row thus gets 64
    contiguous bytes per instruction and 64*U contiguous bytes per step.
    The same lane loads A[g][same k] (and A[g+8][...] for MT = 16) with
    ld.global.nc: A is tiny and every CTA on an SM reads it, so it lives in
    L1/L2.
  * mma.sync.m16n8k16.row.col with A = activations (rows g, g+8) and
    B = weights (column g): the sum over k does not care about the order of
    k, so one 16-byte chunk (physical k = 8t .. 8t+7) feeds two mma: the
    first takes k 8t..8t+3 as the fragment's "2t, 2t+1, 2t+8, 2t+9", the
    second k 8t+4..8t+7.  A uses the same mapping, so no shuffles, no
    shared memory and no conversions are needed in the main loop: the
    registers loaded from global memory are the mma operands.
    For MT <= 8 the fragment rows g+8 are a zero register.
  * Rows past the matrices are clamped, not predicated: a lane whose B row
    n >= N reads row N-1 and a lane whose A row m >= M reads row M-1 (only
    valid elements are read; the extra results land in outputs nobody
    writes).  Along K a 16-byte chunk is wholly valid or not (K % 8 == 0);
    invalid chunks of the tail step are zero in both A and B.
  * Software pipeline (pipe): two register sets; the loads of a warp's next
    K step are issued, in a basic block of their own, before the current
    step's mma.  Without it ptxas sinks most loads next to their mma and a
    warp has one step (or less) in flight; measured on an H100 it is worth
    15-30% (M = 1, 11008 x 4096: 50.3 -> 35.0 us).
  * Epilogue: every warp puts its partial sums in shared memory
    ([warp][row][col], f32), one bar.sync, then thread o adds the WK
    partials of output (o / X, o % X) in warp order and applies alpha,
    beta and the output type; consecutive threads write consecutive
    columns.  Rows >= M and columns >= N are never written.

  engine "fma" (a knob, measured and left off for the kernels shipped):
  the same loads, with the 8 + 8*MT values of a chunk converted to f32 and
  multiplied on the CUDA cores, then a quad shuffle reduction (bfly 1, 2)
  before the shared-memory step.

Per-MT configuration (CONFIGS): engine, NT (n8 tiles per CTA), U (16-byte
loads of each B row per lane per step), WK (warps per CTA), pipe.  Measured
and left off (H100, f16, 4 LLM shapes, M = 1..16): no pipeline with
U in {2, 4, 8}, NT in {1, 2, 4} or WK in {4, 8, 16} (all 10-40% slower than
the pipelined kernels); pipe with U = 2 (3-10% slower); engine fma for MT <= 4
(about mma's speed without the pipeline); B loaded with ld.global.cs or .nc
instead of .cg (no difference).  MT = 16 with NT = 2, U = 4 (pipe) was up to 5%
faster at three of the four shapes in one run (45.8 vs 48.4 us at 14336 x
4096) but has only been through the simulator and a check against cuBLAS,
not the full GPU test matrix: a candidate, not the default.

H100 (run of 2026-11-22, f16, median of 40 single-launch event timings,
4+ weight copies rotated past L2), M = 1 / 16, us and % of cuBLAS GemmEx:
  4096 x 4096   16.6 / 17.2   (129% / 125%: cuBLAS 21.4 / 21.4 that run)
  11008 x 4096  35.1 / 37.8   (106% / 101%), 2572 GB/s of weights at M = 1
  4096 x 11008  37.7 / 40.5   ( 98% /  94%)
  14336 x 4096  44.5 / 48.2   (100% /  94%), 2641 GB/s at M = 1
"""

import sys

from kaio_ptx import cli, manifest
from kaio_ptx.control import block, cases, loop, skip_if
from kaio_ptx.dtypes import OUT_DTYPES, store_f32_as
from kaio_ptx.kernel import Kernel
from kaio_ptx.params import load_params
from kaio_ptx.preamble import preamble
from kaio_ptx.warp import sum_warp_partials

OUT_NAME = "matmul_gemv.ptx"
HEADER = preamble(__file__)

PARAMS = [(".u64", "a"), (".u64", "b"), (".u64", "c"), (".u32", "m"), (".u32", "n"),
          (".u32", "k"), (".u64", "lda"), (".u64", "ldb"), (".u64", "ldc"),
          (".f32", "alpha"), (".f32", "beta"), (".u32", "out_dtype")]

MTS = (1, 2, 4, 8, 16)
DTYPES = ("f16", "bf16")

# Per MT: engine, n8 tiles per CTA (cols_per_block = 8*nt), 16-byte loads per
# B row per lane per K step (u), warps per CTA (wk, all splitting K).
CONFIGS = {
    1: {"engine": "mma", "nt": 2, "u": 4, "wk": 8, "pipe": True},
    2: {"engine": "mma", "nt": 2, "u": 4, "wk": 8, "pipe": True},
    4: {"engine": "mma", "nt": 2, "u": 4, "wk": 8, "pipe": True},
    8: {"engine": "mma", "nt": 2, "u": 4, "wk": 8, "pipe": True},
    16: {"engine": "mma", "nt": 4, "u": 2, "wk": 8, "pipe": True},
}
# Cache operators: B is streamed (L2 only), A is re-read by every CTA.
DEFAULT_OPTS = {"b_ld": "ld.global.cg", "a_ld": "ld.global.nc"}


# --------------------------------------------------------------------------
# Kernel builder: virtual registers, labels, text.
# --------------------------------------------------------------------------

def log2(x):
    assert x > 0 and x & (x - 1) == 0, x
    return x.bit_length() - 1


# --------------------------------------------------------------------------
# The kernel
# --------------------------------------------------------------------------

def load_step(k, o, bptr, aptr, preds, dst=None):
    """One K step's loads: B[j][u] and A[i][u] (i: pointer index), 4 x b32 each,
    into dst (a (B, A) pair of such lists) or fresh registers.  preds[u] (or
    None): chunk u holds data; otherwise the registers are zero."""
    U = len(preds)
    if dst is None:
        dst = ([[k.regs("r", 4) for _ in range(U)] for _ in bptr],
               [[k.regs("r", 4) for _ in range(U)] for _ in aptr])

    def ld(opcode, ptr, u, regs):
        if preds[u] is None:
            k.op("%s.v4.b32 {%s}, [%s+%d]" % (opcode, ", ".join(regs), ptr, 64 * u))
        else:
            for reg in regs:
                k.op("mov.b32 %s, 0" % reg)
            k.op("@%s %s.v4.b32 {%s}, [%s+%d]" % (preds[u], opcode, ", ".join(regs), ptr, 64 * u))

    for ptr, regs in zip(bptr, dst[0]):
        for u in range(U):
            ld(o["b_ld"], ptr, u, regs[u])
    for ptr, regs in zip(aptr, dst[1]):
        for u in range(U):
            ld(o["a_ld"], ptr, u, regs[u])
    return dst


def compute_mma(k, dt, acc, B, A, zero):
    """acc[j] (4 f32): rows g, g+8 of column 8j + 2t, +1 of the CTA's tile."""
    mma = "mma.sync.aligned.m16n8k16.row.col.f32.%s.%s.f32" % (dt, dt)
    U = len(B[0])
    for u in range(U):
        a0 = A[0][u]
        a1 = A[1][u] if len(A) > 1 else [zero] * 4
        for j, accj in enumerate(acc):
            for h in range(2):
                afr = (a0[2 * h], a1[2 * h], a0[2 * h + 1], a1[2 * h + 1])
                bfr = (B[j][u][2 * h], B[j][u][2 * h + 1])
                d = ", ".join(accj)
                k.op("%s {%s}, {%s}, {%s}, {%s}" % (mma, d, ", ".join(afr), ", ".join(bfr), d))


def to_f32(k, dt, words):
    """8 packed 16-bit values (4 b32, low half first) -> 8 f32."""
    out = []
    for w in words:
        if dt == "f16":
            hs = k.regs("h", 2)
            k.op("mov.b32 {%s, %s}, %s" % (hs[0], hs[1], w))
            out += [k.f("cvt.f32.f16", hs[0]), k.f("cvt.f32.f16", hs[1])]
        else:
            lo, hi = k.regs("f", 2)
            k.op("shl.b32 %s, %s, 16" % (lo, w))
            k.op("and.b32 %s, %s, 0xFFFF0000" % (hi, w))
            out += [lo, hi]
    return out


def compute_fma(k, dt, acc, B, A):
    """acc[j][m]: this lane's share (8 k per chunk) of row m, column 8j + g."""
    U = len(B[0])
    for u in range(U):
        af = [to_f32(k, dt, A[m][u]) for m in range(len(A))]
        for j, accj in enumerate(acc):
            bf = to_f32(k, dt, B[j][u])
            for m, a in enumerate(af):
                for e in range(8):
                    k.op("fma.rn.f32 %s, %s, %s, %s" % (accj[m], a[e], bf[e], accj[m]))


def epilogue_one(k, P, row, col, s, pbeta):
    """C[row][col] = alpha*s (+ beta*C_old); row < M and col < N already checked."""
    elem = k.rd("add.u64", k.rd("mul.lo.u64", k.wide(row), P["ldc"]), k.wide(col))
    v = k.f("mul.rn.f32", P["alpha"], s)
    done = k.label("stored")
    for code, name, esize in cases(k, P["out_dtype"], OUT_DTYPES, done):
        pc = k.rd("add.u64", P["c"], k.rd("shl.b64", elem, log2(esize)))
        o = k.reg("f")
        if name == "f32":
            k.op("@%s ld.global.f32 %s, [%s]" % (pbeta, o, pc))
        elif name == "f16":
            h = k.reg("h")
            k.op("@%s ld.global.b16 %s, [%s]" % (pbeta, h, pc))
            k.op("@%s cvt.f32.f16 %s, %s" % (pbeta, o, h))
        else:
            w = k.reg("r")
            k.op("@%s ld.global.u16 %s, [%s]" % (pbeta, w, pc))
            k.op("@%s shl.b32 %s, %s, 16" % (pbeta, o, w))
        k.op("@%s fma.rn.f32 %s, %s, %s, %s" % (pbeta, v, P["beta"], o, v))
        store_f32_as(k, name, pc, v)


def gemv_kernel(dt, mt, cfg, opts):
    engine, nt, U, wk = cfg["engine"], cfg["nt"], cfg["u"], cfg["wk"]
    assert engine in ("mma", "fma") and mt in MTS
    X = 8 * nt                      # columns per CTA
    threads = 32 * wk
    SK = 32 * U                     # K elements per step
    red_bytes = wk * mt * X * 4     # partial sums [warp][row][col]
    name = "kaio_matmul_gemv_%s_m%d" % (dt, mt)
    manifest.keys(name, dtype=dt, rows=mt)
    sym = "kaio_gemv_red"
    doc = """
%s: C = alpha * A * B^T + beta * C for M <= %d, %s inputs, f32 accumulation.
%s engine; CTA: %d columns (%d n8 tiles), %d warps splitting K in steps of %d
(%d x 16-byte loads of each B row per lane per step); %d bytes of static shared.
grid (ceil(N/%d), 1, 1), block (%d, 1, 1).""" % (
        name, mt, dt, "mma.sync" if engine == "mma" else "CUDA-core fma", X, nt, wk, SK, U,
        red_bytes, X, threads)
    k = Kernel(name, doc, PARAMS, threads, 0, X, shared=".shared .align 16 .b8 %s[%d]" % (sym, red_bytes))

    P = load_params(k, PARAMS, ("a", "b", "c"))

    tid = k.r("mov.u32", "%tid.x")
    lane = k.r("and.b32", tid, 31)
    warp = k.r("shr.u32", tid, 5)
    g = k.r("shr.u32", lane, 2)
    t = k.r("and.b32", lane, 3)
    n0 = k.r("mul.lo.u32", k.r("mov.u32", "%ctaid.x"), X)
    last_n = k.r("sub.u32", P["n"], 1)
    last_m = k.r("sub.u32", P["m"], 1)
    koff = k.wide(k.r("mad.lo.u32", warp, SK, k.r("shl.b32", t, 3)))   # k of this lane's step-w chunk 0

    def row_ptr(base, ld, row):
        elem = k.rd("add.u64", k.rd("mul.lo.u64", k.wide(row), ld), koff)
        return k.rd("add.u64", base, k.rd("shl.b64", elem, 1))

    k.note("B rows n0 + 8j + g (clamped to N-1), A rows (clamped to M-1)")
    bptr = [row_ptr(P["b"], P["ldb"], k.r("min.u32", k.r("add.u32", n0, k.r("add.u32", g, 8 * j)), last_n))
            for j in range(nt)]
    if engine == "mma":
        arows = [g] if mt <= 8 else [g, k.r("add.u32", g, 8)]
    else:
        arows = list(range(mt))
    aptr = [row_ptr(P["a"], P["lda"], k.r("min.u32", r, last_m)) for r in arows]

    zero = k.r("mov.b32", 0)
    if engine == "mma":
        acc = [k.regs("f", 4) for _ in range(nt)]
    else:
        acc = [k.regs("f", mt) for _ in range(nt)]
    for accj in acc:
        for reg in accj:
            k.op("mov.f32 %s, 0f00000000" % reg)

    def compute(B, A):
        if engine == "mma":
            compute_mma(k, dt, acc, B, A, zero)
        else:
            compute_fma(k, dt, acc, B, A)

    nfull = k.r("shr.u32", P["k"], log2(SK))
    s = k.r("mov.u32", warp)
    with block(k, "ktail", uni=True) as full:
        full.exit_if(k.p("setp.ge.u32", s, nfull))

        def advance():
            for ptr in bptr + aptr:
                k.op("add.u64 %s, %s, %d" % (ptr, ptr, wk * SK * 2))

        if cfg.get("pipe"):
            k.note("software pipeline: two register sets; the loads of step s + %d are issued, in a"
                   " block of their own, before step s is multiplied" % wk)
            sets = [load_step(k, opts, bptr, aptr, [None] * U)]
            advance()
            sets.append(None)
            with loop(k, "kloop", uni=True) as lp:
                for half in range(2):
                    cur, nxt = half, 1 - half
                    k.op("add.u32 %s, %s, %d" % (s, s, wk))
                    more = k.p("setp.lt.u32", s, nfull)
                    with skip_if(k, "!" + more, "noload", uni=True):
                        sets[nxt] = load_step(k, opts, bptr, aptr, [None] * U, sets[nxt])
                        advance()
                    compute(*sets[cur])
                    if half == 0:
                        full.exit_if("!" + more)
                    else:
                        lp.again(more)
        else:
            with loop(k, "kloop", uni=True) as lp:
                k.note("full K step s: %d x 16-byte chunks of B, %d of A per lane" % (nt * U, len(aptr) * U))
                B, A = load_step(k, opts, bptr, aptr, [None] * U)
                compute(B, A)
                advance()
                k.op("add.u32 %s, %s, %d" % (s, s, wk))
                lp.again(k.p("setp.lt.u32", s, nfull))
    k.note("partial last step (K %% %d != 0): taken by the warp whose turn it is" % SK)
    rem = k.r("and.b32", P["k"], SK - 1)
    with skip_if(k, k.p("setp.ne.or.u32", s, nfull, k.p("setp.eq.u32", rem, 0)), "reduce", uni=True):
        t8 = k.r("shl.b32", t, 3)
        preds = [k.p("setp.lt.u32", k.r("add.u32", t8, 32 * u) if u else t8, rem) for u in range(U)]
        B, A = load_step(k, opts, bptr, aptr, preds)
        compute(B, A)

    # Registers after the K loop are scoped to their phase: a change to the loop
    # leaves their names alone.
    with k.phase("reduce"):
        k.note("partial sums -> shared [warp][row][col]")
        smem = k.r("mov.u32", sym)
        wbase = k.r("mad.lo.u32", warp, mt * X * 4, smem)
        if engine == "mma":
            # lane holds (g, 8j+2t..+1) in c0,c1 and (g+8, ...) in c2,c3
            off = k.r("add.u32", k.r("shl.b32", k.r("mad.lo.u32", g, X, k.r("shl.b32", t, 1)), 2), wbase)
            gok = k.p("setp.lt.u32", g, mt) if mt < 8 else None
            for j in range(nt):
                guard = "@%s " % gok if gok else ""
                k.op("%sst.shared.v2.f32 [%s+%d], {%s, %s}" % (guard, off, 32 * j, acc[j][0], acc[j][1]))
                if mt == 16:
                    k.op("st.shared.v2.f32 [%s+%d], {%s, %s}"
                         % (off, 32 * j + 8 * X * 4, acc[j][2], acc[j][3]))
        else:
            for accj in acc:
                for reg in accj:
                    for sh in (1, 2):
                        o = k.r("shfl.sync.bfly.b32", reg, sh, "0x1f", "0xffffffff")
                        k.op("add.f32 %s, %s, %s" % (reg, reg, o))
            off = k.r("add.u32", k.r("shl.b32", g, 2), wbase)
            t0 = k.p("setp.eq.u32", t, 0)
            for j, accj in enumerate(acc):
                for m, reg in enumerate(accj):
                    k.op("@%s st.shared.f32 [%s+%d], %s" % (t0, off, (m * X + 8 * j) * 4, reg))
        k.op("bar.sync 0")

    with k.phase("out"):
        k.note("outputs: thread o sums the %d partials of (o / %d, o %% %d) in warp order" % (wk, X, X))
        pbeta = k.p("setp.ne.f32", P["beta"], "0f00000000")
        sum_warp_partials(k, smem, tid, threads, mt, X, wk, None, n0, P["m"], P["n"],
                          lambda row, col, ssum: epilogue_one(k, P, row, col, ssum, pbeta))
    k.op("ret")
    return k.text()


def generate(configs=None, opts=None):
    cfgs = {**CONFIGS, **(configs or {})}
    o = dict(DEFAULT_OPTS, **(opts or {}))
    parts = [HEADER]
    for dt in DTYPES:
        for mt in MTS:
            parts.append("\n" + gemv_kernel(dt, mt, cfgs[mt], o))
    return {OUT_NAME: "".join(parts)}


if __name__ == "__main__":
    sys.exit(cli.main(__file__, __doc__, generate))
