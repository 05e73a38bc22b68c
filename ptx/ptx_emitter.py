"""The PTX text builder the kernel generators share: virtual registers per
type, labels, and one-line helpers that allocate a destination register.
Each generator subclasses it with its own entry header and text()."""


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
