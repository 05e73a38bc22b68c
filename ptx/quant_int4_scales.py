"""The sm_90a W4A16 kernels' group scales and zero points (ptx/gen_quant_int4_sm90.py).

For the weight columns a thread owns (cols, inside the CTA's 128): the raw
scale and zero word of the one or two groups a K step touches, loaded a step
ahead and only when the step's group is new, and from them the f16x2
(bf16x2) constants of the dequantization."""

MAGIC = {"f16": "0x64006400", "bf16": "0x43004300"}


class GroupScales:
    """Emits the per-column set-up at construction; registers() then the
    loop's registers; the caller sets last_grp (-1) before the first
    loads()."""

    def __init__(self, k, P, n0, cols, step0, nsteps):
        self.k, self.P, self.step0, self.nsteps, self.ncols = k, P, step0, nsteps, len(cols)
        self.zeros = k.p("setp.ne.u64", P["qz"], 0)
        self.ngroups = k.r("div.u32", P["k"], P["group"])
        self.g32 = k.p("setp.eq.u32", P["group"], 32)
        # a K step's group by a shift, not a division in the loop: g is a power of
        # two, or K itself (then every step is in group 0: 64 * step < 2^31)
        pow2 = k.p("setp.eq.u32", k.r("and.b32", P["group"], k.r("add.u32", P["group"], -1)), 0)
        self.gshift = k.r("selp.b32", k.r("bfind.u32", P["group"]), 31, pow2)
        ns = [k.r("add.u32", n0, c) for c in cols]
        self.nok = [k.p("setp.lt.u32", n, P["n"]) for n in ns]
        self.sc_col = [k.rd("add.u64", P["sc"], k.rd("mul.wide.u32", n, 2)) for n in ns]
        self.qz_col = [k.rd("add.u64", P["qz"], k.rd("mul.wide.u32", k.r("shr.u32", n, 3), 4)) for n in ns]
        self.zshift = [k.r("shl.b32", k.r("and.b32", n, 7), 2) for n in ns]
        self.ldsc2 = k.rd("shl.b64", P["ldsc"], 1)
        self.ldqz4 = k.rd("shl.b64", P["ldqz"], 2)
        self.last_grp = None

    def registers(self):
        """nxt: the raw words of the next step to prepare; sc2, zm2: the
        scales (both halves) and zero constants of the step being built,
        remade only when its group is new (fresh): g >= 128 spans steps."""
        k, cs = self.k, range(self.ncols)
        self.nxt = {(r, ci, x): k.reg("r") for r in range(2) for ci in cs for x in range(2)}
        self.sc2 = {(r, ci): k.reg("r") for r in range(2) for ci in cs}
        self.zm2 = {key: k.reg("r") for key in self.sc2}
        self.fresh = k.reg("p")

    def loads(self, step):
        """Raw scales and zero words of this CTA's K step `step` into
        nxt[r, ci, 0 | 1]: group row r = 0 serves the step's first 32 k and
        r = 1 its last 32 (the next group when g = 32, else the same one); 0
        past N, K/g or the end."""
        k, P, raw, last_grp = self.k, self.P, self.nxt, self.last_grp
        grp = k.r("shr.u32", k.r("shl.b32", k.r("add.u32", self.step0, step), 6), self.gshift)
        live = k.p("setp.lt.u32", step, self.nsteps)
        # the same group as the step before (g >= 128): raw already holds it
        skip = k.label("one_group")
        same = k.p("setp.eq.u32", grp, last_grp)
        k.op("setp.ne.u32 %s, %s, %s" % (self.fresh, grp, last_grp))
        k.op("mov.u32 %s, %s" % (last_grp, grp))
        k.op("@%s bra.uni %s" % (same, skip))
        for key in raw:
            k.op("mov.u32 %s, 0" % raw[key])
        for r in range(2):
            if r:
                # row 1 is another group only when g = 32; otherwise prepare copies row 0
                k.op("@!%s bra.uni %s" % (self.g32, skip))
            gr = grp if r == 0 else k.r("add.u32", grp, 1)
            gok = k.p("setp.lt.and.u32", gr, self.ngroups, live)
            grw = k.rd("cvt.u64.u32", gr)
            for ci in range(self.ncols):
                ok = k.p("and.pred", gok, self.nok[ci])
                k.op("@%s ld.global.u16 %s, [%s]" % (ok, raw[r, ci, 0],
                                                     k.rd("mad.lo.u64", grw, self.ldsc2, self.sc_col[ci])))
                k.op("@%s ld.global.u32 %s, [%s]" % (k.p("and.pred", ok, self.zeros), raw[r, ci, 1],
                                                     k.rd("mad.lo.u64", grw, self.ldqz4, self.qz_col[ci])))
        k.place(skip)

    def prepare(self, dt, neg1=None, zc_hi=None):
        """sc2 and zm2 from nxt (the next step to build's, loaded a step
        ago) where its group is new; row 1 is row 0's but for g = 32.  zm2:
        the magic plus z + zoff in each half; f16 (neg1, zc_hi given) makes
        it (-(1024 + z), -(64 + z)), the constant of the nibble fma."""
        k, P = self.k, self.P
        skip, copy, done = k.label("same_scales"), k.label("row0_twice"), k.label("scales_made")
        k.op("@!%s bra.uni %s" % (self.fresh, skip))
        for r in range(2):
            if r:
                k.op("@!%s bra.uni %s" % (self.g32, copy))
            for ci in range(self.ncols):
                sv, zw = self.nxt[r, ci, 0], self.nxt[r, ci, 1]
                k.op("prmt.b32 %s, %s, %s, 0x1010" % (self.sc2[r, ci], sv, sv))
                z = k.r("and.b32", k.r("shr.u32", zw, self.zshift[ci]), 15)
                z = k.r("selp.b32", k.r("add.u32", z, P["zoff"]), 8, self.zeros)
                # q and z + zoff are at most 16: they sit in the low mantissa bits of the magic
                zm = k.r("or.b32", k.r("mul.lo.u32", z, "0x00010001"), MAGIC[dt])
                if dt == "f16":
                    # (-(1024 + z), -(64 + z)): the constant of the fma below, exact
                    k.op("fma.rn.f16x2 %s, %s, %s, %s" % (self.zm2[r, ci], zm, neg1, zc_hi))
                else:
                    k.op("mov.b32 %s, %s" % (self.zm2[r, ci], zm))
        k.op("bra.uni %s" % done)
        k.place(copy)
        for ci in range(self.ncols):
            k.op("mov.b32 %s, %s" % (self.sc2[1, ci], self.sc2[0, ci]))
            k.op("mov.b32 %s, %s" % (self.zm2[1, ci], self.zm2[0, ci]))
        k.place(done)
        k.place(skip)
