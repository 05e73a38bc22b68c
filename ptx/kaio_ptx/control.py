"""Structured control flow over labels and branches, so a body's entry and
exit cannot drift apart.  Labels are allocated in the order the hand-written
branches allocated them, so moving code onto these keeps the PTX."""

import contextlib


@contextlib.contextmanager
def skip_if(k, pred, hint, uni=False):
    """The with-block's body runs unless pred ("%p" or "!%p") holds: a branch
    over it to a label named after hint.  uni: the branch is warp-uniform."""
    skip = k.label(hint)
    k.op("@%s bra%s %s" % (pred, ".uni" if uni else "", skip))
    yield
    k.place(skip)


def cases(k, value, options, done):
    """A switch on the u32 register value, uniform across the CTA: for each
    option (code, name, ...) the caller's loop body runs when value == code
    (the branch around it goes to a label "not_<name>"), then jumps to the
    label done, placed after the last option.  Iterate to the end (no
    break), or done is never placed."""
    for option in options:
        nxt = k.label("not_" + option[1])
        k.op("@%s bra.uni %s" % (k.p("setp.ne.u32", value, option[0]), nxt))
        yield option
        k.op("bra.uni %s" % done)
        k.place(nxt)
    k.place(done)
