"""The last-arrival protocol: several CTAs publish partial results to global
memory and count themselves in a per-item u32 counter; the one that counts
last (and only it) goes on to combine them, and sets the counter back to
zero for the next launch.  No CTA waits for another, so any grid is safe.

    publish: each thread's stores, fence.acq_rel.gpu, a barrier of the
             threads taking part, then one thread's atom.acq_rel.gpu.add
    combine: after the barrier that shares "last", fence.acq_rel.gpu, then
             loads of the others' partials (.cg: from L2, not a stale L1)

gen_attention_decode.py's combine_last and gen_sampling.py's split kernel
follow the same steps inline (CTA-wide, bar.sync 0)."""

from kaio_ptx.control import skip_if


def count_last(k, leader, counter, total, flag, barrier):
    """Count this CTA in the u32 at global address counter and return a
    predicate, uniform across the threads taking part, that holds in the
    CTA that counted last (the count reached total).  leader: a predicate
    true in one thread; flag: a shared u32 slot; barrier: the barrier
    instruction of the threads taking part ("bar.sync 1, 256").  The caller
    has stored its partials; the caller's threads must all pass this
    barrier before one of them reuses flag."""
    k.op("fence.acq_rel.gpu")
    k.op(barrier)
    with skip_if(k, "!" + leader, "not_counter"):
        old = k.r("atom.acq_rel.gpu.global.add.u32", "[%s]" % counter, 1)
        last = k.p("setp.eq.u32", old, k.r("sub.u32", total, 1))
        with skip_if(k, "!" + last, "not_last"):
            k.op("st.relaxed.gpu.global.u32 [%s], 0" % counter)
        k.op("st.shared.u32 [%s], %s" % (flag, k.r("selp.b32", 1, 0, last)))
    k.op(barrier)
    return k.p("setp.ne.u32", k.r("ld.shared.u32", "[%s]" % flag), 0)


def acquire(k):
    """In the last CTA, before it loads the other CTAs' partials."""
    k.op("fence.acq_rel.gpu")
