//! GPU tests: every wrapped op, in f32, f16 and bf16, against an f64 CPU
//! reference computed from the same rounded inputs; plus a user PTX kernel,
//! async copies, events and foreign (wrapped) memory and streams.
//!
//! They run only on a real device and otherwise pass after printing why they
//! skipped (no driver, no device, or the fake driver). Build them here with
//! `cargo test --no-run` and run the `gpu-*` binary on the GPU machine.
//!
//! Tolerance per element, as in tests/gpu_ops_test.cpp:
//!   |out - ref| <= rtol·|ref| + atol
//!   rtol = half an ulp of the output dtype (f32 0, f16 2^-11, bf16 2^-8)
//!        + f32 math error: 4e-6 element-wise, 4e-6 + 2^-22·sqrt(cols) for rows
//!   atol = 2e-7·|x| for GELU + the f16 subnormal spacing (6e-8) for f16.
mod common;

use kaio::{Bf16, Buffer, Device, Dtype, Event, GeluMode, KernelArgs, LaunchConfig, Module, Op, Stream, TensorView, F16};

use common::gpu_env::{gpu, Rng};

const DEQUANT_PTX: &str = include_str!("../../../../examples/dequant_i8.ptx");

/// Values stored as `dt` bytes, and the exact values those bytes hold.
fn encode(dt: Dtype, vals: &[f64]) -> (Vec<u8>, Vec<f64>) {
    let mut bytes = Vec::with_capacity(vals.len() * dt.size());
    let mut exact = Vec::with_capacity(vals.len());
    for &v in vals {
        match dt {
            Dtype::F32 => {
                let f = v as f32;
                bytes.extend_from_slice(&f.to_ne_bytes());
                exact.push(f as f64);
            }
            Dtype::F16 => {
                let h = F16::from_f32(v as f32);
                bytes.extend_from_slice(&h.to_bits().to_ne_bytes());
                exact.push(h.to_f32() as f64);
            }
            Dtype::Bf16 => {
                let h = Bf16::from_f32(v as f32);
                bytes.extend_from_slice(&h.to_bits().to_ne_bytes());
                exact.push(h.to_f32() as f64);
            }
            _ => unreachable!(),
        }
    }
    (bytes, exact)
}

fn decode(dt: Dtype, bytes: &[u8]) -> Vec<f64> {
    bytes
        .chunks(dt.size())
        .map(|c| match dt {
            Dtype::F32 => f32::from_ne_bytes([c[0], c[1], c[2], c[3]]) as f64,
            Dtype::F16 => F16::from_bits(u16::from_ne_bytes([c[0], c[1]])).to_f32() as f64,
            Dtype::Bf16 => Bf16::from_bits(u16::from_ne_bytes([c[0], c[1]])).to_f32() as f64,
            _ => unreachable!(),
        })
        .collect()
}

fn half_ulp(dt: Dtype) -> f64 {
    match dt {
        Dtype::F16 => 2f64.powi(-11),
        Dtype::Bf16 => 2f64.powi(-8),
        _ => 0.0,
    }
}

#[derive(Copy, Clone, Debug, PartialEq)]
enum Kind {
    SiluGate,
    Gelu(GeluMode),
    RmsNorm,
    Softmax,
}

impl Kind {
    fn is_row(self) -> bool {
        matches!(self, Kind::RmsNorm | Kind::Softmax)
    }
}

/// How the views sit in their buffers.
#[derive(Copy, Clone, Debug)]
struct Layout {
    offset: usize,  // elements; 1 breaks 16-byte alignment (the scalar path)
    in_pad: usize,  // row_stride = cols + pad (row ops only)
    out_pad: usize,
    in_place: bool, // element-wise ops only
    prepared: bool, // Op handle instead of the one-shot call
}

const EPS: f32 = 1e-5;

fn reference(kind: Kind, rows: usize, cols: usize, x: &[f64], xs: usize, g: &[f64], w: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0; rows * cols];
    for r in 0..rows {
        let xr = &x[r * xs..r * xs + cols];
        let o = &mut out[r * cols..(r + 1) * cols];
        match kind {
            Kind::SiluGate => {
                for c in 0..cols {
                    o[c] = xr[c] / (1.0 + (-xr[c]).exp()) * g[r * xs + c];
                }
            }
            Kind::Gelu(GeluMode::Erf) => {
                for c in 0..cols {
                    o[c] = 0.5 * xr[c] * (1.0 + erf(xr[c] / 2f64.sqrt()));
                }
            }
            Kind::Gelu(GeluMode::Tanh) => {
                let k = (2.0 / std::f64::consts::PI).sqrt();
                for c in 0..cols {
                    let v = xr[c];
                    o[c] = 0.5 * v * (1.0 + (k * (v + 0.044715 * v * v * v)).tanh());
                }
            }
            Kind::RmsNorm => {
                let ss: f64 = xr.iter().map(|v| v * v).sum();
                let inv = 1.0 / (ss / cols as f64 + EPS as f64).sqrt();
                for c in 0..cols {
                    o[c] = xr[c] * inv * w[c];
                }
            }
            Kind::Softmax => {
                let m = xr.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = xr.iter().map(|v| (v - m).exp()).sum();
                for c in 0..cols {
                    o[c] = (xr[c] - m).exp() / sum;
                }
            }
        }
    }
    out
}

/// erf to ~1e-16 (Rust's std has none): series near 0, continued fraction
/// for the complement farther out.
fn erf(x: f64) -> f64 {
    let ax = x.abs();
    let r = if ax < 2.5 {
        // Maclaurin series: 2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1))
        let mut term = ax;
        let mut sum = ax;
        let x2 = ax * ax;
        let mut n = 0.0;
        loop {
            n += 1.0;
            term *= -x2 / n;
            let add = term / (2.0 * n + 1.0);
            sum += add;
            if add.abs() <= 1e-17 * sum.abs() || n > 200.0 {
                break;
            }
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        // erfc by Lentz's continued fraction.
        let x2 = ax * ax;
        let mut f = ax;
        let mut c = ax;
        let mut d = 0.0;
        let tiny = 1e-300;
        for i in 1..200 {
            let a = i as f64 / 2.0;
            d = ax + a * d;
            if d.abs() < tiny {
                d = tiny;
            }
            c = ax + a / c;
            if c.abs() < tiny {
                c = tiny;
            }
            d = 1.0 / d;
            let delta = c * d;
            f *= delta;
            if (delta - 1.0).abs() < 1e-16 {
                break;
            }
        }
        1.0 - (-x2).exp() / (f * std::f64::consts::PI.sqrt())
    };
    if x < 0.0 {
        -r
    } else {
        r
    }
}

fn view_of(b: &Buffer<u8>, dt: Dtype, rows: usize, cols: usize, offset: usize, stride: usize) -> TensorView<'_> {
    TensorView::new(b, rows, cols).with_dtype(dt).with_offset(offset).with_row_stride(stride)
}

#[allow(clippy::too_many_arguments)]
fn run_case(dev: &Device, s: &Stream, rng: &mut Rng, kind: Kind, dt: Dtype, rows: usize, cols: usize, l: Layout) {
    let row = kind.is_row();
    let xs = if row { cols + l.in_pad } else { cols };
    let os = if row { cols + l.out_pad } else { cols };
    let (lo, hi) = match kind {
        Kind::Softmax => (-10.0, 10.0),
        Kind::RmsNorm => (-3.0, 3.0),
        _ => (-8.0, 8.0),
    };
    let n_in = l.offset + rows * xs;
    let n_out = l.offset + rows * os;
    let xv: Vec<f64> = (0..n_in).map(|_| rng.uniform(lo, hi)).collect();
    let gv: Vec<f64> = (0..n_in).map(|_| rng.uniform(-4.0, 4.0)).collect();
    let wv: Vec<f64> = (0..cols).map(|_| rng.uniform(-2.0, 2.0)).collect();
    let (xb, xe) = encode(dt, &xv);
    let (gb, ge) = encode(dt, &gv);
    let (wb, we) = encode(dt, &wv);

    let bx = Buffer::from_slice(dev, &xb).unwrap();
    let bg = Buffer::from_slice(dev, &gb).unwrap();
    let bw = Buffer::from_slice(dev, &wb).unwrap();
    let bo = Buffer::<u8>::alloc(dev, n_out * dt.size()).unwrap();
    bo.memset(s, 0, bo.len(), 0xFF).unwrap(); // NaN poison: unwritten outputs fail

    let x = view_of(&bx, dt, rows, cols, l.offset, xs);
    let g = view_of(&bg, dt, rows, cols, l.offset, xs);
    let w = view_of(&bw, dt, 1, cols, 0, cols);
    let out_buf = if l.in_place { &bx } else { &bo };
    let out = view_of(out_buf, dt, rows, cols, l.offset, os);
    let what = format!("{:?} {} {}x{} {:?}", kind, dt, rows, cols, l);

    let r = match (kind, l.prepared) {
        (Kind::SiluGate, false) => kaio::silu_gate(s, &x, &g, &out),
        (Kind::SiluGate, true) => Op::silu_gate(dev, dt, rows, cols).unwrap().launch(s, &[x, g, out]),
        (Kind::Gelu(m), false) => kaio::gelu(s, &x, &out, m),
        (Kind::Gelu(m), true) => Op::gelu(dev, dt, rows, cols, m).unwrap().launch(s, &[x, out]),
        (Kind::RmsNorm, false) => kaio::rmsnorm(s, &x, &w, &out, EPS),
        (Kind::RmsNorm, true) => Op::rmsnorm(dev, dt, rows, cols, EPS).unwrap().launch(s, &[x, w, out]),
        (Kind::Softmax, false) => kaio::softmax(s, &x, &out),
        (Kind::Softmax, true) => Op::softmax(dev, dt, rows, cols).unwrap().launch(s, &[x, out]),
    };
    r.unwrap_or_else(|e| panic!("{}: {}", what, e));
    s.synchronize().unwrap_or_else(|e| panic!("{}: {}", what, e));

    let got_bytes = out_buf.to_vec().unwrap();
    let got = decode(dt, &got_bytes);
    let want = reference(kind, rows, cols, &xe[l.offset..], xs, &ge[l.offset..], &we);
    let math = if row { 4e-6 + 2f64.powi(-22) * (cols as f64).sqrt() } else { 4e-6 };
    let mut bad = 0;
    let mut worst = 0.0f64;
    for r in 0..rows {
        for c in 0..cols {
            let o = got[l.offset + r * os + c];
            let want = want[r * cols + c];
            let xval = xe[l.offset + r * xs + c];
            let mut atol = if dt == Dtype::F16 { 6e-8 } else { 1e-30 };
            if let Kind::Gelu(_) = kind {
                atol += 2e-7 * xval.abs();
            }
            let tol = (half_ulp(dt) + math) * want.abs() + atol;
            let err = (o - want).abs();
            #[allow(clippy::neg_cmp_op_on_partial_ord)] // NaN must fail
            let outside = !(err <= tol);
            if outside {
                if bad < 5 {
                    eprintln!("{}: [{}, {}] got {} want {} (x = {}, tol {})", what, r, c, o, want, xval, tol);
                }
                bad += 1;
            } else if tol > 0.0 {
                worst = worst.max(err / tol);
            }
        }
    }
    assert_eq!(bad, 0, "{}: {} elements outside tolerance", what, bad);
    // Nothing written outside the output view (row padding, the offset).
    if !l.in_place {
        let esz = dt.size();
        for (i, chunk) in got_bytes.chunks(esz).enumerate() {
            let inside = i >= l.offset && (i - l.offset) % os < cols && (i - l.offset) / os < rows;
            if !inside {
                assert!(chunk.iter().all(|&b| b == 0xFF), "{}: element {} outside the view was written", what, i);
            }
        }
    }
    println!("{}: ok, worst error {:.3} of tolerance", what, worst);
}

fn all_layouts(kind: Kind) -> Vec<Layout> {
    let base = Layout { offset: 0, in_pad: 0, out_pad: 0, in_place: false, prepared: false };
    let mut v = vec![base, Layout { prepared: true, ..base }, Layout { offset: 1, ..base }];
    if kind.is_row() {
        v.push(Layout { in_pad: 3, out_pad: 5, ..base });
        v.push(Layout { offset: 1, in_pad: 8, out_pad: 1, prepared: true, ..base });
    } else {
        v.push(Layout { in_place: true, ..base });
        v.push(Layout { in_place: true, prepared: true, offset: 1, ..base });
    }
    v
}

fn run_op(test: &str, kind: Kind, shapes: &[(usize, usize)]) {
    let dev = match gpu(test) {
        Some(d) => d,
        None => return,
    };
    let s = Stream::non_blocking(&dev).unwrap();
    let mut rng = Rng::new(test);
    for &dt in &[Dtype::F32, Dtype::F16, Dtype::Bf16] {
        for &(rows, cols) in shapes {
            for l in all_layouts(kind) {
                run_case(&dev, &s, &mut rng, kind, dt, rows, cols, l);
            }
        }
    }
}

#[test]
fn gpu_silu_gate() {
    run_op("gpu_silu_gate", Kind::SiluGate, &[(1, 1), (7, 13), (33, 1000), (4, 65536 + 3)]);
}

#[test]
fn gpu_gelu_erf() {
    run_op("gpu_gelu_erf", Kind::Gelu(GeluMode::Erf), &[(1, 1), (7, 13), (33, 1000), (4, 65536 + 3)]);
}

#[test]
fn gpu_gelu_tanh() {
    run_op("gpu_gelu_tanh", Kind::Gelu(GeluMode::Tanh), &[(1, 1), (7, 13), (33, 1000), (4, 65536 + 3)]);
}

#[test]
fn gpu_rmsnorm() {
    run_op("gpu_rmsnorm", Kind::RmsNorm, &[(1, 1), (5, 7), (64, 1024), (3, 8191), (2, 50000), (300, 32)]);
}

#[test]
fn gpu_softmax() {
    run_op("gpu_softmax", Kind::Softmax, &[(1, 1), (5, 7), (64, 1024), (3, 8191), (2, 50000), (300, 32)]);
}

#[test]
fn gpu_user_ptx_kernel_exact() {
    let dev = match gpu("gpu_user_ptx_kernel_exact") {
        Some(d) => d,
        None => return,
    };
    let s = Stream::non_blocking(&dev).unwrap();
    let module = Module::load_ptx(&dev, DEQUANT_PTX).unwrap();
    let k = module.kernel("dequant_i8").unwrap();
    let n_words: u32 = 100_003;
    let mut seed = 12345u32;
    let packed: Vec<u32> = (0..n_words)
        .map(|_| {
            seed = seed.wrapping_mul(1664525).wrapping_add(1013904223);
            seed
        })
        .collect();
    let guard = 64usize;
    let bp = Buffer::from_slice(&dev, &packed).unwrap();
    let bo = Buffer::<f32>::alloc(&dev, 4 * n_words as usize + guard).unwrap();
    bo.memset(&s, 0, bo.len(), 0xFF).unwrap();
    let scale = 0.0078125f32; // a power of two: exact products
    let args = KernelArgs::new().ptr(&bp).ptr(&bo).arg(scale).arg(n_words);
    unsafe { k.launch(&s, &LaunchConfig::linear(n_words, 256), &args) }.unwrap();
    s.synchronize().unwrap();
    let out = bo.to_vec().unwrap();
    for (i, w) in packed.iter().enumerate() {
        for j in 0..4 {
            let byte = ((w >> (8 * j)) & 0xFF) as u8 as i8;
            let want = byte as f32 * scale;
            assert_eq!(out[4 * i + j].to_bits(), want.to_bits(), "out[{}]", 4 * i + j);
        }
    }
    assert!(out[4 * n_words as usize..].iter().all(|v| v.to_bits() == 0xFFFF_FFFF), "wrote past the output");
}

#[test]
fn gpu_copies_events_and_foreign_handles() {
    let dev = match gpu("gpu_copies_events_and_foreign_handles") {
        Some(d) => d,
        None => return,
    };
    let a = Stream::non_blocking(&dev).unwrap();
    let b = Stream::non_blocking(&dev).unwrap();
    let n = 1 << 20;
    let src: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let x = Buffer::<f32>::alloc(&dev, n).unwrap();
    let y = Buffer::<f32>::alloc(&dev, n).unwrap();
    let start = Event::new(&dev).unwrap();
    let done = Event::new(&dev).unwrap();
    start.record(&a).unwrap();
    unsafe { x.write_async(&a, 0, &src) }.unwrap();
    done.record(&a).unwrap();
    // b waits for a's copy, then copies on the GPU and zeroes a tail.
    b.wait_event(&done).unwrap();
    y.copy_from(0, &x, 0, n, &b).unwrap();
    y.memset(&b, n - 16, 16, 0).unwrap();
    let mut back = vec![0f32; n];
    unsafe { y.read_async(&b, 0, &mut back) }.unwrap();
    b.synchronize().unwrap();
    assert_eq!(&back[..n - 16], &src[..n - 16]);
    assert!(back[n - 16..].iter().all(|&v| v == 0.0));
    let ms = Event::elapsed_ms(&start, &done).unwrap();
    assert!(ms >= 0.0, "{}", ms);

    // Foreign memory and a foreign stream, as candle hands them over.
    let foreign_stream = unsafe { Stream::from_raw(&dev, a.native()) }.unwrap();
    let fx = unsafe { Buffer::<f32>::from_raw_parts(&dev, x.device_ptr(), 4096 * 4) }.unwrap();
    let out = Buffer::<f32>::alloc(&dev, 4096).unwrap();
    kaio::softmax(&foreign_stream, &fx.view(4, 1024), &out.view(4, 1024)).unwrap();
    foreign_stream.synchronize().unwrap();
    let probs = out.to_vec().unwrap();
    for r in 0..4 {
        let sum: f64 = probs[r * 1024..(r + 1) * 1024].iter().map(|&p| p as f64).sum();
        assert!((sum - 1.0).abs() < 1e-4, "row {} sums to {}", r, sum);
    }
    drop(fx);
    drop(foreign_stream);
    a.synchronize().unwrap(); // the wrapped CUstream is still alive
}

/// The reference's erf, checked everywhere (no GPU needed).
#[test]
fn erf_reference_is_accurate() {
    let known = [
        (0.0, 0.0),
        (0.1, 0.1124629160182849),
        (0.5, 0.5204998778130465),
        (1.0, 0.8427007929497149),
        (2.0, 0.9953222650189527),
        (2.4999, 0.9995928300996666),
        (2.5, 0.999593047982555),
        (3.0, 0.9999779095030014),
        (5.0, 0.9999999999984626),
        (-1.5, -0.9661051464753108),
    ];
    for &(x, want) in known.iter() {
        let got = erf(x);
        assert!((got - want).abs() < 1e-14, "erf({}) = {}, want {}", x, got, want);
    }
}

// ---- matmul -----------------------------------------------------------------
// Relative Frobenius error ||out - ref|| / ||ref|| <= 1e-4 + half an ulp of
// the output dtype, as tests/gpu_matmul_test.cpp; NaN anywhere fails (C is
// NaN-poisoned when beta is 0).

use kaio::{MatmulBackwardDesc, MatmulDesc, MatmulTc, MatmulVariant, Trans};

/// A rows x cols matrix with row stride `ld`, as `dt` on the device, and the
/// exact values it holds (padding included).
struct Mat {
    buf: Buffer<u8>,
    vals: Vec<f64>,
    dt: Dtype,
    rows: usize,
    cols: usize,
    ld: usize,
}

impl Mat {
    fn random(dev: &Device, rng: &mut Rng, dt: Dtype, rows: usize, cols: usize, ld: usize) -> Mat {
        let n = (rows - 1) * ld + cols;
        let (bytes, vals) = encode(dt, &(0..n).map(|_| rng.uniform(-1.0, 1.0)).collect::<Vec<_>>());
        Mat { buf: Buffer::from_slice(dev, &bytes).unwrap(), vals, dt, rows, cols, ld }
    }
    fn poisoned(dev: &Device, s: &Stream, dt: Dtype, rows: usize, cols: usize, ld: usize) -> Mat {
        let n = (rows - 1) * ld + cols;
        let buf = Buffer::<u8>::alloc(dev, n * dt.size()).unwrap();
        buf.memset(s, 0, buf.len(), 0xFF).unwrap();
        Mat { buf, vals: vec![f64::NAN; n], dt, rows, cols, ld }
    }
    fn view(&self) -> TensorView<'_> {
        view_of(&self.buf, self.dt, self.rows, self.cols, 0, self.ld)
    }
    fn at(&self, r: usize, c: usize) -> f64 {
        self.vals[r * self.ld + c]
    }
    fn read(&self) -> Vec<f64> {
        decode(self.dt, &self.buf.to_vec().unwrap())
    }
}

fn up8(v: usize) -> usize {
    (v + 7) / 8 * 8
}

/// Relative Frobenius error of `got` (laid out with `ld`) against `want(r, c)`.
fn frobenius(what: &str, rows: usize, cols: usize, got: &[f64], ld: usize, out: Dtype, want: impl Fn(usize, usize) -> f64) {
    let (mut err2, mut ref2, mut bad) = (0.0, 0.0, 0);
    for r in 0..rows {
        for c in 0..cols {
            let g = got[r * ld + c];
            let w = want(r, c);
            if !g.is_finite() {
                bad += 1;
            }
            err2 += (g - w) * (g - w);
            ref2 += w * w;
        }
    }
    let rel = (err2 / f64::max(ref2, 1e-300)).sqrt();
    let tol = 1e-4 + half_ulp(out);
    assert_eq!(bad, 0, "{}: {} outputs unwritten or not finite", what, bad);
    assert!(rel <= tol, "{}: relative Frobenius error {:.3e} > {:.3e}", what, rel, tol);
    println!("{}: ok, relative error {:.2e}", what, rel);
}

#[allow(clippy::too_many_arguments)]
fn matmul_case(dev: &Device, s: &Stream, rng: &mut Rng, d: MatmulDesc, m: usize, n: usize, k: usize, pad: usize, prepared: bool) {
    let (ar, ac) = if d.trans_a == Trans::T { (k, m) } else { (m, k) };
    let (br, bc) = if d.trans_b == Trans::T { (n, k) } else { (k, n) };
    let a = Mat::random(dev, rng, d.in_dtype, ar, ac, up8(ac) + pad);
    let b = Mat::random(dev, rng, d.in_dtype, br, bc, up8(bc) + pad);
    let c = if d.beta == 0.0 {
        Mat::poisoned(dev, s, d.out_dtype, m, n, n + pad)
    } else {
        Mat::random(dev, rng, d.out_dtype, m, n, n + pad)
    };
    let what = format!("matmul {:?} {}x{}x{} pad {} prepared {}", d, m, n, k, pad, prepared);
    if prepared {
        Op::matmul(dev, &MatmulDesc { m, n, k, ..d }).unwrap().launch(s, &[a.view(), b.view(), c.view()])
    } else {
        kaio::matmul(s, &a.view(), &b.view(), &c.view(), &d)
    }
    .unwrap_or_else(|e| panic!("{}: {}", what, e));
    s.synchronize().unwrap();
    let got = c.read();
    let opa = |r: usize, x: usize| if d.trans_a == Trans::T { a.at(x, r) } else { a.at(r, x) };
    let opb = |x: usize, col: usize| if d.trans_b == Trans::T { b.at(col, x) } else { b.at(x, col) };
    frobenius(&what, m, n, &got, c.ld, d.out_dtype, |r, col| {
        let acc: f64 = (0..k).map(|x| opa(r, x) * opb(x, col)).sum();
        d.alpha as f64 * acc + if d.beta != 0.0 { d.beta as f64 * c.at(r, col) } else { 0.0 }
    });
    if pad > 0 && d.beta == 0.0 {
        for r in 0..m - 1 {
            for col in n..n + pad {
                assert!(got[r * c.ld + col].is_nan(), "{}: C's row padding written at {},{}", what, r, col);
            }
        }
    }
}

#[test]
fn gpu_matmul() {
    let dev = match gpu("gpu_matmul") {
        Some(d) => d,
        None => return,
    };
    let s = Stream::non_blocking(&dev).unwrap();
    let mut rng = Rng::new("gpu_matmul");
    let shapes = [(1, 1, 8), (7, 13, 24), (64, 72, 128), (129, 127, 264)];
    for &in_dtype in &[Dtype::F16, Dtype::Bf16] {
        for &(ta, tb) in &[(Trans::N, Trans::N), (Trans::N, Trans::T), (Trans::T, Trans::N), (Trans::T, Trans::T)] {
            for &(m, n, k) in &shapes {
                let d = MatmulDesc { in_dtype, trans_a: ta, trans_b: tb, ..Default::default() };
                matmul_case(&dev, &s, &mut rng, d, m, n, k, 0, false);
            }
        }
        for &out_dtype in &[Dtype::F32, Dtype::F16, Dtype::Bf16] {
            for &variant in &[MatmulVariant::Auto, MatmulVariant::Sync, MatmulVariant::Async] {
                let d = MatmulDesc { in_dtype, out_dtype, variant, trans_b: Trans::T, alpha: 0.5, beta: 2.0, ..Default::default() };
                matmul_case(&dev, &s, &mut rng, d, 33, 40, 64, 8, true);
                let d = MatmulDesc { beta: 0.0, alpha: 1.0, ..d };
                matmul_case(&dev, &s, &mut rng, d, 130, 65, 136, 8, false);
            }
        }
    }
}

#[test]
fn gpu_matmul_tc_entry_points() {
    let dev = match gpu("gpu_matmul_tc_entry_points") {
        Some(d) => d,
        None => return,
    };
    let s = Stream::non_blocking(&dev).unwrap();
    let mut rng = Rng::new("gpu_matmul_tc_entry_points");
    let (m, n, k) = (33, 40, 64);
    for &kind in &[MatmulTc::F16, MatmulTc::F16Async, MatmulTc::Bf16, MatmulTc::Bf16Async] {
        let dt = if kind == MatmulTc::F16 || kind == MatmulTc::F16Async { Dtype::F16 } else { Dtype::Bf16 };
        let a = Mat::random(&dev, &mut rng, dt, m, k, k);
        let b = Mat::random(&dev, &mut rng, dt, k, n, n);
        for &prepared in &[false, true] {
            let c = Mat::poisoned(&dev, &s, Dtype::F32, m, n, n);
            if prepared {
                Op::matmul_tc(&dev, kind, m, n, k).unwrap().launch(&s, &[a.view(), b.view(), c.view()]).unwrap();
            } else {
                kaio::matmul_tc(&s, kind, &a.view(), &b.view(), &c.view()).unwrap();
            }
            s.synchronize().unwrap();
            let what = format!("{:?} prepared {}", kind, prepared);
            frobenius(&what, m, n, &c.read(), n, Dtype::F32, |r, col| (0..k).map(|x| a.at(r, x) * b.at(x, col)).sum());
        }
    }
}

#[test]
fn gpu_matmul_backward() {
    let dev = match gpu("gpu_matmul_backward") {
        Some(d) => d,
        None => return,
    };
    let s = Stream::non_blocking(&dev).unwrap();
    let mut rng = Rng::new("gpu_matmul_backward");
    let (m, n, k) = (24, 40, 72);
    for &in_dtype in &[Dtype::F16, Dtype::Bf16] {
        for &grad_dtype in &[in_dtype, Dtype::F32] {
            for &(out_dtype, beta) in &[(Dtype::F32, 0.0f32), (Dtype::F32, 1.0), (in_dtype, 0.0)] {
                let a = Mat::random(&dev, &mut rng, in_dtype, m, k, k);
                let b = Mat::random(&dev, &mut rng, in_dtype, k, n, n);
                let dc = Mat::random(&dev, &mut rng, grad_dtype, m, n, n);
                let (da, db) = if beta == 0.0 {
                    (Mat::poisoned(&dev, &s, out_dtype, m, k, k), Mat::poisoned(&dev, &s, out_dtype, k, n, n))
                } else {
                    (Mat::random(&dev, &mut rng, out_dtype, m, k, k), Mat::random(&dev, &mut rng, out_dtype, k, n, n))
                };
                let desc = MatmulBackwardDesc { in_dtype, grad_dtype, out_dtype, m, n, k, beta, ..Default::default() };
                let op = Op::matmul_backward(&dev, &desc).unwrap();
                op.launch(&s, &[dc.view(), a.view(), b.view(), da.view(), db.view()]).unwrap();
                s.synchronize().unwrap();
                // An f32 dC is rounded to in_dtype before the products.
                let g = |r: usize, c: usize| {
                    let v = dc.at(r, c);
                    if grad_dtype == Dtype::F32 {
                        encode(in_dtype, &[v]).1[0]
                    } else {
                        v
                    }
                };
                let what = format!("backward {:?}", desc);
                let prior = |x: &Mat, r: usize, c: usize| if beta != 0.0 { beta as f64 * x.at(r, c) } else { 0.0 };
                frobenius(&format!("{} dA", what), m, k, &da.read(), k, out_dtype, |r, x| {
                    (0..n).map(|c| g(r, c) * b.at(x, c)).sum::<f64>() + prior(&da, r, x)
                });
                frobenius(&format!("{} dB", what), k, n, &db.read(), n, out_dtype, |x, c| {
                    (0..m).map(|r| a.at(r, x) * g(r, c)).sum::<f64>() + prior(&db, x, c)
                });
            }
        }
    }
    // KAIO's one-shot form, dA skipped.
    let a = Mat::random(&dev, &mut rng, Dtype::F16, m, k, k);
    let b = Mat::random(&dev, &mut rng, Dtype::F16, k, n, n);
    let dc = Mat::random(&dev, &mut rng, Dtype::F16, m, n, n);
    let db = Mat::poisoned(&dev, &s, Dtype::F32, k, n, n);
    kaio::matmul_tc_backward(&s, &dc.view(), &a.view(), &b.view(), None, Some(&db.view())).unwrap();
    s.synchronize().unwrap();
    frobenius("matmul_tc_backward dB", k, n, &db.read(), n, Dtype::F32, |x, c| (0..m).map(|r| a.at(r, x) * dc.at(r, c)).sum());
}
