//! Exports the weak `gaspi_*` aliases of the `pgaspi_*` functions (see `weak_alias!` in
//! `src/lib.rs`) from `libgaspi.so`: rustc's version script exports only what Rust code
//! defines, and the aliases are defined in assembly, so a second script names them. LLD
//! (rust-lld, the default linker of Rust >= 1.90 on x86_64 Linux, hence the workspace's
//! minimum version) and gold merge the two scripts; GNU ld (bfd) refuses two anonymous
//! version scripts, so a toolchain set to link with bfd needs `-C link-arg=-fuse-ld=lld`.

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/exports.map");
    }
    println!("cargo:rerun-if-changed=exports.map");
    println!("cargo:rerun-if-changed=build.rs");
}
