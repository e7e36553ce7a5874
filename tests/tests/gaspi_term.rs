//! `term`'s timeout bounds its wait for peers that do not leave: with a peer that never
//! terminates, `term(Timeout::ms(100))` returns `Ok` after about 100 ms, not after the 2 s
//! that `term` waits at most (with `Timeout::BLOCK`).

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
