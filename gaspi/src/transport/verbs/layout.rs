//! How a peer's queue pairs are laid out: one per user queue, one internal, one passive;
//! and the limits every part of the verbs transport shares.

use std::time::Duration;

use crate::config::limits;

/// One-sided channels per peer: one per possible queue, then the internal one.
pub(crate) const CHANNELS: usize = limits::QUEUE_NUM_MAX as usize + 1;
pub(crate) const INTERNAL: usize = CHANNELS - 1;
/// The passive channel (SEND/RECV) follows them; its send completions have their own queue.
pub(crate) const PASSIVE: usize = CHANNELS;
/// Queue pairs (and completion queues in `cqs`) per peer.
pub(crate) const QPS: usize = CHANNELS + 1;
/// Largest single work request; longer transfers are split.
pub(crate) const MAX_WR_BYTES: usize = 1 << 30;
/// How long a directory read may take before the lookup fails.
pub(crate) const LOOKUP_TIMEOUT: Duration = Duration::from_secs(30);
