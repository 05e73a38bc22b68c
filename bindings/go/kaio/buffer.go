package kaio

// #include "shim.h"
import "C"

import (
	"runtime"
	"unsafe"
)

// Buffer is a range of device memory, owned (freed by Close) or a wrapper
// over foreign memory (never freed by kaio). Offsets and sizes are in bytes;
// WriteSlice and ReadSlice copy typed Go slices.
type Buffer struct {
	ptr     *C.kaio_buffer
	foreign bool
}

func newBuffer(p *C.kaio_buffer, foreign bool) *Buffer {
	b := &Buffer{ptr: p, foreign: foreign}
	runtime.SetFinalizer(b, (*Buffer).Close)
	return b
}

// NewBuffer allocates sizeBytes (>= 1) of device memory, 256-byte aligned,
// contents undefined. Not a steady-state operation: allocate before
// capturing CUDA graphs.
func (d *Device) NewBuffer(sizeBytes uint64) (*Buffer, error) {
	var p *C.kaio_buffer
	var e C.kg_err
	err := check(C.kg_buffer_create(&p, d.raw(), C.uint64_t(sizeBytes), &e), &e)
	runtime.KeepAlive(d)
	if err != nil {
		return nil, err
	}
	return newBuffer(p, false), nil
}

// WrapBuffer wraps foreign device memory [devicePtr, devicePtr+sizeBytes),
// checked against the driver's allocation record and the device. kaio never
// frees it: the caller keeps it allocated while the wrapper and the work
// enqueued on it live.
func (d *Device) WrapBuffer(devicePtr, sizeBytes uint64) (*Buffer, error) {
	var p *C.kaio_buffer
	var e C.kg_err
	err := check(C.kg_buffer_wrap(&p, d.raw(), C.uint64_t(devicePtr), C.uint64_t(sizeBytes), &e), &e)
	runtime.KeepAlive(d)
	if err != nil {
		return nil, err
	}
	return newBuffer(p, true), nil
}

func (b *Buffer) raw() *C.kaio_buffer {
	if b == nil {
		return nil
	}
	return b.ptr
}

// Close frees owned memory (the driver waits for work using it) or drops a
// wrapper. Idempotent.
func (b *Buffer) Close() error {
	if b == nil {
		return nil
	}
	return release(b, (*unsafe.Pointer)(unsafe.Pointer(&b.ptr)), func(p unsafe.Pointer) { C.kaio_buffer_destroy((*C.kaio_buffer)(p)) })
}

// DevicePtr is the CUdeviceptr, e.g. for kernel arguments; 0 once closed.
func (b *Buffer) DevicePtr() uint64 {
	p := uint64(C.kaio_buffer_device_ptr(b.raw()))
	runtime.KeepAlive(b)
	return p
}

// Size is the size in bytes; 0 once closed.
func (b *Buffer) Size() uint64 {
	n := uint64(C.kaio_buffer_size(b.raw()))
	runtime.KeepAlive(b)
	return n
}

// Foreign reports whether b wraps memory kaio did not allocate.
func (b *Buffer) Foreign() bool { return b.foreign }

func bytePtr(p []byte) unsafe.Pointer {
	if len(p) == 0 {
		return nil
	}
	return unsafe.Pointer(&p[0])
}

// Write copies src to [offset, offset+len(src)), blocking. It waits for the
// legacy stream (and StreamDefault streams) but not for non-blocking or
// foreign streams: synchronise those first.
func (b *Buffer) Write(offset uint64, src []byte) error {
	var e C.kg_err
	err := check(C.kg_buffer_write(b.raw(), C.uint64_t(offset), bytePtr(src), C.uint64_t(len(src)), &e), &e)
	runtime.KeepAlive(b)
	runtime.KeepAlive(src)
	return err
}

// Read copies [offset, offset+len(dst)) into dst, blocking; same ordering
// rules as Write.
func (b *Buffer) Read(offset uint64, dst []byte) error {
	var e C.kg_err
	err := check(C.kg_buffer_read(b.raw(), C.uint64_t(offset), bytePtr(dst), C.uint64_t(len(dst)), &e), &e)
	runtime.KeepAlive(b)
	runtime.KeepAlive(dst)
	return err
}

// WriteAsync is a stream-ordered Write. Go memory is pageable, so the driver
// has staged src by the time the call returns.
func (b *Buffer) WriteAsync(s *Stream, offset uint64, src []byte) error {
	var e C.kg_err
	err := check(C.kg_buffer_write_async(b.raw(), s.raw(), C.uint64_t(offset), bytePtr(src), C.uint64_t(len(src)), &e), &e)
	runtime.KeepAlive(b)
	runtime.KeepAlive(s)
	runtime.KeepAlive(src)
	return err
}

// ReadAsync is a stream-ordered Read. Go memory is pageable, and the driver
// finishes copying into pageable memory before the call returns.
func (b *Buffer) ReadAsync(s *Stream, offset uint64, dst []byte) error {
	var e C.kg_err
	err := check(C.kg_buffer_read_async(b.raw(), s.raw(), C.uint64_t(offset), bytePtr(dst), C.uint64_t(len(dst)), &e), &e)
	runtime.KeepAlive(b)
	runtime.KeepAlive(s)
	runtime.KeepAlive(dst)
	return err
}

// Memset sets size bytes from offset to value, stream-ordered.
func (b *Buffer) Memset(s *Stream, offset uint64, value byte, size uint64) error {
	var e C.kg_err
	err := check(C.kg_buffer_memset(b.raw(), s.raw(), C.uint64_t(offset), C.uint8_t(value), C.uint64_t(size), &e), &e)
	runtime.KeepAlive(b)
	runtime.KeepAlive(s)
	return err
}

// CopyFrom copies size bytes from src[srcOffset:] to b[dstOffset:] on the
// device, stream-ordered; the ranges must not overlap.
func (b *Buffer) CopyFrom(dstOffset uint64, src *Buffer, srcOffset, size uint64, s *Stream) error {
	var e C.kg_err
	err := check(C.kg_buffer_copy(b.raw(), C.uint64_t(dstOffset), src.raw(), C.uint64_t(srcOffset), C.uint64_t(size), s.raw(), &e), &e)
	runtime.KeepAlive(b)
	runtime.KeepAlive(src)
	runtime.KeepAlive(s)
	return err
}

// Element is a Go type a buffer can hold.
type Element interface {
	float32 | int8 | uint8 | int32 | uint32 | F16 | BF16
}

// AsBytes views a slice of elements as its bytes (no copy).
func AsBytes[T Element](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(zero)))
}

// WriteSlice copies src to b starting at element `offset` (blocking).
func WriteSlice[T Element](b *Buffer, offset int, src []T) error {
	var zero T
	return b.Write(uint64(offset)*uint64(unsafe.Sizeof(zero)), AsBytes(src))
}

// ReadSlice copies len(dst) elements from element `offset` of b (blocking).
func ReadSlice[T Element](b *Buffer, offset int, dst []T) error {
	var zero T
	return b.Read(uint64(offset)*uint64(unsafe.Sizeof(zero)), AsBytes(dst))
}

// DType is a kaio_dtype.
type DType int32

const (
	DTypeInvalid DType = C.KAIO_DTYPE_INVALID
	DTypeF32     DType = C.KAIO_DTYPE_F32
	DTypeF16     DType = C.KAIO_DTYPE_F16
	DTypeBF16    DType = C.KAIO_DTYPE_BF16
	DTypeI8      DType = C.KAIO_DTYPE_I8
	DTypeU8      DType = C.KAIO_DTYPE_U8
	DTypeI32     DType = C.KAIO_DTYPE_I32
	DTypeU32     DType = C.KAIO_DTYPE_U32
)

// Size is the bytes per element, 0 for an unknown dtype.
func (t DType) Size() int { return int(C.kaio_dtype_size(C.kaio_dtype(t))) }

// String is "f32", "f16", ... or "invalid".
func (t DType) String() string { return C.GoString(C.kaio_dtype_name(C.kaio_dtype(t))) }

// Tensor is a rank-2, row-major view of a buffer: element (r, c) lives at
// byte OffsetBytes + (r*RowStride + c)*DType.Size(). RowStride is in
// elements; 0 means Cols (contiguous). libkaio checks every view at every
// call and says what is wrong.
type Tensor struct {
	Buffer      *Buffer
	OffsetBytes uint64
	DType       DType
	Rows, Cols  int64
	RowStride   int64
}

// View is a contiguous rows x cols view of b from its start.
func View(b *Buffer, dtype DType, rows, cols int64) Tensor {
	return Tensor{Buffer: b, DType: dtype, Rows: rows, Cols: cols}
}

// WithOffset starts the view `elements` elements into the buffer.
func (t Tensor) WithOffset(elements int64) Tensor {
	t.OffsetBytes = uint64(elements) * uint64(t.DType.Size())
	return t
}

// WithRowStride sets the elements between row starts.
func (t Tensor) WithRowStride(elements int64) Tensor {
	t.RowStride = elements
	return t
}

func (t *Tensor) c() C.kaio_tensor {
	return C.kaio_tensor{
		buffer:       t.Buffer.raw(),
		offset_bytes: C.uint64_t(t.OffsetBytes),
		dtype:        C.kaio_dtype(t.DType),
		rows:         C.int64_t(t.Rows),
		cols:         C.int64_t(t.Cols),
		row_stride:   C.int64_t(t.RowStride),
	}
}
