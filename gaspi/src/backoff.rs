//! How the verbs paths wait: completions and RDMA writes wake nobody, so waiters poll.

use std::time::{Duration, Instant};

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
    fn naps_after_spinning_and_never_past_the_deadline() {
        let mut b = Backoff::new();
        let mut naps = Vec::new();
        let t0 = Instant::now();
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
