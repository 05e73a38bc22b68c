"""PTX float literals (0f + the f32 bit pattern in hex)."""

import struct


def f32(value):
    """PTX hex literal of value rounded to f32."""
    return "0f%08X" % struct.unpack("<I", struct.pack("<f", value))[0]


ZERO, ONE = f32(0.0), f32(1.0)
INF, NEG_INF = "0f7F800000", "0fFF800000"
LN2 = "0f3F317218"          # ln 2
LOG2E = "0f3FB8AA3B"        # log2(e)
NEG_LOG2E = "0fBFB8AA3B"
