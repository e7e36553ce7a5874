//! InfiniBand/RoCE verbs: RDMA straight into the peer's registered segment, no CPU on the
//! target. One RC queue pair per (peer, queue) plus one for internal traffic (collectives,
//! atomics, directory reads) and one for passive messages (SEND/RECV); one completion queue
//! per queue, polled in `wait`.
//!
//! Layers: [`device`] is the narrow interface to a device (real: [`ibv`] on `sideway`,
//! libibverbs loaded at run time; tests: [`fake`], with [`fake_passive`] for its receive
//! queues); [`channel`] is one queue pair and its in-flight ops; [`registry`] registers
//! segments and publishes their keys; [`address`] encodes what the rendezvous exchanges;
//! [`passive`] carries passive messages. This module sets them up and implements
//! [`Transport`]. Control traffic (segment registration, pings, peer death) stays on the TCP
//! mesh.

pub(crate) mod address;
pub(crate) mod channel;
pub(crate) mod device;
#[cfg(feature = "fake-verbs")]
pub(crate) mod fake;
#[cfg(feature = "fake-verbs")]
mod fake_fabric;
#[cfg(feature = "fake-verbs")]
pub(crate) mod fake_passive;
#[cfg(feature = "verbs")]
pub(crate) mod ibv;
pub(crate) mod layout;
pub(crate) mod open;
pub(crate) mod passive;
mod passive_path;
pub(crate) mod registry;
pub(crate) mod setup;
pub(crate) mod transport;

pub(crate) use setup::{PassiveSizes, VerbsSetup};
pub(crate) use transport::VerbsTransport;
