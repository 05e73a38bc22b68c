#!/usr/bin/env python3
"""Assemble hand-written PTX with ptxas and report per-kernel resources.

    python3 tests/ptxas_check.py build/ptx examples   # directories: every *.ptx below them
    python3 tests/ptxas_check.py build/ptx/rows.ptx   # or files

The ptxas test runs it on examples/; the built-in modules are checked by
ptx/lock.py (the ptx-lock test), which calls check_all here.

For each file: require a .version and a .target line, run
`ptxas -arch=<target> -v -o /dev/null <file>`, and print one line per kernel
(registers, shared bytes, stack frame, spill stores/loads).  Exit 1 on any
ptxas error, missing directive or spill (a spill in a bandwidth-bound kernel is
a performance bug we want to see in CI, not in a profile).  Exit 77 (Meson's
"skipped") when no ptxas is installed, so machines without the CUDA toolkit
still pass the test suite; but exit 1 when CI=true or KAIO_REQUIRE_PTXAS=1,
where .ci/run installs the toolkit (.ci/cuda_toolkit.sh) and a missing ptxas
means the check silently stopped running.

Files are assembled in parallel (os.cpu_count() ptxas processes, largest file
first) to stay well inside the test's timeout on a small machine; the output
is printed in the files' order, the same whatever finishes first.
"""

import concurrent.futures
import os
import re
import shutil
import subprocess
import sys

SKIP = 77


def find_ptxas():
    env = os.environ.get("PTXAS")
    if env:
        return env if os.path.isfile(env) else shutil.which(env)
    found = shutil.which("ptxas")
    if found:
        return found
    for root in (os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root:
            cand = os.path.join(root, "bin", "ptxas")
            if os.path.isfile(cand) and os.access(cand, os.X_OK):
                return cand
    return None


def collect(args):
    files = []
    for arg in args:
        if os.path.isdir(arg):
            for root, dirs, names in os.walk(arg):
                dirs.sort()
                files += [os.path.join(root, n) for n in sorted(names) if n.endswith(".ptx")]
        else:
            files.append(arg)
    return files


DIRECTIVE = re.compile(r"^\s*\.(version|target)\s+([^\s/]+)", re.M)
ENTRY = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
USED = re.compile(r"Used (\d+) registers")
SMEM = re.compile(r"(\d+) bytes smem")


def parse(output):
    """ptxas -v prints, per entry: 'Compiling entry function', a stack/spill line, a 'Used' line."""
    kernels, cur = [], None
    for line in output.splitlines():
        m = ENTRY.search(line)
        if m:
            cur = {"name": m.group(1), "regs": None, "smem": 0, "stack": 0, "spill_st": 0, "spill_ld": 0}
            kernels.append(cur)
            continue
        if cur is None:
            continue
        m = FRAME.search(line)
        if m:
            cur["stack"], cur["spill_st"], cur["spill_ld"] = (int(g) for g in m.groups())
        m = USED.search(line)
        if m:
            cur["regs"] = int(m.group(1))
            s = SMEM.search(line)
            cur["smem"] = int(s.group(1)) if s else 0
    return kernels


def check_file(ptxas, path):
    """Returns (ok, rows, messages) for one file; runs in a worker thread, so
    it prints nothing itself."""
    messages = []
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        messages.append("FAIL %s: %s" % (path, exc))
        return False, [], messages
    directives = dict((m.group(1), m.group(2)) for m in DIRECTIVE.finditer(text))
    missing = [d for d in ("version", "target") if d not in directives]
    if missing:
        messages.append("FAIL %s: no .%s line" % (path, " / .".join(missing)))
        return False, [], messages
    target = directives["target"].rstrip(",")
    cmd = [ptxas, "-arch=%s" % target, "-v", "-o", os.devnull, path]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    if proc.returncode != 0:
        messages.append("FAIL %s: ptxas exited %d\n%s" % (path, proc.returncode, proc.stdout.rstrip()))
        return False, [], messages
    kernels = parse(proc.stdout)
    if not kernels:
        messages.append("FAIL %s: ptxas reported no entry functions" % path)
        return False, [], messages
    ok = True
    for k in kernels:
        if k["regs"] is None:
            messages.append("FAIL %s: no register count for %s" % (path, k["name"]))
            ok = False
        if k["spill_st"] or k["spill_ld"]:
            ok = False
    return ok, [(path, target, directives["version"], k) for k in kernels], messages


def required():
    return os.environ.get("CI") == "true" or os.environ.get("KAIO_REQUIRE_PTXAS") == "1"


def check_all(ptxas, files):
    """check_file over every file, in parallel; results in the files' order.
    The largest files start first, so a big one is not left alone at the end."""
    def size(path):
        try:
            return os.path.getsize(path)
        except OSError:
            return 0
    workers = max(1, min(os.cpu_count() or 1, len(files)))
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {path: pool.submit(check_file, ptxas, path) for path in sorted(files, key=size, reverse=True)}
        return [futures[path].result() for path in files]


def main(argv):
    if len(argv) < 2:
        print("usage: %s FILE.ptx|DIR ..." % argv[0], file=sys.stderr)
        return 2
    ptxas = find_ptxas()
    if not ptxas:
        if required():
            print("FAIL: ptxas not found, and CI=true or KAIO_REQUIRE_PTXAS=1 requires it: run "
                  ".ci/cuda_toolkit.sh and source the env.sh it writes (or set PTXAS)")
            return 1
        print("SKIP: ptxas not found (set PTXAS or put the CUDA toolkit's bin on PATH)")
        return SKIP
    files = collect(argv[1:])
    if not files:
        print("FAIL: no .ptx files under %s" % " ".join(argv[1:]))
        return 1
    ok, rows = True, []
    for file_ok, file_rows, messages in check_all(ptxas, files):
        for m in messages:
            print(m)
        ok &= file_ok
        rows += file_rows
    if rows:
        width = max(len(k["name"]) for _, _, _, k in rows)
        print("%-*s  %-6s %5s %6s %6s %8s %8s  %s" % (width, "kernel", "target", "regs", "smem", "stack",
                                                    "spill_st", "spill_ld", "file"))
        for path, target, _, k in rows:
            flag = "  <-- SPILL" if (k["spill_st"] or k["spill_ld"]) else ""
            print("%-*s  %-6s %5s %6d %6d %8d %8d  %s%s" % (width, k["name"], target, k["regs"], k["smem"],
                                                          k["stack"], k["spill_st"], k["spill_ld"], path, flag))
    print("%s: %d kernel(s) in %d file(s)" % ("OK" if ok else "FAIL", len(rows), len(files)))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
