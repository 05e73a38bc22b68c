//! Token × heads layouts of the serving ops (RoPE, paged caches, varlen
//! attention) as libkaio's rank-2 `[tokens, H·D]` view. Pure functions,
//! tested without a GPU.
use candle_core::{bail, Layout, Result, Shape};

use crate::layout::{self, Matrix};

/// A tensor of tokens, each `heads` heads of `head_dim` values side by side.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Heads {
    /// `[tokens, heads · head_dim]`.
    pub m: Matrix,
    pub heads: usize,
    pub head_dim: usize,
}

/// `[T, H·D]` (`head_dim` must be given), `[T, H, D]` or `[B, S, H, D]`
/// (`head_dim`, if given, must be D) as `[tokens, H·D]`: the head dim
/// contiguous, the heads adjacent (stride D) and the tokens evenly spaced
/// (a row stride above H·D is fine: a column range of a fused QKV output).
pub fn token_heads(op: &str, arg: &str, l: &Layout, head_dim: Option<usize>) -> Result<Heads> {
    let (dims, st) = (l.dims(), l.stride());
    match dims.len() {
        2 => {
            let cols = dims[1];
            let d = match head_dim {
                Some(d) if d > 0 && cols.is_multiple_of(d) => d,
                _ => bail!(
                    "kaio-candle::{op}: argument '{arg}' is {dims:?}, a rank-2 [T, H·D] tensor, and head_dim is \
                     {head_dim:?}; set a head_dim that divides {cols}, or pass it as [T, H, D]"
                ),
            };
            Ok(Heads { m: layout::matrix(op, arg, l)?, heads: cols / d, head_dim: d })
        }
        3 | 4 => {
            let r = dims.len();
            let (h, d) = (dims[r - 2], dims[r - 1]);
            if let Some(want) = head_dim.filter(|&w| w != 0 && w != d) {
                bail!("kaio-candle::{op}: argument '{arg}' is {dims:?} (head_dim {d}) but head_dim {want} was asked for; they must match")
            }
            if d > 1 && st[r - 1] != 1 {
                bail!(
                    "kaio-candle::{op}: argument '{arg}' (shape {dims:?}, stride {st:?}) is not contiguous along its \
                     last dimension (head_dim); call .contiguous() first"
                )
            }
            if h > 1 && st[r - 2] != d {
                bail!(
                    "kaio-candle::{op}: argument '{arg}' (shape {dims:?}, stride {st:?}) has its heads {} elements \
                     apart, not head_dim = {d}: the H·D values of a token must be side by side (a [B, H, S, D] \
                     tensor transposed is not); call .contiguous() first",
                    st[r - 2]
                )
            }
            // The same tensor with (H, D) folded into one contiguous dim.
            let mut fd = dims[..r - 2].to_vec();
            fd.push(h * d);
            let mut fs = st[..r - 2].to_vec();
            fs.push(1);
            let folded = Layout::new(Shape::from(fd), fs, l.start_offset());
            Ok(Heads { m: layout::matrix(op, arg, &folded)?, heads: h, head_dim: d })
        }
        _ => bail!(
            "kaio-candle::{op}: argument '{arg}' has shape {dims:?}; expected [T, H·D], [T, H, D] or [B, S, H, D]"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device, Tensor};

    fn zeros(dims: &[usize]) -> Result<Tensor> {
        Tensor::zeros(dims, DType::F16, &Device::Cpu)
    }

    #[test]
    fn every_rank_folds_into_tokens_by_heads() -> Result<()> {
        let m = |rows, cols, row_stride, offset| Matrix { rows, cols, row_stride, offset };
        let t = zeros(&[5, 4, 64])?;
        assert_eq!(token_heads("rope", "q", t.layout(), None)?, Heads { m: m(5, 256, 256, 0), heads: 4, head_dim: 64 });
        let t = zeros(&[2, 5, 4, 64])?;
        assert_eq!(token_heads("rope", "q", t.layout(), Some(64))?.m, m(10, 256, 256, 0));
        let t = zeros(&[5, 256])?;
        assert_eq!(
            token_heads("rope", "q", t.layout(), Some(64))?,
            Heads { m: m(5, 256, 256, 0), heads: 4, head_dim: 64 }
        );
        // K as a column range of a fused [T, (8 + 2 + 2)·64] QKV output.
        let qkv = zeros(&[7, 12, 64])?;
        let k = qkv.narrow(1, 8, 2)?;
        assert_eq!(token_heads("rope", "k", k.layout(), None)?.m, m(7, 128, 768, 512));
        // One token: any token stride.
        let one = zeros(&[3, 1, 4, 64])?.transpose(0, 1)?;
        assert_eq!(token_heads("rope", "q", one.layout(), None)?.m.rows, 3);
        Ok(())
    }

    #[test]
    fn layouts_that_do_not_fold_are_refused_with_the_fix() -> Result<()> {
        let t = zeros(&[2, 4, 5, 64])?.transpose(1, 2)?;
        let e = token_heads("rope", "q", t.layout(), None).unwrap_err().to_string();
        assert!(
            e.contains("kaio-candle::rope") && e.contains("'q'") && e.contains("heads") && e.contains(".contiguous()"),
            "{e}"
        );
        let t = zeros(&[5, 64, 4])?.transpose(1, 2)?;
        let e = token_heads("rope", "k", t.layout(), None).unwrap_err().to_string();
        assert!(e.contains("last dimension") && e.contains(".contiguous()"), "{e}");
        let e = token_heads("rope", "q", zeros(&[5, 256])?.layout(), None).unwrap_err().to_string();
        assert!(e.contains("head_dim") && e.contains("[T, H, D]"), "{e}");
        let e = token_heads("rope", "q", zeros(&[5, 250])?.layout(), Some(64)).unwrap_err().to_string();
        assert!(e.contains("divides 250"), "{e}");
        let e = token_heads("rope", "q", zeros(&[5, 4, 64])?.layout(), Some(128)).unwrap_err().to_string();
        assert!(e.contains("head_dim 128") && e.contains("must match"), "{e}");
        let e = token_heads("rope", "q", zeros(&[256])?.layout(), Some(64)).unwrap_err().to_string();
        assert!(e.contains("expected [T, H·D]"), "{e}");
        Ok(())
    }
}
