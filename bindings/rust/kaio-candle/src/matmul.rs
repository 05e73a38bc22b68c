//! KAIO's four tensor-core matmuls, `C (f32) = A · B` with A `[.., M, K]`
//! (leading dims fold into M) and B `[K, N]` in f16 or bf16, with backward
//! through candle's autograd: dA = dC · Bᵀ and dB = Aᵀ · dC from libkaio's
//! matmul backward, which rounds the f32 dC itself and writes the gradients
//! in the inputs' dtype, as candle's autograd needs.
use candle_core::backend::{BackendDevice, BackendStorage};
use candle_core::{bail, CudaStorage, CustomOp2, CustomOp3, DType, Layout, Result, Shape, Tensor};

use crate::context::context;
use crate::error::KaioResultExt;
use crate::layout::{self, Matrix};
use crate::prep::{aligned16, no_cpu_fwd};
use crate::storage::{alloc, read, same_device, write};

pub use kaio::MatmulTc;

fn name(kind: MatmulTc) -> &'static str {
    match kind {
        MatmulTc::F16 => "matmul_tc",
        MatmulTc::F16Async => "matmul_tc_async",
        MatmulTc::Bf16 => "matmul_tc_bf16",
        MatmulTc::Bf16Async => "matmul_tc_bf16_async",
    }
}

fn input_dtype(kind: MatmulTc) -> DType {
    match kind {
        MatmulTc::F16 | MatmulTc::F16Async => DType::F16,
        MatmulTc::Bf16 | MatmulTc::Bf16Async => DType::BF16,
    }
}

/// A and B as matrices: A M x K; B K x N, or (when the bool is true) B's
/// transpose N x K, for a `b` that is the `.t()` of a row-major [N, K]
/// tensor (an nn.Linear weight), which libkaio reads as it is.
fn operands(op: &str, kind: MatmulTc, a: &CudaStorage, al: &Layout, b: &CudaStorage, bl: &Layout) -> Result<(Matrix, Matrix, bool)> {
    let want = input_dtype(kind);
    layout::dtype(op, "a", a.dtype(), &[want])?;
    layout::dtype(op, "b", b.dtype(), &[want])?;
    same_device(op, a, b, "b")?;
    if al.dims().len() < 2 {
        bail!("kaio-candle::{op}: argument 'a' has shape {:?}; expected [.., M, K]", al.dims())
    }
    layout::rank(op, "b", bl.dims(), 2, "K, N")?;
    let am = layout::matrix(op, "a", al)?;
    let k = bl.dims()[0];
    if am.cols != k {
        bail!("kaio-candle::{op}: 'a' is {:?} and 'b' is {:?}: K differs ({} vs {k})", al.dims(), bl.dims(), am.cols)
    }
    let transposed = bl.stride()[0] == 1 && k > 1 && bl.dims()[1] > 1;
    if transposed {
        return Ok((am, layout::matrix(op, "b", &bl.transpose(0, 1)?)?, true));
    }
    Ok((am, layout::matrix(op, "b", bl)?, false))
}

fn variant(kind: MatmulTc) -> kaio::MatmulVariant {
    match kind {
        MatmulTc::F16Async | MatmulTc::Bf16Async => kaio::MatmulVariant::Async,
        _ => kaio::MatmulVariant::Auto,
    }
}

/// The forward op.
#[derive(Copy, Clone, Debug)]
pub struct MatmulTcOp(pub MatmulTc);

impl CustomOp2 for MatmulTcOp {
    fn name(&self) -> &'static str {
        name(self.0)
    }
    no_cpu_fwd!(2, |op| name(op.0));
    fn cuda_fwd(&self, a: &CudaStorage, al: &Layout, b: &CudaStorage, bl: &Layout) -> Result<(CudaStorage, Shape)> {
        let op = name(self.0);
        let (am, bm, trans_b) = operands(op, self.0, a, al, b, bl)?;
        let (m, k, n) = (am.rows, am.cols, if trans_b { bm.rows } else { bm.cols });
        let mut dims = al.dims().to_vec();
        *dims.last_mut().unwrap() = n;
        let shape = Shape::from(dims);
        let dev = &a.device;
        let mut out = alloc(dev, DType::F32, m * n)?;
        if m == 0 || n == 0 {
            return Ok((out, shape));
        }
        if k == 0 {
            bail!("kaio-candle::{op}: K is 0; libkaio's matmul needs K >= 1")
        }
        let ctx = context(dev)?;
        let kind = self.0;
        let prepared = if trans_b {
            // The same kernels' family through the general matmul, B read
            // transposed (M <= 16 runs libkaio's GEMV kernels there).
            let desc = kaio::MatmulDesc {
                in_dtype: crate::storage::kaio_dtype(op, input_dtype(kind))?,
                trans_b: kaio::Trans::T,
                variant: variant(kind),
                m,
                n,
                k,
                ..Default::default()
            };
            ctx.op((op, vec![1, m as i64, n as i64, k as i64]), |d| kaio::Op::matmul(d, &desc))?
        } else {
            ctx.op((op, vec![0, m as i64, n as i64, k as i64]), |d| kaio::Op::matmul_tc(d, kind, m, n, k))?
        };
        let stream = dev.cuda_stream();
        let (ra, rb) = (read(&ctx, op, a, &stream)?, read(&ctx, op, b, &stream)?);
        let rc = write(&ctx, op, &mut out, &stream)?;
        let cm = Matrix { rows: m, cols: n, row_stride: n, offset: 0 };
        prepared.launch(&ctx.stream, &[ra.view(&am), rb.view(&bm), rc.view(&cm)]).kaio(op)?;
        drop((ra, rb, rc));
        Ok((out, shape))
    }
    fn bwd(&self, a: &Tensor, b: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let (k, n) = b.dims2()?;
        // libkaio's backward takes B K x N row-major; a transposed B is copied.
        let b = &if b.stride()[1] == 1 { b.clone() } else { b.contiguous()? };
        let m = a.elem_count() / k.max(1);
        let a2 = a.reshape((m, k))?;
        let g2 = grad.to_dtype(DType::F32)?.reshape((m, n))?;
        // dB = Aᵀ · dC sums over M, which libkaio's tensor cores take 8 at a
        // time: zero rows added to A and dC add nothing, and dA drops them.
        let pad = (8 - m % 8) % 8;
        let (a2, g2) = if pad > 0 { (a2.pad_with_zeros(0, 0, pad)?, g2.pad_with_zeros(0, 0, pad)?) } else { (a2, g2) };
        let da = g2.apply_op3_no_bwd(&a2, b, &MatmulTcGrad { kind: self.0, wrt_a: true })?;
        let da = if pad > 0 { da.narrow(0, 0, m)? } else { da };
        let db = g2.apply_op3_no_bwd(&a2, b, &MatmulTcGrad { kind: self.0, wrt_a: false })?;
        Ok((Some(da.reshape(a.shape())?), Some(db)))
    }
}

/// One gradient of the matmul: `(dC, A, B) -> dA` or `-> dB`, in A's dtype.
#[derive(Copy, Clone, Debug)]
struct MatmulTcGrad {
    kind: MatmulTc,
    wrt_a: bool,
}

impl CustomOp3 for MatmulTcGrad {
    fn name(&self) -> &'static str {
        "kaio-matmul-tc-backward"
    }
    no_cpu_fwd!(3, "matmul_tc backward");
    fn cuda_fwd(
        &self,
        dc: &CudaStorage,
        dcl: &Layout,
        a: &CudaStorage,
        al: &Layout,
        b: &CudaStorage,
        bl: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let op = "matmul_tc_backward";
        let (am, bm, trans_b) = operands(op, self.kind, a, al, b, bl)?;
        if trans_b {
            bail!("kaio-candle::{op}: B must be row-major here (the forward's bwd copies it)")
        }
        let (m, k, n) = (am.rows, am.cols, bm.cols);
        layout::dtype(op, "grad", dc.dtype(), &[DType::F32])?;
        let dcm = layout::matrix(op, "grad", dcl)?;
        if (dcm.rows, dcm.cols) != (m, n) {
            bail!("kaio-candle::{op}: the gradient is {:?}; expected {m} x {n}", dcl.dims())
        }
        let in_dtype = a.dtype();
        let (shape, rows, cols) = if self.wrt_a { (al.shape().clone(), m, k) } else { (bl.shape().clone(), k, n) };
        let dev = &a.device;
        if m == 0 || n == 0 || k == 0 {
            // An empty product: the gradient is zero (or empty).
            return Ok((dev.zeros_impl(&shape, in_dtype)?, shape));
        }
        let mut out = alloc(dev, in_dtype, rows * cols)?;
        let ctx = context(dev)?;
        let kd = crate::storage::kaio_dtype(op, in_dtype)?;
        let variant = variant(self.kind);
        let desc = kaio::MatmulBackwardDesc {
            in_dtype: kd,
            grad_dtype: kaio::Dtype::F32,
            out_dtype: kd,
            variant,
            m,
            n,
            k,
            beta: 0.0,
        };
        let prepared = ctx.op((op, vec![kd.raw() as i64, variant as i64, m as i64, n as i64, k as i64]), |d| {
            kaio::Op::matmul_backward(d, &desc)
        })?;
        let stream = dev.cuda_stream();
        let (rdc, ra, rb) = (read(&ctx, op, dc, &stream)?, read(&ctx, op, a, &stream)?, read(&ctx, op, b, &stream)?);
        let ro = write(&ctx, op, &mut out, &stream)?;
        let om = Matrix { rows, cols, row_stride: cols, offset: 0 };
        let none = kaio::TensorView::none();
        let (da, db) = if self.wrt_a { (ro.view(&om), none) } else { (none, ro.view(&om)) };
        prepared.launch(&ctx.stream, &[rdc.view(&dcm), ra.view(&am), rb.view(&bm), da, db]).kaio(op)?;
        drop((rdc, ra, rb, ro));
        Ok((out, shape))
    }
}

fn apply(kind: MatmulTc, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    aligned16(a)?.apply_op2(&aligned16(b)?, MatmulTcOp(kind))
}

/// f32 `a · b` for f16 `a` `[.., M, K]` and `b` `[K, N]` (libkaio picks the
/// kernel). `b` may also be the `.t()` of a row-major `[N, K]` tensor (an
/// nn.Linear weight), read as it is, with no copy. K and N must be multiples
/// of 8 (libkaio's tensor-core contract); a start that is not 16-byte
/// aligned is copied first.
pub fn matmul_tc(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    apply(MatmulTc::F16, a, b)
}
/// As [`matmul_tc`], with the cp.async pipeline kernels.
pub fn matmul_tc_async(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    apply(MatmulTc::F16Async, a, b)
}
/// As [`matmul_tc`] for bf16 inputs.
pub fn matmul_tc_bf16(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    apply(MatmulTc::Bf16, a, b)
}
/// As [`matmul_tc_bf16`], with the cp.async pipeline kernels.
pub fn matmul_tc_bf16_async(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    apply(MatmulTc::Bf16Async, a, b)
}
