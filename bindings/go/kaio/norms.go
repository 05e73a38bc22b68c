package kaio

// #include "shim.h"
import "C"

import "runtime"

// Normalisations beyond RMSNorm: the fused residual add + RMSNorm of a
// transformer block and LayerNorm. Row ops like NewRMSNormOp: one dtype for
// every view (f32, f16 or bf16), any row stride and offset, f32 math with
// one rounding per stored value, eps finite and >= 0. An op is immutable:
// its launches may run from any goroutine, on any stream of its device.

// NewAddRMSNormOp prepares residual += x (rounded to the dtype once, in
// place), then out = RMSNorm(residual)·weight. Launch tensors: x, residual,
// weight (1 x cols), out; x, residual and out rows x cols. out may be the
// very same view as x; residual must not overlap x, out or weight.
func (d *Device) NewAddRMSNormOp(dtype DType, rows, cols int64, eps float32) (*Op, error) {
	var p *C.kaio_op
	var e C.kg_err
	s := C.kg_op_create_add_rmsnorm(&p, d.raw(), C.kaio_dtype(dtype), C.int64_t(rows), C.int64_t(cols), C.float(eps), &e)
	return d.madeOp(s, p, &e)
}

// NewLayerNormOp prepares out = (x − mean) / sqrt(var + eps) · weight + bias
// over each row (biased variance, as torch's layer_norm). Launch tensors: x,
// weight, bias, out; weight and bias are 1 x cols, or Tensor{} (absent:
// weight 1, no bias). out may be the very same view as x.
func (d *Device) NewLayerNormOp(dtype DType, rows, cols int64, eps float32) (*Op, error) {
	var p *C.kaio_op
	var e C.kg_err
	s := C.kg_op_create_layernorm(&p, d.raw(), C.kaio_dtype(dtype), C.int64_t(rows), C.int64_t(cols), C.float(eps), &e)
	return d.madeOp(s, p, &e)
}

// AddRMSNorm is the one-shot add + RMSNorm (see NewAddRMSNormOp); dtype and
// shape come from x. residual is updated in place.
func AddRMSNorm(s *Stream, x, residual, weight, out Tensor, eps float32) error {
	cx, cr, cw, co := x.c(), residual.c(), weight.c(), out.c()
	var e C.kg_err
	err := check(C.kg_add_rmsnorm(s.raw(), &cx, &cr, &cw, &co, C.float(eps), &e), &e)
	runtime.KeepAlive(s)
	keepTensors(&x, &residual, &weight, &out)
	return err
}

// LayerNorm is the one-shot LayerNorm (see NewLayerNormOp); weight and bias
// may be Tensor{} (absent).
func LayerNorm(s *Stream, x, weight, bias, out Tensor, eps float32) error {
	cx, cw, cb, co := x.c(), weight.c(), bias.c(), out.c()
	var e C.kg_err
	err := check(C.kg_layernorm(s.raw(), &cx, &cw, &cb, &co, C.float(eps), &e), &e)
	runtime.KeepAlive(s)
	keepTensors(&x, &weight, &bias, &out)
	return err
}
