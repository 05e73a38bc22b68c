#!/usr/bin/env python3
"""Dependent launches read no memory through the non-coherent path
(kaio_ptx/grid_dep.py coherent_loads): twin_module makes a twin's
ld.global.nc loads plain, manifest.take refuses an entry that waits for the
previous grid and still holds one, and no built module has such an entry.

    python3 tests/grid_dep_check.py DIR     # DIR: <build>/ptx

ptxas moves ld.global.nc above griddepcontrol.wait (it did on the int4
matvec's x, read before the previous link had written it)."""

import glob
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ptx"))

from kaio_ptx import grid_dep, manifest  # noqa: E402

ENTRY = """.visible .entry kaio_t(
\t.param .u64 p
)
{
\t.reg .b32 %r<2>;
\t.reg .b64 %rd<2>;

\tld.param.u64 %rd1, [p];
\tld.global.nc.u32 %r1, [%rd1];
\tst.global.u32 [%rd1], %r1;
\tret;
}
"""


def check(ptx_dir):
    problems = []
    manifest.record_entry("kaio_t", [], [])
    twin = grid_dep.twin_module(ENTRY)
    if "ld.global.nc" in twin or "ld.global.u32" not in twin or "griddepcontrol.wait" not in twin:
        problems.append("twin_module left a .nc load or lost the load:\n" + twin)
    manifest.take({"t.ptx": ENTRY + twin}, "t")
    refused = twin.replace("ld.global.u32", "ld.global.nc.u32")
    manifest.record_entry("kaio_t_pdl", [], [])
    try:
        manifest.take({"t.ptx": refused}, "t")
        problems.append("manifest.take took a waiting entry with an ld.global.nc load")
    except SystemExit as e:
        if "ld.global.nc" not in str(e):
            problems.append("manifest.take refused it for another reason: %s" % e)
    entries = 0
    for path in sorted(glob.glob(os.path.join(ptx_dir, "*.ptx"))):
        with open(path, encoding="utf-8") as fh:
            text = re.sub(r"//[^\n]*", "", fh.read())
        for body in re.split(r"^(?:\.visible\s+)?\.entry\s+", text, flags=re.M)[1:]:
            if manifest.grid_dep_wait(body):
                entries += 1
                if manifest.NC_LOAD.search(body):
                    problems.append("%s: %s waits and loads with ld.global.nc"
                                    % (os.path.basename(path), body.split("(", 1)[0]))
    if entries == 0:
        problems.append("no entry in %s waits for the previous grid: wrong directory?" % ptx_dir)
    for p in problems:
        print("FAIL", p)
    print("%d waiting entries checked, %d problem(s)" % (entries, len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(check(sys.argv[1]))
