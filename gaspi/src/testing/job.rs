//! A job of N rank processes on this host (or placed on test hosts): started with the job
//! environment, waited for with a deadline, and each rank's exit and output reported.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use super::ports::free_port;
use crate::env::{JobEnv, JobToken, TransportChoice};
use crate::types::Rank;

/// What happened to one rank.
#[derive(Debug)]
pub struct RankOutcome {
    /// The GASPI rank the process ran as.
    pub rank: Rank,
    /// Its operating-system process id (for matching log lines).
    pub pid: u32,
    /// `None` when the rank was killed at the deadline.
    pub status: Option<ExitStatus>,
    /// Everything it wrote to standard output.
    pub stdout: String,
    /// Everything it wrote to standard error (the runtime's log goes here).
    pub stderr: String,
}

/// What happened to the job.
#[derive(Debug)]
pub struct JobOutcome {
    /// One entry per rank that reported, sorted by rank.
    pub ranks: Vec<RankOutcome>,
    /// Whether the job's deadline passed and its ranks were killed (SIGKILL).
    pub timed_out: bool,
    /// Wall-clock time from starting the ranks until the last one was collected.
    pub elapsed: Duration,
}

impl JobOutcome {
    /// A readable account of every rank, for failure messages.
    pub fn report(&self) -> String {
        let mut s = format!(
            "job took {:?}{}\n",
            self.elapsed,
            if self.timed_out { " and TIMED OUT" } else { "" }
        );
        for r in &self.ranks {
            s += &format!(
                "--- rank {} (pid {}): {:?}\n[stdout]\n{}\n[stderr]\n{}\n",
                r.rank, r.pid, r.status, r.stdout, r.stderr
            );
        }
        s
    }

    /// Panics with the full report unless every rank exited 0 before the deadline.
    pub fn assert_success(&self) {
        let ok = !self.timed_out
            && self
                .ranks
                .iter()
                .all(|r| r.status.is_some_and(|s| s.success()));
        assert!(ok, "job failed:\n{}", self.report());
    }
}

/// A job to start: N ranks of one program.
#[derive(Clone)]
pub struct Job {
    /// Ranks to start, each as one process.
    pub nranks: u16,
    /// The executable every rank runs.
    pub program: PathBuf,
    /// Its arguments, the same for every rank.
    pub args: Vec<String>,
    /// Exported as `GASPI_TRANSPORT` (default [`TransportChoice::Auto`]).
    pub transport: TransportChoice,
    /// Extra variables for every rank, applied after the job's own (so they may override
    /// them).
    pub env: Vec<(String, String)>,
    /// Deadline for the whole job (default 60 s); at the deadline every rank is killed.
    /// Also the ranks' `GASPI_INIT_TIMEOUT_MS`, capped at 30 s.
    pub timeout: Duration,
    /// IP address rank 0 listens on for the rendezvous.
    pub rendezvous_ip: IpAddr,
    /// Command prefix per rank (e.g. `ip netns exec ns1`).
    pub wrapper: Option<Arc<dyn Fn(Rank) -> Vec<String> + Send + Sync>>,
    /// Per-rank environment overrides (e.g. a wrong token for one rank).
    pub rank_env: Vec<(Rank, String, String)>,
}

impl Job {
    /// `nranks` ranks of `program` on this host: no arguments, automatic transport, a 60 s
    /// deadline, rendezvous on loopback.
    pub fn new(nranks: u16, program: impl Into<PathBuf>) -> Job {
        Job {
            nranks,
            program: program.into(),
            args: Vec::new(),
            transport: TransportChoice::Auto,
            env: Vec::new(),
            timeout: Duration::from_secs(60),
            rendezvous_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            wrapper: None,
            rank_env: Vec::new(),
        }
    }

    /// The environment of every rank (what a launcher would export).
    pub fn rank_vars(
        &self,
        port: u16,
        token: JobToken,
        job_id: &str,
    ) -> Vec<Vec<(String, String)>> {
        (0..self.nranks)
            .map(|r| {
                let env = JobEnv {
                    rank: Rank(r),
                    nranks: self.nranks,
                    local_rank: r,
                    local_nranks: self.nranks,
                    rendezvous: Some(format!("{}:{port}", self.rendezvous_ip)),
                    token,
                    job_id: job_id.to_string(),
                    init_timeout_ms: self.timeout.as_millis().min(30_000) as u64,
                    transport: self.transport,
                    addr: None,
                    heartbeat_timeout_ms: None,
                };
                let mut v: Vec<(String, String)> = env
                    .to_vars()
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect();
                v.extend(self.env.iter().cloned());
                v.extend(
                    self.rank_env
                        .iter()
                        .filter(|(rr, _, _)| *rr == Rank(r))
                        .map(|(_, k, val)| (k.clone(), val.clone())),
                );
                v
            })
            .collect()
    }

    /// Starts every rank and waits for all of them, at most `timeout`.
    pub fn run(&self) -> JobOutcome {
        self.run_at(free_port(self.rendezvous_ip))
    }

    /// [`run`](Self::run) with rank 0's rendezvous at `port` (a test that plays a stranger
    /// at that port chooses it first, with [`free_port`]).
    pub fn run_at(&self, port: u16) -> JobOutcome {
        let start = Instant::now();
        let token = JobToken::random().expect("randomness");
        let job_id = format!("test{}x{}", std::process::id(), port);
        let vars = self.rank_vars(port, token, &job_id);
        let (tx, rx) = mpsc::channel();
        let mut pids = Vec::new();
        for (r, v) in (0..self.nranks).map(Rank).zip(vars) {
            let mut cmd = match self.wrapper.as_ref().map(|w| w(r)) {
                Some(prefix) if !prefix.is_empty() => {
                    let mut c = Command::new(&prefix[0]);
                    c.args(&prefix[1..]).arg(&self.program);
                    c
                }
                _ => Command::new(&self.program),
            };
            cmd.args(&self.args)
                .envs(v)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let child = cmd
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.program.display()));
            pids.push(child.id());
            let tx = tx.clone();
            std::thread::spawn(move || {
                let outcome = collect(r, child);
                let _ = tx.send(outcome);
            });
        }
        drop(tx);
        let deadline = start + self.timeout;
        let mut ranks = Vec::new();
        let mut timed_out = false;
        while ranks.len() < pids.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(o) => ranks.push(o),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    timed_out = true;
                    for pid in &pids {
                        let _ = nix::sys::signal::kill(
                            nix::unistd::Pid::from_raw(*pid as i32),
                            nix::sys::signal::Signal::SIGKILL,
                        );
                    }
                    // The killed ranks report in now; collect them (bounded by the kill).
                    while let Ok(o) = rx.recv_timeout(Duration::from_secs(10)) {
                        ranks.push(o);
                    }
                    break;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        ranks.sort_by_key(|r| r.rank);
        // Ranks that were killed or failed leave their segment files behind.
        crate::env::remove_job_shm_files(&job_id);
        if timed_out {
            for r in &mut ranks {
                if r.status
                    .is_some_and(|s| std::os::unix::process::ExitStatusExt::signal(&s) == Some(9))
                {
                    r.status = None;
                }
            }
        }
        JobOutcome {
            ranks,
            timed_out,
            elapsed: start.elapsed(),
        }
    }
}

/// Waits for `child` to exit, reading its output (std reads both pipes at once, so a rank
/// that fills one is never blocked on it).
fn collect(rank: Rank, child: Child) -> RankOutcome {
    let pid = child.id();
    let (status, stdout, stderr) = match child.wait_with_output() {
        Ok(o) => (
            Some(o.status),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        ),
        Err(_) => (None, String::new(), String::new()),
    };
    RankOutcome {
        rank,
        pid,
        status,
        stdout,
        stderr,
    }
}
