package kaio

// #include "shim.h"
import "C"

import "runtime"

// AttentionVarlenDesc describes attention on B packed sequences of
// different lengths (FlashAttention's varlen layout): Q [total_q, Hq·D], K
// and V [total_k, Hkv·D], O like Q, LSE f32 [Hq, total_q]; cuSeqlensQ and
// cuSeqlensK are i32 1 x (B+1) prefix sums (first 0) on the device. Masks
// apply per sequence. MaxSeqlenQ / MaxSeqlenK size the grid and must be >=
// every sequence's length. OutDType and ODType 0 mean DType. Start from
// DefaultAttentionVarlenDesc and set the shape; kaio.h ("Attention on
// variable-length batches") has the rules.
type AttentionVarlenDesc struct {
	// DType: Q, K, V, dO (F16 or BF16); OutDType: O forward, dQ, dK, dV
	// backward (F32, F16 or BF16); ODType: the backward's O (DType or F32).
	DType, OutDType, ODType DType
	Mask                    AttentionMask
	Variant                 AttentionVariant
	Batch                   int64
	MaxSeqlenQ, MaxSeqlenK  int64
	TotalQ, TotalK          int64
	HeadsQ, HeadsKV         int64
	HeadDim                 int64
	SoftmaxScale            float32 // 0 means 1/√D
}

// DefaultAttentionVarlenDesc is libkaio's default: f16, no mask, Auto,
// scale 0, every shape field 0 (must be set).
func DefaultAttentionVarlenDesc() AttentionVarlenDesc {
	d, err := AttentionVarlenDesc{}.c(true)
	if err != nil {
		panic(err)
	}
	return AttentionVarlenDesc{DType: DType(d.dtype), OutDType: DType(d.out_dtype), ODType: DType(d.o_dtype),
		Mask: AttentionMask(d.mask), Variant: AttentionVariant(d.variant), Batch: int64(d.batch),
		MaxSeqlenQ: int64(d.max_seqlen_q), MaxSeqlenK: int64(d.max_seqlen_k),
		TotalQ: int64(d.total_q), TotalK: int64(d.total_k),
		HeadsQ: int64(d.heads_q), HeadsKV: int64(d.heads_kv), HeadDim: int64(d.head_dim),
		SoftmaxScale: float32(d.softmax_scale)}
}

func (a AttentionVarlenDesc) c(defaults bool) (C.kaio_attention_varlen_desc, error) {
	var d C.kaio_attention_varlen_desc
	var e C.kg_err
	if err := check(C.kg_attention_varlen_desc_init(&d, &e), &e); err != nil || defaults {
		return d, err
	}
	d.dtype, d.out_dtype, d.o_dtype = C.kaio_dtype(a.DType), C.kaio_dtype(a.OutDType), C.kaio_dtype(a.ODType)
	d.mask, d.variant = C.kaio_attention_mask(a.Mask), C.kaio_attention_variant(a.Variant)
	d.batch, d.max_seqlen_q, d.max_seqlen_k = C.int64_t(a.Batch), C.int64_t(a.MaxSeqlenQ), C.int64_t(a.MaxSeqlenK)
	d.total_q, d.total_k = C.int64_t(a.TotalQ), C.int64_t(a.TotalK)
	d.heads_q, d.heads_kv, d.head_dim = C.int64_t(a.HeadsQ), C.int64_t(a.HeadsKV), C.int64_t(a.HeadDim)
	d.softmax_scale = C.float(a.SoftmaxScale)
	return d, nil
}

// NewAttentionVarlenOp prepares a varlen forward. Launch tensors: Q, K, V,
// cuSeqlensQ, cuSeqlensK, O, LSE (Tensor{}: not written). Launches may run
// from several goroutines at once.
func (d *Device) NewAttentionVarlenOp(desc AttentionVarlenDesc) (*Op, error) {
	cd, err := desc.c(false)
	if err != nil {
		return nil, err
	}
	var p *C.kaio_op
	var e C.kg_err
	s := C.kg_op_create_attention_varlen(&p, d.raw(), &cd, &e)
	return d.madeOp(s, p, &e)
}

// NewAttentionVarlenBackwardOp prepares a varlen backward (sm_80 kernels,
// deterministic). Launch tensors: dO, Q, K, V, cuSeqlensQ, cuSeqlensK, O,
// LSE, dQ, dK, dV; dQ, dK and dV (OutDType) are overwritten on every
// sequence's rows. The op owns an Hq·total_q f32 workspace, so one op must
// not run concurrently on two streams.
func (d *Device) NewAttentionVarlenBackwardOp(desc AttentionVarlenDesc) (*Op, error) {
	cd, err := desc.c(false)
	if err != nil {
		return nil, err
	}
	var p *C.kaio_op
	var e C.kg_err
	s := C.kg_op_create_attention_varlen_backward(&p, d.raw(), &cd, &e)
	return d.madeOp(s, p, &e)
}

// AttentionVarlen is the one-shot varlen forward; lse Tensor{}: not written.
func AttentionVarlen(s *Stream, q, k, v, cuSeqlensQ, cuSeqlensK, o, lse Tensor, desc AttentionVarlenDesc) error {
	cd, err := desc.c(false)
	if err != nil {
		return err
	}
	cq, ck, cv, ccq, cck, co, cl := q.c(), k.c(), v.c(), cuSeqlensQ.c(), cuSeqlensK.c(), o.c(), lse.c()
	var e C.kg_err
	err = check(C.kg_attention_varlen(s.raw(), &cq, &ck, &cv, &ccq, &cck, &co, &cl, &cd, &e), &e)
	runtime.KeepAlive(s)
	keepTensors(&q, &k, &v, &cuSeqlensQ, &cuSeqlensK, &o, &lse)
	return err
}
