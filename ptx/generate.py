#!/usr/bin/env python3
"""Write every built-in PTX module into one folder, for reading, for the
emulators and for ptxas.

    python3 ptx/generate.py DIR
    python3 ptx/generate.py --check-meson   # every generator and module is in ptx/meson.build

Runs every ptx/gen_*.py with --out-dir DIR (in parallel).  The build does the
same per generator (ptx/meson.build), into <build>/ptx.  No module is kept as
a .ptx file in ptx/: --check-meson fails on one."""

import concurrent.futures
import glob
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def generators():
    return sorted(glob.glob(os.path.join(HERE, "gen_*.py")))


def generate(out_dir):
    """Writes every module into out_dir; returns the failures' messages."""
    os.makedirs(out_dir, exist_ok=True)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")

    def run(gen):
        proc = subprocess.run([sys.executable, gen, "--out-dir", out_dir], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        return None if proc.returncode == 0 else "%s exited %d\n%s" % (gen, proc.returncode, proc.stdout)

    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return [m for m in pool.map(run, generators()) if m]


def unlisted():
    """The ptx/*.py and kaio_ptx/*.py files ptx/meson.build does not name:
    it cannot glob, and a file missing there would not rebuild the PTX."""
    with open(os.path.join(HERE, "meson.build"), encoding="utf-8") as fh:
        text = fh.read()
    names = [os.path.relpath(p, HERE) for p in glob.glob(os.path.join(HERE, "*.py"))
             + glob.glob(os.path.join(HERE, "kaio_ptx", "*.py"))]
    tools = {"generate.py", "lock.py", "manifest_check.py", os.path.join("kaio_ptx", "renumber.py")}
    return sorted(n for n in names if n not in tools and "'%s'" % n not in text)


def committed_ptx():
    """.ptx files in ptx/: every module is generated (the build copies none)."""
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(HERE, "*.ptx")))


def main(argv):
    if argv[1:] == ["--check-meson"]:
        missing = unlisted()
        for n in missing:
            print("FAIL: ptx/%s is not in ptx/meson.build: add it to kaio_ptx_lib, kquant_family "
                  "or ptx_generators" % n)
        stray = committed_ptx()
        for n in stray:
            print("FAIL: ptx/%s: the build does not use .ptx files kept in ptx/; write it with a "
                  "generator (ptx/kaio_ptx/README.md) and delete the file" % n)
        return 1 if missing or stray else 0
    if len(argv) != 2:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    failures = generate(argv[1])
    for m in failures:
        print(m, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
