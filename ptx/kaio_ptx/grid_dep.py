"""Programmatic dependent launch, the kernel side (sm_90, PTX 7.8).

The host launches every entry whose PTX executes griddepcontrol.wait with
programmatic stream serialization (KernelInfo::grid_dep_wait, read from the
emitted text by manifest.take), so the next kernel on the stream may start
while this one runs.  The rule: launch_dependents first (a kernel whose
successor waits for its completion anyway has nothing to publish earlier),
then only hints (L2 prefetches) and address arithmetic from parameters, then
griddepcontrol.wait before any real global read or write: the previous grid
may write what we read (RAW) and may still read what we write (WAR).

A kernel of an sm_80 module gets its dependent launch as a twin
(twin_module): the same entry again, in an sm_90 module, with the two
instructions in front of its body.  The wait returns only when the previous
grid has completed and its stores are visible, so a twin may follow or
precede any kernel (a last-CTA combine included) with the plain kernel's
bits; a chain of twins lets every launch of a decode step start in the tail
of the one before."""

import re

from kaio_ptx import manifest

TWIN_SUFFIX = "_pdl"   # entry name of a twin; its selector is the plain one's + TWIN_SUFFIX
PREAMBLE = "\tgriddepcontrol.launch_dependents;\n\tgriddepcontrol.wait;\n"
_ENTRY = re.compile(r"^\.visible \.entry (\w+)\(", re.M)
_ANY_ENTRY = re.compile(r"^[ \t]*(?:\.\w+\s+)*\.entry\s+(\w+)", re.M)
# entry_text's layout: "{", the .reg / shared declarations, an empty line, the body
_BODY = re.compile(r"^\{\n(?:\t\.[^\n]*\n)*\n", re.M)


def coherent_loads(text):
    """text with every ld.global.nc made a plain ld.global (same data, same bits).
    A dependent launch starts before the previous grid ends, so what that grid
    writes is not read-only for our kernel's lifetime, as .nc asserts; and
    ptxas moves .nc loads above griddepcontrol.wait (seen on the int4 matvec:
    x read before the previous link had written it).  manifest.take refuses
    an entry that waits and still holds one."""
    return manifest.NC_LOAD.sub("ld.global", text)


def dependent_launch(k, prefetch=None):
    """Emits launch_dependents, prefetch() (hints only: no load into the CTA,
    no store), then the wait."""
    k.op("griddepcontrol.launch_dependents")
    if prefetch:
        prefetch()
    k.op("griddepcontrol.wait")


def twin_module(text):
    """The sm_90 twin of a module's text (its preamble, .version/.target left
    to isa.resolve, and its entries as PtxEmitter.entry_text wrote them):
    every entry renamed NAME_pdl (its comments and annotations too), with
    launch_dependents and the wait as the first instructions of its body,
    before any load or store, and its .nc loads plain (coherent_loads), so
    nothing else changes (same arithmetic, same bits).  Records each twin in
    the manifest with the plain entry's facts and keys, its select being the
    plain one's + TWIN_SUFFIX."""
    names = _ENTRY.findall(text)
    if not names:
        raise SystemExit("grid_dep.twin_module: no .entry in the text")
    others = sorted(set(_ANY_ENTRY.findall(text)) - set(names))
    if others:
        # an entry written otherwise would keep its name and go without the wait
        raise SystemExit("grid_dep.twin_module: not a '.visible .entry NAME(': " + ", ".join(others))
    for name in names:
        text = re.sub(r"\b%s\b" % name, name + TWIN_SUFFIX, text)
    out, pos = [], 0
    entries = list(_ENTRY.finditer(text))
    for i, m in enumerate(entries):
        # the body of this entry, never the next one's
        end = entries[i + 1].start() if i + 1 < len(entries) else len(text)
        body = _BODY.search(text, m.end(), end)
        if not body:
            raise SystemExit("grid_dep.twin_module: %s: no body after its declarations" % m.group(1))
        out += [text[pos:body.end()], PREAMBLE]
        pos = body.end()
    for name in names:
        manifest.twin(name, name + TWIN_SUFFIX, TWIN_SUFFIX)
    return coherent_loads("".join(out) + text[pos:])
