package kaio_test

// GPU tests of the serving ops' wrappers against small CPU references,
// outputs poisoned (NaN) first: add + RMSNorm and LayerNorm (f32, 1e-5
// relative), RoPE half split (f32, against the f64 rotation of HF's f32
// angle, 1e-5 relative), decode attention (Sq 1, GQA 4, f16) dense and
// through the paged op with shuffled pages (O 2e-3 relative, LSE 2e-3
// absolute, as TestGPUAttentionForwardBackward), the varlen forward on
// sequences of lengths 0, 5 and 9 against each sequence alone, and greedy
// and top-k = 1 sampling against the argmax.

import (
	"fmt"
	"math"
	"testing"

	"kaio.dev/kaio"
)

func TestGPUNorms(t *testing.T) {
	d := gpuDevice(t)
	s := must(d.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	rng := testRand(t)
	const rows, cols, eps = 5, 300, 1e-5
	n := rows * cols
	xh, x := randF32(rng, n)
	rh, _ := randF32(rng, n)
	wh, w := randF32(rng, cols)
	bh, bias := randF32(rng, cols)
	view := func(b *kaio.Buffer) kaio.Tensor { return kaio.View(b, kaio.DTypeF32, rows, cols) }
	vec := func(b *kaio.Buffer) kaio.Tensor { return kaio.View(b, kaio.DTypeF32, 1, cols) }
	xb, rb, wb, bb := upload(t, d, xh), upload(t, d, rh), upload(t, d, wh), upload(t, d, bh)

	// add + RMSNorm: the residual is rounded to f32 once, then normalised.
	out := upload(t, d, filled(n, float32(math.NaN())))
	op := must(d.NewAddRMSNormOp(kaio.DTypeF32, rows, cols, eps)).get(t)
	defer op.Close()
	ok(t, op.Launch(s, view(xb), view(rb), vec(wb), view(out)))
	ok(t, s.Synchronize())
	res := make([]float64, n)
	wantOut := make([]float64, n)
	for r := 0; r < rows; r++ {
		ss := 0.0
		for c := 0; c < cols; c++ {
			res[r*cols+c] = float64(xh[r*cols+c] + rh[r*cols+c])
			ss += res[r*cols+c] * res[r*cols+c]
		}
		inv := 1 / math.Sqrt(ss/cols+eps)
		for c := 0; c < cols; c++ {
			wantOut[r*cols+c] = res[r*cols+c] * inv * w[c]
		}
	}
	for i, g := range download[float32](t, rb, n) {
		if float64(g) != res[i] {
			t.Fatalf("add_rmsnorm residual at %d: %g, want %g", i, g, res[i])
		}
	}
	relError(t, "add_rmsnorm out", f32Wide(download[float32](t, out, n)), wantOut, 1e-5)

	// LayerNorm with weight and bias (one-shot), and without (prepared).
	ln := func(withAffine bool) []float64 {
		y := make([]float64, n)
		for r := 0; r < rows; r++ {
			mean, v := 0.0, 0.0
			for c := 0; c < cols; c++ {
				mean += x[r*cols+c]
			}
			mean /= cols
			for c := 0; c < cols; c++ {
				v += (x[r*cols+c] - mean) * (x[r*cols+c] - mean)
			}
			inv := 1 / math.Sqrt(v/cols+eps)
			for c := 0; c < cols; c++ {
				y[r*cols+c] = (x[r*cols+c] - mean) * inv
				if withAffine {
					y[r*cols+c] = y[r*cols+c]*w[c] + bias[c]
				}
			}
		}
		return y
	}
	out1, out2 := upload(t, d, filled(n, float32(math.NaN()))), upload(t, d, filled(n, float32(math.NaN())))
	ok(t, kaio.LayerNorm(s, view(xb), vec(wb), vec(bb), view(out1), eps))
	lop := must(d.NewLayerNormOp(kaio.DTypeF32, rows, cols, eps)).get(t)
	defer lop.Close()
	ok(t, lop.Launch(s, view(xb), kaio.Tensor{}, kaio.Tensor{}, view(out2)))
	ok(t, s.Synchronize())
	relError(t, "layernorm weight+bias", f32Wide(download[float32](t, out1, n)), ln(true), 1e-5)
	relError(t, "layernorm no affine", f32Wide(download[float32](t, out2, n)), ln(false), 1e-5)
}

func TestGPURopeHalfSplit(t *testing.T) {
	d := gpuDevice(t)
	s := must(d.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	rng := testRand(t)
	const tok, hq, hk, dd, theta = 7, 4, 2, 64, 10000.0
	qh, q := randF32(rng, tok*hq*dd)
	kh, k := randF32(rng, tok*hk*dd)
	pos := make([]int32, tok)
	for i := range pos {
		pos[i] = int32(rng.Intn(200))
	}
	qb, kb := upload(t, d, qh), upload(t, d, kh)
	desc := kaio.DefaultRopeDesc()
	desc.DType, desc.HeadsQ, desc.HeadsK, desc.HeadDim, desc.Theta = kaio.DTypeF32, hq, hk, dd, theta
	ok(t, kaio.Rope(s, kaio.View(qb, kaio.DTypeF32, tok, hq*dd), kaio.View(kb, kaio.DTypeF32, tok, hk*dd),
		kaio.View(upload(t, d, pos), kaio.DTypeI32, 1, tok), desc))
	ok(t, s.Synchronize())
	// HF's f32 inv_freq and f32 angle, rotated in f64.
	rotate := func(x []float64, heads int) []float64 {
		y := append([]float64(nil), x...)
		for ti := 0; ti < tok; ti++ {
			for h := 0; h < heads; h++ {
				base := (ti*heads + h) * dd
				for i := 0; i < dd/2; i++ {
					inv := float32(1) / float32(math.Pow(theta, float64(float32(2*i)/float32(dd))))
					angle := float64(float32(pos[ti]) * inv)
					c, sn := math.Cos(angle), math.Sin(angle)
					x0, x1 := x[base+i], x[base+i+dd/2]
					y[base+i], y[base+i+dd/2] = x0*c-x1*sn, x1*c+x0*sn
				}
			}
		}
		return y
	}
	relError(t, "rope Q", f32Wide(download[float32](t, qb, tok*hq*dd)), rotate(q, hq), 1e-5)
	relError(t, "rope K", f32Wide(download[float32](t, kb, tok*hk*dd)), rotate(k, hk), 1e-5)
}

// seqRef is attentionRef on one sequence: q rows [sq, hq·dd], k and v [sk, hkv·dd].
func seqRef(mask kaio.AttentionMask, sq, sk, hq, hkv, dd int, q, k, v []float64) attnRef {
	ds := kaio.DefaultAttentionDesc()
	ds.Mask, ds.Batch, ds.SeqQ, ds.SeqK = mask, 1, int64(sq), int64(sk)
	ds.HeadsQ, ds.HeadsKV, ds.HeadDim = int64(hq), int64(hkv), int64(dd)
	return attentionRef(ds, q, k, v, make([]float64, len(q)))
}

func checkLSE(t *testing.T, what string, got []float32, want func(i int) (float64, bool)) {
	t.Helper()
	for i, g := range got {
		w, used := want(i)
		// Written as a pass condition so that NaN (unwritten) fails.
		if used && !(float64(g) == w || math.Abs(float64(g)-w) <= 2e-3) {
			t.Fatalf("%s LSE at %d: %g vs %g", what, i, g, w)
		}
	}
}

func TestGPUDecodeAndPagedAttention(t *testing.T) {
	d := gpuDevice(t)
	s := must(d.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	rng := testRand(t)
	const b, sq, sk, hq, hkv, dd, page = 2, 1, 300, 8, 2, 128, 16
	const ldq, ldk, nq, nk = hq * dd, hkv * dd, b * sq * hq * dd, b * sk * hkv * dd
	desc := kaio.DefaultAttentionDesc()
	desc.Variant, desc.Batch, desc.SeqQ, desc.SeqK, desc.HeadsQ, desc.HeadsKV, desc.HeadDim = kaio.AttentionDecode, b, sq, sk, hq, hkv, dd
	qh, q := randF16(rng, nq, -1, 1)
	kh, k := randF16(rng, nk, -1, 1)
	vh, v := randF16(rng, nk, -1, 1)
	qv := kaio.View(upload(t, d, qh), kaio.DTypeF16, b*sq, ldq)
	ob, lb := upload(t, d, filled(nq, nanF16)), upload(t, d, filled(b*hq*sq, float32(math.NaN())))
	ov, lv := kaio.View(ob, kaio.DTypeF16, b*sq, ldq), kaio.View(lb, kaio.DTypeF32, b*hq, sq)
	op := must(d.NewAttentionOp(desc)).get(t) // prepared: keys split across CTAs
	defer op.Close()
	ok(t, op.Launch(s, qv, kaio.View(upload(t, d, kh), kaio.DTypeF16, b*sk, ldk), kaio.View(upload(t, d, vh), kaio.DTypeF16, b*sk, ldk), ov, lv))
	ok(t, s.Synchronize())
	ref := attentionRef(desc, q, k, v, make([]float64, nq))
	relError(t, "decode O", f16Wide(download[kaio.F16](t, ob, nq)), ref.o, 2e-3)
	checkLSE(t, "decode", download[float32](t, lb, b*hq*sq), func(i int) (float64, bool) { return ref.lse[i], true })

	// The same keys in shuffled pages of a pool with spare pages; sequence 1
	// holds only its first 157 keys.
	lens := []int32{sk, 157}
	const perSeq = (sk + page - 1) / page
	const pages = 2*perSeq + 5
	perm := rng.Perm(pages)
	kp, _ := randF16(rng, pages*page*ldk, -1, 1) // spare slots: finite garbage
	vp, _ := randF16(rng, pages*page*ldk, -1, 1)
	table := make([]int32, b*perSeq)
	for bb := 0; bb < b; bb++ {
		for i := 0; i < perSeq; i++ {
			p := perm[bb*perSeq+i]
			table[bb*perSeq+i] = int32(p)
			for tt := 0; tt < page && i*page+tt < sk; tt++ {
				copy(kp[(p*page+tt)*ldk:(p*page+tt+1)*ldk], kh[(bb*sk+i*page+tt)*ldk:])
				copy(vp[(p*page+tt)*ldk:(p*page+tt+1)*ldk], vh[(bb*sk+i*page+tt)*ldk:])
			}
		}
	}
	pd := desc
	pd.Variant = kaio.AttentionAuto
	paged := kaio.DefaultAttentionPagedDesc()
	pop := must(d.NewAttentionPagedOp(pd, paged)).get(t)
	defer pop.Close()
	pob, plb := upload(t, d, filled(nq, nanF16)), upload(t, d, filled(b*hq*sq, float32(math.NaN())))
	ob2 := upload(t, d, filled(nq, nanF16))
	kpv, vpv := kaio.View(upload(t, d, kp), kaio.DTypeF16, pages*page, ldk), kaio.View(upload(t, d, vp), kaio.DTypeF16, pages*page, ldk)
	tv, sv := kaio.View(upload(t, d, table), kaio.DTypeI32, b, perSeq), kaio.View(upload(t, d, lens), kaio.DTypeI32, 1, b)
	ok(t, pop.Launch(s, qv, kpv, vpv, tv, sv, kaio.View(pob, kaio.DTypeF16, b*sq, ldq), kaio.View(plb, kaio.DTypeF32, b*hq, sq)))
	ok(t, kaio.AttentionPaged(s, qv, kpv, vpv, tv, sv, kaio.View(ob2, kaio.DTypeF16, b*sq, ldq), kaio.Tensor{}, pd, paged))
	ok(t, s.Synchronize())
	wantO := make([]float64, nq)
	wantL := make([]float64, b*hq*sq)
	for bb := 0; bb < b; bb++ {
		n := int(lens[bb])
		r := seqRef(kaio.AttentionMaskNone, sq, n, hq, hkv, dd, q[bb*sq*ldq:(bb+1)*sq*ldq], k[bb*sk*ldk:(bb*sk+n)*ldk], v[bb*sk*ldk:(bb*sk+n)*ldk])
		copy(wantO[bb*sq*ldq:], r.o)
		copy(wantL[bb*hq*sq:], r.lse)
	}
	relError(t, "paged O (prepared)", f16Wide(download[kaio.F16](t, pob, nq)), wantO, 2e-3)
	relError(t, "paged O (one-shot)", f16Wide(download[kaio.F16](t, ob2, nq)), wantO, 2e-3)
	checkLSE(t, "paged", download[float32](t, plb, b*hq*sq), func(i int) (float64, bool) { return wantL[i], true })
}

func TestGPUAttentionVarlen(t *testing.T) {
	d := gpuDevice(t)
	s := must(d.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	rng := testRand(t)
	const hq, hkv, dd = 4, 2, 64
	const ldq, ldk = hq * dd, hkv * dd
	lens := []int{0, 5, 9}
	cu := []int32{0}
	for _, n := range lens {
		cu = append(cu, cu[len(cu)-1]+int32(n))
	}
	total := int(cu[len(lens)])
	qh, q := randF16(rng, total*ldq, -1, 1)
	kh, k := randF16(rng, total*ldk, -1, 1)
	vh, v := randF16(rng, total*ldk, -1, 1)
	qv := kaio.View(upload(t, d, qh), kaio.DTypeF16, int64(total), ldq)
	kv, vv := kaio.View(upload(t, d, kh), kaio.DTypeF16, int64(total), ldk), kaio.View(upload(t, d, vh), kaio.DTypeF16, int64(total), ldk)
	cuv := kaio.View(upload(t, d, cu), kaio.DTypeI32, 1, int64(len(cu)))
	for _, c := range []struct {
		mask    kaio.AttentionMask
		variant kaio.AttentionVariant
	}{{kaio.AttentionMaskNone, kaio.AttentionAuto}, {kaio.AttentionCausal, kaio.AttentionSM80}} {
		desc := kaio.DefaultAttentionVarlenDesc()
		desc.Mask, desc.Variant, desc.Batch, desc.MaxSeqlenQ, desc.MaxSeqlenK = c.mask, c.variant, int64(len(lens)), 9, 9
		desc.TotalQ, desc.TotalK, desc.HeadsQ, desc.HeadsKV, desc.HeadDim = int64(total), int64(total), hq, hkv, dd
		ob, lb := upload(t, d, filled(total*ldq, nanF16)), upload(t, d, filled(hq*total, float32(math.NaN())))
		ok(t, kaio.AttentionVarlen(s, qv, kv, vv, cuv, cuv, kaio.View(ob, kaio.DTypeF16, int64(total), ldq),
			kaio.View(lb, kaio.DTypeF32, hq, int64(total)), desc))
		ok(t, s.Synchronize())
		wantO := make([]float64, total*ldq)
		wantL := make([]float64, hq*total)
		for bb, n := range lens {
			if n == 0 {
				continue
			}
			st := int(cu[bb])
			r := seqRef(c.mask, n, n, hq, hkv, dd, q[st*ldq:(st+n)*ldq], k[st*ldk:(st+n)*ldk], v[st*ldk:(st+n)*ldk])
			copy(wantO[st*ldq:], r.o)
			for h := 0; h < hq; h++ {
				for i := 0; i < n; i++ {
					wantL[h*total+st+i] = r.lse[h*n+i]
				}
			}
		}
		what := fmt.Sprintf("varlen mask %d variant %d", c.mask, c.variant)
		relError(t, what+" O", f16Wide(download[kaio.F16](t, ob, total*ldq)), wantO, 2e-3)
		checkLSE(t, what, download[float32](t, lb, hq*total), func(i int) (float64, bool) { return wantL[i], true })
	}
}

func argmax(row []float32) int32 {
	best := 0
	for i, x := range row {
		if x > row[best] {
			best = i
		}
	}
	return int32(best)
}

func TestGPUSamplingGreedyAndTopK1(t *testing.T) {
	d := gpuDevice(t)
	s := must(d.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	rng := testRand(t)
	const b, vocab = 3, 1000
	logits := make([]float32, b*vocab)
	for i := range logits {
		logits[i] = float32(8*rng.Float64() - 4)
	}
	want := make([]int32, b)
	for r := range want {
		want[r] = argmax(logits[r*vocab : (r+1)*vocab])
	}
	lv := kaio.View(upload(t, d, logits), kaio.DTypeF32, b, vocab)
	vecB := func(buf *kaio.Buffer, dt kaio.DType) kaio.Tensor { return kaio.View(buf, dt, 1, b) }

	desc := kaio.DefaultSamplingDesc()
	desc.Batch, desc.Vocab = b, vocab
	greedy := must(d.NewSamplingOp(desc)).get(t)
	defer greedy.Close()
	tb := upload(t, d, filled(b, int32(-7)))
	ok(t, greedy.Launch(s, kaio.SamplingViews{Logits: lv, Tokens: vecB(tb, kaio.DTypeI32)}.Tensors()...))
	ok(t, s.Synchronize())
	if got := download[int32](t, tb, b); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("greedy tokens %v, argmax %v", got, want)
	}

	// Temperature 1 and top-k 1: only the argmax is kept, drawn with probability 1.
	desc.Features = kaio.SamplingRandom | kaio.SamplingTopK | kaio.SamplingProbs
	op := must(d.NewSamplingOp(desc)).get(t)
	defer op.Close()
	rngState := make([]uint32, b*4)
	for i := range rngState {
		rngState[i] = rng.Uint32()
	}
	tb2 := upload(t, d, filled(b, int32(-7)))
	pb, lpb := upload(t, d, filled(b, float32(math.NaN()))), upload(t, d, filled(b, float32(math.NaN())))
	views := kaio.SamplingViews{Logits: lv, Temperature: vecB(upload(t, d, filled(b, float32(1))), kaio.DTypeF32),
		TopK: vecB(upload(t, d, filled(b, int32(1))), kaio.DTypeI32), RNG: kaio.View(upload(t, d, rngState), kaio.DTypeU32, b, 4),
		Tokens: vecB(tb2, kaio.DTypeI32), Probs: vecB(pb, kaio.DTypeF32), Logprobs: vecB(lpb, kaio.DTypeF32)}
	ok(t, op.Launch(s, views.Tensors()...))
	ok(t, s.Synchronize())
	if got := download[int32](t, tb2, b); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("top-k 1 tokens %v, argmax %v", got, want)
	}
	probs, logprobs := download[float32](t, pb, b), download[float32](t, lpb, b)
	for r := 0; r < b; r++ {
		if !(math.Abs(float64(probs[r])-1) <= 1e-5) || !(math.Abs(float64(logprobs[r])) <= 1e-5) {
			t.Fatalf("row %d: prob %g, logprob %g; want 1 and 0", r, probs[r], logprobs[r])
		}
	}
}

// RoPE fused with the KV-cache write against Rope then the slots read back:
// the K cache's stored rows are Rope's rotated K bit for bit, V's rows copied,
// padding slots untouched, K itself unchanged.
func TestGPURopeKVCacheWrite(t *testing.T) {
	d := gpuDevice(t)
	s := must(d.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	rng := testRand(t)
	const tok, hk, dd, rows = 4, 2, 64, 16
	const w = hk * dd
	kh, _ := randF32(rng, tok*w)
	vh, _ := randF32(rng, tok*w)
	pos := kaio.View(upload(t, d, []int32{7, 0, 300, 12}), kaio.DTypeI32, 1, tok)
	slots := []int32{9, -1, 0, 15}
	sv := kaio.View(upload(t, d, slots), kaio.DTypeI32, 1, tok)
	desc := kaio.DefaultRopeDesc()
	desc.DType, desc.HeadsQ, desc.HeadsK, desc.HeadDim, desc.RotaryDim = kaio.DTypeF32, 0, hk, dd, 32
	rotated := upload(t, d, kh)
	ok(t, kaio.Rope(s, kaio.Tensor{}, kaio.View(rotated, kaio.DTypeF32, tok, w), pos, desc))
	kb, vb := upload(t, d, kh), upload(t, d, vh)
	kcb, vcb := upload(t, d, filled(rows*w, float32(-9))), upload(t, d, filled(rows*w, float32(-9)))
	ok(t, kaio.RopeKVCacheWrite(s, kaio.Tensor{}, kaio.View(kb, kaio.DTypeF32, tok, w), kaio.View(vb, kaio.DTypeF32, tok, w),
		pos, sv, kaio.View(kcb, kaio.DTypeF32, rows, w), kaio.View(vcb, kaio.DTypeF32, rows, w), desc))
	ok(t, s.Synchronize())
	wantK, gotK, gotV := download[float32](t, rotated, tok*w), download[float32](t, kcb, rows*w), download[float32](t, vcb, rows*w)
	for i, x := range download[float32](t, kb, tok*w) {
		if math.Float32bits(x) != math.Float32bits(kh[i]) {
			t.Fatalf("K itself changed at %d", i)
		}
	}
	for r := 0; r < rows; r++ {
		tokIdx := -1
		for i, x := range slots {
			if int(x) == r {
				tokIdx = i
			}
		}
		for c := 0; c < w; c++ {
			wk, wv := float32(-9), float32(-9)
			if tokIdx >= 0 {
				wk, wv = wantK[tokIdx*w+c], vh[tokIdx*w+c]
			}
			if math.Float32bits(gotK[r*w+c]) != math.Float32bits(wk) || math.Float32bits(gotV[r*w+c]) != math.Float32bits(wv) {
				t.Fatalf("row %d col %d: K %v (want %v), V %v (want %v)", r, c, gotK[r*w+c], wk, gotV[r*w+c], wv)
			}
		}
	}
}
