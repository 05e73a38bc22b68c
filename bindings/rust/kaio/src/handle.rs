//! `Owned<T>`: the one place a kaio handle is checked for NULL and destroyed.
use std::fmt;
use std::ptr::NonNull;

use kaio_sys as sys;

use crate::error::{Error, Result, Status};

/// A kaio object type and its `_destroy` function.
pub(crate) trait Destroy {
    /// # Safety
    /// `p` is a live handle owned by the caller, not used afterwards.
    unsafe fn destroy(p: *mut Self);
}

macro_rules! destroy {
    ($($t:ident => $f:ident),* $(,)?) => {$(
        impl Destroy for sys::$t {
            unsafe fn destroy(p: *mut Self) { sys::$f(p) }
        }
    )*};
}
destroy! {
    kaio_device => kaio_device_destroy,
    kaio_stream => kaio_stream_destroy,
    kaio_event => kaio_event_destroy,
    kaio_buffer => kaio_buffer_destroy,
    kaio_op => kaio_op_destroy,
    kaio_module => kaio_module_destroy,
    kaio_kernel => kaio_kernel_destroy,
    kaio_lang_kernel => kaio_lang_kernel_destroy,
}

/// A handle this crate owns (the wrapper, for foreign streams and memory):
/// destroyed exactly once, on drop. `!Send` and `!Sync` like the raw
/// pointer; each public wrapper states why it may cross threads.
pub(crate) struct Owned<T: Destroy>(NonNull<T>);

impl<T: Destroy> Owned<T> {
    /// Takes ownership of the out-handle of a create call that returned
    /// KAIO_OK; `what` names that call.
    pub(crate) fn new(p: *mut T, what: &str) -> Result<Owned<T>> {
        NonNull::new(p)
            .map(Owned)
            .ok_or_else(|| Error::new(Status::INTERNAL, format!("{} returned KAIO_OK and a NULL handle", what)))
    }

    pub(crate) fn as_ptr(&self) -> *mut T {
        self.0.as_ptr()
    }
}

impl<T: Destroy> Drop for Owned<T> {
    fn drop(&mut self) {
        // SAFETY: owned since new(), destroyed once; kaio.h lets _destroy run
        // on any thread, and `&mut self` rules out a concurrent call.
        unsafe { T::destroy(self.0.as_ptr()) }
    }
}

impl<T: Destroy> fmt::Debug for Owned<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:p}", self.0.as_ptr())
    }
}
