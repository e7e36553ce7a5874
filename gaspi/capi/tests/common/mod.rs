//! Shared by the C test suite and the C benchmark runner: builds libgaspi, compiles C
//! programs against it with `cc`, and runs processes with a deadline.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// The SONAME of libgaspi.so (`build.rs`, `install.sh`).
pub const SONAME: &str = "libgaspi.so.1";

/// `target/<profile>`, from this test executable's path (`target/<profile>/deps/<exe>`).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps")
        .to_path_buf()
}

pub fn include_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("include")
}

pub fn c_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/c")
}

/// Builds `libgaspi.so`/`libgaspi.a` (cargo does not build a cdylib for integration tests)
/// with the profile of this test run, once per test binary; returns their directory.
pub fn lib_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = profile_dir();
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args(["build", "-p", "tarantella-gaspi-capi"]);
        if dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("cargo runs");
        assert!(
            status.success(),
            "cargo build -p tarantella-gaspi-capi failed"
        );
        assert!(dir.join("libgaspi.so").exists() && dir.join("libgaspi.a").exists());
        // Programs linked with -lgaspi need the SONAME, libgaspi.so.1 (build.rs), at run
        // time; cargo builds only libgaspi.so, so the link an install makes is made here.
        let soname = dir.join(SONAME);
        if std::fs::read_link(&soname).is_err() {
            let _ = std::fs::remove_file(&soname);
            match std::os::unix::fs::symlink("libgaspi.so", &soname) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => panic!("symlink {}: {e}", soname.display()),
            }
        }
        dir
    })
}

/// How a C program is linked.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Link {
    Shared,
    Static,
}

/// Compiles `tests/c/<name>.c` (strict C99, warnings are errors) against libgaspi into
/// `target/<profile>/capi-c/<name>-<tag>`; `extra` go before the sources.
pub fn compile(name: &str, link: Link, tag: &str, extra: &[&str]) -> PathBuf {
    let lib = lib_dir();
    let include = include_dir().display().to_string();
    let mut pre: Vec<&str> = extra.to_vec();
    pre.extend(["-I", &include]);
    let lib_s = lib.display().to_string();
    let archive = lib.join("libgaspi.a").display().to_string();
    let rpath = format!("-Wl,-rpath,{lib_s}");
    let post: Vec<&str> = match link {
        Link::Shared => vec!["-L", &lib_s, "-lgaspi", &rpath],
        Link::Static => vec![
            &archive,
            "-lpthread",
            "-ldl",
            "-lm",
            "-lrt",
            "-lgcc_s",
            "-lc",
        ],
    };
    compile_with(name, tag, &pre, &post)
}

/// Compiles `tests/c/<name>.c` (strict C99, warnings are errors) into
/// `target/<profile>/capi-c/<name>-<tag>` with `pre` before the source and `post` (libraries)
/// after it, and nothing else: the caller says where headers and libraries are.
pub fn compile_with(name: &str, tag: &str, pre: &[&str], post: &[&str]) -> PathBuf {
    let out_dir = profile_dir().join("capi-c");
    std::fs::create_dir_all(&out_dir).unwrap();
    let exe = out_dir.join(format!("{name}-{tag}"));
    let out = Command::new("cc")
        .args([
            "-std=c99",
            "-O2",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
        ])
        .args(pre)
        .arg("-o")
        .arg(&exe)
        .arg(c_dir().join(format!("{name}.c")))
        .args(post)
        .output()
        .expect("cc is installed (scripts/setup.sh)");
    assert!(
        out.status.success(),
        "compiling {name}.c failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// What one process did.
#[derive(Debug)]
pub struct Proc {
    /// `None` when it was killed at the deadline.
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
}

/// Starts every command, waits for all of them at most `timeout` (then kills the rest),
/// and returns their outcomes in order.
pub fn run_all(cmds: Vec<Command>, timeout: Duration) -> Vec<Proc> {
    let children = cmds
        .into_iter()
        .map(|mut cmd| {
            cmd.stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn")
        })
        .collect();
    let waited = rt::testing::wait_all(children, timeout);
    waited
        .outputs
        .into_iter()
        .map(|output| match output {
            Some(o) => Proc {
                // After the deadline, a process that did not succeed was the kill's.
                status: (!waited.timed_out || o.status.success()).then_some(o.status),
                stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
            },
            None => Proc {
                status: None,
                stdout: String::new(),
                stderr: String::new(),
            },
        })
        .collect()
}

/// A readable account of every process, for failure messages.
pub fn report(procs: &[Proc]) -> String {
    procs
        .iter()
        .enumerate()
        .map(|(i, p)| {
            format!(
                "--- process {i}: {:?}\n[stdout]\n{}\n[stderr]\n{}\n",
                p.status, p.stdout, p.stderr
            )
        })
        .collect()
}

/// Panics with the report unless every process exited 0 in time.
pub fn assert_all_ok(procs: &[Proc]) {
    assert!(
        procs.iter().all(|p| p.status.is_some_and(|s| s.success())),
        "{}",
        report(procs)
    );
}
