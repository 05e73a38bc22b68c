//! candle's CUDA storage as kaio buffers for one call. Pointers come through
//! cudarc's `device_ptr` / `device_ptr_mut`, whose guards record the access
//! on candle's stream when they drop, so candle's event tracking stays right.
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, SyncOnDrop};
use candle_core::cuda_backend::{CudaDevice, CudaStorageSlice};
use candle_core::{bail, CudaStorage, DType, Result};

use crate::context::Context;
use crate::error::KaioResultExt;
use crate::layout::Matrix;

/// One candle storage wrapped for libkaio; the wrapper never frees it.
pub(crate) struct Arg<'a> {
    pub buf: kaio::Buffer<u8>,
    pub dtype: DType,
    _guard: SyncOnDrop<'a>,
}

macro_rules! each_slice {
    ($slice:expr, $s:ident => $body:expr) => {
        match $slice {
            CudaStorageSlice::U8($s) => $body,
            CudaStorageSlice::U32($s) => $body,
            CudaStorageSlice::I16($s) => $body,
            CudaStorageSlice::I32($s) => $body,
            CudaStorageSlice::I64($s) => $body,
            CudaStorageSlice::BF16($s) => $body,
            CudaStorageSlice::F16($s) => $body,
            CudaStorageSlice::F32($s) => $body,
            CudaStorageSlice::F64($s) => $body,
            CudaStorageSlice::F8E4M3($s) => $body,
            CudaStorageSlice::F6E2M3($s) => $body,
            CudaStorageSlice::F6E3M2($s) => $body,
            CudaStorageSlice::F4($s) => $body,
            CudaStorageSlice::F8E8M0($s) => $body,
        }
    };
}

fn wrap<'a>(ctx: &Context, op: &str, ptr: u64, bytes: usize, dtype: DType, guard: SyncOnDrop<'a>) -> Result<Arg<'a>> {
    // SAFETY: candle keeps the memory alive for the call and the guard orders
    // candle's later uses after the work enqueued here on its own stream.
    let buf = unsafe { kaio::Buffer::<u8>::from_raw_parts(&ctx.device, ptr, bytes as u64) }.kaio(op)?;
    Ok(Arg { buf, dtype, _guard: guard })
}

/// Reads `s` (an input).
pub(crate) fn read<'a>(ctx: &Context, op: &str, s: &'a CudaStorage, stream: &'a CudaStream) -> Result<Arg<'a>> {
    let dtype = s.dtype();
    each_slice!(&s.slice, x => {
        let bytes = x.num_bytes();
        let (ptr, guard) = x.device_ptr(stream);
        wrap(ctx, op, ptr, bytes, dtype, guard)
    })
}

/// Writes `s` (an output).
pub(crate) fn write<'a>(ctx: &Context, op: &str, s: &'a mut CudaStorage, stream: &'a CudaStream) -> Result<Arg<'a>> {
    let dtype = s.dtype();
    each_slice!(&mut s.slice, x => {
        let bytes = x.num_bytes();
        let (ptr, guard) = x.device_ptr_mut(stream);
        wrap(ctx, op, ptr, bytes, dtype, guard)
    })
}

/// Fresh storage of `n` elements (contents undefined), on candle's stream.
pub(crate) fn alloc(dev: &CudaDevice, dtype: DType, n: usize) -> Result<CudaStorage> {
    // SAFETY: every element is written by the op before anyone reads it.
    let slice = unsafe {
        match dtype {
            DType::F32 => CudaStorageSlice::F32(dev.alloc::<f32>(n)?),
            DType::F16 => CudaStorageSlice::F16(dev.alloc::<half::f16>(n)?),
            DType::BF16 => CudaStorageSlice::BF16(dev.alloc::<half::bf16>(n)?),
            DType::U8 => CudaStorageSlice::U8(dev.alloc::<u8>(n)?),
            DType::U32 => CudaStorageSlice::U32(dev.alloc::<u32>(n)?),
            other => bail!("kaio-candle: no kaio op writes {other:?}"),
        }
    };
    Ok(CudaStorage { slice, device: dev.clone() })
}

/// The kaio dtype of a candle dtype, where libkaio has one.
pub(crate) fn kaio_dtype(op: &str, d: DType) -> Result<kaio::Dtype> {
    Ok(match d {
        DType::F32 => kaio::Dtype::F32,
        DType::F16 => kaio::Dtype::F16,
        DType::BF16 => kaio::Dtype::Bf16,
        DType::U8 => kaio::Dtype::U8,
        DType::U32 => kaio::Dtype::U32,
        DType::I32 => kaio::Dtype::I32,
        other => bail!("kaio-candle::{op}: libkaio has no {other:?} tensors"),
    })
}

impl<'a> Arg<'a> {
    /// The view of `m` in this storage, as `dtype` (the storage's, unless a
    /// caller reinterprets bytes, as u8 holding i8).
    pub fn view_as(&self, m: &Matrix, dtype: kaio::Dtype) -> kaio::TensorView<'_> {
        kaio::TensorView::new(&self.buf, m.rows, m.cols)
            .with_dtype(dtype)
            .with_offset_bytes((m.offset * dtype.size()) as u64)
            .with_row_stride(m.row_stride)
    }

    pub fn view(&self, m: &Matrix) -> kaio::TensorView<'_> {
        let d = kaio_dtype("view", self.dtype).expect("a storage read by an op has a kaio dtype");
        self.view_as(m, d)
    }
}

/// Fails unless `b` is on the GPU of `a` (as candle, compared by ordinal:
/// two candle devices of one GPU share its primary context, and cudarc's
/// guards order their streams).
pub(crate) fn same_device(op: &str, a: &CudaStorage, b: &CudaStorage, arg: &str) -> Result<()> {
    use candle_core::backend::BackendDevice;
    let (la, lb) = (a.device.location(), b.device.location());
    if la != lb {
        bail!("kaio-candle::{op}: argument '{arg}' is on {lb:?}, the first argument on {la:?}; move it to one device")
    }
    Ok(())
}
