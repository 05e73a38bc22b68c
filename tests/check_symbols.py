#!/usr/bin/env python3
"""Checks libkaio's exported symbols and dynamic dependencies.

usage: check_symbols.py LIB SYMBOLS_FILE
Fails if the dynamic symbol table differs from the committed list (every
exported name must be kaio_*), or if the library records a NEEDED entry for
libcuda or libcudart: the driver is opened at run time only.
"""
import subprocess
import sys

# Symbols the toolchain adds to every shared object.
PLATFORM = {"_init", "_fini", "_edata", "_end", "__bss_start"}


def main():
    lib, symbols_file = sys.argv[1], sys.argv[2]
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True,
                         capture_output=True, text=True).stdout
    exported = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] in "TDBRWVi":
            name = parts[2].split("@")[0]
            if name not in PLATFORM and parts[2] != "KAIO_0.1":
                exported.add(name)
    exported.discard("KAIO_0.1")
    with open(symbols_file) as f:
        expected = {l.strip() for l in f if l.strip() and not l.startswith("#")}
    ok = True
    for name in sorted(exported - expected):
        print("exported but not in %s: %s" % (symbols_file, name))
        ok = False
    for name in sorted(expected - exported):
        print("listed but not exported: %s" % name)
        ok = False
    for name in sorted(exported):
        if not name.startswith("kaio_"):
            print("exported symbol without the kaio_ prefix: %s" % name)
            ok = False
    dyn = subprocess.run(["readelf", "-d", lib], check=True, capture_output=True,
                         text=True).stdout
    for line in dyn.splitlines():
        if "(NEEDED)" in line and ("libcuda" in line or "libcudart" in line):
            print("libkaio must not link the CUDA driver or runtime: " + line.strip())
            ok = False
    print("%d exported symbols checked: %s" % (len(exported), "OK" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
