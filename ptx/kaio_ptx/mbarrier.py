"""mbarriers and the stage rings they guard (sm_90)."""

from kaio_ptx.control import skip_if


def init(k, tid, bars, inits):
    """Thread 0 initialises the mbarriers at bars + offset with their
    arrival counts ((offset, count) in order), fences them for the async
    proxy, then the whole CTA synchronises."""
    with skip_if(k, k.p("setp.ne.u32", tid, 0), "no_init"):
        for off, count in inits:
            k.op("mbarrier.init.shared::cta.b64 [%s+%d], %d" % (bars, off, count))
        k.op("fence.mbarrier_init.release.cluster")
        k.op("fence.proxy.async.shared::cta")
    k.op("bar.sync 0")


def wait(k, bar, parity, hint, scope=None):
    """Spin on mbarrier.try_wait.parity until phase `parity` of bar has
    completed; scope "cluster": acquire at cluster scope (a phase completed by
    a peer CTA's stores), else the default (cta).  A parity names one of two
    phases, so wait only for bar's current phase: a wait for the phase after
    it passes at once, on the older phase of the same parity (a consumer
    whose uses of a stage alternate with another's must first wait its turn;
    bench/RESULTS.md, session 21)."""
    top = k.label(hint)
    p = k.reg("p")
    k.place(top)
    sem = ".acquire.%s" % scope if scope else ""
    k.op("mbarrier.try_wait.parity%s.shared::cta.b64 %s, [%s], %s" % (sem, p, bar, parity))
    k.op("@!%s bra %s" % (p, top))


def arrive(k, bar, pred=None):
    """One arrival on bar (under pred)."""
    k.op("%smbarrier.arrive.shared::cta.b64 _, [%s]" % ("@%s " % pred if pred else "", bar))


def arrive_expect_tx(k, bar, nbytes, pred=None):
    """One arrival on bar (under pred) that also expects nbytes of async
    copies to complete it."""
    k.op("%smbarrier.arrive.expect_tx.shared::cta.b64 _, [%s], %s"
         % ("@%s " % pred if pred else "", bar, nbytes))


def expect_tx(k, bar, nbytes):
    """nbytes more async-copy bytes for bar's current phase, without arriving."""
    k.op("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%s], %s" % (bar, nbytes))


def advance_ring(k, s, ph, stages, mov="mov.u32"):
    """Stage s of a ring of `stages` (a constant or a register) to the next;
    the phase bit ph flips on wrap.  mov: the opcode that resets s (the
    k-quant stream kernel's ring has mov.b32)."""
    k.op("add.u32 %s, %s, 1" % (s, s))
    wrap = k.p("setp.eq.u32", s, stages)
    k.op("@%s %s %s, 0" % (wrap, mov, s))
    k.op("@%s xor.b32 %s, %s, 1" % (wrap, ph, ph))
