//! The sending half of a link: an ordered queue of frames on the outgoing connection.
//!
//! Sends go straight to the socket from the posting thread when nothing is queued (one
//! vectored send of header + segment slice, no staging copy); what does not fit in the socket
//! buffer is queued and finished by the sending thread on `EPOLLOUT`, in order.

use std::collections::VecDeque;
use std::io::ErrorKind;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use nix::sys::epoll::{Epoll, EpollEvent, EpollFlags};
use parking_lot::Mutex;

use crate::config::limits;
use crate::error::{Error, Result};
use crate::memory::segment_memory::SegmentMemory;
use crate::transport::completion::QueueState;
use crate::transport::tcp::socket::send_vectored;
use crate::types::Rank;
use crate::wire::frame::{Header, HEADER_LEN};

/// The most answers (`ReadResp`, `AtomicResp`, `Ack`) that may wait in one peer's queue.
///
/// A peer that reads is owed at most one answer per request it has outstanding: a read
/// holds an entry of one of its queues until its answer arrives (at most
/// `QUEUE_NUM_MAX × QUEUE_SIZE_MAX` = 65536), and atomics, pings, registrations and
/// passive sends hold a calling thread each (the other 65536 leave room for threads and for
/// requests given up after a timeout). A peer owed more than this keeps sending requests
/// but does not read: it is failed rather than let grow this rank's memory without bound
/// (an answer waiting here costs about 100 bytes, so this caps a peer at about 13 MB).
pub(crate) const ANSWER_BACKLOG_MAX: usize =
    2 * (limits::QUEUE_NUM_MAX as usize) * (limits::QUEUE_SIZE_MAX as usize);

/// Set in the epoll token of a peer's outgoing connection (the incoming one's is the rank).
pub(crate) const TX_TOKEN: u64 = 1 << 32;

/// Bytes that follow a header on the wire.
pub(crate) enum Payload {
    None,
    /// A slice of segment memory, sent without copying.
    Segment {
        mem: Arc<SegmentMemory>,
        off: usize,
        len: usize,
    },
    Owned(Vec<u8>),
}

struct OutFrame {
    header: [u8; HEADER_LEN],
    payload: Payload,
    /// Bytes of header + payload already written.
    sent: usize,
    done: Option<Arc<QueueState>>,
    /// An answer to one of the peer's requests (counted in `Outbox::answers`).
    answer: bool,
}

impl OutFrame {
    fn total(&self) -> usize {
        HEADER_LEN
            + match &self.payload {
                Payload::None => 0,
                Payload::Segment { len, .. } => *len,
                Payload::Owned(v) => v.len(),
            }
    }
}

#[derive(Default)]
struct SendQueue {
    frames: VecDeque<OutFrame>,
    out_armed: bool,
}

/// The outgoing connection to one peer and the frames queued on it.
pub(crate) struct Outbox {
    peer: Rank,
    /// Carries every frame this rank sends to the peer; nothing is read from it.
    pub tx: TcpStream,
    /// The sending thread's epoll (the outgoing connection is in it).
    tx_epoll: Arc<Epoll>,
    queue: Mutex<SendQueue>,
    /// How many queued frames are answers: changed under `queue`'s lock, read without it
    /// (the receive path checks it per request and must not wait for a long write).
    answers: AtomicUsize,
}

impl Outbox {
    pub fn new(peer: Rank, tx: TcpStream, tx_epoll: Arc<Epoll>) -> Self {
        Outbox {
            peer,
            tx,
            tx_epoll,
            queue: Mutex::default(),
            answers: AtomicUsize::new(0),
        }
    }

    /// The outgoing connection's epoll registration: writability while frames are queued.
    /// Its hang-up and errors are reported whatever the flags.
    pub fn events(&self, out: bool) -> EpollEvent {
        let f = if out {
            EpollFlags::EPOLLOUT
        } else {
            EpollFlags::empty()
        };
        EpollEvent::new(f, TX_TOKEN | u64::from(self.peer.0))
    }

    /// Posts one frame, unless `closed` is set (checked under the queue's lock, so nothing
    /// is queued after [`drain`](Self::drain)). Completes at once if the socket takes it
    /// all; otherwise queues it and counts it on `q` until the sending thread has written it.
    pub fn post(
        &self,
        header: Header,
        payload: Payload,
        q: Option<&Arc<QueueState>>,
        closed: &AtomicBool,
    ) -> Result<()> {
        self.post_unless(header, payload, q, || closed.load(Ordering::Acquire))
    }

    /// [`post`](Self::post), refused when `refused` holds under the queue's lock.
    #[inline]
    pub fn post_unless(
        &self,
        header: Header,
        payload: Payload,
        q: Option<&Arc<QueueState>>,
        refused: impl Fn() -> bool,
    ) -> Result<()> {
        let mut frame = OutFrame {
            header: header.encode(),
            payload,
            sent: 0,
            done: None,
            answer: header.kind.is_answer(),
        };
        let failed = Error::PeerFailed { rank: self.peer };
        let mut sq = self.queue.lock();
        if refused() {
            return Err(failed);
        }
        if sq.frames.is_empty() {
            match self.write_some(&mut frame) {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(e) => {
                    tracing::debug!(peer = self.peer.0, "send failed: {e}");
                    // The progress thread sees the error on the socket and fails the pair.
                    return Err(failed);
                }
            }
        }
        if let Some(q) = q {
            q.begin_async();
            frame.done = Some(q.clone());
        }
        if frame.answer {
            self.answers.fetch_add(1, Ordering::Relaxed);
        }
        sq.frames.push_back(frame);
        if !sq.out_armed {
            sq.out_armed = true;
            let mut ev = self.events(true);
            self.tx_epoll.modify(&self.tx, &mut ev)?;
        }
        Ok(())
    }

    /// Writes as much of `f` as the socket takes; true when all of it is written.
    fn write_some(&self, f: &mut OutFrame) -> std::io::Result<bool> {
        let total = f.total();
        while f.sent < total {
            let mut iov = [libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            }; 2];
            let mut n = 0;
            if f.sent < HEADER_LEN {
                iov[0] = libc::iovec {
                    iov_base: f.header[f.sent..].as_ptr() as *mut libc::c_void,
                    iov_len: HEADER_LEN - f.sent,
                };
                n = 1;
            }
            let body_done = f.sent.saturating_sub(HEADER_LEN);
            match &f.payload {
                Payload::None => {}
                Payload::Segment { mem, off, len } => {
                    if body_done < *len {
                        iov[n] = segment_iovec(mem, off + body_done, len - body_done);
                        n += 1;
                    }
                }
                Payload::Owned(v) => {
                    if body_done < v.len() {
                        iov[n] = libc::iovec {
                            iov_base: v[body_done..].as_ptr() as *mut libc::c_void,
                            iov_len: v.len() - body_done,
                        };
                        n += 1;
                    }
                }
            }
            match send_vectored(&self.tx, &iov[..n]) {
                Ok(w) => f.sent += w,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Sending thread, on `EPOLLOUT`: writes queued frames in order.
    pub fn flush(&self) -> std::io::Result<()> {
        let mut sq = self.queue.lock();
        while let Some(front) = sq.frames.front_mut() {
            if !self.write_some(front)? {
                return Ok(());
            }
            let f = sq.frames.pop_front().expect("front exists");
            if f.answer {
                self.answers.fetch_sub(1, Ordering::Relaxed);
            }
            if let Some(q) = f.done {
                q.complete(None);
            }
        }
        if sq.out_armed {
            sq.out_armed = false;
            let mut ev = self.events(false);
            let _ = self.tx_epoll.modify(&self.tx, &mut ev);
        }
        Ok(())
    }

    /// Returns once no frame is being written: one writes under the queue's lock.
    pub fn wait_for_send(&self) {
        drop(self.queue.lock());
    }

    /// True when nothing is left to send (used by `term` to let goodbyes drain, and by the
    /// heartbeat: a peer with frames queued will hear from us when it reads again).
    pub fn is_idle(&self) -> bool {
        self.queue.lock().frames.is_empty()
    }

    /// How many answers to the peer's requests wait in the queue (the peer is not reading
    /// them yet).
    pub fn answers_queued(&self) -> usize {
        self.answers.load(Ordering::Relaxed)
    }

    /// Takes the connection out of the sending thread's epoll and fails every queued frame's
    /// completion (the peer failed).
    pub fn drain(&self) {
        let _ = self.tx_epoll.delete(&self.tx);
        let frames: Vec<OutFrame> = {
            let mut sq = self.queue.lock();
            self.answers.store(0, Ordering::Relaxed);
            sq.frames.drain(..).collect()
        };
        for f in frames {
            if let Some(q) = f.done {
                q.complete(Some(self.peer));
            }
        }
    }
}

/// Zeros sent in place of the rest of a frame whose segment was deleted while it was queued.
static ZEROS: [u8; 4096] = [0; 4096];

/// Where `len` bytes of segment memory at `off` are sent from: the memory itself, or, once
/// its segment was deleted ([`SegmentMemory::revoke`]), zeros, so that the frame stays whole
/// and the bound user memory, which may be freed by now, is not read.
fn segment_iovec(mem: &SegmentMemory, off: usize, len: usize) -> libc::iovec {
    if mem.is_revoked() {
        return libc::iovec {
            iov_base: ZEROS.as_ptr() as *mut libc::c_void,
            iov_len: len.min(ZEROS.len()),
        };
    }
    mem.iovec(off, len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::frame::FrameKind;
    use nix::sys::epoll::EpollCreateFlags;
    use std::io::Read;

    #[test]
    fn a_deleted_user_segment_is_sent_as_zeros_not_read() {
        let runtime = SegmentMemory::anonymous(1 << 16, 1).unwrap();
        // Runtime memory stays valid while a handle lives: what is queued goes out as is.
        assert!(!runtime.revoke());
        let iov = segment_iovec(&runtime, 10, 50_000);
        assert_eq!(iov.iov_base as usize, runtime.data_addr() as usize + 10);
        let mem = SegmentMemory::leaked_user_memory(1 << 16);
        let iov = segment_iovec(&mem, 10, 50_000);
        assert_eq!(
            (iov.iov_base as usize, iov.iov_len),
            (mem.data_addr() as usize + 10, 50_000)
        );
        assert!(mem.revoke());
        let iov = segment_iovec(&mem, 10, 50_000);
        assert_eq!(iov.iov_base as usize, ZEROS.as_ptr() as usize);
        assert_eq!(iov.iov_len, ZEROS.len());
        assert_eq!(segment_iovec(&mem, 0, 3).iov_len, 3);
    }

    /// An outbox on a loopback connection whose other end is returned unread.
    fn outbox() -> (Outbox, TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let tx = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        tx.set_nonblocking(true).unwrap();
        let (rx, _) = listener.accept().unwrap();
        let epoll = Arc::new(Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).unwrap());
        let outbox = Outbox::new(Rank(1), tx, epoll.clone());
        epoll.add(&outbox.tx, outbox.events(false)).unwrap();
        (outbox, rx)
    }

    #[test]
    fn answers_are_counted_while_queued_and_not_once_written() {
        let (outbox, mut rx) = outbox();
        let open = AtomicBool::new(false);
        // More than the connection's buffers hold, so that what follows queues.
        let big = Payload::Owned(vec![7; 64 << 20]);
        outbox
            .post(Header::new(FrameKind::Write), big, None, &open)
            .unwrap();
        assert_eq!(outbox.answers_queued(), 0);
        for kind in [FrameKind::Ack, FrameKind::Write, FrameKind::AtomicResp] {
            outbox
                .post(Header::new(kind), Payload::None, None, &open)
                .unwrap();
        }
        assert_eq!(outbox.answers_queued(), 2);
        let reader = std::thread::spawn(move || {
            let mut all = Vec::new();
            rx.read_to_end(&mut all).unwrap();
            all.len()
        });
        while !outbox.is_idle() {
            outbox.flush().unwrap();
            let mut fds = [nix::poll::PollFd::new(
                std::os::fd::AsFd::as_fd(&outbox.tx),
                nix::poll::PollFlags::POLLOUT,
            )];
            nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(1000u16)).unwrap();
        }
        assert_eq!(outbox.answers_queued(), 0);
        outbox.tx.shutdown(std::net::Shutdown::Write).unwrap();
        assert_eq!(reader.join().unwrap(), (64 << 20) + 4 * HEADER_LEN);
    }

    #[test]
    fn a_failed_link_owes_no_answers() {
        let (outbox, _rx) = outbox();
        let open = AtomicBool::new(false);
        let big = Payload::Owned(vec![7; 64 << 20]);
        outbox
            .post(Header::new(FrameKind::Write), big, None, &open)
            .unwrap();
        let resp = Header::new(FrameKind::ReadResp);
        outbox.post(resp, Payload::None, None, &open).unwrap();
        assert_eq!(outbox.answers_queued(), 1);
        outbox.drain();
        assert_eq!(outbox.answers_queued(), 0);
    }
}
