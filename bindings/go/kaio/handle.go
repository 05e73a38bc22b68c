package kaio

import (
	"runtime"
	"unsafe"
)

// release is every Close: it destroys *p once, clears owner's finalizer
// (the safety net set when the handle was made) and leaves *p nil, so a
// second Close is a no-op and later calls get ErrInvalidHandle from libkaio.
// Close must not race with other calls on the same handle (kaio.h).
//
// p is the handle field seen as an unsafe.Pointer: the C handle types are
// incomplete, and Go 1.24+ refuses incomplete types as type arguments, so
// this cannot be generic over them.
func release(owner any, p *unsafe.Pointer, destroy func(unsafe.Pointer)) error {
	if *p == nil {
		return nil
	}
	runtime.SetFinalizer(owner, nil)
	destroy(*p)
	*p = nil
	return nil
}
