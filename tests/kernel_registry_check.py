#!/usr/bin/env python3
"""src/kernels/kernel_registry.py on small manifests: the selectors it writes,
and the manifests it refuses (a selector whose entries have different key
names or the same keys, a launch block that is not the entry's .maxntid).

usage: kernel_registry_check.py path/to/kernel_registry.py"""
import json
import os
import subprocess
import sys
import tempfile


def entry(name, module="m", family="fam", keys=None, block=256, launch=None, tma=None,
          grid_dep_wait=False):
    return {"entry": name, "module": module, "family": family, "keys": keys or {},
            "block": [block, 1, 1], "cluster": [1, 1, 1], "dynamic_shared_bytes": 0,
            "launch": launch or {}, "tma": tma or [], "grid_dep_wait": grid_dep_wait}


def run(tool, entries):
    with tempfile.TemporaryDirectory() as d:
        manifest, header = os.path.join(d, "g.manifest.json"), os.path.join(d, "r.hpp")
        with open(manifest, "w") as fh:
            json.dump({"entries": entries}, fh)
        r = subprocess.run([sys.executable, tool, header, manifest], capture_output=True, text=True)
        text = open(header).read() if r.returncode == 0 else ""
        return r.returncode, text, r.stderr


def main(tool):
    failures = []

    def expect(cond, what):
        if not cond:
            failures.append(what)

    ok = [entry("kaio_mm_f16_n", keys={"select": "mm", "dtype": "f16", "trans_b": False, "tile": "n128"}),
          entry("kaio_mm_bf16_n", keys={"select": "mm", "dtype": "bf16", "trans_b": False, "tile": "n128"}),
          entry("kaio_mm_f16_t", keys={"select": "mm", "dtype": "f16", "trans_b": True, "tile": "n128"}),
          entry("kaio_dot", module="a", keys={"head_dim": 64}, launch={"block": 256, "cols_per_block": 8},
                tma=[{"param": "tmap_q", "box": [64, 128]}])]
    rc, text, err = run(tool, ok)
    expect(rc == 0, "a valid manifest was refused: " + err)
    expect("constexpr KernelId mm(kaio_dtype dtype, bool trans_b) {" in text,
           "the selector takes the keys that vary, in order, as C++ types")
    expect("// 3 kernels; tile=\"n128\"." in text, "a key with one value is documented, not a parameter")
    expect("if (dtype == KAIO_DTYPE_BF16 && trans_b == false) return KernelId::mm_bf16_n;" in text,
           "a selector returns the entry with its keys")
    expect("constexpr KernelId fam() {" in text and "return KernelId::dot;" in text,
           "the family names a selector without 'select'")
    expect('{"tmap_q", {64, 128}}' in text and "8, 0, 0, 0" in text, "launch facts and boxes in the table")
    expect(text.index("KernelId::dot") < text.index("KernelId::mm_bf16_n") if text else False,
           "entries sorted by module, then name")
    rc, text, err = run(tool, [entry("kaio_w", keys={"a": 1}, grid_dep_wait=True)])
    expect(rc == 0 and "{}, true}," in text, "grid_dep_wait in the table")
    expect(", {}, false}," in run(tool, [entry("kaio_v", keys={"a": 1})])[1],
           "no grid_dep_wait: false")
    dims = [entry("kaio_at_d%d" % d, keys={"select": "at", "pass": "fwd", "head_dim": d}) for d in (128, 64)]
    rc, text, err = run(tool, dims)
    expect(rc == 0 and "namespace at {\n  inline constexpr int64_t head_dim[] = {64, 128};" in text,
           "a numeric key's values listed, sorted, under kernels::keys::<selector>")

    bad = {
        "two entries with the same keys": [ok[0], dict(ok[1], keys=dict(ok[0]["keys"]))],
        "a selector with different key names": [ok[0], entry("kaio_x", keys={"select": "mm", "dtype": "f16"})],
        "a launch block that is not .maxntid": [entry("kaio_y", keys={"a": 1}, launch={"block": 128})],
        "an entry not named kaio_*": [entry("other", keys={"a": 1})],
        "mixed value types": [entry("kaio_p", keys={"select": "s", "v": 1}),
                              entry("kaio_q", keys={"select": "s", "v": "x"})],
    }
    for what, entries in bad.items():
        rc, _, err = run(tool, entries)
        expect(rc != 0 and "kernel_registry.py:" in err, "accepted " + what)
    for f in failures:
        print("FAIL:", f)
    print("kernel_registry_check: %d checks failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
