//! The paged KV-cache write (vLLM's `reshape_and_cache`) into candle tensors,
//! in place. A cache is `[num_pages, page_size, Hkv, D]` (any leading dims
//! that fold into rows of `Hkv · D`); a token's slot is
//! `page · page_size + offset`.
use candle_core::{bail, CpuStorage, CudaStorage, DType, InplaceOp3, Layout, Result, Tensor};

use crate::context::context;
use crate::error::KaioResultExt;
use crate::layout;
use crate::storage::{kaio_dtype, read, same_device, write};

const OP: &str = "kv_cache_write";

/// Writes row `t` of the new rows into row `slot_mapping[t]` of the cache:
/// `cache.inplace_op3(&new, &slot_mapping, &KvCacheWrite)`.
pub struct KvCacheWrite;

impl InplaceOp3 for KvCacheWrite {
    fn name(&self) -> &'static str {
        "kaio-kv-cache-write"
    }

    fn cpu_fwd(&self, _: &mut CpuStorage, _: &Layout, _: &CpuStorage, _: &Layout, _: &CpuStorage, _: &Layout) -> Result<()> {
        crate::prep::no_cpu(OP)
    }

    fn cuda_fwd(
        &self,
        cache: &mut CudaStorage,
        cl: &Layout,
        new: &CudaStorage,
        nl: &Layout,
        slots: &CudaStorage,
        sl: &Layout,
    ) -> Result<()> {
        use candle_core::backend::BackendStorage;
        let (cd, nd, sd) = (cache.dtype(), new.dtype(), slots.dtype());
        layout::dtype(OP, "cache", cd, &[DType::F32, DType::F16, DType::BF16])?;
        if nd != cd {
            bail!("kaio-candle::{OP}: the new rows are {nd:?} but the cache is {cd:?}; they must match")
        }
        layout::dtype(OP, "slot_mapping", sd, &[DType::I32])?;
        same_device(OP, cache, new, "new rows")?;
        same_device(OP, cache, slots, "slot_mapping")?;
        let cm = layout::matrix(OP, "cache", cl)?;
        let nm = layout::matrix(OP, "new rows", nl)?;
        let sm = layout::contiguous(OP, "slot_mapping", sl)?;
        if nm.cols != cm.cols {
            bail!(
                "kaio-candle::{OP}: the new rows are {:?} ({} wide) but the cache is {:?} ({} wide); both \
                 must end in Hkv · D",
                nl.dims(),
                nm.cols,
                cl.dims(),
                cm.cols
            )
        }
        let tokens = sm.rows * sm.cols;
        if tokens != nm.rows {
            bail!("kaio-candle::{OP}: slot_mapping has {tokens} entries for {} new rows; give one slot per row", nm.rows)
        }
        if tokens == 0 {
            return Ok(());
        }
        let dev = cache.device.clone();
        let ctx = context(&dev)?;
        let stream = dev.cuda_stream();
        let kd = kaio_dtype(OP, cd)?;
        let n = read(&ctx, OP, new, &stream)?;
        let s = read(&ctx, OP, slots, &stream)?;
        let c = write(&ctx, OP, cache, &stream)?;
        let flat = layout::Matrix { rows: 1, cols: tokens, row_stride: tokens, offset: sm.offset };
        let (nv, sv, cv) = (n.view_as(&nm, kd), s.view_as(&flat, kaio::Dtype::I32), c.view_as(&cm, kd));
        kaio::kv_cache_write(&ctx.stream, &nv, None, &sv, &cv, None).kaio(OP)
    }
}

/// Writes `k` and `v` (`[T, Hkv, D]` or `[T, Hkv · D]`) into `k_cache` and
/// `v_cache` at the slots of `slot_mapping` (`[T]`, i32; a negative slot
/// skips its token). A slot past the cache is skipped and reported by the
/// next [`crate::synchronize`] of the device; candle's own syncs do not see
/// it.
pub fn kv_cache_write(k: &Tensor, v: &Tensor, slot_mapping: &Tensor, k_cache: &Tensor, v_cache: &Tensor) -> Result<()> {
    for (new, cache, names) in [(k, k_cache, ("k", "k_cache")), (v, v_cache, ("v", "v_cache"))] {
        let (rows, cache_rows) = token_rows(new, cache, names)?;
        rows_view(cache, cache_rows)?.inplace_op3(&rows_view(new, rows)?, slot_mapping, &KvCacheWrite)?;
    }
    Ok(())
}

/// `new` as [T, Hkv · D] and the cache's row count at that width. The
/// cache is written through a reshaped view of its own storage, so it must
/// be contiguous (a reshape of anything else would write a copy).
fn token_rows(new: &Tensor, cache: &Tensor, (n, c): (&str, &str)) -> Result<(usize, usize)> {
    let rows = new.dims().first().copied().unwrap_or(1);
    let width = if rows == 0 { 0 } else { new.elem_count() / rows };
    if width == 0 || cache.elem_count() % width != 0 {
        bail!(
            "kaio-candle::{OP}: '{n}' is {:?} ({width} elements a token) but '{c}' is {:?}; the cache's \
             last dims must hold whole tokens (Hkv · D)",
            new.dims(),
            cache.dims()
        )
    }
    if !cache.is_contiguous() {
        bail!(
            "kaio-candle::{OP}: '{c}' (shape {:?}, stride {:?}) is not contiguous; a cache is written in \
             place, so pass the contiguous cache tensor itself",
            cache.dims(),
            cache.stride()
        )
    }
    Ok((rows, cache.elem_count() / width))
}

fn rows_view(t: &Tensor, rows: usize) -> Result<Tensor> {
    t.reshape((rows, t.elem_count() / rows.max(1)))
}
