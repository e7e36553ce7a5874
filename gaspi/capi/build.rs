//! Exports the weak `gaspi_*` aliases of the `pgaspi_*` functions (see `weak_alias!` in
//! `src/lib.rs`) from `libgaspi.so`: rustc's version script exports only what Rust code
//! defines, and the aliases are defined in assembly, so a second script names them. LLD
//! (rust-lld, the default linker of Rust >= 1.90 on x86_64 Linux, hence the workspace's
//! minimum version) and gold merge the two scripts; GNU ld (bfd) refuses two anonymous
//! version scripts, so a toolchain set to link with bfd needs `-C link-arg=-fuse-ld=lld`.
//!
//! It also gives `libgaspi.so` its SONAME, `libgaspi.so.1` (major version of the C ABI, not
//! of the crate): programs linked with `-lgaspi` (or `-lGPI2`, a symlink in the install)
//! then need `libgaspi.so.1`, which `install.sh` lays out as a symlink to
//! `libgaspi.so.1.0.0`. Bump it with `ABI_VERSION` in `install.sh` on an incompatible change.
//!
//! And it compiles `src/printf.c`, GPI-2's variadic `gaspi_printf`/`gaspi_printf_to` (stable
//! Rust cannot define C variadic functions), linked whole: no Rust code calls them, and the
//! linker would otherwise leave the archive member out of `libgaspi.so`.

/// Kept in step with `ABI_VERSION` in `install.sh` (a test checks both).
const SONAME: &str = "libgaspi.so.1";

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/exports.map");
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{SONAME}");
    }
    cc::Build::new()
        .file("src/printf.c")
        .include("include")
        .flag_if_supported("-std=c99")
        // Strict in the project's own checks (scripts/test.sh sets it); a user's newer
        // compiler with new warnings must not break the library's build.
        .warnings_into_errors(std::env::var_os("TNT_STRICT_C").is_some())
        .link_lib_modifier("+whole-archive")
        .compile("tnt_gaspi_printf");
    println!("cargo:rerun-if-changed=src/printf.c");
    println!("cargo:rerun-if-changed=include");
    println!("cargo:rerun-if-changed=exports.map");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=TNT_STRICT_C");
}
