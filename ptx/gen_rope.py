#!/usr/bin/env python3
"""Generate libkaio's rotary position embedding (RoPE) kernels.

    python3 ptx/gen_rope.py --out-dir DIR  # write DIR/rope.ptx

Only the Python standard library is used and the output depends on nothing but
this file and ptx/kaio_ptx, so the build is reproducible.

kaio_rope_<style>_<dtype>_<path>: Q [T, Hq*D] and K [T, Hk*D] rotated in
place, style half_split (pairs (i, i + rot/2), GPT-NeoX / Llama) or
interleaved (pairs (2i, 2i+1), GPT-J); dtype f32, f16, bf16; path vec (16-byte
loads: the host checks the alignment) or scalar (any layout).  Dims from
rot = 2 * half on are not touched.

One thread owns one token t, `ppu` consecutive pairs of a head (its
"unit" u) and one of head_lanes interleaved head lanes l: it computes the
pairs' cos / sin once (kaio_ptx.rope: an f32 range reduction good to
|angle| 2^22) and walks heads l, l + head_lanes, ... of its chunk, Q's then
K's, so the trigonometry is paid once per token, pair and lane, not per
head; a warp's lanes on neighbouring heads of one token read one stretch of
its row. Block 256 = tok_per_block tokens x head_lanes x units threads (the
rest idle); grid x = ceil(T / tok_per_block), y = ceil((Hq + Hk) /
head_chunk). The KV-cache kernels take head_lanes 1.

Parameters: q, k (element (0, 0); an absent tensor has 0 heads), pos (i32
[T]), q_stride, k_stride (row strides in bytes), tokens, heads_q, heads_k,
head_dim, half (rot / 2), units (per head), head_lanes, tok_per_block, head_chunk,
attn (the factor cos and sin are scaled by), inv_freq (f32[half], by value).
"""

import sys

from kaio_ptx import cli, op_fault, rope
from kaio_ptx.control import block, loop
from kaio_ptx.grid_dep import twin_module
from kaio_ptx.kernel import Kernel
from kaio_ptx.params import load_params
from kaio_ptx.preamble import preamble

OUT_NAME = "rope.ptx"
TWIN_NAME = "rope_sm90.ptx"
HEADER = preamble(__file__)
BLOCK = 256
MAX_HALF = 256   # inv_freq entries: rotary_dim <= 512
PARAMS = [(".u64", "q"), (".u64", "k"), (".u64", "pos"), (".u64", "q_stride"),
          (".u64", "k_stride"), (".u32", "tokens"), (".u32", "heads_q"), (".u32", "heads_k"),
          (".u32", "head_dim"), (".u32", "half"), (".u32", "units"), (".u32", "head_lanes"),
          (".u32", "tok_per_block"), (".u32", "head_chunk"), (".f32", "attn")]
TABLE = (".align 4 .b8", "inv_freq[%d]" % (4 * MAX_HALF))
ESIZE = {"f32": 4, "f16": 2, "bf16": 2}


def widen(k, dt, word):
    """The f32 values of one 32-bit word of dt (one f32, or two halves low
    first)."""
    if dt == "f32":
        return [k.f("mov.b32", word)]
    if dt == "bf16":   # bf16 is the top half of an f32
        return [k.f("mov.b32", k.r("shl.b32", word, 16)),
                k.f("mov.b32", k.r("and.b32", word, "0xFFFF0000"))]
    lo, hi = k.reg("h"), k.reg("h")
    k.op("mov.b32 {%s, %s}, %s" % (lo, hi, word))
    return [k.f("cvt.f32.f16", lo), k.f("cvt.f32.f16", hi)]


def load_vec(k, dt, addr):
    """16 bytes at addr as f32 values."""
    words = k.regs("r", 4)
    k.op("ld.global.v4.b32 {%s}, [%s]" % (", ".join(words), addr))
    return [v for w in words for v in widen(k, dt, w)]


def store_vec(k, dt, addr, vals):
    """vals rounded once to dt, 16 bytes at addr."""
    if dt == "f32":
        words = [k.r("mov.b32", v) for v in vals]
    else:
        words = [k.r("cvt.rn.%sx2.f32" % dt, hi, lo) for lo, hi in zip(vals[0::2], vals[1::2])]
    k.op("st.global.v4.b32 [%s], {%s}" % (addr, ", ".join(words)))


def load_one(k, dt, addr):
    if dt == "f32":
        return k.f("ld.global.f32", "[%s]" % addr)
    h = k.reg("h")
    k.op("ld.global.b16 %s, [%s]" % (h, addr))
    if dt == "f16":
        return k.f("cvt.f32.f16", h)
    return k.f("mov.b32", k.r("mov.b32", "{0, %s}" % h))


def store_one(k, dt, addr, v):
    if dt == "f32":
        k.op("st.global.f32 [%s], %s" % (addr, v))
        return
    h = k.reg("h")
    k.op("cvt.rn.%s.f32 %s, %s" % (dt, h, v))
    k.op("st.global.b16 [%s], %s" % (addr, h))


def pairs_per_unit(style, dt, vec):
    if not vec:
        return 1
    per16 = 16 // ESIZE[dt]
    return per16 if style == "half_split" else per16 // 2


def rotate_head(k, style, dt, vec, base, off_lo, off_hi, cs, dst=None):
    """Loads the unit's pairs of one head at base, rotates them by cs
    [(cos, sin)] and stores them at dst (default: back at base)."""
    lo_addr = k.rd("add.u64", base, off_lo)
    lo_dst = lo_addr if dst is None else k.rd("add.u64", dst, off_lo)
    if style == "half_split":
        hi_addr = k.rd("add.u64", base, off_hi)
        hi_dst = hi_addr if dst is None else k.rd("add.u64", dst, off_hi)
        if vec:
            x0, x1 = load_vec(k, dt, lo_addr), load_vec(k, dt, hi_addr)
        else:
            x0, x1 = [load_one(k, dt, lo_addr)], [load_one(k, dt, hi_addr)]
        out = [rope.rotate(k, a, b, c, s) for a, b, (c, s) in zip(x0, x1, cs)]
        y0, y1 = [o[0] for o in out], [o[1] for o in out]
        if vec:
            store_vec(k, dt, lo_dst, y0)
            store_vec(k, dt, hi_dst, y1)
        else:
            store_one(k, dt, lo_dst, y0[0])
            store_one(k, dt, hi_dst, y1[0])
        return
    if vec:
        x = load_vec(k, dt, lo_addr)
    else:
        x = [load_one(k, dt, lo_addr), load_one(k, dt, k.rd("add.u64", lo_addr, ESIZE[dt]))]
    y = []
    for i, (c, s) in enumerate(cs):
        y += rope.rotate(k, x[2 * i], x[2 * i + 1], c, s)
    if vec:
        store_vec(k, dt, lo_dst, y)
    else:
        store_one(k, dt, lo_dst, y[0])
        store_one(k, dt, k.rd("add.u64", lo_dst, ESIZE[dt]), y[1])


# The KV-cache kernels' extra parameters (before the table, which stays last).
CACHE_PARAMS = [(".u64", "v"), (".u64", "slots"), (".u64", "k_cache"), (".u64", "v_cache"),
                (".u64", "v_stride"), (".u64", "kc_stride"), (".u64", "vc_stride"),
                (".u32", "cache_rows"), (".u32", "v_chunks"), (".u32", "tail"), (".u64", "flag")]


def copy_bits(k, nbytes, src, dst):
    """nbytes (2, 4 or 16) from src to dst, as bits."""
    if nbytes == 16:
        words = k.regs("r", 4)
        k.op("ld.global.v4.b32 {%s}, [%s]" % (", ".join(words), src))
        k.op("st.global.v4.b32 [%s], {%s}" % (dst, ", ".join(words)))
        return
    kind, width = ("h", 16) if nbytes == 2 else ("r", 32)
    x = k.reg(kind)
    k.op("ld.global.b%d %s, [%s]" % (width, x, src))
    k.op("st.global.b%d [%s], %s" % (width, dst, x))


def strided_copy(k, hint, first, count, step, unit_bytes, src, dst):
    """Units first, first + step, ... < count of unit_bytes each, src to dst."""
    c = k.r("mov.u32", first)
    with loop(k, hint, skip=k.p("setp.ge.u32", c, count)) as lp:
        off = k.rd("mul.wide.u32", c, unit_bytes)
        copy_bits(k, unit_bytes, k.rd("add.u64", src, off), k.rd("add.u64", dst, off))
        k.op("add.u32 %s, %s, %s" % (c, c, step))
        lp.again(k.p("setp.lt.u32", c, count))


def cache_side(k, P, t, t64, u):
    """The KV-cache kernels' per-token work outside the rotation: the slot,
    whether K goes to the cache, and, in the first head chunk's blocks, V's
    row copied to its slot and a slot past the cache reported (token t, unit
    u of the token's threads)."""
    srow = k.r("ld.global.nc.u32", "[%s]" % k.rd("add.u64", P["slots"], k.rd("shl.b64", t64, 2)))
    # negative (padding) or past the cache: no K or V store
    store = k.p("setp.lt.u32", srow, P["cache_rows"])
    past = k.p("and.pred", k.p("setp.ge.s32", srow, 0), k.p("setp.ge.u32", srow, P["cache_rows"]))
    with block(k, "v_side") as side:
        side.exit_if(k.p("setp.ne.u32", k.r("mov.u32", "%ctaid.y"), 0), uni=True)
        with block(k, "report") as rep:
            rep.exit_if("!" + past)
            rep.exit_if(k.p("setp.ne.u32", u, 0))
            op_fault.raise_fault(k, P["flag"], op_fault.KV_SLOT, t, srow, clamp=True)
        side.exit_if("!" + store)
        side.exit_if(k.p("setp.eq.u64", P["v"], 0))
        src = k.rd("add.u64", P["v"], k.rd("mul.lo.u64", t64, P["v_stride"]))
        dst = k.rd("add.u64", P["v_cache"],
                   k.rd("mul.lo.u64", k.rd("cvt.u64.u32", srow), P["vc_stride"]))
        strided_copy(k, "v_row", u, P["v_chunks"], P["units"], 16, src, dst)
    return srow, store


def rope_kernel(style, dt, vec, cache=False):
    path = "vec" if vec else "scalar"
    name = "kaio_rope_%s%s_%s_%s" % ("cache_" if cache else "", style, dt, path)
    ppu = pairs_per_unit(style, dt, vec)
    doc = """
%s: RoPE %s, %s pairs, %s, %s loads; %d pair(s) per thread
and head.  See gen_rope.py.""" % (name, "on Q in place and on K into the KV cache" if cache
                                  else "in place", style, dt, "16-byte" if vec else "element", ppu)
    params = PARAMS + (CACHE_PARAMS if cache else [])
    k = Kernel(name, doc, params + [TABLE], BLOCK,
               keys={"select": "rope_cache" if cache else "rope", "rope_style": style,
                     "dtype": dt, "vector": vec})
    P = load_params(k, params, ("q", "k", "pos") +
                    (("v", "slots", "k_cache", "v_cache", "flag") if cache else ()))
    es = ESIZE[dt]
    tid = k.r("mov.u32", "%tid.x")
    u = k.r("rem.u32", tid, P["units"])
    lanes = k.r("div.u32", tid, P["units"])
    lane = k.r("rem.u32", lanes, P["head_lanes"])
    slot = k.r("div.u32", lanes, P["head_lanes"])
    with block(k, "done") as done:
        done.exit_if(k.p("setp.ge.u32", slot, P["tok_per_block"]))
        t = k.r("mad.lo.u32", k.r("mov.u32", "%ctaid.x"), P["tok_per_block"], slot)
        done.exit_if(k.p("setp.ge.u32", t, P["tokens"]))
        if cache:
            t64 = k.wide(t)
            srow, store = cache_side(k, P, t, t64, u)
        h0 = k.r("mul.lo.u32", k.r("mov.u32", "%ctaid.y"), P["head_chunk"])
        heads = k.r("add.u32", P["heads_q"], P["heads_k"])
        h_end = k.r("min.u32", k.r("add.u32", h0, P["head_chunk"]), heads)
        h = k.r("add.u32", h0, lane)
        done.exit_if(k.p("setp.ge.u32", h, h_end))

        k.note("the token's position, as HF's position_ids.float()")
        if not cache:
            t64 = k.wide(t)
        p = k.r("ld.global.nc.u32", "[%s]" % k.rd("add.u64", P["pos"], k.rd("shl.b64", t64, 2)))
        pos = k.f("cvt.rn.f32.s32", p)
        j0 = k.r("mul.lo.u32", u, ppu)
        table = k.rd("mov.u64", "inv_freq")
        at = k.rd("add.u64", table, k.rd("mul.wide.u32", j0, 4))
        k.note("cos / sin of the unit's pairs, once for every head")
        cs = []
        for i in range(ppu):
            f = k.f("ld.param.f32", "[%s+%d]" % (at, 4 * i))
            cs.append(rope.cos_sin(k, pos, f, P["attn"]))

        head_bytes = k.r("mul.lo.u32", P["head_dim"], es)
        q_row = k.rd("add.u64", P["q"], k.rd("mul.lo.u64", t64, P["q_stride"]))
        # K's head h (counted after Q's) sits at k_row + h * head_bytes
        k_row = k.rd("sub.u64", k.rd("add.u64", P["k"], k.rd("mul.lo.u64", t64, P["k_stride"])),
                     k.rd("mul.wide.u32", P["heads_q"], head_bytes))
        if cache:   # and its place in the cache: row srow (0 when not stored)
            crow = k.rd("cvt.u64.u32", k.r("selp.b32", srow, 0, store))
            kc_row = k.rd("sub.u64", k.rd("add.u64", P["k_cache"],
                                          k.rd("mul.lo.u64", crow, P["kc_stride"])),
                          k.rd("mul.wide.u32", P["heads_q"], head_bytes))
            tail_at = k.rd("mul.wide.u32", k.r("sub.u32", P["head_dim"], P["tail"]), es)
        if style == "half_split":
            off_lo = k.rd("mul.wide.u32", j0, es)
            off_hi = k.rd("mul.wide.u32", k.r("add.u32", j0, P["half"]), es)
        else:
            off_lo, off_hi = k.rd("mul.wide.u32", j0, 2 * es), None
        with loop(k, "heads") as lp:
            is_q = k.p("setp.lt.u32", h, P["heads_q"])
            row = k.rd("selp.b64", q_row, k_row, is_q)
            base = k.rd("add.u64", row, k.rd("mul.wide.u32", h, head_bytes))
            if not cache:
                rotate_head(k, style, dt, vec, base, off_lo, off_hi, cs)
            else:
                with block(k, "head") as hd:
                    # a K head whose token is not stored has nothing to do
                    hd.exit_if(k.p("and.pred", k.p("setp.ge.u32", h, P["heads_q"]),
                                   k.p("not.pred", store)))
                    dst = k.rd("selp.b64", base, k.rd("add.u64", kc_row,
                                                      k.rd("mul.wide.u32", h, head_bytes)), is_q)
                    rotate_head(k, style, dt, vec, base, off_lo, off_hi, cs, dst)
                    k.note("a K head's dims past rotary_dim go to the cache as they are")
                    hd.exit_if(is_q)
                    strided_copy(k, "tail", u, P["tail"], P["units"], es,
                                 k.rd("add.u64", base, tail_at), k.rd("add.u64", dst, tail_at))
            k.op("add.u32 %s, %s, %s" % (h, h, P["head_lanes"]))
            lp.exit_if(k.p("setp.ge.u32", h, h_end))
            lp.again()
    k.op("ret")
    return k.text()


def generate():
    parts = [HEADER]
    for cache in (False, True):
        for style in ("half_split", "interleaved"):
            for dt in ("f32", "f16", "bf16"):
                for vec in (True, False):
                    parts.append("\n" + rope_kernel(style, dt, vec, cache))
    # and again as sm_90 dependent launches (grid_dep.twin_module), which the host prefers
    return {OUT_NAME: "".join(parts), TWIN_NAME: twin_module("".join(parts))}


if __name__ == "__main__":
    sys.exit(cli.main(__file__, __doc__, generate))
