//! `Status`, `Error` and the version check.
use std::ffi::CStr;
use std::fmt;
use std::os::raw::c_char;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Once;

use kaio_sys as sys;

/// A `kaio_status`: 0 is OK, failures are negative and grouped by hundreds.
///
/// A newtype rather than an enum: a newer libkaio may return values this
/// crate does not know, and those must stay representable. Compare with the
/// associated constants, or use [`Status::category`].
#[repr(transparent)]
#[derive(Copy, Clone, PartialEq, Eq, Hash)]
pub struct Status(pub i32);

impl Status {
    pub const OK: Status = Status(sys::KAIO_OK);
    pub const INVALID_ARGUMENT: Status = Status(sys::KAIO_ERROR_INVALID_ARGUMENT);
    pub const INVALID_HANDLE: Status = Status(sys::KAIO_ERROR_INVALID_HANDLE);
    pub const INVALID_DTYPE: Status = Status(sys::KAIO_ERROR_INVALID_DTYPE);
    pub const SHAPE_MISMATCH: Status = Status(sys::KAIO_ERROR_SHAPE_MISMATCH);
    pub const OUT_OF_BOUNDS: Status = Status(sys::KAIO_ERROR_OUT_OF_BOUNDS);
    pub const MISALIGNED: Status = Status(sys::KAIO_ERROR_MISALIGNED);
    pub const WRONG_DEVICE: Status = Status(sys::KAIO_ERROR_WRONG_DEVICE);
    pub const BUFFER_TOO_SMALL: Status = Status(sys::KAIO_ERROR_BUFFER_TOO_SMALL);
    pub const INVALID_DIMENSION: Status = Status(sys::KAIO_ERROR_INVALID_DIMENSION);
    pub const UNSUPPORTED: Status = Status(sys::KAIO_ERROR_UNSUPPORTED);
    pub const DRIVER_NOT_FOUND: Status = Status(sys::KAIO_ERROR_DRIVER_NOT_FOUND);
    pub const DRIVER_TOO_OLD: Status = Status(sys::KAIO_ERROR_DRIVER_TOO_OLD);
    pub const NO_DEVICE: Status = Status(sys::KAIO_ERROR_NO_DEVICE);
    pub const UNSUPPORTED_ARCH: Status = Status(sys::KAIO_ERROR_UNSUPPORTED_ARCH);
    pub const OUT_OF_HOST_MEMORY: Status = Status(sys::KAIO_ERROR_OUT_OF_HOST_MEMORY);
    pub const OUT_OF_DEVICE_MEMORY: Status = Status(sys::KAIO_ERROR_OUT_OF_DEVICE_MEMORY);
    pub const PTX_JIT_FAILED: Status = Status(sys::KAIO_ERROR_PTX_JIT_FAILED);
    pub const KERNEL_NOT_FOUND: Status = Status(sys::KAIO_ERROR_KERNEL_NOT_FOUND);
    pub const KERNEL_SOURCE: Status = Status(sys::KAIO_ERROR_KERNEL_SOURCE);
    pub const LAUNCH_FAILED: Status = Status(sys::KAIO_ERROR_LAUNCH_FAILED);
    pub const DEVICE_FAULT: Status = Status(sys::KAIO_ERROR_DEVICE_FAULT);
    pub const KERNEL_BOUNDS: Status = Status(sys::KAIO_ERROR_KERNEL_BOUNDS);
    pub const DRIVER: Status = Status(sys::KAIO_ERROR_DRIVER);
    pub const INTERNAL: Status = Status(sys::KAIO_ERROR_INTERNAL);

    /// The raw `kaio_status` value.
    pub fn code(self) -> i32 {
        self.0
    }

    pub fn is_ok(self) -> bool {
        self.0 == sys::KAIO_OK
    }

    /// 0 for OK, else the hundreds: `Status(-100)` (bad arguments), -200
    /// (environment), -300 (out of memory), -400 (JIT), -500 (running GPU
    /// code), -900 (other).
    pub fn category(self) -> Status {
        Status(sys::KAIO_STATUS_CATEGORY(self.0))
    }

    /// The C constant's name, e.g. `"KAIO_ERROR_OUT_OF_BOUNDS"`, or
    /// `"KAIO_UNKNOWN_STATUS"`. Calls into libkaio (any thread, no driver).
    pub fn name(self) -> &'static str {
        // Static storage, never NULL (kaio.h).
        unsafe { static_str(sys::kaio_status_name(self.0)) }
    }
}

impl fmt::Debug for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Status({} = {})", self.name(), self.0)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// # Safety
/// `p` is NULL or a NUL-terminated string in static storage.
pub(crate) unsafe fn static_str(p: *const c_char) -> &'static str {
    if p.is_null() {
        return "";
    }
    CStr::from_ptr(p).to_str().unwrap_or("")
}

/// A failed kaio call: its status and the message libkaio wrote for it.
///
/// The message is copied on the calling thread right after the failing call
/// (`kaio_last_error_copy`), so it can never be another call's text. It names
/// the function, the argument, the value and the fix.
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    status: Status,
    message: String,
    driver_code: i32,
}

impl Error {
    /// Captures the calling thread's last error for a call that returned
    /// `status`. Must run right after that call, on the same thread.
    pub(crate) fn last(status: i32) -> Error {
        let mut buf = vec![0u8; 512];
        // SAFETY: buf holds buf.len() writable bytes.
        let len = unsafe { sys::kaio_last_error_copy(buf.as_mut_ptr() as *mut c_char, buf.len()) };
        if len >= buf.len() {
            buf = vec![0u8; len + 1];
            // SAFETY: as above; no kaio call in between, so the text is the same.
            unsafe { sys::kaio_last_error_copy(buf.as_mut_ptr() as *mut c_char, buf.len()) };
        }
        buf.truncate(len.min(buf.len() - 1));
        let driver_code = unsafe { sys::kaio_last_error_driver_code() };
        let mut message = String::from_utf8_lossy(&buf).into_owned();
        if message.is_empty() {
            message = Status(status).name().to_string();
        }
        Error { status: Status(status), message, driver_code }
    }

    /// An error raised by these bindings before reaching libkaio (for example
    /// a PTX string with a NUL byte in it).
    pub(crate) fn new(status: Status, message: String) -> Error {
        Error { status, message, driver_code: 0 }
    }

    pub fn status(&self) -> Status {
        self.status
    }

    /// The full message, e.g. `kaio_op_launch: tensor 'out' (8 x 16 f32 at
    /// offset_bytes 0, row_stride 16) needs 512 bytes but its buffer holds 256`.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The raw `CUresult` behind the error, or 0 when the driver did not fail.
    pub fn driver_code(&self) -> i32 {
        self.driver_code
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("status", &self.status)
            .field("message", &self.message)
            .field("driver_code", &self.driver_code)
            .finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status.name(), self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// `Ok(())` for KAIO_OK, else the error captured right now.
#[inline]
pub(crate) fn check(status: i32) -> Result<()> {
    if status == sys::KAIO_OK {
        Ok(())
    } else {
        Err(Error::last(status))
    }
}

/// A libkaio version, `major.minor.patch`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl Version {
    /// From `KAIO_VERSION_NUMBER` form, `major * 10000 + minor * 100 + patch`.
    pub const fn from_number(n: u32) -> Version {
        Version { major: n / 10000, minor: n / 100 % 100, patch: n % 100 }
    }

    pub const fn number(self) -> u32 {
        self.major * 10000 + self.minor * 100 + self.patch
    }

    /// Whether a program compiled against `compiled` may run on `self`: the
    /// runtime is at least as new, with the same major version, and while 0.x
    /// the same minor (the ABI is stable only within a minor release then).
    pub fn can_run(self, compiled: Version) -> bool {
        self >= compiled && self.major == compiled.major && (self.major != 0 || self.minor == compiled.minor)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// The version these bindings were written against (kaio-sys's header).
pub const COMPILED_VERSION: Version = Version::from_number(sys::KAIO_VERSION_NUMBER);

/// The version of the libkaio actually loaded.
pub fn runtime_version() -> Version {
    Version::from_number(unsafe { sys::kaio_version_number() })
}

static VERSION_ONCE: Once = Once::new();
static RUNTIME_NUMBER: AtomicU32 = AtomicU32::new(0);

/// Checks, once per process, that the loaded libkaio can run code compiled
/// against [`COMPILED_VERSION`]. Every entry point that opens a device or
/// probes the driver calls it first, so a mismatch surfaces as an `Error`
/// (status `UNSUPPORTED`) at first use instead of as a crash later.
pub fn check_version() -> Result<()> {
    VERSION_ONCE.call_once(|| RUNTIME_NUMBER.store(runtime_version().number(), Ordering::Release));
    let runtime = Version::from_number(RUNTIME_NUMBER.load(Ordering::Acquire));
    if runtime.can_run(COMPILED_VERSION) {
        Ok(())
    } else {
        Err(Error::new(
            Status::UNSUPPORTED,
            format!(
                "kaio: the loaded libkaio is {} but this program was built against {}; \
                 install a libkaio {}.{}.x at least as new (or rebuild against the one you have)",
                runtime, COMPILED_VERSION, COMPILED_VERSION.major, COMPILED_VERSION.minor
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_rules() {
        let c = Version::from_number(100); // 0.1.0
        assert_eq!(c, Version { major: 0, minor: 1, patch: 0 });
        assert_eq!(c.to_string(), "0.1.0");
        assert!(Version::from_number(100).can_run(c));
        assert!(Version::from_number(105).can_run(c));
        assert!(!Version::from_number(99).can_run(c)); // 0.0.99: older
        assert!(!Version::from_number(200).can_run(c)); // 0.2.0: other ABI while 0.x
        let c1 = Version::from_number(10203); // 1.2.3
        assert!(Version::from_number(10300).can_run(c1));
        assert!(!Version::from_number(10202).can_run(c1));
        assert!(!Version::from_number(20000).can_run(c1));
    }

    #[test]
    fn categories() {
        assert_eq!(Status::OUT_OF_BOUNDS.category(), Status(-100));
        assert_eq!(Status::DEVICE_FAULT.category(), Status(-500));
        assert_eq!(Status(-950).category(), Status(-900));
        assert_eq!(Status::OK.category(), Status::OK);
        assert_eq!(Status(i32::MIN).category().code(), -2147483600);
    }
}
