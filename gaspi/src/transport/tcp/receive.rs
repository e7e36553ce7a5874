//! The receiving half of a link: the state machine that turns the bytes of the incoming
//! connection into frames. Payload is read straight into its target segment once its header
//! has been validated; what the frames mean is up to a [`FrameHandler`] (the link itself, see
//! `execute`). The bytes come from a [`ByteSource`], so the machine is tested on in-memory
//! streams.

use std::collections::hash_map::{Entry, HashMap};
use std::io::{ErrorKind, Read};
use std::net::TcpStream;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::ProtocolError;
use crate::memory::segment_memory::SegmentMemory;
use crate::transport::completion::QueueState;
use crate::transport::tcp::socket::read_into;
use crate::wire::frame::{Header, HEADER_LEN};

const RECV_BUF: usize = 256 * 1024;

/// Bytes read at a time from payload that is dropped (its segment was deleted).
const DISCARD_CHUNK: usize = 4096;

/// Where received bytes come from: the incoming connection, or a test's buffer.
pub(crate) trait ByteSource {
    /// Reads into `buf`; `Ok(0)` is the end of the stream, `WouldBlock` "nothing now".
    fn read_some(&mut self, buf: &mut [u8]) -> std::io::Result<usize>;
    /// Reads at most `len` bytes straight into segment data at `off`.
    fn read_into_segment(
        &mut self,
        mem: &SegmentMemory,
        off: usize,
        len: usize,
    ) -> std::io::Result<usize>;
}

impl ByteSource for &TcpStream {
    fn read_some(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.read(buf)
    }

    fn read_into_segment(
        &mut self,
        mem: &SegmentMemory,
        off: usize,
        len: usize,
    ) -> std::io::Result<usize> {
        read_into(*self, mem, off, len)
    }
}

/// A read waiting for its response.
pub(crate) struct PendingRead {
    pub mem: Arc<SegmentMemory>,
    pub off: usize,
    pub len: usize,
    pub notify: Option<u32>,
    pub done: Option<Arc<QueueState>>,
}

/// The reads a link asked its peer for, by request id, until their responses arrive.
#[derive(Default)]
pub(crate) struct PendingReads(Mutex<HashMap<u64, PendingRead>>);

impl PendingReads {
    pub fn add(&self, req: u64, read: PendingRead) {
        self.0.lock().insert(req, read);
    }

    /// Takes back read `req`, unanswered (its request could not be sent).
    pub fn cancel(&self, req: u64) -> Option<PendingRead> {
        self.0.lock().remove(&req)
    }

    /// The read that a response of `len` bytes to request `req` answers. A response of the
    /// wrong length leaves the read in place: the peer is dropped for it, and dropping it
    /// completes every read still here with the failure ([`drain`](Self::drain)); taken out,
    /// the read's queue would never complete and a `wait` on it would sleep for ever.
    pub fn answer(&self, req: u64, len: u64) -> Result<PendingRead, ProtocolError> {
        match self.0.lock().entry(req) {
            Entry::Vacant(_) => Err(ProtocolError::UnknownRead(req)),
            Entry::Occupied(read) if read.get().len as u64 != len => {
                Err(ProtocolError::ReadLength {
                    got: len,
                    expected: read.get().len as u64,
                })
            }
            Entry::Occupied(read) => Ok(read.remove()),
        }
    }

    /// Every read still waiting (the link failed).
    pub fn drain(&self) -> Vec<PendingRead> {
        self.0.lock().drain().map(|(_, r)| r).collect()
    }
}

/// Where a frame's payload goes (nowhere, once a segment's memory is revoked: its segment
/// was deleted while the payload was under way).
pub(crate) enum Sink {
    Segment { mem: Arc<SegmentMemory>, off: usize },
    Buffer(Vec<u8>),
}

/// A frame whose payload is arriving.
pub(crate) struct Incoming {
    pub header: Header,
    pub sink: Sink,
    pub got: usize,
    /// The read this frame answers (`ReadResp`).
    pub read: Option<PendingRead>,
}

impl Incoming {
    pub fn new(header: Header, sink: Sink) -> Self {
        Incoming {
            header,
            sink,
            got: 0,
            read: None,
        }
    }
}

/// What frames mean: validates a header (returning the sink of its payload, if any), and acts
/// on a frame once its payload is complete.
pub(crate) trait FrameHandler {
    /// Acts on a header; `Some` when payload follows (possibly of length 0, which is
    /// finished at once by the caller).
    fn dispatch(&self, h: Header) -> Result<Option<Incoming>, ProtocolError>;
    /// A frame's payload has fully arrived.
    fn finish(&self, inc: Incoming) -> Result<(), ProtocolError>;
    /// The peer said goodbye: any byte after it is a violation.
    fn said_goodbye(&self) -> bool;
    /// Records a protocol violation after the goodbye and returns its error.
    fn after_goodbye(&self, what: &'static str) -> ProtocolError;
    /// The error for the stream's end at this point.
    fn end_of_stream(&self) -> ProtocolError;
}

/// The receive state of one incoming connection: a buffer of bytes not yet parsed, and the
/// frame whose payload is arriving.
pub(crate) struct RecvState {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    cur: Option<Incoming>,
}

impl Default for RecvState {
    fn default() -> Self {
        RecvState {
            buf: vec![0; RECV_BUF],
            start: 0,
            end: 0,
            cur: None,
        }
    }
}

fn receive_error(e: std::io::Error) -> ProtocolError {
    ProtocolError::Receive(e.kind())
}

impl RecvState {
    /// The read whose response was arriving (the link failed).
    pub fn take_current_read(&mut self) -> Option<PendingRead> {
        self.cur.take().and_then(|inc| inc.read)
    }

    /// Reads and handles frames until the source is drained, or until `budget` bytes were
    /// read from it. It stops early only where it would read the source next: every complete
    /// frame buffered has been handled, and what is left is still in the socket, so epoll
    /// reports it again. (Frames that arrive whole in the buffer count: a stream of small
    /// writes must not keep a waiter here past what it waits for.)
    ///
    /// A read that returned less than it asked for drained the socket: the next read would
    /// only say `WouldBlock`, so it is not made (a small message costs one `recv`, not two);
    /// bytes that arrive meanwhile make epoll report the connection again. Returns the bytes
    /// read from the source.
    pub fn receive(
        &mut self,
        src: &mut impl ByteSource,
        handler: &impl FrameHandler,
        budget: usize,
    ) -> Result<usize, ProtocolError> {
        let mut read = 0usize;
        let mut drained = false;
        loop {
            if let Some(cur) = self.cur.as_mut() {
                let need = cur.header.len as usize - cur.got;
                let avail = self.end - self.start;
                if need > 0 && avail > 0 {
                    let n = need.min(avail);
                    let bytes = &self.buf[self.start..self.start + n];
                    match &mut cur.sink {
                        Sink::Segment { mem, .. } if mem.is_revoked() => {}
                        Sink::Segment { mem, off } => mem.copy_in(*off + cur.got, bytes),
                        Sink::Buffer(v) => v[cur.got..cur.got + n].copy_from_slice(bytes),
                    }
                    self.start += n;
                    cur.got += n;
                } else if need > 0 {
                    if drained || read >= budget {
                        return Ok(read);
                    }
                    let (r, asked) = match &mut cur.sink {
                        Sink::Segment { mem, .. } if mem.is_revoked() => {
                            let asked = need.min(DISCARD_CHUNK);
                            (src.read_some(&mut [0; DISCARD_CHUNK][..asked]), asked)
                        }
                        Sink::Segment { mem, off } => {
                            (src.read_into_segment(mem, *off + cur.got, need), need)
                        }
                        Sink::Buffer(v) => (src.read_some(&mut v[cur.got..]), need),
                    };
                    match r {
                        Ok(0) => return Err(handler.end_of_stream()),
                        Ok(n) => {
                            drained = n < asked;
                            cur.got += n;
                            read += n;
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(read),
                        Err(e) if e.kind() == ErrorKind::Interrupted => {}
                        Err(e) => return Err(receive_error(e)),
                    }
                }
                if cur.got == cur.header.len as usize {
                    let done = self.cur.take().expect("current frame");
                    handler.finish(done)?;
                }
                continue;
            }
            if self.end > self.start && handler.said_goodbye() {
                return Err(handler.after_goodbye("data"));
            }
            if self.end - self.start >= HEADER_LEN {
                let h = Header::decode(&self.buf[self.start..self.start + HEADER_LEN])?;
                self.start += HEADER_LEN;
                match handler.dispatch(h)? {
                    Some(inc) if inc.header.len == 0 => handler.finish(inc)?,
                    next => self.cur = next,
                }
                continue;
            }
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if drained || read >= budget {
                return Ok(read);
            }
            let end = self.end;
            match src.read_some(&mut self.buf[end..]) {
                Ok(0) => return Err(handler.end_of_stream()),
                Ok(n) => {
                    drained = n < self.buf.len() - end;
                    self.end += n;
                    read += n;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(read),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(receive_error(e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::{Cell, RefCell};

    use super::*;
    use crate::wire::frame::FrameKind;

    /// Bytes handed out in chunks of at most `chunk`, then `WouldBlock` (or the end).
    struct Chunks {
        bytes: Vec<u8>,
        at: usize,
        chunk: usize,
        eof: bool,
        /// Reads made so far.
        reads: usize,
    }

    impl ByteSource for Chunks {
        fn read_some(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.reads += 1;
            let n = buf.len().min(self.chunk).min(self.bytes.len() - self.at);
            if n == 0 && !buf.is_empty() {
                return if self.eof {
                    Ok(0)
                } else {
                    Err(ErrorKind::WouldBlock.into())
                };
            }
            buf[..n].copy_from_slice(&self.bytes[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }

        fn read_into_segment(
            &mut self,
            mem: &SegmentMemory,
            off: usize,
            len: usize,
        ) -> std::io::Result<usize> {
            let mut tmp = vec![0; len];
            let n = self.read_some(&mut tmp)?;
            mem.copy_in(off, &tmp[..n]);
            Ok(n)
        }
    }

    /// Records what it is handed; payload goes into one segment at the frame's offset.
    struct Recorder {
        mem: Arc<SegmentMemory>,
        seen: RefCell<Vec<(FrameKind, u64)>>,
        goodbye: Cell<bool>,
    }

    impl FrameHandler for Recorder {
        fn dispatch(&self, h: Header) -> Result<Option<Incoming>, ProtocolError> {
            if h.kind == FrameKind::Bye {
                self.goodbye.set(true);
            }
            self.seen.borrow_mut().push((h.kind, h.len));
            Ok((h.kind == FrameKind::Write).then(|| {
                Incoming::new(
                    h,
                    Sink::Segment {
                        mem: self.mem.clone(),
                        off: h.offset as usize,
                    },
                )
            }))
        }

        fn finish(&self, inc: Incoming) -> Result<(), ProtocolError> {
            self.seen
                .borrow_mut()
                .push((FrameKind::Ack, inc.got as u64));
            Ok(())
        }

        fn said_goodbye(&self) -> bool {
            self.goodbye.get()
        }

        fn after_goodbye(&self, what: &'static str) -> ProtocolError {
            ProtocolError::AfterGoodbye(what)
        }

        fn end_of_stream(&self) -> ProtocolError {
            ProtocolError::Closed
        }
    }

    fn write_frame(offset: u64, data: &[u8]) -> Vec<u8> {
        let mut h = Header::new(FrameKind::Write);
        h.offset = offset;
        h.len = data.len() as u64;
        let mut v = h.encode().to_vec();
        v.extend_from_slice(data);
        v
    }

    fn recorder() -> Recorder {
        Recorder {
            mem: Arc::new(SegmentMemory::anonymous(1 << 16, 1).unwrap()),
            seen: RefCell::default(),
            goodbye: Cell::new(false),
        }
    }

    #[test]
    fn a_read_answered_with_the_wrong_length_stays_for_the_failure_to_complete() {
        let reads = PendingReads::default();
        let read = |len| PendingRead {
            mem: Arc::new(SegmentMemory::anonymous(1 << 12, 1).unwrap()),
            off: 0,
            len,
            notify: None,
            done: None,
        };
        reads.add(7, read(64));
        reads.add(8, read(32));
        assert_eq!(
            reads.answer(7, 65).err(),
            Some(ProtocolError::ReadLength {
                got: 65,
                expected: 64
            })
        );
        assert_eq!(
            reads.answer(9, 64).err(),
            Some(ProtocolError::UnknownRead(9))
        );
        assert_eq!(reads.answer(8, 32).map(|r| r.len).ok(), Some(32));
        // What the link's failure completes: the read answered wrongly, not the one answered.
        let left: Vec<usize> = reads.drain().iter().map(|r| r.len).collect();
        assert_eq!(left, [64]);
    }

    #[test]
    fn frames_split_at_every_byte_boundary_arrive_whole_and_in_order() {
        let payload: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
        let mut stream = write_frame(0, &payload);
        stream.extend(write_frame(4096, b""));
        stream.extend(Header::new(FrameKind::Ping).encode());
        stream.extend(write_frame(2000, b"tail"));
        for chunk in [1, 7, 56, 57, 4096] {
            let r = recorder();
            let mut src = Chunks {
                bytes: stream.clone(),
                at: 0,
                chunk,
                eof: false,
                reads: 0,
            };
            let mut st = RecvState::default();
            // Each call stops at WouldBlock; call again as epoll would.
            for _ in 0..stream.len() + 1 {
                st.receive(&mut src, &r, usize::MAX).unwrap();
            }
            assert_eq!(
                *r.seen.borrow(),
                [
                    (FrameKind::Write, 1000),
                    (FrameKind::Ack, 1000),
                    (FrameKind::Write, 0),
                    (FrameKind::Ack, 0),
                    (FrameKind::Ping, 0),
                    (FrameKind::Write, 4),
                    (FrameKind::Ack, 4),
                ],
                "chunk {chunk}"
            );
            let mut got = vec![0; 1000];
            r.mem.copy_out(0, &mut got);
            assert_eq!(got, payload, "chunk {chunk}");
            let mut tail = [0; 4];
            r.mem.copy_out(2000, &mut tail);
            assert_eq!(&tail, b"tail");
        }
    }

    #[test]
    fn the_end_of_the_stream_and_bytes_after_goodbye_are_errors() {
        let r = recorder();
        let mut src = Chunks {
            bytes: write_frame(0, b"abc")[..58].to_vec(),
            at: 0,
            chunk: 4096,
            eof: true,
            reads: 0,
        };
        let err = receive_until_error(&mut src, &r);
        assert_eq!(err, ProtocolError::Closed);

        let r = recorder();
        let mut bytes = Header::new(FrameKind::Bye).encode().to_vec();
        bytes.extend(Header::new(FrameKind::Ping).encode());
        let mut src = Chunks {
            bytes,
            at: 0,
            chunk: 4096,
            eof: false,
            reads: 0,
        };
        let err = receive_until_error(&mut src, &r);
        assert_eq!(err, ProtocolError::AfterGoodbye("data"));
    }

    #[test]
    fn garbage_is_a_protocol_error_not_a_panic() {
        let r = recorder();
        let mut src = Chunks {
            bytes: vec![0xab; 200],
            at: 0,
            chunk: 4096,
            eof: false,
            reads: 0,
        };
        let err = receive_until_error(&mut src, &r);
        assert!(matches!(err, ProtocolError::Version { got: 0xab, .. }));
    }

    #[test]
    fn a_waiter_stops_after_its_budget_once_nothing_is_buffered() {
        let r = recorder();
        let big = vec![5u8; 8000];
        let mut stream = write_frame(0, &big);
        stream.extend(write_frame(9000, &big));
        let mut src = Chunks {
            bytes: stream,
            at: 0,
            chunk: 100,
            eof: false,
            reads: 0,
        };
        let mut st = RecvState::default();
        st.receive(&mut src, &r, 1).unwrap();
        // The header and the start of the payload came through the buffer; the first read
        // straight into the segment used the budget up, with nothing left buffered.
        assert_eq!(*r.seen.borrow(), [(FrameKind::Write, 8000)]);
        // Each short read drained the source; call again as epoll would.
        while src.at < src.bytes.len() {
            st.receive(&mut src, &r, usize::MAX).unwrap();
        }
        assert_eq!(r.seen.borrow().len(), 4);
    }

    #[test]
    fn a_waiters_budget_counts_frames_that_arrive_whole_in_the_buffer() {
        let r = recorder();
        // Frames of 4 KiB: full reads of the receive buffer end on a frame's end, so no
        // payload is ever read straight into a segment.
        let frame = write_frame(0, &vec![3u8; 4096 - HEADER_LEN]);
        let stream: Vec<u8> = (0..2 * RECV_BUF / 4096)
            .flat_map(|_| frame.clone())
            .collect();
        let mut src = Chunks {
            bytes: stream,
            at: 0,
            chunk: usize::MAX,
            eof: false,
            reads: 0,
        };
        let mut st = RecvState::default();
        st.receive(&mut src, &r, 1).unwrap();
        // One full buffer read and its frames handled; the second buffer's worth stays in
        // the source for the next call.
        assert_eq!((src.reads, src.at), (1, RECV_BUF));
        assert_eq!(r.seen.borrow().len(), 2 * RECV_BUF / 4096);
        st.receive(&mut src, &r, usize::MAX).unwrap();
        assert_eq!(src.at, src.bytes.len());
        assert_eq!(r.seen.borrow().len(), 4 * RECV_BUF / 4096);
    }

    #[test]
    fn payload_under_way_into_a_deleted_segment_is_read_and_dropped() {
        let r = Recorder {
            mem: Arc::new(SegmentMemory::leaked_user_memory(1 << 16)),
            ..recorder()
        };
        let payload = vec![9u8; 3 * DISCARD_CHUNK];
        let frame = write_frame(100, &payload);
        let half = HEADER_LEN + payload.len() / 2;
        let source = |bytes: &[u8]| Chunks {
            bytes: bytes.to_vec(),
            at: 0,
            chunk: 1000,
            eof: false,
            reads: 0,
        };
        let mut st = RecvState::default();
        let mut first = source(&frame[..half]);
        while first.at < first.bytes.len() {
            st.receive(&mut first, &r, usize::MAX).unwrap();
        }
        assert!(r.mem.revoke());
        // The rest of the frame, then a frame that starts after the deletion (as a read's
        // response into the deleted segment would): both read, nothing more written.
        let mut rest = source(&frame[half..]);
        rest.bytes.extend(write_frame(0, &[7u8; 10]));
        while rest.at < rest.bytes.len() {
            st.receive(&mut rest, &r, usize::MAX).unwrap();
        }
        let mut data = vec![0u8; 100 + payload.len()];
        r.mem.copy_out(0, &mut data);
        let written = data[100..].iter().take_while(|&&b| b == 9).count();
        assert_eq!(
            written,
            payload.len() / 2,
            "only the part before the deletion"
        );
        assert!(data[100 + written..].iter().all(|&b| b == 0));
        assert!(
            data[..100].iter().all(|&b| b == 0),
            "the later frame is dropped too"
        );
        // Both frames were handled to their end (their notifications, reads' completions).
        assert_eq!(
            *r.seen.borrow(),
            [
                (FrameKind::Write, payload.len() as u64),
                (FrameKind::Ack, payload.len() as u64),
                (FrameKind::Write, 10),
                (FrameKind::Ack, 10),
            ]
        );
    }

    #[test]
    fn a_short_read_ends_the_call_without_a_read_that_would_block() {
        let r = recorder();
        let mut src = Chunks {
            bytes: write_frame(0, b"abc"),
            at: 0,
            chunk: 4096,
            eof: false,
            reads: 0,
        };
        RecvState::default()
            .receive(&mut src, &r, usize::MAX)
            .unwrap();
        assert_eq!(
            *r.seen.borrow(),
            [(FrameKind::Write, 3), (FrameKind::Ack, 3)]
        );
        assert_eq!(src.reads, 1);
    }

    /// Calls `receive` as epoll would (again after each return) until it fails; a source
    /// that never fails is a test failure.
    fn receive_until_error(src: &mut Chunks, r: &Recorder) -> ProtocolError {
        let mut st = RecvState::default();
        for _ in 0..=src.bytes.len() + 1 {
            if let Err(e) = st.receive(src, r, usize::MAX) {
                return e;
            }
        }
        panic!("the stream never failed");
    }
}
