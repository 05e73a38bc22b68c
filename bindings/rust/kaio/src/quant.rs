//! GGUF k-quants (Q8_0, Q4_K, Q5_K, Q6_K): quantize, dequantize and the
//! dequant-matmul, as prepared [`Op`]s and one-shot functions.
//!
//! A quantized matrix is its GGUF block bytes, row-major, passed as a U8 view
//! of `rows x format.row_bytes(cols)` bytes (kaio.h, "GGUF k-quants", has the
//! alignment rules). libkaio checks everything at creation and at launch.
use std::ptr;

use kaio_sys as sys;

use crate::buffer::TensorView;
use crate::device::Device;
use crate::dtype::Dtype;
use crate::error::{check, Result};
use crate::ops::{dim, Op};
use crate::stream::Stream;

/// A GGUF block format.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum QuantFormat {
    /// 34 bytes per 32 values.
    Q8_0,
    /// 144 bytes per 256 values.
    Q4K,
    /// 176 bytes per 256 values.
    Q5K,
    /// 210 bytes per 256 values.
    Q6K,
}

impl QuantFormat {
    pub fn raw(self) -> sys::kaio_quant_format {
        match self {
            QuantFormat::Q8_0 => sys::KAIO_QUANT_Q8_0,
            QuantFormat::Q4K => sys::KAIO_QUANT_Q4_K,
            QuantFormat::Q5K => sys::KAIO_QUANT_Q5_K,
            QuantFormat::Q6K => sys::KAIO_QUANT_Q6_K,
        }
    }

    /// Values per block (32 or 256). Asks libkaio; no driver needed.
    pub fn block_elems(self) -> usize {
        unsafe { sys::kaio_quant_block_elems(self.raw()) as usize }
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        unsafe { sys::kaio_quant_block_bytes(self.raw()) as usize }
    }

    /// Bytes of one quantized row of `cols` values, or None when `cols` is
    /// not a positive multiple of the block.
    pub fn row_bytes(self, cols: usize) -> Option<usize> {
        let n = unsafe { sys::kaio_quant_row_bytes(self.raw(), dim(cols)) };
        if n > 0 {
            Some(n as usize)
        } else {
            None
        }
    }
}

/// Which reference quantize reproduces byte for byte: ggml's
/// `quantize_row_*_ref` or candle's `QTensor::quantize` (same for Q8_0).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum QuantMode {
    Ggml,
    Candle,
}

impl QuantMode {
    pub fn raw(self) -> sys::kaio_quant_mode {
        match self {
            QuantMode::Ggml => sys::KAIO_QUANT_MODE_GGML,
            QuantMode::Candle => sys::KAIO_QUANT_MODE_CANDLE,
        }
    }
}

impl Op {
    /// A prepared quantize of an f32/f16/bf16 `rows x cols` matrix. Launch
    /// tensors: `[x, q (U8, rows x row_bytes(cols))]`.
    pub fn quantize(
        device: &Device,
        format: QuantFormat,
        mode: QuantMode,
        in_dtype: Dtype,
        rows: usize,
        cols: usize,
    ) -> Result<Op> {
        let mut p = ptr::null_mut();
        check(unsafe {
            sys::kaio_op_create_quantize(&mut p, device.as_raw(), format.raw(), mode.raw(), in_dtype.raw(), dim(rows), dim(cols))
        })?;
        Op::from_created(p, "quantize")
    }

    /// A prepared dequantize into f32/f16/bf16. Launch tensors: `[q, y]`.
    pub fn dequantize(device: &Device, format: QuantFormat, out_dtype: Dtype, rows: usize, cols: usize) -> Result<Op> {
        let mut p = ptr::null_mut();
        check(unsafe {
            sys::kaio_op_create_dequantize(&mut p, device.as_raw(), format.raw(), out_dtype.raw(), dim(rows), dim(cols))
        })?;
        Op::from_created(p, "dequantize")
    }

    /// A prepared `C[M, N] = A[M, K] · dequant(W)ᵀ`, W the N x K quantized
    /// weight. M > 8 allocates the op's dequantize workspaces here. Launch
    /// tensors: `[A, W, C]`.
    pub fn quant_matmul(
        device: &Device,
        format: QuantFormat,
        a_dtype: Dtype,
        out_dtype: Dtype,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<Op> {
        let mut p = ptr::null_mut();
        check(unsafe {
            sys::kaio_op_create_quant_matmul(
                &mut p,
                device.as_raw(),
                format.raw(),
                a_dtype.raw(),
                out_dtype.raw(),
                dim(m),
                dim(n),
                dim(k),
            )
        })?;
        Op::from_created(p, "quant_matmul")
    }
}

/// One-shot quantize (shapes and dtype from `x`).
pub fn quantize(stream: &Stream, x: &TensorView<'_>, q: &TensorView<'_>, format: QuantFormat, mode: QuantMode) -> Result<()> {
    check(unsafe { sys::kaio_quantize(stream.as_raw(), x.as_raw(), q.as_raw(), format.raw(), mode.raw()) })
}

/// One-shot dequantize (shapes and dtype from `y`).
pub fn dequantize(stream: &Stream, q: &TensorView<'_>, y: &TensorView<'_>, format: QuantFormat) -> Result<()> {
    check(unsafe { sys::kaio_dequantize(stream.as_raw(), q.as_raw(), y.as_raw(), format.raw()) })
}

/// One-shot dequant-matmul for M <= 8 (it never allocates; larger M is
/// UNSUPPORTED: use [`Op::quant_matmul`]).
pub fn quant_matmul(
    stream: &Stream,
    a: &TensorView<'_>,
    w: &TensorView<'_>,
    c: &TensorView<'_>,
    format: QuantFormat,
) -> Result<()> {
    check(unsafe { sys::kaio_quant_matmul(stream.as_raw(), a.as_raw(), w.as_raw(), c.as_raw(), format.raw()) })
}
