//! The optional heartbeat (`GASPI_HEARTBEAT_TIMEOUT_MS`): a stopped rank, whose kernel still
//! acknowledges TCP, is found by its silence, and the survivors' blocked calls name it.
//! Without the variable nothing changes (every other multi-process test runs without it).

use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use gaspi::env::{TransportChoice, HEARTBEAT_TIMEOUT_MS, LOG};
use gaspi::testing::spmd_job;
use gaspi::*;
use nix::sys::signal::{kill, raise, Signal};
use nix::unistd::Pid;

const T: Timeout = Timeout(20_000);
/// The heartbeat timeout of these jobs.
const HB_MS: u64 = 500;

/// `(elapsed, error)` of a call that blocks until the stopped rank is found.
fn timed<R: std::fmt::Debug>(call: impl FnOnce() -> Result<R>) -> (Duration, Error) {
    let start = Instant::now();
    let res = call();
    let elapsed = start.elapsed();
    match res {
        Err(e) => (elapsed, e),
        Ok(v) => panic!("returned {v:?} while its peer was stopped"),
    }
}

/// Found by the heartbeat: not before a good part of the timeout, and within about two.
fn assert_found_in_time(what: &str, elapsed: Duration, err: &Error) {
    println!(
        "rank found rank 1 stopped in {what} after {} ms",
        elapsed.as_millis()
    );
    assert!(
        matches!(err, Error::PeerFailed { rank: Rank(1) }),
        "{what}: {err:?}"
    );
    let ms = elapsed.as_millis() as u64;
    assert!(
        ms >= HB_MS / 2,
        "{what}: found after {ms} ms, before the timeout"
    );
    assert!(ms <= 2 * HB_MS + 250, "{what}: found only after {ms} ms");
}

/// Rank 1 tells rank 0 its pid and stops itself (SIGSTOP). Rank 0 waits in
/// `notify_waitsome(GASPI_BLOCK)` for a notification rank 1 will never send, rank 2 in
/// `barrier(GASPI_BLOCK)`: both return `PeerFailed` naming rank 1 within about two heartbeat
/// timeouts and go on in a group of their own; then rank 0 kills rank 1 (which the job
/// runner reaps).
fn stopped_peer(name: &str, transport: TransportChoice) {
    let Some(out) = spmd_job(name, 3, transport, Duration::from_secs(30), |job| {
        job.env
            .push((HEARTBEAT_TIMEOUT_MS.into(), HB_MS.to_string()));
        job.env.push((LOG.into(), "warn".into()));
    }) else {
        gaspi::log::init_from_env();
        let ctx = Context::init().unwrap();
        let seg = SegmentId(0);
        ctx.segment_create(seg, 4096, Group::ALL, T, Alloc::Initialized)
            .unwrap();
        ctx.barrier(Group::ALL, T).unwrap();
        let q = QueueId(0);
        match ctx.rank().0 {
            1 => {
                let pid = u64::from(std::process::id());
                ctx.segment(seg).unwrap().write(0, &[pid]).unwrap();
                ctx.write_notify(
                    Local::new(seg, 0),
                    Remote::new(Rank(0), seg, 8),
                    8,
                    NotificationId(1),
                    1,
                    q,
                )
                .unwrap();
                ctx.wait(q, T).unwrap();
                raise(Signal::SIGSTOP).unwrap();
                unreachable!("rank 1 is killed while it is stopped");
            }
            me => {
                let stopped = if me == 0 {
                    ctx.notify_waitsome(seg, NotificationId(1), 1, T).unwrap();
                    let pid: u64 = ctx.segment(seg).unwrap().get(8).unwrap();
                    let (elapsed, err) =
                        timed(|| ctx.notify_waitsome(seg, NotificationId(0), 1, Timeout::BLOCK));
                    assert_found_in_time("notify_waitsome", elapsed, &err);
                    Some(pid)
                } else {
                    let (elapsed, err) = timed(|| ctx.barrier(Group::ALL, Timeout::BLOCK));
                    assert_found_in_time("barrier", elapsed, &err);
                    None
                };
                assert_eq!(ctx.state_vec()[1], PeerState::Corrupt);
                let g = ctx.group_create().unwrap();
                ctx.group_add(g, Rank(0)).unwrap();
                ctx.group_add(g, Rank(2)).unwrap();
                ctx.group_commit(g, T).unwrap();
                ctx.barrier(g, T).unwrap();
                if let Some(pid) = stopped {
                    kill(Pid::from_raw(pid as i32), Signal::SIGKILL).unwrap();
                }
                ctx.term(T).unwrap();
            }
        }
        std::process::exit(0);
    };
    assert!(!out.timed_out, "{}", out.report());
    assert_eq!(
        out.ranks[1].status.and_then(|s| s.signal()),
        Some(9),
        "{}",
        out.report()
    );
    for r in [&out.ranks[0], &out.ranks[2]] {
        assert!(r.status.is_some_and(|s| s.success()), "{}", out.report());
        assert!(
            r.stderr.contains("marked CORRUPT: heartbeat timeout"),
            "{}",
            out.report()
        );
    }
}

#[test]
fn stopped_peer_tcp() {
    stopped_peer("stopped_peer_tcp", TransportChoice::Tcp);
}

#[test]
fn stopped_peer_shm() {
    stopped_peer("stopped_peer_shm", TransportChoice::Shm);
}

/// Ranks busy for three heartbeat timeouts without a GASPI call are not taken for stopped:
/// the heartbeats come from the runtime's own threads.
#[test]
fn busy_ranks_are_alive() {
    let Some(out) = spmd_job(
        "busy_ranks_are_alive",
        3,
        TransportChoice::Tcp,
        Duration::from_secs(30),
        |job| {
            job.env
                .push((HEARTBEAT_TIMEOUT_MS.into(), HB_MS.to_string()));
            job.env.push((LOG.into(), "warn".into()));
        },
    ) else {
        gaspi::log::init_from_env();
        let ctx = Context::init().unwrap();
        // Computing, as far as GASPI knows (not waiting for anything).
        std::thread::sleep(Duration::from_millis(3 * HB_MS));
        ctx.barrier(Group::ALL, T).unwrap();
        assert!(ctx.state_vec().iter().all(|s| *s == PeerState::Healthy));
        ctx.term(T).unwrap();
        std::process::exit(0);
    };
    out.assert_success();
    for r in &out.ranks {
        assert!(!r.stderr.contains("CORRUPT"), "{}", out.report());
    }
}
