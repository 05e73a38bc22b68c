"""Kernel parameters into registers."""


def load_params(k, params, pointers):
    """Loads every (type, name) scalar parameter into a register, and turns
    the named pointer parameters into global addresses; returns name -> reg."""
    loaders = {".u64": (k.rd, "ld.param.u64"), ".u32": (k.r, "ld.param.u32"),
               ".f32": (k.f, "ld.param.f32")}
    regs = {}
    for ptx_type, pname in params:
        emit, opcode = loaders[ptx_type]
        regs[pname] = emit(opcode, "[%s]" % pname)
    for pname in pointers:
        regs[pname] = k.rd("cvta.to.global.u64", regs[pname])
    return regs
