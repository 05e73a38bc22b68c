//! Residual add fused with RMSNorm (the residual updated in place) and
//! LayerNorm with optional weight and bias, over the last dimension; f32,
//! f16 or bf16, one dtype for every tensor, math in f32 rounded once per
//! stored value. Forward only.
use std::sync::Mutex;

use candle_core::backend::BackendStorage;
use candle_core::op::BackpropOp;
use candle_core::{
    bail, CpuStorage, CudaStorage, CustomOp1, DType, InplaceOp3, Layout, Result, Shape, Storage, Tensor,
};

use crate::context::context;
use crate::error::KaioResultExt;
use crate::layout::{self, Matrix};
use crate::prep::{forward_only, held, no_cpu, no_cpu_fwd};
use crate::storage::{alloc, kaio_dtype, read, same_device, write};

const FLOATS: &[DType] = &[DType::F32, DType::F16, DType::BF16];

fn check_eps(op: &str, eps: f32) -> Result<()> {
    if !(eps.is_finite() && eps >= 0.0) {
        bail!("kaio-candle::{op}: eps is {eps}; it must be finite and >= 0 (1e-5 or 1e-6 are usual)")
    }
    Ok(())
}

/// `residual += x`, then the normed residual into a fresh output:
/// `residual.inplace_op3(&x, &weight, &op)`, then [`AddRmsNorm::take_out`].
#[derive(Debug)]
pub struct AddRmsNorm {
    pub eps: f32,
    out: Mutex<Option<CudaStorage>>,
}

impl AddRmsNorm {
    pub fn new(eps: f32) -> AddRmsNorm {
        AddRmsNorm { eps, out: Mutex::new(None) }
    }

    /// The output of the last `inplace_op3`, contiguous, the residual's
    /// shape and dtype.
    pub fn take_out(&self, shape: &Shape) -> Result<Tensor> {
        let Some(s) = self.out.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            bail!("kaio-candle::add_rmsnorm: no output; call residual.inplace_op3(&x, &weight, &op) first")
        };
        Ok(Tensor::from_storage(Storage::Cuda(s), shape.clone(), BackpropOp::none(), false))
    }
}

impl InplaceOp3 for AddRmsNorm {
    fn name(&self) -> &'static str {
        "kaio-add-rmsnorm"
    }

    fn cpu_fwd(
        &self,
        _: &mut CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> Result<()> {
        no_cpu("add_rmsnorm")
    }

    fn cuda_fwd(
        &self,
        res: &mut CudaStorage,
        rl: &Layout,
        x: &CudaStorage,
        xl: &Layout,
        w: &CudaStorage,
        wl: &Layout,
    ) -> Result<()> {
        let op = "add_rmsnorm";
        check_eps(op, self.eps)?;
        let dtype = res.dtype();
        layout::dtype(op, "residual", dtype, FLOATS)?;
        for (arg, d) in [("x", x.dtype()), ("weight", w.dtype())] {
            if d != dtype {
                bail!("kaio-candle::{op}: argument '{arg}' is {d:?} but 'residual' is {dtype:?}; they must match")
            }
        }
        same_device(op, res, x, "x")?;
        same_device(op, res, w, "weight")?;
        if xl.dims() != rl.dims() {
            bail!("kaio-candle::{op}: 'x' is {:?} but 'residual' is {:?}; they must match", xl.dims(), rl.dims())
        }
        let rm = layout::matrix(op, "residual", rl)?;
        let xm = layout::matrix(op, "x", xl)?;
        if wl.dims() != [rm.cols] {
            bail!("kaio-candle::{op}: 'weight' is {:?}; it must be [{}], the last dimension of 'x'", wl.dims(), rm.cols)
        }
        let wm = layout::contiguous(op, "weight", wl)?;
        let dev = res.device.clone();
        let mut out = alloc(&dev, dtype, rm.rows * rm.cols)?;
        if rm.rows > 0 && rm.cols > 0 {
            let ctx = context(&dev)?;
            let kd = kaio_dtype(op, dtype)?;
            let (rows, cols, eps) = (rm.rows, rm.cols, self.eps);
            let key = vec![kd.raw() as i64, rows as i64, cols as i64, eps.to_bits() as i64];
            let prepared = ctx.op((op, key), |d| kaio::Op::add_rmsnorm(d, kd, rows, cols, eps))?;
            let stream = dev.cuda_stream();
            let (a, b) = (read(&ctx, op, x, &stream)?, read(&ctx, op, w, &stream)?);
            let r = write(&ctx, op, res, &stream)?;
            let o = write(&ctx, op, &mut out, &stream)?;
            let om = Matrix { rows, cols, row_stride: cols, offset: 0 };
            prepared.launch(&ctx.stream, &[a.view(&xm), r.view(&rm), b.view(&wm), o.view(&om)]).kaio(op)?;
        }
        *self.out.lock().unwrap_or_else(|e| e.into_inner()) = Some(out);
        Ok(())
    }
}

/// The transformer block's `h = h + f(h); y = rmsnorm(h) · weight`, fused:
/// adds `x` into `residual` IN PLACE (rounded to the dtype, stored), then
/// returns RMSNorm of the updated residual over the last dimension,
/// `r / sqrt(mean(r²) + eps) · weight`, as a new contiguous tensor.
///
/// `x` and `residual` share one shape (any rank; the last dimension is
/// normalised, rows may be strided), `weight` is `[last dim]`; all f32, f16
/// or bf16 alike; eps finite and >= 0. The write goes into the storage
/// `residual` views (every tensor sharing it sees it), so `residual` must
/// not share storage with `x` or `weight` (libkaio refuses an overlap, and
/// candle's storage lock would block on the very same tensor). Forward only:
/// a tensor tracking gradients is refused (pass `.detach()`).
pub fn add_rmsnorm(x: &Tensor, residual: &Tensor, weight: &Tensor, eps: f32) -> Result<Tensor> {
    for (arg, t) in [("x", x), ("residual", residual), ("weight", weight)] {
        forward_only("add_rmsnorm", arg, t)?;
    }
    let op = AddRmsNorm::new(eps);
    residual.inplace_op3(x, weight, &op)?;
    op.take_out(residual.shape())
}

/// LayerNorm over the last dimension (biased variance, as candle-nn's and
/// torch's): `(x − mean) / sqrt(var + eps) · weight + bias`, weight 1 and
/// bias 0 where absent.
#[derive(Clone, Debug)]
pub struct LayerNorm {
    pub eps: f32,
    pub weight: Option<Tensor>,
    pub bias: Option<Tensor>,
}

impl CustomOp1 for LayerNorm {
    fn name(&self) -> &'static str {
        "kaio-layer-norm"
    }
    no_cpu_fwd!(1, "layer_norm");
    fn cuda_fwd(&self, x: &CudaStorage, xl: &Layout) -> Result<(CudaStorage, Shape)> {
        let op = "layer_norm";
        check_eps(op, self.eps)?;
        let dtype = x.dtype();
        layout::dtype(op, "x", dtype, FLOATS)?;
        let xm = layout::matrix(op, "x", xl)?;
        let (rows, cols) = (xm.rows, xm.cols);
        // Held weight and bias: storage guards kept for the launch.
        let guards: Vec<_> = [("weight", &self.weight), ("bias", &self.bias)]
            .into_iter()
            .map(|(arg, t)| t.as_ref().map(|t| (arg, t.storage_and_layout())))
            .collect();
        let mut held_args = Vec::new();
        for g in guards.iter().flatten() {
            let (arg, (s, l)) = g;
            let c = held(op, arg, s, x, &[dtype])?;
            if l.dims() != [cols] {
                bail!("kaio-candle::{op}: '{arg}' is {:?}; it must be [{cols}], the last dimension of 'x'", l.dims())
            }
            held_args.push((c, layout::contiguous(op, arg, l)?));
        }
        let shape = xl.shape().clone();
        let dev = &x.device;
        let mut out = alloc(dev, dtype, rows * cols)?;
        if rows == 0 || cols == 0 {
            return Ok((out, shape));
        }
        let ctx = context(dev)?;
        let kd = kaio_dtype(op, dtype)?;
        let eps = self.eps;
        let key = vec![kd.raw() as i64, rows as i64, cols as i64, eps.to_bits() as i64];
        let prepared = ctx.op((op, key), |d| kaio::Op::layernorm(d, kd, rows, cols, eps))?;
        let stream = dev.cuda_stream();
        let a = read(&ctx, op, x, &stream)?;
        let hs = held_args.iter().map(|(c, m)| Ok((read(&ctx, op, c, &stream)?, *m))).collect::<Result<Vec<_>>>()?;
        let o = write(&ctx, op, &mut out, &stream)?;
        // hs holds weight then bias, each only where given.
        let mut it = hs.iter();
        let mut next = |given: bool| if given { it.next().map(|(r, m)| r.view(m)) } else { None };
        let wv = next(self.weight.is_some()).unwrap_or(kaio::TensorView::none());
        let bv = next(self.bias.is_some()).unwrap_or(kaio::TensorView::none());
        let om = Matrix { rows, cols, row_stride: cols, offset: 0 };
        prepared.launch(&ctx.stream, &[a.view(&xm), wv, bv, o.view(&om)]).kaio(op)?;
        drop((a, o));
        Ok((out, shape))
    }
}

/// LayerNorm of `x` over its last dimension (any rank, rows may be
/// strided): `weight` and `bias`, where given, are `[last dim]` of x's
/// dtype (f32, f16 or bf16); None means weight 1, bias 0. Returns a new
/// contiguous tensor. eps finite and >= 0. Forward only.
pub fn layer_norm(x: &Tensor, weight: Option<&Tensor>, bias: Option<&Tensor>, eps: f32) -> Result<Tensor> {
    forward_only("layer_norm", "x", x)?;
    for (arg, t) in [("weight", weight), ("bias", bias)] {
        if let Some(t) = t {
            forward_only("layer_norm", arg, t)?;
        }
    }
    x.apply_op1_no_bwd(&LayerNorm { eps, weight: weight.cloned(), bias: bias.cloned() })
}
