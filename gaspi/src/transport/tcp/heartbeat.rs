//! Liveness over the control connections, when `GASPI_HEARTBEAT_TIMEOUT_MS` is set (off by
//! default: then nothing here runs and no clock is read).
//!
//! A SIGSTOPped or hung peer's kernel still acknowledges TCP, so no socket error ever
//! reports it: it is found by its silence. Every rank sends a `Heartbeat` frame to each peer
//! every quarter of the timeout (from the sending thread's timer, only when nothing is
//! queued to that peer anyway), and every frame that arrives counts as a sign of life: the
//! receive path stores one timestamp per readable connection (a relaxed store). A peer
//! from which nothing arrived for the timeout, while no thread is receiving from it and no
//! byte from it waits in the socket, is failed like a broken connection: marked CORRUPT, its requests fail and every wait on it
//! ends with `PeerFailed` naming it.
//!
//! The decisions are arithmetic on millisecond timestamps ([`Watchdog`]), read from a
//! [`Clock`], so they are tested here without sockets or sleeps.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A source of milliseconds that never go back.
pub(crate) trait Clock: Send + Sync {
    /// Milliseconds since the clock's origin.
    fn now_ms(&self) -> u64;
}

/// The monotonic clock, from the transport's start.
pub(crate) struct Monotonic(Instant);

impl Monotonic {
    pub fn new() -> Self {
        Monotonic(Instant::now())
    }
}

impl Clock for Monotonic {
    fn now_ms(&self) -> u64 {
        self.0.elapsed().as_millis() as u64
    }
}

/// The heartbeat of one process: its timeout and its clock (shared by the receive path,
/// which stamps arrivals, and the sending thread's timer, which judges them).
pub(crate) struct Heartbeat {
    pub timeout_ms: u64,
    pub clock: Box<dyn Clock>,
}

impl Heartbeat {
    pub fn new(timeout_ms: u64) -> Self {
        Heartbeat {
            timeout_ms,
            clock: Box::new(Monotonic::new()),
        }
    }

    /// How often heartbeats go out: a quarter of the timeout, so that three may be late or
    /// lost in a full socket before a healthy peer is suspected.
    pub fn interval(&self) -> Duration {
        Duration::from_millis(interval_ms(self.timeout_ms))
    }

    /// Notes that something arrived from a peer (its `heard` stamp).
    #[inline]
    pub fn stamp(&self, heard: &AtomicU64) {
        heard.store(self.clock.now_ms(), Ordering::Relaxed);
    }
}

fn interval_ms(timeout_ms: u64) -> u64 {
    (timeout_ms / 4).max(1)
}

/// What the timer does on a tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tick {
    /// Not yet time for anything.
    Idle,
    /// Send heartbeats and judge the peers' silence.
    Beat,
    /// The timer itself did not run for longer than half the timeout (this process was
    /// stopped, or starved of CPU): peers are not blamed for what this rank missed; every
    /// peer's silence counts from now. Also the first tick.
    Restart,
}

/// The timer's state: when it last ran and when it last sent heartbeats.
pub(crate) struct Watchdog {
    timeout_ms: u64,
    last_tick: Option<u64>,
    last_beat: u64,
}

impl Watchdog {
    pub fn new(timeout_ms: u64) -> Self {
        Watchdog {
            timeout_ms,
            last_tick: None,
            last_beat: 0,
        }
    }

    /// The timer woke at `now` (on its timeout or on any event).
    pub fn tick(&mut self, now: u64) -> Tick {
        let last = self.last_tick.replace(now);
        match last {
            Some(last) if now.saturating_sub(last) <= self.timeout_ms / 2 => {
                if now.saturating_sub(self.last_beat) >= interval_ms(self.timeout_ms) {
                    self.last_beat = now;
                    Tick::Beat
                } else {
                    Tick::Idle
                }
            }
            _ => {
                self.last_beat = now;
                Tick::Restart
            }
        }
    }

    /// How long a peer last `heard` at that time has been silent at `now`, when that is the
    /// timeout or more.
    pub fn silent_for(&self, now: u64, heard: u64) -> Option<u64> {
        let silent = now.saturating_sub(heard);
        (silent >= self.timeout_ms).then_some(silent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clock the test moves by hand.
    struct Manual(AtomicU64);

    impl Clock for Manual {
        fn now_ms(&self) -> u64 {
            self.0.load(Ordering::Relaxed)
        }
    }

    #[test]
    fn beats_every_quarter_and_blames_a_peer_silent_for_the_timeout() {
        let mut w = Watchdog::new(400);
        assert_eq!(
            w.tick(1000),
            Tick::Restart,
            "the first tick starts the clocks"
        );
        assert_eq!(w.tick(1050), Tick::Idle);
        assert_eq!(w.tick(1100), Tick::Beat);
        assert_eq!(w.tick(1150), Tick::Idle);
        assert_eq!(w.tick(1200), Tick::Beat);
        let heard = 1000;
        assert_eq!(w.silent_for(1200, heard), None);
        assert_eq!(w.silent_for(1399, heard), None);
        assert_eq!(w.silent_for(1400, heard), Some(400));
        assert_eq!(w.silent_for(1500, 1450), None, "heard again: alive");
        // A stamp newer than the judge's reading of the clock (another thread) is alive.
        assert_eq!(w.silent_for(1000, 1001), None);
    }

    #[test]
    fn a_rank_that_was_stopped_itself_blames_nobody_for_its_own_gap() {
        let mut w = Watchdog::new(400);
        w.tick(0);
        assert_eq!(w.tick(100), Tick::Beat);
        // This process was stopped for 5 s: everything looks silent, but it was not them.
        assert_eq!(w.tick(5100), Tick::Restart);
        assert_eq!(w.tick(5150), Tick::Idle);
        assert_eq!(w.tick(5200), Tick::Beat);
        // Just over half the timeout between two ticks still counts as a gap of our own.
        assert_eq!(w.tick(5401), Tick::Restart);
    }

    #[test]
    fn stamps_read_the_heartbeats_clock() {
        let hb = Heartbeat {
            timeout_ms: 1000,
            clock: Box::new(Manual(AtomicU64::new(77))),
        };
        assert_eq!(hb.interval(), Duration::from_millis(250));
        let heard = AtomicU64::new(0);
        hb.stamp(&heard);
        assert_eq!(heard.load(Ordering::Relaxed), 77);
        assert_eq!(Heartbeat::new(20).interval(), Duration::from_millis(5));
        let m = Monotonic::new();
        assert!(m.now_ms() <= m.now_ms());
    }
}
