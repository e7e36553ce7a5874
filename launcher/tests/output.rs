//! Rank output: every byte a rank writes reaches the console or the rank's log before
//! `tarantella` exits, and a process that keeps a rank's output open cannot hold
//! `tarantella` forever.

mod common;

use std::time::{Duration, Instant};

use common::*;
use nix::sys::signal::Signal;

const LIMIT: Duration = Duration::from_secs(60);
/// What each rank writes right before it exits.
const FLOOD_BYTES: usize = 1 << 20;
/// Every flood line is this long, newline included (as in `tnt-rank-probe`).
const FLOOD_LINE_LEN: usize = 64;

/// Line `index` of rank `rank`'s `--flood` output, without its newline (as the probe
/// writes it).
fn flood_line(rank: usize, index: usize) -> String {
    let line = format!("flood rank={rank} line={index:08} ");
    format!("{line:.<width$}", width = FLOOD_LINE_LEN - 1)
}

/// Checks that `lines` (the `flood` lines one rank's output arrived with) are all of that
/// rank's flood, in order, and its final marker.
fn assert_whole_flood(rank: usize, lines: &[&str], whence: &str) {
    let count = FLOOD_BYTES / FLOOD_LINE_LEN;
    let marker = format!("flood done rank={rank} bytes={FLOOD_BYTES}");
    let first_wrong = (0..count).find(|&i| lines.get(i) != Some(&flood_line(rank, i).as_str()));
    assert_eq!(
        first_wrong,
        None,
        "rank {rank} ({whence}): {} of {count} flood lines arrived; the first missing or \
         wrong one is shown (last line seen: {:?})",
        lines.len(),
        lines.last()
    );
    assert_eq!(
        lines.get(count).copied(),
        Some(marker.as_str()),
        "rank {rank} ({whence}): the final marker is missing"
    );
    assert_eq!(
        lines.len(),
        count + 1,
        "rank {rank} ({whence}): extra lines"
    );
}

#[test]
fn every_byte_a_rank_writes_right_before_exiting_reaches_console_or_log() {
    let ranks = 3;
    for round in 0..4 {
        let id = job_id(&format!("flood{round}"));
        let mut job = Job::start(&[
            "-n",
            &ranks.to_string(),
            "--job-id",
            &id,
            "--",
            PROBE,
            "--flood",
            &FLOOD_BYTES.to_string(),
        ]);
        assert!(job.wait(LIMIT).success(), "{}", job.stderr_text());
        let console: Vec<&str> = job
            .out
            .iter()
            .map(String::as_str)
            .filter(|l| l.starts_with("flood "))
            .collect();
        assert_whole_flood(0, &console, &format!("console, round {round}"));
        for rank in 1..ranks {
            let path = job
                .run_dir
                .path()
                .join(&id)
                .join(format!("rank-{rank}.log"));
            let log = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let lines: Vec<&str> = log.lines().filter(|l| l.starts_with("flood ")).collect();
            assert_whole_flood(rank, &lines, &format!("{}, round {round}", path.display()));
        }
    }
}

/// Kills the reported processes when dropped, so a failing test leaves none behind.
struct KillOnDrop(Vec<i32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for &pid in &self.0 {
            signal(pid as u32, Signal::SIGKILL);
        }
    }
}

#[test]
fn a_process_that_keeps_a_rank_output_open_holds_tarantella_only_for_the_grace_period() {
    let mut job = Job::start(&[
        "-n",
        "2",
        "--grace",
        "1",
        "--output-on-all-devices",
        "--",
        PROBE,
        "--detached-child",
    ]);
    let started = Instant::now();
    let status = job.wait(LIMIT);
    let elapsed = started.elapsed();
    let detached = KillOnDrop(
        job.out
            .iter()
            .filter_map(|l| field(l, "detached"))
            .map(|p| p.parse().unwrap())
            .collect(),
    );
    assert_eq!(detached.0.len(), 2, "{:?}", job.out);
    assert!(status.success(), "{}", job.stderr_text());
    assert!(
        elapsed < Duration::from_secs(15),
        "tarantella waited {elapsed:?} for output that a detached process keeps open"
    );
    assert!(
        job.stderr_text().contains("still open"),
        "no word about the output left open: {}",
        job.stderr_text()
    );
    assert!(
        detached.0.iter().all(|&p| alive(p)),
        "the detached children should still run"
    );
}

/// A progress bar redrawn with carriage returns reaches the terminal as it is drawn, not
/// when its line ends (which can be the end of the run).
#[test]
fn a_progress_bar_shows_before_its_line_ends() {
    use std::io::Read;
    let run = TempDir::new("progress");
    let mut child = tarantella(run.path())
        .args([
            "-n",
            "1",
            "--",
            "sh",
            "-c",
            "printf 'step 1/9\\r'; exec sleep 60",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let mut out = child.stdout.take().unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 256];
    while !seen.ends_with(b"step 1/9\r") {
        let n = out.read(&mut buf).unwrap();
        assert!(n > 0, "output ended: {:?}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    let took = started.elapsed();
    signal(child.id(), Signal::SIGTERM);
    child.wait().unwrap();
    assert!(took < Duration::from_secs(30), "shown after {took:?}");
}
