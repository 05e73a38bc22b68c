#!/usr/bin/env python3
"""Generate libkaio's elementwise and row-wise PTX kernels.

    python3 ptx/gen_elementwise.py --out-dir DIR  # write DIR/elementwise.ptx, rows.ptx and norms.ptx
    python3 ptx/gen_elementwise.py --refit  # re-derive the gelu_erf polynomial tables and print them

Every op exists for three dtypes and for several memory paths (16-byte vectors,
scalars, a tail); generating them keeps the arithmetic written once per op, so
the dtype variants cannot drift apart. Only the Python standard library is used
and the output depends on nothing but this file and ptx/kaio_ptx, so the build is
reproducible.

Conventions of the emitted PTX: .version 7.0 / .target sm_80 (loadable by any
driver since CUDA 11.0 and JIT-compiled for newer GPUs); math in f32; f16/bf16
are widened on load and rounded once (round-to-nearest-even) on store; float
arithmetic carries explicit .rn so ptxas never contracts mul+add into fma
(the error bounds quoted below were measured on the exact emitted sequence).
"""

import math
import struct
import sys

from kaio_ptx import cli
from kaio_ptx.control import block, if_else, loop, skip_if
from kaio_ptx.grid_dep import twin_module
from kaio_ptx.kernel import Kernel
from kaio_ptx.literals import INF, NEG_INF, ONE, ZERO, f32
from kaio_ptx.preamble import preamble

HEADER = preamble(__file__)

BLOCK = 256           # every kernel is launched with blockDim (256, 1, 1)
WARPS = BLOCK // 32
LOG2E = 1.4426950408889634


# --------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------

def load_params(k, names, kind=".u64"):
    """ld.param each name; pointers are turned into global-window addresses."""
    regs = {}
    for name in names:
        if kind == ".u64":
            raw = k.rd("ld.param.u64", "[%s]" % name)
            regs[name] = k.rd("cvta.to.global.u64", raw)
        else:
            regs[name] = k.reg("r" if kind == ".u32" else "f")
            k.op("ld.param%s %s, [%s]" % (kind, regs[name], name))
    return regs


# --------------------------------------------------------------------------
# dtype helpers: a "slot" is either one element (width 1) or one 16-byte
# vector (width = 16 / esize).  Raw registers hold the slot as loaded; to_f32
# widens, store rounds once to the dtype.
# --------------------------------------------------------------------------

class DType:
    def __init__(self, name, esize):
        self.name, self.esize = name, esize
        self.vec = 16 // esize                  # elements per 16-byte vector
        self.log2size = esize.bit_length() - 1

    def raw_kind(self, width):
        if self.name == "f32":
            return "f"
        return "h" if (width == 1 and self.name == "f16") else "r"

    def raw_count(self, width):
        return width if (self.name == "f32" or width == 1) else width // 2

    def fill(self, width, value):
        """Immediate that makes a masked raw register read as `value` (0 or -inf)."""
        if self.name == "f32":
            return f32(value)
        bits = {"f16": 0xFC00, "bf16": 0xFF80}[self.name] if value == -math.inf else 0
        if width == 1:
            return "0x%04X" % bits
        return "0x%08X" % (bits << 16 | bits)

    def load(self, k, raw, addr, pred=""):
        g = ("@%s " % pred) if pred else ""
        if len(raw) == 4:
            k.op("%sld.global.v4.%s {%s}, [%s]" % (g, "f32" if self.name == "f32" else "b32", ", ".join(raw), addr))
        elif self.name == "bf16":
            # zero-extended into a 32-bit register: widening is then one shift
            k.op("%sld.global.u16 %s, [%s]" % (g, raw[0], addr))
        else:
            k.op("%sld.global.%s %s, [%s]" % (g, "f32" if self.name == "f32" else "b16", raw[0], addr))

    def set_fill(self, k, raw, width, value):
        """Make masked slots read as `value` (0 or -inf) after a predicated load."""
        imm = self.fill(width, value)
        for reg in raw:
            k.op("mov.%s %s, %s" % ({"%f": "f32", "%h": "b16"}.get(reg[:2], "b32"), reg, imm))

    def to_f32(self, k, raw, width):
        if self.name == "f32":
            return list(raw)
        vals = []
        if width == 1:
            if self.name == "f16":
                return [k.f("cvt.f32.f16", raw[0])]
            return [k.f("mov.b32", k.r("shl.b32", raw[0], "16"))]
        for word in raw:
            if self.name == "f16":
                lo, hi = k.reg("h"), k.reg("h")
                k.op("mov.b32 {%s, %s}, %s" % (lo, hi, word))
                vals += [k.f("cvt.f32.f16", lo), k.f("cvt.f32.f16", hi)]
            else:   # bf16 is the top half of an f32
                vals += [k.f("mov.b32", k.r("shl.b32", word, "16")),
                         k.f("mov.b32", k.r("and.b32", word, "0xFFFF0000"))]
        return vals

    def store(self, k, addr, vals, pred=""):
        g = ("@%s " % pred) if pred else ""
        if self.name == "f32":
            if len(vals) == 1:
                k.op("%sst.global.f32 [%s], %s" % (g, addr, vals[0]))
            else:
                k.op("%sst.global.v4.f32 [%s], {%s}" % (g, addr, ", ".join(vals)))
            return
        if len(vals) == 1:
            h = k.reg("h")
            k.op("cvt.rn.%s.f32 %s, %s" % (self.name, h, vals[0]))
            k.op("%sst.global.b16 [%s], %s" % (g, addr, h))
            return
        words = []
        for lo, hi in zip(vals[0::2], vals[1::2]):
            w = k.reg("r")
            k.op("cvt.rn.%sx2.f32 %s, %s, %s" % (self.name, w, hi, lo))   # first source -> upper half
            words.append(w)
        k.op("%sst.global.v4.b32 [%s], {%s}" % (g, addr, ", ".join(words)))


def pack(dt, k, vals):
    """Round f32 values to dt, into raw registers laid out as load leaves them."""
    if dt.name == "f32":
        return list(vals)
    if len(vals) == 1:
        h = k.reg("h")
        k.op("cvt.rn.%s.f32 %s, %s" % (dt.name, h, vals[0]))
        if dt.name == "f16":
            return [h]
        r = k.reg("r")      # bf16 scalars live zero-extended in 32 bits
        k.op("cvt.u32.u16 %s, %s" % (r, h))
        return [r]
    words = []
    for lo, hi in zip(vals[0::2], vals[1::2]):
        w = k.reg("r")
        k.op("cvt.rn.%sx2.f32 %s, %s, %s" % (dt.name, w, hi, lo))
        words.append(w)
    return words


def store_raw(dt, k, addr, raw, pred):
    g = "@%s " % pred
    if len(raw) == 4:
        k.op("%sst.global.v4.%s [%s], {%s}" % (g, "f32" if dt.name == "f32" else "b32", addr, ", ".join(raw)))
    else:
        k.op("%sst.global.%s [%s], %s" % (g, {"f32": "f32", "f16": "b16", "bf16": "u16"}[dt.name], addr, raw[0]))


def fill_imm(dt, width, value):
    """Immediate that makes a raw register read as `value` (any f32 constant)."""
    if dt.name == "f32":
        return f32(value)
    bits = struct.unpack("<H", struct.pack("<e", value))[0] if dt.name == "f16" else \
        struct.unpack("<I", struct.pack("<f", value))[0] >> 16
    return "0x%04X" % bits if (width == 1 and dt.name == "f16") else \
        "0x%08X" % (bits if width == 1 else bits << 16 | bits)


DTYPES = [DType("f32", 4), DType("f16", 2), DType("bf16", 2)]


# --------------------------------------------------------------------------
# Scalar f32 math shared by the ops.
# --------------------------------------------------------------------------

def recip_newton(k, d):
    """1/d for 1 <= d <= 2 to ~0.5 ulp: rcp.approx (1 ulp) + one Newton step.
    Cheaper than rcp.rn, which carries a branch for special operands."""
    r0 = k.f("rcp.approx.ftz.f32", d)
    e = k.f("fma.rn.f32", k.f("neg.f32", d), r0, ONE)
    return k.f("fma.rn.f32", r0, e, r0)


def x_times_sigmoid(k, x, a):
    """x / (1 + 2^a), evaluated as x * num / (1 + t) with t = 2^-|a| in (0, 1]:
    nothing overflows, the reciprocal only ever sees [1, 2], and for a >> 0 the
    result follows t down to f32 underflow and then is exactly +-0."""
    t = k.f("ex2.approx.ftz.f32", k.f("neg.f32", k.f("abs.f32", a)))
    r = recip_newton(k, k.f("add.rn.f32", t, ONE))
    num = k.f("selp.f32", t, ONE, k.p("setp.gt.f32", a, ZERO))
    return k.f("mul.rn.f32", x, k.f("mul.rn.f32", num, r))


def silu_gate_math(k, x, gate):
    """x * sigmoid(x) * gate.

    Measured (this exact sequence emulated against long double over a dense
    sweep and every 4099th f32, ex2 off by -2..+2 ulp, rcp.approx by -1..+1 ulp):
    max rel error 1.3e-6 for |x| <= 20, 3.8e-6 for all x with |silu(x)| > 1e-30
    (it grows for x << 0 because the ex2 argument -x*log2(e) is rounded).
    silu(x) = -0 for x < -87.3 (where e^x underflows), silu(+-inf) = +inf / -0,
    NaN propagates; no NaN for finite x."""
    # sigmoid(x) is 0 in f32 well above -128; the clamp only keeps -inf * 0 from
    # making NaN (max.NaN keeps NaN inputs NaN)
    xc = k.f("max.NaN.f32", x, f32(-128.0))
    y = x_times_sigmoid(k, xc, k.f("mul.rn.f32", xc, f32(-LOG2E)))
    return k.f("mul.rn.f32", y, gate)


def gelu_tanh_math(k, x):
    """0.5*x*(1 + tanh(u)), u = sqrt(2/pi)*(x + 0.044715*x^3).

    Uses the identity 0.5*(1 + tanh(u)) = 1/(1 + exp(-2u)), so no tanh is formed
    and there is no cancellation near u = 0.  Measured (as silu): max rel error
    8.5e-7 for x >= -3; over all finite x |err| <= 6.1e-7 * max(|y|, 0.025|x|)
    (below about -3 the function itself is ill-conditioned, d ln y/d ln x ~ 0.2 x^3).
    gelu = -0 once e^(2u) underflows (x < -10.1), gelu(+-inf) = +inf / -0, NaN propagates."""
    xc = k.f("max.NaN.f32", x, f32(-64.0))   # as in silu: -inf must give -0, not NaN
    c0 = -2.0 * math.sqrt(2.0 / math.pi) * LOG2E
    # -2u*log2(e) = x * (c0 + c0*0.044715*x^2)
    p = k.f("fma.rn.f32", k.f("mul.rn.f32", xc, xc), f32(c0 * 0.044715), f32(c0))
    return x_times_sigmoid(k, xc, k.f("mul.rn.f32", xc, p))


# gelu_erf works with Phi(x) = 0.5*(1 + erf(x/sqrt(2))) directly (no x/sqrt(2)
# rounding).  |x| < ERF_SPLIT: Phi = 0.5 + x*P(x^2).  ERF_SPLIT <= |x| < ERF_END:
# Phi(-|x|) = 2^Q(u), u = |x|/2 - 1.75 in [-1, 1] (exact scaling, one rounding);
# Phi(+|x|) = 1 - Phi(-|x|), so negative x never suffers the 1 + erf cancellation.
# Past ERF_END, Phi(-|x|) < 2e-8 is taken as 0 (erf clamped to +-1).
# Tables: Chebyshev interpolation (near-minimax) of the f64 functions, rounded
# to f32; re-derive with --refit.  Fit error: P 3e-9 relative, Q 1.2e-8 absolute.
ERF_SPLIT, ERF_END = 1.5, 5.5
ERF_P = [float.fromhex(h) for h in (
    "0x1.988454p-2", "-0x1.10582cp-4", "0x1.46cdc8p-7", "-0x1.370a78p-10",
    "0x1.dfc812p-14", "-0x1.24f684p-17", "0x1.bbe702p-22")]
ERF_Q = [float.fromhex(h) for h in (
    "-0x1.823ad4p+3", "-0x1.5a6012p+3", "-0x1.5c4d88p+1", "-0x1.72569cp-5",
    "0x1.a3947ap-7", "-0x1.ce35acp-9", "0x1.e1bb7cp-11", "-0x1.d192cep-13",
    "0x1.405cf4p-15")]


def refit_erf_tables(nodes=256):
    """Return (P, Q) fitted from math.erf/erfc, as f32-rounded monomial coefficients."""
    def fit(fn, lo, hi, deg):
        xs = [math.cos(math.pi * (j + 0.5) / nodes) for j in range(nodes)]
        fx = [fn(lo + (hi - lo) * (x + 1) / 2) for x in xs]
        cheb = [2.0 / nodes * sum(fx[j] * math.cos(n * math.pi * (j + 0.5) / nodes)
                                  for j in range(nodes)) for n in range(deg + 1)]
        cheb[0] /= 2
        # expand sum c_n T_n(a*t + b) into powers of t
        a, b = 2.0 / (hi - lo), -(hi + lo) / (hi - lo)
        mono = [0.0] * (deg + 1)
        t_prev, t_cur = [1.0], [b, a]
        for n, c in enumerate(cheb):
            if n >= 2:
                wt = [0.0] * (len(t_cur) + 1)
                for i, v in enumerate(t_cur):
                    wt[i] += b * v
                    wt[i + 1] += a * v
                t_prev, t_cur = t_cur, [2 * wt[i] - (t_prev[i] if i < len(t_prev) else 0.0)
                                        for i in range(len(wt))]
            poly = t_prev if n == 0 else t_cur
            for i, v in enumerate(poly):
                mono[i] += c * v
        return [struct.unpack("<f", struct.pack("<f", m))[0] for m in mono]

    def p_of_v(v):   # (Phi(sqrt v) - 0.5) / sqrt v
        return math.erf(math.sqrt(v / 2.0)) / (2.0 * math.sqrt(v))

    def q_of_u(u):   # log2 Phi(-s), s = 2u + 3.5
        return math.log2(0.5 * math.erfc((2.0 * u + 3.5) / math.sqrt(2.0)))

    return fit(p_of_v, 0.0, ERF_SPLIT ** 2, len(ERF_P) - 1), fit(q_of_u, -1.0, 1.0, len(ERF_Q) - 1)


def horner(k, coeffs, t):
    acc = f32(coeffs[-1])
    for c in reversed(coeffs[:-1]):
        acc = k.f("fma.rn.f32", acc, t, f32(c))
    return acc


def gelu_erf_math(k, x):
    """0.5*x*(1 + erf(x/sqrt(2))) = x*Phi(x).

    Measured (as silu): erf = 2*Phi - 1 max abs error 1.7e-7; gelu max rel error
    9.1e-7 for x >= -3; over all finite x |err| <= 9.1e-7 * max(|y|, 0.025|x|)
    (x < -5.5 gives -0 where |y| < 1.1e-7).  gelu(+inf) = +inf, gelu(-inf) = -0,
    NaN propagates."""
    xc = k.f("max.NaN.f32", x, f32(-ERF_END))   # keeps -inf * 0 from making NaN
    s = k.f("abs.f32", xc)
    central = k.f("fma.rn.f32", xc, horner(k, ERF_P, k.f("mul.rn.f32", xc, xc)), f32(0.5))
    lower = k.f("ex2.approx.ftz.f32", horner(k, ERF_Q, k.f("fma.rn.f32", s, f32(0.5), f32(-1.75))))
    lower = k.f("selp.f32", ZERO, lower, k.p("setp.ge.f32", s, f32(ERF_END)))
    tail = k.f("selp.f32", lower, k.f("sub.rn.f32", ONE, lower), k.p("setp.lt.f32", xc, ZERO))
    phi = k.f("selp.f32", central, tail, k.p("setp.lt.f32", s, f32(ERF_SPLIT)))
    return k.f("mul.rn.f32", xc, phi)


# --------------------------------------------------------------------------
# Elementwise kernels: grid-stride over n elements.
# --------------------------------------------------------------------------

def stream(k, dt, ptrs, inputs, math_fn, width, unroll, off0, step, limit, out):
    """Grid-stride loop over byte offsets [off0, limit) in steps of `step`, `width`
    elements per access.  Each trip handles `unroll` accesses one grid stride
    apart, all loads issued before any math, so a thread keeps
    unroll * len(inputs) independent loads in flight.  out: the block (or
    arm) the last accesses leave through, out.exit_if."""
    offs = [off0]
    for _ in range(unroll - 1):
        offs.append(k.rd("add.u64", offs[-1], step))
    stride_all = k.rd("mul.lo.u64", step, str(unroll))

    def body(slots):
        raws = {}
        for i in slots:
            for name in inputs:
                raws[i, name] = k.regs(dt.raw_kind(width), dt.raw_count(width))
                dt.load(k, raws[i, name], k.rd("add.u64", ptrs[name], offs[i]))
        for i in slots:
            vals = [dt.to_f32(k, raws[i, name], width) for name in inputs]
            ys = [math_fn(k, *args) for args in zip(*vals)]
            dt.store(k, k.rd("add.u64", ptrs["out"], offs[i]), ys)

    with loop(k, "loop") as lp:
        lp.exit_if(k.p("setp.ge.u64", offs[-1], limit))
        body(range(unroll))
        for o in offs:
            k.op("add.u64 %s, %s, %s" % (o, o, stride_all))
        lp.again()
    # fewer than `unroll` accesses are left for this thread; offsets only grow
    for i in range(unroll - 1):
        out.exit_if(k.p("setp.ge.u64", offs[i], limit))
        body([i])


def elementwise_kernel(name, dt, inputs, math_fn, doc, unroll=2):
    params = [(".u64", p) for p in inputs + ["out", "n"]]
    op = name[len("kaio_"):-len("_" + dt.name)]
    k = Kernel(name, doc, params, BLOCK, shared=[], keys={"select": "elementwise", "op": op, "dtype": dt.name})
    ptrs = load_params(k, inputs + ["out"])
    n = k.rd("ld.param.u64", "[n]")
    tid = k.r("mov.u32", "%tid.x")
    ntid = k.r("mov.u32", "%ntid.x")
    ctaid = k.r("mov.u32", "%ctaid.x")
    gtid = k.rd("add.u64", k.rd("mul.wide.u32", ctaid, ntid), k.rd("cvt.u64.u32", tid))
    gstride = k.rd("mul.wide.u32", ntid, k.r("mov.u32", "%nctaid.x"))

    k.note("16-byte vectors need every pointer 16-byte aligned; the test is grid-uniform")
    anded = ptrs[inputs[0]]
    for name in inputs[1:] + ["out"]:
        anded = k.rd("or.b64", anded, ptrs[name])
    misaligned = k.p("setp.ne.u64", k.rd("and.b64", anded, "15"), "0")

    # Phase-scoped registers: a change to one path leaves the others' names alone.
    log2v = dt.vec.bit_length() - 1
    for arm in if_else(k, "!" + misaligned, "scalar", uni=True, join_uni=False):
        if arm.then:
            with k.phase("vec"), block(k, "tail") as tail:
                nvec = k.rd("shr.u64", n, str(log2v))
                stream(k, dt, ptrs, inputs, math_fn, dt.vec, unroll,
                       k.rd("shl.b64", gtid, "4"), k.rd("shl.b64", gstride, "4"), k.rd("shl.b64", nvec, "4"), tail)
            k.note("the last n mod %d elements: one per thread of the first threads" % dt.vec)
            with k.phase("tail"):
                head = k.rd("shl.b64", nvec, str(log2v))
                arm.exit_if(k.p("setp.ge.u64", gtid, k.rd("sub.u64", n, head)))
                off = k.rd("shl.b64", k.rd("add.u64", head, gtid), str(dt.log2size))
                stream_once(k, dt, ptrs, inputs, math_fn, off)
        else:
            k.note("misaligned pointers: element-wise accesses, same loop shape")
            with k.phase("scalar"):
                stream(k, dt, ptrs, inputs, math_fn, 1, unroll,
                       k.rd("shl.b64", gtid, str(dt.log2size)), k.rd("shl.b64", gstride, str(dt.log2size)),
                       k.rd("shl.b64", n, str(dt.log2size)), arm)
    k.op("ret")
    return k.text()


def stream_once(k, dt, ptrs, inputs, math_fn, off):
    vals = []
    for name in inputs:
        raw = k.regs(dt.raw_kind(1), dt.raw_count(1))
        dt.load(k, raw, k.rd("add.u64", ptrs[name], off))
        vals.append(dt.to_f32(k, raw, 1)[0])
    dt.store(k, k.rd("add.u64", ptrs["out"], off), [math_fn(k, *vals)])


ELEMENTWISE_DOC = """
{name}({params})
{what}
n elements, contiguous; any grid (grid-stride).  All pointers 16-byte aligned:
16-byte accesses, two per input in flight per thread, plus a scalar tail;
otherwise element accesses.  Indices are 64-bit; nothing at or past n is touched.
Accuracy (f32 math, then one rounding to {dt}):
{accuracy}
"""


def _doc(name, params, what, dt, fn):
    acc = "\n".join("  " + line.strip() for line in fn.__doc__.strip().split("\n")[1:] if line.strip())
    return ELEMENTWISE_DOC.format(name=name, params=", ".join(params), what=what, dt=dt.name, accuracy=acc)


def silu_gate(dt):
    name = "kaio_silu_gate_" + dt.name
    doc = _doc(name, ["x", "gate", "out", "n"], "out[i] = x[i] * sigmoid(x[i]) * gate[i]", dt, silu_gate_math)
    return elementwise_kernel(name, dt, ["x", "gate"], silu_gate_math, doc)


def gelu_erf(dt):
    name = "kaio_gelu_erf_" + dt.name
    doc = _doc(name, ["x", "out", "n"], "out[i] = 0.5 * x * (1 + erf(x / sqrt(2)))", dt, gelu_erf_math)
    return elementwise_kernel(name, dt, ["x"], gelu_erf_math, doc)


def gelu_tanh(dt):
    name = "kaio_gelu_tanh_" + dt.name
    doc = _doc(name, ["x", "out", "n"],
               "out[i] = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))", dt, gelu_tanh_math)
    return elementwise_kernel(name, dt, ["x"], gelu_tanh_math, doc)


# --------------------------------------------------------------------------
# Row kernels.  A row is processed in chunks of lanes * slots accesses; each
# thread holds its slots of a chunk in registers.  Pass 1 reads x and builds
# per-thread statistics, which are reduced across the warp (and block); pass 2
# writes the output.  When the row is a single chunk (cols <= 1024 for _warp)
# pass 2 reuses the registers, so x is read from memory once; longer rows are
# read a second time.
# --------------------------------------------------------------------------

class RmsNorm:
    name = "rmsnorm"
    uses_w = True
    fill = 0.0
    extra_params = [(".f32", "eps")]

    def start(self, k, ngroups):
        # a few independent partial sums: shorter dependency chains and less
        # rounding growth on long rows
        self.acc = [k.f("mov.f32", ZERO) for _ in range(min(ngroups, 4))]

    def update(self, k, group_index, vals):
        a = self.acc[group_index % len(self.acc)]
        for v in vals:
            k.op("fma.rn.f32 %s, %s, %s, %s" % (a, v, v, a))

    def lane_stats(self, k):
        accs = self.acc
        while len(accs) > 1:
            accs = [k.f("add.rn.f32", a, b) for a, b in zip(accs[0::2], accs[1::2])] + accs[len(accs) // 2 * 2:]
        return [accs[0]]

    def combine(self, k, a, b):
        return [k.f("add.rn.f32", a[0], b[0])]

    def finish(self, k, stats, cols, params):
        mean = k.f("div.rn.f32", stats[0], k.f("cvt.rn.f32.u32", cols))
        root = k.f("sqrt.rn.f32", k.f("add.rn.f32", mean, params["eps"]))
        return k.f("rcp.rn.f32", root)

    def output(self, k, inv, x, w):
        return k.f("mul.rn.f32", k.f("mul.rn.f32", x, inv), w)


class Softmax:
    name = "softmax"
    uses_w = False
    fill = -math.inf        # masked slots must not move the max nor add to the sum
    extra_params = []

    def start(self, k, ngroups):
        self.m = k.f("mov.f32", NEG_INF)
        self.s = k.f("mov.f32", ZERO)

    @staticmethod
    def safe_max(k, m):
        # exponents are taken relative to m; if m is -inf (nothing finite seen
        # yet) use 0 so that -inf - m stays -inf instead of NaN
        return k.f("selp.f32", ZERO, m, k.p("setp.eq.f32", m, NEG_INF))

    @staticmethod
    def exp_minus(k, x, m):
        """e^(x - m) with the difference formed first: its error is then
        relative to x - m, not to |x| (large logits)."""
        return k.f("ex2.approx.ftz.f32", k.f("mul.rn.f32", k.f("sub.rn.f32", x, m), f32(LOG2E)))

    def update(self, k, group_index, group):
        # called per group of 8 values rather than once per chunk: one extra
        # rescale per group, but only 8 values are live at a time
        gmax = group
        while len(gmax) > 1:
            gmax = [k.f("max.f32", a, b) for a, b in zip(gmax[0::2], gmax[1::2])] + gmax[len(gmax) // 2 * 2:]
        m_new = k.f("max.f32", self.m, gmax[0])
        ms = self.safe_max(k, m_new)
        terms = [k.f("mul.rn.f32", self.s, self.exp_minus(k, self.m, ms))]
        terms += [self.exp_minus(k, v, ms) for v in group]
        while len(terms) > 1:
            terms = [k.f("add.rn.f32", a, b) for a, b in zip(terms[0::2], terms[1::2])] + terms[len(terms) // 2 * 2:]
        k.op("mov.f32 %s, %s" % (self.s, terms[0]))
        k.op("mov.f32 %s, %s" % (self.m, m_new))

    def lane_stats(self, k):
        return [self.m, self.s]

    def combine(self, k, a, b):
        # symmetric in (a, b), so every lane of a butterfly ends with identical bits
        m = k.f("max.f32", a[0], b[0])
        ms = self.safe_max(k, m)
        sa = k.f("mul.rn.f32", a[1], self.exp_minus(k, a[0], ms))
        sb = k.f("mul.rn.f32", b[1], self.exp_minus(k, b[0], ms))
        return [m, k.f("add.rn.f32", sa, sb)]

    def finish(self, k, stats, cols, params):
        # s >= 1 whenever the row has a finite max (that element adds exactly 1);
        # an all -inf row gives s = 0 and NaN outputs
        self.mrow = self.safe_max(k, stats[0])
        return k.f("rcp.rn.f32", stats[1])

    def output(self, k, inv, x, w):
        return k.f("mul.rn.f32", self.exp_minus(k, x, self.mrow), inv)


def reduce_rows(k, op, stats, shape, warp, lane_in_warp, buf="kaio_partials"):
    for off in (16, 8, 4, 2, 1):
        other = []
        for v in stats:
            o = k.reg("f")
            k.op("shfl.sync.bfly.b32 %s, %s, %d, 31, -1" % (o, v, off))
            other.append(o)
        stats = op.combine(k, stats, other)
    if shape == "warp":
        return stats
    # block: one partial per warp through shared memory; every thread then
    # folds the 8 partials in the same order, so all hold identical results
    width = len(stats)
    decl = ".shared .align 8 .b8 %s[%d]" % (buf, WARPS * 8)
    if decl not in k.shared:
        k.shared.append(decl)
    base = k.r("mov.u32", buf)
    slot = k.r("add.u32", base, k.r("shl.b32", warp, "3"))
    lead = k.p("setp.eq.u32", lane_in_warp, "0")
    vec = ".v2" if width == 2 else ""
    k.op("@%s st.shared%s.f32 [%s], %s" % (lead, vec, slot, stats[0] if width == 1 else "{%s}" % ", ".join(stats)))
    k.op("bar.sync 0")
    total = None
    for w in range(WARPS):
        part = k.regs("f", width)
        k.op("ld.shared%s.f32 %s, [%s+%d]" % (vec, part[0] if width == 1 else "{%s}" % ", ".join(part), base, 8 * w))
        total = part if total is None else op.combine(k, total, part)
    return total


def row_path(k, op, dt, shape, vector, lane, lanes, warp, lane_in_warp, rowp, cols, params):
    """Both passes over one row with either 16-byte (vector) or element slots."""
    width = dt.vec if vector else 1
    slot_bytes = width * dt.esize
    # 16-byte slots: a chunk covers 1024 (_warp) or 8192 (_block) columns, the
    # common row lengths; more slots would cost registers and so occupancy.
    # Element slots are capped at 8 per thread for the same reason, at the
    # price of a second, cache-hot read on the misaligned path when
    # cols > 8 * lanes.
    nslots = ((1024 if shape == "warp" else 8192) // (lanes * width)) if vector else 8
    chunk_units = lanes * nslots
    units = k.r("shr.u32", cols, str(width.bit_length() - 1)) if vector else cols
    lane_off = k.rd("mul.wide.u32", lane, str(slot_bytes))
    bases = {name: k.rd("add.u64", rowp[name], lane_off) for name in rowp}
    raw = [k.regs(dt.raw_kind(width), dt.raw_count(width)) for _ in range(nslots)]
    c0 = k.reg("r")
    ptr = {name: k.reg("rd") for name in bases}

    def slot_preds():
        # slot j of this lane is column unit c0 + lane + j*lanes; valid if < units
        left = k.r("sub.s32", k.r("sub.u32", units, c0), lane)
        return [k.p("setp.gt.s32", left, str(j * lanes)) for j in range(nslots)]

    def load_chunk(preds, name, regs, fill):
        for j in range(nslots):
            dt.set_fill(k, regs[j], width, fill)
            dt.load(k, regs[j], "%s+%d" % (ptr[name], j * lanes * slot_bytes), preds[j])

    def advance():
        k.op("add.u32 %s, %s, %d" % (c0, c0, chunk_units))
        for name in ptr:
            k.op("add.u64 %s, %s, %d" % (ptr[name], ptr[name], chunk_units * slot_bytes))

    def reset():
        k.op("mov.u32 %s, 0" % c0)
        for name in ptr:
            k.op("mov.b64 %s, %s" % (ptr[name], bases[name]))

    # Slots are processed in groups of 8 values.  A slot's validity is monotone
    # in its index, so a thread branches past the rest of the chunk at the first
    # group whose first slot is out of range: short rows then cost no math (and
    # no ex2) for the masked slots.
    group = max(1, 8 // width)
    groups = [list(range(g, min(g + group, nslots))) for g in range(0, nslots, group)]

    def per_group(preds, emit):
        with block(k, "skip") as chunk:
            for gi, slots in enumerate(groups):
                chunk.exit_if("!" + preds[slots[0]])
                emit(gi, slots)

    # pass 1: statistics
    op.start(k, len(groups))
    reset()
    with loop(k, "stats") as lp:
        preds = slot_preds()
        load_chunk(preds, "x", raw, op.fill)
        per_group(preds, lambda gi, slots: op.update(
            k, gi, [v for j in slots for v in dt.to_f32(k, raw[j], width)]))
        advance()
        lp.again(k.p("setp.lt.u32", c0, units))
    stats = reduce_rows(k, op, op.lane_stats(k), shape, warp, lane_in_warp)
    scale = op.finish(k, stats, cols, params)

    # pass 2: output; a single-chunk row is still in registers
    reset()
    reload = k.p("setp.gt.u32", units, str(chunk_units))
    with loop(k, "out") as lp:
        preds = slot_preds()
        with skip_if(k, "!" + reload, "use"):
            load_chunk(preds, "x", raw, op.fill)
        if op.uses_w:
            wraw = [k.regs(dt.raw_kind(width), dt.raw_count(width)) for _ in range(nslots)]
            load_chunk(preds, "w", wraw, 0.0)

        def outputs(gi, slots):
            for j in slots:
                xs = dt.to_f32(k, raw[j], width)
                ws = dt.to_f32(k, wraw[j], width) if op.uses_w else [None] * width
                ys = [op.output(k, scale, xv, wv) for xv, wv in zip(xs, ws)]
                dt.store(k, "%s+%d" % (ptr["out"], j * lanes * slot_bytes), ys, preds[j])
        per_group(preds, outputs)
        advance()
        lp.again(k.p("setp.lt.u32", c0, units))
    k.op("ret")


def row_kernel(op, dt, shape, doc):
    name = "kaio_%s_%s_%s" % (op.name, dt.name, shape)
    ptr_names = ["x", "w", "out"] if op.uses_w else ["x", "out"]
    params = ([(".u64", p) for p in ptr_names] + [(".u32", "rows"), (".u32", "cols"),
              (".u64", "x_stride"), (".u64", "out_stride")] + op.extra_params)
    doc = doc.format(name=name, params=", ".join(p for _, p in params), dt=dt.name)
    k = Kernel(name, doc, params, BLOCK, shared=[],
               keys={"select": "rows", "op": op.name, "dtype": dt.name, "row_bucket": shape})
    ptrs = load_params(k, ptr_names)
    sizes = load_params(k, ["rows", "cols"], ".u32")
    strides = {s: k.rd("ld.param.u64", "[%s]" % s) for s in ("x_stride", "out_stride")}
    extra = load_params(k, [p for _, p in op.extra_params], ".f32")
    cols = sizes["cols"]
    tid = k.r("mov.u32", "%tid.x")
    ctaid = k.r("mov.u32", "%ctaid.x")
    warp = k.r("shr.u32", tid, "5")
    lane_in_warp = k.r("and.b32", tid, "31")
    if shape == "warp":
        # a warp past the last row leaves before any shuffle; no block barrier is used
        row = k.rd("add.u64", k.rd("mul.wide.u32", ctaid, str(WARPS)), k.rd("cvt.u64.u32", warp))
        lane, lanes = lane_in_warp, 32
    else:
        row, lane, lanes = k.rd("cvt.u64.u32", ctaid), tid, BLOCK
    with skip_if(k, k.p("setp.ge.u64", row, k.rd("cvt.u64.u32", sizes["rows"])), "exit"):
        rowp = {}
        for name in ptr_names:
            if name == "w":
                rowp[name] = ptrs[name]
                continue
            stride = strides["x_stride" if name == "x" else "out_stride"]
            rowp[name] = k.rd("add.u64", ptrs[name],
                              k.rd("shl.b64", k.rd("mul.lo.u64", row, stride), str(dt.log2size)))

        k.note("16-byte vectors need aligned bases, strides that keep every row aligned, and cols % 8 / esize == 0"
               .replace("8 / esize", str(dt.vec)))
        anded = k.rd("and.b64", k.rd("cvt.u64.u32", cols), str(dt.vec - 1))
        for name in ptr_names:
            anded = k.rd("or.b64", anded, ptrs[name])
        for s in strides.values():
            anded = k.rd("or.b64", anded, k.rd("shl.b64", s, str(dt.log2size)))
        # the vector path ends in ret, so the scalar path needs no branch around it
        with skip_if(k, k.p("setp.ne.u64", k.rd("and.b64", anded, "15"), "0"), "scalar", uni=True):
            row_path(k, op, dt, shape, True, lane, lanes, warp, lane_in_warp, rowp, cols, extra)
        row_path(k, op, dt, shape, False, lane, lanes, warp, lane_in_warp, rowp, cols, extra)
    k.op("ret")
    return k.text()


ROW_SHAPES = """
_warp: one warp per row, 8 rows per block, grid = ceil(rows / 8); meant for
cols <= 1024 (then x is read once; 256 on the element-access path).  Warps past
the last row exit; only warp shuffles, no block barrier.
_block: one 256-thread block per row, grid = rows; block reduction through
shared memory.  Rows up to 8192 columns (2048 without 16-byte alignment) are
read once, longer rows twice (the second read mostly from L2).
Both handle any cols >= 1.  16-byte accesses when x, out{w} and the row strides
(in bytes) are multiples of 16 and cols is a multiple of {v}; element accesses otherwise.
Nothing outside [row start, row start + cols) of a valid row is touched.
"""


def rmsnorm(dt, shape):
    doc = """
{name}({params})
out[r, c] = x[r, c] * rsqrt(sum_c x[r, c]^2 / cols + eps) * w[c]
x[r, c] at x + (r * x_stride + c) * esize (strides in elements); w: cols contiguous {dt}.
Sum of squares in f32 (up to 4 partial sums per thread, then a tree), 1/sqrt
as rcp.rn(sqrt.rn(.)), out = (x * inv) * w: a few f32 ulp before the final
rounding to {dt} (measured on H100: max rel error 2.5e-7 in f32).
""" + ROW_SHAPES.replace("{w}", ", w").replace("{v}", str(dt.vec))
    return row_kernel(RmsNorm(), dt, shape, doc)


def softmax(dt, shape):
    doc = """
{name}({params})
out[r, c] = exp(x[r, c] - m) / sum_c exp(x[r, c] - m), m = max_c x[r, c].
Online formulation: pass 1 keeps a running (max, sum) per thread, rescaling the
sum when the max grows, then merges them; pass 2 writes exp(x - m) * rcp.rn(sum).
exp is ex2.approx of (x - m) * log2(e): relative error ~1e-7 * (1 + |x - m|)
(measured on H100: max 3.7e-6 in f32 for rows with |x - m| up to ~30).
-inf entries give 0 as long as the row has a finite value; a row of only -inf
gives NaN (0 * inf), as does any +inf or NaN in the row.
""" + ROW_SHAPES.replace("{w}", "").replace("{v}", str(dt.vec))
    return row_kernel(Softmax(), dt, shape, doc)


# --------------------------------------------------------------------------
# Normalisation kernels (norms.ptx): fused residual add + RMSNorm, LayerNorm.
# They walk a row in the chunks row_path uses (same slots, masks and launch
# shapes) but make several passes: a row of one chunk stays in registers
# between passes (x is read once), a longer row is re-read per pass (from L2
# for all but the longest rows), so no row length needs the whole row in
# registers or shared memory.
# --------------------------------------------------------------------------

class RowWalk:
    """The chunks of one row for one thread: slots, masks and pointers."""

    def __init__(self, k, dt, shape, vector, lane, lanes, warp, lane_in_warp, rowp, cols):
        self.k, self.dt, self.shape, self.lane, self.lanes = k, dt, shape, lane, lanes
        self.warp, self.lane_in_warp = warp, lane_in_warp
        self.width = width = dt.vec if vector else 1
        self.slot_bytes = width * dt.esize
        self.nslots = ((1024 if shape == "warp" else 8192) // (lanes * width)) if vector else 8
        self.chunk_units = lanes * self.nslots
        self.units = k.r("shr.u32", cols, str(width.bit_length() - 1)) if vector else cols
        self.ncols = k.f("cvt.rn.f32.u32", cols)
        lane_off = k.rd("mul.wide.u32", lane, str(self.slot_bytes))
        self.bases = {name: k.rd("add.u64", rowp[name], lane_off) for name in rowp}
        self.c0 = k.reg("r")
        self.ptr = {name: k.reg("rd") for name in self.bases}
        # the whole row is one chunk: later passes use the registers
        self.single = k.p("setp.le.u32", self.units, str(self.chunk_units))
        group = max(1, 8 // width)
        self.groups = [list(range(g, min(g + group, self.nslots))) for g in range(0, self.nslots, group)]

    def regs(self):
        return [self.k.regs(self.dt.raw_kind(self.width), self.dt.raw_count(self.width))
                for _ in range(self.nslots)]

    def addr(self, name, j):
        return "%s+%d" % (self.ptr[name], j * self.lanes * self.slot_bytes)

    def chunks(self, hint, body):
        """body(preds) once per chunk; preds[j]: slot j holds a column of the row."""
        k = self.k
        k.op("mov.u32 %s, 0" % self.c0)
        for name in self.ptr:
            k.op("mov.b64 %s, %s" % (self.ptr[name], self.bases[name]))
        with loop(k, hint) as lp:
            left = k.r("sub.s32", k.r("sub.u32", self.units, self.c0), self.lane)
            body([k.p("setp.gt.s32", left, str(j * self.lanes)) for j in range(self.nslots)])
            k.op("add.u32 %s, %s, %d" % (self.c0, self.c0, self.chunk_units))
            for name in self.ptr:
                k.op("add.u64 %s, %s, %d" % (self.ptr[name], self.ptr[name], self.chunk_units * self.slot_bytes))
            lp.again(k.p("setp.lt.u32", self.c0, self.units))

    def load(self, preds, name, regs, fill, also=None):
        """Masked loads; also: a predicate every load needs too (an optional tensor)."""
        k, imm = self.k, fill_imm(self.dt, self.width, fill)
        for j in range(self.nslots):
            for reg in regs[j]:
                k.op("mov.%s %s, %s" % ({"%f": "f32", "%h": "b16"}.get(reg[:2], "b32"), reg, imm))
            pred = preds[j] if also is None else k.p("and.pred", preds[j], also)
            self.dt.load(k, regs[j], self.addr(name, j), pred)

    def reload(self, preds, name, regs, fill):
        with skip_if(self.k, self.single, "keep"):
            self.load(preds, name, regs, fill)

    def each_group(self, preds, emit):
        # as row_path: past the first group whose first slot is out of the row,
        # the rest of the chunk is skipped
        with block(self.k, "skip") as chunk:
            for gi, slots in enumerate(self.groups):
                chunk.exit_if("!" + preds[slots[0]])
                emit(gi, slots)

    def values(self, regs, j):
        return self.dt.to_f32(self.k, regs[j], self.width)


class _Combine:
    def __init__(self, opcode):
        self.opcode = opcode

    def combine(self, k, a, b):
        return [k.f(self.opcode, a[0], b[0])]


def row_total(walk, hint, prepare, values, kind, buf):
    """One pass over the row reduced to one f32 every thread of the row gets:
    kind "sum" (of the values), "sumsq" or "max" (of |value|).  prepare(preds)
    loads what the pass reads; values(slots, preds) gives a group's terms."""
    k = walk.k
    accs = [k.f("mov.f32", ZERO) for _ in range(min(len(walk.groups), 4))]

    def body(preds):
        prepare(preds)

        def emit(gi, slots):
            a = accs[gi % len(accs)]
            for v in values(slots, preds):
                if kind == "sumsq":
                    k.op("fma.rn.f32 %s, %s, %s, %s" % (a, v, v, a))
                elif kind == "sum":
                    k.op("add.rn.f32 %s, %s, %s" % (a, a, v))
                else:
                    k.op("max.f32 %s, %s, %s" % (a, a, k.f("abs.f32", v)))
        walk.each_group(preds, emit)
    walk.chunks(hint, body)
    opcode = "max.f32" if kind == "max" else "add.rn.f32"
    while len(accs) > 1:
        accs = [k.f(opcode, a, b) for a, b in zip(accs[0::2], accs[1::2])] + accs[len(accs) // 2 * 2:]
    return reduce_rows(k, _Combine(opcode), accs, walk.shape, walk.warp, walk.lane_in_warp, buf)[0]


def inv_rms(walk, total, eps, prepare, values):
    """1 / sqrt(total / cols + eps), total the f32 sum of squares of the row's
    values.  When that sum overflowed (|values| beyond ~1e19) with every value
    finite, the sum is redone on values * 2^-e, e the exponent of the largest
    |value| (exact scaling), and eps dropped (it is below 2^-60 of the mean
    square then).  A row holding inf or NaN keeps the first result."""
    k = walk.k
    inv = k.f("rcp.rn.f32", k.f("sqrt.rn.f32", k.f("add.rn.f32", k.f("div.rn.f32", total, walk.ncols), eps)))
    with skip_if(k, k.p("setp.ne.f32", total, INF), "in_range", uni=True):
        top = row_total(walk, "max", prepare, values, "max", "kaio_partials_max")
        expo = k.r("and.b32", k.r("shr.u32", k.r("mov.b32", top), "23"), "255")
        sbits = k.r("max.s32", k.r("sub.s32", "254", expo), "1")
        scale = k.f("mov.b32", k.r("shl.b32", sbits, "23"))
        total2 = row_total(walk, "scaled", prepare,
                           lambda slots, preds: [k.f("mul.rn.f32", v, scale) for v in values(slots, preds)],
                           "sumsq", "kaio_partials_scaled")
        inv2 = k.f("mul.rn.f32", scale, k.f("rcp.rn.f32", k.f("sqrt.rn.f32", k.f("div.rn.f32", total2, walk.ncols))))
        k.op("@%s mov.f32 %s, %s" % (k.p("setp.lt.f32", top, INF), inv, inv2))
    return inv


def mov_regs(k, dsts, srcs):
    for d, s in zip(dsts, srcs):
        k.op("mov.%s %s, %s" % ({"%f": "f32", "%h": "b16"}.get(d[:2], "b32"), d, s))


def add_rmsnorm_path(walk, params):
    k, dt = walk.k, walk.dt
    res, xr = walk.regs(), walk.regs()

    def add(preds):
        # residual + x, rounded once to dt and stored; the rounded value is
        # what res then holds and what the norm sees
        walk.load(preds, "x", xr, 0.0)
        walk.load(preds, "res", res, 0.0)

    def added(slots, preds):
        vals = []
        for j in slots:
            s = [k.f("add.rn.f32", a, b) for a, b in zip(walk.values(res, j), walk.values(xr, j))]
            packed = pack(dt, k, s)
            store_raw(dt, k, walk.addr("res", j), packed, preds[j])
            mov_regs(k, res[j], packed)
            vals += walk.values(res, j)
        return vals
    total = row_total(walk, "add", add, added, "sumsq", "kaio_partials")
    inv = inv_rms(walk, total, params["eps"], lambda preds: walk.reload(preds, "res", res, 0.0),
                  lambda slots, preds: [v for j in slots for v in walk.values(res, j)])

    wr = walk.regs()

    def out(preds):
        walk.reload(preds, "res", res, 0.0)
        walk.load(preds, "w", wr, 0.0)

        def emit(gi, slots):
            for j in slots:
                ys = [k.f("mul.rn.f32", k.f("mul.rn.f32", r, inv), w)
                      for r, w in zip(walk.values(res, j), walk.values(wr, j))]
                dt.store(k, walk.addr("out", j), ys, preds[j])
        walk.each_group(preds, emit)
    walk.chunks("out", out)
    k.op("ret")


def layernorm_path(walk, params, has_w, has_b):
    k, dt = walk.k, walk.dt
    xr = walk.regs()
    total = row_total(walk, "sum", lambda preds: walk.load(preds, "x", xr, 0.0),
                      lambda slots, preds: [v for j in slots for v in walk.values(xr, j)],
                      "sum", "kaio_partials")
    mean = k.f("div.rn.f32", total, walk.ncols)

    def deviations(slots, preds):
        # masked slots read 0, whose deviation is -mean: zero them
        return [k.f("selp.f32", k.f("sub.rn.f32", v, mean), ZERO, preds[j])
                for j in slots for v in walk.values(xr, j)]
    reload_x = lambda preds: walk.reload(preds, "x", xr, 0.0)
    sq = row_total(walk, "var", reload_x, deviations, "sumsq", "kaio_partials_var")
    inv = inv_rms(walk, sq, params["eps"], reload_x, deviations)

    wr, br = walk.regs(), walk.regs()

    def out(preds):
        walk.reload(preds, "x", xr, 0.0)
        # absent weight reads 1, absent bias -0 (x + -0 is x, -0 included)
        walk.load(preds, "w", wr, 1.0, has_w)
        walk.load(preds, "b", br, -0.0, has_b)

        def emit(gi, slots):
            for j in slots:
                ys = [k.f("add.rn.f32", k.f("mul.rn.f32", k.f("mul.rn.f32", k.f("sub.rn.f32", v, mean), inv), w), b)
                      for v, w, b in zip(walk.values(xr, j), walk.values(wr, j), walk.values(br, j))]
                dt.store(k, walk.addr("out", j), ys, preds[j])
        walk.each_group(preds, emit)
    walk.chunks("out", out)
    k.op("ret")


def norm_kernel(op, dt, shape, ptr_names, strided, doc):
    name = "kaio_%s_%s_%s" % (op, dt.name, shape)
    params = ([(".u64", p) for p in ptr_names] + [(".u32", "rows"), (".u32", "cols")] +
              [(".u64", s + "_stride") for s in strided] + [(".f32", "eps")])
    doc = doc.format(name=name, params=", ".join(p for _, p in params), dt=dt.name)
    k = Kernel(name, doc, params, BLOCK, shared=[],
               keys={"select": "rows", "op": op, "dtype": dt.name, "row_bucket": shape})
    ptrs = load_params(k, ptr_names)
    sizes = load_params(k, ["rows", "cols"], ".u32")
    strides = {s: k.rd("ld.param.u64", "[%s_stride]" % s) for s in strided}
    extra = load_params(k, ["eps"], ".f32")
    present = {}
    for name_ in ("w", "b"):
        if op == "layernorm":
            present[name_] = k.p("setp.ne.u64", k.rd("ld.param.u64", "[%s]" % name_), "0")
    cols = sizes["cols"]
    tid = k.r("mov.u32", "%tid.x")
    ctaid = k.r("mov.u32", "%ctaid.x")
    warp = k.r("shr.u32", tid, "5")
    lane_in_warp = k.r("and.b32", tid, "31")
    if shape == "warp":
        row = k.rd("add.u64", k.rd("mul.wide.u32", ctaid, str(WARPS)), k.rd("cvt.u64.u32", warp))
        lane, lanes = lane_in_warp, 32
    else:
        row, lane, lanes = k.rd("cvt.u64.u32", ctaid), tid, BLOCK
    with skip_if(k, k.p("setp.ge.u64", row, k.rd("cvt.u64.u32", sizes["rows"])), "exit"):
        rowp = {}
        for p in ptr_names:
            rowp[p] = ptrs[p] if p not in strided else k.rd(
                "add.u64", ptrs[p], k.rd("shl.b64", k.rd("mul.lo.u64", row, strides[p]), str(dt.log2size)))
        k.note("16-byte vectors need aligned bases, strides that keep every row aligned, and cols %% %d == 0" % dt.vec)
        anded = k.rd("and.b64", k.rd("cvt.u64.u32", cols), str(dt.vec - 1))
        for p in ptr_names:
            anded = k.rd("or.b64", anded, ptrs[p])
        for s in strides.values():
            anded = k.rd("or.b64", anded, k.rd("shl.b64", s, str(dt.log2size)))
        for vector in (True, False):
            def path():
                walk = RowWalk(k, dt, shape, vector, lane, lanes, warp, lane_in_warp, rowp, cols)
                if op == "add_rmsnorm":
                    add_rmsnorm_path(walk, extra)
                else:
                    layernorm_path(walk, extra, present["w"], present["b"])
            if vector:   # the vector path ends in ret
                with skip_if(k, k.p("setp.ne.u64", k.rd("and.b64", anded, "15"), "0"), "scalar", uni=True):
                    path()
            else:
                path()
    k.op("ret")
    return k.text()


NORM_SHAPES = ROW_SHAPES.replace(
    "read once, longer rows twice (the second read mostly from L2).",
    "read once; longer rows once per pass (mostly from L2).")


def add_rmsnorm(dt, shape):
    doc = """
{name}({params})
res[r, c] = round_{dt}(res[r, c] + x[r, c])  (stored: the residual is updated in place)
out[r, c] = res[r, c] * rsqrt(sum_c res[r, c]^2 / cols + eps) * w[c]
The norm reads the ROUNDED updated residual, as a framework that stores it
would.  x, res, out at base + (r * stride + c) * esize; w: cols contiguous {dt}.
Statistics as kaio_rmsnorm (f32, up to 4 partial sums per thread, then a
tree; rcp.rn(sqrt.rn(.))); a sum of squares that overflows f32 with finite
values is redone on the values scaled by a power of two.
""" + NORM_SHAPES.replace("{w}", ", res, w").replace("{v}", str(dt.vec))
    return norm_kernel("add_rmsnorm", dt, shape, ["x", "res", "w", "out"], ["x", "res", "out"], doc)


def layernorm(dt, shape):
    doc = """
{name}({params})
out[r, c] = (x[r, c] - mean) * rsqrt(var + eps) * w[c] + b[c],
mean = sum_c x[r, c] / cols, var = sum_c (x[r, c] - mean)^2 / cols (biased).
Two passes for the statistics (the mean, then squares of deviations from it),
so a large common offset costs no precision; f32 math, one rounding to {dt}.
w or b may be 0 (absent): weight 1, bias none.
""" + NORM_SHAPES.replace("{w}", ", w, b").replace("{v}", str(dt.vec))
    return norm_kernel("layernorm", dt, shape, ["x", "w", "b", "out"], ["x", "out"], doc)


# --------------------------------------------------------------------------

def generate():
    elementwise = [HEADER]
    for family in (silu_gate, gelu_erf, gelu_tanh):
        for dt in DTYPES:
            elementwise.append("\n" + family(dt))
    rows = [HEADER]
    for family in (rmsnorm, softmax):
        for dt in DTYPES:
            for shape in ("warp", "block"):
                rows.append("\n" + family(dt, shape))
    norms = [HEADER]
    for family in (add_rmsnorm, layernorm):
        for dt in DTYPES:
            for shape in ("warp", "block"):
                norms.append("\n" + family(dt, shape))
    out = {"elementwise.ptx": "".join(elementwise), "rows.ptx": "".join(rows), "norms.ptx": "".join(norms)}
    # every kernel again as an sm_90 dependent launch (grid_dep.twin_module): the host runs
    # these where it can, so a decode step's norms and gates start in their neighbours' tails
    out.update({name[:-len(".ptx")] + "_sm90.ptx": twin_module(text) for name, text in list(out.items())})
    return out


def print_refit():
    for name, table in zip(("ERF_P", "ERF_Q"), refit_erf_tables()):
        print(name, "=", [float.hex(c) for c in table])


if __name__ == "__main__":
    sys.exit(cli.main(__file__, __doc__, generate,
                      {"--refit": ("print re-derived gelu_erf tables", print_refit)}))
