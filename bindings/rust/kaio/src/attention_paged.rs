//! Paged decode attention: the attention forward (same [`AttentionDesc`],
//! Q / O / LSE layouts and `Decode` kernels) with K and V read from page
//! pools in the vLLM / FlashInfer layout that [`Op::kv_cache_write`] fills.
//! kaio.h's "Paged attention" section states the constraints.
use std::mem::size_of;
use std::ptr;

use kaio_sys as sys;

use crate::attention::AttentionDesc;
use crate::buffer::TensorView;
use crate::device::Device;
use crate::error::{check, Result};
use crate::ops::{opt_raw, Op};
use crate::stream::Stream;

/// The page geometry. `Default` is libkaio's: 16 tokens per page.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct AttentionPagedDesc {
    /// Tokens per page: 16, 32, 64, 128 or 256.
    pub page_size: usize,
}

impl Default for AttentionPagedDesc {
    fn default() -> AttentionPagedDesc {
        AttentionPagedDesc { page_size: 16 }
    }
}

impl AttentionPagedDesc {
    pub fn to_raw(&self) -> Result<sys::kaio_attention_paged_desc> {
        use std::convert::TryFrom;
        let mut d = sys::kaio_attention_paged_desc::default();
        check(unsafe { sys::kaio_attention_paged_desc_init(&mut d, size_of::<sys::kaio_attention_paged_desc>()) })?;
        // Out of i32's range: -1, which libkaio rejects naming page_size.
        d.page_size = i32::try_from(self.page_size).unwrap_or(-1);
        Ok(d)
    }
}

/// The paged cache a decode step reads, borrowed for one call.
#[derive(Copy, Clone, Debug)]
pub struct PagedKv<'a> {
    /// `[num_pages · page_size, Hkv · D]` of the desc's dtype: row
    /// `p · page_size + t` is slot t of page p.
    pub k_pool: TensorView<'a>,
    /// Like `k_pool`, the same rows.
    pub v_pool: TensorView<'a>,
    /// I32 `[B, max_pages_per_seq]`: entry (b, i) is the page of tokens
    /// `i · page_size ..` of sequence b; `max_pages_per_seq · page_size >=
    /// seq_k`.
    pub block_table: TensorView<'a>,
    /// I32 `[1, B]`, contiguous: each sequence's KV length INCLUDING its
    /// new rows, at most the desc's `seq_k` (decode) or `max_seqlen_k`
    /// (prefill) (0: O = 0, LSE = −inf).
    pub seq_lens: TensorView<'a>,
}

impl Op {
    /// A prepared paged decode attention (`desc.variant` `Auto` or `Decode`,
    /// `seq_q <= 16`, head_dim 64, 128 or 256; `seq_k` is the longest
    /// length any sequence may have and sizes the split workspace). Launch
    /// tensors: `[Q, K pool, V pool, block_table, seq_lens, O, LSE]`
    /// ([`PagedKv::tensors`] builds them); LSE may be [`TensorView::none`].
    /// Owns the split workspace; a bad length or page id gives NaN rows and
    /// `OUT_OF_BOUNDS` from the next [`Stream::synchronize`] (the device's
    /// op flag). Launches must not run on two streams at once.
    pub fn attention_paged(device: &Device, desc: &AttentionDesc, paged: &AttentionPagedDesc) -> Result<Op> {
        let (d, pd) = (desc.to_raw()?, paged.to_raw()?);
        let mut p = ptr::null_mut();
        check(unsafe { sys::kaio_op_create_attention_paged(&mut p, device.as_raw(), &d, &pd) })?;
        Op::from_created(p, "attention_paged")
    }
}

impl<'a> PagedKv<'a> {
    /// The launch list of [`Op::attention_paged`]; `lse` None: not written.
    pub fn tensors(&self, q: TensorView<'a>, o: TensorView<'a>, lse: Option<TensorView<'a>>) -> [TensorView<'a>; 7] {
        let lse = lse.unwrap_or(TensorView::none());
        [q, self.k_pool, self.v_pool, self.block_table, self.seq_lens, o, lse]
    }
}

/// One-shot paged decode attention (see [`Op::attention_paged`]): no key
/// split, allocates nothing; bad device data gives NaN rows, reported as
/// for the op.
/// `lse` None: not written.
pub fn attention_paged(
    stream: &Stream,
    q: &TensorView<'_>,
    kv: &PagedKv<'_>,
    o: &TensorView<'_>,
    lse: Option<&TensorView<'_>>,
    desc: &AttentionDesc,
    paged: &AttentionPagedDesc,
) -> Result<()> {
    let (d, pd) = (desc.to_raw()?, paged.to_raw()?);
    check(unsafe {
        sys::kaio_attention_paged(
            stream.as_raw(),
            q.as_raw(),
            kv.k_pool.as_raw(),
            kv.v_pool.as_raw(),
            kv.block_table.as_raw(),
            kv.seq_lens.as_raw(),
            o.as_raw(),
            opt_raw(lse),
            &d,
            &pd,
        )
    })
}
