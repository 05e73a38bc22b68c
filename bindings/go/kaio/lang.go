package kaio

// #include "shim.h"
import "C"

import (
	"runtime"
	"unsafe"
)

// LangKernel is a kernel-language kernel (kaio.h, "Kernel language"),
// compiled to PTX by libkaio and loaded on a device. Launch is safe from
// several goroutines; Check must not race with launches.
type LangKernel struct {
	ptr *C.kaio_lang_kernel
}

// copiedText reads a string through a C "copy into buf, report the full
// length" call: first into guess bytes, again at the reported length only
// when the text did not fit. It also returns how many calls that took.
func copiedText(guess int, call func(buf *C.char, cap C.size_t, n *C.size_t, e *C.kg_err) C.kaio_status) (string, int, error) {
	var n C.size_t
	var e C.kg_err
	size := C.size_t(guess)
	buf := (*C.char)(C.malloc(size))
	defer func() { C.free(unsafe.Pointer(buf)) }()
	if err := check(call(buf, size, &n, &e), &e); err != nil {
		return "", 1, err
	}
	if n < size {
		return C.GoStringN(buf, C.int(n)), 1, nil
	}
	C.free(unsafe.Pointer(buf))
	buf = (*C.char)(C.malloc(n + 1))
	if err := check(call(buf, n+1, &n, &e), &e); err != nil {
		return "", 2, err
	}
	return C.GoStringN(buf, C.int(n)), 2, nil
}

// ptxRoom is room for the PTX of source: every call of
// kaio_lang_compile_ptx compiles, so the first buffer is big enough for any
// ordinary kernel (a few KiB of PTX for a few lines; at most about 65 bytes
// of PTX per byte of source, for lines of exp); only past 64 MiB may it take
// two compiles. Pages never written are never touched.
func ptxRoom(source string) int {
	if len(source) > (64<<20-64<<10)/128 {
		return 64 << 20
	}
	return 64<<10 + 128*len(source)
}

// compileLangPTX is CompileLangPTX, also saying how many compiles it took.
func compileLangPTX(source string) (string, int, error) {
	src := C.CString(source)
	defer C.free(unsafe.Pointer(src))
	return copiedText(ptxRoom(source), func(buf *C.char, cap C.size_t, n *C.size_t, e *C.kg_err) C.kaio_status {
		return C.kg_lang_compile_ptx(src, buf, cap, n, e)
	})
}

// CompileLangPTX compiles kernel-language source to PTX with no device or
// driver. Rejected source is ErrKernelSource with line:col, the reason and
// a caret excerpt in the message.
func CompileLangPTX(source string) (string, error) {
	ptx, _, err := compileLangPTX(source)
	return ptx, err
}

// NewLangKernel compiles source and loads it on the device (cached per
// source text). Not a steady-state operation: create before graph capture.
func (d *Device) NewLangKernel(source string) (*LangKernel, error) {
	src := C.CString(source)
	defer C.free(unsafe.Pointer(src))
	var p *C.kaio_lang_kernel
	var e C.kg_err
	err := check(C.kg_lang_kernel_create(&p, d.raw(), src, &e), &e)
	runtime.KeepAlive(d)
	if err != nil {
		return nil, err
	}
	k := &LangKernel{ptr: p}
	runtime.SetFinalizer(k, (*LangKernel).Close)
	return k, nil
}

func (k *LangKernel) raw() *C.kaio_lang_kernel {
	if k == nil {
		return nil
	}
	return k.ptr
}

// Close destroys the kernel. Idempotent; must not race with its launches.
func (k *LangKernel) Close() error {
	if k == nil {
		return nil
	}
	return release(k, (*unsafe.Pointer)(unsafe.Pointer(&k.ptr)), func(p unsafe.Pointer) { C.kaio_lang_kernel_destroy((*C.kaio_lang_kernel)(p)) })
}

// PTX is the PTX the kernel was built from.
func (k *LangKernel) PTX() (string, error) {
	p := k.raw()
	s, _, err := copiedText(64*1024, func(buf *C.char, cap C.size_t, n *C.size_t, e *C.kg_err) C.kaio_status {
		return C.kg_lang_kernel_ptx(p, buf, cap, n, e)
	})
	runtime.KeepAlive(k)
	return s, err
}

// Launch enqueues the kernel: one view per tensor parameter and one value
// per scalar parameter, each in declaration order.
func (k *LangKernel) Launch(s *Stream, tensors []Tensor, scalars []float64) error {
	ct := cTensors(tensors)
	cs := make([]C.double, len(scalars))
	for i, v := range scalars {
		cs[i] = C.double(v)
	}
	var pt *C.kaio_tensor
	if len(ct) > 0 {
		pt = &ct[0]
	}
	var ps *C.double
	if len(cs) > 0 {
		ps = &cs[0]
	}
	var e C.kg_err
	err := check(C.kg_lang_kernel_launch(k.raw(), s.raw(), pt, C.size_t(len(ct)), ps, C.size_t(len(cs)), &e), &e)
	runtime.KeepAlive(k)
	runtime.KeepAlive(s)
	runtime.KeepAlive(tensors)
	return err
}

// Check reports and clears the kernel's device-side bounds flag:
// ErrOutOfBounds names the first read outside its view since the last
// check. Synchronise the kernel's streams first.
func (k *LangKernel) Check() error {
	var e C.kg_err
	err := check(C.kg_lang_kernel_check(k.raw(), &e), &e)
	runtime.KeepAlive(k)
	return err
}
