//! Starting ranks: the process handle the supervisor works with, and the threads that carry
//! each rank's output to the terminal or to its log file.

pub mod local;
pub mod slurm;
pub mod ssh;
pub mod tail;

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
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
        /// The PID the wrapper reported for the rank on its host, `-1` while unknown.
        remote_pid: Arc<AtomicI32>,
        /// The status the wrapper reported (`\x1eTNT exit N`), `-1` while unknown.
        remote_exit: Arc<AtomicI32>,
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
            Kind::Ssh { control, .. } => {
                let word = if sig == Signal::SIGKILL {
                    "kill\n"
                } else {
                    "term\n"
                };
                if let Some(c) = control {
                    if c.write_all(word.as_bytes())
                        .and_then(|_| c.flush())
                        .is_err()
                    {
                        *control = None;
                    }
                }
                if sig == Signal::SIGKILL {
                    // Closing the channel makes the wrapper stop the rank even if the word
                    // was lost; the ssh client itself goes too.
                    *control = None;
                    let _ = killpg(self.pgid(), Signal::SIGKILL);
                }
            }
            Kind::Local | Kind::Slurm => {
                let _ = killpg(self.pgid(), sig);
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
        let Some((at, st)) = self.reaped else { return };
        if self.status.is_some() {
            return;
        }
        match &self.kind {
            Kind::Local | Kind::Slurm => self.status = Some(RankStatus::from_exit(st)),
            Kind::Ssh {
                remote_exit,
                remote_pid,
                ..
            } => {
                // The wrapper's exit line arrives on stderr; wait for that stream to close
                // (bounded), then decide.
                let streams_done = self.open_streams.count() == 0;
                if !streams_done && at.elapsed() < Duration::from_secs(2) {
                    return;
                }
                let r = remote_exit.load(Ordering::Acquire);
                self.status = Some(if r >= 0 {
                    if r > 128 && r < 128 + 65 {
                        RankStatus::Signaled(r - 128)
                    } else {
                        RankStatus::Exited(r)
                    }
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
    fn write_line(&self, line: &[u8]) {
        match self {
            Sink::Terminal { err, prefix } => {
                let mut buf = Vec::with_capacity(prefix.len() + line.len());
                buf.extend_from_slice(prefix.as_bytes());
                buf.extend_from_slice(line);
                // Output errors (a closed terminal) must not stop the supervisor.
                let _ = if *err {
                    std::io::stderr().lock().write_all(&buf)
                } else {
                    std::io::stdout().lock().write_all(&buf)
                };
            }
            Sink::File(f) => {
                if let Ok(mut f) = f.lock() {
                    let _ = f.write_all(line);
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

/// Where the control lines found in an ssh rank's stderr go.
pub struct Control {
    /// The rank's index among the started processes, for [`Event::RemotePid`].
    pub idx: usize,
    /// The supervisor's channel, told of the rank's remote PID.
    pub events: Sender<Event>,
    /// Set to the remote PID (`\x1eTNT pid N`).
    pub remote_pid: Arc<AtomicI32>,
    /// Set to the rank's exit status (`\x1eTNT exit N`).
    pub remote_exit: Arc<AtomicI32>,
}

/// Copies `stream` line by line into `sink` on a background thread, counted in `open` until
/// the stream ends; the last lines stay in `tail` (control lines in neither).
pub fn pump<R: Read + Send + 'static>(
    stream: R,
    sink: Sink,
    tail: Tail,
    control: Option<Control>,
    open: &OpenStreams,
) {
    let guard = open.opened();
    std::thread::spawn(move || {
        let _counted_until_the_end = guard;
        let emit = |line: &[u8]| {
            sink.write_line(line);
            tail.push(line);
        };
        let mut r = BufReader::new(stream);
        let mut line = Vec::new();
        loop {
            line.clear();
            match r.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if !line.ends_with(b"\n") {
                line.push(b'\n');
            }
            // Another process of the rank (a child still writing) may have left a partial
            // line just before the wrapper's control line: the mark then sits inside the
            // line. The record separator never occurs in ordinary output.
            let mark_at = control.as_ref().and_then(|_| {
                line.windows(CONTROL_MARK.len())
                    .position(|w| w == CONTROL_MARK)
            });
            if let Some(at) = mark_at.filter(|&at| at > 0) {
                let mut before = line[..at].to_vec();
                before.push(b'\n');
                emit(&before);
                line.drain(..at);
            }
            if let (Some(c), Some(rest)) = (&control, line.strip_prefix(CONTROL_MARK)) {
                let text = String::from_utf8_lossy(rest);
                let mut w = text.split_whitespace();
                let (key, val) = (w.next(), w.next().and_then(|v| v.parse::<i32>().ok()));
                match (key, val) {
                    (Some("pid"), Some(pid)) => {
                        c.remote_pid.store(pid, Ordering::Release);
                        let _ = c.events.send(Event::RemotePid { idx: c.idx, pid });
                    }
                    (Some("exit"), Some(code)) => c.remote_exit.store(code, Ordering::Release),
                    _ => emit(&line),
                }
                continue;
            }
            emit(&line);
        }
    });
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A child of the rank still writing when the wrapper reports: its partial line and the
    /// control line arrive as one line. The exit status must still be read, and the child's
    /// text kept.
    #[test]
    fn a_control_line_after_a_partial_line_is_still_read() {
        let dir = std::env::temp_dir().join(format!("tnt-pump-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("rank.log");
        let file = Arc::new(Mutex::new(File::create(&log).unwrap()));
        let (events, _rx) = std::sync::mpsc::channel();
        let remote_exit = Arc::new(AtomicI32::new(-1));
        let control = Control {
            idx: 0,
            events,
            remote_pid: Arc::new(AtomicI32::new(-1)),
            remote_exit: remote_exit.clone(),
        };
        let open = OpenStreams::default();
        let input: &[u8] = b"child: half a line\x1eTNT exit 3\nof text\n";
        let tail = Tail::default();
        pump(input, Sink::File(file), tail.clone(), Some(control), &open);
        assert!(open.wait_closed(Instant::now() + Duration::from_secs(10)));
        assert_eq!(remote_exit.load(Ordering::Acquire), 3);
        let text = std::fs::read_to_string(&log).unwrap();
        assert_eq!(text, "child: half a line\nof text\n");
        assert_eq!(tail.lines(), ["child: half a line", "of text"]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
