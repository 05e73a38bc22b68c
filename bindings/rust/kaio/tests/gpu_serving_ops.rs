//! GPU tests of the serving ops' wrappers against small f64 CPU references
//! from the same rounded inputs, outputs poisoned (NaN) first. They skip,
//! saying why, without a real device. Tolerances (relative Frobenius error
//! unless stated), from kaio.h and the library's tests/gpu_*_test.cpp:
//!   add_rmsnorm (f32): 2e-5 (f32 sums, error ~2^-22·√cols); the updated
//!     residual equals f32(residual + x) exactly;
//!   layernorm (f32, inputs 3 ± 1): 5e-5 (the f32 mean's error scales
//!     with the offset over the spread);
//!   rope (f32, half split): per element 1e-6 + 3.6e-7·pos absolute (the
//!     f32 angle is off by up to 2^-23·pos·inv_freq, cos/sin by 1e-7);
//!     elements past rotary_dim, and columns outside Q and K, unchanged;
//!   decode / paged attention (bf16): O 1.2e-2, LSE 2e-3 absolute;
//!   varlen attention (f16): O 2e-3, LSE 2e-3 absolute;
//!   paged prefill: O f16 2e-3, bf16 1.2e-2 (one rounding of O and of P
//!     before P·V: 2^-11 / 2^-8 per element, averaged over the keys), LSE
//!     2e-3 absolute (f32 sums of exact products);
//!   sampling: exact tokens; top-k 1 probability 1 and log-probability 0
//!     within 1e-6; with penalties, greedy tokens exact on rows built with
//!     clear margins, a sampled row's probability within 1e-4 relative of
//!     the f64 softmax of the f32-penalised, tempered, top-k-kept logits
//!     (ex2/lg2.approx and f32 sums: ~1e-6), its log-probability 1e-4.
mod common;

use common::gpu_env::{f16s, gpu, rel_error, uniform, wide, Rng};
use kaio::{
    AttentionDesc, AttentionMask, AttentionPagedDesc, AttentionVariant, AttentionVarlenDesc, Bf16, Buffer, Device, Dtype, Element,
    Op, PagedKv, RopeDesc, SamplingDesc, SamplingFeatures, SamplingViews, Stream, TensorView,
};

macro_rules! gpu_or_return {
    ($name:expr) => {
        match gpu($name) {
            Some(d) => d,
            None => return,
        }
    };
}

fn bf16s(v: &[f64]) -> Vec<Bf16> {
    v.iter().map(|&x| Bf16::from_f32(x as f32)).collect()
}
fn wide_bf16(v: &[Bf16]) -> Vec<f64> {
    v.iter().map(|x| x.to_f32() as f64).collect()
}
fn f32s(v: &[f64]) -> Vec<f32> {
    v.iter().map(|&x| x as f32).collect()
}
fn wide_f32(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

#[test]
fn gpu_add_rmsnorm_f32() {
    let dev = gpu_or_return!("gpu_add_rmsnorm_f32");
    let s = Stream::non_blocking(&dev).unwrap();
    let mut rng = Rng::new("gpu_add_rmsnorm_f32");
    let (r, c, eps) = (5, 1000, 1e-6f32);
    let x = f32s(&uniform(&mut rng, r * c, -1.0, 1.0));
    let res = f32s(&uniform(&mut rng, r * c, -2.0, 2.0));
    let w = f32s(&uniform(&mut rng, c, 0.5, 1.5));
    // The residual is rounded to f32 once; the norm is taken of that value.
    let new_res: Vec<f32> = res.iter().zip(&x).map(|(a, b)| a + b).collect();
    let mut want = vec![0.0f64; r * c];
    for i in 0..r {
        let row = &new_res[i * c..(i + 1) * c];
        let ms: f64 = row.iter().map(|&v| (v as f64) * (v as f64)).sum::<f64>() / c as f64;
        let inv = 1.0 / (ms + eps as f64).sqrt();
        for j in 0..c {
            want[i * c + j] = row[j] as f64 * inv * w[j] as f64;
        }
    }
    let (xb, wb) = (Buffer::from_slice(&dev, &x).unwrap(), Buffer::from_slice(&dev, &w).unwrap());
    let op = Op::add_rmsnorm(&dev, Dtype::F32, r, c, eps).unwrap();
    for &prepared in &[true, false] {
        let rb = Buffer::from_slice(&dev, &res).unwrap();
        let out = Buffer::from_slice(&dev, &vec![f32::NAN; r * c]).unwrap();
        let (xv, rv, wv, ov) = (xb.view(r, c), rb.view(r, c), wb.view(1, c), out.view(r, c));
        if prepared {
            op.launch(&s, &[xv, rv, wv, ov]).unwrap();
        } else {
            kaio::add_rmsnorm(&s, &xv, &rv, &wv, &ov, eps).unwrap();
        }
        s.synchronize().unwrap();
        assert_eq!(rb.to_vec().unwrap(), new_res, "residual (prepared {})", prepared);
        rel_error(&format!("add_rmsnorm f32 (prepared {})", prepared), &wide_f32(&out.to_vec().unwrap()), &want, 2e-5);
    }
}

#[test]
fn gpu_layernorm_f32() {
    let dev = gpu_or_return!("gpu_layernorm_f32");
    let s = Stream::non_blocking(&dev).unwrap();
    let mut rng = Rng::new("gpu_layernorm_f32");
    let (r, c, eps) = (6, 700, 1e-5f32);
    // A common offset: the variance must be a second pass, not E[x²] − mean².
    let x = f32s(&uniform(&mut rng, r * c, 2.0, 4.0));
    let w = f32s(&uniform(&mut rng, c, 0.5, 1.5));
    let b = f32s(&uniform(&mut rng, c, -0.5, 0.5));
    let reference = |affine: bool| {
        let mut want = vec![0.0f64; r * c];
        for i in 0..r {
            let row: Vec<f64> = x[i * c..(i + 1) * c].iter().map(|&v| v as f64).collect();
            let mean = row.iter().sum::<f64>() / c as f64;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / c as f64;
            let inv = 1.0 / (var + eps as f64).sqrt();
            for j in 0..c {
                let n = (row[j] - mean) * inv;
                want[i * c + j] = if affine { n * w[j] as f64 + b[j] as f64 } else { n };
            }
        }
        want
    };
    let (xb, wb, bb) = (Buffer::from_slice(&dev, &x).unwrap(), Buffer::from_slice(&dev, &w).unwrap(), Buffer::from_slice(&dev, &b).unwrap());
    let out = Buffer::from_slice(&dev, &vec![f32::NAN; r * c]).unwrap();
    let (xv, wv, bv, ov) = (xb.view(r, c), wb.view(1, c), bb.view(1, c), out.view(r, c));
    Op::layernorm(&dev, Dtype::F32, r, c, eps).unwrap().launch(&s, &[xv, wv, bv, ov]).unwrap();
    s.synchronize().unwrap();
    rel_error("layernorm f32 prepared, weight and bias", &wide_f32(&out.to_vec().unwrap()), &reference(true), 5e-5);
    let out = Buffer::from_slice(&dev, &vec![f32::NAN; r * c]).unwrap();
    kaio::layernorm(&s, &xv, None, None, &out.view(r, c), eps).unwrap();
    s.synchronize().unwrap();
    rel_error("layernorm f32 one-shot, no weight or bias", &wide_f32(&out.to_vec().unwrap()), &reference(false), 5e-5);
}

#[test]
fn gpu_rope_half_split_f32() {
    let dev = gpu_or_return!("gpu_rope_half_split_f32");
    let s = Stream::non_blocking(&dev).unwrap();
    let mut rng = Rng::new("gpu_rope_half_split_f32");
    // Q and K are column ranges of one fused QKV row [Q | K | V].
    let (t, hq, hk, d, rot) = (7usize, 4usize, 2usize, 64usize, 48usize);
    let width = (hq + 2 * hk) * d;
    let pos: Vec<i32> = vec![0, 3, 17, 100, 5, 42, 1000];
    let qkv = f32s(&uniform(&mut rng, t * width, -1.0, 1.0));
    let desc = RopeDesc { dtype: Dtype::F32, heads_q: hq, heads_k: hk, head_dim: d, rotary_dim: rot, ..Default::default() };
    // Direct formula in f64: pair (x[i], x[i + rot/2]) rotated by pos·θ^(−2i/rot).
    let mut want: Vec<f64> = wide_f32(&qkv);
    for tok in 0..t {
        for head in 0..hq + hk {
            let base = tok * width + head * d;
            for i in 0..rot / 2 {
                let angle = pos[tok] as f64 * desc.theta.powf(-2.0 * i as f64 / rot as f64);
                let (x0, x1) = (qkv[base + i] as f64, qkv[base + i + rot / 2] as f64);
                want[base + i] = x0 * angle.cos() - x1 * angle.sin();
                want[base + i + rot / 2] = x1 * angle.cos() + x0 * angle.sin();
            }
        }
    }
    let pb = Buffer::from_slice(&dev, &pos).unwrap();
    let op = Op::rope(&dev, &desc).unwrap();
    for &prepared in &[true, false] {
        let buf = Buffer::from_slice(&dev, &qkv).unwrap();
        let qv = buf.view(t, hq * d).with_row_stride(width);
        let kv = buf.view(t, hk * d).with_offset(hq * d).with_row_stride(width);
        if prepared {
            op.launch(&s, &[qv, kv, pb.view(1, t)]).unwrap();
        } else {
            kaio::rope(&s, Some(&qv), Some(&kv), &pb.view(1, t), &desc).unwrap();
        }
        s.synchronize().unwrap();
        let got = buf.to_vec().unwrap();
        let mut worst = 0.0f64;
        for tok in 0..t {
            let tol = 1e-6 + 3.6e-7 * pos[tok] as f64;
            for col in 0..width {
                let (g, w) = (got[tok * width + col] as f64, want[tok * width + col]);
                let rotated = col < (hq + hk) * d && col % d < rot;
                if rotated {
                    assert!((g - w).abs() <= tol, "rope (prepared {}) token {} col {}: {} vs {} (tol {:.1e})", prepared, tok, col, g, w, tol);
                    worst = worst.max((g - w).abs());
                } else {
                    assert_eq!(g, w, "rope (prepared {}) token {} col {}: must be unchanged", prepared, tok, col);
                }
            }
        }
        println!("rope f32 half split (prepared {}): ok, worst absolute error {:.2e}", prepared, worst);
    }
}

/// RoPE fused with the KV-cache write against kaio::rope then the slots read
/// back: the K cache's stored rows are rope's rotated K bit for bit (dims past
/// rotary_dim copied), V's rows copied, padding slots untouched.
#[test]
fn gpu_rope_kv_cache_write_matches_rope() {
    let dev = gpu_or_return!("gpu_rope_kv_cache_write_matches_rope");
    let s = Stream::non_blocking(&dev).unwrap();
    let mut rng = Rng::new("gpu_rope_kv_cache_write_matches_rope");
    let (t, hk, d, rows) = (4usize, 2usize, 64usize, 16usize);
    let w = hk * d;
    let desc = RopeDesc { dtype: Dtype::F32, heads_q: 0, heads_k: hk, head_dim: d, rotary_dim: 32, ..Default::default() };
    let k = f32s(&uniform(&mut rng, t * w, -1.0, 1.0));
    let v = f32s(&uniform(&mut rng, t * w, -1.0, 1.0));
    let pos = Buffer::from_slice(&dev, &[7i32, 0, 300, 12]).unwrap();
    let slots: Vec<i32> = vec![9, -1, 0, 15];
    let sb = Buffer::from_slice(&dev, &slots).unwrap();
    let rotated = Buffer::from_slice(&dev, &k).unwrap();
    kaio::rope(&s, None, Some(&rotated.view(t, w)), &pos.view(1, t), &desc).unwrap();
    let (kb, vb) = (Buffer::from_slice(&dev, &k).unwrap(), Buffer::from_slice(&dev, &v).unwrap());
    let kc = Buffer::from_slice(&dev, &vec![-9.0f32; rows * w]).unwrap();
    let vc = Buffer::from_slice(&dev, &vec![-9.0f32; rows * w]).unwrap();
    let (kcv, vcv) = (kc.view(rows, w), vc.view(rows, w));
    let caches = kaio::KvCaches { k_cache: &kcv, v_cache: Some(&vcv) };
    kaio::rope_kv_cache_write(&s, None, &kb.view(t, w), Some(&vb.view(t, w)), &pos.view(1, t), &sb.view(1, t), caches, &desc)
        .unwrap();
    s.synchronize().unwrap();
    let (want_k, got_k, got_v) = (rotated.to_vec().unwrap(), kc.to_vec().unwrap(), vc.to_vec().unwrap());
    assert_eq!(kb.to_vec().unwrap(), k, "K itself must not change");
    for r in 0..rows {
        let tok = slots.iter().position(|&x| x == r as i32);
        for c in 0..w {
            let (wk, wv) = tok.map_or((-9.0, -9.0), |i| (want_k[i * w + c], v[i * w + c]));
            assert_eq!(got_k[r * w + c].to_bits(), f32::to_bits(wk), "K cache row {} col {}", r, c);
            assert_eq!(got_v[r * w + c].to_bits(), f32::to_bits(wv), "V cache row {} col {}", r, c);
        }
    }
    println!("rope_kv_cache_write f32: ok, bit-identical to rope then the cache write");
}

/// softmax(scale · q·kᵀ) · v over `keys` (rows of `k` and `v`, each `d`
/// wide from column `col`); (O row, natural-log LSE). No key: (0, −inf).
fn attend(q: &[f64], k: &[f64], v: &[f64], keys: &[usize], stride: usize, col: usize, scale: f64) -> (Vec<f64>, f64) {
    let d = q.len();
    if keys.is_empty() {
        return (vec![0.0; d], f64::NEG_INFINITY);
    }
    let s: Vec<f64> = keys.iter().map(|&j| scale * (0..d).map(|e| q[e] * k[j * stride + col + e]).sum::<f64>()).collect();
    let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let p: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
    let z: f64 = p.iter().sum();
    let o = (0..d).map(|e| keys.iter().zip(&p).map(|(&j, pj)| pj * v[j * stride + col + e]).sum::<f64>() / z).collect();
    (o, m + z.ln())
}

fn check_lse(what: &str, got: &[f32], want: &[f64]) {
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = if w == f64::NEG_INFINITY { g == f32::NEG_INFINITY } else { (g as f64 - w).abs() <= 2e-3 };
        assert!(ok, "{}: LSE[{}] = {} vs {}", what, i, g, w);
    }
}

/// Decode shape: B 2, Sq 1, Hq 8, Hkv 2 (GQA 4), D 128, Sk 300, bf16.
const B: usize = 2;
const HQ: usize = 8;
const HKV: usize = 2;
const D: usize = 128;
const SK: usize = 300;

/// The reference O [B, Hq·D] and LSE [B·Hq] for per-sequence key counts.
fn decode_reference(q: &[f64], k: &[f64], v: &[f64], lens: &[usize]) -> (Vec<f64>, Vec<f64>) {
    let scale = 1.0 / (D as f64).sqrt();
    let (mut o, mut lse) = (vec![0.0; B * HQ * D], vec![0.0; B * HQ]);
    for b in 0..B {
        let keys: Vec<usize> = (0..lens[b]).map(|j| b * SK + j).collect();
        for h in 0..HQ {
            let g = h / (HQ / HKV);
            let qrow = &q[b * HQ * D + h * D..][..D];
            let (orow, l) = attend(qrow, k, v, &keys, HKV * D, g * D, scale);
            o[b * HQ * D + h * D..][..D].copy_from_slice(&orow);
            lse[b * HQ + h] = l;
        }
    }
    (o, lse)
}

#[test]
fn gpu_decode_and_paged_attention_bf16() {
    let dev = gpu_or_return!("gpu_decode_and_paged_attention_bf16");
    let s = Stream::non_blocking(&dev).unwrap();
    let mut rng = Rng::new("gpu_decode_and_paged_attention_bf16");
    let q = bf16s(&uniform(&mut rng, B * HQ * D, -1.0, 1.0));
    let k = bf16s(&uniform(&mut rng, B * SK * HKV * D, -1.0, 1.0));
    let v = bf16s(&uniform(&mut rng, B * SK * HKV * D, -1.0, 1.0));
    let (qw, kw, vw) = (wide_bf16(&q), wide_bf16(&k), wide_bf16(&v));
    let desc = AttentionDesc { dtype: Dtype::Bf16, batch: B, seq_q: 1, seq_k: SK, heads_q: HQ, heads_kv: HKV, head_dim: D, ..Default::default() };
    let (qb, kb, vb) = (Buffer::from_slice(&dev, &q).unwrap(), Buffer::from_slice(&dev, &k).unwrap(), Buffer::from_slice(&dev, &v).unwrap());
    let (qv, kv, vv) = (qb.view(B, HQ * D), kb.view(B * SK, HKV * D), vb.view(B * SK, HKV * D));
    let fresh = || {
        (Buffer::from_slice(&dev, &vec![Bf16::from_f32(f32::NAN); B * HQ * D]).unwrap(), Buffer::from_slice(&dev, &vec![f32::NAN; B * HQ]).unwrap())
    };

    // Contiguous K and V: the prepared Decode op (split keys), one-shot Auto.
    let (want_o, want_lse) = decode_reference(&qw, &kw, &vw, &[SK, SK]);
    let op = Op::attention(&dev, &AttentionDesc { variant: AttentionVariant::Decode, ..desc }).unwrap();
    for &prepared in &[true, false] {
        let (o, lse) = fresh();
        if prepared {
            op.launch(&s, &[qv, kv, vv, o.view(B, HQ * D), lse.view(B * HQ, 1)]).unwrap();
        } else {
            kaio::attention(&s, &qv, &kv, &vv, &o.view(B, HQ * D), Some(&lse.view(B * HQ, 1)), &desc).unwrap();
        }
        s.synchronize().unwrap();
        let what = format!("decode attention bf16 (prepared {})", prepared);
        rel_error(&what, &wide_bf16(&o.to_vec().unwrap()), &want_o, 1.2e-2);
        check_lse(&what, &lse.to_vec().unwrap(), &want_lse);
    }

    // Paged: the same K and V in pages of 16 at shuffled page ids, spare
    // pages of garbage, and a shorter second sequence.
    let page = 16;
    let per_seq = (SK + page - 1) / page;
    let pages = B * per_seq + 3;
    let mut ids: Vec<usize> = (0..pages).collect();
    for i in (1..pages).rev() {
        ids.swap(i, (rng.next() % (i as u64 + 1)) as usize);
    }
    let width = HKV * D;
    let mut kpool = bf16s(&uniform(&mut rng, pages * page * width, -50.0, 50.0));
    let mut vpool = bf16s(&uniform(&mut rng, pages * page * width, -50.0, 50.0));
    let mut table = vec![0i32; B * per_seq];
    for b in 0..B {
        for p in 0..per_seq {
            table[b * per_seq + p] = ids[b * per_seq + p] as i32;
        }
        for j in 0..SK {
            let row = ids[b * per_seq + j / page] * page + j % page;
            kpool[row * width..][..width].copy_from_slice(&k[(b * SK + j) * width..][..width]);
            vpool[row * width..][..width].copy_from_slice(&v[(b * SK + j) * width..][..width]);
        }
    }
    let lens = [SK, SK - 37];
    let lens_i32: Vec<i32> = lens.iter().map(|&n| n as i32).collect();
    let (want_o, want_lse) = decode_reference(&qw, &kw, &vw, &lens);
    let (kpb, vpb) = (Buffer::from_slice(&dev, &kpool).unwrap(), Buffer::from_slice(&dev, &vpool).unwrap());
    let (tb, lb) = (Buffer::from_slice(&dev, &table).unwrap(), Buffer::from_slice(&dev, &lens_i32).unwrap());
    let cache = PagedKv {
        k_pool: kpb.view(pages * page, width),
        v_pool: vpb.view(pages * page, width),
        block_table: tb.view(B, per_seq),
        seq_lens: lb.view(1, B),
    };
    let paged = AttentionPagedDesc { page_size: page };
    let op = Op::attention_paged(&dev, &desc, &paged).unwrap();
    for &prepared in &[true, false] {
        let (o, lse) = fresh();
        if prepared {
            op.launch(&s, &cache.tensors(qv, o.view(B, HQ * D), Some(lse.view(B * HQ, 1)))).unwrap();
        } else {
            kaio::attention_paged(&s, &qv, &cache, &o.view(B, HQ * D), Some(&lse.view(B * HQ, 1)), &desc, &paged).unwrap();
        }
        s.synchronize().unwrap();
        let what = format!("paged attention bf16, shuffled pages (prepared {})", prepared);
        rel_error(&what, &wide_bf16(&o.to_vec().unwrap()), &want_o, 1.2e-2);
        check_lse(&what, &lse.to_vec().unwrap(), &want_lse);
    }
}

#[test]
fn gpu_varlen_attention_f16() {
    let dev = gpu_or_return!("gpu_varlen_attention_f16");
    let s = Stream::non_blocking(&dev).unwrap();
    let mut rng = Rng::new("gpu_varlen_attention_f16");
    let (hq, hkv, d) = (4usize, 2usize, 64usize);
    let lens = [0usize, 5, 9];
    let cu: Vec<i32> = vec![0, 0, 5, 14];
    let total = 14;
    let q = f16s(&uniform(&mut rng, total * hq * d, -1.0, 1.0));
    let k = f16s(&uniform(&mut rng, total * hkv * d, -1.0, 1.0));
    let v = f16s(&uniform(&mut rng, total * hkv * d, -1.0, 1.0));
    let (qw, kw, vw) = (wide(&q), wide(&k), wide(&v));
    // Per sequence, causal (len_q = len_k: query i sees keys j <= i).
    let scale = 1.0 / (d as f64).sqrt();
    let (mut want_o, mut want_lse) = (vec![0.0; total * hq * d], vec![0.0; hq * total]);
    for (b, &len) in lens.iter().enumerate() {
        let start = cu[b] as usize;
        for i in 0..len {
            let keys: Vec<usize> = (start..=start + i).collect();
            for h in 0..hq {
                let row = (start + i) * hq * d + h * d;
                let (o, l) = attend(&qw[row..row + d], &kw, &vw, &keys, hkv * d, (h / (hq / hkv)) * d, scale);
                want_o[row..row + d].copy_from_slice(&o);
                want_lse[h * total + start + i] = l;
            }
        }
    }
    let desc = AttentionVarlenDesc {
        mask: AttentionMask::Causal,
        batch: lens.len(),
        max_seqlen_q: 9,
        max_seqlen_k: 9,
        total_q: total,
        total_k: total,
        heads_q: hq,
        heads_kv: hkv,
        head_dim: d,
        ..Default::default()
    };
    let (qb, kb, vb, cb) = (
        Buffer::from_slice(&dev, &q).unwrap(),
        Buffer::from_slice(&dev, &k).unwrap(),
        Buffer::from_slice(&dev, &v).unwrap(),
        Buffer::from_slice(&dev, &cu).unwrap(),
    );
    let (qv, kv, vv, cv) = (qb.view(total, hq * d), kb.view(total, hkv * d), vb.view(total, hkv * d), cb.view(1, lens.len() + 1));
    let op = Op::attention_varlen(&dev, &desc).unwrap();
    for &prepared in &[true, false] {
        let o = Buffer::from_slice(&dev, &f16s(&vec![f64::NAN; total * hq * d])).unwrap();
        let lse = Buffer::from_slice(&dev, &vec![f32::NAN; hq * total]).unwrap();
        let (ov, lv) = (o.view(total, hq * d), lse.view(hq, total));
        if prepared {
            op.launch(&s, &[qv, kv, vv, cv, cv, ov, lv]).unwrap();
        } else {
            kaio::attention_varlen(&s, &qv, &kv, &vv, &cv, &cv, &ov, Some(&lv), &desc).unwrap();
        }
        s.synchronize().unwrap();
        let what = format!("varlen attention f16, lengths 0/5/9 (prepared {})", prepared);
        rel_error(&what, &wide(&o.to_vec().unwrap()), &want_o, 2e-3);
        check_lse(&what, &lse.to_vec().unwrap(), &want_lse);
    }
}

/// Paged prefill of a small batch: new rows 0, 1 and 7 against caches of 5,
/// 33 and 1 tokens (seq_lens 5, 34, 8: the cache INCLUDING the new rows),
/// causal (bottom-right), GQA 4:1, D 64, pages of 16 shuffled in a pool with
/// spare pages; unused slots and spare pages hold large garbage (±50) that
/// would show if read. Checked against the f64 reference of each sequence
/// alone, prepared and one-shot, AUTO (sm_90a TMA kernel on sm_90) and
/// SM80_M128 (the mma.sync paged fetch).
fn paged_prefill_case<T: Element>(dev: &Device, rng: &mut Rng, enc: fn(&[f64]) -> Vec<T>, dec: fn(&[T]) -> Vec<f64>, tol_o: f64) {
    let s = Stream::non_blocking(dev).unwrap();
    let (hq, hkv, d, page) = (8usize, 2usize, 64usize, 16usize);
    let (lq, lk) = ([0usize, 1, 7], [5usize, 34, 8]);
    let b = lq.len();
    let (width, qwidth) = (hkv * d, hq * d);
    let total_q: usize = lq.iter().sum();
    let cu: Vec<i32> = std::iter::once(0).chain(lq.iter().scan(0, |a, &n| { *a += n as i32; Some(*a) })).collect();
    let max_pages = 3; // ceil(34 / 16)
    let used: usize = lk.iter().map(|&n| (n + page - 1) / page).sum();
    let pages = used + 3;
    let mut ids: Vec<usize> = (0..pages).collect();
    for i in (1..pages).rev() {
        ids.swap(i, (rng.next() % (i as u64 + 1)) as usize);
    }
    let q = enc(&uniform(rng, total_q * qwidth, -1.0, 1.0));
    let mut kpool = enc(&uniform(rng, pages * page * width, -50.0, 50.0));
    let mut vpool = enc(&uniform(rng, pages * page * width, -50.0, 50.0));
    // Sequence b's keys, contiguous, for the reference; scattered into pages.
    let (mut keys, mut vals) = (Vec::new(), Vec::new());
    let (mut table, mut next) = (vec![0i32; b * max_pages], 0);
    for (bi, &n) in lk.iter().enumerate() {
        let (k, v) = (enc(&uniform(rng, n * width, -1.0, 1.0)), enc(&uniform(rng, n * width, -1.0, 1.0)));
        let npages = (n + page - 1) / page;
        for p in 0..max_pages {
            // Entries past the sequence's pages point at a spare page.
            table[bi * max_pages + p] = if p < npages { ids[next + p] as i32 } else { ids[pages - 1] as i32 };
        }
        for j in 0..n {
            let row = table[bi * max_pages + j / page] as usize * page + j % page;
            kpool[row * width..][..width].copy_from_slice(&k[j * width..][..width]);
            vpool[row * width..][..width].copy_from_slice(&v[j * width..][..width]);
        }
        next += npages;
        keys.push(dec(&k));
        vals.push(dec(&v));
    }
    let qw = dec(&q);
    let scale = 1.0 / (d as f64).sqrt();
    let (mut want_o, mut want_lse) = (vec![0.0; total_q * qwidth], vec![0.0; hq * total_q]);
    for bi in 0..b {
        for i in 0..lq[bi] {
            let row = cu[bi] as usize + i;
            let visible: Vec<usize> = (0..=lk[bi] - lq[bi] + i).collect();
            for h in 0..hq {
                let qrow = &qw[row * qwidth + h * d..][..d];
                let (o, l) = attend(qrow, &keys[bi], &vals[bi], &visible, width, (h / (hq / hkv)) * d, scale);
                want_o[row * qwidth + h * d..][..d].copy_from_slice(&o);
                want_lse[h * total_q + row] = l;
            }
        }
    }
    let lens: Vec<i32> = lk.iter().map(|&n| n as i32).collect();
    let (qb, kpb, vpb) = (Buffer::from_slice(dev, &q).unwrap(), Buffer::from_slice(dev, &kpool).unwrap(), Buffer::from_slice(dev, &vpool).unwrap());
    let (cb, tb, lb) = (Buffer::from_slice(dev, &cu).unwrap(), Buffer::from_slice(dev, &table).unwrap(), Buffer::from_slice(dev, &lens).unwrap());
    let (qv, cv) = (qb.view(total_q, qwidth), cb.view(1, b + 1));
    let cache = PagedKv {
        k_pool: kpb.view(pages * page, width),
        v_pool: vpb.view(pages * page, width),
        block_table: tb.view(b, max_pages),
        seq_lens: lb.view(1, b),
    };
    let paged = AttentionPagedDesc { page_size: page };
    for &variant in &[AttentionVariant::Auto, AttentionVariant::Sm80M128] {
        let desc = AttentionVarlenDesc {
            dtype: T::DTYPE,
            mask: AttentionMask::Causal,
            variant,
            batch: b,
            max_seqlen_q: 7,
            max_seqlen_k: max_pages * page,
            total_q,
            total_k: 0,
            heads_q: hq,
            heads_kv: hkv,
            head_dim: d,
            ..Default::default()
        };
        let op = Op::attention_paged_prefill(dev, &desc, &paged).unwrap();
        for &prepared in &[true, false] {
            let o = Buffer::from_slice(dev, &enc(&vec![f64::NAN; total_q * qwidth])).unwrap();
            let lse = Buffer::from_slice(dev, &vec![f32::NAN; hq * total_q]).unwrap();
            let (ov, lv) = (o.view(total_q, qwidth), lse.view(hq, total_q));
            if prepared {
                op.launch(&s, &cache.prefill_tensors(qv, cv, ov, Some(lv))).unwrap();
            } else {
                kaio::attention_paged_prefill(&s, &qv, &cv, &cache, &ov, Some(&lv), &desc, &paged).unwrap();
            }
            s.synchronize().unwrap();
            let what = format!("paged prefill {:?} {:?}, new 0/1/7, lens 5/34/8 (prepared {})", T::DTYPE, variant, prepared);
            rel_error(&what, &dec(&o.to_vec().unwrap()), &want_o, tol_o);
            check_lse(&what, &lse.to_vec().unwrap(), &want_lse);
        }
    }
}

#[test]
fn gpu_paged_prefill_attention_f16_bf16() {
    let dev = gpu_or_return!("gpu_paged_prefill_attention_f16_bf16");
    let mut rng = Rng::new("gpu_paged_prefill_attention_f16_bf16");
    paged_prefill_case(&dev, &mut rng, f16s, wide, 2e-3);
    paged_prefill_case(&dev, &mut rng, bf16s, wide_bf16, 1.2e-2);
}

fn argmax(row: &[f32]) -> i32 {
    let mut best = 0;
    for (i, &x) in row.iter().enumerate() {
        if x > row[best] {
            best = i;
        }
    }
    best as i32
}

#[test]
fn gpu_sampling_greedy_and_top1_are_argmax() {
    let dev = gpu_or_return!("gpu_sampling_greedy_and_top1_are_argmax");
    let s = Stream::non_blocking(&dev).unwrap();
    let mut rng = Rng::new("gpu_sampling_greedy_and_top1_are_argmax");
    let (b, vocab) = (4usize, 5000usize);
    let logits = f32s(&uniform(&mut rng, b * vocab, -5.0, 5.0));
    let want: Vec<i32> = (0..b).map(|r| argmax(&logits[r * vocab..(r + 1) * vocab])).collect();
    let lb = Buffer::from_slice(&dev, &logits).unwrap();
    let desc = SamplingDesc { batch: b, vocab, ..Default::default() };

    let tokens = Buffer::from_slice(&dev, &vec![-1i32; b]).unwrap();
    Op::sampling(&dev, &desc).unwrap().launch(&s, &SamplingViews::new(lb.view(b, vocab), tokens.view(1, b)).tensors()).unwrap();
    s.synchronize().unwrap();
    assert_eq!(tokens.to_vec().unwrap(), want, "greedy tokens");

    // Sampled rows (row 1 greedy by temperature 0) with top-k 1: the argmax,
    // at probability 1.
    let temp = Buffer::from_slice(&dev, &[1.0f32, 0.0, 0.7, 2.0]).unwrap();
    let top_k = Buffer::from_slice(&dev, &[1i32; 4]).unwrap();
    let seeds: Vec<u32> = (0..b as u32).flat_map(|r| vec![0x9E37 + r, r, 7, 0]).collect();
    let rngb = Buffer::from_slice(&dev, &seeds).unwrap();
    let tokens = Buffer::from_slice(&dev, &vec![-1i32; b]).unwrap();
    let probs = Buffer::from_slice(&dev, &vec![f32::NAN; b]).unwrap();
    let logprobs = Buffer::from_slice(&dev, &vec![f32::NAN; b]).unwrap();
    let features = SamplingFeatures::RANDOM | SamplingFeatures::TOP_K | SamplingFeatures::PROBS;
    let views = SamplingViews {
        temperature: Some(temp.view(1, b)),
        top_k: Some(top_k.view(1, b)),
        rng: Some(rngb.view(b, 4)),
        probs: Some(probs.view(1, b)),
        logprobs: Some(logprobs.view(1, b)),
        ..SamplingViews::new(lb.view(b, vocab), tokens.view(1, b))
    };
    let op = Op::sampling(&dev, &SamplingDesc { features, ..desc }).unwrap();
    op.launch(&s, &views.tensors()).unwrap();
    s.synchronize().unwrap();
    assert_eq!(tokens.to_vec().unwrap(), want, "top-k 1 tokens");
    for (r, (p, lp)) in probs.to_vec().unwrap().iter().zip(logprobs.to_vec().unwrap()).enumerate() {
        assert!((p - 1.0).abs() <= 1e-6 && lp.abs() <= 1e-6, "row {}: probability {}, log-probability {}", r, p, lp);
    }
    // The views of a feature the op lacks are refused.
    assert!(op.launch(&s, &[TensorView::none(); 12]).is_err());
    println!("sampling: greedy and top-k 1 tokens are the argmax: ok");
}

/// libkaio's penalties (kaio.h, "Token sampling") in f32 as the kernel
/// computes them: repetition once per distinct previous token, then
/// presence + frequency · count; ids outside [0, V) ignored.
fn penalised(row: &[f32], prev: &[i32], pen: [f32; 3]) -> Vec<f32> {
    let mut x = row.to_vec();
    let mut counts = std::collections::BTreeMap::new();
    for &t in prev.iter().filter(|&&t| t >= 0 && (t as usize) < row.len()) {
        *counts.entry(t as usize).or_insert(0u32) += 1;
    }
    let r = if pen[0] > 0.0 { pen[0] } else { 1.0 };
    for (&t, &c) in &counts {
        let v = if x[t] > 0.0 { x[t] / r } else { x[t] * r };
        x[t] = v - (pen[1] + pen[2] * c as f32);
    }
    x
}

/// Rows 0 to 2 greedy (temperature 0) where the penalties change (rows 0,
/// 2) or keep (row 1: all off) the argmax, by margins far above rounding;
/// row 3 sampled at T 0.8, top-k 50: its token must be kept and its
/// probability that of the reference distribution. Previous-token lists
/// hold ids outside [0, V) (ignored) and are cut by prev_lens.
#[test]
fn gpu_sampling_penalties_and_probabilities() {
    let dev = gpu_or_return!("gpu_sampling_penalties_and_probabilities");
    let s = Stream::non_blocking(&dev).unwrap();
    let mut rng = Rng::new("gpu_sampling_penalties_and_probabilities");
    let (b, vocab, max_prev) = (4usize, 1000usize, 6usize);
    let mut logits = f32s(&uniform(&mut rng, b * vocab, -2.0, 2.0));
    for x in &mut logits[2 * vocab..3 * vocab] {
        *x -= 4.0; // row 2 all negative: repetition multiplies
    }
    let (a, bb) = (17usize, 923usize);
    logits[a] = 5.0; // row 0: A 5 -> 5/1.5 - 0.5 - 0.25·3 ≈ 2.08, B 4 wins
    logits[bb] = 4.0;
    logits[vocab + a] = 5.0; // row 1: no penalty, A wins over B
    logits[vocab + bb] = 4.0;
    logits[2 * vocab + a] = -1.0; // row 2: A -1 -> -2, B -1.5 wins
    logits[2 * vocab + bb] = -1.5;
    let prev: Vec<i32> = [
        [a as i32, a as i32, 7000, a as i32, -1, 0],
        [a as i32, a as i32, 3, 4, 5, 6],
        [a as i32, 9, 9, 2000, 0, 0],
        [0, 0, 0, 0, 0, 0],
    ]
    .concat();
    let prev_lens: Vec<i32> = vec![5, 2, 4, 6];
    let pens: [[f32; 3]; 4] = [[1.5, 0.5, 0.25], [1.0, 0.0, 0.0], [2.0, 0.0, 0.0], [1.3, 0.2, 0.1]];
    // Row 3's previous tokens: its five largest logits, so penalties matter.
    let mut order: Vec<usize> = (0..vocab).collect();
    order.sort_by(|&i, &j| logits[3 * vocab + j].partial_cmp(&logits[3 * vocab + i]).unwrap());
    let mut prev = prev;
    for (c, &t) in order[..5].iter().enumerate() {
        prev[3 * max_prev + c] = t as i32;
    }
    prev[3 * max_prev + 5] = order[0] as i32; // twice: frequency counts 2
    let rows: Vec<Vec<f32>> = (0..b)
        .map(|r| penalised(&logits[r * vocab..][..vocab], &prev[r * max_prev..][..prev_lens[r] as usize], pens[r]))
        .collect();
    let want_greedy: Vec<i32> = vec![bb as i32, a as i32, bb as i32];
    for r in 0..3 {
        assert_eq!(argmax(&rows[r]), want_greedy[r], "row {}: the reference itself", r);
    }
    let (temp, top_k) = (vec![0.0f32, 0.0, 0.0, 0.8], vec![0i32, 0, 0, 50]);
    let seeds: Vec<u32> = vec![1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0xC0FFEE, 0, 5, 0];
    let up_f = |v: &[f32]| Buffer::from_slice(&dev, v).unwrap();
    let up_i = |v: &[i32]| Buffer::from_slice(&dev, v).unwrap();
    let (lb, tb, kb) = (up_f(&logits), up_f(&temp), up_i(&top_k));
    let (pb, plb, penb) = (up_i(&prev), up_i(&prev_lens), up_f(&pens.concat()));
    let sb = Buffer::from_slice(&dev, &seeds).unwrap();
    let features = SamplingFeatures::RANDOM | SamplingFeatures::TOP_K | SamplingFeatures::PENALTIES | SamplingFeatures::PROBS;
    let op = Op::sampling(&dev, &SamplingDesc { batch: b, vocab, max_prev, features, ..Default::default() }).unwrap();
    let mut drawn = Vec::new();
    for _ in 0..2 {
        let tokens = up_i(&vec![-1; b]);
        let (probs, logprobs) = (up_f(&vec![f32::NAN; b]), up_f(&vec![f32::NAN; b]));
        let views = SamplingViews {
            temperature: Some(tb.view(1, b)),
            top_k: Some(kb.view(1, b)),
            rng: Some(sb.view(b, 4)),
            prev: Some(pb.view(b, max_prev)),
            prev_lens: Some(plb.view(1, b)),
            penalties: Some(penb.view(b, 3)),
            probs: Some(probs.view(1, b)),
            logprobs: Some(logprobs.view(1, b)),
            ..SamplingViews::new(lb.view(b, vocab), tokens.view(1, b))
        };
        op.launch(&s, &views.tensors()).unwrap();
        s.synchronize().unwrap();
        let (tok, p, lp) = (tokens.to_vec().unwrap(), probs.to_vec().unwrap(), logprobs.to_vec().unwrap());
        assert_eq!(&tok[..3], &want_greedy[..], "greedy tokens after penalties");
        for r in 0..3 {
            assert!((p[r] - 1.0).abs() <= 1e-6 && lp[r].abs() <= 1e-6, "greedy row {}: probability {}, log-probability {}", r, p[r], lp[r]);
        }
        // Row 3: softmax over the top-k kept of the penalised logits / T.
        let row: Vec<f64> = rows[3].iter().map(|&x| x as f64 / temp[3] as f64).collect();
        let mut sorted = row.clone();
        sorted.sort_by(|x, y| y.partial_cmp(x).unwrap());
        let kth = sorted[top_k[3] as usize - 1];
        let t = tok[3] as usize;
        assert!(t < vocab && row[t] >= kth, "row 3: token {} is not among the top {}", tok[3], top_k[3]);
        let z: f64 = row.iter().filter(|&&x| x >= kth).map(|&x| (x - sorted[0]).exp()).sum();
        let want_p = (row[t] - sorted[0]).exp() / z;
        assert!((p[3] as f64 - want_p).abs() <= 1e-4 * want_p, "row 3: probability {} vs {}", p[3], want_p);
        assert!((lp[3] as f64 - want_p.ln()).abs() <= 1e-4, "row 3: log-probability {} vs {}", lp[3], want_p.ln());
        drawn.push(tok[3]);
    }
    assert_eq!(drawn[0], drawn[1], "the same seed and offset draw the same token");
    println!("sampling with penalties: greedy tokens exact, row 3 drew {} at the reference probability", drawn[0]);
}
