//! kaio-candle's varlen attention backward through candle's autograd, on
//! candle's own CUDA tensors: the gradients of a packed batch of mixed
//! lengths (0 and 1 included, a sequence with no key, rows of no sequence)
//! against candle's own autograd through a naive f32 softmax(Q Kᵀ · scale +
//! mask) V per sequence, from the same rounded inputs. Skipped, saying why,
//! without a CUDA device.
//!
//! Inputs are uniform in [-1, 1]; errors are relative Frobenius norms per
//! tensor, as tests/gpu_attention.rs measures flash_attention's, with its
//! tolerances (kaio.h: varlen is the attention section's kernels, per
//! sequence, with its precision).
#![cfg(feature = "cuda")]

use candle_core::{DType, Device, Result, Storage, Tensor, Var, D};

mod common;
use common::{gpu, grad_tol, o_tol, rel, to_f64};

fn f32(t: &Tensor) -> Result<Tensor> {
    t.to_dtype(DType::F32)
}

/// A variable of `dtype`, uniform in [-1, 1].
fn rand_var(dev: &Device, dtype: DType, dims: (usize, usize, usize)) -> Result<Var> {
    Var::from_tensor(&Tensor::rand(-1f32, 1., dims, dev)?.to_dtype(dtype)?)
}

/// candle's own attention of one sequence in f32, differentiable (candle-nn's
/// composite softmax, which has a backward): q `[Sq, Hq, D]`, k and v
/// `[Sk, Hkv, D]` (Sq <= Sk, so every row sees a key) -> `[Sq, Hq, D]`,
/// query head h reading KV head h / (Hq / Hkv); causal bottom-right (key
/// j > i + Sk − Sq masked).
fn reference(q: &Tensor, k: &Tensor, v: &Tensor, causal: bool, scale: f64) -> Result<Tensor> {
    let (sq, hq, d) = q.dims3()?;
    let (sk, hkv, _) = k.dims3()?;
    let heads = |t: &Tensor| -> Result<Tensor> {
        // [Sk, Hkv, D] -> [Hq, Sk, D]
        t.transpose(0, 1)?.unsqueeze(1)?.broadcast_as((hkv, hq / hkv, sk, d))?.reshape((hq, sk, d))
    };
    let qh = q.transpose(0, 1)?.contiguous()?;
    let mut s = (qh.matmul(&heads(k)?.transpose(1, 2)?.contiguous()?)? * scale)?; // [Hq, Sq, Sk]
    if causal {
        let masked: Vec<u8> = (0..sq).flat_map(|i| (0..sk).map(move |j| u8::from(j + sq > i + sk))).collect();
        let mask = Tensor::from_vec(masked, (sq, sk), q.device())?.broadcast_as(s.shape())?;
        s = mask.where_cond(&Tensor::new(-1e30f32, q.device())?.broadcast_as(s.shape())?, &s)?;
    }
    candle_nn::ops::softmax(&s, D::Minus1)?.matmul(&heads(v)?.contiguous()?)?.transpose(0, 1)
}

/// Prefix sums from 0 of `lens`.
fn prefix(lens: impl Iterator<Item = usize>) -> Vec<usize> {
    std::iter::once(0)
        .chain(lens.scan(0, |a, x| {
            *a += x;
            Some(*a)
        }))
        .collect()
}

/// The elements of the storage `t` views.
fn storage_len(t: &Tensor) -> Result<usize> {
    let (s, _) = t.storage_and_layout();
    let Storage::Cuda(c) = &*s else { panic!("a CUDA tensor") };
    Ok(match t.dtype() {
        DType::F16 => c.as_cuda_slice::<half::f16>()?.len(),
        _ => c.as_cuda_slice::<half::bf16>()?.len(),
    })
}

/// (len_q, len_k) per sequence: a chunk against a longer context, a
/// sequence with no query, single rows, a full square, one with no key (O =
/// 0, zero gradients) and a decode row against 6 keys.
const LENS: [(usize, usize); 6] = [(5, 7), (0, 3), (1, 1), (9, 9), (2, 0), (1, 6)];
/// Rows of q past the last sequence: no sequence's, O and dQ 0.
const SPARE_Q: usize = 2;
const HQ: usize = 8;
const HKV: usize = 2;

#[test]
fn flash_attn_varlen_gradients_match_candle_autograd() -> Result<()> {
    let Some(dev) = gpu("flash_attn_varlen_gradients_match_candle_autograd") else { return Ok(()) };
    let d = 64usize;
    let (cq, ck) = (prefix(LENS.iter().map(|l| l.0)), prefix(LENS.iter().map(|l| l.1)));
    let (tq, tk) = (cq[LENS.len()] + SPARE_Q, ck[LENS.len()]);
    let scale = 1.0 / (d as f64).sqrt();
    for dtype in [DType::F16, DType::BF16] {
        // I32 prefix sums for f16, U32 (candle-flash-attn's) for bf16.
        let seqlens = |c: &[usize]| -> Result<Tensor> {
            if dtype == DType::F16 {
                Tensor::new(c.iter().map(|&x| x as i32).collect::<Vec<_>>().as_slice(), &dev)
            } else {
                Tensor::new(c.iter().map(|&x| x as u32).collect::<Vec<_>>().as_slice(), &dev)
            }
        };
        let (sq, sk) = (seqlens(&cq)?, seqlens(&ck)?);
        for causal in [false, true] {
            let what = format!("flash_attn_varlen backward {dtype:?} causal={causal}");
            let var = |dims| rand_var(&dev, dtype, dims);
            let (q, k, v) = (var((tq, HQ, d))?, var((tk, HKV, d))?, var((tk, HKV, d))?);
            // The loss weights, representable in dtype: dO is exact.
            let w = f32(&Tensor::rand(-1f32, 1., (tq, HQ, d), &dev)?.to_dtype(dtype)?)?;
            let (qt, kt, vt) = (q.as_tensor(), k.as_tensor(), v.as_tensor());
            let out = kaio_candle::flash_attn_varlen(qt, kt, vt, &sq, &sk, 9, 9, scale as f32, causal)?;
            assert_eq!((out.dims(), out.dtype()), (&[tq, HQ, d][..], dtype), "{what}");
            // O views the packed output: O, then the f32 LSE [Hq, total_q].
            assert_eq!(storage_len(&out)?, tq * HQ * d + 2 * HQ * tq, "{what}: O and the LSE");
            let ours = (f32(&out)? * &w)?.sum_all()?.backward()?;
            let f32_var = |t: &Tensor| Var::from_tensor(&f32(t)?);
            let (q32, k32, v32) = (f32_var(&q)?, f32_var(&k)?, f32_var(&v)?);
            let mut loss = Tensor::zeros((), DType::F32, &dev)?;
            for (b, &(lq, lk)) in LENS.iter().enumerate() {
                let (q0, k0) = (cq[b], ck[b]);
                let got = out.narrow(0, q0, lq)?;
                if lk == 0 {
                    assert!(to_f64(&got)?.iter().all(|&x| x == 0.0), "{what} seq {b}: no key, O must be 0");
                    continue;
                }
                if lq == 0 {
                    continue;
                }
                let part = |t: &Var, at: usize, n: usize| t.as_tensor().narrow(0, at, n);
                let want = reference(&part(&q32, q0, lq)?, &part(&k32, k0, lk)?, &part(&v32, k0, lk)?, causal, scale)?;
                let err = rel(&got, &want)?;
                assert!(err <= o_tol(dtype), "{what} seq {b} O: error {err:e}");
                loss = (loss + (&want * w.narrow(0, q0, lq)?)?.sum_all()?)?;
            }
            let theirs = loss.backward()?;
            for (name, var, r) in [("dQ", &q, &q32), ("dK", &k, &k32), ("dV", &v, &v32)] {
                let mine = ours.get(var.as_tensor()).expect("a gradient");
                assert_eq!((mine.dims(), mine.dtype()), (var.dims(), dtype), "{what} {name}");
                let err = rel(mine, theirs.get(r.as_tensor()).expect("a gradient"))?;
                assert!(err <= grad_tol(dtype), "{what} {name}: error {err:e}");
            }
            // Exact zeros: dQ of the keyless sequence and of the spare rows,
            // dK and dV of the sequence with no query.
            let zero = |t: &Tensor, at: usize, n: usize| -> Result<bool> {
                Ok(to_f64(&t.narrow(0, at, n)?)?.iter().all(|&x| x == 0.0))
            };
            let dq = ours.get(q.as_tensor()).expect("a gradient");
            assert!(zero(dq, cq[4], LENS[4].0)? && zero(dq, tq - SPARE_Q, SPARE_Q)?, "{what}: dQ rows without keys");
            for (name, var) in [("dK", &k), ("dV", &v)] {
                let g = ours.get(var.as_tensor()).expect("a gradient");
                assert!(zero(g, ck[1], LENS[1].1)?, "{what}: {name} of no query");
            }
        }
    }
    Ok(())
}

#[test]
fn flash_attn_varlen_without_gradients_writes_o_alone() -> Result<()> {
    let Some(dev) = gpu("flash_attn_varlen_without_gradients_writes_o_alone") else { return Ok(()) };
    let (cq, ck) = (prefix(LENS.iter().map(|l| l.0)), prefix(LENS.iter().map(|l| l.1)));
    let (tq, tk) = (cq[LENS.len()], ck[LENS.len()]);
    let i32s = |c: &[usize]| Tensor::new(c.iter().map(|&x| x as i32).collect::<Vec<_>>().as_slice(), &dev);
    let (sq, sk) = (i32s(&cq)?, i32s(&ck)?);
    for d in [64usize, 256] {
        let var = |dims| rand_var(&dev, DType::BF16, dims);
        let (q, k, v) = (var((tq, HQ, d))?, var((tk, HKV, d))?, var((tk, HKV, d))?);
        let scale = 1.0 / (d as f32).sqrt();
        let run =
            |q: &Tensor, k: &Tensor, v: &Tensor| kaio_candle::flash_attn_varlen(q, k, v, &sq, &sk, 9, 9, scale, true);
        // Detached inputs: O alone, in a storage of its own size.
        let plain = run(&q.as_tensor().detach(), &k.as_tensor().detach(), &v.as_tensor().detach())?;
        assert!(!plain.track_op());
        assert_eq!(storage_len(&plain)?, tq * HQ * d, "D {d}: O alone");
        // One tracked input is enough for the packed output and a backward.
        let tracked = run(&q.as_tensor().detach(), &k.as_tensor().detach(), v.as_tensor())?;
        assert_eq!(storage_len(&tracked)?, tq * HQ * d + 2 * HQ * tq, "D {d}: O and the LSE");
        let err = rel(&plain, &tracked)?;
        assert!(err <= o_tol(DType::BF16), "D {d}: O with and without the LSE: {err:e}");
        let grads = f32(&tracked)?.sum_all()?.backward();
        if d == 64 {
            let grads = grads?;
            assert!(grads.get(q.as_tensor()).is_none() && grads.get(v.as_tensor()).is_some(), "only v tracks");
        } else {
            // D 256 runs forward; its backward names the backward's head dims.
            let e = grads.unwrap_err().to_string();
            let named = e.contains("kaio-candle::flash_attn_varlen_backward") && e.contains("head_dim is 256");
            assert!(named && e.contains("[32, 64, 96, 128]"), "{e}");
        }
    }
    Ok(())
}
