//! Attention on variable-length (packed) batches, FlashAttention's varlen
//! layout: B sequences back to back, no padding. Q and O are `[total_q,
//! Hq·D]`, K and V `[total_k, Hkv·D]`; `cu_seqlens_q` / `cu_seqlens_k` are
//! I32 `[1, B+1]` prefix sums (first 0); the LSE is f32 `[Hq, total_q]`.
//! Each sequence is attention on its own (GQA: query head h reads KV head
//! h / (Hq / Hkv)); masks are per sequence. kaio.h's "Attention on
//! variable-length batches" section states the rules for bad cu_seqlens.
use std::mem::size_of;
use std::ptr;

use kaio_sys as sys;

use crate::attention::{AttentionMask, AttentionVariant};
use crate::buffer::TensorView;
use crate::device::Device;
use crate::dtype::Dtype;
use crate::error::{check, Result};
use crate::ops::{dim, opt_raw, Op};
use crate::stream::Stream;

/// A varlen attention's dtypes, mask and sizes. `Default` is libkaio's:
/// f16, out/o dtype = dtype (`None`), no mask, `Auto`, scale 0 (= 1/√D);
/// the size fields must be set.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct AttentionVarlenDesc {
    /// Q, K, V, dO: F16 or Bf16.
    pub dtype: Dtype,
    /// Forward: O; backward: dQ, dK, dV. None means `dtype`.
    pub out_dtype: Option<Dtype>,
    /// Backward only: O's dtype as passed in (`dtype` or F32). None: `dtype`.
    pub o_dtype: Option<Dtype>,
    /// Per sequence: `Causal` is bottom-right aligned.
    pub mask: AttentionMask,
    /// `Decode` does not apply.
    pub variant: AttentionVariant,
    /// B: the cu_seqlens have B + 1 entries.
    pub batch: usize,
    /// Host bounds on every len_q / len_k (they size the grid).
    pub max_seqlen_q: usize,
    pub max_seqlen_k: usize,
    /// Rows of Q (and O), of K and V.
    pub total_q: usize,
    pub total_k: usize,
    pub heads_q: usize,
    pub heads_kv: usize,
    pub head_dim: usize,
    /// 0 means 1/√D.
    pub softmax_scale: f32,
}

impl Default for AttentionVarlenDesc {
    fn default() -> AttentionVarlenDesc {
        AttentionVarlenDesc {
            dtype: Dtype::F16,
            out_dtype: None,
            o_dtype: None,
            mask: AttentionMask::None,
            variant: AttentionVariant::Auto,
            batch: 0,
            max_seqlen_q: 0,
            max_seqlen_k: 0,
            total_q: 0,
            total_k: 0,
            heads_q: 0,
            heads_kv: 0,
            head_dim: 0,
            softmax_scale: 0.0,
        }
    }
}

impl AttentionVarlenDesc {
    pub fn to_raw(&self) -> Result<sys::kaio_attention_varlen_desc> {
        let mut d = sys::kaio_attention_varlen_desc::default();
        check(unsafe { sys::kaio_attention_varlen_desc_init(&mut d, size_of::<sys::kaio_attention_varlen_desc>()) })?;
        d.dtype = self.dtype.raw();
        d.out_dtype = self.out_dtype.map_or(0, Dtype::raw);
        d.o_dtype = self.o_dtype.map_or(0, Dtype::raw);
        d.mask = self.mask.raw();
        d.variant = self.variant.raw();
        d.batch = dim(self.batch);
        d.max_seqlen_q = dim(self.max_seqlen_q);
        d.max_seqlen_k = dim(self.max_seqlen_k);
        d.total_q = dim(self.total_q);
        d.total_k = dim(self.total_k);
        d.heads_q = dim(self.heads_q);
        d.heads_kv = dim(self.heads_kv);
        d.head_dim = dim(self.head_dim);
        d.softmax_scale = self.softmax_scale;
        Ok(d)
    }
}

impl Op {
    /// A prepared varlen forward. Launch tensors: `[Q, K, V, cu_seqlens_q,
    /// cu_seqlens_k, O, LSE]`; [`TensorView::none`] for LSE skips it.
    /// Launches may run from several threads.
    pub fn attention_varlen(device: &Device, desc: &AttentionVarlenDesc) -> Result<Op> {
        let d = desc.to_raw()?;
        let mut p = ptr::null_mut();
        check(unsafe { sys::kaio_op_create_attention_varlen(&mut p, device.as_raw(), &d) })?;
        Op::from_created(p, "attention_varlen")
    }

    /// A prepared varlen backward (sm_80 kernels, deterministic; owns an
    /// Hq·total_q f32 workspace: do not launch one op on two streams at
    /// once). Launch tensors: `[dO, Q, K, V, cu_seqlens_q, cu_seqlens_k, O,
    /// LSE, dQ, dK, dV]`; every sequence's rows of dQ, dK, dV are
    /// overwritten, rows of no sequence left as they are.
    pub fn attention_varlen_backward(device: &Device, desc: &AttentionVarlenDesc) -> Result<Op> {
        let d = desc.to_raw()?;
        let mut p = ptr::null_mut();
        check(unsafe { sys::kaio_op_create_attention_varlen_backward(&mut p, device.as_raw(), &d) })?;
        Op::from_created(p, "attention_varlen_backward")
    }
}

/// One-shot varlen forward (see [`Op::attention_varlen`]); `desc` gives
/// the sizes. `lse` None: not written.
#[allow(clippy::too_many_arguments)]
pub fn attention_varlen(
    stream: &Stream,
    q: &TensorView<'_>,
    k: &TensorView<'_>,
    v: &TensorView<'_>,
    cu_seqlens_q: &TensorView<'_>,
    cu_seqlens_k: &TensorView<'_>,
    o: &TensorView<'_>,
    lse: Option<&TensorView<'_>>,
    desc: &AttentionVarlenDesc,
) -> Result<()> {
    let d = desc.to_raw()?;
    check(unsafe {
        sys::kaio_attention_varlen(
            stream.as_raw(),
            q.as_raw(),
            k.as_raw(),
            v.as_raw(),
            cu_seqlens_q.as_raw(),
            cu_seqlens_k.as_raw(),
            o.as_raw(),
            opt_raw(lse),
            &d,
        )
    })
}
