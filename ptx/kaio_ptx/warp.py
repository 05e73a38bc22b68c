"""Warp-level reductions: butterfly shuffles and the split-K sum of warps'
partial tiles through shared memory."""

from kaio_ptx.control import skip_if


def shfl_reduce(k, x, op, masks):
    """x = op(x, x of lane ^ m) in place for each lane mask m in order (the
    order fixes the rounding of a float op)."""
    for m in masks:
        o = k.reg("f")
        k.op("shfl.sync.bfly.b32 %s, %s, %d, 0x1f, 0xffffffff" % (o, x, m))
        k.op("%s %s, %s, %s" % (op, x, x, o))


def quad_reduce(k, x, op):
    """Across the 4 lanes of a quad (an mma fragment row's owners)."""
    shfl_reduce(k, x, op, (2, 1))


def warp_reduce(k, x, op):
    """Across the whole warp."""
    shfl_reduce(k, x, op, (16, 8, 4, 2, 1))


def sum_warp_partials(k, smem, tid, threads, rows, cols, warps, row_base, col_base, m, n, store):
    """The split-K tail of the decode kernels: `warps` warps each left a
    rows x cols tile of f32 partial sums in shared memory (warp w's at
    smem + w * rows * cols * 4, element o = row * cols + col); thread o (then
    o + threads, ...) adds them in warp order, a fixed order, and, for
    outputs inside m x n, calls store(row, col, sum).  cols is a power of two;
    row_base (None for 0) and col_base offset the tile in the output."""
    nout = rows * cols
    for rep in range((nout + threads - 1) // threads):
        o = k.r("add.u32", tid, rep * threads) if rep else tid
        row = k.r("shr.u32", o, cols.bit_length() - 1)
        if row_base is not None:
            row = k.r("add.u32", row_base, row)
        col = k.r("add.u32", col_base, k.r("and.b32", o, cols - 1))
        ok = k.p("setp.lt.and.u32", row, m, k.p("setp.lt.u32", col, n))
        if (rep + 1) * threads > nout:
            ok = k.p("setp.lt.and.u32", o, nout, ok)
        with skip_if(k, "!" + ok, "out_skip"):
            addr = k.r("add.u32", smem, k.r("shl.b32", o, 2))
            ssum = k.f("ld.shared.f32", "[%s]" % addr)
            for w in range(1, warps):
                part = k.f("ld.shared.f32", "[%s+%d]" % (addr, w * nout * 4))
                k.op("add.f32 %s, %s, %s" % (ssum, ssum, part))
            store(row, col, ssum)
