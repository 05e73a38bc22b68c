//! candle's own ops against kaio-candle's, on one GPU in one process:
//!
//!     bench_candle [--iters N] [--only NAME]
//!
//! One table row per case: the median GPU time of each (CUDA events on
//! candle's stream, 5 warm-up calls, `--iters` timed ones, inputs rotated
//! past the L2) and candle's time over kaio's. Inputs are random normal.
mod timing;

use std::time::Instant;

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{DType, Device, Module, Result, Tensor};
use timing::{median_us, sets_for};

struct Args {
    iters: usize,
    only: Option<String>,
}

fn args() -> Args {
    let mut a = Args { iters: 30, only: None };
    let v: Vec<String> = std::env::args().collect();
    let mut i = 1;
    while i < v.len() {
        match v[i].as_str() {
            "--iters" => {
                a.iters = v[i + 1].parse().expect("--iters N");
                i += 1
            }
            "--only" => {
                a.only = Some(v[i + 1].clone());
                i += 1
            }
            other => panic!("unknown argument {other}"),
        }
        i += 1;
    }
    assert!(a.iters >= 20, "--iters must be at least 20 (the median of 20 or more)");
    a
}

fn cuda(dev: &Device) -> &candle_core::CudaDevice {
    match dev {
        Device::Cuda(d) => d,
        _ => unreachable!(),
    }
}

/// `sets` independent copies of random tensors of these shapes.
fn inputs(dev: &Device, dtype: DType, shapes: &[&[usize]], sets: usize) -> Result<Vec<Vec<Tensor>>> {
    (0..sets)
        .map(|_| shapes.iter().map(|s| Tensor::randn(0f32, 1., *s, dev)?.to_dtype(dtype)).collect())
        .collect()
}

fn row(op: &str, shape: &str, candle_us: f64, kaio_us: f64, note: &str) {
    println!(
        "| {op} | {shape} | {candle_us:.1} | {kaio_us:.1} | {:.2}x | {note} |",
        candle_us / kaio_us
    );
}

fn bytes_of(shapes: &[&[usize]], dtype: DType) -> usize {
    shapes.iter().map(|s| s.iter().product::<usize>() * dtype.size_in_bytes()).sum()
}

/// candle's op and kaio's, both timed on the same inputs.
fn compare(
    dev: &Device,
    iters: usize,
    dtype: DType,
    shapes: &[&[usize]],
    candle_op: impl Fn(&[Tensor]) -> Result<Tensor>,
    kaio_op: impl Fn(&[Tensor]) -> Result<Tensor>,
) -> Result<(f64, f64)> {
    let sets = inputs(dev, dtype, shapes, sets_for(bytes_of(shapes, dtype)))?;
    let n = sets.len();
    let c = median_us(cuda(dev), 5, iters, |i| candle_op(&sets[i % n]).map(drop))?;
    let k = median_us(cuda(dev), 5, iters, |i| kaio_op(&sets[i % n]).map(drop))?;
    Ok((c, k))
}

fn main() -> Result<()> {
    let a = args();
    let dev = Device::new_cuda(0)?;
    let want = |name: &str| a.only.as_deref().is_none_or(|o| name.starts_with(o));
    println!("| op | shape | candle us | kaio-candle us | candle / kaio | note |");
    println!("|---|---|---|---|---|---|");

    if want("matmul") {
        for &(m, n, k) in &[(4096usize, 4096usize, 4096usize), (8192, 8192, 8192), (16, 4096, 4096), (4096, 14336, 4096)] {
            for (dtype, f) in [
                (DType::F16, kaio_candle::matmul_tc as fn(&Tensor, &Tensor) -> Result<Tensor>),
                (DType::BF16, kaio_candle::matmul_tc_bf16),
            ] {
                let (c, kt) = compare(&dev, a.iters, dtype, &[&[m, k], &[k, n]], |t| t[0].matmul(&t[1]), |t| f(&t[0], &t[1]))?;
                // B as an nn.Linear weight [N, K] used as w.t(), as candle's Linear does.
                let (ct, ktt) =
                    compare(&dev, a.iters, dtype, &[&[m, k], &[n, k]], |t| t[0].matmul(&t[1].t()?), |t| f(&t[0], &t[1].t()?))?;
                let tflops = |us: f64| 2.0 * (m * n * k) as f64 / us / 1e6;
                row(
                    &format!("matmul {dtype:?}"),
                    &format!("{m}x{n}x{k}"),
                    c,
                    kt,
                    &format!("candle {:.0} TFLOP/s ({dtype:?} out), kaio {:.0} TFLOP/s (f32 out)", tflops(c), tflops(kt)),
                );
                row(
                    &format!("matmul {dtype:?}, b = w.t()"),
                    &format!("{m}x{n}x{k}"),
                    ct,
                    ktt,
                    &format!("candle {:.0} TFLOP/s, kaio {:.0} TFLOP/s", tflops(ct), tflops(ktt)),
                );
            }
        }
    }
    if want("rmsnorm") || want("softmax") || want("silu") {
        for &(rows, cols) in &[(1usize, 4096usize), (4096, 4096), (8192, 8192)] {
            for dtype in [DType::F32, DType::BF16] {
                let shape = format!("{rows}x{cols} {dtype:?}");
                let gbs = |us: f64, n_rw: usize| (n_rw * rows * cols * dtype.size_in_bytes()) as f64 / us / 1e3;
                if want("rmsnorm") {
                    let (c, k) = compare(
                        &dev,
                        a.iters,
                        dtype,
                        &[&[rows, cols], &[cols]],
                        |t| candle_nn::ops::rms_norm(&t[0], &t[1], 1e-6),
                        |t| kaio_candle::rmsnorm(&t[0], &t[1], 1e-6),
                    )?;
                    row("rmsnorm", &shape, c, k, &format!("{:.0} vs {:.0} GB/s", gbs(c, 2), gbs(k, 2)));
                }
                if want("softmax") {
                    let (c, k) = compare(
                        &dev,
                        a.iters,
                        dtype,
                        &[&[rows, cols]],
                        |t| candle_nn::ops::softmax_last_dim(&t[0]),
                        |t| kaio_candle::softmax_last_dim(&t[0]),
                    )?;
                    row("softmax", &shape, c, k, &format!("{:.0} vs {:.0} GB/s", gbs(c, 2), gbs(k, 2)));
                }
                if want("silu") {
                    let (c, k) = compare(
                        &dev,
                        a.iters,
                        dtype,
                        &[&[rows, cols], &[rows, cols]],
                        |t| candle_nn::ops::silu(&t[0])? * &t[1],
                        |t| kaio_candle::silu_gate(&t[0], &t[1]),
                    )?;
                    row("silu_gate", &shape, c, k, &format!("{:.0} vs {:.0} GB/s", gbs(c, 3), gbs(k, 3)));
                }
            }
        }
    }
    if want("attention") {
        // (batch, Sq, Sk): prefill with a causal mask, decode (Sq = 1) without.
        for &(b, sq, sk) in &[(1usize, 2048usize, 2048usize), (1, 4096, 4096), (1, 1, 8192), (8, 1, 8192), (1, 1, 32768)] {
            let (hq, hkv, d) = (32usize, 8usize, 128usize);
            let causal = sq > 1;
            let dtype = DType::BF16;
            let shapes: [&[usize]; 3] = [&[b, sq, hq, d], &[b, sk, hkv, d], &[b, sk, hkv, d]];
            let mask = if causal { Some(causal_mask(&dev, sq, sk, dtype)?) } else { None };
            let (c, k) = compare(
                &dev,
                a.iters,
                dtype,
                &shapes,
                |t| candle_attention(&t[0], &t[1], &t[2], mask.as_ref()),
                |t| kaio_candle::flash_attention(&t[0], &t[1], &t[2], causal, None),
            )?;
            let kv_gbs = |us: f64| (2 * b * sk * hkv * d * 2) as f64 / us / 1e3;
            row(
                "attention bf16",
                &format!("B {b} Sq {sq} Sk {sk} Hq {hq} Hkv {hkv} D {d}{}", if causal { " causal" } else { "" }),
                c,
                k,
                &format!("candle: matmul, softmax, matmul; K+V read at {:.0} vs {:.0} GB/s", kv_gbs(c), kv_gbs(k)),
            );
        }
    }
    if want("isq") {
        // A 5120 x 17408 bf16 weight to Q6K: candle's QTensor::quantize (a
        // round trip through the CPU) against kaio's on the GPU, wall time.
        let w = Tensor::randn(0f32, 1., (5120, 17408), &dev)?.to_dtype(DType::BF16)?;
        let cuda_dev = cuda(&dev);
        let wall = |runs: usize, f: &dyn Fn() -> Result<QTensor>| -> Result<f64> {
            let mut t = Vec::new();
            for _ in 0..runs + 1 {
                cuda_dev.cuda_stream().synchronize().map_err(candle_core::Error::wrap)?;
                let start = Instant::now();
                let q = f()?;
                cuda_dev.cuda_stream().synchronize().map_err(candle_core::Error::wrap)?;
                t.push(start.elapsed().as_secs_f64() * 1e6);
                drop(q);
            }
            t.remove(0); // the first run loads kernels
            t.sort_by(|a, b| a.partial_cmp(b).unwrap());
            Ok(t[t.len() / 2])
        };
        let c = wall(3, &|| QTensor::quantize(&w, GgmlDType::Q6K))?;
        let k = wall(21, &|| kaio_candle::quantize_to_qtensor(&w, GgmlDType::Q6K))?;
        let same = QTensor::quantize(&w, GgmlDType::Q6K)?.data()? == kaio_candle::quantize_to_qtensor(&w, GgmlDType::Q6K)?.data()?;
        row("ISQ bf16 -> Q6K (wall)", "5120x17408", c, k, &format!("median of 3 vs 21 runs; bytes identical: {same}"));
    }
    if want("qmatvec") {
        for fmt in [GgmlDType::Q4K, GgmlDType::Q6K] {
            for &(n, k) in &[(4096usize, 14336usize), (14336, 4096), (8192, 28672)] {
                let wbytes = n * k / fmt.block_size() * fmt.type_size();
                let sets = sets_for(wbytes);
                let ws = (0..sets)
                    .map(|_| {
                        let w = Tensor::randn(0f32, 1., (n, k), &dev)?;
                        kaio_candle::quantize_to_qtensor(&w, fmt).map(std::sync::Arc::new)
                    })
                    .collect::<Result<Vec<_>>>()?;
                let qmms = ws.iter().map(|w| QMatMul::from_arc(w.clone())).collect::<Result<Vec<_>>>()?;
                let x = Tensor::randn(0f32, 1., (1, k), &dev)?;
                let c = median_us(cuda(&dev), 5, a.iters, |i| qmms[i % sets].forward(&x).map(drop))?;
                let kt = median_us(cuda(&dev), 5, a.iters, |i| kaio_candle::quant_matmul(&x, &ws[i % sets]).map(drop))?;
                let gbs = |us: f64| wbytes as f64 / us / 1e3;
                row(
                    &format!("decode matvec {fmt:?}"),
                    &format!("N {n} K {k} M 1 f32"),
                    c,
                    kt,
                    &format!("weights read at {:.0} vs {:.0} GB/s", gbs(c), gbs(kt)),
                );
            }
        }
    }
    Ok(())
}

/// The bottom-right causal mask [Sq, Sk] (0 or -inf), made once per shape.
fn causal_mask(dev: &Device, sq: usize, sk: usize, dtype: DType) -> Result<Tensor> {
    let mask: Vec<f32> = (0..sq * sk).map(|i| if i % sk > i / sk + sk - sq { f32::NEG_INFINITY } else { 0. }).collect();
    Tensor::from_vec(mask, (sq, sk), dev)?.to_dtype(dtype)
}

/// candle's own attention, as a candle model writes it without flash-attn:
/// q [B, Sq, Hq, D], k and v [B, Sk, Hkv, D] -> [B, Sq, Hq, D].
fn candle_attention(q: &Tensor, k: &Tensor, v: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
    let (b, _, hq, d) = q.dims4()?;
    let (_, sk, hkv, _) = k.dims4()?;
    let rep = hq / hkv;
    let q = q.transpose(1, 2)?.contiguous()?;
    let kv = |t: &Tensor| -> Result<Tensor> {
        let t = t.transpose(1, 2)?.contiguous()?;
        t.unsqueeze(2)?.expand((b, hkv, rep, sk, d))?.reshape((b, hq, sk, d))
    };
    let (k, v) = (kv(k)?, kv(v)?);
    let mut scores = (q.matmul(&k.t()?)? / (d as f64).sqrt())?;
    if let Some(mask) = mask {
        scores = scores.broadcast_add(mask)?;
    }
    candle_nn::ops::softmax_last_dim(&scores)?.matmul(&v)?.transpose(1, 2)?.contiguous()
}
