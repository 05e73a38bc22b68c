//! Quantized matmul: INT8 W8A8, INT4 W4A16 (GPTQ layout) and the fused INT4
//! and INT8 QKV projections, as prepared [`Op`]s and one-shot functions.
//!
//! A thin layer over kaio.h's "Quantized matmul" section, which states every
//! layout and constraint; each desc converts to its C struct through the C
//! `_init`, so fields a newer header adds keep libkaio's defaults. Optional
//! tensors (scales, qzeros) are `Option`s here and absent views in C.
use std::mem::size_of;
use std::ptr;

use kaio_sys as sys;

use crate::buffer::TensorView;
use crate::device::Device;
use crate::dtype::Dtype;
use crate::error::{check, Result};
use crate::matmul::MatmulVariant;
use crate::ops::{dim, Op};
use crate::stream::Stream;

/// INT8 W8A8: `C = ((A·Bᵀ · alpha) · sa[m]) · sb[n]`, A i8 M×K, B i8 N×K.
/// `Default` is libkaio's: f32 out, alpha 1, `Auto`, m = n = k = 0
/// (one-shot: from the views).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct MatmulInt8Desc {
    /// F32, F16, Bf16, or I32 (exact sums: alpha 1, no scales).
    pub out_dtype: Dtype,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub alpha: f32,
    /// `Auto` (wgmma on compute capability 9.0, else mma.sync) or `Async`
    /// (always the mma.sync kernel); `Sync` is rejected.
    pub variant: MatmulVariant,
}

impl Default for MatmulInt8Desc {
    fn default() -> MatmulInt8Desc {
        MatmulInt8Desc { out_dtype: Dtype::F32, m: 0, n: 0, k: 0, alpha: 1.0, variant: MatmulVariant::Auto }
    }
}

impl MatmulInt8Desc {
    pub fn to_raw(&self) -> Result<sys::kaio_matmul_int8_desc> {
        let mut d = sys::kaio_matmul_int8_desc::default();
        check(unsafe { sys::kaio_matmul_int8_desc_init(&mut d, size_of::<sys::kaio_matmul_int8_desc>()) })?;
        d.out_dtype = self.out_dtype.raw();
        d.m = dim(self.m);
        d.n = dim(self.n);
        d.k = dim(self.k);
        d.alpha = self.alpha;
        d.variant = self.variant.raw();
        Ok(d)
    }
}

/// How INT4 weights are stored: GPTQ's unsigned nibbles with zero points, or
/// KAIO's signed nibbles (no zero points).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Int4Format {
    Gptq,
    Signed,
}

impl Int4Format {
    pub fn raw(self) -> sys::kaio_int4_format {
        match self {
            Int4Format::Gptq => sys::KAIO_INT4_GPTQ,
            Int4Format::Signed => sys::KAIO_INT4_SIGNED,
        }
    }
}

/// INT4 W4A16: `C = A · W`, W K×N from GPTQ's qweight/qzeros/scales.
/// `Default` is libkaio's: f16 in, f32 out, GPTQ, group 128 (0 here),
/// zeros_offset 0.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct MatmulInt4Desc {
    /// A and scales: F16 or Bf16.
    pub in_dtype: Dtype,
    /// C: F32, F16 or Bf16.
    pub out_dtype: Dtype,
    pub format: Int4Format,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// 0 means 128.
    pub group_size: usize,
    /// 1 reads AutoGPTQ v1 checkpoints (qzeros hold z - 1).
    pub zeros_offset: u32,
}

impl Default for MatmulInt4Desc {
    fn default() -> MatmulInt4Desc {
        MatmulInt4Desc {
            in_dtype: Dtype::F16,
            out_dtype: Dtype::F32,
            format: Int4Format::Gptq,
            m: 0,
            n: 0,
            k: 0,
            group_size: 0,
            zeros_offset: 0,
        }
    }
}

impl MatmulInt4Desc {
    pub fn to_raw(&self) -> Result<sys::kaio_matmul_int4_desc> {
        let mut d = sys::kaio_matmul_int4_desc::default();
        check(unsafe { sys::kaio_matmul_int4_desc_init(&mut d, size_of::<sys::kaio_matmul_int4_desc>()) })?;
        d.in_dtype = self.in_dtype.raw();
        d.out_dtype = self.out_dtype.raw();
        d.format = self.format.raw();
        d.m = dim(self.m);
        d.n = dim(self.n);
        d.k = dim(self.k);
        d.group_size = dim(self.group_size);
        d.zeros_offset = self.zeros_offset;
        Ok(d)
    }
}

/// The fused INT4 QKV projection: `out_p = x · W_p` for p in q, k, v, each
/// W_p as for [`MatmulInt4Desc`] with its own N. `Default` is libkaio's: f16
/// in and out, GPTQ, group 128 (0 here).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct QkvInt4Desc {
    pub in_dtype: Dtype,
    /// F16, Bf16 or F32.
    pub out_dtype: Dtype,
    pub format: Int4Format,
    pub m: usize,
    pub k: usize,
    pub n_q: usize,
    pub n_k: usize,
    pub n_v: usize,
    pub group_size: usize,
    pub zeros_offset: u32,
}

impl Default for QkvInt4Desc {
    fn default() -> QkvInt4Desc {
        QkvInt4Desc {
            in_dtype: Dtype::F16,
            out_dtype: Dtype::F16,
            format: Int4Format::Gptq,
            m: 0,
            k: 0,
            n_q: 0,
            n_k: 0,
            n_v: 0,
            group_size: 0,
            zeros_offset: 0,
        }
    }
}

impl QkvInt4Desc {
    pub fn to_raw(&self) -> Result<sys::kaio_qkv_int4_desc> {
        let mut d = sys::kaio_qkv_int4_desc::default();
        check(unsafe { sys::kaio_qkv_int4_desc_init(&mut d, size_of::<sys::kaio_qkv_int4_desc>()) })?;
        d.in_dtype = self.in_dtype.raw();
        d.out_dtype = self.out_dtype.raw();
        d.format = self.format.raw();
        d.m = dim(self.m);
        d.k = dim(self.k);
        d.n_q = dim(self.n_q);
        d.n_k = dim(self.n_k);
        d.n_v = dim(self.n_v);
        d.group_size = dim(self.group_size);
        d.zeros_offset = self.zeros_offset;
        Ok(d)
    }
}

/// The fused INT8-weight QKV projection (W8A16): `out_p = (x · W_p) ·
/// scale_p`, x f16 M×K, W_p i8 K×N_p, scale_p f32 1×1 or 1×N_p. `Default`
/// is libkaio's: f16 out, every shape 0 (one-shot: from the views).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct QkvInt8Desc {
    /// F16, Bf16 or F32.
    pub out_dtype: Dtype,
    pub m: usize,
    pub k: usize,
    pub n_q: usize,
    pub n_k: usize,
    pub n_v: usize,
}

impl Default for QkvInt8Desc {
    fn default() -> QkvInt8Desc {
        QkvInt8Desc { out_dtype: Dtype::F16, m: 0, k: 0, n_q: 0, n_k: 0, n_v: 0 }
    }
}

impl QkvInt8Desc {
    pub fn to_raw(&self) -> Result<sys::kaio_qkv_int8_desc> {
        let mut d = sys::kaio_qkv_int8_desc::default();
        check(unsafe { sys::kaio_qkv_int8_desc_init(&mut d, size_of::<sys::kaio_qkv_int8_desc>()) })?;
        d.out_dtype = self.out_dtype.raw();
        d.m = dim(self.m);
        d.k = dim(self.k);
        d.n_q = dim(self.n_q);
        d.n_k = dim(self.n_k);
        d.n_v = dim(self.n_v);
        Ok(d)
    }
}

/// One INT4 weight: qweight (u32/i32 K/8 × N), qzeros (None: every zero
/// point is 8, or the SIGNED format) and scales (K/g × N in A's dtype).
#[derive(Copy, Clone, Debug)]
pub struct Int4Weight<'a> {
    pub qweight: TensorView<'a>,
    pub qzeros: Option<TensorView<'a>>,
    pub scales: TensorView<'a>,
}

impl<'a> Int4Weight<'a> {
    fn views(&self) -> [TensorView<'a>; 3] {
        // A closure, not the fn item: `TensorView::none` returns a 'static
        // view, which would force 'a = 'static here.
        [self.qweight, self.qzeros.unwrap_or_else(|| TensorView::none()), self.scales]
    }
}

impl Op {
    /// A prepared INT8 matmul (`desc.m`, `n`, `k` set). Launch tensors:
    /// `[A, B, sa, sb, C]`, [`TensorView::none`] for an absent scale.
    pub fn matmul_int8(device: &Device, desc: &MatmulInt8Desc) -> Result<Op> {
        let d = desc.to_raw()?;
        let mut p = ptr::null_mut();
        check(unsafe { sys::kaio_op_create_matmul_int8(&mut p, device.as_raw(), &d) })?;
        Op::from_created(p, "matmul_int8")
    }

    /// A prepared INT4 matmul; M > 16 owns a K×N workspace except on compute
    /// capability 9.0 up to M = 4096 (the decode kernel or one fused kernel
    /// there, see `kaio_matmul_int4`'s "Kernels"). Launch tensors:
    /// `[A, qweight, qzeros, scales, C]`.
    pub fn matmul_int4(device: &Device, desc: &MatmulInt4Desc) -> Result<Op> {
        let d = desc.to_raw()?;
        let mut p = ptr::null_mut();
        check(unsafe { sys::kaio_op_create_matmul_int4(&mut p, device.as_raw(), &d) })?;
        Op::from_created(p, "matmul_int4")
    }

    /// A prepared fused QKV projection. Launch tensors (13):
    /// `[x, qweight_q, qzeros_q, scales_q, (same for k), (same for v),
    /// out_q, out_k, out_v]`; see [`qkv_project_int4`] for a typed call.
    pub fn qkv_project_int4(device: &Device, desc: &QkvInt4Desc) -> Result<Op> {
        let d = desc.to_raw()?;
        let mut p = ptr::null_mut();
        check(unsafe { sys::kaio_op_create_qkv_project_int4(&mut p, device.as_raw(), &d) })?;
        Op::from_created(p, "qkv_project_int4")
    }

    /// A prepared fused INT8-weight QKV projection. Launch tensors (10):
    /// `[x, w_q, scale_q, w_k, scale_k, w_v, scale_v, out_q, out_k, out_v]`
    /// ([`qkv_int8_tensors`] builds it).
    pub fn qkv_project_int8(device: &Device, desc: &QkvInt8Desc) -> Result<Op> {
        let d = desc.to_raw()?;
        let mut p = ptr::null_mut();
        check(unsafe { sys::kaio_op_create_qkv_project_int8(&mut p, device.as_raw(), &d) })?;
        Op::from_created(p, "qkv_project_int8")
    }
}

/// One-shot INT8 matmul; shapes come from the views where `desc`'s are 0.
pub fn matmul_int8(
    stream: &Stream,
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    sa: Option<&TensorView<'_>>,
    sb: Option<&TensorView<'_>>,
    c: &TensorView<'_>,
    desc: &MatmulInt8Desc,
) -> Result<()> {
    let d = desc.to_raw()?;
    let sa = sa.map_or(ptr::null(), |v| v.as_raw() as *const sys::kaio_tensor);
    let sb = sb.map_or(ptr::null(), |v| v.as_raw() as *const sys::kaio_tensor);
    check(unsafe { sys::kaio_matmul_int8(stream.as_raw(), a.as_raw(), b.as_raw(), sa, sb, c.as_raw(), &d) })
}

/// One-shot INT4 matmul (the decode kernel for any M).
pub fn matmul_int4(stream: &Stream, a: &TensorView<'_>, w: &Int4Weight<'_>, c: &TensorView<'_>, desc: &MatmulInt4Desc) -> Result<()> {
    let d = desc.to_raw()?;
    let z = w.qzeros.as_ref().map_or(ptr::null(), |v| v.as_raw() as *const sys::kaio_tensor);
    check(unsafe {
        sys::kaio_matmul_int4(stream.as_raw(), a.as_raw(), w.qweight.as_raw(), z, w.scales.as_raw(), c.as_raw(), &d)
    })
}

/// KAIO's signed-nibble storage (u32 N × K/8) to the K/8 × N arrangement of
/// [`Int4Format::Signed`]. Stream-ordered.
pub fn int4_repack_kaio(stream: &Stream, src: &TensorView<'_>, dst: &TensorView<'_>) -> Result<()> {
    check(unsafe { sys::kaio_int4_repack_kaio(stream.as_raw(), src.as_raw(), dst.as_raw()) })
}

/// The launch list of the fused QKV projection, in kaio.h's order.
pub fn qkv_int4_tensors<'a>(
    x: TensorView<'a>,
    w: [&Int4Weight<'a>; 3],
    out: [TensorView<'a>; 3],
) -> [TensorView<'a>; 13] {
    let (q, k, v) = (w[0].views(), w[1].views(), w[2].views());
    [x, q[0], q[1], q[2], k[0], k[1], k[2], v[0], v[1], v[2], out[0], out[1], out[2]]
}

/// One-shot fused QKV projection; m, k, n_* of 0 come from the views.
/// `w` and `out` are in the order q, k, v.
pub fn qkv_project_int4(
    stream: &Stream,
    x: &TensorView<'_>,
    w: [&Int4Weight<'_>; 3],
    out: [&TensorView<'_>; 3],
    desc: &QkvInt4Desc,
) -> Result<()> {
    let d = desc.to_raw()?;
    let t = qkv_int4_tensors(*x, w, [*out[0], *out[1], *out[2]]);
    check(unsafe { sys::kaio_qkv_project_int4(stream.as_raw(), t.as_ptr() as *const sys::kaio_tensor, t.len(), &d) })
}

/// The launch list of the fused INT8-weight QKV projection, in kaio.h's
/// order; `w`, `scales` and `out` are in the order q, k, v.
pub fn qkv_int8_tensors<'a>(
    x: TensorView<'a>,
    w: [TensorView<'a>; 3],
    scales: [TensorView<'a>; 3],
    out: [TensorView<'a>; 3],
) -> [TensorView<'a>; 10] {
    [x, w[0], scales[0], w[1], scales[1], w[2], scales[2], out[0], out[1], out[2]]
}

/// One-shot fused INT8-weight QKV projection; m, k, n_* of 0 come from the
/// views. `w`, `scales` and `out` are in the order q, k, v.
pub fn qkv_project_int8(
    stream: &Stream,
    x: &TensorView<'_>,
    w: [&TensorView<'_>; 3],
    scales: [&TensorView<'_>; 3],
    out: [&TensorView<'_>; 3],
    desc: &QkvInt8Desc,
) -> Result<()> {
    let d = desc.to_raw()?;
    let t = qkv_int8_tensors(*x, [*w[0], *w[1], *w[2]], [*scales[0], *scales[1], *scales[2]], [*out[0], *out[1], *out[2]]);
    check(unsafe { sys::kaio_qkv_project_int8(stream.as_raw(), t.as_ptr() as *const sys::kaio_tensor, t.len(), &d) })
}
