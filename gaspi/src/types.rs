//! Identifier newtypes and small enums of the GASPI interface.

use std::fmt;
use std::time::{Duration, Instant};

macro_rules! id_type {
    ($(#[$m:meta])* $name:ident($inner:ty)) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(pub $inner);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl From<$inner> for $name {
            fn from(v: $inner) -> Self {
                $name(v)
            }
        }
    };
}

id_type!(
    /// A process in the job, `0..nranks`.
    Rank(u16)
);
id_type!(
    /// A segment id, `0..segment_max`.
    SegmentId(u8)
);
id_type!(
    /// A communication queue, `0..queue_num`.
    QueueId(u8)
);
id_type!(
    /// A notification slot of a segment, `0..notification_num`.
    NotificationId(u32)
);
id_type!(
    /// A group of ranks. [`Group::ALL`] holds every rank and exists from init.
    Group(u8)
);

impl Group {
    /// `GASPI_GROUP_ALL`.
    pub const ALL: Group = Group(0);
}

impl Rank {
    /// The rank as an index into per-rank tables (e.g. [`Context::state_vec`](crate::Context::state_vec)).
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

/// How long a blocking call may wait: [`Timeout::TEST`] checks once, [`Timeout::BLOCK`] waits
/// for ever, anything else is milliseconds (the GASPI convention).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timeout(pub u64);

impl Timeout {
    /// `GASPI_TEST`: do not wait.
    pub const TEST: Timeout = Timeout(0);
    /// `GASPI_BLOCK`: wait for ever.
    pub const BLOCK: Timeout = Timeout(u64::MAX);

    /// A timeout of `ms` milliseconds. `ms(0)` is [`Timeout::TEST`] and `ms(u64::MAX)` is
    /// [`Timeout::BLOCK`], as in the C interface.
    pub const fn ms(ms: u64) -> Timeout {
        Timeout(ms)
    }

    /// The instant at which a call started now must give up; never for [`Timeout::BLOCK`],
    /// at once for [`Timeout::TEST`] (without reading the clock: polling calls are hot).
    pub fn deadline(self) -> Deadline {
        match self {
            Timeout::BLOCK => Deadline::NEVER,
            Timeout::TEST => Deadline::NOW,
            Timeout(ms) => Deadline::after(Duration::from_millis(ms)),
        }
    }
}

impl From<Duration> for Timeout {
    fn from(d: Duration) -> Self {
        Timeout(
            u64::try_from(d.as_millis())
                .unwrap_or(u64::MAX - 1)
                .min(u64::MAX - 1),
        )
    }
}

/// An absolute deadline: what a [`Timeout`] becomes when a call starts, so that a call made of
/// several waits gives up at one instant. "Now" (a [`Timeout::TEST`] call) and "never" are
/// kept apart from instants, so that polling and blocking calls never read the clock for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadline(When);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum When {
    Now,
    At(Instant),
    Never,
}

impl Deadline {
    /// A deadline that never passes ([`Timeout::BLOCK`]).
    pub const NEVER: Deadline = Deadline(When::Never);

    /// A deadline that has passed already: do not block ([`Timeout::TEST`]).
    pub const NOW: Deadline = Deadline(When::Now);

    /// `d` from now (never, if that is past the clock's range).
    pub fn after(d: Duration) -> Self {
        match Instant::now().checked_add(d) {
            Some(t) => Deadline(When::At(t)),
            None => Deadline::NEVER,
        }
    }

    /// At `instant`.
    pub fn at(instant: Instant) -> Self {
        Deadline(When::At(instant))
    }

    /// Whether this is [`Deadline::NEVER`].
    pub fn is_never(&self) -> bool {
        self.0 == When::Never
    }

    /// Whether the deadline has passed.
    pub fn expired(&self) -> bool {
        match self.0 {
            When::Now => true,
            When::At(t) => Instant::now() >= t,
            When::Never => false,
        }
    }

    /// Time left, `None` = unbounded.
    pub fn remaining(&self) -> Option<Duration> {
        match self.0 {
            When::Now => Some(Duration::ZERO),
            When::At(t) => Some(t.saturating_duration_since(Instant::now())),
            When::Never => None,
        }
    }

    /// The time left as a [`Timeout`] for a blocking call, rounded up to whole milliseconds
    /// (so a deadline not yet passed never becomes [`Timeout::TEST`] early).
    pub fn timeout(&self) -> Timeout {
        match self.0 {
            When::Now => Timeout::TEST,
            When::Never => Timeout::BLOCK,
            When::At(t) => {
                let left = t.saturating_duration_since(Instant::now());
                Timeout(
                    u64::try_from(left.as_micros().div_ceil(1000))
                        .unwrap_or(u64::MAX - 1)
                        .min(u64::MAX - 1),
                )
            }
        }
    }
}

#[cfg(test)]
mod deadline_tests {
    use super::*;

    #[test]
    fn test_and_block_need_no_clock_and_instants_round_up() {
        assert_eq!(Timeout::TEST.deadline(), Deadline::NOW);
        assert!(Deadline::NOW.expired());
        assert_eq!(Deadline::NOW.timeout(), Timeout::TEST);
        assert_eq!(Deadline::NOW.remaining(), Some(Duration::ZERO));
        assert_eq!(Timeout::BLOCK.deadline(), Deadline::NEVER);
        assert!(!Deadline::NEVER.expired() && Deadline::NEVER.is_never());
        assert_eq!(Deadline::NEVER.timeout(), Timeout::BLOCK);
        let d = Timeout::ms(5_000).deadline();
        assert!(!d.expired());
        assert!(
            (4_990..=5_000).contains(&d.timeout().0),
            "{:?}",
            d.timeout()
        );
        assert!(Deadline::after(Duration::from_micros(1)).timeout().0 <= 1);
        assert!(Deadline::at(Instant::now()).expired());
    }
}

/// Reduction operation of the small group allreduce (`gaspi_operation_t`); the
/// discriminants are the C values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// `GASPI_OP_MIN`: element-wise minimum.
    Min = 0,
    /// `GASPI_OP_MAX`: element-wise maximum.
    Max = 1,
    /// `GASPI_OP_SUM`: element-wise sum; integers wrap on overflow, floating-point sums
    /// depend on the order of the group's reduction tree.
    Sum = 2,
}

/// Element type of the small group allreduce (`gaspi_datatype_t`); the discriminants are
/// the C values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElementType {
    /// `GASPI_TYPE_INT`: `i32`.
    I32 = 0,
    /// `GASPI_TYPE_UINT`: `u32`.
    U32 = 1,
    /// `GASPI_TYPE_FLOAT`: `f32`.
    F32 = 2,
    /// `GASPI_TYPE_DOUBLE`: `f64`.
    F64 = 3,
    /// `GASPI_TYPE_LONG`: `i64`.
    I64 = 4,
    /// `GASPI_TYPE_ULONG`: `u64`.
    U64 = 5,
}

impl ElementType {
    /// Bytes of one element (4 or 8): an allreduce buffer must be a multiple of it.
    pub fn size(self) -> usize {
        match self {
            ElementType::I32 | ElementType::U32 | ElementType::F32 => 4,
            ElementType::F64 | ElementType::I64 | ElementType::U64 => 8,
        }
    }
}

/// Health of a peer as seen by this rank (`gaspi_state_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerState {
    /// `GASPI_STATE_HEALTHY`: no failure seen on the connection to this rank.
    Healthy = 0,
    /// `GASPI_STATE_CORRUPT`: the connection failed or the peer broke the protocol; calls
    /// that need this rank fail with [`Error::PeerFailed`](crate::Error::PeerFailed). Stays
    /// set for the rest of the job.
    Corrupt = 1,
}

/// The network of a job (`gaspi_network_t`): [`Config::network`](crate::Config::network)
/// and [`Context::network_type`](crate::Context::network_type). The discriminants are the C
/// values. Only `Ib`, `Roce` and `Ethernet` are accepted in a configuration; the others exist
/// for source compatibility with GPI-2 and are refused by
/// [`Config::validate`](crate::Config::validate).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetworkType {
    /// `GASPI_IB`: InfiniBand verbs.
    Ib = 0,
    /// `GASPI_ROCE`: verbs over RDMA-capable Ethernet (RoCE).
    Roce = 1,
    /// `GASPI_ETHERNET`: TCP sockets (and shared memory between ranks of one host).
    Ethernet = 2,
    /// `GASPI_GEMINI`: Cray Gemini. Not supported.
    Gemini = 3,
    /// `GASPI_ARIES`: Cray Aries. Not supported.
    Aries = 4,
    /// `GASPI_OFI`: libfabric. Not supported.
    Ofi = 5,
}

/// Whether new segment memory is zeroed (`gaspi_alloc_t`). Our memory always comes from
/// fresh mappings, so it is zeroed either way; the flag is kept for source compatibility.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Alloc {
    /// `GASPI_MEM_UNINITIALIZED`: no zeroing requested (the memory is zero anyway).
    #[default]
    Uninitialized = 0,
    /// `GASPI_MEM_INITIALIZED`: the segment starts zeroed.
    Initialized = 1,
}

/// A remote atomic operation on an 8-byte aligned `u64` of a segment; both return the
/// word's previous value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicOp {
    /// `gaspi_atomic_fetch_add`: adds to the word, wrapping on overflow.
    FetchAdd {
        /// The value added.
        add: u64,
    },
    /// `gaspi_atomic_compare_swap`: replaces the word when it equals `expected`.
    CompareSwap {
        /// The value the word must hold for the swap to happen (`comparator`).
        expected: u64,
        /// The value stored when it does (`val_new`).
        new: u64,
    },
}

/// Segment key inside the runtime: user segments `0..=254` (their [`SegmentId`]), internal
/// ones (group collectives) from [`INTERNAL_BASE`]. Also the segment field of a frame.
pub(crate) type SegKey = u16;

/// The first key of the runtime's internal segments.
pub(crate) const INTERNAL_BASE: SegKey = 256;
