//! The GPU tests' environment: the device (or a printed reason to skip)
//! and a reproducible random source.
use kaio::{Device, F16};

/// The device, or None after printing why the GPU tests cannot run here.
pub fn gpu(test: &str) -> Option<Device> {
    let p = match kaio::probe() {
        Ok(p) => p,
        Err(e) => {
            super::skip(test, &format!("kaio::probe failed: {}", e));
            return None;
        }
    };
    if !p.driver_status.is_ok() {
        super::skip(test, &format!("no CUDA driver: {}: {}", p.driver_status, p.message));
        return None;
    }
    if p.device_count < 1 {
        super::skip(test, "the CUDA driver reports no device");
        return None;
    }
    let dev = Device::open(0).expect("open device 0");
    let info = dev.info().expect("device info");
    if info.name.starts_with("kaio fake") {
        super::skip(test, "running on the fake test driver (LIBKAIO_CUDA_DRIVER is set)");
        return None;
    }
    if info.compute_capability.0 < 8 {
        super::skip(test, &format!("{} is sm_{}{}; built-in ops need 8.0+", info.name, info.compute_capability.0, info.compute_capability.1));
        return None;
    }
    Some(dev)
}

/// xorshift64*: reproducible inputs; KAIO_TEST_SEED replays a run.
pub struct Rng(u64);
impl Rng {
    pub fn new(test: &str) -> Rng {
        let seed = std::env::var("KAIO_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64);
        println!("{}: KAIO_TEST_SEED={}", test, seed);
        Rng(seed | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next() >> 11) as f64 / (1u64 << 53) as f64)
    }
}

/// Asserts every output is finite and the relative Frobenius error is at
/// most `tol`.
pub fn rel_error(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len());
    let bad = got.iter().filter(|g| !g.is_finite()).count();
    assert_eq!(bad, 0, "{}: {} outputs unwritten or not finite", what, bad);
    let err2: f64 = got.iter().zip(want).map(|(g, w)| (g - w) * (g - w)).sum();
    let ref2: f64 = want.iter().map(|w| w * w).sum();
    let rel = (err2 / ref2.max(1e-300)).sqrt();
    assert!(rel <= tol, "{}: relative error {:.3e} > {:.3e}", what, rel, tol);
    println!("{}: ok, relative error {:.2e}", what, rel);
}

pub fn f16s(v: &[f64]) -> Vec<F16> {
    v.iter().map(|&x| F16::from_f32(x as f32)).collect()
}
pub fn wide(v: &[F16]) -> Vec<f64> {
    v.iter().map(|x| x.to_f32() as f64).collect()
}
pub fn uniform(rng: &mut Rng, n: usize, lo: f64, hi: f64) -> Vec<f64> {
    (0..n).map(|_| rng.uniform(lo, hi)).collect()
}
