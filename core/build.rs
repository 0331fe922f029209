//! Generates the PJRT C API bindings from the `pjrt_c_api.h` shipped in the same wheel as the
//! plugin, so the bindings always match the plugin that the runtime loads.

use std::path::PathBuf;

#[path = "src/runtime/locate.rs"]
#[allow(dead_code)]
mod locate;

fn main() {
    println!("cargo:rerun-if-env-changed=XLAPROF_PJRT_HEADER");
    println!("cargo:rerun-if-env-changed=VIRTUAL_ENV");
    println!("cargo:rerun-if-changed=src/runtime/locate.rs");
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let header = match std::env::var_os("XLAPROF_PJRT_HEADER") {
        Some(path) => PathBuf::from(path),
        None => match locate::find_cpu_plugin(std::slice::from_ref(&manifest)) {
            Ok(dir) => dir.header(),
            Err(searched) => {
                eprintln!(
                    "error: pjrt_c_api.h not found: the bindings are generated from the header that \
                     ships with the XLA CPU plugin.\nInstall it with:\n    {}\n\
                     or point XLAPROF_PJRT_HEADER at a pjrt_c_api.h.\nSearched: {searched:?}",
                    locate::INSTALL_HINT
                );
                std::process::exit(1);
            }
        },
    };
    println!("cargo:rerun-if-changed={}", header.display());
    let include_dir = header.parent().map(|p| p.to_path_buf()).unwrap_or_default();
    let bindings = bindgen::Builder::default()
        .header(header.to_string_lossy())
        .clang_arg(format!("-I{}", include_dir.display()))
        .allowlist_item("PJRT_.*")
        .allowlist_function("GetPjrtApi")
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false)
        .generate();
    let bindings = match bindings {
        Ok(b) => b,
        Err(e) => {
            eprintln!(
                "error: bindgen could not read {}: {e}\nbindgen needs libclang: on Debian/Ubuntu \
                 `apt-get install libclang-dev` (scripts/setup.sh does this).",
                header.display()
            );
            std::process::exit(1);
        }
    };
    let out =
        PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo")).join("pjrt_bindings.rs");
    if let Err(e) = bindings.write_to_file(&out) {
        eprintln!("error: cannot write {}: {e}", out.display());
        std::process::exit(1);
    }
}
