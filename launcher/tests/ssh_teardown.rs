//! How ssh ranks end, through a private `sshd` on 127.0.0.1: the teardown's kill reaches a
//! rank that ignores SIGTERM at once, and the status a rank ended with is reported as it was
//! (an exit status above 128 is not a signal). Skipped (with the reason printed) when `sshd`
//! is missing.

mod common;

use std::time::{Duration, Instant};

use common::sshd::*;
use common::*;
use nix::sys::signal::Signal;

const LIMIT: Duration = Duration::from_secs(90);

/// The PIDs the ranks printed as `pid=N`.
fn reported_pids(job: &Job) -> Vec<i32> {
    job.out
        .iter()
        .filter_map(|l| field(l, "pid"))
        .map(|p| p.parse().unwrap())
        .collect()
}

/// SIGTERM to `tarantella` with `--grace 0.2`: the ranks ignore SIGTERM, so the kill after
/// the grace period is what ends them. It must reach them through their wrappers at once;
/// before, the ssh client was killed as the `kill` word went out, the wrapper saw its input
/// end instead, and fell back to its own SIGTERM, 3 s, SIGKILL.
#[test]
fn ssh_ranks_that_ignore_sigterm_are_killed_right_after_the_grace_period() {
    let dir = TempDir::new("ssh-kill");
    let Some(sshd) = loopback_sshd(&dir) else {
        return;
    };
    let hf = hostfile(&dir, "127.0.0.1 slots=2\n");
    let rank = "trap '' TERM; echo pid=$$; exec sleep 60";
    let mut job = ssh_job(
        &sshd,
        &hf,
        &[
            "--output-on-all-devices",
            "--grace",
            "0.2",
            "--",
            "sh",
            "-c",
            rank,
        ],
    );
    job.wait_lines("pid=", 2, LIMIT);
    let pids = reported_pids(&job);
    let signalled = Instant::now();
    signal(job.child.id(), Signal::SIGTERM);
    // The fallback path this test tells apart takes 3 s at least (its `sleep 3`); the
    // kill takes the grace, up to a second of the client's, and the machine's load.
    let left = wait_dead(&pids, Duration::from_millis(2700));
    let took = signalled.elapsed();
    for &pid in &left {
        signal(pid as u32, Signal::SIGKILL);
    }
    let status = job.wait(LIMIT);
    assert_eq!(
        left,
        Vec::<i32>::new(),
        "ranks still alive {took:?} after SIGTERM to tarantella (grace 0.2 s): {}",
        job.stderr_text()
    );
    assert_eq!(status.code(), Some(128 + 15), "{}", job.stderr_text());
}

/// Runs `sh -c RANK` as the one rank of an ssh job; returns its exit status and stderr.
fn one_ssh_rank(sshd: &Sshd, dir: &TempDir, rank: &str) -> (Option<i32>, String) {
    let hf = hostfile(dir, "127.0.0.1 slots=1\n");
    let mut job = ssh_job(sshd, &hf, &["--", "sh", "-c", rank]);
    let status = job.wait(LIMIT);
    (status.code(), job.stderr_text())
}

/// A remote rank that exits with status 130 by itself is reported with that status, not as
/// killed by SIGINT (the remote shell's `$?` reads 128 + N for signal N, the same number);
/// a rank that is killed by SIGTERM is reported as killed.
#[test]
fn an_ssh_ranks_exit_status_above_128_is_not_taken_for_a_signal() {
    let dir = TempDir::new("ssh-status");
    let Some(sshd) = loopback_sshd(&dir) else {
        return;
    };
    let (code, err) = one_ssh_rank(&sshd, &dir, "exit 130");
    assert_eq!(code, Some(130), "{err}");
    assert!(
        err.contains("rank 0 on 127.0.0.1 exited with status 130"),
        "{err}"
    );
    assert!(!err.contains("signal"), "{err}");

    let (code, err) = one_ssh_rank(&sshd, &dir, "kill -TERM $$; sleep 5");
    assert_eq!(code, Some(128 + 15), "{err}");
    assert!(
        err.contains("rank 0 on 127.0.0.1 was killed by signal 15 (SIGTERM)"),
        "{err}"
    );
}
