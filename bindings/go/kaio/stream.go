package kaio

// #include "shim.h"
import "C"

import (
	"runtime"
	"unsafe"
)

// StreamFlags are kaio_stream_create's flags.
type StreamFlags uint32

const (
	// StreamDefault synchronises with the legacy default stream, so the
	// blocking Buffer.Read and Write see its work.
	StreamDefault StreamFlags = C.KAIO_STREAM_DEFAULT
	// StreamNonBlocking does not; synchronise it before blocking copies.
	StreamNonBlocking StreamFlags = C.KAIO_STREAM_NON_BLOCKING
)

// Stream is a CUDA stream, owned or a wrapper over a foreign CUstream. Work
// on one stream runs in order.
type Stream struct {
	ptr     *C.kaio_stream
	foreign bool
}

func newStream(p *C.kaio_stream, foreign bool) *Stream {
	s := &Stream{ptr: p, foreign: foreign}
	runtime.SetFinalizer(s, (*Stream).Close)
	return s
}

// NewStream creates a stream on the device.
func (d *Device) NewStream(flags StreamFlags) (*Stream, error) {
	var p *C.kaio_stream
	var e C.kg_err
	err := check(C.kg_stream_create(&p, d.raw(), C.uint32_t(flags), &e), &e)
	runtime.KeepAlive(d)
	if err != nil {
		return nil, err
	}
	return newStream(p, false), nil
}

// WrapStream wraps a foreign CUstream (nil is the legacy default stream),
// which must belong to the device's primary context (else ErrWrongDevice).
// kaio never destroys it: the caller keeps it alive while the wrapper and
// the work enqueued through it live.
func (d *Device) WrapStream(cuStream unsafe.Pointer) (*Stream, error) {
	var p *C.kaio_stream
	var e C.kg_err
	err := check(C.kg_stream_wrap(&p, d.raw(), cuStream, &e), &e)
	runtime.KeepAlive(d)
	if err != nil {
		return nil, err
	}
	return newStream(p, true), nil
}

func (s *Stream) raw() *C.kaio_stream {
	if s == nil {
		return nil
	}
	return s.ptr
}

// Close destroys an owned stream once its queued work completes (without
// waiting), or drops a wrapper. Idempotent.
func (s *Stream) Close() error {
	if s == nil {
		return nil
	}
	return release(s, (*unsafe.Pointer)(unsafe.Pointer(&s.ptr)), func(p unsafe.Pointer) { C.kaio_stream_destroy((*C.kaio_stream)(p)) })
}

// Synchronize blocks until all queued work has finished, reporting errors
// raised by that work.
func (s *Stream) Synchronize() error {
	var e C.kg_err
	err := check(C.kg_stream_synchronize(s.raw(), &e), &e)
	runtime.KeepAlive(s)
	return err
}

// WaitEvent makes all future work on s wait for ev (no host wait).
func (s *Stream) WaitEvent(ev *Event) error {
	var e C.kg_err
	err := check(C.kg_stream_wait_event(s.raw(), ev.raw(), &e), &e)
	runtime.KeepAlive(s)
	runtime.KeepAlive(ev)
	return err
}

// Native is the CUstream, nil for the legacy stream. Borrowed.
func (s *Stream) Native() unsafe.Pointer {
	p := C.kaio_stream_native(s.raw())
	runtime.KeepAlive(s)
	return p
}

// Foreign reports whether s wraps a stream kaio did not create.
func (s *Stream) Foreign() bool { return s.foreign }

// Event is a CUDA event.
type Event struct {
	ptr *C.kaio_event
}

// NewEvent creates an event; timing false disables timing (cheaper).
func (d *Device) NewEvent(timing bool) (*Event, error) {
	flags := C.uint32_t(C.KAIO_EVENT_DEFAULT)
	if !timing {
		flags = C.KAIO_EVENT_DISABLE_TIMING
	}
	var p *C.kaio_event
	var e C.kg_err
	err := check(C.kg_event_create(&p, d.raw(), flags, &e), &e)
	runtime.KeepAlive(d)
	if err != nil {
		return nil, err
	}
	ev := &Event{ptr: p}
	runtime.SetFinalizer(ev, (*Event).Close)
	return ev, nil
}

func (ev *Event) raw() *C.kaio_event {
	if ev == nil {
		return nil
	}
	return ev.ptr
}

// Close destroys the event. Idempotent.
func (ev *Event) Close() error {
	if ev == nil {
		return nil
	}
	return release(ev, (*unsafe.Pointer)(unsafe.Pointer(&ev.ptr)), func(p unsafe.Pointer) { C.kaio_event_destroy((*C.kaio_event)(p)) })
}

// Record records the event at the current end of s.
func (ev *Event) Record(s *Stream) error {
	var e C.kg_err
	err := check(C.kg_event_record(ev.raw(), s.raw(), &e), &e)
	runtime.KeepAlive(ev)
	runtime.KeepAlive(s)
	return err
}

// Synchronize blocks until the work captured by the last Record finished.
func (ev *Event) Synchronize() error {
	var e C.kg_err
	err := check(C.kg_event_synchronize(ev.raw(), &e), &e)
	runtime.KeepAlive(ev)
	return err
}

// ElapsedMs is the time in milliseconds between two completed records.
func ElapsedMs(start, end *Event) (float32, error) {
	var ms C.float
	var e C.kg_err
	err := check(C.kg_event_elapsed_ms(&ms, start.raw(), end.raw(), &e), &e)
	runtime.KeepAlive(start)
	runtime.KeepAlive(end)
	return float32(ms), err
}
