//! Token sampling on the GPU: logits `[B, V]` (F32, F16 or Bf16) to one I32
//! token id per row, with per-row parameters read from device vectors, so
//! one launch mixes greedy and sampled rows. Order: penalties, temperature,
//! top-k, top-p, min-p, then the draw (Gumbel-max over Philox4x32-10: the
//! same seed and offset give the same token bit for bit). kaio.h's "Token
//! sampling" section states every clamp and the special values.
//!
//! There is no one-shot call: build an [`Op::sampling`] and launch it with
//! [`SamplingViews::tensors`].
use std::mem::size_of;
use std::ops::{BitOr, BitOrAssign};
use std::ptr;

use kaio_sys as sys;

use crate::buffer::TensorView;
use crate::device::Device;
use crate::dtype::Dtype;
use crate::error::{check, Result};
use crate::ops::{dim, Op};

/// Which parts of the sampler an op runs (`KAIO_SAMPLING_*` bits); combine
/// with `|`. Empty (the default): every row greedy (argmax, lowest index on
/// ties). Each feature's views in [`SamplingViews`] must be present exactly
/// when its bit is set.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct SamplingFeatures(u32);

impl SamplingFeatures {
    pub const GREEDY: SamplingFeatures = SamplingFeatures(0);
    /// `temperature` and `rng`: rows with temperature > 0 are sampled.
    pub const RANDOM: SamplingFeatures = SamplingFeatures(sys::KAIO_SAMPLING_RANDOM);
    /// `top_k` (needs RANDOM).
    pub const TOP_K: SamplingFeatures = SamplingFeatures(sys::KAIO_SAMPLING_TOP_K);
    /// `top_p` (needs RANDOM).
    pub const TOP_P: SamplingFeatures = SamplingFeatures(sys::KAIO_SAMPLING_TOP_P);
    /// `min_p` (needs RANDOM).
    pub const MIN_P: SamplingFeatures = SamplingFeatures(sys::KAIO_SAMPLING_MIN_P);
    /// `prev`, `prev_lens`, `penalties`; the op owns an 8·B·V-byte workspace.
    pub const PENALTIES: SamplingFeatures = SamplingFeatures(sys::KAIO_SAMPLING_PENALTIES);
    /// `probs`, `logprobs`: the chosen token's probability and its log.
    pub const PROBS: SamplingFeatures = SamplingFeatures(sys::KAIO_SAMPLING_PROBS);
    /// With TOP_K and TOP_P: top-p's mass over the whole row, so the kept
    /// tokens are those both filters keep (candle's `TopKThenTopP`); without
    /// it top-p renormalises over top-k's tokens (HF transformers, vLLM).
    pub const TOP_P_OF_ROW: SamplingFeatures = SamplingFeatures(sys::KAIO_SAMPLING_TOP_P_OF_ROW);

    /// Any bits; libkaio rejects unknown ones at op creation.
    pub const fn from_bits(bits: u32) -> SamplingFeatures {
        SamplingFeatures(bits)
    }

    pub const fn bits(self) -> u32 {
        self.0
    }

    pub const fn contains(self, other: SamplingFeatures) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for SamplingFeatures {
    type Output = SamplingFeatures;
    fn bitor(self, rhs: SamplingFeatures) -> SamplingFeatures {
        SamplingFeatures(self.0 | rhs.0)
    }
}

impl BitOrAssign for SamplingFeatures {
    fn bitor_assign(&mut self, rhs: SamplingFeatures) {
        self.0 |= rhs.0;
    }
}

/// A sampler's logits dtype, sizes and features. `Default` is libkaio's:
/// F32, greedy, sizes 0 (`batch` and `vocab` must be set).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SamplingDesc {
    /// Logits: F32, F16 or Bf16.
    pub dtype: Dtype,
    /// B, 1 ..= 2^31 − 1.
    pub batch: usize,
    /// V, 1 ..= 2^31 − 1.
    pub vocab: usize,
    /// Columns of `prev` with [`SamplingFeatures::PENALTIES`], else 0.
    pub max_prev: usize,
    pub features: SamplingFeatures,
}

impl Default for SamplingDesc {
    fn default() -> SamplingDesc {
        SamplingDesc { dtype: Dtype::F32, batch: 0, vocab: 0, max_prev: 0, features: SamplingFeatures::GREEDY }
    }
}

impl SamplingDesc {
    pub fn to_raw(&self) -> Result<sys::kaio_sampling_desc> {
        let mut d = sys::kaio_sampling_desc::default();
        check(unsafe { sys::kaio_sampling_desc_init(&mut d, size_of::<sys::kaio_sampling_desc>()) })?;
        d.dtype = self.dtype.raw();
        d.batch = dim(self.batch);
        d.vocab = dim(self.vocab);
        d.max_prev = dim(self.max_prev);
        d.features = self.features.bits();
        Ok(d)
    }
}

impl Op {
    /// A prepared sampler. Launch tensors (12, in this order; see
    /// [`SamplingViews::tensors`]): `[logits, temperature, top_k, top_p,
    /// min_p, rng, prev, prev_lens, penalties, tokens, probs, logprobs]`,
    /// [`TensorView::none`] for every feature the desc leaves off. With
    /// PENALTIES the op owns a workspace: do not launch it on two streams
    /// at once. Launches allocate nothing and are graph-capturable.
    pub fn sampling(device: &Device, desc: &SamplingDesc) -> Result<Op> {
        let d = desc.to_raw()?;
        let mut p = ptr::null_mut();
        check(unsafe { sys::kaio_op_create_sampling(&mut p, device.as_raw(), &d) })?;
        Op::from_created(p, "sampling")
    }
}

/// The views of one [`Op::sampling`] launch. A "vector of B" is `[1, B]` or
/// `[B, 1]`. Each `Option` belongs to the feature its doc names: present
/// exactly when the desc has that feature.
#[derive(Copy, Clone, Debug)]
pub struct SamplingViews<'a> {
    /// `[B, V]` of the desc's dtype, any row stride.
    pub logits: TensorView<'a>,
    /// RANDOM: F32 vector of B (> 0 samples; 0, negative or NaN: greedy).
    pub temperature: Option<TensorView<'a>>,
    /// TOP_K: I32 vector of B (<= 0: off).
    pub top_k: Option<TensorView<'a>>,
    /// TOP_P: F32 vector of B (>= 1 or NaN: off).
    pub top_p: Option<TensorView<'a>>,
    /// MIN_P: F32 vector of B (<= 0 or NaN: off).
    pub min_p: Option<TensorView<'a>>,
    /// RANDOM: U32 or I32 `[B, 4]`: seed low, seed high, offset low, offset
    /// high. Advance the offset by 1 per step.
    pub rng: Option<TensorView<'a>>,
    /// PENALTIES: I32 `[B, max_prev]`, each row's previous tokens.
    pub prev: Option<TensorView<'a>>,
    /// PENALTIES: I32 vector of B, the used length of each `prev` row.
    pub prev_lens: Option<TensorView<'a>>,
    /// PENALTIES: F32 `[B, 3]`: repetition, presence, frequency.
    pub penalties: Option<TensorView<'a>>,
    /// Output: I32 vector of B.
    pub tokens: TensorView<'a>,
    /// PROBS output: F32 vector of B, the chosen token's probability.
    pub probs: Option<TensorView<'a>>,
    /// PROBS output: F32 vector of B, its natural log.
    pub logprobs: Option<TensorView<'a>>,
}

impl<'a> SamplingViews<'a> {
    /// Greedy: only the logits and the tokens.
    pub fn new(logits: TensorView<'a>, tokens: TensorView<'a>) -> SamplingViews<'a> {
        SamplingViews {
            logits,
            temperature: None,
            top_k: None,
            top_p: None,
            min_p: None,
            rng: None,
            prev: None,
            prev_lens: None,
            penalties: None,
            tokens,
            probs: None,
            logprobs: None,
        }
    }

    /// The launch list of [`Op::sampling`], absent views as
    /// [`TensorView::none`].
    pub fn tensors(&self) -> [TensorView<'a>; 12] {
        let o = |t: Option<TensorView<'a>>| t.unwrap_or(TensorView::none());
        [
            self.logits,
            o(self.temperature),
            o(self.top_k),
            o(self.top_p),
            o(self.min_p),
            o(self.rng),
            o(self.prev),
            o(self.prev_lens),
            o(self.penalties),
            self.tokens,
            o(self.probs),
            o(self.logprobs),
        ]
    }
}
