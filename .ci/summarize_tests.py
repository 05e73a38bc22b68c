#!/usr/bin/env python3
"""Prints one 'N passed, N failed, N skipped' line for the whole run,
counting each GoogleTest case inside the test binaries and each other Meson
test as one.

Usage: summarize_tests.py TESTLOG_JSON [RESULTS_FILE...]
Each RESULTS_FILE holds 'PASSED FAILED SKIPPED LABEL' lines (from
bindings/check_bindings.sh); they are added to the total, and each part is
printed on its own line first. A missing RESULTS_FILE counts as one failure,
as does a missing test log."""
import json
import os
import re
import sys

passed = failed = skipped = 0
parts = []


def count_meson(path):
    global passed, failed, skipped
    p = f = s = 0
    with open(path) as log:
        for line in log:
            t = json.loads(line)
            out = t.get("stdout", "") or ""
            m = re.search(r"\[==========\] (\d+) tests? from .* ran", out)
            if m:
                pm = re.search(r"\[  PASSED  \] (\d+) test", out)
                sm = re.search(r"\[  SKIPPED \] (\d+) test", out)
                fm = re.search(r"\[  FAILED  \] (\d+) test", out)
                p += int(pm.group(1)) if pm else 0
                s += int(sm.group(1)) if sm else 0
                f += int(fm.group(1)) if fm else 0
                if t["result"] not in ("OK", "SKIP") and not fm:
                    f += 1
            elif t["result"] == "OK":
                p += 1
            elif t["result"] == "SKIP":
                s += 1
            else:
                f += 1
    parts.append(("meson test", p, f, s))
    passed += p
    failed += f
    skipped += s


def count_results(path):
    global passed, failed, skipped
    with open(path) as res:
        for line in res:
            fields = line.split(None, 3)
            if len(fields) < 3:
                continue
            p, f, s = (int(x) for x in fields[:3])
            label = fields[3].strip() if len(fields) > 3 else os.path.basename(path)
            parts.append((label, p, f, s))
            passed += p
            failed += f
            skipped += s


for i, path in enumerate(sys.argv[1:]):
    try:
        (count_meson if i == 0 else count_results)(path)
    except OSError as e:
        parts.append(("%s: %s" % (path, e.strerror), 0, 1, 0))
        failed += 1

if len(parts) > 1:
    for label, p, f, s in parts:
        print("  %s: %d passed, %d failed, %d skipped" % (label, p, f, s))
print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
