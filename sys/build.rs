//! Finds libfabric with pkg-config, compiles the C shim for its `static inline` calls and
//! generates the bindings with bindgen. Every failure names the package that fixes it.

use std::env;
use std::path::PathBuf;
use std::process;

use bindgen::callbacks::{IntKind, ParseCallbacks};

/// Oldest libfabric whose API the bindings and the shim are written against.
const MIN_LIBFABRIC: &str = "1.15";

fn fail(message: &str) -> ! {
    eprintln!("\nerror: {message}\n");
    process::exit(1);
}

/// libfabric's capability and flag macros are 64-bit masks (`1ULL << n`); bindgen would give the
/// small ones a 32-bit type. Make every `FI_` macro a u64 (or i64 if negative) so they combine.
#[derive(Debug)]
struct FlagTypes;

impl ParseCallbacks for FlagTypes {
    fn int_macro(&self, name: &str, value: i64) -> Option<IntKind> {
        if !name.starts_with("FI_") {
            return None;
        }
        Some(if value < 0 {
            IntKind::I64
        } else {
            IntKind::U64
        })
    }
}

fn main() {
    println!("cargo:rerun-if-changed=shim/shim.c");
    println!("cargo:rerun-if-changed=shim/shim.h");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=LIBCLANG_PATH");

    let fabric = match pkg_config::Config::new()
        .atleast_version(MIN_LIBFABRIC)
        .probe("libfabric")
    {
        Ok(lib) => lib,
        Err(err) => fail(&format!(
            "libfabric >= {MIN_LIBFABRIC} with its headers was not found by pkg-config.\n\
             Install it: `apt-get install libfabric-dev pkg-config` (Debian/Ubuntu), \
             or set PKG_CONFIG_PATH to the directory holding libfabric.pc.\n\
             pkg-config said: {err}"
        )),
    };

    let mut shim = cc::Build::new();
    shim.file("shim/shim.c").warnings(true);
    for dir in &fabric.include_paths {
        shim.include(dir);
    }
    shim.compile("circulant_fabric_shim");

    if let Err(err) = clang_sys::load() {
        fail(&format!(
            "libclang, needed by bindgen to read the libfabric headers, could not be loaded.\n\
             Install it: `apt-get install libclang-dev` (Debian/Ubuntu), or set LIBCLANG_PATH \
             to the directory holding libclang.so.\nclang-sys said: {err}"
        ));
    }

    let mut builder = bindgen::Builder::default()
        .header("shim/shim.h")
        .allowlist_function("fi_.*|circ_.*")
        .allowlist_type("fi_.*|fid.*")
        .allowlist_var("FI_.*")
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .derive_default(true)
        .layout_tests(false)
        .parse_callbacks(Box::new(FlagTypes))
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for dir in &fabric.include_paths {
        builder = builder.clang_arg(format!("-I{}", dir.display()));
    }
    let bindings = match builder.generate() {
        Ok(bindings) => bindings,
        Err(err) => fail(&format!(
            "bindgen could not read the libfabric headers ({err}).\nCheck that \
             `apt-get install libfabric-dev libclang-dev` is complete (clang's own headers come \
             with libclang-dev)."
        )),
    };
    let out = PathBuf::from(env::var_os("OUT_DIR").unwrap_or_else(|| fail("OUT_DIR is not set")));
    if let Err(err) = bindings.write_to_file(out.join("bindings.rs")) {
        fail(&format!("cannot write the generated bindings: {err}"));
    }
}
