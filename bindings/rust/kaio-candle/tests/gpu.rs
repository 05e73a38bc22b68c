//! kaio-candle's ops on candle's own CUDA tensors, against candle's own ops
//! (cuBLAS matmul, candle-nn's norms and activations) on the same inputs.
//! Skipped, saying why, where candle has no CUDA device (CI, the fake driver).
#![cfg(feature = "cuda")]

use candle_core::{DType, Device, Result, Tensor, Var};

mod common;
use common::{gpu, max_rel_tensors, offset_view};

/// A `rows x cols` tensor of `dtype` that starts `pad` elements into a
/// larger storage, so every op sees a non-zero `start_offset`.
fn offset_randn(dev: &Device, dtype: DType, dims: &[usize], pad: usize) -> Result<Tensor> {
    let n: usize = dims.iter().product();
    offset_view(&Tensor::randn(0f32, 1., n + pad, dev)?.to_dtype(dtype)?, dims, pad)
}

/// A's dims and N. libkaio's tensor-core matmul needs K and N multiples of
/// 8; M is free (1, primes, tile +- 1).
const MATMUL_SHAPES: &[(&[usize], usize)] = &[
    (&[1, 8], 8),
    (&[7, 16], 8),
    (&[129, 264], 64),
    (&[2, 3, 17, 40], 24),
    (&[127, 4096], 4096),
];

/// The four tensor-core matmuls, with their input dtype.
const MATMUL_VARIANTS: [(&str, DType, fn(&Tensor, &Tensor) -> Result<Tensor>); 4] = [
    ("matmul_tc", DType::F16, kaio_candle::matmul_tc),
    ("matmul_tc_async", DType::F16, kaio_candle::matmul_tc_async),
    ("matmul_tc_bf16", DType::BF16, kaio_candle::matmul_tc_bf16),
    ("matmul_tc_bf16_async", DType::BF16, kaio_candle::matmul_tc_bf16_async),
];

#[test]
fn matmul_tc_variants_match_candles_matmul() -> Result<()> {
    let Some(dev) = gpu("matmul_tc_variants_match_candles_matmul") else { return Ok(()) };
    for (name, dtype, f) in MATMUL_VARIANTS {
        for &(adims, n) in MATMUL_SHAPES {
            let k = *adims.last().unwrap();
            // B starts 16 bytes in; A at an odd element, which is copied.
            let a = offset_randn(&dev, dtype, adims, 3)?;
            let b = offset_randn(&dev, dtype, &[k, n], 8)?;
            let got = f(&a, &b)?;
            assert_eq!(got.dtype(), DType::F32);
            // candle's own (cuBLAS) f32 matmul of the same rounded inputs.
            let a32 = a.to_dtype(DType::F32)?;
            let want = a32.broadcast_matmul(&b.to_dtype(DType::F32)?)?;
            assert_eq!(got.dims(), want.dims(), "{name} {adims:?} x [{k}, {n}]");
            let err = max_rel_tensors(&got, &want)? / (k as f64).sqrt();
            assert!(err < 1e-5, "{name} {adims:?} x [{k}, {n}]: error {err:e} per sqrt(K)");
            // B as the .t() of an nn.Linear-style [N, K] weight: read transposed, no copy.
            let w = offset_randn(&dev, dtype, &[n, k], 8)?;
            let got = f(&a, &w.t()?)?;
            let want = a32.broadcast_matmul(&w.to_dtype(DType::F32)?.t()?)?;
            let err = max_rel_tensors(&got, &want)? / (k as f64).sqrt();
            assert!(err < 1e-5, "{name} {adims:?} x [{n}, {k}]ᵀ: error {err:e} per sqrt(K)");
        }
    }
    Ok(())
}

#[test]
fn matmul_tc_backward_matches_candles_gradients() -> Result<()> {
    let Some(dev) = gpu("matmul_tc_backward_matches_candles_gradients") else { return Ok(()) };
    for (name, dtype, f) in MATMUL_VARIANTS {
        // M free (libkaio's backward needs it in 8s: the op pads), K and N in 8s.
        // The last case takes B as the .t() of an [N, K] Var (an nn.Linear weight).
        for &(m, k, n, bt) in &[(1usize, 8usize, 8usize, false), (7, 16, 8, false), (65, 136, 40, false), (64, 40, 24, false), (9, 24, 16, true)] {
            let a = Var::from_tensor(&Tensor::randn(0f32, 1., (m, k), &dev)?.to_dtype(dtype)?)?;
            let bdims = if bt { (n, k) } else { (k, n) };
            let b = Var::from_tensor(&Tensor::randn(0f32, 1., bdims, &dev)?.to_dtype(dtype)?)?;
            let as_b = |t: &Tensor| if bt { t.t() } else { Ok(t.clone()) };
            let w = Tensor::randn(0f32, 1., (m, n), &dev)?;
            let ours = (f(a.as_tensor(), &as_b(b.as_tensor())?)? * &w)?.sum_all()?.backward()?;
            // candle's own: the same product in f32, gradients cast back.
            let a32 = Var::from_tensor(&a.as_tensor().to_dtype(DType::F32)?)?;
            let b32 = Var::from_tensor(&b.as_tensor().to_dtype(DType::F32)?)?;
            let theirs = (a32.as_tensor().matmul(&as_b(b32.as_tensor())?)? * &w)?.sum_all()?.backward()?;
            for (which, mine, theirs, reduced) in [
                ("dA", ours.get(a.as_tensor()), theirs.get(a32.as_tensor()), n),
                ("dB", ours.get(b.as_tensor()), theirs.get(b32.as_tensor()), m),
            ] {
                let mine = mine.expect("a gradient");
                assert_eq!(mine.dtype(), dtype, "{name} {which}");
                let err = max_rel_tensors(mine, theirs.expect("a gradient"))?;
                // dC is rounded to the input type (eps each), the sum of
                // `reduced` products is f32, the result is rounded once:
                // about eps * (1 + sqrt(reduced)) of unit-scale values, x3.
                let eps = if dtype == DType::F16 { 2f64.powi(-11) } else { 2f64.powi(-8) };
                let tol = 3.0 * eps * (1.0 + (reduced as f64).sqrt());
                assert!(err < tol, "{name} {which} {m}x{k}x{n}: error {err:e} > {tol:e}");
            }
        }
    }
    Ok(())
}

#[test]
fn norms_and_activations_match_candle_nn() -> Result<()> {
    let Some(dev) = gpu("norms_and_activations_match_candle_nn") else { return Ok(()) };
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let tol = match dtype {
            DType::F32 => 1e-5,
            DType::F16 => 2e-3,
            _ => 1.6e-2,
        };
        for dims in [&[1usize, 1][..], &[3, 7, 129], &[5, 4097], &[2, 1, 8192]] {
            let cols = *dims.last().unwrap();
            let x = offset_randn(&dev, dtype, dims, 7)?;
            let g = offset_randn(&dev, dtype, dims, 1)?;
            let w = offset_randn(&dev, dtype, &[cols], 2)?;
            let check = |what: &str, got: Tensor, want: Tensor| -> Result<()> {
                assert_eq!(got.dims(), want.dims(), "{what} {dtype:?} {dims:?}");
                assert_eq!(got.dtype(), dtype);
                let err = max_rel_tensors(&got, &want.to_dtype(DType::F64)?)?;
                assert!(err <= tol, "{what} {dtype:?} {dims:?}: error {err:e} > {tol:e}");
                Ok(())
            };
            // References in f32 from the same rounded inputs.
            let (x32, g32, w32) = (x.to_dtype(DType::F32)?, g.to_dtype(DType::F32)?, w.to_dtype(DType::F32)?);
            check("rmsnorm", kaio_candle::rmsnorm(&x, &w, 1e-6)?, candle_nn::ops::rms_norm(&x32, &w32, 1e-6)?)?;
            check("softmax", kaio_candle::softmax_last_dim(&x)?, candle_nn::ops::softmax_last_dim(&x32)?)?;
            check("silu_gate", kaio_candle::silu_gate(&x, &g)?, (candle_nn::ops::silu(&x32)? * &g32)?)?;
            check("gelu erf", kaio_candle::gelu(&x, kaio_candle::GeluMode::Erf)?, x32.gelu_erf()?)?;
            check("gelu tanh", kaio_candle::gelu(&x, kaio_candle::GeluMode::Tanh)?, x32.gelu()?)?;
        }
    }
    // Row ops take a row stride (a narrowed last dimension); element-wise ops say to copy.
    let x = Tensor::randn(0f32, 1., (9, 100), &dev)?.narrow(1, 10, 64)?;
    let w = Tensor::ones(64, DType::F32, &dev)?;
    let err = max_rel_tensors(&kaio_candle::rmsnorm(&x, &w, 1e-5)?, &candle_nn::ops::rms_norm(&x.contiguous()?, &w, 1e-5)?)?;
    assert!(err < 1e-5, "strided rmsnorm: {err:e}");
    let e = kaio_candle::silu_gate(&x, &x).unwrap_err().to_string();
    assert!(e.contains("kaio-candle::silu_gate") && e.contains(".contiguous()"), "{e}");
    Ok(())
}

#[test]
fn wrong_inputs_get_clear_errors() -> Result<()> {
    let Some(dev) = gpu("wrong_inputs_get_clear_errors") else { return Ok(()) };
    let a = Tensor::randn(0f32, 1., (8, 16), &dev)?.to_dtype(DType::F16)?;
    let bt = Tensor::randn(0f32, 1., (1, 8), &dev)?.to_dtype(DType::F16)?.broadcast_as((16, 8))?;
    let e = kaio_candle::matmul_tc(&a, &bt).unwrap_err().to_string();
    assert!(e.contains("kaio-candle::matmul_tc") && e.contains("'b'") && e.contains(".contiguous()"), "{e}");
    let e = kaio_candle::matmul_tc_bf16(&a, &a.t()?.contiguous()?).unwrap_err().to_string();
    assert!(e.contains("'a' is F16") && e.contains("BF16"), "{e}");
    let e = kaio_candle::matmul_tc(&a, &a).unwrap_err().to_string();
    assert!(e.contains("K differs"), "{e}");
    let b5 = Tensor::zeros((16, 5), DType::F16, &dev)?;
    let e = kaio_candle::matmul_tc(&a, &b5).unwrap_err().to_string();
    assert!(e.contains("kaio-candle::matmul_tc") && e.contains("multiple of 8"), "{e}");
    let cpu = Tensor::zeros((4, 4), DType::F32, &Device::Cpu)?;
    let e = kaio_candle::softmax_last_dim(&cpu).unwrap_err().to_string();
    assert!(e.contains("CUDA tensors only"), "{e}");
    let e = kaio_candle::rmsnorm(&a.to_dtype(DType::F32)?, &Tensor::ones(15, DType::F32, &dev)?, 1e-6).unwrap_err().to_string();
    assert!(e.contains("'weight'") && e.contains("[16]"), "{e}");
    Ok(())
}

#[test]
fn empty_tensors_give_empty_results() -> Result<()> {
    let Some(dev) = gpu("empty_tensors_give_empty_results") else { return Ok(()) };
    let x = Tensor::zeros((0, 32), DType::F32, &dev)?;
    assert_eq!(kaio_candle::softmax_last_dim(&x)?.dims(), &[0, 32]);
    let a = Tensor::zeros((0, 16), DType::F16, &dev)?;
    let b = Tensor::zeros((16, 8), DType::F16, &dev)?;
    assert_eq!(kaio_candle::matmul_tc(&a, &b)?.dims(), &[0, 8]);
    Ok(())
}
