//! `tarantella` inside a Slurm allocation (single node). Runs only with
//! `TARANTELLA_TEST_SLURM=1` and a working Slurm on this host (`salloc` must succeed: a
//! single-node Slurm with slurmctld and slurmd on this host will do).

mod common;

use std::process::Command;
use std::time::Duration;

use common::*;

const LIMIT: Duration = Duration::from_secs(120);

fn enabled() -> bool {
    if std::env::var("TARANTELLA_TEST_SLURM").as_deref() != Ok("1") {
        println!("SKIPPED: set TARANTELLA_TEST_SLURM=1 to run the Slurm tests");
        return false;
    }
    true
}

fn salloc(args: &[&str]) -> Job {
    let run = TempDir::new("slurm");
    let mut cmd = Command::new("salloc");
    cmd.args(["-N1", "-n2", TARANTELLA])
        .args(args)
        .env(tnt_env::RUN_DIR, run.path())
        .env_remove(tnt_env::SSH);
    Job::spawn(cmd, run)
}

#[test]
fn slurm_ranks_meet_at_the_rendezvous() {
    if !enabled() {
        return;
    }
    let mut job = salloc(&["--output-on-all-devices", "--", PROBE, "--rendezvous"]);
    assert!(job.wait(LIMIT).success(), "{}", job.stderr_text());
    job.assert_rendezvous_ok(2);
    let jobs: Vec<String> = job.out.iter().filter_map(|l| field(l, "job")).collect();
    assert_eq!(jobs.len(), 2);
    assert_eq!(jobs[0], jobs[1]);
}

#[test]
fn slurm_failure_names_the_rank() {
    if !enabled() {
        return;
    }
    let mut job = salloc(&["--", PROBE, "--rendezvous", "--fail-rank", "1:3", "--sleep"]);
    let st = job.wait(LIMIT);
    assert_eq!(st.code(), Some(3), "{}", job.stderr_text());
    assert!(
        job.stderr_text().contains("rank 1 on"),
        "{}",
        job.stderr_text()
    );
}
