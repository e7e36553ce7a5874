//! The error type. Each variant maps to one GASPI return code ([`Error::code`]), so the C ABI
//! and the Rust API report the same thing.

use crate::types::{QueueId, Rank, SegKey, SegmentId};

pub mod code;
mod protocol;

pub use code::error_str;
pub(crate) use protocol::ProtocolError;

/// The result of every fallible call of the runtime (`E` defaults to [`Error`]). In C terms
/// `Ok` is `GASPI_SUCCESS` and `Err(e)` is the return code [`e.code()`](Error::code).
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything a GASPI call can fail with.
///
/// Variants documented with a `GASPI_*` code return that code from the C API; the others
/// are finer-grained failures that GASPI reports as `GASPI_ERROR` (see [`Error::code`]).
/// Only [`Error::Timeout`] means "call again to continue".
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `GASPI_TIMEOUT`: the [`Timeout`](crate::Timeout) given to a blocking call passed
    /// before the call could complete (with [`Timeout::TEST`](crate::Timeout::TEST): it could
    /// not complete at once). Not a failure: nothing was lost, and calling again with the
    /// same arguments resumes the operation (a timed-out barrier or allreduce keeps its
    /// progress, and the next call of the same collective on that group continues it). At
    /// init the job not assembling within `GASPI_INIT_TIMEOUT_MS` is reported as
    /// [`Error::Bootstrap`] instead.
    #[error("timed out")]
    Timeout,
    /// `GASPI_ERR_ENV`: the job description in the environment is missing or inconsistent
    /// (see [`env`](crate::env)): an unparsable `GASPI_*`, Slurm or torchrun variable, a
    /// rank not below the number of ranks, no rendezvous address for a multi-rank job, a
    /// malformed `GASPI_JOB_TOKEN`, `GASPI_TRANSPORT=shm` with a peer on another host, or a
    /// start by `mpirun`. The message names the variable; fix the launch, retrying cannot
    /// help.
    #[error("environment: {0}")]
    Env(String),
    /// `GASPI_ERR_CONFIG`: a [`Config`](crate::Config) field is outside what the runtime
    /// supports (see [`Config::validate`](crate::Config::validate) and
    /// [`limits`](crate::config::limits)); the message names the field and its allowed range.
    #[error("bad configuration: {0}")]
    Config(String),
    /// `GASPI_ERR_NOINIT`: a C API call before `gaspi_proc_init` or after `gaspi_proc_term`.
    /// The Rust API cannot produce it (a [`Context`](crate::Context) is initialized by
    /// construction).
    #[error("GASPI is not initialized")]
    NotInitialized,
    /// `GASPI_ERR_INITED`: init while this process already has a live
    /// [`Context`](crate::Context) (GASPI allows one per process), or a configuration change
    /// (`gaspi_config_set`) after init. Terminate and drop the existing context first.
    #[error("GASPI is already initialized in this process")]
    AlreadyInitialized,
    /// `GASPI_ERR_NULLPTR`: a required pointer argument was null (the memory of
    /// [`Context::segment_bind`](crate::Context::segment_bind), an output argument or callback
    /// of the C API); the field names the argument.
    #[error("null pointer passed for {0}")]
    NullPointer(&'static str),
    /// `GASPI_ERR_INV_SEGSIZE`: a segment of 0 bytes, or larger than this implementation
    /// allocates (`gaspi_segment_alloc`/`_create`/`_bind`/`_use`).
    #[error("invalid segment size {size} (must be 1..={max})")]
    InvalidSegmentSize {
        /// The requested size in bytes.
        size: u64,
        /// The largest size accepted: 1 TiB or `transfer_size_max`, whichever is larger
        /// (`u64::MAX` for bound user memory, where only 0 is refused).
        max: u64,
    },
    /// `GASPI_ERR_INV_SEG`: the segment id is not below `segment_max`, the segment was not
    /// created (or was deleted) here, or — for a remote access — the target rank has no such
    /// segment registered with this rank. Create the segment with a group that contains both
    /// ranks (`gaspi_segment_create`), or `gaspi_segment_register` it with this rank, before
    /// accessing it.
    #[error("segment {segment} does not exist{}", on_rank(*.rank))]
    InvalidSegment {
        /// The segment id as the caller gave it.
        segment: SegmentId,
        /// The rank whose segment was looked up; `None` for this rank's own segments.
        rank: Option<Rank>,
    },
    /// `GASPI_ERR_INV_SEG`: allocation or binding of a segment id that is in use on this rank
    /// (or registration of a peer's segment that is already registered). Delete it first
    /// (`gaspi_segment_delete`) or pick another id.
    #[error("segment {segment} already exists")]
    SegmentExists {
        /// The segment id in use.
        segment: SegmentId,
    },
    /// `GASPI_ERR_INV_GROUP`: the group does not exist; is not committed when a collective
    /// or segment creation needs it; this rank is not a member (`gaspi_group_commit`); the
    /// members disagree on who belongs; the group was deleted (by another thread) while
    /// this commit of it was under way; or `GASPI_GROUP_ALL` was to be deleted.
    #[error("invalid group {group}: {why}")]
    InvalidGroup {
        /// The group id (`gaspi_group_t`).
        group: u8,
        /// Which of the conditions above failed.
        why: &'static str,
    },
    /// `GASPI_ERR_INV_GROUP`: ranks were added to the group after its last commit
    /// (`gaspi_group_add` of a committed group, which GPI-2 allows); its collectives and
    /// segment creation are refused until every member has committed it again (GPI-2 leaves
    /// them undefined until then). Call `group_commit` on every member, the added ones too.
    #[error("group {group} changed since its last commit: every member must commit it again")]
    GroupChanged {
        /// The group id (`gaspi_group_t`).
        group: u8,
    },
    /// `GASPI_ERR_INV_RANK`: the rank argument is not below the number of ranks
    /// (`gaspi_proc_num`).
    #[error("rank {rank} is out of range (the job has {nranks} ranks)")]
    InvalidRank {
        /// The rank passed.
        rank: Rank,
        /// The number of ranks in the job.
        nranks: u16,
    },
    /// `GASPI_ERR_INV_QUEUE`: the queue id names no existing queue: not below `queue_num`
    /// and not added with `gaspi_queue_create`, or deleted with `gaspi_queue_delete`.
    #[error("queue {queue} is out of range or not created ({num} queues)")]
    InvalidQueue {
        /// The queue passed.
        queue: QueueId,
        /// How many queues exist now (ids need not be contiguous after a delete).
        num: u8,
    },
    #[error(
        "local range [{offset}, {offset}+{len}) is past the end of segment {segment} (size {size})"
    )]
    /// `GASPI_ERR_INV_LOC_OFF`: the local range of a transfer, passive send or
    /// [`Segment`](crate::Segment) access reaches past the end of the local segment (or
    /// `offset + len` overflows). Nothing was posted.
    LocalOutOfBounds {
        /// The local segment.
        segment: SegmentId,
        /// First byte of the range, from the start of the segment's data.
        offset: u64,
        /// Bytes accessed.
        len: u64,
        /// The segment's size in bytes.
        size: u64,
    },
    #[error("remote range [{offset}, {offset}+{len}) is past the end of segment {segment} on rank {rank} (size {size})")]
    /// `GASPI_ERR_INV_REM_OFF`: the remote range of a write, read or atomic reaches past the
    /// end of the target's segment, checked locally against the size the target registered.
    /// Nothing was posted.
    RemoteOutOfBounds {
        /// The target rank.
        rank: Rank,
        /// The target's segment.
        segment: SegmentId,
        /// First byte of the range in the target segment.
        offset: u64,
        /// Bytes accessed.
        len: u64,
        /// The target segment's size in bytes.
        size: u64,
    },
    /// `GASPI_ERR_INV_COMMSIZE`: a transfer of more than `transfer_size_max`
    /// (`gaspi_transfer_size_max`), or a passive message of 0 bytes or more than
    /// `passive_transfer_size_max` (`gaspi_passive_transfer_size_max`). Split large transfers.
    #[error("transfer size {size} is not allowed here (1..={max} bytes)")]
    InvalidCommSize {
        /// The requested size in bytes.
        size: u64,
        /// The largest size allowed for this kind of transfer.
        max: u64,
    },
    /// `GASPI_ERR_INV_NOTIF_VAL`: a notification value of 0. GASPI reserves 0 for "not
    /// set" (what `gaspi_notify_reset` leaves and `gaspi_notify_waitsome` does not see), so
    /// `gaspi_notify` and `gaspi_write_notify` require a non-zero value.
    #[error("notification value must be non-zero")]
    ZeroNotificationValue,
    /// `GASPI_ERR_INV_NOTIF_ID`: the notification id (or, for `gaspi_notify_waitsome`, the
    /// range `id..id+num`) is not below the segment's number of notification slots
    /// (`notification_num` of the rank that created the segment).
    #[error("notification id {id} (+{num}) is out of range (segment has {max})")]
    NotificationIdOutOfRange {
        /// The (first) notification id.
        id: u32,
        /// Slots addressed from `id` on: 1 except for `gaspi_notify_waitsome`.
        num: u32,
        /// The segment's number of notification slots.
        max: u32,
    },
    /// `GASPI_ERR_INV_NUM`: a count argument is out of range: list operations with 0 or more
    /// than `rw_list_elem_max` elements, an allreduce of 0 or more than `allreduce_elem_max`
    /// elements, a statistics counter that does not exist, `gaspi_queue_create` with all
    /// queues in use, a Rust `notify_waitsome` of 0 notifications (no id to return; the C
    /// call returns success there, as GPI-2 does). The message names the bound.
    #[error("invalid number: {0}")]
    InvalidNumber(String),
    /// `GASPI_ERR_INV_SIZE`: a buffer size that does not fit the call: an allreduce input
    /// that is not a whole number of elements, an output buffer of another length than the
    /// input, an element larger than the allreduce round buffer (`allreduce_buf_size`), a
    /// resumed allreduce with a different size, or an atomic past the end of the segment.
    #[error("invalid size: {0}")]
    InvalidSize(String),
    /// `GASPI_ERR_MANY_SEG`: this rank already holds `segment_max` segments
    /// (`gaspi_segment_max`), or `gaspi_segment_avail_local` found every id taken; delete one
    /// before allocating another.
    #[error("too many segments (max {max})")]
    TooManySegments {
        /// The configured `segment_max`.
        max: u32,
    },
    /// `GASPI_ERR_MANY_GRP`: all `group_max` group ids (`GASPI_GROUP_ALL` included) are in
    /// use; `gaspi_group_delete` one first.
    #[error("too many groups (max {max})")]
    TooManyGroups {
        /// The configured `group_max`.
        max: u32,
    },
    /// `GASPI_ERROR`: all `gaspi_queue_max` queues exist already (`gaspi_queue_create`);
    /// delete one first.
    #[error("all {max} queues exist already; delete one first")]
    TooManyQueues {
        /// `gaspi_queue_max`.
        max: u32,
    },
    /// `GASPI_ERR_INV_RANK`: the rank is a member of the group already (`gaspi_group_add`).
    #[error("rank {rank} is already a member of group {group}")]
    AlreadyMember {
        /// The group id (`gaspi_group_t`).
        group: u8,
        /// The rank added twice.
        rank: Rank,
    },
    /// `GASPI_ERROR`: `gaspi_segment_list` was asked for another number of segment ids than
    /// there are segments (`gaspi_segment_num`).
    #[error("asked for {asked} segment ids, this rank has {segments} segments")]
    SegmentCount {
        /// The `num` passed.
        asked: u32,
        /// The number of local segments.
        segments: u32,
    },
    #[error("queue {queue} is full: {entries} entries posted, room for {max}; call wait first")]
    /// `GASPI_QUEUE_FULL`: posting would take the queue past `queue_size_max` entries
    /// (`gaspi_queue_size_max`). Nothing was posted; call `gaspi_wait` on the queue (which
    /// frees every entry once the posted operations are locally complete) and post again.
    QueueFull {
        /// The queue.
        queue: QueueId,
        /// Entries in use since its last `wait`.
        entries: u32,
        /// The queue's capacity (`queue_size_max`).
        max: u32,
    },
    /// `GASPI_ERR_UNALIGN_OFF`: a remote atomic (`gaspi_atomic_fetch_add`,
    /// `gaspi_atomic_compare_swap`) at an offset that is not a multiple of 8: atomics work on
    /// naturally aligned 64-bit words only.
    #[error("offset {offset} is not 8-byte aligned")]
    UnalignedOffset {
        /// The offending segment offset in bytes.
        offset: u64,
    },
    /// `GASPI_ERR_ACTIVE_COLL`: a different collective on the same group timed out and was
    /// not finished yet (a barrier after an allreduce that timed out, or the reverse): call
    /// that one again to resume it first. (Calls of several threads on one group wait for
    /// each other instead, up to their timeout.)
    #[error("a different collective is active on this group")]
    ActiveCollective,
    /// `GASPI_ERR_DEVICE`: the communication device failed: a verbs call (registration,
    /// queue-pair set-up, posting, a completion queue) or mapping a shared-memory peer's
    /// segment file. The message names the operation and the peer where there is one.
    #[error("device: {0}")]
    Device(String),
    /// The connection to a peer broke (the process died, the network failed, or it violated
    /// the wire protocol), nothing arrived from it for the heartbeat timeout when one is set
    /// (`GASPI_HEARTBEAT_TIMEOUT_MS`: it is stopped or hung), or the peer left with
    /// `gaspi_proc_term`. The peer is marked
    /// `GASPI_STATE_CORRUPT` in [`Context::state_vec`](crate::Context::state_vec) for the rest
    /// of the job; every later call that needs it fails the same way. `GASPI_ERROR` in the C
    /// API; GASPI's fault-tolerance model is to consult the state vector and continue
    /// without the rank (e.g. in a new group).
    ///
    /// The message begins `rank R failed (`: `tarantella` reads that from the output of the
    /// rank that failed first to name the rank that stopped making progress.
    #[error("rank {rank} failed (connection lost, protocol error, or silent past the heartbeat timeout)")]
    PeerFailed {
        /// The failed (or departed) peer.
        rank: Rank,
    },
    /// `gaspi_proc_term` ran on another thread while this call was blocked (or before it
    /// started): the call was abandoned.
    #[error("this process left GASPI (proc_term) while the call was in progress")]
    Terminated,
    /// `GASPI_ERR_SN`: the start-up exchange over the service network failed: rank 0's
    /// rendezvous could not be bound or reached, rank 0 rejected this rank (wrong
    /// `GASPI_JOB_TOKEN`, a rank or job size that does not match), the job did not assemble
    /// within `GASPI_INIT_TIMEOUT_MS`, or the init barrier timed out. The message says which
    /// step failed.
    #[error("bootstrap: {0}")]
    Bootstrap(String),
    /// `GASPI_ERR_MEMALLOC`: segment memory could not be obtained: mapping anonymous memory,
    /// or creating, sizing or mapping the segment's shared-memory file (typically `/dev/shm`
    /// too small for the segment: use a larger tmpfs or `GASPI_TRANSPORT=tcp`). The message
    /// names the file and the size.
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
            Error::InvalidGroup { .. } | Error::GroupChanged { .. } => ERR_INV_GROUP,
            Error::InvalidRank { .. } | Error::AlreadyMember { .. } => ERR_INV_RANK,
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
            | Error::RanksBarrier { .. }
            | Error::TooManyQueues { .. }
            | Error::SegmentCount { .. } => ERROR,
        }
    }

    /// True for [`Error::Timeout`]: the call may be repeated and resumes.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout)
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
