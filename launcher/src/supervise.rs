//! Running a job: start every rank, watch them, and tear the whole job down when one fails,
//! when `tarantella` is signalled, when the job's time limit (`--timeout`) is up, or when
//! all have finished.

use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::blame::{self, Culprit, Ended};
use crate::cleanup;
use crate::error::Result;
use crate::plan::{Mode, Plan};
use crate::prune;
use crate::report;
use crate::rundir::{JobDir, PidRecord};
use crate::signals;
use crate::spawn::{self, Event, Kind, Proc, RankStatus};

const TICK: Duration = Duration::from_millis(25);
/// The least time the ranks' output gets to arrive once the ranks are gone: what a rank
/// wrote right before it exited may still be in the pipe, and copying it takes a moment.
const MIN_OUTPUT_DRAIN: Duration = Duration::from_secs(1);

/// `tarantella`'s exit status when the job ran into its time limit (`--timeout`): that of
/// `timeout(1)`, distinct from the statuses ranks exit with when they fail by themselves.
pub const TIME_LIMIT_EXIT: i32 = 124;

/// Why the job ends.
enum Outcome {
    Done,
    /// `procs[idx]` failed first.
    Failed {
        idx: usize,
        label: String,
        status: RankStatus,
    },
    Interrupted(i32),
    /// The time limit (`--timeout`) is up.
    TimedOut,
}

/// Runs the job described by `plan`; returns tarantella's exit status.
pub fn run(plan: &mut Plan) -> Result<i32> {
    let ssh = match plan.mode {
        Mode::Ssh => spawn::ssh::base_command()?,
        _ => Vec::new(),
    };
    signals::install()?;
    let mut dir = JobDir::create(&plan.run_dir, &ssh)?;
    // After this job's directory exists, so that it counts among those kept.
    prune::old_runs(&plan.run_layout, &plan.run_dir, plan.keep_runs);
    if let Err(e) = prepare(plan, &ssh, &dir) {
        // Nothing has started on any host yet (a host ssh cannot reach fails here, when
        // rank 0's ports are asked for): only the job record to close.
        dir.finish();
        return Err(e);
    }
    if plan.nranks > 1 && !plan.show_all_output {
        say!(
            "tarantella: job {}: output of ranks other than 0 goes to {}/rank-K.log",
            plan.job_id,
            plan.run_dir.display()
        );
    }

    // The time limit counts from the start of the first rank, as mpirun's does. Too far
    // off to be represented, it is no limit.
    let deadline = plan.time_limit.and_then(|l| Instant::now().checked_add(l));
    let (tx, rx) = mpsc::channel();
    let mut procs: Vec<Proc> = Vec::new();
    let mut outcome = None;
    if plan.mode == Mode::Slurm {
        match spawn::slurm::spawn(plan) {
            Ok(p) => procs.push(p),
            Err(e) => {
                finish(plan, &ssh, &dir, &[]);
                return Err(e);
            }
        }
    }
    for r in plan.ranks.clone() {
        if let Some((sig, _)) = signals::received() {
            outcome = Some(Outcome::Interrupted(sig));
            break;
        }
        if is_past(deadline) {
            outcome = Some(Outcome::TimedOut);
            break;
        }
        let shown = plan.show_all_output || r.rank == 0;
        let started = spawn::sinks(r.rank, shown, plan.show_all_output, &dir.log_path(r.rank))
            .map_err(crate::error::Error::from)
            .and_then(|sinks| {
                let env = plan.rank_env(&r);
                let argv = plan.rank_argv(&r);
                let (token_var, token) = plan.token_var();
                match &r.host {
                    None => spawn::local::spawn(r.rank, &argv, &env, (token_var, &token), sinks),
                    Some(h) => spawn::ssh::spawn(
                        procs.len(),
                        r.rank,
                        h,
                        &ssh,
                        &env,
                        &argv,
                        &token,
                        &plan.machine_file,
                        &plan.job_id,
                        sinks,
                        tx.clone(),
                    ),
                }
            });
        // Supervised before its PID is recorded: should the record fail, the teardown
        // below must stop this rank too, with those started before it.
        let started = started.and_then(|p| {
            let rec = PidRecord {
                rank: r.rank,
                host: None,
                pid: p.child.id() as i32,
            };
            procs.push(p);
            dir.record(&rec)
        });
        if let Err(e) = started {
            teardown(&mut procs, plan.grace, &rx, &mut dir);
            finish(plan, &ssh, &dir, &unreached_hosts(&procs));
            return Err(e);
        }
    }
    let outcome = match outcome {
        Some(o) => o,
        None => watch(&mut procs, &rx, &mut dir, deadline),
    };
    match &outcome {
        Outcome::Failed { label, status, .. } => {
            say!("tarantella: {label} {status}; stopping the other ranks")
        }
        Outcome::Interrupted(sig) => say!(
            "tarantella: received {}; stopping all ranks",
            Signal::try_from(*sig)
                .map(|s| s.as_str())
                .unwrap_or("a signal")
        ),
        Outcome::TimedOut => say!(
            "tarantella: job {} exceeded its time limit of {} s (--timeout); stopping all ranks",
            plan.job_id,
            plan.time_limit.unwrap_or_default().as_secs_f64()
        ),
        Outcome::Done => {}
    }
    // Before the teardown, which ends them: the ranks that were stopped or still running
    // when the first failure came (see `blame`).
    let snapshot = match &outcome {
        Outcome::Failed { .. } => stalled(&mut procs),
        _ => Snapshot::default(),
    };
    teardown(&mut procs, plan.grace, &rx, &mut dir);
    finish(plan, &ssh, &dir, &unreached_hosts(&procs));
    Ok(match outcome {
        Outcome::Done => 0,
        Outcome::Failed { idx, label, status } => {
            let (label, status, why) = match (plan.mode, spawn::slurm::first_failure(&plan.run_dir))
            {
                (Mode::Slurm, Some((rank, host, code))) => {
                    let label = format!("rank {rank} on {host}");
                    let shown = plan.show_all_output || rank == 0;
                    let why = report::from_log(&label, rank, shown, &dir.log_path(rank));
                    (label, RankStatus::Exited(code), why)
                }
                _ => {
                    let p = &procs[idx];
                    let why = match p.rank {
                        Some(rank) => {
                            let shown = plan.show_all_output || rank == 0;
                            report::from_tails(&label, rank, shown, &p.tails, &dir.log_path(rank))
                        }
                        None => Vec::new(), // srun itself, with no rank to blame
                    };
                    (label, status, why)
                }
            };
            let first = procs[idx].rank;
            let culprit = first
                .filter(|_| plan.mode != Mode::Slurm)
                .and_then(|first| {
                    let lines_of = |rank: usize| {
                        procs
                            .iter()
                            .find(|p| p.rank == Some(rank))
                            .map(|p| [p.tails.stdout.lines(), p.tails.stderr.lines()].concat())
                            .unwrap_or_default()
                    };
                    blame::culprit(first, &snapshot.stopped, &snapshot.ended, lines_of)
                });
            match culprit {
                Some(c) => report_culprit(&plan.job_id, &procs, &c, &label, &status),
                None => {
                    let p = &procs[idx];
                    let first = (p.rank, p.host.as_str());
                    let line =
                        report::first_failure(&plan.job_id, &label, first, &status, &p.tails);
                    say!("{line}");
                }
            }
            for line in why {
                say!("{line}");
            }
            status.exit_code()
        }
        Outcome::Interrupted(sig) => 128 + sig,
        Outcome::TimedOut => TIME_LIMIT_EXIT,
    })
}

/// Whether `deadline` (if any) has come.
fn is_past(deadline: Option<Instant>) -> bool {
    deadline.is_some_and(|d| Instant::now() >= d)
}

/// What the ranks were doing when the first failure came (see `blame`).
#[derive(Default)]
struct Snapshot {
    /// Local ranks with a stopped process: (rank, pid).
    stopped: Vec<(usize, i32)>,
    /// How the ranks that had ended ended (the others were still running).
    ended: Vec<(usize, Ended)>,
}

/// The snapshot `blame` decides from.
fn stalled(procs: &mut [Proc]) -> Snapshot {
    let mut stopped = Vec::new();
    let mut ended = Vec::new();
    for p in procs {
        // The watch stopped polling at the first failure: the ranks after it in rank order
        // may have ended in the same tick.
        p.poll();
        let Some(rank) = p.rank else { continue };
        match &p.status {
            None => {}
            Some(RankStatus::Exited(0)) => ended.push((rank, Ended::Success)),
            Some(RankStatus::Signaled(sig)) => ended.push((rank, Ended::Signal(*sig))),
            Some(_) => ended.push((rank, Ended::Failure)),
        }
        if matches!(p.kind, Kind::Local) {
            let pids = blame::stopped_in_group(std::path::Path::new("/proc"), p.pgid().as_raw());
            stopped.extend(pids.into_iter().map(|pid| (rank, pid)));
        }
    }
    Snapshot { stopped, ended }
}

/// The report's first line when a rank other than the first to fail stopped making
/// progress: it names that rank, then the one that noticed first.
fn report_culprit(job: &str, procs: &[Proc], c: &Culprit, label: &str, status: &RankStatus) {
    let rank = c.rank();
    let who = procs
        .iter()
        .find(|p| p.rank == Some(rank))
        .map_or_else(|| format!("rank {rank}"), Proc::label);
    say!(
        "tarantella: job {job} failed: {who} {} ({}); first to notice: {label} {status}",
        match c {
            Culprit::Killed { .. } => "was killed",
            _ => "stopped making progress",
        },
        c.why()
    );
}

/// What the ranks need before they start: their machine file and free ports.
fn prepare(plan: &mut Plan, ssh: &[String], dir: &JobDir) -> Result<()> {
    if plan.mode == Mode::Local {
        // GASPI_MFILE of the local ranks; ssh ranks get theirs from their wrapper.
        dir.write_machine_file(&plan.machine_file)?;
    }
    if plan.mode != Mode::Slurm {
        choose_ports(plan, ssh)?;
    }
    Ok(())
}

/// Picks free ports on rank 0's host: the rendezvous of our bootstrap (for more than one
/// rank) and `MASTER_PORT`, which is the program's own (e.g. torch.distributed's).
fn choose_ports(plan: &mut Plan, ssh: &[String]) -> Result<()> {
    let wanted = if plan.nranks > 1 { 2 } else { 1 };
    let ports = match plan.ranks[0].host.as_deref() {
        None => spawn::ssh::free_local_ports(wanted)?,
        Some(h) => spawn::ssh::free_remote_ports(ssh, h, wanted)?,
    };
    plan.master_port = ports.last().copied();
    if plan.nranks > 1 {
        let addr = plan.master_addr();
        plan.rendezvous = Some(if addr.contains(':') {
            format!("[{addr}]:{}", ports[0])
        } else {
            format!("{addr}:{}", ports[0])
        });
    }
    Ok(())
}

/// Waits until every rank succeeded, one failed, a signal arrived, or `deadline` (the time
/// limit) came.
fn watch(
    procs: &mut [Proc],
    rx: &Receiver<Event>,
    dir: &mut JobDir,
    deadline: Option<Instant>,
) -> Outcome {
    loop {
        if let Some((sig, _)) = signals::received() {
            return Outcome::Interrupted(sig);
        }
        let mut all_ok = true;
        for (idx, p) in procs.iter_mut().enumerate() {
            p.poll();
            match &p.status {
                Some(s) if !s.success() => {
                    return Outcome::Failed {
                        idx,
                        label: p.label(),
                        status: s.clone(),
                    }
                }
                Some(_) => {}
                None => all_ok = false,
            }
        }
        if all_ok {
            return Outcome::Done;
        }
        if is_past(deadline) {
            return Outcome::TimedOut;
        }
        // The deadline shortens the last wait, so that the limit is kept to the millisecond.
        let wait = deadline.map_or(TICK, |d| {
            TICK.min(d.saturating_duration_since(Instant::now()))
        });
        drain(procs, rx, dir, wait);
    }
}

/// Records the remote PIDs that arrived, waiting up to `wait` for the first event.
fn drain(procs: &[Proc], rx: &Receiver<Event>, dir: &mut JobDir, wait: Duration) {
    let mut next = rx.recv_timeout(wait).ok();
    while let Some(Event::RemotePid { idx, pid }) = next {
        if let Some(p) = procs.get(idx) {
            let rec = PidRecord {
                rank: p.rank.unwrap_or(0),
                host: Some(p.host.clone()),
                pid,
            };
            if let Err(e) = dir.record(&rec) {
                say!("tarantella: warning: {e}");
            }
        }
        next = rx.try_recv().ok();
    }
}

/// SIGTERM to every rank's process group, SIGKILL after `grace` (or at a second signal),
/// then waits (bounded) until the ranks are gone and their output has arrived.
fn teardown(procs: &mut [Proc], grace: Duration, rx: &Receiver<Event>, dir: &mut JobDir) {
    let signals_at_start = signals::received().map_or(0, |(_, n)| n);
    for p in procs.iter_mut() {
        p.poll();
        if p.reaped.is_none() || (matches!(p.kind, Kind::Local) && p.group_alive()) {
            p.signal(Signal::SIGTERM);
        }
    }
    let gone = |procs: &mut [Proc]| {
        procs.iter_mut().all(|p| {
            p.poll();
            p.reaped.is_some() && !(matches!(p.kind, Kind::Local) && p.group_alive())
        })
    };
    let deadline = Instant::now() + grace;
    while !gone(procs) && Instant::now() < deadline {
        if signals::received().map_or(0, |(_, n)| n) > signals_at_start {
            break; // a second Ctrl-C: no more patience
        }
        drain(procs, rx, dir, TICK);
    }
    if !gone(procs) {
        for p in procs.iter_mut() {
            if p.reaped.is_none() || (matches!(p.kind, Kind::Local) && p.group_alive()) {
                p.signal(Signal::SIGKILL);
            }
        }
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while !gone(procs) && Instant::now() < deadline {
        drain(procs, rx, dir, TICK);
        procs.iter_mut().for_each(Proc::kill_overdue_client);
    }
    for p in procs.iter_mut() {
        if p.reaped.is_none() {
            say!("tarantella: warning: {} did not stop", p.label());
        }
        if let Kind::Ssh { control, .. } = &mut p.kind {
            *control = None;
        }
    }
    drain_output(procs, grace);
}

/// Waits until everything the ranks wrote has reached the terminal or their logs. Bounded,
/// since a process that left a rank's process group (and so outlived the teardown) can keep
/// that rank's output open indefinitely: after the grace period (at least
/// [`MIN_OUTPUT_DRAIN`]) tarantella stops waiting for it.
fn drain_output(procs: &[Proc], grace: Duration) {
    let deadline = Instant::now() + grace.max(MIN_OUTPUT_DRAIN);
    for p in procs {
        if !p.open_streams.wait_closed(deadline) {
            say!(
                "tarantella: warning: the output of {} is still open, held by a process \
                 that outlived it; not waiting for it any longer",
                p.label()
            );
        }
    }
}

/// The ssh hosts where every rank ended [`RankStatus::SshUnreachable`]: nothing of the job got
/// there, and asking them again to clean up would only fail again.
fn unreached_hosts(procs: &[Proc]) -> Vec<String> {
    let mut hosts: Vec<String> = procs
        .iter()
        .filter(|p| p.status == Some(RankStatus::SshUnreachable))
        .map(|p| p.host.clone())
        .collect();
    hosts.retain(|h| {
        procs
            .iter()
            .filter(|p| &p.host == h)
            .all(|p| p.status == Some(RankStatus::SshUnreachable))
    });
    hosts.sort();
    hosts.dedup();
    hosts
}

/// Removes the job's shared-memory files on every host but the `unreached` ones and closes
/// the job record.
fn finish(plan: &Plan, ssh: &[String], dir: &JobDir, unreached: &[String]) {
    let hosts = plan.hosts();
    let hosts = hosts
        .iter()
        .filter(|h| h.as_ref().is_none_or(|h| !unreached.contains(h)));
    std::thread::scope(|s| {
        for h in hosts {
            s.spawn(move || match h {
                None => cleanup::remove_local_shm(&plan.job_id),
                Some(h) => {
                    if let Err(e) = spawn::ssh::remove_leftovers(ssh, h, &plan.job_id) {
                        say!(
                            "tarantella: warning: shared memory and machine files on {h} \
                             not removed: {e}"
                        );
                    }
                }
            });
        }
    });
    if plan.mode == Mode::Slurm {
        cleanup::remove_local_shm(&plan.job_id);
    }
    dir.finish();
}
