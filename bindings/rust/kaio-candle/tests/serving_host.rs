//! The serving wrappers' checks that need no GPU: CPU tensors and tensors
//! tracking gradients are refused naming the op and the fix (the paged
//! prefill's and rope_kv_cache_write's shape checks are unit tests in
//! src/attention_serving.rs and src/rope_kv_cache.rs), and
//! LogitsSampler::new picks candle-transformers' modes.
#![cfg(feature = "cuda")]

use candle_core::{DType, Device, Result, Tensor, Var};

fn zeros(dims: &[usize], dtype: DType) -> Result<Tensor> {
    Tensor::zeros(dims, dtype, &Device::Cpu)
}

fn refused(e: candle_core::Error, op: &str) {
    let e = e.to_string();
    assert!(e.contains(&format!("kaio-candle::{op}")) && e.contains("CUDA tensors only"), "{e}");
}

#[test]
fn cpu_tensors_are_refused_naming_the_op() -> Result<()> {
    let x = zeros(&[4, 8], DType::F32)?;
    let w = zeros(&[8], DType::F32)?;
    refused(kaio_candle::add_rmsnorm(&x, &x.copy()?, &w, 1e-6).unwrap_err(), "add_rmsnorm");
    refused(kaio_candle::layer_norm(&x, Some(&w), None, 1e-5).unwrap_err(), "layer_norm");
    let pos = Tensor::zeros(4, DType::I32, &Device::Cpu)?;
    let desc = kaio::RopeDesc { head_dim: 4, ..Default::default() };
    refused(kaio_candle::rope(&x, &x.copy()?, &pos, &desc).unwrap_err(), "rope");
    let q = zeros(&[2, 1, 4, 64], DType::F16)?;
    let kc = zeros(&[4, 16, 2, 64], DType::F16)?;
    let table = Tensor::zeros((2, 4), DType::I32, &Device::Cpu)?;
    let lens = Tensor::zeros(2, DType::I32, &Device::Cpu)?;
    refused(kaio_candle::paged_attention(&q, &kc, &kc, &table, &lens, 64, None, true).unwrap_err(), "paged_attention");
    let q = zeros(&[5, 4, 64], DType::F16)?;
    let cu = Tensor::new(&[0u32, 5][..], &Device::Cpu)?;
    refused(kaio_candle::flash_attn_varlen(&q, &q, &q, &cu, &cu, 5, 5, 0.125, true).unwrap_err(), "flash_attn_varlen");
    let cu3 = Tensor::new(&[0i32, 1, 5][..], &Device::Cpu)?;
    refused(
        kaio_candle::paged_attention_prefill(&q, &kc, &kc, &cu3, &table, &lens, 4, 64, None, true).unwrap_err(),
        "paged_attention_prefill",
    );
    let (q, k) = (zeros(&[3, 4, 64], DType::BF16)?, zeros(&[3, 2, 64], DType::BF16)?);
    let (pos, slots) = (Tensor::zeros(3, DType::I32, &Device::Cpu)?, Tensor::zeros(3, DType::I32, &Device::Cpu)?);
    let (kc, vc) = (zeros(&[2, 16, 2, 64], DType::BF16)?, zeros(&[2, 16, 2, 64], DType::BF16)?);
    let desc = kaio::RopeDesc::default();
    refused(
        kaio_candle::rope_kv_cache_write(&q, &k, &k.copy()?, &pos, &slots, &kc, &vc, &desc).unwrap_err(),
        "rope_kv_cache_write",
    );
    refused(kaio_candle::LogitsSampler::new(1, Some(1.0), Some(0.9)).sample(&x).unwrap_err(), "sample");
    refused(kaio_candle::LogitsSampler::new(1, None, None).sample_with(&x, None).unwrap_err(), "sample");
    Ok(())
}

#[test]
fn gradients_and_bad_shapes_are_refused_with_the_fix() -> Result<()> {
    let v = Var::from_tensor(&zeros(&[4, 8], DType::F32)?)?;
    let w = zeros(&[8], DType::F32)?;
    let e = kaio_candle::add_rmsnorm(v.as_tensor(), &zeros(&[4, 8], DType::F32)?, &w, 1e-6).unwrap_err().to_string();
    assert!(e.contains("'x' tracks gradients") && e.contains("x.detach()"), "{e}");
    let e = kaio_candle::layer_norm(&zeros(&[4, 8], DType::F32)?, Some(&w), Some(v.as_tensor()), 1e-5)
        .unwrap_err()
        .to_string();
    assert!(e.contains("'bias' tracks gradients"), "{e}");
    let q = Var::from_tensor(&zeros(&[5, 4, 64], DType::F16)?)?;
    let (kc, cu) = (zeros(&[4, 16, 2, 64], DType::F16)?, Tensor::new(&[0i32, 5][..], &Device::Cpu)?);
    let (table, lens) = (Tensor::zeros((1, 4), DType::I32, &Device::Cpu)?, Tensor::zeros(1, DType::I32, &Device::Cpu)?);
    let e = kaio_candle::paged_attention_prefill(q.as_tensor(), &kc, &kc, &cu, &table, &lens, 5, 64, None, true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("kaio-candle::paged_attention_prefill") && e.contains("'q' tracks gradients"), "{e}");
    // RoPE + cache write is forward only; the caches are written, not
    // differentiated.
    let (k, pos) = (zeros(&[5, 2, 64], DType::F16)?, Tensor::zeros(5, DType::I32, &Device::Cpu)?);
    let (tracked_kc, desc) = (Var::from_tensor(&kc)?, kaio::RopeDesc::default());
    let plain_q = q.as_tensor().detach();
    let e = kaio_candle::rope_kv_cache_write(&plain_q, &k, &k, &pos, &pos, tracked_kc.as_tensor(), &kc, &desc)
        .unwrap_err()
        .to_string();
    assert!(e.contains("kaio-candle::rope_kv_cache_write") && e.contains("'k_cache' tracks gradients"), "{e}");
    // The varlen forward takes tracked inputs (it has a backward): a CPU q
    // tracking gradients is refused as a CPU tensor, not for its gradient.
    let e = kaio_candle::flash_attn_varlen(q.as_tensor(), &plain_q, &plain_q, &cu, &cu, 5, 5, 0.125, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("kaio-candle::flash_attn_varlen") && e.contains("CUDA tensors only"), "{e}");
    let e =
        kaio_candle::LogitsSampler::new(1, None, None).sample(&zeros(&[2, 3, 4], DType::F32)?).unwrap_err().to_string();
    assert!(e.contains("kaio-candle::sample") && e.contains("[B, V] or [V]"), "{e}");
    // Penalties need the previous tokens, and a context needs penalties.
    let x = zeros(&[2, 8], DType::F32)?;
    let ctx = Tensor::zeros((2, 3), DType::U32, &Device::Cpu)?;
    let mut pen = kaio_candle::LogitsSampler::new(1, None, None).with_penalties(kaio_candle::Penalties::default());
    let e = pen.sample(&x).unwrap_err().to_string();
    assert!(e.contains("kaio-candle::sample") && e.contains("sample_with(logits, Some(&context))"), "{e}");
    let e = pen.sample_with(&x, None).unwrap_err().to_string();
    assert!(e.contains("pass the previous tokens"), "{e}");
    let e = kaio_candle::LogitsSampler::new(1, None, None).sample_with(&x, Some(&ctx)).unwrap_err().to_string();
    assert!(e.contains("no penalties") && e.contains("with_penalties"), "{e}");
    let e = pen.sample_with(&x, Some(&zeros(&[3, 3], DType::U32)?)).unwrap_err().to_string();
    assert!(e.contains("'context' has shape [3, 3] for 2 rows") && e.contains("expected [2, n]"), "{e}");
    Ok(())
}

#[test]
fn logits_sampler_new_picks_candle_transformers_modes() {
    let mode = |t, p| format!("{:?}", kaio_candle::LogitsSampler::new(3, t, p));
    assert!(mode(None, Some(0.9)).contains("ArgMax"));
    assert!(mode(Some(1e-8), None).contains("ArgMax"));
    assert!(mode(Some(0.7), None).contains("All { temperature: 0.7 }"));
    assert!(mode(Some(0.7), Some(0.9)).contains("TopP { p: 0.9, temperature: 0.7 }"));
    let m = format!("{:?}", kaio_candle::LogitsSampler::new(3, Some(1.0), None).with_min_p(0.05));
    assert!(m.contains("min_p: Some(0.05)"), "{m}");
}
