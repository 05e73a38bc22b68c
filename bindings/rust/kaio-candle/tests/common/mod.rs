//! Helpers shared by the GPU test files: skipping without a GPU, seeded
//! inputs, tensors at a non-zero `start_offset`, and host-side comparisons.
// Each test file is its own crate and uses only some of these.
#![allow(dead_code)]

use std::io::Write;

use candle_core::{DType, Device, Result, Tensor};

/// Says on stderr (and in $KAIO_TEST_SKIP_LOG, which check.sh counts) that
/// `test` did not run, and why.
pub fn skip(test: &str, why: &str) {
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
    if let Ok(path) = std::env::var("KAIO_TEST_SKIP_LOG") {
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
            let _ = writeln!(f, "kaio-candle {test}: {why}");
        }
    }
}

/// candle's CUDA device 0, or None (the test skipped) where there is none or
/// libkaio runs on its fake driver.
pub fn gpu(test: &str) -> Option<Device> {
    if std::env::var_os("LIBKAIO_CUDA_DRIVER").is_some() {
        skip(test, "libkaio runs on its fake driver here (LIBKAIO_CUDA_DRIVER is set)");
        return None;
    }
    match Device::new_cuda(0) {
        Ok(d) => Some(d),
        Err(e) => {
            skip(test, &format!("candle has no CUDA device: {e}"));
            None
        }
    }
}

/// splitmix64: the same inputs on every run, no extra crate.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn normal(&mut self) -> f32 {
        let (u, v) = (1.0 - self.uniform(), self.uniform());
        ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
    }
    pub fn sign(&mut self) -> f32 {
        if self.next() & 1 == 0 {
            1.0
        } else {
            -1.0
        }
    }
}

/// The `dims` view of the 1-D tensor `flat` from element `pad` on, so that
/// an op sees a non-zero `start_offset`.
pub fn offset_view(flat: &Tensor, dims: &[usize], pad: usize) -> Result<Tensor> {
    let n: usize = dims.iter().product();
    let t = flat.narrow(0, pad, n)?.reshape(dims)?;
    assert_eq!(t.layout().start_offset(), pad);
    Ok(t)
}

/// `values` as a `dtype` tensor of `dims` that starts `pad` elements into a
/// larger storage. The cast comes first: a cast of a narrowed tensor would
/// start a fresh storage.
pub fn padded(values: Vec<f32>, dims: &[usize], pad: usize, dtype: DType, dev: &Device) -> Result<Tensor> {
    let n = values.len();
    let mut all = vec![0f32; pad];
    all.extend(values);
    offset_view(&Tensor::from_vec(all, n + pad, dev)?.to_dtype(dtype)?, dims, pad)
}

/// `t`'s values on the host, as f64.
pub fn to_f64(t: &Tensor) -> Result<Vec<f64>> {
    t.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()
}

/// Largest |got - want| / (1 + |want|).
pub fn max_rel(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    got.iter().zip(want).map(|(x, y)| (x - y).abs() / (1.0 + y.abs())).fold(0.0, f64::max)
}

/// [`max_rel`] of two tensors, in f64 on the host.
pub fn max_rel_tensors(got: &Tensor, want: &Tensor) -> Result<f64> {
    Ok(max_rel(&to_f64(got)?, &to_f64(want)?))
}

/// ||a − b|| / ||b|| (||a − b|| where b is 0), in f64 on the host; NaN when
/// `a` holds a non-finite value, so every bound check fails on it.
pub fn rel(a: &Tensor, b: &Tensor) -> Result<f64> {
    assert_eq!(a.dims(), b.dims());
    let (a, b) = (to_f64(a)?, to_f64(b)?);
    let (mut e2, mut r2) = (0.0, 0.0);
    for (x, y) in a.iter().zip(&b) {
        if !x.is_finite() {
            return Ok(f64::NAN);
        }
        e2 += (x - y) * (x - y);
        r2 += y * y;
    }
    Ok(if r2 > 0.0 { (e2 / r2).sqrt() } else { e2.sqrt() })
}

/// The attention forward's tolerance on O, relative ([`rel`]) to an f32
/// reference from the same rounded inputs, unit-scale inputs.
pub fn o_tol(dtype: DType) -> f64 {
    // kaio.h / tests/gpu_attention_test.cpp, against f64: P rounded to the
    // input dtype before P·V and O once more on output. candle's f32
    // reference adds about 1e-6.
    if dtype == DType::BF16 {
        1.2e-2
    } else {
        2e-3
    }
}

/// The attention backward's on dQ, dK and dV, likewise.
pub fn grad_tol(dtype: DType) -> f64 {
    // The same source: dS = P ∘ (dP − rowsum(dO ∘ O)) is rounded to the
    // input dtype for the dQ and dK products, O enters the rowsum rounded,
    // and the gradients are rounded once more on output: a few 16-bit
    // roundings per element, against candle's f32 graph with none.
    if dtype == DType::BF16 {
        5e-2
    } else {
        1e-2
    }
}
