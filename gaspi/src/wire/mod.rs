//! The bytes on a connection, and nothing else: no sockets are read and no state is touched
//! here, so every format is unit-tested in one process.
//!
//! - [`codec`]: little-endian fields and length-prefixed messages, the one framing used by the
//!   rendezvous and by the verbs address exchange;
//! - [`frame`]: the fixed header of every frame on a data connection;
//! - [`hello`]: the first bytes on a data connection;
//! - [`control`]: the typed control messages (segment registration, passive messages,
//!   ping, kill, goodbye) carried in frames;
//! - [`admission`]: who may take a connection slot before it has proven it belongs to the job.

pub(crate) mod admission;
pub(crate) mod codec;
pub(crate) mod control;
pub(crate) mod frame;
pub(crate) mod hello;
