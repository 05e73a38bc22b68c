//! What every op does to its inputs before launching: refuse CPU tensors,
//! refuse gradient tracking where there is no backward, copy a tensor whose
//! start or rows libkaio's loads cannot take, and get held tensors' storage.
use candle_core::{bail, CudaStorage, Result, Storage, Tensor};

use crate::layout;

pub(crate) fn no_cpu<T>(op: &str) -> Result<T> {
    bail!("kaio-candle::{op}: runs on CUDA tensors only; move the tensors to a CUDA device")
}

/// Fails when `t` tracks gradients: these ops are forward only.
pub(crate) fn forward_only(op: &str, arg: &str, t: &Tensor) -> Result<()> {
    if t.track_op() {
        bail!(
            "kaio-candle::{op}: argument '{arg}' tracks gradients, and this op is forward only \
             (no backward); pass {arg}.detach()"
        )
    }
    Ok(())
}

/// `t`, or a contiguous copy of it where its start or its row stride is not
/// a multiple of `align` bytes (a narrowed tensor), or where `contiguous`
/// asks for rows without gaps. A layout that is no matrix at all (a
/// transpose) is refused with the fix, as every op here does.
pub(crate) fn aligned(op: &str, arg: &str, t: &Tensor, align: usize, contiguous: bool) -> Result<Tensor> {
    let m = layout::matrix(op, arg, t.layout())?;
    let es = t.dtype().size_in_bytes();
    let start_ok = (m.offset * es).is_multiple_of(align);
    let rows_ok = m.rows <= 1 || ((m.row_stride * es).is_multiple_of(align) && (!contiguous || m.row_stride == m.cols));
    if start_ok && rows_ok {
        Ok(t.clone())
    } else {
        t.force_contiguous()
    }
}

/// `t`, or a fresh contiguous copy when its start is not 16-byte aligned
/// (a narrowed tensor), which libkaio's tensor-core loads need. Not
/// `Tensor::copy`: that clones the whole storage and keeps the offset.
pub(crate) fn aligned16(t: &Tensor) -> Result<Tensor> {
    if (t.layout().start_offset() * t.dtype().size_in_bytes()).is_multiple_of(16) {
        Ok(t.clone())
    } else {
        t.force_contiguous()
    }
}

/// The CUDA storage of a tensor an op holds besides its candle inputs.
pub(crate) fn cuda_of<'a>(op: &str, what: &str, s: &'a Storage) -> Result<&'a CudaStorage> {
    match s {
        Storage::Cuda(c) => Ok(c),
        _ => bail!("kaio-candle::{op}: the {what} is not on a CUDA device"),
    }
}

/// The CUDA storage of a tensor an op holds (`arg`), checked to be of one of
/// `dtypes` and on the GPU of `first` (the op's first input).
pub(crate) fn held<'a>(
    op: &str,
    arg: &str,
    s: &'a Storage,
    first: &CudaStorage,
    dtypes: &[candle_core::DType],
) -> Result<&'a CudaStorage> {
    use candle_core::backend::BackendStorage;
    let c = cuda_of(op, &format!("argument '{arg}'"), s)?;
    layout::dtype(op, arg, c.dtype(), dtypes)?;
    crate::storage::same_device(op, first, c, arg)?;
    Ok(c)
}

/// The `cpu_fwd` method of a `CustomOp1`, `CustomOp2` or `CustomOp3` (the
/// first argument), refusing CPU tensors in the op's name: a literal, or
/// `|op| <expr>` where the name depends on the op (`op` is `&self`: macro
/// hygiene keeps a `self` written at the call site from naming the receiver).
macro_rules! no_cpu_fwd {
    (1, $($name:tt)+) => { $crate::prep::no_cpu_fwd!(@fn (_s1 _l1) $($name)+); };
    (2, $($name:tt)+) => { $crate::prep::no_cpu_fwd!(@fn (_s1 _l1 _s2 _l2) $($name)+); };
    (3, $($name:tt)+) => { $crate::prep::no_cpu_fwd!(@fn (_s1 _l1 _s2 _l2 _s3 _l3) $($name)+); };
    // One (storage, layout) parameter pair per input.
    (@fn ($($s:ident $l:ident)+) $($name:tt)+) => {
        fn cpu_fwd(
            &self,
            $($s: &candle_core::CpuStorage, $l: &candle_core::Layout),+
        ) -> candle_core::Result<(candle_core::CpuStorage, candle_core::Shape)> {
            $crate::prep::no_cpu_fwd!(@refuse self, $($name)+)
        }
    };
    (@refuse $self:ident, $op:literal) => {
        $crate::prep::no_cpu($op)
    };
    (@refuse $self:ident, |$s:ident| $op:expr) => {{
        let $s = $self;
        $crate::prep::no_cpu($op)
    }};
}
pub(crate) use no_cpu_fwd;
