//! Element types: `Dtype`, the `Element` trait and the `F16`/`Bf16` storage
//! newtypes.
use std::fmt;

use kaio_sys as sys;

/// A `kaio_dtype`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Dtype {
    F32,
    F16,
    Bf16,
    I8,
    U8,
    I32,
    U32,
}

impl Dtype {
    /// The `kaio_dtype` value.
    pub fn raw(self) -> sys::kaio_dtype {
        match self {
            Dtype::F32 => sys::KAIO_DTYPE_F32,
            Dtype::F16 => sys::KAIO_DTYPE_F16,
            Dtype::Bf16 => sys::KAIO_DTYPE_BF16,
            Dtype::I8 => sys::KAIO_DTYPE_I8,
            Dtype::U8 => sys::KAIO_DTYPE_U8,
            Dtype::I32 => sys::KAIO_DTYPE_I32,
            Dtype::U32 => sys::KAIO_DTYPE_U32,
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::F32 | Dtype::I32 | Dtype::U32 => 4,
            Dtype::F16 | Dtype::Bf16 => 2,
            Dtype::I8 | Dtype::U8 => 1,
        }
    }

    /// `"f32"`, `"f16"`, `"bf16"`, ... as `kaio_dtype_name` spells them.
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
            Dtype::I8 => "i8",
            Dtype::U8 => "u8",
            Dtype::I32 => "i32",
            Dtype::U32 => "u32",
        }
    }

    /// Every dtype, for tables and tests.
    pub const ALL: [Dtype; 7] = [Dtype::F32, Dtype::F16, Dtype::Bf16, Dtype::I8, Dtype::U8, Dtype::I32, Dtype::U32];
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A type a [`Buffer`](crate::Buffer) can hold: plain data, valid for every
/// bit pattern, with a kaio dtype. Sealed: f32, i8, u8, i32, u32, [`F16`],
/// [`Bf16`].
pub trait Element: sealed::Sealed + Copy + Default + fmt::Debug + Send + Sync + 'static {
    const DTYPE: Dtype;
}

macro_rules! element {
    ($($t:ty => $d:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t { const DTYPE: Dtype = Dtype::$d; }
    )*};
}
element!(f32 => F32, F16 => F16, Bf16 => Bf16, i8 => I8, u8 => U8, i32 => I32, u32 => U32);

/// An IEEE 754 binary16 value, stored as its bits. Conversions round to
/// nearest, ties to even, as the kernels' `cvt.rn` does.
#[repr(transparent)]
#[derive(Copy, Clone, Default, PartialEq, Eq, Hash)]
pub struct F16(u16);

/// A bfloat16 value (the top half of an f32), stored as its bits.
/// Conversions round to nearest, ties to even.
#[repr(transparent)]
#[derive(Copy, Clone, Default, PartialEq, Eq, Hash)]
pub struct Bf16(u16);

impl F16 {
    pub const fn from_bits(bits: u16) -> F16 {
        F16(bits)
    }
    pub const fn to_bits(self) -> u16 {
        self.0
    }
    pub fn from_f32(f: f32) -> F16 {
        F16(f32_to_f16_bits(f))
    }
    pub fn to_f32(self) -> f32 {
        f16_bits_to_f32(self.0)
    }
}

impl Bf16 {
    pub const fn from_bits(bits: u16) -> Bf16 {
        Bf16(bits)
    }
    pub const fn to_bits(self) -> u16 {
        self.0
    }
    pub fn from_f32(f: f32) -> Bf16 {
        Bf16(f32_to_bf16_bits(f))
    }
    pub fn to_f32(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }
}

impl From<F16> for f32 {
    fn from(h: F16) -> f32 {
        h.to_f32()
    }
}
impl From<Bf16> for f32 {
    fn from(h: Bf16) -> f32 {
        h.to_f32()
    }
}
impl fmt::Debug for F16 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}f16", self.to_f32())
    }
}
impl fmt::Debug for Bf16 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}bf16", self.to_f32())
    }
}
impl fmt::Display for F16 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.to_f32(), f)
    }
}
impl fmt::Display for Bf16 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.to_f32(), f)
    }
}

/// Rounds `mant` (with `shift` bits to drop) to nearest, ties to even.
fn round_shift(mant: u32, shift: u32) -> u32 {
    let kept = mant >> shift;
    let rem = mant & ((1u32 << shift) - 1);
    let half = 1u32 << (shift - 1);
    if rem > half || (rem == half && kept & 1 == 1) {
        kept + 1
    } else {
        kept
    }
}

fn f32_to_f16_bits(f: f32) -> u16 {
    let x = f.to_bits();
    let sign = ((x >> 16) & 0x8000) as u16;
    let exp = ((x >> 23) & 0xFF) as i32;
    let mant = x & 0x7F_FFFF;
    if exp == 0xFF {
        // Infinity stays infinity; NaN stays a (quiet) NaN with its top payload.
        return if mant == 0 { sign | 0x7C00 } else { sign | 0x7E00 | (mant >> 13) as u16 };
    }
    let e = exp - 127 + 15; // the binary16 biased exponent
    if e >= 0x1F {
        return sign | 0x7C00; // too large: infinity
    }
    if e <= 0 {
        // Subnormal (or zero) in binary16: value = m * 2^-24.
        if e < -10 {
            return sign; // below half the smallest subnormal: zero
        }
        let m = round_shift(mant | 0x80_0000, (14 - e) as u32);
        return sign | m as u16; // m may round up to 0x400, the smallest normal
    }
    // Normal: a carry out of the mantissa bumps the exponent, up to infinity.
    let h = ((e as u32) << 10) + round_shift(mant, 13);
    sign | h as u16
}

fn f16_bits_to_f32(h: u16) -> f32 {
    let sign = ((h & 0x8000) as u32) << 16;
    let exp = ((h >> 10) & 0x1F) as u32;
    let mant = (h & 0x3FF) as u32;
    if exp == 0 {
        // Zero or subnormal: mant * 2^-24, exact in f32.
        let v = mant as f32 * (1.0 / 16_777_216.0);
        return if sign != 0 { -v } else { v };
    }
    if exp == 0x1F {
        return f32::from_bits(sign | 0x7F80_0000 | (mant << 13));
    }
    f32::from_bits(sign | ((exp + 112) << 23) | (mant << 13))
}

fn f32_to_bf16_bits(f: f32) -> u16 {
    let x = f.to_bits();
    if f.is_nan() {
        return ((x >> 16) as u16) | 0x40; // quiet, keep the sign and top payload
    }
    let lsb = (x >> 16) & 1;
    (x.wrapping_add(0x7FFF + lsb) >> 16) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_exact_values() {
        for &(f, bits) in &[
            (0.0f32, 0x0000u16),
            (-0.0, 0x8000),
            (1.0, 0x3C00),
            (-2.0, 0xC000),
            (65504.0, 0x7BFF),
            (6.103_515_6e-5, 0x0400),   // smallest normal
            (5.960_464_5e-8, 0x0001),   // smallest subnormal, 2^-24
            (f32::INFINITY, 0x7C00),
            (f32::NEG_INFINITY, 0xFC00),
        ] {
            assert_eq!(F16::from_f32(f).to_bits(), bits, "{}", f);
            assert_eq!(F16::from_bits(bits).to_f32().to_bits(), f.to_bits(), "{:#x}", bits);
        }
        assert!(F16::from_f32(f32::NAN).to_f32().is_nan());
    }

    #[test]
    fn f16_rounds_to_nearest_even() {
        // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0).
        assert_eq!(F16::from_f32(1.0 + 2f32.powi(-11)).to_bits(), 0x3C00);
        // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9: up.
        assert_eq!(F16::from_f32(1.0 + 3.0 * 2f32.powi(-11)).to_bits(), 0x3C02);
        // Just above the halfway point rounds up.
        assert_eq!(F16::from_f32(1.0 + 2f32.powi(-11) + 2f32.powi(-20)).to_bits(), 0x3C01);
        // 65520 is halfway between 65504 and 65536 (infinity): ties to even = inf.
        assert_eq!(F16::from_f32(65520.0).to_bits(), 0x7C00);
        assert_eq!(F16::from_f32(65519.0).to_bits(), 0x7BFF);
        // 2^-25 is halfway between 0 and 2^-24: ties to even = 0.
        assert_eq!(F16::from_f32(2f32.powi(-25)).to_bits(), 0x0000);
        assert_eq!(F16::from_f32(1.5 * 2f32.powi(-25)).to_bits(), 0x0001);
        // 3 * 2^-25 is halfway between 2^-24 (odd) and 2^-23: up.
        assert_eq!(F16::from_f32(3.0 * 2f32.powi(-25)).to_bits(), 0x0002);
        // Largest subnormal rounding up into the smallest normal.
        assert_eq!(F16::from_f32(2f32.powi(-14) - 2f32.powi(-26)).to_bits(), 0x0400);
    }

    #[test]
    fn f16_round_trips_every_value() {
        for bits in 0..=u16::MAX {
            let h = F16::from_bits(bits);
            let f = h.to_f32();
            if f.is_nan() {
                assert!(F16::from_f32(f).to_f32().is_nan());
            } else {
                assert_eq!(F16::from_f32(f).to_bits(), bits, "{:#x}", bits);
            }
        }
    }

    #[test]
    fn bf16_conversions() {
        assert_eq!(Bf16::from_f32(1.0).to_bits(), 0x3F80);
        assert_eq!(Bf16::from_f32(-2.0).to_bits(), 0xC000);
        // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even.
        assert_eq!(Bf16::from_f32(1.0 + 2f32.powi(-8)).to_bits(), 0x3F80);
        assert_eq!(Bf16::from_f32(1.0 + 3.0 * 2f32.powi(-8)).to_bits(), 0x3F82);
        assert_eq!(Bf16::from_f32(f32::MAX).to_bits(), 0x7F80); // rounds to infinity
        assert!(Bf16::from_f32(f32::NAN).to_f32().is_nan());
        for bits in 0..=u16::MAX {
            let f = Bf16::from_bits(bits).to_f32();
            if !f.is_nan() {
                assert_eq!(Bf16::from_f32(f).to_bits(), bits);
            }
        }
    }

    #[test]
    fn dtype_table() {
        assert_eq!(Dtype::F32.raw(), 1);
        assert_eq!(Dtype::U32.raw(), 7);
        assert_eq!(Dtype::Bf16.size(), 2);
        assert_eq!(<F16 as Element>::DTYPE, Dtype::F16);
        assert_eq!(<i8 as Element>::DTYPE.name(), "i8");
    }
}
