"""The PTX text builder the kernel generators share: virtual registers per
type, labels, and one-line helpers that allocate a destination register.
Each generator subclasses it with its own entry header and text()."""

import argparse
import os
import sys


class PtxEmitter:
    REG_TYPES = (("p", ".pred"), ("h", ".b16"), ("r", ".b32"), ("f", ".f32"), ("rd", ".b64"))

    def __init__(self):
        self.lines = []
        self.count = {kind: 0 for kind, _ in self.REG_TYPES}
        self.nlabels = 0

    def reg(self, kind):
        n = self.count[kind]
        self.count[kind] += 1
        return "%%%s%d" % (kind, n)

    def regs(self, kind, n):
        return [self.reg(kind) for _ in range(n)]

    def op(self, text):
        self.lines.append("\t" + text + ";")

    def note(self, text):
        self.lines.append("\t// " + text)

    def label(self, hint):
        self.nlabels += 1
        return "L_%s_%d" % (hint, self.nlabels)

    def place(self, label):
        self.lines.append(label + ":")

    def _dst(self, kind, opcode, srcs):
        d = self.reg(kind)
        self.op("%s %s, %s" % (opcode, d, ", ".join(str(s) for s in srcs)))
        return d

    def r(self, opcode, *srcs):
        return self._dst("r", opcode, srcs)

    def rd(self, opcode, *srcs):
        return self._dst("rd", opcode, srcs)

    def f(self, opcode, *srcs):
        return self._dst("f", opcode, srcs)

    def p(self, opcode, *srcs):
        return self._dst("p", opcode, srcs)

    def entry_text(self, name, doc, annotations, params, directives, shared_decl=None):
        """The .entry: doc comment, annotation lines, parameters, directives
        (".maxntid ..."), register declarations, shared declaration, body."""
        out = ["// " + line if line else "//" for line in doc.strip("\n").split("\n")]
        out += annotations
        out.append(".visible .entry %s(" % name)
        out.append(",\n".join("\t.param %s %s" % p for p in params))
        out.append(")")
        out += directives
        out.append("{")
        for kind, ptx_type in self.REG_TYPES:
            if self.count[kind]:
                out.append("\t.reg %s %%%s<%d>;" % (ptx_type, kind, self.count[kind]))
        if shared_decl:
            out.append("\t" + shared_decl + ";")
        out.append("")
        out.extend(self.lines)
        out.append("}")
        return "\n".join(out) + "\n"


def write_or_check(here, files, check, script):
    """Writes each generated file beside the generator, or with check only
    compares it with the committed one; returns the process exit status."""
    stale = []
    for fname, text in files.items():
        path = os.path.join(here, fname)
        if check:
            try:
                with open(path, encoding="utf-8", newline="") as fh:
                    same = fh.read() == text
            except OSError:
                same = False
            if not same:
                stale.append(path)
        else:
            with open(path, "w", encoding="utf-8", newline="\n") as fh:
                fh.write(text)
    for path in stale:
        print("stale: %s (run python3 ptx/%s)" % (os.path.relpath(path), script), file=sys.stderr)
    return 1 if stale else 0


def load_params(k, params, pointers):
    """Loads every (type, name) scalar parameter into a register, and turns
    the named pointer parameters into global addresses; returns name -> reg."""
    loaders = {".u64": (k.rd, "ld.param.u64"), ".u32": (k.r, "ld.param.u32"),
               ".f32": (k.f, "ld.param.f32")}
    regs = {}
    for ptx_type, pname in params:
        emit, opcode = loaders[ptx_type]
        regs[pname] = emit(opcode, "[%s]" % pname)
    for pname in pointers:
        regs[pname] = k.rd("cvta.to.global.u64", regs[pname])
    return regs


def main_for(doc, generate, here, script):
    """A generator's command line: write its files, or with --check compare them."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="fail if the committed files are stale")
    args = ap.parse_args()
    return write_or_check(here, generate(), args.check, script)


def sum_warp_partials(k, smem, tid, threads, rows, cols, warps, row_base, col_base, m, n, store):
    """The split-K tail of the decode kernels: `warps` warps each left a
    rows x cols tile of f32 partial sums in shared memory (warp w's at
    smem + w * rows * cols * 4, element o = row * cols + col); thread o (then
    o + threads, ...) adds them in warp order, a fixed order, and, for
    outputs inside m x n, calls store(row, col, sum).  cols is a power of two;
    row_base (None for 0) and col_base offset the tile in the output."""
    nout = rows * cols
    for rep in range((nout + threads - 1) // threads):
        o = k.r("add.u32", tid, rep * threads) if rep else tid
        row = k.r("shr.u32", o, cols.bit_length() - 1)
        if row_base is not None:
            row = k.r("add.u32", row_base, row)
        col = k.r("add.u32", col_base, k.r("and.b32", o, cols - 1))
        ok = k.p("setp.lt.and.u32", row, m, k.p("setp.lt.u32", col, n))
        if (rep + 1) * threads > nout:
            ok = k.p("setp.lt.and.u32", o, nout, ok)
        nxt = k.label("out_skip")
        k.op("@!%s bra %s" % (ok, nxt))
        addr = k.r("add.u32", smem, k.r("shl.b32", o, 2))
        ssum = k.f("ld.shared.f32", "[%s]" % addr)
        for w in range(1, warps):
            part = k.f("ld.shared.f32", "[%s+%d]" % (addr, w * nout * 4))
            k.op("add.f32 %s, %s, %s" % (ssum, ssum, part))
        store(row, col, ssum)
        k.place(nxt)
