//! kaio-candle's paged KV-cache write on candle's CUDA tensors: rows land in
//! their slots (checked against candle's own index_select of the result),
//! padding slots write nothing, and a slot past the cache is reported by
//! kaio_candle::synchronize; RoPE fused with the write against rope then
//! kv_cache_write. Skipped, saying why, without a CUDA device.
#![cfg(feature = "cuda")]

use candle_core::{DType, Result, Tensor};

mod common;
use common::gpu;

#[test]
fn kv_cache_write_fills_slots_in_place() -> Result<()> {
    let Some(dev) = gpu("kv_cache_write_fills_slots_in_place") else { return Ok(()) };
    let (t, hkv, d, pages, page) = (6usize, 2usize, 64usize, 5usize, 16usize);
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let k = Tensor::randn(0f32, 1., (t, hkv, d), &dev)?.to_dtype(dtype)?;
        let v = Tensor::randn(0f32, 1., (t, hkv, d), &dev)?.to_dtype(dtype)?;
        let kc = Tensor::full(-3f32, (pages, page, hkv, d), &dev)?.to_dtype(dtype)?;
        let vc = Tensor::full(-3f32, (pages, page, hkv, d), &dev)?.to_dtype(dtype)?;
        let slots = [70i32, 3, -1, 16, 79, 40];
        let sm = Tensor::new(&slots[..], &dev)?;
        kaio_candle::kv_cache_write(&k, &v, &sm, &kc, &vc)?;
        kaio_candle::synchronize(&dev)?;
        let (kf, vf) = (kc.reshape((pages * page, hkv * d))?, vc.reshape((pages * page, hkv * d))?);
        for (i, &s) in slots.iter().enumerate() {
            if s < 0 {
                continue;
            }
            let want_k = k.get(i)?.flatten_all()?.to_dtype(DType::F32)?.to_vec1::<f32>()?;
            let want_v = v.get(i)?.flatten_all()?.to_dtype(DType::F32)?.to_vec1::<f32>()?;
            assert_eq!(kf.get(s as usize)?.to_dtype(DType::F32)?.to_vec1::<f32>()?, want_k, "{dtype:?} K slot {s}");
            assert_eq!(vf.get(s as usize)?.to_dtype(DType::F32)?.to_vec1::<f32>()?, want_v, "{dtype:?} V slot {s}");
        }
        // 5 of 80 rows written: the other 75 keep -3 in every element.
        let untouched = kf.to_dtype(DType::F32)?.eq(-3f64)?.to_dtype(DType::F32)?.sum_all()?.to_scalar::<f32>()?;
        assert_eq!(untouched as usize, (pages * page - 5) * hkv * d, "{dtype:?}: rows outside the slots changed");
    }
    // A slot past the 80-row cache: skipped, then reported once.
    let k = Tensor::randn(0f32, 1., (2, hkv * d), &dev)?;
    let kc = Tensor::zeros((pages * page, hkv * d), DType::F32, &dev)?;
    let sm = Tensor::new(&[1i32, 80][..], &dev)?;
    kc.inplace_op3(&k, &sm, &kaio_candle::KvCacheWrite)?;
    let e = kaio_candle::synchronize(&dev).unwrap_err().to_string();
    assert!(e.contains("slot_mapping[1]") && e.contains("80"), "{e}");
    kaio_candle::synchronize(&dev)?;
    // Wrong slot dtype: refused before launching, naming the fix.
    // (made as U32, not cast: candle 0.11 has no i32 -> u32 cast kernel)
    let su = Tensor::new(&[1u32, 80][..], &dev)?;
    let e = kaio_candle::kv_cache_write(&k, &k, &su, &kc, &kc).unwrap_err().to_string();
    assert!(e.contains("kaio-candle::kv_cache_write") && e.contains("slot_mapping"), "{e}");
    Ok(())
}

/// Every value of `t` as the bits of its exact f64.
fn bits(t: &Tensor) -> Result<Vec<u64>> {
    Ok(t.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?.into_iter().map(f64::to_bits).collect())
}

/// rope_kv_cache_write against rope then kv_cache_write on copies of the
/// same tensors: bit for bit (kaio.h: the fused op rotates as kaio_rope
/// does, math in f32 rounded once, and copies V as the cache write does;
/// tests/gpu_rope_kv_cache_test.cpp checks the same in C). Q, K and V are
/// column ranges of one fused QKV output (Q rotated inside it, K and V read
/// from their columns), every dtype, both styles, partial rotary, a padding slot;
/// then separate [B, S, H, D] tensors writing the two halves of one
/// combined cache (both written storages locked once), and a slot past the
/// caches reported by synchronize.
#[test]
fn rope_kv_cache_write_matches_rope_then_kv_cache_write() -> Result<()> {
    let Some(dev) = gpu("rope_kv_cache_write_matches_rope_then_kv_cache_write") else { return Ok(()) };
    let (t, hq, hk, d, pages, page) = (7usize, 4usize, 2usize, 64usize, 5usize, 16usize);
    let slots = Tensor::new(&[70i32, 3, -1, 16, 79, 40, 5][..], &dev)?;
    let positions = Tensor::new(&[0i32, 5, 17, 300, 1000, 2, 65535][..], &dev)?;
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        for (style, rotary_dim) in [(kaio::RopeStyle::HalfSplit, 0), (kaio::RopeStyle::Interleaved, 32)] {
            let what = format!("{dtype:?} {style:?} rotary_dim {rotary_dim}");
            let desc = kaio::RopeDesc { style, rotary_dim, theta: 500000.0, ..Default::default() };
            let qkv0 = Tensor::randn(0f32, 1., (t, hq + 2 * hk, d), &dev)?.to_dtype(dtype)?;
            let cache = || Tensor::full(-3f32, (pages, page, hk, d), &dev)?.to_dtype(dtype);
            let split = |x: &Tensor| -> Result<[Tensor; 3]> {
                Ok([x.narrow(1, 0, hq)?, x.narrow(1, hq, hk)?, x.narrow(1, hq + hk, hk)?])
            };
            // The two ops it fuses, on a copy.
            let want = qkv0.copy()?;
            let [q, k, v] = split(&want)?;
            let (kc_want, vc_want) = (cache()?, cache()?);
            kaio_candle::rope(&q, &k, &positions, &desc)?;
            kaio_candle::kv_cache_write(&k, &v, &slots, &kc_want, &vc_want)?;
            // The fused op.
            let got = qkv0.copy()?;
            let [q, k, v] = split(&got)?;
            let (kc, vc) = (cache()?, cache()?);
            kaio_candle::rope_kv_cache_write(&q, &k, &v, &positions, &slots, &kc, &vc, &desc)?;
            kaio_candle::synchronize(&dev)?;
            assert_eq!(bits(&q)?, bits(&want.narrow(1, 0, hq)?)?, "{what}: Q as rope leaves it");
            let kv_cols = |x: &Tensor| x.narrow(1, hq, 2 * hk);
            assert_eq!(bits(&kv_cols(&got)?)?, bits(&kv_cols(&qkv0)?)?, "{what}: K and V are only read");
            assert_eq!(bits(&kc)?, bits(&kc_want)?, "{what}: K cache");
            assert_eq!(bits(&vc)?, bits(&vc_want)?, "{what}: V cache");
            // The test can fail: the slots were written, with rotated K.
            let row = |c: &Tensor, s: usize| c.reshape((pages * page, hk * d))?.get(s);
            assert_ne!(bits(&row(&kc, 70)?)?, vec![(-3f64).to_bits(); hk * d], "{what}: slot 70 written");
            assert_ne!(bits(&row(&kc, 3)?)?, bits(&k.get(1)?.flatten_all()?)?, "{what}: K rotated (position 5)");
        }
    }
    // Separate tensors: q and k [B, S, H, D] with [B, S] positions and
    // slots, v [T, Hk·D]; the caches the halves of one [2, rows, Hk·D].
    let (b, s) = (1usize, t);
    let q0 = Tensor::randn(0f32, 1., (b, s, hq, d), &dev)?.to_dtype(DType::BF16)?;
    let k = Tensor::randn(0f32, 1., (b, s, hk, d), &dev)?.to_dtype(DType::BF16)?;
    let v = Tensor::randn(0f32, 1., (t, hk * d), &dev)?.to_dtype(DType::BF16)?;
    let (pos, sl) = (positions.reshape((b, s))?, slots.reshape((b, s))?);
    let flat_cache = || Tensor::zeros((pages * page, hk * d), DType::BF16, &dev);
    let desc = kaio::RopeDesc::default();
    let (q_want, k_want, kc_want, vc_want) = (q0.copy()?, k.copy()?, flat_cache()?, flat_cache()?);
    kaio_candle::rope(&q_want, &k_want, &pos, &desc)?;
    kaio_candle::kv_cache_write(&k_want.reshape((t, hk * d))?, &v, &slots, &kc_want, &vc_want)?;
    let (q, both) = (q0.copy()?, Tensor::zeros((2, pages * page, hk * d), DType::BF16, &dev)?);
    let (kc, vc) = (both.get(0)?, both.get(1)?);
    kaio_candle::rope_kv_cache_write(&q, &k, &v, &pos, &sl, &kc, &vc, &desc)?;
    kaio_candle::synchronize(&dev)?;
    assert_eq!(bits(&q)?, bits(&q_want)?, "[B, S, H, D] Q");
    assert_eq!(bits(&kc)?, bits(&kc_want)?, "K half of the combined cache");
    assert_eq!(bits(&vc)?, bits(&vc_want)?, "V half of the combined cache");
    // A slot past the 80-row caches: that token's K and V skipped, reported
    // once by synchronize.
    let past = Tensor::new(&[1i32, 80, 2, 3, 4, 5, 6][..], &dev)?;
    kaio_candle::rope_kv_cache_write(&q, &k, &v, &positions, &past, &kc, &vc, &desc)?;
    let e = kaio_candle::synchronize(&dev).unwrap_err().to_string();
    assert!(e.contains("slot_mapping[1]") && e.contains("80"), "{e}");
    kaio_candle::synchronize(&dev)?;
    // Host-side checks name the op and the argument (U32 made as such:
    // candle 0.11 has no i32 -> u32 cast kernel).
    let su = Tensor::new(&[1u32, 8, 2, 3, 4, 5, 6][..], &dev)?;
    let e = kaio_candle::rope_kv_cache_write(&q, &k, &v, &positions, &su, &kc, &vc, &desc).unwrap_err().to_string();
    assert!(e.contains("kaio-candle::rope_kv_cache_write") && e.contains("'slot_mapping' is U32"), "{e}");
    // One storage passed as both caches: libkaio refuses the overlap (one
    // lock taken, no deadlock).
    let e = kaio_candle::rope_kv_cache_write(&q, &k, &v, &positions, &slots, &kc, &kc, &desc).unwrap_err().to_string();
    assert!(e.contains("overlap"), "{e}");
    Ok(())
}
