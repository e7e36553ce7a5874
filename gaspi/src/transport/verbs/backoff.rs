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
            let most = Duration::from_micros(50);
            nap(left.map_or(most, |l| l.min(most)));
        }
    }
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
        assert_eq!(naps[1], Duration::from_micros(50));
    }
}
