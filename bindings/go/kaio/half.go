package kaio

import "math"

// F16 is an IEEE 754 binary16 value, stored as its bits. Conversions round
// to nearest, ties to even, as the kernels' cvt.rn does.
type F16 uint16

// BF16 is a bfloat16 value (the top half of a float32), stored as its bits.
type BF16 uint16

// roundShift drops `shift` low bits of m, rounding to nearest, ties to even.
func roundShift(m uint32, shift uint) uint32 {
	kept := m >> shift
	rem := m & (1<<shift - 1)
	half := uint32(1) << (shift - 1)
	if rem > half || (rem == half && kept&1 == 1) {
		kept++
	}
	return kept
}

// F16FromFloat32 rounds f to the nearest binary16, ties to even.
func F16FromFloat32(f float32) F16 {
	x := math.Float32bits(f)
	sign := uint16(x>>16) & 0x8000
	exp := int32(x>>23) & 0xFF
	mant := x & 0x7FFFFF
	if exp == 0xFF { // infinity or NaN (kept quiet, top payload bits kept)
		if mant == 0 {
			return F16(sign | 0x7C00)
		}
		return F16(sign | 0x7E00 | uint16(mant>>13))
	}
	e := exp - 127 + 15
	if e >= 0x1F {
		return F16(sign | 0x7C00)
	}
	if e <= 0 { // subnormal or zero: value = m * 2^-24
		if e < -10 {
			return F16(sign)
		}
		return F16(sign | uint16(roundShift(mant|0x800000, uint(14-e))))
	}
	return F16(sign | uint16(uint32(e)<<10+roundShift(mant, 13)))
}

// Float32 is the exact value.
func (h F16) Float32() float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1F
	mant := uint32(h & 0x3FF)
	switch exp {
	case 0:
		v := float32(mant) / 16777216
		if sign != 0 {
			return -v
		}
		return v
	case 0x1F:
		return math.Float32frombits(sign | 0x7F800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
}

// BF16FromFloat32 rounds f to the nearest bfloat16, ties to even.
func BF16FromFloat32(f float32) BF16 {
	x := math.Float32bits(f)
	if f != f { // NaN: keep it quiet
		return BF16(x>>16) | 0x40
	}
	return BF16((x + 0x7FFF + (x>>16)&1) >> 16)
}

// Float32 is the exact value.
func (h BF16) Float32() float32 { return math.Float32frombits(uint32(h) << 16) }
