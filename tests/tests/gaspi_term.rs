//! `term`'s timeout bounds its wait for peers that do not leave: with a peer that never
//! terminates, `term(Timeout::ms(100))` returns `Ok` after about 100 ms, not after the 2 s
//! that `term` waits at most (with `Timeout::BLOCK`). A peer that has left with `term` is
//! still connected as far as `connect` goes.

use std::time::{Duration, Instant};

use gaspi::env::TransportChoice;
use gaspi::testing::spmd_job;
use gaspi::*;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

const T: Timeout = Timeout::ms(20_000);

/// The timeout rank 0 gives `term`.
const TERM_TIMEOUT: Duration = Duration::from_millis(100);

/// Well under the 2 s that `term` waits for its peers at most, and well over
/// [`TERM_TIMEOUT`] (this 2-core machine may be busy): a `term` that ignored its timeout
/// takes the 2 s and fails here.
const TERM_BOUND: Duration = Duration::from_millis(1_000);

/// Whether process `pid` is stopped (state `T` in `/proc/PID/stat`).
fn stopped(pid: Pid) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let (_, after_name) = stat.rsplit_once(')')?;
            after_name.split_whitespace().next().map(|s| s == "T")
        })
        .unwrap_or(false)
}

/// Rank 1 never calls `term`: it is stopped (SIGSTOP) in a barrier that rank 0 never enters,
/// so that it cannot even close its side of the connections when rank 0 says goodbye, as a
/// hung or descheduled peer would. Rank 0 terminates meanwhile, then lets rank 1 go on: its
/// barrier ends because rank 0 has left.
#[test]
fn term_returns_after_its_timeout_when_a_peer_never_terminates() {
    let name = "term_returns_after_its_timeout_when_a_peer_never_terminates";
    let Some(out) = spmd_job(
        name,
        2,
        TransportChoice::Tcp,
        Duration::from_secs(60),
        |_| {},
    ) else {
        let ctx = Context::init().unwrap();
        // Rank 0 learns rank 1's process id as the sum of 0 and it.
        let mine = if ctx.rank() == Rank(1) {
            u64::from(std::process::id())
        } else {
            0
        };
        let mut sum = [0u64];
        ctx.allreduce(&[mine], &mut sum, ReduceOp::Sum, Group::ALL, T)
            .unwrap();
        if ctx.rank() == Rank(1) {
            let r = ctx.barrier(Group::ALL, T);
            assert!(
                matches!(r, Err(Error::PeerFailed { rank: Rank(0) })),
                "{r:?}"
            );
            std::process::exit(0);
        }
        let peer = Pid::from_raw(i32::try_from(sum[0]).unwrap());
        kill(peer, Signal::SIGSTOP).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !stopped(peer) {
            assert!(Instant::now() < deadline, "rank 1 ({peer}) did not stop");
            std::thread::sleep(Duration::from_millis(1));
        }
        let start = Instant::now();
        let result = ctx.term(Timeout::ms(TERM_TIMEOUT.as_millis() as u64));
        let took = start.elapsed();
        kill(peer, Signal::SIGCONT).unwrap();
        assert!(result.is_ok(), "{result:?}");
        // The timeout was spent waiting: the stopped peer did not close its side, so what
        // is bounded below is the wait for a peer that does not leave.
        assert!(took >= TERM_TIMEOUT, "term took {took:?}");
        assert!(
            took < TERM_BOUND,
            "term({TERM_TIMEOUT:?}) took {took:?} with a peer that never terminates"
        );
        std::process::exit(0);
    };
    out.assert_success();
}

/// `connect` to a peer that has left with `term` succeeds, as GPI-2's does for an endpoint
/// it connected (a fast rank may finish before a slow one runs its connect loop; GPI-2's
/// `con_disconnect` test does this). Rank 0 knows rank 1 has left when its ping fails.
fn connect_to_a_peer_that_has_left(name: &str, transport: TransportChoice) {
    let Some(out) = spmd_job(name, 2, transport, Duration::from_secs(60), |_| {}) else {
        let ctx = Context::init().unwrap();
        ctx.barrier(Group::ALL, T).unwrap();
        if ctx.rank() == Rank(0) {
            while ctx.proc_ping(Rank(1), T).is_ok() {
                std::thread::yield_now();
            }
            let connected = ctx.connect(Rank(1), T);
            assert!(
                connected.is_ok(),
                "connect after rank 1 left: {connected:?}"
            );
            ctx.disconnect(Rank(1), T).unwrap();
        }
        ctx.term(T).unwrap();
        std::process::exit(0);
    };
    out.assert_success();
}

#[test]
fn connect_succeeds_to_a_peer_that_has_left_tcp() {
    connect_to_a_peer_that_has_left(
        "connect_succeeds_to_a_peer_that_has_left_tcp",
        TransportChoice::Tcp,
    );
}

#[test]
fn connect_succeeds_to_a_peer_that_has_left_shm() {
    connect_to_a_peer_that_has_left(
        "connect_succeeds_to_a_peer_that_has_left_shm",
        TransportChoice::Shm,
    );
}
