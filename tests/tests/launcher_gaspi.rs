//! The real launcher starting real gaspi programs: 1 to 5 ranks, over shared memory and TCP,
//! and a program with its own `tracing` subscriber under the launcher's log settings.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::Duration;

fn target_dir() -> PathBuf {
    // .../target/<profile>/deps/<this test> → .../target/<profile>
    std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Runs the built `tarantella` with `args`, then `program`; returns its status, stdout and
/// stderr. Killed (and the test failed) when it overruns 90 s.
fn tarantella(args: &[&str], program: &Path) -> (ExitStatus, String, String) {
    let tarantella = target_dir().join("tarantella");
    assert!(
        tarantella.exists() && program.exists(),
        "the launcher binary is built by `cargo test --workspace`"
    );
    let mut child = Command::new(&tarantella)
        .args(args)
        .arg("--")
        .arg(program)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Bounded: the launcher's own rendezvous timeout is 30 s; kill it if it overruns.
    let pid = child.id();
    let out = {
        let (tx, rx) = std::sync::mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            let mut o = String::new();
            let mut e = String::new();
            use std::io::Read;
            let mut so = stdout;
            let mut se = stderr;
            let _ = so.read_to_string(&mut o);
            let _ = se.read_to_string(&mut e);
            let _ = tx.send((o, e));
        });
        match rx.recv_timeout(Duration::from_secs(90)) {
            Ok(v) => v,
            Err(_) => {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
                panic!("tarantella {args:?} did not finish in 90 s");
            }
        }
    };
    let status = child.wait().unwrap();
    (status, out.0, out.1)
}

fn run(n: u16, transport: &str) {
    let program = PathBuf::from(env!("CARGO_BIN_EXE_hello_ring"));
    let n_arg = n.to_string();
    let args = [
        "-n",
        &n_arg,
        "--output-on-all-devices",
        "--transport",
        transport,
        "--init-timeout",
        "30",
    ];
    let (status, stdout, stderr) = tarantella(&args, &program);
    let out = (stdout, stderr);
    assert!(
        status.success(),
        "status {status:?}\nstdout:\n{}\nstderr:\n{}",
        out.0,
        out.1
    );
    for r in 0..n {
        let line = format!(
            "rank {r}/{n}: token ring ok, sum of ranks = {}",
            (0..u64::from(n)).sum::<u64>()
        );
        assert!(
            out.0.contains(&line),
            "missing {line:?} in\n{}\n{}",
            out.0,
            out.1
        );
    }
}

#[test]
fn one_to_five_ranks_over_shm() {
    for n in 1..=5 {
        run(n, "shm");
    }
}

#[test]
fn three_ranks_over_tcp() {
    run(3, "tcp");
}

/// `--log-level debug` sets `GASPI_LOG` (and `TNT_LOG`) on the ranks; a program that installs
/// its own global subscriber after `Context::init` must still run (it panicked with "a
/// global default trace dispatcher has already been set" while the library installed one).
#[test]
fn a_program_with_its_own_subscriber_runs_under_the_launchers_log_level() {
    let program = PathBuf::from(env!("CARGO_BIN_EXE_own_subscriber"));
    let args = [
        "-n",
        "2",
        "--log-level",
        "debug",
        "--log-on-all-devices",
        "--output-on-all-devices",
        "--init-timeout",
        "30",
    ];
    let (status, stdout, stderr) = tarantella(&args, &program);
    assert!(
        status.success(),
        "status {status:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for r in 0..2 {
        let line = format!("rank {r}: GASPI_LOG=debug, own subscriber installed after init");
        assert!(
            stdout.contains(&line),
            "missing {line:?} in\n{stdout}\n{stderr}"
        );
    }
    // The program's subscriber writes its own event (so it is the one in charge).
    assert!(
        stderr.contains("the application's own subscriber is in charge"),
        "{stderr}"
    );
}
