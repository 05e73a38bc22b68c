"""cp.async: global -> shared copies that complete asynchronously (sm_80)."""


def copy(k, dst, src, nbytes, src_size=None, pred=None, prefetch=None):
    """Copies nbytes (4, 8 or 16) from global [src] to shared [dst] (address
    operands: "reg" or "reg+imm").  src_size (a register or number) < nbytes
    reads only that many and zero-fills the rest.  pred ("%p" or "!%p")
    guards the copy.  16-byte copies bypass L1 (.cg), others go through it
    (.ca, the only form they have).  prefetch (64, 128 or 256; PTX 7.4) asks
    L2 to fetch that many aligned bytes around the copy from DRAM at once."""
    k.op("%scp.async.%s.shared.global%s [%s], [%s], %d%s"
         % ("@%s " % pred if pred else "", "cg" if nbytes == 16 else "ca",
            ".L2::%dB" % prefetch if prefetch else "", dst, src, nbytes,
            "" if src_size is None else ", %s" % src_size))
