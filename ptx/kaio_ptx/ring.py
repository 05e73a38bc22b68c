"""The sm_90a kernels' producer / consumer stage ring: stages of shared
memory, each guarded by a pair of mbarriers.  full[s] (count 1) completes
when the producer has arrived with expect_tx and the async copies' bytes
have landed; empty[s] completes when every consumer has arrived after
reading the stage.  The stage index s and the phase bit ph advance
together; the producer waits empty with ph ^ 1 (a fresh barrier passes
parity 1), the consumers wait full with ph."""

from kaio_ptx import mbarrier


class Ring:
    """A ring of `stages` stages at the barriers' base register bars.  One
    object per role (producer or consumer code path): its constructor
    writes s and ph (both 0).

    full, empty: where the two barrier arrays start, a byte offset from
    bars (0: bars itself) or a register holding the address.  A kernel with
    more than one pair per stage passes the pair to each call.

    stages: a constant or a register (a depth chosen at run time).

    mad: a stage's barrier is mad.lo(s, 8, array); else add(array, s << 3),
    with s << 3 (`offset()`) computed once where a caller passes it on.
    mov: the opcode that sets s and ph to 0, at the start and on a wrap
    (the k-quant stream kernel's ring has mov.b32)."""

    def __init__(self, k, bars, stages, full, empty, mad=False, mov="mov.u32"):
        self.k, self.bars, self.stages = k, bars, stages
        self.full, self.empty, self.mad, self.mov = full, empty, mad, mov
        self.s = k.reg("r")
        k.op("%s %s, 0" % (mov, self.s))
        self.ph = k.reg("r")
        k.op("%s %s, 0" % (mov, self.ph))

    @staticmethod
    def inits(stages, full, empty, consumers):
        """mbarrier.init's (offset, count) list for a ring whose barrier
        arrays start at byte offsets full and empty: per stage full (count
        1: the producer's arrive.expect_tx) then empty (one arrival per
        consumer)."""
        return [x for s in range(stages) for x in ((full + 8 * s, 1), (empty + 8 * s, consumers))]

    def array(self, at):
        if isinstance(at, str):
            return at
        return self.bars if at == 0 else self.k.r("add.u32", self.bars, at)

    def offset(self, s=None):
        """s << 3: a stage's byte offset inside a barrier array."""
        return self.k.r("shl.b32", self.s if s is None else s, 3)

    def bar(self, at, s=None, off8=None):
        """The barrier of stage s (the ring's by default) in the array at `at`."""
        k, s = self.k, self.s if s is None else s
        base = self.array(at)
        if self.mad:
            return k.r("mad.lo.u32", s, 8, base)
        return k.r("add.u32", base, self.offset(s) if off8 is None else off8)

    def parity(self):
        """The producer's parity for empty: ph ^ 1."""
        return self.k.r("xor.b32", self.ph, 1)

    def wait_empty(self, parity=None, empty=None, off8=None, hint="p_empty"):
        """Producer: wait until the consumers released the stage (phase
        parity, ph ^ 1 by default)."""
        empty = self.empty if empty is None else empty
        mbarrier.wait(self.k, self.bar(empty, off8=off8), self.parity() if parity is None else parity, hint)

    def acquire(self, nbytes, full=None, empty=None, off8=None, parity=None, hint="p_empty"):
        """Producer: wait_empty, then arrive on the stage's full barrier
        expecting nbytes of async copies; returns that barrier (the copies
        complete on it)."""
        full = self.full if full is None else full
        self.wait_empty(parity, empty, off8, hint)
        bar = self.bar(full, off8=off8)
        mbarrier.arrive_expect_tx(self.k, bar, nbytes)
        return bar

    def wait_full(self, full=None, s=None, ph=None, hint="c_full"):
        """Consumer: wait until stage s (phase ph; the ring's by default) is loaded."""
        full = self.full if full is None else full
        mbarrier.wait(self.k, self.bar(full, s), self.ph if ph is None else ph, hint)

    def release(self, pred, s=None, empty=None):
        """Consumer: arrive (under pred) on stage s's empty barrier: its
        reads are done, the producer may refill it."""
        empty = self.empty if empty is None else empty
        mbarrier.arrive(self.k, self.bar(empty, s), pred)

    def back(self, n):
        """The stage n behind the current one."""
        k = self.k
        return k.r("rem.u32", k.r("add.u32", self.s, self.stages - n), self.stages)

    def advance(self):
        mbarrier.advance_ring(self.k, self.s, self.ph, self.stages, self.mov)
