package kaio

// #include "shim.h"
import "C"

import (
	"runtime"
	"unsafe"
)

// Module is user PTX, JIT-compiled for one device.
type Module struct {
	ptr *C.kaio_module
}

// LoadPTX JIT-compiles PTX text for the device. A JIT failure is
// ErrPTXJITFailed with the JIT's log in the message. Not a steady-state
// operation: load before capturing CUDA graphs.
func (d *Device) LoadPTX(ptx string) (*Module, error) {
	text := C.CString(ptx)
	defer C.free(unsafe.Pointer(text))
	var p *C.kaio_module
	var e C.kg_err
	err := check(C.kg_module_load_ptx(&p, d.raw(), text, &e), &e)
	runtime.KeepAlive(d)
	if err != nil {
		return nil, err
	}
	m := &Module{ptr: p}
	runtime.SetFinalizer(m, (*Module).Close)
	return m, nil
}

func (m *Module) raw() *C.kaio_module {
	if m == nil {
		return nil
	}
	return m.ptr
}

// Close drops this reference; the module unloads once its kernels are gone
// too. Idempotent.
func (m *Module) Close() error {
	if m == nil {
		return nil
	}
	return release(m, (*unsafe.Pointer)(unsafe.Pointer(&m.ptr)), func(p unsafe.Pointer) { C.kaio_module_destroy((*C.kaio_module)(p)) })
}

// Kernel looks up an .entry by name (ErrKernelNotFound if there is none).
func (m *Module) Kernel(name string) (*Kernel, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var p *C.kaio_kernel
	var e C.kg_err
	err := check(C.kg_module_get_kernel(&p, m.raw(), cname, &e), &e)
	runtime.KeepAlive(m)
	if err != nil {
		return nil, err
	}
	k := &Kernel{ptr: p}
	runtime.SetFinalizer(k, (*Kernel).Close)
	return k, nil
}

// Kernel is an .entry of a Module; it keeps the module loaded.
type Kernel struct {
	ptr *C.kaio_kernel
}

func (k *Kernel) raw() *C.kaio_kernel {
	if k == nil {
		return nil
	}
	return k.ptr
}

// Close drops the kernel. Idempotent.
func (k *Kernel) Close() error {
	if k == nil {
		return nil
	}
	return release(k, (*unsafe.Pointer)(unsafe.Pointer(&k.ptr)), func(p unsafe.Pointer) { C.kaio_kernel_destroy((*C.kaio_kernel)(p)) })
}

// KernelAttributes is what the driver reports about a kernel.
type KernelAttributes struct {
	Registers          int // per thread
	StaticSharedBytes  int
	LocalBytes         int // per thread; > 0 often means spills
	ConstBytes         int
	MaxThreadsPerBlock int
	// ParamBytes is the packed argument size, -1 when the driver predates
	// CUDA 12.4 and cannot tell.
	ParamBytes int
}

// Attributes asks the driver about the kernel.
func (k *Kernel) Attributes() (KernelAttributes, error) {
	var a C.kaio_kernel_attributes
	a.struct_size = C.uint32_t(unsafe.Sizeof(a))
	var e C.kg_err
	err := check(C.kg_kernel_get_attributes(k.raw(), &a, &e), &e)
	runtime.KeepAlive(k)
	if err != nil {
		return KernelAttributes{}, err
	}
	return KernelAttributes{
		Registers:          int(a.registers),
		StaticSharedBytes:  int(a.static_shared_bytes),
		LocalBytes:         int(a.local_bytes),
		ConstBytes:         int(a.const_bytes),
		MaxThreadsPerBlock: int(a.max_threads_per_block),
		ParamBytes:         int(a.param_bytes),
	}, nil
}

// LaunchConfig gives grid and block sizes; y and z of 0 mean 1.
type LaunchConfig struct {
	Grid        [3]uint32
	Block       [3]uint32
	SharedBytes uint32 // dynamic shared memory per block
}

// Linear is a one-dimensional config: enough blocks of `block` threads for n.
func Linear(n, block uint32) LaunchConfig {
	var blocks uint32
	if block > 0 {
		blocks = (n + block - 1) / block
	}
	return LaunchConfig{Grid: [3]uint32{blocks, 1, 1}, Block: [3]uint32{block, 1, 1}}
}

// Launch enqueues the kernel on s with args, the packed parameter buffer
// (see Args). When the driver can report the layout (CUDA 12.4+) its size is
// checked. kaio cannot see what the kernel does with its pointers: keeping
// it inside its buffers is the caller's job.
func (k *Kernel) Launch(s *Stream, cfg LaunchConfig, args []byte) error {
	var c C.kaio_launch_config
	for i := 0; i < 3; i++ {
		c.grid[i] = C.uint32_t(cfg.Grid[i])
		c.block[i] = C.uint32_t(cfg.Block[i])
	}
	c.shared_bytes = C.uint32_t(cfg.SharedBytes)
	var e C.kg_err
	// args holds no Go pointers, so passing it to C is allowed.
	err := check(C.kg_kernel_launch(k.raw(), s.raw(), &c, bytePtr(args), C.size_t(len(args)), &e), &e)
	runtime.KeepAlive(k)
	runtime.KeepAlive(s)
	runtime.KeepAlive(args)
	return err
}
