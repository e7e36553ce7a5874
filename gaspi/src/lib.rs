//! A GASPI runtime in Rust: partitioned global address space communication with one-sided
//! writes, reads and notifications, as in the GASPI standard and its reference
//! implementation GPI-2.
//!
//! Each process (rank) creates [`Context`] from the environment the launcher sets (see
//! [`env`](mod@env)), allocates *segments* of memory that peers may access, and communicates with
//! `write_notify` (data, then a notification the target can wait on), `read`, atomics and
//! collectives. Ranks on one host talk through shared memory, others through TCP; the
//! choice is made per peer at init (`GASPI_TRANSPORT=auto|tcp|shm`).
//!
//! ```
//! use gaspi::{Alloc, Context, Group, Local, NotificationId, QueueId, Rank, Remote, SegmentId, Timeout};
//!
//! # fn main() -> gaspi::Result<()> {
//! let ctx = Context::init()?; // one rank when started without a launcher
//! let (me, n) = (ctx.rank(), ctx.num_ranks());
//! let seg = SegmentId(0);
//! ctx.segment_create(seg, 1024, Group::ALL, Timeout::BLOCK, Alloc::Initialized)?;
//! ctx.segment(seg)?.write(0, &[me.0 as u64])?;
//!
//! // Send our rank to the right neighbour's slot 8, with notification 0 = 1.
//! let right = Rank((me.0 + 1) % n);
//! ctx.write_notify(Local::new(seg, 0), Remote::new(right, seg, 8), 8, NotificationId(0), 1, QueueId(0))?;
//! let id = ctx.notify_waitsome(seg, NotificationId(0), 1, Timeout::ms(10_000))?;
//! ctx.notify_reset(seg, id)?;
//! let from_left: u64 = ctx.segment(seg)?.get(8)?;
//! assert_eq!(from_left, u64::from((me.0 + n - 1) % n));
//! ctx.wait(QueueId(0), Timeout::BLOCK)?;
//! ctx.barrier(Group::ALL, Timeout::BLOCK)?;
//! ctx.term(Timeout::BLOCK)
//! # }
//! ```
//!
//! Every blocking call takes a [`Timeout`] (`Timeout::TEST`, `Timeout::BLOCK` or
//! milliseconds) and can be called again after [`Error::Timeout`]; a failed peer turns into
//! [`Error::PeerFailed`] and is marked corrupt in [`Context::state_vec`]. As in GPI-2, posting
//! to a failed peer (`write`, `read`, `notify`, ...) succeeds and the queue's next `wait`
//! reports it.

// The layers, lowest first; a file imports only from its own layer and those below
// (checked by `tests/tests/layering/`; `docs/architecture.md` draws them).
//
// Foundation: ids, errors, configuration, environment, clocks, counters.
mod backoff;
pub mod clock;
pub mod config;
mod counters;
pub mod env;
pub mod error;
pub mod log;
mod state;
pub mod topology;
pub mod types;
// Where remote operations land: segment memory, the segment table, the passive inbox.
mod memory;
// The bytes on a connection: frame header, hello, control messages, message framing.
mod wire;
// How bytes travel: the `Transport` trait and its shared-memory, TCP and verbs transports.
mod transport;
// What ranks tell each other about the job: segment registration, passive, ping, goodbye.
mod control;
// Start-up: rendezvous, route choice, verbs set-up.
mod runtime;
// The public API, thin over the layers above.
mod atomic;
mod context;
mod group;
mod notify;
mod onesided;
mod passive;
mod queue;
mod reduce;
mod segment;
mod statistics;
#[cfg(feature = "testing")]
pub mod testing;

pub use config::Config;
pub use context::{version, Context};
pub use counters::Counter;
pub use error::{error_str, Error, Result};
pub use onesided::{ListElem, Local, Remote};
pub use reduce::{Reducible, UserReduce};
pub use segment::Segment;
pub use topology::Topology;
pub use types::*;
