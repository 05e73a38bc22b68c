package kaio_test

// Host tests on the fake driver for the serving ops' wrappers (add +
// RMSNorm, LayerNorm, RoPE, decode and paged attention, varlen attention,
// sampling): each op launches prepared and one-shot with the kernel libkaio
// picks, descs default to libkaio's, and bad inputs return the exact status
// with libkaio's message.

import (
	"math"
	"testing"

	"kaio.dev/kaio"
)

func TestServingDescDefaults(t *testing.T) {
	r := kaio.DefaultRopeDesc()
	want := kaio.RopeDesc{Style: kaio.RopeHalfSplit, DType: kaio.DTypeBF16, Scaling: kaio.RopeScalingNone,
		Theta: 10000, Factor: 1, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8192,
		BetaFast: 32, BetaSlow: 1, Truncate: true}
	if r != want {
		t.Fatalf("rope defaults\n got %+v\nwant %+v", r, want)
	}
	if p := kaio.DefaultAttentionPagedDesc(); p.PageSize != 16 {
		t.Fatalf("paged defaults %+v", p)
	}
	if s := kaio.DefaultSamplingDesc(); s != (kaio.SamplingDesc{DType: kaio.DTypeF32}) {
		t.Fatalf("sampling defaults %+v", s)
	}
	if v := kaio.DefaultAttentionVarlenDesc(); v != (kaio.AttentionVarlenDesc{DType: kaio.DTypeF16}) {
		t.Fatalf("varlen defaults %+v", v)
	}
	if kaio.SamplingRandom != 1 || kaio.SamplingProbs != 32 || kaio.RopeScalingYarn != 3 || kaio.AttentionDecode != 4 {
		t.Fatal("constants differ from kaio.h's")
	}
}

// launched runs f and checks it made exactly n launches, the last one named name.
func launched(t *testing.T, n uint64, name string, f func() error) {
	t.Helper()
	n0 := fake.LaunchCount()
	ok(t, f())
	if got := fake.LaunchCount() - n0; got != n {
		t.Fatalf("%d launches, want %d", got, n)
	}
	if got := lastKernel(t); got != name {
		t.Fatalf("last kernel %s, want %s", got, name)
	}
}

func TestNormsOnTheFake(t *testing.T) {
	needFake(t)
	d0, _ := open2(t)
	s := must(d0.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	const rows, cols = 8, 16
	x, res, out := fakeBuf(t, d0, kaio.DTypeBF16, rows, cols), fakeBuf(t, d0, kaio.DTypeBF16, rows, cols), fakeBuf(t, d0, kaio.DTypeBF16, rows, cols)
	w, b := fakeBuf(t, d0, kaio.DTypeBF16, 1, cols), fakeBuf(t, d0, kaio.DTypeBF16, 1, cols)
	launched(t, 1, "kaio_add_rmsnorm_bf16_warp_pdl", func() error { return kaio.AddRMSNorm(s, x, res, w, out, 1e-6) })
	add := must(d0.NewAddRMSNormOp(kaio.DTypeBF16, rows, cols, 1e-6)).get(t)
	defer add.Close()
	launched(t, 1, "kaio_add_rmsnorm_bf16_warp_pdl", func() error { return add.Launch(s, x, res, w, x) }) // out = x allowed
	launched(t, 1, "kaio_layernorm_bf16_warp_pdl", func() error { return kaio.LayerNorm(s, x, w, b, out, 1e-5) })
	launched(t, 1, "kaio_layernorm_bf16_warp_pdl", func() error { return kaio.LayerNorm(s, x, kaio.Tensor{}, kaio.Tensor{}, x, 0) })
	ln := must(d0.NewLayerNormOp(kaio.DTypeBF16, rows, cols, 1e-5)).get(t)
	defer ln.Close()
	launched(t, 1, "kaio_layernorm_bf16_warp_pdl", func() error { return ln.Launch(s, x, kaio.Tensor{}, b, out) })
	ok(t, s.Synchronize())

	_, err := d0.NewAddRMSNormOp(kaio.DTypeF32, 4, 4, float32(math.NaN()))
	expectErr(t, err, kaio.StatusInvalidArgument, "kaio_op_create_add_rmsnorm", "'eps'", "nan", "finite")
	_, err = d0.NewLayerNormOp(kaio.DTypeI32, 4, 4, 1e-5)
	expectErr(t, err, kaio.StatusInvalidDType, "kaio_op_create_layernorm", "i32")
	expectErr(t, add.Launch(s, x, x, w, out), kaio.StatusInvalidArgument, "kaio_op_launch", "'residual'", "'x'", "overlap")
	expectErr(t, ln.Launch(s, x, w, b), kaio.StatusInvalidArgument, "kaio_op_launch", "{x, weight, bias, out}")
	expectErr(t, kaio.AddRMSNorm(s, x, res, w, out, -2), kaio.StatusInvalidArgument, "kaio_add_rmsnorm", "'eps'", "-2")
	w15 := w
	w15.Cols = 15
	expectErr(t, kaio.LayerNorm(s, x, w15, kaio.Tensor{}, out, 1e-5), kaio.StatusShapeMismatch, "kaio_layernorm", "'weight'", "1 x 15")
}

func TestRopeOnTheFake(t *testing.T) {
	needFake(t)
	d0, _ := open2(t)
	s := must(d0.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	const tok, hq, hk, dd = 10, 6, 2, 64
	q, k := fakeBuf(t, d0, kaio.DTypeBF16, tok, hq*dd), fakeBuf(t, d0, kaio.DTypeBF16, tok, hk*dd)
	pos := fakeBuf(t, d0, kaio.DTypeI32, 1, tok)
	desc := kaio.DefaultRopeDesc()
	desc.HeadsQ, desc.HeadsK, desc.HeadDim = hq, hk, dd
	desc.Theta, desc.Scaling, desc.Factor = 500000, kaio.RopeScalingLlama3, 8
	launched(t, 1, "kaio_rope_half_split_bf16_vec_pdl", func() error { return kaio.Rope(s, q, k, pos, desc) })
	op := must(d0.NewRopeOp(desc)).get(t)
	defer op.Close()
	launched(t, 1, "kaio_rope_half_split_bf16_vec_pdl", func() error { return op.Launch(s, q, k, pos) })
	launched(t, 1, "kaio_rope_half_split_bf16_vec_pdl", func() error { return op.Launch(s, kaio.Tensor{}, k, pos) })
	// K only, interleaved f16 with a partial rotary of 40 of 80 dims.
	il := kaio.DefaultRopeDesc()
	il.Style, il.DType, il.HeadsK, il.HeadDim, il.RotaryDim = kaio.RopeInterleaved, kaio.DTypeF16, hk, 80, 40
	k80 := fakeBuf(t, d0, kaio.DTypeF16, tok, hk*80)
	launched(t, 1, "kaio_rope_interleaved_f16_vec_pdl", func() error { return kaio.Rope(s, kaio.Tensor{}, k80, pos, il) })
	ok(t, s.Synchronize())

	expectErr(t, kaio.Rope(s, kaio.Tensor{}, k80, pos, func() kaio.RopeDesc { d := il; d.HeadsK = 0; return d }()),
		kaio.StatusInvalidDimension, "kaio_rope", "heads_q", "heads_k")
	expectErr(t, kaio.Rope(s, q, k80, pos, il), kaio.StatusInvalidArgument, "kaio_rope", "'q' has a buffer but desc->heads_q is 0")
	bad := desc
	bad.RotaryDim = 7
	_, err := d0.NewRopeOp(bad)
	expectErr(t, err, kaio.StatusInvalidDimension, "kaio_op_create_rope", "rotary_dim", "7")
	bad = desc
	bad.Theta = 1
	_, err = d0.NewRopeOp(bad)
	expectErr(t, err, kaio.StatusInvalidArgument, "kaio_op_create_rope", "theta")
	expectErr(t, op.Launch(s, q, k), kaio.StatusInvalidArgument, "kaio_op_launch")
}

func TestDecodeAndPagedAttentionOnTheFake(t *testing.T) {
	needFake(t)
	d0, _ := open2(t)
	s := must(d0.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	const b, sq, sk, hq, hkv, dd, page, pages = 2, 1, 4096, 8, 2, 128, 16, 16
	desc := kaio.DefaultAttentionDesc()
	desc.DType, desc.Variant = kaio.DTypeBF16, kaio.AttentionDecode
	desc.Batch, desc.SeqQ, desc.SeqK, desc.HeadsQ, desc.HeadsKV, desc.HeadDim = b, sq, sk, hq, hkv, dd
	q, o := fakeBuf(t, d0, kaio.DTypeBF16, b*sq, hq*dd), fakeBuf(t, d0, kaio.DTypeBF16, b*sq, hq*dd)
	k, v := fakeBuf(t, d0, kaio.DTypeBF16, b*sk, hkv*dd), fakeBuf(t, d0, kaio.DTypeBF16, b*sk, hkv*dd)
	lse := fakeBuf(t, d0, kaio.DTypeF32, b*hq, sq)
	// one-shot: no key split; prepared: split, merged by the last CTA of each
	// block in the same launch
	launched(t, 1, "kaio_attn_decode_bf16_d128_pdl", func() error { return kaio.Attention(s, q, k, v, o, lse, desc) })
	dec := must(d0.NewAttentionOp(desc)).get(t)
	defer dec.Close()
	launched(t, 1, "kaio_attn_decode_bf16_d128_pdl", func() error { return dec.Launch(s, q, k, v, o, kaio.Tensor{}) })

	paged := kaio.DefaultAttentionPagedDesc()
	pd := desc
	pd.Variant, pd.SeqK = kaio.AttentionAuto, 100
	kp, vp := fakeBuf(t, d0, kaio.DTypeBF16, pages*page, hkv*dd), fakeBuf(t, d0, kaio.DTypeBF16, pages*page, hkv*dd)
	table, lens := fakeBuf(t, d0, kaio.DTypeI32, b, 7), fakeBuf(t, d0, kaio.DTypeI32, 1, b)
	launched(t, 1, "kaio_attn_decode_paged_bf16_d128_pdl", func() error {
		return kaio.AttentionPaged(s, q, kp, vp, table, lens, o, kaio.Tensor{}, pd, paged)
	})
	pop := must(d0.NewAttentionPagedOp(pd, paged)).get(t)
	defer pop.Close()
	n0 := fake.LaunchCount()
	ok(t, pop.Launch(s, q, kp, vp, table, lens, o, lse))
	if fake.LaunchCount() == n0 {
		t.Fatal("paged op did not launch")
	}
	ok(t, s.Synchronize())

	expectErr(t, kaio.AttentionPaged(s, q, kp, vp, table, lens, o, lse, pd, kaio.AttentionPagedDesc{PageSize: 17}),
		kaio.StatusInvalidArgument, "kaio_attention_paged", "page_size", "17", "16, 32, 64, 128 or 256")
	bad := pd
	bad.Variant = kaio.AttentionSM80
	_, err := d0.NewAttentionPagedOp(bad, paged)
	expectErr(t, err, kaio.StatusUnsupported, "kaio_op_create_attention_paged", "variant", "KAIO_ATTENTION_DECODE")
	_, err = d0.NewAttentionBackwardOp(desc)
	expectErr(t, err, kaio.StatusUnsupported, "kaio_op_create_attention_backward", "no backward")
	t6 := table
	t6.Cols = 6
	expectErr(t, kaio.AttentionPaged(s, q, kp, vp, t6, lens, o, lse, pd, paged),
		kaio.StatusShapeMismatch, "'block_table'", "ceil(desc->seq_k / page_size) = 7")
	expectErr(t, pop.Launch(s, q, kp, vp, table, lens), kaio.StatusInvalidArgument,
		"kaio_op_launch", "{Q, K pool, V pool, block_table, seq_lens, O, LSE}")
}

func TestVarlenAttentionOnTheFake(t *testing.T) {
	needFake(t)
	d0, _ := open2(t)
	s := must(d0.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	const b, tq, tk, mq, mk, hq, hkv, dd = 3, 150, 120, 100, 77, 4, 2, 64
	desc := kaio.DefaultAttentionVarlenDesc()
	desc.DType, desc.Batch, desc.MaxSeqlenQ, desc.MaxSeqlenK, desc.TotalQ, desc.TotalK = kaio.DTypeBF16, b, mq, mk, tq, tk
	desc.HeadsQ, desc.HeadsKV, desc.HeadDim = hq, hkv, dd
	rows := func(n, heads int64) kaio.Tensor { return fakeBuf(t, d0, kaio.DTypeBF16, n, heads*dd) }
	q, k, v, o := rows(tq, hq), rows(tk, hkv), rows(tk, hkv), rows(tq, hq)
	cuq, cuk := fakeBuf(t, d0, kaio.DTypeI32, 1, b+1), fakeBuf(t, d0, kaio.DTypeI32, 1, b+1)
	lse := fakeBuf(t, d0, kaio.DTypeF32, hq, tq)
	// the fake device is sm_90: Auto takes the FlashAttention-3 forward for D 64
	launched(t, 1, "kaio_attn_fwd_varlen_sm90_bf16_d64", func() error {
		return kaio.AttentionVarlen(s, q, k, v, cuq, cuk, o, lse, desc)
	})
	sm80 := desc
	sm80.Variant, sm80.Mask = kaio.AttentionSM80, kaio.AttentionCausal
	launched(t, 1, "kaio_attn_fwd_varlen_bf16_d64", func() error {
		return kaio.AttentionVarlen(s, q, k, v, cuq, cuk, o, kaio.Tensor{}, sm80)
	})
	fwd := must(d0.NewAttentionVarlenOp(sm80)).get(t)
	defer fwd.Close()
	launched(t, 1, "kaio_attn_fwd_varlen_bf16_d64", func() error { return fwd.Launch(s, q, k, v, cuq, cuk, o, lse) })
	bwd := must(d0.NewAttentionVarlenBackwardOp(desc)).get(t)
	defer bwd.Close()
	dout, dq, dk, dv := rows(tq, hq), rows(tq, hq), rows(tk, hkv), rows(tk, hkv)
	// preprocess, dQ, then dK and dV
	launched(t, 3, "kaio_attn_bwd_dkdv_varlen_bf16_d64", func() error {
		return bwd.Launch(s, dout, q, k, v, cuq, cuk, o, lse, dq, dk, dv)
	})
	ok(t, s.Synchronize())

	bad := desc
	bad.DType = kaio.DTypeF32
	expectErr(t, kaio.AttentionVarlen(s, q, k, v, cuq, cuk, o, lse, bad), kaio.StatusInvalidDType, "kaio_attention_varlen", "dtype", "f32")
	bad = desc
	bad.MaxSeqlenQ = 151
	_, err := d0.NewAttentionVarlenOp(bad)
	expectErr(t, err, kaio.StatusInvalidDimension, "kaio_op_create_attention_varlen", "max_seqlen_q", "151", "150")
	bad = desc
	bad.Variant = kaio.AttentionSM90
	_, err = d0.NewAttentionVarlenBackwardOp(bad)
	expectErr(t, err, kaio.StatusUnsupported, "kaio_op_create_attention_varlen_backward", "KAIO_ATTENTION_SM90", "backward")
	// a required view left as Tensor{}
	expectErr(t, kaio.AttentionVarlen(s, q, k, v, kaio.Tensor{}, cuk, o, lse, desc), kaio.StatusInvalidHandle,
		"kaio_attention_varlen", "'cu_seqlens_q' has a NULL buffer")
}

func TestPagedPrefillOnTheFake(t *testing.T) {
	needFake(t)
	d0, _ := open2(t)
	s := must(d0.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	// 3 sequences, 40 packed new rows (at most 20 each), up to 48 keys each in
	// pages of 16 (block table 3 x 3), pools of 8 pages
	const b, tq, mq, mk, hq, hkv, dd, page, pages = 3, 40, 20, 48, 4, 2, 64, 16, 8
	desc := kaio.DefaultAttentionVarlenDesc()
	desc.DType, desc.Batch, desc.MaxSeqlenQ, desc.MaxSeqlenK, desc.TotalQ, desc.TotalK = kaio.DTypeBF16, b, mq, mk, tq, 0
	desc.HeadsQ, desc.HeadsKV, desc.HeadDim = hq, hkv, dd
	q, o := fakeBuf(t, d0, kaio.DTypeBF16, tq, hq*dd), fakeBuf(t, d0, kaio.DTypeBF16, tq, hq*dd)
	kp, vp := fakeBuf(t, d0, kaio.DTypeBF16, pages*page, hkv*dd), fakeBuf(t, d0, kaio.DTypeBF16, pages*page, hkv*dd)
	cuq, table, lens := fakeBuf(t, d0, kaio.DTypeI32, 1, b+1), fakeBuf(t, d0, kaio.DTypeI32, b, 3), fakeBuf(t, d0, kaio.DTypeI32, 1, b)
	lse := fakeBuf(t, d0, kaio.DTypeF32, hq, tq)
	paged := kaio.DefaultAttentionPagedDesc()
	// the fake device is sm_90: Auto takes the sm_90a paged kernel for D 64
	launched(t, 1, "kaio_attn_fwd_paged_sm90_bf16_d64", func() error {
		return kaio.AttentionPagedPrefill(s, q, kp, vp, cuq, table, lens, o, lse, desc, paged)
	})
	sm80 := desc
	sm80.Variant = kaio.AttentionSM80
	op := must(d0.NewAttentionPagedPrefillOp(sm80, paged)).get(t)
	defer op.Close()
	launched(t, 1, "kaio_attn_fwd_paged_bf16_d64", func() error {
		return op.Launch(s, q, kp, vp, cuq, table, lens, o, kaio.Tensor{})
	})
	ok(t, s.Synchronize())

	expectErr(t, kaio.AttentionPagedPrefill(s, q, kp, vp, cuq, table, lens, o, lse, desc, kaio.AttentionPagedDesc{PageSize: 17}),
		kaio.StatusInvalidArgument, "kaio_attention_paged_prefill", "page_size", "17")
	bad := desc
	bad.TotalK = 5
	_, err := d0.NewAttentionPagedPrefillOp(bad, paged)
	expectErr(t, err, kaio.StatusInvalidDimension, "kaio_op_create_attention_paged_prefill", "total_k")
	expectErr(t, op.Launch(s, q, kp, vp, cuq, table, lens), kaio.StatusInvalidArgument,
		"kaio_op_launch", "{Q, K pool, V pool, cu_seqlens_q, block_table, seq_lens, O, LSE}")
}

func TestSamplingOnTheFake(t *testing.T) {
	h := needFake(t)
	d0, _ := open2(t)
	s := must(d0.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	const b, vocab = 4, 100
	desc := kaio.DefaultSamplingDesc()
	desc.Batch, desc.Vocab = b, vocab
	views := kaio.SamplingViews{Logits: fakeBuf(t, d0, kaio.DTypeF32, b, vocab), Tokens: fakeBuf(t, d0, kaio.DTypeI32, 1, b)}
	greedy := must(d0.NewSamplingOp(desc)).get(t)
	defer greedy.Close()
	launched(t, 1, "kaio_sample_f32", func() error { return greedy.Launch(s, views.Tensors()...) })

	full := desc
	full.Features = kaio.SamplingRandom | kaio.SamplingTopK | kaio.SamplingTopP | kaio.SamplingMinP | kaio.SamplingProbs
	fv := views
	fv.Temperature, fv.TopP, fv.MinP = fakeBuf(t, d0, kaio.DTypeF32, b, 1), fakeBuf(t, d0, kaio.DTypeF32, 1, b), fakeBuf(t, d0, kaio.DTypeF32, 1, b)
	fv.TopK, fv.RNG = fakeBuf(t, d0, kaio.DTypeI32, 1, b), fakeBuf(t, d0, kaio.DTypeU32, b, 4)
	fv.Probs, fv.Logprobs = fakeBuf(t, d0, kaio.DTypeF32, 1, b), fakeBuf(t, d0, kaio.DTypeF32, 1, b)
	op := must(d0.NewSamplingOp(full)).get(t)
	defer op.Close()
	launched(t, 1, "kaio_sample_f32", func() error { return op.Launch(s, fv.Tensors()...) })

	// Penalties: the op owns a workspace and launches the penalty pass first.
	pen := desc
	pen.DType, pen.Features, pen.MaxPrev = kaio.DTypeBF16, kaio.SamplingPenalties, 8
	live := h.LiveAllocations()
	pop := must(d0.NewSamplingOp(pen)).get(t)
	if h.LiveAllocations() != live+1 {
		t.Fatal("the penalty sampler should own one workspace")
	}
	pv := kaio.SamplingViews{Logits: fakeBuf(t, d0, kaio.DTypeBF16, b, vocab), Prev: fakeBuf(t, d0, kaio.DTypeI32, b, 8),
		PrevLens: fakeBuf(t, d0, kaio.DTypeI32, b, 1), Penalties: fakeBuf(t, d0, kaio.DTypeF32, b, 3), Tokens: views.Tokens}
	launched(t, 2, "kaio_sample_f32", func() error { return pop.Launch(s, pv.Tensors()...) })
	ok(t, s.Synchronize())
	ok(t, pop.Close())

	bad := desc
	bad.Features = kaio.SamplingTopP
	_, err := d0.NewSamplingOp(bad)
	expectErr(t, err, kaio.StatusInvalidArgument, "kaio_op_create_sampling", "KAIO_SAMPLING_RANDOM")
	bad = desc
	bad.Vocab = -5
	_, err = d0.NewSamplingOp(bad)
	expectErr(t, err, kaio.StatusInvalidDimension, "kaio_op_create_sampling", "desc->vocab is -5")
	bad = desc
	bad.DType = kaio.DTypeI32
	_, err = d0.NewSamplingOp(bad)
	expectErr(t, err, kaio.StatusInvalidDType, "kaio_op_create_sampling", "desc->dtype", "i32")
	extra := views
	extra.TopP = fv.TopP // top_p is off in the greedy op
	expectErr(t, greedy.Launch(s, extra.Tensors()...), kaio.StatusInvalidArgument, "kaio_op_launch", "'top_p'", "NULL buffer")
	expectErr(t, greedy.Launch(s, views.Tensors()[:11]...), kaio.StatusInvalidArgument, "kaio_op_launch", "'count' is 11", "12")
	wide := views
	wide.Tokens.Rows, wide.Tokens.Cols = 2, 2
	expectErr(t, greedy.Launch(s, wide.Tensors()...), kaio.StatusShapeMismatch, "'tokens'", "2 x 2", "1 x 4 or 4 x 1")
}

func TestRopeKVCacheWriteOnTheFake(t *testing.T) {
	h := needFake(t)
	d0, _ := open2(t)
	s := must(d0.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	const n, hq, hk, dd, rows = 5, 4, 2, 64, 32
	q, k, v := fakeBuf(t, d0, kaio.DTypeBF16, n, hq*dd), fakeBuf(t, d0, kaio.DTypeBF16, n, hk*dd), fakeBuf(t, d0, kaio.DTypeBF16, n, hk*dd)
	pos, slots := fakeBuf(t, d0, kaio.DTypeI32, 1, n), fakeBuf(t, d0, kaio.DTypeI32, 1, n)
	kc, vc := fakeBuf(t, d0, kaio.DTypeBF16, rows, hk*dd), fakeBuf(t, d0, kaio.DTypeBF16, rows, hk*dd)
	desc := kaio.DefaultRopeDesc()
	desc.HeadsQ, desc.HeadsK, desc.HeadDim = hq, hk, dd
	n0 := h.LaunchCount()
	ok(t, kaio.RopeKVCacheWrite(s, q, k, v, pos, slots, kc, vc, desc))
	if h.LaunchCount() != n0+1 || lastKernel(t) != "kaio_rope_cache_half_split_bf16_vec_pdl" {
		t.Fatal("rope_kv_cache_write did not launch its kernel")
	}
	op := must(d0.NewRopeKVCacheWriteOp(desc)).get(t)
	defer op.Close()
	ok(t, op.Launch(s, kaio.Tensor{}, k, kaio.Tensor{}, pos, slots, kc, kaio.Tensor{}))
	ok(t, s.Synchronize())
	expectErr(t, kaio.RopeKVCacheWrite(s, q, k, v, pos, slots, kc, kaio.Tensor{}, desc), kaio.StatusInvalidArgument, "kaio_rope_kv_cache_write", "v_cache")
	bad := desc
	bad.HeadsK = 0
	_, err := d0.NewRopeKVCacheWriteOp(bad)
	expectErr(t, err, kaio.StatusInvalidDimension, "kaio_op_create_rope_kv_cache_write", "heads_k")
}
