//! A simulator of the allreduce algorithms: it replays the real per-rank schedules (the
//! ones `plan::allreduce_plan` builds for the runtime) on a model of the machine, and
//! predicts each algorithm's time and bus bandwidth for any number of ranks, ranks per
//! host and vector size. It is how the automatic choice ([`Options::pick`]) is checked
//! beyond the few ranks this project can run for real.
//!
//! - [`Machine`] (`machine.rs`): the model: shared-memory and network latency and
//!   bandwidth, a host's link each way, reduction throughput, cache and memory bandwidth,
//!   cores, and the CPU time of messages and of waking a waiter.
//! - `presets.rs`: the named machines ([`PRESETS`]), calibrated on this project's VMs, and
//!   the automatic choice's cluster.
//! - [`Cluster`] (`cluster.rs`): ranks, ranks per host, transport inside a host; from it
//!   the layout and shape the runtime would build.
//! - `program.rs`: every rank's plan, in a compact form, and the runtime's feasibility
//!   checks (plus a memory bound on staging, [`STAGING_LIMIT`]).
//! - `replay.rs`: the deterministic discrete-event replay of all ranks.
//! - `costs.rs`: what a byte of a copy, a reduction or a network message costs, by where
//!   its bytes come from.
//! - `lines.rs`: who last wrote each byte of each segment, so that a read knows whether its
//!   bytes come from another core's cache.
//! - `recency.rs`: how many bytes were touched since each byte of each segment was, so that
//!   a read knows whether its bytes are still in a cache.
//! - `caches.rs`: where a read finds its bytes by their recency: its core's private cache,
//!   the host's last-level cache, or memory.
//! - `cores.rs`: the hosts' cores, onto which the replay schedules CPU work as a
//!   work-conserving kernel would, so that more ranks than cores queue for them.
//! - [`predict`], [`best`], [`runtime_choice`] (`predict.rs`): the API.
//!
//! ```
//! use allreduce::sim::{predict, Cluster, Machine};
//! use allreduce::Algorithm;
//!
//! let p = predict(Algorithm::Ring, &Cluster::new(4, 2), 16 << 20, 4, &Machine::netns_2gbit())?;
//! assert!(p.seconds > 0.0 && p.busbw > 0.0);
//! # Ok::<(), allreduce::sim::SimError>(())
//! ```
//!
//! [`Options::pick`]: crate::Options

mod caches;
mod cluster;
mod cores;
mod costs;
mod error;
mod lines;
mod machine;
mod predict;
mod presets;
mod program;
mod recency;
mod replay;

pub use cluster::{Cluster, Intra};
pub use error::SimError;
pub use machine::Machine;
pub use predict::{
    best, predict, predict_batch, runtime_choice, Prediction, ALL, AUTO_CANDIDATES, BATCH_REPLAYED,
    RUNS,
};
pub use presets::PRESETS;
pub use program::STAGING_LIMIT;

#[cfg(test)]
mod tests;
