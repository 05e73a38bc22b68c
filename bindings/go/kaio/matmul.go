package kaio

// #include "shim.h"
import "C"

import "runtime"

// Trans says whether a matmul operand is used as stored (N) or transposed (T).
type Trans int32

const (
	TransN Trans = C.KAIO_TRANS_N
	TransT Trans = C.KAIO_TRANS_T
)

// MatmulVariant picks the kernels: Auto the fastest for the device and shape;
// Sync and Async force the sm_80 mma.sync kernels without and with the
// multi-stage cp.async pipeline.
type MatmulVariant int32

const (
	MatmulAuto  MatmulVariant = C.KAIO_MATMUL_AUTO
	MatmulSync  MatmulVariant = C.KAIO_MATMUL_SYNC
	MatmulAsync MatmulVariant = C.KAIO_MATMUL_ASYNC
)

// MatmulDesc describes C = Alpha·op(A)·op(B) + Beta·C: A and B f16 or bf16,
// row-major, read in place (TransT on B is the nn.Linear weight layout); C
// f32, f16 or bf16. Start from DefaultMatmulDesc. K must be a multiple of 8,
// A and B 16-byte aligned with row strides that are multiples of 8 elements.
type MatmulDesc struct {
	InDType, OutDType DType
	TransA, TransB    Trans
	Variant           MatmulVariant
	M, N, K           int64 // one-shot calls: 0 means "from the views"
	Alpha, Beta       float32
}

// DefaultMatmulDesc is libkaio's default: f16 in, f32 out, no transposes,
// Auto, alpha 1, beta 0, M = N = K = 0.
func DefaultMatmulDesc() MatmulDesc {
	var d C.kaio_matmul_desc
	var e C.kg_err
	if err := check(C.kg_matmul_desc_init(&d, &e), &e); err != nil {
		panic(err) // cannot fail: the struct is this header's own
	}
	return MatmulDesc{
		InDType: DType(d.in_dtype), OutDType: DType(d.out_dtype),
		TransA: Trans(d.trans_a), TransB: Trans(d.trans_b), Variant: MatmulVariant(d.variant),
		M: int64(d.m), N: int64(d.n), K: int64(d.k), Alpha: float32(d.alpha), Beta: float32(d.beta),
	}
}

func (m *MatmulDesc) c() (C.kaio_matmul_desc, error) {
	var d C.kaio_matmul_desc
	var e C.kg_err
	if err := check(C.kg_matmul_desc_init(&d, &e), &e); err != nil {
		return d, err
	}
	d.in_dtype, d.out_dtype = C.kaio_dtype(m.InDType), C.kaio_dtype(m.OutDType)
	d.trans_a, d.trans_b = C.kaio_trans(m.TransA), C.kaio_trans(m.TransB)
	d.variant = C.kaio_matmul_variant(m.Variant)
	d.m, d.n, d.k = C.int64_t(m.M), C.int64_t(m.N), C.int64_t(m.K)
	d.alpha, d.beta = C.float(m.Alpha), C.float(m.Beta)
	return d, nil
}

// NewMatmulOp prepares a matmul (M, N, K set). Launch tensors: A, B, C.
func (d *Device) NewMatmulOp(desc MatmulDesc) (*Op, error) {
	cd, err := desc.c()
	if err != nil {
		return nil, err
	}
	var p *C.kaio_op
	var e C.kg_err
	s := C.kg_op_create_matmul(&p, d.raw(), &cd, &e)
	return d.madeOp(s, p, &e)
}

// Matmul is the one-shot matmul; shapes come from the views where desc's M,
// N, K are 0.
func Matmul(s *Stream, a, b, c Tensor, desc MatmulDesc) error {
	cd, err := desc.c()
	if err != nil {
		return err
	}
	ca, cb, cc := a.c(), b.c(), c.c()
	var e C.kg_err
	err = check(C.kg_matmul(s.raw(), &ca, &cb, &cc, &cd, &e), &e)
	runtime.KeepAlive(s)
	keepTensors(&a, &b, &c)
	return err
}

// MatmulTCKind names KAIO's fixed entry points: f32 C (M×N) = A (M×K) · B (K×N).
type MatmulTCKind int

const (
	MatmulTCF16       MatmulTCKind = iota // kaio_matmul_tc: f16 inputs, Auto
	MatmulTCF16Async                      // kaio_matmul_tc_async: f16, cp.async kernels
	MatmulTCBF16                          // kaio_matmul_tc_bf16: bf16 inputs, Auto
	MatmulTCBF16Async                     // kaio_matmul_tc_bf16_async: bf16, cp.async kernels
)

// MatmulTC runs one of KAIO's fixed entry points, one-shot.
func MatmulTC(s *Stream, kind MatmulTCKind, a, b, c Tensor) error {
	ca, cb, cc := a.c(), b.c(), c.c()
	var e C.kg_err
	err := check(C.kg_matmul_tc(C.int(kind), s.raw(), &ca, &cb, &cc, &e), &e)
	runtime.KeepAlive(s)
	keepTensors(&a, &b, &c)
	return err
}

// NewMatmulTCOp prepares one of KAIO's fixed entry points. Launch tensors:
// A (M×K), B (K×N), C (f32, M×N).
func (d *Device) NewMatmulTCOp(kind MatmulTCKind, m, n, k int64) (*Op, error) {
	var p *C.kaio_op
	var e C.kg_err
	s := C.kg_op_create_matmul_tc(C.int(kind), &p, d.raw(), C.int64_t(m), C.int64_t(n), C.int64_t(k), &e)
	return d.madeOp(s, p, &e)
}

// MatmulBackwardDesc describes the backward of C = A·B (A M×K, B K×N):
// dA = dC·Bᵀ + Beta·dA and dB = Aᵀ·dC + Beta·dB. GradDType is InDType or
// F32 (rounded into a workspace the op owns). M, N, K multiples of 8.
type MatmulBackwardDesc struct {
	InDType, GradDType, OutDType DType
	Variant                      MatmulVariant
	M, N, K                      int64
	Beta                         float32
}

// DefaultMatmulBackwardDesc is libkaio's default: f16 in and dC, f32 out,
// Auto, beta 0, M = N = K = 0.
func DefaultMatmulBackwardDesc() MatmulBackwardDesc {
	var d C.kaio_matmul_backward_desc
	var e C.kg_err
	if err := check(C.kg_matmul_backward_desc_init(&d, &e), &e); err != nil {
		panic(err) // cannot fail: the struct is this header's own
	}
	return MatmulBackwardDesc{
		InDType: DType(d.in_dtype), GradDType: DType(d.grad_dtype), OutDType: DType(d.out_dtype),
		Variant: MatmulVariant(d.variant), M: int64(d.m), N: int64(d.n), K: int64(d.k), Beta: float32(d.beta),
	}
}

// NewMatmulBackwardOp prepares a matmul backward. Launch tensors: dC, A, B,
// dA, dB; a Tensor{} (no buffer) for dA or dB skips that gradient.
func (d *Device) NewMatmulBackwardOp(desc MatmulBackwardDesc) (*Op, error) {
	var cd C.kaio_matmul_backward_desc
	var e C.kg_err
	if err := check(C.kg_matmul_backward_desc_init(&cd, &e), &e); err != nil {
		return nil, err
	}
	cd.in_dtype, cd.grad_dtype, cd.out_dtype = C.kaio_dtype(desc.InDType), C.kaio_dtype(desc.GradDType), C.kaio_dtype(desc.OutDType)
	cd.variant = C.kaio_matmul_variant(desc.Variant)
	cd.m, cd.n, cd.k = C.int64_t(desc.M), C.int64_t(desc.N), C.int64_t(desc.K)
	cd.beta = C.float(desc.Beta)
	var p *C.kaio_op
	s := C.kg_op_create_matmul_backward(&p, d.raw(), &cd, &e)
	return d.madeOp(s, p, &e)
}

// MatmulTCBackward is KAIO's one-shot backward: f16 A, B and dC; f32 dA and
// dB (a Tensor{} skips one); beta 0. An f32 dC needs NewMatmulBackwardOp.
func MatmulTCBackward(s *Stream, dc, a, b, da, db Tensor) error {
	cdc, ca, cb, cda, cdb := dc.c(), a.c(), b.c(), da.c(), db.c()
	var e C.kg_err
	err := check(C.kg_matmul_tc_backward(s.raw(), &cdc, &ca, &cb, &cda, &cdb, &e), &e)
	runtime.KeepAlive(s)
	keepTensors(&dc, &a, &b, &da, &db)
	return err
}
