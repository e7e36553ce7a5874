//! Starting ranks: the process handle the supervisor works with, and the threads that carry
//! each rank's output to the terminal or to its log file.

pub mod local;
mod pump;
pub mod slurm;
pub mod ssh;
pub mod tail;

use std::fs::File;
use std::io::Write;
use std::process::{Child, ChildStdin, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

pub use tail::{Tail, Tails, TAIL_LINES};

use crate::plan::{env, Plan, RankPlan};

/// The status ssh exits with when it failed itself (no connection, the login refused, ...),
/// rather than passing on the remote command's.
pub const SSH_FAILED: i32 = 255;

/// Marks the control lines that the remote wrapper writes on stderr (`\x1eTNT pid 123`).
pub const CONTROL_MARK: &[u8] = b"\x1eTNT ";

/// How long an ssh client gets to carry a `kill` to its wrapper and end by itself before it
/// is killed. Killed at once, it would drop the word unsent; the wrapper would then see only
/// the end of its input, which it answers gently (SIGTERM, and SIGKILL 3 s later).
pub const SSH_KILL_DELIVERY: Duration = Duration::from_secs(1);

/// Something a background thread tells the supervisor.
#[derive(Debug)]
pub enum Event {
    /// An ssh rank reported the PID (= process group) of the rank on its host.
    RemotePid {
        /// The rank's index among the started processes (`Proc`s) of the job.
        idx: usize,
        /// The PID on the remote host, which `--cleanup` needs should `tarantella` die.
        pid: i32,
    },
}

/// How a rank ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RankStatus {
    /// It exited with this status.
    Exited(i32),
    /// It was killed by this signal.
    Signaled(i32),
    /// ssh failed before the wrapper on the host started ([`SSH_FAILED`]): the host
    /// could not be reached or refused the login, and the rank never ran.
    SshUnreachable,
    /// The ssh connection failed after the wrapper started, before the rank could report
    /// (ssh's own exit status).
    SshFailed(i32),
}

impl RankStatus {
    /// Whether the rank succeeded: exited with status 0.
    pub fn success(&self) -> bool {
        *self == RankStatus::Exited(0)
    }

    /// The exit status `tarantella` reports for this failure.
    pub fn exit_code(&self) -> i32 {
        match *self {
            RankStatus::Exited(c) if c != 0 => c,
            RankStatus::Signaled(s) => 128 + s,
            _ => 1,
        }
    }

    /// The status of a rank from a shell's `$?` (`wait` in the ssh wrapper), which is 128 + N
    /// for signal N: such a number is read as a signal. A rank that exited with it by itself
    /// is told apart only by the reaper's report (see `ssh::REAPER`), where the host has
    /// `perl`.
    pub(crate) fn from_shell(r: i32) -> RankStatus {
        if r > 128 && r < 128 + 65 {
            RankStatus::Signaled(r - 128)
        } else {
            RankStatus::Exited(r)
        }
    }

    /// The status of a process that ran the rank itself (not through ssh).
    pub(crate) fn from_exit(st: ExitStatus) -> RankStatus {
        use std::os::unix::process::ExitStatusExt;
        match (st.code(), st.signal()) {
            (Some(c), _) => RankStatus::Exited(c),
            (None, Some(s)) => RankStatus::Signaled(s),
            _ => RankStatus::Exited(-1),
        }
    }
}

impl std::fmt::Display for RankStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            RankStatus::Exited(c) => write!(f, "exited with status {c}"),
            RankStatus::Signaled(s) => {
                let name = Signal::try_from(s).map(|s| s.as_str()).unwrap_or("unknown");
                write!(f, "was killed by signal {s} ({name})")
            }
            RankStatus::SshUnreachable => {
                write!(f, "could not be reached by ssh (status {})", SSH_FAILED)
            }
            RankStatus::SshFailed(c) => write!(f, "lost its ssh connection (ssh status {c})"),
        }
    }
}

/// How a rank was started.
pub enum Kind {
    /// A child of `tarantella` in its own process group.
    Local,
    /// An ssh client (in its own process group) running the remote wrapper.
    Ssh {
        /// The wrapper's control channel: `term`/`kill` lines; EOF stops the rank too.
        control: Option<ChildStdin>,
        /// When the `kill` word went out: the ssh client is killed if it is still there
        /// [`SSH_KILL_DELIVERY`] later.
        kill_sent: Option<Instant>,
        /// The PID the wrapper reported for the rank on its host, `-1` while unknown.
        remote_pid: Arc<AtomicI32>,
        /// How the rank ended, from the first report: its reaper's (`\x1eTNT exited N`,
        /// `\x1eTNT killed S`), else the wrapper's (`\x1eTNT exit N`, see
        /// `RankStatus::from_shell`).
        remote_status: Arc<OnceLock<RankStatus>>,
    },
    /// The `srun` of a Slurm job step.
    Slurm,
}

/// One started rank (or, for Slurm, the whole step).
pub struct Proc {
    /// The rank; `None` for the `srun` of a Slurm step, which runs them all.
    pub rank: Option<usize>,
    /// Host name for messages.
    pub host: String,
    /// The process `tarantella` started: the rank, its ssh client, or `srun`. It leads a
    /// process group of its own.
    pub child: Child,
    /// How it was started, which decides how it is signalled.
    pub kind: Kind,
    /// Output threads still copying.
    pub open_streams: OpenStreams,
    /// The last lines of the rank's stdout and stderr (empty for the srun of Slurm, whose
    /// ranks write to the terminal or their logs directly).
    pub tails: Tails,
    /// When the local child (rank or ssh client) was reaped, and its status.
    pub reaped: Option<(Instant, ExitStatus)>,
    /// Final status, once known.
    pub status: Option<RankStatus>,
}

impl Proc {
    /// The process group of the started process (its PID: it leads the group), which the
    /// rank's own children share.
    pub fn pgid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32)
    }

    /// What messages call it: `rank K on HOST`, or `srun`.
    pub fn label(&self) -> String {
        match self.rank {
            Some(r) => format!("rank {r} on {}", self.host),
            None => "srun".to_string(),
        }
    }

    /// Signals the rank's whole process group (locally) or asks the remote wrapper to.
    pub fn signal(&mut self, sig: Signal) {
        match &mut self.kind {
            Kind::Ssh {
                control, kill_sent, ..
            } => {
                let word = if sig == Signal::SIGKILL {
                    "kill\n"
                } else {
                    "term\n"
                };
                let sent = control
                    .as_mut()
                    .is_some_and(|c| c.write_all(word.as_bytes()).and_then(|_| c.flush()).is_ok());
                if !sent {
                    *control = None;
                }
                if sig == Signal::SIGKILL {
                    // The end of the input follows the word, so that the wrapper, its rank
                    // gone, ends and the ssh client with it; `kill_overdue_client` ends a
                    // client that does not. Without a channel there is nothing to wait for.
                    *control = None;
                    if sent {
                        kill_sent.get_or_insert_with(Instant::now);
                    } else {
                        let _ = killpg(self.pgid(), Signal::SIGKILL);
                    }
                }
            }
            Kind::Local | Kind::Slurm => {
                let _ = killpg(self.pgid(), sig);
            }
        }
    }

    /// Kills the ssh client of a rank that was sent `kill` [`SSH_KILL_DELIVERY`] ago and is
    /// still there: the connection may hang, or a process the rank left may hold it open.
    pub fn kill_overdue_client(&mut self) {
        if let Kind::Ssh {
            kill_sent: Some(at),
            ..
        } = self.kind
        {
            if self.reaped.is_none() && at.elapsed() >= SSH_KILL_DELIVERY {
                let _ = killpg(self.pgid(), Signal::SIGKILL);
            }
        }
    }

    /// Whether any process of the local process group still exists.
    pub fn group_alive(&self) -> bool {
        killpg(self.pgid(), None).is_ok()
    }

    /// Reaps the child if it exited, and settles the final status when all is known.
    pub fn poll(&mut self) {
        if self.reaped.is_none() {
            if let Ok(Some(st)) = self.child.try_wait() {
                self.reaped = Some((Instant::now(), st));
            }
        }
        if let (None, None) = (&self.reaped, &self.status) {
            if let Kind::Ssh { remote_status, .. } = &self.kind {
                // The wrapper said the rank failed, but the ssh client is still there: a
                // process the rank left in a group or session of its own holds the channel,
                // maybe for ever. The failure is known; the teardown ends the client.
                if let Some(s) = remote_status.get().filter(|s| !s.success()) {
                    self.status = Some(s.clone());
                }
            }
        }
        let Some((at, st)) = self.reaped else { return };
        if self.status.is_some() {
            return;
        }
        match &self.kind {
            Kind::Local | Kind::Slurm => self.status = Some(RankStatus::from_exit(st)),
            Kind::Ssh {
                remote_status,
                remote_pid,
                ..
            } => {
                // The wrapper's exit line arrives on stderr; wait for that stream to close
                // (bounded), then decide.
                let streams_done = self.open_streams.count() == 0;
                if !streams_done && at.elapsed() < Duration::from_secs(2) {
                    return;
                }
                self.status = Some(if let Some(s) = remote_status.get() {
                    s.clone()
                } else {
                    // The wrapper reports the rank's PID first thing: without it, ssh never
                    // got as far as the host.
                    let started = remote_pid.load(Ordering::Acquire) >= 0;
                    match RankStatus::from_exit(st) {
                        RankStatus::Exited(SSH_FAILED) if !started => RankStatus::SshUnreachable,
                        RankStatus::Exited(c) => RankStatus::SshFailed(c),
                        other => other,
                    }
                });
            }
        }
    }
}

/// The output streams of one rank whose threads are still copying, and a way to wait until
/// the last of them has reached its end.
#[derive(Clone, Default)]
pub struct OpenStreams(Arc<(Mutex<usize>, Condvar)>);

impl OpenStreams {
    /// How many streams are still being copied.
    pub fn count(&self) -> usize {
        *self.0 .0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until every stream has been copied to its end, or until `deadline`; returns
    /// whether they all were.
    pub fn wait_closed(&self, deadline: Instant) -> bool {
        let (open, changed) = &*self.0;
        let mut open = open.lock().unwrap_or_else(PoisonError::into_inner);
        while *open > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            open = changed
                .wait_timeout(open, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }

    fn opened(&self) -> StreamGuard {
        *self.0 .0.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        StreamGuard(self.clone())
    }
}

/// Counts its stream as closed when dropped, on every way out of the copying thread.
struct StreamGuard(OpenStreams);

impl Drop for StreamGuard {
    fn drop(&mut self) {
        let (open, changed) = &*self.0 .0;
        *open.lock().unwrap_or_else(PoisonError::into_inner) -= 1;
        changed.notify_all();
    }
}

/// Where a stream of a rank goes.
#[derive(Clone)]
pub enum Sink {
    /// This process's stdout or stderr, each line prefixed.
    Terminal {
        /// stderr rather than stdout.
        err: bool,
        /// Put before each line: `[rank K] ` when every rank's output is shown, else empty.
        prefix: String,
    },
    /// A log file shared by the rank's stdout and stderr.
    File(Arc<Mutex<File>>),
}

impl Sink {
    /// Writes `bytes` of a line; the terminal's prefix goes first when they begin the line.
    fn write(&self, bytes: &[u8], line_start: bool) {
        match self {
            Sink::Terminal { err, prefix } => {
                let prefix = if line_start { prefix.as_bytes() } else { &[] };
                let mut buf = Vec::with_capacity(prefix.len() + bytes.len());
                buf.extend_from_slice(prefix);
                buf.extend_from_slice(bytes);
                // Output errors (a closed terminal) must not stop the supervisor. Part of a
                // line (a progress bar's redraw) is flushed: stdout holds it until a newline.
                let partial = !buf.ends_with(b"\n");
                let _ = if *err {
                    std::io::stderr().lock().write_all(&buf)
                } else {
                    let mut out = std::io::stdout().lock();
                    out.write_all(&buf)
                        .and_then(|()| if partial { out.flush() } else { Ok(()) })
                };
            }
            Sink::File(f) => {
                if let Ok(mut f) = f.lock() {
                    let _ = f.write_all(bytes);
                }
            }
        }
    }
}

/// The `--dry-run` line that names rank `r` and where it runs, above its command line.
fn dry_run_heading(r: &RankPlan) -> String {
    let host = r.host.as_deref().unwrap_or("localhost (this host)");
    format!(
        "# rank {} on {host} (local rank {} of {})\n",
        r.rank, r.local_rank, r.local_nranks
    )
}

/// The words `--dry-run` shows for what rank `r` of `plan` runs: `env`, the rank's
/// variables (the job token redacted), then its command line.
fn dry_run_command(plan: &Plan, r: &RankPlan) -> Vec<String> {
    let mut words = vec!["env".to_string()];
    words.extend(
        plan.rank_env(r)
            .into_iter()
            .map(|(k, v)| format!("{k}={v}")),
    );
    words.push(env::redacted_token_var());
    words.extend(plan.rank_argv(r));
    words
}

/// The sinks of one rank: shown on the terminal, or written to `log`.
pub fn sinks(
    rank: usize,
    show: bool,
    prefix: bool,
    log: &std::path::Path,
) -> std::io::Result<(Sink, Sink)> {
    if show {
        let prefix = if prefix {
            format!("[rank {rank}] ")
        } else {
            String::new()
        };
        Ok((
            Sink::Terminal {
                err: false,
                prefix: prefix.clone(),
            },
            Sink::Terminal { err: true, prefix },
        ))
    } else {
        let f = Arc::new(Mutex::new(File::create(log)?));
        Ok((Sink::File(f.clone()), Sink::File(f)))
    }
}
