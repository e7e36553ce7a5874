//! Exports the weak `gaspi_*` aliases of the `pgaspi_*` functions (see `weak_alias!` in
//! `src/lib.rs`) from `libgaspi.so`: rustc's version script exports only what Rust code
//! defines, and the aliases are defined in assembly. GNU ld merges this script with rustc's.

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/exports.map");
    }
    println!("cargo:rerun-if-changed=exports.map");
    println!("cargo:rerun-if-changed=build.rs");
}
