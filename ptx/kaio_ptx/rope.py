"""Rotary position embeddings, one pair at a time: the angle, its sine and
cosine with a proper range reduction, and the rotation.  Any kernel that
applies RoPE (the RoPE op, gen_rope.py; a KV-cache append that rotates K
as it stores it) builds on these, so the arithmetic is written once.

    c, s = cos_sin(k, pos_f32, inv_freq, attn)   # once per (token, pair)
    y0, y1 = rotate(k, x0, x1, c, s)             # per head

All f32 with explicit .rn (no contraction): the error bounds below are of
this exact sequence."""

import decimal
import math
import struct

from kaio_ptx.literals import ONE, f32


def _half_pi_parts():
    """pi/2 as three f32 parts C1 + C2 + C3 (about 72 bits), each the f32
    rounding of what the parts before it leave."""
    decimal.getcontext().prec = 60
    # pi/2 to 52 digits: three f32 parts need about 22
    rest = decimal.Decimal("1.5707963267948966192313216916397514420985846996875529")
    parts = []
    for _ in range(3):
        p = f32_value(float(rest))
        parts.append(p)
        rest -= decimal.Decimal(p)
    return parts


def f32_value(x):
    """x rounded to f32, as a Python float."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


HALF_PI = _half_pi_parts()
# Taylor coefficients: on |r| <= 1.05 (the reduced range, k one off at most)
# the first dropped terms are r^13/13! < 3e-10 and r^14/14! < 2e-11, far
# under an f32 ulp of the results.
SIN_COEFFS = [(-1.0) ** n / math.factorial(2 * n + 1) for n in range(1, 6)]   # r^3 .. r^11
COS_COEFFS = [(-1.0) ** n / math.factorial(2 * n) for n in range(1, 7)]       # r^2 .. r^12
# Past |a| = 2^22 the f32 angle itself is off by up to 0.25 rad: the
# reduction stops being exact there, and r is clamped so that the results
# stay bounded (|sin|, |cos| <= 1) rather than meaningful.
R_CLAMP = 1.25


def _horner(k, r2, coeffs):
    acc = f32(coeffs[-1])
    for c in reversed(coeffs[:-1]):
        acc = k.f("fma.rn.f32", r2, acc, f32(c))
    return acc


def sincos(k, a):
    """(sin a, cos a) of the f32 register a.

    Reduction: q = rint(a * 2/pi), r = a - q*pi/2 with a three-part pi/2,
    each step one fma (exact product, one rounding of a value below 1.1):
    r is within 1e-7 of the exact remainder for |a| <= 2^22 (4.2e6 rad;
    sin.approx / cos.approx lose all accuracy by 1e5).  Then Taylor
    polynomials in r^2 and the quadrant's swap and signs.  This sequence,
    emulated exactly on 20000 angles up to 4e6: within 7.8e-8 (1.3 * 2^-24)
    of f64 sin / cos of the same f32 a."""
    j = k.f("cvt.rni.f32.f32", k.f("mul.rn.f32", a, f32(2.0 / math.pi)))
    r = k.f("fma.rn.f32", j, f32(-HALF_PI[0]), a)
    r = k.f("fma.rn.f32", j, f32(-HALF_PI[1]), r)
    r = k.f("fma.rn.f32", j, f32(-HALF_PI[2]), r)
    r = k.f("max.f32", k.f("min.f32", r, f32(R_CLAMP)), f32(-R_CLAMP))
    q = k.r("cvt.rzi.s32.f32", j)
    r2 = k.f("mul.rn.f32", r, r)
    # sin r = r + r^3 * P(r^2); cos r = 1 + r^2 * Q(r^2)
    sin_r = k.f("fma.rn.f32", k.f("mul.rn.f32", r, r2), _horner(k, r2, SIN_COEFFS), r)
    cos_r = k.f("fma.rn.f32", r2, _horner(k, r2, COS_COEFFS), ONE)
    # a = r + q*pi/2: odd q swaps sin and cos; sin is negated for q mod 4 in
    # {2, 3}, cos for q mod 4 in {1, 2}
    odd = k.p("setp.ne.u32", k.r("and.b32", q, 1), 0)
    s = k.r("mov.b32", k.f("selp.f32", cos_r, sin_r, odd))
    c = k.r("mov.b32", k.f("selp.f32", sin_r, cos_r, odd))
    s = k.r("xor.b32", s, k.r("shl.b32", k.r("and.b32", q, 2), 30))
    c = k.r("xor.b32", c, k.r("shl.b32", k.r("and.b32", k.r("add.s32", q, 1), 2), 30))
    return k.f("mov.b32", s), k.f("mov.b32", c)


def cos_sin(k, pos, inv_freq, attn):
    """(cos, sin) of one pair at one position, as Hugging Face transformers
    forms them: angle = pos * inv_freq rounded once to f32 (pos the f32 of
    the integer position), cos and sin times the attention factor attn
    (YaRN's; 1 otherwise, an exact product)."""
    s, c = sincos(k, k.f("mul.rn.f32", pos, inv_freq))
    return k.f("mul.rn.f32", c, attn), k.f("mul.rn.f32", s, attn)


def rotate(k, x0, x1, c, s):
    """The pair (x0, x1) rotated: (x0*c - x1*s, x1*c + x0*s), each an fma
    over one rounded product."""
    y0 = k.f("fma.rn.f32", x0, c, k.f("mul.rn.f32", k.f("neg.f32", x1), s))
    y1 = k.f("fma.rn.f32", x1, c, k.f("mul.rn.f32", x0, s))
    return y0, y1
