//! How a candle tensor's layout maps onto a kaio view: a row-major matrix
//! with a row stride and a start offset, checked before anything launches.
//! Pure functions, so they are tested without a GPU.
use candle_core::{bail, DType, Layout, Result};

/// A candle layout seen as `rows x cols`, row-major: every dimension but the
/// last folds into rows, the last must have stride 1, and rows must be
/// evenly spaced (`row_stride` elements apart, at least `cols`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Matrix {
    pub rows: usize,
    pub cols: usize,
    pub row_stride: usize,
    /// Elements from the start of the storage (candle's `start_offset`).
    pub offset: usize,
}

impl Matrix {
    /// Elements of storage the view reaches, from the storage's start.
    pub fn span(&self) -> usize {
        if self.rows == 0 || self.cols == 0 {
            self.offset
        } else {
            self.offset + (self.rows - 1) * self.row_stride + self.cols
        }
    }
}

/// `layout` as a matrix, or an error naming `op`, `arg` and the fix.
pub fn matrix(op: &str, arg: &str, layout: &Layout) -> Result<Matrix> {
    let dims = layout.dims();
    let stride = layout.stride();
    let offset = layout.start_offset();
    let Some((&cols, lead)) = dims.split_last() else {
        return Ok(Matrix { rows: 1, cols: 1, row_stride: 1, offset });
    };
    let rows: usize = lead.iter().product();
    let rank = dims.len();
    if cols > 1 && stride[rank - 1] != 1 {
        bail!(
            "kaio-candle::{op}: argument '{arg}' (shape {dims:?}, stride {stride:?}) is not \
             contiguous along its last dimension; call .contiguous() first"
        )
    }
    let row_stride = if rank >= 2 { stride[rank - 2] } else { cols };
    // Leading dimensions must fold into evenly spaced rows.
    let mut expect = row_stride;
    for i in (0..rank.saturating_sub(2)).rev() {
        expect *= dims[i + 1];
        if dims[i] > 1 && stride[i] != expect {
            bail!(
                "kaio-candle::{op}: argument '{arg}' (shape {dims:?}, stride {stride:?}) does not \
                 fold into evenly spaced rows; call .contiguous() first"
            )
        }
    }
    let row_stride = if rows <= 1 { cols.max(1) } else { row_stride };
    if row_stride < cols {
        bail!(
            "kaio-candle::{op}: argument '{arg}' (shape {dims:?}, stride {stride:?}) has rows that \
             overlap; call .contiguous() first"
        )
    }
    Ok(Matrix { rows, cols, row_stride, offset })
}

/// As [`matrix`], also requiring no gap between rows.
pub fn contiguous(op: &str, arg: &str, layout: &Layout) -> Result<Matrix> {
    let m = matrix(op, arg, layout)?;
    if m.row_stride != m.cols.max(1) {
        bail!(
            "kaio-candle::{op}: argument '{arg}' (shape {:?}, stride {:?}) has a row stride of {} \
             for {} columns, and this op needs contiguous rows; call .contiguous() first",
            layout.dims(),
            layout.stride(),
            m.row_stride,
            m.cols
        )
    }
    Ok(m)
}

/// Fails unless `got` is one of `allowed`.
pub fn dtype(op: &str, arg: &str, got: DType, allowed: &[DType]) -> Result<()> {
    if allowed.contains(&got) {
        return Ok(());
    }
    bail!("kaio-candle::{op}: argument '{arg}' is {got:?}; this op takes {allowed:?}")
}

/// Fails unless `dims` has rank `rank`.
pub fn rank(op: &str, arg: &str, dims: &[usize], rank: usize, what: &str) -> Result<()> {
    if dims.len() == rank {
        return Ok(());
    }
    bail!("kaio-candle::{op}: argument '{arg}' has shape {dims:?}; expected rank {rank} ({what})")
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Tensor};

    fn layout_of(t: &Tensor) -> Layout {
        t.layout().clone()
    }

    #[test]
    fn contiguous_tensors_fold_leading_dims_into_rows() -> Result<()> {
        let t = Tensor::zeros((2, 3, 5), DType::F32, &Device::Cpu)?;
        let m = contiguous("op", "x", &layout_of(&t))?;
        assert_eq!(m, Matrix { rows: 6, cols: 5, row_stride: 5, offset: 0 });
        assert_eq!(m.span(), 30);
        Ok(())
    }

    #[test]
    fn a_narrowed_tensor_keeps_its_offset_and_row_stride() -> Result<()> {
        let t = Tensor::zeros((4, 10), DType::F32, &Device::Cpu)?;
        let n = t.narrow(1, 3, 4)?.narrow(0, 1, 2)?;
        let m = matrix("op", "x", &layout_of(&n))?;
        assert_eq!(m, Matrix { rows: 2, cols: 4, row_stride: 10, offset: 13 });
        let e = contiguous("op", "x", &layout_of(&n)).unwrap_err().to_string();
        assert!(e.contains("kaio-candle::op") && e.contains("'x'") && e.contains(".contiguous()"), "{e}");
        // Narrowing rows only keeps rows contiguous.
        let rows = t.narrow(0, 1, 2)?;
        assert_eq!(contiguous("op", "x", &layout_of(&rows))?.offset, 10);
        Ok(())
    }

    #[test]
    fn a_transposed_tensor_is_refused_with_the_fix() -> Result<()> {
        let t = Tensor::zeros((3, 4), DType::F16, &Device::Cpu)?.t()?;
        let e = matrix("matmul_tc", "b", &layout_of(&t)).unwrap_err().to_string();
        assert!(e.contains("kaio-candle::matmul_tc") && e.contains("'b'") && e.contains("last dimension"), "{e}");
        Ok(())
    }

    #[test]
    fn leading_dims_that_do_not_fold_are_refused() -> Result<()> {
        let t = Tensor::zeros((3, 4, 5), DType::F32, &Device::Cpu)?.transpose(0, 1)?;
        let e = matrix("op", "x", &layout_of(&t)).unwrap_err().to_string();
        assert!(e.contains("evenly spaced rows"), "{e}");
        Ok(())
    }

    #[test]
    fn scalars_vectors_and_empty_tensors() -> Result<()> {
        let v = Tensor::zeros(7, DType::F32, &Device::Cpu)?;
        assert_eq!(contiguous("op", "x", &layout_of(&v))?, Matrix { rows: 1, cols: 7, row_stride: 7, offset: 0 });
        let e = Tensor::zeros((0, 7), DType::F32, &Device::Cpu)?;
        assert_eq!(contiguous("op", "x", &layout_of(&e))?.rows, 0);
        let s = Tensor::new(3f32, &Device::Cpu)?;
        assert_eq!(contiguous("op", "x", &layout_of(&s))?, Matrix { rows: 1, cols: 1, row_stride: 1, offset: 0 });
        Ok(())
    }

    #[test]
    fn dtype_and_rank_errors_name_the_op_and_argument() {
        let e = dtype("rmsnorm", "x", DType::U8, &[DType::F32, DType::F16]).unwrap_err().to_string();
        assert!(e.contains("kaio-candle::rmsnorm") && e.contains("'x'") && e.contains("U8"), "{e}");
        let e = rank("attention", "q", &[2, 3], 4, "batch, seq, heads, head_dim").unwrap_err().to_string();
        assert!(e.contains("rank 4") && e.contains("[2, 3]"), "{e}");
    }
}
