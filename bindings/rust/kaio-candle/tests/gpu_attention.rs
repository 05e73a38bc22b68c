//! kaio-candle's attention ops on candle's own CUDA tensors, against
//! candle's own attention, softmax(Q Kᵀ · scale + mask) V computed in f32
//! (cuBLAS matmul, candle-nn's softmax, a masked_fill-style where_cond) from
//! the same rounded inputs, and backward through `Var`/`backward()` against
//! candle's own gradients of that f32 graph.
//! Skipped, saying why, where candle has no CUDA device (CI, the fake driver).
//!
//! Inputs are uniform in [-1, 1] (the unit-scale inputs kaio.h's precision
//! statement and tests/gpu_attention_test.cpp use). Errors are relative
//! Frobenius norms ||ours − candle|| / ||candle|| per tensor, as libkaio's
//! own attention test measures them; tolerances and why are by each test.
#![cfg(feature = "cuda")]

use candle_core::{DType, Device, Result, Tensor, Var, D};

mod common;
use common::{gpu, grad_tol, o_tol, offset_view, rel, to_f64};

/// Largest |x| of `t`.
fn max_abs(t: &Tensor) -> Result<f64> {
    Ok(to_f64(t)?.iter().fold(0.0, |m, x| m.max(x.abs())))
}

/// A tensor of `dtype`, uniform in [-1, 1], that starts `pad` elements into a
/// larger storage (a non-zero `start_offset`).
fn uniform(dev: &Device, dtype: DType, dims: &[usize], pad: usize) -> Result<Tensor> {
    let n: usize = dims.iter().product();
    offset_view(&Tensor::rand(-1f32, 1f32, n + pad, dev)?.to_dtype(dtype)?, dims, pad)
}

/// A variable of `n + pad` elements and the `dims` view of it from `pad` on:
/// gradients flow through a narrowed tensor with a non-zero `start_offset`.
fn var_view(dev: &Device, dtype: DType, dims: &[usize], pad: usize) -> Result<(Var, Tensor)> {
    let n: usize = dims.iter().product();
    let var = Var::from_tensor(&Tensor::rand(-1f32, 1f32, n + pad, dev)?.to_dtype(dtype)?)?;
    let t = offset_view(var.as_tensor(), dims, pad)?;
    Ok((var, t))
}

/// The `dims` gradient of `var` from `pad` on.
fn grad_view(grads: &candle_core::backprop::GradStore, var: &Var, dims: &[usize], pad: usize) -> Result<Tensor> {
    let g = grads.get(var.as_tensor()).expect("a gradient").clone();
    let n: usize = dims.iter().product();
    g.narrow(0, pad, n)?.reshape(dims)
}

/// candle's own attention in f32: q `[B, Sq, Hq, D]`, k and v `[B, Sk, Hkv,
/// D]` -> `[B, Sq, Hq, D]`, query head h reading KV head h / (Hq / Hkv).
/// `causal`: Some(off) masks key j > i + off (off = Sk − Sq is bottom-right,
/// 0 top-left) with masked_fill of -1e30, finite so that a row that sees no
/// key stays finite in the backward too; such rows are zeroed, as libkaio
/// defines them. `grad`: candle_nn's composite softmax, which has a
/// backward, instead of its fused softmax_last_dim, which has none.
fn reference(q: &Tensor, k: &Tensor, v: &Tensor, causal: Option<i64>, scale: f64, grad: bool) -> Result<Tensor> {
    let (b, sq, hq, d) = q.dims4()?;
    let (_, sk, hkv, _) = k.dims4()?;
    let group = hq / hkv;
    let dev = q.device();
    // [B, Sk, Hkv, D] -> [B, Hq, Sk, D]
    let heads = |t: &Tensor| -> Result<Tensor> {
        t.transpose(1, 2)?.unsqueeze(2)?.broadcast_as((b, hkv, group, sk, d))?.reshape((b, hq, sk, d))
    };
    let qh = q.transpose(1, 2)?.contiguous()?;
    let kt = heads(k)?.transpose(2, 3)?.contiguous()?;
    let vh = heads(v)?;
    let scores = (qh.matmul(&kt)? * scale)?; // [B, Hq, Sq, Sk]
    let (scores, valid) = match causal {
        None => (scores, None),
        Some(off) => {
            let masked: Vec<u8> =
                (0..sq as i64).flat_map(|i| (0..sk as i64).map(move |j| u8::from(j > i + off))).collect();
            let mask = Tensor::from_vec(masked, (sq, sk), dev)?.broadcast_as(scores.shape())?;
            let fill = Tensor::new(-1e30f32, dev)?.broadcast_as(scores.shape())?;
            let rows: Vec<f32> = (0..sq as i64).map(|i| if i + off >= 0 { 1.0 } else { 0.0 }).collect();
            let valid = Tensor::from_vec(rows, (1, 1, sq, 1), dev)?;
            (mask.where_cond(&fill, &scores)?, Some(valid))
        }
    };
    let p =
        if grad { candle_nn::ops::softmax(&scores, D::Minus1)? } else { candle_nn::ops::softmax_last_dim(&scores)? };
    let mut o = p.matmul(&vh)?; // [B, Hq, Sq, D]
    if let Some(valid) = valid {
        o = o.broadcast_mul(&valid)?;
    }
    o.transpose(1, 2)?.contiguous()
}

/// As [`reference`] for rank-2 single-head `[S, D]` operands.
fn reference_2d(q: &Tensor, k: &Tensor, v: &Tensor, causal: Option<i64>, grad: bool) -> Result<Tensor> {
    let (sq, d) = q.dims2()?;
    let sk = k.dims2()?.0;
    let scale = 1.0 / (d as f64).sqrt();
    let as4 = |t: &Tensor, s: usize| t.reshape((1, s, 1, d));
    reference(&as4(q, sq)?, &as4(k, sk)?, &as4(v, sk)?, causal, scale, grad)?.reshape((sq, d))
}

fn f32(t: &Tensor) -> Result<Tensor> {
    t.to_dtype(DType::F32)
}

#[test]
fn attention_tc_matches_candle() -> Result<()> {
    let Some(dev) = gpu("attention_tc_matches_candle") else { return Ok(()) };
    // (Sq, Sk, D): S = 1, primes, tile ± 1 around 64 and 128, Sq != Sk both
    // ways, every head dim class.
    let shapes = [
        (1, 1, 64),
        (1, 129, 64),
        (17, 17, 64),
        (63, 65, 128),
        (64, 64, 32),
        (127, 129, 64),
        (129, 31, 128),
        (65, 127, 256),
        (2, 3, 96),
    ];
    for (sq, sk, d) in shapes {
        // q starts 16 bytes in (viewed in place), k at an odd element (copied
        // to an aligned start), v 32 bytes in.
        let q = uniform(&dev, DType::F16, &[sq, d], 8)?;
        let k = uniform(&dev, DType::F16, &[sk, d], 3)?;
        let v = uniform(&dev, DType::F16, &[sk, d], 16)?;
        for causal in [false, true] {
            let got = if causal {
                kaio_candle::attention_tc_causal(&q, &k, &v)?
            } else {
                kaio_candle::attention_tc(&q, &k, &v)?
            };
            assert_eq!(got.dtype(), DType::F32);
            assert_eq!(got.dims(), &[sq, d]);
            // Top-left causal: query i sees keys j <= i.
            let want = reference_2d(&f32(&q)?, &f32(&k)?, &f32(&v)?, causal.then_some(0), false)?;
            let err = rel(&got, &want)?;
            // libkaio states 1.5e-3 against f64 (P rounded to f16, f32 out);
            // candle's f32 reference adds about 1e-6.
            assert!(err <= 2e-3, "attention_tc causal={causal} Sq={sq} Sk={sk} D={d}: error {err:e}");
        }
    }
    Ok(())
}

/// (S, D) of the f32 single-head ops: S = 1, primes, tile ± 1; D from 32 to
/// 256, both kernel families (tensor cores up to 128, CUDA cores above) and
/// head dims that are not a power of two.
const FLASH_F32_SHAPES: &[(usize, usize)] =
    &[(1, 64), (2, 40), (17, 64), (63, 128), (64, 32), (65, 64), (127, 256), (129, 128), (33, 200)];

#[test]
fn attention_flash_matches_candle() -> Result<()> {
    let Some(dev) = gpu("attention_flash_matches_candle") else { return Ok(()) };
    for &(s, d) in FLASH_F32_SHAPES {
        // q: rows D + 5 apart from element 2 on; k at an odd start; v plain.
        let q = uniform(&dev, DType::F32, &[s, d + 5], 0)?.narrow(1, 2, d)?;
        let k = uniform(&dev, DType::F32, &[s, d], 3)?;
        let v = uniform(&dev, DType::F32, &[s, d], 0)?;
        for causal in [false, true] {
            let got = if causal {
                kaio_candle::attention_flash_causal(&q, &k, &v)?
            } else {
                kaio_candle::attention_flash(&q, &k, &v)?
            };
            assert_eq!(got.dtype(), DType::F32);
            assert_eq!(got.dims(), &[s, d]);
            let want = reference_2d(&q, &k, &v, causal.then_some(0), false)?;
            let err = rel(&got, &want)?;
            // libkaio states 2e-5 against f64 (f32 end to end, ex2.approx);
            // candle's f32 reference (cuBLAS, expf) adds about 1e-6.
            assert!(err <= 4e-5, "attention_flash causal={causal} S={s} D={d}: error {err:e}");
        }
    }
    Ok(())
}

#[test]
fn attention_flash_backward_matches_candles_gradients() -> Result<()> {
    let Some(dev) = gpu("attention_flash_backward_matches_candles_gradients") else { return Ok(()) };
    for &(s, d) in FLASH_F32_SHAPES {
        for causal in [false, true] {
            let what = format!("attention_flash causal={causal} S={s} D={d}");
            let (qv, q) = var_view(&dev, DType::F32, &[s, d], 3)?;
            let (kv, k) = var_view(&dev, DType::F32, &[s, d], 0)?;
            let (vv, v) = var_view(&dev, DType::F32, &[s, d], 1)?;
            let w = Tensor::rand(-1f32, 1f32, (s, d), &dev)?;
            let out = if causal {
                kaio_candle::attention_flash_causal(&q, &k, &v)?
            } else {
                kaio_candle::attention_flash(&q, &k, &v)?
            };
            assert_eq!(out.dims(), &[s, d], "{what}");
            let ours = (&out * &w)?.sum_all()?.backward()?;
            // candle's own: the same loss through the f32 reference graph.
            let (q32, k32, v32) = (Var::from_tensor(&q)?, Var::from_tensor(&k)?, Var::from_tensor(&v)?);
            let want = reference_2d(q32.as_tensor(), k32.as_tensor(), v32.as_tensor(), causal.then_some(0), true)?;
            let theirs = (&want * &w)?.sum_all()?.backward()?;
            let err = rel(&out, &want)?;
            assert!(err <= 4e-5, "{what} O: error {err:e}");
            for (name, var, pad, r) in [("dq", &qv, 3, &q32), ("dk", &kv, 0, &k32), ("dv", &vv, 1, &v32)] {
                let mine = grad_view(&ours, var, &[s, d], pad)?;
                assert_eq!(mine.dtype(), DType::F32);
                let err = rel(&mine, theirs.get(r.as_tensor()).expect("a gradient"))?;
                // libkaio states 1e-4 against f64 (split-TF32 products at about
                // 2^-21 each, or f32 FMA); the f32 reference graph's own
                // rounding (composite softmax backward) adds up to ~1e-5.
                assert!(err <= 2e-4, "{what} {name}: error {err:e}");
            }
        }
    }
    Ok(())
}

/// (B, Sq, Sk, Hq, Hkv, D): S = 1, primes, tile ± 1 around 64 and 128,
/// Sq != Sk both ways (Sq > Sk gives causal rows that see no key), a decode
/// step (Sq = 1), MHA, GQA (8:2) and MQA (Hkv = 1).
const GQA_SHAPES: &[(usize, usize, usize, usize, usize, usize)] = &[
    (1, 1, 1, 1, 1, 64),
    (2, 17, 17, 8, 2, 64),
    (1, 63, 65, 8, 1, 128),
    (2, 64, 64, 4, 4, 64),
    (1, 65, 63, 8, 2, 128),
    (2, 1, 129, 8, 2, 64),
    (1, 1, 257, 4, 1, 128),
    (1, 129, 127, 2, 2, 64),
];

#[test]
fn flash_attention_matches_candle() -> Result<()> {
    let Some(dev) = gpu("flash_attention_matches_candle") else { return Ok(()) };
    let mut shapes = GQA_SHAPES.to_vec();
    shapes.extend([(1, 127, 129, 2, 1, 256), (2, 33, 31, 4, 2, 96), (1, 8, 8, 2, 1, 32)]);
    for dtype in [DType::F16, DType::BF16] {
        for &(b, sq, sk, hq, hkv, d) in &shapes {
            // q starts 16 bytes in (viewed in place), k at an odd element
            // (copied to an aligned start), v 48 bytes in.
            let q = uniform(&dev, dtype, &[b, sq, hq, d], 8)?;
            let k = uniform(&dev, dtype, &[b, sk, hkv, d], 3)?;
            let v = uniform(&dev, dtype, &[b, sk, hkv, d], 24)?;
            for causal in [false, true] {
                for scale in [None, Some(0.3f32)] {
                    let what = format!(
                        "flash_attention {dtype:?} causal={causal} scale={scale:?} {:?}",
                        (b, sq, sk, hq, hkv, d)
                    );
                    let got = kaio_candle::flash_attention(&q, &k, &v, causal, scale)?;
                    assert_eq!(got.dtype(), dtype, "{what}");
                    assert_eq!(got.dims(), &[b, sq, hq, d], "{what}");
                    let s = scale.map_or(1.0 / (d as f64).sqrt(), f64::from);
                    // Bottom-right causal: query i sees keys j <= i + Sk − Sq.
                    let off = sk as i64 - sq as i64;
                    let want = reference(&f32(&q)?, &f32(&k)?, &f32(&v)?, causal.then_some(off), s, false)?;
                    let err = rel(&got, &want)?;
                    assert!(err <= o_tol(dtype), "{what}: error {err:e}");
                    if causal && sq > sk {
                        // Rows that see no key are exactly 0.
                        let none = max_abs(&got.narrow(1, 0, sq - sk)?)?;
                        assert_eq!(none, 0.0, "{what}: rows without keys");
                    }
                }
            }
        }
    }
    Ok(())
}

#[test]
fn flash_attention_backward_matches_candles_gradients() -> Result<()> {
    let Some(dev) = gpu("flash_attention_backward_matches_candles_gradients") else { return Ok(()) };
    for dtype in [DType::F16, DType::BF16] {
        for &(b, sq, sk, hq, hkv, d) in GQA_SHAPES {
            for causal in [false, true] {
                let what = format!("flash_attention backward {dtype:?} causal={causal} {:?}", (b, sq, sk, hq, hkv, d));
                let (qd, kd) = ([b, sq, hq, d], [b, sk, hkv, d]);
                // q 16 bytes in (in place), k at an odd start (copied, and
                // its gradient flows back through the copy), v plain.
                let (qv, q) = var_view(&dev, dtype, &qd, 8)?;
                let (kv, k) = var_view(&dev, dtype, &kd, 3)?;
                let (vv, v) = var_view(&dev, dtype, &kd, 0)?;
                // The loss weights, representable in dtype: dO is exact.
                let w = f32(&Tensor::rand(-1f32, 1f32, &qd[..], &dev)?.to_dtype(dtype)?)?;
                let out = kaio_candle::flash_attention(&q, &k, &v, causal, None)?;
                assert_eq!(out.dims(), &qd[..], "{what}");
                let ours = (f32(&out)? * &w)?.sum_all()?.backward()?;
                let (q32, k32, v32) =
                    (Var::from_tensor(&f32(&q)?)?, Var::from_tensor(&f32(&k)?)?, Var::from_tensor(&f32(&v)?)?);
                let off = sk as i64 - sq as i64;
                let scale = 1.0 / (d as f64).sqrt();
                let want =
                    reference(q32.as_tensor(), k32.as_tensor(), v32.as_tensor(), causal.then_some(off), scale, true)?;
                let theirs = (&want * &w)?.sum_all()?.backward()?;
                let err = rel(&out, &want)?;
                assert!(err <= o_tol(dtype), "{what} O: error {err:e}");
                for (name, var, dims, pad, r) in
                    [("dQ", &qv, &qd, 8, &q32), ("dK", &kv, &kd, 3, &k32), ("dV", &vv, &kd, 0, &v32)]
                {
                    let mine = grad_view(&ours, var, dims, pad)?;
                    assert_eq!(mine.dtype(), dtype, "{what} {name}");
                    let err = rel(&mine, theirs.get(r.as_tensor()).expect("a gradient"))?;
                    assert!(err <= grad_tol(dtype), "{what} {name}: error {err:e}");
                }
            }
        }
    }
    Ok(())
}

#[test]
fn flash_attention_takes_fused_qkv_views() -> Result<()> {
    let Some(dev) = gpu("flash_attention_takes_fused_qkv_views") else { return Ok(()) };
    let (b, s, hq, hkv, d) = (2, 37, 8, 2, 64);
    let dtype = DType::BF16;
    // One projection output [B, S, Hq + 2·Hkv, D]; q, k, v are views of it
    // with rows (Hq + 2·Hkv)·D apart, k and v at offsets: no copies.
    let qkv = Var::from_tensor(&Tensor::rand(-1f32, 1f32, (b, s, hq + 2 * hkv, d), &dev)?.to_dtype(dtype)?)?;
    let q = qkv.as_tensor().narrow(2, 0, hq)?;
    let k = qkv.as_tensor().narrow(2, hq, hkv)?;
    let v = qkv.as_tensor().narrow(2, hq + hkv, hkv)?;
    let w = f32(&Tensor::rand(-1f32, 1f32, (b, s, hq, d), &dev)?.to_dtype(dtype)?)?;
    let out = kaio_candle::flash_attention(&q, &k, &v, true, None)?;
    let ours = (f32(&out)? * &w)?.sum_all()?.backward()?;
    let (q32, k32, v32) = (Var::from_tensor(&f32(&q)?)?, Var::from_tensor(&f32(&k)?)?, Var::from_tensor(&f32(&v)?)?);
    let want = reference(q32.as_tensor(), k32.as_tensor(), v32.as_tensor(), Some(0), 1.0 / (d as f64).sqrt(), true)?;
    let theirs = (&want * &w)?.sum_all()?.backward()?;
    let err = rel(&out, &want)?;
    assert!(err <= o_tol(dtype), "fused O: error {err:e}");
    let g = ours.get(qkv.as_tensor()).expect("a gradient");
    for (name, start, heads, r) in [("dQ", 0, hq, &q32), ("dK", hq, hkv, &k32), ("dV", hq + hkv, hkv, &v32)] {
        let err = rel(&g.narrow(2, start, heads)?, theirs.get(r.as_tensor()).expect("a gradient"))?;
        assert!(err <= grad_tol(dtype), "fused {name}: error {err:e}");
    }
    Ok(())
}

#[test]
fn wrong_attention_inputs_get_clear_errors() -> Result<()> {
    let Some(dev) = gpu("wrong_attention_inputs_get_clear_errors") else { return Ok(()) };
    let h = DType::F16;
    let t = |dims: &[usize], dtype: DType| Tensor::zeros(dims, dtype, &dev);
    let fa =
        |q: &Tensor, k: &Tensor, v: &Tensor| kaio_candle::flash_attention(q, k, v, true, None).unwrap_err().to_string();
    let has = |e: &str, parts: &[&str]| assert!(parts.iter().all(|p| e.contains(p)), "{e}\n  lacks one of {parts:?}");

    let (q, kv) = (t(&[2, 5, 8, 64], h)?, t(&[2, 7, 2, 64], h)?);
    // Wrong dtypes.
    has(&fa(&t(&[2, 5, 8, 64], DType::F32)?, &kv, &kv), &["kaio-candle::flash_attention", "'q' is F32", "F16", "BF16"]);
    has(&fa(&q, &t(&[2, 7, 2, 64], DType::BF16)?, &kv), &["'k' is BF16", "'q' is F16"]);
    // Bad head counts and head dims.
    has(&fa(&t(&[2, 5, 6, 64], h)?, &t(&[2, 7, 4, 64], h)?, &t(&[2, 7, 4, 64], h)?), &["6 heads", "4", "multiple"]);
    has(&fa(&t(&[2, 5, 8, 48], h)?, &t(&[2, 7, 2, 48], h)?, &t(&[2, 7, 2, 48], h)?), &["head_dim is 48", "Pad"]);
    has(&fa(&q, &kv, &t(&[2, 6, 2, 64], h)?), &["'v'", "must match"]);
    has(&fa(&q, &t(&[1, 7, 2, 64], h)?, &t(&[1, 7, 2, 64], h)?), &["batch"]);
    has(&fa(&t(&[5, 8, 64], h)?, &kv, &kv), &["'q'", "rank 4"]);
    // Wrong layouts: [B, H, S, D] transposed to [B, S, H, D]; D not contiguous.
    let bhsd = t(&[2, 8, 5, 64], h)?.transpose(1, 2)?;
    has(&fa(&bhsd, &kv, &kv), &["'q'", "BSHD", ".contiguous()"]);
    let dt = t(&[2, 7, 64, 2], h)?.transpose(2, 3)?;
    has(&fa(&q, &dt, &kv), &["'k'", "last dimension", ".contiguous()"]);
    // The op struct applied directly does not copy a misaligned start.
    let odd = Tensor::zeros(2 * 5 * 8 * 64 + 1, h, &dev)?.narrow(0, 1, 2 * 5 * 8 * 64)?.reshape((2, 5, 8, 64))?;
    let op = kaio_candle::FlashAttention { causal: false, softmax_scale: None, with_lse: false };
    has(&odd.apply_op3_no_bwd(&kv, &kv, &op).unwrap_err().to_string(), &["'q'", "16-byte", "flash_attention"]);
    // Bad scales.
    for s in [0.0, -1.0, f32::NAN, f32::INFINITY] {
        let e = kaio_candle::flash_attention(&q, &kv, &kv, false, Some(s)).unwrap_err().to_string();
        has(&e, &["softmax_scale", "> 0"]);
    }
    // D = 256 runs forward; its backward names libkaio's backward head dims.
    let q256 = Var::from_tensor(&Tensor::rand(-1f32, 1f32, (1, 9, 2, 256), &dev)?.to_dtype(h)?)?;
    let kv256 = Tensor::rand(-1f32, 1f32, (1, 9, 1, 256), &dev)?.to_dtype(h)?;
    let out = kaio_candle::flash_attention(q256.as_tensor(), &kv256, &kv256, false, None)?;
    let e = f32(&out)?.sum_all()?.backward().unwrap_err().to_string();
    has(&e, &["kaio-candle::flash_attention_backward", "head_dim is 256", "[32, 64, 96, 128]"]);

    // attention_tc: f16 only, v with q's head dim, libkaio's head dims.
    let (q2, k2) = (t(&[5, 64], h)?, t(&[7, 64], h)?);
    let e = kaio_candle::attention_tc(&t(&[5, 64], DType::BF16)?, &k2, &k2).unwrap_err().to_string();
    has(&e, &["kaio-candle::attention_tc", "'q' is BF16", "F16"]);
    let e = kaio_candle::attention_tc_causal(&q2, &k2, &t(&[7, 32], h)?).unwrap_err().to_string();
    has(&e, &["kaio-candle::attention_tc_causal", "'v'", "Dv == D"]);
    let e = kaio_candle::attention_tc(&t(&[5, 40], h)?, &t(&[7, 40], h)?, &t(&[7, 40], h)?).unwrap_err().to_string();
    has(&e, &["head_dim is 40"]);
    let e = kaio_candle::attention_tc(&q2, &k2.t()?, &k2).unwrap_err().to_string();
    has(&e, &["'k'"]);

    // attention_flash: f32, one [S, D] for q, k, v, D <= 256.
    let f = DType::F32;
    let e = kaio_candle::attention_flash(&q2, &q2, &q2).unwrap_err().to_string();
    has(&e, &["kaio-candle::attention_flash", "'q' is F16", "F32"]);
    let e = kaio_candle::attention_flash_causal(&t(&[5, 64], f)?, &t(&[6, 64], f)?, &t(&[5, 64], f)?)
        .unwrap_err()
        .to_string();
    has(&e, &["kaio-candle::attention_flash_causal", "'k'", "[S, D]"]);
    let e =
        kaio_candle::attention_flash(&t(&[5, 300], f)?, &t(&[5, 300], f)?, &t(&[5, 300], f)?).unwrap_err().to_string();
    has(&e, &["head_dim is 300"]);
    let tr = t(&[64, 5], f)?.t()?;
    let e = kaio_candle::attention_flash(&tr, &tr, &tr).unwrap_err().to_string();
    has(&e, &["'q'", ".contiguous()"]);

    // CPU tensors.
    let cpu = Tensor::zeros((1, 4, 2, 64), h, &Device::Cpu)?;
    has(&kaio_candle::flash_attention(&cpu, &cpu, &cpu, false, None).unwrap_err().to_string(), &["CUDA tensors only"]);
    Ok(())
}

#[test]
fn empty_and_keyless_attention() -> Result<()> {
    let Some(dev) = gpu("empty_and_keyless_attention") else { return Ok(()) };
    let h = DType::F16;
    let z = |dims: &[usize], dtype: DType| Tensor::zeros(dims, dtype, &dev);
    for dtype in [DType::F16, DType::BF16] {
        // B = 0 and Sq = 0: empty results.
        let kv = z(&[0, 5, 1, 64], dtype)?;
        assert_eq!(
            kaio_candle::flash_attention(&z(&[0, 4, 2, 64], dtype)?, &kv, &kv, true, None)?.dims(),
            &[0, 4, 2, 64]
        );
        let kv = z(&[2, 5, 1, 64], dtype)?;
        assert_eq!(
            kaio_candle::flash_attention(&z(&[2, 0, 2, 64], dtype)?, &kv, &kv, false, None)?.dims(),
            &[2, 0, 2, 64]
        );
        // Sk = 0: no key to attend to, O = 0; the backward gives zeros.
        let q = Var::from_tensor(&Tensor::rand(-1f32, 1f32, (2, 3, 2, 64), &dev)?.to_dtype(dtype)?)?;
        let kv = Var::zeros((2, 0, 1, 64), dtype, &dev)?;
        let out = kaio_candle::flash_attention(q.as_tensor(), kv.as_tensor(), kv.as_tensor(), true, None)?;
        assert_eq!(out.dims(), &[2, 3, 2, 64]);
        assert_eq!(max_abs(&out)?, 0.0);
        let grads = f32(&out)?.sum_all()?.backward()?;
        let dq = grads.get(q.as_tensor()).expect("a gradient");
        assert_eq!(dq.dims(), &[2, 3, 2, 64]);
        assert_eq!(max_abs(dq)?, 0.0);
    }
    // attention_tc: Sq = 0 empty, Sk = 0 zeros.
    assert_eq!(kaio_candle::attention_tc(&z(&[0, 64], h)?, &z(&[5, 64], h)?, &z(&[5, 64], h)?)?.dims(), &[0, 64]);
    let out = kaio_candle::attention_tc_causal(&z(&[5, 64], h)?, &z(&[0, 64], h)?, &z(&[0, 64], h)?)?;
    assert_eq!((out.dims(), out.dtype()), (&[5usize, 64][..], DType::F32));
    assert_eq!(max_abs(&out)?, 0.0);
    // attention_flash: S = 0, forward and with a variable.
    let e = z(&[0, 64], DType::F32)?;
    assert_eq!(kaio_candle::attention_flash(&e, &e, &e)?.dims(), &[0, 64]);
    let ev = Var::zeros((0, 64), DType::F32, &dev)?;
    assert_eq!(kaio_candle::attention_flash_causal(ev.as_tensor(), &e, &e)?.dims(), &[0, 64]);
    Ok(())
}
