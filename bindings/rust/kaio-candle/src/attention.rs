//! Attention on candle tensors: KAIO's seed ops (`attention_tc`, f16 in and
//! f32 out, forward only; `attention_flash`, f32 single head, with backward)
//! and batched GQA FlashAttention in f16 or bf16 ([`flash_attention`], BSHD,
//! with backward), which candle lacks.
//!
//! candle's `bwd` gets the inputs, the forward's output and its gradient but
//! no saved state. So when an input tracks gradients, the forward op writes
//! one packed tensor, O followed by the LSE (the f32 logsumexp of every
//! query row that libkaio's backward needs), and the free function returns
//! a view of O in it; `bwd` reads the LSE back out of that output. The
//! backward op writes dQ, dK and dV packed in one tensor, which `bwd` splits
//! into views. Inputs that track no gradient get O alone.
use candle_core::backend::{BackendDevice, BackendStorage};
use candle_core::cuda_backend::cudarc::driver::CudaStream;
use candle_core::{bail, CudaStorage, CustomOp3, DType, Layout, Result, Shape, Storage, Tensor};

use crate::context::{context, Context};
use crate::error::KaioResultExt;
use crate::layout::{self, Matrix};
use crate::prep::{aligned16, cuda_of, no_cpu_fwd};
use crate::storage::{alloc, kaio_dtype, read, same_device, write, Arg};

/// Head dims of libkaio's f16/bf16 attention forward (and of `attention_tc`).
const FWD_DIMS: &[usize] = &[32, 64, 96, 128, 256];
/// Head dims of libkaio's f16/bf16 attention backward.
pub(crate) const BWD_DIMS: &[usize] = &[32, 64, 96, 128];
/// Largest head dim of the f32 `attention_flash` kernels.
const FLASH_F32_MAX_DIM: usize = 256;
/// libkaio's grid limit: B·Hq blocks in y.
const MAX_BATCH_HEADS: usize = 65535;

/// A BSHD layout `[B, S, H, D]` as libkaio's rank-2 view `[B·S, H·D]`: row
/// `b·S + s` holds position `s` of batch `b`, its H heads side by side. The
/// head dim must be contiguous, the heads adjacent (stride D) and the B·S
/// positions evenly spaced; the row stride may exceed H·D (Q, K and V as
/// views of one fused projection output).
pub(crate) fn bshd(op: &str, arg: &str, l: &Layout) -> Result<Matrix> {
    let dims = l.dims();
    let st = l.stride();
    layout::rank(op, arg, dims, 4, "batch, seq, heads, head_dim")?;
    let (b, s, h, d) = (dims[0], dims[1], dims[2], dims[3]);
    let (rows, cols) = (b * s, h * d);
    if d > 1 && st[3] != 1 {
        bail!(
            "kaio-candle::{op}: argument '{arg}' (shape {dims:?}, stride {st:?}) is not contiguous \
             along its last dimension (head_dim); call .contiguous() first"
        )
    }
    if h > 1 && st[2] != d {
        bail!(
            "kaio-candle::{op}: argument '{arg}' (shape {dims:?}, stride {st:?}) has its heads {} \
             elements apart, not head_dim = {d}: attention reads the H·D values of one position \
             side by side (BSHD; a [B, H, S, D] tensor transposed to [B, S, H, D] is not); call \
             .contiguous() first",
            st[2]
        )
    }
    if b > 1 && s > 1 && st[0] != s * st[1] {
        bail!(
            "kaio-candle::{op}: argument '{arg}' (shape {dims:?}, stride {st:?}) does not fold \
             batch and sequence into evenly spaced rows (the batch stride must be S times the \
             sequence stride); call .contiguous() first"
        )
    }
    let row_stride = if rows <= 1 {
        cols
    } else if s > 1 {
        st[1]
    } else {
        st[0]
    };
    if row_stride < cols {
        bail!(
            "kaio-candle::{op}: argument '{arg}' (shape {dims:?}, stride {st:?}) has positions \
             {row_stride} elements apart, fewer than H·D = {cols}, so they overlap (a broadcast \
             tensor?); call .contiguous() first"
        )
    }
    Ok(Matrix { rows, cols, row_stride, offset: l.start_offset() })
}

/// libkaio's tensor-core attention views: a 16-byte aligned start and a row
/// stride that is a multiple of 8 elements.
pub(crate) fn tc_view(op: &str, arg: &str, m: &Matrix, elem_bytes: usize) -> Result<()> {
    if !(m.offset * elem_bytes).is_multiple_of(16) {
        bail!(
            "kaio-candle::{op}: argument '{arg}' starts {} bytes into its storage (start_offset {}), \
             not on the 16-byte boundary libkaio's tensor-core loads need; kaio_candle::{op} \
             copies such inputs itself, or call .force_contiguous() first",
            m.offset * elem_bytes,
            m.offset
        )
    }
    if m.rows > 1 && !m.row_stride.is_multiple_of(8) {
        bail!(
            "kaio-candle::{op}: argument '{arg}' has rows {} elements apart, not a multiple of 8 \
             as libkaio's tensor-core loads need; call .contiguous() first",
            m.row_stride
        )
    }
    Ok(())
}

pub(crate) fn same_dtype(op: &str, arg: &str, got: DType, first: DType) -> Result<()> {
    if got != first {
        bail!("kaio-candle::{op}: argument '{arg}' is {got:?} but 'q' is {first:?}; q, k and v must share one dtype")
    }
    Ok(())
}

pub(crate) fn head_dim(op: &str, d: usize, allowed: &[usize], what: &str) -> Result<()> {
    if !allowed.contains(&d) {
        bail!(
            "kaio-candle::{op}: head_dim is {d}; libkaio's {what} takes {allowed:?}. Pad the head \
             dimension with zeros to the next supported size"
        )
    }
    Ok(())
}

/// Fails unless k and v are on q's GPU.
fn kv_on_q_device(op: &str, q: &CudaStorage, k: &CudaStorage, v: &CudaStorage) -> Result<()> {
    same_device(op, q, k, "k")?;
    same_device(op, q, v, "v")
}

/// q, k, v as the matrices `view` makes of their layouts (layout::matrix or
/// bshd), each checked for libkaio's tensor-core loads where `tc_elem` (the
/// element size in bytes) is given.
fn qkv_mats(
    op: &str,
    layouts: [&Layout; 3],
    view: fn(&str, &str, &Layout) -> Result<Matrix>,
    tc_elem: Option<usize>,
) -> Result<[Matrix; 3]> {
    let mat = |arg: &str, l: &Layout| -> Result<Matrix> {
        let m = view(op, arg, l)?;
        if let Some(elem) = tc_elem {
            tc_view(op, arg, &m, elem)?;
        }
        Ok(m)
    };
    Ok([mat("q", layouts[0])?, mat("k", layouts[1])?, mat("v", layouts[2])?])
}

/// Reads q, k and v for one launch.
fn read_qkv<'a>(
    ctx: &Context,
    op: &str,
    [q, k, v]: [&'a CudaStorage; 3],
    stream: &'a CudaStream,
) -> Result<[Arg<'a>; 3]> {
    Ok([read(ctx, op, q, stream)?, read(ctx, op, k, stream)?, read(ctx, op, v, stream)?])
}

/// The storage of a tensor a backward op holds (`what`: the forward output,
/// the output gradient), checked to be on CUDA, of a dtype that
/// `dtype_ok(what, dtype)` accepts, and on q's GPU.
fn held_cuda<'a>(
    op: &str,
    what: &str,
    s: &'a Storage,
    q: &CudaStorage,
    dtype_ok: impl FnOnce(&str, DType) -> Result<()>,
) -> Result<&'a CudaStorage> {
    let c = cuda_of(op, what, s)?;
    dtype_ok(what, c.dtype())?;
    same_device(op, q, c, what)?;
    Ok(c)
}

/// Runs the forward op that `fwd(with_lse)` makes on q, k, v. When an input
/// tracks gradients, the op writes O then the LSE (for its backward) and the
/// result is the view of O, in q's shape; else it writes O alone, with no
/// backward.
pub(crate) fn with_lse_if_training<C>(q: &Tensor, k: &Tensor, v: &Tensor, fwd: impl Fn(bool) -> C) -> Result<Tensor>
where
    C: CustomOp3 + Send + Sync + 'static,
{
    let train = q.track_op() || k.track_op() || v.track_op();
    if !train {
        return q.apply_op3_no_bwd(k, v, &fwd(false));
    }
    let packed = q.apply_op3(k, v, fwd(true))?;
    packed.narrow(0, 0, q.elem_count())?.reshape(q.shape())
}

// ---------------------------------------------------------------------------
// attention_tc: KAIO's rank-2 single-head tensor-core attention.

/// KAIO's rank-2 single-head tensor-core attention, forward only: f16 q
/// `[Sq, D]`, k `[Sk, D]`, v `[Sk, D]` -> f32 `[Sq, D]`, scale `1/√D`;
/// `causal` masks top-left (query i sees keys j <= i).
#[derive(Copy, Clone, Debug)]
pub struct AttentionTc {
    pub causal: bool,
}

impl AttentionTc {
    fn name_of(&self) -> &'static str {
        if self.causal {
            "attention_tc_causal"
        } else {
            "attention_tc"
        }
    }
}

impl CustomOp3 for AttentionTc {
    fn name(&self) -> &'static str {
        if self.causal {
            "kaio-attention-tc-causal"
        } else {
            "kaio-attention-tc"
        }
    }
    no_cpu_fwd!(3, |op| op.name_of());
    fn cuda_fwd(
        &self,
        q: &CudaStorage,
        ql: &Layout,
        k: &CudaStorage,
        kl: &Layout,
        v: &CudaStorage,
        vl: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let op = self.name_of();
        for (s, arg) in [(q, "q"), (k, "k"), (v, "v")] {
            layout::dtype(op, arg, s.dtype(), &[DType::F16])?;
        }
        kv_on_q_device(op, q, k, v)?;
        layout::rank(op, "q", ql.dims(), 2, "Sq, D")?;
        layout::rank(op, "k", kl.dims(), 2, "Sk, D")?;
        layout::rank(op, "v", vl.dims(), 2, "Sk, D")?;
        let (sq, d) = (ql.dims()[0], ql.dims()[1]);
        let sk = kl.dims()[0];
        if kl.dims()[1] != d {
            bail!(
                "kaio-candle::{op}: 'k' is {:?} but 'q' is {:?}; they must share the head dim D",
                kl.dims(),
                ql.dims()
            )
        }
        if vl.dims() != kl.dims() {
            bail!(
                "kaio-candle::{op}: 'v' is {:?} but 'k' is {:?}; v must be [Sk, D] with q's head dim (Dv == D: \
                 pad v with zero columns to D)",
                vl.dims(),
                kl.dims()
            )
        }
        head_dim(op, d, FWD_DIMS, "attention_tc")?;
        let shape = Shape::from((sq, d));
        let dev = &q.device;
        if sq == 0 || sk == 0 {
            // No query: empty. No key: nothing to attend to, O = 0 (as
            // libkaio writes for a row that sees no key).
            return Ok((dev.zeros_impl(&shape, DType::F32)?, shape));
        }
        let [qm, km, vm] = qkv_mats(op, [ql, kl, vl], layout::matrix, Some(2))?;
        let mut out = alloc(dev, DType::F32, sq * d)?;
        let ctx = context(dev)?;
        let stream = dev.cuda_stream();
        let [rq, rk, rv] = read_qkv(&ctx, op, [q, k, v], &stream)?;
        let ro = write(&ctx, op, &mut out, &stream)?;
        let om = Matrix { rows: sq, cols: d, row_stride: d, offset: 0 };
        kaio::attention_tc(
            &ctx.stream,
            &rq.view(&qm),
            &rk.view(&km),
            &rv.view(&vm),
            &ro.view(&om),
            self.causal,
        )
        .kaio(op)?;
        drop((rq, rk, rv, ro));
        Ok((out, shape))
    }
}

/// KAIO's `attention_tc`: `softmax(q kᵀ / √D) v` for f16 q `[Sq, D]`, k and
/// v `[Sk, D]`, as f32 `[Sq, D]` (one batch, one head; f32 accumulation,
/// P rounded to f16 before P·V: about 1.5e-3 relative). D must be one of 32,
/// 64, 96, 128, 256 and v has q's head dim; Sq and Sk are free (no seq_k
/// cap, Sq != Sk allowed; Sk = 0 gives zeros). Inputs need contiguous rows
/// a multiple of 8 elements apart; a start that is not 16-byte aligned is
/// copied first. Forward only (no backward through candle's autograd).
pub fn attention_tc(q: &Tensor, k: &Tensor, v: &Tensor) -> Result<Tensor> {
    aligned16(q)?.apply_op3_no_bwd(&aligned16(k)?, &aligned16(v)?, &AttentionTc { causal: false })
}

/// As [`attention_tc`], causal top-left aligned as KAIO does: query i sees
/// keys j <= i (whatever Sq and Sk are).
pub fn attention_tc_causal(q: &Tensor, k: &Tensor, v: &Tensor) -> Result<Tensor> {
    aligned16(q)?.apply_op3_no_bwd(&aligned16(k)?, &aligned16(v)?, &AttentionTc { causal: true })
}

// ---------------------------------------------------------------------------
// attention_flash: KAIO's f32 single-head FlashAttention, with backward.

/// KAIO's f32 single-head FlashAttention forward: q, k, v `[S, D]` f32 ->
/// `[S, D]`, or with `with_lse` the packed f32 `[S·D + S]`: O's elements,
/// then the LSE of each query row (what the backward reads).
#[derive(Copy, Clone, Debug)]
pub struct AttentionFlash {
    pub causal: bool,
    pub with_lse: bool,
}

impl AttentionFlash {
    fn name_of(&self) -> &'static str {
        if self.causal {
            "attention_flash_causal"
        } else {
            "attention_flash"
        }
    }
}

/// Checks q, k, v of the f32 flash ops; returns their matrices and S, D.
fn flash_f32_operands(
    op: &str,
    q: &CudaStorage,
    ql: &Layout,
    k: &CudaStorage,
    kl: &Layout,
    v: &CudaStorage,
    vl: &Layout,
) -> Result<(usize, usize)> {
    for (s, arg) in [(q, "q"), (k, "k"), (v, "v")] {
        layout::dtype(op, arg, s.dtype(), &[DType::F32])?;
    }
    kv_on_q_device(op, q, k, v)?;
    layout::rank(op, "q", ql.dims(), 2, "S, D")?;
    for (l, arg) in [(kl, "k"), (vl, "v")] {
        if l.dims() != ql.dims() {
            bail!(
                "kaio-candle::{op}: '{arg}' is {:?} but 'q' is {:?}; this op is single-head self-attention: q, k \
                 and v are all [S, D] (use flash_attention for Sq != Sk)",
                l.dims(),
                ql.dims()
            )
        }
    }
    let (s, d) = (ql.dims()[0], ql.dims()[1]);
    if d == 0 || d > FLASH_F32_MAX_DIM {
        bail!(
            "kaio-candle::{op}: head_dim is {d}; the f32 flash kernels take 1 to {FLASH_F32_MAX_DIM} (use the \
             f16/bf16 flash_attention for larger heads)"
        )
    }
    Ok((s, d))
}

impl CustomOp3 for AttentionFlash {
    fn name(&self) -> &'static str {
        if self.causal {
            "kaio-attention-flash-causal"
        } else {
            "kaio-attention-flash"
        }
    }
    no_cpu_fwd!(3, |op| op.name_of());
    fn cuda_fwd(
        &self,
        q: &CudaStorage,
        ql: &Layout,
        k: &CudaStorage,
        kl: &Layout,
        v: &CudaStorage,
        vl: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let op = self.name_of();
        let (s, d) = flash_f32_operands(op, q, ql, k, kl, v, vl)?;
        let n_o = s * d;
        let shape = if self.with_lse { Shape::from(n_o + s) } else { Shape::from((s, d)) };
        let dev = &q.device;
        if s == 0 {
            return Ok((dev.zeros_impl(&shape, DType::F32)?, shape));
        }
        let [qm, km, vm] = qkv_mats(op, [ql, kl, vl], layout::matrix, None)?;
        let mut out = alloc(dev, DType::F32, shape.elem_count())?;
        let ctx = context(dev)?;
        let stream = dev.cuda_stream();
        let [rq, rk, rv] = read_qkv(&ctx, op, [q, k, v], &stream)?;
        let ro = write(&ctx, op, &mut out, &stream)?;
        let om = Matrix { rows: s, cols: d, row_stride: d, offset: 0 };
        // The LSE, f32 [1, S], right after O.
        let lse = Matrix { rows: 1, cols: s, row_stride: s, offset: n_o };
        let lse = self.with_lse.then(|| ro.view(&lse));
        kaio::attention_flash(
            &ctx.stream,
            &rq.view(&qm),
            &rk.view(&km),
            &rv.view(&vm),
            &ro.view(&om),
            lse.as_ref(),
            self.causal,
        )
        .kaio(op)?;
        drop((rq, rk, rv, ro));
        Ok((out, shape))
    }
    fn bwd(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let op = self.name_of();
        if !self.with_lse {
            bail!(
                "kaio-candle::{op}: backward of a forward run without its LSE; use kaio_candle::{op}, which keeps \
                 it when an input tracks gradients"
            )
        }
        let (s, d) = q.dims2()?;
        if s == 0 {
            return Ok((Some(q.zeros_like()?), Some(k.zeros_like()?), Some(v.zeros_like()?)));
        }
        let n = s * d;
        // The LSE part of the packed output has no gradient of its own.
        let dout = grad.narrow(0, 0, n)?.reshape((s, d))?.contiguous()?;
        let packed =
            q.apply_op3_no_bwd(k, v, &AttentionFlashBackward { causal: self.causal, packed: res.clone(), dout })?;
        let part = |i: usize, t: &Tensor| -> Result<Option<Tensor>> {
            if t.track_op() {
                Ok(Some(packed.narrow(0, i * n, n)?.reshape((s, d))?))
            } else {
                Ok(None)
            }
        };
        Ok((part(0, q)?, part(1, k)?, part(2, v)?))
    }
}

/// `(q, k, v) -> [dq | dk | dv]`, f32 `[3·S·D]`, from the packed forward
/// output (O, LSE) and dO it holds.
struct AttentionFlashBackward {
    causal: bool,
    packed: Tensor,
    dout: Tensor,
}

impl CustomOp3 for AttentionFlashBackward {
    fn name(&self) -> &'static str {
        "kaio-attention-flash-backward"
    }
    no_cpu_fwd!(3, "attention_flash backward");
    fn cuda_fwd(
        &self,
        q: &CudaStorage,
        ql: &Layout,
        k: &CudaStorage,
        kl: &Layout,
        v: &CudaStorage,
        vl: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let op = if self.causal { "attention_flash_causal_backward" } else { "attention_flash_backward" };
        let (s, d) = flash_f32_operands(op, q, ql, k, kl, v, vl)?;
        let n = s * d;
        let f32_only = |what: &str, dt: DType| layout::dtype(op, what, dt, &[DType::F32]);
        let (ps, pl) = self.packed.storage_and_layout();
        let ps = held_cuda(op, "forward output", &ps, q, f32_only)?;
        let (gs, gl) = self.dout.storage_and_layout();
        let gs = held_cuda(op, "output gradient", &gs, q, f32_only)?;
        if pl.dims() != [n + s] || !pl.is_contiguous() {
            bail!(
                "kaio-candle::{op}: the forward output is {:?}; expected the packed contiguous [{}] (O, then LSE)",
                pl.dims(),
                n + s
            )
        }
        if gl.dims() != [s, d] {
            bail!("kaio-candle::{op}: the output gradient is {:?}; expected [{s}, {d}]", gl.dims())
        }
        let shape = Shape::from(3 * n);
        let dev = &q.device;
        if s == 0 {
            return Ok((dev.zeros_impl(&shape, DType::F32)?, shape));
        }
        let [qm, km, vm] = qkv_mats(op, [ql, kl, vl], layout::matrix, None)?;
        let gm = layout::matrix(op, "output gradient", gl)?;
        let po = pl.start_offset();
        let om = Matrix { rows: s, cols: d, row_stride: d, offset: po };
        let lm = Matrix { rows: 1, cols: s, row_stride: s, offset: po + n };
        let mut out = alloc(dev, DType::F32, 3 * n)?;
        let ctx = context(dev)?;
        let stream = dev.cuda_stream();
        let [rq, rk, rv] = read_qkv(&ctx, op, [q, k, v], &stream)?;
        let (rp, rg) = (read(&ctx, op, ps, &stream)?, read(&ctx, op, gs, &stream)?);
        let ro = write(&ctx, op, &mut out, &stream)?;
        let grad_at = |i: usize| ro.view(&Matrix { rows: s, cols: d, row_stride: d, offset: i * n });
        let grads = kaio::FlashGrads { dq: grad_at(0), dk: grad_at(1), dv: grad_at(2) };
        kaio::attention_flash_backward(
            &ctx.stream,
            &rg.view(&gm),
            &rq.view(&qm),
            &rk.view(&km),
            &rv.view(&vm),
            &rp.view(&om),
            &rp.view(&lm),
            &grads,
            self.causal,
        )
        .kaio(op)?;
        drop((rq, rk, rv, rp, rg, ro));
        Ok((out, shape))
    }
}

fn flash_f32(q: &Tensor, k: &Tensor, v: &Tensor, causal: bool) -> Result<Tensor> {
    with_lse_if_training(q, k, v, |with_lse| AttentionFlash { causal, with_lse })
}

/// KAIO's f32 single-head FlashAttention: `softmax(q kᵀ / √D) v` for f32 q,
/// k, v `[S, D]` (self-attention, one length S; 1 <= D <= 256) -> f32
/// `[S, D]`, f32 end to end (D <= 128 on the tensor cores in split TF32,
/// above on the CUDA cores: f32-level accuracy, about 2e-5 relative for O
/// and 1e-4 for the gradients). Rows may be any distance apart (a start
/// offset is fine). With backward through candle's autograd (libkaio's
/// `attention_flash_backward`): when an input tracks gradients the forward
/// also keeps the S f32 LSE values, in the storage the result views.
/// S = 0 gives an empty result.
pub fn attention_flash(q: &Tensor, k: &Tensor, v: &Tensor) -> Result<Tensor> {
    flash_f32(q, k, v, false)
}

/// As [`attention_flash`], causal top-left aligned: query i sees keys j <= i.
pub fn attention_flash_causal(q: &Tensor, k: &Tensor, v: &Tensor) -> Result<Tensor> {
    flash_f32(q, k, v, true)
}

// ---------------------------------------------------------------------------
// flash_attention: batched GQA FlashAttention-2, f16 or bf16, with backward.

/// The shape of one batched attention call.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Dims {
    b: usize,
    sq: usize,
    sk: usize,
    hq: usize,
    hkv: usize,
    d: usize,
}

impl Dims {
    /// Elements of Q (and O, dO, dQ).
    fn n_q(&self) -> usize {
        self.b * self.sq * self.hq * self.d
    }
    /// Elements of K (and V, dK, dV).
    fn n_k(&self) -> usize {
        self.b * self.sk * self.hkv * self.d
    }
    /// f32 values of the LSE, [B·Hq, Sq].
    fn n_lse(&self) -> usize {
        self.b * self.hq * self.sq
    }
    fn empty(&self) -> bool {
        self.b == 0 || self.sq == 0 || self.sk == 0
    }
}

/// Checks dtypes, ranks and shapes of q `[B, Sq, Hq, D]`, k and v
/// `[B, Sk, Hkv, D]`; returns the shape.
fn gqa_dims(op: &str, q: (DType, &[usize]), k: (DType, &[usize]), v: (DType, &[usize])) -> Result<Dims> {
    layout::dtype(op, "q", q.0, &[DType::F16, DType::BF16])?;
    same_dtype(op, "k", k.0, q.0)?;
    same_dtype(op, "v", v.0, q.0)?;
    layout::rank(op, "q", q.1, 4, "batch, seq_q, heads_q, head_dim")?;
    layout::rank(op, "k", k.1, 4, "batch, seq_k, heads_kv, head_dim")?;
    layout::rank(op, "v", v.1, 4, "batch, seq_k, heads_kv, head_dim")?;
    let (qd, kd) = (q.1, k.1);
    if v.1 != kd {
        bail!("kaio-candle::{op}: 'v' is {:?} but 'k' is {kd:?}; they must match ([B, Sk, Hkv, D])", v.1)
    }
    if kd[0] != qd[0] || kd[3] != qd[3] {
        bail!(
            "kaio-candle::{op}: 'q' is {qd:?} and 'k' is {kd:?}; they must share the batch (dim 0) and the head \
             dim (dim 3): q [B, Sq, Hq, D], k and v [B, Sk, Hkv, D]"
        )
    }
    let dims = Dims { b: qd[0], sq: qd[1], sk: kd[1], hq: qd[2], hkv: kd[2], d: qd[3] };
    if dims.hq == 0 || dims.hkv == 0 || !dims.hq.is_multiple_of(dims.hkv) {
        bail!(
            "kaio-candle::{op}: 'q' has {} heads and 'k' has {}; the query heads must be a non-zero multiple of \
             the KV heads (MHA, GQA, MQA: query head h reads KV head h / (Hq / Hkv))",
            dims.hq,
            dims.hkv
        )
    }
    head_dim(op, dims.d, FWD_DIMS, "attention forward")?;
    if dims.b * dims.hq > MAX_BATCH_HEADS {
        bail!(
            "kaio-candle::{op}: batch x heads_q is {}; libkaio takes at most {MAX_BATCH_HEADS} per call. Split the \
             batch",
            dims.b * dims.hq
        )
    }
    if dims.n_lse() > i32::MAX as usize {
        bail!(
            "kaio-candle::{op}: batch x heads_q x seq_q is {}; libkaio takes at most {} per call. Split the batch",
            dims.n_lse(),
            i32::MAX
        )
    }
    Ok(dims)
}

/// The f32 LSE `[B·Hq, Sq]` that starts `offset_bytes` into `buf`.
fn lse_view<'a>(buf: &'a kaio::Buffer<u8>, x: &Dims, offset_bytes: usize) -> kaio::TensorView<'a> {
    kaio::TensorView::new(buf, x.b * x.hq, x.sq)
        .with_dtype(kaio::Dtype::F32)
        .with_offset_bytes(offset_bytes as u64)
        .with_row_stride(x.sq)
}

fn attention_desc(dtype: kaio::Dtype, causal: bool, scale: Option<f32>, x: &Dims) -> kaio::AttentionDesc {
    kaio::AttentionDesc {
        dtype,
        out_dtype: None,
        o_dtype: None,
        mask: if causal { kaio::AttentionMask::Causal } else { kaio::AttentionMask::None },
        variant: kaio::AttentionVariant::Auto,
        // flash_attention keeps candle-flash-attn's signature, which has no
        // place for this: its backward stays bit-identical between runs.
        deterministic: true,
        batch: x.b,
        seq_q: x.sq,
        seq_k: x.sk,
        heads_q: x.hq,
        heads_kv: x.hkv,
        head_dim: x.d,
        softmax_scale: scale.unwrap_or(0.0),
    }
}

fn desc_key(dtype: kaio::Dtype, causal: bool, scale: Option<f32>, x: &Dims) -> Vec<i64> {
    let scale = scale.unwrap_or(0.0).to_bits() as i64;
    let mut key = vec![dtype.raw() as i64, causal as i64, scale];
    key.extend([x.b, x.sq, x.sk, x.hq, x.hkv, x.d].map(|n| n as i64));
    key
}

pub(crate) fn check_scale(op: &str, scale: Option<f32>) -> Result<()> {
    match scale {
        Some(s) if !(s.is_finite() && s > 0.0) => {
            bail!("kaio-candle::{op}: softmax_scale is {s}; it must be finite and > 0 (None means 1/sqrt(head_dim))")
        }
        _ => Ok(()),
    }
}

/// Batched GQA FlashAttention forward, f16 or bf16: q `[B, Sq, Hq, D]`, k
/// and v `[B, Sk, Hkv, D]` -> O `[B, Sq, Hq, D]` in the input dtype, or with
/// `with_lse` the packed 1-D tensor of O's elements followed by the f32 LSE
/// `[B·Hq, Sq]` stored in `2·B·Hq·Sq` elements of the input dtype.
#[derive(Copy, Clone, Debug)]
pub struct FlashAttention {
    /// Bottom-right aligned: query i sees key j <= i + Sk − Sq.
    pub causal: bool,
    /// None: 1/√D.
    pub softmax_scale: Option<f32>,
    pub with_lse: bool,
}

impl CustomOp3 for FlashAttention {
    fn name(&self) -> &'static str {
        "kaio-flash-attention"
    }
    no_cpu_fwd!(3, "flash_attention");
    fn cuda_fwd(
        &self,
        q: &CudaStorage,
        ql: &Layout,
        k: &CudaStorage,
        kl: &Layout,
        v: &CudaStorage,
        vl: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let op = "flash_attention";
        check_scale(op, self.softmax_scale)?;
        let x = gqa_dims(op, (q.dtype(), ql.dims()), (k.dtype(), kl.dims()), (v.dtype(), vl.dims()))?;
        kv_on_q_device(op, q, k, v)?;
        let dtype = q.dtype();
        let esize = dtype.size_in_bytes();
        let n_o = x.n_q();
        let shape = if self.with_lse { Shape::from(n_o + 2 * x.n_lse()) } else { Shape::from((x.b, x.sq, x.hq, x.d)) };
        let dev = &q.device;
        if x.empty() {
            // No query: empty. No key: O = 0 (as libkaio writes for a row
            // that sees no key); the backward gives zero gradients without
            // reading the LSE.
            return Ok((dev.zeros_impl(&shape, dtype)?, shape));
        }
        let [qm, km, vm] = qkv_mats(op, [ql, kl, vl], bshd, Some(esize))?;
        let ctx = context(dev)?;
        let kd = kaio_dtype(op, dtype)?;
        let desc = attention_desc(kd, self.causal, self.softmax_scale, &x);
        let prepared =
            ctx.op((op, desc_key(kd, self.causal, self.softmax_scale, &x)), |d| kaio::Op::attention(d, &desc))?;
        let mut out = alloc(dev, dtype, shape.elem_count())?;
        let stream = dev.cuda_stream();
        let [rq, rk, rv] = read_qkv(&ctx, op, [q, k, v], &stream)?;
        let ro = write(&ctx, op, &mut out, &stream)?;
        let om = Matrix { rows: x.b * x.sq, cols: x.hq * x.d, row_stride: x.hq * x.d, offset: 0 };
        // O's bytes are a multiple of 64 (D is), so the LSE starts aligned.
        let lse = if self.with_lse { lse_view(&ro.buf, &x, n_o * esize) } else { kaio::TensorView::none() };
        prepared.launch(&ctx.stream, &[rq.view(&qm), rk.view(&km), rv.view(&vm), ro.view(&om), lse]).kaio(op)?;
        drop((rq, rk, rv, ro));
        Ok((out, shape))
    }
    fn bwd(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let op = "flash_attention_backward";
        if !self.with_lse {
            bail!(
                "kaio-candle::{op}: backward of a forward run without its LSE; use kaio_candle::flash_attention, \
                 which keeps it when an input tracks gradients"
            )
        }
        let x = gqa_dims(op, (q.dtype(), q.dims()), (k.dtype(), k.dims()), (v.dtype(), v.dims()))?;
        let keep = |t: &Tensor, g: Tensor| if t.track_op() { Some(g) } else { None };
        if x.empty() {
            return Ok((keep(q, q.zeros_like()?), keep(k, k.zeros_like()?), keep(v, v.zeros_like()?)));
        }
        head_dim(op, x.d, BWD_DIMS, "attention backward")?;
        let (n_q, n_k) = (x.n_q(), x.n_k());
        // dO: the gradient of O's part of the packed output (the LSE part
        // has none of its own), copied where its layout does not suit.
        let mut dout = grad.narrow(0, 0, n_q)?.reshape((x.b, x.sq, x.hq, x.d))?;
        let esize = dout.dtype().size_in_bytes();
        if bshd(op, "dO", dout.layout()).and_then(|m| tc_view(op, "dO", &m, esize)).is_err() {
            dout = dout.force_contiguous()?;
        }
        let bwd = FlashAttentionBackward { fwd: *self, packed: res.clone(), dout };
        let packed = q.apply_op3_no_bwd(k, v, &bwd)?;
        let dq = packed.narrow(0, 0, n_q)?.reshape(q.shape())?;
        let dk = packed.narrow(0, n_q, n_k)?.reshape(k.shape())?;
        let dv = packed.narrow(0, n_q + n_k, n_k)?.reshape(v.shape())?;
        Ok((keep(q, dq), keep(k, dk), keep(v, dv)))
    }
}

/// `(q, k, v) -> [dQ | dK | dV]` in the input dtype, from the packed forward
/// output (O, LSE) and dO it holds.
struct FlashAttentionBackward {
    fwd: FlashAttention,
    packed: Tensor,
    dout: Tensor,
}

impl CustomOp3 for FlashAttentionBackward {
    fn name(&self) -> &'static str {
        "kaio-flash-attention-backward"
    }
    no_cpu_fwd!(3, "flash_attention_backward");
    fn cuda_fwd(
        &self,
        q: &CudaStorage,
        ql: &Layout,
        k: &CudaStorage,
        kl: &Layout,
        v: &CudaStorage,
        vl: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let op = "flash_attention_backward";
        let scale = self.fwd.softmax_scale;
        check_scale(op, scale)?;
        let x = gqa_dims(op, (q.dtype(), ql.dims()), (k.dtype(), kl.dims()), (v.dtype(), vl.dims()))?;
        head_dim(op, x.d, BWD_DIMS, "attention backward")?;
        kv_on_q_device(op, q, k, v)?;
        let dtype = q.dtype();
        let esize = dtype.size_in_bytes();
        let (n_q, n_k) = (x.n_q(), x.n_k());
        let like_q = |what: &str, dt: DType| same_dtype(op, what, dt, dtype);
        let (ps, pl) = self.packed.storage_and_layout();
        let ps = held_cuda(op, "forward output", &ps, q, like_q)?;
        let (gs, gl) = self.dout.storage_and_layout();
        let gs = held_cuda(op, "output gradient", &gs, q, like_q)?;
        let packed_len = n_q + 2 * x.n_lse();
        if pl.dims() != [packed_len] || !pl.is_contiguous() || !(pl.start_offset() * esize).is_multiple_of(16) {
            bail!(
                "kaio-candle::{op}: the forward output is {:?} (start_offset {}); expected the packed contiguous \
                 [{packed_len}] (O, then the LSE) at a 16-byte aligned start",
                pl.dims(),
                pl.start_offset()
            )
        }
        if gl.dims() != [x.b, x.sq, x.hq, x.d] {
            bail!("kaio-candle::{op}: the output gradient is {:?}; expected {:?}", gl.dims(), [x.b, x.sq, x.hq, x.d])
        }
        let shape = Shape::from(n_q + 2 * n_k);
        let dev = &q.device;
        if x.empty() {
            return Ok((dev.zeros_impl(&shape, dtype)?, shape));
        }
        let [qm, km, vm] = qkv_mats(op, [ql, kl, vl], bshd, Some(esize))?;
        let gm = bshd(op, "output gradient", gl)?;
        tc_view(op, "output gradient", &gm, esize)?;
        let po = pl.start_offset();
        let om = Matrix { rows: x.b * x.sq, cols: x.hq * x.d, row_stride: x.hq * x.d, offset: po };
        let ctx = context(dev)?;
        let kd = kaio_dtype(op, dtype)?;
        let desc = attention_desc(kd, self.fwd.causal, scale, &x);
        let prepared =
            ctx.op((op, desc_key(kd, self.fwd.causal, scale, &x)), |d| kaio::Op::attention_backward(d, &desc))?;
        let mut out = alloc(dev, dtype, shape.elem_count())?;
        let stream = dev.cuda_stream();
        let [rq, rk, rv] = read_qkv(&ctx, op, [q, k, v], &stream)?;
        let (rp, rg) = (read(&ctx, op, ps, &stream)?, read(&ctx, op, gs, &stream)?);
        let ro = write(&ctx, op, &mut out, &stream)?;
        let lse = lse_view(&rp.buf, &x, (po + n_q) * esize);
        // dQ, dK, dV start n_q and n_k elements apart: multiples of 64 bytes.
        let (qrows, krows) = (x.b * x.sq, x.b * x.sk);
        let (qcols, kcols) = (x.hq * x.d, x.hkv * x.d);
        let dqm = Matrix { rows: qrows, cols: qcols, row_stride: qcols, offset: 0 };
        let dkm = Matrix { rows: krows, cols: kcols, row_stride: kcols, offset: n_q };
        let dvm = Matrix { rows: krows, cols: kcols, row_stride: kcols, offset: n_q + n_k };
        let views = [
            rg.view(&gm),
            rq.view(&qm),
            rk.view(&km),
            rv.view(&vm),
            rp.view(&om),
            lse,
            ro.view(&dqm),
            ro.view(&dkm),
            ro.view(&dvm),
        ];
        {
            prepared.launch(&ctx.stream, &views).kaio(op)?;
        }
        drop((rq, rk, rv, rp, rg, ro));
        Ok((out, shape))
    }
}

/// Batched GQA FlashAttention (FlashAttention-2 on tensor cores; on an H100
/// FlashAttention-3 style), forward and backward through candle's autograd:
///
/// `O = softmax(scale · Q Kᵀ + mask) · V` for q `[B, Sq, Hq, D]` and k, v
/// `[B, Sk, Hkv, D]` (BSHD, FlashAttention's layout and that of a
/// projection output viewed as `(B, S, H, D)`), f16 or bf16, returning O
/// `[B, Sq, Hq, D]` in the input dtype. Hq must be a multiple of Hkv (MHA,
/// GQA, MQA): query head h reads KV head `h / (Hq / Hkv)`. `softmax_scale`
/// None is `1/√D`; a given one must be finite and > 0.
///
/// `causal` is bottom-right aligned (FlashAttention >= 2.1): query i sees
/// key j iff `j <= i + Sk − Sq`, which is the usual lower triangle when
/// Sq == Sk and lets a decode step (Sq = 1) see the whole cache. A query
/// row that sees no key (Sq > Sk: rows `i < Sq − Sk`) gets O = 0 and no
/// gradient.
///
/// Limits (libkaio's): D in {32, 64, 96, 128, 256} forward and {32, 64, 96,
/// 128} backward (a D = 256 forward works, its backward fails with an
/// error); B·Hq <= 65535; B·Hq·Sq < 2³¹. Each input needs its H·D values of
/// a position side by side with the head dim contiguous, and positions a
/// multiple of 8 elements apart (a fused QKV projection's narrowed views
/// qualify; a `[B, H, S, D]` tensor transposed is refused: call
/// `.contiguous()`); a start that is not 16-byte aligned is copied first.
/// B or Sq of 0 gives an empty result; Sk = 0 gives zeros. Precision: f32
/// accumulation and softmax, P rounded to the input dtype before P·V; O
/// within about 2e-3 (f16) / 1e-2 (bf16) relative of an exact reference for
/// unit-scale inputs, gradients about 1e-2 / 5e-2. The backward is
/// deterministic.
///
/// When any input tracks gradients the forward also keeps the LSE (`B·Hq·Sq`
/// f32) in the storage the returned O views, for the backward.
pub fn flash_attention(q: &Tensor, k: &Tensor, v: &Tensor, causal: bool, softmax_scale: Option<f32>) -> Result<Tensor> {
    check_scale("flash_attention", softmax_scale)?;
    let (q, k, v) = (aligned16(q)?, aligned16(k)?, aligned16(v)?);
    with_lse_if_training(&q, &k, &v, |with_lse| FlashAttention { causal, softmax_scale, with_lse })
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    fn zeros(dims: &[usize]) -> Result<Tensor> {
        Tensor::zeros(dims, DType::F16, &Device::Cpu)
    }

    #[test]
    fn bshd_folds_batch_and_seq_into_rows() -> Result<()> {
        let t = zeros(&[2, 5, 4, 64])?;
        assert_eq!(bshd("op", "q", t.layout())?, Matrix { rows: 10, cols: 256, row_stride: 256, offset: 0 });
        // One position (decode): a [B, H, 1, D] tensor transposed is fine.
        let t = zeros(&[3, 4, 1, 64])?.transpose(1, 2)?;
        assert_eq!(bshd("op", "q", t.layout())?, Matrix { rows: 3, cols: 256, row_stride: 256, offset: 0 });
        // Q, K, V as views of one fused projection output.
        let qkv = zeros(&[2, 7, 8 + 2 + 2, 64])?;
        let k = qkv.narrow(2, 8, 2)?;
        assert_eq!(bshd("op", "k", k.layout())?, Matrix { rows: 14, cols: 128, row_stride: 768, offset: 512 });
        Ok(())
    }

    #[test]
    fn bshd_refuses_layouts_it_cannot_view_with_the_fix() -> Result<()> {
        // [B, H, S, D] transposed to [B, S, H, D].
        let t = zeros(&[2, 4, 5, 64])?.transpose(1, 2)?;
        let e = bshd("flash_attention", "q", t.layout()).unwrap_err().to_string();
        assert!(
            e.contains("kaio-candle::flash_attention")
                && e.contains("'q'")
                && e.contains("BSHD")
                && e.contains(".contiguous()"),
            "{e}"
        );
        let t = zeros(&[2, 5, 64, 4])?.transpose(2, 3)?;
        let e = bshd("flash_attention", "k", t.layout()).unwrap_err().to_string();
        assert!(e.contains("last dimension") && e.contains(".contiguous()"), "{e}");
        let t = zeros(&[5, 2, 4, 64])?.transpose(0, 1)?;
        let e = bshd("flash_attention", "v", t.layout()).unwrap_err().to_string();
        assert!(e.contains("evenly spaced rows"), "{e}");
        let t = zeros(&[1, 1, 4, 64])?.broadcast_as((1, 6, 4, 64))?;
        let e = bshd("flash_attention", "v", t.layout()).unwrap_err().to_string();
        assert!(e.contains("overlap"), "{e}");
        let e = bshd("flash_attention", "q", zeros(&[5, 4, 64])?.layout()).unwrap_err().to_string();
        assert!(e.contains("rank 4"), "{e}");
        Ok(())
    }

    #[test]
    fn tensor_core_views_need_aligned_starts_and_strides() {
        let m = Matrix { rows: 4, cols: 64, row_stride: 64, offset: 3 };
        let e = tc_view("attention_tc", "k", &m, 2).unwrap_err().to_string();
        assert!(e.contains("16-byte") && e.contains("'k'"), "{e}");
        assert!(tc_view("attention_tc", "k", &Matrix { offset: 8, ..m }, 2).is_ok());
        let e = tc_view("attention_tc", "k", &Matrix { offset: 0, row_stride: 68, ..m }, 2).unwrap_err().to_string();
        assert!(e.contains("multiple of 8"), "{e}");
    }

    #[test]
    fn aligned16_copies_to_a_fresh_aligned_start() -> Result<()> {
        let t = Tensor::arange(0f32, 40., &Device::Cpu)?.to_dtype(DType::F16)?;
        let n = t.narrow(0, 3, 32)?;
        let a = aligned16(&n)?;
        assert_eq!(a.layout().start_offset(), 0);
        assert_eq!(a.to_vec1::<half::f16>()?, n.to_vec1::<half::f16>()?);
        // 8 f16 elements are 16 bytes: kept as is.
        assert_eq!(aligned16(&t.narrow(0, 8, 32)?)?.layout().start_offset(), 8);
        Ok(())
    }

    #[test]
    fn gqa_shapes_are_checked_with_clear_errors() {
        let f16 = DType::F16;
        let ok = gqa_dims("fa", (f16, &[2, 3, 8, 64]), (f16, &[2, 5, 2, 64]), (f16, &[2, 5, 2, 64])).unwrap();
        assert_eq!(ok, Dims { b: 2, sq: 3, sk: 5, hq: 8, hkv: 2, d: 64 });
        let e = gqa_dims("fa", (f16, &[2, 3, 6, 64]), (f16, &[2, 5, 4, 64]), (f16, &[2, 5, 4, 64]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("kaio-candle::fa") && e.contains("multiple") && e.contains("6 heads"), "{e}");
        let e = gqa_dims("fa", (f16, &[2, 3, 8, 48]), (f16, &[2, 5, 2, 48]), (f16, &[2, 5, 2, 48]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("head_dim is 48") && e.contains("Pad"), "{e}");
        let e = gqa_dims("fa", (DType::F32, &[2, 3, 8, 64]), (f16, &[2, 5, 2, 64]), (f16, &[2, 5, 2, 64]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("'q' is F32") && e.contains("BF16"), "{e}");
        let e = gqa_dims("fa", (f16, &[2, 3, 8, 64]), (DType::BF16, &[2, 5, 2, 64]), (f16, &[2, 5, 2, 64]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("'k' is BF16"), "{e}");
        let e = gqa_dims("fa", (f16, &[2, 3, 8, 64]), (f16, &[1, 5, 2, 64]), (f16, &[1, 5, 2, 64]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("batch"), "{e}");
        let e = gqa_dims("fa", (f16, &[2, 3, 8, 64]), (f16, &[2, 5, 2, 64]), (f16, &[2, 4, 2, 64]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("'v'") && e.contains("must match"), "{e}");
        let e = gqa_dims("fa", (f16, &[2, 3, 0, 64]), (f16, &[2, 5, 0, 64]), (f16, &[2, 5, 0, 64]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("non-zero multiple"), "{e}");
        let e = gqa_dims("fa", (f16, &[70000, 1, 1, 64]), (f16, &[70000, 1, 1, 64]), (f16, &[70000, 1, 1, 64]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("Split the batch"), "{e}");
    }

    #[test]
    fn cpu_tensors_are_refused() -> Result<()> {
        let q = zeros(&[1, 4, 2, 64])?;
        let e = flash_attention(&q, &q, &q, true, None).unwrap_err().to_string();
        assert!(e.contains("kaio-candle::flash_attention") && e.contains("CUDA tensors only"), "{e}");
        let e = flash_attention(&q, &q, &q, false, Some(-1.0)).unwrap_err().to_string();
        assert!(e.contains("softmax_scale") && e.contains("> 0"), "{e}");
        let q = zeros(&[4, 64])?;
        let e = attention_tc_causal(&q, &q, &q).unwrap_err().to_string();
        assert!(e.contains("kaio-candle::attention_tc_causal") && e.contains("CUDA tensors only"), "{e}");
        let q = q.to_dtype(DType::F32)?;
        let e = attention_flash(&q, &q, &q).unwrap_err().to_string();
        assert!(e.contains("kaio-candle::attention_flash") && e.contains("CUDA tensors only"), "{e}");
        Ok(())
    }
}
