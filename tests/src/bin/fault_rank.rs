//! One rank of a fault-injection job (`tests/tests/fault_matrix.rs`): every rank runs a
//! phase, and the victim injects a fault at a fixed point of it.
//!
//! `fault_rank PHASE FAULT VICTIM`, started by `tarantella`:
//!
//! - PHASE: `startup` (the victim injects before `Context::init`, so the others wait for it
//!   in init), `barrier` (a loop of barriers on `Group::ALL`), `allreduce` (a loop of
//!   `ctx.allreduce` on `Group::ALL`) or `stream` (the victim sends 64 KiB `write_notify`s to
//!   its neighbour, which acknowledges each with a notification; the other ranks wait for a
//!   word that never comes). In the loops the victim injects at step [`FAULT_STEP`] (in
//!   `stream` right after posting that step's write, with the data still in flight).
//! - FAULT: `kill` (SIGKILL to itself), `term` (SIGTERM), `stop` (SIGSTOP), `exit0`
//!   (`std::process::exit(0)` without `term`) or `close` (`shutdown(2)` of every socket
//!   in `/proc/self/fd`, then idling; before init there are none, so at start-up this is a
//!   rank that hangs before joining).
//! - VICTIM: the rank that injects the fault.
//!
//! Every timeout (init's, from `GASPI_INIT_TIMEOUT_MS`, which `tarantella --init-timeout` sets,
//! and each call's) is that one configured timeout. The victim prints
//! `rank V: injecting FAULT in PHASE at step K` first; a survivor prints
//! `rank R: PHASE step K: <error>` (the error's `Display`) when a call fails and exits with
//! status 3. Nothing ends with status 0 but the victim's `exit0`.

use std::io::Write;
use std::time::Duration;

use gaspi::{
    Alloc, Context, Group, Local, NotificationId, QueueId, Rank, ReduceOp, Remote, SegmentId,
    Timeout,
};

/// The step of a loop at which the victim injects its fault.
const FAULT_STEP: u64 = 20;
/// The timeout when `GASPI_INIT_TIMEOUT_MS` is not set.
const DEFAULT_TIMEOUT_MS: u64 = 4_000;
/// The size of one write of the `stream` phase.
const STREAM_BYTES: u64 = 64 * 1024;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Startup,
    Barrier,
    Allreduce,
    Stream,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Fault {
    Kill,
    Term,
    Stop,
    Exit0,
    Close,
}

fn usage() -> ! {
    eprintln!(
        "usage: fault_rank startup|barrier|allreduce|stream kill|term|stop|exit0|close VICTIM"
    );
    std::process::exit(2)
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Injects `fault` into this process; returns only into an idle loop.
fn inject(me: u16, fault: Fault, phase: &str, step: u64) -> ! {
    let name = match fault {
        Fault::Kill => "kill",
        Fault::Term => "term",
        Fault::Stop => "stop",
        Fault::Exit0 => "exit0",
        Fault::Close => "close",
    };
    say(&format!(
        "rank {me}: injecting {name} in {phase} at step {step}"
    ));
    use nix::sys::signal::{kill, Signal};
    let this = nix::unistd::Pid::this();
    match fault {
        Fault::Kill => drop(kill(this, Signal::SIGKILL)),
        Fault::Term => drop(kill(this, Signal::SIGTERM)),
        Fault::Stop => drop(kill(this, Signal::SIGSTOP)),
        Fault::Exit0 => std::process::exit(0),
        Fault::Close => close_sockets(),
    }
    // A handled SIGTERM that returns, a SIGSTOP that is continued, or closed sockets: the
    // rank stays, silent, until the launcher stops it.
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// `shutdown(SHUT_RDWR)` on every socket this process holds (they stay open, so no number
/// is reused under the runtime's threads).
fn close_sockets() {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    for entry in dir.flatten() {
        let is_socket = std::fs::read_link(entry.path())
            .is_ok_and(|t| t.to_string_lossy().starts_with("socket:"));
        let fd = entry.file_name().to_string_lossy().parse::<i32>();
        if let (true, Ok(fd)) = (is_socket, fd) {
            let _ = nix::sys::socket::shutdown(fd, nix::sys::socket::Shutdown::Both);
        }
    }
}

/// A survivor's end: one line naming the error, status 3.
fn failed(me: u16, what: &str, err: gaspi::Error) -> ! {
    // As a program reports an error to its user (its `Display`), which is what the
    // launcher reads to find the rank at fault.
    say(&format!("rank {me}: {what}: {err}"));
    std::process::exit(3)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [phase, fault, victim] = args.as_slice() else {
        usage()
    };
    let phase = match phase.as_str() {
        "startup" => Phase::Startup,
        "barrier" => Phase::Barrier,
        "allreduce" => Phase::Allreduce,
        "stream" => Phase::Stream,
        _ => usage(),
    };
    let fault = match fault.as_str() {
        "kill" => Fault::Kill,
        "term" => Fault::Term,
        "stop" => Fault::Stop,
        "exit0" => Fault::Exit0,
        "close" => Fault::Close,
        _ => usage(),
    };
    let Ok(victim) = victim.parse::<u16>() else {
        usage()
    };
    let me: u16 = std::env::var("GASPI_RANK")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0);
    let t = Timeout::ms(
        std::env::var("GASPI_INIT_TIMEOUT_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(DEFAULT_TIMEOUT_MS),
    );
    let is_victim = me == victim;

    if phase == Phase::Startup && is_victim {
        inject(me, fault, "startup", 0);
    }
    let ctx = Context::init().unwrap_or_else(|e| failed(me, "init", e));
    let n = ctx.num_ranks();
    let seg = SegmentId(0);
    ctx.segment_create(seg, 1 << 20, Group::ALL, t, Alloc::Initialized)
        .unwrap_or_else(|e| failed(me, "segment_create", e));
    match phase {
        Phase::Startup => {
            // Only survivors get here, and only if init did not notice the missing victim:
            // wait for it (it never comes) in a barrier.
            ctx.barrier(Group::ALL, t)
                .unwrap_or_else(|e| failed(me, "startup barrier", e));
            say(&format!("rank {me}: the job started without rank {victim}"));
            std::process::exit(4)
        }
        Phase::Barrier => {
            for step in 0.. {
                if is_victim && step == FAULT_STEP {
                    inject(me, fault, "barrier", step);
                }
                ctx.barrier(Group::ALL, t)
                    .unwrap_or_else(|e| failed(me, &format!("barrier step {step}"), e));
            }
        }
        Phase::Allreduce => {
            for step in 0.. {
                if is_victim && step == FAULT_STEP {
                    inject(me, fault, "allreduce", step);
                }
                let mut sum = [0u64];
                ctx.allreduce(&[step], &mut sum, ReduceOp::Sum, Group::ALL, t)
                    .unwrap_or_else(|e| failed(me, &format!("allreduce step {step}"), e));
                assert_eq!(sum[0], step * u64::from(n), "allreduce sum");
            }
        }
        Phase::Stream => stream(&ctx, me, victim, fault, t),
    }
    unreachable!("the loops end only by a fault")
}

/// The `stream` phase: the victim writes to its neighbour, which acknowledges every write.
fn stream(ctx: &Context, me: u16, victim: u16, fault: Fault, t: Timeout) -> ! {
    let seg = SegmentId(0);
    let q = QueueId(0);
    let neighbour = if victim == 0 { 1 } else { victim - 1 };
    let (data, ack, never) = (NotificationId(0), NotificationId(1), NotificationId(7));
    if me == victim {
        for step in 0u64.. {
            let value = (step % 1_000_000) as u32 + 1;
            ctx.write_notify(
                Local::new(seg, 0),
                Remote::new(Rank(neighbour), seg, 4096),
                STREAM_BYTES,
                data,
                value,
                q,
            )
            .unwrap_or_else(|e| failed(me, &format!("stream step {step}: write_notify"), e));
            if step == FAULT_STEP {
                inject(me, fault, "stream", step);
            }
            ctx.notify_waitsome(seg, ack, 1, t)
                .unwrap_or_else(|e| failed(me, &format!("stream step {step}: ack"), e));
            ctx.notify_reset(seg, ack)
                .unwrap_or_else(|e| failed(me, "notify_reset", e));
            ctx.wait(q, t)
                .unwrap_or_else(|e| failed(me, &format!("stream step {step}: wait"), e));
        }
    } else if me == neighbour {
        for step in 0u64.. {
            ctx.notify_waitsome(seg, data, 1, t)
                .unwrap_or_else(|e| failed(me, &format!("stream step {step}: data"), e));
            ctx.notify_reset(seg, data)
                .unwrap_or_else(|e| failed(me, "notify_reset", e));
            ctx.notify(seg, Rank(victim), ack, 1, q)
                .unwrap_or_else(|e| failed(me, &format!("stream step {step}: notify"), e));
            ctx.wait(q, t)
                .unwrap_or_else(|e| failed(me, &format!("stream step {step}: wait"), e));
        }
    } else {
        // Nobody writes `never`: the wait ends with the failure or the timeout.
        loop {
            ctx.notify_waitsome(seg, never, 1, t)
                .unwrap_or_else(|e| failed(me, "stream bystander wait", e));
        }
    }
    unreachable!("the stream ends only by a fault")
}
