//! kaio-candle's quantized matmuls (INT8 W8A8, INT4 W4A16 in KAIO's
//! signed-nibble format, the fused INT8 and INT4 QKV projections) on candle's
//! own CUDA tensors, against an f64 reference computed on the host from the
//! very same (rounded) inputs. Skipped, saying why, where candle has no CUDA
//! device (CI, the fake driver); the reference helpers are checked on the CPU.
#![cfg(feature = "cuda")]

use candle_core::{DType, Device, Result, Tensor, Var};

mod common;
use common::{gpu, max_rel, offset_view, padded, Rng};

/// A U8 tensor holding the i8 `values` (candle has no i8 dtype), `pad`
/// bytes into its storage.
fn i8_tensor(values: &[i8], dims: &[usize], pad: usize, dev: &Device) -> Result<Tensor> {
    let mut all = vec![0u8; pad];
    all.extend(values.iter().map(|&v| v as u8));
    offset_view(&Tensor::from_vec(all, values.len() + pad, dev)?, dims, pad)
}

fn random_i8(rng: &mut Rng, n: usize) -> Vec<i8> {
    (0..n).map(|_| rng.next() as i8).collect()
}

/// `t` on the host, as f64 (f16 and bf16 widen exactly).
fn host(t: &Tensor) -> Result<Vec<f64>> {
    Ok(t.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?.into_iter().map(f64::from).collect())
}

/// `v` rounded once to `dtype` (f16 and bf16 round to nearest even).
fn round_to(dtype: DType, v: f32) -> f64 {
    match dtype {
        DType::F16 => half::f16::from_f32(v).to_f64(),
        DType::BF16 => half::bf16::from_f32(v).to_f64(),
        _ => v as f64,
    }
}

/// KAIO's signed nibble (k % 8 of `word`), -8..=7.
fn nibble(word: u32, k: usize) -> i32 {
    let q = ((word >> (4 * (k % 8))) & 15) as i32;
    if q >= 8 {
        q - 16
    } else {
        q
    }
}

/// The INT4 weight W (K x N, row-major) that `qweight` [K/8, N] and
/// `scales` [K/g, N] stand for, each value rounded once to `dtype`.
fn int4_weight(qweight: &[u32], scales: &[f64], k: usize, n: usize, g: usize, dtype: DType) -> Vec<f64> {
    let mut w = vec![0.0; k * n];
    for kk in 0..k {
        for nn in 0..n {
            let q = nibble(qweight[(kk / 8) * n + nn], kk);
            // q·s is exact in f32 (a 4-bit times an 8- or 11-bit significand).
            w[kk * n + nn] = round_to(dtype, q as f32 * scales[(kk / g) * n + nn] as f32);
        }
    }
    w
}

/// `x` (M x K) · `w` (K x N), in f64.
fn matmul_kn(x: &[f64], w: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for kk in 0..k {
            let a = x[i * k + kk];
            if a == 0.0 {
                continue;
            }
            let row = &w[kk * n..(kk + 1) * n];
            for (cj, wj) in c[i * n..(i + 1) * n].iter_mut().zip(row) {
                *cj += a * wj;
            }
        }
    }
    c
}

/// One random INT4 weight: (qweight words [K/8, N], scales [K/g, N] in
/// `dtype` as tensors, scales as rounded host values).
fn random_int4(
    rng: &mut Rng,
    k: usize,
    n: usize,
    g: usize,
    dtype: DType,
    dev: &Device,
) -> Result<(Tensor, Vec<u32>, Tensor, Vec<f64>)> {
    let words: Vec<u32> = (0..k / 8 * n).map(|_| rng.next() as u32).collect();
    let qw = Tensor::from_vec(words.clone(), (k / 8, n), dev)?;
    let s: Vec<f32> = (0..k / g * n).map(|_| (0.002 + 0.048 * rng.uniform()) as f32).collect();
    let sc = Tensor::from_vec(s, (k / g, n), dev)?.to_dtype(dtype)?;
    let sh = host(&sc)?;
    Ok((qw, words, sc, sh))
}

#[test]
fn matmul_int8_matches_an_f64_reference() -> Result<()> {
    let Some(dev) = gpu("matmul_int8_matches_an_f64_reference") else { return Ok(()) };
    let mut rng = Rng(1);
    // (A's dims, N, A's pad, B's pad). K a multiple of 16; M and N free. A
    // pad of 16 bytes keeps the start aligned, 3 or 5 makes it copied.
    let cases: &[(&[usize], usize, usize, usize)] =
        &[(&[1, 16], 8, 0, 0), (&[7, 48], 24, 16, 3), (&[2, 3, 64], 13, 5, 16), (&[65, 1024], 136, 0, 0)];
    for &(adims, n, pa, pb) in cases {
        let k = *adims.last().unwrap();
        let m: usize = adims[..adims.len() - 1].iter().product();
        let (av, bv) = (random_i8(&mut rng, m * k), random_i8(&mut rng, n * k));
        let a = i8_tensor(&av, adims, pa, &dev)?;
        let b = i8_tensor(&bv, &[n, k], pb, &dev)?;
        let per_col: Vec<f32> = (0..n).map(|_| (1e-3 + 2e-2 * rng.uniform()) as f32).collect();
        let scales = [
            ("scalar", Tensor::new(0.01f32, &dev)?, vec![0.01f32; n]),
            ("[1]", Tensor::new(&[0.03f32], &dev)?, vec![0.03f32; n]),
            ("[N]", padded(per_col.clone(), &[n], 1, DType::F32, &dev)?, per_col),
        ];
        for (what, s, sv) in scales {
            let got = kaio_candle::matmul_int8(&a, &b, &s)?;
            let mut want_dims = adims.to_vec();
            *want_dims.last_mut().unwrap() = n;
            assert_eq!(got.dims(), &want_dims[..], "{adims:?} x [{n}, {k}] scale {what}");
            assert_eq!(got.dtype(), DType::F32);
            let got = host(&got)?;
            for i in 0..m {
                for j in 0..n {
                    let acc: i64 = (0..k).map(|kk| av[i * k + kk] as i64 * bv[j * k + kk] as i64).sum();
                    let want = acc as f64 * sv[j] as f64;
                    let g = got[i * n + j];
                    // Exact int32 sums, then two or three f32 roundings.
                    assert!(
                        (g - want).abs() <= 1e-6 * want.abs(),
                        "{adims:?} x [{n}, {k}] scale {what} ({i}, {j}): {g} vs {want}"
                    );
                }
            }
        }
    }
    Ok(())
}

#[test]
fn matmul_int8_scaled_applies_row_and_column_scales() -> Result<()> {
    let Some(dev) = gpu("matmul_int8_scaled_applies_row_and_column_scales") else { return Ok(()) };
    let mut rng = Rng(2);
    let (m, n, k) = (9usize, 16usize, 32usize);
    let (av, bv) = (random_i8(&mut rng, m * k), random_i8(&mut rng, n * k));
    let a = i8_tensor(&av, &[m, k], 0, &dev)?;
    let b = i8_tensor(&bv, &[n, k], 0, &dev)?;
    let sa: Vec<f32> = (0..m).map(|_| (0.5 + rng.uniform()) as f32).collect();
    let sb: Vec<f32> = (0..n).map(|_| (1e-3 + 1e-2 * rng.uniform()) as f32).collect();
    let (sat, sbt) = (Tensor::new(sa.as_slice(), &dev)?, Tensor::new(sb.as_slice(), &dev)?);
    for (what, ta, tb) in
        [("both", Some(&sat), Some(&sbt)), ("sa", Some(&sat), None), ("sb", None, Some(&sbt)), ("none", None, None)]
    {
        let got = host(&kaio_candle::matmul_int8_scaled(&a, &b, ta, tb)?)?;
        for i in 0..m {
            for j in 0..n {
                let acc: i64 = (0..k).map(|kk| av[i * k + kk] as i64 * bv[j * k + kk] as i64).sum();
                let want = acc as f64 * ta.map_or(1.0, |_| sa[i] as f64) * tb.map_or(1.0, |_| sb[j] as f64);
                let g = got[i * n + j];
                assert!((g - want).abs() <= 1e-6 * want.abs(), "{what} ({i}, {j}): {g} vs {want}");
            }
        }
    }
    Ok(())
}

#[test]
fn matmul_int4_matches_an_f64_reference() -> Result<()> {
    let Some(dev) = gpu("matmul_int4_matches_an_f64_reference") else { return Ok(()) };
    let mut rng = Rng(3);
    // (A's dims, N, group, A's pad). K a multiple of 32, N of 8; M = 17 is
    // past the decode kernel's 16 rows; g = K = 384 is no power of two.
    let cases: &[(&[usize], usize, usize, usize)] = &[
        (&[1, 32], 8, 32, 0),
        (&[3, 256], 64, 128, 8),
        (&[17, 512], 72, 64, 0),
        (&[5, 384], 40, 384, 3),
        (&[2, 3, 256], 16, 256, 0),
    ];
    for dtype in [DType::F16, DType::BF16] {
        for &(adims, n, g, pad) in cases {
            let k = *adims.last().unwrap();
            let m: usize = adims[..adims.len() - 1].iter().product();
            let av: Vec<f32> = (0..m * k).map(|_| rng.normal()).collect();
            let a = padded(av, adims, pad, dtype, &dev)?;
            let (qw, words, sc, sh) = random_int4(&mut rng, k, n, g, dtype, &dev)?;
            let got = kaio_candle::matmul_int4(&a, &qw, &sc)?;
            let mut want_dims = adims.to_vec();
            *want_dims.last_mut().unwrap() = n;
            assert_eq!(got.dims(), &want_dims[..]);
            assert_eq!(got.dtype(), DType::F32);
            let w = int4_weight(&words, &sh, k, n, g, dtype);
            let want = matmul_kn(&host(&a)?, &w, m, k, n);
            let err = max_rel(&host(&got)?, &want) / (k as f64).sqrt();
            // f32 accumulation of the rounded operands' exact products.
            assert!(err < 1e-5, "{dtype:?} {adims:?} x [{k}, {n}] g{g}: error {err:e} per sqrt(K)");
        }
    }
    Ok(())
}

/// Checks one projection output against its f64 reference.
fn check_projection(what: &str, got: &Tensor, want: &[f64], lead: &[usize], n: usize) -> Result<()> {
    let mut dims = lead.to_vec();
    dims.push(n);
    assert_eq!(got.dims(), &dims[..], "{what}");
    assert_eq!(got.dtype(), DType::F16, "{what}");
    assert!(got.is_contiguous(), "{what}");
    // Each section of the packed output starts on 16 bytes.
    assert_eq!(got.layout().start_offset() % 8, 0, "{what}");
    let err = max_rel(&host(got)?, want);
    // One rounding to f16 (2^-11 relative) after f32 sums.
    assert!(err < 2e-3, "{what}: error {err:e}");
    Ok(())
}

#[test]
fn qkv_project_int8_matches_an_f64_reference() -> Result<()> {
    let Some(dev) = gpu("qkv_project_int8_matches_an_f64_reference") else { return Ok(()) };
    let mut rng = Rng(4);
    // (x's dims, [N_q, N_k, N_v], x's pad). K a multiple of 32, N_p of 4.
    let cases: &[(&[usize], [usize; 3], usize)] = &[
        (&[1, 32], [8, 4, 4], 0),
        (&[5, 256], [64, 32, 32], 3),
        (&[17, 1024], [128, 64, 64], 8),
        (&[2, 3, 96], [12, 20, 4], 0),
    ];
    for &(xdims, ns, pad) in cases {
        let k = *xdims.last().unwrap();
        let lead = &xdims[..xdims.len() - 1];
        let m: usize = lead.iter().product();
        let xv: Vec<f32> = (0..m * k).map(|_| rng.normal()).collect();
        let x = padded(xv, xdims, pad, DType::F16, &dev)?;
        let xh = host(&x)?;
        // Scales that keep the outputs near unit size.
        let unit = 1.0 / (73.0 * (k as f64).sqrt());
        let mut w = Vec::new();
        let mut wt = Vec::new();
        for &n in &ns {
            let v = random_i8(&mut rng, k * n);
            wt.push(i8_tensor(&v, &[k, n], 0, &dev)?);
            w.push(v.iter().map(|&q| q as f64).collect::<Vec<_>>());
        }
        let sq = Tensor::new(unit as f32, &dev)?;
        let sk = Tensor::new(&[(2.0 * unit) as f32], &dev)?;
        let svv: Vec<f32> = (0..ns[2]).map(|_| ((0.5 + rng.uniform()) * unit) as f32).collect();
        let sv = Tensor::new(svv.as_slice(), &dev)?;
        let col_scales = [vec![unit as f32; ns[0]], vec![(2.0 * unit) as f32; ns[1]], svv];
        let (q, kk, v) = kaio_candle::qkv_project_int8(&x, &wt[0], &wt[1], &wt[2], &sq, &sk, &sv)?;
        for (p, (name, got)) in [("q", &q), ("k", &kk), ("v", &v)].into_iter().enumerate() {
            let mut want = matmul_kn(&xh, &w[p], m, k, ns[p]);
            for (i, c) in want.iter_mut().enumerate() {
                *c *= col_scales[p][i % ns[p]] as f64;
            }
            check_projection(&format!("qkv int8 {name} {xdims:?} {ns:?}"), got, &want, lead, ns[p])?;
        }
    }
    Ok(())
}

#[test]
fn qkv_project_int4_matches_an_f64_reference() -> Result<()> {
    let Some(dev) = gpu("qkv_project_int4_matches_an_f64_reference") else { return Ok(()) };
    let mut rng = Rng(5);
    // (x's dims, [N_q, N_k, N_v], group, x's pad). K a multiple of 32, N_p of 8.
    let cases: &[(&[usize], [usize; 3], usize, usize)] = &[
        (&[1, 32], [8, 8, 8], 32, 0),
        (&[3, 256], [64, 32, 32], 128, 3),
        (&[17, 512], [32, 16, 16], 64, 0),
        (&[2, 3, 96], [16, 8, 24], 96, 8),
    ];
    for dtype in [DType::F16, DType::BF16] {
        for &(xdims, ns, g, pad) in cases {
            let k = *xdims.last().unwrap();
            let lead = &xdims[..xdims.len() - 1];
            let m: usize = lead.iter().product();
            let xv: Vec<f32> = (0..m * k).map(|_| rng.normal()).collect();
            let x = padded(xv, xdims, pad, dtype, &dev)?;
            let xh = host(&x)?;
            let mut qw = Vec::new();
            let mut sc = Vec::new();
            let mut w = Vec::new();
            for &n in &ns {
                let (t, words, s, sh) = random_int4(&mut rng, k, n, g, dtype, &dev)?;
                w.push(int4_weight(&words, &sh, k, n, g, dtype));
                qw.push(t);
                sc.push(s);
            }
            let (q, kk, v) = kaio_candle::qkv_project_int4(&x, &qw[0], &qw[1], &qw[2], &sc[0], &sc[1], &sc[2])?;
            for (p, (name, got)) in [("q", &q), ("k", &kk), ("v", &v)].into_iter().enumerate() {
                let want = matmul_kn(&xh, &w[p], m, k, ns[p]);
                check_projection(&format!("qkv int4 {dtype:?} {name} {xdims:?} {ns:?} g{g}"), got, &want, lead, ns[p])?;
            }
        }
    }
    Ok(())
}

#[test]
fn empty_inputs_give_empty_results() -> Result<()> {
    let Some(dev) = gpu("empty_inputs_give_empty_results") else { return Ok(()) };
    let a = Tensor::zeros((0, 32), DType::U8, &dev)?;
    let b = Tensor::zeros((8, 32), DType::U8, &dev)?;
    assert_eq!(kaio_candle::matmul_int8(&a, &b, &Tensor::new(1f32, &dev)?)?.dims(), &[0, 8]);
    let x = Tensor::zeros((0, 32), DType::F16, &dev)?;
    let w = Tensor::zeros((32, 4), DType::U8, &dev)?;
    let s = Tensor::new(1f32, &dev)?;
    let (q, k, v) = kaio_candle::qkv_project_int8(&x, &w, &w, &w, &s, &s, &s)?;
    assert_eq!((q.dims(), k.dims(), v.dims()), (&[0usize, 4][..], &[0usize, 4][..], &[0usize, 4][..]));
    Ok(())
}

#[test]
fn wrong_inputs_get_clear_errors() -> Result<()> {
    let Some(dev) = gpu("wrong_inputs_get_clear_errors") else { return Ok(()) };
    let err = |r: Result<Tensor>| r.unwrap_err().to_string();
    let err3 = |r: Result<(Tensor, Tensor, Tensor)>| r.unwrap_err().to_string();
    let one = Tensor::new(1f32, &dev)?;

    // INT8: B must be [N, K]; a is i8 bytes; K per libkaio; forward only.
    let a = Tensor::zeros((4, 32), DType::U8, &dev)?;
    let e = err(kaio_candle::matmul_int8(&a, &Tensor::zeros((32, 16), DType::U8, &dev)?, &one));
    assert!(e.contains("kaio-candle::matmul_int8") && e.contains("K differs") && e.contains("nn.Linear"), "{e}");
    let b = Tensor::zeros((8, 32), DType::U8, &dev)?;
    let e = err(kaio_candle::matmul_int8(&Tensor::zeros((4, 32), DType::F16, &dev)?, &b, &one));
    assert!(e.contains("'a' is F16") && e.contains("U8"), "{e}");
    let e = err(kaio_candle::matmul_int8(
        &Tensor::zeros((4, 24), DType::U8, &dev)?,
        &Tensor::zeros((8, 24), DType::U8, &dev)?,
        &one,
    ));
    assert!(e.contains("kaio-candle::matmul_int8") && e.contains("multiple of 16"), "{e}");
    let e = err(kaio_candle::matmul_int8(&a, &b, &Tensor::ones(3, DType::F32, &dev)?));
    assert!(e.contains("'scale'") && e.contains("N = 8"), "{e}");
    let var = Var::ones(8, DType::F32, &dev)?;
    let e = err(kaio_candle::matmul_int8(&a, &b, var.as_tensor()));
    assert!(e.contains("'scale'") && e.contains("scale.detach()"), "{e}");
    let e = err(kaio_candle::matmul_int8_scaled(&a, &b, Some(&Tensor::ones(3, DType::F32, &dev)?), None));
    assert!(e.contains("'sa'") && e.contains("expected 4 values"), "{e}");

    // INT4: the shapes of qweight and scales, the dtype of scales, the group.
    let a = Tensor::zeros((2, 256), DType::F16, &dev)?;
    let qw = Tensor::zeros((32, 16), DType::U32, &dev)?;
    let sc = Tensor::zeros((2, 16), DType::F16, &dev)?;
    kaio_candle::matmul_int4(&a, &qw, &sc)?;
    let e = err(kaio_candle::matmul_int4(&a, &Tensor::zeros((16, 16), DType::U32, &dev)?, &sc));
    assert!(e.contains("'qweight'") && e.contains("[K/8, N]"), "{e}");
    let e = err(kaio_candle::matmul_int4(&a, &qw, &Tensor::zeros((3, 16), DType::F16, &dev)?));
    assert!(e.contains("'scales'") && e.contains("does not divide K"), "{e}");
    let e = err(kaio_candle::matmul_int4(&a, &qw, &sc.to_dtype(DType::F32)?));
    assert!(e.contains("'scales' is F32") && e.contains("F16"), "{e}");
    let e = err(kaio_candle::matmul_int4(&a, &qw, &Tensor::zeros((16, 16), DType::F16, &dev)?));
    assert!(e.contains("kaio-candle::matmul_int4") && e.contains("group_size is 16"), "{e}");
    let e = err(kaio_candle::matmul_int4(
        &a,
        &Tensor::zeros((32, 12), DType::U32, &dev)?,
        &Tensor::zeros((2, 12), DType::F16, &dev)?,
    ));
    assert!(e.contains("kaio-candle::matmul_int4") && e.contains("multiple of 8"), "{e}");
    let e = err(kaio_candle::matmul_int4(&a.t()?, &qw, &sc));
    assert!(e.contains("'a'") && e.contains(".contiguous()"), "{e}");

    // QKV int8: every held tensor is checked like an input.
    let x = Tensor::zeros((3, 64), DType::F16, &dev)?;
    let w = Tensor::zeros((64, 8), DType::U8, &dev)?;
    let cpu_w = Tensor::zeros((64, 8), DType::U8, &Device::Cpu)?;
    let e = err3(kaio_candle::qkv_project_int8(&x, &w, &cpu_w, &w, &one, &one, &one));
    assert!(e.contains("kaio-candle::qkv_project_int8") && e.contains("'wk' is not a CUDA tensor"), "{e}");
    let e =
        err3(kaio_candle::qkv_project_int8(&x, &w, &w, &Tensor::zeros((8, 64), DType::U8, &dev)?, &one, &one, &one));
    assert!(e.contains("'wv'") && e.contains("K differs") && e.contains("KAIO's layout"), "{e}");
    let e = err3(kaio_candle::qkv_project_int8(
        &x,
        &Tensor::zeros((8, 64), DType::U8, &dev)?.t()?,
        &w,
        &w,
        &one,
        &one,
        &one,
    ));
    assert!(e.contains("'wq'") && e.contains(".contiguous()"), "{e}");
    let e = err3(kaio_candle::qkv_project_int8(&x, &w, &w, &w, &one, &Tensor::ones(3, DType::F32, &dev)?, &one));
    assert!(e.contains("'sk'") && e.contains("N_k = 8"), "{e}");
    let e = err3(kaio_candle::qkv_project_int8(&x.to_dtype(DType::BF16)?, &w, &w, &w, &one, &one, &one));
    assert!(e.contains("'x' is BF16") && e.contains("F16"), "{e}");
    let xv = Var::zeros((3, 64), DType::F16, &dev)?;
    let e = err3(kaio_candle::qkv_project_int8(xv.as_tensor(), &w, &w, &w, &one, &one, &one));
    assert!(e.contains("'x'") && e.contains("x.detach()"), "{e}");
    let e = err3(kaio_candle::qkv_project_int8(
        &Tensor::zeros((3, 48), DType::F16, &dev)?,
        &Tensor::zeros((48, 8), DType::U8, &dev)?,
        &w,
        &w,
        &one,
        &one,
        &one,
    ));
    assert!(e.contains("K differs"), "{e}");

    // QKV int4: one group size for all three.
    let x = Tensor::zeros((1, 256), DType::F16, &dev)?;
    let s1 = Tensor::zeros((1, 16), DType::F16, &dev)?;
    let e = err3(kaio_candle::qkv_project_int4(&x, &qw, &qw, &qw, &sc, &s1, &sc));
    assert!(e.contains("kaio-candle::qkv_project_int4") && e.contains("one group size"), "{e}");
    let e = err3(kaio_candle::qkv_project_int4(&x, &qw, &qw, &qw, &sc, &sc, &sc.to_dtype(DType::BF16)?));
    assert!(e.contains("'sv' is BF16"), "{e}");
    Ok(())
}

/// The host reference itself: nibbles are two's complement, K runs along
/// each word's fields, and the weight is q · s rounded once.
#[test]
fn the_int4_reference_reads_signed_nibbles() {
    let word = 0x7f80_1234u32; // fields k = 0..8: 4 3 2 1 0 8 15 7
    let q: Vec<i32> = (0..8).map(|k| nibble(word, k)).collect();
    assert_eq!(q, [4, 3, 2, 1, 0, -8, -1, 7]);
    // K = 16, N = 1, g = 8: two words, two scales.
    let w = int4_weight(&[word, 0x1111_1111], &[0.5, 0.25], 16, 1, 8, DType::F32);
    assert_eq!(&w[..8], &[2.0, 1.5, 1.0, 0.5, 0.0, -4.0, -0.5, 3.5]);
    assert_eq!(&w[8..], &[0.25; 8]);
    // 7 · 0.1 rounds to f16 and to bf16.
    let r = int4_weight(&[7], &[0.1f32 as f64], 8, 1, 8, DType::F16)[0];
    assert_eq!(r, half::f16::from_f32(7.0 * 0.1f32).to_f64());
    assert_ne!(r, 7.0 * 0.1f32 as f64);
    let r = int4_weight(&[7], &[0.1f32 as f64], 8, 1, 8, DType::BF16)[0];
    assert_eq!(r, half::bf16::from_f32(7.0 * 0.1f32).to_f64());
    assert_eq!(matmul_kn(&[1.0, 2.0], &[3.0, 4.0], 1, 2, 1), vec![11.0]);
}
