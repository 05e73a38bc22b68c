//! The backward of [`crate::flash_attn_varlen`] through candle's autograd,
//! as `flash_attention`'s (see src/attention.rs): the forward of an input
//! that tracks gradients wrote O then the f32 LSE `[Hq, total_q]` in one
//! packed tensor, `bwd` reads the LSE back out of it, and libkaio's varlen
//! backward (sm_80 kernels, deterministic) writes dQ, dK and dV packed in
//! one tensor that `bwd` splits into views.
use candle_core::backend::BackendDevice;
use candle_core::{bail, CudaStorage, CustomOp3, Layout, Result, Shape, Tensor};

use crate::attention::{head_dim, tc_view, BWD_DIMS};
use crate::attention_serving::FlashAttnVarlen;
use crate::context::context;
use crate::error::KaioResultExt;
use crate::heads::token_heads;
use crate::layout::Matrix;
use crate::prep::{held, no_cpu_fwd};
use crate::storage::{read, write};

const OP: &str = "flash_attn_varlen_backward";
const WHAT: &str = "varlen attention backward";

type Grads = (Option<Tensor>, Option<Tensor>, Option<Tensor>);

/// `FlashAttnVarlen::bwd`: dQ, dK, dV (each only where its input tracks
/// gradients) from the packed forward output `res` and its gradient.
pub(crate) fn backward(fwd: &FlashAttnVarlen, [q, k, v]: [&Tensor; 3], res: &Tensor, grad: &Tensor) -> Result<Grads> {
    if !fwd.with_lse {
        bail!(
            "kaio-candle::{OP}: backward of a forward run without its LSE; use kaio_candle::flash_attn_varlen, \
             which keeps it when an input tracks gradients"
        )
    }
    let keep = |t: &Tensor, g: &Tensor| t.track_op().then(|| g.clone());
    let (total_q, hq, d) = q.dims3()?;
    let (total_k, hkv, _) = k.dims3()?;
    let (n_q, n_k) = (total_q * hq * d, total_k * hkv * d);
    if n_q == 0 || n_k == 0 {
        // No query, or no key anywhere (O = 0 whatever the inputs).
        return Ok((keep(q, &q.zeros_like()?), keep(k, &k.zeros_like()?), keep(v, &v.zeros_like()?)));
    }
    head_dim(OP, d, BWD_DIMS, WHAT)?;
    // dO: the gradient of O's part of the packed output (the LSE part has
    // none of its own), copied where its layout does not suit.
    let mut dout = grad.narrow(0, 0, n_q)?.reshape((total_q, hq, d))?;
    let esize = dout.dtype().size_in_bytes();
    if token_heads(OP, "dO", dout.layout(), None).and_then(|h| tc_view(OP, "dO", &h.m, esize)).is_err() {
        dout = dout.force_contiguous()?;
    }
    let bwd = VarlenBackward { fwd: fwd.clone(), packed: res.clone(), dout };
    let packed = q.apply_op3_no_bwd(k, v, &bwd)?;
    let dq = packed.narrow(0, 0, n_q)?.reshape(q.shape())?;
    let dk = packed.narrow(0, n_q, n_k)?.reshape(k.shape())?;
    let dv = packed.narrow(0, n_q + n_k, n_k)?.reshape(v.shape())?;
    Ok((keep(q, &dq), keep(k, &dk), keep(v, &dv)))
}

/// `(q, k, v) -> [dQ | dK | dV]` in the input dtype, from the packed forward
/// output (O, LSE) and dO it holds.
struct VarlenBackward {
    fwd: FlashAttnVarlen,
    packed: Tensor,
    dout: Tensor,
}

impl CustomOp3 for VarlenBackward {
    fn name(&self) -> &'static str {
        "kaio-flash-attn-varlen-backward"
    }
    no_cpu_fwd!(3, "flash_attn_varlen_backward");
    fn cuda_fwd(
        &self,
        q: &CudaStorage,
        ql: &Layout,
        k: &CudaStorage,
        kl: &Layout,
        v: &CudaStorage,
        vl: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let x = self.fwd.operands(OP, q, ql, k, kl, v, vl)?;
        head_dim(OP, x.d, BWD_DIMS, WHAT)?;
        let (cqs, cks) = (self.fwd.cu_seqlens_q.storage_and_layout().0, self.fwd.cu_seqlens_k.storage_and_layout().0);
        let [cq, ck] = FlashAttnVarlen::prefix_sums(OP, [&cqs, &cks], q)?;
        let (ps, pl) = self.packed.storage_and_layout();
        let ps = held(OP, "forward output", &ps, q, &[x.dtype])?;
        let (gs, gl) = self.dout.storage_and_layout();
        let gs = held(OP, "output gradient", &gs, q, &[x.dtype])?;
        let esize = x.dtype.size_in_bytes();
        let (n_q, n_k) = (x.n_q(), x.n_k());
        let packed_len = n_q + 2 * x.hq * x.total_q;
        if pl.dims() != [packed_len] || !pl.is_contiguous() || !(pl.start_offset() * esize).is_multiple_of(16) {
            bail!(
                "kaio-candle::{OP}: the forward output is {:?} (start_offset {}); expected the packed contiguous \
                 [{packed_len}] (O, then the LSE) at a 16-byte aligned start",
                pl.dims(),
                pl.start_offset()
            )
        }
        if gl.dims() != [x.total_q, x.hq, x.d] {
            bail!("kaio-candle::{OP}: the output gradient is {:?}; expected {:?}", gl.dims(), [x.total_q, x.hq, x.d])
        }
        let gm = token_heads(OP, "output gradient", gl, None)?.m;
        tc_view(OP, "output gradient", &gm, esize)?;
        let shape = Shape::from(n_q + 2 * n_k);
        let dev = &q.device;
        // libkaio leaves rows of no sequence as they are: zeros.
        let mut out = dev.zeros_impl(&shape, x.dtype)?;
        if n_q == 0 || n_k == 0 {
            return Ok((out, shape));
        }
        let (desc, key) = self.fwd.desc(OP, &x)?;
        let ctx = context(dev)?;
        // The op owns an Hq·total_q f32 workspace; ops are cached per thread
        // (see context.rs), so one is never launched on two streams at once.
        let prepared = ctx.op((OP, key), |d| kaio::Op::attention_varlen_backward(d, &desc))?;
        let stream = dev.cuda_stream();
        let (rq, rk, rv) = (read(&ctx, OP, q, &stream)?, read(&ctx, OP, k, &stream)?, read(&ctx, OP, v, &stream)?);
        let (rcq, rck) = (read(&ctx, OP, cq, &stream)?, read(&ctx, OP, ck, &stream)?);
        let (rp, rg) = (read(&ctx, OP, ps, &stream)?, read(&ctx, OP, gs, &stream)?);
        let ro = write(&ctx, OP, &mut out, &stream)?;
        let po = pl.start_offset();
        let (qcols, kcols) = (x.hq * x.d, x.hkv * x.d);
        let om = Matrix { rows: x.total_q, cols: qcols, row_stride: qcols, offset: po };
        // dQ, dK, dV start n_q and n_k elements apart: multiples of 64 bytes.
        let dqm = Matrix { rows: x.total_q, cols: qcols, row_stride: qcols, offset: 0 };
        let dkm = Matrix { rows: x.total_k, cols: kcols, row_stride: kcols, offset: n_q };
        let dvm = Matrix { offset: n_q + n_k, ..dkm };
        let views = [
            rg.view(&gm),
            rq.view(&x.mats[0].m),
            rk.view(&x.mats[1].m),
            rv.view(&x.mats[2].m),
            rcq.view_as(&x.cu[0], kaio::Dtype::I32),
            rck.view_as(&x.cu[1], kaio::Dtype::I32),
            rp.view(&om),
            x.lse_view(&rp.buf, (po + n_q) * esize),
            ro.view(&dqm),
            ro.view(&dkm),
            ro.view(&dvm),
        ];
        prepared.launch(&ctx.stream, &views).kaio(OP)?;
        drop((rq, rk, rv, rcq, rck, rp, rg, ro));
        Ok((out, shape))
    }
}
