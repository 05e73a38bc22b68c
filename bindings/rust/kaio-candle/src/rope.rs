//! Rotary position embeddings in place on candle tensors: Q and K as `[T,
//! H·D]`, `[T, H, D]` or `[B, S, H, D]` (the head dim contiguous, the heads
//! adjacent, tokens evenly spaced: column ranges of a fused QKV output
//! qualify), f32, f16 or bf16, at I32 positions, one per token.
use candle_core::backend::BackendStorage;
use candle_core::{bail, CpuStorage, CudaStorage, DType, InplaceOp2, Layout, Result, Tensor};

use crate::context::context;
use crate::error::KaioResultExt;
use crate::heads::token_heads;
use crate::layout::{self, Matrix};
use crate::prep::{forward_only, no_cpu};
use crate::storage::{kaio_dtype, read, same_device, write};

const OP: &str = "rope";

/// RoPE in place on one of Q or K: `x.inplace_op2(&positions, &op)`. The
/// desc's style, scaling and frequencies are used; its dtype, heads and
/// head_dim come from `x` (a rank-2 `x` takes its head_dim from the desc).
#[derive(Copy, Clone, Debug)]
pub struct Rope {
    pub desc: kaio::RopeDesc,
    /// The argument's name in messages, "q" or "k"; "k" rotates as K.
    pub arg: &'static str,
}

impl InplaceOp2 for Rope {
    fn name(&self) -> &'static str {
        "kaio-rope"
    }

    fn cpu_fwd(&self, _: &mut CpuStorage, _: &Layout, _: &CpuStorage, _: &Layout) -> Result<()> {
        no_cpu(OP)
    }

    fn cuda_fwd(&self, x: &mut CudaStorage, xl: &Layout, pos: &CudaStorage, pl: &Layout) -> Result<()> {
        let arg = self.arg;
        let dtype = x.dtype();
        layout::dtype(OP, arg, dtype, &[DType::F32, DType::F16, DType::BF16])?;
        layout::dtype(OP, "positions", pos.dtype(), &[DType::I32])?;
        same_device(OP, x, pos, "positions")?;
        let hint = Some(self.desc.head_dim).filter(|&d| d != 0);
        let h = token_heads(OP, arg, xl, hint)?;
        let pm = layout::contiguous(OP, "positions", pl)?;
        let tokens = h.m.rows;
        if pm.rows * pm.cols != tokens {
            bail!(
                "kaio-candle::{OP}: 'positions' is {:?} for the {tokens} tokens of '{arg}' {:?}; give one I32 \
                 position per token ([T], or [B, S] for [B, S, H, D])",
                pl.dims(),
                xl.dims()
            )
        }
        if tokens == 0 {
            return Ok(());
        }
        let kd = kaio_dtype(OP, dtype)?;
        let is_k = arg == "k";
        let mut desc = self.desc;
        desc.dtype = kd;
        desc.head_dim = h.head_dim;
        (desc.heads_q, desc.heads_k) = if is_k { (0, h.heads) } else { (h.heads, 0) };
        let dev = x.device.clone();
        let ctx = context(&dev)?;
        let prepared = ctx.op((OP, desc_key(&desc)), |d| kaio::Op::rope(d, &desc))?;
        let stream = dev.cuda_stream();
        let p = read(&ctx, OP, pos, &stream)?;
        let w = write(&ctx, OP, x, &stream)?;
        let flat = Matrix { rows: 1, cols: tokens, row_stride: tokens, offset: pm.offset };
        let (xv, pv, none) = (w.view(&h.m), p.view_as(&flat, kaio::Dtype::I32), kaio::TensorView::none());
        let views = if is_k { [none, xv, pv] } else { [xv, none, pv] };
        prepared.launch(&ctx.stream, &views).kaio(OP)
    }
}

/// Every field that goes into the prepared op (its frequency table).
pub(crate) fn desc_key(d: &kaio::RopeDesc) -> Vec<i64> {
    let mut k = vec![d.style.raw() as i64, d.dtype.raw() as i64, d.scaling.raw() as i64];
    k.extend([d.heads_q, d.heads_k, d.head_dim, d.rotary_dim, d.original_max_position_embeddings].map(|n| n as i64));
    k.extend(
        [d.theta, d.factor, d.low_freq_factor, d.high_freq_factor, d.beta_fast, d.beta_slow]
            .into_iter()
            .chain([d.attention_factor, d.mscale, d.mscale_all_dim])
            .map(|f| f.to_bits() as i64),
    );
    k.push(d.truncate as i64);
    k
}

/// Rotary position embeddings, IN PLACE on `q` and `k` (nothing returned):
/// the storage each views is rotated where it views it (a column range of a
/// fused QKV output rotates inside that output; every tensor sharing the
/// storage sees the change). q `[T, Hq·D]`, `[T, Hq, D]` or `[B, S, Hq, D]`,
/// k likewise with Hk heads (each may have its own dtype: f32, f16 or bf16),
/// positions I32 with one entry per token (`[T]`, or `[B, S]`), any values.
/// `desc` gives the style (half split as candle-nn's `rope`, interleaved as
/// its `rope_i`), rotary_dim (partial rotary), θ and the scalings; its
/// dtype, heads and head_dim are taken from the tensors (rank-2 tensors need
/// `desc.head_dim`). Math in f32, rounded once. Two launches, Q then K, on
/// candle's stream. Forward only (a tensor tracking gradients is refused).
pub fn rope(q: &Tensor, k: &Tensor, positions: &Tensor, desc: &kaio::RopeDesc) -> Result<()> {
    for (arg, t) in [("q", q), ("k", k), ("positions", positions)] {
        forward_only(OP, arg, t)?;
    }
    q.inplace_op2(positions, &Rope { desc: *desc, arg: "q" })?;
    k.inplace_op2(positions, &Rope { desc: *desc, arg: "k" })
}
