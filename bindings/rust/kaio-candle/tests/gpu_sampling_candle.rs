//! kaio-candle's `LogitsSampler` against the peer it stands in for,
//! candle-transformers' `LogitsProcessor`: greedy token for token, and for
//! each sampling mode the same kept tokens and frequencies that pass a
//! two-sample chi-square test. The draws cannot match one by one (candle
//! draws with `rand`, libkaio by Gumbel-max over Philox), so the
//! distributions are compared. Skipped, saying why, without a CUDA device.
#![cfg(feature = "cuda")]

use candle_core::{DType, Device, Result, Tensor};
use candle_transformers::generation::{LogitsProcessor, Sampling as Peer};
use kaio_candle::{LogitsSampler, Sampling};

mod common;
use common::{gpu, Rng};

/// Draws per mode and side: a kept token of probability 0.02 then shows up
/// ~400 times, and one kept by only one side is certain to show.
const DRAWS: usize = 20_000;

/// Ten logits, not in index order, with softmax(x / 1) about
/// .305 .205 .152 .112 .083 .056 .041 .025 .015 .006 from the largest down:
/// top-k 5 keeps .857 of the mass, so candle's TopKThenTopP (top-p over the
/// whole row's mass) and a top-p renormalised over the top 5 keep different
/// sets at p 0.7 and 0.9.
const LOGITS: [f32; 10] = [0.3, 2.0, -1.0, 1.3, 0.0, 1.6, -2.0, 0.7, 1.0, -0.5];

fn peer_mode(s: Sampling) -> Peer {
    match s {
        Sampling::ArgMax => Peer::ArgMax,
        Sampling::All { temperature } => Peer::All { temperature },
        Sampling::TopK { k, temperature } => Peer::TopK { k, temperature },
        Sampling::TopP { p, temperature } => Peer::TopP { p, temperature },
        Sampling::TopKThenTopP { k, p, temperature } => Peer::TopKThenTopP { k, p, temperature },
    }
}

/// The chi-square quantile for p = 1e-6 with `df` degrees of freedom
/// (Wilson-Hilferty, z = 4.75).
fn chi_square_critical(df: f64) -> f64 {
    let z = 4.75;
    let a = 2.0 / (9.0 * df);
    df * (1.0 - a + z * a.sqrt()).powi(3)
}

/// Counts per token of DRAWS draws by each side from `row` (`dtype`).
fn counts(dev: &Device, row: &[f32], dtype: DType, mode: Sampling) -> Result<(Vec<u64>, Vec<u64>)> {
    let v = row.len();
    let cpu = Tensor::new(row, &Device::Cpu)?.to_dtype(dtype)?;
    let mut peer = LogitsProcessor::from_sampling(11, peer_mode(mode));
    let mut theirs = vec![0u64; v];
    for _ in 0..DRAWS {
        theirs[peer.sample(&cpu)? as usize] += 1;
    }
    // One launch of DRAWS identical rows: each row draws with its own counter.
    let rows = cpu.to_device(dev)?.unsqueeze(0)?.broadcast_as((DRAWS, v))?.contiguous()?;
    let mut ours = vec![0u64; v];
    for t in LogitsSampler::from_sampling(11, mode).sample(&rows)?.to_vec1::<u32>()? {
        ours[t as usize] += 1;
    }
    Ok((ours, theirs))
}

#[test]
fn sampling_distributions_match_candle_transformers() -> Result<()> {
    let Some(dev) = gpu("sampling_distributions_match_candle_transformers") else { return Ok(()) };
    let modes = [
        Sampling::All { temperature: 1.0 },
        Sampling::All { temperature: 0.5 },
        Sampling::TopK { k: 4, temperature: 1.2 },
        Sampling::TopK { k: 10, temperature: 1.0 },
        Sampling::TopP { p: 0.6, temperature: 1.0 },
        Sampling::TopP { p: 0.9, temperature: 0.8 },
        // candle: p <= 0 or >= 1 samples the whole row.
        Sampling::TopP { p: 0.0, temperature: 1.0 },
        Sampling::TopP { p: 1.0, temperature: 1.0 },
        Sampling::TopKThenTopP { k: 5, p: 0.5, temperature: 1.0 },
        // Over the whole row's mass (candle) these keep 4 and 5 tokens;
        // renormalised over the top 5 they would keep 3 and 4.
        Sampling::TopKThenTopP { k: 5, p: 0.7, temperature: 1.0 },
        Sampling::TopKThenTopP { k: 5, p: 0.9, temperature: 1.0 },
        // candle: top-p <= 0 after top-k samples the k tokens.
        Sampling::TopKThenTopP { k: 3, p: 0.0, temperature: 1.0 },
    ];
    for dtype in [DType::F32, DType::BF16] {
        for mode in modes {
            let (ours, theirs) = counts(&dev, &LOGITS, dtype, mode)?;
            let what = format!("{dtype:?} {mode:?}: kaio {ours:?}, candle {theirs:?}");
            let kept = |c: &[u64]| c.iter().map(|&n| n > 0).collect::<Vec<_>>();
            assert_eq!(kept(&ours), kept(&theirs), "kept tokens differ; {what}");
            // Two samples of equal size: sum (a - b)^2 / (a + b) over the
            // tokens either drew, with (tokens - 1) degrees of freedom.
            let (mut chi, mut cats) = (0.0, 0usize);
            for (&a, &b) in ours.iter().zip(&theirs) {
                if a + b > 0 {
                    chi += (a as f64 - b as f64).powi(2) / (a + b) as f64;
                    cats += 1;
                }
            }
            if cats > 1 {
                let crit = chi_square_critical((cats - 1) as f64);
                assert!(chi < crit, "chi-square {chi:.1} >= {crit:.1}; {what}");
            }
        }
    }
    Ok(())
}

#[test]
fn greedy_matches_candle_transformers_token_for_token() -> Result<()> {
    let Some(dev) = gpu("greedy_matches_candle_transformers_token_for_token") else { return Ok(()) };
    let (b, v) = (48usize, 5003usize);
    let mut rng = Rng(0x5eed);
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let values: Vec<f32> = (0..b * v).map(|_| 3.0 * rng.normal()).collect();
        let cpu = Tensor::from_vec(values, (b, v), &Device::Cpu)?.to_dtype(dtype)?;
        let ours = LogitsSampler::new(3, None, None).sample(&cpu.to_device(&dev)?)?.to_vec1::<u32>()?;
        let rounded = cpu.to_dtype(DType::F32)?.to_vec2::<f32>()?;
        let mut peer = LogitsProcessor::new(3, None, None);
        let mut compared = 0;
        for (r, row) in rounded.iter().enumerate() {
            let top = row.iter().cloned().fold(f32::MIN, f32::max);
            // Tied maxima: libkaio takes the lowest index, candle the last
            // (a documented difference); compare the rest.
            if row.iter().filter(|&&x| x == top).count() > 1 {
                continue;
            }
            let theirs = peer.sample(&cpu.get(r)?)?;
            assert_eq!(ours[r], theirs, "{dtype:?} row {r}");
            compared += 1;
        }
        assert!(compared >= b / 2, "{dtype:?}: only {compared} of {b} rows without a tied maximum");
    }
    Ok(())
}
