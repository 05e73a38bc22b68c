"""cp.async: global -> shared copies that complete asynchronously (sm_80)."""


def evict_first(k):
    """A 64-bit L2 cache policy register: lines the copies that carry it
    bring in are evicted first (data read once; PTX 7.4)."""
    policy = k.reg("rd")
    k.op("createpolicy.fractional.L2::evict_first.b64 %s, 1.0" % policy)
    return policy


def copy(k, dst, src, nbytes, src_size=None, pred=None, prefetch=None, policy=None):
    """Copies nbytes (4, 8 or 16) from global [src] to shared [dst] (address
    operands: "reg" or "reg+imm").  src_size (a register or number) < nbytes
    reads only that many and zero-fills the rest.  pred ("%p" or "!%p")
    guards the copy.  16-byte copies bypass L1 (.cg), others go through it
    (.ca, the only form they have).  prefetch (64, 128 or 256; PTX 7.4) asks
    L2 to fetch that many aligned bytes around the copy from DRAM at once.
    policy (a register from evict_first(); PTX 7.4) is the copy's L2 cache
    hint (then src_size must be given)."""
    k.op("%scp.async.%s.shared.global%s%s [%s], [%s], %d%s%s"
         % ("@%s " % pred if pred else "", "cg" if nbytes == 16 else "ca",
            ".L2::cache_hint" if policy else "", ".L2::%dB" % prefetch if prefetch else "",
            dst, src, nbytes, "" if src_size is None else ", %s" % src_size,
            ", %s" % policy if policy else ""))
