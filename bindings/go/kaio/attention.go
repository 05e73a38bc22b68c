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

// AttentionVariant picks the kernels; Auto is the sm_80 mma.sync kernels
// today, which SM80 forces.
type AttentionVariant int32

const (
	AttentionAuto AttentionVariant = C.KAIO_ATTENTION_AUTO
	AttentionSM80 AttentionVariant = C.KAIO_ATTENTION_SM80
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
}

// DefaultAttentionDesc is libkaio's default: f16, no mask, Auto, scale 0,
// every shape field 0 (must be set).
func DefaultAttentionDesc() AttentionDesc {
	d, err := AttentionDesc{}.c(true)
	if err != nil {
		panic(err)
	}
	return AttentionDesc{DType: DType(d.dtype), OutDType: DType(d.out_dtype), ODType: DType(d.o_dtype),
		Mask: AttentionMask(d.mask), Variant: AttentionVariant(d.variant),
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
	flag := C.int(0)
	if causal {
		flag = 1
	}
	var e C.kg_err
	err := check(C.kg_attention_tc(flag, s.raw(), &cq, &ck, &cv, &co, &e), &e)
	runtime.KeepAlive(s)
	keepTensors(&q, &k, &v, &out)
	return err
}
