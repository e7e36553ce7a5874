//! One soak job: `tarantella` started with the rank program, its ranks' lines read as they
//! come, the planned kill sent at its point, the launcher's exit awaited (bounded), and what
//! the job left measured before and after `tarantella --cleanup`.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::leftovers::{self, Left};
use crate::plan::{JobPlan, Point, Target};

/// The settings every job shares.
#[derive(Clone, Debug)]
pub struct Setup {
    /// The `tarantella` binary.
    pub tarantella: PathBuf,
    /// The rank program (`soak-rank`).
    pub rank_program: PathBuf,
    /// Ranks per job.
    pub ranks: u16,
    /// `tarantella --transport`.
    pub transport: String,
    /// `tarantella --init-timeout` (seconds the ranks wait for each other in `Context::init`).
    pub init_timeout_s: f64,
    /// `tarantella --grace` (seconds between SIGTERM and SIGKILL at teardown).
    pub grace_s: f64,
    /// `soak-rank --timeout-ms`: the bound on every wait of a rank.
    pub op_timeout_ms: u64,
    /// After this long a job counts as hung: its `tarantella` gets SIGKILL.
    pub job_timeout: Duration,
    /// `TARANTELLA_RUN_DIR` of every job.
    pub runs: PathBuf,
}

/// Where a kill landed, as the ranks' own timestamps tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sent {
    /// Microseconds after `tarantella` was spawned.
    pub at_us: u64,
    /// Ranks that had written `start` (entered `main`) before the kill.
    pub started: usize,
    /// Ranks that were past `Context::init` before the kill.
    pub ready: usize,
    /// Ranks that had finished their rounds before the kill.
    pub done: usize,
}

/// What became of the planned kill.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KillOutcome {
    /// Not planned.
    None,
    /// Sent.
    Sent(Sent),
    /// Not sent: the job ended first, or the target was gone (the reason).
    Missed(String),
}

/// Everything measured of one job.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The job's number in the run, from 0.
    pub index: usize,
    /// Its job id.
    pub id: String,
    /// Its plan.
    pub plan: JobPlan,
    /// The kill.
    pub kill: KillOutcome,
    /// `tarantella`'s exit status (`None` when it never exited, even after SIGKILL).
    pub exit: Option<ExitStatus>,
    /// Whether the job ran past the job timeout (its launcher then got SIGKILL).
    pub hung: bool,
    /// Microseconds from spawning `tarantella` until the last rank was past
    /// `Context::init`, when every rank got there.
    pub start_us: Option<u64>,
    /// Microseconds from spawning `tarantella` until the first rank entered `main`.
    pub launch_us: Option<u64>,
    /// The longest `Context::init` call among the ranks, in microseconds.
    pub init_us: Option<u64>,
    /// Ranks that wrote `done`.
    pub done: usize,
    /// From spawning `tarantella` until it exited.
    pub wall: Duration,
    /// What was left once the job's processes settled (or the settle bound passed).
    pub before: Left,
    /// How long the processes took to settle.
    pub settle: Duration,
    /// `tarantella --cleanup`'s exit status and output, when it ran.
    pub cleanup: Option<(Option<ExitStatus>, String)>,
    /// What was left after the cleanup (equal to `before` when none ran).
    pub after: Left,
    /// Rank PIDs that were zombies at the end: dead but not reaped by their new parent.
    pub zombies: usize,
    /// Orphaned processes of the job (ranks whose launcher died) that the soak reaped.
    pub orphans: usize,
    /// The last lines of `tarantella`'s stderr.
    pub stderr_tail: Vec<String>,
}

impl Outcome {
    /// Whether the job was not killed (no kill planned, or the kill missed).
    pub fn unkilled(&self) -> bool {
        !matches!(self.kill, KillOutcome::Sent(_))
    }

    /// An unkilled job that did not exit 0 with every rank done, or any job that hung.
    pub fn failed_unexpectedly(&self, ranks: usize) -> bool {
        self.hung
            || (self.unkilled() && (self.exit.is_none_or(|s| !s.success()) || self.done < ranks))
    }
}

enum Event {
    Out(String),
    Err(String),
    OutEnd,
    ErrEnd,
    Exit(std::io::Result<ExitStatus>),
}

/// `CLOCK_MONOTONIC` in nanoseconds, the clock `soak-rank` stamps its lines with.
pub fn mono_ns() -> u64 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .expect("CLOCK_MONOTONIC is always there");
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
}

/// A `soak-rank` line: its word (`start`, `ready`, `done`) and its `key=value` fields.
#[derive(Debug, PartialEq, Eq)]
pub struct RankLine {
    /// `start`, `ready` or `done`.
    pub what: String,
    /// The rank, from `rank=`.
    pub rank: u16,
    /// `pid=`, `t=` (ns, monotonic), `init_us=`.
    pub pid: Option<i32>,
    /// Monotonic nanoseconds.
    pub t: Option<u64>,
    /// How long `Context::init` took.
    pub init_us: Option<u64>,
}

/// Parses a line of `tarantella`'s output (`[rank K] soak-rank ready rank=K ...`).
pub fn parse_line(line: &str) -> Option<RankLine> {
    let rest = &line[line.find("soak-rank ")? + "soak-rank ".len()..];
    let mut words = rest.split_whitespace();
    let what = words.next()?.to_string();
    let mut out = RankLine {
        what,
        rank: u16::MAX,
        pid: None,
        t: None,
        init_us: None,
    };
    for w in words {
        match w.split_once('=') {
            Some(("rank", v)) => out.rank = v.parse().ok()?,
            Some(("pid", v)) => out.pid = v.parse().ok(),
            Some(("t", v)) => out.t = v.parse().ok(),
            Some(("init_us", v)) => out.init_us = v.parse().ok(),
            _ => {}
        }
    }
    (out.rank != u16::MAX).then_some(out)
}

#[derive(Default, Clone, Copy)]
struct RankSeen {
    pid: Option<i32>,
    start_t: Option<u64>,
    ready_t: Option<u64>,
    init_us: Option<u64>,
    done_t: Option<u64>,
}

/// Whether `pid` is still a process of `job` (checked before a rank is signalled, so a
/// reused PID is never hit).
fn belongs_to(pid: i32, job: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
        env.split(|&b| b == 0)
            .any(|kv| kv == format!("TARANTELLA_JOB_ID={job}").as_bytes())
    })
}

/// The windows the kill points draw their delays from, in microseconds: twice the medians
/// of the jobs so far.
#[derive(Clone, Copy, Debug)]
pub struct Windows {
    /// For a launcher kill at `start`: from the spawn.
    pub launch_us: u64,
    /// For a kill at `init`: from the (first or target's) `start` line.
    pub init_us: u64,
}

/// Runs one job to its end and measures it.
pub fn run(setup: &Setup, index: usize, id: &str, plan: JobPlan, windows: Windows) -> Outcome {
    let mut cmd = Command::new(&setup.tarantella);
    cmd.arg("-n")
        .arg(setup.ranks.to_string())
        .arg("--output-on-all-devices")
        .arg("--transport")
        .arg(&setup.transport)
        .arg("--init-timeout")
        .arg(setup.init_timeout_s.to_string())
        .arg("--grace")
        .arg(setup.grace_s.to_string())
        .arg("--job-id")
        .arg(id)
        .arg("--")
        .arg(&setup.rank_program)
        .arg("--run-ms")
        .arg(plan.run_ms.to_string())
        .arg("--timeout-ms")
        .arg(setup.op_timeout_ms.to_string())
        .env("TARANTELLA_RUN_DIR", &setup.runs)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let spawned = Instant::now();
    let spawn_ns = mono_ns();
    let mut out = Outcome {
        index,
        id: id.to_string(),
        plan,
        kill: if plan.kill.is_some() {
            KillOutcome::Missed("not reached".into())
        } else {
            KillOutcome::None
        },
        exit: None,
        hung: false,
        start_us: None,
        launch_us: None,
        init_us: None,
        done: 0,
        wall: Duration::ZERO,
        before: Left::default(),
        settle: Duration::ZERO,
        cleanup: None,
        after: Left::default(),
        zombies: 0,
        orphans: 0,
        stderr_tail: Vec::new(),
    };
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            out.stderr_tail = vec![format!(
                "soak: cannot start {}: {e}",
                setup.tarantella.display()
            )];
            return out;
        }
    };
    let launcher = child.id() as i32;
    let (tx, rx) = channel();
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    let t = tx.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = t.send(Event::Out(line));
        }
        let _ = t.send(Event::OutEnd);
    });
    let t = tx.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = t.send(Event::Err(line));
        }
        let _ = t.send(Event::ErrEnd);
    });
    std::thread::spawn(move || {
        let _ = tx.send(Event::Exit(child.wait()));
    });

    let ranks = usize::from(setup.ranks);
    let mut seen = vec![RankSeen::default(); ranks];
    let mut kill_at: Option<Instant> = None;
    let mut pending = plan.kill;
    if let Some(k) = pending.filter(|k| k.target == Target::Launcher && k.point == Point::Start) {
        kill_at = Some(spawned + Duration::from_micros(k.delay_us(windows.launch_us)));
    }
    let init_window = windows.init_us;
    let deadline = spawned + setup.job_timeout;
    let mut hard_deadline = deadline;
    let mut stderr_tail: Vec<String> = Vec::new();
    let (mut out_open, mut err_open) = (true, true);
    let mut drain_until: Option<Instant> = None;
    loop {
        if out.exit.is_some() && !out_open && !err_open {
            break;
        }
        let now = Instant::now();
        let mut wake = hard_deadline;
        if let Some(k) = kill_at {
            wake = wake.min(k);
        }
        if let Some(d) = drain_until {
            wake = wake.min(d);
        }
        let event = rx.recv_timeout(wake.saturating_duration_since(now));
        match event {
            Ok(Event::Out(line)) => {
                let Some(l) = parse_line(&line) else { continue };
                let Some(s) = seen.get_mut(usize::from(l.rank)) else {
                    continue;
                };
                match l.what.as_str() {
                    "start" => {
                        s.pid = l.pid;
                        s.start_t = l.t;
                    }
                    "ready" => {
                        s.ready_t = l.t;
                        s.init_us = l.init_us;
                    }
                    "done" => s.done_t = l.t.or(Some(mono_ns())),
                    _ => {}
                }
                if kill_at.is_none() {
                    if let Some(k) = pending {
                        let first_start = l.what == "start"
                            && seen.iter().filter(|s| s.start_t.is_some()).count() == 1;
                        let all_ready =
                            l.what == "ready" && seen.iter().all(|s| s.ready_t.is_some());
                        let target_start = l.what == "start" && k.target == Target::Rank(l.rank);
                        let delay_us = match k.point {
                            Point::Start => 0,
                            Point::Init => k.delay_us(init_window),
                            Point::Run => k.delay_us(plan.run_ms * 1000),
                        };
                        let fire = match (k.target, k.point) {
                            (Target::Launcher, Point::Start) => false,
                            (Target::Launcher, Point::Init) => first_start,
                            (Target::Rank(_), Point::Start | Point::Init) => target_start,
                            (_, Point::Run) => all_ready,
                        };
                        if fire {
                            kill_at = Some(Instant::now() + Duration::from_micros(delay_us));
                        }
                    }
                }
            }
            Ok(Event::Err(line)) => {
                stderr_tail.push(line);
                if stderr_tail.len() > 20 {
                    stderr_tail.remove(0);
                }
            }
            Ok(Event::OutEnd) => out_open = false,
            Ok(Event::ErrEnd) => err_open = false,
            Ok(Event::Exit(status)) => {
                out.wall = spawned.elapsed();
                out.exit = status.ok();
                if out.exit.is_none() {
                    break;
                }
                // The launcher is gone; its output may still be in the pipes (bounded wait:
                // a process that outlived it may hold them open).
                drain_until = Some(Instant::now() + Duration::from_secs(2));
                kill_at = None;
                if pending.is_some() {
                    out.kill = KillOutcome::Missed("the job ended first".into());
                    pending = None;
                }
            }
            Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {
                let now = Instant::now();
                if drain_until.is_some_and(|d| now >= d) {
                    break;
                }
                if let (Some(at), Some(k)) = (kill_at, pending) {
                    if now >= at {
                        kill_at = None;
                        pending = None;
                        let pid = match k.target {
                            Target::Launcher => Some(launcher),
                            Target::Rank(r) => {
                                seen[usize::from(r)].pid.filter(|&p| belongs_to(p, id))
                            }
                        };
                        let sent_ns = mono_ns();
                        out.kill = match pid {
                            Some(p) => match kill(Pid::from_raw(p), k.sig.signal()) {
                                Ok(()) => KillOutcome::Sent(Sent {
                                    at_us: (sent_ns - spawn_ns) / 1000,
                                    started: 0,
                                    ready: 0,
                                    done: 0,
                                }),
                                Err(e) => KillOutcome::Missed(format!("kill: {e}")),
                            },
                            None => KillOutcome::Missed("the rank was gone".into()),
                        };
                        continue;
                    }
                }
                if now >= hard_deadline && out.exit.is_none() {
                    if out.hung {
                        break; // not even SIGKILL ended it
                    }
                    out.hung = true;
                    let left = leftovers::processes(id, false);
                    stderr_tail.push(format!(
                        "soak: job hung after {:?}; its processes: {}; sending SIGKILL to tarantella",
                        setup.job_timeout,
                        left.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ")
                    ));
                    let _ = kill(Pid::from_raw(launcher), Signal::SIGKILL);
                    hard_deadline = now + Duration::from_secs(10);
                }
            }
        }
    }
    if out.exit.is_none() {
        out.wall = spawned.elapsed();
    }
    // Where the kill landed, by the ranks' own clocks.
    if let KillOutcome::Sent(s) = &mut out.kill {
        let at = spawn_ns + s.at_us * 1000;
        let before = |t: Option<u64>| t.is_some_and(|t| t < at);
        s.started = seen.iter().filter(|r| before(r.start_t)).count();
        s.ready = seen.iter().filter(|r| before(r.ready_t)).count();
        s.done = seen.iter().filter(|r| before(r.done_t)).count();
    }
    if seen.iter().all(|s| s.ready_t.is_some()) {
        let last = seen
            .iter()
            .filter_map(|s| s.ready_t)
            .max()
            .unwrap_or(spawn_ns);
        out.start_us = Some(last.saturating_sub(spawn_ns) / 1000);
        out.init_us = seen.iter().filter_map(|s| s.init_us).max();
    }
    out.launch_us = seen
        .iter()
        .filter_map(|s| s.start_t)
        .min()
        .map(|t| t.saturating_sub(spawn_ns) / 1000);
    out.done = seen.iter().filter(|s| s.done_t.is_some()).count();
    out.stderr_tail = stderr_tail;

    // What is left: first once the job's processes had time to go (a rank whose launcher was
    // killed gets SIGTERM from the kernel; one that is stopped only from --cleanup).
    let settle = Duration::from_secs_f64(setup.grace_s + 2.0);
    let (before, took, orphans) = leftovers::settle(&setup.runs, id, settle);
    out.before = before;
    out.settle = took;
    out.orphans = orphans;
    out.after = out.before.clone();
    if !out.unkilled() || !out.before.is_empty() || out.hung {
        let c = cleanup(setup, id);
        let (after, _, orphans) = leftovers::settle(&setup.runs, id, Duration::from_secs(2));
        out.after = after;
        out.orphans += orphans;
        out.cleanup = Some(c);
    }
    let pids: Vec<i32> = seen.iter().filter_map(|s| s.pid).collect();
    out.zombies = leftovers::zombies(&pids);
    out
}

/// `tarantella --cleanup --job-id ID`, as a user runs it after a crash (bounded: SIGKILL
/// after a minute).
fn cleanup(setup: &Setup, id: &str) -> (Option<ExitStatus>, String) {
    let child = Command::new(&setup.tarantella)
        .arg("--cleanup")
        .arg("--job-id")
        .arg(id)
        .arg("--grace")
        .arg(setup.grace_s.to_string())
        .env("TARANTELLA_RUN_DIR", &setup.runs)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let child = match child {
        Ok(c) => c,
        Err(e) => return (None, format!("cannot start: {e}")),
    };
    let pid = child.id() as i32;
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let bound = Duration::from_secs(60);
    let got = rx.recv_timeout(bound).or_else(|_| {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        rx.recv_timeout(Duration::from_secs(5))
    });
    match got {
        Ok(Ok(o)) => {
            let text = String::from_utf8_lossy(&o.stdout).into_owned()
                + &String::from_utf8_lossy(&o.stderr);
            (Some(o.status), text.trim().to_string())
        }
        Ok(Err(e)) => (None, format!("wait: {e}")),
        Err(_) => (None, format!("did not end within {bound:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_relayed_rank_lines() {
        let l = parse_line("[rank 1] soak-rank ready rank=1 pid=42 t=123 init_us=7").unwrap();
        assert_eq!(
            l,
            RankLine {
                what: "ready".into(),
                rank: 1,
                pid: Some(42),
                t: Some(123),
                init_us: Some(7),
            }
        );
        assert!(parse_line("[rank 0] something else").is_none());
        assert!(parse_line("soak-rank start rank=? pid=1").is_none());
    }
}
