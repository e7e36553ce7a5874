//! What incoming frames do on this rank: data operations are checked against the segment
//! table and executed here (writes land in segment memory, reads and atomics are answered);
//! answers complete the requests waiting for them; control messages go up to the control
//! plane through the endpoint's [`ControlHandler`](crate::transport::control_handler::ControlHandler),
//! and requests among them are acknowledged with its outcome.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::error::{Error, ProtocolError};
use crate::memory::segment_memory::{apply_atomic, SegmentMemory};
use crate::transport::tcp::pair::Pair;
use crate::transport::tcp::receive::{FrameHandler, Incoming, Sink};
use crate::transport::tcp::send::{Payload, ANSWER_BACKLOG_MAX};
use crate::types::{AtomicOp, SegKey};
use crate::wire::control::ControlMessage;
use crate::wire::frame::{FrameKind, Header, FLAG_CAS, FLAG_NOTIFY};

impl Pair {
    /// The segment `key` as the target of an access of `[off, off+len)` by this peer.
    fn target(&self, key: SegKey, off: u64, len: u64) -> Result<Arc<SegmentMemory>, ProtocolError> {
        let seg = self
            .endpoint
            .segments
            .local(key)
            .ok_or(ProtocolError::UnknownSegment(key))?;
        if !seg.allows(self.peer) {
            return Err(ProtocolError::NotRegistered {
                key,
                rank: self.peer,
            });
        }
        let size = seg.mem.len() as u64;
        if off.checked_add(len).is_none_or(|e| e > size) {
            return Err(ProtocolError::OutOfBounds {
                key,
                offset: off,
                len,
                size,
            });
        }
        Ok(seg.mem.clone())
    }

    fn check_notification(mem: &SegmentMemory, id: u32, value: u32) -> Result<(), ProtocolError> {
        if id >= mem.notif_count() {
            return Err(ProtocolError::NotificationOutOfRange(id));
        }
        if value == 0 {
            return Err(ProtocolError::ZeroNotificationValue);
        }
        Ok(())
    }

    /// Refuses a request from a peer that is owed more answers than one that reads them can
    /// be ([`ANSWER_BACKLOG_MAX`]), before anything of it is done.
    fn admit_request(&self) -> Result<(), ProtocolError> {
        let queued = self.outbox.answers_queued();
        if queued >= ANSWER_BACKLOG_MAX {
            return Err(ProtocolError::AnswerBacklog {
                queued,
                max: ANSWER_BACKLOG_MAX,
            });
        }
        Ok(())
    }

    fn reply(&self, kind: FrameKind, req: u64, word: u64) {
        let mut h = Header::new(kind);
        h.req = req;
        h.word = word;
        let _ = self.post(h, Payload::None, None);
    }

    /// Acknowledges request `req` with the outcome of handling it.
    fn acknowledge(&self, req: u64, outcome: crate::error::Result<()>) {
        let status = match outcome {
            Ok(()) => 0,
            Err(e) => e.code() as i64 as u64,
        };
        self.reply(FrameKind::Ack, req, status);
    }

    /// Hands a control message to the control plane; answers it if it is a request.
    fn to_control(&self, req: u64, msg: ControlMessage) {
        if let Some(outcome) = self.endpoint.control.handle(self.peer, msg) {
            self.acknowledge(req, outcome);
        }
    }
}

impl FrameHandler for Pair {
    fn dispatch(&self, h: Header) -> Result<Option<Incoming>, ProtocolError> {
        if h.kind.is_answered() {
            self.admit_request()?;
        }
        match h.kind {
            FrameKind::Write => {
                let max = self.endpoint.transfer_size_max;
                if h.len > max {
                    return Err(ProtocolError::TooLarge {
                        what: "write",
                        len: h.len,
                        max,
                    });
                }
                let mem = self.target(h.seg, h.offset, h.len)?;
                if h.flags & FLAG_NOTIFY != 0 {
                    Self::check_notification(&mem, h.notif_id, h.notif_val)?;
                }
                let off = h.offset as usize;
                Ok(Some(Incoming::new(h, Sink::Segment { mem, off })))
            }
            FrameKind::Notify => {
                let mem = self.target(h.seg, 0, 0)?;
                Self::check_notification(&mem, h.notif_id, h.notif_val)?;
                mem.notify(h.notif_id, h.notif_val);
                Ok(None)
            }
            FrameKind::ReadReq => {
                let mem = self.target(h.seg, h.offset, h.len)?;
                let mut r = Header::new(FrameKind::ReadResp);
                r.req = h.req;
                r.len = h.len;
                let payload = Payload::Segment {
                    mem,
                    off: h.offset as usize,
                    len: h.len as usize,
                };
                self.post(r, payload, None)
                    .map_err(|_| ProtocolError::ReplyFailed)?;
                Ok(None)
            }
            FrameKind::ReadResp => {
                let read = self.reads.answer(h.req, h.len)?;
                let sink = Sink::Segment {
                    mem: read.mem.clone(),
                    off: read.off,
                };
                let mut inc = Incoming::new(h, sink);
                inc.read = Some(read);
                Ok(Some(inc))
            }
            FrameKind::AtomicReq => {
                let mem = self.target(h.seg, h.offset, 8)?;
                let word = mem
                    .atomic_u64(h.offset as usize)
                    .map_err(|_| ProtocolError::UnalignedAtomic(h.offset))?;
                let op = if h.flags & FLAG_CAS != 0 {
                    AtomicOp::CompareSwap {
                        expected: h.word,
                        new: h.swap_new,
                    }
                } else {
                    AtomicOp::FetchAdd { add: h.word }
                };
                self.reply(FrameKind::AtomicResp, h.req, apply_atomic(word, op));
                Ok(None)
            }
            FrameKind::AtomicResp => {
                self.endpoint
                    .requests
                    .complete(h.req, self.peer, Ok(h.word))?;
                Ok(None)
            }
            FrameKind::Ack => {
                let code = h.word as i64 as i32;
                let v = if code == 0 {
                    Ok(0)
                } else {
                    Err(Error::Refused {
                        rank: self.peer,
                        code,
                    })
                };
                self.endpoint.requests.complete(h.req, self.peer, v)?;
                Ok(None)
            }
            FrameKind::Passive => {
                let max = self.endpoint.passive_size_max;
                if h.len > max {
                    return Err(ProtocolError::TooLarge {
                        what: "passive message",
                        len: h.len,
                        max,
                    });
                }
                Ok(Some(Incoming::new(
                    h,
                    Sink::Buffer(vec![0; h.len as usize]),
                )))
            }
            FrameKind::Bye => {
                self.bye.store(true, Ordering::Release);
                self.to_control(h.req, ControlMessage::Goodbye);
                Ok(None)
            }
            FrameKind::SegRegister
            | FrameKind::SegDelete
            | FrameKind::Ping
            | FrameKind::Kill
            | FrameKind::Heartbeat => {
                let msg = ControlMessage::from_header(&h).expect("a control kind");
                self.to_control(h.req, msg);
                Ok(None)
            }
        }
    }

    fn finish(&self, inc: Incoming) -> Result<(), ProtocolError> {
        let h = inc.header;
        match h.kind {
            FrameKind::Write if h.flags & FLAG_NOTIFY != 0 => {
                if let Sink::Segment { mem, .. } = &inc.sink {
                    mem.notify(h.notif_id, h.notif_val);
                }
            }
            FrameKind::ReadResp => {
                if let Some(read) = inc.read {
                    if let Some(id) = read.notify {
                        read.mem.notify(id, 1);
                    }
                    if let Some(q) = read.done {
                        q.complete(None);
                    }
                }
            }
            FrameKind::Passive => {
                if let Sink::Buffer(data) = inc.sink {
                    self.to_control(h.req, ControlMessage::Passive(data));
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn said_goodbye(&self) -> bool {
        self.bye.load(Ordering::Acquire)
    }

    fn after_goodbye(&self, what: &'static str) -> ProtocolError {
        self.violated.store(true, Ordering::Release);
        ProtocolError::AfterGoodbye(what)
    }

    fn end_of_stream(&self) -> ProtocolError {
        if self.orderly() {
            ProtocolError::ClosedAfterGoodbye
        } else {
            ProtocolError::Closed
        }
    }
}
