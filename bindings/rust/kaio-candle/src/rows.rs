//! Element-wise and row ops: SiLU gate, GELU, RMSNorm and softmax over the
//! last dimension, f32, f16 or bf16 in and out (math in f32). Forward only.
use candle_core::{CudaStorage, CustomOp1, CustomOp2, DType, Layout, Result, Shape, Tensor};

use crate::context::context;
use crate::error::KaioResultExt;
use crate::layout;
use crate::prep::no_cpu_fwd;
use crate::storage::{alloc, kaio_dtype, read, same_device, write};

const FLOATS: &[DType] = &[DType::F32, DType::F16, DType::BF16];

pub use kaio::GeluMode;

/// Runs one of the four ops: `inputs` share a shape (but RMSNorm's weight),
/// the output has the first input's shape and dtype.
fn run(
    op: &'static str,
    inputs: &[(&CudaStorage, &Layout, &str)],
    key: Vec<i64>,
    make: impl FnOnce(&kaio::Device, kaio::Dtype, usize, usize) -> kaio::Result<kaio::Op>,
) -> Result<(CudaStorage, Shape)> {
    let (s0, l0, _) = inputs[0];
    let dev = &s0.device;
    let mut mats = Vec::new();
    for (s, l, arg) in inputs {
        layout::dtype(op, arg, candle_core::backend::BackendStorage::dtype(*s), FLOATS)?;
        if candle_core::backend::BackendStorage::dtype(*s) != candle_core::backend::BackendStorage::dtype(s0) {
            candle_core::bail!("kaio-candle::{op}: argument '{arg}' has another dtype than '{}'", inputs[0].2)
        }
        same_device(op, s0, s, arg)?;
        // Element-wise kernels need contiguous views; row ops honour a row stride.
        let m = if op == "silu_gate" || op == "gelu" { layout::contiguous(op, arg, l)? } else { layout::matrix(op, arg, l)? };
        mats.push(m);
    }
    let dtype = candle_core::backend::BackendStorage::dtype(s0);
    let shape = l0.shape().clone();
    let (rows, cols) = (mats[0].rows, mats[0].cols);
    let mut out = alloc(dev, dtype, shape.elem_count())?;
    if rows == 0 || cols == 0 {
        return Ok((out, shape));
    }
    let ctx = context(dev)?;
    let kd = kaio_dtype(op, dtype)?;
    let mut full_key = vec![kd.raw() as i64, rows as i64, cols as i64];
    full_key.extend(key);
    let prepared = ctx.op((op, full_key), |d| make(d, kd, rows, cols))?;
    let stream = dev.cuda_stream();
    let args = inputs.iter().map(|(s, _, _)| read(&ctx, op, s, &stream)).collect::<Result<Vec<_>>>()?;
    let o = write(&ctx, op, &mut out, &stream)?;
    let out_m = layout::Matrix { rows, cols, row_stride: cols, offset: 0 };
    let mut views: Vec<kaio::TensorView<'_>> = args.iter().zip(&mats).map(|(a, m)| a.view(m)).collect();
    views.push(o.view(&out_m));
    prepared.launch(&ctx.stream, &views).kaio(op)?;
    drop(views);
    drop(o);
    Ok((out, shape))
}

/// `silu(x) * gate`.
pub struct SiluGate;

impl CustomOp2 for SiluGate {
    fn name(&self) -> &'static str {
        "kaio-silu-gate"
    }
    no_cpu_fwd!(2, "silu_gate");
    fn cuda_fwd(&self, x: &CudaStorage, xl: &Layout, g: &CudaStorage, gl: &Layout) -> Result<(CudaStorage, Shape)> {
        if xl.dims() != gl.dims() {
            candle_core::bail!("kaio-candle::silu_gate: 'x' is {:?} but 'gate' is {:?}; they must match", xl.dims(), gl.dims())
        }
        run("silu_gate", &[(x, xl, "x"), (g, gl, "gate")], vec![], kaio::Op::silu_gate)
    }
}

/// GELU, erf or tanh form.
pub struct Gelu(pub GeluMode);

impl CustomOp1 for Gelu {
    fn name(&self) -> &'static str {
        "kaio-gelu"
    }
    no_cpu_fwd!(1, "gelu");
    fn cuda_fwd(&self, x: &CudaStorage, xl: &Layout) -> Result<(CudaStorage, Shape)> {
        let mode = self.0;
        run("gelu", &[(x, xl, "x")], vec![mode.raw() as i64], move |d, t, r, c| kaio::Op::gelu(d, t, r, c, mode))
    }
}

/// RMSNorm over the last dimension: `x / sqrt(mean(x²) + eps) * weight`.
pub struct RmsNorm(pub f32);

impl CustomOp2 for RmsNorm {
    fn name(&self) -> &'static str {
        "kaio-rmsnorm"
    }
    no_cpu_fwd!(2, "rmsnorm");
    fn cuda_fwd(&self, x: &CudaStorage, xl: &Layout, w: &CudaStorage, wl: &Layout) -> Result<(CudaStorage, Shape)> {
        let cols = xl.dims().last().copied().unwrap_or(1);
        if wl.dims() != [cols] {
            candle_core::bail!("kaio-candle::rmsnorm: 'weight' is {:?}; it must be [{cols}], the last dimension of 'x'", wl.dims())
        }
        let eps = self.0;
        run("rmsnorm", &[(x, xl, "x"), (w, wl, "weight")], vec![eps.to_bits() as i64], move |d, t, r, c| {
            kaio::Op::rmsnorm(d, t, r, c, eps)
        })
    }
}

/// Softmax over the last dimension.
pub struct Softmax;

impl CustomOp1 for Softmax {
    fn name(&self) -> &'static str {
        "kaio-softmax"
    }
    no_cpu_fwd!(1, "softmax");
    fn cuda_fwd(&self, x: &CudaStorage, xl: &Layout) -> Result<(CudaStorage, Shape)> {
        run("softmax", &[(x, xl, "x")], vec![], kaio::Op::softmax)
    }
}

/// `silu(x) * gate` on candle's stream.
pub fn silu_gate(x: &Tensor, gate: &Tensor) -> Result<Tensor> {
    x.apply_op2_no_bwd(gate, &SiluGate)
}

/// GELU of `x`.
pub fn gelu(x: &Tensor, mode: GeluMode) -> Result<Tensor> {
    x.apply_op1_no_bwd(&Gelu(mode))
}

/// RMSNorm of `x` over its last dimension with `weight` of that length.
pub fn rmsnorm(x: &Tensor, weight: &Tensor, eps: f32) -> Result<Tensor> {
    x.apply_op2_no_bwd(weight, &RmsNorm(eps))
}

/// Softmax of `x` over its last dimension.
pub fn softmax_last_dim(x: &Tensor) -> Result<Tensor> {
    x.apply_op1_no_bwd(&Softmax)
}
