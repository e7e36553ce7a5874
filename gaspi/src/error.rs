//! The error type. Each variant maps to one GASPI return code ([`Error::code`]), so the C ABI
//! and the Rust API report the same thing.

use crate::types::{QueueId, Rank, SegKey, SegmentId};

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The GASPI return codes of the C interface (`gaspi_return_t`).
#[allow(missing_docs)]
pub mod code {
    pub const ERROR: i32 = -1;
    pub const SUCCESS: i32 = 0;
    pub const TIMEOUT: i32 = 1;
    pub const ERR_EMFILE: i32 = 2;
    pub const ERR_ENV: i32 = 3;
    pub const ERR_SN_PORT: i32 = 4;
    pub const ERR_CONFIG: i32 = 5;
    pub const ERR_NOINIT: i32 = 6;
    pub const ERR_INITED: i32 = 7;
    pub const ERR_NULLPTR: i32 = 8;
    pub const ERR_INV_SEGSIZE: i32 = 9;
    pub const ERR_INV_SEG: i32 = 10;
    pub const ERR_INV_GROUP: i32 = 11;
    pub const ERR_INV_RANK: i32 = 12;
    pub const ERR_INV_QUEUE: i32 = 13;
    pub const ERR_INV_LOC_OFF: i32 = 14;
    pub const ERR_INV_REM_OFF: i32 = 15;
    pub const ERR_INV_COMMSIZE: i32 = 16;
    pub const ERR_INV_NOTIF_VAL: i32 = 17;
    pub const ERR_INV_NOTIF_ID: i32 = 18;
    pub const ERR_INV_NUM: i32 = 19;
    pub const ERR_INV_SIZE: i32 = 20;
    pub const ERR_MANY_SEG: i32 = 21;
    pub const ERR_MANY_GRP: i32 = 22;
    pub const QUEUE_FULL: i32 = 23;
    pub const ERR_UNALIGN_OFF: i32 = 24;
    pub const ERR_ACTIVE_COLL: i32 = 25;
    pub const ERR_DEVICE: i32 = 26;
    pub const ERR_SN: i32 = 27;
    pub const ERR_MEMALLOC: i32 = 28;
}

/// Everything a GASPI call can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("timed out")]
    Timeout,
    #[error("environment: {0}")]
    Env(String),
    #[error("bad configuration: {0}")]
    Config(String),
    #[error("GASPI is not initialized")]
    NotInitialized,
    #[error("GASPI is already initialized in this process")]
    AlreadyInitialized,
    #[error("null pointer passed for {0}")]
    NullPointer(&'static str),
    #[error("invalid segment size {size} (must be 1..={max})")]
    InvalidSegmentSize { size: u64, max: u64 },
    #[error("segment {segment} does not exist{}", on_rank(*.rank))]
    InvalidSegment {
        segment: SegmentId,
        rank: Option<Rank>,
    },
    #[error("segment {segment} already exists")]
    SegmentExists { segment: SegmentId },
    #[error("invalid group {group}: {why}")]
    InvalidGroup { group: u8, why: &'static str },
    #[error("rank {rank} is out of range (the job has {nranks} ranks)")]
    InvalidRank { rank: Rank, nranks: u16 },
    #[error("queue {queue} is out of range or not created ({num} queues)")]
    InvalidQueue { queue: QueueId, num: u8 },
    #[error(
        "local range [{offset}, {offset}+{len}) is past the end of segment {segment} (size {size})"
    )]
    LocalOutOfBounds {
        segment: SegmentId,
        offset: u64,
        len: u64,
        size: u64,
    },
    #[error("remote range [{offset}, {offset}+{len}) is past the end of segment {segment} on rank {rank} (size {size})")]
    RemoteOutOfBounds {
        rank: Rank,
        segment: SegmentId,
        offset: u64,
        len: u64,
        size: u64,
    },
    #[error("transfer size {size} is not allowed here (1..={max} bytes)")]
    InvalidCommSize { size: u64, max: u64 },
    #[error("notification value must be non-zero")]
    ZeroNotificationValue,
    #[error("notification id {id} (+{num}) is out of range (segment has {max})")]
    NotificationIdOutOfRange { id: u32, num: u32, max: u32 },
    #[error("invalid number: {0}")]
    InvalidNumber(String),
    #[error("invalid size: {0}")]
    InvalidSize(String),
    #[error("too many segments (max {max})")]
    TooManySegments { max: u32 },
    #[error("too many groups (max {max})")]
    TooManyGroups { max: u32 },
    #[error("queue {queue} is full: {entries} entries posted, room for {max}; call wait first")]
    QueueFull {
        queue: QueueId,
        entries: u32,
        max: u32,
    },
    #[error("offset {offset} is not 8-byte aligned")]
    UnalignedOffset { offset: u64 },
    #[error("a different collective is active on this group")]
    ActiveCollective,
    #[error("device: {0}")]
    Device(String),
    #[error("rank {rank} failed (connection lost or protocol error)")]
    PeerFailed { rank: Rank },
    /// `gaspi_proc_term` ran on another thread while this call was blocked (or before it
    /// started): the call was abandoned.
    #[error("this process left GASPI (proc_term) while the call was in progress")]
    Terminated,
    #[error("bootstrap: {0}")]
    Bootstrap(String),
    #[error("out of memory: {0}")]
    NoMemory(String),
    /// An operating-system call failed (sockets, epoll, threads, files).
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    /// The call needs a peer, and this is a single-rank job.
    #[error("single-rank job: there are no peers")]
    NoPeers,
    /// This rank has no connection of the needed kind to `rank` (it was never set up).
    #[error("no {transport} connection to rank {rank}")]
    NotConnected {
        /// The peer.
        rank: Rank,
        /// `"TCP"` or `"verbs"`.
        transport: &'static str,
    },
    /// The peer answered a request (segment registration, passive message) with an error.
    #[error("rank {rank} refused the request: {}", error_str(*code))]
    Refused {
        /// The peer that refused.
        rank: Rank,
        /// The GASPI return code it answered with.
        code: i32,
    },
    /// A received passive message found the inbox full (`passive_queue_size_max`).
    #[error("passive inbox full ({max} messages)")]
    PassiveInboxFull {
        /// The inbox's capacity.
        max: usize,
    },
    /// A shared-memory peer's segment is not mapped in this process.
    #[error("segment {segment} of rank {rank} is not mapped")]
    NotMapped {
        /// The peer.
        rank: Rank,
        /// The segment's internal key.
        segment: SegKey,
    },
    /// More remote atomics in flight on this rank than it has result slots for.
    #[error("too many atomics in flight (at most {max})")]
    TooManyAtomics {
        /// The number of result slots.
        max: usize,
    },
    /// `queue_delete` on a queue with posted, unwaited entries.
    #[error("queue {queue} has {entries} entries; wait on it before deleting")]
    QueueBusy {
        /// The queue.
        queue: QueueId,
        /// Entries posted since its last `wait`.
        entries: u32,
    },
    /// A member of the group aborted the collective without naming a failed rank.
    #[error("a member aborted the collective")]
    CollectiveAborted,
    /// A user-defined reduction (`gaspi_allreduce_user`) returned a failure code.
    #[error("the user reduction returned {code}")]
    UserReduction {
        /// What the reduction returned.
        code: i32,
    },
    /// A call into the operating system failed (CPU affinity, thread creation, system
    /// information).
    #[error("{call}: {source}")]
    System {
        /// What was attempted.
        call: &'static str,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// `gaspi_threads_*` before `gaspi_threads_init`.
    #[error("gaspi_threads: not initialized (gaspi_threads_init first)")]
    ThreadPoolNotInitialized,
    /// `gaspi_threads_init` twice.
    #[error("gaspi_threads: already initialized")]
    ThreadPoolInitialized,
    /// The barrier of the ranks that `gaspi_threads_sync_all` runs failed.
    #[error("the ranks' barrier: {reason}")]
    RanksBarrier {
        /// The GASPI return code it failed with.
        code: i32,
        /// Its message.
        reason: String,
    },
}

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
    #[error("read response of {got} bytes, expected {expected}")]
    ReadLength { got: u64, expected: u64 },
    #[error("{what} of {len} bytes exceeds the maximum of {max}")]
    TooLarge {
        what: &'static str,
        len: u64,
        max: u64,
    },
    /// This rank could not queue its answer (it is leaving, or the connection failed).
    #[error("cannot send the answer")]
    ReplyFailed,
}

fn on_rank(rank: Option<Rank>) -> String {
    match rank {
        Some(r) => format!(" on rank {r} (or was never registered with this rank)"),
        None => String::new(),
    }
}

impl Error {
    /// The GASPI C return code for this error.
    pub fn code(&self) -> i32 {
        use code::*;
        match self {
            Error::Timeout => TIMEOUT,
            Error::Env(_) => ERR_ENV,
            Error::Config(_) => ERR_CONFIG,
            Error::NotInitialized => ERR_NOINIT,
            Error::AlreadyInitialized => ERR_INITED,
            Error::NullPointer(_) => ERR_NULLPTR,
            Error::InvalidSegmentSize { .. } => ERR_INV_SEGSIZE,
            Error::InvalidSegment { .. } | Error::SegmentExists { .. } => ERR_INV_SEG,
            Error::InvalidGroup { .. } => ERR_INV_GROUP,
            Error::InvalidRank { .. } => ERR_INV_RANK,
            Error::InvalidQueue { .. } => ERR_INV_QUEUE,
            Error::LocalOutOfBounds { .. } => ERR_INV_LOC_OFF,
            Error::RemoteOutOfBounds { .. } => ERR_INV_REM_OFF,
            Error::InvalidCommSize { .. } => ERR_INV_COMMSIZE,
            Error::ZeroNotificationValue => ERR_INV_NOTIF_VAL,
            Error::NotificationIdOutOfRange { .. } => ERR_INV_NOTIF_ID,
            Error::InvalidNumber(_) => ERR_INV_NUM,
            Error::InvalidSize(_) => ERR_INV_SIZE,
            Error::TooManySegments { .. } => ERR_MANY_SEG,
            Error::TooManyGroups { .. } => ERR_MANY_GRP,
            Error::QueueFull { .. } => QUEUE_FULL,
            Error::UnalignedOffset { .. } => ERR_UNALIGN_OFF,
            Error::ActiveCollective => ERR_ACTIVE_COLL,
            Error::Device(_) => ERR_DEVICE,
            Error::Bootstrap(_) => ERR_SN,
            Error::NoMemory(_) => ERR_MEMALLOC,
            Error::PeerFailed { .. }
            | Error::Terminated
            | Error::Io(_)
            | Error::NoPeers
            | Error::NotConnected { .. }
            | Error::Refused { .. }
            | Error::NotMapped { .. }
            | Error::QueueBusy { .. }
            | Error::PassiveInboxFull { .. }
            | Error::TooManyAtomics { .. }
            | Error::CollectiveAborted
            | Error::UserReduction { .. }
            | Error::System { .. }
            | Error::ThreadPoolNotInitialized
            | Error::ThreadPoolInitialized
            | Error::RanksBarrier { .. } => ERROR,
        }
    }

    /// True for [`Error::Timeout`]: the call may be repeated and resumes.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout)
    }
}

/// The standard's description of a return code (what `gaspi_error_str` returns).
pub fn error_str(code: i32) -> &'static str {
    use code::*;
    match code {
        ERROR => "general error",
        SUCCESS => "success",
        TIMEOUT => "timeout",
        ERR_EMFILE => "too many open files",
        ERR_ENV => "incorrect environment vars",
        ERR_SN_PORT => "sn port already in use",
        ERR_CONFIG => "invalid parameter in configuration (gaspi_config_t)",
        ERR_NOINIT => "invalid function before initialization",
        ERR_INITED => "invalid function after initialization",
        ERR_NULLPTR => "null pointer reference",
        ERR_INV_SEGSIZE => "invalid segment size",
        ERR_INV_SEG => "invalid segment",
        ERR_INV_GROUP => "invalid group",
        ERR_INV_RANK => "invalid rank",
        ERR_INV_QUEUE => "invalid queue",
        ERR_INV_LOC_OFF => "invalid local offset",
        ERR_INV_REM_OFF => "invalid remote offset",
        ERR_INV_COMMSIZE => "invalid size for communication",
        ERR_INV_NOTIF_VAL => "invalid notification value",
        ERR_INV_NOTIF_ID => "invalid notification id",
        ERR_INV_NUM => "invalid number count",
        ERR_INV_SIZE => "invalid size",
        ERR_MANY_SEG => "too many segments",
        ERR_MANY_GRP => "too many groups",
        QUEUE_FULL => "queue is full",
        ERR_UNALIGN_OFF => "unaligned (8 bytes) offset",
        ERR_ACTIVE_COLL => "other collective is still active",
        ERR_DEVICE => "device operation error",
        ERR_SN => "sn operation failed",
        ERR_MEMALLOC => "memory allocation failed",
        _ => "unknown error code",
    }
}

impl From<nix::errno::Errno> for Error {
    fn from(e: nix::errno::Errno) -> Self {
        Error::Io(e.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_the_standard() {
        assert_eq!(Error::Timeout.code(), 1);
        assert_eq!(
            Error::QueueFull {
                queue: QueueId(0),
                entries: 1,
                max: 1
            }
            .code(),
            23
        );
        assert_eq!(Error::ZeroNotificationValue.code(), 17);
        assert_eq!(Error::PeerFailed { rank: Rank(1) }.code(), -1);
        assert_eq!(error_str(code::ERR_INV_REM_OFF), "invalid remote offset");
    }

    #[test]
    fn messages_carry_context() {
        let e = Error::RemoteOutOfBounds {
            rank: Rank(2),
            segment: SegmentId(3),
            offset: 10,
            len: 8,
            size: 16,
        };
        let s = e.to_string();
        assert!(
            s.contains("rank 2") && s.contains("segment 3") && s.contains("size 16"),
            "{s}"
        );
    }
}
