//! The driver probe, device count and `Device`.
use std::os::raw::{c_char, c_void};
use std::ptr;

use kaio_sys as sys;

use crate::error::{check, check_version, Result, Status};
use crate::handle::Owned;

/// A fixed C char array to a `String`, stopping at the first NUL.
pub(crate) fn c_array_to_string(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// What [`probe`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probe {
    /// OK; DRIVER_NOT_FOUND or DRIVER_TOO_OLD; NO_DEVICE when the driver loads
    /// but sees no GPU.
    pub driver_status: Status,
    /// e.g. 13000 for CUDA 13.0; 0 if unknown.
    pub driver_version: i32,
    /// 0 when there is no driver or no device.
    pub device_count: i32,
    /// "" or the reason, e.g. the loader's text.
    pub message: String,
}

impl Probe {
    /// True when a driver loaded and sees at least one device.
    pub fn usable(&self) -> bool {
        self.driver_status.is_ok() && self.device_count > 0
    }
}

/// Reports whether a driver and devices are usable, without failing on their
/// absence: use it to skip GPU work cleanly. The driver is `libcuda.so.1`, or
/// the file named by the `LIBKAIO_CUDA_DRIVER` environment variable; it is
/// loaded once per process.
pub fn probe() -> Result<Probe> {
    check_version()?;
    // SAFETY: a zeroed kaio_probe_info is valid (integers and a char array).
    let mut info: sys::kaio_probe_info = unsafe { std::mem::zeroed() };
    info.struct_size = std::mem::size_of::<sys::kaio_probe_info>() as u32;
    check(unsafe { sys::kaio_probe(&mut info) })?;
    Ok(Probe {
        driver_status: Status(info.driver_status),
        driver_version: info.driver_version,
        device_count: info.device_count,
        message: c_array_to_string(&info.message),
    })
}

/// The number of visible CUDA devices; fails (e.g. DRIVER_NOT_FOUND) when no
/// driver can be loaded.
pub fn device_count() -> Result<i32> {
    check_version()?;
    let mut n = 0i32;
    check(unsafe { sys::kaio_device_count(&mut n) })?;
    Ok(n)
}

/// Facts about a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub ordinal: i32,
    /// Compute capability, e.g. (9, 0) for an H100.
    pub compute_capability: (i32, i32),
    pub sm_count: i32,
    /// Opt-in maximum of shared memory per block, in bytes.
    pub max_shared_per_block: i32,
    pub total_memory: u64,
    pub l2_cache_bytes: u64,
    pub name: String,
}

/// A CUDA device, on its primary context (the one candle, cudarc and
/// PyTorch use, so memory and streams are shared with them).
///
/// Dropping it only drops this reference: buffers, streams, events, modules
/// and ops made from it keep the device alive, so objects may be dropped in
/// any order.
#[derive(Debug)]
pub struct Device {
    raw: Owned<sys::kaio_device>,
}

// SAFETY: kaio.h: "A kaio_device is internally synchronised: concurrent calls
// on one device, and on objects made from it, are safe", and _destroy "may be
// called from any thread". Errors are per OS thread, and this crate captures
// them on the calling thread before returning, so moving or sharing the handle
// across threads cannot mix up messages.
unsafe impl Send for Device {}
unsafe impl Sync for Device {}

impl Device {
    /// Opens device `ordinal` (0-based). Opening one ordinal twice gives two
    /// handles to the same device and module cache. Fails with NO_DEVICE when
    /// the ordinal is out of range, DRIVER_NOT_FOUND without a driver.
    pub fn open(ordinal: i32) -> Result<Device> {
        check_version()?;
        let mut p = ptr::null_mut();
        check(unsafe { sys::kaio_device_open(&mut p, ordinal) })?;
        Ok(Device { raw: Owned::new(p, "kaio_device_open")? })
    }

    /// Another handle to the same device (kaio_device_open on its ordinal).
    pub fn try_clone(&self) -> Result<Device> {
        Device::open(self.info()?.ordinal)
    }

    pub fn info(&self) -> Result<DeviceInfo> {
        // SAFETY: zeroed is a valid kaio_device_info.
        let mut info: sys::kaio_device_info = unsafe { std::mem::zeroed() };
        info.struct_size = std::mem::size_of::<sys::kaio_device_info>() as u32;
        check(unsafe { sys::kaio_device_get_info(self.raw.as_ptr(), &mut info) })?;
        Ok(DeviceInfo {
            ordinal: info.ordinal,
            compute_capability: (info.cc_major, info.cc_minor),
            sm_count: info.sm_count,
            max_shared_per_block: info.max_shared_per_block,
            total_memory: info.total_memory,
            l2_cache_bytes: info.l2_cache_bytes,
            name: c_array_to_string(&info.name),
        })
    }

    /// The device's primary `CUcontext`, for interop. Borrowed: valid while
    /// this device (or anything made from it) lives.
    pub fn native_context(&self) -> *mut c_void {
        unsafe { sys::kaio_device_native_context(self.raw.as_ptr()) }
    }

    /// The raw handle, for calls into `kaio_sys`. Borrowed.
    pub fn as_raw(&self) -> *mut sys::kaio_device {
        self.raw.as_ptr()
    }
}
