//! Frames on a data connection: a fixed 56-byte little-endian header, then `len` payload bytes
//! for the kinds that carry data. Data frames (one-sided operations) and control frames
//! (see [`super::control`]) share this header; the transport executes the former and hands the
//! latter to the control plane.
//!
//! ```text
//!  0 version u8 | 1 kind u8 | 2 flags u8 | 3 reserved | 4 segment u16 | 6 reserved u16
//!  8 notification id u32 | 12 notification value u32
//! 16 offset u64 | 24 len u64 | 32 request id u64 | 40 word u64 | 48 swap_new u64
//! ```
//! The connection hello is separate ([`super::hello`]), exchanged once before any frame.

use crate::error::ProtocolError;

/// The wire format's version, byte 0 of every header.
pub(crate) const VERSION: u8 = 1;
/// Bytes of a header.
pub(crate) const HEADER_LEN: usize = 56;

/// What a frame asks of its receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum FrameKind {
    /// `len` bytes to (segment, offset); then notification (id, value) if `FLAG_NOTIFY`.
    Write = 1,
    /// Set notification (id, value) of segment.
    Notify = 2,
    /// Send back `len` bytes of (segment, offset) as a `ReadResp` for `req`.
    ReadReq = 3,
    /// Payload of the read `req`.
    ReadResp = 4,
    /// Atomic on the u64 at (segment, offset): fetch-add `word`, or compare `word` swap `swap_new` (`FLAG_CAS`).
    AtomicReq = 5,
    /// Old value `word` of the atomic `req`.
    AtomicResp = 6,
    /// Segment announced to the peer: size `len`, `notif_id` slots, tag `word`,
    /// `FLAG_SHM_DATA` if mappable.
    SegRegister = 7,
    /// Segment deleted on the sender.
    SegDelete = 8,
    /// Passive message: `len` payload bytes; answered by `Ack`.
    Passive = 9,
    /// Reply to `req` with status `word` (a GASPI return code, 0 = success).
    Ack = 10,
    /// Liveness check, answered by `Ack`.
    Ping = 11,
    /// The receiver must terminate.
    Kill = 12,
    /// Orderly shutdown: EOF after this is not a failure.
    Bye = 13,
    /// Liveness (`GASPI_HEARTBEAT_TIMEOUT_MS`): the sender is alive; nothing to answer.
    Heartbeat = 14,
}

impl FrameKind {
    /// An answer to a peer's request: it stays queued here while the peer does not read.
    pub fn is_answer(self) -> bool {
        matches!(
            self,
            FrameKind::ReadResp | FrameKind::AtomicResp | FrameKind::Ack
        )
    }

    /// A request this rank answers (with `ReadResp`, `AtomicResp` or `Ack`).
    pub fn is_answered(self) -> bool {
        matches!(
            self,
            FrameKind::ReadReq
                | FrameKind::AtomicReq
                | FrameKind::SegRegister
                | FrameKind::Passive
                | FrameKind::Ping
        )
    }

    fn from_u8(v: u8) -> Option<FrameKind> {
        use FrameKind::*;
        Some(match v {
            1 => Write,
            2 => Notify,
            3 => ReadReq,
            4 => ReadResp,
            5 => AtomicReq,
            6 => AtomicResp,
            7 => SegRegister,
            8 => SegDelete,
            9 => Passive,
            10 => Ack,
            11 => Ping,
            12 => Kill,
            13 => Bye,
            14 => Heartbeat,
            _ => return None,
        })
    }
}

/// `Write`: a notification follows the data.
pub(crate) const FLAG_NOTIFY: u8 = 1;
/// `AtomicReq`: compare-and-swap (else fetch-add).
pub(crate) const FLAG_CAS: u8 = 2;
/// `SegRegister`: the segment's data lives in its shared-memory file (local peers may map it).
pub(crate) const FLAG_SHM_DATA: u8 = 4;

/// A decoded frame header; which fields mean something depends on `kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub kind: FrameKind,
    pub flags: u8,
    pub seg: u16,
    pub notif_id: u32,
    pub notif_val: u32,
    pub offset: u64,
    pub len: u64,
    /// Request id: pairs an answer (`ReadResp`, `AtomicResp`, `Ack`) with its request.
    pub req: u64,
    /// The 8-byte argument: an atomic's operand or old value, an acknowledgement's status,
    /// a segment registration's tag.
    pub word: u64,
    /// The new value of a compare-and-swap.
    pub swap_new: u64,
}

impl Header {
    pub fn new(kind: FrameKind) -> Header {
        Header {
            kind,
            flags: 0,
            seg: 0,
            notif_id: 0,
            notif_val: 0,
            offset: 0,
            len: 0,
            req: 0,
            word: 0,
            swap_new: 0,
        }
    }

    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0] = VERSION;
        b[1] = self.kind as u8;
        b[2] = self.flags;
        b[4..6].copy_from_slice(&self.seg.to_le_bytes());
        b[8..12].copy_from_slice(&self.notif_id.to_le_bytes());
        b[12..16].copy_from_slice(&self.notif_val.to_le_bytes());
        b[16..24].copy_from_slice(&self.offset.to_le_bytes());
        b[24..32].copy_from_slice(&self.len.to_le_bytes());
        b[32..40].copy_from_slice(&self.req.to_le_bytes());
        b[40..48].copy_from_slice(&self.word.to_le_bytes());
        b[48..56].copy_from_slice(&self.swap_new.to_le_bytes());
        b
    }

    /// Parses a header; `Err` names what is wrong (the connection is then dropped).
    pub fn decode(b: &[u8]) -> Result<Header, ProtocolError> {
        if b.len() < HEADER_LEN {
            return Err(ProtocolError::ShortHeader);
        }
        if b[0] != VERSION {
            return Err(ProtocolError::Version {
                got: b[0],
                expected: VERSION,
            });
        }
        let kind = FrameKind::from_u8(b[1]).ok_or(ProtocolError::UnknownKind(b[1]))?;
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        Ok(Header {
            kind,
            flags: b[2],
            seg: u16::from_le_bytes([b[4], b[5]]),
            notif_id: u32_at(8),
            notif_val: u32_at(12),
            offset: u64_at(16),
            len: u64_at(24),
            req: u64_at(32),
            word: u64_at(40),
            swap_new: u64_at(48),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_roundtrip() {
        let h = Header {
            kind: FrameKind::Write,
            flags: FLAG_NOTIFY,
            seg: 300,
            notif_id: 7,
            notif_val: 9,
            offset: 1 << 40,
            len: 12345,
            req: 99,
            word: u64::MAX,
            swap_new: 3,
        };
        assert_eq!(Header::decode(&h.encode()).unwrap(), h);
    }

    #[test]
    fn rejects_garbage() {
        let mut b = Header::new(FrameKind::Ping).encode();
        b[1] = 200;
        assert_eq!(Header::decode(&b), Err(ProtocolError::UnknownKind(200)));
        b[0] = 9;
        assert_eq!(
            Header::decode(&b),
            Err(ProtocolError::Version {
                got: 9,
                expected: VERSION
            })
        );
        assert_eq!(Header::decode(&b[..10]), Err(ProtocolError::ShortHeader));
    }
}
