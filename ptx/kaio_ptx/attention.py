"""What the attention kernels (sm_80 mma.sync, f32, sm_90a wgmma) share:
their 128-thread entry with launch annotations, the (batch, head) split of
the grid, BSHD addressing, masking, key-block counts and the row stores."""

from kaio_ptx import kernel, op_fault
from kaio_ptx.control import cases, skip_if
from kaio_ptx.dtypes import OUT_DTYPES
from kaio_ptx.mma import pack


class Kernel(kernel.Kernel):
    """An entry with both launch annotations, 128 threads unless block is
    changed."""

    def __init__(self, name, doc, params, shared_bytes, rows_per_cta, keys=None):
        super().__init__(name, doc, params, 128, shared_bytes, rows_per_cta, keys=keys)

    def zero_f(self, regs):
        for reg in regs:
            self.op("mov.f32 %s, 0f00000000" % reg)


def bh_split(k, heads, y=None):
    """(y, b, h) from y = b * heads + h (ctaid.y unless given)."""
    y = y or k.r("mov.u32", "%ctaid.y")
    b = k.r("div.u32", y, heads)
    h = k.r("sub.u32", y, k.r("mul.lo.u32", b, heads))
    return y, b, h


def blocks_first(k, when):
    """(block, y) of a grid of blocks along x and b * heads along y. Where
    `when` holds, the CTAs' dispatch order (linear id x + y * nctaid.x) is
    read block-major: every head's block 0, then every head's block 1, ...
    Under a causal mask a block's work falls with its index, so the longest
    CTAs of all heads go first and the short ones fill the tail; head by
    head, the last head's longest CTA starts last (bench/RESULTS.md, session
    23). Otherwise (ctaid.x, ctaid.y)."""
    x, y = k.r("mov.u32", "%ctaid.x"), k.r("mov.u32", "%ctaid.y")
    ny = k.r("mov.u32", "%nctaid.y")
    lin = k.r("mad.lo.u32", y, k.r("mov.u32", "%nctaid.x"), x)
    blk = k.r("div.u32", lin, ny)
    row = k.r("sub.u32", lin, k.r("mul.lo.u32", blk, ny))
    return k.r("selp.b32", blk, x, when), k.r("selp.b32", row, y, when)


def tensor_base(k, ptr, b, bs, h, d):
    """Address of row 0 of head h in batch b: ptr + (b*bs + h*d)*2."""
    el = k.rd("add.u64", k.rd("mul.lo.u64", k.wide(b), bs), k.rd("mul.wide.u32", h, d))
    return k.rd("add.u64", ptr, k.rd("shl.b64", el, 1))


def out_base(k, ptr, b, bs, h, d, out_dtype):
    """Like tensor_base for an output whose element size follows out_dtype."""
    el = k.rd("add.u64", k.rd("mul.lo.u64", k.wide(b), bs), k.rd("mul.wide.u32", h, d))
    is32 = k.p("setp.eq.u32", out_dtype, 1)
    sh = k.r("selp.b32", 2, 1, is32)
    return k.rd("add.u64", ptr, k.rd("shl.b64", el, sh))


def mask_tile(k, s, colbase, lims, ncols, fill, t2):
    """s[nt][e] = fill where the column (colbase + 8 nt + t2 + (e & 1)) is not
    below lims[e >> 1] (signed)."""
    c0 = k.r("add.s32", colbase, t2)
    for nt in range(ncols // 8):
        for e in range(4):
            col = k.r("add.s32", c0, 8 * nt + (e & 1))
            ok = k.p("setp.lt.s32", col, lims[e >> 1])
            k.op("selp.f32 %s, %s, %s, %s" % (s[nt][e], s[nt][e], fill, ok))


def store_rows(k, acc, d, row0, nrows, out_base, sstride, out_dtype, t2, scale=None):
    """Writes a warp's 16 x d accumulator (acc[nt][e]: row row0 + 8*(e >= 2),
    col 8 nt + t2 + (e & 1)) to rows < nrows of a BSHD tensor at out_base
    (address of this (b, h)'s row 0, column 0), converting to out_dtype."""
    vals = acc
    if scale is not None:
        vals = [[k.f("mul.f32", x, scale) for x in tile] for tile in acc]
    done = k.label("stored")
    for r in range(2):
        row = k.r("add.u32", row0, 8 * r)
        ok = k.p("setp.lt.s32", row, nrows)
        rowel = k.rd("add.u64", k.rd("mul.lo.u64", k.wide(row), sstride), k.wide(t2))
        for code, name, esize in cases(k, out_dtype, OUT_DTYPES, "%s_%d" % (done, r)):
            ptr = k.rd("add.u64", out_base, k.rd("shl.b64", rowel, esize.bit_length() - 1))
            for nt in range(d // 8):
                x0, x1 = vals[nt][2 * r], vals[nt][2 * r + 1]
                off = 8 * nt * esize
                if name == "f32":
                    k.op("@%s st.global.v2.f32 [%s+%d], {%s, %s}" % (ok, ptr, off, x0, x1))
                else:
                    w = pack(k, name, x1, x0)
                    k.op("@%s st.global.b32 [%s+%d], %s" % (ok, ptr, off, w))


def key_blocks(k, P, m0, bm, bn):
    """(number of key blocks of bn keys, first block start that needs the
    mask), CTA-uniform, for the query rows [m0, m0 + bm)."""
    sq, sk, off = P["seq_q"], P["seq_k"], P["causal_off"]
    causal = k.p("setp.ne.u32", P["causal"], 0)
    last = k.r("sub.u32", k.r("min.u32", k.r("add.u32", m0, bm), sq), 1)
    n_end_c = k.r("min.s32", k.r("add.s32", k.r("add.s32", last, off), 1), sk)
    n_end = k.r("max.s32", k.r("selp.b32", n_end_c, sk, causal), 0)
    nblocks = k.r("shr.u32", k.r("add.u32", n_end, bn - 1), bn.bit_length() - 1)
    first_mask_sk = k.r("sub.s32", sk, bn)                             # kv0 + bn > seq_k
    first_mask_c = k.r("sub.s32", k.r("add.s32", m0, off), bn - 1)     # kv0 + bn - 1 > m0 + off
    first_mask = k.r("selp.b32", k.r("min.s32", first_mask_sk, first_mask_c), first_mask_sk, causal)
    return nblocks, first_mask


# --------------------------------------------------------------------------
# Variable-length batches (FlashAttention's varlen layout): sequences packed
# back to back, row cu[b] .. cu[b+1]-1 of the rank-2 views is sequence b.
# --------------------------------------------------------------------------

VARLEN_PARAMS = [(".u64", "cu_q"), (".u64", "cu_k"), (".u32", "total_q"), (".u32", "total_k"),
                 (".u64", "flag")]
VARLEN_PTRS = ("cu_q", "cu_k", "flag")


def varlen_bounds(k, cu, b, total, limit=None, fault=None):
    """(start, length) of sequence b from the s32 prefix sums at cu (global).
    cu is device data: an entry pair that is not 0 <= cu[b] <= cu[b+1] <=
    total (compared unsigned, so a negative entry fails too), or, with
    limit, a length above limit (the host's max_seqlen, which sized the
    grid), gives (0, 0), so no row outside [0, total) is ever addressed and
    no sequence is cut short. fault (flag address, op_fault code): thread 0
    of the CTA then raises the flag with b and cu[b+1]."""
    ptr = k.rd("add.u64", cu, k.rd("mul.wide.u32", b, 4))
    start = k.r("ld.global.u32", "[%s]" % ptr)
    end = k.r("ld.global.u32", "[%s+4]" % ptr)
    ok = k.p("setp.le.u32", start, end)
    ok = k.p("setp.le.and.u32", end, total, ok)
    if limit is not None:
        ok = k.p("setp.le.and.u32", k.r("sub.u32", end, start), limit, ok)
    if fault is not None:
        flag, code = fault
        quiet = k.p("setp.eq.or.u64", flag, 0, ok)
        quiet = k.p("setp.ne.or.u32", k.r("mov.u32", "%tid.x"), 0, quiet)
        with skip_if(k, quiet, "cu_ok"):
            op_fault.raise_fault(k, flag, code, b, end)
    return k.r("selp.b32", start, 0, ok), k.r("selp.b32", k.r("sub.u32", end, start), 0, ok)


def rebase(k, ptr, start, stride, shift):
    """ptr + (start * stride) << shift: row start of a packed tensor (stride
    a u64 register in elements, or None for 1)."""
    el = k.wide(start) if stride is None else k.rd("mul.lo.u64", k.wide(start), stride)
    return k.rd("add.u64", ptr, k.rd("shl.b64", el, shift))


def out_shift(k, out_dtype):
    """log2 of an out_dtype element's size (1 f32: 4 bytes, else 2)."""
    return k.r("selp.b32", 2, 1, k.p("setp.eq.u32", out_dtype, 1))


def varlen_sequence(k, P, b):
    """The per-sequence view of a varlen kernel's parameters for sequence b:
    a copy of P whose seq_q, seq_k and causal_off are sequence b's (causal 1
    is bottom-right per sequence, j <= i + len_k - len_q; 2 top-left), plus
    q_start and k_start (its first packed rows).  The caller moves its
    pointers with rebase() and uses batch 0 from then on."""
    q_start, len_q = varlen_bounds(k, P["cu_q"], b, P["total_q"], P["seq_q"],
                                   (P["flag"], op_fault.CU_Q))
    k_start, len_k = varlen_bounds(k, P["cu_k"], b, P["total_k"], P["seq_k"],
                                   (P["flag"], op_fault.CU_K))
    bottom_right = k.p("setp.eq.u32", P["causal"], 1)
    V = dict(P)
    V.update(seq_q=len_q, seq_k=len_k, q_start=q_start, k_start=k_start,
             causal_off=k.r("selp.b32", k.r("sub.u32", len_k, len_q), 0, bottom_right))
    return V


# --------------------------------------------------------------------------
# Paged KV (chunked prefill): packed queries as varlen, keys of sequence b in
# the pools' pages block_table[b, j >> page_shift], slot j & (page_size - 1).
# --------------------------------------------------------------------------

PAGED_PARAMS = [(".u64", "cu_q"), (".u64", "table"), (".u64", "lens"), (".u64", "flag"),
                (".u64", "table_rs"), (".u32", "total_q"), (".u32", "num_pages"),
                (".u32", "page_shift")]
NAN = "0f7FC00000"


def raise_flag(k, P, code, b, value):
    """Raises the device's op flag, if any (flag != 0), with fault code
    (op_fault.SEQ_LEN, PAGE_ID) for sequence b and the offending value."""
    with skip_if(k, k.p("setp.eq.u64", P["flag"], 0), "no_flag"):
        op_fault.raise_fault(k, P["flag"], code, b, value)


class PagedKeys:
    """Sequence b's keys in the page pools.  seq_k (the host's max_seqlen_k,
    <= max_pages << page_shift) bounds the length read from lens[b]: a
    longer (or negative) one is clamped, a page id outside [0, num_pages)
    replaced by page 0; both set bad (the CTA's rows become NaN) and raise
    the flag.  So no byte outside the pools or the table is addressed."""

    def __init__(self, k, P, b, tid):
        self.k, self.P, self.b = k, P, b
        lv = k.r("ld.global.u32", "[%s]" % k.rd("add.u64", P["lens"], k.rd("mul.wide.u32", b, 4)))
        self.length = k.r("min.u32", lv, P["seq_k"])      # a negative i32 is huge as u32
        self.bad = k.reg("p")
        k.op("setp.ne.u32 %s, %s, %s" % (self.bad, self.length, lv))
        self.lv, self.tid = lv, tid
        self.row_ptr = k.rd("add.u64", P["table"],
                            k.rd("shl.b64", k.rd("mul.lo.u64", k.wide(b), P["table_rs"]), 2))
        self.pmask = k.r("sub.u32", k.r("shl.b32", 1, P["page_shift"]), 1)

    def report_length(self):
        """Thread 0 raises the flag for a clamped length (call once, after
        the CTA's early exit)."""
        k = self.k
        with skip_if(k, "!" + self.bad, "len_ok"):
            with skip_if(k, k.p("setp.ne.u32", self.tid, 0), "not_t0"):
                raise_flag(k, self.P, op_fault.SEQ_LEN, self.b, self.lv)

    def pool_rows(self, keys, oks):
        """Pool rows (u64) of the keys (u32 registers) whose predicate in oks
        holds (others give row 0 of page 0): every table entry is loaded
        first, then checked with one branch."""
        return self.check_pages(self.load_pages(keys, oks), keys)

    def load_pages(self, keys, oks):
        """The table entries (u32 registers, 0 where oks fails) of the keys'
        pages, loaded, not yet checked (a caller may load them early)."""
        k, P = self.k, self.P
        pages = []
        for key, ok in zip(keys, oks):
            page = k.r("mov.u32", 0)
            addr = k.rd("add.u64", self.row_ptr, k.rd("mul.wide.u32", k.r("shr.u32", key, P["page_shift"]), 4))
            k.op("@%s ld.global.nc.u32 %s, [%s]" % (ok, page, addr))
            pages.append(page)
        return pages

    def check_pages(self, pages, keys):
        """pool_rows' second half: bad ids to page 0 (bad, flag), pool rows."""
        k, P = self.k, self.P
        pages = list(pages)
        anybad, worst = None, None
        for i, page in enumerate(pages):
            pbad = k.p("setp.ge.u32", page, P["num_pages"])    # negative ids too (as u32)
            worst = page if worst is None else k.r("selp.b32", page, worst, pbad)
            anybad = pbad if anybad is None else k.p("or.pred", anybad, pbad)
            pages[i] = k.r("selp.b32", 0, page, pbad)
        with skip_if(k, "!" + anybad, "pages_ok"):
            k.op("setp.eq.u32 %s, %s, %s" % (self.bad, self.tid, self.tid))
            raise_flag(k, P, op_fault.PAGE_ID, self.b, worst)
        return [k.wide(k.r("or.b32", k.r("shl.b32", page, P["page_shift"]), k.r("and.b32", key, self.pmask)))
                for page, key in zip(pages, keys)]

    def spoil(self):
        """CTA-wide OR of bad (a barrier: every thread must call it)."""
        self.k.op("bar.red.or.pred %s, 0, %s" % (self.bad, self.bad))
