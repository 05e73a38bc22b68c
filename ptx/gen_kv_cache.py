#!/usr/bin/env python3
"""Generate libkaio's paged KV-cache kernels.

    python3 ptx/gen_kv_cache.py --out-dir DIR  # write DIR/kv_cache.ptx

Only the Python standard library is used and the output depends on nothing but
this file and ptx/kaio_ptx, so the build is reproducible.

Kernels (block 128 threads, no shared memory):
  kaio_kv_cache_write(k, v, slots, k_cache, v_cache, chunks, k_ld, v_ld,
    kc_ld, vc_ld, cache_rows, tokens, flag): token t's rows of K and V go
    to row slots[t] of their caches (a slot is page * page_size + offset in
    the [num_pages, page_size, Hkv, D] layout).  A slot of -1 (any negative
    value) skips the token; one at or past cache_rows skips it too and
    raises the op flag.  The copy is dtype-blind: rows move as 16-byte
    vectors (the host checks the alignment).
"""

import sys

from kaio_ptx import cli, manifest, op_fault
from kaio_ptx.control import block, loop, skip_if
from kaio_ptx.grid_dep import twin_module
from kaio_ptx.kernel import Kernel
from kaio_ptx.params import load_params
from kaio_ptx.preamble import preamble

OUT_NAME = "kv_cache.ptx"
HEADER = preamble(__file__)
BLOCK = 128


WRITE_PARAMS = [(".u64", "k"), (".u64", "v"), (".u64", "slots"), (".u64", "k_cache"),
                (".u64", "v_cache"), (".u32", "chunks"), (".u64", "k_ld"), (".u64", "v_ld"),
                (".u64", "kc_ld"), (".u64", "vc_ld"), (".u32", "cache_rows"), (".u32", "tokens"),
                (".u64", "flag")]


def copy_row(k, src_base, src_ld, dst_base, dst_ld, token, slot, chunks, tid, hint):
    """Row `token` of src into row `slot` of dst, 16 bytes per thread per
    trip; nothing when src_base is 0 (an absent tensor)."""
    with skip_if(k, k.p("setp.eq.u64", src_base, 0), hint + "_absent", uni=True):
        src = k.rd("mad.lo.u64", k.wide(token), src_ld, src_base)
        dst = k.rd("mad.lo.u64", k.wide(slot), dst_ld, dst_base)
        c = k.r("mov.u32", tid)
        with loop(k, hint, skip=k.p("setp.ge.u32", c, chunks)) as lp:
            off = k.rd("mul.wide.u32", c, 16)
            a, b, cc, d = k.reg("r"), k.reg("r"), k.reg("r"), k.reg("r")
            k.op("ld.global.nc.v4.u32 {%s, %s, %s, %s}, [%s]"
                 % (a, b, cc, d, k.rd("add.u64", src, off)))
            k.op("st.global.v4.u32 [%s], {%s, %s, %s, %s}"
                 % (k.rd("add.u64", dst, off), a, b, cc, d))
            k.op("add.u32 %s, %s, %d" % (c, c, BLOCK))
            lp.again(k.p("setp.lt.u32", c, chunks))


def write_kernel():
    name = "kaio_kv_cache_write"
    manifest.keys(name, select="kv_cache_write")
    doc = """
%s(k, v, slots, k_cache, v_cache, chunks, k_ld, v_ld, kc_ld,
vc_ld, cache_rows, tokens, flag): row t of k (and of v, unless v is 0) goes to
row slots[t] of k_cache (v_cache).  Rows are `chunks` 16-byte vectors; the
*_ld are row strides in bytes.  slots[t] < 0 skips token t; slots[t] >=
cache_rows skips it and raises *flag (atomic max; kaio_ptx/op_fault.py).
Grid: x = tokens; block 128.""" % name
    k = Kernel(name, doc, WRITE_PARAMS, BLOCK)
    P = load_params(k, WRITE_PARAMS, ("k", "v", "slots", "k_cache", "v_cache", "flag"))
    t = k.r("mov.u32", "%ctaid.x")
    tid = k.r("mov.u32", "%tid.x")
    with block(k, "done") as done:
        done.exit_if(k.p("setp.ge.u32", t, P["tokens"]), uni=True)
        slot = k.r("ld.global.nc.u32", "[%s]" % k.rd("add.u64", P["slots"],
                                                     k.rd("mul.wide.u32", t, 4)))
        done.exit_if(k.p("setp.lt.s32", slot, 0), uni=True)
        with skip_if(k, k.p("setp.lt.u32", slot, P["cache_rows"]), "in_range", uni=True):
            with skip_if(k, k.p("setp.ne.u32", tid, 0), "one_thread"):
                op_fault.raise_fault(k, P["flag"], op_fault.KV_SLOT, t, slot, clamp=True)
            done.exit_if(None)
        copy_row(k, P["k"], P["k_ld"], P["k_cache"], P["kc_ld"], t, slot, P["chunks"], tid, "k")
        copy_row(k, P["v"], P["v_ld"], P["v_cache"], P["vc_ld"], t, slot, P["chunks"], tid, "v")
    k.op("ret")
    return k.text()


def generate():
    text = HEADER + "\n" + write_kernel()
    # and again as an sm_90 dependent launch (grid_dep.twin_module), which the host prefers
    return {OUT_NAME: text, "kv_cache_sm90.ptx": twin_module(text)}


if __name__ == "__main__":
    sys.exit(cli.main(__file__, __doc__, generate))
