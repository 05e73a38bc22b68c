"""The element types kernels are told at run time (include/kaio/kaio.h's
kaio_dtype codes)."""

# (kaio_dtype code, PTX name, bytes): the out_dtype values the float kernels store
OUT_DTYPES = ((1, "f32", 4), (2, "f16", 2), (3, "bf16", 2))
I32 = (6, "i32", 4)


def store_f32_as(k, name, addr, v, pred=None):
    """Stores the f32 register v at global [addr] as name (f32, f16, bf16),
    rounded once to nearest even; pred ("%p") guards the store."""
    guard = "@%s " % pred if pred else ""
    if name == "f32":
        k.op("%sst.global.f32 [%s], %s" % (guard, addr, v))
    else:
        h = k.reg("h")
        k.op("cvt.rn.%s.f32 %s, %s" % (name, h, v))
        k.op("%sst.global.b16 [%s], %s" % (guard, addr, h))
