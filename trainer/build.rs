//! Builds the C++ shim (autograd hooks; device streams, events and autocast; multi-tensor
//! operations) against the libtorch that `torch-sys` found, links libtorch's CUDA library where
//! it has one, and gives the binaries an rpath to that libtorch so they run without
//! `LD_LIBRARY_PATH` (on another machine, `LD_LIBRARY_PATH` pointing at a torch of the same
//! version overrides it).

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=csrc/hooks.cpp");
    println!("cargo:rerun-if-changed=csrc/streams.cpp");
    println!("cargo:rerun-if-changed=csrc/multi_tensor.cpp");
    println!("cargo:rerun-if-changed=csrc/guarded.h");
    // torch-sys has `links = "tch"` and prints `cargo:libtorch_lib=<dir>`.
    let lib_dir = match env::var("DEP_TCH_LIBTORCH_LIB") {
        Ok(dir) => PathBuf::from(dir),
        Err(_) => {
            println!(
                "cargo:warning=torch-sys did not report a libtorch directory; \
                 run scripts/setup-torch.sh and source scripts/torch-env.sh"
            );
            std::process::exit(1);
        }
    };
    let root = lib_dir
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| lib_dir.clone());
    let include = root.join("include");
    cc::Build::new()
        .cpp(true)
        .pic(true)
        .warnings(false)
        // Line tables only: full debug info of libtorch's templates tripled the compile time
        // (each build of this crate runs this, twice in CI: once for clippy), and a backtrace
        // through the shim needs only lines.
        .debug(false)
        .flag("-g1")
        .include(&include)
        .include(include.join("torch/csrc/api/include"))
        .flag("-std=c++17")
        .flag("-D_GLIBCXX_USE_CXX11_ABI=1")
        .flag("-DGLOG_USE_GLOG_EXPORT")
        .file("csrc/hooks.cpp")
        .file("csrc/streams.cpp")
        .file("csrc/multi_tensor.cpp")
        .compile("tnt_hooks");
    // torch-sys names libtorch_cuda, but nothing references its symbols, so the linker's
    // --as-needed would drop it, and with it the registration of the CUDA device (libtorch
    // would then report no GPU on a GPU machine). Keep it needed where the libtorch has it; the
    // same binary still runs on a machine without a GPU.
    if lib_dir.join("libtorch_cuda.so").exists() {
        println!("cargo:rustc-link-arg=-Wl,--push-state,--no-as-needed,-ltorch_cuda,--pop-state");
    }
    // Every binary, test and example of this crate finds libtorch at run time.
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib_dir.display());
    println!("cargo:rustc-link-search=native={}", lib_dir.display());
}
