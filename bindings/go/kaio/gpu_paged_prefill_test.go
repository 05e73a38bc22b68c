package kaio_test

// GPU test of the paged prefill (NewAttentionPagedPrefillOp and
// AttentionPagedPrefill) against the f64 reference of each sequence alone:
// new rows 0, 1 and 7 against caches of 5, 33 and 1 tokens (seqLens 5, 34
// and 8: the cache INCLUDING the new rows), causal (bottom-right), GQA 4:1,
// D 64, pages of 16 shuffled in a pool with spare pages; unused slots, spare
// pages and unused block-table entries' pages hold large garbage (±50) that
// would show if read. Outputs poisoned (NaN) first. Tolerances: O relative
// Frobenius f16 2e-3, bf16 1.2e-2 (one rounding of O and of P before P·V,
// 2^-11 / 2^-8 per element, averaged over the keys); LSE 2e-3 absolute
// (f32 sums of exact products). Variants AUTO (the sm_90a TMA kernel on
// sm_90) and SM80_M128 (the mma.sync paged row fetch).

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"kaio.dev/kaio"
)

func pagedPrefillCase[T half](t *testing.T, d *kaio.Device, s *kaio.Stream, rng *rand.Rand, dt kaio.DType,
	enc func(float32) T, dec func(T) float32, tolO float64) {
	const hq, hkv, dd, page, maxPages = 8, 2, 64, 16, 3 // ceil(34 / 16) pages
	const ldq, ldk = hq * dd, hkv * dd
	lq, lk := []int{0, 1, 7}, []int{5, 34, 8}
	b := len(lq)
	cu := []int32{0}
	used := 0
	for i, n := range lq {
		cu = append(cu, cu[i]+int32(n))
		used += (lk[i] + page - 1) / page
	}
	totalQ := int(cu[b])
	pages := used + 3
	perm := rng.Perm(pages)
	qh, q := randHalf(rng, totalQ*ldq, -1, 1, enc, dec)
	kp, _ := randHalf(rng, pages*page*ldk, -50, 50, enc, dec)
	vp, _ := randHalf(rng, pages*page*ldk, -50, 50, enc, dec)
	table := make([]int32, b*maxPages)
	wantO := make([]float64, totalQ*ldq)
	wantL := make([]float64, hq*totalQ)
	next := 0
	for bb, n := range lk {
		kh, k := randHalf(rng, n*ldk, -1, 1, enc, dec)
		vh, v := randHalf(rng, n*ldk, -1, 1, enc, dec)
		np := (n + page - 1) / page
		for i := 0; i < maxPages; i++ {
			table[bb*maxPages+i] = int32(perm[pages-1]) // past the sequence: a spare page
			if i < np {
				table[bb*maxPages+i] = int32(perm[next+i])
			}
		}
		next += np
		for j := 0; j < n; j++ {
			row := int(table[bb*maxPages+j/page])*page + j%page
			copy(kp[row*ldk:(row+1)*ldk], kh[j*ldk:])
			copy(vp[row*ldk:(row+1)*ldk], vh[j*ldk:])
		}
		if lq[bb] == 0 {
			continue
		}
		st := int(cu[bb])
		r := seqRef(kaio.AttentionCausal, lq[bb], n, hq, hkv, dd, q[st*ldq:(st+lq[bb])*ldq], k, v)
		copy(wantO[st*ldq:], r.o)
		for h := 0; h < hq; h++ {
			for i := 0; i < lq[bb]; i++ {
				wantL[h*totalQ+st+i] = r.lse[h*lq[bb]+i]
			}
		}
	}
	lens := []int32{int32(lk[0]), int32(lk[1]), int32(lk[2])}
	qv := kaio.View(upload(t, d, qh), dt, int64(totalQ), ldq)
	kpv, vpv := kaio.View(upload(t, d, kp), dt, int64(pages*page), ldk), kaio.View(upload(t, d, vp), dt, int64(pages*page), ldk)
	cuv := kaio.View(upload(t, d, cu), kaio.DTypeI32, 1, int64(b+1))
	tv, lv := kaio.View(upload(t, d, table), kaio.DTypeI32, int64(b), maxPages), kaio.View(upload(t, d, lens), kaio.DTypeI32, 1, int64(b))
	paged := kaio.DefaultAttentionPagedDesc()
	paged.PageSize = page
	nan := enc(float32(math.NaN()))
	for _, variant := range []kaio.AttentionVariant{kaio.AttentionAuto, kaio.AttentionSM80M128} {
		desc := kaio.DefaultAttentionVarlenDesc()
		desc.DType, desc.Mask, desc.Variant, desc.Batch = dt, kaio.AttentionCausal, variant, int64(b)
		desc.MaxSeqlenQ, desc.MaxSeqlenK, desc.TotalQ, desc.TotalK = 7, maxPages*page, int64(totalQ), 0
		desc.HeadsQ, desc.HeadsKV, desc.HeadDim = hq, hkv, dd
		op := must(d.NewAttentionPagedPrefillOp(desc, paged)).get(t)
		for _, prepared := range []bool{true, false} {
			ob, lb := upload(t, d, filled(totalQ*ldq, nan)), upload(t, d, filled(hq*totalQ, float32(math.NaN())))
			ov, lsev := kaio.View(ob, dt, int64(totalQ), ldq), kaio.View(lb, kaio.DTypeF32, hq, int64(totalQ))
			if prepared {
				ok(t, op.Launch(s, qv, kpv, vpv, cuv, tv, lv, ov, lsev))
			} else {
				ok(t, kaio.AttentionPagedPrefill(s, qv, kpv, vpv, cuv, tv, lv, ov, lsev, desc, paged))
			}
			ok(t, s.Synchronize())
			got := download[T](t, ob, totalQ*ldq)
			gotW := make([]float64, len(got))
			for i, x := range got {
				gotW[i] = float64(dec(x))
			}
			what := fmt.Sprintf("paged prefill dtype %d variant %d prepared %v", dt, variant, prepared)
			relError(t, what+" O", gotW, wantO, tolO)
			checkLSE(t, what, download[float32](t, lb, hq*totalQ), func(i int) (float64, bool) { return wantL[i], true })
		}
		op.Close()
	}
}

func TestGPUAttentionPagedPrefill(t *testing.T) {
	d := gpuDevice(t)
	s := must(d.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	rng := testRand(t)
	pagedPrefillCase(t, d, s, rng, kaio.DTypeF16, kaio.F16FromFloat32, kaio.F16.Float32, 2e-3)
	pagedPrefillCase(t, d, s, rng, kaio.DTypeBF16, kaio.BF16FromFloat32, kaio.BF16.Float32, 1.2e-2)
}
