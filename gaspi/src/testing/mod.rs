//! A small job runner for multi-process tests (feature `testing`): starts N ranks as
//! processes with the job environment, waits for them with a deadline (killing all of them
//! when it passes), and reports each rank's exit status and output.
//!
//! [`spmd`] runs a test body on every rank by re-executing the current test binary: the
//! parent starts `N` copies filtered to the same test, each copy sees `GASPI_TEST_CASE` and
//! runs the body with an initialized [`Context`].

use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crate::env::{JobEnv, JobToken, TransportChoice};
use crate::types::Rank;
use crate::{Config, Context};

/// Environment variable naming the test case a child process runs.
pub const TEST_CASE: &str = "GASPI_TEST_CASE";

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

/// Two network namespaces joined by a veth pair: two hosts on one machine, host `h` at
/// [`TwoHosts::ADDRESSES`]`[h]`, for tests of what crosses hosts (root needed). Deleted, and
/// the veth with them, when dropped.
pub struct TwoHosts {
    names: [String; 2],
    /// The first end of the veth pair: gone with its namespace once moved there, deleted
    /// on drop if creation failed before.
    veth: String,
}

impl TwoHosts {
    /// The hosts' addresses (each namespace has its own network, so concurrent pairs do not
    /// collide).
    pub const ADDRESSES: [Ipv4Addr; 2] =
        [Ipv4Addr::new(10, 199, 0, 1), Ipv4Addr::new(10, 199, 0, 2)];

    /// Creates the pair, named after `tag` (a few characters telling concurrent tests of
    /// one binary apart) and this process; the error names the `ip` command that failed.
    pub fn create(tag: &str) -> Result<TwoHosts, String> {
        let id = std::process::id() % 100_000;
        let names = [format!("tnt-{tag}a{id}"), format!("tnt-{tag}b{id}")];
        let run = |args: &[&str]| -> Result<(), String> {
            let out = Command::new("ip")
                .args(args)
                .output()
                .map_err(|e| format!("ip: {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "ip {}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                ))
            }
        };
        let veth = [format!("v{tag}a{id}"), format!("v{tag}b{id}")];
        // Dropped (and the namespaces and the veth deleted) on any failure below.
        let hosts = TwoHosts {
            names: names.clone(),
            veth: veth[0].clone(),
        };
        run(&["netns", "add", &names[0]])?;
        run(&["netns", "add", &names[1]])?;
        run(&[
            "link", "add", &veth[0], "type", "veth", "peer", "name", &veth[1],
        ])?;
        for h in 0..2 {
            run(&["link", "set", &veth[h], "netns", &names[h]])?;
            let address = format!("{}/24", Self::ADDRESSES[h]);
            run(&["-n", &names[h], "addr", "add", &address, "dev", &veth[h]])?;
            run(&["-n", &names[h], "link", "set", &veth[h], "up"])?;
            run(&["-n", &names[h], "link", "set", "lo", "up"])?;
        }
        Ok(hosts)
    }

    /// The namespace of host `h` (0 or 1), for `ip netns exec`.
    pub fn name(&self, h: usize) -> &str {
        &self.names[h]
    }

    /// Runs `job`'s rank `r` on host `host_of(r)` (0 or 1; anything else is a bug of the
    /// test, which panics), the rendezvous on host 0 (where rank 0 must be).
    pub fn place(&self, job: &mut Job, host_of: impl Fn(Rank) -> usize + Send + Sync + 'static) {
        let names = self.names.clone();
        job.rendezvous_ip = IpAddr::V4(Self::ADDRESSES[0]);
        job.wrapper = Some(Arc::new(move |r| {
            let h = host_of(r);
            let name = names
                .get(h)
                .unwrap_or_else(|| panic!("rank {r} placed on host {h} of two"));
            vec!["ip".into(), "netns".into(), "exec".into(), name.clone()]
        }));
    }
}

impl Drop for TwoHosts {
    fn drop(&mut self) {
        for name in &self.names {
            let _ = Command::new("ip").args(["netns", "del", name]).output();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &self.veth])
            .output();
    }
}

/// The first port of this host's ephemeral range (`ip_local_port_range`), from which the
/// kernel takes the local ports of outgoing connections; Linux's default 32768 if unreadable.
pub fn ephemeral_port_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768)
}

/// A TCP port free on `ip` now, for a rendezvous that rank 0 binds a little later.
///
/// It is taken below the kernel's ephemeral range (`ip_local_port_range`), as the launcher
/// takes its ports: a port the kernel handed out for `bind(0)` and that was released comes
/// from the same range as the local ports of outgoing connections, and another job's
/// connection took one between the release and rank 0's bind (rank 0 then failed with
/// "Address already in use"). Candidates start at a point that differs per process and
/// per call, so concurrent jobs of this process never get the same port. When `ip` is not
/// an address of this network namespace (a test host in another one), a port free on
/// loopback is taken: the other namespace's ports are all free.
pub fn free_port(ip: IpAddr) -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static CALLS: AtomicU32 = AtomicU32::new(0);
    let span = u32::from(ephemeral_port_start()).max(11_000) - 10_000;
    let start = std::process::id()
        .wrapping_mul(7919)
        .wrapping_add(CALLS.fetch_add(1, Ordering::Relaxed).wrapping_mul(101));
    let bind_ip = if TcpListener::bind((ip, 0)).is_ok() {
        ip
    } else {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    };
    (0..span)
        .map(|i| 10_000 + (start.wrapping_add(i)) % span)
        .filter_map(|p| u16::try_from(p).ok())
        .find(|&p| TcpListener::bind((bind_ip, p)).is_ok())
        .expect("a free port below the ephemeral range")
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

fn collect(rank: Rank, mut child: Child) -> RankOutcome {
    let pid = child.id();
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let mut stdout = String::new();
    let _ = out.read_to_string(&mut stdout);
    let stderr = t.join().unwrap_or_default();
    let status = child.wait().ok();
    RankOutcome {
        rank,
        pid,
        status,
        stdout,
        stderr,
    }
}

/// Runs `body` on `nranks` ranks of this test binary (see the module docs). `name` must be
/// the test's full path as libtest knows it (its function name for top-level tests).
///
/// In the parent this starts the job and asserts that every rank succeeded; in a rank it
/// initializes a [`Context`], runs `body`, terminates and exits.
pub fn spmd(name: &str, nranks: u16, transport: TransportChoice, body: impl FnOnce(Context)) {
    spmd_with(
        name,
        nranks,
        transport,
        Config::default(),
        Duration::from_secs(60),
        body,
    )
}

/// [`spmd`] with an explicit configuration and time bound.
pub fn spmd_with(
    name: &str,
    nranks: u16,
    transport: TransportChoice,
    config: Config,
    timeout: Duration,
    body: impl FnOnce(Context),
) {
    if let Some(outcome) = spmd_job(name, nranks, transport, timeout, |_| {}) {
        outcome.assert_success();
        return;
    }
    let ctx = Context::init_with(config).expect("gaspi init");
    body(ctx);
    std::process::exit(0);
}

/// The parent half of [`spmd`], with a hook to adjust the job; `None` in a child rank.
pub fn spmd_job(
    name: &str,
    nranks: u16,
    transport: TransportChoice,
    timeout: Duration,
    adjust: impl FnOnce(&mut Job),
) -> Option<JobOutcome> {
    if std::env::var(TEST_CASE).ok().as_deref() == Some(name) {
        return None;
    }
    let exe = std::env::current_exe().expect("test binary path");
    let mut job = Job::new(nranks, exe);
    job.args = vec![
        "--exact".into(),
        name.into(),
        "--nocapture".into(),
        "--test-threads=1".into(),
    ];
    job.transport = transport;
    job.timeout = timeout;
    job.env.push((TEST_CASE.into(), name.into()));
    adjust(&mut job);
    Some(job.run())
}

/// True in a child rank started by [`spmd`]/[`spmd_job`] for test `name`.
pub fn is_rank_of(name: &str) -> bool {
    std::env::var(TEST_CASE).ok().as_deref() == Some(name)
}

/// A raw `Write` frame as a faulty or hostile peer would send it (no validation here).
pub fn raw_write_frame(segment: u8, offset: u64, payload: &[u8]) -> Vec<u8> {
    use crate::wire::frame::{FrameKind, Header};
    let mut h = Header::new(FrameKind::Write);
    h.seg = u16::from(segment);
    h.offset = offset;
    h.len = payload.len() as u64;
    let mut v = h.encode().to_vec();
    v.extend_from_slice(payload);
    v
}

/// A raw goodbye frame (what `term` sends last on each connection).
pub fn raw_bye_frame() -> Vec<u8> {
    crate::wire::control::ControlMessage::Goodbye
        .header()
        .encode()
        .to_vec()
}

/// The hello a rank sends first on a data connection.
pub fn hello_bytes(token: JobToken, rank: Rank, nranks: u16) -> Vec<u8> {
    crate::wire::hello::Hello {
        token,
        rank: rank.0,
        nranks,
    }
    .encode()
    .to_vec()
}
