//! kaio-candle's serving ops on candle's own CUDA tensors, against candle's
//! own ops on the same tensors: add_rmsnorm / layer_norm against
//! candle-nn's rms_norm / layer_norm, rope against candle-nn's rope /
//! rope_i, paged / varlen / decode attention and the paged prefill against
//! a naive candle softmax(Q Kᵀ · scale + mask) V in f32 (the prefill's on
//! the CPU), and greedy sampling against
//! candle's argmax. Skipped, saying why, without a CUDA device.
#![cfg(feature = "cuda")]

use candle_core::{DType, Device, IndexOp, Result, Tensor, D};

mod common;
use common::{gpu, max_rel_tensors, to_f64};

fn f32_of(t: &Tensor) -> Result<Tensor> {
    t.to_dtype(DType::F32)
}

/// Relative tolerance of one rounding to `dtype` plus f32 math.
fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => 1e-5,
        DType::F16 => 2e-3,
        _ => 1.6e-2,
    }
}

#[test]
fn add_rmsnorm_and_layer_norm_match_candle_nn() -> Result<()> {
    let Some(dev) = gpu("add_rmsnorm_and_layer_norm_match_candle_nn") else { return Ok(()) };
    let (rows, cols) = (37usize, 1000usize);
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let x = Tensor::randn(0f32, 1., (rows, cols), &dev)?.to_dtype(dtype)?;
        let res0 = Tensor::randn(0f32, 1., (rows, cols), &dev)?.to_dtype(dtype)?;
        let w = Tensor::randn(1f32, 0.1, cols, &dev)?.to_dtype(dtype)?;
        let b = Tensor::randn(0f32, 0.1, cols, &dev)?.to_dtype(dtype)?;
        let res = res0.copy()?;
        let y = kaio_candle::add_rmsnorm(&x, &res, &w, 1e-6)?;
        // The residual, in place: candle's own add in the dtype (one rounding).
        // (Within one rounding: candle may add in the dtype, libkaio adds
        // in f32 and rounds once.)
        let e = max_rel_tensors(&res, &f32_of(&res0)?.add(&f32_of(&x)?)?)?;
        assert!(e < tol(dtype), "{dtype:?} residual: {e}");
        let want = candle_nn::ops::rms_norm(&f32_of(&res)?, &f32_of(&w)?, 1e-6)?;
        let e = max_rel_tensors(&y, &want)?;
        assert!(e < 2.0 * tol(dtype), "{dtype:?} add_rmsnorm: {e}");
        // LayerNorm with every combination of weight and bias.
        let (ones, zeros) = (Tensor::ones(cols, DType::F32, &dev)?, Tensor::zeros(cols, DType::F32, &dev)?);
        for (wo, bo) in [(Some(&w), Some(&b)), (Some(&w), None), (None, Some(&b)), (None, None)] {
            let got = kaio_candle::layer_norm(&x, wo, bo, 1e-5)?;
            let alpha = wo.map_or(Ok(ones.clone()), f32_of)?;
            let beta = bo.map_or(Ok(zeros.clone()), f32_of)?;
            let want = candle_nn::ops::layer_norm(&f32_of(&x)?, &alpha, &beta, 1e-5)?;
            let e = max_rel_tensors(&got, &want)?;
            assert!(e < 2.0 * tol(dtype), "{dtype:?} layer_norm w {} b {}: {e}", wo.is_some(), bo.is_some());
        }
    }
    // A strided x (a column range): the normed rows only.
    let wide = Tensor::randn(0f32, 1., (8, 96), &dev)?;
    let x = wide.narrow(1, 16, 64)?;
    let got = kaio_candle::layer_norm(&x, None, None, 1e-5)?;
    let want = candle_nn::ops::layer_norm(
        &x.contiguous()?,
        &Tensor::ones(64, DType::F32, &dev)?,
        &Tensor::zeros(64, DType::F32, &dev)?,
        1e-5,
    )?;
    assert!(max_rel_tensors(&got, &want)? < 1e-5);
    // Errors name the argument and the fix.
    let res = Tensor::zeros((4, 8), DType::F32, &dev)?;
    let e =
        kaio_candle::add_rmsnorm(&res.clone().to_dtype(DType::F16)?, &res, &Tensor::ones(8, DType::F32, &dev)?, 1e-6)
            .unwrap_err()
            .to_string();
    assert!(e.contains("kaio-candle::add_rmsnorm") && e.contains("'x' is F16"), "{e}");
    let e = kaio_candle::add_rmsnorm(&res.copy()?, &res, &Tensor::ones(7, DType::F32, &dev)?, 1e-6)
        .unwrap_err()
        .to_string();
    assert!(e.contains("'weight'") && e.contains("[8]"), "{e}");
    let e = kaio_candle::layer_norm(&res, None, None, -1.0).unwrap_err().to_string();
    assert!(e.contains("eps is -1"), "{e}");
    Ok(())
}

/// cos and sin `[S, D/2]` of candle-nn's rope at positions 0..S.
fn cos_sin(s: usize, d: usize, theta: f64, dev: &Device) -> Result<(Tensor, Tensor)> {
    let inv: Vec<f32> = (0..d / 2).map(|i| (1.0 / theta.powf(2.0 * i as f64 / d as f64)) as f32).collect();
    let mut c = Vec::new();
    let mut sn = Vec::new();
    for p in 0..s {
        for f in &inv {
            let a = p as f32 * f;
            c.push(a.cos());
            sn.push(a.sin());
        }
    }
    Ok((Tensor::from_vec(c, (s, d / 2), dev)?, Tensor::from_vec(sn, (s, d / 2), dev)?))
}

#[test]
fn rope_matches_candle_nn_rope_and_rope_i() -> Result<()> {
    let Some(dev) = gpu("rope_matches_candle_nn_rope_and_rope_i") else { return Ok(()) };
    let (b, s, hq, hk, d) = (2usize, 23usize, 4usize, 2usize, 64usize);
    let (cos, sin) = cos_sin(s, d, 10000.0, &dev)?;
    let pos: Vec<i32> = (0..b).flat_map(|_| 0..s as i32).collect();
    let positions = Tensor::from_vec(pos, (b, s), &dev)?;
    for (style, reference) in [
        (kaio::RopeStyle::HalfSplit, candle_nn::rotary_emb::rope as fn(&Tensor, &Tensor, &Tensor) -> Result<Tensor>),
        (kaio::RopeStyle::Interleaved, candle_nn::rotary_emb::rope_i),
    ] {
        for dtype in [DType::F32, DType::BF16] {
            let q0 = Tensor::randn(0f32, 1., (b, s, hq, d), &dev)?.to_dtype(dtype)?;
            let k0 = Tensor::randn(0f32, 1., (b, s, hk, d), &dev)?.to_dtype(dtype)?;
            let (q, k) = (q0.copy()?, k0.copy()?);
            let desc = kaio::RopeDesc { style, ..Default::default() };
            kaio_candle::rope(&q, &k, &positions, &desc)?;
            for (name, got, orig) in [("q", &q, &q0), ("k", &k, &k0)] {
                // candle-nn's takes [B, H, S, D]; same input values in f32.
                let want = reference(&f32_of(orig)?.transpose(1, 2)?.contiguous()?, &cos, &sin)?.transpose(1, 2)?;
                let e = max_rel_tensors(got, &want)?;
                assert!(e < 2.0 * tol(dtype) + 1e-5, "{style:?} {dtype:?} {name}: {e}");
            }
        }
    }
    // Q and K as column ranges of one fused [T, (Hq + 2·Hk)·D] output, as
    // [T, H, D] views: rotated inside it; V's columns untouched.
    let t = 9usize;
    let qkv = Tensor::randn(0f32, 1., (t, hq + 2 * hk, d), &dev)?;
    let before = qkv.copy()?;
    let (q, k) = (qkv.narrow(1, 0, hq)?, qkv.narrow(1, hq, hk)?);
    let positions = Tensor::arange(0i32, t as i32, &dev)?;
    kaio_candle::rope(&q, &k, &positions, &kaio::RopeDesc::default())?;
    let (cos, sin) = cos_sin(t, d, 10000.0, &dev)?;
    let want_q = candle_nn::rotary_emb::rope(
        &before.narrow(1, 0, hq)?.transpose(0, 1)?.contiguous()?.unsqueeze(0)?,
        &cos,
        &sin,
    )?
    .squeeze(0)?
    .transpose(0, 1)?;
    assert!(max_rel_tensors(&qkv.narrow(1, 0, hq)?, &want_q)? < 1e-5);
    assert_eq!(to_f64(&qkv.narrow(1, hq + hk, hk)?)?, to_f64(&before.narrow(1, hq + hk, hk)?)?, "V changed");
    // Rank 2 needs desc.head_dim; a wrong position count names the fix.
    let flat = Tensor::zeros((t, hq * d), DType::F32, &dev)?;
    let e = kaio_candle::rope(&flat, &flat.copy()?, &positions, &kaio::RopeDesc::default()).unwrap_err().to_string();
    assert!(e.contains("kaio-candle::rope") && e.contains("head_dim"), "{e}");
    let desc = kaio::RopeDesc { head_dim: d, ..Default::default() };
    kaio_candle::rope(&flat, &flat.copy()?, &positions, &desc)?;
    let e = kaio_candle::rope(&flat, &flat.copy()?, &positions.narrow(0, 0, 3)?, &desc).unwrap_err().to_string();
    assert!(e.contains("one I32 position per token"), "{e}");
    Ok(())
}

/// softmax(scale · q kᵀ + bottom-right causal mask) v in f32 for one
/// sequence: q `[Sq, Hq, D]`, k and v `[Sk, Hkv, D]` -> `[Sq, Hq, D]`.
fn naive(q: &Tensor, k: &Tensor, v: &Tensor, causal: bool) -> Result<Tensor> {
    let (sq, hq, d) = q.dims3()?;
    let (sk, hkv, _) = k.dims3()?;
    let g = hq / hkv;
    let heads = |t: &Tensor| -> Result<Tensor> {
        // [Sk, Hkv, D] -> [Hq, Sk, D], KV head h / g for query head h.
        let t = f32_of(t)?.transpose(0, 1)?.contiguous()?;
        t.unsqueeze(1)?.broadcast_as((hkv, g, sk, d))?.reshape((hq, sk, d))
    };
    let (kh, vh) = (heads(k)?, heads(v)?);
    let qh = f32_of(q)?.transpose(0, 1)?.contiguous()?;
    let mut s = (qh.matmul(&kh.t()?)? * (1.0 / (d as f64).sqrt()))?;
    if causal {
        let m: Vec<f32> = (0..sq)
            .flat_map(|i| (0..sk).map(move |j| if j + sq <= i + sk { 0.0 } else { f32::NEG_INFINITY }))
            .collect();
        s = s.broadcast_add(&Tensor::from_vec(m, (sq, sk), q.device())?)?;
    }
    candle_nn::ops::softmax_last_dim(&s)?.matmul(&vh)?.transpose(0, 1)
}

#[test]
fn decode_through_flash_attention_matches_naive() -> Result<()> {
    let Some(dev) = gpu("decode_through_flash_attention_matches_naive") else { return Ok(()) };
    // AUTO takes libkaio's split-key decode kernels for Sq <= 16 (kaio.h).
    let (b, sk, hq, hkv, d) = (2usize, 300usize, 8usize, 2usize, 128usize);
    for sq in [1usize, 16] {
        for dtype in [DType::F16, DType::BF16] {
            let q = Tensor::rand(-1f32, 1., (b, sq, hq, d), &dev)?.to_dtype(dtype)?;
            let k = Tensor::rand(-1f32, 1., (b, sk, hkv, d), &dev)?.to_dtype(dtype)?;
            let v = Tensor::rand(-1f32, 1., (b, sk, hkv, d), &dev)?.to_dtype(dtype)?;
            let o = kaio_candle::flash_attention(&q, &k, &v, true, None)?;
            for i in 0..b {
                let want = naive(&q.i(i)?, &k.i(i)?, &v.i(i)?, true)?;
                let e = max_rel_tensors(&o.i(i)?, &want)?;
                assert!(e < 4.0 * tol(dtype), "Sq {sq} {dtype:?} batch {i}: {e}");
            }
        }
    }
    Ok(())
}

#[test]
fn paged_attention_matches_naive_on_kv_cache_write_pages() -> Result<()> {
    let Some(dev) = gpu("paged_attention_matches_naive_on_kv_cache_write_pages") else { return Ok(()) };
    let (hq, hkv, d, page, pages) = (8usize, 2usize, 128usize, 16usize, 12usize);
    let lens = [37usize, 70];
    let max_pages = 5usize;
    // Sequence b's pages, scattered over the pool.
    let table: Vec<i32> = vec![7, 2, 9, 0, 0, 4, 11, 1, 3, 6];
    let block_table = Tensor::from_vec(table.clone(), (2, max_pages), &dev)?;
    for dtype in [DType::F16, DType::BF16] {
        let kc = Tensor::zeros((pages, page, hkv, d), dtype, &dev)?;
        let vc = Tensor::zeros((pages, page, hkv, d), dtype, &dev)?;
        let mut seqs = Vec::new();
        for (b, &len) in lens.iter().enumerate() {
            let k = Tensor::rand(-1f32, 1., (len, hkv, d), &dev)?.to_dtype(dtype)?;
            let v = Tensor::rand(-1f32, 1., (len, hkv, d), &dev)?.to_dtype(dtype)?;
            let slots: Vec<i32> =
                (0..len).map(|t| table[b * max_pages + t / page] * page as i32 + (t % page) as i32).collect();
            kaio_candle::kv_cache_write(&k, &v, &Tensor::new(slots.as_slice(), &dev)?, &kc, &vc)?;
            seqs.push((k, v));
        }
        let seq_lens = Tensor::new(&lens.map(|l| l as i32)[..], &dev)?;
        for sq in [1usize, 4] {
            let q = Tensor::rand(-1f32, 1., (2, sq, hq, d), &dev)?.to_dtype(dtype)?;
            let o = kaio_candle::paged_attention(&q, &kc, &vc, &block_table, &seq_lens, max_pages * page, None, true)?;
            kaio_candle::synchronize(&dev)?;
            for (b, (k, v)) in seqs.iter().enumerate() {
                let want = naive(&q.i(b)?, k, v, true)?;
                let e = max_rel_tensors(&o.i(b)?, &want)?;
                assert!(e < 4.0 * tol(dtype), "Sq {sq} {dtype:?} seq {b}: {e}");
            }
        }
    }
    // A length past max_seq_len: NaN rows, reported by synchronize.
    let kc = Tensor::zeros((pages, page, hkv, d), DType::F16, &dev)?;
    let q = Tensor::zeros((2, 1, hq, d), DType::F16, &dev)?;
    let bad = Tensor::new(&[10i32, 500][..], &dev)?;
    kaio_candle::paged_attention(&q, &kc, &kc, &block_table, &bad, 80, None, false)?;
    let e = kaio_candle::synchronize(&dev).unwrap_err().to_string();
    assert!(e.contains("500"), "{e}");
    kaio_candle::synchronize(&dev)?;
    let e = kaio_candle::paged_attention(&q, &kc, &kc, &block_table, &bad, 81, None, false).unwrap_err().to_string();
    assert!(e.contains("max_seq_len is 81") && e.contains("<= 80"), "{e}");
    Ok(())
}

/// Chunked prefill over a paged cache: new rows 0, 1 and 7 against caches
/// of 5, 33 and 1 tokens (seq_lens 5, 34, 8, the new rows included), GQA
/// 4:1, D 64, pages of 16 out of order in a pool whose other slots hold
/// garbage (±50); each sequence against the naive f32 attention on the CPU
/// of its own keys, causal and not, I32 and U32 indices.
#[test]
fn paged_attention_prefill_matches_naive_per_sequence() -> Result<()> {
    let Some(dev) = gpu("paged_attention_prefill_matches_naive_per_sequence") else { return Ok(()) };
    let (hq, hkv, d, page, pages, max_pages) = (8usize, 2usize, 64usize, 16usize, 8usize, 3usize);
    let (lq, lk) = ([0usize, 1, 7], [5usize, 34, 8]);
    // Pages 0, 3 and 5 are spare; entries past a sequence's pages point at 5.
    let table: Vec<i32> = vec![6, 5, 5, 2, 7, 4, 1, 5, 5];
    let cu: Vec<i32> = vec![0, 0, 1, 8];
    let total_q = 8;
    let cpu = Device::Cpu;
    for dtype in [DType::F16, DType::BF16] {
        let kc = Tensor::rand(-50f32, 50., (pages, page, hkv, d), &dev)?.to_dtype(dtype)?;
        let vc = Tensor::rand(-50f32, 50., (pages, page, hkv, d), &dev)?.to_dtype(dtype)?;
        let mut seqs = Vec::new();
        for (b, &len) in lk.iter().enumerate() {
            let k = Tensor::rand(-1f32, 1., (len, hkv, d), &dev)?.to_dtype(dtype)?;
            let v = Tensor::rand(-1f32, 1., (len, hkv, d), &dev)?.to_dtype(dtype)?;
            let slots: Vec<i32> =
                (0..len).map(|t| table[b * max_pages + t / page] * page as i32 + (t % page) as i32).collect();
            kaio_candle::kv_cache_write(&k, &v, &Tensor::new(slots.as_slice(), &dev)?, &kc, &vc)?;
            seqs.push((k.to_device(&cpu)?, v.to_device(&cpu)?));
        }
        let q = Tensor::rand(-1f32, 1., (total_q, hq, d), &dev)?.to_dtype(dtype)?;
        let q_cpu = q.to_device(&cpu)?;
        let i32s = (
            Tensor::new(cu.as_slice(), &dev)?,
            Tensor::from_vec(table.clone(), (3, max_pages), &dev)?,
            Tensor::new(&lk.map(|l| l as i32)[..], &dev)?,
        );
        let u32 = |v: &[i32]| v.iter().map(|&x| x as u32).collect::<Vec<u32>>();
        let u32s = (
            Tensor::new(u32(&cu).as_slice(), &dev)?,
            Tensor::from_vec(u32(&table), (3, max_pages), &dev)?,
            Tensor::new(&lk.map(|l| l as u32)[..], &dev)?,
        );
        for ((cu_t, bt, lens), name) in [(i32s, "i32"), (u32s, "u32")] {
            for causal in [true, false] {
                let o = kaio_candle::paged_attention_prefill(&q, &kc, &vc, &cu_t, &bt, &lens, 7, max_pages * page, None, causal)?;
                kaio_candle::synchronize(&dev)?;
                assert_eq!(o.dims(), [total_q, hq, d]);
                for (b, (k, v)) in seqs.iter().enumerate() {
                    if lq[b] == 0 {
                        continue;
                    }
                    let rows = cu[b] as usize;
                    let want = naive(&q_cpu.narrow(0, rows, lq[b])?, k, v, causal)?;
                    let e = max_rel_tensors(&o.narrow(0, rows, lq[b])?, &want)?;
                    assert!(e < 4.0 * tol(dtype), "{dtype:?} causal {causal} {name} seq {b}: {e}");
                }
            }
        }
    }
    // A length past max_seq_len: NaN rows, reported by synchronize; the
    // host-side bound on max_seq_len names the fix.
    let kc = Tensor::zeros((pages, page, hkv, d), DType::F16, &dev)?;
    let q = Tensor::zeros((total_q, hq, d), DType::F16, &dev)?;
    let (cu_t, bt) = (Tensor::new(cu.as_slice(), &dev)?, Tensor::from_vec(table.clone(), (3, max_pages), &dev)?);
    let bad = Tensor::new(&[5i32, 34, 500][..], &dev)?;
    let o = kaio_candle::paged_attention_prefill(&q, &kc, &kc, &cu_t, &bt, &bad, 7, 48, None, true)?;
    let e = kaio_candle::synchronize(&dev).unwrap_err().to_string();
    assert!(e.contains("500"), "{e}");
    kaio_candle::synchronize(&dev)?;
    // Sequence 1 is row 0, sequence 2 (the bad length) rows 1 to 7.
    assert!(to_f64(&o.narrow(0, 0, 1)?)?.iter().all(|x| x.is_finite()), "sequence 1 must be unaffected");
    assert!(to_f64(&o.narrow(0, 1, 7)?)?.iter().all(|x| x.is_nan()), "the bad sequence's rows must be NaN");
    let e = kaio_candle::paged_attention_prefill(&q, &kc, &kc, &cu_t, &bt, &bad, 7, 49, None, true).unwrap_err().to_string();
    assert!(e.contains("kaio-candle::paged_attention_prefill") && e.contains("max_seq_len is 49") && e.contains("<= 48"), "{e}");
    Ok(())
}

#[test]
fn flash_attn_varlen_matches_naive_per_sequence() -> Result<()> {
    let Some(dev) = gpu("flash_attn_varlen_matches_naive_per_sequence") else { return Ok(()) };
    let (hq, hkv, d) = (4usize, 2usize, 64usize);
    let (lq, lk) = ([3usize, 1, 40], [7usize, 5, 40]);
    let cu = |l: &[usize]| -> Vec<u32> {
        std::iter::once(0)
            .chain(l.iter().scan(0u32, |a, &x| {
                *a += x as u32;
                Some(*a)
            }))
            .collect()
    };
    let (cq, ck) = (cu(&lq), cu(&lk));
    let (tq, tk) = (*cq.last().unwrap() as usize, *ck.last().unwrap() as usize);
    for dtype in [DType::F16, DType::BF16] {
        let q = Tensor::rand(-1f32, 1., (tq, hq, d), &dev)?.to_dtype(dtype)?;
        let k = Tensor::rand(-1f32, 1., (tk, hkv, d), &dev)?.to_dtype(dtype)?;
        let v = Tensor::rand(-1f32, 1., (tk, hkv, d), &dev)?.to_dtype(dtype)?;
        for causal in [false, true] {
            let as_i32 = |c: &[u32]| c.iter().map(|&x| x as i32).collect::<Vec<i32>>();
            let u32s = (Tensor::new(cq.as_slice(), &dev)?, Tensor::new(ck.as_slice(), &dev)?);
            let i32s = (Tensor::new(as_i32(&cq).as_slice(), &dev)?, Tensor::new(as_i32(&ck).as_slice(), &dev)?);
            for ((sq, sk), name) in [(u32s, "u32"), (i32s, "i32")] {
                let scale = 1.0 / (d as f32).sqrt();
                let o = kaio_candle::flash_attn_varlen(&q, &k, &v, &sq, &sk, 40, 40, scale, causal)?;
                for b in 0..3 {
                    let (q0, k0) = (cq[b] as usize, ck[b] as usize);
                    let want =
                        naive(&q.narrow(0, q0, lq[b])?, &k.narrow(0, k0, lk[b])?, &v.narrow(0, k0, lk[b])?, causal)?;
                    let e = max_rel_tensors(&o.narrow(0, q0, lq[b])?, &want)?;
                    assert!(e < 4.0 * tol(dtype), "{dtype:?} causal {causal} {name} seq {b}: {e}");
                }
            }
        }
    }
    Ok(())
}

#[test]
fn sampling_matches_argmax_and_candle_semantics() -> Result<()> {
    let Some(dev) = gpu("sampling_matches_argmax_and_candle_semantics") else { return Ok(()) };
    let (b, v) = (6usize, 3000usize);
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        // One clear maximum a row (1 above the rest, more than a bf16 step
        // there): libkaio's lowest-index and candle's last-index tie rules
        // then agree.
        let mut rows = Tensor::randn(0f32, 3., (b, v), &dev)?.to_vec2::<f32>()?;
        for (r, row) in rows.iter_mut().enumerate() {
            let top = row.iter().cloned().fold(f32::MIN, f32::max);
            row[(r * 977 + 13) % v] = top + 1.0;
        }
        let logits = Tensor::new(rows, &dev)?.to_dtype(dtype)?;
        let want = logits.argmax(D::Minus1)?.to_vec1::<u32>()?;
        assert_eq!(want, (0..b).map(|r| ((r * 977 + 13) % v) as u32).collect::<Vec<_>>());
        let mut greedy = kaio_candle::LogitsSampler::new(1, None, None);
        let got = greedy.sample(&logits)?;
        assert_eq!(got.dims(), [b]);
        assert_eq!(got.dtype(), DType::U32);
        assert_eq!(got.to_vec1::<u32>()?, want, "{dtype:?} greedy");
        // top-k 1 and a tiny top-p leave only the argmax.
        for s in [
            kaio_candle::Sampling::TopK { k: 1, temperature: 0.7 },
            kaio_candle::Sampling::TopP { p: 1e-6, temperature: 1.0 },
        ] {
            let got = kaio_candle::LogitsSampler::from_sampling(5, s).sample(&logits)?.to_vec1::<u32>()?;
            assert_eq!(got, want, "{dtype:?} {s:?}");
        }
        let got =
            kaio_candle::LogitsSampler::new(5, Some(1.0), None).with_min_p(1.0).sample(&logits)?.to_vec1::<u32>()?;
        assert_eq!(got, want, "{dtype:?} min_p 1");
    }
    // One row as [V].
    let row = Tensor::new(&[0f32, 5., 1.][..], &dev)?;
    assert_eq!(kaio_candle::LogitsSampler::new(0, None, None).sample(&row)?.to_vec1::<u32>()?, [1]);
    // top-k 5: every draw among each row's 5 largest; same seed, same draws.
    let logits = Tensor::randn(0f32, 1., (b, v), &dev)?;
    let mut s1 = kaio_candle::LogitsSampler::from_sampling(42, kaio_candle::Sampling::TopK { k: 5, temperature: 2.0 });
    let mut s2 = s1.clone();
    let rows = logits.to_vec2::<f32>()?;
    for _ in 0..4 {
        let (a, c) = (s1.sample(&logits)?.to_vec1::<u32>()?, s2.sample(&logits)?.to_vec1::<u32>()?);
        assert_eq!(a, c, "same seed, same tokens");
        for (r, &t) in a.iter().enumerate() {
            let above = rows[r].iter().filter(|&&x| x > rows[r][t as usize]).count();
            assert!(above < 5, "row {r}: token {t} is not in the top 5");
        }
    }
    // Frequencies: two tokens with p = 0.2 / 0.8, 4000 rows.
    let n = 4000usize;
    let pair = Tensor::new(&[0.2f32.ln(), 0.8f32.ln()][..], &dev)?.unsqueeze(0)?.broadcast_as((n, 2))?.contiguous()?;
    let toks = kaio_candle::LogitsSampler::new(7, Some(1.0), None).sample(&pair)?.to_vec1::<u32>()?;
    let ones = toks.iter().filter(|&&t| t == 1).count() as f64 / n as f64;
    assert!((ones - 0.8).abs() < 5.0 * (0.16f64 / n as f64).sqrt(), "p(1) = {ones}");
    Ok(())
}

/// LogitsSampler keeps its per-row tensors on the device and advances the
/// RNG words there (one add a call): a sampler whose batch size alternates
/// (its words made afresh on the host every call) draws, row for row, what
/// one with a fixed batch draws at the same step, and the steps differ.
#[test]
fn logits_sampler_device_rng_matches_fresh_words() -> Result<()> {
    let Some(dev) = gpu("logits_sampler_device_rng_matches_fresh_words") else { return Ok(()) };
    let logits = Tensor::randn(0f32, 2., (5, 3000), &dev)?;
    let mode = kaio_candle::Sampling::TopK { k: 50, temperature: 1.5 };
    let (mut kept, mut fresh) = (kaio_candle::LogitsSampler::from_sampling(9, mode), kaio_candle::LogitsSampler::from_sampling(9, mode));
    let mut seen = Vec::new();
    for step in 0..6 {
        let a = kept.sample(&logits)?.to_vec1::<u32>()?;
        let rows = if step % 2 == 0 { 4 } else { 5 };
        let b = fresh.sample(&logits.narrow(0, 0, rows)?)?.to_vec1::<u32>()?;
        assert_eq!(&a[..rows], &b[..], "step {step}");
        seen.push(a);
    }
    assert!(seen.windows(2).any(|w| w[0] != w[1]), "every step drew the same tokens: the offset does not advance");
    Ok(())
}

/// A row's logits after libkaio's penalties (kaio.h, "Token sampling"):
/// repetition on each distinct previous token, then presence + frequency ·
/// count; ids outside the vocabulary ignored.
fn penalised(row: &[f32], prev: &[u32], p: kaio_candle::Penalties) -> Vec<f64> {
    let mut x: Vec<f64> = row.iter().map(|&v| v as f64).collect();
    let mut count = vec![0usize; row.len()];
    for &t in prev {
        if (t as usize) < row.len() {
            count[t as usize] += 1;
        }
    }
    for (t, &c) in count.iter().enumerate() {
        if c > 0 {
            let r = p.repetition as f64;
            x[t] = if x[t] > 0.0 { x[t] / r } else { x[t] * r };
            x[t] -= p.presence as f64 + p.frequency as f64 * c as f64;
        }
    }
    x
}

#[test]
fn sampling_penalties_and_probabilities_match_a_cpu_reference() -> Result<()> {
    let Some(dev) = gpu("sampling_penalties_and_probabilities_match_a_cpu_reference") else { return Ok(()) };
    let (b, v, n) = (5usize, 257usize, 9usize);
    let pen = kaio_candle::Penalties { repetition: 1.7, presence: 0.3, frequency: 0.25 };
    let logits = Tensor::randn(0f32, 2., (b, v), &dev)?;
    let rows = logits.to_vec2::<f32>()?;
    // Each row's context: its own argmax (so the penalty moves the greedy
    // choice), repeats, and an id past the vocabulary.
    let mut ctx = Vec::new();
    for row in &rows {
        let top = (0..v).fold(0, |m, i| if row[i] > row[m] { i } else { m }) as u32;
        ctx.extend([top, top, 3, 7, 7, 7, 100, v as u32 + 5, top]);
    }
    let context = Tensor::from_vec(ctx.clone(), (b, n), &dev)?;
    let refs: Vec<Vec<f64>> = (0..b).map(|r| penalised(&rows[r], &ctx[r * n..(r + 1) * n], pen)).collect();
    // Greedy: the penalised argmax (lowest index on ties), probability 1.
    let mut greedy = kaio_candle::LogitsSampler::new(3, None, None).with_penalties(pen);
    let got = greedy.sample_with(&logits, Some(&context))?;
    let want: Vec<u32> =
        refs.iter().map(|x| (0..v).fold(0, |m, i| if x[i] > x[m] { i } else { m }) as u32).collect();
    assert_eq!(got.tokens.to_vec1::<u32>()?, want);
    assert_eq!(got.probs.to_vec1::<f32>()?, vec![1.0; b]);
    assert_eq!(got.logprobs.to_vec1::<f32>()?, vec![0.0; b]);
    // Sampled at T 0.8: each token's probability is softmax(x / T)[token]
    // of the penalised row; f32 math over V terms: 4 V ulps relative, and
    // the same absolute on its log.
    let t = 0.8f64;
    let tol = 4.0 * v as f64 * f64::powi(2.0, -24);
    let mut s = kaio_candle::LogitsSampler::new(11, Some(t), None).with_penalties(pen);
    for _ in 0..3 {
        let got = s.sample_with(&logits, Some(&context))?;
        let (toks, probs, lps) = (got.tokens.to_vec1::<u32>()?, got.probs.to_vec1::<f32>()?, got.logprobs.to_vec1::<f32>()?);
        for r in 0..b {
            let m = refs[r].iter().cloned().fold(f64::MIN, f64::max);
            let z: f64 = refs[r].iter().map(|x| ((x - m) / t).exp()).sum();
            let p = ((refs[r][toks[r] as usize] - m) / t).exp() / z;
            assert!(((probs[r] as f64) - p).abs() <= tol * p, "row {r}: prob {} vs {p}", probs[r]);
            assert!(((lps[r] as f64) - p.ln()).abs() <= tol, "row {r}: logprob {} vs {}", lps[r], p.ln());
        }
    }
    // A [V] row with a [n] context; an empty context penalises nothing.
    let row = Tensor::new(&[0f32, 5., 4.5][..], &dev)?;
    let mut g = kaio_candle::LogitsSampler::new(0, None, None)
        .with_penalties(kaio_candle::Penalties { repetition: 2.0, ..Default::default() });
    assert_eq!(g.sample_with(&row, Some(&Tensor::new(&[1u32][..], &dev)?))?.tokens.to_vec1::<u32>()?, [2]);
    let empty = Tensor::zeros((1, 0), DType::U32, &dev)?;
    assert_eq!(g.sample_with(&row, Some(&empty))?.tokens.to_vec1::<u32>()?, [1]);
    Ok(())
}
