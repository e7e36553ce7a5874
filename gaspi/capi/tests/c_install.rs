//! `install.sh` as C and Fortran builds written for GPI-2 use it: a staged install
//! (`DESTDIR` + `PREFIX`) with `libgaspi.so.1.0.0` (SONAME `libgaspi.so.1`, stripped), its
//! symlinks, the GPI-2 names (`libGPI2.so`, `libGPI2.a`), the headers and `GPI2.pc` /
//! `gaspi.pc`; then a C program built with `pkg-config --cflags --libs GPI2` against the
//! staged install runs on 2 ranks with `LD_LIBRARY_PATH` at the installed lib dir.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{compile_with, lib_dir, profile_dir, run_all, SONAME};
use rt::env::TransportChoice;
use rt::testing::Job;

/// Where the .pc files say the library is; nothing is written there (DESTDIR stages).
const PREFIX: &str = "/opt/tnt-gaspi-install-test";
const ABI_VERSION: &str = "1.0.0";
const INSTALL_TIMEOUT: Duration = Duration::from_secs(300);
const JOB_TIMEOUT: Duration = Duration::from_secs(90);

/// A fresh directory for one test, removed when the test passes.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = lib_dir().join(format!("capi-install-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
    /// `$DESTDIR`.
    fn destdir(&self) -> PathBuf {
        self.0.join("stage")
    }
    /// `$DESTDIR$PREFIX/lib`.
    fn lib(&self) -> PathBuf {
        self.destdir().join(&PREFIX[1..]).join("lib")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Runs `install.sh PREFIX` with `DESTDIR` (and `extra_env`) for the profile of this test
/// run, into the libraries `lib_dir()` built; panics with its output unless it succeeds.
fn install(s: &Scratch, extra_env: &[(&str, &str)]) -> String {
    lib_dir();
    let target = profile_dir();
    let profile = if target.file_name().is_some_and(|n| n == "release") {
        "release"
    } else {
        "dev"
    };
    let mut cmd = Command::new("bash");
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("install.sh"))
        .arg(PREFIX)
        .env("DESTDIR", s.destdir())
        .env("PROFILE", profile)
        .env("CARGO", env!("CARGO"))
        .env("CARGO_TARGET_DIR", target.parent().expect("target dir"))
        .env_remove("PREFIX");
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let procs = run_all(vec![cmd], INSTALL_TIMEOUT);
    assert!(
        procs[0].status.is_some_and(|s| s.success()),
        "install.sh failed or ran past {INSTALL_TIMEOUT:?}:\n{}",
        common::report(&procs)
    );
    procs[0].stderr.clone()
}

/// Runs a tool that scripts/setup.sh installs; a missing one fails with a clear message.
fn tool(name: &str, package: &str, args: &[&str], env: &[(&str, &Path)]) -> String {
    let mut cmd = Command::new(name);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = match cmd.output() {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "`{name}` is not installed: this test needs it (apt-get install {package}; \
             scripts/setup.sh installs it)"
        ),
        Err(e) => panic!("running {name}: {e}"),
    };
    assert!(
        out.status.success(),
        "{name} {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn readelf(args: &[&str], file: &Path) -> String {
    let mut a = args.to_vec();
    let f = file.display().to_string();
    a.push(&f);
    tool("readelf", "binutils", &a, &[])
}

/// The SONAME in the dynamic section of `file` (`readelf -d`).
fn soname(file: &Path) -> Option<String> {
    readelf(&["-d"], file).lines().find_map(|l| {
        let l = l.split("(SONAME)").nth(1)?;
        Some(l.split('[').nth(1)?.split(']').next()?.to_string())
    })
}

fn link_target(p: &Path) -> String {
    std::fs::read_link(p)
        .unwrap_or_else(|e| panic!("{} is not a symlink: {e}", p.display()))
        .display()
        .to_string()
}

fn has_symtab(file: &Path) -> bool {
    readelf(&["-S", "-W"], file).contains(" .symtab ")
}

/// Every file of the layout, its symlinks, and the .pc files' contents.
fn check_layout(s: &Scratch) {
    let lib = s.lib();
    let real = format!("libgaspi.so.{ABI_VERSION}");
    assert!(lib.join(&real).is_file(), "{real} is missing");
    assert!(!lib.join(&real).is_symlink());
    assert_eq!(link_target(&lib.join(SONAME)), real);
    assert_eq!(link_target(&lib.join("libgaspi.so")), SONAME);
    assert_eq!(link_target(&lib.join("libGPI2.so")), SONAME);
    assert!(lib.join("libgaspi.a").is_file() && !lib.join("libgaspi.a").is_symlink());
    assert_eq!(link_target(&lib.join("libGPI2.a")), "libgaspi.a");
    // Every link resolves inside the staged lib dir.
    for l in ["libgaspi.so", "libGPI2.so", "libGPI2.a", SONAME] {
        assert!(lib.join(l).exists(), "{l} dangles");
    }
    assert_eq!(soname(&lib.join(&real)).as_deref(), Some(SONAME));
    let include = s.destdir().join(&PREFIX[1..]).join("include");
    for h in ["GASPI.h", "GASPI_Ext.h", "GASPI_Threads.h", "PGASPI.h"] {
        let want = std::fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("include")
                .join(h),
        );
        assert_eq!(std::fs::read(include.join(h)).ok(), want.ok(), "{h}");
    }
    for (pc, l) in [("GPI2", "-lGPI2"), ("gaspi", "-lgaspi")] {
        let text = std::fs::read_to_string(lib.join(format!("pkgconfig/{pc}.pc"))).unwrap();
        assert!(
            text.contains(&format!("\nprefix={PREFIX}\n")),
            "{pc}.pc:\n{text}"
        );
        assert!(
            text.contains(&format!("\nLibs: -L${{libdir}} {l}\n")),
            "{pc}.pc:\n{text}"
        );
        assert!(
            text.contains("\nLibs.private: -lpthread"),
            "{pc}.pc:\n{text}"
        );
        assert!(
            !text.contains(&s.destdir().display().to_string()),
            "{pc}.pc names DESTDIR:\n{text}"
        );
        assert!(
            text.contains(&format!("\nVersion: {}\n", env!("CARGO_PKG_VERSION"))),
            "{pc}.pc:\n{text}"
        );
    }
    // Nothing left aside by an interrupted or repeated install.
    let leftovers: Vec<_> = std::fs::read_dir(&lib)
        .unwrap()
        .chain(std::fs::read_dir(lib.join("pkgconfig")).unwrap())
        .chain(std::fs::read_dir(&include).unwrap())
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn cargo_build_carries_the_soname() {
    assert_eq!(
        soname(&lib_dir().join("libgaspi.so")).as_deref(),
        Some(SONAME)
    );
}

#[test]
fn staged_install_lays_out_soname_gpi2_names_and_pc_files_and_is_idempotent() {
    let s = Scratch::new("layout");
    install(&s, &[]);
    check_layout(&s);
    let lib = s.lib();
    let real = lib.join(format!("libgaspi.so.{ABI_VERSION}"));
    // Stripped, with the exports (and the weak gaspi_* aliases) intact.
    assert!(
        !has_symtab(&real),
        "libgaspi.so.{ABI_VERSION} is not stripped"
    );
    let dynsyms = tool(
        "nm",
        "binutils",
        &["-D", "--defined-only", &real.display().to_string()],
        &[],
    );
    for want in [
        " W gaspi_proc_init",
        " T pgaspi_proc_init",
        " W gaspi_write_notify",
    ] {
        assert!(dynsyms.contains(want), "{want} not in nm -D");
    }
    // Again over the existing install: same layout, files replaced in place.
    install(&s, &[]);
    check_layout(&s);
    assert!(!PathBuf::from(PREFIX).exists(), "wrote outside DESTDIR");
}

#[test]
fn install_works_without_strip() {
    let s = Scratch::new("nostrip");
    let err = install(&s, &[("STRIP", "tnt-no-such-strip")]);
    assert!(err.contains("unstripped"), "{err}");
    check_layout(&s);
    assert!(has_symtab(
        &s.lib().join(format!("libgaspi.so.{ABI_VERSION}"))
    ));
}

/// The shipped library has no fake verbs device (issue 20): the fake's own variables are
/// not in it, while the message that refuses `GASPI_IB_DEVICE=fake` without it is.
#[test]
fn the_installed_library_contains_no_fake_verbs_device() {
    let s = Scratch::new("nofake");
    install(&s, &[]);
    let lib = std::fs::read(s.lib().join(format!("libgaspi.so.{ABI_VERSION}"))).unwrap();
    let has = |needle: &[u8]| lib.windows(needle.len()).any(|w| w == needle);
    assert!(
        has(b"which this build of gaspi does not contain"),
        "the refusal of the fake device is missing: is this the library install.sh built?"
    );
    assert!(
        !has(b"GASPI_IB_FAKE_"),
        "the fake verbs device (feature `fake-verbs`) is in the shipped library"
    );
}

/// A PREFIX with characters that mean something to sed (`&`, `|`, `\`) lands in the .pc
/// files as it is.
#[test]
fn a_prefix_with_sed_metacharacters_is_written_as_it_is() {
    lib_dir();
    let s = Scratch::new("sedprefix");
    let prefix = r"/opt/tnt-a&b|c\d";
    let target = profile_dir();
    let out = Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("install.sh"))
        .arg(prefix)
        .env("DESTDIR", s.destdir())
        .env("NO_BUILD", "1")
        .env(
            "PROFILE",
            if target.file_name().is_some_and(|n| n == "release") {
                "release"
            } else {
                "dev"
            },
        )
        .env("CARGO_TARGET_DIR", target.parent().expect("target dir"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pc = s.destdir().join(&prefix[1..]).join("lib/pkgconfig/GPI2.pc");
    let text = std::fs::read_to_string(&pc).unwrap();
    assert!(
        text.lines().any(|l| l == format!("prefix={prefix}")),
        "{text}"
    );
}

/// `NO_BUILD=1` installs what cargo built earlier without running cargo (a cargo that
/// always fails is given), and names the missing library when there is none.
#[test]
fn no_build_installs_the_earlier_build_and_names_what_is_missing() {
    let s = Scratch::new("nobuild");
    install(&s, &[("NO_BUILD", "1"), ("CARGO", "false")]);
    check_layout(&s);
    let empty = Scratch::new("nobuild-empty");
    let out = Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("install.sh"))
        .arg(PREFIX)
        .env("DESTDIR", empty.destdir())
        .env("NO_BUILD", "1")
        .env("CARGO_TARGET_DIR", &empty.0)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("libgaspi.so is missing") && err.contains("cargo build"),
        "{err}"
    );
}

#[test]
fn install_refuses_a_relative_prefix() {
    let out = Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("install.sh"))
        .arg("relative/prefix")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("absolute"));
}

/// `pkg-config --cflags --libs <pc>` against the staged install, the .pc's prefix resolved
/// with `PKG_CONFIG_SYSROOT_DIR` (or `--define-prefix`).
fn pkg_config_flags(s: &Scratch, pc: &str, define_prefix: bool) -> Vec<String> {
    let pcdir = s.lib().join("pkgconfig");
    let destdir = s.destdir();
    let mut args = vec!["--cflags", "--libs", pc];
    let mut env: Vec<(&str, &Path)> = vec![("PKG_CONFIG_PATH", &pcdir)];
    if define_prefix {
        args.insert(0, "--define-prefix");
    } else {
        env.push(("PKG_CONFIG_SYSROOT_DIR", &destdir));
    }
    let flags = tool("pkg-config", "pkg-config", &args, &env);
    flags.split_whitespace().map(str::to_string).collect()
}

/// Builds `tests/c/<program>.c` with the flags of `<pc>` from the staged install, checks
/// that it needs `libgaspi.so.1`, and runs it on 2 ranks with only `LD_LIBRARY_PATH`
/// pointing at the installed library.
fn build_and_run(pc: &str, lflag: &str, program: &str, define_prefix: bool) {
    let s = Scratch::new(&format!("{pc}-{program}"));
    install(&s, &[]);
    let flags = pkg_config_flags(&s, pc, define_prefix);
    let lib = s.lib().display().to_string();
    assert!(flags.contains(&lflag.to_string()), "{flags:?}");
    assert!(flags.contains(&format!("-L{lib}")), "{flags:?}");
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let exe = compile_with(program, &format!("installed-{pc}"), &[], &flags);
    let dynamic = readelf(&["-d"], &exe);
    assert!(
        dynamic.contains(&format!("Shared library: [{SONAME}]")),
        "{}",
        dynamic
    );
    assert!(
        !dynamic.contains("RPATH") && !dynamic.contains("RUNPATH"),
        "{dynamic}"
    );
    let mut job = Job::new(2, &exe);
    job.transport = TransportChoice::Tcp;
    job.timeout = JOB_TIMEOUT;
    job.env.push(("LD_LIBRARY_PATH".into(), lib));
    let out = job.run();
    out.assert_success();
    for r in &out.ranks {
        assert!(r.stdout.contains(" ok"), "{}", out.report());
    }
}

#[test]
fn gpi2_pc_builds_a_ring_that_runs_from_the_staged_install() {
    build_and_run("GPI2", "-lGPI2", "ring", false);
}

#[test]
fn gaspi_pc_with_define_prefix_builds_api_all_that_runs_from_the_staged_install() {
    build_and_run("gaspi", "-lgaspi", "api_all", true);
}

#[test]
fn static_libs_of_the_pc_file_link_libgpi2_a() {
    let s = Scratch::new("static");
    install(&s, &[]);
    let pcdir = s.lib().join("pkgconfig");
    let libs = tool(
        "pkg-config",
        "pkg-config",
        &["--static", "--libs-only-l", "GPI2"],
        &[("PKG_CONFIG_PATH", &pcdir)],
    );
    let mut flags: Vec<String> = vec![
        "-I".into(),
        s.destdir()
            .join(&PREFIX[1..])
            .join("include")
            .display()
            .to_string(),
        s.lib().join("libGPI2.a").display().to_string(),
    ];
    // -lGPI2 itself is the archive given by path (the linker prefers the .so for -l).
    flags.extend(
        libs.split_whitespace()
            .filter(|l| *l != "-lGPI2")
            .map(str::to_string),
    );
    assert!(flags.iter().any(|f| f == "-lpthread"), "{libs}");
    // The compiler driver picks libgcc's unwinder (libgcc_s, or libgcc_eh for -static).
    assert!(!flags.iter().any(|f| f == "-lgcc_s"), "{libs}");
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let exe = compile_with("ring", "installed-static", &[], &flags);
    let dynamic = readelf(&["-d"], &exe);
    assert!(!dynamic.contains("libgaspi"), "{dynamic}");
    let mut job = Job::new(2, &exe);
    job.transport = TransportChoice::Shm;
    job.timeout = JOB_TIMEOUT;
    job.run().assert_success();
}
