"""The PTX text builder every kernel is written with: virtual registers per
type, labels, and one-line helpers that allocate a destination register.
A generator's kernel class subclasses it (or one of the library's kernel
classes) and produces its text with entry_text().

Registers are numbered per type in allocation order (%r0, %r1, ...), so one
more register early renumbers every later one.  Inside `with k.phase("load"):`
they are numbered within that phase instead (%load_r0, ...): an edit in one
phase leaves the other phases' names as they were."""

import contextlib
import re

from kaio_ptx import manifest

PHASE_NAME = re.compile(r"[a-z][a-z0-9]*$")


class PtxEmitter:
    REG_TYPES = (("p", ".pred"), ("h", ".b16"), ("r", ".b32"), ("f", ".f32"), ("rd", ".b64"))

    def __init__(self):
        self.lines = []
        self.count = {kind: 0 for kind, _ in self.REG_TYPES}
        self.nlabels = 0
        self.prefix = ""
        self.phase_count = {}   # prefix ("load_") -> {kind: n}, in order of first use

    @contextlib.contextmanager
    def phase(self, name):
        """Registers allocated in the with-block are named %<name>_<kind><n>,
        numbered within the phase (again from where it stopped when the
        phase is entered again); an inner phase replaces an outer one."""
        if not PHASE_NAME.match(name):
            raise ValueError("phase(%r): a phase name is a lowercase letter, then lowercase "
                             "letters or digits (it prefixes register names)" % name)
        outer = self.prefix
        self.prefix = name + "_"
        self.phase_count.setdefault(self.prefix, {kind: 0 for kind, _ in self.REG_TYPES})
        try:
            yield
        finally:
            self.prefix = outer

    def reg(self, kind):
        count = self.phase_count[self.prefix] if self.prefix else self.count
        n = count[kind]
        count[kind] += 1
        return "%%%s%s%d" % (self.prefix, kind, n)

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
            for prefix, count in [("", self.count)] + list(self.phase_count.items()):
                if count[kind]:
                    out.append("\t.reg %s %%%s%s<%d>;" % (ptx_type, prefix, kind, count[kind]))
        for decl in [shared_decl] if isinstance(shared_decl, str) else shared_decl or []:
            out.append("\t" + decl + ";")
        out.append("")
        out.extend(self.lines)
        out.append("}")
        return "\n".join(out) + "\n"
