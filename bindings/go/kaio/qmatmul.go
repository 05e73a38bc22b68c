package kaio

// #include "shim.h"
import "C"

import "runtime"

// MatmulInt8Desc describes INT8 W8A8, C = ((A·Bᵀ·Alpha)·sa[m])·sb[n]: A i8
// M×K, B i8 N×K, C f32, f16, bf16 or i32 (exact sums). Start from
// DefaultMatmulInt8Desc; kaio.h ("Quantized matmul") has the constraints.
type MatmulInt8Desc struct {
	OutDType DType
	M, N, K  int64 // one-shot calls: 0 means "from the views"
	Alpha    float32
	// MatmulAuto (wgmma on compute capability 9.0, else mma.sync) or
	// MatmulAsync (always the mma.sync kernel); MatmulSync is rejected.
	Variant MatmulVariant
}

// DefaultMatmulInt8Desc is libkaio's default: f32 out, alpha 1, Auto, M = N = K = 0.
func DefaultMatmulInt8Desc() MatmulInt8Desc {
	d, err := MatmulInt8Desc{}.c(true)
	if err != nil {
		panic(err) // cannot fail: the struct is this header's own
	}
	return MatmulInt8Desc{OutDType: DType(d.out_dtype), M: int64(d.m), N: int64(d.n), K: int64(d.k), Alpha: float32(d.alpha),
		Variant: MatmulVariant(d.variant)}
}

func (m MatmulInt8Desc) c(defaults bool) (C.kaio_matmul_int8_desc, error) {
	var d C.kaio_matmul_int8_desc
	var e C.kg_err
	if err := check(C.kg_matmul_int8_desc_init(&d, &e), &e); err != nil || defaults {
		return d, err
	}
	d.out_dtype = C.kaio_dtype(m.OutDType)
	d.m, d.n, d.k = C.int64_t(m.M), C.int64_t(m.N), C.int64_t(m.K)
	d.alpha = C.float(m.Alpha)
	d.variant = C.kaio_matmul_variant(m.Variant)
	return d, nil
}

// NewMatmulInt8Op prepares an INT8 matmul (M, N, K set). Launch tensors: A,
// B, sa, sb, C; a Tensor{} for an absent scale.
func (d *Device) NewMatmulInt8Op(desc MatmulInt8Desc) (*Op, error) {
	cd, err := desc.c(false)
	if err != nil {
		return nil, err
	}
	var p *C.kaio_op
	var e C.kg_err
	s := C.kg_op_create_matmul_int8(&p, d.raw(), &cd, &e)
	return d.madeOp(s, p, &e)
}

// MatmulInt8 is the one-shot INT8 matmul; sa or sb Tensor{} is absent (1).
func MatmulInt8(s *Stream, a, b, sa, sb, c Tensor, desc MatmulInt8Desc) error {
	cd, err := desc.c(false)
	if err != nil {
		return err
	}
	ca, cb, csa, csb, cc := a.c(), b.c(), sa.c(), sb.c(), c.c()
	var e C.kg_err
	err = check(C.kg_matmul_int8(s.raw(), &ca, &cb, &csa, &csb, &cc, &cd, &e), &e)
	runtime.KeepAlive(s)
	keepTensors(&a, &b, &sa, &sb, &c)
	return err
}

// Int4Format is how INT4 weights are stored.
type Int4Format int32

const (
	Int4GPTQ   Int4Format = C.KAIO_INT4_GPTQ   // unsigned nibbles with zero points
	Int4Signed Int4Format = C.KAIO_INT4_SIGNED // signed nibbles, no zero points
)

// MatmulInt4Desc describes INT4 W4A16, C = A·W with W K×N from GPTQ's
// qweight/qzeros/scales. Start from DefaultMatmulInt4Desc.
type MatmulInt4Desc struct {
	InDType, OutDType DType
	Format            Int4Format
	M, N, K           int64
	GroupSize         int64 // 0 means 128
	ZerosOffset       uint32
}

// DefaultMatmulInt4Desc is libkaio's default: f16 in, f32 out, GPTQ, group
// 128, zeros offset 0.
func DefaultMatmulInt4Desc() MatmulInt4Desc {
	d, err := MatmulInt4Desc{}.c(true)
	if err != nil {
		panic(err)
	}
	return MatmulInt4Desc{InDType: DType(d.in_dtype), OutDType: DType(d.out_dtype), Format: Int4Format(d.format),
		M: int64(d.m), N: int64(d.n), K: int64(d.k), GroupSize: int64(d.group_size), ZerosOffset: uint32(d.zeros_offset)}
}

func (m MatmulInt4Desc) c(defaults bool) (C.kaio_matmul_int4_desc, error) {
	var d C.kaio_matmul_int4_desc
	var e C.kg_err
	if err := check(C.kg_matmul_int4_desc_init(&d, &e), &e); err != nil || defaults {
		return d, err
	}
	d.in_dtype, d.out_dtype, d.format = C.kaio_dtype(m.InDType), C.kaio_dtype(m.OutDType), C.kaio_int4_format(m.Format)
	d.m, d.n, d.k, d.group_size = C.int64_t(m.M), C.int64_t(m.N), C.int64_t(m.K), C.int64_t(m.GroupSize)
	d.zeros_offset = C.uint32_t(m.ZerosOffset)
	return d, nil
}

// Int4Weight is one INT4 weight: QWeight (u32 K/8 × N), QZeros (Tensor{}:
// every zero point is 8, or the Signed format) and Scales (K/g × N).
type Int4Weight struct {
	QWeight, QZeros, Scales Tensor
}

// NewMatmulInt4Op prepares an INT4 matmul; M > 16 owns a K×N workspace, except
// on compute capability 9.0 up to M = 4096 (the decode kernel or one fused
// kernel there, see kaio_matmul_int4's "Kernels" in kaio.h).
// Launch tensors: A, qweight, qzeros, scales, C.
func (d *Device) NewMatmulInt4Op(desc MatmulInt4Desc) (*Op, error) {
	cd, err := desc.c(false)
	if err != nil {
		return nil, err
	}
	var p *C.kaio_op
	var e C.kg_err
	s := C.kg_op_create_matmul_int4(&p, d.raw(), &cd, &e)
	return d.madeOp(s, p, &e)
}

// MatmulInt4 is the one-shot INT4 matmul (the decode kernel for any M).
func MatmulInt4(s *Stream, a Tensor, w Int4Weight, c Tensor, desc MatmulInt4Desc) error {
	cd, err := desc.c(false)
	if err != nil {
		return err
	}
	ca, cqw, cqz, csc, cc := a.c(), w.QWeight.c(), w.QZeros.c(), w.Scales.c(), c.c()
	var e C.kg_err
	err = check(C.kg_matmul_int4(s.raw(), &ca, &cqw, &cqz, &csc, &cc, &cd, &e), &e)
	runtime.KeepAlive(s)
	keepTensors(&a, &w.QWeight, &w.QZeros, &w.Scales, &c)
	return err
}

// Int4RepackKAIO turns KAIO's signed-nibble storage (u32 N × K/8) into the
// K/8 × N arrangement of Int4Signed. Stream-ordered.
func Int4RepackKAIO(s *Stream, src, dst Tensor) error {
	cs, cd := src.c(), dst.c()
	var e C.kg_err
	err := check(C.kg_int4_repack_kaio(s.raw(), &cs, &cd, &e), &e)
	runtime.KeepAlive(s)
	keepTensors(&src, &dst)
	return err
}

// QKVInt4Desc describes the fused INT4 QKV projection, out_p = x·W_p.
// Start from DefaultQKVInt4Desc.
type QKVInt4Desc struct {
	InDType, OutDType DType
	Format            Int4Format
	M, K              int64
	NQ, NK, NV        int64
	GroupSize         int64 // 0 means 128
	ZerosOffset       uint32
}

// DefaultQKVInt4Desc is libkaio's default: f16 in and out, GPTQ, group 128.
func DefaultQKVInt4Desc() QKVInt4Desc {
	d, err := QKVInt4Desc{}.c(true)
	if err != nil {
		panic(err)
	}
	return QKVInt4Desc{InDType: DType(d.in_dtype), OutDType: DType(d.out_dtype), Format: Int4Format(d.format),
		M: int64(d.m), K: int64(d.k), NQ: int64(d.n_q), NK: int64(d.n_k), NV: int64(d.n_v),
		GroupSize: int64(d.group_size), ZerosOffset: uint32(d.zeros_offset)}
}

func (m QKVInt4Desc) c(defaults bool) (C.kaio_qkv_int4_desc, error) {
	var d C.kaio_qkv_int4_desc
	var e C.kg_err
	if err := check(C.kg_qkv_int4_desc_init(&d, &e), &e); err != nil || defaults {
		return d, err
	}
	d.in_dtype, d.out_dtype, d.format = C.kaio_dtype(m.InDType), C.kaio_dtype(m.OutDType), C.kaio_int4_format(m.Format)
	d.m, d.k = C.int64_t(m.M), C.int64_t(m.K)
	d.n_q, d.n_k, d.n_v = C.int64_t(m.NQ), C.int64_t(m.NK), C.int64_t(m.NV)
	d.group_size, d.zeros_offset = C.int64_t(m.GroupSize), C.uint32_t(m.ZerosOffset)
	return d, nil
}

// QKVInt4Tensors is the 13-view launch list of the fused QKV projection in
// kaio.h's order: x, then qweight, qzeros, scales of q, k and v, then the
// three outputs.
func QKVInt4Tensors(x Tensor, wq, wk, wv Int4Weight, outQ, outK, outV Tensor) []Tensor {
	return []Tensor{x, wq.QWeight, wq.QZeros, wq.Scales, wk.QWeight, wk.QZeros, wk.Scales,
		wv.QWeight, wv.QZeros, wv.Scales, outQ, outK, outV}
}

// NewQKVProjectInt4Op prepares the fused QKV projection. Launch tensors:
// QKVInt4Tensors(...).
func (d *Device) NewQKVProjectInt4Op(desc QKVInt4Desc) (*Op, error) {
	cd, err := desc.c(false)
	if err != nil {
		return nil, err
	}
	var p *C.kaio_op
	var e C.kg_err
	s := C.kg_op_create_qkv_project_int4(&p, d.raw(), &cd, &e)
	return d.madeOp(s, p, &e)
}

// QKVProjectInt4 is the one-shot fused QKV projection; M, K, N* of 0 come
// from the views.
func QKVProjectInt4(s *Stream, x Tensor, wq, wk, wv Int4Weight, outQ, outK, outV Tensor, desc QKVInt4Desc) error {
	cd, err := desc.c(false)
	if err != nil {
		return err
	}
	ts := QKVInt4Tensors(x, wq, wk, wv, outQ, outK, outV)
	ct := cTensors(ts)
	var e C.kg_err
	err = check(C.kg_qkv_project_int4(s.raw(), &ct[0], C.size_t(len(ct)), &cd, &e), &e)
	runtime.KeepAlive(s)
	runtime.KeepAlive(ts)
	return err
}

// QKVInt8Desc describes the fused INT8-weight QKV projection (W8A16):
// out_p = (x·W_p)·scale_p, x f16 M×K, W_p i8 K×N_p, scale_p f32 1×1 (per
// tensor) or 1×N_p (per column). Start from DefaultQKVInt8Desc; kaio.h
// ("Fused QKV projection, int8 weights") has the constraints.
type QKVInt8Desc struct {
	OutDType   DType // F16 (default), BF16 or F32
	M, K       int64
	NQ, NK, NV int64
}

// DefaultQKVInt8Desc is libkaio's default: f16 out, every shape 0.
func DefaultQKVInt8Desc() QKVInt8Desc {
	d, err := QKVInt8Desc{}.c(true)
	if err != nil {
		panic(err)
	}
	return QKVInt8Desc{OutDType: DType(d.out_dtype), M: int64(d.m), K: int64(d.k),
		NQ: int64(d.n_q), NK: int64(d.n_k), NV: int64(d.n_v)}
}

func (m QKVInt8Desc) c(defaults bool) (C.kaio_qkv_int8_desc, error) {
	var d C.kaio_qkv_int8_desc
	var e C.kg_err
	if err := check(C.kg_qkv_int8_desc_init(&d, &e), &e); err != nil || defaults {
		return d, err
	}
	d.out_dtype = C.kaio_dtype(m.OutDType)
	d.m, d.k = C.int64_t(m.M), C.int64_t(m.K)
	d.n_q, d.n_k, d.n_v = C.int64_t(m.NQ), C.int64_t(m.NK), C.int64_t(m.NV)
	return d, nil
}

// QKVInt8Tensors is the 10-view launch list of the fused INT8-weight QKV
// projection in kaio.h's order: x, each weight followed by its scale (q, k,
// v), then the three outputs.
func QKVInt8Tensors(x, wq, sq, wk, sk, wv, sv, outQ, outK, outV Tensor) []Tensor {
	return []Tensor{x, wq, sq, wk, sk, wv, sv, outQ, outK, outV}
}

// NewQKVProjectInt8Op prepares the fused INT8-weight QKV projection. Launch
// tensors: QKVInt8Tensors(...).
func (d *Device) NewQKVProjectInt8Op(desc QKVInt8Desc) (*Op, error) {
	cd, err := desc.c(false)
	if err != nil {
		return nil, err
	}
	var p *C.kaio_op
	var e C.kg_err
	s := C.kg_op_create_qkv_project_int8(&p, d.raw(), &cd, &e)
	return d.madeOp(s, p, &e)
}

// QKVProjectInt8 is the one-shot fused INT8-weight QKV projection; M, K, N*
// of 0 come from the views.
func QKVProjectInt8(s *Stream, x, wq, sq, wk, sk, wv, sv, outQ, outK, outV Tensor, desc QKVInt8Desc) error {
	cd, err := desc.c(false)
	if err != nil {
		return err
	}
	ts := QKVInt8Tensors(x, wq, sq, wk, sk, wv, sv, outQ, outK, outV)
	ct := cTensors(ts)
	var e C.kg_err
	err = check(C.kg_qkv_project_int8(s.raw(), &ct[0], C.size_t(len(ct)), &cd, &e), &e)
	runtime.KeepAlive(s)
	runtime.KeepAlive(ts)
	return err
}
