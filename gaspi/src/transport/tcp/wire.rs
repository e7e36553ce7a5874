//! Frames on a TCP connection: a fixed 56-byte little-endian header, then `len` payload bytes
//! for the ops that carry data.
//!
//! ```text
//!  0 version u8 | 1 op u8 | 2 flags u8 | 3 reserved | 4 segment u16 | 6 reserved u16
//!  8 notification id u32 | 12 notification value u32
//! 16 offset u64 | 24 len u64 | 32 request id u64 | 40 a u64 | 48 b u64
//! ```
//! The connection hello is separate: [`Hello`], exchanged once before any frame.

use crate::env::JobToken;

pub const VERSION: u8 = 1;
pub const HEADER_LEN: usize = 56;

/// Frame kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Op {
    /// `len` bytes to (segment, offset); then notification (id, value) if `FLAG_NOTIFY`.
    Write = 1,
    /// Set notification (id, value) of segment.
    Notify = 2,
    /// Send back `len` bytes of (segment, offset) as a `ReadResp` for `req`.
    ReadReq = 3,
    /// Payload of the read `req`.
    ReadResp = 4,
    /// Atomic on the u64 at (segment, offset): fetch-add `a`, or compare `a` swap `b` (`FLAG_CAS`).
    AtomicReq = 5,
    /// Old value `a` of the atomic `req`.
    AtomicResp = 6,
    /// Segment announced to the peer: size `len`, `notif_id` slots, `FLAG_SHM_DATA` if mappable.
    SegRegister = 7,
    /// Segment deleted on the sender.
    SegDelete = 8,
    /// Passive message: `len` payload bytes; answered by `Ack`.
    Passive = 9,
    /// Reply to `req` with status `a` (a GASPI return code, 0 = success).
    Ack = 10,
    Ping = 11,
    /// The receiver must terminate.
    Kill = 12,
    /// Orderly shutdown: EOF after this is not a failure.
    Bye = 13,
}

impl Op {
    fn from_u8(v: u8) -> Option<Op> {
        use Op::*;
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
            _ => return None,
        })
    }
}

pub const FLAG_NOTIFY: u8 = 1;
pub const FLAG_CAS: u8 = 2;
pub const FLAG_SHM_DATA: u8 = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub op: Op,
    pub flags: u8,
    pub seg: u16,
    pub notif_id: u32,
    pub notif_val: u32,
    pub offset: u64,
    pub len: u64,
    pub req: u64,
    pub a: u64,
    pub b: u64,
}

impl Header {
    pub fn new(op: Op) -> Header {
        Header {
            op,
            flags: 0,
            seg: 0,
            notif_id: 0,
            notif_val: 0,
            offset: 0,
            len: 0,
            req: 0,
            a: 0,
            b: 0,
        }
    }

    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0] = VERSION;
        b[1] = self.op as u8;
        b[2] = self.flags;
        b[4..6].copy_from_slice(&self.seg.to_le_bytes());
        b[8..12].copy_from_slice(&self.notif_id.to_le_bytes());
        b[12..16].copy_from_slice(&self.notif_val.to_le_bytes());
        b[16..24].copy_from_slice(&self.offset.to_le_bytes());
        b[24..32].copy_from_slice(&self.len.to_le_bytes());
        b[32..40].copy_from_slice(&self.req.to_le_bytes());
        b[40..48].copy_from_slice(&self.a.to_le_bytes());
        b[48..56].copy_from_slice(&self.b.to_le_bytes());
        b
    }

    /// Parses a header; `Err` names what is wrong (the connection is then dropped).
    pub fn decode(b: &[u8]) -> Result<Header, String> {
        if b.len() < HEADER_LEN {
            return Err("short header".into());
        }
        if b[0] != VERSION {
            return Err(format!("wire version {} (expected {VERSION})", b[0]));
        }
        let op = Op::from_u8(b[1]).ok_or_else(|| format!("unknown op {}", b[1]))?;
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        Ok(Header {
            op,
            flags: b[2],
            seg: u16::from_le_bytes([b[4], b[5]]),
            notif_id: u32_at(8),
            notif_val: u32_at(12),
            offset: u64_at(16),
            len: u64_at(24),
            req: u64_at(32),
            a: u64_at(40),
            b: u64_at(48),
        })
    }
}

/// First bytes on a data connection, from the connecting rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    pub token: JobToken,
    pub rank: u16,
    pub nranks: u16,
}

pub const HELLO_MAGIC: [u8; 4] = *b"TNT1";
pub const HELLO_LEN: usize = 4 + 16 + 2 + 2;

impl Hello {
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[..4].copy_from_slice(&HELLO_MAGIC);
        b[4..20].copy_from_slice(&self.token.0);
        b[20..22].copy_from_slice(&self.rank.to_le_bytes());
        b[22..24].copy_from_slice(&self.nranks.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8; HELLO_LEN]) -> Result<Hello, String> {
        if b[..4] != HELLO_MAGIC {
            return Err("not a tarantella connection (bad magic)".into());
        }
        let mut token = [0u8; 16];
        token.copy_from_slice(&b[4..20]);
        Ok(Hello {
            token: JobToken(token),
            rank: u16::from_le_bytes([b[20], b[21]]),
            nranks: u16::from_le_bytes([b[22], b[23]]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_roundtrip() {
        let h = Header {
            op: Op::Write,
            flags: FLAG_NOTIFY,
            seg: 300,
            notif_id: 7,
            notif_val: 9,
            offset: 1 << 40,
            len: 12345,
            req: 99,
            a: u64::MAX,
            b: 3,
        };
        assert_eq!(Header::decode(&h.encode()).unwrap(), h);
    }

    #[test]
    fn rejects_garbage() {
        let mut b = Header::new(Op::Ping).encode();
        b[1] = 200;
        assert!(Header::decode(&b).is_err());
        b[0] = 9;
        assert!(Header::decode(&b).is_err());
        assert!(Hello::decode(&[0u8; HELLO_LEN]).is_err());
    }
}
