//! Token sampling on the GPU, candle-transformers' `LogitsProcessor` style:
//! logits `[B, V]` (or `[V]`) to token ids `[B]` (U32, as candle's argmax),
//! with no host synchronisation. Modes as candle-transformers' [`Sampling`]
//! plus min-p, repetition / presence / frequency penalties over the
//! previous tokens (on the GPU, where candle-transformers'
//! `apply_repeat_penalty` takes them from the host), and the chosen token's
//! probability and log-probability; one seed, advanced per call.
//!
//! As candle-transformers (and checked against its `LogitsProcessor` in
//! tests/gpu_sampling_candle.rs): `TopKThenTopP` measures top-p's mass over
//! the whole row, so it keeps the tokens both filters keep (libkaio's
//! `KAIO_SAMPLING_TOP_P_OF_ROW`; HF transformers and vLLM renormalise over
//! the top k first); top-p <= 0 or >= 1 samples the whole row (after
//! top-k, the k tokens); top-k 0 is an error.
//!
//! Differences from candle-transformers (libkaio's semantics, kaio.h's
//! "Token sampling"): greedy takes the LOWEST index on ties (candle's argmax
//! the last) and never a NaN logit (candle's may); top-k and top-p keep
//! every token tied with the boundary value (candle's sort keeps an
//! arbitrary k of them); the draw is Gumbel-max over Philox, so the same
//! seed gives other tokens than candle's `rand` (the distribution is the
//! same); a `+inf` logit always wins; a row of only NaN / `-inf` gives
//! token 0 / the first `-inf`, not an error.
use candle_core::backend::BackendStorage;
use candle_core::op::BackpropOp;
use candle_core::{bail, CudaStorage, DType, Device, Result, Shape, Storage, Tensor};

use crate::context::context;
use crate::error::KaioResultExt;
use crate::layout::{self, Matrix};
use crate::prep::{held, no_cpu};
use crate::storage::{alloc, kaio_dtype, read, write};

const OP: &str = "sample";

/// candle-transformers' `Sampling` modes (its `GumbelSoftmax` is `All`
/// here: libkaio always draws by Gumbel-max). A temperature <= 0 (or NaN)
/// samples greedily.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Sampling {
    ArgMax,
    All { temperature: f64 },
    TopK { k: usize, temperature: f64 },
    TopP { p: f64, temperature: f64 },
    TopKThenTopP { k: usize, p: f64, temperature: f64 },
}

/// Penalties over each row's previous tokens, applied before the
/// temperature (kaio.h, "Token sampling"): for each distinct previous token,
/// its logit is divided by `repetition` when positive, multiplied by it when
/// negative (candle-transformers' `apply_repeat_penalty`), then lowered by
/// `presence` plus `frequency` times its count (OpenAI's). `Default` is
/// off: 1, 0, 0.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Penalties {
    pub repetition: f32,
    pub presence: f32,
    pub frequency: f32,
}

impl Default for Penalties {
    fn default() -> Penalties {
        Penalties { repetition: 1.0, presence: 0.0, frequency: 0.0 }
    }
}

/// What [`LogitsSampler::sample_with`] returns, one entry per row: the
/// token (U32 `[B]`), and its probability and natural log (F32 `[B]`) under
/// the distribution it was drawn from (after penalties, temperature and
/// filters; greedy rows: 1 and 0).
#[derive(Clone, Debug)]
pub struct Sampled {
    pub tokens: Tensor,
    pub probs: Tensor,
    pub logprobs: Tensor,
}

/// Draws one token per row of logits on candle's stream.
#[derive(Clone, Debug)]
pub struct LogitsSampler {
    sampling: Sampling,
    min_p: Option<f64>,
    penalties: Option<Penalties>,
    seed: u64,
    /// Philox offset: one per call, so each call draws afresh.
    step: u64,
    params: DeviceParams,
}

/// The per-row parameter tensors of the last call, kept on its device so
/// that a decode loop uploads nothing: the fixed ones (temperature, top-k,
/// top-p, min-p, prev_lens, penalties) are made once per device, batch size
/// and context width, and the RNG words advance by one step on the device
/// (one candle add) instead of coming from the host. Tensors are immutable
/// and shared, so a cloned sampler stays independent.
#[derive(Clone, Debug, Default)]
struct DeviceParams {
    /// What the tensors were made for: the device, B and max_prev.
    made_for: Option<(Device, usize, usize)>,
    /// By launch slot (as `NAMES`); slots 4 (rng) and 5 (context) unused.
    fixed: [Option<Tensor>; 8],
    /// The RNG words `[B, 4]` of a step, and that step.
    rng: Option<(Tensor, u64)>,
    /// `[B, 4]`: 1 in column 2 (the offset's low word), 0 elsewhere.
    one_step: Option<Tensor>,
}

impl DeviceParams {
    /// Forgets every tensor unless they were made for `dev`, `b` and `max_prev`.
    fn keep_if(&mut self, dev: &Device, b: usize, max_prev: usize) {
        let same = matches!(&self.made_for, Some((d, kb, km)) if d.same_device(dev) && *kb == b && *km == max_prev);
        if !same {
            *self = DeviceParams { made_for: Some((dev.clone(), b, max_prev)), ..Default::default() };
        }
    }

    /// The fixed tensor of `slot`, made by `make` on first use.
    fn fixed(&mut self, slot: usize, make: impl FnOnce() -> Result<Tensor>) -> Result<Tensor> {
        if let Some(t) = &self.fixed[slot] {
            return Ok(t.clone());
        }
        let t = make()?;
        self.fixed[slot] = Some(t.clone());
        Ok(t)
    }

    /// The RNG words of `step` for `b` rows: row r draws with key `seed`
    /// and offset (step's low word, r), so rows never share draws. From the
    /// previous step's words plus one on the device where they are kept,
    /// else from the host.
    fn rng(&mut self, dev: &Device, b: usize, seed: u64, step: u64) -> Result<Tensor> {
        let words = match &self.rng {
            Some((t, s)) if *s == step => t.clone(),
            // Not across a wrap of the low word (candle's CPU add would panic).
            Some((t, s)) if s.wrapping_add(1) == step && step as u32 != 0 => {
                let one = match &self.one_step {
                    Some(o) => o.clone(),
                    None => Tensor::from_vec([0u32, 0, 1, 0].repeat(b), (b, 4), dev)?,
                };
                self.one_step = Some(one.clone());
                t.add(&one)?
            }
            _ => {
                let w = |x: u64| [x as u32, (x >> 32) as u32];
                let mut rng = Vec::with_capacity(4 * b);
                for r in 0..b as u32 {
                    rng.extend(w(seed));
                    rng.extend([w(step)[0], r]);
                }
                Tensor::from_vec(rng, (b, 4), dev)?
            }
        };
        self.rng = Some((words.clone(), step));
        Ok(words)
    }
}

impl LogitsSampler {
    /// As candle-transformers' `LogitsProcessor::new`: no temperature (or
    /// one below 1e-7) is greedy; else all tokens, or top-p where given.
    pub fn new(seed: u64, temperature: Option<f64>, top_p: Option<f64>) -> LogitsSampler {
        let sampling = match (temperature.filter(|&t| t >= 1e-7), top_p) {
            (None, _) => Sampling::ArgMax,
            (Some(temperature), None) => Sampling::All { temperature },
            (Some(temperature), Some(p)) => Sampling::TopP { p, temperature },
        };
        LogitsSampler::from_sampling(seed, sampling)
    }

    pub fn from_sampling(seed: u64, sampling: Sampling) -> LogitsSampler {
        LogitsSampler { sampling, min_p: None, penalties: None, seed, step: 0, params: DeviceParams::default() }
    }

    /// Also keeps only tokens with probability >= `min_p` times the most
    /// likely one's (after top-k / top-p); ignored when greedy.
    pub fn with_min_p(mut self, min_p: f64) -> LogitsSampler {
        self.min_p = Some(min_p);
        self.params = DeviceParams::default();
        self
    }

    /// Applies `penalties` over the previous tokens that each call of
    /// [`LogitsSampler::sample_with`] passes (greedy rows too).
    pub fn with_penalties(mut self, penalties: Penalties) -> LogitsSampler {
        self.penalties = Some(penalties);
        self.params = DeviceParams::default();
        self
    }

    /// One token id per row of `logits` (`[B, V]`, or `[V]` as one row; f32,
    /// f16 or bf16; rows may be strided): U32 `[B]` on the logits' device.
    /// Uploads the per-row parameters (a few bytes) on the first call for a
    /// device and batch size and keeps them there (later calls advance the
    /// RNG words on the device), allocates the outputs and launches once; each
    /// call advances the seed's offset, so repeated calls draw afresh and a
    /// sampler rebuilt with the same seed repeats them bit for bit. A
    /// sampler with penalties needs the previous tokens: use `sample_with`.
    pub fn sample(&mut self, logits: &Tensor) -> Result<Tensor> {
        if self.penalties.is_some() {
            bail!(
                "kaio-candle::{OP}: this sampler has penalties, which need each row's previous tokens; \
                 call sample_with(logits, Some(&context))"
            )
        }
        Ok(self.run(logits, None, false)?.0)
    }

    /// As [`LogitsSampler::sample`], with the previous tokens `context`
    /// (`[B, n]`, or `[n]` for one row; U32 or I32 on the logits' device;
    /// every column counts; ids outside `[0, V)` are ignored) for the
    /// sampler's penalties, and the chosen tokens' probabilities.
    pub fn sample_with(&mut self, logits: &Tensor, context: Option<&Tensor>) -> Result<Sampled> {
        if context.is_some() && self.penalties.is_none() {
            bail!("kaio-candle::{OP}: a context was given but the sampler has no penalties; add with_penalties(..)")
        }
        if context.is_none() && self.penalties.is_some() {
            bail!("kaio-candle::{OP}: this sampler has penalties; pass the previous tokens as the context")
        }
        let (tokens, probs) = self.run(logits, context, true)?;
        let (probs, logprobs) = probs.expect("asked for probabilities");
        Ok(Sampled { tokens, probs, logprobs })
    }

    fn run(&mut self, logits: &Tensor, context: Option<&Tensor>, with_probs: bool) -> Result<(Tensor, Option<(Tensor, Tensor)>)> {
        let dims = logits.dims();
        let b = match dims.len() {
            1 => 1,
            2 => dims[0],
            _ => bail!("kaio-candle::{OP}: 'logits' has shape {dims:?}; expected [B, V] or [V]"),
        };
        // candle-transformers' edges: top-p <= 0 or >= 1 samples the whole
        // row (after top-k: the k tokens); top-k 0 keeps nothing (an error).
        let top_p = |p: f64| (p > 0.0 && p < 1.0).then_some(p);
        let (temperature, k, p) = match self.sampling {
            Sampling::ArgMax => (None, None, None),
            Sampling::All { temperature } => (Some(temperature), None, None),
            Sampling::TopK { k, temperature } => (Some(temperature), Some(k), None),
            Sampling::TopP { p, temperature } => (Some(temperature), None, top_p(p)),
            Sampling::TopKThenTopP { k, p, temperature } => (Some(temperature), Some(k), top_p(p)),
        };
        if k == Some(0) {
            bail!("kaio-candle::{OP}: top-k is 0, which keeps no token; give k >= 1 (k >= V keeps every token)")
        }
        let dev = logits.device();
        // The context's width first: the kept tensors are made for it.
        let ctx = match (self.penalties, context) {
            (Some(_), Some(ctx)) => Some(match ctx.dims() {
                [n] if b == 1 => ctx.reshape((1, *n))?,
                [rows, _] if *rows == b => ctx.clone(),
                d => bail!("kaio-candle::{OP}: 'context' has shape {d:?} for {b} rows of logits; expected [{b}, n]"),
            }),
            _ => None,
        };
        // an empty context penalises nothing (libkaio wants >= 1 column)
        let ctx = ctx.filter(|c| c.dims()[1] > 0);
        let max_prev = ctx.as_ref().map_or(0, |c| c.dims()[1]);
        let kept = &mut self.params;
        kept.keep_if(dev, b, max_prev);
        let f32s = |x: f64| move || Tensor::from_vec(vec![x as f32; b], b, dev);
        let mut features = kaio::SamplingFeatures::GREEDY;
        let mut params: [Option<Tensor>; 8] = Default::default();
        if let Some(t) = temperature {
            features |= kaio::SamplingFeatures::RANDOM;
            params[0] = Some(kept.fixed(0, f32s(t))?);
            params[4] = Some(kept.rng(dev, b, self.seed, self.step)?);
            if let Some(k) = k {
                features |= kaio::SamplingFeatures::TOP_K;
                let k = k.min(i32::MAX as usize) as i32;
                params[1] = Some(kept.fixed(1, || Tensor::from_vec(vec![k; b], b, dev))?);
            }
            if let Some(p) = p {
                // candle's TopKThenTopP: top-p's mass over the whole row, so
                // the kept tokens are top-k's and top-p's in common.
                features |= kaio::SamplingFeatures::TOP_P | kaio::SamplingFeatures::TOP_P_OF_ROW;
                params[2] = Some(kept.fixed(2, f32s(p))?);
            }
            if let Some(m) = self.min_p {
                features |= kaio::SamplingFeatures::MIN_P;
                params[3] = Some(kept.fixed(3, f32s(m))?);
            }
        }
        if let (Some(pen), Some(ctx)) = (self.penalties, ctx) {
            features |= kaio::SamplingFeatures::PENALTIES;
            params[5] = Some(ctx);
            let lens = max_prev.min(i32::MAX as usize) as i32;
            params[6] = Some(kept.fixed(6, || Tensor::from_vec(vec![lens; b], b, dev))?);
            let per_row = [pen.repetition, pen.presence, pen.frequency].repeat(b);
            params[7] = Some(kept.fixed(7, || Tensor::from_vec(per_row, (b, 3), dev))?);
        }
        if with_probs {
            features |= kaio::SamplingFeatures::PROBS;
        }
        self.step += 1;
        launch(logits, b, max_prev, features, &params)
    }
}

const NAMES: [&str; 8] = ["temperature", "top_k", "top_p", "min_p", "rng", "context", "prev_lens", "penalties"];
const KINDS: [&[DType]; 8] = [
    &[DType::F32],
    &[DType::I32],
    &[DType::F32],
    &[DType::F32],
    &[DType::U32],
    &[DType::U32, DType::I32],
    &[DType::I32],
    &[DType::F32],
];

/// The launch: logits -> U32 `[B]` (and, with PROBS, F32 `[B]` probs and
/// logprobs), with the per-row tensors present for the features set.
fn launch(
    logits: &Tensor,
    b: usize,
    max_prev: usize,
    features: kaio::SamplingFeatures,
    params: &[Option<Tensor>; 8],
) -> Result<(Tensor, Option<(Tensor, Tensor)>)> {
    let (xs, xl) = logits.storage_and_layout();
    let x = match &*xs {
        Storage::Cuda(x) => x,
        _ => return no_cpu(OP),
    };
    let dtype = x.dtype();
    layout::dtype(OP, "logits", dtype, &[DType::F32, DType::F16, DType::BF16])?;
    let m = layout::matrix(OP, "logits", xl)?;
    let vocab = m.cols;
    let with_probs = features.contains(kaio::SamplingFeatures::PROBS);
    let dev = &x.device;
    let new = |dt| alloc(dev, dt, b);
    let mut outs: Vec<CudaStorage> =
        if with_probs { vec![new(DType::U32)?, new(DType::F32)?, new(DType::F32)?] } else { vec![new(DType::U32)?] };
    if b > 0 {
        if vocab == 0 {
            bail!("kaio-candle::{OP}: 'logits' is {:?}, an empty vocabulary; give at least one logit a row", xl.dims())
        }
        let guards: Vec<_> = params.iter().map(|p| p.as_ref().map(|t| t.storage_and_layout())).collect();
        let mut stores = Vec::new();
        for (i, g) in guards.iter().enumerate() {
            stores.push(match g {
                Some((s, l)) => Some((held(OP, NAMES[i], s, x, KINDS[i])?, layout::contiguous(OP, NAMES[i], l)?)),
                None => None,
            });
        }
        let kd = kaio_dtype(OP, dtype)?;
        let desc = kaio::SamplingDesc { dtype: kd, batch: b, vocab, max_prev, features };
        let ctx = context(dev)?;
        let key = vec![kd.raw() as i64, b as i64, vocab as i64, max_prev as i64, features.bits() as i64];
        let prepared = ctx.op((OP, key), |d| kaio::Op::sampling(d, &desc))?;
        let stream = dev.cuda_stream();
        let rl = read(&ctx, OP, x, &stream)?;
        let args = stores
            .iter()
            .map(|s| s.as_ref().map(|(c, m)| Ok((read(&ctx, OP, c, &stream)?, *m, c.dtype()))).transpose())
            .collect::<Result<Vec<_>>>()?;
        let ws = outs.iter_mut().map(|o| write(&ctx, OP, o, &stream)).collect::<Result<Vec<_>>>()?;
        let vec_of = |offset| Matrix { rows: 1, cols: b, row_stride: b, offset };
        let view = |i: usize| {
            args[i].as_ref().map(|(a, m, dt)| match i {
                // [B, 4] and [B, n]: the matrices as they are
                4 => a.view_as(m, if *dt == DType::U32 { kaio::Dtype::U32 } else { kaio::Dtype::I32 }),
                // candle's U32 ids as libkaio's I32: ids >= 2^31 turn negative, ignored as past V
                5 => a.view_as(m, kaio::Dtype::I32),
                7 => a.view_as(m, kaio::Dtype::F32),
                1 | 6 => a.view_as(&vec_of(m.offset), kaio::Dtype::I32),
                _ => a.view_as(&vec_of(m.offset), kaio::Dtype::F32),
            })
        };
        let out = |i: usize, dt| ws.get(i).map(|w| w.view_as(&vec_of(0), dt));
        let views = kaio::SamplingViews {
            temperature: view(0),
            top_k: view(1),
            top_p: view(2),
            min_p: view(3),
            rng: view(4),
            prev: view(5),
            prev_lens: view(6),
            penalties: view(7),
            probs: out(1, kaio::Dtype::F32),
            logprobs: out(2, kaio::Dtype::F32),
            ..kaio::SamplingViews::new(rl.view(&m), ws[0].view_as(&vec_of(0), kaio::Dtype::I32))
        };
        prepared.launch(&ctx.stream, &views.tensors()).kaio(OP)?;
    }
    let mut tensors = outs.into_iter().map(|o| Tensor::from_storage(Storage::Cuda(o), Shape::from(b), BackpropOp::none(), false));
    let tokens = tensors.next().expect("the tokens' storage");
    let probs = match (tensors.next(), tensors.next()) {
        (Some(p), Some(l)) => Some((p, l)),
        _ => None,
    };
    Ok((tokens, probs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(t: &Tensor) -> Vec<Vec<u32>> {
        t.to_vec2::<u32>().unwrap()
    }

    #[test]
    fn rng_words_advanced_in_place_equal_fresh_ones() -> Result<()> {
        let (dev, seed) = (Device::Cpu, 0x1234_5678_9abc_def0u64);
        let mut kept = DeviceParams::default();
        kept.keep_if(&dev, 3, 0);
        let first = kept.rng(&dev, 3, seed, u32::MAX as u64 - 1)?;
        assert_eq!(words(&first)[2], [0x9abc_def0, 0x1234_5678, u32::MAX - 1, 2]);
        // One step advanced by the add, then one across the low word's wrap
        // (made afresh), each against fresh words.
        for step in [u32::MAX as u64, u32::MAX as u64 + 1] {
            let advanced = kept.rng(&dev, 3, seed, step)?;
            let fresh = DeviceParams::default().rng(&dev, 3, seed, step)?;
            assert_eq!(words(&advanced), words(&fresh), "step {step}");
            assert_eq!(words(&advanced)[1], [0x9abc_def0, 0x1234_5678, step as u32, 1]);
        }
        // The same step again is the same tensor; a jump rebuilds.
        let again = kept.rng(&dev, 3, seed, u32::MAX as u64 + 1)?;
        assert_eq!(again.id(), kept.rng(&dev, 3, seed, u32::MAX as u64 + 1)?.id());
        assert_eq!(words(&kept.rng(&dev, 3, seed, 7)?)[0], [0x9abc_def0, 0x1234_5678, 7, 0]);
        Ok(())
    }

    #[test]
    fn fixed_tensors_are_kept_until_the_batch_or_width_changes() -> Result<()> {
        let dev = Device::Cpu;
        let mut kept = DeviceParams::default();
        kept.keep_if(&dev, 2, 0);
        let a = kept.fixed(0, || Tensor::new(&[1f32, 1.][..], &dev))?;
        let b = kept.fixed(0, || panic!("made twice"))?;
        assert_eq!(a.id(), b.id());
        kept.keep_if(&dev, 2, 0);
        assert_eq!(kept.fixed(0, || panic!("made twice"))?.id(), a.id());
        kept.keep_if(&dev, 2, 5); // a context width of 5: made afresh
        let c = kept.fixed(0, || Tensor::new(&[2f32, 2.][..], &dev))?;
        assert_ne!(c.id(), a.id());
        kept.keep_if(&dev, 3, 5);
        assert!(kept.fixed(0, || Tensor::new(&[3f32, 3., 3.][..], &dev))?.dims() == [3]);
        Ok(())
    }
}
