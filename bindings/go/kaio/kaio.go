// Package kaio is the Go binding of libkaio: fused GPU kernels for LLM
// inference, loaded through the CUDA driver API, with no CUDA toolkit at
// build time. It wraps the C ABI in include/kaio/kaio.h one to one.
//
// # Building
//
// The package finds libkaio with pkg-config (`#cgo pkg-config: kaio`). After
// `meson install`, point PKG_CONFIG_PATH at <prefix>/lib/<triple>/pkgconfig;
// straight from a Meson build dir, at <builddir>/meson-uninstalled. At run
// time the loader must find libkaio.so (install it, set LD_LIBRARY_PATH, or
// build with CGO_LDFLAGS=-Wl,-rpath,<libdir>).
//
// # Handles
//
// Device, Stream, Event, Buffer, Op, Module and Kernel wrap C handles. Close
// releases one and is idempotent; a finalizer calls it for handles that are
// dropped unclosed, but GPU memory and streams are scarce, so Close them.
// Children keep their parents alive inside libkaio, so handles may be closed
// (or collected) in any order. Close must not race with other calls on the
// same handle; everything else may be called from any goroutine, as kaio.h's
// threading contract allows.
//
// # Errors
//
// Every failure is an *Error with the Status and libkaio's message, copied in
// the same cgo call as the failing function (kaio's last error is per OS
// thread, and goroutines move between threads). Use errors.Is with the
// Err* sentinels, or errors.As to read the status and message.
package kaio

// #cgo pkg-config: kaio
// #include "shim.h"
import "C"

import (
	"runtime"
	"unsafe"
)

// ProbeInfo is what Probe found.
type ProbeInfo struct {
	// StatusOK; StatusDriverNotFound or StatusDriverTooOld; StatusNoDevice
	// when the driver loads but sees no GPU.
	DriverStatus Status
	// e.g. 13000 for CUDA 13.0; 0 if unknown.
	DriverVersion int
	// 0 when there is no driver or no device.
	DeviceCount int
	// "" or the reason, e.g. the loader's text.
	Message string
}

// Usable reports whether a driver loaded and sees at least one device.
func (p ProbeInfo) Usable() bool { return p.DriverStatus == StatusOK && p.DeviceCount > 0 }

// Probe reports whether a driver and devices are usable, without failing on
// their absence. The driver is libcuda.so.1 or the file named by the
// LIBKAIO_CUDA_DRIVER environment variable, loaded once per process.
func Probe() (ProbeInfo, error) {
	if err := CheckVersion(); err != nil {
		return ProbeInfo{}, err
	}
	var info C.kaio_probe_info
	info.struct_size = C.uint32_t(unsafe.Sizeof(info))
	var e C.kg_err
	if err := check(C.kg_probe(&info, &e), &e); err != nil {
		return ProbeInfo{}, err
	}
	return ProbeInfo{
		DriverStatus:  Status(info.driver_status),
		DriverVersion: int(info.driver_version),
		DeviceCount:   int(info.device_count),
		Message:       C.GoString(&info.message[0]),
	}, nil
}

// DeviceCount is the number of visible CUDA devices; it fails (e.g.
// ErrDriverNotFound) when no driver can be loaded.
func DeviceCount() (int, error) {
	if err := CheckVersion(); err != nil {
		return 0, err
	}
	var n C.int32_t
	var e C.kg_err
	if err := check(C.kg_device_count(&n, &e), &e); err != nil {
		return 0, err
	}
	return int(n), nil
}

// Device is a CUDA device on its primary context (the one the CUDA runtime,
// PyTorch and candle use, so memory and streams are shared with them).
type Device struct {
	ptr *C.kaio_device
}

// DeviceInfo describes a device.
type DeviceInfo struct {
	Ordinal           int
	CCMajor, CCMinor  int
	SMCount           int
	MaxSharedPerBlock int // opt-in maximum, bytes
	TotalMemory       uint64
	L2CacheBytes      uint64
	Name              string
}

// OpenDevice opens device `ordinal` (0-based). Opening one ordinal twice
// gives two handles to the same device and module cache.
func OpenDevice(ordinal int) (*Device, error) {
	if err := CheckVersion(); err != nil {
		return nil, err
	}
	var p *C.kaio_device
	var e C.kg_err
	if err := check(C.kg_device_open(&p, C.int32_t(ordinal), &e), &e); err != nil {
		return nil, err
	}
	d := &Device{ptr: p}
	runtime.SetFinalizer(d, (*Device).Close)
	return d, nil
}

func (d *Device) raw() *C.kaio_device {
	if d == nil {
		return nil
	}
	return d.ptr
}

// Close drops this reference; the device lives on while objects made from it
// exist. Idempotent.
func (d *Device) Close() error {
	if d == nil {
		return nil
	}
	return release(d, (*unsafe.Pointer)(unsafe.Pointer(&d.ptr)), func(p unsafe.Pointer) { C.kaio_device_destroy((*C.kaio_device)(p)) })
}

// Info describes the device.
func (d *Device) Info() (DeviceInfo, error) {
	var info C.kaio_device_info
	info.struct_size = C.uint32_t(unsafe.Sizeof(info))
	var e C.kg_err
	err := check(C.kg_device_get_info(d.raw(), &info, &e), &e)
	runtime.KeepAlive(d)
	if err != nil {
		return DeviceInfo{}, err
	}
	return DeviceInfo{
		Ordinal:           int(info.ordinal),
		CCMajor:           int(info.cc_major),
		CCMinor:           int(info.cc_minor),
		SMCount:           int(info.sm_count),
		MaxSharedPerBlock: int(info.max_shared_per_block),
		TotalMemory:       uint64(info.total_memory),
		L2CacheBytes:      uint64(info.l2_cache_bytes),
		Name:              C.GoString(&info.name[0]),
	}, nil
}

// NativeContext is the device's CUcontext, for interop. Borrowed.
func (d *Device) NativeContext() unsafe.Pointer {
	p := C.kaio_device_native_context(d.raw())
	runtime.KeepAlive(d)
	return p
}
