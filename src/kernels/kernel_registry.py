#!/usr/bin/env python3
"""Turns the generators' kernel manifests into the kernel registry, a C++
header: ModuleId and KernelId, each kernel's launch facts as a constexpr
table, and one typed selector per group of kernels, so no source file keeps
kernel names, indices or launch facts by hand.

usage: kernel_registry.py OUTPUT.hpp GEN.manifest.json...

A selector is named by an entry's keys["select"] (else its family) and
takes the keys whose values differ within its group, as C++ types: dtype as
kaio_dtype, format and mode as kaio_quant_format / kaio_quant_mode, bools
as bool, numbers as int64_t, other strings as an enum class named after
the key ("" is `none`); kernels::keys::<selector>::<key> lists the values
of each numeric key, for argument checks and messages.  It returns the KernelId of the entry with those
keys, or KernelId::count when no generator wrote one: the module cache
reports that as an internal error.  Calling a selector that does not exist,
or with a key it does not have, is a compile error."""
import json
import sys

# kaio.h's names for key values the C API already has a type for.
C_TYPES = {
    "dtype": ("kaio_dtype", {"f32": "KAIO_DTYPE_F32", "f16": "KAIO_DTYPE_F16",
                             "bf16": "KAIO_DTYPE_BF16", "s8": "KAIO_DTYPE_I8",
                             "u32": "KAIO_DTYPE_U32"}),
    "format": ("kaio_quant_format", {"q8_0": "KAIO_QUANT_Q8_0", "q4_k": "KAIO_QUANT_Q4_K",
                                     "q5_k": "KAIO_QUANT_Q5_K", "q6_k": "KAIO_QUANT_Q6_K"}),
    "mode": ("kaio_quant_mode", {"ggml": "KAIO_QUANT_MODE_GGML",
                                 "candle": "KAIO_QUANT_MODE_CANDLE"}),
}
# Parameter order of every selector; keys not listed follow, sorted.
ORDER = ["pass", "op", "weights", "format", "mode", "variant", "dtype", "trans_a", "trans_b",
         "tile", "tile_m", "split_k", "head_dim", "rows_per_cta", "rows", "row_bucket"]
LAUNCH = ["cols_per_block", "shared_fixed", "ring_stage", "ring_stages"]
MAX_TMA = 4


def fail(msg):
    raise SystemExit("kernel_registry.py: " + msg)


def camel(key):
    return "".join(p.capitalize() for p in key.split("_"))


def enumerator(value):
    return value or "none"


def dims(v):
    return "{%s}" % ", ".join(str(int(x)) for x in v)


def load(paths):
    entries = []
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            entries += json.load(fh)["entries"]
    entries.sort(key=lambda e: (e["module"], e["entry"]))
    for e in entries:
        if not e["entry"].startswith("kaio_"):
            fail("%s: entry names start with kaio_" % e["entry"])
        e["id"] = e["entry"][len("kaio_"):]
        e["keys"] = dict(e["keys"])
        e["select"] = e["keys"].pop("select", e["family"])
        launch = e.get("launch", {})
        lb = launch.get("block")
        if lb is not None and (lb if isinstance(lb, int) else lb[0]) != e["block"][0]:
            fail("%s: launch block %s is not its .maxntid %s" % (e["entry"], lb, e["block"]))
        if len(e["tma"]) > MAX_TMA:
            fail("%s: more than %d tensor maps" % (e["entry"], MAX_TMA))
    return entries


def groups_of(entries):
    groups = {}
    for e in entries:
        groups.setdefault(e["select"], []).append(e)
    return dict(sorted(groups.items()))


def param_type(key, values):
    if key in C_TYPES:
        return C_TYPES[key][0]
    if all(isinstance(v, bool) for v in values):
        return "bool"
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return "int64_t"
    if all(isinstance(v, str) for v in values):
        return "%s" % camel(key)
    fail("key %s mixes value types: %s" % (key, sorted(map(str, values))))


def literal(key, value, ctype):
    if key in C_TYPES:
        return C_TYPES[key][1][value]
    if ctype == "bool":
        return "true" if value else "false"
    if ctype == "int64_t":
        return str(value)
    return "%s::%s" % (ctype, enumerator(value))


def key_lists(name, group):
    """The values of each numeric key a selector takes, sorted: what ops
    check arguments against and list in messages."""
    out = []
    for k in sorted({k for e in group for k in e["keys"]}):
        values = sorted({e["keys"][k] for e in group})
        if len(values) > 1 and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            out.append("  inline constexpr int64_t %s[] = {%s};" % (k, ", ".join(map(str, values))))
    return ["namespace %s {" % name] + out + ["}  // namespace %s" % name] if out else []


def selector(name, group, enums):
    keysets = {tuple(sorted(e["keys"])) for e in group}
    if len(keysets) != 1:
        fail("selector %s: its entries have different keys %s" % (name, sorted(keysets)))
    keys = sorted(keysets.pop(), key=lambda k: (ORDER.index(k) if k in ORDER else len(ORDER), k))
    params = [k for k in keys if len({json.dumps(e["keys"][k]) for e in group}) > 1]
    types = {k: param_type(k, [e["keys"][k] for e in group]) for k in params}
    for k in params:
        if types[k] == camel(k):
            enums.setdefault(camel(k), set()).update(e["keys"][k] for e in group)
    seen = set()
    for e in group:
        sig = tuple(json.dumps(e["keys"][k]) for k in params)
        if sig in seen:
            fail("selector %s: two entries with keys %s" % (name, dict(zip(params, sig))))
        seen.add(sig)
    fixed = ", ".join("%s=%s" % (k, json.dumps(group[0]["keys"][k])) for k in keys if k not in params)
    lines = ["// %d kernel%s%s." % (len(group), "s" if len(group) > 1 else "",
                                   "; " + fixed if fixed else ""),
             "constexpr KernelId %s(%s) {" % (name, ", ".join("%s %s" % (types[k], k) for k in params))]
    for e in group:
        if params:
            cond = " && ".join("%s == %s" % (k, literal(k, e["keys"][k], types[k])) for k in params)
            lines.append("  if (%s) return KernelId::%s;" % (cond, e["id"]))
        else:
            lines.append("  return KernelId::%s;" % e["id"])
    if params:
        lines.append("  return KernelId::count;")
    lines.append("}")
    return lines


def tma_rows(e):
    rows = ['{"%s", %s}' % (t["param"], dims(t["box"])) for t in e["tma"]]
    return "{%s}" % ", ".join(rows) if rows else "{}"


def render(entries):
    modules = sorted({e["module"] for e in entries})
    out = ["// Generated by src/kernels/kernel_registry.py from the generators' manifests",
           "// (<build>/ptx/*.manifest.json). Do not edit: change the generator.",
           "#pragma once", "", "#include <kaio/kaio.h>", "", "#include <cstdint>",
           "#include <string_view>", "", "namespace kaio {", "",
           "// A built-in module: one PTX file in <build>/ptx, embedded.",
           "enum class ModuleId : uint8_t {"]
    out += ["  %s," % m for m in modules] + ["  count", "};", ""]
    out += ["inline constexpr const char *kModuleNames[] = {%s};" % ", ".join('"%s"' % m for m in modules),
            "constexpr const char *module_name(ModuleId m) { return kModuleNames[static_cast<int>(m)]; }",
            "", "// A built-in kernel; KernelId::count is none (see the selectors).",
            "enum class KernelId : uint16_t {"]
    out += ["  %s," % e["id"] for e in entries] + ["  count", "};", ""]
    out += ["// A TMA tensor map parameter and the box its kernel loads (inner, outer).",
            "struct TmaBox {", "  std::string_view param;", "  unsigned box[2];", "};", "",
            "// What launching a kernel takes, from its generator. cols_per_block: the",
            "// columns (or rows) one block covers; shared_fixed, ring_stage,",
            "// ring_stages: a kernel whose launch adds a sized tail to shared_fixed",
            "// bytes of dynamic shared memory, up to dynamic_shared_bytes, and a ring",
            "// of up to ring_stages stages of ring_stage bytes. 0 where not used.",
            "struct KernelInfo {", "  const char *name;", "  ModuleId module;", "  unsigned block[3];",
            "  unsigned dynamic_shared_bytes;", "  unsigned cluster[3];",
            "  // The CTA tile of a GEMM-like kernel: M and N per block, K per step.",
            "  unsigned tile_m, tile_n, tile_k;"]
    out += ["  unsigned %s;" % f for f in LAUNCH]
    out += ["  TmaBox tma[%d];" % MAX_TMA,
            "  // The kernel executes griddepcontrol.wait (manifest.grid_dep_wait, read",
            "  // from its PTX): it is launched with programmatic stream serialization.",
            "  bool grid_dep_wait;", "", "  // The box of tensor map `param`, or nullptr.",
            "  constexpr const unsigned *tma_box(std::string_view param) const {",
            "    for (const TmaBox &t : tma)", "      if (!t.param.empty() && t.param == param) return t.box;",
            "    return nullptr;", "  }", "};", "",
            "inline constexpr KernelInfo kKernels[] = {"]
    for e in entries:
        launch = e.get("launch", {})
        out.append('    {"%s", ModuleId::%s, %s, %d, %s, %s, %s, %s, %s},' % (
            e["entry"], e["module"], dims(e["block"]), e["dynamic_shared_bytes"], dims(e["cluster"]),
            ", ".join(str(int(t)) for t in e.get("tile", [0, 0, 0])),
            ", ".join(str(int(launch.get(f, 0))) for f in LAUNCH), tma_rows(e),
            "true" if e.get("grid_dep_wait") else "false"))
    out += ["};", "static_assert(sizeof kKernels / sizeof kKernels[0] == static_cast<size_t>(KernelId::count));",
            "", "constexpr const KernelInfo &kernel_info(KernelId id) { return kKernels[static_cast<int>(id)]; }",
            "", "// Selectors: the kernel with the given keys (see kernel_registry.py).",
            "namespace kernels {", ""]
    enums, bodies, lists = {}, [], []
    for name, group in groups_of(entries).items():
        bodies += selector(name, group, enums) + [""]
        lists += key_lists(name, group)
    for enum, values in sorted(enums.items()):
        out.append("enum class %s : uint8_t { %s };" % (enum, ", ".join(enumerator(v) for v in sorted(values))))
    out += [""] + bodies
    out += ["// The values of each numeric key, per selector: kernels::keys::attn_f32::head_dim.",
            "namespace keys {"] + lists + ["}  // namespace keys", "",
                                           "}  // namespace kernels", "}  // namespace kaio", ""]
    return "\n".join(out)


def main():
    if len(sys.argv) < 3:
        fail("usage: kernel_registry.py OUTPUT.hpp GEN.manifest.json...")
    text = render(load(sys.argv[2:]))
    with open(sys.argv[1], "w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)


if __name__ == "__main__":
    main()
