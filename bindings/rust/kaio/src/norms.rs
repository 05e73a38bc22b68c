//! Normalisations beyond [`Op::rmsnorm`]: residual add fused with RMSNorm,
//! and LayerNorm. Every view has the op's one dtype (F32, F16 or Bf16), any
//! row stride; math in f32, rounded once per stored value. kaio.h's
//! "Normalisations" section states the overlap rules and the range.
use std::ptr;

use kaio_sys as sys;

use crate::buffer::TensorView;
use crate::device::Device;
use crate::dtype::Dtype;
use crate::error::{check, Result};
use crate::ops::{dim, opt_raw, Op};
use crate::stream::Stream;

impl Op {
    /// `residual += x` (rounded to the dtype, stored), then `out =
    /// rmsnorm(residual) · weight`; eps finite and >= 0. Launch tensors:
    /// `[x, residual, weight (1 x cols), out]`, x, residual and out
    /// `rows x cols`. `out` may be the very same view as `x`; `residual`
    /// overlaps nothing.
    pub fn add_rmsnorm(device: &Device, dtype: Dtype, rows: usize, cols: usize, eps: f32) -> Result<Op> {
        let mut p = ptr::null_mut();
        check(unsafe { sys::kaio_op_create_add_rmsnorm(&mut p, device.as_raw(), dtype.raw(), dim(rows), dim(cols), eps) })?;
        Op::from_created(p, "add_rmsnorm")
    }

    /// LayerNorm over each row (biased variance, as torch's `layer_norm`):
    /// `out = (x − mean) / sqrt(var + eps) · weight + bias`; eps finite,
    /// `>= 0`. Launch tensors: `[x, weight, bias, out]`, weight and bias
    /// `1 x cols` or [`TensorView::none`] (weight 1, no bias). `out` may be
    /// the very same view as `x`.
    pub fn layernorm(device: &Device, dtype: Dtype, rows: usize, cols: usize, eps: f32) -> Result<Op> {
        let mut p = ptr::null_mut();
        check(unsafe { sys::kaio_op_create_layernorm(&mut p, device.as_raw(), dtype.raw(), dim(rows), dim(cols), eps) })?;
        Op::from_created(p, "layernorm")
    }
}

/// One-shot residual add + RMSNorm (see [`Op::add_rmsnorm`]); dtype and
/// shape from `x`. Updates `residual` in place.
pub fn add_rmsnorm(
    stream: &Stream,
    x: &TensorView<'_>,
    residual: &TensorView<'_>,
    weight: &TensorView<'_>,
    out: &TensorView<'_>,
    eps: f32,
) -> Result<()> {
    check(unsafe { sys::kaio_add_rmsnorm(stream.as_raw(), x.as_raw(), residual.as_raw(), weight.as_raw(), out.as_raw(), eps) })
}

/// One-shot LayerNorm (see [`Op::layernorm`]); dtype and shape from `x`.
/// `weight` None: 1; `bias` None: 0.
pub fn layernorm(
    stream: &Stream,
    x: &TensorView<'_>,
    weight: Option<&TensorView<'_>>,
    bias: Option<&TensorView<'_>>,
    out: &TensorView<'_>,
    eps: f32,
) -> Result<()> {
    check(unsafe { sys::kaio_layernorm(stream.as_raw(), x.as_raw(), opt_raw(weight), opt_raw(bias), out.as_raw(), eps) })
}
