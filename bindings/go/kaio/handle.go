package kaio

import "runtime"

// release is every Close: it destroys *p once, clears owner's finalizer
// (the safety net set when the handle was made) and leaves *p nil, so a
// second Close is a no-op and later calls get ErrInvalidHandle from libkaio.
// Close must not race with other calls on the same handle (kaio.h).
func release[T any](owner any, p **T, destroy func(*T)) error {
	if *p == nil {
		return nil
	}
	runtime.SetFinalizer(owner, nil)
	destroy(*p)
	*p = nil
	return nil
}
