//! User PTX: `Module`, `Kernel`, `LaunchConfig` and the `KernelArgs` packer.
use std::ffi::CString;
use std::os::raw::c_void;
use std::ptr;

use kaio_sys as sys;

use crate::buffer::Buffer;
use crate::device::Device;
use crate::dtype::{Bf16, Element, F16};
use crate::error::{check, Error, Result, Status};
use crate::handle::Owned;
use crate::stream::Stream;

pub(crate) fn c_string(s: &str, func: &str, arg: &str) -> Result<CString> {
    CString::new(s).map_err(|e| {
        Error::new(
            Status::INVALID_ARGUMENT,
            format!("{}: '{}' contains a NUL byte at offset {}; pass text without NULs", func, arg, e.nul_position()),
        )
    })
}

/// A user PTX module, JIT-compiled for one device.
#[derive(Debug)]
pub struct Module {
    raw: Owned<sys::kaio_module>,
}

// SAFETY: kaio.h: "Modules, kernels and op handles are immutable after
// creation and may be shared between threads". Drop takes `&mut self`.
unsafe impl Send for Module {}
unsafe impl Sync for Module {}

impl Module {
    /// JIT-compiles PTX text for `device`. A JIT failure is PTX_JIT_FAILED
    /// with the JIT's log in the message. Not a steady-state operation: load
    /// before capturing CUDA graphs.
    pub fn load_ptx(device: &Device, ptx: &str) -> Result<Module> {
        let text = c_string(ptx, "Module::load_ptx", "ptx")?;
        let mut p = ptr::null_mut();
        check(unsafe { sys::kaio_module_load_ptx(&mut p, device.as_raw(), text.as_ptr()) })?;
        Ok(Module { raw: Owned::new(p, "kaio_module_load_ptx")? })
    }

    /// Looks up an `.entry` by name (KERNEL_NOT_FOUND if there is none). The
    /// kernel keeps the module loaded.
    pub fn kernel(&self, name: &str) -> Result<Kernel> {
        let cname = c_string(name, "Module::kernel", "name")?;
        let mut p = ptr::null_mut();
        check(unsafe { sys::kaio_module_get_kernel(&mut p, self.raw.as_ptr(), cname.as_ptr()) })?;
        Ok(Kernel { raw: Owned::new(p, "kaio_module_get_kernel")? })
    }

    /// The raw handle, for calls into `kaio_sys`. Borrowed.
    pub fn as_raw(&self) -> *mut sys::kaio_module {
        self.raw.as_ptr()
    }
}

/// What the driver reports about a kernel.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct KernelAttributes {
    /// Per thread.
    pub registers: i32,
    pub static_shared_bytes: i32,
    /// Per thread; > 0 often means spills.
    pub local_bytes: i32,
    pub const_bytes: i32,
    pub max_threads_per_block: i32,
    /// Size of the packed argument buffer; None when the driver predates CUDA
    /// 12.4 and cannot tell.
    pub param_bytes: Option<usize>,
}

/// Grid and block sizes for [`Kernel::launch`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks; x >= 1; y, z of 0 mean 1.
    pub grid: [u32; 3],
    /// Threads per block; x >= 1; y, z of 0 mean 1.
    pub block: [u32; 3],
    /// Dynamic shared memory per block, bytes.
    pub shared_bytes: u32,
}

impl LaunchConfig {
    /// One-dimensional: enough blocks of `block` threads to cover `n` threads.
    pub fn linear(n: u32, block: u32) -> LaunchConfig {
        let blocks = n.checked_div(block).map_or(0, |q| q + (n % block != 0) as u32);
        LaunchConfig { grid: [blocks, 1, 1], block: [block, 1, 1], shared_bytes: 0 }
    }

    fn raw(&self) -> sys::kaio_launch_config {
        sys::kaio_launch_config { grid: self.grid, block: self.block, shared_bytes: self.shared_bytes, reserved: 0 }
    }
}

/// An `.entry` of a [`Module`].
#[derive(Debug)]
pub struct Kernel {
    raw: Owned<sys::kaio_kernel>,
}

// SAFETY: as for Module: immutable after creation, shareable between threads.
unsafe impl Send for Kernel {}
unsafe impl Sync for Kernel {}

impl Kernel {
    pub fn attributes(&self) -> Result<KernelAttributes> {
        let mut a = sys::kaio_kernel_attributes {
            struct_size: std::mem::size_of::<sys::kaio_kernel_attributes>() as u32,
            ..Default::default()
        };
        check(unsafe { sys::kaio_kernel_get_attributes(self.raw.as_ptr(), &mut a) })?;
        Ok(KernelAttributes {
            registers: a.registers,
            static_shared_bytes: a.static_shared_bytes,
            local_bytes: a.local_bytes,
            const_bytes: a.const_bytes,
            max_threads_per_block: a.max_threads_per_block,
            param_bytes: if a.param_bytes < 0 { None } else { Some(a.param_bytes as usize) },
        })
    }

    /// Enqueues the kernel on `stream`. `args` is the packed parameter buffer
    /// (build it with [`KernelArgs`]); when the driver can report the layout
    /// (CUDA 12.4+) its size is checked against it.
    ///
    /// # Safety
    /// kaio cannot see what the kernel does with its pointers: the arguments
    /// must match the kernel's `.param` list, and the kernel must stay inside
    /// the buffers it is given, which must outlive the launch.
    pub unsafe fn launch(&self, stream: &Stream, config: &LaunchConfig, args: &[u8]) -> Result<()> {
        let cfg = config.raw();
        let p = if args.is_empty() { ptr::null() } else { args.as_ptr() as *const c_void };
        check(sys::kaio_kernel_launch(self.raw.as_ptr(), stream.as_raw(), &cfg, p, args.len()))
    }

    /// The raw handle, for calls into `kaio_sys`. Borrowed.
    pub fn as_raw(&self) -> *mut sys::kaio_kernel {
        self.raw.as_ptr()
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A scalar kernel parameter: its bytes go in at their natural alignment.
/// PTX `.u8/.s8` take u8/i8, `.u16/.s16/.f16/.bf16` take u16/i16/F16/Bf16,
/// `.u32/.s32/.f32` take u32/i32/f32, `.u64/.s64/.f64` (and pointers) take
/// u64/i64/f64.
pub trait KernelArg: sealed::Sealed + Copy {
    #[doc(hidden)]
    fn append_to(self, out: &mut Vec<u8>);
}

macro_rules! kernel_arg {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl KernelArg for $t {
            fn append_to(self, out: &mut Vec<u8>) { out.extend_from_slice(&self.to_ne_bytes()); }
        }
    )*};
}
kernel_arg!(u8, i8, u16, i16, u32, i32, u64, i64, f32, f64);
impl sealed::Sealed for F16 {}
impl KernelArg for F16 {
    fn append_to(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_bits().to_ne_bytes());
    }
}
impl sealed::Sealed for Bf16 {}
impl KernelArg for Bf16 {
    fn append_to(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_bits().to_ne_bytes());
    }
}

/// Packs kernel parameters the way `kaio_kernel_launch` expects: each at its
/// natural alignment, as a C struct of the same members would lay them out,
/// with no tail padding.
///
/// ```
/// # use kaio::KernelArgs;
/// // .param .u64 packed, .param .u64 out, .param .f32 scale, .param .u32 n
/// let args = KernelArgs::new().arg(0x1000u64).arg(0x2000u64).arg(0.5f32).arg(7u32);
/// assert_eq!(args.len(), 24);
/// let a = KernelArgs::new().arg(1u8).arg(2u32).arg(3u16).arg(4u64);
/// assert_eq!(a.len(), 24); // 1 @0, 4 @4, 2 @8, 8 @16
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelArgs {
    bytes: Vec<u8>,
}

impl KernelArgs {
    pub fn new() -> KernelArgs {
        KernelArgs { bytes: Vec::new() }
    }

    /// Pads to a multiple of `align` (a power of two), for `.align N` params.
    pub fn align_to(mut self, align: usize) -> KernelArgs {
        self.pad(align);
        self
    }

    fn pad(&mut self, align: usize) {
        let a = align.max(1);
        let len = (self.bytes.len() + a - 1) / a * a;
        self.bytes.resize(len, 0);
    }

    /// Appends a scalar at its natural alignment.
    pub fn arg<A: KernelArg>(mut self, value: A) -> KernelArgs {
        self.pad(std::mem::size_of::<A>());
        value.append_to(&mut self.bytes);
        self
    }

    /// Appends a buffer's device address (a `.u64` parameter).
    pub fn ptr<T: Element>(self, buffer: &Buffer<T>) -> KernelArgs {
        self.arg(buffer.device_ptr())
    }

    /// Appends the device address of element `offset` of `buffer`.
    pub fn ptr_at<T: Element>(self, buffer: &Buffer<T>, offset: usize) -> KernelArgs {
        let bytes = (offset as u64).wrapping_mul(std::mem::size_of::<T>() as u64);
        self.arg(buffer.device_ptr().wrapping_add(bytes))
    }

    /// Appends raw bytes at alignment `align` (structs, `.b8 x[N]` arrays).
    pub fn bytes_aligned(mut self, bytes: &[u8], align: usize) -> KernelArgs {
        self.pad(align);
        self.bytes.extend_from_slice(bytes);
        self
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }
}

impl std::ops::Deref for KernelArgs {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl AsRef<[u8]> for KernelArgs {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_follows_c_struct_layout() {
        let a = KernelArgs::new().arg(1u8).arg(2u32).arg(3u16).arg(4u64).arg(F16::from_f32(1.0));
        let mut want = vec![1u8, 0, 0, 0];
        want.extend_from_slice(&2u32.to_ne_bytes());
        want.extend_from_slice(&3u16.to_ne_bytes());
        want.extend_from_slice(&[0; 6]);
        want.extend_from_slice(&4u64.to_ne_bytes());
        want.extend_from_slice(&0x3C00u16.to_ne_bytes());
        assert_eq!(a.as_bytes(), &want[..]);
        assert_eq!(a.len(), 26); // no tail padding
        let b = KernelArgs::new().arg(1i8).align_to(16).bytes_aligned(&[9; 3], 4);
        assert_eq!(b.len(), 19);
        assert_eq!(&b[16..], &[9, 9, 9]);
    }

    #[test]
    fn linear_config() {
        assert_eq!(LaunchConfig::linear(1000, 256).grid, [4, 1, 1]);
        assert_eq!(LaunchConfig::linear(1024, 256).grid, [4, 1, 1]);
        assert_eq!(LaunchConfig::linear(1, 256).block, [256, 1, 1]);
    }
}
