"""The PTX text builder every kernel is written with: virtual registers per
type, labels, and one-line helpers that allocate a destination register.
A generator's kernel class subclasses it (or one of the library's kernel
classes) and produces its text with entry_text()."""

from kaio_ptx import manifest


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

    def wide(self, r32):
        """A 32-bit unsigned register zero-extended to a fresh 64-bit one."""
        return self.rd("cvt.u64.u32", r32)

    def entry_text(self, name, doc, annotations, params, directives, shared_decl=None):
        """The .entry: doc comment, annotation lines, parameters, directives
        (".maxntid ..."), register declarations, shared declaration(s): one
        string or a list, body."""
        manifest.record_entry(name, annotations, directives)
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
        for decl in [shared_decl] if isinstance(shared_decl, str) else shared_decl or []:
            out.append("\t" + decl + ";")
        out.append("")
        out.extend(self.lines)
        out.append("}")
        return "\n".join(out) + "\n"
