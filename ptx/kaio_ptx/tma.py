"""TMA (cp.async.bulk.tensor) loads into 128-byte-swizzled shared memory."""

PANEL = 64                  # 16-bit elements per 128-byte swizzle row


def smem_base(k, symbol):
    """The dynamic shared memory's start rounded up to 1024 B (128-byte
    swizzled TMA boxes and wgmma descriptors assume it; the shared-bytes
    annotations carry 1 KiB of slack for it)."""
    return k.r("and.b32", k.r("add.u32", k.r("mov.u32", symbol), 1023), "0xFFFFFC00")


def cta_window(k, addr):
    """addr in the CTA's own shared window.  In a kernel launched in clusters
    ptxas gives a shared symbol's address (so smem_base's) the CTA's rank in
    bits 24+; loads, stores, TMA and mbarriers take either form, but a wgmma
    descriptor's 14-bit address field would carry the rank into its LBO
    (kaio_ptx/wgmma.py desc)."""
    return k.r("and.b32", addr, "0x00FFFFFF")


def load(k, dst, tmap, coords, bar, pred=None):
    """One box at coords (innermost first; the rank is their count) into
    shared dst, completing its bytes on mbarrier bar (only where pred holds,
    if given)."""
    k.op(("@%s " % pred if pred else "") + "cp.async.bulk.tensor.%dd.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
         " [%s], [%s, {%s}], [%s]" % (len(coords), dst, tmap, ", ".join(str(c) for c in coords), bar))
