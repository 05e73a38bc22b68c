"""mma.sync / wgmma fragment helpers."""


def pack(k, dt, hi, lo):
    """Two f32 values rounded into one dt x2 register (dt f16 or bf16), lo in
    the low half."""
    return k.r("cvt.rn.%sx2.f32" % dt, hi, lo)
