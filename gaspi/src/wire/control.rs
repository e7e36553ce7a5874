//! Control messages: what ranks tell each other about the job itself rather than move data.
//! They travel as frames on the TCP connections (with every transport: verbs and shared
//! memory peers are reached over TCP for control), and the control plane (`crate::control`)
//! handles them. A request (`req != 0` in its frame) is answered with an `Ack` carrying a
//! GASPI return code.

use crate::types::SegKey;
use crate::wire::frame::{FrameKind, Header, FLAG_SHM_DATA};

/// What a rank announces about a segment it registers with a peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SegmentAnnouncement {
    pub key: SegKey,
    pub size: u64,
    pub notif_count: u32,
    /// The data lives in the segment's shared-memory file (a local peer may map it); false
    /// for memory bound from the user.
    pub shm_data: bool,
    /// Group segments: a digest of the member list, so a stale registration is told apart.
    pub tag: u64,
}

/// A control message, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ControlMessage {
    /// The sender registered a segment with the receiver (a request).
    RegisterSegment(SegmentAnnouncement),
    /// The sender deleted a segment it had registered with the receiver.
    DeleteSegment { key: SegKey },
    /// A passive message (a request): the payload goes to the receiver's inbox.
    Passive(Vec<u8>),
    /// Liveness check (a request).
    Ping,
    /// The receiver must terminate at once (`gaspi_proc_kill`).
    Kill,
    /// The sender leaves in order: its connection's end is not a failure.
    Goodbye,
    /// The sender is alive (sent every quarter of the heartbeat timeout when one is set;
    /// the receiver's transport has noted the arrival already, as it notes every frame's).
    Heartbeat,
}

impl ControlMessage {
    /// The frame header that carries this message (request id 0; the payload of a
    /// [`ControlMessage::Passive`] follows the header, `len` bytes).
    pub fn header(&self) -> Header {
        match self {
            ControlMessage::RegisterSegment(a) => {
                let mut h = Header::new(FrameKind::SegRegister);
                h.seg = a.key;
                h.len = a.size;
                h.notif_id = a.notif_count;
                h.word = a.tag;
                if a.shm_data {
                    h.flags |= FLAG_SHM_DATA;
                }
                h
            }
            ControlMessage::DeleteSegment { key } => {
                let mut h = Header::new(FrameKind::SegDelete);
                h.seg = *key;
                h
            }
            ControlMessage::Passive(data) => Self::passive_header(data.len()),
            ControlMessage::Ping => Header::new(FrameKind::Ping),
            ControlMessage::Kill => Header::new(FrameKind::Kill),
            ControlMessage::Goodbye => Header::new(FrameKind::Bye),
            ControlMessage::Heartbeat => Header::new(FrameKind::Heartbeat),
        }
    }

    /// The header of a passive message of `len` bytes (sent with its payload apart).
    pub fn passive_header(len: usize) -> Header {
        let mut h = Header::new(FrameKind::Passive);
        h.len = len as u64;
        h
    }

    /// The message a header announces, for control kinds without payload; `None` for data
    /// kinds and for `Passive`, whose payload the receiver collects first.
    pub fn from_header(h: &Header) -> Option<ControlMessage> {
        Some(match h.kind {
            FrameKind::SegRegister => ControlMessage::RegisterSegment(SegmentAnnouncement {
                key: h.seg,
                size: h.len,
                notif_count: h.notif_id,
                shm_data: h.flags & FLAG_SHM_DATA != 0,
                tag: h.word,
            }),
            FrameKind::SegDelete => ControlMessage::DeleteSegment { key: h.seg },
            FrameKind::Ping => ControlMessage::Ping,
            FrameKind::Kill => ControlMessage::Kill,
            FrameKind::Bye => ControlMessage::Goodbye,
            FrameKind::Heartbeat => ControlMessage::Heartbeat,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_without_payload_roundtrips_through_its_header() {
        let messages = [
            ControlMessage::RegisterSegment(SegmentAnnouncement {
                key: 300,
                size: 1 << 33,
                notif_count: 65536,
                shm_data: true,
                tag: 0xdead_beef,
            }),
            ControlMessage::RegisterSegment(SegmentAnnouncement {
                key: 0,
                size: 1,
                notif_count: 1,
                shm_data: false,
                tag: 0,
            }),
            ControlMessage::DeleteSegment { key: 7 },
            ControlMessage::Ping,
            ControlMessage::Kill,
            ControlMessage::Goodbye,
            ControlMessage::Heartbeat,
        ];
        for m in messages {
            let wire = m.header().encode();
            let h = Header::decode(&wire).unwrap();
            assert_eq!(ControlMessage::from_header(&h), Some(m));
        }
    }

    #[test]
    fn data_frames_and_passive_are_not_decoded_from_the_header_alone() {
        let passive = ControlMessage::Passive(vec![1, 2, 3]).header();
        assert_eq!(passive.len, 3);
        assert_eq!(ControlMessage::from_header(&passive), None);
        assert_eq!(
            ControlMessage::from_header(&Header::new(FrameKind::Write)),
            None
        );
    }
}
