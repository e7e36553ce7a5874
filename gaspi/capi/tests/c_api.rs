//! The C test suite: the programs of `tests/c/` compiled with `cc` against libgaspi and run
//! as real multi-process jobs (1-4 ranks over TCP and shared memory), by the job runner, by
//! the `tarantella` launcher (its binary, built by cargo) and with only the reference implementation's variables.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use common::{assert_all_ok, compile, lib_dir, report, run_all, Link};
use rt::env::TransportChoice;
use rt::testing::{Job, JobOutcome};

const JOB_TIMEOUT: Duration = Duration::from_secs(90);

fn job(program: &std::path::Path, n: u16, t: TransportChoice) -> JobOutcome {
    let mut job = Job::new(n, program);
    job.transport = t;
    job.timeout = JOB_TIMEOUT;
    job.run()
}

fn api_all(n: u16, t: TransportChoice) {
    let exe = compile("api_all", Link::Shared, &format!("{t}{n}"), &[]);
    let out = job(&exe, n, t);
    out.assert_success();
    for r in &out.ranks {
        let want = format!("[Rank {:4}]: api_all ok on {n} ranks", r.rank);
        assert!(r.stdout.contains(&want), "{}", out.report());
    }
}

#[test]
fn api_all_1_rank() {
    api_all(1, TransportChoice::Auto);
}

#[test]
fn api_all_tcp_2() {
    api_all(2, TransportChoice::Tcp);
}

#[test]
fn api_all_tcp_3() {
    api_all(3, TransportChoice::Tcp);
}

#[test]
fn api_all_tcp_4() {
    api_all(4, TransportChoice::Tcp);
}

#[test]
fn api_all_shm_2() {
    api_all(2, TransportChoice::Shm);
}

#[test]
fn api_all_shm_3() {
    api_all(3, TransportChoice::Shm);
}

#[test]
fn api_all_shm_4() {
    api_all(4, TransportChoice::Shm);
}

#[test]
fn error_paths_1_rank() {
    let exe = compile("errors", Link::Shared, "1", &[]);
    let out = job(&exe, 1, TransportChoice::Auto);
    out.assert_success();
    assert!(
        out.ranks[0].stdout.contains("errors ok"),
        "{}",
        out.report()
    );
}

#[test]
fn error_paths_2_ranks_tcp() {
    let exe = compile("errors", Link::Shared, "tcp2", &[]);
    job(&exe, 2, TransportChoice::Tcp).assert_success();
}

#[test]
fn proc_kill_terminates_the_target() {
    let exe = compile("kill", Link::Shared, "2", &[]);
    let out = job(&exe, 2, TransportChoice::Tcp);
    assert!(!out.timed_out, "{}", out.report());
    let r0 = out.ranks[0].status.expect("rank 0 finished");
    let r1 = out.ranks[1].status.expect("rank 1 finished");
    assert!(r0.success(), "{}", out.report());
    assert_eq!(
        r1.signal(),
        Some(9),
        "rank 1 must die of SIGKILL\n{}",
        out.report()
    );
}

/// SIGTERM in a C program: the default disposition still kills the rank (after its
/// shared-memory files are unlinked), a handler installed before `gaspi_proc_init` still
/// runs, an ignored SIGTERM stays ignored (`tests/c/signals.c`).
#[test]
fn sigterm_unlinks_and_keeps_the_programs_disposition() {
    let exe = compile("signals", Link::Shared, "shm2", &[]);
    for mode in ["default", "handler", "ignore"] {
        let mut j = Job::new(2, &exe);
        j.args = vec![mode.to_string()];
        j.transport = TransportChoice::Shm;
        j.timeout = JOB_TIMEOUT;
        let out = j.run();
        assert!(!out.timed_out, "{mode}: {}", out.report());
        let ok = |r: usize| out.ranks[r].stdout.contains("signals ok on rank");
        let r0 = out.ranks[0].status.expect("rank 0 finished");
        assert!(r0.success() && ok(0), "{mode}: {}", out.report());
        let r1 = out.ranks[1].status.expect("rank 1 finished");
        if mode == "default" {
            assert_eq!(r1.signal(), Some(15), "{mode}: {}", out.report());
        } else {
            assert!(r1.success() && ok(1), "{mode}: {}", out.report());
        }
    }
}

#[test]
fn statically_linked_program_runs() {
    let exe = compile("ring", Link::Static, "static", &[]);
    let out = job(&exe, 3, TransportChoice::Shm);
    out.assert_success();
    assert!(
        out.ranks[2].stdout.contains("[Rank    2]: ring ok: 2 of 3"),
        "{}",
        out.report()
    );
}

/// Names of the functions the headers declare.
fn declared_functions() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for h in ["GASPI.h", "GASPI_Ext.h", "GASPI_Threads.h"] {
        let text = std::fs::read_to_string(common::include_dir().join(h)).unwrap();
        for line in text.lines() {
            let rest = [
                "gaspi_return_t ",
                "gaspi_string_t ",
                "const char *",
                "void ",
            ]
            .iter()
            .find_map(|p| line.strip_prefix(p));
            if let Some(name) = rest.and_then(|r| r.split('(').next()) {
                if !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_') {
                    names.insert(name.to_string());
                }
            }
        }
    }
    names
}

/// `name -> nm type letter` of the symbols with these prefixes that `nm` lists as defined.
fn exported(args: &[&str], lib: &str) -> BTreeMap<String, String> {
    let out = Command::new("nm")
        .args(args)
        .arg(lib_dir().join(lib))
        .output()
        .expect("nm (binutils) is installed with cc");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            match f.as_slice() {
                [_, kind, name]
                    if ["gaspi_", "pgaspi_", "tnt_gaspi_"]
                        .iter()
                        .any(|p| name.starts_with(p)) =>
                {
                    Some((name.to_string(), kind.to_string()))
                }
                _ => None,
            }
        })
        .collect()
}

/// Every declared `gaspi_X` is the weak alias (`W`) of a defined `pgaspi_X` (`T`), the
/// profiling interface of `PGASPI.h`; this implementation's `tnt_gaspi_*` are plain.
fn check_exports(lib: &str, symbols: &BTreeMap<String, String>, exact: bool) {
    let declared = declared_functions();
    let mut want = BTreeMap::new();
    for name in &declared {
        if let Some(rest) = name.strip_prefix("gaspi_") {
            want.insert(name.clone(), "W".to_string());
            want.insert(format!("pgaspi_{rest}"), "T".to_string());
        } else {
            want.insert(name.clone(), "T".to_string());
        }
    }
    if exact {
        assert_eq!(
            &want, symbols,
            "the headers' functions vs the exports of {lib}"
        );
    } else {
        let wrong: Vec<_> = want
            .iter()
            .filter(|(n, k)| symbols.get(*n) != Some(k))
            .collect();
        assert!(
            wrong.is_empty(),
            "missing or of the wrong kind in {lib}: {wrong:?}"
        );
    }
}

#[test]
fn exports_match_the_headers() {
    let declared = declared_functions();
    assert!(
        declared.len() > 90,
        "parsed {} declarations",
        declared.len()
    );
    let shared = exported(&["-D", "--defined-only"], "libgaspi.so");
    check_exports("libgaspi.so", &shared, true);
    let archive = exported(&["--defined-only"], "libgaspi.a");
    check_exports("libgaspi.a", &archive, false);
}

#[test]
fn pkg_config_file_builds_a_program() {
    let dir = lib_dir().join("capi-pc");
    std::fs::create_dir_all(&dir).unwrap();
    let template = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("gaspi.pc.in"),
    )
    .unwrap();
    let pc = template
        .replace("@PREFIX@", &lib_dir().display().to_string())
        .replace("@LIBDIR@", &lib_dir().display().to_string())
        .replace("@INCLUDEDIR@", &common::include_dir().display().to_string())
        .replace("@VERSION@", env!("CARGO_PKG_VERSION"))
        .replace("@NAME@", "gaspi")
        .replace("@LIB@", "gaspi");
    std::fs::write(dir.join("gaspi.pc"), pc).unwrap();
    let flags = Command::new("pkg-config")
        .args(["--cflags", "--libs", "gaspi"])
        .env("PKG_CONFIG_PATH", &dir)
        .output()
        .expect("pkg-config is installed (scripts/setup.sh)");
    assert!(
        flags.status.success(),
        "{}",
        String::from_utf8_lossy(&flags.stderr)
    );
    let flags = String::from_utf8(flags.stdout).unwrap();
    let flags: Vec<&str> = flags.split_whitespace().collect();
    assert!(flags.contains(&"-lgaspi"), "{flags:?}");
    let rpath = format!("-Wl,-rpath,{}", lib_dir().display());
    let mut extra = flags.clone();
    extra.push(&rpath);
    let exe = compile("ring", Link::Shared, "pkgconfig", &extra);
    job(&exe, 2, TransportChoice::Tcp).assert_success();
}

/// Environment of a child process without any job variables from the parent.
fn clean_command(program: &std::path::Path) -> Command {
    let mut cmd = Command::new(program);
    for (k, _) in std::env::vars() {
        if k.starts_with("GASPI_") || k.starts_with("SLURM_") || k.starts_with("TNT_") {
            cmd.env_remove(k);
        }
    }
    cmd
}

#[test]
fn reference_per_rank_variables_start_a_job() {
    let exe = compile("api_all", Link::Shared, "reference", &[]);
    let n = 3;
    let dir = lib_dir().join(format!("capi-ref-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mfile = dir.join("machines");
    std::fs::write(&mfile, "localhost\n".repeat(n)).unwrap();
    // The reference's fixed service port, unless something else on this machine holds it.
    let port_free = std::net::TcpListener::bind(("127.0.0.1", rt::env::DEFAULT_SN_PORT)).is_ok();
    let port = rt::testing::free_port("127.0.0.1".parse().unwrap());
    let cmds = (0..n)
        .map(|r| {
            let mut c = clean_command(&exe);
            c.env("GASPI_RANK", r.to_string())
                .env("GASPI_NRANKS", n.to_string())
                .env("GASPI_MASTER", "localhost")
                .env("GASPI_SOCKET", "0")
                .env("GASPI_MFILE", &mfile);
            if !port_free {
                c.env("GASPI_SN_PORT", port.to_string());
            }
            c
        })
        .collect();
    let procs = run_all(cmds, JOB_TIMEOUT);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_all_ok(&procs);
    assert!(
        procs[1]
            .stdout
            .contains("[Rank    1]: api_all ok on 3 ranks"),
        "{}",
        report(&procs)
    );
}

/// The `tarantella` binary of this test run's profile, built (once per test binary) by
/// cargo as [`lib_dir`] builds libgaspi: the launcher is a program these tests start, as a
/// user would, not a library they link.
fn tarantella() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| {
        let dir = common::profile_dir();
        rt::testing::cargo_build(
            env!("CARGO"),
            &dir,
            &["-p", "tarantella-launcher", "--bin", "tarantella"],
        );
        let exe = dir.join("tarantella");
        assert!(exe.is_file(), "{} was not built", exe.display());
        exe
    })
}

#[test]
fn launcher_starts_c_programs() {
    let exe = compile("ring", Link::Shared, "launcher", &[]);
    for (n, transport) in [(4, "tcp"), (2, "shm")] {
        let markers = lib_dir().join(format!("capi-launch-{}-{transport}", std::process::id()));
        let _ = std::fs::remove_dir_all(&markers);
        std::fs::create_dir_all(&markers).unwrap();
        let mut cmd = clean_command(tarantella());
        cmd.args([
            "-n",
            &n.to_string(),
            "--output-on-all-devices",
            "--transport",
            transport,
            "--init-timeout",
            "30",
            "--",
        ])
        .arg(&exe)
        .env("TNT_RING_MARKERS", &markers);
        let procs = run_all(vec![cmd], JOB_TIMEOUT);
        assert_all_ok(&procs);
        // Every rank ran and saw its left neighbour's value, checked through files: the
        // launcher's forwarding of output is not what is under test here.
        for r in 0..n {
            let got = std::fs::read_to_string(markers.join(format!("rank-{r}")))
                .unwrap_or_else(|e| panic!("rank {r} left no marker: {e}\n{}", report(&procs)));
            let left = (r + n - 1) % n;
            assert_eq!(got.trim(), format!("{r} of {n} got {}", 1000 + left));
        }
        std::fs::remove_dir_all(&markers).unwrap();
    }
}
