//! Rotary position embeddings, in place on Q `[T, Hq·D]` and K `[T, Hk·D]`
//! (F32, F16 or Bf16; any row stride, so both may be column ranges of one
//! fused QKV output) at I32 positions `[1, T]`. [`RopeDesc`] converts
//! through `kaio_rope_desc_init`; kaio.h's "Rotary position embeddings"
//! section gives the formulas, the scalings' HF sources and the precision.
use std::mem::size_of;
use std::ptr;

use kaio_sys as sys;

use crate::buffer::TensorView;
use crate::device::Device;
use crate::dtype::Dtype;
use crate::error::{check, Result};
use crate::ops::{dim, opt_raw, Op};
use crate::stream::Stream;

/// Which elements of a head form a rotated pair (i < rotary_dim / 2).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum RopeStyle {
    /// `(x[i], x[i + rotary_dim/2])`: GPT-NeoX, Llama, HF's `rotate_half`.
    HalfSplit,
    /// `(x[2i], x[2i + 1])`: GPT-J's `rotate_every_two`.
    Interleaved,
}

impl RopeStyle {
    pub fn raw(self) -> sys::kaio_rope_style {
        match self {
            RopeStyle::HalfSplit => sys::KAIO_ROPE_HALF_SPLIT,
            RopeStyle::Interleaved => sys::KAIO_ROPE_INTERLEAVED,
        }
    }
}

/// How the inverse frequencies `1 / θ^(2i/r)` are rescaled, as HF
/// transformers' `modeling_rope_utils.py` does; each uses the [`RopeDesc`]
/// fields its doc names and ignores the rest.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum RopeScaling {
    /// Unscaled.
    None,
    /// Divided by `factor`.
    Linear,
    /// `factor`, `low_freq_factor`, `high_freq_factor`,
    /// `original_max_position_embeddings`.
    Llama3,
    /// `factor`, `original_max_position_embeddings`, `beta_fast`,
    /// `beta_slow`, `truncate`, `attention_factor`, `mscale`,
    /// `mscale_all_dim`.
    Yarn,
}

impl RopeScaling {
    pub fn raw(self) -> sys::kaio_rope_scaling {
        match self {
            RopeScaling::None => sys::KAIO_ROPE_SCALING_NONE,
            RopeScaling::Linear => sys::KAIO_ROPE_SCALING_LINEAR,
            RopeScaling::Llama3 => sys::KAIO_ROPE_SCALING_LLAMA3,
            RopeScaling::Yarn => sys::KAIO_ROPE_SCALING_YARN,
        }
    }
}

/// A RoPE's layout and frequencies. `Default` is libkaio's: half split,
/// Bf16, no scaling, θ 10000, factor 1, low/high freq factors 1 / 4,
/// original length 8192, β fast/slow 32 / 1, attention factor, mscale and
/// mscale_all_dim 0 (HF's default / unset), truncate on; the heads and
/// `head_dim` must be set.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct RopeDesc {
    pub style: RopeStyle,
    /// Q and K: F32, F16 or Bf16.
    pub dtype: Dtype,
    pub scaling: RopeScaling,
    /// Hq; 0: Q is always absent.
    pub heads_q: usize,
    /// Hk; 0: K is always absent.
    pub heads_k: usize,
    pub head_dim: usize,
    /// Even, 2..=head_dim (and <= 512); 0 means `head_dim`. Elements past it
    /// are left as they are (partial rotary).
    pub rotary_dim: usize,
    /// Base θ, finite and > 1.
    pub theta: f64,
    pub factor: f64,
    pub low_freq_factor: f64,
    pub high_freq_factor: f64,
    pub original_max_position_embeddings: usize,
    pub beta_fast: f64,
    pub beta_slow: f64,
    /// 0: HF's default from `factor`, `mscale` and `mscale_all_dim`.
    pub attention_factor: f64,
    /// 0: unset.
    pub mscale: f64,
    /// 0: unset.
    pub mscale_all_dim: f64,
    /// Floor / ceil the YaRN correction range, as HF does by default.
    pub truncate: bool,
}

impl Default for RopeDesc {
    fn default() -> RopeDesc {
        RopeDesc {
            style: RopeStyle::HalfSplit,
            dtype: Dtype::Bf16,
            scaling: RopeScaling::None,
            heads_q: 0,
            heads_k: 0,
            head_dim: 0,
            rotary_dim: 0,
            theta: 10000.0,
            factor: 1.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: 8192,
            beta_fast: 32.0,
            beta_slow: 1.0,
            attention_factor: 0.0,
            mscale: 0.0,
            mscale_all_dim: 0.0,
            truncate: true,
        }
    }
}

impl RopeDesc {
    pub fn to_raw(&self) -> Result<sys::kaio_rope_desc> {
        let mut d = sys::kaio_rope_desc::default();
        check(unsafe { sys::kaio_rope_desc_init(&mut d, size_of::<sys::kaio_rope_desc>()) })?;
        d.style = self.style.raw();
        d.dtype = self.dtype.raw();
        d.scaling = self.scaling.raw();
        d.heads_q = dim(self.heads_q);
        d.heads_k = dim(self.heads_k);
        d.head_dim = dim(self.head_dim);
        d.rotary_dim = dim(self.rotary_dim);
        d.theta = self.theta;
        d.factor = self.factor;
        d.low_freq_factor = self.low_freq_factor;
        d.high_freq_factor = self.high_freq_factor;
        d.original_max_position_embeddings = dim(self.original_max_position_embeddings);
        d.beta_fast = self.beta_fast;
        d.beta_slow = self.beta_slow;
        d.attention_factor = self.attention_factor;
        d.mscale = self.mscale;
        d.mscale_all_dim = self.mscale_all_dim;
        d.truncate = self.truncate as i32;
        Ok(d)
    }
}

impl Op {
    /// A prepared RoPE (the inverse-frequency table is computed here, once).
    /// Launch tensors: `[Q, K, positions (I32 1 x T)]`, any T; Q or K (not
    /// both) may be [`TensorView::none`], and must be where its heads are 0.
    /// No workspace: launches may run concurrently on disjoint Q and K.
    pub fn rope(device: &Device, desc: &RopeDesc) -> Result<Op> {
        let d = desc.to_raw()?;
        let mut p = ptr::null_mut();
        check(unsafe { sys::kaio_op_create_rope(&mut p, device.as_raw(), &d) })?;
        Op::from_created(p, "rope")
    }

    /// RoPE fused with the paged KV-cache write: Q rotated in place, K rotated
    /// on its way into the K cache at its slot (K itself only read), V copied
    /// to the V cache. Launch tensors: `[Q, K, V, positions (I32 1 x T),
    /// slot_mapping (I32 1 x T), k_cache, v_cache]`; Q may be
    /// [`TensorView::none`], V and v_cache both or neither. A negative slot
    /// skips the token's K and V; a slot past the cache is skipped and
    /// reported by the next [`Stream::synchronize`] as `OUT_OF_BOUNDS`.
    pub fn rope_kv_cache_write(device: &Device, desc: &RopeDesc) -> Result<Op> {
        let d = desc.to_raw()?;
        let mut p = ptr::null_mut();
        check(unsafe { sys::kaio_op_create_rope_kv_cache_write(&mut p, device.as_raw(), &d) })?;
        Op::from_created(p, "rope_kv_cache_write")
    }
}

/// The caches [`rope_kv_cache_write`] writes: `[num_pages · page_size,
/// heads_k · head_dim]` each, `v_cache` None for a K-only cache.
#[derive(Copy, Clone, Debug)]
pub struct KvCaches<'a, 'b> {
    pub k_cache: &'a TensorView<'b>,
    pub v_cache: Option<&'a TensorView<'b>>,
}

#[allow(clippy::too_many_arguments)]
/// One-shot RoPE + KV-cache write (see [`Op::rope_kv_cache_write`]); `v` must
/// be Some exactly when `caches.v_cache` is.
pub fn rope_kv_cache_write(
    stream: &Stream,
    q: Option<&TensorView<'_>>,
    k: &TensorView<'_>,
    v: Option<&TensorView<'_>>,
    positions: &TensorView<'_>,
    slot_mapping: &TensorView<'_>,
    caches: KvCaches<'_, '_>,
    desc: &RopeDesc,
) -> Result<()> {
    let d = desc.to_raw()?;
    check(unsafe {
        sys::kaio_rope_kv_cache_write(
            stream.as_raw(),
            opt_raw(q),
            k.as_raw(),
            opt_raw(v),
            positions.as_raw(),
            slot_mapping.as_raw(),
            caches.k_cache.as_raw(),
            opt_raw(caches.v_cache),
            &d,
        )
    })
}

/// One-shot RoPE, in place on `q` and `k` (see [`Op::rope`]); either may be
/// None (skipped), not both. Computes the table on the host each call.
pub fn rope(
    stream: &Stream,
    q: Option<&TensorView<'_>>,
    k: Option<&TensorView<'_>>,
    positions: &TensorView<'_>,
    desc: &RopeDesc,
) -> Result<()> {
    let d = desc.to_raw()?;
    check(unsafe { sys::kaio_rope(stream.as_raw(), opt_raw(q), opt_raw(k), positions.as_raw(), &d) })
}
