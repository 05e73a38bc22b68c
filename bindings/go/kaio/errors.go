package kaio

// #include "shim.h"
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// Status is a kaio_status: 0 is OK, failures are negative and grouped by
// hundreds (see Category). A newer libkaio may return values not listed here.
type Status int32

// The statuses of kaio.h, with their pinned values.
const (
	StatusOK                Status = C.KAIO_OK
	StatusInvalidArgument   Status = C.KAIO_ERROR_INVALID_ARGUMENT
	StatusInvalidHandle     Status = C.KAIO_ERROR_INVALID_HANDLE
	StatusInvalidDType      Status = C.KAIO_ERROR_INVALID_DTYPE
	StatusShapeMismatch     Status = C.KAIO_ERROR_SHAPE_MISMATCH
	StatusOutOfBounds       Status = C.KAIO_ERROR_OUT_OF_BOUNDS
	StatusMisaligned        Status = C.KAIO_ERROR_MISALIGNED
	StatusWrongDevice       Status = C.KAIO_ERROR_WRONG_DEVICE
	StatusBufferTooSmall    Status = C.KAIO_ERROR_BUFFER_TOO_SMALL
	StatusInvalidDimension  Status = C.KAIO_ERROR_INVALID_DIMENSION
	StatusUnsupported       Status = C.KAIO_ERROR_UNSUPPORTED
	StatusDriverNotFound    Status = C.KAIO_ERROR_DRIVER_NOT_FOUND
	StatusDriverTooOld      Status = C.KAIO_ERROR_DRIVER_TOO_OLD
	StatusNoDevice          Status = C.KAIO_ERROR_NO_DEVICE
	StatusUnsupportedArch   Status = C.KAIO_ERROR_UNSUPPORTED_ARCH
	StatusOutOfHostMemory   Status = C.KAIO_ERROR_OUT_OF_HOST_MEMORY
	StatusOutOfDeviceMemory Status = C.KAIO_ERROR_OUT_OF_DEVICE_MEMORY
	StatusPTXJITFailed      Status = C.KAIO_ERROR_PTX_JIT_FAILED
	StatusKernelNotFound    Status = C.KAIO_ERROR_KERNEL_NOT_FOUND
	StatusKernelSource      Status = C.KAIO_ERROR_KERNEL_SOURCE
	StatusLaunchFailed      Status = C.KAIO_ERROR_LAUNCH_FAILED
	StatusDeviceFault       Status = C.KAIO_ERROR_DEVICE_FAULT
	StatusKernelBounds      Status = C.KAIO_ERROR_KERNEL_BOUNDS
	StatusDriver            Status = C.KAIO_ERROR_DRIVER
	StatusInternal          Status = C.KAIO_ERROR_INTERNAL
)

// String is the C constant's name, e.g. "KAIO_ERROR_OUT_OF_BOUNDS", or
// "KAIO_UNKNOWN_STATUS".
func (s Status) String() string {
	return C.GoString(C.kaio_status_name(C.kaio_status(s)))
}

// Category is 0 for OK, else the hundreds: -100 (bad arguments), -200
// (environment), -300 (out of memory), -400 (JIT), -500 (running GPU code),
// -900 (other).
func (s Status) Category() Status {
	if s >= 0 {
		return 0
	}
	return -Status((-int64(s)) / 100 * 100)
}

// Error is a failed kaio call: its status and the message libkaio wrote for
// it, which names the function, the argument, the value and the fix. The
// message is copied inside the same cgo call as the failing function.
type Error struct {
	Status  Status
	Message string
	// DriverCode is the raw CUresult behind the error, or 0.
	DriverCode int32
}

func (e *Error) Error() string {
	return e.Status.String() + ": " + e.Message
}

// Is reports whether target is an *Error with the same Status, so
// errors.Is(err, kaio.ErrOutOfBounds) works for any message.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Status == e.Status
}

// Sentinels for errors.Is, one per status.
var (
	ErrInvalidArgument   = &Error{Status: StatusInvalidArgument}
	ErrInvalidHandle     = &Error{Status: StatusInvalidHandle}
	ErrInvalidDType      = &Error{Status: StatusInvalidDType}
	ErrShapeMismatch     = &Error{Status: StatusShapeMismatch}
	ErrOutOfBounds       = &Error{Status: StatusOutOfBounds}
	ErrMisaligned        = &Error{Status: StatusMisaligned}
	ErrWrongDevice       = &Error{Status: StatusWrongDevice}
	ErrBufferTooSmall    = &Error{Status: StatusBufferTooSmall}
	ErrInvalidDimension  = &Error{Status: StatusInvalidDimension}
	ErrUnsupported       = &Error{Status: StatusUnsupported}
	ErrDriverNotFound    = &Error{Status: StatusDriverNotFound}
	ErrDriverTooOld      = &Error{Status: StatusDriverTooOld}
	ErrNoDevice          = &Error{Status: StatusNoDevice}
	ErrUnsupportedArch   = &Error{Status: StatusUnsupportedArch}
	ErrOutOfHostMemory   = &Error{Status: StatusOutOfHostMemory}
	ErrOutOfDeviceMemory = &Error{Status: StatusOutOfDeviceMemory}
	ErrPTXJITFailed      = &Error{Status: StatusPTXJITFailed}
	ErrKernelNotFound    = &Error{Status: StatusKernelNotFound}
	ErrKernelSource      = &Error{Status: StatusKernelSource}
	ErrLaunchFailed      = &Error{Status: StatusLaunchFailed}
	ErrDeviceFault       = &Error{Status: StatusDeviceFault}
	ErrKernelBounds      = &Error{Status: StatusKernelBounds}
	ErrDriver            = &Error{Status: StatusDriver}
	ErrInternal          = &Error{Status: StatusInternal}
)

// check turns a shim's status and captured error into a Go error, freeing
// the C copy of the message.
func check(s C.kaio_status, e *C.kg_err) error {
	if s == C.KAIO_OK {
		return nil
	}
	msg := ""
	if e.msg != nil {
		msg = C.GoString(e.msg)
		C.free(unsafe.Pointer(e.msg))
		e.msg = nil
	}
	if msg == "" {
		msg = Status(s).String()
	}
	return &Error{Status: Status(s), Message: msg, DriverCode: int32(e.driver_code)}
}

// Version is a libkaio version, major*10000 + minor*100 + patch.
type Version uint32

func (v Version) Major() int { return int(v) / 10000 }
func (v Version) Minor() int { return int(v) / 100 % 100 }
func (v Version) Patch() int { return int(v) % 100 }
func (v Version) String() string {
	return fmt.Sprintf("%d.%d.%d", v.Major(), v.Minor(), v.Patch())
}

// CanRun reports whether code compiled against `compiled` may run on a
// libkaio of version v: v is at least as new, with the same major version,
// and, while 0.x, the same minor (the ABI is stable only within a minor then).
func (v Version) CanRun(compiled Version) bool {
	return v >= compiled && v.Major() == compiled.Major() && (v.Major() != 0 || v.Minor() == compiled.Minor())
}

// CompiledVersion is the kaio.h this package was compiled against.
func CompiledVersion() Version { return Version(C.kg_compiled_version()) }

// RuntimeVersion is the version of the libkaio actually loaded.
func RuntimeVersion() Version { return Version(C.kaio_version_number()) }

var (
	versionOnce sync.Once
	versionErr  error
)

// CheckVersion checks, once per process, that the loaded libkaio can run this
// package. Probe, DeviceCount and OpenDevice call it first, so a mismatch is
// an error (StatusUnsupported) at first use rather than a crash later.
func CheckVersion() error {
	versionOnce.Do(func() {
		rt, ct := RuntimeVersion(), CompiledVersion()
		if !rt.CanRun(ct) {
			versionErr = &Error{Status: StatusUnsupported, Message: fmt.Sprintf(
				"kaio: the loaded libkaio is %v but this program was built against %v; "+
					"install a libkaio %d.%d.x at least as new (or rebuild against the one you have)",
				rt, ct, ct.Major(), ct.Minor())}
		}
	})
	return versionErr
}
