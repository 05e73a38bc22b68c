#!/usr/bin/env python3
"""ptx/kaio_ptx/isa.py's table against the PTX ISA, and the built modules'
.version/.target against the table.

    python3 tests/ptx_isa_check.py [PTX_DIR]

1. Per sample line below, the minimum the PTX ISA documents for it (its
   "PTX ISA Notes" / "Target ISA Notes"; CUDA C++ cuda::ptx lists the same
   per form): isa.required() must give at least that.  A table entry that
   asks for less, or a sample no entry matches, fails.
2. The check itself must fail on a table that asks for too little (wgmma
   without the `a` target).
3. With PTX_DIR (the build's ptx/): no module keeps preamble()'s mark, and
   no module states less than its instructions need (the sm_90a generators
   that still state theirs by hand included)."""

import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ptx"))

from kaio_ptx import isa  # noqa: E402

# (line, documented minimum PTX ISA version, target)
DOCUMENTED = (
    ("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%f1}, %rd1, %rd2, 1, 1, 1, 0, 0;",
     "8.0", "sm_90a"),
    ("wgmma.fence.sync.aligned;", "8.0", "sm_90a"),
    ("setmaxnreg.inc.sync.aligned.u32 240;", "8.0", "sm_90a"),
    ("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
     "[%r1], [%rd1, {%r2, %r3}], [%r4];", "8.0", "sm_90"),
    ("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1], %r2, [%r3];",
     "8.0", "sm_90"),
    ("prefetch.tensormap [%rd1];", "8.0", "sm_90"),
    ("cp.async.bulk.prefetch.L2.global [%rd1], %r1;", "8.0", "sm_90"),
    ("griddepcontrol.launch_dependents;", "7.8", "sm_90"),
    ("griddepcontrol.wait;", "7.8", "sm_90"),
    ("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%r1], %r2;", "8.0", "sm_90"),
    ("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r1], %r2;", "8.0", "sm_90"),
    ("fence.proxy.async.shared::cta;", "8.0", "sm_90"),
    ("fence.mbarrier_init.release.cluster;", "8.0", "sm_90"),
    ("barrier.cluster.arrive.release;", "8.0", "sm_90"),
    ("barrier.cluster.wait.acquire;", "8.0", "sm_90"),
    ("barrier.cluster.wait;", "7.8", "sm_90"),
    ("mapa.shared::cluster.u32 %r1, %r2, %r3;", "7.8", "sm_90"),
    ("st.shared::cluster.v4.f32 [%r1], {%f1, %f2, %f3, %f4};", "7.8", "sm_90"),
    ("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%r1], {%f1, %f2, %f3, %f4}, "
     "[%r2];", "8.1", "sm_90"),
    (".reqnctapercluster 2, 1, 1", "7.8", "sm_90"),
    ("@%p1 mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r1], %r2;", "7.8", "sm_90"),
    ("mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 %p1, [%r1], 0;", "8.0", "sm_90"),
    ("cvt.f32.bf16 %f1, %h1;", "7.8", "sm_90"),
    ("sub.rn.bf16x2 %r1, %r2, %r3;", "7.8", "sm_90"),
    ("mul.rn.bf16x2 %r1, %r2, %r3;", "7.8", "sm_90"),
    ("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%f1, %f2, %f3, %f4}, "
     "{%r1, %r2, %r3, %r4}, {%r5, %r6}, {%f5, %f6, %f7, %f8};", "7.0", "sm_80"),
    ("cp.async.cg.shared.global [%r1], [%rd1], 16, %r2;", "7.0", "sm_80"),
    ("cp.async.cg.shared.global.L2::256B [%r1], [%rd1], 16, %r2;", "7.4", "sm_80"),
    ("cp.async.cg.shared.global.L2::cache_hint [%r1], [%rd1], 16, %r2, %rd2;", "7.4", "sm_80"),
    ("createpolicy.fractional.L2::evict_first.b64 %rd1, 1.0;", "7.4", "sm_80"),
    ("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r1, %r2, %r3, %r4}, [%r5];", "6.5", "sm_75"),
)
# Below every documented minimum: what a line no table entry matches gets.
NOTHING = ("1.0", "sm_10")


def below_docs(table=None):
    """Messages for the DOCUMENTED lines the table asks too little for."""
    out = []
    for line, version, target in DOCUMENTED:
        got = isa.required(line, floor=NOTHING, table=table)
        if (isa.version_key(got[0]) < isa.version_key(version)
                or isa.target_key(got[1]) < isa.target_key(target)):
            out.append("FAIL: %r needs PTX ISA %s, %s (the PTX ISA); kaio_ptx/isa.py's table "
                       "gives %s, %s" % ((line, version, target) + got))
    return out


def stated_below(ptx_dir):
    """Messages for built modules that state less than their instructions need."""
    out = []
    for name in sorted(n for n in os.listdir(ptx_dir) if n.endswith(".ptx")):
        with open(os.path.join(ptx_dir, name), encoding="utf-8") as fh:
            text = fh.read()
        if isa.MARK in text:
            out.append("FAIL: %s keeps %r: it was not written through kaio_ptx/cli.py" % (name, isa.MARK))
            continue
        version = re.search(r"^\.version (\S+)", text, re.M).group(1)
        target = re.search(r"^\.target (\S+)", text, re.M).group(1)
        need = isa.required(text)
        if isa.version_key(version) < isa.version_key(need[0]) or isa.target_key(target) < isa.target_key(need[1]):
            out.append("FAIL: %s states .version %s .target %s; its instructions need %s, %s"
                       % ((name, version, target) + need))
    return out


def main(argv):
    failures = below_docs()
    weak = [(p, v, "sm_90" if p == r"^wgmma\." else t) for p, v, t in isa.TABLE]
    if not below_docs(weak):
        failures.append("FAIL: the check passes a table that gives wgmma sm_90: it cannot fail")
    if len(argv) > 1:
        failures += stated_below(argv[1])
    for m in failures:
        print(m)
    if failures:
        return 1
    print("OK: %d documented lines%s" % (len(DOCUMENTED), ", modules in " + argv[1] if len(argv) > 1 else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
