//! Statistics counters (`gaspi_statistic_*`): cheap relaxed counters of what this rank did.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

/// The counters this implementation keeps (all without argument).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    /// Bytes posted with `write*` (list elements included).
    BytesWritten = 0,
    /// Bytes posted with `read*`.
    BytesRead = 1,
    /// One-sided operations posted (writes, reads, notifications).
    OpsPosted = 2,
    /// Barriers completed.
    Barriers = 3,
    /// Passive messages delivered to peers with InfiniBand verbs SENDs.
    PassiveSentVerbs = 4,
    /// Passive messages delivered to peers over the TCP control channel.
    PassiveSentTcp = 5,
    /// Passive messages received from verbs receive buffers.
    PassiveReceivedVerbs = 6,
}

impl Counter {
    /// Every counter, indexed by its `gaspi_statistic_counter_t` number (the discriminant):
    /// `ALL.len()` is `gaspi_statistic_counter_max`.
    pub const ALL: [Counter; 7] = [
        Counter::BytesWritten,
        Counter::BytesRead,
        Counter::OpsPosted,
        Counter::Barriers,
        Counter::PassiveSentVerbs,
        Counter::PassiveSentTcp,
        Counter::PassiveReceivedVerbs,
    ];

    /// The counter with C index `i` (`gaspi_statistic_counter_t`); [`Error::InvalidNumber`]
    /// (`GASPI_ERR_INV_NUM`) when `i` is not below `ALL.len()`.
    pub fn from_index(i: u32) -> Result<Counter> {
        Self::ALL.get(i as usize).copied().ok_or_else(|| {
            Error::InvalidNumber(format!("statistic counter {i} (0..{})", Self::ALL.len()))
        })
    }

    /// Name and description (`gaspi_statistic_counter_info`).
    pub fn info(self) -> (&'static str, &'static str) {
        match self {
            Counter::BytesWritten => ("BytesWritten", "bytes posted by write operations"),
            Counter::BytesRead => ("BytesRead", "bytes posted by read operations"),
            Counter::OpsPosted => ("OpsPosted", "one-sided operations posted"),
            Counter::Barriers => ("Barriers", "barriers completed"),
            Counter::PassiveSentVerbs => {
                ("PassiveSentVerbs", "passive messages sent with verbs SEND")
            }
            Counter::PassiveSentTcp => (
                "PassiveSentTcp",
                "passive messages sent over the TCP control channel",
            ),
            Counter::PassiveReceivedVerbs => (
                "PassiveReceivedVerbs",
                "passive messages received through verbs receive buffers",
            ),
        }
    }
}

#[derive(Default)]
pub(crate) struct Stats([AtomicU64; Counter::ALL.len()]);

impl Stats {
    pub fn add(&self, c: Counter, v: u64) {
        self.0[c as usize].fetch_add(v, Ordering::Relaxed);
    }

    pub fn get(&self, c: Counter) -> u64 {
        self.0[c as usize].load(Ordering::Relaxed)
    }

    pub fn reset(&self, c: Counter) {
        self.0[c as usize].store(0, Ordering::Relaxed);
    }
}
