package kaio

// #include "shim.h"
import "C"

import (
	"runtime"
	"unsafe"
)

// GeluMode picks the GELU formula.
type GeluMode int32

const (
	// GeluErf is 0.5·x·(1 + erf(x/√2)).
	GeluErf GeluMode = C.KAIO_GELU_ERF
	// GeluTanh is 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³))).
	GeluTanh GeluMode = C.KAIO_GELU_TANH
)

// Op is a prepared op: one op kind with its dtype, shapes and options,
// validated once, kernels loaded at creation. Launch only checks the views
// and enqueues (no host sync, allocation or module load), on any stream of
// its device, from any goroutine.
type Op struct {
	ptr *C.kaio_op
}

func newOp(p *C.kaio_op) *Op {
	o := &Op{ptr: p}
	runtime.SetFinalizer(o, (*Op).Close)
	return o
}

func (d *Device) madeOp(s C.kaio_status, p *C.kaio_op, e *C.kg_err) (*Op, error) {
	runtime.KeepAlive(d)
	if err := check(s, e); err != nil {
		return nil, err
	}
	return newOp(p), nil
}

// NewSiluGateOp prepares out = x·sigmoid(x)·gate. Launch tensors: x, gate,
// out (contiguous; in place allowed). dtype f32, f16 or bf16.
func (d *Device) NewSiluGateOp(dtype DType, rows, cols int64) (*Op, error) {
	var p *C.kaio_op
	var e C.kg_err
	s := C.kg_op_create_silu_gate(&p, d.raw(), C.kaio_dtype(dtype), C.int64_t(rows), C.int64_t(cols), &e)
	return d.madeOp(s, p, &e)
}

// NewGeluOp prepares GELU. Launch tensors: x, out (contiguous; in place allowed).
func (d *Device) NewGeluOp(dtype DType, rows, cols int64, mode GeluMode) (*Op, error) {
	var p *C.kaio_op
	var e C.kg_err
	s := C.kg_op_create_gelu(&p, d.raw(), C.kaio_dtype(dtype), C.int64_t(rows), C.int64_t(cols), C.kaio_gelu_mode(mode), &e)
	return d.madeOp(s, p, &e)
}

// NewRMSNormOp prepares out[r,c] = x[r,c] / sqrt(mean_c x[r,:]² + eps) · weight[c]
// (eps finite, >= 0). Launch tensors: x, weight (1 x cols), out; any row stride.
func (d *Device) NewRMSNormOp(dtype DType, rows, cols int64, eps float32) (*Op, error) {
	var p *C.kaio_op
	var e C.kg_err
	s := C.kg_op_create_rmsnorm(&p, d.raw(), C.kaio_dtype(dtype), C.int64_t(rows), C.int64_t(cols), C.float(eps), &e)
	return d.madeOp(s, p, &e)
}

// NewSoftmaxOp prepares a numerically stable softmax along each row. Launch
// tensors: x, out; any row stride.
func (d *Device) NewSoftmaxOp(dtype DType, rows, cols int64) (*Op, error) {
	var p *C.kaio_op
	var e C.kg_err
	s := C.kg_op_create_softmax(&p, d.raw(), C.kaio_dtype(dtype), C.int64_t(rows), C.int64_t(cols), &e)
	return d.madeOp(s, p, &e)
}

// Close destroys the op. Idempotent.
func (o *Op) Close() error {
	if o == nil {
		return nil
	}
	return release(o, (*unsafe.Pointer)(unsafe.Pointer(&o.ptr)), func(p unsafe.Pointer) { C.kaio_op_destroy((*C.kaio_op)(p)) })
}

func (o *Op) raw() *C.kaio_op {
	if o == nil {
		return nil
	}
	return o.ptr
}

// cTensors converts views for a call that takes an array of kaio_tensor.
func cTensors(ts []Tensor) []C.kaio_tensor {
	ct := make([]C.kaio_tensor, len(ts))
	for i := range ts {
		ct[i] = ts[i].c()
	}
	return ct
}

func keepTensors(ts ...*Tensor) {
	for _, t := range ts {
		runtime.KeepAlive(t.Buffer)
	}
}

// Launch enqueues the op on s with the tensors in the order its constructor
// lists.
func (o *Op) Launch(s *Stream, tensors ...Tensor) error {
	ct := cTensors(tensors)
	var first *C.kaio_tensor
	if len(ct) > 0 {
		first = &ct[0]
	}
	var e C.kg_err
	err := check(C.kg_op_launch(o.raw(), s.raw(), first, C.size_t(len(ct)), &e), &e)
	runtime.KeepAlive(o)
	runtime.KeepAlive(s)
	for i := range tensors {
		runtime.KeepAlive(tensors[i].Buffer)
	}
	return err
}

// SiluGate is the one-shot out = x·sigmoid(x)·gate (see NewSiluGateOp).
func SiluGate(s *Stream, x, gate, out Tensor) error {
	cx, cg, co := x.c(), gate.c(), out.c()
	var e C.kg_err
	err := check(C.kg_silu_gate(s.raw(), &cx, &cg, &co, &e), &e)
	runtime.KeepAlive(s)
	keepTensors(&x, &gate, &out)
	return err
}

// Gelu is the one-shot GELU (see NewGeluOp).
func Gelu(s *Stream, x, out Tensor, mode GeluMode) error {
	cx, co := x.c(), out.c()
	var e C.kg_err
	err := check(C.kg_gelu(s.raw(), &cx, &co, C.kaio_gelu_mode(mode), &e), &e)
	runtime.KeepAlive(s)
	keepTensors(&x, &out)
	return err
}

// RMSNorm is the one-shot RMSNorm (see NewRMSNormOp).
func RMSNorm(s *Stream, x, weight, out Tensor, eps float32) error {
	cx, cw, co := x.c(), weight.c(), out.c()
	var e C.kg_err
	err := check(C.kg_rmsnorm(s.raw(), &cx, &cw, &co, C.float(eps), &e), &e)
	runtime.KeepAlive(s)
	keepTensors(&x, &weight, &out)
	return err
}

// Softmax is the one-shot row softmax (see NewSoftmaxOp).
func Softmax(s *Stream, x, out Tensor) error {
	cx, co := x.c(), out.c()
	var e C.kg_err
	err := check(C.kg_softmax(s.raw(), &cx, &co, &e), &e)
	runtime.KeepAlive(s)
	keepTensors(&x, &out)
	return err
}
