//! Why a peer's connection was dropped, for the transports and the wire formats.

use crate::types::{Rank, SegKey};

/// Why a peer's connection was dropped: what it sent broke the wire protocol, or the
/// connection itself ended. Logged with the peer's rank, which becomes
/// [`Error::PeerFailed`] for the calls that needed it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ProtocolError {
    #[error("short header")]
    ShortHeader,
    #[error("wire version {got} (expected {expected})")]
    Version { got: u8, expected: u8 },
    #[error("unknown frame kind {0}")]
    UnknownKind(u8),
    #[error("not a tarantella connection (bad magic)")]
    BadMagic,
    #[error("truncated message")]
    Truncated,
    #[error("a string that is not UTF-8")]
    BadString,
    #[error("message of {len} bytes (at most {max})")]
    TooLong { len: u64, max: u64 },
    #[error("connection closed by peer")]
    Closed,
    #[error("closed after goodbye")]
    ClosedAfterGoodbye,
    #[error("receive: {0}")]
    Receive(std::io::ErrorKind),
    #[error("send: {0}")]
    Send(std::io::ErrorKind),
    #[error("outgoing connection reset")]
    OutgoingReset,
    #[error("wrong job token")]
    WrongToken,
    #[error("a hello of {0} bytes")]
    HelloLength(usize),
    #[error("rank {rank} of {nranks} does not belong to this job of {expected}")]
    ForeignRank {
        rank: u16,
        nranks: u16,
        expected: u16,
    },
    #[error("protocol violation: {0} after goodbye")]
    AfterGoodbye(&'static str),
    #[error("unknown segment {0}")]
    UnknownSegment(SegKey),
    #[error("segment {key} is not registered with rank {rank}")]
    NotRegistered { key: SegKey, rank: Rank },
    #[error("[{offset}, +{len}) is past the end of segment {key} ({size} bytes)")]
    OutOfBounds {
        key: SegKey,
        offset: u64,
        len: u64,
        size: u64,
    },
    #[error("notification {0} out of range")]
    NotificationOutOfRange(u32),
    #[error("zero notification value")]
    ZeroNotificationValue,
    #[error("atomic at offset {0} is not 8-byte aligned")]
    UnalignedAtomic(u64),
    #[error("response to unknown read {0}")]
    UnknownRead(u64),
    #[error("an answer to request {req}, which went to rank {to}")]
    ForeignAnswer { req: u64, to: Rank },
    #[error("read response of {got} bytes, expected {expected}")]
    ReadLength { got: u64, expected: u64 },
    #[error("{what} of {len} bytes exceeds the maximum of {max}")]
    TooLarge {
        what: &'static str,
        len: u64,
        max: u64,
    },
    /// Nothing at all arrived from the peer for the heartbeat timeout: it stopped making
    /// progress (stopped, hung, or cut off while its kernel still holds the connection).
    /// The words "heartbeat timeout" are what `tarantella` looks for in the log line.
    #[error("heartbeat timeout: nothing received for {silent_ms} ms (limit {timeout_ms} ms)")]
    Silent { silent_ms: u64, timeout_ms: u64 },
    /// The peer keeps sending requests but does not read their answers: `queued` answers
    /// to it wait here already, more than a rank that reads can ever be owed (see
    /// `transport::tcp::send::ANSWER_BACKLOG_MAX`). Queuing more would grow this rank's
    /// memory without bound.
    #[error("{queued} answers queued for a peer that does not read them (at most {max})")]
    AnswerBacklog { queued: usize, max: usize },
    /// This rank could not queue its answer (it is leaving, or the connection failed).
    #[error("cannot send the answer")]
    ReplyFailed,
}
