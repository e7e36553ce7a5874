//! The link to one peer: the outgoing connection's [`Outbox`], the incoming connection's
//! receive state, the reads waiting for their responses, and the link's life: open, the peer
//! said goodbye, this rank is leaving, failed. What incoming frames do is in `execute`.

use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use nix::sys::epoll::{Epoll, EpollEvent, EpollFlags};
use parking_lot::Mutex;

use crate::error::{Error, ProtocolError, Result};
use crate::transport::completion::QueueState;
use crate::transport::tcp::endpoint::Endpoint;
use crate::transport::tcp::handshake::Link;
use crate::transport::tcp::receive::{PendingRead, PendingReads, RecvState};
use crate::transport::tcp::send::{Outbox, Payload};
use crate::transport::tcp::socket::readable_now;
use crate::types::Rank;
use crate::wire::control::ControlMessage;
use crate::wire::frame::{FrameKind, Header};

/// Payload bytes a waiting application thread takes in per poll (see `try_on_readable`).
const WAITER_RECV_BUDGET: usize = 256 * 1024;

pub(crate) struct Pair {
    pub peer: Rank,
    pub outbox: Outbox,
    /// Carries every frame the peer sends to this rank; nothing is written to it.
    pub rx: TcpStream,
    pub(super) endpoint: Arc<Endpoint>,
    /// The progress thread's epoll (the incoming connection is in it).
    rx_epoll: Arc<Epoll>,
    recv: Mutex<RecvState>,
    pub(super) reads: PendingReads,
    closed: AtomicBool,
    /// The peer said goodbye: its EOF is not a failure.
    pub(super) bye: AtomicBool,
    /// The peer broke the protocol after its goodbye (sent more): its end is a failure.
    pub(super) violated: AtomicBool,
    /// This rank is leaving (`term`): the connection ending now is not a failure either,
    /// even if the peer closes without a goodbye of its own (it may have closed its side
    /// after ours, having seen our goodbye first).
    leaving: AtomicBool,
    /// When something last arrived from the peer, on the heartbeat's clock (stamped only
    /// when a heartbeat timeout is set; see `heartbeat`).
    pub(super) heard: AtomicU64,
}

impl Pair {
    pub fn new(
        peer: Rank,
        link: Link,
        endpoint: Arc<Endpoint>,
        rx_epoll: Arc<Epoll>,
        tx_epoll: Arc<Epoll>,
    ) -> Self {
        Pair {
            peer,
            outbox: Outbox::new(peer, link.tx, tx_epoll),
            rx: link.rx,
            endpoint,
            rx_epoll,
            recv: Mutex::default(),
            reads: PendingReads::default(),
            closed: AtomicBool::new(false),
            bye: AtomicBool::new(false),
            violated: AtomicBool::new(false),
            leaving: AtomicBool::new(false),
            heard: AtomicU64::new(0),
        }
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// The incoming connection's epoll registration.
    pub fn rx_events(&self) -> EpollEvent {
        EpollEvent::new(
            EpollFlags::EPOLLIN | EpollFlags::EPOLLRDHUP,
            u64::from(self.peer.0),
        )
    }

    /// Posts one frame (see [`Outbox::post`]).
    pub fn post(
        &self,
        header: Header,
        payload: Payload,
        q: Option<&Arc<QueueState>>,
    ) -> Result<()> {
        // Our goodbye is the last frame on this connection: the peer takes anything after it
        // as a protocol violation. (Answers to requests that arrive while we leave are
        // dropped; their senders see our goodbye.)
        if self.leaving.load(Ordering::Acquire) && header.kind != FrameKind::Bye {
            return Err(Error::Terminated);
        }
        self.outbox.post(header, payload, q, &self.closed)
    }

    /// Sending thread, on `EPOLLOUT`.
    pub fn flush(&self) -> std::io::Result<()> {
        self.outbox.flush()
    }

    /// Marks this side as leaving, before it says goodbye (see `leaving`).
    pub fn leave(&self) {
        self.leaving.store(true, Ordering::Release);
    }

    pub(super) fn orderly(&self) -> bool {
        (self.bye.load(Ordering::Acquire) || self.leaving.load(Ordering::Acquire))
            && !self.violated.load(Ordering::Acquire)
    }

    /// True when nothing is left to send (used by `term` to let goodbyes drain).
    pub fn send_idle(&self) -> bool {
        self.outbox.is_idle()
    }

    /// Progress thread, on `EPOLLIN`: consumes everything readable; the bytes read.
    /// `Err` = drop the peer.
    pub fn on_readable(&self) -> std::result::Result<usize, ProtocolError> {
        self.note_arrival();
        self.recv.lock().receive(&mut &self.rx, self, usize::MAX)
    }

    /// Something arrived (the connection is readable): the peer is alive. Without a
    /// heartbeat timeout, one branch on a field that never changes.
    #[inline]
    fn note_arrival(&self) {
        if let Some(hb) = &self.endpoint.heartbeat {
            hb.stamp(&self.heard);
        }
    }

    /// A thread is taking bytes in from the peer right now (a long stream may keep it at
    /// that for longer than the heartbeat timeout), or bytes from it wait to be taken in
    /// (this process's receiving threads were not scheduled): the peer is not silent.
    pub fn receiving(&self) -> bool {
        self.recv.is_locked() || readable_now(&self.rx)
    }

    /// The peer said goodbye: its silence from now on is expected.
    pub fn said_bye(&self) -> bool {
        self.bye.load(Ordering::Acquire)
    }

    /// Sends a heartbeat, unless this rank is leaving (checked under the outgoing queue's
    /// lock, so that it never follows our goodbye) or frames are queued to the peer
    /// already (they tell it we are alive when it reads again).
    pub fn heartbeat(&self) {
        if !self.outbox.is_idle() {
            return;
        }
        let _ = self.outbox.post_unless(
            ControlMessage::Heartbeat.header(),
            Payload::None,
            None,
            || self.closed.load(Ordering::Acquire) || self.leaving.load(Ordering::Acquire),
        );
    }

    /// A waiting application thread: the same, unless another thread is receiving from this
    /// peer already (`None`), and only until it has read [`WAITER_RECV_BUDGET`] bytes of
    /// payload, so that it gets back to what it waits for (and does not hold the progress
    /// thread off this peer) during a long stream.
    pub fn try_on_readable(&self) -> Option<std::result::Result<usize, ProtocolError>> {
        self.note_arrival();
        Some(
            self.recv
                .try_lock()?
                .receive(&mut &self.rx, self, WAITER_RECV_BUDGET),
        )
    }

    /// Test hook: nothing from the peer is taken in any more (its connection leaves the
    /// epoll that both the progress thread and waiters poll), as if this rank hung while
    /// its sending side went on.
    #[cfg(feature = "testing")]
    pub fn stop_receiving(&self) -> Result<()> {
        self.rx_epoll.delete(&self.rx)?;
        Ok(())
    }

    /// Returns once no receive from this peer is under way: one holds the receive state
    /// while it copies, so taking it once is enough.
    pub fn wait_for_receive(&self) {
        drop(self.recv.lock());
    }

    /// Tears the connection down and fails everything pending on it.
    pub fn fail(&self, reason: &ProtocolError) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        if self.orderly() {
            tracing::debug!(peer = self.peer.0, "connection closed after goodbye");
        } else if self.endpoint.state.mark_corrupt(self.peer) {
            tracing::warn!(
                peer = self.peer.0,
                "rank {} marked CORRUPT: {reason}",
                self.peer
            );
        }
        let _ = self.rx_epoll.delete(&self.rx);
        let _ = self.rx.shutdown(std::net::Shutdown::Both);
        let _ = self.outbox.tx.shutdown(std::net::Shutdown::Both);
        self.outbox.drain();
        let mut reads: Vec<PendingRead> = self.reads.drain();
        if let Some(read) = self.recv.lock().take_current_read() {
            reads.push(read);
        }
        for r in reads {
            if let Some(q) = r.done {
                q.complete(Some(self.peer));
            }
        }
        self.endpoint.requests.fail_rank(self.peer);
        self.endpoint.segments.wake_all();
    }
}
