//! What can go wrong in a simulation, as values a caller can tell apart.

use crate::algorithm::Algorithm;

/// Why a prediction could not be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    /// The cluster or machine makes no sense (no ranks, zero bandwidth, ...).
    #[error("bad simulation input: {0}")]
    BadInput(&'static str),
    /// A machine parameter set by name ([`Machine::set`](super::Machine::set)) that does
    /// not exist, or a value that is not a non-negative number (or 0/1 for a flag).
    #[error("unknown machine parameter or bad value: {name}={value}")]
    BadParameter {
        /// The name given.
        name: String,
        /// The value given.
        value: String,
    },
    /// The algorithm cannot run on this cluster and size, as the runtime would refuse it
    /// (single-copy across hosts, too many notifications)
    /// or because its staging exceeds [`STAGING_LIMIT`](super::STAGING_LIMIT).
    #[error("{algorithm:?} is not available here: {why}")]
    Infeasible {
        /// The algorithm asked for.
        algorithm: Algorithm,
        /// Why not.
        why: &'static str,
    },
    /// Every rank that has not finished waits for a notification nobody will send: the
    /// schedules do not fit together.
    #[error(
        "deadlock at {at_s} s: {blocked} ranks wait, e.g. rank {rank} for notification {notif}"
    )]
    Deadlock {
        /// Simulated time when the last event happened.
        at_s: f64,
        /// Ranks blocked.
        blocked: usize,
        /// One of them.
        rank: usize,
        /// What it waits for.
        notif: u32,
    },
    /// A notification was set twice before its receiver took it (the real runtime would
    /// lose a wake-up): a broken schedule.
    #[error("rank {rank}'s notification {notif} was set again before it was taken")]
    Overrun {
        /// The receiving rank.
        rank: usize,
        /// The notification id.
        notif: u32,
    },
}
