"""The built-in ops' device error flag, as kernels raise it.

A kernel that finds device data it must not act on (a KV-cache slot past
the cache, a page id past the pool, a length out of range) skips that work
and raises the device's flag: an atomic max of

    code << 56 | where << 32 | value

where `where` (24 bits) says which token or sequence and `value` (32 bits)
is the offending datum. src/ops/op_flag.hpp has the same codes and turns the
value into the error of the next stream sync.
"""

KV_SLOT = 1      # kv_cache_write: slot_mapping[where] = value, past the cache's rows
SEQ_LEN = 2      # paged attention: seq_lens[where] = value, outside [0, capacity]
PAGE_ID = 3      # paged attention: block_table row where holds page id value, past the pool
CU_Q = 4         # varlen: cu_seqlens_q[where + 1] = value breaks the prefix sums or max_seqlen_q
CU_K = 5         # varlen: the same of cu_seqlens_k and max_seqlen_k

WHERE_MAX = (1 << 24) - 1


def raise_fault(k, flag, code, where, value, clamp=False):
    """atom.global.max of (code << 56 | where << 32 | value) at the u64
    address register flag; where and value are u32 registers. clamp: where
    may exceed 24 bits (a token index), so it saturates at WHERE_MAX."""
    if clamp:
        where = k.r("min.u32", where, WHERE_MAX)
    val = k.rd("or.b64", k.rd("shl.b64", k.wide(where), 32), k.wide(value))
    k.op("or.b64 %s, %s, %d" % (val, val, code << 56))
    k.op("atom.global.max.u64 %s, [%s], %s" % (k.reg("rd"), flag, val))
