"""TMA (cp.async.bulk.tensor) loads into 128-byte-swizzled shared memory."""

PANEL = 64                  # 16-bit elements per 128-byte swizzle row


def smem_base(k, symbol):
    """The dynamic shared memory's start rounded up to 1024 B (128-byte
    swizzled TMA boxes and wgmma descriptors assume it; the shared-bytes
    annotations carry 1 KiB of slack for it)."""
    return k.r("and.b32", k.r("add.u32", k.r("mov.u32", symbol), 1023), "0xFFFFFC00")


def load(k, dst, tmap, coords, bar, pred=None):
    """One box at coords (innermost first; the rank is their count) into
    shared dst, completing its bytes on mbarrier bar (only where pred holds,
    if given)."""
    k.op(("@%s " % pred if pred else "") + "cp.async.bulk.tensor.%dd.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
         " [%s], [%s, {%s}], [%s]" % (len(coords), dst, tmap, ", ".join(str(c) for c in coords), bar))
