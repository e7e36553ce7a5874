//! The real launcher starting a real gaspi program: 1 to 5 ranks, over shared memory and TCP.

use std::path::PathBuf;
use std::process::Command;
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

fn run(n: u16, transport: &str) {
    let tarantella = target_dir().join("tarantella");
    let program = PathBuf::from(env!("CARGO_BIN_EXE_hello_ring"));
    assert!(
        tarantella.exists() && program.exists(),
        "the launcher binary is built by `cargo test --workspace`"
    );
    let mut child = Command::new(&tarantella)
        .args([
            "-n",
            &n.to_string(),
            "--output-on-all-devices",
            "--transport",
            transport,
            "--timeout",
            "30",
            "--",
        ])
        .arg(&program)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Bounded: the launcher's own rendezvous timeout is 30 s; kill it if it overruns.
    let pid = child.id();
    let guard = std::thread::spawn(move || {
        std::thread::park_timeout(Duration::from_secs(90));
    });
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
                panic!("tarantella -n {n} did not finish in 90 s");
            }
        }
    };
    let status = child.wait().unwrap();
    guard.thread().unpark();
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
