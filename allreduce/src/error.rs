//! Errors of the collectives: one variant per thing a caller may want to tell apart (a
//! timeout to resume after, a failed peer, a setup the members disagree on, a bad
//! argument), with the runtime's own error kept as the source.

use std::sync::Arc;

use gaspi::{Group, Rank};

/// What went wrong in a collective.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The runtime failed a call while setting the collective up (a dead peer, a bad group,
    /// no memory, ...). In a run, such an error ends the run and comes as [`Error::Failed`].
    #[error("gaspi: {0}")]
    Gaspi(#[from] gaspi::Error),
    /// The call's timeout passed before the collective finished; call `wait`/`test` again
    /// to resume.
    #[error("collective timed out (call wait or test again to resume)")]
    Timeout,
    /// This rank is not a member of the group the collective is set up over.
    #[error("rank {rank} is not a member of group {group}")]
    NotAMember {
        /// This rank.
        rank: Rank,
        /// The group given to the constructor.
        group: Group,
    },
    /// The root of a broadcast is not a member of the group.
    #[error("rank {root} is not a member of the group")]
    RootNotInGroup {
        /// The root given to the constructor.
        root: Rank,
    },
    /// The vector's size in bytes does not fit in the address space.
    #[error("{count} elements of {elem_bytes} bytes overflow the address space")]
    TooManyElements {
        /// Elements asked for.
        count: usize,
        /// Bytes per element.
        elem_bytes: usize,
    },
    /// A slice given to `start_from` does not hold as many elements as the collective was
    /// set up for.
    #[error("{given} elements given to a collective set up for {expected}")]
    LengthMismatch {
        /// Elements in the slice.
        given: usize,
        /// Elements the collective was set up for.
        expected: usize,
    },
    /// The algorithm needs more notification ids than a segment has.
    #[error("collective needs {needed} notifications, segments have {available}")]
    TooManyNotifications {
        /// Notification ids the schedule uses.
        needed: u32,
        /// Notification ids per segment (`notification_num`).
        available: u32,
    },
    /// The members of the group did not all set up the same collective. Every member gets
    /// this error, none is left waiting.
    #[error(
        "the group's members set up different collectives (count, type, reduction, root, \
         algorithm, chunk size or the layout of the members on hosts differ)"
    )]
    SetupMismatch,
    /// The algorithm asked for cannot run on this group.
    #[error("allreduce algorithm {algorithm:?} cannot run on this group: {why}")]
    AlgorithmUnavailable {
        /// The algorithm asked for.
        algorithm: crate::algorithm::Algorithm,
        /// What it needs that the group lacks.
        why: &'static str,
    },
    /// The pipelining chunk (from [`Options::chunk_bytes`](crate::Options::chunk_bytes)
    /// or `TNT_ALLREDUCE_CHUNK`) is 0 bytes.
    #[error("chunk size must be > 0")]
    ZeroChunk,
    /// An environment variable that overrides the options holds a value it cannot take.
    #[error("{variable}={value:?} is not {expected}")]
    BadEnvironment {
        /// The variable's name.
        variable: &'static str,
        /// Its value (lossily converted if it was not Unicode).
        value: String,
        /// What the variable takes.
        expected: &'static str,
    },
    /// A run is in flight: `start`, the buffer and the result have to wait for it.
    #[error(
        "a run of this collective is in flight (wait for it before starting another, \
         touching the buffer or reading the result)"
    )]
    InFlight,
    /// No run has completed yet, so there is no result to read.
    #[error("no run of this collective has completed yet (start one first)")]
    NoResult,
    /// A run of this collective failed; the source is why (a [`gaspi::Error`] such as
    /// `PeerFailed` in [`Error::Gaspi`]). Every call reports it from then on: the
    /// collective cannot be used again.
    #[error("collective failed: {0}")]
    Failed(#[source] Arc<Error>),
    /// No segment id is free on every member of the group.
    #[error("no segment id is free on every member of the group (all {max} in use somewhere)")]
    NoFreeSegment {
        /// Segment ids looked at.
        max: u32,
    },
    /// The thread of a collective driven by [`Driver::Thread`](crate::Driver::Thread)
    /// could not be started.
    #[error("could not start the collective's driver thread: {0}")]
    DriverThread(#[source] std::io::Error),
}

impl Error {
    /// True for a timeout (the call may be repeated and resumes).
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout | Error::Gaspi(gaspi::Error::Timeout))
    }

    /// The peer whose failure caused this error, directly or as the cause of
    /// [`Error::Failed`].
    pub fn peer_failed(&self) -> Option<Rank> {
        match self {
            Error::Gaspi(gaspi::Error::PeerFailed { rank }) => Some(*rank),
            Error::Failed(cause) => cause.peer_failed(),
            _ => None,
        }
    }
}

/// Result of the collectives.
pub type Result<T> = std::result::Result<T, Error>;
