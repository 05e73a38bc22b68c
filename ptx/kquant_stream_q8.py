"""Q8_0 for the streaming matvec (kquant_stream.py): a consumer warp's share
of a stage, BLOCKS_PER_WARP blocks of 16 rows, multiplied on tensor cores.

A Q8_0 block is an f16 scale d and 32 int8 quants. Each quant pair becomes an
exact f16 pair in three steps: prmt puts the two bytes under f16 exponent
bytes (0x64: 1024 + u), xor 0x80 turns the signed bytes into u = q + 128,
and one sub.f16x2 of 1152 leaves q. Blocks sit only 2-byte aligned in the
stage (34 bytes each), so a lane reads its pairs with 16-bit loads, and the
mma's k slots 2t, 2t + 1 (and 2t + 8, 2t + 9) take consecutive quants: the
activation pairs are then plain aligned 32-bit words, with no repacking.
Per block and row the scale is applied in f32 (one fma per result) to the
two steps' mma sum.

Why it pays where kquant_mma.py's Q8_0 attempt lost (26-34 % of copy with
16-bit global loads): here the 16-bit loads hit shared memory, which bulk
copies filled, so no load waits on DRAM.
"""

from kquant_mma import mma

BLOCK_BYTES, BLOCK_ELEMS = 34, 32
BLOCKS_PER_WARP = 4


def q8_0_warp_blocks(k, cx, rows, bi0, nblk, abase, t, acc):
    """acc += the products of blocks bi0 .. bi0 + BLOCKS_PER_WARP - 1 (those
    below nblk) of rows g, g + 8, whose bytes start at rows[0], rows[1] in
    shared memory, with A's row at abase (f16, or split: kquant_mma.act_base).
    A block past the row's end is multiplied with its row's last activations
    (stale stage bytes: registers only) and not added."""
    lane = k.r("mad.lo.u32", t, "2", "2")
    qa = [k.r("add.u32", r, lane) for r in rows]                  # each row's first pair: qs + 2t
    magic = cx.magic                                               # f16 0x6400 pairs
    flip = k.r("mov.b32", "0x00800080")
    bias = k.r("mov.b32", "0x64806480")                            # f16 1152, both halves
    act_lane = k.r("mul.lo.u32", t, "8" if cx.split_act else "4")   # split: a pair's hi and lo words
    for b in range(BLOCKS_PER_WARP):
        kb = k.r("add.u32", bi0, str(b))                           # block index in the row
        valid = k.p("setp.lt.u32", kb, nblk) if b else None          # bi0 itself exists
        if valid:
            kb = k.r("min.u32", kb, k.r("sub.u32", nblk, "1"))
        # block kb starts at element 32 kb: byte 64 kb, or 128 kb when split
        ab = k.r("mad.lo.u32", kb, str((4 if cx.split_act else 2) * BLOCK_ELEMS), k.r("add.u32", abase, act_lane))
        scales = []
        for row in rows:
            h = k.reg("h")
            k.op("ld.shared.b16 %s, [%s+%d]" % (h, row, BLOCK_BYTES * b))
            scales.append(k.f("cvt.f32.f16", h))
        dq = None
        for s in (0, 1):
            a = []
            for koff in (0, 8):          # slots 2t, 2t+1, then 2t+8, 2t+9
                for q in qa:
                    w = k.r("ld.shared.u16", "[%s+%d]" % (q, BLOCK_BYTES * b + 16 * s + koff))
                    x = k.r("lop3.b32", k.r("prmt.b32", w, magic, "0x7150"), flip, "0", "0x3C")   # a ^ b
                    a.append(k.r("sub.rn.f16x2", x, bias))
            if cx.split_act:     # chunks 2s, 2s + 1: (hi, lo) of this lane's pair in each
                hl = [k.regs("r", 2) for _ in range(2)]
                for i, o in enumerate((64 * s, 64 * s + 32)):
                    k.op("ld.shared.v2.b32 {%s}, [%s+%d]" % (", ".join(hl[i]), ab, o))
                for part in (0, 1):
                    dq = mma(cx, a, [hl[0][part], hl[1][part]], dq)
            else:
                bw = [k.r("ld.shared.b32", "[%s+%d]" % (ab, o)) for o in (32 * s, 32 * s + 16)]
                dq = mma(cx, a, bw, dq)
        for i in range(4):
            k.op("%sfma.rn.f32 %s, %s, %s, %s" % ("@%s " % valid if valid else "", acc[i], scales[i // 2], dq[i], acc[i]))
