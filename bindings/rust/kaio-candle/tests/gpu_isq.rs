//! The k-quants on candle's QTensor: in-situ quantization on the GPU
//! (`quantize_to_qtensor`), byte for byte against candle's own
//! `QTensor::quantize` of the same values on the CPU, and the dequant-matmul
//! (`quant_matmul`) against candle's `QMatMul` and against `x · dequant(w)ᵀ`
//! in f32. Skipped, saying why, where candle has no CUDA device (CI, the
//! fake driver); the input builders are checked on the CPU.
#![cfg(feature = "cuda")]

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{DType, Device, Module, Result, Tensor, Var};

mod common;
use common::{gpu, padded, to_f64, Rng};

const FORMATS: [GgmlDType; 4] = [GgmlDType::Q8_0, GgmlDType::Q4K, GgmlDType::Q5K, GgmlDType::Q6K];
const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// Random rows whose scale differs row to row (1e-3 .. 1e3).
fn random_values(rng: &mut Rng, rows: usize, cols: usize) -> Vec<f32> {
    let mut v = Vec::with_capacity(rows * cols);
    for r in 0..rows {
        let scale = 10f32.powi((r % 7) as i32 - 3);
        v.extend((0..cols).map(|_| rng.normal() * scale));
    }
    v
}

/// The smallest and largest magnitudes that `dtype` holds well, for the
/// edge rows: 1e-30 and 1e30 in f32 and bf16; in f16 (max 65504), a
/// subnormal and 6e4.
fn extremes(dtype: DType) -> (f32, f32) {
    match dtype {
        DType::F16 => (1e-7, 6e4),
        _ => (1e-30, 1e30),
    }
}

/// One row of 2048 values, eight superblocks of 256 (64 Q8_0 blocks) that
/// each hold an edge: all zeros; all -0.0; ordinary values with tiny ones
/// mixed in and a 32-value run of tiny ones; ordinary values with huge ones
/// mixed in; a zero, a -0.0 and two constant 32-value sub-blocks then
/// ordinary values; only tiny values; huge, tiny and ordinary values
/// alternating; ordinary values.
fn edge_row(rng: &mut Rng, tiny: f32, huge: f32) -> Vec<f32> {
    let mut v = Vec::with_capacity(2048);
    v.extend(std::iter::repeat_n(0.0f32, 256));
    v.extend(std::iter::repeat_n(-0.0f32, 256));
    for i in 0..256 {
        let t = if i % 7 == 3 || (64..96).contains(&i) {
            tiny * (1.0 + i as f32 / 256.0) * rng.sign()
        } else {
            rng.normal()
        };
        v.push(t);
    }
    for i in 0..256 {
        v.push(match i {
            5 | 130 => huge,
            77 => -huge,
            _ => rng.normal(),
        });
    }
    for i in 0..256 {
        v.push(match i / 32 {
            0 => 0.0,
            1 => -0.0,
            2 => 0.5,
            3 => -2.0,
            _ => rng.normal(),
        });
    }
    for _ in 0..256 {
        v.push(tiny * rng.normal());
    }
    for i in 0..256 {
        v.push(match i % 3 {
            0 => huge * rng.sign(),
            1 => tiny * rng.sign(),
            _ => rng.normal(),
        });
    }
    v.extend((0..256).map(|_| rng.normal()));
    v
}

/// candle's bytes for `x`: `QTensor::quantize` on a host copy. The copy is
/// made contiguous from offset 0 first: candle 0.11's quantize takes an f32
/// tensor's whole storage from its start, whatever its `start_offset` (a
/// narrowed f32 tensor fails a debug assertion in k_quants.rs, and a release
/// build would quantize other values).
fn candle_bytes(x: &Tensor, dtype: GgmlDType) -> Result<Vec<u8>> {
    let host = x.to_device(&Device::Cpu)?.force_contiguous()?;
    Ok(QTensor::quantize(&host, dtype)?.data()?.into_owned())
}

/// Quantizes `x` with kaio-candle and compares the bytes with candle's.
fn check_isq(what: &str, x: &Tensor, dtype: GgmlDType) -> Result<()> {
    let q = kaio_candle::quantize_to_qtensor(x, dtype)?;
    assert_eq!(q.dtype(), dtype, "{what}");
    assert_eq!(q.shape(), x.shape(), "{what}");
    assert!(q.device().is_cuda(), "{what}");
    let got = q.data()?.into_owned();
    let want = candle_bytes(x, dtype)?;
    assert_eq!(got.len(), want.len(), "{what}: {} bytes, candle {}", got.len(), want.len());
    if let Some(i) = got.iter().zip(&want).position(|(a, b)| a != b) {
        let bb = dtype.type_size();
        let blk = i / bb;
        panic!(
            "{what}: byte {i} (block {blk}, byte {} of it) differs\n ours:   {:02x?}\n candle: {:02x?}",
            i % bb,
            &got[blk * bb..(blk + 1) * bb],
            &want[blk * bb..(blk + 1) * bb]
        );
    }
    Ok(())
}

#[test]
fn isq_bytes_equal_candles_quantize() -> Result<()> {
    let Some(dev) = gpu("isq_bytes_equal_candles_quantize") else { return Ok(()) };
    let mut rng = Rng(11);
    for dims in [[1usize, 256], [3, 512], [17, 4096]] {
        let v = random_values(&mut rng, dims[0], dims[1]);
        for dtype in FLOATS {
            let x = Tensor::from_vec(v.clone(), &dims[..], &dev)?.to_dtype(dtype)?;
            for f in FORMATS {
                check_isq(&format!("{dtype:?} {dims:?} -> {f:?}"), &x, f)?;
            }
        }
    }
    // Q8_0 takes rows of any multiple of 32; rank 3 folds into rows.
    let x = Tensor::from_vec(random_values(&mut rng, 6, 96), (2, 3, 96), &dev)?;
    check_isq("F32 [2, 3, 96] -> Q8_0", &x, GgmlDType::Q8_0)?;
    Ok(())
}

#[test]
fn isq_bytes_equal_candles_at_the_edges() -> Result<()> {
    let Some(dev) = gpu("isq_bytes_equal_candles_at_the_edges") else { return Ok(()) };
    let mut rng = Rng(12);
    for dtype in FLOATS {
        let (tiny, huge) = extremes(dtype);
        let mut v = Vec::new();
        for _ in 0..3 {
            v.extend(edge_row(&mut rng, tiny, huge));
        }
        let x = Tensor::from_vec(v, (3, 2048), &dev)?.to_dtype(dtype)?;
        for f in FORMATS {
            check_isq(&format!("edges {dtype:?} -> {f:?}"), &x, f)?;
        }
    }
    Ok(())
}

#[test]
fn isq_takes_offsets_and_row_strides() -> Result<()> {
    let Some(dev) = gpu("isq_takes_offsets_and_row_strides") else { return Ok(()) };
    let mut rng = Rng(13);
    for dtype in FLOATS {
        let v = random_values(&mut rng, 6, 512);
        // Rows 1..5 of 6: 512 elements in, aligned, taken in place.
        let full = Tensor::from_vec(v.clone(), (6, 512), &dev)?.to_dtype(dtype)?;
        let rows = full.narrow(0, 1, 4)?;
        assert_eq!(rows.layout().start_offset(), 512);
        // 3 elements in: misaligned, copied first.
        let odd = padded(v[..4 * 512].to_vec(), &[4, 512], 3, dtype, &dev)?;
        // The first 256 columns of each row: a row stride of 512.
        let cols = full.narrow(1, 0, 256)?;
        assert_eq!(cols.layout().stride(), &[512, 1]);
        // The last 256 columns: a start 256 elements in and a row stride.
        let tail = full.narrow(1, 256, 256)?;
        for f in FORMATS {
            check_isq(&format!("{dtype:?} rows 1..5 -> {f:?}"), &rows, f)?;
            check_isq(&format!("{dtype:?} offset 3 -> {f:?}"), &odd, f)?;
            check_isq(&format!("{dtype:?} [6, 512][:, :256] -> {f:?}"), &cols, f)?;
            check_isq(&format!("{dtype:?} [6, 512][:, 256:] -> {f:?}"), &tail, f)?;
        }
    }
    Ok(())
}

/// The QTensor kaio-candle writes is a candle QTensor like any other:
/// candle's own kernels (QMatMul, dequantize) give the same results on it as
/// on the QTensor candle's `quantize` makes, bit for bit.
#[test]
fn isq_qtensors_run_in_candles_own_kernels() -> Result<()> {
    let Some(dev) = gpu("isq_qtensors_run_in_candles_own_kernels") else { return Ok(()) };
    let mut rng = Rng(14);
    let (n, k) = (64usize, 512usize);
    let w = Tensor::from_vec((0..n * k).map(|_| rng.normal()).collect::<Vec<_>>(), (n, k), &dev)?;
    let x = Tensor::from_vec((0..3 * k).map(|_| rng.normal()).collect::<Vec<_>>(), (3, k), &dev)?;
    for f in FORMATS {
        let ours = kaio_candle::quantize_to_qtensor(&w, f)?;
        let theirs = QTensor::quantize(&w, f)?;
        let same = |a: &Tensor, b: &Tensor| -> Result<bool> {
            let (a, b) = (a.flatten_all()?.to_vec1::<f32>()?, b.flatten_all()?.to_vec1::<f32>()?);
            Ok(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()))
        };
        assert!(same(&ours.dequantize(&dev)?, &theirs.dequantize(&dev)?)?, "{f:?} dequantize");
        let kq = kaio_candle::quant_matmul(&x, &ours)?;
        assert!(same(&kq, &kaio_candle::quant_matmul(&x, &theirs)?)?, "{f:?} quant_matmul");
        let (ours, theirs) = (QMatMul::from_qtensor(ours)?, QMatMul::from_qtensor(theirs)?);
        assert!(same(&ours.forward(&x)?, &theirs.forward(&x)?)?, "{f:?} QMatMul");
    }
    Ok(())
}

/// (N, K, x's leading dims, x's pad, formats).
type Case<'a> = (usize, usize, &'a [&'a [usize]], usize, &'a [GgmlDType]);

/// max |got - want| / rms(want), in f64 on the host.
fn rms_rel(got: &Tensor, want: &Tensor) -> Result<f64> {
    let (g, w) = (to_f64(got)?, to_f64(want)?);
    assert_eq!(g.len(), w.len());
    let rms = (w.iter().map(|v| v * v).sum::<f64>() / w.len() as f64).sqrt();
    Ok(g.iter().zip(&w).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max) / rms)
}

/// The error quant_matmul may show against f32 `x · dequant(w)ᵀ`, relative
/// to the output's RMS: f32 sums of exact products where x is f32 and M <=
/// 8; else the products see W (and an f32 x) rounded to f16, or W rounded
/// to bf16 for bf16 x (the largest error of unit-normal data is then a few
/// σ of sqrt(K)·u/√3·|x||w|, u = 2^-11 or 2^-8).
fn tolerance(dtype: DType, m: usize) -> f64 {
    match dtype {
        DType::F32 if m <= 8 => 1e-4,
        DType::BF16 => 3e-2,
        _ => 5e-3,
    }
}

#[test]
fn quant_matmul_matches_dequantized_f32_and_candles_qmatmul() -> Result<()> {
    let Some(dev) = gpu("quant_matmul_matches_dequantized_f32_and_candles_qmatmul") else { return Ok(()) };
    let mut rng = Rng(15);
    // (N, K, x's leading dims, x's pad, formats). M <= 8 runs the matvec
    // kernels, M > 8 the tensor-core path (any N). K = 512 gives Q6_K and
    // Q8_0 rows that end off 16 bytes (the streamed kernels' last window
    // reads candle's padding); K = 800 does for Q8_0 alone, with an odd N.
    let all = &FORMATS[..];
    let cases: &[Case] = &[
        (72, 512, &[&[1], &[3], &[8], &[9], &[17], &[2, 3]], 0, all),
        (72, 512, &[&[5], &[12]], 3, all),
        (256, 4096, &[&[1], &[5]], 8, all),
        (13, 800, &[&[1], &[12]], 0, &[GgmlDType::Q8_0]),
    ];
    for &(n, k, leads, pad, formats) in cases {
        let wv: Vec<f32> = (0..n * k).map(|_| rng.normal()).collect();
        let w32 = Tensor::from_vec(wv, (n, k), &dev)?;
        for &f in formats {
            // candle's own quantize (its CPU round trip), not ours.
            let w = std::sync::Arc::new(QTensor::quantize(&w32, f)?);
            let wd_t = w.dequantize(&dev)?.t()?;
            let qmm = QMatMul::from_arc(w.clone())?;
            for &lead in leads {
                let m: usize = lead.iter().product();
                let mut dims = lead.to_vec();
                dims.push(k);
                let xv: Vec<f32> = (0..m * k).map(|_| rng.normal()).collect();
                for dtype in FLOATS {
                    let what = format!("{f:?} N {n} K {k} x {dtype:?} {dims:?} pad {pad}");
                    let x = padded(xv.clone(), &dims, pad, dtype, &dev)?;
                    eprintln!("{what}");
                    let got = kaio_candle::quant_matmul(&x, &w)?;
                    dev.synchronize()?;
                    let mut out_dims = lead.to_vec();
                    out_dims.push(n);
                    assert_eq!(got.dims(), &out_dims[..], "{what}");
                    assert_eq!(got.dtype(), DType::F32, "{what}");
                    let want = x.to_dtype(DType::F32)?.broadcast_matmul(&wd_t)?;
                    let err = rms_rel(&got, &want)?;
                    let tol = tolerance(dtype, m);
                    assert!(err < tol, "{what} vs x·dequant(w)ᵀ: error {err:e} > {tol:e}");
                    if dtype == DType::F32 {
                        // candle quantizes x to Q8_1 (1/127 of each
                        // 32-value block's largest value) before its
                        // products, so it sits ~1e-2 from either.
                        // A fresh copy: candle's own kernels take a narrowed x
                        // as it is and fault on its misaligned start
                        // (CUDA_ERROR_MISALIGNED_ADDRESS, seen on the H100).
                        eprintln!("{what}: candle's QMatMul");
                        let theirs = qmm.forward(&x.force_contiguous()?)?;
                        dev.synchronize()?;
                        let err = rms_rel(&got, &theirs)?;
                        assert!(err < 5e-2, "{what} vs candle's QMatMul: error {err:e}");
                    }
                }
            }
            // f16 output: the same values rounded once.
            let x = Tensor::from_vec((0..3 * k).map(|_| rng.normal()).collect::<Vec<_>>(), (3, k), &dev)?;
            let h = kaio_candle::quant_matmul_as(&x, &w, DType::F16)?;
            assert_eq!(h.dtype(), DType::F16);
            let err = rms_rel(&h, &kaio_candle::quant_matmul(&x, &w)?)?;
            // One rounding to f16: 2^-11 of the largest outputs, ~4 RMS.
            assert!(err < 5e-3, "{f:?} N {n} K {k} f16 out: error {err:e}");
        }
    }
    Ok(())
}

#[test]
fn empty_tensors_give_empty_results() -> Result<()> {
    let Some(dev) = gpu("empty_tensors_give_empty_results") else { return Ok(()) };
    let q = kaio_candle::quantize_to_qtensor(&Tensor::zeros((0, 256), DType::F32, &dev)?, GgmlDType::Q4K)?;
    assert_eq!(q.shape().dims(), &[0, 256]);
    assert!(q.data()?.is_empty());
    let w = kaio_candle::quantize_to_qtensor(&Tensor::ones((8, 256), DType::F32, &dev)?, GgmlDType::Q6K)?;
    let y = kaio_candle::quant_matmul(&Tensor::zeros((0, 256), DType::F16, &dev)?, &w)?;
    assert_eq!(y.dims(), &[0, 8]);
    Ok(())
}

#[test]
fn wrong_inputs_get_clear_errors() -> Result<()> {
    let Some(dev) = gpu("wrong_inputs_get_clear_errors") else { return Ok(()) };
    let isq = |x: &Tensor, f: GgmlDType| kaio_candle::quantize_to_qtensor(x, f).unwrap_err().to_string();
    let x = Tensor::zeros((2, 512), DType::F32, &dev)?;
    let e = isq(&x, GgmlDType::Q4_0);
    assert!(e.contains("kaio-candle::quantize_to_qtensor") && e.contains("Q4_0") && e.contains("Q6K"), "{e}");
    let e = isq(&Tensor::zeros((2, 100), DType::F32, &dev)?, GgmlDType::Q4K);
    assert!(e.contains("'x'") && e.contains("multiple of 256") && e.contains("pad the rows to 256"), "{e}");
    let e = isq(&Tensor::zeros((2, 512), DType::U8, &dev)?, GgmlDType::Q8_0);
    assert!(e.contains("'x' is U8"), "{e}");
    let e = isq(&Tensor::zeros((512, 256), DType::F32, &dev)?.t()?, GgmlDType::Q4K);
    assert!(e.contains("'x'") && e.contains(".contiguous()"), "{e}");
    let e = isq(&x.to_device(&Device::Cpu)?, GgmlDType::Q6K);
    assert!(e.contains("'x'") && e.contains("CUDA"), "{e}");
    let e = isq(&Tensor::new(1f32, &dev)?, GgmlDType::Q8_0);
    assert!(e.contains("scalar"), "{e}");

    let w = kaio_candle::quantize_to_qtensor(&x, GgmlDType::Q4K)?;
    let qmm = |x: &Tensor, w: &QTensor| kaio_candle::quant_matmul(x, w).unwrap_err().to_string();
    let e = qmm(&Tensor::zeros((3, 256), DType::F32, &dev)?, &w);
    assert!(e.contains("kaio-candle::quant_matmul") && e.contains("K differs"), "{e}");
    let v = Var::zeros((3, 512), DType::F32, &dev)?;
    let e = qmm(v.as_tensor(), &w);
    assert!(e.contains("'x'") && e.contains("x.detach()"), "{e}");
    let e = qmm(&Tensor::zeros((3, 512), DType::U32, &dev)?, &w);
    assert!(e.contains("'x' is U32"), "{e}");
    let cpu_w = QTensor::quantize(&x.to_device(&Device::Cpu)?, GgmlDType::Q4K)?;
    let e = qmm(&Tensor::zeros((3, 512), DType::F32, &dev)?, &cpu_w);
    assert!(e.contains("'w'") && e.contains("CUDA"), "{e}");
    let w3 = kaio_candle::quantize_to_qtensor(&Tensor::zeros((2, 2, 512), DType::F32, &dev)?, GgmlDType::Q4K)?;
    let e = qmm(&Tensor::zeros((3, 512), DType::F32, &dev)?, &w3);
    assert!(e.contains("'w'") && e.contains("[N, K]"), "{e}");
    let e = kaio_candle::quant_matmul_as(&Tensor::zeros((3, 512), DType::F32, &dev)?, &w, DType::BF16)
        .unwrap_err()
        .to_string();
    assert!(e.contains("'out_dtype' is BF16"), "{e}");
    let e = qmm(&Tensor::zeros((512, 3), DType::F32, &dev)?.t()?, &w);
    assert!(e.contains("'x'") && e.contains(".contiguous()"), "{e}");
    Ok(())
}

/// The edge rows are what they say, and candle's quantize takes them (CPU).
#[test]
fn edge_rows_hold_their_edges() -> Result<()> {
    let mut rng = Rng(16);
    let v = edge_row(&mut rng, 1e-30, 1e30);
    assert_eq!(v.len(), 2048);
    assert!(v[..256].iter().all(|x| x.to_bits() == 0));
    assert!(v[256..512].iter().all(|x| x.to_bits() == (-0.0f32).to_bits()));
    assert!(v[512..768].iter().any(|x| x.abs() == 1e-30 * (1.0 + 3.0 / 256.0)));
    assert_eq!(v[768 + 5], 1e30);
    assert!(v[1024 + 64..1024 + 96].iter().all(|&x| x == 0.5));
    assert!(v[1280..1536].iter().all(|x| x.abs() < 1e-28));
    for f in FORMATS {
        let t = Tensor::from_vec(v.clone(), (1, 2048), &Device::Cpu)?;
        assert_eq!(candle_bytes(&t, f)?.len(), 2048 / f.block_size() * f.type_size());
    }
    // A narrowed host tensor is quantized from its own values.
    let t = Tensor::arange(0f32, 512., &Device::Cpu)?.reshape((2, 256))?;
    let row = t.narrow(0, 1, 1)?;
    let fresh = Tensor::arange(256f32, 512., &Device::Cpu)?.reshape((1, 256))?;
    assert_eq!(candle_bytes(&row, GgmlDType::Q8_0)?, candle_bytes(&fresh, GgmlDType::Q8_0)?);
    Ok(())
}
