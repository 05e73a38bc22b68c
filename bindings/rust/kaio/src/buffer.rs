//! `Buffer<T>` (device memory) and `TensorView` (how ops see it).
use std::marker::PhantomData;
use std::mem::size_of;
use std::os::raw::c_void;
use std::ptr;

use kaio_sys as sys;

use crate::device::Device;
use crate::dtype::{Dtype, Element};
use crate::error::{check, Error, Result, Status};
use crate::handle::Owned;
use crate::stream::Stream;

/// `n` elements of `T` in bytes; `u64::MAX` on overflow, which libkaio then
/// rejects as out of bounds with its usual message.
fn bytes_of<T>(n: usize) -> u64 {
    (n as u64).saturating_mul(size_of::<T>() as u64)
}

/// A range of device memory holding `len()` elements of `T`.
///
/// Owned buffers are freed on drop (the driver waits for work using them);
/// wrappers made by [`Buffer::from_raw_parts`] over foreign memory (a candle
/// `CudaSlice`) are only dropped, never freed.
///
/// A `Buffer` is a handle to memory the host never dereferences. Like a
/// `&Cell`, device-side writes (ops, copies, memset) go through `&self`:
/// ordering device accesses is the caller's job, with streams and events, as
/// kaio.h says ("Concurrent writes to overlapping bytes of a buffer are a data
/// race that the caller orders"). Host memory is only touched through the
/// slices passed to [`write`](Buffer::write) and [`read`](Buffer::read), which
/// are borrowed for the duration of the call.
pub struct Buffer<T: Element> {
    raw: Owned<sys::kaio_buffer>,
    len: usize,
    foreign: bool,
    _t: PhantomData<T>,
}

// SAFETY: a buffer is an object made from a device, and kaio.h makes
// concurrent calls on those safe from any thread; T is plain data (Element:
// Send + Sync). Drop takes `&mut self`, so it cannot race with other calls.
unsafe impl<T: Element> Send for Buffer<T> {}
unsafe impl<T: Element> Sync for Buffer<T> {}

impl<T: Element> Buffer<T> {
    /// Allocates `len` elements (256-byte aligned, contents undefined but
    /// valid for `T`, since every bit pattern is). Not a steady-state
    /// operation: allocate before capturing CUDA graphs.
    pub fn alloc(device: &Device, len: usize) -> Result<Buffer<T>> {
        let mut p = ptr::null_mut();
        check(unsafe { sys::kaio_buffer_create(&mut p, device.as_raw(), bytes_of::<T>(len)) })?;
        Ok(Buffer { raw: Owned::new(p, "kaio_buffer_create")?, len, foreign: false, _t: PhantomData })
    }

    /// Allocates a buffer and copies `data` into it (blocking).
    pub fn from_slice(device: &Device, data: &[T]) -> Result<Buffer<T>> {
        let b = Buffer::alloc(device, data.len())?;
        b.write(0, data)?;
        Ok(b)
    }

    /// Wraps foreign device memory `[device_ptr, device_ptr + len_bytes)`,
    /// e.g. a candle or cudarc `CudaSlice`'s. libkaio checks the range against
    /// the allocation the driver knows for `device_ptr` and against `device`
    /// (OUT_OF_BOUNDS, WRONG_DEVICE, INVALID_ARGUMENT for host memory).
    /// kaio never frees it. `len_bytes` must be a multiple of `T`'s size.
    ///
    /// # Safety
    /// The memory must stay allocated while the returned buffer, and any work
    /// enqueued on it, lives; whoever else uses it must order their accesses
    /// with kaio's (same stream, or events).
    pub unsafe fn from_raw_parts(device: &Device, device_ptr: u64, len_bytes: u64) -> Result<Buffer<T>> {
        let elem = size_of::<T>() as u64;
        if len_bytes % elem != 0 {
            return Err(Error::new(
                Status::INVALID_ARGUMENT,
                format!(
                    "Buffer::<{}>::from_raw_parts: 'len_bytes' {} is not a multiple of the element size {}",
                    T::DTYPE,
                    len_bytes,
                    elem
                ),
            ));
        }
        let len = usize::try_from(len_bytes / elem).map_err(|_| {
            Error::new(Status::INVALID_ARGUMENT, format!("Buffer::from_raw_parts: 'len_bytes' {} is too large", len_bytes))
        })?;
        let mut p = ptr::null_mut();
        check(sys::kaio_buffer_wrap(&mut p, device.as_raw(), device_ptr, len_bytes))?;
        Ok(Buffer { raw: Owned::new(p, "kaio_buffer_wrap")?, len, foreign: true, _t: PhantomData })
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn size_bytes(&self) -> u64 {
        unsafe { sys::kaio_buffer_size(self.raw.as_ptr()) }
    }

    /// The device address (`CUdeviceptr`), e.g. for kernel arguments.
    pub fn device_ptr(&self) -> u64 {
        unsafe { sys::kaio_buffer_device_ptr(self.raw.as_ptr()) }
    }

    pub fn dtype(&self) -> Dtype {
        T::DTYPE
    }

    /// Whether this wraps foreign memory.
    pub fn is_foreign(&self) -> bool {
        self.foreign
    }

    /// The raw handle, for calls into `kaio_sys`. Borrowed.
    pub fn as_raw(&self) -> *mut sys::kaio_buffer {
        self.raw.as_ptr()
    }

    /// Copies `src` to elements `[offset, offset + src.len())`, blocking.
    /// Waits for prior work on the legacy stream (and streams made by
    /// [`Stream::new`]) but NOT for non-blocking or foreign streams:
    /// synchronise those first.
    pub fn write(&self, offset: usize, src: &[T]) -> Result<()> {
        check(unsafe {
            sys::kaio_buffer_write(
                self.raw.as_ptr(),
                bytes_of::<T>(offset),
                src.as_ptr() as *const c_void,
                bytes_of::<T>(src.len()),
            )
        })
    }

    /// Copies elements `[offset, offset + dst.len())` into `dst`, blocking;
    /// same ordering rules as [`write`](Buffer::write).
    pub fn read(&self, offset: usize, dst: &mut [T]) -> Result<()> {
        check(unsafe {
            sys::kaio_buffer_read(
                self.raw.as_ptr(),
                bytes_of::<T>(offset),
                dst.as_mut_ptr() as *mut c_void,
                bytes_of::<T>(dst.len()),
            )
        })
    }

    /// The whole buffer, copied to the host (blocking).
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut v = vec![T::default(); self.len];
        self.read(0, &mut v)?;
        Ok(v)
    }

    /// Stream-ordered copy of `src` into elements from `offset`.
    ///
    /// # Safety
    /// `src` must stay valid and unchanged until the copy has run on `stream`
    /// (synchronise it or wait on an event). With ordinary pageable memory the
    /// driver has staged it by the time this returns; with page-locked memory
    /// it reads it later.
    pub unsafe fn write_async(&self, stream: &Stream, offset: usize, src: &[T]) -> Result<()> {
        check(sys::kaio_buffer_write_async(
            self.raw.as_ptr(),
            stream.as_raw(),
            bytes_of::<T>(offset),
            src.as_ptr() as *const c_void,
            bytes_of::<T>(src.len()),
        ))
    }

    /// Stream-ordered copy of elements from `offset` into `dst`.
    ///
    /// # Safety
    /// `dst` must stay valid, and must not be read, until the copy has run on
    /// `stream` (synchronise it or wait on an event).
    pub unsafe fn read_async(&self, stream: &Stream, offset: usize, dst: &mut [T]) -> Result<()> {
        check(sys::kaio_buffer_read_async(
            self.raw.as_ptr(),
            stream.as_raw(),
            bytes_of::<T>(offset),
            dst.as_mut_ptr() as *mut c_void,
            bytes_of::<T>(dst.len()),
        ))
    }

    /// Stream-ordered: sets every byte of elements `[offset, offset + len)`
    /// to `value`.
    pub fn memset(&self, stream: &Stream, offset: usize, len: usize, value: u8) -> Result<()> {
        check(unsafe {
            sys::kaio_buffer_memset(self.raw.as_ptr(), stream.as_raw(), bytes_of::<T>(offset), value, bytes_of::<T>(len))
        })
    }

    /// Stream-ordered: zeroes the whole buffer.
    pub fn zero(&self, stream: &Stream) -> Result<()> {
        self.memset(stream, 0, self.len, 0)
    }

    /// Stream-ordered device-to-device copy of `len` elements from
    /// `src[src_offset..]` into `self[dst_offset..]`; ranges must not overlap.
    pub fn copy_from(&self, dst_offset: usize, src: &Buffer<T>, src_offset: usize, len: usize, stream: &Stream) -> Result<()> {
        check(unsafe {
            sys::kaio_buffer_copy(
                self.raw.as_ptr(),
                bytes_of::<T>(dst_offset),
                src.raw.as_ptr(),
                bytes_of::<T>(src_offset),
                bytes_of::<T>(len),
                stream.as_raw(),
            )
        })
    }

    /// A contiguous `rows x cols` view from the start of the buffer.
    pub fn view(&self, rows: usize, cols: usize) -> TensorView<'_> {
        TensorView::new(self, rows, cols)
    }
}

impl<T: Element> std::fmt::Debug for Buffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer")
            .field("dtype", &T::DTYPE)
            .field("len", &self.len)
            .field("device_ptr", &format_args!("{:#x}", self.device_ptr()))
            .field("foreign", &self.foreign)
            .finish()
    }
}

fn dim(n: usize) -> i64 {
    // Larger than i64::MAX: pass a value libkaio rejects as overflowing.
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A rank-2, row-major view of a buffer: element (r, c) lives at byte
/// `offset_bytes + (r * row_stride + c) * dtype.size()`. The layout is exactly
/// `kaio_tensor` (`#[repr(transparent)]`), so a slice of views is what
/// `kaio_op_launch` takes. It borrows the buffer; libkaio checks every view at
/// every call (dtype, shape, alignment, bounds, device) and reports what is
/// wrong, so building one never fails.
#[repr(transparent)]
#[derive(Copy, Clone, Debug)]
pub struct TensorView<'a> {
    raw: sys::kaio_tensor,
    _buffer: PhantomData<&'a ()>,
}

// SAFETY: a view is a borrowed `&Buffer` (Sync) plus plain numbers; the raw
// pointer inside is only passed back to libkaio, whose calls are thread-safe.
unsafe impl Send for TensorView<'_> {}
unsafe impl Sync for TensorView<'_> {}

impl<'a> TensorView<'a> {
    /// A contiguous `rows x cols` view of `buffer` from its start, with the
    /// buffer's dtype.
    pub fn new<T: Element>(buffer: &'a Buffer<T>, rows: usize, cols: usize) -> TensorView<'a> {
        TensorView {
            raw: sys::kaio_tensor_2d(buffer.as_raw(), T::DTYPE.raw(), dim(rows), dim(cols)),
            _buffer: PhantomData,
        }
    }

    /// A view with no buffer: what kaio takes for "skip this output" (the
    /// dA or dB of a matmul backward). Any other use fails with INVALID_HANDLE.
    pub fn none() -> TensorView<'static> {
        TensorView {
            raw: sys::kaio_tensor_2d(ptr::null_mut(), sys::KAIO_DTYPE_INVALID, 0, 0),
            _buffer: PhantomData,
        }
    }

    /// Starts the view `elements` elements (of the view's dtype) into the buffer.
    pub fn with_offset(mut self, elements: usize) -> TensorView<'a> {
        let size = self.dtype_size() as u64;
        self.raw.offset_bytes = (elements as u64).saturating_mul(size);
        self
    }

    /// Starts the view `bytes` bytes into the buffer (must be a multiple of
    /// the element size, or launches fail with MISALIGNED).
    pub fn with_offset_bytes(mut self, bytes: u64) -> TensorView<'a> {
        self.raw.offset_bytes = bytes;
        self
    }

    /// Elements between the starts of consecutive rows (>= cols); 0 means cols.
    pub fn with_row_stride(mut self, elements: usize) -> TensorView<'a> {
        self.raw.row_stride = dim(elements);
        self
    }

    /// Reinterprets the bytes as another dtype, e.g. a foreign `Buffer<u8>`
    /// holding bf16 values. Rows, cols, stride and offset keep their numbers.
    pub fn with_dtype(mut self, dtype: Dtype) -> TensorView<'a> {
        self.raw.dtype = dtype.raw();
        self
    }

    fn dtype_size(&self) -> usize {
        unsafe { sys::kaio_dtype_size(self.raw.dtype) }
    }

    pub fn rows(&self) -> i64 {
        self.raw.rows
    }
    pub fn cols(&self) -> i64 {
        self.raw.cols
    }
    /// In elements; 0 means contiguous (`cols`).
    pub fn row_stride(&self) -> i64 {
        self.raw.row_stride
    }
    pub fn offset_bytes(&self) -> u64 {
        self.raw.offset_bytes
    }

    /// The `kaio_tensor` this view is.
    pub fn as_raw(&self) -> &sys::kaio_tensor {
        &self.raw
    }

    /// A view from a raw `kaio_tensor`.
    ///
    /// # Safety
    /// `raw.buffer` is NULL or a live `kaio_buffer` that outlives `'a`.
    pub unsafe fn from_raw(raw: sys::kaio_tensor) -> TensorView<'a> {
        TensorView { raw, _buffer: PhantomData }
    }
}
