"""The kernel manifest (issue 20, item 2, first step): per entry, the launch
facts the host needs, as data, written by a generator's --manifest FILE.

Today the facts come from what every entry already passes to
PtxEmitter.entry_text (its directives and its kaio-* annotation lines, which
this reads here, at generation time) plus keys a generator adds with keys();
next, generators pass the facts as fields and the build turns the manifests
into the C++ kernel table (see ptx/kaio_ptx/README.md, "The manifest")."""

import re

_entries = {}  # entry name -> facts read from its entry_text, in generation order
_given = {}    # entry name -> facts and keys a generator gave (they win)
_twins = {}    # twin entry name -> (plain entry name, select suffix): manifest.twin

_DIRECTIVE = re.compile(r"^\.(maxntid|reqntid|reqnctapercluster)\s+([\d,\s]+)$")
_ANNOTATION = re.compile(r"^// kaio-([a-z-]+): (\S+) ?(.*)$")


def _dims(text):
    dims = [int(x) for x in text.replace(" ", "").split(",") if x]
    return dims + [1] * (3 - len(dims))


def _fields(text):
    """'a=1 b=2,3 c=x' -> {'a': 1, 'b': [2, 3], 'c': 'x'}."""
    out = {}
    for item in text.split():
        key, _, value = item.partition("=")
        parts = value.split(",")
        values = [int(p) if re.fullmatch(r"-?\d+", p) else p for p in parts]
        out[key] = values[0] if len(values) == 1 else values
    return out


def record_entry(name, annotations, directives):
    """Called by PtxEmitter.entry_text for every entry."""
    facts = _entries[name] = dict(entry=name, keys={}, block=None, cluster=[1, 1, 1],
                                  dynamic_shared_bytes=0, tma=[], launch={})
    for line in directives:
        m = _DIRECTIVE.match(line.strip())
        if m:
            key = "cluster" if m.group(1) == "reqnctapercluster" else "block"
            facts[key] = _dims(m.group(2))
    for line in annotations:
        m = _ANNOTATION.match(line.strip())
        if not m or m.group(2) != name:
            continue
        tag, rest = m.group(1), m.group(3)
        if tag == "shared-bytes":
            facts["dynamic_shared_bytes"] = int(rest)
        elif tag == "tma":
            param, _, fields = rest.partition(" ")
            facts["tma"].append(dict(param=param, **_fields(fields)))
        elif tag == "launch":
            facts["launch"] = _fields(rest)


def keys(name, **values):
    """The selector keys of entry name (dtype, transposes, head_dim, tile,
    row bucket, variant, ...), as the generator's loops know them."""
    _given.setdefault(name, {"keys": {}})["keys"].update(values)


def facts(name, **values):
    """Launch facts of entry name that its entry_text does not carry (such
    as dynamic_shared_bytes from an annotation written outside it)."""
    _given.setdefault(name, {"keys": {}}).update(values)


def twin(name, twin_name, select_suffix):
    """Entry twin_name is entry name again (grid_dep.twin_module): the same
    facts and keys, selected by the plain entry's select + select_suffix."""
    if name not in _entries:
        raise SystemExit("manifest: twin of %s, which no entry_text recorded" % name)
    _entries[twin_name] = dict(_entries[name], entry=twin_name)
    given = _given.get(name, {"keys": {}})
    _given[twin_name] = dict(given, keys=dict(given["keys"]))
    _twins[twin_name] = (name, select_suffix)   # the select is known in take(): it may be the family


_GRID_DEP_WAIT = re.compile(r"^\s*(?:@!?%\w+\s+)?griddepcontrol\.wait\b", re.M)
# a load through the non-coherent path: no entry that waits may hold one
# (grid_dep.coherent_loads rewrites them)
NC_LOAD = re.compile(r"\bld\.global\.nc\b")


def grid_dep_wait(code):
    """Whether an entry's PTX (comments removed) waits for the previous grid
    (griddepcontrol.wait): the host launches exactly those with programmatic
    stream serialization, so the fact is read from what was emitted, never
    kept by hand."""
    return bool(_GRID_DEP_WAIT.search(code))


def take(files, family):
    """The manifest of one generator run: every recorded entry with the
    module (output file stem) whose text defines it, then the record is
    cleared.  files: {file name: text}."""
    where, waits = {}, {}
    for fname, text in files.items():
        starts = list(re.finditer(r"^(?:\.visible\s+)?\.entry\s+(\w+)", text, re.M))
        for i, m in enumerate(starts):
            where[m.group(1)] = fname[:-len(".ptx")]
            body = text[m.end():starts[i + 1].start() if i + 1 < len(starts) else len(text)]
            code = re.sub(r"//[^\n]*", "", body)
            waits[m.group(1)] = grid_dep_wait(code)
            if waits[m.group(1)] and NC_LOAD.search(code):
                raise SystemExit("manifest: %s waits for the previous grid but loads with "
                                 "ld.global.nc, which ptxas may move above the wait: "
                                 "grid_dep.coherent_loads" % m.group(1))
    stray = sorted(n for n in set(_entries) | set(_given) if n not in where)
    if stray:
        # keys() given a name no output defines: a typo, or a name changed after.
        raise SystemExit("manifest: facts for entries no output defines: " + ", ".join(stray))
    for name, (plain, suffix) in _twins.items():
        keys = _given[name]["keys"]
        keys["select"] = _given.get(plain, {"keys": {}})["keys"].get("select", family) + suffix
    out = [dict(facts, **_given.get(name, {}), module=where[name], family=family,
                grid_dep_wait=waits[name])
           for name, facts in _entries.items()]
    _entries.clear()
    _given.clear()
    _twins.clear()
    return sorted(out, key=lambda f: (f["module"], f["entry"]))
