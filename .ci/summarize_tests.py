#!/usr/bin/env python3
"""Prints one 'N passed, N failed, N skipped' line for the whole run,
counting each GoogleTest case inside the test binaries and each other Meson
test as one."""
import json
import re
import sys

passed = failed = skipped = 0
with open(sys.argv[1]) as f:
    for line in f:
        t = json.loads(line)
        out = t.get("stdout", "") or ""
        m = re.search(r"\[==========\] (\d+) tests? from .* ran", out)
        if m:
            p = re.search(r"\[  PASSED  \] (\d+) test", out)
            s = re.search(r"\[  SKIPPED \] (\d+) test", out)
            fl = re.search(r"\[  FAILED  \] (\d+) test", out)
            passed += int(p.group(1)) if p else 0
            skipped += int(s.group(1)) if s else 0
            failed += int(fl.group(1)) if fl else 0
            if t["result"] not in ("OK", "SKIP") and not fl:
                failed += 1
        elif t["result"] == "OK":
            passed += 1
        elif t["result"] == "SKIP":
            skipped += 1
        else:
            failed += 1
print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
