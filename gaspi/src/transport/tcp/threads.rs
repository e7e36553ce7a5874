//! The two threads behind the TCP transport, one of each per process, both driven by epoll.
//!
//! The progress thread receives frames into segments, answers reads, atomics and control
//! requests, and turns connection errors into peer failures. The sending thread finishes the
//! frames that did not fit in a socket when they were posted. Application threads never wait
//! on either to post; they wait for completions these signal, and while they spin in a wait
//! they take in arriving frames themselves (`TcpTransport::poll_inbound`), so that latency
//! does not hang on when the progress thread is scheduled.
//!
//! With a heartbeat timeout (`GASPI_HEARTBEAT_TIMEOUT_MS`), the sending thread's wait also
//! times out every quarter of it: it then sends heartbeats and fails silent peers (see
//! `heartbeat`). Without one, both threads sleep until an event, as before.

use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::epoll::{Epoll, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::eventfd::EventFd;

use crate::error::ProtocolError;
use crate::transport::tcp::endpoint::Endpoint;
use crate::transport::tcp::heartbeat::{Tick, Watchdog};
use crate::transport::tcp::inbound::{Inbound, INBOUND_TOKEN};
use crate::transport::tcp::pair::Pair;
use crate::transport::tcp::send::TX_TOKEN;

pub(crate) const WAKE_TOKEN: u64 = u64::MAX;
pub(crate) const LISTEN_TOKEN: u64 = u64::MAX - 1;

pub(crate) struct ReceiveLoop {
    pub pairs: Vec<Option<Arc<Pair>>>,
    /// Holds the wake-up, the listener and (while no thread polls it) `inbound`.
    pub epoll: Arc<Epoll>,
    pub inbound: Arc<Inbound>,
    pub wake: Arc<EventFd>,
    pub stop: Arc<AtomicBool>,
    pub listener: TcpListener,
    /// Connections dropped after init (see `accept_late`).
    pub late: AtomicU64,
}

/// Waits on `epoll` and hands every event to `serve` until `wake` is written with `stop` set.
/// Each wait lasts at most `timeout` (`None`: until an event); after each, `tick` is told
/// whether it timed out and returns the next wait's timeout.
fn event_loop(
    who: &str,
    epoll: &Epoll,
    wake: &EventFd,
    stop: &AtomicBool,
    mut timeout: Option<Duration>,
    mut serve: impl FnMut(u64, EpollFlags),
    mut tick: impl FnMut(bool) -> Option<Duration>,
) {
    let mut events = vec![EpollEvent::empty(); 64];
    loop {
        let limit = match timeout {
            Some(d) => EpollTimeout::try_from(d).unwrap_or(EpollTimeout::MAX),
            None => EpollTimeout::NONE,
        };
        let n = match epoll.wait(&mut events, limit) {
            Ok(n) => n,
            Err(Errno::EINTR) => continue,
            Err(e) => {
                tracing::error!("{who} thread: epoll_wait failed: {e}");
                return;
            }
        };
        for ev in &events[..n] {
            if ev.data() == WAKE_TOKEN {
                let _ = wake.read();
                if stop.load(Ordering::Acquire) {
                    return;
                }
            } else {
                serve(ev.data(), ev.events());
            }
        }
        timeout = tick(n == 0);
    }
}

impl ReceiveLoop {
    pub fn run(self) {
        event_loop(
            "progress",
            &self.epoll,
            &self.wake,
            &self.stop,
            None,
            |token, _| match token {
                LISTEN_TOKEN => self.accept_late(),
                INBOUND_TOKEN => {
                    // Takes in what woke us, then leaves small frames to a thread that polls
                    // for them (see `inbound`).
                    let bytes = self.inbound.poll(&self.pairs, false);
                    self.inbound.on_wake(bytes);
                }
                _ => {}
            },
            |timed_out| self.inbound.on_timer(timed_out),
        );
    }

    /// The mesh is complete after init: any later connection is dropped at once, without
    /// reading from it (a thread or a wait per stranger would let strangers cost us). The
    /// first few are logged.
    fn accept_late(&self) {
        loop {
            match self.listener.accept() {
                Ok((stream, from)) => {
                    let _ = stream.shutdown(std::net::Shutdown::Both);
                    let n = self.late.fetch_add(1, Ordering::Relaxed);
                    if n < LATE_LOGGED {
                        tracing::warn!(
                            "dropped a connection from {from}: the mesh is complete{}",
                            if n + 1 == LATE_LOGGED {
                                " (not logging more of these)"
                            } else {
                                ""
                            }
                        );
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::warn!("accept: {e}");
                    return;
                }
            }
        }
    }
}

/// Late connections logged before going quiet.
const LATE_LOGGED: u64 = 8;

fn open_pair(pairs: &[Option<Arc<Pair>>], rank: usize) -> Option<&Arc<Pair>> {
    pairs
        .get(rank)
        .and_then(|p| p.as_ref())
        .filter(|p| !p.is_closed())
}

/// The sending thread: finishes the frames queued on outgoing connections when they have room
/// again. Kept apart from the progress thread so that a long receive never holds up sending:
/// a 2-rank allreduce streams both ways at once, and one thread taking turns left each
/// direction idle while it served the other.
pub(crate) struct Sender {
    pub pairs: Vec<Option<Arc<Pair>>>,
    pub epoll: Arc<Epoll>,
    pub wake: Arc<EventFd>,
    pub stop: Arc<AtomicBool>,
    /// This rank's end of the links, for its heartbeat timeout (if any).
    pub endpoint: Arc<Endpoint>,
}

impl Sender {
    pub fn run(self) {
        let timer = self.endpoint.heartbeat.as_ref().map(|hb| hb.interval());
        let mut watchdog = self
            .endpoint
            .heartbeat
            .as_ref()
            .map(|hb| Watchdog::new(hb.timeout_ms));
        event_loop(
            "sending",
            &self.epoll,
            &self.wake,
            &self.stop,
            timer,
            |token, flags| self.serve((token & !TX_TOKEN) as usize, flags),
            |_| {
                if let Some(w) = watchdog.as_mut() {
                    self.on_timer(w);
                }
                timer
            },
        );
    }

    /// The heartbeat's timer: sends heartbeats, and fails the peers silent for the timeout
    /// (except while a thread is receiving from one, or after its goodbye).
    fn on_timer(&self, watchdog: &mut Watchdog) {
        let Some(hb) = &self.endpoint.heartbeat else {
            return;
        };
        let now = hb.clock.now_ms();
        let open = || self.pairs.iter().flatten().filter(|p| !p.is_closed());
        match watchdog.tick(now) {
            Tick::Idle => {}
            Tick::Restart => open().for_each(|p| p.heard.store(now, Ordering::Relaxed)),
            Tick::Beat => {
                for p in open() {
                    p.heartbeat();
                    if p.said_bye() || p.receiving() {
                        continue;
                    }
                    let heard = p.heard.load(Ordering::Relaxed);
                    if let Some(silent_ms) = watchdog.silent_for(now, heard) {
                        p.fail(&ProtocolError::Silent {
                            silent_ms,
                            timeout_ms: hb.timeout_ms,
                        });
                    }
                }
            }
        }
    }

    fn serve(&self, rank: usize, flags: EpollFlags) {
        let Some(pair) = open_pair(&self.pairs, rank) else {
            return;
        };
        if flags.intersects(EpollFlags::EPOLLHUP | EpollFlags::EPOLLERR) {
            // Whatever the peer sent before it went is still to be taken in (its goodbye,
            // above all, which makes the end orderly); the incoming connection then ends too.
            let reason = match pair.on_readable() {
                Err(reason) => reason,
                Ok(_) => ProtocolError::OutgoingReset,
            };
            pair.fail(&reason);
            return;
        }
        if flags.contains(EpollFlags::EPOLLOUT) {
            if let Err(e) = pair.flush() {
                pair.fail(&ProtocolError::Send(e.kind()));
            }
        }
    }
}
