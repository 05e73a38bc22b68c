package kaio

import (
	"encoding/binary"
	"math"
)

// Args packs kernel parameters the way Kernel.Launch expects: each at its
// natural alignment, as a C struct of the same members would lay them out,
// with no tail padding. Values are little-endian, as on every CUDA host.
//
//	// .param .u64 packed, .param .u64 out, .param .f32 scale, .param .u32 n
//	args := new(kaio.Args).Ptr(packed).Ptr(out).F32(0.5).U32(n).Bytes()
type Args struct {
	b []byte
}

func (a *Args) pad(align int) *Args {
	for len(a.b)%align != 0 {
		a.b = append(a.b, 0)
	}
	return a
}

// Align pads to a multiple of n (a power of two), for .align params.
func (a *Args) Align(n int) *Args { return a.pad(n) }

func (a *Args) U8(v uint8) *Args { a.b = append(a.b, v); return a }
func (a *Args) I8(v int8) *Args  { return a.U8(uint8(v)) }
func (a *Args) U16(v uint16) *Args {
	a.pad(2)
	a.b = binary.LittleEndian.AppendUint16(a.b, v)
	return a
}
func (a *Args) I16(v int16) *Args { return a.U16(uint16(v)) }
func (a *Args) U32(v uint32) *Args {
	a.pad(4)
	a.b = binary.LittleEndian.AppendUint32(a.b, v)
	return a
}
func (a *Args) I32(v int32) *Args { return a.U32(uint32(v)) }
func (a *Args) U64(v uint64) *Args {
	a.pad(8)
	a.b = binary.LittleEndian.AppendUint64(a.b, v)
	return a
}
func (a *Args) I64(v int64) *Args   { return a.U64(uint64(v)) }
func (a *Args) F32(v float32) *Args { return a.U32(math.Float32bits(v)) }
func (a *Args) F64(v float64) *Args { return a.U64(math.Float64bits(v)) }
func (a *Args) F16(v F16) *Args     { return a.U16(uint16(v)) }
func (a *Args) BF16(v BF16) *Args   { return a.U16(uint16(v)) }

// Ptr appends a buffer's device address (a .u64 parameter).
func (a *Args) Ptr(b *Buffer) *Args { return a.U64(b.DevicePtr()) }

// PtrAt appends the device address offsetBytes into b.
func (a *Args) PtrAt(b *Buffer, offsetBytes uint64) *Args { return a.U64(b.DevicePtr() + offsetBytes) }

// Raw appends bytes at alignment align (structs, .b8 arrays).
func (a *Args) Raw(p []byte, align int) *Args {
	a.pad(align)
	a.b = append(a.b, p...)
	return a
}

// Bytes is the packed buffer.
func (a *Args) Bytes() []byte { return a.b }

// Len is its size in bytes.
func (a *Args) Len() int { return len(a.b) }
