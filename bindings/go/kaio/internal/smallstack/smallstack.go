// Package smallstack runs Go code on an OS thread with a small C stack,
// for this module's tests only. A thread created in C that calls into Go
// runs cgo calls made from that Go code on its own C stack, so kaio calls
// made by fn use at most the given number of bytes of stack.
package smallstack

// #include "smallstack.h"
import "C"

import (
	"fmt"
	"runtime/cgo"
)

//export kaioSmallStackRun
func kaioSmallStackRun(job C.uintptr_t) {
	cgo.Handle(job).Value().(func())()
}

// Run calls fn on a new OS thread whose whole stack is size bytes, with a
// guard region below it (an overflow faults), and returns how many bytes of
// that stack were ever touched.
func Run(size int, fn func()) (used int, err error) {
	h := cgo.NewHandle(fn)
	defer h.Delete()
	var u C.size_t
	if rc := C.ss_run(C.size_t(size), C.uintptr_t(h), &u); rc != 0 {
		return 0, fmt.Errorf("smallstack.Run: starting a thread with a %d-byte stack failed (%d)", size, int(rc))
	}
	return int(u), nil
}
