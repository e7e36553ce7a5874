//! Helpers for the launcher's integration tests: run `tarantella` with a deadline, read its
//! output as lines, and check PIDs.
#![allow(dead_code)]

pub mod sshd;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

pub const TARANTELLA: &str = env!("CARGO_BIN_EXE_tarantella");
pub const PROBE: &str = env!("CARGO_BIN_EXE_tnt-rank-probe");

/// A temporary directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "tnt-test-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running `tarantella` (or any command) whose stdout and stderr are read as lines.
pub struct Job {
    pub child: Child,
    lines: Receiver<(bool, String)>,
    pub out: Vec<String>,
    pub err: Vec<String>,
    pub run_dir: TempDir,
}

/// A `tarantella` command with a private run directory and no Slurm/ssh surprises.
pub fn tarantella(run_dir: &Path) -> Command {
    let mut c = Command::new(TARANTELLA);
    c.env(tnt_env::RUN_DIR, run_dir)
        .env_remove("SLURM_JOB_ID")
        .env_remove(tnt_env::SSH);
    c
}

impl Job {
    /// Starts `tarantella ARGS` with a fresh run directory.
    pub fn start(args: &[&str]) -> Job {
        let run_dir = TempDir::new("run");
        let mut cmd = tarantella(run_dir.path());
        cmd.args(args);
        Job::spawn(cmd, run_dir)
    }

    pub fn spawn(mut cmd: Command, run_dir: TempDir) -> Job {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start tarantella");
        let (tx, rx) = mpsc::channel();
        for (is_err, stream) in [
            (
                false,
                Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            ),
            (true, Box::new(child.stderr.take().unwrap())),
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    if is_err {
                        eprintln!("(tarantella stderr) {line}");
                    }
                    let _ = tx.send((is_err, line));
                }
            });
        }
        Job {
            child,
            lines: rx,
            out: Vec::new(),
            err: Vec::new(),
            run_dir,
        }
    }

    fn take(&mut self, (is_err, line): (bool, String)) {
        if is_err {
            self.err.push(line)
        } else {
            self.out.push(line)
        }
    }

    /// Waits until `n` stdout lines contain `pat`; panics (after killing) at the deadline.
    pub fn wait_lines(&mut self, pat: &str, n: usize, limit: Duration) -> Vec<String> {
        let deadline = Instant::now() + limit;
        loop {
            let hits: Vec<String> = self
                .out
                .iter()
                .filter(|l| l.contains(pat))
                .cloned()
                .collect();
            if hits.len() >= n {
                return hits;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => self.take(l),
                Err(_) => {
                    let _ = self.child.kill();
                    panic!(
                        "timed out waiting for {n} lines with {pat:?}; stdout {:?} stderr {:?}",
                        self.out, self.err
                    );
                }
            }
        }
    }

    /// Waits for the exit (killing at the deadline) and collects the remaining output.
    pub fn wait(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                break st;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "tarantella did not exit within {limit:?}; stdout {:?} stderr {:?}",
                    self.out, self.err
                );
            }
            if let Ok(l) = self.lines.recv_timeout(Duration::from_millis(20)) {
                self.take(l);
            }
        };
        // The pipes close with the process (the ranks' output goes through tarantella).
        let end = Instant::now() + Duration::from_secs(5);
        while let Ok(l) = self
            .lines
            .recv_timeout(end.saturating_duration_since(Instant::now()))
        {
            self.take(l);
        }
        status
    }

    /// Asserts that exactly `n` ranks printed `probe ... --rendezvous`'s success line: they
    /// all joined one job.
    pub fn assert_rendezvous_ok(&self, n: usize) {
        let ok = self
            .out
            .iter()
            .filter(|l| l.contains("rendezvous ok"))
            .count();
        assert_eq!(ok, n, "{:?}", self.out);
    }

    pub fn stderr_text(&self) -> String {
        self.err.join("\n")
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `key=value` from a probe line.
pub fn field(line: &str, key: &str) -> Option<String> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('=').map(str::to_string))
}

/// Each rank's `env NAME=value` lines (from `PROBE --env NAME`) and its rendezvous, by rank,
/// from the `[rank K] ` prefixed output of an `--output-on-all-devices` job.
pub fn env_by_rank(job: &Job, nranks: usize) -> Vec<BTreeMap<String, String>> {
    let mut by_rank = vec![BTreeMap::new(); nranks];
    for line in &job.out {
        let Some(rest) = line.strip_prefix("[rank ") else {
            continue;
        };
        let (rank, rest) = rest.split_once("] ").unwrap();
        let rank: usize = rank.parse().unwrap();
        if let Some((name, value)) = rest.strip_prefix("env ").and_then(|e| e.split_once('=')) {
            by_rank[rank].insert(name.to_string(), value.to_string());
        }
        if let Some(rendezvous) = field(rest, "rendezvous") {
            by_rank[rank].insert("rendezvous".into(), rendezvous);
        }
    }
    by_rank
}

/// Whether `pid` is a live (not zombie) process.
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, a)| a.split_whitespace().next().map(str::to_string));
            state.as_deref() != Some("Z") && state.as_deref() != Some("X")
        }
        Err(_) => false,
    }
}

/// Waits (bounded) until none of `pids` is alive; returns the ones still alive.
pub fn wait_dead(pids: &[i32], limit: Duration) -> Vec<i32> {
    let deadline = Instant::now() + limit;
    loop {
        let left: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Files in /dev/shm that belong to job `id`.
pub fn shm_files(id: &str) -> Vec<String> {
    let prefix = format!("tnt-{id}-");
    std::fs::read_dir("/dev/shm")
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// A job id unique to this test process and `tag`.
pub fn job_id(tag: &str) -> String {
    format!("t{}-{tag}", std::process::id())
}

/// Sends `sig` to `pid`.
pub fn signal(pid: u32, sig: nix::sys::signal::Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig);
}

/// The PIDs the probe ranks reported: each rank's `pid=` and its child's `child=`.
pub fn pids_of(job: &Job) -> Vec<i32> {
    let reported = |key| {
        job.out
            .iter()
            .filter_map(move |l| field(l, key))
            .map(|p| p.parse::<i32>().unwrap())
    };
    reported("pid").chain(reported("child")).collect()
}

/// Asserts that every process in `pids` is gone within `limit` and that job `id` left no
/// shared-memory file behind.
pub fn assert_torn_down(pids: &[i32], id: &str, limit: Duration) {
    assert_eq!(
        wait_dead(pids, limit),
        Vec::<i32>::new(),
        "processes left behind"
    );
    assert!(shm_files(id).is_empty(), "{:?}", shm_files(id));
}
