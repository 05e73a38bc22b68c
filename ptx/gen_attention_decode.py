#!/usr/bin/env python3
"""Generate libkaio's decode attention kernels (sm_80 mma.sync m16n8k16):
a few query rows per sequence against a long KV cache, contiguous or paged,
with the keys split across CTAs (flash-decoding) and a fixed-order combine.

    python3 ptx/gen_attention_decode.py --out-dir DIR  # write DIR/attention_decode.ptx

Only the Python standard library is used.

Rows.  One CTA serves every query head that shares KV head hk: its rows are
r = i * group + gi (query position i < seq_q, head hk * group + gi), 16 rows
per CTA (ctaid.y picks the block of 16 when group * seq_q > 16), so K and V
are read once per 16 rows instead of once per query head.

Kernels (dt f16/bf16, D = head dim, 128 threads = 4 warps):
  kaio_attn_decode_<dt>_d<D>         contiguous K, V [B, seq_k, Hkv, D] (BSHD)
  kaio_attn_decode_paged_<dt>_d<D>   K, V pools [num_pages * page_size, Hkv * D];
      block_table (b, i) = page of tokens i*page_size ..; seq_lens[b] = length
      grid (splits, ceil(group*seq_q/16), B*Hkv).  Split s takes keys
      [s*chunk, min(len, (s+1)*chunk)).  Each warp streams its own 16-key
      tiles (w, w+4, ...) through a private cp.async ring of STAGES stages
      (rows unpadded, 16-byte chunks XOR-swizzled: kv_slot; only warp
      barriers in the loop), keeps an online softmax for the 16
      rows, and the 4 warps merge through shared memory in warp order.
      splits == 1: O (out_dtype) and LSE are written; else the split's
      normalised O (f32) and LSE go to ws_o [(z*splits + s)*rows + r][D] and
      ws_lse [(z*splits + s)*rows + r] (z = b*Hkv + hk, rows = group*seq_q),
      and the CTA counts itself in count[z * gridDim.y + ctaid.y] (u32,
      zero before the launch); the one that counts last merges the splits
      in split order (bitwise deterministic), writes O and LSE, and resets
      the count to zero for the next launch.
Masking: key j of sequence b (length L) is visible to query row i iff j < L
  and, for causal 1 (bottom-right), j <= i + L - seq_q; causal 2 (top-left),
  j <= i.  A row that sees no key gets O = 0, LSE = -inf.
Paged bounds: a length outside [0, seq_k] or a page id outside
  [0, num_pages) is clamped (length) or replaced by page 0, the sequence's O
  and LSE become NaN and, when flag != 0, the device's op flag is raised
  (kaio_ptx/op_fault.py: SEQ_LEN, PAGE_ID).
Host guarantees: 16-byte aligned starts, strides multiples of 8 elements,
  heads_q = group * Hkv, page_size = 1 << page_shift >= 16, seq_k <=
  max_pages << page_shift, every contiguous row in bounds.
"""

import sys

from kaio_ptx import cli, cp_async, op_fault
from kaio_ptx.attention import Kernel, raise_flag
from kaio_ptx.control import cases, loop, skip_if
from kaio_ptx.dtypes import OUT_DTYPES
from kaio_ptx.grid_dep import twin_module
from kaio_ptx.literals import LN2, NEG_INF
from kaio_ptx.mma import ldmatrix_x4, pack
from kaio_ptx.params import load_params
from kaio_ptx.preamble import extern_shared, preamble
from kaio_ptx.warp import quad_reduce, warp_reduce

SMEM = "kaio_decode_smem"
HEADER = preamble(__file__) + extern_shared(SMEM, 128)
DIMS = (64, 128, 256)
DTYPES = ("f16", "bf16")
WARPS = 4
ROWS = 16            # query rows per CTA (one m16 tile)
BN = 16              # keys per warp tile
NAN = "0f7FC00000"
# Ring stages per warp: as many as keep 2 CTAs per SM for D <= 128.
STAGES = {64: 6, 128: 3, 256: 3}
# K/V copies ask L2 for 256 aligned bytes from DRAM at once (a head's row is
# 128-512 bytes) and mark them evict-first (read once): on H100 the 1 GiB+
# caches went from 96-98% to 98-99% of copy bandwidth, and the evict-first
# hint kept B 32/128 x Sk 1k contiguous at 92-97% (bench/RESULTS.md).  That was with
# the padded ring; with kv_slot's rows the prefetch measured neutral (session 13).
KV_PREFETCH = 256

PARAMS = [(".u64", "q"), (".u64", "k"), (".u64", "v"), (".u64", "o"), (".u64", "lse"),
          (".u64", "ws_o"), (".u64", "ws_lse"), (".u64", "table"), (".u64", "lens"),
          (".u64", "flag"), (".u64", "count"),
          (".u32", "seq_q"), (".u32", "seq_k"), (".u32", "heads_q"), (".u32", "group"),
          (".u32", "splits"), (".u32", "chunk"),
          (".u64", "q_bs"), (".u64", "q_ss"), (".u64", "k_bs"), (".u64", "k_ss"),
          (".u64", "v_bs"), (".u64", "v_ss"), (".u64", "o_bs"), (".u64", "o_ss"),
          (".u64", "lse_rs"), (".u64", "table_rs"), (".u32", "num_pages"),
          (".u32", "page_shift"), (".f32", "scale_log2"), (".u32", "causal"),
          (".u32", "out_dtype")]



def pitch(d):
    return (d + 8) * 2


def kv_slot(k, d, row, chunk):
    """Byte offset of 16-byte chunk `chunk` of row `row` (registers) in a K/V
    tile: unpadded rows of 2*d bytes, chunk c at c ^ (row & 7).  Each global
    32-byte sector then lands in one 32-byte sector of shared memory; with
    the old 16-byte row padding the odd rows' sectors straddled two and their
    cp.async asked L2 for every such sector twice (1.5x the K/V sectors,
    bench/RESULTS.md).  The XOR keeps ldmatrix's 8 rows in 8 bank groups."""
    x = k.r("xor.b32", chunk, k.r("and.b32", row, 7))
    return k.r("add.u32", k.r("mul.lo.u32", row, 2 * d), k.r("shl.b32", x, 4))


def kv_offsets(k, d, row, chunk, step):
    """(register, immediate) offsets of chunks chunk + step*j of `row`, j <
    d/8/step (step 2: ldmatrix's 16-column steps): chunk + step*j ^ (row & 7)
    repeats every 8 chunks, so 8/step registers serve every j."""
    n = d // 8 // step
    per = min(n, 8 // step)
    regs = [kv_slot(k, d, row, k.r("add.u32", chunk, step * j) if j else chunk) for j in range(per)]
    return [(regs[j % per], 16 * step * per * (j // per)) for j in range(n)]


def mma(k, dt, d, a, b):
    k.op("mma.sync.aligned.m16n8k16.row.col.f32.%s.%s.f32 {%s}, {%s}, {%s}, {%s}"
         % (dt, dt, ", ".join(d), ", ".join(a), ", ".join(b), ", ".join(d)))


def row_out(k, P, b, hk, r):
    """(query position i, query head h) of CTA row r."""
    i = k.r("div.u32", r, P["group"])
    gi = k.r("sub.u32", r, k.r("mul.lo.u32", i, P["group"]))
    return i, k.r("add.u32", k.r("mul.lo.u32", hk, P["group"]), gi)


def store_vals(k, ptr, vals, out_dtype, hint):
    """vals (f32 registers, consecutive columns, a multiple of 4: 8 per 16
    bytes of halves) at global [ptr] as out_dtype; ptr is aligned to the
    vals' bytes (16 at most)."""
    n = min(8, len(vals))
    for code, name, esize in cases(k, out_dtype, OUT_DTYPES, k.label(hint)):
        if name == "f32":
            for c in range(0, len(vals), 4):
                k.op("st.global.v4.f32 [%s+%d], {%s}" % (ptr, 4 * c, ", ".join(vals[c:c + 4])))
        else:
            for c in range(0, len(vals), n):
                w = [pack(k, name, vals[c + 2 * j + 1], vals[c + 2 * j]) for j in range(n // 2)]
                k.op("st.global.v%d.b32 [%s+%d], {%s}" % (n // 2, ptr, 2 * c, ", ".join(w)))


def write_final(k, P, b, hk, r, c0, vals, lse, esize_sel, d):
    """O row (i, h) columns c0.. and, from the lane with c0 == 0, LSE."""
    i, h = row_out(k, P, b, hk, r)
    el = k.rd("add.u64", k.rd("mul.lo.u64", k.wide(b), P["o_bs"]),
              k.rd("mul.lo.u64", k.wide(i), P["o_ss"]))
    el = k.rd("add.u64", el, k.wide(k.r("add.u32", k.r("mul.lo.u32", h, d), c0)))
    ptr = k.rd("add.u64", P["o"], k.rd("shl.b64", el, esize_sel))
    store_vals(k, ptr, vals, P["out_dtype"], "o_stored")
    lead = k.p("setp.eq.u32", c0, 0)
    has = k.p("setp.ne.and.u64", P["lse"], 0, lead)
    with skip_if(k, "!" + has, "no_lse"):
        lrow = k.r("add.u32", k.r("mul.lo.u32", b, P["heads_q"]), h)
        lel = k.rd("add.u64", k.rd("mul.lo.u64", k.wide(lrow), P["lse_rs"]), k.wide(i))
        k.op("st.global.f32 [%s], %s" % (k.rd("add.u64", P["lse"], k.rd("shl.b64", lel, 2)), lse))


def esize_shift(k, out_dtype):
    return k.r("selp.b32", 2, 1, k.p("setp.eq.u32", out_dtype, 1))


def decode_kernel(dt, d, paged):
    stages = STAGES[d]
    p = pitch(d)
    pk = 2 * d                         # K/V row bytes in the ring (kv_slot)
    tile = BN * pk                     # one K or V tile
    stage_bytes = 2 * tile
    ring = WARPS * stages * stage_bytes
    q_bytes = ROWS * p
    merge = WARPS * ROWS * d * 4 + 2 * WARPS * ROWS * 4
    assert merge <= ring
    smem = q_bytes + ring
    q_regs = d <= 128                  # Q's A fragments held in registers
    name = "kaio_attn_decode%s_%s_d%d" % ("_paged" if paged else "", dt, d)
    doc = ("%s: decode attention, %s, head dim %d, %s K/V, %d query rows per CTA, 4 warps x "
           "%d-stage rings of %d-key tiles." % (name, dt, d, "paged" if paged else "contiguous",
                                                 ROWS, stages, BN))
    k = Kernel(name, doc, PARAMS, smem, ROWS,
               keys={"select": "attn_decode", "paged": bool(paged), "dtype": dt, "head_dim": d})
    P = load_params(k, PARAMS, ("q", "k", "v", "o", "lse", "ws_o", "ws_lse", "table", "lens",
                                "flag", "count"))
    tid = k.r("mov.u32", "%tid.x")
    lane = k.r("and.b32", tid, 31)
    warp = k.r("shr.u32", tid, 5)
    g = k.r("shr.u32", lane, 2)
    t2 = k.r("shl.b32", k.r("and.b32", lane, 3), 1)
    split = k.r("mov.u32", "%ctaid.x")
    r0 = k.r("shl.b32", k.r("mov.u32", "%ctaid.y"), 4)
    z = k.r("mov.u32", "%ctaid.z")
    heads_kv = k.r("div.u32", P["heads_q"], P["group"])
    b = k.r("div.u32", z, heads_kv)
    hk = k.r("sub.u32", z, k.r("mul.lo.u32", b, heads_kv))
    rows = k.r("mul.lo.u32", P["group"], P["seq_q"])
    sq = P["seq_q"]
    base = k.r("mov.u32", SMEM)
    s_q = base
    s_ring = k.r("add.u32", base, q_bytes)
    bad = k.reg("p")
    k.op("setp.ne.u32 %s, %s, %s" % (bad, tid, tid))

    k.note("the sequence's length")
    length = k.reg("r")
    if paged:
        lv = k.r("ld.global.u32", "[%s]" % k.rd("add.u64", P["lens"], k.rd("mul.wide.u32", b, 4)))
        k.op("min.u32 %s, %s, %s" % (length, lv, P["seq_k"]))     # a negative i32 is huge as u32
        k.op("setp.ne.u32 %s, %s, %s" % (bad, length, lv))
        with skip_if(k, "!" + bad, "len_ok"):
            with skip_if(k, k.p("setp.ne.u32", tid, 0), "not_t0"):
                raise_flag(k, P, op_fault.SEQ_LEN, b, lv)
    else:
        k.op("mov.u32 %s, %s" % (length, P["seq_k"]))
    # key j visible to query i iff j < i + off + 1 (causal), off = L - Sq (1) or 0 (2)
    is_causal = k.p("setp.ne.u32", P["causal"], 0)
    off = k.r("selp.b32", k.r("sub.s32", length, sq), 0, k.p("setp.eq.u32", P["causal"], 1))
    kb0 = k.r("mul.lo.u32", split, P["chunk"])
    kend = k.r("min.u32", length, k.r("add.u32", kb0, P["chunk"]))
    nkeys = k.r("selp.b32", k.r("sub.u32", kend, kb0), 0, k.p("setp.gt.u32", kend, kb0))
    ntiles = k.r("shr.u32", k.r("add.u32", nkeys, BN - 1), 4)
    # this warp's tiles: w, w + 4, ...
    nw = k.r("shr.u32", k.r("add.u32", k.r("sub.u32", k.r("max.u32", ntiles, warp), warp), WARPS - 1), 2)
    # per-thread row limits (rows g, g + 8 of the CTA), and the CTA's smallest
    lims = []
    for half in range(2):
        r = k.r("add.u32", r0, k.r("add.u32", g, 8 * half))
        i = k.r("div.u32", r, P["group"])
        lim = k.r("min.s32", k.r("add.s32", k.r("add.s32", i, off), 1), kend)
        lims.append(k.r("selp.b32", lim, kend, is_causal))
    i_min = k.r("div.u32", r0, P["group"])
    lim_min = k.r("min.s32", k.r("add.s32", k.r("add.s32", i_min, off), 1), kend)
    lim_min = k.r("selp.b32", lim_min, kend, is_causal)

    k.note("Q rows r0 .. r0+15 into shared memory (rows past group * seq_q zero-filled)")
    cpr = d // 8
    for it in range(ROWS * cpr // 128):
        cidx = k.r("add.u32", tid, it * 128)
        rr = k.r("div.u32", cidx, cpr)
        cc = k.r("sub.u32", cidx, k.r("mul.lo.u32", rr, cpr))
        r = k.r("add.u32", r0, rr)
        ok = k.p("setp.lt.u32", r, rows)
        i, h = row_out(k, P, b, hk, r)
        el = k.rd("add.u64", k.rd("mul.lo.u64", k.wide(b), P["q_bs"]),
                  k.rd("mul.lo.u64", k.wide(i), P["q_ss"]))
        el = k.rd("add.u64", el, k.wide(k.r("add.u32", k.r("mul.lo.u32", h, d),
                                           k.r("shl.b32", cc, 3))))
        src = k.rd("selp.b64", k.rd("add.u64", P["q"], k.rd("shl.b64", el, 1)), P["q"], ok)
        dst = k.r("add.u32", s_q, k.r("add.u32", k.r("mul.lo.u32", rr, p), k.r("shl.b32", cc, 4)))
        cp_async.copy(k, dst, src, 16, k.r("selp.b32", 16, 0, ok))
    k.op("cp.async.commit_group")
    l7 = k.r("and.b32", lane, 7)
    b3 = k.r("and.b32", k.r("shr.u32", lane, 3), 1)
    b4 = k.r("shr.u32", lane, 4)
    a_q = k.r("add.u32", s_q, k.r("add.u32", k.r("mul.lo.u32", k.r("and.b32", lane, 15), p),
                                  k.r("shl.b32", b4, 4)))
    b_offs = kv_offsets(k, d, k.r("add.u32", l7, k.r("shl.b32", b4, 3)), b3, 2)
    bt_offs = kv_offsets(k, d, k.r("add.u32", l7, k.r("shl.b32", b3, 3)), b4, 2)

    k.note("this warp's K/V ring and tile loader: lane copies chunk lane % (D/8) of rows lane / (D/8) + ...")
    wring = k.r("add.u32", s_ring, k.r("mul.lo.u32", warp, stages * stage_bytes))
    lcpr = min(cpr, 32)
    rpi = 32 // lcpr
    iters = BN // rpi
    trow = k.r("shr.u32", lane, lcpr.bit_length() - 1)
    tcol16 = k.r("shl.b32", k.r("and.b32", lane, lcpr - 1), 4)
    # copy `it` writes row trow + it*rpi; the swizzle repeats every 8 rows
    per = min(iters, 8 // rpi)
    tcol = k.r("and.b32", lane, lcpr - 1)
    soffs = [kv_slot(k, d, k.r("add.u32", trow, j * rpi) if j else trow, tcol) for j in range(per)]
    k_ss = k.rd("shl.b64", P["k_ss"], 1)
    policy = cp_async.evict_first(k)
    v_ss = k.rd("shl.b64", P["v_ss"], 1)
    hcol = k.rd("mul.wide.u32", hk, 2 * d)
    if paged:
        kbase = k.rd("add.u64", P["k"], hcol)
        vbase = k.rd("add.u64", P["v"], hcol)
        trow_ptr = k.rd("add.u64", P["table"], k.rd("shl.b64", k.rd("mul.lo.u64", k.wide(b), P["table_rs"]), 2))
        pmask = k.r("sub.u32", k.r("shl.b32", 1, P["page_shift"]), 1)
    else:
        kbase = k.rd("add.u64", P["k"], k.rd("add.u64", k.rd("shl.b64", k.rd("mul.lo.u64", k.wide(b), P["k_bs"]), 1), hcol))
        vbase = k.rd("add.u64", P["v"], k.rd("add.u64", k.rd("shl.b64", k.rd("mul.lo.u64", k.wide(b), P["v_bs"]), 1), hcol))

    def issue(t, stage_off):
        """Tile t of the warp (keys kb0 + (warp + 4 t) * 16 ..) into the stage."""
        kv0 = k.r("add.u32", kb0, k.r("shl.b32", k.r("add.u32", warp, k.r("shl.b32", t, 2)), 4))
        if paged:
            page = k.r("ld.global.u32", "[%s]" % k.rd("add.u64", trow_ptr, k.rd("mul.wide.u32", k.r("shr.u32", kv0, P["page_shift"]), 4)))
            pbad = k.p("setp.ge.u32", page, P["num_pages"])      # negative ids too (as u32)
            with skip_if(k, "!" + pbad, "page_ok"):
                k.op("setp.eq.u32 %s, %s, %s" % (bad, lane, lane))
                with skip_if(k, k.p("setp.ne.u32", lane, 0), "not_l0"):
                    raise_flag(k, P, op_fault.PAGE_ID, b, page)
            page = k.r("selp.b32", 0, page, pbad)
            prow = k.r("add.u32", k.r("shl.b32", page, P["page_shift"]), k.r("and.b32", kv0, pmask))
        else:
            prow = kv0
        valid = k.r("sub.u32", kend, kv0)
        row0 = k.wide(k.r("add.u32", prow, trow))
        kp = k.rd("add.u64", kbase, k.rd("mul.lo.u64", row0, k_ss))
        vp = k.rd("add.u64", vbase, k.rd("mul.lo.u64", row0, v_ss))
        kp = k.rd("add.u64", kp, k.wide(tcol16))
        vp = k.rd("add.u64", vp, k.wide(tcol16))
        kst = k.rd("mul.lo.u64", k_ss, rpi)
        vst = k.rd("mul.lo.u64", v_ss, rpi)
        sbase = k.r("add.u32", wring, stage_off)
        sdst = [k.r("add.u32", sbase, x) for x in soffs]
        for it in range(iters):
            dst_off = (it // per) * per * rpi * pk
            rr = k.r("add.u32", trow, it * rpi)
            ok = k.p("setp.lt.u32", rr, valid)
            size = k.r("selp.b32", 16, 0, ok)
            cp_async.copy(k, "%s+%d" % (sdst[it % per], dst_off), k.rd("selp.b64", kp, P["k"], ok), 16, size,
                          prefetch=KV_PREFETCH, policy=policy)
            cp_async.copy(k, "%s+%d" % (sdst[it % per], tile + dst_off), k.rd("selp.b64", vp, P["v"], ok), 16, size,
                          prefetch=KV_PREFETCH, policy=policy)
            if it + 1 < iters:
                kp = k.rd("add.u64", kp, kst)
                vp = k.rd("add.u64", vp, vst)

    k.note("prologue: the first STAGES-1 tiles, in flight with Q's copy")
    for s in range(stages - 1):
        with skip_if(k, k.p("setp.le.u32", nw, s), "pro_%d" % s, uni=True):
            issue(k.r("mov.u32", s), s * stage_bytes)
        k.op("cp.async.commit_group")
    k.note("Q's group (the oldest) is complete once STAGES-1 groups at most are pending")
    k.op("cp.async.wait_group %d" % (stages - 1))
    k.op("bar.sync 0")
    qa = [ldmatrix_x4(k, a_q, kk * 32) for kk in range(d // 16)] if q_regs else None

    acc = [k.regs("f", 4) for _ in range(d // 8)]
    for t in acc:
        for x in t:
            k.op("mov.f32 %s, 0f00000000" % x)
    m = [k.reg("f"), k.reg("f")]
    l = [k.reg("f"), k.reg("f")]
    for ri in range(2):
        k.op("mov.f32 %s, %s" % (m[ri], NEG_INF))
        k.op("mov.f32 %s, 0f00000000" % l[ri])
    sl2 = P["scale_log2"]
    it = k.r("mov.u32", 0)
    cur = k.r("mov.u32", 0)
    wrap = stages * stage_bytes
    with loop(k, "tile_loop", uni=True, skip=k.p("setp.eq.u32", nw, 0)) as lp:
        k.op("cp.async.wait_group %d" % (stages - 2))
        k.op("bar.warp.sync -1")
        k.note("every lane is past tile it-1: refill its stage with tile it + STAGES-1")
        nxt = k.r("add.u32", it, stages - 1)
        with skip_if(k, k.p("setp.ge.u32", nxt, nw), "no_next", uni=True):
            prev = k.r("add.u32", cur, (stages - 1) * stage_bytes)
            prev = k.r("selp.b32", k.r("sub.u32", prev, wrap), prev, k.p("setp.ge.u32", prev, wrap))
            issue(nxt, prev)
        k.op("cp.async.commit_group")
        kv0 = k.r("add.u32", kb0, k.r("shl.b32", k.r("add.u32", warp, k.r("shl.b32", it, 2)), 4))
        sk_ = k.r("add.u32", wring, cur)
        s = [k.regs("f", 4) for _ in range(2)]
        for t in s:
            for x in t:
                k.op("mov.f32 %s, 0f00000000" % x)
        kaddr = {}
        for kk in range(d // 16):
            a = qa[kk] if q_regs else ldmatrix_x4(k, a_q, kk * 32)
            reg, imm = b_offs[kk]
            if reg not in kaddr:
                kaddr[reg] = k.r("add.u32", sk_, reg)
            bb = ldmatrix_x4(k, kaddr[reg], imm)
            mma(k, dt, s[0], a, bb[0:2])
            mma(k, dt, s[1], a, bb[2:4])
        with skip_if(k, k.p("setp.le.s32", k.r("add.s32", kv0, BN), lim_min), "no_mask", uni=True):
            c0 = k.r("add.s32", kv0, t2)
            for nt in range(2):
                for e in range(4):
                    col = k.r("add.s32", c0, 8 * nt + (e & 1))
                    ok = k.p("setp.lt.s32", col, lims[e >> 1])
                    k.op("selp.f32 %s, %s, %s, %s" % (s[nt][e], s[nt][e], NEG_INF, ok))
        for ri in range(2):
            mx = k.f("max.f32", s[0][2 * ri], s[0][2 * ri + 1])
            k.op("max.f32 %s, %s, %s" % (mx, mx, s[1][2 * ri]))
            k.op("max.f32 %s, %s, %s" % (mx, mx, s[1][2 * ri + 1]))
            quad_reduce(k, mx, "max.f32")
            mnew = k.f("max.f32", m[ri], mx)
            muse = k.f("selp.f32", "0f00000000", mnew, k.p("setp.eq.f32", mnew, NEG_INF))
            alpha = k.f("ex2.approx.ftz.f32", k.f("mul.f32", k.f("sub.f32", m[ri], muse), sl2))
            k.op("mov.f32 %s, %s" % (m[ri], mnew))
            negm = k.f("neg.f32", k.f("mul.f32", muse, sl2))
            k.op("mul.f32 %s, %s, %s" % (l[ri], l[ri], alpha))
            for t in acc:
                for e in (2 * ri, 2 * ri + 1):
                    k.op("mul.f32 %s, %s, %s" % (t[e], t[e], alpha))
            for t in s:
                for e in (2 * ri, 2 * ri + 1):
                    k.op("fma.rn.f32 %s, %s, %s, %s" % (t[e], t[e], sl2, negm))
                    k.op("ex2.approx.ftz.f32 %s, %s" % (t[e], t[e]))
                    k.op("add.f32 %s, %s, %s" % (l[ri], l[ri], t[e]))
        pa = [pack(k, dt, s[0][1], s[0][0]), pack(k, dt, s[0][3], s[0][2]),
              pack(k, dt, s[1][1], s[1][0]), pack(k, dt, s[1][3], s[1][2])]
        vaddr = {}
        for np_ in range(d // 16):
            reg, imm = bt_offs[np_]
            if reg not in vaddr:
                vaddr[reg] = k.r("add.u32", k.r("add.u32", sk_, tile), reg)
            bb = ldmatrix_x4(k, vaddr[reg], imm, trans=True)
            mma(k, dt, acc[2 * np_], pa, bb[0:2])
            mma(k, dt, acc[2 * np_ + 1], pa, bb[2:4])
        k.op("add.u32 %s, %s, %d" % (cur, cur, stage_bytes))
        k.op("selp.b32 %s, 0, %s, %s" % (cur, cur, k.p("setp.ge.u32", cur, wrap)))
        k.op("add.u32 %s, %s, 1" % (it, it))
        lp.again(k.p("setp.lt.u32", it, nw))
    k.op("cp.async.wait_group 0")
    for ri in range(2):
        quad_reduce(k, l[ri], "add.f32")

    k.note("merge the warps in warp order: acc[w][row][D], then m[w][row], l[w][row]")
    k.op("bar.sync 0")
    s_acc = s_ring
    s_m = k.r("add.u32", s_ring, WARPS * ROWS * d * 4)
    s_l = k.r("add.u32", s_m, WARPS * ROWS * 4)
    wacc = k.r("add.u32", s_acc, k.r("mul.lo.u32", warp, ROWS * d * 4))
    for ri in range(2):
        row = k.r("add.u32", g, 8 * ri)
        ra = k.r("add.u32", wacc, k.r("add.u32", k.r("mul.lo.u32", row, d * 4), k.r("shl.b32", t2, 2)))
        for nt in range(d // 8):
            k.op("st.shared.v2.f32 [%s+%d], {%s, %s}" % (ra, nt * 32, acc[nt][2 * ri], acc[nt][2 * ri + 1]))
        with skip_if(k, k.p("setp.ne.u32", t2, 0), "not_lead_%d" % ri):
            wr = k.r("shl.b32", k.r("add.u32", k.r("shl.b32", warp, 4), row), 2)
            k.op("st.shared.f32 [%s], %s" % (k.r("add.u32", s_m, wr), m[ri]))
            k.op("st.shared.f32 [%s], %s" % (k.r("add.u32", s_l, wr), l[ri]))
    if paged:
        k.note("a bad page seen by any warp spoils the CTA's rows")
        k.op("bar.red.or.pred %s, 0, %s" % (bad, bad))
    else:
        k.op("bar.sync 0")
    # thread tid: row tid / 8, columns (tid % 8) * D/8 ..
    ncol = d // 8
    mrow = k.r("shr.u32", tid, 3)
    c0 = k.r("mul.lo.u32", k.r("and.b32", tid, 7), ncol)
    mw, lw = [], []
    for w in range(WARPS):
        mw.append(k.f("ld.shared.f32", "[%s]" % k.r("add.u32", s_m, k.r("shl.b32", k.r("add.u32", mrow, 16 * w), 2))))
        lw.append(k.f("ld.shared.f32", "[%s]" % k.r("add.u32", s_l, k.r("shl.b32", k.r("add.u32", mrow, 16 * w), 2))))
    mmax = mw[0]
    for w in range(1, WARPS):
        mmax = k.f("max.f32", mmax, mw[w])
    muse = k.f("selp.f32", "0f00000000", mmax, k.p("setp.eq.f32", mmax, NEG_INF))
    fw = [k.f("ex2.approx.ftz.f32", k.f("mul.f32", k.f("sub.f32", mw[w], muse), sl2)) for w in range(WARPS)]
    lsum = k.f("mul.f32", fw[0], lw[0])
    for w in range(1, WARPS):
        lsum = k.f("fma.rn.f32", fw[w], lw[w], lsum)
    pos = k.p("setp.gt.f32", lsum, "0f00000000")
    inv = k.f("selp.f32", k.f("rcp.approx.ftz.f32", lsum), "0f00000000", pos)
    fw = [k.f("mul.f32", f, inv) for f in fw]
    lse = k.f("mul.f32", k.f("fma.rn.f32", muse, sl2, k.f("lg2.approx.ftz.f32", lsum)), LN2)
    lse = k.f("selp.f32", lse, NEG_INF, pos)
    vals = []
    caddr = k.r("add.u32", s_acc, k.r("shl.b32", k.r("add.u32", k.r("mul.lo.u32", mrow, d), c0), 2))
    for c in range(0, ncol, 4):
        sums = None
        for w in range(WARPS):
            part = k.regs("f", 4)
            k.op("ld.shared.v4.f32 {%s}, [%s+%d]" % (", ".join(part), caddr, w * ROWS * d * 4 + 4 * c))
            if sums is None:
                sums = [k.f("mul.f32", x, fw[w]) for x in part]
            else:
                sums = [k.f("fma.rn.f32", x, fw[w], y) for x, y in zip(part, sums)]
        vals += sums
    if paged:
        vals = [k.f("selp.f32", NAN, x, bad) for x in vals]
        lse = k.f("selp.f32", NAN, lse, bad)
    r = k.r("add.u32", r0, mrow)
    with skip_if(k, k.p("setp.ne.u32", P["splits"], 1), "to_ws", uni=True):
        with skip_if(k, k.p("setp.ge.u32", r, rows), "pad_row"):
            write_final(k, P, b, hk, r, c0, vals, lse, esize_shift(k, P["out_dtype"]), d)
        k.op("ret")
    with skip_if(k, k.p("setp.ge.u32", r, rows), "pad_row_ws"):
        widx = k.r("add.u32", k.r("mul.lo.u32", k.r("add.u32", k.r("mul.lo.u32", z, P["splits"]), split), rows), r)
        wptr = k.rd("add.u64", P["ws_o"], k.rd("shl.b64", k.rd("add.u64", k.rd("mul.wide.u32", widx, d), k.wide(c0)), 2))
        for c in range(0, ncol, 4):
            k.op("st.global.v4.f32 [%s+%d], {%s}" % (wptr, 4 * c, ", ".join(vals[c:c + 4])))
        with skip_if(k, k.p("setp.ne.u32", c0, 0), "not_c0"):
            k.op("st.global.f32 [%s], %s" % (k.rd("add.u64", P["ws_lse"], k.rd("mul.wide.u32", widx, 4)), lse))
    combine_last(k, P, d, z, b, hk, r0, rows, tid, warp, lane, s_q, s_ring)
    k.op("ret")
    return k.text()


def combine_last(k, P, d, z, b, hk, r0, rows, tid, warp, lane, s_flag, s_w):
    """The CTA of (z, row block) that counts its split last merges the
    splits' O and LSE (normalised, in the workspace) in split order, so the
    result does not depend on which CTA that is; it resets the count for the
    next launch.  Weights of row rr: s_w[rr][s] (128 splits at most), then
    the rows' LSE at s_w + 16*128*4."""
    k.note("count this split; the last CTA of (z, row block) merges them all")
    k.op("fence.acq_rel.gpu")
    k.op("bar.sync 0")
    with skip_if(k, k.p("setp.ne.u32", tid, 0), "not_counter"):
        cidx = k.r("add.u32", k.r("mul.lo.u32", z, k.r("mov.u32", "%nctaid.y")), k.r("mov.u32", "%ctaid.y"))
        cptr = k.rd("add.u64", P["count"], k.rd("mul.wide.u32", cidx, 4))
        old = k.r("atom.acq_rel.gpu.global.add.u32", "[%s]" % cptr, 1)
        last = k.p("setp.eq.u32", old, k.r("sub.u32", P["splits"], 1))
        with skip_if(k, "!" + last, "not_last"):
            k.op("st.relaxed.gpu.global.u32 [%s], 0" % cptr)
        k.op("st.shared.u32 [%s], %s" % (s_flag, k.r("selp.b32", 1, 0, last)))
    k.op("bar.sync 0")
    with skip_if(k, k.p("setp.ne.u32", k.r("ld.shared.u32", "[%s]" % s_flag), 0), "is_last", uni=True):
        k.op("ret")
    k.op("fence.acq_rel.gpu")
    rows_here = k.r("min.u32", k.r("sub.u32", rows, r0), ROWS)
    zs = k.r("mul.lo.u32", z, P["splits"])
    s_lse = k.r("add.u32", s_w, ROWS * 128 * 4)
    k.note("weights: warp w takes rows w, w+4, ..; lane the splits lane, lane+32, ..")
    for j in range(ROWS // WARPS):
        rr = k.r("add.u32", warp, WARPS * j)
        with skip_if(k, k.p("setp.ge.u32", rr, rows_here), "w_row_%d" % j, uni=True):
            xs = []
            for q in range(4):
                sp = k.r("add.u32", lane, 32 * q)
                x = k.f("mov.f32", NEG_INF)
                widx = k.r("add.u32", k.r("mul.lo.u32", k.r("add.u32", zs, sp), rows), k.r("add.u32", r0, rr))
                ok = k.p("setp.lt.u32", sp, P["splits"])
                k.op("@%s ld.global.cg.f32 %s, [%s]" % (ok, x, k.rd("add.u64", P["ws_lse"], k.rd("mul.wide.u32", widx, 4))))
                xs.append(x)
            mx = k.f("max.f32", k.f("max.f32", xs[0], xs[1]), k.f("max.f32", xs[2], xs[3]))
            warp_reduce(k, mx, "max.f32")
            muse = k.f("selp.f32", "0f00000000", mx, k.p("setp.eq.f32", mx, NEG_INF))
            es = [k.f("ex2.approx.ftz.f32", k.f("mul.f32", k.f("sub.f32", x, muse), "0f3FB8AA3B")) for x in xs]
            lsum = k.f("add.f32", k.f("add.f32", es[0], es[1]), k.f("add.f32", es[2], es[3]))
            warp_reduce(k, lsum, "add.f32")
            pos = k.p("setp.gtu.f32", lsum, "0f00000000")    # NaN (a bad sequence) carries through
            inv = k.f("selp.f32", k.f("rcp.approx.ftz.f32", lsum), "0f00000000", pos)
            wrow = k.r("add.u32", s_w, k.r("shl.b32", k.r("add.u32", k.r("shl.b32", rr, 7), lane), 2))
            for q in range(4):
                k.op("st.shared.f32 [%s+%d], %s" % (wrow, 128 * q, k.f("mul.f32", es[q], inv)))
            lse = k.f("add.f32", muse, k.f("mul.f32", k.f("lg2.approx.ftz.f32", lsum), LN2))
            lse = k.f("selp.f32", lse, NEG_INF, pos)
            with skip_if(k, k.p("setp.ne.u32", lane, 0), "not_l0_%d" % j):
                k.op("st.shared.f32 [%s], %s" % (k.r("add.u32", s_lse, k.r("shl.b32", rr, 2)), lse))
    k.op("bar.sync 0")
    k.note("O: thread tid takes 4 columns of (row, column) items tid, tid+128, ..; 16 splits per step")
    ncol4 = d // 4
    items = k.r("mul.lo.u32", rows_here, ncol4)
    item = k.r("mov.u32", tid)
    step = k.rd("mul.wide.u32", rows, 4 * d)
    unroll = 16
    with loop(k, "item_loop", skip=k.p("setp.ge.u32", item, items)) as il:
        row = k.r("shr.u32", item, ncol4.bit_length() - 1)
        c0 = k.r("shl.b32", k.r("and.b32", item, ncol4 - 1), 2)
        first = k.r("add.u32", k.r("mul.lo.u32", zs, rows), k.r("add.u32", r0, row))
        optr = k.rd("add.u64", P["ws_o"], k.rd("shl.b64", k.rd("add.u64", k.rd("mul.wide.u32", first, d), k.wide(c0)), 2))
        wptr = k.r("add.u32", s_w, k.r("shl.b32", row, 9))
        acc = k.regs("f", 4)
        k.zero_f(acc)
        sidx = k.r("mov.u32", 0)
        with loop(k, "split_loop") as sl:
            parts = []
            ptr = optr
            for u in range(unroll):
                part = k.regs("f", 4)
                k.zero_f(part)
                ok = k.p("setp.lt.u32", k.r("add.u32", sidx, u), P["splits"])
                k.op("@%s ld.global.cg.v4.f32 {%s}, [%s]" % (ok, ", ".join(part), ptr))
                parts.append(part)
                if u + 1 < unroll:
                    ptr = k.rd("add.u64", ptr, step)
            for u in range(unroll):
                w = k.f("ld.shared.f32", "[%s+%d]" % (wptr, 4 * u))
                for e in range(4):
                    k.op("fma.rn.f32 %s, %s, %s, %s" % (acc[e], parts[u][e], w, acc[e]))
            k.op("add.u64 %s, %s, %s" % (optr, optr, k.rd("mul.lo.u64", step, unroll)))
            k.op("add.u32 %s, %s, %d" % (wptr, wptr, 4 * unroll))
            k.op("add.u32 %s, %s, %d" % (sidx, sidx, unroll))
            sl.again(k.p("setp.lt.u32", sidx, P["splits"]))
        lse = k.f("ld.shared.f32", "[%s]" % k.r("add.u32", s_lse, k.r("shl.b32", row, 2)))
        write_final(k, P, b, hk, k.r("add.u32", r0, row), c0, acc, lse,
                    esize_shift(k, P["out_dtype"]), d)
        k.op("add.u32 %s, %s, %d" % (item, item, 128))
        il.again(k.p("setp.lt.u32", item, items))


def generate():
    out = [HEADER]
    for paged in (False, True):
        for dt in DTYPES:
            for d in DIMS:
                out.append("\n" + decode_kernel(dt, d, paged))
    # and again as sm_90 dependent launches (grid_dep.twin_module): the wait precedes the
    # count and workspace accesses, so the last-CTA combine sees only its own launch
    return {"attention_decode.ptx": "".join(out), "attention_decode_sm90.ptx": twin_module("".join(out))}


if __name__ == "__main__":
    sys.exit(cli.main(__file__, __doc__, generate))
