#!/usr/bin/env python3
"""Check the kernel manifests the build writes beside the PTX.

    python3 ptx/manifest_check.py DIR     # DIR: <build>/ptx

Every entry of every module is in exactly one manifest
(<gen>.manifest.json), with a block shape and selector keys; the entries
of one selector (keys["select"], else the family) have the same key names
and no two the same values, so a selector names one kernel.
Exit 1 with the offending entries otherwise."""

import glob
import json
import os
import re
import sys

ENTRY = re.compile(r"^(?:\.visible\s+)?\.entry\s+(\w+)", re.M)


def selector(entry):
    """The C++ selector that picks this entry: keys["select"], else its family."""
    return entry["keys"].get("select", entry["family"])


def check(ptx_dir):
    problems, seen, keys, keysets = [], {}, {}, {}
    for path in sorted(glob.glob(os.path.join(ptx_dir, "*.manifest.json"))):
        with open(path, encoding="utf-8") as fh:
            for e in json.load(fh)["entries"]:
                name = e["entry"]
                if name in seen:
                    problems.append("%s: in %s and %s" % (name, seen[name], path))
                seen[name] = path
                if not e.get("block"):
                    problems.append("%s: no block shape" % name)
                if not isinstance(e.get("grid_dep_wait"), bool):
                    problems.append("%s: no grid_dep_wait (kaio_ptx/manifest.py reads it from the PTX)" % name)
                if not e.get("keys"):
                    problems.append("%s: no keys (manifest.keys() in its generator)" % name)
                sel = selector(e)
                k = (sel, json.dumps(e["keys"], sort_keys=True))
                if e.get("keys") and k in keys:
                    problems.append("%s and %s: the same keys %s in selector %s" % (keys[k], name, k[1], k[0]))
                keys[k] = name
                names = sorted(e["keys"])
                if keysets.setdefault(sel, (names, name))[0] != names:
                    problems.append("%s and %s: selector %s with different key names %s and %s"
                                    % (keysets[sel][1], name, sel, keysets[sel][0], names))
    if not seen:
        problems.append("no *.manifest.json in %s (build first: meson compile -C BUILD)" % ptx_dir)
    modules = {os.path.basename(p)[:-len(".ptx")] for p in glob.glob(os.path.join(ptx_dir, "*.ptx"))}
    for module in sorted(modules):
        with open(os.path.join(ptx_dir, module + ".ptx"), encoding="utf-8") as fh:
            for name in ENTRY.findall(fh.read()):
                if name not in seen:
                    problems.append("%s (%s.ptx): in no manifest" % (name, module))
    return problems, len(seen)


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    problems, count = check(argv[1])
    for p in problems:
        print("FAIL:", p)
    if not problems:
        print("OK: %d entries, each with keys, unique within its selector" % count)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
