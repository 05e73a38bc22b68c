//! Host tests on the fake CUDA driver for the serving ops' wrappers (norms,
//! RoPE, decode / paged / varlen attention, sampling): each op launches
//! through its prepared and one-shot paths (the fake records the kernel),
//! descs default to libkaio's, and bad inputs come back as the exact status
//! with libkaio's message.
mod common;

use common::expect_err;
use kaio::{
    AttentionDesc, AttentionPagedDesc, AttentionVariant, AttentionVarlenDesc, Bf16, Buffer, Device, Dtype, Op, PagedKv,
    RopeDesc, RopeScaling, RopeStyle, SamplingDesc, SamplingFeatures, SamplingViews, Status, Stream, TensorView, F16,
};

fn size<T>(_: &T) -> usize {
    std::mem::size_of::<T>()
}

#[test]
fn serving_descs_default_to_libkaio_defaults() {
    use kaio::sys;
    let mut r = sys::kaio_rope_desc::default();
    assert_eq!(unsafe { sys::kaio_rope_desc_init(&mut r, size(&r)) }, 0);
    assert_eq!(RopeDesc::default().to_raw().unwrap(), r);
    let mut p = sys::kaio_attention_paged_desc::default();
    assert_eq!(unsafe { sys::kaio_attention_paged_desc_init(&mut p, size(&p)) }, 0);
    assert_eq!(AttentionPagedDesc::default().to_raw().unwrap(), p);
    let mut s = sys::kaio_sampling_desc::default();
    assert_eq!(unsafe { sys::kaio_sampling_desc_init(&mut s, size(&s)) }, 0);
    assert_eq!(SamplingDesc::default().to_raw().unwrap(), s);
    let mut v = sys::kaio_attention_varlen_desc::default();
    assert_eq!(unsafe { sys::kaio_attention_varlen_desc_init(&mut v, size(&v)) }, 0);
    assert_eq!(AttentionVarlenDesc::default().to_raw().unwrap(), v);
    // Every field reaches the raw desc.
    let y = RopeDesc { style: RopeStyle::Interleaved, scaling: RopeScaling::Yarn, truncate: false, rotary_dim: 32, ..Default::default() };
    let raw = y.to_raw().unwrap();
    assert_eq!((raw.style, raw.scaling, raw.truncate, raw.rotary_dim), (1, 3, 0, 32));
    let f = SamplingFeatures::RANDOM | SamplingFeatures::TOP_K;
    assert_eq!(f.bits(), 3);
    assert!(f.contains(SamplingFeatures::TOP_K) && !f.contains(SamplingFeatures::PROBS));
    assert_eq!(AttentionVariant::Decode.raw(), sys::KAIO_ATTENTION_DECODE);
}

#[test]
fn norms_launch_and_report_errors_on_the_fake() {
    let fake = fake_or_skip!("norms_launch_and_report_errors_on_the_fake");
    let d0 = Device::open(0).unwrap();
    let s = Stream::non_blocking(&d0).unwrap();
    let (r, c) = (4, 256);
    let buf = |n| Buffer::<F16>::alloc(&d0, n).unwrap();
    let (x, res, w, b, out) = (buf(r * c), buf(r * c), buf(c), buf(c), buf(r * c));
    let (xv, rv, wv, bv, ov) = (x.view(r, c), res.view(r, c), w.view(1, c), b.view(1, c), out.view(r, c));
    let n0 = fake.launches();
    kaio::add_rmsnorm(&s, &xv, &rv, &wv, &ov, 1e-5).unwrap();
    assert_eq!(fake.launches(), n0 + 1, "add_rmsnorm: one launch");
    let op = Op::add_rmsnorm(&d0, Dtype::F16, r, c, 1e-5).unwrap();
    assert_eq!(op.kind(), "add_rmsnorm");
    op.launch(&s, &[xv, rv, wv, ov]).unwrap();
    assert_eq!(fake.last().unwrap().name, "kaio_add_rmsnorm_f16_warp_pdl");
    let n0 = fake.launches();
    kaio::layernorm(&s, &xv, Some(&wv), Some(&bv), &ov, 1e-5).unwrap();
    kaio::layernorm(&s, &xv, None, None, &ov, 1e-5).unwrap();
    let op = Op::layernorm(&d0, Dtype::F16, r, c, 1e-5).unwrap();
    op.launch(&s, &[xv, TensorView::none(), bv, ov]).unwrap();
    assert_eq!(fake.launches(), n0 + 3, "layernorm: one launch each");
    assert_eq!(fake.last().unwrap().name, "kaio_layernorm_f16_warp_pdl");
    s.synchronize().unwrap();

    expect_err(Op::add_rmsnorm(&d0, Dtype::F16, r, c, f32::NAN), Status::INVALID_ARGUMENT, &["kaio_op_create_add_rmsnorm", "'eps'", "nan"]);
    expect_err(Op::layernorm(&d0, Dtype::I32, r, c, 1e-5), Status::INVALID_DTYPE, &["kaio_op_create_layernorm", "i32"]);
    expect_err(op.launch(&s, &[xv, wv, bv]), Status::INVALID_ARGUMENT, &["kaio_op_launch"]);
    expect_err(kaio::add_rmsnorm(&s, &xv, &rv, &wv, &ov, -2.0), Status::INVALID_ARGUMENT, &["kaio_add_rmsnorm", "'eps'", "-2"]);
    expect_err(kaio::add_rmsnorm(&s, &xv, &xv, &wv, &ov, 1e-5), Status::INVALID_ARGUMENT, &["kaio_add_rmsnorm", "'residual'"]);
}

#[test]
fn rope_launches_and_reports_errors_on_the_fake() {
    let fake = fake_or_skip!("rope_launches_and_reports_errors_on_the_fake");
    let d0 = Device::open(0).unwrap();
    let s = Stream::non_blocking(&d0).unwrap();
    let (t, hq, hk, d) = (5, 4, 2, 64);
    let q = Buffer::<Bf16>::alloc(&d0, t * hq * d).unwrap();
    let k = Buffer::<Bf16>::alloc(&d0, t * hk * d).unwrap();
    let pos = Buffer::<i32>::alloc(&d0, t).unwrap();
    let (qv, kv, pv) = (q.view(t, hq * d), k.view(t, hk * d), pos.view(1, t));
    let desc = RopeDesc { heads_q: hq, heads_k: hk, head_dim: d, ..Default::default() };
    kaio::rope(&s, Some(&qv), Some(&kv), &pv, &desc).unwrap();
    assert_eq!(fake.last().unwrap().name, "kaio_rope_half_split_bf16_vec_pdl");
    let n0 = fake.launches();
    kaio::rope(&s, None, Some(&kv), &pv, &desc).unwrap();
    assert_eq!(fake.launches(), n0 + 1);
    let il = RopeDesc { style: RopeStyle::Interleaved, scaling: RopeScaling::Llama3, factor: 8.0, ..desc };
    let op = Op::rope(&d0, &il).unwrap();
    assert_eq!(op.kind(), "rope");
    op.launch(&s, &[qv, kv, pv]).unwrap();
    assert_eq!(fake.last().unwrap().name, "kaio_rope_interleaved_bf16_vec_pdl");
    op.launch(&s, &[qv, TensorView::none(), pv]).unwrap();
    s.synchronize().unwrap();

    expect_err(Op::rope(&d0, &RopeDesc { rotary_dim: 33, ..desc }), Status::INVALID_DIMENSION, &["kaio_op_create_rope", "desc->rotary_dim is 33", "even"]);
    expect_err(Op::rope(&d0, &RopeDesc { theta: 1.0, ..desc }), Status::INVALID_ARGUMENT, &["desc->theta is 1"]);
    expect_err(Op::rope(&d0, &RopeDesc { dtype: Dtype::I8, ..desc }), Status::INVALID_DTYPE, &["desc->dtype is i8"]);
    expect_err(
        Op::rope(&d0, &RopeDesc { scaling: RopeScaling::Linear, factor: 0.0, ..desc }),
        Status::INVALID_ARGUMENT,
        &["desc->factor is 0"],
    );
    expect_err(kaio::rope(&s, None, None, &pv, &desc), Status::INVALID_ARGUMENT, &["kaio_rope"]);
    expect_err(kaio::rope(&s, Some(&q.view(t - 1, hq * d)), Some(&kv), &pv, &desc), Status::SHAPE_MISMATCH, &["kaio_rope"]);
}

struct DecodeShape {
    b: usize,
    hq: usize,
    hkv: usize,
    d: usize,
    sk: usize,
    pages: usize,
    page: usize,
}

const DEC: DecodeShape = DecodeShape { b: 2, hq: 4, hkv: 1, d: 128, sk: 100, pages: 16, page: 16 };

fn decode_desc() -> AttentionDesc {
    let DecodeShape { b, hq, hkv, d, sk, .. } = DEC;
    AttentionDesc { dtype: Dtype::Bf16, batch: b, seq_q: 1, seq_k: sk, heads_q: hq, heads_kv: hkv, head_dim: d, ..Default::default() }
}

#[test]
fn decode_and_paged_attention_launch_and_report_errors_on_the_fake() {
    let fake = fake_or_skip!("decode_and_paged_attention_launch_and_report_errors_on_the_fake");
    let d0 = Device::open(0).unwrap();
    let s = Stream::non_blocking(&d0).unwrap();
    let DecodeShape { b, hq, hkv, d, sk, pages, page } = DEC;
    let desc = decode_desc();
    let bf = |n| Buffer::<Bf16>::alloc(&d0, n).unwrap();
    let (q, o, k, v) = (bf(b * hq * d), bf(b * hq * d), bf(b * sk * hkv * d), bf(b * sk * hkv * d));
    let lse = Buffer::<f32>::alloc(&d0, b * hq).unwrap();
    let (qv, ov, lv) = (q.view(b, hq * d), o.view(b, hq * d), lse.view(b * hq, 1));
    // The Decode variant, forced; the one-shot call does not split.
    let dd = AttentionDesc { variant: AttentionVariant::Decode, ..desc };
    kaio::attention(&s, &qv, &k.view(b * sk, hkv * d), &v.view(b * sk, hkv * d), &ov, Some(&lv), &dd).unwrap();
    assert_eq!(fake.last().unwrap().name, "kaio_attn_decode_bf16_d128_pdl");
    expect_err(
        Op::attention_backward(&d0, &dd),
        Status::UNSUPPORTED,
        &["kaio_op_create_attention_backward", "no backward"],
    );
    expect_err(
        kaio::attention(&s, &q.view(b * 17, hq * d), &k.view(b * sk, hkv * d), &v.view(b * sk, hkv * d), &o.view(b * 17, hq * d), None, &AttentionDesc { seq_q: 17, ..dd }),
        Status::UNSUPPORTED,
        &["kaio_attention", "KAIO_ATTENTION_DECODE", "17"],
    );

    // Paged: pools of 16 pages of 16 tokens, block table [B, 7].
    let (kp, vp) = (bf(pages * page * hkv * d), bf(pages * page * hkv * d));
    let table = Buffer::<i32>::alloc(&d0, b * 7).unwrap();
    let lens = Buffer::<i32>::alloc(&d0, b).unwrap();
    let kv = PagedKv {
        k_pool: kp.view(pages * page, hkv * d),
        v_pool: vp.view(pages * page, hkv * d),
        block_table: table.view(b, 7),
        seq_lens: lens.view(1, b),
    };
    let paged = AttentionPagedDesc::default();
    kaio::attention_paged(&s, &qv, &kv, &ov, None, &desc, &paged).unwrap();
    assert_eq!(fake.last().unwrap().name, "kaio_attn_decode_paged_bf16_d128_pdl");
    kaio::attention_paged(&s, &qv, &kv, &ov, Some(&lv), &desc, &paged).unwrap();
    let op = Op::attention_paged(&d0, &desc, &paged).unwrap();
    assert_eq!(op.kind(), "attention_paged");
    let n0 = fake.launches();
    op.launch(&s, &kv.tensors(qv, ov, Some(lv))).unwrap();
    assert!(fake.launches() > n0, "prepared paged attention did not launch");
    op.launch(&s, &kv.tensors(qv, ov, None)).unwrap();
    s.synchronize().unwrap();

    expect_err(
        kaio::attention_paged(&s, &qv, &kv, &ov, None, &desc, &AttentionPagedDesc { page_size: 17 }),
        Status::INVALID_ARGUMENT,
        &["kaio_attention_paged", "page_size", "17", "16, 32, 64, 128 or 256"],
    );
    expect_err(
        Op::attention_paged(&d0, &AttentionDesc { head_dim: 32, ..desc }, &paged),
        Status::UNSUPPORTED,
        &["kaio_op_create_attention_paged", "head_dim", "32", "64, 128 or 256"],
    );
    expect_err(
        Op::attention_paged(&d0, &AttentionDesc { variant: AttentionVariant::Sm80, ..desc }, &paged),
        Status::UNSUPPORTED,
        &["kaio_op_create_attention_paged", "variant", "KAIO_ATTENTION_DECODE"],
    );
    let short = PagedKv { block_table: table.view(b, 6), ..kv };
    expect_err(
        kaio::attention_paged(&s, &qv, &short, &ov, None, &desc, &paged),
        Status::SHAPE_MISMATCH,
        &["kaio_attention_paged", "'block_table'", "ceil(desc->seq_k / page_size) = 7"],
    );
    expect_err(op.launch(&s, &kv.tensors(qv, ov, None)[..6]), Status::INVALID_ARGUMENT, &["kaio_op_launch"]);
}

#[test]
fn varlen_attention_launches_and_reports_errors_on_the_fake() {
    let fake = fake_or_skip!("varlen_attention_launches_and_reports_errors_on_the_fake");
    let d0 = Device::open(0).unwrap();
    let s = Stream::non_blocking(&d0).unwrap();
    let (b, tq, tk, hq, hkv, d) = (3, 40, 48, 4, 2, 64);
    let desc = AttentionVarlenDesc {
        dtype: Dtype::Bf16,
        variant: AttentionVariant::Sm80,
        batch: b,
        max_seqlen_q: 20,
        max_seqlen_k: 24,
        total_q: tq,
        total_k: tk,
        heads_q: hq,
        heads_kv: hkv,
        head_dim: d,
        ..Default::default()
    };
    let bf = |n| Buffer::<Bf16>::alloc(&d0, n).unwrap();
    let (q, k, v, o) = (bf(tq * hq * d), bf(tk * hkv * d), bf(tk * hkv * d), bf(tq * hq * d));
    let cu = Buffer::<i32>::alloc(&d0, 2 * (b + 1)).unwrap();
    let lse = Buffer::<f32>::alloc(&d0, hq * tq).unwrap();
    let (qv, kv, vv, ov, lv) = (q.view(tq, hq * d), k.view(tk, hkv * d), v.view(tk, hkv * d), o.view(tq, hq * d), lse.view(hq, tq));
    let (cq, ck) = (cu.view(1, b + 1), cu.view(1, b + 1).with_offset(b + 1));
    kaio::attention_varlen(&s, &qv, &kv, &vv, &cq, &ck, &ov, Some(&lv), &desc).unwrap();
    assert_eq!(fake.last().unwrap().name, "kaio_attn_fwd_varlen_bf16_d64");
    kaio::attention_varlen(&s, &qv, &kv, &vv, &cq, &ck, &ov, None, &desc).unwrap();
    let fwd = Op::attention_varlen(&d0, &desc).unwrap();
    assert_eq!(fwd.kind(), "attention_varlen");
    fwd.launch(&s, &[qv, kv, vv, cq, ck, ov, lv]).unwrap();
    assert_eq!(fake.last().unwrap().name, "kaio_attn_fwd_varlen_bf16_d64");
    let (dout, dq, dk, dv) = (bf(tq * hq * d), bf(tq * hq * d), bf(tk * hkv * d), bf(tk * hkv * d));
    let bwd = Op::attention_varlen_backward(&d0, &desc).unwrap();
    bwd.launch(&s, &[dout.view(tq, hq * d), qv, kv, vv, cq, ck, ov, lv, dq.view(tq, hq * d), dk.view(tk, hkv * d), dv.view(tk, hkv * d)])
        .unwrap();
    assert_eq!(fake.last().unwrap().name, "kaio_attn_bwd_dkdv_varlen_bf16_d64");
    s.synchronize().unwrap();

    expect_err(
        Op::attention_varlen(&d0, &AttentionVarlenDesc { dtype: Dtype::F32, ..desc }),
        Status::INVALID_DTYPE,
        &["kaio_op_create_attention_varlen", "dtype", "f32"],
    );
    expect_err(
        kaio::attention_varlen(&s, &qv, &kv, &vv, &cq, &ck, &ov, None, &AttentionVarlenDesc { max_seqlen_q: 41, ..desc }),
        Status::INVALID_DIMENSION,
        &["kaio_attention_varlen", "max_seqlen_q", "41", "40"],
    );
    expect_err(
        Op::attention_varlen(&d0, &AttentionVarlenDesc { heads_kv: 3, ..desc }),
        Status::SHAPE_MISMATCH,
        &["heads_q", "heads_kv", "multiple"],
    );
    expect_err(
        Op::attention_varlen(&d0, &AttentionVarlenDesc { head_dim: 80, ..desc }),
        Status::UNSUPPORTED,
        &["head_dim", "80"],
    );
}

#[test]
fn sampling_launches_and_reports_errors_on_the_fake() {
    let fake = fake_or_skip!("sampling_launches_and_reports_errors_on_the_fake");
    let d0 = Device::open(0).unwrap();
    let s = Stream::non_blocking(&d0).unwrap();
    let (b, vocab, max_prev) = (3, 1000, 8);
    let logits = Buffer::<f32>::alloc(&d0, b * vocab).unwrap();
    let tokens = Buffer::<i32>::alloc(&d0, b).unwrap();
    let greedy = Op::sampling(&d0, &SamplingDesc { batch: b, vocab, ..Default::default() }).unwrap();
    assert_eq!(greedy.kind(), "sampling");
    let views = SamplingViews::new(logits.view(b, vocab), tokens.view(1, b));
    let n0 = fake.launches();
    greedy.launch(&s, &views.tensors()).unwrap();
    assert_eq!(fake.launches(), n0 + 1);
    assert_eq!(fake.last().unwrap().name, "kaio_sample_f32");

    // Every feature on: every view present.
    let f32v = |n| Buffer::<f32>::alloc(&d0, n).unwrap();
    let i32v = |n| Buffer::<i32>::alloc(&d0, n).unwrap();
    let (temp, top_p, min_p, probs, logprobs, pen) = (f32v(b), f32v(b), f32v(b), f32v(b), f32v(b), f32v(b * 3));
    let (top_k, prev, prev_lens) = (i32v(b), i32v(b * max_prev), i32v(b));
    let rng = Buffer::<u32>::alloc(&d0, b * 4).unwrap();
    let all = SamplingFeatures::RANDOM
        | SamplingFeatures::TOP_K
        | SamplingFeatures::TOP_P
        | SamplingFeatures::MIN_P
        | SamplingFeatures::PENALTIES
        | SamplingFeatures::PROBS;
    let full = SamplingViews {
        temperature: Some(temp.view(1, b)),
        top_k: Some(top_k.view(1, b)),
        top_p: Some(top_p.view(b, 1)),
        min_p: Some(min_p.view(1, b)),
        rng: Some(rng.view(b, 4)),
        prev: Some(prev.view(b, max_prev)),
        prev_lens: Some(prev_lens.view(1, b)),
        penalties: Some(pen.view(b, 3)),
        probs: Some(probs.view(1, b)),
        logprobs: Some(logprobs.view(1, b)),
        ..views
    };
    let op = Op::sampling(&d0, &SamplingDesc { batch: b, vocab, max_prev, features: all, ..Default::default() }).unwrap();
    let n0 = fake.launches();
    op.launch(&s, &full.tensors()).unwrap();
    assert!(fake.launches() > n0, "sampling with every feature did not launch");
    s.synchronize().unwrap();

    // A feature's views must be present exactly when the desc has it.
    expect_err(op.launch(&s, &views.tensors()), Status::INVALID_ARGUMENT, &["kaio_op_launch"]);
    expect_err(greedy.launch(&s, &full.tensors()), Status::INVALID_ARGUMENT, &["kaio_op_launch"]);
    expect_err(greedy.launch(&s, &views.tensors()[..11]), Status::INVALID_ARGUMENT, &["kaio_op_launch"]);
    let d = SamplingDesc { batch: b, vocab, ..Default::default() };
    expect_err(Op::sampling(&d0, &SamplingDesc { dtype: Dtype::I32, ..d }), Status::INVALID_DTYPE, &["kaio_op_create_sampling", "desc->dtype", "i32"]);
    expect_err(Op::sampling(&d0, &SamplingDesc { batch: 0, ..d }), Status::INVALID_DIMENSION, &["desc->batch is 0"]);
    expect_err(Op::sampling(&d0, &SamplingDesc { features: SamplingFeatures::from_bits(0x100), ..d }), Status::INVALID_ARGUMENT, &["desc->features", "0x100"]);
    expect_err(Op::sampling(&d0, &SamplingDesc { features: SamplingFeatures::TOP_K, ..d }), Status::INVALID_ARGUMENT, &["KAIO_SAMPLING_RANDOM"]);
    expect_err(Op::sampling(&d0, &SamplingDesc { features: SamplingFeatures::PENALTIES, ..d }), Status::INVALID_DIMENSION, &["desc->max_prev is 0"]);
}

#[test]
fn rope_kv_cache_write_launches_and_reports_errors_on_the_fake() {
    let fake = fake_or_skip!("rope_kv_cache_write_launches_and_reports_errors_on_the_fake");
    let d0 = Device::open(0).unwrap();
    let s = Stream::non_blocking(&d0).unwrap();
    let (t, hq, hk, d, rows) = (5, 4, 2, 64, 32);
    let q = Buffer::<Bf16>::alloc(&d0, t * hq * d).unwrap();
    let k = Buffer::<Bf16>::alloc(&d0, t * hk * d).unwrap();
    let v = Buffer::<Bf16>::alloc(&d0, t * hk * d).unwrap();
    let pos = Buffer::<i32>::alloc(&d0, t).unwrap();
    let slots = Buffer::<i32>::alloc(&d0, t).unwrap();
    let kc = Buffer::<Bf16>::alloc(&d0, rows * hk * d).unwrap();
    let vc = Buffer::<Bf16>::alloc(&d0, rows * hk * d).unwrap();
    let (qv, kv, vv, pv, sv) = (q.view(t, hq * d), k.view(t, hk * d), v.view(t, hk * d), pos.view(1, t), slots.view(1, t));
    let (kcv, vcv) = (kc.view(rows, hk * d), vc.view(rows, hk * d));
    let desc = RopeDesc { heads_q: hq, heads_k: hk, head_dim: d, ..Default::default() };
    let caches = kaio::KvCaches { k_cache: &kcv, v_cache: Some(&vcv) };
    kaio::rope_kv_cache_write(&s, Some(&qv), &kv, Some(&vv), &pv, &sv, caches, &desc).unwrap();
    assert_eq!(fake.last().unwrap().name, "kaio_rope_cache_half_split_bf16_vec_pdl");
    let op = Op::rope_kv_cache_write(&d0, &desc).unwrap();
    assert_eq!(op.kind(), "rope_kv_cache_write");
    op.launch(&s, &[TensorView::none(), kv, TensorView::none(), pv, sv, kcv, TensorView::none()]).unwrap();
    s.synchronize().unwrap();
    expect_err(
        kaio::rope_kv_cache_write(&s, None, &kv, Some(&vv), &pv, &sv, kaio::KvCaches { k_cache: &kcv, v_cache: None }, &desc),
        Status::INVALID_ARGUMENT,
        &["kaio_rope_kv_cache_write", "v_cache"],
    );
    expect_err(
        Op::rope_kv_cache_write(&d0, &RopeDesc { heads_k: 0, ..desc }),
        Status::INVALID_DIMENSION,
        &["kaio_op_create_rope_kv_cache_write", "heads_k"],
    );
}

#[test]
fn paged_prefill_launches_and_reports_errors_on_the_fake() {
    let fake = fake_or_skip!("paged_prefill_launches_and_reports_errors_on_the_fake");
    let d0 = Device::open(0).unwrap();
    let s = Stream::non_blocking(&d0).unwrap();
    // 3 sequences, 40 packed new rows (at most 20 each), up to 48 keys each
    // in pages of 16 (block table [3, 3]), pools of 8 pages.
    let (b, tq, hq, hkv, d, page, pages, per_seq) = (3, 40, 4, 2, 64, 16, 8, 3);
    let desc = AttentionVarlenDesc {
        dtype: Dtype::Bf16,
        batch: b,
        max_seqlen_q: 20,
        max_seqlen_k: 48,
        total_q: tq,
        total_k: 0,
        heads_q: hq,
        heads_kv: hkv,
        head_dim: d,
        ..Default::default()
    };
    let bf = |n| Buffer::<Bf16>::alloc(&d0, n).unwrap();
    let (q, o, kp, vp) = (bf(tq * hq * d), bf(tq * hq * d), bf(pages * page * hkv * d), bf(pages * page * hkv * d));
    let lse = Buffer::<f32>::alloc(&d0, hq * tq).unwrap();
    let cu = Buffer::<i32>::alloc(&d0, b + 1).unwrap();
    let table = Buffer::<i32>::alloc(&d0, b * per_seq).unwrap();
    let lens = Buffer::<i32>::alloc(&d0, b).unwrap();
    let (qv, ov, lv, cq) = (q.view(tq, hq * d), o.view(tq, hq * d), lse.view(hq, tq), cu.view(1, b + 1));
    let kv = PagedKv {
        k_pool: kp.view(pages * page, hkv * d),
        v_pool: vp.view(pages * page, hkv * d),
        block_table: table.view(b, per_seq),
        seq_lens: lens.view(1, b),
    };
    let paged = AttentionPagedDesc::default();
    // AUTO on the fake's compute capability 9.0: the sm_90a kernel.
    kaio::attention_paged_prefill(&s, &qv, &cq, &kv, &ov, Some(&lv), &desc, &paged).unwrap();
    assert_eq!(fake.last().unwrap().name, "kaio_attn_fwd_paged_sm90_bf16_d64");
    kaio::attention_paged_prefill(&s, &qv, &cq, &kv, &ov, None, &desc, &paged).unwrap();
    let op = Op::attention_paged_prefill(&d0, &AttentionVarlenDesc { variant: AttentionVariant::Sm80, ..desc }, &paged)
        .unwrap();
    assert_eq!(op.kind(), "attention_paged_prefill");
    op.launch(&s, &kv.prefill_tensors(qv, cq, ov, Some(lv))).unwrap();
    assert_eq!(fake.last().unwrap().name, "kaio_attn_fwd_paged_bf16_d64");
    op.launch(&s, &kv.prefill_tensors(qv, cq, ov, None)).unwrap();
    s.synchronize().unwrap();

    expect_err(
        kaio::attention_paged_prefill(&s, &qv, &cq, &kv, &ov, None, &desc, &AttentionPagedDesc { page_size: 17 }),
        Status::INVALID_ARGUMENT,
        &["kaio_attention_paged_prefill", "page_size", "17"],
    );
    expect_err(
        Op::attention_paged_prefill(&d0, &AttentionVarlenDesc { total_k: 5, ..desc }, &paged),
        Status::INVALID_DIMENSION,
        &["kaio_op_create_attention_paged_prefill", "total_k"],
    );
    expect_err(op.launch(&s, &kv.prefill_tensors(qv, cq, ov, None)[..7]), Status::INVALID_ARGUMENT, &["kaio_op_launch"]);
}
