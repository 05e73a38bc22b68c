"""A small PTX interpreter for host-side checks of warp-level kernels.

It runs a CTA (Cta, or launch() for a grid) over a flat bytearray standing
for device memory (addresses are offsets into it) and a bytearray of shared
memory. Lanes may diverge (each step runs the lanes at the lowest pc, so
structured branches reconverge), and warps run in turn until they exit,
reach a bar.sync (named, with a thread count) or wait on an mbarrier phase
that has not completed; bulk copies land at once and complete their bytes.
Only the instructions the kaio_kq_mma_*, kaio_kq_stream_* and
kaio_int4_gemv_* kernels use are known; anything else raises
NotImplementedError.  Grids may have three dimensions (ctaid.y, ctaid.z). f32 arithmetic is
rounded per operation (Python doubles rounded to f32; fma rounds once), and
mma.sync sums its products exactly and rounds once, which is not how a
tensor core accumulates: a check built on this gives the fragment layouts,
the decoding and the protocol, not the hardware's rounding. Loads check
alignment and bounds.
"""
import re, struct, math

M32 = (1 << 32) - 1
M64 = (1 << 64) - 1
# f16x2 / bf16x2 results must be exact (the k-quant kernels only move exact
# integers through them); a test of kernels that round there sets it False
EXACT_HALF = True


def b2f(x):
    return struct.unpack("<f", struct.pack("<I", x & M32))[0]


def f2b(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def h2f(x):
    return struct.unpack("<e", struct.pack("<H", x & 0xFFFF))[0]


def f2h(x):
    try:
        return struct.unpack("<H", struct.pack("<e", x))[0]
    except OverflowError:        # past f16's range: cvt.rn gives infinity
        return 0xFC00 if x < 0 else 0x7C00


def bf2f(x):
    return struct.unpack("<f", struct.pack("<I", (x & 0xFFFF) << 16))[0]


def d2bf(x):
    """A double rounded once to bf16 bits (to nearest even; finite, normal range)."""
    if x == 0:
        return 0x8000 if math.copysign(1, x) < 0 else 0
    m, e = math.frexp(abs(x))             # abs(x) = m 2^e, m in [0.5, 1)
    q = m * 256                           # 8 significant bits
    r = math.floor(q)
    if q - r > 0.5 or (q - r == 0.5 and r % 2):
        r += 1
    return (f2b(math.ldexp(r, e - 8)) >> 16) | (0x8000 if x < 0 else 0)


def parse_kernel(text, name):
    i = text.index(".entry %s(" % name)
    j = text.index("\n}\n", i)
    body = text[i:j].split("{", 1)[1]
    instrs, labels = [], {}
    for line in body.split("\n"):
        line = line.strip()
        if not line or line.startswith("//") or line.startswith(".reg") or line.startswith(".shared"):
            continue
        if line.endswith(":"):
            labels[line[:-1]] = len(instrs)
            continue
        line = line.rstrip(";")
        pred = None
        if line.startswith("@"):
            p, line = line.split(" ", 1)
            pred = (p[1] == "!", p.lstrip("@!"))
        op, _, rest = line.partition(" ")
        args = [a.strip() for a in re.findall(r"\s*(\{[^}]*\}|\[[^\]]*\]|[^,]+)", rest)]
        args = [a for a in args if a]
        instrs.append((pred, op, args))
    return instrs, labels


def regs_of(a):
    return [x.strip() for x in a.strip("{}").split(",")]


# shared-memory symbols the kernels address (their offsets in a CTA's window)
SHARED_SYMBOLS = {"kq_red": 0, "kaio_kq_stream_ring": 0, "kaio_int4_red": 0}


class Warp:
    def __init__(self, kern, params, mem, smem, ctaid, warp, nctaid, cta):
        self.instrs, self.labels = kern
        self.params, self.mem, self.smem = params, mem, smem
        self.R = {}
        self.tid = [l + 32 * warp for l in range(32)]
        self.ctaid, self.nctaid, self.cta = ctaid, nctaid, cta
        self.lpc = [0] * 32          # per-lane pcs
        self.done = [False] * 32

    def val(self, a):
        if a.startswith("%"):
            if a == "%tid.x":
                return list(self.tid)
            if a == "%ctaid.x":
                return [self.ctaid] * 32
            if a in ("%ctaid.y", "%ctaid.z"):
                return [self.cta.ctaid_yz[a == "%ctaid.z"]] * 32
            if a == "%nctaid.x":
                return [self.nctaid] * 32
            return self.R[a]
        if a.startswith("0f"):
            return [int(a[2:], 16)] * 32
        if a in SHARED_SYMBOLS:
            return [SHARED_SYMBOLS[a]] * 32
        return [int(a, 0) & M64] * 32

    def addr(self, a):
        m = re.match(r"(%\w+)(?:\+(-?\d+))?$", a.strip("[]"))
        base = self.val(m.group(1))
        o = int(m.group(2) or 0)
        return [(b + o) & M64 for b in base]

    def run_simt(self):
        """Runs until the warp exits ("ret"), reaches a bar.sync (("bar", args))
        or an mbarrier wait that is not ready ("yield"). Lanes may diverge:
        each step runs the lanes at the lowest pc, so structured branches
        reconverge; warp-wide instructions check that all live lanes are there."""
        while True:
            live = [l for l in range(32) if not self.done[l]]
            if not live:
                return "ret"
            pc = min(self.lpc[l] for l in live)
            at = [not self.done[l] and self.lpc[l] == pc for l in range(32)]
            pred, op, args = self.instrs[pc]
            mask = list(at)
            if pred:
                neg, p = pred
                pv = self.R[p]
                mask = [at[l] and ((not pv[l]) if neg else bool(pv[l])) for l in range(32)]
            if op in ("bra", "bra.uni"):
                target = self.labels[args[0]]
                for l in live:
                    if at[l]:
                        self.lpc[l] = target if mask[l] else pc + 1
                continue
            if op == "ret":
                for l in live:
                    if mask[l]:
                        self.done[l] = True
                    elif at[l]:
                        self.lpc[l] = pc + 1
                continue
            if op == "bar.sync":
                assert all(at[l] for l in live), "bar.sync in divergent code"
            r = self.step(op, args, mask)
            for l in live:
                if at[l]:
                    self.lpc[l] = pc + 1
            if r:
                return r

    def setr(self, d, v, mask):
        if d in self.R and not all(mask):
            old = self.R[d]
            v = [v[l] if mask[l] else old[l] for l in range(32)]
        self.R[d] = list(v)

    def step(self, op, args, mask):
        """One instruction other than bra and ret (run_simt moves the pcs)."""
        V = self.val
        if op == "bar.sync":
            return ("bar", tuple(int(a, 0) for a in args))
        if op == "bar.warp.sync":
            assert all(mask), "bar.warp.sync needs the whole warp"
            return None
        if op.startswith("fence."):
            return None
        if op.startswith("griddepcontrol."):
            return None     # one grid alone: no previous grid to wait for, no next to let in
        if op.startswith("mbarrier.") or op.startswith("cp.async.bulk."):
            return self.cta.async_op(self, op, args, mask)
        if op.startswith("ld.param"):
            self.setr(args[0], [self.params[args[1].strip("[]")]] * 32, mask)
            return None
        if op == "cvta.to.global.u64":
            self.setr(args[0], V(args[1]), mask)
            return None
        if op.startswith("mov"):
            d, s = args
            if d.startswith("{"):
                lo, hi = regs_of(d)
                v = V(s)
                self.setr(lo, [x & 0xFFFF for x in v], mask)
                self.setr(hi, [(x >> 16) & 0xFFFF for x in v], mask)
            elif s.startswith("{"):
                lo, hi = regs_of(s)
                self.setr(d, [(a & 0xFFFF) | ((b & 0xFFFF) << 16) for a, b in zip(V(lo), V(hi))], mask)
            else:
                self.setr(d, V(s), mask)
            return None
        if op.startswith("ld.global"):
            ad = self.addr(args[1])
            regs = regs_of(args[0])
            width = 2 if op.endswith("b16") else 4
            outs = [[0] * 32 for _ in regs]
            for l in range(32):
                if not mask[l]:
                    continue
                assert ad[l] % (width * len(regs)) == 0, "misaligned %s at %d" % (op, ad[l])
                for ri in range(len(regs)):
                    a = ad[l] + ri * width
                    assert 0 <= a and a + width <= len(self.mem), "OOB load"
                    outs[ri][l] = int.from_bytes(self.mem[a:a + width], "little")
            for ri, reg in enumerate(regs):
                self.setr(reg, outs[ri], mask)
            return None
        if op.startswith("st.global"):
            ad = self.addr(args[0])
            v = V(args[1])
            width = 2 if op.endswith("b16") else 4
            for l in range(32):
                if mask[l]:
                    a = ad[l]
                    assert a % width == 0 and 0 <= a and a + width <= len(self.mem), "bad store"
                    self.mem[a:a + width] = (v[l] & ((1 << (8 * width)) - 1)).to_bytes(width, "little")
            return None
        if op == "red.shared.max.u32":        # lanes in order: max is order-free
            ad, v = self.addr(args[0]), V(args[1])
            for l in range(32):
                if mask[l]:
                    a = ad[l]
                    assert a % 4 == 0 and 0 <= a and a + 4 <= len(self.smem), "bad red.shared at %d" % a
                    old = int.from_bytes(self.smem[a:a + 4], "little")
                    self.smem[a:a + 4] = max(old, v[l] & 0xFFFFFFFF).to_bytes(4, "little")
            return None
        if op.startswith("ld.shared") or op.startswith("st.shared"):
            store = op.startswith("st")
            kind = op.split(".")[-1]
            width = 2 if kind in ("b16", "u16") else 4
            vec = 4 if ".v4." in op else 2 if ".v2." in op else 1
            ad = self.addr(args[0] if store else args[1])
            regs = regs_of(args[1] if store else args[0])
            outs = [[0] * 32 for _ in regs]
            vals = [V(r) for r in regs] if store else None
            for l in range(32):
                if not mask[l]:
                    continue
                assert ad[l] % (width * vec) == 0, "misaligned %s at %d" % (op, ad[l])
                for i in range(vec):
                    a = ad[l] + i * width
                    assert 0 <= a and a + width <= len(self.smem), "shared OOB at %d" % a
                    if store:
                        self.smem[a:a + width] = (vals[i][l] & ((1 << (8 * width)) - 1)).to_bytes(width, "little")
                    else:
                        outs[i][l] = int.from_bytes(self.smem[a:a + width], "little")
            if not store:
                for i, reg in enumerate(regs):
                    self.setr(reg, outs[i], mask)
            return None
        if op.startswith("mma.sync"):          # m16n8k16 or m16n8k8, f32 accumulate
            d, a, b, c = [regs_of(x) for x in args]
            assert all(mask)
            kdim = 8 if ".m16n8k8." in op else 16
            cv16 = bf2f if ".bf16" in op else h2f
            A = [[0.0] * kdim for _ in range(16)]
            B = [[0.0] * 8 for _ in range(kdim)]
            C = [[0.0] * 8 for _ in range(16)]
            av, bv, cv = [V(x) for x in a], [V(x) for x in b], [V(x) for x in c]
            for l in range(32):
                g, t = l >> 2, l & 3
                a_at = ((g, 2 * t), (g + 8, 2 * t), (g, 2 * t + 8), (g + 8, 2 * t + 8))[:len(a)]
                for ri, (row, col) in enumerate(a_at):
                    w = av[ri][l]
                    A[row][col] = cv16(w); A[row][col + 1] = cv16(w >> 16)
                for ri, kr in enumerate((2 * t, 2 * t + 8)[:len(b)]):
                    w = bv[ri][l]
                    B[kr][g] = cv16(w); B[kr + 1][g] = cv16(w >> 16)
                for ri, (row, col) in enumerate(((g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1))):
                    C[row][col] = b2f(cv[ri][l])
            outs = [[0] * 32 for _ in range(4)]
            for l in range(32):
                g, t = l >> 2, l & 3
                for ri, (row, col) in enumerate(((g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1))):
                    outs[ri][l] = f2b(C[row][col] + sum(A[row][kk] * B[kk][col] for kk in range(kdim)))
            for ri, rg in enumerate(d):
                self.setr(rg, outs[ri], mask)
            return None
        d = args[0]
        s = [V(x) for x in args[1:]]
        Z = range(32)
        if op in ("add.u32", "sub.u32", "mul.lo.u32", "mad.lo.u32", "min.u32", "shl.b32", "shr.b32", "shr.u32",
                  "and.b32", "or.b32", "xor.b32"):
            x = [[v & M32 for v in col] for col in s]
            f = {"add.u32": lambda a, b: a + b, "sub.u32": lambda a, b: a - b, "mul.lo.u32": lambda a, b: a * b,
                 "min.u32": min, "shl.b32": lambda a, b: a << b, "shr.b32": lambda a, b: a >> b,
                 "shr.u32": lambda a, b: a >> b, "and.b32": lambda a, b: a & b, "or.b32": lambda a, b: a | b,
                 "xor.b32": lambda a, b: a ^ b}
            if op == "mad.lo.u32":
                r = [x[0][l] * x[1][l] + x[2][l] for l in Z]
            else:
                r = [f[op](x[0][l], x[1][l]) for l in Z]
            self.setr(d, [v & M32 for v in r], mask)
        elif op == "lop3.b32":
            x = [[v & M32 for v in col] for col in s[:3]]
            lut = s[3][0]
            r = []
            for l in Z:
                a, b, c = x[0][l], x[1][l], x[2][l]
                v = 0
                for i in range(8):   # immLut bit i: the output for a, b, c bits (i >> 2, i >> 1, i) & 1
                    if lut >> i & 1:
                        v |= (a if i & 4 else ~a) & (b if i & 2 else ~b) & (c if i & 1 else ~c)
                r.append(v & M32)
            self.setr(d, r, mask)
        elif op in ("add.u64", "sub.u64", "and.b64", "mul.lo.u64", "mad.lo.u64", "mul.wide.u32"):
            if op == "add.u64": r = [s[0][l] + s[1][l] for l in Z]
            elif op == "sub.u64": r = [s[0][l] - s[1][l] for l in Z]
            elif op == "and.b64": r = [s[0][l] & s[1][l] for l in Z]
            elif op == "mul.lo.u64": r = [s[0][l] * s[1][l] for l in Z]
            elif op == "mad.lo.u64": r = [s[0][l] * s[1][l] + s[2][l] for l in Z]
            else: r = [(s[0][l] & M32) * (s[1][l] & M32) for l in Z]
            self.setr(d, [v & M64 for v in r], mask)
        elif op in ("cvt.u64.u32", "cvt.u32.u64"):
            self.setr(d, [v & M32 for v in s[0]], mask)
        elif op == "cvt.u32.u16":
            self.setr(d, [v & 0xFFFF for v in s[0]], mask)
        elif op == "cvt.f32.f16":
            self.setr(d, [f2b(h2f(v)) for v in s[0]], mask)
        elif op == "cvt.rn.f16.f32":
            self.setr(d, [f2h(b2f(v)) for v in s[0]], mask)
        elif op == "cvt.rn.f32.u32":
            self.setr(d, [f2b(float(v & M32)) for v in s[0]], mask)
        elif op == "cvt.rn.f32.s32":
            self.setr(d, [f2b(float((v & M32) - ((v & 0x80000000) << 1))) for v in s[0]], mask)
        elif op in ("bfe.u32", "bfe.s32"):
            pos, ln = int(args[2]), int(args[3])
            r = []
            for v in s[0]:
                x = (v >> pos) & ((1 << ln) - 1)
                if op == "bfe.s32" and (x >> (ln - 1)) & 1:
                    x |= M32 ^ ((1 << ln) - 1)
                r.append(x)
            self.setr(d, r, mask)
        elif op == "prmt.b32":
            sel = int(args[3], 0)
            r = []
            for l in Z:
                x = (s[0][l] & M32) | ((s[1][l] & M32) << 32)
                v = 0
                for i in range(4):
                    v |= ((x >> (8 * ((sel >> (4 * i)) & 7))) & 0xFF) << (8 * i)
                r.append(v)
            self.setr(d, r, mask)
        elif op in ("sub.rn.f16x2", "mul.rn.f16x2", "fma.rn.f16x2"):
            f = {"sub.rn.f16x2": lambda x: x[0] - x[1], "mul.rn.f16x2": lambda x: x[0] * x[1],
                 "fma.rn.f16x2": lambda x: x[0] * x[1] + x[2]}[op]
            r = []
            for l in Z:
                out = 0
                for sh in (0, 16):
                    v = f([h2f(src[l] >> sh) for src in s])   # exact in doubles
                    assert not EXACT_HALF or h2f(f2h(v)) == v, "inexact f16 " + op
                    out |= f2h(v) << sh                       # rounded once
                r.append(out)
            self.setr(d, r, mask)
        elif op == "fma.rn.bf16x2":
            r = []
            for l in Z:
                out = 0
                for sh in (0, 16):
                    v = bf2f(s[0][l] >> sh) * bf2f(s[1][l] >> sh) + bf2f(s[2][l] >> sh)
                    assert not EXACT_HALF or f2b(v) & 0xFFFF == 0, "inexact bf16 fma"
                    out |= d2bf(v) << sh                      # exact in doubles, rounded once
                r.append(out)
            self.setr(d, r, mask)
        elif op in ("mul.f32", "add.f32", "sub.f32", "fma.rn.f32", "neg.f32"):
            x = [[b2f(v) for v in col] for col in s]
            if op == "mul.f32": r = [x[0][l] * x[1][l] for l in Z]
            elif op == "add.f32": r = [x[0][l] + x[1][l] for l in Z]
            elif op == "sub.f32": r = [x[0][l] - x[1][l] for l in Z]
            elif op == "fma.rn.f32": r = [x[0][l] * x[1][l] + x[2][l] for l in Z]
            else: r = [-x[0][l] for l in Z]
            self.setr(d, [f2b(v) for v in r], mask)
        elif op.startswith("setp"):
            x = [[v & M32 for v in col] for col in s]
            cmp = op.split(".")[1]
            f = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
                 "ge": lambda a, b: a >= b, "gt": lambda a, b: a > b, "le": lambda a, b: a <= b}[cmp]
            r = [f(x[0][l], x[1][l]) for l in Z]
            if op.split(".")[2] == "and":             # setp.cmp.and.type d, a, b, c: cmp(a, b) && c
                r = [r[l] and bool(s[2][l]) for l in Z]
            self.setr(d, r, mask)
        elif op == "and.pred":
            self.setr(d, [a and b for a, b in zip(s[0], s[1])], mask)
        elif op in ("add.s32", "sub.s32", "max.s32"):
            x = [[(v & M32) - ((v & 0x80000000) << 1) for v in col] for col in s]
            f = {"add.s32": lambda a, b: a + b, "sub.s32": lambda a, b: a - b, "max.s32": max}[op]
            self.setr(d, [f(x[0][l], x[1][l]) & M32 for l in Z], mask)
        elif op in ("div.u32", "rem.u32"):
            x = [[v & M32 for v in col] for col in s]
            f = (lambda a, b: a // b) if op == "div.u32" else (lambda a, b: a % b)
            self.setr(d, [f(x[0][l], x[1][l]) if mask[l] else 0 for l in Z], mask)
        elif op in ("selp.b32", "selp.b64"):
            self.setr(d, [s[0][l] if s[2][l] else s[1][l] for l in Z], mask)
        elif op == "shl.b64":
            self.setr(d, [(s[0][l] << (s[1][l] & 63)) & M64 for l in Z], mask)
        elif op in ("add.rn.f32", "sub.rn.f32", "max.f32", "abs.f32"):
            x = [[b2f(v) for v in col] for col in s]
            if op == "add.rn.f32": r = [x[0][l] + x[1][l] for l in Z]
            elif op == "sub.rn.f32": r = [x[0][l] - x[1][l] for l in Z]
            elif op == "max.f32": r = [max(x[0][l], x[1][l]) for l in Z]
            else: r = [abs(x[0][l]) for l in Z]
            self.setr(d, [f2b(v) for v in r], mask)
        elif op == "cvt.f32.bf16":
            self.setr(d, [((v & 0xFFFF) << 16) for v in s[0]], mask)
        elif op == "cvt.rn.bf16.f32":
            r = []
            for v in s[0]:
                v &= M32
                r.append(((v + 0x7FFF + ((v >> 16) & 1)) >> 16) & 0xFFFF)   # RNE (finite values)
            self.setr(d, r, mask)
        elif op in ("shfl.sync.bfly.b32", "shfl.sync.idx.b32"):
            assert all(mask), "shfl.sync needs the whole warp"
            bfly = op == "shfl.sync.bfly.b32"      # source lane l ^ b, else b
            self.setr(d, [s[0][((l ^ s[1][l]) if bfly else s[1][l]) & 31] for l in Z], mask)
        else:
            raise NotImplementedError(op)
        return None


class Cta:
    """One CTA of a kernel with divergent lanes, mbarriers, bulk copies and
    named barriers (the kaio_kq_stream_* kernels): warps run in turn until
    they block. Bulk copies land at once and complete their bytes on the
    mbarrier; an mbarrier phase completes when its pending arrivals and
    bytes both reach 0. Shared memory starts as 0xFF bytes (poison)."""

    def __init__(self, kern, params, mem, nwarps, smem_bytes, ctaid=0, nctaid=1, ctaid_yz=(0, 0)):
        self.mem = mem
        self.ctaid_yz = ctaid_yz
        self.smem = bytearray(b"\xff") * smem_bytes
        self.warps = [Warp(kern, params, mem, self.smem, ctaid, w, nctaid, self) for w in range(nwarps)]
        self.mbar = {}           # address -> [count, pending, tx bytes, completed phases]
        self.copied = set()      # 16-byte global chunks the bulk copies read
        self.prefetched = set()  # and those L2 prefetches asked for
        self.epoch = 0           # bumped on every state change, for deadlock detection

    def _settle(self, a):
        b = self.mbar[a]
        assert b[1] >= 0 and b[2] >= 0, "mbarrier over-arrived at %d: %s" % (a, b)
        if b[1] == 0 and b[2] == 0:
            b[1], b[3] = b[0], b[3] + 1
        self.epoch += 1

    def async_op(self, warp, op, args, mask):
        lanes = [l for l in range(32) if mask[l]]
        if op.startswith("mbarrier.init"):
            ad, cnt = warp.addr(args[0]), warp.val(args[1])
            for l in lanes:
                assert ad[l] % 8 == 0
                self.mbar[ad[l]] = [cnt[l], cnt[l], 0, 0]
        elif op.startswith("mbarrier.expect_tx"):
            ad, tx = warp.addr(args[0]), warp.val(args[1])
            for l in lanes:
                self.mbar[ad[l]][2] += tx[l]
                self._settle(ad[l])
        elif op.startswith("mbarrier.arrive.expect_tx"):
            ad, tx = warp.addr(args[1]), warp.val(args[2])
            for l in lanes:
                b = self.mbar[ad[l]]
                b[2] += tx[l]
                b[1] -= 1
                self._settle(ad[l])
        elif op.startswith("mbarrier.arrive"):
            ad = warp.addr(args[1])
            for l in lanes:
                self.mbar[ad[l]][1] -= 1
                self._settle(ad[l])
        elif op.startswith("mbarrier.try_wait.parity"):
            ad, par = warp.addr(args[1]), warp.val(args[2])
            ready = [False] * 32
            for l in lanes:
                ready[l] = (self.mbar[ad[l]][3] & 1) != (par[l] & 1)
            warp.setr(args[0], ready, mask)
            if not all(ready[l] for l in lanes):
                return "yield"
        elif op.startswith("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"):
            dst, src, size, bar = warp.addr(args[0]), warp.addr(args[1]), warp.val(args[2]), warp.addr(args[3])
            for l in lanes:
                n = size[l]
                assert dst[l] % 16 == 0 and src[l] % 16 == 0 and n % 16 == 0 and n > 0, "bulk copy alignment"
                assert 0 <= src[l] and src[l] + n <= len(self.mem), "bulk copy reads past global memory"
                assert 0 <= dst[l] and dst[l] + n <= len(self.smem), "bulk copy writes past shared memory"
                self.smem[dst[l]:dst[l] + n] = self.mem[src[l]:src[l] + n]
                self.copied.update(range(src[l] // 16, (src[l] + n) // 16))
                self.mbar[bar[l]][2] -= n
                self._settle(bar[l])
        elif op.startswith("cp.async.bulk.prefetch.L2.global"):
            # a hint: no data moves, but it must be a valid bulk range
            src, size = warp.addr(args[0]), warp.val(args[1])
            for l in lanes:
                n = size[l]
                assert src[l] % 16 == 0 and n % 16 == 0 and n > 0, "bulk prefetch alignment"
                assert 0 <= src[l] and src[l] + n <= len(self.mem), "bulk prefetch past global memory"
                self.prefetched.update(range(src[l] // 16, (src[l] + n) // 16))
        else:
            raise NotImplementedError(op)
        return None

    def run(self):
        """Runs the CTA to its end; then every chunk it prefetched to L2 must
        be one its bulk copies read (a prefetch asks for nothing else)."""
        self._run()
        stray = sorted(self.prefetched - self.copied)
        assert not stray, "prefetched bytes no bulk copy read, from %d" % (16 * stray[0])

    def _run(self):
        state = {id(w): "run" for w in self.warps}
        waiting = {}
        idle = 0
        while any(v != "ret" for v in state.values()):
            before = self.epoch
            for w in self.warps:
                if state[id(w)] != "run":
                    continue
                r = w.run_simt()
                if r == "ret":
                    state[id(w)] = "ret"
                    self.epoch += 1
                elif r == "yield":
                    continue
                else:
                    bar = r[1]
                    count = bar[1] if len(bar) > 1 else 32 * len(self.warps)
                    waiting.setdefault(bar[0], []).append(w)
                    state[id(w)] = "bar"
                    if 32 * len(waiting[bar[0]]) >= count:
                        for x in waiting.pop(bar[0]):
                            state[id(x)] = "run"
                    self.epoch += 1
            idle = idle + 1 if self.epoch == before else 0
            assert idle < 3, "deadlock: " + str(sorted(set(state.values())))


def launch(kern, grid, params, mem, nwarps=8, smem_bytes=4096):
    """Runs every CTA of a grid in turn; grid: x, or (x, y, z)."""
    gx, gy, gz = grid if isinstance(grid, tuple) else (grid, 1, 1)
    for z in range(gz):
        for y in range(gy):
            for cta in range(gx):
                Cta(kern, params, mem, nwarps, smem_bytes, cta, gx, (y, z)).run()
