#!/usr/bin/env python3
"""ptx/kernels.lock: what every built-in kernel is, one line per entry.

    python3 ptx/lock.py --update [DIR]   # rewrite the lock (from DIR, or a fresh ptx/generate.py run)
    python3 ptx/lock.py --check DIR      # exit 1 if the PTX in DIR (the build's ptx/) is not the lock's

The PTX is built, not committed (ptx/meson.build); the lock is committed, so
a change to generated code shows in review as the lines of the entries it
changed.  Per entry: its module, its name, a hash of its text (with the
comments just above it, where the launch annotations are) after registers
and labels are renumbered (kaio_ptx/renumber.py: a helper that only
allocates in another order changes no line), and the registers and static
shared memory ptxas gives it.  A module's `*` line hashes its text outside
the entries (directives, shared declarations).

Hashes are always compared.  ptxas facts are compared where a ptxas of the
lock's version is found (PATH, PTXAS, CUDA_PATH, /usr/local/cuda); with
CI=true or KAIO_REQUIRE_PTXAS=1 a missing ptxas fails the check.  ptxas runs
per file in parallel, and only on files whose text changed since its last
run (a cache in DIR); a spill fails the check, as in tests/ptxas_check.py.
"""

import argparse
import difflib
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(HERE, "..", "tests"))

import generate  # noqa: E402
import ptxas_check  # noqa: E402
from kaio_ptx.renumber import canonical  # noqa: E402

LOCK = os.path.join(HERE, "kernels.lock")
CACHE = ".ptxas-cache.json"
ENTRY = re.compile(r"^(?:\.visible\s+)?\.entry\s+(\w+)")
UNKNOWN = "?"


def split_module(text):
    """(module-level lines, [(entry name, lines)]): an entry runs from the
    comment lines just above its .entry to its closing brace at column 0."""
    lines = text.split("\n")
    header, entries, pending, i = [], [], [], 0
    while i < len(lines):
        m = ENTRY.match(lines[i])
        if m:
            body, pending = pending, []
            while i < len(lines):
                body.append(lines[i])
                i += 1
                if body[-1].startswith("}"):
                    break
            entries.append((m.group(1), body))
            continue
        if lines[i].startswith("//") or not lines[i].strip():
            pending.append(lines[i])
        else:
            header += pending + [lines[i]]
            pending = []
        i += 1
    return header + pending, entries


def digest(lines):
    return hashlib.sha256("\n".join(canonical("\n".join(lines))).encode()).hexdigest()[:16]


def hashes(ptx_dir):
    """{(module, entry or '*'): hash} over every .ptx file in ptx_dir."""
    out = {}
    for name in sorted(os.listdir(ptx_dir)):
        if not name.endswith(".ptx"):
            continue
        with open(os.path.join(ptx_dir, name), encoding="utf-8") as fh:
            header, entries = split_module(fh.read())
        module = name[:-len(".ptx")]
        out[(module, "*")] = digest(header)
        for entry, body in entries:
            out[(module, entry)] = digest(body)
    return out


def ptxas_version(ptxas):
    proc = subprocess.run([ptxas, "--version"], stdout=subprocess.PIPE, universal_newlines=True)
    m = re.search(r"release [\d.]+, (V[\d.]+)", proc.stdout)
    return m.group(1) if m else proc.stdout.strip().split("\n")[-1]


def ptxas_facts(ptxas, version, ptx_dir):
    """({(module, entry): (regs, smem)}, failures): ptxas -v on each file
    whose text is not in the cache, in parallel."""
    cache_path = os.path.join(ptx_dir, CACHE)
    try:
        with open(cache_path, encoding="utf-8") as fh:
            cache = json.load(fh)
    except (OSError, ValueError):
        cache = {}
    names = sorted(n for n in os.listdir(ptx_dir) if n.endswith(".ptx"))
    sums = {}
    for n in names:
        with open(os.path.join(ptx_dir, n), "rb") as fh:
            sums[n] = hashlib.sha256(fh.read()).hexdigest()
    stale = [n for n in names if cache.get(n, {}).get("key") != [sums[n], version]]
    failures = []
    for n, (ok, rows, messages) in zip(stale, ptxas_check.check_all(
            ptxas, [os.path.join(ptx_dir, n) for n in stale])):
        failures += messages
        kernels = {k["name"]: [k["regs"], k["smem"], k["spill_st"], k["spill_ld"]] for _, _, _, k in rows}
        if ok:
            cache[n] = {"key": [sums[n], version], "kernels": kernels}
        else:
            cache.pop(n, None)
            failures += ["FAIL %s: %s spills (%d bytes stored, %d loaded)" % (n, k, v[2], v[3])
                         for k, v in sorted(kernels.items()) if v[2] or v[3]]
    with open(cache_path, "w", encoding="utf-8") as fh:
        json.dump(cache, fh, indent=0, sort_keys=True)
    facts = {}
    for n in names:
        for k, v in cache.get(n, {}).get("kernels", {}).items():
            facts[(n[:-len(".ptx")], k)] = (v[0], v[1])
    return facts, failures


def read_lock(path):
    """(ptxas version or None, {(module, entry): (hash, regs, smem)})."""
    version, rows = None, {}
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().split("\n")
    except OSError:
        return version, rows
    for line in lines:
        m = re.match(r"# ptxas (\S+)", line)
        if m:
            version = m.group(1)
        f = line.split()
        if len(f) == 5 and not line.startswith("#"):
            rows[(f[0], f[1])] = (f[2], f[3], f[4])
    return version, rows


def render(version, hashes_, facts, old):
    """The lock's text.  Facts missing (no ptxas, or another version) are
    kept from the old lock where the entry's hash did not change."""
    lines = ["# ptx/kernels.lock, written by `python3 ptx/lock.py --update`: one line per",
             "# built-in kernel (module, entry, hash of its renumbered PTX, registers and",
             "# static shared bytes from ptxas -v); `*` is a module's text outside its entries.",
             "# ptxas %s" % version,
             "# %-20s %-48s %-16s %5s %6s" % ("module", "entry", "hash", "regs", "smem")]
    for key in sorted(hashes_):
        h = hashes_[key]
        if key[1] == "*":
            regs = smem = "-"
        elif key in facts:
            regs, smem = (str(x) for x in facts[key])
        elif key in old and old[key][0] == h:
            regs, smem = old[key][1:]
        else:
            regs = smem = UNKNOWN
        lines.append("%-22s %-48s %-16s %5s %6s" % (key[0], key[1], h, regs, smem))
    return "\n".join(lines) + "\n"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.strip().split("\n")[0])
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--update", nargs="?", const="", metavar="DIR",
                       help="rewrite ptx/kernels.lock from DIR (default: generate afresh)")
    group.add_argument("--check", metavar="DIR", help="fail if the PTX in DIR is not the lock's")
    ap.add_argument("--lock", default=LOCK, help=argparse.SUPPRESS)
    args = ap.parse_args(argv[1:])
    updating = args.update is not None

    with tempfile.TemporaryDirectory() as tmp:
        ptx_dir = args.check or args.update or tmp
        if not args.check and not args.update:
            failures = generate.generate(tmp)
            if failures:
                print("\n".join(failures), file=sys.stderr)
                return 1
        if not os.path.isdir(ptx_dir):
            print("FAIL: %s is not a folder of PTX files (build first: meson compile -C BUILD)" % ptx_dir)
            return 1
        lock_version, old = read_lock(args.lock)
        ptxas = ptxas_check.find_ptxas()
        version, facts, failures = lock_version, {}, []
        if ptxas:
            version = ptxas_version(ptxas)
            if updating or version == lock_version:
                facts, failures = ptxas_facts(ptxas, version, ptx_dir)
            else:
                print("note: ptxas %s, the lock's is %s: registers and shared memory not compared"
                      % (version, lock_version))
                version = lock_version
        elif args.check and ptxas_check.required():
            print("FAIL: ptxas not found, and CI=true or KAIO_REQUIRE_PTXAS=1 requires it: run "
                  ".ci/cuda_toolkit.sh and source the env.sh it writes (or set PTXAS)")
            return 1
        else:
            print("note: no ptxas: registers and shared memory not %s"
                  % ("measured; entries whose hash changed get '?'" if updating else "compared"))
        text = render(version, hashes(ptx_dir), facts, old)
    for m in failures:
        print(m)
    try:
        with open(args.lock, encoding="utf-8") as fh:
            current = fh.read()
    except OSError:
        current = ""
    if updating:
        if text != current:
            with open(args.lock, "w", encoding="utf-8", newline="\n") as fh:
                fh.write(text)
        print("%s: %d line(s) changed" % (os.path.relpath(args.lock), sum(
            1 for d in difflib.ndiff(current.split("\n"), text.split("\n")) if d[:1] in "+-")))
        return 1 if failures else 0
    diff = list(difflib.unified_diff(current.split("\n"), text.split("\n"), "ptx/kernels.lock",
                                     "built from " + args.check, lineterm="", n=0))
    if diff:
        print("\n".join(diff))
        print("FAIL: ptx/kernels.lock is stale: the kernels changed.  If that is intended, run\n"
              "    python3 ptx/lock.py --update%s\nand commit the lock with the change."
              % ("" if ptxas else "   (with ptxas on PATH, for registers and shared memory)"))
        return 1
    if failures:
        return 1
    print("OK: %d line(s) match ptx/kernels.lock%s" % (len(text.split("\n")) - 6,
                                                      "" if facts else " (hashes only)"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
