package kaio_test

// GPU test of the varlen backward (NewAttentionVarlenBackwardOp) after the
// varlen forward, on packed sequences of (len_q, len_k) (3, 7), (1, 1),
// (9, 9), (20, 33), unmasked and causal (bottom-right), f16, GQA 2:1, D 64,
// against attentionRef of each sequence alone; every output poisoned (NaN)
// first. Tolerances as TestGPUAttentionForwardBackward: O 2e-3, dQ / dK /
// dV 1e-2 relative Frobenius.

import (
	"fmt"
	"math"
	"testing"

	"kaio.dev/kaio"
)

func TestGPUAttentionVarlenBackward(t *testing.T) {
	d := gpuDevice(t)
	s := must(d.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	rng := testRand(t)
	const hq, hkv, dd = 4, 2, 64
	const ldq, ldk = hq * dd, hkv * dd
	lq, lk := []int{3, 1, 9, 20}, []int{7, 1, 9, 33}
	cq, ck := []int32{0}, []int32{0}
	for i := range lq {
		cq = append(cq, cq[i]+int32(lq[i]))
		ck = append(ck, ck[i]+int32(lk[i]))
	}
	tq, tk := int(cq[len(lq)]), int(ck[len(lk)])
	nq, nk := tq*ldq, tk*ldk
	qh, q := randF16(rng, nq, -1, 1)
	kh, k := randF16(rng, nk, -1, 1)
	vh, v := randF16(rng, nk, -1, 1)
	doh, dout := randF16(rng, nq, -1, 1)
	qv, dov := kaio.View(upload(t, d, qh), kaio.DTypeF16, int64(tq), ldq), kaio.View(upload(t, d, doh), kaio.DTypeF16, int64(tq), ldq)
	kv, vv := kaio.View(upload(t, d, kh), kaio.DTypeF16, int64(tk), ldk), kaio.View(upload(t, d, vh), kaio.DTypeF16, int64(tk), ldk)
	cqv, ckv := kaio.View(upload(t, d, cq), kaio.DTypeI32, 1, int64(len(cq))), kaio.View(upload(t, d, ck), kaio.DTypeI32, 1, int64(len(ck)))
	for _, mask := range []kaio.AttentionMask{kaio.AttentionMaskNone, kaio.AttentionCausal} {
		desc := kaio.DefaultAttentionVarlenDesc()
		desc.Mask, desc.Batch, desc.MaxSeqlenQ, desc.MaxSeqlenK = mask, int64(len(lq)), 20, 33
		desc.TotalQ, desc.TotalK, desc.HeadsQ, desc.HeadsKV, desc.HeadDim = int64(tq), int64(tk), hq, hkv, dd
		ob, lb := upload(t, d, filled(nq, nanF16)), upload(t, d, filled(hq*tq, float32(math.NaN())))
		dqb, dkb, dvb := upload(t, d, filled(nq, nanF16)), upload(t, d, filled(nk, nanF16)), upload(t, d, filled(nk, nanF16))
		ov, lv := kaio.View(ob, kaio.DTypeF16, int64(tq), ldq), kaio.View(lb, kaio.DTypeF32, hq, int64(tq))
		ok(t, kaio.AttentionVarlen(s, qv, kv, vv, cqv, ckv, ov, lv, desc))
		bwd := must(d.NewAttentionVarlenBackwardOp(desc)).get(t)
		ok(t, bwd.Launch(s, dov, qv, kv, vv, cqv, ckv, ov, lv, kaio.View(dqb, kaio.DTypeF16, int64(tq), ldq),
			kaio.View(dkb, kaio.DTypeF16, int64(tk), ldk), kaio.View(dvb, kaio.DTypeF16, int64(tk), ldk)))
		ok(t, s.Synchronize())
		bwd.Close()
		want := attnRef{make([]float64, nq), nil, make([]float64, nq), make([]float64, nk), make([]float64, nk)}
		for b := range lq {
			q0, q1, k0, k1 := int(cq[b])*ldq, int(cq[b+1])*ldq, int(ck[b])*ldk, int(ck[b+1])*ldk
			ds := kaio.DefaultAttentionDesc()
			ds.Mask, ds.Batch, ds.SeqQ, ds.SeqK = mask, 1, int64(lq[b]), int64(lk[b])
			ds.HeadsQ, ds.HeadsKV, ds.HeadDim = hq, hkv, dd
			r := attentionRef(ds, q[q0:q1], k[k0:k1], v[k0:k1], dout[q0:q1])
			copy(want.o[q0:], r.o)
			copy(want.dq[q0:], r.dq)
			copy(want.dk[k0:], r.dk)
			copy(want.dv[k0:], r.dv)
		}
		what := fmt.Sprintf("varlen backward mask %d", mask)
		relError(t, what+" O", f16Wide(download[kaio.F16](t, ob, nq)), want.o, 2e-3)
		relError(t, what+" dQ", f16Wide(download[kaio.F16](t, dqb, nq)), want.dq, 1e-2)
		relError(t, what+" dK", f16Wide(download[kaio.F16](t, dkb, nk)), want.dk, 1e-2)
		relError(t, what+" dV", f16Wide(download[kaio.F16](t, dvb, nk)), want.dv, 1e-2)
	}
}
