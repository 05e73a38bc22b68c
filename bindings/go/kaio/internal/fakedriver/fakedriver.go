// Package fakedriver reaches the test hooks of libkaio's fake CUDA driver
// (tests/fake_cuda in the libkaio repository), for this module's tests only.
package fakedriver

// #cgo LDFLAGS: -ldl
// #include <dlfcn.h>
// #include <stddef.h>
// #include <stdlib.h>
// typedef unsigned long long (*kfd_u64)(void);
// typedef int (*kfd_last)(char *, size_t, unsigned *, unsigned *, unsigned *);
// typedef int (*kfd_param)(size_t, void *, size_t);
// static void *kfd_open(const char *path) { return dlopen(path, RTLD_NOW); }
// static void *kfd_sym(void *lib, const char *name) { return dlsym(lib, name); }
// static unsigned long long kfd_call_u64(void *f) { return ((kfd_u64)f)(); }
// static int kfd_call_last(void *f, char *name, size_t cap, unsigned *grid, unsigned *block, unsigned *shared) {
//     return ((kfd_last)f)(name, cap, grid, block, shared);
// }
// static int kfd_call_param(void *f, size_t i, void *out, size_t size) { return ((kfd_param)f)(i, out, size); }
import "C"

import (
	"fmt"
	"unsafe"
)

// Hooks are the fake driver's extern "C" test functions.
type Hooks struct {
	launchCount, lastLaunch, lastParam, liveAllocations unsafe.Pointer
}

// Open loads the driver at path (the same file libkaio loads: dlopen returns
// the same handle) and finds its hooks; an error means it is not the fake.
func Open(path string) (*Hooks, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	lib := C.kfd_open(cpath)
	if lib == nil {
		return nil, fmt.Errorf("cannot dlopen %s", path)
	}
	h := &Hooks{}
	for name, dst := range map[string]*unsafe.Pointer{
		"kaio_fake_launch_count":      &h.launchCount,
		"kaio_fake_last_launch":       &h.lastLaunch,
		"kaio_fake_last_launch_param": &h.lastParam,
		"kaio_fake_live_allocations":  &h.liveAllocations,
	} {
		cname := C.CString(name)
		*dst = C.kfd_sym(lib, cname)
		C.free(unsafe.Pointer(cname))
		if *dst == nil {
			return nil, fmt.Errorf("%s has no %s: it is not libkaio's fake driver", path, name)
		}
	}
	return h, nil
}

// LaunchCount is the number of successful launches so far.
func (h *Hooks) LaunchCount() uint64 { return uint64(C.kfd_call_u64(h.launchCount)) }

// LiveAllocations is the number of device allocations not yet freed.
func (h *Hooks) LiveAllocations() uint64 { return uint64(C.kfd_call_u64(h.liveAllocations)) }

// Launch is the last recorded launch.
type Launch struct {
	Name        string
	Grid, Block [3]uint32
	Shared      uint32
}

// LastLaunch is the last recorded launch; ok is false when there was none.
func (h *Hooks) LastLaunch() (l Launch, ok bool) {
	var name [256]C.char
	var grid, block [3]C.unsigned
	var shared C.unsigned
	if C.kfd_call_last(h.lastLaunch, &name[0], 256, &grid[0], &block[0], &shared) != 0 {
		return l, false
	}
	l.Name = C.GoString(&name[0])
	for i := 0; i < 3; i++ {
		l.Grid[i], l.Block[i] = uint32(grid[i]), uint32(block[i])
	}
	l.Shared = uint32(shared)
	return l, true
}

// Param is parameter i of the last launch, which must be size bytes.
func (h *Hooks) Param(i, size int) ([]byte, error) {
	out := make([]byte, size)
	if r := C.kfd_call_param(h.lastParam, C.size_t(i), unsafe.Pointer(&out[0]), C.size_t(size)); r != 0 {
		return nil, fmt.Errorf("kaio_fake_last_launch_param(%d, %d) = %d", i, size, int(r))
	}
	return out, nil
}
