//! `Stream` and `Event`.
use std::os::raw::c_void;
use std::ptr;

use kaio_sys as sys;

use crate::device::Device;
use crate::error::{check, Result};
use crate::handle::Owned;

/// A CUDA stream: work on one stream runs in order. Either created by kaio
/// (owned: destroyed on drop once its queued work completes, without waiting)
/// or a wrapper over a foreign `CUstream` such as candle's (never destroyed by
/// kaio).
#[derive(Debug)]
pub struct Stream {
    raw: Owned<sys::kaio_stream>,
    foreign: bool,
}

// SAFETY: a stream is an object made from a device, and kaio.h makes concurrent
// calls on those safe ("A kaio_device is internally synchronised: concurrent
// calls on one device, and on objects made from it, are safe"). Two threads
// enqueueing on one stream is defined; which goes first is up to them. Drop
// takes `&mut self`, so it cannot race with other calls on the handle.
unsafe impl Send for Stream {}
unsafe impl Sync for Stream {}

impl Stream {
    /// A new stream with default flags: it synchronises with the legacy
    /// default stream, so the blocking [`Buffer::read`](crate::Buffer::read)
    /// and `write` see its work.
    pub fn new(device: &Device) -> Result<Stream> {
        Stream::with_flags(device, sys::KAIO_STREAM_DEFAULT)
    }

    /// A new stream that does not synchronise with the legacy default stream
    /// (`KAIO_STREAM_NON_BLOCKING`). Synchronise it before blocking reads.
    pub fn non_blocking(device: &Device) -> Result<Stream> {
        Stream::with_flags(device, sys::KAIO_STREAM_NON_BLOCKING)
    }

    fn with_flags(device: &Device, flags: u32) -> Result<Stream> {
        let mut p = ptr::null_mut();
        check(unsafe { sys::kaio_stream_create(&mut p, device.as_raw(), flags) })?;
        Ok(Stream { raw: Owned::new(p, "kaio_stream_create")?, foreign: false })
    }

    /// The device's legacy default stream (the `NULL` CUstream), wrapped.
    pub fn legacy(device: &Device) -> Result<Stream> {
        // SAFETY: the legacy stream exists as long as the context does, and the
        // wrapper keeps the device (and so its primary context) alive.
        unsafe { Stream::from_raw(device, ptr::null_mut()) }
    }

    /// Wraps a foreign `CUstream` (candle's `CudaStream::cu_stream()`,
    /// cudarc's, PyTorch's), so kaio enqueues its work there with no host
    /// synchronisation. kaio never destroys it. Fails with WRONG_DEVICE when
    /// the stream belongs to another context than `device`'s primary one.
    ///
    /// # Safety
    /// `cu_stream` is NULL (the legacy stream) or a live `CUstream` that
    /// outlives the returned wrapper and every operation enqueued through it.
    pub unsafe fn from_raw(device: &Device, cu_stream: *mut c_void) -> Result<Stream> {
        let mut p = ptr::null_mut();
        check(sys::kaio_stream_wrap(&mut p, device.as_raw(), cu_stream))?;
        Ok(Stream { raw: Owned::new(p, "kaio_stream_wrap")?, foreign: true })
    }

    /// Blocks until all work queued on the stream has finished, and reports
    /// errors raised by that work.
    pub fn synchronize(&self) -> Result<()> {
        check(unsafe { sys::kaio_stream_synchronize(self.raw.as_ptr()) })
    }

    /// Makes all future work on this stream wait for `event` (no host wait).
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        check(unsafe { sys::kaio_stream_wait_event(self.raw.as_ptr(), event.as_raw()) })
    }

    /// The native `CUstream`, NULL for the legacy stream. Borrowed.
    pub fn native(&self) -> *mut c_void {
        unsafe { sys::kaio_stream_native(self.raw.as_ptr()) }
    }

    /// Whether this wraps a stream kaio did not create.
    pub fn is_foreign(&self) -> bool {
        self.foreign
    }

    /// The raw handle, for calls into `kaio_sys`. Borrowed.
    pub fn as_raw(&self) -> *mut sys::kaio_stream {
        self.raw.as_ptr()
    }
}

/// A CUDA event: orders work across streams and times it.
#[derive(Debug)]
pub struct Event {
    raw: Owned<sys::kaio_event>,
}

// SAFETY: as for Stream: an object made from a device, whose calls kaio.h
// makes safe from any thread; Drop cannot race (it takes `&mut self`).
unsafe impl Send for Event {}
unsafe impl Sync for Event {}

impl Event {
    /// An event that can time work ([`Event::elapsed_ms`]).
    pub fn new(device: &Device) -> Result<Event> {
        Event::with_flags(device, sys::KAIO_EVENT_DEFAULT)
    }

    /// An event for ordering only (`KAIO_EVENT_DISABLE_TIMING`): cheaper.
    pub fn without_timing(device: &Device) -> Result<Event> {
        Event::with_flags(device, sys::KAIO_EVENT_DISABLE_TIMING)
    }

    fn with_flags(device: &Device, flags: u32) -> Result<Event> {
        let mut p = ptr::null_mut();
        check(unsafe { sys::kaio_event_create(&mut p, device.as_raw(), flags) })?;
        Ok(Event { raw: Owned::new(p, "kaio_event_create")? })
    }

    /// Records the event at the current end of `stream`.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        check(unsafe { sys::kaio_event_record(self.raw.as_ptr(), stream.as_raw()) })
    }

    /// Blocks until the work captured by the last record has finished.
    pub fn synchronize(&self) -> Result<()> {
        check(unsafe { sys::kaio_event_synchronize(self.raw.as_ptr()) })
    }

    /// Milliseconds between two completed records (both timing-enabled).
    pub fn elapsed_ms(start: &Event, end: &Event) -> Result<f32> {
        let mut ms = 0f32;
        check(unsafe { sys::kaio_event_elapsed_ms(&mut ms, start.as_raw(), end.as_raw()) })?;
        Ok(ms)
    }

    /// The raw handle, for calls into `kaio_sys`. Borrowed.
    pub fn as_raw(&self) -> *mut sys::kaio_event {
        self.raw.as_ptr()
    }
}
