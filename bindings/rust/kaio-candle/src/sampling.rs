//! Token sampling on the GPU, candle-transformers' `LogitsProcessor` style:
//! logits `[B, V]` (or `[V]`) to token ids `[B]` (U32, as candle's argmax),
//! with no host synchronisation. Modes as candle-transformers' [`Sampling`]
//! plus min-p; one seed, advanced per call.
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
use candle_core::{bail, CudaStorage, CustomOp1, DType, Layout, Result, Shape, Tensor};

use crate::context::context;
use crate::error::KaioResultExt;
use crate::layout::{self, Matrix};
use crate::prep::{held, no_cpu_fwd};
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

/// Draws one token per row of logits on candle's stream.
#[derive(Clone, Debug)]
pub struct LogitsSampler {
    sampling: Sampling,
    min_p: Option<f64>,
    seed: u64,
    /// Philox offset: one per call, so each call draws afresh.
    step: u64,
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
        LogitsSampler { sampling, min_p: None, seed, step: 0 }
    }

    /// Also keeps only tokens with probability >= `min_p` times the most
    /// likely one's (after top-k / top-p); ignored when greedy.
    pub fn with_min_p(mut self, min_p: f64) -> LogitsSampler {
        self.min_p = Some(min_p);
        self
    }

    /// One token id per row of `logits` (`[B, V]`, or `[V]` as one row; f32,
    /// f16 or bf16; rows may be strided): U32 `[B]` on the logits' device.
    /// Uploads the per-row parameters (a few bytes) and launches once; each
    /// call advances the seed's offset, so repeated calls draw afresh and a
    /// sampler rebuilt with the same seed repeats them bit for bit.
    pub fn sample(&mut self, logits: &Tensor) -> Result<Tensor> {
        let dims = logits.dims();
        let b = match dims.len() {
            1 => 1,
            2 => dims[0],
            _ => bail!("kaio-candle::{OP}: 'logits' has shape {dims:?}; expected [B, V] or [V]"),
        };
        let (temperature, k, p) = match self.sampling {
            Sampling::ArgMax => (None, None, None),
            Sampling::All { temperature } => (Some(temperature), None, None),
            Sampling::TopK { k, temperature } => (Some(temperature), Some(k), None),
            Sampling::TopP { p, temperature } => (Some(temperature), None, Some(p)),
            Sampling::TopKThenTopP { k, p, temperature } => (Some(temperature), Some(k), Some(p)),
        };
        let dev = logits.device();
        let f32s = |x: f64| Tensor::from_vec(vec![x as f32; b], b, dev);
        let mut features = kaio::SamplingFeatures::GREEDY;
        let mut params: [Option<Tensor>; 5] = Default::default();
        if let Some(t) = temperature {
            features |= kaio::SamplingFeatures::RANDOM;
            params[0] = Some(f32s(t)?);
            // Row r draws with counter (step, r): rows never share draws.
            let words = |x: u64| [x as u32, (x >> 32) as u32];
            let mut rng = Vec::with_capacity(4 * b);
            for r in 0..b as u64 {
                rng.extend(words(self.seed));
                rng.extend([words(self.step)[0], r as u32]);
            }
            params[4] = Some(Tensor::from_vec(rng, (b, 4), dev)?);
            if let Some(k) = k {
                features |= kaio::SamplingFeatures::TOP_K;
                params[1] = Some(Tensor::from_vec(vec![k.min(i32::MAX as usize) as i32; b], b, dev)?);
            }
            if let Some(p) = p {
                features |= kaio::SamplingFeatures::TOP_P;
                params[2] = Some(f32s(p)?);
            }
            if let Some(m) = self.min_p {
                features |= kaio::SamplingFeatures::MIN_P;
                params[3] = Some(f32s(m)?);
            }
        }
        self.step += 1;
        logits.apply_op1_no_bwd(&SampleOp { features, params })
    }
}

/// The launch: logits -> U32 `[B]`, with the per-row vectors present for
/// the features set (temperature, top_k, top_p, min_p, rng).
struct SampleOp {
    features: kaio::SamplingFeatures,
    params: [Option<Tensor>; 5],
}

impl CustomOp1 for SampleOp {
    fn name(&self) -> &'static str {
        "kaio-sample"
    }
    no_cpu_fwd!(1, "sample");
    fn cuda_fwd(&self, x: &CudaStorage, xl: &Layout) -> Result<(CudaStorage, Shape)> {
        let dtype = x.dtype();
        layout::dtype(OP, "logits", dtype, &[DType::F32, DType::F16, DType::BF16])?;
        let m = layout::matrix(OP, "logits", xl)?;
        let (b, vocab) = (m.rows, m.cols);
        let shape = Shape::from(b);
        let dev = &x.device;
        let mut out = alloc(dev, DType::U32, b)?;
        if b == 0 {
            return Ok((out, shape));
        }
        if vocab == 0 {
            bail!("kaio-candle::{OP}: 'logits' is {:?}, an empty vocabulary; give at least one logit a row", xl.dims())
        }
        const NAMES: [&str; 5] = ["temperature", "top_k", "top_p", "min_p", "rng"];
        const KINDS: [DType; 5] = [DType::F32, DType::I32, DType::F32, DType::F32, DType::U32];
        let guards: Vec<_> = self.params.iter().map(|p| p.as_ref().map(|t| t.storage_and_layout())).collect();
        let mut stores = Vec::new();
        for (i, g) in guards.iter().enumerate() {
            if let Some((s, l)) = g {
                stores.push(Some((held(OP, NAMES[i], s, x, &[KINDS[i]])?, layout::contiguous(OP, NAMES[i], l)?)));
            } else {
                stores.push(None);
            }
        }
        let kd = kaio_dtype(OP, dtype)?;
        let desc = kaio::SamplingDesc { dtype: kd, batch: b, vocab, max_prev: 0, features: self.features };
        let ctx = context(dev)?;
        let key = vec![kd.raw() as i64, b as i64, vocab as i64, self.features.bits() as i64];
        let prepared = ctx.op((OP, key), |d| kaio::Op::sampling(d, &desc))?;
        let stream = dev.cuda_stream();
        let rl = read(&ctx, OP, x, &stream)?;
        let args = stores
            .iter()
            .map(|s| s.as_ref().map(|(c, m)| Ok((read(&ctx, OP, c, &stream)?, *m))).transpose())
            .collect::<Result<Vec<_>>>()?;
        let ro = write(&ctx, OP, &mut out, &stream)?;
        let vec_of = |m: &Matrix| Matrix { rows: 1, cols: b, row_stride: b, offset: m.offset };
        let view = |i: usize| {
            args[i].as_ref().map(|(a, m)| {
                if i == 4 {
                    a.view_as(m, kaio::Dtype::U32)
                } else {
                    a.view_as(&vec_of(m), if i == 1 { kaio::Dtype::I32 } else { kaio::Dtype::F32 })
                }
            })
        };
        let tokens = Matrix { rows: 1, cols: b, row_stride: b, offset: 0 };
        let views = kaio::SamplingViews {
            temperature: view(0),
            top_k: view(1),
            top_p: view(2),
            min_p: view(3),
            rng: view(4),
            ..kaio::SamplingViews::new(rl.view(&m), ro.view_as(&tokens, kaio::Dtype::I32))
        };
        prepared.launch(&ctx.stream, &views.tensors()).kaio(OP)?;
        drop((rl, args, ro));
        Ok((out, shape))
    }
}
