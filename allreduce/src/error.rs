//! Errors of the collectives.

use gaspi::Rank;

/// What went wrong in a collective.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The runtime returned an error (a dead peer, a bad group, ...).
    #[error(transparent)]
    Gaspi(#[from] gaspi::Error),
    /// The call's timeout passed before the collective finished; call `wait`/`test` again
    /// to resume.
    #[error("collective timed out (call wait or test again to resume)")]
    Timeout,
    /// A buffer or argument does not fit the collective it was given to.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// `start` was called while a run is still in flight, or a result was asked for before
    /// any run completed.
    #[error("collective is {0}")]
    WrongState(&'static str),
    /// An earlier run of this collective failed (a peer died, ...); it cannot be used again.
    #[error("collective failed earlier: {0}")]
    Failed(String),
    /// The root of a broadcast is not a member of the group.
    #[error("rank {root} is not a member of the group")]
    RootNotInGroup { root: Rank },
    /// No segment id is free on every member of the group.
    #[error("no segment id is free on every member of the group (all {max} in use somewhere)")]
    NoFreeSegment { max: u32 },
    /// The collective's driver thread stopped (it panicked or could not be started).
    #[error("driver thread: {0}")]
    DriverThread(String),
}

impl Error {
    /// True for [`Error::Timeout`] (the call may be repeated and resumes).
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout | Error::Gaspi(gaspi::Error::Timeout))
    }
}

/// Result of the collectives.
pub type Result<T> = std::result::Result<T, Error>;
