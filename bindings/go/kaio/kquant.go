package kaio

// #include "shim.h"
import "C"

import "runtime"

// QuantFormat is a GGUF block format (kaio.h, "GGUF k-quants").
type QuantFormat int32

const (
	QuantQ8_0 QuantFormat = C.KAIO_QUANT_Q8_0 // 34 bytes per 32 values
	QuantQ4K  QuantFormat = C.KAIO_QUANT_Q4_K // 144 bytes per 256 values
	QuantQ5K  QuantFormat = C.KAIO_QUANT_Q5_K // 176 bytes per 256 values
	QuantQ6K  QuantFormat = C.KAIO_QUANT_Q6_K // 210 bytes per 256 values
)

// QuantMode picks the reference quantize reproduces byte for byte: ggml's
// quantize_row_*_ref or candle's QTensor::quantize (the same for Q8_0).
type QuantMode int32

const (
	QuantModeGGML   QuantMode = C.KAIO_QUANT_MODE_GGML
	QuantModeCandle QuantMode = C.KAIO_QUANT_MODE_CANDLE
)

// BlockElems is the values per block (32 or 256), 0 for an unknown format.
func (f QuantFormat) BlockElems() int64 {
	return int64(C.kaio_quant_block_elems(C.kaio_quant_format(f)))
}

// BlockBytes is the bytes per block, 0 for an unknown format.
func (f QuantFormat) BlockBytes() int64 {
	return int64(C.kaio_quant_block_bytes(C.kaio_quant_format(f)))
}

// RowBytes is the bytes of one quantized row of cols values, or 0 when cols
// is not a positive multiple of the block.
func (f QuantFormat) RowBytes(cols int64) int64 {
	return int64(C.kaio_quant_row_bytes(C.kaio_quant_format(f), C.int64_t(cols)))
}

// NewQuantizeOp prepares a quantize of an f32/f16/bf16 rows x cols matrix.
// Launch tensors: x, q (U8, rows x format.RowBytes(cols)).
func (d *Device) NewQuantizeOp(format QuantFormat, mode QuantMode, inDType DType, rows, cols int64) (*Op, error) {
	var p *C.kaio_op
	var e C.kg_err
	s := C.kg_op_create_quantize(&p, d.raw(), C.kaio_quant_format(format), C.kaio_quant_mode(mode),
		C.kaio_dtype(inDType), C.int64_t(rows), C.int64_t(cols), &e)
	return d.madeOp(s, p, &e)
}

// NewDequantizeOp prepares a dequantize into f32/f16/bf16. Launch tensors: q, y.
func (d *Device) NewDequantizeOp(format QuantFormat, outDType DType, rows, cols int64) (*Op, error) {
	var p *C.kaio_op
	var e C.kg_err
	s := C.kg_op_create_dequantize(&p, d.raw(), C.kaio_quant_format(format), C.kaio_dtype(outDType),
		C.int64_t(rows), C.int64_t(cols), &e)
	return d.madeOp(s, p, &e)
}

// NewQuantMatmulOp prepares C[M,N] = A[M,K]·dequant(W)ᵀ, W the N x K
// quantized weight; M > 8 allocates the op's workspaces here. Launch
// tensors: A, W, C.
func (d *Device) NewQuantMatmulOp(format QuantFormat, aDType, outDType DType, m, n, k int64) (*Op, error) {
	var p *C.kaio_op
	var e C.kg_err
	s := C.kg_op_create_quant_matmul(&p, d.raw(), C.kaio_quant_format(format), C.kaio_dtype(aDType),
		C.kaio_dtype(outDType), C.int64_t(m), C.int64_t(n), C.int64_t(k), &e)
	return d.madeOp(s, p, &e)
}

// Quantize is the one-shot quantize (shapes and dtype from x).
func Quantize(s *Stream, x, q Tensor, format QuantFormat, mode QuantMode) error {
	cx, cq := x.c(), q.c()
	var e C.kg_err
	err := check(C.kg_quantize(s.raw(), &cx, &cq, C.kaio_quant_format(format), C.kaio_quant_mode(mode), &e), &e)
	runtime.KeepAlive(s)
	keepTensors(&x, &q)
	return err
}

// Dequantize is the one-shot dequantize (shapes and dtype from y).
func Dequantize(s *Stream, q, y Tensor, format QuantFormat) error {
	cq, cy := q.c(), y.c()
	var e C.kg_err
	err := check(C.kg_dequantize(s.raw(), &cq, &cy, C.kaio_quant_format(format), &e), &e)
	runtime.KeepAlive(s)
	keepTensors(&q, &y)
	return err
}

// QuantMatmul is the one-shot dequant-matmul for M <= 8; it never allocates,
// so larger M is ErrUnsupported (use NewQuantMatmulOp).
func QuantMatmul(s *Stream, a, w, c Tensor, format QuantFormat) error {
	ca, cw, cc := a.c(), w.c(), c.c()
	var e C.kg_err
	err := check(C.kg_quant_matmul(s.raw(), &ca, &cw, &cc, C.kaio_quant_format(format), &e), &e)
	runtime.KeepAlive(s)
	keepTensors(&a, &w, &c)
	return err
}
