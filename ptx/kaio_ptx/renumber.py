#!/usr/bin/env python3
"""Compare two PTX files up to register and label names.

    python3 ptx/kaio_ptx/renumber.py OLD.ptx NEW.ptx

A move into kaio_ptx that changes the order registers or labels are
allocated in (a new allocator, a helper that allocates its destination
earlier) changes their numbers but not the kernel.  Within each entry this
renames every virtual register (%p, %h, %r, %f, %rd + number, or a phase's
%load_r3: PtxEmitter.phase) to its kind and the order of its first
appearance, and every label (L_...) likewise, then compares the files line
by line.  Exit status 0: the same kernels; 1: the first difference is
printed.  The .reg declarations still count registers (a phase's are added
to its kind's, so moving registers into a phase changes no line), so a
change in how many a kernel uses shows too."""

import re
import sys

REG = re.compile(r"%(?:[a-z][a-z0-9]*_)?(rd|p|h|r|f)(\d+)\b")
DECL = re.compile(r"^\t\.reg (\.\w+) %(?:[a-z][a-z0-9]*_)?(rd|p|h|r|f)<(\d+)>;$")
LABEL = re.compile(r"\bL_\w+")


def merge_declarations(lines):
    """lines with each run of .reg declarations as one line per type and
    kind, counts added up, in the order of first appearance."""
    out, run = [], {}
    for line in lines + [None]:
        m = DECL.match(line) if line is not None else None
        if m:
            key = m.group(1), m.group(2)
            run[key] = run.get(key, 0) + int(m.group(3))
            continue
        out += ["\t.reg %s %%%s<%d>;" % (t, kind, n) for (t, kind), n in run.items()]
        run = {}
        if line is not None:
            out.append(line)
    return out


def canonical(text):
    """text with registers and labels renumbered per entry, as a list of lines."""
    out = []
    regs, labels, counts = {}, {}, {}
    for line in merge_declarations(text.split("\n")):
        if line.startswith(".visible .entry") or line.startswith(".entry"):
            regs, labels, counts = {}, {}, {}

        def reg(m):
            key = m.group(0)
            if key not in regs:
                n = counts.get(m.group(1), 0)
                counts[m.group(1)] = n + 1
                regs[key] = "%%%s%d" % (m.group(1), n)
            return regs[key]

        def label(m):
            return labels.setdefault(m.group(0), "L_%d" % len(labels))

        out.append(LABEL.sub(label, REG.sub(reg, line)))
    return out


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    texts = []
    for path in argv[1:]:
        with open(path, encoding="utf-8") as fh:
            texts.append(canonical(fh.read()))
    old, new = texts
    for i, (a, b) in enumerate(zip(old, new)):
        if a != b:
            print("%s:%d and %s:%d differ after renumbering:\n  - %s\n  + %s"
                  % (argv[1], i + 1, argv[2], i + 1, a, b))
            return 1
    if len(old) != len(new):
        print("%s has %d lines, %s %d" % (argv[1], len(old), argv[2], len(new)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
