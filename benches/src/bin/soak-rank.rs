//! The rank program of the `soak` benchmark: one short GASPI job's rank, started by
//! `tarantella` (`tarantella -n 2 --output-on-all-devices -- soak-rank --run-ms 50`).
//!
//! Each rank prints, on stdout, with the monotonic clock (`CLOCK_MONOTONIC`, one clock for
//! every process of the host) in nanoseconds:
//!
//! - `soak-rank start rank=R pid=P t=NS` when `main` starts, before `Context::init`;
//! - `soak-rank ready rank=R pid=P t=NS init_us=U` as soon as `Context::init` has returned
//!   (`U`: how long the call took);
//! - `soak-rank done rank=R rounds=K t=NS` after the last round, before `term`.
//!
//! Between `ready` and `done` the ranks create a segment and pass a token around the ring
//! with `write_notify` (rank r to rank r+1, 4 KiB and a notification each hop, a barrier
//! every 16 rounds; with 2 ranks a ping-pong) until rank 0 has played for `--run-ms`; rank
//! 0's last token tells the others to stop. Any number of ranks from 2 up. Every wait is bounded by `--timeout-ms`, so a stopped or killed peer makes the rank
//! fail instead of hanging. `soak` reads these lines through `tarantella`'s output.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use gaspi::{
    Alloc, Context, Group, Local, NotificationId, QueueId, Rank, Remote, SegmentId, Timeout,
};

#[derive(Parser, Debug)]
#[command(
    name = "soak-rank",
    about = "One rank of a soak job: init, a segment, write_notify rounds, term"
)]
struct Args {
    /// How long rank 0 keeps playing ping-pong after the segment is created.
    #[arg(long, default_value_t = 50)]
    run_ms: u64,
    /// Bound on every wait (barrier, notification, queue, segment creation, term).
    #[arg(long, default_value_t = 5000)]
    timeout_ms: u64,
}

/// Bytes each message carries.
const MESSAGE: u64 = 4096;
/// The notification a message sets; its value says whether another round follows.
const PING: NotificationId = NotificationId(0);
/// Notification values: another round follows, or this was the last one.
const MORE: u32 = 1;
const LAST: u32 = 2;

/// `CLOCK_MONOTONIC` in nanoseconds: the clock `soak` reads too.
fn now_ns() -> u128 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .expect("CLOCK_MONOTONIC is always there");
    t.tv_sec() as u128 * 1_000_000_000 + t.tv_nsec() as u128
}

fn run(args: &Args) -> gaspi::Result<()> {
    let pid = std::process::id();
    let rank_hint = std::env::var("GASPI_RANK").unwrap_or_else(|_| "?".into());
    println!("soak-rank start rank={rank_hint} pid={pid} t={}", now_ns());
    let t0 = Instant::now();
    let ctx = Context::init()?;
    let init_us = t0.elapsed().as_micros();
    let me = ctx.rank();
    println!(
        "soak-rank ready rank={me} pid={pid} t={} init_us={init_us}",
        now_ns()
    );
    let t = Timeout(args.timeout_ms);
    let seg = SegmentId(0);
    ctx.segment_create(seg, 2 * MESSAGE, Group::ALL, t, Alloc::Initialized)?;
    let right = Rank((me.0 + 1) % ctx.num_ranks());
    let q = QueueId(0);
    let send = |value: u32| -> gaspi::Result<()> {
        ctx.write_notify(
            Local::new(seg, 0),
            Remote::new(right, seg, MESSAGE),
            MESSAGE,
            PING,
            value,
            q,
        )?;
        ctx.wait(q, t)
    };
    let receive = || -> gaspi::Result<u32> {
        ctx.notify_waitsome(seg, PING, 1, t)?;
        ctx.notify_reset(seg, PING)
    };
    let until = Instant::now() + Duration::from_millis(args.run_ms);
    let mut rounds = 0u64;
    loop {
        rounds += 1;
        let value = if me.0 == 0 {
            let value = if Instant::now() >= until { LAST } else { MORE };
            send(value)?;
            receive()?
        } else {
            let value = receive()?;
            send(value)?;
            value
        };
        if value == LAST {
            break;
        }
        if rounds.is_multiple_of(16) {
            ctx.barrier(Group::ALL, t)?;
        }
    }
    ctx.barrier(Group::ALL, t)?;
    println!("soak-rank done rank={me} rounds={rounds} t={}", now_ns());
    ctx.term(t)
}

fn main() -> ExitCode {
    gaspi::log::init_from_env();
    let args = Args::parse();
    let nranks = std::env::var("GASPI_NRANKS").ok();
    if nranks
        .as_deref()
        .and_then(|n| n.parse::<u32>().ok())
        .unwrap_or(0)
        < 2
    {
        eprintln!("soak-rank: needs 2 ranks or more (GASPI_NRANKS={nranks:?})");
        return ExitCode::from(2);
    }
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("soak-rank: {e}");
            ExitCode::FAILURE
        }
    }
}
