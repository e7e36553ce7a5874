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
    let left = wait_dead(&pids, Duration::from_secs(2));
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
