//! How waiters poll: how long every wait spins (`spin_for`), and the backoff of the verbs
//! paths, whose completions and RDMA writes wake nobody.

use std::time::{Duration, Instant};

/// How long a waiter polls before it yields. The spin catches a reply from a peer with a
/// core of its own (shared-memory round trips take a few µs) and is short so as not to steal
/// a shared core from the peer or the TCP progress thread (a `pause` costs ~25 ns on current
/// x86, so this is time-based).
///
/// A host with more ranks than cores skips the spin (see [`spin_for`]): there the peer a
/// waiter spins for is usually waiting for the waiter's core, and every spin is lost time.
pub(crate) const SPIN_FOR: Duration = Duration::from_micros(20);
/// How long waits on this rank spin before they yield: [`SPIN_FOR`], or nothing when the
/// host runs more ranks than this process may use cores (oversubscribed, as `mpirun
/// --oversubscribe` jobs are; Open MPI then yields at once too).
pub(crate) fn spin_for(ranks_on_host: usize) -> Duration {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if ranks_on_host > cores {
        Duration::ZERO
    } else {
        SPIN_FOR
    }
}

/// Waits without burning a core: spin, then yield, then short naps. RDMA writes wake
/// nobody, so pollers nap briefly instead of sleeping on a futex.
pub(crate) struct Backoff {
    start: Instant,
    iter: u32,
}

impl Backoff {
    pub fn new() -> Self {
        Backoff {
            start: Instant::now(),
            iter: 0,
        }
    }

    pub fn pause(&mut self, left: Option<Duration>) {
        self.pause_with(left, std::thread::sleep);
    }

    /// As [`pause`](Self::pause), napping with `nap` (e.g. a condition-variable wait that
    /// other events may cut short).
    pub fn pause_with(&mut self, left: Option<Duration>, nap: impl FnOnce(Duration)) {
        self.iter += 1;
        if self.iter < 64 {
            std::hint::spin_loop();
        } else if self.start.elapsed() < Duration::from_micros(100) {
            std::thread::yield_now();
        } else {
            let most = nap_for(self.start.elapsed());
            nap(left.map_or(most, |l| l.min(most)));
        }
    }
}

/// How long a poller that has waited `waited` naps: 50 µs at first, growing with the wait
/// to at most 1 ms, so that a thread blocked for long (a passive receiver with nothing to
/// do) wakes at most 1000 times a second, while one whose answer is due soon still sees it
/// within a few percent of its wait.
pub(crate) fn nap_for(waited: Duration) -> Duration {
    (waited / 8).clamp(Duration::from_micros(50), Duration::from_millis(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_spin_only_when_every_rank_of_the_host_has_a_core() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(spin_for(1), SPIN_FOR);
        assert_eq!(spin_for(cores), SPIN_FOR);
        assert_eq!(spin_for(cores + 1), Duration::ZERO);
    }

    #[test]
    fn naps_after_spinning_and_never_past_the_deadline() {
        // The clock starts before the backoff's own, which the nap's condition reads: a
        // preemption between the two must not make the nap look early.
        let t0 = Instant::now();
        let mut b = Backoff::new();
        let mut naps = Vec::new();
        while naps.is_empty() {
            b.pause_with(Some(Duration::from_micros(20)), |d| naps.push(d));
        }
        assert!(
            t0.elapsed() >= Duration::from_micros(100),
            "spins and yields first"
        );
        assert_eq!(naps, [Duration::from_micros(20)], "capped by the time left");
        b.pause_with(None, |d| naps.push(d));
        assert!(naps[1] >= Duration::from_micros(50) && naps[1] < Duration::from_millis(1));
    }

    #[test]
    fn naps_grow_with_the_wait_up_to_a_millisecond() {
        assert_eq!(nap_for(Duration::ZERO), Duration::from_micros(50));
        assert_eq!(
            nap_for(Duration::from_millis(2)),
            Duration::from_micros(250)
        );
        assert_eq!(nap_for(Duration::from_secs(5)), Duration::from_millis(1));
        let mut long = Backoff {
            start: Instant::now() - Duration::from_secs(1),
            iter: 64,
        };
        let mut naps = Vec::new();
        long.pause_with(None, |d| naps.push(d));
        assert_eq!(naps, [Duration::from_millis(1)]);
    }
}
