//! Finds libkaio, with the standard library only. In order:
//!
//! 1. `KAIO_LIB_DIR`: a directory holding `libkaio.so` (or `libkaio.a` with
//!    `KAIO_STATIC=1`); `KAIO_INCLUDE_DIR` optionally names the headers.
//! 2. `KAIO_BUILD_DIR`: a Meson build directory of libkaio, when set.
//! 3. The `pkg-config` binary (or `$PKG_CONFIG`): `pkg-config --libs kaio`,
//!    honouring `PKG_CONFIG_PATH`; `<builddir>/meson-uninstalled` works too.
//!    Its version must be 0.1.x, the ABI these declarations describe.
//! 4. The Meson build directory `build/` at the root of this repository
//!    (`../../../build` from this crate), if it holds `src/libkaio.so`.
//!
//! Otherwise the build fails with a message saying what to set. An rpath to the
//! library's directory is emitted so this crate's tests run without
//! `LD_LIBRARY_PATH`; dependents get the directory as `DEP_KAIO_LIB_DIR` (the
//! `kaio` crate's build script turns it into an rpath for its own tests).
//!
//! Air-gapped or unusual setups can skip this script entirely with Cargo's
//! override, in `.cargo/config.toml`:
//!
//! ```toml
//! [target.x86_64-unknown-linux-gnu.kaio]
//! rustc-link-search = ["/opt/kaio/lib"]
//! rustc-link-lib = ["kaio"]
//! ```
use std::env;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The ABI these declarations were written against: major.minor must match
/// (the soname carries the minor while 0.x), the patch may be newer.
const ABI_MAJOR: u32 = 0;
const ABI_MINOR: u32 = 1;

const ENV_VARS: &[&str] = &[
    "KAIO_LIB_DIR",
    "KAIO_INCLUDE_DIR",
    "KAIO_STATIC",
    "KAIO_BUILD_DIR",
    "PKG_CONFIG",
    "PKG_CONFIG_PATH",
    "PKG_CONFIG_LIBDIR",
    "PKG_CONFIG_SYSROOT_DIR",
];

struct Found {
    how: String,
    /// Directory of libkaio itself (rpath, metadata).
    lib_dir: PathBuf,
    /// Extra `-L` directories (pkg-config may give several).
    search_dirs: Vec<PathBuf>,
    /// `(kind, name)` for `cargo:rustc-link-lib`.
    libs: Vec<(&'static str, String)>,
    include_dirs: Vec<PathBuf>,
    /// The fake CUDA driver of a Meson build dir, for tests.
    fake_driver: Option<PathBuf>,
}

fn var(name: &str) -> Option<OsString> {
    env::var_os(name).filter(|v| !v.is_empty())
}

fn want_static() -> bool {
    match env::var("KAIO_STATIC") {
        Ok(v) => matches!(v.as_str(), "1" | "true" | "yes" | "on"),
        Err(_) => false,
    }
}

fn lib_file(static_: bool) -> &'static str {
    if static_ {
        "libkaio.a"
    } else if cfg!(target_os = "macos") {
        "libkaio.dylib"
    } else {
        "libkaio.so"
    }
}

/// The libs to link for libkaio itself, static or not. A static libkaio needs
/// the C++ runtime, libdl and pthreads (its `Libs.private`).
fn kaio_libs(static_: bool) -> Vec<(&'static str, String)> {
    if static_ {
        vec![
            ("static", "kaio".to_string()),
            ("dylib", "stdc++".to_string()),
            ("dylib", "dl".to_string()),
            ("dylib", "pthread".to_string()),
        ]
    } else {
        vec![("dylib", "kaio".to_string())]
    }
}

fn from_lib_dir(static_: bool) -> Option<Found> {
    let dir = PathBuf::from(var("KAIO_LIB_DIR")?);
    if !dir.join(lib_file(static_)).exists() {
        panic!(
            "kaio-sys: KAIO_LIB_DIR is {} but it holds no {}{}. Point it at the directory \
             containing libkaio (e.g. <meson builddir>/src or <prefix>/lib/<triple>).",
            dir.display(),
            lib_file(static_),
            if static_ { " (KAIO_STATIC is set)" } else { "" }
        );
    }
    let include_dirs = var("KAIO_INCLUDE_DIR").map(|d| vec![PathBuf::from(d)]).unwrap_or_default();
    Some(Found {
        how: format!("KAIO_LIB_DIR={}", dir.display()),
        lib_dir: dir.clone(),
        search_dirs: vec![dir],
        libs: kaio_libs(static_),
        include_dirs,
        fake_driver: None,
    })
}

/// The source directory of a Meson build dir, from meson-info.json.
fn meson_source_dir(build: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(build.join("meson-info").join("meson-info.json")).ok()?;
    let key = "\"source\": \"";
    let start = text.find(key)? + key.len();
    let end = text[start..].find('"')? + start;
    Some(PathBuf::from(&text[start..end]))
}

fn from_meson_build_dir(build: &Path, static_: bool, how: String) -> Option<Found> {
    let lib_dir = build.join("src");
    if !lib_dir.join(lib_file(static_)).exists() {
        return None;
    }
    let mut include_dirs = vec![build.join("include")];
    if let Some(src) = meson_source_dir(build) {
        include_dirs.push(src.join("include"));
    }
    let fake = build.join("tests").join("libkaio_fake_cuda.so");
    Some(Found {
        how,
        lib_dir: lib_dir.clone(),
        search_dirs: vec![lib_dir],
        libs: kaio_libs(static_),
        include_dirs,
        fake_driver: if fake.exists() { Some(fake) } else { None },
    })
}

fn from_build_dir_env(static_: bool) -> Option<Found> {
    let dir = PathBuf::from(var("KAIO_BUILD_DIR")?);
    let found = from_meson_build_dir(&dir, static_, format!("KAIO_BUILD_DIR={}", dir.display()));
    if found.is_none() {
        panic!(
            "kaio-sys: KAIO_BUILD_DIR is {} but {} does not exist. Build libkaio there first \
             (meson setup {0} && ninja -C {0}){}.",
            dir.display(),
            dir.join("src").join(lib_file(static_)).display(),
            if static_ { " with -Ddefault_library=static or both" } else { "" }
        );
    }
    found
}

fn pkg_config(args: &[&str]) -> Result<String, String> {
    let program = var("PKG_CONFIG").unwrap_or_else(|| OsString::from("pkg-config"));
    let out = Command::new(&program)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {}: {}", program.to_string_lossy(), e))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        return Err(format!("`{} {}` failed: {}", program.to_string_lossy(), args.join(" "), err));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn from_pkg_config(static_: bool, tried: &mut Vec<String>) -> Option<Found> {
    let version = match pkg_config(&["--modversion", "kaio"]) {
        Ok(v) => v,
        Err(e) => {
            tried.push(format!("pkg-config: {}", e));
            return None;
        }
    };
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(u32::MAX));
    let (major, minor) = (parts.next().unwrap_or(u32::MAX), parts.next().unwrap_or(u32::MAX));
    if major != ABI_MAJOR || minor != ABI_MINOR {
        let msg = format!(
            "pkg-config found kaio {} but kaio-sys {} declares the {}.{} ABI",
            version,
            env::var("CARGO_PKG_VERSION").unwrap_or_default(),
            ABI_MAJOR,
            ABI_MINOR
        );
        println!("cargo:warning={}", msg);
        tried.push(msg);
        return None;
    }
    let mut libs_args = vec!["--libs", "kaio"];
    if static_ {
        libs_args.insert(0, "--static");
    }
    let libs = match pkg_config(&libs_args) {
        Ok(v) => v,
        Err(e) => {
            tried.push(format!("pkg-config: {}", e));
            return None;
        }
    };
    let mut search_dirs = Vec::new();
    let mut link = Vec::new();
    for flag in libs.split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-L") {
            search_dirs.push(PathBuf::from(dir));
        } else if let Some(name) = flag.strip_prefix("-l") {
            let kind = if static_ && name == "kaio" { "static" } else { "dylib" };
            link.push((kind, name.to_string()));
        } else if flag == "-pthread" {
            link.push(("dylib", "pthread".to_string()));
        }
    }
    if !link.iter().any(|(_, n)| n == "kaio") {
        link.insert(0, (if static_ { "static" } else { "dylib" }, "kaio".to_string()));
    }
    let lib_dir = search_dirs
        .iter()
        .find(|d| d.join(lib_file(static_)).exists())
        .cloned()
        .or_else(|| pkg_config(&["--variable=libdir", "kaio"]).ok().map(PathBuf::from))
        .unwrap_or_default();
    let include_dirs = pkg_config(&["--cflags-only-I", "kaio"])
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|f| f.strip_prefix("-I").map(PathBuf::from))
        .collect();
    // An uninstalled Meson build (<builddir>/meson-uninstalled) keeps its
    // fake driver next to src/.
    let fake = lib_dir.parent().map(|b| b.join("tests").join("libkaio_fake_cuda.so"));
    Some(Found {
        how: format!("pkg-config (kaio {})", version),
        lib_dir,
        search_dirs,
        libs: link,
        include_dirs,
        fake_driver: fake.filter(|f| f.exists()),
    })
}

fn main() {
    for v in ENV_VARS {
        println!("cargo:rerun-if-env-changed={}", v);
    }
    println!("cargo:rerun-if-changed=build.rs");

    let static_ = want_static();
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let default_build = manifest.join("..").join("..").join("..").join("build");
    let mut tried = vec![
        "KAIO_LIB_DIR: unset".to_string(),
        "KAIO_BUILD_DIR: unset".to_string(),
    ];

    let found = from_lib_dir(static_)
        .or_else(|| from_build_dir_env(static_))
        .or_else(|| from_pkg_config(static_, &mut tried))
        .or_else(|| {
            let dir = default_build.canonicalize().unwrap_or_else(|_| default_build.clone());
            let found = from_meson_build_dir(&dir, static_, format!("the Meson build dir {}", dir.display()));
            if found.is_none() {
                tried.push(format!("{}: no src/{}", dir.display(), lib_file(static_)));
            }
            found
        });

    let found = match found {
        Some(f) => f,
        None => panic!(
            "\n\nkaio-sys: cannot find libkaio{}.\nTried:\n  - {}\n\nDo one of these:\n  \
             - build it in the repository: `meson setup build && ninja -C build` at the root \
             (then this crate finds build/ by itself);\n  \
             - KAIO_BUILD_DIR=/path/to/meson/builddir;\n  \
             - KAIO_LIB_DIR=/dir/with/libkaio.so (plus KAIO_INCLUDE_DIR=/dir/with/kaio/kaio.h; \
             KAIO_STATIC=1 links libkaio.a);\n  \
             - PKG_CONFIG_PATH=<prefix>/lib/<triple>/pkgconfig after `meson install`, or \
             <builddir>/meson-uninstalled.\n\n",
            if static_ { " (static, KAIO_STATIC=1)" } else { "" },
            tried.join("\n  - ")
        ),
    };

    println!("cargo:found_by={}", found.how);
    for dir in &found.search_dirs {
        println!("cargo:rustc-link-search=native={}", dir.display());
    }
    for (kind, name) in &found.libs {
        println!("cargo:rustc-link-lib={}={}", kind, name);
    }
    let unix = env::var("CARGO_CFG_TARGET_FAMILY").map(|f| f == "unix").unwrap_or(false);
    if !static_ && unix && !found.lib_dir.as_os_str().is_empty() {
        // For this crate's tests and examples; not passed on to dependents.
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", found.lib_dir.display());
    }
    // Metadata for dependents' build scripts: DEP_KAIO_LIB_DIR, ...
    println!("cargo:lib_dir={}", found.lib_dir.display());
    println!("cargo:static={}", if static_ { "1" } else { "0" });
    let includes = env::join_paths(&found.include_dirs).unwrap_or_default();
    println!("cargo:include={}", includes.to_string_lossy());
    println!("cargo:rustc-env=KAIO_SYS_INCLUDE_DIRS={}", includes.to_string_lossy());
    if let Some(fake) = &found.fake_driver {
        println!("cargo:fake_driver={}", fake.display());
    }
}
