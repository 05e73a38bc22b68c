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

/// Reads a string through a C "copy into buf, report the full length" call:
/// first into `guess` bytes, again at the reported length only when the
/// text did not fit. Returns the text and how many calls it took.
fn copied_text(guess: usize, mut call: impl FnMut(*mut c_char, usize, &mut usize) -> i32) -> Result<(String, usize)> {
    let mut len = 0usize;
    let mut buf = vec![0u8; guess.max(1)];
    check(call(buf.as_mut_ptr() as *mut c_char, buf.len(), &mut len))?;
    let mut calls = 1;
    if len >= buf.len() {
        buf = vec![0u8; len + 1];
        check(call(buf.as_mut_ptr() as *mut c_char, buf.len(), &mut len))?;
        calls += 1;
    }
    buf.truncate(len.min(buf.len() - 1));
    Ok((String::from_utf8_lossy(&buf).into_owned(), calls))
}

/// Room for the PTX of `source`: every call of kaio_lang_compile_ptx
/// compiles, so the first buffer is big enough for any ordinary kernel (a
/// few KiB of PTX for a few lines; at most about 65 bytes of PTX per byte
/// of source, for lines of exp); only past 64 MiB may it take two compiles.
/// Pages never written are never touched.
fn ptx_room(source: &str) -> usize {
    source.len().saturating_mul(128).saturating_add(64 * 1024).min(64 << 20)
}

/// compile_ptx, also saying how many times it called the compiler.
fn compile_ptx_counted(source: &str) -> Result<(String, usize)> {
    let src = c_string(source, "kaio::compile_ptx", "source")?;
    copied_text(ptx_room(source), |buf, cap, len| unsafe {
        sys::kaio_lang_compile_ptx(src.as_ptr(), buf, cap, len)
    })
}

/// Compiles `source` to PTX without a device or driver. A rejected source is
/// KERNEL_SOURCE with `line:col`, the reason and a caret excerpt.
pub fn compile_ptx(source: &str) -> Result<String> {
    compile_ptx_counted(source).map(|(ptx, _)| ptx)
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
        let text = copied_text(64 * 1024, |buf, cap, len| unsafe { sys::kaio_lang_kernel_ptx(k, buf, cap, len) });
        text.map(|(ptx, _)| ptx)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Status;
    use std::ffi::CString;

    /// A C-style copier of `text` that counts its calls and fails on demand.
    fn fake<'a>(text: &'static str, status: i32, calls: &'a mut usize) -> impl FnMut(*mut c_char, usize, &mut usize) -> i32 + 'a {
        move |buf, cap, len| {
            *calls += 1;
            *len = text.len();
            if cap > 0 {
                let n = text.len().min(cap - 1);
                unsafe {
                    ptr::copy_nonoverlapping(text.as_ptr(), buf as *mut u8, n);
                    *buf.add(n) = 0;
                }
            }
            status
        }
    }

    #[test]
    fn copied_text_calls_once_when_the_text_fits_and_twice_only_when_not() {
        let mut calls = 0;
        assert_eq!(copied_text(6, fake("hello", 0, &mut calls)).unwrap(), ("hello".to_string(), 1));
        assert_eq!(calls, 1);
        let mut calls = 0;
        assert_eq!(copied_text(5, fake("hello", 0, &mut calls)).unwrap(), ("hello".to_string(), 2));
        assert_eq!(calls, 2);
        let mut calls = 0;
        let e = copied_text(6, fake("hello", sys::KAIO_ERROR_KERNEL_SOURCE, &mut calls)).unwrap_err();
        assert_eq!((e.status(), calls), (Status::KERNEL_SOURCE, 1));
    }

    #[test]
    fn compile_ptx_compiles_each_source_once() {
        let small = "kernel silu(x: tensor<f16>, out: tensor<f16>) {\n    out = x * sigmoid(x);\n}\n";
        let mut big = String::from("kernel k(x: tensor<f32>, out: tensor<f32>) {\n    let a0 = x;\n");
        for j in 1..400 {
            big += &format!("    let a{} = exp(a{}) * 0.5 + x / (x + 1.0);\n", j, j - 1);
        }
        big += "    out = a399;\n}\n";
        for src in [small, big.as_str()] {
            let (ptx, calls) = compile_ptx_counted(src).unwrap();
            assert!(ptx.contains(".entry"), "{}", ptx);
            assert_eq!(calls, 1, "{} bytes of PTX from {} of source", ptx.len(), src.len());
        }
        // a rejected source: one compile, whose error is the one returned
        let bad = CString::new("kernel k(x: tensor<f32>, out: tensor<f32>) { out = x +; }").unwrap();
        let mut calls = 0;
        let e = copied_text(ptx_room("x"), |buf, cap, len| {
            calls += 1;
            unsafe { sys::kaio_lang_compile_ptx(bad.as_ptr(), buf, cap, len) }
        })
        .unwrap_err();
        assert_eq!((e.status(), calls), (Status::KERNEL_SOURCE, 1), "{}", e);
        assert!(e.message().starts_with("kaio_lang_compile_ptx: 1:"), "{}", e);
    }
}
