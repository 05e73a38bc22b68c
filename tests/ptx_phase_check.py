#!/usr/bin/env python3
"""PtxEmitter.phase: registers numbered within their phase, and renumber.py
(the lock's hash) unchanged when registers only move into a phase.

    python3 tests/ptx_phase_check.py"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ptx"))

from kaio_ptx.emitter import PtxEmitter  # noqa: E402
from kaio_ptx.renumber import canonical  # noqa: E402


def kernel(extra_early, phased):
    """A small entry: a setup part (one more register with extra_early),
    then a part in phase "out" when phased.  Returns (text, out's registers)."""
    k = PtxEmitter()
    x = k.r("mov.u32", "%tid.x")
    if extra_early:
        x = k.r("add.u32", x, 1)
    out = []

    def tail():
        y = k.r("shl.b32", x, 2)
        out.extend([y, k.f("cvt.rn.f32.u32", y), k.p("setp.eq.u32", y, 0)])

    if phased:
        with k.phase("out"):
            tail()
    else:
        tail()
    k.op("ret")
    return k.entry_text("e", "doc", [], [], []), out


def main():
    failures = []
    plain, plain_regs = kernel(False, False)
    phased, phased_regs = kernel(False, True)
    edited, edited_regs = kernel(True, True)
    if plain_regs != ["%r1", "%f0", "%p0"]:
        failures.append("FAIL: no phase gives %s, not today's %%r1, %%f0, %%p0" % plain_regs)
    if phased_regs != ["%out_r0", "%out_f0", "%out_p0"]:
        failures.append("FAIL: phase 'out' gives %s, not %%out_r0, %%out_f0, %%out_p0" % phased_regs)
    if edited_regs != phased_regs:
        failures.append("FAIL: one more register before phase 'out' renamed it: %s -> %s"
                        % (phased_regs, edited_regs))
    if "\t.reg .b32 %out_r<1>;" not in phased:
        failures.append("FAIL: phase 'out' has no declaration of its own:\n" + phased)
    if canonical(plain) != canonical(phased):
        failures.append("FAIL: renumber.py sees a change where registers only moved into a phase")
    if canonical(plain) == canonical(edited):
        failures.append("FAIL: renumber.py does not see one more register")
    try:
        with PtxEmitter().phase("Out_1"):
            pass
        failures.append("FAIL: phase('Out_1') accepted (names prefix registers: lowercase only)")
    except ValueError:
        pass
    for m in failures:
        print(m)
    if not failures:
        print("OK: phase-scoped register names and their renumbering")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
