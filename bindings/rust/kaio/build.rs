//! Passes kaio-sys's findings to this crate's own tests (std only):
//! an rpath to libkaio's directory, so `cargo test` runs without
//! LD_LIBRARY_PATH, and the fake CUDA driver of a Meson build dir, which the
//! host tests use when LIBKAIO_CUDA_DRIVER is unset. Neither reaches crates
//! that depend on `kaio`: an application sets its own rpath (or installs
//! libkaio where the loader looks).
use std::env;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let unix = env::var("CARGO_CFG_TARGET_FAMILY").map(|f| f == "unix").unwrap_or(false);
    let static_ = env::var("DEP_KAIO_STATIC").map(|s| s == "1").unwrap_or(false);
    if let Ok(dir) = env::var("DEP_KAIO_LIB_DIR") {
        if unix && !static_ && !dir.is_empty() {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
        }
    }
    if let Ok(fake) = env::var("DEP_KAIO_FAKE_DRIVER") {
        println!("cargo:rustc-env=KAIO_TEST_FAKE_DRIVER={}", fake);
    }
}
