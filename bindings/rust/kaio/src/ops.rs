//! Built-in ops: prepared handles (`Op`) and one-shot functions.
//!
//! An [`Op`] is one op kind with its dtype, shapes and options, validated once
//! and with its kernels loaded at creation; [`Op::launch`] only checks the
//! views and enqueues, so it is cheap and CUDA-graph capturable. The one-shot
//! functions validate and launch in one go, taking dtype and shapes from the
//! views. Everything is asynchronous: errors raised while the GPU runs appear
//! at the next synchronising call.
//!
//! Each op family adds `Op` constructors and one-shot functions in its own
//! module (matmul.rs); `Op::launch` stays the single launch path.
use std::ptr;

use kaio_sys as sys;

use crate::buffer::TensorView;
use crate::device::Device;
use crate::dtype::Dtype;
use crate::error::{check, Result};
use crate::handle::Owned;
use crate::stream::Stream;

/// Which GELU formula.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum GeluMode {
    /// `0.5·x·(1 + erf(x/√2))`
    Erf,
    /// `0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³)))`
    Tanh,
}

impl GeluMode {
    pub fn raw(self) -> sys::kaio_gelu_mode {
        match self {
            GeluMode::Erf => sys::KAIO_GELU_ERF,
            GeluMode::Tanh => sys::KAIO_GELU_TANH,
        }
    }
}

pub(crate) fn dim(n: usize) -> i64 {
    use std::convert::TryFrom;
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// An optional view for a one-shot call: None is C's NULL (absent).
pub(crate) fn opt_raw(t: Option<&TensorView<'_>>) -> *const sys::kaio_tensor {
    t.map_or(ptr::null(), |t| t.as_raw() as *const sys::kaio_tensor)
}

/// A prepared op. Immutable after creation; runs on any stream of its device.
#[derive(Debug)]
pub struct Op {
    raw: Owned<sys::kaio_op>,
    kind: &'static str,
}

// SAFETY: kaio.h: "Modules, kernels and op handles are immutable after
// creation and may be shared between threads", and an op "runs on any stream
// of its device, from any thread". Drop takes `&mut self`.
unsafe impl Send for Op {}
unsafe impl Sync for Op {}

impl Op {
    /// Takes the out-handle of a successful `kaio_op_create_*` call.
    pub(crate) fn from_created(p: *mut sys::kaio_op, kind: &'static str) -> Result<Op> {
        Ok(Op { raw: Owned::new(p, kind)?, kind })
    }

    /// `out = x · sigmoid(x) · gate`. Launch tensors: `[x, gate, out]`,
    /// contiguous; in-place allowed. dtype f32, f16 or bf16.
    pub fn silu_gate(device: &Device, dtype: Dtype, rows: usize, cols: usize) -> Result<Op> {
        let mut p = ptr::null_mut();
        check(unsafe { sys::kaio_op_create_silu_gate(&mut p, device.as_raw(), dtype.raw(), dim(rows), dim(cols)) })?;
        Op::from_created(p, "silu_gate")
    }

    /// GELU. Launch tensors: `[x, out]`, contiguous; in-place allowed.
    pub fn gelu(device: &Device, dtype: Dtype, rows: usize, cols: usize, mode: GeluMode) -> Result<Op> {
        let mut p = ptr::null_mut();
        check(unsafe {
            sys::kaio_op_create_gelu(&mut p, device.as_raw(), dtype.raw(), dim(rows), dim(cols), mode.raw())
        })?;
        Op::from_created(p, "gelu")
    }

    /// `out[r,c] = x[r,c] / sqrt(mean_c x[r,:]² + eps) · weight[c]`; eps
    /// finite and >= 0. Launch tensors: `[x, weight (1 x cols), out]`; any
    /// row stride.
    pub fn rmsnorm(device: &Device, dtype: Dtype, rows: usize, cols: usize, eps: f32) -> Result<Op> {
        let mut p = ptr::null_mut();
        check(unsafe { sys::kaio_op_create_rmsnorm(&mut p, device.as_raw(), dtype.raw(), dim(rows), dim(cols), eps) })?;
        Op::from_created(p, "rmsnorm")
    }

    /// Numerically stable softmax along each row. Launch tensors: `[x, out]`;
    /// any row stride.
    pub fn softmax(device: &Device, dtype: Dtype, rows: usize, cols: usize) -> Result<Op> {
        let mut p = ptr::null_mut();
        check(unsafe { sys::kaio_op_create_softmax(&mut p, device.as_raw(), dtype.raw(), dim(rows), dim(cols)) })?;
        Op::from_created(p, "softmax")
    }

    /// Enqueues the op on `stream` with `tensors` in the order its constructor
    /// lists. No host synchronisation, allocation or module load.
    pub fn launch(&self, stream: &Stream, tensors: &[TensorView<'_>]) -> Result<()> {
        // TensorView is #[repr(transparent)] over kaio_tensor.
        check(unsafe {
            sys::kaio_op_launch(
                self.raw.as_ptr(),
                stream.as_raw(),
                tensors.as_ptr() as *const sys::kaio_tensor,
                tensors.len(),
            )
        })
    }

    /// The op family, e.g. `"rmsnorm"`.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The raw handle, for calls into `kaio_sys`. Borrowed.
    pub fn as_raw(&self) -> *mut sys::kaio_op {
        self.raw.as_ptr()
    }
}

/// One-shot `out = x · sigmoid(x) · gate` (see [`Op::silu_gate`]).
pub fn silu_gate(stream: &Stream, x: &TensorView<'_>, gate: &TensorView<'_>, out: &TensorView<'_>) -> Result<()> {
    check(unsafe { sys::kaio_silu_gate(stream.as_raw(), x.as_raw(), gate.as_raw(), out.as_raw()) })
}

/// One-shot GELU (see [`Op::gelu`]).
pub fn gelu(stream: &Stream, x: &TensorView<'_>, out: &TensorView<'_>, mode: GeluMode) -> Result<()> {
    check(unsafe { sys::kaio_gelu(stream.as_raw(), x.as_raw(), out.as_raw(), mode.raw()) })
}

/// One-shot RMSNorm (see [`Op::rmsnorm`]).
pub fn rmsnorm(
    stream: &Stream,
    x: &TensorView<'_>,
    weight: &TensorView<'_>,
    out: &TensorView<'_>,
    eps: f32,
) -> Result<()> {
    check(unsafe { sys::kaio_rmsnorm(stream.as_raw(), x.as_raw(), weight.as_raw(), out.as_raw(), eps) })
}

/// One-shot row softmax (see [`Op::softmax`]).
pub fn softmax(stream: &Stream, x: &TensorView<'_>, out: &TensorView<'_>) -> Result<()> {
    check(unsafe { sys::kaio_softmax(stream.as_raw(), x.as_raw(), out.as_raw()) })
}
