//! Host tests on the fake CUDA driver for the k-quant, quantized-matmul,
//! attention and kernel-language wrappers: each op launches through both the
//! prepared and one-shot paths, descs default to libkaio's, and bad inputs
//! come back as the exact status with libkaio's message.
mod common;

use common::expect_err;
use kaio::{
    AttentionDesc, AttentionMask, Bf16, Buffer, Device, Dtype, FlashGrads, Int4Format, Int4Weight, LangKernel, MatmulInt4Desc,
    MatmulInt8Desc, MatmulVariant, Op, QkvInt4Desc, QkvInt8Desc, QuantFormat, QuantMode, Status, Stream, TensorView, F16,
};

const SILU_GATE: &str = "kernel silu_gate(x: tensor<f16>, gate: tensor<f16>, out: tensor<f16>) {\n    out = x * sigmoid(x) * gate;\n}\n";

fn launched(fake: &common::Fake, before: u64, what: &str) {
    assert!(fake.launches() > before, "{} did not launch", what);
}

#[test]
fn quant_block_sizes_need_no_driver() {
    assert_eq!(QuantFormat::Q8_0.block_elems(), 32);
    assert_eq!(QuantFormat::Q8_0.block_bytes(), 34);
    assert_eq!(QuantFormat::Q4K.block_bytes(), 144);
    assert_eq!(QuantFormat::Q5K.block_bytes(), 176);
    assert_eq!(QuantFormat::Q6K.block_bytes(), 210);
    assert_eq!(QuantFormat::Q6K.row_bytes(4096), Some(16 * 210));
    assert_eq!(QuantFormat::Q4K.row_bytes(100), None);
}

#[test]
fn new_descs_default_to_libkaio_defaults() {
    use kaio::sys;
    let mut i8d = sys::kaio_matmul_int8_desc::default();
    assert_eq!(unsafe { sys::kaio_matmul_int8_desc_init(&mut i8d, std::mem::size_of_val(&i8d)) }, 0);
    assert_eq!(MatmulInt8Desc::default().to_raw().unwrap(), i8d);
    let mut i4d = sys::kaio_matmul_int4_desc::default();
    assert_eq!(unsafe { sys::kaio_matmul_int4_desc_init(&mut i4d, std::mem::size_of_val(&i4d)) }, 0);
    // group_size: the wrapper's 0 means "libkaio's default", which C spells 0 too
    // or fills in; compare everything else field by field.
    let w = MatmulInt4Desc::default().to_raw().unwrap();
    assert_eq!((w.in_dtype, w.out_dtype, w.format, w.zeros_offset), (i4d.in_dtype, i4d.out_dtype, i4d.format, i4d.zeros_offset));
    let mut q = sys::kaio_qkv_int4_desc::default();
    assert_eq!(unsafe { sys::kaio_qkv_int4_desc_init(&mut q, std::mem::size_of_val(&q)) }, 0);
    let w = QkvInt4Desc::default().to_raw().unwrap();
    assert_eq!((w.in_dtype, w.out_dtype, w.format), (q.in_dtype, q.out_dtype, q.format));
    let mut a = sys::kaio_attention_desc::default();
    assert_eq!(unsafe { sys::kaio_attention_desc_init(&mut a, std::mem::size_of_val(&a)) }, 0);
    assert_eq!(AttentionDesc::default().to_raw().unwrap(), a);
    // deterministic reaches the C desc: default 1, false gives 0.
    assert!(AttentionDesc::default().deterministic);
    assert_eq!(a.deterministic, 1);
    let nd = AttentionDesc { deterministic: false, ..Default::default() }.to_raw().unwrap();
    assert_eq!(nd, sys::kaio_attention_desc { deterministic: 0, ..a });
}

#[test]
fn kquant_ops_launch_and_report_errors_on_the_fake() {
    let fake = fake_or_skip!("kquant_ops_launch_and_report_errors_on_the_fake");
    let d0 = Device::open(0).unwrap();
    let s = Stream::non_blocking(&d0).unwrap();
    let (rows, cols) = (3, 512);
    let x = Buffer::<f32>::alloc(&d0, rows * cols).unwrap();
    let qb = QuantFormat::Q6K.row_bytes(cols).unwrap();
    let q = Buffer::<u8>::alloc(&d0, rows * qb).unwrap();
    let n0 = fake.launches();
    kaio::quantize(&s, &x.view(rows, cols), &q.view(rows, qb), QuantFormat::Q6K, QuantMode::Candle).unwrap();
    launched(&fake, n0, "quantize");
    assert_eq!(fake.last().unwrap().name, "kaio_kq_quantize_q6_k_candle");
    let op = Op::quantize(&d0, QuantFormat::Q6K, QuantMode::Ggml, Dtype::F32, rows, cols).unwrap();
    assert_eq!(op.kind(), "quantize");
    op.launch(&s, &[x.view(rows, cols), q.view(rows, qb)]).unwrap();
    assert_eq!(fake.last().unwrap().name, "kaio_kq_quantize_q6_k_ggml");
    kaio::dequantize(&s, &q.view(rows, qb), &x.view(rows, cols), QuantFormat::Q6K).unwrap();
    assert_eq!(fake.last().unwrap().name, "kaio_kq_dequantize_q6_k");
    Op::dequantize(&d0, QuantFormat::Q6K, Dtype::F32, rows, cols)
        .unwrap()
        .launch(&s, &[q.view(rows, qb), x.view(rows, cols)])
        .unwrap();
    // Dequant-matmul: A 3 x 512 f16, W 40 x 512 Q8_0, C 3 x 40 f32.
    let a = Buffer::<F16>::alloc(&d0, 16 * cols).unwrap();
    let wb = QuantFormat::Q8_0.row_bytes(cols).unwrap();
    let w = Buffer::<u8>::alloc(&d0, 40 * wb).unwrap();
    let c = Buffer::<f32>::alloc(&d0, 16 * 40).unwrap();
    kaio::quant_matmul(&s, &a.view(3, cols), &w.view(40, wb), &c.view(3, 40), QuantFormat::Q8_0).unwrap();
    // The fake device is sm_90: the streaming matvec (the choice is tested in C++).
    assert_eq!(fake.last().unwrap().name, "kaio_kq_stream_q8_0_f16");
    let big = Op::quant_matmul(&d0, QuantFormat::Q8_0, Dtype::F16, Dtype::F32, 16, 40, cols).unwrap();
    let n0 = fake.launches();
    big.launch(&s, &[a.view(16, cols), w.view(40, wb), c.view(16, 40)]).unwrap();
    assert_eq!(fake.launches(), n0 + 2, "M > 8: dequantize, then the tensor-core matmul");
    s.synchronize().unwrap();

    expect_err(
        Op::quantize(&d0, QuantFormat::Q4K, QuantMode::Ggml, Dtype::F32, rows, 100),
        Status::INVALID_DIMENSION,
        &["kaio_op_create_quantize", "100"],
    );
    expect_err(
        Op::dequantize(&d0, QuantFormat::Q8_0, Dtype::I32, rows, cols),
        Status::INVALID_DTYPE,
        &["kaio_op_create_dequantize"],
    );
    expect_err(
        kaio::quant_matmul(&s, &a.view(16, cols), &w.view(40, wb), &c.view(16, 40), QuantFormat::Q8_0),
        Status::UNSUPPORTED,
        &["kaio_quant_matmul"],
    );
    expect_err(
        kaio::quantize(&s, &x.view(rows, cols), &q.view(rows, qb - 2), QuantFormat::Q6K, QuantMode::Ggml),
        Status::SHAPE_MISMATCH,
        &["kaio_quantize"],
    );
}

#[test]
fn quantized_matmuls_launch_and_report_errors_on_the_fake() {
    let fake = fake_or_skip!("quantized_matmuls_launch_and_report_errors_on_the_fake");
    let d0 = Device::open(0).unwrap();
    let s = Stream::non_blocking(&d0).unwrap();
    // INT8: A 4 x 64, B 32 x 64, C 4 x 32.
    let a8 = Buffer::<i8>::alloc(&d0, 4 * 64).unwrap();
    let b8 = Buffer::<i8>::alloc(&d0, 32 * 64).unwrap();
    let sa = Buffer::<f32>::alloc(&d0, 4).unwrap();
    let c = Buffer::<f32>::alloc(&d0, 72 * 96).unwrap();
    let n0 = fake.launches();
    kaio::matmul_int8(&s, &a8.view(4, 64), &b8.view(32, 64), Some(&sa.view(1, 4)), None, &c.view(4, 32), &Default::default())
        .unwrap();
    launched(&fake, n0, "matmul_int8");
    let op = Op::matmul_int8(&d0, &MatmulInt8Desc { m: 4, n: 32, k: 64, ..Default::default() }).unwrap();
    let n0 = fake.launches();
    op.launch(&s, &[a8.view(4, 64), b8.view(32, 64), TensorView::none(), TensorView::none(), c.view(4, 32)]).unwrap();
    launched(&fake, n0, "prepared matmul_int8");
    expect_err(
        Op::matmul_int8(&d0, &MatmulInt8Desc { m: 4, n: 32, k: 24, ..Default::default() }),
        Status::INVALID_DIMENSION,
        &["kaio_op_create_matmul_int8", "24"],
    );

    // INT4 GPTQ: A 2 x 256 f16, K 256, N 64, group 128.
    let (m, k, n) = (2, 256, 64);
    let a = Buffer::<F16>::alloc(&d0, 72 * k).unwrap();
    let qw = Buffer::<u32>::alloc(&d0, k / 8 * n).unwrap();
    let qz = Buffer::<u32>::alloc(&d0, k / 128 * n / 8).unwrap();
    let sc = Buffer::<F16>::alloc(&d0, k / 128 * n).unwrap();
    let w = Int4Weight { qweight: qw.view(k / 8, n), qzeros: Some(qz.view(k / 128, n / 8)), scales: sc.view(k / 128, n) };
    let n0 = fake.launches();
    kaio::matmul_int4(&s, &a.view(m, k), &w, &c.view(m, n), &Default::default()).unwrap();
    launched(&fake, n0, "matmul_int4");
    let d4 = MatmulInt4Desc { m: 72, n, k, ..Default::default() };
    let op = Op::matmul_int4(&d0, &d4).unwrap();
    let n0 = fake.launches();
    op.launch(&s, &[a.view(72, k), w.qweight, w.qzeros.unwrap(), w.scales, c.view(72, n)]).unwrap();
    assert_eq!(fake.launches(), n0 + 1, "M > 64 on the fake sm_90: one dequantize-into-wgmma launch");
    expect_err(
        kaio::matmul_int4(&s, &a.view(m, k), &w, &c.view(m, n), &MatmulInt4Desc { group_size: 96, ..Default::default() }),
        Status::INVALID_ARGUMENT,
        &["kaio_matmul_int4", "group_size", "96"],
    );
    let signed = MatmulInt4Desc { format: Int4Format::Signed, ..Default::default() };
    let no_zeros = Int4Weight { qzeros: None, ..w };
    kaio::matmul_int4(&s, &a.view(m, k), &no_zeros, &c.view(m, n), &signed).unwrap();

    // Repack: u32 300 x 16 -> 16 x 300.
    let src = Buffer::<u32>::alloc(&d0, 300 * 16).unwrap();
    let dst = Buffer::<u32>::alloc(&d0, 300 * 16).unwrap();
    kaio::int4_repack_kaio(&s, &src.view(300, 16), &dst.view(16, 300)).unwrap();
    assert_eq!(fake.last().unwrap().name, "kaio_int4_transpose_u32");

    // Fused QKV: the same weight three times, GQA-style N.
    let o = [Buffer::<F16>::alloc(&d0, m * n).unwrap(), Buffer::<F16>::alloc(&d0, m * n).unwrap(), Buffer::<F16>::alloc(&d0, m * n).unwrap()];
    let n0 = fake.launches();
    kaio::qkv_project_int4(&s, &a.view(m, k), [&w, &w, &w], [&o[0].view(m, n), &o[1].view(m, n), &o[2].view(m, n)], &Default::default())
        .unwrap();
    assert_eq!(fake.launches(), n0 + 1, "one fused launch");
    let qd = QkvInt4Desc { m, k, n_q: n, n_k: n, n_v: n, ..Default::default() };
    let op = Op::qkv_project_int4(&d0, &qd).unwrap();
    let list = kaio::qkv_int4_tensors(a.view(m, k), [&w, &w, &w], [o[0].view(m, n), o[1].view(m, n), o[2].view(m, n)]);
    op.launch(&s, &list).unwrap();
    expect_err(op.launch(&s, &list[..12]), Status::INVALID_ARGUMENT, &["kaio_op_launch"]);

    // Fused INT8-weight QKV: x f16 2 x 64, W_p i8 64 x 32, per-column scales.
    let w8 = Buffer::<i8>::alloc(&d0, 64 * 32).unwrap();
    let sc8 = Buffer::<f32>::alloc(&d0, 32).unwrap();
    let (wv, sv) = (w8.view(64, 32), sc8.view(1, 32));
    let ov: Vec<TensorView<'_>> = o.iter().map(|b| b.view(m, 32)).collect();
    let n0 = fake.launches();
    kaio::qkv_project_int8(&s, &a.view(m, 64), [&wv, &wv, &wv], [&sv, &sv, &sv], [&ov[0], &ov[1], &ov[2]], &Default::default())
        .unwrap();
    assert_eq!(fake.launches(), n0 + 1, "one fused int8 launch");
    let q8 = QkvInt8Desc { m, k: 64, n_q: 32, n_k: 32, n_v: 32, ..Default::default() };
    let list8 = kaio::qkv_int8_tensors(a.view(m, 64), [wv, wv, wv], [sv, sv, sv], [ov[0], ov[1], ov[2]]);
    Op::qkv_project_int8(&d0, &q8).unwrap().launch(&s, &list8).unwrap();
    expect_err(
        Op::qkv_project_int8(&d0, &QkvInt8Desc { k: 48, ..q8 }),
        Status::INVALID_DIMENSION,
        &["kaio_op_create_qkv_project_int8", "48", "multiple of 32"],
    );
    // INT8 matmul forced onto the mma.sync kernel.
    let n0 = fake.launches();
    let da = MatmulInt8Desc { variant: MatmulVariant::Async, ..Default::default() };
    kaio::matmul_int8(&s, &a8.view(4, 64), &b8.view(32, 64), None, None, &c.view(4, 32), &da).unwrap();
    launched(&fake, n0, "matmul_int8 Async");
    s.synchronize().unwrap();
}

#[test]
fn attention_launches_and_reports_errors_on_the_fake() {
    let fake = fake_or_skip!("attention_launches_and_reports_errors_on_the_fake");
    let d0 = Device::open(0).unwrap();
    let s = Stream::non_blocking(&d0).unwrap();
    let (b, sq, sk, hq, hkv, d) = (2, 16, 24, 4, 2, 64);
    let desc = AttentionDesc { batch: b, seq_q: sq, seq_k: sk, heads_q: hq, heads_kv: hkv, head_dim: d, ..Default::default() };
    let q = Buffer::<F16>::alloc(&d0, b * sq * hq * d).unwrap();
    let k = Buffer::<F16>::alloc(&d0, b * sk * hkv * d).unwrap();
    let v = Buffer::<F16>::alloc(&d0, b * sk * hkv * d).unwrap();
    let o = Buffer::<F16>::alloc(&d0, b * sq * hq * d).unwrap();
    let lse = Buffer::<f32>::alloc(&d0, b * hq * sq).unwrap();
    let (qv, kv, vv, ov) = (q.view(b * sq, hq * d), k.view(b * sk, hkv * d), v.view(b * sk, hkv * d), o.view(b * sq, hq * d));
    let n0 = fake.launches();
    kaio::attention(&s, &qv, &kv, &vv, &ov, Some(&lse.view(b * hq, sq)), &desc).unwrap();
    launched(&fake, n0, "attention");
    let n0 = fake.launches();
    kaio::attention(&s, &qv, &kv, &vv, &ov, None, &AttentionDesc { mask: AttentionMask::Causal, ..desc }).unwrap();
    launched(&fake, n0, "attention without LSE");
    let fwd = Op::attention(&d0, &desc).unwrap();
    fwd.launch(&s, &[qv, kv, vv, ov, lse.view(b * hq, sq)]).unwrap();

    let dout = Buffer::<F16>::alloc(&d0, b * sq * hq * d).unwrap();
    let dq = Buffer::<F16>::alloc(&d0, b * sq * hq * d).unwrap();
    let dk = Buffer::<F16>::alloc(&d0, b * sk * hkv * d).unwrap();
    let dv = Buffer::<F16>::alloc(&d0, b * sk * hkv * d).unwrap();
    let bwd = Op::attention_backward(&d0, &desc).unwrap();
    let n0 = fake.launches();
    bwd.launch(
        &s,
        &[dout.view(b * sq, hq * d), qv, kv, vv, ov, lse.view(b * hq, sq), dq.view(b * sq, hq * d), dk.view(b * sk, hkv * d), dv.view(b * sk, hkv * d)],
    )
    .unwrap();
    assert_eq!(fake.launches(), n0 + 3, "backward: Dv, dQ, then dK and dV");

    // KAIO's rank-2 single head: f16 [S, D] -> f32 out.
    let out = Buffer::<f32>::alloc(&d0, sq * d).unwrap();
    for &causal in &[false, true] {
        let n0 = fake.launches();
        kaio::attention_tc(&s, &q.view(sq, d), &k.view(sk, d), &v.view(sk, d), &out.view(sq, d), causal).unwrap();
        launched(&fake, n0, "attention_tc");
    }
    s.synchronize().unwrap();

    expect_err(Op::attention(&d0, &AttentionDesc { heads_kv: 3, ..desc }), Status::SHAPE_MISMATCH, &["heads_q", "heads_kv"]);
    expect_err(Op::attention(&d0, &AttentionDesc { head_dim: 80, ..desc }), Status::UNSUPPORTED, &["head_dim", "80"]);
    expect_err(Op::attention(&d0, &AttentionDesc { dtype: Dtype::F32, ..desc }), Status::INVALID_DTYPE, &["dtype", "f32"]);
    expect_err(
        kaio::attention_tc(&s, &q.view(sq, 80), &k.view(sk, 80), &v.view(sk, 80), &out.view(sq, 80), false),
        Status::UNSUPPORTED,
        &["kaio_attention_tc"],
    );

    // KAIO's f32 single-head flash: forward with and without stats, backward.
    let n = 20;
    let f = |len| Buffer::<f32>::alloc(&d0, len).unwrap();
    let (fq, fk, fv, fo, fl, fdo) = (f(n * d), f(n * d), f(n * d), f(n * d), f(n), f(n * d));
    let (fdq, fdk, fdv) = (f(n * d), f(n * d), f(n * d));
    let (qv, kv, vv, ov) = (fq.view(n, d), fk.view(n, d), fv.view(n, d), fo.view(n, d));
    for &causal in &[false, true] {
        let n0 = fake.launches();
        kaio::attention_flash(&s, &qv, &kv, &vv, &ov, None, causal).unwrap();
        kaio::attention_flash(&s, &qv, &kv, &vv, &ov, Some(&fl.view(1, n)), causal).unwrap();
        assert_eq!(fake.launches(), n0 + 2, "attention_flash");
        let grads = FlashGrads { dq: fdq.view(n, d), dk: fdk.view(n, d), dv: fdv.view(n, d) };
        let n0 = fake.launches();
        kaio::attention_flash_backward(&s, &fdo.view(n, d), &qv, &kv, &vv, &ov, &fl.view(1, n), &grads, causal).unwrap();
        assert_eq!(fake.launches(), n0 + 3, "attention_flash_backward: rowsum, dK and dV, then dQ");
    }
    s.synchronize().unwrap();
    expect_err(
        kaio::attention_flash(&s, &q.view(sq, d), &k.view(sq, d), &v.view(sq, d), &out.view(sq, d), None, false),
        Status::INVALID_DTYPE,
        &["kaio_attention_flash", "'q'"],
    );
}

#[test]
fn lang_compiles_launches_and_reports_source_errors() {
    // Compiling needs no driver.
    let ptx = kaio::compile_ptx(SILU_GATE).unwrap();
    assert!(ptx.contains(".entry") && ptx.contains("silu_gate"), "{}", ptx);
    let e = expect_err(
        kaio::compile_ptx("kernel k(x: tensor<f32>, out: tensor<f32>) {\n    out = x +;\n}\n"),
        Status::KERNEL_SOURCE,
        &["kaio_lang_compile_ptx", "2:"],
    );
    assert_eq!(e.status().category(), Status(-400));
    expect_err(kaio::compile_ptx("kernel\0k"), Status::INVALID_ARGUMENT, &["NUL"]);

    let fake = fake_or_skip!("lang_compiles_launches_and_reports_source_errors");
    let d0 = Device::open(0).unwrap();
    let s = Stream::non_blocking(&d0).unwrap();
    let mut k = LangKernel::new(&d0, SILU_GATE).unwrap();
    assert_eq!(k.ptx().unwrap(), ptx);
    let (r, c) = (5, 33);
    let x = Buffer::<F16>::alloc(&d0, r * c).unwrap();
    let g = Buffer::<F16>::alloc(&d0, r * c).unwrap();
    let o = Buffer::<F16>::alloc(&d0, r * c).unwrap();
    let n0 = fake.launches();
    k.launch(&s, &[x.view(r, c), g.view(r, c), o.view(r, c)], &[]).unwrap();
    launched(&fake, n0, "lang kernel");
    s.synchronize().unwrap();
    k.check().unwrap();
    expect_err(k.launch(&s, &[x.view(r, c), g.view(r, c)], &[]), Status::INVALID_ARGUMENT, &["kaio_lang_kernel_launch"]);
    expect_err(k.launch(&s, &[x.view(r, c), g.view(r, c - 1), o.view(r, c)], &[]), Status::SHAPE_MISMATCH, &["kaio_lang_kernel_launch"]);
    expect_err(LangKernel::new(&d0, "kernel k(x: tensor<f9>) {}"), Status::KERNEL_SOURCE, &["kaio_lang_kernel_create", "1:"]);
}

#[test]
fn kv_cache_write_launches_and_reports_errors_on_the_fake() {
    let fake = fake_or_skip!("kv_cache_write_launches_and_reports_errors_on_the_fake");
    let d0 = Device::open(0).unwrap();
    let s = Stream::non_blocking(&d0).unwrap();
    let (t, w, rows) = (3, 256, 32);
    let k = Buffer::<Bf16>::alloc(&d0, t * w).unwrap();
    let v = Buffer::<Bf16>::alloc(&d0, t * w).unwrap();
    let slots = Buffer::<i32>::alloc(&d0, t).unwrap();
    let kc = Buffer::<Bf16>::alloc(&d0, rows * w).unwrap();
    let vc = Buffer::<Bf16>::alloc(&d0, rows * w).unwrap();
    let n0 = fake.launches();
    kaio::kv_cache_write(&s, &k.view(t, w), Some(&v.view(t, w)), &slots.view(1, t), &kc.view(rows, w), Some(&vc.view(rows, w)))
        .unwrap();
    launched(&fake, n0, "kv_cache_write");
    assert_eq!(fake.last().unwrap().name, "kaio_kv_cache_write_pdl");
    kaio::kv_cache_write(&s, &k.view(t, w), None, &slots.view(1, t), &kc.view(rows, w), None).unwrap();
    let op = Op::kv_cache_write(&d0, Dtype::Bf16, t, w, rows).unwrap();
    assert_eq!(op.kind(), "kv_cache_write");
    op.launch(&s, &[k.view(t, w), TensorView::none(), slots.view(1, t), kc.view(rows, w), TensorView::none()]).unwrap();
    expect_err(
        kaio::kv_cache_write(&s, &k.view(t, w), Some(&v.view(t, w)), &slots.view(1, t), &kc.view(rows, w), None),
        Status::INVALID_ARGUMENT,
        &["kaio_kv_cache_write", "v_cache"],
    );
    expect_err(Op::kv_cache_write(&d0, Dtype::Bf16, t, 12, rows), Status::UNSUPPORTED, &["kaio_op_create_kv_cache_write", "16 bytes"]);
    s.synchronize().unwrap();
}
