#!/usr/bin/env python3
"""Generate libkaio's element type conversions and the split-K matmul reduction.

    python3 ptx/gen_convert.py --out-dir DIR  # write DIR/convert.ptx

Only the Python standard library is used and the output depends on nothing but
this file and ptx/kaio_ptx, so the build is reproducible.

Kernels (block up to 256 threads, no shared memory, no launch annotations):
  kaio_convert_f32_<dt>(x, out, n), dt in {f16, bf16}: out[i] = (dt) x[i],
    rounded to nearest even; grid-stride, any grid.  The backward matmuls use
    it to round f32 gradients to the tensor cores' 16-bit operand type.
  kaio_splitk_reduce(ws, c, m, n, ldc, splits, split_elems, alpha, beta,
    out_dtype): the second half of a split-K matmul (the sm_90 and k-quant
    ones): the splits' f32 partial products summed in split order, so the
    result has the same bits on every run, then the matmul epilogue.

.version 7.0 / .target sm_80: nothing here needs more (bf16 is widened with a
mov, not cvt.f32.bf16, which needs sm_90).
"""

import sys

from kaio_ptx import cli, manifest
from kaio_ptx.control import block, loop, skip_if
from kaio_ptx.dtypes import OUT_DTYPES, store_f32_as
from kaio_ptx.kernel import Kernel
from kaio_ptx.params import load_params
from kaio_ptx.preamble import preamble

OUT_NAME = "convert.ptx"
HEADER = preamble(__file__)
BLOCK = 256

CONVERT_PARAMS = [(".u64", "x"), (".u64", "out"), (".u64", "n")]
REDUCE_PARAMS = [(".u64", "ws"), (".u64", "c"), (".u32", "m"), (".u32", "n"), (".u64", "ldc"),
                 (".u32", "splits"), (".u64", "split_elems"), (".f32", "alpha"), (".f32", "beta"),
                 (".u32", "out_dtype")]
CODE = {name: code for code, name, _ in OUT_DTYPES}


def convert_kernel(dt):
    name = "kaio_convert_f32_%s" % dt
    manifest.keys(name, select="convert", dtype=dt)
    doc = """
%s(x, out, n): out[i] = (dt) x[i], round to nearest even.
Grid-stride over n elements; any grid and block up to 256 threads.
Used to round f32 gradients to the tensor cores' 16-bit operand type.""" % name
    k = Kernel(name, doc, CONVERT_PARAMS, BLOCK)
    P = load_params(k, CONVERT_PARAMS, ("x", "out"))
    ctaid = k.r("mov.u32", "%ctaid.x")
    ntid = k.r("mov.u32", "%ntid.x")
    tid = k.r("mov.u32", "%tid.x")
    i = k.rd("mul.wide.u32", ctaid, ntid)
    tid64 = k.wide(tid)
    k.op("add.u64 %s, %s, %s" % (i, i, tid64))
    stride = k.rd("mul.wide.u32", k.r("mov.u32", "%nctaid.x"), ntid)
    with loop(k, "loop") as lp:
        lp.exit_if(k.p("setp.ge.u64", i, P["n"]))
        v = k.f("ld.global.f32", "[%s]" % k.rd("add.u64", P["x"], k.rd("shl.b64", i, 2)))
        store_f32_as(k, dt, k.rd("add.u64", P["out"], k.rd("shl.b64", i, 1)), v)
        k.op("add.u64 %s, %s, %s" % (i, i, stride))
        lp.again()
    k.op("ret")
    return k.text()


def ld_b16(k, addr):
    h = k.reg("h")
    k.op("ld.global.b16 %s, [%s]" % (h, addr))
    return h


def blend_store(k, dt, addr, acc, P, pbeta, done):
    """C = fma(beta, C_old, acc) (C_old read only where pbeta: beta != 0), or
    acc, stored as dt at addr; then out of the block done unless dt is the
    last case."""
    with skip_if(k, "!" + pbeta, dt + "_store"):
        if dt == "f32":
            old = k.f("ld.global.f32", "[%s]" % addr)
        elif dt == "f16":
            old = k.f("cvt.f32.f16", ld_b16(k, addr))
        else:
            # bf16 bits in the high half are the f32 value (no cvt.f32.bf16 before sm_90)
            old = k.f("mov.b32", k.r("mov.b32", "{0, %s}" % ld_b16(k, addr)))
        k.op("fma.rn.f32 %s, %s, %s, %s" % (acc, P["beta"], old, acc))
    store_f32_as(k, dt, addr, acc)
    if done:
        done.exit_if(None)


def splitk_reduce_kernel():
    name = "kaio_splitk_reduce"
    manifest.keys(name, select="splitk_reduce")
    doc = """
%s(ws, c, m, n, ldc, splits, split_elems, alpha, beta,
out_dtype): the second half of a split-K matmul.  Split s left its f32
partial product of element (i, j) at ws[s * split_elems + i * n + j]; this
sums them in split order (the same bits on every run), then
  C[i * ldc + j] = alpha * sum                      (beta == 0: C not read)
  C[i * ldc + j] = fma(beta, C_old, alpha * sum)   (otherwise)
rounded once to out_dtype (1 f32, 2 f16, 3 bf16; anything else writes
nothing), the same formula as the matmul kernels' epilogue.
Grid: x = ceil(n / 256), y = m (rows, <= 65535); block 256.""" % name
    k = Kernel(name, doc, REDUCE_PARAMS, BLOCK)
    P = load_params(k, REDUCE_PARAMS, ("ws", "c"))
    j = k.r("mad.lo.u32", k.r("mov.u32", "%ctaid.x"), BLOCK, k.r("mov.u32", "%tid.x"))
    i = k.r("mov.u32", "%ctaid.y")
    outside = k.p("or.pred", k.p("setp.ge.u32", j, P["n"]), k.p("setp.ge.u32", i, P["m"]))
    with block(k, "done") as done:
        done.exit_if(outside)
        splitk_element(k, P, i, j, done)
    k.op("ret")
    return k.text()


def splitk_element(k, P, i, j, done):
    """Sum element (i, j)'s splits, blend and store it; done: the block
    the stores leave (every dtype but the last, which falls out of it)."""
    ij = k.rd("mul.wide.u32", i, P["n"])
    j64 = k.wide(j)
    at = k.rd("add.u64", P["ws"], k.rd("shl.b64", k.rd("add.u64", ij, j64), 2))  # &ws[0][i][j]
    step = k.rd("shl.b64", P["split_elems"], 2)  # bytes between splits
    acc = k.f("ld.global.f32", "[%s]" % at)
    s = k.r("mov.u32", 1)
    sum1 = k.label("sum1")
    k.note("four splits' loads in flight at a time, added in split order")
    with loop(k, "sum4") as lp:
        s4 = k.r("add.u32", s, 4)
        # leaves to the one-split loop's top: an end label of its own would add a line
        k.op("@%s bra %s" % (k.p("setp.gt.u32", s4, P["splits"]), sum1))
        addrs = [k.rd("add.u64", at, step)]
        for _ in range(2):
            addrs.append(k.rd("add.u64", addrs[-1], step))
        k.op("add.u64 %s, %s, %s" % (at, addrs[-1], step))
        addrs.append(at)
        vals = [k.f("ld.global.f32", "[%s]" % a) for a in addrs]
        for v in vals:
            k.op("add.rn.f32 %s, %s, %s" % (acc, acc, v))
        k.op("mov.u32 %s, %s" % (s, s4))
        lp.again()
    with loop(k, "sum1", top=sum1) as lp:
        lp.exit_if(k.p("setp.ge.u32", s, P["splits"]))
        k.op("add.u64 %s, %s, %s" % (at, at, step))
        k.op("add.rn.f32 %s, %s, %s" % (acc, acc, k.f("ld.global.f32", "[%s]" % at)))
        k.op("add.u32 %s, %s, 1" % (s, s))
        lp.again()

    k.op("mul.rn.f32 %s, %s, %s" % (acc, acc, P["alpha"]))
    elem = k.rd("add.u64", k.rd("mul.lo.u64", k.wide(i), P["ldc"]), j64)  # i * ldc + j
    pbeta = k.p("setp.neu.f32", P["beta"], "0f00000000")
    # bf16, f16, f32 in that order, each case skipped by the ones before it
    with skip_if(k, k.p("setp.eq.u32", P["out_dtype"], CODE["f32"]), "out_f32"):
        addr16 = k.rd("add.u64", P["c"], k.rd("shl.b64", elem, 1))
        with skip_if(k, k.p("setp.eq.u32", P["out_dtype"], CODE["f16"]), "out_f16"):
            done.exit_if(k.p("setp.ne.u32", P["out_dtype"], CODE["bf16"]))
            blend_store(k, "bf16", addr16, acc, P, pbeta, done)
        blend_store(k, "f16", addr16, acc, P, pbeta, done)
    blend_store(k, "f32", k.rd("add.u64", P["c"], k.rd("shl.b64", elem, 2)), acc, P, pbeta, None)


def generate():
    parts = [HEADER]
    parts += ["\n" + convert_kernel(dt) for dt in ("f16", "bf16")]
    parts.append("\n" + splitk_reduce_kernel())
    return {OUT_NAME: "".join(parts)}


if __name__ == "__main__":
    sys.exit(cli.main(__file__, __doc__, generate))
