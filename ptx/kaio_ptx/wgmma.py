"""wgmma (sm_90a warpgroup MMA): shared-memory matrix descriptors, the
fence / commit_group / wait_group protocol and the mma_async forms the
kernels use."""


def desc(k, addr, lbo, sbo):
    """64-bit descriptor of the 128-B-swizzled tile at shared address addr:
    leading / stride byte offsets lbo, sbo (bits 16-29, 32-45, >> 4),
    swizzle mode 1 = 128 B (bits 62-63).  addr must be in the CTA's own
    window (below 2^18; a cluster kernel's shared addresses go through
    kaio_ptx/tma.py cta_window): a rank in bits 24+ would land in the LBO,
    wrong on ranks >= 1 wherever the LBO is read, i.e. MN-major operands of
    more than one 64-wide panel (bench/RESULTS.md, session 22)."""
    lo = k.r("or.b32", k.r("shr.u32", addr, 4), (lbo >> 4) << 16)
    d = k.reg("rd")
    k.op("mov.b64 %s, {%s, %s}" % (d, lo, k.r("mov.b32", (sbo >> 4) | (1 << 30))))
    return d


def advance(k, d, nbytes):
    """Descriptor d moved nbytes on in shared memory (d itself for 0)."""
    return d if nbytes == 0 else k.rd("add.s64", d, nbytes >> 4)


def fence(k):
    """Before the first wgmma that reads registers or accumulators written since."""
    k.op("wgmma.fence.sync.aligned")


def commit(k):
    k.op("wgmma.commit_group.sync.aligned")


def wait(k, pending):
    """Until at most `pending` commit groups are in flight."""
    k.op("wgmma.wait_group.sync.aligned %d" % pending)


def mma(k, dt, n, acc, a, b, scale_d, trans_a=0, trans_b=0):
    """acc = A B + (scale_d ? acc : 0), one wgmma.mma_async of shape
    m64 n k(16 | 32): acc is this thread's fragment (n / 2 registers), b B's
    descriptor, a A's descriptor or (16-bit inputs only) its 4 registers.
    scale_d: 0, 1 or a predicate.  dt "f16" / "bf16": k16, f32 accumulation,
    operand scales 1, transposes trans_a (A from shared memory only) and
    trans_b.  dt "s8": k32, s32 accumulation, K-major operands (no scales
    or transposes)."""
    acc = "{%s}" % ", ".join(acc)
    if dt == "s8":
        assert not (trans_a or trans_b), "s8 wgmma takes K-major operands only"
        k.op("wgmma.mma_async.sync.aligned.m64n%dk32.s32.s8.s8 %s, %s, %s, %s" % (n, acc, a, b, scale_d))
        return
    op = "wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s" % (n, dt, dt)
    if isinstance(a, (list, tuple)):
        assert not trans_a, "A from registers has no transpose"
        k.op("%s %s, {%s}, %s, %s, 1, 1, %d" % (op, acc, ", ".join(a), b, scale_d, trans_b))
    else:
        k.op("%s %s, %s, %s, %s, 1, 1, %d, %d" % (op, acc, a, b, scale_d, trans_a, trans_b))
