//! One Llama-style decoder block (RMSNorm, GQA attention with RoPE, SwiGLU
//! MLP, residuals) with random weights, run twice on the same inputs: with
//! candle's own ops, and with kaio-candle's (RMSNorm, tensor-core matmuls,
//! FlashAttention, the fused SiLU gate). Prints both times and the
//! difference of the outputs, and fails if they disagree.
//!
//!     candle_llama_block [--seq S] [--batch B]
#[path = "../../../bench/candle/src/timing.rs"]
#[allow(dead_code)] // the L2 rotation helpers: the block has no inputs to rotate
mod timing;

use candle_core::{DType, Device, Result, Tensor, D};

const HIDDEN: usize = 4096;
const HEADS: usize = 32;
const KV_HEADS: usize = 8;
const HEAD_DIM: usize = 128;
const FFN: usize = 14336;
const EPS: f64 = 1e-5;
const DTYPE: DType = DType::BF16;

struct Weights {
    attn_norm: Tensor,
    wq: Tensor, // [HIDDEN, HEADS * HEAD_DIM], x · W
    wk: Tensor,
    wv: Tensor,
    wo: Tensor,
    mlp_norm: Tensor,
    w_gate: Tensor,
    w_up: Tensor,
    w_down: Tensor,
}

fn weight(dev: &Device, rows: usize, cols: usize) -> Result<Tensor> {
    (Tensor::randn(0f32, 1., (rows, cols), dev)? / (rows as f64).sqrt())?.to_dtype(DTYPE)
}

impl Weights {
    fn random(dev: &Device) -> Result<Weights> {
        let norm = |n| (Tensor::rand(0.5f32, 1.5, n, dev)?).to_dtype(DTYPE);
        Ok(Weights {
            attn_norm: norm(HIDDEN)?,
            wq: weight(dev, HIDDEN, HEADS * HEAD_DIM)?,
            wk: weight(dev, HIDDEN, KV_HEADS * HEAD_DIM)?,
            wv: weight(dev, HIDDEN, KV_HEADS * HEAD_DIM)?,
            wo: weight(dev, HEADS * HEAD_DIM, HIDDEN)?,
            mlp_norm: norm(HIDDEN)?,
            w_gate: weight(dev, HIDDEN, FFN)?,
            w_up: weight(dev, HIDDEN, FFN)?,
            w_down: weight(dev, FFN, HIDDEN)?,
        })
    }
}

/// The ops that differ between the two runs.
trait Ops {
    fn rms_norm(&self, x: &Tensor, w: &Tensor) -> Result<Tensor>;
    fn linear(&self, x: &Tensor, w: &Tensor) -> Result<Tensor>;
    /// q [B, S, Hq, D], k and v [B, S, Hkv, D] -> [B, S, Hq, D], causal.
    fn attention(&self, q: &Tensor, k: &Tensor, v: &Tensor) -> Result<Tensor>;
    fn silu_gate(&self, gate: &Tensor, up: &Tensor) -> Result<Tensor>;
}

/// candle's ops; the causal mask [S, S] is made once.
struct CandleOps {
    mask: Tensor,
}

impl Ops for CandleOps {
    fn rms_norm(&self, x: &Tensor, w: &Tensor) -> Result<Tensor> {
        candle_nn::ops::rms_norm(x, w, EPS as f32)
    }
    fn linear(&self, x: &Tensor, w: &Tensor) -> Result<Tensor> {
        x.broadcast_matmul(w)
    }
    fn attention(&self, q: &Tensor, k: &Tensor, v: &Tensor) -> Result<Tensor> {
        let (b, s, _, _) = q.dims4()?;
        let rep = HEADS / KV_HEADS;
        let q = q.transpose(1, 2)?.contiguous()?; // [B, H, S, D]
        let kv = |t: &Tensor| -> Result<Tensor> {
            // [B, Hkv, S, D] -> [B, Hkv * rep, S, D], each KV head repeated.
            let t = t.transpose(1, 2)?.contiguous()?;
            t.unsqueeze(2)?.expand((b, KV_HEADS, rep, s, HEAD_DIM))?.reshape((b, HEADS, s, HEAD_DIM))
        };
        let (k, v) = (kv(k)?, kv(v)?);
        let scores = (q.matmul(&k.t()?)? / (HEAD_DIM as f64).sqrt())?;
        let p = candle_nn::ops::softmax_last_dim(&scores.broadcast_add(&self.mask)?)?;
        p.matmul(&v)?.transpose(1, 2)?.contiguous()
    }
    fn silu_gate(&self, gate: &Tensor, up: &Tensor) -> Result<Tensor> {
        candle_nn::ops::silu(gate)? * up
    }
}

struct KaioOps;

impl Ops for KaioOps {
    fn rms_norm(&self, x: &Tensor, w: &Tensor) -> Result<Tensor> {
        kaio_candle::rmsnorm(x, w, EPS as f32)
    }
    fn linear(&self, x: &Tensor, w: &Tensor) -> Result<Tensor> {
        kaio_candle::matmul_tc_bf16(x, w)?.to_dtype(DTYPE) // f32 accumulate, one rounding
    }
    fn attention(&self, q: &Tensor, k: &Tensor, v: &Tensor) -> Result<Tensor> {
        kaio_candle::flash_attention(q, k, v, true, None)
    }
    fn silu_gate(&self, gate: &Tensor, up: &Tensor) -> Result<Tensor> {
        kaio_candle::silu_gate(gate, up)
    }
}

/// RoPE tables for positions 0..s: cos and sin [S, D/2].
fn rope_tables(dev: &Device, s: usize) -> Result<(Tensor, Tensor)> {
    let inv: Vec<f32> = (0..HEAD_DIM / 2).map(|i| 1. / 500000f32.powf(2. * i as f32 / HEAD_DIM as f32)).collect();
    let inv = Tensor::from_vec(inv, (1, HEAD_DIM / 2), dev)?;
    let pos = Tensor::arange(0u32, s as u32, dev)?.to_dtype(DType::F32)?.reshape((s, 1))?;
    let f = pos.broadcast_mul(&inv)?;
    Ok((f.cos()?.to_dtype(DTYPE)?, f.sin()?.to_dtype(DTYPE)?))
}

fn block(ops: &dyn Ops, w: &Weights, x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    let (b, s, _) = x.dims3()?;
    let xn = ops.rms_norm(x, &w.attn_norm)?;
    let heads = |t: Tensor, h: usize| t.reshape((b, s, h, HEAD_DIM));
    let q = heads(ops.linear(&xn, &w.wq)?, HEADS)?;
    let k = heads(ops.linear(&xn, &w.wk)?, KV_HEADS)?;
    let v = heads(ops.linear(&xn, &w.wv)?, KV_HEADS)?;
    // candle's rope takes [B, H, S, D]; both runs use it.
    let rope = |t: &Tensor| -> Result<Tensor> {
        candle_nn::rotary_emb::rope(&t.transpose(1, 2)?.contiguous()?, cos, sin)?.transpose(1, 2)?.contiguous()
    };
    let (q, k) = (rope(&q)?, rope(&k)?);
    let attn = ops.attention(&q, &k, &v)?.reshape((b, s, HEADS * HEAD_DIM))?;
    let h = (x + ops.linear(&attn, &w.wo)?)?;
    let hn = ops.rms_norm(&h, &w.mlp_norm)?;
    let act = ops.silu_gate(&ops.linear(&hn, &w.w_gate)?, &ops.linear(&hn, &w.w_up)?)?;
    h + ops.linear(&act, &w.w_down)?
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str, default: usize| -> usize {
        args.iter().position(|a| a == name).map_or(default, |i| args[i + 1].parse().expect("a number"))
    };
    let (seq, batch) = (flag("--seq", 512), flag("--batch", 1));
    let dev = Device::new_cuda(0)?;
    let cuda = match &dev {
        Device::Cuda(d) => d.clone(),
        _ => unreachable!(),
    };
    let w = Weights::random(&dev)?;
    let x = Tensor::randn(0f32, 1., (batch, seq, HIDDEN), &dev)?.to_dtype(DTYPE)?;
    let (cos, sin) = rope_tables(&dev, seq)?;

    let mask: Vec<f32> = (0..seq * seq).map(|i| if i % seq > i / seq { f32::NEG_INFINITY } else { 0. }).collect();
    let candle_ops = CandleOps { mask: Tensor::from_vec(mask, (seq, seq), &dev)?.to_dtype(DTYPE)? };
    let want = block(&candle_ops, &w, &x, &cos, &sin)?;
    let got = block(&KaioOps, &w, &x, &cos, &sin)?;
    let diff = (got.to_dtype(DType::F32)? - want.to_dtype(DType::F32)?)?;
    let norm = |t: &Tensor| -> Result<f32> { t.sqr()?.sum_all()?.sqrt()?.to_scalar::<f32>() };
    let rel = norm(&diff)? / norm(&want.to_dtype(DType::F32)?)?;
    let max_abs = diff.abs()?.max_keepdim(D::Minus1)?.max_all()?.to_scalar::<f32>()?;

    let candle_us = timing::median_us(&cuda, 3, 20, |_| block(&candle_ops, &w, &x, &cos, &sin).map(drop))?;
    let kaio_us = timing::median_us(&cuda, 3, 20, |_| block(&KaioOps, &w, &x, &cos, &sin).map(drop))?;
    println!("Llama block, batch {batch}, seq {seq}, hidden {HIDDEN}, {HEADS}/{KV_HEADS} heads of {HEAD_DIM}, ffn {FFN}, {DTYPE:?}");
    println!("  candle ops:      {:8.1} us (median of 20)", candle_us);
    println!("  kaio-candle ops: {:8.1} us (median of 20), {:.2}x", kaio_us, candle_us / kaio_us);
    println!("  output: relative L2 difference {rel:.2e}, largest |difference| {max_abs:.3e}");
    // Both round the same bf16 values at different points (kaio rounds each
    // matmul once from f32, candle's attention rounds P and the scores).
    if !(rel < 2e-2) {
        eprintln!("candle_llama_block: outputs differ by {rel:.2e} (relative L2), over 2e-2");
        std::process::exit(1);
    }
    Ok(())
}
