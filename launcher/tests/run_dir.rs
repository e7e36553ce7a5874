//! A run directory that fails under a running job: a rank's PID that cannot be recorded ends
//! the start like any other start failure, and the ranks started so far are stopped.

mod common;

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::Duration;

use common::*;
use nix::sys::signal::Signal;
use nix::sys::stat::Mode;

const LIMIT: Duration = Duration::from_secs(60);

/// The processes that carry job `id` in their environment (`TARANTELLA_JOB_ID`, which
/// tarantella gives every rank).
fn processes_of_job(id: &str) -> Vec<i32> {
    let mark = format!("{}={id}", tnt_env::JOB_ID);
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == mark.as_bytes()))
        })
        .filter(|&pid| alive(pid))
        .collect()
}

/// Opens the FIFO at `path` for reading without waiting for a writer.
fn open_reader(path: &Path) -> File {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .unwrap()
}

/// The PID file and rank 1's log are FIFOs the test controls: rank 0 starts and its PID is
/// recorded, then, with rank 0 running (and ignoring SIGTERM, so that only the teardown's
/// SIGKILL ends it), the PID file loses its reader and rank 1's log gets one. Writing rank
/// 1's PID then fails (EPIPE): tarantella must stop ranks 0 and 1 and report the error.
/// Before, the error returned before either was torn down, and rank 0 outlived it.
#[test]
fn ranks_started_before_a_pid_record_fails_are_stopped() {
    let run = TempDir::new("record");
    let id = job_id("record");
    let dir = run.path().join(&id);
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["pids", "rank-1.log"] {
        nix::unistd::mkfifo(&dir.join(f), Mode::S_IRUSR | Mode::S_IWUSR).unwrap();
    }
    let pids_reader = open_reader(&dir.join("pids"));
    let mut cmd = tarantella(run.path());
    cmd.args(["-n", "2", "--job-id", &id, "--grace", "0.2", "--"])
        .args(["sh", "-c", "trap '' TERM; echo ready pid=$$; exec sleep 60"]);
    let mut job = Job::spawn(cmd, run);
    // Rank 0 runs and ignores SIGTERM; tarantella waits to open rank 1's log.
    let ready = job.wait_lines("ready", 1, LIMIT);
    let rank0: i32 = field(&ready[0], "pid").unwrap().parse().unwrap();
    drop(pids_reader);
    let _log_reader = open_reader(&dir.join("rank-1.log"));
    let status = job.wait(LIMIT);
    let left = wait_dead(&[rank0], Duration::from_secs(5));
    let mut others = processes_of_job(&id);
    for &pid in left.iter().chain(&others) {
        signal(pid as u32, Signal::SIGKILL);
    }
    others.retain(|p| *p != rank0);
    let err = job.stderr_text();
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(
        err.contains("tarantella: error: cannot record the PID of rank 1 in "),
        "{err}"
    );
    assert_eq!(left, Vec::<i32>::new(), "rank 0 outlived tarantella: {err}");
    assert_eq!(
        others,
        Vec::<i32>::new(),
        "processes of the job left: {err}"
    );
}
