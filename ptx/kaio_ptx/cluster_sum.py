"""K split over the CTAs of a cluster (sm_90, PTX 8.1: st.async): each CTA
holds an f32 partial of the same output tile; rank r owns part r of it,
receives the other ranks' partials of that part in its shared memory and
adds them in rank order, so the bits do not depend on timing or on which
rank owns what.

Accumulator registers are taken in quads (acc[4q .. 4q + 3], one v4 store),
a part being a run of quads.  The 256 consumer threads of each sender write
their quads side by side: at the owner, sender slot i (the senders in rank
order, the owner left out), quad j of the part, thread c lies at
    base + i * slot + (j * 256 + c) * 16,
slot being the largest part's bytes.  Each st.async completes its bytes on
the owner's `recv` mbarrier, whose one arrival (expecting every sender's
bytes) comes from consumer thread 0 before the cluster barrier; the owner
waits for that phase and nothing else, so no second cluster barrier is
needed.  The caller's buffers must be free in every CTA once all of the
cluster's threads are past the barrier (drained TMA stages)."""

from kaio_ptx import mbarrier

THREADS = 256           # two consumer warpgroups
QUAD = THREADS * 16     # one quad of every consumer thread


def cluster_barrier(k):
    """Every thread of every CTA of the cluster (not .aligned: a producer
    warp may arrive diverged); release/acquire orders the shared::cluster
    stores around it."""
    k.op("barrier.cluster.arrive.release")
    k.op("barrier.cluster.wait.acquire")


def bounds(nquads, splits, unit=1):
    """Quad ranges [q0, q1) of the parts: as even as whole units of `unit`
    quads allow (a store path may pair quads)."""
    units = nquads // unit
    assert units * unit == nquads and units >= splits
    return [(r * units // splits * unit, (r + 1) * units // splits * unit) for r in range(splits)]


def slot_bytes(parts):
    return max(q1 - q0 for q0, q1 in parts) * QUAD


def sum_parts(k, acc, parts, base, recv_off, store, owns):
    """Adds the cluster's partials of each rank's part (consumer threads
    128..383; shared buffers from base, the recv mbarrier at base +
    recv_off); then store(r, mine, q0), mine being acc[4 q0 .. 4 q1)
    holding the sums, must store part r and leave (every rank's code is its
    own branch).  owns(r): what rank r owns, in words, for the PTX."""
    splits = len(parts)
    rank = k.r("mov.u32", "%cluster_ctarank")
    ctid = k.r("sub.u32", k.r("mov.u32", "%tid.x"), 128)
    slot = k.r("add.u32", base, k.r("shl.b32", ctid, 4))
    recv = k.r("add.u32", base, recv_off)
    size = slot_bytes(parts)
    sizes = {(q1 - q0) * QUAD for q0, q1 in parts}
    if len(sizes) == 1:
        expect = (splits - 1) * sizes.pop()
    else:
        expect = k.r("mov.u32", (splits - 1) * (parts[0][1] - parts[0][0]) * QUAD)
        for r in range(1, splits):
            k.op("@%s mov.u32 %s, %d" % (k.p("setp.eq.u32", rank, r), expect,
                                         (splits - 1) * (parts[r][1] - parts[r][0]) * QUAD))
    k.note("recv expects every other rank's partial before any may send it")
    mbarrier.arrive_expect_tx(k, recv, expect, pred=k.p("setp.eq.u32", ctid, 0))
    cluster_barrier(k)
    ranks = [k.label("rank%d_part" % r) for r in range(1, splits)]
    for r in range(1, splits):
        k.op("@%s bra.uni %s" % (k.p("setp.eq.u32", rank, r), ranks[r - 1]))
    for r in range(splits):
        if r:
            k.place(ranks[r - 1])
        q0, q1 = parts[r]
        k.note("rank %d: owns %s, sends the other parts to their owners" % (r, owns(r)))
        for o in range(splits):
            if o == r:
                continue
            remote = k.r("mapa.shared::cluster.u32", slot, o)
            remote_recv = k.r("mapa.shared::cluster.u32", recv, o)
            at = (r if r < o else r - 1) * size           # the sender's slot at the owner
            p0, p1 = parts[o]
            for j, q in enumerate(range(p0, p1)):
                k.op("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%s+%d], {%s}, [%s]"
                     % (remote, at + j * QUAD, ", ".join(acc[4 * q:4 * q + 4]), remote_recv))
        mbarrier.wait(k, recv, "0", "c_recv", scope="cluster")
        mine = acc[4 * q0:4 * q1]
        for j in range(q1 - q0):
            quads = {}
            for src in range(splits):
                if src != r:
                    quads[src] = k.regs("f", 4)
                    k.op("ld.shared.v4.f32 {%s}, [%s+%d]" % (", ".join(quads[src]), slot,
                                                              (src if src < r else src - 1) * size + j * QUAD))
            for i in range(4):
                # ((p0 + p1) + p2) + ..., p_r from the registers (the running
                # sum stays out of mine[] until the last add: mine[] is a term)
                terms = [mine[4 * j + i] if src == r else quads[src][i] for src in range(splits)]
                total = terms[0]
                for n, tm in enumerate(terms[1:], 2):
                    out = mine[4 * j + i] if n == splits else k.reg("f")
                    k.op("add.f32 %s, %s, %s" % (out, total, tm))
                    total = out
        store(r, mine, q0)
