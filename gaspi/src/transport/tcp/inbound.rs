//! Who takes incoming frames in: the progress thread, or an application thread that is
//! polling for them anyway.
//!
//! The incoming connections sit in an epoll of their own ([`Inbound`]), which is one entry of
//! the progress thread's epoll. A thread that waits for a notification polls the inner epoll
//! itself ([`Inbound::poll`]) and says so ([`Inbound::hold`]). When a frame wakes the progress
//! thread while such a poller exists, the progress thread takes the inner epoll out of its own
//! ([`Inbound::on_wake`]): from then on frames wake nobody and the pollers take them in. Once
//! no thread has polled for a whole [`HANDBACK_AFTER`], the progress thread's timer puts the
//! inner epoll back ([`Inbound::on_timer`]); a thread about to sleep, or to wait for something
//! only the progress thread delivers (a read's data, an atomic's answer, a passive message),
//! puts it back at once ([`Inbound::hand_back`]).
//!
//! Why: on a host with more busy threads than cores, every small message used to wake the
//! progress thread (a context switch, and on a VM an inter-processor interrupt) only for it to
//! find the frame taken by the waiter or to take it while the waiter yielded; those wake-ups
//! were most of a small allreduce's time at 4 ranks on 2 cores. Holding and releasing cost an
//! atomic each, no system call, so a stream of collectives keeps the inner epoll out at the
//! price of one timer wake-up per [`HANDBACK_AFTER`]. The cost: a rank that stops polling
//! (to compute) answers the first read, atomic or passive message that arrives in the next
//! [`HANDBACK_AFTER`] up to twice that late.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use parking_lot::Mutex;

use crate::error::Result;
use crate::transport::tcp::pair::Pair;

/// The token of the inner epoll in the progress thread's.
pub(crate) const INBOUND_TOKEN: u64 = u64::MAX - 2;

/// How long no thread must have polled before the progress thread takes frames in again.
pub(crate) const HANDBACK_AFTER: Duration = Duration::from_millis(1);

/// Bytes taken in at once that make a stream, which the progress thread helps take in (see
/// [`Inbound::poll`]). 4 ranks on 2 cores over TCP, medians of 4 alternating rounds:
/// Rabenseifner at 256 KiB (frames of 64 and 128 KiB) took 1009 µs with 64 KiB here, 1116
/// with 256 KiB and 1079 before pollers took frames over; 4 KiB 78, 92 and 164.
pub(crate) const STREAM_BYTES: usize = 64 * 1024;

/// The incoming connections' epoll, and who takes frames in.
pub(crate) struct Inbound {
    /// The incoming connections, each with its peer's rank as token.
    sockets: Arc<Epoll>,
    /// The progress thread's epoll, which holds `sockets` unless pollers took them over.
    progress: Arc<Epoll>,
    /// Threads polling now.
    pollers: AtomicUsize,
    /// Holds so far: the progress thread's timer sees from it whether anyone polled lately.
    holds: AtomicU64,
    gate: Mutex<Gate>,
}

struct Gate {
    /// `sockets` is out of the progress thread's epoll: pollers take frames in.
    polled: bool,
    /// `holds` when the progress thread last looked.
    holds_seen: u64,
    /// When it last looked.
    seen_at: Instant,
    /// Putting `sockets` back failed and was logged (it is retried on every timer).
    add_failed: bool,
}

/// Events a connection reports that a receiver acts on.
fn inbound_flags() -> EpollFlags {
    EpollFlags::EPOLLIN | EpollFlags::EPOLLHUP | EpollFlags::EPOLLERR | EpollFlags::EPOLLRDHUP
}

fn entry() -> EpollEvent {
    EpollEvent::new(EpollFlags::EPOLLIN, INBOUND_TOKEN)
}

impl Inbound {
    /// An empty inner epoll, added to `progress`.
    pub fn new(progress: Arc<Epoll>) -> Result<Self> {
        let sockets = Arc::new(Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?);
        progress.add(&sockets.0, entry())?;
        Ok(Inbound {
            sockets,
            progress,
            pollers: AtomicUsize::new(0),
            holds: AtomicU64::new(0),
            gate: Mutex::new(Gate {
                polled: false,
                holds_seen: 0,
                seen_at: Instant::now(),
                add_failed: false,
            }),
        })
    }

    /// Adds a peer's incoming connection.
    pub fn add(&self, pair: &Pair) -> Result<()> {
        Ok(self.sockets.add(&pair.rx, pair.rx_events())?)
    }

    /// The inner epoll, from which a failed link takes its connection out.
    pub fn sockets(&self) -> Arc<Epoll> {
        self.sockets.clone()
    }

    /// Takes in what has arrived on every connection that reports something, on the calling
    /// thread; never blocks. `waiter` says who calls: a waiting application thread skips a
    /// peer that another thread receives from, and reads a bounded amount (see
    /// `Pair::try_on_readable`); the progress thread reads all. Returns the bytes read.
    ///
    /// A waiter that meets a stream ([`STREAM_BYTES`] in one poll) hands frames back to the
    /// progress thread: two threads then take a long transfer in, as before pollers took
    /// over, so that the sender's socket never fills while this one is not scheduled.
    pub fn poll(&self, pairs: &[Option<Arc<Pair>>], waiter: bool) -> usize {
        let mut events = [EpollEvent::empty(); 16];
        let mut bytes = 0;
        while let Ok(n) = self.sockets.wait(&mut events, EpollTimeout::ZERO) {
            for ev in &events[..n] {
                if !ev.events().intersects(inbound_flags()) {
                    continue;
                }
                let Some(Some(pair)) = pairs.get(ev.data() as usize) else {
                    continue;
                };
                if pair.is_closed() {
                    continue;
                }
                let result = if waiter {
                    pair.try_on_readable()
                } else {
                    Some(pair.on_readable())
                };
                match result {
                    Some(Ok(got)) => bytes += got,
                    Some(Err(reason)) => pair.fail(&reason),
                    None => {}
                }
            }
            // A full batch may have left connections unreported; the progress thread looks
            // again (a waiter looks at its next poll anyway).
            if waiter || n < events.len() {
                break;
            }
        }
        if waiter && bytes >= STREAM_BYTES {
            self.hand_back();
        }
        bytes
    }

    /// Says that the calling thread polls until the guard is dropped (see the module doc).
    /// Two atomic operations, no system call.
    pub fn hold(&self) -> InboundHold<'_> {
        self.pollers.fetch_add(1, Ordering::SeqCst);
        self.holds.fetch_add(1, Ordering::Relaxed);
        InboundHold { inbound: self }
    }

    /// Progress thread, woken by frames and having taken in `bytes`: if those were few
    /// (not a stream, see [`poll`](Self::poll)) and a thread is polling, leaves frames to it
    /// from now on (the progress thread's timer then runs, see [`on_timer`](Self::on_timer)).
    pub fn on_wake(&self, bytes: usize) {
        if bytes >= STREAM_BYTES {
            return;
        }
        let mut gate = self.gate.lock();
        // Read under the lock: a poller that leaves and then hands back (`hand_back`) either
        // sees the inner epoll out and puts it back, or has left before this reads.
        if !gate.polled && self.pollers.load(Ordering::SeqCst) > 0 {
            match self.progress.delete(&self.sockets.0) {
                Ok(()) => {
                    gate.polled = true;
                    gate.holds_seen = self.holds.load(Ordering::Relaxed);
                    gate.seen_at = Instant::now();
                }
                Err(e) => {
                    tracing::debug!("TCP: incoming frames stay with the progress thread: {e}")
                }
            }
        }
    }

    /// Progress thread, after each wait: puts the inner epoll back once nobody polls and
    /// nobody has started to for [`HANDBACK_AFTER`]. Returns the timeout its next wait needs.
    pub fn on_timer(&self, timed_out: bool) -> Option<Duration> {
        self.on_timer_at(timed_out, Instant::now())
    }

    /// [`on_timer`](Self::on_timer) at `now`. A period is up when the wait timed out or a
    /// whole period passed since the last look: other wake-ups (connections to the listener,
    /// which anyone who reaches the port can make) can come faster than the timer, and must
    /// not keep the frames from the progress thread while nobody polls.
    fn on_timer_at(&self, timed_out: bool, now: Instant) -> Option<Duration> {
        let mut gate = self.gate.lock();
        if !gate.polled {
            return None;
        }
        if timed_out || now.saturating_duration_since(gate.seen_at) >= HANDBACK_AFTER {
            let holds = self.holds.load(Ordering::Relaxed);
            let idle = holds == gate.holds_seen && self.pollers.load(Ordering::SeqCst) == 0;
            gate.holds_seen = holds;
            gate.seen_at = now;
            if idle {
                self.put_back(&mut gate);
            }
        }
        gate.polled.then_some(HANDBACK_AFTER)
    }

    /// The progress thread takes frames in again from now on: called by a thread about to
    /// sleep, or to wait for what only the progress thread delivers while it waits. Costs a
    /// lock when it already does.
    pub fn hand_back(&self) {
        let mut gate = self.gate.lock();
        if gate.polled {
            self.put_back(&mut gate);
        }
    }

    fn put_back(&self, gate: &mut Gate) {
        // A ready inner epoll wakes the progress thread as soon as it is added: nothing that
        // arrived meanwhile is left waiting.
        match self.progress.add(&self.sockets.0, entry()) {
            Ok(()) => {
                gate.polled = false;
                gate.add_failed = false;
            }
            Err(e) => {
                // The progress thread's timer tries again; pollers still take frames in.
                if !std::mem::replace(&mut gate.add_failed, true) {
                    tracing::error!("TCP: cannot hand incoming frames back to the progress thread (retrying): {e}");
                }
            }
        }
    }

    /// Whether pollers take frames in now (for tests).
    #[cfg(test)]
    fn is_polled(&self) -> bool {
        self.gate.lock().polled
    }
}

/// A thread that polls for frames (see [`Inbound::hold`]).
pub(crate) struct InboundHold<'a> {
    inbound: &'a Inbound,
}

impl Drop for InboundHold<'_> {
    fn drop(&mut self) {
        self.inbound.pollers.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    use super::*;

    /// Whether `epoll` reports something now.
    fn ready(epoll: &Epoll) -> bool {
        let mut ev = [EpollEvent::empty(); 4];
        epoll.wait(&mut ev, EpollTimeout::ZERO).unwrap() > 0
    }

    /// An `Inbound` with one connection in it that has bytes to read, and the outer epoll.
    fn with_a_frame_waiting() -> (Inbound, Arc<Epoll>, UnixStream, UnixStream) {
        let progress = Arc::new(Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).unwrap());
        let inbound = Inbound::new(progress.clone()).unwrap();
        let (mut tx, rx) = UnixStream::pair().unwrap();
        inbound
            .sockets
            .add(&rx, EpollEvent::new(EpollFlags::EPOLLIN, 0))
            .unwrap();
        tx.write_all(b"frame").unwrap();
        (inbound, progress, tx, rx)
    }

    #[test]
    fn frames_wake_the_progress_thread_while_nobody_polls() {
        let (inbound, progress, _tx, _rx) = with_a_frame_waiting();
        assert!(ready(&progress));
        inbound.on_wake(100);
        assert!(!inbound.is_polled(), "nobody polls: nothing changes");
        assert_eq!(inbound.on_timer(false), None, "and no timer runs");
        assert!(ready(&progress));
    }

    #[test]
    fn a_poller_takes_frames_over_until_nobody_has_polled_for_a_whole_period() {
        let (inbound, progress, _tx, _rx) = with_a_frame_waiting();
        let hold = inbound.hold();
        inbound.on_wake(STREAM_BYTES);
        assert!(
            !inbound.is_polled(),
            "a stream: the progress thread keeps helping"
        );
        inbound.on_wake(100);
        assert!(inbound.is_polled());
        assert!(!ready(&progress), "frames wake nobody while a thread polls");
        assert!(ready(&inbound.sockets), "the poller sees them");

        // Still polling at the timer: kept.
        let t0 = Instant::now();
        assert_eq!(inbound.on_timer_at(true, t0), Some(HANDBACK_AFTER));
        drop(hold);
        // Gone, but it polled during the last period: kept once more (a stream of
        // collectives holds and releases between every step).
        drop(inbound.hold());
        assert_eq!(inbound.on_timer_at(true, t0), Some(HANDBACK_AFTER));
        // A wake-up that is not the timer's, within the period, changes nothing.
        assert_eq!(inbound.on_timer_at(false, t0), Some(HANDBACK_AFTER));
        // A whole period without a poller: handed back, and the waiting frame wakes the
        // progress thread at once.
        assert_eq!(inbound.on_timer_at(true, t0), None);
        assert!(!inbound.is_polled());
        assert!(ready(&progress));
    }

    #[test]
    fn wake_ups_faster_than_the_timer_do_not_keep_frames_from_the_progress_thread() {
        let (inbound, progress, _tx, _rx) = with_a_frame_waiting();
        let hold = inbound.hold();
        inbound.on_wake(100);
        drop(hold);
        assert!(inbound.is_polled());
        // Wake-ups every tenth of a period (a stranger connecting over and over): no wait
        // ever times out. A thread polls once in the first period, none in the second: the
        // look at its end hands the frames back.
        let t0 = Instant::now();
        let mut handed_back_at = None;
        for tenth in 1..=30u32 {
            if tenth == 5 {
                drop(inbound.hold());
            }
            if inbound
                .on_timer_at(false, t0 + HANDBACK_AFTER * tenth / 10)
                .is_none()
            {
                handed_back_at = Some(tenth);
                break;
            }
        }
        assert_eq!(handed_back_at, Some(20));
        assert!(!inbound.is_polled());
        assert!(ready(&progress));
    }

    #[test]
    fn a_thread_about_to_sleep_hands_frames_back_at_once() {
        let (inbound, progress, _tx, _rx) = with_a_frame_waiting();
        let hold = inbound.hold();
        inbound.on_wake(100);
        drop(hold);
        inbound.hand_back();
        assert!(!inbound.is_polled());
        assert!(ready(&progress));
        // The progress thread's next timer finds nothing to do and stops.
        assert_eq!(inbound.on_timer(true), None);
        inbound.hand_back(); // idempotent
        assert!(ready(&progress));
    }
}
