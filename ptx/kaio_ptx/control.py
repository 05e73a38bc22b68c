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


def cases(k, value, options, done=None):
    """A switch on the u32 register value, uniform across the CTA: for each
    option (code, name, ...) the caller's loop body runs when value == code
    (the branch around it goes to a label "not_<name>"), then jumps to the
    label done (made here if None), placed after the last option.  Iterate
    to the end (no break), or done is never placed."""
    if done is None:
        done = k.label("done")
    for option in options:
        nxt = k.label("not_" + option[1])
        k.op("@%s bra.uni %s" % (k.p("setp.ne.u32", value, option[0]), nxt))
        yield option
        k.op("bra.uni %s" % done)
        k.place(nxt)
    k.place(done)


def _bra(pred, uni, target):
    return "%sbra%s %s" % ("@%s " % pred if pred else "", ".uni" if uni else "", target)


class Block:
    """The handle a block's with-block gets: exit_if branches past the block's
    end (a label placed after it, made on first use)."""

    def __init__(self, k, hint, uni):
        self.k, self.hint, self.uni = k, hint, uni
        self.end = None

    def exit_if(self, pred, uni=None):
        """Leave the block when pred ("%p" or "!%p") holds; always if None."""
        if self.end is None:
            self.end = self.k.label(self.hint + "_end")
        self.k.op(_bra(pred, self.uni if uni is None else uni, self.end))


class Loop(Block):
    """A Block whose again branches back to its top."""

    def __init__(self, k, hint, uni, top=None):
        Block.__init__(self, k, hint, uni)
        self.top = k.label(hint) if top is None else top

    def again(self, pred=None, uni=None):
        """Back to the top: while pred holds, or always (pred None)."""
        self.k.op(_bra(pred, self.uni if uni is None else uni, self.top))


@contextlib.contextmanager
def block(k, hint, uni=False):
    """A with-block its body can leave early, from several places: b.exit_if(pred).
    skip_if is the block with one exit at its start."""
    b = Block(k, hint, uni)
    yield b
    if b.end is not None:
        k.place(b.end)


@contextlib.contextmanager
def loop(k, hint, uni=False, skip=None, top=None):
    """A loop over the with-block's body, which tests its own condition:
    lp.again(pred) at its bottom (a do-while), or lp.exit_if(pred) at its top
    and lp.again() at its bottom (a while).  skip: a predicate tested before
    the loop that branches past it (the guard of a rotated while, whose body
    ends with lp.again(the guard's negation)).  uni: the branches are
    warp-uniform unless a call says otherwise.  top: a label the caller made
    earlier for the top, so that a branch before the loop can enter it."""
    lp = Loop(k, hint, uni, top)
    if skip is not None:
        lp.exit_if(skip)
    k.place(lp.top)
    yield lp
    if lp.end is not None:
        k.place(lp.end)


def _not(pred):
    return pred[1:] if pred.startswith("!") else "!" + pred


def if_else(k, pred, hint, uni=False, join=None, join_uni=None):
    """An if/else: `for arm in if_else(...)` runs its body twice, first as
    the then arm (arm.then is True), run when pred ("%p" or "!%p") holds,
    then as the else arm, which `@!pred bra` (named after hint) reaches past
    the then arm.  The then arm ends with a branch to join: a label made
    here and placed after the else arm if None, else the caller's (shared by
    several if/elses), which the caller places.  arm.exit_if(pred) leaves
    either arm for join.  uni: the entry branch is warp-uniform; join_uni
    (default uni): the branches to join are.  Iterate to the end (no
    break), or the else arm and join are never emitted."""
    other = k.label(hint)
    arm = Block(k, hint, uni if join_uni is None else join_uni)
    arm.end = join if join is not None else k.label(hint + "_join")
    k.op(_bra(_not(pred), uni, other))
    arm.then = True
    yield arm
    k.op(_bra(None, arm.uni, arm.end))
    k.place(other)
    arm.then = False
    yield arm
    if join is None:
        k.place(arm.end)
