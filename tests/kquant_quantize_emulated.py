#!/usr/bin/env python3
"""The k-quant quantize kernels (kquant_quantize.ptx, built by
ptx/gen_kquant.py) run on the host against the C++ reference, byte for byte.

    python3 tests/kquant_quantize_emulated.py build/ptx/kquant_quantize.ptx KQUANT_REF_TOOL [--quick]

KQUANT_REF_TOOL is tests/kquant_ref_tool (built by meson): it writes the
test inputs (tests/support/kquant_inputs: every distribution, the edges of
the f32 and f16 ranges included) and the reference's bytes. Each kernel, in
both modes, runs one CTA per distribution and input dtype (f32; f16 and
bf16 widened as the kernel does) through a small PTX translator, and every
block must equal the reference's.

The translator turns each kernel into a Python generator per thread (a
bar.sync is a yield). It gives the GPU's f32 semantics as far as these
kernels can tell them apart: every op rounded once to f32 (Python doubles
rounded with struct: double rounding is harmless for + - * / sqrt of f32
values), subnormals kept (no .ftz), overflow to infinity, NaN results with
the GPU's canonical bits 0x7FFFFFFF (f16 0x7FFF), min/max returning the
number over NaN, saturating float-to-int conversions with NaN to 0, and
ordered / unordered setp. Only the instructions the quantize kernels use
are known; anything else raises NotImplementedError. It checks the kernels'
arithmetic at the edges without a GPU; GpuKquant checks the hardware.
"""
import math
import os
import re
import struct
import subprocess
import sys
import tempfile

M32 = (1 << 32) - 1
M64 = (1 << 64) - 1
F32 = struct.Struct("<f")
U32 = struct.Struct("<I")
F16 = struct.Struct("<e")
INF = float("inf")
NAN = float("nan")


def r32(x):
    """x rounded to f32 (round to nearest even; overflow to infinity)."""
    try:
        return F32.unpack(F32.pack(x))[0]
    except OverflowError:
        return math.copysign(INF, x)


def bits(x):
    return 0x7FFFFFFF if x != x else U32.unpack(F32.pack(x))[0]


def fbits(u):
    return F32.unpack(U32.pack(u & M32))[0]


def fdiv(a, b):
    if b == 0.0:
        if a != a or a == 0.0:
            return NAN
        return math.copysign(INF, a) * math.copysign(1.0, b)
    return r32(a / b)


def fsqrt(a):
    if a != a or a < 0.0:
        return NAN
    return r32(math.sqrt(a))


def fmin(a, b):
    if a != a:
        return b
    if b != b:
        return a
    if a == b:
        return a if math.copysign(1.0, a) < 0 else b
    return a if a < b else b


def fmax(a, b):
    if a != a:
        return b
    if b != b:
        return a
    if a == b:
        return b if math.copysign(1.0, a) < 0 else a
    return a if a > b else b


def ftrunc(a):
    if a != a or a in (INF, -INF):
        return a
    return math.copysign(float(math.trunc(a)), a)


def f2i(a, rne):
    """cvt.rni / cvt.rzi .s32.f32: saturating, NaN to 0."""
    if a != a:
        return 0
    if a >= 2147483647.0:
        return 0x7FFFFFFF
    if a <= -2147483648.0:
        return 0x80000000
    return (round(a) if rne else math.trunc(a)) & M32


def s32(v):
    return v - ((v & 0x80000000) << 1)


def f2h(x):
    if x != x:
        return 0x7FFF
    try:
        return struct.unpack("<H", F16.pack(x))[0]
    except OverflowError:
        return 0xFC00 if x < 0 else 0x7C00


def h2f(h):
    return F16.unpack(struct.pack("<H", h & 0xFFFF))[0]


HELPERS = dict(r32=r32, bits=bits, fbits=fbits, fdiv=fdiv, fsqrt=fsqrt, fmin=fmin, fmax=fmax,
               ftrunc=ftrunc, f2i=f2i, s32=s32, f2h=f2h, h2f=h2f, M32=M32, M64=M64, F32=F32,
               U32=U32, math=math, struct=struct, inf=INF, nan=NAN)


# ------------------------------------------------------------ translator ----

def reg(a):
    return "v_" + a.lstrip("%").replace(".", "_")


class Translator:
    def __init__(self, text, name):
        i = text.index(".entry %s(" % name)
        j = text.index("\n}\n", i)
        head, body = text[i:j].split("{", 1)
        self.params = re.findall(r"\.param \.\w+ (\w+)", head)
        self.shared, off = {}, 0
        for m in re.finditer(r"\.shared \.align (\d+) \.(\w+) (\w+)\[(\d+)\]", body):
            align, ty, sym, count = int(m.group(1)), m.group(2), m.group(3), int(m.group(4))
            off = (off + align - 1) // align * align
            self.shared[sym] = off
            off += count * (4 if ty in ("f32", "b32", "u32") else 1)
        self.shared_bytes = off
        self.lines = []
        for line in body.split("\n"):
            line = line.strip()
            if not line or line.startswith("//") or line.startswith(".") or line == "}":
                continue
            self.lines.append(line.rstrip(";"))

    def val(self, a, kind):
        """Python expression of operand a as kind: 'f' float, 'i' 32-bit int,
        'l' 64-bit int, 'p' bool."""
        if a.startswith("!"):
            return "(not %s)" % self.val(a[1:], kind)
        if a.startswith("%"):
            if a == "%tid.x":
                return "tid"
            if a == "%ctaid.x":
                return "ctaid"
            return reg(a)
        if a.startswith("0f"):
            return repr(fbits(int(a[2:], 16)))
        if a in self.shared:
            return str(self.shared[a])
        v = int(a, 0)
        return repr(float(v)) if kind == "f" else str(v & (M64 if kind == "l" else M32))

    def addr(self, a):
        m = re.match(r"\[(%\w+)(?:\+(-?\d+))?\]$", a)
        return "(%s + %d)" % (reg(m.group(1)), int(m.group(2) or 0))

    def stmt(self, op, args):
        V = self.val
        d = args[0] if args else None
        parts = op.split(".")
        if op.startswith("ld.param"):
            return "%s = params[%r]" % (reg(d), args[1].strip("[]"))
        if op == "cvta.to.global.u64":
            return "%s = %s" % (reg(d), V(args[1], "l"))
        if op in ("mov.u32", "mov.b16"):
            return "%s = %s" % (reg(d), V(args[1], "i"))
        if op == "mov.f32":
            return "%s = %s" % (reg(d), V(args[1], "f"))
        if op == "mov.b32":
            s = args[1]
            if d.startswith("{"):
                lo, hi = [reg(x.strip()) for x in d.strip("{}").split(",")]
                return "%s = %s & 0xFFFF; %s = %s >> 16" % (lo, V(s, "i"), hi, V(s, "i"))
            if s.startswith("{"):
                lo, hi = [x.strip() for x in s.strip("{}").split(",")]
                return "%s = %s | (%s << 16)" % (reg(d), V(lo, "i"), V(hi, "i"))
            if d.startswith("%f") and s.startswith("%r"):
                return "%s = fbits(%s)" % (reg(d), V(s, "i"))
            if d.startswith("%r") and s.startswith("%f"):
                return "%s = bits(%s)" % (reg(d), V(s, "f"))
            return "%s = %s" % (reg(d), V(s, "i"))
        if op in ("add.u32", "add.s32", "sub.u32", "sub.s32", "mul.lo.u32"):
            sym = {"add": "+", "sub": "-", "mul": "*"}[parts[0]]
            return "%s = (%s %s %s) & M32" % (reg(d), V(args[1], "i"), sym, V(args[2], "i"))
        if op == "mad.lo.u32":
            return "%s = (%s * %s + %s) & M32" % (reg(d), V(args[1], "i"), V(args[2], "i"), V(args[3], "i"))
        if op in ("and.b32", "or.b32"):
            sym = "&" if parts[0] == "and" else "|"
            return "%s = %s %s %s" % (reg(d), V(args[1], "i"), sym, V(args[2], "i"))
        if op == "shl.b32":
            return "%s = (%s << %s) & M32" % (reg(d), V(args[1], "i"), V(args[2], "i"))
        if op == "shr.u32":
            return "%s = %s >> %s" % (reg(d), V(args[1], "i"), V(args[2], "i"))
        if op in ("div.u32", "rem.u32"):
            sym = "//" if parts[0] == "div" else "%"
            return "%s = %s %s %s" % (reg(d), V(args[1], "i"), sym, V(args[2], "i"))
        if op == "min.u32":
            return "%s = min(%s, %s)" % (reg(d), V(args[1], "i"), V(args[2], "i"))
        if op in ("min.s32", "max.s32"):
            return "%s = %s(s32(%s), s32(%s)) & M32" % (reg(d), parts[0], V(args[1], "i"), V(args[2], "i"))
        if op == "mul.wide.u32":
            return "%s = %s * %s" % (reg(d), V(args[1], "i"), V(args[2], "i"))
        if op == "mad.wide.u32":
            return "%s = (%s * %s + %s) & M64" % (reg(d), V(args[1], "i"), V(args[2], "i"), V(args[3], "l"))
        if op == "add.u64":
            return "%s = (%s + %s) & M64" % (reg(d), V(args[1], "l"), V(args[2], "l"))
        if op == "mad.lo.u64":
            return "%s = (%s * %s + %s) & M64" % (reg(d), V(args[1], "l"), V(args[2], "l"), V(args[3], "l"))
        if op == "cvt.u64.u32":
            return "%s = %s" % (reg(d), V(args[1], "i"))
        if op == "cvt.u16.u32":
            return "%s = %s & 0xFFFF" % (reg(d), V(args[1], "i"))
        if op.startswith("setp."):
            cmp, ty = parts[1], parts[2]
            if ty == "f32":
                a, b = V(args[1], "f"), V(args[2], "f")
                e = {"eq": "%s == %s", "lt": "%s < %s", "le": "%s <= %s", "gt": "%s > %s",
                     "ge": "%s >= %s", "neu": "not (%s == %s)",
                     "num": "(%s == %s) and (%s == %s)"}[cmp]
                return "%s = %s" % (reg(d), e % ((a, a, b, b) if cmp == "num" else (a, b)))
            kind = "l" if ty == "u64" else "i"
            a, b = V(args[1], kind), V(args[2], kind)
            if ty == "s32":
                a, b = "s32(%s)" % a, "s32(%s)" % b
            sym = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}[cmp]
            return "%s = %s %s %s" % (reg(d), a, sym, b)
        if op in ("and.pred", "or.pred"):
            return "%s = %s %s %s" % (reg(d), V(args[1], "p"), parts[0], V(args[2], "p"))
        if op.startswith("selp."):
            kind = "f" if parts[1] == "f32" else "i"
            return "%s = %s if %s else %s" % (reg(d), V(args[1], kind), V(args[3], "p"), V(args[2], kind))
        if op in ("add.rn.f32", "sub.rn.f32", "mul.rn.f32"):
            sym = {"add": "+", "sub": "-", "mul": "*"}[parts[0]]
            return "%s = r32(%s %s %s)" % (reg(d), V(args[1], "f"), sym, V(args[2], "f"))
        if op == "div.rn.f32":
            return "%s = fdiv(%s, %s)" % (reg(d), V(args[1], "f"), V(args[2], "f"))
        if op == "sqrt.rn.f32":
            return "%s = fsqrt(%s)" % (reg(d), V(args[1], "f"))
        if op == "abs.f32":
            return "%s = abs(%s)" % (reg(d), V(args[1], "f"))
        if op == "neg.f32":
            return "%s = -%s" % (reg(d), V(args[1], "f"))
        if op in ("min.f32", "max.f32"):
            return "%s = f%s(%s, %s)" % (reg(d), parts[0], V(args[1], "f"), V(args[2], "f"))
        if op == "copysign.f32":   # d = b with the sign of a
            return "%s = math.copysign(%s, %s)" % (reg(d), V(args[2], "f"), V(args[1], "f"))
        if op == "cvt.rzi.f32.f32":
            return "%s = ftrunc(%s)" % (reg(d), V(args[1], "f"))
        if op == "cvt.rn.f32.s32":
            return "%s = r32(float(s32(%s)))" % (reg(d), V(args[1], "i"))
        if op in ("cvt.rni.s32.f32", "cvt.rzi.s32.f32"):
            return "%s = f2i(%s, %s)" % (reg(d), V(args[1], "f"), op.startswith("cvt.rni"))
        if op == "cvt.f32.f16":
            return "%s = h2f(%s)" % (reg(d), V(args[1], "i"))
        if op == "cvt.rn.f16.f32":
            return "%s = f2h(%s)" % (reg(d), V(args[1], "f"))
        if op.startswith("ld.global.v4."):
            regs = [x.strip() for x in d.strip("{}").split(",")]
            a = self.addr(args[1])
            conv = "F32.unpack_from(mem, _a + %d)[0]" if parts[3] == "f32" else "U32.unpack_from(mem, _a + %d)[0]"
            return "_a = %s; assert _a %% 16 == 0; " % a + "; ".join(
                "%s = %s" % (reg(r), conv % (4 * i)) for i, r in enumerate(regs))
        if op.startswith("st.global."):
            a, s = self.addr(args[0]), args[1]
            w = parts[-1]
            if w == "b8":
                return "mem[%s] = %s & 0xFF" % (a, V(s, "i"))
            if w == "b16":
                return "_a = %s; assert _a %% 2 == 0; mem[_a:_a + 2] = (%s & 0xFFFF).to_bytes(2, 'little')" % (a, V(s, "i"))
            if w == "b32" and parts[2] == "v4":
                regs = [x.strip() for x in s.strip("{}").split(",")]
                return "_a = %s; assert _a %% 16 == 0; " % a + "; ".join(
                    "U32.pack_into(mem, _a + %d, %s)" % (4 * i, V(r, "i")) for i, r in enumerate(regs))
            if w == "b32":
                return "_a = %s; assert _a %% 4 == 0; U32.pack_into(mem, _a, %s)" % (a, V(s, "i"))
        if op.startswith("ld.shared."):
            a, w = self.addr(args[1]), parts[-1]
            if w == "f32":
                return "%s = F32.unpack_from(smem, %s)[0]" % (reg(d), a)
            if w == "u8":
                return "%s = smem[%s]" % (reg(d), a)
            if w == "b16":
                return "%s = int.from_bytes(smem[%s:%s + 2], 'little')" % (reg(d), a, a)
        if op.startswith("st.shared."):
            a, s, w = self.addr(args[0]), args[1], parts[-1]
            if w == "f32":
                return "U32.pack_into(smem, %s, bits(%s))" % (a, V(s, "f"))
            if w == "b32":
                return "U32.pack_into(smem, %s, %s)" % (a, V(s, "i"))
            if w == "b16":
                return "_a = %s; smem[_a:_a + 2] = (%s & 0xFFFF).to_bytes(2, 'little')" % (a, V(s, "i"))
        raise NotImplementedError(op)

    def python(self, fname):
        # basic blocks: a label starts one, a branch or ret ends one
        blocks, labels, cur = [], {}, []
        for line in self.lines:
            if line.endswith(":"):
                if cur:
                    blocks.append(cur)
                    cur = []
                labels[line[:-1]] = len(blocks)
                continue
            cur.append(line)
            if re.match(r"(@!?%p\d+ )?(bra|bra\.uni|ret)\b", line):
                blocks.append(cur)
                cur = []
        if cur:
            blocks.append(cur)
        out = ["def %s(params, mem, smem, tid, ctaid):" % fname, "    pc = 0", "    while True:"]
        for bi, block in enumerate(blocks):
            out.append("        if pc == %d:" % bi)
            ends = False
            for line in block:
                pred = None
                if line.startswith("@"):
                    p, line = line.split(" ", 1)
                    pred = self.val(p[1:], "p")
                op, _, rest = line.partition(" ")
                args = [a.strip() for a in re.findall(r"\s*(\{[^}]*\}|\[[^\]]*\]|[^,]+)", rest)]
                args = [a for a in args if a]
                if op in ("bra", "bra.uni"):
                    t = labels[args[0]]
                    if pred:
                        out.append("            pc = %d if %s else %d" % (t, pred, bi + 1))
                    else:
                        out.append("            pc = %d" % t)
                    if t <= bi:
                        out.append("            continue")
                    ends = True
                elif op == "ret":
                    assert pred is None, "predicated ret"
                    out.append("            return")
                    ends = True
                elif op == "bar.sync":
                    out.append("            yield")
                else:
                    s = self.stmt(op, args)
                    out.append("            " + ("if %s: %s" % (pred, s) if pred else s))
            if not ends:
                out.append("            pc = %d" % (bi + 1))
        out.append("        raise RuntimeError('ran past the last block')")
        return "\n".join(out) + "\n"


def compile_kernel(text, name):
    t = Translator(text, name)
    env = dict(HELPERS)
    exec(compile(t.python("kernel"), name, "exec"), env)
    return env["kernel"], t.params, t.shared_bytes


def launch(kern, params, mem, ctas, block=256, shared_bytes=0):
    """Runs ctas CTAs of block threads in turn; a bar.sync is a yield, and
    every thread of the CTA must reach it (or all finish) together."""
    for cta in range(ctas):
        smem = bytearray(b"\xa5") * shared_bytes
        threads = [kern(params, mem, smem, t, cta) for t in range(block)]
        while threads:
            done = 0
            for th in threads:
                try:
                    next(th)
                except StopIteration:
                    done += 1
            assert done in (0, len(threads)), "bar.sync reached by %d of %d threads" % (len(threads) - done, len(threads))
            if done:
                break


# ----------------------------------------------------------------- tests ----

# format: (block elements, block bytes, threads per block)
FORMATS = {"q8_0": (32, 34, 1), "q4_k": (256, 144, 8), "q5_k": (256, 176, 8), "q6_k": (256, 210, 16)}
DTYPES = {"f32": 1, "f16": 2, "bf16": 3}


def to_dtype(values, dtype):
    """(storage bytes, the values the kernel sees) for f32, f16 or bf16."""
    if dtype == "f32":
        return b"".join(F32.pack(v) for v in values), list(values)
    out, seen = bytearray(), []
    for v in values:
        if dtype == "f16":
            h = f2h(v)
            seen.append(h2f(h))
        else:
            u = bits(v)
            h = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF   # RNE (finite values)
            seen.append(fbits(h << 16))
        out += struct.pack("<H", h)
    return bytes(out), seen


def run_case(text, tool, tmp, fmt, mode, dist, dtype, seed, cache):
    be, bb, groups = FORMATS[fmt]
    blocks = 256 // groups     # one CTA of 256 threads
    n = blocks * be
    name = "kaio_kq_quantize_%s_%s" % (fmt, mode)
    if name not in cache:
        cache[name] = compile_kernel(text, name)
    kern, pnames, shared_bytes = cache[name]
    rng = "f16" if dtype == "f16" else "f32"
    inp = os.path.join(tmp, "x.f32")
    subprocess.run([tool, "inputs", dist, rng, str(n), str(seed), inp], check=True)
    with open(inp, "rb") as f:
        raw = f.read()
    x = [F32.unpack_from(raw, 4 * i)[0] for i in range(n)]
    xb, seen = to_dtype(x, dtype)
    with open(inp, "wb") as f:
        f.write(b"".join(F32.pack(v) for v in seen))
    ref = os.path.join(tmp, "q.bin")
    subprocess.run([tool, "quantize", fmt, mode, inp, ref], check=True)
    with open(ref, "rb") as f:
        want = f.read()
    qbytes = blocks * bb
    xoff, qoff = 0, (len(xb) + 15) // 16 * 16
    mem = bytearray(xb) + bytearray(qoff - len(xb)) + bytearray(b"\x5a") * (qbytes + 16)
    params = dict(zip(pnames, [xoff, qoff, blocks, blocks, n, qbytes, DTYPES[dtype]]))
    launch(kern, params, mem, 1, shared_bytes=shared_bytes)
    got = bytes(mem[qoff:qoff + qbytes])
    bad = [b for b in range(blocks) if got[b * bb:(b + 1) * bb] != want[b * bb:(b + 1) * bb]]
    if mem[qoff + qbytes:] != bytearray(b"\x5a") * 16:
        bad.append("past the end")
    return bad, got, want, seen


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    text = open(sys.argv[1]).read()
    tool = sys.argv[2]
    quick = "--quick" in sys.argv[3:]
    dists = subprocess.run([tool, "dists"], check=True, capture_output=True, text=True).stdout.split()
    edges = dists[dists.index("signed_zeros"):]
    cache, failures, cases = {}, 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in FORMATS:
            for mode in ("ggml", "candle"):
                # every distribution from f32; the edges also from f16 and bf16
                plan = [(d, "f32") for d in (edges if quick else dists)]
                plan += [(d, dt) for dt in ("f16", "bf16") for d in edges]
                for dist, dtype in plan:
                    cases += 1
                    bad, got, want, seen = run_case(text, tool, tmp, fmt, mode, dist, dtype, 7, cache)
                    if bad:
                        failures += 1
                        be, bb, _ = FORMATS[fmt]
                        b = bad[0]
                        print("%s %s %s from %s: %d block(s) differ, first %s" % (fmt, mode, dist, dtype, len(bad), b))
                        if isinstance(b, int):
                            print("  want %s\n  got  %s\n  input %s" % (
                                want[b * bb:(b + 1) * bb].hex(), got[b * bb:(b + 1) * bb].hex(),
                                " ".join("%.9g" % v for v in seen[b * be:(b + 1) * be])))
                    sys.stdout.flush()
    print("%d of %d case(s) differ" % (failures, cases))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
