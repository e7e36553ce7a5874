//! A job of N rank processes on this host (or placed on test hosts): started with the job
//! environment, waited for with a deadline, and each rank's exit and output reported.

use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::ports::free_port;
use super::processes::wait_all;
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
        let mut children = Vec::new();
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
            children.push(child);
        }
        let pids: Vec<u32> = children.iter().map(Child::id).collect();
        let waited = wait_all(children, self.timeout);
        let timed_out = waited.timed_out;
        let ranks = pids
            .into_iter()
            .zip(waited.outputs)
            .enumerate()
            .map(|(r, (pid, output))| rank_outcome(Rank(r as u16), pid, output, timed_out))
            .collect();
        // Ranks that were killed or failed leave their segment files behind.
        crate::env::remove_job_shm_files(&job_id);
        JobOutcome {
            ranks,
            timed_out,
            elapsed: start.elapsed(),
        }
    }
}

/// One rank's outcome from its output (`None`: it could not be waited for). After the
/// deadline passed, a rank that died of the kill reports no status: it did not exit.
fn rank_outcome(rank: Rank, pid: u32, output: Option<Output>, timed_out: bool) -> RankOutcome {
    let Some(o) = output else {
        return RankOutcome {
            rank,
            pid,
            status: None,
            stdout: String::new(),
            stderr: String::new(),
        };
    };
    let killed = timed_out && o.status.signal() == Some(9);
    RankOutcome {
        rank,
        pid,
        status: (!killed).then_some(o.status),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}
