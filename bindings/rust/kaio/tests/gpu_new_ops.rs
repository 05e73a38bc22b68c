//! GPU tests of the k-quant, quantized-matmul, attention and kernel-language
//! wrappers, each against a small f64 CPU reference from the same rounded
//! inputs, outputs poisoned (NaN) first. They skip, saying why, without a
//! real device. Tolerances (relative Frobenius error unless stated), from
//! the library's own tests (tests/gpu_*_test.cpp):
//!   quantize: Q8_0 bytes equal ggml's formula on a known block; the round
//!     trip dequantize(quantize(x)) of uniform(-1, 1) data within each
//!     format's quantization error (Q8_0 1e-2, Q6_K 3e-2, Q5_K 6e-2, Q4_K
//!     1.2e-1 relative; the step of an n-bit grid over [-1, 1] / √12);
//!   dequantize to f16: the f32 dequantize rounded to nearest even, exactly;
//!   quant_matmul: against A · dequant(W)ᵀ, 1e-5 (f32 accumulation, M <= 8),
//!     + 2^-9 when M > 8 (W rounded to f16 for the tensor-core path);
//!   int8: i32 exactly; f32 within 1e-6 per element of the f32 chain;
//!   int4 / qkv: 2e-5 (+ 2^-11 for f16 outputs; + 1e-4 for M > 16);
//!   attention: O 2e-3 (f16), LSE 2e-3 absolute, dQ/dK/dV 1e-2; the varlen
//!     backward likewise, each sequence against the reference alone;
//!   attention_flash (f32 end to end): O 2e-5, LSE 2e-5 absolute, grads 1e-4;
//!   qkv_project_int8 (f16 out): 2e-5 + 2^-11 (exact products, f32 sums,
//!     one f16 rounding);
//!   lang silu_gate (f16 out): |out - ref| <= 2^-10·|ref| + 1e-6.
mod common;

use common::gpu_env::{f16s, gpu, rel_error, uniform, wide, Rng};
use kaio::{
    AttentionDesc, AttentionMask, AttentionVariant, AttentionVarlenDesc, Buffer, Device, Dtype, FlashGrads, Int4Format, Int4Weight, LangKernel,
    MatmulInt4Desc, MatmulInt8Desc, MatmulVariant, Op, QkvInt4Desc, QkvInt8Desc, QuantFormat, QuantMode, Stream,
    TensorView, F16,
};

#[test]
fn gpu_quantize_known_q8_0_block() {
    let dev = match gpu("gpu_quantize_known_q8_0_block") {
        Some(d) => d,
        None => return,
    };
    let s = Stream::non_blocking(&dev).unwrap();
    // One block: x_i = (i - 16) / 16, amax 1. ggml: d = amax / 127, id = 1/d,
    // q_i = roundf(x_i · id), d stored as f16.
    let x: Vec<f32> = (0..32).map(|i| (i as f32 - 16.0) / 16.0).collect();
    let d = 1.0f32 / 127.0;
    let id = 1.0 / d;
    let mut want = F16::from_f32(d).to_bits().to_le_bytes().to_vec();
    want.extend(x.iter().map(|&v| (v * id).round() as i8 as u8));
    let xb = Buffer::from_slice(&dev, &x).unwrap();
    let q = Buffer::from_slice(&dev, &[0xAAu8; 34]).unwrap();
    kaio::quantize(&s, &xb.view(1, 32), &q.view(1, 34), QuantFormat::Q8_0, QuantMode::Ggml).unwrap();
    s.synchronize().unwrap();
    assert_eq!(q.to_vec().unwrap(), want);
}

#[test]
fn gpu_quantize_dequantize_round_trip() {
    let dev = match gpu("gpu_quantize_dequantize_round_trip") {
        Some(d) => d,
        None => return,
    };
    let s = Stream::non_blocking(&dev).unwrap();
    let mut rng = Rng::new("gpu_quantize_dequantize_round_trip");
    let (rows, cols) = (3, 512);
    let x: Vec<f32> = (0..rows * cols).map(|_| rng.uniform(-1.0, 1.0) as f32).collect();
    let xb = Buffer::from_slice(&dev, &x).unwrap();
    let x64: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    for &(f, tol) in &[(QuantFormat::Q8_0, 1e-2), (QuantFormat::Q6K, 3e-2), (QuantFormat::Q5K, 6e-2), (QuantFormat::Q4K, 1.2e-1)] {
        for &mode in &[QuantMode::Ggml, QuantMode::Candle] {
            let rb = f.row_bytes(cols).unwrap();
            let q = Buffer::from_slice(&dev, &vec![0xFFu8; rows * rb]).unwrap();
            let y = Buffer::from_slice(&dev, &vec![f32::NAN; rows * cols]).unwrap();
            let yh = Buffer::from_slice(&dev, &vec![F16::from_f32(f32::NAN); rows * cols]).unwrap();
            Op::quantize(&dev, f, mode, Dtype::F32, rows, cols).unwrap().launch(&s, &[xb.view(rows, cols), q.view(rows, rb)]).unwrap();
            kaio::dequantize(&s, &q.view(rows, rb), &y.view(rows, cols), f).unwrap();
            Op::dequantize(&dev, f, Dtype::F16, rows, cols).unwrap().launch(&s, &[q.view(rows, rb), yh.view(rows, cols)]).unwrap();
            s.synchronize().unwrap();
            let got = y.to_vec().unwrap();
            let got64: Vec<f64> = got.iter().map(|&v| v as f64).collect();
            rel_error(&format!("round trip {:?} {:?}", f, mode), &got64, &x64, tol);
            let half = yh.to_vec().unwrap();
            for (i, (h, g)) in half.iter().zip(&got).enumerate() {
                assert_eq!(h.to_bits(), F16::from_f32(*g).to_bits(), "{:?}: f16 dequantize differs at {}", f, i);
            }
        }
    }
}

#[test]
fn gpu_quant_matmul() {
    let dev = match gpu("gpu_quant_matmul") {
        Some(d) => d,
        None => return,
    };
    let s = Stream::non_blocking(&dev).unwrap();
    let mut rng = Rng::new("gpu_quant_matmul");
    let (n, k) = (40, 512);
    for &f in &[QuantFormat::Q8_0, QuantFormat::Q4K, QuantFormat::Q6K] {
        let rb = f.row_bytes(k).unwrap();
        let w: Vec<f32> = (0..n * k).map(|_| rng.uniform(-1.0, 1.0) as f32).collect();
        let wb = Buffer::from_slice(&dev, &w).unwrap();
        let wq = Buffer::<u8>::alloc(&dev, n * rb).unwrap();
        let wd = Buffer::<f32>::alloc(&dev, n * k).unwrap();
        kaio::quantize(&s, &wb.view(n, k), &wq.view(n, rb), f, QuantMode::Ggml).unwrap();
        kaio::dequantize(&s, &wq.view(n, rb), &wd.view(n, k), f).unwrap();
        s.synchronize().unwrap();
        let wd: Vec<f64> = wd.to_vec().unwrap().iter().map(|&v| v as f64).collect();
        for &m in &[3usize, 16] {
            let a = f16s(&uniform(&mut rng, m * k, -1.0, 1.0));
            let ab = Buffer::from_slice(&dev, &a).unwrap();
            let c = Buffer::from_slice(&dev, &vec![f32::NAN; m * n]).unwrap();
            if m <= 8 {
                kaio::quant_matmul(&s, &ab.view(m, k), &wq.view(n, rb), &c.view(m, n), f).unwrap();
            } else {
                Op::quant_matmul(&dev, f, Dtype::F16, Dtype::F32, m, n, k)
                    .unwrap()
                    .launch(&s, &[ab.view(m, k), wq.view(n, rb), c.view(m, n)])
                    .unwrap();
            }
            s.synchronize().unwrap();
            let a = wide(&a);
            let want: Vec<f64> = (0..m * n).map(|i| (0..k).map(|x| a[i / n * k + x] * wd[i % n * k + x]).sum()).collect();
            let got: Vec<f64> = c.to_vec().unwrap().iter().map(|&v| v as f64).collect();
            let tol = 1e-5 + if m > 8 { (2.0f64).powi(-9) } else { 0.0 };
            rel_error(&format!("quant_matmul {:?} m {}", f, m), &got, &want, tol);
        }
    }
}

#[test]
fn gpu_matmul_int8() {
    let dev = match gpu("gpu_matmul_int8") {
        Some(d) => d,
        None => return,
    };
    let s = Stream::non_blocking(&dev).unwrap();
    let mut rng = Rng::new("gpu_matmul_int8");
    let (m, n, k) = (5, 24, 64);
    let a: Vec<i8> = (0..m * k).map(|_| rng.uniform(-127.0, 128.0).floor() as i8).collect();
    let b: Vec<i8> = (0..n * k).map(|_| rng.uniform(-127.0, 128.0).floor() as i8).collect();
    let sa: Vec<f32> = (0..m).map(|_| rng.uniform(0.01, 0.1) as f32).collect();
    let sb: Vec<f32> = (0..n).map(|_| rng.uniform(0.01, 0.1) as f32).collect();
    let (ab, bb) = (Buffer::from_slice(&dev, &a).unwrap(), Buffer::from_slice(&dev, &b).unwrap());
    let (sab, sbb) = (Buffer::from_slice(&dev, &sa).unwrap(), Buffer::from_slice(&dev, &sb).unwrap());
    let acc: Vec<i32> = (0..m * n).map(|i| (0..k).map(|x| a[i / n * k + x] as i32 * b[i % n * k + x] as i32).sum()).collect();
    // Exact i32 sums, prepared op.
    let ci = Buffer::from_slice(&dev, &vec![i32::MIN; m * n]).unwrap();
    Op::matmul_int8(&dev, &MatmulInt8Desc { out_dtype: Dtype::I32, m, n, k, ..Default::default() })
        .unwrap()
        .launch(&s, &[ab.view(m, k), bb.view(n, k), TensorView::none(), TensorView::none(), ci.view(m, n)])
        .unwrap();
    // The same sums from the mma.sync kernel (KAIO_MATMUL_ASYNC).
    let ca = Buffer::from_slice(&dev, &vec![i32::MIN; m * n]).unwrap();
    let da = MatmulInt8Desc { out_dtype: Dtype::I32, variant: MatmulVariant::Async, ..Default::default() };
    kaio::matmul_int8(&s, &ab.view(m, k), &bb.view(n, k), None, None, &ca.view(m, n), &da).unwrap();
    // f32 with both scales and alpha, one-shot.
    let alpha = 0.75f32;
    let cf = Buffer::from_slice(&dev, &vec![f32::NAN; m * n]).unwrap();
    let d = MatmulInt8Desc { alpha, ..Default::default() };
    kaio::matmul_int8(&s, &ab.view(m, k), &bb.view(n, k), Some(&sab.view(1, m)), Some(&sbb.view(1, n)), &cf.view(m, n), &d).unwrap();
    s.synchronize().unwrap();
    assert_eq!(ci.to_vec().unwrap(), acc, "i32 sums");
    assert_eq!(ca.to_vec().unwrap(), acc, "i32 sums, Async variant");
    let got = cf.to_vec().unwrap();
    for i in 0..m * n {
        let want = ((acc[i] as f32 * alpha) * sa[i / n]) * sb[i % n];
        assert!((got[i] - want).abs() <= 1e-6 * want.abs().max(1e-30), "int8 f32 at {}: {} vs {}", i, got[i], want);
    }
    println!("matmul_int8: i32 exact, f32 scaled ok");
}

/// A random GPTQ weight (K×N, group g): its tensors' host data and W(k, n)
/// = (q - z)·s rounded to f16.
struct Gptq {
    qweight: Vec<u32>,
    qzeros: Vec<u32>,
    scales: Vec<F16>,
    w: Vec<f64>,
}

fn gptq(rng: &mut Rng, k: usize, n: usize, g: usize) -> Gptq {
    let q: Vec<u32> = (0..k * n).map(|_| (rng.next() % 16) as u32).collect();
    let z: Vec<u32> = (0..k / g * n).map(|_| (rng.next() % 16) as u32).collect();
    let scales = f16s(&uniform(rng, k / g * n, 0.01, 0.1));
    let mut qweight = vec![0u32; k / 8 * n];
    for kk in 0..k {
        for nn in 0..n {
            qweight[kk / 8 * n + nn] |= q[kk * n + nn] << (4 * (kk % 8));
        }
    }
    let mut qzeros = vec![0u32; k / g * n / 8];
    for gg in 0..k / g {
        for nn in 0..n {
            qzeros[gg * n / 8 + nn / 8] |= z[gg * n + nn] << (4 * (nn % 8));
        }
    }
    let w = (0..k * n)
        .map(|i| {
            let (kk, nn) = (i / n, i % n);
            let s = scales[kk / g * n + nn].to_f32();
            F16::from_f32((q[i] as f32 - z[kk / g * n + nn] as f32) * s).to_f32() as f64
        })
        .collect();
    Gptq { qweight, qzeros, scales, w }
}

struct GptqDev {
    qw: Buffer<u32>,
    qz: Buffer<u32>,
    sc: Buffer<F16>,
}

impl GptqDev {
    fn new(dev: &Device, h: &Gptq) -> GptqDev {
        GptqDev {
            qw: Buffer::from_slice(dev, &h.qweight).unwrap(),
            qz: Buffer::from_slice(dev, &h.qzeros).unwrap(),
            sc: Buffer::from_slice(dev, &h.scales).unwrap(),
        }
    }
    fn weight(&self, k: usize, n: usize, g: usize) -> Int4Weight<'_> {
        Int4Weight { qweight: self.qw.view(k / 8, n), qzeros: Some(self.qz.view(k / g, n / 8)), scales: self.sc.view(k / g, n) }
    }
}

fn matmul_ref(a: &[f64], w: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    (0..m * n).map(|i| (0..k).map(|x| a[i / n * k + x] * w[x * n + i % n]).sum()).collect()
}

#[test]
fn gpu_matmul_int4_and_qkv() {
    let dev = match gpu("gpu_matmul_int4_and_qkv") {
        Some(d) => d,
        None => return,
    };
    let s = Stream::non_blocking(&dev).unwrap();
    let mut rng = Rng::new("gpu_matmul_int4_and_qkv");
    let (k, n, g) = (256, 64, 128);
    let h = gptq(&mut rng, k, n, g);
    let wd = GptqDev::new(&dev, &h);
    for &m in &[3usize, 32] {
        let a = f16s(&uniform(&mut rng, m * k, -1.0, 1.0));
        let ab = Buffer::from_slice(&dev, &a).unwrap();
        let c = Buffer::from_slice(&dev, &vec![f32::NAN; m * n]).unwrap();
        let d = MatmulInt4Desc { group_size: g, ..Default::default() };
        if m <= 16 {
            kaio::matmul_int4(&s, &ab.view(m, k), &wd.weight(k, n, g), &c.view(m, n), &d).unwrap();
        } else {
            let w = wd.weight(k, n, g);
            Op::matmul_int4(&dev, &MatmulInt4Desc { m, n, k, ..d })
                .unwrap()
                .launch(&s, &[ab.view(m, k), w.qweight, w.qzeros.unwrap(), w.scales, c.view(m, n)])
                .unwrap();
        }
        s.synchronize().unwrap();
        let got: Vec<f64> = c.to_vec().unwrap().iter().map(|&v| v as f64).collect();
        rel_error(&format!("matmul_int4 gptq m {}", m), &got, &matmul_ref(&wide(&a), &h.w, m, k, n), 2e-5 + if m > 16 { 1e-4 } else { 0.0 });
    }

    // Fused QKV, GQA-shaped: n_q 64, n_k = n_v 32, f16 outputs.
    let m = 2;
    let hs = [h, gptq(&mut rng, k, 32, g), gptq(&mut rng, k, 32, g)];
    let ns = [64usize, 32, 32];
    let devs: Vec<GptqDev> = hs.iter().map(|x| GptqDev::new(&dev, x)).collect();
    let ws: Vec<Int4Weight<'_>> = (0..3).map(|p| devs[p].weight(k, ns[p], g)).collect();
    let a = f16s(&uniform(&mut rng, m * k, -1.0, 1.0));
    let ab = Buffer::from_slice(&dev, &a).unwrap();
    let outs: Vec<Buffer<F16>> = ns.iter().map(|&nn| Buffer::from_slice(&dev, &vec![F16::from_f32(f32::NAN); m * nn]).unwrap()).collect();
    let d = QkvInt4Desc { group_size: g, ..Default::default() };
    kaio::qkv_project_int4(
        &s,
        &ab.view(m, k),
        [&ws[0], &ws[1], &ws[2]],
        [&outs[0].view(m, ns[0]), &outs[1].view(m, ns[1]), &outs[2].view(m, ns[2])],
        &d,
    )
    .unwrap();
    s.synchronize().unwrap();
    for p in 0..3 {
        let got = wide(&outs[p].to_vec().unwrap());
        rel_error(&format!("qkv_project_int4 part {}", p), &got, &matmul_ref(&wide(&a), &hs[p].w, m, k, ns[p]), 2e-5 + (2.0f64).powi(-11));
    }

    // Signed format through the repack: KAIO's u32 N × K/8 -> K/8 × N.
    let (kk, nn) = (64, 16);
    let src: Vec<u32> = (0..nn * kk / 8).map(|_| rng.next() as u32).collect();
    let sb = Buffer::from_slice(&dev, &src).unwrap();
    let db = Buffer::from_slice(&dev, &vec![0u32; nn * kk / 8]).unwrap();
    kaio::int4_repack_kaio(&s, &sb.view(nn, kk / 8), &db.view(kk / 8, nn)).unwrap();
    let sc = Buffer::from_slice(&dev, &f16s(&uniform(&mut rng, kk / 32 * nn, 0.01, 0.1))).unwrap();
    let a = f16s(&uniform(&mut rng, kk, -1.0, 1.0));
    let ab = Buffer::from_slice(&dev, &a).unwrap();
    let c = Buffer::from_slice(&dev, &vec![f32::NAN; nn]).unwrap();
    let w = Int4Weight { qweight: db.view(kk / 8, nn), qzeros: None, scales: sc.view(kk / 32, nn) };
    let d = MatmulInt4Desc { format: Int4Format::Signed, group_size: 32, ..Default::default() };
    kaio::matmul_int4(&s, &ab.view(1, kk), &w, &c.view(1, nn), &d).unwrap();
    s.synchronize().unwrap();
    let moved = db.to_vec().unwrap();
    for col in 0..nn {
        for r in 0..kk / 8 {
            assert_eq!(moved[r * nn + col], src[col * (kk / 8) + r], "repack at {},{}", r, col);
        }
    }
    let scv = sc.to_vec().unwrap();
    let wsig: Vec<f64> = (0..kk * nn)
        .map(|i| {
            let (x, col) = (i / nn, i % nn);
            let nib = ((src[col * (kk / 8) + x / 8] >> (4 * (x % 8))) & 0xF) as i32;
            let q = if nib >= 8 { nib - 16 } else { nib };
            F16::from_f32(q as f32 * scv[x / 32 * nn + col].to_f32()).to_f32() as f64
        })
        .collect();
    let got: Vec<f64> = c.to_vec().unwrap().iter().map(|&v| v as f64).collect();
    rel_error("matmul_int4 signed after repack", &got, &matmul_ref(&wide(&a), &wsig, 1, kk, nn), 2e-5);
}

/// f64 attention over [B·S, H·D] rows; returns (O, LSE, dQ, dK, dV).
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
fn attention_ref(
    dsc: &AttentionDesc,
    q: &[f64],
    k: &[f64],
    v: &[f64],
    dout: &[f64],
    top_left: bool,
    causal: bool,
) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
    let (b, sq, sk, hq, hkv, d) = (dsc.batch, dsc.seq_q, dsc.seq_k, dsc.heads_q, dsc.heads_kv, dsc.head_dim);
    let scale = 1.0 / (d as f64).sqrt();
    let (ldq, ldk) = (hq * d, hkv * d);
    let mut o = vec![0.0; b * sq * ldq];
    let mut lse = vec![0.0; b * hq * sq];
    let (mut dq, mut dk, mut dv) = (vec![0.0; q.len()], vec![0.0; k.len()], vec![0.0; v.len()]);
    for bb in 0..b {
        for h in 0..hq {
            let hk = h / (hq / hkv);
            let qi = |i: usize, x: usize| (bb * sq + i) * ldq + h * d + x;
            let ki = |j: usize, x: usize| (bb * sk + j) * ldk + hk * d + x;
            let mut p = vec![vec![0.0; sk]; sq];
            for i in 0..sq {
                let lim = if !causal { sk } else if top_left { i + 1 } else { (i + sk + 1).saturating_sub(sq) };
                let s: Vec<f64> = (0..sk).map(|j| if j < lim { scale * (0..d).map(|x| q[qi(i, x)] * k[ki(j, x)]).sum::<f64>() } else { f64::NEG_INFINITY }).collect();
                let mx = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = s.iter().map(|&t| (t - mx).exp()).sum();
                lse[(bb * hq + h) * sq + i] = mx + sum.ln();
                for j in 0..sk {
                    p[i][j] = (s[j] - mx).exp() / sum;
                }
                for x in 0..d {
                    o[qi(i, x)] = (0..sk).map(|j| p[i][j] * v[ki(j, x)]).sum();
                }
            }
            for i in 0..sq {
                let dp: Vec<f64> = (0..sk).map(|j| (0..d).map(|x| dout[qi(i, x)] * v[ki(j, x)]).sum()).collect();
                let di: f64 = (0..d).map(|x| dout[qi(i, x)] * o[qi(i, x)]).sum();
                for j in 0..sk {
                    let ds = p[i][j] * (dp[j] - di);
                    for x in 0..d {
                        dq[qi(i, x)] += scale * ds * k[ki(j, x)];
                        dk[ki(j, x)] += scale * ds * q[qi(i, x)];
                        dv[ki(j, x)] += p[i][j] * dout[qi(i, x)];
                    }
                }
            }
        }
    }
    (o, lse, dq, dk, dv)
}

/// Runs `desc`'s backward op on packed BSHD buffers (dO, Q, K, V, O), LSE
/// and the three gradients, each viewed at the shape `desc` gives it, and
/// waits for it.
fn attention_backward(dev: &Device, s: &Stream, desc: &AttentionDesc, fwd: [&Buffer<F16>; 5], lse: &Buffer<f32>, grads: [&Buffer<F16>; 3]) {
    let (q_rows, k_rows) = (desc.batch * desc.seq_q, desc.batch * desc.seq_k);
    let (q_cols, k_cols) = (desc.heads_q * desc.head_dim, desc.heads_kv * desc.head_dim);
    let [dout, q, k, v, o] = fwd;
    let [dq, dk, dv] = grads;
    Op::attention_backward(dev, desc)
        .unwrap()
        .launch(
            s,
            &[
                dout.view(q_rows, q_cols),
                q.view(q_rows, q_cols),
                k.view(k_rows, k_cols),
                v.view(k_rows, k_cols),
                o.view(q_rows, q_cols),
                lse.view(desc.batch * desc.heads_q, desc.seq_q),
                dq.view(q_rows, q_cols),
                dk.view(k_rows, k_cols),
                dv.view(k_rows, k_cols),
            ],
        )
        .unwrap();
    s.synchronize().unwrap();
}

#[test]
fn gpu_attention_forward_backward() {
    let dev = match gpu("gpu_attention_forward_backward") {
        Some(d) => d,
        None => return,
    };
    let s = Stream::non_blocking(&dev).unwrap();
    let mut rng = Rng::new("gpu_attention_forward_backward");
    let (b, sq, sk, hq, hkv, d) = (2, 17, 23, 4, 2, 64);
    let nan = F16::from_f32(f32::NAN);
    let cases = [
        (AttentionMask::None, AttentionVariant::Auto),
        (AttentionMask::Causal, AttentionVariant::Sm80),
        (AttentionMask::CausalTopLeft, AttentionVariant::Sm80M128),
    ];
    for &(mask, variant) in &cases {
        let desc = AttentionDesc { mask, variant, batch: b, seq_q: sq, seq_k: sk, heads_q: hq, heads_kv: hkv, head_dim: d, ..Default::default() };
        let (nq, nk) = (b * sq * hq * d, b * sk * hkv * d);
        let (q, k, v, dout) = (
            f16s(&uniform(&mut rng, nq, -1.0, 1.0)),
            f16s(&uniform(&mut rng, nk, -1.0, 1.0)),
            f16s(&uniform(&mut rng, nk, -1.0, 1.0)),
            f16s(&uniform(&mut rng, nq, -1.0, 1.0)),
        );
        let up = |x: &[F16]| Buffer::from_slice(&dev, x).unwrap();
        let (qb, kb, vb, dob) = (up(&q), up(&k), up(&v), up(&dout));
        let ob = up(&vec![nan; nq]);
        let lb = Buffer::from_slice(&dev, &vec![f32::NAN; b * hq * sq]).unwrap();
        let (dqb, dkb, dvb) = (up(&vec![nan; nq]), up(&vec![nan; nk]), up(&vec![nan; nk]));
        let (qv, kv, vv) = (qb.view(b * sq, hq * d), kb.view(b * sk, hkv * d), vb.view(b * sk, hkv * d));
        kaio::attention(&s, &qv, &kv, &vv, &ob.view(b * sq, hq * d), Some(&lb.view(b * hq, sq)), &desc).unwrap();
        attention_backward(&dev, &s, &desc, [&dob, &qb, &kb, &vb, &ob], &lb, [&dqb, &dkb, &dvb]);
        let causal = mask != AttentionMask::None;
        let (o, lse, dq, dk, dv) = attention_ref(&desc, &wide(&q), &wide(&k), &wide(&v), &wide(&dout), mask == AttentionMask::CausalTopLeft, causal);
        let what = format!("attention {:?} {:?}", mask, variant);
        let got_o = wide(&ob.to_vec().unwrap());
        // Rows that see no key (bottom-right, Sq > Sk) are O = 0, LSE = -inf; none here (Sq < Sk).
        rel_error(&format!("{} O", what), &got_o, &o, 2e-3);
        let got_l = lb.to_vec().unwrap();
        for (i, (g, w)) in got_l.iter().zip(&lse).enumerate() {
            assert!((*g as f64 - w).abs() <= 2e-3, "{} LSE at {}: {} vs {}", what, i, g, w);
        }
        rel_error(&format!("{} dQ", what), &wide(&dqb.to_vec().unwrap()), &dq, 1e-2);
        rel_error(&format!("{} dK", what), &wide(&dkb.to_vec().unwrap()), &dk, 1e-2);
        rel_error(&format!("{} dV", what), &wide(&dvb.to_vec().unwrap()), &dv, 1e-2);
    }

    // KAIO's rank-2 single head: f16 in, f32 out, top-left causal.
    let (sq, sk, d) = (33, 40, 64);
    let desc = AttentionDesc { batch: 1, seq_q: sq, seq_k: sk, heads_q: 1, heads_kv: 1, head_dim: d, ..Default::default() };
    let (q, k, v) = (f16s(&uniform(&mut rng, sq * d, -1.0, 1.0)), f16s(&uniform(&mut rng, sk * d, -1.0, 1.0)), f16s(&uniform(&mut rng, sk * d, -1.0, 1.0)));
    let (qb, kb, vb) = (Buffer::from_slice(&dev, &q).unwrap(), Buffer::from_slice(&dev, &k).unwrap(), Buffer::from_slice(&dev, &v).unwrap());
    for &causal in &[false, true] {
        let out = Buffer::from_slice(&dev, &vec![f32::NAN; sq * d]).unwrap();
        kaio::attention_tc(&s, &qb.view(sq, d), &kb.view(sk, d), &vb.view(sk, d), &out.view(sq, d), causal).unwrap();
        s.synchronize().unwrap();
        let (o, ..) = attention_ref(&desc, &wide(&q), &wide(&k), &wide(&v), &vec![0.0; sq * d], true, causal);
        let got: Vec<f64> = out.to_vec().unwrap().iter().map(|&x| x as f64).collect();
        rel_error(&format!("attention_tc causal {}", causal), &got, &o, 2e-3);
    }
}

/// `deterministic: false` on a shape with Sk >= 4096 (the sm_90a fused
/// backward; elsewhere the same kernels): dQ within 1e-3 of the
/// deterministic run's (f32 adds in another order, then f16 rounding), dK
/// and dV bit for bit, and two deterministic runs bit for bit.
#[test]
fn gpu_attention_backward_nondeterministic_matches_deterministic() {
    let dev = match gpu("gpu_attention_backward_nondeterministic_matches_deterministic") {
        Some(d) => d,
        None => return,
    };
    let s = Stream::non_blocking(&dev).unwrap();
    let mut rng = Rng::new("gpu_attention_backward_nondeterministic_matches_deterministic");
    let (b, sq, sk, hq, hkv, d) = (1, 128, 4096, 2, 2, 64);
    let (nq, nk) = (b * sq * hq * d, b * sk * hkv * d);
    let desc = AttentionDesc { batch: b, seq_q: sq, seq_k: sk, heads_q: hq, heads_kv: hkv, head_dim: d, ..Default::default() };
    let up = |x: &[F16]| Buffer::from_slice(&dev, x).unwrap();
    let (qb, kb, vb, dob) = (
        up(&f16s(&uniform(&mut rng, nq, -1.0, 1.0))),
        up(&f16s(&uniform(&mut rng, nk, -1.0, 1.0))),
        up(&f16s(&uniform(&mut rng, nk, -1.0, 1.0))),
        up(&f16s(&uniform(&mut rng, nq, -1.0, 1.0))),
    );
    let ob = up(&vec![F16::from_f32(0.0); nq]);
    let lb = Buffer::from_slice(&dev, &vec![0.0f32; b * hq * sq]).unwrap();
    let (qv, kv, vv) = (qb.view(b * sq, hq * d), kb.view(b * sk, hkv * d), vb.view(b * sk, hkv * d));
    kaio::attention(&s, &qv, &kv, &vv, &ob.view(b * sq, hq * d), Some(&lb.view(b * hq, sq)), &desc).unwrap();
    let grads = |deterministic: bool| {
        let nan = F16::from_f32(f32::NAN);
        let (dqb, dkb, dvb) = (up(&vec![nan; nq]), up(&vec![nan; nk]), up(&vec![nan; nk]));
        attention_backward(&dev, &s, &AttentionDesc { deterministic, ..desc }, [&dob, &qb, &kb, &vb, &ob], &lb, [&dqb, &dkb, &dvb]);
        (dqb.to_vec().unwrap(), dkb.to_vec().unwrap(), dvb.to_vec().unwrap())
    };
    let bits = |x: &[F16]| x.iter().map(|h| h.to_bits()).collect::<Vec<u16>>();
    let (dq1, dk1, dv1) = grads(true);
    let (dq2, ..) = grads(true);
    assert_eq!(bits(&dq1), bits(&dq2), "deterministic dQ differs between runs");
    let (dq0, dk0, dv0) = grads(false);
    rel_error("nondeterministic dQ vs deterministic", &wide(&dq0), &wide(&dq1), 1e-3);
    assert_eq!(bits(&dk0), bits(&dk1), "nondeterministic dK differs");
    assert_eq!(bits(&dv0), bits(&dv1), "nondeterministic dV differs");
}

/// The varlen forward then backward on packed sequences of (len_q, len_k)
/// (3, 7), (1, 1), (9, 9), (20, 33), causal (bottom-right) and not, against
/// attention_ref of each sequence alone; every output poisoned first.
#[test]
fn gpu_attention_varlen_backward() {
    let dev = match gpu("gpu_attention_varlen_backward") {
        Some(d) => d,
        None => return,
    };
    let s = Stream::non_blocking(&dev).unwrap();
    let mut rng = Rng::new("gpu_attention_varlen_backward");
    let (hq, hkv, d) = (4usize, 2usize, 64usize);
    let (lq, lk) = ([3usize, 1, 9, 20], [7usize, 1, 9, 33]);
    let prefix = |l: &[usize]| -> Vec<usize> { std::iter::once(0).chain(l.iter().scan(0, |a, &n| { *a += n; Some(*a) })).collect() };
    let (cq, ck) = (prefix(&lq), prefix(&lk));
    let (tq, tk) = (cq[lq.len()], ck[lk.len()]);
    let (nq, nk) = (tq * hq * d, tk * hkv * d);
    let (q, k, v, dout) = (
        f16s(&uniform(&mut rng, nq, -1.0, 1.0)),
        f16s(&uniform(&mut rng, nk, -1.0, 1.0)),
        f16s(&uniform(&mut rng, nk, -1.0, 1.0)),
        f16s(&uniform(&mut rng, nq, -1.0, 1.0)),
    );
    let (qw, kw, vw, dw) = (wide(&q), wide(&k), wide(&v), wide(&dout));
    let nan = F16::from_f32(f32::NAN);
    let up = |x: &[F16]| Buffer::from_slice(&dev, x).unwrap();
    let (qb, kb, vb, dob) = (up(&q), up(&k), up(&v), up(&dout));
    let i32s = |c: &[usize]| Buffer::from_slice(&dev, &c.iter().map(|&x| x as i32).collect::<Vec<i32>>()).unwrap();
    let (cqb, ckb) = (i32s(&cq), i32s(&ck));
    let (qv, kv, vv, dov) = (qb.view(tq, hq * d), kb.view(tk, hkv * d), vb.view(tk, hkv * d), dob.view(tq, hq * d));
    let (cqv, ckv) = (cqb.view(1, lq.len() + 1), ckb.view(1, lk.len() + 1));
    for &mask in &[AttentionMask::None, AttentionMask::Causal] {
        let desc = AttentionVarlenDesc {
            mask,
            batch: lq.len(),
            max_seqlen_q: 20,
            max_seqlen_k: 33,
            total_q: tq,
            total_k: tk,
            heads_q: hq,
            heads_kv: hkv,
            head_dim: d,
            ..Default::default()
        };
        let (ob, dqb, dkb, dvb) = (up(&vec![nan; nq]), up(&vec![nan; nq]), up(&vec![nan; nk]), up(&vec![nan; nk]));
        let lb = Buffer::from_slice(&dev, &vec![f32::NAN; hq * tq]).unwrap();
        let (ov, lv) = (ob.view(tq, hq * d), lb.view(hq, tq));
        kaio::attention_varlen(&s, &qv, &kv, &vv, &cqv, &ckv, &ov, Some(&lv), &desc).unwrap();
        Op::attention_varlen_backward(&dev, &desc)
            .unwrap()
            .launch(&s, &[dov, qv, kv, vv, cqv, ckv, ov, lv, dqb.view(tq, hq * d), dkb.view(tk, hkv * d), dvb.view(tk, hkv * d)])
            .unwrap();
        s.synchronize().unwrap();
        let (mut o, mut dq, mut dk, mut dv) = (vec![0.0; nq], vec![0.0; nq], vec![0.0; nk], vec![0.0; nk]);
        for bi in 0..lq.len() {
            let one = AttentionDesc { batch: 1, seq_q: lq[bi], seq_k: lk[bi], heads_q: hq, heads_kv: hkv, head_dim: d, ..Default::default() };
            let (qr, kr) = (cq[bi] * hq * d..cq[bi + 1] * hq * d, ck[bi] * hkv * d..ck[bi + 1] * hkv * d);
            let causal = mask == AttentionMask::Causal;
            let (so, _, sdq, sdk, sdv) =
                attention_ref(&one, &qw[qr.clone()], &kw[kr.clone()], &vw[kr.clone()], &dw[qr.clone()], false, causal);
            o[qr.clone()].copy_from_slice(&so);
            dq[qr].copy_from_slice(&sdq);
            dk[kr.clone()].copy_from_slice(&sdk);
            dv[kr].copy_from_slice(&sdv);
        }
        let what = format!("varlen backward mask {:?}", mask);
        rel_error(&format!("{} O", what), &wide(&ob.to_vec().unwrap()), &o, 2e-3);
        rel_error(&format!("{} dQ", what), &wide(&dqb.to_vec().unwrap()), &dq, 1e-2);
        rel_error(&format!("{} dK", what), &wide(&dkb.to_vec().unwrap()), &dk, 1e-2);
        rel_error(&format!("{} dV", what), &wide(&dvb.to_vec().unwrap()), &dv, 1e-2);
    }
}

#[test]
fn gpu_attention_flash_f32() {
    let dev = match gpu("gpu_attention_flash_f32") {
        Some(d) => d,
        None => return,
    };
    let s = Stream::non_blocking(&dev).unwrap();
    let mut rng = Rng::new("gpu_attention_flash_f32");
    for &(n, d, causal) in &[(37usize, 64usize, false), (37, 64, true), (70, 128, true), (1, 32, false)] {
        let desc = AttentionDesc { batch: 1, seq_q: n, seq_k: n, heads_q: 1, heads_kv: 1, head_dim: d, ..Default::default() };
        let host: Vec<Vec<f32>> = (0..4).map(|_| uniform(&mut rng, n * d, -1.0, 1.0).iter().map(|&x| x as f32).collect()).collect();
        let up = |x: &[f32]| Buffer::from_slice(&dev, x).unwrap();
        let (qb, kb, vb, dob) = (up(&host[0]), up(&host[1]), up(&host[2]), up(&host[3]));
        let nan = vec![f32::NAN; n * d];
        let (ob, o2b, dqb, dkb, dvb) = (up(&nan), up(&nan), up(&nan), up(&nan), up(&nan));
        let lb = up(&vec![f32::NAN; n]);
        let (qv, kv, vv, ov) = (qb.view(n, d), kb.view(n, d), vb.view(n, d), ob.view(n, d));
        kaio::attention_flash(&s, &qv, &kv, &vv, &o2b.view(n, d), None, causal).unwrap();
        kaio::attention_flash(&s, &qv, &kv, &vv, &ov, Some(&lb.view(1, n)), causal).unwrap();
        let grads = FlashGrads { dq: dqb.view(n, d), dk: dkb.view(n, d), dv: dvb.view(n, d) };
        kaio::attention_flash_backward(&s, &dob.view(n, d), &qv, &kv, &vv, &ov, &lb.view(1, n), &grads, causal).unwrap();
        s.synchronize().unwrap();
        let f = |x: &[f32]| x.iter().map(|&v| v as f64).collect::<Vec<f64>>();
        let (o, lse, dq, dk, dv) = attention_ref(&desc, &f(&host[0]), &f(&host[1]), &f(&host[2]), &f(&host[3]), true, causal);
        let what = format!("attention_flash S {} D {} causal {}", n, d, causal);
        rel_error(&format!("{} O", what), &f(&ob.to_vec().unwrap()), &o, 2e-5);
        rel_error(&format!("{} O (no stats)", what), &f(&o2b.to_vec().unwrap()), &o, 2e-5);
        for (i, (g, w)) in lb.to_vec().unwrap().iter().zip(&lse).enumerate() {
            assert!((*g as f64 - w).abs() <= 2e-5, "{} LSE at {}: {} vs {}", what, i, g, w);
        }
        for (name, got, want) in [("dQ", &dqb, &dq), ("dK", &dkb, &dk), ("dV", &dvb, &dv)] {
            let got = f(&got.to_vec().unwrap());
            if want.iter().all(|&w| w == 0.0) {
                // S = 1: one key, so dS = P·(dP − rowsum(dO∘O)) is 0 exactly and
                // a relative error is undefined: the kernel's rounding residue
                // must be tiny in absolute terms.
                let worst = got.iter().fold(0.0f64, |m, g| m.max(g.abs()));
                assert!(worst <= 1e-6, "{} {}: expected 0, got up to {:e}", what, name, worst);
            } else {
                rel_error(&format!("{} {}", what, name), &got, want, 1e-4);
            }
        }
    }
}

#[test]
fn gpu_qkv_project_int8() {
    let dev = match gpu("gpu_qkv_project_int8") {
        Some(d) => d,
        None => return,
    };
    let s = Stream::non_blocking(&dev).unwrap();
    let mut rng = Rng::new("gpu_qkv_project_int8");
    let (m, k, ns) = (3usize, 96usize, [40usize, 12, 8]);
    let x = f16s(&uniform(&mut rng, m * k, -1.0, 1.0));
    let xb = Buffer::from_slice(&dev, &x).unwrap();
    let ws: Vec<Vec<i8>> = ns.iter().map(|&n| (0..k * n).map(|_| rng.uniform(-127.0, 128.0).floor() as i8).collect()).collect();
    // q per tensor (1 x 1), k and v per column (1 x N).
    let scales: Vec<Vec<f32>> =
        ns.iter().enumerate().map(|(p, &n)| (0..if p == 0 { 1 } else { n }).map(|_| rng.uniform(0.001, 0.01) as f32).collect()).collect();
    let wb: Vec<Buffer<i8>> = ws.iter().map(|w| Buffer::from_slice(&dev, w).unwrap()).collect();
    let sb: Vec<Buffer<f32>> = scales.iter().map(|v| Buffer::from_slice(&dev, v).unwrap()).collect();
    let nan = F16::from_f32(f32::NAN);
    let want: Vec<Vec<f64>> = (0..3)
        .map(|p| {
            let n = ns[p];
            (0..m * n)
                .map(|i| {
                    let (r, c) = (i / n, i % n);
                    let acc: f64 = (0..k).map(|kk| x[r * k + kk].to_f32() as f64 * ws[p][kk * n + c] as f64).sum();
                    acc * scales[p][if p == 0 { 0 } else { c }] as f64
                })
                .collect()
        })
        .collect();
    for &prepared in &[false, true] {
        let outs: Vec<Buffer<F16>> = ns.iter().map(|&n| Buffer::from_slice(&dev, &vec![nan; m * n]).unwrap()).collect();
        let wv: Vec<TensorView<'_>> = (0..3).map(|p| wb[p].view(k, ns[p])).collect();
        let sv: Vec<TensorView<'_>> = (0..3).map(|p| sb[p].view(1, scales[p].len())).collect();
        let ov: Vec<TensorView<'_>> = (0..3).map(|p| outs[p].view(m, ns[p])).collect();
        if prepared {
            let desc = QkvInt8Desc { m, k, n_q: ns[0], n_k: ns[1], n_v: ns[2], ..Default::default() };
            let t = kaio::qkv_int8_tensors(xb.view(m, k), [wv[0], wv[1], wv[2]], [sv[0], sv[1], sv[2]], [ov[0], ov[1], ov[2]]);
            Op::qkv_project_int8(&dev, &desc).unwrap().launch(&s, &t).unwrap();
        } else {
            let d = QkvInt8Desc::default();
            kaio::qkv_project_int8(&s, &xb.view(m, k), [&wv[0], &wv[1], &wv[2]], [&sv[0], &sv[1], &sv[2]], [&ov[0], &ov[1], &ov[2]], &d)
                .unwrap();
        }
        s.synchronize().unwrap();
        for p in 0..3 {
            let got = wide(&outs[p].to_vec().unwrap());
            rel_error(&format!("qkv_project_int8 prepared {} part {}", prepared, p), &got, &want[p], 2e-5 + (2.0f64).powi(-11));
        }
    }
}

#[test]
fn gpu_lang_silu_gate() {
    let dev = match gpu("gpu_lang_silu_gate") {
        Some(d) => d,
        None => return,
    };
    let s = Stream::non_blocking(&dev).unwrap();
    let mut rng = Rng::new("gpu_lang_silu_gate");
    let src = "kernel silu_gate(x: tensor<f16>, gate: tensor<f16>, out: tensor<f16>) {\n    out = x * sigmoid(x) * gate;\n}\n";
    let mut kern = LangKernel::new(&dev, src).unwrap();
    let (r, c) = (7, 129);
    let (x, g) = (f16s(&uniform(&mut rng, r * c, -4.0, 4.0)), f16s(&uniform(&mut rng, r * c, -2.0, 2.0)));
    let (xb, gb) = (Buffer::from_slice(&dev, &x).unwrap(), Buffer::from_slice(&dev, &g).unwrap());
    let ob = Buffer::from_slice(&dev, &vec![F16::from_f32(f32::NAN); r * c]).unwrap();
    kern.launch(&s, &[xb.view(r, c), gb.view(r, c), ob.view(r, c)], &[]).unwrap();
    s.synchronize().unwrap();
    kern.check().unwrap();
    let got = wide(&ob.to_vec().unwrap());
    let (x, g) = (wide(&x), wide(&g));
    for i in 0..r * c {
        let want = x[i] / (1.0 + (-x[i]).exp()) * g[i];
        assert!((got[i] - want).abs() <= (2.0f64).powi(-10) * want.abs() + 1e-6, "silu_gate at {}: {} vs {}", i, got[i], want);
    }
    println!("lang silu_gate: {} elements ok", r * c);
}

#[test]
fn gpu_kv_cache_write_scatters_rows_into_slots() {
    let dev = match gpu("gpu_kv_cache_write_scatters_rows_into_slots") {
        Some(d) => d,
        None => return,
    };
    let s = Stream::non_blocking(&dev).unwrap();
    let mut rng = Rng::new("gpu_kv_cache_write_scatters_rows_into_slots");
    let (t, w, rows) = (5, 128, 48);
    let k: Vec<F16> = f16s(&uniform(&mut rng, t * w, -2.0, 2.0));
    let v: Vec<F16> = f16s(&uniform(&mut rng, t * w, -2.0, 2.0));
    let slots: Vec<i32> = vec![17, -1, 0, 47, 33]; // token 1 is padding
    let poison = F16::from_f32(-7.5);
    let (kb, vb, sb) = (Buffer::from_slice(&dev, &k).unwrap(), Buffer::from_slice(&dev, &v).unwrap(), Buffer::from_slice(&dev, &slots).unwrap());
    let kc = Buffer::from_slice(&dev, &vec![poison; rows * w]).unwrap();
    let vc = Buffer::from_slice(&dev, &vec![poison; rows * w]).unwrap();
    kaio::kv_cache_write(&s, &kb.view(t, w), Some(&vb.view(t, w)), &sb.view(1, t), &kc.view(rows, w), Some(&vc.view(rows, w)))
        .unwrap();
    s.synchronize().unwrap();
    for (cache, src) in [(kc.to_vec().unwrap(), &k), (vc.to_vec().unwrap(), &v)] {
        for r in 0..rows {
            let tok = slots.iter().position(|&x| x == r as i32);
            for c in 0..w {
                let want = tok.map_or(poison, |i| src[i * w + c]);
                assert_eq!(cache[r * w + c], want, "row {} col {}", r, c);
            }
        }
    }
    // A slot past the cache: skipped, reported by the next synchronize.
    let bad = Buffer::from_slice(&dev, &[3i32, 48, 5, 6, 7]).unwrap();
    let op = Op::kv_cache_write(&dev, Dtype::F16, t, w, rows).unwrap();
    op.launch(&s, &[kb.view(t, w), TensorView::none(), bad.view(1, t), kc.view(rows, w), TensorView::none()]).unwrap();
    let e = s.synchronize().unwrap_err();
    assert_eq!(e.status(), kaio::Status::OUT_OF_BOUNDS, "{}", e);
    assert!(e.to_string().contains("slot_mapping[1]"), "{}", e);
    s.synchronize().unwrap();
    println!("kv_cache_write: ok");
}
