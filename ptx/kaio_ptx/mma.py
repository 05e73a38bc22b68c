"""mma.sync / wgmma fragment helpers."""


def pack(k, dt, hi, lo):
    """Two f32 values rounded into one dt x2 register (dt f16 or bf16), lo in
    the low half."""
    return k.r("cvt.rn.%sx2.f32" % dt, hi, lo)


def ldmatrix_x4(k, addr, imm, trans=False, dst=None):
    """Four 8 x 8 b16 matrices from shared [addr+imm] (each lane gives one row
    address) into dst or 4 fresh registers, transposed with trans."""
    regs = dst or k.regs("r", 4)
    k.op("ldmatrix.sync.aligned.m8n8.x4%s.shared.b16 {%s}, [%s+%d]"
         % (".trans" if trans else "", ", ".join(regs), addr, imm))
    return regs
