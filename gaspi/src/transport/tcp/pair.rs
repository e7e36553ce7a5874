//! The link to one peer: an ordered send queue on the outgoing connection, fed by application
//! threads and the progress thread, and the receive state machine on the incoming one.
//!
//! Sends go straight to the socket from the posting thread when nothing is queued (one
//! vectored send of header + segment slice, no staging copy); what does not fit in the socket
//! buffer is queued and finished by the progress thread on `EPOLLOUT`, in order. Received
//! payload is read straight into the target segment once its header has been validated.

use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, Read};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use nix::sys::epoll::{Epoll, EpollEvent, EpollFlags};
use parking_lot::Mutex;

use crate::context::Shared;
use crate::error::{error_str, Error, Result};
use crate::mem::{read_into, send_vectored, SegmentMemory};
use crate::queue::QueueState;
use crate::segment::SegKey;
use crate::transport::shm::apply_atomic;
use crate::transport::tcp::handshake::Link;
use crate::transport::tcp::wire::{Header, Op, FLAG_CAS, FLAG_NOTIFY, FLAG_SHM_DATA, HEADER_LEN};
use crate::types::{AtomicOp, Rank};

const RECV_BUF: usize = 256 * 1024;
/// Payload bytes a waiting application thread takes in per poll (see `try_on_readable`).
const WAITER_RECV_BUDGET: usize = 256 * 1024;
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

/// A read waiting for its response.
pub(crate) struct PendingRead {
    pub mem: Arc<SegmentMemory>,
    pub off: usize,
    pub len: usize,
    pub notify: Option<u32>,
    pub done: Option<Arc<QueueState>>,
}

enum Sink {
    Segment { mem: Arc<SegmentMemory>, off: usize },
    Buffer(Vec<u8>),
}

struct Incoming {
    header: Header,
    sink: Sink,
    got: usize,
    read: Option<PendingRead>,
}

struct RecvState {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    cur: Option<Incoming>,
}

pub(crate) struct Pair {
    pub peer: Rank,
    /// Carries every frame this rank sends to the peer; nothing is read from it.
    pub tx: TcpStream,
    /// Carries every frame the peer sends to this rank; nothing is written to it.
    pub rx: TcpStream,
    sh: Arc<Shared>,
    /// The progress thread's epoll (the incoming connection is in it)...
    rx_epoll: Arc<Epoll>,
    /// ... and the sending thread's (the outgoing one).
    tx_epoll: Arc<Epoll>,
    send: Mutex<SendQueue>,
    recv: Mutex<RecvState>,
    reads: Mutex<HashMap<u64, PendingRead>>,
    closed: AtomicBool,
    /// The peer said goodbye: its EOF is not a failure.
    bye: AtomicBool,
    /// The peer broke the protocol after its goodbye (sent more): its end is a failure.
    violated: AtomicBool,
    /// This rank is leaving (`term`): the connection ending now is not a failure either,
    /// even if the peer closes without a goodbye of its own (it may have closed its side
    /// after ours, having seen our goodbye first).
    leaving: AtomicBool,
}

fn failed(peer: Rank) -> Error {
    Error::PeerFailed { rank: peer }
}

impl Pair {
    pub fn new(
        peer: Rank,
        link: Link,
        sh: Arc<Shared>,
        rx_epoll: Arc<Epoll>,
        tx_epoll: Arc<Epoll>,
    ) -> Self {
        Pair {
            peer,
            tx: link.tx,
            rx: link.rx,
            sh,
            rx_epoll,
            tx_epoll,
            send: Mutex::default(),
            recv: Mutex::new(RecvState {
                buf: vec![0; RECV_BUF],
                start: 0,
                end: 0,
                cur: None,
            }),
            reads: Mutex::default(),
            closed: AtomicBool::new(false),
            bye: AtomicBool::new(false),
            violated: AtomicBool::new(false),
            leaving: AtomicBool::new(false),
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

    /// The outgoing connection's: writability while frames are queued. Its hang-up and
    /// errors are reported whatever the flags.
    pub fn tx_events(&self, out: bool) -> EpollEvent {
        let f = if out {
            EpollFlags::EPOLLOUT
        } else {
            EpollFlags::empty()
        };
        EpollEvent::new(f, TX_TOKEN | u64::from(self.peer.0))
    }

    /// Posts one frame. Completes at once if the socket takes it all; otherwise queues it and
    /// counts it on `q` until the progress thread has written it.
    pub fn post(
        &self,
        header: Header,
        payload: Payload,
        q: Option<&Arc<QueueState>>,
    ) -> Result<()> {
        // Our goodbye is the last frame on this connection: the peer takes anything after it
        // as a protocol violation. (Answers to requests that arrive while we leave are
        // dropped; their senders see our goodbye.)
        if self.leaving.load(Ordering::Acquire) && header.op != Op::Bye {
            return Err(Error::Terminated);
        }
        let mut frame = OutFrame {
            header: header.encode(),
            payload,
            sent: 0,
            done: None,
        };
        let mut sq = self.send.lock();
        if self.is_closed() {
            return Err(failed(self.peer));
        }
        if sq.frames.is_empty() {
            match self.write_some(&mut frame) {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(e) => {
                    tracing::debug!(peer = self.peer.0, "send failed: {e}");
                    // The progress thread sees the error on the socket and fails the pair.
                    return Err(failed(self.peer));
                }
            }
        }
        if let Some(q) = q {
            q.begin_async();
            frame.done = Some(q.clone());
        }
        sq.frames.push_back(frame);
        if !sq.out_armed {
            sq.out_armed = true;
            let mut ev = self.tx_events(true);
            self.tx_epoll
                .modify(&self.tx, &mut ev)
                .map_err(|e| Error::Other(format!("epoll: {e}")))?;
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
                        iov[n] = mem.iovec(off + body_done, len - body_done);
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

    /// Progress thread, on `EPOLLOUT`: writes queued frames in order.
    pub fn flush(&self) -> std::io::Result<()> {
        let mut sq = self.send.lock();
        while let Some(front) = sq.frames.front_mut() {
            if !self.write_some(front)? {
                return Ok(());
            }
            let f = sq.frames.pop_front().expect("front exists");
            if let Some(q) = f.done {
                q.complete(None);
            }
        }
        if sq.out_armed {
            sq.out_armed = false;
            let mut ev = self.tx_events(false);
            let _ = self.tx_epoll.modify(&self.tx, &mut ev);
        }
        Ok(())
    }

    /// Marks this side as leaving, before it says goodbye (see `leaving`).
    pub fn leave(&self) {
        self.leaving.store(true, Ordering::Release);
    }

    fn orderly(&self) -> bool {
        (self.bye.load(Ordering::Acquire) || self.leaving.load(Ordering::Acquire))
            && !self.violated.load(Ordering::Acquire)
    }

    /// Records that the peer sent `what` after its goodbye: nothing more is applied, and the
    /// connection's end marks it CORRUPT.
    fn after_goodbye(&self, what: &str) -> String {
        self.violated.store(true, Ordering::Release);
        format!("protocol violation: {what} after goodbye")
    }

    /// True when nothing is left to send (used by `term` to let goodbyes drain).
    pub fn send_idle(&self) -> bool {
        self.send.lock().frames.is_empty()
    }

    pub fn add_read(&self, req: u64, r: PendingRead) {
        self.reads.lock().insert(req, r);
    }

    pub fn take_read(&self, req: u64) -> Option<PendingRead> {
        self.reads.lock().remove(&req)
    }

    /// Progress thread, on `EPOLLIN`: consumes everything readable. `Err` = drop the peer.
    pub fn on_readable(&self) -> std::result::Result<(), String> {
        self.receive(&mut self.recv.lock(), usize::MAX)
    }

    /// A waiting application thread: the same, unless another thread is receiving from this
    /// peer already (`None`), and only until it has read [`WAITER_RECV_BUDGET`] bytes of
    /// payload, so that it gets back to what it waits for (and does not hold the progress
    /// thread off this peer) during a long stream.
    pub fn try_on_readable(&self) -> Option<std::result::Result<(), String>> {
        Some(self.receive(&mut *self.recv.try_lock()?, WAITER_RECV_BUDGET))
    }

    /// Reads and handles frames until the socket is drained, or until `budget` bytes of
    /// payload went straight into their sink. It stops early only with nothing buffered, so
    /// what is left is still in the socket and epoll reports it again.
    fn receive(&self, st: &mut RecvState, budget: usize) -> std::result::Result<(), String> {
        let mut taken = 0usize;
        loop {
            if let Some(cur) = st.cur.as_mut() {
                let need = cur.header.len as usize - cur.got;
                let avail = st.end - st.start;
                if need > 0 && avail > 0 {
                    let n = need.min(avail);
                    let src = &st.buf[st.start..st.start + n];
                    match &mut cur.sink {
                        Sink::Segment { mem, off } => mem.copy_in(*off + cur.got, src),
                        Sink::Buffer(v) => v[cur.got..cur.got + n].copy_from_slice(src),
                    }
                    st.start += n;
                    cur.got += n;
                } else if need > 0 {
                    let r = match &mut cur.sink {
                        Sink::Segment { mem, off } => {
                            read_into(&self.rx, mem, *off + cur.got, need)
                        }
                        Sink::Buffer(v) => (&self.rx).read(&mut v[cur.got..]),
                    };
                    match r {
                        Ok(0) => return Err(self.eof()),
                        Ok(n) => {
                            cur.got += n;
                            taken += n;
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                        Err(e) if e.kind() == ErrorKind::Interrupted => {}
                        Err(e) => return Err(format!("receive: {e}")),
                    }
                }
                if cur.got == cur.header.len as usize {
                    let done = st.cur.take().expect("current frame");
                    self.finish(done)?;
                }
                if taken >= budget && st.start == st.end {
                    return Ok(());
                }
                continue;
            }
            if st.end > st.start && self.bye.load(Ordering::Acquire) {
                return Err(self.after_goodbye("data"));
            }
            if st.end - st.start >= HEADER_LEN {
                let h = Header::decode(&st.buf[st.start..st.start + HEADER_LEN])?;
                st.start += HEADER_LEN;
                st.cur = self.dispatch(h)?;
                continue;
            }
            if st.start > 0 {
                st.buf.copy_within(st.start..st.end, 0);
                st.end -= st.start;
                st.start = 0;
            }
            let end = st.end;
            match (&self.rx).read(&mut st.buf[end..]) {
                Ok(0) => return Err(self.eof()),
                Ok(n) => st.end += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("receive: {e}")),
            }
        }
    }

    fn eof(&self) -> String {
        if self.orderly() {
            "closed after goodbye".into()
        } else {
            "connection closed by peer".into()
        }
    }

    /// The segment `key` as the target of an access of `[off, off+len)` by this peer.
    fn target(
        &self,
        key: SegKey,
        off: u64,
        len: u64,
    ) -> std::result::Result<Arc<SegmentMemory>, String> {
        let seg = self
            .sh
            .segments
            .local(key)
            .ok_or_else(|| format!("unknown segment {key}"))?;
        if !seg.allows(self.peer) {
            return Err(format!(
                "segment {key} is not registered with rank {}",
                self.peer
            ));
        }
        if off
            .checked_add(len)
            .is_none_or(|e| e > seg.mem.len() as u64)
        {
            return Err(format!(
                "[{off}, +{len}) is past the end of segment {key} ({} bytes)",
                seg.mem.len()
            ));
        }
        Ok(seg.mem.clone())
    }

    fn check_notification(
        mem: &SegmentMemory,
        id: u32,
        value: u32,
    ) -> std::result::Result<(), String> {
        if id >= mem.notif_count() {
            return Err(format!("notification {id} out of range"));
        }
        if value == 0 {
            return Err("zero notification value".into());
        }
        Ok(())
    }

    fn reply(&self, op: Op, req: u64, a: u64) {
        let mut h = Header::new(op);
        h.req = req;
        h.a = a;
        let _ = self.post(h, Payload::None, None);
    }

    /// Validates a header and acts on it; returns the payload sink when bytes follow.
    fn dispatch(&self, h: Header) -> std::result::Result<Option<Incoming>, String> {
        let incoming = |sink| {
            Some(Incoming {
                header: h,
                sink,
                got: 0,
                read: None,
            })
        };
        match h.op {
            Op::Write => {
                if h.len > self.sh.config.transfer_size_max {
                    return Err(format!(
                        "write of {} bytes exceeds the transfer maximum",
                        h.len
                    ));
                }
                let mem = self.target(h.seg, h.offset, h.len)?;
                if h.flags & FLAG_NOTIFY != 0 {
                    Self::check_notification(&mem, h.notif_id, h.notif_val)?;
                }
                let inc = Incoming {
                    header: h,
                    sink: Sink::Segment {
                        mem,
                        off: h.offset as usize,
                    },
                    got: 0,
                    read: None,
                };
                if h.len == 0 {
                    self.finish(inc)?;
                    return Ok(None);
                }
                Ok(Some(inc))
            }
            Op::Notify => {
                let mem = self.target(h.seg, 0, 0)?;
                Self::check_notification(&mem, h.notif_id, h.notif_val)?;
                mem.notify(h.notif_id, h.notif_val);
                Ok(None)
            }
            Op::ReadReq => {
                let mem = self.target(h.seg, h.offset, h.len)?;
                let mut r = Header::new(Op::ReadResp);
                r.req = h.req;
                r.len = h.len;
                let payload = Payload::Segment {
                    mem,
                    off: h.offset as usize,
                    len: h.len as usize,
                };
                self.post(r, payload, None).map_err(|e| e.to_string())?;
                Ok(None)
            }
            Op::ReadResp => {
                let read = self
                    .take_read(h.req)
                    .ok_or_else(|| format!("response to unknown read {}", h.req))?;
                if read.len as u64 != h.len {
                    return Err(format!(
                        "read response of {} bytes, expected {}",
                        h.len, read.len
                    ));
                }
                let inc = Incoming {
                    header: h,
                    sink: Sink::Segment {
                        mem: read.mem.clone(),
                        off: read.off,
                    },
                    got: 0,
                    read: Some(read),
                };
                if h.len == 0 {
                    self.finish(inc)?;
                    return Ok(None);
                }
                Ok(Some(inc))
            }
            Op::AtomicReq => {
                let mem = self.target(h.seg, h.offset, 8)?;
                let word = mem
                    .atomic_u64(h.offset as usize)
                    .map_err(|e| e.to_string())?;
                let op = if h.flags & FLAG_CAS != 0 {
                    AtomicOp::CompareSwap {
                        expected: h.a,
                        new: h.b,
                    }
                } else {
                    AtomicOp::FetchAdd { add: h.a }
                };
                self.reply(Op::AtomicResp, h.req, apply_atomic(word, op));
                Ok(None)
            }
            Op::AtomicResp => {
                self.sh.rpc.complete(h.req, Ok(h.a));
                Ok(None)
            }
            Op::SegRegister => {
                let status = match self.sh.on_remote_register(
                    self.peer,
                    h.seg,
                    h.len,
                    h.notif_id,
                    h.flags & FLAG_SHM_DATA != 0,
                    h.a,
                ) {
                    Ok(()) => 0,
                    Err(e) => {
                        tracing::warn!(
                            peer = self.peer.0,
                            "cannot register peer segment {}: {e}",
                            h.seg
                        );
                        e.code() as i64 as u64
                    }
                };
                self.reply(Op::Ack, h.req, status);
                Ok(None)
            }
            Op::SegDelete => {
                self.sh.on_remote_delete(self.peer, h.seg);
                Ok(None)
            }
            Op::Passive => {
                if h.len > u64::from(self.sh.config.passive_transfer_size_max) {
                    return Err(format!("passive message of {} bytes is too large", h.len));
                }
                let inc = incoming(Sink::Buffer(vec![0; h.len as usize]));
                if h.len == 0 {
                    self.finish(inc.expect("some"))?;
                    return Ok(None);
                }
                Ok(inc)
            }
            Op::Ack => {
                let code = h.a as i64 as i32;
                let v = if code == 0 {
                    Ok(0)
                } else {
                    Err(Error::Other(format!(
                        "rank {} refused the request: {}",
                        self.peer,
                        error_str(code)
                    )))
                };
                self.sh.rpc.complete(h.req, v);
                Ok(None)
            }
            Op::Ping => {
                self.reply(Op::Ack, h.req, 0);
                Ok(None)
            }
            Op::Kill => {
                tracing::error!(
                    "rank {} asked this rank to terminate (gaspi_proc_kill)",
                    self.peer
                );
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::this(),
                    nix::sys::signal::Signal::SIGKILL,
                );
                Ok(None)
            }
            Op::Bye => {
                self.bye.store(true, Ordering::Release);
                self.sh.state.mark_gone(self.peer);
                // Collectives blocked on the peer (over shared memory too) end now.
                self.sh.wake_all();
                Ok(None)
            }
        }
    }

    /// A frame's payload has fully arrived.
    fn finish(&self, inc: Incoming) -> std::result::Result<(), String> {
        let h = inc.header;
        match h.op {
            Op::Write if h.flags & FLAG_NOTIFY != 0 => {
                if let Sink::Segment { mem, .. } = &inc.sink {
                    mem.notify(h.notif_id, h.notif_val);
                }
            }
            Op::ReadResp => {
                if let Some(read) = inc.read {
                    if let Some(id) = read.notify {
                        read.mem.notify(id, 1);
                    }
                    if let Some(q) = read.done {
                        q.complete(None);
                    }
                }
            }
            Op::Passive => {
                if let Sink::Buffer(data) = inc.sink {
                    let status = match self.sh.passive.push(self.peer, data) {
                        Ok(()) => 0,
                        Err(e) => e.code() as i64 as u64,
                    };
                    self.reply(Op::Ack, h.req, status);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Tears the connection down and fails everything pending on it.
    pub fn fail(&self, reason: &str) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        let orderly = self.orderly();
        if orderly {
            tracing::debug!(peer = self.peer.0, "connection closed after goodbye");
        } else if self.sh.state.mark_corrupt(self.peer) {
            tracing::warn!(
                peer = self.peer.0,
                "rank {} marked CORRUPT: {reason}",
                self.peer
            );
        }
        let _ = self.rx_epoll.delete(&self.rx);
        let _ = self.tx_epoll.delete(&self.tx);
        let _ = self.rx.shutdown(std::net::Shutdown::Both);
        let _ = self.tx.shutdown(std::net::Shutdown::Both);
        let frames: Vec<OutFrame> = self.send.lock().frames.drain(..).collect();
        for f in frames {
            if let Some(q) = f.done {
                q.complete(Some(self.peer));
            }
        }
        let mut reads: Vec<PendingRead> = self.reads.lock().drain().map(|(_, r)| r).collect();
        if let Some(read) = self.recv.lock().cur.take().and_then(|inc| inc.read) {
            reads.push(read);
        }
        for r in reads {
            if let Some(q) = r.done {
                q.complete(Some(self.peer));
            }
        }
        self.sh.rpc.fail_rank(self.peer);
        self.sh.wake_all();
    }
}
