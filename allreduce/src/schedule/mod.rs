//! Collective algorithms as per-rank schedules: flat lists of sends, receives and local
//! reductions over byte ranges of one segment, built once per collective and replayed by
//! the engine (`engine.rs`) on every run. Keeping the algorithms free of I/O lets the
//! unit tests run all ranks of a schedule in one process against a model of asynchronous
//! delivery (see `schedule/tests.rs`).
//!
//! One file per algorithm: [`ring()`], [`recursive_doubling()`], [`rabenseifner()`],
//! [`hierarchical()`], [`one_shot()`], [`single_copy()`], [`broadcast_tree()`],
//! [`broadcast_chain()`]; what they share is in `action.rs` (the vocabulary of a schedule),
//! `shape.rs` (the collective's dimensions and layout helpers), `hierarchical_layout.rs` (where the hierarchical allreduce's units, slots and ids lie), `fold.rs` (non-power-of-two
//! groups for the two algorithms that pair ranks by bits) and `embed.rs` (running one
//! algorithm's schedule among a subset of the group, as the hierarchical allreduce does
//! between hosts).
//!
//! Segment layout: `[data | staging]`. `data` holds the user's `count` elements (input and,
//! in place, the result); `staging` receives partial results that are reduced into `data`.
//!
//! Flow control: within one run, only the ring reuses staging (it cycles through a few
//! cache-sized slots, with credits; see [`ring()`]). Across runs, every write into a peer's
//! staging slot or data range is causally after that peer has consumed the previous run's
//! use of it (each algorithm's last receive on a rank depends on every peer having finished
//! its reduce phase), and every range a rank sends from is not modified by that rank until
//! the data has reached its target or a `Flush` made the send complete. Broadcast receivers
//! do not contribute data, so there each child first tells its parent that it is ready.

mod action;
mod broadcast_chain;
mod broadcast_tree;
mod embed;
mod fold;
mod hierarchical;
mod hierarchical_layout;
mod one_shot;
mod rabenseifner;
mod recursive_doubling;
mod ring;
mod shape;
mod single_copy;

pub(crate) use action::{Action, Schedule};
pub(crate) use broadcast_chain::broadcast_chain;
pub(crate) use broadcast_tree::broadcast_tree;
pub(crate) use hierarchical::{hierarchical, host_layout, HostMemory};
pub(crate) use one_shot::one_shot;
pub(crate) use rabenseifner::rabenseifner;
pub(crate) use recursive_doubling::recursive_doubling;
pub(crate) use ring::{ring, RING_STAGING_BYTES};
pub(crate) use shape::Shape;
pub(crate) use single_copy::single_copy;

#[cfg(test)]
mod tests;
