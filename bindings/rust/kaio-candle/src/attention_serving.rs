//! Serving attention on candle tensors, f16 or bf16: decode
//! over a paged KV cache ([`paged_attention`], the layout
//! [`crate::kv_cache_write`] fills), packed variable-length batches
//! ([`flash_attn_varlen`], candle-flash-attn's signature, the one with a
//! backward: the rest are forward only) and chunked
//! prefill of packed new rows over the paged cache
//! ([`paged_attention_prefill`]). All are GQA: query head h reads KV head
//! `h / (Hq / Hkv)`.
use candle_core::backend::{BackendDevice, BackendStorage};
use candle_core::{bail, CudaStorage, CustomOp3, DType, Layout, Result, Shape, Tensor};

use crate::attention::{bshd, check_scale, same_dtype, tc_view, with_lse_if_training};
use crate::context::context;
use crate::error::KaioResultExt;
use crate::heads::{token_heads, Heads};
use crate::layout::{self, Matrix};
use crate::prep::{aligned16, forward_only, held, no_cpu_fwd};
use crate::storage::{alloc, kaio_dtype, read, same_device, write};

const HALVES: &[DType] = &[DType::F16, DType::BF16];

/// q's dtype for k and v, all on q's GPU.
fn qkv_like(op: &str, q: &CudaStorage, k: &CudaStorage, v: &CudaStorage, names: [&str; 2]) -> Result<DType> {
    let dtype = q.dtype();
    layout::dtype(op, "q", dtype, HALVES)?;
    same_dtype(op, names[0], k.dtype(), dtype)?;
    same_dtype(op, names[1], v.dtype(), dtype)?;
    same_device(op, q, k, names[0])?;
    same_device(op, q, v, names[1])?;
    Ok(dtype)
}

fn gqa(op: &str, hq: usize, hkv: usize) -> Result<()> {
    if hq == 0 || hkv == 0 || !hq.is_multiple_of(hkv) {
        bail!(
            "kaio-candle::{op}: 'q' has {hq} heads and the keys {hkv}; the query heads must be a non-zero multiple \
             of the KV heads (MHA, GQA, MQA)"
        )
    }
    Ok(())
}

fn mask(causal: bool) -> kaio::AttentionMask {
    if causal {
        kaio::AttentionMask::Causal
    } else {
        kaio::AttentionMask::None
    }
}

/// Block tables, lengths and prefix sums: I32, or U32 (candle's index
/// dtype), read as I32: the same bytes below 2^31; a larger value reads as
/// negative and is reported as bad device data.
const INDICES: &[DType] = &[DType::I32, DType::U32];

/// The K and V page pools `[num_pages, page_size, Hkv, D]` as libkaio's
/// `[num_pages · page_size, Hkv · D]` views, with page_size, Hkv and D.
fn page_pools(op: &str, kl: &Layout, vl: &Layout, esize: usize) -> Result<([Matrix; 2], usize, usize, usize)> {
    layout::rank(op, "k_cache", kl.dims(), 4, "num_pages, page_size, heads_kv, head_dim")?;
    if vl.dims() != kl.dims() {
        bail!("kaio-candle::{op}: 'v_cache' is {:?} but 'k_cache' is {:?}; they must match", vl.dims(), kl.dims())
    }
    let mut pools = [Matrix { rows: 0, cols: 0, row_stride: 0, offset: 0 }; 2];
    for (m, (arg, l)) in pools.iter_mut().zip([("k_cache", kl), ("v_cache", vl)]) {
        *m = token_heads(op, arg, l, None)?.m;
        tc_view(op, arg, m, esize)?;
    }
    let kd = kl.dims();
    Ok((pools, kd[1], kd[2], kd[3]))
}

/// Checks `block_table` `[B, max_pages_per_seq]` and `seq_lens` `[B]` for a
/// batch of `b` and pages of `page_size` covering `max_seq_len`; their views
/// (seq_lens as libkaio's `[1, B]`).
fn table_views(op: &str, bl: &Layout, sl: &Layout, b: usize, page_size: usize, max_seq_len: usize) -> Result<(Matrix, Matrix)> {
    layout::rank(op, "block_table", bl.dims(), 2, "batch, max_pages_per_seq")?;
    let pages = bl.dims()[1];
    if bl.dims()[0] != b || sl.dims() != [b] {
        bail!(
            "kaio-candle::{op}: 'block_table' is {:?} and 'seq_lens' {:?} for a batch of {b}; they must be \
             [{b}, max_pages_per_seq] and [{b}]",
            bl.dims(),
            sl.dims()
        )
    }
    if pages * page_size < max_seq_len {
        bail!(
            "kaio-candle::{op}: max_seq_len is {max_seq_len} but the block table holds {pages} pages of {page_size} \
             tokens; give max_seq_len <= {} or a wider block table",
            pages * page_size
        )
    }
    let btm = layout::matrix(op, "block_table", bl)?;
    let lm = layout::contiguous(op, "seq_lens", sl)?;
    Ok((btm, Matrix { rows: 1, cols: b, row_stride: b, offset: lm.offset }))
}

// ---------------------------------------------------------------------------
// Paged decode attention.

/// Decode attention over a paged cache: `q.apply_op3_no_bwd(&k_cache,
/// &v_cache, &op)` with the block table and lengths held here.
#[derive(Clone, Debug)]
pub struct PagedAttention {
    /// I32 or U32 `[B, max_pages_per_seq]`.
    pub block_table: Tensor,
    /// I32 or U32 `[B]`: each sequence's KV length including its Sq new tokens.
    pub seq_lens: Tensor,
    /// The longest length any sequence may have (sizes the split workspace).
    pub max_seq_len: usize,
    pub softmax_scale: Option<f32>,
    pub causal: bool,
}

impl CustomOp3 for PagedAttention {
    fn name(&self) -> &'static str {
        "kaio-paged-attention"
    }
    no_cpu_fwd!(3, "paged_attention");
    fn cuda_fwd(
        &self,
        q: &CudaStorage,
        ql: &Layout,
        kc: &CudaStorage,
        kl: &Layout,
        vc: &CudaStorage,
        vl: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let op = "paged_attention";
        check_scale(op, self.softmax_scale)?;
        let dtype = qkv_like(op, q, kc, vc, ["k_cache", "v_cache"])?;
        let esize = dtype.size_in_bytes();
        layout::rank(op, "q", ql.dims(), 4, "batch, seq_q, heads_q, head_dim")?;
        let (caches, page_size, hkv, kd) = page_pools(op, kl, vl, esize)?;
        let qd = ql.dims();
        let (b, sq, hq, d) = (qd[0], qd[1], qd[2], qd[3]);
        if kd != d {
            bail!("kaio-candle::{op}: 'q' has head_dim {d} and 'k_cache' {kd}; they must match")
        }
        gqa(op, hq, hkv)?;
        if sq > 16 {
            bail!(
                "kaio-candle::{op}: 'q' has {sq} query tokens a sequence; paged decode takes at most 16 (use \
                 paged_attention_prefill for prefill)"
            )
        }
        let (bs, bl) = self.block_table.storage_and_layout();
        let bt = held(op, "block_table", &bs, q, INDICES)?;
        let (ss, sl) = self.seq_lens.storage_and_layout();
        let lens = held(op, "seq_lens", &ss, q, INDICES)?;
        let (btm, flat) = table_views(op, bl, sl, b, page_size, self.max_seq_len)?;
        let shape = Shape::from((b, sq, hq, d));
        let dev = &q.device;
        if b == 0 || sq == 0 {
            return Ok((dev.zeros_impl(&shape, dtype)?, shape));
        }
        let qm = bshd(op, "q", ql)?;
        tc_view(op, "q", &qm, esize)?;
        let kdt = kaio_dtype(op, dtype)?;
        let desc = kaio::AttentionDesc {
            dtype: kdt,
            mask: mask(self.causal),
            batch: b,
            seq_q: sq,
            seq_k: self.max_seq_len,
            heads_q: hq,
            heads_kv: hkv,
            head_dim: d,
            softmax_scale: self.softmax_scale.unwrap_or(0.0),
            ..Default::default()
        };
        let paged = kaio::AttentionPagedDesc { page_size };
        let key = [kdt.raw() as usize, self.causal as usize, b, sq, self.max_seq_len, hq, hkv, d, page_size]
            .into_iter()
            .map(|n| n as i64)
            .chain([desc.softmax_scale.to_bits() as i64])
            .collect();
        let ctx = context(dev)?;
        let prepared = ctx.op((op, key), |dv| kaio::Op::attention_paged(dv, &desc, &paged))?;
        let mut out = alloc(dev, dtype, shape.elem_count())?;
        let stream = dev.cuda_stream();
        let (rq, rk, rv) = (read(&ctx, op, q, &stream)?, read(&ctx, op, kc, &stream)?, read(&ctx, op, vc, &stream)?);
        let (rb, rl) = (read(&ctx, op, bt, &stream)?, read(&ctx, op, lens, &stream)?);
        let ro = write(&ctx, op, &mut out, &stream)?;
        let om = Matrix { rows: b * sq, cols: hq * d, row_stride: hq * d, offset: 0 };
        let views = [
            rq.view(&qm),
            rk.view(&caches[0]),
            rv.view(&caches[1]),
            rb.view_as(&btm, kaio::Dtype::I32),
            rl.view_as(&flat, kaio::Dtype::I32),
            ro.view(&om),
            kaio::TensorView::none(),
        ];
        prepared.launch(&ctx.stream, &views).kaio(op)?;
        drop((rq, rk, rv, rb, rl, ro));
        Ok((out, shape))
    }
}

/// Decode attention over a paged KV cache (vLLM's `paged_attention`):
/// q `[B, Sq, Hq, D]` (Sq <= 16 new tokens a sequence, BSHD), `k_cache` and
/// `v_cache` `[num_pages, page_size, Hkv, D]` (page_size 16, 32, 64, 128 or
/// 256; 16-byte aligned, as [`crate::kv_cache_write`] fills them),
/// `block_table` I32 or U32 `[B, max_pages_per_seq]` (entry (b, i): the page
/// of tokens `i·page_size ..` of sequence b) and `seq_lens` I32 or U32 `[B]` (each
/// sequence's KV length INCLUDING its Sq new tokens, at most `max_seq_len`;
/// 0 gives O = 0). f16 or bf16, D 64, 128 or 256, Hq a multiple of Hkv.
/// Returns O `[B, Sq, Hq, D]` in q's dtype. `causal` (bottom-right: query i
/// of sequence b sees keys `j <= seq_lens[b] − Sq + i`) matters only for
/// Sq > 1. `softmax_scale` None is `1/√D`.
///
/// Device data is not checked on the host: a length past `max_seq_len` or a
/// page id outside the pools gives NaN rows for that sequence and an error
/// from the next [`crate::synchronize`] naming it. Forward only. The
/// prepared op (its split workspace) is cached per shape and
/// `max_seq_len`: pass a fixed bound (the model's context length) rather
/// than each step's longest length.
#[allow(clippy::too_many_arguments)]
pub fn paged_attention(
    q: &Tensor,
    k_cache: &Tensor,
    v_cache: &Tensor,
    block_table: &Tensor,
    seq_lens: &Tensor,
    max_seq_len: usize,
    softmax_scale: Option<f32>,
    causal: bool,
) -> Result<Tensor> {
    let op = "paged_attention";
    for (arg, t) in [("q", q), ("k_cache", k_cache), ("v_cache", v_cache)] {
        forward_only(op, arg, t)?;
    }
    let pa = PagedAttention {
        block_table: block_table.clone(),
        seq_lens: seq_lens.clone(),
        max_seq_len,
        softmax_scale,
        causal,
    };
    aligned16(q)?.apply_op3_no_bwd(k_cache, v_cache, &pa)
}

// ---------------------------------------------------------------------------
// Varlen (packed) attention.

/// Varlen attention forward: `q.apply_op3_no_bwd(&k, &v, &op)` with the
/// prefix sums held here; with `with_lse`, `q.apply_op3(&k, &v, op)` writes
/// the packed 1-D tensor of O's elements followed by the f32 LSE `[Hq,
/// total_q]` stored in `2·Hq·total_q` elements of q's dtype, and has a
/// backward (what [`flash_attn_varlen`] does when an input tracks gradients).
#[derive(Clone, Debug)]
pub struct FlashAttnVarlen {
    /// I32 or U32 `[B + 1]`, prefix sums from 0.
    pub cu_seqlens_q: Tensor,
    pub cu_seqlens_k: Tensor,
    pub max_seqlen_q: usize,
    pub max_seqlen_k: usize,
    pub softmax_scale: f32,
    pub causal: bool,
    pub with_lse: bool,
}

/// The checked operands of one varlen call.
pub(crate) struct Varlen {
    /// q, k, v as `[tokens, H·D]`.
    pub mats: [Heads; 3],
    pub dtype: DType,
    pub hq: usize,
    pub hkv: usize,
    pub d: usize,
    pub total_q: usize,
    pub total_k: usize,
    /// The prefix sums as libkaio's I32 `[1, B + 1]` views.
    pub cu: [Matrix; 2],
    pub batch: usize,
}

impl Varlen {
    /// Elements of Q (and O, dO, dQ).
    pub fn n_q(&self) -> usize {
        self.total_q * self.hq * self.d
    }
    /// Elements of K (and V, dK, dV).
    pub fn n_k(&self) -> usize {
        self.total_k * self.hkv * self.d
    }
    /// The f32 LSE `[Hq, total_q]` that starts `offset_bytes` into `buf`.
    pub fn lse_view<'a>(&self, buf: &'a kaio::Buffer<u8>, offset_bytes: usize) -> kaio::TensorView<'a> {
        kaio::TensorView::new(buf, self.hq, self.total_q)
            .with_dtype(kaio::Dtype::F32)
            .with_offset_bytes(offset_bytes as u64)
            .with_row_stride(self.total_q)
    }
}

impl FlashAttnVarlen {
    /// Checks q, k, v (`[total, H, D]`, one dtype, one GPU) and the prefix
    /// sums' shapes; the storages of the prefix sums are checked by
    /// [`Self::prefix_sums`].
    pub(crate) fn operands(
        &self,
        op: &str,
        q: &CudaStorage,
        ql: &Layout,
        k: &CudaStorage,
        kl: &Layout,
        v: &CudaStorage,
        vl: &Layout,
    ) -> Result<Varlen> {
        check_scale(op, Some(self.softmax_scale))?;
        let dtype = qkv_like(op, q, k, v, ["k", "v"])?;
        let esize = dtype.size_in_bytes();
        layout::rank(op, "q", ql.dims(), 3, "total_q, heads_q, head_dim")?;
        layout::rank(op, "k", kl.dims(), 3, "total_k, heads_kv, head_dim")?;
        if vl.dims() != kl.dims() {
            bail!("kaio-candle::{op}: 'v' is {:?} but 'k' is {:?}; they must match", vl.dims(), kl.dims())
        }
        let mut mats = Vec::new();
        for (arg, l) in [("q", ql), ("k", kl), ("v", vl)] {
            let h = token_heads(op, arg, l, None)?;
            tc_view(op, arg, &h.m, esize)?;
            mats.push(h);
        }
        let mats: [Heads; 3] = [mats[0], mats[1], mats[2]];
        let (hq, hkv, d) = (mats[0].heads, mats[1].heads, mats[0].head_dim);
        if mats[1].head_dim != d {
            bail!("kaio-candle::{op}: 'q' has head_dim {d} and 'k' {}; they must match", mats[1].head_dim)
        }
        gqa(op, hq, hkv)?;
        let (cql, ckl) = (self.cu_seqlens_q.layout(), self.cu_seqlens_k.layout());
        let cqm = layout::contiguous(op, "seqlens_q", cql)?;
        let ckm = layout::contiguous(op, "seqlens_k", ckl)?;
        let n = cqm.rows * cqm.cols;
        if cql.dims().len() != 1 || ckl.dims() != cql.dims() || n < 2 {
            bail!(
                "kaio-candle::{op}: 'seqlens_q' is {:?} and 'seqlens_k' {:?}; both must be [B + 1] prefix sums \
                 (first 0) of one batch of B >= 1 sequences",
                cql.dims(),
                ckl.dims()
            )
        }
        let cu = |m: &Matrix| Matrix { rows: 1, cols: n, row_stride: n, offset: m.offset };
        let (total_q, total_k) = (mats[0].m.rows, mats[1].m.rows);
        Ok(Varlen { mats, dtype, hq, hkv, d, total_q, total_k, cu: [cu(&cqm), cu(&ckm)], batch: n - 1 })
    }

    /// The storages of the prefix sums (I32 or U32, on q's GPU), from their
    /// guards.
    pub(crate) fn prefix_sums<'a>(
        op: &str,
        guards: [&'a candle_core::Storage; 2],
        q: &CudaStorage,
    ) -> Result<[&'a CudaStorage; 2]> {
        Ok([held(op, "seqlens_q", guards[0], q, INDICES)?, held(op, "seqlens_k", guards[1], q, INDICES)?])
    }

    /// libkaio's descriptor of the call (forward and backward alike) and the
    /// key of its prepared op.
    pub(crate) fn desc(&self, op: &str, x: &Varlen) -> Result<(kaio::AttentionVarlenDesc, Vec<i64>)> {
        let kdt = kaio_dtype(op, x.dtype)?;
        let desc = kaio::AttentionVarlenDesc {
            dtype: kdt,
            mask: mask(self.causal),
            batch: x.batch,
            max_seqlen_q: self.max_seqlen_q,
            max_seqlen_k: self.max_seqlen_k,
            total_q: x.total_q,
            total_k: x.total_k,
            heads_q: x.hq,
            heads_kv: x.hkv,
            head_dim: x.d,
            softmax_scale: self.softmax_scale,
            ..Default::default()
        };
        let key = [kdt.raw() as usize, self.causal as usize, x.batch, self.max_seqlen_q, self.max_seqlen_k]
            .into_iter()
            .chain([x.total_q, x.total_k, x.hq, x.hkv, x.d])
            .map(|n| n as i64)
            .chain([self.softmax_scale.to_bits() as i64])
            .collect();
        Ok((desc, key))
    }
}

impl CustomOp3 for FlashAttnVarlen {
    fn name(&self) -> &'static str {
        "kaio-flash-attn-varlen"
    }
    no_cpu_fwd!(3, "flash_attn_varlen");
    fn cuda_fwd(
        &self,
        q: &CudaStorage,
        ql: &Layout,
        k: &CudaStorage,
        kl: &Layout,
        v: &CudaStorage,
        vl: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let op = "flash_attn_varlen";
        let x = self.operands(op, q, ql, k, kl, v, vl)?;
        let (cqs, cks) = (self.cu_seqlens_q.storage_and_layout().0, self.cu_seqlens_k.storage_and_layout().0);
        let [cq, ck] = Self::prefix_sums(op, [&cqs, &cks], q)?;
        let n_o = x.n_q();
        let shape =
            if self.with_lse { Shape::from(n_o + 2 * x.hq * x.total_q) } else { Shape::from((x.total_q, x.hq, x.d)) };
        let dev = &q.device;
        // Rows of no sequence are never written: zeros, not garbage (in the
        // LSE too, which the backward reads).
        let mut out = dev.zeros_impl(&shape, x.dtype)?;
        if x.total_q == 0 {
            return Ok((out, shape));
        }
        let (desc, key) = self.desc(op, &x)?;
        let ctx = context(dev)?;
        let prepared = ctx.op((op, key), |dv| kaio::Op::attention_varlen(dv, &desc))?;
        let stream = dev.cuda_stream();
        let (rq, rk, rv) = (read(&ctx, op, q, &stream)?, read(&ctx, op, k, &stream)?, read(&ctx, op, v, &stream)?);
        let (rcq, rck) = (read(&ctx, op, cq, &stream)?, read(&ctx, op, ck, &stream)?);
        let ro = write(&ctx, op, &mut out, &stream)?;
        let om = Matrix { rows: x.total_q, cols: x.hq * x.d, row_stride: x.hq * x.d, offset: 0 };
        // O's bytes are a multiple of 64 (D is a multiple of 32), so the LSE
        // starts aligned.
        let lse =
            if self.with_lse { x.lse_view(&ro.buf, n_o * x.dtype.size_in_bytes()) } else { kaio::TensorView::none() };
        // U32 prefix sums are read as I32: the same bytes below 2^31.
        let views = [
            rq.view(&x.mats[0].m),
            rk.view(&x.mats[1].m),
            rv.view(&x.mats[2].m),
            rcq.view_as(&x.cu[0], kaio::Dtype::I32),
            rck.view_as(&x.cu[1], kaio::Dtype::I32),
            ro.view(&om),
            lse,
        ];
        prepared.launch(&ctx.stream, &views).kaio(op)?;
        drop((rq, rk, rv, rcq, rck, ro));
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
        crate::varlen_backward::backward(self, [q, k, v], res, grad)
    }
}

/// FlashAttention on a packed variable-length batch, with
/// candle-flash-attn's signature: q `[total_q, Hq, D]`, k and v
/// `[total_k, Hkv, D]` (f16 or bf16; each token's H·D values side by side,
/// tokens a multiple of 8 elements apart), `seqlens_q` / `seqlens_k` U32
/// (candle-flash-attn's) or I32 `[B + 1]` prefix sums from 0 (sequence b's
/// queries are rows `seqlens_q[b] .. seqlens_q[b+1]`), `max_seqlen_q` /
/// `max_seqlen_k` host bounds on every length (1 <= max_seqlen_q <=
/// total_q). Each sequence is attention on its own; `causal` is
/// bottom-right aligned per sequence (key j <= i + len_k − len_q).
/// `softmax_scale` must be finite and > 0 (candle-flash-attn's callers pass
/// `1/√D`). D in {32, 64, 96, 128, 256}; Hq a multiple of Hkv. Returns O
/// `[total_q, Hq, D]` in q's dtype; rows of no sequence are 0. Bad prefix
/// sums (or a length past max_seqlen) make that sequence empty, and the next
/// [`crate::synchronize`] of the device reports them.
///
/// With backward through candle's autograd (libkaio's deterministic sm_80
/// varlen backward, D in {32, 64, 96, 128}: a D = 256 forward works, its
/// backward fails with an error): when q, k or v tracks gradients the
/// forward also keeps the f32 LSE (`Hq·total_q` values) in the storage the
/// returned O views, and the backward gives dQ, dK, dV in the input dtype;
/// a sequence with no keys, and rows of no sequence, get zero gradients.
/// Inputs that track no gradient get O alone. Precision as
/// [`crate::flash_attention`]'s.
#[allow(clippy::too_many_arguments)]
pub fn flash_attn_varlen(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    seqlens_q: &Tensor,
    seqlens_k: &Tensor,
    max_seqlen_q: usize,
    max_seqlen_k: usize,
    softmax_scale: f32,
    causal: bool,
) -> Result<Tensor> {
    let op = "flash_attn_varlen";
    for (arg, t) in [("seqlens_q", seqlens_q), ("seqlens_k", seqlens_k)] {
        forward_only(op, arg, t)?;
    }
    let fa = |with_lse| FlashAttnVarlen {
        cu_seqlens_q: seqlens_q.clone(),
        cu_seqlens_k: seqlens_k.clone(),
        max_seqlen_q,
        max_seqlen_k,
        softmax_scale,
        causal,
        with_lse,
    };
    let (q, k, v) = (aligned16(q)?, aligned16(k)?, aligned16(v)?);
    with_lse_if_training(&q, &k, &v, fa)
}

// ---------------------------------------------------------------------------
// Chunked prefill over the paged cache.

/// Paged prefill: `q.apply_op3_no_bwd(&k_cache, &v_cache, &op)` with the
/// prefix sums, block table and lengths held here.
#[derive(Clone, Debug)]
pub struct PagedAttentionPrefill {
    /// I32 or U32 `[B + 1]`: prefix sums from 0 of each sequence's new rows.
    pub cu_seqlens_q: Tensor,
    /// I32 or U32 `[B, max_pages_per_seq]`.
    pub block_table: Tensor,
    /// I32 or U32 `[B]`: each sequence's KV length INCLUDING its new rows.
    pub seq_lens: Tensor,
    /// The most new rows any sequence has (1 <= max_seqlen_q <= total_q).
    pub max_seqlen_q: usize,
    /// The longest length any `seq_lens` entry may hold.
    pub max_seq_len: usize,
    pub softmax_scale: Option<f32>,
    pub causal: bool,
}

impl CustomOp3 for PagedAttentionPrefill {
    fn name(&self) -> &'static str {
        "kaio-paged-attention-prefill"
    }
    no_cpu_fwd!(3, "paged_attention_prefill");
    fn cuda_fwd(
        &self,
        q: &CudaStorage,
        ql: &Layout,
        kc: &CudaStorage,
        kl: &Layout,
        vc: &CudaStorage,
        vl: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let op = "paged_attention_prefill";
        check_scale(op, self.softmax_scale)?;
        let dtype = qkv_like(op, q, kc, vc, ["k_cache", "v_cache"])?;
        let esize = dtype.size_in_bytes();
        layout::rank(op, "q", ql.dims(), 3, "total_q, heads_q, head_dim")?;
        let qh = token_heads(op, "q", ql, None)?;
        tc_view(op, "q", &qh.m, esize)?;
        let (pools, page_size, hkv, d) = page_pools(op, kl, vl, esize)?;
        let (total_q, hq) = (qh.m.rows, qh.heads);
        if qh.head_dim != d {
            bail!("kaio-candle::{op}: 'q' has head_dim {} and 'k_cache' {d}; they must match", qh.head_dim)
        }
        gqa(op, hq, hkv)?;
        let (cqs, cql) = self.cu_seqlens_q.storage_and_layout();
        let cq = held(op, "cu_seqlens_q", &cqs, q, INDICES)?;
        let cqm = layout::contiguous(op, "cu_seqlens_q", cql)?;
        let n = cqm.rows * cqm.cols;
        if cql.dims().len() != 1 || n < 2 {
            bail!(
                "kaio-candle::{op}: 'cu_seqlens_q' is {:?}; it must be [B + 1] prefix sums (first 0) of the new \
                 rows of B >= 1 sequences",
                cql.dims()
            )
        }
        let batch = n - 1;
        let (bs, bl) = self.block_table.storage_and_layout();
        let bt = held(op, "block_table", &bs, q, INDICES)?;
        let (ss, sl) = self.seq_lens.storage_and_layout();
        let lens = held(op, "seq_lens", &ss, q, INDICES)?;
        let (btm, flat) = table_views(op, bl, sl, batch, page_size, self.max_seq_len)?;
        let shape = Shape::from((total_q, hq, d));
        let dev = &q.device;
        // Rows of no sequence are never written: zeros, not garbage.
        let mut out = dev.zeros_impl(&shape, dtype)?;
        if total_q == 0 {
            return Ok((out, shape));
        }
        let desc = kaio::AttentionVarlenDesc {
            dtype: kaio_dtype(op, dtype)?,
            mask: mask(self.causal),
            batch,
            max_seqlen_q: self.max_seqlen_q,
            max_seqlen_k: self.max_seq_len,
            total_q,
            total_k: 0,
            heads_q: hq,
            heads_kv: hkv,
            head_dim: d,
            softmax_scale: self.softmax_scale.unwrap_or(0.0),
            ..Default::default()
        };
        let paged = kaio::AttentionPagedDesc { page_size };
        let ctx = context(dev)?;
        let stream = dev.cuda_stream();
        let (rq, rk, rv) = (read(&ctx, op, q, &stream)?, read(&ctx, op, kc, &stream)?, read(&ctx, op, vc, &stream)?);
        let (rcq, rb, rl) = (read(&ctx, op, cq, &stream)?, read(&ctx, op, bt, &stream)?, read(&ctx, op, lens, &stream)?);
        let ro = write(&ctx, op, &mut out, &stream)?;
        let om = Matrix { rows: total_q, cols: hq * d, row_stride: hq * d, offset: 0 };
        let cu = Matrix { rows: 1, cols: n, row_stride: n, offset: cqm.offset };
        let kv = kaio::PagedKv {
            k_pool: rk.view(&pools[0]),
            v_pool: rv.view(&pools[1]),
            block_table: rb.view_as(&btm, kaio::Dtype::I32),
            seq_lens: rl.view_as(&flat, kaio::Dtype::I32),
        };
        // The one-shot call, not a cached prepared op: total_q changes with
        // every step of a chunked prefill, and the op has no workspace.
        kaio::attention_paged_prefill(
            &ctx.stream,
            &rq.view(&qh.m),
            &rcq.view_as(&cu, kaio::Dtype::I32),
            &kv,
            &ro.view(&om),
            None,
            &desc,
            &paged,
        )
        .kaio(op)?;
        drop((rq, rk, rv, rcq, rb, rl, ro));
        Ok((out, shape))
    }
}

/// Chunked prefill over a paged KV cache (vLLM's / FlashInfer's prefill
/// with a block table): the new query rows of B sequences packed as
/// `q` `[total_q, Hq, D]` (sequence b's rows `cu_seqlens_q[b] ..
/// cu_seqlens_q[b+1]`, I32 or U32 `[B + 1]` prefix sums from 0), each
/// attending to its `seq_lens[b]` keys (I32 or U32 `[B]`, the cache
/// INCLUDING the new rows: append them first with [`crate::kv_cache_write`])
/// in `k_cache` / `v_cache` `[num_pages, page_size, Hkv, D]` through
/// `block_table` I32 or U32 `[B, max_pages_per_seq]`, as
/// [`paged_attention`] reads them. `max_seqlen_q` bounds every sequence's new
/// rows (1 <= max_seqlen_q <= total_q), `max_seq_len` every length
/// (`max_pages_per_seq · page_size >= max_seq_len`). `causal` is
/// bottom-right per sequence: new row i sees keys `j <= seq_lens[b] −
/// len_q + i`. A chunk of a long prompt, a whole prompt and decode rows
/// (len_q 1) mix in one batch. f16 or bf16, D 32, 64, 96, 128 or 256, Hq a
/// multiple of Hkv, page_size 16, 32, 64, 128 or 256. `softmax_scale` None is
/// `1/√D`. Returns O `[total_q, Hq, D]` in q's dtype; rows of no sequence
/// are 0.
///
/// Device data is not checked on the host: a length past `max_seq_len` or a
/// page id outside the pools gives NaN rows for that sequence and an error
/// from the next [`crate::synchronize`] naming it; a bad prefix-sum pair
/// makes that sequence empty. Forward only.
#[allow(clippy::too_many_arguments)]
pub fn paged_attention_prefill(
    q: &Tensor,
    k_cache: &Tensor,
    v_cache: &Tensor,
    cu_seqlens_q: &Tensor,
    block_table: &Tensor,
    seq_lens: &Tensor,
    max_seqlen_q: usize,
    max_seq_len: usize,
    softmax_scale: Option<f32>,
    causal: bool,
) -> Result<Tensor> {
    let op = "paged_attention_prefill";
    for (arg, t) in [("q", q), ("k_cache", k_cache), ("v_cache", v_cache)] {
        forward_only(op, arg, t)?;
    }
    let pp = PagedAttentionPrefill {
        cu_seqlens_q: cu_seqlens_q.clone(),
        block_table: block_table.clone(),
        seq_lens: seq_lens.clone(),
        max_seqlen_q,
        max_seq_len,
        softmax_scale,
        causal,
    };
    aligned16(q)?.apply_op3_no_bwd(k_cache, v_cache, &pp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    fn layout_of(dims: &[usize]) -> Layout {
        Tensor::zeros(dims, DType::F16, &Device::Cpu).unwrap().layout().clone()
    }

    #[test]
    fn page_pools_fold_pages_into_rows() -> Result<()> {
        let l = layout_of(&[8, 16, 2, 64]);
        let (pools, page_size, hkv, d) = page_pools("op", &l, &l, 2)?;
        assert_eq!((page_size, hkv, d), (16, 2, 64));
        assert_eq!(pools[1], Matrix { rows: 128, cols: 128, row_stride: 128, offset: 0 });
        let e = page_pools("op", &l, &layout_of(&[8, 16, 2, 32]), 2).unwrap_err().to_string();
        assert!(e.contains("kaio-candle::op") && e.contains("'v_cache' is [8, 16, 2, 32]") && e.contains("must match"), "{e}");
        let e = page_pools("op", &layout_of(&[128, 2, 64]), &l, 2).unwrap_err().to_string();
        assert!(e.contains("'k_cache'") && e.contains("rank 4"), "{e}");
        Ok(())
    }

    #[test]
    fn block_tables_are_checked_against_the_batch_and_bound() -> Result<()> {
        let (bl, sl) = (layout_of(&[3, 4]), layout_of(&[3]));
        let (btm, lens) = table_views("op", &bl, &sl, 3, 16, 64)?;
        assert_eq!(btm, Matrix { rows: 3, cols: 4, row_stride: 4, offset: 0 });
        assert_eq!(lens, Matrix { rows: 1, cols: 3, row_stride: 3, offset: 0 });
        let e = table_views("op", &bl, &sl, 2, 16, 64).unwrap_err().to_string();
        assert!(e.contains("for a batch of 2") && e.contains("[2, max_pages_per_seq] and [2]"), "{e}");
        let e = table_views("op", &bl, &layout_of(&[3, 1]), 3, 16, 64).unwrap_err().to_string();
        assert!(e.contains("'seq_lens' [3, 1]"), "{e}");
        let e = table_views("op", &bl, &sl, 3, 16, 65).unwrap_err().to_string();
        assert!(e.contains("max_seq_len is 65") && e.contains("4 pages of 16") && e.contains("<= 64"), "{e}");
        let e = table_views("op", &layout_of(&[12]), &sl, 3, 16, 64).unwrap_err().to_string();
        assert!(e.contains("'block_table'") && e.contains("rank 2"), "{e}");
        Ok(())
    }
}
