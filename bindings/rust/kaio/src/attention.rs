//! Attention: FlashAttention-2 forward and backward on tensor cores, KAIO's
//! rank-2 single-head `attention_tc`, and KAIO's f32 single-head
//! `attention_flash` with its backward.
//!
//! Q is [B, Sq, Hq, D], K and V are [B, Sk, Hkv, D], each passed as the
//! rank-2 view [B·S, H·D]; the LSE is f32 [B·Hq, Sq]. kaio.h's "Attention"
//! section states masks, constraints and precision. [`AttentionDesc`]
//! converts through `kaio_attention_desc_init`.
use std::mem::size_of;
use std::ptr;

use kaio_sys as sys;

use crate::buffer::TensorView;
use crate::device::Device;
use crate::dtype::Dtype;
use crate::error::{check, Result};
use crate::ops::{dim, Op};
use crate::stream::Stream;

/// Which keys a query sees.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum AttentionMask {
    None,
    /// Bottom-right aligned (FlashAttention >= 2.1): key j <= i + Sk − Sq.
    Causal,
    /// Top-left aligned (PyTorch SDPA's is_causal, KAIO's): key j <= i.
    CausalTopLeft,
}

impl AttentionMask {
    pub fn raw(self) -> sys::kaio_attention_mask {
        match self {
            AttentionMask::None => sys::KAIO_ATTENTION_MASK_NONE,
            AttentionMask::Causal => sys::KAIO_ATTENTION_CAUSAL,
            AttentionMask::CausalTopLeft => sys::KAIO_ATTENTION_CAUSAL_TOP_LEFT,
        }
    }
}

/// `Auto` picks the kernels (`Decode` for Sq <= 16 and head dims 64, 128,
/// 256); `Sm80` forces the 64-row mma.sync kernels, `Sm80M128` the 128-row
/// forward (head dims up to 128), `Sm90` the wgmma + TMA forward (compute
/// capability 9.0, head dims 64 and 128) and `Decode` the split-key decode
/// forward (Sq <= 16; forward only: a prepared op owns its split
/// workspace, so its launches must not run on two streams at once).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum AttentionVariant {
    Auto,
    Sm80,
    Sm80M128,
    Sm90,
    Decode,
}

impl AttentionVariant {
    pub fn raw(self) -> sys::kaio_attention_variant {
        match self {
            AttentionVariant::Auto => sys::KAIO_ATTENTION_AUTO,
            AttentionVariant::Sm80 => sys::KAIO_ATTENTION_SM80,
            AttentionVariant::Sm80M128 => sys::KAIO_ATTENTION_SM80_M128,
            AttentionVariant::Sm90 => sys::KAIO_ATTENTION_SM90,
            AttentionVariant::Decode => sys::KAIO_ATTENTION_DECODE,
        }
    }
}

/// An attention's dtypes, mask and shape. `Default` is libkaio's: f16,
/// out/o dtype = dtype (`None`), no mask, `Auto`, deterministic, scale 0
/// (= 1/√D); the shape fields must be set.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct AttentionDesc {
    /// Q, K, V, dO: F16 or Bf16.
    pub dtype: Dtype,
    /// Forward: O; backward: dQ, dK, dV. None means `dtype`.
    pub out_dtype: Option<Dtype>,
    /// Backward only: O's dtype as passed in (`dtype` or F32). None: `dtype`.
    pub o_dtype: Option<Dtype>,
    pub mask: AttentionMask,
    pub variant: AttentionVariant,
    /// Backward only. `true` (default): bit-identical gradients on every
    /// run. `false`: the sm_90a backward from 4096 keys (any mask) adds dQ's
    /// f32 partial sums in whatever order its CTAs finish (up to about 1.1x
    /// faster on an H100), so dQ may differ in the last bits between runs.
    /// Elsewhere `false` changes nothing (no atomics, each gradient element
    /// written once).
    pub deterministic: bool,
    pub batch: usize,
    pub seq_q: usize,
    pub seq_k: usize,
    pub heads_q: usize,
    pub heads_kv: usize,
    pub head_dim: usize,
    /// 0 means 1/√D.
    pub softmax_scale: f32,
}

impl Default for AttentionDesc {
    fn default() -> AttentionDesc {
        AttentionDesc {
            dtype: Dtype::F16,
            out_dtype: None,
            o_dtype: None,
            mask: AttentionMask::None,
            variant: AttentionVariant::Auto,
            deterministic: true,
            batch: 0,
            seq_q: 0,
            seq_k: 0,
            heads_q: 0,
            heads_kv: 0,
            head_dim: 0,
            softmax_scale: 0.0,
        }
    }
}

impl AttentionDesc {
    pub fn to_raw(&self) -> Result<sys::kaio_attention_desc> {
        let mut d = sys::kaio_attention_desc::default();
        check(unsafe { sys::kaio_attention_desc_init(&mut d, size_of::<sys::kaio_attention_desc>()) })?;
        d.dtype = self.dtype.raw();
        d.out_dtype = self.out_dtype.map_or(0, Dtype::raw);
        d.o_dtype = self.o_dtype.map_or(0, Dtype::raw);
        d.mask = self.mask.raw();
        d.variant = self.variant.raw();
        d.deterministic = i32::from(self.deterministic);
        d.batch = dim(self.batch);
        d.seq_q = dim(self.seq_q);
        d.seq_k = dim(self.seq_k);
        d.heads_q = dim(self.heads_q);
        d.heads_kv = dim(self.heads_kv);
        d.head_dim = dim(self.head_dim);
        d.softmax_scale = self.softmax_scale;
        Ok(d)
    }
}

impl Op {
    /// A prepared attention forward. Launch tensors: `[Q, K, V, O, LSE]`;
    /// [`TensorView::none`] for LSE skips it.
    pub fn attention(device: &Device, desc: &AttentionDesc) -> Result<Op> {
        let d = desc.to_raw()?;
        let mut p = ptr::null_mut();
        check(unsafe { sys::kaio_op_create_attention(&mut p, device.as_raw(), &d) })?;
        Op::from_created(p, "attention")
    }

    /// A prepared attention backward (owns a B·Hq·Sq f32 workspace: do not
    /// launch one op concurrently on two streams). Launch tensors:
    /// `[dO, Q, K, V, O, LSE, dQ, dK, dV]`.
    pub fn attention_backward(device: &Device, desc: &AttentionDesc) -> Result<Op> {
        let d = desc.to_raw()?;
        let mut p = ptr::null_mut();
        check(unsafe { sys::kaio_op_create_attention_backward(&mut p, device.as_raw(), &d) })?;
        Op::from_created(p, "attention_backward")
    }
}

/// One-shot forward; `desc` gives the shape. `lse` None: not written.
pub fn attention(
    stream: &Stream,
    q: &TensorView<'_>,
    k: &TensorView<'_>,
    v: &TensorView<'_>,
    o: &TensorView<'_>,
    lse: Option<&TensorView<'_>>,
    desc: &AttentionDesc,
) -> Result<()> {
    let d = desc.to_raw()?;
    let lse = lse.map_or(ptr::null(), |v| v.as_raw() as *const sys::kaio_tensor);
    check(unsafe { sys::kaio_attention(stream.as_raw(), q.as_raw(), k.as_raw(), v.as_raw(), o.as_raw(), lse, &d) })
}

/// KAIO's rank-2 single-head attention: f16 q [Sq, D], k [Sk, D], v [Sk, D]
/// -> f32 out [Sq, D], scale 1/√D; `causal` masks top-left (key j <= i).
pub fn attention_tc(
    stream: &Stream,
    q: &TensorView<'_>,
    k: &TensorView<'_>,
    v: &TensorView<'_>,
    out: &TensorView<'_>,
    causal: bool,
) -> Result<()> {
    let f = if causal { sys::kaio_attention_tc_causal } else { sys::kaio_attention_tc };
    check(unsafe { f(stream.as_raw(), q.as_raw(), k.as_raw(), v.as_raw(), out.as_raw()) })
}

/// KAIO's f32 single-head FlashAttention (self-attention, one length S):
/// q, k, v [S, D] f32 (D <= 256) -> out [S, D] f32, scale 1/√D, f32 end to
/// end on the CUDA cores. `causal` masks top-left (key j <= i). With `lse`
/// (f32 [1, S]) it also writes each row's natural-log logsumexp, which
/// [`attention_flash_backward`] needs.
pub fn attention_flash(
    stream: &Stream,
    q: &TensorView<'_>,
    k: &TensorView<'_>,
    v: &TensorView<'_>,
    out: &TensorView<'_>,
    lse: Option<&TensorView<'_>>,
    causal: bool,
) -> Result<()> {
    let (s, q, k, v, out) = (stream.as_raw(), q.as_raw(), k.as_raw(), v.as_raw(), out.as_raw());
    check(unsafe {
        match (lse, causal) {
            (None, false) => sys::kaio_attention_flash(s, q, k, v, out),
            (None, true) => sys::kaio_attention_flash_causal(s, q, k, v, out),
            (Some(l), false) => sys::kaio_attention_flash_with_stats(s, q, k, v, out, l.as_raw()),
            (Some(l), true) => sys::kaio_attention_flash_causal_with_stats(s, q, k, v, out, l.as_raw()),
        }
    })
}

/// The gradients [`attention_flash_backward`] overwrites, each f32 [S, D].
#[derive(Copy, Clone, Debug)]
pub struct FlashGrads<'a> {
    pub dq: TensorView<'a>,
    pub dk: TensorView<'a>,
    pub dv: TensorView<'a>,
}

/// Backward of [`attention_flash`] (same `causal`): dq, dk, dv from dout, q,
/// k, v, the forward's out and lse. f32 end to end, deterministic.
#[allow(clippy::too_many_arguments)]
pub fn attention_flash_backward(
    stream: &Stream,
    dout: &TensorView<'_>,
    q: &TensorView<'_>,
    k: &TensorView<'_>,
    v: &TensorView<'_>,
    out: &TensorView<'_>,
    lse: &TensorView<'_>,
    grads: &FlashGrads<'_>,
    causal: bool,
) -> Result<()> {
    let f = if causal { sys::kaio_attention_flash_causal_backward } else { sys::kaio_attention_flash_backward };
    check(unsafe {
        f(
            stream.as_raw(),
            dout.as_raw(),
            q.as_raw(),
            k.as_raw(),
            v.as_raw(),
            out.as_raw(),
            lse.as_raw(),
            grads.dq.as_raw(),
            grads.dk.as_raw(),
            grads.dv.as_raw(),
        )
    })
}
