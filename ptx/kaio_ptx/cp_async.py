"""cp.async: global -> shared copies that complete asynchronously (sm_80)."""


def copy(k, dst, src, nbytes, src_size=None, pred=None):
    """Copies nbytes (4, 8 or 16) from global [src] to shared [dst] (address
    operands: "reg" or "reg+imm").  src_size (a register or number) < nbytes
    reads only that many and zero-fills the rest.  pred ("%p" or "!%p")
    guards the copy.  16-byte copies bypass L1 (.cg), others go through it
    (.ca, the only form they have)."""
    k.op("%scp.async.%s.shared.global [%s], [%s], %d%s"
         % ("@%s " % pred if pred else "", "cg" if nbytes == 16 else "ca", dst, src, nbytes,
            "" if src_size is None else ", %s" % src_size))
