//! The kernel language: small typed kernels that libkaio compiles to PTX
//! itself (kaio.h, "Kernel language"; grammar in the README).
use std::os::raw::c_char;
use std::ptr;

use kaio_sys as sys;

use crate::buffer::TensorView;
use crate::device::Device;
use crate::error::{check, Result};
use crate::handle::Owned;
use crate::module::c_string;
use crate::stream::Stream;

/// A compiled and loaded kernel-language kernel.
#[derive(Debug)]
pub struct LangKernel {
    raw: Owned<sys::kaio_lang_kernel>,
}

// SAFETY: kaio.h: kaio_lang_kernel_launch is "Thread-safe; a kernel may be
// launched from several threads at once", and the ptx getter is "Any
// thread". `check` must not race with launches of the same kernel: it takes
// `&mut self`, which rules that out. Drop takes `&mut self`.
unsafe impl Send for LangKernel {}
unsafe impl Sync for LangKernel {}

/// Reads a string through a C "copy into buf, report the full length" call.
fn copied_text(mut call: impl FnMut(*mut c_char, usize, &mut usize) -> i32) -> Result<String> {
    let mut len = 0usize;
    check(call(ptr::null_mut(), 0, &mut len))?;
    let mut buf = vec![0u8; len + 1];
    check(call(buf.as_mut_ptr() as *mut c_char, buf.len(), &mut len))?;
    buf.truncate(len.min(buf.len() - 1));
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// Compiles `source` to PTX without a device or driver. A rejected source is
/// KERNEL_SOURCE with `line:col`, the reason and a caret excerpt.
pub fn compile_ptx(source: &str) -> Result<String> {
    let src = c_string(source, "kaio::compile_ptx", "source")?;
    copied_text(|buf, cap, len| unsafe { sys::kaio_lang_compile_ptx(src.as_ptr(), buf, cap, len) })
}

impl LangKernel {
    /// Compiles `source` and loads it on `device` (cached per source text).
    /// Not a steady-state operation: create before capturing graphs.
    pub fn new(device: &Device, source: &str) -> Result<LangKernel> {
        let src = c_string(source, "LangKernel::new", "source")?;
        let mut p = ptr::null_mut();
        check(unsafe { sys::kaio_lang_kernel_create(&mut p, device.as_raw(), src.as_ptr()) })?;
        Ok(LangKernel { raw: Owned::new(p, "kaio_lang_kernel_create")? })
    }

    /// The PTX the kernel was built from.
    pub fn ptx(&self) -> Result<String> {
        let k = self.raw.as_ptr();
        copied_text(|buf, cap, len| unsafe { sys::kaio_lang_kernel_ptx(k, buf, cap, len) })
    }

    /// Enqueues the kernel: one view per tensor parameter and one value per
    /// scalar parameter, each in declaration order. No host sync, allocation
    /// or module load.
    pub fn launch(&self, stream: &Stream, tensors: &[TensorView<'_>], scalars: &[f64]) -> Result<()> {
        check(unsafe {
            sys::kaio_lang_kernel_launch(
                self.raw.as_ptr(),
                stream.as_raw(),
                tensors.as_ptr() as *const sys::kaio_tensor,
                tensors.len(),
                scalars.as_ptr(),
                scalars.len(),
            )
        })
    }

    /// Reports and clears the device-side bounds flag: OUT_OF_BOUNDS names
    /// the first read outside its view since the last check. Synchronise the
    /// kernel's streams first.
    pub fn check(&mut self) -> Result<()> {
        check(unsafe { sys::kaio_lang_kernel_check(self.raw.as_ptr()) })
    }

    /// The raw handle, for calls into `kaio_sys`. Borrowed.
    pub fn as_raw(&self) -> *mut sys::kaio_lang_kernel {
        self.raw.as_ptr()
    }
}
