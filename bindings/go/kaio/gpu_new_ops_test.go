package kaio_test

// GPU tests of the k-quant, quantized-matmul, attention and kernel-language
// wrappers against small f64 CPU references, outputs poisoned (NaN) first;
// the same cases and tolerances as the Rust crate's tests/gpu_new_ops.rs,
// which explains them:
//   Q8_0 bytes exactly; round trip Q8_0 1e-2, Q6_K 3e-2, Q5_K 6e-2, Q4_K
//   1.2e-1; f16 dequantize = f32 dequantize rounded, exactly; quant_matmul
//   1e-5 (+2^-9 for M > 8); int8 i32 exact, f32 1e-6; int4 2e-5 (+1e-4 for
//   M > 16), qkv 2e-5 + 2^-11; attention O 2e-3, LSE 2e-3 absolute, grads
//   1e-2; f32 attention_flash O 2e-5, LSE 2e-5 absolute, grads 1e-4;
//   qkv_project_int8 2e-5 + 2^-11; lang silu_gate 2^-10 relative + 1e-6.

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
	"unsafe"

	"kaio.dev/kaio"
)

func upload[T kaio.Element](t *testing.T, d *kaio.Device, data []T) *kaio.Buffer {
	t.Helper()
	var zero T
	b := must(d.NewBuffer(uint64(len(data)) * uint64(unsafe.Sizeof(zero)))).get(t)
	t.Cleanup(func() { b.Close() })
	ok(t, kaio.WriteSlice(b, 0, data))
	return b
}

func download[T kaio.Element](t *testing.T, b *kaio.Buffer, n int) []T {
	t.Helper()
	out := make([]T, n)
	ok(t, kaio.ReadSlice(b, 0, out))
	return out
}

func filled[T kaio.Element](n int, v T) []T {
	s := make([]T, n)
	for i := range s {
		s[i] = v
	}
	return s
}

type half interface{ kaio.F16 | kaio.BF16 }

// randHalf: n uniform values in [lo, hi) stored as T (enc), and their exact
// f64 values (dec).
func randHalf[T half](rng *rand.Rand, n int, lo, hi float64, enc func(float32) T, dec func(T) float32) ([]T, []float64) {
	h := make([]T, n)
	w := make([]float64, n)
	for i := range h {
		h[i] = enc(float32(lo + (hi-lo)*rng.Float64()))
		w[i] = float64(dec(h[i]))
	}
	return h, w
}

func randF16(rng *rand.Rand, n int, lo, hi float64) ([]kaio.F16, []float64) {
	return randHalf(rng, n, lo, hi, kaio.F16FromFloat32, kaio.F16.Float32)
}

func f16Wide(h []kaio.F16) []float64 {
	w := make([]float64, len(h))
	for i, v := range h {
		w[i] = float64(v.Float32())
	}
	return w
}

func f32Wide(h []float32) []float64 {
	w := make([]float64, len(h))
	for i, v := range h {
		w[i] = float64(v)
	}
	return w
}

func relError(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	var e2, r2 float64
	for i := range got {
		if math.IsNaN(got[i]) || math.IsInf(got[i], 0) {
			t.Fatalf("%s: output %d unwritten or not finite", what, i)
		}
		e2 += (got[i] - want[i]) * (got[i] - want[i])
		r2 += want[i] * want[i]
	}
	rel := math.Sqrt(e2 / math.Max(r2, 1e-300))
	if rel > tol {
		t.Fatalf("%s: relative error %.3e > %.3e", what, rel, tol)
	}
	t.Logf("%s: ok, relative error %.2e", what, rel)
}

var nanF16 = kaio.F16FromFloat32(float32(math.NaN()))

func TestGPUQuantizeKnownQ8_0Block(t *testing.T) {
	d := gpuDevice(t)
	s := must(d.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	x := make([]float32, 32)
	for i := range x {
		x[i] = (float32(i) - 16) / 16
	}
	dd := float32(1) / 127
	id := 1 / dd
	want := []byte{0, 0}
	h := kaio.F16FromFloat32(dd)
	want[0], want[1] = byte(h), byte(h>>8)
	for _, v := range x {
		want = append(want, byte(int8(math.Round(float64(v*id)))))
	}
	xb, q := upload(t, d, x), upload(t, d, filled(34, uint8(0xAA)))
	ok(t, kaio.Quantize(s, kaio.View(xb, kaio.DTypeF32, 1, 32), kaio.View(q, kaio.DTypeU8, 1, 34), kaio.QuantQ8_0, kaio.QuantModeGGML))
	ok(t, s.Synchronize())
	if got := download[uint8](t, q, 34); string(got) != string(want) {
		t.Fatalf("Q8_0 bytes\n got %v\nwant %v", got, want)
	}
}

func TestGPUQuantizeDequantizeRoundTrip(t *testing.T) {
	d := gpuDevice(t)
	s := must(d.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	rng := testRand(t)
	const rows, cols = 3, 512
	x := make([]float32, rows*cols)
	for i := range x {
		x[i] = float32(rng.Float64()*2 - 1)
	}
	xb := upload(t, d, x)
	for _, c := range []struct {
		f   kaio.QuantFormat
		tol float64
	}{{kaio.QuantQ8_0, 1e-2}, {kaio.QuantQ6K, 3e-2}, {kaio.QuantQ5K, 6e-2}, {kaio.QuantQ4K, 1.2e-1}} {
		for _, mode := range []kaio.QuantMode{kaio.QuantModeGGML, kaio.QuantModeCandle} {
			rb := c.f.RowBytes(cols)
			q := upload(t, d, filled(int(rows*rb), uint8(0xFF)))
			y := upload(t, d, filled(rows*cols, float32(math.NaN())))
			yh := upload(t, d, filled(rows*cols, nanF16))
			op := must(d.NewQuantizeOp(c.f, mode, kaio.DTypeF32, rows, cols)).get(t)
			ok(t, op.Launch(s, kaio.View(xb, kaio.DTypeF32, rows, cols), kaio.View(q, kaio.DTypeU8, rows, rb)))
			ok(t, kaio.Dequantize(s, kaio.View(q, kaio.DTypeU8, rows, rb), kaio.View(y, kaio.DTypeF32, rows, cols), c.f))
			dq := must(d.NewDequantizeOp(c.f, kaio.DTypeF16, rows, cols)).get(t)
			ok(t, dq.Launch(s, kaio.View(q, kaio.DTypeU8, rows, rb), kaio.View(yh, kaio.DTypeF16, rows, cols)))
			ok(t, s.Synchronize())
			op.Close()
			dq.Close()
			got := download[float32](t, y, rows*cols)
			relError(t, fmt.Sprintf("round trip format %d mode %d", c.f, mode), f32Wide(got), f32Wide(x), c.tol)
			half := download[kaio.F16](t, yh, rows*cols)
			for i := range half {
				if half[i] != kaio.F16FromFloat32(got[i]) {
					t.Fatalf("format %d: f16 dequantize differs at %d", c.f, i)
				}
			}
		}
	}
}

func TestGPUQuantMatmul(t *testing.T) {
	d := gpuDevice(t)
	s := must(d.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	rng := testRand(t)
	const n, k = 40, 512
	for _, f := range []kaio.QuantFormat{kaio.QuantQ8_0, kaio.QuantQ4K, kaio.QuantQ6K} {
		rb := f.RowBytes(k)
		w := make([]float32, n*k)
		for i := range w {
			w[i] = float32(rng.Float64()*2 - 1)
		}
		wb, wq, wdb := upload(t, d, w), upload(t, d, make([]uint8, n*rb)), upload(t, d, make([]float32, n*k))
		wqv := kaio.View(wq, kaio.DTypeU8, n, rb)
		ok(t, kaio.Quantize(s, kaio.View(wb, kaio.DTypeF32, n, k), wqv, f, kaio.QuantModeGGML))
		ok(t, kaio.Dequantize(s, wqv, kaio.View(wdb, kaio.DTypeF32, n, k), f))
		ok(t, s.Synchronize())
		wd := f32Wide(download[float32](t, wdb, n*k))
		for _, m := range []int64{3, 16} {
			ah, a := randF16(rng, int(m*k), -1, 1)
			av, c := kaio.View(upload(t, d, ah), kaio.DTypeF16, m, k), upload(t, d, filled(int(m*n), float32(math.NaN())))
			cv := kaio.View(c, kaio.DTypeF32, m, n)
			if m <= 8 {
				ok(t, kaio.QuantMatmul(s, av, wqv, cv, f))
			} else {
				op := must(d.NewQuantMatmulOp(f, kaio.DTypeF16, kaio.DTypeF32, m, n, k)).get(t)
				ok(t, op.Launch(s, av, wqv, cv))
				defer op.Close()
			}
			ok(t, s.Synchronize())
			want := make([]float64, m*n)
			for i := range want {
				for x := int64(0); x < k; x++ {
					want[i] += a[int64(i)/n*k+x] * wd[int64(i)%n*k+x]
				}
			}
			tol := 1e-5
			if m > 8 {
				tol += math.Ldexp(1, -9)
			}
			relError(t, fmt.Sprintf("quant_matmul format %d m %d", f, m), f32Wide(download[float32](t, c, int(m*n))), want, tol)
		}
	}
}

func TestGPUMatmulInt8(t *testing.T) {
	d := gpuDevice(t)
	s := must(d.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	rng := testRand(t)
	const m, n, k = 5, 24, 64
	a, b := make([]int8, m*k), make([]int8, n*k)
	for i := range a {
		a[i] = int8(rng.Intn(255) - 127)
	}
	for i := range b {
		b[i] = int8(rng.Intn(255) - 127)
	}
	sa, sb := make([]float32, m), make([]float32, n)
	for i := range sa {
		sa[i] = float32(0.01 + 0.09*rng.Float64())
	}
	for i := range sb {
		sb[i] = float32(0.01 + 0.09*rng.Float64())
	}
	av, bv := kaio.View(upload(t, d, a), kaio.DTypeI8, m, k), kaio.View(upload(t, d, b), kaio.DTypeI8, n, k)
	acc := make([]int32, m*n)
	for i := range acc {
		for x := 0; x < k; x++ {
			acc[i] += int32(a[i/n*k+x]) * int32(b[i%n*k+x])
		}
	}
	ci := upload(t, d, filled(m*n, int32(math.MinInt32)))
	desc := kaio.DefaultMatmulInt8Desc()
	desc.OutDType, desc.M, desc.N, desc.K = kaio.DTypeI32, m, n, k
	op := must(d.NewMatmulInt8Op(desc)).get(t)
	defer op.Close()
	ok(t, op.Launch(s, av, bv, kaio.Tensor{}, kaio.Tensor{}, kaio.View(ci, kaio.DTypeI32, m, n)))
	// The same sums from the mma.sync kernel (MatmulAsync).
	ca := upload(t, d, filled(m*n, int32(math.MinInt32)))
	async := kaio.DefaultMatmulInt8Desc()
	async.OutDType, async.Variant = kaio.DTypeI32, kaio.MatmulAsync
	ok(t, kaio.MatmulInt8(s, av, bv, kaio.Tensor{}, kaio.Tensor{}, kaio.View(ca, kaio.DTypeI32, m, n), async))
	cf := upload(t, d, filled(m*n, float32(math.NaN())))
	one := kaio.DefaultMatmulInt8Desc()
	one.Alpha = 0.75
	ok(t, kaio.MatmulInt8(s, av, bv, kaio.View(upload(t, d, sa), kaio.DTypeF32, 1, m), kaio.View(upload(t, d, sb), kaio.DTypeF32, 1, n),
		kaio.View(cf, kaio.DTypeF32, m, n), one))
	ok(t, s.Synchronize())
	gi, ga, gf := download[int32](t, ci, m*n), download[int32](t, ca, m*n), download[float32](t, cf, m*n)
	for i := range acc {
		if gi[i] != acc[i] || ga[i] != acc[i] {
			t.Fatalf("i32 sum at %d: %d (Async %d) vs %d", i, gi[i], ga[i], acc[i])
		}
		want := ((float32(acc[i]) * 0.75) * sa[i/n]) * sb[i%n]
		if math.Abs(float64(gf[i]-want)) > 1e-6*math.Abs(float64(want)) {
			t.Fatalf("f32 at %d: %g vs %g", i, gf[i], want)
		}
	}
}

type gptqHost struct {
	qweight, qzeros []uint32
	scales          []kaio.F16
	w               []float64 // K×N, (q - z)·s rounded to f16
}

func makeGPTQ(rng *rand.Rand, k, n, g int) gptqHost {
	q, z := make([]uint32, k*n), make([]uint32, k/g*n)
	for i := range q {
		q[i] = uint32(rng.Intn(16))
	}
	for i := range z {
		z[i] = uint32(rng.Intn(16))
	}
	sc, _ := randF16(rng, k/g*n, 0.01, 0.1)
	h := gptqHost{qweight: make([]uint32, k/8*n), qzeros: make([]uint32, k/g*n/8), scales: sc, w: make([]float64, k*n)}
	for kk := 0; kk < k; kk++ {
		for nn := 0; nn < n; nn++ {
			h.qweight[kk/8*n+nn] |= q[kk*n+nn] << (4 * (kk % 8))
			zz := z[kk/g*n+nn]
			h.w[kk*n+nn] = float64(kaio.F16FromFloat32((float32(q[kk*n+nn]) - float32(zz)) * sc[kk/g*n+nn].Float32()).Float32())
		}
	}
	for gg := 0; gg < k/g; gg++ {
		for nn := 0; nn < n; nn++ {
			h.qzeros[gg*(n/8)+nn/8] |= z[gg*n+nn] << (4 * (nn % 8))
		}
	}
	return h
}

func (h gptqHost) weight(t *testing.T, d *kaio.Device, k, n, g int64) kaio.Int4Weight {
	return kaio.Int4Weight{
		QWeight: kaio.View(upload(t, d, h.qweight), kaio.DTypeU32, k/8, n),
		QZeros:  kaio.View(upload(t, d, h.qzeros), kaio.DTypeU32, k/g, n/8),
		Scales:  kaio.View(upload(t, d, h.scales), kaio.DTypeF16, k/g, n),
	}
}

func matmulRef(a, w []float64, m, k, n int) []float64 {
	out := make([]float64, m*n)
	for i := range out {
		for x := 0; x < k; x++ {
			out[i] += a[i/n*k+x] * w[x*n+i%n]
		}
	}
	return out
}

func TestGPUMatmulInt4AndQKV(t *testing.T) {
	d := gpuDevice(t)
	s := must(d.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	rng := testRand(t)
	const k, n, g = 256, 64, 128
	h := makeGPTQ(rng, k, n, g)
	w := h.weight(t, d, k, n, g)
	for _, m := range []int64{3, 32} {
		ah, a := randF16(rng, int(m*k), -1, 1)
		av, c := kaio.View(upload(t, d, ah), kaio.DTypeF16, m, k), upload(t, d, filled(int(m*n), float32(math.NaN())))
		cv := kaio.View(c, kaio.DTypeF32, m, n)
		desc := kaio.DefaultMatmulInt4Desc()
		desc.GroupSize = g
		tol := 2e-5
		if m <= 16 {
			ok(t, kaio.MatmulInt4(s, av, w, cv, desc))
		} else {
			desc.M, desc.N, desc.K = m, n, k
			op := must(d.NewMatmulInt4Op(desc)).get(t)
			defer op.Close()
			ok(t, op.Launch(s, av, w.QWeight, w.QZeros, w.Scales, cv))
			tol += 1e-4
		}
		ok(t, s.Synchronize())
		relError(t, fmt.Sprintf("matmul_int4 gptq m %d", m), f32Wide(download[float32](t, c, int(m*n))), matmulRef(a, h.w, int(m), k, n), tol)
	}

	const m = 2
	hk, hv := makeGPTQ(rng, k, 32, g), makeGPTQ(rng, k, 32, g)
	ah, a := randF16(rng, m*k, -1, 1)
	outs := []*kaio.Buffer{upload(t, d, filled(m*n, nanF16)), upload(t, d, filled(m*32, nanF16)), upload(t, d, filled(m*32, nanF16))}
	desc := kaio.DefaultQKVInt4Desc()
	desc.GroupSize = g
	ok(t, kaio.QKVProjectInt4(s, kaio.View(upload(t, d, ah), kaio.DTypeF16, m, k), w, hk.weight(t, d, k, 32, g), hv.weight(t, d, k, 32, g),
		kaio.View(outs[0], kaio.DTypeF16, m, n), kaio.View(outs[1], kaio.DTypeF16, m, 32), kaio.View(outs[2], kaio.DTypeF16, m, 32), desc))
	ok(t, s.Synchronize())
	for p, hp := range []gptqHost{h, hk, hv} {
		np := len(hp.w) / k
		relError(t, fmt.Sprintf("qkv_project_int4 part %d", p), f16Wide(download[kaio.F16](t, outs[p], m*np)), matmulRef(a, hp.w, m, k, np), 2e-5+math.Ldexp(1, -11))
	}

	// Signed nibbles through the repack: KAIO's u32 N × K/8 -> K/8 × N.
	const kk, nn = 64, 16
	src := make([]uint32, nn*kk/8)
	for i := range src {
		src[i] = rng.Uint32()
	}
	db := upload(t, d, make([]uint32, nn*kk/8))
	ok(t, kaio.Int4RepackKAIO(s, kaio.View(upload(t, d, src), kaio.DTypeU32, nn, kk/8), kaio.View(db, kaio.DTypeU32, kk/8, nn)))
	sch, _ := randF16(rng, kk/32*nn, 0.01, 0.1)
	xh, x := randF16(rng, kk, -1, 1)
	c := upload(t, d, filled(nn, float32(math.NaN())))
	sd := kaio.DefaultMatmulInt4Desc()
	sd.Format, sd.GroupSize = kaio.Int4Signed, 32
	sw := kaio.Int4Weight{QWeight: kaio.View(db, kaio.DTypeU32, kk/8, nn), Scales: kaio.View(upload(t, d, sch), kaio.DTypeF16, kk/32, nn)}
	ok(t, kaio.MatmulInt4(s, kaio.View(upload(t, d, xh), kaio.DTypeF16, 1, kk), sw, kaio.View(c, kaio.DTypeF32, 1, nn), sd))
	ok(t, s.Synchronize())
	moved := download[uint32](t, db, nn*kk/8)
	wsig := make([]float64, kk*nn)
	for col := 0; col < nn; col++ {
		for r := 0; r < kk/8; r++ {
			if moved[r*nn+col] != src[col*(kk/8)+r] {
				t.Fatalf("repack at %d,%d", r, col)
			}
		}
		for x := 0; x < kk; x++ {
			nib := int32(src[col*(kk/8)+x/8]>>(4*(x%8))) & 0xF
			if nib >= 8 {
				nib -= 16
			}
			wsig[x*nn+col] = float64(kaio.F16FromFloat32(float32(nib) * sch[x/32*nn+col].Float32()).Float32())
		}
	}
	relError(t, "matmul_int4 signed after repack", f32Wide(download[float32](t, c, nn)), matmulRef(x, wsig, 1, kk, nn), 2e-5)
}

type attnRef struct{ o, lse, dq, dk, dv []float64 }

// attentionRef is the f64 forward and backward over [B·S, H·D] rows.
func attentionRef(ds kaio.AttentionDesc, q, k, v, dout []float64) attnRef {
	b, sq, sk, hq, hkv, dd := int(ds.Batch), int(ds.SeqQ), int(ds.SeqK), int(ds.HeadsQ), int(ds.HeadsKV), int(ds.HeadDim)
	scale := 1 / math.Sqrt(float64(dd))
	ldq, ldk := hq*dd, hkv*dd
	r := attnRef{make([]float64, len(q)), make([]float64, b*hq*sq), make([]float64, len(q)), make([]float64, len(k)), make([]float64, len(v))}
	for bb := 0; bb < b; bb++ {
		for h := 0; h < hq; h++ {
			hk := h / (hq / hkv)
			qi := func(i, x int) int { return (bb*sq+i)*ldq + h*dd + x }
			ki := func(j, x int) int { return (bb*sk+j)*ldk + hk*dd + x }
			p := make([][]float64, sq)
			for i := 0; i < sq; i++ {
				lim := sk
				switch ds.Mask {
				case kaio.AttentionCausalTopLeft:
					lim = i + 1
				case kaio.AttentionCausal:
					lim = i + sk - sq + 1
				}
				sc := make([]float64, sk)
				mx := math.Inf(-1)
				for j := range sc {
					sc[j] = math.Inf(-1)
					if j < lim {
						sc[j] = 0
						for x := 0; x < dd; x++ {
							sc[j] += q[qi(i, x)] * k[ki(j, x)]
						}
						sc[j] *= scale
					}
					mx = math.Max(mx, sc[j])
				}
				sum := 0.0
				for j := range sc {
					sum += math.Exp(sc[j] - mx)
				}
				r.lse[(bb*hq+h)*sq+i] = mx + math.Log(sum)
				p[i] = make([]float64, sk)
				for j := range sc {
					p[i][j] = math.Exp(sc[j]-mx) / sum
				}
				for x := 0; x < dd; x++ {
					for j := 0; j < sk; j++ {
						r.o[qi(i, x)] += p[i][j] * v[ki(j, x)]
					}
				}
			}
			for i := 0; i < sq; i++ {
				di := 0.0
				for x := 0; x < dd; x++ {
					di += dout[qi(i, x)] * r.o[qi(i, x)]
				}
				for j := 0; j < sk; j++ {
					dp := 0.0
					for x := 0; x < dd; x++ {
						dp += dout[qi(i, x)] * v[ki(j, x)]
					}
					dsv := p[i][j] * (dp - di)
					for x := 0; x < dd; x++ {
						r.dq[qi(i, x)] += scale * dsv * k[ki(j, x)]
						r.dk[ki(j, x)] += scale * dsv * q[qi(i, x)]
						r.dv[ki(j, x)] += p[i][j] * dout[qi(i, x)]
					}
				}
			}
		}
	}
	return r
}

func TestGPUAttentionForwardBackward(t *testing.T) {
	d := gpuDevice(t)
	s := must(d.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	rng := testRand(t)
	const b, sq, sk, hq, hkv, dd = 2, 17, 23, 4, 2, 64
	const nq, nk = b * sq * hq * dd, b * sk * hkv * dd
	cases := []struct {
		mask    kaio.AttentionMask
		variant kaio.AttentionVariant
	}{{kaio.AttentionMaskNone, kaio.AttentionAuto}, {kaio.AttentionCausal, kaio.AttentionSM80}, {kaio.AttentionCausalTopLeft, kaio.AttentionSM80M128}}
	for _, c := range cases {
		mask := c.mask
		desc := kaio.DefaultAttentionDesc()
		desc.Variant = c.variant
		desc.Mask, desc.Batch, desc.SeqQ, desc.SeqK, desc.HeadsQ, desc.HeadsKV, desc.HeadDim = mask, b, sq, sk, hq, hkv, dd
		qh, q := randF16(rng, nq, -1, 1)
		kh, k := randF16(rng, nk, -1, 1)
		vh, v := randF16(rng, nk, -1, 1)
		doh, dout := randF16(rng, nq, -1, 1)
		qv, kv, vv := kaio.View(upload(t, d, qh), kaio.DTypeF16, b*sq, hq*dd), kaio.View(upload(t, d, kh), kaio.DTypeF16, b*sk, hkv*dd), kaio.View(upload(t, d, vh), kaio.DTypeF16, b*sk, hkv*dd)
		ob, lb := upload(t, d, filled(nq, nanF16)), upload(t, d, filled(b*hq*sq, float32(math.NaN())))
		dqb, dkb, dvb := upload(t, d, filled(nq, nanF16)), upload(t, d, filled(nk, nanF16)), upload(t, d, filled(nk, nanF16))
		ov, lv := kaio.View(ob, kaio.DTypeF16, b*sq, hq*dd), kaio.View(lb, kaio.DTypeF32, b*hq, sq)
		ok(t, kaio.Attention(s, qv, kv, vv, ov, lv, desc))
		bwd := must(d.NewAttentionBackwardOp(desc)).get(t)
		ok(t, bwd.Launch(s, kaio.View(upload(t, d, doh), kaio.DTypeF16, b*sq, hq*dd), qv, kv, vv, ov, lv,
			kaio.View(dqb, kaio.DTypeF16, b*sq, hq*dd), kaio.View(dkb, kaio.DTypeF16, b*sk, hkv*dd), kaio.View(dvb, kaio.DTypeF16, b*sk, hkv*dd)))
		ok(t, s.Synchronize())
		bwd.Close()
		ref := attentionRef(desc, q, k, v, dout)
		what := fmt.Sprintf("attention mask %d variant %d", mask, c.variant)
		relError(t, what+" O", f16Wide(download[kaio.F16](t, ob, nq)), ref.o, 2e-3)
		for i, g := range download[float32](t, lb, b*hq*sq) {
			if math.Abs(float64(g)-ref.lse[i]) > 2e-3 {
				t.Fatalf("%s LSE at %d: %g vs %g", what, i, g, ref.lse[i])
			}
		}
		relError(t, what+" dQ", f16Wide(download[kaio.F16](t, dqb, nq)), ref.dq, 1e-2)
		relError(t, what+" dK", f16Wide(download[kaio.F16](t, dkb, nk)), ref.dk, 1e-2)
		relError(t, what+" dV", f16Wide(download[kaio.F16](t, dvb, nk)), ref.dv, 1e-2)
	}

	const tq, tk = 33, 40
	desc := kaio.DefaultAttentionDesc()
	desc.Batch, desc.SeqQ, desc.SeqK, desc.HeadsQ, desc.HeadsKV, desc.HeadDim = 1, tq, tk, 1, 1, dd
	qh, q := randF16(rng, tq*dd, -1, 1)
	kh, k := randF16(rng, tk*dd, -1, 1)
	vh, v := randF16(rng, tk*dd, -1, 1)
	qv, kv, vv := kaio.View(upload(t, d, qh), kaio.DTypeF16, tq, dd), kaio.View(upload(t, d, kh), kaio.DTypeF16, tk, dd), kaio.View(upload(t, d, vh), kaio.DTypeF16, tk, dd)
	for _, causal := range []bool{false, true} {
		out := upload(t, d, filled(tq*dd, float32(math.NaN())))
		ok(t, kaio.AttentionTC(s, qv, kv, vv, kaio.View(out, kaio.DTypeF32, tq, dd), causal))
		ok(t, s.Synchronize())
		desc.Mask = kaio.AttentionMaskNone
		if causal {
			desc.Mask = kaio.AttentionCausalTopLeft
		}
		ref := attentionRef(desc, q, k, v, make([]float64, tq*dd))
		relError(t, fmt.Sprintf("attention_tc causal %v", causal), f32Wide(download[float32](t, out, tq*dd)), ref.o, 2e-3)
	}
}

func randF32(rng *rand.Rand, n int) ([]float32, []float64) {
	h := make([]float32, n)
	w := make([]float64, n)
	for i := range h {
		h[i] = float32(2*rng.Float64() - 1)
		w[i] = float64(h[i])
	}
	return h, w
}

func allZero(v []float64) bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}

func TestGPUAttentionFlashF32(t *testing.T) {
	d := gpuDevice(t)
	s := must(d.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	rng := testRand(t)
	for _, c := range []struct {
		n, dd  int64
		causal bool
	}{{37, 64, false}, {37, 64, true}, {70, 128, true}, {1, 32, false}} {
		n, dd := c.n, c.dd
		desc := kaio.DefaultAttentionDesc()
		desc.Batch, desc.SeqQ, desc.SeqK, desc.HeadsQ, desc.HeadsKV, desc.HeadDim = 1, n, n, 1, 1, dd
		if c.causal {
			desc.Mask = kaio.AttentionCausalTopLeft
		}
		qh, q := randF32(rng, int(n*dd))
		kh, k := randF32(rng, int(n*dd))
		vh, v := randF32(rng, int(n*dd))
		doh, dout := randF32(rng, int(n*dd))
		view := func(b *kaio.Buffer, rows int64) kaio.Tensor { return kaio.View(b, kaio.DTypeF32, rows, dd) }
		poison := func() *kaio.Buffer { return upload(t, d, filled(int(n*dd), float32(math.NaN()))) }
		qv, kv, vv, dov := view(upload(t, d, qh), n), view(upload(t, d, kh), n), view(upload(t, d, vh), n), view(upload(t, d, doh), n)
		ob, o2b, dqb, dkb, dvb := poison(), poison(), poison(), poison(), poison()
		lb := upload(t, d, filled(int(n), float32(math.NaN())))
		lv := kaio.View(lb, kaio.DTypeF32, 1, n)
		ok(t, kaio.AttentionFlash(s, qv, kv, vv, view(o2b, n), kaio.Tensor{}, c.causal))
		ok(t, kaio.AttentionFlash(s, qv, kv, vv, view(ob, n), lv, c.causal))
		ok(t, kaio.AttentionFlashBackward(s, dov, qv, kv, vv, view(ob, n), lv, view(dqb, n), view(dkb, n), view(dvb, n), c.causal))
		ok(t, s.Synchronize())
		ref := attentionRef(desc, q, k, v, dout)
		what := fmt.Sprintf("attention_flash S %d D %d causal %v", n, dd, c.causal)
		nd := int(n * dd)
		relError(t, what+" O", f32Wide(download[float32](t, ob, nd)), ref.o, 2e-5)
		relError(t, what+" O (no stats)", f32Wide(download[float32](t, o2b, nd)), ref.o, 2e-5)
		for i, g := range download[float32](t, lb, int(n)) {
			if math.Abs(float64(g)-ref.lse[i]) > 2e-5 {
				t.Fatalf("%s LSE at %d: %g vs %g", what, i, g, ref.lse[i])
			}
		}
		grads := []struct {
			name string
			got  *kaio.Buffer
			want []float64
		}{{"dQ", dqb, ref.dq}, {"dK", dkb, ref.dk}, {"dV", dvb, ref.dv}}
		for _, g := range grads {
			got := f32Wide(download[float32](t, g.got, nd))
			if allZero(g.want) {
				// S = 1: one key, so dS = 0 exactly and a relative error is
				// undefined; the rounding residue must be tiny.
				for i, v := range got {
					if !(math.Abs(v) <= 1e-6) {
						t.Fatalf("%s %s at %d: expected 0, got %g", what, g.name, i, v)
					}
				}
				continue
			}
			relError(t, what+" "+g.name, got, g.want, 1e-4)
		}
	}
}

func TestGPUQKVProjectInt8(t *testing.T) {
	d := gpuDevice(t)
	s := must(d.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	rng := testRand(t)
	const m, k = 3, 96
	ns := []int{40, 12, 8}
	xh, x := randF16(rng, m*k, -1, 1)
	xv := kaio.View(upload(t, d, xh), kaio.DTypeF16, m, k)
	var wv, sv [3]kaio.Tensor
	want := make([][]float64, 3)
	for p, n := range ns {
		w := make([]int8, k*n)
		for i := range w {
			w[i] = int8(rng.Intn(255) - 127)
		}
		// q per tensor (1 x 1), k and v per column (1 x N).
		ns := n
		if p == 0 {
			ns = 1
		}
		sc := make([]float32, ns)
		for i := range sc {
			sc[i] = float32(0.001 + 0.009*rng.Float64())
		}
		wv[p] = kaio.View(upload(t, d, w), kaio.DTypeI8, k, int64(n))
		sv[p] = kaio.View(upload(t, d, sc), kaio.DTypeF32, 1, int64(ns))
		want[p] = make([]float64, m*n)
		for i := range want[p] {
			r, c := i/n, i%n
			acc := 0.0
			for kk := 0; kk < k; kk++ {
				acc += x[r*k+kk] * float64(w[kk*n+c])
			}
			if p == 0 {
				c = 0
			}
			want[p][i] = acc * float64(sc[c])
		}
	}
	for _, prepared := range []bool{false, true} {
		var ob [3]*kaio.Buffer
		var ov [3]kaio.Tensor
		for p, n := range ns {
			ob[p] = upload(t, d, filled(m*n, nanF16))
			ov[p] = kaio.View(ob[p], kaio.DTypeF16, m, int64(n))
		}
		if prepared {
			desc := kaio.DefaultQKVInt8Desc()
			desc.M, desc.K, desc.NQ, desc.NK, desc.NV = m, k, int64(ns[0]), int64(ns[1]), int64(ns[2])
			op := must(d.NewQKVProjectInt8Op(desc)).get(t)
			ok(t, op.Launch(s, kaio.QKVInt8Tensors(xv, wv[0], sv[0], wv[1], sv[1], wv[2], sv[2], ov[0], ov[1], ov[2])...))
			ok(t, s.Synchronize())
			op.Close()
		} else {
			ok(t, kaio.QKVProjectInt8(s, xv, wv[0], sv[0], wv[1], sv[1], wv[2], sv[2], ov[0], ov[1], ov[2], kaio.DefaultQKVInt8Desc()))
			ok(t, s.Synchronize())
		}
		for p, n := range ns {
			relError(t, fmt.Sprintf("qkv_project_int8 prepared %v part %d", prepared, p),
				f16Wide(download[kaio.F16](t, ob[p], m*n)), want[p], 2e-5+math.Pow(2, -11))
		}
	}
}

func TestGPULangSiluGate(t *testing.T) {
	d := gpuDevice(t)
	s := must(d.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	rng := testRand(t)
	k := must(d.NewLangKernel(siluGateSource)).get(t)
	defer k.Close()
	const r, c = 7, 129
	xh, x := randF16(rng, r*c, -4, 4)
	gh, g := randF16(rng, r*c, -2, 2)
	o := upload(t, d, filled(r*c, nanF16))
	ok(t, k.Launch(s, []kaio.Tensor{kaio.View(upload(t, d, xh), kaio.DTypeF16, r, c), kaio.View(upload(t, d, gh), kaio.DTypeF16, r, c),
		kaio.View(o, kaio.DTypeF16, r, c)}, nil))
	ok(t, s.Synchronize())
	ok(t, k.Check())
	got := f16Wide(download[kaio.F16](t, o, r*c))
	for i := range got {
		want := x[i] / (1 + math.Exp(-x[i])) * g[i]
		if math.Abs(got[i]-want) > math.Ldexp(1, -10)*math.Abs(want)+1e-6 {
			t.Fatalf("silu_gate at %d: %g vs %g", i, got[i], want)
		}
	}
}

func TestGPUKVCacheWrite(t *testing.T) {
	d := gpuDevice(t)
	s := must(d.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	rng := testRand(t)
	const n, w, rows = 5, 128, 48
	kh, _ := randF16(rng, n*w, -2, 2)
	vh, _ := randF16(rng, n*w, -2, 2)
	slots := []int32{17, -1, 0, 47, 33} // token 1 is padding
	poison := kaio.F16FromFloat32(-7.5)
	kv, vv := kaio.View(upload(t, d, kh), kaio.DTypeF16, n, w), kaio.View(upload(t, d, vh), kaio.DTypeF16, n, w)
	sv := kaio.View(upload(t, d, slots), kaio.DTypeI32, 1, n)
	kcb, vcb := upload(t, d, filled(rows*w, poison)), upload(t, d, filled(rows*w, poison))
	kcv, vcv := kaio.View(kcb, kaio.DTypeF16, rows, w), kaio.View(vcb, kaio.DTypeF16, rows, w)
	ok(t, kaio.KVCacheWrite(s, kv, vv, sv, kcv, vcv))
	ok(t, s.Synchronize())
	for _, c := range []struct {
		cache []kaio.F16
		src   []kaio.F16
	}{{download[kaio.F16](t, kcb, rows*w), kh}, {download[kaio.F16](t, vcb, rows*w), vh}} {
		for r := 0; r < rows; r++ {
			tok := -1
			for i, x := range slots {
				if int(x) == r {
					tok = i
				}
			}
			for col := 0; col < w; col++ {
				want := poison
				if tok >= 0 {
					want = c.src[tok*w+col]
				}
				if c.cache[r*w+col] != want {
					t.Fatalf("row %d col %d: got %v want %v", r, col, c.cache[r*w+col], want)
				}
			}
		}
	}
	// A slot past the cache: skipped, reported by the next Synchronize.
	bad := kaio.View(upload(t, d, []int32{3, 48, 5, 6, 7}), kaio.DTypeI32, 1, n)
	op := must(d.NewKVCacheWriteOp(kaio.DTypeF16, n, w, rows)).get(t)
	defer op.Close()
	ok(t, op.Launch(s, kv, kaio.Tensor{}, bad, kcv, kaio.Tensor{}))
	expectErr(t, s.Synchronize(), kaio.StatusOutOfBounds, "slot_mapping[1]")
	ok(t, s.Synchronize())
}
