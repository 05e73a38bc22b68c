"""Programmatic dependent launch, the kernel side (sm_90, PTX 7.8).

The host launches every entry whose PTX executes griddepcontrol.wait with
programmatic stream serialization (KernelInfo::grid_dep_wait, read from the
emitted text by manifest.take), so the next kernel on the stream may start
while this one runs.  The rule: launch_dependents first (a kernel whose
successor waits for its completion anyway has nothing to publish earlier),
then only hints (L2 prefetches) and address arithmetic from parameters, then
griddepcontrol.wait before any real global read or write: the previous grid
may write what we read (RAW) and may still read what we write (WAR)."""


def dependent_launch(k, prefetch=None):
    """Emits launch_dependents, prefetch() (hints only: no load into the CTA,
    no store), then the wait."""
    k.op("griddepcontrol.launch_dependents")
    if prefetch:
        prefetch()
    k.op("griddepcontrol.wait")
