//! RoPE fused with the paged KV-cache write on candle tensors, in place: Q
//! rotated where it is, K rotated on its way into the K cache (K itself is
//! only read), V copied into the V cache, in one launch where
//! [`crate::rope`] then [`crate::kv_cache_write`] make four. Three tensors
//! are written, so the storages are locked by [`crate::locked`], not by one
//! of candle's in-place ops.
use candle_core::{bail, DType, Result, Tensor};

use crate::context::context;
use crate::error::KaioResultExt;
use crate::heads::token_heads;
use crate::layout::{self, Matrix};
use crate::locked::{with_locked, Access};
use crate::prep::forward_only;
use crate::rope::desc_key;
use crate::storage::{kaio_dtype, read, same_device, write, Arg};

const OP: &str = "rope_kv_cache_write";

/// The tensors in libkaio's launch order, and which of them are written.
const ARGS: [&str; 7] = ["q", "k", "v", "positions", "slot_mapping", "k_cache", "v_cache"];
const WRITTEN: [bool; 7] = [true, false, false, false, false, true, true];

/// What one call launches: the seven views (in [`ARGS`] order) and the
/// desc with the tensors' dtype, heads and head_dim.
#[derive(Debug)]
struct Plan {
    views: [Matrix; 7],
    desc: kaio::RopeDesc,
    tokens: usize,
}

/// Checks dtypes, shapes and layouts of `[q, k, v, positions,
/// slot_mapping, k_cache, v_cache]` (no device access).
fn plan(ts: [&Tensor; 7], desc: &kaio::RopeDesc) -> Result<Plan> {
    let [q, k, v, pos, slots, kc, vc] = ts;
    let dtype = q.dtype();
    layout::dtype(OP, "q", dtype, &[DType::F32, DType::F16, DType::BF16])?;
    for (arg, t) in [("k", k), ("v", v), ("k_cache", kc), ("v_cache", vc)] {
        if t.dtype() != dtype {
            bail!(
                "kaio-candle::{OP}: argument '{arg}' is {:?} but 'q' is {dtype:?}; q, k, v and the caches must \
                 share one dtype",
                t.dtype()
            )
        }
    }
    let hint = Some(desc.head_dim).filter(|&d| d != 0);
    let qh = token_heads(OP, "q", q.layout(), hint)?;
    let kh = token_heads(OP, "k", k.layout(), hint)?;
    let (tokens, d, hk) = (qh.m.rows, qh.head_dim, kh.heads);
    if kh.head_dim != d || kh.m.rows != tokens {
        bail!(
            "kaio-candle::{OP}: 'q' is {:?} ({tokens} tokens, head_dim {d}) but 'k' is {:?} ({} tokens, head_dim \
             {}); they must share the tokens and the head_dim",
            q.dims(),
            k.dims(),
            kh.m.rows,
            kh.head_dim
        )
    }
    // V and the caches: rows of k's Hk heads of D.
    let mut kv = [qh.m; 3];
    for (m, (arg, t)) in kv.iter_mut().zip([("v", v), ("k_cache", kc), ("v_cache", vc)]) {
        let h = token_heads(OP, arg, t.layout(), Some(d))?;
        if h.heads != hk {
            bail!(
                "kaio-candle::{OP}: '{arg}' is {:?}, {} heads of {d} a row, but 'k' has {hk}; V and the caches hold \
                 k's heads ([T, Hk, D] and [num_pages, page_size, Hk, D])",
                t.dims(),
                h.heads
            )
        }
        *m = h.m;
    }
    if kv[0].rows != tokens {
        bail!("kaio-candle::{OP}: 'v' is {:?} ({} tokens) but 'k' has {tokens}; they must match", v.dims(), kv[0].rows)
    }
    if kv[2].rows != kv[1].rows {
        bail!("kaio-candle::{OP}: 'v_cache' is {:?} but 'k_cache' is {:?}; they must match", vc.dims(), kc.dims())
    }
    let mut flat = [qh.m; 2];
    for (f, (arg, t)) in flat.iter_mut().zip([("positions", pos), ("slot_mapping", slots)]) {
        layout::dtype(OP, arg, t.dtype(), &[DType::I32])?;
        let m = layout::contiguous(OP, arg, t.layout())?;
        if m.rows * m.cols != tokens {
            bail!(
                "kaio-candle::{OP}: '{arg}' is {:?} for the {tokens} tokens of 'q' {:?}; give one I32 entry per \
                 token ([T], or [B, S] for [B, S, H, D])",
                t.dims(),
                q.dims()
            )
        }
        *f = Matrix { rows: 1, cols: tokens, row_stride: tokens, offset: m.offset };
    }
    let mut desc = *desc;
    desc.dtype = kaio_dtype(OP, dtype)?;
    desc.head_dim = d;
    (desc.heads_q, desc.heads_k) = (qh.heads, hk);
    Ok(Plan { views: [qh.m, kh.m, kv[0], flat[0], flat[1], kv[1], kv[2]], desc, tokens })
}

/// The launch, with every storage locked (`group[i]`: tensor i's storage).
fn launch(plan: &Plan, held: &mut [Access<'_>], group: &[usize]) -> Result<()> {
    let dev = {
        let first = held[group[0]].storage();
        for (i, arg) in ARGS.iter().enumerate().skip(1) {
            same_device(OP, first, held[group[i]].storage(), arg)?;
        }
        first.device.clone()
    };
    let ctx = context(&dev)?;
    let prepared = ctx.op((OP, desc_key(&plan.desc)), |d| kaio::Op::rope_kv_cache_write(d, &plan.desc))?;
    let stream = dev.cuda_stream();
    let args = held
        .iter_mut()
        .map(|a| match a {
            Access::Read(s) => read(&ctx, OP, s, &stream),
            Access::Write(s) => write(&ctx, OP, s, &stream),
        })
        .collect::<Result<Vec<Arg<'_>>>>()?;
    let views: Vec<kaio::TensorView<'_>> = (0..ARGS.len()).map(|i| args[group[i]].view(&plan.views[i])).collect();
    prepared.launch(&ctx.stream, &views).kaio(OP)
}

/// RoPE fused with the paged KV-cache write (vLLM's rotary embedding then
/// `reshape_and_cache`, in one pass), IN PLACE, nothing returned:
///
/// - `q` `[T, Hq·D]`, `[T, Hq, D]` or `[B, S, Hq, D]` is rotated where it
///   is, as [`crate::rope`] rotates it (a column range of a fused QKV output
///   rotates inside that output);
/// - `k` (likewise, Hk heads) is rotated on its way into `k_cache`: row t
///   goes to row `slot_mapping[t]` (K itself is only read; its dims past
///   `rotary_dim` are copied as they are);
/// - `v` `[T, Hk, D]` or `[T, Hk·D]` row t is copied to the same row of
///   `v_cache`.
///
/// q, k and v may be column ranges of one fused QKV output (Q is rotated
/// inside it while K and V are read from their columns).
///
/// The caches are `[num_pages, page_size, Hk, D]` as
/// [`crate::kv_cache_write`] and the paged attention ops take them (any
/// layout that folds into rows of Hk·D; the two may be views of one
/// storage, as halves of a `[2, num_pages, page_size, Hk, D]` tensor),
/// written where they are.
/// `positions` and `slot_mapping` are I32 with one entry per token (`[T]`,
/// or `[B, S]`); a negative slot skips the token's K and V (its Q is still
/// rotated), a slot past the caches is skipped and reported by the next
/// [`crate::synchronize`]. `desc` as for [`crate::rope`] (style,
/// rotary_dim, θ, scalings; dtype, heads and head_dim come from the tensors,
/// rank-2 q and k need `desc.head_dim`). One dtype for q, k, v and the
/// caches: f32, f16 or bf16; math in f32, rounded once: each stored value
/// is bit for bit what [`crate::rope`] then [`crate::kv_cache_write`] store.
/// V and the caches move as 16-byte vectors (16-byte aligned starts, rows
/// a multiple of 16 bytes apart and long), else libkaio's MISALIGNED error.
/// The caches must not overlap each other or an input, nor Q anything but
/// its neighbouring columns.
/// Forward only (a tensor tracking gradients is refused).
#[allow(clippy::too_many_arguments)]
pub fn rope_kv_cache_write(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    positions: &Tensor,
    slot_mapping: &Tensor,
    k_cache: &Tensor,
    v_cache: &Tensor,
    desc: &kaio::RopeDesc,
) -> Result<()> {
    for (arg, t) in ARGS.iter().zip([q, k, v, positions, slot_mapping, k_cache, v_cache]) {
        forward_only(OP, arg, t)?;
    }
    let ts = [q, k, v, positions, slot_mapping, k_cache, v_cache];
    let plan = plan(ts, desc)?;
    if plan.tokens == 0 {
        return Ok(());
    }
    let tensors: Vec<(&Tensor, bool)> = ts.into_iter().zip(WRITTEN).collect();
    with_locked(OP, &tensors, &mut |held, group| launch(&plan, held, group))
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    fn zeros(dims: &[usize], dtype: DType) -> Result<Tensor> {
        Tensor::zeros(dims, dtype, &Device::Cpu)
    }

    /// q, k, v, positions, slots, k_cache, v_cache of T tokens, Hq 4, Hk 2,
    /// D 64, pools of 3 pages of 16.
    fn args(t: usize, dtype: DType) -> Result<[Tensor; 7]> {
        let i32s = |n| zeros(&[n], DType::I32);
        Ok([
            zeros(&[t, 4, 64], dtype)?,
            zeros(&[t, 2, 64], dtype)?,
            zeros(&[t, 2, 64], dtype)?,
            i32s(t)?,
            i32s(t)?,
            zeros(&[3, 16, 2, 64], dtype)?,
            zeros(&[3, 16, 2, 64], dtype)?,
        ])
    }

    fn refs(a: &[Tensor; 7]) -> [&Tensor; 7] {
        std::array::from_fn(|i| &a[i])
    }

    #[test]
    fn plan_folds_pools_into_rows_and_takes_heads_from_the_tensors() -> Result<()> {
        let a = args(5, DType::BF16)?;
        let p = plan(refs(&a), &kaio::RopeDesc { heads_q: 99, ..Default::default() })?;
        assert_eq!((p.desc.heads_q, p.desc.heads_k, p.desc.head_dim, p.tokens), (4, 2, 64, 5));
        assert_eq!(p.desc.dtype, kaio::Dtype::Bf16);
        assert_eq!(p.views[0], Matrix { rows: 5, cols: 256, row_stride: 256, offset: 0 });
        assert_eq!(p.views[4], Matrix { rows: 1, cols: 5, row_stride: 5, offset: 0 });
        assert_eq!(p.views[6], Matrix { rows: 48, cols: 128, row_stride: 128, offset: 0 });
        // Q and K as column ranges of one fused QKV output.
        let qkv = zeros(&[5, 8, 64], DType::BF16)?;
        let (q, k, v) = (qkv.narrow(1, 0, 4)?, qkv.narrow(1, 4, 2)?, qkv.narrow(1, 6, 2)?);
        let p = plan([&q, &k, &v, &a[3], &a[4], &a[5], &a[6]], &kaio::RopeDesc::default())?;
        assert_eq!(p.views[1], Matrix { rows: 5, cols: 128, row_stride: 512, offset: 256 });
        Ok(())
    }

    #[test]
    fn bad_arguments_are_refused_naming_the_argument_and_the_fix() -> Result<()> {
        let a = args(5, DType::F16)?;
        let desc = kaio::RopeDesc::default();
        let with = |i: usize, t: &Tensor| -> String {
            let mut r = refs(&a);
            r[i] = t;
            plan(r, &desc).unwrap_err().to_string()
        };
        let e = with(1, &zeros(&[5, 2, 64], DType::BF16)?);
        assert!(e.contains("kaio-candle::rope_kv_cache_write") && e.contains("'k' is BF16"), "{e}");
        let e = with(0, &zeros(&[5, 4, 64], DType::U8)?);
        assert!(e.contains("'q' is U8"), "{e}");
        let e = with(1, &zeros(&[6, 2, 64], DType::F16)?);
        assert!(e.contains("share the tokens"), "{e}");
        let e = with(2, &zeros(&[5, 3, 64], DType::F16)?);
        assert!(e.contains("'v'") && e.contains("3 heads") && e.contains("'k' has 2"), "{e}");
        let e = with(2, &zeros(&[4, 2, 64], DType::F16)?);
        assert!(e.contains("'v' is [4, 2, 64] (4 tokens)"), "{e}");
        let e = with(6, &zeros(&[2, 16, 2, 64], DType::F16)?);
        assert!(e.contains("'v_cache' is [2, 16, 2, 64]") && e.contains("must match"), "{e}");
        let e = with(5, &zeros(&[3, 16, 2, 32], DType::F16)?);
        assert!(e.contains("'k_cache'") && e.contains("head_dim"), "{e}");
        let e = with(4, &Tensor::zeros(5, DType::U32, &Device::Cpu)?);
        assert!(e.contains("'slot_mapping' is U32") && e.contains("I32"), "{e}");
        let e = with(3, &Tensor::zeros(4, DType::I32, &Device::Cpu)?);
        assert!(e.contains("'positions' is [4]") && e.contains("one I32 entry per token"), "{e}");
        let e = with(0, &zeros(&[5, 256], DType::F16)?);
        assert!(e.contains("'q'") && e.contains("head_dim"), "{e}");
        // [B, H, S, D] transposed: the heads are not side by side.
        let e = with(0, &zeros(&[1, 4, 5, 64], DType::F16)?.transpose(1, 2)?);
        assert!(e.contains(".contiguous()"), "{e}");
        Ok(())
    }
}
