package kaio_test

// GPU test of the sampler with penalties and probabilities: rows 0 to 2
// greedy (temperature 0) where the penalties change (rows 0, 2) or keep
// (row 1: all off) the argmax, by margins far above rounding, so tokens are
// exact; row 3 sampled at T 0.8 with top-k 50 over penalised top tokens: its
// token must be kept and its probability that of the f64 softmax of the
// f32-penalised, tempered, kept logits within 1e-4 relative (ex2/lg2.approx
// and f32 sums: ~1e-6), its log-probability within 1e-4; the same seed and
// offset draw the same token. Previous-token lists hold ids outside [0, V)
// (ignored) and are cut by prevLens.

import (
	"math"
	"sort"
	"testing"

	"kaio.dev/kaio"
)

// penalise applies kaio.h's penalties in f32 as the kernel does:
// repetition once per distinct previous token, then presence + frequency ·
// count; ids outside [0, V) ignored.
func penalise(row []float32, prev []int32, pen [3]float32) []float32 {
	x := append([]float32(nil), row...)
	counts := map[int]int{}
	for _, t := range prev {
		if t >= 0 && int(t) < len(row) {
			counts[int(t)]++
		}
	}
	r := pen[0]
	if !(r > 0) {
		r = 1
	}
	for t, c := range counts {
		v := x[t] * r
		if x[t] > 0 {
			v = x[t] / r
		}
		x[t] = v - (pen[1] + pen[2]*float32(c))
	}
	return x
}

func TestGPUSamplingPenaltiesAndProbs(t *testing.T) {
	d := gpuDevice(t)
	s := must(d.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	rng := testRand(t)
	const b, vocab, maxPrev, a, bb = 4, 1000, 6, 17, 923
	logits := make([]float32, b*vocab)
	for i := range logits {
		logits[i] = float32(4*rng.Float64() - 2)
		if i/vocab == 2 {
			logits[i] -= 4 // row 2 all negative: repetition multiplies
		}
	}
	logits[a], logits[bb] = 5, 4                     // row 0: A 5 -> 5/1.5 - 0.5 - 0.25·3 ≈ 2.08, B wins
	logits[vocab+a], logits[vocab+bb] = 5, 4         // row 1: no penalty, A wins
	logits[2*vocab+a], logits[2*vocab+bb] = -1, -1.5 // row 2: A -1 -> -2, B wins
	prev := []int32{a, a, 7000, a, -1, 0, a, a, 3, 4, 5, 6, a, 9, 9, 2000, 0, 0, 0, 0, 0, 0, 0, 0}
	prevLens := []int32{5, 2, 4, 6}
	pens := [][3]float32{{1.5, 0.5, 0.25}, {1, 0, 0}, {2, 0, 0}, {1.3, 0.2, 0.1}}
	// Row 3's previous tokens: its five largest logits, the largest twice.
	order := make([]int, vocab)
	for i := range order {
		order[i] = i
	}
	row3 := logits[3*vocab : 4*vocab]
	sort.Slice(order, func(i, j int) bool { return row3[order[i]] > row3[order[j]] })
	for c := 0; c < 5; c++ {
		prev[3*maxPrev+c] = int32(order[c])
	}
	prev[3*maxPrev+5] = int32(order[0])
	rows := make([][]float32, b)
	for r := range rows {
		rows[r] = penalise(logits[r*vocab:(r+1)*vocab], prev[r*maxPrev:r*maxPrev+int(prevLens[r])], pens[r])
	}
	wantGreedy := []int32{bb, a, bb}
	for r := 0; r < 3; r++ {
		if argmax(rows[r]) != wantGreedy[r] {
			t.Fatalf("row %d: the reference itself picks %d", r, argmax(rows[r]))
		}
	}
	temp, topK := []float32{0, 0, 0, 0.8}, []int32{0, 0, 0, 50}
	seeds := []uint32{1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0xC0FFEE, 0, 5, 0}
	flatPens := make([]float32, 0, 3*b)
	for _, p := range pens {
		flatPens = append(flatPens, p[:]...)
	}
	desc := kaio.DefaultSamplingDesc()
	desc.Batch, desc.Vocab, desc.MaxPrev = b, vocab, maxPrev
	desc.Features = kaio.SamplingRandom | kaio.SamplingTopK | kaio.SamplingPenalties | kaio.SamplingProbs
	op := must(d.NewSamplingOp(desc)).get(t)
	defer op.Close()
	vecB := func(buf *kaio.Buffer, dt kaio.DType) kaio.Tensor { return kaio.View(buf, dt, 1, b) }
	views := kaio.SamplingViews{Logits: kaio.View(upload(t, d, logits), kaio.DTypeF32, b, vocab),
		Temperature: vecB(upload(t, d, temp), kaio.DTypeF32), TopK: vecB(upload(t, d, topK), kaio.DTypeI32),
		RNG: kaio.View(upload(t, d, seeds), kaio.DTypeU32, b, 4), Prev: kaio.View(upload(t, d, prev), kaio.DTypeI32, b, maxPrev),
		PrevLens: vecB(upload(t, d, prevLens), kaio.DTypeI32), Penalties: kaio.View(upload(t, d, flatPens), kaio.DTypeF32, b, 3)}
	// Row 3's reference distribution: softmax over the top-k kept of the
	// penalised logits / T.
	tempered := make([]float64, vocab)
	for i, x := range rows[3] {
		tempered[i] = float64(x) / float64(temp[3])
	}
	sorted := append([]float64(nil), tempered...)
	sort.Sort(sort.Reverse(sort.Float64Slice(sorted)))
	kth, z := sorted[topK[3]-1], 0.0
	for _, x := range tempered {
		if x >= kth {
			z += math.Exp(x - sorted[0])
		}
	}
	var drawn []int32
	for run := 0; run < 2; run++ {
		tb := upload(t, d, filled(b, int32(-1)))
		pb, lpb := upload(t, d, filled(b, float32(math.NaN()))), upload(t, d, filled(b, float32(math.NaN())))
		views.Tokens, views.Probs, views.Logprobs = vecB(tb, kaio.DTypeI32), vecB(pb, kaio.DTypeF32), vecB(lpb, kaio.DTypeF32)
		ok(t, op.Launch(s, views.Tensors()...))
		ok(t, s.Synchronize())
		tok, p, lp := download[int32](t, tb, b), download[float32](t, pb, b), download[float32](t, lpb, b)
		for r := 0; r < 3; r++ {
			if tok[r] != wantGreedy[r] || !(math.Abs(float64(p[r])-1) <= 1e-6) || !(math.Abs(float64(lp[r])) <= 1e-6) {
				t.Fatalf("greedy row %d: token %d (want %d), prob %g, logprob %g", r, tok[r], wantGreedy[r], p[r], lp[r])
			}
		}
		tk := int(tok[3])
		if tk < 0 || tk >= vocab || tempered[tk] < kth {
			t.Fatalf("row 3: token %d is not among the top %d", tk, topK[3])
		}
		wantP := math.Exp(tempered[tk]-sorted[0]) / z
		if !(math.Abs(float64(p[3])-wantP) <= 1e-4*wantP) || !(math.Abs(float64(lp[3])-math.Log(wantP)) <= 1e-4) {
			t.Fatalf("row 3: prob %g logprob %g, want %g and %g", p[3], lp[3], wantP, math.Log(wantP))
		}
		drawn = append(drawn, tok[3])
	}
	if drawn[0] != drawn[1] {
		t.Fatalf("the same seed and offset drew %d then %d", drawn[0], drawn[1])
	}
	t.Logf("penalties: greedy tokens exact; row 3 drew %d at the reference probability", drawn[0])
}
