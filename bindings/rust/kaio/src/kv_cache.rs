//! The paged KV cache (vLLM / FlashInfer layout): each layer's K and V cache
//! is `[num_pages, page_size, Hkv, D]`, viewed as `[num_pages · page_size,
//! Hkv · D]`; a token's slot is `page · page_size + offset`.
use std::ptr;

use kaio_sys as sys;

use crate::buffer::TensorView;
use crate::device::Device;
use crate::dtype::Dtype;
use crate::error::{check, Result};
use crate::ops::{dim, opt_raw, Op};
use crate::stream::Stream;

impl Op {
    /// Writes `tokens` new K (and V) rows of `width = Hkv · D` into caches of
    /// `cache_rows = num_pages · page_size` rows by a slot mapping. Launch
    /// tensors: `[k, v, slot_mapping (i32 1 x tokens), k_cache, v_cache]`;
    /// `v` and `v_cache` may both be [`TensorView::none`] (a K-only cache).
    /// A negative slot skips its token; a slot past the cache is skipped and
    /// reported by the next [`Stream::synchronize`] as `OUT_OF_BOUNDS`.
    pub fn kv_cache_write(device: &Device, dtype: Dtype, tokens: usize, width: usize, cache_rows: usize) -> Result<Op> {
        let mut p = ptr::null_mut();
        check(unsafe {
            sys::kaio_op_create_kv_cache_write(&mut p, device.as_raw(), dtype.raw(), dim(tokens), dim(width), dim(cache_rows))
        })?;
        Op::from_created(p, "kv_cache_write")
    }
}

/// One-shot KV-cache write (see [`Op::kv_cache_write`]): row `t` of `k`
/// goes to row `slot_mapping[t]` of `k_cache`, and likewise for `v` when the
/// cache has one (`v` and `v_cache` both `Some`, or both `None`).
pub fn kv_cache_write(
    stream: &Stream,
    k: &TensorView<'_>,
    v: Option<&TensorView<'_>>,
    slot_mapping: &TensorView<'_>,
    k_cache: &TensorView<'_>,
    v_cache: Option<&TensorView<'_>>,
) -> Result<()> {
    check(unsafe {
        sys::kaio_kv_cache_write(stream.as_raw(), k.as_raw(), opt_raw(v), slot_mapping.as_raw(), k_cache.as_raw(), opt_raw(v_cache))
    })
}
