//! GGUF k-quants on candle's `QTensor`, what candle 0.11 lacks on CUDA:
//!
//! - [`quantize_to_qtensor`]: in-situ quantization (ISQ) of a CUDA tensor on
//!   the GPU into a `QTensor` backed by candle's own `QCudaStorage`, bytes
//!   identical to candle's `QTensor::quantize` (which copies the tensor to
//!   the host and quantizes it there);
//! - [`quant_matmul`]: `y = x · dequant(w)ᵀ` on such a `QTensor` with
//!   libkaio's dequant-matmul.
//!
//! Formats: Q8_0, Q4K, Q5K and Q6K. A `QTensor` `[.., cols]` holds its rows
//! one after another, each row `cols / block` whole blocks (candle quantizes
//! the flattened tensor block by block, and `cols` is a multiple of the
//! block), which is exactly libkaio's `rows x row_bytes(cols)` U8 matrix.
//! candle's storage is longer than that: `MATRIX_ROW_PADDING` values' worth
//! of blocks follow the data (candle's kernels read past the last row);
//! [`QTensor::data`] and `storage_size_in_bytes` give the data without them.
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::CudaDevice;
use candle_core::quantized::cuda::{QCudaStorage, MATRIX_ROW_PADDING};
use candle_core::quantized::{GgmlDType, QStorage, QTensor};
use candle_core::{bail, CudaStorage, CustomOp1, DType, Device, Layout, Result, Shape, Storage, Tensor};

use crate::context::context;
use crate::error::KaioResultExt;
use crate::layout::{self, Matrix};
use crate::prep::{aligned, forward_only, no_cpu_fwd};
use crate::storage::{alloc, kaio_dtype, read, write};

const FLOATS: &[DType] = &[DType::F32, DType::F16, DType::BF16];

/// libkaio's format for a candle quantized dtype.
pub(crate) fn quant_format(op: &str, dtype: GgmlDType) -> Result<kaio::QuantFormat> {
    Ok(match dtype {
        GgmlDType::Q8_0 => kaio::QuantFormat::Q8_0,
        GgmlDType::Q4K => kaio::QuantFormat::Q4K,
        GgmlDType::Q5K => kaio::QuantFormat::Q5K,
        GgmlDType::Q6K => kaio::QuantFormat::Q6K,
        other => bail!("kaio-candle::{op}: {other:?} is not a libkaio k-quant format; use Q8_0, Q4K, Q5K or Q6K"),
    })
}

fn cuda_device<'a>(op: &str, arg: &str, dev: &'a Device) -> Result<&'a CudaDevice> {
    match dev {
        Device::Cuda(d) => Ok(d),
        other => bail!(
            "kaio-candle::{op}: argument '{arg}' is on {:?}; this op runs on CUDA tensors only, move it to a \
             CUDA device",
            other.location()
        ),
    }
}

/// Quantizes `x` (f32, f16 or bf16, `[.., cols]` with `cols` a multiple of
/// the block: 32 for Q8_0, 256 for the K formats) on the GPU into a
/// `QTensor` of `x`'s shape on `x`'s device, in candle's own quantized CUDA
/// storage, with no host round trip. The bytes are those of candle's
/// `QTensor::quantize` on the same values (libkaio's
/// `KAIO_QUANT_MODE_CANDLE`; f16 and bf16 are widened to f32 exactly, as
/// candle does). Any layout whose rows fold (a non-zero `start_offset`
/// included) is taken; a start or row stride off 16 bytes is copied first.
///
/// Like every candle op, the work is enqueued on the calling thread's stream
/// of candle's device; synchronize the device before handing the `QTensor`
/// to another thread.
pub fn quantize_to_qtensor(x: &Tensor, dtype: GgmlDType) -> Result<QTensor> {
    let op = "quantize_to_qtensor";
    let format = quant_format(op, dtype)?;
    let dev = cuda_device(op, "x", x.device())?.clone();
    layout::dtype(op, "x", x.dtype(), FLOATS)?;
    let shape = x.shape().clone();
    let Some(&cols) = shape.dims().last() else {
        bail!("kaio-candle::{op}: argument 'x' is a scalar; expected [.., cols]")
    };
    let block = dtype.block_size();
    if !cols.is_multiple_of(block) {
        bail!(
            "kaio-candle::{op}: argument 'x' has shape {:?}; its last dimension ({cols}) must be a multiple of \
             {block}, the {dtype:?} block; pad the rows to {}",
            shape.dims(),
            cols.div_ceil(block) * block
        )
    }
    let x = aligned(op, "x", x, 16, false)?;
    let qs = QCudaStorage::zeros(&dev, shape.elem_count(), dtype)?;
    if shape.elem_count() > 0 {
        let (st, l) = x.storage_and_layout();
        let Storage::Cuda(xs) = &*st else { bail!("kaio-candle::{op}: argument 'x' is not in CUDA storage") };
        let xm = layout::matrix(op, "x", l)?;
        let (rows, row_bytes) = (xm.rows, format.row_bytes(cols).unwrap_or(0));
        if rows * row_bytes != qs.storage_size_in_bytes() {
            bail!(
                "kaio-candle::{op}: {rows} rows of {row_bytes} bytes do not fill candle's {} bytes of {dtype:?} \
                 storage",
                qs.storage_size_in_bytes()
            )
        }
        let ctx = context(&dev)?;
        let kd = kaio_dtype(op, x.dtype())?;
        let mode = kaio::QuantMode::Candle;
        let key = vec![format.raw() as i64, kd.raw() as i64, rows as i64, cols as i64];
        let prepared = ctx.op((op, key), |d| kaio::Op::quantize(d, format, mode, kd, rows, cols))?;
        let stream = dev.cuda_stream();
        let rx = read(&ctx, op, xs, &stream)?;
        // QCudaStorage only hands out its pointer through cudarc's read guard
        // (`device_ptr`), and we write through it. That is still ordered:
        // - the storage was allocated and zero-filled by `QCudaStorage::zeros`
        //   on candle's stream, the very stream this launch goes on, so the
        //   fill precedes our kernel in stream order (and the guard makes this
        //   stream wait on the storage's last write event, should cudarc track
        //   events across several streams);
        // - nothing else can touch the storage before we return it: it is
        //   local to this function, and the guard ends before it is moved;
        // - every later use by candle (QMatMul, dequantize, `data()`,
        //   embedding) launches on the device's stream, after our kernel in
        //   stream order; the read event the guard records on drop marks the
        //   end of our kernel, which a later writer on another stream waits
        //   for. What the guard does not give is a write event for a reader on
        //   another stream, and a fresh QTensor has no such reader.
        let (ptr, guard) = qs.device_ptr_with_guard(&stream)?;
        let bytes = qs.storage_size_in_bytes();
        // SAFETY: `qs` owns at least `bytes` bytes at `ptr` (more: the
        // padding) and outlives the launch; see above for the ordering.
        let qbuf = unsafe { kaio::Buffer::<u8>::from_raw_parts(&ctx.device, ptr as u64, bytes as u64) }.kaio(op)?;
        let qv = kaio::TensorView::new(&qbuf, rows, row_bytes);
        prepared.launch(&ctx.stream, &[rx.view(&xm), qv]).kaio(op)?;
        drop(qbuf);
        drop(guard);
        drop(rx);
    }
    QTensor::new(QStorage::Cuda(qs), shape)
}

/// `x · dequant(w)ᵀ` with libkaio's dequant-matmul, output `out_dtype` (F32
/// or F16, what libkaio writes). [`quant_matmul`] is this with F32.
#[derive(Copy, Clone, Debug)]
pub struct QuantMatmul<'a> {
    pub w: &'a QTensor,
    pub out_dtype: DType,
}

impl CustomOp1 for QuantMatmul<'_> {
    fn name(&self) -> &'static str {
        "kaio-quant-matmul"
    }
    no_cpu_fwd!(1, "quant_matmul");
    fn cuda_fwd(&self, x: &CudaStorage, xl: &Layout) -> Result<(CudaStorage, Shape)> {
        let op = "quant_matmul";
        let w = self.w;
        let format = quant_format(op, w.dtype())?;
        layout::dtype(op, "x", x.dtype(), FLOATS)?;
        layout::dtype(op, "out_dtype", self.out_dtype, &[DType::F32, DType::F16])?;
        let wdev = cuda_device(op, "w", &w.device())?.clone();
        if wdev.id() != x.device.id() {
            bail!("kaio-candle::{op}: argument 'w' is on another CUDA device than 'x'")
        }
        let (n, k) = match w.shape().dims() {
            &[n, k] => (n, k),
            d => bail!("kaio-candle::{op}: argument 'w' has shape {d:?}; expected [N, K] (a GGUF nn.Linear weight)"),
        };
        if xl.dims().is_empty() {
            bail!("kaio-candle::{op}: argument 'x' is a scalar; expected [.., K]")
        }
        let xm = layout::matrix(op, "x", xl)?;
        if xm.cols != k {
            bail!(
                "kaio-candle::{op}: 'x' is {:?} and 'w' is {:?}: K differs ({} vs {k}); 'w' is [N, K]",
                xl.dims(),
                w.shape().dims(),
                xm.cols
            )
        }
        let m = xm.rows;
        let mut dims = xl.dims().to_vec();
        *dims.last_mut().unwrap() = n;
        let shape = Shape::from(dims);
        let dev = &x.device;
        let mut out = alloc(dev, self.out_dtype, m * n)?;
        if m == 0 || n == 0 {
            return Ok((out, shape));
        }
        let Some(row_bytes) = format.row_bytes(k) else {
            bail!("kaio-candle::{op}: K is {k}; it must be a positive multiple of {}", format.block_elems())
        };
        let wbytes = n * row_bytes;
        if wbytes != w.storage_size_in_bytes() {
            bail!(
                "kaio-candle::{op}: 'w' {:?} holds {} bytes of {:?}; [N, K] takes {wbytes}",
                w.shape().dims(),
                w.storage_size_in_bytes(),
                w.dtype()
            )
        }
        // Every QCudaStorage (zeros, quantize, load_quantized) allocates
        // MATRIX_ROW_PADDING values' worth of blocks past its data; letting
        // libkaio see them lets its fastest Q6_K / Q8_0 matvec kernels read
        // their last 16-byte window (kaio.h). The view stays N x row_bytes.
        let tail = MATRIX_ROW_PADDING / format.block_elems() * format.block_bytes();
        let ctx = context(dev)?;
        let (kx, ko) = (kaio_dtype(op, x.dtype())?, kaio_dtype(op, self.out_dtype)?);
        let key = vec![format.raw() as i64, kx.raw() as i64, ko.raw() as i64, m as i64, n as i64, k as i64];
        let prepared = ctx.op((op, key), |d| kaio::Op::quant_matmul(d, format, kx, ko, m, n, k))?;
        let stream = dev.cuda_stream();
        let rx = read(&ctx, op, x, &stream)?;
        let (ptr, guard) = w.device_ptr_with_guard(&stream)?;
        // SAFETY: the QTensor is borrowed for the call, so its storage lives;
        // its reads are ordered by the guard like any candle input's.
        let wrap = |len: usize| unsafe { kaio::Buffer::<u8>::from_raw_parts(&ctx.device, ptr as u64, len as u64) };
        // A storage made some other way than candle's constructors (without
        // the padding) is still taken, with the slower kernels.
        let wbuf = match wrap(wbytes + tail) {
            Ok(b) => b,
            Err(_) => wrap(wbytes).kaio(op)?,
        };
        let wv = kaio::TensorView::new(&wbuf, n, row_bytes);
        let ro = write(&ctx, op, &mut out, &stream)?;
        let cm = Matrix { rows: m, cols: n, row_stride: n, offset: 0 };
        prepared.launch(&ctx.stream, &[rx.view(&xm), wv, ro.view(&cm)]).kaio(op)?;
        drop((rx, wbuf, ro));
        drop(guard);
        Ok((out, shape))
    }
}

/// f32 `y = x · dequant(w)ᵀ` for `w` a CUDA `QTensor` `[N, K]` in Q8_0, Q4K,
/// Q5K or Q6K (a GGUF nn.Linear weight, as candle's `QMatMul` takes it) and
/// `x` f32, f16 or bf16 `[.., K]` on the same device; `y` is f32 `[.., N]`
/// (libkaio writes f32 or f16; [`QuantMatmul`] picks f16). libkaio
/// accumulates in f32. M (the rows of x) <= 8 runs bandwidth-bound kernels
/// that read W once (A used as given; for f16/bf16 x the dequantized weights
/// are rounded to x's dtype); M > 8 dequantizes W into an f16 workspace (bf16
/// for bf16 x) and runs the tensor-core matmul, rounding an f32 x to f16
/// (the op, with its workspaces, is cached per shape and per thread). A
/// start or row stride of x off 16 bytes is copied first.
pub fn quant_matmul(x: &Tensor, w: &QTensor) -> Result<Tensor> {
    quant_matmul_as(x, w, DType::F32)
}

/// [`quant_matmul`] writing `out_dtype`, F32 or F16.
pub fn quant_matmul_as(x: &Tensor, w: &QTensor, out_dtype: DType) -> Result<Tensor> {
    let op = "quant_matmul";
    forward_only(op, "x", x)?;
    let k = x.dims().last().copied().unwrap_or(1).max(1);
    // M > 8 with an f32 x: libkaio rounds x to f16 in one pass that needs contiguous rows.
    let contiguous = x.dtype() == DType::F32 && x.elem_count() / k > 8;
    let x = aligned(op, "x", x, 16, contiguous)?;
    x.apply_op1_no_bwd(&QuantMatmul { w, out_dtype })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORMATS: [GgmlDType; 4] = [GgmlDType::Q8_0, GgmlDType::Q4K, GgmlDType::Q5K, GgmlDType::Q6K];

    #[test]
    fn formats_agree_with_candles_block_sizes() -> Result<()> {
        for d in FORMATS {
            let f = quant_format("op", d)?;
            assert_eq!(f.block_elems(), d.block_size(), "{d:?}");
            assert_eq!(f.block_bytes(), d.type_size(), "{d:?}");
            // The padding candle allocates is whole blocks, at least 15 bytes.
            assert_eq!(MATRIX_ROW_PADDING % f.block_elems(), 0);
            assert!(MATRIX_ROW_PADDING / f.block_elems() * f.block_bytes() >= 15);
        }
        let e = quant_format("quantize_to_qtensor", GgmlDType::Q4_0).unwrap_err().to_string();
        assert!(e.contains("kaio-candle::quantize_to_qtensor") && e.contains("Q4_0") && e.contains("Q6K"), "{e}");
        Ok(())
    }

    /// candle's QTensor of `[rows, cols]` is each row's blocks back to back:
    /// row r alone quantizes to bytes r·row_bytes .. (r+1)·row_bytes.
    #[test]
    fn candles_qtensor_rows_are_whole_blocks_back_to_back() -> Result<()> {
        let (rows, cols) = (3usize, 512usize);
        let v: Vec<f32> = (0..rows * cols).map(|i| ((i * 7919) % 1000) as f32 / 100.0 - 5.0).collect();
        let x = Tensor::from_vec(v, (rows, cols), &Device::Cpu)?;
        for d in FORMATS {
            let all = QTensor::quantize(&x, d)?.data()?.to_vec();
            let rb = quant_format("op", d)?.row_bytes(cols).unwrap();
            assert_eq!(all.len(), rows * rb, "{d:?}");
            for r in 0..rows {
                let one = QTensor::quantize(&x.narrow(0, r, 1)?.force_contiguous()?, d)?.data()?.to_vec();
                assert_eq!(&all[r * rb..(r + 1) * rb], &one[..], "{d:?} row {r}");
            }
        }
        Ok(())
    }

    #[test]
    fn cpu_inputs_and_bad_shapes_are_refused() -> Result<()> {
        let x = Tensor::zeros((2, 256), DType::F32, &Device::Cpu)?;
        let e = quantize_to_qtensor(&x, GgmlDType::Q6K).unwrap_err().to_string();
        assert!(e.contains("kaio-candle::quantize_to_qtensor") && e.contains("'x'") && e.contains("CUDA"), "{e}");
        let w = QTensor::quantize(&x, GgmlDType::Q4K)?;
        let e = quant_matmul(&x, &w).unwrap_err().to_string();
        assert!(e.contains("kaio-candle::quant_matmul") && e.contains("CUDA tensors only"), "{e}");
        Ok(())
    }
}
