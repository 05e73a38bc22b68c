//! libkaio's quantized matmuls on candle tensors: INT8 W8A8 (`matmul_int8`,
//! `matmul_int8_scaled`), INT4 W4A16 in KAIO's signed-nibble format
//! (`matmul_int4`) and the fused QKV projections (`qkv_project_int8`,
//! `qkv_project_int4`). Forward only: an input that tracks gradients is
//! refused (pass `.detach()`), since these ops have no backward and candle
//! would otherwise drop the gradient without a word.
//!
//! candle has no i8 dtype: int8 tensors are U8 tensors whose bytes are i8
//! values (reinterpreted, not converted; `Tensor::from_vec(bytes_of_i8, ..)`).
//! INT4 weights are KAIO's signed nibbles (`kaio::Int4Format::Signed`):
//! qweight is U32 (or I32) `[K/8, N]`, and weight (k, n) is the 4-bit two's
//! complement field `k % 8` (bits `4·(k%8) .. +3`) of word `(k/8, n)`, a value
//! in -8..=7; with `scales` `[K/g, N]` it stands for `q · scales[k/g, n]`,
//! rounded once to the activations' dtype. No zero points.
//!
//! The QKV projections take seven tensors, and candle's custom ops at most
//! three: they run as a `CustomOp1` on `x` that holds the six weight tensors
//! and reads their storage itself. They write one packed output, Q then K
//! then V, each section starting on a 16-byte boundary, and return the three
//! sections as contiguous views of it (each with its own `start_offset`).

use candle_core::backend::BackendStorage;
use candle_core::{
    bail, CudaStorage, CustomOp1, CustomOp3, DType, Layout, Result, Shape, Storage, StorageRef, Tensor,
};

use crate::context::context;
use crate::error::KaioResultExt;
use crate::layout::{self, Matrix};
use crate::prep::{aligned, forward_only, no_cpu_fwd};
use crate::storage::{alloc, kaio_dtype, read, same_device, write};

/// A tensor and its layout, as a custom op sees an input.
type Input<'a> = (&'a CudaStorage, &'a Layout);

/// A tensor an op holds besides its candle input, read under its storage
/// lock for the duration of the call.
struct Held<'a> {
    name: &'static str,
    st: StorageRef<'a>,
    l: &'a Layout,
}

impl<'a> Held<'a> {
    fn of(t: &'a Tensor, name: &'static str) -> Held<'a> {
        let (st, l) = t.storage_and_layout();
        Held { name, st, l }
    }

    /// The CUDA storage, on the device of `first`, with the layout.
    fn input(&self, op: &str, first: &CudaStorage) -> Result<Input<'_>> {
        match &*self.st {
            Storage::Cuda(s) => {
                same_device(op, first, s, self.name)?;
                Ok((s, self.l))
            }
            _ => bail!(
                "kaio-candle::{op}: argument '{}' is not a CUDA tensor; move it to the CUDA device of the \
                 first argument",
                self.name
            ),
        }
    }
}

/// A vector of `len` f32 values (any shape with that many elements,
/// contiguous), as a 1 x `len` matrix.
fn f32_vector(op: &str, arg: &str, (s, l): Input<'_>, len: usize, what: &str) -> Result<Matrix> {
    layout::dtype(op, arg, s.dtype(), &[DType::F32])?;
    if l.shape().elem_count() != len {
        bail!("kaio-candle::{op}: argument '{arg}' has shape {:?}; expected {len} values ({what})", l.dims())
    }
    let m = layout::contiguous(op, arg, l)?;
    Ok(Matrix { rows: 1, cols: len, row_stride: len, offset: m.offset })
}

/// `dims` with the last dimension replaced by `n`.
fn with_last(dims: &[usize], n: usize) -> Shape {
    let mut d = dims.to_vec();
    match d.last_mut() {
        Some(last) => *last = n,
        None => d.push(n),
    }
    Shape::from(d)
}

fn rank_at_least_1(op: &str, arg: &str, l: &Layout, what: &str) -> Result<()> {
    if l.dims().is_empty() {
        bail!("kaio-candle::{op}: argument '{arg}' is a scalar; expected {what}")
    }
    Ok(())
}

// ---------------------------------------------------------------- INT8 W8A8

/// `C (f32) = ((A·Bᵀ) · sa[m]) · sb[n]`, A i8 `[.., M, K]`, B i8 `[N, K]`;
/// `sb_name` is what the caller calls sb.
fn int8_fwd(
    (a, al): Input<'_>,
    (b, bl): Input<'_>,
    sa: Option<Input<'_>>,
    sb: Option<Input<'_>>,
    sb_name: &str,
) -> Result<(CudaStorage, Shape)> {
    let op = "matmul_int8";
    layout::dtype(op, "a", a.dtype(), &[DType::U8])?;
    layout::dtype(op, "b", b.dtype(), &[DType::U8])?;
    same_device(op, a, b, "b")?;
    rank_at_least_1(op, "a", al, "[.., M, K] (u8 bytes holding i8)")?;
    layout::rank(op, "b", bl.dims(), 2, "N, K: nn.Linear's layout, u8 bytes holding i8")?;
    let am = layout::matrix(op, "a", al)?;
    let bm = layout::matrix(op, "b", bl)?;
    if am.cols != bm.cols {
        bail!(
            "kaio-candle::{op}: 'a' is {:?} and 'b' is {:?}: K differs ({} vs {}); 'b' is [N, K] \
             (nn.Linear's layout), not [K, N]",
            al.dims(),
            bl.dims(),
            am.cols,
            bm.cols
        )
    }
    let (m, k, n) = (am.rows, am.cols, bm.rows);
    let sam = match sa {
        Some(s) => {
            same_device(op, a, s.0, "sa")?;
            Some(f32_vector(op, "sa", s, m, "one f32 scale per row of 'a'")?)
        }
        None => None,
    };
    let sbm = match sb {
        Some(s) => {
            same_device(op, a, s.0, sb_name)?;
            Some(f32_vector(op, sb_name, s, n, "one f32 scale per row of 'b', i.e. per output column")?)
        }
        None => None,
    };
    let shape = with_last(al.dims(), n);
    let dev = &a.device;
    let mut out = alloc(dev, DType::F32, m * n)?;
    if m == 0 || n == 0 {
        return Ok((out, shape));
    }
    let ctx = context(dev)?;
    let desc = kaio::MatmulInt8Desc { out_dtype: kaio::Dtype::F32, m, n, k, ..Default::default() };
    let prepared = ctx.op((op, vec![m as i64, n as i64, k as i64]), |d| kaio::Op::matmul_int8(d, &desc))?;
    let stream = dev.cuda_stream();
    let ra = read(&ctx, op, a, &stream)?;
    let rb = read(&ctx, op, b, &stream)?;
    let rsa = match sa {
        Some((s, _)) => Some(read(&ctx, op, s, &stream)?),
        None => None,
    };
    let rsb = match sb {
        Some((s, _)) => Some(read(&ctx, op, s, &stream)?),
        None => None,
    };
    let rc = write(&ctx, op, &mut out, &stream)?;
    let cm = Matrix { rows: m, cols: n, row_stride: n, offset: 0 };
    let none = kaio::TensorView::none();
    let views = [
        ra.view_as(&am, kaio::Dtype::I8),
        rb.view_as(&bm, kaio::Dtype::I8),
        match (&rsa, &sam) {
            (Some(r), Some(mm)) => r.view(mm),
            _ => none,
        },
        match (&rsb, &sbm) {
            (Some(r), Some(mm)) => r.view(mm),
            _ => none,
        },
        rc.view(&cm),
    ];
    prepared.launch(&ctx.stream, &views).kaio(op)?;
    drop((ra, rb, rsa, rsb, rc));
    Ok((out, shape))
}

/// INT8 W8A8 `(a, b, scale) -> f32 a·bᵀ·scale[n]`, a `[.., M, K]`, b `[N, K]`
/// (U8 holding i8), scale f32 `[N]`. [`matmul_int8`] also takes a scalar
/// scale.
#[derive(Copy, Clone, Debug)]
pub struct MatmulInt8;

impl CustomOp3 for MatmulInt8 {
    fn name(&self) -> &'static str {
        "kaio-matmul-int8"
    }
    no_cpu_fwd!(3, "matmul_int8");
    fn cuda_fwd(
        &self,
        a: &CudaStorage,
        al: &Layout,
        b: &CudaStorage,
        bl: &Layout,
        s: &CudaStorage,
        sl: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        int8_fwd((a, al), (b, bl), None, Some((s, sl)), "scale")
    }
}

/// INT8 W8A8 with libkaio's two optional scale vectors, `sa` f32 `[M]` (one
/// per row of `a`, e.g. per token) and `sb` f32 `[N]` (one per output
/// column); a `CustomOp1` on `a` holding the rest.
#[derive(Clone, Debug)]
pub struct MatmulInt8Scaled {
    pub b: Tensor,
    pub sa: Option<Tensor>,
    pub sb: Option<Tensor>,
}

impl CustomOp1 for MatmulInt8Scaled {
    fn name(&self) -> &'static str {
        "kaio-matmul-int8-scaled"
    }
    no_cpu_fwd!(1, "matmul_int8");
    fn cuda_fwd(&self, a: &CudaStorage, al: &Layout) -> Result<(CudaStorage, Shape)> {
        let op = "matmul_int8";
        let b = Held::of(&self.b, "b");
        let sa = self.sa.as_ref().map(|t| Held::of(t, "sa"));
        let sb = self.sb.as_ref().map(|t| Held::of(t, "sb"));
        let sa_in = match &sa {
            Some(h) => Some(h.input(op, a)?),
            None => None,
        };
        let sb_in = match &sb {
            Some(h) => Some(h.input(op, a)?),
            None => None,
        };
        int8_fwd((a, al), b.input(op, a)?, sa_in, sb_in, "sb")
    }
}

/// f32 `a · bᵀ · scale` on libkaio's INT8 tensor cores (exact int32 sums,
/// each scale product rounded in f32). `a` is U8 `[.., M, K]` and `b` U8
/// `[N, K]` (nn.Linear's layout; a `[K, N]` b is refused), both holding i8
/// bytes; `scale` is f32 with one value (per tensor) or `N` values (per
/// output column). K must be a multiple of 16 (libkaio says so otherwise).
/// Result: f32 `[.., M, N]`.
pub fn matmul_int8(a: &Tensor, b: &Tensor, scale: &Tensor) -> Result<Tensor> {
    let op = "matmul_int8";
    forward_only(op, "a", a)?;
    forward_only(op, "b", b)?;
    forward_only(op, "scale", scale)?;
    layout::rank(op, "b", b.dims(), 2, "N, K: nn.Linear's layout, u8 bytes holding i8")?;
    let n = b.dims()[0];
    let scale = if scale.elem_count() == n {
        scale.flatten_all()?
    } else if scale.elem_count() == 1 {
        scale.flatten_all()?.broadcast_as(n)?.contiguous()?
    } else {
        bail!(
            "kaio-candle::{op}: argument 'scale' has shape {:?}; expected 1 value (per tensor) or N = {n} \
             values (per output column)",
            scale.dims()
        )
    };
    let a = aligned(op, "a", a, 16, false)?;
    let b = aligned(op, "b", b, 16, false)?;
    a.apply_op3_no_bwd(&b, &scale, &MatmulInt8)
}

/// As [`matmul_int8`] with libkaio's full scaling, `C = ((a·bᵀ) · sa[m]) ·
/// sb[n]`: `sa` f32 with M values (one per row of `a`, leading dimensions
/// folded), `sb` f32 with N values; either may be absent (1).
pub fn matmul_int8_scaled(a: &Tensor, b: &Tensor, sa: Option<&Tensor>, sb: Option<&Tensor>) -> Result<Tensor> {
    let op = "matmul_int8";
    for (arg, t) in [("a", Some(a)), ("b", Some(b)), ("sa", sa), ("sb", sb)] {
        if let Some(t) = t {
            forward_only(op, arg, t)?;
        }
    }
    let a = aligned(op, "a", a, 16, false)?;
    let b = aligned(op, "b", b, 16, false)?;
    a.apply_op1_no_bwd(&MatmulInt8Scaled { b, sa: sa.cloned(), sb: sb.cloned() })
}

// ---------------------------------------------------------------- INT4 W4A16

/// The dtype, K, N and group of an INT4 weight: qweight `[K/8, N]` U32/I32,
/// scales `[K/g, N]` in `in_dtype`.
fn int4_weight(
    op: &str,
    names: (&str, &str),
    k: usize,
    (qs, ql): Input<'_>,
    (ss, sl): Input<'_>,
    in_dtype: DType,
) -> Result<(Matrix, Matrix, usize)> {
    let (qn, sn) = names;
    layout::dtype(op, qn, qs.dtype(), &[DType::U32, DType::I32])?;
    layout::rank(op, qn, ql.dims(), 2, "K/8, N: 8 signed nibbles per word along K")?;
    layout::rank(op, sn, sl.dims(), 2, "K/g, N: one scale per group of g rows of K")?;
    if ss.dtype() != in_dtype {
        bail!("kaio-candle::{op}: argument '{sn}' is {:?}; it must be {in_dtype:?}, the activations' dtype", ss.dtype())
    }
    let qm = layout::matrix(op, qn, ql)?;
    let sm = layout::matrix(op, sn, sl)?;
    if !k.is_multiple_of(8) || qm.rows != k / 8 {
        bail!(
            "kaio-candle::{op}: argument '{qn}' is {:?}, but K = {k} needs [K/8, N] = [{}, N] (8 signed \
             nibbles per u32 along K; K a multiple of 32)",
            ql.dims(),
            k as f64 / 8.0
        )
    }
    if sm.cols != qm.cols {
        bail!("kaio-candle::{op}: '{qn}' is {:?} and '{sn}' is {:?}: N differs", ql.dims(), sl.dims())
    }
    if sm.rows == 0 || !k.is_multiple_of(sm.rows) {
        bail!(
            "kaio-candle::{op}: argument '{sn}' has {} rows, which does not divide K = {k}; it must be \
             [K/g, N] for a group size g (a power of two >= 32 dividing K, or K)",
            sm.rows
        )
    }
    Ok((qm, sm, k / sm.rows))
}

/// INT4 W4A16 `(a, qweight, scales) -> f32 a · W`, W from KAIO's signed
/// nibbles (see the module docs).
#[derive(Copy, Clone, Debug)]
pub struct MatmulInt4;

impl CustomOp3 for MatmulInt4 {
    fn name(&self) -> &'static str {
        "kaio-matmul-int4"
    }
    no_cpu_fwd!(3, "matmul_int4");
    fn cuda_fwd(
        &self,
        a: &CudaStorage,
        al: &Layout,
        qw: &CudaStorage,
        ql: &Layout,
        sc: &CudaStorage,
        sl: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let op = "matmul_int4";
        layout::dtype(op, "a", a.dtype(), &[DType::F16, DType::BF16])?;
        same_device(op, a, qw, "qweight")?;
        same_device(op, a, sc, "scales")?;
        rank_at_least_1(op, "a", al, "[.., M, K]")?;
        let am = layout::matrix(op, "a", al)?;
        let (m, k) = (am.rows, am.cols);
        let (qm, sm, g) = int4_weight(op, ("qweight", "scales"), k, (qw, ql), (sc, sl), a.dtype())?;
        let n = qm.cols;
        let shape = with_last(al.dims(), n);
        let dev = &a.device;
        let mut out = alloc(dev, DType::F32, m * n)?;
        if m == 0 || n == 0 {
            return Ok((out, shape));
        }
        let ctx = context(dev)?;
        let kd = kaio_dtype(op, a.dtype())?;
        let desc = kaio::MatmulInt4Desc {
            in_dtype: kd,
            out_dtype: kaio::Dtype::F32,
            format: kaio::Int4Format::Signed,
            m,
            n,
            k,
            group_size: g,
            zeros_offset: 0,
        };
        let key = vec![kd.raw() as i64, m as i64, n as i64, k as i64, g as i64];
        let prepared = ctx.op((op, key), |d| kaio::Op::matmul_int4(d, &desc))?;
        let stream = dev.cuda_stream();
        let (ra, rq, rs) = (read(&ctx, op, a, &stream)?, read(&ctx, op, qw, &stream)?, read(&ctx, op, sc, &stream)?);
        let rc = write(&ctx, op, &mut out, &stream)?;
        let cm = Matrix { rows: m, cols: n, row_stride: n, offset: 0 };
        let views = [ra.view(&am), rq.view(&qm), kaio::TensorView::none(), rs.view(&sm), rc.view(&cm)];
        prepared.launch(&ctx.stream, &views).kaio(op)?;
        drop((ra, rq, rs, rc));
        Ok((out, shape))
    }
}

/// f32 `a · W` for f16 or bf16 `a` `[.., M, K]` and a KAIO signed-nibble INT4
/// weight: `qweight` U32 (or I32) `[K/8, N]`, `scales` `[K/g, N]` in a's
/// dtype, the group size g = K / scales' rows (a power of two >= 32 dividing
/// K, or K). K a multiple of 32, N a multiple of 8 (libkaio's contract; it
/// says so otherwise). Result: f32 `[.., M, N]`.
pub fn matmul_int4(a: &Tensor, qweight: &Tensor, scales: &Tensor) -> Result<Tensor> {
    let op = "matmul_int4";
    forward_only(op, "a", a)?;
    forward_only(op, "qweight", qweight)?;
    forward_only(op, "scales", scales)?;
    let a = aligned(op, "a", a, 16, false)?;
    let qweight = aligned(op, "qweight", qweight, 16, false)?;
    let scales = aligned(op, "scales", scales, 8, false)?;
    a.apply_op3_no_bwd(&qweight, &scales, &MatmulInt4)
}

// ---------------------------------------------------------------- fused QKV

/// Rounds `n` elements up to 8, so that each section of the packed output
/// starts 16 bytes (8 f16) after the previous one's start.
fn pad8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

/// Element offsets of Q, K and V in the packed output of `m` rows, and its
/// length.
fn packed_offsets(m: usize, ns: [usize; 3]) -> ([usize; 3], usize) {
    let q = 0;
    let k = q + pad8(m * ns[0]);
    let v = k + pad8(m * ns[1]);
    ([q, k, v], v + m * ns[2])
}

/// The three sections of a packed output as `lead + [N_p]` tensors.
fn split(packed: &Tensor, lead: &[usize], ns: [usize; 3]) -> Result<(Tensor, Tensor, Tensor)> {
    let m: usize = lead.iter().product();
    let (offs, _) = packed_offsets(m, ns);
    let part = |i: usize| -> Result<Tensor> {
        let mut dims = lead.to_vec();
        dims.push(ns[i]);
        packed.narrow(0, offs[i], m * ns[i])?.reshape(dims)
    };
    Ok((part(0)?, part(1)?, part(2)?))
}

/// The output views of the packed output.
fn packed_views(m: usize, ns: [usize; 3]) -> [Matrix; 3] {
    let (offs, _) = packed_offsets(m, ns);
    [0, 1, 2].map(|i| Matrix { rows: m, cols: ns[i], row_stride: ns[i], offset: offs[i] })
}

const PROJ: [&str; 3] = ["q", "k", "v"];
const WEIGHTS: [&str; 3] = ["wq", "wk", "wv"];
const SCALES: [&str; 3] = ["sq", "sk", "sv"];

/// `t[p]` for q, k, v, each as [`aligned`] to `align` bytes.
fn aligned3(op: &str, names: [&str; 3], t: [&Tensor; 3], align: usize) -> Result<[Tensor; 3]> {
    Ok([
        aligned(op, names[0], t[0], align, false)?,
        aligned(op, names[1], t[1], align, false)?,
        aligned(op, names[2], t[2], align, false)?,
    ])
}

/// What [`qkv_project_int8`] and [`qkv_project_int4`] share: refuses inputs
/// that track gradients, reads N_p from the rank-2 weights (`w_layout`
/// says how they are laid out), aligns x, runs the op that `make` builds
/// from the weights and scales on x, and splits its packed output.
fn qkv_project<C: CustomOp1>(
    op: &str,
    x: &Tensor,
    w: [&Tensor; 3],
    s: [&Tensor; 3],
    w_layout: &str,
    make: impl FnOnce([&Tensor; 3], [&Tensor; 3]) -> Result<C>,
) -> Result<(Tensor, Tensor, Tensor)> {
    let args = [("x", x), ("wq", w[0]), ("wk", w[1]), ("wv", w[2]), ("sq", s[0]), ("sk", s[1]), ("sv", s[2])];
    for (arg, t) in args {
        forward_only(op, arg, t)?;
    }
    let mut ns = [0usize; 3];
    for p in 0..3 {
        layout::rank(op, WEIGHTS[p], w[p].dims(), 2, w_layout)?;
        ns[p] = w[p].dims()[1];
    }
    rank_at_least_1(op, "x", x.layout(), "[.., M, K]")?;
    let lead = &x.dims()[..x.rank() - 1];
    let x = aligned(op, "x", x, 16, false)?;
    let packed = x.apply_op1_no_bwd(&make(w, s)?)?;
    split(&packed, lead, ns)
}

/// A QKV op's held weights and scales, read under their storage locks.
fn held_qkv<'a>(w: [&'a Tensor; 3], s: [&'a Tensor; 3]) -> ([Held<'a>; 3], [Held<'a>; 3]) {
    ([0, 1, 2].map(|p| Held::of(w[p], WEIGHTS[p])), [0, 1, 2].map(|p| Held::of(s[p], SCALES[p])))
}

/// x of a QKV op, checked, as an `[M, K]` matrix.
fn qkv_x(op: &str, x: &CudaStorage, xl: &Layout, dtypes: &[DType]) -> Result<Matrix> {
    layout::dtype(op, "x", x.dtype(), dtypes)?;
    rank_at_least_1(op, "x", xl, "[.., M, K]")?;
    layout::matrix(op, "x", xl)
}

/// The checked inputs of a QKV op: x, and the weights and scales for q, k, v.
struct QkvInputs<'a> {
    x: (&'a CudaStorage, Matrix),
    w: Vec<(&'a CudaStorage, Matrix)>,
    s: Vec<(&'a CudaStorage, Matrix)>,
}

/// A view of one tensor for a launch.
type View<'v> = kaio::TensorView<'v>;

/// The launch both QKV ops share: allocates the packed f16 output and,
/// unless x has no rows, prepares the op (`key`, `make`) and launches it on
/// the inputs (the weights viewed as `w_dtype` where given), their views put
/// in the op's order by `order(x, weights, scales, outputs)`.
fn qkv_launch(
    op: &'static str,
    inputs: &QkvInputs<'_>,
    w_dtype: Option<kaio::Dtype>,
    key: Vec<i64>,
    make: impl FnOnce(&kaio::Device) -> kaio::Result<kaio::Op>,
    order: impl for<'v> FnOnce(View<'v>, [View<'v>; 3], [View<'v>; 3], [View<'v>; 3]) -> Vec<View<'v>>,
) -> Result<(CudaStorage, Shape)> {
    let (x, xm) = inputs.x;
    let m = xm.rows;
    let ns = [0, 1, 2].map(|p| inputs.w[p].1.cols);
    let (_, total) = packed_offsets(m, ns);
    let dev = &x.device;
    let mut out = alloc(dev, DType::F16, total)?;
    let shape = Shape::from(vec![total]);
    if m == 0 {
        return Ok((out, shape));
    }
    let ctx = context(dev)?;
    let prepared = ctx.op((op, key), make)?;
    let stream = dev.cuda_stream();
    let rx = read(&ctx, op, x, &stream)?;
    let rw = inputs.w.iter().map(|(s, _)| read(&ctx, op, s, &stream)).collect::<Result<Vec<_>>>()?;
    let rs = inputs.s.iter().map(|(s, _)| read(&ctx, op, s, &stream)).collect::<Result<Vec<_>>>()?;
    let ro = write(&ctx, op, &mut out, &stream)?;
    let om = packed_views(m, ns);
    let wv = [0, 1, 2].map(|p| match w_dtype {
        Some(d) => rw[p].view_as(&inputs.w[p].1, d),
        None => rw[p].view(&inputs.w[p].1),
    });
    let sv = [0, 1, 2].map(|p| rs[p].view(&inputs.s[p].1));
    let ov = [0, 1, 2].map(|p| ro.view(&om[p]));
    let views = order(rx.view(&xm), wv, sv, ov);
    prepared.launch(&ctx.stream, &views).kaio(op)?;
    drop(views);
    drop((rx, rw, rs, ro));
    Ok((out, shape))
}

/// The fused INT8-weight QKV projection (W8A16): a `CustomOp1` on x (f16
/// `[.., M, K]`) holding `w_p` (U8 holding i8, `[K, N_p]`, KAIO's layout)
/// and `s_p` (f32, 1 or N_p values). Writes the packed f16 output (1-D);
/// [`qkv_project_int8`] splits it.
#[derive(Clone, Debug)]
pub struct QkvInt8 {
    pub wq: Tensor,
    pub wk: Tensor,
    pub wv: Tensor,
    pub sq: Tensor,
    pub sk: Tensor,
    pub sv: Tensor,
}

impl CustomOp1 for QkvInt8 {
    fn name(&self) -> &'static str {
        "kaio-qkv-project-int8"
    }
    no_cpu_fwd!(1, "qkv_project_int8");
    fn cuda_fwd(&self, x: &CudaStorage, xl: &Layout) -> Result<(CudaStorage, Shape)> {
        let op = "qkv_project_int8";
        let xm = qkv_x(op, x, xl, &[DType::F16])?;
        let (m, k) = (xm.rows, xm.cols);
        let (w, s) = held_qkv([&self.wq, &self.wk, &self.wv], [&self.sq, &self.sk, &self.sv]);
        let mut inputs = QkvInputs { x: (x, xm), w: Vec::with_capacity(3), s: Vec::with_capacity(3) };
        for p in 0..3 {
            let (wn, sn) = (w[p].name, s[p].name);
            let (ws, wl) = w[p].input(op, x)?;
            layout::dtype(op, wn, ws.dtype(), &[DType::U8])?;
            layout::rank(op, wn, wl.dims(), 2, "K, N: KAIO's layout, u8 bytes holding i8")?;
            let mm = layout::matrix(op, wn, wl)?;
            if mm.rows != k {
                bail!(
                    "kaio-candle::{op}: 'x' is {:?} and '{wn}' is {:?}: K differs ({k} vs {}); '{wn}' is \
                     [K, N] (KAIO's layout), not nn.Linear's [N, K]",
                    xl.dims(),
                    wl.dims(),
                    mm.rows
                )
            }
            let sin = s[p].input(op, x)?;
            let count = sin.1.shape().elem_count();
            let len = if count == 1 { 1 } else { mm.cols };
            let what = format!("1 (per tensor) or N_{} = {} (per column)", PROJ[p], mm.cols);
            inputs.s.push((sin.0, f32_vector(op, sn, sin, len, &what)?));
            inputs.w.push((ws, mm));
        }
        let ns = [0, 1, 2].map(|p| inputs.w[p].1.cols);
        let desc = kaio::QkvInt8Desc { out_dtype: kaio::Dtype::F16, m, k, n_q: ns[0], n_k: ns[1], n_v: ns[2] };
        let key = vec![m as i64, k as i64, ns[0] as i64, ns[1] as i64, ns[2] as i64];
        qkv_launch(
            op,
            &inputs,
            Some(kaio::Dtype::I8),
            key,
            |d| kaio::Op::qkv_project_int8(d, &desc),
            |x, w, s, o| kaio::qkv_int8_tensors(x, w, s, o).to_vec(),
        )
    }
}

/// The fused QKV projection with int8 weights and f16 activations (W8A16),
/// one launch: `out_p = (x · w_p) · s_p` for p in q, k, v. `x` f16 `[.., M,
/// K]`; `w_p` U8 holding i8 `[K, N_p]` (KAIO's layout: K rows, unlike
/// [`matmul_int8`]'s b); `s_p` f32 with 1 value or N_p values. K a multiple
/// of 32, each N_p a multiple of 4 (libkaio says so otherwise); the N_p may
/// differ (grouped-query attention). Returns f16 `[.., M, N_q]`, `[.., M,
/// N_k]`, `[.., M, N_v]`: contiguous views of one packed output, each
/// starting on a 16-byte boundary. Meant for decode (libkaio reads the
/// weights once per 16 rows of x).
pub fn qkv_project_int8(
    x: &Tensor,
    wq: &Tensor,
    wk: &Tensor,
    wv: &Tensor,
    sq: &Tensor,
    sk: &Tensor,
    sv: &Tensor,
) -> Result<(Tensor, Tensor, Tensor)> {
    let op = "qkv_project_int8";
    let w_layout = "K, N: KAIO's layout, u8 bytes holding i8";
    qkv_project(op, x, [wq, wk, wv], [sq, sk, sv], w_layout, |w, s| {
        // The scales are read as f32 vectors, which check their own layout.
        let [wq, wk, wv] = aligned3(op, WEIGHTS, w, 4)?;
        let [sq, sk, sv] = s.map(Tensor::clone);
        Ok(QkvInt8 { wq, wk, wv, sq, sk, sv })
    })
}

/// The fused INT4 QKV projection: a `CustomOp1` on x (f16 or bf16 `[.., M,
/// K]`) holding KAIO signed-nibble weights `w_p` (U32 `[K/8, N_p]`) and
/// their scales `s_p` (`[K/g, N_p]` in x's dtype, one g for all three).
/// Writes the packed f16 output (1-D); [`qkv_project_int4`] splits it.
#[derive(Clone, Debug)]
pub struct QkvInt4 {
    pub wq: Tensor,
    pub wk: Tensor,
    pub wv: Tensor,
    pub sq: Tensor,
    pub sk: Tensor,
    pub sv: Tensor,
}

impl CustomOp1 for QkvInt4 {
    fn name(&self) -> &'static str {
        "kaio-qkv-project-int4"
    }
    no_cpu_fwd!(1, "qkv_project_int4");
    fn cuda_fwd(&self, x: &CudaStorage, xl: &Layout) -> Result<(CudaStorage, Shape)> {
        let op = "qkv_project_int4";
        let xm = qkv_x(op, x, xl, &[DType::F16, DType::BF16])?;
        let (m, k) = (xm.rows, xm.cols);
        let (w, s) = held_qkv([&self.wq, &self.wk, &self.wv], [&self.sq, &self.sk, &self.sv]);
        let mut inputs = QkvInputs { x: (x, xm), w: Vec::with_capacity(3), s: Vec::with_capacity(3) };
        let mut group = 0usize;
        for p in 0..3 {
            let (win, sin) = (w[p].input(op, x)?, s[p].input(op, x)?);
            let (qm, scm, g) = int4_weight(op, (w[p].name, s[p].name), k, win, sin, x.dtype())?;
            if p > 0 && g != group {
                bail!(
                    "kaio-candle::{op}: '{}' gives a group size of {g} but 'sq' one of {group}; the three \
                     projections share one group size",
                    s[p].name
                )
            }
            group = g;
            inputs.w.push((win.0, qm));
            inputs.s.push((sin.0, scm));
        }
        let ns = [0, 1, 2].map(|p| inputs.w[p].1.cols);
        let kd = kaio_dtype(op, x.dtype())?;
        let desc = kaio::QkvInt4Desc {
            in_dtype: kd,
            out_dtype: kaio::Dtype::F16,
            format: kaio::Int4Format::Signed,
            m,
            k,
            n_q: ns[0],
            n_k: ns[1],
            n_v: ns[2],
            group_size: group,
            zeros_offset: 0,
        };
        let key = vec![kd.raw() as i64, m as i64, k as i64, ns[0] as i64, ns[1] as i64, ns[2] as i64, group as i64];
        qkv_launch(op, &inputs, None, key, |d| kaio::Op::qkv_project_int4(d, &desc), |x, w, s, o| {
            let weights = [0, 1, 2].map(|p| kaio::Int4Weight { qweight: w[p], qzeros: None, scales: s[p] });
            kaio::qkv_int4_tensors(x, [&weights[0], &weights[1], &weights[2]], o).to_vec()
        })
    }
}

/// The fused INT4 QKV projection, one launch: `out_p = x · W_p` for p in q,
/// k, v. `x` f16 or bf16 `[.., M, K]`; `w_p` KAIO signed-nibble qweight U32
/// (or I32) `[K/8, N_p]`; `s_p` scales `[K/g, N_p]` in x's dtype, one group
/// size g = K / rows for all three. K a multiple of 32, each N_p a multiple
/// of 8 (libkaio's contract). Returns f16 `[.., M, N_p]` for each p:
/// contiguous views of one packed output, each starting on a 16-byte
/// boundary. Meant for decode (M <= 16).
pub fn qkv_project_int4(
    x: &Tensor,
    wq: &Tensor,
    wk: &Tensor,
    wv: &Tensor,
    sq: &Tensor,
    sk: &Tensor,
    sv: &Tensor,
) -> Result<(Tensor, Tensor, Tensor)> {
    let op = "qkv_project_int4";
    let w_layout = "K/8, N: 8 signed nibbles per word along K";
    qkv_project(op, x, [wq, wk, wv], [sq, sk, sv], w_layout, |w, s| {
        let [wq, wk, wv] = aligned3(op, WEIGHTS, w, 16)?;
        let [sq, sk, sv] = aligned3(op, SCALES, s, 8)?;
        Ok(QkvInt4 { wq, wk, wv, sq, sk, sv })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn packed_sections_start_on_16_bytes_and_do_not_overlap() {
        for m in [0usize, 1, 3, 17] {
            for ns in [[64usize, 32, 32], [4, 12, 20], [8, 8, 8]] {
                let (offs, total) = packed_offsets(m, ns);
                let views = packed_views(m, ns);
                for p in 0..3 {
                    assert_eq!(offs[p] % 8, 0, "{m} {ns:?}");
                    assert_eq!(views[p].span(), offs[p] + m * ns[p]);
                    if p < 2 {
                        assert!(views[p].span() <= offs[p + 1], "{m} {ns:?}");
                    }
                }
                assert_eq!(total, views[2].span());
            }
        }
    }

    #[test]
    fn split_gives_contiguous_sections_of_the_packed_output() -> Result<()> {
        let (m, ns) = (3usize, [4usize, 12, 8]);
        let (offs, total) = packed_offsets(m, ns);
        let packed = Tensor::arange(0u32, total as u32, &Device::Cpu)?;
        let (q, k, v) = split(&packed, &[m], ns)?;
        for (t, p) in [(&q, 0), (&k, 1), (&v, 2)] {
            assert_eq!(t.dims(), &[m, ns[p]]);
            assert!(t.is_contiguous());
            assert_eq!(t.layout().start_offset(), offs[p]);
            assert_eq!(t.flatten_all()?.to_vec1::<u32>()?[0], offs[p] as u32);
        }
        let (q, _, _) = split(&packed, &[], [4, 12, 8])?;
        assert_eq!(q.dims(), &[4]);
        Ok(())
    }

    #[test]
    fn misaligned_and_gapped_inputs_are_copied_transposes_refused() -> Result<()> {
        let t = Tensor::zeros((4, 64), DType::F16, &Device::Cpu)?;
        // 8 f16 = 16 bytes in: kept as is.
        let a = aligned("op", "x", &t.narrow(0, 1, 2)?, 16, false)?;
        assert_eq!(a.layout().start_offset(), 64);
        let n = t.flatten_all()?.narrow(0, 3, 128)?.reshape((2, 64))?;
        let a = aligned("op", "x", &n, 16, false)?;
        assert_eq!(a.layout().start_offset(), 0);
        assert!(a.is_contiguous());
        // A row stride of 64 f16 with 32 columns: fine unless rows must be contiguous.
        let g = t.narrow(1, 0, 32)?;
        assert_eq!(aligned("op", "x", &g, 16, false)?.layout().stride(), &[64, 1]);
        assert_eq!(aligned("op", "x", &g, 16, true)?.layout().stride(), &[32, 1]);
        let e = aligned("matmul_int4", "a", &t.t()?, 16, false).unwrap_err().to_string();
        assert!(e.contains("kaio-candle::matmul_int4") && e.contains("'a'") && e.contains(".contiguous()"), "{e}");
        Ok(())
    }

    #[test]
    fn tracked_inputs_are_refused_with_detach() -> Result<()> {
        let v = candle_core::Var::zeros((2, 2), DType::F32, &Device::Cpu)?;
        let e = forward_only("qkv_project_int8", "sq", v.as_tensor()).unwrap_err().to_string();
        assert!(e.contains("kaio-candle::qkv_project_int8") && e.contains("'sq'") && e.contains("sq.detach()"), "{e}");
        forward_only("qkv_project_int8", "sq", &v.as_tensor().detach())?;
        let derived = (v.as_tensor() * 2.0)?;
        assert!(forward_only("op", "x", &derived).is_err());
        Ok(())
    }

    #[test]
    fn cpu_tensors_are_refused() -> Result<()> {
        let a = Tensor::zeros((2, 16), DType::U8, &Device::Cpu)?;
        let s = Tensor::ones(2, DType::F32, &Device::Cpu)?;
        let e = matmul_int8(&a, &a, &s).unwrap_err().to_string();
        assert!(e.contains("kaio-candle::matmul_int8") && e.contains("CUDA tensors only"), "{e}");
        let e = matmul_int8(&a, &a, &Tensor::ones(3, DType::F32, &Device::Cpu)?).unwrap_err().to_string();
        assert!(e.contains("'scale'") && e.contains("N = 2"), "{e}");
        Ok(())
    }

}
