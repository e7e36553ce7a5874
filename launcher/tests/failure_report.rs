//! When a rank fails, the summary shows why: the last lines the rank wrote, labelled with
//! its rank and host, unless they were on the terminal already.

mod common;

use std::time::Duration;

use common::*;

const LIMIT: Duration = Duration::from_secs(60);

fn this_host() -> String {
    nix::unistd::gethostname()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// The lines of `job`'s stderr that show line `k` of the probe's numbered stderr lines.
fn shown_lines(job: &Job, rank: usize, k: usize) -> usize {
    let line = format!("[rank {rank}] probe stderr line {k} of 30");
    job.err.iter().filter(|l| **l == line).count()
}

#[test]
fn the_last_twenty_stderr_lines_of_a_failed_rank_are_shown_with_its_rank_and_host() {
    let id = job_id("tail");
    let mut job = Job::start(&[
        "-n",
        "3",
        "--job-id",
        &id,
        "--",
        PROBE,
        "--stderr-then-fail",
        "2:30:3",
    ]);
    let status = job.wait(LIMIT);
    let err = job.stderr_text();
    assert_eq!(status.code(), Some(3), "{err}");
    let header = format!("last 20 line(s) of its stderr, rank 2 on {} ", this_host());
    assert!(err.contains(&header), "no {header:?} in {err}");
    for k in 11..=30 {
        assert_eq!(shown_lines(&job, 2, k), 1, "line {k}: {err}");
    }
    assert_eq!(
        shown_lines(&job, 2, 10),
        0,
        "line 10 is one too many: {err}"
    );
    // The log still has all of them.
    let log = job.run_dir.path().join(&id).join("rank-2.log");
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(log.contains("probe stderr line 1 of 30\n"), "{log}");
}

#[test]
fn output_that_was_on_the_terminal_is_not_repeated() {
    for (rank, extra) in [(0, None), (2, Some("--output-on-all-devices"))] {
        let spec = format!("{rank}:30:3");
        let mut args = vec!["-n", "3"];
        args.extend(extra);
        args.extend(["--", PROBE, "--stderr-then-fail", &spec]);
        let mut job = Job::start(&args);
        let status = job.wait(LIMIT);
        let err = job.stderr_text();
        assert_eq!(status.code(), Some(3), "{err}");
        assert!(
            err.contains(&format!(
                "the output of rank {rank} on {} is on the terminal, see above",
                this_host()
            )),
            "{err}"
        );
        assert!(!err.contains("last 20 line(s)"), "{err}");
        // Once, as the rank wrote it (rank 0 unprefixed unless every rank's output is shown).
        let line = |k| match extra {
            Some(_) => format!("[rank {rank}] probe stderr line {k} of 30"),
            None => format!("probe stderr line {k} of 30"),
        };
        for k in [1, 30] {
            assert_eq!(
                job.err.iter().filter(|l| **l == line(k)).count(),
                1,
                "{err}"
            );
        }
    }
}

/// A run directory of a finished job whose tarantella (`supervisor`) is gone, last
/// changed `age` ago.
fn fake_old_run(root: &std::path::Path, id: &str, supervisor: u32, age: Duration) {
    let dir = root.join(id);
    std::fs::create_dir_all(&dir).unwrap();
    let host = this_host();
    std::fs::write(
        dir.join("job"),
        format!("supervisor={supervisor}\nhost={host}\nssh=\n"),
    )
    .unwrap();
    std::fs::write(dir.join("rank-1.log"), "probe rank=1\n").unwrap();
    // What tarantella marks its run directories with (their own name).
    std::fs::write(dir.join(".tarantella-run"), id).unwrap();
    set_age(&dir, age);
}

fn set_age(dir: &std::path::Path, age: Duration) {
    let when = std::time::SystemTime::now() - age;
    std::fs::File::open(dir)
        .unwrap()
        .set_modified(when)
        .unwrap();
}

#[test]
fn keep_runs_removes_old_run_directories_but_not_this_one_nor_a_running_jobs() {
    let root = TempDir::new("keep-runs");
    // A PID that surely is no tarantella any more.
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    let dead = gone.id();
    for (i, id) in ["old1", "old2", "old3", "old4"].iter().enumerate() {
        fake_old_run(
            root.path(),
            id,
            dead,
            Duration::from_secs(3600 * (5 - i as u64)),
        );
    }
    // A job that still runs, its directory older than all the others.
    let live_id = job_id("keep-live");
    let mut live_cmd = tarantella(root.path());
    live_cmd.args(["-n", "1", "--job-id", &live_id, "--", PROBE, "--sleep"]);
    let mut live = Job::spawn(live_cmd, TempDir::new("unused"));
    live.wait_lines("probe ready", 1, LIMIT);
    set_age(&root.path().join(&live_id), Duration::from_secs(3600 * 10));

    let id = job_id("keep-current");
    let mut cmd = tarantella(root.path());
    cmd.args(["-n", "3", "--keep-runs", "2", "--job-id", &id, "--", PROBE]);
    let mut job = Job::spawn(cmd, TempDir::new("unused"));
    assert!(job.wait(LIMIT).success(), "{}", job.stderr_text());

    let mut left: Vec<String> = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    let mut expected = vec![id.clone(), live_id.clone(), "old4".to_string()];
    expected.sort();
    assert_eq!(
        left, expected,
        "this job, the newest other and the running one stay"
    );
    assert!(root.path().join(&id).join("rank-2.log").is_file());

    signal(live.child.id(), nix::sys::signal::Signal::SIGINT);
    let status = live.wait(LIMIT);
    assert_eq!(status.code(), Some(128 + 2), "{}", live.stderr_text());
}
