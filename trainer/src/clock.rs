//! The one clock of a training process: hooks, the communication thread and the training loop
//! stamp their events with it, so a [`StepTrace`](crate::StepTrace) compares times taken on
//! different threads.

use std::sync::OnceLock;
use std::time::Instant;

/// Nanoseconds since the first call in this process: one clock for hooks and the comm thread.
pub fn now_ns() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}
