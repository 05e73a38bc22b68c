//! Tensor-core matmul, `C = alpha · op(A) · op(B) + beta · C`, and its
//! backward, as prepared [`Op`]s and one-shot functions.
//!
//! A and B are f16 or bf16 and row-major; `op(X)` is X or Xᵀ, read in place
//! (B transposed is the layout of `nn.Linear` weights). C is f32, f16 or bf16.
//! libkaio checks the constraints at creation and at every launch: K a
//! multiple of 8, A and B 16-byte aligned with row strides that are multiples
//! of 8 elements, C not overlapping A or B (kaio.h, "Tensor-core matmul").
use std::mem::size_of;
use std::ptr;

use kaio_sys as sys;

use crate::buffer::TensorView;
use crate::device::Device;
use crate::dtype::Dtype;
use crate::error::{check, Result};
use crate::ops::Op;
use crate::stream::Stream;

/// Whether an operand is used as stored (`N`) or transposed (`T`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Trans {
    N,
    T,
}

impl Trans {
    pub fn raw(self) -> sys::kaio_trans {
        match self {
            Trans::N => sys::KAIO_TRANS_N,
            Trans::T => sys::KAIO_TRANS_T,
        }
    }
}

/// Which kernels: `Auto` picks the fastest for the device and shape; `Sync`
/// and `Async` force the sm_80 mma.sync kernels without and with the
/// multi-stage cp.async pipeline.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum MatmulVariant {
    Auto,
    Sync,
    Async,
}

impl MatmulVariant {
    pub fn raw(self) -> sys::kaio_matmul_variant {
        match self {
            MatmulVariant::Auto => sys::KAIO_MATMUL_AUTO,
            MatmulVariant::Sync => sys::KAIO_MATMUL_SYNC,
            MatmulVariant::Async => sys::KAIO_MATMUL_ASYNC,
        }
    }
}

fn dim(n: usize) -> i64 {
    use std::convert::TryFrom;
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A matmul's dtypes, transposes, variant, shape and scaling. `Default` is
/// kaio's: f16 in, f32 out, no transposes, `Auto`, alpha 1, beta 0, and
/// m = n = k = 0 ("from the views", for one-shot calls).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct MatmulDesc {
    /// A and B: F16 or Bf16.
    pub in_dtype: Dtype,
    /// C: F32, F16 or Bf16.
    pub out_dtype: Dtype,
    pub trans_a: Trans,
    pub trans_b: Trans,
    pub variant: MatmulVariant,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub alpha: f32,
    /// When 0, C is not read (it may hold anything, NaN included).
    pub beta: f32,
}

impl Default for MatmulDesc {
    fn default() -> MatmulDesc {
        MatmulDesc {
            in_dtype: Dtype::F16,
            out_dtype: Dtype::F32,
            trans_a: Trans::N,
            trans_b: Trans::N,
            variant: MatmulVariant::Auto,
            m: 0,
            n: 0,
            k: 0,
            alpha: 1.0,
            beta: 0.0,
        }
    }
}

impl MatmulDesc {
    /// The `kaio_matmul_desc`, started from `kaio_matmul_desc_init` so fields
    /// a newer header adds keep libkaio's defaults.
    pub fn to_raw(&self) -> Result<sys::kaio_matmul_desc> {
        let mut d = sys::kaio_matmul_desc::default();
        check(unsafe { sys::kaio_matmul_desc_init(&mut d, size_of::<sys::kaio_matmul_desc>()) })?;
        d.in_dtype = self.in_dtype.raw();
        d.out_dtype = self.out_dtype.raw();
        d.trans_a = self.trans_a.raw();
        d.trans_b = self.trans_b.raw();
        d.variant = self.variant.raw();
        d.m = dim(self.m);
        d.n = dim(self.n);
        d.k = dim(self.k);
        d.alpha = self.alpha;
        d.beta = self.beta;
        Ok(d)
    }
}

/// The backward of `C = A · B` (A M×K, B K×N, no transposes):
/// `dA = dC · Bᵀ + beta · dA`, `dB = Aᵀ · dC + beta · dB`. `Default` is
/// kaio's: f16 in and dC, f32 out, `Auto`, beta 0, m = n = k = 0.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct MatmulBackwardDesc {
    /// A and B: F16 or Bf16.
    pub in_dtype: Dtype,
    /// dC: `in_dtype`, or F32 (rounded into a workspace the op owns).
    pub grad_dtype: Dtype,
    /// dA and dB: F32, F16 or Bf16.
    pub out_dtype: Dtype,
    pub variant: MatmulVariant,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// Non-zero accumulates into dA and dB.
    pub beta: f32,
}

impl Default for MatmulBackwardDesc {
    fn default() -> MatmulBackwardDesc {
        MatmulBackwardDesc {
            in_dtype: Dtype::F16,
            grad_dtype: Dtype::F16,
            out_dtype: Dtype::F32,
            variant: MatmulVariant::Auto,
            m: 0,
            n: 0,
            k: 0,
            beta: 0.0,
        }
    }
}

impl MatmulBackwardDesc {
    /// The `kaio_matmul_backward_desc`, started from its `_init`.
    pub fn to_raw(&self) -> Result<sys::kaio_matmul_backward_desc> {
        let mut d = sys::kaio_matmul_backward_desc::default();
        check(unsafe { sys::kaio_matmul_backward_desc_init(&mut d, size_of::<sys::kaio_matmul_backward_desc>()) })?;
        d.in_dtype = self.in_dtype.raw();
        d.grad_dtype = self.grad_dtype.raw();
        d.out_dtype = self.out_dtype.raw();
        d.variant = self.variant.raw();
        d.m = dim(self.m);
        d.n = dim(self.n);
        d.k = dim(self.k);
        d.beta = self.beta;
        Ok(d)
    }
}

/// KAIO's four fixed matmul entry points (f32 C = A · B, alpha 1, beta 0).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum MatmulTc {
    /// `matmul_tc`: f16 inputs, `Auto`.
    F16,
    /// `matmul_tc_async`: f16 inputs, the cp.async kernels.
    F16Async,
    /// `matmul_tc_bf16`: bf16 inputs, `Auto`.
    Bf16,
    /// `matmul_tc_bf16_async`: bf16 inputs, the cp.async kernels.
    Bf16Async,
}

impl Op {
    /// A prepared matmul (`desc.m`, `n`, `k` set). Launch tensors: `[A, B, C]`.
    pub fn matmul(device: &Device, desc: &MatmulDesc) -> Result<Op> {
        let d = desc.to_raw()?;
        let mut p = ptr::null_mut();
        check(unsafe { sys::kaio_op_create_matmul(&mut p, device.as_raw(), &d) })?;
        Op::from_created(p, "matmul")
    }

    /// One of KAIO's fixed entry points as a prepared op. Launch tensors:
    /// `[A (m×k), B (k×n), C (f32, m×n)]`.
    pub fn matmul_tc(device: &Device, kind: MatmulTc, m: usize, n: usize, k: usize) -> Result<Op> {
        let f = match kind {
            MatmulTc::F16 => sys::kaio_op_create_matmul_tc,
            MatmulTc::F16Async => sys::kaio_op_create_matmul_tc_async,
            MatmulTc::Bf16 => sys::kaio_op_create_matmul_tc_bf16,
            MatmulTc::Bf16Async => sys::kaio_op_create_matmul_tc_bf16_async,
        };
        let mut p = ptr::null_mut();
        check(unsafe { f(&mut p, device.as_raw(), dim(m), dim(n), dim(k)) })?;
        Op::from_created(p, "matmul_tc")
    }

    /// A prepared matmul backward (allocates the f32-dC workspace when
    /// `grad_dtype` is F32). Launch tensors: `[dC, A, B, dA, dB]`; a
    /// [`TensorView::none`] for dA or dB skips that gradient.
    pub fn matmul_backward(device: &Device, desc: &MatmulBackwardDesc) -> Result<Op> {
        let d = desc.to_raw()?;
        let mut p = ptr::null_mut();
        check(unsafe { sys::kaio_op_create_matmul_backward(&mut p, device.as_raw(), &d) })?;
        Op::from_created(p, "matmul_backward")
    }
}

/// One-shot matmul; shapes come from the views where `desc`'s m, n, k are 0.
pub fn matmul(
    stream: &Stream,
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    c: &TensorView<'_>,
    desc: &MatmulDesc,
) -> Result<()> {
    let d = desc.to_raw()?;
    check(unsafe { sys::kaio_matmul(stream.as_raw(), a.as_raw(), b.as_raw(), c.as_raw(), &d) })
}

/// One of KAIO's fixed entry points, one-shot: f32 C (m×n) = A (m×k) · B (k×n).
pub fn matmul_tc(stream: &Stream, kind: MatmulTc, a: &TensorView<'_>, b: &TensorView<'_>, c: &TensorView<'_>) -> Result<()> {
    let f = match kind {
        MatmulTc::F16 => sys::kaio_matmul_tc,
        MatmulTc::F16Async => sys::kaio_matmul_tc_async,
        MatmulTc::Bf16 => sys::kaio_matmul_tc_bf16,
        MatmulTc::Bf16Async => sys::kaio_matmul_tc_bf16_async,
    };
    check(unsafe { f(stream.as_raw(), a.as_raw(), b.as_raw(), c.as_raw()) })
}

/// KAIO's one-shot backward: f16 A, B and dC; f32 dA and dB (None skips
/// one); beta 0. An f32 dC needs [`Op::matmul_backward`], which owns the
/// rounding workspace: this call never allocates.
pub fn matmul_tc_backward(
    stream: &Stream,
    dc: &TensorView<'_>,
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    da: Option<&TensorView<'_>>,
    db: Option<&TensorView<'_>>,
) -> Result<()> {
    let none = TensorView::none();
    let da = da.unwrap_or(&none);
    let db = db.unwrap_or(&none);
    check(unsafe {
        sys::kaio_matmul_tc_backward(stream.as_raw(), dc.as_raw(), a.as_raw(), b.as_raw(), da.as_raw(), db.as_raw())
    })
}
