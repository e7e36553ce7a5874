//! `--heartbeat-timeout`: a rank that stops making progress (SIGSTOP: its kernel still
//! acknowledges TCP) ends the job within a bounded time, and the failure report names that
//! rank, not the first of its peers to give up on it.

mod common;

use std::time::{Duration, Instant};

use common::*;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// SIGKILLs the stopped rank when the test ends, whatever happened (a stopped process
/// ignores the SIGTERM of its parent's death until it is continued).
struct KillOnDrop(Vec<i32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for pid in &self.0 {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
        }
    }
}

fn this_host() -> String {
    nix::unistd::gethostname()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

#[test]
fn a_stopped_rank_ends_the_job_and_the_report_names_it() {
    let id = job_id("heartbeat");
    let start = Instant::now();
    let mut job = Job::start(&[
        "-n",
        "3",
        "--job-id",
        &id,
        "--heartbeat-timeout",
        "1",
        "--grace",
        "1",
        "--output-on-all-devices",
        "--",
        PROBE,
        "--gaspi-stop",
        "1",
    ]);
    let first = job.wait_lines("probe rank=1 ", 1, Duration::from_secs(60));
    let pid: i32 = field(&first[0], "pid").unwrap().parse().unwrap();
    let _stopped = KillOnDrop(vec![pid]);
    let status = job.wait(Duration::from_secs(60));
    let took = start.elapsed();
    let err = job.stderr_text();
    assert!(!status.success(), "{err}");
    // Found within the timeout and a quarter, then torn down within the grace period.
    assert!(took < Duration::from_secs(20), "took {took:?}: {err}");
    let report = job
        .err
        .iter()
        .find(|l| l.contains(&format!("job {id} failed: ")))
        .unwrap_or_else(|| panic!("no failure report: {err}"));
    assert!(
        report.contains(&format!(
            "failed: rank 1 on {} stopped making progress",
            this_host()
        )),
        "{report}"
    );
    assert!(
        report.contains("first to notice: rank 0 on")
            || report.contains("first to notice: rank 2 on"),
        "{report}"
    );
    // The survivors' own error names rank 1 too.
    assert!(err.contains("probe: barrier: rank 1 failed ("), "{err}");
}
