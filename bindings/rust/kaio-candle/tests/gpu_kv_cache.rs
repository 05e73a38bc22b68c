//! kaio-candle's paged KV-cache write on candle's CUDA tensors: rows land in
//! their slots (checked against candle's own index_select of the result),
//! padding slots write nothing, and a slot past the cache is reported by
//! kaio_candle::synchronize. Skipped, saying why, without a CUDA device.
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
