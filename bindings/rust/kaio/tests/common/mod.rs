//! Shared by the integration tests: the fake CUDA driver and its test hooks,
//! and visible skips.
#![allow(dead_code)]

pub mod gpu_env;

use std::ffi::CString;
use std::io::Write;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::{Mutex, MutexGuard, Once};

extern "C" {
    fn dlopen(filename: *const c_char, flag: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}
const RTLD_NOW: c_int = 2;

/// Says why a test did not run, on stderr directly (libtest's capture only
/// covers the print macros, so the line shows in a plain `cargo test`); with
/// KAIO_TEST_SKIP_LOG set (CI), also appends a line there so the run's
/// summary counts the test as skipped rather than passed.
pub fn skip(test: &str, why: &str) {
    let _ = writeln!(std::io::stderr(), "SKIPPED {}: {}", test, why);
    if let Ok(path) = std::env::var("KAIO_TEST_SKIP_LOG") {
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
            let _ = writeln!(f, "rust {}: {}", test, why);
        }
    }
}

/// The fake driver's test hooks (tests/fake_cuda/README.md).
#[derive(Copy, Clone)]
pub struct Fake {
    pub launch_count: unsafe extern "C" fn() -> u64,
    pub last_launch: unsafe extern "C" fn(*mut c_char, usize, *mut u32, *mut u32, *mut u32) -> c_int,
    pub last_launch_param: unsafe extern "C" fn(usize, *mut c_void, usize) -> c_int,
    pub live_allocations: unsafe extern "C" fn() -> u64,
    pub live_modules: unsafe extern "C" fn() -> u64,
    pub live_streams: unsafe extern "C" fn() -> u64,
    pub live_events: unsafe extern "C" fn() -> u64,
}

/// The last recorded launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub name: String,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared: u32,
}

impl Fake {
    pub fn launches(&self) -> u64 {
        unsafe { (self.launch_count)() }
    }
    pub fn last(&self) -> Option<Launch> {
        let mut name = [0 as c_char; 256];
        let (mut grid, mut block, mut shared) = ([0u32; 3], [0u32; 3], 0u32);
        let r = unsafe { (self.last_launch)(name.as_mut_ptr(), name.len(), grid.as_mut_ptr(), block.as_mut_ptr(), &mut shared) };
        if r != 0 {
            return None;
        }
        let bytes: Vec<u8> = name.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        Some(Launch { name: String::from_utf8_lossy(&bytes).into_owned(), grid, block, shared })
    }
    /// Parameter `index` of the last launch, as `size` bytes.
    pub fn param(&self, index: usize, size: usize) -> Result<Vec<u8>, c_int> {
        let mut v = vec![0u8; size];
        let r = unsafe { (self.last_launch_param)(index, v.as_mut_ptr() as *mut c_void, size) };
        if r == 0 {
            Ok(v)
        } else {
            Err(r)
        }
    }
}

static INIT: Once = Once::new();
static FAKE: Mutex<Option<Result<Fake, String>>> = Mutex::new(None);

unsafe fn sym<T: Copy>(lib: *mut c_void, name: &str) -> Result<T, String> {
    let c = CString::new(name).unwrap();
    let p = dlsym(lib, c.as_ptr());
    if p.is_null() {
        Err(format!("the driver has no '{}': LIBKAIO_CUDA_DRIVER is not the fake driver", name))
    } else {
        Ok(std::mem::transmute_copy::<*mut c_void, T>(&p))
    }
}

fn load() -> Result<Fake, String> {
    // LIBKAIO_CUDA_DRIVER from the environment wins; else the fake of the
    // Meson build dir kaio-sys linked against. Set before any kaio call in
    // this process (every test calls fake() first), because libkaio reads it
    // once, at its first driver use.
    let path = match std::env::var("LIBKAIO_CUDA_DRIVER") {
        Ok(p) if !p.is_empty() => p,
        _ => match option_env!("KAIO_TEST_FAKE_DRIVER") {
            Some(p) => {
                std::env::set_var("LIBKAIO_CUDA_DRIVER", p);
                p.to_string()
            }
            None => {
                return Err("LIBKAIO_CUDA_DRIVER is unset and kaio-sys found no Meson build dir with \
                            tests/libkaio_fake_cuda.so (meson setup build -Dtests=enabled): \
                            set LIBKAIO_CUDA_DRIVER=<builddir>/tests/libkaio_fake_cuda.so"
                    .to_string())
            }
        },
    };
    let c = CString::new(path.clone()).map_err(|e| e.to_string())?;
    let lib = unsafe { dlopen(c.as_ptr(), RTLD_NOW) };
    if lib.is_null() {
        return Err(format!("cannot dlopen LIBKAIO_CUDA_DRIVER={}", path));
    }
    unsafe {
        Ok(Fake {
            launch_count: sym(lib, "kaio_fake_launch_count")?,
            last_launch: sym(lib, "kaio_fake_last_launch")?,
            last_launch_param: sym(lib, "kaio_fake_last_launch_param")?,
            live_allocations: sym(lib, "kaio_fake_live_allocations")?,
            live_modules: sym(lib, "kaio_fake_live_modules")?,
            live_streams: sym(lib, "kaio_fake_live_streams")?,
            live_events: sym(lib, "kaio_fake_live_events")?,
        })
    }
}

/// Host tests run one at a time: the fake driver's launch record and live
/// counts are process-wide, so a test reading them must not see another
/// test's launches.
static SERIAL: Mutex<()> = Mutex::new(());

/// The fake driver's hooks, holding the host tests' lock until dropped.
pub struct FakeGuard {
    fake: Fake,
    _serial: MutexGuard<'static, ()>,
}

impl std::ops::Deref for FakeGuard {
    type Target = Fake;
    fn deref(&self) -> &Fake {
        &self.fake
    }
}

/// The fake driver (and the lock), or why the host tests cannot run here.
pub fn fake() -> Result<FakeGuard, String> {
    INIT.call_once(|| {
        *FAKE.lock().unwrap() = Some(load());
    });
    let fake = FAKE.lock().unwrap().clone().unwrap()?;
    // A test that failed while holding the lock poisons it; the next may run.
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    Ok(FakeGuard { fake, _serial: serial })
}

/// `let fake = fake_or_skip!("name");` returns from the test, with a printed
/// reason, when the fake driver is not available.
#[macro_export]
macro_rules! fake_or_skip {
    ($name:expr) => {
        match common::fake() {
            Ok(f) => f,
            Err(why) => {
                common::skip($name, &why);
                return;
            }
        }
    };
}

/// Asserts an error's exact status and that its message has every part.
#[track_caller]
pub fn expect_err<T: std::fmt::Debug>(r: kaio::Result<T>, status: kaio::Status, parts: &[&str]) -> kaio::Error {
    let e = r.expect_err("expected an error");
    assert_eq!(e.status(), status, "wrong status; message: {}", e.message());
    for p in parts {
        assert!(e.message().contains(p), "message lacks {:?}: {}", p, e.message());
    }
    e
}
