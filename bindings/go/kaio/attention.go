package kaio

// #include "shim.h"
import "C"

import "runtime"

// AttentionMask says which keys a query sees.
type AttentionMask int32

const (
	AttentionMaskNone AttentionMask = C.KAIO_ATTENTION_MASK_NONE
	// AttentionCausal is bottom-right aligned (FlashAttention >= 2.1): j <= i + Sk − Sq.
	AttentionCausal AttentionMask = C.KAIO_ATTENTION_CAUSAL
	// AttentionCausalTopLeft is j <= i (PyTorch SDPA's is_causal, KAIO's).
	AttentionCausalTopLeft AttentionMask = C.KAIO_ATTENTION_CAUSAL_TOP_LEFT
)

// AttentionVariant picks the kernels: Auto chooses (Decode for Sq <= 16 and
// head dims 64, 128, 256); SM80 forces the 64-row mma.sync kernels, SM80M128
// the 128-row forward (head dims up to 128), SM90 the wgmma + TMA forward
// (compute capability 9.0, head dims 64, 128) and Decode the forward for few
// query rows against a long cache (Sq <= 16, head dims 64, 128, 256; no
// backward). A prepared Decode op splits the keys across CTAs through a
// workspace it owns, so one such op must not run on two streams at once;
// the one-shot Attention does not split.
type AttentionVariant int32

const (
	AttentionAuto     AttentionVariant = C.KAIO_ATTENTION_AUTO
	AttentionSM80     AttentionVariant = C.KAIO_ATTENTION_SM80
	AttentionSM80M128 AttentionVariant = C.KAIO_ATTENTION_SM80_M128
	AttentionSM90     AttentionVariant = C.KAIO_ATTENTION_SM90
	AttentionDecode   AttentionVariant = C.KAIO_ATTENTION_DECODE
)

// AttentionDesc describes FlashAttention forward or backward: Q [B, Sq, Hq,
// D], K and V [B, Sk, Hkv, D], each passed as the rank-2 view [B·S, H·D];
// the LSE is f32 [B·Hq, Sq]. OutDType and ODType 0 mean DType. Start from
// DefaultAttentionDesc and set the shape; kaio.h ("Attention") has the rules.
type AttentionDesc struct {
	DType, OutDType, ODType DType
	Mask                    AttentionMask
	Variant                 AttentionVariant
	Batch, SeqQ, SeqK       int64
	HeadsQ, HeadsKV         int64
	HeadDim                 int64
	SoftmaxScale            float32 // 0 means 1/√D
	// NonDeterministic is backward only, and false (the zero value, C's
	// deterministic 1) gives bit-identical gradients on every run. true
	// (deterministic 0): the sm_90a backward from 4096 keys (any mask) adds
	// dQ's f32 partial sums in whatever order its CTAs finish (up to about
	// 1.1x faster on an H100), so dQ may differ in the last bits between
	// runs. Elsewhere it changes nothing (no atomics, each gradient element
	// written once).
	NonDeterministic bool
}

// DefaultAttentionDesc is libkaio's default: f16, no mask, Auto,
// deterministic, scale 0, every shape field 0 (must be set).
func DefaultAttentionDesc() AttentionDesc {
	d, err := AttentionDesc{}.c(true)
	if err != nil {
		panic(err)
	}
	return AttentionDesc{DType: DType(d.dtype), OutDType: DType(d.out_dtype), ODType: DType(d.o_dtype),
		Mask: AttentionMask(d.mask), Variant: AttentionVariant(d.variant), NonDeterministic: d.deterministic == 0,
		Batch: int64(d.batch), SeqQ: int64(d.seq_q), SeqK: int64(d.seq_k),
		HeadsQ: int64(d.heads_q), HeadsKV: int64(d.heads_kv), HeadDim: int64(d.head_dim),
		SoftmaxScale: float32(d.softmax_scale)}
}

func (a AttentionDesc) c(defaults bool) (C.kaio_attention_desc, error) {
	var d C.kaio_attention_desc
	var e C.kg_err
	if err := check(C.kg_attention_desc_init(&d, &e), &e); err != nil || defaults {
		return d, err
	}
	d.dtype, d.out_dtype, d.o_dtype = C.kaio_dtype(a.DType), C.kaio_dtype(a.OutDType), C.kaio_dtype(a.ODType)
	d.mask, d.variant = C.kaio_attention_mask(a.Mask), C.kaio_attention_variant(a.Variant)
	d.deterministic = 1
	if a.NonDeterministic {
		d.deterministic = 0
	}
	d.batch, d.seq_q, d.seq_k = C.int64_t(a.Batch), C.int64_t(a.SeqQ), C.int64_t(a.SeqK)
	d.heads_q, d.heads_kv, d.head_dim = C.int64_t(a.HeadsQ), C.int64_t(a.HeadsKV), C.int64_t(a.HeadDim)
	d.softmax_scale = C.float(a.SoftmaxScale)
	return d, nil
}

// NewAttentionOp prepares an attention forward. Launch tensors: Q, K, V, O,
// LSE (Tensor{}: not written).
func (d *Device) NewAttentionOp(desc AttentionDesc) (*Op, error) {
	cd, err := desc.c(false)
	if err != nil {
		return nil, err
	}
	var p *C.kaio_op
	var e C.kg_err
	s := C.kg_op_create_attention(&p, d.raw(), &cd, &e)
	return d.madeOp(s, p, &e)
}

// NewAttentionBackwardOp prepares an attention backward; it owns a B·Hq·Sq
// f32 workspace, so one op must not run concurrently on two streams. Launch
// tensors: dO, Q, K, V, O, LSE, dQ, dK, dV.
func (d *Device) NewAttentionBackwardOp(desc AttentionDesc) (*Op, error) {
	cd, err := desc.c(false)
	if err != nil {
		return nil, err
	}
	var p *C.kaio_op
	var e C.kg_err
	s := C.kg_op_create_attention_backward(&p, d.raw(), &cd, &e)
	return d.madeOp(s, p, &e)
}

// Attention is the one-shot forward; desc gives the shape. lse Tensor{}: not
// written.
func Attention(s *Stream, q, k, v, o, lse Tensor, desc AttentionDesc) error {
	cd, err := desc.c(false)
	if err != nil {
		return err
	}
	cq, ck, cv, co, cl := q.c(), k.c(), v.c(), o.c(), lse.c()
	var e C.kg_err
	err = check(C.kg_attention(s.raw(), &cq, &ck, &cv, &co, &cl, &cd, &e), &e)
	runtime.KeepAlive(s)
	keepTensors(&q, &k, &v, &o, &lse)
	return err
}

// AttentionTC is KAIO's rank-2 single-head attention: f16 q [Sq, D], k and
// v [Sk, D] -> f32 out [Sq, D], scale 1/√D; causal masks top-left (j <= i).
func AttentionTC(s *Stream, q, k, v, out Tensor, causal bool) error {
	cq, ck, cv, co := q.c(), k.c(), v.c(), out.c()
	var e C.kg_err
	err := check(C.kg_attention_tc(causalFlag(causal), s.raw(), &cq, &ck, &cv, &co, &e), &e)
	runtime.KeepAlive(s)
	keepTensors(&q, &k, &v, &out)
	return err
}

func causalFlag(causal bool) C.int {
	if causal {
		return 1
	}
	return 0
}

// AttentionFlash is KAIO's f32 single-head FlashAttention (self-attention,
// one length S): q, k, v [S, D] f32 (D <= 256) -> out [S, D] f32, scale
// 1/√D, f32 end to end on the CUDA cores; causal masks top-left (j <= i).
// lse (f32 [1, S], the rows' natural-log logsumexp, which the backward
// needs) is written unless it is Tensor{}.
func AttentionFlash(s *Stream, q, k, v, out, lse Tensor, causal bool) error {
	cq, ck, cv, co, cl := q.c(), k.c(), v.c(), out.c(), lse.c()
	var e C.kg_err
	err := check(C.kg_attention_flash(causalFlag(causal), s.raw(), &cq, &ck, &cv, &co, &cl, &e), &e)
	runtime.KeepAlive(s)
	keepTensors(&q, &k, &v, &out, &lse)
	return err
}

// AttentionFlashBackward is the backward of AttentionFlash (same causal):
// it overwrites dq, dk and dv (f32 [S, D]) from dout, q, k, v and the
// forward's out and lse. f32 end to end and deterministic.
func AttentionFlashBackward(s *Stream, dout, q, k, v, out, lse, dq, dk, dv Tensor, causal bool) error {
	cdo, cq, ck, cv, co, cl := dout.c(), q.c(), k.c(), v.c(), out.c(), lse.c()
	cdq, cdk, cdv := dq.c(), dk.c(), dv.c()
	var e C.kg_err
	err := check(C.kg_attention_flash_backward(causalFlag(causal), s.raw(), &cdo, &cq, &ck, &cv, &co, &cl,
		&cdq, &cdk, &cdv, &e), &e)
	runtime.KeepAlive(s)
	keepTensors(&dout, &q, &k, &v, &out, &lse, &dq, &dk, &dv)
	return err
}
