//! Chunked prefill over a paged KV cache: packed new queries (as the varlen
//! forward's, [`AttentionVarlenDesc`]) attending to each sequence's keys in
//! the page pools ([`PagedKv`], the layout [`Op::kv_cache_write`] fills).
//! kaio.h's "Paged prefill" section states the
//! constraints; bad device data is reported by the next
//! [`Stream::synchronize`].
use std::ptr;

use kaio_sys as sys;

use crate::attention_paged::{AttentionPagedDesc, PagedKv};
use crate::attention_varlen::AttentionVarlenDesc;
use crate::buffer::TensorView;
use crate::device::Device;
use crate::error::{check, Result};
use crate::ops::{opt_raw, Op};
use crate::stream::Stream;

impl Op {
    /// A prepared paged prefill. `desc`: `total_q` packed query rows,
    /// `max_seqlen_q` the longest new-row count, `max_seqlen_k` the longest
    /// length (new rows included) any `seq_lens` entry may hold, `total_k`
    /// 0. Launch tensors: `[Q, K pool, V pool, cu_seqlens_q, block_table,
    /// seq_lens, O, LSE]` ([`PagedKv::prefill_tensors`] builds them); LSE may
    /// be [`TensorView::none`]. Launches allocate nothing, may come from
    /// several threads and are graph-capturable.
    pub fn attention_paged_prefill(
        device: &Device,
        desc: &AttentionVarlenDesc,
        paged: &AttentionPagedDesc,
    ) -> Result<Op> {
        let (d, pd) = (desc.to_raw()?, paged.to_raw()?);
        let mut p = ptr::null_mut();
        check(unsafe { sys::kaio_op_create_attention_paged_prefill(&mut p, device.as_raw(), &d, &pd) })?;
        Op::from_created(p, "attention_paged_prefill")
    }
}

impl<'a> PagedKv<'a> {
    /// The launch list of [`Op::attention_paged_prefill`]: `cu_seqlens_q`
    /// is I32 `[1, B + 1]` (prefix sums of the new rows from 0); `lse`
    /// None: not written.
    pub fn prefill_tensors(
        &self,
        q: TensorView<'a>,
        cu_seqlens_q: TensorView<'a>,
        o: TensorView<'a>,
        lse: Option<TensorView<'a>>,
    ) -> [TensorView<'a>; 8] {
        let lse = lse.unwrap_or(TensorView::none());
        [q, self.k_pool, self.v_pool, cu_seqlens_q, self.block_table, self.seq_lens, o, lse]
    }
}

/// One-shot paged prefill (see [`Op::attention_paged_prefill`]); `lse`
/// None: not written.
#[allow(clippy::too_many_arguments)]
pub fn attention_paged_prefill(
    stream: &Stream,
    q: &TensorView<'_>,
    cu_seqlens_q: &TensorView<'_>,
    kv: &PagedKv<'_>,
    o: &TensorView<'_>,
    lse: Option<&TensorView<'_>>,
    desc: &AttentionVarlenDesc,
    paged: &AttentionPagedDesc,
) -> Result<()> {
    let (d, pd) = (desc.to_raw()?, paged.to_raw()?);
    check(unsafe {
        sys::kaio_attention_paged_prefill(
            stream.as_raw(),
            q.as_raw(),
            kv.k_pool.as_raw(),
            kv.v_pool.as_raw(),
            cu_seqlens_q.as_raw(),
            kv.block_table.as_raw(),
            kv.seq_lens.as_raw(),
            o.as_raw(),
            opt_raw(lse),
            &d,
            &pd,
        )
    })
}
