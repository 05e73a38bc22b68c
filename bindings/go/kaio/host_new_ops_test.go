package kaio_test

// Host tests on the fake driver for the k-quant, quantized-matmul,
// attention and kernel-language wrappers: each op launches (prepared and
// one-shot), descs default to libkaio's, and bad inputs return the exact
// status with libkaio's message.

import (
	"strings"
	"testing"

	"kaio.dev/kaio"
)

const siluGateSource = "kernel silu_gate(x: tensor<f16>, gate: tensor<f16>, out: tensor<f16>) {\n    out = x * sigmoid(x) * gate;\n}\n"

// fakeBuf is a rows x cols view of a fresh buffer on d, closed at cleanup.
func fakeBuf(t *testing.T, d *kaio.Device, dt kaio.DType, rows, cols int64) kaio.Tensor {
	t.Helper()
	b := must(d.NewBuffer(uint64(rows * cols * int64(dt.Size())))).get(t)
	t.Cleanup(func() { b.Close() })
	return kaio.View(b, dt, rows, cols)
}

func lastKernel(t *testing.T) string {
	t.Helper()
	l, found := fake.LastLaunch()
	if !found {
		t.Fatal("no launch recorded")
	}
	return l.Name
}

func TestQuantBlockSizes(t *testing.T) {
	if kaio.QuantQ8_0.BlockElems() != 32 || kaio.QuantQ8_0.BlockBytes() != 34 || kaio.QuantQ4K.BlockBytes() != 144 ||
		kaio.QuantQ5K.BlockBytes() != 176 || kaio.QuantQ6K.BlockBytes() != 210 || kaio.QuantQ6K.BlockElems() != 256 {
		t.Fatal("block sizes differ from GGUF's")
	}
	if kaio.QuantQ6K.RowBytes(4096) != 16*210 || kaio.QuantQ4K.RowBytes(100) != 0 {
		t.Fatal("row bytes wrong")
	}
}

func TestNewDescDefaults(t *testing.T) {
	i8 := kaio.DefaultMatmulInt8Desc()
	if i8.OutDType != kaio.DTypeF32 || i8.Alpha != 1 {
		t.Fatalf("int8 defaults %+v", i8)
	}
	i4 := kaio.DefaultMatmulInt4Desc()
	if i4.InDType != kaio.DTypeF16 || i4.OutDType != kaio.DTypeF32 || i4.Format != kaio.Int4GPTQ {
		t.Fatalf("int4 defaults %+v", i4)
	}
	q := kaio.DefaultQKVInt4Desc()
	if q.InDType != kaio.DTypeF16 || q.OutDType != kaio.DTypeF16 {
		t.Fatalf("qkv defaults %+v", q)
	}
	a := kaio.DefaultAttentionDesc()
	if a.DType != kaio.DTypeF16 || a.Mask != kaio.AttentionMaskNone || a.Variant != kaio.AttentionAuto || a.HeadDim != 0 {
		t.Fatalf("attention defaults %+v", a)
	}
}

func TestKquantOnTheFake(t *testing.T) {
	h := needFake(t)
	d0, _ := open2(t)
	s := must(d0.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	const rows, cols = 3, 512
	qb := kaio.QuantQ6K.RowBytes(cols)
	x, q := fakeBuf(t, d0, kaio.DTypeF32, rows, cols), fakeBuf(t, d0, kaio.DTypeU8, rows, qb)
	ok(t, kaio.Quantize(s, x, q, kaio.QuantQ6K, kaio.QuantModeCandle))
	if n := lastKernel(t); n != "kaio_kq_quantize_q6_k_candle" {
		t.Fatal(n)
	}
	op := must(d0.NewQuantizeOp(kaio.QuantQ6K, kaio.QuantModeGGML, kaio.DTypeF32, rows, cols)).get(t)
	ok(t, op.Launch(s, x, q))
	ok(t, op.Close())
	ok(t, op.Close()) // idempotent
	ok(t, kaio.Dequantize(s, q, x, kaio.QuantQ6K))
	if n := lastKernel(t); n != "kaio_kq_dequantize_q6_k" {
		t.Fatal(n)
	}
	dq := must(d0.NewDequantizeOp(kaio.QuantQ6K, kaio.DTypeF32, rows, cols)).get(t)
	defer dq.Close()
	ok(t, dq.Launch(s, q, x))
	wb := kaio.QuantQ8_0.RowBytes(cols)
	a, w, c := fakeBuf(t, d0, kaio.DTypeF16, 16, cols), fakeBuf(t, d0, kaio.DTypeU8, 40, wb), fakeBuf(t, d0, kaio.DTypeF32, 16, 40)
	a3, c3 := a, c
	a3.Rows, c3.Rows = 3, 3
	ok(t, kaio.QuantMatmul(s, a3, w, c3, kaio.QuantQ8_0))
	// the fake device is sm_90: the streaming matvec (the choice is tested in C++)
	if n := lastKernel(t); n != "kaio_kq_stream_q8_0_f16" {
		t.Fatal(n)
	}
	big := must(d0.NewQuantMatmulOp(kaio.QuantQ8_0, kaio.DTypeF16, kaio.DTypeF32, 16, 40, cols)).get(t)
	defer big.Close()
	n0 := h.LaunchCount()
	ok(t, big.Launch(s, a, w, c))
	if h.LaunchCount() != n0+2 {
		t.Fatal("M > 8 should dequantize, then run the matmul")
	}
	ok(t, s.Synchronize())

	_, err := d0.NewQuantizeOp(kaio.QuantQ4K, kaio.QuantModeGGML, kaio.DTypeF32, rows, 100)
	expectErr(t, err, kaio.StatusInvalidDimension, "kaio_op_create_quantize", "100")
	_, err = d0.NewDequantizeOp(kaio.QuantQ8_0, kaio.DTypeI32, rows, cols)
	expectErr(t, err, kaio.StatusInvalidDType, "kaio_op_create_dequantize")
	expectErr(t, kaio.QuantMatmul(s, a, w, c, kaio.QuantQ8_0), kaio.StatusUnsupported, "kaio_quant_matmul")
}

func TestQuantizedMatmulsOnTheFake(t *testing.T) {
	h := needFake(t)
	d0, _ := open2(t)
	s := must(d0.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	a8, b8 := fakeBuf(t, d0, kaio.DTypeI8, 4, 64), fakeBuf(t, d0, kaio.DTypeI8, 32, 64)
	sa, c := fakeBuf(t, d0, kaio.DTypeF32, 1, 4), fakeBuf(t, d0, kaio.DTypeF32, 4, 32)
	n0 := h.LaunchCount()
	ok(t, kaio.MatmulInt8(s, a8, b8, sa, kaio.Tensor{}, c, kaio.DefaultMatmulInt8Desc()))
	if h.LaunchCount() == n0 {
		t.Fatal("matmul_int8 did not launch")
	}
	d8 := kaio.DefaultMatmulInt8Desc()
	d8.M, d8.N, d8.K = 4, 32, 64
	op := must(d0.NewMatmulInt8Op(d8)).get(t)
	defer op.Close()
	ok(t, op.Launch(s, a8, b8, kaio.Tensor{}, kaio.Tensor{}, c))
	d8.K = 24
	_, err := d0.NewMatmulInt8Op(d8)
	expectErr(t, err, kaio.StatusInvalidDimension, "kaio_op_create_matmul_int8", "24")

	const m, k, n = 2, 256, 64
	a := fakeBuf(t, d0, kaio.DTypeF16, m, k)
	w := kaio.Int4Weight{
		QWeight: fakeBuf(t, d0, kaio.DTypeU32, k/8, n),
		QZeros:  fakeBuf(t, d0, kaio.DTypeU32, k/128, n/8),
		Scales:  fakeBuf(t, d0, kaio.DTypeF16, k/128, n),
	}
	c4 := fakeBuf(t, d0, kaio.DTypeF32, m, n)
	n0 = h.LaunchCount()
	ok(t, kaio.MatmulInt4(s, a, w, c4, kaio.DefaultMatmulInt4Desc()))
	if h.LaunchCount() == n0 {
		t.Fatal("matmul_int4 did not launch")
	}
	bad := kaio.DefaultMatmulInt4Desc()
	bad.GroupSize = 96
	expectErr(t, kaio.MatmulInt4(s, a, w, c4, bad), kaio.StatusInvalidArgument, "kaio_matmul_int4", "group_size", "96")
	d4 := kaio.DefaultMatmulInt4Desc()
	d4.M, d4.N, d4.K = 72, n, k
	op4 := must(d0.NewMatmulInt4Op(d4)).get(t)
	defer op4.Close()
	a72, c72 := fakeBuf(t, d0, kaio.DTypeF16, 72, k), fakeBuf(t, d0, kaio.DTypeF32, 72, n)
	n0 = h.LaunchCount()
	ok(t, op4.Launch(s, a72, w.QWeight, w.QZeros, w.Scales, c72))
	// which tile (64, 128, 192 or 256 rows, K split or not) is libkaio's choice, tested in C++
	if h.LaunchCount() != n0+1 || !strings.HasPrefix(lastKernel(t), "kaio_int4_mm_sm90_f16_m") {
		t.Fatal("M > 64 on the fake sm_90 should be one launch of the dequantize-into-wgmma kernel, not " +
			lastKernel(t))
	}
	ok(t, kaio.Int4RepackKAIO(s, fakeBuf(t, d0, kaio.DTypeU32, 300, 16), fakeBuf(t, d0, kaio.DTypeU32, 16, 300)))
	if n := lastKernel(t); n != "kaio_int4_transpose_u32" {
		t.Fatal(n)
	}

	oq, ok2, ov := fakeBuf(t, d0, kaio.DTypeF16, m, n), fakeBuf(t, d0, kaio.DTypeF16, m, n), fakeBuf(t, d0, kaio.DTypeF16, m, n)
	n0 = h.LaunchCount()
	ok(t, kaio.QKVProjectInt4(s, a, w, w, w, oq, ok2, ov, kaio.DefaultQKVInt4Desc()))
	if h.LaunchCount() != n0+1 {
		t.Fatal("the fused QKV projection is one launch")
	}
	qd := kaio.DefaultQKVInt4Desc()
	qd.M, qd.K, qd.NQ, qd.NK, qd.NV = m, k, n, n, n
	qop := must(d0.NewQKVProjectInt4Op(qd)).get(t)
	defer qop.Close()
	list := kaio.QKVInt4Tensors(a, w, w, w, oq, ok2, ov)
	ok(t, qop.Launch(s, list...))
	expectErr(t, qop.Launch(s, list[:12]...), kaio.StatusInvalidArgument, "kaio_op_launch")

	// Fused INT8-weight QKV: x f16 2 x 64, W_p i8 64 x 32, per-column scales.
	x8, w8, s8 := fakeBuf(t, d0, kaio.DTypeF16, m, 64), fakeBuf(t, d0, kaio.DTypeI8, 64, 32), fakeBuf(t, d0, kaio.DTypeF32, 1, 32)
	o8 := []kaio.Tensor{fakeBuf(t, d0, kaio.DTypeF16, m, 32), fakeBuf(t, d0, kaio.DTypeF16, m, 32), fakeBuf(t, d0, kaio.DTypeF16, m, 32)}
	n0 = h.LaunchCount()
	ok(t, kaio.QKVProjectInt8(s, x8, w8, s8, w8, s8, w8, s8, o8[0], o8[1], o8[2], kaio.DefaultQKVInt8Desc()))
	if h.LaunchCount() != n0+1 {
		t.Fatal("the fused INT8 QKV projection is one launch")
	}
	q8 := kaio.DefaultQKVInt8Desc()
	q8.M, q8.K, q8.NQ, q8.NK, q8.NV = m, 64, 32, 32, 32
	q8op := must(d0.NewQKVProjectInt8Op(q8)).get(t)
	defer q8op.Close()
	ok(t, q8op.Launch(s, kaio.QKVInt8Tensors(x8, w8, s8, w8, s8, w8, s8, o8[0], o8[1], o8[2])...))
	q8.K = 48
	_, err = d0.NewQKVProjectInt8Op(q8)
	expectErr(t, err, kaio.StatusInvalidDimension, "kaio_op_create_qkv_project_int8", "48", "multiple of 32")
	async := kaio.DefaultMatmulInt8Desc()
	async.Variant = kaio.MatmulAsync
	n0 = h.LaunchCount()
	ok(t, kaio.MatmulInt8(s, a8, b8, kaio.Tensor{}, kaio.Tensor{}, c, async))
	if h.LaunchCount() == n0 {
		t.Fatal("matmul_int8 Async did not launch")
	}
	ok(t, s.Synchronize())
}

func TestAttentionOnTheFake(t *testing.T) {
	h := needFake(t)
	d0, _ := open2(t)
	s := must(d0.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	const b, sq, sk, hq, hkv, d = 2, 16, 24, 4, 2, 64
	desc := kaio.DefaultAttentionDesc()
	desc.Batch, desc.SeqQ, desc.SeqK, desc.HeadsQ, desc.HeadsKV, desc.HeadDim = b, sq, sk, hq, hkv, d
	q, o := fakeBuf(t, d0, kaio.DTypeF16, b*sq, hq*d), fakeBuf(t, d0, kaio.DTypeF16, b*sq, hq*d)
	k, v := fakeBuf(t, d0, kaio.DTypeF16, b*sk, hkv*d), fakeBuf(t, d0, kaio.DTypeF16, b*sk, hkv*d)
	lse := fakeBuf(t, d0, kaio.DTypeF32, b*hq, sq)
	n0 := h.LaunchCount()
	ok(t, kaio.Attention(s, q, k, v, o, lse, desc))
	causal := desc
	causal.Mask = kaio.AttentionCausal
	ok(t, kaio.Attention(s, q, k, v, o, kaio.Tensor{}, causal))
	if h.LaunchCount() < n0+2 {
		t.Fatal("attention did not launch")
	}
	fwd := must(d0.NewAttentionOp(desc)).get(t)
	defer fwd.Close()
	ok(t, fwd.Launch(s, q, k, v, o, lse))
	bwd := must(d0.NewAttentionBackwardOp(desc)).get(t)
	defer bwd.Close()
	dout, dq := fakeBuf(t, d0, kaio.DTypeF16, b*sq, hq*d), fakeBuf(t, d0, kaio.DTypeF16, b*sq, hq*d)
	dk, dv := fakeBuf(t, d0, kaio.DTypeF16, b*sk, hkv*d), fakeBuf(t, d0, kaio.DTypeF16, b*sk, hkv*d)
	n0 = h.LaunchCount()
	ok(t, bwd.Launch(s, dout, q, k, v, o, lse, dq, dk, dv))
	if h.LaunchCount() != n0+3 {
		t.Fatal("backward: Dv, dQ, then dK and dV")
	}
	out := fakeBuf(t, d0, kaio.DTypeF32, sq, d)
	view := func(x kaio.Tensor, rows, cols int64) kaio.Tensor { x.Rows, x.Cols = rows, cols; return x }
	for _, c := range []bool{false, true} {
		n0 = h.LaunchCount()
		ok(t, kaio.AttentionTC(s, view(q, sq, d), view(k, sk, d), view(v, sk, d), out, c))
		if h.LaunchCount() == n0 {
			t.Fatal("attention_tc did not launch")
		}
	}
	ok(t, s.Synchronize())
	bad := desc
	bad.HeadsKV = 3
	_, err := d0.NewAttentionOp(bad)
	expectErr(t, err, kaio.StatusShapeMismatch, "heads_q", "heads_kv")
	bad = desc
	bad.HeadDim = 80
	_, err = d0.NewAttentionOp(bad)
	expectErr(t, err, kaio.StatusUnsupported, "head_dim", "80")
	bad = desc
	bad.DType = kaio.DTypeF32
	_, err = d0.NewAttentionOp(bad)
	expectErr(t, err, kaio.StatusInvalidDType, "dtype", "f32")

	// KAIO's f32 single-head flash: forward with and without stats, backward.
	const n = 20
	f := func() kaio.Tensor { return fakeBuf(t, d0, kaio.DTypeF32, n, d) }
	fq, fk, fv, fo, fdo, fdq, fdk, fdv := f(), f(), f(), f(), f(), f(), f(), f()
	fl := fakeBuf(t, d0, kaio.DTypeF32, 1, n)
	for _, c := range []bool{false, true} {
		n0 = h.LaunchCount()
		ok(t, kaio.AttentionFlash(s, fq, fk, fv, fo, kaio.Tensor{}, c))
		ok(t, kaio.AttentionFlash(s, fq, fk, fv, fo, fl, c))
		if h.LaunchCount() != n0+2 {
			t.Fatal("attention_flash did not launch")
		}
		n0 = h.LaunchCount()
		ok(t, kaio.AttentionFlashBackward(s, fdo, fq, fk, fv, fo, fl, fdq, fdk, fdv, c))
		if h.LaunchCount() != n0+3 {
			t.Fatal("attention_flash backward: rowsum, dK and dV, then dQ")
		}
	}
	ok(t, s.Synchronize())
	expectErr(t, kaio.AttentionFlash(s, view(q, sq, d), view(k, sq, d), view(v, sq, d), view(o, sq, d), kaio.Tensor{}, false),
		kaio.StatusInvalidDType, "kaio_attention_flash", "'q'")
}

func TestLangOnTheFake(t *testing.T) {
	ptx, err := kaio.CompileLangPTX(siluGateSource)
	ok(t, err)
	if !strings.Contains(ptx, ".entry") || !strings.Contains(ptx, "silu_gate") {
		t.Fatal(ptx)
	}
	_, err = kaio.CompileLangPTX("kernel k(x: tensor<f32>, out: tensor<f32>) {\n    out = x +;\n}\n")
	ke := expectErr(t, err, kaio.StatusKernelSource, "kaio_lang_compile_ptx", "2:")
	if ke.Status.Category() != -400 {
		t.Fatal(ke.Status.Category())
	}

	h := needFake(t)
	d0, _ := open2(t)
	s := must(d0.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	k := must(d0.NewLangKernel(siluGateSource)).get(t)
	if got := must(k.PTX()).get(t); got != ptx {
		t.Fatal("the kernel's PTX differs from CompileLangPTX's")
	}
	const r, c = 5, 33
	x, g, o := fakeBuf(t, d0, kaio.DTypeF16, r, c), fakeBuf(t, d0, kaio.DTypeF16, r, c), fakeBuf(t, d0, kaio.DTypeF16, r, c)
	n0 := h.LaunchCount()
	ok(t, k.Launch(s, []kaio.Tensor{x, g, o}, nil))
	if h.LaunchCount() == n0 {
		t.Fatal("lang kernel did not launch")
	}
	ok(t, s.Synchronize())
	ok(t, k.Check())
	expectErr(t, k.Launch(s, []kaio.Tensor{x, g}, nil), kaio.StatusInvalidArgument, "kaio_lang_kernel_launch")
	g2 := g
	g2.Cols = c - 1
	expectErr(t, k.Launch(s, []kaio.Tensor{x, g2, o}, nil), kaio.StatusShapeMismatch, "kaio_lang_kernel_launch")
	_, err = d0.NewLangKernel("kernel k(x: tensor<f9>) {}")
	expectErr(t, err, kaio.StatusKernelSource, "kaio_lang_kernel_create", "1:")
	ok(t, k.Close())
	ok(t, k.Close()) // idempotent
	expectErr(t, k.Check(), kaio.StatusInvalidHandle)
}

func TestKVCacheWriteOnTheFake(t *testing.T) {
	h := needFake(t)
	d0, _ := open2(t)
	s := must(d0.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	const n, w, rows = 3, 256, 32
	k, v := fakeBuf(t, d0, kaio.DTypeBF16, n, w), fakeBuf(t, d0, kaio.DTypeBF16, n, w)
	slots := fakeBuf(t, d0, kaio.DTypeI32, 1, n)
	kc, vc := fakeBuf(t, d0, kaio.DTypeBF16, rows, w), fakeBuf(t, d0, kaio.DTypeBF16, rows, w)
	n0 := h.LaunchCount()
	ok(t, kaio.KVCacheWrite(s, k, v, slots, kc, vc))
	if h.LaunchCount() != n0+1 || lastKernel(t) != "kaio_kv_cache_write_pdl" {
		t.Fatal("kv_cache_write did not launch its kernel")
	}
	ok(t, kaio.KVCacheWrite(s, k, kaio.Tensor{}, slots, kc, kaio.Tensor{}))
	op := must(d0.NewKVCacheWriteOp(kaio.DTypeBF16, n, w, rows)).get(t)
	defer op.Close()
	ok(t, op.Launch(s, k, v, slots, kc, vc))
	expectErr(t, kaio.KVCacheWrite(s, k, v, slots, kc, kaio.Tensor{}), kaio.StatusInvalidArgument, "kaio_kv_cache_write", "v_cache")
	_, err := d0.NewKVCacheWriteOp(kaio.DTypeBF16, n, 12, rows)
	expectErr(t, err, kaio.StatusUnsupported, "kaio_op_create_kv_cache_write", "16 bytes")
	ok(t, s.Synchronize())
}
